//! Sending a prepared request until a success response arrives, a failure is final, or the
//! retries run out. Each retry is recorded in the shared [`Progress`] before its wait, so a
//! stream can report it while the wait runs.

use std::error::Error as _;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{HeaderMap, Request, Response, Uri};
use http_body::Body as _;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use tokio::time::Instant;

use super::error::ClientError;
use super::proxy::ProxyRefused;
use super::retry::{RetryEvent, is_retryable_status, retry_after};
use super::transport::HttpClient;
use super::watchdog::{TimeoutKind, later};
use super::{ClientConfig, error};

/// Error bodies are cut after this many bytes (they are diagnostics, not payloads).
const MAX_ERROR_BODY: usize = 1 << 20;

/// A request built once and sent as many times as needed (the body is shared, not copied).
#[derive(Debug)]
pub(crate) struct PreparedRequest {
    pub(crate) uri: Uri,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
    /// Whether a success must be an event stream (a streaming request).
    pub(crate) event_stream: bool,
}

impl PreparedRequest {
    fn to_http(&self) -> Result<Request<Full<Bytes>>, ClientError> {
        let mut request = Request::post(self.uri.clone())
            .body(Full::new(self.body.clone()))
            .map_err(|error| ClientError::Config(error.to_string()))?;
        *request.headers_mut() = self.headers.clone();
        Ok(request)
    }
}

/// Attempts and retries of one logical request.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    pub(crate) attempts: u32,
    pub(crate) retries: Vec<RetryEvent>,
    /// Body bytes read here, on every attempt: error bodies, a success body that is not what
    /// was asked for, a whole non-streaming body. (A stream counts its own frames: locking per
    /// frame would cost the hot path.)
    pub(crate) body_bytes: u64,
}

/// Everything an attempt needs, cheap to clone into a future.
#[derive(Clone)]
pub(crate) struct Sender {
    pub(crate) http: HttpClient,
    pub(crate) config: Arc<ClientConfig>,
    pub(crate) request: Arc<PreparedRequest>,
    pub(crate) progress: Arc<Mutex<Progress>>,
    pub(crate) start: Instant,
}

impl Sender {
    /// The deadline of the whole request.
    pub(crate) fn total_deadline(&self) -> Instant {
        later(self.start, self.config.timeouts.total)
    }

    /// Sends until a 2xx arrives or the failure is final.
    pub(crate) async fn send(self) -> Result<Response<Incoming>, ClientError> {
        loop {
            let attempt = self.begin_attempt();
            let (error, retryable, server_wait) = match self.attempt().await {
                Ok(response) => return Ok(response),
                Err(failure) => failure,
            };
            match self.schedule_retry(attempt, &error, retryable, server_wait) {
                Some(wait) => tokio::time::sleep(wait).await,
                None => return Err(error),
            }
        }
    }

    /// Counts a new attempt; returns its number (from 1).
    pub(crate) fn begin_attempt(&self) -> u32 {
        match self.progress.lock() {
            Ok(mut progress) => {
                progress.attempts += 1;
                progress.attempts
            }
            Err(_) => 1,
        }
    }

    /// Adds `bytes` body bytes read to the request's total.
    pub(crate) fn count_body_bytes(&self, bytes: usize) {
        if let Ok(mut progress) = self.progress.lock() {
            progress.body_bytes = progress.body_bytes.saturating_add(bytes as u64);
        }
    }

    /// The attempt number in progress.
    pub(crate) fn current_attempt(&self) -> u32 {
        self.progress
            .lock()
            .map(|progress| progress.attempts)
            .unwrap_or(1)
    }

