//! Bounded memory on long and hostile streams, measured as the process's peak resident set
//! (`VmHWM` in `/proc/self/status`, reset through `/proc/self/clear_refs` before each run).
//!
//! What is legitimately retained: a decoder keeps the message it is accumulating (its text and
//! tool inputs) by design, so a single 1 GiB message needs 1 GiB. The long-stream test therefore
//! streams 1 GiB of Anthropic SSE made of many complete messages in sequence (a long-lived
//! connection replaying turns): one SSE parser sees every byte; each message (≈570 KiB: text
//! deltas, a tool call's input in fragments, pings) is decoded, checked and dropped. What must not
//! grow is everything else: the parser's buffers, the queue of fed chunks, per-event garbage.
//!
//! The full sizes (1 GiB, 10 GiB) run in release builds (`scripts/test.sh` runs this file with
//! `--release`); debug builds run the same tests on smaller volumes so `cargo test` stays fast.
//! Linux only (procfs); elsewhere the tests are skipped with a message.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Mutex;

use bytes::Bytes;
use ferroloop::decode::{AnthropicDecoder, DecodeEvent, EventDecoder};
use ferroloop::sse::{SseConfig, SseItem, SseParser};
use serde_json::{Value, json};

const MIB: u64 = 1024 * 1024;
const GIB: u64 = 1024 * MIB;
/// The bound on the peak resident set of the whole test process.
const PEAK_RSS_LIMIT: u64 = 64 * MIB;

/// The tests of this file measure the whole process: run them one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Peak resident set since the last reset, in bytes.
fn peak_rss() -> Option<u64> {
    status_kib("VmHWM:").map(|kib| kib * 1024)
}

/// Resets the peak to the current resident set. Returns false if the kernel refused (the peak
/// then covers the whole process lifetime, which only makes the check stricter).
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn procfs_available() -> bool {
    if peak_rss().is_some() {
        return true;
    }
    eprintln!("skipped: /proc/self/status has no VmHWM (not Linux)");
    false
}

/// One complete Anthropic message as SSE: a text block of `text_deltas` deltas, a tool call
/// whose input arrives in fragments, pings in between, and the closing events.
fn message_stream(id: usize, text_deltas: usize) -> (Bytes, usize, Value) {
    let mut out = String::new();
    let mut push = |event: &str, data: Value| {
        out.push_str("event: ");
        out.push_str(event);
        out.push_str("\ndata: ");
        out.push_str(&data.to_string());
        out.push_str("\n\n");
    };
    push(
        "message_start",
        json!({"type": "message_start", "message": {"id": format!("msg_{id}"), "type": "message",
            "role": "assistant", "model": "claude-test", "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    );
    push(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    );
    let piece = "The quick brown fox jumps over the lazy dog; ünïcödé → 日本語. ";
    let mut text_len = 0;
    for i in 0..text_deltas {
        push(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}),
        );
        text_len += piece.len();
        if i % 64 == 0 {
            push("ping", json!({"type": "ping"}));
        }
    }
    push(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    );
    push(
        "content_block_start",
        json!({"type": "content_block_start", "index": 1, "content_block":
            {"type": "tool_use", "id": format!("toolu_{id}"), "name": "write_file", "input": {}}}),
    );
    let content = "line of file content\\n".repeat(200);
    let input = format!(r#"{{"path": "src/file_{id}.rs", "content": "{content}"}}"#);
    for fragment in input.as_bytes().chunks(37) {
        let fragment = std::str::from_utf8(fragment).unwrap();
        push(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": fragment}}),
        );
    }
    push(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 1}),
    );
    push(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
            "usage": {"output_tokens": 500}}),
    );
    push("message_stop", json!({"type": "message_stop"}));
    let expected_input: Value = serde_json::from_str(&input).unwrap();
    (Bytes::from(out), text_len, expected_input)
}

