//! The model seen by the loop: a request in, a stream of decoded events out.
//!
//! The loop does not care whether the model is the HTTP client against a real endpoint, the
//! replay server, or an in-process script: each is a [`Model`].

use std::pin::Pin;
use std::time::Duration;

use futures_core::Stream;
use serde_json::Value;

use crate::decode::{DecodeError, DecodeEvent, ProviderErrorKind};

/// What a model call yields, in order: decoded events as they stream, retries, and exactly one
/// final item ([`ModelEvent::Completed`] or [`ModelEvent::Failed`]).
#[derive(Debug)]
pub enum ModelEvent {
    /// A decoded provider event (text delta, sealed tool call, ...).
    Decoded(DecodeEvent),
    /// The request is being retried (rate limit, overload, connection reset).
    Retry {
        /// The attempt about to be made (2 for the first retry).
        attempt: u32,
        /// The HTTP status that caused it, if any.
        status: Option<u16>,
        /// The class of the failure, as the client names it
        /// (the client's `RetryEvent::code`, feature `client`:
        /// `overloaded`, `rate_limited`, `server`, `connection`, `timeout`, ...); `None` from
        /// a model that does not say. The agent's [`Retry`](super::AgentEvent::Retry) event
        /// carries it, so a host can tell why the loop waits when there is no status.
        code: Option<&'static str>,
        /// The provider is overloaded: an HTTP 529, or an overload reported in a 200 before
        /// anything was delivered (Anthropic's `overloaded_error` event, which has no status;
        /// OpenAI's `server_is_overloaded`). The loop counts these toward
        /// [`fallback_after_529_retries`](super::AgentConfig::fallback_after_529_retries).
        overloaded: bool,
        /// How long the client waits before the attempt.
        wait: Duration,
    },
    /// The message completed (in the Anthropic Messages response shape).
    Completed {
        /// The final message.
        message: Value,
        /// Time to the first event, when measured.
        time_to_first_token: Option<Duration>,
        /// The provider's request id, when known.
        request_id: Option<String>,
    },
    /// The call failed.
    Failed(ModelError),
}

/// What the client knew of a failed model call, beyond its text: what a host needs to schedule
/// a new run after the wait the provider asked for, or to quote the request to its support. The
/// stop event of a run that ends on the failure carries it (`status`, `request_id`,
/// `retry_after`). Every field is `None` when not known: a host's model sets what it knows with
/// [`ModelError::with_details`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FailureDetails {
    /// The HTTP status of the failed response (for an error event in a 200, the status it
    /// names as its numeric `code`, as the client's `ClientError::status` has it, feature
    /// `client`); `None` for a failure without one (a lost connection, a timeout, an error
    /// event that names none).
    pub status: Option<u16>,
    /// The provider's request id (`request-id` / `x-request-id`), when the headers arrived.
    pub request_id: Option<String>,
    /// The wait the provider asked for (`retry-after-ms` / `retry-after`) in its last answer:
    /// the client keeps it for a rate limit (HTTP 429), an overload (HTTP 529) and a server
    /// error (a 5xx such as a 503, or a 408), none for an error event inside a stream.
    pub retry_after: Option<Duration>,
}

