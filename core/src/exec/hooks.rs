//! Hooks around every call, implementable by the host: before-call (deny or rewrite the input),
//! permission (allow or deny with a reason) and after-call (rewrite the result).
//!
//! Hooks run inside the call's slot, after admission: a permission prompt therefore holds its
//! slot, and is cancelled with the call. The call's timeout covers the tool only, not the hooks.

use futures_util::future::{BoxFuture, FutureExt, ready};
use serde_json::Value;

use super::tool::ToolOutput;

/// The call a hook is asked about.
#[derive(Debug, Clone, Copy)]
pub struct HookCall<'a> {
    /// The `tool_use` id.
    pub tool_use_id: &'a str,
    /// The tool's name.
    pub tool_name: &'a str,
    /// The input the tool receives (after any before-call rewrite).
    pub input: &'a Value,
}

/// What the before-call hook decided.
#[derive(Debug, Clone, PartialEq)]
pub enum BeforeCall {
    /// Run the call as it is.
    Continue,
    /// Run the call with this input instead (validated again against the tool's schema).
    RewriteInput(Value),
    /// Do not run the call: the model gets an error result with this reason.
    Deny(String),
}

/// What the permission hook decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Permission {
    /// The call may run.
    Allow,
    /// The call may not run: the model gets an error result with this reason.
    Deny(String),
}

/// What the after-call hook decided.
#[derive(Debug, Clone, PartialEq)]
pub enum AfterCall {
    /// Keep the tool's output.
    Keep,
    /// Replace the tool's output.
    Replace(ToolOutput),
}

/// Hooks around tool calls. Every method has a default that lets the call through unchanged.
pub trait ToolHooks: Send + Sync + 'static {
    /// Called before a call runs.
    fn before_call<'a>(&'a self, call: HookCall<'a>) -> BoxFuture<'a, BeforeCall> {
        let _ = call;
        ready(BeforeCall::Continue).boxed()
    }

    /// Decides whether a call may run (after the before-call hook).
    fn permission<'a>(&'a self, call: HookCall<'a>) -> BoxFuture<'a, Permission> {
        let _ = call;
        ready(Permission::Allow).boxed()
    }

    /// Called with the output of a call that ran to completion (success or tool-reported
    /// error, [`ToolError::Failed`](super::ToolError::Failed) included; not for a
    /// [`ToolError::Fatal`](super::ToolError::Fatal), timeouts, cancellations or panics).
    /// Like the other hooks, it is dropped when the call is cancelled while it runs, and the
    /// call is answered as cancelled.
    fn after_call<'a>(
        &'a self,
        call: HookCall<'a>,
        output: &'a ToolOutput,
    ) -> BoxFuture<'a, AfterCall> {
        let _ = (call, output);
        ready(AfterCall::Keep).boxed()
    }
}
