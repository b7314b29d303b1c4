//! `ToolExecutor` for JavaScript: the core executor (`ferroloop::exec`) with tools implemented
//! as JS functions (see [`crate::js_tools`]).
//!
//! Turns are polled on the JavaScript thread: `pollJson` drives the turn until it would block and
//! returns what happened (events, tool calls to start, calls to abort). When the turn can make
//! progress again (a tool replied, a timer fired, a call was submitted) its waker calls the JS
//! `wake` function through an unref'd thread-safe function, which polls again. A turn of
//! ten thousand quick calls therefore costs a handful of polls, not a thread hop per call.
//!
//! A `ToolExecutor`'s turns run their calls as the core's *external* calls
//! (`Turn::enable_external_calls`): JavaScript submits tool uses as a typed array of tool indexes
//! and flags plus the joined ids, starts the calls a poll lists by their index in the turn (it
//! holds the `tool_use` blocks), and settles them in batches by index (`settle`); a finished
//! turn sends back only result flags and the contents JavaScript does not already hold. In a
//! finishing turn (`run()`) a plain-text answer does not cross at all: JavaScript keeps it and
//! sends its length (`Turn::complete_external_held`), and sends the text only when the turn
//! needs it (a length past the tool's limit, or a turn budget that may be exceeded). A turn
//! releases its wake function when done (it holds the JS turn, which holds this one). Calls
//! that need a future (a tool with a timeout) go through `JsTool::call` and the call-id
//! queues of [`crate::js_tools`]. Events cross as JSON text (V8's `JSON.parse` is faster than
//! building objects property by property through N-API); the wrappers in `lib/exec.js` present
//! everything with the providers' wire names.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use ferroloop::exec::{
    ExecutorConfig, ExecutorConfigError, RegistryError, ResultLimit, TextNeeded, Tool, ToolContext,
    ToolFuture, ToolOutput, ToolRegistry, ToolResult, ToolResultContent, ToolUse, Turn, TurnError,
    TurnEvent, TurnHandle,
};
use napi::JsString;
use napi::Status;
use napi::bindgen_prelude::{Uint8Array, Uint32Array};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use serde_json::{Value, json};

use crate::error::{FerroloopError, JsNumber, invalid_json};
use crate::guard;
use crate::joined::Parts;
use crate::js_tools::{JsToolQueues, ReplyContent, progress_datum, read_json, unreadable_result};

/// Executor-wide options.
#[napi(object)]
#[derive(Debug, Default, Clone)]
pub struct ExecutorOptions {
    /// At most this many calls run at once (default 10).
    pub max_concurrency: Option<f64>,
    /// Timeout for tools that declare none, in milliseconds (default: none).
    pub default_timeout_ms: Option<f64>,
    /// How long a cancelled or timed-out tool may take to stop, in milliseconds (default 5000).
    pub cleanup_grace_ms: Option<f64>,
    /// Result limit in characters for tools that declare none (default 50,000, the core's).
    pub default_max_result_chars: Option<f64>,
    /// Aggregate limit of one turn's results in characters (default 200,000, the core's);
    /// `Infinity` disables it.
    pub turn_budget_chars: Option<f64>,
    /// Directory for the spill files of oversized results (default: `ferroloop-tool-results` in
    /// the OS temp dir).
    pub spill_dir: Option<String>,
}

/// A whole number from `min` to `u32::MAX`.
///
/// These options were `u32` fields, which napi converts the way JavaScript's `ToUint32` does:
/// `-1` became 4,294,967,295 (`maxRetries: -1` retried practically forever, `maxTurns: -1` let
/// an agent run without limit), `1.5` became 1 and `2 ** 32` became 0. They cross as numbers and
/// are checked here instead.
pub(crate) fn small_count(value: f64, min: u32, what: &str) -> Result<u32, FerroloopError> {
    if value.fract() == 0.0 && value >= f64::from(min) && value <= f64::from(u32::MAX) {
        Ok(value as u32)
    } else {
        Err(FerroloopError::invalid_argument(format!(
            "{what} must be a whole number from {min} to {}, got {}",
            u32::MAX,
            JsNumber(value)
        )))
    }
}

/// A count (tokens, characters, bytes): a whole number from 0 to below 2^64 (the core's `u64`
/// or `usize`). A larger one is refused rather than clamped by the cast to the type's maximum
/// (another number than the one asked for, where Python refuses an `int` that does not fit).
pub(crate) fn whole(value: f64, what: &str) -> Result<u64, FerroloopError> {
    // 2^64 is exactly representable; every f64 below it converts exactly.
    const LIMIT: f64 = 18_446_744_073_709_551_616.0;
    if value.is_finite() && value >= 0.0 && value.fract() == 0.0 && value < LIMIT {
        Ok(value as u64)
    } else {
        Err(FerroloopError::invalid_argument(format!(
            "{what} must be a non-negative integer below 2^64, got {}",
            JsNumber(value)
        )))
    }
}

