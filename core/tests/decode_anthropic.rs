//! Hand-written Anthropic streams: every event and delta type, sealing, errors, truncation.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use bytes::Bytes;
use ferroloop::decode::partial_json::PartialMode;
use ferroloop::decode::{
    AnthropicDecoder, DecodeError, DecodeEvent, EventDecoder, ProtocolError, StreamDecoder,
};
use serde_json::{Value, json};

fn start(id: &str) -> (String, Value) {
    (
        "message_start".into(),
        json!({"type": "message_start", "message": {"id": id, "type": "message", "role": "assistant",
            "model": "claude-test", "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 1, "cache_creation_input_tokens": 3, "cache_read_input_tokens": 7}}}),
    )
}

fn ev(kind: &str, data: Value) -> (String, Value) {
    (kind.to_owned(), data)
}

fn block_start(index: usize, block: Value) -> (String, Value) {
    ev(
        "content_block_start",
        json!({"type": "content_block_start", "index": index, "content_block": block}),
    )
}

fn delta(index: usize, delta: Value) -> (String, Value) {
    ev(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": index, "delta": delta}),
    )
}

fn text(index: usize, t: &str) -> (String, Value) {
    delta(index, json!({"type": "text_delta", "text": t}))
}

fn input(index: usize, fragment: &str) -> (String, Value) {
    delta(
        index,
        json!({"type": "input_json_delta", "partial_json": fragment}),
    )
}

fn stop(index: usize) -> (String, Value) {
    ev(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": index}),
    )
}

fn message_delta(stop_reason: &str, usage: Value) -> (String, Value) {
    ev(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": usage}),
    )
}

fn message_stop() -> (String, Value) {
    ev("message_stop", json!({"type": "message_stop"}))
}

/// Pushes events one by one; returns the decoder, the events and the first error.
fn run(events: &[(String, Value)]) -> (AnthropicDecoder, Vec<DecodeEvent>, Option<DecodeError>) {
    let mut decoder = AnthropicDecoder::new();
    let mut out = Vec::new();
    let mut first_error = None;
    for (kind, data) in events {
        let result = decoder.push_event(kind, &data.to_string());
        decoder.drain_events(&mut out);
        if let Err(e) = result {
            first_error.get_or_insert(e);
        }
    }
    (decoder, out, first_error)
}

fn to_sse(events: &[(String, Value)]) -> String {
    events
        .iter()
        .map(|(k, d)| format!("event: {k}\ndata: {d}\n\n"))
        .collect()
}

fn kinds(events: &[DecodeEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| e.to_json()["type"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn thinking_signature_text_and_citations() {
    let citation = json!({"type": "char_location", "cited_text": "x", "document_index": 0, "start_char_index": 0, "end_char_index": 1});
    let stream = vec![
        start("msg_1"),
        block_start(
            0,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
        ),
        delta(0, json!({"type": "thinking_delta", "thinking": "Let me "})),
        delta(0, json!({"type": "thinking_delta", "thinking": "think."})),
        delta(
            0,
            json!({"type": "signature_delta", "signature": "sig-old"}),
        ),
        delta(
            0,
            json!({"type": "signature_delta", "signature": "sig-final"}),
        ),
        stop(0),
        block_start(1, json!({"type": "redacted_thinking", "data": "ENCRYPTED"})),
        stop(1),
        block_start(2, json!({"type": "text", "text": ""})),
        text(2, "Per the doc"),
        delta(2, json!({"type": "citations_delta", "citation": citation})),
        text(2, ", yes."),
        stop(2),
        ev("ping", json!({"type": "ping"})),
        message_delta("end_turn", json!({"output_tokens": 42})),
        message_stop(),
    ];
    let (mut decoder, events, error) = run(&stream);
    assert!(error.is_none(), "{error:?}");
    let message = decoder.finish().unwrap();
    assert_eq!(
        message["content"],
        json!([
            {"type": "thinking", "thinking": "Let me think.", "signature": "sig-final"},
            {"type": "redacted_thinking", "data": "ENCRYPTED"},
            {"type": "text", "text": "Per the doc, yes.", "citations": [citation]}
        ])
    );
    assert_eq!(message["stop_reason"], "end_turn");
    assert_eq!(message["usage"]["output_tokens"], 42);
    assert_eq!(message["usage"]["cache_read_input_tokens"], 7);
    let k = kinds(&events);
    for expected in [
        "message_start",
        "block_start",
        "thinking_delta",
        "signature_delta",
        "block_stop",
        "text_delta",
        "citations_delta",
        "ping",
        "message_delta",
        "message_stop",
    ] {
        assert!(
            k.iter().any(|x| x == expected),
            "missing {expected} in {k:?}"
        );
    }
}

#[test]
fn parallel_tool_use_blocks_are_sealed_at_their_own_stop() {
    let stream = vec![
        start("msg_2"),
        block_start(
            0,
            json!({"type": "tool_use", "id": "toolu_a", "name": "read", "input": {}}),
        ),
        input(0, ""),
        input(0, "{\"path\": \"a"),
        input(0, ".txt\"}"),
        stop(0),
        block_start(
            1,
            json!({"type": "tool_use", "id": "toolu_b", "name": "list", "input": {}}),
        ),
        stop(1),
        block_start(
            2,
            json!({"type": "tool_use", "id": "toolu_c", "name": "grep", "input": {}}),
        ),
        input(2, "{\"q\": [1, {\"x\": null}]}"),
        stop(2),
        message_delta("tool_use", json!({"output_tokens": 9})),
        message_stop(),
    ];
    let (mut decoder, events, error) = run(&stream);
    assert!(error.is_none());
    let ready: Vec<(usize, Value)> = events
        .iter()
        .enumerate()
        .filter_map(|(at, e)| match e {
            DecodeEvent::ToolUseReady {
                id,
                name,
                input,
                index,
            } => Some((
                at,
                json!({"index": index, "id": id, "name": name, "input": input}),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(ready.len(), 3);
    assert_eq!(
        ready[0].1,
        json!({"index": 0, "id": "toolu_a", "name": "read", "input": {"path": "a.txt"}})
    );
    // An empty input buffer means `{}`.
    assert_eq!(
        ready[1].1,
        json!({"index": 1, "id": "toolu_b", "name": "list", "input": {}})
    );
    assert_eq!(ready[2].1["input"], json!({"q": [1, {"x": null}]}));
    // Each is emitted right after its own block_stop, while the message still streams.
    for (at, _) in &ready {
        assert!(matches!(events[at - 1], DecodeEvent::BlockStop { .. }));
    }
    let message = decoder.finish().unwrap();
    assert_eq!(message["content"][0]["input"], json!({"path": "a.txt"}));
    assert_eq!(message["content"][1]["input"], json!({}));
}

#[test]
fn server_tool_blocks_and_unknown_types_pass_through() {
    let search_result = json!({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1",
        "content": [{"type": "web_search_result", "url": "https://example.com", "title": "Ex"}]});
    let future_block = json!({"type": "hologram", "payload": {"depth": 3}});
    let stream = vec![
        start("msg_3"),
        block_start(
            0,
            json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}),
        ),
        input(0, "{\"query\": \"rust"),
        input(0, " sse\"}"),
        stop(0),
        block_start(1, search_result.clone()),
        stop(1),
        block_start(2, future_block.clone()),
        delta(2, json!({"type": "hologram_delta", "depth": 4})),
        stop(2),
        ev("future_event", json!({"type": "future_event", "x": 1})),
        message_delta(
            "end_turn",
            json!({"output_tokens": 5, "server_tool_use": {"web_search_requests": 1}}),
        ),
        message_stop(),
    ];
    let (mut decoder, events, error) = run(&stream);
    assert!(error.is_none(), "{error:?}");
    let message = decoder.finish().unwrap();
    assert_eq!(
        message["content"][0],
        json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "rust sse"}})
    );
    assert_eq!(message["content"][1], search_result);
    assert_eq!(
        message["content"][2], future_block,
        "unknown block kept, unknown delta does not change it"
    );
    assert_eq!(
        message["usage"]["server_tool_use"],
        json!({"web_search_requests": 1})
    );
    assert!(events.contains(&DecodeEvent::UnknownDelta {
        index: 2,
        delta: json!({"type": "hologram_delta", "depth": 4})
    }));
    assert!(events.contains(&DecodeEvent::Unknown {
        event_type: "future_event".into(),
        data: json!({"type": "future_event", "x": 1})
    }));
    // Server tools are run by the API: no ToolUseReady for the executor.
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, DecodeEvent::ToolUseReady { .. }))
    );
}

#[test]
fn usage_is_assigned_not_added_and_null_keeps() {
    let stream = vec![
        start("msg_4"),
        message_delta(
            "end_turn",
            json!({"output_tokens": 5, "input_tokens": null}),
        ),
        ev(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "stop_sequence", "stop_sequence": "END"},
                "usage": {"output_tokens": 8, "cache_read_input_tokens": null, "input_tokens": 12}}),
        ),
        message_stop(),
    ];
    let (mut decoder, _, error) = run(&stream);
    assert!(error.is_none());
    let message = decoder.finish().unwrap();
    assert_eq!(message["usage"]["output_tokens"], 8);
    assert_eq!(message["usage"]["input_tokens"], 12);
    assert_eq!(message["usage"]["cache_read_input_tokens"], 7);
    assert_eq!(message["usage"]["cache_creation_input_tokens"], 3);
    assert_eq!(message["stop_reason"], "stop_sequence");
    assert_eq!(message["stop_sequence"], "END");
}

