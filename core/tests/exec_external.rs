//! Externally completed calls (`Turn::enable_external_calls`): the host starts the calls the
//! turn hands over and answers them by index; the turn keeps admission, ordering, result
//! limits, cancellation with one cleanup grace, and sibling failures. Deterministic: the turn is
//! polled by hand under tokio's paused clock.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::task::{Context, Poll};
use std::time::Duration;

use ferroloop::exec::{
    ExecutorConfig, ResultLimit, Tool, ToolContext, ToolExecutor, ToolFuture, ToolOutput,
    ToolRegistry, ToolResult, ToolResultContent, ToolUse, Turn, TurnEvent,
};
use serde_json::{Value, json};

/// A tool the host runs itself; `call` is used only when the turn needs a future.
struct HostTool {
    name: &'static str,
    safe: bool,
    timeout: Option<Duration>,
    limit: ResultLimit,
    cancels_siblings: bool,
    /// Its future (when the turn calls it) never completes.
    hangs: bool,
}

impl HostTool {
    fn new(name: &'static str, safe: bool) -> Self {
        Self {
            name,
            safe,
            timeout: None,
            limit: ResultLimit::Default,
            cancels_siblings: false,
            hangs: false,
        }
    }
}

impl Tool for HostTool {
    fn name(&self) -> &str {
        self.name
    }

    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        self.safe
    }

    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    fn max_result_chars(&self) -> ResultLimit {
        self.limit
    }

    fn cancels_siblings_on_error(&self) -> bool {
        self.cancels_siblings
    }

    fn is_externally_completed(&self) -> bool {
        true
    }

    fn call(&self, _input: Value, _ctx: ToolContext) -> ToolFuture {
        if self.hangs {
            return Box::pin(std::future::pending());
        }
        Box::pin(async { Ok(ToolOutput::text("through a future")) })
    }
}

fn executor(tools: Vec<HostTool>, config: ExecutorConfig) -> ToolExecutor {
    let mut registry = ToolRegistry::new();
    for tool in tools {
        registry.register(tool).unwrap();
    }
    ToolExecutor::builder(registry).config(config).build()
}

/// `timed`: a one-second timeout, and a future (when the turn calls it) that never completes.
fn hanging_timed() -> HostTool {
    let mut timed = HostTool::new("timed", true);
    timed.timeout = Some(Duration::from_secs(1));
    timed.hangs = true;
    timed
}

/// A cleanup grace of 100 ms.
fn short_grace() -> ExecutorConfig {
    ExecutorConfig {
        cleanup_grace: Duration::from_millis(100),
        ..ExecutorConfig::default()
    }
}

/// Polls the turn until it would block: its events, and whether it ended.
fn step(turn: &mut Turn) -> (Vec<TurnEvent>, bool) {
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    let mut events = Vec::new();
    loop {
        match turn.poll_next_event(&mut cx) {
            Poll::Ready(Some(event)) => events.push(event),
            Poll::Ready(None) => return (events, true),
            Poll::Pending => return (events, false),
        }
    }
}

/// The calls to start and to abort since the last look.
fn work(turn: &mut Turn) -> (Vec<u32>, Vec<u32>) {
    let (mut starts, mut aborts) = (Vec::new(), Vec::new());
    turn.take_external_work(&mut starts, &mut aborts);
    (starts, aborts)
}

fn results(events: &[TurnEvent]) -> Vec<(usize, ToolResult)> {
    events
        .iter()
        .filter_map(|event| match event {
            TurnEvent::Result { index, result } => Some((*index, result.clone())),
            _ => None,
        })
        .collect()
}

fn text(result: &ToolResult) -> &str {
    match &result.content {
        ToolResultContent::Text(text) => text,
        ToolResultContent::Blocks(_) => panic!("blocks"),
    }
}

