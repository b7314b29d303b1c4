//! One error type for everything a request can run into, in the classes an agent loop acts on.

use std::fmt;
use std::time::Duration;

use http::HeaderMap;

use super::watchdog::TimeoutKind;
use crate::decode::{ProviderErrorKind, prompt_too_long, status_of_code};

/// What the provider said about a failure.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorDetails {
    /// The HTTP status. For an error inside a 200 stream (or a 200 JSON body), the status it
    /// names as its numeric `code` (OpenRouter's `{"error": {"code": 502, ...}}`, the status
    /// its upstream answered), else absent.
    pub status: Option<u16>,
    /// The provider's error type (`overloaded_error`, `rate_limit_exceeded`, ...).
    pub error_type: Option<String>,
    /// The provider's message (or the raw body when it was not the usual JSON shape), at most
    /// 2,000 characters of it (a longer one is cut, and ends with `…`).
    pub message: String,
    /// The request id header (`request-id` or `x-request-id`).
    pub request_id: Option<String>,
}

/// `HTTP {status} {error_type}: {message} (request id {id})` (`stream error` without a status),
/// each part only when known; the type only when it is not the status's number.
impl fmt::Display for ErrorDetails {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(status) = self.status {
            write!(f, "HTTP {status}")?;
        } else {
            f.write_str("stream error")?;
        }
        // A numeric code that is the status (OpenRouter's `{"error": {"code": 502}}`, read as
        // both) would print it twice: "HTTP 502 502".
        if let Some(kind) = &self.error_type
            && self.status.is_none_or(|status| *kind != status.to_string())
        {
            write!(f, " {kind}")?;
        }
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        if let Some(id) = &self.request_id {
            write!(f, " (request id {id})")?;
        }
        Ok(())
    }
}

/// What had been received when a stream broke.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PartialResponse {
    /// Events delivered to the caller.
    pub events: u64,
    /// Body bytes received, all attempts together (as
    /// [`RequestMetrics::bytes_received`](super::RequestMetrics::bytes_received)).
    pub bytes: u64,
    /// The type of the last event delivered.
    pub last_event_type: Option<String>,
    /// The message accumulated so far, in the provider's response shape (set by
    /// [`MessageStream`](super::MessageStream), which decodes; `None` from a raw
    /// [`ResponseStream`](super::ResponseStream)).
    pub message: Option<Box<serde_json::Value>>,
}

/// A failed request.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// 401: the key is missing or wrong.
    #[error("authentication failed: {0}")]
    Authentication(ErrorDetails),
    /// 403: the key may not do this.
    #[error("permission denied: {0}")]
    Permission(ErrorDetails),
    /// 404: no such endpoint or model.
    #[error("not found: {0}")]
    NotFound(ErrorDetails),
    /// 429: slow down.
    #[error("rate limited: {details}")]
    RateLimited {
        /// What the provider said.
        details: ErrorDetails,
        /// The wait the server asked for.
        retry_after: Option<Duration>,
    },
    /// The account has no credit left: OpenAI's `insufficient_quota` (a 429, or an error event,
    /// naming it in its error `type` or `code`). A billing state, not load: never retried,
    /// since every retry gets the same answer.
    #[error("quota exceeded: {0}")]
    QuotaExceeded(ErrorDetails),
    /// 529 or an `overloaded_error`: the provider is overloaded.
    #[error("overloaded: {details}")]
    Overloaded {
        /// What the provider said.
        details: ErrorDetails,
        /// The wait the server asked for (`retry-after-ms` / `retry-after`) with its HTTP error
        /// (a 529, OpenAI's 503 `server_is_overloaded`); `None` for an overload announced
        /// inside a stream (no headers of its own).
        retry_after: Option<Duration>,
    },
    /// The prompt does not fit the context window.
    #[error("prompt too long: {details}")]
    PromptTooLong {
        /// What the provider said.
        details: ErrorDetails,
        /// The prompt's size in tokens, when the message said.
        tokens: Option<u64>,
        /// The model's limit in tokens, when the message said.
        limit: Option<u64>,
    },
    /// Any other 4xx: the request is wrong.
    #[error("invalid request: {0}")]
    InvalidRequest(ErrorDetails),
    /// 5xx (or 408), or an `api_error` in the stream.
    #[error("server error: {details}")]
    Server {
        /// What the provider said.
        details: ErrorDetails,
        /// The wait the server asked for (`retry-after-ms` / `retry-after`) with its HTTP error
        /// (a 503's, as RFC 9110 defines it); `None` for a failure announced inside a stream
        /// (no headers of its own).
        retry_after: Option<Duration>,
    },
    /// The connection could not be made or broke (refused, reset, closed before headers).
    #[error("connection error: {message}")]
    Connection {
        /// What happened.
        message: String,
        /// The request id, when the headers had arrived.
        request_id: Option<String>,
    },
    /// A watchdog fired.
    #[error("{which} timeout after {elapsed:?}")]
    Timeout {
        /// Which watchdog.
        which: TimeoutKind,
        /// How long had passed (since the request, the headers, or the last event).
        elapsed: Duration,
        /// The request id, when the headers had arrived.
        request_id: Option<String>,
    },
    /// The stream broke after events were delivered; it was not replayed. The caller decides.
    #[error("stream truncated after {} events: {cause}", partial.events)]
    Truncated {
        /// What had been received.
        partial: PartialResponse,
        /// Why it broke.
        cause: Box<ClientError>,
        /// The request id.
        request_id: Option<String>,
    },
    /// The response was not what the protocol promises (not an event stream, bad JSON, ...).
    #[error("protocol error: {message}")]
    Protocol {
        /// What was wrong.
        message: String,
        /// The request id.
        request_id: Option<String>,
    },
    /// One event grew past [`ClientConfig::max_event_bytes`](super::ClientConfig::max_event_bytes)
    /// (a protocol violation: no provider sends such events). The stream stops reading at
    /// once; nothing of the event is kept. Not retried.
    #[error("protocol error: an event exceeded the {limit}-byte limit (max_event_bytes)")]
    EventTooLarge {
        /// The limit, in bytes (the event was larger; how much larger is not read).
        limit: usize,
        /// The request id.
        request_id: Option<String>,
    },
    /// The configuration cannot work (bad URL, bad header, bad certificate).
    #[error("invalid client configuration: {0}")]
    Config(String),
}

impl ClientError {
    /// The HTTP status, when the failure was a response.
    pub fn status(&self) -> Option<u16> {
        self.details().and_then(|details| details.status)
    }

