//! Valid Anthropic histories, built from the fuzzer's bytes, through the agent loop's request
//! translations for OpenAI Chat Completions and Responses: every call, result and text goes out
//! once and in order (see `ferroloop_fuzz::check_request_translation`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ferroloop_fuzz::check_request_translation(data);
});
