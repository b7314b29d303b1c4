//! The requests the agent loop sends, checked against the rules the Anthropic Messages API
//! enforces with a 400, after unusual endings of a response.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

mod common;

use bytes::Bytes;
use ferroloop::agent::replay::{
    Script, ScriptedModel, anthropic_sse, openai_chat_sse, openai_responses_sse, scripted_message,
};
use ferroloop::agent::{Agent, AgentConfig, AgentEvent, ModelError, StopReason, check_history};
use ferroloop::exec::{FnTool, ToolExecutor, ToolOutput, ToolRegistry};
use futures::StreamExt;
use serde_json::{Value, json};

fn executor() -> Arc<ToolExecutor> {
    let mut tools = ToolRegistry::new();
    tools
        .register(
            FnTool::new("read", |_input: Value, _ctx| async move {
                Ok(ToolOutput::text("contents"))
            })
            .concurrency_safe(true),
        )
        .unwrap();
    Arc::new(ToolExecutor::new(tools))
}

/// Raw Anthropic SSE from `(event, data)` pairs.
fn sse(events: &[(&str, Value)]) -> Bytes {
    let mut out = String::new();
    for (event, data) in events {
        out.push_str(&format!("event: {event}\ndata: {data}\n\n"));
    }
    Bytes::from(out)
}

