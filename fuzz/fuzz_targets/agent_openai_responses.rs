//! Raw Responses SSE through the decoder and the agent loop's translation into the Anthropic
//! shape: blocks in order, the final message agreeing with the stream, every call reported once
//! (see `ferroloop_fuzz::check_responses_translation`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ferroloop_fuzz::check_responses_translation(data);
});
