//! Streaming turns: the tool calls of one model response, submitted as the stream seals them,
//! with events read while the tools run.
//!
//! The C side only translates: the turn is the core's [`Turn`], driven by `fl_turn_next_event`
//! on the calling thread through a single-threaded tokio runtime the turn owns (so turns of one
//! executor, and its batch runs, never wait on one another).

use std::cell::Cell;
use std::ffi::c_char;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use ferroloop_core::exec::{CallStatus, ToolUse, Turn, TurnError, TurnEvent, TurnHandle};
// A lone surrogate escape in tool data reads as U+FFFD, as in Node and in the tracker's and
// the estimates' JSON arguments (it was refused as "unexpected end of hex escape").
use ferroloop_core::json_text::from_str_lossy;
use serde_json::json;

use crate::boundary::{self, FfiError, FfiResult};
use crate::exec::{DRIVING, Driving, TurnLink, fl_cancel_token, fl_executor};
use crate::owned_runtime::OwnedRuntime;
use crate::status::fl_status;
use crate::text::{self, Out};

/// A streaming turn (opaque): the tool calls of one model response. Create it with
/// `fl_turn_new`, add each `tool_use` with `fl_turn_submit` as soon as the model's stream
/// completes it, call `fl_turn_seal` when the response ends, read what happens with
/// `fl_turn_next_event` (which also runs the tools), then take the results with
/// `fl_turn_results` and release the turn with `fl_turn_free`.
///
/// Thread-safety: `fl_turn_submit`, `fl_turn_seal`, `fl_turn_cancel` and `fl_turn_results` may be
/// called from any thread, at any time, also from the turn's own tool callbacks.
/// `fl_turn_next_event` is called by one thread at a time (`FL_STATUS_INVALID_STATE` otherwise);
/// `fl_turn_free` must not overlap any other call on the turn.
pub struct fl_turn {
    /// The core turn (until it ends) and the buffers of the last event's views. Locked by the
    /// thread in `fl_turn_next_event` (one at a time: see `polling`).
    state: Mutex<TurnState>,
    /// Submits, seals and cancels from any thread without the lock.
    handle: TurnHandle,
    /// A thread is in `fl_turn_next_event`.
    polling: AtomicBool,
    /// `fl_turn_cancel` was called.
    cancelled: AtomicBool,
    /// The host's cancel token, if any (for the status of `fl_turn_results`).
    cancel: Option<ferroloop_core::exec::CancellationToken>,
    /// The results as NUL-terminated JSON, once the turn has ended, and their status.
    results: OnceLock<(String, fl_status)>,
    /// Keeps the turn linked to the host's cancel token; unlinks it when the turn is freed.
    link: Option<TurnLink>,
    /// Drives the turn's calls, timers and timeouts (dropped last).
    runtime: OwnedRuntime,
}

/// The core turn and the buffers the last event's views point into.
struct TurnState {
    /// The core turn; `None` once it has ended and its results were taken.
    turn: Option<Turn>,
    tool_use_id: String,
    tool_name: String,
    /// NUL-terminated.
    json: String,
}

/// What an `fl_turn_event` reports.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum fl_turn_event_kind {
    /// No event within the timeout: the turn goes on; call `fl_turn_next_event` again.
    FL_TURN_EVENT_NONE = 0,
    /// A call was admitted and its tool started (`duration_ms`: how long it waited).
    FL_TURN_EVENT_STARTED = 1,
    /// A tool reported progress (`json`: what it reported; a C tool reports it with
    /// `fl_tool_call_progress`). Comes between the call's `STARTED` and `FINISHED`.
    FL_TURN_EVENT_PROGRESS = 2,
    /// A call ended, in completion order (`status`, `duration_ms`: how long it ran). Every
    /// call gets exactly one, started or not.
    FL_TURN_EVENT_FINISHED = 3,
    /// A call outlived its cleanup grace after a cancellation or timeout: its result was
    /// produced anyway and its `fl_tool_call` now reports `fl_tool_call_cancelled`. Comes just
    /// before the call's `FINISHED` (`FL_CALL_TIMED_OUT` or `FL_CALL_CANCELLED`); the progress
    /// the tool reports from then on is dropped, and completing the call later is harmless.
    FL_TURN_EVENT_DETACHED = 4,
    /// The result of call `index`, in request order (`json`: the `tool_result` block).
    FL_TURN_EVENT_RESULT = 5,
    /// The turn is sealed and every result was delivered: `fl_turn_results` is ready. Every
    /// later `fl_turn_next_event` reports this again.
    FL_TURN_EVENT_END = 6,
}

