//! The last event id, against the WHATWG model: an `id` field sets the "last event ID buffer";
//! the buffer becomes the "last event ID string" (what an event carries, what a reconnection
//! sends, what `last_event_id` returns) only when a blank line dispatches, with or without data;
//! at the end of the stream the unterminated event, its `id` included, is discarded.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use ferroloop::sse::{SseConfig, SseItem, SseParser};
use proptest::prelude::*;

/// Feeds `input`, returning the ids of the events it completed.
fn feed_ids(parser: &mut SseParser, input: &[u8]) -> Vec<String> {
    parser.feed(Bytes::copy_from_slice(input));
    let mut ids = Vec::new();
    while let Some(item) = parser.next_item() {
        if let SseItem::Event(event) = item {
            ids.push(event.id().to_owned());
        }
    }
    ids
}

#[test]
fn an_id_in_an_unterminated_event_is_discarded_at_finish() {
    let mut parser = SseParser::new();
    assert_eq!(feed_ids(&mut parser, b"data: a\n\nid: 7\n"), [""]);
    // Mid-event: the id is only buffered; a reconnection now would still send "".
    assert_eq!(parser.last_event_id(), "");
    assert!(parser.finish());
    assert_eq!(parser.last_event_id(), "");
    assert_eq!(feed_ids(&mut parser, b"data: b\n\n"), [""]);
    assert_eq!(parser.last_event_id(), "");
}

#[test]
fn a_lone_unterminated_id_is_discarded_at_finish() {
    let mut parser = SseParser::new();
    assert_eq!(feed_ids(&mut parser, b"id: 1\ndata: a\n\n"), ["1"]);
    assert!(feed_ids(&mut parser, b"id: 7\n").is_empty());
    assert_eq!(parser.last_event_id(), "1");
    assert!(parser.finish());
    // Back to the last dispatched value, for the next stream too.
    assert_eq!(parser.last_event_id(), "1");
    assert_eq!(feed_ids(&mut parser, b"data: b\n\n"), ["1"]);
}

#[test]
fn a_blank_line_without_data_still_commits_the_id() {
    // "Set the last event ID string to the value of the last event ID buffer" is the first step
    // of dispatching, before "if the data buffer is empty, return".
    let mut parser = SseParser::new();
    assert!(feed_ids(&mut parser, b"id: 7\n\n").is_empty());
    assert_eq!(parser.last_event_id(), "7");
    assert!(!parser.finish());
    assert_eq!(parser.last_event_id(), "7");
    assert_eq!(feed_ids(&mut parser, b"data: b\n\n"), ["7"]);
}

#[test]
fn the_id_is_committed_when_its_event_is_dispatched() {
    let mut parser = SseParser::new();
    assert!(feed_ids(&mut parser, b"id: 7\ndata: x\n").is_empty());
    assert_eq!(parser.last_event_id(), "");
    assert_eq!(feed_ids(&mut parser, b"\n"), ["7"]);
    assert_eq!(parser.last_event_id(), "7");
    // An empty id resets, at its event's dispatch.
    assert!(feed_ids(&mut parser, b"id\ndata: y\n").is_empty());
    assert_eq!(parser.last_event_id(), "7");
    assert_eq!(feed_ids(&mut parser, b"\n"), [""]);
    assert_eq!(parser.last_event_id(), "");
}

#[test]
fn the_id_of_an_event_dropped_for_its_size_is_committed_by_its_blank_line() {
    // The cap drops the event's data, not its processed `id` field: the blank line that ends
    // the dropped event is still a dispatch step. Lines after the drop point are ignored.
    let config = SseConfig::default().max_event_bytes(Some(16));
    let mut parser = SseParser::with_config(config);
    let ids = feed_ids(
        &mut parser,
        b"id: 5\ndata: this line is far too long\nid: 6\n\ndata: ok\n\n",
    );
    assert_eq!(ids, ["5"]);
    assert_eq!(parser.dropped_events(), 1);
    assert_eq!(parser.last_event_id(), "5");
}

/// The WHATWG algorithm, literally, for ASCII streams without a BOM: the last event ID string
/// after the complete lines of `input` (the text after the last line end is an unfinished line,
/// never processed), and the ids of the events dispatched.
fn model(input: &[u8]) -> (String, Vec<String>) {
    let (mut buffer, mut string) = (String::new(), String::new());
    let mut has_data = false;
    let mut ids = Vec::new();
    let mut lines = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < input.len() {
        match input[i] {
            b'\r' | b'\n' => {
                lines.push(&input[start..i]);
                i += if input[i] == b'\r' && input.get(i + 1) == Some(&b'\n') {
                    2
                } else {
                    1
                };
                start = i;
            }
            _ => i += 1,
        }
    }
    for line in lines {
        if line.is_empty() {
            string.clone_from(&buffer);
            if has_data {
                ids.push(string.clone());
            }
            has_data = false;
            continue;
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        match name {
            b"data" => has_data = true,
            b"id" if !value.contains(&0) => {
                buffer = String::from_utf8(value.to_vec()).unwrap();
            }
            _ => {}
        }
    }
    (string, ids)
}

fn id_streams() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        Just(&b"id: "[..]),
        Just(&b"id:"[..]),
        Just(&b"id"[..]),
        Just(&b"data: x"[..]),
        Just(&b"data"[..]),
        Just(&b"event: e"[..]),
        Just(&b"retry: 5"[..]),
        Just(&b": c"[..]),
        Just(&b"\0"[..]),
        Just(&b"7"[..]),
        Just(&b"ab"[..]),
        Just(&b"\n"[..]),
        Just(&b"\n"[..]),
        Just(&b"\r"[..]),
        Just(&b"\r\n"[..]),
    ];
    prop::collection::vec(token, 0..40).prop_map(|tokens| tokens.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    /// At every chunk boundary the getter is the model's last event ID string; events carry it;
    /// after `finish` it is the string of the complete lines, and the next stream's events
    /// start from it.
    #[test]
    fn last_event_id_follows_the_whatwg_model(
        input in id_streams(),
        sizes in prop::collection::vec(1usize..12, 1..4),
    ) {
        let mut parser = SseParser::new();
        let mut ids = Vec::new();
        let (mut pos, mut turn) = (0, 0);
        while pos < input.len() {
            let end = (pos + sizes[turn % sizes.len()]).min(input.len());
            ids.extend(feed_ids(&mut parser, &input[pos..end]));
            prop_assert_eq!(parser.last_event_id(), model(&input[..end]).0, "after {} bytes", end);
            pos = end;
            turn += 1;
        }
        let (committed, expected_ids) = model(&input);
        prop_assert_eq!(ids, expected_ids);
        parser.finish();
        prop_assert_eq!(parser.last_event_id(), committed.as_str());
        prop_assert_eq!(feed_ids(&mut parser, b"data: next\n\n"), [committed.clone()]);
    }
}
