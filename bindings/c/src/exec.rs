//! The tool executor driven by C callbacks.
//!
//! The executor owns a single-threaded tokio runtime: `fl_executor_run` drives it on the calling
//! thread, so every tool callback runs on that thread, while the replies (`fl_tool_complete`)
//! may come from any thread.

use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_void};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use ferroloop_core::exec::{
    CancellationToken, ExecutorConfig, ExecutorConfigError, RegistryError, ResultLimit, Tool,
    ToolContext, ToolExecutor, ToolFuture, ToolOutput, ToolRegistry, ToolResult, ToolResultContent,
    ToolUse, TurnError,
};
// A lone surrogate escape in tool data reads as U+FFFD, as in Node and in the tracker's and
// the estimates' JSON arguments (it was refused as "unexpected end of hex escape").
use ferroloop_core::json_text::from_str_lossy;
use serde_json::Value;

use crate::boundary::{self, FfiError, FfiResult};
use crate::options::{JsonOptions, Limit};
use crate::owned_runtime::OwnedRuntime;
use crate::status::fl_status;
use crate::text::{self, Out};
use crate::tool_call::{PendingCall, ReplyContent, fl_tool_call};

/// A tool executor (opaque): runs tool calls through C callbacks, safe calls in parallel,
/// exclusive calls alone, and returns the results in request order. Create it with
/// `fl_executor_new` (or `fl_executor_new_json`, which also sets the result size limits),
/// register tools with `fl_executor_add_tool` (or `fl_executor_add_tool_json`), run batches with
/// `fl_executor_run`, release it with `fl_executor_free`.
///
/// One run at a time per executor (a concurrent `fl_executor_run` returns
/// `FL_STATUS_INVALID_STATE`); `fl_executor_free` must not overlap a run; the other functions are
/// thread-safe.
pub struct fl_executor {
    runtime: OwnedRuntime,
    pub(crate) config: ExecutorConfig,
    /// Tools registered so far; taken when the executor is built at the first run or turn.
    registry: Mutex<Option<ToolRegistry>>,
    executor: OnceLock<ToolExecutor>,
    running: AtomicBool,
    /// The JSON of the last run's results (the view `fl_executor_run` returns).
    results: Mutex<String>,
}

/// Settings of an executor. Start from `fl_executor_options_default()`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct fl_executor_options {
    /// At most this many calls of one run or turn run at once (default 10; 0 is treated as 1).
    /// Runs of one executor at the same time admit their calls each on its own.
    pub max_concurrency: usize,
    /// The timeout of tools that declare none, in milliseconds (0: none, the default).
    pub default_timeout_ms: u64,
    /// How long a cancelled or timed-out tool may take to complete its call before its result is
    /// produced anyway, in milliseconds (default 5000).
    pub cleanup_grace_ms: u64,
}

/// Settings of one tool. Start from `fl_tool_options_default()`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct fl_tool_options {
    /// Whether calls may run beside other concurrency-safe calls (default false: a call runs
    /// alone and waits for everything queued before it). This orders the calls of one run or
    /// turn: runs and turns driven on other threads at the same time call the tool there too
    /// (see `fl_tool_fn`).
    pub concurrency_safe: bool,
    /// How long a call may run, in milliseconds (0: the executor's default timeout). A reply
    /// counts when the tool completes its call, however late a turn's host then reads it.
    pub timeout_ms: u64,
    /// Whether a failing call (an error reply) cancels its running siblings and the calls queued
    /// after it (the shell-tool behaviour; default false).
    pub cancels_siblings_on_error: bool,
}

/// What a tool callback is asked to do. Every view is UTF-8, not NUL-terminated, never NULL,
/// and valid only during the callback: copy what the tool needs later.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct fl_tool_invocation {
    /// The tool's name.
    pub tool_name: *const c_char,
    /// Length of `tool_name` in bytes.
    pub tool_name_len: usize,
    /// The `tool_use` id (echoed in the result).
    pub tool_use_id: *const c_char,
    /// Length of `tool_use_id` in bytes.
    pub tool_use_id_len: usize,
    /// The input, as JSON.
    pub input_json: *const c_char,
    /// Length of `input_json` in bytes.
    pub input_json_len: usize,
    /// The call's position in the batch or turn (from 0, in request order).
    pub index: usize,
}

/// A tool implemented in C. Called on the thread running `fl_executor_run` (or, in a streaming
/// turn, `fl_turn_next_event`; in an agent's run, `fl_agent_run_next_event`), once per call,
/// with the `userdata` given to `fl_executor_add_tool`. Runs and turns of one executor, and the
/// runs of agents made with it, may be driven on several threads at once: the callback (with
/// the same `userdata`) is then called on those threads at the same time, whatever the tool's
/// `concurrency_safe`, which only orders the calls of one run or turn. A tool whose state must
/// not be shared that way must lock it, or be driven from one thread. The callback owns `call`: it must complete it exactly once with
/// `fl_tool_complete` or `fl_tool_complete_json`, either before returning or later from any
/// thread (for example a worker thread it hands the call to); until then it may poll
/// `fl_tool_call_cancelled` and report progress with `fl_tool_call_progress`, from any thread
/// too. It should return promptly: other calls only start or finish while it is not running. A
/// call that is never completed keeps `fl_executor_run` waiting (up to the tool's timeout and
/// the cleanup grace, when set), and its turn from ending. It must return normally (no
/// `longjmp`, no C++ exception) and must not run an executor or drive a turn, nor free the
/// executor whose run called it or the turn that called it (see `fl_executor_run`,
/// `fl_executor_free`, `fl_turn_next_event` and `fl_turn_free`).
pub type fl_tool_fn = Option<
    unsafe extern "C" fn(
        userdata: *mut c_void,
        invocation: *const fl_tool_invocation,
        call: *mut fl_tool_call,
    ),
>;

/// Decides whether one call of a C tool may run beside other concurrency-safe calls, from the
/// call's input, as Python's and Node's `concurrency_safe` may be a predicate on the input
/// (registered with `fl_executor_add_tool_json_with_safety`). Called with the tool's
/// `userdata` and the call's input as JSON (`input_json_len` bytes of UTF-8, NUL-terminated,
/// valid only during the call), once per call, before it is admitted: on the thread submitting
/// or driving the call (the one in `fl_executor_run`, `fl_turn_next_event` or
/// `fl_agent_run_next_event`). Returns true for "may run in parallel with other safe calls",
/// false for "runs alone" (the call then waits for the calls running before it and blocks those
/// queued after it).
///
/// It should return promptly and must return normally (no `longjmp`, no C++ exception: as for
/// `fl_tool_fn`, unwinding out of it is undefined behaviour), and must not run an executor,
/// drive a turn or free them. A predicate that cannot decide (an input it does not understand,
/// an error of its own) should return false: that is what ferroloop decides for a predicate that
/// fails in Python (raises) or Node (throws), and for its own side of the call failing (the
/// conservative choice: the call runs alone, never beside a call it might conflict with).
pub type fl_tool_concurrency_safe_fn = Option<
    unsafe extern "C" fn(
        userdata: *mut c_void,
        input_json: *const c_char,
        input_json_len: usize,
    ) -> bool,
>;

/// The host's predicate of `fl_tool_concurrency_safe_fn`, checked not NULL.
type SafetyCallback = unsafe extern "C" fn(*mut c_void, *const c_char, usize) -> bool;

/// Cancels runs and turns (opaque). Create it with `fl_cancel_token_new`, pass it to
/// `fl_executor_run` or `fl_turn_new`, and cancel it from any thread with
/// `fl_cancel_token_cancel`. Thread-safe.
pub struct fl_cancel_token {
    pub(crate) token: CancellationToken,
    /// The turn tokens of the runs in progress under this token. Cancelling cancels them on the
    /// spot, so a tool that cancels the run (or a thread racing the run's next step) stops the
    /// queued calls before the next one starts, not once the runtime gets round to noticing.
    /// Shared with the runs, which unlink their turn when they end.
    pub(crate) turns: Arc<Mutex<LinkedTurns>>,
}

/// Turn tokens linked to a cancel token, by link id.
#[derive(Default)]
pub(crate) struct LinkedTurns {
    next_id: u64,
    turns: Vec<(u64, CancellationToken)>,
}

/// A turn linked to a cancel token for the duration of a run; unlinks it when dropped.
pub(crate) struct TurnLink {
    turns: Arc<Mutex<LinkedTurns>>,
    id: u64,
}

impl TurnLink {
    /// Links `turn` to the token `cancel` (whose `turns` are `turns`), and cancels it at once
    /// when `cancel` is already cancelled.
    pub(crate) fn new(
        cancel: &CancellationToken,
        turns: &Arc<Mutex<LinkedTurns>>,
        turn: CancellationToken,
    ) -> Self {
        let id = {
            let mut linked = turns.lock().unwrap_or_else(PoisonError::into_inner);
            let id = linked.next_id;
            linked.next_id = linked.next_id.wrapping_add(1);
            linked.turns.push((id, turn.clone()));
            id
        };
        // `fl_cancel_token_cancel` cancels the token before it reads the links: either it saw
        // this link, or the token reads as cancelled here.
        if cancel.is_cancelled() {
            turn.cancel();
        }
        Self {
            turns: Arc::clone(turns),
            id,
        }
    }
}

impl Drop for TurnLink {
    fn drop(&mut self) {
        let mut linked = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
        linked.turns.retain(|(id, _)| *id != self.id);
    }
}

/// The default executor settings. Thread-safe.
#[unsafe(no_mangle)]
pub extern "C" fn fl_executor_options_default() -> fl_executor_options {
    let config = ExecutorConfig::default();
    fl_executor_options {
        max_concurrency: config.max_concurrency,
        default_timeout_ms: 0,
        cleanup_grace_ms: duration_ms(config.cleanup_grace),
    }
}

/// The default tool settings (not concurrency-safe, no timeout of its own, no sibling
/// cancellation). Thread-safe.
#[unsafe(no_mangle)]
pub extern "C" fn fl_tool_options_default() -> fl_tool_options {
    fl_tool_options {
        concurrency_safe: false,
        timeout_ms: 0,
        cancels_siblings_on_error: false,
    }
}

fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// How the executor runs a tool's calls: `fl_tool_options`, or the keys of
/// `fl_executor_add_tool_json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ToolSettings {
    concurrency_safe: bool,
    /// `None`: the executor's default timeout.
    timeout: Option<Duration>,
    cancels_siblings_on_error: bool,
    /// The struct has no limit field: its tools take the executor's default.
    limit: ResultLimit,
}

impl From<fl_tool_options> for ToolSettings {
    fn from(options: fl_tool_options) -> Self {
        Self {
            concurrency_safe: options.concurrency_safe,
            timeout: (options.timeout_ms > 0).then(|| Duration::from_millis(options.timeout_ms)),
            cancels_siblings_on_error: options.cancels_siblings_on_error,
            limit: ResultLimit::Default,
        }
    }
}

