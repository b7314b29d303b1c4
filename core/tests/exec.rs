//! Executor behaviour: admission, ordering, exactly-one-result, cancellation, timeouts,
//! budgets, hooks, streaming submission and leaks. Deterministic: tokio's paused clock.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod exec_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use exec_support::{Probe, call, registry, text};
use ferroloop::exec::budget::{spill_file_name, text_fingerprint};
use ferroloop::exec::{
    AfterCall, AnswerSender, BeforeCall, BudgetConfig, CallStatus, ExecutorConfig, FnTool,
    HookCall, Permission, ReplacementRecord, ResultLimit, Tool, ToolContext, ToolExecutor,
    ToolFuture, ToolHooks, ToolOutput, ToolRegistry, ToolResult, ToolResultContent, ToolUse,
    TurnError, TurnEvent,
};
use futures::FutureExt as _;
use futures::future::BoxFuture;
use serde_json::json;
use tokio::time::Instant;

fn executor(probe: &Arc<Probe>, config: ExecutorConfig) -> ToolExecutor {
    ToolExecutor::builder(registry(probe))
        .config(config)
        .build()
}

fn ids(results: &[ToolResult]) -> Vec<&str> {
    results.iter().map(|r| r.tool_use_id.as_str()).collect()
}

async fn drain(turn: &mut ferroloop::exec::Turn) -> Vec<TurnEvent> {
    let mut events = Vec::new();
    while let Some(event) = turn.next_event().await {
        events.push(event);
    }
    events
}

#[tokio::test(start_paused = true)]
async fn readers_run_together_writer_runs_alone_and_is_a_barrier() {
    let probe = Arc::new(Probe::default());
    let exec = executor(&probe, ExecutorConfig::default());
    let start = Instant::now();
    let results = exec
        .run(vec![
            call("r1", "script", true, 10, "ok"),
            call("r2", "script", true, 20, "ok"),
            call("w", "script", false, 5, "ok"),
            call("r3", "script", true, 5, "ok"),
        ])
        .await
        .unwrap();
    assert_eq!(ids(&results), ["r1", "r2", "w", "r3"]);
    assert!(results.iter().all(|r| !r.is_error));
    assert_eq!(
        probe.log(),
        [
            "start r1", "start r2", "end r1", "end r2", "start w", "end w", "start r3", "end r3"
        ]
    );
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(30),
        "{{r1‖r2}} 20 → w 5 → r3 5"
    );
    assert!(!probe.overlapped());
    assert_eq!(probe.max(), 2);
}

#[tokio::test(start_paused = true)]
async fn cap_is_never_exceeded() {
    let probe = Arc::new(Probe::default());
    let config = ExecutorConfig {
        max_concurrency: 4,
        ..ExecutorConfig::default()
    };
    let exec = executor(&probe, config);
    let calls = (0..40)
        .map(|i| call(&format!("c{i}"), "script", true, 1 + (i * 7 % 13), "ok"))
        .collect();
    let results = exec.run(calls).await.unwrap();
    assert_eq!(results.len(), 40);
    assert_eq!(probe.max(), 4);
    assert!(!probe.overlapped());
}

#[tokio::test(start_paused = true)]
async fn the_cap_and_the_barrier_hold_within_a_run_not_across_runs() {
    // What `ExecutorConfig::max_concurrency` documents: each run (each turn) admits its own
    // calls, so two runs of one executor at the same time do not wait for each other. An
    // auditor read "at most this many calls at once" as executor-wide; this pins the rule the
    // docs now state.
    let probe = Arc::new(Probe::default());
    let config = ExecutorConfig {
        max_concurrency: 1,
        ..ExecutorConfig::default()
    };
    let exec = executor(&probe, config);
    let start = Instant::now();
    let (first, second) = tokio::join!(
        exec.run(vec![
            call("a1", "script", true, 10, "ok"),
            call("a2", "script", true, 10, "ok"),
        ]),
        exec.run(vec![call("w", "script", false, 10, "ok")]),
    );
    assert_eq!(ids(&first.unwrap()), ["a1", "a2"]);
    assert_eq!(ids(&second.unwrap()), ["w"]);
    // Within the first run the cap of 1 held (a1 then a2); across runs the exclusive `w` ran
    // beside a1.
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(20),
        "a1 → a2, w beside a1"
    );
    assert_eq!(probe.max(), 2);
    assert!(probe.overlapped(), "w overlapped a call of the other run");
}

#[tokio::test(start_paused = true)]
async fn exclusive_calls_never_overlap_anything() {
    let probe = Arc::new(Probe::default());
    let exec = executor(&probe, ExecutorConfig::default());
    let calls = (0..30)
        .map(|i| {
            call(
                &format!("c{i}"),
                "script",
                i % 3 != 0,
                (i * 5 % 11) + 1,
                "ok",
            )
        })
        .collect();
    let results = exec.run(calls).await.unwrap();
    assert_eq!(results.len(), 30);
    assert!(!probe.overlapped());
    // Every exclusive call ran alone: its start follows an end (or nothing) and its end comes
    // right after its start.
    let log = probe.log();
    for i in (0..30).step_by(3) {
        let start = log
            .iter()
            .position(|l| *l == format!("start c{i}"))
            .unwrap();
        assert_eq!(log[start + 1], format!("end c{i}"));
    }
}

#[tokio::test(start_paused = true)]
async fn results_come_in_request_order_when_completion_is_reversed() {
    let probe = Arc::new(Probe::default());
    let exec = executor(&probe, ExecutorConfig::default());
    let mut turn = exec.turn();
    for i in 0..5u64 {
        turn.submit(call(&format!("c{i}"), "script", true, 50 - i * 10, "ok"))
            .unwrap();
    }
    turn.seal();
    let events = drain(&mut turn).await;
    let finished: Vec<(usize, Duration)> = events
        .iter()
        .filter_map(|e| match e {
            TurnEvent::Finished {
                index, duration, ..
            } => Some((*index, *duration)),
            _ => None,
        })
        .collect();
    assert_eq!(
        finished,
        (0..5)
            .rev()
            .map(|i| (i, Duration::from_millis(50 - 10 * i as u64)))
            .collect::<Vec<_>>(),
        "finished events in completion order with durations"
    );
    let results: Vec<usize> = events
        .iter()
        .filter_map(|e| match e {
            TurnEvent::Result { index, .. } => Some(*index),
            _ => None,
        })
        .collect();
    assert_eq!(results, [0, 1, 2, 3, 4]);
    // All results become deliverable only when c0 (the slowest) ends: they follow its Finished.
    let first_result = events
        .iter()
        .position(|e| matches!(e, TurnEvent::Result { .. }))
        .unwrap();
    let last_finished = events
        .iter()
        .rposition(|e| matches!(e, TurnEvent::Finished { .. }))
        .unwrap();
    assert!(first_result > last_finished);
    let results = turn.finish().await.unwrap();
    assert_eq!(ids(&results), ["c0", "c1", "c2", "c3", "c4"]);
}

#[tokio::test(start_paused = true)]
async fn panicking_tools_become_error_results() {
    let probe = Arc::new(Probe::default());
    let mut tools = registry(&probe);
    tools
        .register(FnTool::new(
            "sync_panic",
            |_, _| -> futures::future::Ready<_> { panic!("boom before the future") },
        ))
        .unwrap();
    let exec = ToolExecutor::new(tools);
    let results = exec
        .run(vec![
            call("a", "script", true, 1, "panic"),
            ToolUse::new("b", "sync_panic", json!({})),
            call("c", "script", true, 1, "ok"),
        ])
        .await
        .unwrap();
    assert!(results[0].is_error);
    assert_eq!(
        text(&results[0]),
        "Tool 'script' failed with an internal error: a panicked"
    );
    assert_eq!(
        text(&results[1]),
        "Tool 'sync_panic' failed with an internal error: boom before the future"
    );
    assert!(!results[2].is_error);
    assert_eq!(exec.metrics().panicked, 2);
}

