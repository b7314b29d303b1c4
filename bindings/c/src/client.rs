//! The streaming HTTP client (`fl_client`), as the model of the agent loop.
//!
//! A client owns a small multi-threaded tokio runtime (one worker thread) on which every HTTP
//! request of its agents runs: the connection pool, TLS, retries and watchdogs live there, so
//! connections are reused across runs and a response keeps streaming while the host is busy
//! between two `fl_agent_run_next_event` calls. The loop itself (and the C tools) runs on each
//! run's own runtime, driven by the host's thread; the two meet at a channel of model events
//! ([`ClientModel`]). A pool shared by runtimes the host drives would hang: a connection opened
//! on one run's runtime could be picked up by another run while the first is not being driven.

use std::ffi::c_char;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use ferroloop_core::agent::{Model, ModelError, ModelEvent, ModelStream};
use ferroloop_core::client::{Client, ClientConfig, Provider};
use futures_core::Stream;
use futures_util::{FutureExt, StreamExt};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::boundary::{self, FfiError, FfiResult};
use crate::options::JsonOptions;
use crate::owned_runtime::OwnedRuntime;
use crate::status::fl_status;
use crate::text::{self, Out};

/// A streaming HTTP client for one provider endpoint (opaque): the model an agent calls.
/// Create it with `fl_client_new`, give it to `fl_agent_new`, release it with `fl_client_free`.
///
/// Thread-safe: agents on any number of threads may share one client (and its connection
/// pool).
pub struct fl_client {
    pub(crate) shared: Arc<ClientShared>,
    /// The provider's name, NUL-terminated (the view of `fl_client_provider`).
    provider: String,
    /// The endpoint's base URL, NUL-terminated (the view of `fl_client_base_url`).
    base_url: String,
}

/// What a client's agents and runs share: the core client and the runtime its requests run on.
/// The last owner to go (the client, an agent or a run) shuts the runtime down (in a child
/// forked after the client was made, it leaves it alone: see [`OwnedRuntime`]).
pub(crate) struct ClientShared {
    /// Dropped first (fields drop in order): the runtime stops before the client's pool goes.
    io: OwnedRuntime,
    client: Client,
}

/// What a forked child is told when it uses a client made before the fork.
const FORKED_MESSAGE: &str = "this client was made before fork(): its thread and connections \
     belong to the parent process, and a request would never run here; make a new client in \
     this process";

impl ClientShared {
    /// The core client.
    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// Whether this process is a child forked after the client was made.
    pub(crate) fn forked(&self) -> bool {
        self.io.forked()
    }

    /// `FL_STATUS_INVALID_STATE` in a child forked after the client was made.
    pub(crate) fn check_process(&self) -> FfiResult {
        if self.forked() {
            return Err(FfiError::state(FORKED_MESSAGE));
        }
        Ok(())
    }

    /// Spawns `task` on the client's runtime (where every request of this client runs: its
    /// connection pool must not be shared with runtimes the host drives, see the module doc).
    pub(crate) fn spawn<F>(&self, task: F) -> FfiResult<tokio::task::JoinHandle<()>>
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        self.check_process()?;
        Ok(self.io.spawn(task))
    }

    /// The client as the loop's model.
    pub(crate) fn model(self: &Arc<Self>) -> Arc<dyn Model> {
        Arc::new(ClientModel {
            shared: Arc::clone(self),
        })
    }
}

/// The client as a [`Model`] whose calls run on the client's runtime.
struct ClientModel {
    shared: Arc<ClientShared>,
}

impl Model for ClientModel {
    fn stream(&self, request: Value) -> ModelStream {
        if self.shared.forked() {
            // A run made before a fork, driven in the child: the call fails at once rather
            // than waiting for a thread the child does not have.
            let failure = ModelError::with_code("invalid_configuration", FORKED_MESSAGE);
            return Box::pin(futures_util::stream::once(std::future::ready(
                ModelEvent::Failed(failure),
            )));
        }
        let (events, rx) = mpsc::unbounded_channel();
        let client = self.shared.client.clone();
        // Unbounded, as the loop's own event channel: the request is read at the network's
        // pace, not the host's, so the client's idle watchdog never counts the host's pauses.
        let task = self
            .shared
            .io
            .spawn(forward(move || Model::stream(&client, request), events));
        Box::pin(Forwarded { rx, task })
    }
}

