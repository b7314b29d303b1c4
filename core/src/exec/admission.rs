//! The admission rule as a small pure state machine.
//!
//! A call may start when nothing runs, or when it and every running call are concurrency-safe
//! and the cap leaves room. The queue is strictly first-in first-out: the head blocks everything
//! behind it, which makes an unsafe call a barrier (it waits for the running calls, runs alone,
//! and every call queued after it waits for it) and keeps the start order equal to the
//! submission order.

use std::collections::VecDeque;

/// Which kind of call is running or queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Concurrency {
    /// May overlap other safe calls.
    Safe,
    /// Runs alone.
    Exclusive,
}

/// A FIFO queue of calls plus the set of running calls, deciding which call may start next.
#[derive(Debug)]
pub struct AdmissionQueue<T> {
    queue: VecDeque<(T, Concurrency)>,
    running: usize,
    exclusive_running: bool,
    cap: usize,
}

impl<T> AdmissionQueue<T> {
    /// An empty queue allowing at most `cap` running calls (a cap of 0 is treated as 1).
    pub fn new(cap: usize) -> Self {
        Self {
            queue: VecDeque::new(),
            running: 0,
            exclusive_running: false,
            cap: cap.max(1),
        }
    }

    /// Makes room for `additional` more queued calls.
    pub fn reserve(&mut self, additional: usize) {
        self.queue.reserve(additional);
    }

    /// Queues a call behind every call already queued.
    pub fn push(&mut self, item: T, concurrency: Concurrency) {
        self.queue.push_back((item, concurrency));
    }

    /// Whether a call of this kind could start now, given the running calls.
    fn admits(&self, concurrency: Concurrency) -> bool {
        if self.running == 0 {
            return true;
        }
        concurrency == Concurrency::Safe && !self.exclusive_running && self.running < self.cap
    }

    /// Takes the head of the queue when it may start now, and counts it as running.
    pub fn pop_admissible(&mut self) -> Option<(T, Concurrency)> {
        let (_, concurrency) = self.queue.front()?;
        if !self.admits(*concurrency) {
            return None;
        }
        let (item, concurrency) = self.queue.pop_front()?;
        self.running += 1;
        self.exclusive_running = concurrency == Concurrency::Exclusive;
        Some((item, concurrency))
    }

    /// Records that a running call of this kind finished.
    pub fn finish(&mut self, concurrency: Concurrency) {
        debug_assert!(self.running > 0, "finish without a running call");
        self.running = self.running.saturating_sub(1);
        if concurrency == Concurrency::Exclusive {
            self.exclusive_running = false;
        }
    }

    /// Removes every queued call (they will never start), oldest first.
    pub fn drain_queued(&mut self) -> impl Iterator<Item = (T, Concurrency)> + '_ {
        self.queue.drain(..)
    }

    /// The number of running calls.
    pub fn running(&self) -> usize {
        self.running
    }

    /// The number of queued calls.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::Concurrency::{Exclusive, Safe};
    use super::*;

    fn pop_all<T>(queue: &mut AdmissionQueue<T>) -> Vec<T> {
        std::iter::from_fn(|| queue.pop_admissible().map(|(item, _)| item)).collect()
    }

    #[test]
    fn readers_overlap_writer_is_a_barrier() {
        let mut q = AdmissionQueue::new(10);
        q.push("r1", Safe);
        q.push("r2", Safe);
        q.push("w", Exclusive);
        q.push("r3", Safe);
        assert_eq!(pop_all(&mut q), ["r1", "r2"]);
        q.finish(Safe);
        assert_eq!(pop_all(&mut q), Vec::<&str>::new(), "w waits for r2");
        q.finish(Safe);
        assert_eq!(pop_all(&mut q), ["w"]);
        assert_eq!(pop_all(&mut q), Vec::<&str>::new(), "r3 waits for w");
        q.finish(Exclusive);
        assert_eq!(pop_all(&mut q), ["r3"]);
        q.finish(Safe);
        assert_eq!((q.running(), q.queued()), (0, 0));
    }

    #[test]
    fn exclusive_starts_when_idle_and_blocks_safe() {
        let mut q = AdmissionQueue::new(10);
        q.push(1, Exclusive);
        q.push(2, Safe);
        assert_eq!(pop_all(&mut q), [1]);
        q.finish(Exclusive);
        assert_eq!(pop_all(&mut q), [2]);
    }

    #[test]
    fn cap_bounds_running_safe_calls() {
        let mut q = AdmissionQueue::new(3);
        for i in 0..5 {
            q.push(i, Safe);
        }
        assert_eq!(pop_all(&mut q), [0, 1, 2]);
        q.finish(Safe);
        assert_eq!(pop_all(&mut q), [3]);
        assert_eq!(q.running(), 3);
    }

    #[test]
    fn zero_cap_still_makes_progress() {
        let mut q = AdmissionQueue::new(0);
        q.push('a', Safe);
        q.push('b', Safe);
        assert_eq!(pop_all(&mut q), ['a']);
        q.finish(Safe);
        assert_eq!(pop_all(&mut q), ['b']);
    }

    #[test]
    fn drain_returns_queued_in_order() {
        let mut q = AdmissionQueue::new(1);
        q.push(1, Safe);
        q.push(2, Safe);
        q.push(3, Exclusive);
        assert_eq!(pop_all(&mut q), [1]);
        let drained: Vec<_> = q.drain_queued().map(|(i, _)| i).collect();
        assert_eq!(drained, [2, 3]);
        assert_eq!(q.queued(), 0);
    }
}
