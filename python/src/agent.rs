//! `Agent` and its runs: the core's agent loop (`ferroloop::agent`) over a Python `Client`, with
//! tools from a Python `ToolExecutor` and/or the native built-in tools (`ferroloop::tools`).
//!
//! The loop runs as a task on the tokio runtime; Python tools run on the caller's event loop
//! (async) or worker threads (plain), through the executor's bridge. The event loop receives
//! batches of finished events. The Python package (`ferroloop/_agent.py`) adds async iteration.

use std::path::PathBuf;
use std::sync::Arc;

use futures_util::FutureExt;

use ferroloop::agent::{Agent, AgentConfig, AgentEvent, AgentRun, Model};
use ferroloop::exec::{CancellationToken, ExecutorConfig, Tool, ToolExecutor, ToolRegistry};
use ferroloop::tokens::UnknownFamily;
use ferroloop::tools::register_builtins;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::pyclass::{PyTraverseError, PyVisit};
use pyo3::types::PyList;
use serde_json::Value;

use crate::args::count_arg_opt;
use crate::bridge::{LoopBridge, py_to_value};
use crate::client::PyClient;
use crate::errors::shield;
use crate::exec::{CallerContext, Lease, PyExecutor};
use crate::runtime::runtime;

/// Events handed to Python per await, at most.
const BATCH_MAX: usize = 512;

/// The native half of `ferroloop.Agent`.
#[pyclass(module = "ferroloop._native", name = "_Agent", frozen)]
pub(crate) struct PyAgent {
    agent: Agent,
    /// The Python executor whose tools the agent calls (bound to the running loop per run).
    executor: Option<Py<PyExecutor>>,
    tool_names: Vec<String>,
    /// The process that created it (see [`crate::client::refuse_in_forked_child`]).
    pid: u32,
}

