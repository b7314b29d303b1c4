//! Node.js binding of ferroloop (napi-rs): the native half of the npm package `ferroloop`.
//!
//! Each exported item is a thin translation layer over the core crate: arguments in, core call,
//! results out, errors mapped to a stable code (see [`error`]). Every exported body runs inside
//! the panic boundary of [`guard`], so a Rust panic reaches JavaScript as an error with code
//! `internal`, never as a process abort. The JavaScript wrappers in `lib/` turn those errors into
//! `FerroloopError` subclasses.

pub mod agent;
mod batch;
pub mod client;
pub mod decode;
pub mod error;
pub mod exec;
pub mod extmem;
pub mod guard;
mod joined;
pub mod js_tools;
pub mod pump;
pub mod sse;
pub mod tokens;
mod utf16;

use napi_derive::napi;

// The executor allocates per tool call (invocations, results, events) from the JS thread while
// V8 churns the system allocator; mimalloc measured faster for the addon's own allocations.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[napi(js_name = "_debugArmPanics")]
/// Makes every native entry point panic inside its boundary (`true`) or behave (`false`): lets
/// the test suite prove that no entry point lets a panic reach Node.
pub fn debug_arm_panics(armed: bool) {
    guard::arm(armed);
}

/// Panics on purpose, inside the panic boundary: lets the test suite prove that a Rust panic
/// surfaces as a `FerroloopError` with code `internal` and leaves the process running.
#[napi(js_name = "_debugPanic")]
pub fn debug_panic(message: Option<String>) -> napi::Result<()> {
    guard::sync(|| {
        let message = message.unwrap_or_else(|| "deliberate panic".to_owned());
        std::panic::panic_any(message)
    })
}

/// How many tasks are alive on the addon's tokio runtime (spawned and not yet finished): the
/// leak tests count what a run, a stream or a turn leaves behind (Python's `_debug_alive_tasks`).
#[napi(js_name = "_debugAliveTasks")]
pub fn debug_alive_tasks() -> napi::Result<u32> {
    guard::sync(|| {
        let alive = napi::bindgen_prelude::within_runtime_if_available(|| {
            tokio::runtime::Handle::try_current().map(|handle| handle.metrics().num_alive_tasks())
        })
        .map_err(|err| {
            napi::Error::from(error::FerroloopError::internal(format!(
                "no async runtime: {err}"
            )))
        })?;
        Ok(u32::try_from(alive).unwrap_or(u32::MAX))
    })
}