/// A C callback and its userdata, as a [`Tool`].
struct CTool {
    name: String,
    /// What the model is told the tool does (empty: nothing).
    description: String,
    /// The JSON schema of the input the model is told to give (`None`: any object).
    input_schema: Option<Value>,
    settings: ToolSettings,
    callback: unsafe extern "C" fn(*mut c_void, *const fl_tool_invocation, *mut fl_tool_call),
    /// Decides per input, in place of `settings.concurrency_safe`, when set.
    concurrency_safe: Option<SafetyCallback>,
    userdata: UserData,
}

/// The host's `userdata` pointer.
#[derive(Clone, Copy)]
struct UserData(*mut c_void);

// SAFETY: ferroloop never dereferences `userdata`; it only passes it back to the host's callback,
// which runs on the thread that called `fl_executor_run` or `fl_turn_next_event` (the runtimes
// are single-threaded and only driven there). Making the pointer safe to use there is the host's
// documented responsibility.
unsafe impl Send for UserData {}
// SAFETY: as above: shared references never touch the pointee.
unsafe impl Sync for UserData {}

impl Tool for CTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        self.input_schema
            .clone()
            .unwrap_or_else(|| serde_json::json!({"type": "object"}))
    }

    fn is_concurrency_safe(&self, input: &Value) -> bool {
        let Some(decide) = self.concurrency_safe else {
            return self.settings.concurrency_safe;
        };
        // NUL-terminated for the host's convenience (`strstr`); the length excludes the NUL.
        let mut input_json = input.to_string();
        input_json.push('\0');
        let (pointer, length) = text::view(&input_json);
        // SAFETY: the predicate is the host's, registered with its userdata, called on the
        // thread driving the call (as the tool callback is); the view outlives the call.
        unsafe { decide(self.userdata.0, pointer, length - 1) }
    }

    fn timeout(&self) -> Option<Duration> {
        self.settings.timeout
    }

    fn max_result_chars(&self) -> ResultLimit {
        self.settings.limit
    }

    fn cancels_siblings_on_error(&self) -> bool {
        self.settings.cancels_siblings_on_error
    }

    fn call(&self, input: Value, ctx: ToolContext) -> ToolFuture {
        let (pending, handle) = PendingCall::new(&ctx);
        let input_json = input.to_string();
        let (tool_name, tool_name_len) = text::view(&self.name);
        let (tool_use_id, tool_use_id_len) = text::view(ctx.tool_use_id());
        let (input_json_ptr, input_json_len) = text::view(&input_json);
        let invocation = fl_tool_invocation {
            tool_name,
            tool_name_len,
            tool_use_id,
            tool_use_id_len,
            input_json: input_json_ptr,
            input_json_len,
            index: ctx.index(),
        };
        // SAFETY: the callback is the host's, registered with its userdata; the invocation's
        // views outlive the call; the host takes ownership of `handle`.
        unsafe { (self.callback)(self.userdata.0, &invocation, handle) };
        pending.handed_over();
        Box::pin(async move {
            // The order of the reply and the call's cancellation decides the outcome, not the
            // moment the executor polls this future (the pending call reports it).
            let reply = pending.reply().await;
            let content = match reply.content {
                ReplyContent::Text(text) => ToolResultContent::Text(text),
                ReplyContent::Json(Value::String(text)) => ToolResultContent::Text(text),
                ReplyContent::Json(Value::Array(blocks)) => ToolResultContent::Blocks(blocks),
                ReplyContent::Json(other) => ToolResultContent::Text(other.to_string()),
            };
            Ok(ToolOutput {
                content,
                is_error: reply.is_error,
            })
        })
    }
}

/// Creates an executor with `options` (NULL: the defaults) and stores it in `*out`. The caller
/// owns it and releases it with `fl_executor_free`. The result size limits, the spill directory
/// and the turn budget keep their defaults: `fl_executor_new_json` sets them. Thread-safe.
///
/// # Safety
/// `options` must be NULL or point to an `fl_executor_options`; `out` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_executor_new(
    options: *const fl_executor_options,
    out: *mut *mut fl_executor,
) -> fl_status {
    boundary::run(|| {
        let out = Out::new(out, "out")?;
        // SAFETY: NULL or a valid options struct (the caller's promise).
        let options = unsafe { options.as_ref() }
            .copied()
            .unwrap_or_else(|| fl_executor_options_default());
        let config = ExecutorConfig {
            // The struct's 0 runs one call at a time (a zeroed struct, documented so), where
            // `fl_executor_new_json` and the core's check refuse 0.
            max_concurrency: options.max_concurrency.max(1),
            default_timeout: (options.default_timeout_ms > 0)
                .then(|| Duration::from_millis(options.default_timeout_ms)),
            cleanup_grace: Duration::from_millis(options.cleanup_grace_ms),
            ..ExecutorConfig::default()
        };
        // SAFETY: not NULL (checked) and writable (the caller's promise).
        unsafe { out.write(Box::into_raw(fl_executor::with_config(config)?)) };
        Ok(())
    })
}

/// Creates an executor as `fl_executor_new` does, with its settings given as JSON, which can
/// also set what `fl_executor_options` cannot: the result size limits and where oversized
/// results go. `options_json` (`len` bytes of UTF-8) is a JSON object whose keys are Python's
/// `ToolExecutor` keyword arguments, durations in milliseconds; every key is optional, `null`
/// counts as absent (the default), and empty text is `{}`:
///
/// - `max_concurrency`: at most this many calls of one run or turn at once (default 10; 0 is
///   refused);
/// - `max_result_chars`: the result size limit of tools that set none (default 50000; a
///   larger result is written to a spill file and replaced by a preview, its first 2 KiB cut
///   back to a newline, plus the file's path); `"unlimited"` for no limit (Python's
///   `math.inf`, Node's `Infinity`);
/// - `spill_dir`: the directory of the spill files (default
///   `<system temp dir>/ferroloop-tool-results`; made with mode 0700 when first needed);
/// - `default_timeout_ms`: the timeout of tools that set none (default: none; 0 is refused);
/// - `cleanup_grace_ms`: how long a cancelled or timed-out call may take to complete before
///   its result is produced anyway (default 5000; 0: no wait);
/// - `turn_budget_chars`: the aggregate size of one run's or turn's results (default 200000):
///   over it, the largest results are spilled, largest first; `"unlimited"` disables it
///   (Python's `turn_budget_chars=None`).
///
/// The turn budget and the tools' limits apply to `fl_executor_run`, to streaming turns and to
/// the runs of an agent made with the executor. An unknown key, a value of the wrong type, a
/// zero `max_concurrency` or timeout, or an empty `spill_dir` is `FL_STATUS_INVALID_ARGUMENT`
/// (the message names the key); text that is not UTF-8 is `FL_STATUS_INVALID_UTF8`. Thread-safe.
///
/// # Safety
/// `options_json` must be valid for reads of `len` bytes (it may be NULL when `len` is 0);
/// `out` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_executor_new_json(
    options_json: *const c_char,
    len: usize,
    out: *mut *mut fl_executor,
) -> fl_status {
    boundary::run(|| {
        let out = Out::new(out, "out")?;
        // SAFETY: the caller's promise on `options_json`.
        let json = unsafe { text::str_arg(options_json, len, "options_json") }?;
        let executor = fl_executor::with_config(executor_config_of(json)?)?;
        // SAFETY: not NULL (checked) and writable (the caller's promise).
        unsafe { out.write(Box::into_raw(executor)) };
        Ok(())
    })
}

/// The core configuration for the options object `json` (see `fl_executor_new_json`).
fn executor_config_of(json: &str) -> FfiResult<ExecutorConfig> {
    let mut options = JsonOptions::parse(json, "executor")?;
    let mut config = ExecutorConfig::default();
    // Zero is the core's to refuse (see `fl_executor::with_config`).
    if let Some(calls) = options.count::<usize>("max_concurrency")? {
        config.max_concurrency = calls;
    }
    if let Some(limit) = options.limit("max_result_chars")? {
        // "unlimited": no default limit, as Python's `math.inf` (the largest count).
        config.budget.default_max_result_chars = match limit {
            Limit::Chars(chars) => chars,
            Limit::Unlimited => usize::MAX,
        };
    }
    if let Some(dir) = options.string("spill_dir")? {
        config.budget.spill_dir = PathBuf::from(dir);
    }
    config.default_timeout = options.millis("default_timeout_ms")?;
    if let Some(grace) = options.millis("cleanup_grace_ms")? {
        config.cleanup_grace = grace;
    }
    if let Some(limit) = options.limit("turn_budget_chars")? {
        config.budget.turn_budget_chars = match limit {
            Limit::Chars(chars) => Some(chars),
            Limit::Unlimited => None,
        };
    }
    options.finish()?;
    Ok(config)
}

/// The error of a zero timeout option (refused by the core's checks), named as the host wrote
/// it. A call given no time at all would always time out, and the structs' "0: none" would
/// silently mean the opposite of Python's `timeout=0`.
fn zero_timeout(what: &str, key: &str) -> FfiError {
    FfiError::invalid(format!(
        "{what} option \"{key}\" is 0: a call could not run at all; give a positive number of \
         milliseconds, or leave it out for no timeout"
    ))
}

/// Releases an executor and the results view it handed out. NULL is accepted and ignored. Calls
/// still held by tools stay valid: completing them later is harmless.
///
/// Called while a run of this executor is in progress (for example from one of its own tool
/// callbacks), it does nothing and records the thread's last error: the run still uses the
/// executor. Free it once `fl_executor_run` has returned. Freeing another, idle executor from a
/// tool callback is fine.
///
/// # Safety
/// `executor` must be NULL or an executor from `fl_executor_new`, not freed yet; it must not be
/// used afterwards. Freeing from another thread while a run may start or end is a race the
/// caller must prevent.
///
/// After `fork()`: an executor made before the fork (and its turns) still works in the child,
/// where its C tools run on the calling thread as anywhere (a run or turn that was in progress
/// at the fork stays in progress there: `FL_STATUS_INVALID_STATE`); freed there, it returns at
/// once and leaves the runtime it had in the parent alone (see `fl_client_new`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_executor_free(executor: *mut fl_executor) {
    boundary::run_void(|| {
        if executor.is_null() {
            return;
        }
        // SAFETY: a live executor (the caller's promise); only its atomic flag is read.
        let running = unsafe { &*executor }.running.load(Ordering::Acquire);
        if running {
            // Freeing now would pull the runtime and the tools out from under the run that is
            // driving them (a use after free): refuse, like a parser freed in its own callback.
            boundary::set_last_error(
                "fl_executor_free: a run is in progress on this executor; free it after \
                 fl_executor_run returns",
            );
            return;
        }
        // SAFETY: a pointer from `Box::into_raw` in `fl_executor_new`, freed only once, and no
        // run uses it (checked above).
        unsafe { Box::from_raw(executor) }.release();
    });
}

