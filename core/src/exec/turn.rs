//! A turn: the calls of one model response, submitted as they are sealed, started as soon as
//! admission allows, answered in submission order.
//!
//! The turn is driven by polling it ([`Turn::next_event`], [`Turn::finish`], or the task of
//! [`Turn::spawn`]): calls run as futures polled by the turn (or as tasks of their own with
//! [`ExecutorConfig::spawn_calls`](super::ExecutorConfig::spawn_calls)), so a turn costs no
//! task, channel or lock per call in batch mode.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt as _};
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::WaitForCancellationFutureOwned;

use super::admission::{AdmissionQueue, Concurrency};
use super::budget::content_bytes;
use super::call::{
    CallOutcome, answer_outcome, cancelled_message, invalid_input_message, not_run_message,
};
use super::cancel::{SiblingFailure, StopReason};
use super::context::{HostData, TurnShared};
use super::events::{CallStatus, TurnEvent};
use super::executor::{ExecutorInner, TurnError};
use super::external::{ExternalCalls, Running};
use super::metrics::Counter;
use super::task::CallTask;
use super::tool::decide_concurrency_safe;
use super::tool::{RegisteredTool, ResultLimit, ToolOutput};
use super::types::{ToolResult, ToolResultContent, ToolUse};

/// The turn no longer accepts calls (it was sealed, discarded or has finished).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("the turn is closed: it no longer accepts tool calls")]
pub struct TurnClosed(pub ToolUse);

/// The turn needs the text of an answer offered by length alone
/// ([`Turn::complete_external_held`]): answer with [`Turn::complete_external`] instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the turn needs the text of this answer")]
pub struct TextNeeded;

/// A running call: polled in place, or awaited from a task of its own.
enum CallFuture {
    Inline(CallTask),
    Spawned(Pin<Box<dyn Future<Output = CallOutcome> + Send>>),
}

impl Future for CallFuture {
    type Output = CallOutcome;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<CallOutcome> {
        match self.get_mut() {
            Self::Inline(task) => Pin::new(task).poll(cx),
            Self::Spawned(task) => task.as_mut().poll(cx),
        }
    }
}

/// A call waiting for admission.
struct Queued {
    index: usize,
    tool: Arc<RegisteredTool>,
    input: Value,
    queued_at: Option<Instant>,
}

/// One submitted call: its id until it is answered, then its result (which owns the id).
enum Slot {
    Pending(String),
    Answered(ToolResult),
}

impl Slot {
    fn tool_use_id(&self) -> &str {
        match self {
            Self::Pending(id) => id,
            Self::Answered(result) => &result.tool_use_id,
        }
    }
}

/// A fatal error recorded for the turn.
struct Fatal {
    tool: String,
    tool_use_id: String,
    message: String,
}

/// A clonable, thread-safe handle to submit, seal, cancel or discard a turn from anywhere.
#[derive(Debug, Clone)]
pub struct TurnHandle {
    shared: Arc<TurnShared>,
}

impl TurnHandle {
    /// Submits a call; it starts as soon as the turn is polled and admission allows.
    pub fn submit(&self, tool_use: ToolUse) -> Result<(), TurnClosed> {
        {
            let mut inbox = self.shared.lock();
            if inbox.sealed {
                return Err(TurnClosed(tool_use));
            }
            inbox.submissions.push(tool_use);
        }
        self.shared.waker.wake();
        Ok(())
    }

    /// Submits a call whose concurrency safety the caller has already decided (an agent's loop
    /// decides it to start safe calls while the message streams): admission uses `safe` instead
    /// of asking the tool again, so a per-input predicate (a host callback) runs once per call.
    pub fn submit_decided(&self, tool_use: ToolUse, safe: bool) -> Result<(), TurnClosed> {
        {
            let mut inbox = self.shared.lock();
            if inbox.sealed {
                return Err(TurnClosed(tool_use));
            }
            let position = inbox.submissions.len();
            inbox.decided.push((position, safe));
            inbox.submissions.push(tool_use);
        }
        self.shared.waker.wake();
        Ok(())
    }

    /// Submits several calls at once (one lock and one wake for all of them); in order, after
    /// the calls submitted before. When the turn is closed, none is submitted and the error
    /// carries the first.
    pub fn submit_all(
        &self,
        tool_uses: impl IntoIterator<Item = ToolUse>,
    ) -> Result<(), TurnClosed> {
        let mut tool_uses = tool_uses.into_iter();
        {
            let mut inbox = self.shared.lock();
            if inbox.sealed {
                return match tool_uses.next() {
                    Some(first) => Err(TurnClosed(first)),
                    None => Ok(()),
                };
            }
            inbox.submissions.extend(tool_uses);
        }
        self.shared.waker.wake();
        Ok(())
    }

    /// Submits a batch held in a vector, as [`submit_all`](Self::submit_all) does; when nothing
    /// is waiting in the turn's inbox the vector becomes the inbox (no copy of the calls).
    pub fn submit_vec(&self, tool_uses: Vec<ToolUse>) -> Result<(), TurnClosed> {
        self.submit_vec_decided(tool_uses, Vec::new())
    }

    /// [`submit_vec`](Self::submit_vec) with the concurrency decisions the caller already took
    /// for some of the calls, as `(position in tool_uses, safe)` in ascending order: those are
    /// admitted as [`submit_decided`](Self::submit_decided) admits its call.
    pub fn submit_vec_decided(
        &self,
        tool_uses: Vec<ToolUse>,
        decided: Vec<(usize, bool)>,
    ) -> Result<(), TurnClosed> {
        self.submit_vec_checked(tool_uses, decided, Vec::new())
    }

