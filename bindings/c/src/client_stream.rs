//! One request of an `fl_client`, without the agent loop (`fl_message_stream`): a streamed
//! answer's decoded events, retries and final message, or a non-streaming answer
//! (`fl_client_create`), with the client's typed failure, request id and measurements.
//!
//! The request runs as a task on the client's own runtime (as the agent's model calls do, see
//! `client.rs`: a connection pool shared by runtimes the host drives would hang). The task
//! hands finished items (events already serialised) to the host through an unbounded channel,
//! so the response is read at the network's pace, never the host's: the client's idle watchdog
//! does not count the host's pauses. The host waits on the channel in
//! `fl_message_stream_next_event`. Dropping the task (cancel, free) drops the core stream,
//! which closes its connection.

use std::ffi::{CStr, c_char};
use std::panic::AssertUnwindSafe;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::Duration;

use ferroloop_core::client::{
    Client, ClientError, MessageItem, Provider, RequestMetrics, RetryEvent,
};
use ferroloop_core::exec::CancellationToken;
use futures_util::{FutureExt, StreamExt};
use serde_json::{Map, Value, json};

use crate::agent::fl_agent_next;
use crate::boundary::{self, FfiError, FfiResult};
use crate::client::{ClientShared, fl_client};
use crate::exec::{TurnLink, fl_cancel_token};
use crate::status::fl_status;
use crate::text::{self, Out};

/// One request of a client (opaque): a streamed answer (`fl_client_stream_start`) read with
/// `fl_message_stream_next_event`, or a finished non-streaming one (`fl_client_create`). After
/// the end: `fl_message_stream_message`, `fl_message_stream_error`,
/// `fl_message_stream_error_json`, `fl_message_stream_request_id`, `fl_message_stream_metrics`,
/// `fl_message_stream_metrics_json`. Release it with `fl_message_stream_free`.
///
/// Thread-safety: `fl_message_stream_cancel` may be called from any thread at any time.
/// `fl_message_stream_next_event` is called by one thread at a time: a call made while another
/// thread is in it returns `FL_STATUS_INVALID_STATE` at once, as for `fl_turn_next_event` and
/// `fl_agent_run_next_event`. The other functions may be called from any thread, also while a
/// thread waits in `fl_message_stream_next_event` (they do not wait for it); the views they hand
/// out follow the rules of each function. `fl_message_stream_free` must not overlap any other
/// call on the stream.
pub struct fl_message_stream {
    /// The channel from the request's task, held by the one `fl_message_stream_next_event` in
    /// progress for as long as it waits. Apart from `state` so that the wait (unbounded with a
    /// negative timeout) never blocks the other functions, and a second reader is refused
    /// rather than left waiting, whatever its own timeout, for the first to return.
    items: Mutex<Receiver<Pumped>>,
    /// The host's side: the views handed out and the outcome. Held only briefly.
    state: Mutex<StreamState>,
    /// Cancels the request from any thread.
    cancel: CancellationToken,
    /// Keeps the stream linked to the host's cancel token; unlinks it when freed.
    link: Option<TurnLink>,
    /// The request's task on the client's runtime; aborted when the stream is freed.
    task: Option<tokio::task::JoinHandle<()>>,
    /// Keeps the client's runtime alive while the task runs; dropped last.
    client: Option<Arc<ClientShared>>,
}

/// The host's side of a stream.
struct StreamState {
    /// The last event's JSON, NUL-terminated (the view of `fl_message_stream_next_event`).
    event: String,
    /// The request id of the response being read, NUL-terminated; empty when not known yet.
    request_id: String,
    /// Set when the stream ends (success, failure or cancellation); never changes afterwards.
    outcome: Option<Outcome>,
    /// `FL_AGENT_NEXT_END` was reported: later calls report it again.
    ended: bool,
    /// The outcome's metrics as NUL-terminated JSON (the view of
    /// `fl_message_stream_metrics_json`); empty until first asked for.
    metrics_json: String,
}

/// How a request ended.
struct Outcome {
    /// The final message (or response), else the message received so far, or `null`;
    /// NUL-terminated.
    message: String,
    failure: Option<Failure>,
    metrics: RequestMetrics,
}

/// A failed (or cancelled) request, as C reads it.
struct Failure {
    status: fl_status,
    code: &'static CStr,
    cause: Option<&'static CStr>,
    http_status: u16,
    /// The request id of the error response, when it had headers.
    request_id: Option<String>,
    message: String,
    /// The whole error as NUL-terminated JSON (the view of `fl_message_stream_error_json`).
    json: String,
}

/// What the request's task hands to the host.
enum Pumped {
    /// The response now being read has this request id (sent before the item it came with).
    RequestId(String),
    /// A typed event, a retry or a stall notice, as JSON.
    Event(String),
    /// The end, in every case: the last item (boxed: it is sent once, the events many times).
    End(Box<Outcome>),
}

/// Why a request failed, as the client reports it: its `fl_status`.
fn status_of(error: &ClientError) -> fl_status {
    match error {
        ClientError::Truncated { .. } => fl_status::FL_STATUS_TRUNCATED,
        ClientError::Connection { .. } => fl_status::FL_STATUS_CONNECTION_ERROR,
        ClientError::Timeout { .. } => fl_status::FL_STATUS_TIMEOUT,
        ClientError::Protocol { .. } | ClientError::EventTooLarge { .. } => {
            fl_status::FL_STATUS_PROTOCOL_ERROR
        }
        ClientError::Config(_) => fl_status::FL_STATUS_INVALID_ARGUMENT,
        ClientError::Authentication(_)
        | ClientError::Permission(_)
        | ClientError::NotFound(_)
        | ClientError::RateLimited { .. }
        | ClientError::QuotaExceeded(_)
        | ClientError::Overloaded { .. }
        | ClientError::PromptTooLong { .. }
        | ClientError::InvalidRequest(_)
        | ClientError::Server { .. } => fl_status::FL_STATUS_PROVIDER_ERROR,
    }
}

/// The stable code of a client failure: [`ClientError::code`], the codes `fl_decoder_error_code`
/// and the agent's `error_code` use, with the two finer ones folded as the bindings fold them
/// (`event_too_large` is a `protocol` failure; `config` the agent's `invalid_configuration`).
fn code_of(error: &ClientError) -> &'static CStr {
    match error {
        ClientError::Authentication(_) => c"authentication",
        ClientError::Permission(_) => c"permission",
        ClientError::NotFound(_) => c"not_found",
        ClientError::RateLimited { .. } => c"rate_limited",
        ClientError::QuotaExceeded(_) => c"quota_exceeded",
        ClientError::Overloaded { .. } => c"overloaded",
        ClientError::PromptTooLong { .. } => c"prompt_too_long",
        ClientError::InvalidRequest(_) => c"invalid_request",
        ClientError::Server { .. } => c"server",
        ClientError::Connection { .. } => c"connection",
        ClientError::Timeout { .. } => c"timeout",
        ClientError::Truncated { .. } => c"stream_truncated",
        ClientError::Protocol { .. } | ClientError::EventTooLarge { .. } => c"protocol",
        ClientError::Config(_) => c"invalid_configuration",
    }
}

/// The keys every failure's JSON has (`fl_message_stream_error_json`), as every Python error
/// has them: `code`, `message`, `status` (the HTTP status, `null` when none) and `request_id`.
fn common_error_fields(
    code: &CStr,
    message: &str,
    status: Option<u16>,
    request_id: Option<&str>,
) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("code".into(), json!(code.to_string_lossy()));
    fields.insert("message".into(), json!(message));
    fields.insert("status".into(), json!(status));
    fields.insert("request_id".into(), json!(request_id));
    fields
}

/// A client failure's whole error as JSON (`fl_message_stream_error_json`): the struct's code
/// and status, and every attribute Python's exception for it has, under Python's names, with
/// durations in milliseconds under names ending in `_ms`. The one place a `ClientError`
/// becomes JSON in the C API (a truncation's `cause` is this object of its cause).
fn error_json(error: &ClientError) -> Value {
    let message = error.to_string();
    let mut fields =
        common_error_fields(code_of(error), &message, error.status(), error.request_id());
    let mut add = |key: &str, value: Value| {
        fields.insert(key.to_owned(), value);
    };
    match error {
        ClientError::Authentication(details)
        | ClientError::Permission(details)
        | ClientError::NotFound(details)
        | ClientError::QuotaExceeded(details)
        | ClientError::InvalidRequest(details) => add("error_type", json!(details.error_type)),
        ClientError::RateLimited {
            details,
            retry_after,
        }
        | ClientError::Overloaded {
            details,
            retry_after,
        }
        | ClientError::Server {
            details,
            retry_after,
        } => {
            add("error_type", json!(details.error_type));
            add("retry_after_ms", json!(retry_after.map(millis)));
        }
        ClientError::PromptTooLong {
            details,
            tokens,
            limit,
        } => {
            add("error_type", json!(details.error_type));
            add("tokens", json!(tokens));
            add("limit", json!(limit));
        }
        ClientError::Timeout { which, elapsed, .. } => {
            add("which", json!(which.to_string()));
            add("elapsed_ms", json!(millis(*elapsed)));
        }
        ClientError::Truncated { partial, cause, .. } => {
            add("partial_message", json!(partial.message));
            add("cause", error_json(cause.root()));
        }
        // Python's `ProtocolError.limit`: the cap an oversized event hit, else `null`.
        ClientError::Protocol { .. } => add("limit", Value::Null),
        ClientError::EventTooLarge { limit, .. } => add("limit", json!(limit)),
        ClientError::Connection { .. } | ClientError::Config(_) => {}
    }
    Value::Object(fields)
}

impl Failure {
    fn of(error: &ClientError) -> Self {
        Self {
            status: status_of(error),
            code: code_of(error),
            cause: match error {
                ClientError::Truncated { cause, .. } => Some(code_of(cause.root())),
                _ => None,
            },
            http_status: error.status().unwrap_or(0),
            request_id: error.request_id().map(str::to_owned),
            message: error.to_string(),
            json: terminated(&error_json(error)),
        }
    }

    /// A failure that is no `ClientError` (a cancel, a bug): only the common keys in its JSON.
    fn plain(status: fl_status, code: &'static CStr, message: String) -> Self {
        let json = common_error_fields(code, &message, None, None);
        Self {
            status,
            code,
            cause: None,
            http_status: 0,
            request_id: None,
            message,
            json: terminated(&Value::Object(json)),
        }
    }

    fn cancelled() -> Self {
        Self::plain(
            fl_status::FL_STATUS_CANCELLED,
            c"aborted",
            "the request was cancelled".to_owned(),
        )
    }
}

/// `message` as NUL-terminated JSON.
fn terminated(message: &Value) -> String {
    let mut json = message.to_string();
    json.push('\0');
    json
}

/// The outcome of a failed request: the partial message a truncation carries, else `message`.
fn failed(error: &ClientError, message: Value, metrics: RequestMetrics) -> Outcome {
    let partial = match error {
        ClientError::Truncated { partial, .. } => partial.message.as_deref().cloned(),
        _ => None,
    };
    Outcome {
        message: terminated(&partial.unwrap_or(message)),
        failure: Some(Failure::of(error)),
        metrics,
    }
}

