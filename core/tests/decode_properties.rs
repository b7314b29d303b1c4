//! Property tests on generated streams (the fixture-based ones are in `decode_fixtures.rs`):
//! random well-formed Anthropic and OpenAI Chat streams — any number of text, thinking and tool
//! blocks, strings with escapes and multi-byte characters, tool inputs cut into random fragments,
//! keep-alives in between — decode to the message a simple model predicts, seal every tool call
//! once with its parsed input, and give the same events and message at any chunking.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use bytes::Bytes;
use ferroloop::decode::{DecodeEvent, Provider, StreamDecoder};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::{Map, Value, json};

/// Text with the characters that stress the decoders: quotes, backslashes, line ends,
/// multi-byte UTF-8 and a character outside the BMP (a surrogate pair when escaped).
fn text_piece() -> impl Strategy<Value = String> {
    "[a-z \"\\\\\n\r\té日😀/]{0,12}"
}

fn json_input() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        text_piece().prop_map(Value::from),
    ];
    let value = leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(("[a-z_]{1,6}", inner), 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    prop::collection::vec(("[a-z_]{1,6}", value), 0..4)
        .prop_map(|m| Value::Object(m.into_iter().collect::<Map<String, Value>>()))
}

#[derive(Debug, Clone)]
enum Block {
    Text(Vec<String>),
    Thinking(Vec<String>, String),
    Tool(Value, Vec<prop::sample::Index>),
}

fn block() -> impl Strategy<Value = Block> {
    prop_oneof![
        prop::collection::vec(text_piece(), 0..6).prop_map(Block::Text),
        (
            prop::collection::vec(text_piece(), 0..4),
            "[A-Za-z0-9+/]{0,16}"
        )
            .prop_map(|(t, s)| Block::Thinking(t, s)),
        (
            json_input(),
            prop::collection::vec(any::<prop::sample::Index>(), 0..6)
        )
            .prop_map(|(v, cuts)| Block::Tool(v, cuts)),
    ]
}

/// Splits `text` at the given points (snapped to character boundaries).
fn fragments(text: &str, cuts: &[prop::sample::Index]) -> Vec<String> {
    let mut points: Vec<usize> = cuts
        .iter()
        .map(|c| c.index(text.len() + 1))
        .map(|mut p| {
            while !text.is_char_boundary(p) {
                p -= 1;
            }
            p
        })
        .collect();
    points.push(text.len());
    points.sort_unstable();
    points.dedup();
    let mut start = 0;
    points
        .into_iter()
        .map(|end| {
            let piece = text[start..end].to_owned();
            start = end;
            piece
        })
        .collect()
}

fn sse(out: &mut String, event: Option<&str>, data: &str) {
    if let Some(event) = event {
        out.push_str("event: ");
        out.push_str(event);
        out.push('\n');
    }
    out.push_str("data: ");
    out.push_str(data);
    out.push_str("\n\n");
}