    /// [`submit_vec_decided`](Self::submit_vec_decided) with the calls the submitter refused
    /// itself, as `(position in tool_uses, reason)` in ascending order: a host binding that
    /// could not hand a call's input over (a JavaScript value JSON cannot carry). Each such
    /// call keeps its place and gets its one result at once, never run: `Invalid input for tool
    /// '<name>': <reason>` with status `rejected`, or, for a tool the registry does not know,
    /// the usual unknown-tool result.
    pub fn submit_vec_checked(
        &self,
        tool_uses: Vec<ToolUse>,
        decided: Vec<(usize, bool)>,
        refused: Vec<(usize, String)>,
    ) -> Result<(), TurnClosed> {
        {
            let mut inbox = self.shared.lock();
            if inbox.sealed {
                return match tool_uses.into_iter().next() {
                    Some(first) => Err(TurnClosed(first)),
                    None => Ok(()),
                };
            }
            let base = inbox.submissions.len();
            inbox
                .decided
                .extend(decided.into_iter().map(|(at, safe)| (base + at, safe)));
            inbox
                .refused
                .extend(refused.into_iter().map(|(at, reason)| (base + at, reason)));
            if inbox.submissions.is_empty() {
                inbox.submissions = tool_uses;
            } else {
                inbox.submissions.extend(tool_uses);
            }
        }
        self.shared.waker.wake();
        Ok(())
    }

    /// No more calls will be submitted: the turn ends when its calls are answered.
    pub fn seal(&self) {
        self.shared.lock().sealed = true;
        self.shared.waker.wake();
    }

    /// Cancels the turn: running calls are cancelled, queued and later calls never start, and
    /// each gets a synthetic error result. The turn still needs [`seal`](Self::seal) to end.
    pub fn cancel(&self) {
        self.shared.cancellation.stop(StopReason::Cancelled);
        self.shared.waker.wake();
    }

    /// The turn's cancellation token (a child of the executor's run token): cancelled when the
    /// turn's calls must stop (cancel, discard, a fatal error, a sibling-cancelling failure, or
    /// the run token). Cancelling it directly cancels the turn like [`cancel`](Self::cancel).
    pub fn cancellation_token(&self) -> &super::CancellationToken {
        self.shared.cancellation.turn_token()
    }

    /// Discards the turn (the model response will be replayed): like [`cancel`](Self::cancel),
    /// and the turn is sealed, so nothing of it runs twice.
    pub fn discard(&self) {
        self.shared.cancellation.stop(StopReason::Discarded);
        self.seal();
    }
}

/// A streaming turn: the calls of one model response, [submitted](Self::submit) as the stream
/// seals them and [sealed](Self::seal) when it ends, started as soon as admission allows and
/// answered in submission order.
///
/// Calls only make progress while the turn is polled: drive it with [`next_event`](Self::next_event)
/// (for example in a `select!` beside the model stream), with [`finish`](Self::finish), or hand
/// it to a task of its own with [`spawn`](Self::spawn). Every submitted call gets exactly one
/// `Finished` event and one `Result` event (in submission order). Dropping an unfinished turn
/// cancels it and drops its running tool futures.
///
/// Requires a tokio runtime with the time driver enabled (timeouts and cleanup grace).
pub struct Turn {
    exec: Arc<ExecutorInner>,
    shared: Arc<TurnShared>,
    handle: TurnHandle,
    slots: Vec<Slot>,
    next_result: usize,
    unanswered: usize,
    admission: AdmissionQueue<Queued>,
    running: FuturesUnordered<CallFuture>,
    /// How many of `running` wait on their host alone (see [`answered_by_host`](Self::answered_by_host)).
    running_on_host: usize,
    events: VecDeque<TurnEvent>,
    events_enabled: bool,
    sealed: bool,
    done: bool,
    /// Whether the turn token was cancelled, as of the last check (refreshed once
    /// per step, and set at once when a call of this turn stops it).
    stopped: bool,
    /// Whether the running calls were polled again after the turn stopped (see
    /// [`alert_running`](Self::alert_running)).
    alerted: bool,
    /// The turn's one cancellation waiter, for all its waiting calls (created when a step first
    /// ends with calls running).
    watch: Option<Pin<Box<WaitForCancellationFutureOwned>>>,
    fatal: Option<Fatal>,
    /// The last tool looked up: turns often call one tool many times.
    last_tool: Option<Arc<RegisteredTool>>,
    /// Calls the host runs itself, when it allowed them (see
    /// [`enable_external_calls`](Self::enable_external_calls)).
    external: Option<ExternalCalls>,
    /// [`begin_finish`](Self::begin_finish) was called.
    finishing: bool,
}

