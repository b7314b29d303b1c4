//! How the agent loop ends a turn that does not stop for tool use: the calls it started while
//! the response streamed, a cut by the context window that nothing could be kept of, and the
//! history a run stopping after a paused turn hands back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod common;

use bytes::Bytes;
use common::{call, reply, text};
use ferroloop::agent::replay::ScriptedModel;
use ferroloop::agent::{
    Agent, AgentConfig, AgentEvent, Model, ModelEvent, ModelStream, StopReason, check_history,
    check_tool_pairing,
};
use ferroloop::exec::{FnTool, ToolExecutor, ToolOutput, ToolRegistry};
use futures::StreamExt;
use serde_json::{Value, json};

/// Tools: `probe` (concurrency-safe: logs its start, then its end after 500 ms, or its
/// cancellation) and `write` (not safe: logs that it ran).
fn executor(log: Arc<Mutex<Vec<String>>>) -> Arc<ToolExecutor> {
    let mut tools = ToolRegistry::new();
    let probe_log = log.clone();
    tools
        .register(
            FnTool::new("probe", move |_input: Value, ctx| {
                let log = probe_log.clone();
                async move {
                    log.lock().unwrap().push("probe started".into());
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(500)) => {
                            log.lock().unwrap().push("probe finished".into());
                        }
                        () = ctx.cancelled() => {
                            log.lock().unwrap().push("probe cancelled".into());
                        }
                    }
                    Ok(ToolOutput::text("probed"))
                }
            })
            .concurrency_safe(true),
        )
        .unwrap();
    tools
        .register(FnTool::new("write", move |_input: Value, _ctx| {
            let log = log.clone();
            async move {
                log.lock().unwrap().push("write ran".into());
                Ok(ToolOutput::text("written"))
            }
        }))
        .unwrap();
    Arc::new(ToolExecutor::new(tools))
}

/// A scripted model whose responses end (their final `Completed` item) `hold` after their last
/// event, as a slow connection delivers `message_stop` after `message_delta`.
struct SlowEnd {
    inner: ScriptedModel,
    hold: Duration,
}

impl Model for SlowEnd {
    fn stream(&self, request: Value) -> ModelStream {
        let hold = self.hold;
        Box::pin(self.inner.stream(request).then(move |event| async move {
            if matches!(event, ModelEvent::Completed { .. }) {
                tokio::time::sleep(hold).await;
            }
            event
        }))
    }
}

struct Stopped {
    reason: StopReason,
    error_code: Option<&'static str>,
    messages: Vec<Value>,
    turns: u32,
    tool_calls: u32,
}

fn stopped(events: &[AgentEvent]) -> Stopped {
    match events.last() {
        Some(AgentEvent::Stop {
            reason,
            error_code,
            messages,
            turns,
            tool_calls,
            ..
        }) => Stopped {
            reason: *reason,
            error_code: *error_code,
            messages: messages.clone(),
            turns: *turns,
            tool_calls: *tool_calls,
        },
        other => panic!("the last event is not Stop: {other:?}"),
    }
}

fn has_tool_use(messages: &[Value]) -> bool {
    messages
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .any(|b| b["type"] == "tool_use")
}

