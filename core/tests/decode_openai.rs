//! Hand-written OpenAI Chat Completions and Responses streams.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use bytes::Bytes;
use ferroloop::decode::{
    DecodeError, DecodeEvent, EventDecoder, OpenAiChatDecoder, OpenAiResponsesDecoder,
    ProtocolError, Provider, StreamDecoder,
};
use serde_json::{Value, json};

fn chunk(choices: Value) -> String {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
        "system_fingerprint": "fp_1", "choices": choices})
    .to_string()
}

fn chat(chunks: &[String]) -> (OpenAiChatDecoder, Vec<DecodeEvent>, Option<DecodeError>) {
    let mut decoder = OpenAiChatDecoder::new();
    let mut events = Vec::new();
    let mut first = None;
    for data in chunks {
        let result = decoder.push_event("message", data);
        decoder.drain_events(&mut events);
        if let Err(e) = result {
            first.get_or_insert(e);
        }
    }
    (decoder, events, first)
}

#[test]
fn chat_parallel_tool_calls_merge_by_index_and_seal() {
    let chunks = vec![
        chunk(json!([{"index": 0, "delta": {"role": "assistant", "content": null, "tool_calls": [
            {"index": 0, "id": "call_a", "type": "function", "function": {"name": "read", "arguments": ""}}]},
            "finish_reason": null}])),
        chunk(json!([{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"pa"}}]}}])),
        chunk(json!([{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "th\": \"x\"}"}}]}}])),
        chunk(json!([{"index": 0, "delta": {"tool_calls": [
            {"index": 1, "id": "call_b", "type": "function", "function": {"name": "list", "arguments": ""}}]}}])),
        chunk(json!([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}])),
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
            "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}})
        .to_string(),
        "[DONE]".to_owned(),
    ];
    let (mut decoder, events, error) = chat(&chunks);
    assert!(error.is_none(), "{error:?}");
    let ready: Vec<(usize, &DecodeEvent)> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e, DecodeEvent::ToolUseReady { .. }))
        .collect();
    assert_eq!(ready.len(), 2);
    assert_eq!(
        ready[0].1,
        &DecodeEvent::ToolUseReady {
            index: 0,
            id: "call_a".into(),
            name: "read".into(),
            input: json!({"path": "x"})
        }
    );
    // The first call is sealed as soon as the second starts, before the finish_reason.
    let finish_at = events
        .iter()
        .position(|e| matches!(e, DecodeEvent::MessageDelta { .. }))
        .unwrap();
    assert!(ready[0].0 < finish_at);
    assert_eq!(
        ready[1].1,
        &DecodeEvent::ToolUseReady {
            index: 1,
            id: "call_b".into(),
            name: "list".into(),
            input: json!({})
        }
    );
    let message = decoder.finish().unwrap();
    assert_eq!(
        message["choices"][0]["message"]["tool_calls"],
        json!([
            {"id": "call_a", "type": "function", "function": {"name": "read", "arguments": "{\"path\": \"x\"}"}},
            {"id": "call_b", "type": "function", "function": {"name": "list", "arguments": ""}}
        ])
    );
    assert_eq!(message["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(message["usage"]["total_tokens"], 12);
    assert_eq!(message["object"], "chat.completion");
    // The usage-only chunk carried no fingerprint: the SDK assigns it from every chunk.
    assert_eq!(message["system_fingerprint"], Value::Null);
}

#[test]
fn chat_text_deltas_and_length_truncation_of_tool_arguments() {
    let chunks = vec![
        chunk(
            json!([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]),
        ),
        chunk(json!([{"index": 0, "delta": {"content": "Hel"}, "finish_reason": null}])),
        chunk(
            json!([{"index": 0, "delta": {"content": "lo \"x\" 漢😀\n"}, "finish_reason": null}]),
        ),
        chunk(json!([{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "call_c", "type": "function", "function": {"name": "f", "arguments": "{\"a\": [1,"}}]}}])),
        chunk(json!([{"index": 0, "delta": {}, "finish_reason": "length"}])),
        "[DONE]".to_owned(),
    ];
    let (mut decoder, events, error) = chat(&chunks);
    assert!(error.is_none());
    let texts: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            DecodeEvent::TextDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["Hel", "lo \"x\" 漢😀\n"]);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, DecodeEvent::ToolUseTruncated { id, .. } if id == "call_c"))
    );
    let message = decoder.finish().unwrap();
    assert_eq!(
        message["choices"][0]["message"]["content"],
        "Hello \"x\" 漢😀\n"
    );
}

#[test]
fn chat_truncation_error_and_protocol() {
    let (mut decoder, _, error) = chat(&[chunk(json!([{"index": 0, "delta": {"content": "hi"}}]))]);
    assert!(error.is_none());
    match decoder.finish() {
        Err(DecodeError::Truncated { partial, .. }) => {
            assert_eq!(partial["choices"][0]["message"]["content"], "hi");
        }
        other => panic!("expected Truncated, got {other:?}"),
    }

    let (mut decoder, _, error) = chat(&[
        chunk(json!([{"index": 0, "delta": {"content": "hi"}}])),
        json!({"error": {"message": "The server had an error", "type": "server_error"}})
            .to_string(),
    ]);
    assert!(
        matches!(&error, Some(DecodeError::Provider { error_type, .. }) if error_type == "server_error")
    );
    assert!(matches!(
        decoder.finish(),
        Err(DecodeError::Provider { .. })
    ));

    let (_, _, error) = chat(&["[DONE]".to_owned()]);
    assert!(matches!(
        error,
        Some(DecodeError::Protocol(ProtocolError::BeforeStart { .. }))
    ));

    let (_, _, error) = chat(&[
        chunk(json!([{"index": 0, "delta": {"content": "hi"}}])),
        "[DONE]".to_owned(),
        chunk(json!([{"index": 0, "delta": {"content": "late"}}])),
    ]);
    assert!(matches!(
        error,
        Some(DecodeError::Protocol(ProtocolError::AfterEnd { .. }))
    ));

    // Huge indexes are not allocated for.
    let (_, _, error) = chat(&[
        chunk(json!([{"index": 0, "delta": {"content": "hi"}}])),
        chunk(
            json!([{"index": 0, "delta": {"tool_calls": [{"index": 1_000_000_000_000u64, "id": "x"}]}}]),
        ),
    ]);
    assert!(error.is_none(), "{error:?}");
    let (_, _, error) = chat(&[chunk(json!([{"index": 4_000_000_000u64, "delta": {}}]))]);
    assert!(matches!(
        error,
        Some(DecodeError::Protocol(ProtocolError::Malformed { .. }))
    ));

    // `[DONE]` must be exactly that data.
    let (_, _, error) = chat(&[
        chunk(json!([{"index": 0, "delta": {"content": "hi"}}])),
        " [DONE]".to_owned(),
    ]);
    assert!(matches!(error, Some(DecodeError::InvalidJson { .. })));
}

#[test]
fn chat_tool_call_id_and_name_are_set_once() {
    let call = |args: &str| {
        json!([{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "call_r", "type": "function", "function": {"name": "run", "arguments": args}}]}}])
    };
    let chunks = vec![
        chunk(json!([{"index": 0, "delta": {"role": "assistant"}}])),
        chunk(call("{\"cmd\":")),
        chunk(call(" \"ls\"}")),
        chunk(json!([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}])),
        "[DONE]".to_owned(),
    ];
    let (mut decoder, events, error) = chat(&chunks);
    assert!(error.is_none());
    let message = decoder.finish().unwrap();
    assert_eq!(
        message["choices"][0]["message"]["tool_calls"][0],
        json!({"id": "call_r", "type": "function", "function": {"name": "run", "arguments": "{\"cmd\": \"ls\"}"}})
    );
    assert!(events.contains(&DecodeEvent::ToolUseReady {
        index: 0,
        id: "call_r".into(),
        name: "run".into(),
        input: json!({"cmd": "ls"})
    }));
}