/// How a call ended (`FL_TURN_EVENT_FINISHED`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum fl_call_status {
    /// Not a `FL_TURN_EVENT_FINISHED` event.
    FL_CALL_NONE = 0,
    /// The tool completed its call without an error.
    FL_CALL_SUCCEEDED = 1,
    /// The tool completed its call with `is_error`.
    FL_CALL_FAILED = 2,
    /// The tool failed fatally (not produced by C tools).
    FL_CALL_FATAL = 3,
    /// The tool panicked (not produced by C tools).
    FL_CALL_PANICKED = 4,
    /// The tool ran past its timeout.
    FL_CALL_TIMED_OUT = 5,
    /// The tool was running and was cancelled.
    FL_CALL_CANCELLED = 6,
    /// The call never started (cancellation, or a sibling's failure).
    FL_CALL_SKIPPED = 7,
    /// A hook refused the call (not produced by C executors).
    FL_CALL_DENIED = 8,
    /// The call was refused before running: unknown tool or invalid input.
    FL_CALL_REJECTED = 9,
}

impl From<CallStatus> for fl_call_status {
    fn from(status: CallStatus) -> Self {
        match status {
            CallStatus::Succeeded => Self::FL_CALL_SUCCEEDED,
            CallStatus::Failed => Self::FL_CALL_FAILED,
            CallStatus::Fatal => Self::FL_CALL_FATAL,
            CallStatus::Panicked => Self::FL_CALL_PANICKED,
            CallStatus::TimedOut => Self::FL_CALL_TIMED_OUT,
            CallStatus::Cancelled => Self::FL_CALL_CANCELLED,
            CallStatus::Skipped => Self::FL_CALL_SKIPPED,
            CallStatus::Denied => Self::FL_CALL_DENIED,
            CallStatus::Rejected => Self::FL_CALL_REJECTED,
        }
    }
}

/// An event of a turn, filled by `fl_turn_next_event`. Every view is UTF-8 and never NULL (empty
/// when the kind has no such field); `json` is also NUL-terminated. The views are owned by the
/// turn and valid until the next `fl_turn_next_event` or `fl_turn_free` on it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct fl_turn_event {
    /// What happened.
    pub kind: fl_turn_event_kind,
    /// The call's position in the turn (from 0, in submission order); 0 for `NONE` and `END`.
    pub index: usize,
    /// The call's `tool_use` id.
    pub tool_use_id: *const c_char,
    /// Length of `tool_use_id` in bytes.
    pub tool_use_id_len: usize,
    /// The tool's name (as requested, for an unknown tool); empty for `RESULT` and `PROGRESS`.
    pub tool_name: *const c_char,
    /// Length of `tool_name` in bytes.
    pub tool_name_len: usize,
    /// How the call ended (`FINISHED`); `FL_CALL_NONE` otherwise.
    pub status: fl_call_status,
    /// Whether the result is an error result (`RESULT`); false otherwise.
    pub is_error: bool,
    /// `STARTED`: how long the call waited for admission; `FINISHED`: how long it ran (0 when
    /// it never started); in milliseconds; 0 otherwise.
    pub duration_ms: u64,
    /// `RESULT`: the `tool_result` block
    /// (`{"type":"tool_result","tool_use_id":"toolu_1","content":...,"is_error":false}`);
    /// `PROGRESS`: the data reported; every other kind except `NONE` and `END` (empty): the event
    /// itself, for logs (`{"type":"finished","index":0,"tool_use_id":"toolu_1","tool":"read",
    /// "status":"succeeded","duration_ms":3}`).
    pub json: *const c_char,
    /// Length of `json` in bytes, without the NUL.
    pub json_len: usize,
}