/// A response with calls that stops for something other than tool use gets no results. Its
/// concurrency-safe calls started while it streamed (the stop reason comes last, in
/// `message_delta`); they are cancelled as soon as that delta says the turn ends, not left to
/// run until the message ends. Each is reported (`tool_started`, `tool_finished` with status
/// `cancelled`) and counted in `Stop::tool_calls`; none stays in history. Before, the call ran
/// on to its end (`probe finished`, status `succeeded`) while the message finished arriving.
#[tokio::test(start_paused = true)]
async fn calls_started_early_are_cancelled_when_the_response_stops_without_tool_use() {
    for stop_reason in [
        "end_turn",
        "refusal",
        "stop_sequence",
        "pause_turn",
        "max_tokens",
    ] {
        let log = Arc::new(Mutex::new(Vec::new()));
        let inner = ScriptedModel::new(move |n, request| {
            if n == 0 {
                reply(
                    request,
                    vec![text("answer"), call("p1", "probe", json!({}))],
                    stop_reason,
                )
            } else {
                reply(request, vec![text("done")], "end_turn")
            }
        });
        let model = SlowEnd {
            inner,
            hold: Duration::from_secs(2),
        };
        let mut config = AgentConfig::new("m");
        config.escalated_max_tokens = None;
        let agent = Agent::new(config, Arc::new(model), executor(log.clone()));
        let events: Vec<AgentEvent> = agent.run("go").collect().await;
        assert_eq!(
            *log.lock().unwrap(),
            ["probe started", "probe cancelled"],
            "{stop_reason}"
        );
        let started: Vec<&str> = events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::ToolStarted { tool_use_id, .. } => Some(tool_use_id.as_str()),
                _ => None,
            })
            .collect();
        let finished: Vec<(&str, &str)> = events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::ToolFinished {
                    tool_use_id,
                    status,
                    ..
                } => Some((tool_use_id.as_str(), status.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(started, ["p1"], "{stop_reason}");
        assert_eq!(finished, [("p1", "cancelled")], "{stop_reason}");
        let stop = stopped(&events);
        assert_eq!(stop.tool_calls, 1, "{stop_reason}");
        assert!(!has_tool_use(&stop.messages), "{stop_reason}");
        assert!(check_tool_pairing(&stop.messages).is_ok(), "{stop_reason}");
        assert!(
            stop.messages[1]["content"].to_string().contains("answer"),
            "{stop_reason}: {:#?}",
            stop.messages
        );
    }
}

/// A call that is not concurrency-safe waits for the stop reason, so it never runs in a
/// response that does not stop for tool use, and is not reported or counted.
#[tokio::test(start_paused = true)]
async fn an_unsafe_call_in_a_response_that_ends_the_turn_never_runs() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let model = ScriptedModel::new(|_, request| {
        reply(
            request,
            vec![
                call("p1", "probe", json!({})),
                call("w1", "write", json!({})),
            ],
            "end_turn",
        )
    });
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(model),
        executor(log.clone()),
    );
    let events: Vec<AgentEvent> = agent.run("go").collect().await;
    assert!(!log.lock().unwrap().contains(&"write ran".to_owned()));
    let finished = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::ToolFinished { .. }))
        .count();
    let stop = stopped(&events);
    assert_eq!((stop.reason, stop.tool_calls), (StopReason::EndTurn, 1));
    assert_eq!(finished, 1);
    assert!(!has_tool_use(&stop.messages));
}

/// The raw SSE of a response cut by the context window: `input` tokens in, an unfinished call
/// to `write` when `with_call`, `output` tokens out.
fn cut_by_the_window(input: u64, output: u64, with_call: bool) -> Bytes {
    let event = |out: &mut String, name: &str, data: Value| {
        out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    };
    let mut body = String::new();
    event(
        &mut body,
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "model": "m", "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": input, "output_tokens": 1}}}),
    );
    if with_call {
        event(
            &mut body,
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block":
                {"type": "tool_use", "id": "w1", "name": "write", "input": {}}}),
        );
        event(
            &mut body,
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta":
                {"type": "input_json_delta", "partial_json": "{\"path\":\"big\",\"content\":\"aaaa"}}),
        );
    }
    event(
        &mut body,
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "model_context_window_exceeded",
            "stop_sequence": null}, "usage": {"output_tokens": output}}),
    );
    event(&mut body, "message_stop", json!({"type": "message_stop"}));
    Bytes::from(body)
}

/// A cut by the context window of which nothing can be kept is continued only while the next
/// request differs (the note on its cut call is added once; a compaction that changes the
/// history would make it differ too: `a_cut_by_the_context_window_with_nothing_kept_is_left_to_compaction`
/// in `agent.rs`): a lone prompt cannot be compacted, so the run stops with
/// `max_tokens_no_progress` instead of sending the same full-window request again. Before,
/// every continuation was sent: 4 calls, the last ones byte-identical.
#[tokio::test]
async fn a_window_cut_that_would_send_the_same_request_again_stops() {
    for (with_call, calls) in [(true, 2), (false, 1)] {
        let (model, requests) =
            ScriptedModel::new(move |_, _| Ok(cut_by_the_window(150_000, 50_000, with_call)))
                .recorded();
        let log = Arc::new(Mutex::new(Vec::new()));
        let agent = Agent::new(
            AgentConfig::new("claude-sonnet-4-5"),
            Arc::new(model),
            executor(log.clone()),
        );
        let events: Vec<AgentEvent> = agent.run("go").collect().await;
        let requests = requests.lock().unwrap().clone();
        assert!(
            requests.windows(2).all(|pair| pair[0] != pair[1]),
            "a request was sent twice"
        );
        assert_eq!(requests.len(), calls, "with a call: {with_call}");
        let stop = stopped(&events);
        assert_eq!(
            (stop.reason, stop.error_code, stop.turns),
            (
                StopReason::MaxTokens,
                Some("max_tokens_no_progress"),
                u32::try_from(calls).unwrap()
            ),
            "with a call: {with_call}"
        );
        assert!(log.lock().unwrap().is_empty());
        assert!(check_tool_pairing(&stop.messages).is_ok());
    }
}

