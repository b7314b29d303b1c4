//! `ToolExecutor` and `Turn`: the concurrent tool executor (`ferroloop::exec`) running Python
//! tools. Async tools run as tasks on the caller's event loop, plain functions on worker threads;
//! the Python package (`ferroloop/_executor.py`) adds the decorator and async iteration.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use ferroloop::exec::budget::DEFAULT_TURN_BUDGET_CHARS;
use ferroloop::exec::{
    CancellationToken, ExecutorConfig, ExecutorConfigError, HostData, ProgressSender,
    RegistryError, ResultLimit, SpawnedTurn, Tool, ToolContext, ToolError, ToolExecutor,
    ToolFuture, ToolOutput, ToolRegistry, ToolResult, ToolResultContent, ToolUse, TurnError,
    TurnEvent, TurnHandle,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pyclass::{PyTraverseError, PyVisit};
use pyo3::types::{PyBool, PyDict, PyFloat, PyList, PyString, PyTuple};
use serde_json::{Value, json};

use crate::args::{float_arg_opt, float_text, int_arg, non_negative, refuse_bool, type_name};
use crate::bridge::{
    BridgeSlot, CallOutcome, ExtraArg, LoopBridge, PyCall, bridge_for_running_loop, call_blocking,
    into_awaitable, into_awaitable_keeping, py_to_value, py_to_value_nan_as_null,
};
use crate::client::{seconds, zero_timeout};
use crate::errors::{ferroloop_error, internal_error, shield};
use crate::runtime::runtime;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether a call may run beside other safe calls.
enum Safety {
    Fixed(bool),
    /// A Python callable taking the input.
    PerInput(Py<PyAny>),
}

/// A Python function registered as a tool.
pub(crate) struct PyTool {
    name: String,
    description: String,
    function: Arc<Py<PyAny>>,
    is_async: bool,
    takes_context: bool,
    safety: Safety,
    timeout: Option<Duration>,
    limit: ResultLimit,
    schema: Value,
    cancels_siblings: bool,
    bridge: Arc<BridgeSlot>,
}

impl Tool for PyTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        self.schema.clone()
    }

    fn is_concurrency_safe(&self, input: &Value) -> bool {
        match &self.safety {
            Safety::Fixed(safe) => *safe,
            Safety::PerInput(decide) => {
                // Exiting: not run (the call then runs alone).
                let Some(_pass) = crate::runtime::python_pass() else {
                    return false;
                };
                Python::attach(|py| {
                    pythonize::pythonize(py, input)
                        .map_err(PyErr::from)
                        .and_then(|input| decide.bind(py).call1((input,)))
                        .and_then(|answer| answer.is_truthy())
                        // A failing predicate means "not safe": the call then runs alone.
                        .unwrap_or(false)
                })
            }
        }
    }

    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    fn max_result_chars(&self) -> ResultLimit {
        self.limit
    }

    fn cancels_siblings_on_error(&self) -> bool {
        self.cancels_siblings
    }

    fn call(&self, input: Value, ctx: ToolContext) -> ToolFuture {
        let function = Arc::clone(&self.function);
        let context = CallerContext::of_call(&ctx);
        let extra: Option<ExtraArg> = self.takes_context.then(|| {
            let context = PyToolContext {
                tool_use_id: ctx.tool_use_id().to_owned(),
                name: self.name.clone(),
                index: ctx.index(),
                progress: ctx.progress_sender(),
                cancel: ctx.cancellation_token().clone(),
            };
            Box::new(move |py: Python<'_>| Ok(Py::new(py, context)?.into_any())) as ExtraArg
        });
        let bridge = lock(&self.bridge).clone();
        let name = self.name.clone();
        // The outcome travels through the call's answer channel: its order against the call's
        // cancellation, read as it is sent, decides the call's outcome, not the moment the
        // executor polls this future.
        let answer = ctx.answer_channel();
        if !self.is_async {
            return Box::pin(async move {
                let outcome =
                    call_blocking(function, vec![input], extra, context, bridge, Some(answer));
                tool_output(&name, outcome.await)
            });
        }
        let token = ctx.cancellation_token().clone();
        Box::pin(async move {
            let Some(bridge) = bridge else {
                return Err(ToolError::failed(
                    "ferroloop: no event loop to run this tool on",
                ));
            };
            let mut call =
                PyCall::start_answering(&bridge, function, vec![input], extra, context, answer);
            // A timeout, a turn cancellation or a sibling's failure cancels the token while the
            // executor waits (its cleanup grace) for the call to end: cancel the Python task so
            // it sees CancelledError and can clean up, then report how it ended.
            let outcome = tokio::select! {
                outcome = &mut call => outcome,
                () = token.cancelled() => {
                    call.cancel_task();
                    (&mut call).await
                }
            };
            tool_output(&name, outcome)
        })
    }
}