#[test]
fn mid_stream_error_is_typed_and_not_swallowed() {
    let stream = vec![
        start("msg_5"),
        block_start(0, json!({"type": "text", "text": ""})),
        text(0, "partial"),
        ev(
            "error",
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
    ];
    let (mut decoder, _, error) = run(&stream);
    match error {
        Some(DecodeError::Provider {
            error_type,
            message,
            ..
        }) => {
            assert_eq!(error_type, "overloaded_error");
            assert_eq!(message, "Overloaded");
        }
        other => panic!("expected a provider error, got {other:?}"),
    }
    assert_eq!(decoder.message()["content"][0]["text"], "partial");
    let finished = decoder.finish();
    assert!(
        matches!(finished, Err(DecodeError::Provider { ref error_type, .. }) if error_type == "overloaded_error")
    );
    assert_eq!(finished.unwrap_err().code(), "provider");
}

#[test]
fn stream_without_message_stop_is_truncated_with_the_partial_message() {
    let stream = vec![
        start("msg_6"),
        block_start(0, json!({"type": "text", "text": ""})),
        text(0, "Hello, wor"),
        block_start(
            1,
            json!({"type": "tool_use", "id": "toolu_x", "name": "f", "input": {}}),
        ),
        input(1, "{\"a\": 1, \"b\": \"unfinis"),
    ];
    let mut decoder = StreamDecoder::new(AnthropicDecoder::new());
    let events = decoder.feed(Bytes::from(to_sse(&stream))).unwrap();
    assert!(!events.is_empty());
    assert!(!decoder.is_complete());
    match decoder.finish() {
        Err(DecodeError::Truncated { partial, reason }) => {
            assert!(reason.contains("message_stop"), "{reason}");
            assert_eq!(partial["id"], "msg_6");
            assert_eq!(partial["content"][0]["text"], "Hello, wor");
            // The partial message shows the complete-so-far view of the open tool input.
            assert_eq!(partial["content"][1]["input"], json!({"a": 1}));
        }
        other => panic!("expected Truncated, got {other:?}"),
    }
    let mut empty = StreamDecoder::new(AnthropicDecoder::new());
    assert!(
        matches!(empty.finish(), Err(DecodeError::Truncated { partial, .. }) if partial.is_null())
    );
}

#[test]
fn max_tokens_mid_tool_input_is_reported_truncated() {
    cut_mid_tool_input_is_reported_truncated("max_tokens");
}

/// The context window cuts the output as `max_tokens` does; the call was reported invalid JSON.
#[test]
fn context_window_cut_mid_tool_input_is_reported_truncated() {
    cut_mid_tool_input_is_reported_truncated("model_context_window_exceeded");
}

/// A streaming classifier's refusal stops the output wherever it was, as the limits do: the call
/// it cut must not run (it was reported invalid JSON, or ready if the cut fell after a `}`).
#[test]
fn refusal_mid_tool_input_is_reported_truncated() {
    cut_mid_tool_input_is_reported_truncated("refusal");
}

fn cut_mid_tool_input_is_reported_truncated(stop_reason: &str) {
    let stream = vec![
        start("msg_7"),
        block_start(
            0,
            json!({"type": "tool_use", "id": "toolu_ok", "name": "a", "input": {}}),
        ),
        input(0, "{\"done\": true}"),
        stop(0),
        block_start(
            1,
            json!({"type": "tool_use", "id": "toolu_cut", "name": "b", "input": {}}),
        ),
        input(1, "{\"lines\": [\"one\", \"tw"),
        message_delta(stop_reason, json!({"output_tokens": 100})),
        message_stop(),
    ];
    let (mut decoder, events, error) = run(&stream);
    assert!(error.is_none());
    assert!(events.contains(&DecodeEvent::ToolUseTruncated {
        index: 1,
        id: "toolu_cut".into(),
        name: "b".into(),
        partial_json: "{\"lines\": [\"one\", \"tw".into(),
    }));
    let ready: Vec<&DecodeEvent> = events
        .iter()
        .filter(|e| matches!(e, DecodeEvent::ToolUseReady { .. }))
        .collect();
    assert_eq!(ready.len(), 1, "only the completed call is ready");
    let message = decoder.finish().unwrap();
    assert_eq!(message["content"][1]["input"], json!({"lines": ["one"]}));
}

#[test]
fn invalid_tool_input_at_stop_is_reported_invalid() {
    let stream = vec![
        start("msg_8"),
        block_start(
            0,
            json!({"type": "tool_use", "id": "toolu_bad", "name": "f", "input": {}}),
        ),
        input(0, "{\"a\": 1} trailing"),
        stop(0),
        message_stop(),
    ];
    let (_, events, error) = run(&stream);
    assert!(error.is_none());
    assert!(
        events
            .iter()
            .any(|e| matches!(e, DecodeEvent::ToolUseInvalid { id, .. } if id == "toolu_bad"))
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, DecodeEvent::ToolUseReady { .. }))
    );
}

