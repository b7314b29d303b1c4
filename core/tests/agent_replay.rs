//! The agent loop over real HTTP against the loopback replay server: a 429 retried by the
//! client, a disconnect mid-stream (the partial turn discarded and retried), parallel tool calls,
//! a `max_tokens` continuation and a prompt-too-long recovery — in one conversation, with the
//! history valid at the end. Model fallback over HTTP (repeated 529s, an overload mid-stream),
//! and the loop against OpenAI Chat Completions and Responses endpoints. Nothing leaves
//! 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

mod common;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferroloop::agent::replay::{
    anthropic_sse, openai_chat_sse, openai_responses_sse, scripted_message,
};
use ferroloop::agent::{
    Agent, AgentConfig, AgentEvent, ContextAction, StopReason, check_tool_pairing,
};
use ferroloop::client::{Client, ClientConfig};
use ferroloop::decode::Provider;
use ferroloop::exec::{FnTool, ToolExecutor, ToolOutput, ToolRegistry};
use ferroloop_replay::{
    Fault, RecordedRequest, ReplayServer, Script, ScriptBody, ScriptedResponse, ServerOptions,
    WhenExhausted,
};
use futures::StreamExt;
use serde_json::{Value, json};

fn sse(content: Vec<Value>, stop: &str) -> String {
    anthropic_sse(&scripted_message(&json!({}), content, stop), 16)
}

fn event_stream(body: String) -> ScriptedResponse {
    ScriptedResponse::ok(ScriptBody::Text(body)).header("content-type", "text/event-stream")
}

#[tokio::test]
async fn a_conversation_survives_every_recoverable_failure_over_http() {
    let tool_turn = sse(
        vec![
            json!({"type": "text", "text": "Reading both."}),
            json!({"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a"}}),
            json!({"type": "tool_use", "id": "t2", "name": "read", "input": {"path": "b"}}),
        ],
        "tool_use",
    );
    let cut_at = tool_turn.find("event: message_delta").unwrap();
    let responses = vec![
        anthropic_error(429, "rate_limit_error", "slow down").header("retry-after-ms", "5"),
        event_stream(tool_turn.clone()).fault(Fault::DisconnectAfter { bytes: cut_at }),
        event_stream(tool_turn),
        event_stream(sse(
            vec![json!({"type": "text", "text": "Half an ans"})],
            "max_tokens",
        )),
        anthropic_error(
            400,
            "invalid_request_error",
            "prompt is too long: 250000 tokens > 200000 maximum",
        ),
        event_stream(sse(
            vec![json!({"type": "text", "text": "Summary: read a and b."})],
            "end_turn",
        )),
        event_stream(sse(
            vec![json!({"type": "text", "text": "wer, finished."})],
            "end_turn",
        )),
    ];
    let script = Script {
        responses,
        ..Script::default()
    };
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let server = ReplayServer::start(&script, &root, ServerOptions::default())
        .await
        .unwrap();
    let mut config = ClientConfig::new(Provider::Anthropic)
        .with_base_url(server.base_url())
        .with_api_key("test-key");
    config.retry.base_delay = Duration::from_millis(5);
    config.retry.max_delay = Duration::from_millis(20);
    config.tls.native_roots = false;
    let client = Client::new(config).unwrap();

    let calls = Arc::new(Mutex::new(Vec::new()));
    let seen = calls.clone();
    let mut tools = ToolRegistry::new();
    tools
        .register(
            FnTool::new("read", move |input: Value, _ctx| {
                let seen = seen.clone();
                async move {
                    seen.lock()
                        .unwrap()
                        .push(input["path"].as_str().unwrap_or("?").to_owned());
                    Ok(ToolOutput::text(format!("contents of {}", input["path"])))
                }
            })
            .concurrency_safe(true),
        )
        .unwrap();
    let agent = Agent::new(
        AgentConfig::new("claude-test"),
        Arc::new(client),
        Arc::new(ToolExecutor::new(tools)),
    );
    let events = run_events(&agent, "read a and b").await;

    assert!(
        events.iter().any(|e| matches!(
            e,
            AgentEvent::Retry {
                status: Some(429),
                ..
            }
        )),
        "the 429 was retried"
    );
    assert!(events.iter().any(|e| matches!(
        e,
        AgentEvent::Context(ContextAction::Compaction {
            trigger: "reactive",
            ..
        })
    )));
    let messages = ended_turn(&events);
    assert!(messages.last().unwrap().to_string().contains("finished."));
    // Both reads ran in the completed turn (the ones started in the cut turn were discarded).
    let calls = calls.lock().unwrap();
    assert!(
        calls.iter().filter(|p| *p == "a").count() >= 1
            && calls.iter().filter(|p| *p == "b").count() >= 1
    );
    assert_eq!(server.requests().len(), 7);
}

/// The replay server answering `responses` in order.
async fn serve(responses: Vec<ScriptedResponse>) -> ReplayServer {
    let script = Script {
        responses,
        ..Script::default()
    };
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    ReplayServer::start(&script, &root, ServerOptions::default())
        .await
        .unwrap()
}

