//! `Client` and its streams: the core's streaming HTTP client (`ferroloop::client`) for Python.
//!
//! Requests run as tasks on the tokio runtime (the connection, the SSE parser, the decoder and
//! the retries all work without the interpreter); the event loop only receives batches of
//! finished events, converted to dicts on its thread. The Python package
//! (`ferroloop/_client.py`) adds `async with` and async iteration.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ferroloop::client::{
    Client, ClientConfig, ClientError, MessageItem, RequestMetrics, RetryEvent,
};
use ferroloop::decode::Provider;
use futures_util::StreamExt;
use pyo3::IntoPyObjectExt;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::args::{count_arg_opt, float_arg_opt, float_text};
use crate::bridge::{BridgeSlot, cached_bridge_for_running_loop, into_awaitable, py_to_value};
use crate::errors::{ferroloop_error, internal_error, shield};
use crate::events::event_to_py;
use crate::runtime::{AbortOnDrop, spawn};
use crate::value::to_py;

/// Items buffered between a request's task and a slow consumer (then the task waits).
const STREAM_BUFFER: usize = 256;
/// Items handed to Python per await, at most.
const BATCH_MAX: usize = 512;

/// Seconds (a float) as a duration.
pub(crate) fn seconds(name: &str, value: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(value).map_err(|_| {
        PyValueError::new_err(format!("invalid {name}: {} seconds", float_text(value)))
    })
}

/// Seconds (a float) as a client timeout: [`seconds`], and above 0. A zero timeout would fail
/// or race every request, where 0 most likely meant "none" (the core's client refuses it too,
/// without the Python name). The executor's zero timeouts are the core's to refuse, reported
/// with [`zero_timeout`].
pub(crate) fn timeout_seconds(name: &str, value: f64) -> PyResult<Duration> {
    let timeout = seconds(name, value)?;
    if timeout.is_zero() {
        return Err(zero_timeout(name, value));
    }
    Ok(timeout)
}

/// The error of a timeout of 0 seconds (or one that rounds to 0), as the user gave it.
pub(crate) fn zero_timeout(name: &str, value: f64) -> PyErr {
    // A value above 0 that rounds to 0 says so, as Node's does: "must be above 0, got 1e-10"
    // read as a contradiction.
    let rounded = if value > 0.0 {
        ", which is under a nanosecond"
    } else {
        ""
    };
    PyValueError::new_err(format!(
        "{name} must be above 0 seconds, got {}{rounded}: nothing could finish within it \
         (leave it unset for the default; a very long timeout is none)",
        float_text(value)
    ))
}

/// The provider named by a `provider` argument: `None` is the default, Anthropic (as Node's
/// `provider: null` and an absent C `provider` key are).
pub(crate) fn provider_of(name: Option<&str>) -> PyResult<Provider> {
    let Some(name) = name else {
        return Ok(Provider::Anthropic);
    };
    Provider::from_name(name).ok_or_else(|| {
        PyValueError::new_err(format!(
            "unknown provider {name:?}: expected \"anthropic\", \"openai-chat\" or \"openai-responses\""
        ))
    })
}

/// The native half of `ferroloop.Client`.
#[pyclass(module = "ferroloop._native", name = "_Client", frozen)]
pub(crate) struct PyClient {
    client: Mutex<Option<Arc<Client>>>,
    provider: Provider,
    base_url: String,
    bridge: BridgeSlot,
    /// The process that created it (see [`refuse_in_forked_child`]).
    pid: u32,
}