/// An Anthropic stream of `blocks` and the message it must decode to.
fn anthropic_stream(blocks: &[Block], pings: &[bool]) -> (String, Value) {
    let mut out = String::new();
    let mut ping_at = pings.iter().cycle();
    let mut maybe_ping = |out: &mut String| {
        if *ping_at.next().unwrap_or(&false) {
            sse(out, Some("ping"), r#"{"type": "ping"}"#);
        }
    };
    let message = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
        "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 3, "output_tokens": 1}});
    sse(
        &mut out,
        Some("message_start"),
        &json!({"type": "message_start", "message": message}).to_string(),
    );
    let mut content = Vec::new();
    for (index, block) in blocks.iter().enumerate() {
        let (start, deltas, expected) = match block {
            Block::Text(pieces) => (
                json!({"type": "text", "text": ""}),
                pieces
                    .iter()
                    .map(|t| json!({"type": "text_delta", "text": t}))
                    .collect::<Vec<_>>(),
                json!({"type": "text", "text": pieces.concat()}),
            ),
            Block::Thinking(pieces, signature) => {
                let mut deltas: Vec<Value> = pieces
                    .iter()
                    .map(|t| json!({"type": "thinking_delta", "thinking": t}))
                    .collect();
                deltas.push(json!({"type": "signature_delta", "signature": signature}));
                (
                    json!({"type": "thinking", "thinking": "", "signature": ""}),
                    deltas,
                    json!({"type": "thinking", "thinking": pieces.concat(), "signature": signature}),
                )
            }
            Block::Tool(input, cuts) => {
                let id = format!("toolu_{index}");
                let deltas = fragments(&input.to_string(), cuts)
                    .into_iter()
                    .map(|f| json!({"type": "input_json_delta", "partial_json": f}))
                    .collect();
                (
                    json!({"type": "tool_use", "id": id, "name": "tool", "input": {}}),
                    deltas,
                    json!({"type": "tool_use", "id": id, "name": "tool", "input": input}),
                )
            }
        };
        sse(
            &mut out,
            Some("content_block_start"),
            &json!({"type": "content_block_start", "index": index, "content_block": start})
                .to_string(),
        );
        for delta in deltas {
            maybe_ping(&mut out);
            // Compact, as the API sends it: the decoder's fast path sees these.
            sse(
                &mut out,
                Some("content_block_delta"),
                &json!({"type": "content_block_delta", "index": index, "delta": delta}).to_string(),
            );
        }
        sse(
            &mut out,
            Some("content_block_stop"),
            &json!({"type": "content_block_stop", "index": index}).to_string(),
        );
        content.push(expected);
    }
    sse(
        &mut out,
        Some("message_delta"),
        r#"{"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 9}}"#,
    );
    sse(
        &mut out,
        Some("message_stop"),
        r#"{"type": "message_stop"}"#,
    );
    (out, Value::Array(content))
}

/// Decodes `input` cut at `cuts`; returns the final message and the events.
fn decode(
    provider: Provider,
    input: &[u8],
    cuts: &[prop::sample::Index],
) -> (Value, Vec<DecodeEvent>) {
    let mut points: Vec<usize> = cuts.iter().map(|c| c.index(input.len() + 1)).collect();
    points.push(input.len());
    points.sort_unstable();
    let mut decoder = StreamDecoder::for_provider(provider);
    let mut events = Vec::new();
    let mut start = 0;
    for end in points {
        decoder
            .feed_into(Bytes::copy_from_slice(&input[start..end]), &mut events)
            .expect("well-formed stream");
        start = end;
    }
    (decoder.finish().expect("complete stream"), events)
}

fn ready_inputs(events: &[DecodeEvent]) -> Vec<(usize, String, Value)> {
    events
        .iter()
        .filter_map(|e| match e {
            DecodeEvent::ToolUseReady {
                index, id, input, ..
            } => Some((*index, id.clone(), input.clone())),
            _ => None,
        })
        .collect()
}

/// One tool call of a generated Chat stream: its arguments in fragments.
#[derive(Debug, Clone)]
struct ChatCall {
    arguments: Value,
    cuts: Vec<prop::sample::Index>,
}

/// An OpenAI Chat stream: text content pieces, then each tool call's deltas (merged by
/// `index`), interleaved as `order` says; and the message it must decode to.
fn chat_stream(
    content: &[String],
    calls: &[ChatCall],
    order: &[prop::sample::Index],
) -> (String, Value) {
    let chunk = |choices: Value| {
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
            "model": "gpt-test", "choices": choices})
        .to_string()
    };
    let mut out = String::new();
    sse(
        &mut out,
        None,
        &chunk(
            json!([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]),
        ),
    );
    for piece in content {
        sse(
            &mut out,
            None,
            &chunk(json!([{"index": 0, "delta": {"content": piece}, "finish_reason": null}])),
        );
    }
    // Each call's deltas in order. With an empty `order`, the calls arrive one after the
    // other, as the API sends them (a call is sealed when the next starts, the SDK's rule);
    // otherwise `order` picks whose next delta comes, interleaving them as some servers do.
    let mut queues: Vec<std::collections::VecDeque<Value>> = calls
        .iter()
        .enumerate()
        .map(|(i, call)| {
            let mut deltas = vec![
                json!({"index": i, "id": format!("call_{i}"), "type": "function",
                "function": {"name": "tool", "arguments": ""}}),
            ];
            deltas.extend(
                fragments(&call.arguments.to_string(), &call.cuts)
                    .into_iter()
                    .map(|f| json!({"index": i, "function": {"arguments": f}})),
            );
            deltas.into()
        })
        .collect();
    let mut picks = order.iter().cycle();
    // The decoder keeps calls in the order they start.
    let mut started = Vec::new();
    loop {
        let waiting: Vec<usize> = (0..queues.len())
            .filter(|&i| !queues[i].is_empty())
            .collect();
        let Some(&first) = waiting.first() else {
            break;
        };
        let call = picks
            .next()
            .map_or(first, |pick| waiting[pick.index(waiting.len())]);
        let Some(delta) = queues[call].pop_front() else {
            break;
        };
        if delta.get("id").is_some() {
            started.push(call);
        }
        sse(
            &mut out,
            None,
            &chunk(json!([{"index": 0, "delta": {"tool_calls": [delta]}, "finish_reason": null}])),
        );
    }
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    sse(
        &mut out,
        None,
        &chunk(json!([{"index": 0, "delta": {}, "finish_reason": finish}])),
    );
    sse(&mut out, None, "[DONE]");
    let tool_calls: Vec<Value> = started
        .iter()
        .map(|&i| {
            json!({"id": format!("call_{i}"), "name": "tool", "arguments": calls[i].arguments.to_string()})
        })
        .collect();
    (
        out,
        json!({"content": content.concat(), "tool_calls": tool_calls}),
    )
}