#[tokio::test(start_paused = true)]
async fn timeout_inside_a_safe_batch_only_fails_that_call() {
    let probe = Arc::new(Probe::default());
    let exec = executor(&probe, ExecutorConfig::default());
    let start = Instant::now();
    let results = exec
        .run(vec![
            call("a", "script", true, 40, "ok"),
            call("b", "timed", true, 1_000, "ok"),
            call("c", "timed", true, 10, "ok"),
        ])
        .await
        .unwrap();
    assert!(!results[0].is_error && !results[2].is_error);
    assert!(results[1].is_error);
    assert_eq!(text(&results[1]), "Tool 'timed' timed out after 30ms");
    // b saw its cancellation and stopped within the grace: the batch ends with a (40 ms).
    assert_eq!(start.elapsed(), Duration::from_millis(40));
    assert_eq!(exec.metrics().timed_out, 1);
    assert_eq!(probe.max(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_timeout_too_long_for_the_clock_is_no_timeout() {
    // Python's `timeout=1e19` (seconds) or a C host's huge milliseconds: a deadline past what
    // the clock can represent never comes, rather than a panic adding it to the current instant.
    let probe = Arc::new(Probe::default());
    let exec = executor(
        &probe,
        ExecutorConfig {
            default_timeout: Some(Duration::MAX),
            ..ExecutorConfig::default()
        },
    );
    let results = exec
        .run(vec![
            call("a", "script", true, 40, "ok"),
            call("b", "script", false, 10, "ok"),
        ])
        .await
        .unwrap();
    assert!(results.iter().all(|r| !r.is_error), "{results:?}");
    assert_eq!(exec.metrics().timed_out, 0);
}

#[tokio::test(start_paused = true)]
async fn a_tool_ignoring_cancellation_is_detached_after_the_grace() {
    let probe = Arc::new(Probe::default());
    let config = ExecutorConfig {
        cleanup_grace: Duration::from_secs(5),
        ..ExecutorConfig::default()
    };
    let exec = executor(&probe, config);
    let mut turn = exec.turn();
    turn.submit(call("stubborn", "timed", false, 60_000, "ignore_cancel"))
        .unwrap();
    turn.seal();
    let start = Instant::now();
    let events = drain(&mut turn).await;
    // 30 ms timeout + 5 s grace, then the result anyway.
    assert_eq!(start.elapsed(), Duration::from_millis(5_030));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, TurnEvent::Detached { index: 0, .. }))
    );
    let results = turn.finish().await.unwrap();
    assert_eq!(text(&results[0]), "Tool 'timed' timed out after 30ms");
    let metrics = exec.metrics();
    assert_eq!((metrics.detached, metrics.detached_running), (1, 1));
    assert_eq!(
        probe.live_futures.load(Ordering::SeqCst),
        1,
        "still running, detached"
    );
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(exec.metrics().detached_running, 0);
    assert_eq!(probe.live_futures.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn sibling_failure_cancels_running_siblings_and_skips_queued_ones_but_not_the_turn() {
    let probe = Arc::new(Probe::default());
    let config = ExecutorConfig {
        max_concurrency: 2,
        ..ExecutorConfig::default()
    };
    let exec = executor(&probe, config);
    let mut turn = exec.turn();
    turn.submit(call("slow", "script", true, 100, "ok"))
        .unwrap();
    turn.submit(call("sh", "shell", true, 10, "err")).unwrap();
    turn.submit(call("queued", "script", true, 1, "ok"))
        .unwrap();
    let events_until_failure = {
        let mut seen = Vec::new();
        while let Some(event) = turn.next_event().await {
            let done = matches!(event, TurnEvent::Finished { index: 1, .. });
            seen.push(event);
            if done {
                break;
            }
        }
        seen
    };
    assert!(!events_until_failure.is_empty());
    // Submitted after the failure, in the same turn: not run either.
    turn.submit(call("later", "script", true, 1, "ok")).unwrap();
    turn.seal();
    let events = drain(&mut turn).await;
    let results = turn.finish().await.unwrap();
    assert_eq!(
        results.iter().map(text).collect::<Vec<_>>(),
        [
            "Tool 'script' was cancelled: a parallel call to 'shell' (sh) failed",
            "sh failed",
            "Tool 'script' was not run: an earlier call to 'shell' (sh) failed",
            "Tool 'script' was not run: an earlier call to 'shell' (sh) failed",
        ]
    );
    assert!(results.iter().all(|r| r.is_error));
    let statuses: Vec<CallStatus> = events
        .iter()
        .filter_map(|e| match e {
            TurnEvent::Finished { status, .. } => Some(*status),
            _ => None,
        })
        .collect();
    assert!(statuses.contains(&CallStatus::Cancelled) && statuses.contains(&CallStatus::Skipped));
    assert!(!probe.log().contains(&"start queued".to_owned()));
    // The next turn is unaffected.
    let next = exec
        .run(vec![call("n", "script", true, 1, "ok")])
        .await
        .unwrap();
    assert!(!next[0].is_error);
}

#[tokio::test(start_paused = true)]
async fn discard_mid_turn_answers_everything_and_closes_the_turn() {
    let probe = Arc::new(Probe::default());
    let exec = executor(&probe, ExecutorConfig::default());
    let mut turn = exec.turn();
    turn.submit(call("running", "script", false, 1_000, "ok"))
        .unwrap();
    turn.submit(call("queued", "script", true, 1, "ok"))
        .unwrap();
    // Drive until the first call started.
    loop {
        if let Some(TurnEvent::Started { index: 0, .. }) = turn.next_event().await {
            break;
        }
    }
    turn.discard();
    assert!(turn.submit(call("late", "script", true, 1, "ok")).is_err());
    let start = Instant::now();
    let results = turn.finish().await.unwrap();
    assert_eq!(
        start.elapsed(),
        Duration::ZERO,
        "the running tool stopped at once"
    );
    assert_eq!(
        results.iter().map(text).collect::<Vec<_>>(),
        [
            "Tool 'script' was cancelled: the response was discarded and will be retried",
            "Tool 'script' was not run: the response was discarded and will be retried",
        ]
    );
    assert_eq!(probe.log(), ["start running", "end running"]);
}

#[tokio::test(start_paused = true)]
async fn cancelling_the_turn_or_the_run_cancels_running_and_queued_calls() {
    let probe = Arc::new(Probe::default());
    let exec = executor(&probe, ExecutorConfig::default());
    let turn = exec.turn();
    let handle = turn.handle();
    turn.submit(call("a", "script", true, 1_000, "ok")).unwrap();
    turn.submit(call("b", "script", false, 1, "ok")).unwrap();
    turn.seal();
    let spawned = turn.spawn();
    tokio::time::sleep(Duration::from_millis(10)).await;
    handle.cancel();
    let results = spawned.finish().await.unwrap();
    assert_eq!(
        text(&results[0]),
        "Tool 'script' was cancelled: the turn was cancelled"
    );
    assert_eq!(
        text(&results[1]),
        "Tool 'script' was not run: the turn was cancelled"
    );

    // The run token reaches every turn of the executor.
    let run = exec.clone();
    let task =
        tokio::spawn(async move { run.run(vec![call("c", "script", true, 1_000, "ok")]).await });
    tokio::time::sleep(Duration::from_millis(10)).await;
    exec.run_token().cancel();
    let results = task.await.unwrap().unwrap();
    assert_eq!(
        text(&results[0]),
        "Tool 'script' was cancelled: the turn was cancelled"
    );
    // Later calls on a cancelled run never start.
    let results = exec
        .run(vec![call("d", "script", true, 1, "ok")])
        .await
        .unwrap();
    assert_eq!(
        text(&results[0]),
        "Tool 'script' was not run: the turn was cancelled"
    );
    assert_eq!(exec.metrics().cancelled, 4);
}

#[tokio::test(start_paused = true)]
async fn a_fatal_error_ends_the_turn_with_all_results() {
    let probe = Arc::new(Probe::default());
    let exec = executor(&probe, ExecutorConfig::default());
    let outcome = exec
        .run(vec![
            call("slow", "script", true, 100, "ok"),
            call("bad", "script", true, 5, "fatal"),
            call("after", "script", false, 1, "ok"),
        ])
        .await;
    let Err(TurnError::Fatal {
        tool,
        tool_use_id,
        message,
        results,
    }) = outcome
    else {
        panic!("fatal expected, got {outcome:?}");
    };
    assert_eq!(
        (tool.as_str(), tool_use_id.as_str(), message.as_str()),
        ("script", "bad", "bad failed fatally")
    );
    assert_eq!(
        results.iter().map(text).collect::<Vec<_>>(),
        [
            "Tool 'script' was cancelled: the turn ended after a fatal error in tool 'script'",
            "bad failed fatally",
            "Tool 'script' was not run: the turn ended after a fatal error in tool 'script'",
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn unknown_tools_and_invalid_input_are_answered_without_running() {
    let probe = Arc::new(Probe::default());
    let exec = executor(&probe, ExecutorConfig::default());
    let results = exec
        .run(vec![
            ToolUse::new("u", "nope", json!({})),
            ToolUse::new("v", "script", json!({"label": 3})),
            ToolUse::new("w", "script", json!("not an object")),
        ])
        .await
        .unwrap();
    assert_eq!(
        results.iter().map(text).collect::<Vec<_>>(),
        [
            "Unknown tool 'nope'",
            "Invalid input for tool 'script': input.label: expected string, got number",
            "Invalid input for tool 'script': input: expected object, got string",
        ]
    );
    assert!(results.iter().all(|r| r.is_error));
    assert!(probe.log().is_empty());
    assert_eq!(exec.metrics().rejected, 3);
}

struct Hooks;

impl ToolHooks for Hooks {
    fn before_call<'a>(&'a self, call: HookCall<'a>) -> BoxFuture<'a, BeforeCall> {
        async move {
            match call.input["label"].as_str() {
                Some("blocked") => BeforeCall::Deny("no blocked labels".into()),
                Some("rewrite") => {
                    let mut input = call.input.clone();
                    input["label"] = json!("rewritten");
                    BeforeCall::RewriteInput(input)
                }
                Some("bad_rewrite") => BeforeCall::RewriteInput(json!({"label": 1})),
                _ => BeforeCall::Continue,
            }
        }
        .boxed()
    }

    fn permission<'a>(&'a self, call: HookCall<'a>) -> BoxFuture<'a, Permission> {
        async move {
            if call.input["label"] == "forbidden" {
                Permission::Deny("the user said no".into())
            } else {
                Permission::Allow
            }
        }
        .boxed()
    }

    fn after_call<'a>(
        &'a self,
        call: HookCall<'a>,
        output: &'a ToolOutput,
    ) -> BoxFuture<'a, AfterCall> {
        async move {
            if call.input["label"] == "redact" {
                AfterCall::Replace(ToolOutput::text(format!(
                    "[redacted {} chars]",
                    output.content.text_chars()
                )))
            } else {
                AfterCall::Keep
            }
        }
        .boxed()
    }
}

#[tokio::test(start_paused = true)]
async fn hooks_deny_rewrite_and_replace() {
    let probe = Arc::new(Probe::default());
    let exec = ToolExecutor::builder(registry(&probe))
        .hooks(Arc::new(Hooks))
        .build();
    let results = exec
        .run(vec![
            call("blocked", "script", true, 1, "ok"),
            call("forbidden", "script", true, 1, "ok"),
            call("rewrite", "script", true, 1, "ok"),
            call("bad_rewrite", "script", true, 1, "ok"),
            call("redact", "script", true, 1, "ok"),
            call("plain", "script", true, 1, "ok"),
        ])
        .await
        .unwrap();
    assert_eq!(
        results
            .iter()
            .map(|r| (text(r), r.is_error))
            .collect::<Vec<_>>(),
        [
            (
                "Tool 'script' was blocked by a hook: no blocked labels",
                true
            ),
            (
                "Permission to use tool 'script' was denied: the user said no",
                true
            ),
            ("rewritten ok", false),
            (
                "Invalid input for tool 'script': input.label: expected string, got number",
                true
            ),
            ("[redacted 9 chars]", false),
            ("plain ok", false),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn progress_is_delivered_before_finished_and_streaming_starts_eagerly() {
    let started = Arc::new(AtomicUsize::new(0));
    let mut tools = ToolRegistry::new();
    let counter = started.clone();
    tools
        .register(
            FnTool::new("work", move |_, ctx| {
                let counter = counter.clone();
                async move {
                    counter.fetch_add(1, Ordering::SeqCst);
                    ctx.progress(json!({"step": 1}));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    ctx.progress(json!({"step": 2}));
                    Ok(ToolOutput::text("done"))
                }
            })
            .concurrency_safe(true),
        )
        .unwrap();
    let exec = ToolExecutor::new(tools);
    let mut spawned = exec.turn().spawn();
    spawned
        .handle()
        .submit(ToolUse::new("a", "work", json!({})))
        .unwrap();
    // The model is still streaming: the first call already runs before the second is sealed.
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(started.load(Ordering::SeqCst), 1);
    spawned
        .handle()
        .submit(ToolUse::new("b", "work", json!({})))
        .unwrap();
    spawned.handle().seal();
    let start = Instant::now();
    let mut events = Vec::new();
    while let Some(event) = spawned.next_event().await {
        events.push(event);
    }
    assert_eq!(start.elapsed(), Duration::from_millis(50), "b overlapped a");
    let a_events: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            TurnEvent::Started { index: 0, .. } => Some("started".to_owned()),
            TurnEvent::Progress { index: 0, data, .. } => {
                Some(format!("progress {}", data["step"]))
            }
            TurnEvent::Finished { index: 0, .. } => Some("finished".to_owned()),
            TurnEvent::Result { index: 0, .. } => Some("result".to_owned()),
            _ => None,
        })
        .collect();
    assert_eq!(
        a_events,
        ["started", "progress 1", "progress 2", "finished", "result"]
    );
    let results = spawned.finish().await.unwrap();
    assert_eq!(ids(&results), ["a", "b"]);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_run_future_drops_the_tools() {
    let probe = Arc::new(Probe::default());
    let exec = executor(&probe, ExecutorConfig::default());
    let run = exec.run(vec![
        call("a", "script", true, 1_000, "ok"),
        call("b", "script", true, 1_000, "ok"),
    ]);
    let outcome = tokio::time::timeout(Duration::from_millis(10), run).await;
    assert!(outcome.is_err());
    assert_eq!(probe.live_futures.load(Ordering::SeqCst), 0);
    let mut log = probe.log();
    log.sort();
    assert_eq!(log, ["end a", "end b", "start a", "start b"]);
}

fn spill_config(dir: &std::path::Path, turn_budget: Option<usize>) -> ExecutorConfig {
    ExecutorConfig {
        budget: BudgetConfig {
            spill_dir: dir.to_owned(),
            default_max_result_chars: 1_000,
            turn_budget_chars: turn_budget,
            preview_bytes: 100,
        },
        ..ExecutorConfig::default()
    }
}

/// Where a result of `id` with `text` is spilled in `dir`: the id (sanitised) and the text's
/// fingerprint.
fn spilled_to(dir: &std::path::Path, id: &str, text: &str) -> std::path::PathBuf {
    let stem = spill_file_name(id);
    let stem = stem.trim_end_matches(".txt");
    dir.join(format!("{stem}-{:016x}.txt", text_fingerprint(text)))
}

fn big_tools() -> ToolRegistry {
    let mut tools = ToolRegistry::new();
    tools
        .register(
            FnTool::new("big", |input, _| async move {
                let lines = input["lines"].as_u64().unwrap_or(0);
                Ok(ToolOutput::text(
                    (0..lines)
                        .map(|i| format!("line {i:04}\n"))
                        .collect::<String>(),
                ))
            })
            .concurrency_safe(true),
        )
        .unwrap();
    tools
        .register(
            FnTool::new("huge_ok", |input, _| async move {
                Ok(ToolOutput::text(
                    "x".repeat(input["n"].as_u64().unwrap_or(0) as usize),
                ))
            })
            .with_result_limit(ResultLimit::Unlimited)
            .concurrency_safe(true),
        )
        .unwrap();
    tools
}

/// Some OpenAI-compatible servers number calls `call_0`, `call_1`… in every response, and one
/// executor serves many turns and runs: a reused id with other output must get its own preview
/// and its own spill file, never the earlier result's.
#[tokio::test]
async fn a_reused_call_id_gets_its_own_preview_and_spill_file() {
    let dir = std::env::temp_dir().join(format!(
        "ferroloop-exec-spill-reused-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let exec = ToolExecutor::builder(big_tools())
        .config(spill_config(&dir, None))
        .build();
    let first = exec
        .run(vec![ToolUse::new("call_0", "big", json!({"lines": 200}))])
        .await
        .unwrap();
    let second = exec
        .run(vec![ToolUse::new("call_0", "big", json!({"lines": 300}))])
        .await
        .unwrap();
    assert!(
        text(&first[0]).contains("(2000 characters)"),
        "{}",
        text(&first[0])
    );
    assert!(
        text(&second[0]).contains("(3000 characters)"),
        "{}",
        text(&second[0])
    );
    let first_output: String = (0..200).map(|i| format!("line {i:04}\n")).collect();
    let first_file = std::fs::read_to_string(spilled_to(&dir, "call_0", &first_output)).unwrap();
    assert_eq!(first_file.lines().count(), 200, "the first file is kept");
    let spilled: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(spilled.len(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The results of a turn of `tool_use` alone, sealed and cancelled 5 ms after it started.
async fn cancelled_after_5ms(exec: &ToolExecutor, tool_use: ToolUse) -> Vec<ToolResult> {
    let turn = exec.turn();
    turn.submit(tool_use).unwrap();
    turn.seal();
    let handle = turn.handle();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(5)).await;
        handle.cancel();
    });
    turn.finish().await.unwrap()
}

/// A tool (a host handing its tool the reason: Node's `ctx.signal.reason`) learns why it was
/// cancelled from the executor: `timed_out()` holds for its own timeout alone, however long the
/// tool took to make its future (a host that read the clock against the limit named such a
/// timeout a cancellation), and not for its turn's cancellation, which cancels its own token too.
#[tokio::test(start_paused = true)]
async fn a_tool_learns_whether_its_own_timeout_cancelled_it() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    let mut tools = ToolRegistry::new();
    tools
        .register(
            FnTool::new("wait", move |input, ctx| {
                // Making the future takes a while: the deadline was fixed before.
                if input["slow_start"] == true {
                    std::thread::sleep(Duration::from_millis(5));
                }
                let record = record.clone();
                async move {
                    assert!(!ctx.timed_out(), "not before it is cancelled");
                    ctx.cancelled().await;
                    let id = input["id"].as_str().unwrap_or_default().to_owned();
                    record.lock().unwrap().push((id, ctx.timed_out()));
                    Ok(ToolOutput::text("stopped"))
                }
            })
            .with_timeout(Duration::from_millis(30))
            .concurrency_safe(true),
        )
        .unwrap();
    let exec = ToolExecutor::builder(tools).build();
    let results = exec
        .run(vec![
            ToolUse::new("a", "wait", json!({"id": "timeout"})),
            ToolUse::new(
                "b",
                "wait",
                json!({"id": "timeout, slow start", "slow_start": true}),
            ),
        ])
        .await
        .unwrap();
    assert!(
        results
            .iter()
            .all(|r| text(r) == "Tool 'wait' timed out after 30ms")
    );

    let results =
        cancelled_after_5ms(&exec, ToolUse::new("c", "wait", json!({"id": "cancelled"}))).await;
    assert_eq!(
        text(&results[0]),
        "Tool 'wait' was cancelled: the turn was cancelled"
    );
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("cancelled".to_owned(), false),
            ("timeout".to_owned(), true),
            ("timeout, slow start".to_owned(), true),
        ]
    );
}

/// The executor's own messages (a timeout, a cancellation) are not the tool's output: a small
/// result limit must not hide them behind a spill-file preview the model has to open to learn
/// that the call timed out.
#[tokio::test(start_paused = true)]
async fn timeout_and_cancellation_messages_are_never_spilled() {
    let dir = std::env::temp_dir().join(format!(
        "ferroloop-exec-spill-messages-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let mut tools = ToolRegistry::new();
    tools
        .register(
            FnTool::new("tiny", |input, ctx| async move {
                if input["hang"] == true {
                    ctx.cancelled().await;
                }
                Ok(ToolOutput::text("a result longer than ten characters"))
            })
            .with_timeout(Duration::from_millis(30))
            .with_result_limit(ResultLimit::Chars(10))
            .concurrency_safe(true),
        )
        .unwrap();
    let exec = ToolExecutor::builder(tools)
        .config(spill_config(&dir, None))
        .build();
    let results = exec
        .run(vec![
            ToolUse::new("timed_out", "tiny", json!({"hang": true})),
            ToolUse::new("spilled", "tiny", json!({})),
        ])
        .await
        .unwrap();
    assert_eq!(
        text(&results[0]),
        "Tool 'tiny' timed out after 30ms",
        "the timeout message is delivered as is"
    );
    assert!(
        text(&results[1]).starts_with("<tool-output-truncated>"),
        "the tool's own output still obeys its limit"
    );
    assert!(!dir.join("timed_out.txt").exists());

    let results = cancelled_after_5ms(
        &exec,
        ToolUse::new("cancelled", "tiny", json!({"hang": true})),
    )
    .await;
    assert_eq!(
        text(&results[0]),
        "Tool 'tiny' was cancelled: the turn was cancelled"
    );
    assert!(!dir.join("cancelled.txt").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(start_paused = true)]
async fn spill_files_are_written_and_previews_are_byte_stable_across_turns() {
    let dir = std::env::temp_dir().join(format!("ferroloop-exec-spill-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let exec = ToolExecutor::builder(big_tools())
        .config(spill_config(&dir, Some(3_000)))
        .build();
    let turn1 = exec
        .run(vec![
            ToolUse::new("toolu_big", "big", json!({"lines": 200})),
            ToolUse::new("toolu_small", "big", json!({"lines": 2})),
            ToolUse::new("toolu_huge", "huge_ok", json!({"n": 2_500})),
            ToolUse::new("toolu_mid", "huge_ok", json!({"n": 900})),
        ])
        .await
        .unwrap();
    // Per-tool limit: 2,000 chars > 1,000 → spilled.
    let full: String = (0..200).map(|i| format!("line {i:04}\n")).collect();
    let path = spilled_to(&dir, "toolu_big", &full);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), full);
    let preview = text(&turn1[0]);
    assert!(preview.starts_with("<tool-output-truncated>\nOutput too large (2000 characters)"));
    assert!(preview.contains(&path.display().to_string()));
    assert!(
        preview.contains("line 0009\n...\n</tool-output-truncated>"),
        "cut at a newline: {preview}"
    );
    assert_eq!(text(&turn1[1]), "line 0000\nline 0001\n");
    // Turn budget 3,000: huge (2,500, unlimited per tool) + mid (900) + small + preview > 3,000 →
    // the largest fresh result (huge) is replaced, mid stays.
    assert!(text(&turn1[2]).starts_with("<tool-output-truncated>"));
    assert_eq!(
        std::fs::read_to_string(spilled_to(&dir, "toolu_huge", &"x".repeat(2_500)))
            .unwrap()
            .len(),
        2_500
    );
    assert_eq!(text(&turn1[3]).len(), 900);
    assert_eq!(exec.metrics().spilled, 2);

    // A later turn rebuilds history from the originals: the same bytes come back.
    let mut history = vec![
        ToolResult::success("toolu_big", full.clone()),
        ToolResult::success("toolu_small", "line 0000\nline 0001\n"),
        ToolResult::success("toolu_huge", "x".repeat(2_500)),
        ToolResult::success("toolu_mid", "x".repeat(900)),
    ];
    assert_eq!(exec.reapply_replacements(&mut history), 2);
    assert_eq!(history, turn1);

    // The record survives serialisation (session resume) and decides identically.
    let saved = serde_json::to_string(&exec.replacement_record()).unwrap();
    let record: ReplacementRecord = serde_json::from_str(&saved).unwrap();
    let resumed = ToolExecutor::builder(big_tools())
        .config(spill_config(&dir, Some(3_000)))
        .record(record)
        .build();
    let mut history2 = vec![
        ToolResult::success("toolu_big", full),
        ToolResult::success("toolu_small", "line 0000\nline 0001\n"),
        ToolResult::success("toolu_huge", "x".repeat(2_500)),
        ToolResult::success("toolu_mid", "x".repeat(900)),
    ];
    resumed.reapply_replacements(&mut history2);
    assert_eq!(history2, turn1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ten_thousand_calls_leak_no_tasks() {
    for spawn_calls in [false, true] {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let probe = Arc::new(Probe::default());
        let config = ExecutorConfig {
            spawn_calls,
            ..ExecutorConfig::default()
        };
        let exec = executor(&probe, config);
        let metrics = runtime.block_on(async {
            let calls = (0..10_000)
                .map(|i| {
                    call(
                        &format!("c{i}"),
                        "script",
                        i % 100 != 0,
                        0,
                        if i % 7 == 0 { "err" } else { "ok" },
                    )
                })
                .collect();
            let results = exec.run(calls).await.unwrap();
            assert_eq!(results.len(), 10_000);
            assert!(
                results
                    .iter()
                    .enumerate()
                    .all(|(i, r)| r.tool_use_id == format!("c{i}"))
            );
            tokio::task::yield_now().await;
            tokio::runtime::Handle::current().metrics()
        });
        assert_eq!(metrics.num_alive_tasks(), 0, "spawn_calls={spawn_calls}");
        assert_eq!(probe.live_futures.load(Ordering::SeqCst), 0);
        assert!(!probe.overlapped());
        assert!(probe.max() <= 10);
        let counts = exec.metrics();
        assert_eq!(counts.started, 10_000);
        assert_eq!(counts.completed + counts.failed, 10_000);
    }
}

struct PanickingHooks;

impl ToolHooks for PanickingHooks {
    fn permission<'a>(&'a self, _call: HookCall<'a>) -> BoxFuture<'a, Permission> {
        async { panic!("permission prompt crashed") }.boxed()
    }
}

#[tokio::test(start_paused = true)]
async fn a_panicking_hook_becomes_an_error_result() {
    let probe = Arc::new(Probe::default());
    let exec = ToolExecutor::builder(registry(&probe))
        .hooks(Arc::new(PanickingHooks))
        .build();
    let results = exec
        .run(vec![call("a", "script", true, 1, "ok")])
        .await
        .unwrap();
    assert!(results[0].is_error);
    assert_eq!(
        text(&results[0]),
        "Tool 'script' was not run: its permission hook failed with an internal error: permission prompt crashed"
    );
    assert!(probe.log().is_empty());
}

/// An after-call hook that never answers (a stuck review prompt, a hung logger).
struct StuckAfterCall;

impl ToolHooks for StuckAfterCall {
    fn after_call<'a>(
        &'a self,
        _call: HookCall<'a>,
        _output: &'a ToolOutput,
    ) -> BoxFuture<'a, AfterCall> {
        std::future::pending().boxed()
    }
}

/// Cancelling a turn reaches a call whose after-call hook hangs, as it reaches one whose
/// before-call or permission hook hangs: the turn ends with a cancellation result instead of
/// waiting for the hook forever.
#[tokio::test(start_paused = true)]
async fn cancelling_reaches_a_call_stuck_in_its_after_call_hook() {
    let probe = Arc::new(Probe::default());
    let exec = ToolExecutor::builder(registry(&probe))
        .hooks(Arc::new(StuckAfterCall))
        .build();
    let turn = exec.turn();
    turn.submit(call("a", "script", true, 1, "ok")).unwrap();
    turn.seal();
    let handle = turn.handle();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        handle.cancel();
    });
    let results = tokio::time::timeout(Duration::from_secs(60), turn.finish())
        .await
        .expect("the cancelled turn ends")
        .unwrap();
    assert_eq!(ids(&results), ["a"]);
    assert!(results[0].is_error);
    assert_eq!(
        text(&results[0]),
        "Tool 'script' was cancelled: the turn was cancelled"
    );

    // Batch mode and the run token: the same.
    let run = exec.run(vec![call("b", "script", true, 1, "ok")]);
    let token = exec.run_token().clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        token.cancel();
    });
    let results = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the cancelled run ends")
        .unwrap();
    assert_eq!(
        text(&results[0]),
        "Tool 'script' was cancelled: the turn was cancelled"
    );
}

/// With `spawn_calls`, calls run on runtime worker threads in parallel: two tools that block
/// their thread until both have arrived can only finish if they truly run at the same time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawned_calls_run_in_parallel_on_worker_threads() {
    let barrier = Arc::new(std::sync::Barrier::new(2));
    let mut tools = ToolRegistry::new();
    let b = barrier.clone();
    tools
        .register(
            FnTool::new("rendezvous", move |_, _| {
                let b = b.clone();
                async move {
                    b.wait();
                    Ok(ToolOutput::text("met"))
                }
            })
            .concurrency_safe(true),
        )
        .unwrap();
    let config = ExecutorConfig {
        spawn_calls: true,
        ..ExecutorConfig::default()
    };
    let exec = ToolExecutor::builder(tools).config(config).build();
    let run = exec.run(vec![
        ToolUse::new("a", "rendezvous", json!({})),
        ToolUse::new("b", "rendezvous", json!({})),
    ]);
    // A guard against a hang, not a timing assertion.
    let results = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .unwrap()
        .unwrap();
    assert!(results.iter().all(|r| text(r) == "met"));
}

/// Calls waiting without a timeout share their turn's cancellation (the turn watches it once for
/// all of them): each kind of stop reaches them, whichever way the tool listens.
#[tokio::test(start_paused = true)]
async fn waiting_calls_without_a_timeout_see_every_kind_of_cancellation() {
    let saw = Arc::new(AtomicUsize::new(0));
    let mut tools = ToolRegistry::new();
    // Polls `is_cancelled`, awaits `cancelled()`, or ignores the token (answered after the grace).
    let seen = saw.clone();
    tools
        .register(
            FnTool::new("wait", move |input: serde_json::Value, ctx| {
                let seen = seen.clone();
                async move {
                    match input["how"].as_str() {
                        Some("poll") => {
                            while !ctx.is_cancelled() {
                                tokio::time::sleep(Duration::from_millis(1)).await;
                            }
                        }
                        Some("await") => ctx.cancelled().await,
                        Some("token") => ctx.cancellation_token().cancelled().await,
                        _ => std::future::pending().await,
                    }
                    if ctx.is_cancelled() && ctx.cancellation_token().is_cancelled() {
                        seen.fetch_add(1, Ordering::SeqCst);
                    }
                    Ok(ToolOutput::text("saw the cancellation"))
                }
            })
            .concurrency_safe(true),
        )
        .unwrap();
    tools
        .register(
            FnTool::new("fail", |_, _| async {
                tokio::time::sleep(Duration::from_millis(5)).await;
                Err(ferroloop::exec::ToolError::failed("broke"))
            })
            .concurrency_safe(true)
            .with_sibling_cancellation(true),
        )
        .unwrap();
    let config = ExecutorConfig {
        cleanup_grace: Duration::from_millis(50),
        ..ExecutorConfig::default()
    };
    let exec = ToolExecutor::builder(tools).config(config).build();
    let waits = |prefix: &str| -> Vec<ToolUse> {
        ["poll", "await", "token", "ignore"]
            .iter()
            .map(|how| ToolUse::new(format!("{prefix}-{how}"), "wait", json!({"how": how})))
            .collect()
    };

    // A sibling's failure.
    let mut uses = waits("s");
    uses.push(ToolUse::new("s-fail", "fail", json!({})));
    let results = exec.run(uses).await.unwrap();
    for result in &results[..4] {
        assert_eq!(
            text(result),
            "Tool 'wait' was cancelled: a parallel call to 'fail' (s-fail) failed"
        );
    }

    // The turn cancelled through its handle.
    let turn = exec.turn();
    let handle = turn.handle();
    for tool_use in waits("t") {
        turn.submit(tool_use).unwrap();
    }
    turn.seal();
    let spawned = turn.spawn();
    tokio::time::sleep(Duration::from_millis(10)).await;
    handle.cancel();
    let results = spawned.finish().await.unwrap();
    assert!(
        results
            .iter()
            .all(|r| r.is_error && text(r) == "Tool 'wait' was cancelled: the turn was cancelled")
    );

    // The turn's token cancelled directly, then the run token, under calls that ignore it:
    // nothing but the turn's own cancellation waiter wakes the turn.
    let ignoring = |prefix: &str| -> Vec<ToolUse> {
        (0..2)
            .map(|i| ToolUse::new(format!("{prefix}{i}"), "wait", json!({"how": "ignore"})))
            .collect()
    };
    let turn = exec.turn();
    let token = turn.handle().cancellation_token().clone();
    for tool_use in ignoring("d") {
        turn.submit(tool_use).unwrap();
    }
    turn.seal();
    let spawned = turn.spawn();
    tokio::time::sleep(Duration::from_millis(10)).await;
    token.cancel();
    let results = tokio::time::timeout(Duration::from_secs(60), spawned.finish())
        .await
        .expect("the turn noticed its token")
        .unwrap();
    assert!(
        results
            .iter()
            .all(|r| r.is_error && text(r) == "Tool 'wait' was cancelled: the turn was cancelled")
    );
    let run = exec.clone();
    let task = tokio::spawn(async move { run.run(ignoring("r")).await });
    tokio::time::sleep(Duration::from_millis(10)).await;
    exec.run_token().cancel();
    let results = tokio::time::timeout(Duration::from_secs(60), task)
        .await
        .expect("the turn noticed the run token")
        .unwrap()
        .unwrap();
    assert!(
        results
            .iter()
            .all(|r| r.is_error && text(r) == "Tool 'wait' was cancelled: the turn was cancelled")
    );
    // 4 sibling, 4 handle, 2 token and 2 run cancellations; every ignoring call was detached.
    assert_eq!(exec.metrics().cancelled, 12);
    assert_eq!(exec.metrics().detached, 6);
    assert_eq!(
        saw.load(Ordering::SeqCst),
        6,
        "every listening tool saw each stop"
    );
}

#[tokio::test(start_paused = true)]
async fn submit_all_submits_in_order_and_nothing_once_sealed() {
    let probe = Arc::new(Probe::default());
    let exec = executor(&probe, ExecutorConfig::default());
    let turn = exec.turn();
    turn.submit(call("a", "script", true, 3, "a")).unwrap();
    turn.handle()
        .submit_all([
            call("b", "script", true, 2, "b"),
            call("c", "script", true, 1, "c"),
        ])
        .unwrap();
    turn.handle().submit_all(Vec::new()).unwrap();
    turn.seal();
    let closed = turn
        .handle()
        .submit_all([
            call("d", "script", true, 1, "d"),
            call("e", "script", true, 1, "e"),
        ])
        .unwrap_err();
    assert_eq!(closed.0.id, "d");
    let results = turn.finish().await.unwrap();
    assert_eq!(ids(&results), ["a", "b", "c"]);
    assert_eq!(
        results.iter().map(text).collect::<Vec<_>>(),
        ["a ok", "b ok", "c ok"]
    );
}

#[tokio::test(start_paused = true)]
async fn submit_vec_submits_in_order_into_an_empty_or_a_waiting_inbox() {
    let probe = Arc::new(Probe::default());
    let exec = executor(&probe, ExecutorConfig::default());
    let turn = exec.turn();
    // Into an empty inbox (the vector becomes it), then behind calls still waiting there.
    turn.handle()
        .submit_vec(vec![
            call("a", "script", true, 3, "a"),
            call("b", "script", true, 2, "b"),
        ])
        .unwrap();
    turn.handle()
        .submit_vec(vec![call("c", "script", true, 1, "c")])
        .unwrap();
    turn.handle().submit_vec(Vec::new()).unwrap();
    turn.seal();
    let closed = turn
        .handle()
        .submit_vec(vec![call("d", "script", true, 1, "d")])
        .unwrap_err();
    assert_eq!(closed.0.id, "d");
    assert!(turn.handle().submit_vec(Vec::new()).is_ok());
    let results = turn.finish().await.unwrap();
    assert_eq!(ids(&results), ["a", "b", "c"]);
}

#[tokio::test(start_paused = true)]
async fn decided_submissions_use_the_callers_decision_instead_of_asking_the_tool() {
    let probe = Arc::new(Probe::default());
    let exec = executor(&probe, ExecutorConfig::default());
    let start = Instant::now();
    let turn = exec.turn();
    let handle = turn.handle();
    // The script tool would call every one of these exclusive (its input says so).
    handle.submit(call("a", "script", false, 10, "ok")).unwrap();
    handle
        .submit_vec_decided(
            vec![
                call("b", "script", false, 10, "ok"),
                call("c", "script", false, 10, "ok"),
                call("d", "script", false, 10, "ok"),
            ],
            // Positions in this batch: `b` and `c` decided safe, `d` asked (exclusive).
            vec![(0, true), (1, true)],
        )
        .unwrap();
    handle.seal();
    let results = turn.finish().await.unwrap();
    assert_eq!(ids(&results), ["a", "b", "c", "d"]);
    assert_eq!(
        probe.log(),
        [
            "start a", "end a", "start b", "start c", "end b", "end c", "start d", "end d"
        ]
    );
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(30),
        "a → {{b‖c}} → d"
    );
    assert_eq!(probe.max(), 2);
}

/// Calls a binding refused itself (an input it could not hand over) keep their place and get
/// their one result at once, never run; an unknown tool among them keeps its usual result.
#[tokio::test(start_paused = true)]
async fn calls_refused_by_the_submitter_are_answered_in_place_and_never_run() {
    let probe = Arc::new(Probe::default());
    let exec = executor(&probe, ExecutorConfig::default());
    let mut turn = exec.turn();
    let handle = turn.handle();
    handle
        .submit_vec_checked(
            vec![
                call("a", "script", true, 10, "ok"),
                call("b", "script", true, 10, "ok"),
                ToolUse::new("c", "nope", json!({})),
                call("d", "script", true, 10, "ok"),
            ],
            vec![],
            vec![
                (1, "the input cannot be sent as JSON: a BigInt".into()),
                (2, "ignored for an unknown tool".into()),
            ],
        )
        .unwrap();
    handle.seal();
    let events = drain(&mut turn).await;
    let results = turn.finish().await.unwrap();
    assert_eq!(ids(&results), ["a", "b", "c", "d"]);
    assert_eq!(
        results.iter().map(text).collect::<Vec<_>>(),
        [
            "a ok",
            "Invalid input for tool 'script': the input cannot be sent as JSON: a BigInt",
            "Unknown tool 'nope'",
            "d ok",
        ]
    );
    assert_eq!(
        results.iter().map(|r| r.is_error).collect::<Vec<_>>(),
        [false, true, true, false]
    );
    assert!(
        !probe.log().iter().any(|line| line.contains(" b")),
        "{:?}",
        probe.log()
    );
    assert!(events.iter().any(|e| matches!(
        e,
        TurnEvent::Finished {
            index: 1,
            status: CallStatus::Rejected,
            ..
        }
    )));
}

/// A batch run answers the calls its host refused as a turn's submission does: in place, never
/// run (Python's `run` of a call whose input it could not convert failed the whole batch).
#[tokio::test]
async fn a_batch_run_answers_the_calls_its_host_refused_in_place() {
    let probe = Arc::new(Probe::default());
    let exec = executor(&probe, ExecutorConfig::default());
    let results = exec
        .run_checked_with_host_data(
            vec![
                call("a", "script", true, 10, "ok"),
                call("b", "script", true, 10, "ok"),
                call("c", "script", true, 10, "ok"),
            ],
            vec![(1, "the input cannot be sent as JSON: a date".into())],
            Arc::new(()),
        )
        .await
        .unwrap();
    assert_eq!(ids(&results), ["a", "b", "c"]);
    assert_eq!(
        results.iter().map(text).collect::<Vec<_>>(),
        [
            "a ok",
            "Invalid input for tool 'script': the input cannot be sent as JSON: a date",
            "c ok",
        ]
    );
    assert!(
        !probe.log().iter().any(|line| line.contains(" b")),
        "{:?}",
        probe.log()
    );
}

/// A tool that cancels the run and returns at once (a "stop" tool, or a C tool that cancels its
/// run's token from its callback): the exclusive call queued after it must not start. The turn
/// used to look at its token only when a step began, so the next call was admitted in the same
/// step as the completion that cancelled.
#[tokio::test(start_paused = true)]
async fn a_call_that_cancels_the_run_stops_the_calls_queued_after_it() {
    let run = ferroloop::exec::CancellationToken::new();
    let started = Arc::new(AtomicUsize::new(0));
    let mut tools = ToolRegistry::new();
    let stopper = run.clone();
    tools
        .register(FnTool::new("stop", move |_, _| {
            let stopper = stopper.clone();
            async move {
                stopper.cancel();
                Ok(ToolOutput::text("stopped"))
            }
        }))
        .unwrap();
    let counter = started.clone();
    tools
        .register(FnTool::new("work", move |_, _| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Ok(ToolOutput::text("worked")) }
        }))
        .unwrap();
    let exec = ToolExecutor::builder(tools).run_token(run).build();
    let results = exec
        .run(vec![
            ToolUse::new("s", "stop", json!({})),
            ToolUse::new("w1", "work", json!({})),
            ToolUse::new("w2", "work", json!({})),
        ])
        .await
        .unwrap();
    assert_eq!(ids(&results), ["s", "w1", "w2"]);
    assert!(!results[0].is_error);
    assert_eq!(started.load(Ordering::SeqCst), 0, "{results:?}");
    assert!(results[1].is_error && results[2].is_error);
}

