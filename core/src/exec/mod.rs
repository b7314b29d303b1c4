//! The concurrent tool executor.
//!
//! - **Admission**: a call starts when nothing runs, or when it and every running call are
//!   concurrency-safe; an exclusive call runs alone and is a barrier for every call queued after
//!   it; at most [`ExecutorConfig::max_concurrency`] calls run at once.
//! - **Ordering**: results come in submission order; started/progress/finished events come as
//!   they happen.
//! - **Exactly one result per call**: unknown tool, invalid input, tool error, panic, timeout,
//!   cancellation, discard and hook denial all answer with an `is_error` result whose message the
//!   model can read. A [`ToolError::Fatal`] ends the turn ([`TurnError::Fatal`]).
//! - **Cancellation tree**: run → turn → call. Cancelling a turn cancels its
//!   running calls and its queued calls never start. A failing call of a tool with
//!   `cancels_siblings_on_error` cancels its running siblings *and* the calls queued or
//!   submitted after it in the same turn (they were planned assuming it succeeded; this is
//!   Claude Code's shell-tool behaviour), but not the turn. After a cancellation or timeout, a
//!   tool gets [`ExecutorConfig::cleanup_grace`] to stop; past it, the result is produced anyway
//!   and the tool's future is detached onto the runtime and reported.
//! - **Result budgets**: see [`budget`].
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! use ferroloop::exec::{FnTool, ToolExecutor, ToolOutput, ToolRegistry, ToolUse};
//! use serde_json::json;
//!
//! let mut tools = ToolRegistry::new();
//! tools
//!     .register(
//!         FnTool::new("read", |input, _ctx| async move {
//!             Ok(ToolOutput::text(format!("read {}", input["path"])))
//!         })
//!         .concurrency_safe(true),
//!     )
//!     .unwrap();
//! let executor = ToolExecutor::new(tools);
//! let results = executor
//!     .run(vec![
//!         ToolUse::new("t1", "read", json!({"path": "a"})),
//!         ToolUse::new("t2", "nope", json!({})),
//!     ])
//!     .await
//!     .unwrap();
//! assert_eq!(results[0].content, "read \"a\"".into());
//! assert!(results[1].is_error);
//! # });
//! ```

pub mod admission;
mod answer;
pub mod budget;
mod call;
pub use call::panic_message;
pub mod cancel;
mod context;
mod events;
mod executor;
mod external;
pub mod hooks;
mod metrics;
pub mod schema;
mod spill_file;
mod task;
mod tool;
mod turn;
mod types;

pub use answer::{AnswerReceiver, AnswerSender, Unanswered};
pub use budget::{BudgetConfig, Replacement, ReplacementRecord, ResultBudget};
pub use cancel::{CancellationToken, SiblingFailure, StopReason};
pub use context::{HostData, ProgressSender, ToolContext};
pub use events::{CallStatus, TurnEvent};
pub use executor::{
    DEFAULT_CLEANUP_GRACE, DEFAULT_MAX_CONCURRENCY, ExecutorBuilder, ExecutorConfig,
    ExecutorConfigError, ToolExecutor, TurnError,
};
pub use hooks::{AfterCall, BeforeCall, HookCall, Permission, ToolHooks};
pub use metrics::ExecutorMetrics;
pub use schema::{InputSchema, SchemaError, Violation};
pub(crate) use tool::decide_concurrency_safe;
pub use tool::{
    FnTool, RegistryError, ResultLimit, Tool, ToolError, ToolFuture, ToolOutput, ToolRegistry,
};
pub use turn::{SpawnedTurn, TextNeeded, Turn, TurnClosed, TurnHandle};
pub use types::{ToolResult, ToolResultContent, ToolUse};