/// Text for the cut-text properties: characters outside the BMP (a surrogate pair in UTF-16,
/// which a cut may split), multi-byte UTF-8, and characters JSON escapes.
fn cut_text() -> impl Strategy<Value = String> {
    "[a-z \"\\\\é日😀🤔\u{10000}\u{10FFFF}]{0,16}"
}

/// `units` cut at `cuts` (UTF-16 indexes, as a JavaScript gateway cuts text), each piece as
/// `JSON.stringify` writes it.
fn js_pieces(units: &[u16], cuts: &[prop::sample::Index]) -> Vec<String> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c.index(units.len() + 1)).collect();
    points.push(units.len());
    points.sort_unstable();
    let mut from = 0;
    points
        .into_iter()
        .map(|to| common::js_stringify(&units[std::mem::replace(&mut from, to)..to]))
        .collect()
}

/// The text of every text, thinking, tool-input and refusal delta event, in order.
fn sent_text(events: &[DecodeEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            DecodeEvent::TextDelta { text, .. } => Some(text.as_str()),
            DecodeEvent::ThinkingDelta { thinking, .. } => Some(thinking.as_str()),
            DecodeEvent::InputJsonDelta { partial_json, .. } => Some(partial_json.as_str()),
            DecodeEvent::RefusalDelta { refusal, .. } => Some(refusal.as_str()),
            _ => None,
        })
        .collect()
}

/// An OpenAI Responses stream of one output item: `response.created`, the item's `added` event,
/// the `streamed` events (name, data), then the `done` events, the item's `done` event with
/// `item` and `response.completed`; and the length of the stream up to the last streamed event.
fn responses_stream(
    added: &Value,
    streamed: &[(String, String)],
    done: &[(String, String)],
    item: &Value,
) -> (String, usize) {
    let mut stream = String::new();
    let response = json!({"id": "resp_1", "object": "response", "status": "in_progress", "model": "m", "output": []});
    let created = json!({"type": "response.created", "response": response});
    sse(&mut stream, Some("response.created"), &created.to_string());
    let item_added =
        json!({"type": "response.output_item.added", "output_index": 0, "item": added});
    sse(
        &mut stream,
        Some("response.output_item.added"),
        &item_added.to_string(),
    );
    for (name, data) in streamed {
        sse(&mut stream, Some(name), data);
    }
    let streamed_len = stream.len();
    for (name, data) in done {
        sse(&mut stream, Some(name), data);
    }
    let item_done = json!({"type": "response.output_item.done", "output_index": 0, "item": item});
    sse(
        &mut stream,
        Some("response.output_item.done"),
        &item_done.to_string(),
    );
    let mut completed = response.clone();
    completed["status"] = json!("completed");
    completed["output"] = json!([item]);
    let completed = json!({"type": "response.completed", "response": completed});
    sse(
        &mut stream,
        Some("response.completed"),
        &completed.to_string(),
    );
    (stream, streamed_len)
}