impl PyClient {
    /// The core client (an error once closed).
    pub(crate) fn client(&self, py: Python<'_>) -> PyResult<Arc<Client>> {
        refuse_in_forked_child(py, self.pid, "Client")?;
        self.client
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| ferroloop_error(py, "InvalidStateError", "the client is closed", &[]))
    }

    /// The request body: `request` as JSON with `"stream"` set.
    /// The request's JSON body and, for Anthropic, its `betas` (sent as `anthropic-beta`).
    fn body(&self, request: &Bound<'_, PyAny>, stream: bool) -> PyResult<(Vec<u8>, Vec<String>)> {
        let mut body = py_to_value(request).map_err(PyValueError::new_err)?;
        if !body.is_object() {
            return Err(PyValueError::new_err("a request must be a dict"));
        }
        let betas = ferroloop::client::prepare_body(&mut body, stream, self.provider)
            .map_err(|error| PyTypeError::new_err(error.to_string()))?;
        let bytes =
            serde_json::to_vec(&body).map_err(|err| PyValueError::new_err(err.to_string()))?;
        Ok((bytes, betas))
    }
}

#[pymethods]
impl PyClient {
    #[new]
    #[pyo3(signature = (provider = None, *, api_key = None, base_url = None, max_retries = None, retry_base_delay = None, retry_max_delay = None, timeout = None, connect_timeout = None, first_byte_timeout = None, first_event_timeout = None, idle_timeout = None, stall_notice = None, headers = None, anthropic_beta = None, from_env = None, anthropic_version = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        provider: Option<&str>,
        api_key: Option<String>,
        base_url: Option<String>,
        max_retries: Option<&Bound<'_, PyAny>>,
        retry_base_delay: Option<&Bound<'_, PyAny>>,
        retry_max_delay: Option<&Bound<'_, PyAny>>,
        timeout: Option<&Bound<'_, PyAny>>,
        connect_timeout: Option<&Bound<'_, PyAny>>,
        first_byte_timeout: Option<&Bound<'_, PyAny>>,
        first_event_timeout: Option<&Bound<'_, PyAny>>,
        idle_timeout: Option<&Bound<'_, PyAny>>,
        stall_notice: Option<&Bound<'_, PyAny>>,
        headers: Option<Vec<(String, String)>>,
        anthropic_beta: Option<Vec<String>>,
        from_env: Option<bool>,
        anthropic_version: Option<String>,
    ) -> PyResult<Self> {
        shield(py, "Client.__init__", || {
            let retry_base_delay = float_arg_opt("retry_base_delay", retry_base_delay)?;
            let retry_max_delay = float_arg_opt("retry_max_delay", retry_max_delay)?;
            let timeout = float_arg_opt("timeout", timeout)?;
            let connect_timeout = float_arg_opt("connect_timeout", connect_timeout)?;
            let first_byte_timeout = float_arg_opt("first_byte_timeout", first_byte_timeout)?;
            let first_event_timeout = float_arg_opt("first_event_timeout", first_event_timeout)?;
            let idle_timeout = float_arg_opt("idle_timeout", idle_timeout)?;
            let stall_notice = float_arg_opt("stall_notice", stall_notice)?;
            let provider = provider_of(provider)?;
            // None is the default (reading the environment), as Node's `fromEnv: null`.
            let mut config = if from_env.unwrap_or(true) {
                ClientConfig::from_env(provider)
            } else {
                ClientConfig::new(provider)
            };
            if let Some(key) = api_key {
                config = config.with_api_key(key);
            }
            if let Some(url) = base_url {
                config = config.with_base_url(url);
            }
            if let Some(retries) = count_arg_opt("max_retries", max_retries)? {
                config.retry.max_retries = retries;
            }
            if let Some(delay) = retry_base_delay {
                config.retry.base_delay = seconds("retry_base_delay", delay)?;
            }
            if let Some(delay) = retry_max_delay {
                config.retry.max_delay = seconds("retry_max_delay", delay)?;
            }
            let timeouts = &mut config.timeouts;
            for (name, value, slot) in [
                ("timeout", timeout, &mut timeouts.total),
                ("connect_timeout", connect_timeout, &mut timeouts.connect),
                (
                    "first_byte_timeout",
                    first_byte_timeout,
                    &mut timeouts.first_byte,
                ),
                (
                    "first_event_timeout",
                    first_event_timeout,
                    &mut timeouts.first_event,
                ),
                ("idle_timeout", idle_timeout, &mut timeouts.idle),
                ("stall_notice", stall_notice, &mut timeouts.stall_notice),
            ] {
                if let Some(value) = value {
                    *slot = timeout_seconds(name, value)?;
                }
            }
            config.headers.extend(headers.unwrap_or_default());
            if let Some(version) = anthropic_version {
                config.anthropic_version = version;
            }
            config
                .anthropic_beta
                .extend(anthropic_beta.unwrap_or_default());
            let base_url = config.base_url.clone();
            // Loading the TLS roots reads files: done without the interpreter.
            let client = py
                .detach(|| Client::new(config))
                .map_err(|err| PyValueError::new_err(err.to_string()))?;
            Ok(Self {
                client: Mutex::new(Some(Arc::new(client))),
                provider,
                base_url,
                bridge: Mutex::new(None),
                pid: crate::runtime::process_id(),
            })
        })
    }

    /// The provider name.
    #[getter]
    fn provider(&self) -> &'static str {
        self.provider.name()
    }

    /// The endpoint's base URL.
    #[getter]
    fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Releases this handle's hold on the connection pool; later requests (and new agents)
    /// raise. Requests in flight finish, and agents made before keep the pool (they hold the
    /// core client).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        shield(py, "Client.close", || {
            let taken = self
                .client
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            py.detach(|| drop(taken));
            Ok(())
        })
    }

    /// Starts a streaming request (`request` is the provider's JSON body as a dict).
    fn stream(&self, py: Python<'_>, request: &Bound<'_, PyAny>) -> PyResult<PyClientStream> {
        shield(py, "Client.stream", || {
            let (body, betas) = self.body(request, true)?;
            let client = self.client(py)?;
            let bridge = cached_bridge_for_running_loop(py, &self.bridge)?;
            let (items, receiver) = mpsc::channel(STREAM_BUFFER);
            let task = spawn(pump(client, body, betas, items))?;
            Ok(PyClientStream {
                state: Arc::new(tokio::sync::Mutex::new(receiver)),
                pending_error: Arc::new(Mutex::new(None)),
                failure_metrics: Arc::new(Mutex::new(None)),
                task: Mutex::new(Some(task)),
                bridge,
            })
        })
    }

    /// A non-streaming request: an awaitable of the provider's JSON response (a dict).
    fn create<'py>(
        &self,
        py: Python<'py>,
        request: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        shield(py, "Client.create", || {
            let (body, betas) = self.body(request, false)?;
            let client = self.client(py)?;
            let bridge = cached_bridge_for_running_loop(py, &self.bridge)?;
            let task = spawn(async move {
                let response = client.create_with_betas(body, &betas).await?;
                // `create` returns a dict (its annotation, what every caller indexes).
                response.json_object()
            })?;
            into_awaitable(
                py,
                &bridge,
                async move { Ok(task.await) },
                |py, joined| match joined {
                    Ok(Ok(response)) => Ok(pythonize::pythonize(py, &response)?.unbind()),
                    Ok(Err(err)) => Err(client_error(py, &err)),
                    Err(panic) => Err(internal_error(py, &panic)),
                },
            )
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "Client(provider={:?}, base_url={:?})",
            self.provider.name(),
            self.base_url
        )
    }
}

