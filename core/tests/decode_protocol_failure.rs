//! A protocol-level failure in the middle of a stream (an event whose JSON does not parse or
//! has the wrong shape) is not forgotten: `finish()` answers with it again instead of a final
//! message that silently lacks the broken event's content.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use bytes::Bytes;
use ferroloop::decode::{DecodeError, EventDecoder, Provider, StreamDecoder};
use serde_json::{Value, json};

/// `(event type, data)` pairs of a whole stream with one broken event in the middle (the first
/// text delta), by provider.
fn stream_with_broken_event(provider: Provider, broken: &str) -> Vec<(String, String)> {
    let e = |kind: &str, data: Value| (kind.to_owned(), data.to_string());
    match provider {
        Provider::Anthropic => vec![
            e(
                "message_start",
                json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
                    "role": "assistant", "model": "claude-test", "content": [], "stop_reason": null,
                    "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 1}}}),
            ),
            e(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ),
            ("content_block_delta".to_owned(), broken.to_owned()),
            e(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " there!"}}),
            ),
            e(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ),
            e(
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null},
                    "usage": {"output_tokens": 3}}),
            ),
            e("message_stop", json!({"type": "message_stop"})),
        ],
        Provider::OpenAiChat => {
            let chunk = |delta: Value, finish: Value| {
                json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                    "model": "gpt-test", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
            };
            vec![
                e(
                    "message",
                    chunk(json!({"role": "assistant", "content": ""}), Value::Null),
                ),
                ("message".to_owned(), broken.to_owned()),
                e("message", chunk(json!({"content": " there!"}), Value::Null)),
                e("message", chunk(json!({}), json!("stop"))),
                ("message".to_owned(), "[DONE]".to_owned()),
            ]
        }
        Provider::OpenAiResponses => {
            let response = json!({"id": "resp_1", "object": "response", "status": "in_progress",
                "model": "gpt-test", "output": []});
            let mut done = response.clone();
            done["status"] = json!("completed");
            done["output"] = json!([{"type": "message", "id": "msg_1", "role": "assistant",
                "status": "completed", "content": [{"type": "output_text", "text": "Hello there!", "annotations": []}]}]);
            vec![
                e(
                    "response.created",
                    json!({"type": "response.created", "response": response}),
                ),
                e(
                    "response.output_item.added",
                    json!({"type": "response.output_item.added", "output_index": 0,
                        "item": {"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []}}),
                ),
                e(
                    "response.content_part.added",
                    json!({"type": "response.content_part.added", "item_id": "msg_1", "output_index": 0,
                        "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
                ),
                ("response.output_text.delta".to_owned(), broken.to_owned()),
                e(
                    "response.output_text.delta",
                    json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0,
                        "content_index": 0, "delta": " there!"}),
                ),
                e(
                    "response.completed",
                    json!({"type": "response.completed", "response": done}),
                ),
            ]
        }
    }
}

/// Broken data for the provider's text delta: JSON that does not parse, and JSON of the wrong
/// shape.
fn broken_deltas(provider: Provider) -> Vec<String> {
    match provider {
        Provider::Anthropic => vec![
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}"#
                .to_owned(),
            r#"{"type":"content_block_delta","index":"zero","delta":{"type":"text_delta","text":"Hello"}}"#
                .to_owned(),
        ],
        Provider::OpenAiChat => vec![
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]"#
                .to_owned(),
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}"#
                .to_owned(),
            r#"["not", "a", "chunk"]"#.to_owned(),
        ],
        Provider::OpenAiResponses => vec![
            r#"{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hello""#
                .to_owned(),
            r#"{"type":"response.output_text.delta","item_id":"msg_1","output_index":"zero","content_index":0,"delta":"Hello"}"#
                .to_owned(),
        ],
    }
}

const PROVIDERS: [Provider; 3] = [
    Provider::Anthropic,
    Provider::OpenAiChat,
    Provider::OpenAiResponses,
];

/// The identity of an error for these tests: its code, its variant and its message.
fn id(error: &DecodeError) -> String {
    let variant = match error {
        DecodeError::InvalidJson { .. } => "InvalidJson".to_owned(),
        DecodeError::Protocol(protocol) => format!("Protocol({protocol:?})"),
        DecodeError::Provider { .. } => "Provider".to_owned(),
        DecodeError::Finished => "Finished".to_owned(),
        DecodeError::Truncated { .. } => "Truncated".to_owned(),
    };
    format!("{} {variant}: {error}", error.code())
}

fn is_protocol_level(error: &DecodeError) -> bool {
    matches!(
        error,
        DecodeError::InvalidJson { .. } | DecodeError::Protocol(_)
    )
}