/// Why a model call failed, in the classes the loop reacts to differently. Each class holds
/// the [`FailureDetails`] its model knew (the client's status, request id and requested wait;
/// none from [`ModelError::other`] and the other constructors until
/// [`ModelError::with_details`] adds them).
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The prompt is over the model's context window (the loop compacts once and retries; it
    /// stops with `prompt_too_long` when compaction cannot shrink the history, or when the
    /// retry is refused again).
    #[error("{}", prompt_too_long_text(message))]
    PromptTooLong {
        /// The provider's message.
        message: String,
        /// What the model knew of the failed call.
        details: FailureDetails,
    },
    /// The stream stopped before the message completed (the loop discards the turn and
    /// retries it once).
    #[error("stream truncated: {reason}")]
    Truncated {
        /// What was missing.
        reason: String,
        /// The message accumulated so far.
        partial: Box<Value>,
        /// What the model knew of the failed call (from the client: the call's request id, and
        /// the status of what broke it, if it had one).
        details: FailureDetails,
    },
    /// The provider is overloaded (HTTP 529 or an `overloaded_error`; OpenAI's "model is at
    /// capacity", `server_is_overloaded`), after the client's
    /// retries: the loop switches to the fallback model when one is configured, else stops with
    /// `error` — unless the overload came after the stream delivered an event (announced
    /// mid-stream, which the client cannot retry): that turn is then asked again once, as a
    /// truncated stream is.
    #[error("overloaded: {message}")]
    Overloaded {
        /// What the provider said.
        message: String,
        /// What the model knew of the failed call.
        details: FailureDetails,
    },
    /// Anything else (authentication, a provider error event, a protocol error): the loop
    /// stops with `error`, and the stop event's `error_code` is `code` — unless the failure is
    /// [transient](Self::is_transient) (`rate_limited`, `server`, `timeout`, `connection`) and
    /// came after the stream delivered an event: that turn is then asked again once, as a
    /// truncated stream is. Build it with [`ModelError::other`] or [`ModelError::with_code`].
    #[error("{message}")]
    Other {
        /// A stable, machine-readable name of the failure: the client error's code
        /// (`ClientError::code`: `authentication`, `quota_exceeded`, ...) for the client, `internal` for a model that panicked, `model_error` when the
        /// model named none.
        code: &'static str,
        /// What happened, for people.
        message: String,
        /// What the model knew of the failed call.
        details: FailureDetails,
    },
}

impl ModelError {
    /// The code of a failure its model gave no name: `model_error`.
    pub const MODEL_ERROR: &'static str = "model_error";

    /// A failure without a name of its own ([`Other`](Self::Other), code `model_error`): what a
    /// host's [`Model`] returns when it has nothing more precise to say.
    pub fn other(message: impl Into<String>) -> Self {
        Self::with_code(Self::MODEL_ERROR, message)
    }

    /// A failure the loop stops on ([`Other`](Self::Other)) with a stable code of the host's
    /// choosing, which the stop event carries as its `error_code`: best one of the client's
    /// (`authentication`, `permission`, `rate_limited`, `quota_exceeded`, `invalid_request`,
    /// `server`, `connection`, `timeout`, `protocol`), so hosts read every model alike.
    pub fn with_code(code: &'static str, message: impl Into<String>) -> Self {
        Self::Other {
            code,
            message: message.into(),
            details: FailureDetails::default(),
        }
    }

    /// The prompt is over the context window ([`PromptTooLong`](Self::PromptTooLong)), as the
    /// provider said.
    pub fn prompt_too_long(message: impl Into<String>) -> Self {
        Self::PromptTooLong {
            message: message.into(),
            details: FailureDetails::default(),
        }
    }

    /// The stream stopped before the message completed ([`Truncated`](Self::Truncated)), with
    /// the message accumulated so far.
    pub fn truncated(reason: impl Into<String>, partial: Value) -> Self {
        Self::Truncated {
            reason: reason.into(),
            partial: Box::new(partial),
            details: FailureDetails::default(),
        }
    }

    /// The provider is overloaded ([`Overloaded`](Self::Overloaded)), as it said.
    pub fn overloaded(message: impl Into<String>) -> Self {
        Self::Overloaded {
            message: message.into(),
            details: FailureDetails::default(),
        }
    }

    /// The same failure with what its model knew of the call (a status, a request id, a
    /// requested wait), which the stop event of a run ending on it carries.
    #[must_use]
    pub fn with_details(mut self, details: FailureDetails) -> Self {
        *self.details_mut() = details;
        self
    }

    /// What the model knew of the failed call (all `None` when it said nothing).
    pub fn details(&self) -> &FailureDetails {
        match self {
            Self::PromptTooLong { details, .. }
            | Self::Truncated { details, .. }
            | Self::Overloaded { details, .. }
            | Self::Other { details, .. } => details,
        }
    }

    fn details_mut(&mut self) -> &mut FailureDetails {
        match self {
            Self::PromptTooLong { details, .. }
            | Self::Truncated { details, .. }
            | Self::Overloaded { details, .. }
            | Self::Other { details, .. } => details,
        }
    }