/// Hands the events of the call `start` makes to the loop, until its end or until the loop
/// drops the call. A panic starting or polling the call (on the client's thread, out of the
/// loop's reach) becomes the call's failure, code `internal` with the panic's message, as the
/// core reports a model that panics in the loop's own task.
async fn forward(start: impl FnOnce() -> ModelStream, events: mpsc::UnboundedSender<ModelEvent>) {
    let pumped = AssertUnwindSafe(async {
        let mut stream = start();
        while let Some(event) = stream.next().await {
            if events.send(event).is_err() {
                // The loop dropped the call (a cancelled or discarded turn).
                break;
            }
        }
    })
    .catch_unwind()
    .await;
    if let Err(panic) = pumped {
        let message = ferroloop_core::exec::panic_message(panic.as_ref());
        tracing::error!(%message, "the model call panicked on the client's thread");
        let failure = ModelError::with_code("internal", format!("the model panicked: {message}"));
        // The loop may have dropped the call meanwhile: nobody to tell then.
        let _ = events.send(ModelEvent::Failed(failure));
    }
}

/// The events of a call running on the client's runtime. Dropping it aborts the call (the
/// [`Model`] contract: dropping the stream cancels it), which closes its connection.
struct Forwarded {
    rx: mpsc::UnboundedReceiver<ModelEvent>,
    task: tokio::task::JoinHandle<()>,
}

impl Stream for Forwarded {
    type Item = ModelEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ModelEvent>> {
        self.rx.poll_recv(cx)
    }
}

impl Drop for Forwarded {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The core configuration for the options object `json` (see `fl_client_new`).
fn config_of(json: &str) -> FfiResult<ClientConfig> {
    let mut options = JsonOptions::parse(json, "client")?;
    let provider = match options.string("provider")? {
        None => Provider::Anthropic,
        Some(name) => Provider::from_name(&name).ok_or_else(|| {
            FfiError::invalid(format!(
                "unknown provider \"{name}\": expected \"anthropic\", \"openai-chat\" or \
                 \"openai-responses\""
            ))
        })?,
    };
    let mut config = if options.boolean("from_env")?.unwrap_or(true) {
        ClientConfig::from_env(provider)
    } else {
        ClientConfig::new(provider)
    };
    if let Some(key) = options.string("api_key")? {
        config = config.with_api_key(key);
    }
    if let Some(url) = options.string("base_url")? {
        config = config.with_base_url(url);
    }
    if let Some(retries) = options.count("max_retries")? {
        config.retry.max_retries = retries;
    }
    if let Some(delay) = options.millis("retry_base_delay_ms")? {
        config.retry.base_delay = delay;
    }
    if let Some(delay) = options.millis("retry_max_delay_ms")? {
        config.retry.max_delay = delay;
    }
    let timeouts = &mut config.timeouts;
    for (key, slot) in [
        ("timeout_ms", &mut timeouts.total),
        ("connect_timeout_ms", &mut timeouts.connect),
        ("first_byte_timeout_ms", &mut timeouts.first_byte),
        ("first_event_timeout_ms", &mut timeouts.first_event),
        ("idle_timeout_ms", &mut timeouts.idle),
        ("stall_notice_ms", &mut timeouts.stall_notice),
    ] {
        if let Some(value) = options.millis(key)? {
            if value.is_zero() {
                // The core refuses it too, by its field's name; this names the C key.
                return Err(FfiError::invalid(format!(
                    "option `{key}` is 0: a request could not wait at all; give a positive \
                     number of milliseconds (a very long one means no limit)"
                )));
            }
            *slot = value;
        }
    }
    if let Some(headers) = options.string_pairs("headers")? {
        config.headers.extend(headers);
    }
    if let Some(version) = options.string("anthropic_version")? {
        config.anthropic_version = version;
    }
    if let Some(betas) = options.strings("anthropic_beta")? {
        config.anthropic_beta.extend(betas);
    }
    options.finish()?;
    Ok(config)
}

/// Creates a client and stores it in `*out`. The caller owns it and releases it with
/// `fl_client_free`.
///
/// `options_json` (`len` bytes of UTF-8; NULL with `len` 0 for the defaults) is a JSON object
/// with the options of Python's `Client` (durations in milliseconds); every key is optional and
/// `null` counts as absent:
///
/// - `provider`: `"anthropic"` (default), `"openai-chat"` or `"openai-responses"`;
/// - `api_key`, `base_url`: the key and endpoint (default: from the environment, see
///   `from_env`, else the provider's public endpoint);
/// - `from_env`: read `ANTHROPIC_API_KEY` / `ANTHROPIC_BASE_URL` (`OPENAI_...` for OpenAI) and
///   the proxy variables (default true);
/// - `max_retries` (default 10; 0: none), `retry_base_delay_ms` (500), `retry_max_delay_ms`
///   (32000);
/// - `timeout_ms` (the whole request, retries included), `connect_timeout_ms`,
///   `first_byte_timeout_ms`, `first_event_timeout_ms`, `idle_timeout_ms`, `stall_notice_ms`
///   (each positive: 0 is refused, as in Python and Node; a very long one means no limit);
/// - `headers`: an object of extra headers (`{"x-team": "infra"}`);
/// - `anthropic_version`, `anthropic_beta` (an array of flags).
///
/// An unknown key, a value of the wrong type or a zero timeout (the message names the key), an
/// unknown provider or a bad base URL is `FL_STATUS_INVALID_ARGUMENT`; text that is not UTF-8 is
/// `FL_STATUS_INVALID_UTF8`. No request is made here.
///
/// The client starts one thread, on which its requests run; `fl_client_free` (or the free of
/// the last agent, run or stream using the client, whichever goes last) stops and joins it.
/// Thread-safe.
///
/// After `fork()`, the child has no copy of that thread: there, a client made before the fork
/// refuses requests, agents and runs with `FL_STATUS_INVALID_STATE` (a run made before the fork
/// stops at its next model call with `error_code` `invalid_configuration`), and its free
/// returns at once, leaving the parent's thread alone (it used to wait for that thread
/// forever). A stream or model call in flight at the fork never ends in the child: free the
/// stream, cancel the run. Make a new client in the child.
///
/// The same holds for every object made before the fork that owns threads or a runtime (a
/// client, an executor, a turn, an agent's run): freed in the child, it returns at once; what
/// it ran on (the client's thread, the worker threads of a run's built-in tools) is the
/// parent's, left alone and kept until the child exits or execs. A built-in tool call in flight
/// at the fork never ends in the child: cancel the run.
///
/// # Safety
/// `options_json` must be valid for reads of `len` bytes; `out` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_client_new(
    options_json: *const c_char,
    len: usize,
    out: *mut *mut fl_client,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `options_json`.
        let json = unsafe { text::str_arg(options_json, len, "options_json") }?;
        let out = Out::new(out, "out")?;
        let config = config_of(json)?;
        let client = Client::new(config).map_err(|error| FfiError::invalid(error.to_string()))?;
        let provider = format!("{}\0", client.config().provider.name());
        let base_url = format!("{}\0", client.config().base_url);
        let io = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("ferroloop-client")
            .enable_all()
            .build()
            .map_err(|error| FfiError::state(format!("cannot start the runtime: {error}")))?;
        let handle = Box::new(fl_client {
            shared: Arc::new(ClientShared {
                io: OwnedRuntime::new(io),
                client,
            }),
            provider,
            base_url,
        });
        // SAFETY: not NULL (checked) and writable (the caller's promise).
        unsafe { out.write(Box::into_raw(handle)) };
        Ok(())
    })
}

