//! The exception boundary: core errors and Rust panics become the Python exceptions defined in
//! `ferroloop/_errors.py`, never a crash and never a bare `PanicException`.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyModule};
use pyo3::{PyClass, PyRef, PyRefMut};

/// The Python module that defines the exception hierarchy.
const ERRORS_MODULE: &str = "ferroloop._errors";

static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// A `ferroloop` exception of class `class` (a name defined in `ferroloop._errors`) carrying
/// `message` and the keyword attributes `attrs` (e.g. `status`, `partial_message`).
///
/// Falls back to `RuntimeError` when the Python package itself is broken (the extension module
/// imported without its package), so an error is never lost.
pub(crate) fn ferroloop_error(
    py: Python<'_>,
    class: &str,
    message: &str,
    attrs: &[(&str, Bound<'_, PyAny>)],
) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let module = ERRORS.get_or_try_init(py, || {
            PyModule::import(py, ERRORS_MODULE).map(Bound::unbind)
        })?;
        let cls = module.bind(py).getattr(class)?;
        let kwargs = PyDict::new(py);
        for (key, value) in attrs {
            kwargs.set_item(key, value)?;
        }
        let instance = cls.call((message,), Some(&kwargs))?;
        Ok(PyErr::from_value(instance))
    };
    build().unwrap_or_else(|import_error| {
        PyRuntimeError::new_err(format!(
            "{class}: {message} (could not raise the ferroloop exception: {import_error})"
        ))
    })
}

/// Runs the body of the entry point named `entry` (`"Class.method"` or a function name) with
/// panics caught: a panic becomes `ferroloop.InternalError` carrying the panic message, instead
/// of pyo3's `PanicException` (a `BaseException` that `except Exception` does not catch).
pub(crate) fn shield<T>(
    py: Python<'_>,
    entry: &'static str,
    body: impl FnOnce() -> PyResult<T>,
) -> PyResult<T> {
    let guarded = || {
        trip_armed_panic(entry);
        body()
    };
    match catch_unwind(AssertUnwindSafe(guarded)) {
        Ok(result) => result,
        Err(payload) => Err(internal_error(py, &panic_message(payload.as_ref()))),
    }
}

/// Whether a test armed a panic (checked first: one relaxed load per call otherwise).
static PANIC_ARMED: AtomicBool = AtomicBool::new(false);
/// The entry point whose next call panics (a test hook, `_debug_arm_panic`).
static PANIC_ENTRY: Mutex<Option<String>> = Mutex::new(None);

/// Arms a panic at the next call of entry point `entry` (one-shot), or disarms with `None`.
pub(crate) fn arm_panic(entry: Option<String>) {
    let mut armed = PANIC_ENTRY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    PANIC_ARMED.store(entry.is_some(), Ordering::Release);
    *armed = entry;
}

/// Panics if a test armed a panic at `entry` (and disarms it).
fn trip_armed_panic(entry: &str) {
    if !PANIC_ARMED.load(Ordering::Acquire) {
        return;
    }
    let mut armed = PANIC_ENTRY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if armed.as_deref() == Some(entry) {
        *armed = None;
        PANIC_ARMED.store(false, Ordering::Release);
        drop(armed);
        panic!("armed test panic at {entry}");
    }
}

/// `ferroloop.InternalError` for a Rust panic with message `detail`.
pub(crate) fn internal_error(py: Python<'_>, detail: &str) -> PyErr {
    ferroloop_error(
        py,
        "InternalError",
        &format!("internal error in ferroloop (a bug; please report it): {detail}"),
        &[],
    )
}

/// The text of a panic payload.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    ferroloop::exec::panic_message(payload).to_owned()
}

/// `InvalidStateError` for a call on a `class` object that another thread is using: a method
/// that releases the interpreter (a large `feed`, an estimate) holds the object meanwhile, and
/// these objects are not shared across threads. It replaces pyo3's bare
/// `RuntimeError: Already mutably borrowed`; the refused call changed nothing.
fn in_use_error(py: Python<'_>, class: &str) -> PyErr {
    ferroloop_error(
        py,
        "InvalidStateError",
        &format!(
            "this {class} is in use by another thread: {class} objects are not shared \
             across threads (use one per thread, or a lock around every call); this call did \
             nothing"
        ),
        &[],
    )
}

/// The object for a method that changes it, or [`in_use_error`] when another thread holds it.
pub(crate) fn exclusive<'py, T: PyClass<Frozen = pyo3::pyclass::boolean_struct::False>>(
    slf: &Bound<'py, T>,
    class: &str,
) -> PyResult<PyRefMut<'py, T>> {
    slf.try_borrow_mut()
        .map_err(|_| in_use_error(slf.py(), class))
}

/// The object for a method that reads it, or [`in_use_error`] when another thread is changing
/// it.
pub(crate) fn shared<'py, T: PyClass>(slf: &Bound<'py, T>, class: &str) -> PyResult<PyRef<'py, T>> {
    slf.try_borrow().map_err(|_| in_use_error(slf.py(), class))
}
