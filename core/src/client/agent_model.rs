//! The client as the agent loop's [`Model`]: Anthropic Messages requests in, decoded events,
//! retries and one final item out.

use futures_util::StreamExt;
use serde_json::Value;

use super::{Client, ClientError, MessageItem, MessageStream, Provider};
use crate::agent::{Model, ModelError, ModelEvent, ModelStream};

impl Model for Client {
    fn stream(&self, mut request: Value) -> ModelStream {
        if self.config().provider != Provider::Anthropic {
            let error = ModelError::Other(format!(
                "the agent loop sends Anthropic Messages requests; this client speaks {}",
                self.config().provider.name()
            ));
            return Box::pin(futures_util::stream::iter([ModelEvent::Failed(error)]));
        }
        if let Some(fields) = request.as_object_mut() {
            fields.insert("stream".to_owned(), Value::Bool(true));
        }
        let body = request.to_string();
        let stream = self.stream_message(body);
        Box::pin(futures_util::stream::unfold(Some(stream), next_event))
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
/// anything else (stop).
pub(crate) fn model_error(error: ClientError) -> ModelError {
    match error {
        ClientError::PromptTooLong { details, .. } => ModelError::PromptTooLong {
            message: details.message,
        },
        ClientError::Truncated { partial, cause, .. } => {
            if let ClientError::PromptTooLong { details, .. } = *cause {
                return ModelError::PromptTooLong {
                    message: details.message,
                };
            }
            ModelError::Truncated {
                reason: cause.to_string(),
                partial: partial.message.unwrap_or_else(|| Box::new(Value::Null)),
            }
        }
        other => ModelError::Other(other.to_string()),
    }
}
