//! The client as the agent loop's [`Model`]: Anthropic Messages requests in, decoded events,
//! retries and one final item out. Against an OpenAI Chat Completions or Responses endpoint the
//! request and the response are translated ([`crate::agent::openai`],
//! [`crate::agent::responses`]).

use futures_util::StreamExt;
use serde_json::Value;

use super::{Client, ClientError, MessageItem, MessageStream, Provider};
use crate::agent::openai::{self, ChatOptions, MaxTokensField};
use crate::agent::responses;
use crate::agent::{FailureDetails, Model, ModelError, ModelEvent, ModelStream};

impl Model for Client {
    fn stream(&self, mut request: Value) -> ModelStream {
        if let Some(fields) = request.as_object_mut() {
            fields.insert("stream".to_owned(), Value::Bool(true));
        }
        match self.config().provider {
            Provider::Anthropic => {
                // `betas` (the SDKs' name) travels as the `anthropic-beta` header, not in the
                // body, which the API would refuse with it.
                let betas = match super::take_betas(&mut request) {
                    Ok(betas) => betas,
                    Err(error) => {
                        let error = ClientError::Config(error.to_string());
                        let failed = ModelEvent::Failed(model_error(error));
                        return Box::pin(futures_util::stream::iter([failed]));
                    }
                };
                let stream = self.stream_with_betas(request.to_string(), &betas).decode();
                Box::pin(futures_util::stream::unfold(Some(stream), next_event))
            }
            Provider::OpenAiChat => {
                let options = ChatOptions {
                    max_tokens_field: max_tokens_field(&self.config().base_url),
                };
                let body = openai::chat_request(&request, options);
                let stream = self.stream_message(body.to_string());
                openai::translate_chat_stream(Box::pin(futures_util::stream::unfold(
                    Some(stream),
                    next_event,
                )))
            }
            Provider::OpenAiResponses => {
                let body = responses::responses_request(&request);
                let stream = self.stream_message(body.to_string());
                responses::translate_responses_stream(Box::pin(futures_util::stream::unfold(
                    Some(stream),
                    next_event,
                )))
            }
        }
    }
}

/// OpenAI itself wants `max_completion_tokens` (its reasoning models refuse `max_tokens`);
/// OpenAI-compatible servers (vLLM, Ollama, LM Studio, gateways) widely know only `max_tokens`.
fn max_tokens_field(base_url: &str) -> MaxTokensField {
    let host = base_url
        .split_once("://")
        .map_or(base_url, |(_, rest)| rest)
        .split(['/', ':'])
        .next()
        .unwrap_or("");
    if host.eq_ignore_ascii_case("api.openai.com") {
        MaxTokensField::MaxCompletionTokens
    } else {
        MaxTokensField::MaxTokens
    }
}

async fn next_event(stream: Option<MessageStream>) -> Option<(ModelEvent, Option<MessageStream>)> {
    let mut stream = stream?;
    loop {
        let event = match stream.next().await? {
            Ok(MessageItem::Event(event)) => ModelEvent::Decoded(event),
            Ok(MessageItem::Retry(retry)) => ModelEvent::Retry {
                attempt: retry.attempt + 1,
                status: retry.status,
                code: Some(retry.code),
                overloaded: retry.overloaded(),
                wait: retry.wait,
            },
            Ok(MessageItem::Stalled { .. }) => continue,
            Ok(MessageItem::Message(message)) => {
                let metrics = stream.metrics();
                let event = ModelEvent::Completed {
                    message,
                    time_to_first_token: metrics.time_to_first_token,
                    request_id: metrics.request_id.clone(),
                };
                return Some((event, None));
            }
            Err(error) => return Some((ModelEvent::Failed(model_error(error)), None)),
        };
        return Some((event, Some(stream)));
    }
}

/// The loop's classes: prompt too long (compact and retry), truncated (retry the turn once),
/// overloaded (switch to the fallback model), anything else (stop, with the error's
/// [`ClientError::code`] as the stop event's `error_code`). Each keeps what the client knew
/// of the call ([`failure_details`]), which the stop event carries.
pub(crate) fn model_error(error: ClientError) -> ModelError {
    let details = failure_details(&error);
    let error = match error {
        ClientError::PromptTooLong { details, .. } => ModelError::prompt_too_long(details.message),
        ClientError::Overloaded { details, .. } => ModelError::overloaded(details.to_string()),
        ClientError::Truncated { partial, cause, .. } => match *cause {
            ClientError::PromptTooLong { details, .. } => {
                ModelError::prompt_too_long(details.message)
            }
            // An overload announced mid-stream: the partial turn is discarded either way.
            ClientError::Overloaded { details, .. } => ModelError::overloaded(details.to_string()),
            // No credit left: retrying the turn gets the same answer; the run stops.
            cause @ ClientError::QuotaExceeded(_) => {
                ModelError::with_code(cause.code(), cause.to_string())
            }
            cause => ModelError::Truncated {
                reason: cause.to_string(),
                partial: partial.message.unwrap_or_else(|| Box::new(Value::Null)),
                details: FailureDetails::default(),
            },
        },
        other => ModelError::with_code(stop_code(&other), other.to_string()),
    };
    error.with_details(details)
}