/// A milliseconds value for JSON.
fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// The JSON of a stream item that is not the end, as the C API hands it out: the decoder's
/// events as `ferroloop decode --events` prints them, retries and stall notices with
/// durations in milliseconds (the agent's `retry` event, plus the failure's reason).
fn item_json(item: &MessageItem) -> Result<String, serde_json::Error> {
    match item {
        MessageItem::Event(event) => serde_json::to_string(event),
        MessageItem::Retry(retry) => Ok(retry_json(retry).to_string()),
        MessageItem::Stalled { elapsed } => {
            Ok(json!({"type": "stalled", "elapsed": millis(*elapsed)}).to_string())
        }
        // The final message is the outcome, never an event.
        MessageItem::Message(message) => Ok(message.to_string()),
    }
}

/// A retry as the C API hands it out: the stream's `retry` event, and an entry of the metrics'
/// `retries` (`fl_message_stream_metrics_json`).
fn retry_json(retry: &RetryEvent) -> Value {
    json!({
        "type": "retry",
        "attempt": retry.next_attempt(),
        "status": retry.status,
        "wait": millis(retry.wait),
        "code": retry.code,
        // The one reading of an overload (a 529, or the class without one), as in the agent's
        // `retry` event and Python's and Node's client retries.
        "overloaded": retry.overloaded(),
        "reason": retry.reason,
    })
}

/// A request's whole measurements as JSON (`fl_message_stream_metrics_json`): Python's
/// `RequestMetrics` keys, its durations in milliseconds (as `fl_request_metrics`) under names
/// ending in `_ms`, `null` when not measured.
fn metrics_json(metrics: &RequestMetrics) -> Value {
    let ms = |duration: Option<Duration>| duration.map(millis);
    json!({
        "request_id": metrics.request_id,
        "attempts": metrics.attempts,
        "retries": metrics.retries.iter().map(retry_json).collect::<Vec<_>>(),
        "http_version": metrics.http_version,
        "time_to_headers_ms": ms(metrics.time_to_headers),
        "time_to_first_event_ms": ms(metrics.time_to_first_event),
        "time_to_first_token_ms": ms(metrics.time_to_first_token),
        "total_ms": ms(metrics.total),
        "bytes_received": metrics.bytes_received,
        "events": metrics.events,
        "usage": metrics.usage,
    })
}

/// Drives one streaming request on the client's runtime, handing its items to the host; stops
/// at the end, when cancelled, or when the host is gone. Returning drops the core stream,
/// which closes the connection.
async fn pump_stream(
    client: Client,
    body: Vec<u8>,
    betas: Vec<String>,
    cancel: CancellationToken,
    items: Sender<Pumped>,
) {
    let mut stream = client.stream_with_betas(body, &betas).decode();
    let mut request_id: Option<String> = None;
    loop {
        let item = tokio::select! {
            biased;
            () = cancel.cancelled() => {
                let outcome = Outcome {
                    message: terminated(&stream.message()),
                    failure: Some(Failure::cancelled()),
                    metrics: stream.metrics().clone(),
                };
                let _ = items.send(Pumped::End(Box::new(outcome)));
                return;
            }
            item = stream.next() => item,
        };
        let current = &stream.metrics().request_id;
        if current.is_some() && *current != request_id {
            request_id.clone_from(current);
            if let Some(id) = current.clone()
                && items.send(Pumped::RequestId(id)).is_err()
            {
                return;
            }
        }
        let pumped = match item {
            Some(Ok(MessageItem::Message(message))) => Pumped::End(Box::new(Outcome {
                message: terminated(&message),
                failure: None,
                metrics: stream.metrics().clone(),
            })),
            Some(Ok(item)) => match item_json(&item) {
                Ok(json) => Pumped::Event(json),
                Err(error) => Pumped::End(Box::new(internal(&error.to_string(), stream.metrics()))),
            },
            Some(Err(error)) => Pumped::End(Box::new(failed(
                &error,
                stream.message(),
                stream.metrics().clone(),
            ))),
            // The core ends a stream with its message or an error: never without.
            None => Pumped::End(Box::new(internal(
                "the stream ended without its message",
                stream.metrics(),
            ))),
        };
        let last = matches!(pumped, Pumped::End(_));
        if items.send(pumped).is_err() || last {
            return;
        }
    }
}

/// The outcome of a bug: the stream ends as a caught panic would.
fn internal(detail: &str, metrics: &RequestMetrics) -> Outcome {
    Outcome {
        message: terminated(&Value::Null),
        failure: Some(Failure::plain(
            fl_status::FL_STATUS_PANIC,
            c"internal",
            format!("internal error: {detail}"),
        )),
        metrics: metrics.clone(),
    }
}

/// Runs one non-streaming request on the client's runtime and hands its outcome to the host.
async fn pump_create(
    client: Client,
    body: Vec<u8>,
    betas: Vec<String>,
    cancel: CancellationToken,
    items: Sender<Pumped>,
) {
    let outcome = tokio::select! {
        biased;
        () = cancel.cancelled() => Outcome {
            message: terminated(&Value::Null),
            failure: Some(Failure::cancelled()),
            metrics: RequestMetrics::default(),
        },
        response = client.create_with_metrics(body, &betas) => match response {
            Ok(response) => {
                let metrics = response.metrics.clone();
                // A generation answer is a JSON object: another JSON value (`[1, 2]`) is a
                // protocol failure, as in Python and Node.
                match response.json_object() {
                    Ok(body) => Outcome { message: terminated(&body), failure: None, metrics },
                    Err(error) => failed(&error, Value::Null, metrics),
                }
            }
            // A failed request's attempts and retries, as a failed stream reports them.
            Err(failure) => failed(&failure.error, Value::Null, failure.metrics),
        },
    };
    if let Some(id) = outcome.metrics.request_id.clone() {
        let _ = items.send(Pumped::RequestId(id));
    }
    let _ = items.send(Pumped::End(Box::new(outcome)));
}

/// The request body for `json` (an object: the provider's request) with `"stream"` set as
/// asked and, for Anthropic, its `betas` taken out (sent as `anthropic-beta`), as Python's and
/// Node's clients do.
fn request_body(json: &str, stream: bool, provider: Provider) -> FfiResult<(Vec<u8>, Vec<String>)> {
    let mut request: Value = serde_json::from_str(json)
        .map_err(|error| FfiError::invalid(format!("request_json is not valid JSON: {error}")))?;
    if !request.is_object() {
        return Err(FfiError::invalid("request_json must be a JSON object"));
    }
    let betas = ferroloop_core::client::prepare_body(&mut request, stream, provider)
        .map_err(|error| FfiError::invalid(format!("request_json: {error}")))?;
    let body = serde_json::to_vec(&request)
        .map_err(|error| FfiError::invalid(format!("request_json: {error}")))?;
    Ok((body, betas))
}

/// Whether a request streams (`fl_client_stream_start`) or not (`fl_client_create`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Stream,
    Create,
}

/// Starts one request of `client`; the shared part of `fl_client_stream_start` and
/// `fl_client_create`.
fn start(
    client: &fl_client,
    json: &str,
    cancel: Option<&fl_cancel_token>,
    mode: Mode,
) -> FfiResult<Box<fl_message_stream>> {
    let shared = Arc::clone(&client.shared);
    let core = shared.client().clone();
    let (body, betas) = request_body(json, mode == Mode::Stream, core.config().provider)?;
    let token = CancellationToken::new();
    let link = cancel.map(|cancel| TurnLink::new(&cancel.token, &cancel.turns, token.clone()));
    let pumped = token.clone();
    fl_message_stream::spawned(shared, token, link, |items| match mode {
        Mode::Stream => Box::pin(pump_stream(core, body, betas, pumped, items)),
        Mode::Create => Box::pin(pump_create(core, body, betas, pumped, items)),
    })
}

/// A request's task, as it is spawned on the client's runtime.
type Pump = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Runs a request's task; a panic in it ends the stream as an internal failure carrying the
/// panic's message (its task would otherwise just vanish, the stream ending with a failure that
/// says nothing of why).
async fn reporting_panics(pump: Pump, items: Sender<Pumped>) {
    if let Err(payload) = AssertUnwindSafe(pump).catch_unwind().await {
        let detail = ferroloop_core::exec::panic_message(payload.as_ref());
        let outcome = internal(&format!("panic: {detail}"), &RequestMetrics::default());
        // The host may be gone (a freed stream): nobody to tell then.
        let _ = items.send(Pumped::End(Box::new(outcome)));
    }
}

impl fl_message_stream {
    /// A stream whose items come from the task `pump` makes of their sender, spawned on the
    /// client's runtime.
    fn spawned(
        client: Arc<ClientShared>,
        cancel: CancellationToken,
        link: Option<TurnLink>,
        pump: impl FnOnce(Sender<Pumped>) -> Pump,
    ) -> FfiResult<Box<Self>> {
        let (sender, receiver) = mpsc::channel();
        let task = client.spawn(reporting_panics(pump(sender.clone()), sender))?;
        Ok(Box::new(Self {
            items: Mutex::new(receiver),
            state: Mutex::new(StreamState {
                event: String::new(),
                request_id: String::new(),
                outcome: None,
                ended: false,
                metrics_json: String::new(),
            }),
            cancel,
            link,
            task: Some(task),
            client: Some(client),
        }))
    }