    /// The provider's details, for the classes that carry them.
    pub fn details(&self) -> Option<&ErrorDetails> {
        match self {
            ClientError::Authentication(details)
            | ClientError::Permission(details)
            | ClientError::NotFound(details)
            | ClientError::Overloaded { details, .. }
            | ClientError::InvalidRequest(details)
            | ClientError::Server { details, .. }
            | ClientError::RateLimited { details, .. }
            | ClientError::QuotaExceeded(details)
            | ClientError::PromptTooLong { details, .. } => Some(details),
            ClientError::Truncated { cause, .. } => cause.details(),
            _ => None,
        }
    }

    /// The request id, when known.
    pub fn request_id(&self) -> Option<&str> {
        match self {
            ClientError::Connection { request_id, .. }
            | ClientError::Timeout { request_id, .. }
            | ClientError::Truncated { request_id, .. }
            | ClientError::Protocol { request_id, .. }
            | ClientError::EventTooLarge { request_id, .. } => request_id.as_deref(),
            ClientError::Config(_) => None,
            other => other
                .details()
                .and_then(|details| details.request_id.as_deref()),
        }
    }

    /// The wait the server asked for (`retry-after-ms` / `retry-after`) with its HTTP error,
    /// kept for a rate limit (429), an overload (529) and a server error (a 5xx, 408); through
    /// a truncated stream, its cause's.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ClientError::RateLimited { retry_after, .. }
            | ClientError::Overloaded { retry_after, .. }
            | ClientError::Server { retry_after, .. } => *retry_after,
            ClientError::Truncated { cause, .. } => cause.retry_after(),
            _ => None,
        }
    }

    /// Whether the provider's error is of a class another attempt may not get: a rate limit
    /// (not a quota, [`ClientError::QuotaExceeded`]: billing does not change between retries),
    /// an overload, a server failure (a 5xx, 408, an `api_error`). The classes of
    /// [`ProviderErrorKind::classify`] and [`ProviderErrorKind::of_status`], as the variants
    /// carry them; never an invalid request, a prompt too long, an authentication, permission
    /// or not-found failure.
    ///
    /// The client retries such an error when it arrives in a success response before anything
    /// was delivered: as the first event of a stream (Anthropic's `event: error`, an
    /// OpenAI-compatible gateway's `data: {"error": ...}`, a Responses `error` or
    /// `response.failed`), or as a JSON body where an event stream (or a non-streaming
    /// answer) was expected. An HTTP error status is decided by its status instead
    /// ([`is_retryable_status`](super::is_retryable_status), `x-should-retry`); transport
    /// failures (connection, timeouts) by how they failed. This is false for those.
    pub fn is_transient_provider_error(&self) -> bool {
        matches!(
            self,
            ClientError::RateLimited { .. }
                | ClientError::Overloaded { .. }
                | ClientError::Server { .. }
        )
    }

    /// The underlying failure (itself, unless truncated).
    pub fn root(&self) -> &ClientError {
        match self {
            ClientError::Truncated { cause, .. } => cause.root(),
            other => other,
        }
    }

    /// A short stable name of the class (`rate_limited`, `stream_truncated`, ...), for bindings.
    ///
    /// A truncated stream is `stream_truncated`, the code the agent's stop event and the
    /// bindings' `StreamTruncatedError` carry (and [`DecodeError::code`](crate::decode::DecodeError::code)).
    /// Two codes are finer here than in the bindings and on the agent's stop event, so that a
    /// Rust caller can tell them from their neighbours: `event_too_large` is a `protocol`
    /// failure there (Python's and Node's `ProtocolError`), and `config` is the stop event's
    /// `invalid_configuration` (Node's `invalid_argument`, Python's plain `FerroloopError`).
    pub fn code(&self) -> &'static str {
        match self {
            ClientError::Authentication(_) => "authentication",
            ClientError::Permission(_) => "permission",
            ClientError::NotFound(_) => "not_found",
            ClientError::RateLimited { .. } => "rate_limited",
            ClientError::QuotaExceeded(_) => "quota_exceeded",
            ClientError::Overloaded { .. } => "overloaded",
            ClientError::PromptTooLong { .. } => "prompt_too_long",
            ClientError::InvalidRequest(_) => "invalid_request",
            ClientError::Server { .. } => "server",
            ClientError::Connection { .. } => "connection",
            ClientError::Timeout { .. } => "timeout",
            ClientError::Truncated { .. } => "stream_truncated",
            ClientError::Protocol { .. } => "protocol",
            ClientError::EventTooLarge { .. } => "event_too_large",
            ClientError::Config(_) => "config",
        }
    }

    /// Builds the error for a non-success response.
    pub(crate) fn from_response(
        status: u16,
        headers: &HeaderMap,
        body: &[u8],
        retry_after: Option<Duration>,
    ) -> Self {
        let parsed = parse_error_body(body);
        let mut message = match html_page_summary(headers, body) {
            Some(summary) if parsed.error_type.is_none() && parsed.code.is_none() => summary,
            _ => parsed.message,
        };
        // Redirects are not followed (the request carries the key); where it pointed is what
        // the user needs to fix the base URL.
        if (300..400).contains(&status)
            && let Some(location) = headers
                .get(http::header::LOCATION)
                .and_then(|value| value.to_str().ok())
        {
            let note = format!("redirect to {location} not followed (check the base URL)");
            message = if message.is_empty() {
                note
            } else {
                format!("{note}: {message}")
            };
        }
        let details = ErrorDetails {
            status: Some(status),
            error_type: parsed.error_type,
            message,
            request_id: request_id(headers),
        };
        classify(details, parsed.code.as_deref(), parsed.context, retry_after)
    }

    /// Builds the error for an `error` event inside a stream (`data` is its JSON).
    pub(crate) fn from_stream_error(data: &str, request_id: Option<String>) -> Self {
        let parsed = parse_error_body(data.as_bytes());
        let details = ErrorDetails {
            status: None,
            error_type: parsed.error_type,
            message: parsed.message,
            request_id,
        };
        let mut error = classify(details, parsed.code.as_deref(), parsed.context, None);
        // A numeric code that is an error status is the status this error carries (what a
        // retry reports). It is set after classifying: the class stays the payload's (which
        // reads such a code when it names no class), not the status table's.
        let status = parsed.code.as_deref().and_then(status_of_code);
        if let Some(details) = error.details_mut() {
            details.status = status;
        }
        error
    }

    fn details_mut(&mut self) -> Option<&mut ErrorDetails> {
        match self {
            ClientError::Authentication(details)
            | ClientError::Permission(details)
            | ClientError::NotFound(details)
            | ClientError::Overloaded { details, .. }
            | ClientError::InvalidRequest(details)
            | ClientError::Server { details, .. }
            | ClientError::RateLimited { details, .. }
            | ClientError::QuotaExceeded(details)
            | ClientError::PromptTooLong { details, .. } => Some(details),
            _ => None,
        }
    }
}

