//! The token estimator on arbitrary bytes, valid UTF-8 or not (see
//! `ferroloop_fuzz::check_token_estimator`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ferroloop_fuzz::check_token_estimator(data);
});
