//! Decoder errors.

use serde_json::Value;

/// Why a decoder rejected an event or the end of a stream.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// An event's data was not the JSON the protocol requires.
    #[error("invalid JSON in `{event_type}` event: {source}")]
    InvalidJson {
        /// The SSE event type (or the JSON `type`) being decoded.
        event_type: String,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// The events broke the provider's streaming protocol.
    #[error("protocol error: {0}")]
    Protocol(#[from] ProtocolError),
    /// The provider sent an error in the stream (e.g. `overloaded_error` after HTTP 200).
    #[error("provider error `{error_type}`: {message}")]
    Provider {
        /// The provider's error type (`overloaded_error`, `api_error`, `server_error`, ...).
        error_type: String,
        /// The provider's message.
        message: String,
        /// The whole error payload as sent.
        raw: Value,
    },
    /// Bytes were fed to a [`StreamDecoder`](super::StreamDecoder) after its `finish()`: the
    /// input had ended, so they would be decoded as a continuation of the finished stream (a
    /// second `message_start`, ...). A new stream needs a new decoder.
    #[error("the decoder was finished: bytes fed after finish() belong to a new decoder")]
    Finished,
    /// The stream ended before the message completed. Carries the message accumulated so far,
    /// in the provider's response shape.
    #[error("truncated stream: {reason}")]
    Truncated {
        /// What was missing.
        reason: String,
        /// The partial message (a snapshot, valid JSON).
        partial: Box<Value>,
    },
}

/// A full copy, for an answer given again (a second `finish()` answers as the first did). The
/// JSON parser's error cannot be cloned; its copy carries the same text.
impl Clone for DecodeError {
    fn clone(&self) -> Self {
        match self {
            Self::InvalidJson { event_type, source } => Self::InvalidJson {
                event_type: event_type.clone(),
                source: <serde_json::Error as serde::de::Error>::custom(source),
            },
            Self::Protocol(error) => Self::Protocol(error.clone()),
            Self::Provider {
                error_type,
                message,
                raw,
            } => Self::Provider {
                error_type: error_type.clone(),
                message: message.clone(),
                raw: raw.clone(),
            },
            Self::Finished => Self::Finished,
            Self::Truncated { reason, partial } => Self::Truncated {
                reason: reason.clone(),
                partial: partial.clone(),
            },
        }
    }
}

impl DecodeError {
    /// A short machine-readable code for bindings: `invalid_json`, `protocol`, `provider`,
    /// `invalid_state` (fed after `finish()`), `stream_truncated` (the code of a truncated stream everywhere: the client's, the agent
    /// stop event's and the bindings' `StreamTruncatedError`).
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidJson { .. } => "invalid_json",
            Self::Protocol(_) => "protocol",
            Self::Provider { .. } => "provider",
            Self::Finished => "invalid_state",
            Self::Truncated { .. } => "stream_truncated",
        }
    }

    /// The class of a provider's error event ([`DecodeError::Provider`]; `None` for the other
    /// variants), what the bindings turn into their typed errors (Python's `OverloadedError`,
    /// Node's `code: 'overloaded'`, ...), so that the same event is the same error everywhere.
    ///
    /// Both the error `type` and the `code` of the payload are read: OpenAI names a rate limit
    /// `type: "tokens"` / `code: "rate_limit_exceeded"`, an overflowing prompt
    /// `type: "invalid_request_error"` / `code: "context_length_exceeded"`, and a model at
    /// capacity `code: "server_is_overloaded"`. The rule is [`ProviderErrorKind::classify`],
    /// which the client (`ClientError`, feature `client`) applies to the same payload, inside a
    /// stream or as an HTTP error body; the classes' codes are the client's.
    pub fn provider_kind(&self) -> Option<ProviderErrorKind> {
        let Self::Provider {
            error_type,
            message,
            raw,
        } = self
        else {
            return None;
        };
        let inner = raw.get("error").filter(|e| e.is_object()).unwrap_or(raw);
        // OpenRouter's `code` is the HTTP status, a number.
        let code = match inner.get("code") {
            Some(Value::String(code)) => code.clone(),
            Some(Value::Number(status)) => status.to_string(),
            _ => String::new(),
        };
        // The client's rule too (an HTTP error body, an error event it reads itself).
        let kind = ProviderErrorKind::classify(&[error_type.as_str(), &code], message);
        Some(kind)
    }

    pub(crate) fn json(event_type: &str, source: serde_json::Error) -> Self {
        Self::InvalidJson {
            event_type: event_type.to_owned(),
            source,
        }
    }

    /// Builds a [`DecodeError::Provider`] from an error payload such as
    /// `{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}` or
    /// `{"error": {"message": ..., "type": ...}}` or `{"type": "error", "code": ..., "message": ...}`.
    pub(crate) fn provider(raw: Value) -> Self {
        let inner = raw.get("error").filter(|e| e.is_object()).unwrap_or(&raw);
        let field = |name: &str| inner.get(name).and_then(Value::as_str);
        // OpenRouter's `code` is the HTTP status, a number.
        let number_code = inner
            .get("code")
            .filter(|c| c.is_number())
            .map(Value::to_string);
        let error_type = field("type")
            .filter(|t| *t != "error")
            .or_else(|| field("code"))
            .map(str::to_owned)
            .or(number_code)
            .unwrap_or_else(|| "unknown_error".to_owned());
        // `{"error": "text"}` (llama.cpp, some gateways): the text is the message.
        let message = field("message")
            .or_else(|| raw.get("error").and_then(Value::as_str))
            .map_or_else(
                // Data that is not JSON (kept as its text) or names no message: the payload is
                // all there is to say what failed (an empty message said nothing).
                || match &raw {
                    Value::String(text) => text.clone(),
                    payload => payload.to_string(),
                },
                str::to_owned,
            );
        Self::Provider {
            error_type,
            message,
            raw,
        }
    }

    /// What a decoder's `finish()` answers: the first error an event of the stream raised (a
    /// provider error, [`DecodeError::InvalidJson`] or [`DecodeError::Protocol`], kept by
    /// [`remember`](Self::remember)), if any; otherwise `Truncated` (with `reasons.0` when the
    /// stream never started, `reasons.1` when it started but did not complete); otherwise the
    /// final message.
    pub(crate) fn finish_result(
        failure: Option<&DecodeError>,
        complete: bool,
        started: bool,
        (not_started, not_completed): (&str, &str),
        message: impl Fn() -> serde_json::Value,
    ) -> Result<serde_json::Value, DecodeError> {
        match Self::finish_error(
            failure,
            complete,
            started,
            (not_started, not_completed),
            &message,
        ) {
            Some(error) => Err(error),
            None => Ok(message()),
        }
    }

    /// The error of [`finish_result`](Self::finish_result), if it has one; `partial` gives the
    /// message a [`DecodeError::Truncated`] carries.
    pub(crate) fn finish_error(
        failure: Option<&DecodeError>,
        complete: bool,
        started: bool,
        (not_started, not_completed): (&str, &str),
        partial: impl FnOnce() -> serde_json::Value,
    ) -> Option<DecodeError> {
        if let Some(error) = failure {
            return Some(error.clone());
        }
        if !complete {
            let reason = if started { not_completed } else { not_started };
            return Some(DecodeError::Truncated {
                reason: reason.to_owned(),
                partial: Box::new(partial()),
            });
        }
        None
    }

    /// Keeps `result`'s error in `failure` if it is the stream's first, for `finish()` to answer
    /// with again (see [`finish_result`](Self::finish_result)): the decoders' `push_event`
    /// passes every event's result through it. A stream that broke (a provider's error event,
    /// an event whose JSON does not parse or breaks the protocol) does not finish with a
    /// message, which would silently lack what the broken event carried.
    pub(crate) fn remember(
        failure: &mut Option<DecodeError>,
        result: Result<(), DecodeError>,
    ) -> Result<(), DecodeError> {
        if let Err(error) = &result
            && failure.is_none()
        {
            *failure = Some(error.clone());
        }
        result
    }
}