/// A tool that answers after its deadline, in the same wake-up in which the timer would have
/// fired (it blocked the thread its turn is polled on, as a synchronous JavaScript tool blocks
/// the event loop), still times out: a late answer is not a success.
#[tokio::test]
async fn an_answer_that_arrives_after_the_deadline_is_a_timeout() {
    let mut tools = ToolRegistry::new();
    tools
        .register(
            FnTool::new("blocking", |input, _| async move {
                tokio::task::yield_now().await;
                let ms = input["ms"].as_u64().unwrap_or(0);
                std::thread::sleep(Duration::from_millis(ms));
                Ok(ToolOutput::text("answered"))
            })
            .with_timeout(Duration::from_millis(30)),
        )
        .unwrap();
    let exec = ToolExecutor::builder(tools).build();
    let uses = vec![
        ToolUse::new("late", "blocking", json!({"ms": 120})),
        ToolUse::new("early", "blocking", json!({"ms": 0})),
    ];
    let results = exec.run(uses).await.unwrap();
    assert!(results[0].is_error);
    assert_eq!(text(&results[0]), "Tool 'blocking' timed out after 30ms");
    assert!(!results[1].is_error);
    assert_eq!(text(&results[1]), "answered");
    assert_eq!(exec.metrics().timed_out, 1);
}

