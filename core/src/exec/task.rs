//! A call in flight, as a hand-written future: the common paths (no hooks; a tool that completes
//! when first polled, or one that waits without a timeout on a turn's task) cost no allocation
//! beyond the tool's own future and the slot in the turn's `FuturesUnordered`, and take no lock
//! (an answer ready at the first poll costs one atomic read: whether some host of the turn
//! reported the order of an answer and the cancellation);
//! the slow paths (hooks, a timeout, a call on a task of its own, the cleanup grace after a
//! cancellation) move into one boxed future when they are needed.
//!
//! A waiting call of a turn registers no cancellation waiter of its own: the turn watches its
//! token once for all its calls, and when it observes the cancellation it polls every running
//! call again (see `Turn::alert_running`); a waiting call checks the turn's cancellation flag
//! (an atomic read) each time it is polled.
//!
//! Cancellation against an answer is decided by the order of the two, as far as it is known,
//! not by the moment of the poll. The first poll reads no cancellation: an answer ready then
//! was delivered while the tool was handed the call (its own, even after a cancellation it
//! caused), unless the host that delivered it from outside the future (through the call's answer
//! channel, [`ToolContext::answer_channel`]) reports it came after a cancellation that landed
//! once the call was handed over. At a later poll the cancellation, once the turn observed it,
//! comes first (a tool that returns because it saw it is answered with the cancellation's
//! message), unless the answer channel reports the answer was delivered before it.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::FutureExt as _;
use futures_util::future::CatchUnwind;
use serde_json::Value;
use tokio::time::Instant;

use super::admission::Concurrency;
use super::call::{
    CallEnv, CallOutcome, Outcome, TimeLimit, answer_outcome, cancelled_outcome, execute_hooked,
    panicked, wait_for_tool,
};
use super::cancel::CancellationToken;
use super::context::{ToolContext, TurnShared};
use super::events::CallStatus;
use super::tool::{RegisteredTool, ToolFuture};
use super::types::ToolResultContent;

type SlowPath = Pin<Box<dyn Future<Output = Outcome> + Send>>;

/// The outcome of a tool future that finished: its answer, or the panic it ended with.
fn finished_outcome(
    name: &str,
    finished: Result<<ToolFuture as Future>::Output, Box<dyn std::any::Any + Send>>,
) -> Outcome {
    match finished {
        Ok(answer) => answer_outcome(answer),
        Err(panic) => panicked(name, &panic),
    }
}

enum State {
    /// Admitted, not yet polled.
    Start { tool_use_id: String, input: Value },
    /// The tool's future, polled for the first time.
    FirstPoll {
        future: CatchUnwind<AssertUnwindSafe<ToolFuture>>,
        leaf: Option<CancellationToken>,
        limit: Option<TimeLimit>,
    },
    /// The tool's future, pending, without a timeout, on the turn's task: the turn watches the
    /// cancellation for it.
    Waiting(CatchUnwind<AssertUnwindSafe<ToolFuture>>),
    /// Hooks, or a tool raced against cancellation and its timeout.
    Slow(SlowPath),
    /// The outcome was returned.
    Done,
}

/// One call, from admission to its outcome.
pub(crate) struct CallTask {
    index: usize,
    concurrency: Concurrency,
    tool: Arc<RegisteredTool>,
    shared: Arc<TurnShared>,
    started: Option<Instant>,
    /// Polled by its turn's task, which watches the cancellation for it (not on a task of its
    /// own).
    watched: bool,
    span: tracing::Span,
    state: State,
}