    /// The failure's stable, machine-readable name: `prompt_too_long`, `stream_truncated`,
    /// `overloaded`, or [`Other`](Self::Other)'s code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::PromptTooLong { .. } => "prompt_too_long",
            Self::Truncated { .. } => "stream_truncated",
            Self::Overloaded { .. } => "overloaded",
            Self::Other { code, .. } => code,
        }
    }

    /// Whether another call may not meet this failure: a stream cut short, an overload, or a
    /// failure the client names `rate_limited`, `server`, `timeout` or `connection` (the classes
    /// it retries itself while nothing was delivered; never a quota, an invalid request, a
    /// prompt too long or an authentication failure).
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Truncated { .. } | Self::Overloaded { .. } => true,
            Self::PromptTooLong { .. } => false,
            Self::Other { code, .. } => {
                matches!(*code, "rate_limited" | "server" | "timeout" | "connection")
            }
        }
    }
}

impl From<DecodeError> for ModelError {
    /// A provider's error event is classified once, by [`DecodeError::provider_kind`] (its
    /// type, its code and its message), as the bindings' decoders classify it; an error type
    /// nobody names is a server's failure, as the client has it.
    fn from(error: DecodeError) -> Self {
        let kind = error.provider_kind();
        match error {
            DecodeError::Truncated { reason, partial } => ModelError::Truncated {
                reason,
                partial,
                details: FailureDetails::default(),
            },
            DecodeError::Provider { message, .. }
                if kind == Some(ProviderErrorKind::PromptTooLong) =>
            {
                ModelError::prompt_too_long(message)
            }
            DecodeError::Provider { message, .. }
                if kind == Some(ProviderErrorKind::Overloaded) =>
            {
                ModelError::overloaded(message)
            }
            DecodeError::Provider { .. } => {
                let code = match kind {
                    Some(ProviderErrorKind::Other) | None => ProviderErrorKind::Server.code(),
                    Some(kind) => kind.code(),
                };
                ModelError::with_code(code, error.to_string())
            }
            other => ModelError::with_code("protocol", other.to_string()),
        }
    }
}

/// Whether a provider message says the prompt is over the context window.
pub fn is_prompt_too_long(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    lower.contains("prompt is too long") || lower.contains("context_length_exceeded")
}

/// The provider's message, prefixed with what happened unless it already says so (Anthropic's
/// reads "prompt is too long: 210000 tokens > 200000 maximum").
fn prompt_too_long_text(message: &str) -> String {
    if message
        .get(..18)
        .is_some_and(|start| start.eq_ignore_ascii_case("prompt is too long"))
    {
        message.to_owned()
    } else {
        format!("prompt is too long: {message}")
    }
}

/// A boxed stream of model events.
pub type ModelStream = Pin<Box<dyn Stream<Item = ModelEvent> + Send>>;