/// Starts a streaming turn on `executor` and stores it in `*out`. The caller owns it and
/// releases it with `fl_turn_free`.
///
/// The turn runs the executor's tools on its rules (concurrency-safe calls in parallel, others
/// alone, at most `max_concurrency` at once, results in request order). It does not use the
/// executor afterwards: the executor may be freed before the turn (its tools' callbacks and
/// userdata must stay usable until the turn is freed too), and turns and `fl_executor_run` of
/// one executor may run at the same time on different threads. Tools can no longer be added to
/// the executor once it has started a turn.
///
/// `cancel` may be NULL; cancelling it (from any thread) cancels the turn as `fl_turn_cancel`
/// does. A token cancelled earlier cancels the turn at once: its calls never start.
///
/// Thread-safe.
///
/// # Safety
/// `executor` must be a live executor; `cancel` must be NULL or a live token (it may be freed
/// while the turn lives: the turn can then no longer be cancelled through it); `out` must be
/// valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_turn_new(
    executor: *const fl_executor,
    cancel: *const fl_cancel_token,
    out: *mut *mut fl_turn,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promises on `executor` and `cancel`.
        let (executor, cancel) =
            unsafe { (text::handle_ref(executor, "executor")?, cancel.as_ref()) };
        let out = Out::new(out, "out")?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .map_err(|error| FfiError::state(format!("cannot start the runtime: {error}")))?;
        let turn = executor.executor().turn();
        let handle = turn.handle();
        let link = cancel.map(|cancel: &fl_cancel_token| {
            TurnLink::new(
                &cancel.token,
                &cancel.turns,
                handle.cancellation_token().clone(),
            )
        });
        let turn = Box::new(fl_turn {
            state: Mutex::new(TurnState {
                turn: Some(turn),
                tool_use_id: String::new(),
                tool_name: String::new(),
                json: String::new(),
            }),
            handle,
            polling: AtomicBool::new(false),
            cancelled: AtomicBool::new(false),
            cancel: cancel.map(|cancel| cancel.token.clone()),
            results: OnceLock::new(),
            link,
            runtime: OwnedRuntime::new(runtime),
        });
        // SAFETY: not NULL (checked) and writable (the caller's promise).
        unsafe { out.write(Box::into_raw(turn)) };
        Ok(())
    })
}

/// Submits one call: `tool_use_json` (`len` bytes of UTF-8) is a `tool_use` block,
/// `{"type":"tool_use","id":"toolu_1","name":"read","input":{...}}` (`type` optional; without
/// `input`, the tool runs with `{}`, as in `fl_executor_run`). The call
/// starts at the next `fl_turn_next_event` that admission allows it in; its position in the
/// turn (`index` in the events) is the number of calls submitted before it.
///
/// Returns `FL_STATUS_INVALID_STATE` once the turn is sealed (the call is not added), and
/// `FL_STATUS_INVALID_UTF8` / `FL_STATUS_INVALID_ARGUMENT` for text that is not UTF-8 or not a
/// `tool_use` block (or a length above `PTRDIFF_MAX`). An unknown tool is no error here: its
/// call gets an error result.
///
/// Thread-safe (also from the turn's tool callbacks).
///
/// # Safety
/// `turn` must be a live turn; `tool_use_json` must be valid for reads of `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_turn_submit(
    turn: *const fl_turn,
    tool_use_json: *const c_char,
    len: usize,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promises on `turn` and `tool_use_json`.
        let (turn, json) = unsafe {
            (
                text::handle_ref(turn, "turn")?,
                text::str_arg(tool_use_json, len, "tool_use_json")?,
            )
        };
        let tool_use: ToolUse = from_str_lossy(json).map_err(|error| {
            FfiError::invalid(format!("tool_use_json is not a tool_use block: {error}"))
        })?;
        turn.handle.submit(tool_use).map_err(|closed| {
            FfiError::state(format!(
                "the turn is sealed: call '{}' was not submitted",
                closed.0.id
            ))
        })
    })
}

/// Seals the turn: no more calls will be submitted (the model's response has ended). Once every
/// call has its result, `fl_turn_next_event` reports `FL_TURN_EVENT_END`. Sealing a sealed turn
/// is a no-op returning `FL_STATUS_OK`, as `seal()` is in Python and Node (a host whose stream
/// error path and normal path both seal need not track which ran).
///
/// Thread-safe (also from the turn's tool callbacks).
///
/// # Safety
/// `turn` must be a live turn.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_turn_seal(turn: *const fl_turn) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `turn`.
        let turn = unsafe { text::handle_ref(turn, "turn") }?;
        turn.handle.seal();
        Ok(())
    })
}

/// Cancels the turn: its running calls report `fl_tool_call_cancelled` at once, its queued calls
/// and the calls submitted later never start, and each gets an error result. The turn still
/// needs `fl_turn_seal` to end. Idempotent.
///
/// Thread-safe (also from the turn's tool callbacks).
///
/// # Safety
/// `turn` must be a live turn.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_turn_cancel(turn: *const fl_turn) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `turn`.
        let turn = unsafe { text::handle_ref(turn, "turn") }?;
        turn.cancelled.store(true, Ordering::Release);
        turn.handle.cancel();
        Ok(())
    })
}

