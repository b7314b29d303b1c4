//! `ToolExecutor` for JavaScript: the core executor (`ferroloop::exec`) with tools implemented
//! as JS functions (see [`crate::js_tools`]).
//!
//! Turns are polled on the JavaScript thread: `pollJson` drives the turn until it would block and
//! returns what happened (events, tool calls to start, calls to abort). When the turn can make
//! progress again (a tool replied, a timer fired, a call was submitted) its waker calls the JS
//! `wake` function through an unref'd thread-safe function, which polls again. A turn of
//! ten thousand quick calls therefore costs a handful of polls, not a thread hop per call.
//!
//! Tool uses, results and events cross the boundary as JSON text (V8's `JSON.parse` and
//! `JSON.stringify` are faster than building objects property by property through N-API); the
//! wrappers in `lib/exec.js` present them as objects, with the providers' wire names.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use ferroloop::exec::{
    ExecutorConfig, ResultLimit, Tool, ToolContext, ToolError, ToolFuture, ToolOutput,
    ToolRegistry, ToolResult, ToolUse, Turn, TurnEvent, TurnHandle,
};
use napi::Status;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use serde_json::{Value, json};

use crate::error::FerroloopError;
use crate::guard;
use crate::js_tools::JsToolQueues;

/// Executor-wide options.
#[napi(object)]
#[derive(Debug, Default, Clone)]
pub struct ExecutorOptions {
    /// At most this many calls run at once (default 10).
    pub max_concurrency: Option<u32>,
    /// Timeout for tools that declare none, in milliseconds (default: none).
    pub default_timeout_ms: Option<f64>,
    /// How long a cancelled or timed-out tool may take to stop, in milliseconds (default 5000).
    pub cleanup_grace_ms: Option<f64>,
    /// Result limit in characters for tools that declare none (default 100,000 per the core).
    pub default_max_result_chars: Option<f64>,
    /// Aggregate limit of one turn's results in characters; `Infinity` disables it.
    pub turn_budget_chars: Option<f64>,
    /// Directory for the spill files of oversized results (default: the OS temp dir).
    pub spill_dir: Option<String>,
}

/// A non-negative integer count, or `None` for `Infinity`.
pub(crate) fn count_or_infinity(value: f64, what: &str) -> Result<Option<usize>, FerroloopError> {
    if value == f64::INFINITY {
        Ok(None)
    } else if value.is_finite() && value >= 0.0 && value.fract() == 0.0 {
        Ok(Some(value as usize))
    } else {
        Err(FerroloopError::invalid_argument(format!(
            "{what} must be a non-negative integer or Infinity, got {value}"
        )))
    }
}

/// One tool's declaration (its implementation lives in JavaScript).
#[napi(object)]
#[derive(Debug, Default, Clone)]
pub struct ToolSpec {
    /// The tool's name, as the model calls it.
    pub name: String,
    /// Calls may run in parallel with other safe calls (default false: the call runs alone).
    pub concurrency_safe: Option<bool>,
    /// Per-call timeout in milliseconds.
    pub timeout_ms: Option<f64>,
    /// Result size limit in characters; `Infinity` disables the limit.
    pub max_result_chars: Option<f64>,
    /// JSON Schema of the input, as JSON text; inputs that violate it are answered with an
    /// `is_error` result without calling the tool.
    pub schema_json: Option<String>,
    /// A failure of this tool cancels its running and later siblings in the same turn.
    pub cancels_siblings_on_error: Option<bool>,
}

/// A non-negative, finite number of milliseconds.
pub(crate) fn millis(value: f64, what: &str) -> Result<Duration, FerroloopError> {
    if value.is_finite() && value >= 0.0 {
        Ok(Duration::from_secs_f64(value / 1000.0))
    } else {
        Err(FerroloopError::invalid_argument(format!(
            "{what} must be a non-negative number of milliseconds, got {value}"
        )))
    }
}