fn submit(turn: &Turn, calls: &[(&str, &str)]) {
    for (id, name) in calls {
        turn.submit(ToolUse::new(*id, *name, json!({}))).unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn host_calls_are_started_by_index_and_answered_in_order() {
    let mut small = HostTool::new("small", true);
    small.limit = ResultLimit::Chars(10);
    let mut timed = HostTool::new("timed", true);
    timed.timeout = Some(Duration::from_secs(1));
    let exec = executor(
        vec![
            HostTool::new("host", true),
            HostTool::new("alone", false),
            small,
            timed,
        ],
        ExecutorConfig::default(),
    );
    let mut turn = exec.turn();
    turn.enable_external_calls();
    submit(
        &turn,
        &[
            ("h0", "host"),
            ("h1", "host"),
            ("s2", "small"),
            ("t3", "timed"),
            ("a4", "alone"),
            ("h5", "host"),
            ("u6", "missing"),
        ],
    );
    turn.seal();
    let mut events = step(&mut turn).0;
    // The call with a timeout needs a future: it is called, not handed over. The exclusive call
    // waits for the running ones, and the call after it for it.
    assert_eq!(work(&mut turn), (vec![0, 1, 2], vec![]));
    assert!(turn.complete_external(1, ToolOutput::text("one")));
    assert!(turn.complete_external(0, ToolOutput::text("zero")));
    assert!(
        !turn.complete_external(1, ToolOutput::text("again")),
        "answered once"
    );
    assert!(
        !turn.complete_external(3, ToolOutput::text("x")),
        "not a host call"
    );
    events.extend(step(&mut turn).0);
    assert_eq!(work(&mut turn).0, Vec::<u32>::new(), "a4 waits for s2");
    assert!(turn.complete_external(2, ToolOutput::text("x".repeat(100))));
    events.extend(step(&mut turn).0);
    assert_eq!(work(&mut turn).0, vec![4]);
    assert!(turn.complete_external(4, ToolOutput::error("refused")));
    events.extend(step(&mut turn).0);
    assert_eq!(work(&mut turn).0, vec![5]);
    assert!(turn.complete_external(5, ToolOutput::text("five")));
    let (more, ended) = step(&mut turn);
    events.extend(more);
    assert!(ended);
    let results = results(&events);
    assert_eq!(
        results.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        [0, 1, 2, 3, 4, 5, 6]
    );
    assert_eq!(text(&results[0].1), "zero");
    assert_eq!(text(&results[1].1), "one");
    assert_ne!(text(&results[2].1), "x".repeat(100), "over its limit");
    assert_eq!(text(&results[3].1), "through a future");
    assert!(results[4].1.is_error);
    assert_eq!(text(&results[4].1), "refused");
    assert!(results[6].1.is_error);
    let kept: Vec<bool> = (0..7).map(|i| turn.external_content_kept(i)).collect();
    assert_eq!(kept, [true, true, false, false, true, true, false]);
    let started = events
        .iter()
        .filter(|e| matches!(e, TurnEvent::Started { .. }))
        .count();
    let finished = events
        .iter()
        .filter(|e| matches!(e, TurnEvent::Finished { .. }))
        .count();
    assert_eq!((started, finished), (6, 7));
}

#[tokio::test(start_paused = true)]
async fn cancelling_aborts_host_calls_and_one_grace_bounds_them() {
    let config = ExecutorConfig {
        max_concurrency: 2,
        cleanup_grace: Duration::from_millis(100),
        ..ExecutorConfig::default()
    };
    let exec = executor(vec![HostTool::new("host", true)], config);
    let mut turn = exec.turn();
    turn.enable_external_calls();
    submit(&turn, &[("a", "host"), ("b", "host"), ("c", "host")]);
    turn.begin_finish();
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    assert!(turn.poll_finish(&mut cx).is_pending());
    assert_eq!(work(&mut turn), (vec![0, 1], vec![]));
    turn.cancel();
    assert!(turn.poll_finish(&mut cx).is_pending());
    assert_eq!(
        work(&mut turn),
        (vec![], vec![0, 1]),
        "both running calls are aborted"
    );
    // Answering after the abort gives the cancellation's result, not the answer.
    assert!(turn.complete_external(0, ToolOutput::text("done anyway")));
    assert!(turn.poll_finish(&mut cx).is_pending(), "b has its grace");
    tokio::time::advance(Duration::from_millis(150)).await;
    let Poll::Ready(Ok(results)) = turn.poll_finish(&mut cx) else {
        panic!("the grace ran out: the turn ends");
    };
    assert!(results.iter().all(|r| r.is_error));
    assert!(text(&results[0]).contains("was cancelled"), "{results:?}");
    assert!(text(&results[1]).contains("was cancelled"));
    assert!(text(&results[2]).contains("was not run"));
    assert!(!turn.complete_external(1, ToolOutput::text("too late")));
    assert!(!turn.external_content_kept(0));
}

#[tokio::test(start_paused = true)]
async fn a_turn_waits_only_on_its_host_while_no_future_or_grace_of_its_own_runs() {
    let exec = executor(
        vec![HostTool::new("host", true), hanging_timed()],
        short_grace(),
    );
    let mut turn = exec.turn();
    turn.enable_external_calls();
    step(&mut turn);
    assert!(
        turn.waits_only_on_host(),
        "open and empty: only a submit or seal moves it"
    );
    submit(&turn, &[("h0", "host")]);
    step(&mut turn);
    assert_eq!(work(&mut turn).0, vec![0]);
    assert!(turn.waits_only_on_host(), "h0 is the host's to answer");
    submit(&turn, &[("t1", "timed")]);
    step(&mut turn);
    assert!(
        !turn.waits_only_on_host(),
        "t1 runs as a future of the turn, with its timeout"
    );
    tokio::time::advance(Duration::from_millis(1_050)).await;
    step(&mut turn);
    assert!(
        !turn.waits_only_on_host(),
        "t1 timed out and has its cleanup grace"
    );
    tokio::time::advance(Duration::from_millis(150)).await;
    let results_so_far = results(&step(&mut turn).0);
    assert!(results_so_far.is_empty(), "t1 waits behind h0 in order");
    assert!(turn.waits_only_on_host(), "t1 is detached: h0 is left");
    turn.cancel();
    step(&mut turn);
    assert_eq!(work(&mut turn).1, vec![0], "h0 is aborted");
    assert!(
        !turn.waits_only_on_host(),
        "h0's cleanup grace is counting down"
    );
    turn.seal();
    tokio::time::advance(Duration::from_millis(150)).await;
    let (events, ended) = step(&mut turn);
    assert!(ended, "the grace ran out: {events:?}");
    assert!(!turn.waits_only_on_host(), "a done turn waits on nothing");
}

#[tokio::test(start_paused = true)]
async fn a_turn_calling_host_tools_through_futures_waits_on_its_host_while_they_run() {
    // No `enable_external_calls` (an agent's turns): the host tools' calls run as futures,
    // which wait for the host alone unless a timeout races them.
    let mut host = HostTool::new("host", true);
    host.hangs = true;
    let exec = executor(
        vec![host, hanging_timed(), HostTool::new("quick", true)],
        short_grace(),
    );
    let mut turn = exec.turn();
    submit(&turn, &[("h0", "host"), ("q1", "quick")]);
    let (events, _) = step(&mut turn);
    assert_eq!(results(&events).len(), 0, "q1 waits behind h0 in order");
    assert!(
        turn.waits_only_on_host(),
        "h0's future waits on its host alone, q1 answered at once"
    );
    submit(&turn, &[("t2", "timed")]);
    step(&mut turn);
    assert!(!turn.waits_only_on_host(), "t2 runs with its timeout");
    tokio::time::advance(Duration::from_millis(1_050)).await;
    step(&mut turn);
    assert!(!turn.waits_only_on_host(), "t2 timed out: its grace runs");
    tokio::time::advance(Duration::from_millis(150)).await;
    step(&mut turn);
    assert!(
        turn.waits_only_on_host(),
        "t2 timed out and its grace ran out: h0 is left"
    );
    turn.cancel();
    step(&mut turn);
    assert!(!turn.waits_only_on_host(), "h0 now races its cleanup grace");
    turn.seal();
    tokio::time::advance(Duration::from_millis(150)).await;
    let (_, ended) = step(&mut turn);
    assert!(ended);
    assert!(!turn.waits_only_on_host());
}

#[tokio::test(start_paused = true)]
async fn a_failing_host_call_cancels_its_siblings() {
    let mut shell = HostTool::new("shell", true);
    shell.cancels_siblings = true;
    let exec = executor(vec![shell], ExecutorConfig::default());
    let mut turn = exec.turn();
    turn.enable_external_calls();
    submit(&turn, &[("a", "shell"), ("b", "shell")]);
    turn.seal();
    let mut events = step(&mut turn).0;
    assert_eq!(work(&mut turn).0, vec![0, 1]);
    assert!(turn.complete_external(1, ToolOutput::error("exit 1")));
    events.extend(step(&mut turn).0);
    assert_eq!(work(&mut turn), (vec![], vec![0]));
    assert!(turn.complete_external(0, ToolOutput::text("ok")));
    let (more, ended) = step(&mut turn);
    events.extend(more);
    assert!(ended);
    let results = results(&events);
    assert_eq!(
        text(&results[0].1),
        "Tool 'shell' was cancelled: a parallel call to 'shell' (b) failed"
    );
    assert_eq!(text(&results[1].1), "exit 1");
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, TurnEvent::Detached { .. })),
        "answered within its grace"
    );
}

