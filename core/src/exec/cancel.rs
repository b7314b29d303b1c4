//! The cancellation tree: run → turn → sibling group → call.
//!
//! Each level is a [`CancellationToken`] that is a child of the level above, so cancelling the run
//! cancels every turn, cancelling a turn cancels every call of it, and a failing call with
//! `cancels_siblings_on_error` cancels the sibling group (the other calls of the turn) without
//! cancelling the turn itself. Every call also has its own leaf token, which a timeout cancels.
//!
//! Tokens say *that* something was cancelled; [`StopReason`] says *why*, so that the synthetic
//! result tells the model what happened. The first reason recorded wins.

use std::sync::OnceLock;

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

/// The tokens of one turn and the reasons they were cancelled.
#[derive(Debug)]
pub(crate) struct TurnCancellation {
    turn: CancellationToken,
    siblings: CancellationToken,
    turn_reason: OnceLock<StopReason>,
    sibling_reason: OnceLock<SiblingFailure>,
}

impl TurnCancellation {
    /// A turn whose token is a child of `run`.
    pub(crate) fn new(run: &CancellationToken) -> Self {
        let turn = run.child_token();
        let siblings = turn.child_token();
        Self {
            turn,
            siblings,
            turn_reason: OnceLock::new(),
            sibling_reason: OnceLock::new(),
        }
    }

    /// The turn token.
    pub(crate) fn turn_token(&self) -> &CancellationToken {
        &self.turn
    }

    /// The token of one call: a fresh leaf when the call can time out (a timeout cancels that
    /// call alone), otherwise the sibling group's token itself, which nothing below the group
    /// ever cancels (this saves a tree node, a lock and an allocation per call).
    pub(crate) fn call_token(&self, own_leaf: bool) -> CancellationToken {
        if own_leaf {
            self.siblings.child_token()
        } else {
            self.siblings.clone()
        }
    }

    /// Cancels the turn for `reason` (the first reason recorded is kept).
    pub(crate) fn stop(&self, reason: StopReason) {
        let _ = self.turn_reason.set(reason);
        self.turn.cancel();
    }

    /// Cancels the sibling group because `failure` happened (the first failure is kept).
    pub(crate) fn cancel_siblings(&self, failure: SiblingFailure) {
        let _ = self.sibling_reason.set(failure);
        self.siblings.cancel();
    }

    /// Why calls of this turn must not start or go on, if they must not.
    pub(crate) fn cause(&self) -> Option<Cause<'_>> {
        if self.turn.is_cancelled() {
            // A cancelled parent (the run) leaves no reason behind: that is a user cancellation.
            return Some(Cause::Turn(
                self.turn_reason.get().unwrap_or(&StopReason::Cancelled),
            ));
        }
        if self.siblings.is_cancelled() {
            if let Some(failure) = self.sibling_reason.get() {
                return Some(Cause::Sibling(failure));
            }
        }
        None
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
    fn sibling_cancel_reaches_calls_but_not_turn() {
        let run = CancellationToken::new();
        let turn = TurnCancellation::new(&run);
        let call = turn.call_token(true);
        turn.cancel_siblings(SiblingFailure {
            tool: "bash".into(),
            tool_use_id: "t1".into(),
        });
        assert!(call.is_cancelled());
        assert!(!turn.turn_token().is_cancelled());
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
