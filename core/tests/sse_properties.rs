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

/// Streams with long lines too (past the parser's 1 KiB shared-piece threshold) and `id` lines,
/// for feeds in chunks of any size.
fn sse_with_long_lines() -> impl Strategy<Value = Vec<u8>> {
    let part = prop_oneof![
        6 => sse_like(),
        1 => (1000usize..2600, prop::bool::ANY).prop_map(|(len, wide)| {
            let unit: &[u8] = if wide { "é日🌍".as_bytes() } else { b"x" };
            let mut line = b"data: ".to_vec();
            while line.len() < len {
                line.extend_from_slice(unit);
            }
            line.push(b'\n');
            line
        }),
        1 => Just(b"id: 42\nevent: named\ndata: {\"a\":1}\n\n".to_vec()),
    ];
    prop::collection::vec(part, 0..6).prop_map(|parts| parts.concat())
}

/// What a parse gave: items as JSON, their owned forms, last event id, dropped events and
/// whether `finish` discarded anything.
type MixedOutcome = (
    Vec<serde_json::Value>,
    Vec<ferroloop::sse::SseOwnedItem>,
    String,
    u64,
    bool,
);

/// Items (as JSON, and their owned forms), last event id, dropped events and whether `finish`
/// discarded anything, with the scanning work apart (it may differ between the two kinds of
/// feed: an owned chunk that continues a long line is searched once more when the line ends), for `input` fed in the given chunk sizes (cycled); a
/// chunk is fed borrowed (from a scratch buffer overwritten after the call, so anything still
/// pointing into it would read garbage) when its entry in `borrowed` (cycled) is set.
fn parse_mixed(
    config: SseConfig,
    input: &[u8],
    sizes: &[usize],
    borrowed: &[bool],
) -> (MixedOutcome, u64) {
    let mut parser = SseParser::with_config(config);
    let (mut items, mut owned) = (Vec::new(), Vec::new());
    let mut scratch = Vec::new();
    let (mut pos, mut turn) = (0, 0);
    while pos < input.len() {
        let end = (pos + sizes[turn % sizes.len()].max(1)).min(input.len());
        let part = &input[pos..end];
        if borrowed[turn % borrowed.len()] {
            scratch.clear();
            scratch.extend_from_slice(part);
            parser.feed_borrowed(&scratch, |item| {
                items.push(common::item_json(&item));
                owned.push(item.to_owned());
            });
            scratch.fill(b'#');
        } else {
            parser.feed(Bytes::copy_from_slice(part));
            while let Some(item) = parser.next_item() {
                items.push(common::item_json(&item));
                owned.push(item.to_owned());
            }
        }
        turn += 1;
        pos = end;
    }
    let id = parser.last_event_id().to_owned();
    let discarded = parser.finish();
    let outcome = (items, owned, id, parser.dropped_events(), discarded);
    (outcome, parser.bytes_scanned())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Borrowed feeds give exactly what feeds of owned copies give, at any chunking, mixed with
    /// owned feeds in any order, with or without a size cap.
    #[test]
    fn borrowed_feeds_match_owned_feeds(
        input in sse_with_long_lines(),
        sizes in prop::collection::vec(prop_oneof![1usize..40, 1usize..3000], 1..6),
        borrowed in prop::collection::vec(prop::bool::weighted(0.7), 1..5),
        limit in prop::option::weighted(0.2, 1usize..3000),
    ) {
        let config = SseConfig::default().max_event_bytes(limit);
        let (owned, owned_work) = parse_mixed(config.clone(), &input, &sizes, &[false]);
        for pattern in [&borrowed[..], &[true]] {
            let (outcome, work) = parse_mixed(config.clone(), &input, &sizes, pattern);
            prop_assert_eq!(&outcome, &owned);
            // Still linear: never more work than the owned feeds' (which search a long line's
            // chunks once more).
            prop_assert!(work <= owned_work, "{} > {}", work, owned_work);
        }
    }
}

/// Items (as JSON) for `input` fed borrowed in the given chunk sizes (cycled), the callback
/// stopping the delivery after the number of items `stops` (cycled) gives for each feed; the
/// items left pending are drained with `next_item` after every other stopped feed and
/// otherwise left to the next feed, which delivers them first.
fn parse_stopping(
    config: SseConfig,
    input: &[u8],
    sizes: &[usize],
    stops: &[usize],
) -> (Vec<serde_json::Value>, u64, bool) {
    let mut parser = SseParser::with_config(config);
    let mut items = Vec::new();
    let mut scratch = Vec::new();
    let (mut pos, mut turn) = (0, 0);
    while pos < input.len() {
        let end = (pos + sizes[turn % sizes.len()].max(1)).min(input.len());
        scratch.clear();
        scratch.extend_from_slice(&input[pos..end]);
        let stop_after = stops[turn % stops.len()];
        let mut delivered = 0;
        let flow = parser.feed_borrowed_until(&scratch, |item| {
            items.push(common::item_json(&item));
            delivered += 1;
            if delivered >= stop_after {
                std::ops::ControlFlow::Break(())
            } else {
                std::ops::ControlFlow::Continue(())
            }
        });
        // Anything still pointing into the caller's buffer would now read garbage.
        scratch.fill(b'#');
        if flow.is_break() && turn % 2 == 0 {
            while let Some(item) = parser.next_item() {
                items.push(common::item_json(&item));
            }
        }
        turn += 1;
        pos = end;
    }
    while let Some(item) = parser.next_item() {
        items.push(common::item_json(&item));
    }
    let discarded = parser.finish();
    (items, parser.dropped_events(), discarded)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A callback that stops the delivery loses nothing: the items not delivered come out of
    /// `next_item` or the next feed, in order, whatever the chunking and wherever it stops.
    #[test]
    fn stopped_borrowed_feeds_lose_nothing(
        input in sse_with_long_lines(),
        sizes in prop::collection::vec(prop_oneof![1usize..40, 1usize..3000], 1..6),
        stops in prop::collection::vec(1usize..4, 1..5),
        limit in prop::option::weighted(0.2, 1usize..3000),
    ) {
        let config = SseConfig::default().max_event_bytes(limit);
        let (owned, _) = parse_mixed(config.clone(), &input, &sizes, &[false]);
        let (items, dropped, discarded) = parse_stopping(config, &input, &sizes, &stops);
        prop_assert_eq!(&items, &owned.0);
        prop_assert_eq!(dropped, owned.3);
        prop_assert_eq!(discarded, owned.4);
    }
}
