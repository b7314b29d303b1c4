//! What a running tool sees: its call id, its cancellation token, a progress sender and the host
//! data of its run; and the state a turn shares between its driver, its handles and its running
//! calls.

use std::any::Any;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use futures_util::task::AtomicWaker;
use serde_json::Value;

use super::answer::{self, AnswerReceiver, AnswerSender, CallLink};
use super::cancel::{CancellationToken, TurnCancellation};
use super::executor::ExecutorInner;
use super::types::ToolUse;

/// Opaque data a host attaches to a run or a turn
/// ([`ToolExecutor::run_with_host_data`](super::ToolExecutor::run_with_host_data),
/// [`ToolExecutor::turn_with_host_data`](super::ToolExecutor::turn_with_host_data),
/// [`Agent::run_messages_with_host_data`](crate::agent::Agent::run_messages_with_host_data)),
/// which its tools find again in [`ToolContext::host_data`].
///
/// ferroloop never looks inside. A language binding uses it to find which run a call belongs
/// to: for example the caller's context (Python `contextvars`, a Node async context) captured
/// when the run started, so that the tool runs in it.
pub type HostData = Arc<dyn Any + Send + Sync>;

/// The context handed to [`Tool::call`](super::Tool::call).
#[derive(Debug, Clone)]
pub struct ToolContext {
    tool_use_id: String,
    index: usize,
    /// The call's own token (a call that can time out, a standalone context), or the turn's
    /// token, cloned when a tool first asks for it: most calls never do, and a clone takes the
    /// token tree's lock.
    cancel: OnceLock<CancellationToken>,
    /// Whether `cancel` holds the call's own token from the start.
    own_token: bool,
    progress: ProgressSender,
}

impl ToolContext {
    /// A context in a turn: `own_token` is the call's own token, if it has one (else the call
    /// is cancelled with its turn, and shares the turn's token).
    pub(crate) fn new(
        tool_use_id: String,
        index: usize,
        own_token: Option<CancellationToken>,
        shared: Arc<TurnShared>,
    ) -> Self {
        let cancel = OnceLock::new();
        let has_own = own_token.is_some();
        if let Some(token) = own_token {
            let _ = cancel.set(token);
        }
        Self {
            tool_use_id,
            index,
            cancel,
            own_token: has_own,
            progress: ProgressSender {
                shared: Some(shared),
                index,
            },
        }
    }

    /// A context outside any turn (for calling a tool directly, in tests or benchmarks):
    /// progress goes nowhere and the token is never cancelled unless you cancel it.
    pub fn standalone(tool_use_id: impl Into<String>, cancel: CancellationToken) -> Self {
        Self {
            tool_use_id: tool_use_id.into(),
            index: 0,
            cancel: OnceLock::from(cancel),
            own_token: true,
            progress: ProgressSender {
                shared: None,
                index: 0,
            },
        }
    }

    /// The id of the `tool_use` being answered.
    pub fn tool_use_id(&self) -> &str {
        &self.tool_use_id
    }

    /// The position of this call in its turn (submission order, from 0).
    pub fn index(&self) -> usize {
        self.index
    }

    /// The call's cancellation token: cancelled on timeout, turn cancellation, discard, a
    /// sibling's failure or run cancellation. Tools should stop promptly when it fires; the
    /// executor waits a bounded grace and then detaches the call.
    pub fn cancellation_token(&self) -> &CancellationToken {
        self.cancel.get_or_init(|| match &self.progress.shared {
            Some(shared) => shared.cancellation.turn_token().clone(),
            // A standalone context always has its own token; this is never reached.
            None => CancellationToken::new(),
        })
    }