/// Every event of a run of `prompt` (it must end within 30 s), whose `usage` events add up to
/// its totals.
async fn run_events(agent: &Agent, prompt: &str) -> Vec<AgentEvent> {
    let events: Vec<AgentEvent> =
        tokio::time::timeout(Duration::from_secs(30), agent.run(prompt).collect())
            .await
            .unwrap();
    common::assert_usage_events_add_up(&events);
    events
}

/// The conversation of a run that ended its turn (`end_turn`) with every call answered.
fn ended_turn(events: &[AgentEvent]) -> &[Value] {
    let Some(AgentEvent::Stop {
        reason, messages, ..
    }) = events.last()
    else {
        panic!("no stop event: {events:#?}")
    };
    assert_eq!(*reason, StopReason::EndTurn, "{events:#?}");
    assert!(check_tool_pairing(messages).is_ok(), "{messages:#?}");
    messages
}

/// The bodies of recorded requests, as JSON.
fn bodies_of(requests: &[RecordedRequest]) -> Vec<Value> {
    requests
        .iter()
        .map(|r| serde_json::from_str(&r.body).unwrap())
        .collect()
}

fn test_client(provider: Provider, server: &ReplayServer) -> Client {
    let mut config = ClientConfig::new(provider)
        .with_base_url(server.base_url())
        .with_api_key("test-key");
    config.retry.base_delay = Duration::from_millis(5);
    config.retry.max_delay = Duration::from_millis(20);
    config.tls.native_roots = false;
    Client::new(config).unwrap()
}

fn reading_tools(seen: Arc<Mutex<Vec<String>>>) -> Arc<ToolExecutor> {
    let mut tools = ToolRegistry::new();
    tools
        .register(
            FnTool::new("read", move |input: Value, ctx| {
                let seen = seen.clone();
                async move {
                    let path = input["path"].as_str().unwrap_or("?").to_owned();
                    seen.lock().unwrap().push(path.clone());
                    if path == "slow" {
                        ctx.cancelled().await;
                    }
                    Ok(ToolOutput::text(format!("contents of {path}")))
                }
            })
            .concurrency_safe(true),
        )
        .unwrap();
    Arc::new(ToolExecutor::new(tools))
}

/// An Anthropic error response: `status` with the error body naming `error_type`.
fn anthropic_error(status: u16, error_type: &str, message: &str) -> ScriptedResponse {
    ScriptedResponse::with_status(
        status,
        ScriptBody::Json(
            json!({"type": "error", "error": {"type": error_type, "message": message}}),
        ),
    )
}

fn overloaded_529() -> ScriptedResponse {
    anthropic_error(529, "overloaded_error", "Overloaded")
}

fn chat_sse(content: Vec<Value>, stop: &str) -> String {
    openai_chat_sse(&scripted_message(&json!({}), content, stop), 16)
}

/// OpenAI Chat Completions over HTTP: two 529s make the loop switch to the fallback model
/// (without waiting for the client's further retries), which runs parallel tool calls.
#[tokio::test]
async fn an_openai_conversation_falls_back_after_repeated_529s_over_http() {
    let server = serve(vec![
        overloaded_529(),
        overloaded_529(),
        event_stream(chat_sse(
            vec![
                json!({"type": "text", "text": "Reading both."}),
                json!({"type": "tool_use", "id": "call_a", "name": "read", "input": {"path": "a"}}),
                json!({"type": "tool_use", "id": "call_b", "name": "read", "input": {"path": "b"}}),
            ],
            "tool_use",
        )),
        event_stream(chat_sse(
            vec![json!({"type": "text", "text": "Both read."})],
            "end_turn",
        )),
    ])
    .await;
    let client = test_client(Provider::OpenAiChat, &server);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut config = AgentConfig::new("gpt-primary");
    config.fallback_model = Some("gpt-fallback".into());
    config.fallback_after_529_retries = 2;
    let agent = Agent::new(config, Arc::new(client), reading_tools(seen.clone()));
    let events = run_events(&agent, "read a and b").await;
    ended_turn(&events);
    assert!(events.iter().any(|e| matches!(
        e,
        AgentEvent::ModelFallback { reason: "repeated_529", from, to, .. }
            if from == "gpt-primary" && to == "gpt-fallback"
    )));
    assert_eq!(*seen.lock().unwrap(), ["a", "b"]);
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    let bodies = bodies_of(&requests);
    let models: Vec<&str> = bodies
        .iter()
        .map(|b| b["model"].as_str().unwrap())
        .collect();
    assert_eq!(
        models,
        ["gpt-primary", "gpt-primary", "gpt-fallback", "gpt-fallback"]
    );
    assert!(requests.iter().all(|r| r.path == "/chat/completions"));
    assert_eq!(requests[0].header("authorization"), Some("Bearer test-key"));
    // A compatible server gets `max_tokens`; tool results follow the calls as tool messages.
    assert_eq!(bodies[0]["max_tokens"], 8192);
    let roles: Vec<&str> = bodies[3]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "tool"]);
}

