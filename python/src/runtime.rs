//! The tokio runtime that drives the core's futures for Python callers.

use std::sync::OnceLock;

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
