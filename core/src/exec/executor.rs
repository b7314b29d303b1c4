//! The executor: tools, settings, hooks, counters and the budget record shared by its turns.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::budget::{BudgetConfig, ReplacementRecord, ResultBudget};
use super::cancel::CancellationToken;
use super::context::HostData;
use super::hooks::ToolHooks;
use super::metrics::{Counters, ExecutorMetrics};
use super::tool::ToolRegistry;
use super::turn::Turn;
use super::types::{ToolResult, ToolUse};

/// The default cap on running calls.
pub const DEFAULT_MAX_CONCURRENCY: usize = 10;
/// The default cleanup grace after a cancellation or timeout.
pub const DEFAULT_CLEANUP_GRACE: Duration = Duration::from_secs(5);

/// Executor settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutorConfig {
    /// At most this many calls of one run or turn run at once (default 10). Each run and each
    /// turn admits its own calls: two runs of one executor at the same time are two turns,
    /// neither waiting for the other's calls (nor for an unsafe one's barrier). Zero is refused
    /// by [`check`](Self::check); an executor built without the check runs one call at a time
    /// with it, as with 1.
    pub max_concurrency: usize,
    /// The timeout of tools that declare none (default: none). Zero is refused by
    /// [`check`](Self::check).
    pub default_timeout: Option<Duration>,
    /// How long a cancelled or timed-out tool may take to stop before its result is produced
    /// anyway and the tool is detached (default 5 s).
    pub cleanup_grace: Duration,
    /// Run each call on a tokio task of its own (true parallelism for CPU-heavy Rust tools on a
    /// multi-thread runtime) instead of polling all calls on the task driving the turn (the
    /// default: cheaper; host-language tools run on the host's own threads or loop anyway).
    pub spawn_calls: bool,
    /// Result budgets.
    pub budget: BudgetConfig,
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        Self {
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
            default_timeout: None,
            cleanup_grace: DEFAULT_CLEANUP_GRACE,
            spawn_calls: false,
            budget: BudgetConfig::default(),
        }
    }
}

impl ExecutorConfig {
    /// Checks the settings whose value has no useful meaning: a zero `max_concurrency` (no call
    /// could ever start), a zero `default_timeout` (every call of a tool without a timeout of
    /// its own would time out at once, where 0 most likely meant "none") and an empty
    /// `budget.spill_dir` (no directory at all, where an unset option most likely meant the
    /// default). The first one found is reported, in that order. Every binding's executor runs
    /// this check when it is made (naming its own option); a [`ToolExecutor`] built in Rust
    /// takes any configuration.
    pub fn check(&self) -> Result<(), ExecutorConfigError> {
        if self.max_concurrency == 0 {
            return Err(ExecutorConfigError::ZeroMaxConcurrency);
        }
        if self
            .default_timeout
            .is_some_and(|timeout| timeout.is_zero())
        {
            return Err(ExecutorConfigError::ZeroDefaultTimeout);
        }
        if self.budget.spill_dir.as_os_str().is_empty() {
            return Err(ExecutorConfigError::EmptySpillDir);
        }
        Ok(())
    }
}

/// A setting of an [`ExecutorConfig`] that [`ExecutorConfig::check`] refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExecutorConfigError {
    /// `default_timeout` is zero (leave it `None` for no timeout).
    #[error(
        "default_timeout is 0: every call of a tool without a timeout of its own would time out \
         at once; give a positive one, or none"
    )]
    ZeroDefaultTimeout,
    /// `max_concurrency` is zero (an executor built without the check runs it as 1).
    #[error("max_concurrency is 0: at most 0 calls at once would run none; give at least 1")]
    ZeroMaxConcurrency,
    /// `budget.spill_dir` is the empty path.
    #[error(
        "spill_dir is empty: there is no directory to write spill files to; give one (\".\" for \
         the current directory), or keep the default"
    )]
    EmptySpillDir,
}