/// An OpenAI Chat stream that broke off before reporting usage (Chat reports it only in its
/// last chunk) was billed all the same: it has its `usage` event, with `usage: null`, and the
/// budgets count it by its estimate, as a completed call without usage. It had neither, and a
/// budget never saw the tokens of a cut call (an audit's finding).
#[tokio::test]
async fn an_openai_stream_cut_before_its_usage_has_a_null_usage_event_and_counts_as_estimated() {
    let whole = chat_sse(
        vec![json!({"type": "text", "text": "Hello there, this answer is cut."})],
        "end_turn",
    );
    let cut = &whole[..whole.find("\"finish_reason\":\"stop\"").unwrap()];
    let cut = &cut[..cut.rfind("data: ").unwrap()];
    let server = serve(vec![
        event_stream(cut.to_owned()),
        event_stream(whole.clone()),
    ])
    .await;
    let client = test_client(Provider::OpenAiChat, &server);
    let mut config = AgentConfig::new("gpt-test");
    // One token: the cut call, counted by its estimate, spends it, so the run stops before
    // asking again.
    config.limits.token_budget = Some(1);
    let agent = Agent::new(config, Arc::new(client), reading_tools(Arc::default()));
    let events = run_events(&agent, "hi").await;
    let usages = common::usage_values(&events);
    assert_eq!(usages, [&Value::Null], "{events:#?}");
    let stop = events.last().unwrap();
    assert!(
        matches!(
            stop,
            AgentEvent::Stop {
                reason: StopReason::Budget,
                ..
            }
        ),
        "{events:#?}"
    );
    assert_eq!(server.requests().len(), 1);
}

/// An Anthropic stream whose text and a safe call (`t_slow`, which waits for its cancellation)
/// stream, then an `overloaded_error` event before its second call (`t_never`) is complete.
fn partial_turn_overloaded() -> String {
    let partial = sse(
        vec![
            json!({"type": "text", "text": "Partial answer."}),
            json!({"type": "tool_use", "id": "t_slow", "name": "read", "input": {"path": "slow"}}),
            json!({"type": "tool_use", "id": "t_never", "name": "read", "input": {"path": "never"}}),
        ],
        "tool_use",
    );
    let cut = partial[..partial.find("\"index\":2").unwrap()]
        .rfind("event:")
        .unwrap();
    format!(
        "{}event: error\ndata: {}\n\n",
        &partial[..cut],
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    )
}

/// Anthropic over HTTP: an `overloaded_error` event after a safe call started eagerly. The
/// partial turn is discarded (the call cancelled) and retried with the fallback model.
#[tokio::test]
async fn an_overloaded_error_mid_stream_falls_back_over_http() {
    let body = partial_turn_overloaded();
    let server = serve(vec![
        event_stream(body),
        event_stream(sse(
            vec![json!({"type": "text", "text": "From the fallback."})],
            "end_turn",
        )),
    ])
    .await;
    let client = test_client(Provider::Anthropic, &server);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut config = AgentConfig::new("claude-primary");
    config.fallback_model = Some("claude-fallback".into());
    let agent = Agent::new(config, Arc::new(client), reading_tools(seen.clone()));
    let events = run_events(&agent, "go").await;
    let messages = ended_turn(&events);
    assert_eq!(messages.len(), 2);
    assert!(!serde_json::to_string(messages).unwrap().contains("Partial"));
    assert!(events.iter().any(|e| matches!(
        e,
        AgentEvent::ModelFallback {
            reason: "overloaded",
            ..
        }
    )));
    assert!(events.iter().any(|e| matches!(
        e,
        AgentEvent::ToolFinished { tool_use_id, is_error: true, .. } if tool_use_id == "t_slow"
    )));
    assert!(!seen.lock().unwrap().iter().any(|p| p == "never"));
    let second: Value = serde_json::from_str(&server.requests()[1].body).unwrap();
    assert_eq!(second["model"], "claude-fallback");
    // The overloaded call reported its input at `message_start`: billed, it has its `usage`
    // event (it had none, and the totals did not count it).
    let usages = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::Usage { turn: 1, .. }))
        .count();
    assert_eq!(usages, 2, "{events:#?}");
}

