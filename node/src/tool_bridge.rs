//! Calling JavaScript tool functions from Rust: one thread-safe function per executor invokes a
//! tool (its `Promise` is awaited on the Rust side), a second one aborts a running call (the JS
//! side fires the call's `AbortSignal`).
//!
//! Both are *weak* (unref'd): they never keep Node's event loop alive by themselves. A pending
//! `run` Promise does, as any pending I/O would (napi-rs settles it through a ref'd handle).
//!
//! The JS side (`lib/exec.js`) never rejects nor throws: it resolves every invocation with a
//! [`ToolReply`], turning a thrown or rejected error into `isError: true`. A Rust-side failure
//! to reach JavaScript (the environment is shutting down) becomes an error reply as well.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use ferroloop::exec::CancellationToken;
use napi::Status;
use napi::bindgen_prelude::Promise;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;

/// One tool call handed to JavaScript.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct ToolInvocation {
    /// Identifies the call for a later abort (unique per bridge).
    pub call_id: u32,
    /// The tool's name.
    pub name: String,
    /// The `tool_use` block's id.
    pub tool_use_id: String,
    /// The tool input, as JSON text.
    pub input_json: String,
}

/// What a JavaScript tool produced.
#[napi(object)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolReply {
    /// The result content: text, or (when `contentIsJson`) a JSON array of content blocks.
    pub content: String,
    /// Whether `content` is JSON (an array of content blocks) rather than plain text.
    pub content_is_json: bool,
    /// The tool failed (threw, rejected or reported an error).
    pub is_error: bool,
}

impl ToolReply {
    /// An error reply with a plain-text message.
    pub fn error(message: impl Into<String>) -> Self {
        Self {
            content: message.into(),
            content_is_json: false,
            is_error: true,
        }
    }
}

/// JS `(invocation) => Promise<ToolReply>`, unref'd.
pub type InvokeFn =
    ThreadsafeFunction<ToolInvocation, Promise<ToolReply>, ToolInvocation, Status, false, true>;
/// JS `(abort) => void`, unref'd.
pub type AbortFn = ThreadsafeFunction<ToolAbort, (), ToolAbort, Status, false, true>;

/// Asks JavaScript to abort one running call.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct ToolAbort {
    /// The call to abort.
    pub call_id: u32,
    /// Why (`timeout`, `aborted`, `sibling_failed`, ...).
    pub reason: String,
}

/// The two thread-safe functions of one executor, shareable across tasks.
#[derive(Clone)]
pub struct ToolBridge {
    invoke: Arc<InvokeFn>,
    abort: Arc<AbortFn>,
    next_call_id: Arc<AtomicU32>,
}

impl std::fmt::Debug for ToolBridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolBridge").finish_non_exhaustive()
    }
}

impl ToolBridge {
    /// A bridge over the JS invoke and abort functions.
    pub fn new(invoke: InvokeFn, abort: AbortFn) -> Self {
        Self {
            invoke: Arc::new(invoke),
            abort: Arc::new(abort),
            next_call_id: Arc::new(AtomicU32::new(1)),
        }
    }

    /// Calls tool `name` in JavaScript and waits for its reply. When `cancel` fires first, the
    /// JS call is aborted through its `AbortSignal` (with `abort_reason()` as the reason) and its
    /// reply is still awaited: the executor bounds that wait with its cleanup grace. Dropping the
    /// returned future before the reply arrived aborts the JS call as well.
    pub async fn call(
        &self,
        name: &str,
        tool_use_id: &str,
        input_json: String,
        cancel: Option<(CancellationToken, &(dyn Fn() -> &'static str + Send + Sync))>,
    ) -> ToolReply {
        let call_id = self.next_call_id.fetch_add(1, Ordering::Relaxed);
        let mut guard = AbortOnDrop {
            bridge: self,
            call_id,
            armed: true,
        };
        let invocation = ToolInvocation {
            call_id,
            name: name.to_owned(),
            tool_use_id: tool_use_id.to_owned(),
            input_json,
        };
        let reply = async {
            match self.invoke.call_async(invocation).await {
                Ok(promise) => match promise.await {
                    Ok(reply) => reply,
                    Err(err) => ToolReply::error(format!("tool {name} failed: {}", err.reason)),
                },
                Err(err) => {
                    ToolReply::error(format!("tool {name} could not be called: {}", err.reason))
                }
            }
        };
        let reply = match cancel {
            None => reply.await,
            Some((token, reason)) => {
                let mut reply = std::pin::pin!(reply);
                tokio::select! {
                    biased;
                    done = &mut reply => done,
                    () = token.cancelled() => {
                        self.abort(call_id, reason());
                        reply.await
                    }
                }
            }
        };
        guard.armed = false;
        reply
    }

    /// Aborts call `call_id` in JavaScript (fire and forget).
    pub fn abort(&self, call_id: u32, reason: &str) {
        let status = self.abort.call(
            ToolAbort {
                call_id,
                reason: reason.to_owned(),
            },
            ThreadsafeFunctionCallMode::NonBlocking,
        );
        if status != Status::Ok {
            tracing::debug!(
                ?status,
                call_id,
                "could not deliver a tool abort to JavaScript"
            );
        }
    }
}

/// Aborts the JS side of a call whose Rust future is dropped before the reply arrived.
struct AbortOnDrop<'a> {
    bridge: &'a ToolBridge,
    call_id: u32,
    armed: bool,
}

impl Drop for AbortOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.bridge.abort(self.call_id, "aborted");
        }
    }
}
