//! The loop: context management → model call → decode → tools (eagerly where safe) → results →
//! next turn, until the model stops or a limit does.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use futures_core::Stream;
use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::call_ids::ResponseCallIds;
use super::config::AgentConfig;
use super::context::{
    CacheBreakDetector, SUMMARY_PROMPT, check_history, check_tool_pairing, drop_thinking,
    drop_trailing_thinking, drop_trailing_thinking_before_last, drop_unanswered_server_tool_uses,
    drop_unsendable_blocks, drop_unsigned_thinking, history_from_summary, is_empty_message,
    last_compactable_result_count, microcompact, names_a_tool, object_tool_inputs,
    place_cache_breakpoints, rename_repeated_tool_use_ids, strip_tool_uses, tool_use_ids,
    trim_final_assistant_text,
};
use super::events::{AgentEvent, ContextAction, StopReason, UsageCall};
use super::host_wait::HostWait;
use super::model::{FailureDetails, Model, ModelError, ModelEvent, ModelStream};
use crate::decode::DecodeEvent;
use crate::exec::{
    CallStatus, CancellationToken, HostData, ToolExecutor, ToolResult, ToolResultContent, ToolUse,
    TurnEvent, decide_concurrency_safe, panic_message,
};
use crate::tokens::{BudgetState, ContextTracker, Usage, estimate_content, estimate_request_body};

/// A host's compaction: the history in, the compacted history out (`None`: use the built-in
/// summariser). A history that [`check_history`] refuses (it must end with a user message), or
/// that is not estimated smaller than the current one, is not used: the old one is kept (a
/// prompt-too-long refusal then ends the run with `prompt_too_long`). A hook that panics ends
/// the run with [`StopReason::Error`] (error code `hook_failed`); a cancel while it runs ends
/// the run with [`StopReason::Aborted`].
pub type CompactHook =
    Arc<dyn Fn(Vec<Value>) -> BoxFuture<'static, Option<Vec<Value>>> + Send + Sync>;

/// An agent: a model, tools and a configuration. Cheap to clone; each [`run`](Self::run) is
/// independent.
#[derive(Clone)]
pub struct Agent {
    config: Arc<AgentConfig>,
    model: Arc<dyn Model>,
    executor: Arc<ToolExecutor>,
    compact_hook: Option<CompactHook>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("model", &self.config.model)
            .field("tools", &self.executor.registry().names())
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// An agent calling `model` with the tools of `executor`.
    pub fn new(config: AgentConfig, model: Arc<dyn Model>, executor: Arc<ToolExecutor>) -> Self {
        Self {
            config: Arc::new(config),
            model,
            executor,
            compact_hook: None,
        }
    }

    /// Uses the host's compaction instead of the built-in summariser.
    pub fn with_compaction_hook(mut self, hook: CompactHook) -> Self {
        self.compact_hook = Some(hook);
        self
    }

    /// The configuration.
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// The tool definitions sent to the model: the executor's tools, sorted by name so the
    /// request prefix stays byte-identical from turn to turn (prompt caching), then the
    /// definitions of [`AgentConfig::extra`]'s `tools` array in their order (tools the provider
    /// runs itself, such as Anthropic's `web_search`; their calls come back as
    /// `server_tool_use` blocks, which the loop leaves to the provider). A tool schema without
    /// a `type` is sent with `"type": "object"` (the API requires it; a call's input is always
    /// an object); a run whose tools have a schema of another type, or whose tools share a
    /// name (an executor tool and one of `extra`), stops before any request.
    pub fn tool_definitions(&self) -> Vec<Value> {
        let registry = self.executor.registry();
        let mut names = registry.names();
        names.sort_unstable();
        let mut definitions: Vec<Value> = names
            .into_iter()
            .filter_map(|name| registry.get(name))
            .map(|tool| {
                let mut schema = tool.input_schema();
                // The API takes object schemas only, with the type said; a schema that leaves
                // it out (`{}`, or `properties` alone) is sent as the object schema it means.
                if let Value::Object(fields) = &mut schema
                    && !fields.contains_key("type")
                {
                    fields.insert("type".to_owned(), Value::String("object".to_owned()));
                }
                let mut def = json!({"name": tool.name(), "input_schema": schema});
                if !tool.description().is_empty() {
                    def["description"] = Value::String(tool.description().to_owned());
                }
                def
            })
            .collect();
        if let Some(Value::Array(extra)) = self.config.extra.get("tools") {
            definitions.extend(extra.iter().cloned());
        }
        definitions
    }

    /// Checks what every run checks of this agent's tools before its first request: the tool
    /// definitions (names the providers take, each once; object input schemas) and a
    /// `tool_choice` of [`AgentConfig::extra`] that names one of them. A host may call it when
    /// it builds the agent (the bindings do) to refuse at once what every run would stop on
    /// (with the code `invalid_tool_definition` or `invalid_configuration`).
    pub fn check_tools(&self) -> Result<(), String> {
        let definitions = self.tool_definitions();
        check_tool_definitions(&definitions, self.executor.registry().names().len())?;
        check_tool_choice(self.config.extra.get("tool_choice"), &definitions)
    }

    /// Starts a run for a user prompt (a string, or an array of content blocks). Must be called
    /// inside a tokio runtime with the time driver enabled (the run is a task of it: outside
    /// one, this panics, as `tokio::spawn` does).
    pub fn run(&self, prompt: impl Into<Value>) -> AgentRun {
        self.run_messages(vec![json!({"role": "user", "content": prompt.into()})])
    }

    /// Starts a run that continues `messages` (which must end with a user message). A conversation
    /// that fails [`check_history`] (no messages, a role other than `user` or `assistant`, content
    /// that is neither a string nor typed blocks, empty content, a text block whose text is empty
    /// or not a string (an empty prompt too), a first or last message that is not the user's, a
    /// call input other than an object, tool calls and results that do not pair up, tool results
    /// after other content in their message) makes no request: the run ends at once with
    /// [`StopReason::Error`], an error that says what is wrong and the error code `invalid_history`
    /// (`invalid_configuration` or `invalid_tool_definition` for a run whose configuration or tools
    /// the API would refuse).
    pub fn run_messages(&self, messages: Vec<Value>) -> AgentRun {
        self.run_messages_with(messages, RunOptions::default())
    }

    /// [`run_messages`](Self::run_messages), with `host` attached to every turn of the run: each
    /// tool call's [`ToolContext::host_data`](crate::exec::ToolContext::host_data) returns it
    /// (a binding finds there which run, and so which caller's context, a call belongs to).
    pub fn run_messages_with_host_data(&self, messages: Vec<Value>, host: HostData) -> AgentRun {
        let options = RunOptions {
            host_data: Some(host),
            ..RunOptions::default()
        };
        self.run_messages_with(messages, options)
    }

    /// [`run_messages`](Self::run_messages), with what a host attaches to the run.
    pub fn run_messages_with(&self, messages: Vec<Value>, options: RunOptions) -> AgentRun {
        let RunOptions {
            host_data: host,
            host_wait,
        } = options;
        let (events, rx) = mpsc::unbounded_channel();
        let cancel = self.executor.run_token().child_token();
        if let Some(wait) = &host_wait {
            wait.attach(&cancel);
        }
        let mut tracker = ContextTracker::new(self.config.family);
        tracker.set_model(&self.config.model);
        if let Some(system) = self.config.system_prompt() {
            tracker.set_system(&Value::String(system.to_owned()));
        }
        let tools = self.tool_definitions();
        tracker.set_tools(&Value::Array(tools.clone()));
        tracker.replace_messages(&messages);
        let fallback = self
            .config
            .fallback_model
            .clone()
            .filter(|fallback| *fallback != self.config.model);
        let driver = Driver {
            model: self.config.model.clone(),
            fallback,
            agent: self.clone(),
            tools,
            events,
            cancel: cancel.clone(),
            messages,
            tracker,
            cache: CacheBreakDetector::default(),
            turns: 0,
            tool_calls: 0,
            input_tokens: 0,
            output_tokens: 0,
            cost: 0.0,
            unreported_tokens: 0,
            unreported_cost: 0.0,
            paused: false,
            container: None,
            drop_stale_thinking: false,
            refused_fields: Vec::new(),
            unverifiable_reasoning: 0,
            raised_max_tokens: None,
            auto_compaction: AutoCompaction::default(),
            host,
            host_wait,
        };
        let task = tokio::spawn(driver.drive());
        AgentRun {
            events: rx,
            cancel,
            task: Some(task),
        }
    }
}

/// What a host attaches to a run ([`Agent::run_messages_with`]).
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct RunOptions {
    /// Attached to every turn of the run: each tool call's
    /// [`ToolContext::host_data`](crate::exec::ToolContext::host_data) returns it.
    pub host_data: Option<HostData>,
    /// Where the run says whether it waits on its host alone (see [`HostWait`]).
    pub host_wait: Option<HostWait>,
}