/// Anthropic over HTTP without a fallback model: an `overloaded_error` event after the
/// response started (the client cannot retry it: something was delivered) has the loop ask the
/// same model the same turn again, its partial turn discarded; the new call goes through the
/// client's retries (a 529 first here). Before, the run stopped with `overloaded`.
#[tokio::test]
async fn an_overloaded_error_mid_stream_asks_the_turn_again_over_http() {
    let body = partial_turn_overloaded();
    let server = serve(vec![
        event_stream(body),
        overloaded_529(),
        event_stream(sse(
            vec![json!({"type": "text", "text": "Second try."})],
            "end_turn",
        )),
    ])
    .await;
    let client = test_client(Provider::Anthropic, &server);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let agent = Agent::new(
        AgentConfig::new("claude-primary"),
        Arc::new(client),
        reading_tools(seen.clone()),
    );
    let events = run_events(&agent, "go").await;
    let messages = ended_turn(&events);
    assert_eq!(messages.len(), 2);
    assert!(!serde_json::to_string(messages).unwrap().contains("Partial"));
    assert!(events.iter().any(|e| matches!(
        e,
        AgentEvent::ToolFinished { tool_use_id, is_error: true, .. } if tool_use_id == "t_slow"
    )));
    assert!(!seen.lock().unwrap().iter().any(|p| p == "never"));
    // The 529 of the second call was the client's to retry.
    assert!(events.iter().any(|e| matches!(
        e,
        AgentEvent::Retry {
            status: Some(529),
            ..
        }
    )));
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    for request in &requests {
        let body: Value = serde_json::from_str(&request.body).unwrap();
        assert_eq!(body["model"], "claude-primary");
    }
}

/// The `ferroloop run` replay conversation, served as OpenAI Chat Completions chunks over
/// loopback HTTP, with the real built-in tools on a temporary directory.
#[cfg(feature = "tools")]
#[tokio::test]
async fn the_explore_script_runs_over_openai_chat_completions() {
    use ferroloop::agent::replay::explore_directory_script;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("README.md"), "# Demo\n\nTODO: docs\n").unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/main.rs"), "fn main() {}\n").unwrap();
    let responder: ferroloop_replay::Responder = Arc::new(|request| {
        let body: Value = serde_json::from_str(&request.body).ok()?;
        let sse = openai_chat_sse(&explore_directory_script(&body), 12);
        Some(event_stream(sse).chunked(64, 0))
    });
    let options = ServerOptions {
        responder: Some(responder),
        ..ServerOptions::default()
    };
    let server = ReplayServer::start(&Script::default(), dir.path(), options)
        .await
        .unwrap();
    let client = test_client(Provider::OpenAiChat, &server);
    let workspace = ferroloop::tools::Workspace::new(dir.path()).unwrap();
    let mut registry = ToolRegistry::new();
    for tool in ferroloop::tools::all(&workspace) {
        registry.register(tool).unwrap();
    }
    let agent = Agent::new(
        AgentConfig::new("gpt-4o"),
        Arc::new(client),
        Arc::new(ToolExecutor::new(registry)),
    );
    let events = run_events(&agent, "explore").await;
    let AgentEvent::Stop {
        reason,
        messages,
        turns,
        tool_calls,
        ..
    } = events.last().unwrap()
    else {
        panic!("no stop event")
    };
    assert_eq!(
        (*reason, *turns, *tool_calls),
        (StopReason::EndTurn, 3, 5),
        "{events:#?}"
    );
    assert!(check_tool_pairing(messages).is_ok());
    let answer = messages.last().unwrap().to_string();
    assert!(
        answer.contains("# Demo") && answer.contains("TODO/FIXME search: 1 in 1 file(s)"),
        "{answer}"
    );
}

/// The loop against an OpenAI Responses endpoint: a 429 retried, a turn with encrypted
/// reasoning and two calls, a cut answer continued. Each request carries the whole history as
/// items (nothing stored server-side): the reasoning goes back encrypted before the calls it
/// led to, and each result follows as a `function_call_output`.
#[tokio::test]
async fn the_loop_speaks_the_responses_api_over_http() {
    let turn = |content: Vec<Value>, stop: &str| {
        event_stream(openai_responses_sse(
            &scripted_message(&json!({}), content, stop),
            8,
        ))
    };
    let server = serve(vec![
            ScriptedResponse::with_status(
                429,
                ScriptBody::Json(
                    json!({"error": {"type": "rate_limit_exceeded", "message": "slow down"}}),
                ),
            )
            .header("retry-after-ms", "5"),
            turn(
                vec![
                    json!({"type": "thinking", "thinking": "Both files, in parallel.", "signature": "enc-1"}),
                    json!({"type": "text", "text": "Reading both."}),
                    json!({"type": "tool_use", "id": "call_a", "name": "read", "input": {"path": "a"}}),
                    json!({"type": "tool_use", "id": "call_b", "name": "read", "input": {"path": "b"}}),
                ],
                "tool_use",
            ),
            turn(
                vec![json!({"type": "text", "text": "Both read, a"})],
                "max_tokens",
            ),
            turn(
                vec![json!({"type": "text", "text": "nd done."})],
                "end_turn",
            ),
        ]).await;
    let client = test_client(Provider::OpenAiResponses, &server);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut config = AgentConfig::new("gpt-5.5");
    config.system = Some("Be brief.".into());
    let agent = Agent::new(config, Arc::new(client), reading_tools(seen.clone()));
    let events = run_events(&agent, "read a and b").await;
    let messages = ended_turn(&events);
    assert_eq!(*seen.lock().unwrap(), ["a", "b"]);
    assert_eq!(
        messages[1]["content"][0],
        json!({"type": "thinking", "thinking": "Both files, in parallel.", "signature": "enc-1"})
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    assert!(requests.iter().all(|r| r.path == "/responses"));
    assert_eq!(requests[0].header("authorization"), Some("Bearer test-key"));
    let bodies = bodies_of(&requests);
    for body in &bodies {
        assert_eq!(body["model"], "gpt-5.5");
        assert_eq!(body["instructions"], "Be brief.");
        assert_eq!(body["store"], false);
        assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(body["stream"], true);
        assert!(body.get("messages").is_none() && body.get("max_tokens").is_none());
        assert_eq!(body["tools"][0]["name"], "read");
        assert_eq!(body["tools"][0]["strict"], false);
    }
    let input = bodies[2]["input"].as_array().unwrap();
    let kinds: Vec<&str> = input.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "message",
            "reasoning",
            "message",
            "function_call",
            "function_call",
            "function_call_output",
            "function_call_output"
        ]
    );
    assert_eq!(input[1]["encrypted_content"], "enc-1");
    assert_eq!(input[5]["call_id"], "call_a");
    assert_eq!(input[5]["output"], "contents of a");
    assert_eq!(input[6]["call_id"], "call_b");
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "assistant");
}

