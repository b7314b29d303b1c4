//! `SseParser` and `SseEvent`: the WHATWG event-stream parser of `ferroloop::sse`.

use bytes::Bytes;
use ferroloop::Utf8Bytes;
use ferroloop::sse::{SseConfig, SseEvent, SseItem, SseParser};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::marker::Ungil;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList, PyMemoryView, PyString};

use crate::args::non_negative_opt;
use crate::errors::shield;

/// Chunks at least this large are parsed with the interpreter released (`py.detach`): below it,
/// saving and restoring the thread state costs more than other threads could gain.
const DETACH_THRESHOLD: usize = 64 * 1024;

/// Runs `work` on a chunk of `len` bytes, with the interpreter released when the chunk is large
/// enough for that to pay (see [`DETACH_THRESHOLD`]).
pub(crate) fn detach_if_large<T: Ungil>(
    py: Python<'_>,
    len: usize,
    work: impl Ungil + FnOnce() -> T,
) -> T {
    if len >= DETACH_THRESHOLD {
        py.detach(work)
    } else {
        work()
    }
}

/// Copies a bytes-like chunk (`bytes`, `bytearray`, `memoryview`, any buffer) into `Bytes`.
///
/// Copying while attached is what makes parsing without the interpreter sound: a `bytearray`
/// could be resized by another thread once the interpreter is released.
pub(crate) fn chunk_bytes(chunk: &Bound<'_, PyAny>) -> PyResult<Bytes> {
    if let Ok(bytes) = chunk.cast::<PyBytes>() {
        return Ok(Bytes::copy_from_slice(bytes.as_bytes()));
    }
    if let Ok(array) = chunk.cast::<PyByteArray>() {
        return Ok(Bytes::from(array.to_vec()));
    }
    if chunk.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(
            "expected bytes, got str (encode the text to UTF-8 first)",
        ));
    }
    // Any other buffer (memoryview, array, mmap). `memoryview()` accepts exactly the objects
    // that export a buffer (`bytes(42)` would silently make 42 zero bytes).
    let py = chunk.py();
    let view = py.get_type::<PyMemoryView>().call1((chunk,))?;
    let copied = view.call_method0("tobytes")?;
    let copied = copied.cast::<PyBytes>()?;
    Ok(Bytes::copy_from_slice(copied.as_bytes()))
}

/// One dispatched Server-Sent Event.
///
/// `event` is the event type (`"message"` when the stream named none), `data` the data lines
/// joined by `"\n"`, `id` the last event id in force when it was dispatched (`""` when none).
#[pyclass(module = "ferroloop._native", name = "SseEvent", frozen)]
pub(crate) struct PySseEvent {
    event: Utf8Bytes,
    data: Utf8Bytes,
    id: Utf8Bytes,
}

impl From<SseEvent> for PySseEvent {
    fn from(event: SseEvent) -> Self {
        Self {
            event: event.event_type,
            data: event.data,
            id: event.id,
        }
    }
}

#[pymethods]
impl PySseEvent {
    /// An event (for tests and for comparing with parsed ones).
    #[new]
    #[pyo3(signature = (data, event = "message", id = ""))]
    fn new(data: &str, event: &str, id: &str) -> Self {
        Self {
            event: Utf8Bytes::copy_from_str(event),
            data: Utf8Bytes::copy_from_str(data),
            id: Utf8Bytes::copy_from_str(id),
        }
    }

    /// The event type (`"message"` when the stream named none).
    #[getter]
    fn event(&self) -> &str {
        &self.event
    }

    /// The data: the event's `data` lines joined by `"\n"`.
    #[getter]
    fn data(&self) -> &str {
        &self.data
    }

    /// The last event id in force when the event was dispatched (`""` when none).
    #[getter]
    fn id(&self) -> &str {
        &self.id
    }