/// A `FerroloopError` when `pid` (the creator's process) is not this process: an object that
/// holds connections (a client, an agent) is not usable in a child after `os.fork()` (the
/// connections and their I/O belong to the parent; a request would hang).
pub(crate) fn refuse_in_forked_child(py: Python<'_>, pid: u32, what: &str) -> PyResult<()> {
    if pid == crate::runtime::process_id() {
        return Ok(());
    }
    Err(ferroloop_error(
        py,
        "InvalidStateError",
        &format!(
            "this {what} was created before os.fork(): its connections belong to the parent \
             process; create a new one in the child"
        ),
        &[],
    ))
}

/// What a request's task hands to the event loop.
enum Pumped {
    Item(MessageItem),
    /// The final message and the request's measurements (always the last item).
    Done(Value, Box<RequestMetrics>),
    /// The request's error and its measurements up to the failure (always the last item).
    Failed(Failure),
}

/// A failed request: its error and its final measurements.
type Failure = Box<(ClientError, RequestMetrics)>;

/// Drives one streaming request on the runtime, sending its items to the consumer; stops
/// when the consumer goes away (the request is then aborted with the stream).
async fn pump(client: Arc<Client>, body: Vec<u8>, betas: Vec<String>, items: mpsc::Sender<Pumped>) {
    let mut stream = client.stream_with_betas(body, &betas).decode();
    while let Some(item) = stream.next().await {
        let pumped = match item {
            Ok(MessageItem::Message(message)) => {
                Pumped::Done(message, Box::new(stream.metrics().clone()))
            }
            Ok(item) => Pumped::Item(item),
            Err(err) => Pumped::Failed(Box::new((err, stream.metrics().clone()))),
        };
        let last = !matches!(pumped, Pumped::Item(_));
        if items.send(pumped).await.is_err() || last {
            return;
        }
    }
}