/// A `null` in a later delta keeps the earlier value for the keys a delta replaces too: a server
/// sending `"role": null` (and a tool call's `"type": null`) on every later delta left the final
/// message with `"role": null` and the call with `"type": null`, which no API takes back.
#[test]
fn chat_null_role_and_type_in_later_deltas_keep_the_earlier_values() {
    let chunks = vec![
        chunk(
            json!([{"index": 0, "delta": {"role": "assistant", "content": "a", "tool_calls": [
            {"index": 0, "id": "call_n", "type": "function", "function": {"name": "f", "arguments": ""}}]}}]),
        ),
        chunk(
            json!([{"index": 0, "delta": {"role": null, "content": "b", "tool_calls": [
            {"index": 0, "id": null, "type": null, "function": {"name": null, "arguments": "{}"}}]}}]),
        ),
        chunk(json!([{"index": 0, "delta": {"role": null}, "finish_reason": "tool_calls"}])),
        "[DONE]".to_owned(),
    ];
    let (mut decoder, _, error) = chat(&chunks);
    assert!(error.is_none(), "{error:?}");
    let message = decoder.finish().unwrap();
    assert_eq!(
        message["choices"][0]["message"],
        json!({"role": "assistant", "content": "ab", "tool_calls": [
            {"id": "call_n", "type": "function", "function": {"name": "f", "arguments": "{}"}}]})
    );
}

#[test]
fn chat_unknown_delta_fields_accumulate_like_the_sdk() {
    let chunks = vec![
        chunk(json!([{"index": 0, "delta": {"role": "assistant", "reasoning_content": "th"}}])),
        chunk(
            json!([{"index": 0, "delta": {"reasoning_content": "ink", "content": "ok", "audio": {"id": "a1"}}}]),
        ),
        chunk(
            json!([{"index": 0, "delta": {"audio": {"transcript": "x"}}, "finish_reason": "stop"}]),
        ),
        "[DONE]".to_owned(),
    ];
    let (mut decoder, _, error) = chat(&chunks);
    assert!(error.is_none());
    let message = decoder.finish().unwrap();
    assert_eq!(
        message["choices"][0]["message"],
        json!({"role": "assistant", "reasoning_content": "think", "content": "ok", "audio": {"id": "a1", "transcript": "x"}})
    );
}

