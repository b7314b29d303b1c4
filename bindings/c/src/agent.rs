//! The agent loop (`fl_agent`, `fl_agent_run`): the core's [`Agent`] over an `fl_client`, with
//! the C tools of an `fl_executor`.
//!
//! A run is driven like a streaming turn: each run owns a single-threaded tokio runtime, and
//! `fl_agent_run_next_event` drives it on the calling thread until the loop has an event, so
//! the tool callbacks run on that thread (as they do under `fl_turn_next_event`). The HTTP
//! requests run on the client's own thread (see `client.rs`). Events are the core's
//! [`AgentEvent`] serialised as JSON: the same objects the CLI's `ferroloop run --json`, Python
//! and Node produce (durations in milliseconds, as the CLI and Node have them).

use std::cell::Cell;
use std::ffi::c_char;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use ferroloop_core::agent::{Agent, AgentConfig, AgentEvent, AgentRun};
use ferroloop_core::exec::{CancellationToken, ExecutorConfig, ToolExecutor, ToolRegistry};
use ferroloop_core::tokens::UnknownFamily;
use ferroloop_core::tools::register_builtins;
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::boundary::{self, FfiError, FfiResult};
use crate::client::{ClientShared, fl_client};
use crate::exec::{DRIVING, Driving, TurnLink, fl_cancel_token, fl_executor};
use crate::options::JsonOptions;
use crate::owned_runtime::OwnedRuntime;
use crate::status::fl_status;
use crate::text::{self, Out};

/// An agent (opaque): a model (an `fl_client`), tools (an `fl_executor`'s) and a configuration.
/// Create it with `fl_agent_new`, start runs with `fl_agent_run_start` or
/// `fl_agent_run_start_prompt`, release it with `fl_agent_free`.
///
/// Thread-safe: runs of one agent may be started and driven on any threads, at the same time.
pub struct fl_agent {
    agent: Agent,
    client: Arc<ClientShared>,
    /// The tool definitions sent to the model, as NUL-terminated JSON.
    definitions: String,
}

/// A run of an agent (opaque): the loop of model calls and tool calls, until the model stops
/// or a limit does. Read its events with `fl_agent_run_next_event` (which also drives it), then
/// its final conversation with `fl_agent_run_messages`; release it with `fl_agent_run_free`.
///
/// Thread-safety: `fl_agent_run_cancel` and `fl_agent_run_messages` may be called from any
/// thread at any time, also from the run's tool callbacks. `fl_agent_run_next_event` is called
/// by one thread at a time (`FL_STATUS_INVALID_STATE` otherwise); `fl_agent_run_free` must not
/// overlap any other call on the run.
pub struct fl_agent_run {
    /// The core run (until its stop event) and the buffer of the last event's view. Locked by
    /// the thread in `fl_agent_run_next_event` (one at a time: see `polling`).
    state: Mutex<RunState>,
    /// Cancels the run from any thread.
    cancel: CancellationToken,
    /// A thread is in `fl_agent_run_next_event`.
    polling: AtomicBool,
    /// The final conversation as NUL-terminated JSON, from the stop event on.
    messages: OnceLock<String>,
    /// Keeps the run linked to the host's cancel token; unlinks it when the run is freed.
    link: Option<TurnLink>,
    /// Drives the loop, its tools and timers.
    runtime: Option<OwnedRuntime>,
    /// The client the run's requests go through; dropped after the runtime, so that the
    /// client's own runtime is never shut down from inside this one.
    client: Option<Arc<ClientShared>>,
}

/// The run and the buffer the last event's view points into.
struct RunState {
    /// The core run; `None` once its stop event was delivered.
    run: Option<AgentRun>,
    /// NUL-terminated.
    event: String,
}

/// What `fl_agent_run_next_event` (or `fl_message_stream_next_event`, for a client's own
/// request) found.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum fl_agent_next {
    /// No event within the timeout: the run goes on; call `fl_agent_run_next_event` again.
    FL_AGENT_NEXT_NONE = 0,
    /// The next event of the run is in `event_json`.
    FL_AGENT_NEXT_EVENT = 1,
    /// The run has ended: its last event (`"type":"stop"`) was delivered by an earlier call.
    /// Every later call reports this again. (A message stream: it has ended, however it ended;
    /// read its outcome with `fl_message_stream_message` and `fl_message_stream_error`.)
    FL_AGENT_NEXT_END = 2,
}

/// The built-in tools an agent asked for, and where they work.
#[derive(Debug, Default)]
struct Builtins {
    names: Vec<String>,
    workspace: Option<PathBuf>,
}

/// The loop's configuration and the built-in tools for the options object `json` (see
/// `fl_agent_new`).
fn config_of(json: &str) -> FfiResult<(AgentConfig, Builtins)> {
    let mut options = JsonOptions::parse(json, "agent")?;
    let model = options
        .string("model")?
        .ok_or_else(|| FfiError::invalid("agent option \"model\" is required"))?;
    let mut config = AgentConfig::new(model);
    config.system = options.string("system")?;
    if let Some(turns) = options.count("max_turns")? {
        config.limits.max_turns = turns;
    }
    if let Some(tokens) = options.count("max_tokens")? {
        config.limits.max_tokens = tokens;
    }
    config.limits.token_budget = options.count("token_budget")?;
    if let Some(continuations) = options.count("max_continuations")? {
        config.max_continuations = continuations;
    }
    // 0 raises nothing: the core's `None`, as Python's `escalated_max_tokens=0`.
    if let Some(tokens) = options.count::<u64>("escalated_max_tokens")? {
        config.escalated_max_tokens = (tokens > 0).then_some(tokens);
    }
    if let Some(keep) = options.count("keep_recent_tool_results")? {
        config.keep_recent_tool_results = keep;
    }
    if let Some(caching) = options.boolean("prompt_caching")? {
        config.prompt_caching = caching;
    }
    if let Some(name) = options.string("tokenizer")? {
        config.family = name.parse().map_err(|error: UnknownFamily| {
            FfiError::invalid(format!("agent option \"tokenizer\": {error}"))
        })?;
    }
    if let Some(extra) = options.object("extra")? {
        config.extra = extra;
    }
    config.fallback_model = options.string("fallback_model")?;
    if let Some(retries) = options.count("fallback_after_529_retries")? {
        config.fallback_after_529_retries = retries;
    }
    let builtins = Builtins {
        names: options.strings("builtin_tools")?.unwrap_or_default(),
        workspace: options.string("workspace")?.map(PathBuf::from),
    };
    options.finish()?;
    // Refused here, as Python and Node refuse it at construction, rather than by every run.
    config
        .check()
        .map_err(|error| FfiError::invalid(format!("invalid agent configuration: {error}")))?;
    Ok((config, builtins))
}