    /// One attempt: the response when it is a success, otherwise the error, whether it may
    /// be retried, and the wait the server asked for.
    async fn attempt(&self) -> Result<Response<Incoming>, (ClientError, bool, Option<Duration>)> {
        let now = Instant::now();
        let total_deadline = self.total_deadline();
        let timeouts = &self.config.timeouts;
        let (limit, kind) = if later(now, timeouts.first_byte) < total_deadline {
            (timeouts.first_byte, TimeoutKind::FirstByte)
        } else {
            (
                total_deadline.saturating_duration_since(now),
                TimeoutKind::Total,
            )
        };
        let request = self
            .request
            .to_http()
            .map_err(|error| (error, false, None))?;
        let response = match tokio::time::timeout(limit, self.http.request(request)).await {
            Err(_) => {
                let error = ClientError::Timeout {
                    which: kind,
                    elapsed: now.elapsed(),
                    request_id: None,
                };
                return Err((error, kind == TimeoutKind::FirstByte, None));
            }
            Ok(Err(error)) => {
                let (error, retryable) = connection_error(&error, now);
                return Err((error, retryable, None));
            }
            Ok(Ok(response)) => response,
        };
        if response.status().is_success() {
            if let Some(encoding) = unasked_encoding(response.headers()) {
                // Nothing asked for compression (no `accept-encoding` is sent), so nothing can
                // read the body: neither the event parser nor a JSON parser. Not retried: the
                // same request gets the same answer. The body is not read.
                let what = if self.request.event_stream {
                    "an event stream"
                } else {
                    "a JSON document"
                };
                let error = ClientError::Protocol {
                    message: format!(
                        "expected {what}, got a body compressed with content-encoding \
                         {encoding:?} although no compression was asked for"
                    ),
                    request_id: error::request_id(response.headers()),
                };
                return Err((error, false, None));
            }
            if self.request.event_stream
                && let Some(content_type) = not_an_event_stream(response.headers())
            {
                // Not retried (the same request gets the same answer, and a gateway that
                // ignored `"stream": true` has already run and billed the generation), unless
                // the body is a transient provider error: that generated nothing.
                let error = self.unexpected_body(response, content_type).await;
                let retryable = error.is_transient_provider_error();
                return Err((error, retryable, None));
            }
            return Ok(response);
        }
        let status = response.status().as_u16();
        let (parts, body) = response.into_parts();
        // An error body is a diagnostic: its first MiB is kept, the rest never read, and a
        // body that stalls is given up at the idle timeout (not the total one), so that the
        // retry it may call for still happens. A cut or broken body still leaves the status
        // to classify by.
        let deadline = later(Instant::now(), timeouts.idle).min(total_deadline);
        let body = self.read_prefix(body, MAX_ERROR_BODY, deadline).await;
        let body = decoded_error_body(&parts.headers, body);
        let server_wait = retry_after(&parts.headers, SystemTime::now());
        let error = ClientError::from_response(status, &parts.headers, &body, server_wait);
        // A quota error is final whatever the status and headers say: the account's billing
        // does not change between retries (OpenAI's `insufficient_quota` comes as a 429).
        let retryable = is_retryable_status(status, &parts.headers)
            && !matches!(error, ClientError::QuotaExceeded(_));
        Err((error, retryable, server_wait))
    }

    /// The error for a success of `content_type`, which is not an event stream: the provider
    /// error a JSON body carries, else a `Protocol` error naming what came.
    async fn unexpected_body(
        &self,
        response: Response<Incoming>,
        content_type: String,
    ) -> ClientError {
        let request_id = error::request_id(response.headers());
        let deadline = later(Instant::now(), self.config.timeouts.idle).min(self.total_deadline());
        let body = self
            .read_prefix(response.into_body(), MAX_ERROR_BODY, deadline)
            .await;
        if let Some(error) = ClientError::from_json_error_body(&body, request_id.clone()) {
            return error;
        }
        // A body that filled the prefix may go on past it.
        let excerpt = error::body_excerpt(&body, body.len() >= MAX_ERROR_BODY);
        ClientError::Protocol {
            message: format!(
                "expected an event stream (text/event-stream), got {content_type} (did the \
                 server ignore \"stream\": true?): {excerpt:?}"
            ),
            request_id,
        }
    }

