//! The HTTP client as the loop's [`Model`] (feature `client`).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_core::Stream;
use serde_json::Value;

use super::model::{Model, ModelError, ModelEvent, ModelStream};
use crate::client::{Client, ClientError, MessageItem, MessageStream};

/// A [`Model`] that sends each request through a [`Client`] (retries, watchdogs, TLS) and
/// decodes the response stream.
#[derive(Debug, Clone)]
pub struct ClientModel {
    client: Arc<Client>,
}

impl ClientModel {
    /// Wraps a client.
    pub fn new(client: Client) -> Self {
        Self {
            client: Arc::new(client),
        }
    }
}

impl Model for ClientModel {
    fn stream(&self, request: Value) -> ModelStream {
        let body = match serde_json::to_vec(&request) {
            Ok(body) => Bytes::from(body),
            Err(error) => {
                return Box::pin(futures_util::stream::iter([ModelEvent::Failed(
                    ModelError::Other(format!("cannot serialise the request: {error}")),
                )]));
            }
        };
        Box::pin(ClientEvents {
            inner: self.client.stream_message(body),
            done: false,
        })
    }
}

/// Maps client items to model events.
struct ClientEvents {
    inner: MessageStream,
    done: bool,
}

impl Stream for ClientEvents {
    type Item = ModelEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ModelEvent>> {
        loop {
            if self.done {
                return Poll::Ready(None);
            }
            let item = match Pin::new(&mut self.inner).poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(item) => item,
            };
            return Poll::Ready(Some(match item {
                Some(Ok(MessageItem::Event(event))) => ModelEvent::Decoded(event),
                Some(Ok(MessageItem::Retry(retry))) => ModelEvent::Retry {
                    attempt: retry.attempt + 1,
                    status: retry.status,
                    wait: retry.wait,
                },
                Some(Ok(MessageItem::Stalled { elapsed })) => {
                    tracing::warn!(?elapsed, "model stream stalled");
                    continue;
                }
                Some(Ok(MessageItem::Message(message))) => {
                    self.done = true;
                    let metrics = self.inner.metrics();
                    ModelEvent::Completed {
                        message,
                        time_to_first_token: metrics.time_to_first_token,
                        request_id: metrics.request_id.clone(),
                    }
                }
                Some(Err(error)) => {
                    self.done = true;
                    ModelEvent::Failed(model_error(error))
                }
                None => {
                    self.done = true;
                    ModelEvent::Failed(ModelError::Other("the response stream ended early".into()))
                }
            }));
        }
    }
}

/// The loop's view of a client error.
fn model_error(error: ClientError) -> ModelError {
    match error {
        ClientError::PromptTooLong { details, .. } => ModelError::PromptTooLong {
            message: details.to_string(),
        },
        ClientError::Truncated { partial, cause, .. } => ModelError::Truncated {
            reason: cause.to_string(),
            partial: partial.message.unwrap_or_else(|| Box::new(Value::Null)),
        },
        other => ModelError::Other(other.to_string()),
    }
}