/// The `contextvars.Context` of the Python code that started a run or submitted a call: the
/// [`HostData`] the bindings attach to executor runs, turns and agent runs. A tool call runs in a
/// copy of it (each call its own copy), as `asyncio.create_task` and `asyncio.to_thread` run
/// their work in a copy of the current context.
pub(crate) enum CallerContext {
    /// `ToolExecutor.run` and `Agent.run`: the context of that call, for every tool call.
    Run(Arc<Py<PyAny>>),
    /// A streaming turn: the context of each `Turn.submit`, by call index (the turn's
    /// submission order).
    Turn(Mutex<Vec<Arc<Py<PyAny>>>>),
}

/// `contextvars.copy_context`, looked up once.
static COPY_CONTEXT: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();

impl CallerContext {
    /// A copy of the current context (that of the Python code calling into ferroloop).
    pub(crate) fn current(py: Python<'_>) -> PyResult<Arc<Py<PyAny>>> {
        let copy = COPY_CONTEXT.get_or_try_init(py, || {
            py.import(pyo3::intern!(py, "contextvars"))?
                .getattr(pyo3::intern!(py, "copy_context"))
                .map(Bound::unbind)
        })?;
        Ok(Arc::new(copy.bind(py).call0()?.unbind()))
    }

    /// Host data holding the current context, for a run.
    pub(crate) fn for_run(py: Python<'_>) -> PyResult<HostData> {
        Ok(Arc::new(Self::Run(Self::current(py)?)))
    }

    /// The context the call of `ctx` runs in (a copy of it), if its run or turn has one.
    fn of_call(ctx: &ToolContext) -> Option<Arc<Py<PyAny>>> {
        match ctx.host_data()?.downcast_ref::<Self>()? {
            Self::Run(context) => Some(Arc::clone(context)),
            Self::Turn(contexts) => lock(contexts).get(ctx.index()).cloned(),
        }
    }
}

/// A tool's return value as a tool output: a `str` is text, a list is content blocks, a dict
/// with `"content"` (and optional `"is_error"`) is a whole result, a dict with `"type"` is one
/// content block, `None` is empty text, anything else its JSON text.
///
/// A call cancelled by its turn, a timeout or a sibling gets the executor's own message (its
/// cancellation came first); a `Cancelled` outcome here is the tool's task cancelled from
/// elsewhere: the tool raised `CancelledError` itself, or its event loop stopped. Worded as the
/// executor's cancellations are ("Tool 't' was cancelled: ..."), so that the model is told
/// which call it was, as with every other failure.
fn tool_output(name: &str, outcome: CallOutcome) -> Result<ToolOutput, ToolError> {
    match outcome {
        CallOutcome::Returned(value) => Ok(output_of(value)),
        CallOutcome::Raised(message) => Err(ToolError::failed(message)),
        CallOutcome::Cancelled => Err(ToolError::failed(format!(
            "Tool '{name}' was cancelled: its task was cancelled (it raised \
             asyncio.CancelledError, or its event loop stopped)"
        ))),
    }
}

/// Python's `bool()` of the value a JSON value came from.
fn is_truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(flag) => *flag,
        Value::Number(number) => number.as_f64().is_some_and(|n| n != 0.0),
        Value::String(text) => !text.is_empty(),
        Value::Array(items) => !items.is_empty(),
        Value::Object(fields) => !fields.is_empty(),
    }
}

fn output_of(value: Value) -> ToolOutput {
    match value {
        Value::String(text) => ToolOutput::text(text),
        Value::Array(blocks) => ToolOutput::blocks(blocks),
        Value::Null => ToolOutput::text(""),
        Value::Object(mut map) if map.contains_key("content") => {
            // Read as Python reads a condition (`"is_error": 1` is an error), as Node reads
            // any truthy value: only a JSON `true` counted, and a failure reached the model as
            // a success.
            let is_error = map.get("is_error").is_some_and(is_truthy);
            let content = match map.remove("content") {
                Some(Value::String(text)) => ToolResultContent::Text(text),
                Some(Value::Array(blocks)) => ToolResultContent::Blocks(blocks),
                // `{"content": None}` is nothing, as `None` is (Node's `{ content: null }` too).
                Some(Value::Null) | None => ToolResultContent::Text(String::new()),
                Some(other) => ToolResultContent::Text(other.to_string()),
            };
            ToolOutput { content, is_error }
        }
        Value::Object(map) if map.contains_key("type") => {
            ToolOutput::blocks(vec![Value::Object(map)])
        }
        other => ToolOutput::text(other.to_string()),
    }
}

/// What a tool function receives as its second argument.
#[pyclass(module = "ferroloop._native", name = "ToolContext", frozen)]
struct PyToolContext {
    tool_use_id: String,
    /// The name the call was made under (one function may be registered under several).
    name: String,
    index: usize,
    progress: ProgressSender,
    cancel: CancellationToken,
}

#[pymethods]
impl PyToolContext {
    /// The id of the `tool_use` being answered.
    #[getter]
    fn tool_use_id(&self) -> &str {
        &self.tool_use_id
    }

