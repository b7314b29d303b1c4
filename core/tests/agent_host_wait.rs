//! `HostWait`: an agent run says when it waits on its host alone (its tools are the host's,
//! answered through futures the host wakes), so that a host keeping an event loop alive for
//! the run's own work (Node) can let it go while the run waits on the host's tools.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

mod common;

use common::{call, reply, text};

use ferroloop::agent::replay::ScriptedModel;
use ferroloop::agent::{
    Agent, AgentConfig, AgentEvent, AgentRun, HostWait, RunOptions, StopReason,
};
use ferroloop::exec::{
    ExecutorConfig, Tool, ToolContext, ToolExecutor, ToolFuture, ToolOutput, ToolRegistry,
};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// The answers the host owes, by tool use id.
type Owed = Arc<Mutex<Vec<(String, oneshot::Sender<String>)>>>;

/// A tool the host completes: its future waits for the host's answer (or the call's
/// cancellation) and nothing else.
struct HostTool {
    name: &'static str,
    timeout: Option<Duration>,
    owed: Owed,
}

impl Tool for HostTool {
    fn name(&self) -> &str {
        self.name
    }

    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        true
    }

    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    fn is_externally_completed(&self) -> bool {
        true
    }

    fn call(&self, _input: Value, ctx: ToolContext) -> ToolFuture {
        let (answer, answered) = oneshot::channel();
        self.owed
            .lock()
            .unwrap()
            .push((ctx.tool_use_id().to_owned(), answer));
        Box::pin(async move {
            tokio::select! {
                text = answered => Ok(ToolOutput::text(text.unwrap_or_default())),
                () = ctx.cancelled() => Ok(ToolOutput::error("aborted")),
            }
        })
    }
}

/// An agent whose first turn calls `host` (and `timed`, with a one-minute timeout, when
/// `with_timed`), then ends.
fn agent(owed: &Owed, with_timed: bool) -> Agent {
    let (model, _) = ScriptedModel::new(move |n, request| match n {
        0 => {
            let mut content = vec![call("h1", "host", json!({}))];
            if with_timed {
                content.push(call("t1", "timed", json!({})));
            }
            reply(request, content, "tool_use")
        }
        _ => reply(request, vec![text("Done.")], "end_turn"),
    })
    .recorded();
    let mut tools = ToolRegistry::new();
    for (name, timeout) in [("host", None), ("timed", Some(Duration::from_secs(60)))] {
        tools
            .register(HostTool {
                name,
                timeout,
                owed: owed.clone(),
            })
            .unwrap();
    }
    let config = ExecutorConfig {
        cleanup_grace: Duration::from_millis(50),
        ..ExecutorConfig::default()
    };
    let executor = ToolExecutor::builder(tools).config(config).build();
    Agent::new(AgentConfig::new("m"), Arc::new(model), Arc::new(executor))
}

fn start(agent: &Agent, wait: &HostWait) -> AgentRun {
    let mut options = RunOptions::default();
    options.host_wait = Some(wait.clone());
    agent.run_messages_with(vec![json!({"role": "user", "content": "go"})], options)
}

/// A run of [`agent`] (`with_timed`), read until its calls were made: the answers owed, the
/// run's `HostWait`, the run and its events so far.
async fn called(with_timed: bool) -> (Owed, HostWait, AgentRun, Vec<AgentEvent>) {
    let owed = Owed::default();
    let wait = HostWait::new();
    let mut run = start(&agent(&owed, with_timed), &wait);
    let mut events = Vec::new();
    until_called(&mut run, &owed, if with_timed { 2 } else { 1 }, &mut events).await;
    (owed, wait, run, events)
}

/// Reads events into `seen` until `owed` holds `calls` calls.
async fn until_called(run: &mut AgentRun, owed: &Owed, calls: usize, seen: &mut Vec<AgentEvent>) {
    while owed.lock().unwrap().len() < calls {
        let event = tokio::time::timeout(Duration::from_secs(10), run.next())
            .await
            .expect("the calls were made")
            .expect("the run goes on");
        seen.push(event);
    }
}

/// Answers the host's call `id` the way a binding does: the answer, then `host_acted`.
fn answer(owed: &Owed, wait: &HostWait, id: &str) {
    let mut owed = owed.lock().unwrap();
    let at = owed.iter().position(|(owed, _)| owed == id).unwrap();
    let (_, sender) = owed.remove(at);
    sender.send(format!("answer to {id}")).unwrap();
    wait.host_acted();
}

fn stop_reason(events: &[AgentEvent]) -> StopReason {
    match events.last() {
        Some(AgentEvent::Stop { reason, .. }) => *reason,
        other => panic!("the last event is not Stop: {other:?}"),
    }
}

#[tokio::test]
async fn a_run_waits_on_its_host_while_settling_the_host_tools_calls() {
    assert!(
        !HostWait::new().waits_only_on_host(),
        "not attached to a run"
    );
    let (owed, wait, run, mut events) = called(false).await;
    tokio::time::timeout(Duration::from_secs(10), wait.became_idle())
        .await
        .expect("the run came to wait on its host");
    assert!(wait.waits_only_on_host(), "h1 is the host's to answer");
    answer(&owed, &wait, "h1");
    assert!(
        !wait.waits_only_on_host(),
        "the answer is delivered: the run has work until it looked at it"
    );
    events.extend(run.collect::<Vec<_>>().await);
    assert_eq!(stop_reason(&events), StopReason::EndTurn);
    assert!(!wait.waits_only_on_host(), "an ended run waits on nothing");
}

#[tokio::test]
async fn a_timed_call_keeps_the_run_working_until_it_is_answered() {
    let (owed, wait, mut run, mut events) = called(true).await;
    answer(&owed, &wait, "h1");
    // The run looks at h1's answer and goes back to waiting on t1, whose timeout it runs.
    loop {
        let event = tokio::time::timeout(Duration::from_secs(10), run.next())
            .await
            .unwrap()
            .unwrap();
        let h1_done =
            matches!(&event, AgentEvent::ToolFinished { tool_use_id, .. } if tool_use_id == "h1");
        events.push(event);
        if h1_done {
            break;
        }
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!wait.waits_only_on_host(), "t1 runs against its timeout");
    answer(&owed, &wait, "t1");
    events.extend(run.collect::<Vec<_>>().await);
    assert_eq!(stop_reason(&events), StopReason::EndTurn);
}

#[tokio::test]
async fn a_cancelled_run_does_not_wait_on_its_host() {
    let (_owed, wait, run, mut events) = called(false).await;
    tokio::time::timeout(Duration::from_secs(10), wait.became_idle())
        .await
        .unwrap();
    assert!(wait.waits_only_on_host());
    run.cancel();
    assert!(
        !wait.waits_only_on_host(),
        "cancelled: the run stops its calls on a grace of its own"
    );
    events.extend(run.collect::<Vec<_>>().await);
    assert_eq!(stop_reason(&events), StopReason::Aborted);
}