/// A run in progress: a stream of [`AgentEvent`]s ending with [`AgentEvent::Stop`]. Dropping it
/// cancels the run.
#[derive(Debug)]
pub struct AgentRun {
    events: mpsc::UnboundedReceiver<AgentEvent>,
    cancel: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl AgentRun {
    /// Cancels the run: running tools are cancelled, and the run stops with `aborted` and a
    /// history that is still valid for the API.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// The run's cancellation token (cancel it from anywhere).
    pub fn cancellation_token(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Waits for the end of the run, discarding the events before the final one.
    pub async fn finish(mut self) -> Option<AgentEvent> {
        let mut last = None;
        while let Some(event) = self.events.recv().await {
            last = Some(event);
        }
        last
    }
}

impl Stream for AgentRun {
    type Item = AgentEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AgentEvent>> {
        self.events.poll_recv(cx)
    }
}

impl Drop for AgentRun {
    fn drop(&mut self) {
        self.cancel.cancel();
        // The loop notices the cancellation and finishes its cleanup on its own.
        drop(self.task.take());
    }
}

/// The code of a conversation handed in that the API would refuse.
const INVALID_HISTORY: &str = "invalid_history";
/// The code of a configuration the API would refuse on every request.
const INVALID_CONFIGURATION: &str = "invalid_configuration";
/// The code of a tool definition the API would refuse.
const INVALID_TOOL_DEFINITION: &str = "invalid_tool_definition";
/// The code of a model that broke its contract: it panicked, or its stream ended without a
/// final item.
const INTERNAL: &str = "internal";

/// How a run ends: the stop event's reason, error and error code (set together), and what the
/// model knew of the failed call that ended it (none for any other end).
#[derive(Debug)]
struct Ending {
    reason: StopReason,
    error: Option<String>,
    error_code: Option<&'static str>,
    details: FailureDetails,
}

impl Ending {
    /// An end with nothing to report (`end_turn`, `aborted`, `max_turns`, ...).
    fn reason(reason: StopReason) -> Self {
        Self {
            reason,
            error: None,
            error_code: None,
            details: FailureDetails::default(),
        }
    }

    /// An end with an error (or a note) and its code.
    fn failed(reason: StopReason, code: &'static str, error: String) -> Self {
        Self {
            reason,
            error: Some(error),
            error_code: Some(code),
            details: FailureDetails::default(),
        }
    }

    /// The model call failed and the loop has no answer to it: an `error` stop with the
    /// failure's code, text and details.
    fn call_failed(error: ModelError) -> Self {
        let mut ending = Self::failed(StopReason::Error, error.code(), error.to_string());
        ending.details = error.details().clone();
        ending
    }

    /// The same end, with what the model knew of the failed call behind it.
    fn with_details(mut self, details: FailureDetails) -> Self {
        self.details = details;
        self
    }

    /// The prompt stayed over the context window.
    fn prompt_too_long(error: String) -> Self {
        Self::failed(StopReason::PromptTooLong, "prompt_too_long", error)
    }
}

/// The code of a `max_tokens` stop whose continuation could make no progress: nothing of the
/// cut response could be kept and there was nothing new to tell the model (the note on its cut
/// calls was there already, or no call was cut), so the next request would be the one just cut
/// (for a cut by the context window: also after the compaction before it).
const MAX_TOKENS_NO_PROGRESS: &str = "max_tokens_no_progress";

/// What cut a response.
#[derive(Debug, Clone, Copy)]
enum CutBy {
    /// `max_tokens`: the request's output limit (none: the server's own).
    OutputLimit(Option<u64>),
    /// `model_context_window_exceeded`.
    ContextWindow,
}

/// What a [`MAX_TOKENS_NO_PROGRESS`] stop says: the limit that cut the response (the server's
/// own when the request had none), and the calls it cut.
fn no_progress_error(cut_by: CutBy, cut_calls: &[String]) -> String {
    let limit = match cut_by {
        CutBy::OutputLimit(Some(limit)) => format!("the output limit of {limit} tokens"),
        CutBy::OutputLimit(None) => "the server's output limit".to_owned(),
        CutBy::ContextWindow => "the model's context window".to_owned(),
    };
    let cut = if cut_calls.is_empty() {
        String::new()
    } else {
        format!(" (it was cut inside a call to {})", cut_calls.join(", "))
    };
    format!(
        "{limit} cut the response and nothing of it could be kept{cut}: a continuation would \
         send the request just cut again"
    )
}

/// Whether `event` is a message delta naming a stop reason other than `tool_use`: the
/// response's calls will get no results (an Anthropic-shaped delta, as the OpenAI translations
/// also make; a delta without a stop reason says nothing yet).
fn stops_without_tool_use(event: &DecodeEvent) -> bool {
    matches!(
        event,
        DecodeEvent::MessageDelta { delta, .. }
            if delta
                .get("stop_reason")
                .and_then(Value::as_str)
                .is_some_and(|reason| reason != "tool_use")
    )
}

/// The usage a response's stream reported so far: its `message_start`'s, with the fields of
/// each later `message_delta`'s usage that are not null (cumulative values, assigned).
#[derive(Debug, Default)]
struct StreamedUsage {
    /// The usage fields reported so far, later values over earlier ones.
    fields: serde_json::Map<String, Value>,
    /// Whether the stream delivered any event: a call that did was billed, reported or not.
    delivered: bool,
}

impl StreamedUsage {
    fn observe(&mut self, event: &DecodeEvent) {
        self.delivered = true;
        let usage = match event {
            DecodeEvent::MessageStart { message } => message.get("usage"),
            DecodeEvent::MessageDelta { usage, .. } => Some(usage),
            _ => None,
        };
        if let Some(Value::Object(fields)) = usage {
            for (key, value) in fields {
                if !value.is_null() {
                    self.fields.insert(key.clone(), value.clone());
                }
            }
        }
    }

    /// The usage reported, if any the loop can read.
    fn reported(&self) -> Option<Value> {
        let usage = Value::Object(self.fields.clone());
        Usage::from_json(&usage).map(|_| usage)
    }

    /// The usage reported, as the message [`record_usage`](Driver::record_usage) reads
    /// (`{"usage": ...}`), if any.
    fn reported_message(&self) -> Option<Value> {
        self.reported().map(|usage| json!({ "usage": usage }))
    }

    /// What a call cancelled mid-stream was billed for, as the message
    /// [`record_usage`](Driver::record_usage) reads (`{"usage": ...}`): the usage it
    /// reported; else, when it delivered anything (OpenAI's streams report usage only at their
    /// end), no usage, so that it has its `usage` event with `usage: null` and counts by the
    /// estimate of its request, as a stream that broke off before its usage. `None` for a call
    /// cancelled before its first event, of which nothing is known.
    fn billed_when_cancelled(&self) -> Option<Value> {
        self.reported_message()
            .or_else(|| self.delivered.then(|| json!({})))
    }
}

/// The consecutive overloads a call's retries reported (any other failure resets them), which
/// count toward [`AgentConfig::fallback_after_529_retries`]: HTTP 529s, and overloads that came
/// without one (Anthropic's `overloaded_error` event first in a 200, OpenAI's
/// `server_is_overloaded`). Displayed as the fallback's `error`, which says which they were.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Overloads {
    /// HTTP 529 responses.
    http_529: u32,
    /// Overloads reported without a 529.
    without_529: u32,
}

impl Overloads {
    /// Counts a retry: an overload (a 529, or `overloaded`) adds one, anything else resets.
    fn observe(&mut self, status: Option<u16>, overloaded: bool) {
        if status == Some(529) {
            self.http_529 += 1;
        } else if overloaded {
            self.without_529 += 1;
        } else {
            *self = Self::default();
        }
    }

    fn total(self) -> u32 {
        self.http_529.saturating_add(self.without_529)
    }
}

impl std::fmt::Display for Overloads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self {
            http_529,
            without_529,
        } = *self;
        let total = self.total();
        match (http_529, without_529) {
            (_, 0) => write!(f, "{total} consecutive HTTP 529 responses"),
            (0, _) => write!(
                f,
                "{total} consecutive overloaded errors (without an HTTP 529: the provider \
                 reported the overload in its response stream)"
            ),
            _ => {
                let plural = if without_529 == 1 { "" } else { "s" };
                write!(
                    f,
                    "{total} consecutive overloaded responses ({http_529} HTTP 529, \
                     {without_529} overloaded error{plural} without one)"
                )
            }
        }
    }
}

/// How one model call ended.
enum CallOutcome {
    /// The message completed.
    Completed(Value),
    /// The call failed.
    Failed(ModelError),
    /// The run was cancelled during the call.
    Cancelled,
}

/// The state of one run.
struct Driver {
    agent: Agent,
    /// The model requests go to (the fallback after a switch).
    model: String,
    /// The fallback not used yet.
    fallback: Option<String>,
    tools: Vec<Value>,
    events: mpsc::UnboundedSender<AgentEvent>,
    cancel: CancellationToken,
    messages: Vec<Value>,
    tracker: ContextTracker,
    cache: CacheBreakDetector,
    turns: u32,
    tool_calls: u32,
    input_tokens: u64,
    output_tokens: u64,
    cost: f64,
    /// The estimated tokens of the calls whose usage was not reported, which the token budget
    /// counts (the totals do not).
    unreported_tokens: u64,
    /// Their estimated cost, which the cost budget counts.
    unreported_cost: f64,
    /// The last message is a paused assistant turn (`pause_turn`) that the next response
    /// continues.
    paused: bool,
    /// The provider's container of this run (code execution), sent with every later request.
    container: Option<String>,
    /// Whether requests ask the API to drop thinking blocks whose prefix the loop changed
    /// (microcompact, compaction) instead of refusing them: set once a request was refused for
    /// it ([`is_stale_thinking_error`]), kept for the rest of the run.
    drop_stale_thinking: bool,
    /// Request fields a server refused ([`refused_field`]): requests send them as `null`, which
    /// the OpenAI translations leave out, for the rest of the run. Without `stream_options`
    /// usage is estimated; without `include` a Responses model's reasoning is not kept; without
    /// `max_tokens` the server's own output limit holds.
    refused_fields: Vec<&'static str>,
    /// Requests leave out the thinking of the history's messages before this one: a Responses
    /// model could not verify its encrypted content ([`is_unverifiable_reasoning_error`]).
    unverifiable_reasoning: usize,
    /// The output limit of this turn's requests when a cut by `max_tokens` raised it
    /// ([`AgentConfig::escalated_max_tokens`]): kept by the continuations of the turn, back
    /// to the configured one at the next turn, and raised at most once per turn.
    raised_max_tokens: Option<u64>,
    /// Whether auto-compaction is still worth trying.
    auto_compaction: AutoCompaction,
    /// What the host attached to the run, attached to each of its turns.
    host: Option<HostData>,
    /// Where the run says when it waits on its host alone.
    host_wait: Option<HostWait>,
}

/// Auto-compaction's circuit breaker: without it, a compaction that cannot get the context
/// under the threshold (a latest prompt bigger than the threshold, which every summary keeps
/// whole) or a summariser that keeps failing would be tried again before every call, a
/// summary call per turn, the model's tool results summarised away each time. At the blocking
/// limit compaction is still tried: the run would stop otherwise.
#[derive(Debug, Default)]
struct AutoCompaction {
    /// Consecutive attempts that did not compact.
    failures: u32,
    /// A compaction succeeded and the context stayed over the threshold.
    exhausted: bool,
}

impl AutoCompaction {
    /// Consecutive failed attempts after which auto-compaction stops for the run.
    const MAX_FAILURES: u32 = 3;

    fn may_try(&self) -> bool {
        !self.exhausted && self.failures < Self::MAX_FAILURES
    }

    fn record(&mut self, compacted: bool, still_over: bool) {
        if compacted {
            self.failures = 0;
            self.exhausted = still_over;
        } else {
            self.failures += 1;
        }
    }
}

impl Driver {
    fn emit(&self, event: AgentEvent) {
        // A dropped receiver means nobody listens; the run goes on until cancelled.
        let _ = self.events.send(event);
    }

    fn config(&self) -> &AgentConfig {
        &self.agent.config
    }

    /// Whether `message` refuses a request field not left out yet; if so, it is from now on.
    fn refuses_a_new_field(&mut self, message: &str) -> bool {
        match refused_field(message) {
            Some(field) if !self.refused_fields.contains(&field) => {
                self.refused_fields.push(field);
                true
            }
            _ => false,
        }
    }

    /// Whether the history holds thinking that requests do not leave out yet.
    fn has_reasoning_to_leave_out(&self) -> bool {
        self.messages
            .get(self.unverifiable_reasoning..)
            .unwrap_or_default()
            .iter()
            .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
            .filter_map(|m| m.get("content").and_then(Value::as_array))
            .flatten()
            .any(|b| {
                matches!(
                    b.get("type").and_then(Value::as_str),
                    Some("thinking" | "redacted_thinking")
                )
            })
    }

    /// Sends the refused fields as `null`, which the OpenAI translations leave out.
    fn leave_out_refused_fields(&self, request: &mut Value) {
        for field in &self.refused_fields {
            request[*field] = Value::Null;
        }
    }

    /// Starts a model call. The model may be the host's: a panic starting the call or polling
    /// its stream becomes a failed call (the run stops with `error`) instead of taking the
    /// loop's task down, which would lose the stop event.
    fn call_model(&self, request: Value) -> ModelStream {
        let model = &self.agent.model;
        match std::panic::catch_unwind(AssertUnwindSafe(|| model.stream(request))) {
            Ok(stream) => Box::pin(AssertUnwindSafe(stream).catch_unwind().map(
                |item| match item {
                    Ok(event) => event,
                    Err(panic) => model_panicked(panic.as_ref()),
                },
            )),
            Err(panic) => Box::pin(futures_util::stream::once(std::future::ready(
                model_panicked(panic.as_ref()),
            ))),
        }
    }

    /// Runs the loop to its `stop` event. A panic in the loop itself (the model's and the
    /// hooks' are caught where they are called) still ends the run with a `stop` event, reason
    /// `error`, code `internal`, and the history as far as it got: without it the run's events
    /// ended with no `stop` at all, which the bindings read as a run that never ended.
    async fn drive(mut self) {
        let ended = AssertUnwindSafe(self.run_to_stop()).catch_unwind().await;
        if let Err(panic) = ended {
            let message = panic_message(panic.as_ref());
            tracing::error!(%message, "the agent loop panicked");
            let ending = Ending::failed(
                StopReason::Error,
                INTERNAL,
                format!("the agent loop panicked: {message}"),
            );
            let stop = self.stop_event(ending);
            self.emit(stop);
        }
    }

    /// The loop, from the checks of what the caller handed in to the `stop` event it sends.
    async fn run_to_stop(&mut self) {
        // A conversation the caller handed in is checked before any request: the loop only
        // keeps the history valid, it does not make it so (and the API would refuse it).
        let refused = |code: &'static str, what: &'static str| {
            move |problem: String| {
                Ending::failed(StopReason::Error, code, format!("{what}: {problem}"))
            }
        };
        let checked = self
            .config()
            .check()
            .map_err(refused(INVALID_CONFIGURATION, "invalid configuration"))
            .and_then(|()| {
                let count = self.agent.executor.registry().names().len();
                check_tool_definitions(&self.tools, count)
                    .map_err(refused(INVALID_TOOL_DEFINITION, "invalid tool definition"))
            })
            .and_then(|()| {
                check_tool_choice(self.config().extra.get("tool_choice"), &self.tools)
                    .map_err(refused(INVALID_CONFIGURATION, "invalid configuration"))
            })
            .and_then(|()| {
                check_history(&self.messages)
                    .map_err(refused(INVALID_HISTORY, "invalid conversation"))
            });
        // A host's history made by a backend that numbers each response's calls holds one id
        // for several calls, which Anthropic refuses: the later ones are renamed (with their
        // results), which loses nothing.
        if checked.is_ok() && rename_repeated_tool_use_ids(&mut self.messages) > 0 {
            self.tracker.replace_messages(&self.messages);
        }
        let ending = match checked {
            Ok(()) => {
                let stop = self.turns_loop().await;
                debug_assert!(check_tool_pairing(&self.messages).is_ok());
                if let Err(broken) = check_tool_pairing(&self.messages) {
                    tracing::error!(%broken, "history invariant broken at the end of a run");
                }
                stop
            }
            Err(refused) => {
                tracing::debug!(problem = ?refused.error, "run refused");
                refused
            }
        };
        let stop = self.stop_event(ending);
        self.emit(stop);
    }