fn start() -> (&'static str, Value) {
    (
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "model": "m", "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    )
}

fn block_start(index: usize, block: Value) -> (&'static str, Value) {
    (
        "content_block_start",
        json!({"type": "content_block_start", "index": index, "content_block": block}),
    )
}

fn delta(index: usize, delta: Value) -> (&'static str, Value) {
    (
        "content_block_delta",
        json!({"type": "content_block_delta", "index": index, "delta": delta}),
    )
}

fn block_stop(index: usize) -> (&'static str, Value) {
    (
        "content_block_stop",
        json!({"type": "content_block_stop", "index": index}),
    )
}

fn end(stop_reason: &str) -> [(&'static str, Value); 2] {
    [
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop_reason,
                "stop_sequence": null}, "usage": {"output_tokens": 5}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]
}

fn final_text(text: &str) -> Bytes {
    let mut events = vec![
        start(),
        block_start(0, json!({"type": "text", "text": ""})),
        delta(0, json!({"type": "text_delta", "text": text})),
        block_stop(0),
    ];
    events.extend(end("end_turn"));
    sse(&events)
}

/// The stop event's reason and history; every run these tests make (refused fields sent again,
/// reasoning left out, stale thinking, sweeps of unusual endings) also has `usage` events that
/// add up to its totals.
fn stopped(events: &[AgentEvent]) -> (StopReason, Vec<Value>) {
    common::assert_usage_events_add_up(events);
    match events.last() {
        Some(AgentEvent::Stop {
            reason, messages, ..
        }) => (*reason, messages.clone()),
        other => panic!("the last event is not Stop: {other:?}"),
    }
}

/// Runs `first` as the first response, then a final text; returns the stop and every request.
async fn run_with_first_response(
    first: Bytes,
    prompt: &str,
) -> (StopReason, Vec<Value>, Vec<Value>) {
    let (model, requests) = ScriptedModel::new(move |n, _| {
        Ok(if n == 0 {
            first.clone()
        } else {
            final_text("ok")
        })
    })
    .recorded();
    let agent = Agent::new(AgentConfig::new("m"), Arc::new(model), executor());
    let events: Vec<AgentEvent> = agent.run(prompt).collect().await;
    let (reason, messages) = stopped(&events);
    let requests = requests.lock().unwrap().clone();
    (reason, messages, requests)
}

/// A refusal from the streaming classifier cuts the response inside a call's input: the cut
/// call (never sealed) must not stay in history unanswered, or the host's next request on
/// that history is refused ("tool_use ids were found without tool_result blocks").
/// The error of a run that stopped with `error` before any other event (nothing was sent).
fn lone_error(events: &[AgentEvent]) -> &str {
    match events {
        [
            AgentEvent::Stop {
                reason: StopReason::Error,
                error: Some(error),
                ..
            },
        ] => error,
        other => panic!("{other:#?}"),
    }
}

/// A block without a `type` (a broken proxy; the fuzz target `agent_stream` sent one) cannot
/// be sent back: it is left out of history, and the next request is one the API takes.
#[tokio::test]
async fn a_block_without_a_type_stays_out_of_history() {
    let events = vec![
        start(),
        block_start(0, json!({"type": "text", "text": ""})),
        delta(0, json!({"type": "text_delta", "text": "Reading."})),
        block_stop(0),
        block_start(1, json!({"tool_use_id": "srvtoolu_1", "content": "x"})),
        block_stop(1),
        block_start(
            2,
            json!({"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}),
        ),
        block_stop(2),
    ];
    let history = history_after_calls(events).await;
    assert_eq!(
        history[1]["content"],
        json!([{"type": "text", "text": "Reading."}, {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}])
    );
}

/// A response whose only call has no name stops for `tool_use` with nothing to answer: the
/// turn ends as `end_turn` does, instead of sending an empty user message the API refuses
/// (found by the fuzz target `agent_stream`).
#[tokio::test]
async fn a_response_whose_only_call_has_no_name_ends_the_turn() {
    let mut events = vec![
        start(),
        block_start(0, json!({"type": "text", "text": ""})),
        delta(0, json!({"type": "text_delta", "text": "I'm on it."})),
        block_stop(0),
        block_start(
            1,
            json!({"type": "tool_use", "id": "toolu_2", "name": "", "input": {}}),
        ),
        delta(1, json!({"type": "input_json_delta", "partial_json": "{}"})),
        block_stop(1),
    ];
    events.extend(end("tool_use"));
    let (reason, messages, requests) = run_with_first_response(sse(&events), "go").await;
    assert_eq!(reason, StopReason::EndTurn);
    assert_eq!(requests.len(), 1);
    let mut continued = messages.clone();
    continued.push(json!({"role": "user", "content": "go on"}));
    check_history(&continued).unwrap();
    assert_eq!(
        messages[1]["content"],
        json!([{"type": "text", "text": "I'm on it."}])
    );
}

/// Runs `events` and then `end("tool_use")` as the first response, then a final text: the run
/// ends the turn and its second request carries a history the API takes, which is returned.
async fn history_after_calls(mut events: Vec<(&'static str, Value)>) -> Vec<Value> {
    events.extend(end("tool_use"));
    let (reason, _, requests) = run_with_first_response(sse(&events), "go").await;
    assert_eq!(reason, StopReason::EndTurn);
    assert_eq!(requests.len(), 2);
    let history = requests[1]["messages"].as_array().unwrap().clone();
    check_history(&history).unwrap();
    history
}

/// A call without a name (a Chat server whose tool parser lost the first delta of a call; the
/// fuzz target `agent_stream` sent one) names no tool, runs nothing and cannot be sent back
/// (the API requires a name): it is left out of history, with no result, and the named call
/// beside it runs and is answered.
#[tokio::test]
async fn a_call_without_a_name_stays_out_of_history() {
    let events = vec![
        start(),
        block_start(
            0,
            json!({"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}),
        ),
        delta(0, json!({"type": "input_json_delta", "partial_json": "{}"})),
        block_stop(0),
        block_start(
            1,
            json!({"type": "tool_use", "id": "toolu_2", "name": "", "input": {}}),
        ),
        delta(1, json!({"type": "input_json_delta", "partial_json": "{}"})),
        block_stop(1),
    ];
    let history = history_after_calls(events).await;
    assert_eq!(
        history[1]["content"],
        json!([{"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}])
    );
    let results = history[2]["content"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{results:#?}");
    assert_eq!(results[0]["tool_use_id"], "toolu_1");
    assert_eq!(results[0]["content"], "contents");
}

/// A call without a name is left out where the stream seals it: the executor never runs it
/// (no `ToolStarted` or `ToolFinished` for it, as an unknown tool would have), and the run
/// counts only the named call.
#[tokio::test]
async fn a_call_without_a_name_is_never_submitted_to_the_executor() {
    let mut events = vec![
        start(),
        block_start(
            0,
            json!({"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}),
        ),
        delta(0, json!({"type": "input_json_delta", "partial_json": "{}"})),
        block_stop(0),
        block_start(
            1,
            json!({"type": "tool_use", "id": "toolu_2", "name": "", "input": {}}),
        ),
        delta(1, json!({"type": "input_json_delta", "partial_json": "{}"})),
        block_stop(1),
        block_start(
            2,
            json!({"type": "tool_use", "id": "toolu_3", "name": " \n", "input": {}}),
        ),
        block_stop(2),
    ];
    events.extend(end("tool_use"));
    let first = sse(&events);
    let model = ScriptedModel::new(move |n, _| {
        Ok(if n == 0 {
            first.clone()
        } else {
            final_text("ok")
        })
    });
    let agent = Agent::new(AgentConfig::new("m"), Arc::new(model), executor());
    let events: Vec<AgentEvent> = agent.run("go").collect().await;
    let touched: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolStarted { tool_use_id, .. }
            | AgentEvent::ToolFinished { tool_use_id, .. } => Some(tool_use_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(touched, ["toolu_1", "toolu_1"], "{events:#?}");
    match events.last() {
        Some(AgentEvent::Stop {
            tool_calls, reason, ..
        }) => {
            assert_eq!(*reason, StopReason::EndTurn);
            assert_eq!(*tool_calls, 1);
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_refusal_cut_inside_a_call_leaves_no_unanswered_call_in_history() {
    let mut events = vec![
        start(),
        block_start(0, json!({"type": "text", "text": ""})),
        delta(0, json!({"type": "text_delta", "text": "Reading it."})),
        block_stop(0),
        block_start(
            1,
            json!({"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}),
        ),
        delta(
            1,
            json!({"type": "input_json_delta", "partial_json": "{\"path\": \"a"}),
        ),
    ];
    events.extend(end("refusal"));
    let (reason, mut messages, _) = run_with_first_response(sse(&events), "go").await;
    assert_eq!(reason, StopReason::Refusal);
    messages.push(json!({"role": "user", "content": "try again"}));
    check_history(&messages).unwrap_or_else(|e| panic!("{e}: {messages:#?}"));
}

/// A call whose input is not valid JSON in a response that ends the turn (`end_turn`) is not
/// run; it must not stay in history unanswered either.
#[tokio::test]
async fn an_invalid_call_in_an_end_turn_response_leaves_no_unanswered_call() {
    let mut events = vec![
        start(),
        block_start(
            0,
            json!({"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}),
        ),
        delta(
            0,
            json!({"type": "input_json_delta", "partial_json": "{\"path\": tru"}),
        ),
        block_stop(0),
    ];
    events.extend(end("end_turn"));
    let (reason, mut messages, _) = run_with_first_response(sse(&events), "go").await;
    assert_eq!(reason, StopReason::EndTurn);
    messages.push(json!({"role": "user", "content": "try again"}));
    check_history(&messages).unwrap_or_else(|e| panic!("{e}: {messages:#?}"));
}

fn reply(request: &Value, content: Vec<Value>, stop: &str) -> Bytes {
    Bytes::from(anthropic_sse(&scripted_message(request, content, stop), 7))
}

fn text(t: &str) -> Value {
    json!({"type": "text", "text": t})
}

/// Runs `script` (answers by call number) with a `read` tool and `config`; returns the stop,
/// the final history and every request.
async fn run_script(
    config: AgentConfig,
    script: impl Fn(usize, &Value) -> Bytes + Send + Sync + 'static,
) -> (StopReason, Vec<Value>, Vec<Value>) {
    let (model, requests) = ScriptedModel::new(move |n, request| Ok(script(n, request))).recorded();
    let agent = Agent::new(config, Arc::new(model), executor());
    let events: Vec<AgentEvent> = agent.run("go").collect().await;
    let (reason, messages) = stopped(&events);
    let requests = requests.lock().unwrap().clone();
    (reason, messages, requests)
}

/// A paused turn (`pause_turn`) goes back as the final assistant message, which the API
/// refuses when it ends with whitespace ("final assistant content cannot end with trailing
/// whitespace"); models end text with a newline before a server tool call.
#[tokio::test]
async fn a_paused_turn_sent_back_does_not_end_with_whitespace() {
    let (reason, messages, requests) = run_script(AgentConfig::new("m"), |n, request| match n {
        0 => reply(
            request,
            vec![
                json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}}),
                json!({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}),
                text("Let me search once more.\n\n"),
            ],
            "pause_turn",
        ),
        _ => reply(request, vec![text("Done.")], "end_turn"),
    })
    .await;
    assert_eq!(reason, StopReason::EndTurn);
    let last = requests[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "assistant");
    let final_block = last["content"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(final_block["text"], "Let me search once more.", "{last:#}");
    // History keeps the response as it came.
    assert_eq!(
        messages[1]["content"][2]["text"],
        "Let me search once more.\n\n"
    );
}

/// How many `cache_control` markers a request holds, anywhere.
fn markers(value: &Value) -> usize {
    match value {
        Value::Object(map) => {
            usize::from(map.contains_key("cache_control"))
                + map.values().map(markers).sum::<usize>()
        }
        Value::Array(items) => items.iter().map(markers).sum(),
        _ => 0,
    }
}

/// The API refuses more than four `cache_control` breakpoints ("A maximum of 4 blocks with
/// cache_control may be provided"). The loop places three (system, tools, last message); a
/// host's conversation that marks its own documents must not push a request over four.
#[tokio::test]
async fn a_request_never_holds_more_than_four_cache_breakpoints() {
    let (model, requests) =
        ScriptedModel::new(move |_, request| Ok(reply(request, vec![text("ok")], "end_turn")))
            .recorded();
    let mut config = AgentConfig::new("m");
    config.system = Some("Be brief.".into());
    let agent = Agent::new(config, Arc::new(model), executor());
    let cached =
        |t: &str| json!({"type": "text", "text": t, "cache_control": {"type": "ephemeral"}});
    let history = vec![
        json!({"role": "user", "content": [cached("document one"), cached("document two")]}),
        json!({"role": "assistant", "content": [text("Read both.")]}),
        json!({"role": "user", "content": [cached("document three"), text("Compare them.")]}),
    ];
    let events: Vec<AgentEvent> = agent.run_messages(history).collect().await;
    let (reason, _) = stopped(&events);
    assert_eq!(reason, StopReason::EndTurn);
    let requests = requests.lock().unwrap();
    let request = &requests[0];
    assert!(
        markers(request) <= 4,
        "{} markers: {request:#}",
        markers(request)
    );
    // The loop's own breakpoints stay: the last message's covers the whole conversation.
    let last = request["messages"].as_array().unwrap().last().unwrap();
    assert!(
        last["content"][1].get("cache_control").is_some(),
        "{last:#}"
    );
    assert!(request["system"][0].get("cache_control").is_some());
}

/// The API refuses a user message answering calls that does not begin with its results
/// ("Messages following tool_use blocks must begin with a matching number of tool_result
/// blocks"): a host's conversation with text before the results makes no request.
#[tokio::test]
async fn a_conversation_with_text_before_the_tool_results_is_refused_before_any_request() {
    let model = Arc::new(ScriptedModel::new(|_, request| {
        Ok(reply(request, vec![text("ok")], "end_turn"))
    }));
    let agent = Agent::new(AgentConfig::new("m"), model.clone(), executor());
    let history = vec![
        json!({"role": "user", "content": "read a"}),
        json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}},
        ]}),
        json!({"role": "user", "content": [
            text("Here it is:"),
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a"},
        ]}),
    ];
    let events: Vec<AgentEvent> = agent.run_messages(history).collect().await;
    let error = lone_error(&events);
    assert!(error.contains("tool_result"), "{error}");
    assert!(error.contains("message 2"), "{error}");
    assert_eq!(model.calls(), 0);
}

/// The API (both Anthropic's and OpenAI's) takes only object schemas with `"type": "object"`
/// as a tool's input schema. A schema that leaves the type out (its `properties` say it is an
/// object) goes out with it; one describing something else stops the run before any request,
/// naming the tool, instead of a 400 on every request.
#[tokio::test]
async fn tool_input_schemas_go_out_as_object_schemas() {
    let tool = |name: &str, schema: Value| {
        FnTool::new(name, |_input: Value, _ctx| async move {
            Ok(ToolOutput::text("done"))
        })
        .schema(schema)
    };
    let (model, requests) =
        ScriptedModel::new(move |_, request| Ok(reply(request, vec![text("ok")], "end_turn")))
            .recorded();
    let model = Arc::new(model);
    let untyped = json!({"properties": {"path": {"type": "string"}}, "required": ["path"]});
    let mut tools = ToolRegistry::new();
    tools.register(tool("open", untyped.clone())).unwrap();
    tools.register(tool("any", json!({}))).unwrap();
    let agent = Agent::new(
        AgentConfig::new("m"),
        model.clone(),
        Arc::new(ToolExecutor::new(tools)),
    );
    let events: Vec<AgentEvent> = agent.run("go").collect().await;
    assert_eq!(stopped(&events).0, StopReason::EndTurn);
    let sent = requests.lock().unwrap()[0]["tools"].clone();
    assert_eq!(sent[0]["name"], "any");
    assert_eq!(sent[0]["input_schema"], json!({"type": "object"}));
    let mut typed = untyped;
    typed["type"] = json!("object");
    assert_eq!(sent[1]["input_schema"], typed);

    let mut tools = ToolRegistry::new();
    tools
        .register(tool("say", json!({"type": "string"})))
        .unwrap();
    let agent = Agent::new(
        AgentConfig::new("m"),
        model.clone(),
        Arc::new(ToolExecutor::new(tools)),
    );
    let events: Vec<AgentEvent> = agent.run("go").collect().await;
    let error = lone_error(&events);
    assert!(error.contains("\"say\""), "{error}");
    assert!(error.contains("\"type\": \"object\""), "{error}");
    assert_eq!(model.calls(), 1);
}

/// The API requires a `tool_use` block's `input` to be an object. A call whose input came as
/// another JSON value (an array, a string), or as invalid JSON whose readable part is one, is
/// answered with an error, and the history sent next must still hold an object there.
#[tokio::test]
async fn a_call_whose_input_is_not_an_object_goes_back_with_an_object_input() {
    for partial in ["[\"a\", \"b\"]", "\"a\"", "[1, 2"] {
        let mut events = vec![
            start(),
            block_start(
                0,
                json!({"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}),
            ),
            delta(
                0,
                json!({"type": "input_json_delta", "partial_json": partial}),
            ),
            block_stop(0),
        ];
        events.extend(end("tool_use"));
        let (reason, messages, requests) = run_with_first_response(sse(&events), "go").await;
        assert_eq!(reason, StopReason::EndTurn, "{partial}");
        let sent = &requests[1]["messages"][1]["content"][0];
        assert_eq!(sent["type"], "tool_use");
        assert!(sent["input"].is_object(), "{partial}: {sent}");
        assert!(messages[1]["content"][0]["input"].is_object(), "{partial}");
        assert_eq!(messages[2]["content"][0]["is_error"], true, "{partial}");
    }
}

/// The API refuses an assistant message whose last block is a thinking block ("The final block
/// in an assistant message cannot be `thinking`"). A response that thought, then started a call
/// and was cut (or ended the turn without running it) loses the call; its thinking must not be
/// left last in the message that goes back.
#[tokio::test]
async fn a_cut_response_never_goes_back_ending_with_its_thinking() {
    for stop in ["max_tokens", "end_turn", "pause_turn"] {
        let thinking =
            json!({"type": "thinking", "thinking": "I will read a.", "signature": "sig"});
        let (reason, messages, requests) =
            run_script(AgentConfig::new("m"), move |n, request| match n {
                0 => reply(
                    request,
                    vec![
                        thinking.clone(),
                        json!({"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}),
                    ],
                    stop,
                ),
                _ => reply(request, vec![text("Done.")], "end_turn"),
            })
            .await;
        assert_eq!(reason, StopReason::EndTurn, "{stop}");
        let ends_with_thinking = |m: &Value| {
            m["role"] == "assistant"
                && m["content"]
                    .as_array()
                    .and_then(|c| c.last())
                    .is_some_and(|b| b["type"] == "thinking")
        };
        for request in &requests {
            for message in request["messages"].as_array().unwrap() {
                assert!(!ends_with_thinking(message), "{stop}: {request:#}");
            }
        }
        assert!(
            !messages.iter().any(ends_with_thinking),
            "{stop}: {messages:#?}"
        );
    }
}

/// The API refuses an empty text block inside a tool result too, and an error result without
/// content ("content cannot be empty if `is_error` is true"): a tool that fails without a
/// message (a Python `raise ValueError()`), or answers with an empty text block, must not
/// make the next request one the API refuses.
#[tokio::test]
async fn empty_tool_answers_go_back_as_content_the_api_takes() {
    use ferroloop::exec::ToolError;
    let mut tools = ToolRegistry::new();
    tools
        .register(FnTool::new("fail", |_input: Value, _ctx| async move {
            Err::<ToolOutput, _>(ToolError::Failed(String::new()))
        }))
        .unwrap();
    tools
        .register(FnTool::new("blank", |_input: Value, _ctx| async move {
            Ok(ToolOutput::blocks(vec![
                json!({"type": "text", "text": ""}),
            ]))
        }))
        .unwrap();
    tools
        .register(FnTool::new("refuse", |_input: Value, _ctx| async move {
            Ok(ToolOutput::error(" "))
        }))
        .unwrap();
    let (model, requests) = ScriptedModel::new(move |n, request| {
        Ok(match n {
            0 => reply(
                request,
                vec![
                    json!({"type": "tool_use", "id": "toolu_1", "name": "fail", "input": {}}),
                    json!({"type": "tool_use", "id": "toolu_2", "name": "blank", "input": {}}),
                    json!({"type": "tool_use", "id": "toolu_3", "name": "refuse", "input": {}}),
                ],
                "tool_use",
            ),
            _ => reply(request, vec![text("ok")], "end_turn"),
        })
    })
    .recorded();
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(model),
        Arc::new(ToolExecutor::new(tools)),
    );
    let events: Vec<AgentEvent> = agent.run("go").collect().await;
    assert_eq!(stopped(&events).0, StopReason::EndTurn);
    let requests = requests.lock().unwrap();
    let results = requests[1]["messages"][2]["content"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(results.len(), 3);
    for result in &results {
        let blank = match &result["content"] {
            Value::String(text) => text.trim().is_empty(),
            Value::Array(blocks) => blocks.iter().any(|b| {
                b["type"] == "text" && b["text"].as_str().is_none_or(|t| t.trim().is_empty())
            }),
            _ => false,
        };
        let refused = blank && (result["is_error"] == true || result["content"].is_array());
        assert!(!refused, "{result}");
    }
}

/// A refusal from the streaming classifier may cut the response while it thinks: that block
/// never gets its signature, and the API refuses it sent back (the host's next run on the
/// history). It is dropped as after a `max_tokens` cut; the text before it stays.
#[tokio::test]
async fn a_refusal_cut_while_thinking_leaves_no_unsigned_thinking() {
    let mut events = vec![
        start(),
        block_start(
            0,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
        ),
        delta(
            0,
            json!({"type": "thinking_delta", "thinking": "The user wants"}),
        ),
        block_stop(0),
        block_start(1, json!({"type": "text", "text": ""})),
        delta(1, json!({"type": "text_delta", "text": "I can't"})),
        block_stop(1),
        block_start(
            2,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
        ),
        delta(2, json!({"type": "thinking_delta", "thinking": "Hmm"})),
    ];
    events.extend(end("refusal"));
    let (reason, messages, _) = run_with_first_response(sse(&events), "go").await;
    assert_eq!(reason, StopReason::Refusal);
    let unsigned = messages
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .any(|b| b["type"] == "thinking" && b["signature"].as_str().is_none_or(str::is_empty));
    assert!(!unsigned, "{messages:#?}");
    assert_eq!(messages[1]["content"], json!([text("I can't")]));
}

/// The rules the Anthropic Messages API enforces with a 400 on a request's messages, as far as
/// the loop shapes them; `Err` names the first one broken.
fn api_rules(request: &Value) -> Result<(), String> {
    let messages = request["messages"].as_array().ok_or("no messages")?;
    if messages.first().map(|m| &m["role"]) != Some(&json!("user")) {
        return Err("the first message is not the user's".into());
    }
    ferroloop::agent::check_tool_pairing(messages)?;
    // "tool_use ids must be unique", across the whole request.
    let mut ids = std::collections::HashSet::new();
    for (i, message) in messages.iter().enumerate() {
        for id in ferroloop::agent::tool_use_ids(message) {
            if !ids.insert(id.clone()) {
                return Err(format!("message {i}: tool_use id {id:?} repeated"));
            }
        }
    }
    tool_name_rule(
        request["tools"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[]),
        |t| &t["name"],
    )?;
    let markers_seen = markers(request);
    if markers_seen > 4 {
        return Err(format!("{markers_seen} cache_control markers"));
    }
    for (i, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().ok_or("no role")?;
        if role != "user" && role != "assistant" {
            return Err(format!("message {i}: role {role}"));
        }
        let blocks = match &message["content"] {
            Value::String(text) if text.trim().is_empty() => {
                return Err(format!("message {i}: blank content"));
            }
            Value::String(_) => continue,
            Value::Array(blocks) if blocks.is_empty() => {
                return Err(format!("message {i}: empty content"));
            }
            Value::Array(blocks) => blocks,
            other => return Err(format!("message {i}: content {other}")),
        };
        let blank_text = |b: &Value| {
            b["type"] == "text" && b["text"].as_str().is_none_or(|t| t.trim().is_empty())
        };
        for block in blocks {
            if blank_text(block) {
                return Err(format!("message {i}: blank text block"));
            }
            match block["type"].as_str() {
                Some("thinking") if block["signature"].as_str().is_none_or(str::is_empty) => {
                    return Err(format!("message {i}: unsigned thinking"));
                }
                Some("tool_use") if !block["input"].is_object() => {
                    return Err(format!("message {i}: tool_use input {}", block["input"]));
                }
                Some("tool_result") => match &block["content"] {
                    Value::Array(inner) if inner.iter().any(blank_text) => {
                        return Err(format!("message {i}: blank text in a tool result"));
                    }
                    Value::String(text) if text.trim().is_empty() && block["is_error"] == true => {
                        return Err(format!("message {i}: empty error result"));
                    }
                    _ => {}
                },
                _ => {}
            }
        }
        if role == "assistant" {
            let last = blocks.last().unwrap();
            if matches!(
                last["type"].as_str(),
                Some("thinking" | "redacted_thinking")
            ) {
                return Err(format!("message {i}: ends with thinking"));
            }
            if i + 1 == messages.len()
                && last["type"] == "text"
                && last["text"].as_str().is_some_and(|t| t.trim_end() != t)
            {
                return Err(format!(
                    "message {i}: final assistant text ends with whitespace"
                ));
            }
        }
    }
    Ok(())
}

/// One response of the sweep below: content by turn number, and its stop reason.
fn sweep_response(shape: usize, n: usize) -> (Vec<Value>, &'static str) {
    let id = format!("toolu_{n}");
    let thinking = json!({"type": "thinking", "thinking": "Plan.", "signature": "sig"});
    let call = |input: Value| json!({"type": "tool_use", "id": id, "name": "read", "input": input});
    let search = format!("srvtoolu_{n}");
    match shape {
        0 => (vec![text("Reading."), call(json!({}))], "tool_use"),
        1 => (vec![thinking, call(json!({}))], "tool_use"),
        2 => (vec![text("Partial answer ")], "max_tokens"),
        3 => (vec![thinking, call(json!({"path": "a"}))], "max_tokens"),
        4 => (
            vec![
                json!({"type": "server_tool_use", "id": search, "name": "web_search", "input": {"query": "q"}}),
                json!({"type": "web_search_tool_result", "tool_use_id": search, "content": []}),
                text("Searching more.\n"),
            ],
            "pause_turn",
        ),
        5 => (vec![thinking], "pause_turn"),
        6 => (vec![text("\n\n"), call(json!([1]))], "tool_use"),
        7 => (
            vec![text("Cut "), call(json!({}))],
            "model_context_window_exceeded",
        ),
        8 => (vec![thinking, text("Next."), call(json!({}))], "tool_use"),
        _ => (vec![text("Done.")], "end_turn"),
    }
}

/// Every request of runs made of any three of the response shapes above (calls, thinking,
/// cuts, pauses, blank text, a non-object input), then a last answer, obeys the API's rules.
#[tokio::test]
async fn every_request_of_unusual_turn_sequences_obeys_the_api_rules() {
    const SHAPES: usize = 9;
    for a in 0..SHAPES {
        for b in 0..SHAPES {
            for c in 0..SHAPES {
                let plan = [a, b, c];
                let mut config = AgentConfig::new("m");
                config.system = Some("Be brief.".into());
                let (_, messages, requests) = run_script(config, move |n, request| {
                    let (content, stop) = sweep_response(plan.get(n).copied().unwrap_or(SHAPES), n);
                    reply(request, content, stop)
                })
                .await;
                for (k, request) in requests.iter().enumerate() {
                    if let Err(broken) = api_rules(request) {
                        panic!("{plan:?}, request {k}: {broken}\n{:#}", request["messages"]);
                    }
                }
                let mut next = messages.clone();
                next.push(json!({"role": "user", "content": "more"}));
                let request = json!({"messages": next});
                if let Err(broken) = api_rules(&request) {
                    panic!("{plan:?}, the host's next request: {broken}\n{next:#?}");
                }
            }
        }
    }
}

/// Tool names both providers take: `^[a-zA-Z0-9_-]{1,64}$`.
fn tool_name_rule(tools: &[Value], name: impl Fn(&Value) -> &Value) -> Result<(), String> {
    for tool in tools {
        let Some(name) = name(tool).as_str() else {
            continue;
        };
        let valid = (1..=64).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid {
            return Err(format!("tool name {name:?}"));
        }
    }
    Ok(())
}

/// The rules OpenAI Chat Completions enforces on a request's messages: an assistant message
/// with `tool_calls` is followed at once by one `tool` message per call, and a `tool` message
/// answers a call of the assistant message before it; content is present where required.
fn chat_rules(request: &Value) -> Result<(), String> {
    let messages = request["messages"].as_array().ok_or("no messages")?;
    let tools = request["tools"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    tool_name_rule(tools, |t| &t["function"]["name"])?;
    let defined = |name: &str| tools.iter().any(|t| t["function"]["name"] == name);
    // Calls waiting for their `tool` message, and whether the tool they name is defined (a
    // call to an undefined tool is answered with an error, which the message must say).
    let mut pending: Vec<String> = Vec::new();
    let mut undefined: Vec<String> = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().ok_or("no role")?;
        if role != "tool" && !pending.is_empty() {
            return Err(format!(
                "message {i}: calls {pending:?} are not answered before it"
            ));
        }
        match role {
            "system" | "user" => {
                if message["content"].as_str().is_some_and(str::is_empty) {
                    return Err(format!("message {i}: empty {role} content"));
                }
                if let Some(parts) = message["content"].as_array() {
                    if parts.is_empty() {
                        return Err(format!("message {i}: no content parts"));
                    }
                    for part in parts {
                        match part["type"].as_str() {
                            Some("text") if part["text"].is_string() => {}
                            Some("image_url") if part["image_url"]["url"].is_string() => {}
                            Some("file") if part["file"]["file_data"].is_string() => {}
                            _ => return Err(format!("message {i}: content part {part}")),
                        }
                    }
                }
            }
            "assistant" => {
                let calls = message["tool_calls"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                if message["content"].is_null() && calls.is_empty() {
                    return Err(format!("message {i}: no content and no calls"));
                }
                for call in &calls {
                    let arguments = call["function"]["arguments"].as_str().ok_or("arguments")?;
                    let parsed: Value = serde_json::from_str(arguments)
                        .map_err(|e| format!("message {i}: arguments {arguments}: {e}"))?;
                    if !parsed.is_object() {
                        return Err(format!("message {i}: arguments {arguments}"));
                    }
                    let id = call["id"].as_str().ok_or("no id")?.to_owned();
                    if !call["function"]["name"].as_str().is_some_and(defined) {
                        undefined.push(id.clone());
                    }
                    pending.push(id);
                }
            }
            "tool" => {
                let id = message["tool_call_id"].as_str().ok_or("no tool_call_id")?;
                let Some(at) = pending.iter().position(|p| p == id) else {
                    return Err(format!(
                        "message {i}: tool message for {id} answers no call"
                    ));
                };
                pending.remove(at);
                let Some(content) = message["content"].as_str() else {
                    return Err(format!("message {i}: tool content is not text"));
                };
                // A `tool` message has no error flag: an error result must say so.
                if undefined.iter().any(|u| u == id) && !content.starts_with("Error") {
                    return Err(format!("message {i}: an error result reads {content:?}"));
                }
            }
            other => return Err(format!("message {i}: role {other}")),
        }
    }
    if !pending.is_empty() {
        return Err(format!("calls {pending:?} are never answered"));
    }
    Ok(())
}

/// A sweep over one OpenAI API: its scripted model and encoder, the rules its requests obey.
struct Sweep {
    shapes: usize,
    model: &'static str,
    scripted: fn(Box<Script>) -> ScriptedModel,
    encode: fn(&Value, usize) -> String,
    rules: fn(&Value) -> Result<(), String>,
    /// The request field shown when a rule breaks.
    shown: &'static str,
}

/// Runs every three-turn order of `sweep.shapes` answers (`shape(shape, call number)`; past
/// the third turn, the shape after the last) with a prompt holding a PDF and an image the APIs
/// have no part for, and checks every request against the API's rules.
async fn sweep(sweep: Sweep, shape: fn(usize, usize) -> (Vec<Value>, &'static str)) {
    let shapes = sweep.shapes;
    for a in 0..shapes {
        for b in 0..shapes {
            for c in 0..shapes {
                let plan = [a, b, c];
                let encode = sweep.encode;
                let (model, requests) = (sweep.scripted)(Box::new(move |n, request| {
                    let (content, stop) = shape(plan.get(n).copied().unwrap_or(shapes), n);
                    let message = scripted_message(request, content, stop);
                    Ok(Bytes::from(encode(&message, 5)))
                }))
                .recorded();
                let mut config = AgentConfig::new(sweep.model);
                config.system = Some("Be brief.".into());
                let agent = Agent::new(config, Arc::new(model), executor());
                let prompt = json!([
                    text("go"),
                    {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBER"}},
                    {"type": "image", "source": {"type": "file", "file_id": "file_1"}},
                ]);
                let events: Vec<AgentEvent> = agent.run(prompt).collect().await;
                common::assert_usage_events_add_up(&events);
                for (k, request) in requests.lock().unwrap().iter().enumerate() {
                    if let Err(broken) = (sweep.rules)(request) {
                        panic!(
                            "{plan:?}, request {k}: {broken}\n{:#}",
                            request[sweep.shown]
                        );
                    }
                }
            }
        }
    }
}

/// The Chat Completions counterpart of the sweep above: calls, cuts by `length`, a content
/// filter, blank text, a non-object argument and a call to an unknown tool, in any three-turn
/// order.
#[tokio::test]
async fn every_chat_request_of_unusual_turn_sequences_obeys_the_api_rules() {
    const SHAPES: usize = 7;
    let shape = |shape: usize, n: usize| {
        let id = format!("call_{n}");
        let call =
            |input: Value| json!({"type": "tool_use", "id": id, "name": "read", "input": input});
        match shape {
            0 => (
                vec![text("Reading."), call(json!({"path": "a"}))],
                "tool_use",
            ),
            1 => (vec![call(json!({}))], "tool_use"),
            2 => (
                vec![text("Partial "), call(json!({"path": "a"}))],
                "max_tokens",
            ),
            3 => (vec![text("No."), call(json!({}))], "refusal"),
            4 => (vec![text("\n"), call(json!([1]))], "tool_use"),
            5 => (vec![text("Partial answer")], "max_tokens"),
            6 => (
                vec![json!({"type": "tool_use", "id": id, "name": "missing", "input": {}})],
                "tool_use",
            ),
            _ => (vec![text("Done.")], "end_turn"),
        }
    };
    sweep(
        Sweep {
            shapes: SHAPES,
            model: "gpt-4o",
            scripted: |script| ScriptedModel::openai_chat(script),
            encode: openai_chat_sse,
            rules: chat_rules,
            shown: "messages",
        },
        shape,
    )
    .await;
}

/// The API refuses a request whose tools share a name ("Tool names must be unique"): a host
/// tool named like a server tool in the extra `tools` would get that 400 on every request. The
/// run stops before any, naming the tool.
#[tokio::test]
async fn tools_sharing_a_name_stop_the_run_before_any_request() {
    let model = Arc::new(ScriptedModel::new(|_, request| {
        Ok(reply(request, vec![text("ok")], "end_turn"))
    }));
    let mut config = AgentConfig::new("m");
    config.extra.insert(
        "tools".into(),
        json!([{"type": "web_search_20250305", "name": "read"}]),
    );
    let agent = Agent::new(config, model.clone(), executor());
    let events: Vec<AgentEvent> = agent.run("go").collect().await;
    let error = lone_error(&events);
    assert!(error.contains("\"read\""), "{error}");
    assert_eq!(model.calls(), 0);
}

/// Thinking signatures are bound to the model that made them: the fallback model refuses the
/// primary's thinking blocks sent back ("Invalid `signature` in `thinking` block"). At the
/// switch they leave history (the turn's text and calls stay), as Claude Code drops thinking
/// made by another model.
#[tokio::test]
async fn the_fallback_model_is_not_sent_the_primary_s_thinking() {
    let mut config = AgentConfig::new("claude-primary");
    config.fallback_model = Some("claude-fallback".into());
    let thinking =
        json!({"type": "thinking", "thinking": "Read a first.", "signature": "sig-primary"});
    let (reason, messages, requests) = run_script(config, move |n, request| match n {
        0 => reply(
            request,
            vec![
                thinking.clone(),
                text("Reading."),
                json!({"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}),
            ],
            "tool_use",
        ),
        1 => {
            let overloaded = r#"{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}"#;
            Bytes::from(format!("event: error\ndata: {overloaded}\n\n"))
        }
        _ => reply(request, vec![text("Done.")], "end_turn"),
    })
    .await;
    assert_eq!(reason, StopReason::EndTurn);
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[2]["model"], "claude-fallback");
    let sent = requests[2]["messages"].to_string();
    assert!(!sent.contains("sig-primary"), "{sent}");
    assert_eq!(requests[2]["messages"][1]["content"][0], text("Reading."));
    assert!(api_rules(&requests[2]).is_ok());
    assert!(
        !serde_json::to_string(&messages)
            .unwrap()
            .contains("sig-primary")
    );
}

/// An empty system prompt (a host's option left blank) became, with prompt caching, an empty
/// system text block carrying a breakpoint, which the API refuses ("text content blocks must
/// be non-empty"; no `cache_control` on an empty text block). A blank system prompt is no
/// system prompt.
#[tokio::test]
async fn a_blank_system_prompt_is_not_sent() {
    for system in ["", " \n"] {
        let mut config = AgentConfig::new("m");
        config.system = Some(system.into());
        let (reason, _, requests) = run_script(config, |_, request| {
            reply(request, vec![text("ok")], "end_turn")
        })
        .await;
        assert_eq!(reason, StopReason::EndTurn);
        assert!(requests[0].get("system").is_none(), "{:#}", requests[0]);
    }
}

/// The answer to request `n` of a refused-field test: a call on the second (the first one
/// accepted), then the end.
fn a_call_on_the_second_request(n: usize) -> (Vec<Value>, &'static str) {
    if n == 1 {
        (
            vec![json!({"type": "tool_use", "id": "call_1", "name": "read", "input": {}})],
            "tool_use",
        )
    } else {
        (vec![text("Done.")], "end_turn")
    }
}

/// Some OpenAI-compatible servers refuse a field they do not know with a 400, and every Chat
/// request held `stream_options`: the run could never start there. A refusal naming it is
/// answered by sending the same turn again without it, for the rest of the run (the summary
/// call too); a second refusal ends the run.
#[tokio::test]
async fn a_server_refusing_stream_options_is_asked_again_without_them() {
    let refusal = || {
        ModelError::with_code(
            "invalid_request",
            "invalid request: HTTP 400 invalid_request_error: Unrecognized request argument \
             supplied: stream_options",
        )
    };
    let (model, requests) = ScriptedModel::openai_chat(move |n, request| {
        if request.get("stream_options").is_some() {
            return Err(refusal());
        }
        let (content, stop) = a_call_on_the_second_request(n);
        let message = scripted_message(request, content, stop);
        Ok(Bytes::from(openai_chat_sse(&message, 5)))
    })
    .recorded();
    let agent = Agent::new(AgentConfig::new("gpt-4o"), Arc::new(model), executor());
    let events: Vec<AgentEvent> = agent.run("go").collect().await;
    assert_eq!(stopped(&events).0, StopReason::EndTurn, "{events:#?}");
    let requests = requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 3, "{requests:#?}");
    assert!(requests[0].get("stream_options").is_some());
    for request in &requests[1..] {
        assert!(request.get("stream_options").is_none(), "{request:#}");
        assert_eq!(request["stream"], true);
    }

    // Refused again without it: the run stops with the server's error.
    let model = Arc::new(ScriptedModel::openai_chat(move |_, _| Err(refusal())));
    let agent = Agent::new(AgentConfig::new("gpt-4o"), model.clone(), executor());
    let events: Vec<AgentEvent> = agent.run("go").collect().await;
    match events.last() {
        Some(AgentEvent::Stop {
            reason: StopReason::Error,
            error: Some(error),
            ..
        }) => assert!(error.contains("stream_options"), "{error}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(model.calls(), 2);
}

/// The Responses API refuses `include: ["reasoning.encrypted_content"]` for a model without
/// reasoning ("Encrypted content is not supported with this model"), which a model name the
/// loop takes for a reasoning one would meet on every request. The turn is sent again without
/// it, for the rest of the run; a stream or other field refusal later is handled apart.
#[tokio::test]
async fn a_responses_model_refusing_encrypted_reasoning_is_asked_again_without_it() {
    let (model, requests) = ScriptedModel::openai_responses(move |n, request| {
        if request.get("include").is_some() {
            return Err(ModelError::with_code(
                "invalid_request",
                "invalid request: HTTP 400 invalid_request_error: Encrypted content is not \
                 supported with this model.",
            ));
        }
        let (content, stop) = a_call_on_the_second_request(n);
        let message = scripted_message(request, content, stop);
        Ok(Bytes::from(openai_responses_sse(&message, 5)))
    })
    .recorded();
    let agent = Agent::new(
        AgentConfig::new("gpt-5-mini-2099"),
        Arc::new(model),
        executor(),
    );
    let events: Vec<AgentEvent> = agent.run("go").collect().await;
    assert_eq!(stopped(&events).0, StopReason::EndTurn, "{events:#?}");
    let requests = requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 3, "{requests:#?}");
    assert_eq!(
        requests[0]["include"],
        json!(["reasoning.encrypted_content"])
    );
    for request in &requests[1..] {
        assert!(request.get("include").is_none(), "{request:#}");
        assert_eq!(request["store"], false);
    }
}

/// The summariser's request left out the run's system prompt and every extra field: a
/// gateway that needs its routing or metadata fields refused it (compaction then failed and
/// the run stopped with `prompt_too_long`). It carries them now, except those that would
/// make the answer something else than a summary (`tool_choice`, a response format, stop
/// sequences) or that it does not need (`thinking`).
#[tokio::test]
async fn the_summary_request_carries_the_run_s_system_and_routing_fields() {
    let mut config = AgentConfig::new("m");
    config.system = Some("You are a careful agent.".into());
    let extra = json!({
        "metadata": {"user_id": "u1"},
        "provider": {"order": ["a", "b"]},
        "chat_template_kwargs": {"enable_thinking": false},
        "betas": ["some-beta-2026-01-01"],
        "temperature": 0.3,
        "tool_choice": {"type": "auto", "disable_parallel_tool_use": true},
        "parallel_tool_calls": false,
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "response_format": {"type": "json_object"},
        "output_format": {"type": "json_schema", "schema": {"type": "object"}},
        "stop_sequences": ["END"],
        "output_config": {"effort": "low", "format": {"type": "json_schema", "schema": {"type": "object"}}},
    });
    for (key, value) in extra.as_object().unwrap() {
        config.extra.insert(key.clone(), value.clone());
    }
    let (model, requests) = ScriptedModel::new(|n, request| match n {
        0 => Err(ModelError::prompt_too_long(
            "prompt is too long: 210000 tokens > 200000 maximum",
        )),
        _ => Ok(reply(request, vec![text("A summary.")], "end_turn")),
    })
    .recorded();
    let agent = Agent::new(config, Arc::new(model), executor());
    let history = vec![
        json!({"role": "user", "content": "a long conversation"}),
        json!({"role": "assistant", "content": [text("went on and on")]}),
        json!({"role": "user", "content": "write a haiku"}),
    ];
    let events: Vec<AgentEvent> = agent.run_messages(history).collect().await;
    assert_eq!(stopped(&events).0, StopReason::EndTurn);
    let requests = requests.lock().unwrap().clone();
    let summary = &requests[1];
    assert!(summary.to_string().contains("Summarize this conversation"));
    assert_eq!(summary["system"], "You are a careful agent.");
    for key in [
        "metadata",
        "provider",
        "chat_template_kwargs",
        "betas",
        "temperature",
    ] {
        assert_eq!(summary[key], extra[key], "{key}: {summary:#}");
    }
    assert_eq!(summary["tool_choice"], json!({"type": "none"}));
    // The effort goes along, the output format does not.
    assert_eq!(summary["output_config"], json!({"effort": "low"}));
    for key in [
        "parallel_tool_calls",
        "thinking",
        "response_format",
        "output_format",
        "stop_sequences",
    ] {
        assert!(summary.get(key).is_none(), "{key}: {summary:#}");
    }
}

/// The API refuses a conversation that opens with the assistant ("first message must use the
/// \"user\" role") and a call input other than an object: a host's history holding either
/// makes no request, and the error names the message.
#[tokio::test]
async fn a_history_the_api_would_refuse_stops_before_any_request_naming_the_message() {
    let cases = [
        (
            vec![
                json!({"role": "assistant", "content": "Hello, how can I help?"}),
                json!({"role": "user", "content": "read a"}),
            ],
            "message 0",
        ),
        (
            vec![
                json!({"role": "user", "content": "read a"}),
                json!({"role": "assistant", "content": [
                    {"type": "tool_use", "name": "read", "input": {}},
                ]}),
                json!({"role": "user", "content": "go on"}),
            ],
            "message 1",
        ),
        (
            vec![json!({"role": "user", "content": [
                text("read a"),
                {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}},
            ]})],
            "message 0",
        ),
        (
            vec![
                json!({"role": "user", "content": "read a"}),
                json!({"role": "assistant", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a"},
                ]}),
                json!({"role": "user", "content": "go on"}),
            ],
            "message 1",
        ),
        (
            vec![
                json!({"role": "user", "content": "read a"}),
                json!({"role": "assistant", "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "read", "input": "a"},
                ]}),
                json!({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a"},
                ]}),
            ],
            "message 1",
        ),
    ];
    for (history, named) in cases {
        let model = Arc::new(ScriptedModel::new(|_, request| {
            Ok(reply(request, vec![text("ok")], "end_turn"))
        }));
        let agent = Agent::new(AgentConfig::new("m"), model.clone(), executor());
        let events: Vec<AgentEvent> = agent.run_messages(history).collect().await;
        let error = lone_error(&events);
        assert!(error.contains(named), "{error}");
        assert_eq!(model.calls(), 0);
    }
}

/// A host's history may hold what the loop never leaves in its own: thinking last in an
/// assistant message (a host that cut a turn's calls, or kept a thinking-only turn), which the
/// API refuses ("The final block in an assistant message cannot be `thinking`"). The request
/// sent leaves it out (an earlier turn's thinking may be); so is unsigned thinking (a Chat
/// model's reasoning) in a message without calls, which no provider reads back. The history is
/// kept as it came.
#[tokio::test]
async fn a_host_history_s_trailing_thinking_is_left_out_of_the_request() {
    let (model, requests) =
        ScriptedModel::new(|_, request| Ok(reply(request, vec![text("ok")], "end_turn")))
            .recorded();
    let agent = Agent::new(AgentConfig::new("m"), Arc::new(model), executor());
    let history = vec![
        json!({"role": "user", "content": "read a"}),
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Read a.", "signature": "sig0"},
            {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}},
        ]}),
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a"},
        ]}),
        json!({"role": "assistant", "content": [
            text("Read it."),
            {"type": "thinking", "thinking": "Then stop.", "signature": "sig"},
        ]}),
        json!({"role": "user", "content": "thanks"}),
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Only this.", "signature": "sig2"},
        ]}),
        json!({"role": "user", "content": "bye"}),
        // A Chat model's reasoning (no signature) before an answer without calls, which no
        // provider reads back: Anthropic refuses it.
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Chat reasoning.", "signature": ""},
            text("Bye."),
        ]}),
        json!({"role": "user", "content": "one more"}),
    ];
    let events: Vec<AgentEvent> = agent.run_messages(history.clone()).collect().await;
    let (reason, messages) = stopped(&events);
    assert_eq!(reason, StopReason::EndTurn);
    let requests = requests.lock().unwrap().clone();
    api_rules(&requests[0]).unwrap_or_else(|e| panic!("{e}: {:#}", requests[0]["messages"]));
    // The history is the host's, untouched.
    assert_eq!(messages[..history.len()], history[..]);
}

/// Anthropic (custom tools) and OpenAI (functions) take tool names matching
/// `^[a-zA-Z0-9_-]{1,64}$` only: a tool named with a space, a dot or 65 characters got a 400
/// on every request. The run stops before any, naming the tool. (An empty name never gets
/// this far: the registry refuses it, `RegistryError::EmptyName`.)
#[tokio::test]
async fn a_tool_name_the_providers_refuse_stops_the_run_before_any_request() {
    let long = "a".repeat(65);
    for name in ["read file", "fs.read", long.as_str()] {
        let model = Arc::new(ScriptedModel::new(|_, request| {
            Ok(reply(request, vec![text("ok")], "end_turn"))
        }));
        let mut tools = ToolRegistry::new();
        tools
            .register(FnTool::new(name, |_input: Value, _ctx| async move {
                Ok(ToolOutput::text("done"))
            }))
            .unwrap();
        let agent = Agent::new(
            AgentConfig::new("m"),
            model.clone(),
            Arc::new(ToolExecutor::new(tools)),
        );
        // What the run checks first, a host may check when it builds the agent.
        let checked = agent.check_tools().unwrap_err();
        let events: Vec<AgentEvent> = agent.run("go").collect().await;
        let error = lone_error(&events);
        assert!(error.contains(&format!("{name:?}")), "{error}");
        assert!(error.ends_with(&checked), "{error} / {checked}");
        assert_eq!(model.calls(), 0, "{name}");
    }
    // 64 characters, digits, `_` and `-` are fine.
    let name = format!("{}_-9", "b".repeat(60));
    let mut tools = ToolRegistry::new();
    tools
        .register(FnTool::new(
            name.as_str(),
            |_input: Value, _ctx| async move { Ok(ToolOutput::text("done")) },
        ))
        .unwrap();
    let model = Arc::new(ScriptedModel::new(|_, request| {
        Ok(reply(request, vec![text("ok")], "end_turn"))
    }));
    let agent = Agent::new(
        AgentConfig::new("m"),
        model.clone(),
        Arc::new(ToolExecutor::new(tools)),
    );
    assert_eq!(agent.check_tools(), Ok(()));
    let events: Vec<AgentEvent> = agent.run("go").collect().await;
    assert_eq!(stopped(&events).0, StopReason::EndTurn);
}

/// Some OpenAI-compatible backends number calls per response (`call_0` every turn). The loop
/// made ids unique within a response only, so its history held one id for several calls:
/// Anthropic refuses it ("tool_use ids must be unique") when the history goes there (a host
/// resuming it, another provider), and results are matched to calls by id. A call reusing an
/// id of history is renamed like a repeated one.
#[tokio::test]
async fn a_call_id_an_earlier_turn_used_is_renamed() {
    let (model, requests) = ScriptedModel::openai_chat(|n, request| {
        let (content, stop) = if n < 2 {
            (
                vec![json!({"type": "tool_use", "id": "call_0", "name": "read", "input": {}})],
                "tool_use",
            )
        } else {
            (vec![text("Done.")], "end_turn")
        };
        let message = scripted_message(request, content, stop);
        Ok(Bytes::from(openai_chat_sse(&message, 5)))
    })
    .recorded();
    let agent = Agent::new(AgentConfig::new("gpt-4o"), Arc::new(model), executor());
    let events: Vec<AgentEvent> = agent.run("go").collect().await;
    let (reason, messages) = stopped(&events);
    assert_eq!(reason, StopReason::EndTurn);
    assert_eq!(requests.lock().unwrap().len(), 3);
    let mut next = messages.clone();
    next.push(json!({"role": "user", "content": "more"}));
    api_rules(&json!({"messages": next})).unwrap_or_else(|e| panic!("{e}: {next:#?}"));
    // The first call keeps the server's id.
    assert_eq!(messages[1]["content"][0]["id"], "call_0");
}

/// A host's history holding one call id in two turns (made by such a backend) is refused by
/// Anthropic on every request: the later call and its result are renamed, which loses
/// nothing (a result answers the call just before it).
#[tokio::test]
async fn a_host_history_s_repeated_call_ids_are_made_unique() {
    let (model, requests) =
        ScriptedModel::new(|_, request| Ok(reply(request, vec![text("ok")], "end_turn")))
            .recorded();
    let agent = Agent::new(AgentConfig::new("m"), Arc::new(model), executor());
    let call = json!({"type": "tool_use", "id": "call_0", "name": "read", "input": {}});
    let result = json!({"type": "tool_result", "tool_use_id": "call_0", "content": "a"});
    let history = vec![
        json!({"role": "user", "content": "read twice"}),
        json!({"role": "assistant", "content": [call.clone()]}),
        json!({"role": "user", "content": [result.clone()]}),
        json!({"role": "assistant", "content": [call]}),
        json!({"role": "user", "content": [result]}),
    ];
    let events: Vec<AgentEvent> = agent.run_messages(history).collect().await;
    assert_eq!(stopped(&events).0, StopReason::EndTurn);
    let requests = requests.lock().unwrap().clone();
    api_rules(&requests[0]).unwrap_or_else(|e| panic!("{e}: {:#}", requests[0]["messages"]));
    let sent = &requests[0]["messages"];
    assert_eq!(sent[1]["content"][0]["id"], "call_0");
    assert_eq!(
        sent[3]["content"][0]["id"],
        sent[4]["content"][0]["tool_use_id"]
    );
}

/// `extra` fields are merged over the request the loop builds: a `messages` there replaced the
/// conversation in every request (and the summary's), the loop's own turns never sent, and a
/// `model` there defeated the fallback switch. The run stops before any request instead.
#[tokio::test]
async fn extra_fields_that_would_replace_the_loop_s_own_stop_the_run() {
    for (key, value) in [
        ("messages", json!([{"role": "user", "content": "hi"}])),
        ("model", json!("other")),
    ] {
        let model = Arc::new(ScriptedModel::new(|_, request| {
            Ok(reply(request, vec![text("ok")], "end_turn"))
        }));
        let mut config = AgentConfig::new("m");
        config.extra.insert(key.into(), value);
        let agent = Agent::new(config, model.clone(), executor());
        let events: Vec<AgentEvent> = agent.run("go").collect().await;
        let error = lone_error(&events);
        assert!(error.contains(&format!("\"{key}\"")), "{error}");
        assert_eq!(model.calls(), 0);
    }
}

/// A Chat server that reports no usage (it refused `stream_options`, or ignores it) left the
/// run's totals at 0, so a token budget never stopped it: it ran to `max_turns`. The budget
/// counts the estimates of such calls (the totals still say what was reported).
#[tokio::test]
async fn a_token_budget_holds_when_the_server_reports_no_usage() {
    let model = Arc::new(ScriptedModel::openai_chat(|n, request| {
        let call =
            json!({"type": "tool_use", "id": format!("call_{n}"), "name": "read", "input": {}});
        let message = scripted_message(request, vec![call], "tool_use");
        let sse = openai_chat_sse(&message, 5);
        // Every event but the usage chunk.
        let events: Vec<&str> = sse
            .split("\n\n")
            .filter(|event| !event.contains("prompt_tokens"))
            .collect();
        Ok(Bytes::from(events.join("\n\n")))
    }));
    let mut config = AgentConfig::new("gpt-4o");
    config.limits.token_budget = Some(50);
    config.limits.max_turns = 10;
    let agent = Agent::new(config, model.clone(), executor());
    let events: Vec<AgentEvent> = agent.run("go").collect().await;
    match events.last() {
        Some(AgentEvent::Stop {
            reason,
            input_tokens,
            ..
        }) => {
            assert_eq!(*reason, StopReason::Budget);
            assert_eq!(*input_tokens, 0, "nothing was reported");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(model.calls(), 1);
}

/// Unsigned thinking before calls is a Chat model's reasoning, which DeepSeek's thinking mode
/// requires back with the calls (a 400 without it): a host's history keeps sending it.
#[tokio::test]
async fn a_host_history_s_reasoning_before_calls_still_reaches_chat() {
    let (model, requests) = ScriptedModel::openai_chat(|_, request| {
        let message = scripted_message(request, vec![text("ok")], "end_turn");
        Ok(Bytes::from(openai_chat_sse(&message, 5)))
    })
    .recorded();
    let agent = Agent::new(AgentConfig::new("deepseek"), Arc::new(model), executor());
    let history = vec![
        json!({"role": "user", "content": "read a"}),
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Read a first.", "signature": ""},
            {"type": "tool_use", "id": "call_1", "name": "read", "input": {}},
        ]}),
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": "a"},
        ]}),
    ];
    let events: Vec<AgentEvent> = agent.run_messages(history).collect().await;
    assert_eq!(stopped(&events).0, StopReason::EndTurn);
    let requests = requests.lock().unwrap().clone();
    assert_eq!(
        requests[0]["messages"][1]["reasoning_content"],
        "Read a first."
    );
}

/// A `tool_choice` naming a tool the request does not define is refused by the API on every
/// request; the run stops before any, naming it.
#[tokio::test]
async fn a_tool_choice_naming_no_defined_tool_stops_the_run_before_any_request() {
    let model = Arc::new(ScriptedModel::new(|_, request| {
        Ok(reply(request, vec![text("ok")], "end_turn"))
    }));
    let mut config = AgentConfig::new("m");
    config.extra.insert(
        "tool_choice".into(),
        json!({"type": "tool", "name": "raed"}),
    );
    let agent = Agent::new(config, model.clone(), executor());
    let events: Vec<AgentEvent> = agent.run("go").collect().await;
    let error = lone_error(&events);
    assert!(error.contains("\"raed\""), "{error}");
    assert_eq!(model.calls(), 0);

    // Naming a defined tool is fine.
    let mut config = AgentConfig::new("m");
    config.extra.insert(
        "tool_choice".into(),
        json!({"type": "tool", "name": "read"}),
    );
    let (model, _) =
        ScriptedModel::new(|_, request| Ok(reply(request, vec![text("ok")], "end_turn")))
            .recorded();
    let agent = Agent::new(config, Arc::new(model), executor());
    let events: Vec<AgentEvent> = agent.run("go").collect().await;
    assert_eq!(stopped(&events).0, StopReason::EndTurn);
}

/// A history over the compaction threshold makes the summary the run's first call: a server
/// refusing `stream_options` refused it, compaction failed, and the run went on with the
/// oversized history. The summary call is sent again without them too.
#[tokio::test]
async fn a_summary_refused_for_stream_options_is_sent_again_without_them() {
    let (model, requests) = ScriptedModel::openai_chat(|_, request| {
        if request.get("stream_options").is_some() {
            return Err(ModelError::with_code(
                "invalid_request",
                "invalid request: HTTP 400: Unrecognized request argument supplied: stream_options",
            ));
        }
        let answer = if request.to_string().contains("Summarize this conversation") {
            "A summary."
        } else {
            "Done."
        };
        let message = scripted_message(request, vec![text(answer)], "end_turn");
        Ok(Bytes::from(openai_chat_sse(&message, 50)))
    })
    .recorded();
    let mut config = AgentConfig::new("gpt-4o");
    config.budget = ferroloop::tokens::ContextBudget {
        window: 100_000,
        max_output_tokens: 0,
        output_reserve_cap: 0,
        autocompact_buffer: 98_000,
        warning_buffer: 0,
        blocking_buffer: 0,
        autocompact_percent: None,
    };
    let agent = Agent::new(config, Arc::new(model), executor());
    let history = vec![
        json!({"role": "user", "content": "x".repeat(9_000)}),
        json!({"role": "assistant", "content": "Noted."}),
        json!({"role": "user", "content": "go on"}),
    ];
    let events: Vec<AgentEvent> = agent.run_messages(history).collect().await;
    assert_eq!(stopped(&events).0, StopReason::EndTurn);
    assert!(
        events.iter().any(|e| matches!(
            e,
            AgentEvent::Context(ferroloop::agent::ContextAction::Compaction { .. })
        )),
        "{events:#?}"
    );
    assert_eq!(requests.lock().unwrap().len(), 3);
}

/// The rules the Responses API enforces on a request (with `store: false`): every
/// `function_call` is answered by one `function_call_output` with its `call_id` and every output
/// answers a call before it; no item carries an `id` (nothing was stored to refer to: "Item
/// with id 'rs_…' not found"); a reasoning item carries its `encrypted_content` and a
/// `summary` list and is not the last item; message parts have the types of their role; call
/// arguments are a JSON object; no Anthropic-only field is sent.
fn responses_rules(request: &Value) -> Result<(), String> {
    for field in [
        "system",
        "messages",
        "max_tokens",
        "stop_sequences",
        "thinking",
        "top_k",
        "betas",
        "context_management",
        "stream_options",
    ] {
        if request.get(field).is_some() {
            return Err(format!("field {field} was sent"));
        }
    }
    if request["store"] != false {
        return Err(format!("store is {}", request["store"]));
    }
    if let Some(max) = request.get("max_output_tokens")
        && max.as_u64().is_none_or(|m| m < 16)
    {
        return Err(format!("max_output_tokens {max}"));
    }
    let tools = request["tools"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    tool_name_rule(tools, |t| &t["name"])?;
    for tool in tools {
        if tool["type"] != "function" || tool["parameters"]["type"] != "object" {
            return Err(format!("tool {tool}"));
        }
    }
    let input = request["input"].as_array().ok_or("no input")?;
    if input.is_empty() {
        return Err("empty input".into());
    }
    let mut calls: Vec<String> = Vec::new();
    let mut answered: Vec<String> = Vec::new();
    for (i, item) in input.iter().enumerate() {
        if item.get("id").is_some() {
            return Err(format!("item {i} carries an id: {item}"));
        }
        match item["type"].as_str() {
            Some("message") => {
                let role = item["role"].as_str().ok_or("no role")?;
                // Assistant text is a string: an `output_text` part without an `id` is refused
                // by servers validating against the SDK's types (vLLM).
                if role == "assistant" {
                    if !item["content"].is_string() {
                        return Err(format!("item {i}: assistant content {}", item["content"]));
                    }
                    continue;
                }
                let parts = item["content"].as_array().ok_or("content is not a list")?;
                if parts.is_empty() {
                    return Err(format!("item {i}: no content parts"));
                }
                for part in parts {
                    let ok = match (role, part["type"].as_str()) {
                        ("user", Some("input_text")) => part["text"].is_string(),
                        ("user", Some("input_image")) => part["image_url"].is_string(),
                        ("user", Some("input_file")) => part["file_data"].is_string(),
                        _ => false,
                    };
                    if !ok {
                        return Err(format!("item {i}: {role} part {part}"));
                    }
                }
            }
            Some("reasoning") => {
                if item["encrypted_content"].as_str().is_none_or(str::is_empty)
                    || !item["summary"].is_array()
                {
                    return Err(format!("item {i}: reasoning {item}"));
                }
                if i + 1 == input.len() {
                    return Err(format!("item {i}: reasoning is the last item"));
                }
            }
            Some("function_call") => {
                let id = item["call_id"].as_str().ok_or("no call_id")?;
                let arguments = item["arguments"].as_str().ok_or("no arguments")?;
                let parsed: Value = serde_json::from_str(arguments)
                    .map_err(|e| format!("item {i}: arguments {arguments}: {e}"))?;
                if !parsed.is_object() || !item["name"].is_string() {
                    return Err(format!("item {i}: call {item}"));
                }
                if calls.iter().any(|c| c == id) {
                    return Err(format!("item {i}: call id {id} again"));
                }
                calls.push(id.to_owned());
            }
            Some("function_call_output") => {
                let id = item["call_id"].as_str().ok_or("no call_id")?;
                if !calls.iter().any(|c| c == id) || answered.iter().any(|a| a == id) {
                    return Err(format!("item {i}: output for {id} answers no open call"));
                }
                if !item["output"].is_string() {
                    return Err(format!("item {i}: output {item}"));
                }
                answered.push(id.to_owned());
            }
            other => return Err(format!("item {i}: type {other:?}")),
        }
    }
    if let Some(open) = calls.iter().find(|c| !answered.contains(c)) {
        return Err(format!("call {open} is never answered"));
    }
    Ok(())
}

/// The Responses counterpart of the sweeps above: reasoning before calls and text, reasoning
/// alone, cuts by `max_output_tokens` (inside a call too), a content filter, blank text, a
/// non-object argument and a call to an unknown tool, in any three-turn order.
#[tokio::test]
async fn every_responses_request_of_unusual_turn_sequences_obeys_the_api_rules() {
    const SHAPES: usize = 9;
    let shape = |shape: usize, n: usize| {
        let id = format!("call_{n}");
        let reasoning =
            json!({"type": "thinking", "thinking": "Plan.", "signature": format!("gAAAAAenc{n}")});
        let call =
            |input: Value| json!({"type": "tool_use", "id": id, "name": "read", "input": input});
        match shape {
            0 => (
                vec![reasoning, text("Reading."), call(json!({"path": "a"}))],
                "tool_use",
            ),
            1 => (vec![reasoning, call(json!({}))], "tool_use"),
            2 => (vec![text("Partial answer")], "max_tokens"),
            3 => (vec![reasoning, call(json!({"path": "a"}))], "max_tokens"),
            4 => (vec![reasoning], "max_tokens"),
            5 => (vec![text("No."), call(json!({}))], "refusal"),
            6 => (vec![text("\n"), call(json!([1]))], "tool_use"),
            7 => (
                vec![json!({"type": "tool_use", "id": id, "name": "missing", "input": {}})],
                "tool_use",
            ),
            8 => (vec![reasoning, text("Done early.")], "end_turn"),
            _ => (vec![text("Done.")], "end_turn"),
        }
    };
    sweep(
        Sweep {
            shapes: SHAPES,
            model: "gpt-5.5",
            scripted: |script| ScriptedModel::openai_responses(script),
            encode: openai_responses_sse,
            rules: responses_rules,
            shown: "input",
        },
        shape,
    )
    .await;
}

/// A history whose signed thinking a Responses model cannot verify (Anthropic's thinking
/// signatures, from a run continued on another provider; or OpenAI's own after a key or
/// organisation change) was refused with "The encrypted content … could not be verified"
/// (`invalid_encrypted_content`) on every request: the run could never go on. The turn is
/// sent again without the reasoning of the history as it was; reasoning of later turns goes
/// back.
#[tokio::test]
async fn reasoning_a_responses_model_cannot_verify_is_left_out_and_the_turn_sent_again() {
    let (model, requests) = ScriptedModel::openai_responses(move |n, request| {
        let input = request["input"].as_array().cloned().unwrap_or_default();
        if let Some(foreign) = input.iter().find(|item| {
            item["type"] == "reasoning"
                && !item["encrypted_content"]
                    .as_str()
                    .is_some_and(|e| e.starts_with("gAAAAA"))
        }) {
            return Err(ModelError::with_code(
                "invalid_request",
                format!(
                    "invalid request: HTTP 400 invalid_request_error: The encrypted content {} \
                 could not be verified. Reason: Encrypted content could not be decrypted or \
                 parsed.",
                    foreign["encrypted_content"]
                ),
            ));
        }
        let (mut content, stop) = a_call_on_the_second_request(n);
        content.insert(
            0,
            json!({"type": "thinking", "thinking": "Plan.", "signature": format!("gAAAAAenc{n}")}),
        );
        let message = scripted_message(request, content, stop);
        Ok(Bytes::from(openai_responses_sse(&message, 5)))
    })
    .recorded();
    let agent = Agent::new(AgentConfig::new("gpt-5.5"), Arc::new(model), executor());
    // A conversation held with Claude, continued on a Responses model.
    let history = vec![
        json!({"role": "user", "content": "hello"}),
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Greet back.", "signature": "EqQBCkgIARABGAIiQL"},
            text("Hello."),
        ]}),
        json!({"role": "user", "content": "read a file"}),
    ];
    let events: Vec<AgentEvent> = agent.run_messages(history).collect().await;
    let (reason, messages) = stopped(&events);
    assert_eq!(reason, StopReason::EndTurn, "{events:#?}");
    let requests = requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 3, "{requests:#?}");
    for request in &requests[1..] {
        responses_rules(request).unwrap_or_else(|e| panic!("{e}: {:#}", request["input"]));
    }
    // The run's own reasoning still goes back.
    let last = requests[2]["input"].as_array().unwrap();
    let reasoning: Vec<&Value> = last
        .iter()
        .filter(|i| i["type"] == "reasoning")
        .map(|i| &i["encrypted_content"])
        .collect();
    assert_eq!(reasoning, [&json!("gAAAAAenc1")], "{last:#?}");
    // The history itself keeps what the host gave.
    assert_eq!(messages[1]["content"][0]["signature"], "EqQBCkgIARABGAIiQL");
}