fn responses_stream() -> Vec<(String, Value)> {
    let e = |kind: &str, mut data: Value| {
        data["type"] = json!(kind);
        (kind.to_owned(), data)
    };
    let response = json!({"id": "resp_1", "object": "response", "status": "in_progress", "model": "gpt-test", "output": []});
    let mut done_response = response.clone();
    done_response["status"] = json!("completed");
    done_response["output"] = json!([
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Hi there", "annotations": []}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": "{\"a\":1}", "status": "completed"}
    ]);
    done_response["usage"] = json!({"input_tokens": 3, "output_tokens": 4, "total_tokens": 7});
    vec![
        e("response.created", json!({"response": response})),
        e("response.in_progress", json!({"response": response})),
        e(
            "response.output_item.added",
            json!({"output_index": 0, "item":
            {"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []}}),
        ),
        e(
            "response.content_part.added",
            json!({"output_index": 0, "content_index": 0, "item_id": "msg_1",
            "part": {"type": "output_text", "text": "", "annotations": []}}),
        ),
        e(
            "response.output_text.delta",
            json!({"output_index": 0, "content_index": 0, "item_id": "msg_1", "delta": "Hi"}),
        ),
        e(
            "response.output_text.delta",
            json!({"output_index": 0, "content_index": 0, "item_id": "msg_1", "delta": " there"}),
        ),
        e(
            "response.output_text.done",
            json!({"output_index": 0, "content_index": 0, "item_id": "msg_1", "text": "Hi there"}),
        ),
        e(
            "response.output_item.done",
            json!({"output_index": 0, "item": done_response["output"][0]}),
        ),
        e(
            "response.output_item.added",
            json!({"output_index": 1, "item":
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": "", "status": "in_progress"}}),
        ),
        e(
            "response.function_call_arguments.delta",
            json!({"output_index": 1, "item_id": "fc_1", "delta": "{\"a\""}),
        ),
        e(
            "response.function_call_arguments.delta",
            json!({"output_index": 1, "item_id": "fc_1", "delta": ":1}"}),
        ),
        e(
            "response.function_call_arguments.done",
            json!({"output_index": 1, "item_id": "fc_1", "arguments": "{\"a\":1}"}),
        ),
        e(
            "response.output_item.done",
            json!({"output_index": 1, "item": done_response["output"][1]}),
        ),
        e(
            "response.reasoning_summary_text.delta",
            json!({"output_index": 2, "delta": "future"}),
        ),
        e("response.completed", json!({"response": done_response})),
    ]
}

#[test]
fn responses_stream_accumulates_and_seals_function_calls() {
    let stream = responses_stream();
    let sse: String = stream
        .iter()
        .map(|(k, d)| format!("event: {k}\ndata: {d}\n\n"))
        .collect();
    let mut whole = StreamDecoder::for_provider(Provider::OpenAiResponses);
    let events = whole.feed(Bytes::from(sse.clone())).unwrap();
    let final_message = whole.finish().unwrap();
    assert_eq!(final_message["status"], "completed");
    assert_eq!(final_message["output"][0]["content"][0]["text"], "Hi there");
    let ready: Vec<&DecodeEvent> = events
        .iter()
        .filter(|e| matches!(e, DecodeEvent::ToolUseReady { .. }))
        .collect();
    assert_eq!(
        ready,
        [&DecodeEvent::ToolUseReady {
            index: 1,
            id: "call_1".into(),
            name: "f".into(),
            input: json!({"a": 1})
        }]
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, DecodeEvent::Unknown { event_type, .. }
        if event_type == "response.reasoning_summary_text.delta"))
    );

    // The accumulated snapshot before response.completed matches the authoritative response.
    let mut decoder = OpenAiResponsesDecoder::new();
    for (k, d) in &stream[..stream.len() - 1] {
        decoder.push_event(k, &d.to_string()).unwrap();
    }
    let mut accumulated = decoder.message();
    accumulated["status"] = json!("completed");
    accumulated["usage"] = final_message["usage"].clone();
    assert_eq!(accumulated, final_message);

    for chunk in [1, 7, 64] {
        let mut decoder = StreamDecoder::for_provider(Provider::OpenAiResponses);
        let mut chunked = Vec::new();
        for piece in sse.as_bytes().chunks(chunk) {
            decoder
                .feed_into(Bytes::copy_from_slice(piece), &mut chunked)
                .unwrap();
        }
        assert_eq!(decoder.finish().unwrap(), final_message, "chunk {chunk}");
        assert_eq!(chunked, events, "chunk {chunk}");
    }
}

#[test]
fn responses_failure_error_and_truncation() {
    let stream = responses_stream();
    let mut decoder = OpenAiResponsesDecoder::new();
    for (k, d) in &stream[..5] {
        decoder.push_event(k, &d.to_string()).unwrap();
    }
    assert!(matches!(
        decoder.finish(),
        Err(DecodeError::Truncated { .. })
    ));

    let failed = json!({"type": "response.failed", "response": {"id": "resp_1", "status": "failed",
        "error": {"code": "server_error", "message": "boom"}, "output": []}});
    let error = decoder
        .push_event("response.failed", &failed.to_string())
        .unwrap_err();
    assert!(
        matches!(&error, DecodeError::Provider { error_type, message, .. }
        if error_type == "server_error" && message == "boom")
    );
    assert!(matches!(
        decoder.finish(),
        Err(DecodeError::Provider { .. })
    ));

    let mut decoder = OpenAiResponsesDecoder::new();
    let error = decoder
        .push_event(
            "error",
            &json!({"type": "error", "code": "rate_limit_exceeded", "message": "slow down"})
                .to_string(),
        )
        .unwrap_err();
    assert!(
        matches!(error, DecodeError::Provider { error_type, .. } if error_type == "rate_limit_exceeded")
    );

    let mut decoder = OpenAiResponsesDecoder::new();
    let error = decoder
        .push_event("response.output_text.delta", &stream[4].1.to_string())
        .unwrap_err();
    assert!(matches!(
        error,
        DecodeError::Protocol(ProtocolError::BeforeStart { .. })
    ));
}

/// Pushes `(type, data)` pairs (the `type` field added to each object); returns the decoder, its
/// events and the first error.
fn responses(
    stream: &[(&str, Value)],
) -> (
    OpenAiResponsesDecoder,
    Vec<DecodeEvent>,
    Option<DecodeError>,
) {
    let mut decoder = OpenAiResponsesDecoder::new();
    let mut events = Vec::new();
    let mut first = None;
    for (kind, data) in stream {
        let mut data = data.clone();
        if data.is_object() {
            data["type"] = json!(kind);
        }
        let text = match &data {
            Value::String(raw) => raw.clone(),
            other => other.to_string(),
        };
        let result = decoder.push_event(kind, &text);
        decoder.drain_events(&mut events);
        if let Err(e) = result {
            first.get_or_insert(e);
        }
    }
    (decoder, events, first)
}

fn created() -> (&'static str, Value) {
    (
        "response.created",
        json!({"response": {"id": "resp_1", "object": "response", "status": "in_progress", "output": []}}),
    )
}

fn sealed(events: &[DecodeEvent]) -> Vec<&DecodeEvent> {
    events
        .iter()
        .filter(|e| {
            matches!(
                e,
                DecodeEvent::ToolUseReady { .. }
                    | DecodeEvent::ToolUseInvalid { .. }
                    | DecodeEvent::ToolUseTruncated { .. }
            )
        })
        .collect()
}

#[test]
fn responses_completed_without_output_keeps_the_streamed_items() {
    // The chatgpt.com Codex backend sends `response.completed` with `output: null`
    // (openai-python #3321); the SDK then takes the items of `response.output_item.done`.
    let message = json!({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": "Hi", "annotations": []}]});
    let call = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f",
        "arguments": "{\"a\":1}", "status": "completed"});
    for explicit_null in [false, true] {
        let mut done = json!({"id": "resp_1", "object": "response", "status": "completed",
            "usage": {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}});
        if explicit_null {
            done["output"] = Value::Null;
        }
        let (mut decoder, events, error) = responses(&[
            created(),
            (
                "response.output_item.added",
                json!({"output_index": 0,
                "item": {"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []}}),
            ),
            (
                "response.output_item.done",
                json!({"output_index": 0, "item": message}),
            ),
            (
                "response.output_item.added",
                json!({"output_index": 1,
                "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": "", "status": "in_progress"}}),
            ),
            (
                "response.output_item.done",
                json!({"output_index": 1, "item": call}),
            ),
            ("response.completed", json!({"response": done})),
        ]);
        assert!(error.is_none(), "{error:?}");
        let final_message = decoder.finish().unwrap();
        assert_eq!(final_message["output"], json!([message, call]));
        assert_eq!(final_message["status"], "completed");
        assert_eq!(final_message["usage"]["total_tokens"], 3);
        assert_eq!(sealed(&events).len(), 1);
    }
    // An empty list is what the server said: kept.
    let done = json!({"id": "resp_1", "object": "response", "status": "completed", "output": []});
    let (mut decoder, _, _) = responses(&[
        created(),
        (
            "response.output_item.added",
            json!({"output_index": 0, "item": call}),
        ),
        ("response.completed", json!({"response": done})),
    ]);
    assert_eq!(decoder.finish().unwrap()["output"], json!([]));
}

#[test]
fn responses_custom_tool_call_input_is_a_string_sealed_once() {
    let added = json!({"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_c", "name": "apply_patch", "input": ""});
    let mut done_item = added.clone();
    done_item["input"] = json!("*** Begin Patch\n+x\n*** End Patch");
    done_item["status"] = json!("completed");
    let stream = [
        created(),
        (
            "response.output_item.added",
            json!({"output_index": 0, "item": added}),
        ),
        (
            "response.custom_tool_call_input.delta",
            json!({"output_index": 0, "item_id": "ctc_1", "delta": "*** Begin Patch\n"}),
        ),
        (
            "response.custom_tool_call_input.delta",
            json!({"output_index": 0, "item_id": "ctc_1", "delta": "+x\n*** End Patch"}),
        ),
        (
            "response.custom_tool_call_input.done",
            json!({"output_index": 0, "item_id": "ctc_1", "input": "*** Begin Patch\n+x\n*** End Patch"}),
        ),
        (
            "response.output_item.done",
            json!({"output_index": 0, "item": done_item}),
        ),
        (
            "response.completed",
            json!({"response": {"id": "resp_1", "object": "response", "status": "completed", "output": [done_item]}}),
        ),
    ];
    // The snapshot accumulates the input before any `done` event.
    let (decoder, _, error) = responses(&stream[..4]);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        decoder.message()["output"][0]["input"],
        "*** Begin Patch\n+x\n*** End Patch"
    );
    let (mut decoder, events, error) = responses(&stream);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        sealed(&events),
        [&DecodeEvent::ToolUseReady {
            index: 0,
            id: "call_c".into(),
            name: "apply_patch".into(),
            input: json!("*** Begin Patch\n+x\n*** End Patch"),
        }]
    );
    assert_eq!(decoder.finish().unwrap()["output"][0], done_item);
    // Sealed at `response.completed` when no `done` event came; cut off by the output limit,
    // it must not run.
    let mut cut = added.clone();
    cut["input"] = json!("*** Begin");
    let (_, events, _) = responses(&[
        created(),
        (
            "response.output_item.added",
            json!({"output_index": 0, "item": added}),
        ),
        (
            "response.custom_tool_call_input.delta",
            json!({"output_index": 0, "item_id": "ctc_1", "delta": "*** Begin"}),
        ),
        (
            "response.incomplete",
            json!({"response": {"id": "resp_1", "object": "response", "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"}, "output": [cut]}}),
        ),
    ]);
    assert_eq!(
        sealed(&events),
        [&DecodeEvent::ToolUseTruncated {
            index: 0,
            id: "call_c".into(),
            name: "apply_patch".into(),
            partial_json: "*** Begin".into(),
        }]
    );
}

#[test]
fn responses_unknown_events_never_fail_the_stream() {
    let (mut decoder, events, error) = responses(&[
        created(),
        ("response.future_thing", json!("not json at all")),
        ("response.future_list", json!([1, 2])),
        ("keepalive", json!({"sequence_number": 3})),
        (
            "response.completed",
            json!({"response": {"id": "resp_1", "status": "completed", "output": []}}),
        ),
        // openai-python stops reading at data starting with `[DONE]`, whatever the endpoint.
        ("message", json!("[DONE]")),
    ]);
    assert!(error.is_none(), "{error:?}");
    assert!(events.iter().any(|e| matches!(e,
        DecodeEvent::Unknown { event_type, data } if event_type == "response.future_thing" && data == "not json at all")));
    assert!(events.iter().any(|e| matches!(e,
        DecodeEvent::Unknown { event_type, data } if event_type == "response.future_list" && *data == json!([1, 2]))));
    assert_eq!(decoder.finish().unwrap()["status"], "completed");
    // A known event that is not JSON is still an error.
    let (_, _, error) = responses(&[created(), ("response.output_item.added", json!("{oops"))]);
    assert!(matches!(error, Some(DecodeError::InvalidJson { .. })));
}

#[test]
fn responses_failed_without_error_object_keeps_the_response() {
    let failed = json!({"id": "resp_1", "status": "failed", "error": null,
        "incomplete_details": null, "output": []});
    let (mut decoder, _, error) =
        responses(&[created(), ("response.failed", json!({"response": failed}))]);
    let Some(DecodeError::Provider { raw, .. }) = error else {
        panic!("{error:?}");
    };
    assert_eq!(raw["id"], "resp_1");
    assert!(matches!(
        decoder.finish(),
        Err(DecodeError::Provider { .. })
    ));
}

#[test]
fn responses_empty_added_items_and_index_gaps_are_tolerated() {
    // openai-python (#3126): an `output_item.added` without an item takes no place, later
    // items keep their stream indexes; indexes may skip.
    let call = |n: u32| {
        json!({"type": "function_call", "id": format!("fc_{n}"), "call_id": format!("call_{n}"),
        "name": "f", "arguments": "", "status": "in_progress"})
    };
    let (mut decoder, events, error) = responses(&[
        created(),
        (
            "response.output_item.added",
            json!({"output_index": 0, "item": null}),
        ),
        (
            "response.output_item.added",
            json!({"output_index": 1, "item": call(1)}),
        ),
        (
            "response.function_call_arguments.delta",
            json!({"output_index": 1, "item_id": "fc_1", "delta": "{}"}),
        ),
        (
            "response.function_call_arguments.done",
            json!({"output_index": 1, "item_id": "fc_1", "arguments": "{}"}),
        ),
        (
            "response.output_item.added",
            json!({"output_index": 3, "item": call(3)}),
        ),
        (
            "response.function_call_arguments.delta",
            json!({"output_index": 3, "item_id": "fc_3", "delta": "{\"x\":2}"}),
        ),
        // The authoritative response has no holes: the calls sit at 0 and 1 there. Each is
        // sealed once, under its stream index.
        (
            "response.completed",
            json!({"response": {"id": "resp_1", "status": "completed", "output": [
                {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": "{}", "status": "completed"},
                {"type": "function_call", "id": "fc_3", "call_id": "call_3", "name": "f", "arguments": "{\"x\":2}", "status": "completed"},
            ]}}),
        ),
    ]);
    assert!(error.is_none(), "{error:?}");
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, DecodeEvent::BlockStart { block, .. } if block.is_null()))
    );
    assert_eq!(
        sealed(&events),
        [
            &DecodeEvent::ToolUseReady {
                index: 1,
                id: "call_1".into(),
                name: "f".into(),
                input: json!({})
            },
            &DecodeEvent::ToolUseReady {
                index: 3,
                id: "call_3".into(),
                name: "f".into(),
                input: json!({"x": 2})
            },
        ]
    );
    assert_eq!(decoder.finish().unwrap()["output"][1]["call_id"], "call_3");
    // Content for an item that never arrived is a clear error.
    let (_, _, error) = responses(&[
        created(),
        (
            "response.output_item.added",
            json!({"output_index": 0, "item": null}),
        ),
        (
            "response.function_call_arguments.delta",
            json!({"output_index": 0, "item_id": "fc_0", "delta": "{}"}),
        ),
    ]);
    assert!(matches!(
        error,
        Some(DecodeError::Protocol(ProtocolError::UnknownIndex { .. }))
    ));
}