    /// The first `limit` bytes of `body` (fewer when it ends, breaks or `deadline` passes
    /// first); the rest is never read. Every byte read counts in the request's metrics, those
    /// past `limit` in the last frame too (they were received).
    async fn read_prefix(&self, mut body: Incoming, limit: usize, deadline: Instant) -> Bytes {
        let mut prefix = Vec::new();
        let mut received = 0;
        while prefix.len() < limit {
            match tokio::time::timeout_at(deadline, body.frame()).await {
                Ok(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        received += data.len();
                        let take = data.len().min(limit - prefix.len());
                        prefix.extend_from_slice(&data[..take]);
                    }
                }
                _ => break,
            }
        }
        self.count_body_bytes(received);
        Bytes::from(prefix)
    }

    /// Decides whether attempt `attempt` is retried after `error`; if so, records the retry
    /// and returns the wait.
    pub(crate) fn schedule_retry(
        &self,
        attempt: u32,
        error: &ClientError,
        retryable: bool,
        server_wait: Option<Duration>,
    ) -> Option<Duration> {
        let policy = &self.config.retry;
        if !retryable || attempt > policy.max_retries {
            return None;
        }
        let wait = policy.wait(attempt - 1, server_wait);
        if later(Instant::now(), wait) >= self.total_deadline() {
            return None;
        }
        let event = RetryEvent {
            attempt,
            status: error.status(),
            code: error.code(),
            wait,
            reason: error.to_string(),
        };
        tracing::info!(attempt, status = ?event.status, wait_ms = wait.as_millis() as u64, reason = %event.reason, "retrying request");
        if let Some(observer) = &self.config.on_retry {
            observer(&event);
        }
        if let Ok(mut progress) = self.progress.lock() {
            progress.retries.push(event);
        }
        Some(wait)
    }
}

/// The content coding of a success body when it is one the client never asked for (any but
/// `identity`: no `accept-encoding` is sent), lowercased.
fn unasked_encoding(headers: &HeaderMap) -> Option<String> {
    let encoding = headers
        .get(http::header::CONTENT_ENCODING)?
        .to_str()
        .ok()?
        .trim()
        .to_ascii_lowercase();
    (!encoding.is_empty() && encoding != "identity").then_some(encoding)
}

/// An error body as the server meant it. Nothing asks for compression (no `accept-encoding`
/// is sent), but a proxy or gateway may compress its error page anyway: a `gzip` (`x-gzip`)
/// or `deflate` body is inflated (at most [`MAX_ERROR_BODY`] bytes of it, the prefix of one cut
/// short included), so that its type, message and sizes classify the error as the plain body
/// would (a quota 429 is not retried, a prompt too long is one). A body in another coding, or
/// one that does not inflate, is replaced by a note naming the coding: its bytes are no
/// message (they were shown as mojibake).
fn decoded_error_body(headers: &HeaderMap, body: Bytes) -> Bytes {
    let Some(encoding) = unasked_encoding(headers) else {
        return body;
    };
    let inflated = match encoding.as_str() {
        "gzip" | "x-gzip" => crate::inflate::gzip_prefix(&body, MAX_ERROR_BODY),
        // RFC 9110's `deflate` is zlib; some servers send raw deflate under that name.
        "deflate" => crate::inflate::zlib_prefix(&body, MAX_ERROR_BODY)
            .or_else(|| crate::inflate::raw_prefix(&body, MAX_ERROR_BODY)),
        _ => None,
    };
    inflated.map(Bytes::from).unwrap_or_else(|| {
        Bytes::from(format!(
            "(the error body, {} bytes compressed with content-encoding {encoding:?}, which was \
             not asked for, could not be read)",
            body.len()
        ))
    })
}

/// The media type of a success when it says the body is not an event stream. Only types that
/// are certainly something else (JSON, HTML) are refused: some OpenAI-compatible servers
/// stream events under no or a generic content type, and those still parse.
fn not_an_event_stream(headers: &HeaderMap) -> Option<String> {
    let media = error::media_type(headers)?;
    (error::is_json(&media) || error::is_html(&media)).then_some(media)
}