/// The core configuration for `options`.
pub(crate) fn executor_config(options: ExecutorOptions) -> Result<ExecutorConfig, FerroloopError> {
    let mut config = ExecutorConfig::default();
    if let Some(n) = options.max_concurrency {
        if n == 0 {
            return Err(FerroloopError::invalid_argument(
                "maxConcurrency must be at least 1",
            ));
        }
        config.max_concurrency = n as usize;
    }
    if let Some(ms) = options.default_timeout_ms {
        config.default_timeout = Some(millis(ms, "defaultTimeoutMs")?);
    }
    if let Some(ms) = options.cleanup_grace_ms {
        config.cleanup_grace = millis(ms, "cleanupGraceMs")?;
    }
    if let Some(n) = options.default_max_result_chars {
        config.budget.default_max_result_chars =
            count_or_infinity(n, "defaultMaxResultChars")?.unwrap_or(usize::MAX);
    }
    if let Some(n) = options.turn_budget_chars {
        config.budget.turn_budget_chars = count_or_infinity(n, "turnBudgetChars")?;
    }
    if let Some(dir) = options.spill_dir {
        config.budget.spill_dir = dir.into();
    }
    Ok(config)
}

/// A tool whose `call` runs a JavaScript function.
pub(crate) struct JsTool {
    name: String,
    schema: Value,
    safe: bool,
    timeout: Option<Duration>,
    limit: ResultLimit,
    cancels_siblings: bool,
    queues: Arc<JsToolQueues>,
}

impl JsTool {
    pub(crate) fn from_spec(
        spec: ToolSpec,
        queues: Arc<JsToolQueues>,
    ) -> Result<Self, FerroloopError> {
        if spec.name.is_empty() {
            return Err(FerroloopError::invalid_argument("a tool needs a name"));
        }
        let schema = match &spec.schema_json {
            None => json!({"type": "object"}),
            Some(text) => serde_json::from_str(text).map_err(|err| {
                FerroloopError::invalid_argument(format!(
                    "tool {}: schema is not valid JSON: {err}",
                    spec.name
                ))
            })?,
        };
        let timeout = spec
            .timeout_ms
            .map(|ms| millis(ms, "timeoutMs"))
            .transpose()?;
        let limit = match spec.max_result_chars {
            None => ResultLimit::Default,
            Some(n) => match count_or_infinity(n, "maxResultChars")? {
                None => ResultLimit::Unlimited,
                Some(chars) => ResultLimit::Chars(chars),
            },
        };
        Ok(Self {
            name: spec.name,
            schema,
            safe: spec.concurrency_safe.unwrap_or(false),
            timeout,
            limit,
            cancels_siblings: spec.cancels_siblings_on_error.unwrap_or(false),
            queues,
        })
    }
}

impl Tool for JsTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn input_schema(&self) -> Value {
        self.schema.clone()
    }

    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        self.safe
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
        let queues = self.queues.clone();
        let name = self.name.clone();
        let timeout = self.timeout;
        Box::pin(async move {
            let started = Instant::now();
            // The executor cancels the call's token for a timeout as well as for a cancellation;
            // tell them apart by the clock so the JS tool sees a TimeoutError or an AbortError.
            let reason = move || match timeout {
                Some(limit) if started.elapsed() >= limit => "timeout",
                _ => "aborted",
            };
            let token = ctx.cancellation_token().clone();
            let progress = Some(ctx.progress_sender());
            let reply = queues
                .call(&name, ctx.tool_use_id(), input, token, progress, reason)
                .await;
            let content = if reply.content_is_json {
                match serde_json::from_str::<Vec<Value>>(&reply.content) {
                    Ok(blocks) => ToolOutput::blocks(blocks).content,
                    Err(err) => {
                        return Err(ToolError::failed(format!(
                            "tool {name} returned content blocks that are not a JSON array: {err}"
                        )));
                    }
                }
            } else {
                reply.content.into()
            };
            Ok(ToolOutput {
                content,
                is_error: reply.is_error,
            })
        })
    }
}

/// The JS function a turn's waker calls (unref'd: it never keeps the process alive).
pub type WakeFn = ThreadsafeFunction<(), (), (), Status, false, true>;

/// A turn's waker: schedules one JS-side poll however often it is woken before that poll.
struct JsWaker {
    scheduled: AtomicBool,
    wake: WakeFn,
}

impl Wake for JsWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.scheduled.swap(true, Ordering::AcqRel) {
            let status = self.wake.call((), ThreadsafeFunctionCallMode::NonBlocking);
            if status != Status::Ok {
                tracing::debug!(?status, "could not schedule a turn poll in JavaScript");
            }
        }
    }
}

/// The executor: register tools (declarations here, functions in JS), then run batches or
/// streaming turns.
#[napi(js_name = "ToolExecutor")]
pub struct NativeToolExecutor {
    inner: ferroloop::exec::ToolExecutor,
    queues: Arc<JsToolQueues>,
}

