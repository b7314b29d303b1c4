//! Errors crossing into JavaScript: a stable code plus optional HTTP status and request id.
//!
//! napi-rs turns a `napi::Error` into a JS `Error` (synchronously thrown, or a Promise rejection).
//! The message of that error starts with a tag carrying the code, status and request id
//! (`[ferroloop:<code>:<status>:<request id>] <message>`, see [`FerroloopError::tagged_message`]);
//! `lib/errors.js` decodes it and rethrows the matching `FerroloopError` subclass. The tag is
//! private to this package: it survives every path napi-rs has for errors (sync throw, async
//! rejection, thread-safe callbacks), unlike the `code` property.

use std::fmt;

/// The prefix of an encoded error code; anything else is not a ferroloop error.
pub const CODE_PREFIX: &str = "ferroloop";

/// Stable error codes, as seen by JavaScript (`err.code`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// An argument had the wrong type or an invalid value.
    InvalidArgument,
    /// The object was used in a state that does not allow the call: bytes fed to a decoder
    /// after `finish()`, a call submitted to a sealed turn (C's `FL_STATUS_INVALID_STATE`).
    InvalidState,
    /// A bug in ferroloop (a caught panic or a broken invariant).
    Internal,
    /// An operation ran past its deadline.
    Timeout,
    /// The stream ended before the message completed.
    StreamTruncated,
    /// The peer broke the wire protocol (malformed event, mid-stream error event).
    Protocol,
    /// The provider rate-limited the request (HTTP 429).
    RateLimited,
    /// The account has no credit left (OpenAI's `insufficient_quota`); never retried.
    QuotaExceeded,
    /// The provider is overloaded (HTTP 529 / 503).
    Overloaded,
    /// The request does not fit the model's context window.
    PromptTooLong,
    /// The operation was aborted by the caller.
    Aborted,
    /// The provider reported an error not covered by a more specific code.
    ProviderError,
    /// The provider rejected the credentials (HTTP 401).
    Authentication,
    /// The credentials may not do this (HTTP 403).
    Permission,
    /// No such endpoint or model (HTTP 404).
    NotFound,
    /// The provider rejected the request as invalid (another 4xx).
    InvalidRequest,
    /// The provider failed (5xx) and the retries ran out.
    Server,
    /// The connection could not be made or broke.
    Connection,
    /// The feature is not compiled into this build of the addon.
    Unsupported,
}

impl ErrorCode {
    /// The code string JavaScript sees.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidArgument => "invalid_argument",
            Self::InvalidState => "invalid_state",
            Self::Internal => "internal",
            Self::Timeout => "timeout",
            Self::StreamTruncated => "stream_truncated",
            Self::Protocol => "protocol",
            Self::RateLimited => "rate_limited",
            Self::QuotaExceeded => "quota_exceeded",
            Self::Overloaded => "overloaded",
            Self::PromptTooLong => "prompt_too_long",
            Self::Aborted => "aborted",
            Self::ProviderError => "provider_error",
            Self::Authentication => "authentication",
            Self::Permission => "permission",
            Self::NotFound => "not_found",
            Self::InvalidRequest => "invalid_request",
            Self::Server => "server",
            Self::Connection => "connection",
            Self::Unsupported => "unsupported",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error on its way to JavaScript.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FerroloopError {
    /// The stable code.
    pub code: ErrorCode,
    /// A human-readable message.
    pub message: String,
    /// The HTTP status, for errors that came from a provider response.
    pub status: Option<u16>,
    /// The provider's request id, when known.
    pub request_id: Option<String>,
}

impl FerroloopError {
    /// An error with a code and a message, no status and no request id.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            status: None,
            request_id: None,
        }
    }

    /// An `invalid_argument` error.
    pub fn invalid_argument(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidArgument, message)
    }

    /// An `invalid_state` error.
    pub fn invalid_state(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidState, message)
    }

    /// An `internal` error.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }

    /// The message handed to napi-rs:
    /// `[ferroloop:<code>:<status or empty>:<request id or empty>] <message>`. A `]` in the
    /// request id (never seen in practice) is replaced so the tag stays parseable.
    pub fn tagged_message(&self) -> String {
        let status = self.status.map(|s| s.to_string()).unwrap_or_default();
        let request_id = self.request_id.as_deref().unwrap_or("").replace(']', "_");
        format!(
            "[{CODE_PREFIX}:{}:{status}:{request_id}] {}",
            self.code, self.message
        )
    }
}