    /// Waits for the next item (at most `timeout_ms`; negative: no limit) and leaves an
    /// event's JSON (without the NUL) in the state, returned locked with what was found.
    /// `FL_STATUS_INVALID_STATE` when another thread is already waiting: the host broke the
    /// one-reader rule, and waiting behind that reader could outlast any timeout given.
    fn next(&self, timeout_ms: i64) -> FfiResult<(fl_agent_next, MutexGuard<'_, StreamState>)> {
        let items = match self.items.try_lock() {
            Ok(items) => items,
            // A panic while a reader held it leaves the receiver itself intact.
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => {
                return Err(FfiError::state(
                    "fl_message_stream_next_event: another call of it is in progress on this \
                     stream (one thread at a time reads a stream)",
                ));
            }
        };
        {
            let mut state = self.lock();
            state.event.clear();
            if state.outcome.is_some() {
                state.ended = true;
                return Ok((fl_agent_next::FL_AGENT_NEXT_END, state));
            }
        }
        loop {
            // Waits holding `items` only: the other functions keep answering meanwhile.
            let received = match u64::try_from(timeout_ms) {
                Err(_) => items.recv().map_err(|_| RecvTimeoutError::Disconnected),
                Ok(0) => items.try_recv().map_err(|error| match error {
                    TryRecvError::Empty => RecvTimeoutError::Timeout,
                    TryRecvError::Disconnected => RecvTimeoutError::Disconnected,
                }),
                Ok(ms) => items.recv_timeout(Duration::from_millis(ms)),
            };
            let mut state = self.lock();
            match received {
                Ok(Pumped::RequestId(mut id)) => {
                    id.push('\0');
                    state.request_id = id;
                }
                Ok(Pumped::Event(json)) => {
                    state.event = json;
                    return Ok((fl_agent_next::FL_AGENT_NEXT_EVENT, state));
                }
                Ok(Pumped::End(outcome)) => {
                    let outcome = *outcome;
                    // The request id of an error response is in the failure, not the metrics.
                    let id = outcome
                        .failure
                        .as_ref()
                        .and_then(|failure| failure.request_id.as_ref())
                        .or(outcome.metrics.request_id.as_ref());
                    if let Some(id) = id {
                        state.request_id = format!("{id}\0");
                    }
                    state.outcome = Some(outcome);
                    state.ended = true;
                    return Ok((fl_agent_next::FL_AGENT_NEXT_END, state));
                }
                Err(RecvTimeoutError::Timeout) => {
                    return Ok((fl_agent_next::FL_AGENT_NEXT_NONE, state));
                }
                // The task always sends its end before it returns, a panic's too (see
                // `reporting_panics`): only a task dropped unfinished gets here.
                Err(RecvTimeoutError::Disconnected) => {
                    state.outcome = Some(internal(
                        "the request's task ended without an outcome",
                        &RequestMetrics::default(),
                    ));
                    state.ended = true;
                    return Ok((fl_agent_next::FL_AGENT_NEXT_END, state));
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, StreamState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The outcome of an ended stream, or `FL_STATUS_INVALID_STATE`.
fn outcome_of<'a>(state: &'a StreamState, function: &str) -> FfiResult<&'a Outcome> {
    match (&state.outcome, state.ended) {
        (Some(outcome), true) => Ok(outcome),
        _ => Err(FfiError::state(format!(
            "{function}: the stream has not ended yet (read it with \
             fl_message_stream_next_event until FL_AGENT_NEXT_END)"
        ))),
    }
}

/// Starts one streaming request of `client` and stores it in `*out`. The caller owns the stream
/// and releases it with `fl_message_stream_free`.
///
/// `request_json` (`len` bytes of UTF-8) is the provider's own request body, as a JSON object
/// (for Anthropic `{"model": ..., "max_tokens": ..., "messages": [...]}`), as Python's
/// `client.stream(request)` and Node's take it: `"stream": true` is set, and for Anthropic a
/// `betas` array is taken out and sent as `anthropic-beta`. Text that is not UTF-8 is
/// `FL_STATUS_INVALID_UTF8`; anything but a JSON object is `FL_STATUS_INVALID_ARGUMENT`; a
/// client made before a `fork()` of this process is `FL_STATUS_INVALID_STATE` (see
/// `fl_client_new`). Nothing here fails because of the network: the request goes out at once on the client's
/// thread, and its failures end the stream (see `fl_message_stream_error`).
///
/// `cancel` may be NULL; cancelling it (from any thread) cancels the stream as
/// `fl_message_stream_cancel` does, and a token cancelled earlier ends it before it gets
/// anywhere.
///
/// Thread-safe; streams of one client share its connection pool.
///
/// # Safety
/// `client` must be a live client; `request_json` must be valid for reads of `len` bytes;
/// `cancel` must be NULL or a live token (it may be freed while the stream lives); `out` must be
/// valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_client_stream_start(
    client: *const fl_client,
    request_json: *const c_char,
    len: usize,
    cancel: *const fl_cancel_token,
    out: *mut *mut fl_message_stream,
) -> fl_status {
    // SAFETY: the caller's promises on every argument, forwarded.
    boundary::run(|| unsafe {
        text::start_work(
            (client, "client"),
            (request_json, len, "request_json"),
            cancel,
            out,
            |client, json, cancel| start(client, json, cancel, Mode::Stream),
        )
    })
}

/// Makes one non-streaming request of `client`, waits for its answer on the calling thread,
/// and stores the finished request in `*out` (the caller owns it and releases it with
/// `fl_message_stream_free`). `request_json` is as for `fl_client_stream_start`, sent with
/// `"stream": false` (as Python's and Node's `create`); the request runs on the client's
/// thread, with its retries and timeouts.
///
/// Returns `FL_STATUS_OK` whenever the request was made, whatever its answer: read the
/// response (the provider's JSON body, an object: another JSON value is a protocol failure)
/// with `fl_message_stream_message`, which returns the failure's status instead when it failed
/// (details in `fl_message_stream_error`), and its request id and measurements (a failed
/// request's too: the attempts and retries it made) with `fl_message_stream_request_id` and
/// `fl_message_stream_metrics`; `fl_message_stream_next_event` reports `FL_AGENT_NEXT_END`.
/// Argument errors are as for `fl_client_stream_start` (`*out` is then not written).
///
/// `cancel` may be NULL; cancelling it from another thread ends the wait at once (the request
/// is dropped and its connection closed) with a failure of status `FL_STATUS_CANCELLED`.
///
/// Thread-safe.
///
/// # Safety
/// `client` must be a live client; `request_json` must be valid for reads of `len` bytes;
/// `cancel` must be NULL or a live token; `out` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_client_create(
    client: *const fl_client,
    request_json: *const c_char,
    len: usize,
    cancel: *const fl_cancel_token,
    out: *mut *mut fl_message_stream,
) -> fl_status {
    // SAFETY: the caller's promises on every argument, forwarded.
    boundary::run(|| unsafe {
        text::start_work(
            (client, "client"),
            (request_json, len, "request_json"),
            cancel,
            out,
            |client, json, cancel| {
                let stream = start(client, json, cancel, Mode::Create)?;
                // Nobody else has the stream yet: no reader can be refused here.
                while stream.next(-1)?.0 != fl_agent_next::FL_AGENT_NEXT_END {}
                Ok(stream)
            },
        )
    })
}

/// Waits for the stream's next event and writes what it found into `*next`, with the event in
/// `*event_json` / `*event_len` (the convention of `fl_agent_run_next_event`):
///
/// - `FL_AGENT_NEXT_EVENT`: the view holds one event as a JSON object with a `type`: the
///   decoder's typed events, as `ferroloop decode --events`, `fl_decoder_next_event`, Python
///   and Node give them (`{"type":"text_delta","index":0,"text":"Hi"}`, `tool_use_ready`, ...);
///   `{"type":"retry","attempt":2,"status":529,"wait":512.0,"code":"overloaded","overloaded":true,"reason":...}`
///   when an attempt failed before anything was delivered and the client tries again
///   (`attempt`: the one about to be made, `wait` in milliseconds); and
///   `{"type":"stalled","elapsed":30000.0}` when no event came for the client's
///   `stall_notice_ms`.
/// - `FL_AGENT_NEXT_NONE`: nothing within the timeout (the view is empty).
/// - `FL_AGENT_NEXT_END`: the stream has ended (succeeded, failed or was cancelled; the view is
///   empty), and every later call reports it again. Read the outcome with
///   `fl_message_stream_message` and `fl_message_stream_error`.
///
/// `timeout_ms`: how long to wait, in milliseconds; 0 does not wait; a negative value waits as
/// long as it takes (the client's own timeouts still end the stream). The response keeps
/// arriving on the client's thread between two calls. The view is NUL-terminated, owned by the
/// stream, and valid until the next call of this function or `fl_message_stream_free`.
///
/// Thread-safety: one thread at a time per stream. A call made while another thread is in this
/// function (waiting for an event, perhaps without limit) returns `FL_STATUS_INVALID_STATE` at
/// once, whatever its timeout, as `fl_turn_next_event` and `fl_agent_run_next_event` do; the
/// stream's other functions do not wait for that thread.
///
/// # Safety
/// `stream` must be a live stream; `next`, `event_json` and `event_len` must be valid for
/// writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_message_stream_next_event(
    stream: *const fl_message_stream,
    timeout_ms: i64,
    next: *mut fl_agent_next,
    event_json: *mut *const c_char,
    event_len: *mut usize,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `stream`.
        let stream = unsafe { text::handle_ref(stream, "stream") }?;
        let next = Out::new(next, "next")?;
        let event_json = Out::new(event_json, "event_json")?;
        let event_len = Out::new(event_len, "event_len")?;
        let (found, mut state) = stream.next(timeout_ms)?;
        state.event.push('\0');
        // SAFETY: all three not NULL (checked) and writable (the caller's promise). The view
        // points into the state, untouched until the next call of this function (the only
        // writer of `event`) or the free.
        unsafe {
            next.write(found);
            text::write_terminated(event_json, event_len, &state.event);
        }
        Ok(())
    })
}

/// Writes into `*json` / `*len` the stream's final message, in the provider's non-streaming
/// response shape (Anthropic's `{"id":...,"type":"message","content":[...],...}`, a chat
/// completion, a Responses object): what `ferroloop decode` prints for the same stream; for
/// `fl_client_create`, the response body. The view is NUL-terminated, owned by the stream, and
/// valid until `fl_message_stream_free`.
///
/// Returns `FL_STATUS_OK` for a stream that succeeded. For one that failed it returns the
/// failure's status (as `fl_message_stream_error` does, with the message in
/// `fl_last_error_message`) and still writes the view: the message received so far for a
/// truncated (`FL_STATUS_TRUNCATED`) or cancelled (`FL_STATUS_CANCELLED`) stream, else `null`.
/// `FL_STATUS_INVALID_STATE` before `fl_message_stream_next_event` reported the end.
///
/// # Safety
/// `stream` must be a live stream; `json` and `len` must be valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_message_stream_message(
    stream: *const fl_message_stream,
    json: *mut *const c_char,
    len: *mut usize,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `stream`.
        let stream = unsafe { text::handle_ref(stream, "stream") }?;
        let json = Out::new(json, "json")?;
        let len = Out::new(len, "len")?;
        let state = stream.lock();
        let outcome = outcome_of(&state, "fl_message_stream_message")?;
        // SAFETY: both not NULL (checked) and writable (the caller's promise). The outcome is
        // set once and lives until the free.
        unsafe { text::write_terminated(json, len, &outcome.message) };
        match &outcome.failure {
            None => Ok(()),
            Some(failure) => Err(FfiError::new(failure.status, failure.message.clone())),
        }
    })
}

/// How a request failed (`fl_message_stream_error`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct fl_client_error {
    /// `FL_STATUS_OK` when the request succeeded. Else: `FL_STATUS_PROVIDER_ERROR` (an error
    /// status, or an error event in the stream), `FL_STATUS_TRUNCATED` (the stream broke after
    /// events were delivered: `fl_message_stream_message` holds the partial message),
    /// `FL_STATUS_CONNECTION_ERROR`, `FL_STATUS_TIMEOUT`, `FL_STATUS_PROTOCOL_ERROR` (not an
    /// event stream, bad JSON), `FL_STATUS_INVALID_ARGUMENT` (the client's configuration cannot
    /// make the request), `FL_STATUS_CANCELLED`, `FL_STATUS_PANIC`.
    pub status: fl_status,
    /// The failure's stable code, NUL-terminated and static (NULL on success): the provider
    /// error's class as `fl_decoder_error_code` and the agent's `error_code` name it
    /// (`invalid_request`, `authentication`, `permission`, `not_found`, `rate_limited`,
    /// `quota_exceeded`, `overloaded`, `prompt_too_long`, `server`), or `stream_truncated`,
    /// `connection`, `timeout`, `protocol`, `invalid_configuration`, `aborted` (cancelled),
    /// `internal`.
    pub code: *const c_char,
    /// For `stream_truncated`, the code of the failure that broke the stream (`connection`,
    /// `timeout`, `overloaded`, ...); otherwise NULL.
    pub cause_code: *const c_char,
    /// The HTTP status of the error response (or the one an error event names), 0 when none.
    pub http_status: u16,
}

