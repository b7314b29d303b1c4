//! `StreamDecoder`: provider stream decoding and accumulation (`ferroloop::decode`).

use bytes::Bytes;
use ferroloop::decode::{DecodeError, DecodeEvent, Provider, ProviderErrorKind, StreamDecoder};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use serde_json::Value;

use crate::args::{bool_arg_opt, str_arg_opt};
use crate::client::provider_of;
use crate::errors::{exclusive, ferroloop_error, shared, shield};
use crate::events::event_to_py;
use crate::sse::{chunk_bytes, detach_if_large};
use crate::value::to_py;

/// The class name in [`crate::errors::exclusive`]'s error.
const DECODER: &str = "StreamDecoder";

/// Decodes a provider's raw SSE stream into typed events and accumulates the message.
///
/// Not shared across threads: a call while another thread is in one (a large `feed` releases
/// the interpreter) raises `InvalidStateError`; a refused `feed` did not consume its chunk.
#[pyclass(module = "ferroloop._native", name = "StreamDecoder")]
pub(crate) struct PyStreamDecoder {
    /// Boxed: the decoder is over-aligned (SIMD state) and Python allocates objects with only
    /// 16-byte alignment, so it must not live inline in the Python object.
    decoder: Box<StreamDecoder>,
    provider: Provider,
    /// Reused between calls.
    completed: Vec<DecodeEvent>,
}

impl PyStreamDecoder {
    fn decode_chunk(&mut self, chunk: Bytes) -> Result<(), DecodeError> {
        self.decoder.feed_into(chunk, &mut self.completed)
    }

    /// Decodes a chunk read in place: only what an unfinished event needs is copied.
    fn decode_borrowed(&mut self, chunk: &[u8]) -> Result<(), DecodeError> {
        self.decoder.feed_borrowed_into(chunk, &mut self.completed)
    }

    /// Decodes a chunk of any bytes-like type. `bytes` is immutable, so it is read in place,
    /// even with the interpreter released; anything else (a `bytearray` another thread could
    /// resize, a `memoryview`) is copied first.
    fn decode_any(
        &mut self,
        py: Python<'_>,
        chunk: &Bound<'_, PyAny>,
    ) -> PyResult<Result<(), DecodeError>> {
        if let Ok(bytes) = chunk.cast::<PyBytes>() {
            let bytes = bytes.as_bytes();
            return Ok(detach_if_large(py, bytes.len(), || {
                self.decode_borrowed(bytes)
            }));
        }
        let chunk = chunk_bytes(chunk)?;
        Ok(detach_if_large(py, chunk.len(), || {
            self.decode_chunk(chunk)
        }))
    }

    /// The completed events as a list of dicts (each with a `"type"`), draining them.
    fn take_events<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let events = self
            .completed
            .iter()
            .map(|event| event_to_py(py, event))
            .collect::<PyResult<Vec<_>>>();
        self.completed.clear();
        PyList::new(py, events?)
    }
}

#[pymethods]
impl PyStreamDecoder {
    /// A decoder for `provider`: `"anthropic"`, `"openai-chat"` or `"openai-responses"`. With
    /// `events=False` it mostly accumulates: `feed` returns only the tool-call events
    /// (`tool_use_ready`, `tool_use_invalid`, `tool_use_truncated`), with no per-delta work.
    /// `provider` defaults to `None`, which means `"anthropic"`, and `events` to `None`, which
    /// means `True`, as `None` is the default of Python's other optional arguments and `null` is
    /// absent in Node's options.
    #[new]
    #[pyo3(signature = (provider = None, *, events = None))]
    fn new(
        py: Python<'_>,
        provider: Option<&Bound<'_, PyAny>>,
        events: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        shield(py, "StreamDecoder.__init__", || {
            let provider = provider_of(str_arg_opt("provider", provider)?.as_deref())?;
            let events = bool_arg_opt("events", events)?;
            let mut decoder = StreamDecoder::for_provider(provider);
            if events == Some(false) {
                use ferroloop::decode::EventDecoder as _;
                decoder.decoder_mut().set_record_events(false);
            }
            Ok(Self {
                decoder: Box::new(decoder),
                provider,
                completed: Vec::new(),
            })
        })
    }