/// A [`responses_stream`] of one message part of `kind` (`output_text` or `refusal`) whose
/// `field` is `text`, its deltas `text` cut at `cuts`, then the part's done event.
fn responses_text_stream(
    kind: &str,
    field: &str,
    text: &str,
    cuts: &[prop::sample::Index],
) -> (String, usize) {
    let units: Vec<u16> = text.encode_utf16().collect();
    let message = |status: &str, content: Value| json!({"type": "message", "id": "msg_1", "role": "assistant", "status": status, "content": content});
    let part_added = json!({"type": "response.content_part.added", "output_index": 0,
        "content_index": 0, "item_id": "msg_1", "part": {"type": kind, field: ""}});
    let mut streamed = vec![(
        "response.content_part.added".to_owned(),
        part_added.to_string(),
    )];
    for piece in js_pieces(&units, cuts) {
        let delta = format!(
            r#"{{"type":"response.{kind}.delta","output_index":0,"content_index":0,"item_id":"msg_1","delta":{piece}}}"#
        );
        streamed.push((format!("response.{kind}.delta"), delta));
    }
    let done = json!({"type": format!("response.{kind}.done"),
        "output_index": 0, "content_index": 0, "item_id": "msg_1", field: text});
    responses_stream(
        &message("in_progress", json!([])),
        &streamed,
        &[(format!("response.{kind}.done"), done.to_string())],
        &message("completed", json!([{"type": kind, field: text}])),
    )
}