/// The agent's own executor: the C executor's tools and settings (none and the defaults
/// without one), and the built-in tools asked for.
fn tools_of(executor: Option<&fl_executor>, builtins: Builtins) -> FfiResult<ToolExecutor> {
    let mut registry = ToolRegistry::new();
    let mut config = ExecutorConfig::default();
    if let Some(executor) = executor {
        config = executor.config.clone();
        // The tools are shared, not copied: a C tool is its callback and userdata.
        let source = executor.executor().registry();
        for name in source.names() {
            if let Some(tool) = source.get(name) {
                registry
                    .register_arc(Arc::clone(tool))
                    .map_err(|error| FfiError::invalid(error.to_string()))?;
            }
        }
    }
    // A C tool of the same name is a duplicate: refused, as in Python and Node.
    register_builtins(
        &mut registry,
        &builtins.names,
        builtins.workspace.as_deref(),
        &config.budget.spill_dir,
    )
    .map_err(|error| FfiError::invalid(error.to_string()))?;
    Ok(ToolExecutor::builder(registry).config(config).build())
}

/// Creates an agent and stores it in `*out`. The caller owns it and releases it with
/// `fl_agent_free`.
///
/// `client` is the model the agent calls. `executor` (may be NULL: no tools) gives the tools
/// offered to the model, with its settings (concurrency, timeouts, cleanup grace, result size
/// limits, spill directory and turn budget); its tools can no longer be added to afterwards (as
/// after `fl_turn_new`), and its callbacks and userdata must stay usable until every run of the
/// agent is freed. The agent keeps what it needs of both: the client and the executor may be
/// freed before it.
///
/// `options_json` (`len` bytes of UTF-8) is a JSON object with the options of Python's
/// `Agent`; `model` is required, every other key optional (`null` counts as absent):
///
/// - `model`: the model name sent in requests; `system`: the system prompt;
/// - `max_turns` (default 50), `max_tokens` (each request's, default 8192), `token_budget`
///   (input + output tokens over the run), `max_continuations` (of a `max_tokens` stop,
///   default 3), `escalated_max_tokens` (default 64000; 0: never raised),
///   `keep_recent_tool_results` (default 5), `prompt_caching` (default true);
/// - `tokenizer`: the family used for estimates (`claude`, `o200k`, `cl100k`, ...);
/// - `extra`: an object merged into every request (`temperature`, `thinking`, server `tools`);
/// - `fallback_model`, `fallback_after_529_retries` (default 3);
/// - `builtin_tools`: ferroloop's own tools to offer as well, by name (`read`, `write`, `edit`,
///   `glob`, `grep`, `bash`), confined to `workspace` (a directory; default: the current
///   directory). They run on the run's thread like the C tools (`bash` starts processes).
///   A `bash` call's processes (its process group) are killed when the call times out or is
///   cancelled and when its run is cancelled or freed; a host that ends (`exit()`, a return
///   from `main`) while one runs leaves them running, orphaned: cancel or free the run first.
///
/// An unknown key, a value of the wrong type (the message names the key), a missing `model`,
/// an unknown tokenizer or built-in tool, a tool name given twice (a C tool and a built-in) or,
/// with built-in tools, a workspace that is not a directory is `FL_STATUS_INVALID_ARGUMENT`. So
/// is a configuration every run would refuse (the core's check: an empty or blank `model` or
/// `fallback_model`, `max_tokens` of 0 or not above `extra.thinking.budget_tokens`, `extra`
/// holding `messages` or `model`, a `tool_choice` forcing tool use with thinking on or naming
/// no tool, a tool name the providers refuse — not 1 to 64 ASCII letters, digits, `_` or `-` —
/// ...), with the last error `invalid agent configuration: ...`, as Python's `ValueError` and
/// Node's `InvalidArgumentError` when the agent is made. A client made before a `fork()` of
/// this process is `FL_STATUS_INVALID_STATE` (see `fl_client_new`).
///
/// Thread-safe.
///
/// # Safety
/// `client` must be a live client; `executor` must be NULL or a live executor; `options_json`
/// must be valid for reads of `len` bytes; `out` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_agent_new(
    client: *const fl_client,
    executor: *const fl_executor,
    options_json: *const c_char,
    len: usize,
    out: *mut *mut fl_agent,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promises on `client`, `executor` and `options_json`.
        let (client, executor, json) = unsafe {
            (
                text::handle_ref(client, "client")?,
                executor.as_ref(),
                text::str_arg(options_json, len, "options_json")?,
            )
        };
        let out = Out::new(out, "out")?;
        client.shared.check_process()?;
        let (config, builtins) = config_of(json)?;
        let tools = tools_of(executor, builtins)?;
        let shared = Arc::clone(&client.shared);
        let agent = Agent::new(config, shared.model(), Arc::new(tools));
        // Tool names the providers refuse, a `tool_choice` naming no tool: every run would
        // stop on them before its first request.
        agent
            .check_tools()
            .map_err(|error| FfiError::invalid(format!("invalid agent configuration: {error}")))?;
        let mut definitions = Value::Array(agent.tool_definitions()).to_string();
        definitions.push('\0');
        let handle = Box::new(fl_agent {
            agent,
            client: shared,
            definitions,
        });
        // SAFETY: not NULL (checked) and writable (the caller's promise).
        unsafe { out.write(Box::into_raw(handle)) };
        Ok(())
    })
}