/// [`whole`] as a `usize` (the same range on the 64-bit targets the addon is built for).
pub(crate) fn whole_usize(value: f64, what: &str) -> Result<usize, FerroloopError> {
    let n = whole(value, what)?;
    usize::try_from(n).map_err(|_| {
        FerroloopError::invalid_argument(format!("{what} is too large for this platform: {n}"))
    })
}

/// A count where more than there is means all of them: a non-negative integer of any size, or
/// `Infinity`, saturating at `usize::MAX` (Python's `truncate(2**100)` and `covered=2**100`
/// take the same).
pub(crate) fn saturating_count(value: f64, what: &str) -> Result<usize, FerroloopError> {
    if value == f64::INFINITY || (value >= 0.0 && value.fract() == 0.0) {
        // `as` saturates: 2^64 and above (and Infinity) become usize::MAX.
        Ok(value as usize)
    } else {
        Err(FerroloopError::invalid_argument(format!(
            "{what} must be a non-negative integer (more than there are counts as all), got {}",
            JsNumber(value)
        )))
    }
}

/// A non-negative integer count below 2^64, or `None` for `Infinity`.
pub(crate) fn count_or_infinity(value: f64, what: &str) -> Result<Option<usize>, FerroloopError> {
    if value == f64::INFINITY {
        Ok(None)
    } else {
        whole_usize(value, what).map(Some).map_err(|_| {
            FerroloopError::invalid_argument(format!(
                "{what} must be a non-negative integer below 2^64 or Infinity, got {}",
                JsNumber(value)
            ))
        })
    }
}

/// One tool's declaration (its implementation lives in JavaScript).
#[napi(object)]
#[derive(Debug, Default, Clone)]
pub struct ToolSpec {
    /// The tool's name, as the model calls it.
    pub name: String,
    /// What the tool does, told to the model in its definition (default: none).
    pub description: Option<String>,
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
    /// Concurrency safety is decided per input by JavaScript at submission time (each
    /// submission carries the decision); `concurrencySafe` is then ignored.
    pub safety_per_input: Option<bool>,
}

/// A non-negative, finite number of milliseconds that a `Duration` can hold.
///
/// `try_from_secs_f64`, not `from_secs_f64`: a finite but huge value (`Number.MAX_VALUE`,
/// `1e300`) made the latter panic, an `internal` error for what is bad input.
pub(crate) fn millis(value: f64, what: &str) -> Result<Duration, FerroloopError> {
    let invalid = || {
        FerroloopError::invalid_argument(format!(
            "{what} must be a non-negative number of milliseconds (at most {}), got {}",
            JsNumber(Duration::MAX.as_secs_f64() * 1000.0),
            JsNumber(value)
        ))
    };
    if !(value.is_finite() && value >= 0.0) {
        return Err(invalid());
    }
    Duration::try_from_secs_f64(value / 1000.0).map_err(|_| invalid())
}

/// [`millis`] above 0, for a client timeout: a zero one would fail or race every request, where
/// a Node user's 0 usually means "none" (the core's client refuses it too, without the JS name).
pub(crate) fn timeout_millis(value: f64, what: &str) -> Result<Duration, FerroloopError> {
    let timeout = millis(value, what)?;
    if timeout.is_zero() {
        // A positive value under a nanosecond rounds to 0: "above 0" alone would contradict
        // the value shown.
        let rounded = if value > 0.0 {
            ", which is under a nanosecond"
        } else {
            ""
        };
        return Err(FerroloopError::invalid_argument(format!(
            "{what} must be above 0 milliseconds, got {}{rounded}: nothing could finish \
             within it (leave it unset for the default; a very long timeout is none)",
            JsNumber(value)
        )));
    }
    Ok(timeout)
}

/// [`millis`] of at least 1 millisecond, for a tool timeout (`timeoutMs`, `defaultTimeoutMs`).
/// A zero one timed every call out at once, where a Node user's 0 usually means "none"; one
/// under 1 ms cannot be met either (a call crossing to JavaScript and back takes longer), and C's
/// options count whole milliseconds: such a timeout was taken and timed every call out, or
/// (under 1 ns) refused as "above 0 milliseconds" while it was. The core
/// refuses a zero timeout too, without the JS name ([`executor_config`], [`register_js_tool`]
/// name it the same way).
pub(crate) fn tool_timeout_millis(value: f64, what: &str) -> Result<Duration, FerroloopError> {
    // NaN and the infinities are `millis`'s to refuse (not a number of milliseconds at all).
    if value.is_finite() && value < 1.0 {
        return Err(short_timeout(value, what));
    }
    millis(value, what)
}

/// The error of a tool timeout under 1 millisecond (0 included), as the user gave it.
fn short_timeout(value: f64, what: &str) -> FerroloopError {
    FerroloopError::invalid_argument(format!(
        "{what} must be at least 1 millisecond, got {}: nothing could finish within it \
         (leave it unset for the default; a very long timeout is none)",
        JsNumber(value)
    ))
}

