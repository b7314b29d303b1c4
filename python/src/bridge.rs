//! The bridge between Rust futures (on the tokio runtime) and an asyncio event loop.
//!
//! Rust never runs Python code on its own threads for async tools: it queues *jobs* for the loop
//! thread (start a tool's coroutine as a task, cancel a task, resolve an awaited future), and
//! wakes the loop at most once per batch with `loop.call_soon_threadsafe(pump)`. Completed tasks
//! report back through a oneshot channel, converted on the loop thread. So a batch of 10,000 calls
//! costs one wake-up, and the runtime's threads take the interpreter only to schedule that wake-up.
//!
//! Most tool tasks finish in their first step. Rather than a done-callback per task (a loop
//! callback and a call into Rust each), the tasks started by one drain are *swept* by one
//! callback queued after their first steps (the loop runs callbacks in FIFO order): a finished
//! task reports there, and only a task still running gets a done-callback. A sweep or a
//! done-callback that completes calls then runs the jobs this queued (the executor's next poll)
//! in the same loop callback, without a wake-up through the loop's self-pipe.
//!
//! Cancellation flows both ways: cancelling the asyncio future of [`into_awaitable`] aborts the
//! Rust future, and dropping a [`PyCall`] (aborted, timed out, or discarded) cancels its Python
//! task, which sees `asyncio.CancelledError`. A tool call's outcome travels through the core's
//! answer channel for the call (`ToolContext::answer_channel`; [`PyCall::start_answering`],
//! [`call_blocking`]): the order of the outcome and the call's cancellation is read as the outcome
//! is sent (on the loop thread for a task, on the worker thread for a plain function), and the
//! call's future reports it to the executor as it returns the outcome.

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::task::{Context, Poll};

use futures_util::FutureExt;
use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError, PySystemExit};
use pyo3::prelude::*;
use serde_json::Value;
use tokio::sync::oneshot;

use ferroloop::exec::{AnswerReceiver, AnswerSender};

use crate::errors::{internal_error, panic_message};
use crate::runtime::{loop_callback_pass, python_pass, refuse_after_exit, runtime};

/// Work for the event loop's thread, run with the interpreter attached.
type Job = Box<dyn FnOnce(Python<'_>, &LoopBridge) + Send>;

/// Builds an extra last argument for a Python call (e.g. a tool context), on the thread that
/// makes the call.
pub(crate) type ExtraArg = Box<dyn FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send>;

/// Converts JSON arguments (and the extra argument) into a Python argument tuple.
fn call_args<'py>(
    py: Python<'py>,
    args: &[Value],
    extra: Option<ExtraArg>,
) -> PyResult<Bound<'py, pyo3::types::PyTuple>> {
    let mut call_args = Vec::with_capacity(args.len() + 1);
    for arg in args {
        call_args.push(crate::value::to_py(py, arg)?);
    }
    if let Some(extra) = extra {
        call_args.push(extra(py)?.into_bound(py));
    }
    pyo3::types::PyTuple::new(py, call_args)
}

/// Locks a mutex whose data stays consistent even if a holder panicked (plain queues and maps).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One asyncio event loop, as seen from Rust.
pub(crate) struct LoopBridge {
    event_loop: Py<PyAny>,
    /// `event_loop.create_task`, looked up once.
    create_task: Py<PyAny>,
    /// `event_loop.call_soon`, looked up once.
    call_soon: Py<PyAny>,
    jobs: Mutex<Vec<Job>>,
    /// A pump call is queued on the loop and has not started draining yet.
    scheduled: AtomicBool,
    /// Running Python tasks by call id, so a dropped [`PyCall`] can cancel its task (released
    /// once the loop is found closed: see [`LoopBridge::release_tasks`]).
    tasks: Mutex<HashMap<u64, Py<PyAny>>>,
    /// The reply channel of each running task, keyed by the task object's address (valid while
    /// the task is alive, and it is until its done-callback ran).
    replies: Mutex<HashMap<usize, (u64, ReplyTx)>>,
    /// Weak references (with a [`TaskCollected`] callback) to the tasks of calls cancelled while
    /// they ran, by call id, until they end. Such a task is no longer held by the bridge (only
    /// by whatever it awaits), as the loop holds tasks only weakly: one that ignored its
    /// cancellation and awaits something nobody can complete any more is garbage, and its call
    /// is answered when it is collected (see [`TaskCollected`]).
    watched: Mutex<HashMap<u64, Py<PyAny>>>,
    /// The one done-callback shared by every task of this loop (no object per call).
    task_done: Py<TaskDone>,
    /// Tasks started by the running drain, swept once it ends.
    unswept: Mutex<Vec<StartedTask>>,
    /// This bridge (for the sweeps it queues).
    me: Weak<LoopBridge>,
    next_call: AtomicU64,
}

/// A task started for a call, not yet known to be finished.
struct StartedTask {
    id: u64,
    task: Py<PyAny>,
    reply: ReplyTx,
}

impl LoopBridge {
    /// A bridge to the event loop running in the calling thread (a `RuntimeError` if none runs).
    pub(crate) fn for_running_loop(py: Python<'_>) -> PyResult<Arc<Self>> {
        refuse_after_exit()?;
        let event_loop = running_loop(py)?;
        let create_task = event_loop
            .getattr(pyo3::intern!(py, "create_task"))?
            .unbind();
        let call_soon = event_loop.getattr(pyo3::intern!(py, "call_soon"))?.unbind();
        let task_done = Py::new(
            py,
            TaskDone {
                bridge: OnceLock::new(),
            },
        )?;
        let bridge = Arc::new_cyclic(|me| Self {
            me: me.clone(),
            task_done: task_done.clone_ref(py),
            replies: Mutex::new(HashMap::new()),
            unswept: Mutex::new(Vec::new()),
            create_task,
            call_soon,
            event_loop: event_loop.unbind(),
            jobs: Mutex::new(Vec::new()),
            scheduled: AtomicBool::new(false),
            tasks: Mutex::new(HashMap::new()),
            watched: Mutex::new(HashMap::new()),
            next_call: AtomicU64::new(0),
        });
        let _ = task_done.get().bridge.set(Arc::downgrade(&bridge));
        Ok(bridge)
    }