/// The native half of `ferroloop.MessageStream`.
#[pyclass(module = "ferroloop._native", name = "_ClientStream", frozen)]
pub(crate) struct PyClientStream {
    state: Arc<tokio::sync::Mutex<mpsc::Receiver<Pumped>>>,
    /// An error that followed events of the last batch: raised by the next call.
    pending_error: Arc<Mutex<Option<Failure>>>,
    /// The measurements of a failed request, once its error was raised.
    failure_metrics: Arc<Mutex<Option<RequestMetrics>>>,
    task: Mutex<Option<AbortOnDrop<()>>>,
    bridge: Arc<crate::bridge::LoopBridge>,
}

#[pymethods]
impl PyClientStream {
    /// An awaitable of the next batch: `(events, message, metrics)` (`message` and `metrics`
    /// set with the last batch), or `None` once the stream has ended. Raises the request's
    /// error after delivering the events that preceded it.
    fn next_batch<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        shield(py, "ClientStream.next_batch", || {
            let state = Arc::clone(&self.state);
            let pending = Arc::clone(&self.pending_error);
            let stash = Arc::clone(&self.pending_error);
            let failure_metrics = Arc::clone(&self.failure_metrics);
            into_awaitable(
                py,
                &self.bridge,
                async move {
                    let stashed = pending
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .take();
                    if let Some(failure) = stashed {
                        return Ok(vec![Pumped::Failed(failure)]);
                    }
                    let mut receiver = state.lock().await;
                    let mut batch = Vec::new();
                    let Some(first) = receiver.recv().await else {
                        return Ok(batch);
                    };
                    batch.push(first);
                    while batch.len() < BATCH_MAX {
                        match receiver.try_recv() {
                            Ok(item) => batch.push(item),
                            Err(_) => break,
                        }
                    }
                    Ok(batch)
                },
                move |py, batch| convert_batch(py, batch, &stash, &failure_metrics),
            )
        })
    }

    /// The measurements of a request that failed, once its error was raised (`None` before,
    /// and when it did not fail).
    #[getter]
    fn failure_metrics(&self, py: Python<'_>) -> PyResult<Option<Py<PyDict>>> {
        shield(py, "ClientStream.failure_metrics", || {
            let metrics = self
                .failure_metrics
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            metrics
                .as_ref()
                .map(|metrics| Ok(metrics_to_py(py, metrics)?.unbind()))
                .transpose()
        })
    }

    /// Aborts the request (the connection is dropped). Idempotent.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        shield(py, "ClientStream.close", || {
            let task = self
                .task
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            if let Some(task) = task {
                task.abort();
            }
            Ok(())
        })
    }
}