/// The core configuration for `options`.
pub(crate) fn executor_config(options: ExecutorOptions) -> Result<ExecutorConfig, FerroloopError> {
    let mut config = ExecutorConfig::default();
    if let Some(n) = options.max_concurrency {
        // At least 1 here, so that every refusal names the same range (the core refuses 0 too).
        config.max_concurrency = small_count(n, 1, "maxConcurrency")? as usize;
    }
    if let Some(ms) = options.default_timeout_ms {
        config.default_timeout = Some(tool_timeout_millis(ms, "defaultTimeoutMs")?);
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
    if let Some(dir) = &options.spill_dir {
        // Empty is the core's to refuse (below).
        config.budget.spill_dir = dir.into();
    }
    config.check().map_err(|err| match err {
        // Not reached (`small_count` refuses 0 above): the same message, should that change.
        ExecutorConfigError::ZeroMaxConcurrency => FerroloopError::invalid_argument(format!(
            "maxConcurrency must be a whole number from 1 to {}, got 0",
            u32::MAX
        )),
        ExecutorConfigError::ZeroDefaultTimeout => short_timeout(
            options.default_timeout_ms.unwrap_or_default(),
            "defaultTimeoutMs",
        ),
        ExecutorConfigError::EmptySpillDir => FerroloopError::invalid_argument(
            "spillDir must not be empty (leave it unset for the default)",
        ),
        other => {
            FerroloopError::invalid_argument(format!("invalid executor configuration: {other}"))
        }
    })?;
    Ok(config)
}

/// A tool whose `call` runs a JavaScript function.
pub(crate) struct JsTool {
    name: String,
    /// Empty when the declaration gave none (the definition then leaves the field out).
    description: String,
    schema: Value,
    safe: bool,
    /// The safety of each call was decided in JavaScript (see [`JsToolQueues::decision`]).
    safety_per_input: bool,
    timeout: Option<Duration>,
    limit: ResultLimit,
    cancels_siblings: bool,
    queues: Arc<JsToolQueues>,
}

impl JsTool {
    /// The tool `spec` declares.
    pub(crate) fn from_spec(
        spec: ToolSpec,
        queues: Arc<JsToolQueues>,
    ) -> Result<Self, FerroloopError> {
        let schema = match &spec.schema_json {
            None => json!({"type": "object"}),
            Some(text) => read_json(text)
                .map_err(|err| invalid_json(&format!("tool {}: schema", spec.name), &err))?,
        };
        let timeout = spec
            .timeout_ms
            .map(|ms| tool_timeout_millis(ms, "timeoutMs"))
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
            description: spec.description.unwrap_or_default(),
            schema,
            safe: spec.concurrency_safe.unwrap_or(false),
            safety_per_input: spec.safety_per_input.unwrap_or(false),
            timeout,
            limit,
            cancels_siblings: spec.cancels_siblings_on_error.unwrap_or(false),
            queues,
        })
    }
}

/// Registers the tool `spec` declares (the executor's default timeout applies to its calls
/// when it has none of its own). A declaration the core's registry refuses is an
/// `InvalidArgumentError`; a zero timeout is named as the user gave it (`timeoutMs`).
pub(crate) fn register_js_tool(
    registry: &mut ToolRegistry,
    spec: ToolSpec,
    queues: Arc<JsToolQueues>,
) -> Result<(), FerroloopError> {
    let timeout_ms = spec.timeout_ms;
    let tool = JsTool::from_spec(spec, queues)?;
    registry.register(tool).map_err(|err| match err {
        RegistryError::ZeroTimeout(_) => short_timeout(timeout_ms.unwrap_or_default(), "timeoutMs"),
        other => FerroloopError::invalid_argument(other.to_string()),
    })?;
    Ok(())
}

