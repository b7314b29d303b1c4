//! The agent loop against scripted models (SSE bytes decoded in-process, as from the network):
//! multi-turn with parallel tools, max_tokens continuation, prompt-too-long recovery, truncated
//! stream recovery, abort mid-tool, microcompact, budgets, model fallback, OpenAI Chat
//! Completions through the translation — and the history invariant after each.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod common;

use common::{call, reply, text};

use bytes::Bytes;
use ferroloop::agent::replay::{ScriptedModel, anthropic_sse, openai_chat_sse, scripted_message};
use ferroloop::agent::{
    Agent, AgentConfig, AgentEvent, CLEARED_TOOL_RESULT, ContextAction, FailureDetails, Model,
    ModelError, ModelEvent, ModelStream, StopReason, UsageCall, check_tool_pairing,
};
use ferroloop::exec::{FnTool, ToolExecutor, ToolOutput, ToolRegistry};
use ferroloop::tokens::ContextBudget;
use futures::StreamExt;
use serde_json::{Value, json};

/// Tools: `read` (safe, echoes the path), `write` (unsafe), `sleep` (safe, sleeps `ms`).
fn executor(log: Arc<Mutex<Vec<String>>>) -> Arc<ToolExecutor> {
    let mut tools = ToolRegistry::new();
    let read_log = log.clone();
    tools
        .register(
            FnTool::new("read", move |input: Value, _ctx| {
                let log = read_log.clone();
                async move {
                    log.lock().unwrap().push(format!("read {}", input["path"]));
                    Ok(ToolOutput::text(format!(
                        "contents of {}",
                        input["path"].as_str().unwrap_or("?")
                    )))
                }
            })
            .describe("Read a file")
            .concurrency_safe(true),
        )
        .unwrap();
    let write_log = log.clone();
    tools
        .register(FnTool::new("write", move |input: Value, _ctx| {
            let log = write_log.clone();
            async move {
                log.lock().unwrap().push(format!("write {}", input["path"]));
                Ok(ToolOutput::text("written"))
            }
        }))
        .unwrap();
    let sleep_log = log;
    tools
        .register(
            FnTool::new("sleep", move |input: Value, ctx| {
                let log = sleep_log.clone();
                async move {
                    log.lock().unwrap().push("sleep start".into());
                    let ms = input["ms"].as_u64().unwrap_or(10);
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(ms)) => {}
                        () = ctx.cancelled() => {
                            log.lock().unwrap().push("sleep cancelled".into());
                        }
                    }
                    Ok(ToolOutput::text("slept"))
                }
            })
            .concurrency_safe(true),
        )
        .unwrap();
    Arc::new(ToolExecutor::new(tools))
}

async fn collect(agent: &Agent, prompt: &str) -> Vec<AgentEvent> {
    agent.run(prompt).collect().await
}

/// A history the tests compact: an exchange, then `prompt` as the latest user message.
fn long_conversation(prompt: &str) -> Vec<Value> {
    vec![
        json!({"role": "user", "content": "a long conversation"}),
        json!({"role": "assistant", "content": [{"type": "text", "text": "went on and on"}]}),
        json!({"role": "user", "content": prompt}),
    ]
}

/// The events of a default agent's run of [`long_conversation`] with `model`.
async fn run_long_conversation(model: Arc<dyn Model>, prompt: &str) -> Vec<AgentEvent> {
    let agent = Agent::new(AgentConfig::new("m"), model, executor(Default::default()));
    agent
        .run_messages(long_conversation(prompt))
        .collect()
        .await
}

/// The numbers of a run's `turn_start` events, in order (a turn asked again repeats its own).
fn turn_starts(events: &[AgentEvent]) -> Vec<u32> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::TurnStart { turn, .. } => Some(*turn),
            _ => None,
        })
        .collect()
}

fn stop(events: &[AgentEvent]) -> (StopReason, Vec<Value>, u32) {
    match events.last() {
        Some(AgentEvent::Stop {
            reason,
            messages,
            turns,
            ..
        }) => (*reason, messages.clone(), *turns),
        other => panic!("the last event is not Stop: {other:?}"),
    }
}

#[tokio::test]
async fn multi_turn_with_parallel_and_exclusive_tools() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let (model, requests) = ScriptedModel::new(move |n, request| match n {
        0 => reply(
            request,
            vec![
                text("Reading two files, then writing."),
                call("t1", "read", json!({"path": "a"})),
                call("t2", "read", json!({"path": "b"})),
                call("t3", "write", json!({"path": "c"})),
                call("t4", "read", json!({"path": "d"})),
            ],
            "tool_use",
        ),
        _ => reply(request, vec![text("Done.")], "end_turn"),
    })
    .recorded();
    let mut config = AgentConfig::new("claude-sonnet-4-5");
    config.system = Some("You are terse.".into());
    let agent = Agent::new(config, Arc::new(model), executor(log.clone()));
    let events = collect(&agent, "do it").await;
    let (reason, messages, turns) = stop(&events);
    assert_eq!(reason, StopReason::EndTurn);
    assert_eq!(turns, 2);
    assert!(check_tool_pairing(&messages).is_ok());
    // Results joined history in request order as one user message.
    let ids: Vec<&str> = messages[2]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["tool_use_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["t1", "t2", "t3", "t4"]);
    assert_eq!(messages[2]["content"][0]["content"], "contents of a");
    // The write ran after both reads and before the read queued behind it.
    let log = log.lock().unwrap().clone();
    let write_at = log.iter().position(|l| l.starts_with("write")).unwrap();
    assert!(
        log[..write_at]
            .iter()
            .filter(|l| l.starts_with("read"))
            .count()
            == 2
    );
    assert_eq!(log.last().unwrap(), "read \"d\"");
    // Streaming text, tool events and usage were reported.
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(text.contains("Reading two files") && text.ends_with("Done."));
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, AgentEvent::ToolFinished { .. }))
            .count(),
        4
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, AgentEvent::Usage { .. }))
            .count(),
        2
    );
    // Requests: tools sorted by name, with cache breakpoints; the system prompt cached.
    let requests = requests.lock().unwrap();
    let names: Vec<&str> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["read", "sleep", "write"]);
    assert_eq!(
        requests[0]["tools"][2]["cache_control"]["type"],
        "ephemeral"
    );
    assert_eq!(requests[0]["tools"][0]["description"], "Read a file");
    assert_eq!(
        requests[1]["system"][0]["cache_control"]["type"],
        "ephemeral"
    );
    assert_eq!(requests[0]["tools"], requests[1]["tools"]);
}

#[tokio::test]
async fn max_tokens_in_text_is_continued() {
    let model = ScriptedModel::new(|n, request| match n {
        0 => reply(
            request,
            vec![text("The first half of a long")],
            "max_tokens",
        ),
        _ => {
            let last = &request["messages"].as_array().unwrap().last().unwrap()["content"];
            assert!(last.to_string().contains("Resume directly"), "{last}");
            reply(request, vec![text(" answer, finished.")], "end_turn")
        }
    });
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(model),
        executor(Default::default()),
    );
    let events = collect(&agent, "write a lot").await;
    let (reason, messages, turns) = stop(&events);
    assert_eq!((reason, turns), (StopReason::EndTurn, 2));
    assert_eq!(messages.len(), 4);
    assert!(check_tool_pairing(&messages).is_ok());
}

#[tokio::test]
async fn max_tokens_continuations_are_bounded() {
    let model = ScriptedModel::new(|_, request| reply(request, vec![text("more")], "max_tokens"));
    let mut config = AgentConfig::new("m");
    config.max_continuations = 2;
    let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
    let (reason, messages, turns) = stop(&collect(&agent, "go").await);
    assert_eq!((reason, turns), (StopReason::MaxTokens, 3));
    assert!(check_tool_pairing(&messages).is_ok());
}

#[tokio::test]
async fn max_tokens_mid_tool_input_cancels_early_calls_and_keeps_history_valid() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let model = ScriptedModel::new(|n, request| match n {
        0 => {
            // A sealed safe call, then a second call cut by max_tokens.
            let message = scripted_message(
                request,
                vec![text("Reading."), call("t1", "sleep", json!({"ms": 5000}))],
                "max_tokens",
            );
            let mut sse = anthropic_sse(&message, 7);
            let cut = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t2\",\"name\":\"read\",\"input\":{}}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"pa\"}}\n\nevent: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n";
            let at = sse.find("event: message_delta").unwrap();
            sse.insert_str(at, cut);
            Ok(Bytes::from(sse))
        }
        _ => reply(request, vec![text("Finished.")], "end_turn"),
    });
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(model),
        executor(log.clone()),
    );
    let events = tokio::time::timeout(Duration::from_secs(20), collect(&agent, "go"))
        .await
        .unwrap();
    let (reason, messages, _) = stop(&events);
    assert_eq!(reason, StopReason::EndTurn);
    assert!(check_tool_pairing(&messages).is_ok(), "{messages:#?}");
    assert!(
        !serde_json::to_string(&messages)
            .unwrap()
            .contains("tool_use")
    );
    assert!(events.iter().any(|e| matches!(e, AgentEvent::ToolFinished { tool_use_id, is_error: true, .. } if tool_use_id == "t1")));
}

/// A response cut by the output limit inside a call (a big `write`): the model is told the
/// call was not run. Before, the continuation said nothing of it (the model resumed as if it
/// had run), and a response with nothing before the call was asked again unchanged, to be cut
/// the same way until the continuations ran out.
#[tokio::test]
async fn a_call_cut_by_max_tokens_is_reported_to_the_model_as_not_run() {
    for with_text in [true, false] {
        let (model, requests) = ScriptedModel::new(move |n, request| match n {
            0 => {
                let content = if with_text { vec![text("Writing it.")] } else { vec![] };
                let message = scripted_message(request, content, "max_tokens");
                let mut sse = anthropic_sse(&message, 7);
                let index = usize::from(with_text);
                let cut = format!(
                    "event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":{index},\"content_block\":{{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"write\",\"input\":{{}}}}}}\n\n\
                     event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":{index},\"delta\":{{\"type\":\"input_json_delta\",\"partial_json\":\"{{\\\"path\\\": \\\"big\"}}}}\n\n\
                     event: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":{index}}}\n\n"
                );
                let at = sse.find("event: message_delta").unwrap();
                sse.insert_str(at, &cut);
                Ok(Bytes::from(sse))
            }
            _ => reply(request, vec![text("Done.")], "end_turn"),
        })
        .recorded();
        let log = Arc::new(Mutex::new(Vec::new()));
        let agent = Agent::new(
            AgentConfig::new("m"),
            Arc::new(model),
            executor(log.clone()),
        );
        let events = collect(&agent, "write a big file").await;
        let (reason, messages, turns) = stop(&events);
        assert_eq!((reason, turns), (StopReason::EndTurn, 2), "{with_text}");
        assert!(check_tool_pairing(&messages).is_ok());
        assert!(log.lock().unwrap().is_empty(), "the cut call ran");
        let requests = requests.lock().unwrap();
        let last = requests[1]["messages"].as_array().unwrap().last().unwrap();
        assert_eq!(last["role"], "user");
        let said = last["content"].to_string();
        assert!(
            said.contains("were discarded without results") && said.contains("(write)"),
            "{with_text}: {said}"
        );
        assert_ne!(
            requests[0]["messages"], requests[1]["messages"],
            "{with_text}"
        );
        if with_text {
            assert!(said.contains("Resume directly"), "{said}");
        } else {
            // The prompt stays; the note follows it.
            assert!(said.contains("write a big file"), "{said}");
        }
    }
}

/// A tool's `tool_finished` status uses the names the executor's own events use (`timed_out`),
/// not a lowercased Rust variant (`timedout`, before).
#[tokio::test]
async fn a_timed_out_call_is_reported_as_timed_out() {
    let mut tools = ToolRegistry::new();
    tools
        .register(
            FnTool::new("slow", |_input: Value, ctx| async move {
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(5)) => {}
                    () = ctx.cancelled() => {}
                }
                Ok(ToolOutput::text("late"))
            })
            .with_timeout(Duration::from_millis(20)),
        )
        .unwrap();
    let model = ScriptedModel::new(|n, request| match n {
        0 => reply(request, vec![call("t1", "slow", json!({}))], "tool_use"),
        _ => reply(request, vec![text("Done.")], "end_turn"),
    });
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(model),
        Arc::new(ToolExecutor::new(tools)),
    );
    let events = tokio::time::timeout(Duration::from_secs(20), collect(&agent, "go"))
        .await
        .unwrap();
    let statuses: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolFinished { status, .. } => Some(status.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(statuses, ["timed_out"]);
}

/// The provider's refusal of a prompt as too long for the window.
fn too_long() -> ModelError {
    ModelError::prompt_too_long("prompt is too long: 210000 tokens > 200000 maximum")
}

#[tokio::test]
async fn prompt_too_long_compacts_once_and_retries() {
    let model = ScriptedModel::new(|n, request| match n {
        0 => Err(too_long()),
        1 => {
            assert!(request.to_string().contains("Summarize this conversation"));
            reply(request, vec![text("The user wants a haiku.")], "end_turn")
        }
        _ => {
            assert!(
                request["messages"][0]
                    .to_string()
                    .contains("The user wants a haiku.")
            );
            reply(request, vec![text("Autumn moon")], "end_turn")
        }
    });
    let events = run_long_conversation(Arc::new(model), "write a haiku").await;
    assert!(events.iter().any(|e| matches!(
        e,
        AgentEvent::Context(ContextAction::Compaction {
            trigger: "reactive",
            ..
        })
    )));
    let (reason, messages, _) = stop(&events);
    common::assert_usage_events_add_up(&events);
    assert_eq!(reason, StopReason::EndTurn);
    assert!(check_tool_pairing(&messages).is_ok());
}

/// A turn refused as too long is asked again after the reactive compaction: the same turn, as
/// after a raised output limit or a refused request field. It took a new number and spent one
/// of `max_turns`: with `max_turns: 1` the run stopped with `max_turns` before asking it again,
/// and a run that got one answer reported two turns.
#[tokio::test]
async fn a_turn_asked_again_after_a_reactive_compaction_is_the_same_turn() {
    let model = ScriptedModel::new(|n, request| match n {
        0 => Err(too_long()),
        1 => reply(request, vec![text("The user wants a haiku.")], "end_turn"),
        _ => reply(request, vec![text("Autumn moon")], "end_turn"),
    });
    let mut config = AgentConfig::new("m");
    config.limits.max_turns = 1;
    let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
    let history = long_conversation("write a haiku");
    let events: Vec<AgentEvent> = agent.run_messages(history).collect().await;
    let (reason, messages, turns) = stop(&events);
    assert_eq!((reason, turns), (StopReason::EndTurn, 1), "{events:#?}");
    assert!(messages.last().unwrap().to_string().contains("Autumn moon"));
    let starts = turn_starts(&events);
    assert_eq!(starts, [1, 1]);
    common::assert_usage_events_add_up(&events);
}

#[tokio::test]
async fn a_lone_prompt_called_too_long_stops_without_a_summary_call() {
    // Compaction keeps the latest prompt whole, so a summary of a lone prompt only makes the
    // request bigger: the provider's refusal ends the run after the one request.
    let model = Arc::new(ScriptedModel::new(|_, _| {
        Err(ModelError::prompt_too_long(
            "prompt is too long: 250000 tokens > 200000 maximum",
        ))
    }));
    let agent = Agent::new(
        AgentConfig::new("m"),
        model.clone(),
        executor(Default::default()),
    );
    let events = collect(&agent, "a prompt bigger than the window").await;
    let (reason, messages, _) = stop(&events);
    assert_eq!(reason, StopReason::PromptTooLong);
    assert_eq!(messages.len(), 1);
    assert_eq!(model.calls(), 1, "{events:#?}");
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, AgentEvent::Context(ContextAction::Compaction { .. })))
    );
}

#[tokio::test]
async fn a_failed_reactive_summary_stops_instead_of_resending_the_same_request() {
    let model = Arc::new(ScriptedModel::new(|n, _| match n {
        1 => Err(ModelError::other("summary call failed")),
        _ => Err(ModelError::prompt_too_long("prompt is too long")),
    }));
    let events = run_long_conversation(model.clone(), "go on").await;
    let (reason, messages, _) = stop(&events);
    common::assert_usage_events_add_up(&events);
    assert_eq!(reason, StopReason::PromptTooLong);
    assert_eq!(messages.len(), 3);
    // The request, then the summary call that failed; the unchanged request is not sent again.
    assert_eq!(model.calls(), 2, "{events:#?}");
}

/// The summary call of a reactive compaction that broke off (an overload announced after it
/// started, or a stream cut short) is asked again once, as a turn is: before, the run ended
/// with `prompt_too_long` although nothing was wrong with the history. A second break still
/// ends it.
#[tokio::test]
async fn a_reactive_summary_that_broke_off_is_asked_again_once() {
    let broken = |request: &Value, overloaded: bool| {
        let message = scripted_message(request, vec![text("Half a summ")], "end_turn");
        let sse = anthropic_sse(&message, 7);
        let cut = sse.find("event: content_block_stop").unwrap();
        let tail = if overloaded { OVERLOADED_EVENT } else { "" };
        Ok(Bytes::from(format!("{}{tail}", &sse[..cut])))
    };
    // (how the summary breaks, how many times, stop reason, calls made)
    for (overloaded, breaks, expected, calls) in [
        (true, 1, StopReason::EndTurn, 4),
        (false, 1, StopReason::EndTurn, 4),
        (true, 2, StopReason::PromptTooLong, 3),
    ] {
        let model = Arc::new(ScriptedModel::new(move |n, request| match n {
            0 => Err(ModelError::prompt_too_long("prompt is too long")),
            n if n <= breaks => broken(request, overloaded),
            n if n == breaks + 1 => reply(request, vec![text("The summary.")], "end_turn"),
            _ => reply(request, vec![text("Done.")], "end_turn"),
        }));
        let events = run_long_conversation(model.clone(), "go on").await;
        let case = format!("overloaded {overloaded}, {breaks} breaks");
        common::assert_usage_events_add_up(&events);
        let (reason, messages, _) = stop(&events);
        assert_eq!(reason, expected, "{case}: {events:#?}");
        assert_eq!(model.calls(), calls, "{case}");
        if expected == StopReason::EndTurn {
            let history = serde_json::to_string(&messages).unwrap();
            assert!(
                history.contains("The summary.") && !history.contains("Half a summ"),
                "{case}"
            );
        }
    }
}

#[tokio::test]
async fn prompt_too_long_twice_stops() {
    let model = ScriptedModel::new(|n, request| match n {
        1 => reply(request, vec![text("summary")], "end_turn"),
        _ => Err(ModelError::prompt_too_long("prompt is too long")),
    });
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(model),
        executor(Default::default()),
    );
    let (reason, messages, _) = stop(&collect(&agent, "go").await);
    assert_eq!(reason, StopReason::PromptTooLong);
    assert!(check_tool_pairing(&messages).is_ok());
}

/// A refusal for length hours into a run is answered by a compaction even when an earlier one
/// was: before, the second refusal of a run ended it with `prompt_too_long`, whatever had
/// happened since. Two refusals with no response between still stop it (above).
#[tokio::test]
async fn a_later_prompt_too_long_is_compacted_again() {
    let too_long = || Err(ModelError::prompt_too_long("prompt is too long"));
    let model = Arc::new(ScriptedModel::new(move |n, request| match n {
        0 | 3 => too_long(),
        1 | 4 => reply(request, vec![text("summary")], "end_turn"),
        2 => reply(
            request,
            vec![call("t1", "read", json!({"path": "a"}))],
            "tool_use",
        ),
        _ => reply(request, vec![text("done")], "end_turn"),
    }));
    let events = run_long_conversation(model.clone(), "go on").await;
    let (reason, messages, _) = stop(&events);
    common::assert_usage_events_add_up(&events);
    assert_eq!(reason, StopReason::EndTurn, "{events:#?}");
    assert!(check_tool_pairing(&messages).is_ok());
    let compactions = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                AgentEvent::Context(ContextAction::Compaction {
                    trigger: "reactive",
                    ..
                })
            )
        })
        .count();
    assert_eq!(compactions, 2);
    assert_eq!(model.calls(), 6);
}

/// A budget spent before the first call (0, as a host hands a run the rest of a shared budget)
/// makes no call: before, the first one was made whatever the budget.
#[tokio::test]
async fn a_budget_of_zero_makes_no_model_call() {
    for (tokens, cost) in [(Some(0), None), (None, Some(0.0))] {
        let model = Arc::new(ScriptedModel::new(|_, request| {
            reply(request, vec![text("hi")], "end_turn")
        }));
        let mut config = AgentConfig::new("m");
        config.limits.token_budget = tokens;
        config.limits.cost_budget = cost;
        config.limits.prices.insert("m".into(), Default::default());
        let agent = Agent::new(config, model.clone(), executor(Default::default()));
        let events = collect(&agent, "go").await;
        let (reason, _, turns) = stop(&events);
        assert_eq!(
            (reason, turns),
            (StopReason::Budget, 0),
            "{tokens:?} {cost:?}"
        );
        assert_eq!(model.calls(), 0);
        let (_, _, code) = stop_code(&events);
        assert_eq!(
            code,
            Some(if tokens.is_some() {
                "token_budget"
            } else {
                "cost_budget"
            })
        );
    }
}

#[tokio::test]
async fn a_truncated_stream_is_discarded_and_the_turn_retried_once() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let model = ScriptedModel::new(|n, request| {
        let message = scripted_message(
            request,
            vec![text("Looking."), call("t1", "read", json!({"path": "x"}))],
            "tool_use",
        );
        match n {
            0 => {
                // Disconnect mid-stream: everything after the tool call's stop is lost.
                let sse = anthropic_sse(&message, 7);
                let cut = sse.find("event: message_delta").unwrap();
                Ok(Bytes::from(sse[..cut].to_owned()))
            }
            1 => Ok(Bytes::from(anthropic_sse(&message, 7))),
            _ => reply(request, vec![text("ok")], "end_turn"),
        }
    });
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(model),
        executor(log.clone()),
    );
    let events = collect(&agent, "go").await;
    let (reason, messages, turns) = stop(&events);
    common::assert_usage_events_add_up(&events);
    assert_eq!((reason, turns), (StopReason::EndTurn, 2));
    assert!(check_tool_pairing(&messages).is_ok());
    // The retried turn's call answered once in history.
    assert_eq!(
        messages
            .iter()
            .filter(|m| m.to_string().contains("\"tool_result\""))
            .count(),
        1
    );
}