    /// The event loop.
    pub(crate) fn event_loop<'py>(&self, py: Python<'py>) -> &Bound<'py, PyAny> {
        self.event_loop.bind(py)
    }

    /// Queues `job` for the loop thread, waking the loop if no pump is pending. Callable from
    /// any thread, attached or not.
    fn submit(self: &Arc<Self>, job: Job) {
        lock(&self.jobs).push(job);
        if !self.scheduled.swap(true, Ordering::AcqRel) {
            // Once the interpreter exits, a loop is not woken from ferroloop's threads (they
            // must stay out of Python; see `runtime::python_pass`).
            if let Some(_pass) = python_pass() {
                Python::attach(|py| self.schedule_pump(py));
            }
        }
    }

    fn schedule_pump(self: &Arc<Self>, py: Python<'_>) {
        // The pump holds the bridge strongly: queued jobs must outlive every other owner (the
        // Rust future that queued the final result may be gone before the pump runs).
        let pump = Py::new(
            py,
            Pump {
                bridge: Arc::clone(self),
                ran: AtomicBool::new(false),
            },
        );
        let scheduled = pump.as_ref().map_err(|_| ()).and_then(|pump| {
            self.event_loop
                .bind(py)
                .call_method1(pyo3::intern!(py, "call_soon_threadsafe"), (pump,))
                .map_err(|_| ())
        });
        if scheduled.is_err() {
            // Dropped unrun, the pump would abandon the jobs itself (whenever the error's
            // traceback lets it go): done here, now.
            if let Ok(pump) = &pump {
                pump.get().ran.store(true, Ordering::Release);
            }
            self.abandon_jobs(py);
        }
    }

    /// Nothing will run the queued jobs (the loop is closed, or refused the pump): drops them,
    /// which drops their reply channels (their receivers see cancellation) and the futures
    /// waiting for a poll. Once the loop is closed, its running tasks are not held any more
    /// (see [`LoopBridge::release_tasks`]).
    fn abandon_jobs(&self, py: Python<'_>) {
        let orphaned = std::mem::take(&mut *lock(&self.jobs));
        self.scheduled.store(false, Ordering::Release);
        if self.loop_is_closed(py) {
            self.release_tasks(py);
        }
        // Dropping a job may queue others (a dropped call cancels its task): they come back
        // here, as the loop refuses their pump.
        drop(orphaned);
    }

    /// Whether the loop is closed (`loop.is_closed()`; not known closed if that fails).
    fn loop_is_closed(&self, py: Python<'_>) -> bool {
        self.event_loop
            .bind(py)
            .call_method0(pyo3::intern!(py, "is_closed"))
            .and_then(|closed| closed.is_truthy())
            .unwrap_or(false)
    }

    /// The loop is closed with tasks of calls still pending: asyncio neither cancels nor runs
    /// them any more, and they are garbage once nothing refers to them. The bridge held them
    /// (to cancel them), and each call's reply channel waits here for its task's end, which
    /// refers, through the call's turn or run, to the executor, its tools and so to this bridge:
    /// a cycle in Rust that the collector cannot see, which kept every such task, its coroutine
    /// and what it refers to, the call's channels and the bridge for the process's life. They
    /// are watched instead, as a cancelled task ferroloop gave up on: collected, a task answers
    /// its call (if anyone still waits for it) and frees its channel.
    fn release_tasks(&self, py: Python<'_>) {
        let tasks = std::mem::take(&mut *lock(&self.tasks));
        for (id, task) in tasks {
            self.watch(py, task.bind(py), id, Gone::LoopClosed);
        }
    }

    /// Raises `err` from a callback of the loop (which lets `SystemExit` and `KeyboardInterrupt`
    /// out of `run_forever`, like a task's).
    fn raise_on_loop(&self, py: Python<'_>, err: PyErr) {
        let raise = Reraise {
            err: Mutex::new(Some(err)),
        };
        let _ = self
            .event_loop
            .bind(py)
            .call_method1(pyo3::intern!(py, "call_soon_threadsafe"), (raise,));
    }

    /// Runs every queued job (on the loop thread), including jobs queued while it runs: they
    /// find `scheduled` still set and do not wake the loop again.
    fn drain(&self, py: Python<'_>) {
        loop {
            let jobs = std::mem::take(&mut *lock(&self.jobs));
            if jobs.is_empty() {
                self.queue_sweep(py);
                self.scheduled.store(false, Ordering::Release);
                // A job queued between the take and the store saw `scheduled` set and did not
                // wake the loop: run it now, unless a newer submit already scheduled a pump.
                if lock(&self.jobs).is_empty() || self.scheduled.swap(true, Ordering::AcqRel) {
                    return;
                }
                continue;
            }
            for job in jobs {
                job(py, self);
            }
        }
    }

    /// Runs `work` (on the loop thread, in a loop callback), then the jobs it queued, in this
    /// same callback: while it runs the bridge counts as draining, so completions that wake the
    /// executor queue its poll without waking the loop through its self-pipe. If a pump is
    /// already pending, the jobs are left to it.
    fn run_then_drain(&self, py: Python<'_>, work: impl FnOnce()) {
        let claimed = !self.scheduled.swap(true, Ordering::AcqRel);
        work();
        if claimed {
            self.drain(py);
        }
    }

    /// Queues a sweep of the tasks this drain started, behind their first steps (which
    /// `create_task` queued), so that it finds most of them finished.
    fn queue_sweep(&self, py: Python<'_>) {
        let started = std::mem::take(&mut *lock(&self.unswept));
        if started.is_empty() {
            return;
        }
        let sweep = Sweep {
            bridge: self.me.clone(),
            started: Mutex::new(Vec::new()),
        };
        let Ok(sweep) = Py::new(py, sweep) else {
            return self.await_all_done(py, started);
        };
        *lock(&sweep.get().started) = started;
        if self
            .call_soon
            .bind(py)
            .call1((sweep.clone_ref(py),))
            .is_err()
        {
            // The loop is closed: fall back to a done-callback per task.
            let started = std::mem::take(&mut *lock(&sweep.get().started));
            self.await_all_done(py, started);
        }
    }

    fn await_all_done(&self, py: Python<'_>, started: Vec<StartedTask>) {
        for StartedTask { id, task, reply } in started {
            self.await_done(py, task.bind(py), id, reply);
        }
    }

    /// Has the reply of a task that is still running sent by its done-callback.
    fn await_done(&self, py: Python<'_>, task: &Bound<'_, PyAny>, id: u64, reply: ReplyTx) {
        let key = task.as_ptr() as usize;
        lock(&self.replies).insert(key, (id, reply));
        let added = task.call_method1(
            pyo3::intern!(py, "add_done_callback"),
            (self.task_done.clone_ref(py),),
        );
        if added.is_err() {
            // Dropping the reply sender reads as cancellation; stop the task too.
            lock(&self.replies).remove(&key);
            lock(&self.tasks).remove(&id);
            let _ = task.call_method0(pyo3::intern!(py, "cancel"));
        }
    }

    /// Reports the finished tasks among `started` and has the others report when done.
    fn sweep(&self, py: Python<'_>, started: Vec<StartedTask>) {
        for StartedTask { id, task, reply } in started {
            let task = task.bind(py);
            let done = task
                .call_method0(pyo3::intern!(py, "done"))
                .and_then(|done| done.is_truthy())
                .unwrap_or(false);
            if done {
                lock(&self.tasks).remove(&id);
                self.unwatch(id);
                reply.send(task_outcome(py, task));
            } else {
                self.await_done(py, task, id, reply);
            }
        }
    }
}