/// A reasoning model asked for no summary (no `reasoning.summary`, the API's default) answers
/// reasoning items with an empty `summary` and their encrypted content: the thinking block has
/// no text, and its reasoning still goes back with the calls it led to.
#[tokio::test]
async fn reasoning_without_a_summary_still_goes_back() {
    let (model, requests) = ScriptedModel::openai_responses(move |n, request| {
        let (content, stop) = if n == 0 {
            (
                vec![
                    json!({"type": "thinking", "thinking": "", "signature": "gAAAAAsilent"}),
                    json!({"type": "tool_use", "id": "call_1", "name": "read", "input": {}}),
                ],
                "tool_use",
            )
        } else {
            (vec![text("Done.")], "end_turn")
        };
        let message = scripted_message(request, content, stop);
        Ok(Bytes::from(openai_responses_sse(&message, 5)))
    })
    .recorded();
    let agent = Agent::new(AgentConfig::new("o4-mini"), Arc::new(model), executor());
    let events: Vec<AgentEvent> = agent.run("go").collect().await;
    assert_eq!(stopped(&events).0, StopReason::EndTurn, "{events:#?}");
    let requests = requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 2);
    let input = requests[1]["input"].as_array().unwrap();
    let kinds: Vec<&str> = input.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "message",
            "reasoning",
            "function_call",
            "function_call_output"
        ],
        "{input:#?}"
    );
    assert_eq!(
        input[1],
        json!({"type": "reasoning", "summary": [], "encrypted_content": "gAAAAAsilent"})
    );
    responses_rules(&requests[1]).unwrap();
}