/// A failure announced after the response started (an overload, a server error, a rate limit)
/// is what a broken stream is: the partial turn is discarded (its early calls cancelled) and
/// the turn asked again once, under the same number, when no fallback model is configured.
/// The same failures before anything streamed come after the client's own retries, and a
/// lasting one (an invalid request) would come again: the run stops on those without another
/// call. Before, an overload or an error event mid-stream ended the run at once.
#[tokio::test]
async fn a_transient_failure_mid_stream_asks_the_turn_again_once() {
    const RATE_LIMITED: &str = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"Slow down\"}}\n\n";
    const INVALID: &str = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"Bad\"}}\n\n";
    // (error event after a partial turn, or None for an overload before any event; stop
    // reason; calls made; stop code)
    let cases = [
        (Some(OVERLOADED_EVENT), StopReason::EndTurn, 3, None),
        (Some(RATE_LIMITED), StopReason::EndTurn, 3, None),
        (Some(INVALID), StopReason::Error, 1, Some("invalid_request")),
        (None, StopReason::Error, 1, Some("overloaded")),
    ];
    for (error, expected, calls, code) in cases {
        let log = Arc::new(Mutex::new(Vec::new()));
        let model = ScriptedModel::new(move |n, request| match n {
            0 => {
                let Some(error) = error else {
                    return Err(ModelError::overloaded("HTTP 529 after 10 retries"));
                };
                Ok(partial_turn_then(request, error))
            }
            1 => reply(
                request,
                vec![text("Again."), call("t1", "read", json!({"path": "a"}))],
                "tool_use",
            ),
            _ => reply(request, vec![text("Done.")], "end_turn"),
        });
        let model = Arc::new(model);
        let agent = Agent::new(AgentConfig::new("m"), model.clone(), executor(log.clone()));
        let events = tokio::time::timeout(Duration::from_secs(20), collect(&agent, "go"))
            .await
            .unwrap();
        let case = format!("{error:?}");
        let (reason, messages, turns) = stop(&events);
        let (_, _, stop_code) = stop_code(&events);
        assert_eq!((reason, stop_code), (expected, code), "{case}: {events:#?}");
        assert_eq!(model.calls(), calls, "{case}");
        common::assert_usage_events_add_up(&events);
        common::assert_tool_events_add_up(&events);
        assert!(
            check_tool_pairing(&messages).is_ok(),
            "{case}: {messages:#?}"
        );
        if expected == StopReason::EndTurn {
            assert_eq!(turns, 2, "{case}");
            // The turn asked again kept its number.
            let starts = turn_starts(&events);
            assert_eq!(starts, [1, 1, 2], "{case}");
            let history = serde_json::to_string(&messages).unwrap();
            assert!(
                !history.contains("Partial answer") && !history.contains("t_sleep"),
                "{case}"
            );
            // The eagerly started call was cancelled and reported; the unsealed one never ran.
            assert!(events.iter().any(|e| matches!(
                e,
                AgentEvent::ToolFinished { tool_use_id, is_error: true, .. } if tool_use_id == "t_sleep"
            )), "{case}");
            assert!(
                !log.lock().unwrap().iter().any(|l| l.contains("never")),
                "{case}"
            );
        }
    }
}

#[tokio::test]
async fn abort_during_tool_execution_leaves_valid_history() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let model = ScriptedModel::new(|_, request| {
        reply(
            request,
            vec![
                call("t1", "sleep", json!({"ms": 60_000})),
                call("t2", "read", json!({"path": "p"})),
            ],
            "tool_use",
        )
    });
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(model),
        executor(log.clone()),
    );
    let mut run = agent.run("go");
    let mut events = Vec::new();
    while let Some(event) = tokio::time::timeout(Duration::from_secs(20), run.next())
        .await
        .unwrap()
    {
        if matches!(&event, AgentEvent::ToolStarted { name, .. } if name == "sleep") {
            run.cancel();
        }
        events.push(event);
    }
    let (reason, messages, _) = stop(&events);
    assert_eq!(reason, StopReason::Aborted);
    assert!(check_tool_pairing(&messages).is_ok(), "{messages:#?}");
    assert!(log.lock().unwrap().contains(&"sleep cancelled".to_owned()));
    // Either the response completed (its calls are answered, the cancelled one as an error) or
    // the cancel came while it streamed (nothing of it entered history).
    let last = messages.last().unwrap();
    if last.to_string().contains("tool_result") {
        assert_eq!(last["content"][0]["is_error"], true);
    } else {
        assert_eq!(messages.len(), 1);
    }
}

/// Cancels the run (its token, set once the run exists) as the response completes: the cancel
/// lands after the message arrived and before its calls are settled.
struct CancelOnCompletion {
    inner: ScriptedModel,
    run_token: Arc<std::sync::OnceLock<ferroloop::exec::CancellationToken>>,
}

impl Model for CancelOnCompletion {
    fn stream(&self, request: Value) -> ModelStream {
        let token = self.run_token.clone();
        Box::pin(self.inner.stream(request).inspect(move |event| {
            if matches!(event, ModelEvent::Completed { .. }) {
                token.get().expect("the run's token is set").cancel();
            }
        }))
    }
}

/// A run cancelled once the response had arrived keeps the response, its calls answered as
/// cancelled. Their results said "the response was discarded and will be retried": the
/// response is in the history the host continues from, and nothing is asked again.
#[tokio::test]
async fn a_run_cancelled_as_its_response_completes_answers_its_calls_as_cancelled() {
    let run_token = Arc::new(std::sync::OnceLock::new());
    let model = CancelOnCompletion {
        inner: ScriptedModel::new(|_, request| {
            reply(
                request,
                vec![
                    call("t1", "sleep", json!({"ms": 60_000})),
                    call("t2", "write", json!({"path": "p"})),
                ],
                "tool_use",
            )
        }),
        run_token: run_token.clone(),
    };
    let log = Arc::new(Mutex::new(Vec::new()));
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(model),
        executor(log.clone()),
    );
    let run = agent.run("go");
    run_token
        .set(run.cancellation_token().clone())
        .expect("set once");
    let events: Vec<AgentEvent> = tokio::time::timeout(Duration::from_secs(20), run.collect())
        .await
        .expect("the run hung");
    let (reason, messages, _) = stop(&events);
    assert_eq!(reason, StopReason::Aborted);
    assert!(check_tool_pairing(&messages).is_ok(), "{messages:#?}");
    let results = &messages.last().unwrap()["content"];
    assert_eq!(
        results[0]["content"], "Tool 'sleep' was cancelled: the turn was cancelled",
        "{messages:#?}"
    );
    assert_eq!(
        results[1]["content"], "Tool 'write' was not run: the turn was cancelled",
        "{messages:#?}"
    );
    assert!(!log.lock().unwrap().contains(&"write \"p\"".to_owned()));
}

#[tokio::test]
async fn microcompact_clears_old_results_when_context_runs_low() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let model = ScriptedModel::new(move |n, request| {
        counter.fetch_add(1, Ordering::Relaxed);
        if n < 8 {
            // A run of one letter is estimated near its exact count (~0.35 tokens per byte for
            // `claude`): 8,000 bytes per call pass the warning threshold within 8 turns.
            reply(
                request,
                vec![call(
                    &format!("t{n}"),
                    "read",
                    json!({"path": "x".repeat(8000)}),
                )],
                "tool_use",
            )
        } else {
            reply(request, vec![text("done")], "end_turn")
        }
    });
    let mut config = AgentConfig::new("m");
    // A tiny window so the warning threshold is passed after a few turns.
    config.budget = ContextBudget::new(60_000, 4_000);
    let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
    let events = collect(&agent, "go").await;
    assert!(
        events.iter().any(|e| matches!(e, AgentEvent::Context(ContextAction::Microcompact { cleared, .. }) if *cleared > 0)),
        "no microcompact happened"
    );
    let (_, messages, _) = stop(&events);
    assert!(
        messages
            .iter()
            .any(|m| m.to_string().contains(CLEARED_TOOL_RESULT))
    );
    assert!(check_tool_pairing(&messages).is_ok());
}

#[tokio::test]
async fn token_budget_and_max_turns_stop_the_run() {
    let looping = || {
        ScriptedModel::new(|n, request| {
            reply(
                request,
                vec![call(&format!("t{n}"), "read", json!({"path": "a"}))],
                "tool_use",
            )
        })
    };
    let mut config = AgentConfig::new("m");
    config.limits.max_turns = 3;
    let agent = Agent::new(config, Arc::new(looping()), executor(Default::default()));
    let (reason, messages, turns) = stop(&collect(&agent, "go").await);
    assert_eq!((reason, turns), (StopReason::MaxTurns, 3));
    assert!(check_tool_pairing(&messages).is_ok());

    let mut config = AgentConfig::new("m");
    config.limits.token_budget = Some(1);
    let agent = Agent::new(config, Arc::new(looping()), executor(Default::default()));
    let (reason, messages, turns) = stop(&collect(&agent, "go").await);
    assert_eq!((reason, turns), (StopReason::Budget, 1));
    assert!(check_tool_pairing(&messages).is_ok());

    // A last call that ends the run itself (end_turn, stop_sequence, refusal) is no budget stop
    // however much it spent: the run was complete, not cut short (it reported `budget` and
    // "token budget of 1 reached").
    for (ending, expected) in [
        ("end_turn", StopReason::EndTurn),
        ("stop_sequence", StopReason::StopSequence),
    ] {
        let model =
            ScriptedModel::new(move |_, request| reply(request, vec![text("done")], ending));
        let mut config = AgentConfig::new("m");
        config.limits.token_budget = Some(1);
        let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
        let events = collect(&agent, "go").await;
        let (reason, _, turns) = stop(&events);
        assert_eq!((reason, turns), (expected, 1), "{ending}");
        match events.last().unwrap() {
            AgentEvent::Stop { error, .. } => assert_eq!(*error, None, "{ending}"),
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn a_provider_error_stops_with_error() {
    let model = ScriptedModel::new(|_, _| {
        Ok(Bytes::from_static(b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"authentication_error\",\"message\":\"bad key\"}}\n\n"))
    });
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(model),
        executor(Default::default()),
    );
    let events = collect(&agent, "go").await;
    match events.last().unwrap() {
        AgentEvent::Stop { reason, error, .. } => {
            assert_eq!(*reason, StopReason::Error);
            assert!(error.as_deref().unwrap().contains("bad key"));
        }
        other => panic!("{other:?}"),
    }
}

/// A context budget that would block before it compacts (auto-compact buffer below the
/// blocking buffer, set on the public field) stops the run before any request, as other
/// configuration errors do; the loop used to run with it.
#[tokio::test]
async fn a_budget_that_blocks_before_compacting_stops_the_run_before_any_request() {
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = requests.clone();
    let model = ScriptedModel::new(move |_, request| {
        counted.fetch_add(1, Ordering::SeqCst);
        reply(request, vec![text("Done.")], "end_turn")
    });
    let mut config = AgentConfig::new("m");
    config.budget.autocompact_buffer = 1_000;
    config.budget.blocking_buffer = 5_000;
    let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
    let (reason, error, code) = stop_code(&collect(&agent, "go").await);
    assert_eq!(
        (reason, code),
        (StopReason::Error, Some("invalid_configuration"))
    );
    let error = error.unwrap();
    assert!(error.contains("autocompact_buffer (1000)"), "{error}");
    assert_eq!(requests.load(Ordering::SeqCst), 0);
}

/// A conversation handed to `run_messages` is checked before any request: an invalid one ends
/// the run at once with an error saying what is wrong (before, it was sent as it was, and a
/// tool_result answering nothing tripped the loop's history assertion at the end of the run).
#[tokio::test]
async fn an_invalid_conversation_stops_the_run_before_any_request() {
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = requests.clone();
    let model = ScriptedModel::new(move |_, request| {
        counted.fetch_add(1, Ordering::SeqCst);
        reply(request, vec![text("Done.")], "end_turn")
    });
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(model),
        executor(Default::default()),
    );
    let user = |content: Value| json!({"role": "user", "content": content});
    let cases: Vec<(Vec<Value>, &str)> = vec![
        (vec![], "empty"),
        (vec![json!(5)], "not an object"),
        (vec![json!({"content": "hi"})], "no role"),
        (vec![json!({"role": "system", "content": "hi"})], "role"),
        (
            vec![json!({"role": "user", "content": 7})],
            "content must be",
        ),
        (vec![user(json!([{"text": "no type"}]))], "has no type"),
        (
            vec![
                user(json!("hi")),
                json!({"role": "assistant", "content": "prefill"}),
            ],
            "last message must be a user message",
        ),
        (
            vec![user(
                json!([{"type": "tool_result", "tool_use_id": "t9", "content": "x"}]),
            )],
            "answers no tool_use",
        ),
        (
            vec![
                user(json!("go")),
                json!({"role": "assistant", "content": [call("t1", "read", json!({"path": "a"}))]}),
                user(json!("no results")),
            ],
            "has no tool_result",
        ),
    ];
    for (messages, expected) in cases {
        let events: Vec<AgentEvent> = agent.run_messages(messages.clone()).collect().await;
        assert_eq!(events.len(), 1, "{events:?}");
        match &events[0] {
            AgentEvent::Stop {
                reason,
                error,
                messages: kept,
                turns,
                ..
            } => {
                assert_eq!(*reason, StopReason::Error);
                let error = error.as_deref().unwrap();
                assert!(error.starts_with("invalid conversation: "), "{error}");
                assert!(error.contains(expected), "{error} (expected {expected:?})");
                assert_eq!(kept, &messages);
                assert_eq!(*turns, 0);
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(requests.load(Ordering::SeqCst), 0);

    // A valid continuation (tool calls answered, a user message last) still runs.
    let valid = vec![
        user(json!("go")),
        json!({"role": "assistant", "content": [text("Reading."), call("t1", "read", json!({"path": "a"}))]}),
        user(json!([{"type": "tool_result", "tool_use_id": "t1", "content": "contents"}])),
    ];
    let events: Vec<AgentEvent> = agent.run_messages(valid).collect().await;
    let (reason, messages, turns) = stop(&events);
    assert_eq!((reason, turns), (StopReason::EndTurn, 1));
    assert!(check_tool_pairing(&messages).is_ok());
    assert_eq!(requests.load(Ordering::SeqCst), 1);
}

/// The replay model's scripted conversation with the real built-in tools on a temporary
/// directory: three turns, parallel read-only calls, an answer built from the real results.
#[cfg(feature = "tools")]
#[tokio::test]
async fn replay_script_explores_a_directory_with_the_real_tools() {
    use ferroloop::agent::replay::explore_directory_script;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("README.md"),
        "# Demo project\n\nTODO: write docs\n",
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/main.rs"), "fn main() {}\n").unwrap();
    let workspace = ferroloop::tools::Workspace::new(dir.path()).unwrap();
    let mut registry = ToolRegistry::new();
    for tool in ferroloop::tools::all(&workspace) {
        registry.register(tool).unwrap();
    }
    let model = ScriptedModel::new(|_, request| {
        Ok(Bytes::from(anthropic_sse(
            &explore_directory_script(request),
            9,
        )))
    });
    let agent = Agent::new(
        AgentConfig::new("replay"),
        Arc::new(model),
        Arc::new(ToolExecutor::new(registry)),
    );
    let events = collect(&agent, "explore").await;
    let (reason, messages, turns) = stop(&events);
    assert_eq!((reason, turns), (StopReason::EndTurn, 3), "{events:#?}");
    assert!(check_tool_pairing(&messages).is_ok());
    let finished: Vec<(&str, bool)> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolFinished { name, is_error, .. } => Some((name.as_str(), *is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(finished.len(), 5, "{finished:?}");
    assert!(
        finished.iter().all(|(_, is_error)| !is_error),
        "{messages:#?}"
    );
    let answer = messages.last().unwrap().to_string();
    assert!(answer.contains("Demo project"), "{answer}");
}

const OVERLOADED_EVENT: &str = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";

/// A response whose text and eagerly started safe call (`t_sleep`) stream, then `error` (an
/// SSE error event) before its second call (`t_read`, reading `never`) is complete.
fn partial_turn_then(request: &Value, error: &str) -> Bytes {
    let message = scripted_message(
        request,
        vec![
            text("Partial answer that must not stay."),
            call("t_sleep", "sleep", json!({"ms": 60_000})),
            call("t_read", "read", json!({"path": "never"})),
        ],
        "tool_use",
    );
    let sse = anthropic_sse(&message, 7);
    let cut = sse.find("\"index\":2").unwrap();
    let cut = sse[..cut].rfind("event:").unwrap();
    Bytes::from(format!("{}{error}", &sse[..cut]))
}

fn fallback_config() -> AgentConfig {
    let mut config = AgentConfig::new("claude-primary");
    config.fallback_model = Some("claude-fallback".into());
    config
}

#[tokio::test]
async fn an_overloaded_model_falls_back_and_its_partial_turn_is_discarded() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let models = Arc::new(Mutex::new(Vec::new()));
    let seen = models.clone();
    let model = ScriptedModel::new(move |n, request| {
        seen.lock().unwrap().push(request.clone());
        match n {
            0 => Ok(partial_turn_then(request, OVERLOADED_EVENT)),
            1 => reply(
                request,
                vec![
                    text("Fallback here."),
                    call("t1", "read", json!({"path": "a"})),
                ],
                "tool_use",
            ),
            _ => reply(request, vec![text("Done.")], "end_turn"),
        }
    });
    let agent = Agent::new(fallback_config(), Arc::new(model), executor(log.clone()));
    let events = tokio::time::timeout(Duration::from_secs(20), collect(&agent, "go"))
        .await
        .unwrap();
    let (reason, messages, turns) = stop(&events);
    common::assert_usage_events_add_up(&events);
    assert_eq!((reason, turns), (StopReason::EndTurn, 2), "{events:#?}");
    assert!(check_tool_pairing(&messages).is_ok(), "{messages:#?}");
    let fallbacks: Vec<&AgentEvent> = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::ModelFallback { .. }))
        .collect();
    assert_eq!(
        fallbacks,
        [&AgentEvent::ModelFallback {
            call: UsageCall::Turn,
            from: "claude-primary".into(),
            to: "claude-fallback".into(),
            reason: "overloaded",
            error: "Overloaded".into(),
        }]
    );
    assert_eq!(
        serde_json::to_value(fallbacks[0]).unwrap(),
        json!({"type": "model_fallback", "call": "turn", "from": "claude-primary", "to": "claude-fallback", "reason": "overloaded", "error": "Overloaded"})
    );
    // The eagerly started call was cancelled and reported; the unsealed one never ran.
    assert!(events.iter().any(|e| matches!(
        e,
        AgentEvent::ToolFinished { tool_use_id, is_error: true, .. } if tool_use_id == "t_sleep"
    )));
    assert!(!log.lock().unwrap().iter().any(|l| l.contains("never")));
    // Nothing of the discarded turn reached history; the retried turn and the rest went to the
    // fallback model.
    let history = serde_json::to_string(&messages).unwrap();
    assert!(!history.contains("Partial answer") && !history.contains("t_sleep"));
    let requests = models.lock().unwrap();
    let names: Vec<&str> = requests
        .iter()
        .map(|r| r["model"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["claude-primary", "claude-fallback", "claude-fallback"]
    );
    assert_eq!(requests[0]["messages"], requests[1]["messages"]);
}

#[tokio::test]
async fn fallback_is_tried_once_and_only_when_configured() {
    let overloaded = || {
        ScriptedModel::new(|_, _| {
            Err(ModelError::overloaded(
                "HTTP 529 overloaded_error: Overloaded",
            ))
        })
    };
    let agent = Agent::new(
        fallback_config(),
        Arc::new(overloaded()),
        executor(Default::default()),
    );
    let events = collect(&agent, "go").await;
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, AgentEvent::ModelFallback { .. }))
            .count(),
        1
    );
    let AgentEvent::Stop {
        reason,
        error,
        messages,
        turns,
        ..
    } = events.last().unwrap()
    else {
        panic!("no stop")
    };
    assert_eq!((*reason, *turns), (StopReason::Error, 1));
    assert!(error.as_deref().unwrap().contains("overloaded"));
    assert!(check_tool_pairing(messages).is_ok());

    let agent = Agent::new(
        AgentConfig::new("claude-primary"),
        Arc::new(overloaded()),
        executor(Default::default()),
    );
    let events = collect(&agent, "go").await;
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, AgentEvent::ModelFallback { .. }))
    );
    assert_eq!(stop(&events).0, StopReason::Error);
}

/// The primary model answers every attempt with 529 and never completes; the fallback answers.
struct AlwaysOverloaded {
    fallback: ScriptedModel,
}

impl Model for AlwaysOverloaded {
    fn stream(&self, request: Value) -> ModelStream {
        if request["model"] == "claude-primary" {
            let retries = (2..6).map(|attempt| ModelEvent::Retry {
                attempt,
                status: Some(529),
                code: Some("overloaded"),
                overloaded: true,
                wait: Duration::from_millis(1),
            });
            return Box::pin(futures::stream::iter(retries).chain(futures::stream::pending()));
        }
        self.fallback.stream(request)
    }
}

#[tokio::test]
async fn repeated_529_retries_switch_to_the_fallback_without_waiting() {
    let model = AlwaysOverloaded {
        fallback: ScriptedModel::new(|_, request| reply(request, vec![text("Fine.")], "end_turn")),
    };
    let agent = Agent::new(
        fallback_config(),
        Arc::new(model),
        executor(Default::default()),
    );
    let events = tokio::time::timeout(Duration::from_secs(20), collect(&agent, "go"))
        .await
        .unwrap();
    let (reason, messages, turns) = stop(&events);
    common::assert_usage_events_add_up(&events);
    assert_eq!((reason, turns), (StopReason::EndTurn, 1));
    assert_eq!(messages.len(), 2);
    // Two retries were waited for; the third 529 switched models instead.
    let retries = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                AgentEvent::Retry {
                    status: Some(529),
                    ..
                }
            )
        })
        .count();
    assert_eq!(retries, 2);
    assert!(events.iter().any(|e| matches!(
        e,
        AgentEvent::ModelFallback { reason: "repeated_529", to, .. } if to == "claude-fallback"
    )));
}

fn chat_reply(request: &Value, content: Vec<Value>, stop: &str) -> Result<Bytes, ModelError> {
    Ok(Bytes::from(openai_chat_sse(
        &scripted_message(request, content, stop),
        5,
    )))
}

#[tokio::test]
async fn the_loop_speaks_openai_chat_completions() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let (model, requests) = ScriptedModel::openai_chat(move |n, request| match n {
        0 => chat_reply(
            request,
            vec![
                text("Reading two files, then writing."),
                call("call_1", "read", json!({"path": "a"})),
                call("call_2", "read", json!({"path": "b"})),
                call("call_3", "write", json!({"path": "c"})),
            ],
            "tool_use",
        ),
        1 => chat_reply(request, vec![text("Half an ans")], "max_tokens"),
        _ => chat_reply(request, vec![text("wer.")], "end_turn"),
    })
    .recorded();
    let mut config = AgentConfig::new("gpt-4o");
    config.system = Some("You are terse.".into());
    // The continuation at once, which a raised limit would come before.
    config.escalated_max_tokens = None;
    let agent = Agent::new(config, Arc::new(model), executor(log.clone()));
    let events = collect(&agent, "do it").await;
    let (reason, messages, turns) = stop(&events);
    assert_eq!((reason, turns), (StopReason::EndTurn, 3), "{events:#?}");
    assert!(check_tool_pairing(&messages).is_ok(), "{messages:#?}");
    // History stays Anthropic-shaped: parsed inputs, results in request order.
    assert_eq!(messages[1]["content"][1]["input"], json!({"path": "a"}));
    let ids: Vec<&str> = messages[2]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["tool_use_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["call_1", "call_2", "call_3"]);
    let log = log.lock().unwrap().clone();
    assert_eq!(log.last().unwrap(), "write \"c\"");
    // Usage arrived in the usage-only chunk and was translated.
    assert!(events.iter().any(
        |e| matches!(e, AgentEvent::Usage { usage, .. } if usage["input_tokens"].as_u64() > Some(0))
    ));
    // The requests were Chat Completions requests.
    let requests = requests.lock().unwrap();
    assert_eq!(
        requests[0]["messages"][0],
        json!({"role": "system", "content": "You are terse."})
    );
    assert_eq!(requests[0]["tools"][0]["type"], "function");
    assert_eq!(requests[0]["tools"][0]["function"]["name"], "read");
    assert_eq!(requests[0]["stream_options"]["include_usage"], true);
    let second: Vec<(&str, Option<&str>)> = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["role"].as_str().unwrap(), m["tool_call_id"].as_str()))
        .collect();
    assert_eq!(
        second,
        [
            ("system", None),
            ("user", None),
            ("assistant", None),
            ("tool", Some("call_1")),
            ("tool", Some("call_2")),
            ("tool", Some("call_3")),
        ]
    );
    assert_eq!(requests[1]["messages"][2]["tool_calls"][2]["id"], "call_3");
    // The max_tokens continuation went out as assistant text plus the resume prompt.
    let third = requests[2]["messages"].as_array().unwrap();
    assert_eq!(third[third.len() - 2]["content"], "Half an ans");
    assert!(
        third[third.len() - 1]["content"]
            .as_str()
            .unwrap()
            .contains("Resume directly")
    );
}