/// `asyncio.get_running_loop`, looked up once.
static GET_RUNNING_LOOP: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();

/// The event loop running in this thread (asyncio's `RuntimeError` if none).
fn running_loop(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    GET_RUNNING_LOOP
        .get_or_try_init(py, || {
            py.import(pyo3::intern!(py, "asyncio"))?
                .getattr(pyo3::intern!(py, "get_running_loop"))
                .map(Bound::unbind)
        })?
        .bind(py)
        .call0()
}

/// A cached bridge: each object that runs work on an event loop (an executor, a client, an
/// agent) keeps the bridge of the loop it last served.
pub(crate) type BridgeSlot = Mutex<Option<Arc<LoopBridge>>>;

/// The bridge to the event loop running in this thread: the one in `slot` when it serves that
/// loop, otherwise a new one (stored in `slot`). A `RuntimeError` if no loop runs.
pub(crate) fn bridge_for_running_loop(
    py: Python<'_>,
    slot: &BridgeSlot,
) -> PyResult<Arc<LoopBridge>> {
    bridge_in_slot(py, slot, Rebind::RefuseWhileInUse)
}

/// The bridge to the event loop running in this thread, for an owner without tools (a client):
/// the one cached in `slot` when it serves that loop, otherwise a new one, cached instead. Each
/// request keeps the bridge it was started with, so loops in several threads may share the
/// owner. A `RuntimeError` if no loop runs.
pub(crate) fn cached_bridge_for_running_loop(
    py: Python<'_>,
    slot: &BridgeSlot,
) -> PyResult<Arc<LoopBridge>> {
    bridge_in_slot(py, slot, Rebind::Always)
}

/// When a slot holding another loop's bridge may take this loop's.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rebind {
    /// Whenever asked: each piece of work keeps its own bridge (a client's requests).
    Always,
    /// Not while that loop still runs and the bridge is in use: tools find their loop through
    /// the slot when they are called, not when their run started.
    RefuseWhileInUse,
}

fn bridge_in_slot(py: Python<'_>, slot: &BridgeSlot, rebind: Rebind) -> PyResult<Arc<LoopBridge>> {
    refuse_after_exit()?;
    let running = running_loop(py)?;
    let mut slot = lock(slot);
    if let Some(bridge) = slot.as_ref() {
        let bound = bridge.event_loop(py);
        if bound.is(&running) {
            return Ok(Arc::clone(bridge));
        }
        // Rebinding the slot while another thread's loop still has runs, turns or agent runs
        // (each holds the bridge) would send their later calls to this loop (they failed as
        // "cancelled" once this loop closed, or ran on the wrong loop). Refused, rather than
        // silently misrouted; a loop with nothing in flight may be replaced.
        if rebind == Rebind::RefuseWhileInUse
            && Arc::strong_count(bridge) > 1
            && bound
                .call_method0(pyo3::intern!(py, "is_running"))?
                .is_truthy()?
        {
            return Err(PyRuntimeError::new_err(
                "these tools are in use on an event loop running in another thread; \
                 use one ToolExecutor (and Agent) per event loop",
            ));
        }
    }
    let bridge = LoopBridge::for_running_loop(py)?;
    *slot = Some(Arc::clone(&bridge));
    Ok(bridge)
}

/// The callable the loop runs to drain a bridge's jobs (one per wake-up).
#[pyclass(frozen, module = "ferroloop._native")]
pub(crate) struct Pump {
    bridge: Arc<LoopBridge>,
    /// Called (or known not to be needed any more).
    ran: AtomicBool,
}

#[pymethods]
impl Pump {
    fn __call__(&self, py: Python<'_>) {
        self.ran.store(true, Ordering::Release);
        let Some(_pass) = loop_callback_pass() else {
            return;
        };
        self.bridge.drain(py);
    }
}