/// A Responses server that sends its output only in `response.completed` (a proxy in front of
/// a model it does not stream): the calls run, as streamed ones do, instead of being answered
/// "The call was not run.".
#[tokio::test]
async fn calls_a_responses_server_sends_only_in_its_final_response_run() {
    let turn = |content: Vec<Value>, stop: &str| {
        let sse = openai_responses_sse(&scripted_message(&json!({}), content, stop), 8);
        let ends: Vec<&str> = sse
            .split_inclusive("\n\n")
            .filter(|event| {
                event.starts_with("event: response.created\n")
                    || event.starts_with("event: response.completed\n")
            })
            .collect();
        assert_eq!(ends.len(), 2, "{sse}");
        event_stream(ends.concat())
    };
    let server = serve(vec![
        turn(
            vec![
                json!({"type": "text", "text": "Reading."}),
                json!({"type": "tool_use", "id": "call_a", "name": "read", "input": {"path": "a"}}),
            ],
            "tool_use",
        ),
        turn(vec![json!({"type": "text", "text": "Done."})], "end_turn"),
    ])
    .await;
    let client = test_client(Provider::OpenAiResponses, &server);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let agent = Agent::new(
        AgentConfig::new("gpt-4.1"),
        Arc::new(client),
        reading_tools(seen.clone()),
    );
    let events = run_events(&agent, "read a").await;
    ended_turn(&events);
    assert_eq!(*seen.lock().unwrap(), ["a"]);
    // The host is shown the text, though it came in no delta.
    let text: String = events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Reading.Done.");
    let bodies = bodies_of(&server.requests());
    assert_eq!(bodies.len(), 2);
    let output = bodies[1]["input"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["type"] == "function_call_output")
        .cloned();
    assert_eq!(
        output,
        Some(
            json!({"type": "function_call_output", "call_id": "call_a", "output": "contents of a"})
        )
    );
}

/// A Chat server that refuses fields it does not know (Azure's older API versions, FastAPI
/// servers with `extra="forbid"`) answers `stream_options` with a 400: over HTTP the loop sends
/// the turn again without it and goes on, usage estimated.
#[tokio::test]
async fn a_chat_server_refusing_stream_options_is_asked_again_without_them_over_http() {
    let refusals = [
        json!({"error": {"message": "Unrecognized request argument supplied: stream_options",
            "type": "invalid_request_error", "param": null, "code": null}}),
        json!({"detail": [{"type": "extra_forbidden", "loc": ["body", "stream_options"],
            "msg": "Extra inputs are not permitted", "input": {"include_usage": true}}]}),
    ];
    for refusal in refusals {
        let answer = chat_sse(vec![json!({"type": "text", "text": "Hello."})], "end_turn");
        // Such a server sends no usage chunk.
        let answer: Vec<&str> = answer
            .split("\n\n")
            .filter(|event| !event.contains("prompt_tokens"))
            .collect();
        let server = serve(vec![
            ScriptedResponse::with_status(400, ScriptBody::Json(refusal.clone())),
            event_stream(answer.join("\n\n")),
        ])
        .await;
        let client = test_client(Provider::OpenAiChat, &server);
        let agent = Agent::new(
            AgentConfig::new("gpt-4o"),
            Arc::new(client),
            reading_tools(Arc::default()),
        );
        let events = run_events(&agent, "hi").await;
        let AgentEvent::Stop { reason, error, .. } = events.last().unwrap() else {
            panic!("no stop event")
        };
        assert_eq!(*reason, StopReason::EndTurn, "{refusal}: {error:?}");
        let requests = server.requests();
        assert_eq!(requests.len(), 2);
        let bodies = bodies_of(&requests);
        assert!(bodies[0].get("stream_options").is_some());
        assert!(bodies[1].get("stream_options").is_none(), "{}", bodies[1]);
    }
}

