//! Inputs found by fuzzing (`scripts/fuzz-smoke.sh`), kept as regression tests. Each test names
//! the fuzz target that found it.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use bytes::Bytes;
use ferroloop::decode::partial_json::{PartialJson, PartialMode};
use ferroloop::decode::{AnthropicDecoder, Provider, StreamDecoder};
use serde_json::{Value, json};

const MODES: [PartialMode; 2] = [
    PartialMode::DropIncompleteStrings,
    PartialMode::TrailingStrings,
];

fn fresh_view_text(text: &str, mode: PartialMode) -> Option<String> {
    let mut p = PartialJson::new();
    p.push(text);
    p.view_text(mode)
}

/// Feeds `pieces` one by one; after each, the incremental view must equal a fresh parse of the
/// same prefix and be valid JSON.
fn check_incremental(pieces: &[&str]) -> PartialJson {
    let mut out = None;
    for mode in MODES {
        let mut incremental = PartialJson::new();
        let mut prefix = String::new();
        for piece in pieces {
            incremental.push(piece);
            prefix.push_str(piece);
            let view = incremental.view_text(mode);
            assert_eq!(
                view,
                fresh_view_text(&prefix, mode),
                "{prefix:?} in {mode:?}"
            );
            if let Some(view) = &view {
                assert!(
                    serde_json::from_str::<Value>(view).is_ok(),
                    "view {view:?} of {prefix:?} is not JSON"
                );
            }
        }
        out = Some(incremental);
    }
    out.unwrap()
}

/// fuzz target `partial_json` (crash-974740d1): a raw control character inside a string was
/// accepted, so the "complete-so-far" view was not valid JSON (serde_json: "control character
/// (\u0000-\u001F) found while parsing a string").
#[test]
fn raw_control_character_in_a_string_is_invalid_json() {
    let text = "{\n  \"id\u{5}\u{3}{\n  \u{FFFD}id\": \"ms\"g_4Qp:";
    let p = check_incremental(&[text]);
    assert!(p.is_invalid());
    for mode in MODES {
        assert_eq!(fresh_view_text(text, mode).as_deref(), Some("{}"));
    }
    // In a value, the text before the control character is kept in trailing-strings mode.
    let p = check_incremental(&["{\"a\": \"xy", "z\u{1}w\"}"]);
    assert!(p.is_invalid());
    assert_eq!(
        fresh_view_text("{\"a\": \"xyz\u{1}w\"}", PartialMode::TrailingStrings).as_deref(),
        Some("{\"a\": \"xyz\"}")
    );
    // A line feed inside a string is a control character too.
    check_incremental(&["[\"line", "\nnext\"]"]);
}

/// Found while fixing the above: an invalid escape or surrogate after a fragment boundary left
/// the view at a different cut than a fresh parse of the same text (the state reached before the
/// error was not kept).
#[test]
fn errors_inside_strings_give_the_same_view_at_any_fragmentation() {
    for pieces in [
        &["{\"a\": \"ab", "c\\x\"}"][..],
        &["{\"a\": \"ab", "c\\u12G4\"}"][..],
        &["{\"a\": \"ab", "c\\udc00\"}"][..],
        &["{\"a\": \"ab", "c\\ud800x\"}"][..],
        &["{\"a\": \"ab", "c\\ud800\\n\"}"][..],
        &["[\"ab", "c", "\u{7}\"]"][..],
    ] {
        let p = check_incremental(pieces);
        assert!(p.is_invalid(), "{pieces:?}");
    }
}