    /// The tool's name, as the model called it.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The call's position in its turn (from 0).
    #[getter]
    fn index(&self) -> usize {
        self.index
    }

    /// Whether the call was cancelled (timeout, turn cancellation, a sibling's failure). Plain
    /// functions cannot be interrupted: long ones should check it.
    #[getter]
    fn cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Reports progress (any JSON-like value); delivered to the turn's events at once (a
    /// turn's `progress` event, an agent run's `tool_progress`). `nan` and `±inf` are sent as
    /// `null`; a value with no JSON form (another object, nesting past the limit) raises
    /// `ValueError`.
    fn progress(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        shield(py, "ToolContext.progress", || {
            let data = py_to_value_nan_as_null(data).map_err(PyValueError::new_err)?;
            // Released while taking the turn's lock: the thread driving a spawned turn may hold
            // that lock while it waits for the interpreter (a tool's per-input safety check).
            py.detach(|| self.progress.send(data));
            Ok(())
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "ToolContext(tool_use_id={:?}, name={:?}, index={})",
            self.tool_use_id, self.name, self.index
        )
    }
}

/// The native half of `ferroloop.ToolExecutor`.
///
/// It takes part in Python's garbage collection: a tool is often a bound method of the object
/// that owns the executor (or a closure over the executor), a cycle through the tool functions
/// that only the collector can break. The functions are reported only while no run, turn or
/// agent run uses them ([`Lease`]): those hold them where the collector cannot see, so it
/// must not take them for garbage.
#[pyclass(module = "ferroloop._native", name = "_Executor")]
pub(crate) struct PyExecutor {
    pub(crate) tools: Vec<Arc<PyTool>>,
    pub(crate) config: ExecutorConfig,
    /// Built on first use after the last registration (the core's registry is immutable).
    built: Mutex<Option<ToolExecutor>>,
    bridge: Arc<BridgeSlot>,
    /// One clone per run, turn and agent run in progress (see [`PyExecutor::lease`]).
    lease: Lease,
}

/// Held by whatever uses an executor's tools outside the executor object (a run's future, a
/// turn, an agent run): while any clone lives, the executor does not report its tools to the
/// garbage collector.
#[derive(Clone, Default)]
pub(crate) struct Lease(Arc<()>);

impl Lease {
    fn in_use(&self) -> bool {
        Arc::strong_count(&self.0) > 1
    }
}

impl PyExecutor {
    fn executor(&self) -> PyResult<ToolExecutor> {
        let mut built = lock(&self.built);
        if let Some(executor) = built.as_ref() {
            return Ok(executor.clone());
        }
        let mut registry = ToolRegistry::new();
        for tool in &self.tools {
            registry
                .register_arc(Arc::clone(tool) as Arc<dyn Tool>)
                .map_err(|err| PyValueError::new_err(err.to_string()))?;
        }
        let executor = ToolExecutor::builder(registry)
            .config(self.config.clone())
            .build();
        *built = Some(executor.clone());
        Ok(executor)
    }

    /// Points the tools at the event loop running in this thread.
    pub(crate) fn bind_running_loop(&self, py: Python<'_>) -> PyResult<Arc<LoopBridge>> {
        bridge_for_running_loop(py, &self.bridge)
    }

    /// A lease for a run, turn or agent run about to use the tools.
    pub(crate) fn lease(&self) -> Lease {
        self.lease.clone()
    }
}

#[pymethods]
impl PyExecutor {
    /// Reports the tool functions and safety predicates to the garbage collector, unless a
    /// run, turn or agent run holds them too (see [`Lease`]) or a call is using a function.
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        if self.lease.in_use() {
            return Ok(());
        }
        for tool in &self.tools {
            if Arc::strong_count(&tool.function) == 1 {
                visit.call(tool.function.as_ref())?;
            }
            if let Safety::PerInput(decide) = &tool.safety {
                visit.call(decide)?;
            }
        }
        Ok(())
    }

    /// Drops the tools (the collector breaks a cycle through them). A run still in progress
    /// keeps its own handle on them.
    fn __clear__(&mut self) {
        self.tools.clear();
        *lock(&self.built) = None;
    }