#[test]
fn responses_annotations_land_at_their_index() {
    let a = |n: u32| json!({"type": "url_citation", "url": format!("https://e/{n}"), "start_index": 0, "end_index": 1});
    let (decoder, _, error) = responses(&[
        created(),
        (
            "response.output_item.added",
            json!({"output_index": 0,
            "item": {"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []}}),
        ),
        (
            "response.content_part.added",
            json!({"output_index": 0, "content_index": 0, "item_id": "msg_1",
            "part": {"type": "output_text", "text": "", "annotations": []}}),
        ),
        (
            "response.output_text.annotation.added",
            json!({"output_index": 0, "content_index": 0, "item_id": "msg_1", "annotation_index": 0, "annotation": a(0)}),
        ),
        (
            "response.output_text.annotation.added",
            json!({"output_index": 0, "content_index": 0, "item_id": "msg_1", "annotation_index": 1, "annotation": a(1)}),
        ),
        // Sent again (a replayed stream): replaced, not duplicated.
        (
            "response.output_text.annotation.added",
            json!({"output_index": 0, "content_index": 0, "item_id": "msg_1", "annotation_index": 1, "annotation": a(2)}),
        ),
    ]);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        decoder.message()["output"][0]["content"][0]["annotations"],
        json!([a(0), a(2)])
    );
}

fn tool_chunk(calls: Value) -> String {
    chunk(json!([{"index": 0, "delta": {"tool_calls": calls}, "finish_reason": null}]))
}

#[test]
fn chat_interleaved_tool_call_fragments_seal_each_call_complete() {
    // A server interleaving two calls' fragments (A, B, A, B): each call is sealed once, with
    // all its arguments, not A invalid when B starts.
    let chunks = vec![
        chunk(
            json!([{"index": 0, "delta": {"role": "assistant", "content": null}, "finish_reason": null}]),
        ),
        tool_chunk(
            json!([{"index": 0, "id": "call_a", "type": "function", "function": {"name": "read", "arguments": ""}}]),
        ),
        tool_chunk(
            json!([{"index": 1, "id": "call_b", "type": "function", "function": {"name": "list", "arguments": "{\"d"}}]),
        ),
        tool_chunk(json!([{"index": 0, "function": {"arguments": "{\"path\": "}}])),
        tool_chunk(json!([{"index": 1, "function": {"arguments": "ir\": \"/\"}"}}])),
        tool_chunk(json!([{"index": 0, "function": {"arguments": "\"x}\"}"}}])),
        // B is complete here and A just completed: A is sealed as this fragment of B arrives.
        tool_chunk(json!([{"index": 1, "function": {"arguments": " "}}])),
        chunk(json!([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}])),
        "[DONE]".to_owned(),
    ];
    let (mut decoder, events, error) = chat(&chunks);
    assert!(error.is_none(), "{error:?}");
    let ready = |index: usize, id: &str, name: &str, input: Value| DecodeEvent::ToolUseReady {
        index,
        id: id.into(),
        name: name.into(),
        input,
    };
    assert_eq!(
        sealed(&events),
        [
            &ready(1, "call_b", "list", json!({"dir": "/"})),
            &ready(0, "call_a", "read", json!({"path": "x}"})),
        ]
    );
    // Both sealed before the finish_reason: as soon as each was complete at a switch.
    let finish_at = events
        .iter()
        .position(|e| matches!(e, DecodeEvent::MessageDelta { .. }))
        .unwrap();
    let last_seal = events
        .iter()
        .rposition(|e| matches!(e, DecodeEvent::ToolUseReady { .. }))
        .unwrap();
    assert!(last_seal < finish_at);
    let message = decoder.finish().unwrap();
    assert_eq!(
        message["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        "{\"path\": \"x}\"}"
    );

    // Without a finish_reason, a call left open is sealed at `[DONE]`; a call still unfinished
    // there is reported invalid, as before; the whole call after it is sealed there too (it was
    // never sealed, so never run).
    let chunks = vec![
        chunk(
            json!([{"index": 0, "delta": {"role": "assistant", "content": null}, "finish_reason": null}]),
        ),
        tool_chunk(
            json!([{"index": 0, "id": "call_a", "type": "function", "function": {"name": "read", "arguments": "{\"p\":"}}]),
        ),
        tool_chunk(
            json!([{"index": 1, "id": "call_b", "type": "function", "function": {"name": "list", "arguments": "{}"}}]),
        ),
        "[DONE]".to_owned(),
    ];
    let (_, events, error) = chat(&chunks);
    assert!(error.is_none(), "{error:?}");
    assert!(
        matches!(
            sealed(&events).as_slice(),
            [DecodeEvent::ToolUseInvalid { id, .. }, DecodeEvent::ToolUseReady { id: b, input, .. }]
                if id == "call_a" && b == "call_b" && *input == json!({})
        ),
        "{events:?}"
    );
}

#[test]
fn chat_done_marker_with_trailing_whitespace_ends_the_stream() {
    // openai-python ends the stream at data starting with `[DONE]`.
    for done in ["[DONE] ", "[DONE]\t"] {
        let chunks = vec![
            chunk(
                json!([{"index": 0, "delta": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]),
            ),
            done.to_owned(),
        ];
        let (mut decoder, _, error) = chat(&chunks);
        assert!(error.is_none(), "{done:?}: {error:?}");
        assert_eq!(
            decoder.finish().unwrap()["choices"][0]["message"]["content"],
            "hi"
        );
    }
}

/// The text of each thinking delta of output 0, in order.
fn thinking_of_output_0(events: &[DecodeEvent]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| match e {
            DecodeEvent::ThinkingDelta { index: 0, thinking } => Some(thinking.as_str()),
            _ => None,
        })
        .collect()
}

/// A stream's start up to a reasoning item `item` (`rs_1`) and the first part of its summary.
fn reasoning_opening(item: Value) -> Vec<(&'static str, Value)> {
    vec![
        created(),
        (
            "response.output_item.added",
            json!({"output_index": 0, "item": item}),
        ),
        (
            "response.reasoning_summary_part.added",
            json!({"output_index": 0, "item_id": "rs_1", "summary_index": 0,
            "part": {"type": "summary_text", "text": ""}}),
        ),
    ]
}

#[test]
fn responses_reasoning_accumulates_and_streams_as_thinking() {
    let item = json!({"type": "reasoning", "id": "rs_1", "summary": []});
    let mut stream = reasoning_opening(item);
    stream.extend([
        (
            "response.reasoning_summary_text.delta",
            json!({"output_index": 0, "item_id": "rs_1", "summary_index": 0, "delta": "Think"}),
        ),
        (
            "response.reasoning_summary_text.delta",
            json!({"output_index": 0, "item_id": "rs_1", "summary_index": 0, "delta": "ing"}),
        ),
        (
            "response.reasoning_summary_text.done",
            json!({"output_index": 0, "item_id": "rs_1", "summary_index": 0, "text": "Thinking."}),
        ),
        (
            "response.reasoning_summary_part.added",
            json!({"output_index": 0, "item_id": "rs_1", "summary_index": 1,
            "part": {"type": "summary_text", "text": ""}}),
        ),
        (
            "response.reasoning_summary_text.delta",
            json!({"output_index": 0, "item_id": "rs_1", "summary_index": 1, "delta": "More"}),
        ),
        (
            "response.content_part.added",
            json!({"output_index": 0, "item_id": "rs_1", "content_index": 0,
            "part": {"type": "reasoning_text", "text": ""}}),
        ),
        (
            "response.reasoning_text.delta",
            json!({"output_index": 0, "item_id": "rs_1", "content_index": 0, "delta": "raw"}),
        ),
        (
            "response.reasoning_text.delta",
            json!({"output_index": 0, "item_id": "rs_1", "content_index": 0, "delta": " cot"}),
        ),
    ]);
    let (decoder, events, error) = responses(&stream);
    assert!(error.is_none(), "{error:?}");
    let output = &decoder.message()["output"][0];
    assert_eq!(
        output["summary"],
        json!([{"type": "summary_text", "text": "Thinking."}, {"type": "summary_text", "text": "More"}])
    );
    assert_eq!(output["content"][0]["text"], "raw cot");
    let thinking = thinking_of_output_0(&events);
    // The second summary section starts with a blank line, as the sections read joined.
    assert_eq!(thinking, ["Think", "ing", "\n\n", "More", "raw", " cot"]);
}

#[test]
fn responses_output_item_done_without_item_keeps_the_streamed_one() {
    let call = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f",
        "arguments": "{}", "status": "in_progress"});
    let (decoder, events, error) = responses(&[
        created(),
        (
            "response.output_item.added",
            json!({"output_index": 0, "item": call}),
        ),
        (
            "response.output_item.done",
            json!({"output_index": 0, "item": null}),
        ),
    ]);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(decoder.message()["output"], json!([call]));
    assert_eq!(sealed(&events).len(), 1);
}

#[test]
fn responses_custom_tool_call_of_an_incomplete_response_never_runs() {
    // Free text cannot show it was cut: a custom call the response (or the item) marks
    // incomplete is truncated, whatever the reason.
    let added = json!({"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_c", "name": "sh", "input": ""});
    let mut partial = added.clone();
    partial["input"] = json!("rm -rf /tmp/x &&");
    for (incomplete_event, item_status) in [(true, "in_progress"), (false, "incomplete")] {
        let mut item = partial.clone();
        item["status"] = json!(item_status);
        let end = if incomplete_event {
            (
                "response.incomplete",
                json!({"response": {"id": "resp_1", "status": "incomplete",
                "incomplete_details": {"reason": "content_filter"}, "output": [item]}}),
            )
        } else {
            (
                "response.completed",
                json!({"response": {"id": "resp_1", "status": "completed", "output": [item]}}),
            )
        };
        let (_, events, error) = responses(&[
            created(),
            (
                "response.output_item.added",
                json!({"output_index": 0, "item": added}),
            ),
            (
                "response.custom_tool_call_input.delta",
                json!({"output_index": 0, "item_id": "ctc_1", "delta": "rm -rf /tmp/x &&"}),
            ),
            end,
        ]);
        assert!(error.is_none(), "{error:?}");
        assert!(
            matches!(sealed(&events).as_slice(), [DecodeEvent::ToolUseTruncated { partial_json, .. }] if partial_json == "rm -rf /tmp/x &&"),
            "{events:?}"
        );
    }
}

#[test]
fn responses_hosted_tool_progress_updates_the_item_and_passes_through() {
    let (decoder, events, error) = responses(&[
        created(),
        (
            "response.output_item.added",
            json!({"output_index": 0,
            "item": {"type": "web_search_call", "id": "ws_1", "status": "in_progress"}}),
        ),
        (
            "response.web_search_call.searching",
            json!({"output_index": 0, "item_id": "ws_1"}),
        ),
        (
            "response.output_item.added",
            json!({"output_index": 1,
            "item": {"type": "code_interpreter_call", "id": "ci_1", "status": "in_progress", "code": null, "container_id": "c"}}),
        ),
        (
            "response.code_interpreter_call_code.delta",
            json!({"output_index": 1, "item_id": "ci_1", "delta": "print("}),
        ),
        (
            "response.code_interpreter_call_code.delta",
            json!({"output_index": 1, "item_id": "ci_1", "delta": "1)"}),
        ),
        (
            "response.code_interpreter_call.interpreting",
            json!({"output_index": 1, "item_id": "ci_1"}),
        ),
        // The wrong kind of item, or none: nothing changes.
        (
            "response.file_search_call.completed",
            json!({"output_index": 1, "item_id": "ci_1"}),
        ),
        (
            "response.web_search_call.completed",
            json!({"output_index": 7, "item_id": "ws_9"}),
        ),
    ]);
    assert!(error.is_none(), "{error:?}");
    let output = &decoder.message()["output"];
    assert_eq!(output[0]["status"], "searching");
    assert_eq!(output[1]["code"], "print(1)");
    assert_eq!(output[1]["status"], "interpreting");
    let passed = events
        .iter()
        .filter(|e| matches!(e, DecodeEvent::Unknown { .. }))
        .count();
    assert_eq!(passed, 6);
}

/// A server that leaves out `data: [DONE]` after the last `finish_reason` (the body just ends)
/// sent a whole answer: the SDKs accept it. Before, `finish` called it truncated, and the
/// client retried or failed every such stream.
#[test]
fn chat_without_done_is_whole_once_every_choice_has_a_finish_reason() {
    let finished = chunk(
        json!([{"index": 0, "delta": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]),
    );
    let usage = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
        "model": "gpt-test", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}})
    .to_string();
    let (mut decoder, _, error) = chat(&[finished.clone(), usage]);
    assert!(error.is_none(), "{error:?}");
    let message = decoder.finish().unwrap();
    assert_eq!(message["choices"][0]["message"]["content"], "hi");
    assert_eq!(message["choices"][0]["finish_reason"], "stop");
    assert_eq!(message["usage"]["total_tokens"], 4);

    // Not whole: no reason at all, an empty reason (Ollama and sglang send `""` on every
    // chunk), or a choice still without one.
    let cases = [
        vec![chunk(json!([{"index": 0, "delta": {"content": "hi"}}]))],
        vec![chunk(
            json!([{"index": 0, "delta": {"content": "hi"}, "finish_reason": ""}]),
        )],
        vec![
            finished.clone(),
            chunk(json!([{"index": 1, "delta": {"content": "second"}}])),
        ],
        // A call started after the finish_reason was never sealed: nothing ran it.
        vec![
            finished,
            chunk(
                json!([{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}}]),
            ),
        ],
    ];
    for chunks in cases {
        let (mut decoder, _, error) = chat(&chunks);
        assert!(error.is_none(), "{error:?}");
        assert!(
            matches!(decoder.finish(), Err(DecodeError::Truncated { .. })),
            "{chunks:?}"
        );
    }
}