/// A call whose arguments are not valid JSON is not run but still answered (with an error), in
/// its place among the results, so history stays valid.
#[tokio::test]
async fn a_call_with_invalid_json_arguments_is_answered_with_an_error() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let model = ScriptedModel::openai_chat(|n, request| {
        if n > 0 {
            return chat_reply(request, vec![text("ok")], "end_turn");
        }
        let chunk = |delta: Value, finish: Value| {
            let data = json!({"id": "c", "object": "chat.completion.chunk", "model": "m",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
            format!("data: {data}\n\n")
        };
        let sse = [
            chunk(json!({"role": "assistant", "content": null}), Value::Null),
            chunk(
                json!({"tool_calls": [{"index": 0, "id": "call_bad", "type": "function", "function": {"name": "read", "arguments": "{\"path\": "}}]}),
                Value::Null,
            ),
            chunk(
                json!({"tool_calls": [{"index": 1, "id": "call_ok", "type": "function", "function": {"name": "read", "arguments": "{\"path\": \"b\"}"}}]}),
                Value::Null,
            ),
            chunk(json!({}), json!("tool_calls")),
            "data: [DONE]\n\n".to_owned(),
        ]
        .concat();
        Ok(Bytes::from(sse))
    });
    let agent = Agent::new(
        AgentConfig::new("gpt-4o"),
        Arc::new(model),
        executor(log.clone()),
    );
    let events = collect(&agent, "go").await;
    let (reason, messages, _) = stop(&events);
    assert_eq!(reason, StopReason::EndTurn, "{events:#?}");
    assert!(check_tool_pairing(&messages).is_ok(), "{messages:#?}");
    let results = messages[2]["content"].as_array().unwrap();
    assert_eq!(results[0]["tool_use_id"], "call_bad");
    assert_eq!(results[0]["is_error"], true);
    assert!(
        results[0]["content"]
            .as_str()
            .unwrap()
            .contains("not valid JSON")
    );
    assert_eq!(results[1]["tool_use_id"], "call_ok");
    assert_eq!(results[1]["is_error"], false);
    assert_eq!(*log.lock().unwrap(), ["read \"b\""]);
}

/// Runs an agent whose one tool, `probe`, answers "probed N" and decides its safety with
/// `safe_when`; the model calls it `calls` times (inputs `{"n": 1..}`) in one message, then ends.
/// Returns the final messages (the run ended normally, every call answered).
async fn run_probes(
    safe_when: impl Fn(&Value) -> bool + Send + Sync + 'static,
    calls: u64,
) -> Vec<Value> {
    let mut tools = ToolRegistry::new();
    tools
        .register(
            FnTool::new("probe", |input: Value, _ctx| async move {
                Ok(ToolOutput::text(format!("probed {}", input["n"])))
            })
            .safe_when(safe_when),
        )
        .unwrap();
    let model = ScriptedModel::new(move |n, request| match n {
        0 => reply(
            request,
            (1..=calls)
                .map(|i| call(&format!("p{i}"), "probe", json!({"n": i})))
                .collect(),
            "tool_use",
        ),
        _ => reply(request, vec![text("done")], "end_turn"),
    });
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(model),
        Arc::new(ToolExecutor::new(tools)),
    );
    let events = collect(&agent, "probe").await;
    let (reason, messages, turns) = stop(&events);
    assert_eq!((reason, turns), (StopReason::EndTurn, 2));
    check_tool_pairing(&messages).unwrap();
    messages
}

#[tokio::test]
async fn a_panicking_safety_predicate_makes_the_call_exclusive_instead_of_ending_the_run() {
    let messages = run_probes(|_| panic!("a bug in the safety predicate"), 2).await;
    let results: Vec<&Value> = messages
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|block| block["type"] == "tool_result")
        .collect();
    assert_eq!(results.len(), 2);
    for (result, n) in results.iter().zip(1..) {
        assert_eq!(result["content"], format!("probed {n}"));
        assert_ne!(result.get("is_error"), Some(&json!(true)));
    }
}

#[tokio::test]
async fn a_per_input_safety_predicate_is_asked_once_per_call() {
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = asked.clone();
    // Call 2 is unsafe: it and the call after it wait for the message's end (held); the first
    // starts while the message streams.
    run_probes(
        move |input| {
            counter.fetch_add(1, Ordering::SeqCst);
            input["n"].as_u64() != Some(2)
        },
        3,
    )
    .await;
    assert_eq!(asked.load(Ordering::SeqCst), 3, "one question per call");
}

/// A response that repeats a tool call id (or leaves one empty), which nothing in the
/// OpenAI-compatible protocol forbids: every call still runs and is answered with its own result,
/// under an id made unique in the recorded message, so history stays valid (before, two results
/// shared one id and the history assertion failed at the end of the run).
#[tokio::test]
async fn repeated_or_empty_call_ids_in_one_response_are_made_unique() {
    let calls = vec![
        call("t1", "read", json!({"path": "a"})),
        call("t1", "read", json!({"path": "b"})),
        call("", "read", json!({"path": "c"})),
    ];
    for provider in ["anthropic", "openai-chat"] {
        let log = Arc::new(Mutex::new(Vec::new()));
        let calls = calls.clone();
        let script = move |n: usize, request: &Value| {
            let (content, stop) = if n == 0 {
                (calls.clone(), "tool_use")
            } else {
                (vec![text("Done.")], "end_turn")
            };
            (scripted_message(request, content, stop), stop)
        };
        let model = if provider == "anthropic" {
            ScriptedModel::new(move |n, request| {
                Ok(Bytes::from(anthropic_sse(&script(n, request).0, 7)))
            })
        } else {
            ScriptedModel::openai_chat(move |n, request| {
                let (message, stop) = script(n, request);
                chat_reply(
                    request,
                    message["content"].as_array().unwrap().clone(),
                    stop,
                )
            })
        };
        let agent = Agent::new(
            AgentConfig::new("m"),
            Arc::new(model),
            executor(log.clone()),
        );
        let events = collect(&agent, "go").await;
        let (reason, messages, _) = stop(&events);
        assert_eq!(reason, StopReason::EndTurn, "{provider}: {events:#?}");
        assert!(
            check_tool_pairing(&messages).is_ok(),
            "{provider}: {messages:#?}"
        );
        let uses = messages[1]["content"].as_array().unwrap();
        let ids: Vec<&str> = uses.iter().map(|b| b["id"].as_str().unwrap()).collect();
        assert_eq!(
            ids[0], "t1",
            "{provider}: the first of a repeated id is kept"
        );
        assert!(
            ids[1] != "t1" && !ids[2].is_empty() && ids[1] != ids[2],
            "{provider}: {ids:?}"
        );
        // Each call's result answers it: its own input, under its own id.
        let results = messages[2]["content"].as_array().unwrap();
        for (use_block, result) in uses.iter().zip(results) {
            assert_eq!(result["tool_use_id"], use_block["id"], "{provider}");
            let path = use_block["input"]["path"].as_str().unwrap();
            assert_eq!(
                result["content"],
                format!("contents of {path}"),
                "{provider}: {results:#?}"
            );
        }
        assert_eq!(log.lock().unwrap().len(), 3, "{provider}");
    }
}

/// `stop_reason: "tool_use"` with no call in the message ends the run like `end_turn`: before,
/// the loop answered it with an empty user message, which the API refuses with a 400.
#[tokio::test]
async fn tool_use_stop_without_a_call_ends_the_turn() {
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = requests.clone();
    let model = ScriptedModel::new(move |n, request| {
        counted.fetch_add(1, Ordering::SeqCst);
        match n {
            0 => reply(request, vec![text("Let me think.")], "tool_use"),
            _ => reply(request, vec![text("Done.")], "end_turn"),
        }
    });
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(model),
        executor(Default::default()),
    );
    let events = collect(&agent, "go").await;
    let (reason, messages, turns) = stop(&events);
    assert_eq!((reason, turns), (StopReason::EndTurn, 1));
    assert_eq!(requests.load(Ordering::SeqCst), 1);
    assert_eq!(messages.len(), 2, "{messages:#?}");
    assert_eq!(messages[1]["content"], json!([text("Let me think.")]));
    assert!(
        events.iter().any(
            |e| matches!(e, AgentEvent::TurnEnd { stop_reason: Some(s), .. } if s == "tool_use")
        )
    );
}

fn server_search(id: &str, query: &str) -> Vec<Value> {
    vec![
        json!({"type": "server_tool_use", "id": id, "name": "web_search", "input": {"query": query}}),
        json!({"type": "web_search_tool_result", "tool_use_id": id, "content": [
            {"type": "web_search_result", "url": "https://example.com", "title": "Example", "encrypted_content": "e30=", "page_age": null}
        ]}),
    ]
}

/// `pause_turn` (a long server-side turn paused by the provider) is continued: the paused
/// response goes back as the last message, the next response's blocks join it, and no local
/// tool runs for a `server_tool_use`. Before, the run ended at the pause as if the model had
/// finished.
#[tokio::test]
async fn a_paused_turn_is_continued_and_joined_into_one_message() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let (model, requests) = ScriptedModel::new(move |n, request| match n {
        0 => {
            let mut content = vec![text("Searching.")];
            content.extend(server_search("srvtoolu_1", "rust sse"));
            reply(request, content, "pause_turn")
        }
        1 => {
            let mut content = server_search("srvtoolu_2", "rust sse parser");
            content.push(call("toolu_1", "read", json!({"path": "notes"})));
            reply(request, content, "tool_use")
        }
        _ => reply(request, vec![text("Done.")], "end_turn"),
    })
    .recorded();
    let mut config = AgentConfig::new("m");
    config.extra.insert(
        "tools".into(),
        json!([{"type": "web_search_20250305", "name": "web_search", "max_uses": 5}]),
    );
    let agent = Agent::new(config, Arc::new(model), executor(log.clone()));
    let events = collect(&agent, "look it up").await;
    let (reason, messages, turns) = stop(&events);
    assert_eq!((reason, turns), (StopReason::EndTurn, 3), "{events:#?}");
    assert!(check_tool_pairing(&messages).is_ok(), "{messages:#?}");
    let requests = requests.lock().unwrap();
    // The server tool went out after the executor's tools, which were all kept.
    let names: Vec<&str> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["read", "sleep", "write", "web_search"]);
    assert_eq!(requests[0]["tools"][3]["type"], "web_search_20250305");
    // The continuation sends the paused response back as it came, as the last message.
    let second = requests[1]["messages"].as_array().unwrap();
    assert_eq!(second.len(), 2);
    assert_eq!(second[1]["role"], "assistant");
    let kinds = |m: &Value| -> Vec<String> {
        m["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["type"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        kinds(&second[1]),
        ["text", "server_tool_use", "web_search_tool_result"]
    );
    assert_eq!(
        second[1]["content"][1]["input"],
        json!({"query": "rust sse"})
    );
    // One assistant message for the whole turn, its client call answered.
    assert_eq!(messages.len(), 4, "{messages:#?}");
    assert_eq!(
        kinds(&messages[1]),
        [
            "text",
            "server_tool_use",
            "web_search_tool_result",
            "server_tool_use",
            "web_search_tool_result",
            "tool_use"
        ]
    );
    assert_eq!(messages[2]["content"][0]["tool_use_id"], "toolu_1");
    assert_eq!(messages[2]["content"].as_array().unwrap().len(), 1);
    // Only the client call ran locally.
    assert_eq!(*log.lock().unwrap(), ["read \"notes\""]);
    assert!(events.iter().any(
        |e| matches!(e, AgentEvent::TurnEnd { stop_reason: Some(s), .. } if s == "pause_turn")
    ));
}

/// Pauses are bounded by `max_turns` like any other model call.
#[tokio::test]
async fn endless_pauses_stop_at_max_turns_with_valid_history() {
    let model = ScriptedModel::new(|_, request| {
        reply(request, server_search("srvtoolu_x", "again"), "pause_turn")
    });
    let mut config = AgentConfig::new("m");
    config.limits.max_turns = 3;
    let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
    let (reason, messages, turns) = stop(&collect(&agent, "go").await);
    assert_eq!((reason, turns), (StopReason::MaxTurns, 3));
    assert_eq!(messages.len(), 2, "{messages:#?}");
    assert_eq!(messages[1]["content"].as_array().unwrap().len(), 6);
    assert!(check_tool_pairing(&messages).is_ok());
}

/// A response that ran in a container (code execution) names it; later requests must name it
/// too to reuse it.
#[tokio::test]
async fn the_container_of_a_response_is_named_in_later_requests() {
    let (model, requests) = ScriptedModel::new(move |n, request| match n {
        0 => {
            let mut message = scripted_message(
                request,
                vec![call("toolu_1", "read", json!({"path": "a"}))],
                "tool_use",
            );
            message["container"] =
                json!({"id": "container_011", "expires_at": "2026-12-01T14:00:00Z"});
            Ok(Bytes::from(anthropic_sse(&message, 7)))
        }
        _ => reply(request, vec![text("ok")], "end_turn"),
    })
    .recorded();
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(model),
        executor(Default::default()),
    );
    let (reason, _, turns) = stop(&collect(&agent, "go").await);
    assert_eq!((reason, turns), (StopReason::EndTurn, 2));
    let requests = requests.lock().unwrap();
    assert!(requests[0].get("container").is_none());
    assert_eq!(requests[1]["container"], "container_011");
}

/// `extra` tools that are not an array are refused before any request: they used to replace
/// the executor's tool definitions in every request.
#[tokio::test]
async fn extra_tools_that_are_not_an_array_stop_the_run_before_any_request() {
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = requests.clone();
    let model = ScriptedModel::new(move |_, request| {
        counted.fetch_add(1, Ordering::SeqCst);
        reply(request, vec![text("hi")], "end_turn")
    });
    let mut config = AgentConfig::new("m");
    config
        .extra
        .insert("tools".into(), json!({"name": "web_search"}));
    let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
    let events = collect(&agent, "go").await;
    match events.last() {
        Some(AgentEvent::Stop {
            reason: StopReason::Error,
            error: Some(error),
            ..
        }) => assert!(error.contains("\"tools\" must be an array"), "{error}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(requests.load(Ordering::SeqCst), 0);
}

/// An empty model (or fallback model) name is refused before any request, whichever binding
/// built the config.
#[tokio::test]
async fn an_empty_model_name_is_refused_before_any_request() {
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = requests.clone();
    let model = Arc::new(ScriptedModel::new(move |_, request| {
        counted.fetch_add(1, Ordering::SeqCst);
        reply(request, vec![text("hi")], "end_turn")
    }));
    let agent = Agent::new(
        AgentConfig::new(" "),
        model.clone(),
        executor(Default::default()),
    );
    match collect(&agent, "go").await.last() {
        Some(AgentEvent::Stop {
            reason: StopReason::Error,
            error: Some(error),
            ..
        }) => assert_eq!(error, "invalid configuration: the model name is empty"),
        other => panic!("{other:?}"),
    }
    // An empty fallback would fail only at the switch, perhaps hours into the run.
    let mut config = AgentConfig::new("m");
    config.fallback_model = Some(String::new());
    let agent = Agent::new(config, model, executor(Default::default()));
    match collect(&agent, "go").await.last() {
        Some(AgentEvent::Stop {
            reason: StopReason::Error,
            error: Some(error),
            ..
        }) => assert_eq!(
            error,
            "invalid configuration: the fallback model name is empty"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(requests.load(Ordering::SeqCst), 0);
}

/// An empty continuation prompt would be sent as an empty user message at the first
/// `max_tokens` stop, deep into a run; the configuration is refused up front instead, unless
/// continuations are off.
#[tokio::test]
async fn an_empty_continuation_prompt_is_refused_before_any_request() {
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = requests.clone();
    let model = ScriptedModel::new(move |_, request| {
        counted.fetch_add(1, Ordering::SeqCst);
        reply(request, vec![text("hi")], "end_turn")
    });
    let model = Arc::new(model);
    let mut config = AgentConfig::new("m");
    config.continuation_prompt = " \n".into();
    let agent = Agent::new(config.clone(), model.clone(), executor(Default::default()));
    match collect(&agent, "go").await.last() {
        Some(AgentEvent::Stop {
            reason: StopReason::Error,
            error: Some(error),
            ..
        }) => assert!(
            error.starts_with("invalid configuration: the continuation prompt is empty"),
            "{error}"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(requests.load(Ordering::SeqCst), 0);

    config.max_continuations = 0;
    let agent = Agent::new(config, model, executor(Default::default()));
    let (reason, _, turns) = stop(&collect(&agent, "go").await);
    assert_eq!((reason, turns), (StopReason::EndTurn, 1));
    assert_eq!(requests.load(Ordering::SeqCst), 1);
}

/// A refusal is its own stop reason (it was reported as `end_turn`), from either provider.
#[tokio::test]
async fn a_refusal_stops_with_reason_refusal() {
    let anthropic = ScriptedModel::new(|_, request| {
        reply(request, vec![text("I can't help with that.")], "refusal")
    });
    let chat = ScriptedModel::openai_chat(|_, request| {
        chat_reply(request, vec![text("I can't help with that.")], "refusal")
    });
    for model in [anthropic, chat] {
        let agent = Agent::new(
            AgentConfig::new("m"),
            Arc::new(model),
            executor(Default::default()),
        );
        let (reason, messages, turns) = stop(&collect(&agent, "go").await);
        assert_eq!((reason, turns), (StopReason::Refusal, 1));
        assert_eq!(messages.len(), 2);
    }
}

/// `model_context_window_exceeded` cuts the output like `max_tokens`: the text is continued and
/// the response's calls are not run (the decoder reports a call cut in its input truncated:
/// `context_window_cut_mid_tool_input_is_reported_truncated`). Before, the run ended there.
#[tokio::test]
async fn a_response_cut_by_the_context_window_is_continued_like_max_tokens() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let model = ScriptedModel::new(|n, request| match n {
        0 => reply(
            request,
            vec![
                text("Writing"),
                call("toolu_1", "write", json!({"path": "x"})),
            ],
            "model_context_window_exceeded",
        ),
        _ => {
            let last = &request["messages"].as_array().unwrap().last().unwrap()["content"];
            assert!(last.to_string().contains("Resume directly"), "{last}");
            reply(request, vec![text(" done.")], "end_turn")
        }
    });
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(model),
        executor(log.clone()),
    );
    let (reason, messages, turns) = stop(&collect(&agent, "go").await);
    assert_eq!((reason, turns), (StopReason::EndTurn, 2));
    assert!(check_tool_pairing(&messages).is_ok(), "{messages:#?}");
    assert!(log.lock().unwrap().is_empty(), "the cut call ran");
    assert_eq!(messages[1]["content"], json!([text("Writing")]));
}

// --- Context management and stop reasons: compaction hook, summariser, microcompact. ---

/// Thresholds set directly: auto-compact at `autocompact` tokens, blocking at `blocking`.
fn thresholds(autocompact: u64, blocking: u64) -> ContextBudget {
    ContextBudget {
        window: blocking,
        max_output_tokens: 0,
        output_reserve_cap: 0,
        autocompact_buffer: blocking - autocompact,
        warning_buffer: 0,
        blocking_buffer: 0,
        autocompact_percent: None,
    }
}

/// A budget past its warning threshold from the start, never at auto-compact: microcompact
/// runs before every call.
fn warning_from_the_start() -> ContextBudget {
    let mut budget = thresholds(500_000, 1_000_000);
    budget.warning_buffer = 500_000;
    budget
}

/// Turn `turn`'s call reading the file `f{turn}` (call id `t{turn}`).
fn read_file(turn: usize) -> Value {
    call(
        &format!("t{turn}"),
        "read",
        json!({ "path": format!("f{turn}") }),
    )
}

/// The reply of a model that reads `path` on every turn below `until`, then answers "done".
fn read_until(request: &Value, turn: usize, until: usize, path: &str) -> Result<Bytes, ModelError> {
    if turn < until {
        let input = json!({ "path": path });
        reply(
            request,
            vec![call(&format!("t{turn}"), "read", input)],
            "tool_use",
        )
    } else {
        reply(request, vec![text("done")], "end_turn")
    }
}

/// A prompt of about `tokens` estimated tokens (one letter repeated, ~0.35 tokens per byte).
fn big_prompt(tokens: usize) -> String {
    "x".repeat(tokens * 3)
}

fn hook(
    f: impl Fn(Vec<Value>) -> Option<Vec<Value>> + Send + Sync + 'static,
) -> ferroloop::agent::CompactHook {
    let f = Arc::new(f);
    Arc::new(move |messages| {
        let f = f.clone();
        Box::pin(async move { f(messages) })
    })
}

fn stops(events: &[AgentEvent]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, AgentEvent::Stop { .. }))
        .count()
}

#[tokio::test]
async fn a_panicking_compaction_hook_ends_the_run_with_one_stop_event() {
    let model = ScriptedModel::new(|_, request| reply(request, vec![text("hi")], "end_turn"));
    let mut config = AgentConfig::new("m");
    config.budget = thresholds(1_000, 1_000_000);
    let agent = Agent::new(config, Arc::new(model), executor(Default::default()))
        .with_compaction_hook(hook(|_| panic!("the host's compactor broke")));
    let events = tokio::time::timeout(Duration::from_secs(20), collect(&agent, &big_prompt(5_000)))
        .await
        .unwrap();
    assert_eq!(stops(&events), 1, "{events:#?}");
    let (reason, messages, _) = stop(&events);
    assert_eq!(reason, StopReason::Error);
    assert!(check_tool_pairing(&messages).is_ok());
    match events.last() {
        Some(AgentEvent::Stop {
            error: Some(error), ..
        }) => {
            assert!(error.contains("compaction hook panicked"), "{error}");
            assert!(error.contains("the host's compactor broke"), "{error}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_compaction_hook_history_not_ending_with_a_user_message_is_refused() {
    let (model, requests) =
        ScriptedModel::new(move |_, request| reply(request, vec![text("hi")], "end_turn"))
            .recorded();
    let mut config = AgentConfig::new("m");
    config.budget = thresholds(1_000, 1_000_000);
    let agent = Agent::new(config, Arc::new(model), executor(Default::default()))
        .with_compaction_hook(hook(|_| {
            Some(vec![
                json!({"role": "user", "content": "summary"}),
                json!({"role": "assistant", "content": "ok"}),
            ])
        }));
    let events = collect(&agent, &big_prompt(5_000)).await;
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, AgentEvent::Context(ContextAction::Compaction { .. }))),
        "an invalid compacted history was taken"
    );
    let requests = requests.lock().unwrap();
    let last = requests[0]["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["role"], "user", "{last}");
    assert_eq!(stops(&events), 1);
}

/// Answers like `inner`, except that a summary request never completes.
struct HangingSummariser {
    inner: ScriptedModel,
}

impl Model for HangingSummariser {
    fn stream(&self, request: Value) -> ModelStream {
        if request.to_string().contains("Summarize this conversation") {
            return Box::pin(futures::stream::pending());
        }
        self.inner.stream(request)
    }
}

#[tokio::test]
async fn abort_during_compaction_stops_the_run() {
    // The built-in summariser hangs.
    let model = HangingSummariser {
        inner: ScriptedModel::new(|_, request| reply(request, vec![text("hi")], "end_turn")),
    };
    let mut config = AgentConfig::new("m");
    config.budget = thresholds(1_000, 1_000_000);
    let prompt = big_prompt(5_000);
    let messages = vec![
        json!({"role": "user", "content": prompt}),
        json!({"role": "assistant", "content": "earlier answer"}),
        json!({"role": "user", "content": "and now?"}),
    ];
    let agent = Agent::new(
        config.clone(),
        Arc::new(model),
        executor(Default::default()),
    );
    let run = agent.run_messages(messages.clone());
    let token = run.cancellation_token().clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        token.cancel();
    });
    let events: Vec<AgentEvent> = tokio::time::timeout(Duration::from_secs(10), run.collect())
        .await
        .expect("the run hung in the summariser after a cancel");
    assert_eq!(stops(&events), 1);
    let (reason, history, turns) = stop(&events);
    assert_eq!((reason, turns), (StopReason::Aborted, 0));
    assert_eq!(history, messages);

    // The host's hook hangs.
    let model = ScriptedModel::new(|_, request| reply(request, vec![text("hi")], "end_turn"));
    let agent = Agent::new(config, Arc::new(model), executor(Default::default()))
        .with_compaction_hook(Arc::new(|_| Box::pin(futures::future::pending())));
    let run = agent.run_messages(messages.clone());
    let token = run.cancellation_token().clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        token.cancel();
    });
    let events: Vec<AgentEvent> = tokio::time::timeout(Duration::from_secs(10), run.collect())
        .await
        .expect("the run hung in the compaction hook after a cancel");
    let (reason, history, _) = stop(&events);
    assert_eq!(reason, StopReason::Aborted);
    assert_eq!(history, messages);
}