#[test]
fn protocol_errors() {
    let (_, _, error) = run(&[text(0, "x")]);
    assert!(
        matches!(
            error,
            Some(DecodeError::Protocol(ProtocolError::BeforeStart { .. }))
        ),
        "{error:?}"
    );

    let (_, _, error) = run(&[start("a"), start("b")]);
    assert!(matches!(
        error,
        Some(DecodeError::Protocol(ProtocolError::DuplicateStart { .. }))
    ));

    let (_, _, error) = run(&[start("a"), text(3, "x")]);
    assert!(matches!(
        error,
        Some(DecodeError::Protocol(ProtocolError::UnknownIndex {
            index: 3,
            ..
        }))
    ));

    let (_, _, error) = run(&[start("a"), input(0, "{")]);
    assert!(matches!(
        error,
        Some(DecodeError::Protocol(ProtocolError::UnknownIndex {
            index: 0,
            ..
        }))
    ));

    let (_, _, error) = run(&[start("a"), stop(0)]);
    assert!(matches!(
        error,
        Some(DecodeError::Protocol(ProtocolError::UnknownIndex { .. }))
    ));

    let (_, _, error) = run(&[
        start("a"),
        block_start(1, json!({"type": "text", "text": ""})),
    ]);
    assert!(matches!(
        error,
        Some(DecodeError::Protocol(ProtocolError::OutOfOrderIndex {
            index: 1,
            expected: 0
        }))
    ));

    let (_, _, error) = run(&[start("a"), message_stop(), text(0, "late")]);
    assert!(matches!(
        error,
        Some(DecodeError::Protocol(ProtocolError::AfterEnd { .. }))
    ));

    let mut decoder = AnthropicDecoder::new();
    let error = decoder
        .push_event("content_block_delta", "{not json")
        .unwrap_err();
    assert!(matches!(error, DecodeError::InvalidJson { .. }));
    assert_eq!(error.code(), "invalid_json");
}

#[test]
fn text_fast_path_agrees_with_the_general_path() {
    let texts = [
        "plain",
        "line\nbreak",
        "quote \" and \\ backslash",
        "漢字 😀 é",
        "\u{1}",
        "",
        "tab\t/",
    ];
    for t in texts {
        let compact = format!(
            r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":{}}}}}"#,
            serde_json::to_string(t).unwrap()
        );
        let spaced =
            serde_json::to_string_pretty(&serde_json::from_str::<Value>(&compact).unwrap())
                .unwrap();
        let escaped_unicode = compact
            .replace('😀', "\\ud83d\\ude00")
            .replace('é', "\\u00e9");
        let mut results = Vec::new();
        for data in [&compact, &spaced, &escaped_unicode] {
            let mut decoder = AnthropicDecoder::new();
            decoder
                .push_event("message_start", &start("m").1.to_string())
                .unwrap();
            decoder
                .push_event(
                    "content_block_start",
                    &block_start(0, json!({"type": "text", "text": ">"}))
                        .1
                        .to_string(),
                )
                .unwrap();
            decoder.push_event("content_block_delta", data).unwrap();
            results.push(decoder.message()["content"][0]["text"].clone());
        }
        assert_eq!(results[0], json!(format!(">{t}")));
        assert_eq!(results[1], results[0]);
        assert_eq!(results[2], results[0]);
    }
}

#[test]
fn events_without_event_lines_use_the_json_type() {
    let stream = [
        start("m"),
        block_start(0, json!({"type": "text", "text": ""})),
        text(0, "hi"),
        stop(0),
        message_stop(),
    ];
    let mut decoder = AnthropicDecoder::new();
    for (_, data) in &stream {
        decoder.push_event("message", &data.to_string()).unwrap();
    }
    assert_eq!(decoder.finish().unwrap()["content"][0]["text"], "hi");
}

#[test]
fn record_events_off_still_seals_tool_calls() {
    let stream = vec![
        start("m"),
        block_start(0, json!({"type": "text", "text": ""})),
        text(0, "a"),
        stop(0),
        block_start(
            1,
            json!({"type": "tool_use", "id": "t", "name": "f", "input": {}}),
        ),
        input(1, "{}"),
        stop(1),
        message_stop(),
    ];
    let mut decoder = AnthropicDecoder::new();
    decoder.set_record_events(false);
    for (k, d) in &stream {
        decoder.push_event(k, &d.to_string()).unwrap();
    }
    let mut events = Vec::new();
    decoder.drain_events(&mut events);
    assert_eq!(kinds(&events), ["tool_use_ready"]);
}

#[test]
fn prefilled_content_in_message_start_is_kept() {
    let mut decoder = AnthropicDecoder::new();
    let mut begin = start("m").1;
    begin["message"]["content"] = json!([{"type": "text", "text": "Prefill "}]);
    decoder
        .push_event("message_start", &begin.to_string())
        .unwrap();
    decoder
        .push_event(
            "content_block_start",
            &block_start(1, json!({"type": "text", "text": ""}))
                .1
                .to_string(),
        )
        .unwrap();
    decoder
        .push_event("content_block_delta", &text(1, "more").1.to_string())
        .unwrap();
    let message = decoder.message();
    assert_eq!(message["content"][0]["text"], "Prefill ");
    assert_eq!(message["content"][1]["text"], "more");
}

