//! The cancellation tree: run → turn → call.
//!
//! Each level is a [`CancellationToken`] that is a child of the level above, so cancelling the run
//! cancels every turn and cancelling a turn cancels every call of it. A call that can time out
//! has its own leaf token, which its timeout cancels; other calls share the turn's token. A
//! failing call with `cancels_siblings_on_error` cancels the turn's token too (its running
//! siblings stop, later calls of the turn never start) without *stopping the turn*: the turn
//! records no stop reason, ends normally, and later turns are unaffected.
//!
//! Tokens say *that* something was cancelled; [`StopReason`] says *why*, so that the synthetic
//! result tells the model what happened. The first reason recorded wins.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

pub use tokio_util::sync::CancellationToken;

/// Why a turn stopped starting and running its calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// [`Turn::cancel`](super::Turn::cancel) or the run token: the user interrupted.
    Cancelled,
    /// [`Turn::discard`](super::Turn::discard): the model response will be replayed.
    Discarded,
    /// A tool returned a fatal error, which ends the turn.
    Fatal {
        /// The tool that failed.
        tool: String,
        /// The id of the failing call.
        tool_use_id: String,
    },
}

/// A failed call that cancelled its siblings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiblingFailure {
    /// The tool that failed.
    pub tool: String,
    /// The id of the failing call.
    pub tool_use_id: String,
}

/// The token of one turn and the reasons it was cancelled.
#[derive(Debug)]
pub(crate) struct TurnCancellation {
    turn: CancellationToken,
    turn_reason: OnceLock<StopReason>,
    sibling_reason: OnceLock<SiblingFailure>,
    /// Set once the turn token is known to be cancelled (reading the token takes its tree's
    /// lock; this flag is a lock-free read). Set by [`stop`](Self::stop) and
    /// [`cancel_siblings`](Self::cancel_siblings) right after cancelling the token, and by
    /// [`observe`](Self::observe) when the token was cancelled from elsewhere (the run token, or
    /// the token itself): when set, the token is cancelled.
    cancelled: AtomicBool,
    /// The order of answers and the cancellation, as the answer channels of hosts that deliver
    /// answers from outside their call's future reported it (see
    /// [`ToolContext::answer_channel`]).
    ///
    /// [`ToolContext::answer_channel`]: super::ToolContext::answer_channel
    order: AnswerOrders,
    /// The calls their own timeout cancelled (rare; see [`time_out`](Self::time_out)).
    timed_out: Mutex<Vec<usize>>,
    /// The calls that made a change that stands (see [`committed`](Self::committed)), which the
    /// timeout rules read: they read no answer order.
    changed: Mutex<Vec<usize>>,
}

/// The calls whose host reported when their answer was delivered relative to the
/// cancellation: most turns have none, and a call's poll reads one atomic flag to know.
#[derive(Debug, Default)]
struct AnswerOrders {
    /// Whether `calls` ever held an entry.
    any: AtomicBool,
    /// (call index, answered before the cancellation).
    calls: Mutex<Vec<(usize, bool)>>,
}

impl AnswerOrders {
    fn record(&self, index: usize, before: bool) {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((index, before));
        self.any.store(true, Ordering::Release);
    }

    /// Takes what was recorded for call `index`: `Some(true)` answered before the cancellation,
    /// `Some(false)` after it.
    #[inline]
    fn take(&self, index: usize) -> Option<bool> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        self.take_recorded(index)
    }

    #[cold]
    #[inline(never)]
    fn take_recorded(&self, index: usize) -> Option<bool> {
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        let at = calls.iter().position(|&(call, _)| call == index)?;
        Some(calls.swap_remove(at).1)
    }
}

impl TurnCancellation {
    /// A turn whose token is a child of `run`.
    pub(crate) fn new(run: &CancellationToken) -> Self {
        Self {
            turn: run.child_token(),
            turn_reason: OnceLock::new(),
            sibling_reason: OnceLock::new(),
            cancelled: AtomicBool::new(false),
            order: AnswerOrders::default(),
            timed_out: Mutex::new(Vec::new()),
            changed: Mutex::new(Vec::new()),
        }
    }