/// What the client knew of a failed call: its status, request id and the wait the server
/// asked for (through a truncated stream, the request id of the call and the status and wait
/// of what broke it).
fn failure_details(error: &ClientError) -> FailureDetails {
    FailureDetails {
        status: error.status(),
        request_id: error.request_id().map(str::to_owned),
        retry_after: error.retry_after(),
    }
}

/// The stop event's code for a client error: the code the bindings' errors carry for it (an
/// oversized event is a `protocol` failure there, a client configuration the run's
/// `invalid_configuration`), so a host reads one vocabulary.
fn stop_code(error: &ClientError) -> &'static str {
    match error {
        ClientError::EventTooLarge { .. } => "protocol",
        ClientError::Config(_) => "invalid_configuration",
        other => other.code(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use crate::client::{ErrorDetails, PartialResponse};

    fn quota() -> ClientError {
        ClientError::QuotaExceeded(ErrorDetails {
            status: Some(429),
            error_type: Some("insufficient_quota".into()),
            message: "You exceeded your current quota".into(),
            request_id: None,
        })
    }

    /// No credit left stops the run: not a truncated turn the loop would retry, nor an
    /// overload that would switch models.
    #[test]
    fn a_quota_error_stops_the_loop_even_mid_stream() {
        assert!(
            matches!(model_error(quota()), ModelError::Other { code: "quota_exceeded", message, .. } if message.contains("quota exceeded"))
        );
        let mid_stream = ClientError::Truncated {
            partial: PartialResponse::default(),
            cause: Box::new(quota()),
            request_id: None,
        };
        assert!(
            matches!(model_error(mid_stream), ModelError::Other { code: "quota_exceeded", message, .. } if message.contains("quota exceeded"))
        );
    }

    /// The stop event speaks the bindings' vocabulary: Node's errors call an oversized event
    /// a `protocol` failure, and a client configuration error is the run's configuration.
    #[test]
    fn stop_codes_are_the_bindings_codes() {
        let oversized = ClientError::EventTooLarge {
            limit: 1024,
            request_id: None,
        };
        assert_eq!(model_error(oversized).code(), "protocol");
        let config = ClientError::Config("bad base URL".into());
        assert_eq!(model_error(config).code(), "invalid_configuration");
        assert_eq!(model_error(quota()).code(), "quota_exceeded");
    }

    /// Every class keeps what the client knew of the call for the stop event: a rate limit its
    /// status, request id and requested wait; a stream cut mid-way the call's request id and
    /// the status of what cut it (a 529 announced in the stream), which is an overload here; a
    /// lost connection no status.
    #[test]
    fn the_client_s_status_request_id_and_wait_are_kept() {
        let limited = ClientError::RateLimited {
            details: ErrorDetails {
                status: Some(429),
                request_id: Some("req_429".into()),
                ..ErrorDetails::default()
            },
            retry_after: Some(Duration::from_secs(7)),
        };
        let error = model_error(limited);
        assert_eq!(error.code(), "rate_limited");
        assert_eq!(
            error.details(),
            &FailureDetails {
                status: Some(429),
                request_id: Some("req_429".into()),
                retry_after: Some(Duration::from_secs(7)),
            }
        );
        let cut = ClientError::Truncated {
            partial: PartialResponse::default(),
            cause: Box::new(ClientError::Overloaded {
                details: ErrorDetails {
                    status: Some(529),
                    ..ErrorDetails::default()
                },
                retry_after: None,
            }),
            request_id: Some("req_cut".into()),
        };
        let error = model_error(cut);
        assert_eq!(error.code(), "overloaded");
        assert_eq!(error.details().status, Some(529));
        assert_eq!(error.details().request_id.as_deref(), Some("req_cut"));
        let lost = ClientError::Connection {
            message: "reset".into(),
            request_id: None,
        };
        assert_eq!(model_error(lost).details(), &FailureDetails::default());
    }
}