/// Maps a failed exchange to [`ClientError::Connection`] (or a connect timeout), and says
/// whether it may be retried: everything but a TLS failure (a bad certificate stays bad), a
/// proxy's 4xx to `CONNECT` (wrong proxy credentials or a blocked destination stay so) and a
/// response head that does not parse (more than 100 headers, a head past hyper's buffer, a
/// malformed status line or header: the same server sends the same head again; a connection
/// cut inside the head is an incomplete message, not a parse error, and is retried).
fn connection_error(
    error: &hyper_util::client::legacy::Error,
    started: Instant,
) -> (ClientError, bool) {
    let mut message = error.to_string();
    let mut source = error.source();
    let mut timed_out = false;
    let mut tls_failure = false;
    let mut refused = false;
    let mut unparsable_head = false;
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        if let Some(io) = cause.downcast_ref::<io::Error>() {
            timed_out |= io.kind() == io::ErrorKind::TimedOut;
        }
        tls_failure |= is_tls_error(cause);
        // `is_parse_too_large` would be narrower, but hyper has it only with its `server`
        // feature, which this crate does not enable.
        unparsable_head |= cause
            .downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_parse);
        refused |= find_cause::<ProxyRefused>(cause)
            .and_then(|refusal| refusal.status)
            .is_some_and(|status| (400..500).contains(&status));
        source = cause.source();
    }
    if timed_out && error.is_connect() {
        let error = ClientError::Timeout {
            which: TimeoutKind::Connect,
            elapsed: started.elapsed(),
            request_id: None,
        };
        return (error, true);
    }
    let error = ClientError::Connection {
        message,
        request_id: None,
    };
    (error, !tls_failure && !refused && !unparsable_head)
}

/// `error` as a `T`, looking through `io::Error`s (which hide their payload from `source()`).
fn find_cause<'a, T: std::error::Error + 'static>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a T> {
    if let Some(found) = error.downcast_ref::<T>() {
        return Some(found);
    }
    error
        .downcast_ref::<io::Error>()
        .and_then(io::Error::get_ref)
        .and_then(|inner| find_cause::<T>(inner))
}