/// The request id header of a response: the first of `request-id` and `x-request-id` that
/// holds an id (visible ASCII, not blank). A gateway's empty or non-ASCII `request-id` hid the
/// valid `x-request-id` beside it.
pub(crate) fn request_id(headers: &HeaderMap) -> Option<String> {
    ["request-id", "x-request-id"]
        .iter()
        .flat_map(|name| headers.get_all(*name))
        .filter_map(|value| value.to_str().ok())
        .map(str::trim)
        .find(|id| !id.is_empty())
        .map(str::to_owned)
}

/// Picks the class from the provider's error type, code and message (the decoder's rule,
/// [`ProviderErrorKind::classify`], so that a payload is the same class here as in a binding's
/// decoder), and from the status when the payload names no class the status overrides.
fn classify(
    details: ErrorDetails,
    code: Option<&str>,
    (prompt_tokens, context): (Option<u64>, Option<u64>),
    retry_after: Option<Duration>,
) -> ClientError {
    let error_type = details.error_type.as_deref().unwrap_or("");
    let names = [error_type, code.unwrap_or("")];
    let kind = ProviderErrorKind::classify(&names, &details.message);
    if kind == ProviderErrorKind::PromptTooLong {
        let (tokens, limit) = prompt_too_long(&names, &details.message).unwrap_or_default();
        return ClientError::PromptTooLong {
            details,
            tokens: tokens.or(prompt_tokens),
            limit: limit.or(context),
        };
    }
    use ProviderErrorKind as Kind;
    let class = match (details.status, kind) {
        // OpenAI's billing 429 names itself in `type`, in `code`, or in both; its "Selected
        // model is at capacity" (`code: server_is_overloaded`, a 503 or a `response.failed`)
        // is Anthropic's `overloaded_error`.
        (_, Kind::QuotaExceeded | Kind::Overloaded) => kind,
        (Some(529), _) => Kind::Overloaded,
        // A Chat Completions rate limit names its class in `code`; its `type` is the limit's
        // unit ("tokens", "requests"), which names none.
        (_, Kind::RateLimited) => kind,
        // Otherwise the status decides (the decoder's table); one it does not class is an
        // invalid request, as a 4xx is.
        (Some(status), _) => match Kind::of_status(status) {
            Kind::Other => Kind::InvalidRequest,
            by_status => by_status,
        },
        // No class named and no status: the client has no class of its own for it (the
        // decoder's `provider_error`); a server failure, as a 5xx would be.
        (None, Kind::Other) => Kind::Server,
        (None, named) => named,
    };
    match class {
        Kind::QuotaExceeded => ClientError::QuotaExceeded(details),
        Kind::Overloaded => ClientError::Overloaded {
            details,
            retry_after,
        },
        Kind::RateLimited => ClientError::RateLimited {
            details,
            retry_after,
        },
        Kind::Authentication => ClientError::Authentication(details),
        Kind::Permission => ClientError::Permission(details),
        Kind::NotFound => ClientError::NotFound(details),
        Kind::Server | Kind::Other => ClientError::Server {
            details,
            retry_after,
        },
        // (A prompt too long was answered above, with its sizes.)
        Kind::InvalidRequest | Kind::PromptTooLong => ClientError::InvalidRequest(details),
    }
}

/// A short description of an HTML error page (a proxy's, a load balancer's, a CDN's: the API
/// itself answers errors in JSON): its title, else its first words without markup, and its
/// content type. `None` when the body is not HTML (by its content type, or its first character
/// when it has none). Kilobytes of markup and CSS in an error message help nobody.
fn html_page_summary(headers: &HeaderMap, body: &[u8]) -> Option<String> {
    let media = media_type(headers);
    let text = String::from_utf8_lossy(body);
    let text = text.trim_start();
    let html = match media.as_deref() {
        Some(media) => is_html(media),
        None => text.starts_with('<'),
    };
    if !html {
        return None;
    }
    let lower = text.to_ascii_lowercase();
    // ASCII lowering keeps byte offsets, so positions found in `lower` index `text`.
    let title = lower.find("<title").and_then(|start| {
        let open_end = start + lower[start..].find('>')? + 1;
        let close = open_end + lower[open_end..].find("</title")?;
        Some(text[open_end..close].to_owned())
    });
    let words = title.unwrap_or_else(|| without_markup(text));
    let words: String = words.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut words = excerpt(&words, EXCERPT_CHARS, false);
    if words.is_empty() {
        words.push_str("an empty page");
    }
    let media = media.as_deref().unwrap_or("no content type");
    Some(format!(
        "{words} (an HTML page, {media}: a proxy or gateway answered, not the API)"
    ))
}

/// The media type of a response's `content-type` (lowercase, without its parameters), when it
/// has one.
pub(crate) fn media_type(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(http::header::CONTENT_TYPE)?.to_str().ok()?;
    let media = value.split(';').next().unwrap_or_default();
    Some(media.trim().to_ascii_lowercase())
}

/// The most characters of a body that an error quotes when it says what came instead of
/// what was asked for (enough to recognise a page, short enough for a log line).
pub(crate) const EXCERPT_CHARS: usize = 200;

/// What ends an excerpt that stops before the text it quotes does: a reader must not take
/// "Service Unav" for a page's whole text.
pub(crate) const CUT_MARK: char = '…';

/// The start of `body` as text for an error message: lossy UTF-8, trimmed, at most
/// [`EXCERPT_CHARS`] characters, ending with [`CUT_MARK`] when the text goes on: past those
/// characters, past `body` (`more`: `body` is a prefix of what came, and bytes other than
/// blank space were left out), or in a character cut short at its end, which is left out
/// rather than shown as U+FFFD.
pub(crate) fn body_excerpt(body: &[u8], more: bool) -> String {
    let whole = whole_chars(body);
    let text = String::from_utf8_lossy(whole);
    let text = text.trim();
    let cut = more || whole.len() < body.len();
    excerpt(text, EXCERPT_CHARS, cut)
}