/// Writes into `*error` how the stream ended, and returns the failure's status: `FL_STATUS_OK`
/// (with `error->status` OK and `error->code` NULL) when it succeeded; otherwise that status,
/// with the failure's message (the provider's, with its request id) recorded for
/// `fl_last_error_message` on the calling thread. `error` is written in both cases. The request
/// id is `fl_message_stream_request_id`; the whole error (the provider's error type, a rate
/// limit's wait, a timeout's watchdog, ...) is `fl_message_stream_error_json`.
/// `FL_STATUS_INVALID_STATE` before the end (`error` is then not written).
///
/// # Safety
/// `stream` must be a live stream; `error` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_message_stream_error(
    stream: *const fl_message_stream,
    error: *mut fl_client_error,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `stream`.
        let stream = unsafe { text::handle_ref(stream, "stream") }?;
        let error = Out::new(error, "error")?;
        let state = stream.lock();
        let outcome = outcome_of(&state, "fl_message_stream_error")?;
        let written = match &outcome.failure {
            None => fl_client_error {
                status: fl_status::FL_STATUS_OK,
                code: std::ptr::null(),
                cause_code: std::ptr::null(),
                http_status: 0,
            },
            Some(failure) => fl_client_error {
                status: failure.status,
                code: failure.code.as_ptr(),
                cause_code: failure.cause.map_or(std::ptr::null(), CStr::as_ptr),
                http_status: failure.http_status,
            },
        };
        // SAFETY: not NULL (checked) and writable (the caller's promise).
        unsafe { error.write(written) };
        match &outcome.failure {
            None => Ok(()),
            Some(failure) => Err(FfiError::new(failure.status, failure.message.clone())),
        }
    })
}

/// Writes into `*json` / `*len` a view of the whole error of an ended request, as one JSON
/// object with the keys and meanings of the attributes of Python's exception for it (and of
/// Node's error's fields, there in camelCase), durations in milliseconds under names ending in
/// `_ms`; what `fl_client_error` has, and all it lacks:
///
/// - always: `code` (the struct's `code`), `message` (what `fl_last_error_message` gives after
///   `fl_message_stream_error`), `status` (the struct's `http_status`, `null` where it has 0;
///   for `stream_truncated`, as there, the cause's) and `request_id` (the provider's request id
///   of the failed response, `null` when it had no headers, and for `aborted`: a cancelled
///   request did not fail on the provider's side, and `fl_message_stream_request_id` still gives
///   the id of headers that had arrived);
/// - a provider error (`invalid_request`, `authentication`, `permission`, `not_found`,
///   `rate_limited`, `quota_exceeded`, `overloaded`, `prompt_too_long`, `server`):
///   `error_type`, the provider's error type (`"overloaded_error"`, `"rate_limit_exceeded"`),
///   `null` when it named none;
/// - `rate_limited`, `overloaded` and `server`: `retry_after_ms`, the wait the server asked
///   for (`retry-after` on the 429, the 529 or the 5xx, a 503's say), `null` when it named none
///   and for an error event inside a stream (Python's `retry_after` is in seconds);
/// - `prompt_too_long`: `tokens` and `limit`, the prompt's size and the model's limit in
///   tokens, each `null` when the provider's message did not say;
/// - `timeout`: `which`, the watchdog that fired (`"connect"`, `"first byte"`, `"first event"`,
///   `"idle"`, `"total"`), and `elapsed_ms`, the time that had passed (Python's `elapsed` is in
///   seconds);
/// - `protocol`: `limit`, the cap in bytes (the client's `max_event_bytes`) when an oversized
///   event ended the stream, else `null`;
/// - `stream_truncated`: `partial_message`, the message received before the break (what
///   `fl_message_stream_message` gives; `null` when none), and `cause`, the failure that broke
///   the stream as an object of this shape (Python's `__cause__`, Node's `cause`; its `code` is
///   the struct's `cause_code`);
/// - `connection`, `invalid_configuration`, `aborted` (cancelled; Python raises
///   `CancelledError`), `internal`: the four common keys only.
///
/// The provider's error body is not kept by the client: Python's `body` is `None` for these
/// errors and has no key here.
///
/// For a request that succeeded, the view is `null` (the JSON literal) and the status
/// `FL_STATUS_OK`. Unlike `fl_message_stream_error`, a failed request is no failure of this
/// function: it returns `FL_STATUS_OK` and records no message. Like
/// `fl_message_stream_metrics_json`, it may be called once `fl_message_stream_next_event` has
/// reported `FL_AGENT_NEXT_END` (or `fl_client_create` returned); before, it is
/// `FL_STATUS_INVALID_STATE`. The view is NUL-terminated, owned by the stream, and valid until
/// `fl_message_stream_free`; it never changes.
///
/// # Safety
/// `stream` must be a live stream; `json` and `len` must be valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_message_stream_error_json(
    stream: *const fl_message_stream,
    json: *mut *const c_char,
    len: *mut usize,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `stream`.
        let stream = unsafe { text::handle_ref(stream, "stream") }?;
        let json = Out::new(json, "json")?;
        let len = Out::new(len, "len")?;
        let state = stream.lock();
        let outcome = outcome_of(&state, "fl_message_stream_error_json")?;
        let rendered = outcome
            .failure
            .as_ref()
            .map_or(SUCCEEDED_ERROR_JSON, |failure| failure.json.as_str());
        // SAFETY: both not NULL (checked) and writable (the caller's promise). The string is
        // static or the outcome's, written once at the end and kept until the free.
        unsafe { text::write_terminated(json, len, rendered) };
        Ok(())
    })
}

/// The view of `fl_message_stream_error_json` for a request that succeeded: no error.
const SUCCEEDED_ERROR_JSON: &str = "null\0";

/// Writes into `*id` / `*len` the request id of the response being read (the `request-id` or
/// `x-request-id` header), known from the first event on, and after a failure that had headers
/// (an HTTP 400 has one); an empty view (`len` 0) when there is none yet. After a retry it is
/// the new attempt's. The view is NUL-terminated, owned by the stream, and valid until the
/// next `fl_message_stream_next_event` or `fl_message_stream_free`.
///
/// # Safety
/// `stream` must be a live stream; `id` and `len` must be valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_message_stream_request_id(
    stream: *const fl_message_stream,
    id: *mut *const c_char,
    len: *mut usize,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `stream`.
        let stream = unsafe { text::handle_ref(stream, "stream") }?;
        let id = Out::new(id, "id")?;
        let len = Out::new(len, "len")?;
        let mut state = stream.lock();
        if state.request_id.is_empty() {
            state.request_id.push('\0');
        }
        // SAFETY: both not NULL (checked) and writable (the caller's promise); the view points
        // into the state, untouched until the next event or the free.
        unsafe { text::write_terminated(id, len, &state.request_id) };
        Ok(())
    })
}

/// A request's measurements (`fl_message_stream_metrics`). Durations are in milliseconds from
/// the start of the request, negative when not measured (no headers, no event, ...).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct fl_request_metrics {
    /// Attempts made (1 when nothing was retried; 0 when none was made).
    pub attempts: u32,
    /// To the headers of the response used.
    pub time_to_headers_ms: f64,
    /// To its first event.
    pub time_to_first_event_ms: f64,
    /// To its first content (Anthropic: the first `content_block_delta`).
    pub time_to_first_token_ms: f64,
    /// To the end of the response.
    pub total_ms: f64,
    /// Response body bytes received, all attempts together.
    pub bytes_received: u64,
    /// Events received from the response used.
    pub events: u64,
}

/// Writes into `*metrics` the measurements of an ended request (time to first token, attempts,
/// bytes, ...), as Python's `stream.metrics` and Node's `metrics`; the request id, the retries,
/// the HTTP version and the final usage are in `fl_message_stream_metrics_json`.
/// `FL_STATUS_INVALID_STATE` before the end.
///
/// # Safety
/// `stream` must be a live stream; `metrics` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_message_stream_metrics(
    stream: *const fl_message_stream,
    metrics: *mut fl_request_metrics,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `stream`.
        let stream = unsafe { text::handle_ref(stream, "stream") }?;
        let metrics = Out::new(metrics, "metrics")?;
        let state = stream.lock();
        let measured = &outcome_of(&state, "fl_message_stream_metrics")?.metrics;
        let ms = |duration: Option<Duration>| duration.map_or(-1.0, millis);
        let written = fl_request_metrics {
            attempts: measured.attempts,
            time_to_headers_ms: ms(measured.time_to_headers),
            time_to_first_event_ms: ms(measured.time_to_first_event),
            time_to_first_token_ms: ms(measured.time_to_first_token),
            total_ms: ms(measured.total),
            bytes_received: measured.bytes_received,
            events: measured.events,
        };
        // SAFETY: not NULL (checked) and writable (the caller's promise).
        unsafe { metrics.write(written) };
        Ok(())
    })
}

/// Writes into `*json` / `*len` a view of the whole measurements of an ended request, as one
/// JSON object with the keys and meanings of Python's `stream.metrics` (`RequestMetrics`) and
/// Node's `metrics`, durations in milliseconds as in `fl_request_metrics`:
///
/// - `request_id`: the provider's request id of the successful response used (a string), `null`
///   when it sent none or no attempt got one (an error status's id is the `request_id` of
///   `fl_message_stream_error_json`);
/// - `attempts`: attempts made (1 when nothing was retried);
/// - `retries`: every retry, in order, each the `retry` event `fl_message_stream_next_event`
///   handed out for it (`{"type":"retry","attempt":2,"status":529,"wait":1.3,...}`, `wait` in
///   milliseconds); `[]` when none (Node gives their count: it is this array's length);
/// - `http_version`: the HTTP version of the successful response (`"HTTP/1.1"`, `"HTTP/2.0"`),
///   `null` when none came (an error status's response counts as none here, as for
///   `time_to_headers_ms`);
/// - `time_to_headers_ms`, `time_to_first_event_ms`, `time_to_first_token_ms`, `total_ms`: from
///   the start of the request, in milliseconds (Python's `time_to_headers`, ... are in seconds;
///   Node's `timeToHeadersMs`, ... in milliseconds), `null` when not reached (where the struct
///   has a negative value);
/// - `bytes_received`: response body bytes, all attempts together; `events`: events received
///   from the response used;
/// - `usage`: the provider's final `usage` object (the counts of the message's `usage`, the
///   later events' values replacing the earlier ones), `null` when it sent none.
///
/// Like `fl_message_stream_metrics` (whose fields are the same measurements), it may be called
/// once `fl_message_stream_next_event` has reported `FL_AGENT_NEXT_END` (or `fl_client_create`
/// returned), whatever the outcome; before, it is `FL_STATUS_INVALID_STATE`. The view is
/// NUL-terminated, owned by the stream, and valid until `fl_message_stream_free`; it never
/// changes.
///
/// # Safety
/// `stream` must be a live stream; `json` and `len` must be valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_message_stream_metrics_json(
    stream: *const fl_message_stream,
    json: *mut *const c_char,
    len: *mut usize,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `stream`.
        let stream = unsafe { text::handle_ref(stream, "stream") }?;
        let json = Out::new(json, "json")?;
        let len = Out::new(len, "len")?;
        let mut state = stream.lock();
        if state.metrics_json.is_empty() {
            let measured =
                metrics_json(&outcome_of(&state, "fl_message_stream_metrics_json")?.metrics);
            state.metrics_json = terminated(&measured);
        }
        // SAFETY: both not NULL (checked) and writable (the caller's promise). The string is
        // written once, after the end, and lives until the free.
        unsafe { text::write_terminated(json, len, &state.metrics_json) };
        Ok(())
    })
}