/// Registers a tool named `name` (UTF-8, `name_len` bytes) whose calls run `callback` with
/// `userdata`; `options` may be NULL (the defaults). Tools must be registered before the first
/// `fl_executor_run`, `fl_turn_new` or `fl_agent_new` (`FL_STATUS_INVALID_STATE` afterwards); a
/// duplicate name is `FL_STATUS_INVALID_ARGUMENT`. ferroloop never dereferences or frees
/// `userdata`. An agent offers the tool to the model with no description and any object as
/// input: give it a definition with `fl_executor_add_tool_with_definition`.
///
/// Thread-safe.
///
/// # Safety
/// `executor` must be a live executor; `name` must be valid for reads of `name_len` bytes;
/// `options` must be NULL or point to an `fl_tool_options`; `callback` and `userdata` must stay
/// usable until the executor, every turn started on it and every run of an agent made with it
/// are freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_executor_add_tool(
    executor: *mut fl_executor,
    name: *const c_char,
    name_len: usize,
    options: *const fl_tool_options,
    callback: fl_tool_fn,
    userdata: *mut c_void,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promises on `executor` and `name`.
        let (executor, name) = unsafe {
            (
                text::handle_ref(executor, "executor")?,
                text::str_arg(name, name_len, "name")?,
            )
        };
        let callback = callback.ok_or_else(|| FfiError::null("callback"))?;
        // SAFETY: NULL or a valid options struct (the caller's promise).
        let options = unsafe { options.as_ref() }.copied();
        let definition = ToolDefinition {
            name: name.to_owned(),
            description: String::new(),
            input_schema: None,
        };
        executor.add(definition, settings_of(options), callback, None, userdata)
    })
}

/// The settings of the `fl_tool_options` struct given (NULL: the defaults).
fn settings_of(options: Option<fl_tool_options>) -> ToolSettings {
    options.unwrap_or_else(|| fl_tool_options_default()).into()
}

/// Registers a tool as `fl_executor_add_tool` does, with the definition the model is given
/// (what an agent sends it; `fl_executor_add_tool`'s tools have no description and take any
/// object): `definition_json` (`len` bytes of UTF-8) is a JSON object in the Anthropic tool
/// definition shape, `{"name": "weather", "description": "The weather in a city.",
/// "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
/// "required": ["city"]}}`. `name` is required; `description` (a string) and `input_schema`
/// (an object; `"type": "object"` is added when left out) are optional. Another key, a value of
/// the wrong type (the message names the key) or an empty or duplicate name is
/// `FL_STATUS_INVALID_ARGUMENT`; otherwise as `fl_executor_add_tool`. The tool takes the
/// executor's result size limit; `fl_executor_add_tool_json` gives it its own.
///
/// Thread-safe.
///
/// # Safety
/// `executor` must be a live executor; `definition_json` must be valid for reads of `len`
/// bytes; `options` must be NULL or point to an `fl_tool_options`; `callback` and `userdata`
/// must stay usable until the executor, every turn started on it and every run of an agent
/// made with it are freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_executor_add_tool_with_definition(
    executor: *mut fl_executor,
    definition_json: *const c_char,
    len: usize,
    options: *const fl_tool_options,
    callback: fl_tool_fn,
    userdata: *mut c_void,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promises on `executor` and `definition_json`.
        let (executor, json) = unsafe {
            (
                text::handle_ref(executor, "executor")?,
                text::str_arg(definition_json, len, "definition_json")?,
            )
        };
        let callback = callback.ok_or_else(|| FfiError::null("callback"))?;
        // SAFETY: NULL or a valid options struct (the caller's promise).
        let options = unsafe { options.as_ref() }.copied();
        let definition = ToolDefinition::parse(json)?;
        executor.add(definition, settings_of(options), callback, None, userdata)
    })
}

/// Registers a tool as `fl_executor_add_tool` does, everything about it given in one JSON
/// object (`tool_json`, `len` bytes of UTF-8) whose keys are Python's `ToolExecutor.tool`
/// keyword arguments, durations in milliseconds, and the definition's keys (as
/// `fl_executor_add_tool_with_definition` reads them):
///
/// - `name` (required): the name the model calls the tool by;
/// - `description`: what the model is told the tool does (default: nothing);
/// - `input_schema`: the JSON schema of the input (an object, default any object; Python's
///   `schema`); the model is told it, and a call whose input does not match it gets an
///   `is_error` result naming the violations without the callback running, as in Python
///   (the keywords checked: `type`, `enum`, `const`, `properties`, `required`,
///   `additionalProperties`, `patternProperties`, `propertyNames`, `dependentRequired`,
///   `dependentSchemas`, `items`, `prefixItems`, `additionalItems`, `contains`, the bounds,
///   `minimum` to `maxProperties`, `pattern` (one the Rust regex engine cannot run, with
///   look-around or back-references, is not checked), `allOf`, `anyOf`, `oneOf`, `not`,
///   `if`/`then`/`else` and `$ref` within the schema (one that resolves to nothing is
///   refused); others, such as `format`, are accepted and not checked);
/// - `concurrency_safe` (default false), `cancels_siblings_on_error` (default false): as in
///   `fl_tool_options`;
/// - `timeout_ms`: how long a call may run (default: the executor's default timeout; 0 is
///   refused);
/// - `max_result_chars`: this tool's result size limit (default: the executor's, see
///   `fl_executor_new_json`; `"unlimited"`: none, only the turn budget applies).
///
/// `null` counts as absent. An unknown key, a value of the wrong type (the message names the
/// key), a zero timeout, an invalid schema or an empty or duplicate name is
/// `FL_STATUS_INVALID_ARGUMENT`; otherwise as `fl_executor_add_tool`.
///
/// Thread-safe.
///
/// # Safety
/// `executor` must be a live executor; `tool_json` must be valid for reads of `len` bytes;
/// `callback` and `userdata` must stay usable until the executor, every turn started on it and
/// every run of an agent made with it are freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_executor_add_tool_json(
    executor: *mut fl_executor,
    tool_json: *const c_char,
    len: usize,
    callback: fl_tool_fn,
    userdata: *mut c_void,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promises on `executor` and `tool_json`.
        let (executor, json) = unsafe {
            (
                text::handle_ref(executor, "executor")?,
                text::str_arg(tool_json, len, "tool_json")?,
            )
        };
        let callback = callback.ok_or_else(|| FfiError::null("callback"))?;
        let (definition, settings) = tool_of(json)?;
        executor.add(definition, settings, callback, None, userdata)
    })
}

/// Registers a tool as `fl_executor_add_tool_json` does, whose calls' concurrency safety
/// `concurrency_safe` decides from each call's input (see `fl_tool_concurrency_safe_fn`), as
/// Python's and Node's `concurrency_safe` may be a predicate: for example a shell tool whose
/// read-only commands may run in parallel while the others run alone. `concurrency_safe` is
/// called with the same `userdata` as `callback`.
///
/// `tool_json` has the keys of `fl_executor_add_tool_json` but `concurrency_safe`, which the
/// predicate replaces: giving it too is `FL_STATUS_INVALID_ARGUMENT` (`null` counts as absent).
/// A NULL `concurrency_safe` or `callback` is `FL_STATUS_NULL_ARGUMENT`; otherwise as
/// `fl_executor_add_tool_json`. The predicate runs once per call whose input passed the
/// tool's `input_schema` (an unknown tool or an invalid input is answered without it), in
/// `fl_executor_run`, in streaming turns and in the runs of an agent made with the executor.
///
/// Thread-safe.
///
/// # Safety
/// `executor` must be a live executor; `tool_json` must be valid for reads of `len` bytes;
/// `callback`, `concurrency_safe` and `userdata` must stay usable until the executor, every turn
/// started on it and every run of an agent made with it are freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_executor_add_tool_json_with_safety(
    executor: *mut fl_executor,
    tool_json: *const c_char,
    len: usize,
    callback: fl_tool_fn,
    concurrency_safe: fl_tool_concurrency_safe_fn,
    userdata: *mut c_void,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promises on `executor` and `tool_json`.
        let (executor, json) = unsafe {
            (
                text::handle_ref(executor, "executor")?,
                text::str_arg(tool_json, len, "tool_json")?,
            )
        };
        let callback = callback.ok_or_else(|| FfiError::null("callback"))?;
        let decide = concurrency_safe.ok_or_else(|| FfiError::null("concurrency_safe"))?;
        let (definition, settings, fixed) = tool_fields_of(json)?;
        if fixed.is_some() {
            return Err(FfiError::invalid(
                "tool option \"concurrency_safe\" is given, and so is the concurrency_safe \
                 predicate that replaces it: leave the option out",
            ));
        }
        executor.add(definition, settings, callback, Some(decide), userdata)
    })
}

/// The definition and settings of the tool object `json` (see `fl_executor_add_tool_json`).
fn tool_of(json: &str) -> FfiResult<(ToolDefinition, ToolSettings)> {
    tool_fields_of(json).map(|(definition, settings, _)| (definition, settings))
}

/// [`tool_of`], and the `concurrency_safe` key as given (`None` when absent or `null`).
fn tool_fields_of(json: &str) -> FfiResult<(ToolDefinition, ToolSettings, Option<bool>)> {
    let mut fields = JsonOptions::parse(json, "tool")?;
    let definition = ToolDefinition::read(&mut fields, "tool")?;
    let concurrency_safe = fields.boolean("concurrency_safe")?;
    let settings = ToolSettings {
        concurrency_safe: concurrency_safe.unwrap_or(false),
        // Zero is the core registry's to refuse (see `fl_executor::add`).
        timeout: fields.millis("timeout_ms")?,
        cancels_siblings_on_error: fields
            .boolean("cancels_siblings_on_error")?
            .unwrap_or(false),
        limit: match fields.limit("max_result_chars")? {
            None => ResultLimit::Default,
            Some(Limit::Chars(chars)) => ResultLimit::Chars(chars),
            Some(Limit::Unlimited) => ResultLimit::Unlimited,
        },
    };
    fields.finish()?;
    Ok((definition, settings, concurrency_safe))
}

/// What the model is told about a tool.
struct ToolDefinition {
    name: String,
    description: String,
    input_schema: Option<Value>,
}

impl ToolDefinition {
    /// Reads a definition object (see `fl_executor_add_tool_with_definition`).
    fn parse(json: &str) -> FfiResult<Self> {
        let mut fields = JsonOptions::parse(json, "tool definition")?;
        let definition = Self::read(&mut fields, "tool definition")?;
        fields.finish()?;
        Ok(definition)
    }

    /// Reads the definition's keys of an object whose other keys are read by the caller
    /// (`what` names the object in messages).
    fn read(fields: &mut JsonOptions, what: &str) -> FfiResult<Self> {
        let name = fields
            .string("name")?
            .ok_or_else(|| FfiError::invalid(format!("{what} option \"name\" is required")))?;
        let description = fields.string("description")?.unwrap_or_default();
        let input_schema = fields.object("input_schema")?.map(Value::Object);
        Ok(Self {
            name,
            description,
            input_schema,
        })
    }
}

