//! `Agent` for JavaScript: the core agent loop (`ferroloop::agent::Agent`) over a `Client`,
//! with tools implemented in JavaScript and/or the native built-in tools.
//!
//! A run executes on napi's tokio runtime. Its JavaScript tool calls are queued in the agent's
//! [`JsToolQueues`], whose notifier wakes the JS wrapper (an unref'd thread-safe function) to
//! drain and start them; replies come back through `completeJson`, as for `ToolExecutor`. The
//! run's events reach JavaScript through an [`EventStream`](crate::pump::NativeEventStream) of
//! JSON items (the core's `AgentEvent` serialization).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ferroloop::agent::{Agent, AgentConfig, AgentEvent, HostWait, RunOptions};
use ferroloop::exec::{ToolExecutor, ToolRegistry};
use ferroloop::tools::register_builtins;
use futures_util::StreamExt;
use napi::Status;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use serde_json::Value;

use crate::client::NativeClient;
use crate::error::{FerroloopError, invalid_json};
use crate::exec::{
    ExecutorOptions, ToolSpec, WakeFn, executor_config, register_js_tool, small_count, whole,
    whole_usize,
};
use crate::guard;
use crate::js_tools::{Decide, JsRunId, JsToolQueues, read_json};
use crate::pump::{self, NativeEventStream, OnAbort};

/// How an agent is configured.
#[napi(object)]
#[derive(Debug, Default, Clone)]
pub struct AgentOptions {
    /// The model name sent in requests.
    pub model: String,
    /// The system prompt.
    pub system: Option<String>,
    /// Turns at most (default 50); a request sent again for the same turn counts once.
    pub max_turns: Option<f64>,
    /// `max_tokens` of each request (default 8,192).
    pub max_tokens: Option<f64>,
    /// Input + output tokens over the whole run, at most.
    pub token_budget: Option<f64>,
    /// How many times a `max_tokens` stop in text is continued (default 3).
    pub max_continuations: Option<f64>,
    /// The output limit a turn cut by `max_tokens` is asked again with, once, before it is
    /// continued (default 64,000; 0: never). See the core's `AgentConfig::escalated_max_tokens`.
    pub escalated_max_tokens: Option<f64>,
    /// How many recent tool results microcompact keeps (default 5); the last turn's results, not yet read by the model, are always kept.
    pub keep_recent_tool_results: Option<f64>,
    /// Place `cache_control` breakpoints (default true).
    pub prompt_caching: Option<bool>,
    /// The tokenizer family for estimates (`claude` by default).
    pub tokenizer: Option<String>,
    /// Extra fields merged into every request, as a JSON object (temperature, thinking, ...).
    pub extra_json: Option<String>,
    /// The directory the built-in tools are confined to (default: the current directory).
    pub workspace: Option<String>,
    /// The model to switch to when the model is overloaded (see the core's
    /// `AgentConfig::fallback_model`).
    pub fallback_model: Option<String>,
    /// Consecutive 529 retries within one call after which the run falls back (default 3).
    #[napi(js_name = "fallbackAfter529Retries")]
    pub fallback_after_529_retries: Option<f64>,
}