/// OpenRouter (and other gateways) report an upstream failure after HTTP 200 as a chunk that
/// carries an `error` object next to its `choices` (with `finish_reason: "error"`): a typed
/// provider error with the message, not a normal end of the answer, on the text fast path too.
#[test]
fn chat_error_object_next_to_choices_is_a_provider_error() {
    let start = chunk(json!([{"index": 0, "delta": {"role": "assistant", "content": ""}}]));
    let text = chunk(json!([{"index": 0, "delta": {"content": "Hel"}}]));
    for finish in [json!("error"), Value::Null] {
        let failed = json!({"id": "gen-1", "object": "chat.completion.chunk", "created": 1,
            "model": "m", "provider": "Upstream",
            "error": {"code": 502, "message": "Upstream provider went away"},
            "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": finish}]})
        .to_string();
        let (mut decoder, events, error) =
            chat(&[start.clone(), text.clone(), failed, "[DONE]".to_owned()]);
        match error {
            Some(DecodeError::Provider {
                error_type,
                message,
                ..
            }) => {
                assert_eq!(message, "Upstream provider went away");
                assert_eq!(error_type, "502");
            }
            other => panic!("{other:?} {events:?}"),
        }
        assert!(
            matches!(decoder.finish(), Err(DecodeError::Provider { .. })),
            "finish must answer the error again"
        );
    }
    // `"error": null` next to choices is no error.
    let fine = json!({"id": "c", "object": "chat.completion.chunk", "model": "m", "error": null,
        "choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": "stop"}]})
    .to_string();
    let (mut decoder, _, error) = chat(&[start, text, fine, "[DONE]".to_owned()]);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        decoder.finish().unwrap()["choices"][0]["message"]["content"],
        "Hello"
    );
}