/// Writes into `*name` / `*len` a view of the provider the client speaks: `"anthropic"`,
/// `"openai-chat"` or `"openai-responses"` (Python's `Client.provider`, Node's `provider`). The
/// view is NUL-terminated, owned by the client, and valid until `fl_client_free`. Thread-safe;
/// also in a child forked after the client was made (no request is made).
///
/// # Safety
/// `client` must be a live client; `name` and `len` must be valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_client_provider(
    client: *const fl_client,
    name: *mut *const c_char,
    len: *mut usize,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `client`.
        let client = unsafe { text::handle_ref(client, "client") }?;
        // SAFETY: the caller's promises on `name` and `len`.
        unsafe { write_view(&client.provider, name, "name", len) }
    })
}

/// Writes into `*url` / `*len` a view of the endpoint's base URL the client sends its requests
/// to (Python's `Client.base_url`, Node's `baseUrl`): the `base_url` option, else the one read
/// from the environment, else the provider's public endpoint, without a trailing `/`
/// (`"https://api.anthropic.com"`). The view is NUL-terminated, owned by the client, and valid
/// until `fl_client_free`. Thread-safe; also in a child forked after the client was made.
///
/// # Safety
/// `client` must be a live client; `url` and `len` must be valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_client_base_url(
    client: *const fl_client,
    url: *mut *const c_char,
    len: *mut usize,
) -> fl_status {
    boundary::run(|| {
        // SAFETY: the caller's promise on `client`.
        let client = unsafe { text::handle_ref(client, "client") }?;
        // SAFETY: the caller's promises on `url` and `len`.
        unsafe { write_view(&client.base_url, url, "url", len) }
    })
}

