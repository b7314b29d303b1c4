//! Comment lines (`: …`) belong to no event: they never count toward `max_event_bytes`, and
//! they are counted in `comments()` when their line ends, at any chunking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use bytes::Bytes;
use ferroloop::sse::{SseConfig, SseParser};
use proptest::prelude::*;

/// Items (as the CLI prints them), dropped events and comments of a parse of `input` in chunks
/// of `size` bytes.
fn parse_capped(
    input: &[u8],
    size: usize,
    limit: Option<usize>,
) -> (Vec<serde_json::Value>, u64, u64) {
    let mut parser = SseParser::with_config(SseConfig::default().max_event_bytes(limit));
    let mut out = Vec::new();
    for part in input.chunks(size.max(1)) {
        parser.feed(Bytes::copy_from_slice(part));
        while let Some(item) = parser.next_item() {
            out.push(common::item_json(&item));
        }
    }
    parser.finish();
    (out, parser.dropped_events(), parser.comments())
}

fn event(data: &str) -> serde_json::Value {
    serde_json::json!({"event": "message", "data": data, "id": ""})
}

/// The auditor's reproduction (`ferroloop sse --max-event-bytes 100`): a 300-byte comment
/// before, or inside, a small event dropped that event.
#[test]
fn a_long_comment_does_not_count_toward_the_event_cap() {
    let comment = format!(": {}", "c".repeat(300));
    let cases = [
        (format!("{comment}\ndata: y\n\n"), "y"),
        (format!("data: x\n{comment}\ndata: y\n\n"), "x\ny"),
        // CR and CRLF line ends, and a BOM before the comment.
        (format!("\u{feff}{comment}\r\ndata: y\r\n\r\n"), "y"),
        (format!("data: x\r{comment}\rdata: y\r\r"), "x\ny"),
    ];
    for (input, data) in &cases {
        let input = input.as_bytes();
        for size in [input.len(), 1, 2, 3, 7, 16, 17, 64, 301, 1460] {
            let got = parse_capped(input, size, Some(100));
            assert_eq!(got, (vec![event(data)], 0, 1), "{size}-byte chunks");
        }
    }
}

/// The cap still applies to the event's own lines around a comment.
#[test]
fn the_cap_still_counts_data_around_a_comment() {
    let input = format!(
        "data: {}\n: {}\ndata: {}\n\ndata: ok\n\n",
        "a".repeat(60),
        "c".repeat(500),
        "b".repeat(60)
    );
    for size in [input.len(), 1, 7, 64, 1460] {
        let got = parse_capped(input.as_bytes(), size, Some(100));
        assert_eq!(got, (vec![event("ok")], 1, 1), "{size}-byte chunks");
    }
}

/// A client's idle watchdog reads `comments()` as a keep-alive signal: a comment is counted
/// once its line has ended (CR, LF or CRLF, split anywhere), never before.
#[test]
fn a_comment_is_counted_when_its_line_ends() {
    let cases: [(&[&[u8]], &[u64]); 5] = [
        (&[b": keep", b"-alive", b"\n"], &[0, 0, 1]),
        (&[b":", b" x", b"\r", b"\n"], &[0, 0, 1, 1]),
        (&[b"\xEF\xBB", b"\xBF:", b"x\r\n", b": y\n"], &[0, 0, 1, 2]),
        (&[b"data: a\n", b":", b"\r", b":\n\n"], &[0, 0, 1, 2]),
        (
            &[b"data: a\n\n:", b"0123456789012345678901234", b"\n"],
            &[0, 0, 1],
        ),
    ];
    for (parts, counts) in cases {
        let mut parser = SseParser::new();
        for (part, count) in parts.iter().zip(counts) {
            parser.feed(Bytes::copy_from_slice(part));
            while parser.next_item().is_some() {}
            assert_eq!(parser.comments(), *count, "{parts:?}: after {part:?}");
        }
    }
}