/// A batch as `(events, message, metrics)`, `None` for the end of the stream, or the error.
/// An error behind events is stashed in `stash` for the next call; a failure's measurements go
/// to `failure_metrics` when its error is raised.
fn convert_batch(
    py: Python<'_>,
    batch: Vec<Pumped>,
    stash: &Mutex<Option<Failure>>,
    failure_metrics: &Mutex<Option<RequestMetrics>>,
) -> PyResult<Py<PyAny>> {
    if batch.is_empty() {
        return Ok(py.None());
    }
    let events = PyList::empty(py);
    let mut message = py.None();
    let mut metrics = py.None();
    for item in batch {
        match item {
            Pumped::Item(MessageItem::Event(event)) => {
                events.append(event_to_py(py, &event)?)?;
            }
            Pumped::Item(MessageItem::Retry(retry)) => events.append(retry_event(py, &retry)?)?,
            Pumped::Item(MessageItem::Stalled { elapsed }) => {
                let dict = PyDict::new(py);
                dict.set_item("type", "stalled")?;
                dict.set_item("elapsed", elapsed.as_secs_f64())?;
                events.append(dict)?;
            }
            Pumped::Item(MessageItem::Message(value)) => {
                message = to_py(py, &value)?.unbind();
            }
            Pumped::Done(value, measured) => {
                message = to_py(py, &value)?.unbind();
                metrics = metrics_to_py(py, &measured)?.into_any().unbind();
            }
            Pumped::Failed(failure) => {
                if events.is_empty() {
                    let (err, metrics) = *failure;
                    *failure_metrics
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner) = Some(metrics);
                    return Err(client_error(py, &err));
                }
                *stash.lock().unwrap_or_else(PoisonError::into_inner) = Some(failure);
                break;
            }
        }
    }
    Ok(
        PyTuple::new(py, [events.into_any().unbind(), message, metrics])?
            .into_any()
            .unbind(),
    )
}

/// `{"type": "retry", "attempt", "status", "code", "overloaded", "wait", "reason"}`
/// (`attempt`: the one about to be made).
fn retry_event<'py>(py: Python<'py>, retry: &RetryEvent) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("type", "retry")?;
    // The attempt about to be made, as the agent's `retry` event and Node's say.
    dict.set_item("attempt", retry.next_attempt())?;
    dict.set_item("status", retry.status)?;
    // Why it waits when there is no status, in the agent's `retry` event's terms (one reading
    // of an overload: the core's).
    dict.set_item("code", retry.code)?;
    dict.set_item("overloaded", retry.overloaded())?;
    dict.set_item("wait", retry.wait.as_secs_f64())?;
    dict.set_item("reason", &retry.reason)?;
    Ok(dict)
}

/// A request's measurements (durations in seconds).
fn metrics_to_py<'py>(py: Python<'py>, metrics: &RequestMetrics) -> PyResult<Bound<'py, PyDict>> {
    let secs = |d: Option<Duration>| d.map(|d| d.as_secs_f64());
    let dict = PyDict::new(py);
    dict.set_item("request_id", &metrics.request_id)?;
    dict.set_item("attempts", metrics.attempts)?;
    let retries = PyList::empty(py);
    for retry in &metrics.retries {
        retries.append(retry_event(py, retry)?)?;
    }
    dict.set_item("retries", retries)?;
    dict.set_item("http_version", metrics.http_version)?;
    dict.set_item("time_to_headers", secs(metrics.time_to_headers))?;
    dict.set_item("time_to_first_event", secs(metrics.time_to_first_event))?;
    dict.set_item("time_to_first_token", secs(metrics.time_to_first_token))?;
    dict.set_item("total", secs(metrics.total))?;
    dict.set_item("bytes_received", metrics.bytes_received)?;
    dict.set_item("events", metrics.events)?;
    dict.set_item(
        "usage",
        pythonize::pythonize(py, &metrics.usage.clone().map(Value::Object))?,
    )?;
    Ok(dict)
}