    #[new]
    #[pyo3(signature = (max_concurrency = 10, *, max_result_chars = None, spill_dir = None, default_timeout = None, cleanup_grace = None, turn_budget_chars))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        #[pyo3(from_py_with = max_concurrency_arg)] max_concurrency: i128,
        max_result_chars: Option<&Bound<'_, PyAny>>,
        spill_dir: Option<std::path::PathBuf>,
        default_timeout: Option<&Bound<'_, PyAny>>,
        cleanup_grace: Option<&Bound<'_, PyAny>>,
        turn_budget_chars: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        shield(py, "ToolExecutor.__init__", || {
            let default_timeout = float_arg_opt("default_timeout", default_timeout)?;
            let cleanup_grace = float_arg_opt("cleanup_grace", cleanup_grace)?;
            let max_concurrency: usize = non_negative("max_concurrency", max_concurrency)?;
            let max_result_chars = max_result_chars
                .map(|limit| result_limit("max_result_chars", limit))
                .transpose()?;
            // `None` or `math.inf`: no turn budget (Node's `Infinity`).
            let turn_budget_chars = match turn_budget_chars {
                Some(limit) => result_limit("turn_budget_chars", limit)?,
                None => None,
            };
            // Zero concurrency, a zero timeout and an empty `spill_dir` are the core's to
            // refuse (below).
            let mut config = ExecutorConfig {
                max_concurrency,
                default_timeout: default_timeout
                    .map(|value| seconds("default_timeout", value))
                    .transpose()?,
                ..ExecutorConfig::default()
            };
            if let Some(grace) = cleanup_grace {
                config.cleanup_grace = seconds("cleanup_grace", grace)?;
            }
            if let Some(limit) = max_result_chars {
                // `math.inf`: no default limit (as Node's `defaultMaxResultChars: Infinity`).
                config.budget.default_max_result_chars = limit.unwrap_or(usize::MAX);
            }
            if let Some(dir) = spill_dir {
                config.budget.spill_dir = dir;
            }
            config.budget.turn_budget_chars = turn_budget_chars;
            config.check().map_err(|err| match err {
                ExecutorConfigError::ZeroMaxConcurrency => {
                    PyValueError::new_err("max_concurrency must be at least 1")
                }
                ExecutorConfigError::ZeroDefaultTimeout => {
                    zero_timeout("default_timeout", default_timeout.unwrap_or_default())
                }
                ExecutorConfigError::EmptySpillDir => PyValueError::new_err(
                    "spill_dir must not be empty (leave it unset for the default)",
                ),
                other => PyValueError::new_err(format!("invalid executor configuration: {other}")),
            })?;
            Ok(Self {
                tools: Vec::new(),
                config,
                built: Mutex::new(None),
                bridge: Arc::new(Mutex::new(None)),
                lease: Lease::default(),
            })
        })
    }

    /// Registers `function` as the tool `name` (see `ferroloop.ToolExecutor.tool`).
    #[pyo3(signature = (name, function, *, is_async, takes_context, concurrency_safe, timeout, max_result_chars, schema, cancels_siblings_on_error, description = None))]
    #[allow(clippy::too_many_arguments)]
    fn register(
        &mut self,
        py: Python<'_>,
        name: String,
        function: Py<PyAny>,
        is_async: bool,
        takes_context: bool,
        concurrency_safe: &Bound<'_, PyAny>,
        timeout: Option<&Bound<'_, PyAny>>,
        max_result_chars: Option<&Bound<'_, PyAny>>,
        schema: Option<&Bound<'_, PyAny>>,
        cancels_siblings_on_error: bool,
        description: Option<String>,
    ) -> PyResult<()> {
        shield(py, "ToolExecutor.register", || {
            let timeout = float_arg_opt("timeout", timeout)?;
            let max_result_chars = max_result_chars
                .map(|limit| result_limit("max_result_chars", limit))
                .transpose()?;
            if self.tools.iter().any(|tool| tool.name == name) {
                return Err(PyValueError::new_err(format!(
                    "a tool named {name:?} is already registered"
                )));
            }
            let safety = if let Ok(flag) = concurrency_safe.cast::<PyBool>() {
                Safety::Fixed(flag.is_true())
            } else if concurrency_safe.is_callable() {
                Safety::PerInput(concurrency_safe.clone().unbind())
            } else {
                return Err(PyTypeError::new_err(
                    "concurrency_safe must be a bool or a callable taking the input",
                ));
            };
            let schema = match schema {
                Some(schema) => py_to_value(schema).map_err(PyValueError::new_err)?,
                None => json!({"type": "object"}),
            };
            let tool = Arc::new(PyTool {
                name,
                description: description.unwrap_or_default(),
                function: Arc::new(function),
                is_async,
                takes_context,
                safety,
                // Zero is the core registry's to refuse (below).
                timeout: timeout.map(|value| seconds("timeout", value)).transpose()?,
                limit: match max_result_chars {
                    None => ResultLimit::Default,
                    Some(None) => ResultLimit::Unlimited,
                    Some(Some(chars)) => ResultLimit::Chars(chars),
                },
                schema,
                cancels_siblings: cancels_siblings_on_error,
                bridge: Arc::clone(&self.bridge),
            });
            // The core's registry is built at the first run; a trial registration applies its
            // rules now, where the declaration is made.
            ToolRegistry::new()
                .register_arc(Arc::clone(&tool) as Arc<dyn Tool>)
                .map_err(|err| match err {
                    RegistryError::ZeroTimeout(_) => {
                        zero_timeout("timeout", timeout.unwrap_or_default())
                    }
                    RegistryError::Schema { source, .. } => ferroloop_error(
                        py,
                        "ToolError",
                        &format!("invalid input schema for tool {:?}: {source}", tool.name),
                        // A bad declaration: Node's `InvalidArgumentError`.
                        &[(
                            "code",
                            pyo3::types::PyString::new(py, "invalid_argument").into_any(),
                        )],
                    ),
                    other => PyValueError::new_err(other.to_string()),
                })?;
            self.tools.push(tool);
            *lock(&self.built) = None;
            Ok(())
        })
    }

    /// The registered tool names, in registration order.
    #[getter]
    fn tool_names(&self) -> Vec<String> {
        self.tools.iter().map(|tool| tool.name.clone()).collect()
    }

    /// Runs a batch of `tool_use` blocks; an awaitable of one `tool_result` dict per call, in
    /// request order.
    /// Starts running the calls: returns the awaitable of their results and the run's stop
    /// handle, whose `cancel()` cancels the calls while the awaitable still resolves, with
    /// every result, once the tools have stopped (cancelling the awaitable itself drops the
    /// run at once).
    fn run<'py>(
        &self,
        py: Python<'py>,
        tool_uses: &Bound<'py, PyAny>,
    ) -> PyResult<(Bound<'py, PyAny>, PyRunStop)> {
        shield(py, "ToolExecutor.run", || {
            let CheckedToolUses { tool_uses, refused } = tool_uses_of(tool_uses)?;
            let executor = self.executor()?;
            let bridge = self.bind_running_loop(py)?;
            // The tools run in copies of the caller's context (captured once per run).
            let context = CallerContext::for_run(py)?;
            let lease = self.lease();
            let stop = CancellationToken::new();
            let until = stop.clone();
            let awaitable = into_awaitable(
                py,
                &bridge,
                async move {
                    let results = executor
                        .run_checked_with_host_data_until(tool_uses, refused, context, until)
                        .await;
                    drop(lease);
                    Ok(results)
                },
                |py, outcome| match outcome {
                    Ok(results) => results_to_py(py, &results),
                    Err(err) => Err(turn_error(py, err)),
                },
            )?;
            Ok((awaitable, PyRunStop { stop }))
        })
    }

    /// Starts a streaming turn, driven on the runtime so calls start as soon as submitted.
    fn turn(&self, py: Python<'_>) -> PyResult<PyTurn> {
        shield(py, "ToolExecutor.turn", || {
            let executor = self.executor()?;
            let bridge = self.bind_running_loop(py)?;
            let contexts = Arc::new(CallerContext::Turn(Mutex::new(Vec::new())));
            let spawned = {
                let _entered = runtime()?.enter();
                executor
                    .turn_with_host_data(Arc::clone(&contexts) as HostData)
                    .spawn()
            };
            Ok(PyTurn {
                _lease: self.lease(),
                contexts,
                handle: spawned.handle().clone(),
                turn: Arc::new(tokio::sync::Mutex::new(Some(spawned))),
                bridge,
                unclaimed: Arc::default(),
            })
        })
    }
}