/// A run the provider refuses carries the client error's stable code on its stop event: a
/// 401 is `authentication`, OpenAI's billing 429 (`insufficient_quota`) `quota_exceeded` (not
/// retried), so a host tells them apart without reading the message.
#[tokio::test]
async fn a_refused_run_s_stop_carries_the_client_error_code_over_http() {
    let unauthorized = anthropic_error(401, "authentication_error", "invalid x-api-key");
    let quota = ScriptedResponse::with_status(
        429,
        ScriptBody::Json(json!({"error": {
            "message": "You exceeded your current quota, please check your plan and billing details.",
            "type": "insufficient_quota", "param": null, "code": "insufficient_quota"}})),
    );
    let cases = [
        (
            Provider::Anthropic,
            unauthorized,
            "authentication",
            "invalid x-api-key",
        ),
        (
            Provider::OpenAiChat,
            quota,
            "quota_exceeded",
            "exceeded your current quota",
        ),
    ];
    for (provider, response, code, text) in cases {
        let server = serve(vec![response]).await;
        let agent = Agent::new(
            AgentConfig::new("m"),
            Arc::new(test_client(provider, &server)),
            reading_tools(Arc::default()),
        );
        let events = run_events(&agent, "hi").await;
        let AgentEvent::Stop {
            reason,
            error,
            error_code,
            ..
        } = events.last().unwrap()
        else {
            panic!("no stop event")
        };
        assert_eq!(*reason, StopReason::Error, "{events:#?}");
        assert_eq!(*error_code, Some(code), "{error:?}");
        assert!(error.as_deref().unwrap().contains(text), "{error:?}");
        assert_eq!(server.requests().len(), 1, "{code} is not retried");
    }
}

/// The status, request id and wait the provider sent with the last answer of a failed call.
fn stop_details(events: &[AgentEvent]) -> (Option<u16>, Option<&str>, Option<Duration>) {
    let Some(AgentEvent::Stop {
        status,
        request_id,
        retry_after,
        ..
    }) = events.last()
    else {
        panic!("no stop event: {events:#?}")
    };
    (*status, request_id.as_deref(), *retry_after)
}

/// Runs an agent against a `provider` server that gives `answer` to every request, through a
/// client that retries `max_retries` times without waiting for the `retry-after` asked (longer
/// waits than 1 ms are not waited for: the test stays fast, and the stop still reports the
/// wait); returns the run's events and the number of requests the server saw.
async fn run_against_repeated(
    provider: Provider,
    answer: ScriptedResponse,
    max_retries: u32,
) -> (Vec<AgentEvent>, usize) {
    let script = Script {
        responses: vec![answer],
        when_exhausted: WhenExhausted::RepeatLast,
    };
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let server = ReplayServer::start(&script, &root, ServerOptions::default())
        .await
        .unwrap();
    let mut config = ClientConfig::new(provider)
        .with_base_url(server.base_url())
        .with_api_key("test-key");
    config.retry.max_retries = max_retries;
    config.retry.base_delay = Duration::from_millis(5);
    config.retry.max_delay = Duration::from_millis(20);
    config.retry.max_retry_after = Duration::from_millis(1);
    config.tls.native_roots = false;
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(Client::new(config).unwrap()),
        reading_tools(Arc::default()),
    );
    let events = run_events(&agent, "hi").await;
    (events, server.requests().len())
}

/// [`run_against_repeated`] of Anthropic with two retries, which run out: the events, whose
/// last is a stop of reason `error`.
async fn run_until_retries_run_out(answer: ScriptedResponse) -> Vec<AgentEvent> {
    let (events, requests) = run_against_repeated(Provider::Anthropic, answer, 2).await;
    assert_eq!(requests, 3, "the client's retries ran out");
    let Some(AgentEvent::Stop { reason, .. }) = events.last() else {
        panic!("no stop event: {events:#?}")
    };
    assert_eq!(*reason, StopReason::Error, "{events:#?}");
    events
}

/// A rate limit that outlasts the client's retries stops the run with what the client knew of
/// it: the 429, the provider's request id and the wait its `retry-after` asked for (two
/// seconds, in milliseconds on the wire), so a host can schedule a new run and quote the
/// request. Before, the stop event had only the error's text and code.
#[tokio::test]
async fn a_rate_limited_run_s_stop_carries_the_status_request_id_and_wait_over_http() {
    let limited = anthropic_error(429, "rate_limit_error", "slow down")
        .header("retry-after", "2")
        .header("request-id", "req_limited");
    assert_stop_after_retries_run_out(limited, "rate_limited", 429, "req_limited", 2).await;
}

