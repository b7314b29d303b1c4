//! The slow paths of a call (hooks; a tool racing cancellation and its timeout; the bounded
//! cleanup grace), panic capture, and the model-readable messages.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use futures_util::FutureExt as _;
use serde_json::Value;

use super::admission::Concurrency;
use super::cancel::{CancellationToken, Cause, StopReason};
use super::context::{ToolContext, TurnShared};
use super::events::CallStatus;
use super::hooks::{AfterCall, BeforeCall, HookCall, Permission, ToolHooks};
use super::tool::{RegisteredTool, ToolError, ToolOutput};
use super::types::ToolResultContent;

/// What the slow paths of a call need (the common path lives in [`CallTask`](super::task::CallTask)).
pub(crate) struct CallEnv {
    pub(crate) index: usize,
    pub(crate) tool: Arc<RegisteredTool>,
    pub(crate) shared: Arc<TurnShared>,
}

/// How a call ended.
pub(crate) struct CallOutcome {
    pub(crate) index: usize,
    pub(crate) tool: Arc<RegisteredTool>,
    pub(crate) concurrency: Concurrency,
    pub(crate) status: CallStatus,
    pub(crate) content: ToolResultContent,
    pub(crate) duration: Duration,
    pub(crate) detached: bool,
}

/// What the race between the tool, the cancellation and the timeout produced.
enum Ended<T> {
    Done(T),
    Cancelled,
    TimedOut(Duration),
}

/// How a call ended: status, content, and whether the tool was detached.
pub(crate) type Outcome = (CallStatus, ToolResultContent, bool);

/// The tool's own answer, or a panic it raised.
pub(crate) type ToolReturn = Result<Result<ToolOutput, ToolError>, Box<dyn Any + Send>>;

/// Maps the tool's answer to an outcome (its content as the providers take it: see
/// [`ToolResultContent::into_sendable`]).
pub(crate) fn answer_outcome(answer: Result<ToolOutput, ToolError>) -> Outcome {
    match answer {
        Ok(output) if output.is_error => {
            (CallStatus::Failed, output.content.into_sendable(), false)
        }
        Ok(output) => (CallStatus::Succeeded, output.content.into_sendable(), false),
        Err(ToolError::Failed(message)) => (CallStatus::Failed, text(message), false),
        Err(ToolError::Fatal(message)) => (CallStatus::Fatal, text(message), false),
    }
}

/// Runs the tool to its answer, or to a panic, timeout or cancellation outcome.
async fn run_tool(
    env: &CallEnv,
    input: Value,
    tool_use_id: String,
) -> Result<Result<ToolOutput, ToolError>, Outcome> {
    let name = env.tool.name();
    let timeout = env.tool.timeout.or(env.shared.exec.config.default_timeout);
    // Only a call that can time out has a token of its own; the turn's token is cloned only
    // when needed (a token clone takes the token tree's lock).
    let leaf = timeout.map(|_| env.shared.cancellation.call_token(true));
    let ctx = ToolContext::new(tool_use_id, env.index, leaf.clone(), env.shared.clone());
    let tool = &env.tool.tool;
    let limit = TimeLimit::starting_now(timeout);
    let future = match std::panic::catch_unwind(AssertUnwindSafe(|| tool.call(input, ctx))) {
        Ok(future) => future,
        Err(panic) => return Err(panicked(name, &panic)),
    };
    let mut future = AssertUnwindSafe(future).catch_unwind();
    // A tool that completes on its first poll never registers a cancellation waiter or a timer.
    // No cancellation is read before it (see `CallTask`): an answer ready then stands unless its
    // host reports it came after a cancellation.
    let first = std::future::poll_fn(|cx| Poll::Ready(future.poll_unpin(cx))).await;
    let returned = match first {
        Poll::Ready(returned) => {
            if let Some(overrun) =
                limit.and_then(|limit| limit.overrun(name, leaf.as_ref(), &env.shared, env.index))
            {
                return Err(overrun);
            }
            if !env.shared.cancellation.answer_stands(env.index, false) {
                return Err(cancelled_outcome(name, &env.shared));
            }
            returned
        }
        Poll::Pending => {
            let token = leaf.unwrap_or_else(|| env.shared.cancellation.call_token(false));
            Box::pin(wait_for_tool(env, future, token, limit)).await?
        }
    };
    returned.map_err(|panic| panicked(name, &panic))
}

