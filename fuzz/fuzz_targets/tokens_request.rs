//! Request token estimation on arbitrary JSON and generated request shapes (see
//! `ferroloop_fuzz::check_request_estimate`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ferroloop_fuzz::check_request_estimate(data);
});