    /// Feeds raw bytes (split anywhere) and returns the typed events they completed, as dicts
    /// with a `"type"` key. A mid-stream provider error raises the `APIError` subclass of its
    /// class (`DecodeError::provider_kind`: `OverloadedError`, `RateLimitError`, `NotFoundError`,
    /// ...; `APIError` for none), a broken
    /// protocol `ProtocolError`; the events completed before the failing one are on the
    /// exception's `events` attribute. After `finish()` it raises `InvalidStateError` (a new
    /// stream needs a new decoder).
    fn feed<'py>(
        slf: &Bound<'py, Self>,
        chunk: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let py = slf.py();
        shield(py, "StreamDecoder.feed", || {
            let mut this = exclusive(slf, DECODER)?;
            let result = this.decode_any(py, chunk)?;
            let events = this.take_events(py)?;
            match result {
                Ok(()) => Ok(events),
                Err(err) => {
                    let err = decode_error(py, &err);
                    err.value(py).setattr("events", events)?;
                    Err(err)
                }
            }
        })
    }

    /// A snapshot of the message accumulated so far, in the provider's non-streaming response
    /// shape (`None` before the stream's first event).
    fn message<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        shield(py, "StreamDecoder.message", || {
            to_py(py, &shared(slf, DECODER)?.decoder.message())
        })
    }

    /// Whether the stream reached its end marker (`message_stop`, `[DONE]`, `response.completed`).
    #[getter]
    fn is_complete(slf: &Bound<'_, Self>) -> PyResult<bool> {
        let py = slf.py();
        shield(py, "StreamDecoder.is_complete", || {
            Ok(shared(slf, DECODER)?.decoder.is_complete())
        })
    }

    /// The provider name.
    #[getter]
    fn provider(slf: &Bound<'_, Self>) -> PyResult<&'static str> {
        Ok(shared(slf, DECODER)?.provider.name())
    }

    /// Ends the input and returns the final message. Raises `StreamTruncatedError` (with
    /// `partial_message`) if the stream stopped before its end, or the stream's provider or
    /// protocol error (the first error a feed raised). A second call answers the same (the
    /// core's rule, `StreamDecoder::finish`).
    fn finish<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        shield(py, "StreamDecoder.finish", || {
            match exclusive(slf, DECODER)?.decoder.finish() {
                Ok(message) => to_py(py, &message),
                Err(err) => Err(decode_error(py, &err)),
            }
        })
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let provider = shared(slf, DECODER)?.provider.name();
        Ok(format!("StreamDecoder(provider={provider:?})"))
    }
}

/// The Python exception for a decoder error.
fn decode_error(py: Python<'_>, err: &DecodeError) -> PyErr {
    let message = err.to_string();
    let converted = |value: &Value| to_py(py, value).unwrap_or_else(|_| py.None().into_bound(py));
    match err {
        DecodeError::InvalidJson { .. } | DecodeError::Protocol(_) => {
            ferroloop_error(py, "ProtocolError", &message, &[])
        }
        // A misuse, not the provider's doing: `invalid_state`, as in Node, C and the core.
        DecodeError::Finished => ferroloop_error(py, "InvalidStateError", &message, &[]),
        DecodeError::Truncated { partial, .. } => ferroloop_error(
            py,
            "StreamTruncatedError",
            &message,
            &[("partial_message", converted(partial))],
        ),
        DecodeError::Provider {
            error_type, raw, ..
        } => {
            let kind = err.provider_kind();
            let code = kind.map_or("provider_error", ProviderErrorKind::code);
            ferroloop_error(
                py,
                api_error_class(kind),
                &message,
                &[
                    ("code", pyo3::types::PyString::new(py, code).into_any()),
                    (
                        "error_type",
                        pyo3::types::PyString::new(py, error_type).into_any(),
                    ),
                    ("body", converted(raw)),
                ],
            )
        }
    }
}

/// The `APIError` subclass of a provider error event's class (the core's
/// [`ProviderErrorKind`], the same for every binding).
fn api_error_class(kind: Option<ProviderErrorKind>) -> &'static str {
    match kind {
        Some(ProviderErrorKind::Overloaded) => "OverloadedError",
        Some(ProviderErrorKind::RateLimited) => "RateLimitError",
        Some(ProviderErrorKind::QuotaExceeded) => "QuotaExceededError",
        Some(ProviderErrorKind::PromptTooLong) => "PromptTooLongError",
        Some(ProviderErrorKind::Authentication) => "AuthenticationError",
        Some(ProviderErrorKind::Permission) => "PermissionDeniedError",
        Some(ProviderErrorKind::NotFound) => "NotFoundError",
        Some(ProviderErrorKind::InvalidRequest) => "InvalidRequestError",
        Some(ProviderErrorKind::Server) => "ServerError",
        Some(ProviderErrorKind::Other) | None => "APIError",
    }
}

/// Adds the decoder class to the module.
pub(crate) fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<PyStreamDecoder>()?;
    Ok(())
}