/// Writes into `*definitions_json` / `*definitions_len` a view of the tool definitions the agent
/// sends the model: a JSON array of `{"name", "description", "input_schema"}` objects, sorted by
/// name (the executor's C tools and the built-in tools), then the server tools of the `extra`
/// option's `tools`. The view is NUL-terminated and valid until `fl_agent_free`. Thread-safe.
///
/// # Safety
/// `agent` must be a live agent; `definitions_json` and `definitions_len` must be valid for
/// writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_agent_tool_definitions(
    agent: *const fl_agent,
    definitions_json: *mut *const c_char,
    definitions_len: *mut usize,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `agent`.
        let agent = unsafe { text::handle_ref(agent, "agent") }?;
        let definitions_json = Out::new(definitions_json, "definitions_json")?;
        let definitions_len = Out::new(definitions_len, "definitions_len")?;
        // SAFETY: both not NULL (checked) and writable (the caller's promise). The string lives
        // as long as the agent and never changes.
        unsafe {
            definitions_json.write(agent.definitions.as_ptr().cast());
            definitions_len.write(agent.definitions.len() - 1);
        }
        Ok(())
    })
}

/// Releases an agent. NULL is accepted and ignored. Its runs keep working until they are
/// freed.
///
/// # Safety
/// `agent` must be NULL or an agent from `fl_agent_new`, not freed yet; it must not be used
/// afterwards, and no other call on it (`fl_agent_run_start`, `fl_agent_run_start_prompt`,
/// `fl_agent_tool_definitions`) may be in progress on another thread. A run already
/// started is not such a call: it may be driven on while the agent is freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_agent_free(agent: *mut fl_agent) {
    boundary::run_void(|| {
        if !agent.is_null() {
            // SAFETY: a pointer from `Box::into_raw` in `fl_agent_new`, freed only once.
            drop(unsafe { Box::from_raw(agent) });
        }
    });
}

/// Starts a run of `agent` on `messages`; the shared part of the two `fl_agent_run_start*`.
fn start(
    agent: &fl_agent,
    messages: Vec<Value>,
    cancel: Option<&fl_cancel_token>,
) -> FfiResult<Box<fl_agent_run>> {
    agent.client.check_process()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| FfiError::state(format!("cannot start the runtime: {error}")))?;
    // The loop is a task of the run's runtime: spawned now, driven by the host's calls.
    let run = {
        let _context = runtime.enter();
        agent.agent.run_messages(messages)
    };
    let token = run.cancellation_token().clone();
    let link = cancel.map(|cancel| TurnLink::new(&cancel.token, &cancel.turns, token.clone()));
    Ok(Box::new(fl_agent_run {
        state: Mutex::new(RunState {
            run: Some(run),
            event: String::new(),
        }),
        cancel: token,
        polling: AtomicBool::new(false),
        messages: OnceLock::new(),
        link,
        runtime: Some(OwnedRuntime::new(runtime)),
        client: Some(Arc::clone(&agent.client)),
    }))
}

/// Starts a run continuing the conversation `messages_json` (`len` bytes of UTF-8): a JSON
/// array of messages in the Anthropic Messages shape, ending with a user message
/// (`[{"role":"user","content":"What is in notes.txt?"}]`), and stores it in `*out`. The caller
/// owns the run and releases it with `fl_agent_run_free`.
///
/// Nothing happens until `fl_agent_run_next_event` drives the run. Text that is not UTF-8 is
/// `FL_STATUS_INVALID_UTF8`; anything but a JSON array is `FL_STATUS_INVALID_ARGUMENT`; an
/// agent whose client was made before a `fork()` of this process is `FL_STATUS_INVALID_STATE`
/// (see `fl_client_new`). A
/// conversation the API would refuse (empty, not ending with a user message, unpaired tool
/// calls) makes no request: the run's only event is a `stop` with `error_code`
/// `invalid_history`.
///
/// `cancel` may be NULL; cancelling it (from any thread) cancels the run as
/// `fl_agent_run_cancel` does, and a token cancelled earlier stops the run before its first
/// request.
///
/// Thread-safe.
///
/// # Safety
/// `agent` must be a live agent; `messages_json` must be valid for reads of `len` bytes;
/// `cancel` must be NULL or a live token (it may be freed while the run lives: the run can then
/// no longer be cancelled through it); `out` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_agent_run_start(
    agent: *const fl_agent,
    messages_json: *const c_char,
    len: usize,
    cancel: *const fl_cancel_token,
    out: *mut *mut fl_agent_run,
) -> fl_status {
    // SAFETY: the caller's promises on every argument, forwarded.
    boundary::run(|| unsafe {
        text::start_work(
            (agent, "agent"),
            (messages_json, len, "messages_json"),
            cancel,
            out,
            |agent, json, cancel| {
                let messages = match serde_json::from_str(json) {
                    Ok(Value::Array(messages)) => messages,
                    Ok(_) => {
                        return Err(FfiError::invalid(
                            "messages_json must be a JSON array of messages",
                        ));
                    }
                    Err(error) => {
                        return Err(FfiError::invalid(format!(
                            "messages_json is not valid JSON: {error}"
                        )));
                    }
                };
                start(agent, messages, cancel)
            },
        )
    })
}

/// Starts a run for one user prompt: `prompt` (`len` bytes of UTF-8, plain text, not JSON)
/// becomes the conversation's only message. Otherwise as `fl_agent_run_start` (an empty prompt
/// makes a run that stops at once with `invalid_history`).
///
/// Thread-safe.
///
/// # Safety
/// `agent` must be a live agent; `prompt` must be valid for reads of `len` bytes; `cancel` must
/// be NULL or a live token; `out` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_agent_run_start_prompt(
    agent: *const fl_agent,
    prompt: *const c_char,
    len: usize,
    cancel: *const fl_cancel_token,
    out: *mut *mut fl_agent_run,
) -> fl_status {
    // SAFETY: the caller's promises on every argument, forwarded.
    boundary::run(|| unsafe {
        text::start_work(
            (agent, "agent"),
            (prompt, len, "prompt"),
            cancel,
            out,
            |agent, prompt, cancel| {
                let messages = vec![json!({"role": "user", "content": prompt})];
                start(agent, messages, cancel)
            },
        )
    })
}