impl CallTask {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        index: usize,
        tool_use_id: String,
        tool: Arc<RegisteredTool>,
        input: Value,
        concurrency: Concurrency,
        shared: Arc<TurnShared>,
        timed: bool,
        watched: bool,
        span: tracing::Span,
    ) -> Self {
        Self {
            index,
            concurrency,
            tool,
            shared,
            started: timed.then(Instant::now),
            watched,
            span,
            state: State::Start { tool_use_id, input },
        }
    }

    pub(crate) fn tool(&self) -> &Arc<RegisteredTool> {
        &self.tool
    }

    fn env(&self) -> CallEnv {
        CallEnv {
            index: self.index,
            tool: self.tool.clone(),
            shared: self.shared.clone(),
        }
    }

    /// The slow path of a pending tool: racing `token` and the timeout, then the cleanup grace.
    fn wait_slowly(
        &self,
        future: CatchUnwind<AssertUnwindSafe<ToolFuture>>,
        token: CancellationToken,
        limit: Option<TimeLimit>,
    ) -> State {
        let env = self.env();
        State::Slow(Box::pin(async move {
            match wait_for_tool(&env, future, token, limit).await {
                Ok(Ok(answer)) => answer_outcome(answer),
                Ok(Err(panic)) => panicked(env.tool.name(), &panic),
                Err(outcome) => outcome,
            }
        }))
    }

    /// The outcome of a tool future that finished, `cancelled` when the cancellation was
    /// observed before it was polled: its answer, unless its host reported the answer came
    /// after the cancellation, or the cancellation was observed first and the host did not
    /// report the answer came before it.
    #[inline(always)]
    fn answered(
        &self,
        finished: Result<<ToolFuture as Future>::Output, Box<dyn std::any::Any + Send>>,
        cancelled: bool,
    ) -> Outcome {
        if self
            .shared
            .cancellation
            .answer_stands(self.index, cancelled)
        {
            finished_outcome(self.tool.name(), finished)
        } else {
            self.cancelled_instead()
        }
    }

    /// The outcome of an answer the cancellation overrides (the answer is dropped).
    #[cold]
    #[inline(never)]
    fn cancelled_instead(&self) -> Outcome {
        cancelled_outcome(self.tool.name(), &self.shared)
    }

    /// The call's result. The state is `Done` already: `poll` takes the state out, leaving
    /// `Done`, before it handles it (not assigned again here: dropping the placeholder is a call
    /// per outcome).
    fn outcome(&self, (status, content, detached): Outcome) -> CallOutcome {
        debug_assert!(matches!(self.state, State::Done));
        CallOutcome {
            index: self.index,
            tool: self.tool.clone(),
            concurrency: self.concurrency,
            status,
            content,
            duration: self.started.map_or(Duration::ZERO, |at| at.elapsed()),
            detached,
        }
    }
}