/// Waits for a tool that did not finish on its first poll, racing cancellation and timeout.
pub(crate) async fn wait_for_tool<F>(
    env: &CallEnv,
    future: F,
    token: CancellationToken,
    limit: Option<TimeLimit>,
) -> Result<ToolReturn, Outcome>
where
    F: std::future::Future<Output = ToolReturn> + Send + Unpin + 'static,
{
    let name = env.tool.name();
    let mut future = Answered::new(future);
    // Cancellation is checked first: a tool that returns because it saw the cancellation (often
    // with an error of its own) is answered with the cancellation's message, deterministically.
    let ended = match limit {
        None => tokio::select! {
            biased;
            () = token.cancelled() => Ended::Cancelled,
            done = &mut future => Ended::Done(done),
        },
        Some(TimeLimit { limit, deadline }) => {
            match tokio::select! {
                biased;
                () = token.cancelled() => Ended::Cancelled,
                done = &mut future => Ended::Done(done),
                () = tokio::time::sleep_until(deadline) => Ended::TimedOut(limit),
            } {
                // An answer that arrives after the deadline is late even when the timer could
                // not win the race: a host tool that blocked the thread its turn is polled on
                // (a synchronous JavaScript function) answers in the same wake-up as the timer.
                // An answer that arrived in time is on time, however late the turn is polled
                // (a C host polls between reads of the model's stream).
                // A call whose change stands (a `write` past its gate) keeps its answer.
                Ended::Done(_)
                    if future.answered_at() >= deadline
                        && !env.shared.cancellation.change_stands(env.index) =>
                {
                    env.shared.cancellation.time_out(env.index, &token);
                    return Err((
                        CallStatus::TimedOut,
                        text(timed_out_message(name, limit)),
                        false,
                    ));
                }
                ended => ended,
            }
        }
    };
    match ended {
        Ended::Done(returned) => {
            // Before the cancellation was seen, but its host may report it came after.
            if !env.shared.cancellation.answer_stands(env.index, false) {
                return Err(cancelled_outcome(name, &env.shared));
            }
            return Ok(returned);
        }
        Ended::Cancelled => {
            // An answer already there stands when its host reports it was delivered before the
            // cancellation; otherwise the cancellation is the outcome (no grace needed).
            let polled = std::future::poll_fn(|cx| Poll::Ready(future.poll_unpin(cx))).await;
            if let Poll::Ready(returned) = polled {
                if env.shared.cancellation.answer_stands(env.index, true) {
                    return Ok(returned);
                }
                return Err(cancelled_outcome(name, &env.shared));
            }
        }
        Ended::TimedOut(_) => {}
    }
    // Tell the tool (a timeout cancels only this call, its own token), then give it a bounded
    // grace.
    if matches!(ended, Ended::TimedOut(_)) {
        env.shared.cancellation.time_out(env.index, &token);
    } else {
        token.cancel();
    }
    let grace = env.shared.exec.config.cleanup_grace;
    let detached = match tokio::time::timeout(grace, &mut future).await {
        // An answer given during the grace comes after the cancellation: it is the
        // cancellation's, unless its host reports it in time (a cancellation that landed while
        // the tool was being handed the call is the tool's own: see
        // `ToolContext::answer_channel_in_hand_off`).
        //
        // After a timeout, only an answer reporting a change that stands is the call's (the
        // change was made: "timed out" would tell the model it was not).
        Ok(returned) => {
            let stands = match ended {
                Ended::Cancelled => env.shared.cancellation.answer_stands(env.index, true),
                Ended::TimedOut(_) => env.shared.cancellation.change_stands(env.index),
                Ended::Done(_) => false,
            };
            if stands {
                return Ok(returned);
            }
            false
        }
        Err(_) => {
            detach(env, future);
            true
        }
    };
    let (status, message) = match ended {
        Ended::TimedOut(limit) => (CallStatus::TimedOut, timed_out_message(name, limit)),
        _ => (
            CallStatus::Cancelled,
            cancelled_message(name, env.shared.cancellation.cause()),
        ),
    };
    Err((status, text(message), detached))
}

