//! The tokio runtime that drives the core's futures for Python callers.

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::thread::ThreadId;

use pyo3::PyResult;
use pyo3::exceptions::PyRuntimeError;
use tokio::runtime::{Builder, Runtime};

/// The runtime: a leaked `Box<Runtime>` (never freed), null until first use, and again in a
/// child process after `os.fork()` (whose copy has none of the parent's threads).
static RUNTIME: AtomicPtr<Runtime> = AtomicPtr::new(std::ptr::null_mut());

/// The stack of the runtime's threads: Linux's default for a main thread.
const WORKER_STACK_BYTES: usize = 8 << 20;

/// The process-wide runtime, built on first use: a few worker threads (the work done on them is
/// bookkeeping; Python code runs on the caller's event loop or on the blocking pool).
pub(crate) fn runtime() -> PyResult<&'static Runtime> {
    let current = RUNTIME.load(Ordering::Acquire);
    if !current.is_null() {
        // SAFETY: every pointer stored in RUNTIME comes from `Box::leak` below and is never
        // freed (not even when replaced after a fork), so it is valid for 'static.
        return Ok(unsafe { &*current });
    }
    let workers = std::thread::available_parallelism()
        .map(|n| n.get().min(2))
        .unwrap_or(1);
    let built = Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("ferroloop-worker")
        // Plain (sync) tools run on the blocking threads, where their results and progress
        // reports are converted from Python: up to `value::MAX_DEPTH` levels of recursion (512 once),
        // which overflowed tokio's default 2 MiB in a debug build. The main thread's size
        // (reserved, not committed, until used).
        .thread_stack_size(WORKER_STACK_BYTES)
        .enable_all()
        .build()
        .map_err(|err| PyRuntimeError::new_err(format!("cannot start the tokio runtime: {err}")))?;
    let built: *mut Runtime = Box::leak(Box::new(built));
    match RUNTIME.compare_exchange(
        std::ptr::null_mut(),
        built,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        // SAFETY: `built` was just leaked (valid for 'static).
        Ok(_) => Ok(unsafe { &*built }),
        Err(winner) => {
            // Two threads raced to build it: the loser's runtime is shut down unused.
            // SAFETY: `built` was leaked above and never published, so this is its only owner.
            drop(unsafe { Box::from_raw(built) });
            // SAFETY: `winner` is a published pointer (leaked, never freed).
            Ok(unsafe { &*winner })
        }
    }
}

/// The id of the process that runs this module now (changes in a child after `os.fork()`).
pub(crate) fn process_id() -> u32 {
    std::process::id()
}

/// Registered with `os.register_at_fork(after_in_child=...)`: the child's copy of the runtime
/// has no threads (its tasks would never run, a request or a plain tool would hang), so the
/// next use builds a new one (the old one is leaked); nor do the parent's threads the exit
/// handler would wait for exist in the child.
#[pyo3::pyfunction]
pub(crate) fn _after_fork_in_child() {
    RUNTIME.store(std::ptr::null_mut(), Ordering::Release);
    // Only this thread exists in the child (a plain tool may fork): its passes are all there is.
    INSIDE_PYTHON.store(PASSES_HERE.with(std::cell::Cell::get), Ordering::SeqCst);
}

/// A task spawned on the runtime, aborted when this handle is dropped (the awaiting Python
/// future was cancelled, or its owner went away).
pub(crate) struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

/// Runs `future` on the runtime's worker threads (off the interpreter), aborted when the returned
/// handle is dropped. The handle resolves to the output, or to the panic message.
pub(crate) fn spawn<F>(future: F) -> PyResult<AbortOnDrop<F::Output>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    Ok(AbortOnDrop(runtime()?.spawn(future)))
}

impl<T> AbortOnDrop<T> {
    /// Aborts the task now.
    pub(crate) fn abort(&self) {
        self.0.abort();
    }
}

