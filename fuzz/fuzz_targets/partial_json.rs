//! The incremental partial-JSON view on arbitrary text in arbitrary fragments (see
//! `ferroloop_fuzz::check_partial_json`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ferroloop_fuzz::check_partial_json(data);
});