    /// Whether the call has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        match (&self.progress.shared, self.own_token) {
            (Some(shared), false) => shared.cancellation.observe(),
            _ => self.cancellation_token().is_cancelled(),
        }
    }

    /// Whether the call was cancelled by its own timeout, rather than by its turn, its run or
    /// a sibling's failure (false while it is not cancelled, and outside a turn): what a host
    /// tells its tool as the reason of the cancellation.
    pub fn timed_out(&self) -> bool {
        self.own_token
            && self
                .progress
                .shared
                .as_ref()
                .is_some_and(|shared| shared.cancellation.timed_out(self.index))
    }

    /// Completes when the call is cancelled.
    pub async fn cancelled(&self) {
        self.cancellation_token().cancelled().await;
    }

    /// Tells the executor that the answer this call's future is about to return was delivered
    /// *after* the call was cancelled (and not while the tool was being handed the call): the
    /// call's outcome is then the cancellation, whenever the executor polls the future. Hosts
    /// use [`answer_channel`](Self::answer_channel), whose receiver reports the order itself
    /// (this was public in 0.1.0; kept for the executor's own tests). No effect outside a turn.
    #[cfg(test)]
    pub(crate) fn answered_after_cancellation(&self) {
        if let Some(shared) = &self.progress.shared {
            shared.cancellation.answered_late(self.index);
        }
    }

    /// The converse of [`answered_after_cancellation`](Self::answered_after_cancellation):
    /// the answer was delivered *before* the call was cancelled (or while the tool was handed
    /// the call), so it stands even when the executor observed the cancellation first. No
    /// effect outside a turn.
    #[cfg(test)]
    pub(crate) fn answered_before_cancellation(&self) {
        if let Some(shared) = &self.progress.shared {
            shared.cancellation.answered_in_time(self.index);
        }
    }

    /// Tells the executor that this call has made a change that stands (a built-in `write` or
    /// `edit` put its file in place after checking its token): its answer is its outcome even
    /// if the executor observes a cancellation before it. Unlike an answer a host delivers after
    /// the cancellation (which is the cancellation's), this answer reports what was done. No
    /// effect outside a turn.
    #[cfg(feature = "tools")]
    pub(crate) fn committed(&self) {
        if let Some(shared) = &self.progress.shared {
            shared.cancellation.committed(self.index);
        }
    }

    /// A channel for this call's answer when a host delivers it from outside the call's future
    /// (another thread, another language's event loop): the host keeps the
    /// [`AnswerSender`] and sends the answer from anywhere; the call's future awaits the
    /// [`AnswerReceiver`] and returns what it yields. The order of the answer and the call's
    /// cancellation then decides the call's outcome, not the moment the executor polls the
    /// future: an answer sent before the call was cancelled stands even when the executor
    /// observed the cancellation first; one sent after it (the tool saw its cancellation and
    /// answered anyway) is answered with the cancellation's message. The receiver reports the
    /// order to the executor as it yields the answer; nothing else is needed.
    ///
    /// Costs one allocation; reads the call's token once, when the answer is sent.
    pub fn answer_channel<T>(&self) -> (AnswerSender<T>, AnswerReceiver<T>) {
        answer::channel(self.call_link(), false)
    }

    /// As [`answer_channel`](Self::answer_channel), for a host that is first *handed* the call
    /// (a C tool callback, which may answer at once or hand the call to a worker): until
    /// [`AnswerReceiver::handed_over`], the tool is being handed the call, and a cancellation
    /// that lands meanwhile is the tool's own doing (a callback cancelling its own run), or
    /// counts as such: an answer sent during the hand-off, or after a cancellation that landed
    /// during it, stands. Only a cancellation that lands after the hand-off and before the
    /// answer makes the answer the cancellation's.
    pub fn answer_channel_in_hand_off<T>(&self) -> (AnswerSender<T>, AnswerReceiver<T>) {
        answer::channel(self.call_link(), true)
    }

    /// What an answer channel needs of this call: how to read its cancellation (its own token,
    /// or its turn's, read through the turn's lock-free flag first) and where to report.
    fn call_link(&self) -> CallLink {
        CallLink {
            own: if self.own_token {
                self.cancel.get().cloned()
            } else {
                None
            },
            shared: self.progress.shared.clone(),
            index: self.index,
        }
    }

    /// Reports progress; delivered to the turn's event stream immediately.
    pub fn progress(&self, data: Value) {
        self.progress.send(data);
    }

    /// A clonable, thread-safe progress sender (for host threads or spawned work).
    pub fn progress_sender(&self) -> ProgressSender {
        self.progress.clone()
    }

    /// The [`HostData`] attached to the run or turn this call belongs to (`None` when none was
    /// attached, and for a [`standalone`](Self::standalone) context). Downcast it with
    /// [`Arc::downcast`] or `<dyn Any>::downcast_ref`.
    pub fn host_data(&self) -> Option<&HostData> {
        self.progress.shared.as_ref()?.host.as_ref()
    }
}

/// Sends progress updates of one call to its turn's event stream.
#[derive(Debug, Clone)]
pub struct ProgressSender {
    /// `None` outside a turn.
    shared: Option<Arc<TurnShared>>,
    index: usize,
}

impl ProgressSender {
    /// Sends one progress update (dropped when nobody listens to the turn's events, and once
    /// the turn has ended).
    pub fn send(&self, data: Value) {
        let Some(shared) = &self.shared else {
            return;
        };
        if !shared.events_enabled.load(Ordering::Relaxed) {
            return;
        }
        shared.lock().progress.push((self.index, data));
        shared.waker.wake();
    }
}

/// The state a turn shares between its driver, its handles and its running calls.
#[derive(Debug)]
pub(crate) struct TurnShared {
    inbox: Mutex<Inbox>,
    /// Wakes the driver: a submission, a seal, a cancellation, a progress update.
    pub(crate) waker: AtomicWaker,
    /// Whether started/progress/finished/result events are produced (cleared when the turn
    /// ends, so that progress sent afterwards goes nowhere).
    pub(crate) events_enabled: AtomicBool,
    /// The turn's cancellation tree.
    pub(crate) cancellation: TurnCancellation,
    /// The executor the turn belongs to.
    pub(crate) exec: Arc<ExecutorInner>,
    /// What the host attached to the turn (see [`HostData`]).
    pub(crate) host: Option<HostData>,
}