#[pymethods]
impl PyAgent {
    /// Reports the executor to the garbage collector (a tool referring back to the object that
    /// owns the agent makes a cycle through it).
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.executor)
    }

    #[new]
    #[pyo3(signature = (client, *, model, system = None, executor = None, builtin_tools = None, workspace = None, max_turns = None, max_tokens = None, token_budget = None, max_continuations = None, escalated_max_tokens = None, prompt_caching = None, extra = None, keep_recent_tool_results = None, tokenizer = None, fallback_model = None, fallback_after_529_retries = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        client: &Bound<'_, PyClient>,
        model: String,
        system: Option<String>,
        executor: Option<Py<PyExecutor>>,
        builtin_tools: Option<Vec<String>>,
        workspace: Option<PathBuf>,
        max_turns: Option<&Bound<'_, PyAny>>,
        max_tokens: Option<&Bound<'_, PyAny>>,
        token_budget: Option<&Bound<'_, PyAny>>,
        max_continuations: Option<&Bound<'_, PyAny>>,
        escalated_max_tokens: Option<&Bound<'_, PyAny>>,
        prompt_caching: Option<bool>,
        extra: Option<&Bound<'_, PyAny>>,
        keep_recent_tool_results: Option<&Bound<'_, PyAny>>,
        tokenizer: Option<&str>,
        fallback_model: Option<String>,
        fallback_after_529_retries: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        shield(py, "Agent.__init__", || {
            let max_turns: Option<u32> = count_arg_opt("max_turns", max_turns)?;
            let max_tokens: Option<u64> = count_arg_opt("max_tokens", max_tokens)?;
            let token_budget: Option<u64> = count_arg_opt("token_budget", token_budget)?;
            let max_continuations: Option<u32> =
                count_arg_opt("max_continuations", max_continuations)?;
            let escalated_max_tokens: Option<u64> =
                count_arg_opt("escalated_max_tokens", escalated_max_tokens)?;
            let keep_recent_tool_results: Option<usize> =
                count_arg_opt("keep_recent_tool_results", keep_recent_tool_results)?;
            let fallback_after_529_retries: Option<u32> =
                count_arg_opt("fallback_after_529_retries", fallback_after_529_retries)?;
            let model_client = client.get().client(py)?;
            let mut registry = ToolRegistry::new();
            let mut executor_config = ExecutorConfig::default();
            if let Some(executor) = &executor {
                let executor = executor.borrow(py);
                executor_config = executor.config.clone();
                for tool in &executor.tools {
                    registry
                        .register_arc(Arc::clone(tool) as Arc<dyn Tool>)
                        .map_err(|err| PyValueError::new_err(err.to_string()))?;
                }
            }
            let builtin_tools = builtin_tools.unwrap_or_default();
            register_builtins(
                &mut registry,
                &builtin_tools,
                workspace.as_deref(),
                &executor_config.budget.spill_dir,
            )
            .map_err(|err| PyValueError::new_err(err.to_string()))?;
            let tool_names = registry.names().into_iter().map(str::to_owned).collect();
            let mut config = AgentConfig::new(model);
            config.system = system;
            if let Some(turns) = max_turns {
                config.limits.max_turns = turns;
            }
            if let Some(tokens) = max_tokens {
                config.limits.max_tokens = tokens;
            }
            config.limits.token_budget = token_budget;
            if let Some(continuations) = max_continuations {
                config.max_continuations = continuations;
            }
            // 0 raises nothing: the core's `None`, said the one way each binding can.
            if let Some(tokens) = escalated_max_tokens {
                config.escalated_max_tokens = (tokens > 0).then_some(tokens);
            }
            // None is the default (on), as Node's `promptCaching: null`.
            config.prompt_caching = prompt_caching.unwrap_or(true);
            if let Some(keep) = keep_recent_tool_results {
                config.keep_recent_tool_results = keep;
            }
            config.fallback_model = fallback_model;
            if let Some(retries) = fallback_after_529_retries {
                config.fallback_after_529_retries = retries;
            }
            if let Some(name) = tokenizer {
                config.family = name
                    .parse()
                    .map_err(|err: UnknownFamily| PyValueError::new_err(err.to_string()))?;
            }
            if let Some(extra) = extra {
                match py_to_value(extra).map_err(PyValueError::new_err)? {
                    Value::Object(fields) => config.extra = fields,
                    _ => return Err(PyValueError::new_err("extra must be a dict")),
                }
            }
            // Refused when the agent is made (as in Node and C) rather than by every run.
            config.check().map_err(|err| {
                PyValueError::new_err(format!("invalid agent configuration: {err}"))
            })?;
            let tools = ToolExecutor::builder(registry)
                .config(executor_config)
                .build();
            let agent = Agent::new(config, model_client as Arc<dyn Model>, Arc::new(tools));
            // Tool names the providers refuse, a `tool_choice` naming no tool: every run would
            // stop on them before its first request.
            agent.check_tools().map_err(|err| {
                PyValueError::new_err(format!("invalid agent configuration: {err}"))
            })?;
            Ok(Self {
                agent,
                executor,
                tool_names,
                pid: crate::runtime::process_id(),
            })
        })
    }

    /// The tools offered to the model, by name.
    #[getter]
    fn tool_names(&self) -> Vec<String> {
        self.tool_names.clone()
    }

    /// The tool definitions sent to the model (sorted by name).
    fn tool_definitions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        shield(py, "Agent.tool_definitions", || {
            Ok(pythonize::pythonize(py, &self.agent.tool_definitions())?)
        })
    }

    /// Starts a run for `prompt` (a `str` or a list of content blocks), or continuing
    /// `messages` (a conversation ending with a user message), or continuing `messages` with
    /// `prompt` as the next user message when both are given.
    #[pyo3(signature = (prompt = None, *, messages = None))]
    fn run(
        &self,
        py: Python<'_>,
        prompt: Option<&Bound<'_, PyAny>>,
        messages: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyAgentRun> {
        shield(py, "Agent.run", || {
            crate::client::refuse_in_forked_child(py, self.pid, "Agent")?;
            let bridge = match &self.executor {
                Some(executor) => executor.borrow(py).bind_running_loop(py)?,
                None => LoopBridge::for_running_loop(py)?,
            };
            let run = {
                let _entered = runtime()?.enter();
                // The tools run in copies of the caller's context (captured once per run).
                let context = CallerContext::for_run(py)?;
                match (prompt, messages) {
                    (Some(prompt), None) => {
                        let prompt = py_to_value(prompt).map_err(PyValueError::new_err)?;
                        self.agent.run_messages_with_host_data(
                            vec![serde_json::json!({"role": "user", "content": prompt})],
                            context,
                        )
                    }
                    (prompt, Some(messages)) => match py_to_value(messages) {
                        Ok(Value::Array(mut messages)) => {
                            // A prompt as well continues the conversation with it (as Node's
                            // `run(prompt, { messages })`).
                            if let Some(prompt) = prompt {
                                let prompt = py_to_value(prompt).map_err(PyValueError::new_err)?;
                                messages
                                    .push(serde_json::json!({"role": "user", "content": prompt}));
                            }
                            self.agent.run_messages_with_host_data(messages, context)
                        }
                        // A list holding a value JSON has no form for: that is what is wrong.
                        Err(err) => return Err(PyValueError::new_err(err)),
                        Ok(_) => return Err(PyValueError::new_err("messages must be a list")),
                    },
                    (None, None) => {
                        return Err(PyValueError::new_err("give a prompt, messages, or both"));
                    }
                }
            };
            Ok(PyAgentRun {
                _lease: self
                    .executor
                    .as_ref()
                    .map(|executor| executor.borrow(py).lease()),
                cancel: run.cancellation_token().clone(),
                run: Arc::new(tokio::sync::Mutex::new(Some(run))),
                bridge,
            })
        })
    }
}