/// Tool input accumulation is linear: 1 MiB of input in 1-character deltas costs less than 3×
/// the same input in one delta, counted in bytes handled; and a complete-so-far repair after
/// every delta scans each byte once.
#[test]
fn tool_input_accumulation_is_linear() {
    let mut doc = String::from("{\"lines\": [");
    while doc.len() < 1 << 20 {
        doc.push_str("\"some text with \\\"escapes\\\" and ünïcödé\", ");
    }
    doc.push_str("\"end\"]}");
    let header = [
        start("m"),
        block_start(
            0,
            json!({"type": "tool_use", "id": "t", "name": "f", "input": {}}),
        ),
    ];

    let run_with = |pieces: &mut dyn Iterator<Item = &str>, repair_each: bool| -> (u64, Value) {
        let mut decoder = AnthropicDecoder::new();
        decoder.set_record_events(false);
        for (k, d) in &header {
            decoder.push_event(k, &d.to_string()).unwrap();
        }
        let mut data = String::new();
        for piece in pieces {
            data.clear();
            data.push_str(r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""#);
            for c in piece.chars() {
                if c == '"' || c == '\\' {
                    data.push('\\');
                }
                data.push(c);
            }
            data.push_str("\"}}");
            decoder.push_event("content_block_delta", &data).unwrap();
            if repair_each {
                let repair = decoder
                    .tool_input_repair(0, PartialMode::DropIncompleteStrings)
                    .unwrap();
                assert!(repair.suffix.len() <= 3);
            }
        }
        decoder
            .push_event("content_block_stop", &stop(0).1.to_string())
            .unwrap();
        let work = decoder.tool_input_work(0).unwrap();
        (work, decoder.message()["content"][0]["input"].clone())
    };

    let (one_delta_work, one_input) = run_with(&mut std::iter::once(doc.as_str()), false);
    let mut chars = doc.char_indices().map(|(i, c)| &doc[i..i + c.len_utf8()]);
    let (char_work, char_input) = run_with(&mut chars, false);
    assert_eq!(char_input, one_input);
    assert!(
        char_work < 3 * one_delta_work,
        "{char_work} vs {one_delta_work}"
    );

    // With a complete-so-far repair after every delta (what a UI does), still linear. A
    // 64 KiB prefix keeps the debug-build test fast; the partial_json unit tests cover 1 MiB.
    let small = format!(
        "{}\"end\"]}}",
        &doc[..doc[..1 << 16].rfind(", ").unwrap() + 2]
    );
    let (small_work, small_input) = run_with(&mut std::iter::once(small.as_str()), false);
    let mut chars = small
        .char_indices()
        .map(|(i, c)| &small[i..i + c.len_utf8()]);
    let (repaired_work, repaired_input) = run_with(&mut chars, true);
    assert_eq!(repaired_input, small_input);
    assert!(
        repaired_work < 3 * small_work,
        "{repaired_work} vs {small_work}"
    );
    assert_eq!(
        one_input["lines"].as_array().unwrap().last().unwrap(),
        "end"
    );
}

#[test]
fn snapshot_is_valid_json_at_every_event() {
    let stream = vec![
        start("m"),
        block_start(
            0,
            json!({"type": "tool_use", "id": "t", "name": "f", "input": {}}),
        ),
        input(0, "{\"a\": [1, 2"),
        input(0, ", {\"b\": \"x"),
        input(0, "y\"}]}"),
        stop(0),
        message_stop(),
    ];
    let mut decoder = AnthropicDecoder::new();
    let mut views = Vec::new();
    for (k, d) in &stream {
        decoder.push_event(k, &d.to_string()).unwrap();
        views.push(decoder.message());
    }
    assert_eq!(views[2]["content"][0]["input"], json!({"a": [1, 2]}));
    assert_eq!(views[3]["content"][0]["input"], json!({"a": [1, 2, {}]}));
    assert_eq!(
        views[4]["content"][0]["input"],
        json!({"a": [1, 2, {"b": "xy"}]})
    );
    assert_eq!(
        decoder.tool_input_view(0, PartialMode::TrailingStrings),
        Some(json!({"a": [1, 2, {"b": "xy"}]}))
    );
}

/// The hand-written string-delta fast path and the serde path give the same messages and events.
#[test]
fn fast_path_and_serde_path_agree_on_shared_streams() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for path in [
        "tests/decode/streams/anthropic/every_block_type.sse",
        "tests/decode/streams/anthropic/compaction_code_execution.sse",
        "tests/fixtures/anthropic/tool_use_response.sse",
        "tests/fixtures/anthropic/incomplete_partial_json_response.sse",
    ] {
        let input = std::fs::read(root.join(path)).unwrap();
        let mut results = Vec::new();
        for fast in [true, false] {
            let mut inner = AnthropicDecoder::new();
            inner.set_text_fast_path(fast);
            let mut decoder = StreamDecoder::new(inner);
            let events = decoder.feed(Bytes::from(input.clone())).unwrap();
            results.push((decoder.finish().unwrap(), events));
        }
        assert_eq!(results[0], results[1], "{path}");
    }
}

/// Server-side compaction (beta): a `compaction` block whose summary arrives in
/// `compaction_delta`s. `content` appends (anthropic-sdk-typescript's `BetaMessageStream`; the
/// API sends the summary in one delta, where appending and assigning agree), a non-null
/// `encrypted_content` replaces, a later `null` erases neither.
#[test]
fn compaction_delta_accumulates_onto_the_compaction_block() {
    let compaction = |content: Value, encrypted: Value| {
        delta(
            0,
            json!({"type": "compaction_delta", "content": content, "encrypted_content": encrypted}),
        )
    };
    let stream = vec![
        start("msg_c"),
        block_start(0, json!({"type": "compaction", "content": null})),
        ev("ping", json!({"type": "ping"})),
        compaction(json!("## Summary\n"), json!("opaque-1")),
        compaction(json!("The user asked about 漢字 😀."), json!("opaque-2")),
        compaction(Value::Null, Value::Null),
        stop(0),
        block_start(1, json!({"type": "text", "text": ""})),
        text(1, "Continuing."),
        stop(1),
        message_stop(),
    ];
    let (mut decoder, events, error) = run(&stream);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        decoder.message()["content"][0],
        json!({"type": "compaction", "content": "## Summary\nThe user asked about 漢字 😀.",
               "encrypted_content": "opaque-2"})
    );
    assert_eq!(
        serde_json::from_str::<Value>(&decoder.message_json()).unwrap(),
        decoder.message()
    );
    // The delta has no typed event of its own: it passes through whole.
    assert!(events.contains(&DecodeEvent::UnknownDelta {
        index: 0,
        delta: json!({"type": "compaction_delta", "content": "## Summary\n", "encrypted_content": "opaque-1"})
    }));
    assert_eq!(
        decoder.finish().unwrap()["content"][1]["text"],
        "Continuing."
    );

    // A compaction_delta is accumulated only onto a compaction block.
    let (decoder, _, error) = run(&[
        start("msg_d"),
        block_start(0, json!({"type": "text", "text": "kept"})),
        delta(0, json!({"type": "compaction_delta", "content": "x"})),
    ]);
    assert!(error.is_none());
    assert_eq!(
        decoder.message()["content"][0],
        json!({"type": "text", "text": "kept"})
    );
}