impl<T> Future for AbortOnDrop<T> {
    type Output = Result<T, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx).map(|joined| {
            joined.map_err(|err| {
                if err.is_panic() {
                    crate::errors::panic_message(err.into_panic().as_ref())
                } else {
                    "the task was cancelled".to_owned()
                }
            })
        })
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

// --- Interpreter exit ----------------------------------------------------------------------
//
// When the interpreter finalizes, a thread that (re)takes the interpreter lock is ended with
// `pthread_exit` (CPython 3.9 to 3.13): on a thread with Rust frames that unwinds through Rust
// destructors, which touch Python objects without the interpreter (an abort or a segfault). A
// ferroloop worker running a plain tool (or waking a loop) must therefore not be inside Python
// when finalization starts, and no Rust code may be entered from a daemon thread afterwards.
// `_at_exit` (an `atexit` handler, registered at import) closes the gate and waits for the
// threads inside to leave. After that, ferroloop's threads never enter Python again, Rust
// callbacks run only on the main thread (which finalization does not end), and new awaitables
// are refused with a `RuntimeError` (an application's later `atexit` handler gets an error,
// not a loop that is never woken).

static GATE_CLOSED: AtomicBool = AtomicBool::new(false);
static INSIDE_PYTHON: AtomicUsize = AtomicUsize::new(0);
static MAIN_THREAD: OnceLock<ThreadId> = OnceLock::new();

/// Permission to run Python code from ferroloop's threads or callbacks; held while doing so.
pub(crate) struct PythonPass(());

std::thread_local! {
    /// The passes this thread holds (after a fork, the child's only thread is the forking one:
    /// its passes are the child's whole count).
    static PASSES_HERE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

impl PythonPass {
    fn take() -> Self {
        INSIDE_PYTHON.fetch_add(1, Ordering::SeqCst);
        PASSES_HERE.with(|passes| passes.set(passes.get() + 1));
        Self(())
    }
}

impl Drop for PythonPass {
    fn drop(&mut self) {
        PASSES_HERE.with(|passes| passes.set(passes.get().saturating_sub(1)));
        INSIDE_PYTHON.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A pass to run Python code from one of ferroloop's threads, or `None` once the interpreter
/// exits.
pub(crate) fn python_pass() -> Option<PythonPass> {
    let pass = PythonPass::take();
    if GATE_CLOSED.load(Ordering::SeqCst) {
        return None;
    }
    Some(pass)
}

/// The pass of a callback of an event loop into Rust: refused on a thread other than the main
/// one once the interpreter exits (finalization ends such threads; it must not find them in
/// Rust code).
pub(crate) fn loop_callback_pass() -> Option<PythonPass> {
    let pass = PythonPass::take();
    if GATE_CLOSED.load(Ordering::SeqCst) && MAIN_THREAD.get() != Some(&std::thread::current().id())
    {
        return None;
    }
    Some(pass)
}

/// A `RuntimeError` once the interpreter exits (no new work is started then).
pub(crate) fn refuse_after_exit() -> PyResult<()> {
    if GATE_CLOSED.load(Ordering::SeqCst) {
        return Err(PyRuntimeError::new_err(
            "the interpreter is exiting: ferroloop starts no new work",
        ));
    }
    Ok(())
}

/// The `atexit` handler: closes the gate, then waits (the interpreter released) until no
/// ferroloop thread runs Python code. A plain tool still running is waited for, like the
/// workers of `asyncio.to_thread`; Ctrl-C stops the wait.
#[pyo3::pyfunction]
pub(crate) fn _at_exit(py: pyo3::Python<'_>) -> PyResult<()> {
    let _ = MAIN_THREAD.set(std::thread::current().id());
    GATE_CLOSED.store(true, Ordering::SeqCst);
    while INSIDE_PYTHON.load(Ordering::SeqCst) > 0 {
        py.detach(|| std::thread::sleep(std::time::Duration::from_millis(2)));
        py.check_signals()?;
    }
    Ok(())
}