/// `text`'s first `limit` characters, ending with [`CUT_MARK`] when some were left out or
/// `cut` says `text` itself was cut (nothing is marked on an empty excerpt: there is no text
/// to have cut).
pub(crate) fn excerpt(text: &str, limit: usize, cut: bool) -> String {
    let mut chars = text.chars();
    let mut kept: String = chars.by_ref().take(limit).collect();
    if !kept.is_empty() && (cut || chars.next().is_some()) {
        // What was kept ends mid-text: blank space before the mark says nothing.
        kept.truncate(kept.trim_end().len());
        kept.push(CUT_MARK);
    }
    kept
}

/// `bytes` without a UTF-8 sequence cut short at its end (bytes invalid elsewhere are left for
/// the lossy conversion to show).
fn whole_chars(bytes: &[u8]) -> &[u8] {
    match std::str::from_utf8(bytes) {
        Err(cut) if cut.error_len().is_none() => bytes.get(..cut.valid_up_to()).unwrap_or(bytes),
        _ => bytes,
    }
}

/// Whether `media` (see [`media_type`]) is an HTML page.
pub(crate) fn is_html(media: &str) -> bool {
    media == "text/html" || media == "application/xhtml+xml"
}

/// Whether `media` (see [`media_type`]) is JSON.
pub(crate) fn is_json(media: &str) -> bool {
    media == "application/json" || media.ends_with("+json")
}

impl ClientError {
    /// The provider error a success body carries, when it is a JSON document with an `error`
    /// (a gateway that answered 200 with the error it would have streamed): classified as the
    /// same error arriving as an event.
    pub(crate) fn from_json_error_body(body: &[u8], request_id: Option<String>) -> Option<Self> {
        let parsed: serde_json::Value = serde_json::from_slice(body).ok()?;
        // A Responses API object has `"error": null` when it succeeded: no error.
        if parsed.get("error").is_none_or(serde_json::Value::is_null) {
            return None;
        }
        Some(Self::from_stream_error(
            &String::from_utf8_lossy(body),
            request_id,
        ))
    }
}

/// `text` with its tags, and the contents of `style` and `script` elements, left out.
fn without_markup(text: &str) -> String {
    // ASCII lowering keeps byte offsets, so positions found in `lower` index `text`.
    let lower = text.to_ascii_lowercase();
    let mut out = String::new();
    let mut at = 0;
    while let Some(open) = lower[at..].find('<').map(|open| at + open) {
        out.push_str(&text[at..open]);
        out.push(' ');
        let tag = &lower[open..];
        let element_end = if tag.starts_with("<style") {
            tag.find("</style")
        } else if tag.starts_with("<script") {
            tag.find("</script")
        } else {
            Some(0)
        };
        let Some(close) = element_end.and_then(|end| tag[end..].find('>').map(|gt| end + gt))
        else {
            return out;
        };
        at = open + close + 1;
    }
    out.push_str(&text[at..]);
    out
}

/// What an error body says: `{"error": {"type", "code", "message"}}` (Anthropic and OpenAI
/// both), else the shapes of other OpenAI-compatible servers (a top-level `message` and
/// `type`, `{"error": "text"}`, `{"detail": "text"}`), else the raw text.
struct ParsedError {
    error_type: Option<String>,
    /// OpenAI's precise reason (`context_length_exceeded`), which may differ from the type.
    code: Option<String>,
    message: String,
    /// The prompt's size and the context window, when the error object names them apart from
    /// its message (llama.cpp's `n_prompt_tokens` and `n_ctx`).
    context: (Option<u64>, Option<u64>),
}

/// The most characters of a provider's message an error keeps (a diagnostic, not a payload).
const MAX_MESSAGE_CHARS: usize = 2000;

/// `message` cut after [`MAX_MESSAGE_CHARS`] characters (`…` marks the cut), whatever carried
/// it: a raw body, or a JSON error's `message` (a server's may be as large as the error body
/// the client reads, 1 MiB, or a whole event, and it is copied into every retry's reason).
fn clipped(message: String) -> String {
    match message.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((cut, _)) => {
            let mut message = message;
            message.truncate(cut);
            message.push('…');
            message
        }
        None => message,
    }
}