/// The native half of `ferroloop.AgentRun`.
#[pyclass(module = "ferroloop._native", name = "_AgentRun", frozen)]
pub(crate) struct PyAgentRun {
    /// Keeps the executor from reporting its tools to the collector while the run lives.
    _lease: Option<Lease>,
    run: Arc<tokio::sync::Mutex<Option<AgentRun>>>,
    cancel: CancellationToken,
    bridge: Arc<LoopBridge>,
}

#[pymethods]
impl PyAgentRun {
    /// An awaitable of the next events (a non-empty list of dicts), or `None` after the last
    /// one (the `stop` event).
    fn next_batch<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        shield(py, "AgentRun.next_batch", || {
            let run = Arc::clone(&self.run);
            crate::bridge::into_awaitable(
                py,
                &self.bridge,
                async move {
                    let mut guard = run.lock().await;
                    let Some(run) = guard.as_mut() else {
                        return Ok(Vec::new());
                    };
                    let mut batch = Vec::new();
                    let Some(first) = futures_util::StreamExt::next(run).await else {
                        return Ok(batch);
                    };
                    batch.push(first);
                    while batch.len() < BATCH_MAX {
                        match futures_util::StreamExt::next(run).now_or_never() {
                            Some(Some(event)) => batch.push(event),
                            _ => break,
                        }
                    }
                    Ok(batch)
                },
                |py, batch| {
                    if batch.is_empty() {
                        return Ok(py.None());
                    }
                    let list = PyList::empty(py);
                    for event in &batch {
                        list.append(event_to_py(py, event)?)?;
                    }
                    Ok(list.into_any().unbind())
                },
            )
        })
    }

    /// Cancels the run: running tools are cancelled, and the run still ends with a `stop`
    /// event (reason `aborted`) carrying a history valid for the API.
    fn cancel(&self, py: Python<'_>) -> PyResult<()> {
        shield(py, "AgentRun.cancel", || {
            self.cancel.cancel();
            Ok(())
        })
    }

    /// Cancels the run and drops it (no more events). Idempotent.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        shield(py, "AgentRun.close", || {
            self.cancel.cancel();
            // Dropped now unless a `next_batch` holds it (it was just cancelled, so it ends).
            if let Ok(mut guard) = self.run.try_lock() {
                let run = guard.take();
                py.detach(|| drop(run));
            }
            Ok(())
        })
    }
}

/// An agent event as a dict with a `"type"` (the core's serialisation), durations converted from
/// milliseconds to seconds (the Python convention).
fn event_to_py(py: Python<'_>, event: &AgentEvent) -> PyResult<Py<PyAny>> {
    let mut value =
        serde_json::to_value(event).map_err(|err| PyValueError::new_err(err.to_string()))?;
    if let Some(fields) = value.as_object_mut() {
        for key in ["duration", "wait", "time_to_first_token", "retry_after"] {
            if let Some(slot) = fields.get_mut(key)
                && let Some(ms) = slot.as_f64()
            {
                *slot = Value::from(ms / 1e3);
            }
        }
    }
    Ok(pythonize::pythonize(py, &value)?.unbind())
}

/// Adds the agent classes to the module.
pub(crate) fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<PyAgent>()?;
    module.add_class::<PyAgentRun>()?;
    Ok(())
}