/// The stop handle of a `ToolExecutor.run`: `cancel()` cancels its calls (each still answers).
#[pyclass(module = "ferroloop._native", name = "_RunStop", frozen)]
pub(crate) struct PyRunStop {
    stop: CancellationToken,
}

#[pymethods]
impl PyRunStop {
    /// Cancels the run's running and queued calls; its awaitable resolves once they stopped.
    fn cancel(&self, py: Python<'_>) -> PyResult<()> {
        shield(py, "ToolExecutor.run", || {
            self.stop.cancel();
            Ok(())
        })
    }
}

/// The native half of `ferroloop.Turn`.
#[pyclass(module = "ferroloop._native", name = "_Turn")]
pub(crate) struct PyTurn {
    /// Keeps the executor from reporting its tools to the collector while the turn lives.
    _lease: Lease,
    /// The context of each submission (a [`CallerContext::Turn`]).
    contexts: Arc<CallerContext>,
    handle: TurnHandle,
    turn: Arc<tokio::sync::Mutex<Option<SpawnedTurn>>>,
    bridge: Arc<LoopBridge>,
    /// What a cancelled `next_event` or `finish` had already taken from the turn (an event, the
    /// results), returned by the next call instead of being lost.
    unclaimed: Arc<Mutex<Unclaimed>>,
}

/// See [`PyTurn::unclaimed`].
#[derive(Default)]
struct Unclaimed {
    events: std::collections::VecDeque<TurnEvent>,
    /// `next_event` was called: someone follows the turn's events, so `finish` keeps those it
    /// passes on its way to the end (in `events`) instead of dropping them.
    followed: bool,
    /// The turn's outcome once `finish` has collected it: every later `results()` returns it
    /// again (as Node's turn does), and a `results()` cancelled after collecting loses nothing.
    collected: Option<Arc<Result<Vec<ToolResult>, TurnError>>>,
}