/// Streams at least `total` bytes of consecutive Anthropic messages through one SSE parser and
/// a fresh decoder per message; checks every message; returns the bytes fed.
fn stream_messages(total: u64) -> u64 {
    // One template message, fed again and again with a different chunking each time (so the
    // chunk boundaries fall everywhere); the template is the only large allocation kept.
    let (template, text_len, expected_input) = message_stream(0, 3000);
    let chunk_sizes = [65_536usize, 1_021, 16_411, 4_093, 131_071, 7];
    let mut parser = SseParser::new();
    let mut decoder = AnthropicDecoder::new();
    let mut events = Vec::new();
    let mut messages = 0u64;
    let mut text_seen = 0usize;
    let mut round = 0usize;
    while parser.bytes_fed() < total {
        let mut pos = 0;
        let mut turn = round;
        round += 1;
        while pos < template.len() {
            let size = chunk_sizes[turn % chunk_sizes.len()];
            turn += 1;
            let end = (pos + size).min(template.len());
            parser.feed(template.slice(pos..end));
            pos = end;
            while let Some(item) = parser.next_item() {
                let SseItem::Event(event) = item else {
                    continue;
                };
                decoder
                    .push_event(event.event_type(), event.data())
                    .expect("valid stream");
                decoder.drain_events(&mut events);
                for event in events.drain(..) {
                    match event {
                        DecodeEvent::TextDelta { text, .. } => text_seen += text.len(),
                        DecodeEvent::ToolUseReady { input, .. } => {
                            assert_eq!(input, expected_input);
                        }
                        _ => {}
                    }
                }
                if decoder.is_complete() {
                    let message = decoder.finish().expect("complete message");
                    assert_eq!(
                        message["content"][0]["text"].as_str().unwrap().len(),
                        text_len
                    );
                    assert_eq!(message["content"][1]["input"], expected_input);
                    assert_eq!(message["stop_reason"], "tool_use");
                    assert_eq!(text_seen, text_len);
                    text_seen = 0;
                    messages += 1;
                    decoder = AnthropicDecoder::new();
                }
            }
        }
    }
    assert!(!parser.finish(), "nothing may be left over");
    assert_eq!(messages, parser.bytes_fed() / template.len() as u64);
    assert_eq!(parser.bytes_fed() % template.len() as u64, 0);
    parser.bytes_fed()
}

/// Feeds one `data:` line of `total` bytes (no line end) in 64 KiB chunks to a parser capped at
/// `limit`, then a normal event; returns the parser.
fn hostile_single_event(total: u64, limit: usize) -> SseParser {
    let mut parser = SseParser::with_config(SseConfig::default().max_event_bytes(Some(limit)));
    let chunk = Bytes::from(vec![b'x'; 64 * 1024]);
    parser.feed(Bytes::from_static(b"event: hostile\ndata: "));
    let mut fed = 0u64;
    while fed < total {
        parser.feed(chunk.clone());
        fed += chunk.len() as u64;
        assert!(
            parser.next_item().is_none(),
            "the hostile event must not dispatch"
        );
    }
    parser.feed(Bytes::from_static(b"\n\nevent: after\ndata: ok\n\n"));
    match parser.next_item() {
        Some(SseItem::Event(event)) => {
            assert_eq!(event.event_type(), "after");
            assert_eq!(event.data(), "ok");
        }
        other => panic!("expected the event after the dropped one, got {other:?}"),
    }
    assert!(parser.next_item().is_none());
    parser
}

fn assert_peak_below(limit: u64, what: &str) {
    let peak = peak_rss().expect("VmHWM");
    eprintln!("{what}: peak RSS {:.1} MiB", peak as f64 / MIB as f64);
    assert!(
        peak < limit,
        "{what}: peak RSS {peak} bytes is over the {limit}-byte bound"
    );
}

/// Debug builds run a smaller volume (the release run in `scripts/test.sh` does the full size).
fn volume(full: u64, debug: u64) -> u64 {
    if cfg!(debug_assertions) { debug } else { full }
}

#[test]
fn one_gib_of_messages_through_parser_and_decoder_in_bounded_memory() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !procfs_available() {
        return;
    }
    let total = volume(GIB, 16 * MIB);
    reset_peak_rss();
    let fed = stream_messages(total);
    assert!(fed >= total);
    assert_peak_below(PEAK_RSS_LIMIT, "1 GiB of Anthropic messages");
}

#[test]
fn hostile_ten_gib_event_is_dropped_in_bounded_memory() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !procfs_available() {
        return;
    }
    let total = volume(10 * GIB, 256 * MIB);
    reset_peak_rss();
    let parser = hostile_single_event(total, MIB as usize);
    assert_eq!(parser.dropped_events(), 1);
    assert!(parser.bytes_fed() > total);
    assert_peak_below(PEAK_RSS_LIMIT, "10 GiB single event, 1 MiB cap");
}

/// The instrument works: touching 96 MiB shows up in the peak, so the bounds above are real.
#[test]
fn peak_rss_measurement_sees_a_large_allocation() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !procfs_available() {
        return;
    }
    reset_peak_rss();
    let before = peak_rss().unwrap();
    let block = vec![1u8; 96 * MIB as usize];
    let sum: u64 = block.iter().step_by(4096).map(|b| u64::from(*b)).sum();
    assert_eq!(sum, 96 * MIB / 4096);
    drop(block);
    let after = peak_rss().unwrap();
    assert!(
        after >= before + 90 * MIB,
        "peak went from {before} to {after} bytes only"
    );
    assert!(reset_peak_rss(), "the peak could not be reset");
    assert!(
        peak_rss().unwrap() < after - 64 * MIB,
        "the reset did not lower the peak"
    );
}
