//! `SseParser` and `SseEvent`: the WHATWG event-stream parser of `ferroloop::sse`.

use bytes::Bytes;
use ferroloop::Utf8Bytes;
use ferroloop::sse::{SseConfig, SseEventRef, SseItem, SseParser};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::marker::Ungil;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyByteArray, PyBytes, PyList, PyMemoryView, PyString};

use crate::args::count_arg_opt;
use crate::errors::{exclusive, shared, shield};

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
    // `tobytes()` is the one copy: the `bytes` it makes is shared, not copied again.
    let py = chunk.py();
    let view = py.get_type::<PyMemoryView>().call1((chunk,))?;
    let copied = view
        .call_method0(pyo3::intern!(py, "tobytes"))?
        .cast_into::<PyBytes>()?;
    Ok(Bytes::from_owner(PyBackedBytes::from(copied)))
}

/// One dispatched Server-Sent Event.
///
/// `event` is the event type (`"message"` when the stream named none), `data` the data lines
/// joined by `"\n"`, `id` the last event id in force when it was dispatched (`""` when none).
/// A kept event keeps only its own text alive, not the chunk it was read from.
#[pyclass(module = "ferroloop._native", name = "SseEvent", frozen)]
pub(crate) struct PySseEvent {
    event: Utf8Bytes,
    data: Utf8Bytes,
    id: Utf8Bytes,
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

/// The class name in [`crate::errors::exclusive`]'s error.
const PARSER: &str = "SseParser";

/// A WHATWG event-stream parser: feed byte chunks split anywhere, get the completed events.
///
/// Each `feed` returns every event the chunk completed as one list (the Python/Rust boundary is
/// crossed once per chunk, not once per event). `retry` holds the last valid `retry` field.
///
/// Not shared across threads: a call while another thread is in one (a large `feed` releases
/// the interpreter) raises `InvalidStateError`; a refused `feed` did not consume its chunk.
#[pyclass(module = "ferroloop._native", name = "SseParser")]
pub(crate) struct PySseParser {
    /// Boxed: Python allocates objects with 16-byte alignment only; core types may need more.
    parser: Box<SseParser>,
    /// Reused between calls, so a feed allocates no growing vector.
    completed: Vec<PySseEvent>,
    /// Owned copies of the last event type and id given to an event: the next event with the
    /// same one shares it instead of copying it again (a stream repeats a few types).
    last_type: Utf8Bytes,
    last_id: Utf8Bytes,
}

/// `text`, owned without pinning the buffer it lies in: `last` (updated) when it is the same.
fn owned_text(text: &str, last: &mut Utf8Bytes) -> Utf8Bytes {
    if text.is_empty() {
        return Utf8Bytes::new();
    }
    if last.as_str() != text {
        *last = Utf8Bytes::copy_from_str(text);
    }
    last.clone()
}

impl PySseParser {
    /// Parses `chunk` into `self.completed`.
    fn parse_chunk(&mut self, chunk: Bytes) {
        let Self {
            parser,
            completed,
            last_type,
            last_id,
        } = self;
        let chunk_len = chunk.len();
        parser.feed_with(chunk, |item| {
            if let SseItem::Event(event) = item {
                completed.push(owned_event(&event, chunk_len, last_type, last_id));
            }
        });
    }
}

/// An event that keeps only its own bytes alive, not the chunk it was read from.
///
/// The core shares a field with the input chunk when it can (a refcounted slice): a kept event
/// then pinned the whole chunk, and a 4-byte event read with 100 MB of comments kept 100 MB.
/// The data is shared only when it is most of the chunk (the copy would cost as much as what
/// it frees); otherwise it is copied, as are the type and the id (through `last_type` and
/// `last_id`, so a repeated one costs no allocation).
fn owned_event(
    event: &SseEventRef<'_>,
    chunk_len: usize,
    last_type: &mut Utf8Bytes,
    last_id: &mut Utf8Bytes,
) -> PySseEvent {
    let data = event.data();
    let data = if event.is_data_borrowed() && data.len() >= chunk_len / 2 {
        event.data_shared()
    } else {
        Utf8Bytes::copy_from_str(data)
    };
    let event_type = match event.event_type() {
        "message" => Utf8Bytes::from_static("message"),
        other => owned_text(other, last_type),
    };
    PySseEvent {
        event: event_type,
        data,
        id: owned_text(event.id(), last_id),
    }
}

#[pymethods]
impl PySseParser {
    /// A parser. `max_event_bytes` caps a pending event's size (a larger one is dropped and
    /// counted in `dropped_events`); `None`, the default, means no limit.
    #[new]
    #[pyo3(signature = (*, max_event_bytes = None))]
    fn new(py: Python<'_>, max_event_bytes: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        shield(py, "SseParser.__init__", || {
            let max_event_bytes: Option<usize> = count_arg_opt("max_event_bytes", max_event_bytes)?;
            if max_event_bytes == Some(0) {
                return Err(PyValueError::new_err("max_event_bytes must be positive"));
            }
            Ok(Self {
                parser: Box::new(SseParser::with_config(
                    SseConfig::default().max_event_bytes(max_event_bytes),
                )),
                completed: Vec::new(),
                last_type: Utf8Bytes::new(),
                last_id: Utf8Bytes::new(),
            })
        })
    }

    /// Feeds a chunk (`bytes`, `bytearray` or `memoryview`, split anywhere) and returns the
    /// events it completed, in order.
    fn feed<'py>(
        slf: &Bound<'py, Self>,
        chunk: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let py = slf.py();
        shield(py, "SseParser.feed", || {
            // Taken before the chunk is read: refused, the feed consumed nothing.
            let mut this = exclusive(slf, PARSER)?;
            let chunk = chunk_bytes(chunk)?;
            // The parser itself, not the `PyRefMut` (which holds the interpreter token).
            let parser = &mut *this;
            detach_if_large(py, chunk.len(), || parser.parse_chunk(chunk));
            PyList::new(py, this.completed.drain(..))
        })
    }

    /// Ends the stream. An unterminated event (no blank line after it) is discarded, as the
    /// specification requires; returns whether anything was discarded. The parser may then be
    /// fed a new stream (a reconnection); `last_event_id` and `retry` are kept.
    fn finish(slf: &Bound<'_, Self>) -> PyResult<bool> {
        let py = slf.py();
        shield(py, "SseParser.finish", || {
            Ok(exclusive(slf, PARSER)?.parser.finish())
        })
    }

    /// The reconnection time of the last valid `retry` field, in milliseconds (`None` if none).
    #[getter]
    fn retry(slf: &Bound<'_, Self>) -> PyResult<Option<u64>> {
        Ok(shared(slf, PARSER)?.parser.retry())
    }

    /// The last event id: what a reconnection sends as `Last-Event-ID`. An `id` field takes
    /// effect at the blank line that ends its event (also one with no data, which yields no
    /// event); an event cut off by `finish` never changes it. An empty `id` field resets it.
    #[getter]
    fn last_event_id(slf: &Bound<'_, Self>) -> PyResult<String> {
        Ok(shared(slf, PARSER)?.parser.last_event_id().to_owned())
    }

    /// Events dropped because they grew past `max_event_bytes`.
    #[getter]
    fn dropped_events(slf: &Bound<'_, Self>) -> PyResult<u64> {
        Ok(shared(slf, PARSER)?.parser.dropped_events())
    }

    /// Total bytes fed so far.
    #[getter]
    fn bytes_fed(slf: &Bound<'_, Self>) -> PyResult<u64> {
        Ok(shared(slf, PARSER)?.parser.bytes_fed())
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let this = shared(slf, PARSER)?;
        Ok(format!(
            "SseParser(bytes_fed={}, last_event_id={:?}, retry={:?})",
            this.parser.bytes_fed(),
            this.parser.last_event_id(),
            this.parser.retry()
        ))
    }
}

/// Adds the SSE classes to the module.
pub(crate) fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<PySseEvent>()?;
    module.add_class::<PySseParser>()?;
    Ok(())
}