/// fuzz target `decode_anthropic` (crash-4bbcf51f): a `message_delta` delta naming a field the
/// message models (`type`, here) went into the message's `extra` map, and so did a usage counter
/// that was not a count. The message then serialized with the key twice: `message_json` (and
/// `finish_json`) wrote both, while `message()` kept one, so the texts differed.
#[test]
fn message_delta_keys_of_modelled_fields_do_not_duplicate_them() {
    let stream = concat!(
        "event: message_start\n",
        r#"data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}"#,
        "\n\n",
        "event: message_delta\n",
        r#"data: {"type":"message_delta","delta":{"type":"input_json_delta","id":"x","content":7,"stop_reason":"end_turn","container":null},"usage":{"output_tokens":"many","input_tokens":-1,"cache_read_input_tokens":2.5,"service_tier":"standard"}}"#,
        "\n\n",
        "event: message_stop\n",
        "data: {\"type\":\"message_stop\"}\n\n",
    );
    let mut by_value = StreamDecoder::for_provider(Provider::Anthropic);
    let mut by_text = StreamDecoder::for_provider(Provider::Anthropic);
    by_value
        .feed(Bytes::from_static(stream.as_bytes()))
        .unwrap();
    by_text.feed(Bytes::from_static(stream.as_bytes())).unwrap();
    assert_eq!(by_text.message_json(), by_value.message().to_string());
    let message = by_value.finish().unwrap();
    assert_eq!(by_text.finish_json().unwrap(), message.to_string());
    // The modelled fields keep what `message_start` said; unmodelled keys are still kept.
    assert_eq!(message["type"], "message");
    assert_eq!(message["id"], "msg_1");
    assert_eq!(message["content"], json!([]));
    assert_eq!(message["stop_reason"], "end_turn");
    assert_eq!(message["container"], Value::Null);
    assert!(message.as_object().unwrap().contains_key("container"));
    assert_eq!(
        message["usage"],
        json!({"input_tokens": 3, "output_tokens": 1, "service_tier": "standard"})
    );
}

/// Found by fuzzing (`decode_anthropic`): the hand-written `content_block_delta` fast path read
/// an index with a leading zero (`"index":01`), which is not JSON. Before `message_start` it
/// reported a protocol error where serde reports invalid JSON; after it, it appended the text to
/// block 1 where serde rejects the event. Both paths now reject it as invalid JSON.
#[test]
fn delta_index_with_a_leading_zero_is_invalid_json_on_both_paths() {
    let start = concat!(
        "event: message_start\n",
        r#"data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}"#,
        "\n\n",
        "event: content_block_start\n",
        r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        "\n\n",
        "event: content_block_start\n",
        r#"data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
        "\n\n",
    );
    let bad_delta = concat!(
        "event: content_block_delta\n",
        r#"data: {"type":"content_block_delta","index":01,"delta":{"type":"text_delta","text":"Partial"}}"#,
        "\n\n",
    );
    for stream in [bad_delta.to_owned(), format!("{start}{bad_delta}")] {
        let mut serde_only = AnthropicDecoder::new();
        serde_only.set_text_fast_path(false);
        let mut fast = StreamDecoder::new(AnthropicDecoder::new());
        let mut slow = StreamDecoder::new(serde_only);
        let fast_err = fast.feed(Bytes::from(stream.clone())).unwrap_err();
        let slow_err = slow.feed(Bytes::from(stream.clone())).unwrap_err();
        assert_eq!(fast_err.code(), "invalid_json", "{fast_err}");
        assert_eq!(fast_err.to_string(), slow_err.to_string());
        assert_eq!(fast.message(), slow.message());
        assert!(!fast.message_json().contains("Partial"));
    }
}

/// Found by fuzzing (`agent_openai_chat`): a server that numbers its tool calls out of order
/// (`index` 1 first). The snapshot put such a call at the next position, but the events named it
/// by its `index`: a block started at 1 while the call, sealed at 0, was reported at 0, and a
/// later `index: 0` fragment was reported for a block never started (and, by the SDK's rule,
/// merged into the first call). Calls are now kept in the order they start, a fragment goes to
/// the latest call sent with its `index`, and events name calls by their position.
#[test]
fn out_of_order_tool_call_indexes_are_reported_by_position() {
    let (events, message) = decode_chat(&[
        r#"{"role":"assistant","content":null}"#,
        r#"{"tool_calls":[{"index":1,"id":"c1","type":"function","function":{"name":"read","arguments":"{\"p\":"}}]}"#,
        r#"{"tool_calls":[{"index":1,"function":{"arguments":"1}"}}]}"#,
        r#"{"tool_calls":[{"index":0,"id":"c0","type":"function","function":{"name":"glob","arguments":"{}"}}]}"#,
        r#"{"tool_calls":[{"index":7,"id":"c2","type":"function","function":{"name":"grep","arguments":"{}"}}]}"#,
    ]);
    assert_calls(
        &events,
        &message,
        &[
            ("c1", json!({"p": 1})),
            ("c0", json!({})),
            ("c2", json!({})),
        ],
    );
}