impl Drop for Pump {
    /// A pump dropped uncalled was dropped by its loop: `loop.close()` drops the callbacks
    /// still queued. The bridge's jobs would wait for it for good, and `scheduled` (still set)
    /// would keep every later job from waking the loop and learning it is closed.
    fn drop(&mut self) {
        if self.ran.load(Ordering::Acquire) {
            return;
        }
        let Some(_pass) = loop_callback_pass() else {
            return;
        };
        Python::attach(|py| {
            if self.bridge.loop_is_closed(py) {
                self.bridge.abandon_jobs(py);
            }
        });
    }
}

/// A loop callback that raises an exception caught on another thread.
#[pyclass(frozen, module = "ferroloop._native")]
pub(crate) struct Reraise {
    err: Mutex<Option<PyErr>>,
}

#[pymethods]
impl Reraise {
    fn __call__(&self) -> PyResult<()> {
        match lock(&self.err).take() {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }
}

/// How a Python call ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CallOutcome {
    /// It returned this value (a `str` becomes a JSON string; dicts and lists convert as JSON).
    Returned(Value),
    /// It raised: `"TypeName: message"`.
    Raised(String),
    /// Its task was cancelled (or the loop went away).
    Cancelled,
}

/// Where a task's outcome goes: a plain channel, or a tool call's answer channel (which records
/// the outcome's order against the call's cancellation as it is sent).
pub(crate) enum ReplyTx {
    Plain(oneshot::Sender<CallOutcome>),
    Answer(AnswerSender<CallOutcome>),
}

impl ReplyTx {
    /// Sends `outcome` (on the loop thread, where the task ended).
    fn send(self, outcome: CallOutcome) {
        // The receiver is gone when the call was dropped: nobody waits for the outcome.
        let _ = match self {
            Self::Plain(tx) => tx.send(outcome),
            Self::Answer(tx) => tx.send(outcome),
        };
    }
}

/// The receiving end of a [`ReplyTx`].
enum ReplyRx {
    Plain(oneshot::Receiver<CallOutcome>),
    Answer(AnswerReceiver<CallOutcome>),
}

/// A Python `async def` function called with JSON arguments and run as a task on the bridge's
/// loop. Await it for the [`CallOutcome`]; drop it to cancel the task.
pub(crate) struct PyCall {
    bridge: Arc<LoopBridge>,
    id: u64,
    reply: ReplyRx,
    finished: bool,
}

impl PyCall {
    /// Queues `function(*args)` to start as a task on the loop. `args` are converted on the loop
    /// thread; `extra` (e.g. a context object) is appended as a last argument. With `context`
    /// (a `contextvars.Context`), the task runs in a copy of it.
    pub(crate) fn start(
        bridge: &Arc<LoopBridge>,
        function: Arc<Py<PyAny>>,
        args: Vec<Value>,
        extra: Option<ExtraArg>,
        context: Option<Arc<Py<PyAny>>>,
    ) -> Self {
        let (tx, reply) = oneshot::channel();
        Self::start_with(
            bridge,
            function,
            args,
            extra,
            context,
            ReplyTx::Plain(tx),
            ReplyRx::Plain(reply),
        )
    }

    /// As [`start`](Self::start), for a tool call: the task's outcome is sent through the call's
    /// answer channel (`ToolContext::answer_channel`), which records its order against the
    /// call's cancellation when it is sent (on the loop thread) and reports it to the executor
    /// when this future returns it.
    pub(crate) fn start_answering(
        bridge: &Arc<LoopBridge>,
        function: Arc<Py<PyAny>>,
        args: Vec<Value>,
        extra: Option<ExtraArg>,
        context: Option<Arc<Py<PyAny>>>,
        (tx, reply): (AnswerSender<CallOutcome>, AnswerReceiver<CallOutcome>),
    ) -> Self {
        Self::start_with(
            bridge,
            function,
            args,
            extra,
            context,
            ReplyTx::Answer(tx),
            ReplyRx::Answer(reply),
        )
    }

    fn start_with(
        bridge: &Arc<LoopBridge>,
        function: Arc<Py<PyAny>>,
        args: Vec<Value>,
        extra: Option<ExtraArg>,
        context: Option<Arc<Py<PyAny>>>,
        tx: ReplyTx,
        reply: ReplyRx,
    ) -> Self {
        let id = bridge.next_call.fetch_add(1, Ordering::Relaxed);
        bridge.submit(Box::new(move |py, bridge| {
            start_task(py, bridge, id, &function, &args, extra, context, tx);
        }));
        Self {
            bridge: Arc::clone(bridge),
            id,
            reply,
            finished: false,
        }
    }
}

/// `function(*args)`, called in a copy of `context` when given (`context.copy().run(...)`).
fn call_in_context<'py>(
    py: Python<'py>,
    function: &Py<PyAny>,
    args: Bound<'py, pyo3::types::PyTuple>,
    context: Option<&Py<PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let Some(context) = context else {
        return function.bind(py).call1(args);
    };
    let copy = context.bind(py).call_method0(pyo3::intern!(py, "copy"))?;
    let mut run_args = Vec::with_capacity(args.len() + 1);
    run_args.push(function.bind(py).clone());
    run_args.extend(args.iter());
    copy.call_method1(
        pyo3::intern!(py, "run"),
        pyo3::types::PyTuple::new(py, run_args)?,
    )
}