impl std::fmt::Debug for Turn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Turn")
            .field("submitted", &self.slots.len())
            .field("unanswered", &self.unanswered)
            .field("running", &self.admission.running())
            .field("queued", &self.admission.queued())
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl Turn {
    pub(crate) fn new(
        exec: Arc<ExecutorInner>,
        events_enabled: bool,
        host: Option<HostData>,
    ) -> Self {
        let shared = Arc::new(TurnShared::new(exec.clone(), events_enabled, host));
        Self {
            admission: AdmissionQueue::new(exec.config.max_concurrency),
            handle: TurnHandle {
                shared: shared.clone(),
            },
            shared,
            exec,
            slots: Vec::new(),
            next_result: 0,
            unanswered: 0,
            running: FuturesUnordered::new(),
            running_on_host: 0,
            events: VecDeque::new(),
            events_enabled,
            sealed: false,
            done: false,
            stopped: false,
            alerted: false,
            watch: None,
            fatal: None,
            last_tool: None,
            external: None,
            finishing: false,
        }
    }

    /// Lets this turn hand the calls of externally completed tools
    /// ([`Tool::is_externally_completed`](super::Tool::is_externally_completed)) to the host
    /// instead of calling them: the host polls the turn, starts the calls that
    /// [`take_external_work`](Self::take_external_work) lists after each poll, aborts the ones
    /// it lists as aborted, and answers each started call once with
    /// [`complete_external`](Self::complete_external). A call that needs a future (hooks, a
    /// timeout, a task of its own) is still made through [`Tool::call`](super::Tool::call).
    pub fn enable_external_calls(&mut self) {
        if self.external.is_none() {
            self.external = Some(ExternalCalls::new());
        }
    }

    /// Moves the external calls to start and to abort, as indexes in the turn, into `starts`
    /// and `aborts` (cleared first). An aborted call must still be answered; its answer then
    /// becomes a cancellation result.
    pub fn take_external_work(&mut self, starts: &mut Vec<u32>, aborts: &mut Vec<u32>) {
        match &mut self.external {
            Some(external) => external.take_work(starts, aborts),
            None => {
                starts.clear();
                aborts.clear();
            }
        }
    }

    /// Answers the running external call `index` with what its tool produced. Returns false
    /// when no such call runs (never started, answered already, or answered as cancelled when
    /// its cleanup grace ran out). The turn makes progress at its next poll.
    pub fn complete_external(&mut self, index: usize, output: ToolOutput) -> bool {
        let Some(call) = self.external.as_mut().and_then(|ext| ext.take(index)) else {
            return false;
        };
        // Cancellation first, as for a call with a future: a tool that returns because it was
        // aborted is answered with the cancellation's message.
        let cancelled = call.aborting || self.shared.cancellation.observed();
        let (status, content, from_host) = if cancelled {
            let message = cancelled_message(call.tool.name(), self.shared.cancellation.cause());
            (
                CallStatus::Cancelled,
                ToolResultContent::Text(message),
                false,
            )
        } else {
            let (status, content, _) = answer_outcome(Ok(output));
            (status, content, true)
        };
        let unchanged = self.complete(external_outcome(index, call, status, content, false));
        if from_host
            && unchanged
            && let Some(external) = &mut self.external
        {
            external.keep(index);
        }
        true
    }

    /// Answers the running external call `index` with a plain text the host keeps, giving only
    /// an upper bound of its length in characters (its UTF-16 length will do): the result holds
    /// an empty placeholder, and [`external_content_kept`](Self::external_content_kept) tells the
    /// host to use its own text. Only when the turn would never read the text: the turn's events
    /// are off (a finishing turn), and the text is surely within its tool's result limit;
    /// otherwise nothing happens and the answer is [`TextNeeded`]. Returns, as
    /// [`complete_external`](Self::complete_external) does, whether a running call was
    /// answered.
    ///
    /// A host that answers so must drive the turn with [`poll_finish`](Self::poll_finish) and,
    /// after each poll, give the texts that [`take_external_text_requests`] lists (the turn's
    /// aggregate budget may need them at the end) with
    /// [`provide_external_text`](Self::provide_external_text), then poll again.
    ///
    /// [`take_external_text_requests`]: Self::take_external_text_requests
    pub fn complete_external_held(
        &mut self,
        index: usize,
        chars: usize,
        is_error: bool,
    ) -> Result<bool, TextNeeded> {
        let Some(external) = &self.external else {
            return Ok(false);
        };
        let Some(tool) = external.running_tool(index) else {
            return Ok(false);
        };
        if self.events_enabled {
            return Err(TextNeeded);
        }
        let limit = match tool.limit {
            ResultLimit::Default => Some(self.exec.config.budget.default_max_result_chars),
            ResultLimit::Chars(limit) => Some(limit),
            ResultLimit::Unlimited => None,
        };
        if let Some(limit) = limit {
            // The limit counts characters, after a check of the UTF-8 length (at most three
            // bytes per UTF-16 unit) past which a replacement recorded for the id applies.
            let within = chars <= limit
                && (chars.saturating_mul(3) <= limit
                    || !self
                        .exec
                        .record()
                        .is_replaced(self.slots[index].tool_use_id()));
            if !within {
                return Err(TextNeeded);
            }
        }
        let output = ToolOutput {
            content: ToolResultContent::Text(String::new()),
            is_error,
        };
        if !self.complete_external(index, output) {
            return Ok(false);
        }
        if let Some(external) = &mut self.external {
            external.hold(index, chars);
        }
        Ok(true)
    }

    /// Moves the held answers whose text the turn needs (see
    /// [`complete_external_held`](Self::complete_external_held)) into `requests` (cleared
    /// first), as indexes in the turn.
    pub fn take_external_text_requests(&mut self, requests: &mut Vec<u32>) {
        match &mut self.external {
            Some(external) => external.take_text_requests(requests),
            None => requests.clear(),
        }
    }

    /// Gives the text of the held answer `index` (the text the host kept). Returns false when
    /// `index` is not a held answer. Poll afterwards.
    pub fn provide_external_text(&mut self, index: usize, text: String) -> bool {
        let unheld = self
            .external
            .as_mut()
            .is_some_and(|external| external.unhold(index));
        if unheld && let Some(Slot::Answered(result)) = self.slots.get_mut(index) {
            result.content = ToolResultContent::Text(text);
        }
        unheld
    }

    /// Whether the turn must wait for held texts before its results: the aggregate budget could
    /// read them (see [`ResultBudget::turn_may_exceed`](super::budget::ResultBudget)). Asks the
    /// host for them the first time.
    fn awaits_held_texts(&mut self) -> bool {
        let Some(external) = &mut self.external else {
            return false;
        };
        let Some(held_chars) = external.held_chars() else {
            return false;
        };
        let Some(budget) = self.exec.config.budget.turn_budget_chars else {
            return false;
        };
        // An upper bound of what the budget's first check counts (UTF-8 bytes): a held text's
        // characters when no replacement is recorded (the check then only decides whether
        // characters are counted), else its bytes, at most three per character.
        let held = if self.exec.record().replaced_len() == 0 {
            held_chars
        } else {
            held_chars.saturating_mul(3)
        };
        let others: usize = self
            .slots
            .iter()
            .map(|slot| match slot {
                Slot::Answered(result) => content_bytes(&result.content),
                Slot::Pending(_) => 0,
            })
            .sum();
        if others.saturating_add(held) <= budget {
            return false;
        }
        external.request_held_texts()
    }

    /// A progress report of the running external call `index` (a `Progress` event; dropped
    /// when events are off or the call is not running).
    pub fn external_progress(&mut self, index: usize, data: Value) {
        let running = self
            .external
            .as_ref()
            .is_some_and(|ext| ext.is_running(index));
        if running {
            self.push_progress(vec![(index, data)]);
        }
    }

    /// Whether the result of call `index` is exactly the content its host gave to
    /// [`complete_external`](Self::complete_external) (not replaced by a limit, a budget or a
    /// cancellation): a host that kept the content need not read it back.
    pub fn external_content_kept(&self, index: usize) -> bool {
        self.external.as_ref().is_some_and(|ext| ext.kept(index))
    }

    /// Whether the turn now waits on its host alone: it is not done, every call running as a
    /// future of the turn is one of an externally completed tool with no timeout, hooks or task
    /// of its own (its future waits for the host's answer alone; none once the turn is stopped,
    /// when such calls race their cleanup grace), and no cleanup grace is counting down. Until
    /// the host answers, submits, seals or cancels, nothing of the turn's own will then wake it;
    /// a host that keeps its event loop alive for the turn's timers and tasks can let it go
    /// (JavaScript does not keep a process alive for a promise that never settles, nor need it
    /// for a turn waiting on one). Meaningful after a poll: it describes the state that poll left.
    pub fn waits_only_on_host(&self) -> bool {
        !self.done
            && self.running.len() == self.running_on_host
            && (self.running_on_host == 0 || !self.stopped)
            && self
                .external
                .as_ref()
                .is_none_or(|external| !external.grace_counting())
    }

    /// A handle to submit, seal, cancel or discard from other tasks or threads.
    pub fn handle(&self) -> TurnHandle {
        self.handle.clone()
    }

    /// Submits a call (see [`TurnHandle::submit`]).
    pub fn submit(&self, tool_use: ToolUse) -> Result<(), TurnClosed> {
        self.handle.submit(tool_use)
    }

    /// Submits a call whose concurrency safety is decided (see [`TurnHandle::submit_decided`]).
    pub fn submit_decided(&self, tool_use: ToolUse, safe: bool) -> Result<(), TurnClosed> {
        self.handle.submit_decided(tool_use, safe)
    }

    /// Seals the turn (see [`TurnHandle::seal`]).
    pub fn seal(&self) {
        self.handle.seal();
    }

    /// Cancels the turn (see [`TurnHandle::cancel`]).
    pub fn cancel(&self) {
        self.handle.cancel();
    }

    /// Discards the turn (see [`TurnHandle::discard`]).
    pub fn discard(&self) {
        self.handle.discard();
    }

    /// The next event; `None` once the turn is sealed and every result was delivered.
    pub async fn next_event(&mut self) -> Option<TurnEvent> {
        std::future::poll_fn(|cx| self.poll_next_event(cx)).await
    }

    /// Polls for the next event (drives the turn).
    pub fn poll_next_event(&mut self, cx: &mut Context<'_>) -> Poll<Option<TurnEvent>> {
        loop {
            if let Some(event) = self.events.pop_front() {
                return Poll::Ready(Some(event));
            }
            if self.done {
                return Poll::Ready(None);
            }
            if self.poll_step(cx).is_pending() && self.events.is_empty() {
                return Poll::Pending;
            }
        }
    }

    /// Seals the turn, drives it to the end without producing further events, and returns one
    /// result per call in submission order, with the turn's aggregate budget applied.
    pub async fn finish(mut self) -> Result<Vec<ToolResult>, TurnError> {
        self.begin_finish();
        std::future::poll_fn(|cx| self.poll_finish(cx)).await
    }

    /// The first half of [`finish`](Self::finish), for a host that polls the turn itself:
    /// seals the turn and stops its events.
    pub fn begin_finish(&mut self) {
        self.seal();
        self.finishing = true;
        self.events_enabled = false;
        self.shared.events_enabled.store(false, Ordering::Relaxed);
        self.events.clear();
    }

    /// The second half of [`finish`](Self::finish): drives the turn; ready with its results
    /// once (later polls answer with no results). Needs [`begin_finish`](Self::begin_finish).
    pub fn poll_finish(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Vec<ToolResult>, TurnError>> {
        if !self.finishing {
            self.begin_finish();
        }
        if self.poll_step(cx).is_pending() || self.awaits_held_texts() {
            return Poll::Pending;
        }
        Poll::Ready(self.take_results())
    }

    /// Drives the turn on a tokio task of its own, so calls start the moment they are submitted
    /// whatever the caller is doing (the form the language bindings use). Dropping the returned
    /// [`SpawnedTurn`] aborts the task, which cancels the turn.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime (as `tokio::spawn` does).
    pub fn spawn(mut self) -> SpawnedTurn {
        let (sender, events) = tokio::sync::mpsc::unbounded_channel();
        let handle = self.handle();
        let task = tokio::spawn(async move {
            while let Some(event) = self.next_event().await {
                let _ = sender.send(event);
            }
            self.finish().await
        });
        SpawnedTurn {
            handle,
            events,
            task: AbortOnDrop(task),
        }
    }

    /// Accepts a whole batch directly (no inbox, no lock) and seals the turn.
    /// Takes a whole batch and seals the turn. `refused` holds `(position, reason)` pairs in
    /// ascending order, as [`TurnHandle::submit_vec_checked`] takes them: those calls are
    /// answered in place, never run.
    pub(crate) fn accept_batch(&mut self, tool_uses: Vec<ToolUse>, refused: Vec<(usize, String)>) {
        self.stopped = self.shared.cancellation.observe();
        self.slots.reserve(tool_uses.len());
        self.admission.reserve(tool_uses.len());
        let mut refused = refused.into_iter().peekable();
        for (at, tool_use) in tool_uses.into_iter().enumerate() {
            let refusal = take_at(&mut refused, at);
            self.accept(tool_use, None, refusal);
        }
        self.sealed = true;
        self.shared.lock().sealed = true;
    }

    fn take_results(&mut self) -> Result<Vec<ToolResult>, TurnError> {
        let slots = std::mem::take(&mut self.slots);
        let mut results: Vec<ToolResult> = slots
            .into_iter()
            .map(|slot| match slot {
                Slot::Answered(result) => result,
                // Every slot is answered when the turn is done; this arm is unreachable.
                Slot::Pending(id) => ToolResult::error(id, "Tool call was not answered"),
            })
            .collect();
        // The turn's own results carry their per-result replacements already; only the
        // aggregate budget remains, and most turns are clearly under it.
        if self.exec.budget.turn_may_exceed(&results) {
            let spilled = self
                .exec
                .budget
                .enforce_turn(&mut self.exec.record(), &mut results);
            for _ in 0..spilled {
                self.exec.counters.bump(Counter::Spilled);
            }
            // Spilled or reapplied (a replacement recorded for the id): which contents changed
            // is not tracked, so none counts as kept.
            if let Some(external) = &mut self.external {
                external.forget_kept();
            }
        }
        match self.fatal.take() {
            None => Ok(results),
            Some(fatal) => Err(TurnError::Fatal {
                tool: fatal.tool,
                tool_use_id: fatal.tool_use_id,
                message: fatal.message,
                results,
            }),
        }
    }

    /// Makes all the progress possible now. Ready when the turn is done.
    fn poll_step(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.done {
            return Poll::Ready(());
        }
        self.shared.waker.register(cx.waker());
        self.stopped = self.shared.cancellation.observe();
        self.drain_inbox();
        loop {
            if self.stopped && !self.alerted {
                self.alert_running();
            }
            self.expire_external_grace(cx);
            self.flush_if_stopped();
            self.admit();
            match self.running.poll_next_unpin(cx) {
                Poll::Ready(Some(outcome)) => {
                    if self.answered_by_host(&outcome.tool) {
                        self.running_on_host -= 1;
                    }
                    self.complete(outcome);
                    // The call just polled may have cancelled the turn or the run (a tool that
                    // stops the run, or another thread meanwhile): look again before the next
                    // `admit`, or calls queued behind it would start after the cancellation.
                    // (A lock per completed call, and only until the turn is stopped.)
                    if !self.stopped {
                        self.stopped = self.shared.cancellation.observe();
                    }
                }
                Poll::Ready(None) | Poll::Pending => break,
            }
        }
        self.emit_ordered_results();
        if self.sealed && self.unanswered == 0 {
            self.done = true;
            self.stop_progress();
            return Poll::Ready(());
        }
        if !self.stopped && self.admission.running() > 0 && self.watch_cancellation(cx) {
            // Cancelled since this step observed the token: step again at once.
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }

    /// Drops the progress of a turn that has ended, and makes later sends no-ops: a sender kept
    /// past its call (a detached tool, a host thread) would otherwise fill an inbox that is
    /// never drained again.
    fn stop_progress(&self) {
        self.shared.events_enabled.store(false, Ordering::Relaxed);
        let progress = std::mem::take(&mut self.shared.lock().progress);
        drop(progress);
    }

    /// Registers the turn's one cancellation waiter (the calls waiting on this turn's task have
    /// none of their own). Returns whether the token is cancelled already.
    fn watch_cancellation(&mut self, cx: &mut Context<'_>) -> bool {
        let watch = self.watch.get_or_insert_with(|| {
            Box::pin(
                self.shared
                    .cancellation
                    .turn_token()
                    .clone()
                    .cancelled_owned(),
            )
        });
        watch.as_mut().poll(cx).is_ready()
    }

    /// Polls every running call again once the turn has stopped: a call waiting on this turn's
    /// task registered no cancellation waiter, and must see the cancellation now (it then races
    /// its cleanup grace). Happens at most once per turn.
    fn alert_running(&mut self) {
        self.alerted = true;
        if let Some(external) = &mut self.external {
            external.abort_all(self.exec.config.cleanup_grace);
        }
        if self.running.is_empty() {
            return;
        }
        // A pushed future is polled at the next `poll_next`.
        let running = std::mem::take(&mut self.running);
        for call in running {
            self.running.push(call);
        }
    }

    /// Answers the aborted external calls still running when their cleanup grace ran out.
    fn expire_external_grace(&mut self, cx: &mut Context<'_>) {
        let Some(external) = &mut self.external else {
            return;
        };
        for (index, call) in external.poll_grace_expired(cx) {
            tracing::warn!(
                tool = call.tool.name(),
                index,
                "tool ignored cancellation past its cleanup grace; detached"
            );
            let message = cancelled_message(call.tool.name(), self.shared.cancellation.cause());
            let content = ToolResultContent::Text(message);
            self.complete(external_outcome(
                index,
                call,
                CallStatus::Cancelled,
                content,
                true,
            ));
        }
    }

    /// Takes what handles and tools left in the shared inbox.
    fn drain_inbox(&mut self) {
        let (submissions, decided, refused, progress, sealed) = {
            let mut inbox = self.shared.lock();
            (
                std::mem::take(&mut inbox.submissions),
                std::mem::take(&mut inbox.decided),
                std::mem::take(&mut inbox.refused),
                std::mem::take(&mut inbox.progress),
                inbox.sealed,
            )
        };
        self.push_progress(progress);
        self.slots.reserve(submissions.len());
        self.admission.reserve(submissions.len());
        if let Some(external) = &mut self.external {
            external.reserve(self.slots.len() + submissions.len());
        }
        let mut decided = decided.into_iter().peekable();
        let mut refused = refused.into_iter().peekable();
        for (position, tool_use) in submissions.into_iter().enumerate() {
            let safe = take_at(&mut decided, position);
            let refusal = take_at(&mut refused, position);
            self.accept(tool_use, safe, refusal);
        }
        // Read under the same lock as the submissions: nothing submitted before the seal is missed.
        self.sealed |= sealed;
    }

    fn push_progress(&mut self, progress: Vec<(usize, Value)>) {
        if !self.events_enabled {
            return;
        }
        for (index, data) in progress {
            // Progress arriving after its call was answered (from a detached or leaked sender)
            // is dropped: a call's progress always comes before its `Finished`.
            if let Some(Slot::Pending(id)) = self.slots.get(index) {
                self.events.push_back(TurnEvent::Progress {
                    index,
                    tool_use_id: id.clone(),
                    data,
                });
            }
        }
    }

    /// Registers a call: answered at once if it cannot run, queued for admission otherwise.
    /// `decided`: its concurrency safety, when the submitter decided it; `refusal`: why the
    /// submitter refused it (see [`TurnHandle::submit_vec_checked`]).
    fn accept(&mut self, tool_use: ToolUse, decided: Option<bool>, refusal: Option<String>) {
        let ToolUse { id, name, input } = tool_use;
        let index = self.slots.len();
        self.slots.push(Slot::Pending(id));
        self.unanswered += 1;
        let cached = self.last_tool.as_ref().filter(|tool| tool.name() == name);
        let Some(tool) = cached.or_else(|| self.exec.registry.lookup(&name)).cloned() else {
            let message = format!("Unknown tool '{name}'");
            return self.answer_unstarted(index, &name, CallStatus::Rejected, message);
        };
        if cached.is_none() {
            self.last_tool = Some(tool.clone());
        }
        if let Some(reason) = refusal {
            let message = format!("Invalid input for tool '{}': {reason}", tool.name());
            return self.answer_unstarted(index, tool.name(), CallStatus::Rejected, message);
        }
        if let Err(violations) = tool.schema.validate(&input) {
            let message = invalid_input_message(tool.name(), &violations);
            return self.answer_unstarted(index, tool.name(), CallStatus::Rejected, message);
        }
        if self.stopped
            && let Some(cause) = self.shared.cancellation.cause()
        {
            let message = not_run_message(tool.name(), cause);
            return self.answer_unstarted(index, tool.name(), CallStatus::Skipped, message);
        }
        let safe = decided.unwrap_or_else(|| decide_concurrency_safe(tool.tool.as_ref(), &input));
        let concurrency = if safe {
            Concurrency::Safe
        } else {
            Concurrency::Exclusive
        };
        let queued_at = self.events_enabled.then(Instant::now);
        self.admission.push(
            Queued {
                index,
                tool,
                input,
                queued_at,
            },
            concurrency,
        );
    }

    /// When the turn token was cancelled, queued calls never start.
    fn flush_if_stopped(&mut self) {
        if !self.stopped || self.admission.queued() == 0 {
            return;
        }
        let shared = self.shared.clone();
        let Some(cause) = shared.cancellation.cause() else {
            return;
        };
        let queued: Vec<Queued> = self
            .admission
            .drain_queued()
            .map(|(call, _)| call)
            .collect();
        for call in queued {
            let message = not_run_message(call.tool.name(), cause);
            self.answer_unstarted(call.index, call.tool.name(), CallStatus::Skipped, message);
        }
    }

    /// Starts every call admission allows now.
    fn admit(&mut self) {
        while let Some((call, concurrency)) = self.admission.pop_admissible() {
            self.exec.counters.bump(Counter::Started);
            if self.runs_externally(&call.tool) {
                if self.events_enabled {
                    self.events.push_back(TurnEvent::Started {
                        index: call.index,
                        tool_use_id: self.slots[call.index].tool_use_id().to_owned(),
                        tool: call.tool.name().to_owned(),
                        queued: call.queued_at.map_or(Duration::ZERO, |at| at.elapsed()),
                    });
                }
                let started = self.events_enabled.then(Instant::now);
                if let Some(external) = &mut self.external {
                    external.start(
                        call.index,
                        Running {
                            tool: call.tool,
                            concurrency,
                            started,
                            aborting: false,
                        },
                    );
                }
                continue;
            }
            let tool_use_id = self.slots[call.index].tool_use_id().to_owned();
            if self.events_enabled {
                self.events.push_back(TurnEvent::Started {
                    index: call.index,
                    tool_use_id: tool_use_id.clone(),
                    tool: call.tool.name().to_owned(),
                    queued: call.queued_at.map_or(Duration::ZERO, |at| at.elapsed()),
                });
            }
            let span = tracing::debug_span!(
                "tool_call",
                tool = call.tool.name(),
                tool_use_id = %tool_use_id,
                index = call.index
            );
            let task = CallTask::new(
                call.index,
                tool_use_id,
                call.tool,
                call.input,
                concurrency,
                self.shared.clone(),
                self.events_enabled,
                !self.exec.config.spawn_calls,
                span,
            );
            if self.answered_by_host(task.tool()) {
                self.running_on_host += 1;
            }
            let future = if self.exec.config.spawn_calls {
                let tool = task.tool().clone();
                CallFuture::Spawned(Box::pin(spawned(task, call.index, tool, concurrency)))
            } else {
                CallFuture::Inline(task)
            };
            self.running.push(future);
        }
    }

    /// Whether a call of `tool` is handed to the host (see
    /// [`enable_external_calls`](Self::enable_external_calls)).
    fn runs_externally(&self, tool: &RegisteredTool) -> bool {
        self.external.is_some() && self.answered_by_host(tool)
    }

    /// Whether a call of `tool` waits for its host's answer alone: an externally completed
    /// tool without hooks, a task of its own or a timeout. The turn hands such calls to a host
    /// that allowed it; otherwise their futures (which the host wakes) run in `running`.
    fn answered_by_host(&self, tool: &RegisteredTool) -> bool {
        tool.tool.is_externally_completed()
            && self.exec.hooks.is_none()
            && !self.exec.config.spawn_calls
            && tool.timeout.or(self.exec.config.default_timeout).is_none()
    }

    /// Records a finished call. Returns whether its content was kept as it came (not replaced
    /// by the result limit).
    fn complete(&mut self, outcome: CallOutcome) -> bool {
        self.admission.finish(outcome.concurrency);
        let CallOutcome {
            index,
            tool,
            status,
            content,
            duration,
            detached,
            ..
        } = outcome;
        let is_error = status != CallStatus::Succeeded;
        self.exec.counters.bump(counter_for(status));
        if status == CallStatus::Fatal && self.fatal.is_none() {
            let message = match &content {
                ToolResultContent::Text(text) => text.clone(),
                ToolResultContent::Blocks(_) => String::new(),
            };
            self.fatal = Some(Fatal {
                tool: tool.name().to_owned(),
                tool_use_id: self.slots[index].tool_use_id().to_owned(),
                message,
            });
            self.shared.cancellation.stop(StopReason::Fatal {
                tool: tool.name().to_owned(),
                tool_use_id: self.slots[index].tool_use_id().to_owned(),
            });
            self.stopped = true;
        } else if status.is_tool_failure() && tool.cancels_siblings {
            self.shared.cancellation.cancel_siblings(SiblingFailure {
                tool: tool.name().to_owned(),
                tool_use_id: self.slots[index].tool_use_id().to_owned(),
            });
            self.stopped = true;
        }
        // A timeout or cancellation message is the executor's, short, and what the model must
        // read: a tool's small result limit would hide it behind a spill-file preview.
        let (content, unchanged) = match status {
            CallStatus::TimedOut | CallStatus::Cancelled => (content, true),
            _ => self.limit_result(index, &tool, content),
        };
        if self.events_enabled {
            // Progress sent before the tool finished is delivered before its `Finished`.
            let progress = std::mem::take(&mut self.shared.lock().progress);
            self.push_progress(progress);
            let tool_use_id = self.slots[index].tool_use_id();
            if detached {
                self.events.push_back(TurnEvent::Detached {
                    index,
                    tool_use_id: tool_use_id.to_owned(),
                    tool: tool.name().to_owned(),
                });
            }
            self.events.push_back(TurnEvent::Finished {
                index,
                tool_use_id: tool_use_id.to_owned(),
                tool: tool.name().to_owned(),
                status,
                duration,
            });
        }
        self.set_result(index, content, is_error);
        unchanged
    }

    /// Applies the tool's per-result limit (spilling when over it); says whether the content is
    /// unchanged.
    fn limit_result(
        &self,
        index: usize,
        tool: &RegisteredTool,
        content: ToolResultContent,
    ) -> (ToolResultContent, bool) {
        let limit = match tool.limit {
            ResultLimit::Default => Some(self.exec.config.budget.default_max_result_chars),
            ResultLimit::Chars(limit) => Some(limit),
            ResultLimit::Unlimited => None,
        };
        let over = match (&content, limit) {
            (_, None) => false,
            (ToolResultContent::Text(text), Some(limit)) => text.len() > limit,
            (ToolResultContent::Blocks(_), Some(_)) => true,
        };
        if !over {
            return (content, true);
        }
        let id = self.slots[index].tool_use_id();
        let (content, spilled) =
            self.exec
                .budget
                .limit_result(&mut self.exec.record(), id, content, limit);
        if spilled {
            self.exec.counters.bump(Counter::Spilled);
        }
        (content, false)
    }

    /// Answers a call that never started.
    fn answer_unstarted(&mut self, index: usize, tool: &str, status: CallStatus, message: String) {
        self.exec.counters.bump(counter_for(status));
        if self.events_enabled {
            self.events.push_back(TurnEvent::Finished {
                index,
                tool_use_id: self.slots[index].tool_use_id().to_owned(),
                tool: tool.to_owned(),
                status,
                duration: Duration::ZERO,
            });
        }
        self.set_result(index, ToolResultContent::Text(message), true);
    }

    fn set_result(&mut self, index: usize, content: ToolResultContent, is_error: bool) {
        let slot = &mut self.slots[index];
        // Each call is answered exactly once; a second answer would be a bug and is ignored.
        let Slot::Pending(id) = slot else {
            return;
        };
        let tool_use_id = std::mem::take(id);
        *slot = Slot::Answered(ToolResult {
            tool_use_id,
            content,
            is_error,
        });
        self.unanswered -= 1;
    }

    /// Emits `Result` events for the answered prefix of the turn.
    fn emit_ordered_results(&mut self) {
        while let Some(slot) = self.slots.get(self.next_result) {
            let Slot::Answered(result) = slot else {
                break;
            };
            if self.events_enabled {
                self.events.push_back(TurnEvent::Result {
                    index: self.next_result,
                    result: result.clone(),
                });
            }
            self.next_result += 1;
        }
    }
}

impl futures_core::Stream for Turn {
    type Item = TurnEvent;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<TurnEvent>> {
        self.get_mut().poll_next_event(cx)
    }
}

impl Drop for Turn {
    /// A turn dropped before its end (its future was cancelled) cancels its calls: their tool
    /// futures are dropped here, and anything holding the token sees the cancellation.
    fn drop(&mut self) {
        if !self.done {
            self.shared.cancellation.stop(StopReason::Cancelled);
            self.stop_progress();
        }
    }
}

/// The outcome of an external call.
fn external_outcome(
    index: usize,
    call: Running,
    status: CallStatus,
    content: ToolResultContent,
    detached: bool,
) -> CallOutcome {
    CallOutcome {
        index,
        tool: call.tool,
        concurrency: call.concurrency,
        status,
        content,
        duration: call.started.map_or(Duration::ZERO, |at| at.elapsed()),
        detached,
    }
}

fn counter_for(status: CallStatus) -> Counter {
    match status {
        CallStatus::Succeeded => Counter::Completed,
        CallStatus::Failed | CallStatus::Fatal | CallStatus::Denied => Counter::Failed,
        CallStatus::Panicked => Counter::Panicked,
        CallStatus::TimedOut => Counter::TimedOut,
        CallStatus::Cancelled | CallStatus::Skipped => Counter::Cancelled,
        CallStatus::Rejected => Counter::Rejected,
    }
}

/// Runs a call on a task of its own; the task is aborted if the turn drops the call.
async fn spawned<F>(
    future: F,
    index: usize,
    tool: Arc<RegisteredTool>,
    concurrency: Concurrency,
) -> CallOutcome
where
    F: Future<Output = CallOutcome> + Send + 'static,
{
    let mut task = AbortOnDrop(tokio::spawn(future));
    match task.await_outcome().await {
        Ok(outcome) => outcome,
        Err(error) => {
            // The call future catches tool panics itself: only a runtime shutting down gets here.
            tracing::error!(%error, index, "tool call task ended abnormally");
            let content = ToolResultContent::Text(format!(
                "Tool '{}' failed with an internal error: {error}",
                tool.name()
            ));
            CallOutcome {
                index,
                tool,
                concurrency,
                status: CallStatus::Panicked,
                content,
                duration: Duration::ZERO,
                detached: false,
            }
        }
    }
}

/// A task handle that aborts the task when dropped.
#[derive(Debug)]
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> AbortOnDrop<T> {
    async fn await_outcome(&mut self) -> Result<T, tokio::task::JoinError> {
        (&mut self.0).await
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A turn driven by a task of its own (see [`Turn::spawn`]).
#[derive(Debug)]
pub struct SpawnedTurn {
    handle: TurnHandle,
    events: tokio::sync::mpsc::UnboundedReceiver<TurnEvent>,
    task: AbortOnDrop<Result<Vec<ToolResult>, TurnError>>,
}

impl SpawnedTurn {
    /// The handle to submit, seal, cancel or discard.
    pub fn handle(&self) -> &TurnHandle {
        &self.handle
    }

    /// The next event; `None` once the turn delivered its last result.
    pub async fn next_event(&mut self) -> Option<TurnEvent> {
        self.events.recv().await
    }

    /// Seals the turn and waits for its results.
    pub async fn finish(mut self) -> Result<Vec<ToolResult>, TurnError> {
        self.handle.seal();
        self.events.close();
        match self.task.await_outcome().await {
            Ok(results) => results,
            Err(error) => Err(TurnError::Internal(error.to_string())),
        }
    }
}

/// What `sparse` (`(position, value)` pairs in ascending order of position, as a submission's
/// decisions and refusals come) holds for `position`, taken from it; `None` when it holds
/// nothing there.
fn take_at<T>(
    sparse: &mut std::iter::Peekable<impl Iterator<Item = (usize, T)>>,
    position: usize,
) -> Option<T> {
    sparse
        .next_if(|(at, _)| *at == position)
        .map(|(_, value)| value)
}