/// A model the loop can call: Anthropic Messages requests in (the loop builds them), events out.
///
/// A request may carry `betas`, an array of `anthropic-beta` flags for that request (the SDKs'
/// parameter of the same name): the loop adds one when it asks the API to drop stale thinking
/// blocks. A model that sends the body over HTTP moves it to the header, as the client
/// (feature `client`) does; the API refuses a body holding it.
pub trait Model: Send + Sync + 'static {
    /// Starts one streaming call. Dropping the stream cancels it.
    fn stream(&self, request: Value) -> ModelStream;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn transient_failures_are_the_ones_the_client_would_retry() {
        let transient = [
            ModelError::truncated("cut", Value::Null),
            ModelError::overloaded("busy"),
            ModelError::with_code("rate_limited", "slow down"),
            ModelError::with_code("server", "api_error"),
            ModelError::with_code("timeout", "idle"),
            ModelError::with_code("connection", "reset"),
        ];
        for error in &transient {
            assert!(error.is_transient(), "{error:?}");
        }
        let lasting = [
            ModelError::prompt_too_long("prompt is too long"),
            ModelError::with_code("quota_exceeded", "no credit"),
            ModelError::with_code("invalid_request", "bad"),
            ModelError::with_code("authentication", "key"),
            ModelError::with_code("protocol", "broken"),
            ModelError::other("host failure"),
        ];
        for error in &lasting {
            assert!(!error.is_transient(), "{error:?}");
        }
    }

    #[test]
    fn a_prompt_too_long_error_says_so_once() {
        let anthropic =
            ModelError::prompt_too_long("prompt is too long: 210000 tokens > 200000 maximum");
        assert_eq!(
            anthropic.to_string(),
            "prompt is too long: 210000 tokens > 200000 maximum"
        );
        let openai =
            ModelError::prompt_too_long("This model's maximum context length is 128000 tokens.");
        assert_eq!(
            openai.to_string(),
            "prompt is too long: This model's maximum context length is 128000 tokens."
        );
        let short = ModelError::prompt_too_long("é");
        assert_eq!(short.to_string(), "prompt is too long: é");
    }

    /// A provider's error event stops the loop with the client's code for its type, so a run
    /// over a scripted or translated stream reports what one over the client would.
    #[test]
    fn provider_error_events_get_the_client_s_codes() {
        let cases = [
            (
                json!({"type": "error", "error": {"type": "authentication_error", "message": "bad key"}}),
                "authentication",
            ),
            (
                json!({"code": "insufficient_quota", "message": "You exceeded your current quota."}),
                "quota_exceeded",
            ),
            (
                json!({"code": "rate_limit_exceeded", "message": "Rate limit reached"}),
                "rate_limited",
            ),
            (
                json!({"type": "error", "error": {"type": "api_error", "message": "Internal"}}),
                "server",
            ),
            (
                json!({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}),
                "overloaded",
            ),
            // Classified as the decoders in the bindings classify them (one rule,
            // `DecodeError::provider_kind`): OpenAI's in-stream rate limit names its class in
            // `code`, its `type` is "tokens" (it was a server failure here).
            (
                json!({"error": {"type": "tokens", "code": "rate_limit_exceeded", "message": "Rate limit reached for gpt-4o"}}),
                "rate_limited",
            ),
            (
                json!({"type": "error", "error": {"type": "request_too_large", "message": "Request exceeds the maximum size"}}),
                "invalid_request",
            ),
            (
                json!({"type": "error", "error": {"type": "permission_error", "message": "no"}}),
                "permission",
            ),
            (
                json!({"type": "error", "error": {"type": "not_found_error", "message": "no model"}}),
                "not_found",
            ),
            (
                json!({"type": "error", "error": {"type": "brand_new_error", "message": "?"}}),
                "server",
            ),
            (
                json!({"error": {"type": "invalid_request_error", "message": "This model's maximum context length is 8192 tokens."}}),
                "prompt_too_long",
            ),
        ];
        for (raw, code) in cases {
            let error = ModelError::from(DecodeError::provider(raw.clone()));
            assert_eq!(error.code(), code, "{raw}");
        }
        assert_eq!(ModelError::other("down").code(), "model_error");
        assert_eq!(ModelError::other("down").to_string(), "down");
        let truncated = ModelError::truncated("cut", Value::Null);
        assert_eq!(truncated.code(), "stream_truncated");
    }

    /// The Responses API's `response.failed` and `error` events name the class in `code`, with
    /// a message that does not: "Your input exceeds the context window of this model" is
    /// `context_length_exceeded`, "Selected model is at capacity. Please try a different
    /// model." `server_is_overloaded`.
    #[test]
    fn responses_error_codes_give_their_class() {
        let too_long = DecodeError::provider(serde_json::json!({
            "code": "context_length_exceeded",
            "message": "Your input exceeds the context window of this model. Please adjust your input and try again.",
        }));
        assert!(
            matches!(ModelError::from(too_long), ModelError::PromptTooLong { .. }),
            "context_length_exceeded"
        );
        let event = DecodeError::provider(serde_json::json!({
            "type": "error", "code": "context_length_exceeded",
            "message": "Your input exceeds the context window of this model.", "param": null,
        }));
        assert!(matches!(
            ModelError::from(event),
            ModelError::PromptTooLong { .. }
        ));
        let capacity = DecodeError::provider(serde_json::json!({
            "code": "server_is_overloaded",
            "message": "Selected model is at capacity. Please try a different model.",
        }));
        assert!(
            matches!(ModelError::from(capacity), ModelError::Overloaded { .. }),
            "server_is_overloaded"
        );
    }
}
