//! Tool input schemas and inputs made of the validator's own keywords (see
//! `ferroloop_fuzz::check_input_schema`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ferroloop_fuzz::check_input_schema(data);
});