    /// The `stop` event of an `ending`, with the history (taken out of the driver) and the
    /// run's counts.
    fn stop_event(&mut self, ending: Ending) -> AgentEvent {
        let Ending {
            reason,
            error,
            error_code,
            details,
        } = ending;
        // A run that stops after a paused turn (a limit, a budget, an abort, a failed call)
        // ends its history with the paused message, which the API refuses as the final
        // message with trailing whitespace: it is handed back as its continuation's request
        // would have sent it.
        if self.paused {
            trim_final_assistant_text(&mut self.messages);
        }
        AgentEvent::Stop {
            reason,
            error,
            error_code,
            status: details.status,
            request_id: details.request_id,
            retry_after: details.retry_after,
            messages: std::mem::take(&mut self.messages),
            turns: self.turns,
            tool_calls: self.tool_calls,
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
        }
    }

    async fn turns_loop(&mut self) -> Ending {
        let mut continuations = 0;
        let mut reactive_compaction_done = false;
        let mut truncation_retry_done = false;
        // The request a cut by the context window left unchanged, of which nothing could be
        // kept, with the stop to make if the next request is still the same one.
        let mut unchanged_means_no_progress: Option<(Value, Ending)> = None;
        loop {
            #[cfg(test)]
            if self.model == tests::PANICS_AFTER_ONE_TURN && self.turns == 1 {
                panic!("a bug in the loop, injected by a test");
            }
            if self.cancel.is_cancelled() {
                return Ending::reason(StopReason::Aborted);
            }
            if self.turns >= self.config().limits.max_turns {
                return Ending::reason(StopReason::MaxTurns);
            }
            // Checked after every call too; here for a budget spent before the first one (a
            // budget of 0, as a host hands the rest of a shared budget to a run).
            if let Some(stop) = self.over_budget() {
                return stop;
            }
            if let Some(reason) = self.manage_context().await {
                return reason;
            }
            let mut request = self.build_request();
            let estimated = estimate_request_body(&request, self.config().family).total();
            self.fit_raised_max_tokens(&mut request, estimated);
            if let Some((cut, ending)) = unchanged_means_no_progress.take()
                && request == cut
            {
                return ending;
            }
            self.turns += 1;
            let turn_number = self.turns;
            self.emit(AgentEvent::TurnStart {
                turn: turn_number,
                estimated_input_tokens: estimated,
            });
            let started = Instant::now();
            let mut stream = self.call_model(request.clone());
            let mut turn = match &self.host {
                Some(host) => self.agent.executor.turn_with_host_data(host.clone()),
                None => self.agent.executor.turn(),
            };
            let handle = turn.handle();
            let mut held: Vec<(ToolUse, bool)> = Vec::new();
            let mut eager = true;
            // The response said it stops for something other than tool use: its calls were
            // cancelled then.
            let mut discarded_early = false;
            let mut submitted: Vec<ToolUse> = Vec::new();
            let mut ttft = None;
            let mut outcome = None;
            let mut results: Vec<Option<ToolResult>> = Vec::new();
            // Consecutive overloads within the call: HTTP 529s, and overloads without one (an
            // `overloaded_error` event first in a 200), counted apart for the fallback's text.
            let mut overloads = Overloads::default();
            let mut repeated_529 = false;
            let mut not_run: Vec<(String, String)> = Vec::new();
            let mut call_ids = ResponseCallIds::after(&self.messages);
            // The usage the stream reported so far (its start, its deltas), which a call
            // cancelled before its end was billed for.
            let mut streamed_usage = StreamedUsage::default();
            while outcome.is_none() {
                tokio::select! {
                    biased;
                    () = self.cancel.cancelled() => outcome = Some(CallOutcome::Cancelled),
                    Some(event) = turn.next_event(), if !submitted.is_empty() => {
                        self.on_turn_event(&submitted, event, &mut results);
                    }
                    event = stream.next() => match event {
                        Some(ModelEvent::Decoded(decoded)) => {
                            if ttft.is_none() {
                                ttft = Some(started.elapsed());
                            }
                            streamed_usage.observe(&decoded);
                            // The stop reason comes in the message's last delta, after every
                            // block. A response that does not stop for tool use gets no
                            // results, so the calls started early are cancelled as soon as
                            // it says so, not left to run until the message ends (those that
                            // finished already did run), and no call starts after it. Only
                            // once a call started: an OpenAI translation that reports calls
                            // after the delta (a server sending its output only in its final
                            // response) names the reason before it saw them, and the final
                            // message's decides; one that saw a call names the final reason.
                            if !discarded_early
                                && !submitted.is_empty()
                                && stops_without_tool_use(&decoded)
                            {
                                discarded_early = true;
                                eager = false;
                                handle.discard();
                            }
                            let decoded = call_ids.dedupe(decoded, turn_number);
                            if let DecodeEvent::ToolUseInvalid { id, name, error, .. } = &decoded {
                                not_run.push((id.clone(), format!(
                                    "Invalid input for tool '{name}': the arguments are not valid JSON ({error}). The call was not run."
                                )));
                            }
                            if let Some(tool_use) = self.on_decoded(decoded) {
                                let safe = self
                                    .agent
                                    .executor
                                    .registry()
                                    .get(&tool_use.name)
                                    .is_some_and(|tool| {
                                        decide_concurrency_safe(tool.as_ref(), &tool_use.input)
                                    });
                                // Safe calls start at once while the message streams; the first
                                // unsafe call, and every call after it, waits for the message
                                // to end, so request order and the barrier are kept.
                                if eager && safe {
                                    if handle.submit_decided(tool_use.clone(), safe).is_ok() {
                                        submitted.push(tool_use);
                                    }
                                } else {
                                    eager = false;
                                    held.push((tool_use, safe));
                                }
                            }
                        }
                        Some(ModelEvent::Retry { attempt, status, code, wait, overloaded }) => {
                            if self.stops_waiting(&mut overloads, status, overloaded) {
                                // Stop waiting for an overloaded model: this retry is not made.
                                repeated_529 = true;
                                outcome = Some(CallOutcome::Failed(ModelError::overloaded(
                                    overloads.to_string(),
                                )));
                            } else {
                                self.emit(AgentEvent::Retry { call: UsageCall::Turn, attempt, status, code, overloaded, wait });
                            }
                        }
                        Some(ModelEvent::Completed { message, time_to_first_token, .. }) => {
                            ttft = time_to_first_token.or(ttft);
                            outcome = Some(CallOutcome::Completed(message));
                        }
                        Some(ModelEvent::Failed(error)) => outcome = Some(CallOutcome::Failed(error)),
                        None => outcome = Some(CallOutcome::Failed(ModelError::with_code(
                            INTERNAL,
                            "the model stream ended without a message",
                        ))),
                    },
                }
            }
            drop(stream);
            let Some(outcome) = outcome else {
                continue;
            };
            let message = match outcome {
                CallOutcome::Completed(message) => message,
                CallOutcome::Cancelled => {
                    // Nothing of this response enters history: its calls are discarded and
                    // reported, so nothing runs on after the run ends.
                    self.settle(turn, &submitted, &mut results, true).await;
                    // What the provider reported before the cancel was billed: the totals
                    // count it and a `usage` event reports it, as for a broken stream.
                    if let Some(partial) = streamed_usage.billed_when_cancelled() {
                        self.record_usage(turn_number, &request, &partial, estimated, ttft, false);
                    }
                    self.emit_turn_end(turn_number, None);
                    return Ending::reason(StopReason::Aborted);
                }
                CallOutcome::Failed(error) => {
                    self.settle(turn, &submitted, &mut results, true).await;
                    // A stream that failed after `message_start` (it broke off, or an error
                    // event came: overloaded, a server error, ...) was billed for its prompt
                    // and what it streamed: the run's totals and budgets count what the
                    // provider reported, and a `usage` event reports it as for any call (the
                    // totals would otherwise hold usage no event accounts for). Once: a
                    // truncated stream's partial message holds the same usage as its events.
                    // Nothing of it enters history.
                    if let Some(partial) = reported_before_failing(&error, &streamed_usage) {
                        self.record_usage(turn_number, &request, &partial, estimated, ttft, false);
                    }
                    self.emit_turn_end(turn_number, None);
                    match error {
                        ModelError::Overloaded { message, .. } if self.fallback.is_some() => {
                            // The partial response was discarded above (its early calls
                            // cancelled); the same turn goes to the fallback model.
                            self.fall_back(UsageCall::Turn, message, repeated_529);
                            self.turns -= 1;
                            continue;
                        }
                        ModelError::Other { message, .. }
                            if !self.drop_stale_thinking && is_stale_thinking_error(&message) =>
                        {
                            // Refused before any output, so nothing was streamed or billed:
                            // the same turn again, asking the API to drop the stale blocks.
                            tracing::warn!(%message, "thinking blocks refused after a history edit; resending with drop_block");
                            self.drop_stale_thinking = true;
                            self.turns -= 1;
                            continue;
                        }
                        ModelError::Other { message, .. }
                        | ModelError::Truncated {
                            reason: message, ..
                        } if is_unverifiable_reasoning_error(&message)
                            && self.has_reasoning_to_leave_out() =>
                        {
                            // Refused before any output (or in a `response.failed` event, the
                            // stream then discarded as a truncated one): the same turn again,
                            // the reasoning the history holds left out (the run's later
                            // reasoning goes back).
                            if let Some(stop) = self.over_budget() {
                                return stop;
                            }
                            tracing::warn!(%message, "encrypted reasoning refused; resending without the history's");
                            self.unverifiable_reasoning = self.messages.len();
                            self.turns -= 1;
                            continue;
                        }
                        ModelError::Other { message, .. } if self.refuses_a_new_field(&message) => {
                            // An OpenAI-compatible server that refuses fields it does not know
                            // (`stream_options`), or a Responses model that has no encrypted
                            // reasoning (`include`): the same turn again without the field.
                            tracing::warn!(%message, "a request field was refused; resending without it");
                            self.turns -= 1;
                            continue;
                        }
                        error
                            if !truncation_retry_done
                                && broke_off_transiently(&error, ttft.is_some()) =>
                        {
                            if let Some(stop) = self.over_budget() {
                                return stop;
                            }
                            tracing::warn!(%error, "stream broke off; retrying the turn once");
                            truncation_retry_done = true;
                            self.turns -= 1;
                            continue;
                        }
                        ModelError::PromptTooLong { message, details } => {
                            // The stop carries the refused call's details: the failure is why
                            // the run ends (not a stop of the compaction's own).
                            if reactive_compaction_done {
                                return Ending::prompt_too_long(message).with_details(details);
                            }
                            reactive_compaction_done = true;
                            // Refused before any output: the same turn is asked again once the
                            // history is smaller (it counts once, as after a refused field), and
                            // the summariser's `usage` events carry its number. A run that ends
                            // here took the refused call as its turn.
                            self.turns -= 1;
                            // Without a smaller history the same request would be refused
                            // again: stop instead of sending it a second time.
                            let ending = match self.compact("reactive").await {
                                Ok(true) => self.over_budget(),
                                Ok(false) => {
                                    Some(Ending::prompt_too_long(message).with_details(details))
                                }
                                Err(stop) => Some(stop),
                            };
                            if let Some(stop) = ending {
                                self.turns += 1;
                                return stop;
                            }
                            continue;
                        }
                        other => return Ending::call_failed(other),
                    }
                }
            };
            truncation_retry_done = false;
            // A response came back: the context fits again. A refusal later in the run (the
            // history has grown since) is answered by a compaction of its own; only one
            // right after another, with no response between, stops the run.
            reactive_compaction_done = false;
            let stop_reason = message
                .get("stop_reason")
                .and_then(Value::as_str)
                .map(str::to_owned);
            // A response cut by a limit the model could go beyond is asked again with a
            // higher one before anything of it is kept (a continuation cannot finish a cut
            // call, which is not run). Decided before a paused turn is merged: the paused
            // message stays in history for the request sent again.
            if let Some(to) =
                self.raise_max_tokens(stop_reason.as_deref(), &request, &message, estimated)
            {
                self.settle(turn, &submitted, &mut results, true).await;
                self.record_usage(turn_number, &request, &message, estimated, ttft, false);
                self.emit_turn_end(turn_number, stop_reason);
                if let Some(stop) = self.over_budget() {
                    return stop;
                }
                let from = request["max_tokens"].as_u64().unwrap_or_default();
                tracing::debug!(
                    from,
                    to,
                    "response cut by max_tokens; asking the turn again with a higher limit"
                );
                self.raised_max_tokens = Some(to);
                self.emit(AgentEvent::MaxTokensRaised {
                    turn: turn_number,
                    from,
                    to,
                });
                self.turns -= 1;
                continue;
            }
            // Content that is no list of blocks (a broken server's) becomes none.
            let content = message
                .get("content")
                .filter(|c| c.is_array())
                .cloned()
                .unwrap_or_else(|| json!([]));
            let mut assistant = json!({"role": "assistant", "content": content});
            call_ids.apply(&mut assistant, turn_number);
            // The API refuses an empty text block in history (a response cut right after a
            // text block opened, a provider that announces a call with one), or one without a
            // type.
            drop_unsendable_blocks(&mut assistant);
            // Nor a call input other than an object (the call was answered with an error).
            object_tool_inputs(&mut assistant);
            if let Some(id) = container_id(&message) {
                self.container = Some(id);
            }
            // The answer to a paused turn continues it: its blocks join the paused message, so
            // history keeps one assistant message per turn and roles still alternate.
            if std::mem::take(&mut self.paused) {
                self.merge_into_paused(&mut assistant);
            }

            // `tool_use` with no call to answer (a misbehaving server or proxy; calls left out
            // of history, such as one without a name) ends the turn like `end_turn`: answering
            // it would send an empty user message, which the API refuses (the OpenAI
            // translation maps such a finish the same way). The answers are the message's
            // calls', whatever was submitted.
            let has_calls = !tool_use_ids(&assistant).is_empty();
            match stop_reason.as_deref() {
                Some("tool_use") if has_calls => {
                    // Thinking after the last call (a server's order, not Anthropic's) would
                    // end the message, which requests leave out anyway: history drops it too,
                    // as it does after any other stop.
                    drop_trailing_thinking(&mut assistant);
                    for (tool_use, safe) in held.drain(..) {
                        // Decided once, above: a host's per-input predicate is not asked again.
                        if turn.submit_decided(tool_use.clone(), safe).is_ok() {
                            submitted.push(tool_use);
                        }
                    }
                    let cancelled = self.cancel.is_cancelled();
                    // Not discarded even when the run was cancelled: this response enters
                    // history, and its calls are cancelled with the turn (settle sees the run's
                    // cancel at once), their results saying so rather than that the response
                    // would be asked again.
                    let answered = self.settle(turn, &submitted, &mut results, false).await;
                    let content = results_in_order(&assistant, answered, not_run);
                    self.push_message(assistant);
                    self.record_usage(turn_number, &request, &message, estimated, ttft, true);
                    self.push_message(json!({"role": "user", "content": content}));
                    self.emit_turn_end(turn_number, stop_reason);
                    if cancelled || self.cancel.is_cancelled() {
                        return Ending::reason(StopReason::Aborted);
                    }
                    if let Some(reason) = self.over_budget() {
                        return reason;
                    }
                    continuations = 0;
                    self.raised_max_tokens = None;
                }
                Some("pause_turn") => {
                    // The provider paused a long server-side turn (server tools such as web
                    // search): the response goes back as it is and the model carries on. A
                    // client call in it was not asked to run (the API ends a turn that needs
                    // one with `tool_use`), so it is dropped like any unrequested call (one
                    // started early was cancelled when the stop reason came).
                    self.settle(turn, &submitted, &mut results, true).await;
                    strip_tool_uses(&mut assistant);
                    drop_trailing_thinking(&mut assistant);
                    let kept = !is_empty_message(&assistant);
                    if kept {
                        self.push_message(assistant);
                        self.paused = true;
                    }
                    self.record_usage(turn_number, &request, &message, estimated, ttft, kept);
                    self.emit_turn_end(turn_number, stop_reason);
                    if let Some(reason) = self.over_budget() {
                        return reason;
                    }
                }
                Some("max_tokens" | "model_context_window_exceeded") => {
                    // Calls started early are cancelled; the cut response keeps its text, its
                    // signed thinking and its answered server tool calls only, so history stays
                    // valid. (A response cut by the context window is
                    // continued the same way: the context management before the next call
                    // compacts if the window is the limit.)
                    self.settle(turn, &submitted, &mut results, true).await;
                    let by_output_limit = stop_reason.as_deref() == Some("max_tokens");
                    let cut_calls = tool_use_names(&assistant);
                    strip_tool_uses(&mut assistant);
                    drop_unanswered_server_tool_uses(&mut assistant);
                    drop_unsigned_thinking(&mut assistant);
                    drop_trailing_thinking(&mut assistant);
                    let text_cut = !is_empty_message(&assistant);
                    if text_cut {
                        self.push_message(assistant);
                    }
                    self.record_usage(turn_number, &request, &message, estimated, ttft, text_cut);
                    self.emit_turn_end(turn_number, stop_reason);
                    if let Some(reason) = self.over_budget() {
                        return reason;
                    }
                    if continuations >= self.config().max_continuations {
                        return Ending::reason(StopReason::MaxTokens);
                    }
                    let prompt = self.config().continuation_prompt.clone();
                    // The model is told its calls have no results: else it resumes as if they
                    // had been, or, with nothing of the response kept, the same request goes
                    // out again and is cut the same way (a file too big to write in one call).
                    let note = (!cut_calls.is_empty()).then(|| cut_calls_note(&cut_calls));
                    if text_cut {
                        let prompt = match note {
                            Some(note) => format!("{prompt}\n\n{note}"),
                            None => prompt,
                        };
                        self.push_message(json!({"role": "user", "content": prompt}));
                    } else if !note.is_some_and(|note| self.add_note_to_last_user_message(&note)) {
                        // Nothing of the response was kept and the note is already there (or
                        // there is no call to name): the next request would be the one just
                        // cut, to be cut the same way, a whole generation each time.
                        let cut_by = if by_output_limit {
                            CutBy::OutputLimit(request.get("max_tokens").and_then(Value::as_u64))
                        } else {
                            CutBy::ContextWindow
                        };
                        let ending = Ending::failed(
                            StopReason::MaxTokens,
                            MAX_TOKENS_NO_PROGRESS,
                            no_progress_error(cut_by, &cut_calls),
                        );
                        if by_output_limit {
                            return ending;
                        }
                        // A cut by the context window is left to the context management
                        // before the next call, whose compaction may shrink the history; the
                        // run stops there if it did not change the request (a lone prompt,
                        // auto-compaction given up), which would be cut the same way again.
                        unchanged_means_no_progress = Some((request.clone(), ending));
                    }
                    continuations += 1;
                }
                other => {
                    self.settle(turn, &submitted, &mut results, true).await;
                    // Calls in a response that did not ask for them to run get no results and
                    // leave history: the sealed ones, and also those never sealed (a refusal
                    // cut inside the input) or not valid JSON, which nothing would answer. A
                    // concurrency-safe one started while the response streamed was cancelled
                    // when the stop reason came (it may have run, in part or whole, and was
                    // reported and counted); the others never started.
                    strip_tool_uses(&mut assistant);
                    // A refusal cuts the output wherever it is, a thought before its
                    // signature too: the API refuses such a block sent back.
                    if other == Some("refusal") {
                        drop_unsigned_thinking(&mut assistant);
                    }
                    drop_trailing_thinking(&mut assistant);
                    let kept = !is_empty_message(&assistant);
                    if kept {
                        self.push_message(assistant);
                    }
                    self.record_usage(turn_number, &request, &message, estimated, ttft, kept);
                    self.emit_turn_end(turn_number, stop_reason.clone());
                    // The model ended the run itself: a budget this last call reached stopped
                    // nothing (a `budget` stop says the work was cut short), so it is not one.
                    let reason = match other {
                        Some("stop_sequence") => StopReason::StopSequence,
                        Some("refusal") => StopReason::Refusal,
                        _ => StopReason::EndTurn,
                    };
                    return Ending::reason(reason);
                }
            }
        }
    }