#[napi]
impl NativeToolExecutor {
    /// An executor over `tools`; their calls are handed to JavaScript by the turns' polls.
    #[napi(constructor)]
    pub fn new(options: ExecutorOptions, tools: Vec<ToolSpec>) -> napi::Result<Self> {
        guard::sync(|| {
            let queues = Arc::new(JsToolQueues::default());
            let mut registry = ToolRegistry::new();
            for spec in tools {
                let tool = JsTool::from_spec(spec, queues.clone())?;
                registry
                    .register(tool)
                    .map_err(|err| FerroloopError::invalid_argument(err.to_string()))?;
            }
            let config = executor_config(options)?;
            let inner = ferroloop::exec::ToolExecutor::builder(registry)
                .config(config)
                .build();
            Ok(Self { inner, queues })
        })
    }

    /// Starts a streaming turn; `wake` is called (asynchronously) whenever it should be polled.
    /// With `resultsOnly`, polls report only the results (what `run()` needs), not the
    /// started/progress/finished events.
    #[napi(
        js_name = "startTurn",
        ts_args_type = "wake: () => void, resultsOnly?: boolean"
    )]
    pub fn start_turn(&self, wake: WakeFn, results_only: Option<bool>) -> napi::Result<NativeTurn> {
        guard::sync(|| {
            let turn = self.inner.turn();
            Ok(NativeTurn {
                handle: turn.handle(),
                turn: Some(turn),
                results_only: results_only.unwrap_or(false),
                waker: Arc::new(JsWaker {
                    scheduled: AtomicBool::new(false),
                    wake,
                }),
                queues: self.queues.clone(),
            })
        })
    }

    /// Delivers a batch of JS tool replies (JSON array of `{callId, content, contentIsJson,
    /// isError}`); returns how many calls were still waiting for theirs.
    #[napi(js_name = "completeJson")]
    pub fn complete_json(&self, replies_json: String) -> napi::Result<u32> {
        guard::sync(|| {
            self.queues.complete_many(&replies_json).map_err(|err| {
                FerroloopError::invalid_argument(format!("tool replies are not valid: {err}"))
                    .into()
            })
        })
    }
}

/// One streaming turn, polled on the JavaScript thread.
#[napi(js_name = "Turn")]
pub struct NativeTurn {
    handle: TurnHandle,
    /// `None` once every result was delivered.
    turn: Option<Turn>,
    /// Report only `Result` events.
    results_only: bool,
    waker: Arc<JsWaker>,
    queues: Arc<JsToolQueues>,
}

/// Parses one wire-shaped `tool_use` block (`{type?, id, name, input}`).
fn parse_tool_use(value: Value) -> Result<ToolUse, FerroloopError> {
    serde_json::from_value(value).map_err(|err| {
        FerroloopError::invalid_argument(format!(
            "a tool use needs string `id` and `name` and an `input`: {err}"
        ))
    })
}

#[napi]
impl NativeTurn {
    /// Submits tool uses (a JSON array of `tool_use` blocks); they start as admission allows.
    #[napi(js_name = "submitJson")]
    pub fn submit_json(&self, tool_uses_json: String) -> napi::Result<()> {
        guard::sync(|| {
            let values: Vec<Value> = serde_json::from_str(&tool_uses_json).map_err(|err| {
                FerroloopError::invalid_argument(format!("tool uses are not a JSON array: {err}"))
            })?;
            let uses = values
                .into_iter()
                .map(parse_tool_use)
                .collect::<Result<Vec<_>, _>>()?;
            for tool_use in uses {
                self.handle.submit(tool_use).map_err(|closed| {
                    FerroloopError::invalid_argument(format!(
                        "the turn is sealed: tool use {} was not submitted",
                        closed.0.id
                    ))
                })?;
            }
            Ok(())
        })
    }

    /// No more tool uses: the turn ends when every submitted call is answered.
    #[napi]
    pub fn seal(&self) -> napi::Result<()> {
        guard::sync(|| {
            self.handle.seal();
            Ok(())
        })
    }

    /// Cancels the turn: running calls are aborted, queued ones never start; every call still
    /// gets its `is_error` result.
    #[napi]
    pub fn cancel(&self) -> napi::Result<()> {
        guard::sync(|| {
            self.handle.cancel();
            Ok(())
        })
    }