/// `[DONE]` after tool calls without any `finish_reason` (servers that send `null` on every
/// chunk): the stream is whole, so every call is sealed there, the last one included.
#[test]
fn chat_done_seals_calls_without_a_finish_reason() {
    let (mut decoder, events, error) = chat(&[
        chunk(
            json!([{"index": 0, "delta": {"role": "assistant", "content": null}, "finish_reason": null}]),
        ),
        chunk(
            json!([{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "ping", "arguments": ""}}]}, "finish_reason": null}]),
        ),
        "[DONE]".to_owned(),
    ]);
    assert!(error.is_none(), "{error:?}");
    let ready: Vec<_> = events
        .iter()
        .filter(|e| matches!(e, DecodeEvent::ToolUseReady { .. }))
        .collect();
    assert!(
        matches!(ready.as_slice(), [DecodeEvent::ToolUseReady { index: 0, id, name, input }]
            if id == "call_1" && name == "ping" && *input == json!({})),
        "{events:?}"
    );
    assert!(decoder.finish().is_ok());
}

/// Reasoning text of OpenAI-compatible servers — `delta.reasoning_content` (DeepSeek, vLLM,
/// LM Studio), `delta.reasoning` (Ollama, OpenRouter, newer vLLM, which may send both with the
/// same text) — is reported as `thinking_delta` once per chunk and kept in the message.
#[test]
fn chat_reasoning_deltas_are_thinking() {
    let (mut decoder, events, error) = chat(&[
        chunk(
            json!([{"index": 0, "delta": {"role": "assistant", "content": null, "reasoning_content": "Let"}}]),
        ),
        chunk(json!([{"index": 0, "delta": {"content": null, "reasoning_content": " me think"}}])),
        chunk(json!([{"index": 0, "delta": {"reasoning": ".", "reasoning_content": "."}}])),
        chunk(json!([{"index": 0, "delta": {"reasoning": " Done."}}])),
        chunk(json!([{"index": 0, "delta": {"content": "Hi", "reasoning_content": null}}])),
        chunk(
            json!([{"index": 0, "delta": {"content": "", "reasoning_content": null}, "finish_reason": "stop"}]),
        ),
        "[DONE]".to_owned(),
    ]);
    assert!(error.is_none(), "{error:?}");
    let thinking = thinking_of_output_0(&events);
    assert_eq!(thinking, ["Let", " me think", ".", " Done."], "{events:?}");
    let message = decoder.finish().unwrap();
    assert_eq!(message["choices"][0]["message"]["content"], "Hi");
    assert_eq!(
        message["choices"][0]["message"]["reasoning_content"],
        "Let me think."
    );
}

/// Gemini's OpenAI-compatible endpoint sends each tool call whole, without `index`, and
/// `role: "assistant"` on every delta: each call with a new `id` is a call of its own (one
/// without `id` continues the current call), and the role stays `assistant`.
#[test]
fn chat_tool_calls_without_index_and_repeated_roles() {
    let call = |id: &str, path: &str| json!({"id": id, "type": "function", "function": {"name": "read", "arguments": format!("{{\"path\":\"{path}\"}}")}});
    let (mut decoder, events, error) = chat(&[
        chunk(
            json!([{"index": 0, "delta": {"role": "assistant", "tool_calls": [call("call_1", "a")]}}]),
        ),
        chunk(
            json!([{"index": 0, "delta": {"role": "assistant", "tool_calls": [call("call_2", "b")]}}]),
        ),
        chunk(
            json!([{"index": 0, "delta": {"role": "assistant", "tool_calls": [{"id": "call_3", "type": "function", "function": {"name": "read", "arguments": "{\"pa"}}]}}]),
        ),
        chunk(
            json!([{"index": 0, "delta": {"role": "assistant", "tool_calls": [{"function": {"arguments": "th\":\"c\"}"}}]}}]),
        ),
        chunk(json!([{"index": 0, "delta": {"role": "assistant"}, "finish_reason": "tool_calls"}])),
        "[DONE]".to_owned(),
    ]);
    assert!(error.is_none(), "{error:?}");
    let ready: Vec<(usize, &str, &Value)> = events
        .iter()
        .filter_map(|e| match e {
            DecodeEvent::ToolUseReady {
                index, id, input, ..
            } => Some((*index, id.as_str(), input)),
            _ => None,
        })
        .collect();
    assert_eq!(
        ready,
        [
            (0, "call_1", &json!({"path": "a"})),
            (1, "call_2", &json!({"path": "b"})),
            (2, "call_3", &json!({"path": "c"})),
        ],
        "{events:?}"
    );
    let message = decoder.finish().unwrap();
    assert_eq!(message["choices"][0]["message"]["role"], "assistant");
    assert_eq!(
        message["choices"][0]["message"]["tool_calls"][2]["function"]["arguments"],
        "{\"path\":\"c\"}"
    );
}