/// Answers like `inner`, each call after `retries` retries (a summary request's, and a turn's).
struct RetriesFirst {
    inner: ScriptedModel,
    retries: u32,
}

impl Model for RetriesFirst {
    fn stream(&self, request: Value) -> ModelStream {
        let summary = request.to_string().contains("Summarize this conversation");
        let retries = (2..2 + self.retries).map(move |attempt| ModelEvent::Retry {
            attempt,
            status: (!summary).then_some(529),
            code: Some(if summary { "connection" } else { "overloaded" }),
            overloaded: !summary,
            wait: Duration::from_millis(1),
        });
        Box::pin(futures::stream::iter(retries).chain(self.inner.stream(request)))
    }
}

/// The built-in summariser's call waited through its retries without a word: a host saw
/// nothing while a compaction call backed off. They are reported as the turns' are, told apart
/// by `call` (`compaction`), before the compaction's `context` event.
#[tokio::test]
async fn the_summariser_s_retries_are_reported() {
    let model = RetriesFirst {
        inner: ScriptedModel::new(|_, request| {
            let answer = if request.to_string().contains("Summarize this conversation") {
                "short summary"
            } else {
                "hi"
            };
            reply(request, vec![text(answer)], "end_turn")
        }),
        retries: 2,
    };
    let mut config = AgentConfig::new("m");
    config.budget = thresholds(1_000, 1_000_000);
    let messages = vec![
        json!({"role": "user", "content": big_prompt(5_000)}),
        json!({"role": "assistant", "content": "earlier answer"}),
        json!({"role": "user", "content": "and now?"}),
    ];
    let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
    let events: Vec<AgentEvent> = agent.run_messages(messages).collect().await;
    assert_eq!(stop(&events).0, StopReason::EndTurn);
    let json: Vec<Value> = events
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    let kinds: Vec<String> = json
        .iter()
        .filter(|e| e["type"] != "text_delta")
        .map(|e| match e["type"].as_str().unwrap() {
            "retry" => format!("retry {} {}", e["call"], e["code"]),
            "context" => format!("context {}", e["action"]),
            other => other.to_owned(),
        })
        .collect();
    assert_eq!(
        kinds[..5],
        [
            r#"retry "compaction" "connection""#,
            r#"retry "compaction" "connection""#,
            "usage",
            r#"context "compaction""#,
            "turn_start",
        ],
        "{kinds:#?}"
    );
    let turn_retries: Vec<&Value> = json
        .iter()
        .filter(|e| e["type"] == "retry" && e["call"] == "turn")
        .collect();
    assert_eq!(turn_retries.len(), 2, "{json:#?}");
    assert_eq!(turn_retries[0]["status"], 529);
}

/// The primary model is overloaded for every call, a summary's too (four 529 retries, then
/// the client's `overloaded` failure); the fallback answers. Records each call's model and
/// whether it asked for a summary.
struct OverloadedPrimary {
    fallback: ScriptedModel,
    calls: Arc<Mutex<Vec<(String, bool)>>>,
}

impl Model for OverloadedPrimary {
    fn stream(&self, request: Value) -> ModelStream {
        let model = request["model"].as_str().unwrap_or_default().to_owned();
        let summary = request.to_string().contains("Summarize this conversation");
        self.calls.lock().unwrap().push((model.clone(), summary));
        if model == "claude-primary" {
            let retries = (2..6).map(|attempt| ModelEvent::Retry {
                attempt,
                status: Some(529),
                code: Some("overloaded"),
                overloaded: true,
                wait: Duration::from_millis(1),
            });
            let failed = ModelEvent::Failed(ModelError::overloaded("Overloaded"));
            return Box::pin(futures::stream::iter(retries.chain([failed])));
        }
        self.fallback.stream(request)
    }
}

/// The summariser's overload retries count toward `fallback_after_529_retries` as a turn's do:
/// its call switches to the fallback model (for the rest of the run, with the same
/// `model_fallback` event) and the summary is asked of the fallback. It only reported them:
/// the compaction waited through every retry of the overloaded model, failed, and left the
/// turn to the same model.
#[tokio::test]
async fn the_summariser_s_overloads_switch_to_the_fallback_as_a_turn_s_do() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let model = OverloadedPrimary {
        fallback: ScriptedModel::new(|_, request| {
            let answer = if request.to_string().contains("Summarize this conversation") {
                "short summary"
            } else {
                "hi"
            };
            reply(request, vec![text(answer)], "end_turn")
        }),
        calls: calls.clone(),
    };
    let mut config = fallback_config();
    config.budget = thresholds(1_000, 1_000_000);
    let messages = vec![
        json!({"role": "user", "content": big_prompt(5_000)}),
        json!({"role": "assistant", "content": "earlier answer"}),
        json!({"role": "user", "content": "and now?"}),
    ];
    let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
    let events: Vec<AgentEvent> = agent.run_messages(messages).collect().await;
    let (reason, _, turns) = stop(&events);
    assert_eq!((reason, turns), (StopReason::EndTurn, 1));
    common::assert_usage_events_add_up(&events);
    common::assert_tool_events_add_up(&events);
    let kinds: Vec<String> = events
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .filter(|e| e["type"] != "text_delta")
        .map(|e| match e["type"].as_str().unwrap() {
            "retry" => format!("retry {}", e["call"]),
            "model_fallback" => format!("model_fallback {} {} {}", e["call"], e["reason"], e["to"]),
            "context" => format!("context {}", e["action"]),
            other => other.to_owned(),
        })
        .collect();
    // Two retries were waited for; the third overload switched models instead, before the
    // compaction, once for the run.
    assert_eq!(
        kinds[..6],
        [
            r#"retry "compaction""#,
            r#"retry "compaction""#,
            r#"model_fallback "compaction" "repeated_529" "claude-fallback""#,
            "usage",
            r#"context "compaction""#,
            "turn_start",
        ],
        "{kinds:#?}"
    );
    assert_eq!(
        kinds
            .iter()
            .filter(|k| k.starts_with("model_fallback"))
            .count(),
        1
    );
    // The summary was asked of the fallback, which answered the turn too.
    assert_eq!(
        *calls.lock().unwrap(),
        [
            ("claude-primary".to_owned(), true),
            ("claude-fallback".to_owned(), true),
            ("claude-fallback".to_owned(), false),
        ]
    );
    let AgentEvent::ModelFallback { error, .. } = events
        .iter()
        .find(|e| matches!(e, AgentEvent::ModelFallback { .. }))
        .unwrap()
    else {
        unreachable!()
    };
    assert_eq!(error, "3 consecutive HTTP 529 responses");
}

/// With the fallback's threshold at 0 the summariser's call waits through the client's
/// retries; its failure as overloaded switches models as a turn's does (`overloaded`).
#[tokio::test]
async fn an_overloaded_summary_call_falls_back_after_the_client_s_retries() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let model = OverloadedPrimary {
        fallback: ScriptedModel::new(|_, request| {
            reply(request, vec![text("short summary")], "end_turn")
        }),
        calls: calls.clone(),
    };
    let mut config = fallback_config();
    config.fallback_after_529_retries = 0;
    config.budget = thresholds(1_000, 1_000_000);
    let messages = vec![
        json!({"role": "user", "content": big_prompt(5_000)}),
        json!({"role": "assistant", "content": "earlier answer"}),
        json!({"role": "user", "content": "and now?"}),
    ];
    let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
    let events: Vec<AgentEvent> = agent.run_messages(messages).collect().await;
    assert_eq!(stop(&events).0, StopReason::EndTurn);
    common::assert_usage_events_add_up(&events);
    let retries = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::Retry { .. }))
        .count();
    assert_eq!(retries, 4);
    assert!(
        events.iter().any(|e| matches!(
            e,
            AgentEvent::ModelFallback {
                call: UsageCall::Compaction,
                reason: "overloaded",
                ..
            }
        )),
        "{events:#?}"
    );
    let models: Vec<String> = calls
        .lock()
        .unwrap()
        .iter()
        .map(|(m, _)| m.clone())
        .collect();
    assert_eq!(
        models,
        ["claude-primary", "claude-fallback", "claude-fallback"]
    );
}

#[tokio::test]
async fn the_summariser_s_usage_counts_toward_the_run_s_tokens_and_budget() {
    let model_again = || {
        ScriptedModel::new(|n, request| {
            if request.to_string().contains("Summarize this conversation") {
                let mut message =
                    scripted_message(request, vec![text("short summary")], "end_turn");
                message["usage"] = json!({"input_tokens": 40_000, "output_tokens": 500});
                return Ok(Bytes::from(anthropic_sse(&message, 7)));
            }
            assert!(n < 3, "the budget did not stop the run");
            let mut message = scripted_message(request, vec![text("hi")], "end_turn");
            message["usage"] = json!({"input_tokens": 100, "output_tokens": 10});
            Ok(Bytes::from(anthropic_sse(&message, 7)))
        })
    };
    let mut config = AgentConfig::new("m");
    config.budget = thresholds(1_000, 1_000_000);
    let messages = vec![
        json!({"role": "user", "content": big_prompt(5_000)}),
        json!({"role": "assistant", "content": "earlier answer"}),
        json!({"role": "user", "content": "and now?"}),
    ];
    let agent = Agent::new(
        config.clone(),
        Arc::new(model_again()),
        executor(Default::default()),
    );
    let events: Vec<AgentEvent> = agent.run_messages(messages.clone()).collect().await;
    common::assert_usage_events_add_up(&events);
    match events.last() {
        Some(AgentEvent::Stop {
            reason,
            input_tokens,
            output_tokens,
            ..
        }) => {
            assert_eq!(*reason, StopReason::EndTurn);
            assert_eq!(
                (*input_tokens, *output_tokens),
                (40_100, 510),
                "{events:#?}"
            );
        }
        other => panic!("{other:?}"),
    }
    // A summary that spends the token budget stops the run before the next request.
    config.limits.token_budget = Some(30_000);
    let agent = Agent::new(
        config,
        Arc::new(model_again()),
        executor(Default::default()),
    );
    let (reason, history, turns) = stop(&agent.run_messages(messages).collect::<Vec<_>>().await);
    assert_eq!((reason, turns), (StopReason::Budget, 0));
    assert!(ferroloop::agent::check_history(&history).is_ok());
}

#[tokio::test]
async fn a_first_prompt_over_the_limit_makes_no_summary_call() {
    let model = Arc::new(ScriptedModel::new(|_, request| {
        reply(request, vec![text("summary")], "end_turn")
    }));
    let mut config = AgentConfig::new("m");
    config.budget = thresholds(1_000, 2_000);
    let agent = Agent::new(config, model.clone(), executor(Default::default()));
    let events = collect(&agent, &big_prompt(5_000)).await;
    let (reason, messages, turns) = stop(&events);
    assert_eq!((reason, turns), (StopReason::PromptTooLong, 0));
    assert_eq!(messages.len(), 1);
    assert_eq!(
        model.calls(),
        0,
        "a summary of a lone prompt that compaction keeps whole cannot help"
    );
}

#[tokio::test]
async fn repeated_compactions_keep_only_the_latest_summary() {
    let summaries = Arc::new(AtomicUsize::new(0));
    let count = summaries.clone();
    let model = ScriptedModel::new(move |n, request| {
        if request.to_string().contains("Summarize this conversation") {
            let k = count.fetch_add(1, Ordering::Relaxed);
            return reply(
                request,
                vec![text(&format!("summary number {k}"))],
                "end_turn",
            );
        }
        // Each turn reads a big result, so the context passes the threshold again.
        read_until(request, n, 6, &big_prompt(2_000))
    });
    let mut config = AgentConfig::new("m");
    config.budget = thresholds(3_000, 1_000_000);
    let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
    let events = collect(&agent, "explore").await;
    assert!(summaries.load(Ordering::Relaxed) >= 2, "{events:#?}");
    let (reason, messages, _) = stop(&events);
    common::assert_usage_events_add_up(&events);
    assert_eq!(reason, StopReason::EndTurn);
    let first = messages[0].to_string();
    assert_eq!(
        first
            .matches("This session continues from an earlier conversation")
            .count(),
        1,
        "{first}"
    );
    assert!(
        first.contains("explore"),
        "the user's prompt was lost: {first}"
    );
}

#[tokio::test]
async fn microcompact_never_clears_the_results_the_model_has_not_seen() {
    let (model, requests) = ScriptedModel::new(move |n, request| {
        if n < 3 {
            reply(request, vec![read_file(n)], "tool_use")
        } else {
            reply(request, vec![text("done")], "end_turn")
        }
    })
    .recorded();
    let mut config = AgentConfig::new("m");
    config.keep_recent_tool_results = 0;
    config.budget = warning_from_the_start();
    let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
    let (reason, _, _) = stop(&collect(&agent, "go").await);
    assert_eq!(reason, StopReason::EndTurn);
    for (n, request) in requests.lock().unwrap().iter().enumerate().skip(1) {
        let last = request["messages"].as_array().unwrap().last().unwrap();
        assert_eq!(
            last["content"][0]["content"],
            format!("contents of f{}", n - 1),
            "request {n} cleared the result the model is about to read: {last}"
        );
    }
}

/// `keep_recent_tool_results` counts the results of compactable tools (the only ones
/// microcompact clears): the unread results of the last turn were subtracted from it whatever
/// their tool, so a last turn of calls to a tool outside `compactable_tools` cleared as many
/// more of the older results than configured.
#[tokio::test]
async fn microcompact_keeps_as_many_compactable_results_whatever_tools_the_last_turn_called() {
    let (model, requests) = ScriptedModel::new(move |n, request| match n {
        0..=2 => reply(request, vec![read_file(n)], "tool_use"),
        3 => reply(
            request,
            vec![call("w3", "write", json!({"path": "out"}))],
            "tool_use",
        ),
        _ => reply(request, vec![text("done")], "end_turn"),
    })
    .recorded();
    let mut config = AgentConfig::new("m");
    config.keep_recent_tool_results = 3;
    config.compactable_tools = vec!["read".into()];
    config.budget = warning_from_the_start();
    let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
    let (reason, _, _) = stop(&collect(&agent, "go").await);
    assert_eq!(reason, StopReason::EndTurn);
    let requests = requests.lock().unwrap();
    let last = requests.last().unwrap().to_string();
    assert!(
        !last.contains(CLEARED_TOOL_RESULT),
        "three read results are kept, and there are three: {last}"
    );
    for n in 0..3 {
        assert!(last.contains(&format!("contents of f{n}")), "{last}");
    }
}

/// The summariser reads the results the model has not read yet: it cleared every tool result
/// first, those of the last turn too, and the summary replacing the history was then the only
/// way into it, so the model never saw them (and would call the same tools again).
#[tokio::test]
async fn the_summary_call_keeps_the_results_the_model_has_not_read() {
    let (model, requests) = ScriptedModel::new(move |n, request| match n {
        0 | 1 => reply(request, vec![read_file(n)], "tool_use"),
        2 => Err(too_long()),
        3 => reply(request, vec![text("The summary.")], "end_turn"),
        _ => reply(request, vec![text("done")], "end_turn"),
    })
    .recorded();
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(model),
        executor(Default::default()),
    );
    let (reason, _, _) = stop(&collect(&agent, "go").await);
    assert_eq!(reason, StopReason::EndTurn);
    let requests = requests.lock().unwrap();
    let summary_call = requests[3].to_string();
    assert!(
        summary_call.contains("Summarize this conversation"),
        "{summary_call}"
    );
    assert!(
        summary_call.contains("contents of f1"),
        "the unread result was cleared: {summary_call}"
    );
    // The older result, which the model read, is cleared so the call fits.
    assert!(!summary_call.contains("contents of f0"), "{summary_call}");
    assert!(summary_call.contains(CLEARED_TOOL_RESULT));
}

#[tokio::test]
async fn a_discarded_response_s_output_does_not_count_as_context() {
    // The first response is cut inside its only block, a tool call: nothing of it enters
    // history, and the same request is made again. Its 50,000 output tokens are not in the
    // context, so they must not trigger a compaction.
    let model = Arc::new(ScriptedModel::new(|n, request| {
        if request.to_string().contains("Summarize this conversation") {
            return reply(request, vec![text("summary")], "end_turn");
        }
        let (content, stop) = match n {
            0 => (
                vec![call("t1", "write", json!({"path": "x"}))],
                "max_tokens",
            ),
            _ => (vec![text("done")], "end_turn"),
        };
        let mut message = scripted_message(request, content, stop);
        message["usage"]["output_tokens"] = json!(50_000);
        Ok(Bytes::from(anthropic_sse(&message, 7)))
    }));
    let mut config = AgentConfig::new("m");
    config.budget = thresholds(10_000, 1_000_000);
    let agent = Agent::new(config, model.clone(), executor(Default::default()));
    let events: Vec<AgentEvent> = agent
        .run_messages(vec![
            json!({"role": "user", "content": "hello"}),
            json!({"role": "assistant", "content": "hi"}),
            json!({"role": "user", "content": "write x"}),
        ])
        .collect()
        .await;
    let (reason, _, turns) = stop(&events);
    assert_eq!((reason, turns), (StopReason::EndTurn, 2));
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, AgentEvent::Context(ContextAction::Compaction { .. }))),
        "{events:#?}"
    );
    assert_eq!(model.calls(), 2);
}

#[tokio::test]
async fn empty_text_blocks_never_enter_history() {
    let (model, requests) = ScriptedModel::new(move |n, request| {
        match n {
            // Cut right after a text block opened; then a call announced by an empty text.
            0 => reply(request, vec![text("Part one."), text("")], "max_tokens"),
            1 => reply(
                request,
                vec![text(""), call("t1", "read", json!({"path": "a"}))],
                "tool_use",
            ),
            _ => reply(request, vec![text("Done."), text("")], "end_turn"),
        }
    })
    .recorded();
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(model),
        executor(Default::default()),
    );
    let (reason, messages, turns) = stop(&collect(&agent, "go").await);
    assert_eq!((reason, turns), (StopReason::EndTurn, 3));
    let empty = |v: &Value| v.to_string().contains(r#""text":"""#);
    for request in requests.lock().unwrap().iter() {
        assert!(!empty(&request["messages"]), "{:#}", request["messages"]);
    }
    assert!(!messages.iter().any(empty), "{messages:#?}");
    assert!(ferroloop::agent::check_tool_pairing(&messages).is_ok());
}

/// The API refuses a text block that is only whitespace ("text content blocks must contain
/// non-whitespace text"), and models do stream one, "\n\n", before a call. It entered history
/// and the next request was refused.
#[tokio::test]
async fn whitespace_only_text_blocks_never_enter_history() {
    let (model, requests) = ScriptedModel::new(move |n, request| match n {
        0 => reply(
            request,
            vec![text("\n\n"), call("t1", "read", json!({"path": "a"}))],
            "tool_use",
        ),
        _ => reply(request, vec![text("Done."), text(" \n\t")], "end_turn"),
    })
    .recorded();
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(model),
        executor(Default::default()),
    );
    let (reason, messages, turns) = stop(&collect(&agent, "go").await);
    assert_eq!((reason, turns), (StopReason::EndTurn, 2));
    let blank = |v: &Value| {
        let mut found = false;
        let mut stack = vec![v];
        while let Some(v) = stack.pop() {
            match v {
                Value::Array(items) => stack.extend(items),
                Value::Object(map) => {
                    if map.get("type") == Some(&json!("text"))
                        && map
                            .get("text")
                            .and_then(Value::as_str)
                            .is_some_and(|t| t.trim().is_empty())
                    {
                        found = true;
                    }
                    stack.extend(map.values());
                }
                _ => {}
            }
        }
        found
    };
    for request in requests.lock().unwrap().iter() {
        assert!(!blank(&request["messages"]), "{:#}", request["messages"]);
    }
    assert!(!messages.iter().any(blank), "{messages:#?}");
    assert!(ferroloop::agent::check_tool_pairing(&messages).is_ok());
}

/// A prompt or text block that is only whitespace is refused before any request, as an empty
/// one is (the API refuses both).
#[tokio::test]
async fn whitespace_only_prompts_are_refused_before_any_request() {
    refused_before_any_request(vec![
        (
            vec![json!({"role": "user", "content": " \n"})],
            "message 0: the content is only whitespace",
        ),
        (
            vec![json!({"role": "user", "content": [text("look"), text("\t")]})],
            "message 0: text block 1 is only whitespace",
        ),
    ])
    .await;
}

/// A text block without text, or whose text is no string, is refused before any request (the
/// API refuses it too, after a round trip); it was sent as it was.
#[tokio::test]
async fn text_blocks_without_string_text_are_refused_before_any_request() {
    refused_before_any_request(vec![
        (
            vec![json!({"role": "user", "content": [text("look"), {"type": "text"}]})],
            "message 0: text block 1 has no text",
        ),
        (
            vec![json!({"role": "user", "content": [{"type": "text", "text": 5}]})],
            "message 0: the text of text block 0 must be a string, not 5",
        ),
        (
            vec![json!({"role": "user", "content": [{"type": "text", "text": null}]})],
            "message 0: the text of text block 0 must be a string, not null",
        ),
    ])
    .await;
}

/// Runs each conversation on one agent and checks that it stops with an error naming the
/// problem and that the model was never called; returns the agent and its model for more.
async fn refused_before_any_request(cases: Vec<(Vec<Value>, &str)>) -> (Agent, Arc<ScriptedModel>) {
    let model = Arc::new(ScriptedModel::new(|_, request| {
        reply(request, vec![text("Done.")], "end_turn")
    }));
    let agent = Agent::new(
        AgentConfig::new("m"),
        model.clone(),
        executor(Default::default()),
    );
    for (messages, expected) in cases {
        let events: Vec<AgentEvent> = agent.run_messages(messages.clone()).collect().await;
        match events.as_slice() {
            [
                AgentEvent::Stop {
                    reason: StopReason::Error,
                    error: Some(error),
                    ..
                },
            ] => assert!(error.contains(expected), "{error} (expected {expected:?})"),
            other => panic!("{messages:?}: {other:?}"),
        }
    }
    assert_eq!(model.calls(), 0);
    (agent, model)
}

/// A host's model that panics: when asked for a stream, or while its stream is polled.
struct PanickingModel {
    when_polled: bool,
}

impl Model for PanickingModel {
    fn stream(&self, _request: Value) -> ModelStream {
        assert!(self.when_polled, "the host's model broke");
        Box::pin(futures::stream::poll_fn(
            |_| -> std::task::Poll<Option<ModelEvent>> { panic!("the host's stream broke") },
        ))
    }
}