/// The ChatGPT Codex backend (and the proxies in front of it) refuses `max_output_tokens`
/// with a 400 (`{"detail": "Unsupported parameter: max_output_tokens"}`), which every request
/// of the loop held: the run could never start. The turn is sent again without it, for the
/// rest of the run.
#[tokio::test]
async fn a_responses_server_refusing_max_output_tokens_is_asked_again_without_it() {
    let (model, requests) = ScriptedModel::openai_responses(move |n, request| {
        if request.get("max_output_tokens").is_some() {
            return Err(ModelError::with_code(
                "invalid_request",
                "invalid request: HTTP 400: Unsupported parameter: max_output_tokens",
            ));
        }
        let (content, stop) = a_call_on_the_second_request(n);
        let message = scripted_message(request, content, stop);
        Ok(Bytes::from(openai_responses_sse(&message, 5)))
    })
    .recorded();
    let agent = Agent::new(AgentConfig::new("gpt-5.5"), Arc::new(model), executor());
    let events: Vec<AgentEvent> = agent.run("go").collect().await;
    assert_eq!(stopped(&events).0, StopReason::EndTurn, "{events:#?}");
    let requests = requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 3, "{requests:#?}");
    assert_eq!(requests[0]["max_output_tokens"], 8192);
    for request in &requests[1..] {
        assert!(request.get("max_output_tokens").is_none(), "{request:#}");
        assert!(request.get("max_tokens").is_none(), "{request:#}");
        responses_rules(request).unwrap();
    }
}

