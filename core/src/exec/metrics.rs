//! Executor counters, shared by every turn of an executor.

use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters (relaxed atomics: exact totals, no ordering between counters).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    started: AtomicU64,
    completed: AtomicU64,
    failed: AtomicU64,
    timed_out: AtomicU64,
    cancelled: AtomicU64,
    rejected: AtomicU64,
    panicked: AtomicU64,
    spilled: AtomicU64,
    detached: AtomicU64,
    detached_live: AtomicU64,
}

/// Which counter to bump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counter {
    Started,
    Completed,
    Failed,
    TimedOut,
    Cancelled,
    Rejected,
    Panicked,
    Spilled,
}

impl Counters {
    fn cell(&self, counter: Counter) -> &AtomicU64 {
        match counter {
            Counter::Started => &self.started,
            Counter::Completed => &self.completed,
            Counter::Failed => &self.failed,
            Counter::TimedOut => &self.timed_out,
            Counter::Cancelled => &self.cancelled,
            Counter::Rejected => &self.rejected,
            Counter::Panicked => &self.panicked,
            Counter::Spilled => &self.spilled,
        }
    }

    pub(crate) fn bump(&self, counter: Counter) {
        self.cell(counter).fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn detached_started(&self) {
        self.detached.fetch_add(1, Ordering::Relaxed);
        self.detached_live.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn detached_ended(&self) {
        self.detached_live.fetch_sub(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> ExecutorMetrics {
        let get = |cell: &AtomicU64| cell.load(Ordering::Relaxed);
        ExecutorMetrics {
            started: get(&self.started),
            completed: get(&self.completed),
            failed: get(&self.failed),
            timed_out: get(&self.timed_out),
            cancelled: get(&self.cancelled),
            rejected: get(&self.rejected),
            panicked: get(&self.panicked),
            spilled: get(&self.spilled),
            detached: get(&self.detached),
            detached_running: get(&self.detached_live),
        }
    }
}

/// A snapshot of an executor's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct ExecutorMetrics {
    /// Calls whose tool was started.
    pub started: u64,
    /// Calls that returned a successful output.
    pub completed: u64,
    /// Calls that returned an error (including a tool-reported error output and hook denials).
    pub failed: u64,
    /// Calls stopped by their timeout.
    pub timed_out: u64,
    /// Calls cancelled while running or never started because of a cancellation, discard,
    /// fatal error or sibling failure.
    pub cancelled: u64,
    /// Calls refused before running: unknown tool or invalid input.
    pub rejected: u64,
    /// Calls whose tool panicked.
    pub panicked: u64,
    /// Results replaced by a preview and a spill file.
    pub spilled: u64,
    /// Calls that outlived their cleanup grace and were detached.
    pub detached: u64,
    /// Detached calls still running now.
    pub detached_running: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_snapshot() {
        let counters = Counters::default();
        counters.bump(Counter::Started);
        counters.bump(Counter::Started);
        counters.bump(Counter::Spilled);
        counters.detached_started();
        let snap = counters.snapshot();
        assert_eq!(
            (
                snap.started,
                snap.spilled,
                snap.detached,
                snap.detached_running
            ),
            (2, 1, 1, 1)
        );
        counters.detached_ended();
        assert_eq!(counters.snapshot().detached_running, 0);
    }
}