/// Writes the view of `terminated` (a NUL-terminated string the client owns) into `*view` /
/// `*len`, the length without the NUL.
///
/// # Safety
/// `view` and `len` must be NULL (refused) or valid for writes.
unsafe fn write_view(
    terminated: &str,
    view: *mut *const c_char,
    name: &str,
    len: *mut usize,
) -> FfiResult {
    let view = Out::new(view, name)?;
    let len = Out::new(len, "len")?;
    // SAFETY: both not NULL (checked) and writable (the caller's promise). The string lives as
    // long as the client and never changes.
    unsafe { text::write_terminated(view, len, terminated) };
    Ok(())
}

/// Releases a client. NULL is accepted and ignored. Agents, runs and streams made with it keep
/// working: the client's thread stops when the last of them is freed, and has stopped (it is
/// joined) by the time the call that freed the last of them returns. Freed from a tool callback
/// (of any run, turn or executor, while the callback's thread drives it), the thread stops when
/// that driving call (`fl_agent_run_next_event`, `fl_turn_next_event`, `fl_executor_run`)
/// returns: a free never blocks inside a callback. In a child forked after the client was made,
/// the free returns at once and leaves the parent's thread alone (see `fl_client_new`).
///
/// # Safety
/// `client` must be NULL or a client from `fl_client_new`, not freed yet; it must not be used
/// afterwards, and no other call on it (`fl_client_create`, `fl_client_stream_start`,
/// `fl_agent_new`) may be in progress on another thread. A stream or agent already made is
/// not such a call: it may be read on while the client is freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fl_client_free(client: *mut fl_client) {
    boundary::run_void(|| {
        if !client.is_null() {
            // SAFETY: a pointer from `Box::into_raw` in `fl_client_new`, freed only once.
            drop(unsafe { Box::from_raw(client) });
        }
    });
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn new_client(json: &str) -> (fl_status, *mut fl_client) {
        let mut client = std::ptr::null_mut();
        // SAFETY: `json` is readable for its length; `client` is a local.
        let status = unsafe { fl_client_new(json.as_ptr().cast(), json.len(), &mut client) };
        (status, client)
    }

    /// A zero timeout is refused naming the C key (the core's refusal named its own field,
    /// `timeouts.idle`, which no C host writes).
    #[test]
    fn a_zero_timeout_is_refused_naming_its_key() {
        for key in [
            "timeout_ms",
            "connect_timeout_ms",
            "first_byte_timeout_ms",
            "first_event_timeout_ms",
            "idle_timeout_ms",
            "stall_notice_ms",
        ] {
            let (status, client) = new_client(&format!(r#"{{"from_env": false, "{key}": 0}}"#));
            assert_eq!(status, fl_status::FL_STATUS_INVALID_ARGUMENT, "{key}");
            assert!(client.is_null());
            let message = crate::boundary::last_error_for_tests();
            assert!(
                message.contains(&format!("`{key}` is 0")),
                "{key}: {message}"
            );
        }
    }

    #[test]
    fn options_reach_the_configuration() {
        let config = config_of(
            r#"{"provider": "openai-chat", "from_env": false, "api_key": "k",
                "base_url": "http://127.0.0.1:9", "max_retries": 2, "retry_base_delay_ms": 5,
                "retry_max_delay_ms": 50, "timeout_ms": 1000, "connect_timeout_ms": 100,
                "first_byte_timeout_ms": 200, "first_event_timeout_ms": 300,
                "idle_timeout_ms": 400, "stall_notice_ms": 500, "headers": {"x-a": "1"},
                "anthropic_version": "v", "anthropic_beta": ["b1"]}"#,
        )
        .unwrap();
        assert_eq!(config.provider, Provider::OpenAiChat);
        assert_eq!(config.api_key.as_deref(), Some("k"));
        assert_eq!(config.base_url, "http://127.0.0.1:9");
        assert_eq!(config.retry.max_retries, 2);
        assert_eq!(config.retry.base_delay, Duration::from_millis(5));
        assert_eq!(config.retry.max_delay, Duration::from_millis(50));
        assert_eq!(config.timeouts.total, Duration::from_millis(1000));
        assert_eq!(config.timeouts.connect, Duration::from_millis(100));
        assert_eq!(config.timeouts.first_byte, Duration::from_millis(200));
        assert_eq!(config.timeouts.first_event, Duration::from_millis(300));
        assert_eq!(config.timeouts.idle, Duration::from_millis(400));
        assert_eq!(config.timeouts.stall_notice, Duration::from_millis(500));
        assert!(config.headers.contains(&("x-a".to_owned(), "1".to_owned())));
        assert_eq!(config.anthropic_version, "v");
        assert!(config.anthropic_beta.contains(&"b1".to_owned()));
    }

    #[test]
    fn bad_options_are_invalid_arguments_naming_the_problem() {
        for (json, expected) in [
            ("{\"provider\": \"gemini\"}", "unknown provider \"gemini\""),
            ("{\"max_retries\": \"3\"}", "client option \"max_retries\""),
            ("{\"api_kee\": \"k\"}", "unknown client option \"api_kee\""),
            ("{", "client options are not valid JSON"),
            ("[]", "client options must be a JSON object"),
            (
                "{\"from_env\": false, \"base_url\": \"ftp://x\"}",
                "bad URL \"ftp://x/v1/messages\"",
            ),
        ] {
            let (status, client) = new_client(json);
            assert_eq!(status, fl_status::FL_STATUS_INVALID_ARGUMENT, "{json}");
            assert!(client.is_null());
            let error = crate::boundary::last_error_for_tests();
            assert!(error.contains(expected), "{json}: {error}");
        }
    }

    #[test]
    fn null_arguments_are_refused_and_free_accepts_null() {
        // SAFETY: NULL text with length 0 is allowed; `out` NULL is the case under test.
        let status = unsafe { fl_client_new(std::ptr::null(), 0, std::ptr::null_mut()) };
        assert_eq!(status, fl_status::FL_STATUS_NULL_ARGUMENT);
        let mut client = std::ptr::null_mut();
        // SAFETY: NULL text with a length is the case under test; `client` is a local.
        let status = unsafe { fl_client_new(std::ptr::null(), 3, &mut client) };
        assert_eq!(status, fl_status::FL_STATUS_NULL_ARGUMENT);
        // SAFETY: NULL is accepted.
        unsafe { fl_client_free(std::ptr::null_mut()) };
    }

    /// The loop drops a call it gives up on (a cancelled or discarded turn, a freed run): the
    /// request running on the client's thread is aborted and its connection closed, rather
    /// than read to its end for nobody.
    #[test]
    fn dropping_a_call_closes_its_connection() {
        use std::io::Read;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (status, client) = new_client(&format!(
            r#"{{"from_env": false, "base_url": "http://127.0.0.1:{port}", "max_retries": 0}}"#
        ));
        assert_eq!(status, fl_status::FL_STATUS_OK);
        // SAFETY: a live client from `fl_client_new`.
        let model = unsafe { &*client }.shared.model();
        let call = model.stream(serde_json::json!({"model": "m", "max_tokens": 1,
            "messages": [{"role": "user", "content": "hi"}]}));
        // The request goes out on the client's thread without the stream being polled.
        // Accepted with a hang guard (30 s), never a timed assertion.
        listener.set_nonblocking(true).unwrap();
        let mut connection = None;
        for _ in 0..30_000 {
            match listener.accept() {
                Ok((accepted, _)) => {
                    connection = Some(accepted);
                    break;
                }
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(error) => panic!("accept failed: {error}"),
            }
        }
        let mut connection = connection.expect("the client never connected");
        connection.set_nonblocking(false).unwrap();
        // Hang guard only: a connection left open fails the test after this long.
        connection
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 4096];
        while !request.windows(4).any(|window| window == b"\r\n\r\n") {
            let n = connection.read(&mut buf).unwrap();
            assert!(n > 0, "the client closed before sending its request");
            request.extend_from_slice(&buf[..n]);
        }
        assert!(request.starts_with(b"POST /v1/messages HTTP/1.1\r\n"));
        drop(call);
        loop {
            match connection.read(&mut buf) {
                Ok(0) => break,
                Ok(_) => {}
                Err(error) => panic!("the connection stayed open: {error}"),
            }
        }
        drop(model);
        // SAFETY: a client from `fl_client_new`, freed once.
        unsafe { fl_client_free(client) };
    }

    /// A model call that panics on the client's thread (starting, or being polled) fails with
    /// code `internal` and the panic's message, as the core reports a model panicking in the
    /// loop's own task; its panic was caught by tokio there, and the run stopped with "the
    /// model stream ended without a message".
    #[test]
    fn a_model_call_that_panics_fails_with_the_panics_message() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let starting = || -> ModelStream { panic!("boom starting the call") };
        let polled = || -> ModelStream {
            Box::pin(futures_util::stream::poll_fn(
                |_| -> Poll<Option<ModelEvent>> { panic!("boom polling the call") },
            ))
        };
        type Start = Box<dyn FnOnce() -> ModelStream + Send>;
        let calls: [(Start, &str); 2] = [
            (Box::new(starting), "boom starting the call"),
            (Box::new(polled), "boom polling the call"),
        ];
        for (start, expected) in calls {
            let (events, mut received) = mpsc::unbounded_channel();
            let task = runtime.spawn(forward(start, events));
            let outcome = runtime.block_on(task);
            assert!(outcome.is_ok(), "{expected}: the task panicked");
            match received.try_recv() {
                Ok(ModelEvent::Failed(error)) => {
                    assert_eq!(error.code(), "internal");
                    assert_eq!(error.to_string(), format!("the model panicked: {expected}"));
                }
                other => panic!("{expected}: {other:?}"),
            }
        }
    }

    /// The view of a getter, as text (the NUL after it checked).
    fn getter(
        client: *const fl_client,
        get: unsafe extern "C" fn(*const fl_client, *mut *const c_char, *mut usize) -> fl_status,
    ) -> String {
        let mut view = std::ptr::null();
        let mut len = usize::MAX;
        // SAFETY: a live client; both locals.
        let status = unsafe { get(client, &mut view, &mut len) };
        assert_eq!(status, fl_status::FL_STATUS_OK);
        // SAFETY: the view holds `len` bytes and a NUL, owned by the live client.
        let bytes = unsafe { std::slice::from_raw_parts(view.cast::<u8>(), len + 1) };
        assert_eq!(bytes[len], 0);
        String::from_utf8(bytes[..len].to_vec()).unwrap()
    }

    /// The provider and base URL a client was made with, as Python's and Node's getters give
    /// them: the provider's name, the URL without its trailing `/`, the public endpoint by
    /// default.
    #[test]
    fn getters_give_the_provider_and_base_url() {
        for (json, provider, base_url) in [
            (
                r#"{"from_env": false}"#,
                "anthropic",
                "https://api.anthropic.com",
            ),
            (
                r#"{"provider": "openai-chat", "from_env": false}"#,
                "openai-chat",
                "https://api.openai.com/v1",
            ),
            (
                r#"{"provider": "openai-responses", "from_env": false,
                    "base_url": "http://127.0.0.1:9/v1/"}"#,
                "openai-responses",
                "http://127.0.0.1:9/v1",
            ),
        ] {
            let (status, client) = new_client(json);
            assert_eq!(status, fl_status::FL_STATUS_OK, "{json}");
            assert_eq!(getter(client, fl_client_provider), provider, "{json}");
            assert_eq!(getter(client, fl_client_base_url), base_url, "{json}");
            // SAFETY: a client from `fl_client_new`, freed once.
            unsafe { fl_client_free(client) };
        }
        let (_, client) = new_client(r#"{"from_env": false}"#);
        let mut view = std::ptr::null();
        let mut len = 0usize;
        let refused = |status: fl_status, argument: &str| {
            assert_eq!(status, fl_status::FL_STATUS_NULL_ARGUMENT, "{argument}");
            let message = crate::boundary::last_error_for_tests();
            assert!(message.contains(&format!("`{argument}`")), "{message}");
        };
        // SAFETY: NULL arguments are the cases under test; the others are locals.
        unsafe {
            refused(
                fl_client_provider(std::ptr::null(), &mut view, &mut len),
                "client",
            );
            refused(
                fl_client_provider(client, std::ptr::null_mut(), &mut len),
                "name",
            );
            refused(
                fl_client_base_url(client, std::ptr::null_mut(), &mut len),
                "url",
            );
            refused(
                fl_client_base_url(client, &mut view, std::ptr::null_mut()),
                "len",
            );
            fl_client_free(client);
        }
    }

    #[test]
    fn defaults_make_a_client_that_frees_cleanly() {
        let (status, client) = new_client("{\"from_env\": false}");
        assert_eq!(status, fl_status::FL_STATUS_OK);
        assert!(!client.is_null());
        // SAFETY: a client from `fl_client_new`, freed once.
        unsafe { fl_client_free(client) };
    }
}