/// The provider decoders themselves: the broken event's error, then every later event decodes
/// (the snapshot goes on), and `finish()` / `finish_json()` answer with that same error, again
/// and again.
#[test]
fn finish_answers_with_the_protocol_error_a_push_returned() {
    for provider in PROVIDERS {
        for broken in broken_deltas(provider) {
            let mut decoder = provider.decoder();
            let mut first = None;
            for (kind, data) in stream_with_broken_event(provider, &broken) {
                if let Err(error) = decoder.push_event(&kind, &data) {
                    assert!(first.is_none(), "{provider:?}: a second error {error}");
                    first = Some(error);
                }
                let snapshot: Value = serde_json::from_str(&decoder.message_json()).unwrap();
                assert!(snapshot.is_object(), "{provider:?}: {snapshot}");
            }
            let first = first.unwrap_or_else(|| panic!("{provider:?}: {broken} was accepted"));
            assert!(is_protocol_level(&first), "{provider:?}: {first:?}");
            assert!(decoder.is_complete(), "{provider:?}");
            let snapshot = decoder.message();
            assert!(snapshot.is_object(), "{provider:?}: {snapshot}");
            for _ in 0..2 {
                let finished = decoder.finish();
                let error = finished
                    .as_ref()
                    .err()
                    .unwrap_or_else(|| panic!("{provider:?} {broken}: finish gave {finished:?}"));
                assert_eq!(id(error), id(&first), "{provider:?}");
                let error = decoder.finish_json().unwrap_err();
                assert_eq!(id(&error), id(&first), "{provider:?}");
            }
            assert_eq!(decoder.message(), snapshot, "{provider:?}");
        }
    }
}

/// The same through `StreamDecoder` (what the bindings wrap), fed bytes: the feed of the broken
/// event fails, the later feeds decode, and `finish()` (all its forms) answers with the feed's
/// error; `message()` stays a valid snapshot.
#[test]
fn stream_decoder_finish_answers_with_the_feed_error() {
    for provider in PROVIDERS {
        for broken in broken_deltas(provider) {
            for way in 0..3 {
                let mut decoder = StreamDecoder::for_provider(provider);
                let mut first = None;
                for (kind, data) in stream_with_broken_event(provider, &broken) {
                    let sse = format!("event: {kind}\ndata: {data}\n\n");
                    let mut events = Vec::new();
                    let fed = if way == 0 {
                        decoder.feed(Bytes::from(sse)).map(drop)
                    } else {
                        decoder.feed_borrowed_into(sse.as_bytes(), &mut events)
                    };
                    if let Err(error) = fed {
                        assert!(first.is_none(), "{provider:?}: a second error {error}");
                        first = Some(error);
                    }
                    let snapshot: Value = serde_json::from_str(&decoder.message_json()).unwrap();
                    assert!(snapshot.is_object(), "{provider:?}: {snapshot}");
                }
                let first = first.unwrap();
                assert!(is_protocol_level(&first), "{provider:?}: {first:?}");
                let snapshot = decoder.message();
                assert!(snapshot.is_object());
                for _ in 0..2 {
                    let error = match way {
                        0 => decoder.finish().map(drop).unwrap_err(),
                        1 => decoder.finish_json().map(drop).unwrap_err(),
                        _ => decoder
                            .finish_json_into(&mut Vec::new())
                            .map(drop)
                            .unwrap_err(),
                    };
                    assert_eq!(id(&error), id(&first), "{provider:?} way {way}");
                }
                assert_eq!(decoder.message(), snapshot);
            }
        }
    }
}

/// The whole stream in one chunk: the feed stops at the broken event (the later ones stay
/// queued), and `finish()` decodes those and answers with the feed's error, not a message.
#[test]
fn stream_decoder_one_chunk_then_finish_answers_with_the_feed_error() {
    for provider in PROVIDERS {
        for broken in broken_deltas(provider) {
            let sse: String = stream_with_broken_event(provider, &broken)
                .iter()
                .map(|(kind, data)| format!("event: {kind}\ndata: {data}\n\n"))
                .collect();
            let mut decoder = StreamDecoder::for_provider(provider);
            let first = decoder.feed(Bytes::from(sse)).unwrap_err();
            assert!(is_protocol_level(&first), "{provider:?}: {first:?}");
            let error = decoder.finish().unwrap_err();
            assert_eq!(id(&error), id(&first), "{provider:?}");
            assert!(decoder.is_complete(), "the queued events were decoded");
            assert!(decoder.message().is_object());
        }
    }
}

/// Of a provider error and a protocol error, `finish()` answers with the first one seen.
#[test]
fn finish_keeps_the_first_of_a_provider_and_a_protocol_error() {
    let provider_error = (
        "error".to_owned(),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
            .to_string(),
    );
    let broken = broken_deltas(Provider::Anthropic).remove(0);
    let stream = stream_with_broken_event(Provider::Anthropic, &broken);
    let (head, tail) = stream.split_at(3);
    // Protocol error first, provider error later.
    let mut decoder = Provider::Anthropic.decoder();
    let mut errors = Vec::new();
    for (kind, data) in head.iter().chain([&provider_error]).chain(tail) {
        if let Err(error) = decoder.push_event(kind, data) {
            errors.push(error);
        }
    }
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert_eq!(decoder.finish().unwrap_err().code(), "invalid_json");
    // Provider error first, protocol error later.
    let mut decoder = Provider::Anthropic.decoder();
    let mut errors = Vec::new();
    for (kind, data) in head[..2]
        .iter()
        .chain([&provider_error])
        .chain(&stream[2..])
    {
        if let Err(error) = decoder.push_event(kind, data) {
            errors.push(error);
        }
    }
    assert_eq!(errors.len(), 2, "{errors:?}");
    let error = decoder.finish().unwrap_err();
    assert_eq!(id(&error), id(&errors[0]));
    assert_eq!(error.code(), "provider");
}