impl Future for CallTask {
    type Output = CallOutcome;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<CallOutcome> {
        let this = self.get_mut();
        let span = this.span.clone();
        let _entered = span.enter();
        loop {
            match std::mem::replace(&mut this.state, State::Done) {
                State::Start { tool_use_id, input } => {
                    if let Some(hooks) = this.shared.exec.hooks.clone() {
                        let env = this.env();
                        this.state = State::Slow(Box::pin(async move {
                            execute_hooked(&env, hooks.as_ref(), input, tool_use_id).await
                        }));
                        continue;
                    }
                    let timeout = this
                        .tool
                        .timeout
                        .or(this.shared.exec.config.default_timeout);
                    // Only a call that can time out has a token of its own (its timeout cancels
                    // it alone); the others share the turn's, cloned only when needed (a token
                    // clone takes the token tree's lock).
                    let leaf = timeout.map(|_| this.shared.cancellation.call_token(true));
                    let ctx = ToolContext::new(
                        tool_use_id,
                        this.index,
                        leaf.clone(),
                        this.shared.clone(),
                    );
                    let tool = &this.tool.tool;
                    let limit = TimeLimit::starting_now(timeout);
                    match std::panic::catch_unwind(AssertUnwindSafe(|| tool.call(input, ctx))) {
                        Ok(future) => {
                            this.state = State::FirstPoll {
                                future: AssertUnwindSafe(future).catch_unwind(),
                                leaf,
                                limit,
                            };
                        }
                        Err(panic) => {
                            let outcome = panicked(this.tool.name(), &panic);
                            return Poll::Ready(this.outcome(outcome));
                        }
                    }
                }
                State::FirstPoll {
                    mut future,
                    leaf,
                    limit,
                } => match future.poll_unpin(cx) {
                    // No cancellation is read before the first poll: an answer ready then was
                    // delivered while the tool was handed the call (its own, whatever happened
                    // meanwhile), unless its host reports it came after a cancellation.
                    Poll::Ready(finished) => {
                        let outcome = match limit.and_then(|limit| {
                            limit.overrun(this.tool.name(), leaf.as_ref(), &this.shared, this.index)
                        }) {
                            Some(overrun) => overrun,
                            None => this.answered(finished, false),
                        };
                        return Poll::Ready(this.outcome(outcome));
                    }
                    Poll::Pending => {
                        if leaf.is_none() && this.watched && !this.shared.cancellation.observed() {
                            // The turn polls this call again when its token is cancelled.
                            this.state = State::Waiting(future);
                            return Poll::Pending;
                        }
                        // Race it against the cancellation and its timeout.
                        let token =
                            leaf.unwrap_or_else(|| this.shared.cancellation.call_token(false));
                        this.state = this.wait_slowly(future, token, limit);
                    }
                },
                State::Waiting(mut future) => {
                    // Cancellation first, as in `wait_for_tool`: a tool that returns because it
                    // saw the cancellation is answered with the cancellation's message, unless
                    // its host reports the answer was delivered before the cancellation.
                    let cancelled = this.shared.cancellation.observed();
                    match future.poll_unpin(cx) {
                        Poll::Ready(finished) => {
                            let outcome = this.answered(finished, cancelled);
                            return Poll::Ready(this.outcome(outcome));
                        }
                        Poll::Pending if cancelled => {
                            let token = this.shared.cancellation.call_token(false);
                            this.state = this.wait_slowly(future, token, None);
                        }
                        Poll::Pending => {
                            this.state = State::Waiting(future);
                            return Poll::Pending;
                        }
                    }
                }
                State::Slow(mut slow) => match slow.as_mut().poll(cx) {
                    Poll::Ready(outcome) => return Poll::Ready(this.outcome(outcome)),
                    Poll::Pending => {
                        this.state = State::Slow(slow);
                        return Poll::Pending;
                    }
                },
                State::Done => {
                    // Polled after completion: a caller bug; answer rather than panic.
                    let content = ToolResultContent::Text(format!(
                        "Tool '{}' failed with an internal error: polled after completion",
                        this.tool.name()
                    ));
                    return Poll::Ready(this.outcome((CallStatus::Panicked, content, false)));
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::exec::cancel::StopReason;
    use crate::exec::{FnTool, ToolError, ToolExecutor, ToolOutput, ToolRegistry};

    /// What a host reported about the order of a call's answer and its cancellation.
    #[derive(Clone, Copy)]
    enum Report {
        Nothing,
        Before,
        After,
    }

    /// A call whose tool was handed the call and whose host already delivered `answer`
    /// (reporting its order against the cancellation as `report` says), polled first after the
    /// turn was cancelled.
    async fn polled_first_after_a_cancellation(
        report: Report,
        answer: Result<ToolOutput, ToolError>,
    ) -> CallOutcome {
        let mut registry = ToolRegistry::new();
        registry
            .register(FnTool::new("worker", |_, _| async {
                Ok(ToolOutput::text("unused"))
            }))
            .unwrap();
        let exec = ToolExecutor::new(registry);
        let tool = exec.inner().registry.lookup("worker").unwrap().clone();
        let shared = Arc::new(TurnShared::new(exec.inner().clone(), false, None));
        let mut task = CallTask::new(
            0,
            "a".into(),
            tool,
            Value::Null,
            Concurrency::Safe,
            shared.clone(),
            false,
            true,
            tracing::Span::none(),
        );
        let ctx = ToolContext::new("a".into(), 0, None, shared.clone());
        let answer: ToolFuture = Box::pin(async move {
            match report {
                Report::Nothing => {}
                Report::Before => ctx.answered_before_cancellation(),
                Report::After => ctx.answered_after_cancellation(),
            }
            answer
        });
        task.state = State::FirstPoll {
            future: AssertUnwindSafe(answer).catch_unwind(),
            leaf: None,
            limit: None,
        };
        shared.cancellation.stop(StopReason::Cancelled);
        task.await
    }

    /// A host's worker saw the cancellation, which landed after the tool was handed the call,
    /// and answered, all before the first poll: the outcome is the cancellation.
    #[tokio::test]
    async fn a_cancellation_after_the_call_was_handed_over_wins_over_the_answer() {
        let interrupted = Err(ToolError::failed("worker: interrupted"));
        let outcome = polled_first_after_a_cancellation(Report::After, interrupted).await;
        assert_eq!(outcome.status, CallStatus::Cancelled);
        assert_eq!(
            outcome.content,
            ToolResultContent::Text("Tool 'worker' was cancelled: the turn was cancelled".into())
        );
        assert!(!outcome.detached);
    }

    /// A tool that stops its run while it is handed the call (a C callback cancelling the run
    /// token, then completing) answers for itself, as one that does so while it is polled.
    #[tokio::test]
    async fn a_cancellation_while_the_tool_was_handed_the_call_is_its_own() {
        for report in [Report::Before, Report::Nothing] {
            let interrupted = Err(ToolError::failed("worker: interrupted"));
            let outcome = polled_first_after_a_cancellation(report, interrupted).await;
            assert_eq!(outcome.status, CallStatus::Failed);
            assert_eq!(
                outcome.content,
                ToolResultContent::Text("worker: interrupted".into())
            );
        }
    }

    /// An answer delivered before the cancellation stands, although the cancellation was
    /// already there when the call was first polled: the order decides, not the poll. (Main
    /// before session 17 read the token at the first poll and answered this call cancelled.)
    #[tokio::test]
    async fn an_answer_delivered_before_a_cancellation_stands_at_the_first_poll() {
        for report in [Report::Before, Report::Nothing] {
            let outcome =
                polled_first_after_a_cancellation(report, Ok(ToolOutput::text("done"))).await;
            assert_eq!(outcome.status, CallStatus::Succeeded);
            assert_eq!(outcome.content, ToolResultContent::Text("done".into()));
        }
    }

    /// A call that made a change that stands (a built-in `write` past its commit gate) and
    /// answers after its own timeout ran out is answered with its own answer: "timed out" would
    /// tell the model that nothing happened, and it would redo a change already made. The same
    /// call without the commit is reported as timed out.
    #[cfg(feature = "tools")]
    #[tokio::test(start_paused = true)]
    async fn a_change_made_before_the_timeout_keeps_its_answer() {
        use std::time::Duration;
        for commit in [true, false] {
            let mut registry = ToolRegistry::new();
            registry
                .register(
                    FnTool::new("writer", move |_, ctx| async move {
                        if commit {
                            ctx.committed();
                        }
                        // The rename and the answer come after the timer fired (within the
                        // cleanup grace).
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        Ok(ToolOutput::text("Overwrote 'f.txt'"))
                    })
                    .with_timeout(Duration::from_millis(30)),
                )
                .unwrap();
            let exec = ToolExecutor::new(registry);
            let results = exec
                .run(vec![crate::exec::ToolUse::new(
                    "a",
                    "writer",
                    serde_json::json!({}),
                )])
                .await
                .unwrap();
            let expected = if commit {
                "Overwrote 'f.txt'"
            } else {
                "Tool 'writer' timed out after 30ms"
            };
            assert_eq!(
                results[0].content,
                ToolResultContent::Text(expected.into()),
                "commit: {commit}"
            );
            assert_eq!(results[0].is_error, !commit, "commit: {commit}");
        }
    }
}