/// A finishing turn's `poll_finish`, once.
fn finish_step(turn: &mut Turn) -> Poll<Vec<ToolResult>> {
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    turn.poll_finish(&mut cx).map(|outcome| outcome.unwrap())
}

fn text_requests(turn: &mut Turn) -> Vec<u32> {
    let mut requests = Vec::new();
    turn.take_external_text_requests(&mut requests);
    requests
}

#[tokio::test(start_paused = true)]
async fn held_answers_keep_their_text_with_the_host_when_nothing_reads_it() {
    let mut small = HostTool::new("small", true);
    small.limit = ResultLimit::Chars(9);
    let mut open = HostTool::new("open", true);
    open.limit = ResultLimit::Unlimited;
    let exec = executor(
        vec![HostTool::new("host", true), small, open],
        ExecutorConfig::default(),
    );
    let mut turn = exec.turn();
    turn.enable_external_calls();
    submit(
        &turn,
        &[
            ("h0", "host"),
            ("s1", "small"),
            ("s2", "small"),
            ("o3", "open"),
            ("h4", "host"),
        ],
    );
    // Streaming with events: the turn reads every text (its `Result` events carry them).
    step(&mut turn);
    assert_eq!(work(&mut turn).0, vec![0, 1, 2, 3, 4]);
    assert_eq!(
        turn.complete_external_held(0, 4, false),
        Err(ferroloop::exec::TextNeeded)
    );
    turn.begin_finish();
    assert!(finish_step(&mut turn).is_pending());
    assert_eq!(turn.complete_external_held(0, 4, false), Ok(true));
    assert_eq!(
        turn.complete_external_held(0, 4, false),
        Ok(false),
        "answered once"
    );
    assert_eq!(
        turn.complete_external_held(9, 4, false),
        Ok(false),
        "no such call"
    );
    // Within its limit (three bytes a character at most): held; past it, the text is needed.
    assert_eq!(turn.complete_external_held(1, 3, true), Ok(true));
    assert_eq!(
        turn.complete_external_held(2, 10, false),
        Err(ferroloop::exec::TextNeeded),
        "may be over its limit"
    );
    assert!(turn.complete_external(2, ToolOutput::text("x".repeat(10))));
    assert_eq!(turn.complete_external_held(3, 60_000, false), Ok(true));
    assert!(finish_step(&mut turn).is_pending(), "h4 runs");
    assert_eq!(turn.complete_external_held(4, 2, false), Ok(true));
    let Poll::Ready(results) = finish_step(&mut turn) else {
        panic!("the turn is done");
    };
    // Under the turn budget even at three bytes a character (s2's replacement is recorded):
    // no text is needed.
    assert!(text_requests(&mut turn).is_empty());
    assert_eq!(results.len(), 5);
    let kept: Vec<bool> = (0..5).map(|i| turn.external_content_kept(i)).collect();
    assert_eq!(kept, [true, true, false, true, true]);
    // Held results are placeholders (the host has their text); the flags are the core's.
    assert_eq!(text(&results[0]), "");
    assert!(results[1].is_error && text(&results[1]).is_empty());
    assert_ne!(
        text(&results[2]),
        "x".repeat(10),
        "over its limit: replaced"
    );
    assert_eq!(results[4].tool_use_id, "h4");
}