    /// Handles one decoded event; returns a sealed tool call (one whose input is not valid JSON is
    /// not run; it is answered in [`results_in_order`]). A call without a name is not returned:
    /// it names no tool, so it is never submitted to the executor, and it leaves history
    /// ([`drop_unsendable_blocks`]) with nothing to answer.
    fn on_decoded(&self, event: DecodeEvent) -> Option<ToolUse> {
        match event {
            DecodeEvent::TextDelta { text, .. } => {
                self.emit(AgentEvent::TextDelta { text });
                None
            }
            DecodeEvent::ThinkingDelta { thinking, .. } => {
                self.emit(AgentEvent::ThinkingDelta { thinking });
                None
            }
            DecodeEvent::ToolUseReady {
                id, name, input, ..
            } if names_a_tool(&name) => Some(ToolUse::new(id, name, input)),
            _ => None,
        }
    }

    fn on_turn_event(
        &self,
        submitted: &[ToolUse],
        event: TurnEvent,
        results: &mut Vec<Option<ToolResult>>,
    ) {
        match event {
            TurnEvent::Started {
                index,
                tool_use_id,
                tool,
                ..
            } => {
                let input = submitted
                    .get(index)
                    .map(|t| t.input.clone())
                    .unwrap_or(Value::Null);
                self.emit(AgentEvent::ToolStarted {
                    tool_use_id,
                    name: tool,
                    input,
                });
            }
            TurnEvent::Progress {
                tool_use_id, data, ..
            } => self.emit(AgentEvent::ToolProgress { tool_use_id, data }),
            TurnEvent::Finished {
                tool_use_id,
                tool,
                status,
                duration,
                ..
            } => self.emit(AgentEvent::ToolFinished {
                tool_use_id,
                name: tool,
                is_error: !matches!(status, CallStatus::Succeeded),
                status: status.as_str().to_owned(),
                duration,
            }),
            TurnEvent::Detached {
                tool_use_id, tool, ..
            } => {
                tracing::warn!(%tool_use_id, %tool, "tool call detached after its cleanup grace");
            }
            TurnEvent::Result { index, result } => {
                if results.len() <= index {
                    results.resize(index + 1, None);
                }
                results[index] = Some(result);
            }
        }
    }

    /// Seals the turn (cancelling it first when `cancel`), drives it to the end while reporting
    /// its events, and returns one result per submitted call, in order. Every submitted call
    /// counts toward the run's `tool_calls`, whether its result is kept or discarded with its
    /// response: each had its `tool_finished` event (the executor gives every call one), so a
    /// host adding those up gets the stop event's figure.
    async fn settle(
        &mut self,
        mut turn: crate::exec::Turn,
        submitted: &[ToolUse],
        results: &mut Vec<Option<ToolResult>>,
        cancel: bool,
    ) -> Vec<ToolResult> {
        if cancel {
            turn.discard();
        }
        turn.seal();
        let mut cancelled = cancel;
        loop {
            tokio::select! {
                biased;
                () = self.cancel.cancelled(), if !cancelled => {
                    // The run was cancelled while tools ran: cancel them; each still answers.
                    cancelled = true;
                    turn.cancel();
                }
                event = std::future::poll_fn(|cx| match &self.host_wait {
                    Some(wait) => wait.poll_turn(&mut turn, cx),
                    None => turn.poll_next_event(cx),
                }) => match event {
                    Some(event) => self.on_turn_event(submitted, event, results),
                    None => break,
                },
            }
        }
        self.tool_calls = self
            .tool_calls
            .saturating_add(u32::try_from(submitted.len()).unwrap_or(u32::MAX));
        match turn.finish().await {
            Ok(final_results) => final_results,
            Err(error) => {
                tracing::warn!(%error, "tool turn ended with an error");
                // Every call still gets exactly one result.
                submitted
                    .iter()
                    .enumerate()
                    .map(|(i, call)| {
                        results.get(i).cloned().flatten().unwrap_or_else(|| {
                            ToolResult::error(call.id.clone(), format!("Tool turn failed: {error}"))
                        })
                    })
                    .collect()
            }
        }
    }

