//! What a turn reports while it runs.

use std::time::Duration;

use serde_json::Value;

use super::types::ToolResult;

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    /// The tool returned a successful output.
    Succeeded,
    /// The tool returned an error (or an error output).
    Failed,
    /// The tool returned a fatal error, which ended the turn.
    Fatal,
    /// The tool panicked.
    Panicked,
    /// The tool ran past its timeout.
    TimedOut,
    /// The tool was running and was cancelled (turn cancel, discard, fatal error, sibling).
    Cancelled,
    /// The call never started because of a cancellation, discard, fatal error or sibling failure.
    Skipped,
    /// A hook or the permission decision refused the call.
    Denied,
    /// The call was refused before running: unknown tool or invalid input.
    Rejected,
}

impl CallStatus {
    /// Whether this counts as a failure of the tool for `cancels_siblings_on_error`.
    pub fn is_tool_failure(self) -> bool {
        matches!(
            self,
            Self::Failed | Self::Fatal | Self::Panicked | Self::TimedOut
        )
    }
}

/// An event of a turn. `Started`, `Progress`, `Finished` and `Detached` are delivered as they
/// happen (completion order); `Result` events come in submission order, each as soon as it and
/// every result before it are ready.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEvent {
    /// A call was admitted and its tool started.
    Started {
        /// The call's position in the turn.
        index: usize,
        /// The `tool_use` id.
        tool_use_id: String,
        /// The tool.
        tool: String,
        /// How long the call waited for admission.
        queued: Duration,
    },
    /// A tool reported progress.
    Progress {
        /// The call's position in the turn.
        index: usize,
        /// The `tool_use` id.
        tool_use_id: String,
        /// What the tool reported.
        data: Value,
    },
    /// A call ended (every call gets exactly one, started or not).
    Finished {
        /// The call's position in the turn.
        index: usize,
        /// The `tool_use` id.
        tool_use_id: String,
        /// The tool (as requested, for unknown tools).
        tool: String,
        /// How it ended.
        status: CallStatus,
        /// How long it ran (zero when it never started).
        duration: Duration,
    },
    /// A call outlived its cleanup grace after a cancellation or timeout: its result was
    /// produced anyway and the tool's future goes on, detached, on the runtime.
    Detached {
        /// The call's position in the turn.
        index: usize,
        /// The `tool_use` id.
        tool_use_id: String,
        /// The tool.
        tool: String,
    },
    /// The result of the call at `index`, in submission order.
    Result {
        /// The call's position in the turn.
        index: usize,
        /// The result (before the turn's aggregate budget, which applies when the turn ends).
        result: ToolResult,
    },
}
