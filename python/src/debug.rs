//! Test hooks (underscore names, not part of the public API): a deliberate panic, a
//! concurrent call of Python functions through the asyncio bridge, and a count of the runtime's
//! live tasks.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::future::join_all;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use serde_json::{Value, json};

use crate::bridge::{CallOutcome, LoopBridge, PyCall, call_blocking, into_awaitable, py_to_value};
use crate::errors::shield;

/// Panics inside an entry point, on purpose: proves that a Rust panic reaches Python as
/// `ferroloop.InternalError`.
#[pyfunction]
#[pyo3(signature = (message = "deliberate panic"))]
fn _debug_panic(py: Python<'_>, message: &str) -> PyResult<()> {
    shield(py, "_debug_panic", || panic!("{message}"))
}

/// The same, with the panic raised while the interpreter is released (inside `py.detach`).
#[pyfunction]
#[pyo3(signature = (message = "deliberate panic"))]
fn _debug_panic_detached(py: Python<'_>, message: &str) -> PyResult<()> {
    shield(py, "_debug_panic_detached", || {
        py.detach(|| panic!("{message}"))
    })
}

/// An awaitable whose Rust future panics: the awaiting code gets `ferroloop.InternalError`.
#[pyfunction]
fn _debug_panic_async(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    shield(py, "_debug_panic_async", || {
        let bridge = LoopBridge::for_running_loop(py)?;
        into_awaitable(
            py,
            &bridge,
            async { panic!("deliberate panic in a future") },
            |py, ()| Ok(py.None()),
        )
    })
}

type BoxedCall = Pin<Box<dyn Future<Output = CallOutcome> + Send>>;

/// Calls `functions[i](inputs[i])` concurrently from Rust (async functions as tasks on the
/// running loop, plain ones on the blocking pool when `blocking`) and returns their outcomes in
/// order: the value, `{"error": "Type: message"}` or `{"cancelled": True}`.
#[pyfunction]
#[pyo3(signature = (functions, inputs, *, blocking = false))]
fn _debug_gather<'py>(
    py: Python<'py>,
    functions: Vec<Py<PyAny>>,
    inputs: Vec<Bound<'py, PyAny>>,
    blocking: bool,
) -> PyResult<Bound<'py, PyAny>> {
    shield(py, "_debug_gather", || {
        if functions.len() != inputs.len() {
            return Err(PyValueError::new_err(
                "functions and inputs differ in length",
            ));
        }
        let bridge = LoopBridge::for_running_loop(py)?;
        let mut calls: Vec<BoxedCall> = Vec::with_capacity(functions.len());
        for (function, input) in functions.into_iter().zip(inputs) {
            let input = py_to_value(&input).map_err(PyValueError::new_err)?;
            let function = Arc::new(function);
            calls.push(if blocking {
                Box::pin(call_blocking(function, vec![input], None, None, None, None))
            } else {
                Box::pin(PyCall::start(&bridge, function, vec![input], None, None))
            });
        }
        into_awaitable(
            py,
            &bridge,
            async move { Ok(join_all(calls).await) },
            |py, outcomes| {
                let values: Vec<Value> = outcomes
                    .into_iter()
                    .map(|outcome| match outcome {
                        CallOutcome::Returned(value) => value,
                        CallOutcome::Raised(message) => json!({ "error": message }),
                        CallOutcome::Cancelled => json!({ "cancelled": true }),
                    })
                    .collect();
                Ok(pythonize::pythonize(py, &values)?.unbind())
            },
        )
    })
}

/// Arms a panic at the next call of the entry point `entry` (`"Class.method"` as named in the
/// binding's sources, e.g. `"SseParser.feed"`), or disarms with `None`. One-shot.
#[pyfunction]
#[pyo3(signature = (entry))]
fn _debug_arm_panic(entry: Option<String>) {
    crate::errors::arm_panic(entry);
}

/// How many tasks are alive on ferroloop's tokio runtime (spawned and not yet finished): the
/// leak tests count what a run, a stream or a turn leaves behind.
#[pyfunction]
fn _debug_alive_tasks(py: Python<'_>) -> PyResult<usize> {
    shield(py, "_debug_alive_tasks", || {
        Ok(crate::runtime::runtime()?.metrics().num_alive_tasks())
    })
}

/// Adds the test hooks to the module.
pub(crate) fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(_debug_panic, module)?)?;
    module.add_function(wrap_pyfunction!(_debug_panic_detached, module)?)?;
    module.add_function(wrap_pyfunction!(_debug_panic_async, module)?)?;
    module.add_function(wrap_pyfunction!(_debug_gather, module)?)?;
    module.add_function(wrap_pyfunction!(_debug_arm_panic, module)?)?;
    module.add_function(wrap_pyfunction!(_debug_alive_tasks, module)?)?;
    Ok(())
}
