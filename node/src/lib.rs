//! Node.js binding of ferroloop (napi-rs): the native half of the npm package `ferroloop`.
//!
//! Each exported item is a thin translation layer over the core crate: arguments in, core call,
//! results out, errors mapped to a stable code (see [`error`]). Every exported body runs inside
//! the panic boundary of [`guard`], so a Rust panic reaches JavaScript as an error with code
//! `internal`, never as a process abort. The JavaScript wrappers in `lib/` turn those errors into
//! `FerroloopError` subclasses.

pub mod decode;
pub mod error;
pub mod exec;
pub mod guard;
pub mod sse;
pub mod tool_bridge;

use napi_derive::napi;

/// Panics on purpose, inside the panic boundary: lets the test suite prove that a Rust panic
/// surfaces as a `FerroloopError` with code `internal` and leaves the process running.
#[napi(js_name = "_debugPanic")]
pub fn debug_panic(message: Option<String>) -> napi::Result<()> {
    guard::sync(|| {
        let message = message.unwrap_or_else(|| "deliberate panic".to_owned());
        std::panic::panic_any(message)
    })
}

/// Calls a JS tool through the executor's bridge with an optional timeout (test support for the
/// bridge mechanics: Promise awaiting, abort on timeout, unref'd handles, worker threads).
#[napi(
    js_name = "_bridgeCall",
    ts_args_type = "invoke: (invocation: ToolInvocation) => Promise<ToolReply>, abort: (abort: ToolAbort) => void, name: string, inputJson: string, timeoutMs?: number"
)]
pub async fn bridge_call(
    invoke: tool_bridge::InvokeFn,
    abort: tool_bridge::AbortFn,
    name: String,
    input_json: String,
    timeout_ms: Option<u32>,
) -> napi::Result<tool_bridge::ToolReply> {
    guard::future(async move {
        let bridge = tool_bridge::ToolBridge::new(invoke, abort);
        let call = bridge.call(&name, "toolu_test", input_json, None);
        match timeout_ms {
            None => Ok(call.await),
            Some(ms) => {
                let limit = std::time::Duration::from_millis(u64::from(ms));
                match tokio::time::timeout(limit, call).await {
                    Ok(reply) => Ok(reply),
                    Err(_) => Ok(tool_bridge::ToolReply::error(format!(
                        "tool {name} timed out after {ms} ms"
                    ))),
                }
            }
        }
    })
    .await
}