impl Tool for JsTool {
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
        if self.safety_per_input {
            self.queues.decision(&self.name, input)
        } else {
            self.safe
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

    fn is_externally_completed(&self) -> bool {
        // Only turns whose host starts and answers calls itself enable this: a `ToolExecutor`'s
        // (see `NativeTurn::settle`); an agent's turns call `call`.
        true
    }

    fn call(&self, input: Value, ctx: ToolContext) -> ToolFuture {
        let call = self.queues.call(&self.name, input, ctx);
        Box::pin(async move {
            let reply = call.await;
            let content = match reply.content {
                ReplyContent::Text(text) => text.into(),
                ReplyContent::Blocks(blocks) => ToolOutput::blocks(blocks).content,
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
    /// Released when the turn is done: the function holds the JS turn, which holds this
    /// native turn, a cycle the garbage collector cannot see through (every turn leaked).
    wake: Mutex<Option<WakeFn>>,
}

impl JsWaker {
    fn new(wake: WakeFn) -> Self {
        Self {
            scheduled: AtomicBool::new(false),
            wake: Mutex::new(Some(wake)),
        }
    }

    /// Releases the JS function (the turn is done: nothing will wake it any more).
    fn release(&self) {
        let wake = self
            .wake
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        drop(wake);
    }
}

impl Wake for JsWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.scheduled.swap(true, Ordering::AcqRel) {
            let wake = self.wake.lock().unwrap_or_else(PoisonError::into_inner);
            let Some(wake) = wake.as_ref() else {
                return;
            };
            let status = wake.call((), ThreadsafeFunctionCallMode::NonBlocking);
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
    /// The tools' names in declaration order: submissions name a tool by its position here.
    names: Arc<[String]>,
}

#[napi]
impl NativeToolExecutor {
    /// An executor over `tools`; their calls are handed to JavaScript by the turns' polls.
    #[napi(constructor)]
    pub fn new(options: ExecutorOptions, tools: Vec<ToolSpec>) -> napi::Result<Self> {
        guard::sync(|| {
            let queues = Arc::new(JsToolQueues::default());
            let names: Arc<[String]> = tools.iter().map(|spec| spec.name.clone()).collect();
            let config = executor_config(options)?;
            let mut registry = ToolRegistry::new();
            for spec in tools {
                register_js_tool(&mut registry, spec, queues.clone())?;
            }
            let inner = ferroloop::exec::ToolExecutor::builder(registry)
                .config(config)
                .build();
            Ok(Self {
                inner,
                queues,
                names,
            })
        })
    }

    /// Starts a streaming turn; `wake` is called (asynchronously) whenever it should be polled.
    #[napi(js_name = "startTurn", ts_args_type = "wake: () => void")]
    pub fn start_turn(&self, wake: WakeFn) -> napi::Result<NativeTurn> {
        guard::sync(|| {
            let mut turn = self.inner.turn();
            turn.enable_external_calls();
            Ok(NativeTurn {
                handle: turn.handle(),
                state: TurnState::Streaming(turn),
                waker: Arc::new(JsWaker::new(wake)),
                queues: self.queues.clone(),
                names: self.names.clone(),
                starts: Vec::new(),
                calls: Vec::new(),
                cancels: Vec::new(),
                needed: Vec::new(),
                text_requests: Vec::new(),
                plain: Vec::new(),
                result_flags: Vec::new(),
            })
        })
    }

    /// Delivers a batch of JS tool replies and progress reports: a flat JSON array
    /// `[callId, flags, content, ...]` (flags: 1 = error, 2 = content blocks, 4 = progress
    /// report with its data as content); returns how many calls were still waiting for theirs.
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

/// One turn, polled on the JavaScript thread: streaming (events as they happen) until
/// [`finish`](NativeTurn::finish) turns it into a batch that reports only its results.
#[napi(js_name = "Turn")]
pub struct NativeTurn {
    handle: TurnHandle,
    state: TurnState,
    waker: Arc<JsWaker>,
    queues: Arc<JsToolQueues>,
    /// The executor's tool names, by declaration order.
    names: Arc<[String]>,
    /// The calls to start found by the last poll (a buffer kept across polls).
    starts: Vec<u32>,
    /// The external calls to start (indexes in the turn) found by the last poll.
    calls: Vec<u32>,
    /// The external calls to abort found by the last poll.
    cancels: Vec<u32>,
    /// Held answers the turn refused without their text: `index, flags` pairs (see
    /// `takeNeededTexts`).
    needed: Vec<u32>,
    /// Held answers whose text the finishing turn asks for (see `takeTextRequests`).
    text_requests: Vec<u32>,
    /// By index: the call was answered with plain text, which JavaScript keeps (its result is
    /// not sent back when the core kept it unchanged).
    plain: Vec<bool>,
    /// The flags of a finished turn's results (see `takeResultFlags`).
    result_flags: Vec<u8>,
}

/// A turn, streaming events or finishing (reporting only its results, once).
enum TurnState {
    Streaming(Turn),
    Finishing(Turn),
    Done,
}

impl TurnState {
    fn turn_mut(&mut self) -> Option<&mut Turn> {
        match self {
            Self::Streaming(turn) | Self::Finishing(turn) => Some(turn),
            Self::Done => None,
        }
    }
}

/// Settlement flags (`settle`): the tool failed.
const SETTLE_ERROR: u32 = 1;
/// Settlement flags: the content is the JSON text of an array of content blocks.
const SETTLE_BLOCKS: u32 = 2;
/// Settlement flags: not an answer but a progress report (the content is its data as JSON).
const SETTLE_PROGRESS: u32 = 4;
/// Settlement flags: a plain text JavaScript keeps, not included in the contents (its length
/// alone is given): the turn holds a placeholder, or asks for the text (`takeNeededTexts`).
const SETTLE_HELD: u32 = 8;

/// Submission flags: the input follows (otherwise it is an object JavaScript kept, sent as
/// `{}`: for a tool without a schema every object is as valid as `{}`).
const SUBMIT_HAS_INPUT: u32 = 1;
/// Submission flags: JavaScript decided the call's concurrency safety...
const SUBMIT_DECIDED: u32 = 2;
/// ...and decided it is safe.
const SUBMIT_SAFE: u32 = 4;
/// Submission flags: JavaScript could not hand the input over (JSON cannot carry it): the
/// reason follows instead, and the core answers the call at once, never run.
const SUBMIT_REFUSED: u32 = 8;

/// A submission batch, parsed from the flat JSON array `[id, name, flags, (input,) id, name,
/// flags, ...]`: the tool uses, and the concurrency decisions JavaScript took, as `(position in
/// the batch, safe)` (handed to the turn with the calls).
struct SubmissionBatch {
    tool_uses: Vec<ToolUse>,
    decisions: Vec<(usize, bool)>,
    /// The calls JavaScript refused, as `(position in the batch, reason)`.
    refusals: Vec<(usize, String)>,
}

/// The fewest bytes one submission takes (`"","",0,`): the text's length over it bounds the
/// number of submissions, so the batch is allocated once.
const MIN_SUBMISSION_BYTES: usize = 8;
/// At most this many submissions are reserved up front.
const MAX_RESERVED_SUBMISSIONS: usize = 16_384;

impl SubmissionBatch {
    fn parse(text: &str) -> Result<Self, serde_json::Error> {
        use serde::Deserializer as _;
        let capacity = (text.len() / MIN_SUBMISSION_BYTES).min(MAX_RESERVED_SUBMISSIONS);
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let batch = deserializer.deserialize_seq(SubmissionVisitor { capacity })?;
        deserializer.end()?;
        Ok(batch)
    }
}

struct SubmissionVisitor {
    capacity: usize,
}

impl<'de> serde::de::Visitor<'de> for SubmissionVisitor {
    type Value = SubmissionBatch;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a flat array of id, name, flags[, input] submissions")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> Result<SubmissionBatch, A::Error> {
        use serde::de::Error;
        let mut tool_uses = Vec::with_capacity(self.capacity);
        let mut decisions = Vec::new();
        let mut refusals = Vec::new();
        while let Some(id) = seq.next_element::<String>()? {
            let name = seq
                .next_element::<String>()?
                .ok_or_else(|| A::Error::custom("a submission without a name"))?;
            let flags = seq
                .next_element::<u32>()?
                .ok_or_else(|| A::Error::custom("a submission without flags"))?;
            let input = if flags & SUBMIT_REFUSED != 0 {
                let reason = seq
                    .next_element::<String>()?
                    .ok_or_else(|| A::Error::custom("a refused submission without its reason"))?;
                refusals.push((tool_uses.len(), reason));
                Value::Object(serde_json::Map::new())
            } else if flags & SUBMIT_HAS_INPUT != 0 {
                seq.next_element::<Value>()?
                    .ok_or_else(|| A::Error::custom("a submission without its input"))?
            } else {
                Value::Object(serde_json::Map::new())
            };
            if flags & SUBMIT_DECIDED != 0 {
                decisions.push((tool_uses.len(), flags & SUBMIT_SAFE != 0));
            }
            tool_uses.push(ToolUse { id, name, input });
        }
        Ok(SubmissionBatch {
            tool_uses,
            decisions,
            refusals,
        })
    }
}

#[napi]
impl NativeTurn {
    /// Submits tool uses, a flat JSON array `[id, name, flags, (input,) ...]` (flags: 1 = the
    /// input follows, else it is an object the JS side keeps; 2 = the concurrency safety was
    /// decided, 4 = safe; 8 = refused: the reason follows instead of the input). They start as
    /// admission allows.
    #[napi(js_name = "submitJson")]
    pub fn submit_json(&mut self, submissions_json: String) -> napi::Result<()> {
        guard::sync(|| {
            let batch = SubmissionBatch::parse(&submissions_json).map_err(|err| {
                FerroloopError::invalid_argument(format!("tool uses are not valid: {err}"))
            })?;
            Ok(self.submit_batch(batch)?)
        })
    }

    /// Submits tool uses without a JSON text per call: `items` holds `tool, flags, idLength`
    /// triples (tool: the tool's position in the executor's declarations, or 2^32 - 1 for a
    /// name it does not know; flags as for `submitJson`), `ids` the `tool_use` ids one after the
    /// other (each `idLength` UTF-16 code units long), and `extraJson` a JSON array of what
    /// some calls need in order: the name of an unknown tool, then the input when flag 1 is set
    /// or the reason when flag 8 is (empty text when nothing is needed).
    #[napi]
    pub fn submit(
        &mut self,
        items: Uint32Array,
        ids: JsString<'_>,
        extra_json: String,
    ) -> napi::Result<()> {
        guard::sync(|| {
            let invalid = |what: &str| {
                FerroloopError::invalid_argument(format!("tool uses are not valid: {what}"))
            };
            if !items.len().is_multiple_of(3) {
                return Err(invalid("items must be tool, flags, idLength triples").into());
            }
            let extra: Vec<Value> = if extra_json.is_empty() {
                Vec::new()
            } else {
                read_json(&extra_json)
                    .and_then(serde_json::from_value)
                    .map_err(|err| invalid_json("a tool use's input", &err))?
            };
            let mut extra = extra.into_iter();
            let units = items.chunks_exact(3).map(|item| item[2] as usize).sum();
            let mut ids = Parts::read(ids, units)?;
            let mut tool_uses = Vec::with_capacity(items.len() / 3);
            let mut decisions = Vec::new();
            let mut refusals = Vec::new();
            for item in items.chunks_exact(3) {
                let (tool, flags, len) = (item[0] as usize, item[1], item[2] as usize);
                let id = ids
                    .next(len)
                    .ok_or_else(|| invalid("the ids are shorter than their lengths"))?;
                let name = match self.names.get(tool) {
                    Some(name) => name.clone(),
                    None => match extra.next() {
                        Some(Value::String(name)) => name,
                        _ => return Err(invalid("an unknown tool's name is missing").into()),
                    },
                };
                let input = if flags & SUBMIT_REFUSED != 0 {
                    let Some(Value::String(reason)) = extra.next() else {
                        return Err(invalid("a refused submission without its reason").into());
                    };
                    refusals.push((tool_uses.len(), reason));
                    Value::Object(serde_json::Map::new())
                } else if flags & SUBMIT_HAS_INPUT != 0 {
                    extra
                        .next()
                        .ok_or_else(|| invalid("a submission without its input"))?
                } else {
                    Value::Object(serde_json::Map::new())
                };
                if flags & SUBMIT_DECIDED != 0 {
                    decisions.push((tool_uses.len(), flags & SUBMIT_SAFE != 0));
                }
                tool_uses.push(ToolUse { id, name, input });
            }
            Ok(self.submit_batch(SubmissionBatch {
                tool_uses,
                decisions,
                refusals,
            })?)
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

    /// Seals the turn and stops its events: polls report only the results, all at once when
    /// the last call is answered (the batch form `run()` uses).
    #[napi]
    pub fn finish(&mut self) -> napi::Result<()> {
        guard::sync(
            || match std::mem::replace(&mut self.state, TurnState::Done) {
                TurnState::Streaming(mut turn) => {
                    turn.begin_finish();
                    self.state = TurnState::Finishing(turn);
                    Ok(())
                }
                other => {
                    self.state = other;
                    Err(
                        FerroloopError::invalid_state("the turn is finishing or done already")
                            .into(),
                    )
                }
            },
        )
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

    /// Answers external calls (the indexes `pollJson` listed in `calls`) and reports their
    /// progress: `items` holds `index, flags, length` triples (flags: 1 = error, 2 = the content
    /// is the JSON text of content blocks, 4 = a progress report whose content is its data as
    /// JSON, 8 = a plain text JavaScript keeps and does not send), `contents` the contents sent,
    /// one after the other, each `length` UTF-16 code units long. Returns how many kept texts
    /// the turn needs after all (`takeNeededTexts`: send them again, without flag 8). Poll
    /// afterwards.
    #[napi]
    pub fn settle(&mut self, items: Uint32Array, contents: JsString<'_>) -> napi::Result<u32> {
        guard::sync(|| {
            let Some(turn) = self.state.turn_mut() else {
                return Ok(0);
            };
            let units = items
                .chunks_exact(3)
                .filter(|item| item[1] & SETTLE_HELD == 0)
                .map(|item| item[2] as usize)
                .sum();
            let mut parts = Parts::read(contents, units)?;
            self.needed.clear();
            for item in items.chunks_exact(3) {
                let (index, flags, len) = (item[0] as usize, item[1], item[2] as usize);
                if flags & SETTLE_HELD != 0 {
                    match turn.complete_external_held(index, len, flags & SETTLE_ERROR != 0) {
                        Ok(true) => mark_plain(&mut self.plain, index),
                        Ok(false) => {}
                        Err(TextNeeded) => {
                            self.needed
                                .extend_from_slice(&[item[0], flags & SETTLE_ERROR]);
                        }
                    }
                    continue;
                }
                let Some(text) = parts.next(len) else {
                    return Err(FerroloopError::invalid_argument(
                        "settlements: the contents are shorter than their lengths",
                    )
                    .into());
                };
                if flags & SETTLE_PROGRESS != 0 {
                    // Never `null` for a datum that does not read (it was, unseen).
                    turn.external_progress(index, progress_datum(&text));
                    continue;
                }
                let output = if flags & SETTLE_BLOCKS != 0 {
                    match read_json(&text) {
                        Ok(Value::Array(blocks)) => ToolOutput {
                            content: ToolOutput::blocks(blocks).content,
                            is_error: flags & SETTLE_ERROR != 0,
                        },
                        Ok(_) => ToolOutput::error(
                            "the tool returned content blocks that are not a JSON array",
                        ),
                        Err(err) => ToolOutput::error(unreadable_result(&err)),
                    }
                } else {
                    mark_plain(&mut self.plain, index);
                    ToolOutput {
                        content: text.into(),
                        is_error: flags & SETTLE_ERROR != 0,
                    }
                };
                turn.complete_external(index, output);
            }
            Ok(u32::try_from(self.needed.len() / 2).unwrap_or(u32::MAX))
        })
    }

    /// The kept texts the last `settle` could not leave with JavaScript, as `index, flags`
    /// pairs (flags: 1 = error): settle them again with their text.
    #[napi(js_name = "takeNeededTexts")]
    pub fn take_needed_texts(&mut self) -> napi::Result<Uint32Array> {
        guard::sync(|| Ok(Uint32Array::new(std::mem::take(&mut self.needed))))
    }

    /// The calls whose kept text the finishing turn asks for (the last poll counted them in
    /// `texts`), as indexes in the turn: give them with `provideTexts`, then poll.
    #[napi(js_name = "takeTextRequests")]
    pub fn take_text_requests(&mut self) -> napi::Result<Uint32Array> {
        guard::sync(|| Ok(Uint32Array::new(std::mem::take(&mut self.text_requests))))
    }

    /// Gives kept texts the turn asked for: `items` holds `index, length` pairs, `texts` the
    /// texts one after the other, each `length` UTF-16 code units long.
    #[napi(js_name = "provideTexts")]
    pub fn provide_texts(&mut self, items: Uint32Array, texts: JsString<'_>) -> napi::Result<()> {
        guard::sync(|| {
            let Some(turn) = self.state.turn_mut() else {
                return Ok(());
            };
            let units = items.chunks_exact(2).map(|item| item[1] as usize).sum();
            let mut parts = Parts::read(texts, units)?;
            for item in items.chunks_exact(2) {
                let Some(text) = parts.next(item[1] as usize) else {
                    return Err(FerroloopError::invalid_argument(
                        "texts: shorter than their lengths",
                    )
                    .into());
                };
                turn.provide_external_text(item[0] as usize, text);
            }
            Ok(())
        })
    }

    /// The external calls to start that the last poll counted in `calls` (indexes in the turn).
    #[napi(js_name = "takeCalls")]
    pub fn take_calls(&mut self) -> napi::Result<Uint32Array> {
        guard::sync(|| Ok(Uint32Array::new(std::mem::take(&mut self.calls))))
    }

    /// The flags of the finished turn's results, one per call in order (1 = error, 2 = the
    /// content is the text JavaScript settled the call with, which it kept; the other contents
    /// are the poll's `results`).
    #[napi(js_name = "takeResultFlags")]
    pub fn take_result_flags(&mut self) -> napi::Result<Uint8Array> {
        guard::sync(|| Ok(Uint8Array::new(std::mem::take(&mut self.result_flags))))
    }

    /// Drives the turn until it would block. Returns JSON
    /// `{events, starts, aborts, calls, cancels, texts, done, results?}`: the turn events that
    /// happened (results in submission order; none once finishing), the calls JavaScript must
    /// start as a flat `[callId, index, ...]` array (index: the call's position in the turn),
    /// the calls it must abort, how many external calls to start (`takeCalls`), the external
    /// calls to abort, how many kept texts the turn asks for (`takeTextRequests`), whether the
    /// turn is over, and (for a finished turn) the contents JavaScript does not hold
    /// (`takeResultFlags` says which).
    #[napi(js_name = "pollJson")]
    pub fn poll_json(&mut self) -> napi::Result<String> {
        guard::sync(|| {
            // Cleared first: a wake during or after this poll schedules the next one.
            self.waker.scheduled.store(false, Ordering::Release);
            let waker = Waker::from(self.waker.clone());
            let mut cx = Context::from_waker(&waker);
            let mut events = Vec::new();
            let mut results: Option<(Vec<ToolResult>, Vec<bool>)> = None;
            // Timers (timeouts, cleanup grace) register with the async runtime.
            let outcome = napi::bindgen_prelude::within_runtime_if_available(|| {
                poll_state(&mut self.state, &mut cx, &mut events, &mut results)
            });
            match self.state.turn_mut() {
                Some(turn) => {
                    turn.take_external_work(&mut self.calls, &mut self.cancels);
                    turn.take_external_text_requests(&mut self.text_requests);
                }
                None => {
                    self.calls.clear();
                    self.cancels.clear();
                    self.text_requests.clear();
                }
            }
            outcome?;
            let done = matches!(self.state, TurnState::Done);
            if done {
                self.waker.release();
            }
            // Waiting on JavaScript alone (and no wake already on its way): nothing native will
            // wake the turn, so JavaScript need not keep the event loop alive for it.
            let idle = self
                .state
                .turn_mut()
                .is_some_and(|turn| turn.waits_only_on_host())
                && !self.waker.scheduled.load(Ordering::Acquire);
            let aborts = self.queues.take_starts(&mut self.starts);
            let changed = results.as_ref().map(|(results, kept)| {
                changed_results(results, kept, &self.plain, &mut self.result_flags)
            });
            let out = PollOutcome {
                events: events.iter().map(JsEvent::of).collect(),
                starts: &self.starts,
                aborts: &aborts,
                calls: self.calls.len(),
                texts: self.text_requests.len(),
                cancels: &self.cancels,
                done,
                idle,
                results: changed,
            };
            serde_json::to_string(&out).map_err(|err| {
                FerroloopError::internal(format!("poll serialization: {err}")).into()
            })
        })
    }
}

impl NativeTurn {
    /// Submits a parsed batch: one lock and one wake for all of it; nothing is submitted to a
    /// sealed turn.
    fn submit_batch(&mut self, batch: SubmissionBatch) -> Result<(), FerroloopError> {
        let SubmissionBatch {
            tool_uses,
            decisions,
            refusals,
        } = batch;
        self.handle
            .submit_vec_checked(tool_uses, decisions, refusals)
            .map_err(|closed| {
                FerroloopError::invalid_state(format!(
                    "the turn is sealed: tool use {} was not submitted",
                    closed.0.id
                ))
            })?;
        Ok(())
    }
}

/// Drives a turn's state until it would block (see [`NativeTurn::poll_json`]).
fn poll_state(
    state: &mut TurnState,
    cx: &mut Context<'_>,
    events: &mut Vec<TurnEvent>,
    results: &mut Option<(Vec<ToolResult>, Vec<bool>)>,
) -> Result<(), FerroloopError> {
    // A streaming turn whose events are over finishes: its results are the turn's own, with
    // the aggregate budget applied (the ones to send back, as Python's and C's turns give),
    // not the `result` events' form.
    while let TurnState::Streaming(turn) = state {
        match turn.poll_next_event(cx) {
            Poll::Ready(Some(event)) => events.push(event),
            Poll::Ready(None) => {
                if let TurnState::Streaming(turn) = std::mem::replace(state, TurnState::Done) {
                    *state = TurnState::Finishing(turn);
                }
            }
            Poll::Pending => return Ok(()),
        }
    }
    match state {
        TurnState::Streaming(_) => Ok(()),
        TurnState::Finishing(turn) => match turn.poll_finish(cx) {
            Poll::Pending => Ok(()),
            Poll::Ready(outcome) => {
                let kept = match &outcome {
                    Ok(all) | Err(TurnError::Fatal { results: all, .. }) => (0..all.len())
                        .map(|index| turn.external_content_kept(index))
                        .collect(),
                    Err(_) => Vec::new(),
                };
                *state = TurnState::Done;
                match outcome {
                    Ok(all) | Err(TurnError::Fatal { results: all, .. }) => {
                        *results = Some((all, kept));
                        Ok(())
                    }
                    Err(err @ TurnError::Internal(_)) => {
                        Err(FerroloopError::internal(err.to_string()))
                    }
                }
            }
        },
        TurnState::Done => Ok(()),
    }
}

/// What one poll reports to the JS wrapper.
#[derive(serde::Serialize)]
struct PollOutcome<'a> {
    events: Vec<JsEvent<'a>>,
    starts: &'a [u32],
    aborts: &'a [crate::js_tools::ToolAbort],
    /// How many external calls to start (their indexes: `takeCalls`).
    calls: usize,
    /// How many kept texts the finishing turn asks for (their indexes: `takeTextRequests`).
    texts: usize,
    /// External calls to abort (indexes in the turn).
    cancels: &'a [u32],
    done: bool,
    /// The turn waits on JavaScript alone: its tools' answers, a submit, seal or cancel (no
    /// timer or native task of its own runs, no wake is pending).
    idle: bool,
    /// The contents of the results JavaScript did not keep, in order (the flags of every
    /// result: `takeResultFlags`): the JS side holds the `tool_use` ids and builds the
    /// wire-shaped blocks.
    #[serde(skip_serializing_if = "Option::is_none")]
    results: Option<Vec<&'a ToolResultContent>>,
}

/// Records that call `index` was answered with plain text JavaScript keeps.
fn mark_plain(plain: &mut Vec<bool>, index: usize) {
    if plain.len() <= index {
        plain.resize(index + 1, false);
    }
    plain[index] = true;
}

/// Fills `flags` with each result's flags (1 = error, 2 = its content is the text JavaScript
/// settled the call with, unchanged: `kept` by the core, and `plain` text) and returns the
/// contents JavaScript does not hold, in order.
fn changed_results<'a>(
    results: &'a [ToolResult],
    kept: &[bool],
    plain: &[bool],
    flags: &mut Vec<u8>,
) -> Vec<&'a ToolResultContent> {
    flags.clear();
    flags.reserve(results.len());
    let mut changed = Vec::new();
    for (index, result) in results.iter().enumerate() {
        let kept = kept.get(index).copied().unwrap_or(false)
            && plain.get(index).copied().unwrap_or(false)
            && matches!(result.content, ToolResultContent::Text(_));
        flags.push(u8::from(result.is_error) | (u8::from(kept) << 1));
        if !kept {
            changed.push(&result.content);
        }
    }
    changed
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
