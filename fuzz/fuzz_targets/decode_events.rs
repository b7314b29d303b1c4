//! Structured event sequences (protocol event types, JSON built from the protocols' own keys and
//! values) through every provider's decoder (see `ferroloop_fuzz::check_decode_events`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ferroloop_fuzz::check_decode_events(data);
});
