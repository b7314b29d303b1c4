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
    /// The status's wire name, as serialized (`succeeded`, `timed_out`, ...): what the
    /// bindings' `finished` events and the agent's `tool_finished` events carry.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Fatal => "fatal",
            Self::Panicked => "panicked",
            Self::TimedOut => "timed_out",
            Self::Cancelled => "cancelled",
            Self::Skipped => "skipped",
            Self::Denied => "denied",
            Self::Rejected => "rejected",
        }
    }

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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn as_str_is_the_serialized_name() {
        for status in [
            CallStatus::Succeeded,
            CallStatus::Failed,
            CallStatus::Fatal,
            CallStatus::Panicked,
            CallStatus::TimedOut,
            CallStatus::Cancelled,
            CallStatus::Skipped,
            CallStatus::Denied,
            CallStatus::Rejected,
        ] {
            let serialized = serde_json::to_value(status).unwrap();
            assert_eq!(serialized, status.as_str(), "{status:?}");
        }
        assert_eq!(CallStatus::TimedOut.as_str(), "timed_out");
    }
}
