//! An answer delivered from outside a call's future, judged by the order of its delivery and the
//! call's cancellation: [`ToolContext::answer_channel`] and
//! [`ToolContext::answer_channel_in_hand_off`].
//!
//! A host that runs its tools elsewhere (a C host's worker thread, a JavaScript promise, a
//! Python task or worker thread) delivers a call's answer at some moment, and the executor polls
//! the call's future at another, possibly after it observed the turn's cancellation. Which of the
//! two came first must decide the outcome, not the moment of the poll: an answer delivered before
//! the cancellation stands, one delivered after it (the tool saw its cancellation and answered
//! anyway) is the cancellation's. Only the host knows when it delivered, so the order is read
//! where the answer is delivered ([`AnswerSender::send`], on any thread), and the call's future
//! reports it to the executor as it returns the answer ([`AnswerReceiver`]). Every binding used to
//! write this by hand; it lives here once, and the bindings only plumb answers through it.
//!
//! Why a channel, and not a bare order recorder placed next to each binding's own transport:
//! every binding needed a one-shot transport anyway (a oneshot channel for C and Python, a waker
//! and a reply slot in a table for Node), and the order must be read in the same critical section
//! that stores the answer (C's hand-off ends on the executor's thread while the reply may come
//! from a worker at the same moment). One small state behind one allocation does both, and leaves
//! no way to store an answer without its order or to return it without reporting it. For Node,
//! whose per-call cost matters, the table keyed by call id stays (JavaScript names calls by id),
//! but its entry is the sender: the waker, the reply slot and the call's token it held move into
//! the channel, so a call costs one allocation more and one or two token clones (each a lock)
//! less (a call sharing its turn's token is read through the turn, not a clone). Like the
//! transports it replaces, it needs no task and no cancellation waiter per call.
//!
//! Reading a token takes its tree's lock, so the order costs exactly one read per answer (at
//! delivery), plus, in hand-off mode, one when the tool finishes being handed the call and has
//! not answered yet. A call sharing its turn's token reads the turn's lock-free flag first.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use super::cancel::CancellationToken;
use super::context::TurnShared;

/// Which call an answer channel belongs to: how to read its cancellation, and where to report
/// the order of its answer.
#[derive(Debug)]
pub(crate) struct CallLink {
    /// The call's own token (a call that can time out, a standalone context); `None`: the call
    /// shares its turn's token.
    pub(crate) own: Option<CancellationToken>,
    /// The call's turn (`None` outside a turn).
    pub(crate) shared: Option<Arc<TurnShared>>,
    /// The call's index in its turn.
    pub(crate) index: usize,
}

impl CallLink {
    /// Whether the call's token is cancelled: one read of it (a lock), or of the turn's flag
    /// when that already says so.
    fn is_cancelled(&self) -> bool {
        match (&self.own, &self.shared) {
            (Some(token), _) => token.is_cancelled(),
            (None, Some(shared)) => shared.cancellation.observe(),
            (None, None) => false,
        }
    }

    /// Tells the executor the order of the answer the call's future is about to return.
    fn report(&self, late: bool) {
        let Some(shared) = &self.shared else { return };
        if late {
            shared.cancellation.answered_late(self.index);
        } else {
            shared.cancellation.answered_in_time(self.index);
        }
    }
}

/// Where the call is, for the order of its answer and its cancellation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The tool is being handed the call: an answer now is its own, whatever the cancellation.
    HandOff,
    /// The tool was handed the call (or there is no hand-off) and had not been cancelled then:
    /// an answer is late iff the token is cancelled when it is delivered.
    HandedOver,
    /// The call was cancelled by the end of its hand-off (by the tool, or so it counts): a
    /// later answer stands.
    HandedOverCancelled,
    /// Answered; `late`: after a cancellation that landed once the tool was handed the call.
    Answered { late: bool },
    /// The receiver took the answer.
    Taken,
}

#[derive(Debug)]
struct State<T> {
    phase: Phase,
    answer: Option<T>,
    waker: Option<Waker>,
    /// The sender was dropped without answering.
    sender_gone: bool,
}

#[derive(Debug)]
struct Shared<T> {
    call: CallLink,
    state: Mutex<State<T>>,
    /// The receiver was dropped: nobody waits for the answer (read lock-free by
    /// [`AnswerSender::is_cancelled`], which hosts poll).
    receiver_gone: AtomicBool,
}