impl fl_executor {
    /// Makes an executor with `config` and its own single-threaded runtime. A configuration
    /// the core's check refuses is `FL_STATUS_INVALID_ARGUMENT`, naming the C option.
    fn with_config(config: ExecutorConfig) -> FfiResult<Box<Self>> {
        config.check().map_err(|error| match error {
            ExecutorConfigError::ZeroMaxConcurrency => FfiError::invalid(
                "executor option \"max_concurrency\" is 0: no call could run; give at least 1",
            ),
            ExecutorConfigError::ZeroDefaultTimeout => {
                zero_timeout("executor", "default_timeout_ms")
            }
            ExecutorConfigError::EmptySpillDir => FfiError::invalid(
                "executor option \"spill_dir\" must not be empty (leave it out for the default)",
            ),
            other => FfiError::invalid(format!("invalid executor configuration: {other}")),
        })?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .map_err(|error| FfiError::state(format!("cannot start the runtime: {error}")))?;
        Ok(Box::new(Self {
            runtime: OwnedRuntime::new(runtime),
            config,
            registry: Mutex::new(Some(ToolRegistry::new())),
            executor: OnceLock::new(),
            running: AtomicBool::new(false),
            results: Mutex::new(String::new()),
        }))
    }

    /// Registers a C tool (the shared part of the `fl_executor_add_tool*` functions).
    fn add(
        &self,
        definition: ToolDefinition,
        settings: ToolSettings,
        callback: unsafe extern "C" fn(*mut c_void, *const fl_tool_invocation, *mut fl_tool_call),
        concurrency_safe: Option<SafetyCallback>,
        userdata: *mut c_void,
    ) -> FfiResult {
        let mut registry = self.registry.lock().unwrap_or_else(PoisonError::into_inner);
        let registry = registry.as_mut().ok_or_else(|| {
            FfiError::state("tools must be added before the first run, turn or agent")
        })?;
        registry
            .register(CTool {
                name: definition.name,
                description: definition.description,
                input_schema: definition.input_schema,
                settings,
                callback,
                concurrency_safe,
                userdata: UserData(userdata),
            })
            .map_err(|error| match error {
                RegistryError::ZeroTimeout(_) => zero_timeout("tool", "timeout_ms"),
                other => FfiError::invalid(other.to_string()),
            })?;
        Ok(())
    }
}

/// Runs a batch of tool calls and waits for every result.
///
/// `tool_uses_json` (`len` bytes of UTF-8) is a JSON array of `tool_use` blocks:
/// `[{"type":"tool_use","id":"toolu_1","name":"read","input":{...}}, ...]` (`type` optional;
/// a call without `input` runs its tool with `{}`, as in Python and Node: a model's call to a
/// tool without parameters; a call without a string `id` or `name` is refused).
/// The calls run on the executor's rules (concurrency-safe calls in parallel, others alone, at
/// most `max_concurrency` at once); the tool callbacks run on the calling thread, which this
/// function blocks until every call has its result.
///
/// On return, `*results_json` / `*results_len` view a JSON array with exactly one `tool_result`
/// per call, in request order:
/// `[{"type":"tool_result","tool_use_id":"toolu_1","content":...,"is_error":false}, ...]`. An
/// unknown tool, an invalid input, a timeout or a cancellation yields an `is_error` result. The
/// view is NUL-terminated, owned by the executor, and valid until the next `fl_executor_run` or
/// `fl_executor_free`.
///
/// Result sizes are budgeted: a result over its tool's limit (`max_result_chars`, default
/// 50,000 characters), or the largest results of a run whose results exceed the turn budget
/// (`turn_budget_chars`, default 200,000 characters in total), are written to a spill file in
/// the spill directory (default `<system temp dir>/ferroloop-tool-results/`) and replaced by a
/// preview (its first 2 KiB, newline-aligned) plus the file's path. A result holding a block
/// other than text (an image) is delivered whole by both: only text results are replaced.
/// `fl_executor_new_json` and `fl_executor_add_tool_json` set them.
///
/// `cancel` may be NULL; cancelling it (from any thread) cancels the running calls (their tools
/// see `fl_tool_call_cancelled`) and the queued ones never start. A token stays cancelled: a
/// run given a token cancelled earlier starts no call at all.
///
/// A batch run has no events: the progress its tools report (`fl_tool_call_progress`) is
/// dropped. A streaming turn (`fl_turn_new`) reports it.
///
/// Returns `FL_STATUS_OK`, or `FL_STATUS_CANCELLED` when `cancel` was cancelled (before or
/// during the run); in both cases the results are written, and `FL_STATUS_CANCELLED` records
/// its message for `fl_last_error_message` as every other failing status does. Bad input is
/// `FL_STATUS_INVALID_UTF8` / `FL_STATUS_INVALID_ARGUMENT`.
///
/// Thread-safety: any thread may run an executor, one run at a time per executor (a concurrent
/// run, including one started from a tool callback, returns `FL_STATUS_INVALID_STATE`). A tool
/// callback cannot run any executor on its own thread either, since that thread is driving the
/// outer run (`FL_STATUS_INVALID_STATE`): to run tools inside a tool, hand the call to a worker
/// thread, run the inner executor there and complete the outer call when it returns.
///
/// # Safety
/// `executor` must be a live executor; `tool_uses_json` must be valid for reads of `len` bytes;
/// `cancel` must be NULL or a live token; `results_json` and `results_len` must be valid for
/// writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_executor_run(
    executor: *mut fl_executor,
    tool_uses_json: *const c_char,
    len: usize,
    cancel: *const fl_cancel_token,
    results_json: *mut *const c_char,
    results_len: *mut usize,
) -> fl_status {
    let mut outcome = fl_status::FL_STATUS_OK;
    let status = boundary::run(|| {
        // SAFETY: the caller's promises on `executor`, `tool_uses_json` and `cancel`.
        let (executor, json, cancel) = unsafe {
            (
                text::handle_ref(executor, "executor")?,
                text::str_arg(tool_uses_json, len, "tool_uses_json")?,
                cancel.as_ref(),
            )
        };
        let results_json = Out::new(results_json, "results_json")?;
        let results_len = Out::new(results_len, "results_len")?;
        let tool_uses: Vec<ToolUse> = from_str_lossy(json).map_err(|error| {
            FfiError::invalid(format!(
                "tool_uses_json is not an array of tool_use blocks: {error}"
            ))
        })?;
        if executor.running.swap(true, Ordering::AcqRel) {
            return Err(FfiError::state(
                "a run is already in progress on this executor",
            ));
        }
        let _running = RunningGuard(&executor.running);
        if DRIVING.with(Cell::get) {
            // This thread is driving another executor's run: a tool callback of that executor
            // runs this one. Blocking on a second runtime here would panic inside tokio
            // ("Cannot start a runtime from within a runtime"); refuse with the way out.
            return Err(FfiError::state(
                "fl_executor_run was called on a thread that is driving another run (from a \
                 tool callback of another executor): hand the call to a worker thread, run this \
                 executor there, then complete the call",
            ));
        }
        let cancel = cancel.map(|cancel| (cancel.token.clone(), Arc::clone(&cancel.turns)));
        let (results, status) = {
            let _driving = Driving::enter();
            executor.run(tool_uses, cancel)?
        };
        let mut stored = executor
            .results
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        stored.clear();
        stored.push_str(&results);
        // The view is NUL-terminated for convenience; the length excludes the NUL.
        stored.push('\0');
        // SAFETY: both not NULL (checked) and writable (the caller's promise). The pointer stays
        // valid until the next run replaces the string or the executor is freed.
        unsafe {
            results_json.write(stored.as_ptr().cast());
            results_len.write(stored.len() - 1);
        }
        if status == fl_status::FL_STATUS_CANCELLED {
            // Not an error of this call (the results are written), but a non-OK status: its
            // message replaces the last error, which would otherwise describe an older failure.
            boundary::set_last_error(CANCELLED_RUN);
        }
        outcome = status;
        Ok(())
    });
    if status == fl_status::FL_STATUS_OK {
        outcome
    } else {
        status
    }
}

/// The last error of a run or turn that returns `FL_STATUS_CANCELLED` with its results.
pub(crate) const CANCELLED_RUN: &str = "the run was cancelled: its results are written, one per \
     call (the calls that were cancelled or never started have is_error results)";

thread_local! {
    /// Whether this thread is inside a run (driving its runtime, calling its tools).
    pub(crate) static DRIVING: Cell<bool> = const { Cell::new(false) };
}

/// Marks the thread as driving a run until dropped (also on a panic). The runtimes its tool
/// callbacks release (a client, run, turn or executor freed there) are dropped when it is, once
/// the thread has left the runtime it drives (see [`drop_runtime`]).
pub(crate) struct Driving {
    /// Dropped after `drop` below: the deferred runtimes go once the flag is cleared.
    _released: DropScope,
}

impl Driving {
    pub(crate) fn enter() -> Self {
        DRIVING.with(|driving| driving.set(true));
        Self {
            _released: DropScope::open(),
        }
    }
}

impl Drop for Driving {
    fn drop(&mut self) {
        // `try_with`: nothing to clear during thread teardown.
        let _ = DRIVING.try_with(|driving| driving.set(false));
    }
}

/// Clears the running flag when a run ends, even by a panic.
struct RunningGuard<'a>(&'a AtomicBool);

impl Drop for RunningGuard<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl fl_executor {
    /// Drops the executor, its runtime last. On a thread inside a tokio runtime (a tool callback
    /// of another executor frees this one) a plain drop of the runtime would panic ("Cannot
    /// drop a runtime in a context where blocking is not allowed") and leak the rest; the
    /// runtime's drop is then deferred until the thread has left that runtime (see
    /// [`drop_runtime`]). No run is in progress (the caller checked), so it has no work to wait
    /// for. In a child forked after the executor was made, the runtime is left alone (see
    /// [`OwnedRuntime`]).
    fn release(self: Box<Self>) {
        let Self {
            runtime,
            config,
            registry,
            executor,
            running,
            results,
        } = *self;
        drop((executor, registry, config, running, results));
        drop(runtime);
    }

    /// The executor, built from the registered tools at the first run or turn.
    pub(crate) fn executor(&self) -> &ToolExecutor {
        self.executor.get_or_init(|| {
            let registry = self
                .registry
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
                .unwrap_or_default();
            ToolExecutor::builder(registry)
                .config(self.config.clone())
                .build()
        })
    }

    /// Runs `tool_uses`; returns the results as JSON and the status to report with them.
    fn run(
        &self,
        tool_uses: Vec<ToolUse>,
        cancel: Option<(CancellationToken, Arc<Mutex<LinkedTurns>>)>,
    ) -> FfiResult<(String, fl_status)> {
        let executor = self.executor();
        let turn = executor.turn();
        let handle = turn.handle();
        let _link = cancel
            .as_ref()
            .map(|(token, turns)| TurnLink::new(token, turns, handle.cancellation_token().clone()));
        let cancel = cancel.map(|(token, _)| token);
        for tool_use in tool_uses {
            // The turn is open until `finish` seals it.
            if let Err(closed) = turn.submit(tool_use) {
                return Err(FfiError::state(format!(
                    "the turn refused call '{}'",
                    closed.0.id
                )));
            }
        }
        let cancel_for_turn = cancel.clone();
        let outcome = self.runtime.block_on(async move {
            let watch = async {
                if let Some(token) = cancel_for_turn {
                    token.cancelled().await;
                    handle.cancel();
                }
                // Keep waiting: the turn still produces a result for every call.
                std::future::pending::<()>().await;
            };
            tokio::select! {
                outcome = turn.finish() => outcome,
                () = watch => unreachable_turn(),
            }
        });
        let cancelled = cancel.is_some_and(|token| token.is_cancelled());
        let (results, status) = match outcome {
            Ok(results) if cancelled => (results, fl_status::FL_STATUS_CANCELLED),
            Ok(results) => (results, fl_status::FL_STATUS_OK),
            // C tools cannot fail fatally (a reply is always a result), so this is a bug too.
            Err(error) => {
                return Err(FfiError::new(
                    fl_status::FL_STATUS_PANIC,
                    format!("internal error: {error}"),
                ));
            }
        };
        Ok((results_to_json(&results)?, status))
    }
}