/// The same refusal can come in the stream (`response.failed` with
/// `invalid_encrypted_content`), which the client reports as a truncated stream: retried once
/// as it was, it failed the same way and the run stopped. It is answered the same way.
#[tokio::test]
async fn reasoning_refused_in_the_stream_is_left_out_too() {
    let (model, requests) = ScriptedModel::openai_responses(move |_, request| {
        let input = request["input"].as_array().cloned().unwrap_or_default();
        if input.iter().any(|item| item["type"] == "reasoning") {
            return Err(ModelError::truncated(
                "stream error invalid_request_error: The encrypted content gAAA...Rg== \
                 could not be verified.",
                Value::Null,
            ));
        }
        let message = scripted_message(request, vec![text("Done.")], "end_turn");
        Ok(Bytes::from(openai_responses_sse(&message, 5)))
    })
    .recorded();
    let agent = Agent::new(AgentConfig::new("gpt-5.5"), Arc::new(model), executor());
    let history = vec![
        json!({"role": "user", "content": "hello"}),
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "", "signature": "gAAAAAold"},
            text("Hello."),
        ]}),
        json!({"role": "user", "content": "again"}),
    ];
    let events: Vec<AgentEvent> = agent.run_messages(history).collect().await;
    assert_eq!(stopped(&events).0, StopReason::EndTurn, "{events:#?}");
    assert_eq!(requests.lock().unwrap().len(), 2);
}