/// Starts `function(*args)` as a task whose done-callback sends its outcome on `tx`; with
/// `context`, the task runs in a copy of it.
#[allow(clippy::too_many_arguments)]
fn start_task(
    py: Python<'_>,
    bridge: &LoopBridge,
    id: u64,
    function: &Py<PyAny>,
    args: &[Value],
    extra: Option<ExtraArg>,
    context: Option<Arc<Py<PyAny>>>,
    tx: ReplyTx,
) {
    let started = (|| -> PyResult<Bound<'_, PyAny>> {
        // An `async def` function's call only makes its coroutine (no code of it runs): it is
        // the task that runs in the context.
        let awaitable = function.bind(py).call1(call_args(py, args, extra)?)?;
        let create_task = bridge.create_task.bind(py);
        let created = match &context {
            // `context.run(create_task, coroutine)`: the task copies the current context, so
            // it runs in a copy of the caller's, its own (no copy made here: `run` only enters
            // the context while `create_task` runs, on this thread).
            Some(context) => {
                let context = context.bind(py);
                let run = pyo3::intern!(py, "run");
                context
                    .call_method1(run, (create_task, &awaitable))
                    // Entered already (never by ferroloop): from a copy of it.
                    .or_else(|_| {
                        context
                            .call_method0(pyo3::intern!(py, "copy"))?
                            .call_method1(run, (create_task, &awaitable))
                    })
            }
            None => create_task.call1((&awaitable,)),
        };
        match created {
            Ok(task) => Ok(task),
            // Not a coroutine (a future, or an object with `__await__`).
            Err(_) => py
                .import(pyo3::intern!(py, "asyncio"))?
                .call_method1(pyo3::intern!(py, "ensure_future"), (awaitable,)),
        }
    })();
    match started {
        Ok(task) => {
            lock(&bridge.tasks).insert(id, task.clone().unbind());
            lock(&bridge.unswept).push(StartedTask {
                id,
                task: task.unbind(),
                reply: tx,
            });
        }
        Err(err) => {
            tx.send(CallOutcome::Raised(describe_tool_error(py, &err)));
        }
    }
}

impl PyCall {
    /// Cancels the Python task now (it sees `asyncio.CancelledError` and may clean up); the
    /// call still completes, normally with [`CallOutcome::Cancelled`].
    pub(crate) fn cancel_task(&self) {
        if !self.finished {
            let id = self.id;
            self.bridge
                .submit(Box::new(move |py, bridge| cancel_task(py, bridge, id)));
        }
    }
}

/// Cancels the task of call `id` if it still runs, and watches for its collection (the bridge
/// no longer holds it).
fn cancel_task(py: Python<'_>, bridge: &LoopBridge, id: u64) {
    let task = lock(&bridge.tasks).remove(&id);
    if let Some(task) = task {
        let task = task.bind(py);
        let _ = task.call_method0(pyo3::intern!(py, "cancel"));
        bridge.watch(py, task, id, Gone::Cancelled);
    }
}

impl LoopBridge {
    /// Has the call `id` answered once its (cancelled, or left pending by its closed loop)
    /// `task` is garbage-collected unfinished.
    ///
    /// The executor keeps a call that ignored its cancellation past its cleanup grace waiting
    /// for its answer on a runtime task of its own (for its cleanup). A task awaiting a future
    /// nobody else refers to can never finish: it is collected (the loop holds tasks weakly),
    /// its done-callback never runs, and without this its call's runtime task, its reply
    /// channel here and the bridge (its loop) stayed for the process's life, one set per call.
    /// Not watched (that call then stays as it was) if the task takes no weak reference.
    ///
    /// Such a task is not logged as "Task was destroyed but it is pending!" when it is
    /// collected (asyncio's `_log_destroy_pending`, which `run_until_complete` clears for the
    /// task it makes): ferroloop cancelled it (or could not, its loop being closed) and gave
    /// up on it, and its call's result says what happened. Holding it instead would keep every
    /// such task, and what it refers to, for the loop's life.
    fn watch(&self, py: Python<'_>, task: &Bound<'_, PyAny>, id: u64, gone: Gone) {
        // Another loop's task type may not have the attribute: it then logs as before.
        let _ = task.setattr(pyo3::intern!(py, "_log_destroy_pending"), false);
        let collected = TaskCollected {
            bridge: self.me.clone(),
            id,
            key: task.as_ptr() as usize,
            gone,
        };
        let Ok(collected) = Py::new(py, collected) else {
            return;
        };
        if let Ok(weak) = pyo3::types::PyWeakrefReference::new_with(task, collected) {
            // A weak reference calls back only while it is alive itself: the bridge holds it.
            let replaced = lock(&self.watched).insert(id, weak.into_any().unbind());
            drop(replaced);
        }
    }

    /// Stops watching call `id`'s task (it ended).
    fn unwatch(&self, id: u64) {
        let watched = lock(&self.watched).remove(&id);
        // Dropped outside the lock (its deallocation runs no callback, but need not be inside).
        drop(watched);
    }
}

/// The callback of the weak reference to a cancelled call's task (see [`LoopBridge::watch`]):
/// the task was collected unfinished, so it will never answer; its call is answered with an
/// error, which comes after the call's cancellation, so the call's result stays its timeout or
/// cancellation.
#[pyclass(frozen, module = "ferroloop._native")]
pub(crate) struct TaskCollected {
    bridge: Weak<LoopBridge>,
    id: u64,
    /// The task's address: its key in `replies` (not reused before this callback returns, as
    /// the task is freed only after its weak references' callbacks ran).
    key: usize,
    gone: Gone,
}

/// Why the bridge stopped holding a task it watches.
#[derive(Clone, Copy)]
enum Gone {
    /// Its call was cancelled (timeout, cancellation, a dropped call).
    Cancelled,
    /// Its loop was closed while it ran.
    LoopClosed,
}

#[pymethods]
impl TaskCollected {
    fn __call__(&self, _reference: &Bound<'_, PyAny>) {
        // Called wherever the collection happened (any thread, or during the interpreter's
        // exit); a panic must not become an exception of an unrelated collection.
        let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let Some(_pass) = loop_callback_pass() else {
                return;
            };
            let Some(bridge) = self.bridge.upgrade() else {
                return;
            };
            bridge.unwatch(self.id);
            let reply = {
                let mut replies = lock(&bridge.replies);
                match replies.get(&self.key) {
                    Some((id, _)) if *id == self.id => replies.remove(&self.key),
                    _ => None,
                }
            };
            if let Some((_, tx)) = reply {
                tx.send(CallOutcome::Raised(
                    match self.gone {
                        Gone::Cancelled => {
                            "the tool's task was garbage-collected before it finished (it \
                             ignored its cancellation and awaited something nothing could \
                             complete any more)"
                        }
                        Gone::LoopClosed => {
                            "the tool's task was garbage-collected before it finished (its \
                             event loop was closed while it ran)"
                        }
                    }
                    .to_owned(),
                ));
            }
        }));
    }
}