/// Runs an agent against `refusal` until the client's retries run out; checks that the stop
/// event carries `code` and the refusal's status, request id and wait (`wait_secs` seconds,
/// milliseconds on the wire), in the event and on the wire.
async fn assert_stop_after_retries_run_out(
    refusal: ScriptedResponse,
    code: &str,
    status: u16,
    request_id: &str,
    wait_secs: u64,
) {
    let events = run_until_retries_run_out(refusal).await;
    let wire = serde_json::to_value(events.last().unwrap()).unwrap();
    assert_eq!(wire["error_code"], code, "{wire}");
    assert_eq!(
        stop_details(&events),
        (
            Some(status),
            Some(request_id),
            Some(Duration::from_secs(wait_secs))
        )
    );
    assert_eq!(wire["status"], status, "{wire}");
    assert_eq!(wire["request_id"], request_id, "{wire}");
    assert_eq!(wire["retry_after"], (wait_secs * 1000) as f64, "{wire}");
}

/// A run whose fallback model is overloaded too stops with the fallback's failure: its 529,
/// its request id and the wait its `retry-after` asked for, not the primary's.
#[tokio::test]
async fn a_stop_after_the_fallback_was_overloaded_too_carries_the_fallback_s_details() {
    let server = serve(vec![
        overloaded_529()
            .header("request-id", "req_primary")
            .header("retry-after", "1"),
        overloaded_529()
            .header("request-id", "req_fallback")
            .header("retry-after", "3"),
    ])
    .await;
    let mut config = ClientConfig::new(Provider::Anthropic)
        .with_base_url(server.base_url())
        .with_api_key("test-key");
    config.retry.max_retries = 0;
    config.tls.native_roots = false;
    let mut agent_config = AgentConfig::new("primary");
    agent_config.fallback_model = Some("fallback".into());
    let agent = Agent::new(
        agent_config,
        Arc::new(Client::new(config).unwrap()),
        reading_tools(Arc::default()),
    );
    let events = run_events(&agent, "hi").await;
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AgentEvent::ModelFallback { .. })),
        "{events:#?}"
    );
    let Some(AgentEvent::Stop { error_code, .. }) = events.last() else {
        panic!("no stop event: {events:#?}")
    };
    assert_eq!(*error_code, Some("overloaded"));
    assert_eq!(
        stop_details(&events),
        (
            Some(529),
            Some("req_fallback"),
            Some(Duration::from_secs(3))
        )
    );
}

/// An overload (529) that outlasts the client's retries, with no fallback model, stops the
/// run with the wait the provider's `retry-after` asked for, as a rate limit's stop does: the
/// client kept it only for a 429, so a host could not schedule a new run after an overload.
#[tokio::test]
async fn an_overloaded_run_s_stop_carries_the_wait_over_http() {
    let busy = overloaded_529()
        .header("retry-after", "4")
        .header("request-id", "req_busy");
    assert_stop_after_retries_run_out(busy, "overloaded", 529, "req_busy", 4).await;
}

/// A server error (a 503 with `retry-after`, RFC 9110's "come back later") that outlasts the
/// client's retries stops the run with that wait, as a 429's or a 529's stop does: the client
/// honoured it between attempts but kept none in the error, so the stop's `retry_after` was
/// null and a host could not schedule a new run after it.
#[tokio::test]
async fn a_server_error_run_s_stop_carries_the_wait_over_http() {
    let unavailable = anthropic_error(503, "api_error", "unavailable")
        .header("retry-after", "7")
        .header("request-id", "req_down");
    assert_stop_after_retries_run_out(unavailable, "server", 503, "req_down", 7).await;
}

/// A run that ends well over HTTP has no failure to describe: the three fields are null on the
/// wire (present, as every stop field is).
#[tokio::test]
async fn a_run_that_ended_well_has_no_failure_details_over_http() {
    let server = serve(vec![
        event_stream(sse(
            vec![json!({"type": "text", "text": "Hi."})],
            "end_turn",
        ))
        .header("request-id", "req_ok"),
    ])
    .await;
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(test_client(Provider::Anthropic, &server)),
        reading_tools(Arc::default()),
    );
    let events = run_events(&agent, "hi").await;
    ended_turn(&events);
    assert_eq!(stop_details(&events), (None, None, None));
    let wire = serde_json::to_value(events.last().unwrap()).unwrap();
    for key in ["status", "request_id", "retry_after"] {
        assert!(wire.get(key).is_some_and(Value::is_null), "{key}: {wire}");
    }
}