/// A call's time limit and the instant it runs out, fixed when the tool is handed the call: the
/// time a tool spends before its future first returns counts against it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TimeLimit {
    limit: Duration,
    deadline: tokio::time::Instant,
}

impl TimeLimit {
    /// The limit of a call handed over now: `None` without a timeout, and for a limit too long
    /// for the clock to represent (Python's `timeout=1e19`), which is no limit.
    pub(crate) fn starting_now(timeout: Option<Duration>) -> Option<Self> {
        let limit = timeout?;
        let deadline = tokio::time::Instant::now().checked_add(limit)?;
        Some(Self { limit, deadline })
    }

    /// The timeout outcome of an answer its future returned at the first poll, now, when the
    /// limit had run out by then: a tool that blocks the thread it is handed the call on (a
    /// synchronous host callback that completes the call inline, a Rust tool that blocks before
    /// its first `.await`) answers only when it returns. `leaf`, the own token of call `index`
    /// of `shared`'s turn, is cancelled as for any timeout.
    pub(crate) fn overrun(
        self,
        tool: &str,
        leaf: Option<&CancellationToken>,
        shared: &TurnShared,
        index: usize,
    ) -> Option<Outcome> {
        // A call whose change stands (a `write` past its gate) keeps its answer.
        if tokio::time::Instant::now() < self.deadline || shared.cancellation.change_stands(index) {
            return None;
        }
        if let Some(leaf) = leaf {
            shared.cancellation.time_out(index, leaf);
        }
        Some((
            CallStatus::TimedOut,
            text(timed_out_message(tool, self.limit)),
            false,
        ))
    }
}

/// A tool future that knows when its answer came: the time of the wake-up that led to the poll
/// returning it (an answer sent from another thread wakes the call when it is sent), plus the
/// time that poll took (a tool that blocks the polling thread answers when it returns).
struct Answered<F> {
    future: F,
    woken: Arc<WakeStamp>,
    /// The waker given to `future`, and the task waker it wraps.
    waker: Option<(std::task::Waker, std::task::Waker)>,
    answered_at: Option<tokio::time::Instant>,
}

/// The last wake-up of a call's future.
#[derive(Default)]
struct WakeStamp {
    at: std::sync::Mutex<Option<tokio::time::Instant>>,
}

/// A task waker that stamps its wake-ups.
struct StampingWaker {
    task: std::task::Waker,
    stamp: Arc<WakeStamp>,
}

impl std::task::Wake for StampingWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        *self
            .stamp
            .at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(tokio::time::Instant::now());
        self.task.wake_by_ref();
    }
}

impl<F> Answered<F> {
    fn new(future: F) -> Self {
        Self {
            future,
            woken: Arc::default(),
            waker: None,
            answered_at: None,
        }
    }

    /// When the answer came (now, before it came).
    fn answered_at(&self) -> tokio::time::Instant {
        self.answered_at.unwrap_or_else(tokio::time::Instant::now)
    }
}

impl<F: std::future::Future + Unpin> std::future::Future for Answered<F> {
    type Output = F::Output;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<F::Output> {
        let this = &mut *self;
        let start = tokio::time::Instant::now();
        let woken = this
            .woken
            .at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let (waker, _) = match &mut this.waker {
            Some(pair) if pair.1.will_wake(cx.waker()) => pair,
            slot => {
                let stamping = Arc::new(StampingWaker {
                    task: cx.waker().clone(),
                    stamp: Arc::clone(&this.woken),
                });
                slot.insert((std::task::Waker::from(stamping), cx.waker().clone()))
            }
        };
        let mut inner = std::task::Context::from_waker(waker);
        let polled = std::pin::Pin::new(&mut this.future).poll(&mut inner);
        if polled.is_ready() {
            let woken = woken.map_or(start, |at| at.min(start));
            this.answered_at = Some(woken + start.elapsed());
        }
        polled
    }
}

/// The outcome of a call cancelled before its answer came: the cancellation's message.
pub(crate) fn cancelled_outcome(name: &str, shared: &TurnShared) -> Outcome {
    let message = cancelled_message(name, shared.cancellation.cause());
    (CallStatus::Cancelled, text(message), false)
}