fn agent_config(options: &AgentOptions) -> Result<AgentConfig, FerroloopError> {
    let mut config = AgentConfig::new(options.model.clone());
    config.system.clone_from(&options.system);
    if let Some(n) = options.max_turns {
        config.limits.max_turns = small_count(n, 0, "maxTurns")?;
    }
    if let Some(n) = options.max_tokens {
        config.limits.max_tokens = whole(n, "maxTokens")?;
    }
    if let Some(n) = options.token_budget {
        config.limits.token_budget = Some(whole(n, "tokenBudget")?);
    }
    if let Some(n) = options.max_continuations {
        config.max_continuations = small_count(n, 0, "maxContinuations")?;
    }
    // 0 raises nothing: the core's `None`, as Python's `escalated_max_tokens=0`.
    if let Some(n) = options.escalated_max_tokens {
        let tokens = whole(n, "escalatedMaxTokens")?;
        config.escalated_max_tokens = (tokens > 0).then_some(tokens);
    }
    if let Some(n) = options.keep_recent_tool_results {
        // A count of results, as the core holds it (Python and C take up to 2^64 - 1 too).
        config.keep_recent_tool_results = whole_usize(n, "keepRecentToolResults")?;
    }
    config.fallback_model.clone_from(&options.fallback_model);
    if let Some(n) = options.fallback_after_529_retries {
        config.fallback_after_529_retries = small_count(n, 0, "fallbackAfter529Retries")?;
    }
    if let Some(on) = options.prompt_caching {
        config.prompt_caching = on;
    }
    if let Some(name) = &options.tokenizer {
        config.family = name
            .parse()
            .map_err(|err: ferroloop::tokens::UnknownFamily| {
                FerroloopError::invalid_argument(err.to_string())
            })?;
    }
    if let Some(text) = &options.extra_json {
        match read_json(text) {
            Ok(Value::Object(extra)) => config.extra = extra,
            Ok(_) => {
                return Err(FerroloopError::invalid_argument(
                    "extra must be a JSON object",
                ));
            }
            // JSON.stringify made the text: a refusal is the depth limit, said as such.
            Err(err) => return Err(invalid_json("extra", &err)),
        }
    }
    // Refused when the agent is made (as in Python and C) rather than by every run.
    config.check().map_err(|err| {
        FerroloopError::invalid_argument(format!("invalid agent configuration: {err}"))
    })?;
    Ok(config)
}

/// Resolves when the run comes to wait on JavaScript alone; never without a [`HostWait`].
async fn became_idle(wait: Option<&HostWait>) {
    match wait {
        Some(wait) => wait.became_idle().await,
        None => std::future::pending().await,
    }
}

/// The JS function asked for a call's concurrency safety: given the JSON text
/// `[id, name, input]`, it answers through [`NativeAgent::decided`] (unref'd).
///
/// A plain call, not napi-rs's `call_with_return_value`: that one asserts on the status of a
/// JS call that failed for a reason other than an exception, which is what a worker being
/// terminated while the predicate (user code) runs gives, and the failed assertion, a panic in
/// an `extern "C"` callback, aborted the whole process. A plain call's failure is reported as
/// an uncaught exception, which a terminating worker ignores.
pub type DecideFn = ThreadsafeFunction<String, (), String, Status, false, true>;

/// How long a run's task waits for JavaScript to decide a call's concurrency safety before
/// running the call alone (the conservative answer). JavaScript answers between two of its
/// tasks, so only a tool blocking the JS thread for this long makes the decision fall back; a
/// host shutting down drops the agent, which answers every pending question at once.
const DECIDE_WAIT: Duration = Duration::from_secs(30);

/// The questions asked of JavaScript and not yet answered, by id.
#[derive(Default)]
struct Decisions {
    next: AtomicU32,
    pending: Mutex<HashMap<u32, std::sync::mpsc::SyncSender<bool>>>,
}