/// True when `error` is, or wraps through `io::Error`s (which hide their payload from
/// `source()`), a rustls error.
fn is_tls_error(error: &(dyn std::error::Error + 'static)) -> bool {
    if error.is::<rustls::Error>() {
        return true;
    }
    match error
        .downcast_ref::<io::Error>()
        .and_then(io::Error::get_ref)
    {
        Some(inner) => is_tls_error(inner),
        None => false,
    }
}

/// Reads a whole (non-streaming) body, failing when the total deadline passes or, once data
/// has begun to arrive, when none comes for the idle timeout; the error says whether it may be
/// retried. (Before the first byte only the total deadline applies: a server may send the
/// headers at once and the body when the generation is done.) A body larger than
/// [`ClientConfig::max_response_bytes`] (by its `content-length`, or as it arrives) fails at
/// once, not retried, and the rest is never read. The bytes read count in the request's
/// metrics, those of a body that failed too.
pub(crate) async fn read_whole(
    body: Incoming,
    sender: &Sender,
    request_id: Option<String>,
) -> Result<Bytes, (ClientError, bool)> {
    let mut data = Vec::new();
    let mut received = 0;
    let result = read_whole_into(body, sender, request_id, &mut data, &mut received).await;
    sender.count_body_bytes(received);
    result.map(|()| Bytes::from(data))
}

/// [`read_whole`] into `data`; `received` counts every byte read (those of a frame that went
/// past the limit too, which are not kept).
async fn read_whole_into(
    mut body: Incoming,
    sender: &Sender,
    request_id: Option<String>,
    data: &mut Vec<u8>,
    received: &mut usize,
) -> Result<(), (ClientError, bool)> {
    let limit = sender.config.max_response_bytes.unwrap_or(usize::MAX);
    // The same request gets the same answer, so an oversized one is final. A body that says
    // its length gets its buffer at once (no regrowing copies; never more than the default cap
    // up front, whatever a server without a cap claims); one that says it will not fit is not
    // read at all.
    let declared = body.size_hint().exact();
    match declared.map(|length| usize::try_from(length).unwrap_or(usize::MAX)) {
        Some(length) if length > limit => return Err((too_large(limit, request_id), false)),
        Some(length) => data.reserve_exact(length.min(super::DEFAULT_MAX_RESPONSE_BYTES)),
        None => {}
    }
    let idle = sender.config.timeouts.idle;
    let total_deadline = sender.total_deadline();
    loop {
        let quiet_since = Instant::now();
        let deadline = if data.is_empty() {
            total_deadline
        } else {
            later(quiet_since, idle).min(total_deadline)
        };
        match tokio::time::timeout_at(deadline, body.frame()).await {
            Ok(None) => return Ok(()),
            Ok(Some(Ok(frame))) => {
                if let Ok(chunk) = frame.into_data() {
                    *received = received.saturating_add(chunk.len());
                    if chunk.len() > limit.saturating_sub(data.len()) {
                        // Dropping the body here closes the connection: nothing more is read.
                        return Err((too_large(limit, request_id), false));
                    }
                    data.extend_from_slice(&chunk);
                }
            }
            Ok(Some(Err(error))) => return Err((body_error(&error, request_id), true)),
            Err(_) => {
                let (which, elapsed, retryable) = if deadline >= total_deadline {
                    (TimeoutKind::Total, sender.start.elapsed(), false)
                } else {
                    (TimeoutKind::Idle, quiet_since.elapsed(), true)
                };
                let error = ClientError::Timeout {
                    which,
                    elapsed,
                    request_id,
                };
                return Err((error, retryable));
            }
        }
    }
}

/// The error for a non-streaming body past [`ClientConfig::max_response_bytes`]: a protocol
/// failure (no generation answer is that large), as an oversized event is.
fn too_large(limit: usize, request_id: Option<String>) -> ClientError {
    ClientError::Protocol {
        message: format!(
            "the response body exceeds the {limit}-byte limit (max_response_bytes); the rest \
             was not read"
        ),
        request_id,
    }
}

/// Maps a body read error to [`ClientError::Connection`].
pub(crate) fn body_error(error: &hyper::Error, request_id: Option<String>) -> ClientError {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    ClientError::Connection {
        message,
        request_id,
    }
}

/// The request id of a response.
pub(crate) fn response_request_id(response: &Response<Incoming>) -> Option<String> {
    error::request_id(response.headers())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn encoded(encoding: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::CONTENT_ENCODING,
            HeaderValue::from_static(encoding),
        );
        headers
    }

    /// Every optional field of a gzip header is skipped; a member cut short still gives the
    /// text inflated so far.
    #[test]
    fn gzip_headers_with_optional_fields_are_skipped() {
        let numbers: Vec<String> = (0..4000).map(|n| (n * 7919 % 10007).to_string()).collect();
        let text = format!("{{\"error\":{{\"message\":\"{}\"}}}}", numbers.join(" "));
        let deflated = miniz_oxide::deflate::compress_to_vec(text.as_bytes(), 6);
        // FHCRC | FEXTRA | FNAME | FCOMMENT.
        let mut member = vec![0x1f, 0x8b, 8, 2 | 4 | 8 | 16, 0, 0, 0, 0, 0, 3];
        member.extend_from_slice(&[3, 0, b'a', b'b', b'c']);
        member.extend_from_slice(b"name\0comment\0");
        member.extend_from_slice(&[0xaa, 0xbb]);
        member.extend_from_slice(&deflated);
        let whole = decoded_error_body(&encoded("gzip"), Bytes::from(member.clone()));
        assert_eq!(whole, text.as_bytes());
        let cut = member.len() - deflated.len() / 2;
        let prefix = decoded_error_body(&encoded("gzip"), Bytes::from(member[..cut].to_vec()));
        assert!(
            !prefix.is_empty() && text.as_bytes().starts_with(&prefix),
            "{prefix:?}"
        );
        // Raw deflate under `deflate`, as some servers send it.
        let raw = decoded_error_body(&encoded("deflate"), Bytes::from(deflated));
        assert_eq!(raw, text.as_bytes());
        // An identity body is left as it is.
        let plain = Bytes::from_static(b"\x1f\x8b plain");
        assert_eq!(decoded_error_body(&HeaderMap::new(), plain.clone()), plain);
        assert_eq!(
            decoded_error_body(&encoded("identity"), plain.clone()),
            plain
        );
    }

    proptest::proptest! {
        /// Whatever bytes a server sends under a compressed coding, reading them never panics
        /// and never yields more than the error body's cap.
        #[test]
        fn any_compressed_error_body_decodes_without_panicking(
            body in proptest::collection::vec(proptest::num::u8::ANY, 0..200),
            header in proptest::collection::vec(proptest::num::u8::ANY, 0..12),
        ) {
            let mut gzip = vec![0x1f, 0x8b, 8];
            gzip.extend(&header);
            gzip.extend(&body);
            for (encoding, data) in [("gzip", gzip), ("deflate", body.clone()), ("zstd", body)] {
                let decoded = decoded_error_body(&encoded(encoding), Bytes::from(data));
                proptest::prop_assert!(decoded.len() <= MAX_ERROR_BODY);
            }
        }
    }
}