/// A delta type this crate does not model passes through even when a field has the name of a
/// known delta's field with another type; a known delta with such a field is still rejected.
#[test]
fn unknown_delta_with_fields_named_like_known_ones_passes_through() {
    let odd = json!({"type": "future_delta", "text": {"runs": [1, 2]}, "signature": 5, "partial_json": null});
    let (decoder, events, error) = run(&[
        start("msg_u"),
        block_start(0, json!({"type": "future_block"})),
        delta(0, odd.clone()),
    ]);
    assert!(error.is_none(), "{error:?}");
    assert!(events.contains(&DecodeEvent::UnknownDelta {
        index: 0,
        delta: odd
    }));
    assert_eq!(
        decoder.message()["content"][0],
        json!({"type": "future_block"})
    );

    let (_, _, error) = run(&[
        start("msg_v"),
        block_start(0, json!({"type": "text", "text": ""})),
        delta(
            0,
            json!({"type": "text_delta", "text": {"not": "a string"}}),
        ),
    ]);
    assert!(
        matches!(error, Some(DecodeError::InvalidJson { .. })),
        "{error:?}"
    );
    let (_, _, error) = run(&[
        start("msg_w"),
        delta(4, json!({"type": "future_delta", "text": 1})),
    ]);
    assert!(matches!(
        error,
        Some(DecodeError::Protocol(ProtocolError::UnknownIndex {
            index: 4,
            ..
        }))
    ));
}

/// Beta context management reports the edits it applied at the top level of `message_delta`
/// (beside `delta` and `usage`); the SDK accumulators assign it to the message. Fields of the
/// `delta` this crate does not model (`container`, `stop_details`) and usage fields
/// (`iterations`, `output_tokens_details`) are kept as sent.
#[test]
fn message_delta_context_management_and_new_fields_are_kept() {
    let applied = json!({"applied_edits": [{"type": "clear_tool_uses_20250919",
        "cleared_tool_uses": 3, "cleared_input_tokens": 4200}]});
    let iterations = json!([
        {"type": "compaction", "input_tokens": 60000, "output_tokens": 500},
        {"type": "message", "input_tokens": 600, "output_tokens": 40}
    ]);
    let stream = vec![
        start("msg_cm"),
        block_start(0, json!({"type": "text", "text": ""})),
        text(0, "ok"),
        stop(0),
        ev(
            "message_delta",
            json!({"type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": null, "stop_details": null,
                          "container": {"id": "container_1", "expires_at": "2026-01-01T00:00:00Z"}},
                "usage": {"output_tokens": 40, "iterations": iterations,
                          "output_tokens_details": {"thinking_tokens": 0}},
                "context_management": applied}),
        ),
        message_stop(),
    ];
    let (mut decoder, _, error) = run(&stream);
    assert!(error.is_none(), "{error:?}");
    let message = decoder.finish().unwrap();
    assert_eq!(message["context_management"], applied);
    assert_eq!(message["container"]["id"], "container_1");
    assert_eq!(message["stop_details"], Value::Null);
    assert!(message.as_object().unwrap().contains_key("stop_details"));
    assert_eq!(message["usage"]["iterations"], iterations);
    assert_eq!(message["usage"]["output_tokens"], 40);
    assert_eq!(
        serde_json::from_str::<Value>(&decoder.message_json()).unwrap(),
        message
    );
}

/// With programmatic tool calling, a turn the container carries on without sampling arrives
/// whole in `message_start` (result blocks, the next call to a client tool, `stop_reason`),
/// then `message_stop`. The call is complete: it is reported ready like a streamed one.
#[test]
fn tool_use_complete_in_message_start_is_ready() {
    let result = json!({"type": "code_execution_tool_result", "tool_use_id": "srvtoolu_r",
        "content": {"type": "code_execution_result", "stdout": "42\n", "stderr": "",
                    "return_code": 0, "content": []}});
    let call = json!({"type": "tool_use", "id": "toolu_next", "name": "lookup_customer",
        "input": {"id": "customer_123"},
        "caller": {"type": "code_execution_20250825", "tool_id": "srvtoolu_r"}});
    let begin = ev(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_ptc", "type": "message",
            "role": "assistant", "model": "claude-test", "content": [result, call],
            "container": {"id": "container_1", "expires_at": "2026-01-01T00:00:00Z"},
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 0, "output_tokens": 0}}}),
    );
    let (mut decoder, events, error) = run(&[begin, message_stop()]);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        kinds(&events),
        ["message_start", "tool_use_ready", "message_stop"]
    );
    assert_eq!(
        events[1],
        DecodeEvent::ToolUseReady {
            index: 1,
            id: "toolu_next".into(),
            name: "lookup_customer".into(),
            input: json!({"id": "customer_123"}),
        }
    );
    let message = decoder.finish().unwrap();
    assert_eq!(message["stop_reason"], "tool_use");
    assert_eq!(message["content"][0], result);
    assert_eq!(message["content"][1], call);

    // Also when events are off: the sealing events always come.
    let mut quiet = AnthropicDecoder::new();
    quiet.set_record_events(false);
    let (kind, data) = &begin_ptc_again();
    quiet.push_event(kind, &data.to_string()).unwrap();
    let mut out = Vec::new();
    quiet.drain_events(&mut out);
    assert_eq!(kinds(&out), ["tool_use_ready"]);
}

fn begin_ptc_again() -> (String, Value) {
    ev(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_ptc2", "type": "message",
            "role": "assistant", "model": "claude-test",
            "content": [{"type": "tool_use", "id": "toolu_q", "name": "f", "input": {}}],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 0, "output_tokens": 0}}}),
    )
}

/// The tool-call events are for calls the client runs: a server tool's input cut by the limit
/// or not valid JSON is not reported as one (an agent would answer it, which the API refuses);
/// the message still shows what arrived.
#[test]
fn server_tool_calls_get_no_client_call_events() {
    let stream = vec![
        start("msg_s"),
        block_start(
            0,
            json!({"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "echo", "server_name": "s", "input": {}}),
        ),
        input(0, "{\"a\": 1} and more"),
        stop(0),
        block_start(
            1,
            json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}),
        ),
        input(1, "{\"query\": \"why is"),
        message_delta("max_tokens", json!({"output_tokens": 100})),
        message_stop(),
    ];
    let (mut decoder, events, error) = run(&stream);
    assert!(error.is_none(), "{error:?}");
    assert!(
        !events.iter().any(|e| matches!(
            e,
            DecodeEvent::ToolUseReady { .. }
                | DecodeEvent::ToolUseInvalid { .. }
                | DecodeEvent::ToolUseTruncated { .. }
        )),
        "{events:?}"
    );
    let message = decoder.finish().unwrap();
    assert_eq!(message["content"][0]["input"], json!({"a": 1}));
    assert_eq!(message["content"][1]["input"], json!({}));
}