    /// The higher output limit to ask a turn again with, if the response (to `request`) was
    /// cut by `max_tokens` and the limit may be raised: not twice in a turn, nor once the
    /// server refused the field (the request holds none).
    fn raise_max_tokens(
        &self,
        stop_reason: Option<&str>,
        request: &Value,
        message: &Value,
        estimated: u64,
    ) -> Option<u64> {
        if stop_reason != Some("max_tokens") || self.raised_max_tokens.is_some() {
            return None;
        }
        let current = request.get("max_tokens").and_then(Value::as_u64)?;
        // What the provider counted for the input, else the estimate.
        let usage = message.get("usage").and_then(Usage::from_json);
        let input = usage.map_or(estimated, |usage| usage.input_total());
        // The cut response's usage is not counted yet: what it spent is not left.
        self.raised_limit(current, input, usage)
    }

    /// The raised output limit for a request with output limit `current` and `input` input
    /// tokens ([`AgentConfig::raised_max_tokens`]), within what the run's budgets leave once
    /// `uncounted` (a response's usage not counted yet) is spent: raised whatever the budget,
    /// one call could overrun it by the whole raise. `None` when that is not above `current`.
    fn raised_limit(&self, current: u64, input: u64, uncounted: Option<Usage>) -> Option<u64> {
        let raised = self
            .config()
            .raised_max_tokens(&self.model, current, input)?
            .min(self.output_left_by_budgets(input, uncounted));
        (raised > current).then_some(raised)
    }

    /// The output tokens the token and cost budgets leave for a call whose input is `input`
    /// tokens (counted at the uncached input price), once `uncounted` is spent too:
    /// `u64::MAX` without a budget.
    fn output_left_by_budgets(&self, input: u64, uncounted: Option<Usage>) -> u64 {
        let limits = &self.config().limits;
        let uncounted = uncounted.unwrap_or_default();
        let mut left = u64::MAX;
        if let Some(budget) = limits.token_budget {
            let spent = self
                .input_tokens
                .saturating_add(self.output_tokens)
                .saturating_add(self.unreported_tokens)
                .saturating_add(uncounted.input_total())
                .saturating_add(uncounted.output_tokens)
                .saturating_add(input);
            left = budget.saturating_sub(spent);
        }
        if let Some(budget) = limits.cost_budget
            && let Some(price) = self.config().price_of(&self.model)
            && price.output > 0.0
        {
            let cost_left = budget
                - self.cost
                - self.unreported_cost
                - self.cost_of(uncounted)
                - input as f64 * price.input / 1e6;
            // Saturating: a float out of the u64 range becomes its bound.
            let tokens = (cost_left.max(0.0) * 1e6 / price.output) as u64;
            left = left.min(tokens);
        }
        left
    }

    /// Lowers a raised output limit that the input, grown by continuations since the raise,
    /// would push past the context window or the budgets, or that is over the ceiling of the
    /// model the request goes to (never under the configured limit): the raise was sized for
    /// the input of the request it answered and for the model that answered it, which a switch
    /// to the fallback model may have replaced (a model the table does not know, which is
    /// never raised for, gets the configured limit).
    fn fit_raised_max_tokens(&self, request: &mut Value, estimated: u64) {
        let Some(raised) = self.raised_max_tokens else {
            return;
        };
        if request.get("max_tokens").and_then(Value::as_u64) != Some(raised) {
            return;
        }
        let config = self.config();
        let fitted = match crate::tokens::ModelTable::default().known(&self.model) {
            Some(limits) => limits
                .context_window
                .min(config.budget.window)
                .saturating_sub(estimated)
                .min(limits.max_output_tokens)
                .min(self.output_left_by_budgets(estimated, None))
                .clamp(config.limits.max_tokens.min(raised), raised),
            None => config.limits.max_tokens,
        };
        request["max_tokens"] = Value::from(fitted);
    }

    fn emit_turn_end(&self, turn: u32, stop_reason: Option<String>) {
        self.emit(AgentEvent::TurnEnd { turn, stop_reason });
    }

    /// Puts the blocks of the paused assistant message (the last one) before `assistant`'s and
    /// takes that message out of history; `assistant` then stands for the whole turn.
    fn merge_into_paused(&mut self, assistant: &mut Value) {
        let is_assistant = |m: &Value| m.get("role").and_then(Value::as_str) == Some("assistant");
        if !self.messages.last().is_some_and(is_assistant) {
            // History was replaced since (compaction): nothing to continue.
            return;
        }
        let Some(paused) = self.messages.pop() else {
            return;
        };
        self.tracker.truncate(self.messages.len());
        let mut blocks = content_blocks(&paused);
        blocks.extend(content_blocks(assistant));
        assistant["content"] = Value::Array(blocks);
    }

    /// Ends the last message, a user message, with `note` (once: a note already there is not
    /// repeated), so that the next request differs from the one just answered. Returns whether
    /// the note was added (the next request differs).
    fn add_note_to_last_user_message(&mut self, note: &str) -> bool {
        let Some(last) = self.messages.last_mut() else {
            return false;
        };
        if last.get("role").and_then(Value::as_str) != Some("user") {
            return false;
        }
        let mut blocks = content_blocks(last);
        let block = json!({"type": "text", "text": note});
        if blocks.last() == Some(&block) {
            return false;
        }
        blocks.push(block);
        last["content"] = Value::Array(blocks);
        self.tracker.replace_messages(&self.messages);
        true
    }

    fn push_message(&mut self, message: Value) {
        self.tracker.push_message(&message);
        self.messages.push(message);
    }

    /// Records a response's usage: the run's totals and cost, the tracker's anchor (`kept`:
    /// whether the response entered history), the cache-break detector, and the event. A
    /// response without usage (a Chat server that reports none) counts toward the budgets as
    /// estimated (`estimated` input, its content's estimate as output).
    ///
    /// A call that failed, broke off or was discarded after the provider reported its usage is
    /// recorded alike: the input it reports is the prefix that was sent, which is the history
    /// the next request holds too (nothing of the response entered it), so it anchors the
    /// tracker (with no output tokens); and its cache read was real (the provider reports it
    /// once it has read the cache), so a fall in it is a break of the prompt's like any.
    /// What resets the detector is a change of prefix or model made on purpose (compaction,
    /// microcompact, a switch to the fallback model).
    fn record_usage(
        &mut self,
        turn: u32,
        request: &Value,
        message: &Value,
        estimated: u64,
        ttft: Option<std::time::Duration>,
        kept: bool,
    ) {
        let usage = message.get("usage").unwrap_or(&Value::Null);
        if let Some(parsed) = self.count_call(message, estimated) {
            // The tracker measures what the next request will hold. A response that did not
            // enter history (cut inside a call, or empty) holds none of its output tokens;
            // counted, they would make the context look up to `max_tokens` bigger than it is
            // and compact it early.
            let in_context = if kept {
                parsed
            } else {
                Usage {
                    output_tokens: 0,
                    ..parsed
                }
            };
            self.tracker.record_usage(in_context);
            if let Some((previous, changed)) =
                self.cache.observe(request, parsed.cache_read_input_tokens)
            {
                self.emit(AgentEvent::CacheBreak {
                    previous,
                    current: parsed.cache_read_input_tokens,
                    changed,
                });
            }
        }
        self.emit(AgentEvent::Usage {
            turn,
            call: UsageCall::Turn,
            usage: usage.clone(),
            estimated_input_tokens: estimated,
            time_to_first_token: ttft,
        });
    }

    /// Counts one call's `message` toward the run's totals, cost and budgets: its reported
    /// usage (returned), else its estimate (`estimated` input, its content's estimate as
    /// output), which only the budgets count.
    fn count_call(&mut self, message: &Value, estimated: u64) -> Option<Usage> {
        let parsed = message.get("usage").and_then(Usage::from_json);
        match parsed {
            Some(parsed) => self.count_usage(parsed),
            None => {
                let content = message.get("content").unwrap_or(&Value::Null);
                let output = estimate_content(content, self.config().family);
                self.count_unreported(estimated, output);
            }
        }
        parsed
    }

    /// Adds the estimate of a call whose usage was not reported to what the budgets count (the
    /// run's totals keep what was reported): without it a budget never stops a run against a
    /// server that reports no usage.
    fn count_unreported(&mut self, input: u64, output: u64) {
        self.unreported_tokens = self
            .unreported_tokens
            .saturating_add(input)
            .saturating_add(output);
        if let Some(price) = self.config().price_of(&self.model) {
            self.unreported_cost +=
                (input as f64 * price.input + output as f64 * price.output) / 1e6;
        }
    }

    /// Records a summariser call's usage: the run's totals, cost and budgets (a call reported
    /// without usage counts toward the budgets as estimated, as a turn's), and its `usage`
    /// event ([`UsageCall::Compaction`], numbered with the turn the compaction is made for:
    /// the next `turn_start`'s). Not the tracker's anchor (the summary request is not the
    /// history the next request holds) nor the cache-break detector (its prefix is not the
    /// turns').
    fn record_compaction_usage(
        &mut self,
        message: &Value,
        estimated: u64,
        ttft: Option<std::time::Duration>,
    ) {
        let usage = message.get("usage").unwrap_or(&Value::Null);
        self.count_call(message, estimated);
        self.emit(AgentEvent::Usage {
            turn: self.turns.saturating_add(1),
            call: UsageCall::Compaction,
            usage: usage.clone(),
            estimated_input_tokens: estimated,
            time_to_first_token: ttft,
        });
    }

    /// Adds a call's usage to the run's totals and cost.
    fn count_usage(&mut self, usage: Usage) {
        // Saturating: the counts are the server's and may be absurd.
        self.input_tokens = self.input_tokens.saturating_add(usage.input_total());
        self.output_tokens = self.output_tokens.saturating_add(usage.output_tokens);
        self.cost += self.cost_of(usage);
    }

    /// What `usage` costs at the current model's price (0 for a model the table does not
    /// price).
    fn cost_of(&self, usage: Usage) -> f64 {
        self.config().price_of(&self.model).map_or(0.0, |price| {
            (usage.input_tokens as f64 * price.input
                + usage.output_tokens as f64 * price.output
                + usage.cache_creation_input_tokens as f64 * price.cache_write
                + usage.cache_read_input_tokens as f64 * price.cache_read)
                / 1e6
        })
    }

    fn over_budget(&self) -> Option<Ending> {
        let limits = &self.config().limits;
        if let Some(budget) = limits.token_budget
            && self
                .input_tokens
                .saturating_add(self.output_tokens)
                .saturating_add(self.unreported_tokens)
                >= budget
        {
            return Some(Ending::failed(
                StopReason::Budget,
                "token_budget",
                format!("token budget of {budget} reached"),
            ));
        }
        let cost = self.cost + self.unreported_cost;
        if let Some(budget) = limits.cost_budget
            && cost >= budget
        {
            return Some(Ending::failed(
                StopReason::Budget,
                "cost_budget",
                format!("cost budget of {budget} reached ({cost:.4})"),
            ));
        }
        None
    }

    fn build_request(&self) -> Value {
        let config = self.config();
        let mut request = json!({
            "model": self.model,
            "max_tokens": self.raised_max_tokens.unwrap_or(config.limits.max_tokens),
            "messages": self.messages,
            "stream": true,
        });
        if let Some(system) = config.system_prompt() {
            request["system"] = Value::String(system.to_owned());
        }
        if !self.tools.is_empty() {
            request["tools"] = Value::Array(self.tools.clone());
        }
        if let Some(container) = &self.container {
            request["container"] = Value::String(container.clone());
        }
        for (key, value) in &config.extra {
            // Tools in `extra` were added to the executor's at the start of the run.
            if key != "tools" {
                request[key.as_str()] = value.clone();
            }
        }
        if let Some(messages) = request["messages"].as_array_mut() {
            // A host's history may end an earlier assistant message with thinking, or hold a
            // Chat model's reasoning where no provider reads it back, which Anthropic refuses.
            drop_trailing_thinking_before_last(messages);
            if self.unverifiable_reasoning > 0 {
                let at = self.unverifiable_reasoning.min(messages.len());
                let mut before: Vec<Value> = messages.drain(..at).collect();
                drop_thinking(&mut before);
                messages.splice(0..0, before);
            }
            if self.paused {
                trim_final_assistant_text(messages);
            }
        }
        self.leave_out_refused_fields(&mut request);
        if config.prompt_caching {
            place_cache_breakpoints(&mut request);
        }
        if self.drop_stale_thinking {
            ask_to_drop_stale_thinking(&mut request);
        }
        request
    }