/// Anthropic over HTTP: an `overloaded_error` as the first event of a 200 stream (nothing
/// delivered) is retried by the client, and counts, as an HTTP 529 does, toward
/// `fallback_after_529_retries`: the loop falls back after that many instead of waiting
/// through every retry of the client (an in-band overload carries no status, and did not count).
#[tokio::test]
async fn overloaded_first_events_count_toward_the_fallback_like_529s() {
    let overloaded = || {
        event_stream(format!(
            "event: error\ndata: {}\n\n",
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
        ))
    };
    let mut responses: Vec<ScriptedResponse> = (0..3).map(|_| overloaded()).collect();
    responses.push(event_stream(sse(
        vec![json!({"type": "text", "text": "From the fallback."})],
        "end_turn",
    )));
    let server = serve(responses).await;
    let client = test_client(Provider::Anthropic, &server);
    let mut config = AgentConfig::new("claude-primary");
    config.fallback_model = Some("claude-fallback".into());
    config.fallback_after_529_retries = 3;
    let agent = Agent::new(
        config,
        Arc::new(client),
        reading_tools(Arc::new(Mutex::new(Vec::new()))),
    );
    let events = run_events(&agent, "hi").await;
    ended_turn(&events);
    // Still `repeated_529` (a stable label that covers both), but the error says what came:
    // no 529 did.
    let error = events
        .iter()
        .find_map(|e| match e {
            AgentEvent::ModelFallback {
                reason: "repeated_529",
                error,
                ..
            } => Some(error.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no repeated_529 fallback: {events:#?}"));
    assert!(!error.contains("HTTP 529 responses"), "{error}");
    assert!(
        error.starts_with("3 consecutive overloaded errors"),
        "{error}"
    );
    // Two retries were waited for (reported without a status: none was given); the third
    // overload switched models instead.
    let retries: Vec<Option<u16>> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Retry { status, .. } => Some(*status),
            _ => None,
        })
        .collect();
    assert_eq!(retries, [None, None]);
    // Each says why the loop waits although no status came: the client's class of the
    // failure, and that it was an overload (the host's JSON, as the CLI, Python and Node emit).
    for retry in events
        .iter()
        .filter(|e| matches!(e, AgentEvent::Retry { .. }))
    {
        let json = serde_json::to_value(retry).unwrap();
        assert_eq!(json["status"], Value::Null, "{json}");
        assert_eq!(json["code"], "overloaded", "{json}");
        assert_eq!(json["overloaded"], true, "{json}");
    }
    let models: Vec<String> = bodies_of(&server.requests())
        .iter()
        .map(|b| b["model"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        models,
        [
            "claude-primary",
            "claude-primary",
            "claude-primary",
            "claude-fallback"
        ]
    );
}

/// OpenAI Chat Completions and Responses over HTTP: the loop reads these through a translator
/// of the client's stream, and a run stopped on a failed call still carries what the client
/// knew of it: a 429's status, request id and `retry-after` once the retries ran out; a 400's
/// status and request id; an error event in a 200 stream (no status, unless it names one as its
/// numeric `code`, as OpenRouter does) and a stream cut mid-way, the request id of the call.
#[tokio::test]
async fn an_openai_run_s_stop_carries_the_status_request_id_and_wait_over_http() {
    type Expected = (&'static str, Option<u16>, Option<Duration>);
    for provider in [Provider::OpenAiChat, Provider::OpenAiResponses] {
        let answer = |text: &str| {
            let message = scripted_message(
                &json!({}),
                vec![json!({"type": "text", "text": text})],
                "end_turn",
            );
            match provider {
                Provider::OpenAiChat => openai_chat_sse(&message, 8),
                _ => openai_responses_sse(&message, 8),
            }
        };
        let long = answer("A long answer that the server never finishes sending to the client.");
        let in_stream_error = match provider {
            Provider::OpenAiChat => format!(
                "data: {}\n\n",
                json!({"error": {"code": 400, "message": "upstream refused the request"}})
            ),
            _ => format!(
                "event: error\ndata: {}\n\n",
                json!({"type": "error", "code": "invalid_request_error", "message": "upstream refused the request", "param": null})
            ),
        };
        let in_stream_status = match provider {
            Provider::OpenAiChat => Some(400),
            _ => None,
        };
        let cases: [(&str, ScriptedResponse, Expected); 4] = [
            (
                "429",
                ScriptedResponse::with_status(
                    429,
                    ScriptBody::Json(json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}})),
                )
                .header("retry-after", "2"),
                ("rate_limited", Some(429), Some(Duration::from_secs(2))),
            ),
            (
                "400",
                ScriptedResponse::with_status(
                    400,
                    ScriptBody::Json(json!({"error": {"message": "bad tool schema", "type": "invalid_request_error", "code": null}})),
                ),
                ("invalid_request", Some(400), None),
            ),
            (
                "error event",
                event_stream(in_stream_error),
                ("invalid_request", in_stream_status, None),
            ),
            (
                "cut",
                event_stream(long.clone()).fault(Fault::DisconnectAfter {
                    bytes: long.len() / 2,
                }),
                ("stream_truncated", None, None),
            ),
        ];
        for (name, response, (code, status, retry_after)) in cases {
            let answer = response.header("x-request-id", "req_openai");
            let (events, _) = run_against_repeated(provider, answer, 1).await;
            let Some(AgentEvent::Stop {
                reason, error_code, ..
            }) = events.last()
            else {
                panic!("{provider:?} {name}: no stop event: {events:#?}")
            };
            assert_eq!(
                (*reason, *error_code),
                (StopReason::Error, Some(code)),
                "{provider:?} {name}: {events:#?}"
            );
            assert_eq!(
                stop_details(&events),
                (status, Some("req_openai"), retry_after),
                "{provider:?} {name}"
            );
        }
    }
}