#[pymethods]
impl PyTurn {
    /// Submits `tool_use` blocks (one, or several at once as Node's `submit(...toolUses)`): in
    /// order, all or none (an entry that is not a tool use is a `TypeError` before any is
    /// submitted). Raises `TurnSealedError` (an `InvalidStateError` and a `ToolError`) once the
    /// turn is sealed.
    #[pyo3(signature = (tool_use, *more))]
    fn submit(
        &self,
        py: Python<'_>,
        tool_use: &Bound<'_, PyAny>,
        more: &Bound<'_, PyTuple>,
    ) -> PyResult<()> {
        shield(py, "Turn.submit", || {
            let CheckedToolUses { tool_uses, refused } = CheckedToolUses::of(
                std::iter::once(Ok(tool_use.clone())).chain(more.iter().map(Ok)),
                |at| format!("submit()'s tool_use {at}"),
                " (submit several as submit(a, b), not a list)",
            )?;
            // The calls run in copies of the submitter's context.
            let context = CallerContext::current(py)?;
            // The turn's lock is taken with the interpreter released (see `progress`).
            py.detach(|| {
                let CallerContext::Turn(contexts) = self.contexts.as_ref() else {
                    return self
                        .handle
                        .submit_vec_checked(tool_uses, Vec::new(), refused);
                };
                // Held across the submission, so the contexts' positions are the calls'
                // indexes (a tool may be called, on the runtime, as soon as it is submitted).
                let mut contexts = lock(contexts);
                let before = contexts.len();
                contexts.extend(std::iter::repeat_n(context, tool_uses.len()));
                let submitted = self
                    .handle
                    .submit_vec_checked(tool_uses, Vec::new(), refused);
                if submitted.is_err() {
                    contexts.truncate(before);
                }
                submitted
            })
            .map_err(|closed| ferroloop_error(py, "TurnSealedError", &closed.to_string(), &[]))
        })
    }

    /// No more calls: the turn ends when its calls are answered.
    fn seal(&self, py: Python<'_>) -> PyResult<()> {
        shield(py, "Turn.seal", || {
            py.detach(|| self.handle.seal());
            Ok(())
        })
    }

    /// Cancels the running and queued calls (each still gets an error result).
    fn cancel(&self, py: Python<'_>) -> PyResult<()> {
        shield(py, "Turn.cancel", || {
            py.detach(|| self.handle.cancel());
            Ok(())
        })
    }

    /// Discards the turn: cancels it and seals it.
    fn discard(&self, py: Python<'_>) -> PyResult<()> {
        shield(py, "Turn.discard", || {
            py.detach(|| self.handle.discard());
            Ok(())
        })
    }

    /// An awaitable of the next event dict, or `None` once the last result was delivered.
    fn next_event<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        shield(py, "Turn.next_event", || {
            let turn = Arc::clone(&self.turn);
            let unclaimed = Arc::clone(&self.unclaimed);
            let keep = Arc::clone(&self.unclaimed);
            into_awaitable_keeping(
                py,
                &self.bridge,
                async move {
                    {
                        let mut unclaimed = lock(&unclaimed);
                        unclaimed.followed = true;
                        if let Some(event) = unclaimed.events.pop_front() {
                            return Ok(Some(event));
                        }
                    }
                    let mut guard = turn.lock().await;
                    // A `finish` may have kept events while this waited for the lock: they
                    // come first (they are older than the turn's next one).
                    if let Some(event) = lock(&unclaimed).events.pop_front() {
                        return Ok(Some(event));
                    }
                    Ok(match guard.as_mut() {
                        Some(turn) => turn.next_event().await,
                        None => None,
                    })
                },
                |py, event| match event {
                    Some(event) => event_to_py(py, &event),
                    None => Ok(py.None()),
                },
                // `asyncio.wait_for(anext(turn), ...)` timing out just as an event arrived
                // dropped that event (a call's `result` among them).
                move |event| {
                    if let Some(event) = event {
                        lock(&keep).events.push_front(event);
                    }
                },
            )
        })
    }

    /// Seals the turn and returns an awaitable of all its results, in submission order. Called
    /// again (or concurrently), it returns the same results (a new list each time), or raises
    /// the same error again.
    fn finish<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        shield(py, "Turn.finish", || {
            let turn = Arc::clone(&self.turn);
            let unclaimed = Arc::clone(&self.unclaimed);
            py.detach(|| self.handle.seal());
            into_awaitable(
                py,
                &self.bridge,
                async move {
                    if let Some(collected) = lock(&unclaimed).collected.clone() {
                        return Ok(Some(collected));
                    }
                    let mut guard = turn.lock().await;
                    // The end is awaited through the events (cancel-safe), with the turn left in
                    // place: taking it first meant a cancelled `results()` dropped the turn, its
                    // running calls and their results. The events end when the turn's task
                    // ends, so `finish` then returns at once. The events it passes are kept
                    // for a task following the turn (`async for`), whose `next_event` takes
                    // them before the turn's next; nobody follows, they are dropped.
                    if let Some(spawned) = guard.as_mut() {
                        while let Some(event) = spawned.next_event().await {
                            let mut unclaimed = lock(&unclaimed);
                            if unclaimed.followed {
                                unclaimed.events.push_back(event);
                            }
                        }
                    }
                    // A concurrent call may have collected the outcome while this one waited
                    // for the lock.
                    if let Some(collected) = lock(&unclaimed).collected.clone() {
                        return Ok(Some(collected));
                    }
                    let Some(spawned) = guard.take() else {
                        return Ok(None);
                    };
                    let collected = Arc::new(spawned.finish().await);
                    lock(&unclaimed).collected = Some(Arc::clone(&collected));
                    drop(guard);
                    Ok(Some(collected))
                },
                |py, outcome| match outcome.as_deref() {
                    Some(Ok(results)) => results_to_py(py, results),
                    Some(Err(err)) => Err(turn_error(py, err.clone())),
                    // Only if a `finish` was dropped while the ended turn handed over its
                    // outcome (it holds no running call by then).
                    None => Err(ferroloop_error(
                        py,
                        "ToolError",
                        "the turn's results were lost (a results() call was dropped as they were handed over)",
                        &[],
                    )),
                },
            )
        })
    }
}