/// The class of a provider's error event (see [`DecodeError::provider_kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderErrorKind {
    /// The provider is overloaded (`overloaded_error`, OpenAI's `server_is_overloaded`).
    Overloaded,
    /// Rate limited (`rate_limit_error`, `rate_limit_exceeded`).
    RateLimited,
    /// No credit left (OpenAI's `insufficient_quota`).
    QuotaExceeded,
    /// The prompt does not fit the context window (`context_length_exceeded`, "prompt is too
    /// long", "maximum context length").
    PromptTooLong,
    /// The credentials were rejected (`authentication_error`, `invalid_api_key`).
    Authentication,
    /// The credentials may not do this (`permission_error`).
    Permission,
    /// No such model or resource (`not_found_error`).
    NotFound,
    /// The request was rejected as invalid (`invalid_request_error`, `request_too_large`).
    InvalidRequest,
    /// The provider failed (`api_error`, `server_error`).
    Server,
    /// Any other error type.
    Other,
}

impl ProviderErrorKind {
    /// The stable code, in the client's names (`overloaded`, `rate_limited`, ...);
    /// `provider_error` for [`Other`](Self::Other).
    pub fn code(self) -> &'static str {
        match self {
            Self::Overloaded => "overloaded",
            Self::RateLimited => "rate_limited",
            Self::QuotaExceeded => "quota_exceeded",
            Self::PromptTooLong => "prompt_too_long",
            Self::Authentication => "authentication",
            Self::Permission => "permission",
            Self::NotFound => "not_found",
            Self::InvalidRequest => "invalid_request",
            Self::Server => "server",
            Self::Other => "provider_error",
        }
    }
}

