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

impl DecodeError {
    /// A short machine-readable code for bindings: `invalid_json`, `protocol`, `provider`,
    /// `stream_truncated` (the code of a truncated stream everywhere: the client's, the agent
    /// stop event's and the bindings' `StreamTruncatedError`).
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidJson { .. } => "invalid_json",
            Self::Protocol(_) => "protocol",
            Self::Provider { .. } => "provider",
            Self::Truncated { .. } => "stream_truncated",
        }
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
            .unwrap_or("")
            .to_owned();
        Self::Provider {
            error_type,
            message,
            raw,
        }
    }

    /// What a decoder's `finish()` answers: the provider error the stream carried, if any;
    /// otherwise `Truncated` (with `reasons.0` when the stream never started, `reasons.1` when
    /// it started but did not complete); otherwise the final message.
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
        if let Some(error) = failure.and_then(DecodeError::replay) {
            return Some(error);
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

    /// A copy of a provider error, to answer again from `finish()`.
    pub(crate) fn replay(&self) -> Option<Self> {
        match self {
            Self::Provider {
                error_type,
                message,
                raw,
            } => Some(Self::Provider {
                error_type: error_type.clone(),
                message: message.clone(),
                raw: raw.clone(),
            }),
            _ => None,
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

    #[test]
    fn a_truncated_stream_is_stream_truncated() {
        let error = DecodeError::Truncated {
            reason: "no message_stop".into(),
            partial: Box::default(),
        };
        assert_eq!(error.code(), "stream_truncated");
    }
}