/// The `max_concurrency` argument: an `int`, or a `TypeError` naming it (pyo3's named only the
/// type; a `from_py_with` keeps the default of 10 in the signature).
fn max_concurrency_arg(value: &Bound<'_, PyAny>) -> PyResult<i128> {
    int_arg("max_concurrency", value)
}

/// A result limit in characters: a non-negative `int`, or `math.inf` for none (`None` here;
/// Node's `Infinity`).
fn result_limit(name: &str, value: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
    refuse_bool(name, "a non-negative int or math.inf", value)?;
    if let Ok(float) = value.cast::<PyFloat>() {
        let float = float.value();
        if float == f64::INFINITY {
            return Ok(None);
        }
        return Err(PyValueError::new_err(format!(
            "{name} must be a non-negative int or math.inf, got {}",
            float_text(float)
        )));
    }
    let chars: i128 = value.extract().map_err(|_| {
        PyTypeError::new_err(format!("{name} must be a non-negative int or math.inf"))
    })?;
    non_negative(name, chars).map(Some)
}

/// `tool_use` dicts as the core takes them, with the calls whose input cannot be converted to
/// JSON (a `datetime`, an int past 64 bits) as `(position, reason)`: each such call gets its
/// own `is_error` result in its place, never run, and the others run, as in Node. A dict that
/// is no `tool_use` (no `id`, a `name` that is no `str`) is still an error of the whole call.
struct CheckedToolUses {
    tool_uses: Vec<ToolUse>,
    refused: Vec<(usize, String)>,
}

impl CheckedToolUses {
    /// The `tool_use` dicts of `items`; an entry that is none names itself with `label` (its
    /// position) and says what it is (`list_hint` added for a list): "a tool_use must be a dict with id, name and input" left
    /// out which entry (a hole, `None`) and what was given (a list where one was expected).
    fn of<'py>(
        items: impl Iterator<Item = PyResult<Bound<'py, PyAny>>>,
        label: impl Fn(usize) -> String,
        list_hint: &str,
    ) -> PyResult<Self> {
        let mut checked = CheckedToolUses {
            tool_uses: Vec::new(),
            refused: Vec::new(),
        };
        for (at, item) in items.enumerate() {
            let item = item?;
            let (tool_use, refusal) = tool_use_checked(&item).map_err(|error| {
                let py = item.py();
                if item.cast::<PyDict>().is_err() {
                    let kind = if item.is_none() {
                        "None".to_owned()
                    } else {
                        type_name(&item)
                    };
                    let hint = if item.cast::<PyList>().is_ok() {
                        list_hint
                    } else {
                        ""
                    };
                    return PyTypeError::new_err(format!(
                        "{} must be a tool_use dict (id, name, input), not {kind}{hint}",
                        label(at)
                    ));
                }
                let kind = error.get_type(py);
                let message = error
                    .value(py)
                    .str()
                    .map_or_else(|_| String::new(), |text| text.to_string());
                PyErr::from_type(kind, format!("{}: {message}", label(at)))
            })?;
            if let Some(reason) = refusal {
                checked.refused.push((at, reason));
            }
            checked.tool_uses.push(tool_use);
        }
        Ok(checked)
    }
}