/// Drives the turn (starting the calls admission allows, running their tool callbacks on this
/// thread) until it has an event, and writes that event into `*event`.
///
/// `timeout_ms`: how long to wait for an event, in milliseconds; 0 does not wait (the turn
/// still makes the progress it can at once); a negative value waits as long as it takes. When
/// nothing happens in time, the event is `FL_TURN_EVENT_NONE`. A turn that is never sealed never
/// ends: do not wait without a timeout unless another thread will seal or cancel it.
///
/// Events of one call come in the order `STARTED`, `PROGRESS` (any number, as the tool reports
/// them with `fl_tool_call_progress`), `DETACHED` (only for a call that outlived its cleanup
/// grace, just before its `FINISHED`), `FINISHED`, `RESULT`; `RESULT` events come in request
/// order, each as soon as it and every result before it are ready (so they may come before the
/// turn is sealed); the other events come as they happen. After the last result of a sealed
/// turn comes `FL_TURN_EVENT_END`. The views of `*event` are valid until the next call of this
/// function or `fl_turn_free`.
///
/// Thread-safety: one thread at a time per turn (a concurrent call, including one from the
/// turn's tool callback, returns `FL_STATUS_INVALID_STATE`). As with `fl_executor_run`, the tool
/// callbacks run on the calling thread, which they must not use to drive another turn or run an
/// executor (`FL_STATUS_INVALID_STATE`): to run tools inside a tool, hand the call to a worker
/// thread. A tool callback may submit, seal and cancel, but not free its turn.
///
/// # Safety
/// `turn` must be a live turn; `event` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_turn_next_event(
    turn: *const fl_turn,
    timeout_ms: i64,
    event: *mut fl_turn_event,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `turn`.
        let turn = unsafe { text::handle_ref(turn, "turn") }?;
        let event = Out::new(event, "event")?;
        if turn.polling.swap(true, Ordering::AcqRel) {
            return Err(FfiError::state(
                "fl_turn_next_event is already in progress on this turn (another thread, or a \
                 tool callback of this turn)",
            ));
        }
        let _polling = PollingGuard(&turn.polling);
        if DRIVING.with(Cell::get) {
            return Err(FfiError::state(
                "fl_turn_next_event was called on a thread that is driving a run or another \
                 turn (from a tool callback): hand the call to a worker thread, drive this turn \
                 there, then complete the call",
            ));
        }
        let mut state = turn.state.lock().unwrap_or_else(PoisonError::into_inner);
        let next = turn.next(&mut state, timeout_ms)?;
        let filled = state.fill(next);
        // SAFETY: not NULL (checked) and writable (the caller's promise). The views point into
        // `state`, untouched until the next call of this function or `fl_turn_free`.
        unsafe { event.write(filled) };
        Ok(())
    })
}

/// Writes into `*results_json` / `*results_len` a view of the turn's results: a JSON array with
/// exactly one `tool_result` block per submitted call, in request order. These are the results to
/// send back to the model: they have the executor's aggregate result budget applied, which the
/// `FL_TURN_EVENT_RESULT` events (produced before the turn ended) do not (the two differ only
/// when a turn's results exceed it). The view is NUL-terminated and valid until `fl_turn_free`.
///
/// Returns `FL_STATUS_OK`, or `FL_STATUS_CANCELLED` when the turn was cancelled (by
/// `fl_turn_cancel` or its token); in both cases the results are written, and
/// `FL_STATUS_CANCELLED` records its message for `fl_last_error_message` as every other failing
/// status does.
/// `FL_STATUS_INVALID_STATE` until `fl_turn_next_event` has reported `FL_TURN_EVENT_END`.
///
/// Unlike Python's and Node's `results()`, which seal the turn and wait, this neither seals nor
/// waits (a C host drives the turn itself): seal with `fl_turn_seal`, then call
/// `fl_turn_next_event` until `FL_TURN_EVENT_END`. The results are the same: one per submitted
/// call, the budget applied.
///
/// Thread-safe.
///
/// # Safety
/// `turn` must be a live turn; `results_json` and `results_len` must be valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_turn_results(
    turn: *const fl_turn,
    results_json: *mut *const c_char,
    results_len: *mut usize,
) -> fl_status {
    let mut outcome = fl_status::FL_STATUS_OK;
    let status = boundary::run(|| {
        // SAFETY: the caller's promise on `turn`.
        let turn = unsafe { text::handle_ref(turn, "turn") }?;
        let results_json = Out::new(results_json, "results_json")?;
        let results_len = Out::new(results_len, "results_len")?;
        let (results, status) = turn.results.get().ok_or_else(|| {
            FfiError::state(
                "the turn has not ended: seal it and read its events until FL_TURN_EVENT_END",
            )
        })?;
        // SAFETY: both not NULL (checked) and writable (the caller's promise). The string is
        // set once and lives as long as the turn.
        unsafe {
            results_json.write(results.as_ptr().cast());
            results_len.write(results.len() - 1);
        }
        if *status == fl_status::FL_STATUS_CANCELLED {
            // Not an error of this call (the results are written), but a non-OK status: its
            // message replaces the last error, which would otherwise describe an older failure.
            boundary::set_last_error(crate::exec::CANCELLED_RUN);
        }
        outcome = *status;
        Ok(())
    });
    if status == fl_status::FL_STATUS_OK {
        outcome
    } else {
        status
    }
}