    /// Microcompact, then compaction, as the tracker's state requires. Returns a stop when the
    /// context is still over the blocking limit afterwards.
    async fn manage_context(&mut self) -> Option<Ending> {
        let tokens = self.tracker.tokens().tokens;
        let state = self.config().budget.state(tokens);
        if matches!(
            state,
            BudgetState::Warning | BudgetState::AutoCompact | BudgetState::Blocking
        ) {
            let keep = self.config().keep_recent_tool_results;
            let compactable = self.config().compactable_tools.clone();
            // The results of the last message are the ones the model is about to read: they
            // are never cleared, whatever `keep` says (0 would otherwise send them cleared and
            // the model would call the same tools again). Those of compactable tools count
            // toward `keep`, as microcompact counts them; the others are never cleared anyway.
            let unseen = last_compactable_result_count(&self.messages, &compactable);
            let cleared = if unseen > 0 {
                let older = self.messages.len() - 1;
                microcompact(
                    &mut self.messages[..older],
                    keep.saturating_sub(unseen),
                    &compactable,
                )
            } else {
                microcompact(&mut self.messages, keep, &compactable)
            };
            if cleared > 0 {
                self.tracker.replace_messages(&self.messages);
                // The prefix changed on purpose: the cache read falling next is no break.
                self.cache.reset();
                self.emit(AgentEvent::Context(ContextAction::Microcompact {
                    cleared,
                    tokens_before: tokens,
                }));
            }
        }
        let tokens = self.tracker.tokens().tokens;
        let budget = self.config().budget;
        let over = |tokens| {
            matches!(
                budget.state(tokens),
                BudgetState::AutoCompact | BudgetState::Blocking
            )
        };
        // At the blocking limit the run stops unless compaction helps: always worth a try.
        let blocking = matches!(budget.state(tokens), BudgetState::Blocking);
        if over(tokens) && (blocking || self.auto_compaction.may_try()) {
            match self.compact("auto").await {
                Err(stop) => return Some(stop),
                Ok(compacted) => {
                    let still_over = over(self.tracker.tokens().tokens);
                    self.auto_compaction.record(compacted, still_over);
                }
            }
            // The summariser's call is spent like any other.
            if let Some(stop) = self.over_budget() {
                return Some(stop);
            }
        }
        let tokens = self.tracker.tokens().tokens;
        if matches!(self.config().budget.state(tokens), BudgetState::Blocking) {
            return Some(Ending::prompt_too_long(format!(
                "{tokens} tokens are over the blocking limit after compaction"
            )));
        }
        None
    }

    /// Replaces history by a summary (the host's hook, or a model call) plus the latest prompt.
    /// A compaction that fails, or whose history would not be valid, keeps the old history.
    /// Returns whether history was replaced, or a stop when the run must end: it was cancelled
    /// meanwhile, or the host's hook panicked.
    async fn compact(&mut self, trigger: &'static str) -> Result<bool, Ending> {
        let before = self.messages.len();
        let compacted = match self.agent.compact_hook.clone() {
            Some(hook) => {
                let messages = self.messages.clone();
                // A host's hook is host code: a panic in it (building the future or polling
                // it) ends the run with an error instead of taking the loop's task down with
                // it, which would lose the stop event.
                let future = match std::panic::catch_unwind(AssertUnwindSafe(|| hook(messages))) {
                    Ok(future) => future,
                    Err(panic) => return Err(hook_panicked(panic.as_ref())),
                };
                tokio::select! {
                    biased;
                    () = self.cancel.cancelled() => return Err(Ending::reason(StopReason::Aborted)),
                    outcome = AssertUnwindSafe(future).catch_unwind() => match outcome {
                        Ok(history) => history,
                        Err(panic) => return Err(hook_panicked(panic.as_ref())),
                    },
                }
            }
            None => None,
        };
        let compacted = match compacted {
            // A host's history that is no smaller than the one it replaces is not a
            // compaction: taken, it would replace the conversation (the user's prompt with it)
            // for nothing, and a refused request (prompt too long) would be sent again,
            // bigger, to be refused again.
            Some(history) if !self.is_smaller(&history) => {
                tracing::warn!(
                    "the compaction hook's history is not smaller than the current one; keeping the old one"
                );
                return Ok(false);
            }
            Some(history) => history,
            // A lone message is the latest prompt, which a summary keeps whole: a summary call
            // could not make the context smaller, only cost one (a request already too big on
            // the first turn).
            None if self.messages.len() <= 1 => return Ok(false),
            None => match self.summarise().await {
                Summary::Text(summary) => {
                    // The loop's own continuation prompts are not the user's: after a
                    // `max_tokens` cut the prompt to keep is the one before them (the cut text
                    // they continue is summarised away).
                    let continuation = self.config().continuation_prompt.as_str();
                    let source: Vec<Value> = self
                        .messages
                        .iter()
                        .filter(|m| !is_continuation_message(m, continuation))
                        .cloned()
                        .map(without_cut_calls_notes)
                        .collect();
                    history_from_summary(&source, &summary)
                }
                Summary::Failed => return Ok(false),
                Summary::Cancelled => return Err(Ending::reason(StopReason::Aborted)),
            },
        };
        // The next request sends this history as it is: it must be one the API accepts (and
        // end with the user's turn, since the compacted history has no paused turn).
        if let Err(problem) = check_history(&compacted) {
            tracing::warn!(%problem, "compaction produced an invalid history; keeping the old one");
            return Ok(false);
        }
        let mut compacted = compacted;
        rename_repeated_tool_use_ids(&mut compacted);
        self.messages = compacted;
        // What the compacted history holds was never refused.
        self.unverifiable_reasoning = 0;
        self.paused = false;
        self.tracker.replace_messages(&self.messages);
        self.cache.reset();
        self.emit(AgentEvent::Context(ContextAction::Compaction {
            messages_before: before,
            messages_after: self.messages.len(),
            trigger,
        }));
        Ok(true)
    }

    /// Whether `history` is estimated to take fewer tokens than the current history (both
    /// estimated alike: the current one's reported usage is not comparable with an estimate).
    fn is_smaller(&self, history: &[Value]) -> bool {
        let estimate = |messages: &[Value]| {
            let mut tracker = ContextTracker::new(self.config().family);
            tracker.replace_messages(messages);
            tracker.tokens().tokens
        };
        estimate(history) < estimate(&self.messages)
    }

    /// Counts a retry of a model call (a turn's or the summariser's) toward
    /// [`AgentConfig::fallback_after_529_retries`]: whether the loop stops waiting for the
    /// overloaded model and switches to the fallback instead of letting this retry be made.
    /// The one place that counts; [`Self::fall_back`] is the one that switches.
    fn stops_waiting(
        &self,
        overloads: &mut Overloads,
        status: Option<u16>,
        overloaded: bool,
    ) -> bool {
        overloads.observe(status, overloaded);
        let threshold = self.config().fallback_after_529_retries;
        self.fallback.is_some() && threshold > 0 && overloads.total() >= threshold
    }

    /// Switches to the fallback model for the rest of the run (a turn's call or the
    /// summariser's was overloaded; `repeated_529`: [`Self::stops_waiting`] gave up on it) and
    /// reports it. The caller sends its call again, now to `self.model`.
    fn fall_back(&mut self, call: UsageCall, message: String, repeated_529: bool) {
        let Some(to) = self.fallback.take() else {
            return;
        };
        let from = std::mem::replace(&mut self.model, to.clone());
        tracing::warn!(%from, %to, %message, "model overloaded; falling back");
        // Its usage moves its own correction factor, not the primary's.
        self.tracker.set_model(&to);
        // Thinking signatures are bound to the model that made them: the fallback refuses the
        // primary's thinking sent back.
        if drop_thinking(&mut self.messages) > 0 {
            self.tracker.replace_messages(&self.messages);
        }
        // So is the prompt cache: the fallback's first call reads none of the primary's,
        // which is no break of the prompt's.
        self.cache.reset();
        self.emit(AgentEvent::ModelFallback {
            call,
            from,
            to,
            reason: if repeated_529 {
                "repeated_529"
            } else {
                "overloaded"
            },
            error: message,
        });
    }

