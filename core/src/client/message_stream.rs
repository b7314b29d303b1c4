//! A streaming response decoded: the SSE events of a [`ResponseStream`] go through the
//! provider's decoder ([`crate::decode`]); typed events come out, then the final message. A
//! failure carries the partial message.

use std::collections::VecDeque;
use std::ops::ControlFlow;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;
use serde_json::Value;

use super::error::{ClientError, PartialResponse};
use super::metrics::RequestMetrics;
use super::retry::RetryEvent;
use super::stream::{ResponseStream, Signal};
use crate::decode::{AnyDecoder, DecodeError, DecodeEvent, EventDecoder};

/// One item of a [`MessageStream`].
#[derive(Debug, Clone, PartialEq)]
pub enum MessageItem {
    /// A typed event, in order (text deltas, sealed tool calls, ...).
    Event(DecodeEvent),
    /// An attempt failed and will be retried after `wait` (nothing had been delivered).
    Retry(RetryEvent),
    /// No event for `elapsed` (the stall notice).
    Stalled {
        /// Time since the last event.
        elapsed: Duration,
    },
    /// The final message, in the provider's non-streaming response shape. Always the last item
    /// of a successful stream.
    Message(Value),
}

/// A [`ResponseStream`] decoded by the provider's decoder.
pub struct MessageStream {
    inner: ResponseStream,
    decoder: AnyDecoder,
    /// Typed events decoded and not yet yielded, in order.
    pending: VecDeque<DecodeEvent>,
    delivered: u64,
    pending_error: Option<ClientError>,
    done: bool,
}

impl std::fmt::Debug for MessageStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MessageStream")
            .field("inner", &self.inner)
            .field("delivered", &self.delivered)
            .finish_non_exhaustive()
    }
}

impl MessageStream {
    /// Decodes `inner` with `decoder`.
    pub fn new(inner: ResponseStream, decoder: AnyDecoder) -> Self {
        Self {
            inner,
            decoder,
            pending: VecDeque::new(),
            delivered: 0,
            pending_error: None,
            done: false,
        }
    }

    /// Measurements so far (final once the stream has ended).
    pub fn metrics(&self) -> &RequestMetrics {
        self.inner.metrics()
    }

    /// A snapshot of the message accumulated so far (`null` before the first event).
    pub fn message(&self) -> Value {
        self.decoder.message()
    }

    /// The decoder, for partial tool-input views and other provider specifics.
    pub fn decoder_mut(&mut self) -> &mut AnyDecoder {
        &mut self.decoder
    }

    /// Ends the stream with `error`, attaching the partial message.
    fn fail(&mut self, error: ClientError) -> ClientError {
        self.done = true;
        self.inner.abort();
        let message = self.decoder.message();
        let message = (!message.is_null()).then(|| Box::new(message));
        match error {
            ClientError::Truncated {
                mut partial,
                cause,
                request_id,
            } => {
                partial.message = message;
                ClientError::Truncated {
                    partial,
                    cause,
                    request_id,
                }
            }
            error if self.inner.metrics().events > 0 => {
                let metrics = self.inner.metrics();
                ClientError::Truncated {
                    partial: PartialResponse {
                        events: metrics.events,
                        bytes: metrics.bytes_received,
                        last_event_type: None,
                        message,
                    },
                    request_id: metrics.request_id.clone(),
                    cause: Box::new(error),
                }
            }
            error => error,
        }
    }

    /// Appends the decoder's typed events to `pending`, in the queue's own buffer (no second
    /// copy of each event through a scratch vector). `pending` is empty here in practice: the
    /// inner stream is polled only once every pending event was yielded.
    fn take_decoded(&mut self) {
        let mut events = Vec::from(std::mem::take(&mut self.pending));
        self.decoder.drain_events(&mut events);
        self.pending = VecDeque::from(events);
    }

    fn decode_error(&self, error: DecodeError) -> ClientError {
        let request_id = self.inner.metrics().request_id.clone();
        match error {
            DecodeError::Provider { raw, .. } => {
                ClientError::from_stream_error(&raw.to_string(), request_id)
            }
            DecodeError::Truncated { reason, .. } => ClientError::Protocol {
                message: reason,
                request_id,
            },
            other => ClientError::Protocol {
                message: other.to_string(),
                request_id,
            },
        }
    }
}

impl Stream for MessageStream {
    type Item = Result<MessageItem, ClientError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(event) = this.pending.pop_front() {
                this.delivered += 1;
                return Poll::Ready(Some(Ok(MessageItem::Event(event))));
            }
            if let Some(error) = this.pending_error.take() {
                return Poll::Ready(Some(Err(error)));
            }
            if this.done {
                return Poll::Ready(None);
            }
            // Every event of the body data at hand goes through the decoder in one batch; the
            // typed events are then yielded one by one without touching the connection.
            let decoder = &mut this.decoder;
            let mut decode_failure = None;
            let polled = this.inner.poll_events(cx, &mut |event| match decoder
                .push_event(event.event_type(), event.data())
            {
                Ok(()) => ControlFlow::Continue(()),
                Err(error) => {
                    decode_failure = Some(error);
                    ControlFlow::Break(())
                }
            });
            match polled {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(Signal::Delivered))) => {
                    // Events decoded before a failure are still delivered, then the error.
                    this.take_decoded();
                    if let Some(error) = decode_failure {
                        let error = this.decode_error(error);
                        this.pending_error = Some(this.fail(error));
                    }
                }
                Poll::Ready(Some(Ok(Signal::Retry(retry)))) => {
                    return Poll::Ready(Some(Ok(MessageItem::Retry(retry))));
                }
                Poll::Ready(Some(Ok(Signal::Stalled(elapsed)))) => {
                    return Poll::Ready(Some(Ok(MessageItem::Stalled { elapsed })));
                }
                Poll::Ready(Some(Err(error))) => {
                    this.take_decoded();
                    this.pending_error = Some(this.fail(error));
                }
                Poll::Ready(None) => {
                    this.done = true;
                    match this.decoder.finish() {
                        Ok(message) => return Poll::Ready(Some(Ok(MessageItem::Message(message)))),
                        Err(error) => {
                            let error = this.decode_error(error);
                            this.pending_error = Some(this.fail(error));
                        }
                    }
                }
            }
        }
    }
}