    /// Cancels and seals the turn (its model response will be replayed).
    #[napi]
    pub fn discard(&self) -> napi::Result<()> {
        guard::sync(|| {
            self.handle.discard();
            Ok(())
        })
    }

    /// Drives the turn until it would block. Returns JSON
    /// `{events, invocations, aborts, done}`: the turn events that happened (results in
    /// submission order), the tool calls JavaScript must start, the calls it must abort, and
    /// whether every result was delivered.
    #[napi(js_name = "pollJson")]
    pub fn poll_json(&mut self) -> napi::Result<String> {
        guard::sync(|| {
            // Cleared first: a wake during or after this poll schedules the next one.
            self.waker.scheduled.store(false, Ordering::Release);
            let mut events = Vec::new();
            let mut done = self.turn.is_none();
            if let Some(turn) = self.turn.as_mut() {
                let waker = Waker::from(self.waker.clone());
                let mut cx = Context::from_waker(&waker);
                // Timers (timeouts, cleanup grace) register with the async runtime.
                napi::bindgen_prelude::within_runtime_if_available(|| {
                    loop {
                        match turn.poll_next_event(&mut cx) {
                            Poll::Ready(Some(event)) => {
                                if !self.results_only || matches!(event, TurnEvent::Result { .. }) {
                                    events.push(event);
                                }
                            }
                            Poll::Ready(None) => {
                                done = true;
                                break;
                            }
                            Poll::Pending => break,
                        }
                    }
                });
            }
            if done {
                self.turn = None;
            }
            let outbox = self.queues.drain();
            let out = PollOutcome {
                events: events.iter().map(JsEvent::of).collect(),
                invocations: &outbox.invocations,
                aborts: &outbox.aborts,
                done,
            };
            serde_json::to_string(&out).map_err(|err| {
                FerroloopError::internal(format!("poll serialization: {err}")).into()
            })
        })
    }
}

/// What one poll reports to the JS wrapper.
#[derive(serde::Serialize)]
struct PollOutcome<'a> {
    events: Vec<JsEvent<'a>>,
    invocations: &'a [crate::js_tools::ToolInvocation],
    aborts: &'a [crate::js_tools::ToolAbort],
    done: bool,
}

/// A turn event in its JS shape: camelCase fields, the result in wire shape. Serialized straight
/// to JSON text (no intermediate `Value` tree: a turn can carry tens of thousands of events).
#[derive(serde::Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum JsEvent<'a> {
    #[serde(rename_all = "camelCase")]
    Started {
        index: usize,
        tool_use_id: &'a str,
        tool: &'a str,
        queued_ms: f64,
    },
    #[serde(rename_all = "camelCase")]
    Progress {
        index: usize,
        tool_use_id: &'a str,
        data: &'a Value,
    },
    #[serde(rename_all = "camelCase")]
    Finished {
        index: usize,
        tool_use_id: &'a str,
        tool: &'a str,
        status: ferroloop::exec::CallStatus,
        duration_ms: f64,
    },
    #[serde(rename_all = "camelCase")]
    Detached {
        index: usize,
        tool_use_id: &'a str,
        tool: &'a str,
    },
    Result {
        index: usize,
        result: &'a ToolResult,
    },
}

impl<'a> JsEvent<'a> {
    fn of(event: &'a TurnEvent) -> Self {
        let ms = |d: &Duration| d.as_secs_f64() * 1000.0;
        match event {
            TurnEvent::Started {
                index,
                tool_use_id,
                tool,
                queued,
            } => Self::Started {
                index: *index,
                tool_use_id,
                tool,
                queued_ms: ms(queued),
            },
            TurnEvent::Progress {
                index,
                tool_use_id,
                data,
            } => Self::Progress {
                index: *index,
                tool_use_id,
                data,
            },
            TurnEvent::Finished {
                index,
                tool_use_id,
                tool,
                status,
                duration,
            } => Self::Finished {
                index: *index,
                tool_use_id,
                tool,
                status: *status,
                duration_ms: ms(duration),
            },
            TurnEvent::Detached {
                index,
                tool_use_id,
                tool,
            } => Self::Detached {
                index: *index,
                tool_use_id,
                tool,
            },
            TurnEvent::Result { index, result } => Self::Result {
                index: *index,
                result,
            },
        }
    }
}
