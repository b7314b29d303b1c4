//! SSE parser: arbitrary bytes at an arbitrary chunking never panic, and the events never depend
//! on how the input was split.
#![no_main]

use bytes::Bytes;
use ferroloop::sse::{SseConfig, SseOwnedItem, SseParser};
use libfuzzer_sys::fuzz_target;

fn parse(input: &[u8], sizes: &[u8], limit: Option<usize>) -> (Vec<SseOwnedItem>, u64) {
    let mut parser = SseParser::with_config(SseConfig::default().max_event_bytes(limit));
    let mut items = Vec::new();
    let mut pos = 0;
    let mut turn = 0;
    while pos < input.len() {
        let size = sizes
            .get(turn % sizes.len().max(1))
            .map_or(input.len(), |s| usize::from(*s).max(1));
        turn += 1;
        let end = (pos + size).min(input.len());
        parser.feed(Bytes::copy_from_slice(&input[pos..end]));
        while let Some(item) = parser.next_item() {
            items.push(item.to_owned());
        }
        pos = end;
    }
    parser.finish();
    // Linear work, whatever the input and the chunking.
    assert!(parser.bytes_scanned() <= 2 * input.len() as u64 + 8 * (input.len() as u64 + 1));
    (items, parser.dropped_events())
}

fuzz_target!(|data: &[u8]| {
    // The first bytes choose the chunk sizes and an optional size limit; the rest is the stream.
    let (control, input) = data.split_at(data.len().min(9));
    let (limit_byte, sizes) = control.split_first().unwrap_or((&0, &[]));
    let limit = (*limit_byte > 200).then(|| usize::from(*limit_byte - 200) * 4);
    let whole = parse(input, &[], limit);
    let split = parse(input, sizes, limit);
    assert_eq!(whole, split);
});