/// What handles and tools hand to the driver.
#[derive(Debug, Default)]
pub(crate) struct Inbox {
    /// Calls submitted and not yet taken by the driver.
    pub(crate) submissions: Vec<ToolUse>,
    /// Concurrency decisions the submitter already took, in ascending order of their call's
    /// position in `submissions` (calls without one are asked at admission).
    pub(crate) decided: Vec<(usize, bool)>,
    /// Calls the submitter refused itself (an input it could not hand over), with why, in
    /// ascending order of their position in `submissions`: answered at once, never run.
    pub(crate) refused: Vec<(usize, String)>,
    /// Progress updates not yet turned into events: (call index, data).
    pub(crate) progress: Vec<(usize, Value)>,
    /// No more submissions will come.
    pub(crate) sealed: bool,
}

impl TurnShared {
    pub(crate) fn new(
        exec: Arc<ExecutorInner>,
        events_enabled: bool,
        host: Option<HostData>,
    ) -> Self {
        Self {
            inbox: Mutex::new(Inbox::default()),
            waker: AtomicWaker::new(),
            events_enabled: AtomicBool::new(events_enabled),
            cancellation: TurnCancellation::new(&exec.run_token),
            exec,
            host,
        }
    }

    /// Locks the inbox. A panic while holding it cannot leave it inconsistent (every critical
    /// section is a push or a swap), so poisoning is ignored.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inbox> {
        self.inbox.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn progress_is_queued_only_when_events_are_enabled() {
        let exec = crate::exec::ToolExecutor::new(crate::exec::ToolRegistry::new());
        let shared = Arc::new(TurnShared::new(exec.inner().clone(), true, None));
        let ctx = ToolContext::new("t".into(), 3, None, shared.clone());
        ctx.progress(json!(1));
        ctx.progress_sender().send(json!(2));
        assert_eq!(shared.lock().progress, vec![(3, json!(1)), (3, json!(2))]);
        shared.events_enabled.store(false, Ordering::Relaxed);
        ctx.progress(json!(3));
        assert_eq!(shared.lock().progress.len(), 2);
        assert_eq!((ctx.tool_use_id(), ctx.index()), ("t", 3));
    }

    /// A sender kept past its call (a detached tool, a host thread) must not grow the inbox of a
    /// turn that has ended: nothing will ever drain it.
    #[tokio::test]
    async fn progress_sent_after_the_turn_ended_is_not_kept() {
        use crate::exec::{FnTool, ToolOutput, ToolRegistry, ToolUse};
        let kept: Arc<Mutex<Option<ProgressSender>>> = Arc::default();
        let slot = kept.clone();
        let mut registry = ToolRegistry::new();
        registry
            .register(FnTool::new("t", move |_, ctx: ToolContext| {
                let slot = slot.clone();
                async move {
                    *slot.lock().unwrap() = Some(ctx.progress_sender());
                    Ok(ToolOutput::text("ok"))
                }
            }))
            .unwrap();
        let exec = crate::exec::ToolExecutor::new(registry);
        let mut turn = exec.turn();
        turn.submit(ToolUse::new("a", "t", json!({}))).unwrap();
        turn.seal();
        while turn.next_event().await.is_some() {}
        let sender = kept.lock().unwrap().take().unwrap();
        let shared = sender.shared.clone().unwrap();
        for i in 0..1000 {
            sender.send(json!(i));
        }
        assert!(shared.lock().progress.is_empty(), "ended turn");
        drop(turn);
        sender.send(json!("after the drop"));
        assert!(shared.lock().progress.is_empty(), "dropped turn");
    }

    #[test]
    fn a_call_without_its_own_token_follows_its_turn() {
        let exec = crate::exec::ToolExecutor::new(crate::exec::ToolRegistry::new());
        let shared = Arc::new(TurnShared::new(exec.inner().clone(), false, None));
        let ctx = ToolContext::new("t".into(), 0, None, shared.clone());
        let copy = ctx.clone();
        assert!(!ctx.is_cancelled() && !ctx.cancellation_token().is_cancelled());
        // Cancelled from the run token: seen before the turn observed it.
        exec.run_token().cancel();
        assert!(copy.is_cancelled() && copy.cancellation_token().is_cancelled());
        assert!(ctx.is_cancelled() && ctx.cancellation_token().is_cancelled());
        assert!(shared.cancellation.observed());
    }

    #[test]
    fn context_reports_its_cancellation() {
        let token = CancellationToken::new();
        let ctx = ToolContext::standalone("x", token.clone());
        assert!(!ctx.is_cancelled());
        token.cancel();
        assert!(ctx.is_cancelled());
        assert!(ctx.cancellation_token().is_cancelled());
    }
}