/// A `tool_use` dict (`{"type": "tool_use", "id", "name", "input"}`; `type` optional), and why
/// its input cannot be sent, if it cannot (the call then carries no input).
fn tool_use_checked(obj: &Bound<'_, PyAny>) -> PyResult<(ToolUse, Option<String>)> {
    let py = obj.py();
    let dict = obj
        .cast::<PyDict>()
        .map_err(|_| PyTypeError::new_err("a tool_use must be a dict with id, name and input"))?;
    let field = |key: &Bound<'_, PyString>| -> PyResult<String> {
        dict.get_item(key)?
            .ok_or_else(|| PyValueError::new_err(format!("tool_use without \"{key}\"")))?
            .extract::<String>()
            .map_err(|_| PyTypeError::new_err(format!("tool_use \"{key}\" must be a str")))
    };
    let (id, name) = (
        field(pyo3::intern!(py, "id"))?,
        field(pyo3::intern!(py, "name"))?,
    );
    // A missing input is the core's to decide (`ToolUse::with_optional_input`: `{}`).
    let (input, refusal) = match dict.get_item(pyo3::intern!(py, "input"))? {
        Some(input) => match py_to_value_nan_as_null(&input) {
            Ok(value) => (Some(value), None),
            Err(error) => (
                None,
                Some(format!("the input cannot be sent as JSON: {error}")),
            ),
        },
        None => (None, None),
    };
    Ok((ToolUse::with_optional_input(id, name, input), refusal))
}

/// The `tool_uses` argument of `run`: the list of `tool_use` dicts the wrapper made (which
/// refuses one dict given alone).
fn tool_uses_of(obj: &Bound<'_, PyAny>) -> PyResult<CheckedToolUses> {
    CheckedToolUses::of(obj.try_iter()?, |at| format!("tool_uses[{at}]"), "")
}

fn results_to_py(py: Python<'_>, results: &[ToolResult]) -> PyResult<Py<PyAny>> {
    let list = PyList::empty(py);
    for result in results {
        list.append(result_to_py(py, result)?)?;
    }
    Ok(list.into_any().unbind())
}

/// A `tool_result` dict, built directly with interned keys (no serde round trip).
fn result_to_py<'py>(py: Python<'py>, result: &ToolResult) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item(pyo3::intern!(py, "type"), pyo3::intern!(py, "tool_result"))?;
    dict.set_item(pyo3::intern!(py, "tool_use_id"), &result.tool_use_id)?;
    match &result.content {
        ToolResultContent::Text(text) => dict.set_item(pyo3::intern!(py, "content"), text)?,
        ToolResultContent::Blocks(blocks) => dict.set_item(
            pyo3::intern!(py, "content"),
            pythonize::pythonize(py, blocks)?,
        )?,
    }
    dict.set_item(pyo3::intern!(py, "is_error"), result.is_error)?;
    Ok(dict)
}

fn event_to_py(py: Python<'_>, event: &TurnEvent) -> PyResult<Py<PyAny>> {
    let value = match event {
        TurnEvent::Started {
            index,
            tool_use_id,
            tool,
            queued,
        } => json!({"type": "started", "index": index, "tool_use_id": tool_use_id,
                    "tool": tool, "queued": queued.as_secs_f64()}),
        TurnEvent::Progress {
            index,
            tool_use_id,
            data,
        } => json!({"type": "progress", "index": index, "tool_use_id": tool_use_id, "data": data}),
        TurnEvent::Finished {
            index,
            tool_use_id,
            tool,
            status,
            duration,
        } => json!({"type": "finished", "index": index, "tool_use_id": tool_use_id,
                    "tool": tool, "status": status, "duration": duration.as_secs_f64()}),
        TurnEvent::Detached {
            index,
            tool_use_id,
            tool,
        } => json!({"type": "detached", "index": index, "tool_use_id": tool_use_id, "tool": tool}),
        TurnEvent::Result { index, result } => {
            let dict = PyDict::new(py);
            dict.set_item(pyo3::intern!(py, "type"), pyo3::intern!(py, "result"))?;
            dict.set_item(pyo3::intern!(py, "index"), index)?;
            dict.set_item(pyo3::intern!(py, "result"), result_to_py(py, result)?)?;
            return Ok(dict.into_any().unbind());
        }
    };
    Ok(pythonize::pythonize(py, &value)?.unbind())
}

/// `ferroloop.ToolError` (with `results`) for a fatal tool error; `InternalError` otherwise.
fn turn_error(py: Python<'_>, err: TurnError) -> PyErr {
    match &err {
        TurnError::Fatal { results, .. } => {
            let results = results_to_py(py, results)
                .map(|r| r.into_bound(py))
                .unwrap_or_else(|_| py.None().into_bound(py));
            ferroloop_error(py, "ToolError", &err.to_string(), &[("results", results)])
        }
        TurnError::Internal(detail) => internal_error(py, detail),
    }
}

/// Adds the executor classes to the module.
pub(crate) fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add("DEFAULT_TURN_BUDGET_CHARS", DEFAULT_TURN_BUDGET_CHARS)?;
    module.add_class::<PyExecutor>()?;
    module.add_class::<PyTurn>()?;
    module.add_class::<PyRunStop>()?;
    module.add_class::<PyToolContext>()?;
    Ok(())
}
