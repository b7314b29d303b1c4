//! Raw SSE bytes through the OpenAiChat decoder: typed errors, never a panic, and the same events,
//! errors and final message at two chunkings, through direct event pushes, in accumulate-only
//! mode (see `ferroloop_fuzz::check_decode_stream`).
#![no_main]

use ferroloop::decode::Provider;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ferroloop_fuzz::check_decode_stream(Provider::OpenAiChat, data);
});