/// A gateway that repeats `message_start` for the open message (LiteLLM's Responses bridge,
/// Bifrost) loses nothing: the repeat is ignored, as anthropic-sdk-python ignores it. Another
/// message's start (an intermediary splicing a retried generation in) is still an error, and so
/// is any start after `message_stop`.
#[test]
fn repeated_message_start_of_the_open_message_is_ignored() {
    let mut again = start("msg_r");
    again.1["message"]["usage"]["input_tokens"] = json!(99);
    let stream = vec![
        start("msg_r"),
        again.clone(),
        block_start(0, json!({"type": "text", "text": ""})),
        text(0, "Hello"),
        stop(0),
        message_delta("end_turn", json!({"output_tokens": 2})),
        message_stop(),
    ];
    let (mut decoder, events, error) = run(&stream);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        kinds(&events)
            .iter()
            .filter(|k| *k == "message_start")
            .count(),
        1
    );
    let message = decoder.finish().unwrap();
    assert_eq!(
        message["usage"]["input_tokens"], 10,
        "the first start is kept"
    );
    assert_eq!(message["content"][0]["text"], "Hello");

    let (_, _, error) = run(&[start("msg_r"), message_stop(), start("msg_r")]);
    assert!(matches!(
        error,
        Some(DecodeError::Protocol(ProtocolError::DuplicateStart { .. }))
    ));
}

/// Tool input fragments are raw JSON text: a fragment may end inside an escape or between the
/// two halves of a surrogate pair. The input is parsed from the whole text, and every snapshot
/// on the way is valid JSON.
#[test]
fn tool_input_split_inside_escapes_and_surrogate_pairs() {
    let whole = r#"{"s": "a😀\"b\\c\u00e9\ud83d\ude00\n", "n": [1.5e3, -0]}"#;
    let expected: Value = serde_json::from_str(whole).unwrap();
    // Every split point (byte offsets on char boundaries), two and three fragments.
    let bounds: Vec<usize> = (0..=whole.len())
        .filter(|&i| whole.is_char_boundary(i))
        .collect();
    for &a in &bounds {
        for &b in bounds.iter().filter(|&&b| b >= a).step_by(3) {
            let mut stream = vec![
                start("m"),
                block_start(
                    0,
                    json!({"type": "tool_use", "id": "t", "name": "f", "input": {}}),
                ),
            ];
            for piece in [&whole[..a], &whole[a..b], &whole[b..]] {
                stream.push(input(0, piece));
            }
            let mut decoder = AnthropicDecoder::new();
            for (k, d) in &stream {
                decoder.push_event(k, &d.to_string()).unwrap();
                let snapshot = decoder.message();
                if k != "message_start" {
                    assert!(snapshot["content"][0]["input"].is_object(), "{a} {b}");
                }
                assert_eq!(
                    serde_json::from_str::<Value>(&decoder.message_json()).unwrap(),
                    snapshot
                );
            }
            decoder
                .push_event("content_block_stop", &stop(0).1.to_string())
                .unwrap();
            let mut events = Vec::new();
            decoder.drain_events(&mut events);
            assert!(
                events.iter().any(|e| matches!(e,
                    DecodeEvent::ToolUseReady { input, .. } if *input == expected)),
                "split at {a}, {b}"
            );
        }
    }
}

/// Pushes raw event data (JSON text a `Value` cannot hold, such as a lone surrogate escape).
fn push_raw(decoder: &mut AnthropicDecoder, kind: &str, data: &str) {
    decoder
        .push_event(kind, data)
        .unwrap_or_else(|e| panic!("{kind} {data}: {e}"));
}

fn push_all(decoder: &mut AnthropicDecoder, events: &[(String, Value)]) {
    for (kind, data) in events {
        push_raw(decoder, kind, &data.to_string());
    }
}

/// Half of a surrogate pair escaped alone (`"\ud83d"`: what `JSON.stringify` writes for a
/// string cut inside an emoji, which a JavaScript gateway re-chunking text by UTF-16 index
/// sends) becomes U+FFFD, in text, thinking and tool input, unless the block's next delta
/// starts with the other half (see `a_character_split_between_two_deltas_is_joined`); the
/// stream goes on.
#[test]
fn a_lone_surrogate_escape_in_a_delta_becomes_a_replacement_character() {
    let mut decoder = AnthropicDecoder::new();
    push_all(
        &mut decoder,
        &[
            start("m"),
            block_start(
                0,
                json!({"type": "thinking", "thinking": "", "signature": ""}),
            ),
        ],
    );
    push_raw(
        &mut decoder,
        "content_block_delta",
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm \udc00"}}"#,
    );
    push_all(
        &mut decoder,
        &[stop(0), block_start(1, json!({"type": "text", "text": ""}))],
    );
    for half in [r"Hi \ud83d", r"\ude00 there"] {
        let data = format!(
            r#"{{"type":"content_block_delta","index":1,"delta":{{"type":"text_delta","text":"{half}"}}}}"#
        );
        push_raw(&mut decoder, "content_block_delta", &data);
    }
    push_all(
        &mut decoder,
        &[
            stop(1),
            block_start(
                2,
                json!({"type": "tool_use", "id": "t", "name": "say", "input": {}}),
            ),
        ],
    );
    push_raw(
        &mut decoder,
        "content_block_delta",
        r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"s\": \"a\ud83d\"}"}}"#,
    );
    push_all(
        &mut decoder,
        &[
            stop(2),
            message_delta("tool_use", json!({"output_tokens": 5})),
            message_stop(),
        ],
    );
    let message = decoder.finish().unwrap();
    assert_eq!(message["content"][0]["thinking"], "hm \u{fffd}");
    assert_eq!(message["content"][1]["text"], "Hi \u{1F600} there");
    assert_eq!(message["content"][2]["input"], json!({"s": "a\u{fffd}"}));
}

/// The text, thinking and tool-input deltas of one block, as a gateway splitting the text by
/// UTF-16 index sends them.
fn split_deltas(
    index: usize,
    kind: &str,
    field: &str,
    parts: &[&str],
    compact: bool,
) -> Vec<String> {
    parts
        .iter()
        .map(|part| {
            if compact {
                format!(
                    r#"{{"type":"content_block_delta","index":{index},"delta":{{"type":"{kind}","{field}":"{part}"}}}}"#
                )
            } else {
                // Another field order: the general (serde) path, not the template.
                format!(
                    r#"{{"delta": {{"{field}": "{part}", "type": "{kind}"}}, "index": {index}, "type": "content_block_delta"}}"#
                )
            }
        })
        .collect()
}