/// A violation of the streaming protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// An event arrived before the stream's opening event (`message_start`, first chunk,
    /// `response.created`).
    #[error("`{event_type}` before the start of the message")]
    BeforeStart {
        /// The offending event.
        event_type: String,
    },
    /// A second opening event in one stream (Anthropic: a `message_start` of another message,
    /// or one after `message_stop`; a repeat of the open message's own is ignored).
    #[error("a second `{event_type}` in one stream")]
    DuplicateStart {
        /// The offending event.
        event_type: String,
    },
    /// An event referred to a content index that was never started (or was out of order).
    #[error("`{event_type}` for unknown content index {index}")]
    UnknownIndex {
        /// The offending event.
        event_type: String,
        /// The index it named.
        index: u64,
    },
    /// A content block started at an index other than the next one.
    #[error("content block started at index {index}, expected {expected}")]
    OutOfOrderIndex {
        /// The index it named.
        index: u64,
        /// The next free index.
        expected: u64,
    },
    /// An event arrived after the message had ended.
    #[error("`{event_type}` after the end of the message")]
    AfterEnd {
        /// The offending event.
        event_type: String,
    },
    /// A required field was missing or had the wrong type.
    #[error("`{event_type}` event: {detail}")]
    Malformed {
        /// The offending event.
        event_type: String,
        /// What was wrong.
        detail: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_truncated_stream_is_stream_truncated() {
        let error = DecodeError::Truncated {
            reason: "no message_stop".into(),
            partial: Box::default(),
        };
        assert_eq!(error.code(), "stream_truncated");
    }

    /// An error event whose data is not JSON, or names no message, is said in the payload's
    /// own words: `ferroloop decode` printed "provider error `unknown_error`: " and nothing else.
    #[test]
    fn an_error_event_without_a_message_is_said_by_its_payload() {
        let cases = [
            (
                Value::String("not json".into()),
                "provider error `unknown_error`: not json",
            ),
            (
                json!({"type": "error", "error": {"type": "api_error"}}),
                r#"provider error `api_error`: {"type":"error","error":{"type":"api_error"}}"#,
            ),
            (
                json!({"type": "error", "error": {"type": "api_error", "message": "Internal"}}),
                "provider error `api_error`: Internal",
            ),
            (
                json!({"error": "busy"}),
                "provider error `unknown_error`: busy",
            ),
        ];
        for (raw, said) in cases {
            assert_eq!(DecodeError::provider(raw).to_string(), said);
        }
    }

    /// The class of an error event reads its `type` and its `code`, whichever names it.
    #[test]
    fn provider_error_kinds_read_type_code_and_message() {
        let cases = [
            (
                json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
                ProviderErrorKind::Overloaded,
            ),
            (
                json!({"error": {"code": "server_is_overloaded", "message": "Selected model is at capacity"}}),
                ProviderErrorKind::Overloaded,
            ),
            (
                json!({"error": {"type": "tokens", "code": "rate_limit_exceeded", "message": "Rate limit reached"}}),
                ProviderErrorKind::RateLimited,
            ),
            (
                json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}),
                ProviderErrorKind::RateLimited,
            ),
            (
                json!({"error": {"type": "insufficient_quota", "code": "insufficient_quota", "message": "quota"}}),
                ProviderErrorKind::QuotaExceeded,
            ),
            (
                json!({"type": "error", "error": {"type": "invalid_request_error", "message": "Prompt is too long: 210000 tokens > 200000 maximum"}}),
                ProviderErrorKind::PromptTooLong,
            ),
            (
                json!({"error": {"type": "invalid_request_error", "code": "context_length_exceeded", "message": "This model's maximum context length is 128000 tokens."}}),
                ProviderErrorKind::PromptTooLong,
            ),
            (
                json!({"type": "error", "error": {"type": "authentication_error", "message": "bad key"}}),
                ProviderErrorKind::Authentication,
            ),
            (
                json!({"type": "error", "error": {"type": "permission_error", "message": "no"}}),
                ProviderErrorKind::Permission,
            ),
            (
                json!({"type": "error", "error": {"type": "not_found_error", "message": "no model"}}),
                ProviderErrorKind::NotFound,
            ),
            (
                json!({"type": "error", "error": {"type": "request_too_large", "message": "too many bytes"}}),
                ProviderErrorKind::InvalidRequest,
            ),
            (
                json!({"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}),
                ProviderErrorKind::Server,
            ),
            // OpenRouter's in-stream errors give the HTTP status as their code.
            (
                json!({"error": {"message": "upstream", "code": 502}}),
                ProviderErrorKind::Server,
            ),
            (
                json!({"error": {"message": "Rate limit exceeded", "code": 429}}),
                ProviderErrorKind::RateLimited,
            ),
            (
                json!({"error": {"message": "no class named"}}),
                ProviderErrorKind::Other,
            ),
        ];
        for (raw, kind) in cases {
            let error = DecodeError::provider(raw.clone());
            assert_eq!(error.provider_kind(), Some(kind), "{raw}");
        }
        assert_eq!(ProviderErrorKind::Other.code(), "provider_error");
        let truncated = DecodeError::Truncated {
            reason: String::new(),
            partial: Box::default(),
        };
        assert_eq!(truncated.provider_kind(), None);
    }
}