/// A turn cut by the output limit is asked again with a raised one in each provider's field:
/// Chat's `max_completion_tokens` (GPT-4o's ceiling, 16,384), the Responses API's
/// `max_output_tokens` (Claude Code's 64,000, under GPT-5's ceiling). A limit the host set in
/// `extra` is the one sent every time.
#[tokio::test]
async fn a_cut_turn_goes_out_again_with_the_raised_limit_in_each_provider_s_field() {
    let cut_then_done = |n: usize| {
        if n == 0 {
            (vec![text("Cut")], "max_tokens")
        } else {
            (vec![text("Done.")], "end_turn")
        }
    };
    let (chat, chat_requests) = ScriptedModel::openai_chat(move |n, request| {
        let (content, stop) = cut_then_done(n);
        let message = scripted_message(request, content, stop);
        Ok(Bytes::from(openai_chat_sse(&message, 5)))
    })
    .recorded();
    let agent = Agent::new(AgentConfig::new("gpt-4o"), Arc::new(chat), executor());
    let events: Vec<AgentEvent> = agent.run("go").collect().await;
    assert_eq!(stopped(&events).0, StopReason::EndTurn, "{events:#?}");
    let requests = chat_requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    assert_eq!(requests[0]["max_completion_tokens"], 8_192);
    assert_eq!(requests[1]["max_completion_tokens"], 16_384);
    assert_eq!(requests[0]["messages"], requests[1]["messages"]);
    for request in &requests {
        assert!(request.get("max_tokens").is_none(), "{request:#}");
        chat_rules(request).unwrap();
    }

    let (responses, responses_requests) = ScriptedModel::openai_responses(move |n, request| {
        let (content, stop) = cut_then_done(n);
        let message = scripted_message(request, content, stop);
        Ok(Bytes::from(openai_responses_sse(&message, 5)))
    })
    .recorded();
    let agent = Agent::new(AgentConfig::new("gpt-5"), Arc::new(responses), executor());
    let events: Vec<AgentEvent> = agent.run("go").collect().await;
    assert_eq!(stopped(&events).0, StopReason::EndTurn, "{events:#?}");
    let requests = responses_requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    assert_eq!(requests[0]["max_output_tokens"], 8_192);
    assert_eq!(requests[1]["max_output_tokens"], 64_000);
    assert_eq!(requests[0]["input"], requests[1]["input"]);
    for request in &requests {
        assert!(request.get("max_tokens").is_none(), "{request:#}");
        responses_rules(request).unwrap();
    }

    // The host's own Chat limit: sent as it is, and the turn continued instead.
    let (chat, chat_requests) = ScriptedModel::openai_chat(move |n, request| {
        let (content, stop) = cut_then_done(n);
        let message = scripted_message(request, content, stop);
        Ok(Bytes::from(openai_chat_sse(&message, 5)))
    })
    .recorded();
    let mut config = AgentConfig::new("gpt-4o");
    config
        .extra
        .insert("max_completion_tokens".into(), json!(2_048));
    let agent = Agent::new(config, Arc::new(chat), executor());
    let events: Vec<AgentEvent> = agent.run("go").collect().await;
    assert_eq!(stopped(&events).0, StopReason::EndTurn, "{events:#?}");
    let requests = chat_requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    for request in &requests {
        assert_eq!(request["max_completion_tokens"], 2_048, "{request:#}");
        assert!(request.get("max_tokens").is_none(), "{request:#}");
    }
    assert!(
        requests[1]["messages"]
            .to_string()
            .contains("Resume directly"),
        "{:#}",
        requests[1]
    );
}