/// Azure OpenAI sends its prompt filter results first, in a chunk with empty `choices`, an empty
/// `id` and `model` and `created: 0`: the message takes them from the first chunk with choices.
#[test]
fn chat_azure_prompt_filter_chunk_does_not_blank_the_id_and_model() {
    let filter = json!({"choices": [], "created": 0, "id": "", "model": "", "object": "",
        "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {}}]})
    .to_string();
    let first = json!({"choices": [{"content_filter_results": {}, "delta": {"content": "", "role": "assistant"}, "finish_reason": null, "index": 0, "logprobs": null}],
        "created": 1700000000, "id": "chatcmpl-az", "model": "gpt-4o-2024-08-06", "object": "chat.completion.chunk", "system_fingerprint": "fp"})
    .to_string();
    let text = json!({"choices": [{"delta": {"content": "Hi"}, "finish_reason": "stop", "index": 0}],
        "created": 1700000000, "id": "chatcmpl-az", "model": "gpt-4o-2024-08-06", "object": "chat.completion.chunk"})
    .to_string();
    let (mut decoder, _, error) = chat(&[filter, first, text, "[DONE]".to_owned()]);
    assert!(error.is_none(), "{error:?}");
    let message = decoder.finish().unwrap();
    assert_eq!(message["id"], "chatcmpl-az");
    assert_eq!(message["model"], "gpt-4o-2024-08-06");
    assert_eq!(message["created"], 1_700_000_000);
    assert_eq!(message["object"], "chat.completion");
    assert_eq!(message["choices"][0]["message"]["content"], "Hi");
    assert!(message["prompt_filter_results"].is_array());
}

/// Some servers (TGI, LocalAI) send a call's `arguments` as a JSON object, not a string holding
/// one: the call's input is that object, not `{}` (its arguments silently dropped).
#[test]
fn chat_arguments_sent_as_an_object_are_the_input() {
    let (mut decoder, events, error) = chat(&[
        chunk(json!([{"index": 0, "delta": {"role": "assistant", "content": null}}])),
        chunk(
            json!([{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "read", "arguments": {"path": "a"}}}]}, "finish_reason": "tool_calls"}]),
        ),
        "[DONE]".to_owned(),
    ]);
    assert!(error.is_none(), "{error:?}");
    assert!(
        events.iter().any(|e| matches!(e, DecodeEvent::ToolUseReady { input, .. } if *input == json!({"path": "a"}))),
        "{events:?}"
    );
    assert!(decoder.finish().is_ok());
}

/// Some OpenAI-compatible servers leave out the choice `index` (the Vercel AI SDK reads
/// `choices[0]` without it): a choice without one is the choice at its position in the list.
#[test]
fn chat_choices_without_index_are_taken_by_position() {
    let (mut decoder, events, error) = chat(&[
        chunk(json!([{"delta": {"role": "assistant", "content": ""}}])),
        chunk(json!([{"delta": {"content": "Hel"}}])),
        chunk(json!([{"delta": {"content": "lo"}}])),
        chunk(
            json!([{"delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]}, "finish_reason": "tool_calls"}]),
        ),
        "[DONE]".to_owned(),
    ]);
    assert!(error.is_none(), "{error:?}");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, DecodeEvent::ToolUseReady { id, .. } if id == "call_1")),
        "{events:?}"
    );
    let message = decoder.finish().unwrap();
    assert_eq!(message["choices"][0]["message"]["content"], "Hello");
    assert_eq!(message["choices"][0]["finish_reason"], "tool_calls");
    // An `index` that is there but not a valid number is still refused.
    let (_, _, error) = chat(&[chunk(json!([{"index": "x", "delta": {"content": "a"}}]))]);
    assert!(matches!(error, Some(DecodeError::Protocol(_))), "{error:?}");
}

/// An error chunk whose `error` is a plain string (`{"error": "..."}`, as llama.cpp and some
/// gateways send) keeps that text as the message.
#[test]
fn chat_error_given_as_a_string_keeps_its_text() {
    let start = chunk(json!([{"index": 0, "delta": {"role": "assistant", "content": ""}}]));
    let (_, _, error) = chat(&[start, json!({"error": "upstream timed out"}).to_string()]);
    match error {
        Some(DecodeError::Provider { message, .. }) => assert_eq!(message, "upstream timed out"),
        other => panic!("{other:?}"),
    }
}

/// Half of a surrogate pair escaped alone (`"\ud83d"`, what `JSON.stringify` writes for a string
/// cut inside an emoji) becomes U+FFFD in a Chat chunk and in Responses events; the stream goes
/// on (serde_json refuses the escape, which used to fail the whole stream).
#[test]
fn a_lone_surrogate_escape_becomes_a_replacement_character() {
    let with_half = |json: String| json.replace("HALF", r"\ud83d");
    let chunks = [
        with_half(chunk(
            json!([{"index": 0, "delta": {"role": "assistant", "content": "Hi HALF"}}]),
        )),
        with_half(chunk(
            json!([{"index": 0, "delta": {"content": " there"}, "finish_reason": "stop"}]),
        )),
    ];
    let (decoder, _, error) = chat(&chunks);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        decoder.message()["choices"][0]["message"]["content"],
        "Hi \u{fffd} there"
    );

    let sse: String = responses_stream()
        .iter()
        .map(|(k, d)| format!("event: {k}\ndata: {d}\n\n"))
        .collect::<String>()
        .replace(r#""delta":"Hi""#, r#""delta":"Hi\udc00""#)
        .replace("Hi there", r"Hi\udc00 there");
    let mut decoder = StreamDecoder::for_provider(Provider::OpenAiResponses);
    decoder.feed(Bytes::from(sse)).unwrap();
    let message = decoder.finish().unwrap();
    assert_eq!(
        message["output"][0]["content"][0]["text"],
        "Hi\u{fffd} there"
    );
}

/// The `partial_json` of every `input_json_delta` event of call `index`, concatenated.
fn arguments_events(events: &[DecodeEvent], index: usize) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            DecodeEvent::InputJsonDelta {
                index: i,
                partial_json,
            } if *i == index => Some(partial_json.as_str()),
            _ => None,
        })
        .collect()
}