#[tokio::test]
async fn a_panicking_model_ends_the_run_with_one_stop_event() {
    for when_polled in [false, true] {
        let agent = Agent::new(
            AgentConfig::new("m"),
            Arc::new(PanickingModel { when_polled }),
            executor(Default::default()),
        );
        let events = tokio::time::timeout(Duration::from_secs(10), collect(&agent, "go"))
            .await
            .unwrap();
        assert_eq!(stops(&events), 1, "{events:#?}");
        match events.last() {
            Some(AgentEvent::Stop {
                reason: StopReason::Error,
                error: Some(error),
                messages,
                ..
            }) => {
                assert!(error.contains("broke"), "{error}");
                assert_eq!(messages.len(), 1);
            }
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn a_thinking_block_cut_before_its_signature_is_not_sent_back() {
    let thinking = |t: &str, signature: &str| json!({"type": "thinking", "thinking": t, "signature": signature});
    let (model, requests) = ScriptedModel::new(move |n, request| {
        match n {
            // Cut while thinking again after some text: that block never got its signature.
            // (A response holding nothing else is not continued: the same request would go
            // out again.)
            0 => reply(
                request,
                vec![
                    thinking("First.", "sig-0"),
                    text("Partly"),
                    thinking("Let me think about", ""),
                ],
                "max_tokens",
            ),
            // Cut in the text after a finished (signed) thought.
            1 => reply(
                request,
                vec![thinking("Now I know.", "sig-1"), text("The answer is")],
                "max_tokens",
            ),
            _ => reply(request, vec![text(" 42.")], "end_turn"),
        }
    })
    .recorded();
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(model),
        executor(Default::default()),
    );
    let (reason, messages, turns) = stop(&collect(&agent, "think").await);
    assert_eq!((reason, turns), (StopReason::EndTurn, 3));
    let unsigned = |v: &Value| v.to_string().contains(r#""signature":"""#);
    for request in requests.lock().unwrap().iter() {
        assert!(!unsigned(&request["messages"]), "{:#}", request["messages"]);
    }
    assert!(!messages.iter().any(unsigned), "{messages:#?}");
    // The signed thought stays with its text.
    assert!(
        messages
            .iter()
            .any(|m| m["content"][0] == thinking("Now I know.", "sig-1")),
        "{messages:#?}"
    );
}

#[tokio::test]
async fn empty_messages_and_empty_text_blocks_are_refused_before_any_request() {
    let (agent, model) = refused_before_any_request(vec![
        (
            vec![json!({"role": "user", "content": ""})],
            "message 0: the content is empty",
        ),
        (
            vec![json!({"role": "user", "content": []})],
            "message 0: the content is empty",
        ),
        (
            vec![
                json!({"role": "user", "content": "hi"}),
                json!({"role": "assistant", "content": []}),
                json!({"role": "user", "content": "again"}),
            ],
            "message 1: the content is empty",
        ),
        (
            vec![json!({"role": "user", "content": [text("look"), text("")]})],
            "message 0: text block 1 is empty",
        ),
    ])
    .await;
    // `run("")` is the same empty prompt.
    let (reason, _, turns) = stop(&collect(&agent, "").await);
    assert_eq!((reason, turns), (StopReason::Error, 0));
    assert_eq!(model.calls(), 0);
}

#[tokio::test]
async fn compaction_after_a_max_tokens_cut_keeps_the_user_s_prompt() {
    let model = ScriptedModel::new(move |n, request| {
        if request.to_string().contains("Summarize this conversation") {
            return reply(
                request,
                vec![text("An essay was being written.")],
                "end_turn",
            );
        }
        match n {
            // A long answer cut by max_tokens passes the auto-compact threshold.
            0 => reply(request, vec![text(&big_prompt(5_000))], "max_tokens"),
            _ => reply(request, vec![text("The essay, whole.")], "end_turn"),
        }
    });
    let mut config = AgentConfig::new("m");
    config.budget = thresholds(3_000, 1_000_000);
    let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
    let events = collect(&agent, "write a long essay about rivers").await;
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AgentEvent::Context(ContextAction::Compaction { .. })))
    );
    let (reason, messages, _) = stop(&events);
    assert_eq!(reason, StopReason::EndTurn);
    let first = messages[0].to_string();
    assert!(first.contains("write a long essay about rivers"), "{first}");
    assert!(!first.contains("Resume directly"), "{first}");
}

#[tokio::test]
async fn a_compaction_that_cannot_get_under_the_threshold_is_not_repeated_every_turn() {
    let summaries = Arc::new(AtomicUsize::new(0));
    let count = summaries.clone();
    let model = ScriptedModel::new(move |_, request| {
        if request.to_string().contains("Summarize this conversation") {
            count.fetch_add(1, Ordering::Relaxed);
            return reply(request, vec![text("summary")], "end_turn");
        }
        let turn = request["messages"].as_array().unwrap().len();
        read_until(request, turn, 8, "a")
    });
    let mut config = AgentConfig::new("m");
    config.budget = thresholds(1_000, 1_000_000);
    // The latest prompt alone is over the auto-compact threshold: a summary keeps it whole.
    let messages = vec![
        json!({"role": "user", "content": "hello"}),
        json!({"role": "assistant", "content": "hi"}),
        json!({"role": "user", "content": big_prompt(5_000)}),
    ];
    let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
    let events: Vec<AgentEvent> = agent.run_messages(messages).collect().await;
    let (reason, _, turns) = stop(&events);
    assert_eq!(reason, StopReason::EndTurn, "{events:#?}");
    assert!(turns >= 4);
    assert_eq!(
        summaries.load(Ordering::Relaxed),
        1,
        "a summary call on every turn"
    );
}

#[tokio::test]
async fn a_summariser_that_keeps_failing_is_tried_three_times_in_a_row_at_most() {
    let summaries = Arc::new(AtomicUsize::new(0));
    let count = summaries.clone();
    let model = ScriptedModel::new(move |_, request| {
        if request.to_string().contains("Summarize this conversation") {
            count.fetch_add(1, Ordering::Relaxed);
            return Err(ModelError::other("summaries are down"));
        }
        let turn = request["messages"].as_array().unwrap().len();
        read_until(request, turn, 20, "a")
    });
    let mut config = AgentConfig::new("m");
    config.budget = thresholds(1_000, 1_000_000);
    let messages = vec![
        json!({"role": "user", "content": big_prompt(5_000)}),
        json!({"role": "assistant", "content": "hi"}),
        json!({"role": "user", "content": "go on"}),
    ];
    let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
    let events: Vec<AgentEvent> = agent.run_messages(messages).collect().await;
    let (reason, messages, _) = stop(&events);
    common::assert_usage_events_add_up(&events);
    assert_eq!(reason, StopReason::EndTurn);
    assert!(check_tool_pairing(&messages).is_ok());
    assert_eq!(summaries.load(Ordering::Relaxed), 3);
}

/// A run with every stage: compaction, eager and held tool calls, a `max_tokens` cut and its
/// continuation, then the answer.
fn every_stage_model() -> ScriptedModel {
    ScriptedModel::new(|_, request| {
        if request.to_string().contains("Summarize this conversation") {
            return reply(request, vec![text("summary")], "end_turn");
        }
        let len = request["messages"].as_array().unwrap().len();
        match len {
            1 => reply(
                request,
                vec![
                    text("Looking."),
                    call("t1", "sleep", json!({"ms": 20})),
                    call("t2", "write", json!({"path": "w"})),
                ],
                "tool_use",
            ),
            3 => reply(request, vec![text("A long answer")], "max_tokens"),
            _ => reply(request, vec![text(" ends here.")], "end_turn"),
        }
    })
}

#[tokio::test]
async fn a_cancel_at_any_point_ends_with_one_stop_event_and_a_valid_history() {
    let mut config = AgentConfig::new("m");
    config.budget = thresholds(2_000, 1_000_000);
    let messages = vec![
        json!({"role": "user", "content": big_prompt(3_000)}),
        json!({"role": "assistant", "content": "ok"}),
        json!({"role": "user", "content": "go"}),
    ];
    let agent = Agent::new(
        config,
        Arc::new(every_stage_model()),
        executor(Default::default()),
    );
    let full: Vec<AgentEvent> = agent.run_messages(messages.clone()).collect().await;
    assert_eq!(stop(&full).0, StopReason::EndTurn, "{full:#?}");
    for k in 0..full.len() {
        let mut run = agent.run_messages(messages.clone());
        let mut events = Vec::new();
        if k == 0 {
            run.cancel();
        }
        while let Some(event) = tokio::time::timeout(Duration::from_secs(10), run.next())
            .await
            .unwrap_or_else(|_| panic!("cancel after event {k}: the run hung"))
        {
            events.push(event);
            if events.len() == k {
                run.cancel();
            }
        }
        assert_eq!(stops(&events), 1, "cancel after event {k}: {events:#?}");
        common::assert_usage_events_add_up(&events);
        let (reason, history, _) = stop(&events);
        assert!(
            matches!(reason, StopReason::Aborted | StopReason::EndTurn),
            "cancel after event {k}: {reason:?}"
        );
        if reason == StopReason::EndTurn {
            // The loop runs ahead of its reader: the cancel came after the end.
            assert_eq!(history, stop(&full).1, "cancel after event {k}");
        }
        assert!(
            check_tool_pairing(&history).is_ok(),
            "cancel after event {k}: {history:#?}"
        );
        assert!(!history.is_empty());
        assert!(
            history.iter().all(
                |m| !ferroloop::agent::check_history(std::slice::from_ref(m))
                    .is_err_and(|e| e.contains("empty"))
            ),
            "cancel after event {k}: {history:#?}"
        );
    }
}

#[tokio::test]
async fn a_server_tool_call_cut_by_max_tokens_before_its_result_is_not_sent_back() {
    let (model, requests) = ScriptedModel::new(move |n, request| {
        match n {
            // A finished search, then a second search cut before the server ran it.
            0 => {
                let mut content = vec![text("Searching.")];
                content.extend(server_search("srvtoolu_1", "rivers"));
                content.push(json!({"type": "server_tool_use", "id": "srvtoolu_2", "name": "web_search", "input": {"query": "la"}}));
                reply(request, content, "max_tokens")
            }
            _ => reply(request, vec![text("Done.")], "end_turn"),
        }
    })
    .recorded();
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(model),
        executor(Default::default()),
    );
    let (reason, messages, turns) = stop(&collect(&agent, "search").await);
    assert_eq!((reason, turns), (StopReason::EndTurn, 2));
    let requests = requests.lock().unwrap();
    let sent = requests[1]["messages"].to_string();
    assert!(
        sent.contains("srvtoolu_1"),
        "the answered search stays: {sent}"
    );
    assert!(
        !sent.contains("srvtoolu_2"),
        "the unanswered search was sent back: {sent}"
    );
    assert!(
        !serde_json::to_string(&messages)
            .unwrap()
            .contains("srvtoolu_2")
    );
}

/// The API refuses a request whose history holds `tool_use` or `tool_result` blocks without
/// tool definitions ("Requests which include tool_use or tool_result blocks must define
/// tools"): the summary request of a tool-using conversation carries the run's tools, with
/// `tool_choice: none` so that the answer is the summary.
#[tokio::test]
async fn the_summary_request_of_a_tool_using_conversation_defines_the_tools() {
    let summary_requests = Arc::new(Mutex::new(Vec::new()));
    let turn_requests = Arc::new(Mutex::new(Vec::new()));
    let (summaries, turns) = (summary_requests.clone(), turn_requests.clone());
    let model = ScriptedModel::new(move |_, request| {
        if request.to_string().contains("Summarize this conversation") {
            summaries.lock().unwrap().push(request.clone());
            return reply(request, vec![text("summary")], "end_turn");
        }
        let len = {
            let mut turns = turns.lock().unwrap();
            turns.push(request.clone());
            turns.len()
        };
        read_until(request, len, 4, &big_prompt(1_000))
    });
    let mut config = AgentConfig::new("m");
    config.budget = thresholds(1_500, 1_000_000);
    let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
    let (reason, _, _) = stop(&collect(&agent, "go").await);
    assert_eq!(reason, StopReason::EndTurn);
    let summaries = summary_requests.lock().unwrap();
    assert!(!summaries.is_empty());
    let first_turn = &turn_requests.lock().unwrap()[0];
    for request in summaries.iter() {
        assert!(request["messages"].to_string().contains("tool_use"));
        let names = |r: &Value| -> Vec<Value> {
            r["tools"]
                .as_array()
                .map(|t| t.iter().map(|d| d["name"].clone()).collect())
                .unwrap_or_default()
        };
        assert_eq!(names(request), names(first_turn), "{request:#}");
        assert_eq!(request["tool_choice"], json!({"type": "none"}));
    }
}

#[tokio::test]
async fn after_the_breaker_trips_compaction_is_still_tried_at_the_blocking_limit() {
    let summaries = Arc::new(AtomicUsize::new(0));
    let count = summaries.clone();
    let turns = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new(move |_, request| {
        if request.to_string().contains("Summarize this conversation") {
            count.fetch_add(1, Ordering::Relaxed);
            return reply(request, vec![text("summary")], "end_turn");
        }
        let turn = turns.fetch_add(1, Ordering::Relaxed);
        // Each result adds ~1,000 tokens: the blocking limit is reached after a few turns.
        read_until(request, turn, 6, &big_prompt(1_000))
    });
    let mut config = AgentConfig::new("m");
    config.budget = thresholds(1_000, 8_000);
    // The latest prompt alone is over the auto-compact threshold (the breaker trips at once),
    // far under the blocking limit.
    let messages = vec![
        json!({"role": "user", "content": "hello"}),
        json!({"role": "assistant", "content": "hi"}),
        json!({"role": "user", "content": big_prompt(3_000)}),
    ];
    let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
    let events: Vec<AgentEvent> = agent.run_messages(messages).collect().await;
    let (reason, _, _) = stop(&events);
    assert_eq!(reason, StopReason::EndTurn, "{events:#?}");
    assert!(summaries.load(Ordering::Relaxed) >= 2);
}

#[tokio::test]
async fn a_truncated_call_s_reported_input_counts_toward_the_run_s_tokens() {
    let model = ScriptedModel::new(|n, request| {
        let mut message = scripted_message(request, vec![text("Hello there.")], "end_turn");
        message["usage"] = json!({"input_tokens": 1_000, "output_tokens": 10});
        let sse = anthropic_sse(&message, 7);
        match n {
            // Cut after message_start reported 1,000 input tokens.
            0 => {
                let cut = sse.find("event: message_delta").unwrap();
                Ok(Bytes::from(sse[..cut].to_owned()))
            }
            _ => Ok(Bytes::from(sse)),
        }
    });
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(model),
        executor(Default::default()),
    );
    let events = collect(&agent, "hi").await;
    match events.last() {
        Some(AgentEvent::Stop {
            reason: StopReason::EndTurn,
            input_tokens,
            ..
        }) => assert_eq!(
            *input_tokens, 2_000,
            "the truncated call's input was billed too"
        ),
        other => panic!("{other:?}"),
    }
}

/// Compaction and microcompact change the prompt on purpose: the cache read falling after them
/// is expected, not a cache break to report.
#[tokio::test]
async fn context_management_is_not_reported_as_a_cache_break() {
    for compaction in [true, false] {
        let cleared_before = Arc::new(AtomicUsize::new(0));
        let model = ScriptedModel::new(move |_, request| {
            if request.to_string().contains("Summarize this conversation") {
                return reply(request, vec![text("summary")], "end_turn");
            }
            let len = request["messages"].as_array().unwrap().len();
            let content = if len < 7 {
                vec![call(
                    &format!("t{len}"),
                    "read",
                    json!({"path": big_prompt(700)}),
                )]
            } else {
                vec![text("done")]
            };
            let stop = if len < 7 { "tool_use" } else { "end_turn" };
            let mut message = scripted_message(request, content, stop);
            // Everything before the last message was read from the cache, unless compaction
            // or a newly cleared result changed the prefix.
            let cleared = request.to_string().matches(CLEARED_TOOL_RESULT).count();
            let newly_cleared = cleared_before.swap(cleared, Ordering::Relaxed) < cleared;
            let cached = if len > 1 && !newly_cleared { 40_000 } else { 0 };
            message["usage"] = json!({"input_tokens": 100, "cache_read_input_tokens": cached, "output_tokens": 10});
            Ok(Bytes::from(anthropic_sse(&message, 7)))
        });
        let mut config = AgentConfig::new("m");
        if compaction {
            config.budget = thresholds(40_500, 1_000_000);
        } else {
            // Warning only: microcompact, no compaction.
            config.budget = thresholds(500_000, 1_000_000);
            config.budget.warning_buffer = 459_500;
            config.keep_recent_tool_results = 1;
        }
        let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
        let events = collect(&agent, "go").await;
        let managed = events.iter().any(|e| match e {
            AgentEvent::Context(ContextAction::Compaction { .. }) => compaction,
            AgentEvent::Context(ContextAction::Microcompact { .. }) => !compaction,
            _ => false,
        });
        assert!(managed, "compaction {compaction}: {events:#?}");
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, AgentEvent::CacheBreak { .. })),
            "compaction {compaction}: {events:#?}"
        );
    }
}

/// The prompt cache is the model's: the fallback model's first call reads none of the
/// primary's, which is no cache break (nothing in the prompt changed). It was reported as one
/// ("40000 → 0", no component changed) unless the switch happened to drop thinking blocks.
/// The primary's failed call reported its usage (a `message_start` with a cache read, then an
/// overload): that read was real, and counts as the primary's last.
#[tokio::test]
async fn a_switch_to_the_fallback_model_is_not_reported_as_a_cache_break() {
    let usage = |cached: u64| json!({"input_tokens": 100, "cache_read_input_tokens": cached, "output_tokens": 10});
    let model = ScriptedModel::new(move |n, request| {
        let primary = request["model"] == "claude-primary";
        let len = request["messages"].as_array().unwrap().len();
        if primary && len > 1 {
            // The primary's second turn: its stream starts (and reports a cache read), then the
            // provider gives up.
            let mut message = scripted_message(request, vec![text("Part")], "end_turn");
            message["usage"] = usage(40_000);
            let sse = anthropic_sse(&message, 7);
            let cut = sse.find("event: content_block_start").unwrap();
            return Ok(Bytes::from(format!("{}{OVERLOADED_EVENT}", &sse[..cut])));
        }
        let (content, stop) = if n == 0 {
            (vec![call("t1", "read", json!({"path": "a"}))], "tool_use")
        } else {
            (vec![text("Done.")], "end_turn")
        };
        let mut message = scripted_message(request, content, stop);
        // The primary's first turn wrote the cache; the fallback has none of it.
        message["usage"] = usage(if primary { 40_000 } else { 0 });
        Ok(Bytes::from(anthropic_sse(&message, 7)))
    });
    let agent = Agent::new(
        fallback_config(),
        Arc::new(model),
        executor(Default::default()),
    );
    let events = collect(&agent, "go").await;
    assert_eq!(stop(&events).0, StopReason::EndTurn, "{events:#?}");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AgentEvent::ModelFallback { .. })),
        "{events:#?}"
    );
    common::assert_usage_events_add_up(&events);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, AgentEvent::CacheBreak { .. })),
        "{events:#?}"
    );
}

/// Image results are cleared like text ones, and a cleared result stays byte-identical from
/// one request to the next (the prefix the prompt cache reads).
#[tokio::test]
async fn microcompact_clears_image_results_and_keeps_cleared_ones_byte_stable() {
    let (model, requests) = ScriptedModel::new(move |n, request| {
        if n < 4 {
            reply(
                request,
                vec![call(&format!("s{n}"), "shot", json!({}))],
                "tool_use",
            )
        } else {
            reply(request, vec![text("done")], "end_turn")
        }
    })
    .recorded();
    let mut tools = ToolRegistry::new();
    tools
        .register(FnTool::new("shot", |_input: Value, _ctx| async move {
            Ok(ToolOutput::blocks(vec![
                json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}),
                json!({"type": "text", "text": "a screenshot"}),
            ]))
        }))
        .unwrap();
    let mut config = AgentConfig::new("m");
    config.keep_recent_tool_results = 1;
    config.budget = warning_from_the_start();
    let agent = Agent::new(config, Arc::new(model), Arc::new(ToolExecutor::new(tools)));
    let (reason, messages, _) = stop(&collect(&agent, "look").await);
    assert_eq!(reason, StopReason::EndTurn);
    assert!(check_tool_pairing(&messages).is_ok());
    // The oldest results were cleared, the latest kept whole.
    assert_eq!(messages[2]["content"][0]["content"], CLEARED_TOOL_RESULT);
    assert_eq!(messages[8]["content"][0]["content"][0]["type"], "image");
    // Once cleared, a message is sent the same, byte for byte, in every later request.
    let requests = requests.lock().unwrap();
    let message_2 = |r: &Value| {
        let mut m = r["messages"][2].clone();
        // The cache breakpoint moves to the last message; it is not part of the history.
        if let Some(blocks) = m["content"].as_array_mut() {
            for b in blocks {
                b.as_object_mut().unwrap().remove("cache_control");
            }
        }
        m.to_string()
    };
    let cleared: Vec<String> = requests
        .iter()
        .map(message_2)
        .filter(|m| m.contains(CLEARED_TOOL_RESULT))
        .collect();
    assert!(cleared.len() >= 2, "{cleared:?}");
    assert!(cleared.windows(2).all(|w| w[0] == w[1]), "{cleared:?}");
}

#[tokio::test]
async fn a_hook_that_cannot_shrink_the_history_is_called_a_bounded_number_of_times() {
    for variant in ["same", "empty", "over"] {
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let model = ScriptedModel::new(|n, request| read_until(request, n, 8, "a"));
        let mut config = AgentConfig::new("m");
        config.budget = thresholds(1_000, 1_000_000);
        let agent = Agent::new(config, Arc::new(model), executor(Default::default()))
            .with_compaction_hook(hook(move |history| {
                counted.fetch_add(1, Ordering::Relaxed);
                match variant {
                    "same" => Some(history),
                    "empty" => Some(Vec::new()),
                    // A valid history, still over the threshold.
                    _ => Some(vec![json!({"role": "user", "content": big_prompt(3_000)})]),
                }
            }));
        let events =
            tokio::time::timeout(Duration::from_secs(20), collect(&agent, &big_prompt(2_000)))
                .await
                .unwrap();
        let (reason, messages, _) = stop(&events);
        assert_eq!(reason, StopReason::EndTurn, "{variant}");
        assert!(check_tool_pairing(&messages).is_ok());
        let calls = calls.load(Ordering::Relaxed);
        assert!(calls <= 3, "{variant}: the hook was called {calls} times");
    }
}

/// A hook's history that is no smaller than the current one is no compaction: it is not taken
/// (it replaced the user's prompt, and a prompt-too-long request was sent again, bigger).
#[tokio::test]
async fn a_hook_history_no_smaller_than_the_current_one_is_not_taken() {
    let grown = || vec![json!({"role": "user", "content": big_prompt(3_000)})];
    // Reactive: the refusal is not answered by sending the bigger history.
    let model = Arc::new(ScriptedModel::new(|_, _| {
        Err(ModelError::prompt_too_long("prompt is too long"))
    }));
    let agent = Agent::new(
        AgentConfig::new("m"),
        model.clone(),
        executor(Default::default()),
    )
    .with_compaction_hook(hook(move |_| Some(grown())));
    let history = long_conversation("go on");
    let events: Vec<AgentEvent> = agent.run_messages(history.clone()).collect().await;
    let (reason, messages, _) = stop(&events);
    assert_eq!(reason, StopReason::PromptTooLong);
    assert_eq!(messages, history);
    assert_eq!(model.calls(), 1, "{events:#?}");
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, AgentEvent::Context(ContextAction::Compaction { .. })))
    );
    // Auto: the user's prompt goes out, not the hook's bigger history; and the same history
    // handed back is not reported as a compaction.
    for variant in ["bigger", "same"] {
        let (model, requests) =
            ScriptedModel::new(|_, request| reply(request, vec![text("hi")], "end_turn"))
                .recorded();
        let mut config = AgentConfig::new("m");
        config.budget = thresholds(1_000, 1_000_000);
        let agent = Agent::new(config, Arc::new(model), executor(Default::default()))
            .with_compaction_hook(hook(move |history| match variant {
                "bigger" => Some(grown()),
                _ => Some(history),
            }));
        let prompt = format!("{}y", big_prompt(2_000));
        let events = collect(&agent, &prompt).await;
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, AgentEvent::Context(ContextAction::Compaction { .. }))),
            "{variant}"
        );
        let requests = requests.lock().unwrap();
        // (As blocks: the last message carries a cache breakpoint.)
        let sent = &requests[0]["messages"][0]["content"][0]["text"];
        assert_eq!(sent.as_str(), Some(prompt.as_str()), "{variant}");
        assert_eq!(stop(&events).0, StopReason::EndTurn, "{variant}");
    }
}