/// A tool that blocks before its future first returns (a synchronous host callback that
/// completes the call inline, a Rust tool that blocks before its first `.await`) is timed out
/// like one that blocks later: the answer comes when the first poll returns, past the deadline.
/// The same holds on the hooked path.
#[tokio::test]
async fn a_tool_that_blocks_before_its_first_poll_returns_times_out() {
    for hooked in [false, true] {
        let mut tools = ToolRegistry::new();
        tools
            .register(
                FnTool::new("inline", |input, _| {
                    let ms = input["ms"].as_u64().unwrap_or(0);
                    std::thread::sleep(Duration::from_millis(ms));
                    async { Ok(ToolOutput::text("answered")) }
                })
                .with_timeout(Duration::from_millis(30)),
            )
            .unwrap();
        let mut builder = ToolExecutor::builder(tools);
        if hooked {
            builder = builder.hooks(Arc::new(PassThroughHooks));
        }
        let exec = builder.build();
        let uses = vec![
            ToolUse::new("late", "inline", json!({"ms": 120})),
            ToolUse::new("early", "inline", json!({"ms": 0})),
        ];
        let results = exec.run(uses).await.unwrap();
        assert!(results[0].is_error, "hooked: {hooked}");
        assert_eq!(text(&results[0]), "Tool 'inline' timed out after 30ms");
        assert!(!results[1].is_error);
        assert_eq!(text(&results[1]), "answered");
        assert_eq!(exec.metrics().timed_out, 1);
    }
}

