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

/// Streams made mostly of whole events of the usual shape (`event:`, `data:`, blank line) and
/// their near misses: CR and CRLF line ends, non-ASCII and invalid values, `id:` lines after
/// the data, several data lines, missing blank lines.
fn usual_events() -> impl Strategy<Value = Vec<u8>> {
    let eol = prop_oneof![
        6 => Just(b"\n".to_vec()),
        1 => Just(b"\r".to_vec()),
        1 => Just(b"\r\n".to_vec()),
    ];
    let value = prop_oneof![
        4 => "[a-z{}\":, ]{0,40}".prop_map(String::into_bytes),
        1 => Just("日本語🌍 text".as_bytes().to_vec()),
        1 => Just(b"bad \xff\xc3 bytes".to_vec()),
        1 => Just(Vec::new()),
    ];
    let name = prop_oneof![
        Just(b"event:".to_vec()),
        Just(b"event: ".to_vec()),
        Just(b"data:".to_vec()),
        Just(b"data: ".to_vec()),
        Just(b"data:  ".to_vec()),
        Just(b"id: ".to_vec()),
        Just(b": ".to_vec()),
        Just(b"eve".to_vec()),
        Just(b"dat".to_vec()),
        Just(Vec::new()),
    ];
    let line = (name, value, eol).prop_map(|(name, value, eol)| [name, value, eol].concat());
    prop::collection::vec(line, 0..40).prop_map(|lines| lines.concat())
}

/// Items, last event id and scanning work of a parse of `input` in chunks of `size`.
fn parse_with(
    config: SseConfig,
    input: &[u8],
    size: usize,
) -> (Vec<serde_json::Value>, String, u64) {
    let mut parser = SseParser::with_config(config);
    let mut out = Vec::new();
    for part in input.chunks(size.max(1)) {
        parser.feed(Bytes::copy_from_slice(part));
        while let Some(item) = parser.next_item() {
            out.push(common::item_json(&item));
        }
    }
    let id = parser.last_event_id().to_owned();
    (out, id, parser.bytes_scanned())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Events of the usual shape are read in one step when no size cap is set; with a cap
    /// (here one no event reaches) every line goes through the line loop. Both must agree on
    /// the items and on the work counted.
    #[test]
    fn usual_events_read_in_one_step_match_the_line_loop(input in usual_events(), size in 1usize..200) {
        let line_loop = SseConfig::default().max_event_bytes(Some(usize::MAX));
        for size in [size, input.len().max(1)] {
            prop_assert_eq!(
                parse_with(SseConfig::default(), &input, size),
                parse_with(line_loop.clone(), &input, size)
            );
        }
    }
}
