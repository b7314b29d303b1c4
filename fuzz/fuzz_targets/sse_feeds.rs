//! SSE parser entry points mixed freely: owned feeds drained or left pending, `feed_slice`,
//! `feed_with`, `feed_borrowed` and `feed_borrowed_until` stopping early, at fuzzer-chosen chunk
//! sizes and size limits, all give the items, state and `finish` result of one owned feed of the
//! whole input (see `ferroloop_fuzz::check_sse_feeds`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ferroloop_fuzz::check_sse_feeds(data);
});