/// A character outside the BMP split between two deltas of a block (`..\ud83d"`, then
/// `"\ude00..`) is joined back: in the text, the thinking and the tool input, by the template
/// path and the general path. The delta that ends with the high half sends the text before
/// it; the next one starts with the character. A high half whose low half does not come next
/// (the block stops, or the next delta starts otherwise) and a low half without its high one
/// are U+FFFD, a high half left at the block's stop sent as a delta of its own before it.
#[test]
fn a_character_split_between_two_deltas_is_joined() {
    for (fast, compact) in [(true, true), (false, true), (true, false)] {
        let mut decoder = AnthropicDecoder::new();
        decoder.set_text_fast_path(fast);
        push_all(
            &mut decoder,
            &[
                start("m"),
                block_start(
                    0,
                    json!({"type": "thinking", "thinking": "", "signature": ""}),
                ),
                block_start(1, json!({"type": "text", "text": ""})),
                block_start(
                    2,
                    json!({"type": "tool_use", "id": "t", "name": "say", "input": {}}),
                ),
                block_start(3, json!({"type": "text", "text": ""})),
            ],
        );
        let thinking = split_deltas(
            0,
            "thinking_delta",
            "thinking",
            &[r"a \ud83e", r"\udd14 b"],
            compact,
        );
        let text = split_deltas(
            1,
            "text_delta",
            "text",
            &[r"Hi \ud83d", r"\ud83d", r"\ude00", r"\ude00 x \ud800"],
            compact,
        );
        let input = split_deltas(
            2,
            "input_json_delta",
            "partial_json",
            &[r#"{\"s\": \"\ud83d"#, r#"\ude00\"}"#],
            compact,
        );
        let lone = split_deltas(3, "text_delta", "text", &[r"tail \ud83d"], compact);
        // Interleaved blocks: each waits for its own half.
        let order = [
            &thinking[0],
            &text[0],
            &input[0],
            &thinking[1],
            &text[1],
            &input[1],
            &text[2],
            &lone[0],
            &text[3],
        ];
        for data in order {
            push_raw(&mut decoder, "content_block_delta", data);
        }
        // Before the stop, a held half shows as U+FFFD in the snapshot.
        assert_eq!(decoder.message()["content"][3]["text"], "tail \u{FFFD}");
        push_all(
            &mut decoder,
            &[
                stop(0),
                stop(1),
                stop(2),
                stop(3),
                message_delta("tool_use", json!({"output_tokens": 5})),
                message_stop(),
            ],
        );
        let mut events = Vec::new();
        decoder.drain_events(&mut events);
        let message = decoder.finish().unwrap();
        let case = format!("fast path {fast}, compact {compact}");
        assert_eq!(message["content"][0]["thinking"], "a \u{1F914} b", "{case}");
        // `\ud83d` then `\ud83d`: the first has no low half after it.
        assert_eq!(
            message["content"][1]["text"], "Hi \u{FFFD}\u{1F600}\u{FFFD} x \u{FFFD}",
            "{case}"
        );
        assert_eq!(
            message["content"][2]["input"],
            json!({"s": "\u{1F600}"}),
            "{case}"
        );
        assert_eq!(message["content"][3]["text"], "tail \u{FFFD}", "{case}");
        // The deltas sent add up to each block.
        let mut sent = [String::new(), String::new(), String::new(), String::new()];
        let mut texts_of_1 = Vec::new();
        for event in &events {
            match event {
                DecodeEvent::ThinkingDelta { index, thinking } => sent[*index].push_str(thinking),
                DecodeEvent::TextDelta { index, text } => {
                    sent[*index].push_str(text);
                    if *index == 1 {
                        texts_of_1.push(text.as_str());
                    }
                }
                DecodeEvent::InputJsonDelta {
                    index,
                    partial_json,
                } => sent[*index].push_str(partial_json),
                _ => {}
            }
        }
        assert_eq!(sent[0], "a \u{1F914} b", "{case}");
        assert_eq!(sent[1], message["content"][1]["text"], "{case}");
        assert_eq!(sent[2], "{\"s\": \"\u{1F600}\"}", "{case}");
        assert_eq!(sent[3], "tail \u{FFFD}", "{case}");
        assert_eq!(
            texts_of_1,
            ["Hi ", "\u{FFFD}", "\u{1F600}", "\u{FFFD} x ", "\u{FFFD}"],
            "{case}"
        );
        // The lone high half of block 3 is sent right before its stop.
        let stop_3 = events
            .iter()
            .position(|e| matches!(e, DecodeEvent::BlockStop { index: 3 }))
            .unwrap();
        assert!(
            matches!(&events[stop_3 - 1], DecodeEvent::TextDelta { index: 3, text } if text == "\u{FFFD}"),
            "{case}"
        );
    }
}

/// A stream cut while a tool input holds a high half: the input is sealed with U+FFFD in its
/// place, as the half reads alone.
#[test]
fn a_held_half_in_a_cut_tool_input_is_a_replacement_character() {
    let mut decoder = AnthropicDecoder::new();
    push_all(
        &mut decoder,
        &[
            start("m"),
            block_start(
                0,
                json!({"type": "tool_use", "id": "t", "name": "say", "input": {}}),
            ),
        ],
    );
    push_raw(
        &mut decoder,
        "content_block_delta",
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"s\": \"\ud83d"}}"#,
    );
    assert_eq!(decoder.tool_input_text(0), Some(r#"{"s": ""#));
    push_all(
        &mut decoder,
        &[message_delta("max_tokens", json!({"output_tokens": 5}))],
    );
    let mut events = Vec::new();
    decoder.drain_events(&mut events);
    assert_eq!(decoder.tool_input_text(0), Some("{\"s\": \"\u{FFFD}"));
    assert!(events.iter().any(|e| matches!(
        e,
        DecodeEvent::ToolUseTruncated { partial_json, .. } if partial_json == "{\"s\": \"\u{FFFD}"
    )));
}

/// A gateway that writes `null` for an empty field (`"signature": null` in a thinking block's
/// start) still gets its thinking and signature accumulated: the block was kept as an unknown
/// one, and its deltas were ignored.
#[test]
fn a_thinking_block_announced_with_a_null_signature_accumulates() {
    let (decoder, _, error) = run(&[
        start("m"),
        block_start(
            0,
            json!({"type": "thinking", "thinking": "", "signature": null}),
        ),
        delta(0, json!({"type": "thinking_delta", "thinking": "Let me "})),
        delta(0, json!({"type": "thinking_delta", "thinking": "think."})),
        delta(0, json!({"type": "signature_delta", "signature": "sig1"})),
        stop(0),
        block_start(1, json!({"type": "text", "text": null})),
        text(1, "done"),
        stop(1),
        message_delta("end_turn", json!({"output_tokens": 5})),
        message_stop(),
    ]);
    assert!(error.is_none(), "{error:?}");
    let message = decoder.message();
    assert_eq!(
        message["content"][0],
        json!({"type": "thinking", "thinking": "Let me think.", "signature": "sig1"})
    );
    assert_eq!(message["content"][1]["text"], "done");
}

/// `null` in a `message_delta`'s delta keeps what `message_start` set (as for usage): a proxy
/// writing `"container": null` does not erase the container.
#[test]
fn a_null_in_a_message_delta_keeps_the_earlier_value() {
    let (_, data) = start("m");
    let mut data = data;
    data["message"]["container"] = json!({"id": "cntr_1", "expires_at": "2026-12-04T00:00:00Z"});
    let (decoder, _, error) = run(&[
        ("message_start".to_owned(), data),
        ev(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "container": null}, "usage": {"output_tokens": 2}}),
        ),
        message_stop(),
    ]);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(decoder.message()["container"]["id"], "cntr_1");
}