/// Releases a turn. NULL is accepted and ignored. A turn freed before its end is cancelled: its
/// running calls report `fl_tool_call_cancelled` at once, and completing them later is harmless
/// (the replies are dropped). Nothing waits for them: the call returns at once, also in a child
/// forked after the turn was made (see `fl_executor_free`).
///
/// Called from one of the turn's own tool callbacks (while `fl_turn_next_event` drives it), it
/// does nothing and records the thread's last error: free the turn after that call returns.
///
/// # Safety
/// `turn` must be NULL or a turn from `fl_turn_new`, not freed yet; it must not be used
/// afterwards, and no other call on it may be in progress on another thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_turn_free(turn: *mut fl_turn) {
    boundary::run_void(|| {
        if turn.is_null() {
            return;
        }
        // SAFETY: a live turn (the caller's promise); only its atomic flag is read.
        if unsafe { &*turn }.polling.load(Ordering::Acquire) {
            boundary::set_last_error(
                "fl_turn_free: fl_turn_next_event is in progress on this turn; free it after \
                 that call returns",
            );
            return;
        }
        // SAFETY: a pointer from `Box::into_raw` in `fl_turn_new`, freed only once, and not in
        // use (checked above, and the caller's promise).
        unsafe { Box::from_raw(turn) }.release();
    });
}

/// Clears the polling flag when `fl_turn_next_event` returns, even by a panic.
struct PollingGuard<'a>(&'a AtomicBool);

impl Drop for PollingGuard<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// What `fl_turn_next_event` found.
enum Next {
    Nothing,
    Event(TurnEvent),
    End,
}

impl fl_turn {
    /// Drives the turn on this thread until its next event, its end, or the timeout.
    fn next(&self, state: &mut TurnState, timeout_ms: i64) -> FfiResult<Next> {
        let Some(core) = state.turn.as_mut() else {
            return Ok(Next::End);
        };
        let event = {
            let _driving = Driving::enter();
            self.runtime.block_on(async {
                match u64::try_from(timeout_ms) {
                    // Negative: no timeout.
                    Err(_) => Some(core.next_event().await),
                    // `timeout` polls the turn once before looking at the clock, so 0 still
                    // makes the progress possible at once.
                    Ok(ms) => tokio::time::timeout(Duration::from_millis(ms), core.next_event())
                        .await
                        .ok(),
                }
            })
        };
        match event {
            None => Ok(Next::Nothing),
            Some(Some(event)) => Ok(Next::Event(event)),
            Some(None) => {
                self.end(state)?;
                Ok(Next::End)
            }
        }
    }

    /// Takes the results of a turn that delivered its last event.
    fn end(&self, state: &mut TurnState) -> FfiResult {
        let Some(core) = state.turn.take() else {
            return Ok(());
        };
        let outcome = {
            let _driving = Driving::enter();
            // The turn is done: `finish` only collects the results (and applies the aggregate
            // budget); no tool runs.
            self.runtime.block_on(core.finish())
        };
        let results = match outcome {
            Ok(results) => results,
            // C tools cannot fail fatally (a reply is always a result): a bug.
            Err(error @ (TurnError::Fatal { .. } | TurnError::Internal(_))) => {
                return Err(FfiError::new(
                    fl_status::FL_STATUS_PANIC,
                    format!("internal error: {error}"),
                ));
            }
        };
        let mut json = crate::exec::results_to_json(&results)?;
        json.push('\0');
        let cancelled = self.cancelled.load(Ordering::Acquire)
            || self
                .cancel
                .as_ref()
                .is_some_and(|token| token.is_cancelled());
        let status = if cancelled {
            fl_status::FL_STATUS_CANCELLED
        } else {
            fl_status::FL_STATUS_OK
        };
        let _ = self.results.set((json, status));
        Ok(())
    }

