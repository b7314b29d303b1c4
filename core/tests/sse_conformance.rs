//! The SSE parser against the shared conformance vectors (`tests/sse/conformance.json`, WHATWG
//! rules and the web-platform-tests `eventsource/format-*` cases) and the recorded provider
//! streams, at every chunking: whole, 1, 2, 3, 7 bytes, and every two-way split point.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use base64::Engine;
use bytes::Bytes;
use ferroloop::sse::SseParser;
use serde_json::Value;

use common::{item_json, parse_chunked, read_shared};

struct Vector {
    name: String,
    input: Vec<u8>,
    expected: Vec<Value>,
}

fn vectors() -> Vec<Vector> {
    let raw: Vec<Value> = serde_json::from_slice(&read_shared("sse/conformance.json")).unwrap();
    raw.into_iter()
        .map(|v| {
            let input = match (v.get("input"), v.get("input_base64")) {
                (Some(Value::String(s)), _) => s.as_bytes().to_vec(),
                (_, Some(Value::String(b))) => {
                    base64::engine::general_purpose::STANDARD.decode(b).unwrap()
                }
                _ => panic!("vector without input: {v}"),
            };
            Vector {
                name: v["name"].as_str().unwrap().to_owned(),
                input,
                expected: v["expected"].as_array().unwrap().clone(),
            }
        })
        .collect()
}

fn check_all_chunkings(name: &str, input: &[u8], expected: &[Value]) {
    let whole = parse_chunked(input, &[input.len().max(1)]);
    assert_eq!(whole, expected, "{name}: whole input");
    for size in [1, 2, 3, 7] {
        assert_eq!(
            parse_chunked(input, &[size]),
            expected,
            "{name}: {size}-byte chunks"
        );
    }
    for split in 1..input.len() {
        let mut parser = SseParser::new();
        let mut got = Vec::new();
        for part in [&input[..split], &input[split..]] {
            parser.feed(Bytes::copy_from_slice(part));
            while let Some(item) = parser.next_item() {
                got.push(item_json(&item));
            }
        }
        parser.finish();
        assert_eq!(got, expected, "{name}: split at {split}");
    }
}

#[test]
fn conformance_vectors_at_every_chunking() {
    let vectors = vectors();
    assert!(vectors.len() >= 60, "the vector file lost cases");
    for v in &vectors {
        check_all_chunkings(&v.name, &v.input, &v.expected);
    }
}

#[test]
fn recorded_streams_parse_into_their_exact_event_lists() {
    let fixtures = [
        "anthropic/basic_response",
        "anthropic/tool_use_response",
        "anthropic/incomplete_partial_json_response",
        "openai-chat/173417d55340",
        "openai-chat/2018feb66ae1",
        "openai-chat/4cc50a6135d2",
        "openai-chat/569c877e6942",
    ];
    for fixture in fixtures {
        let input = read_shared(&format!("fixtures/{fixture}.sse"));
        let expected_path = format!("sse/expected/{}.jsonl", fixture.replace('/', "-"));
        let expected: Vec<Value> = String::from_utf8(read_shared(&expected_path))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(!expected.is_empty());
        check_all_chunkings(fixture, &input, &expected);
    }
}

#[test]
fn anthropic_tool_use_fixture_event_types() {
    let input = read_shared("fixtures/anthropic/tool_use_response.sse");
    let items = parse_chunked(&input, &[1460]);
    let types: Vec<&str> = items.iter().map(|i| i["event"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"message_start"));
    assert_eq!(types.last(), Some(&"message_stop"));
    assert_eq!(types.iter().filter(|t| **t == "ping").count(), 1);
    for item in &items {
        let data: Value = serde_json::from_str(item["data"].as_str().unwrap()).unwrap();
        assert_eq!(
            data["type"], item["event"],
            "data type matches the event name"
        );
    }
}