    /// The built-in summariser: one model call over the history plus a summary request, with
    /// the run's system prompt, its tool definitions (which a history holding tool calls
    /// needs) and `tool_choice: none`, and the run's extra fields (a gateway's routing, the
    /// metadata, the beta flags a history's blocks need, ...) except those that would make
    /// the answer something else than a summary or that it does not need
    /// ([`SUMMARY_LEAVES_OUT`]). Tool results the model has read are cleared first so the call
    /// itself fits (those of the last message, not read yet, are kept for the summary). Each
    /// call's usage counts toward the run's totals and budgets (it is not a turn) and is
    /// reported in a `usage` event ([`UsageCall::Compaction`]), also for a call that broke
    /// off, failed or was cancelled after the provider reported it; its retries are reported
    /// in `retry` events of the same `call`. An overloaded call falls back as a turn's does
    /// (the same count of [`AgentConfig::fallback_after_529_retries`], the same switch for
    /// the rest of the run and `model_fallback` event) and the summary is asked of the
    /// fallback model: waiting through every retry (about 80 s with the defaults) to fail the
    /// compaction would leave the next turn to the same overloaded model. An answer cut by
    /// `max_tokens` is asked again once with the raised limit
    /// ([`AgentConfig::raised_max_tokens`]); a cut or refused answer is never a summary. A call
    /// that broke off, or failed transiently once it had started ([`broke_off_transiently`]),
    /// is asked again once, as a turn is.
    async fn summarise(&mut self) -> Summary {
        let mut history = self.messages.clone();
        // The last message's results are the ones the model has not read yet: the summary is
        // their only way into the compacted history, so they stay (as `manage_context` keeps
        // them); cleared, the model would call the same tools again.
        let unread = history.last().map_or(0, tool_result_count);
        let read = history.len() - usize::from(unread > 0);
        microcompact(&mut history[..read], 0, &[]);
        // Clearing the results changed the prefix of every later thinking block, which models
        // that bind thinking to its conversation refuse; a summary needs none of them.
        drop_thinking(&mut history);
        let last_is_user = history
            .last()
            .and_then(|m| m.get("role"))
            .and_then(Value::as_str)
            == Some("user");
        match history.last_mut() {
            // Keep roles alternating: the request goes in the same user message.
            Some(last) if last_is_user => {
                let mut content = match last.get("content").cloned() {
                    Some(Value::Array(blocks)) => blocks,
                    Some(Value::String(text)) => vec![json!({"type": "text", "text": text})],
                    _ => Vec::new(),
                };
                content.push(json!({"type": "text", "text": SUMMARY_PROMPT}));
                last["content"] = Value::Array(content);
            }
            _ => history.push(json!({"role": "user", "content": SUMMARY_PROMPT})),
        }
        let mut request = json!({
            "model": self.model,
            "max_tokens": self.config().limits.max_tokens,
            "messages": history,
            "stream": true,
        });
        let config = self.config();
        if let Some(system) = config.system_prompt() {
            request["system"] = Value::String(system.to_owned());
        }
        if let Some(container) = &self.container {
            request["container"] = Value::String(container.clone());
        }
        for (key, value) in &config.extra {
            if !SUMMARY_LEAVES_OUT.contains(&key.as_str()) {
                request[key.as_str()] = value.clone();
            }
        }
        // Anthropic's `output_config` holds the effort (kept) and a structured output's
        // format (left out, like `output_format`).
        if let Some(output) = request
            .get_mut("output_config")
            .and_then(Value::as_object_mut)
        {
            output.remove("format");
            if output.is_empty() {
                request.as_object_mut().map(|r| r.remove("output_config"));
            }
        }
        self.leave_out_refused_fields(&mut request);
        if !self.tools.is_empty() {
            // The API refuses a history holding tool calls or results without tool
            // definitions; `none` keeps the answer a summary rather than another call.
            request["tools"] = Value::Array(self.tools.clone());
            request["tool_choice"] = json!({"type": "none"});
        }
        let mut raised = false;
        // Whether the call was asked again after it broke off (once, as a turn's).
        let mut broke_off_retried = false;
        // Each call (the first, one asked again with a raised limit, one sent again without a
        // refused field, one asked again after it broke off) is billed on its own and reported
        // in a `usage` event of its own.
        loop {
            let estimated = estimate_request_body(&request, self.config().family).total();
            let started = Instant::now();
            let mut stream = self.call_model(request.clone());
            let mut ttft = None;
            // What the call's stream reported so far, billed even when it never ends.
            let mut streamed_usage = StreamedUsage::default();
            // Consecutive overloads within the call, as for a turn's.
            let mut overloads = Overloads::default();
            let mut repeated_529 = false;
            let message = loop {
                let event = tokio::select! {
                    biased;
                    () = self.cancel.cancelled() => None,
                    event = stream.next() => Some(event),
                };
                let Some(event) = event else {
                    // Cancelled: what the provider reported before counts, as for a turn.
                    if let Some(partial) = streamed_usage.billed_when_cancelled() {
                        self.record_compaction_usage(&partial, estimated, ttft);
                    }
                    return Summary::Cancelled;
                };
                let failed = match event {
                    Some(ModelEvent::Decoded(decoded)) => {
                        if ttft.is_none() {
                            ttft = Some(started.elapsed());
                        }
                        streamed_usage.observe(&decoded);
                        None
                    }
                    Some(ModelEvent::Completed {
                        message,
                        time_to_first_token,
                        ..
                    }) => {
                        ttft = time_to_first_token.or(ttft);
                        break Some(message);
                    }
                    Some(ModelEvent::Failed(error)) => Some(error),
                    // A host sees why the compaction takes its time, as for a turn's call, and
                    // the overloads count toward the fallback as a turn's do.
                    Some(ModelEvent::Retry {
                        attempt,
                        status,
                        code,
                        overloaded,
                        wait,
                    }) => {
                        if self.stops_waiting(&mut overloads, status, overloaded) {
                            // This retry is not made: the summary goes to the fallback.
                            repeated_529 = true;
                            Some(ModelError::overloaded(overloads.to_string()))
                        } else {
                            self.emit(AgentEvent::Retry {
                                call: UsageCall::Compaction,
                                attempt,
                                status,
                                code,
                                overloaded,
                                wait,
                            });
                            None
                        }
                    }
                    None => return Summary::Failed,
                };
                let Some(error) = failed else {
                    continue;
                };
                // A stream that failed after `message_start` was billed for its input: it
                // counts and is reported, as a turn's is.
                if let Some(partial) = reported_before_failing(&error, &streamed_usage) {
                    self.record_compaction_usage(&partial, estimated, ttft);
                }
                match error {
                    ModelError::Other { message, .. } if self.refuses_a_new_field(&message) => {
                        // The run's first call may be this one (a history over the threshold):
                        // a server's refusal of a field is answered here as for a turn.
                        tracing::warn!(%message, "a request field was refused; resending the summary call without it");
                        self.leave_out_refused_fields(&mut request);
                        break None;
                    }
                    ModelError::Overloaded { message, .. } if self.fallback.is_some() => {
                        // The switch a turn makes, for the rest of the run; the summary is
                        // asked of the fallback.
                        self.fall_back(UsageCall::Compaction, message, repeated_529);
                        request["model"] = Value::String(self.model.clone());
                        break None;
                    }
                    error
                        if !broke_off_retried
                            && broke_off_transiently(&error, ttft.is_some())
                            && self.over_budget().is_none() =>
                    {
                        // A summary stream that broke off, or failed transiently once it had
                        // started, is asked again once, as a turn is: a reactive compaction
                        // that failed would end the run.
                        tracing::warn!(%error, "the summary call broke off; asking again");
                        broke_off_retried = true;
                        break None;
                    }
                    error => {
                        tracing::warn!(%error, "compaction call failed");
                        return Summary::Failed;
                    }
                }
            };
            // Sent again: without the refused field, to the fallback model, or after it broke
            // off.
            let Some(message) = message else {
                continue;
            };
            self.record_compaction_usage(&message, estimated, ttft);
            let usage = message.get("usage").and_then(Usage::from_json);
            let stop_reason = message.get("stop_reason").and_then(Value::as_str);
            if matches!(
                stop_reason,
                Some("max_tokens" | "model_context_window_exceeded" | "refusal")
            ) {
                // A summary cut by a limit is the first part of one: taken, it would replace
                // the history and lose what the rest would have said. It is asked again once
                // with the limit raised, as a turn is; else none.
                let current = request.get("max_tokens").and_then(Value::as_u64);
                let input = usage.map_or(estimated, |usage| usage.input_total());
                let higher = current
                    .filter(|_| !raised && stop_reason == Some("max_tokens"))
                    .and_then(|current| self.raised_limit(current, input, None));
                if let Some(higher) = higher
                    && self.over_budget().is_none()
                {
                    tracing::warn!(
                        higher,
                        "the summary was cut by max_tokens; asking again with a higher limit"
                    );
                    raised = true;
                    request["max_tokens"] = Value::from(higher);
                    continue;
                }
                tracing::warn!(
                    ?stop_reason,
                    "the summary was cut or refused; keeping the history"
                );
                return Summary::Failed;
            }
            let text: String = message
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect();
            return if text.is_empty() {
                Summary::Failed
            } else {
                Summary::Text(text)
            };
        }
    }
}

/// Whether a failed call is one the loop asks again once, discarding what it streamed: a
/// stream that broke off (truncated), or one that ended, after the response had started, with
/// a failure a new call may not meet (an overload announced mid-stream, a server error, a rate
/// limit, a timeout or a lost connection). The client retries such failures itself only while
/// nothing was delivered; once the response started, it reports them (a truncated stream, or
/// [`ModelError::Overloaded`]) and the new call goes through its retries again. Before
/// anything was delivered, the same failures come after the client's own retries were spent,
/// and the run stops (or switches to the fallback model) instead of spending them again.
fn broke_off_transiently(error: &ModelError, delivered: bool) -> bool {
    matches!(error, ModelError::Truncated { .. }) || (delivered && error.is_transient())
}

/// The usage a failed call's provider reported before it failed, as a message holding it
/// (`{"usage": ...}`), if any: a truncated stream's partial message's, else what the stream's
/// events reported (a `message_start` before an error event). One of the two, never both: the
/// partial message is the accumulation of the same events.
///
/// A truncated stream that reported none (OpenAI's report usage only at their end) was billed
/// all the same (it delivered events): its partial message's content without usage, so that
/// the call has its `usage` event with `usage: null` and the budgets count it by its estimate,
/// as a completed call without usage. It had neither, and a budget never saw the tokens of a
/// cut call.
fn reported_before_failing(error: &ModelError, streamed: &StreamedUsage) -> Option<Value> {
    if let ModelError::Truncated { partial, .. } = error
        && let Some(usage) = partial
            .get("usage")
            .filter(|u| Usage::from_json(u).is_some())
    {
        return Some(json!({ "usage": usage }));
    }
    if let Some(reported) = streamed.reported_message() {
        return Some(reported);
    }
    match error {
        ModelError::Truncated { partial, .. } => Some(json!({
            "content": partial.get("content").cloned().unwrap_or(Value::Null),
        })),
        _ => None,
    }
}

/// The fields of [`AgentConfig::extra`] the summary request leaves out: the tools (sent from
/// the run's definitions), what would make the answer a call or a structured document instead
/// of a summary, stop sequences that could cut it, and thinking (every thinking block is
/// dropped from the history it summarises); `output_config` goes without its `format`.
/// Everything else (routing, metadata, beta flags, sampling, a template's options, the effort)
/// goes along: a gateway may refuse a request without it.
const SUMMARY_LEAVES_OUT: &[&str] = &[
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "thinking",
    "response_format",
    "output_format",
    "stop_sequences",
    "stop",
];

/// The request field a refused request's message says the server will not take:
/// `stream_options` (OpenAI-compatible servers that refuse fields they do not know:
/// "Unrecognized request argument supplied: stream_options", "extra_forbidden ...
/// stream_options"), or `include` (the Responses API asked for the encrypted reasoning of a
/// model that has none: "Encrypted content is not supported with this model"), or
/// `max_tokens` (sent to the Responses API as `max_output_tokens`, which the ChatGPT Codex
/// backend refuses: "Unsupported parameter: max_output_tokens").
pub(crate) fn refused_field(message: &str) -> Option<&'static str> {
    if message.contains("stream_options") {
        Some("stream_options")
    } else if message.contains("Encrypted content is not supported") {
        Some("include")
    } else if message.contains("max_output_tokens")
        && message
            .to_ascii_lowercase()
            .contains("unsupported parameter")
    {
        Some("max_tokens")
    } else {
        None
    }
}

/// Whether a refused request's message is the Responses API's refusal of a reasoning item's
/// encrypted content ("The encrypted content gAAA…Rg== could not be verified",
/// `invalid_encrypted_content`): content signed for another provider (Anthropic's thinking
/// signatures) or another key or organisation.
pub(crate) fn is_unverifiable_reasoning_error(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    lower.contains("invalid_encrypted_content")
        || (lower.contains("encrypted content") && lower.contains("could not be verified"))
}

/// The `anthropic-beta` flag that lets a request choose what happens to thinking blocks whose
/// conversation prefix changed.
pub(crate) const THINKING_BINDING_BETA: &str = "thinking-binding-controls-2026-08-01";

/// Whether a refused request's message is the API's refusal of thinking blocks replayed after
/// the conversation before them changed ("The block is bound to a different conversation. …
/// set `thinking.block_binding.prefix_mismatch_behavior` to \"drop_block\"").
pub(crate) fn is_stale_thinking_error(message: &str) -> bool {
    message.contains("prefix_mismatch_behavior")
        || message.contains("bound to a different conversation")
}

/// Asks the API to drop, rather than refuse, thinking blocks whose prefix changed:
/// `thinking.block_binding.prefix_mismatch_behavior: "drop_block"` (added to the request's
/// `thinking`, or to an adaptive one: the models that check the prefix think adaptively) and
/// the beta flag it requires, in `betas`.
pub(crate) fn ask_to_drop_stale_thinking(request: &mut Value) {
    let Some(fields) = request.as_object_mut() else {
        return;
    };
    let thinking = fields
        .entry("thinking")
        .or_insert_with(|| json!({"type": "adaptive"}));
    if let Some(thinking) = thinking.as_object_mut() {
        thinking.insert(
            "block_binding".to_owned(),
            json!({"prefix_mismatch_behavior": "drop_block"}),
        );
    }
    let betas = fields.entry("betas").or_insert_with(|| json!([]));
    if let Value::String(flag) = betas {
        *betas = json!([flag.clone()]);
    }
    if let Some(flags) = betas.as_array_mut()
        && !flags.iter().any(|flag| flag == THINKING_BINDING_BETA)
    {
        flags.push(json!(THINKING_BINDING_BETA));
    }
}

/// How the built-in summariser's call ended.
enum Summary {
    /// The summary.
    Text(String),
    /// No summary (the call failed, was refused or cut by a limit, or answered no text).
    Failed,
    /// The run was cancelled during the call.
    Cancelled,
}

/// Checks the tool definitions of a run's requests as the API (Anthropic's and OpenAI's) would:
/// every name once and matching `^[a-zA-Z0-9_-]{1,64}$`, and the executor's tools (the first `executor_tools`) with object schemas
/// (`"type": "object"`), the only input schemas it takes.
fn check_tool_definitions(definitions: &[Value], executor_tools: usize) -> Result<(), String> {
    let mut names = std::collections::HashSet::new();
    for definition in definitions {
        if let Some(name) = definition.get("name").and_then(Value::as_str)
            && !is_valid_tool_name(name)
        {
            return Err(format!(
                "tool {name:?}: a tool name must be 1 to 64 ASCII letters, digits, '_' or '-' \
                 (the providers refuse any other)"
            ));
        }
        if let Some(name) = definition.get("name")
            && !names.insert(name)
        {
            return Err(format!(
                "two tools are called {name}: tool names must be unique"
            ));
        }
    }
    for definition in definitions.iter().take(executor_tools) {
        let schema = &definition["input_schema"];
        if schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(format!(
                "tool {}: the input schema must be an object schema (\"type\": \"object\"), \
                 not {schema}",
                definition["name"]
            ));
        }
    }
    Ok(())
}

