//! The agent loop over real HTTP against the loopback replay server: a 429 retried by the
//! client, a disconnect mid-stream (the partial turn discarded and retried), parallel tool calls,
//! a `max_tokens` continuation and a prompt-too-long recovery — in one conversation, with the
//! history valid at the end. Nothing leaves 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferroloop::agent::replay::{anthropic_sse, scripted_message};
use ferroloop::agent::{
    Agent, AgentConfig, AgentEvent, ContextAction, StopReason, check_tool_pairing,
};
use ferroloop::client::{Client, ClientConfig};
use ferroloop::decode::Provider;
use ferroloop::exec::{FnTool, ToolExecutor, ToolOutput, ToolRegistry};
use ferroloop_replay::{Fault, ReplayServer, Script, ScriptBody, ScriptedResponse, ServerOptions};
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
        ScriptedResponse::with_status(429, ScriptBody::Json(json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}})))
            .header("retry-after-ms", "5"),
        event_stream(tool_turn.clone()).fault(Fault::DisconnectAfter { bytes: cut_at }),
        event_stream(tool_turn),
        event_stream(sse(vec![json!({"type": "text", "text": "Half an ans"})], "max_tokens")),
        ScriptedResponse::with_status(400, ScriptBody::Json(json!({"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 250000 tokens > 200000 maximum"}}))),
        event_stream(sse(vec![json!({"type": "text", "text": "Summary: read a and b."})], "end_turn")),
        event_stream(sse(vec![json!({"type": "text", "text": "wer, finished."})], "end_turn")),
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
    let events: Vec<AgentEvent> =
        tokio::time::timeout(Duration::from_secs(30), agent.run("read a and b").collect())
            .await
            .unwrap();

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
    let AgentEvent::Stop {
        reason, messages, ..
    } = events.last().unwrap()
    else {
        panic!("no stop event")
    };
    assert_eq!(*reason, StopReason::EndTurn, "{events:#?}");
    assert!(check_tool_pairing(messages).is_ok(), "{messages:#?}");
    assert!(messages.last().unwrap().to_string().contains("finished."));
    // Both reads ran in the completed turn (the ones started in the cut turn were discarded).
    let calls = calls.lock().unwrap();
    assert!(
        calls.iter().filter(|p| *p == "a").count() >= 1
            && calls.iter().filter(|p| *p == "b").count() >= 1
    );
    assert_eq!(server.requests().len(), 7);
}