fn parse_error_body(body: &[u8]) -> ParsedError {
    let parsed: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let text_of = |value: Option<&serde_json::Value>| {
        value
            .and_then(serde_json::Value::as_str)
            .filter(|text| !text.is_empty())
            .map(str::to_owned)
    };
    let top = |name: &str| text_of(parsed.as_ref().and_then(|value| value.get(name)));
    let error = parsed
        .as_ref()
        .and_then(|value| value.get("error"))
        .filter(|error| error.is_object());
    let field = |name: &str| text_of(error.and_then(|error| error.get(name)));
    // OpenRouter's `code` is the HTTP status, a number: the decoder reads it as a name too.
    let status_code = |value: Option<&serde_json::Value>| {
        value
            .filter(|code| code.is_u64())
            .map(serde_json::Value::to_string)
    };
    let code = field("code")
        .or_else(|| top("code"))
        .or_else(|| status_code(error.and_then(|error| error.get("code"))));
    let error_type = match error {
        Some(_) => field("type").or_else(|| code.clone()),
        // Anthropic's envelope says `"type": "error"`, which names no class.
        None => top("type").filter(|kind| kind != "error"),
    };
    let message = field("message")
        .or_else(|| top("error"))
        .or_else(|| top("message"))
        .or_else(|| top("detail"))
        .unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_owned());
    let message = clipped(message);
    let count = |name: &str| {
        error
            .and_then(|error| error.get(name))
            .and_then(serde_json::Value::as_u64)
    };
    ParsedError {
        error_type,
        code,
        message,
        context: (count("n_prompt_tokens"), count("n_ctx")),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::decode::classify::numbers;
    use http::HeaderValue;

    /// A prefix cut inside a character loses that character's bytes, and nothing else.
    #[test]
    fn a_character_cut_at_the_end_of_a_prefix_is_left_out() {
        let text = "a\u{e9}\u{20ac}\u{1f600}";
        let bytes = text.as_bytes();
        for cut in 0..=bytes.len() {
            let whole = whole_chars(&bytes[..cut]);
            let kept = std::str::from_utf8(whole).unwrap_or_else(|_| panic!("cut at {cut}"));
            assert!(text.starts_with(kept), "cut at {cut}");
            assert!(cut - whole.len() < 4, "cut at {cut}");
            if text.is_char_boundary(cut) {
                assert_eq!(whole.len(), cut);
            }
        }
        // Bytes that are invalid anyway are left for the lossy conversion to show.
        assert_eq!(whole_chars(b"x\xff"), b"x\xff");
        assert_eq!(whole_chars(b"\x80\x80\x80\x80"), b"\x80\x80\x80\x80");
    }

    fn anthropic_body(kind: &str, message: &str) -> Vec<u8> {
        serde_json::json!({"type": "error", "error": {"type": kind, "message": message}})
            .to_string()
            .into_bytes()
    }

    #[test]
    fn classifies_by_status() {
        let headers = HeaderMap::new();
        let cases: &[(u16, &str)] = &[
            (401, "authentication"),
            (403, "permission"),
            (404, "not_found"),
            (429, "rate_limited"),
            (529, "overloaded"),
            (400, "invalid_request"),
            (422, "invalid_request"),
            (500, "server"),
            (503, "server"),
            (408, "server"),
        ];
        for (status, code) in cases {
            let error = ClientError::from_response(*status, &headers, b"oops", None);
            assert_eq!(error.code(), *code, "{status}");
            assert_eq!(error.status(), Some(*status));
            assert_eq!(error.details().map(|d| d.message.as_str()), Some("oops"));
        }
    }

    #[test]
    fn carries_type_message_and_request_id() {
        let mut headers = HeaderMap::new();
        headers.insert("request-id", HeaderValue::from_static("req_123"));
        let error = ClientError::from_response(
            429,
            &headers,
            &anthropic_body("rate_limit_error", "Number of requests has exceeded"),
            Some(Duration::from_secs(3)),
        );
        let ClientError::RateLimited {
            details,
            retry_after,
        } = &error
        else {
            panic!("{error:?}")
        };
        assert_eq!(*retry_after, Some(Duration::from_secs(3)));
        assert_eq!(details.error_type.as_deref(), Some("rate_limit_error"));
        assert_eq!(details.message, "Number of requests has exceeded");
        assert_eq!(error.request_id(), Some("req_123"));
        assert!(error.to_string().contains("req_123"));
    }

    /// A 503 (or any server error status) keeps the wait its `retry-after` asked for, as a 429
    /// and a 529 do: RFC 9110 defines the header on a 503 for when to come back, and a caller
    /// whose retries ran out needs it to schedule the next attempt. An `api_error` inside a
    /// stream has no headers of its own, so no wait.
    #[test]
    fn a_server_error_keeps_the_wait_of_its_http_response() {
        let mut headers = HeaderMap::new();
        headers.insert("request-id", HeaderValue::from_static("req_503"));
        let unavailable = ClientError::from_response(
            503,
            &headers,
            &anthropic_body("api_error", "unavailable"),
            Some(Duration::from_secs(7)),
        );
        assert_eq!(unavailable.code(), "server", "{unavailable:?}");
        assert_eq!(unavailable.retry_after(), Some(Duration::from_secs(7)));
        assert_eq!(unavailable.request_id(), Some("req_503"));
        let in_stream = ClientError::from_stream_error(
            r#"{"type":"error","error":{"type":"api_error","message":"Internal"}}"#,
            None,
        );
        assert_eq!(in_stream.code(), "server", "{in_stream:?}");
        assert_eq!(in_stream.retry_after(), None);
    }

    /// OpenRouter's `{"error": {"code": 502, "message": ...}}` names its status as its code,
    /// which became both the status and the type: the text read "HTTP 502 502: upstream
    /// error". The type is printed only when it says something the status does not.
    #[test]
    fn a_numeric_code_is_not_printed_twice() {
        let body = serde_json::json!({"error": {"code": 502, "message": "upstream error"}});
        let in_stream = ClientError::from_stream_error(&body.to_string(), None);
        assert_eq!(
            in_stream.to_string(),
            "server error: HTTP 502: upstream error"
        );
        let response =
            ClientError::from_response(502, &HeaderMap::new(), body.to_string().as_bytes(), None);
        assert_eq!(
            response.to_string(),
            "server error: HTTP 502: upstream error"
        );
        // A type that adds something stays, with or without a status.
        let named = ErrorDetails {
            status: Some(529),
            error_type: Some("overloaded_error".into()),
            message: "Overloaded".into(),
            request_id: None,
        };
        assert_eq!(named.to_string(), "HTTP 529 overloaded_error: Overloaded");
        let other_number = ErrorDetails {
            status: Some(502),
            error_type: Some("503".into()),
            message: String::new(),
            request_id: None,
        };
        assert_eq!(other_number.to_string(), "HTTP 502 503");
        let no_status = ErrorDetails {
            status: None,
            error_type: Some("overloaded_error".into()),
            message: "Overloaded".into(),
            request_id: Some("req_1".into()),
        };
        assert_eq!(
            no_status.to_string(),
            "stream error overloaded_error: Overloaded (request id req_1)"
        );
    }

    #[test]
    fn parses_anthropic_prompt_too_long() {
        let error = ClientError::from_response(
            400,
            &HeaderMap::new(),
            &anthropic_body(
                "invalid_request_error",
                "prompt is too long: 201234 tokens > 200000 maximum",
            ),
            None,
        );
        let ClientError::PromptTooLong { tokens, limit, .. } = error else {
            panic!("{error:?}")
        };
        assert_eq!((tokens, limit), (Some(201_234), Some(200_000)));
    }

    /// Local servers' context overflows: llama.cpp's server (`exceed_context_size_error`, older
    /// builds only the message) and LM Studio. The loop compacts on them instead of stopping.
    #[test]
    fn parses_local_servers_context_overflows() {
        let llama = serde_json::json!({"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 5120, "n_ctx": 4096}});
        let old_llama = serde_json::json!({"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it", "type": "invalid_request_error"}});
        let lm_studio = serde_json::json!({"error": "Trying to keep the first 5120 tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens, which is not enough. Try to load the model with a larger context length, or provide a shorter input"});
        let cases = [
            (llama, (Some(5120), Some(4096))),
            (old_llama, (None, None)),
            (lm_studio, (Some(5120), Some(4096))),
        ];
        for (body, expected) in cases {
            let error = ClientError::from_response(
                400,
                &HeaderMap::new(),
                body.to_string().as_bytes(),
                None,
            );
            let ClientError::PromptTooLong { tokens, limit, .. } = error else {
                panic!("{body}: {error:?}")
            };
            assert_eq!((tokens, limit), expected, "{body}");
        }
    }

    #[test]
    fn parses_openai_context_length_exceeded() {
        let body = serde_json::json!({"error": {
            "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 130,512 tokens.",
            "type": "invalid_request_error", "code": "context_length_exceeded"}});
        let error =
            ClientError::from_response(400, &HeaderMap::new(), body.to_string().as_bytes(), None);
        let ClientError::PromptTooLong { tokens, limit, .. } = error else {
            panic!("{error:?}")
        };
        assert_eq!((tokens, limit), (Some(130_512), Some(128_000)));
    }

    #[test]
    fn stream_error_events_are_classified_by_type() {
        let overloaded = ClientError::from_stream_error(
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            Some("req_9".into()),
        );
        assert_eq!(overloaded.code(), "overloaded");
        assert_eq!(overloaded.status(), None);
        assert_eq!(overloaded.request_id(), Some("req_9"));
        let api = ClientError::from_stream_error(
            r#"{"type":"error","error":{"type":"api_error","message":"Internal"}}"#,
            None,
        );
        assert_eq!(api.code(), "server");
        let garbage = ClientError::from_stream_error("not json", None);
        assert_eq!(garbage.code(), "server");
        assert_eq!(
            garbage.details().map(|d| d.message.as_str()),
            Some("not json")
        );
    }

    #[test]
    fn responses_error_events_with_top_level_fields_are_classified() {
        // The Responses API's `error` event carries code and message at the top level.
        let error = ClientError::from_stream_error(
            r#"{"type":"error","code":"context_length_exceeded","message":"Your input exceeds the context window of this model.","param":null,"sequence_number":1}"#,
            None,
        );
        assert_eq!(error.code(), "prompt_too_long", "{error:?}");
        let details = error.details().unwrap();
        assert_eq!(details.error_type, None);
        assert_eq!(
            details.message,
            "Your input exceeds the context window of this model."
        );
    }

    /// OpenAI's "Selected model is at capacity. Please try a different model." comes as a 503
    /// with `code: server_is_overloaded`, or in a `response.failed` event: the loop's cue to
    /// switch to its fallback model, as Anthropic's `overloaded_error` is.
    #[test]
    fn openai_capacity_errors_are_overloaded() {
        let body = serde_json::json!({"error": {"code": "server_is_overloaded", "message": "Selected model is at capacity. Please try a different model.", "param": null, "type": null}});
        let error =
            ClientError::from_response(503, &HeaderMap::new(), body.to_string().as_bytes(), None);
        assert_eq!(error.code(), "overloaded", "{error:?}");
        let failed = ClientError::from_stream_error(
            r#"{"code":"server_is_overloaded","message":"Our servers are currently overloaded. Please try again later."}"#,
            None,
        );
        assert_eq!(failed.code(), "overloaded", "{failed:?}");
        // A `response.failed` error has a code and no type.
        let limited = ClientError::from_stream_error(
            r#"{"code":"rate_limit_exceeded","message":"Rate limit reached for gpt-5 on tokens per min (TPM)."}"#,
            None,
        );
        assert_eq!(limited.code(), "rate_limited", "{limited:?}");
    }

    /// A Chat Completions rate limit sent inside the stream names its class in `code` only
    /// (`type` is the limit's unit, "tokens" or "requests"); with no status to go by it was a
    /// `server` error. The decoder's class for the same event (`provider_kind`) agrees.
    #[test]
    fn an_in_stream_rate_limit_named_by_its_code_is_rate_limited() {
        let data = r#"{"error":{"message":"Rate limit reached for gpt-4o on tokens per min (TPM)","type":"tokens","param":null,"code":"rate_limit_exceeded"}}"#;
        let error = ClientError::from_stream_error(data, None);
        assert_eq!(error.code(), "rate_limited", "{error:?}");
        let decoded = crate::decode::DecodeError::provider(serde_json::from_str(data).unwrap());
        assert_eq!(
            decoded.provider_kind().map(|kind| kind.code()),
            Some("rate_limited")
        );
    }

    /// OpenAI's billing 429 (`insufficient_quota`): its own class, whether the body names it in
    /// `type` or `code`, and as a stream error (a Responses `response.failed` has `code` only).
    #[test]
    fn openai_insufficient_quota_is_quota_exceeded() {
        let body = serde_json::json!({"error": {"message": "You exceeded your current quota, please check your plan and billing details.", "type": "insufficient_quota", "param": null, "code": "insufficient_quota"}});
        let error =
            ClientError::from_response(429, &HeaderMap::new(), body.to_string().as_bytes(), None);
        assert_eq!(error.code(), "quota_exceeded", "{error:?}");
        assert_eq!(error.status(), Some(429));
        let failed = ClientError::from_stream_error(
            r#"{"code":"insufficient_quota","message":"You exceeded your current quota."}"#,
            None,
        );
        assert_eq!(failed.code(), "quota_exceeded", "{failed:?}");
        // Another 429 stays a rate limit.
        let body = serde_json::json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}});
        let limited =
            ClientError::from_response(429, &HeaderMap::new(), body.to_string().as_bytes(), None);
        assert_eq!(limited.code(), "rate_limited", "{limited:?}");
    }

    /// A truncated stream has one code wherever it reaches a user: the client's, the decoder's,
    /// the agent stop event's (`ModelError`) and the bindings' (`StreamTruncatedError`).
    #[test]
    fn a_truncated_stream_has_one_code_everywhere() {
        let client = ClientError::Truncated {
            partial: PartialResponse {
                events: 1,
                bytes: 1,
                last_event_type: None,
                message: None,
            },
            cause: Box::new(ClientError::Connection {
                message: "reset".into(),
                request_id: None,
            }),
            request_id: None,
        };
        let decode = crate::decode::DecodeError::Truncated {
            reason: "no message_stop".into(),
            partial: Box::default(),
        };
        let model = crate::agent::ModelError::truncated("cut", serde_json::Value::Null);
        assert_eq!(client.code(), "stream_truncated");
        assert_eq!(decode.code(), "stream_truncated");
        assert_eq!(model.code(), "stream_truncated");
    }

    #[test]
    fn truncated_exposes_its_cause() {
        let error = ClientError::Truncated {
            partial: PartialResponse {
                events: 3,
                bytes: 10,
                last_event_type: None,
                message: None,
            },
            cause: Box::new(ClientError::from_response(
                529,
                &HeaderMap::new(),
                b"",
                Some(Duration::from_secs(5)),
            )),
            request_id: Some("req".into()),
        };
        assert_eq!(error.code(), "stream_truncated");
        assert_eq!(error.root().code(), "overloaded");
        assert_eq!(error.status(), Some(529));
        assert_eq!(error.retry_after(), Some(Duration::from_secs(5)));
        assert_eq!(error.request_id(), Some("req"));
    }

    /// An error event of the shared table (`tests/decode/error_events.json`, what every
    /// binding's decoder answers) gets the same class from the client, inside a stream and, for
    /// an overflowing prompt, as an HTTP error body. The client used to keep its own rules:
    /// `request_too_large` in a stream was a server failure (the decoder: an invalid request),
    /// and LM Studio's overflow a prompt too long only for the client.
    #[test]
    fn the_shared_error_events_get_the_decoder_s_class() {
        let table: serde_json::Value =
            serde_json::from_str(include_str!("../../../tests/decode/error_events.json")).unwrap();
        let cases = table["cases"].as_array().unwrap();
        assert!(cases.len() >= 15);
        for case in cases {
            let name = case["name"].as_str().unwrap();
            let provider =
                crate::decode::Provider::from_name(case["provider"].as_str().unwrap()).unwrap();
            let mut decoder = crate::decode::StreamDecoder::for_provider(provider);
            let stream = case["stream"].as_str().unwrap().to_owned();
            let Err(crate::decode::DecodeError::Provider { raw, .. }) =
                decoder.feed(bytes::Bytes::from(stream))
            else {
                panic!("{name}: no provider error");
            };
            // The one difference, by design (see `ProviderErrorKind::classify`): an error that
            // names no class and gives no status is the decoder's `provider_error`, and the
            // client's (and the agent's) `server`, since they must act on a class.
            let expected = match case["code"].as_str().unwrap() {
                "provider_error" => "server",
                code => code,
            };
            let in_stream = ClientError::from_stream_error(&raw.to_string(), None);
            assert_eq!(in_stream.code(), expected, "{name}: {in_stream:?}");
            if expected == "prompt_too_long" {
                let body = raw.to_string();
                let http =
                    ClientError::from_response(400, &HeaderMap::new(), body.as_bytes(), None);
                assert_eq!(http.code(), expected, "{name}: {http:?}");
            }
        }
        let lm_studio = serde_json::json!({"error": "Trying to keep the first 5120 tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens, which is not enough."});
        let decoded = crate::decode::DecodeError::provider(lm_studio.clone());
        assert_eq!(
            decoded.provider_kind(),
            Some(crate::decode::ProviderErrorKind::PromptTooLong)
        );
        let in_stream = ClientError::from_stream_error(&lm_studio.to_string(), None);
        assert_eq!(in_stream.code(), "prompt_too_long");
    }

    /// OpenRouter sends a mid-stream error with the HTTP status as its numeric `code`: a 429 is
    /// a rate limit (it was a `server` failure, so the loop did not wait as for one), a 401 an
    /// authentication failure; the decoder classifies the same payload the same way.
    #[test]
    fn an_in_stream_error_with_a_status_as_its_code_is_that_status_s_class() {
        let cases = [
            (
                r#"{"error":{"code":429,"message":"Rate limit exceeded"}}"#,
                "rate_limited",
            ),
            (
                r#"{"error":{"code":401,"message":"No auth credentials found"}}"#,
                "authentication",
            ),
            (r#"{"error":{"code":502,"message":"Overloaded"}}"#, "server"),
            (
                r#"{"error":{"code":529,"message":"Overloaded"}}"#,
                "overloaded",
            ),
            (
                r#"{"error":{"code":400,"message":"bad"}}"#,
                "invalid_request",
            ),
            (r#"{"error":{"message":"no class, no status"}}"#, "server"),
        ];
        for (data, code) in cases {
            let error = ClientError::from_stream_error(data, None);
            assert_eq!(error.code(), code, "{data}: {error:?}");
            let decoded = crate::decode::DecodeError::provider(serde_json::from_str(data).unwrap());
            let kind = decoded.provider_kind().unwrap();
            let decoded_code = match kind.code() {
                "provider_error" => "server",
                other => other,
            };
            assert_eq!(decoded_code, code, "{data}");
        }
        // The status such a code names is the error's status (what a retry reports).
        let error = ClientError::from_stream_error(r#"{"error":{"code":502,"message":"x"}}"#, None);
        assert_eq!(error.status(), Some(502));
        assert!(error.is_transient_provider_error());
        let named = ClientError::from_stream_error(
            r#"{"error":{"code":"rate_limit_exceeded","message":"x"}}"#,
            None,
        );
        assert_eq!(named.status(), None);
        // An HTTP body with such a code: the status still decides a server failure.
        let body = br#"{"error":{"code":400,"message":"upstream said 400"}}"#;
        let error = ClientError::from_response(502, &HeaderMap::new(), body, None);
        assert_eq!(error.code(), "server", "{error:?}");
    }

    #[test]
    fn a_cut_html_summary_says_it_was_cut() {
        // The words of a page without a title are cut to 200 characters: the cut is marked,
        // as every excerpt of a body is; a short page's words are not.
        let page = format!("<body><p>{}</p>", "Unavailable ".repeat(40));
        let error = ClientError::from_response(503, &HeaderMap::new(), page.as_bytes(), None);
        let message = &error.details().unwrap().message;
        assert!(
            message.contains("Unavaila… (an HTML page, no content type"),
            "{message}"
        );
        let error = ClientError::from_response(503, &HeaderMap::new(), b"<p>Down</p>", None);
        let message = &error.details().unwrap().message;
        assert!(message.starts_with("Down (an HTML page"), "{message}");
    }

    #[test]
    fn an_html_error_page_is_summarised_by_its_title_or_its_words() {
        let mut html = HeaderMap::new();
        html.insert(
            "content-type",
            HeaderValue::from_static("text/html; charset=UTF-8"),
        );
        let page = b"<html><head><title>502 Bad Gateway</title><style>h1{x:y}</style></head><body><h1>502</h1></body></html>";
        let error = ClientError::from_response(502, &html, page, None);
        let message = &error.details().unwrap().message;
        assert_eq!(
            message,
            "502 Bad Gateway (an HTML page, text/html: a proxy or gateway answered, not the API)"
        );
        // No title, no content type: the words, without tags, styles and scripts.
        let page = b"<body><style>p{a:b}</style><script>x<y</script><p>Service\n  Unavailable</p>";
        let error = ClientError::from_response(503, &HeaderMap::new(), page, None);
        assert!(
            error
                .details()
                .unwrap()
                .message
                .starts_with("Service Unavailable (an HTML page, no content type"),
            "{error:?}"
        );
        // A JSON error body, and plain text, are left as they are.
        let error = ClientError::from_response(502, &HeaderMap::new(), b"upstream <timeout>", None);
        assert_eq!(error.details().unwrap().message, "upstream <timeout>");
    }

    /// The classes retried when they arrive in a success response before anything was
    /// delivered: the transient ones of the one classification, never a quota or a request the
    /// provider refused.
    #[test]
    fn transient_provider_errors_are_rate_limits_overloads_and_server_failures() {
        let cases = [
            (
                r#"{"type":"error","error":{"type":"overloaded_error","message":"x"}}"#,
                true,
            ),
            (
                r#"{"type":"error","error":{"type":"api_error","message":"x"}}"#,
                true,
            ),
            (
                r#"{"type":"error","error":{"type":"rate_limit_error","message":"x"}}"#,
                true,
            ),
            (r#"{"error":{"code":429,"message":"x"}}"#, true),
            (r#"{"error":{"code":503,"message":"x"}}"#, true),
            (r#"{"code":"server_is_overloaded","message":"x"}"#, true),
            (r#"{"error":{"message":"no class, no status"}}"#, true),
            (
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"x"}}"#,
                false,
            ),
            (
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 300000 tokens > 200000 maximum"}}"#,
                false,
            ),
            (
                r#"{"type":"error","error":{"type":"authentication_error","message":"x"}}"#,
                false,
            ),
            (
                r#"{"type":"error","error":{"type":"permission_error","message":"x"}}"#,
                false,
            ),
            (
                r#"{"type":"error","error":{"type":"not_found_error","message":"x"}}"#,
                false,
            ),
            (
                r#"{"error":{"type":"insufficient_quota","code":"insufficient_quota","message":"x"}}"#,
                false,
            ),
            (r#"{"error":{"code":401,"message":"x"}}"#, false),
        ];
        for (data, transient) in cases {
            let error = ClientError::from_stream_error(data, None);
            assert_eq!(
                error.is_transient_provider_error(),
                transient,
                "{data}: {error:?}"
            );
        }
        let connection = ClientError::Connection {
            message: "reset".into(),
            request_id: None,
        };
        assert!(!connection.is_transient_provider_error());
    }

    /// A Responses API object says `"error": null` when it succeeded: not an error body.
    #[test]
    fn a_null_error_field_is_not_an_error_body() {
        let body =
            br#"{"id":"resp_1","object":"response","status":"completed","error":null,"output":[]}"#;
        assert!(ClientError::from_json_error_body(body, None).is_none());
        let failed = br#"{"id":"resp_1","object":"response","status":"failed","error":{"code":"server_error","message":"x"}}"#;
        let error = ClientError::from_json_error_body(failed, None).unwrap();
        assert_eq!(error.code(), "server");
    }

    /// A JSON error's message is cut as the raw body's always was: a 900 KB `message` (in a
    /// body under the 1 MiB the client reads, or in an error event) was kept whole, in the
    /// error and in every retry's reason.
    #[test]
    fn a_huge_message_is_cut_whatever_carries_it() {
        let huge = "y".repeat(900_000);
        let body = anthropic_body("invalid_request_error", &huge);
        let error = ClientError::from_response(400, &HeaderMap::new(), &body, None);
        let message = &error.details().unwrap().message;
        assert_eq!(message.chars().count(), 2001, "{}", message.len());
        assert!(message.ends_with("y…"));
        let event = format!(r#"{{"error":{{"message":"{huge}"}}}}"#);
        let error = ClientError::from_stream_error(&event, None);
        assert_eq!(error.details().unwrap().message.chars().count(), 2001);
        // The raw body too, and a short message is left whole (multibyte text counts by
        // characters, not bytes).
        let error = ClientError::from_response(502, &HeaderMap::new(), huge.as_bytes(), None);
        assert_eq!(error.details().unwrap().message.chars().count(), 2001);
        let short = "é".repeat(2000);
        let error = ClientError::from_stream_error(
            &format!(r#"{{"error":{{"message":"{short}"}}}}"#),
            None,
        );
        assert_eq!(error.details().unwrap().message, short);
    }

    /// An empty or non-ASCII `request-id` does not hide a valid `x-request-id` (it made the
    /// request id `None`, or an empty one).
    #[test]
    fn the_request_id_is_the_first_header_that_holds_one() {
        let headers = |pairs: &[(&'static str, &'static [u8])]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.append(*name, HeaderValue::from_bytes(value).unwrap());
            }
            map
        };
        for bad in [&b"caf\xe9"[..], b"", b"  "] {
            let map = headers(&[("request-id", bad), ("x-request-id", b"req_2")]);
            assert_eq!(request_id(&map).as_deref(), Some("req_2"), "{bad:?}");
        }
        let map = headers(&[("request-id", b"req_1"), ("x-request-id", b"req_2")]);
        assert_eq!(request_id(&map).as_deref(), Some("req_1"));
        assert_eq!(request_id(&headers(&[("request-id", b"")])), None);
        let error = ClientError::from_response(
            401,
            &headers(&[("request-id", b"caf\xe9"), ("x-request-id", b"req_2")]),
            b"{}",
            None,
        );
        assert_eq!(error.request_id(), Some("req_2"));
    }

    #[test]
    fn numbers_skip_thousands_separators() {
        assert_eq!(numbers("a 1,234 b 5, 6"), vec![1234, 5, 6]);
        assert_eq!(numbers("99999999999999999999999"), vec![u64::MAX]);
    }

    proptest::proptest! {
        #[test]
        fn any_status_and_body_classify_without_panicking(
            status in 100u16..1000,
            body in proptest::collection::vec(proptest::num::u8::ANY, 0..300),
            message in ".{0,80}",
        ) {
            let error = ClientError::from_response(status, &HeaderMap::new(), &body, None);
            proptest::prop_assert_eq!(error.status(), Some(status));
            let json = serde_json::json!({"error": {"type": "x", "message": message}});
            let error = ClientError::from_response(status, &HeaderMap::new(), json.to_string().as_bytes(), None);
            proptest::prop_assert!(!error.code().is_empty());
            let _ = ClientError::from_stream_error(&message, None);
            let mut html = HeaderMap::new();
            html.insert("content-type", http::HeaderValue::from_static("text/html"));
            let _ = ClientError::from_response(status, &html, message.as_bytes(), None);
            let _ = html_page_summary(&html, &body);
        }

        #[test]
        fn numbers_are_found_wherever_they_sit(prefix in "[a-z :]{0,10}", n in 0u64..1_000_000_000, suffix in "[a-z >]{0,10}") {
            let text = format!("{prefix}{n}{suffix}");
            proptest::prop_assert_eq!(numbers(&text), vec![n]);
        }
    }
}