/// The host data given to a run reaches the tool calls of each of its turns, and only those.
#[tokio::test]
async fn host_data_of_a_run_reaches_its_tool_calls() {
    let mut tools = ToolRegistry::new();
    tools
        .register(
            FnTool::new("whose", |_, ctx: ferroloop::exec::ToolContext| {
                let seen = ctx
                    .host_data()
                    .and_then(|host| host.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "none".into());
                async move { Ok(ToolOutput::text(seen)) }
            })
            .concurrency_safe(true),
        )
        .unwrap();
    let model = ScriptedModel::new(|n, request| match n % 3 {
        0 => reply(
            request,
            vec![call(&format!("w{n}"), "whose", json!({}))],
            "tool_use",
        ),
        1 => reply(
            request,
            vec![call(&format!("w{n}"), "whose", json!({}))],
            "tool_use",
        ),
        _ => reply(request, vec![text("Done.")], "end_turn"),
    });
    let agent = Agent::new(
        AgentConfig::new("claude-sonnet-4-5"),
        Arc::new(model),
        Arc::new(ToolExecutor::new(tools)),
    );
    let prompt = || vec![json!({"role": "user", "content": "go"})];
    let results = |events: &[AgentEvent]| -> Vec<Value> {
        let (reason, messages, _) = stop(events);
        assert_eq!(reason, StopReason::EndTurn);
        messages
            .iter()
            .filter(|m| m["role"] == "user")
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .filter(|b| b["type"] == "tool_result")
            .map(|b| b["content"].clone())
            .collect()
    };
    let events: Vec<AgentEvent> = agent
        .run_messages_with_host_data(prompt(), Arc::new(String::from("run one")))
        .collect()
        .await;
    assert_eq!(results(&events), [json!("run one"), json!("run one")]);
    let events: Vec<AgentEvent> = agent.run_messages(prompt()).collect().await;
    assert_eq!(results(&events), [json!("none"), json!("none")]);
}

/// The SSE body of Chat Completions chunks (each `data` a chunk's JSON) ended by `[DONE]`.
fn chat_chunks(chunks: &[Value]) -> Bytes {
    let mut sse: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    sse.push_str("data: [DONE]\n\n");
    Bytes::from(sse)
}

/// A Chat Completions chunk of choice 0.
fn chat_chunk(delta: Value, finish: Value) -> Value {
    json!({"id": "c", "object": "chat.completion.chunk", "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

/// Some servers and gateways end a tool-calling answer with `[DONE]` and no `finish_reason`
/// (or a `null` one on every chunk): the calls are whole, and they run and are answered.
#[tokio::test]
async fn chat_tool_calls_ended_by_done_without_a_finish_reason_run() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let model = ScriptedModel::openai_chat(|n, request| {
        if n > 0 {
            return chat_reply(request, vec![text("ok")], "end_turn");
        }
        Ok(chat_chunks(&[
            chat_chunk(json!({"role": "assistant", "content": null}), Value::Null),
            chat_chunk(
                json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{\"path\": \"a\"}"}}]}),
                Value::Null,
            ),
            chat_chunk(
                json!({"tool_calls": [{"index": 1, "id": "call_2", "type": "function", "function": {"name": "write", "arguments": "{\"path\": \"b\"}"}}]}),
                Value::Null,
            ),
        ]))
    });
    let agent = Agent::new(
        AgentConfig::new("gpt-4o"),
        Arc::new(model),
        executor(log.clone()),
    );
    let events = collect(&agent, "go").await;
    let (reason, messages, turns) = stop(&events);
    assert_eq!((reason, turns), (StopReason::EndTurn, 2), "{events:#?}");
    assert!(check_tool_pairing(&messages).is_ok(), "{messages:#?}");
    assert_eq!(*log.lock().unwrap(), ["read \"a\"", "write \"b\""]);
    let ids: Vec<&str> = messages[2]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["tool_use_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["call_1", "call_2"]);
}

/// The first assistant message of an OpenAI Chat request.
fn first_assistant_message(request: &Value) -> &Value {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap()
}

/// Reasoning a Chat Completions server streams (`reasoning_content`: DeepSeek, vLLM;
/// `reasoning`: Ollama, OpenRouter) is surfaced as thinking, kept as the turn's first block, and
/// sent back as `reasoning_content` with the turn's tool calls: DeepSeek's thinking mode answers
/// a request whose tool-call turn lacks it with a 400.
#[tokio::test]
async fn chat_reasoning_of_a_tool_call_turn_is_sent_back() {
    let (model, requests) = ScriptedModel::openai_chat(|n, request| {
        if n > 0 {
            return chat_reply(request, vec![text("ok")], "end_turn");
        }
        Ok(chat_chunks(&[
            chat_chunk(
                json!({"role": "assistant", "content": null, "reasoning_content": "Need a"}),
                Value::Null,
            ),
            chat_chunk(json!({"content": null, "reasoning": " file."}), Value::Null),
            chat_chunk(
                json!({"content": "Reading.", "reasoning_content": null}),
                Value::Null,
            ),
            chat_chunk(
                json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{\"path\": \"a\"}"}}]}),
                json!("tool_calls"),
            ),
        ]))
    })
    .recorded();
    let log = Arc::new(Mutex::new(Vec::new()));
    let agent = Agent::new(
        AgentConfig::new("deepseek-v4-pro"),
        Arc::new(model),
        executor(log),
    );
    let events = collect(&agent, "go").await;
    let (reason, messages, turns) = stop(&events);
    assert_eq!((reason, turns), (StopReason::EndTurn, 2), "{events:#?}");
    let thinking: String = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ThinkingDelta { thinking } => Some(thinking.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(thinking, "Need a file.");
    assert_eq!(
        messages[1]["content"],
        json!([
            {"type": "thinking", "thinking": "Need a file.", "signature": ""},
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "call_1", "name": "read", "input": {"path": "a"}},
        ])
    );
    let second = &requests.lock().unwrap()[1];
    let assistant = first_assistant_message(second);
    assert_eq!(assistant["reasoning_content"], "Need a file.", "{second}");
    assert_eq!(assistant["content"], "Reading.");
    assert_eq!(assistant["tool_calls"][0]["id"], "call_1");
}

/// Reasoning of a turn without tool calls stays in history as thinking but is not sent back:
/// servers ignore it there, and the first `deepseek-reasoner` refused it.
#[tokio::test]
async fn chat_reasoning_of_a_turn_without_calls_is_not_sent_back() {
    let (model, requests) = ScriptedModel::openai_chat(|_, _| {
        Ok(chat_chunks(&[
            chat_chunk(
                json!({"role": "assistant", "content": null, "reasoning_content": "Easy."}),
                Value::Null,
            ),
            chat_chunk(json!({"content": "Hi."}), json!("stop")),
        ]))
    })
    .recorded();
    let log = Arc::new(Mutex::new(Vec::new()));
    let agent = Agent::new(
        AgentConfig::new("deepseek-v4-pro"),
        Arc::new(model),
        executor(log),
    );
    let first = collect(&agent, "hello").await;
    let (reason, messages, _) = stop(&first);
    assert_eq!(reason, StopReason::EndTurn, "{first:#?}");
    assert_eq!(
        messages[1]["content"],
        json!([
            {"type": "thinking", "thinking": "Easy.", "signature": ""},
            {"type": "text", "text": "Hi."},
        ])
    );
    let mut history = messages.clone();
    history.push(json!({"role": "user", "content": "again"}));
    let events: Vec<AgentEvent> = agent.run_messages(history).collect().await;
    assert_eq!(stop(&events).0, StopReason::EndTurn, "{events:#?}");
    let second = &requests.lock().unwrap()[1];
    let assistant = first_assistant_message(second);
    assert_eq!(
        assistant,
        &json!({"role": "assistant", "content": "Hi."}),
        "{second}"
    );
}

/// With several choices (`n` > 1 passed through in the request), only the first choice is the
/// answer: the other choices' text and tool calls are neither shown, run nor recorded.
#[tokio::test]
async fn chat_choices_other_than_the_first_are_ignored() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let model = ScriptedModel::openai_chat(|n, request| {
        if n > 0 {
            return chat_reply(request, vec![text("ok")], "end_turn");
        }
        let two = |first: Value, second: Value, finish: Value| {
            json!({"id": "c", "object": "chat.completion.chunk", "model": "m", "choices": [
                {"index": 0, "delta": first, "finish_reason": finish},
                {"index": 1, "delta": second, "finish_reason": finish},
            ]})
        };
        let call = |id: &str, path: &str| json!({"tool_calls": [{"index": 0, "id": id, "type": "function", "function": {"name": "read", "arguments": format!("{{\"path\":\"{path}\"}}")}}]});
        Ok(chat_chunks(&[
            two(
                json!({"role": "assistant", "content": "First."}),
                json!({"role": "assistant", "content": "Second."}),
                Value::Null,
            ),
            two(call("call_a", "a"), call("call_b", "b"), Value::Null),
            two(json!({}), json!({}), json!("tool_calls")),
        ]))
    });
    let agent = Agent::new(
        AgentConfig::new("gpt-4o"),
        Arc::new(model),
        executor(log.clone()),
    );
    let events = collect(&agent, "go").await;
    let (reason, messages, turns) = stop(&events);
    assert_eq!((reason, turns), (StopReason::EndTurn, 2), "{events:#?}");
    assert!(check_tool_pairing(&messages).is_ok(), "{messages:#?}");
    assert_eq!(*log.lock().unwrap(), ["read \"a\""]);
    let shown: String = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(!shown.contains("Second"), "{shown}");
    assert_eq!(messages[2]["content"].as_array().unwrap().len(), 1);
}

/// The refusal the API gives a request whose thinking blocks were replayed after the
/// conversation before them changed (models that bind thinking to its conversation).
const STALE_THINKING_REFUSAL: &str = "invalid request: messages.1.content.0: Invalid `signature` in `thinking` block. The block is bound to a different conversation. Remove the block, or set `thinking.block_binding.prefix_mismatch_behavior` to \"drop_block\". That setting requires the `thinking-binding-controls-2026-08-01` value in the `anthropic-beta` header.";

fn signed_thinking(text: &str) -> Value {
    json!({"type": "thinking", "thinking": text, "signature": "sig-of-this-conversation"})
}

/// Microcompact or compaction changes what comes before earlier thinking blocks; a model that
/// binds thinking to its conversation then refuses the request. The loop sends the same turn
/// again asking the API to drop such blocks, and keeps asking for the rest of the run.
#[tokio::test]
async fn thinking_refused_after_a_history_edit_is_dropped_on_a_second_try() {
    let (model, requests) = ScriptedModel::new(|n, request| match n {
        0 => reply(
            request,
            vec![
                signed_thinking("Look first."),
                call("t1", "read", json!({"path": "a"})),
            ],
            "tool_use",
        ),
        1 => Err(ModelError::with_code(
            "invalid_request",
            STALE_THINKING_REFUSAL,
        )),
        2 => reply(
            request,
            vec![
                signed_thinking("Then b."),
                call("t2", "read", json!({"path": "b"})),
            ],
            "tool_use",
        ),
        _ => reply(request, vec![text("done")], "end_turn"),
    })
    .recorded();
    let mut config = AgentConfig::new("claude-opus-5-5");
    config.extra.insert(
        "thinking".into(),
        json!({"type": "adaptive", "display": "summarized"}),
    );
    let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
    let events = collect(&agent, "go").await;
    let (reason, messages, turns) = stop(&events);
    common::assert_usage_events_add_up(&events);
    assert_eq!((reason, turns), (StopReason::EndTurn, 3), "{events:#?}");
    assert!(check_tool_pairing(&messages).is_ok());
    let requests = requests.lock().unwrap();
    assert_eq!(requests.len(), 4);
    for request in &requests[..2] {
        assert!(request.get("betas").is_none(), "{request}");
        assert!(
            request["thinking"].get("block_binding").is_none(),
            "{request}"
        );
    }
    for request in &requests[2..] {
        assert_eq!(
            request["thinking"],
            json!({"type": "adaptive", "display": "summarized", "block_binding": {"prefix_mismatch_behavior": "drop_block"}}),
        );
        assert_eq!(
            request["betas"],
            json!(["thinking-binding-controls-2026-08-01"])
        );
    }
    // The refused request and its resend carry the same history.
    assert_eq!(requests[1]["messages"], requests[2]["messages"]);
}

/// Asking once is enough: the same refusal with the setting already sent ends the run.
#[tokio::test]
async fn a_second_stale_thinking_refusal_ends_the_run() {
    let model = Arc::new(ScriptedModel::new(|n, request| match n {
        0 => reply(
            request,
            vec![
                signed_thinking("Look."),
                call("t1", "read", json!({"path": "a"})),
            ],
            "tool_use",
        ),
        _ => Err(ModelError::with_code(
            "invalid_request",
            STALE_THINKING_REFUSAL,
        )),
    }));
    let agent = Agent::new(
        AgentConfig::new("claude-opus-5-5"),
        model.clone(),
        executor(Default::default()),
    );
    let events = collect(&agent, "go").await;
    let (reason, _, _) = stop(&events);
    assert_eq!(reason, StopReason::Error, "{events:#?}");
    assert_eq!(model.calls(), 3);
}

/// The summary call clears every tool result, which changes the prefix of every later thinking
/// block: it is sent without thinking blocks (a summary needs none).
#[tokio::test]
async fn the_summary_call_is_sent_without_thinking_blocks() {
    let (model, requests) = ScriptedModel::new(|n, request| match n {
        0 => Err(too_long()),
        1 => reply(request, vec![text("Read a, then b.")], "end_turn"),
        _ => reply(request, vec![text("ok")], "end_turn"),
    })
    .recorded();
    let agent = Agent::new(
        AgentConfig::new("claude-opus-5-5"),
        Arc::new(model),
        executor(Default::default()),
    );
    let history = vec![
        json!({"role": "user", "content": "read a and b"}),
        json!({"role": "assistant", "content": [signed_thinking("a first"), call("t1", "read", json!({"path": "a"}))]}),
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "A"}]}),
        json!({"role": "assistant", "content": [{"type": "redacted_thinking", "data": "opaque"}]}),
        json!({"role": "user", "content": "and now?"}),
        json!({"role": "assistant", "content": [signed_thinking("then b"), call("t2", "read", json!({"path": "b"}))]}),
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "B"}]}),
    ];
    let events: Vec<AgentEvent> = agent.run_messages(history).collect().await;
    assert_eq!(stop(&events).0, StopReason::EndTurn, "{events:#?}");
    let requests = requests.lock().unwrap();
    let summary = &requests[1];
    assert!(summary.to_string().contains("Summarize this conversation"));
    let body = summary["messages"].to_string();
    assert!(!body.contains("thinking"), "{body}");
    assert_eq!(summary["messages"][0]["role"], "user");
    assert!(check_tool_pairing(summary["messages"].as_array().unwrap()).is_ok());
}

/// The stop event's reason, error and error code.
fn stop_code(events: &[AgentEvent]) -> (StopReason, Option<String>, Option<&'static str>) {
    match events.last() {
        Some(AgentEvent::Stop {
            reason,
            error,
            error_code,
            ..
        }) => (*reason, error.clone(), *error_code),
        other => panic!("the last event is not Stop: {other:?}"),
    }
}

/// A host's `Model` failing with a plain error stops the run with its code: `model_error` for
/// `ModelError::other`, the host's own for `ModelError::with_code`; the message is the error.
#[tokio::test]
async fn a_model_error_s_code_reaches_the_stop_event() {
    let agent = |error: fn() -> ModelError| {
        Agent::new(
            AgentConfig::new("m"),
            Arc::new(ScriptedModel::new(move |_, _| Err(error()))),
            executor(Default::default()),
        )
    };
    let plain = agent(|| ModelError::other("the backend is down"));
    let (reason, error, code) = stop_code(&collect(&plain, "go").await);
    assert_eq!(reason, StopReason::Error);
    assert_eq!(error.as_deref(), Some("the backend is down"));
    assert_eq!(code, Some("model_error"));

    let coded = agent(|| ModelError::with_code("authentication", "the key was revoked"));
    let (reason, error, code) = stop_code(&collect(&coded, "go").await);
    assert_eq!(reason, StopReason::Error);
    assert_eq!(error.as_deref(), Some("the key was revoked"));
    assert_eq!(code, Some("authentication"));

    let overloaded = agent(|| ModelError::overloaded("busy"));
    assert_eq!(
        stop_code(&collect(&overloaded, "go").await).2,
        Some("overloaded")
    );
}

/// The status, request id and wait the stop event carries.
fn stop_details(events: &[AgentEvent]) -> (Option<u16>, Option<String>, Option<Duration>) {
    match events.last() {
        Some(AgentEvent::Stop {
            status,
            request_id,
            retry_after,
            ..
        }) => (*status, request_id.clone(), *retry_after),
        other => panic!("the last event is not Stop: {other:?}"),
    }
}

/// A host's model that knows more of a failure than its text says so with
/// `ModelError::with_details`, and the stop event carries it; `ModelError::other` (and a run
/// that ends well) carries none, `null` on the wire.
#[tokio::test]
async fn a_host_model_s_failure_details_reach_the_stop_event() {
    let agent = |error: fn() -> ModelError| {
        Agent::new(
            AgentConfig::new("m"),
            Arc::new(ScriptedModel::new(move |_, _| Err(error()))),
            executor(Default::default()),
        )
    };
    let detailed = agent(|| {
        ModelError::with_code("rate_limited", "slow down").with_details(FailureDetails {
            status: Some(429),
            request_id: Some("req_host".into()),
            retry_after: Some(Duration::from_millis(1500)),
        })
    });
    let events = collect(&detailed, "go").await;
    assert_eq!(stop_code(&events).2, Some("rate_limited"));
    assert_eq!(
        stop_details(&events),
        (
            Some(429),
            Some("req_host".into()),
            Some(Duration::from_millis(1500))
        )
    );
    let wire = serde_json::to_value(events.last().unwrap()).unwrap();
    assert_eq!(
        (&wire["status"], &wire["request_id"], &wire["retry_after"]),
        (&json!(429), &json!("req_host"), &json!(1500.0))
    );

    let plain = agent(|| ModelError::other("the backend is down"));
    let events = collect(&plain, "go").await;
    assert_eq!(stop_code(&events).2, Some("model_error"));
    assert_eq!(stop_details(&events), (None, None, None));
    let wire = serde_json::to_value(events.last().unwrap()).unwrap();
    for key in ["status", "request_id", "retry_after"] {
        assert!(wire.get(key).is_some_and(Value::is_null), "{key}: {wire}");
    }

    let fine = ScriptedModel::new(|_, request| reply(request, vec![text("Hi.")], "end_turn"));
    let fine = Agent::new(
        AgentConfig::new("m"),
        Arc::new(fine),
        executor(Default::default()),
    );
    let events = collect(&fine, "go").await;
    assert_eq!(stop_code(&events).0, StopReason::EndTurn);
    assert_eq!(stop_details(&events), (None, None, None));
}

/// A stop on a stream cut again carries the details of the second cut call (the one the run
/// ends on); a `prompt_too_long` stop after the provider refused the prompt (and compaction
/// could not help: the history is the lone prompt) those of the refused call.
#[tokio::test]
async fn truncated_and_prompt_too_long_stops_carry_the_last_call_s_details() {
    let request_id = |id: &str| FailureDetails {
        request_id: Some(id.into()),
        ..FailureDetails::default()
    };
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let truncated = ScriptedModel::new(move |_, _| {
        let n = counted.fetch_add(1, Ordering::SeqCst);
        Err(ModelError::truncated("cut", Value::Null).with_details(request_id(&format!("req_{n}"))))
    });
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(truncated),
        executor(Default::default()),
    );
    let events = collect(&agent, "go").await;
    assert_eq!(stop_code(&events).2, Some("stream_truncated"));
    assert_eq!(calls.load(Ordering::SeqCst), 2, "asked again once");
    assert_eq!(stop_details(&events), (None, Some("req_1".into()), None));

    let refused = ScriptedModel::new(|_, _| {
        Err(
            ModelError::prompt_too_long("prompt is too long: 300000 tokens > 200000 maximum")
                .with_details(FailureDetails {
                    status: Some(400),
                    request_id: Some("req_big".into()),
                    retry_after: None,
                }),
        )
    });
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(refused),
        executor(Default::default()),
    );
    let events = collect(&agent, "go").await;
    assert_eq!(stop_code(&events).0, StopReason::PromptTooLong);
    assert_eq!(
        stop_details(&events),
        (Some(400), Some("req_big".into()), None)
    );
}

/// A run that ends well, or is stopped by a limit, has no error code.
#[tokio::test]
async fn a_run_that_did_not_fail_has_no_error_code() {
    let model = ScriptedModel::new(|_, request| reply(request, vec![text("Hi.")], "end_turn"));
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(model),
        executor(Default::default()),
    );
    let (reason, error, code) = stop_code(&collect(&agent, "go").await);
    assert_eq!((reason, error, code), (StopReason::EndTurn, None, None));
}

/// Each loop-side cause of a stop with an error has its code: a refused history, a refused
/// configuration, a model that panicked, a stream truncated twice, a prompt still too long
/// after compaction, a spent budget, a provider's error event.
#[tokio::test]
async fn loop_side_stops_have_their_codes() {
    let ok = || ScriptedModel::new(|_, request| reply(request, vec![text("Hi.")], "end_turn"));
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(ok()),
        executor(Default::default()),
    );
    let history = vec![
        json!({"role": "user", "content": "hi"}),
        json!({"role": "assistant", "content": "prefill"}),
    ];
    let events: Vec<AgentEvent> = agent.run_messages(history).collect().await;
    let (reason, error, code) = stop_code(&events);
    assert_eq!(reason, StopReason::Error);
    assert!(error.unwrap().starts_with("invalid conversation: "));
    assert_eq!(code, Some("invalid_history"));

    let agent = Agent::new(
        AgentConfig::new(""),
        Arc::new(ok()),
        executor(Default::default()),
    );
    let (reason, _, code) = stop_code(&collect(&agent, "go").await);
    assert_eq!(
        (reason, code),
        (StopReason::Error, Some("invalid_configuration"))
    );

    let panicking = ScriptedModel::new(|_, _| panic!("scripted panic"));
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(panicking),
        executor(Default::default()),
    );
    let (reason, error, code) = stop_code(&collect(&agent, "go").await);
    assert_eq!((reason, code), (StopReason::Error, Some("internal")));
    assert!(error.unwrap().contains("scripted panic"));

    let cut = ScriptedModel::new(|_, request| {
        let body = anthropic_sse(
            &scripted_message(request, vec![text("Half")], "end_turn"),
            7,
        );
        let at = body.find("event: message_stop").unwrap();
        Ok(Bytes::from(body[..at].to_owned()))
    });
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(cut),
        executor(Default::default()),
    );
    let (reason, _, code) = stop_code(&collect(&agent, "go").await);
    assert_eq!(
        (reason, code),
        (StopReason::Error, Some("stream_truncated"))
    );

    let too_long = ScriptedModel::new(|n, request| match n {
        1 => reply(request, vec![text("summary")], "end_turn"),
        _ => Err(ModelError::prompt_too_long("prompt is too long")),
    });
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(too_long),
        executor(Default::default()),
    );
    let (reason, error, code) = stop_code(&collect(&agent, "go").await);
    assert_eq!(
        (reason, code),
        (StopReason::PromptTooLong, Some("prompt_too_long"))
    );
    assert!(error.is_some());

    let mut config = AgentConfig::new("m");
    config.limits.token_budget = Some(1);
    let looping = ScriptedModel::new(|n, request| {
        reply(
            request,
            vec![call(&format!("t{n}"), "read", json!({"path": "a"}))],
            "tool_use",
        )
    });
    let agent = Agent::new(config, Arc::new(looping), executor(Default::default()));
    let (reason, _, code) = stop_code(&collect(&agent, "go").await);
    assert_eq!((reason, code), (StopReason::Budget, Some("token_budget")));

    let refused = ScriptedModel::new(|_, _| {
        Ok(Bytes::from_static(b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"authentication_error\",\"message\":\"bad key\"}}\n\n"))
    });
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(refused),
        executor(Default::default()),
    );
    let (reason, _, code) = stop_code(&collect(&agent, "go").await);
    assert_eq!((reason, code), (StopReason::Error, Some("authentication")));
}