    /// Cancels call `index`'s own token `leaf` because its timeout ran out, recording why
    /// first: a token says only *that* it was cancelled, and a host tells its tool why (Node's
    /// `ctx.signal.reason` is a `TimeoutError` then, an `AbortError` for a cancellation). A
    /// clock read when the host saw the token cancelled guessed wrong whenever the call's
    /// future was made later than its deadline was fixed by more than the timer fired late.
    pub(crate) fn time_out(&self, index: usize, leaf: &CancellationToken) {
        self.timed_out
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(index);
        leaf.cancel();
    }

    /// Whether call `index` was cancelled by its own timeout (see [`time_out`](Self::time_out)).
    pub(crate) fn timed_out(&self, index: usize) -> bool {
        self.timed_out
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&index)
    }

    /// Records that the answer of call `index` was delivered after the call was cancelled
    /// (not by the tool while it was handed the call): the call's outcome is the cancellation.
    pub(crate) fn answered_late(&self, index: usize) {
        self.order.record(index, false);
    }

    /// Records that the answer of call `index` was delivered before the call was cancelled, or
    /// while the tool was handed the call: the answer stands even when the cancellation is
    /// observed before it is. Recorded only once the cancellation was observed (the only case
    /// where it matters: see [`answer_stands`](Self::answer_stands)).
    pub(crate) fn answered_in_time(&self, index: usize) {
        if self.observed() {
            self.order.record(index, true);
        }
    }

    /// Records that call `index` made a change that stands (a built-in `write` or `edit` put
    /// its file in place, having checked just before that it was not cancelled): its answer is
    /// its outcome even when a cancellation is observed before it, since the cancellation's
    /// message would tell the model that nothing happened. Recorded whether or not a
    /// cancellation was observed: one may be observed after this and before the answer is.
    /// Its own timeout does not take that answer either (see
    /// [`change_stands`](Self::change_stands)).
    #[cfg(feature = "tools")]
    pub(crate) fn committed(&self, index: usize) {
        self.changed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(index);
        self.order.record(index, true);
    }

    /// Whether call `index` made a change that stands (see [`committed`](Self::committed)):
    /// then its answer is its outcome even when it comes after the call's own timeout ran out,
    /// whose message would tell the model that nothing happened (a `write` that passed its gate
    /// just before its timer fired). Read on the timeout paths alone; takes the answer order the
    /// commit recorded, which the cancellation rule would otherwise read.
    pub(crate) fn change_stands(&self, index: usize) -> bool {
        let changed = self
            .changed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&index);
        if changed {
            let _ = self.order.take(index);
        }
        changed
    }

    /// Whether the answer call `index` just returned is its outcome, the cancellation being
    /// observed (`cancelled`) or not: not when its host reported it late; when cancelled, only
    /// when its host reported it in time (a tool that saw the cancellation and returned is
    /// answered with the cancellation's message). One atomic read when no host reported an
    /// order in this turn.
    #[inline]
    pub(crate) fn answer_stands(&self, index: usize, cancelled: bool) -> bool {
        match self.order.take(index) {
            Some(in_time) => in_time,
            None => !cancelled,
        }
    }

    /// The turn token.
    pub(crate) fn turn_token(&self) -> &CancellationToken {
        &self.turn
    }

    /// The token of one call: a fresh leaf when the call can time out (a timeout cancels that
    /// call alone), otherwise the turn's token itself, which is what would cancel the call
    /// anyway (this saves a tree node, a lock and an allocation per call).
    pub(crate) fn call_token(&self, own_leaf: bool) -> CancellationToken {
        if own_leaf {
            self.turn.child_token()
        } else {
            self.turn.clone()
        }
    }

    /// Stops the turn for `reason` (the first reason recorded is kept).
    pub(crate) fn stop(&self, reason: StopReason) {
        let _ = self.turn_reason.set(reason);
        self.turn.cancel();
        self.cancelled.store(true, Ordering::Release);
    }

    /// Stops the turn's calls because `failure` happened (the first failure is kept). The turn
    /// itself is not stopped: it has no stop reason and ends normally.
    pub(crate) fn cancel_siblings(&self, failure: SiblingFailure) {
        let _ = self.sibling_reason.set(failure);
        self.turn.cancel();
        self.cancelled.store(true, Ordering::Release);
    }

    /// Whether the turn token is cancelled, reading the token (a lock) only while the flag is
    /// not set yet, and setting the flag when it is.
    pub(crate) fn observe(&self) -> bool {
        if self.cancelled.load(Ordering::Acquire) {
            return true;
        }
        let cancelled = self.turn.is_cancelled();
        if cancelled {
            self.cancelled.store(true, Ordering::Release);
        }
        cancelled
    }

    /// Whether the cancellation was observed already (see [`observe`](Self::observe)): a
    /// lock-free read, for calls polled by a turn that observes its token at every step.
    pub(crate) fn observed(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }

    /// Why calls of this turn must not start or go on, if they must not.
    pub(crate) fn cause(&self) -> Option<Cause<'_>> {
        if !self.observe() {
            return None;
        }
        if let Some(reason) = self.turn_reason.get() {
            return Some(Cause::Turn(reason));
        }
        if let Some(failure) = self.sibling_reason.get() {
            return Some(Cause::Sibling(failure));
        }
        // A cancelled parent (the run) leaves no reason behind: that is a user cancellation.
        Some(Cause::Turn(&StopReason::Cancelled))
    }

    /// Whether the turn was stopped (cancel, discard, fatal error or run cancellation), as
    /// opposed to only having its calls cancelled by a sibling's failure.
    #[cfg(test)]
    pub(crate) fn is_stopped(&self) -> bool {
        matches!(self.cause(), Some(Cause::Turn(_)))
    }
}