thread_local! {
    /// The runtimes released on this thread inside a tokio context while a [`DropScope`] is
    /// open, dropped when the outermost scope ends; `None` while no scope is open.
    static DEFERRED: RefCell<Option<Vec<tokio::runtime::Runtime>>> = const { RefCell::new(None) };
}

/// Drops a runtime that has no work left to wait for, joining its threads.
///
/// On a thread inside a tokio runtime a plain drop would panic ("Cannot drop a runtime in a
/// context where blocking is not allowed"): a tool callback freeing a client, a run, a turn or
/// an executor, or a task dropped with its runtime releasing the last owner of another one. The
/// drop is then deferred to the end of the [`DropScope`] open on the thread (the call driving
/// the callback, or the `drop_runtime` dropping that runtime), outside the runtime: so the
/// threads of a freed client are joined before the host's call returns, not left to stop on
/// their own after it (a process ending meanwhile found them still running). Without a scope
/// (never on the C API's paths) the runtime is shut down in the background.
pub(crate) fn drop_runtime(runtime: tokio::runtime::Runtime) {
    if tokio::runtime::Handle::try_current().is_err() {
        // What the runtime's tasks release as they are dropped (in its context) goes when the
        // scope does, just after.
        let _scope = DropScope::open();
        drop(runtime);
        return;
    }
    let mut runtime = Some(runtime);
    let _ = DEFERRED.try_with(|deferred| {
        if let Ok(mut deferred) = deferred.try_borrow_mut()
            && let (Some(list), Some(runtime)) = (deferred.as_mut(), runtime.take())
        {
            list.push(runtime);
        }
    });
    if let Some(runtime) = runtime {
        runtime.shutdown_background();
    }
}

/// While open, [`drop_runtime`] defers the runtimes released inside a tokio context on this
/// thread; the outermost scope drops them when it ends (and those their drops release, in
/// turn). Open it outside any runtime: its end must be able to block.
pub(crate) struct DropScope {
    outermost: bool,
}

impl DropScope {
    pub(crate) fn open() -> Self {
        let outermost = DEFERRED
            .try_with(|deferred| match deferred.try_borrow_mut() {
                Ok(mut deferred) if deferred.is_none() => {
                    *deferred = Some(Vec::new());
                    true
                }
                _ => false,
            })
            .unwrap_or(false);
        Self { outermost }
    }
}

impl Drop for DropScope {
    fn drop(&mut self) {
        if !self.outermost {
            return;
        }
        // Closes the scope however the drops below end (a panic in one of them too).
        let _close = CloseScope;
        // One at a time, no borrow held: a drop may defer another runtime.
        while let Some(runtime) = DEFERRED
            .try_with(|deferred| {
                deferred
                    .try_borrow_mut()
                    .ok()
                    .and_then(|mut deferred| deferred.as_mut().and_then(Vec::pop))
            })
            .ok()
            .flatten()
        {
            if tokio::runtime::Handle::try_current().is_ok() {
                runtime.shutdown_background();
            } else {
                drop(runtime);
            }
        }
    }
}

/// Closes the thread's [`DropScope`]: what is still deferred (only after a panic in a drop) is
/// shut down in the background, and later releases are no longer deferred into a list that
/// nobody would drop.
struct CloseScope;

impl Drop for CloseScope {
    fn drop(&mut self) {
        let left = DEFERRED
            .try_with(|deferred| {
                deferred
                    .try_borrow_mut()
                    .ok()
                    .and_then(|mut deferred| deferred.take())
            })
            .ok()
            .flatten();
        for runtime in left.into_iter().flatten() {
            runtime.shutdown_background();
        }
    }
}

/// The watcher never completes; this satisfies the type of its `select!` arm.
fn unreachable_turn() -> Result<Vec<ToolResult>, TurnError> {
    Err(TurnError::Internal(
        "the cancellation watcher ended".to_owned(),
    ))
}

pub(crate) fn results_to_json(results: &[ToolResult]) -> FfiResult<String> {
    serde_json::to_string(results)
        .map_err(|error| FfiError::invalid(format!("cannot serialise the results: {error}")))
}

/// Creates a cancellation token and stores it in `*out`. The caller owns it and releases it with
/// `fl_cancel_token_free`. Thread-safe.
///
/// # Safety
/// `out` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_cancel_token_new(out: *mut *mut fl_cancel_token) -> fl_status {
    boundary::run(|| {
        let out = Out::new(out, "out")?;
        let token = Box::new(fl_cancel_token {
            token: CancellationToken::new(),
            turns: Arc::default(),
        });
        // SAFETY: not NULL (checked) and writable (the caller's promise).
        unsafe { out.write(Box::into_raw(token)) };
        Ok(())
    })
}

/// Cancels the token: the runs and turns it was passed to cancel their calls. By the time it
/// returns, their running calls report `fl_tool_call_cancelled`; a run cancelled from one of its
/// own tool callbacks starts none of its queued calls. Idempotent; callable from any thread, including
/// from a tool callback.
///
/// # Safety
/// `token` must be a live token.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_cancel_token_cancel(token: *const fl_cancel_token) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `token`.
        let token = unsafe { text::handle_ref(token, "token") }?;
        token.token.cancel();
        let linked = token.turns.lock().unwrap_or_else(PoisonError::into_inner);
        for (_, turn) in &linked.turns {
            turn.cancel();
        }
        Ok(())
    })
}

/// Writes into `*cancelled` whether the token was cancelled. Thread-safe.
///
/// # Safety
/// `token` must be a live token; `cancelled` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_cancel_token_is_cancelled(
    token: *const fl_cancel_token,
    cancelled: *mut bool,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `token`.
        let token = unsafe { text::handle_ref(token, "token") }?;
        let cancelled = Out::new(cancelled, "cancelled")?;
        // SAFETY: not NULL (checked) and writable (the caller's promise).
        unsafe { cancelled.write(token.token.is_cancelled()) };
        Ok(())
    })
}