/// The path with hooks: before-call, permission, the tool, after-call.
pub(crate) async fn execute_hooked(
    env: &CallEnv,
    hooks: &dyn ToolHooks,
    mut input: Value,
    tool_use_id: String,
) -> Outcome {
    let name = env.tool.name();
    let group = env.shared.cancellation.call_token(false);
    let cancelled = || {
        let message = cancelled_message(name, env.shared.cancellation.cause());
        (CallStatus::Cancelled, text(message), false)
    };
    let call = HookCall {
        tool_use_id: &tool_use_id,
        tool_name: name,
        input: &input,
    };
    let decision = tokio::select! {
        decision = AssertUnwindSafe(hooks.before_call(call)).catch_unwind() => decision,
        () = group.cancelled() => return cancelled(),
    };
    match decision {
        Err(panic) => return hook_panicked(name, "before-call", &panic),
        Ok(BeforeCall::Continue) => {}
        Ok(BeforeCall::RewriteInput(rewritten)) => {
            if let Err(violations) = env.tool.schema.validate(&rewritten) {
                let message = invalid_input_message(name, &violations);
                return (CallStatus::Rejected, text(message), false);
            }
            input = rewritten;
        }
        Ok(BeforeCall::Deny(reason)) => {
            let message = format!("Tool '{name}' was blocked by a hook: {reason}");
            return (CallStatus::Denied, text(message), false);
        }
    }
    let call = HookCall {
        tool_use_id: &tool_use_id,
        tool_name: name,
        input: &input,
    };
    let permission = tokio::select! {
        permission = AssertUnwindSafe(hooks.permission(call)).catch_unwind() => permission,
        () = group.cancelled() => return cancelled(),
    };
    match permission {
        Err(panic) => return hook_panicked(name, "permission", &panic),
        Ok(Permission::Allow) => {}
        Ok(Permission::Deny(reason)) => {
            let message = format!("Permission to use tool '{name}' was denied: {reason}");
            return (CallStatus::Denied, text(message), false);
        }
    }
    if group.is_cancelled() {
        return cancelled();
    }
    let hook_input = input.clone();
    let output = match run_tool(env, input, tool_use_id.clone()).await {
        Err(outcome) => return outcome,
        Ok(Err(ToolError::Fatal(message))) => return (CallStatus::Fatal, text(message), false),
        Ok(Err(ToolError::Failed(message))) => ToolOutput::error(message),
        Ok(Ok(output)) => output,
    };
    let call = HookCall {
        tool_use_id: &tool_use_id,
        tool_name: name,
        input: &hook_input,
    };
    // Raced against the cancellation like the other hooks: a hook that never answers must not
    // hold a cancelled turn forever. The hook comes first, so one that answers at once keeps
    // the output of a tool that finished before the cancellation.
    let after = tokio::select! {
        biased;
        after = AssertUnwindSafe(hooks.after_call(call, &output)).catch_unwind() => after,
        () = group.cancelled() => return cancelled(),
    };
    let output = match after {
        Ok(AfterCall::Keep) => output,
        Ok(AfterCall::Replace(replaced)) => replaced,
        Err(panic) => return hook_panicked(name, "after-call", &panic),
    };
    answer_outcome(Ok(output))
}

/// Moves a future that outlived its grace onto the runtime, so it can finish its cleanup
/// without holding the turn; counted until it ends.
fn detach<F>(env: &CallEnv, future: F)
where
    F: std::future::Future + Send + 'static,
{
    tracing::warn!(
        tool = env.tool.name(),
        index = env.index,
        "tool ignored cancellation past its cleanup grace; detached"
    );
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let exec = env.shared.exec.clone();
    exec.counters.detached_started();
    runtime.spawn(async move {
        let _ = future.await;
        exec.counters.detached_ended();
    });
}

fn text(message: String) -> ToolResultContent {
    ToolResultContent::Text(message)
}

/// The text a panic was raised with (a `panic!` with a literal carries a `&str`, one with
/// arguments a `String`; `"panic"` when it carries neither). Every binding reports caught panics
/// with it.
pub fn panic_message(panic: &(dyn Any + Send)) -> &str {
    if let Some(message) = panic.downcast_ref::<&str>() {
        message
    } else if let Some(message) = panic.downcast_ref::<String>() {
        message
    } else {
        "panic"
    }
}