    /// Releases the turn: cancels it, drops its calls inside its runtime, then the runtime.
    fn release(self: Box<Self>) {
        let Self {
            state,
            handle,
            polling,
            cancelled,
            cancel,
            results,
            link,
            runtime,
        } = *self;
        handle.cancel();
        {
            // Tool futures and timers are dropped in their runtime's context.
            let _context = runtime.enter();
            drop(state);
        }
        drop((handle, polling, cancelled, cancel, results, link));
        drop(runtime);
    }
}

impl TurnState {
    /// Stores the event's texts and returns the C view of it.
    fn fill(&mut self, next: Next) -> fl_turn_event {
        self.tool_use_id.clear();
        self.tool_name.clear();
        self.json.clear();
        let mut filled = fl_turn_event {
            kind: fl_turn_event_kind::FL_TURN_EVENT_NONE,
            index: 0,
            tool_use_id: std::ptr::null(),
            tool_use_id_len: 0,
            tool_name: std::ptr::null(),
            tool_name_len: 0,
            status: fl_call_status::FL_CALL_NONE,
            is_error: false,
            duration_ms: 0,
            json: std::ptr::null(),
            json_len: 0,
        };
        let event = match next {
            Next::Nothing => None,
            Next::End => {
                filled.kind = fl_turn_event_kind::FL_TURN_EVENT_END;
                None
            }
            Next::Event(event) => Some(event),
        };
        if let Some(event) = event {
            let value = match event {
                TurnEvent::Started {
                    index,
                    tool_use_id,
                    tool,
                    queued,
                } => {
                    filled.kind = fl_turn_event_kind::FL_TURN_EVENT_STARTED;
                    filled.index = index;
                    filled.duration_ms = millis(queued);
                    let value = json!({"type": "started", "index": index,
                        "tool_use_id": tool_use_id, "tool": tool, "queued_ms": filled.duration_ms});
                    self.tool_use_id = tool_use_id;
                    self.tool_name = tool;
                    value
                }
                TurnEvent::Progress {
                    index,
                    tool_use_id,
                    data,
                } => {
                    filled.kind = fl_turn_event_kind::FL_TURN_EVENT_PROGRESS;
                    filled.index = index;
                    self.tool_use_id = tool_use_id;
                    data
                }
                TurnEvent::Finished {
                    index,
                    tool_use_id,
                    tool,
                    status,
                    duration,
                } => {
                    filled.kind = fl_turn_event_kind::FL_TURN_EVENT_FINISHED;
                    filled.index = index;
                    filled.status = status.into();
                    filled.duration_ms = millis(duration);
                    let value = json!({"type": "finished", "index": index,
                        "tool_use_id": tool_use_id, "tool": tool, "status": status,
                        "duration_ms": filled.duration_ms});
                    self.tool_use_id = tool_use_id;
                    self.tool_name = tool;
                    value
                }
                TurnEvent::Detached {
                    index,
                    tool_use_id,
                    tool,
                } => {
                    filled.kind = fl_turn_event_kind::FL_TURN_EVENT_DETACHED;
                    filled.index = index;
                    let value = json!({"type": "detached", "index": index,
                        "tool_use_id": tool_use_id, "tool": tool});
                    self.tool_use_id = tool_use_id;
                    self.tool_name = tool;
                    value
                }
                TurnEvent::Result { index, result } => {
                    filled.kind = fl_turn_event_kind::FL_TURN_EVENT_RESULT;
                    filled.index = index;
                    filled.is_error = result.is_error;
                    let value = serde_json::to_value(&result).unwrap_or_else(|error| {
                        // A result is plain JSON data: this cannot fail.
                        json!({"type": "tool_result", "tool_use_id": result.tool_use_id,
                            "content": format!("cannot serialise the result: {error}"),
                            "is_error": true})
                    });
                    self.tool_use_id = result.tool_use_id;
                    value
                }
            };
            self.json = value.to_string();
        }
        self.json.push('\0');
        (filled.tool_use_id, filled.tool_use_id_len) = text::view(&self.tool_use_id);
        (filled.tool_name, filled.tool_name_len) = text::view(&self.tool_name);
        filled.json = self.json.as_ptr().cast();
        filled.json_len = self.json.len() - 1;
        filled
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
