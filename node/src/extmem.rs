//! Native memory reported to V8 (`napi_adjust_external_memory`).
//!
//! V8 decides when to collect from the memory it can see. A native object whose Rust side grows
//! with its input (a `StreamDecoder` keeps the whole message) while its JavaScript wrapper stays a
//! few words reaches V8's old generation in a server (it lives across many scavenges while its
//! stream arrives) and is then freed only by a full GC, which old-generation growth alone rarely
//! triggers: dropped decoders piled up to hundreds of MB of RSS (`benches/node/churn.mjs`). Each
//! such object owns an `ExternalMemory` that tells V8 its size, in steps, and takes it back when
//! the object is finalized.

use std::sync::atomic::{AtomicI64, Ordering};

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

    /// Takes back everything this object reported (its owner is being finalized).
    pub(crate) fn release(&mut self, env: &Env) {
        self.adjust(env, 0);
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

/// The bytes of native memory the live native objects reported to V8 (sum over them): the leak
/// tests check it returns to its start once the objects are collected, and follows a live
/// object's growth.
#[napi(js_name = "_debugExternalBytes")]
pub fn debug_external_bytes() -> napi::Result<f64> {
    guard::sync(|| Ok(REPORTED.load(Ordering::Relaxed) as f64))
}