/// A character cut between two calls' interleaved arguments fragments (`JSON.stringify` of each
/// piece writes its half as a lone escape) is joined per call; a half whose other half never
/// comes stays U+FFFD, in the message and in the events, whether the next fragment goes on
/// without it or the stream ends.
#[test]
fn chat_arguments_halves_join_per_call_and_lone_ones_stay_replacement_characters() {
    let escaped = |json: String| json.replace("HIGH", r"\ud83d").replace("LOW", r"\ude00");
    let start = |index: usize, id: &str, arguments: &str| {
        escaped(tool_chunk(
            json!([{"index": index, "id": id, "type": "function",
            "function": {"name": "search", "arguments": arguments}}]),
        ))
    };
    let more = |index: usize, arguments: &str| {
        escaped(tool_chunk(
            json!([{"index": index, "function": {"arguments": arguments}}]),
        ))
    };
    let chunks = vec![
        chunk(
            json!([{"index": 0, "delta": {"role": "assistant", "content": null}, "finish_reason": null}]),
        ),
        start(0, "call_a", "{\"q\": \"aHIGH"),
        // Call B starts while A holds its half; A's JSON is unfinished, so it stays open.
        start(1, "call_b", "{\"q\": \"bHIGH"),
        more(0, "LOWa\"}"),
        // B's half meets no low half: it stays U+FFFD.
        more(1, "b\"}"),
        start(2, "call_c", "\"cHIGH"),
        // C's value is a string: it counts as ended, and is sealed as D starts.
        start(3, "call_d", "{}"),
        chunk(json!([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}])),
        "[DONE]".to_owned(),
    ];
    let (mut decoder, events, error) = chat(&chunks);
    assert!(error.is_none(), "{error:?}");
    let message = decoder.finish().unwrap();
    let calls = &message["choices"][0]["message"]["tool_calls"];
    let expected = [
        "{\"q\": \"a\u{1f600}a\"}",
        "{\"q\": \"b\u{fffd}b\"}",
        "\"c\u{fffd}",
    ];
    for (index, arguments) in expected.iter().enumerate() {
        assert_eq!(
            calls[index]["function"]["arguments"], *arguments,
            "call {index}"
        );
        assert_eq!(arguments_events(&events, index), *arguments, "call {index}");
    }
    let ready: Vec<(usize, Value)> = events
        .iter()
        .filter_map(|e| match e {
            DecodeEvent::ToolUseReady { index, input, .. } => Some((*index, input.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        ready,
        [
            (0, json!({"q": "a\u{1f600}a"})),
            (1, json!({"q": "b\u{fffd}b"})),
            (3, json!({}))
        ]
    );
    // The unfinished string of call C is invalid, its held half sent before it is sealed.
    assert_eq!(arguments_events(&events, 3), "{}");
    let sealed_c = events
        .iter()
        .position(|e| matches!(e, DecodeEvent::ToolUseInvalid { index: 2, .. }))
        .expect("call C sealed invalid");
    let last_c_delta = events
        .iter()
        .rposition(|e| matches!(e, DecodeEvent::InputJsonDelta { index: 2, .. }))
        .unwrap();
    assert!(last_c_delta < sealed_c);
}

/// The same when the stream's first chunk starts the call with a fragment ending in a high half.
#[test]
fn chat_arguments_half_in_the_first_chunk_joins_the_next_fragment() {
    let escaped = |json: String| json.replace("HIGH", r"\ud83d").replace("LOW", r"\ude00");
    let chunks = vec![
        escaped(chunk(
            json!([{"index": 0, "delta": {"role": "assistant", "tool_calls": [
            {"index": 0, "id": "call_a", "type": "function",
             "function": {"name": "search", "arguments": "{\"q\": \"HIGH"}}]},
            "finish_reason": null}]),
        )),
        escaped(tool_chunk(
            json!([{"index": 0, "function": {"arguments": "LOW\"}"}}]),
        )),
        chunk(json!([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}])),
        "[DONE]".to_owned(),
    ];
    let (mut decoder, events, error) = chat(&chunks);
    assert!(error.is_none(), "{error:?}");
    let message = decoder.finish().unwrap();
    let arguments = "{\"q\": \"\u{1f600}\"}";
    assert_eq!(
        message["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        arguments
    );
    assert_eq!(arguments_events(&events, 0), arguments);
}

/// Reasoning deltas join a character cut between two of them, as the text deltas do; a half
/// whose other half never comes is U+FFFD, also when the text's `done` event ends it.
#[test]
fn responses_reasoning_halves_join_and_lone_ones_stay_replacement_characters() {
    // Raw data: `json!` cannot hold a lone surrogate.
    let delta = |name: &'static str, at_key: &str, delta: &str| {
        let data = format!(
            r#"{{"type":"{name}","output_index":0,"item_id":"rs_1","{at_key}":0,"delta":"{delta}"}}"#
        );
        (name, Value::String(data))
    };
    let summary = |d: &str| delta("response.reasoning_summary_text.delta", "summary_index", d);
    let reasoning = |d: &str| delta("response.reasoning_text.delta", "content_index", d);
    let item = json!({"type": "reasoning", "id": "rs_1", "summary": [],
        "content": [{"type": "reasoning_text", "text": ""}]});
    let mut stream = reasoning_opening(item);
    stream.extend([
        summary(r"a\ud83d"),
        summary(r"\ude00b\ud83d"),
        summary("c"),
        reasoning(r"x\ud83d"),
    ]);
    stream.push((
        "response.reasoning_text.done",
        json!({"output_index": 0, "item_id": "rs_1", "content_index": 0, "text": "x\u{fffd}"}),
    ));
    let (decoder, events, error) = responses(&stream);
    assert!(error.is_none(), "{error:?}");
    let output = &decoder.message()["output"][0];
    assert_eq!(output["summary"][0]["text"], "a\u{1f600}b\u{fffd}c");
    assert_eq!(output["content"][0]["text"], "x\u{fffd}");
    let thinking = thinking_of_output_0(&events);
    assert_eq!(thinking, ["a", "\u{1f600}b", "\u{fffd}c", "x", "\u{fffd}"]);
}

/// Responses events read for a field and passed on (a code interpreter's code delta), and the
/// error events of both APIs, read a lone surrogate escape as U+FFFD: before, such an event
/// passed through as its raw text, and the code delta was lost from the message.
#[test]
fn lone_surrogates_in_passed_on_and_error_events_read_as_replacement_characters() {
    let item = json!({"type": "code_interpreter_call", "id": "ci_1", "code": "",
        "status": "in_progress"});
    let (decoder, events, error) = responses(&[
        created(),
        (
            "response.output_item.added",
            json!({"output_index": 0, "item": item}),
        ),
        (
            "response.code_interpreter_call_code.delta",
            Value::String(
                r#"{"type":"response.code_interpreter_call_code.delta","output_index":0,"item_id":"ci_1","delta":"print('\ud83d')"}"#
                    .to_owned(),
            ),
        ),
        (
            "error",
            Value::String(
                r#"{"type":"error","code":"server_error","message":"busy \ud83d"}"#.to_owned(),
            ),
        ),
    ]);
    assert_eq!(decoder.message()["output"][0]["code"], "print('\u{fffd}')");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, DecodeEvent::Unknown { data, .. }
            if data["delta"] == "print('\u{fffd}')")),
        "{events:?}"
    );
    match error {
        Some(DecodeError::Provider { message, .. }) => assert_eq!(message, "busy \u{fffd}"),
        other => panic!("expected a provider error, got {other:?}"),
    }

    let start = chunk(json!([{"index": 0, "delta": {"role": "assistant", "content": ""}}]));
    let error = r#"{"error":{"message":"busy \ud83d","type":"server_error"}}"#.to_owned();
    let (_, _, error) = chat(&[start, error]);
    match error {
        Some(DecodeError::Provider { message, .. }) => assert_eq!(message, "busy \u{fffd}"),
        other => panic!("expected a provider error, got {other:?}"),
    }
}

/// A custom tool call's input delta that follows a held half without completing it passes on
/// the half as U+FFFD before its own text, even with no lone surrogate escape of its own.
#[test]
fn responses_custom_input_half_not_completed_is_passed_on_as_a_replacement_character() {
    let name = "response.custom_tool_call_input.delta";
    let delta = |delta: &str| {
        let data =
            format!(r#"{{"type":"{name}","output_index":0,"item_id":"ctc_1","delta":"{delta}"}}"#);
        (name, Value::String(data))
    };
    let item = json!({"type": "custom_tool_call", "id": "ctc_1", "call_id": "c1",
        "name": "apply_patch", "input": "", "status": "in_progress"});
    let (decoder, events, error) = responses(&[
        created(),
        (
            "response.output_item.added",
            json!({"output_index": 0, "item": item}),
        ),
        delta(r"a\ud83d"),
        delta("b"),
    ]);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(decoder.message()["output"][0]["input"], "a\u{fffd}b");
    assert_eq!(common::passed_on_deltas(&events, name), ["a", "\u{fffd}b"]);
}

/// An `output_index` that is present but unusable was reported as "missing `output_index`"
/// (an audit's finding); the error now says what is wrong with it.
#[test]
fn responses_unusable_output_index_is_named_not_called_missing() {
    let item = json!({"type": "message", "id": "m", "role": "assistant", "content": []});
    for (index, detail) in [
        (
            json!(1_048_576),
            "`output_index` 1048576 is out of range (at most 1048575)",
        ),
        (
            json!(-1),
            "`output_index` must be a non-negative integer, got -1",
        ),
        (
            json!("0"),
            "`output_index` must be a non-negative integer, got \"0\"",
        ),
        (
            Value::Null,
            "`output_index` must be a non-negative integer, got null",
        ),
    ] {
        let added = json!({"output_index": index, "item": item});
        let (_, _, error) = responses(&[created(), ("response.output_item.added", added)]);
        let error = error.expect("refused").to_string();
        assert!(error.ends_with(detail), "{error}");
    }
    let (_, _, error) = responses(&[
        created(),
        ("response.output_item.added", json!({"item": item})),
    ]);
    assert!(
        error
            .expect("refused")
            .to_string()
            .ends_with("missing `output_index`")
    );
}

/// A second `data: [DONE]` (a gateway appending its own end marker to a stream that carried
/// one) is not a second end: it was reported as a second `message_stop` event, which a host
/// finalizing the turn on that event did twice.
#[test]
fn chat_a_repeated_done_marker_ends_the_stream_once() {
    let chunks = vec![
        chunk(json!([{"index": 0, "delta": {"role": "assistant", "content": "x"}}])),
        chunk(json!([{"index": 0, "delta": {}, "finish_reason": "stop"}])),
        "[DONE]".to_owned(),
        "[DONE]".to_owned(),
    ];
    let (mut decoder, events, error) = chat(&chunks);
    assert!(error.is_none(), "{error:?}");
    let stops = events
        .iter()
        .filter(|e| matches!(e, DecodeEvent::MessageStop))
        .count();
    assert_eq!(stops, 1, "{events:?}");
    assert_eq!(
        decoder.finish().unwrap()["choices"][0]["message"]["content"],
        "x"
    );
}
