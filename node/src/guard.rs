//! The panic boundary: every exported function body runs inside [`sync`] (or, for the bodies
//! that run on the async runtime, [`future`]), so a panic becomes an error with code `internal`
//! instead of unwinding into Node (which would abort the process).
//!
//! The test suite proves the boundary holds at *every* entry point: [`arm`] makes each guarded
//! body panic on entry, and the suite calls every native method while armed.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::FutureExt;

use crate::error::{ErrorCode, FerroloopError};

/// When set, every guarded body panics as it starts (tests only; see [`arm`]).
static ARMED: AtomicBool = AtomicBool::new(false);

/// The payload of an armed panic.
const ARMED_PANIC: &str = "armed panic at a binding entry point";

/// Makes every guarded entry point panic (`true`) or behave (`false`). Armed panics are not
/// printed by the panic hook (a test arms dozens of them); every other panic still is.
pub fn arm(armed: bool) {
    static QUIET_HOOK: Once = Once::new();
    QUIET_HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<String>().map(String::as_str) != Some(ARMED_PANIC) {
                default(info);
            }
        }));
    });
    ARMED.store(armed, Ordering::SeqCst);
}

/// Panics when the boundary is armed; called first thing inside every guarded body.
fn tripwire() {
    if ARMED.load(Ordering::Relaxed) {
        std::panic::panic_any(ARMED_PANIC.to_owned());
    }
}

/// Runs `body`, turning a panic into an `internal` error that carries the panic message.
///
/// `AssertUnwindSafe` is sound here because a caught panic is reported as an error and the
/// state it may have left half-updated is only ever reachable through the object whose method
/// panicked; the error tells the caller that object is no longer trustworthy.
pub fn sync<T>(body: impl FnOnce() -> napi::Result<T>) -> napi::Result<T> {
    match catch_unwind(AssertUnwindSafe(|| {
        tripwire();
        body()
    })) {
        Ok(result) => result,
        Err(payload) => Err(panic_error(payload.as_ref()).into()),
    }
}

/// Awaits `body`, turning a panic in any of its polls into an `internal` error (the same
/// reasoning about unwind safety as [`sync`]).
pub async fn future<T>(body: impl Future<Output = napi::Result<T>>) -> napi::Result<T> {
    let guarded = async {
        tripwire();
        body.await
    };
    match AssertUnwindSafe(guarded).catch_unwind().await {
        Ok(result) => result,
        Err(payload) => Err(panic_error(payload.as_ref()).into()),
    }
}

/// The error reported for a caught panic payload.
pub fn panic_error(payload: &(dyn std::any::Any + Send)) -> FerroloopError {
    let detail = ferroloop::exec::panic_message(payload);
    FerroloopError::new(ErrorCode::Internal, format!("ferroloop panicked: {detail}"))
}