/// A stream to put comment lines into: lines of the fields that matter, with LF ends (a
/// comment line goes after any LF without changing the lines around it).
fn lines() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let line = prop_oneof![
        Just(Vec::new()),
        "data: [a-z ]{0,30}".prop_map(String::into_bytes),
        "event: [a-z]{0,10}".prop_map(String::into_bytes),
        "id: [0-9]{0,4}".prop_map(String::into_bytes),
        Just(b"retry: 5".to_vec()),
        "[a-z]{1,6}".prop_map(String::into_bytes),
    ];
    prop::collection::vec(line, 0..24)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Comment lines of any length, anywhere, change nothing but the comment count, under any
    /// cap and at any chunking.
    #[test]
    fn comments_never_change_a_capped_parse(
        lines in lines(),
        comments in prop::collection::vec((any::<prop::sample::Index>(), 0usize..300), 0..6),
        size in 1usize..40,
        limit in 1usize..80,
    ) {
        let plain: Vec<u8> = lines.iter().flat_map(|line| [&line[..], b"\n"].concat()).collect();
        let mut with: Vec<Vec<u8>> = lines.iter().map(|line| [&line[..], b"\n"].concat()).collect();
        for (at, len) in &comments {
            let comment = [&b":"[..], &vec![b'c'; *len], b"\n"].concat();
            with.insert(at.index(with.len() + 1), comment);
        }
        let with = with.concat();
        let (items, dropped, _) = parse_capped(&plain, plain.len().max(1), Some(limit));
        for chunk in [size, with.len().max(1)] {
            let (got_items, got_dropped, _) = parse_capped(&with, chunk, Some(limit));
            prop_assert_eq!(&got_items, &items, "{}-byte chunks", chunk);
            prop_assert_eq!(got_dropped, dropped);
        }
    }
}

/// An unterminated comment at the end of a stream is discarded like any unterminated line
/// (`finish` reports it), and the next stream starts clean.
#[test]
fn finish_discards_an_open_comment() {
    let mut parser = SseParser::new();
    parser.feed(Bytes::from_static(b"data: a\n\n: never ends"));
    while parser.next_item().is_some() {}
    assert!(parser.finish());
    assert_eq!(parser.comments(), 0);
    parser.feed(Bytes::from_static(b"data: b\n\n"));
    let data = match parser.next_item() {
        Some(ferroloop::sse::SseItem::Event(event)) => event.data().to_owned(),
        _ => String::new(),
    };
    assert_eq!(data, "b");
    assert!(!parser.finish());
}

/// Blank lines that dispatch nothing (an extra blank line, fields without data) are counted in
/// `empty_dispatches()`, once each, at any chunking and with any line ending; the blank line
/// that ends an event is not, nor is the one ending an event dropped for its size. A client
/// counts them as keep-alives (some servers send a bare blank line instead of a comment).
#[test]
fn blank_lines_that_dispatch_nothing_are_counted() {
    let input = "data: a\n\n\n\n: c\n\nevent: ping\n\nid: 7\r\n\r\n\rdata: b\r\n\r\n";
    for size in 1..=input.len() {
        let mut parser = SseParser::new();
        let mut events = 0;
        for part in input.as_bytes().chunks(size) {
            parser.feed(Bytes::copy_from_slice(part));
            while parser.next_item().is_some() {
                events += 1;
            }
        }
        parser.finish();
        assert_eq!(events, 2, "{size}-byte chunks");
        // `\n\n` after `a`'s end, the blank line after the comment, after `event: ping`,
        // after `id: 7`, and the lone `\r`.
        assert_eq!(parser.empty_dispatches(), 6, "{size}-byte chunks");
        assert_eq!(parser.comments(), 1);
    }
    let mut capped = SseParser::with_config(SseConfig::default().max_event_bytes(Some(4)));
    capped.feed(Bytes::from_static(b"data: too long\n\n\n"));
    while capped.next_item().is_some() {}
    assert_eq!(capped.dropped_events(), 1);
    assert_eq!(capped.empty_dispatches(), 1);
}