#[tokio::test(start_paused = true)]
async fn a_turn_budget_that_may_be_exceeded_asks_for_the_held_texts() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ExecutorConfig::default();
    config.budget.spill_dir = dir.path().to_owned();
    config.budget.turn_budget_chars = Some(300);
    config.budget.preview_bytes = 4;
    let exec = executor(vec![HostTool::new("host", true)], config);
    let mut turn = exec.turn();
    turn.enable_external_calls();
    submit(&turn, &[("a", "host"), ("b", "host"), ("c", "host")]);
    turn.begin_finish();
    assert!(finish_step(&mut turn).is_pending());
    assert_eq!(work(&mut turn).0, vec![0, 1, 2]);
    let long = "long text ".repeat(40);
    assert_eq!(turn.complete_external_held(0, long.len(), false), Ok(true));
    assert!(turn.complete_external(1, ToolOutput::text("short")));
    assert_eq!(turn.complete_external_held(2, 3, false), Ok(true));
    // 400 + 5 + 3 characters at most: over 300, so the budget may need the held texts.
    assert!(
        finish_step(&mut turn).is_pending(),
        "waits for the held texts"
    );
    assert_eq!(text_requests(&mut turn), vec![0, 2]);
    assert!(text_requests(&mut turn).is_empty(), "asked once");
    assert!(turn.provide_external_text(0, long.clone()));
    assert!(!turn.provide_external_text(1, "x".into()), "not held");
    assert!(
        finish_step(&mut turn).is_pending(),
        "c's text is still awaited"
    );
    assert!(turn.provide_external_text(2, "abc".into()));
    assert!(!turn.provide_external_text(2, "abc".into()), "given once");
    let Poll::Ready(results) = finish_step(&mut turn) else {
        panic!("the turn is done");
    };
    // The largest result was spilled, as if its text had come with the answer.
    assert_ne!(text(&results[0]), long);
    assert_eq!(text(&results[1]), "short");
    assert_eq!(text(&results[2]), "abc");
    let kept: Vec<bool> = (0..3).map(|i| turn.external_content_kept(i)).collect();
    assert_eq!(
        kept,
        [false, false, false],
        "after the budget ran, the host reads every result"
    );
}