/// Releases a token. NULL is accepted and ignored.
///
/// A run the token was passed to keeps what it needs once it has started, so the token may be
/// freed from one of that run's tool callbacks (the run can then no longer be cancelled through
/// it); freeing it from another thread while `fl_executor_run` may still be starting is a race.
/// A turn keeps what it needs from `fl_turn_new` on: the token may be freed before the turn.
///
/// # Safety
/// `token` must be NULL or a token from `fl_cancel_token_new`, not freed yet; it must not be used
/// afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_cancel_token_free(token: *mut fl_cancel_token) {
    boundary::run_void(|| {
        if !token.is_null() {
            // SAFETY: a pointer from `Box::into_raw` in `fl_cancel_token_new`, freed only once.
            drop(unsafe { Box::from_raw(token) });
        }
    });
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::owned_runtime::slow_stopping_runtime;
    use crate::tool_call::{fl_tool_call_cancelled, fl_tool_call_progress, fl_tool_complete};
    use ferroloop_core::exec::TurnHandle;

    /// One order of a C tool's callback, its reply and the turn's cancellation.
    #[derive(Default)]
    struct Case {
        cancel_in_callback: bool,
        reply_in_callback: bool,
        cancel_first: bool,
        turn: Mutex<Option<TurnHandle>>,
        /// The handle the callback kept for a worker to complete.
        kept: Mutex<Option<usize>>,
    }

    impl Case {
        fn cancel(&self) {
            self.turn.lock().unwrap().as_ref().unwrap().cancel();
        }
    }

    fn complete_ok(handle: *mut fl_tool_call) {
        // SAFETY: completed once, with 2 readable bytes.
        let status = unsafe { fl_tool_complete(handle, "ok".as_ptr().cast(), 2, false) };
        assert_eq!(status, fl_status::FL_STATUS_OK);
    }

    unsafe extern "C" fn callback(
        userdata: *mut c_void,
        _invocation: *const fl_tool_invocation,
        call: *mut fl_tool_call,
    ) {
        // SAFETY: the test's `Case`, alive for the whole run.
        let case = unsafe { &*userdata.cast::<Case>() };
        if case.cancel_in_callback {
            case.cancel();
        }
        if case.reply_in_callback {
            if case.cancel_first {
                case.cancel();
            }
            complete_ok(call);
            if !case.cancel_first {
                case.cancel();
            }
        } else {
            *case.kept.lock().unwrap() = Some(call as usize);
        }
    }

    /// Whether the reply came after a cancellation that landed once the callback returned, for
    /// each order of the callback's end, the cancellation and the reply, as the executor judges
    /// it (the table of the core's hand-off test, through a C tool).
    #[test]
    fn a_reply_is_late_only_after_a_cancellation_that_followed_the_callback() {
        // (cancel before the callback returns, reply before it returns, cancel before the
        // reply): late?
        let cases = [
            // Replied in the callback: its own, whatever the cancellation.
            (false, true, false, false),
            (true, true, true, false),
            (false, true, true, false),
            // Cancelled in the callback (by the tool, or so it counts), replied later.
            (true, false, true, false),
            // Handed over, then cancelled, then replied: the cancellation wins.
            (false, false, true, true),
            // Handed over, replied, then cancelled: the reply stands.
            (false, false, false, false),
        ];
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        for (cancel_in_callback, reply_in_callback, cancel_first, late) in cases {
            let what = format!("{cancel_in_callback} {reply_in_callback} {cancel_first}");
            let case = Box::new(Case {
                cancel_in_callback,
                reply_in_callback,
                cancel_first,
                ..Case::default()
            });
            let mut registry = ToolRegistry::new();
            registry
                .register(CTool {
                    name: "worker".into(),
                    description: String::new(),
                    input_schema: None,
                    settings: fl_tool_options_default().into(),
                    callback,
                    concurrency_safe: None,
                    userdata: UserData(std::ptr::from_ref::<Case>(&case).cast_mut().cast()),
                })
                .unwrap();
            let exec = ToolExecutor::new(registry);
            let results = runtime.block_on(async {
                let turn = exec.turn();
                *case.turn.lock().unwrap() = Some(turn.handle());
                turn.submit(ToolUse::new("a", "worker", serde_json::json!({})))
                    .unwrap();
                turn.seal();
                let spawned = turn.spawn();
                if !reply_in_callback {
                    // The callback returned, keeping the call for a worker.
                    let handle = loop {
                        if let Some(handle) = *case.kept.lock().unwrap() {
                            break handle;
                        }
                        tokio::task::yield_now().await;
                    };
                    if cancel_first {
                        case.cancel();
                    }
                    std::thread::spawn(move || complete_ok(handle as *mut fl_tool_call))
                        .join()
                        .unwrap();
                    case.cancel();
                }
                spawned.finish().await
            });
            let result = &results.unwrap()[0];
            if late {
                assert!(result.is_error, "{what}");
                assert_eq!(
                    result.content,
                    ToolResultContent::Text(
                        "Tool 'worker' was cancelled: the turn was cancelled".into()
                    ),
                    "{what}"
                );
            } else {
                assert!(!result.is_error, "{what}");
                assert_eq!(
                    result.content,
                    ToolResultContent::Text("ok".into()),
                    "{what}"
                );
            }
        }
    }

    /// What the "reporter" tool does: progress in its callback, then from a worker after the
    /// callback returned; with `after_cancel`, the worker waits for the call's cancellation first.
    #[derive(Default)]
    struct Reporter {
        after_cancel: bool,
        worker: Mutex<Option<std::thread::JoinHandle<()>>>,
    }

    fn report(call: *const fl_tool_call, data: &str) {
        // SAFETY: a live handle; `data` readable for its length.
        let status = unsafe { fl_tool_call_progress(call, data.as_ptr().cast(), data.len()) };
        assert_eq!(status, fl_status::FL_STATUS_OK);
    }

    unsafe extern "C" fn reporter_callback(
        userdata: *mut c_void,
        _invocation: *const fl_tool_invocation,
        call: *mut fl_tool_call,
    ) {
        // SAFETY: the test's `Reporter`, alive for the whole run.
        let reporter = unsafe { &*userdata.cast::<Reporter>() };
        report(call, r#"{"step":"callback"}"#);
        let after_cancel = reporter.after_cancel;
        let call = call as usize;
        let worker = std::thread::spawn(move || {
            let call = call as *mut fl_tool_call;
            if after_cancel {
                let mut cancelled = false;
                while !cancelled {
                    // SAFETY: a live handle; a local.
                    let status = unsafe { fl_tool_call_cancelled(call, &mut cancelled) };
                    assert_eq!(status, fl_status::FL_STATUS_OK);
                    std::thread::sleep(Duration::from_millis(1));
                }
            } else {
                std::thread::sleep(Duration::from_millis(20));
            }
            report(call, r#"{"step":"worker","n":[1,2.5,"three"]}"#);
            complete_ok(call);
        });
        *reporter.worker.lock().unwrap() = Some(worker);
    }

    fn reporter_executor(reporter: &Reporter) -> ToolExecutor {
        let mut registry = ToolRegistry::new();
        registry
            .register(CTool {
                name: "reporter".into(),
                description: String::new(),
                input_schema: None,
                settings: fl_tool_options_default().into(),
                callback: reporter_callback,
                concurrency_safe: None,
                userdata: UserData(std::ptr::from_ref(reporter).cast_mut().cast()),
            })
            .unwrap();
        ToolExecutor::new(registry)
    }

    /// The events of a one-call turn of the "reporter" tool (cancelled once it started when
    /// `after_cancel`), as (kind, data) pairs.
    fn reporter_events(after_cancel: bool) -> Vec<(&'static str, Value)> {
        use ferroloop_core::exec::TurnEvent;
        let reporter = Reporter {
            after_cancel,
            ..Reporter::default()
        };
        let exec = reporter_executor(&reporter);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let events = runtime.block_on(async {
            let mut turn = exec.turn();
            turn.submit(ToolUse::new("toolu_r", "reporter", serde_json::json!({})))
                .unwrap();
            turn.seal();
            let mut events = Vec::new();
            while let Some(event) = turn.next_event().await {
                let entry = match event {
                    TurnEvent::Started { index, .. } => {
                        assert_eq!(index, 0);
                        if after_cancel {
                            turn.handle().cancel();
                        }
                        ("started", Value::Null)
                    }
                    TurnEvent::Progress {
                        index,
                        tool_use_id,
                        data,
                    } => {
                        assert_eq!((index, tool_use_id.as_str()), (0, "toolu_r"));
                        ("progress", data)
                    }
                    TurnEvent::Finished { status, .. } => {
                        ("finished", Value::from(status.as_str()))
                    }
                    TurnEvent::Result { result, .. } => ("result", Value::from(result.is_error)),
                    TurnEvent::Detached { .. } => ("detached", Value::Null),
                };
                events.push(entry);
            }
            events
        });
        let worker = reporter.worker.lock().unwrap().take().unwrap();
        worker.join().unwrap();
        events
    }

    /// Progress from the callback and from a worker after the callback returned: each a
    /// `Progress` event of the call with the data as given, in order, before its `Finished`.
    #[test]
    fn progress_of_a_c_tool_becomes_turn_events() {
        let callback = serde_json::json!({"step": "callback"});
        let worker = serde_json::json!({"step": "worker", "n": [1, 2.5, "three"]});
        assert_eq!(
            reporter_events(false),
            vec![
                ("started", Value::Null),
                ("progress", callback.clone()),
                ("progress", worker.clone()),
                ("finished", Value::from("succeeded")),
                ("result", Value::from(false)),
            ]
        );
        // Reported after the call was cancelled, before the tool completed it: still delivered
        // (the call ends when the tool completes it).
        assert_eq!(
            reporter_events(true),
            vec![
                ("started", Value::Null),
                ("progress", callback),
                ("progress", worker),
                ("finished", Value::from("cancelled")),
                ("result", Value::from(true)),
            ]
        );
    }

    /// A batch run has no events: the progress is dropped, the call completes as usual.
    #[test]
    fn progress_in_a_batch_run_is_dropped() {
        let reporter = Reporter::default();
        let exec = reporter_executor(&reporter);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let results = runtime
            .block_on(exec.run(vec![ToolUse::new(
                "toolu_r",
                "reporter",
                serde_json::json!({}),
            )]))
            .unwrap();
        reporter
            .worker
            .lock()
            .unwrap()
            .take()
            .unwrap()
            .join()
            .unwrap();
        assert!(!results[0].is_error);
        assert_eq!(results[0].content, ToolResultContent::Text("ok".into()));
    }

    fn add_defined(executor: *mut fl_executor, json: &str) -> fl_status {
        // SAFETY: a live executor; `json` readable for its length; the callback never runs.
        unsafe {
            fl_executor_add_tool_with_definition(
                executor,
                json.as_ptr().cast(),
                json.len(),
                std::ptr::null(),
                Some(callback),
                std::ptr::null_mut(),
            )
        }
    }

    /// `status` is `FL_STATUS_INVALID_ARGUMENT` and the thread's last error says `expected`.
    fn assert_refused(status: fl_status, case: &str, expected: &str) {
        assert_eq!(status, fl_status::FL_STATUS_INVALID_ARGUMENT, "{case}");
        let error = crate::boundary::last_error_for_tests();
        assert!(error.contains(expected), "{case}: {error}");
    }

    #[test]
    fn a_definition_is_what_the_model_is_told() {
        let mut executor = std::ptr::null_mut();
        // SAFETY: `executor` is a local.
        let status = unsafe { fl_executor_new(std::ptr::null(), &mut executor) };
        assert_eq!(status, fl_status::FL_STATUS_OK);
        let schema = r#"{"type": "object", "properties": {"city": {"type": "string"}}}"#;
        let json = format!(
            r#"{{"name": "weather", "description": "The weather.", "input_schema": {schema}}}"#
        );
        assert_eq!(add_defined(executor, &json), fl_status::FL_STATUS_OK);
        assert_eq!(
            add_defined(executor, r#"{"name": "bare"}"#),
            fl_status::FL_STATUS_OK
        );
        for (json, expected) in [
            (r#"{"name": "weather"}"#, "already registered"),
            (r#"{"description": "x"}"#, "\"name\" is required"),
            (r#"{"name": ""}"#, "must not be empty"),
            (
                r#"{"name": "a", "input_schema": "object"}"#,
                "\"input_schema\" must be a JSON object",
            ),
            (
                r#"{"name": "a", "cache_control": {}}"#,
                "unknown tool definition option \"cache_control\"",
            ),
            ("[]", "must be a JSON object"),
        ] {
            assert_refused(add_defined(executor, json), json, expected);
        }
        // SAFETY: a NULL callback is the case under test.
        let status = unsafe {
            fl_executor_add_tool_with_definition(
                executor,
                r#"{"name": "c"}"#.as_ptr().cast(),
                13,
                std::ptr::null(),
                None,
                std::ptr::null_mut(),
            )
        };
        assert_eq!(status, fl_status::FL_STATUS_NULL_ARGUMENT);
        // SAFETY: a live executor.
        let registry = unsafe { &*executor }.executor().registry();
        let weather = registry.get("weather").unwrap();
        assert_eq!(weather.description(), "The weather.");
        assert_eq!(
            weather.input_schema(),
            serde_json::from_str::<Value>(schema).unwrap()
        );
        let bare = registry.get("bare").unwrap();
        assert_eq!(bare.description(), "");
        assert_eq!(bare.input_schema(), serde_json::json!({"type": "object"}));
        // Frozen once the tools are in use.
        assert_eq!(
            add_defined(executor, r#"{"name": "late"}"#),
            fl_status::FL_STATUS_INVALID_STATE
        );
        // SAFETY: an executor from `fl_executor_new`, freed once.
        unsafe { fl_executor_free(executor) };
    }

    /// The error of `fl_executor_new_json` for `json` (the core's check included).
    fn config_error(json: &str) -> String {
        let error = executor_config_of(json)
            .and_then(fl_executor::with_config)
            .map(drop)
            .expect_err(json);
        assert_eq!(
            error.status,
            fl_status::FL_STATUS_INVALID_ARGUMENT,
            "{json}"
        );
        error.message
    }

    /// The error of `fl_executor_add_tool_json` for `json` (the core registry's rules included).
    fn tool_error(json: &str) -> String {
        let executor = fl_executor::with_config(ExecutorConfig::default()).unwrap();
        let error = tool_of(json)
            .and_then(|(definition, settings)| {
                executor.add(definition, settings, callback, None, std::ptr::null_mut())
            })
            .expect_err(json);
        executor.release();
        assert_eq!(
            error.status,
            fl_status::FL_STATUS_INVALID_ARGUMENT,
            "{json}"
        );
        error.message
    }

    /// Every key of `fl_executor_new_json` reaches the core configuration.
    #[test]
    fn executor_options_reach_the_configuration() {
        let config = executor_config_of(
            r#"{"max_concurrency": 3, "max_result_chars": 1000, "spill_dir": "/tmp/spills",
                "default_timeout_ms": 2500, "cleanup_grace_ms": 0, "turn_budget_chars": 7000}"#,
        )
        .unwrap();
        let mut expected = ExecutorConfig {
            max_concurrency: 3,
            default_timeout: Some(Duration::from_millis(2500)),
            cleanup_grace: Duration::ZERO,
            ..ExecutorConfig::default()
        };
        expected.budget.default_max_result_chars = 1000;
        expected.budget.spill_dir = PathBuf::from("/tmp/spills");
        expected.budget.turn_budget_chars = Some(7000);
        assert_eq!(config, expected);
    }

    /// Nothing, empty text and `null` everywhere are the defaults, Python's: 10 calls at once,
    /// 50,000 characters a result, a 200,000-character turn budget, no timeout, 5 s of grace.
    #[test]
    fn absent_and_null_executor_options_are_the_defaults() {
        let defaults = ExecutorConfig::default();
        assert_eq!(defaults.max_concurrency, 10);
        assert_eq!(defaults.budget.default_max_result_chars, 50_000);
        assert_eq!(defaults.budget.turn_budget_chars, Some(200_000));
        for json in [
            "",
            "{}",
            r#"{"max_concurrency": null, "max_result_chars": null, "spill_dir": null,
                "default_timeout_ms": null, "cleanup_grace_ms": null, "turn_budget_chars": null}"#,
        ] {
            assert_eq!(executor_config_of(json).unwrap(), defaults, "{json}");
        }
    }

    /// `"unlimited"` is Python's `max_result_chars=math.inf` (the largest limit) and
    /// `turn_budget_chars=None` (no budget).
    #[test]
    fn unlimited_executor_limits_are_pythons() {
        let config = executor_config_of(
            r#"{"max_result_chars": "unlimited", "turn_budget_chars": "unlimited"}"#,
        )
        .unwrap();
        assert_eq!(config.budget.default_max_result_chars, usize::MAX);
        assert_eq!(config.budget.turn_budget_chars, None);
        let config =
            executor_config_of(r#"{"max_result_chars": 0, "turn_budget_chars": 0}"#).unwrap();
        assert_eq!(config.budget.default_max_result_chars, 0);
        assert_eq!(config.budget.turn_budget_chars, Some(0));
    }

    #[test]
    fn bad_executor_options_are_refused_naming_the_key() {
        for (json, expected) in [
            (
                r#"{"max_concurrency": "4"}"#,
                "executor option \"max_concurrency\" must be a non-negative integer",
            ),
            (
                r#"{"max_concurrency": 0}"#,
                "executor option \"max_concurrency\" is 0",
            ),
            (
                r#"{"max_result_chars": -1}"#,
                "executor option \"max_result_chars\" must be a non-negative integer of at most",
            ),
            (
                r#"{"max_result_chars": "inf"}"#,
                "or \"unlimited\", not \"inf\"",
            ),
            (
                r#"{"spill_dir": 5}"#,
                "executor option \"spill_dir\" must be a string",
            ),
            (
                r#"{"spill_dir": ""}"#,
                "executor option \"spill_dir\" must not be empty",
            ),
            (
                r#"{"default_timeout_ms": 1.5}"#,
                "executor option \"default_timeout_ms\" must be a non-negative integer",
            ),
            (
                r#"{"default_timeout_ms": 0}"#,
                "executor option \"default_timeout_ms\" is 0",
            ),
            (
                r#"{"cleanup_grace_ms": true}"#,
                "executor option \"cleanup_grace_ms\" must be a non-negative integer",
            ),
            (
                r#"{"turn_budget_chars": false}"#,
                "executor option \"turn_budget_chars\" must be a non-negative integer",
            ),
            (
                r#"{"default_timeout": 5}"#,
                "unknown executor option \"default_timeout\" (known: cleanup_grace_ms, \
                 default_timeout_ms, max_concurrency, max_result_chars, spill_dir, \
                 turn_budget_chars)",
            ),
            ("[]", "executor options must be a JSON object"),
        ] {
            let message = config_error(json);
            assert!(message.contains(expected), "{json}: {message}");
        }
    }

    /// Every key of `fl_executor_add_tool_json` is read; absent and `null` are the defaults of
    /// Python's `tool()` (and of `fl_tool_options_default`).
    #[test]
    fn tool_options_are_read() {
        let (definition, settings) = tool_of(
            r#"{"name": "grep", "description": "Searches.", "input_schema":
                {"type": "object", "required": ["pattern"]}, "concurrency_safe": true,
                "timeout_ms": 1500, "max_result_chars": 300, "cancels_siblings_on_error": true}"#,
        )
        .unwrap();
        assert_eq!(definition.name, "grep");
        assert_eq!(definition.description, "Searches.");
        assert_eq!(
            definition.input_schema,
            Some(serde_json::json!({"type": "object", "required": ["pattern"]}))
        );
        assert_eq!(
            settings,
            ToolSettings {
                concurrency_safe: true,
                timeout: Some(Duration::from_millis(1500)),
                cancels_siblings_on_error: true,
                limit: ResultLimit::Chars(300),
            }
        );
        let defaults = ToolSettings::from(fl_tool_options_default());
        assert_eq!(defaults.limit, ResultLimit::Default);
        for json in [
            r#"{"name": "t"}"#,
            r#"{"name": "t", "description": null, "input_schema": null, "concurrency_safe": null,
                "timeout_ms": null, "max_result_chars": null, "cancels_siblings_on_error": null}"#,
        ] {
            let (definition, settings) = tool_of(json).unwrap();
            assert_eq!(
                (definition.description.as_str(), definition.input_schema),
                ("", None),
                "{json}"
            );
            assert_eq!(settings, defaults, "{json}");
        }
        let (_, settings) = tool_of(r#"{"name": "t", "max_result_chars": "unlimited"}"#).unwrap();
        assert_eq!(settings.limit, ResultLimit::Unlimited);
    }

    #[test]
    fn bad_tool_options_are_refused_naming_the_key() {
        for (json, expected) in [
            (
                r#"{"description": "x"}"#,
                "tool option \"name\" is required",
            ),
            (r#"{"name": 1}"#, "tool option \"name\" must be a string"),
            (
                r#"{"name": "t", "input_schema": "object"}"#,
                "tool option \"input_schema\" must be a JSON object",
            ),
            (
                r#"{"name": "t", "concurrency_safe": 1}"#,
                "tool option \"concurrency_safe\" must be true or false",
            ),
            (
                r#"{"name": "t", "timeout_ms": "1s"}"#,
                "tool option \"timeout_ms\" must be a non-negative integer",
            ),
            (
                r#"{"name": "t", "timeout_ms": 0}"#,
                "tool option \"timeout_ms\" is 0",
            ),
            (
                r#"{"name": "t", "max_result_chars": 1e3}"#,
                "tool option \"max_result_chars\" must be a non-negative integer",
            ),
            (
                r#"{"name": "t", "cancels_siblings_on_error": "yes"}"#,
                "tool option \"cancels_siblings_on_error\" must be true or false",
            ),
            (
                r#"{"name": "t", "schema": {}}"#,
                "unknown tool option \"schema\" (known: cancels_siblings_on_error, \
                 concurrency_safe, description, input_schema, max_result_chars, name, timeout_ms)",
            ),
            ("7", "tool options must be a JSON object"),
        ] {
            let message = tool_error(json);
            assert!(message.contains(expected), "{json}: {message}");
        }
    }

    fn add_json(executor: *mut fl_executor, json: &str) -> fl_status {
        // SAFETY: a live executor; `json` readable for its length; the callback never runs.
        unsafe {
            fl_executor_add_tool_json(
                executor,
                json.as_ptr().cast(),
                json.len(),
                Some(callback),
                std::ptr::null_mut(),
            )
        }
    }

    /// Through the C entry points: the executor's settings and each tool's limit reach the
    /// core executor, which is what applies them (`fl_tool_options` tools keep the default).
    #[test]
    fn json_settings_reach_the_core_executor() {
        let json = r#"{"max_result_chars": 120, "turn_budget_chars": "unlimited"}"#;
        let mut executor = std::ptr::null_mut();
        // SAFETY: `json` readable for its length; `executor` is a local.
        let status =
            unsafe { fl_executor_new_json(json.as_ptr().cast(), json.len(), &mut executor) };
        assert_eq!(status, fl_status::FL_STATUS_OK);
        let tool = r#"{"name": "big", "max_result_chars": 30, "input_schema": {"type": "object"}}"#;
        assert_eq!(add_json(executor, tool), fl_status::FL_STATUS_OK);
        assert_eq!(
            add_json(
                executor,
                r#"{"name": "free", "max_result_chars": "unlimited"}"#
            ),
            fl_status::FL_STATUS_OK
        );
        assert_eq!(
            add_defined(executor, r#"{"name": "plain"}"#),
            fl_status::FL_STATUS_OK
        );
        for (json, expected) in [
            (r#"{"name": "big"}"#, "already registered"),
            (r#"{"name": ""}"#, "must not be empty"),
            (
                r#"{"name": "s", "input_schema": {"type": "strnig"}}"#,
                "schema",
            ),
            (r#"{"name": "z", "timeout_ms": 0}"#, "\"timeout_ms\" is 0"),
        ] {
            assert_refused(add_json(executor, json), json, expected);
        }
        // SAFETY: a NULL callback is the case under test.
        let status = unsafe {
            fl_executor_add_tool_json(
                executor,
                r#"{"name": "c"}"#.as_ptr().cast(),
                13,
                None,
                std::ptr::null_mut(),
            )
        };
        assert_eq!(status, fl_status::FL_STATUS_NULL_ARGUMENT);
        // SAFETY: a live executor.
        let core = unsafe { &*executor }.executor();
        assert_eq!(core.config().budget.default_max_result_chars, 120);
        assert_eq!(core.config().budget.turn_budget_chars, None);
        let registry = core.registry();
        assert_eq!(
            registry.get("big").unwrap().max_result_chars(),
            ResultLimit::Chars(30)
        );
        assert_eq!(
            registry.get("free").unwrap().max_result_chars(),
            ResultLimit::Unlimited
        );
        assert_eq!(
            registry.get("plain").unwrap().max_result_chars(),
            ResultLimit::Default
        );
        // SAFETY: an executor from `fl_executor_new_json`, freed once.
        unsafe { fl_executor_free(executor) };
    }

    #[test]
    fn the_options_structs_zero_concurrency_runs_one_call_at_a_time() {
        // A zeroed `fl_executor_options` is documented to mean 1 (where the JSON's 0 and the
        // core's check refuse 0): the struct keeps it.
        let options = fl_executor_options {
            max_concurrency: 0,
            ..fl_executor_options_default()
        };
        let mut executor = std::ptr::null_mut();
        // SAFETY: `options` and `executor` are locals.
        let status = unsafe { fl_executor_new(&options, &mut executor) };
        assert_eq!(status, fl_status::FL_STATUS_OK);
        // SAFETY: a live executor.
        assert_eq!(unsafe { &*executor }.config.max_concurrency, 1);
        // SAFETY: an executor from `fl_executor_new`, freed once.
        unsafe { fl_executor_free(executor) };
    }

    #[test]
    fn fl_executor_new_json_checks_its_arguments() {
        let mut executor = std::ptr::null_mut();
        // SAFETY: NULL text of length 0 is no options; `executor` is a local.
        let status = unsafe { fl_executor_new_json(std::ptr::null(), 0, &mut executor) };
        assert_eq!(status, fl_status::FL_STATUS_OK);
        // SAFETY: a live executor.
        assert_eq!(unsafe { &*executor }.config, ExecutorConfig::default());
        // SAFETY: an executor from `fl_executor_new_json`, freed once.
        unsafe { fl_executor_free(executor) };
        let mut executor = std::ptr::null_mut();
        // SAFETY: two readable bytes; `executor` is a local.
        let status = unsafe { fl_executor_new_json(b"\xff{".as_ptr().cast(), 2, &mut executor) };
        assert_eq!(status, fl_status::FL_STATUS_INVALID_UTF8);
        assert!(executor.is_null());
        let json = r#"{"max_concurrency": 0}"#;
        // SAFETY: `json` readable for its length; `executor` is a local.
        let status =
            unsafe { fl_executor_new_json(json.as_ptr().cast(), json.len(), &mut executor) };
        assert_eq!(status, fl_status::FL_STATUS_INVALID_ARGUMENT);
        assert!(executor.is_null());
        // SAFETY: a NULL `out` is the case under test.
        let status =
            unsafe { fl_executor_new_json(json.as_ptr().cast(), json.len(), std::ptr::null_mut()) };
        assert_eq!(status, fl_status::FL_STATUS_NULL_ARGUMENT);
    }

    /// A runtime released by a tool callback (inside the runtime the callback's thread drives:
    /// a client, run, turn or executor freed there) is dropped, its threads joined, once the
    /// driving call is over; it was shut down in the background, its thread left running.
    #[test]
    fn a_runtime_released_while_driving_is_joined_when_the_drive_ends() {
        let stopped = Arc::new(AtomicBool::new(false));
        let released = slow_stopping_runtime(&stopped);
        let driver = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        {
            let _driving = Driving::enter();
            driver.block_on(async { drop_runtime(released) });
        }
        assert!(
            stopped.load(Ordering::SeqCst),
            "the released runtime's thread was still running"
        );
    }

    /// Holds a runtime and releases it with `drop_runtime` when dropped (as a client's shared
    /// part does).
    struct Owner(Option<tokio::runtime::Runtime>);

    impl Drop for Owner {
        fn drop(&mut self) {
            if let Some(runtime) = self.0.take() {
                drop_runtime(runtime);
            }
        }
    }

    /// A runtime whose task holds the last owner of another runtime (a run's loop holding its
    /// client): dropping the first drops the task in its context, which releases the second;
    /// both threads are joined by the time the first `drop_runtime` returns, also when that one
    /// was deferred by a tool callback.
    #[test]
    fn a_runtime_released_by_a_task_of_a_dropped_runtime_is_joined_too() {
        for in_callback in [false, true] {
            let stopped = Arc::new(AtomicBool::new(false));
            let inner = Owner(Some(slow_stopping_runtime(&stopped)));
            let outer = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            outer.spawn(async move {
                let _inner = inner;
                std::future::pending::<()>().await;
            });
            if in_callback {
                let driver = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                let _driving = Driving::enter();
                driver.block_on(async { drop_runtime(outer) });
            } else {
                drop_runtime(outer);
            }
            assert!(
                stopped.load(Ordering::SeqCst),
                "in a callback: {in_callback}"
            );
        }
    }

    /// What the "gate" tool records through its callback and its predicate.
    #[derive(Default)]
    struct Gate {
        /// The calls started and not completed yet (handles as addresses).
        held: Mutex<Vec<usize>>,
        /// For each call started, in order, how many calls were held when it started.
        held_at_start: Mutex<Vec<usize>>,
        /// Each input the predicate was asked about, and whether its view ended with a NUL.
        decided: Mutex<Vec<(String, bool)>>,
    }

    /// Holds its call (the test completes it when the turn can make no more progress).
    unsafe extern "C" fn gate_callback(
        userdata: *mut c_void,
        _invocation: *const fl_tool_invocation,
        call: *mut fl_tool_call,
    ) {
        // SAFETY: the test's `Gate`, alive for the whole turn.
        let gate = unsafe { &*userdata.cast::<Gate>() };
        let mut held = gate.held.lock().unwrap_or_else(PoisonError::into_inner);
        gate.held_at_start
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(held.len());
        held.push(call as usize);
    }

    /// Safe for `{"mode":"read"}`, not for anything else.
    unsafe extern "C" fn gate_safe(
        userdata: *mut c_void,
        input_json: *const c_char,
        input_json_len: usize,
    ) -> bool {
        // SAFETY: the test's `Gate`; the view holds `input_json_len` bytes and a NUL.
        let (gate, bytes) = unsafe {
            (
                &*userdata.cast::<Gate>(),
                std::slice::from_raw_parts(input_json.cast::<u8>(), input_json_len + 1),
            )
        };
        let input = String::from_utf8_lossy(&bytes[..input_json_len]).into_owned();
        let safe = input == r#"{"mode":"read"}"#;
        gate.decided
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((input, bytes[input_json_len] == 0));
        safe
    }

    fn add_gate(executor: *mut fl_executor, json: &str, gate: &Gate) -> fl_status {
        // SAFETY: a live executor; `json` readable for its length; `gate` outlives the
        // executor and its turns.
        unsafe {
            fl_executor_add_tool_json_with_safety(
                executor,
                json.as_ptr().cast(),
                json.len(),
                Some(gate_callback),
                Some(gate_safe),
                std::ptr::from_ref(gate).cast_mut().cast(),
            )
        }
    }

    /// Runs two calls of the "gate" tool with `input` in a streaming turn, completing the calls
    /// the tool holds only when the turn can make no more progress without them; returns how
    /// many calls were held when each started (`[0, 1]`: they overlapped; `[0, 0]`: the second
    /// waited for the first), and what the predicate saw.
    fn gate_turn(input: &str) -> (Vec<usize>, Vec<(String, bool)>) {
        use crate::turn::{
            fl_turn_event, fl_turn_event_kind, fl_turn_free, fl_turn_new, fl_turn_next_event,
            fl_turn_seal, fl_turn_submit,
        };
        let gate = Gate::default();
        let mut executor = std::ptr::null_mut();
        // SAFETY: `executor` is a local.
        let status = unsafe { fl_executor_new(std::ptr::null(), &mut executor) };
        assert_eq!(status, fl_status::FL_STATUS_OK);
        assert_eq!(
            add_gate(executor, r#"{"name": "gate"}"#, &gate),
            fl_status::FL_STATUS_OK
        );
        let mut turn = std::ptr::null_mut();
        // SAFETY: a live executor; `turn` is a local.
        let status = unsafe { fl_turn_new(executor, std::ptr::null(), &mut turn) };
        assert_eq!(status, fl_status::FL_STATUS_OK);
        for id in ["toolu_a", "toolu_b"] {
            let call = format!(r#"{{"id": "{id}", "name": "gate", "input": {input}}}"#);
            // SAFETY: a live turn; `call` readable for its length.
            let status = unsafe { fl_turn_submit(turn, call.as_ptr().cast(), call.len()) };
            assert_eq!(status, fl_status::FL_STATUS_OK);
        }
        // SAFETY: a live turn.
        assert_eq!(unsafe { fl_turn_seal(turn) }, fl_status::FL_STATUS_OK);
        loop {
            let holding = !gate.held.lock().unwrap().is_empty();
            // SAFETY: all-zero is a valid `fl_turn_event` (NULL views, kind and status 0).
            let mut event: fl_turn_event = unsafe { std::mem::zeroed() };
            // Without a held call, wait (60 s: a hang guard); with one, only take what the turn
            // can do at once: nothing left means no other call can start beside the held ones.
            let timeout = if holding { 0 } else { 60_000 };
            // SAFETY: a live turn; a local.
            let status = unsafe { fl_turn_next_event(turn, timeout, &mut event) };
            assert_eq!(status, fl_status::FL_STATUS_OK);
            match event.kind {
                fl_turn_event_kind::FL_TURN_EVENT_END => break,
                fl_turn_event_kind::FL_TURN_EVENT_NONE => {
                    assert!(holding, "hang guard: the turn made no progress");
                    let held = std::mem::take(&mut *gate.held.lock().unwrap());
                    for call in held {
                        complete_ok(call as *mut fl_tool_call);
                    }
                }
                _ => {}
            }
        }
        // SAFETY: handles from their constructors, freed once, the turn first.
        unsafe {
            fl_turn_free(turn);
            fl_executor_free(executor);
        }
        let held_at_start = gate.held_at_start.lock().unwrap().clone();
        let decided = gate.decided.lock().unwrap().clone();
        (held_at_start, decided)
    }

    /// A C tool's predicate decides per input: two calls of the tool overlap for an input it
    /// calls safe, and run one after the other for another; it sees each input once, as JSON
    /// ending with a NUL.
    #[test]
    fn a_tools_predicate_decides_its_concurrency_per_input() {
        let read = r#"{"mode":"read"}"#;
        let write = r#"{"mode":"write"}"#;
        let (held, decided) = gate_turn(read);
        assert_eq!(held, [0, 1], "{decided:?}");
        assert_eq!(decided, [(read.to_owned(), true), (read.to_owned(), true)]);
        let (held, decided) = gate_turn(write);
        assert_eq!(held, [0, 0], "{decided:?}");
        assert_eq!(
            decided,
            [(write.to_owned(), true), (write.to_owned(), true)]
        );
    }

    /// The predicate replaces the `concurrency_safe` key: both is refused (`null` is absent),
    /// and so is a NULL predicate or callback.
    #[test]
    fn a_predicate_and_the_concurrency_safe_key_are_exclusive() {
        let gate = Gate::default();
        let mut executor = std::ptr::null_mut();
        // SAFETY: `executor` is a local.
        let status = unsafe { fl_executor_new(std::ptr::null(), &mut executor) };
        assert_eq!(status, fl_status::FL_STATUS_OK);
        for json in [
            r#"{"name": "a", "concurrency_safe": true}"#,
            r#"{"name": "a", "concurrency_safe": false}"#,
        ] {
            assert_refused(
                add_gate(executor, json, &gate),
                json,
                "\"concurrency_safe\" is given",
            );
        }
        let json = r#"{"name": "a", "concurrency_safe": null, "timeout_ms": 5}"#;
        assert_eq!(add_gate(executor, json, &gate), fl_status::FL_STATUS_OK);
        let json = r#"{"name": "b"}"#;
        // SAFETY: a live executor; `json` readable; NULL functions are the cases under test.
        let (no_predicate, no_callback) = unsafe {
            (
                fl_executor_add_tool_json_with_safety(
                    executor,
                    json.as_ptr().cast(),
                    json.len(),
                    Some(gate_callback),
                    None,
                    std::ptr::null_mut(),
                ),
                fl_executor_add_tool_json_with_safety(
                    executor,
                    json.as_ptr().cast(),
                    json.len(),
                    None,
                    Some(gate_safe),
                    std::ptr::null_mut(),
                ),
            )
        };
        assert_eq!(no_predicate, fl_status::FL_STATUS_NULL_ARGUMENT);
        assert_eq!(no_callback, fl_status::FL_STATUS_NULL_ARGUMENT);
        // SAFETY: an executor from `fl_executor_new`, freed once.
        unsafe { fl_executor_free(executor) };
        assert!(gate.decided.lock().unwrap().is_empty());
    }
}