/// Checks that a `tool_choice` of type `tool` names a tool the requests define (the API refuses
/// it otherwise, on every request).
fn check_tool_choice(choice: Option<&Value>, definitions: &[Value]) -> Result<(), String> {
    let Some(choice) = choice.filter(|c| c.get("type").and_then(Value::as_str) == Some("tool"))
    else {
        return Ok(());
    };
    let name = choice.get("name").unwrap_or(&Value::Null);
    if definitions.iter().any(|d| d.get("name") == Some(name)) {
        Ok(())
    } else {
        Err(format!(
            "tool_choice names the tool {name}, which is not among the run's tools"
        ))
    }
}

/// Whether `name` matches `^[a-zA-Z0-9_-]{1,64}$`, the names Anthropic (custom tools) and
/// OpenAI (functions) take.
fn is_valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The failure of a model call whose model panicked.
fn model_panicked(panic: &(dyn Any + Send)) -> ModelEvent {
    let message = panic_message(panic);
    tracing::error!(%message, "the model panicked");
    ModelEvent::Failed(ModelError::with_code(
        INTERNAL,
        format!("the model panicked: {message}"),
    ))
}

/// The stop of a run whose compaction hook panicked.
fn hook_panicked(panic: &(dyn Any + Send)) -> Ending {
    let message = panic_message(panic);
    tracing::error!(%message, "the compaction hook panicked");
    Ending::failed(
        StopReason::Error,
        "hook_failed",
        format!("the compaction hook panicked: {message}"),
    )
}

/// The names of the tools a message calls, each once, in order.
fn tool_use_names(message: &Value) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for block in message
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
    {
        if let Some(name) = block.get("name").and_then(Value::as_str)
            && !names.iter().any(|n| n == name)
        {
            names.push(name.to_owned());
        }
    }
    names
}

/// The start of [`cut_calls_note`].
const CUT_CALLS_NOTE: &str = "The output token limit cut your last response";

/// Whether `text` is a continuation prompt of the loop's: `continuation`, perhaps followed by
/// a [`cut_calls_note`].
fn is_continuation(text: &str, continuation: &str) -> bool {
    text.strip_prefix(continuation).is_some_and(|rest| {
        rest.is_empty()
            || rest
                .strip_prefix("\n\n")
                .is_some_and(|note| note.starts_with(CUT_CALLS_NOTE))
    })
}

/// Whether `message` is a continuation prompt of the loop's: its content is one, as a string
/// or as text blocks (a [`cut_calls_note`] added to it later made it blocks).
fn is_continuation_message(message: &Value, continuation: &str) -> bool {
    match message.get("content") {
        Some(Value::String(text)) => is_continuation(text, continuation),
        Some(Value::Array(blocks)) => {
            let texts: Option<Vec<&str>> = blocks
                .iter()
                .map(|b| {
                    (b.get("type").and_then(Value::as_str) == Some("text"))
                        .then(|| b.get("text").and_then(Value::as_str))
                        .flatten()
                })
                .collect();
            texts.is_some_and(|texts| is_continuation(&texts.join("\n\n"), continuation))
        }
        _ => false,
    }
}

/// `message` without the [`cut_calls_note`]s the loop added to it: the summary that replaces
/// the cut response makes them stale.
fn without_cut_calls_notes(mut message: Value) -> Value {
    if let Some(blocks) = message.get_mut("content").and_then(Value::as_array_mut) {
        blocks.retain(|b| {
            !b.get("text")
                .and_then(Value::as_str)
                .is_some_and(|text| text.starts_with(CUT_CALLS_NOTE))
        });
    }
    message
}

/// What the model is told of the calls of a response the output limit cut: none has a result
/// (a concurrency-safe call started while the response streamed may have run: "not run" was
/// wrong for it, and its result is discarded all the same).
fn cut_calls_note(names: &[String]) -> String {
    format!(
        "{CUT_CALLS_NOTE}, so its tool calls ({}) were discarded without results. \
         Make them again with smaller inputs: a call's whole input must fit in one response \
         (split a large file into several writes or edits).",
        names.join(", ")
    )
}

/// How many `tool_result` blocks a message holds.
fn tool_result_count(message: &Value) -> usize {
    message
        .get("content")
        .and_then(Value::as_array)
        .map_or(0, |blocks| {
            blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
                .count()
        })
}

/// The id of the container a response ran in (`"container": {"id": ...}`), which later requests
/// must name to reuse it.
fn container_id(message: &Value) -> Option<String> {
    message
        .get("container")?
        .get("id")?
        .as_str()
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
}

/// A message's content as blocks (a string content is one text block).
fn content_blocks(message: &Value) -> Vec<Value> {
    match message.get("content") {
        Some(Value::Array(blocks)) => blocks.clone(),
        Some(Value::String(text)) if !text.is_empty() => {
            vec![json!({"type": "text", "text": text})]
        }
        _ => Vec::new(),
    }
}

/// The tool results of a turn, one per `tool_use` of the assistant message and in its order:
/// the executor's results, and an error for a call that was never run (its input was not valid
/// JSON, or the stream never sealed it), so history stays valid for the API.
fn results_in_order(
    assistant: &Value,
    answered: Vec<ToolResult>,
    mut not_run: Vec<(String, String)>,
) -> Vec<Value> {
    let mut answered: Vec<Option<ToolResult>> = answered.into_iter().map(Some).collect();
    tool_use_ids(assistant)
        .into_iter()
        .map(|id| {
            let found = answered
                .iter_mut()
                .find(|r| r.as_ref().is_some_and(|r| r.tool_use_id == id))
                .and_then(Option::take);
            found.unwrap_or_else(|| {
                let message = not_run
                    .iter()
                    .position(|(i, _)| *i == id)
                    .map(|at| not_run.swap_remove(at).1)
                    .unwrap_or_else(|| "The call was not run.".to_owned());
                ToolResult::error(id, message)
            })
        })
        .map(sendable_result)
        .filter_map(|r| serde_json::to_value(r).ok())
        .collect()
}

/// A result as the API takes it: no empty or whitespace-only text block in its content ("text
/// content blocks must contain non-whitespace text"), and an error result never without
/// content ("content cannot be empty if `is_error` is true": a tool that failed without a
/// message, such as a Python `raise ValueError()`).
fn sendable_result(mut result: ToolResult) -> ToolResult {
    if let ToolResultContent::Blocks(blocks) = &mut result.content {
        blocks.retain(|block| {
            block.get("type").and_then(Value::as_str) != Some("text")
                || block
                    .get("text")
                    .and_then(Value::as_str)
                    .is_some_and(|text| !text.trim().is_empty())
        });
        if blocks.is_empty() {
            result.content = ToolResultContent::Text(String::new());
        }
    }
    if result.is_error
        && matches!(&result.content, ToolResultContent::Text(text) if text.trim().is_empty())
    {
        result.content = ToolResultContent::Text(EMPTY_ERROR_RESULT.to_owned());
    }
    result
}

/// The content of an error result whose tool gave no message.
const EMPTY_ERROR_RESULT: &str = "The tool failed without a message.";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::replay::{ScriptedModel, anthropic_sse, scripted_message};
    use crate::exec::{FnTool, ToolOutput, ToolRegistry};

    /// The model name under which the loop panics before its second turn (see `turns_loop`).
    pub(super) const PANICS_AFTER_ONE_TURN: &str = "test-panics-after-one-turn";

    /// A panic in the loop itself ended the run's events without a `stop` (the bindings saw a
    /// run that simply ended, Python with no events at all). It now stops with `error`, code
    /// `internal`, and the history as far as it got: the first turn's call and its result.
    #[tokio::test]
    async fn a_panic_in_the_loop_still_ends_the_run_with_a_stop_event() {
        let model = ScriptedModel::new(|n, request| {
            let content = if n == 0 {
                vec![json!({"type": "tool_use", "id": "t1", "name": "echo", "input": {}})]
            } else {
                vec![json!({"type": "text", "text": "done"})]
            };
            let stop = if n == 0 { "tool_use" } else { "end_turn" };
            let message = scripted_message(request, content, stop);
            Ok(bytes::Bytes::from(anthropic_sse(&message, 7)))
        });
        let mut tools = ToolRegistry::new();
        let echo = FnTool::new("echo", |_input, _ctx| async { Ok(ToolOutput::text("ok")) });
        assert!(tools.register(echo).is_ok());
        let agent = Agent::new(
            AgentConfig::new(PANICS_AFTER_ONE_TURN),
            Arc::new(model),
            Arc::new(ToolExecutor::new(tools)),
        );
        let events: Vec<AgentEvent> = agent.run("go").collect().await;
        let Some(AgentEvent::Stop {
            reason,
            error,
            error_code,
            messages,
            turns,
            tool_calls,
            ..
        }) = events.last()
        else {
            panic!("no stop event: {events:?}");
        };
        assert_eq!((reason, *error_code), (&StopReason::Error, Some(INTERNAL)));
        let error = error.as_deref().unwrap_or_default();
        assert!(
            error.contains("the agent loop panicked: a bug in the loop"),
            "{error}"
        );
        assert_eq!((*turns, *tool_calls), (1, 1));
        let roles: Vec<&str> = messages.iter().filter_map(|m| m["role"].as_str()).collect();
        assert_eq!(roles, ["user", "assistant", "user"], "{messages:?}");
        assert_eq!(messages[2]["content"][0]["tool_use_id"], "t1");
    }

    /// The fallback's error says which overloads it saw: 529s, overloads without a status,
    /// or both; anything else in between starts the count again.
    #[test]
    fn repeated_overloads_say_what_they_were() {
        let seen = |retries: &[(Option<u16>, bool)]| {
            let mut overloads = Overloads::default();
            for &(status, overloaded) in retries {
                overloads.observe(status, overloaded);
            }
            overloads
        };
        let only_529 = seen(&[(Some(529), true), (Some(529), true), (Some(529), true)]);
        assert_eq!(only_529.total(), 3);
        assert_eq!(only_529.to_string(), "3 consecutive HTTP 529 responses");
        let in_band = seen(&[(None, true), (None, true)]);
        assert_eq!(in_band.total(), 2);
        assert!(
            in_band
                .to_string()
                .starts_with("2 consecutive overloaded errors (without an HTTP 529"),
            "{in_band}"
        );
        let mixed = seen(&[(Some(529), true), (None, true), (None, true)]);
        assert_eq!(
            mixed.to_string(),
            "3 consecutive overloaded responses (1 HTTP 529, 2 overloaded errors without one)"
        );
        let one = seen(&[(None, true), (Some(529), true)]);
        assert_eq!(
            one.to_string(),
            "2 consecutive overloaded responses (1 HTTP 529, 1 overloaded error without one)"
        );
        let reset = seen(&[(Some(529), true), (Some(500), false), (None, true)]);
        assert_eq!(reset.total(), 1);
        assert_eq!(seen(&[(None, false)]), Overloads::default());
    }

    /// A continuation prompt with a note on cut calls is still the loop's (compaction keeps
    /// the user's prompt before it); a user's text that merely starts like it is not.
    #[test]
    fn continuation_prompts_are_recognised_with_their_note() {
        let continuation = "Resume.";
        let noted = format!(
            "{continuation}\n\n{}",
            cut_calls_note(&["write".to_owned()])
        );
        assert!(is_continuation(continuation, continuation));
        assert!(is_continuation(&noted, continuation));
        assert!(!is_continuation("Resume. And also do this", continuation));
        assert!(!is_continuation("Resume.\n\nmy own words", continuation));
        // A note added to the prompt's message later makes its content blocks.
        let blocks = |texts: &[&str]| {
            let blocks: Vec<Value> = texts
                .iter()
                .map(|t| json!({"type": "text", "text": t}))
                .collect();
            json!({"role": "user", "content": blocks})
        };
        assert!(is_continuation_message(
            &blocks(&[continuation, &noted[continuation.len() + 2..]]),
            continuation
        ));
        assert!(!is_continuation_message(
            &blocks(&[continuation, "my own words"]),
            continuation
        ));
        assert!(is_continuation_message(
            &json!({"role": "user", "content": continuation}),
            continuation
        ));
    }

    /// A note the loop added after the user's prompt leaves with the cut response when a
    /// summary replaces it; the prompt stays.
    #[test]
    fn compaction_sources_lose_the_cut_calls_notes() {
        let note = cut_calls_note(&["write".to_owned()]);
        let prompt = json!({"role": "user", "content": [
            {"type": "text", "text": "write a big file"},
            {"type": "text", "text": note},
        ]});
        assert_eq!(
            without_cut_calls_notes(prompt),
            json!({"role": "user", "content": [{"type": "text", "text": "write a big file"}]})
        );
    }
}
