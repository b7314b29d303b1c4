//! The agent loop against a model streaming the fuzzer's raw SSE (Anthropic, OpenAI Chat or
//! Responses): one stop event, and a conversation that can be continued (see
//! `ferroloop_fuzz::check_agent_stream`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ferroloop_fuzz::check_agent_stream(data);
});