/// A [`responses_stream`] of one function call whose arguments are `arguments` cut at `cuts`
/// (UTF-16 indexes), then the arguments' done event.
fn responses_arguments_stream(arguments: &str, cuts: &[prop::sample::Index]) -> (String, usize) {
    let units: Vec<u16> = arguments.encode_utf16().collect();
    let call = |status: &str, arguments: &str| {
        json!({"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "lookup",
            "arguments": arguments, "status": status})
    };
    let name = "response.function_call_arguments.delta";
    let streamed: Vec<(String, String)> = js_pieces(&units, cuts)
        .into_iter()
        .map(|piece| {
            let data =
                format!(r#"{{"type":"{name}","output_index":0,"item_id":"fc_1","delta":{piece}}}"#);
            (name.to_owned(), data)
        })
        .collect();
    let done = json!({"type": "response.function_call_arguments.done", "output_index": 0,
        "item_id": "fc_1", "arguments": arguments});
    let done = [(
        "response.function_call_arguments.done".to_owned(),
        done.to_string(),
    )];
    responses_stream(
        &call("in_progress", ""),
        &streamed,
        &done,
        &call("completed", arguments),
    )
}

/// A [`responses_stream`] of one reasoning item whose summary part (`summary`) or reasoning
/// text entry is `text` cut at `cuts` (UTF-16 indexes), then the text's done event.
fn responses_reasoning_stream(
    summary: bool,
    text: &str,
    cuts: &[prop::sample::Index],
) -> (String, usize) {
    let units: Vec<u16> = text.encode_utf16().collect();
    let (list, at_key, kind, entry_type) = if summary {
        (
            "summary",
            "summary_index",
            "reasoning_summary_text",
            "summary_text",
        )
    } else {
        (
            "content",
            "content_index",
            "reasoning_text",
            "reasoning_text",
        )
    };
    let item = |entries: Value| json!({"type": "reasoning", "id": "rs_1", list: entries});
    let mut streamed = Vec::new();
    let mut added = item(json!([]));
    if summary {
        let part = json!({"type": "response.reasoning_summary_part.added", "output_index": 0,
            "item_id": "rs_1", "summary_index": 0, "part": {"type": entry_type, "text": ""}});
        streamed.push((
            "response.reasoning_summary_part.added".to_owned(),
            part.to_string(),
        ));
    } else {
        // Reasoning text entries come with the item.
        added = item(json!([{"type": entry_type, "text": ""}]));
    }
    let name = format!("response.{kind}.delta");
    for piece in js_pieces(&units, cuts) {
        let data = format!(
            r#"{{"type":"{name}","output_index":0,"item_id":"rs_1","{at_key}":0,"delta":{piece}}}"#
        );
        streamed.push((name.clone(), data));
    }
    let done_name = format!("response.{kind}.done");
    let done = json!({"type": done_name, "output_index": 0, "item_id": "rs_1", at_key: 0,
        "text": text});
    responses_stream(
        &added,
        &streamed,
        &[(done_name, done.to_string())],
        &item(json!([{"type": entry_type, "text": text}])),
    )
}

/// A [`responses_stream`] of one custom tool call's input (or, with `mcp`, one MCP call's
/// arguments) `text` cut at `cuts` (UTF-16 indexes), then the text's done event. Returns the
/// stream with the length of its part before the done event, and the deltas' event type.
fn responses_call_input_stream(
    mcp: bool,
    text: &str,
    cuts: &[prop::sample::Index],
) -> ((String, usize), &'static str) {
    let units: Vec<u16> = text.encode_utf16().collect();
    let (item_type, field, name, done_name) = if mcp {
        (
            "mcp_call",
            "arguments",
            "response.mcp_call_arguments.delta",
            "response.mcp_call_arguments.done",
        )
    } else {
        (
            "custom_tool_call",
            "input",
            "response.custom_tool_call_input.delta",
            "response.custom_tool_call_input.done",
        )
    };
    let item = |status: &str, text: &str| {
        json!({"type": item_type, "id": "call_1", "call_id": "c1", "name": "apply_patch",
            "server_label": "s", field: text, "status": status})
    };
    let streamed: Vec<(String, String)> = js_pieces(&units, cuts)
        .into_iter()
        .map(|piece| {
            let data = format!(
                r#"{{"type":"{name}","output_index":0,"item_id":"call_1","delta":{piece}}}"#
            );
            (name.to_owned(), data)
        })
        .collect();
    let done = json!({"type": done_name, "output_index": 0, "item_id": "call_1", field: text});
    let cut = responses_stream(
        &item("in_progress", ""),
        &streamed,
        &[(done_name.to_owned(), done.to_string())],
        &item("completed", text),
    );
    (cut, name)
}

/// A Responses `stream` decoded twice: its first `streamed_len` bytes (the deltas, before the
/// done events that replace the text) in one chunk, and the whole of it cut at `chunking`; the
/// string at `pointer` (a JSON pointer into the message) must be `expected` both times. Returns
/// the events of the whole stream.
fn responses_streamed_and_final(
    (stream, streamed_len): &(String, usize),
    chunking: &[prop::sample::Index],
    pointer: &str,
    expected: &str,
) -> Result<Vec<DecodeEvent>, TestCaseError> {
    let mut decoder = StreamDecoder::for_provider(Provider::OpenAiResponses);
    decoder
        .feed(Bytes::copy_from_slice(&stream.as_bytes()[..*streamed_len]))
        .unwrap();
    let expected = Some(Value::from(expected));
    let streamed = decoder.message();
    prop_assert_eq!(streamed.pointer(pointer), expected.as_ref());
    let (message, events) = decode(Provider::OpenAiResponses, stream.as_bytes(), chunking);
    prop_assert_eq!(message.pointer(pointer), expected.as_ref());
    Ok(events)
}

/// An Anthropic stream with one block of `kind` whose text is `units` cut at `cuts` (UTF-16
/// indexes, as a JavaScript gateway cuts text), each piece a delta written by `js_stringify`.
fn cut_text_stream(kind: &str, units: &[u16], cuts: &[prop::sample::Index]) -> String {
    let (start, delta_type, field) = match kind {
        "text" => (json!({"type": "text", "text": ""}), "text_delta", "text"),
        "tool" => (
            json!({"type": "tool_use", "id": "toolu_1", "name": "say", "input": {}}),
            "input_json_delta",
            "partial_json",
        ),
        _ => (
            json!({"type": "thinking", "thinking": "", "signature": ""}),
            "thinking_delta",
            "thinking",
        ),
    };
    let mut out = String::new();
    let message = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
        "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 3, "output_tokens": 1}});
    let start_event = json!({"type": "message_start", "message": message});
    sse(&mut out, Some("message_start"), &start_event.to_string());
    let block_start = json!({"type": "content_block_start", "index": 0, "content_block": start});
    sse(
        &mut out,
        Some("content_block_start"),
        &block_start.to_string(),
    );
    for piece in js_pieces(units, cuts) {
        let data = format!(
            r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"{delta_type}","{field}":{piece}}}}}"#
        );
        sse(&mut out, Some("content_block_delta"), &data);
    }
    sse(
        &mut out,
        Some("content_block_stop"),
        r#"{"type":"content_block_stop","index":0}"#,
    );
    sse(
        &mut out,
        Some("message_delta"),
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}"#,
    );
    sse(&mut out, Some("message_stop"), r#"{"type":"message_stop"}"#);
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Generated Anthropic streams decode to the predicted content, each tool call is sealed
    /// exactly once with its parsed input, and any chunking gives the same result.
    #[test]
    fn generated_anthropic_streams_decode_at_any_chunking(
        blocks in prop::collection::vec(block(), 0..5),
        pings in prop::collection::vec(prop::bool::weighted(0.2), 1..8),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..30),
    ) {
        let (stream, content) = anthropic_stream(&blocks, &pings);
        let whole = decode(Provider::Anthropic, stream.as_bytes(), &[]);
        prop_assert_eq!(&whole.0["content"], &content);
        prop_assert_eq!(&whole.0["stop_reason"], "end_turn");
        let expected_ready: Vec<(usize, String, Value)> = blocks
            .iter()
            .enumerate()
            .filter_map(|(i, b)| match b {
                Block::Tool(input, _) => Some((i, format!("toolu_{i}"), input.clone())),
                _ => None,
            })
            .collect();
        prop_assert_eq!(ready_inputs(&whole.1), expected_ready);
        let split = decode(Provider::Anthropic, stream.as_bytes(), &cuts);
        prop_assert_eq!(split, whole);
    }

    /// Generated OpenAI Chat streams with parallel tool calls, one after the other or with
    /// their fragments interleaved, merge by index, keep the raw argument text, seal every call
    /// once with its parsed arguments, at any chunking.
    #[test]
    fn generated_chat_streams_decode_at_any_chunking(
        content in prop::collection::vec(text_piece(), 0..6),
        calls in prop::collection::vec(
            (json_input(), prop::collection::vec(any::<prop::sample::Index>(), 0..5))
                .prop_map(|(arguments, cuts)| ChatCall { arguments, cuts }),
            0..4,
        ),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..30),
        interleave in prop::bool::weighted(0.5),
        order in prop::collection::vec(any::<prop::sample::Index>(), 1..12),
    ) {
        let order = if interleave { order } else { Vec::new() };
        let (stream, expected) = chat_stream(&content, &calls, &order);
        let whole = decode(Provider::OpenAiChat, stream.as_bytes(), &[]);
        let message = &whole.0["choices"][0]["message"];
        prop_assert_eq!(&message["content"], &expected["content"]);
        let got_calls: Vec<Value> = message["tool_calls"]
            .as_array()
            .map(|calls| {
                calls
                    .iter()
                    .map(|c| json!({"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}))
                    .collect()
            })
            .unwrap_or_default();
        prop_assert_eq!(Value::Array(got_calls), expected["tool_calls"].clone());
        // Events name calls by their position in the message.
        let expected_ready: Vec<(usize, String, Value)> = expected["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(position, c)| {
                let id = c["id"].as_str().unwrap_or_default().to_owned();
                let wire: usize = id.trim_start_matches("call_").parse().unwrap();
                (position, id, calls[wire].arguments.clone())
            })
            .collect();
        let mut ready = ready_inputs(&whole.1);
        ready.sort_by_key(|r| r.0);
        prop_assert_eq!(ready, expected_ready);
        let split = decode(Provider::OpenAiChat, stream.as_bytes(), &cuts);
        prop_assert_eq!(split, whole);
    }

    /// Text, thinking or tool-input text cut at any UTF-16 index into deltas, as a JavaScript
    /// gateway cuts it (a character outside the BMP may be split between two deltas, each half
    /// a `\udXXX` escape), decodes to the text itself, in the block and in the deltas' events,
    /// at any chunking of the stream.
    #[test]
    fn text_cut_at_any_utf16_index_decodes_to_the_text(
        text in cut_text(),
        kind in prop::sample::select(vec!["text", "thinking", "tool"]),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
        chunking in prop::collection::vec(any::<prop::sample::Index>(), 0..20),
    ) {
        // A tool input is JSON text (written by `JSON.stringify`, characters as themselves),
        // cut and sent the same way.
        let input = json!({"s": text});
        let whole = if kind == "tool" { input.to_string() } else { text.clone() };
        let units: Vec<u16> = whole.encode_utf16().collect();
        let stream = cut_text_stream(kind, &units, &cuts);
        let (message, events) = decode(Provider::Anthropic, stream.as_bytes(), &chunking);
        let field = if kind == "tool" { "input" } else { kind };
        let expected = if kind == "tool" { input } else { Value::from(text.as_str()) };
        prop_assert_eq!(&message["content"][0][field], &expected);
        prop_assert_eq!(sent_text(&events), whole);
    }

    /// The same for an OpenAI Chat choice's content or refusal: cut at any UTF-16 index into
    /// chunks, it decodes to the text itself, in the message and in the events, whichever path
    /// (template, serde text chunk, general) each chunk takes.
    #[test]
    fn chat_text_cut_at_any_utf16_index_decodes_to_the_text(
        text in cut_text(),
        refusal in any::<bool>(),
        first in "[a-z]{0,2}",
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
        chunking in prop::collection::vec(any::<prop::sample::Index>(), 0..20),
    ) {
        let field = if refusal { "refusal" } else { "content" };
        // The first chunk names the role and may carry text of its own.
        let whole = format!("{first}{text}");
        let units: Vec<u16> = text.encode_utf16().collect();
        let mut stream = String::new();
        let chunk = |delta: &str, finish: &str| {
            format!(
                r#"{{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{{"index":0,"delta":{delta},"finish_reason":{finish}}}]}}"#
            )
        };
        let opening = format!(r#"{{"role":"assistant","{field}":{}}}"#, Value::from(first.as_str()));
        sse(&mut stream, None, &chunk(&opening, "null"));
        for piece in js_pieces(&units, &cuts) {
            sse(&mut stream, None, &chunk(&format!(r#"{{"{field}":{piece}}}"#), "null"));
        }
        sse(&mut stream, None, &chunk("{}", r#""stop""#));
        sse(&mut stream, None, "[DONE]");
        let (message, events) = decode(Provider::OpenAiChat, stream.as_bytes(), &chunking);
        prop_assert_eq!(
            &message["choices"][0]["message"][field],
            &Value::from(whole.as_str())
        );
        prop_assert_eq!(sent_text(&events), whole);
    }

    /// The same for an OpenAI Chat tool call's arguments (JSON text whose strings hold
    /// characters outside the BMP unescaped): cut at any UTF-16 index, the first piece in the
    /// chunk that starts the call or in the next, the call's arguments in the message and in
    /// the events are the arguments, and the call is ready with their value. A second call with
    /// the same pieces follows, so that a held half belongs to its call. The first call starts
    /// in a chunk after the role's, in the stream's first chunk, or in the first chunk with
    /// choices after one without (Azure's prompt filter results), which reach different paths.
    #[test]
    fn chat_arguments_cut_at_any_utf16_index_decode_to_the_arguments(
        text in cut_text(),
        first_in_start in any::<bool>(),
        opening in 0..3usize,
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
        chunking in prop::collection::vec(any::<prop::sample::Index>(), 0..20),
    ) {
        let input = json!({"query": text});
        let arguments = input.to_string();
        let units: Vec<u16> = arguments.encode_utf16().collect();
        let pieces = js_pieces(&units, &cuts);
        let mut stream = String::new();
        let chunk = |delta: &str, finish: &str| {
            format!(
                r#"{{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{{"index":0,"delta":{delta},"finish_reason":{finish}}}]}}"#
            )
        };
        match opening {
            0 => sse(&mut stream, None, &chunk(r#"{"role":"assistant","content":null}"#, "null")),
            2 => sse(&mut stream, None, r#"{"id":"","object":"chat.completion.chunk","created":0,"model":"","choices":[]}"#),
            _ => {}
        }
        for call in 0..2 {
            let (first, rest) = match (first_in_start, pieces.split_first()) {
                (true, Some((first, rest))) => (first.as_str(), rest),
                _ => (r#""""#, pieces.as_slice()),
            };
            let role = if call == 0 && opening > 0 { r#""role":"assistant","# } else { "" };
            let start = format!(
                r#"{{{role}"tool_calls":[{{"index":{call},"id":"call_{call}","type":"function","function":{{"name":"search","arguments":{first}}}}}]}}"#
            );
            sse(&mut stream, None, &chunk(&start, "null"));
            for piece in rest {
                let delta = format!(
                    r#"{{"tool_calls":[{{"index":{call},"function":{{"arguments":{piece}}}}}]}}"#
                );
                sse(&mut stream, None, &chunk(&delta, "null"));
            }
        }
        sse(&mut stream, None, &chunk("{}", r#""tool_calls""#));
        sse(&mut stream, None, "[DONE]");
        let (message, events) = decode(Provider::OpenAiChat, stream.as_bytes(), &chunking);
        for call in 0..2 {
            prop_assert_eq!(
                &message["choices"][0]["message"]["tool_calls"][call]["function"]["arguments"],
                &Value::from(arguments.as_str())
            );
        }
        prop_assert_eq!(sent_text(&events), arguments.repeat(2));
        let ready: Vec<Value> = ready_inputs(&events).into_iter().map(|(_, _, v)| v).collect();
        prop_assert_eq!(ready, vec![input.clone(), input]);
    }

    /// The same for an OpenAI Responses output text or refusal: the part's text before its
    /// `done` event (which replaces it with the whole) and the deltas' events are the text.
    #[test]
    fn responses_text_cut_at_any_utf16_index_decodes_to_the_text(
        text in cut_text(),
        refusal in any::<bool>(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
        chunking in prop::collection::vec(any::<prop::sample::Index>(), 0..20),
    ) {
        let (kind, field) = if refusal { ("refusal", "refusal") } else { ("output_text", "text") };
        let cut = responses_text_stream(kind, field, &text, &cuts);
        let pointer = format!("/output/0/content/0/{field}");
        let events = responses_streamed_and_final(&cut, &chunking, &pointer, &text)?;
        prop_assert_eq!(sent_text(&events), text);
    }

    /// The same for an OpenAI Responses reasoning summary or reasoning text: the entry's text
    /// before its `done` event, and the thinking events, are the text.
    #[test]
    fn responses_reasoning_cut_at_any_utf16_index_decodes_to_the_text(
        text in cut_text(),
        summary in any::<bool>(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
        chunking in prop::collection::vec(any::<prop::sample::Index>(), 0..20),
    ) {
        let list = if summary { "summary" } else { "content" };
        let cut = responses_reasoning_stream(summary, &text, &cuts);
        let pointer = format!("/output/0/{list}/0/text");
        let events = responses_streamed_and_final(&cut, &chunking, &pointer, &text)?;
        prop_assert_eq!(sent_text(&events), text);
    }

    /// The same for an OpenAI Responses custom tool call's input or MCP call's arguments, whose
    /// deltas pass through as events of their own: the item's text before the `done` event, and
    /// the passed-on deltas, are the text.
    #[test]
    fn responses_call_input_cut_at_any_utf16_index_decodes_to_the_text(
        text in cut_text(),
        mcp in any::<bool>(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
        chunking in prop::collection::vec(any::<prop::sample::Index>(), 0..20),
    ) {
        let field = if mcp { "arguments" } else { "input" };
        let (cut, name) = responses_call_input_stream(mcp, &text, &cuts);
        let pointer = format!("/output/0/{field}");
        let events = responses_streamed_and_final(&cut, &chunking, &pointer, &text)?;
        let passed_on: String = common::passed_on_deltas(&events, name).concat();
        prop_assert_eq!(passed_on, text);
    }

    /// The same for an OpenAI Responses function call's arguments (JSON text whose strings
    /// hold characters outside the BMP unescaped, as a model writes them): the call's arguments
    /// before their `done` event, and the deltas' events, are the arguments.
    #[test]
    fn responses_arguments_cut_at_any_utf16_index_decode_to_the_arguments(
        text in cut_text(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
        chunking in prop::collection::vec(any::<prop::sample::Index>(), 0..20),
    ) {
        let arguments = json!({"query": text}).to_string();
        let cut = responses_arguments_stream(&arguments, &cuts);
        let events = responses_streamed_and_final(&cut, &chunking, "/output/0/arguments", &arguments)?;
        prop_assert_eq!(sent_text(&events), arguments);
    }
}