/// A model whose first call is answered by `inner` and whose later calls never answer.
struct PausedThenSilent {
    inner: ScriptedModel,
    calls: AtomicUsize,
}

impl Model for PausedThenSilent {
    fn stream(&self, request: Value) -> ModelStream {
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            self.inner.stream(request)
        } else {
            Box::pin(futures::stream::pending())
        }
    }
}

/// A run that stops after a paused turn (`pause_turn`) hands back history the API takes: the
/// paused message, now last, without the trailing whitespace the API refuses at the end of a
/// final assistant message (the request continuing it is trimmed the same way). Before, the
/// stop's messages ended with `"searching...  \n"`.
#[tokio::test]
async fn a_run_stopping_after_a_paused_turn_hands_back_trimmed_history() {
    let paused =
        |_: usize, request: &Value| reply(request, vec![text("searching...  \n")], "pause_turn");
    // max_turns.
    let mut config = AgentConfig::new("m");
    config.limits.max_turns = 1;
    let agent = Agent::new(
        config,
        Arc::new(ScriptedModel::new(paused)),
        executor(Default::default()),
    );
    let stop = stopped(&agent.run("go").collect::<Vec<_>>().await);
    assert_eq!(stop.reason, StopReason::MaxTurns);
    assert_eq!(stop.messages[1]["content"], json!([text("searching...")]));
    // A token budget spent by the paused turn.
    let mut config = AgentConfig::new("m");
    config.limits.token_budget = Some(1);
    let agent = Agent::new(
        config,
        Arc::new(ScriptedModel::new(paused)),
        executor(Default::default()),
    );
    let stop = stopped(&agent.run("go").collect::<Vec<_>>().await);
    assert_eq!(stop.reason, StopReason::Budget);
    assert_eq!(stop.messages[1]["content"], json!([text("searching...")]));
    // An abort while the continuation is awaited.
    let model = PausedThenSilent {
        inner: ScriptedModel::new(paused),
        calls: AtomicUsize::new(0),
    };
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(model),
        executor(Default::default()),
    );
    let mut run = agent.run("go");
    let mut events = Vec::new();
    while let Some(event) = run.next().await {
        if matches!(event, AgentEvent::TurnStart { turn: 2, .. }) {
            run.cancel();
        }
        events.push(event);
    }
    let stop = stopped(&events);
    assert_eq!(stop.reason, StopReason::Aborted);
    assert_eq!(stop.messages[1]["content"], json!([text("searching...")]));
    let mut continued = stop.messages.clone();
    continued.push(json!({"role": "user", "content": "go on"}));
    assert!(check_history(&continued).is_ok());
}

/// Thinking after a response's last call would end its message in history, which the API
/// refuses there (requests leave it out): history does not keep it, after `tool_use` as after
/// any other stop. Before, history and the stop's messages kept `[tool_use, thinking]`.
#[tokio::test(start_paused = true)]
async fn thinking_after_the_last_call_does_not_stay_in_history() {
    let model = ScriptedModel::new(|n, request| {
        if n == 0 {
            reply(
                request,
                vec![
                    call("p1", "probe", json!({})),
                    json!({"type": "thinking", "thinking": "hmm", "signature": "sig"}),
                ],
                "tool_use",
            )
        } else {
            reply(request, vec![text("done")], "end_turn")
        }
    });
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(model),
        executor(Default::default()),
    );
    let stop = stopped(&agent.run("go").collect::<Vec<_>>().await);
    assert_eq!(stop.reason, StopReason::EndTurn);
    assert_eq!(
        stop.messages[1]["content"],
        json!([call("p1", "probe", json!({}))]),
        "{:#?}",
        stop.messages
    );
}