/// A response cut by `max_tokens` inside a tool call, `t1` (a `write` too big for the limit):
/// the SSE of `content` with the call's input cut after `{"path": "big`.
fn cut_inside_a_write(request: &Value, content: Vec<Value>) -> Result<Bytes, ModelError> {
    let index = content.len();
    let message = scripted_message(request, content, "max_tokens");
    let mut sse = anthropic_sse(&message, 7);
    let cut = format!(
        "event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":{index},\"content_block\":{{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"write\",\"input\":{{}}}}}}\n\n\
         event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":{index},\"delta\":{{\"type\":\"input_json_delta\",\"partial_json\":\"{{\\\"path\\\": \\\"big\"}}}}\n\n\
         event: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":{index}}}\n\n"
    );
    let at = sse.find("event: message_delta").unwrap();
    sse.insert_str(at, &cut);
    Ok(Bytes::from(sse))
}

fn raised_events(events: &[AgentEvent]) -> Vec<(u32, u64, u64)> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::MaxTokensRaised { turn, from, to } => Some((*turn, *from, *to)),
            _ => None,
        })
        .collect()
}

/// A big `write` cut by the default 8,192-token limit could never fit: the continuation and
/// the "not run" note went out with the same limit, to be cut again. The turn is asked again
/// with the limit raised (Claude Code's 64,000, the ceiling of Sonnet 4.5), the call runs,
/// and the next turn goes back to the small limit; the discarded response's usage counts.
#[tokio::test]
async fn a_call_cut_by_max_tokens_is_asked_again_with_a_raised_limit_and_runs() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let (model, requests) = ScriptedModel::new(|n, request| match n {
        0 => cut_inside_a_write(request, vec![text("Writing it.")]),
        1 => reply(
            request,
            vec![
                text("Writing it."),
                call("t1", "write", json!({"path": "big"})),
            ],
            "tool_use",
        ),
        _ => reply(request, vec![text("Written.")], "end_turn"),
    })
    .recorded();
    let agent = Agent::new(
        AgentConfig::new("claude-sonnet-4-5"),
        Arc::new(model),
        executor(log.clone()),
    );
    let events = collect(&agent, "write a big file").await;
    let (reason, messages, turns) = stop(&events);
    common::assert_usage_events_add_up(&events);
    assert_eq!((reason, turns), (StopReason::EndTurn, 2), "{events:#?}");
    assert_eq!(*log.lock().unwrap(), vec!["write \"big\"".to_owned()]);
    assert!(check_tool_pairing(&messages).is_ok());
    let requests = requests.lock().unwrap();
    let limits: Vec<&Value> = requests.iter().map(|r| &r["max_tokens"]).collect();
    assert_eq!(limits, [&json!(8_192), &json!(64_000), &json!(8_192)]);
    // The same turn: nothing of the cut response, no continuation prompt or note.
    assert_eq!(requests[0]["messages"], requests[1]["messages"]);
    assert_eq!(raised_events(&events), [(1, 8_192, 64_000)]);
    let starts = turn_starts(&events);
    assert_eq!(starts, [1, 1, 2]);
    let reported: u64 = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Usage { usage, .. } => usage["output_tokens"].as_u64(),
            _ => None,
        })
        .sum();
    match events.last() {
        Some(AgentEvent::Stop { output_tokens, .. }) => assert_eq!(*output_tokens, reported),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, AgentEvent::Usage { .. }))
            .count(),
        3
    );
}

/// Text cut by the small limit is asked again with the raised one first (the first answer
/// discarded); a cut there too is continued as before, the continuation keeping the raised
/// limit, and the limit is not raised twice in a turn.
#[tokio::test]
async fn a_cut_text_response_is_asked_again_with_a_raised_limit_then_continued() {
    let (model, requests) = ScriptedModel::new(|n, request| match n {
        0 => reply(request, vec![text("A short start")], "max_tokens"),
        1 => reply(request, vec![text("A much longer start")], "max_tokens"),
        _ => reply(request, vec![text(" and its end.")], "end_turn"),
    })
    .recorded();
    let agent = Agent::new(
        AgentConfig::new("claude-sonnet-4-5"),
        Arc::new(model),
        executor(Default::default()),
    );
    let events = collect(&agent, "write a lot").await;
    let (reason, messages, turns) = stop(&events);
    common::assert_usage_events_add_up(&events);
    assert_eq!((reason, turns), (StopReason::EndTurn, 2), "{events:#?}");
    let requests = requests.lock().unwrap();
    let limits: Vec<&Value> = requests.iter().map(|r| &r["max_tokens"]).collect();
    assert_eq!(limits, [&json!(8_192), &json!(64_000), &json!(64_000)]);
    assert_eq!(requests[0]["messages"], requests[1]["messages"]);
    let said = requests[2]["messages"].to_string();
    assert!(said.contains("Resume directly"), "{said}");
    assert!(!said.contains("A short start"), "{said}");
    assert!(said.contains("A much longer start"), "{said}");
    assert_eq!(raised_events(&events), [(1, 8_192, 64_000)]);
    assert_eq!(messages.len(), 4);
}

/// Where the limit is raised to, and where it is not: the model's ceiling, the context window
/// left, a thinking budget kept under it; never for a model the table does not know, a limit
/// already at the ceiling, a host's own limit, or with escalation off (then the turn is
/// continued at once, as before).
#[tokio::test]
async fn the_raised_limit_respects_the_ceiling_the_window_and_the_host() {
    let with = |model: &str, edit: fn(&mut AgentConfig)| {
        let mut config = AgentConfig::new(model);
        edit(&mut config);
        config
    };
    // The raised limit expected, from the input tokens the cut response reported.
    type Raised = Option<fn(u64) -> u64>;
    let cases: Vec<(&str, AgentConfig, u64, Raised)> = vec![
        (
            "sonnet 4.5",
            with("claude-sonnet-4-5", |_| {}),
            8_192,
            Some(|_| 64_000),
        ),
        (
            "opus 4.1: its ceiling",
            with("claude-opus-4-1", |_| {}),
            8_192,
            Some(|_| 32_000),
        ),
        (
            "opus 4.6: the configured escalation",
            with("claude-opus-4-6", |_| {}),
            8_192,
            Some(|_| 64_000),
        ),
        (
            "a higher configured escalation, up to the ceiling",
            with("claude-opus-4-6", |c| {
                c.escalated_max_tokens = Some(200_000)
            }),
            8_192,
            Some(|_| 128_000),
        ),
        (
            "the window left",
            with("claude-sonnet-4-5", |c| {
                c.budget = ContextBudget::new(30_000, 8_192);
            }),
            8_192,
            Some(|input| 30_000 - input),
        ),
        (
            "thinking",
            with("claude-sonnet-4-5", |c| {
                c.limits.max_tokens = 16_000;
                c.extra.insert(
                    "thinking".into(),
                    json!({"type": "enabled", "budget_tokens": 10_000}),
                );
            }),
            16_000,
            Some(|_| 64_000),
        ),
        ("an unknown model", with("m", |_| {}), 8_192, None),
        (
            "3.5 sonnet: at its ceiling",
            with("claude-3-5-sonnet-latest", |_| {}),
            8_192,
            None,
        ),
        (
            "already at the ceiling",
            with("claude-sonnet-4-5", |c| c.limits.max_tokens = 64_000),
            64_000,
            None,
        ),
        (
            "the host's max_tokens",
            with("claude-sonnet-4-5", |c| {
                c.extra.insert("max_tokens".into(), json!(4_096));
            }),
            4_096,
            None,
        ),
        (
            "off",
            with("claude-sonnet-4-5", |c| c.escalated_max_tokens = None),
            8_192,
            None,
        ),
    ];
    for (case, config, first, raised) in cases {
        let (model, requests) = ScriptedModel::new(|n, request| match n {
            0 => reply(request, vec![text("Cut")], "max_tokens"),
            _ => reply(request, vec![text("Done.")], "end_turn"),
        })
        .recorded();
        let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
        let events = collect(&agent, "write a lot").await;
        assert_eq!(stop(&events).0, StopReason::EndTurn, "{case}: {events:#?}");
        let requests = requests.lock().unwrap();
        assert_eq!(requests[0]["max_tokens"], first, "{case}");
        let said = requests[1]["messages"].to_string();
        let input = events
            .iter()
            .find_map(|e| match e {
                AgentEvent::Usage { usage, .. } => usage["input_tokens"].as_u64(),
                _ => None,
            })
            .unwrap();
        match raised.map(|raised| raised(input)) {
            Some(to) => {
                assert_eq!(requests[1]["max_tokens"], to, "{case}");
                assert!(!said.contains("Resume directly"), "{case}: {said}");
                assert_eq!(raised_events(&events), [(1, first, to)], "{case}");
                if let Some(budget) = requests[1]["thinking"]["budget_tokens"].as_u64() {
                    assert!(budget < to, "{case}");
                }
            }
            None => {
                assert_eq!(requests[1]["max_tokens"], first, "{case}");
                assert!(said.contains("Resume directly"), "{case}: {said}");
                assert!(raised_events(&events).is_empty(), "{case}");
            }
        }
    }
}

/// The continuations after a cut at the raised limit keep it only as far as the window allows:
/// it was sized for the input of the cut request, and the continued text has grown the input.
#[tokio::test]
async fn a_raised_limit_shrinks_to_the_window_left_as_continuations_grow_the_input() {
    let long = "word ".repeat(6_000);
    let (model, requests) = ScriptedModel::new(move |n, request| match n {
        0 => reply(request, vec![text("Cut")], "max_tokens"),
        1 => reply(request, vec![text(&long)], "max_tokens"),
        _ => reply(request, vec![text("End.")], "end_turn"),
    })
    .recorded();
    let mut config = AgentConfig::new("claude-sonnet-4-5");
    config.budget = ContextBudget::new(40_000, 8_192);
    let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
    let events = collect(&agent, "write a lot").await;
    assert_eq!(stop(&events).0, StopReason::EndTurn, "{events:#?}");
    let estimates: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::TurnStart {
                estimated_input_tokens,
                ..
            } => Some(*estimated_input_tokens),
            _ => None,
        })
        .collect();
    let requests = requests.lock().unwrap();
    let limits: Vec<u64> = requests
        .iter()
        .map(|r| r["max_tokens"].as_u64().unwrap())
        .collect();
    assert_eq!(limits.len(), 3, "{events:#?}");
    assert_eq!(limits[0], 8_192);
    assert!(limits[1] > 30_000, "{limits:?}");
    assert!(estimates[2] > estimates[1] + 4_000, "{estimates:?}");
    assert_eq!(limits[2], 40_000 - estimates[2], "{limits:?} {estimates:?}");
    assert!(
        requests[2]["messages"]
            .to_string()
            .contains("Resume directly")
    );
}

/// A response cut inside a call with nothing before it, at the raised limit too: the one
/// continuation that tells the model its call was not run (the request changes) is made, but
/// when that is cut the same way nothing of it can be kept and nothing new can be said, so the
/// same request would go out again, a whole generation at the raised limit each time, until
/// the continuations ran out (5 calls before, 4 of them at 64,000). The run stops instead, with
/// `max_tokens` and an error naming why. Without escalation (a model the table does not know),
/// the same after the note; a cut with no call to name (only thinking cut before its
/// signature) is not resent at all.
#[tokio::test]
async fn a_continuation_that_would_resend_the_same_request_stops_the_run() {
    let thinking_only = |request: &Value| {
        // Thinking cut before its signature: dropped, as the API would refuse it sent back.
        let message = scripted_message(
            request,
            vec![json!({"type": "thinking", "thinking": "Let me think about a very long"})],
            "max_tokens",
        );
        Ok(Bytes::from(anthropic_sse(&message, 7)))
    };
    type Script = fn(&Value) -> Result<Bytes, ModelError>;
    let cases: [(&str, &str, Script, &[u64]); 3] = [
        (
            "escalated",
            "claude-sonnet-4-5",
            |request| cut_inside_a_write(request, vec![]),
            &[8_192, 64_000, 64_000],
        ),
        (
            "not escalated",
            "m",
            |request| cut_inside_a_write(request, vec![]),
            &[8_192, 8_192],
        ),
        ("nothing to name", "m", thinking_only, &[8_192]),
    ];
    for (case, model_name, script, limits) in cases {
        let log = Arc::new(Mutex::new(Vec::new()));
        let (model, requests) = ScriptedModel::new(move |_, request| script(request)).recorded();
        let agent = Agent::new(
            AgentConfig::new(model_name),
            Arc::new(model),
            executor(log.clone()),
        );
        let events = collect(&agent, "write a big file").await;
        common::assert_usage_events_add_up(&events);
        let (reason, error, code) = stop_code(&events);
        assert_eq!(reason, StopReason::MaxTokens, "{case}: {events:#?}");
        assert_eq!(code, Some("max_tokens_no_progress"), "{case}");
        let error = error.unwrap_or_default();
        assert!(
            error.contains("nothing of it could be kept"),
            "{case}: {error}"
        );
        let requests = requests.lock().unwrap();
        let sent: Vec<u64> = requests
            .iter()
            .map(|r| r["max_tokens"].as_u64().unwrap())
            .collect();
        assert_eq!(sent, limits, "{case}");
        // No two requests of the run are the same.
        for (i, a) in requests.iter().enumerate() {
            for b in &requests[i + 1..] {
                assert_ne!(a, b, "{case}: a request was sent twice");
            }
        }
        assert!(log.lock().unwrap().is_empty(), "{case}: the cut call ran");
        let (_, messages, _) = stop(&events);
        assert!(check_tool_pairing(&messages).is_ok(), "{case}");
    }
}

/// A call whose stream broke off after the provider reported its usage counts toward the run's
/// totals, and is reported in a `usage` event like any call, before its `turn_end`: before,
/// the totals counted it with no event, so a host summing the events (`ferroloop run`'s
/// "estimated input N vs reported M") saw nothing of it — 0 and 0 when the retry broke off too.
#[tokio::test]
async fn a_truncated_call_s_usage_is_reported_in_a_usage_event() {
    for both_cut in [false, true] {
        let model = ScriptedModel::new(move |n, request| {
            let mut message = scripted_message(request, vec![text("Hello there.")], "end_turn");
            message["usage"] = json!({"input_tokens": 1_000, "output_tokens": 10});
            let sse = anthropic_sse(&message, 7);
            if n == 0 || both_cut {
                let cut = sse.find("event: message_delta").unwrap();
                Ok(Bytes::from(sse[..cut].to_owned()))
            } else {
                Ok(Bytes::from(sse))
            }
        });
        let agent = Agent::new(
            AgentConfig::new("m"),
            Arc::new(model),
            executor(Default::default()),
        );
        let events = collect(&agent, "hi").await;
        common::assert_usage_events_add_up(&events);
        let usages: Vec<(u32, u64, u64)> = events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::Usage {
                    turn,
                    usage,
                    estimated_input_tokens,
                    ..
                } => Some((
                    *turn,
                    usage["input_tokens"].as_u64().unwrap_or(0),
                    *estimated_input_tokens,
                )),
                _ => None,
            })
            .collect();
        assert_eq!(usages.len(), 2, "{both_cut}: {events:#?}");
        assert!(
            usages
                .iter()
                .all(|&(turn, input, estimated)| turn == 1 && input == 1_000 && estimated > 0),
            "{both_cut}: {usages:?}"
        );
        // Each call's usage comes before its turn_end.
        let order: Vec<&str> = events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::Usage { .. } => Some("usage"),
                AgentEvent::TurnEnd { .. } => Some("turn_end"),
                _ => None,
            })
            .collect();
        assert_eq!(
            order,
            ["usage", "turn_end", "usage", "turn_end"],
            "{both_cut}"
        );
        let (reason, _, code) = stop_code(&events);
        let expected = if both_cut {
            (StopReason::Error, Some("stream_truncated"))
        } else {
            (StopReason::EndTurn, None)
        };
        assert_eq!((reason, code), expected);
        match events.last() {
            Some(AgentEvent::Stop { input_tokens, .. }) => assert_eq!(*input_tokens, 2_000),
            other => panic!("{other:?}"),
        }
    }
}

/// The summariser's answer cut by the output limit was taken as the summary: the history was
/// replaced by the first part of a summary, what the rest would have said lost. Now a cut
/// summary is asked again once with the raised limit, as a turn is; one that cannot be (a
/// model the table does not know) or is cut again is not used: the history stays whole.
#[tokio::test]
async fn a_summary_cut_by_the_output_limit_never_replaces_the_history() {
    // (model, the summary calls' stop reasons, whether a summary is used)
    // A refusal is no summary either.
    let cases: [(&str, &[&str], bool); 5] = [
        ("claude-sonnet-4-5", &["max_tokens", "end_turn"], true),
        ("claude-sonnet-4-5", &["max_tokens", "max_tokens"], false),
        ("m", &["max_tokens"], false),
        ("m", &["model_context_window_exceeded"], false),
        ("claude-sonnet-4-5", &["refusal"], false),
    ];
    for (model_name, stops, used) in cases {
        let summaries = Arc::new(AtomicUsize::new(0));
        let seen = summaries.clone();
        let (model, requests) = ScriptedModel::new(move |_, request| {
            if request.to_string().contains("Summarize this conversation") {
                let n = seen.fetch_add(1, Ordering::Relaxed);
                let stop = stops.get(n).copied().unwrap_or("end_turn");
                let summary = if stop == "end_turn" {
                    "the whole summary"
                } else {
                    "the first part of a summ"
                };
                return reply(request, vec![text(summary)], stop);
            }
            reply(request, vec![text("hi")], "end_turn")
        })
        .recorded();
        let mut config = AgentConfig::new(model_name);
        config.budget = thresholds(1_000, 1_000_000);
        let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
        let events: Vec<AgentEvent> = agent
            .run_messages(vec![
                json!({"role": "user", "content": big_prompt(5_000)}),
                json!({"role": "assistant", "content": "earlier answer"}),
                json!({"role": "user", "content": "and now?"}),
            ])
            .collect()
            .await;
        let case = format!("{model_name} {stops:?}");
        let (reason, messages, _) = stop(&events);
        common::assert_usage_events_add_up(&events);
        assert_eq!(reason, StopReason::EndTurn, "{case}: {events:#?}");
        let history = serde_json::to_string(&messages).unwrap();
        assert!(
            !history.contains("the first part of a summ"),
            "{case}: {history}"
        );
        let compacted = events
            .iter()
            .any(|e| matches!(e, AgentEvent::Context(ContextAction::Compaction { .. })));
        assert_eq!(compacted, used, "{case}");
        assert_eq!(history.contains("the whole summary"), used, "{case}");
        assert_eq!(history.contains("earlier answer"), !used, "{case}");
        assert_eq!(summaries.load(Ordering::Relaxed), stops.len(), "{case}");
        let limits: Vec<u64> = requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.to_string().contains("Summarize this conversation"))
            .map(|r| r["max_tokens"].as_u64().unwrap())
            .collect();
        let expected: &[u64] = if stops[0] == "max_tokens" && model_name != "m" {
            &[8_192, 64_000]
        } else {
            &[8_192]
        };
        assert_eq!(limits, expected, "{case}");
    }
}

/// A turn asked again with the limit raised for the model (Sonnet 4.5: 64,000), then
/// answered by the fallback model after an overload: the raise was sized for the model that
/// was cut, and went to the fallback as it was — over the ceiling of a fallback with a lower
/// one (Claude 3.5 Sonnet: 8,192), which the API refuses, ending the run with an error. The
/// raised limit now fits the fallback: its ceiling, or, for a model the table does not know
/// (never raised for), the configured limit.
#[tokio::test]
async fn a_raised_limit_fits_the_fallback_model_it_goes_to() {
    for (fallback, expected) in [
        ("claude-3-5-sonnet-latest", 8_192),
        ("m-unknown", 8_192),
        ("claude-opus-4-1", 32_000),
        ("claude-opus-4-6", 64_000),
    ] {
        let (model, requests) = ScriptedModel::new(|n, request| match n {
            0 => reply(request, vec![text("Cut")], "max_tokens"),
            1 => Err(ModelError::overloaded("busy")),
            _ => reply(request, vec![text("Whole.")], "end_turn"),
        })
        .recorded();
        let mut config = AgentConfig::new("claude-sonnet-4-5");
        config.fallback_model = Some(fallback.into());
        let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
        let events = collect(&agent, "write a lot").await;
        assert_eq!(
            stop(&events).0,
            StopReason::EndTurn,
            "{fallback}: {events:#?}"
        );
        let requests = requests.lock().unwrap();
        let limits: Vec<(&str, u64)> = requests
            .iter()
            .map(|r| {
                (
                    r["model"].as_str().unwrap(),
                    r["max_tokens"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            limits,
            [
                ("claude-sonnet-4-5", 8_192),
                ("claude-sonnet-4-5", 64_000),
                (fallback, expected)
            ],
            "{fallback}"
        );
    }
}

/// A response cut by the context window with nothing kept is not stopped as one that cannot
/// make progress when the context management before the next call compacts the history that
/// filled the window, which changes the request. (A lone prompt, which compaction leaves as it
/// is, stops instead of sending the same request again:
/// `a_window_cut_that_would_send_the_same_request_again_stops` in `agent_turn_ends.rs`.)
#[tokio::test]
async fn a_cut_by_the_context_window_with_nothing_kept_is_left_to_compaction() {
    let (model, requests) = ScriptedModel::new(|n, request| match n {
        0 => {
            let mut message = scripted_message(request, vec![], "model_context_window_exceeded");
            message["usage"] = json!({"input_tokens": 190_000, "output_tokens": 9_000});
            Ok(Bytes::from(anthropic_sse(&message, 7)))
        }
        // The summary, then the turn.
        _ => reply(request, vec![text("Done.")], "end_turn"),
    })
    .recorded();
    let agent = Agent::new(
        AgentConfig::new("claude-sonnet-4-5"),
        Arc::new(model),
        executor(Default::default()),
    );
    let events: Vec<AgentEvent> = agent.run_messages(long_conversation("go")).collect().await;
    let (reason, _, code) = stop_code(&events);
    assert_eq!((reason, code), (StopReason::EndTurn, None), "{events:#?}");
    let requests = requests.lock().unwrap();
    assert_eq!(requests.len(), 3);
    assert_ne!(requests[0]["messages"], requests[2]["messages"]);
}

/// The summariser's call whose stream broke off after the provider reported its input was
/// billed for it, as a turn's is: it counts toward the run's tokens and budgets (it counted
/// for nothing, so a budget could be overrun by summaries that kept breaking off). It is asked
/// again once, as a turn is; the second call, broken too, is billed as well.
#[tokio::test]
async fn a_broken_summary_call_s_reported_usage_counts_toward_the_run_s_tokens() {
    let model = ScriptedModel::new(|_, request| {
        if request.to_string().contains("Summarize this conversation") {
            let mut message = scripted_message(request, vec![text("a summary")], "end_turn");
            message["usage"] = json!({"input_tokens": 40_000, "output_tokens": 1});
            let sse = anthropic_sse(&message, 7);
            let cut = sse.find("event: message_delta").unwrap();
            return Ok(Bytes::from(sse[..cut].to_owned()));
        }
        let mut message = scripted_message(request, vec![text("hi")], "end_turn");
        message["usage"] = json!({"input_tokens": 100, "output_tokens": 10});
        Ok(Bytes::from(anthropic_sse(&message, 7)))
    });
    let mut config = AgentConfig::new("m");
    config.budget = thresholds(1_000, 1_000_000);
    let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
    let events: Vec<AgentEvent> = agent
        .run_messages(vec![
            json!({"role": "user", "content": big_prompt(5_000)}),
            json!({"role": "assistant", "content": "earlier answer"}),
            json!({"role": "user", "content": "and now?"}),
        ])
        .collect()
        .await;
    common::assert_usage_events_add_up(&events);
    match events.last() {
        Some(AgentEvent::Stop {
            reason,
            input_tokens,
            ..
        }) => {
            assert_eq!(*reason, StopReason::EndTurn);
            assert_eq!(*input_tokens, 80_100, "{events:#?}");
        }
        other => panic!("{other:?}"),
    }
    let summary_calls = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                AgentEvent::Usage {
                    call: UsageCall::Compaction,
                    ..
                }
            )
        })
        .count();
    assert_eq!(summary_calls, 2, "{events:#?}");
}