impl From<&ferroloop::client::ClientError> for FerroloopError {
    fn from(err: &ferroloop::client::ClientError) -> Self {
        use ferroloop::client::ClientError as E;
        let code = match err {
            E::Authentication(_) => ErrorCode::Authentication,
            E::Permission(_) => ErrorCode::Permission,
            E::NotFound(_) => ErrorCode::NotFound,
            E::RateLimited { .. } => ErrorCode::RateLimited,
            E::QuotaExceeded(_) => ErrorCode::QuotaExceeded,
            E::Overloaded { .. } => ErrorCode::Overloaded,
            E::PromptTooLong { .. } => ErrorCode::PromptTooLong,
            E::InvalidRequest(_) => ErrorCode::InvalidRequest,
            E::Server { .. } => ErrorCode::Server,
            E::Connection { .. } => ErrorCode::Connection,
            E::Timeout { .. } => ErrorCode::Timeout,
            E::Truncated { .. } => ErrorCode::StreamTruncated,
            E::Protocol { .. } | E::EventTooLarge { .. } => ErrorCode::Protocol,
            E::Config(_) => ErrorCode::InvalidArgument,
        };
        Self {
            code,
            message: err.to_string(),
            status: err.status(),
            request_id: err.request_id().map(str::to_owned),
        }
    }
}

/// How deep serde_json nests when it reads JSON text (the core's
/// [`MAX_NESTING`](ferroloop::json_text::MAX_NESTING), the limit of every binding): a value
/// nested deeper (an array in an array ... 128 times) is refused, so that reading it cannot
/// overflow the stack.
pub const JSON_DEPTH_LIMIT: usize = ferroloop::json_text::MAX_NESTING;

/// The `invalid_argument` error for JSON text (`what`: `the request`, `extra`, ...) that
/// serde_json refused with `err`. JSON the JS side produced with `JSON.stringify` is valid, so
/// the likely refusal is the depth limit: serde_json words it "recursion limit exceeded" and
/// calls it a syntax error, which read as "not valid JSON" (or, for `extra`, "must be a JSON
/// object") and sent users looking for a syntax error that is not there. It says the depth.
pub fn invalid_json(what: &str, err: &serde_json::Error) -> FerroloopError {
    // serde_json has no category of its own for the limit (it is a syntax error there); its
    // message is the only sign of it.
    if err.to_string().starts_with("recursion limit exceeded") {
        FerroloopError::invalid_argument(format!(
            "{what} is nested deeper than {JSON_DEPTH_LIMIT} levels (the limit of a JSON value \
             ferroloop reads): flatten it"
        ))
    } else {
        FerroloopError::invalid_argument(format!("{what} is not valid JSON: {err}"))
    }
}

/// A number as JavaScript writes it (`Number.prototype.toString`), for quoting the value a
/// caller gave in a message: `Infinity`, not Rust's `inf`; `1e+300`, not its 301 digits;
/// `1e-7`, not `0.0000001`. Rust's shortest round-trip digits are JavaScript's.
pub(crate) struct JsNumber(pub f64);

impl fmt::Display for JsNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = self.0;
        if value.is_nan() {
            return f.write_str("NaN");
        }
        if value.is_infinite() {
            return f.write_str(if value > 0.0 { "Infinity" } else { "-Infinity" });
        }
        if value == 0.0 {
            // -0 too, as JavaScript writes it.
            return f.write_str("0");
        }
        let magnitude = value.abs();
        if (1e-6..1e21).contains(&magnitude) {
            return write!(f, "{value}");
        }
        let text = format!("{value:e}");
        match text.split_once('e') {
            Some((mantissa, exponent)) if !exponent.starts_with('-') => {
                write!(f, "{mantissa}e+{exponent}")
            }
            _ => f.write_str(&text),
        }
    }
}

impl fmt::Display for FerroloopError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for FerroloopError {}

impl From<FerroloopError> for napi::Error {
    fn from(err: FerroloopError) -> Self {
        napi::Error::new(napi::Status::GenericFailure, err.tagged_message())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_carries_code_status_and_request_id() {
        let mut err = FerroloopError::new(ErrorCode::RateLimited, "slow down");
        err.status = Some(429);
        err.request_id = Some("req_1]x".to_owned());
        assert_eq!(
            err.tagged_message(),
            "[ferroloop:rate_limited:429:req_1_x] slow down"
        );
    }

    /// The message of JSON deeper than serde_json reads says so, not "not valid JSON".
    #[test]
    fn json_nested_too_deep_is_named_as_such() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let err = serde_json::from_str::<serde_json::Value>(&deep)
            .err()
            .map(|err| invalid_json("the request", &err));
        assert_eq!(
            err.map(|err| (err.code, err.message)),
            Some((
                ErrorCode::InvalidArgument,
                "the request is nested deeper than 127 levels (the limit of a JSON value \
                 ferroloop reads): flatten it"
                    .to_owned()
            ))
        );
        let bad = serde_json::from_str::<serde_json::Value>("{")
            .err()
            .map(|err| invalid_json("the request", &err).message);
        assert!(bad.is_some_and(|m| m.starts_with("the request is not valid JSON: ")));
    }

    #[test]
    fn tag_without_status_or_request_id() {
        let err = FerroloopError::internal("boom");
        assert_eq!(err.tagged_message(), "[ferroloop:internal::] boom");
    }
}