impl<T> Shared<T> {
    /// Locks the state. Every critical section is a few assignments that cannot panic halfway,
    /// so poisoning is ignored.
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A new channel for the call of `call`, starting in hand-off when `hand_off`.
pub(crate) fn channel<T>(call: CallLink, hand_off: bool) -> (AnswerSender<T>, AnswerReceiver<T>) {
    let shared = Arc::new(Shared {
        call,
        state: Mutex::new(State {
            phase: if hand_off {
                Phase::HandOff
            } else {
                Phase::HandedOver
            },
            answer: None,
            waker: None,
            sender_gone: false,
        }),
        receiver_gone: AtomicBool::new(false),
    });
    (
        AnswerSender {
            shared: Some(Arc::clone(&shared)),
        },
        AnswerReceiver { shared },
    )
}

/// The host's side of an answer channel ([`ToolContext::answer_channel`]): delivers the call's
/// answer once, from any thread, recording its order against the call's cancellation, and tells
/// the host whether the call is cancelled meanwhile.
///
/// Dropping it without answering makes the receiver yield [`Unanswered`].
///
/// [`ToolContext::answer_channel`]: super::ToolContext::answer_channel
pub struct AnswerSender<T> {
    /// `None` once the answer was sent.
    shared: Option<Arc<Shared<T>>>,
}

impl<T> fmt::Debug for AnswerSender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnswerSender")
            .field("sent", &self.shared.is_none())
            .finish_non_exhaustive()
    }
}

