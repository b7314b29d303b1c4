//! Helpers shared by the integration tests: the repository's shared test data.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use bytes::Bytes;
use ferroloop::sse::{SseItem, SseParser};
use serde_json::{Value, json};

/// The repository's `tests/` folder (shared by the Rust, Python, Node and C suites).
pub fn shared_tests_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("tests")
}

/// Reads a file under `tests/`.
pub fn read_shared(path: &str) -> Vec<u8> {
    let full = shared_tests_dir().join(path);
    std::fs::read(&full).unwrap_or_else(|e| panic!("cannot read {}: {e}", full.display()))
}

/// An item as the CLI contract prints it.
pub fn item_json(item: &SseItem<'_>) -> Value {
    match item {
        SseItem::Event(e) => json!({"event": e.event_type(), "data": e.data(), "id": e.id()}),
        SseItem::Retry(ms) => json!({ "retry": ms }),
    }
}

/// Parses `input` fed in the given chunk sizes (cycled), returning the items as JSON.
pub fn parse_chunked(input: &[u8], sizes: &[usize]) -> Vec<Value> {
    let mut parser = SseParser::new();
    let mut out = Vec::new();
    let mut pos = 0;
    let mut turn = 0;
    while pos < input.len() {
        let size = sizes[turn % sizes.len()].max(1);
        turn += 1;
        let end = (pos + size).min(input.len());
        parser.feed(Bytes::copy_from_slice(&input[pos..end]));
        while let Some(item) = parser.next_item() {
            out.push(item_json(&item));
        }
        pos = end;
    }
    parser.finish();
    out
}

/// The totals of a run's `usage` events whose usage the loop can read: input (with cache
/// creation and cache reads) and output tokens, added as the loop adds them (saturating).
pub fn usage_event_totals(events: &[ferroloop::agent::AgentEvent]) -> (u64, u64) {
    use ferroloop::agent::AgentEvent;
    use ferroloop::tokens::Usage;
    events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::Usage { usage, .. } => Usage::from_json(usage),
            _ => None,
        })
        .fold((0u64, 0u64), |(input, output), usage| {
            (
                input.saturating_add(usage.input_total()),
                output.saturating_add(usage.output_tokens),
            )
        })
}

/// The `usage` of each `usage` event, in order (`null` for a call reported without usage).
pub fn usage_values(events: &[ferroloop::agent::AgentEvent]) -> Vec<&Value> {
    events
        .iter()
        .filter_map(|e| match e {
            ferroloop::agent::AgentEvent::Usage { usage, .. } => Some(usage),
            _ => None,
        })
        .collect()
}

/// Every billed call is accounted for by one `usage` event: their reported totals are the
/// stop event's `input_tokens` and `output_tokens` (calls reported without usage count by
/// estimate toward the budgets only, in neither). And every tool call the stop event counts
/// has one `tool_finished` event ([`assert_tool_events_add_up`]).
pub fn assert_usage_events_add_up(events: &[ferroloop::agent::AgentEvent]) {
    use ferroloop::agent::AgentEvent;
    let Some(AgentEvent::Stop {
        input_tokens,
        output_tokens,
        ..
    }) = events.last()
    else {
        panic!("the last event is not Stop: {events:#?}");
    };
    assert_eq!(
        usage_event_totals(events),
        (*input_tokens, *output_tokens),
        "the usage events do not add up to the stop event's totals: {events:#?}"
    );
    assert_tool_events_add_up(events);
}

/// The stop event's `tool_calls` is the number of `tool_finished` events: every call handed to
/// the tools has exactly one, those started early in a response then discarded too.
pub fn assert_tool_events_add_up(events: &[ferroloop::agent::AgentEvent]) {
    use ferroloop::agent::AgentEvent;
    let Some(AgentEvent::Stop { tool_calls, .. }) = events.last() else {
        panic!("the last event is not Stop: {events:#?}");
    };
    let finished = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::ToolFinished { .. }))
        .count();
    assert_eq!(
        usize::try_from(*tool_calls).unwrap(),
        finished,
        "the stop event's tool_calls is not the number of tool_finished events: {events:#?}"
    );
}

/// A text block of a scripted answer.
pub fn text(t: &str) -> Value {
    json!({"type": "text", "text": t})
}

/// A `tool_use` block of a scripted answer.
pub fn call(id: &str, name: &str, input: Value) -> Value {
    json!({"type": "tool_use", "id": id, "name": name, "input": input})
}

/// A scripted model's answer to `request`: `content` stopping for `stop`, as an Anthropic
/// stream in 7-byte chunks.
pub fn reply(
    request: &Value,
    content: Vec<Value>,
    stop: &str,
) -> Result<Bytes, ferroloop::agent::ModelError> {
    use ferroloop::agent::replay::{anthropic_sse, scripted_message};
    Ok(Bytes::from(anthropic_sse(
        &scripted_message(request, content, stop),
        7,
    )))
}

/// The JSON text `JSON.stringify` writes for a JavaScript string of UTF-16 `units`: a character
/// as itself (escaped as JSON requires), a lone surrogate as a lowercase `\udXXX` escape.
pub fn js_stringify(units: &[u16]) -> String {
    let mut out = String::from("\"");
    for decoded in char::decode_utf16(units.iter().copied()) {
        match decoded {
            Ok(c) => {
                let quoted = serde_json::to_string(&c.to_string()).unwrap();
                out.push_str(&quoted[1..quoted.len() - 1]);
            }
            Err(lone) => out.push_str(&format!("\\u{:04x}", lone.unpaired_surrogate())),
        }
    }
    out.push('"');
    out
}

/// The `delta` of every passed-on event of type `event_type`, in order (the events a decoder
/// passes through, such as a Responses custom tool call's input deltas).
pub fn passed_on_deltas<'a>(
    events: &'a [ferroloop::decode::DecodeEvent],
    event_type: &str,
) -> Vec<&'a str> {
    events
        .iter()
        .filter_map(|e| match e {
            ferroloop::decode::DecodeEvent::Unknown {
                event_type: kind,
                data,
            } if kind == event_type => data["delta"].as_str(),
            _ => None,
        })
        .collect()
}