/// Drives the run on the calling thread (model calls, tool callbacks, timers) until it has an
/// event, and writes what it found into `*next`, with the event in `*event_json` /
/// `*event_len`.
///
/// - `FL_AGENT_NEXT_EVENT`: the view holds one event as a JSON object with a `type`:
///   `turn_start`, `text_delta`, `thinking_delta`, `tool_started`, `tool_progress`,
///   `tool_finished`, `retry`, `model_fallback`, `max_tokens_raised`, `context`, `cache_break`,
///   `usage`, `turn_end`, and last `stop`
///   (`{"type":"stop","reason":"end_turn","error":null,"error_code":null,"status":null,
///   "request_id":null,"retry_after":null,"messages":[...],"turns":2,"tool_calls":1,
///   "input_tokens":...,"output_tokens":...}`): the objects of the CLI's `ferroloop run
///   --json`, Python's and Node's runs, durations in milliseconds. A failed run ends with a
///   `stop` of reason `error` and a stable `error_code` (`invalid_request` for an HTTP 400,
///   `authentication`, `rate_limited`, `overloaded`, ...); a stop on a failed model call also
///   has the call's `status`, `request_id` and `retry_after` (the wait a rate limit's, an
///   overload's or a server error's `retry-after` asked for, in milliseconds), each
///   `null` when not known. A cancelled run
///   ends with reason `aborted`.
/// - `FL_AGENT_NEXT_NONE`: nothing within the timeout (the view is empty).
/// - `FL_AGENT_NEXT_END`: the `stop` event was delivered by an earlier call (the view is
///   empty); `fl_agent_run_messages` is ready.
///
/// `timeout_ms`: how long to wait, in milliseconds; 0 does not wait (the run still makes the
/// progress it can at once); a negative value waits as long as it takes. The run only
/// progresses while this function runs (the HTTP response keeps arriving meanwhile, on the
/// client's thread). The view is NUL-terminated, owned by the run, and valid until the next
/// call of this function or `fl_agent_run_free`.
///
/// Thread-safety: one thread at a time per run (a concurrent call, including one from the
/// run's tool callback, returns `FL_STATUS_INVALID_STATE`). The tool callbacks run on the
/// calling thread and follow `fl_turn_next_event`'s rules: they must not drive a run or turn or
/// run an executor on this thread (`FL_STATUS_INVALID_STATE`), nor free the run.
///
/// # Safety
/// `run` must be a live run; `next`, `event_json` and `event_len` must be valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_agent_run_next_event(
    run: *const fl_agent_run,
    timeout_ms: i64,
    next: *mut fl_agent_next,
    event_json: *mut *const c_char,
    event_len: *mut usize,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `run`.
        let run = unsafe { text::handle_ref(run, "run") }?;
        let next = Out::new(next, "next")?;
        let event_json = Out::new(event_json, "event_json")?;
        let event_len = Out::new(event_len, "event_len")?;
        if run.polling.swap(true, Ordering::AcqRel) {
            return Err(FfiError::state(
                "fl_agent_run_next_event is already in progress on this run (another thread, \
                 or a tool callback of this run)",
            ));
        }
        let _polling = PollingGuard(&run.polling);
        if DRIVING.with(Cell::get) {
            return Err(FfiError::state(
                "fl_agent_run_next_event was called on a thread that is driving a run or a \
                 turn (from a tool callback): hand the call to a worker thread, drive this run \
                 there, then complete the call",
            ));
        }
        let mut state = run.state.lock().unwrap_or_else(PoisonError::into_inner);
        let found = run.next(&mut state, timeout_ms)?;
        state.event.push('\0');
        // SAFETY: all three not NULL (checked) and writable (the caller's promise). The view
        // points into `state`, untouched until the next call of this function or the free.
        unsafe {
            next.write(found);
            text::write_terminated(event_json, event_len, &state.event);
        }
        Ok(())
    })
}

impl fl_agent_run {
    /// Drives the run until its next event, its end or the timeout; leaves the event's JSON
    /// (without the NUL) in `state.event`.
    fn next(&self, state: &mut RunState, timeout_ms: i64) -> FfiResult<fl_agent_next> {
        state.event.clear();
        let (Some(core), Some(runtime)) = (state.run.as_mut(), self.runtime.as_ref()) else {
            return Ok(fl_agent_next::FL_AGENT_NEXT_END);
        };
        let event = {
            let _driving = Driving::enter();
            runtime.block_on(async {
                match u64::try_from(timeout_ms) {
                    // Negative: no timeout.
                    Err(_) => Some(core.next().await),
                    // `timeout` polls the run once before looking at the clock, so 0 still
                    // makes the progress possible at once.
                    Ok(ms) => tokio::time::timeout(Duration::from_millis(ms), core.next())
                        .await
                        .ok(),
                }
            })
        };
        match event {
            None => Ok(fl_agent_next::FL_AGENT_NEXT_NONE),
            Some(Some(event)) => {
                state.event = serde_json::to_string(&event).map_err(|error| {
                    FfiError::new(
                        fl_status::FL_STATUS_PANIC,
                        format!("internal error: cannot serialise an event: {error}"),
                    )
                })?;
                if let AgentEvent::Stop { messages, .. } = &event {
                    // The stop event is always the last: the run is over.
                    let mut json = serde_json::to_string(messages).map_err(|error| {
                        FfiError::new(
                            fl_status::FL_STATUS_PANIC,
                            format!("internal error: cannot serialise the messages: {error}"),
                        )
                    })?;
                    json.push('\0');
                    let _ = self.messages.set(json);
                    self.finish(state);
                }
                Ok(fl_agent_next::FL_AGENT_NEXT_EVENT)
            }
            // The loop ended without its stop event: only a task that panicked does that.
            Some(None) => {
                self.finish(state);
                Err(FfiError::new(
                    fl_status::FL_STATUS_PANIC,
                    "internal error: the run ended without a stop event",
                ))
            }
        }
    }

    /// Drops the finished core run inside its runtime (its task's leftovers with it).
    fn finish(&self, state: &mut RunState) {
        if let Some(runtime) = self.runtime.as_ref() {
            let _context = runtime.enter();
            drop(state.run.take());
        }
    }

    /// Releases the run: cancels it, drops the loop inside its runtime, then the runtime, then
    /// the client.
    fn release(mut self: Box<Self>) {
        self.cancel.cancel();
        if let Some(runtime) = self.runtime.take() {
            {
                // The loop's futures (tool calls, timers) are dropped in their runtime.
                let _context = runtime.enter();
                let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
                drop(state.run.take());
            }
            // Drops the loop's task too (a run freed mid-turn: nothing waits for its tools),
            // unless this is a child forked after the run was made (see `OwnedRuntime`).
            drop(runtime);
        }
        drop(self.link.take());
        drop(self.client.take());
    }
}