impl Decisions {
    fn pending(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<u32, std::sync::mpsc::SyncSender<bool>>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Answers question `id` (unknown ids, already answered or given up on, are ignored).
    fn answer(&self, id: u32, safe: bool) {
        if let Some(answer) = self.pending().remove(&id) {
            let _ = answer.send(safe);
        }
    }

    /// Drops every pending question: each waiting run reads "not safe" at once.
    fn abandon(&self) {
        self.pending().clear();
    }
}

/// A [`Decide`] that asks `decide` on the JS thread and waits for its answer.
///
/// The executor asks while admitting a call, synchronously, on the run's task (on the async
/// runtime, never on the JS thread, which the answer needs); nothing the JS thread waits for is
/// held meanwhile.
fn decide_in_js(decide: DecideFn, decisions: Arc<Decisions>) -> Decide {
    Arc::new(move |name: &str, input: &Value| {
        let id = decisions.next.fetch_add(1, Ordering::Relaxed);
        let question = Value::Array(vec![
            Value::from(id),
            Value::String(name.to_owned()),
            input.clone(),
        ])
        .to_string();
        let (answer, answered) = std::sync::mpsc::sync_channel(1);
        decisions.pending().insert(id, answer);
        let status = decide.call(question, ThreadsafeFunctionCallMode::NonBlocking);
        let safe = if status == Status::Ok {
            // A dropped question (the agent dropped, its environment shutting down)
            // disconnects the channel.
            answered.recv_timeout(DECIDE_WAIT).unwrap_or(false)
        } else {
            tracing::debug!(
                ?status,
                "could not ask JavaScript for a concurrency decision"
            );
            false
        };
        decisions.pending().remove(&id);
        safe
    })
}

/// An agent: a client, tools and a configuration. Each `run` is independent.
#[napi(js_name = "Agent")]
pub struct NativeAgent {
    inner: Agent,
    queues: Arc<JsToolQueues>,
    decisions: Arc<Decisions>,
}

impl Drop for NativeAgent {
    fn drop(&mut self) {
        // Nobody will answer any more (collected, or its environment torn down): a run still
        // waiting for a decision runs its call alone now rather than after DECIDE_WAIT.
        self.decisions.abandon();
    }
}

#[napi]
impl NativeAgent {
    /// An agent calling `client`, with JavaScript tools declared by `tools` (their calls are
    /// announced through `wake`) and the built-in tools named in `builtins`. `decide` answers
    /// the concurrency safety of calls of tools declared with `safetyPerInput`: given the JSON
    /// text `[id, name, input]`, it answers through [`decided`](Self::decided) whether the call
    /// may run beside other safe calls.
    #[napi(
        constructor,
        ts_args_type = "client: Client, options: AgentOptions, executorOptions: ExecutorOptions, tools: Array<ToolSpec>, builtins: Array<string>, wake: () => void, decide: (question: string) => void"
    )]
    pub fn new(
        client: &NativeClient,
        options: AgentOptions,
        executor_options: ExecutorOptions,
        tools: Vec<ToolSpec>,
        builtins: Vec<String>,
        wake: WakeFn,
        decide: DecideFn,
    ) -> napi::Result<Self> {
        guard::sync(|| {
            let config = agent_config(&options)?;
            let exec_config = executor_config(executor_options)?;
            let notify = Arc::new(move || {
                let status = wake.call((), ThreadsafeFunctionCallMode::NonBlocking);
                if status != Status::Ok {
                    tracing::debug!(?status, "could not wake the JavaScript tool host");
                }
            });
            let per_input = tools.iter().any(|spec| spec.safety_per_input == Some(true));
            let decisions = Arc::new(Decisions::default());
            let decide = per_input.then(|| decide_in_js(decide, decisions.clone()));
            let queues = Arc::new(JsToolQueues::with_notify(notify, decide));
            let mut registry = ToolRegistry::new();
            for spec in tools {
                register_js_tool(&mut registry, spec, queues.clone())?;
            }
            register_builtins(
                &mut registry,
                &builtins,
                options.workspace.as_deref().map(std::path::Path::new),
                &exec_config.budget.spill_dir,
            )
            .map_err(|err| FerroloopError::invalid_argument(err.to_string()))?;
            let executor = ToolExecutor::builder(registry).config(exec_config).build();
            let inner = Agent::new(config, client.model(), Arc::new(executor));
            // Tool names the providers refuse, a `tool_choice` naming no tool: every run would
            // stop on them before its first request.
            inner.check_tools().map_err(|err| {
                FerroloopError::invalid_argument(format!("invalid agent configuration: {err}"))
            })?;
            Ok(Self {
                inner,
                queues,
                decisions,
            })
        })
    }

    /// Answers the concurrency-safety question `id` asked of the `decide` function.
    #[napi]
    pub fn decided(&self, id: u32, safe: bool) -> napi::Result<()> {
        guard::sync(|| {
            self.decisions.answer(id, safe);
            Ok(())
        })
    }

    /// The tool definitions sent to the model (JSON array, sorted by name).
    #[napi(js_name = "toolDefinitionsJson")]
    pub fn tool_definitions_json(&self) -> napi::Result<String> {
        guard::sync(|| Ok(Value::Array(self.inner.tool_definitions()).to_string()))
    }

    /// Starts a run continuing `messages` (a JSON array ending with a user message); its
    /// events arrive on the returned stream, the last one being `stop`. `aborted`: the run's
    /// AbortSignal had already fired: the run starts cancelled and stops with reason
    /// `aborted` without a request. `run_id`: the id under which JavaScript keeps the run's
    /// async context and the reason it was aborted for; the run's tool invocations and aborts
    /// carry it (`runId`, `run`).
    #[napi(js_name = "runJson")]
    pub fn run_json(
        &self,
        messages_json: String,
        aborted: Option<bool>,
        run_id: Option<u32>,
    ) -> napi::Result<NativeEventStream> {
        guard::sync(|| {
            // JSON.stringify made the text: a refusal is the depth limit, said as such.
            let messages = match read_json(&messages_json) {
                Ok(Value::Array(messages)) => Ok(messages),
                Ok(_) => Err(FerroloopError::invalid_argument(
                    "messages must be a JSON array",
                )),
                Err(err) => Err(invalid_json("the conversation", &err)),
            }?;
            let agent = self.inner.clone();
            // Only a run whose calls carry it learns of JavaScript's replies (`host_acted`).
            let host_wait = run_id.map(|_| HostWait::new());
            let watched = host_wait.clone();
            // The run keeps its history (parsed, at least as large as its JSON) until it ends.
            let history_bytes = messages_json.len();
            let stream = pump::start(
                OnAbort::TellProducer,
                aborted.unwrap_or(false),
                move |sink, cancel| async move {
                    sink.hold(history_bytes);
                    let mut options = RunOptions::default();
                    if let (Some(id), Some(wait)) = (run_id, &watched) {
                        options.host_data = Some(Arc::new(JsRunId {
                            id,
                            host_wait: wait.clone(),
                        }));
                        options.host_wait = Some(wait.clone());
                    }
                    let mut run = agent.run_messages_with(messages, options);
                    let mut cancelled = false;
                    loop {
                        let event = tokio::select! {
                            biased;
                            () = cancel.cancelled(), if !cancelled => {
                                // The run stops with `aborted` and a valid history: keep reading.
                                cancelled = true;
                                run.cancel();
                                continue;
                            }
                            event = run.next() => event,
                            () = became_idle(watched.as_ref()) => {
                                // A reader holding the event loop for the run may let it go.
                                sink.ring();
                                continue;
                            }
                        };
                        let Some(event) = event else { return };
                        let last = matches!(event, AgentEvent::Stop { .. });
                        if !sink.send_json(&event).await || last {
                            return;
                        }
                    }
                },
            )?;
            Ok(match host_wait {
                Some(wait) => {
                    let queues = self.queues.clone();
                    // Also not while calls wait to be started in JavaScript: the wake that
                    // starts them does not hold the event loop.
                    stream.with_idle_check(Box::new(move || {
                        wait.waits_only_on_host() && !queues.has_work_for_js()
                    }))
                }
                None => stream,
            })
        })
    }

    /// The JavaScript tool calls to start and to abort (`{invocations, aborts}` as JSON).
    #[napi(js_name = "drainToolsJson")]
    pub fn drain_tools_json(&self) -> napi::Result<String> {
        guard::sync(|| {
            let outbox = self.queues.drain();
            let out = serde_json::json!({
                "invocations": outbox.invocations,
                "aborts": outbox.aborts,
            });
            Ok(out.to_string())
        })
    }

    /// Delivers a batch of JS tool replies and progress reports (as `ToolExecutor.completeJson`).
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