/// Why a call stops: the turn's reason or a sibling's failure.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Cause<'a> {
    /// The turn was stopped.
    Turn(&'a StopReason),
    /// A sibling failed.
    Sibling(&'a SiblingFailure),
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn sibling_cancel_reaches_calls_but_does_not_stop_the_turn() {
        let run = CancellationToken::new();
        let turn = TurnCancellation::new(&run);
        let call = turn.call_token(true);
        let shared = turn.call_token(false);
        turn.cancel_siblings(SiblingFailure {
            tool: "bash".into(),
            tool_use_id: "t1".into(),
        });
        assert!(call.is_cancelled() && shared.is_cancelled());
        assert!(!turn.is_stopped());
        assert!(!run.is_cancelled());
        assert!(matches!(turn.cause(), Some(Cause::Sibling(f)) if f.tool == "bash"));
        // Calls created after the failure start cancelled.
        assert!(turn.call_token(true).is_cancelled());
        assert!(turn.call_token(false).is_cancelled());
    }

    #[test]
    fn run_cancel_reaches_calls_as_user_cancellation() {
        let run = CancellationToken::new();
        let turn = TurnCancellation::new(&run);
        let call = turn.call_token(true);
        run.cancel();
        assert!(call.is_cancelled());
        assert!(matches!(
            turn.cause(),
            Some(Cause::Turn(StopReason::Cancelled))
        ));
    }

    #[test]
    fn first_turn_reason_wins_and_turn_reason_beats_sibling() {
        let run = CancellationToken::new();
        let turn = TurnCancellation::new(&run);
        turn.cancel_siblings(SiblingFailure {
            tool: "bash".into(),
            tool_use_id: "t1".into(),
        });
        turn.stop(StopReason::Discarded);
        turn.stop(StopReason::Cancelled);
        assert!(matches!(
            turn.cause(),
            Some(Cause::Turn(StopReason::Discarded))
        ));
        assert!(!run.is_cancelled(), "a turn never cancels its run");
    }

    #[test]
    fn call_timeout_token_is_a_leaf() {
        let run = CancellationToken::new();
        let turn = TurnCancellation::new(&run);
        let a = turn.call_token(true);
        let b = turn.call_token(true);
        a.cancel();
        assert!(!b.is_cancelled());
        assert!(turn.cause().is_none());
    }
}