    fn __repr__(&self) -> String {
        format!(
            "SseEvent(event={:?}, data={:?}, id={:?})",
            self.event.as_str(),
            self.data.as_str(),
            self.id.as_str()
        )
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        match other.cast::<PySseEvent>() {
            Ok(other) => {
                let other = other.get();
                self.event == other.event && self.data == other.data && self.id == other.id
            }
            Err(_) => false,
        }
    }

    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (self.event.as_str(), self.data.as_str(), self.id.as_str()).hash(&mut hasher);
        hasher.finish()
    }
}

/// A WHATWG event-stream parser: feed byte chunks split anywhere, get the completed events.
///
/// Each `feed` returns every event the chunk completed as one list (the Python/Rust boundary is
/// crossed once per chunk, not once per event). `retry` holds the last valid `retry` field.
#[pyclass(module = "ferroloop._native", name = "SseParser")]
pub(crate) struct PySseParser {
    /// Boxed: Python allocates objects with 16-byte alignment only; core types may need more.
    parser: Box<SseParser>,
    /// Reused between calls, so a feed allocates no growing vector.
    completed: Vec<SseEvent>,
}

impl PySseParser {
    /// Parses `chunk` into `self.completed`.
    fn parse_chunk(&mut self, chunk: Bytes) {
        let completed = &mut self.completed;
        self.parser.feed_with(chunk, |item| {
            if let SseItem::Event(event) = item {
                completed.push(event.to_owned());
            }
        });
    }
}

#[pymethods]
impl PySseParser {
    /// A parser. `max_event_bytes` caps a pending event's size (a larger one is dropped and
    /// counted in `dropped_events`); `None`, the default, means no limit.
    #[new]
    #[pyo3(signature = (*, max_event_bytes = None))]
    fn new(py: Python<'_>, max_event_bytes: Option<i128>) -> PyResult<Self> {
        shield(py, "SseParser.__init__", || {
            let max_event_bytes: Option<usize> =
                non_negative_opt("max_event_bytes", max_event_bytes)?;
            if max_event_bytes == Some(0) {
                return Err(PyValueError::new_err("max_event_bytes must be positive"));
            }
            Ok(Self {
                parser: Box::new(SseParser::with_config(
                    SseConfig::default().max_event_bytes(max_event_bytes),
                )),
                completed: Vec::new(),
            })
        })
    }

    /// Feeds a chunk (`bytes`, `bytearray` or `memoryview`, split anywhere) and returns the
    /// events it completed, in order.
    fn feed<'py>(
        &mut self,
        py: Python<'py>,
        chunk: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        shield(py, "SseParser.feed", || {
            let chunk = chunk_bytes(chunk)?;
            detach_if_large(py, chunk.len(), || self.parse_chunk(chunk));
            PyList::new(py, self.completed.drain(..).map(PySseEvent::from))
        })
    }

    /// Ends the stream. An unterminated event (no blank line after it) is discarded, as the
    /// specification requires; returns whether anything was discarded. The parser may then be
    /// fed a new stream (a reconnection); `last_event_id` and `retry` are kept.
    fn finish(&mut self, py: Python<'_>) -> PyResult<bool> {
        shield(py, "SseParser.finish", || Ok(self.parser.finish()))
    }

    /// The reconnection time of the last valid `retry` field, in milliseconds (`None` if none).
    #[getter]
    fn retry(&self) -> Option<u64> {
        self.parser.retry()
    }

    /// The last event id (persists across events; an empty `id` field resets it).
    #[getter]
    fn last_event_id(&self) -> &str {
        self.parser.last_event_id()
    }

    /// Events dropped because they grew past `max_event_bytes`.
    #[getter]
    fn dropped_events(&self) -> u64 {
        self.parser.dropped_events()
    }

    /// Total bytes fed so far.
    #[getter]
    fn bytes_fed(&self) -> u64 {
        self.parser.bytes_fed()
    }

    fn __repr__(&self) -> String {
        format!(
            "SseParser(bytes_fed={}, last_event_id={:?}, retry={:?})",
            self.parser.bytes_fed(),
            self.parser.last_event_id(),
            self.parser.retry()
        )
    }
}

/// Adds the SSE classes to the module.
pub(crate) fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<PySseEvent>()?;
    module.add_class::<PySseParser>()?;
    Ok(())
}