/// The time a tool spends before its future first returns counts against its timeout: a tool
/// that blocks 60 ms, then waits 60 ms more, overruns a 100 ms limit.
#[tokio::test]
async fn a_timeout_counts_from_the_hand_off_not_from_the_first_wait() {
    let mut tools = ToolRegistry::new();
    tools
        .register(
            FnTool::new("two_halves", |_, _| {
                std::thread::sleep(Duration::from_millis(60));
                async {
                    tokio::time::sleep(Duration::from_millis(60)).await;
                    Ok(ToolOutput::text("answered"))
                }
            })
            .with_timeout(Duration::from_millis(100)),
        )
        .unwrap();
    let exec = ToolExecutor::builder(tools).build();
    let results = exec
        .run(vec![ToolUse::new("a", "two_halves", json!({}))])
        .await
        .unwrap();
    assert_eq!(text(&results[0]), "Tool 'two_halves' timed out after 100ms");
}

/// A tool answered from another thread well within its timeout, in a turn its host polls only
/// after the deadline (a C host polls between reads of the model's stream), is on time: the
/// answer counts when it was sent, not when the turn got round to reading it.
#[tokio::test]
async fn an_answer_sent_in_time_is_on_time_however_late_the_turn_is_polled() {
    let mut tools = ToolRegistry::new();
    tools
        .register(
            FnTool::new("threaded", |_, _| {
                let (sender, receiver) = tokio::sync::oneshot::channel();
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(5));
                    let _ = sender.send(());
                });
                async move {
                    let _ = receiver.await;
                    Ok(ToolOutput::text("answered"))
                }
            })
            .with_timeout(Duration::from_millis(50)),
        )
        .unwrap();
    let exec = ToolExecutor::builder(tools).build();
    let mut turn = exec.turn();
    turn.submit(ToolUse::new("t", "threaded", json!({})))
        .unwrap();
    turn.seal();
    assert!(matches!(
        turn.next_event().await,
        Some(TurnEvent::Started { .. })
    ));
    // The host does other work (it blocks the thread the turn is polled on).
    std::thread::sleep(Duration::from_millis(200));
    let results = turn.finish().await.unwrap();
    assert!(!results[0].is_error, "{results:?}");
    assert_eq!(text(&results[0]), "answered");
}