/// A model whose first response (1,000 tokens in) is cut by `max_tokens` after 8,192 output
/// tokens and whose later ones are whole, with the requests it got.
fn cut_once_then_whole() -> (ScriptedModel, Arc<Mutex<Vec<Value>>>) {
    ScriptedModel::new(|n, request| {
        let (content, stop) = match n {
            0 => (vec![text("Cut")], "max_tokens"),
            _ => (vec![text("Whole.")], "end_turn"),
        };
        let mut message = scripted_message(request, content, stop);
        let output = if n == 0 { 8_192 } else { 10 };
        message["usage"] = json!({"input_tokens": 1_000, "output_tokens": output});
        Ok(Bytes::from(anthropic_sse(&message, 7)))
    })
    .recorded()
}

/// The raised limit fits what the token budget leaves: raised to 64,000 whatever the budget,
/// one escalated call could overrun it by eight times what a call at the small limit could.
/// A budget that leaves no more than the small limit is not raised for: the turn is
/// continued, as without escalation.
#[tokio::test]
async fn a_raised_limit_fits_what_the_token_budget_leaves() {
    // (budget, the second request's limit, whether it was raised)
    for (budget, expected, raised) in [
        (None, 64_000, true),
        (Some(30_000), 30_000 - 9_192 - 1_000, true),
        (Some(12_000), 8_192, false),
    ] {
        let (model, requests) = cut_once_then_whole();
        let mut config = AgentConfig::new("claude-sonnet-4-5");
        config.limits.token_budget = budget;
        let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
        let events = collect(&agent, "write a lot").await;
        assert_eq!(
            stop(&events).0,
            StopReason::EndTurn,
            "{budget:?}: {events:#?}"
        );
        let requests = requests.lock().unwrap();
        assert_eq!(
            requests[1]["max_tokens"], expected,
            "{budget:?} {events:#?}"
        );
        assert_eq!(
            raised_events(&events).len(),
            usize::from(raised),
            "{budget:?}"
        );
    }
    // A cost budget alike: output at 1 per million tokens, input free, 0.03 to spend, 8,192
    // output tokens spent by the cut response.
    let (model, requests) = cut_once_then_whole();
    let mut config = AgentConfig::new("claude-sonnet-4-5");
    config.limits.cost_budget = Some(0.03);
    config.limits.prices.insert(
        "claude-sonnet-4-5".into(),
        ferroloop::agent::Price {
            output: 1.0,
            ..Default::default()
        },
    );
    let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
    let events = collect(&agent, "write a lot").await;
    assert_eq!(stop(&events).0, StopReason::EndTurn, "{events:#?}");
    let limit = requests.lock().unwrap()[1]["max_tokens"].as_u64().unwrap();
    assert!((21_800..=21_808).contains(&limit), "{limit}");
}

/// The continuation prompt that a note on cut calls was added to (a response cut in its text,
/// then one cut inside a call with nothing kept) is still the loop's own prompt: a compaction
/// kept it as the user's latest prompt, in place of the user's, once the note made its content
/// blocks instead of a string.
#[tokio::test]
async fn compaction_after_a_note_on_a_continuation_keeps_the_user_s_prompt() {
    let model = ScriptedModel::new(move |n, request| {
        if request.to_string().contains("Summarize this conversation") {
            return reply(
                request,
                vec![text("An essay was being written.")],
                "end_turn",
            );
        }
        match n {
            0 => reply(request, vec![text("The first half")], "max_tokens"),
            1 => cut_inside_a_write(request, vec![]),
            2 => Err(ModelError::prompt_too_long(
                "prompt is too long: 300000 tokens > 200000 maximum",
            )),
            _ => reply(request, vec![text("The essay, whole.")], "end_turn"),
        }
    });
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(model),
        executor(Default::default()),
    );
    let events = collect(&agent, "write a long essay about rivers").await;
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AgentEvent::Context(ContextAction::Compaction { .. }))),
        "{events:#?}"
    );
    let (reason, messages, _) = stop(&events);
    assert_eq!(reason, StopReason::EndTurn, "{events:#?}");
    let first = messages[0].to_string();
    assert!(first.contains("write a long essay about rivers"), "{first}");
    assert!(!first.contains("Resume directly"), "{first}");
}

/// The events of a run of "go" cancelled at the first event `cancel_at` picks (the run must end
/// within 10 s of each event).
async fn run_cancelled_at(
    agent: &Agent,
    cancel_at: impl Fn(&AgentEvent) -> bool,
) -> Vec<AgentEvent> {
    let mut run = agent.run("go");
    let mut events = Vec::new();
    while let Some(event) = tokio::time::timeout(Duration::from_secs(10), run.next())
        .await
        .expect("the run hung")
    {
        if cancel_at(&event) {
            run.cancel();
        }
        events.push(event);
    }
    events
}

/// A model whose stream reports its input usage, then text, then never ends.
struct StartsThenHangs;

impl Model for StartsThenHangs {
    fn stream(&self, _request: Value) -> ModelStream {
        let start = ModelEvent::Decoded(ferroloop::decode::DecodeEvent::MessageStart {
            message: json!({
                "id": "msg_1", "type": "message", "role": "assistant", "content": [],
                "usage": {"input_tokens": 150_000, "cache_read_input_tokens": 2_000, "output_tokens": 1},
            }),
        });
        let delta = ModelEvent::Decoded(ferroloop::decode::DecodeEvent::MessageDelta {
            delta: json!({}),
            usage: json!({"output_tokens": 40, "input_tokens": null}),
        });
        let text = ModelEvent::Decoded(ferroloop::decode::DecodeEvent::TextDelta {
            index: 0,
            text: "Thinking aloud".into(),
        });
        Box::pin(futures::stream::iter([start, delta, text]).chain(futures::stream::pending()))
    }
}

/// A run cancelled while the model streams was billed for the input the provider reported at
/// the stream's start: the run's totals count it and a `usage` event reports it, as for a
/// stream that broke off (they said 0 tokens in, as `ferroloop run`'s summary after Ctrl-C).
#[tokio::test]
async fn a_cancelled_call_s_reported_usage_counts_toward_the_run_s_tokens() {
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(StartsThenHangs),
        executor(Default::default()),
    );
    let events = run_cancelled_at(&agent, |e| matches!(e, AgentEvent::TextDelta { .. })).await;
    let usages = common::usage_values(&events);
    common::assert_usage_events_add_up(&events);
    assert_eq!(usages.len(), 1, "{events:#?}");
    assert_eq!(usages[0]["input_tokens"], 150_000);
    assert_eq!(usages[0]["output_tokens"], 40);
    match events.last() {
        Some(AgentEvent::Stop {
            reason,
            input_tokens,
            output_tokens,
            ..
        }) => {
            assert_eq!(*reason, StopReason::Aborted);
            assert_eq!((*input_tokens, *output_tokens), (152_000, 40));
        }
        other => panic!("{other:?}"),
    }
}

/// A model whose stream, as an OpenAI translation's, reports no usage before its end: its
/// start, text, then nothing more.
struct StreamsWithoutUsageThenHangs;

impl Model for StreamsWithoutUsageThenHangs {
    fn stream(&self, _request: Value) -> ModelStream {
        let start = ModelEvent::Decoded(ferroloop::decode::DecodeEvent::MessageStart {
            message: json!({
                "id": "chatcmpl-1", "type": "message", "role": "assistant", "content": [],
            }),
        });
        let text = ModelEvent::Decoded(ferroloop::decode::DecodeEvent::TextDelta {
            index: 0,
            text: "Thinking aloud".into(),
        });
        Box::pin(futures::stream::iter([start, text]).chain(futures::stream::pending()))
    }
}

/// A run cancelled while a stream that reports usage only at its end (OpenAI's) was delivering
/// was billed all the same: the call has its `usage` event, with `usage: null` and the
/// request's estimate, as a stream that broke off before its usage has. It had none, so a host
/// summing the events missed the call.
#[tokio::test]
async fn a_call_cancelled_before_it_reported_usage_has_a_null_usage_event() {
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(StreamsWithoutUsageThenHangs),
        executor(Default::default()),
    );
    let events = run_cancelled_at(&agent, |e| matches!(e, AgentEvent::TextDelta { .. })).await;
    let usages: Vec<(&Value, u64)> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Usage {
                usage,
                estimated_input_tokens,
                ..
            } => Some((usage, *estimated_input_tokens)),
            _ => None,
        })
        .collect();
    assert_eq!(usages.len(), 1, "{events:#?}");
    assert_eq!(usages[0].0, &Value::Null, "{events:#?}");
    assert!(usages[0].1 > 0, "{events:#?}");
    common::assert_usage_events_add_up(&events);
    let (reason, _, _) = stop(&events);
    assert_eq!(reason, StopReason::Aborted, "{events:#?}");
}

/// A run cancelled before its call delivered anything has no `usage` event: nothing is known
/// of that call.
#[tokio::test]
async fn a_call_cancelled_before_its_first_event_has_no_usage_event() {
    struct Hangs;
    impl Model for Hangs {
        fn stream(&self, _request: Value) -> ModelStream {
            Box::pin(futures::stream::pending())
        }
    }
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(Hangs),
        executor(Default::default()),
    );
    let events = run_cancelled_at(&agent, |e| matches!(e, AgentEvent::TurnStart { .. })).await;
    assert!(common::usage_values(&events).is_empty(), "{events:#?}");
    let (reason, _, _) = stop(&events);
    assert_eq!(reason, StopReason::Aborted, "{events:#?}");
}

/// The input and output tokens of a run's `usage` events, in order.
fn usage_tokens(events: &[AgentEvent]) -> Vec<(u64, u64)> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Usage { usage, .. } => Some((
                usage["input_tokens"].as_u64().unwrap_or(0),
                usage["output_tokens"].as_u64().unwrap_or(0),
            )),
            _ => None,
        })
        .collect()
}

/// A call whose stream reported its usage at `message_start` and then failed with an error
/// event (overloaded, a server error) was billed for its input like one that broke off: the
/// totals count it and a `usage` event reports it, whether the run goes on (with the fallback
/// model, or asking the turn again once) or stops. Before, only a truncated stream's usage
/// counted: these calls were in neither the totals nor the events.
#[tokio::test]
async fn a_call_failing_after_message_start_is_counted_and_reported() {
    const SERVER_ERROR: &str = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"Internal\"}}\n\n";
    // (error event, fallback configured, calls that fail, stop reason, usage events expected)
    let cases = [
        (OVERLOADED_EVENT, true, 1, StopReason::EndTurn, 2),
        (OVERLOADED_EVENT, false, 1, StopReason::EndTurn, 2),
        (OVERLOADED_EVENT, false, 2, StopReason::Error, 2),
        (SERVER_ERROR, false, 1, StopReason::EndTurn, 2),
        (SERVER_ERROR, false, 2, StopReason::Error, 2),
    ];
    for (error, fallback, failing, expected, count) in cases {
        let model = ScriptedModel::new(move |n, request| {
            let mut message = scripted_message(request, vec![text("Half an ans")], "end_turn");
            message["usage"] = json!({"input_tokens": 1_000, "output_tokens": 10});
            let sse = anthropic_sse(&message, 7);
            if n < failing {
                let cut = sse.find("event: message_delta").unwrap();
                Ok(Bytes::from(format!("{}{error}", &sse[..cut])))
            } else {
                Ok(Bytes::from(sse))
            }
        });
        let config = if fallback {
            fallback_config()
        } else {
            AgentConfig::new("claude-primary")
        };
        let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
        let events = collect(&agent, "go").await;
        let case = format!("{error:?} fallback {fallback}, {failing} failing");
        assert_eq!(stop(&events).0, expected, "{case}: {events:#?}");
        assert_eq!(usage_tokens(&events).len(), count, "{case}: {events:#?}");
        assert_eq!(usage_tokens(&events)[0], (1_000, 1), "{case}");
        common::assert_usage_events_add_up(&events);
        match events.last() {
            Some(AgentEvent::Stop { input_tokens, .. }) => {
                assert_eq!(*input_tokens, 1_000 * count as u64, "{case}");
            }
            other => panic!("{other:?}"),
        }
    }
}

/// Answers like `inner`, except that a summary request reports its usage at `message_start`
/// and a delta, then never ends; `started` is notified once it has.
struct SummaryStartsThenHangs {
    inner: ScriptedModel,
    started: Arc<tokio::sync::Notify>,
}

impl Model for SummaryStartsThenHangs {
    fn stream(&self, request: Value) -> ModelStream {
        if !request.to_string().contains("Summarize this conversation") {
            return self.inner.stream(request);
        }
        let start = ModelEvent::Decoded(ferroloop::decode::DecodeEvent::MessageStart {
            message: json!({
                "id": "msg_s", "type": "message", "role": "assistant", "content": [],
                "usage": {"input_tokens": 30_000, "cache_read_input_tokens": 500, "output_tokens": 1},
            }),
        });
        let delta = ModelEvent::Decoded(ferroloop::decode::DecodeEvent::MessageDelta {
            delta: json!({}),
            usage: json!({"output_tokens": 12}),
        });
        let started = self.started.clone();
        let hang = futures::stream::once(async move {
            started.notify_one();
            futures::future::pending::<ModelEvent>().await
        });
        Box::pin(futures::stream::iter([start, delta]).chain(hang))
    }
}

/// A run cancelled during the summariser's call, after the provider reported the call's usage,
/// was billed for it: the totals count it and a `usage` event reports it, as for a turn's call
/// cancelled mid-stream. Before, a cancelled summary call counted for nothing.
#[tokio::test]
async fn a_cancel_during_a_summary_call_counts_and_reports_its_usage() {
    let started = Arc::new(tokio::sync::Notify::new());
    let model = SummaryStartsThenHangs {
        inner: ScriptedModel::new(|_, request| reply(request, vec![text("hi")], "end_turn")),
        started: started.clone(),
    };
    let mut config = AgentConfig::new("m");
    config.budget = thresholds(1_000, 1_000_000);
    let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
    let run = agent.run_messages(vec![
        json!({"role": "user", "content": big_prompt(5_000)}),
        json!({"role": "assistant", "content": "earlier answer"}),
        json!({"role": "user", "content": "and now?"}),
    ]);
    let token = run.cancellation_token().clone();
    tokio::spawn(async move {
        started.notified().await;
        token.cancel();
    });
    let events: Vec<AgentEvent> = tokio::time::timeout(Duration::from_secs(10), run.collect())
        .await
        .expect("the run hung in the summariser after a cancel");
    let (reason, _, turns) = stop(&events);
    assert_eq!((reason, turns), (StopReason::Aborted, 0), "{events:#?}");
    assert_eq!(usage_tokens(&events), [(30_000, 12)], "{events:#?}");
    common::assert_usage_events_add_up(&events);
    match events.last() {
        Some(AgentEvent::Stop {
            input_tokens,
            output_tokens,
            ..
        }) => assert_eq!((*input_tokens, *output_tokens), (30_500, 12)),
        other => panic!("{other:?}"),
    }
}

/// (turn, call, input tokens) of each `usage` event, and the position of each event among the
/// `usage`, `context` compaction and `turn_start` events, in order.
fn usage_calls(events: &[AgentEvent]) -> (Vec<(u32, &'static str, u64)>, Vec<String>) {
    let mut calls = Vec::new();
    let mut order = Vec::new();
    for event in events {
        match event {
            AgentEvent::Usage {
                turn, call, usage, ..
            } => {
                calls.push((
                    *turn,
                    call.as_str(),
                    usage["input_tokens"].as_u64().unwrap(),
                ));
                order.push(format!("usage {}", call.as_str()));
            }
            AgentEvent::Context(ContextAction::Compaction { .. }) => {
                order.push("compaction".into())
            }
            AgentEvent::TurnStart { turn, .. } => order.push(format!("turn_start {turn}")),
            _ => {}
        }
    }
    (calls, order)
}

/// The summariser's calls are accounted for by `usage` events of their own (`call`
/// `compaction`), numbered with the turn the compaction is made for (the next `turn_start`'s)
/// and coming before the compaction's `context` event: auto compaction before the first turn,
/// reactive compaction after a turn refused as too long, and a summary cut by the output limit
/// and asked again (two calls, two events). Before, their usage was in the totals only.
#[tokio::test]
async fn summariser_calls_have_usage_events_of_their_own() {
    let summary_reply = |request: &Value, stop: &str| {
        let mut message = scripted_message(request, vec![text("a summary")], stop);
        message["usage"] = json!({"input_tokens": 7_000, "output_tokens": 300});
        Ok(Bytes::from(anthropic_sse(&message, 7)))
    };
    let history = || {
        vec![
            json!({"role": "user", "content": big_prompt(5_000)}),
            json!({"role": "assistant", "content": "earlier answer"}),
            json!({"role": "user", "content": "and now?"}),
        ]
    };
    let turn_reply = |request: &Value| {
        let mut message = scripted_message(request, vec![text("hi")], "end_turn");
        message["usage"] = json!({"input_tokens": 100, "output_tokens": 10});
        Ok(Bytes::from(anthropic_sse(&message, 7)))
    };

    // Auto compaction before the first turn, its summary cut once and asked again.
    let summaries = Arc::new(AtomicUsize::new(0));
    let seen = summaries.clone();
    let model = ScriptedModel::new(move |_, request| {
        if request.to_string().contains("Summarize this conversation") {
            let n = seen.fetch_add(1, Ordering::Relaxed);
            return summary_reply(request, if n == 0 { "max_tokens" } else { "end_turn" });
        }
        turn_reply(request)
    });
    let mut config = AgentConfig::new("claude-sonnet-4-5");
    config.budget = thresholds(1_000, 1_000_000);
    let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
    let events: Vec<AgentEvent> = agent.run_messages(history()).collect().await;
    assert_eq!(stop(&events).0, StopReason::EndTurn, "{events:#?}");
    let (calls, order) = usage_calls(&events);
    assert_eq!(
        calls,
        [
            (1, "compaction", 7_000),
            (1, "compaction", 7_000),
            (1, "turn", 100)
        ]
    );
    assert_eq!(
        order,
        [
            "usage compaction",
            "usage compaction",
            "compaction",
            "turn_start 1",
            "usage turn"
        ]
    );
    common::assert_usage_events_add_up(&events);
    let summary_event = events
        .iter()
        .find(|e| matches!(e, AgentEvent::Usage { .. }))
        .unwrap();
    let json = serde_json::to_value(summary_event).unwrap();
    assert_eq!(json["type"], "usage");
    assert_eq!(json["call"], "compaction");
    assert_eq!(json["turn"], 1);
    assert!(
        json["estimated_input_tokens"].as_u64().unwrap() > 0,
        "{json}"
    );

    // Reactive compaction after turn 1 was refused as too long: made for turn 1, which is
    // asked again under its number.
    let model = ScriptedModel::new(move |n, request| {
        if request.to_string().contains("Summarize this conversation") {
            return summary_reply(request, "end_turn");
        }
        match n {
            0 => Err(too_long()),
            _ => turn_reply(request),
        }
    });
    let agent = Agent::new(
        AgentConfig::new("m"),
        Arc::new(model),
        executor(Default::default()),
    );
    let events: Vec<AgentEvent> = agent.run_messages(history()).collect().await;
    assert_eq!(stop(&events).0, StopReason::EndTurn, "{events:#?}");
    let (calls, order) = usage_calls(&events);
    assert_eq!(calls, [(1, "compaction", 7_000), (1, "turn", 100)]);
    assert_eq!(
        order,
        [
            "turn_start 1",
            "usage compaction",
            "compaction",
            "turn_start 1",
            "usage turn"
        ]
    );
    common::assert_usage_events_add_up(&events);
}

/// One scripted answer of the sweep below, for call `n`: `shape` picks how it goes (a whole
/// answer, a call, a cut, a stream broken after `message_start`, an error event after it, a
/// refusal as too long, an overload before any event, an answer reported without usage).
/// Each call reports usage of its own (distinct for each call, cache reads included), so a
/// call counted twice or not at all shows in the totals.
fn usage_sweep_reply(shape: usize, n: usize, request: &Value) -> Result<Bytes, ModelError> {
    let (content, stop) = match shape {
        1 => (
            vec![call(&format!("t{n}"), "read", json!({"path": "a"}))],
            "tool_use",
        ),
        2 => (vec![text("Cut")], "max_tokens"),
        _ => (vec![text("Done.")], "end_turn"),
    };
    let mut message = scripted_message(request, content, stop);
    let n = n as u64;
    message["usage"] = json!({
        "input_tokens": 1_000 * (n + 1),
        "cache_read_input_tokens": n,
        "cache_creation_input_tokens": 7,
        "output_tokens": 10 + n,
    });
    let sse = anthropic_sse(&message, 7);
    let before_delta = || sse[..sse.find("event: message_delta").unwrap()].to_owned();
    match shape {
        3 => Ok(Bytes::from(before_delta())),
        4 => Ok(Bytes::from(format!("{}{OVERLOADED_EVENT}", before_delta()))),
        5 => Err(too_long()),
        6 => Err(ModelError::overloaded("HTTP 529")),
        7 => {
            message.as_object_mut().unwrap().remove("usage");
            Ok(Bytes::from(anthropic_sse(&message, 7)))
        }
        _ => Ok(Bytes::from(sse)),
    }
}

/// Every order of three answers of the shapes above (then whole answers), with and without a
/// history big enough to be compacted first (the summariser's calls taking their share of the
/// answers), with a fallback model and a raisable output limit: whatever happens — fallback,
/// retried truncation, raised limit, continuation, reactive or auto compaction, a summary cut
/// or broken — the `usage` events add up to the stop event's totals.
#[tokio::test]
async fn the_usage_events_add_up_to_the_totals_in_every_sequence_of_failures() {
    const SHAPES: usize = 8;
    for compact in [false, true] {
        for a in 0..SHAPES {
            for b in 0..SHAPES {
                for c in 0..SHAPES {
                    let plan = [a, b, c];
                    let model = ScriptedModel::new(move |n, request| {
                        usage_sweep_reply(plan.get(n).copied().unwrap_or(0), n, request)
                    });
                    let mut config = AgentConfig::new("claude-sonnet-4-5");
                    config.fallback_model = Some("claude-opus-4-6".into());
                    config.limits.max_turns = 6;
                    if compact {
                        config.budget = thresholds(1_000, 1_000_000);
                    }
                    let agent = Agent::new(config, Arc::new(model), executor(Default::default()));
                    let history = if compact {
                        vec![
                            json!({"role": "user", "content": big_prompt(5_000)}),
                            json!({"role": "assistant", "content": "earlier answer"}),
                            json!({"role": "user", "content": "and now?"}),
                        ]
                    } else {
                        vec![json!({"role": "user", "content": "go"})]
                    };
                    let events: Vec<AgentEvent> = agent.run_messages(history).collect().await;
                    assert_eq!(stops(&events), 1, "{plan:?} {compact}");
                    let Some(AgentEvent::Stop {
                        input_tokens,
                        output_tokens,
                        ..
                    }) = events.last()
                    else {
                        panic!("{plan:?} {compact}: {events:#?}");
                    };
                    assert_eq!(
                        common::usage_event_totals(&events),
                        (*input_tokens, *output_tokens),
                        "{plan:?} compact {compact}: {events:#?}"
                    );
                }
            }
        }
    }
}