pub(crate) fn panicked(name: &str, panic: &Box<dyn Any + Send>) -> Outcome {
    let message = format!(
        "Tool '{name}' failed with an internal error: {}",
        panic_message(panic.as_ref())
    );
    (CallStatus::Panicked, text(message), false)
}

fn hook_panicked(name: &str, hook: &str, panic: &Box<dyn Any + Send>) -> Outcome {
    let message = format!(
        "Tool '{name}' was not run: its {hook} hook failed with an internal error: {}",
        panic_message(panic.as_ref())
    );
    (CallStatus::Panicked, text(message), false)
}

/// `30s`, `250ms`, `1.5s`; a fraction of a millisecond as `0.5ms` (to the microsecond; what rounds
/// to 0 at that precision in nanoseconds, `250ns`).
pub(crate) fn human_duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis.is_multiple_of(1000) && millis > 0 {
        format!("{}s", millis / 1000)
    } else if millis < 1000 {
        if duration.subsec_nanos().is_multiple_of(1_000_000) {
            return format!("{millis}ms");
        }
        // A fraction of a millisecond (Python's seconds and Node's milliseconds are floats):
        // rounded down to whole ones, 0.5 ms read "timed out after 0ms".
        let millis = format!("{:.3}", duration.as_secs_f64() * 1000.0);
        let millis = millis.trim_end_matches('0').trim_end_matches('.');
        if millis == "0" {
            format!("{}ns", duration.as_nanos())
        } else {
            format!("{millis}ms")
        }
    } else {
        let seconds = format!("{:.3}", duration.as_secs_f64());
        format!("{}s", seconds.trim_end_matches('0').trim_end_matches('.'))
    }
}

/// The message of a call that timed out after `limit`.
fn timed_out_message(tool: &str, limit: Duration) -> String {
    format!("Tool '{tool}' timed out after {}", human_duration(limit))
}

/// The message of a call that was running when its turn was cancelled or a sibling failed.
pub(crate) fn cancelled_message(tool: &str, cause: Option<Cause<'_>>) -> String {
    match cause {
        Some(Cause::Turn(StopReason::Cancelled)) | None => {
            format!("Tool '{tool}' was cancelled: the turn was cancelled")
        }
        Some(Cause::Turn(StopReason::Discarded)) => {
            format!("Tool '{tool}' was cancelled: the response was discarded and will be retried")
        }
        Some(Cause::Turn(StopReason::Fatal { tool: failed, .. })) => format!(
            "Tool '{tool}' was cancelled: the turn ended after a fatal error in tool '{failed}'"
        ),
        Some(Cause::Sibling(failure)) => format!(
            "Tool '{tool}' was cancelled: a parallel call to '{}' ({}) failed",
            failure.tool, failure.tool_use_id
        ),
    }
}

/// The message of a call that never started because of `cause`.
pub(crate) fn not_run_message(tool: &str, cause: Cause<'_>) -> String {
    match cause {
        Cause::Turn(StopReason::Cancelled) => {
            format!("Tool '{tool}' was not run: the turn was cancelled")
        }
        Cause::Turn(StopReason::Discarded) => {
            format!("Tool '{tool}' was not run: the response was discarded and will be retried")
        }
        Cause::Turn(StopReason::Fatal { tool: failed, .. }) => format!(
            "Tool '{tool}' was not run: the turn ended after a fatal error in tool '{failed}'"
        ),
        Cause::Sibling(failure) => format!(
            "Tool '{tool}' was not run: an earlier call to '{}' ({}) failed",
            failure.tool, failure.tool_use_id
        ),
    }
}

/// The message of an input that fails its schema.
pub(crate) fn invalid_input_message(tool: &str, violations: &[super::schema::Violation]) -> String {
    let details: Vec<String> = violations.iter().map(ToString::to_string).collect();
    format!("Invalid input for tool '{tool}': {}", details.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human_duration(Duration::from_secs(30)), "30s");
        assert_eq!(human_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(human_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(human_duration(Duration::ZERO), "0ms");
        assert_eq!(human_duration(Duration::from_micros(1500)), "1.5ms");
        assert_eq!(human_duration(Duration::from_micros(100)), "0.1ms");
        assert_eq!(human_duration(Duration::from_nanos(250)), "250ns");
        assert_eq!(human_duration(Duration::from_nanos(999_999_999)), "1000ms");
    }
}
