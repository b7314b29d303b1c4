//! A large tool input streamed one character per `input_json_delta` event, decoded by ferroloop
//! and by the naive patterns clients write: accumulate and parse once at the end, or (what a UI
//! showing the input as it arrives does in the SDKs) re-parse the whole buffer after every delta,
//! which is quadratic in the input's size.

use bytes::Bytes;
use ferroloop::decode::partial_json::{PartialJson, PartialMode};
use ferroloop::decode::{AnthropicDecoder, EventDecoder, StreamDecoder};
use ferroloop::message::anthropic::ContentBlock;
use ferroloop::sse::{SseItem, SseParser};
use serde_json::Value;

use crate::decode_peers::NaiveAnthropic;

/// The tool input document: `{"lines": ["…", …, "end"]}` of at least `target_bytes` bytes, with
/// escapes and non-ASCII text in every line. Returns the document and its number of lines.
pub fn tool_input_document(target_bytes: usize) -> (String, u64) {
    let mut doc = String::from("{\"lines\": [");
    let mut lines = 1;
    while doc.len() < target_bytes.saturating_sub(8) {
        doc.push_str("\"some text with \\\"escapes\\\" and ünïcödé\", ");
        lines += 1;
    }
    doc.push_str("\"end\"]}");
    (doc, lines)
}

/// An Anthropic stream whose only block is a `tool_use` whose input (see
/// [`tool_input_document`]) arrives one character per `input_json_delta` event. Returns the
/// stream and the number of lines in the input.
pub fn tool_input_stream(target_bytes: usize) -> (Bytes, u64) {
    let (doc, lines) = tool_input_document(target_bytes);
    let mut out = String::with_capacity(doc.len() * 120 + 1024);
    out.push_str("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_tool\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-20250514\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n");
    out.push_str("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_big\",\"name\":\"write_file\",\"input\":{}}}\n\n");
    for c in doc.chars() {
        out.push_str("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"");
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
        out.push_str("\"}}\n\n");
    }
    out.push_str(
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    );
    out.push_str("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":300000}}\n\n");
    out.push_str("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    (Bytes::from(out), lines)
}

fn lines_of(input: &Value) -> u64 {
    input["lines"].as_array().map_or(0, Vec::len) as u64
}

/// ferroloop: the stream decoder, accumulating only (the input is parsed once, at the block's
/// end). Returns the number of lines of the final input.
pub fn ferroloop_accumulate(chunks: &[Bytes]) -> u64 {
    let mut inner = AnthropicDecoder::new();
    inner.set_record_events(false);
    let mut decoder = StreamDecoder::new(inner);
    let mut events = Vec::new();
    for chunk in chunks {
        if decoder.feed_into(chunk.clone(), &mut events).is_err() {
            return 0;
        }
    }
    decoder
        .decoder()
        .message_ref()
        .and_then(|m| m.content.first())
        .map_or(0, |block| match block {
            ContentBlock::ToolUse(tool) => lines_of(&tool.input),
            _ => 0,
        })
}

/// The naive accumulate-then-parse client: `serde_json::Value` per event, fragments appended,
/// the input parsed at the block's end. Returns the number of lines of the final input.
pub fn naive_accumulate(chunks: &[Bytes]) -> u64 {
    let mut parser = SseParser::new();
    let mut naive = NaiveAnthropic::new();
    for chunk in chunks {
        parser.feed(chunk.clone());
        while let Some(item) = parser.next_item() {
            if let SseItem::Event(event) = item
                && naive.push(event.data()).is_err()
            {
                return 0;
            }
        }
    }
    naive
        .message()
        .map_or(0, |m| lines_of(&m["content"][0]["input"]))
}

/// ferroloop with a complete-so-far view after every delta (what a UI rendering the input live
/// needs): [`AnthropicDecoder::tool_input_repair`], O(new bytes) per delta. Returns the sum over
/// deltas of the repaired view's length (`cut + suffix`), or with `lines_only` the number of
/// lines of the final input.
pub fn ferroloop_view_each(chunks: &[Bytes], lines_only: bool) -> u64 {
    let mut parser = SseParser::new();
    let mut decoder = AnthropicDecoder::new();
    decoder.set_record_events(false);
    let mut views = 0u64;
    for chunk in chunks {
        parser.feed(chunk.clone());
        while let Some(item) = parser.next_item() {
            let SseItem::Event(event) = item else {
                continue;
            };
            if decoder
                .push_event(event.event_type(), event.data())
                .is_err()
            {
                return 0;
            }
            if event.event_type() == "content_block_delta"
                && let Some(repair) =
                    decoder.tool_input_repair(0, PartialMode::DropIncompleteStrings)
            {
                views += (repair.cut + repair.suffix.len()) as u64;
            }
        }
    }
    if lines_only {
        std::hint::black_box(views);
        return decoder
            .message_ref()
            .and_then(|m| m.content.first())
            .map_or(0, |block| match block {
                ContentBlock::ToolUse(tool) => lines_of(&tool.input),
                _ => 0,
            });
    }
    views
}

/// The naive live view (the SDK pattern): `serde_json::Value` per event, fragments appended,
/// and after every delta the whole buffer scanned again from its first byte to find the
/// complete-so-far view (with the same scanner as ferroloop, so only the algorithm differs; the
/// SDKs also build a value each time, which costs more). Quadratic in the input's size. Returns
/// the same sum as [`ferroloop_view_each`].
pub fn naive_rescan_each(chunks: &[Bytes]) -> u64 {
    let mut parser = SseParser::new();
    let mut buffer = String::new();
    let mut views = 0u64;
    for chunk in chunks {
        parser.feed(chunk.clone());
        while let Some(item) = parser.next_item() {
            let SseItem::Event(event) = item else {
                continue;
            };
            let Ok(value) = serde_json::from_str::<Value>(event.data()) else {
                return 0;
            };
            let Some(fragment) = value["delta"]["partial_json"].as_str() else {
                continue;
            };
            buffer.push_str(fragment);
            let mut scratch = PartialJson::new();
            scratch.push(&buffer);
            if let Some(repair) = scratch.repair(PartialMode::DropIncompleteStrings) {
                views += (repair.cut + repair.suffix.len()) as u64;
            }
        }
    }
    views
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::workloads::chunked;

    #[test]
    fn every_implementation_reads_the_same_input() {
        let (stream, lines) = tool_input_stream(2000);
        assert!(lines > 10);
        let chunks = chunked(&stream, 1460);
        assert_eq!(ferroloop_accumulate(&chunks), lines);
        assert_eq!(naive_accumulate(&chunks), lines);
        assert_eq!(ferroloop_view_each(&chunks, true), lines);
        let views = ferroloop_view_each(&chunks, false);
        assert!(views > 0);
        assert_eq!(naive_rescan_each(&chunks), views);
    }

    #[test]
    fn the_document_is_valid_json_of_the_requested_size() {
        let (doc, lines) = tool_input_document(10_000);
        let value: Value = serde_json::from_str(&doc).unwrap();
        assert_eq!(lines_of(&value), lines);
        assert!(doc.len() >= 9_990 && doc.len() < 10_100, "{}", doc.len());
    }
}