/// `null` token counts in `message_start` (proxies) read as 0 until a delta assigns them; they
/// used to fail the stream.
#[test]
fn null_token_counts_in_message_start_read_as_zero() {
    let (_, mut data) = start("m");
    data["message"]["usage"] = json!({"input_tokens": null, "output_tokens": null});
    let (decoder, _, error) = run(&[
        ("message_start".to_owned(), data),
        message_delta("end_turn", json!({"output_tokens": 20})),
        message_stop(),
    ]);
    assert!(error.is_none(), "{error:?}");
    let usage = &decoder.message()["usage"];
    assert_eq!(usage["input_tokens"], 0);
    assert_eq!(usage["output_tokens"], 20);
}

/// An event read only to be passed on or reported (an unknown event, an `error`) reads a lone
/// surrogate escape as U+FFFD like every other event: its data stays an object, and the error
/// keeps its type (before, such data passed through as the raw text of the event).
#[test]
fn lone_surrogates_in_unknown_and_error_events_read_as_replacement_characters() {
    let mut decoder = AnthropicDecoder::new();
    let mut events = Vec::new();
    let start = start("msg_1");
    decoder.push_event(&start.0, &start.1.to_string()).unwrap();
    decoder
        .push_event(
            "future_event",
            r#"{"type":"future_event","note":"cut \ud83d"}"#,
        )
        .unwrap();
    let error = decoder
        .push_event(
            "error",
            r#"{"type":"error","error":{"type":"overloaded_error","message":"busy \ud83d"}}"#,
        )
        .unwrap_err();
    decoder.drain_events(&mut events);
    assert!(
        events.contains(&DecodeEvent::Unknown {
            event_type: "future_event".into(),
            data: json!({"type": "future_event", "note": "cut \u{fffd}"}),
        }),
        "{events:?}"
    );
    match error {
        DecodeError::Provider {
            error_type,
            message,
            ..
        } => {
            assert_eq!(error_type, "overloaded_error");
            assert_eq!(message, "busy \u{fffd}");
        }
        other => panic!("expected a provider error, got {other:?}"),
    }
}

/// Gateways that relay OpenAI streams too may end an Anthropic stream with OpenAI's `data:
/// [DONE]` (no `event:` line). It is not an event: the whole answer decodes as without it, with
/// or without the stream's own `event:` lines. (It failed as invalid JSON after `message_stop`.)
#[test]
fn a_done_marker_after_the_stream_is_not_an_event() {
    let events = vec![
        start("msg_done"),
        block_start(0, json!({"type": "text", "text": ""})),
        text(0, "Hello"),
        stop(0),
        message_delta("end_turn", json!({"output_tokens": 2})),
        message_stop(),
    ];
    let named = to_sse(&events);
    let unnamed: String = events
        .iter()
        .map(|(_, data)| format!("data: {data}\n\n"))
        .collect();
    let expect = |sse: &str| {
        let mut decoder = StreamDecoder::for_provider(ferroloop::decode::Provider::Anthropic);
        let events = decoder.feed(Bytes::from(sse.to_owned())).unwrap();
        (events, decoder.finish().unwrap())
    };
    let reference = expect(&named);
    for body in [&named, &unnamed] {
        for marker in [
            "data: [DONE]\n\n",
            "data: [DONE]  \n\n",
            "event: message\ndata: [DONE]\n\n",
        ] {
            assert_eq!(expect(&format!("{body}{marker}")), reference, "{marker:?}");
        }
    }
    // Only the marker: other data that is not JSON still fails the stream.
    for marker in ["data: [DONE]x\n\n", "data: DONE\n\n"] {
        let mut decoder = StreamDecoder::for_provider(ferroloop::decode::Provider::Anthropic);
        let fed = decoder.feed(Bytes::from(format!("{named}{marker}")));
        assert!(
            matches!(fed, Err(DecodeError::InvalidJson { .. })),
            "{marker:?}: {fed:?}"
        );
    }
}

/// A `null` in a later `message_delta` keeps the stop reason (README: "null keeps the old value
/// — in usage and in a `message_delta`'s other fields"): a proxy's usage-only `message_delta`
/// after the real one (`"stop_reason": null, "stop_sequence": null`) erased `end_turn`, and the
/// final message said the model had not stopped.
#[test]
fn a_null_stop_reason_in_a_later_message_delta_keeps_the_earlier_one() {
    let events = vec![
        start("msg_null_stop"),
        block_start(0, json!({"type": "text", "text": ""})),
        text(0, "hi"),
        stop(0),
        ev(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "stop_sequence", "stop_sequence": "END"},
                "usage": {"output_tokens": 5}}),
        ),
        ev(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": null, "stop_sequence": null},
                "usage": {"output_tokens": 6}}),
        ),
        message_stop(),
    ];
    let (mut decoder, _, error) = run(&events);
    assert!(error.is_none(), "{error:?}");
    let message = decoder.finish().unwrap();
    assert_eq!(message["stop_reason"], "stop_sequence");
    assert_eq!(message["stop_sequence"], "END");
    assert_eq!(message["usage"]["output_tokens"], 6);
}

/// Token counts written as whole floats (`5.0`, as a proxy holding counts as floats relays
/// them): `message_start`'s failed the whole stream as "invalid JSON", and `message_delta`'s
/// were ignored, so the final usage kept the smaller counts of the start.
#[test]
fn usage_counts_written_as_whole_floats_are_read_as_counts() {
    let events = vec![
        ev(
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_float", "type": "message",
                "role": "assistant", "model": "claude-test", "content": [], "stop_reason": null,
                "usage": {"input_tokens": 10.0, "output_tokens": 1.0, "cache_read_input_tokens": 7.0}}}),
        ),
        block_start(0, json!({"type": "text", "text": ""})),
        text(0, "hi"),
        stop(0),
        message_delta(
            "end_turn",
            json!({"output_tokens": 42.0, "input_tokens": 12.0}),
        ),
        message_stop(),
    ];
    let (mut decoder, _, error) = run(&events);
    assert!(error.is_none(), "{error:?}");
    let message = decoder.finish().unwrap();
    assert_eq!(
        message["usage"],
        json!({"input_tokens": 12, "output_tokens": 42, "cache_read_input_tokens": 7})
    );
}