/// Cancels the run: its running tools report `fl_tool_call_cancelled` at once, its queued tools
/// never start, the model call in flight is dropped, and the run ends with a `stop` event of
/// reason `aborted` whose conversation is still valid for the API (every tool call answered).
/// Keep calling `fl_agent_run_next_event` to get there. Idempotent.
///
/// Thread-safe (also from the run's tool callbacks).
///
/// # Safety
/// `run` must be a live run.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_agent_run_cancel(run: *const fl_agent_run) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `run`.
        let run = unsafe { text::handle_ref(run, "run") }?;
        run.cancel.cancel();
        Ok(())
    })
}

/// Writes into `*messages_json` / `*messages_len` a view of the run's final conversation: the
/// `messages` of its `stop` event, a JSON array to continue from (pass it, with the next user
/// message appended, to `fl_agent_run_start`). The view is NUL-terminated and valid until
/// `fl_agent_run_free`.
///
/// `FL_STATUS_INVALID_STATE` until `fl_agent_run_next_event` has delivered the `stop` event.
///
/// Thread-safe.
///
/// # Safety
/// `run` must be a live run; `messages_json` and `messages_len` must be valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_agent_run_messages(
    run: *const fl_agent_run,
    messages_json: *mut *const c_char,
    messages_len: *mut usize,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `run`.
        let run = unsafe { text::handle_ref(run, "run") }?;
        let messages_json = Out::new(messages_json, "messages_json")?;
        let messages_len = Out::new(messages_len, "messages_len")?;
        let messages = run.messages.get().ok_or_else(|| {
            FfiError::state(
                "the run has not ended: read its events with fl_agent_run_next_event until its \
                 stop event",
            )
        })?;
        // SAFETY: both not NULL (checked) and writable (the caller's promise). The string is
        // set once and lives as long as the run.
        unsafe {
            messages_json.write(messages.as_ptr().cast());
            messages_len.write(messages.len() - 1);
        }
        Ok(())
    })
}

/// Releases a run. NULL is accepted and ignored. A run freed before its end is cancelled: its
/// running tools report `fl_tool_call_cancelled` at once, and completing their calls later is
/// harmless (the replies are dropped); the model call in flight is dropped. Nothing waits for
/// the tools: the call returns at once. So it does in a child forked after the run was made:
/// the run's threads (those of its built-in tools) are the parent's, and its runtime is left
/// alone there (see `fl_client_new`).
///
/// Called from one of the run's own tool callbacks (while `fl_agent_run_next_event` drives it),
/// it does nothing and records the thread's last error: free the run after that call returns.
///
/// # Safety
/// `run` must be NULL or a run from `fl_agent_run_start*`, not freed yet; it must not be used
/// afterwards, and no other call on it may be in progress on another thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_agent_run_free(run: *mut fl_agent_run) {
    boundary::run_void(|| {
        if run.is_null() {
            return;
        }
        // SAFETY: a live run (the caller's promise); only its atomic flag is read.
        if unsafe { &*run }.polling.load(Ordering::Acquire) {
            boundary::set_last_error(
                "fl_agent_run_free: fl_agent_run_next_event is in progress on this run; free it \
                 after that call returns",
            );
            return;
        }
        // SAFETY: a pointer from `Box::into_raw` in `fl_agent_run_start*`, freed only once, and
        // not in use (checked above, and the caller's promise).
        unsafe { Box::from_raw(run) }.release();
    });
}

/// Clears the polling flag when `fl_agent_run_next_event` returns, even by a panic.
struct PollingGuard<'a>(&'a AtomicBool);

