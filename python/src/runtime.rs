//! The tokio runtime that drives the core's futures for Python callers.

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use pyo3::PyResult;
use pyo3::exceptions::PyRuntimeError;
use tokio::runtime::{Builder, Runtime};

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// The process-wide runtime, built on first use: a few worker threads (the work done on them is
/// bookkeeping; Python code runs on the caller's event loop or on the blocking pool).
pub(crate) fn runtime() -> PyResult<&'static Runtime> {
    if let Some(runtime) = RUNTIME.get() {
        return Ok(runtime);
    }
    let workers = std::thread::available_parallelism()
        .map(|n| n.get().min(2))
        .unwrap_or(1);
    let built = Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("ferroloop-worker")
        .enable_all()
        .build()
        .map_err(|err| PyRuntimeError::new_err(format!("cannot start the tokio runtime: {err}")))?;
    // Two threads may race to build it; the loser's runtime is dropped unused.
    Ok(RUNTIME.get_or_init(|| built))
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