impl<T> AnswerSender<T> {
    /// Delivers the answer. Its order against the call's cancellation is recorded now: it is
    /// *late* (the call's outcome is then the cancellation, however soon the executor polls the
    /// call) when the call's token is cancelled at this moment — except in hand-off mode, where
    /// an answer given while the tool is handed the call, or after a cancellation that landed by
    /// the end of the hand-off, stands. An answer that is not late stands even when the executor
    /// observed the cancellation before it polls the call again.
    ///
    /// Returns the answer back when nobody waits for it any more (the receiver was dropped: the
    /// executor gave up on the call).
    pub fn send(mut self, answer: T) -> Result<(), T> {
        let Some(shared) = self.shared.take() else {
            // Unreachable: `send` consumes the sender, which holds its state until then.
            return Err(answer);
        };
        if shared.receiver_gone.load(Ordering::Acquire) {
            return Err(answer);
        }
        let waker = {
            let mut state = shared.lock();
            let late = match state.phase {
                Phase::HandedOver => shared.call.is_cancelled(),
                _ => false,
            };
            state.phase = Phase::Answered { late };
            state.answer = Some(answer);
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        Ok(())
    }

    /// Whether the call is cancelled: its token was cancelled (timeout, turn cancellation,
    /// discard, a sibling's failure, run cancellation), or the receiver was dropped (the
    /// executor stopped waiting for the answer). A host polls it during long work to stop early;
    /// it still sends an answer. Reads the token (a lock) unless the receiver is gone.
    pub fn is_cancelled(&self) -> bool {
        match &self.shared {
            Some(shared) => {
                shared.receiver_gone.load(Ordering::Acquire) || shared.call.is_cancelled()
            }
            None => true,
        }
    }
}

impl<T> Drop for AnswerSender<T> {
    fn drop(&mut self) {
        let Some(shared) = self.shared.take() else {
            return;
        };
        let waker = {
            let mut state = shared.lock();
            state.sender_gone = true;
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// The call's side of an answer channel ([`ToolContext::answer_channel`]): a future, owned by
/// the call's future, that yields the answer and reports its order against the call's
/// cancellation to the executor as it does (the call's future returns the answer in the same
/// poll). Yields [`Unanswered`] when the sender was dropped without answering, and when polled
/// again after yielding.
///
/// Dropping it (the executor gave up on the call) makes [`AnswerSender::is_cancelled`] say so,
/// and [`AnswerSender::send`] give the answer back.
///
/// [`ToolContext::answer_channel`]: super::ToolContext::answer_channel
pub struct AnswerReceiver<T> {
    shared: Arc<Shared<T>>,
}

impl<T> fmt::Debug for AnswerReceiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnswerReceiver")
            .field("phase", &self.shared.lock().phase)
            .finish_non_exhaustive()
    }
}

impl<T> AnswerReceiver<T> {
    /// Ends the hand-off of a channel made by
    /// [`ToolContext::answer_channel_in_hand_off`]: the tool was handed the call. A
    /// cancellation before now is the tool's own doing (or counts as such): an answer sent
    /// after it stands. A cancellation from now until the answer is sent makes the answer
    /// late. Reads the token (a lock) only when the call is not answered yet. No effect on a
    /// channel without hand-off, or when called again.
    ///
    /// [`ToolContext::answer_channel_in_hand_off`]: super::ToolContext::answer_channel_in_hand_off
    pub fn handed_over(&self) {
        let mut state = self.shared.lock();
        if state.phase == Phase::HandOff {
            state.phase = if self.shared.call.is_cancelled() {
                Phase::HandedOverCancelled
            } else {
                Phase::HandedOver
            };
        }
    }
}

impl<T> Future for AnswerReceiver<T> {
    type Output = Result<T, Unanswered>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let shared = &self.shared;
        let mut state = shared.lock();
        if let Some(answer) = state.answer.take() {
            let late = state.phase == Phase::Answered { late: true };
            state.phase = Phase::Taken;
            drop(state);
            shared.call.report(late);
            return Poll::Ready(Ok(answer));
        }
        if state.sender_gone || state.phase == Phase::Taken {
            return Poll::Ready(Err(Unanswered));
        }
        match &state.waker {
            Some(known) if known.will_wake(cx.waker()) => {}
            _ => state.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl<T> Drop for AnswerReceiver<T> {
    fn drop(&mut self) {
        self.shared.receiver_gone.store(true, Ordering::Release);
    }
}

/// What an [`AnswerReceiver`] yields when its sender was dropped without answering (or when it
/// is polled again after yielding the answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the call's answer sender was dropped without answering")]
pub struct Unanswered;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::exec::cancel::StopReason;
    use crate::exec::{ToolContext, ToolExecutor, ToolRegistry};

    fn turn() -> Arc<TurnShared> {
        let exec = ToolExecutor::new(ToolRegistry::new());
        Arc::new(TurnShared::new(exec.inner().clone(), false, None))
    }

    /// Polls `receiver` once, as the call's future does when the executor polls it.
    fn poll_once<T>(receiver: &mut AnswerReceiver<T>) -> Poll<Result<T, Unanswered>> {
        let waker = Waker::noop();
        Pin::new(receiver).poll(&mut Context::from_waker(waker))
    }

    /// Whether the answer the receiver yields (after the executor observed the turn's
    /// cancellation) is the call's outcome, as the executor judges it.
    fn stands(shared: &TurnShared, receiver: &mut AnswerReceiver<&'static str>) -> bool {
        assert!(shared.cancellation.observe(), "cancelled before the poll");
        assert_eq!(poll_once(receiver), Poll::Ready(Ok("done")));
        shared.cancellation.answer_stands(0, true)
    }

    #[test]
    fn an_answer_sent_before_the_cancellation_stands_even_when_the_cancellation_is_seen_first() {
        let shared = turn();
        let ctx = ToolContext::new("a".into(), 0, None, shared.clone());
        let (sender, mut receiver) = ctx.answer_channel();
        assert_eq!(poll_once(&mut receiver), Poll::Pending);
        sender.send("done").unwrap();
        shared.cancellation.stop(StopReason::Cancelled);
        assert!(stands(&shared, &mut receiver));
    }

    #[test]
    fn an_answer_sent_after_the_cancellation_is_the_cancellations() {
        let shared = turn();
        let ctx = ToolContext::new("a".into(), 0, None, shared.clone());
        let (sender, mut receiver) = ctx.answer_channel();
        shared.cancellation.stop(StopReason::Cancelled);
        assert!(sender.is_cancelled());
        sender.send("done").unwrap();
        assert!(!stands(&shared, &mut receiver));
        // Late even when the executor had not observed the cancellation when it polled.
        let shared = turn();
        let ctx = ToolContext::new("a".into(), 0, None, shared.clone());
        let (sender, mut receiver) = ctx.answer_channel();
        // Cancelled through the run token: the turn has not observed it.
        shared.exec.run_token.cancel();
        sender.send("done").unwrap();
        assert_eq!(poll_once(&mut receiver), Poll::Ready(Ok("done")));
        assert!(!shared.cancellation.answer_stands(0, false));
    }

    #[test]
    fn a_call_with_its_own_token_is_judged_by_it() {
        let shared = turn();
        let leaf = shared.cancellation.call_token(true);
        let ctx = ToolContext::new("a".into(), 0, Some(leaf.clone()), shared.clone());
        let (sender, mut receiver) = ctx.answer_channel();
        // A timeout cancels the call alone.
        leaf.cancel();
        assert!(sender.is_cancelled());
        sender.send("done").unwrap();
        assert_eq!(poll_once(&mut receiver), Poll::Ready(Ok("done")));
        assert!(!shared.cancellation.answer_stands(0, false));
    }

    /// The hand-off table (C's tool callback): whether the answer is late, for each order of
    /// the hand-off's end, the cancellation and the answer.
    #[test]
    fn an_answer_is_late_only_after_a_cancellation_that_followed_the_hand_off() {
        // (cancel during the hand-off, answer during the hand-off, cancel before the answer):
        // late?
        let cases = [
            // Answered during the hand-off: the tool's own, whatever the cancellation.
            (false, true, false, false),
            (true, true, true, false),
            (false, true, true, false),
            // Cancelled during the hand-off (by the tool, or so it counts), answered later.
            (true, false, true, false),
            // Handed over, then cancelled, then answered: the cancellation wins.
            (false, false, true, true),
            // Handed over, answered, then cancelled: the answer stands.
            (false, false, false, false),
        ];
        for (cancel_in_hand_off, answer_in_hand_off, cancel_first, late) in cases {
            let case = format!("{cancel_in_hand_off} {answer_in_hand_off} {cancel_first}");
            let shared = turn();
            let ctx = ToolContext::new("a".into(), 0, None, shared.clone());
            let (sender, mut receiver) = ctx.answer_channel_in_hand_off();
            let cancel = || shared.cancellation.stop(StopReason::Cancelled);
            if cancel_in_hand_off {
                cancel();
            }
            if answer_in_hand_off {
                if cancel_first {
                    cancel();
                }
                sender.send("done").unwrap();
                receiver.handed_over();
                if !cancel_first {
                    cancel();
                }
            } else {
                receiver.handed_over();
                if cancel_first {
                    cancel();
                }
                // From another thread, as a host's worker answers.
                std::thread::spawn(move || sender.send("done").unwrap())
                    .join()
                    .unwrap();
                cancel();
            }
            assert_eq!(stands(&shared, &mut receiver), !late, "{case}");
        }
    }

    #[test]
    fn without_a_hand_off_handed_over_changes_nothing() {
        let shared = turn();
        let ctx = ToolContext::new("a".into(), 0, None, shared.clone());
        let (sender, mut receiver) = ctx.answer_channel();
        shared.cancellation.stop(StopReason::Cancelled);
        receiver.handed_over();
        sender.send("done").unwrap();
        assert!(!stands(&shared, &mut receiver));
    }

    #[test]
    fn a_dropped_receiver_cancels_the_call_and_gives_the_answer_back() {
        let shared = turn();
        let ctx = ToolContext::new("a".into(), 0, None, shared.clone());
        let (sender, receiver) = ctx.answer_channel::<String>();
        assert!(!sender.is_cancelled());
        drop(receiver);
        assert!(sender.is_cancelled());
        assert_eq!(sender.send("done".into()), Err("done".to_owned()));
        assert!(!shared.cancellation.turn_token().is_cancelled());
    }

    #[test]
    fn a_dropped_sender_is_not_an_answer() {
        let shared = turn();
        let ctx = ToolContext::new("a".into(), 0, None, shared.clone());
        let (sender, mut receiver) = ctx.answer_channel::<u8>();
        assert_eq!(poll_once(&mut receiver), Poll::Pending);
        std::thread::spawn(move || drop(sender)).join().unwrap();
        assert_eq!(poll_once(&mut receiver), Poll::Ready(Err(Unanswered)));
        // Nothing was reported: the executor judges by what it observed.
        shared.cancellation.stop(StopReason::Cancelled);
        assert!(!shared.cancellation.answer_stands(0, true));
        assert!(shared.cancellation.answer_stands(0, false));
    }

    #[test]
    fn the_answer_wakes_the_receiver_and_is_yielded_once() {
        let shared = turn();
        let ctx = ToolContext::new("a".into(), 0, None, shared);
        let (sender, receiver) = ctx.answer_channel::<u32>();
        let worker = std::thread::spawn(move || sender.send(7).unwrap());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut receiver = receiver;
        assert_eq!(runtime.block_on(&mut receiver), Ok(7));
        worker.join().unwrap();
        assert_eq!(poll_once(&mut receiver), Poll::Ready(Err(Unanswered)));
    }

    #[test]
    fn both_halves_cross_threads() {
        fn sendable<T: Send + Sync>() {}
        fn movable<T: Send>() {}
        sendable::<AnswerSender<String>>();
        movable::<AnswerReceiver<String>>();
    }

    #[test]
    fn a_standalone_call_answers_without_a_turn() {
        let token = CancellationToken::new();
        let ctx = ToolContext::standalone("x", token.clone());
        let (sender, mut receiver) = ctx.answer_channel_in_hand_off();
        receiver.handed_over();
        assert!(!sender.is_cancelled());
        token.cancel();
        assert!(sender.is_cancelled());
        sender.send("done").unwrap();
        assert_eq!(poll_once(&mut receiver), Poll::Ready(Ok("done")));
    }
}