impl Drop for PollingGuard<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::boundary::last_error_for_tests;
    use crate::client::{fl_client_free, fl_client_new};
    use crate::exec::{fl_cancel_token_cancel, fl_cancel_token_free, fl_cancel_token_new};
    use ferroloop_core::tokens::Family;

    /// A client for a loopback port nothing listens on (the tests here make no request).
    fn client() -> *mut fl_client {
        let json = r#"{"from_env": false, "base_url": "http://127.0.0.1:9", "max_retries": 0}"#;
        let mut client = std::ptr::null_mut();
        // SAFETY: `json` is readable for its length; `client` is a local.
        let status = unsafe { fl_client_new(json.as_ptr().cast(), json.len(), &mut client) };
        assert_eq!(status, fl_status::FL_STATUS_OK);
        client
    }

    fn new_agent(client: *const fl_client, json: &str) -> (fl_status, *mut fl_agent) {
        let mut agent = std::ptr::null_mut();
        // SAFETY: a live client; `json` readable for its length; `agent` is a local.
        let status = unsafe {
            fl_agent_new(
                client,
                std::ptr::null(),
                json.as_ptr().cast(),
                json.len(),
                &mut agent,
            )
        };
        (status, agent)
    }

    fn start(
        agent: *const fl_agent,
        json: &str,
        cancel: *const fl_cancel_token,
    ) -> (fl_status, *mut fl_agent_run) {
        let mut run = std::ptr::null_mut();
        // SAFETY: a live agent; `json` readable for its length; `run` is a local.
        let status = unsafe {
            fl_agent_run_start(agent, json.as_ptr().cast(), json.len(), cancel, &mut run)
        };
        (status, run)
    }

    /// The next event: what was found and the event's text.
    fn next(run: *const fl_agent_run) -> (fl_status, fl_agent_next, String) {
        let mut found = fl_agent_next::FL_AGENT_NEXT_NONE;
        let mut json = std::ptr::null();
        let mut len = 0usize;
        // SAFETY: a live run; the out-parameters are locals.
        let status =
            unsafe { fl_agent_run_next_event(run, 10_000, &mut found, &mut json, &mut len) };
        let text = if status == fl_status::FL_STATUS_OK {
            // SAFETY: the view is valid until the next call on the run.
            let bytes = unsafe { std::slice::from_raw_parts(json.cast::<u8>(), len + 1) };
            assert_eq!(bytes[len], 0, "NUL-terminated");
            String::from_utf8(bytes[..len].to_vec()).unwrap()
        } else {
            String::new()
        };
        (status, found, text)
    }

    #[test]
    fn options_reach_the_configuration() {
        let (config, _) = config_of(
            r#"{"model": "m", "system": "s", "max_turns": 3, "max_tokens": 100,
                "token_budget": 5000, "max_continuations": 1, "escalated_max_tokens": 0,
                "keep_recent_tool_results": 2, "prompt_caching": false, "tokenizer": "o200k",
                "extra": {"temperature": 0.5}, "fallback_model": "f",
                "fallback_after_529_retries": 1}"#,
        )
        .unwrap();
        assert_eq!(config.model, "m");
        assert_eq!(config.system.as_deref(), Some("s"));
        assert_eq!(config.limits.max_turns, 3);
        assert_eq!(config.limits.max_tokens, 100);
        assert_eq!(config.limits.token_budget, Some(5000));
        assert_eq!(config.max_continuations, 1);
        assert_eq!(config.escalated_max_tokens, None);
        assert_eq!(config.keep_recent_tool_results, 2);
        assert!(!config.prompt_caching);
        assert_eq!(config.family, "o200k".parse::<Family>().unwrap());
        assert_eq!(config.extra.get("temperature"), Some(&json!(0.5)));
        assert_eq!(config.fallback_model.as_deref(), Some("f"));
        assert_eq!(config.fallback_after_529_retries, 1);
        // Defaults where nothing is said.
        let (config, builtins) = config_of(r#"{"model": "m", "system": null}"#).unwrap();
        assert!(builtins.names.is_empty() && builtins.workspace.is_none());
        assert_eq!(config.system, None);
        assert_eq!(config.limits.max_turns, 50);
        assert_eq!(config.escalated_max_tokens, Some(64_000));
    }

    #[test]
    fn bad_options_are_invalid_arguments_naming_the_problem() {
        let client = client();
        for (json, expected) in [
            ("{}", "agent option \"model\" is required"),
            ("{\"model\": 3}", "agent option \"model\" must be a string"),
            (
                "{\"model\": \"m\", \"max_turns\": 1.5}",
                "agent option \"max_turns\" must be a non-negative integer",
            ),
            (
                "{\"model\": \"m\", \"extra\": []}",
                "agent option \"extra\" must be a JSON object",
            ),
            (
                "{\"model\": \"m\", \"tokenizer\": \"klingon\"}",
                "agent option \"tokenizer\"",
            ),
            (
                "{\"model\": \"m\", \"maxTurns\": 3}",
                "unknown agent option \"maxTurns\"",
            ),
            ("{\"model\": ", "agent options are not valid JSON"),
        ] {
            let (status, agent) = new_agent(client, json);
            assert_eq!(status, fl_status::FL_STATUS_INVALID_ARGUMENT, "{json}");
            assert!(agent.is_null());
            let error = last_error_for_tests();
            assert!(error.contains(expected), "{json}: {error}");
        }
        // SAFETY: a client from `fl_client_new`, freed once.
        unsafe { fl_client_free(client) };
    }

    #[test]
    fn null_arguments_are_refused() {
        let client = client();
        let (status, _) = new_agent(std::ptr::null(), "{\"model\": \"m\"}");
        assert_eq!(status, fl_status::FL_STATUS_NULL_ARGUMENT);
        assert_eq!(last_error_for_tests(), "argument `client` must not be NULL");
        // SAFETY: a live client; `out` NULL is the case under test.
        let status = unsafe {
            fl_agent_new(
                client,
                std::ptr::null(),
                std::ptr::null(),
                0,
                std::ptr::null_mut(),
            )
        };
        assert_eq!(status, fl_status::FL_STATUS_NULL_ARGUMENT);
        let (status, agent) = new_agent(client, "{\"model\": \"m\"}");
        assert_eq!(status, fl_status::FL_STATUS_OK);
        let (status, _) = start(std::ptr::null(), "[]", std::ptr::null());
        assert_eq!(status, fl_status::FL_STATUS_NULL_ARGUMENT);
        // SAFETY: NULL text with a length, and a NULL `out`: the cases under test.
        let (null_text, null_out) = unsafe {
            (
                fl_agent_run_start_prompt(
                    agent,
                    std::ptr::null(),
                    1,
                    std::ptr::null(),
                    &mut std::ptr::null_mut(),
                ),
                fl_agent_run_start_prompt(
                    agent,
                    c"hi".as_ptr(),
                    2,
                    std::ptr::null(),
                    std::ptr::null_mut(),
                ),
            )
        };
        assert_eq!(null_text, fl_status::FL_STATUS_NULL_ARGUMENT);
        assert_eq!(null_out, fl_status::FL_STATUS_NULL_ARGUMENT);
        let (status, found, _) = next(std::ptr::null());
        assert_eq!(status, fl_status::FL_STATUS_NULL_ARGUMENT);
        assert_eq!(found, fl_agent_next::FL_AGENT_NEXT_NONE);
        let (status, run) = start(agent, "[]", std::ptr::null());
        assert_eq!(status, fl_status::FL_STATUS_OK);
        // SAFETY: a live run; NULL out-parameters are the cases under test.
        unsafe {
            let mut found = fl_agent_next::FL_AGENT_NEXT_NONE;
            let mut json = std::ptr::null();
            assert_eq!(
                fl_agent_run_next_event(run, 0, std::ptr::null_mut(), &mut json, &mut 0),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            assert_eq!(
                fl_agent_run_next_event(run, 0, &mut found, std::ptr::null_mut(), &mut 0),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            assert_eq!(
                fl_agent_run_next_event(run, 0, &mut found, &mut json, std::ptr::null_mut()),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            assert_eq!(
                fl_agent_run_messages(run, std::ptr::null_mut(), &mut 0),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            assert_eq!(
                fl_agent_run_messages(std::ptr::null(), &mut json, &mut 0),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            assert_eq!(
                fl_agent_run_cancel(std::ptr::null()),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            fl_agent_run_free(run);
            fl_agent_run_free(std::ptr::null_mut());
            fl_agent_free(agent);
            fl_agent_free(std::ptr::null_mut());
            fl_client_free(client);
        }
    }

    #[test]
    fn messages_that_are_not_an_array_are_refused() {
        let client = client();
        let (_, agent) = new_agent(client, "{\"model\": \"m\"}");
        for (json, status, expected) in [
            (
                "{}",
                fl_status::FL_STATUS_INVALID_ARGUMENT,
                "must be a JSON array",
            ),
            (
                "[",
                fl_status::FL_STATUS_INVALID_ARGUMENT,
                "is not valid JSON",
            ),
            (
                "\u{0}",
                fl_status::FL_STATUS_INVALID_ARGUMENT,
                "is not valid JSON",
            ),
        ] {
            let (got, run) = start(agent, json, std::ptr::null());
            assert_eq!(got, status, "{json:?}");
            assert!(run.is_null());
            assert!(last_error_for_tests().contains(expected), "{json:?}");
        }
        let invalid = [0xffu8];
        let mut run = std::ptr::null_mut();
        // SAFETY: one readable byte; `run` is a local.
        let status = unsafe {
            fl_agent_run_start(
                agent,
                invalid.as_ptr().cast(),
                1,
                std::ptr::null(),
                &mut run,
            )
        };
        assert_eq!(status, fl_status::FL_STATUS_INVALID_UTF8);
        // SAFETY: handles from their constructors, freed once.
        unsafe {
            fl_agent_free(agent);
            fl_client_free(client);
        }
    }

    /// A conversation the API would refuse ends the run at once, without a request: one stop
    /// event, then the end, reported again; the history is readable after the stop only.
    #[test]
    fn a_run_ends_with_its_stop_event_then_reports_the_end() {
        let client = client();
        let (_, agent) = new_agent(client, "{\"model\": \"m\"}");
        let (status, run) = start(agent, "[]", std::ptr::null());
        assert_eq!(status, fl_status::FL_STATUS_OK);
        // The agent and the client may go before the run.
        // SAFETY: handles from their constructors, freed once.
        unsafe {
            fl_agent_free(agent);
            fl_client_free(client);
        }
        let mut json = std::ptr::null();
        let mut len = 0usize;
        // SAFETY: a live run; locals.
        let status = unsafe { fl_agent_run_messages(run, &mut json, &mut len) };
        assert_eq!(status, fl_status::FL_STATUS_INVALID_STATE);
        let (status, found, event) = next(run);
        assert_eq!(status, fl_status::FL_STATUS_OK);
        assert_eq!(found, fl_agent_next::FL_AGENT_NEXT_EVENT);
        let event: Value = serde_json::from_str(&event).unwrap();
        assert_eq!(event["type"], "stop");
        assert_eq!(event["reason"], "error");
        assert_eq!(event["error_code"], "invalid_history");
        for _ in 0..2 {
            let (status, found, event) = next(run);
            assert_eq!(status, fl_status::FL_STATUS_OK);
            assert_eq!(found, fl_agent_next::FL_AGENT_NEXT_END);
            assert_eq!(event, "");
        }
        // SAFETY: a live run; locals.
        let status = unsafe { fl_agent_run_messages(run, &mut json, &mut len) };
        assert_eq!(status, fl_status::FL_STATUS_OK);
        // SAFETY: the view is valid until the run is freed.
        let messages = unsafe { std::slice::from_raw_parts(json.cast::<u8>(), len) };
        assert_eq!(messages, b"[]");
        // SAFETY: a run from `fl_agent_run_start`, freed once.
        unsafe { fl_agent_run_free(run) };
    }

    /// A token cancelled before the run starts stops it before any request (the port in the
    /// client's base URL has no server: a request would end in a connection error instead).
    #[test]
    fn a_cancelled_token_stops_the_run_before_its_first_request() {
        let client = client();
        let (_, agent) = new_agent(client, "{\"model\": \"m\"}");
        let mut token = std::ptr::null_mut();
        // SAFETY: `token` is a local; then a live token.
        unsafe {
            assert_eq!(fl_cancel_token_new(&mut token), fl_status::FL_STATUS_OK);
            assert_eq!(fl_cancel_token_cancel(token), fl_status::FL_STATUS_OK);
        }
        let (status, run) = start(agent, r#"[{"role": "user", "content": "hi"}]"#, token);
        assert_eq!(status, fl_status::FL_STATUS_OK);
        // The run keeps what it needs of the token.
        // SAFETY: a token from `fl_cancel_token_new`, freed once.
        unsafe { fl_cancel_token_free(token) };
        let mut events = Vec::new();
        loop {
            let (status, found, event) = next(run);
            assert_eq!(status, fl_status::FL_STATUS_OK);
            match found {
                fl_agent_next::FL_AGENT_NEXT_EVENT => events.push(event),
                fl_agent_next::FL_AGENT_NEXT_END => break,
                fl_agent_next::FL_AGENT_NEXT_NONE => panic!("no event: {events:?}"),
            }
        }
        let stop: Value = serde_json::from_str(events.last().unwrap()).unwrap();
        assert_eq!(stop["type"], "stop");
        assert_eq!(stop["reason"], "aborted", "{events:?}");
        assert!(
            !events.iter().any(|event| event.contains("\"connection\"")),
            "{events:?}"
        );
        // SAFETY: handles from their constructors, freed once.
        unsafe {
            fl_agent_run_free(run);
            fl_agent_free(agent);
            fl_client_free(client);
        }
    }

    /// A run freed before it was ever driven, or mid-way, is cancelled and released.
    #[test]
    fn runs_freed_before_their_end_release_everything() {
        let client = client();
        let (_, agent) = new_agent(client, "{\"model\": \"m\"}");
        let (_, run) = start(
            agent,
            r#"[{"role": "user", "content": "hi"}]"#,
            std::ptr::null(),
        );
        // SAFETY: a run from `fl_agent_run_start`, freed once.
        unsafe { fl_agent_run_free(run) };
        let (_, run) = start(
            agent,
            r#"[{"role": "user", "content": "hi"}]"#,
            std::ptr::null(),
        );
        let mut found = fl_agent_next::FL_AGENT_NEXT_NONE;
        let mut json = std::ptr::null();
        let mut len = 0usize;
        // SAFETY: a live run; locals. Timeout 0: whatever progress is possible at once.
        let status = unsafe { fl_agent_run_next_event(run, 0, &mut found, &mut json, &mut len) };
        assert_eq!(status, fl_status::FL_STATUS_OK);
        // SAFETY: handles from their constructors, freed once.
        unsafe {
            fl_agent_run_free(run);
            fl_agent_free(agent);
            fl_client_free(client);
        }
    }

    /// A model call in flight: nothing within the timeout is `NONE` (the run goes on), and a
    /// cancel stops the run with `aborted`, the call dropped. The server accepts the request
    /// (the kernel does, in its backlog) and never answers.
    #[test]
    fn a_run_waiting_for_its_model_times_out_then_stops_when_cancelled() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let json = format!(
            r#"{{"from_env": false, "base_url": "http://127.0.0.1:{port}", "max_retries": 0}}"#
        );
        let mut client = std::ptr::null_mut();
        // SAFETY: `json` is readable for its length; `client` is a local.
        let status = unsafe { fl_client_new(json.as_ptr().cast(), json.len(), &mut client) };
        assert_eq!(status, fl_status::FL_STATUS_OK);
        let (_, agent) = new_agent(client, "{\"model\": \"m\"}");
        let (_, run) = start(
            agent,
            r#"[{"role": "user", "content": "hi"}]"#,
            std::ptr::null(),
        );
        let (status, found, event) = next(run);
        assert_eq!(status, fl_status::FL_STATUS_OK);
        assert_eq!(found, fl_agent_next::FL_AGENT_NEXT_EVENT);
        assert!(
            event.starts_with("{\"type\":\"turn_start\",\"turn\":1,"),
            "{event}"
        );
        let mut found = fl_agent_next::FL_AGENT_NEXT_EVENT;
        let mut view = std::ptr::null();
        let mut len = 1usize;
        // SAFETY: a live run; locals.
        let status = unsafe { fl_agent_run_next_event(run, 20, &mut found, &mut view, &mut len) };
        assert_eq!(status, fl_status::FL_STATUS_OK);
        assert_eq!(found, fl_agent_next::FL_AGENT_NEXT_NONE);
        assert_eq!(len, 0);
        // SAFETY: a live run.
        assert_eq!(unsafe { fl_agent_run_cancel(run) }, fl_status::FL_STATUS_OK);
        let mut events = Vec::new();
        loop {
            let (status, found, event) = next(run);
            assert_eq!(status, fl_status::FL_STATUS_OK);
            match found {
                fl_agent_next::FL_AGENT_NEXT_EVENT => events.push(event),
                fl_agent_next::FL_AGENT_NEXT_END => break,
                fl_agent_next::FL_AGENT_NEXT_NONE => panic!("no event: {events:?}"),
            }
        }
        let stop: Value = serde_json::from_str(events.last().unwrap()).unwrap();
        assert_eq!(stop["reason"], "aborted", "{events:?}");
        assert_eq!(stop["messages"], json!([{"role": "user", "content": "hi"}]));
        // SAFETY: handles from their constructors, freed once.
        unsafe {
            fl_agent_run_free(run);
            fl_agent_free(agent);
            fl_client_free(client);
        }
        drop(listener);
    }

    fn definitions(agent: *const fl_agent) -> Value {
        let mut json = std::ptr::null();
        let mut len = 0usize;
        // SAFETY: a live agent; locals.
        let status = unsafe { fl_agent_tool_definitions(agent, &mut json, &mut len) };
        assert_eq!(status, fl_status::FL_STATUS_OK);
        // SAFETY: the view is valid until the agent is freed, and NUL-terminated.
        let bytes = unsafe { std::slice::from_raw_parts(json.cast::<u8>(), len + 1) };
        assert_eq!(bytes[len], 0);
        serde_json::from_slice(&bytes[..len]).unwrap()
    }

    /// Built-in tools join the C tools in the definitions, confined to the workspace; unknown
    /// names, a name given twice and a workspace that is no directory are refused.
    #[test]
    fn builtin_tools_are_offered_beside_the_c_tools() {
        let client = client();
        let dir = std::env::temp_dir().join(format!("ferroloop-capi-agent-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let workspace = serde_json::to_string(dir.to_str().unwrap()).unwrap();
        let (status, agent) = new_agent(
            client,
            &format!(
                r#"{{"model": "m", "builtin_tools": ["read", "glob"], "workspace": {workspace}}}"#
            ),
        );
        assert_eq!(
            status,
            fl_status::FL_STATUS_OK,
            "{}",
            last_error_for_tests()
        );
        let names: Vec<Value> = definitions(agent)
            .as_array()
            .unwrap()
            .iter()
            .map(|definition| definition["name"].clone())
            .collect();
        assert_eq!(names, [json!("glob"), json!("read")]);
        // SAFETY: an agent from `fl_agent_new`, freed once.
        unsafe { fl_agent_free(agent) };
        // No tools at all: an empty array.
        let (_, agent) = new_agent(client, r#"{"model": "m"}"#);
        assert_eq!(definitions(agent), json!([]));
        // SAFETY: NULL arguments are the cases under test; then a live agent freed once.
        unsafe {
            let mut json = std::ptr::null();
            assert_eq!(
                fl_agent_tool_definitions(std::ptr::null(), &mut json, &mut 0),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            assert_eq!(
                fl_agent_tool_definitions(agent, std::ptr::null_mut(), &mut 0),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            fl_agent_free(agent);
        }
        let file = dir.join("file.txt");
        std::fs::write(&file, "x").unwrap();
        let not_a_dir = serde_json::to_string(file.to_str().unwrap()).unwrap();
        for (json, expected) in [
            (
                r#"{"model": "m", "builtin_tools": ["rm"]}"#.to_owned(),
                "unknown built-in tool \"rm\": expected one of read, write, edit, glob, grep, bash",
            ),
            (
                r#"{"model": "m", "builtin_tools": ["read", "read"]}"#.to_owned(),
                "read",
            ),
            (
                r#"{"model": "m", "builtin_tools": "read"}"#.to_owned(),
                "agent option \"builtin_tools\" must be an array of strings",
            ),
            (
                format!(r#"{{"model": "m", "builtin_tools": ["read"], "workspace": {not_a_dir}}}"#),
                "workspace root",
            ),
        ] {
            let (status, agent) = new_agent(client, &json);
            assert_eq!(status, fl_status::FL_STATUS_INVALID_ARGUMENT, "{json}");
            assert!(agent.is_null());
            let error = last_error_for_tests();
            assert!(error.contains(expected), "{json}: {error}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
        // SAFETY: a client from `fl_client_new`, freed once.
        unsafe { fl_client_free(client) };
    }
}
