//! Property tests: chunk invariance and no panic on any input.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use bytes::Bytes;
use ferroloop::sse::{SseConfig, SseParser};
use proptest::prelude::*;

use common::parse_chunked;

/// Streams made of the bytes that matter to the grammar, so random inputs hit real structure.
fn sse_like() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        Just(b"data:".to_vec()),
        Just(b"data: ".to_vec()),
        Just(b"event:".to_vec()),
        Just(b"id:".to_vec()),
        Just(b"retry:".to_vec()),
        Just(b":".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\xEF\xBB\xBF".to_vec()),
        Just("世界🌍".as_bytes().to_vec()),
        Just(b"\xff\xc3".to_vec()),
        Just(b"\0".to_vec()),
        Just(b"123".to_vec()),
        "[a-z ]{0,8}".prop_map(String::into_bytes),
    ];
    prop::collection::vec(token, 0..60).prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn chunking_never_changes_the_events(input in sse_like(), sizes in prop::collection::vec(1usize..17, 1..8)) {
        let whole = parse_chunked(&input, &[input.len().max(1)]);
        prop_assert_eq!(parse_chunked(&input, &sizes), whole);
    }

    #[test]
    fn arbitrary_bytes_never_panic(input in prop::collection::vec(any::<u8>(), 0..512), size in 1usize..64) {
        let whole = parse_chunked(&input, &[input.len().max(1)]);
        prop_assert_eq!(parse_chunked(&input, &[size]), whole);
    }

    #[test]
    fn size_limit_is_chunk_invariant(input in sse_like(), size in 1usize..9, limit in 1usize..40) {
        let run = |chunk: usize| {
            let mut parser = SseParser::with_config(SseConfig::default().max_event_bytes(Some(limit)));
            let mut out = Vec::new();
            for part in input.chunks(chunk) {
                parser.feed(Bytes::copy_from_slice(part));
                while let Some(item) = parser.next_item() {
                    out.push(common::item_json(&item));
                }
            }
            parser.finish();
            (out, parser.dropped_events())
        };
        prop_assert_eq!(run(size), run(input.len().max(1)));
    }
}