/// A tool echoing the `&'static str` its run's host data holds ("none" without host data).
fn host_echo_registry() -> ToolRegistry {
    let mut tools = ToolRegistry::new();
    tools
        .register(
            FnTool::new("host", |_, ctx: ferroloop::exec::ToolContext| {
                let seen = match ctx.host_data() {
                    Some(host) => host
                        .downcast_ref::<&'static str>()
                        .copied()
                        .unwrap_or("another type"),
                    None => "none",
                };
                async move { Ok(ToolOutput::text(seen)) }
            })
            .concurrency_safe(true)
            .with_timeout(Duration::from_secs(10)),
        )
        .unwrap();
    tools
        .register(
            FnTool::new("host_plain", |_, ctx: ferroloop::exec::ToolContext| {
                let seen = ctx
                    .host_data()
                    .and_then(|host| host.downcast_ref::<&'static str>().copied())
                    .unwrap_or("none");
                async move { Ok(ToolOutput::text(seen)) }
            })
            .concurrency_safe(true),
        )
        .unwrap();
    tools
}

#[tokio::test]
async fn host_data_attached_to_a_run_or_turn_reaches_its_calls_only() {
    let exec = ToolExecutor::new(host_echo_registry());
    let uses = || {
        vec![
            ToolUse::new("a", "host", json!({})),
            ToolUse::new("b", "host_plain", json!({})),
        ]
    };
    let texts = |results: &[ToolResult]| -> Vec<String> {
        results
            .iter()
            .map(|r| match &r.content {
                ToolResultContent::Text(text) => text.clone(),
                other => format!("{other:?}"),
            })
            .collect()
    };
    let plain = exec.run(uses()).await.unwrap();
    assert_eq!(texts(&plain), ["none", "none"]);
    // Two runs at once, each with its own data.
    let (one, two) = tokio::join!(
        exec.run_with_host_data(uses(), Arc::new("run one")),
        exec.run_with_host_data(uses(), Arc::new("run two")),
    );
    assert_eq!(texts(&one.unwrap()), ["run one", "run one"]);
    assert_eq!(texts(&two.unwrap()), ["run two", "run two"]);
    let turn = exec.turn_with_host_data(Arc::new("a turn"));
    for tool_use in uses() {
        turn.submit(tool_use).unwrap();
    }
    turn.seal();
    assert_eq!(texts(&turn.finish().await.unwrap()), ["a turn", "a turn"]);
    let turn = exec.turn();
    turn.submit(ToolUse::new("c", "host", json!({}))).unwrap();
    turn.seal();
    assert_eq!(texts(&turn.finish().await.unwrap()), ["none"]);
    let standalone =
        ferroloop::exec::ToolContext::standalone("x", ferroloop::exec::CancellationToken::new());
    assert!(standalone.host_data().is_none());
}

/// A host that answers its calls from outside their futures, as a C host's worker thread does,
/// through the calls' answer channels: the sender reads the call's token when it delivers an
/// answer, and the receiver reports that order to the executor.
#[derive(Clone, Default)]
struct OrderingHost {
    waiting: Arc<std::sync::Mutex<Vec<AnswerSender<String>>>>,
    timeout: Option<Duration>,
}

impl Tool for OrderingHost {
    fn name(&self) -> &str {
        "worker"
    }

    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    fn call(&self, _input: serde_json::Value, ctx: ToolContext) -> ToolFuture {
        let (reply, answer) = ctx.answer_channel();
        self.waiting.lock().unwrap().push(reply);
        async move { Ok(ToolOutput::text(answer.await.unwrap())) }.boxed()
    }
}

impl OrderingHost {
    /// Delivers the answer of the oldest waiting call.
    fn deliver(&self, text: &str) {
        let reply = self.waiting.lock().unwrap().remove(0);
        reply.send(text.to_owned()).unwrap();
    }
}

/// Hooks that change nothing: they only move calls onto the hooked path.
struct PassThroughHooks;

impl ToolHooks for PassThroughHooks {}

/// An answer delivered before the turn was cancelled stands, although the turn observes the
/// cancellation before it polls the call again; one delivered after the cancellation is the
/// cancellation's (the tool answered anyway): the order of the events decides, not the poll.
/// On every path: a call waiting on its turn's task, one racing its timeout, a hooked one; and
/// for a turn cancelled by its handle or through the executor's run token (which the turn
/// notices only when it next looks: an answer delivered before that cancellation was reported
/// cancelled on the timed and hooked paths).
#[tokio::test(start_paused = true)]
async fn a_host_answer_is_judged_by_the_order_of_answer_and_cancellation() {
    for (timed, hooked, by_run) in [
        (false, false, false),
        (true, false, false),
        (false, true, false),
        (false, false, true),
        (true, false, true),
        (false, true, true),
    ] {
        for answer_first in [true, false] {
            let host = OrderingHost {
                timeout: timed.then_some(Duration::from_secs(30)),
                ..OrderingHost::default()
            };
            let mut tools = ToolRegistry::new();
            tools.register(host.clone()).unwrap();
            let mut builder = ToolExecutor::builder(tools);
            if hooked {
                builder = builder.hooks(Arc::new(PassThroughHooks));
            }
            let exec = builder.build();
            let turn = exec.turn();
            let handle = turn.handle();
            turn.submit(ToolUse::new("a", "worker", json!({}))).unwrap();
            turn.seal();
            let spawned = turn.spawn();
            // The call was handed to the host and waits for its answer.
            tokio::time::sleep(Duration::from_millis(10)).await;
            assert_eq!(host.waiting.lock().unwrap().len(), 1);
            let cancel = || {
                if by_run {
                    exec.run_token().cancel();
                } else {
                    handle.cancel();
                }
            };
            if answer_first {
                host.deliver("done");
                cancel();
            } else {
                cancel();
                host.deliver("done anyway");
            }
            let results = spawned.finish().await.unwrap();
            let case = format!(
                "timed={timed} hooked={hooked} by_run={by_run} answer_first={answer_first}"
            );
            if answer_first {
                assert_eq!(text(&results[0]), "done", "{case}");
                assert!(!results[0].is_error, "{case}");
            } else {
                assert_eq!(
                    text(&results[0]),
                    "Tool 'worker' was cancelled: the turn was cancelled",
                    "{case}"
                );
                assert!(results[0].is_error, "{case}");
            }
            let metrics = exec.metrics();
            assert_eq!(
                (metrics.cancelled, metrics.detached),
                (u64::from(!answer_first), 0),
                "{case}"
            );
        }
    }
}

/// A tool that hands back a list of plain values as its content (file names, numbers) instead
/// of content blocks: Anthropic answers such a `tool_result` with a 400, which ended an agent's
/// run. What is not all blocks (objects with a string `type`) is sent as its JSON text.
#[tokio::test]
async fn content_that_is_not_all_blocks_is_sent_as_its_json_text() {
    let mut tools = ToolRegistry::new();
    tools
        .register(FnTool::new(
            "list",
            |input: serde_json::Value, _| async move {
                let items = input["items"].as_array().cloned().unwrap_or_default();
                Ok(ToolOutput::blocks(items))
            },
        ))
        .unwrap();
    let exec = ToolExecutor::new(tools);
    let uses = [
        json!(["a.txt", "b.txt"]),
        json!([{"type": "text", "text": "fine"}, 3]),
        json!([{"text": "no type"}]),
        json!([{"type": 7}]),
        json!([{"type": "text", "text": "fine"}, {"type": "image", "source": {}}]),
        json!([]),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, items)| ToolUse {
        id: format!("u{i}"),
        name: "list".into(),
        input: json!({ "items": items }),
    })
    .collect();
    let results = exec.run(uses).await.unwrap();
    let contents: Vec<_> = results.iter().map(|r| r.content.clone()).collect();
    assert_eq!(
        contents,
        vec![
            ToolResultContent::Text(r#"["a.txt","b.txt"]"#.into()),
            ToolResultContent::Text(r#"[{"type":"text","text":"fine"},3]"#.into()),
            ToolResultContent::Text(r#"[{"text":"no type"}]"#.into()),
            ToolResultContent::Text(r#"[{"type":7}]"#.into()),
            ToolResultContent::Blocks(vec![
                json!({"type": "text", "text": "fine"}),
                json!({"type": "image", "source": {}}),
            ]),
            ToolResultContent::Blocks(vec![]),
        ]
    );
    assert!(results.iter().all(|r| !r.is_error));
}

/// A spill file a preview names is never overwritten with another result's text: not by an id
/// that sanitises to the same file name (`functions.read:0`, `functions_read_0`), nor by
/// another executor spilling to the same directory with the same id (servers number calls
/// `call_0`… in every response, and the default directory is shared). Each preview pointed at
/// `<id>.txt`, which then held the other result's output.
#[tokio::test]
async fn results_that_share_an_id_or_its_file_name_keep_their_own_spill_files() {
    let dir = std::env::temp_dir().join(format!("ferroloop-spill-names-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let executor = || {
        let mut config = ExecutorConfig::default();
        config.budget.spill_dir = dir.clone();
        let mut tools = ToolRegistry::new();
        tools
            .register(
                FnTool::new("say", |input: serde_json::Value, _| async move {
                    let word = input["word"].as_str().unwrap_or_default().to_owned();
                    Ok(ToolOutput::text(format!("{word} ").repeat(100)))
                })
                .with_result_limit(ResultLimit::Chars(50))
                .concurrency_safe(true),
            )
            .unwrap();
        ToolExecutor::builder(tools).config(config).build()
    };
    let say = |id: &str, word: &str| ToolUse::new(id, "say", json!({ "word": word }));
    let one = executor();
    let alike = one
        .run(vec![
            say("functions.read:0", "AAAA"),
            say("functions_read_0", "BBBB"),
        ])
        .await
        .unwrap();
    let other = executor();
    let first = one.run(vec![say("call_0", "CCCC")]).await.unwrap();
    let second = other.run(vec![say("call_0", "DDDD")]).await.unwrap();
    for (result, word) in [
        (&alike[0], "AAAA"),
        (&alike[1], "BBBB"),
        (&first[0], "CCCC"),
        (&second[0], "DDDD"),
    ] {
        let preview = text(result);
        let path = preview
            .lines()
            .find_map(|line| line.split("Full output saved to: ").nth(1))
            .unwrap_or_else(|| panic!("no spill path in {preview}"));
        let saved = std::fs::read_to_string(path).unwrap();
        assert_eq!(
            saved,
            format!("{word} ").repeat(100),
            "{} -> {path}",
            result.tool_use_id
        );
    }
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 4);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `run_checked_with_host_data_until`: a run stopped by its token (not by dropping the future)
/// resolves with every call's result once the cancelled tools have stopped, so a binding can
/// wait for them (Python's cancelled `run` raised while its tools still cleaned up).
#[tokio::test(start_paused = true)]
async fn a_run_stopped_by_its_token_resolves_once_its_tools_have_stopped() {
    let stopped = Arc::new(AtomicUsize::new(0));
    let mut tools = ToolRegistry::new();
    let done = stopped.clone();
    tools
        .register(
            FnTool::new("slow", move |_, ctx| {
                let done = done.clone();
                async move {
                    ctx.cancelled().await;
                    // Cleanup that takes a while, within the grace.
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    done.fetch_add(1, Ordering::SeqCst);
                    Ok(ToolOutput::text("stopped"))
                }
            })
            .concurrency_safe(true),
        )
        .unwrap();
    let exec = ToolExecutor::builder(tools)
        .config(ExecutorConfig {
            cleanup_grace: Duration::from_secs(5),
            ..ExecutorConfig::default()
        })
        .build();
    let stop = ferroloop::exec::CancellationToken::new();
    let canceller = stop.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(10)).await;
        canceller.cancel();
    });
    let start = Instant::now();
    let results = exec
        .run_checked_with_host_data_until(
            vec![
                ToolUse::new("a", "slow", json!({})),
                ToolUse::new("b", "slow", json!({})),
            ],
            Vec::new(),
            Arc::new(()),
            stop,
        )
        .await
        .unwrap();
    assert_eq!(ids(&results), ["a", "b"]);
    assert!(results.iter().all(|r| r.is_error), "{results:?}");
    assert_eq!(
        stopped.load(Ordering::SeqCst),
        2,
        "both tools finished stopping"
    );
    assert!(start.elapsed() >= Duration::from_millis(310));
}