/// Ollama sends every parallel tool call with `index: 0` (each with its own id). The SDK's
/// accumulation merged them into one call with concatenated arguments (reported invalid); a
/// fragment with another id now starts a new call, and fragments without an id continue the
/// latest call with their `index`.
#[test]
fn parallel_calls_sharing_index_zero_stay_apart() {
    let (events, message) = decode_chat(&[
        r#"{"role":"assistant","content":""}"#,
        r#"{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read","arguments":"{\"path\":"}}]}"#,
        r#"{"tool_calls":[{"index":0,"function":{"arguments":"\"a\"}"}}]}"#,
        r#"{"tool_calls":[{"index":0,"id":"call_b","type":"function","function":{"name":"read","arguments":"{\"path\":\"b\"}"}}]}"#,
        r#"{"tool_calls":[{"index":0,"id":"call_b","function":{"arguments":""}}]}"#,
    ]);
    assert_calls(
        &events,
        &message,
        &[
            ("call_a", json!({"path": "a"})),
            ("call_b", json!({"path": "b"})),
        ],
    );
}

/// Decodes Chat Completions chunks (one choice, these deltas, then `tool_calls`) to their events
/// (as JSON) and the final message.
fn decode_chat(deltas: &[&str]) -> (Vec<Value>, Value) {
    let chunk = |delta: &str, finish: &str| {
        format!(
            "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
        )
    };
    let mut stream: String = deltas.iter().map(|d| chunk(d, "null")).collect();
    stream.push_str(&chunk("{}", r#""tool_calls""#));
    stream.push_str("data: [DONE]\n\n");
    let mut decoder = StreamDecoder::for_provider(Provider::OpenAiChat);
    let events = decoder.feed(Bytes::from(stream)).unwrap();
    let message = decoder.finish().unwrap();
    let events = events
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    (events, message)
}

/// The message holds exactly `expected` calls (id, input) in order; each was started, then
/// reported ready once, at its position, and every event names a started call.
fn assert_calls(events: &[Value], message: &Value, expected: &[(&str, Value)]) {
    let calls = message["choices"][0]["message"]["tool_calls"]
        .as_array()
        .unwrap();
    let ids: Vec<&str> = calls.iter().map(|c| c["id"].as_str().unwrap()).collect();
    let expected_ids: Vec<&str> = expected.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, expected_ids, "{message}");
    let started: Vec<u64> = events
        .iter()
        .filter(|e| e["type"] == "block_start")
        .map(|e| e["index"].as_u64().unwrap())
        .collect();
    assert_eq!(
        started,
        (0..expected.len() as u64).collect::<Vec<_>>(),
        "{events:#?}"
    );
    for event in events {
        if let Some(index) = event.get("index").and_then(Value::as_u64)
            && event["type"] != "text_delta"
        {
            assert!(started.contains(&index), "{event} names no started block");
        }
    }
    let ready: Vec<(u64, &str, &Value)> = events
        .iter()
        .filter(|e| e["type"] == "tool_use_ready")
        .map(|e| {
            (
                e["index"].as_u64().unwrap(),
                e["id"].as_str().unwrap(),
                &e["input"],
            )
        })
        .collect();
    let wanted: Vec<(u64, &str, &Value)> = expected
        .iter()
        .enumerate()
        .map(|(i, (id, input))| (i as u64, *id, input))
        .collect();
    assert_eq!(ready, wanted, "{events:#?}");
}
