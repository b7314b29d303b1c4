//! Native memory reported to V8 (`napi_adjust_external_memory`).
//!
//! V8 decides when to collect from the memory it can see. A native object whose Rust side grows
//! with its input (a `StreamDecoder` keeps the whole message) while its JavaScript wrapper stays a
//! few words reaches V8's old generation in a server (it lives across many scavenges while its
//! stream arrives) and is then freed only by a full GC, which old-generation growth alone rarely
//! triggers: dropped decoders piled up to hundreds of MB of RSS (`benches/node/churn.mjs`). Each
//! such object owns an `ExternalMemory` that tells V8 its size, in steps, and takes it back when
//! the object is finalized.
//!
//! A client stream or an agent run holds its memory on the async runtime (the decoder, the run's
//! history, the items not yet taken), where no `Env` is: the runtime counts it in a
//! `SharedSize`, and the JavaScript thread reports the count when it takes items or when the
//! runtime asks it to (through the stream's waker).

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};

use napi::Env;
use napi_derive::napi;

use crate::guard;

/// The net bytes every live [`ExternalMemory`] reported (what V8 was told and not yet told back).
static REPORTED: AtomicI64 = AtomicI64::new(0);

/// Growth reported at once: a report is an N-API call, so it waits until the size moved this
/// much (a decoder reports once per 12 KiB of stream, about every eighth 1,460-byte chunk, never
/// per event). Small enough that a 64 KiB reply's decoder is seen: with 64 KiB steps it never
/// was, and RSS under `churn.mjs decoder 65536 8192 64` went on climbing as before.
pub(crate) const STEP: usize = 4 * 1024;

/// Growth a [`SharedSize`] asks the JavaScript thread to report: an ask is a call into
/// JavaScript (the stream's waker, then `reportMemory`), and a stream being read reports at
/// every batch taken anyway, so asks are for streams nobody reads. With [`STEP`] a producer
/// running ahead of its reader asked every few dozen items: agent runs read to their end (64 KiB
/// replies) took 1.14× and 1.02× the time without asks in two A/B runs, 1.02× and 1.01× with
/// this step. A 64 KiB reply left unread still asks a few times.
pub(crate) const ASK_STEP: usize = 64 * 1024;

/// What one native object reported to V8; its owner reports its final size with
/// [`release`](Self::release) when finalized.
#[derive(Debug, Default)]
pub(crate) struct ExternalMemory {
    reported: usize,
}

impl ExternalMemory {
    /// Reports `bytes` (the object's size at construction).
    pub(crate) fn new(env: &Env, bytes: usize) -> Self {
        let mut memory = Self::default();
        memory.adjust(env, bytes);
        memory
    }

    /// Reports `bytes` as the object's size once it moved [`STEP`] from the last report either
    /// way (a smaller move is not worth a call).
    pub(crate) fn update(&mut self, env: &Env, bytes: usize) {
        if bytes.abs_diff(self.reported) >= STEP {
            self.adjust(env, bytes);
        }
    }

    /// Takes back everything this object reported (its owner is being finalized, or its native
    /// memory was freed). Twice is the same as once: the report is set to zero, not lowered.
    pub(crate) fn release(&mut self, env: &Env) {
        self.adjust(env, 0);
    }

    /// Takes back everything (as [`release`](Self::release)) from its owner's finalizer, never
    /// failing: napi-rs would throw an error or a panic from a finalizer into no caller. Not
    /// through `guard::sync`, whose test tripwire would skip the release and unbalance the
    /// accounts.
    pub(crate) fn release_in_finalizer(&mut self, env: &Env) {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.release(env)));
    }

    /// Reports what `shared` counts now (as [`update`](Self::update); a count of zero exactly),
    /// and lets the other threads ask for a report again.
    pub(crate) fn update_shared(&mut self, env: &Env, shared: &SharedSize) {
        // Cleared before the count is read: growth after the read asks again.
        shared.asked.store(false, Ordering::Release);
        match shared.bytes.load(Ordering::Acquire) {
            // Nothing held (a stream read to its end): nothing stays reported, however little.
            0 => self.release(env),
            bytes => self.update(env, bytes),
        }
        shared.reported.store(self.reported, Ordering::Release);
    }

    /// Takes back everything (as [`release`](Self::release)) for an object whose `shared` count
    /// has no more reason to be reported.
    pub(crate) fn release_shared(&mut self, env: &Env, shared: &SharedSize) {
        self.release(env);
        shared.reported.store(self.reported, Ordering::Release);
    }

    fn adjust(&mut self, env: &Env, bytes: usize) {
        let to = i64::try_from(bytes).unwrap_or(i64::MAX);
        let from = i64::try_from(self.reported).unwrap_or(i64::MAX);
        let change = to - from;
        if change == 0 {
            return;
        }
        // A failed call (never seen: it fails only for a bad env) leaves V8's figure as it was,
        // so the record stays too and the next report or the release retries the difference.
        if env.adjust_external_memory(change).is_ok() {
            self.reported = bytes;
            REPORTED.fetch_add(change, Ordering::Relaxed);
        }
    }
}

/// The native memory an object holds on other threads, counted where it is allocated and freed;
/// its owner's [`ExternalMemory`] reports it from the JavaScript thread.
#[derive(Debug, Default)]
pub(crate) struct SharedSize {
    /// What the object holds now.
    bytes: AtomicUsize,
    /// What its `ExternalMemory` last reported (a copy the other threads can read).
    reported: AtomicUsize,
    /// A report was asked of the JavaScript thread and not made yet.
    asked: AtomicBool,
}

impl SharedSize {
    /// Counts `bytes` more.
    pub(crate) fn add(&self, bytes: usize) {
        self.bytes.fetch_add(bytes, Ordering::AcqRel);
    }

    /// Counts `bytes` less (never below zero: the count is an estimate, not a ledger to break).
    pub(crate) fn sub(&self, bytes: usize) {
        let _ = self
            .bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                Some(now.saturating_sub(bytes))
            });
    }

    /// Whether the JavaScript thread should be asked for a report now: the count moved
    /// [`ASK_STEP`] from the last one (or fell to zero) and no report is asked already (one request at a time, so a
    /// stream nobody reads costs one call per step, not one per item). The caller asks, or
    /// calls [`not_asked`](Self::not_asked) if it could not.
    pub(crate) fn ask(&self) -> bool {
        let bytes = self.bytes.load(Ordering::Acquire);
        let reported = self.reported.load(Ordering::Acquire);
        // Down to nothing is worth a call whatever the step: the object is done with it.
        let moved = bytes.abs_diff(reported) >= ASK_STEP || (bytes == 0 && reported != 0);
        moved && !self.asked.swap(true, Ordering::AcqRel)
    }

    /// The report [`ask`](Self::ask) wanted could not be asked for (no waker yet, or the call
    /// failed): a later change asks again.
    pub(crate) fn not_asked(&self) {
        self.asked.store(false, Ordering::Release);
    }
}

/// The bytes of native memory the live native objects reported to V8 (sum over them): the leak
/// tests check it returns to its start once the objects are collected, and follows a live
/// object's growth.
#[napi(js_name = "_debugExternalBytes")]
pub fn debug_external_bytes() -> napi::Result<f64> {
    guard::sync(|| Ok(REPORTED.load(Ordering::Relaxed) as f64))
}
