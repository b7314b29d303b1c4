//! Whether an agent run waits on its host alone. A host whose event loop does not see the
//! async runtime (Node: the run works on tokio, JavaScript waits for its events) keeps that loop
//! alive while the run works; it should not while the run waits only for the host's own tools,
//! or a tool whose promise never settles would keep the process alive forever, where
//! `Promise.all` over the same promise lets it exit.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Wake, Waker};

use crate::exec::{CancellationToken, Turn, TurnEvent};

/// `idle_after` while the run works (or has not waited yet).
const WORKING: u64 = u64::MAX;

/// Tells a host whether an agent run waits on the host alone: the run is settling a turn's
/// tool calls after the model's message ended, every call still running is one of an
/// externally completed tool without a timeout, hooks or task of its own (see
/// [`Turn::waits_only_on_host`]), and the run has seen everything the host delivered
/// ([`host_acted`](Self::host_acted)). Nothing of the run's own will then wake it: no request,
/// no timer.
///
/// Give one to a run with [`RunOptions::host_wait`](super::RunOptions::host_wait) (one per
/// run); clones share the state.
#[derive(Clone, Debug, Default)]
pub struct HostWait {
    state: Arc<State>,
}

#[derive(Debug)]
struct State {
    /// What the host delivered so far: answers, progress reports.
    actions: AtomicU64,
    /// The count of `actions` the run had read before the poll that left it waiting on its host
    /// alone; [`WORKING`] otherwise.
    idle_after: AtomicU64,
    /// Notified each time the run comes to wait on its host alone.
    became_idle: tokio::sync::Notify,
    /// The run's cancellation token (a cancelled run is stopping, not waiting).
    run: OnceLock<CancellationToken>,
}

impl Default for State {
    fn default() -> Self {
        Self {
            actions: AtomicU64::new(0),
            idle_after: AtomicU64::new(WORKING),
            became_idle: tokio::sync::Notify::new(),
            run: OnceLock::new(),
        }
    }
}

impl HostWait {
    /// A state for one run, not attached to it yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that the host delivered something the run will act on (a tool's answer or
    /// progress report): call it after delivering. The run does not wait on its host alone
    /// again before it has looked at what came.
    pub fn host_acted(&self) {
        self.state.actions.fetch_add(1, Ordering::SeqCst);
    }

    /// Whether the run now waits on its host alone (see the type). False while it works, once
    /// it is cancelled or has ended, and from a [`host_acted`](Self::host_acted) until the run
    /// has polled again.
    pub fn waits_only_on_host(&self) -> bool {
        let seen = self.state.idle_after.load(Ordering::SeqCst);
        seen != WORKING
            && seen == self.state.actions.load(Ordering::SeqCst)
            && self.state.run.get().is_some_and(|run| !run.is_cancelled())
    }

    /// Resolves once the run has come to wait on its host alone since the last call (a state
    /// reached while nobody waited is reported to the next call). A host that let its event
    /// loop go looks again at [`waits_only_on_host`](Self::waits_only_on_host) then.
    pub async fn became_idle(&self) {
        self.state.became_idle.notified().await;
    }

    /// Attaches the state to the run whose cancellation token is `run` (the first run only).
    pub(crate) fn attach(&self, run: &CancellationToken) {
        if self.state.run.set(run.clone()).is_err() {
            tracing::warn!("a HostWait given to a second agent run follows the first");
        }
    }

    /// Polls `turn` for its next event, and records whether the run then waits on its host
    /// alone: the poll left the turn waiting on its host ([`Turn::waits_only_on_host`]) and
    /// nothing woke the run during it (a wake-up then, such as a call set aside for a later
    /// poll, means the run has work).
    pub(crate) fn poll_turn(
        &self,
        turn: &mut Turn,
        cx: &mut Context<'_>,
    ) -> Poll<Option<TurnEvent>> {
        let seen = self.state.actions.load(Ordering::SeqCst);
        self.state.idle_after.store(WORKING, Ordering::SeqCst);
        let watch = Arc::new(WakeWatch {
            woken: AtomicBool::new(false),
            task: cx.waker().clone(),
        });
        let waker = Waker::from(watch.clone());
        let polled = turn.poll_next_event(&mut Context::from_waker(&waker));
        if polled.is_pending() && !watch.woken.load(Ordering::SeqCst) && turn.waits_only_on_host() {
            self.state.idle_after.store(seen, Ordering::SeqCst);
            self.state.became_idle.notify_one();
        }
        polled
    }
}

/// The run's waker, noting whether it was woken.
struct WakeWatch {
    woken: AtomicBool,
    task: Waker,
}

impl Wake for WakeWatch {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::SeqCst);
        self.task.wake_by_ref();
    }
}
