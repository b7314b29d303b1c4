//! The tokio runtime a handle owns (a client's, an executor's, a turn's, a run's), and its
//! release in a child forked after it was made.
//!
//! A child of `fork()` has none of the parent's threads: not a client's worker, nor the
//! blocking-pool workers a run's built-in tools started (tokio keeps them alive for about ten
//! seconds after their last job). Dropping a runtime waits for its threads to exit, so in such a
//! child it would wait forever; shutting it down would also take locks those threads may have
//! held at the fork. There, the runtime is parked instead: never dropped, kept until the child
//! exits or execs.

use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::sync::{Mutex, PoisonError};

use tokio::runtime::Runtime;

use crate::exec::drop_runtime;

/// The runtimes released in a child forked after they were made: never dropped (see the module
/// doc), kept here rather than leaked so that nothing of them is lost.
static FORKED_AWAY: Mutex<Vec<Runtime>> = Mutex::new(Vec::new());

/// A runtime owned by one handle, and the process that made it. Dropped in that process, it is
/// released with [`drop_runtime`] (its threads joined); in a child forked after it was made, it
/// is parked (see the module doc).
pub(crate) struct OwnedRuntime {
    /// Taken only in `drop`.
    runtime: ManuallyDrop<Runtime>,
    /// The process that made the runtime (its threads run there only).
    pid: u32,
}

impl OwnedRuntime {
    /// Owns `runtime`, made in this process.
    pub(crate) fn new(runtime: Runtime) -> Self {
        Self::made_in(runtime, std::process::id())
    }

    fn made_in(runtime: Runtime, pid: u32) -> Self {
        Self {
            runtime: ManuallyDrop::new(runtime),
            pid,
        }
    }

    /// Whether this process is a child forked after the runtime was made. One `getpid` (the
    /// standard library does not cache it).
    pub(crate) fn forked(&self) -> bool {
        self.pid != std::process::id()
    }
}

impl Deref for OwnedRuntime {
    type Target = Runtime;

    fn deref(&self) -> &Runtime {
        &self.runtime
    }
}

impl Drop for OwnedRuntime {
    fn drop(&mut self) {
        // SAFETY: taken once, here, and `self.runtime` is never used again (`self` is being
        // dropped, and `ManuallyDrop` does not drop it a second time).
        let runtime = unsafe { ManuallyDrop::take(&mut self.runtime) };
        if self.forked() {
            FORKED_AWAY
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(runtime);
            return;
        }
        drop_runtime(runtime);
    }
}

/// A runtime with one worker thread whose stop takes a while and is then recorded in
/// `stopped`: a drop that does not join the thread returns before the flag is set. For the
/// tests of runtime releases (here and in `exec`).
#[cfg(test)]
#[allow(clippy::expect_used)]
pub(crate) fn slow_stopping_runtime(
    stopped: &std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Runtime {
    let flag = std::sync::Arc::clone(stopped);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .on_thread_stop(move || {
            std::thread::sleep(std::time::Duration::from_millis(200));
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
        })
        .build()
        .expect("a runtime")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    #[test]
    fn dropped_in_the_process_that_made_it_joins_its_threads() {
        let stopped = Arc::new(AtomicBool::new(false));
        drop(OwnedRuntime::new(slow_stopping_runtime(&stopped)));
        assert!(
            stopped.load(Ordering::SeqCst),
            "the worker thread was still running"
        );
    }

    #[test]
    fn dropped_in_another_process_is_parked_untouched() {
        let stopped = Arc::new(AtomicBool::new(false));
        // As a child forked after the runtime was made sees it: another process made it.
        let owned = OwnedRuntime::made_in(
            slow_stopping_runtime(&stopped),
            std::process::id().wrapping_add(1),
        );
        assert!(owned.forked());
        let before = FORKED_AWAY
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        drop(owned);
        let parked_runtime = {
            // Only this test parks runtimes in this test binary.
            let mut forked_away = FORKED_AWAY.lock().unwrap_or_else(PoisonError::into_inner);
            assert_eq!(forked_away.len(), before + 1, "the runtime was not parked");
            forked_away.pop().expect("the runtime was parked")
        };
        assert!(
            !stopped.load(Ordering::SeqCst),
            "the runtime was shut down, not parked"
        );
        // This process does have its threads: release it for real.
        drop(parked_runtime);
        assert!(stopped.load(Ordering::SeqCst));
    }
}