/// The Python exception for a client error (classes of `ferroloop/_errors.py`). A truncated
/// stream raises `StreamTruncatedError` with the partial message, its `__cause__` the failure
/// that broke it.
pub(crate) fn client_error(py: Python<'_>, err: &ClientError) -> PyErr {
    let message = err.to_string();
    let text = |value: Option<&str>| match value {
        Some(text) => PyString::new(py, text).into_any(),
        None => py.None().into_bound(py),
    };
    let request_id = || ("request_id", text(err.request_id()));
    let api = |class: &str, extra: Vec<(&str, Bound<'_, PyAny>)>| {
        let details = err.details();
        // Node's code of the same error (each class's own).
        let mut attrs = vec![
            request_id(),
            ("code", PyString::new(py, err.code()).into_any()),
            ("status", any(py, details.and_then(|d| d.status))),
            (
                "error_type",
                text(details.and_then(|d| d.error_type.as_deref())),
            ),
        ];
        attrs.extend(extra);
        ferroloop_error(py, class, &message, &attrs)
    };
    // The wait a rate limit, an overload or a server error asked for, in seconds.
    let retry_after = || {
        let seconds = err.retry_after().map(|wait| wait.as_secs_f64());
        ("retry_after", any(py, seconds))
    };
    match err {
        ClientError::Authentication(_) => api("AuthenticationError", vec![]),
        ClientError::Permission(_) => api("PermissionDeniedError", vec![]),
        ClientError::RateLimited { .. } => api("RateLimitError", vec![retry_after()]),
        ClientError::QuotaExceeded(_) => api("QuotaExceededError", vec![]),
        ClientError::Overloaded { .. } => api("OverloadedError", vec![retry_after()]),
        ClientError::PromptTooLong { tokens, limit, .. } => api(
            "PromptTooLongError",
            vec![("tokens", any(py, *tokens)), ("limit", any(py, *limit))],
        ),
        ClientError::NotFound(_) => api("NotFoundError", vec![]),
        ClientError::InvalidRequest(_) => api("InvalidRequestError", vec![]),
        ClientError::Server { .. } => api("ServerError", vec![retry_after()]),
        ClientError::Connection { .. } => {
            ferroloop_error(py, "APIConnectionError", &message, &[request_id()])
        }
        ClientError::Timeout { which, elapsed, .. } => {
            let which = PyString::new(py, &which.to_string()).into_any();
            let elapsed = any(py, elapsed.as_secs_f64());
            ferroloop_error(
                py,
                "APITimeoutError",
                &message,
                &[("which", which), ("elapsed", elapsed), request_id()],
            )
        }
        ClientError::Truncated { partial, cause, .. } => {
            let partial_message = match &partial.message {
                Some(value) => pythonize::pythonize(py, value.as_ref())
                    .unwrap_or_else(|_| py.None().into_bound(py)),
                None => py.None().into_bound(py),
            };
            // The status is its cause's (an in-stream error naming one, OpenRouter's
            // `{"error": {"code": 502}}`), as Node's `status` and C's are.
            let raised = ferroloop_error(
                py,
                "StreamTruncatedError",
                &message,
                &[
                    ("partial_message", partial_message),
                    ("status", any(py, err.status())),
                    request_id(),
                ],
            );
            raised.set_cause(py, Some(client_error(py, cause)));
            raised
        }
        ClientError::Protocol { .. } => {
            ferroloop_error(py, "ProtocolError", &message, &[request_id()])
        }
        // A hostile or broken stream: a protocol failure, with the cap that stopped it.
        ClientError::EventTooLarge { limit, .. } => ferroloop_error(
            py,
            "ProtocolError",
            &message,
            &[("limit", any(py, *limit)), request_id()],
        ),
        // A request the client cannot send as given (Node's `invalid_argument`).
        ClientError::Config(_) => ferroloop_error(
            py,
            "FerroloopError",
            &message,
            &[("code", PyString::new(py, "invalid_argument").into_any())],
        ),
    }
}

/// `value` as a Python object (`None` if the conversion fails: an error is never lost to a
/// failing attribute).
fn any<'py>(py: Python<'py>, value: impl IntoPyObject<'py>) -> Bound<'py, PyAny> {
    value
        .into_bound_py_any(py)
        .unwrap_or_else(|_| py.None().into_bound(py))
}

/// Adds the client classes to the module.
pub(crate) fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<PyClient>()?;
    module.add_class::<PyClientStream>()?;
    Ok(())
}