/// Cancels the request: its connection is closed and the stream ends (after the events already
/// received) with a failure of status `FL_STATUS_CANCELLED` and code `aborted`, the message
/// received so far kept. A thread waiting in `fl_message_stream_next_event` wakes up. No effect
/// on a stream that has already ended. Idempotent.
///
/// Thread-safe: any thread, at any time.
///
/// # Safety
/// `stream` must be a live stream.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_message_stream_cancel(stream: *const fl_message_stream) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `stream`.
        let stream = unsafe { text::handle_ref(stream, "stream") }?;
        stream.cancel.cancel();
        Ok(())
    })
}

/// Releases a stream and every view it handed out. NULL is accepted and ignored. A stream that
/// has not ended is cancelled: its request is dropped and its connection closed, without
/// waiting for the server.
///
/// # Safety
/// `stream` must be NULL or a stream from `fl_client_stream_start` or `fl_client_create`, not
/// freed yet, and no other call on it may be in progress; it must not be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_message_stream_free(stream: *mut fl_message_stream) {
    boundary::run_void(|| {
        if !stream.is_null() {
            // SAFETY: a pointer from `Box::into_raw` in `start`'s callers, freed only once.
            let mut stream = unsafe { Box::from_raw(stream) };
            stream.cancel.cancel();
            if let Some(task) = stream.task.take() {
                // Dropped on the client's runtime: the connection closes there.
                task.abort();
            }
            drop(stream.link.take());
            // Last: may shut the client's runtime down when the client was freed before.
            drop(stream.client.take());
        }
    });
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::boundary::last_error_for_tests;
    use crate::client::{fl_client_free, fl_client_new};
    use crate::exec::{fl_cancel_token_cancel, fl_cancel_token_free, fl_cancel_token_new};
    use proptest::prelude::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    /// A client of `port` on 127.0.0.1, no retries unless `extra` says otherwise.
    fn client(port: u16, extra: &str) -> *mut fl_client {
        let json = format!(
            r#"{{"from_env": false, "base_url": "http://127.0.0.1:{port}", "max_retries": 0,
                "retry_base_delay_ms": 1 {extra}}}"#
        );
        let mut client = std::ptr::null_mut();
        // SAFETY: `json` is readable for its length; `client` is a local.
        let status = unsafe { fl_client_new(json.as_ptr().cast(), json.len(), &mut client) };
        assert_eq!(
            status,
            fl_status::FL_STATUS_OK,
            "{}",
            last_error_for_tests()
        );
        client
    }

    const REQUEST: &str = r#"{"model": "m", "max_tokens": 16, "betas": ["b-1"],
        "messages": [{"role": "user", "content": "hi"}]}"#;

    fn start_stream(
        client: *const fl_client,
        json: &str,
        cancel: *const fl_cancel_token,
    ) -> (fl_status, *mut fl_message_stream) {
        let mut stream = std::ptr::null_mut();
        // SAFETY: `json` is readable for its length; `stream` is a local.
        let status = unsafe {
            fl_client_stream_start(
                client,
                json.as_ptr().cast(),
                json.len(),
                cancel,
                &mut stream,
            )
        };
        (status, stream)
    }

    /// The next item, waiting up to a hang guard.
    fn next(stream: *const fl_message_stream, timeout_ms: i64) -> (fl_agent_next, String) {
        let mut found = fl_agent_next::FL_AGENT_NEXT_NONE;
        let mut json = std::ptr::null();
        let mut len = 0usize;
        // SAFETY: a live stream; locals.
        let status = unsafe {
            fl_message_stream_next_event(stream, timeout_ms, &mut found, &mut json, &mut len)
        };
        assert_eq!(status, fl_status::FL_STATUS_OK);
        // SAFETY: the view is valid until the next call, NUL-terminated.
        let bytes = unsafe { std::slice::from_raw_parts(json.cast::<u8>(), len + 1) };
        assert_eq!(bytes[len], 0);
        (found, String::from_utf8(bytes[..len].to_vec()).unwrap())
    }

    /// Every event until the end (60 s per event: a hang guard).
    fn drain(stream: *const fl_message_stream) -> Vec<String> {
        let mut events = Vec::new();
        loop {
            match next(stream, 60_000) {
                (fl_agent_next::FL_AGENT_NEXT_EVENT, event) => events.push(event),
                (fl_agent_next::FL_AGENT_NEXT_END, _) => return events,
                (fl_agent_next::FL_AGENT_NEXT_NONE, _) => panic!("hang guard: {events:?}"),
            }
        }
    }

    fn message(stream: *const fl_message_stream) -> (fl_status, String) {
        let mut json = std::ptr::null();
        let mut len = 0usize;
        // SAFETY: a live stream; locals.
        let status = unsafe { fl_message_stream_message(stream, &mut json, &mut len) };
        if json.is_null() {
            return (status, String::new());
        }
        // SAFETY: the view is valid until the free.
        let bytes = unsafe { std::slice::from_raw_parts(json.cast::<u8>(), len) };
        (status, String::from_utf8(bytes.to_vec()).unwrap())
    }

    fn error(stream: *const fl_message_stream) -> (fl_status, fl_client_error) {
        let mut error = fl_client_error {
            status: fl_status::FL_STATUS_PANIC,
            code: std::ptr::null(),
            cause_code: std::ptr::null(),
            http_status: 1,
        };
        // SAFETY: a live stream; a local.
        let status = unsafe { fl_message_stream_error(stream, &mut error) };
        (status, error)
    }

    fn code(pointer: *const c_char) -> Option<String> {
        // SAFETY: NULL or a static NUL-terminated code.
        (!pointer.is_null()).then(|| unsafe { CStr::from_ptr(pointer) }.to_str().unwrap().into())
    }

    fn request_id(stream: *const fl_message_stream) -> String {
        let mut id = std::ptr::null();
        let mut len = 0usize;
        // SAFETY: a live stream; locals.
        let status = unsafe { fl_message_stream_request_id(stream, &mut id, &mut len) };
        assert_eq!(status, fl_status::FL_STATUS_OK);
        // SAFETY: the view is valid until the next event.
        let bytes = unsafe { std::slice::from_raw_parts(id.cast::<u8>(), len) };
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    /// Accepts one connection (hang guard 60 s) and reads its request head and body.
    fn accept(listener: &TcpListener) -> (TcpStream, String) {
        let (mut connection, _) = listener.accept().unwrap();
        connection
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = connection.read(&mut buf).unwrap();
            assert!(n > 0, "the client closed before sending its request");
            request.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&request).into_owned();
            if let Some(head_end) = text.find("\r\n\r\n") {
                let length = text[..head_end]
                    .lines()
                    .find_map(|line| {
                        let (name, value) = line.split_once(':')?;
                        name.eq_ignore_ascii_case("content-length")
                            .then(|| value.trim().parse::<usize>().ok())?
                    })
                    .unwrap_or(0);
                if request.len() >= head_end + 4 + length {
                    return (connection, text);
                }
            }
        }
    }

    const SSE: &str = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",",
        "\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],",
        "\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":3,",
        "\"output_tokens\":1}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,",
        "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,",
        "\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
    );
    const SSE_END: &str = concat!(
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":",
        "\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );

    fn response(status: &str, content_type: &str, body: &str, length: usize) -> String {
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {length}\r\n\
             request-id: req_unit\r\nconnection: close\r\n\r\n{body}"
        )
    }

    #[test]
    fn null_arguments_bad_json_and_early_reads_are_refused() {
        let client = client(9, "");
        for (json, status, expected) in [
            (
                "[]",
                fl_status::FL_STATUS_INVALID_ARGUMENT,
                "must be a JSON object",
            ),
            (
                "{",
                fl_status::FL_STATUS_INVALID_ARGUMENT,
                "is not valid JSON",
            ),
            (
                "",
                fl_status::FL_STATUS_INVALID_ARGUMENT,
                "is not valid JSON",
            ),
        ] {
            let (got, stream) = start_stream(client, json, std::ptr::null());
            assert_eq!(got, status, "{json:?}");
            assert!(stream.is_null());
            assert!(last_error_for_tests().contains(expected), "{json:?}");
            let mut out = std::ptr::null_mut();
            // SAFETY: `json` is readable; `out` is a local.
            let got = unsafe {
                fl_client_create(
                    client,
                    json.as_ptr().cast(),
                    json.len(),
                    std::ptr::null(),
                    &mut out,
                )
            };
            assert_eq!(got, status, "{json:?}");
            assert!(out.is_null());
        }
        let invalid = [0xffu8];
        let mut stream = std::ptr::null_mut();
        // SAFETY: NULL handles and out-parameters are the cases under test; otherwise locals.
        unsafe {
            assert_eq!(
                fl_client_stream_start(
                    client,
                    invalid.as_ptr().cast(),
                    1,
                    std::ptr::null(),
                    &mut stream
                ),
                fl_status::FL_STATUS_INVALID_UTF8
            );
            assert_eq!(
                fl_client_stream_start(
                    std::ptr::null(),
                    REQUEST.as_ptr().cast(),
                    REQUEST.len(),
                    std::ptr::null(),
                    &mut stream
                ),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            assert_eq!(
                fl_client_stream_start(client, std::ptr::null(), 2, std::ptr::null(), &mut stream),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            assert_eq!(
                fl_client_stream_start(
                    client,
                    REQUEST.as_ptr().cast(),
                    REQUEST.len(),
                    std::ptr::null(),
                    std::ptr::null_mut()
                ),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            assert_eq!(
                fl_client_create(
                    client,
                    REQUEST.as_ptr().cast(),
                    REQUEST.len(),
                    std::ptr::null(),
                    std::ptr::null_mut()
                ),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            let mut found = fl_agent_next::FL_AGENT_NEXT_NONE;
            let mut json = std::ptr::null();
            let mut len = 0usize;
            assert_eq!(
                fl_message_stream_next_event(std::ptr::null(), 0, &mut found, &mut json, &mut len),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            assert_eq!(
                fl_message_stream_message(std::ptr::null(), &mut json, &mut len),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            assert_eq!(
                fl_message_stream_cancel(std::ptr::null()),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            fl_message_stream_free(std::ptr::null_mut());
        }
        // A stream to a closed port: the getters refuse to answer before the end.
        let (status, stream) = start_stream(client, REQUEST, std::ptr::null());
        assert_eq!(status, fl_status::FL_STATUS_OK);
        assert_eq!(error(stream).0, fl_status::FL_STATUS_INVALID_STATE);
        assert_eq!(message(stream).0, fl_status::FL_STATUS_INVALID_STATE);
        // SAFETY: a live stream; NULL out-parameters are the cases under test.
        unsafe {
            let mut found = fl_agent_next::FL_AGENT_NEXT_NONE;
            let mut json = std::ptr::null();
            let mut len = 0usize;
            let mut metrics = std::mem::zeroed();
            assert_eq!(
                fl_message_stream_metrics(stream, &mut metrics),
                fl_status::FL_STATUS_INVALID_STATE
            );
            assert_eq!(
                fl_message_stream_next_event(stream, 0, std::ptr::null_mut(), &mut json, &mut len),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            assert_eq!(
                fl_message_stream_next_event(stream, 0, &mut found, std::ptr::null_mut(), &mut len),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            assert_eq!(
                fl_message_stream_next_event(
                    stream,
                    0,
                    &mut found,
                    &mut json,
                    std::ptr::null_mut()
                ),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            assert_eq!(
                fl_message_stream_error(stream, std::ptr::null_mut()),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            assert_eq!(
                fl_message_stream_request_id(stream, std::ptr::null_mut(), &mut len),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            assert_eq!(
                fl_message_stream_metrics(stream, std::ptr::null_mut()),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            assert_eq!(
                fl_message_stream_error_json(std::ptr::null(), &mut json, &mut len),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            assert_eq!(
                fl_message_stream_error_json(stream, std::ptr::null_mut(), &mut len),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
            assert_eq!(
                fl_message_stream_error_json(stream, &mut json, std::ptr::null_mut()),
                fl_status::FL_STATUS_NULL_ARGUMENT
            );
        }
        // Port 9 (discard) refuses on loopback: a connection failure ends the stream.
        assert!(drain(stream).is_empty());
        let (status, failure) = error(stream);
        assert_eq!(status, fl_status::FL_STATUS_CONNECTION_ERROR);
        assert_eq!(failure.status, fl_status::FL_STATUS_CONNECTION_ERROR);
        assert_eq!(code(failure.code).as_deref(), Some("connection"));
        assert_eq!(failure.http_status, 0);
        assert!(last_error_for_tests().contains("connection error"));
        assert_eq!(
            message(stream),
            (fl_status::FL_STATUS_CONNECTION_ERROR, "null".into())
        );
        // A connection failure has the common keys only (no headers: no request id).
        let whole = error_json_of(stream);
        assert_eq!(whole["code"], "connection");
        assert_eq!(whole["request_id"], Value::Null);
        assert_eq!(whole.as_object().unwrap().len(), 4, "{whole}");
        // SAFETY: handles from their constructors, freed once.
        unsafe {
            fl_message_stream_free(stream);
            fl_client_free(client);
        }
    }

    /// A streamed answer: its events in order, then the end (reported again), the final
    /// message, no failure, the request id, the measurements; the request as Python's and
    /// Node's clients send it (`stream: true`, `betas` as a header).
    #[test]
    fn a_stream_delivers_its_events_then_its_message() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut connection, request) = accept(&listener);
            let body = format!("{SSE}{SSE_END}");
            let reply = response("200 OK", "text/event-stream", &body, body.len());
            connection.write_all(reply.as_bytes()).unwrap();
            request
        });
        let client = client(port, "");
        let (status, stream) = start_stream(client, REQUEST, std::ptr::null());
        assert_eq!(status, fl_status::FL_STATUS_OK);
        // SAFETY: the client may go before its streams.
        unsafe { fl_client_free(client) };
        let events = drain(stream);
        let types: Vec<String> = events
            .iter()
            .map(|event| {
                serde_json::from_str::<Value>(event).unwrap()["type"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert!(types.contains(&"text_delta".to_owned()), "{events:?}");
        let delta = events
            .iter()
            .find(|event| event.contains("text_delta"))
            .unwrap();
        assert_eq!(delta, r#"{"type":"text_delta","index":0,"text":"Hi"}"#);
        assert_eq!(next(stream, 0).0, fl_agent_next::FL_AGENT_NEXT_END);
        let (status, text) = message(stream);
        assert_eq!(status, fl_status::FL_STATUS_OK);
        let message: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(message["content"], json!([{"type": "text", "text": "Hi"}]));
        assert_eq!(message["stop_reason"], "end_turn");
        let (status, failure) = error(stream);
        assert_eq!(status, fl_status::FL_STATUS_OK);
        assert_eq!(failure.status, fl_status::FL_STATUS_OK);
        assert!(failure.code.is_null() && failure.cause_code.is_null());
        assert_eq!(request_id(stream), "req_unit");
        // SAFETY: a live stream; a local.
        let metrics = unsafe {
            let mut metrics = std::mem::zeroed();
            assert_eq!(
                fl_message_stream_metrics(stream, &mut metrics),
                fl_status::FL_STATUS_OK
            );
            metrics
        };
        let metrics: fl_request_metrics = metrics;
        assert_eq!(metrics.attempts, 1);
        assert!(metrics.time_to_first_token_ms >= 0.0);
        assert_eq!(metrics.events, 6);
        // SAFETY: a stream from `fl_client_stream_start`, freed once.
        unsafe { fl_message_stream_free(stream) };
        let request = server.join().unwrap();
        assert!(request.contains("anthropic-beta: b-1"), "{request}");
        let body: Value =
            serde_json::from_str(&request[request.find("\r\n\r\n").unwrap() + 4..]).unwrap();
        assert_eq!(body["stream"], true);
        assert!(body.get("betas").is_none());
    }

    /// A stream's JSON getter (`fl_message_stream_metrics_json`, `fl_message_stream_error_json`).
    type JsonGetter =
        unsafe extern "C" fn(*const fl_message_stream, *mut *const c_char, *mut usize) -> fl_status;

    /// The view `getter` hands out (`FL_STATUS_OK` asserted), checked NUL-terminated, parsed.
    fn json_view_of(getter: JsonGetter, stream: *const fl_message_stream) -> Value {
        let mut json = std::ptr::null();
        let mut len = 0usize;
        // SAFETY: a live stream; locals.
        let status = unsafe { getter(stream, &mut json, &mut len) };
        assert_eq!(
            status,
            fl_status::FL_STATUS_OK,
            "{}",
            last_error_for_tests()
        );
        // SAFETY: the view is valid until the free, NUL-terminated.
        let bytes = unsafe { std::slice::from_raw_parts(json.cast::<u8>(), len + 1) };
        assert_eq!(bytes[len], 0);
        serde_json::from_slice(&bytes[..len]).unwrap()
    }

    /// The metrics JSON of a stream, parsed.
    fn metrics_of(stream: *const fl_message_stream) -> Value {
        json_view_of(fl_message_stream_metrics_json, stream)
    }

    /// A request retried once (an HTTP 529, then the answer): its whole metrics as JSON, with
    /// what the struct lacks (the request id, the retry as the stream's `retry` event gave it,
    /// the HTTP version, the final usage) and the struct's measurements, in milliseconds.
    /// Refused before the end, as the struct function is.
    #[test]
    fn the_metrics_json_of_a_retried_request_has_everything() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (answered, wait_answered) = std::sync::mpsc::channel();
        let server = std::thread::spawn(move || {
            let (mut connection, _) = accept(&listener);
            let body =
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
            let reply = response("529 Overloaded", "application/json", body, body.len());
            connection.write_all(reply.as_bytes()).unwrap();
            drop(connection);
            let (mut connection, _) = accept(&listener);
            // The answer's first part, then (once the test read the metrics too early) the rest.
            let whole = SSE.len() + SSE_END.len();
            let reply = response("200 OK", "text/event-stream", SSE, whole);
            connection.write_all(reply.as_bytes()).unwrap();
            wait_answered.recv().unwrap();
            connection.write_all(SSE_END.as_bytes()).unwrap();
        });
        let client = client(port, r#", "max_retries": 2"#);
        let (status, stream) = start_stream(client, REQUEST, std::ptr::null());
        assert_eq!(status, fl_status::FL_STATUS_OK);
        let mut events = Vec::new();
        while !events
            .iter()
            .any(|event: &String| event.contains("text_delta"))
        {
            let (found, event) = next(stream, 60_000);
            assert_eq!(found, fl_agent_next::FL_AGENT_NEXT_EVENT, "{events:?}");
            events.push(event);
        }
        let mut json = std::ptr::null();
        let mut len = 0usize;
        // SAFETY: a live stream; locals.
        let early = unsafe { fl_message_stream_metrics_json(stream, &mut json, &mut len) };
        assert_eq!(early, fl_status::FL_STATUS_INVALID_STATE);
        assert!(last_error_for_tests().contains("fl_message_stream_metrics_json"));
        answered.send(()).unwrap();
        events.extend(drain(stream));
        server.join().unwrap();
        let retry: Value = serde_json::from_str(&events[0]).unwrap();
        assert_eq!(retry["type"], "retry", "{events:?}");
        assert_eq!(retry["status"], 529);
        let (status, text) = message(stream);
        assert_eq!(status, fl_status::FL_STATUS_OK);
        let final_usage = serde_json::from_str::<Value>(&text).unwrap()["usage"].clone();
        let metrics = metrics_of(stream);
        let keys: Vec<&str> = metrics
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "request_id",
                "attempts",
                "retries",
                "http_version",
                "time_to_headers_ms",
                "time_to_first_event_ms",
                "time_to_first_token_ms",
                "total_ms",
                "bytes_received",
                "events",
                "usage"
            ]
        );
        assert_eq!(metrics["request_id"], "req_unit");
        assert_eq!(metrics["attempts"], 2);
        assert_eq!(metrics["retries"], json!([retry]));
        assert_eq!(metrics["http_version"], "HTTP/1.1");
        assert_eq!(metrics["usage"], final_usage);
        assert_eq!(
            metrics["usage"],
            json!({"input_tokens": 3, "output_tokens": 2})
        );
        assert_eq!(metrics["events"], 6);
        // The struct's measurements, the same numbers.
        // SAFETY: a live stream; a local.
        let measured = unsafe {
            let mut measured = std::mem::zeroed();
            assert_eq!(
                fl_message_stream_metrics(stream, &mut measured),
                fl_status::FL_STATUS_OK
            );
            measured
        };
        let measured: fl_request_metrics = measured;
        assert_eq!(metrics["bytes_received"], measured.bytes_received);
        for (key, value) in [
            ("time_to_headers_ms", measured.time_to_headers_ms),
            ("time_to_first_event_ms", measured.time_to_first_event_ms),
            ("time_to_first_token_ms", measured.time_to_first_token_ms),
            ("total_ms", measured.total_ms),
        ] {
            assert!(value >= 0.0, "{key}");
            // serde_json reads a float back to within an ulp or so, not always exactly (its
            // `float_roundtrip` feature is off): 4.248027 came back as 4.2480269999999996.
            let read = metrics[key].as_f64().unwrap();
            assert!(
                (read - value).abs() <= value * 1e-12,
                "{key}: {read} against {value}"
            );
        }
        // Read again: the same view.
        assert_eq!(metrics_of(stream), metrics);
        // SAFETY: handles from their constructors, freed once.
        unsafe {
            fl_message_stream_free(stream);
            fl_client_free(client);
        }
    }

    /// A request that never got a response: `null` for what was not measured, no usage.
    #[test]
    fn the_metrics_json_of_a_refused_connection_has_nulls() {
        // Port 9 on loopback: nothing listens (as the README's examples assume).
        let client = client(9, "");
        let (_, stream) = start_stream(client, REQUEST, std::ptr::null());
        assert!(drain(stream).is_empty());
        assert_eq!(error(stream).0, fl_status::FL_STATUS_CONNECTION_ERROR);
        let metrics = metrics_of(stream);
        for key in [
            "request_id",
            "http_version",
            "time_to_headers_ms",
            "time_to_first_event_ms",
            "time_to_first_token_ms",
            "usage",
        ] {
            assert_eq!(metrics[key], Value::Null, "{key}: {metrics}");
        }
        assert_eq!(metrics["retries"], json!([]));
        assert_eq!(metrics["events"], 0);
        // SAFETY: handles from their constructors, freed once.
        unsafe {
            fl_message_stream_free(stream);
            fl_client_free(client);
        }
    }

    /// A request's task that panics ends its stream as an internal failure (`FL_STATUS_PANIC`,
    /// code `internal`) whose message is the panic's.
    #[test]
    fn a_panic_in_a_requests_task_ends_the_stream_with_its_message() {
        let client = client(9, "");
        // SAFETY: a live client from `fl_client_new`.
        let shared = Arc::clone(&unsafe { &*client }.shared);
        let stream = fl_message_stream::spawned(shared, CancellationToken::new(), None, |_| {
            Box::pin(async { panic!("boom in the request's task") })
        })
        .unwrap();
        let stream = Box::into_raw(stream);
        assert_eq!(next(stream, 60_000).0, fl_agent_next::FL_AGENT_NEXT_END);
        let (status, failure) = error(stream);
        assert_eq!(status, fl_status::FL_STATUS_PANIC);
        assert_eq!(code(failure.code).as_deref(), Some("internal"));
        assert_eq!(
            last_error_for_tests(),
            "internal error: panic: boom in the request's task"
        );
        // SAFETY: handles from their constructors, freed once.
        unsafe {
            fl_message_stream_free(stream);
            fl_client_free(client);
        }
    }

    /// Freeing a stream mid-way closes its connection (the server reads the end of it)
    /// rather than reading the response to its end for nobody.
    #[test]
    fn freeing_a_stream_mid_way_closes_its_connection() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (sent, wait_sent) = std::sync::mpsc::channel();
        let server = std::thread::spawn(move || {
            let (mut connection, _) = accept(&listener);
            // A long body announced, a part sent: the client waits for the rest.
            let reply = response(
                "200 OK",
                "text/event-stream",
                SSE,
                SSE.len() + SSE_END.len(),
            );
            connection.write_all(reply.as_bytes()).unwrap();
            sent.send(()).unwrap();
            let mut buf = [0u8; 64];
            loop {
                match connection.read(&mut buf) {
                    Ok(0) => return true,
                    Ok(_) => {}
                    // The hang guard (60 s) expired: the connection stayed open.
                    Err(_) => return false,
                }
            }
        });
        // No stall notice nor idle timeout within the hang guard: nothing but the free may end
        // the request.
        let client = client(
            port,
            r#", "stall_notice_ms": 600000, "idle_timeout_ms": 600000"#,
        );
        let (_, stream) = start_stream(client, REQUEST, std::ptr::null());
        wait_sent.recv().unwrap();
        // Every event sent is read: the request's task now waits for the network, with
        // nothing left to hand over (a send to a freed stream would end it on its own).
        loop {
            let (found, event) = next(stream, 60_000);
            assert_eq!(found, fl_agent_next::FL_AGENT_NEXT_EVENT, "{event}");
            if event.contains("text_delta") {
                break;
            }
        }
        // SAFETY: a stream from `fl_client_stream_start`, freed once.
        unsafe { fl_message_stream_free(stream) };
        // The client lives on (its runtime too): only the stream's own end closes the
        // connection.
        assert!(server.join().unwrap(), "the connection stayed open");
        // SAFETY: a client from `fl_client_new`, freed once.
        unsafe { fl_client_free(client) };
    }

    /// A stream cut mid-way is truncated, its cause a connection failure, and still gives the
    /// partial message.
    #[test]
    fn a_cut_stream_is_truncated_with_its_partial_message() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut connection, _) = accept(&listener);
            let reply = response(
                "200 OK",
                "text/event-stream",
                SSE,
                SSE.len() + SSE_END.len(),
            );
            connection.write_all(reply.as_bytes()).unwrap();
        });
        let client = client(port, "");
        let (_, stream) = start_stream(client, REQUEST, std::ptr::null());
        let events = drain(stream);
        server.join().unwrap();
        assert!(
            events.iter().any(|event| event.contains("\"Hi\"")),
            "{events:?}"
        );
        let (status, failure) = error(stream);
        assert_eq!(status, fl_status::FL_STATUS_TRUNCATED);
        assert_eq!(code(failure.code).as_deref(), Some("stream_truncated"));
        assert_eq!(code(failure.cause_code).as_deref(), Some("connection"));
        let (status, partial) = message(stream);
        assert_eq!(status, fl_status::FL_STATUS_TRUNCATED);
        let partial: Value = serde_json::from_str(&partial).unwrap();
        assert_eq!(partial["content"][0]["text"], "Hi");
        assert_eq!(request_id(stream), "req_unit");
        // SAFETY: handles from their constructors, freed once.
        unsafe {
            fl_message_stream_free(stream);
            fl_client_free(client);
        }
    }

    /// An HTTP 400: a provider failure of class `invalid_request`, its status and request id.
    #[test]
    fn an_error_response_is_a_typed_failure() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            for _ in 0..2 {
                let (mut connection, _) = accept(&listener);
                let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: required"}}"#;
                let reply = response("400 Bad Request", "application/json", body, body.len());
                connection.write_all(reply.as_bytes()).unwrap();
            }
        });
        let client = client(port, "");
        let (_, stream) = start_stream(client, REQUEST, std::ptr::null());
        assert!(drain(stream).is_empty());
        let mut out = std::ptr::null_mut();
        // SAFETY: `REQUEST` is readable; `out` is a local.
        let status = unsafe {
            fl_client_create(
                client,
                REQUEST.as_ptr().cast(),
                REQUEST.len(),
                std::ptr::null(),
                &mut out,
            )
        };
        assert_eq!(status, fl_status::FL_STATUS_OK);
        server.join().unwrap();
        for handle in [stream, out] {
            let (status, failure) = error(handle);
            assert_eq!(status, fl_status::FL_STATUS_PROVIDER_ERROR);
            assert_eq!(failure.status, fl_status::FL_STATUS_PROVIDER_ERROR);
            assert_eq!(code(failure.code).as_deref(), Some("invalid_request"));
            assert!(failure.cause_code.is_null());
            assert_eq!(failure.http_status, 400);
            assert!(last_error_for_tests().contains("max_tokens: required"));
            assert_eq!(request_id(handle), "req_unit");
            assert_eq!(
                message(handle),
                (fl_status::FL_STATUS_PROVIDER_ERROR, "null".into())
            );
            assert_eq!(next(handle, 0).0, fl_agent_next::FL_AGENT_NEXT_END);
        }
        // SAFETY: handles from their constructors, freed once.
        unsafe {
            fl_message_stream_free(stream);
            fl_message_stream_free(out);
            fl_client_free(client);
        }
    }

    /// Runs `fl_client_create` with `REQUEST` on `client` and returns its handle.
    fn create(client: *const fl_client) -> *mut fl_message_stream {
        let mut out = std::ptr::null_mut();
        // SAFETY: `REQUEST` is readable; `out` is a local.
        let status = unsafe {
            fl_client_create(
                client,
                REQUEST.as_ptr().cast(),
                REQUEST.len(),
                std::ptr::null(),
                &mut out,
            )
        };
        assert_eq!(
            status,
            fl_status::FL_STATUS_OK,
            "{}",
            last_error_for_tests()
        );
        out
    }

    /// A create that failed after a retry (a 500, then a 400 that is final) reports the
    /// attempts and the retry it made, as a failed stream does. It reported empty metrics (0
    /// attempts, no retries): the core's `create` returned no metrics with its error.
    #[test]
    fn a_failed_create_reports_its_attempts_and_retries() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            for (status, kind) in [
                ("500 Internal Server Error", "api_error"),
                ("400 Bad Request", "invalid_request_error"),
            ] {
                let (mut connection, _) = accept(&listener);
                let body =
                    format!(r#"{{"type":"error","error":{{"type":"{kind}","message":"x"}}}}"#);
                let reply = response(status, "application/json", &body, body.len());
                connection.write_all(reply.as_bytes()).unwrap();
            }
        });
        let client = client(port, r#", "max_retries": 2"#);
        let out = create(client);
        server.join().unwrap();
        let (status, failure) = error(out);
        assert_eq!(status, fl_status::FL_STATUS_PROVIDER_ERROR);
        assert_eq!(code(failure.code).as_deref(), Some("invalid_request"));
        let metrics = metrics_of(out);
        assert_eq!(metrics["attempts"], 2, "{metrics}");
        let retries = metrics["retries"].as_array().unwrap();
        assert_eq!(retries.len(), 1, "{metrics}");
        assert_eq!(retries[0]["status"], 500, "{metrics}");
        assert!(metrics["bytes_received"].as_u64().unwrap() > 0, "{metrics}");
        assert!(metrics["total_ms"].as_f64().unwrap() >= 0.0, "{metrics}");
        // SAFETY: a live stream; a local.
        let measured: fl_request_metrics = unsafe {
            let mut measured = std::mem::zeroed();
            assert_eq!(
                fl_message_stream_metrics(out, &mut measured),
                fl_status::FL_STATUS_OK
            );
            measured
        };
        assert_eq!(measured.attempts, 2);
        // SAFETY: handles from their constructors, freed once.
        unsafe {
            fl_message_stream_free(out);
            fl_client_free(client);
        }
    }

    /// A 200 whose JSON body is not an object (`[1, 2]`) is a protocol failure, as in Python
    /// and Node: a generation answer is an object. It was returned as the answer.
    #[test]
    fn create_on_a_200_that_is_not_a_json_object_is_a_protocol_failure() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut connection, _) = accept(&listener);
            let body = "[1, 2]";
            let reply = response("200 OK", "application/json", body, body.len());
            connection.write_all(reply.as_bytes()).unwrap();
        });
        let client = client(port, "");
        let out = create(client);
        server.join().unwrap();
        let (status, failure) = error(out);
        assert_eq!(status, fl_status::FL_STATUS_PROTOCOL_ERROR);
        assert_eq!(code(failure.code).as_deref(), Some("protocol"));
        assert!(last_error_for_tests().contains("not a JSON object"));
        assert_eq!(message(out).1, "null");
        assert_eq!(metrics_of(out)["attempts"], 1);
        // SAFETY: handles from their constructors, freed once.
        unsafe {
            fl_message_stream_free(out);
            fl_client_free(client);
        }
    }

    /// The view of `fl_message_stream_error_json`, parsed.
    fn error_json_of(stream: *const fl_message_stream) -> Value {
        json_view_of(fl_message_stream_error_json, stream)
    }

    /// Serves one reply per connection, in order, each read whole first.
    fn serve(replies: Vec<String>) -> (u16, std::thread::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            for reply in replies {
                let (mut connection, _) = accept(&listener);
                connection.write_all(reply.as_bytes()).unwrap();
            }
        });
        (port, server)
    }

    /// The whole error of a failed request as JSON, what the struct lacks included: a 429's
    /// wait (`retry-after`, in milliseconds) and the provider's error type; a prompt too long's
    /// sizes; the request id. Refused before the end; the view stays the same until the free.
    #[test]
    fn the_error_json_of_a_provider_failure_has_python_s_fields() {
        let limited =
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#;
        let too_long = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;
        let (port, server) = serve(vec![
            format!(
                "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\n\
                 retry-after: 2\r\ncontent-length: {}\r\nrequest-id: req_limited\r\n\
                 connection: close\r\n\r\n{limited}",
                limited.len()
            ),
            response(
                "400 Bad Request",
                "application/json",
                too_long,
                too_long.len(),
            ),
        ]);
        let client = client(port, "");
        let (_, stream) = start_stream(client, REQUEST, std::ptr::null());
        let mut json = std::ptr::null();
        let mut len = 0usize;
        // SAFETY: a live stream; locals. (Refused whatever the task did: the end is the host's
        // once `fl_message_stream_next_event` reported it.)
        let early = unsafe { fl_message_stream_error_json(stream, &mut json, &mut len) };
        assert_eq!(early, fl_status::FL_STATUS_INVALID_STATE);
        assert!(last_error_for_tests().contains("fl_message_stream_error_json"));
        assert!(drain(stream).is_empty(), "max_retries 0: no retry");
        let (status, failure) = error(stream);
        assert_eq!(status, fl_status::FL_STATUS_PROVIDER_ERROR);
        assert_eq!(code(failure.code).as_deref(), Some("rate_limited"));
        let whole = error_json_of(stream);
        assert_eq!(
            whole,
            json!({
                "code": "rate_limited",
                "message": whole["message"],
                "status": 429,
                "request_id": "req_limited",
                "error_type": "rate_limit_error",
                "retry_after_ms": 2000.0,
            })
        );
        assert!(whole["message"].as_str().unwrap().contains("slow down"));
        // The same view again: owned by the stream, never changed.
        let first = {
            let mut json = std::ptr::null();
            let mut len = 0usize;
            // SAFETY: a live stream; locals.
            unsafe { fl_message_stream_error_json(stream, &mut json, &mut len) };
            json
        };
        let mut again = std::ptr::null();
        // SAFETY: a live stream; locals.
        unsafe { fl_message_stream_error_json(stream, &mut again, &mut len) };
        assert_eq!(first, again);

        let (_, sized) = start_stream(client, REQUEST, std::ptr::null());
        assert!(drain(sized).is_empty());
        server.join().unwrap();
        assert_eq!(
            error_json_of(sized),
            json!({
                "code": "prompt_too_long",
                "message": "prompt too long: HTTP 400 invalid_request_error: prompt is too long: \
                            210000 tokens > 200000 maximum (request id req_unit)",
                "status": 400,
                "request_id": "req_unit",
                "error_type": "invalid_request_error",
                "tokens": 210000,
                "limit": 200000,
            })
        );
        // SAFETY: handles from their constructors, freed once.
        unsafe {
            fl_message_stream_free(stream);
            fl_message_stream_free(sized);
            fl_client_free(client);
        }
    }

    /// A timeout's JSON names its watchdog and the time that had passed, in milliseconds; a
    /// request that succeeded has `null` (and `FL_STATUS_OK`).
    #[test]
    fn the_error_json_of_a_timeout_and_of_a_success() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (done, wait_done) = std::sync::mpsc::channel::<()>();
        let server = std::thread::spawn(move || {
            // Held without an answer until the client gave up.
            let (held, _) = accept(&listener);
            let _ = wait_done.recv();
            drop(held);
            let (mut connection, _) = accept(&listener);
            let whole = format!("{SSE}{SSE_END}");
            let reply = response("200 OK", "text/event-stream", &whole, whole.len());
            connection.write_all(reply.as_bytes()).unwrap();
        });
        let client = client(port, r#", "first_byte_timeout_ms": 100"#);
        let (_, stream) = start_stream(client, REQUEST, std::ptr::null());
        drain(stream);
        done.send(()).unwrap();
        let (status, _) = error(stream);
        assert_eq!(status, fl_status::FL_STATUS_TIMEOUT);
        let whole = error_json_of(stream);
        assert_eq!(whole["code"], "timeout", "{whole}");
        assert_eq!(whole["which"], "first byte", "{whole}");
        let elapsed = whole["elapsed_ms"].as_f64().unwrap();
        assert!(elapsed >= 100.0, "{whole}");
        assert_eq!(whole["status"], Value::Null);
        assert_eq!(whole.as_object().unwrap().len(), 6, "{whole}");

        let (_, answered) = start_stream(client, REQUEST, std::ptr::null());
        drain(answered);
        server.join().unwrap();
        assert_eq!(error(answered).0, fl_status::FL_STATUS_OK);
        assert_eq!(error_json_of(answered), Value::Null);
        // SAFETY: handles from their constructors, freed once.
        unsafe {
            fl_message_stream_free(stream);
            fl_message_stream_free(answered);
            fl_client_free(client);
        }
    }

    /// The failures no loopback server gives easily: each class's own keys, as Python's
    /// exception has them (a truncation's cause as an object of the same shape, its code the
    /// struct's `cause_code`); a cancel has the common keys only.
    #[test]
    fn the_error_json_of_each_class_has_its_own_keys() {
        use ferroloop_core::client::PartialResponse;
        let truncated = ClientError::Truncated {
            partial: PartialResponse {
                events: 2,
                bytes: 10,
                last_event_type: None,
                message: Some(Box::new(json!({"content": []}))),
            },
            cause: Box::new(ClientError::Connection {
                message: "reset".into(),
                request_id: Some("req_c".into()),
            }),
            request_id: Some("req_t".into()),
        };
        let whole = error_json(&truncated);
        assert_eq!(whole["code"], "stream_truncated");
        assert_eq!(whole["request_id"], "req_t");
        assert_eq!(whole["partial_message"], json!({"content": []}));
        assert_eq!(
            whole["cause"],
            json!({"code": "connection", "message": "connection error: reset", "status": null,
                   "request_id": "req_c"})
        );
        let oversized = ClientError::EventTooLarge {
            limit: 4096,
            request_id: None,
        };
        assert_eq!(error_json(&oversized)["code"], "protocol");
        assert_eq!(error_json(&oversized)["limit"], 4096);
        let protocol = ClientError::Protocol {
            message: "not an event stream".into(),
            request_id: None,
        };
        assert_eq!(error_json(&protocol)["limit"], Value::Null);
        let unknown_wait = ClientError::RateLimited {
            details: ferroloop_core::client::ErrorDetails {
                error_type: Some("rate_limit_error".into()),
                message: "x".into(),
                ..Default::default()
            },
            retry_after: None,
        };
        let whole = error_json(&unknown_wait);
        assert_eq!(whole["retry_after_ms"], Value::Null, "{whole}");
        assert_eq!(whole["status"], Value::Null, "{whole}");
        let config = ClientError::Config("bad URL".into());
        assert_eq!(
            error_json(&config),
            json!({"code": "invalid_configuration", "message": "invalid client configuration: bad URL",
                   "status": null, "request_id": null})
        );
        let cancelled: Value =
            serde_json::from_str(Failure::cancelled().json.strip_suffix('\0').unwrap()).unwrap();
        assert_eq!(
            cancelled,
            json!({"code": "aborted", "message": "the request was cancelled", "status": null,
                   "request_id": null})
        );
    }

    /// A stream waiting for its answer: nothing within the timeout is `NONE`; a cancel (the
    /// function, or the token) ends it `aborted` and closes the connection.
    #[test]
    fn a_waiting_stream_ends_when_cancelled() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let mut closed = 0;
            for _ in 0..2 {
                let (mut connection, _) = accept(&listener);
                let mut buf = [0u8; 64];
                // Never answers; reads until the client closes (hang guard: 60 s).
                if let Ok(0) = connection.read(&mut buf) {
                    closed += 1;
                }
            }
            closed
        });
        let client = client(port, "");
        let (_, stream) = start_stream(client, REQUEST, std::ptr::null());
        assert_eq!(
            next(stream, 20),
            (fl_agent_next::FL_AGENT_NEXT_NONE, String::new())
        );
        // SAFETY: a live stream.
        let cancelled = unsafe { fl_message_stream_cancel(stream) };
        assert_eq!(cancelled, fl_status::FL_STATUS_OK);
        assert!(drain(stream).is_empty());
        let (status, failure) = error(stream);
        assert_eq!(status, fl_status::FL_STATUS_CANCELLED);
        assert_eq!(code(failure.code).as_deref(), Some("aborted"));
        // The token of a create, cancelled by another thread while the create waits.
        let mut token = std::ptr::null_mut();
        // SAFETY: `token` is a local.
        let made = unsafe { fl_cancel_token_new(&mut token) };
        assert_eq!(made, fl_status::FL_STATUS_OK);
        let token_address = token as usize;
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            // SAFETY: the token lives until the create returned and this thread was joined.
            unsafe { fl_cancel_token_cancel(token_address as *const fl_cancel_token) };
        });
        let mut out = std::ptr::null_mut();
        // SAFETY: `REQUEST` is readable; a live token; `out` is a local.
        let status = unsafe {
            fl_client_create(
                client,
                REQUEST.as_ptr().cast(),
                REQUEST.len(),
                token,
                &mut out,
            )
        };
        assert_eq!(status, fl_status::FL_STATUS_OK);
        canceller.join().unwrap();
        assert_eq!(error(out).0, fl_status::FL_STATUS_CANCELLED);
        // SAFETY: handles from their constructors, freed once.
        unsafe {
            fl_cancel_token_free(token);
            fl_message_stream_free(stream);
            fl_message_stream_free(out);
            fl_client_free(client);
        }
        assert_eq!(server.join().unwrap(), 2);
    }

    proptest! {
        /// Any text is either refused as an argument or becomes a body with `stream` set as
        /// asked and no `betas`; never a panic.
        #[test]
        fn request_bodies_are_parsed_or_refused(text in ".{0,64}", stream in any::<bool>()) {
            match request_body(&text, stream, Provider::Anthropic) {
                Ok((body, _)) => {
                    let body: Value = serde_json::from_slice(&body).unwrap();
                    prop_assert_eq!(&body["stream"], &Value::Bool(stream));
                    prop_assert!(body.get("betas").is_none());
                }
                Err(error) => prop_assert_eq!(error.status, fl_status::FL_STATUS_INVALID_ARGUMENT),
            }
        }

        /// The betas of an object are taken out (Anthropic only), whatever else it holds.
        #[test]
        fn betas_are_taken_out_for_anthropic(flags in proptest::collection::vec("[a-z0-9-]{1,12}", 0..4),
                                               key in "[a-z]{1,8}") {
            let json = json!({"betas": flags, key.clone(): 1}).to_string();
            let (body, betas) = request_body(&json, true, Provider::Anthropic).unwrap();
            let body: Value = serde_json::from_slice(&body).unwrap();
            if key != "betas" && key != "stream" {
                prop_assert_eq!(&body[&key], &json!(1));
            }
            if key != "betas" {
                prop_assert_eq!(betas, flags.clone());
            }
            let (_, betas) = request_body(&json, true, Provider::OpenAiChat).unwrap();
            prop_assert!(betas.is_empty());
        }
    }
}