/// A turn that ended with a fatal tool error (every call still has its result).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TurnError {
    /// A tool returned [`ToolError::Fatal`](super::ToolError::Fatal).
    #[error("tool '{tool}' ({tool_use_id}) failed fatally: {message}")]
    Fatal {
        /// The tool.
        tool: String,
        /// The failing call.
        tool_use_id: String,
        /// The tool's message.
        message: String,
        /// One result per submitted call, in submission order.
        results: Vec<ToolResult>,
    },
    /// The task driving a spawned turn ended abnormally (a bug in ferroloop).
    #[error("internal error in the tool executor: {0}")]
    Internal(String),
}

/// The state shared by an executor's clones and turns.
pub(crate) struct ExecutorInner {
    pub(crate) registry: ToolRegistry,
    pub(crate) config: ExecutorConfig,
    pub(crate) hooks: Option<Arc<dyn ToolHooks>>,
    pub(crate) budget: ResultBudget,
    record: Mutex<ReplacementRecord>,
    pub(crate) counters: Counters,
    pub(crate) run_token: CancellationToken,
}

impl std::fmt::Debug for ExecutorInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecutorInner")
            .field("registry", &self.registry)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ExecutorInner {
    /// Locks the replacement record (each critical section leaves it consistent, so a poisoned
    /// lock is used as is).
    pub(crate) fn record(&self) -> MutexGuard<'_, ReplacementRecord> {
        self.record.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Runs tool calls: safe calls in parallel, exclusive calls alone, results in request order.
/// Clones share everything (tools, counters, budget record, run token).
#[derive(Clone)]
pub struct ToolExecutor {
    inner: Arc<ExecutorInner>,
}

impl std::fmt::Debug for ToolExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolExecutor")
            .field("registry", &self.inner.registry)
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

/// Builds a [`ToolExecutor`].
pub struct ExecutorBuilder {
    registry: ToolRegistry,
    config: ExecutorConfig,
    hooks: Option<Arc<dyn ToolHooks>>,
    record: ReplacementRecord,
    run_token: CancellationToken,
}

impl std::fmt::Debug for ExecutorBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecutorBuilder")
            .field("registry", &self.registry)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ExecutorBuilder {
    /// Sets the settings.
    pub fn config(mut self, config: ExecutorConfig) -> Self {
        self.config = config;
        self
    }

    /// Sets the hooks.
    pub fn hooks(mut self, hooks: Arc<dyn ToolHooks>) -> Self {
        self.hooks = Some(hooks);
        self
    }

    /// Starts from a saved budget record (session resume).
    pub fn record(mut self, record: ReplacementRecord) -> Self {
        self.record = record;
        self
    }

    /// Makes the executor's turns children of this run token (the root of the cancellation tree).
    pub fn run_token(mut self, token: CancellationToken) -> Self {
        self.run_token = token;
        self
    }

    /// Builds the executor.
    pub fn build(self) -> ToolExecutor {
        ToolExecutor {
            inner: Arc::new(ExecutorInner {
                budget: ResultBudget::new(self.config.budget.clone()),
                registry: self.registry,
                config: self.config,
                hooks: self.hooks,
                record: Mutex::new(self.record),
                counters: Counters::default(),
                run_token: self.run_token,
            }),
        }
    }
}

impl ToolExecutor {
    /// An executor over these tools with the default settings.
    pub fn new(registry: ToolRegistry) -> Self {
        Self::builder(registry).build()
    }

    /// A builder for an executor over these tools.
    pub fn builder(registry: ToolRegistry) -> ExecutorBuilder {
        ExecutorBuilder {
            registry,
            config: ExecutorConfig::default(),
            hooks: None,
            record: ReplacementRecord::default(),
            run_token: CancellationToken::new(),
        }
    }

    /// Runs a batch of calls and returns one result per call, in request order; the turn's
    /// aggregate budget is applied. Dropping the future drops (and so cancels) the running
    /// tools. A fatal tool error ends the turn with [`TurnError::Fatal`], which carries the
    /// results.
    pub async fn run(&self, tool_uses: Vec<ToolUse>) -> Result<Vec<ToolResult>, TurnError> {
        self.run_with(tool_uses, Vec::new(), None, None).await
    }

    /// [`run`](Self::run), with `host` attached: each call's
    /// [`ToolContext::host_data`](super::ToolContext::host_data) returns it.
    pub async fn run_with_host_data(
        &self,
        tool_uses: Vec<ToolUse>,
        host: HostData,
    ) -> Result<Vec<ToolResult>, TurnError> {
        self.run_with(tool_uses, Vec::new(), Some(host), None).await
    }

    /// [`run_with_host_data`](Self::run_with_host_data) with the calls the host refused itself,
    /// as `(position in tool_uses, reason)` in ascending order (a binding that could not convert
    /// a call's input): each keeps its place and gets its one result, never run, as
    /// [`TurnHandle::submit_vec_checked`](super::TurnHandle::submit_vec_checked) answers them.
    pub async fn run_checked_with_host_data(
        &self,
        tool_uses: Vec<ToolUse>,
        refused: Vec<(usize, String)>,
        host: HostData,
    ) -> Result<Vec<ToolResult>, TurnError> {
        self.run_with(tool_uses, refused, Some(host), None).await
    }

    /// [`run_checked_with_host_data`](Self::run_checked_with_host_data), stopped by `cancel`
    /// rather than by dropping the future: once `cancel` fires, running calls are cancelled and
    /// queued ones never start, and the future still resolves, with every call's result (an
    /// `is_error` one for each call cancelled), once the tools have stopped — each within the
    /// cleanup grace, past which it is detached. For a host that waits for cancelled work to
    /// stop before it goes on (Python's cancelled task raises only then).
    pub async fn run_checked_with_host_data_until(
        &self,
        tool_uses: Vec<ToolUse>,
        refused: Vec<(usize, String)>,
        host: HostData,
        cancel: CancellationToken,
    ) -> Result<Vec<ToolResult>, TurnError> {
        self.run_with(tool_uses, refused, Some(host), Some(cancel))
            .await
    }

    /// One batch as a sealed turn; `cancel`, when given, cancels its calls and the turn still
    /// answers every one of them.
    async fn run_with(
        &self,
        tool_uses: Vec<ToolUse>,
        refused: Vec<(usize, String)>,
        host: Option<HostData>,
        cancel: Option<CancellationToken>,
    ) -> Result<Vec<ToolResult>, TurnError> {
        let mut turn = Turn::new(self.inner.clone(), false, host);
        turn.accept_batch(tool_uses, refused);
        let Some(cancel) = cancel else {
            return turn.finish().await;
        };
        let handle = turn.handle();
        let finish = turn.finish();
        tokio::pin!(finish);
        tokio::select! {
            biased;
            results = &mut finish => results,
            () = cancel.cancelled() => {
                handle.cancel();
                finish.await
            }
        }
    }

    /// Starts a streaming turn: [`Turn::submit`] calls as the model's stream seals them, then
    /// [`Turn::seal`]; poll [`Turn::next_event`] (or [`Turn::spawn`] it) to drive it.
    pub fn turn(&self) -> Turn {
        Turn::new(self.inner.clone(), true, None)
    }

    /// [`turn`](Self::turn), with `host` attached: each call's
    /// [`ToolContext::host_data`](super::ToolContext::host_data) returns it.
    pub fn turn_with_host_data(&self, host: HostData) -> Turn {
        Turn::new(self.inner.clone(), true, Some(host))
    }

    #[cfg(test)]
    pub(crate) fn inner(&self) -> &Arc<ExecutorInner> {
        &self.inner
    }

    /// The run token: cancelling it cancels every turn of this executor.
    pub fn run_token(&self) -> &CancellationToken {
        &self.inner.run_token
    }

    /// The tools.
    pub fn registry(&self) -> &ToolRegistry {
        &self.inner.registry
    }

    /// The settings.
    pub fn config(&self) -> &ExecutorConfig {
        &self.inner.config
    }

    /// A snapshot of the counters.
    pub fn metrics(&self) -> ExecutorMetrics {
        self.inner.counters.snapshot()
    }

    /// A copy of the budget record (serialise it to resume the session later).
    pub fn replacement_record(&self) -> ReplacementRecord {
        self.inner.record().clone()
    }

    /// Puts the recorded replacements back into `results` (history rebuilt from the original
    /// results), byte for byte. Returns how many were replaced.
    pub fn reapply_replacements(&self, results: &mut [ToolResult]) -> usize {
        self.inner.record().reapply(results)
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn check_refuses_a_zero_default_timeout_only() {
        let zero = ExecutorConfig {
            default_timeout: Some(Duration::ZERO),
            ..ExecutorConfig::default()
        };
        assert_eq!(zero.check(), Err(ExecutorConfigError::ZeroDefaultTimeout));
        assert!(
            zero.check()
                .is_err_and(|err| err.to_string().starts_with("default_timeout is 0"))
        );
        for fine in [None, Some(Duration::from_nanos(1)), Some(Duration::MAX)] {
            let config = ExecutorConfig {
                default_timeout: fine,
                ..ExecutorConfig::default()
            };
            assert_eq!(config.check(), Ok(()), "{fine:?}");
        }
        // Zero in the other durations and limits means something (no wait, spill everything).
        let edges = ExecutorConfig {
            cleanup_grace: Duration::ZERO,
            budget: BudgetConfig {
                default_max_result_chars: 0,
                turn_budget_chars: Some(0),
                preview_bytes: 0,
                ..BudgetConfig::default()
            },
            ..ExecutorConfig::default()
        };
        assert_eq!(edges.check(), Ok(()));
    }

    #[test]
    fn check_refuses_a_zero_max_concurrency() {
        let zero = ExecutorConfig {
            max_concurrency: 0,
            ..ExecutorConfig::default()
        };
        assert_eq!(zero.check(), Err(ExecutorConfigError::ZeroMaxConcurrency));
        assert!(
            zero.check()
                .is_err_and(|err| err.to_string().starts_with("max_concurrency is 0"))
        );
        for fine in [1, DEFAULT_MAX_CONCURRENCY, usize::MAX] {
            let config = ExecutorConfig {
                max_concurrency: fine,
                ..ExecutorConfig::default()
            };
            assert_eq!(config.check(), Ok(()), "{fine}");
        }
    }

    #[test]
    fn check_refuses_an_empty_spill_dir() {
        let empty = ExecutorConfig {
            budget: BudgetConfig {
                spill_dir: PathBuf::new(),
                ..BudgetConfig::default()
            },
            ..ExecutorConfig::default()
        };
        assert_eq!(empty.check(), Err(ExecutorConfigError::EmptySpillDir));
        assert!(
            empty
                .check()
                .is_err_and(|err| err.to_string().starts_with("spill_dir is empty"))
        );
        // A relative directory is a directory (the current one for "."), not a mistake.
        for fine in [".", "results", "/tmp/spill"] {
            let config = ExecutorConfig {
                budget: BudgetConfig {
                    spill_dir: PathBuf::from(fine),
                    ..BudgetConfig::default()
                },
                ..ExecutorConfig::default()
            };
            assert_eq!(config.check(), Ok(()), "{fine}");
        }
    }

    #[test]
    fn check_reports_the_first_setting_it_refuses() {
        let config = ExecutorConfig {
            max_concurrency: 0,
            default_timeout: Some(Duration::ZERO),
            budget: BudgetConfig {
                spill_dir: PathBuf::new(),
                ..BudgetConfig::default()
            },
            ..ExecutorConfig::default()
        };
        assert_eq!(config.check(), Err(ExecutorConfigError::ZeroMaxConcurrency));
    }
}