impl Future for PyCall {
    type Output = CallOutcome;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<CallOutcome> {
        // Not sent (the loop went away): cancelled.
        let sent = match &mut self.reply {
            ReplyRx::Plain(reply) => Pin::new(reply).poll(cx).map(Result::ok),
            ReplyRx::Answer(reply) => Pin::new(reply).poll(cx).map(Result::ok),
        };
        match sent {
            Poll::Ready(sent) => {
                self.finished = true;
                Poll::Ready(sent.unwrap_or(CallOutcome::Cancelled))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for PyCall {
    fn drop(&mut self) {
        if !self.finished {
            let id = self.id;
            self.bridge
                .submit(Box::new(move |py, bridge| cancel_task(py, bridge, id)));
        }
    }
}

/// Calls a plain (synchronous) Python function on the runtime's blocking pool, never on the event
/// loop, in a copy of `context` when given (as `asyncio.to_thread` does). It cannot be
/// interrupted; dropping the future abandons its result.
///
/// With `answer` (a tool call's answer channel, `ToolContext::answer_channel`), the outcome is
/// sent through it on the worker thread as soon as the function returned, which records its
/// order against the call's cancellation then; the channel's receiver reports that order to the
/// executor as this future returns the outcome.
///
/// `SystemExit` and `KeyboardInterrupt` are raised again on `bridge`'s loop (as asyncio does for
/// a task's): they end the loop instead of becoming an error result only.
pub(crate) async fn call_blocking(
    function: Arc<Py<PyAny>>,
    args: Vec<Value>,
    extra: Option<ExtraArg>,
    context: Option<Arc<Py<PyAny>>>,
    bridge: Option<Arc<LoopBridge>>,
    answer: Option<(AnswerSender<CallOutcome>, AnswerReceiver<CallOutcome>)>,
) -> CallOutcome {
    let (tx, reply) = answer.unzip();
    let worker = tokio::task::spawn_blocking(move || {
        let outcome = call_plain(function, args, extra, context, bridge);
        match tx {
            // Given back when nobody waits any more.
            Some(tx) => tx.send(outcome).err(),
            None => Some(outcome),
        }
    });
    if let Some(reply) = reply
        && let Ok(outcome) = reply.await
    {
        return outcome;
    }
    // Not sent through the channel: none given, or the worker panicked.
    match worker.await {
        Ok(Some(outcome)) => outcome,
        Ok(None) => CallOutcome::Cancelled,
        Err(err) if err.is_panic() => CallOutcome::Raised(format!(
            "internal error in ferroloop: {}",
            panic_message(err.into_panic().as_ref())
        )),
        Err(_) => CallOutcome::Cancelled,
    }
}

/// Calls a plain Python function (on the calling thread; see [`call_blocking`]).
fn call_plain(
    function: Arc<Py<PyAny>>,
    args: Vec<Value>,
    extra: Option<ExtraArg>,
    context: Option<Arc<Py<PyAny>>>,
    bridge: Option<Arc<LoopBridge>>,
) -> CallOutcome {
    let Some(_pass) = python_pass() else {
        return CallOutcome::Raised("the interpreter is exiting".to_owned());
    };
    Python::attach(|py| {
        let called = call_args(py, &args, extra)
            .and_then(|args| call_in_context(py, &function, args, context.as_deref()));
        match called {
            Ok(value) if is_awaitable(&value) => {
                // Closed, so that it does not warn "never awaited" as it is collected.
                if let Ok(close) = value.getattr(pyo3::intern!(py, "close")) {
                    let _ = close.call0();
                }
                CallOutcome::Raised(
                    "the tool's plain function returned a coroutine (an awaitable) instead \
                     of a result: register an `async def` function (a wrapper that hides it \
                     runs on a worker thread)"
                        .to_owned(),
                )
            }
            Ok(value) => match result_to_value(&value) {
                Ok(value) => CallOutcome::Returned(value),
                Err(message) => CallOutcome::Raised(message),
            },
            Err(err) => {
                let outcome = CallOutcome::Raised(describe_tool_error(py, &err));
                if let Some(bridge) = bridge
                    && (err.is_instance_of::<PySystemExit>(py)
                        || err.is_instance_of::<PyKeyboardInterrupt>(py))
                {
                    bridge.raise_on_loop(py, err);
                }
                outcome
            }
        }
    })
}

/// Whether `value` is awaitable (a coroutine, a future, ...).
fn is_awaitable(value: &Bound<'_, PyAny>) -> bool {
    value
        .get_type()
        .hasattr(pyo3::intern!(value.py(), "__await__"))
        .unwrap_or(false)
}

/// The done-callback of every task of one loop: converts the task's outcome on the loop
/// thread and sends it to the waiting Rust future.
#[pyclass(frozen, module = "ferroloop._native")]
pub(crate) struct TaskDone {
    bridge: OnceLock<Weak<LoopBridge>>,
}

#[pymethods]
impl TaskDone {
    fn __call__(&self, py: Python<'_>, task: &Bound<'_, PyAny>) {
        let Some(_pass) = loop_callback_pass() else {
            return;
        };
        let Some(bridge) = self.bridge.get().and_then(Weak::upgrade) else {
            return;
        };
        let reply = lock(&bridge.replies).remove(&(task.as_ptr() as usize));
        let Some((id, tx)) = reply else {
            return;
        };
        bridge.run_then_drain(py, || {
            lock(&bridge.tasks).remove(&id);
            bridge.unwatch(id);
            tx.send(task_outcome(py, task));
        });
    }
}

/// The callback that sweeps the tasks started by one drain, queued after their first steps.
#[pyclass(frozen, module = "ferroloop._native")]
pub(crate) struct Sweep {
    bridge: Weak<LoopBridge>,
    started: Mutex<Vec<StartedTask>>,
}

#[pymethods]
impl Sweep {
    fn __call__(&self, py: Python<'_>) {
        let Some(_pass) = loop_callback_pass() else {
            return;
        };
        let started = std::mem::take(&mut *lock(&self.started));
        let Some(bridge) = self.bridge.upgrade() else {
            return;
        };
        bridge.run_then_drain(py, || bridge.sweep(py, started));
    }
}

/// The outcome of a finished task.
fn task_outcome(py: Python<'_>, task: &Bound<'_, PyAny>) -> CallOutcome {
    match task.call_method0(pyo3::intern!(py, "result")) {
        Ok(value) => match result_to_value(&value) {
            Ok(value) => CallOutcome::Returned(value),
            Err(message) => CallOutcome::Raised(message),
        },
        Err(_)
            if task
                .call_method0(pyo3::intern!(py, "cancelled"))
                .and_then(|c| c.is_truthy())
                .unwrap_or(false) =>
        {
            CallOutcome::Cancelled
        }
        Err(err) => CallOutcome::Raised(describe_tool_error(py, &err)),
    }
}

/// A Python value given to ferroloop to send to a provider (a request, `extra`, a message, a
/// tool's schema) as JSON: a non-finite float is refused (it would be sent as `null`).
pub(crate) fn py_to_value(value: &Bound<'_, PyAny>) -> Result<Value, String> {
    crate::value::to_value(value)
        .map_err(|err| format!("the value cannot be converted to JSON: {err}"))
}

/// A Python value that is not sent as given (a tool input handed to the executor, a tool's
/// progress) as JSON: a non-finite float is `null`, as in a tool's result.
pub(crate) fn py_to_value_nan_as_null(value: &Bound<'_, PyAny>) -> Result<Value, String> {
    crate::value::to_value_nan_as_null(value)
        .map_err(|err| format!("the value cannot be converted to JSON: {err}"))
}

/// A tool's return value as JSON; the message says what a tool may return. A non-finite float
/// is `null` (documented: the result is the value's JSON rendering).
fn result_to_value(value: &Bound<'_, PyAny>) -> Result<Value, String> {
    let mut converted = crate::value::to_value_nan_as_null(value).map_err(|err| {
        format!("the result cannot be converted to JSON (return a str, a list of content blocks or a dict): {err}")
    })?;
    // A non-finite float alone (or as a result's `content`) is the text `null`, its JSON
    // rendering, as nested in a result and as Node's tools send NaN (JSON.stringify's): it
    // became `None`'s empty text, a different answer in each binding.
    if is_non_finite(value) {
        converted = Value::String("null".to_owned());
    } else if let Value::Object(map) = &mut converted
        && let Ok(dict) = value.cast::<pyo3::types::PyDict>()
        && let Ok(Some(content)) = dict.get_item(pyo3::intern!(value.py(), "content"))
        && is_non_finite(&content)
    {
        map.insert("content".to_owned(), Value::String("null".to_owned()));
    }
    Ok(converted)
}

/// Whether `value` is a `float` (or a subclass) that JSON has no number for.
fn is_non_finite(value: &Bound<'_, PyAny>) -> bool {
    value
        .cast::<pyo3::types::PyFloat>()
        .is_ok_and(|float| !float.value().is_finite())
}

/// `logging.getLogger("ferroloop")`, looked up once.
static LOGGER: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();

/// `"TypeName: message"` for the exception a tool function raised (its result's text), the
/// exception with its traceback and cause logged to the `ferroloop` logger at DEBUG level: the
/// model reads the text, the developer gets the traceback.
pub(crate) fn describe_tool_error(py: Python<'_>, err: &PyErr) -> String {
    let described = describe_error(py, err);
    let logged = (|| -> PyResult<()> {
        let logger = LOGGER.get_or_try_init(py, || {
            py.import(pyo3::intern!(py, "logging"))?
                .call_method1(pyo3::intern!(py, "getLogger"), ("ferroloop",))
                .map(Bound::unbind)
        })?;
        let logger = logger.bind(py);
        // logging.DEBUG
        if !logger
            .call_method1(pyo3::intern!(py, "isEnabledFor"), (10,))?
            .is_truthy()?
        {
            return Ok(());
        }
        let exc_info = (err.get_type(py), err.value(py), err.traceback(py));
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item(pyo3::intern!(py, "exc_info"), exc_info)?;
        logger.call_method(
            pyo3::intern!(py, "debug"),
            ("a Python tool raised %s", &described),
            Some(&kwargs),
        )?;
        Ok(())
    })();
    // Logging must not change the outcome.
    drop(logged);
    described
}

/// `"TypeName: message"` for a Python exception.
pub(crate) fn describe_error(py: Python<'_>, err: &PyErr) -> String {
    let name = err
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".to_owned());
    let message = err
        .value(py)
        .str()
        .map(|s| s.to_string())
        .unwrap_or_default();
    if message.is_empty() {
        name
    } else {
        format!("{name}: {message}")
    }
}

/// A Rust future driven on the event loop's thread: polled by a job of the bridge whenever its
/// waker fires, inside the runtime's context (timers, `spawn_blocking`). Completions of Python
/// tasks wake it on the loop thread itself, so a batch of tool calls costs no thread switch.
struct Driver {
    bridge: Arc<LoopBridge>,
    future: Mutex<Option<Pin<Box<dyn Future<Output = ()> + Send>>>>,
    /// A poll job is queued.
    queued: AtomicBool,
}

impl std::task::Wake for Driver {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.queued.swap(true, Ordering::AcqRel) {
            let poll = PollJob(Some(Arc::clone(self)));
            self.bridge.submit(Box::new(move |_, _| poll.run()));
        }
    }
}

/// The job that polls a [`Driver`]. Dropped unrun (its loop is closed: nothing will poll the
/// future again, nor could it resolve its asyncio future), it drops the driver's future, as a
/// cancellation does: that future refers to its asyncio future, whose done-callback refers to
/// the driver, a cycle in Rust that kept both (and the run or turn the future awaits, with its
/// calls) alive for good.
struct PollJob(Option<Arc<Driver>>);

impl PollJob {
    fn run(mut self) {
        if let Some(driver) = self.0.take() {
            driver.poll_once();
        }
    }
}

impl Drop for PollJob {
    fn drop(&mut self) {
        if let Some(driver) = self.0.take() {
            driver.cancel();
        }
    }
}

impl Driver {
    fn poll_once(self: &Arc<Self>) {
        self.queued.store(false, Ordering::Release);
        let mut slot = lock(&self.future);
        let Some(future) = slot.as_mut() else {
            return;
        };
        let waker = std::task::Waker::from(Arc::clone(self));
        let mut cx = Context::from_waker(&waker);
        let _entered = runtime().ok().map(tokio::runtime::Runtime::enter);
        // The future resolves its asyncio future itself, panics included (`catch_unwind`
        // inside); this guard only keeps a panic from unwinding into the event loop.
        let polled = std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(&mut cx)));
        if !matches!(polled, Ok(Poll::Pending)) {
            *slot = None;
        }
    }

    /// Drops the future (the awaiter was cancelled): everything it awaits is cancelled.
    fn cancel(&self) {
        let future = lock(&self.future).take();
        drop(future);
    }
}

/// Drives `future` on the bridge's loop and returns an asyncio future that receives its
/// output, converted by `convert` on the loop thread. Cancelling the asyncio future drops the
/// Rust future (and with it any [`PyCall`] it awaits, whose Python tasks are cancelled). A
/// panic inside `future` sets `ferroloop.InternalError`.
pub(crate) fn into_awaitable<'py, T, F, C>(
    py: Python<'py>,
    bridge: &Arc<LoopBridge>,
    future: F,
    convert: C,
) -> PyResult<Bound<'py, PyAny>>
where
    T: Send + 'static,
    F: Future<Output = PyResult<T>> + Send + 'static,
    C: FnOnce(Python<'_>, T) -> PyResult<Py<PyAny>> + Send + 'static,
{
    into_awaitable_keeping(py, bridge, future, convert, drop)
}

/// [`into_awaitable`] for outputs that must not be lost: when the asyncio future was cancelled
/// after `future` had produced its output (an event taken from a channel, a turn's results) but
/// before the loop delivered it, the output goes to `unclaimed` instead of being dropped, so the
/// next call can return it.
pub(crate) fn into_awaitable_keeping<'py, T, F, C, K>(
    py: Python<'py>,
    bridge: &Arc<LoopBridge>,
    future: F,
    convert: C,
    unclaimed: K,
) -> PyResult<Bound<'py, PyAny>>
where
    T: Send + 'static,
    F: Future<Output = PyResult<T>> + Send + 'static,
    C: FnOnce(Python<'_>, T) -> PyResult<Py<PyAny>> + Send + 'static,
    K: FnOnce(T) + Send + 'static,
{
    refuse_after_exit()?;
    // A future of another loop would fail in asyncio with "got Future attached to a different
    // loop", naming no ferroloop object: say which mistake it is.
    let running = running_loop(py)?;
    if !bridge.event_loop(py).is(&running) {
        return Err(PyRuntimeError::new_err(
            "this ferroloop object (a stream, a run or a turn) was started on another event loop \
             (closed, or running in another thread): use it on the loop that started it",
        ));
    }
    runtime()?; // started before the first poll needs its context
    let py_future = bridge
        .event_loop(py)
        .call_method0(pyo3::intern!(py, "create_future"))?;
    let target = py_future.clone().unbind();
    let resolver = Arc::clone(bridge);
    let task = async move {
        let output = AssertUnwindSafe(future).catch_unwind().await;
        resolver.submit(Box::new(move |py, _| {
            let target = target.bind(py);
            let done = target
                .call_method0(pyo3::intern!(py, "done"))
                .and_then(|d| d.is_truthy())
                .unwrap_or(true);
            if done {
                // Cancelled meanwhile: the output is kept for the next call.
                if let Ok(Ok(value)) = output {
                    unclaimed(value);
                }
                return;
            }
            let result = match output {
                Ok(Ok(value)) => convert(py, value),
                Ok(Err(err)) => Err(err),
                Err(payload) => Err(internal_error(py, &panic_message(payload.as_ref()))),
            };
            let _ = match result {
                Ok(value) => target.call_method1(pyo3::intern!(py, "set_result"), (value,)),
                Err(err) => {
                    target.call_method1(pyo3::intern!(py, "set_exception"), (err.value(py),))
                }
            };
        }));
    };
    let driver = Arc::new(Driver {
        bridge: Arc::clone(bridge),
        future: Mutex::new(Some(Box::pin(task))),
        queued: AtomicBool::new(false),
    });
    std::task::Wake::wake_by_ref(&driver);
    let abort = AbortOnCancel { driver };
    py_future.call_method1(pyo3::intern!(py, "add_done_callback"), (abort,))?;
    Ok(py_future)
}

/// The asyncio future's done-callback: drops the Rust future when the awaiter was cancelled.
#[pyclass(frozen, module = "ferroloop._native")]
struct AbortOnCancel {
    driver: Arc<Driver>,
}

#[pymethods]
impl AbortOnCancel {
    fn __call__(&self, py: Python<'_>, future: &Bound<'_, PyAny>) {
        let Some(_pass) = loop_callback_pass() else {
            return;
        };
        let cancelled = future
            .call_method0(pyo3::intern!(py, "cancelled"))
            .and_then(|c| c.is_truthy())
            .unwrap_or(false);
        if cancelled {
            self.driver.cancel();
        }
    }
}
