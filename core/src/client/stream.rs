//! A streaming response: the body's `Bytes` frames go straight into the SSE parser; events come
//! out with retries and stall notices interleaved, under the watchdogs. Dropping the stream
//! drops the body, which aborts the connection.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;
use http::Response;
use http_body::Body;
use hyper::body::Incoming;
use tokio::time::Instant;

use super::config::Provider;
use super::error::{ClientError, PartialResponse};
use super::metrics::{RequestMetrics, version_label};
use super::retry::RetryEvent;
use super::send::{Sender, body_error, response_request_id};
use super::watchdog::{Alarm, TimeoutKind, Watchdog};
use crate::sse::{SseConfig, SseEvent, SseItem, SseParser};

/// One item of a [`ResponseStream`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamItem {
    /// An event of the response, in order.
    Event(SseEvent),
    /// An attempt failed and will be retried after `wait` (no event had been delivered).
    Retry(RetryEvent),
    /// No event for `elapsed` (the stall notice; the idle timeout may follow).
    Stalled {
        /// Time since the last event (or the headers).
        elapsed: Duration,
    },
}

type Connecting = Pin<Box<dyn Future<Output = Result<Response<Incoming>, ClientError>> + Send>>;

enum Phase {
    Connecting(Connecting),
    Streaming { body: Incoming, watchdog: Watchdog },
    Finished,
}

/// A streaming request in flight. Yields [`StreamItem`]s; ends after the provider's terminal
/// event and the end of the body, or with one error.
///
/// A failure before any event was delivered is retried like a failed response; a failure
/// after that ends the stream with [`ClientError::Truncated`].
pub struct ResponseStream {
    sender: Sender,
    provider: Provider,
    phase: Phase,
    parser: SseParser,
    metrics: RequestMetrics,
    reported_retries: usize,
    complete: bool,
    last_event_type: Option<crate::Utf8Bytes>,
    /// When the last body frame arrived: every event parsed from it arrived then.
    frame_at: Instant,
}

impl std::fmt::Debug for ResponseStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseStream")
            .field("provider", &self.provider)
            .field("complete", &self.complete)
            .field("metrics", &self.metrics)
            .finish_non_exhaustive()
    }
}

impl ResponseStream {
    pub(crate) fn new(sender: Sender, provider: Provider) -> Self {
        let connecting: Connecting = Box::pin(sender.clone().send());
        Self::with_connecting(sender, provider, connecting)
    }

    /// A stream whose only item is `error`.
    pub(crate) fn failed(sender: Sender, provider: Provider, error: ClientError) -> Self {
        let connecting: Connecting = Box::pin(std::future::ready(Err(error)));
        Self::with_connecting(sender, provider, connecting)
    }

    fn with_connecting(sender: Sender, provider: Provider, connecting: Connecting) -> Self {
        let start = sender.start;
        let parser = new_parser(&sender);
        Self {
            sender,
            provider,
            phase: Phase::Connecting(connecting),
            parser,
            metrics: RequestMetrics::default(),
            reported_retries: 0,
            complete: false,
            last_event_type: None,
            frame_at: start,
        }
    }

    /// Measurements so far (final once the stream has ended).
    pub fn metrics(&self) -> &RequestMetrics {
        &self.metrics
    }

    /// True once the provider's terminal event arrived (`message_stop`, `[DONE]`,
    /// `response.completed`).
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// Stops at once: drops the response body (aborting the connection) and ends the stream.
    pub fn abort(&mut self) {
        if !matches!(self.phase, Phase::Finished) {
            self.finish_metrics();
            self.phase = Phase::Finished;
        }
    }

    /// Decodes this stream with the provider's decoder.
    pub fn decode(self) -> super::MessageStream {
        let decoder = self.provider.decoder();
        super::MessageStream::new(self, decoder)
    }

    fn next_unreported_retry(&mut self) -> Option<RetryEvent> {
        let progress = self.sender.progress.lock().ok()?;
        let event = progress.retries.get(self.reported_retries)?.clone();
        self.reported_retries += 1;
        Some(event)
    }

    fn sync_progress(&mut self) {
        if let Ok(progress) = self.sender.progress.lock() {
            self.metrics.attempts = progress.attempts;
            self.metrics.retries.clone_from(&progress.retries);
        }
    }

    fn on_headers(&mut self, response: Response<Incoming>) {
        let now = Instant::now();
        self.metrics.request_id = response_request_id(&response);
        self.metrics.http_version = Some(version_label(response.version()));
        self.metrics.time_to_headers = Some(now - self.sender.start);
        self.sync_progress();
        let watchdog = Watchdog::new(&self.sender.config.timeouts, self.sender.start, now);
        self.frame_at = now;
        self.phase = Phase::Streaming {
            body: response.into_body(),
            watchdog,
        };
    }

    /// Ends the stream with `error`, or starts a new attempt when nothing was delivered yet
    /// and the failure may be retried. Returns the error to yield, if any.
    fn fail(&mut self, error: ClientError, retryable: bool) -> Option<ClientError> {
        if self.metrics.events == 0 && retryable {
            let attempt = self.sender.current_attempt();
            if let Some(wait) = self.sender.schedule_retry(attempt, &error, true, None) {
                let sender = self.sender.clone();
                self.parser = new_parser(&sender);
                self.phase = Phase::Connecting(Box::pin(async move {
                    tokio::time::sleep(wait).await;
                    sender.send().await
                }));
                return None;
            }
        }
        self.finish_metrics();
        self.phase = Phase::Finished;
        if self.metrics.events == 0 {
            return Some(error);
        }
        Some(ClientError::Truncated {
            partial: PartialResponse {
                events: self.metrics.events,
                bytes: self.metrics.bytes_received,
                last_event_type: self.last_event_type.as_ref().map(|t| t.to_string()),
                message: None,
            },
            cause: Box::new(error),
            request_id: self.metrics.request_id.clone(),
        })
    }

    fn finish_metrics(&mut self) {
        self.sync_progress();
        self.metrics.total = Some(self.sender.start.elapsed());
    }

    /// Bookkeeping for a delivered event; an error when the event is the provider's error.
    fn on_event(&mut self, event: &SseEvent) -> Result<(), ClientError> {
        let at = self.frame_at;
        let since_start = at - self.sender.start;
        if self.metrics.events == 0 {
            self.metrics.time_to_first_event = Some(since_start);
        }
        if self.metrics.time_to_first_token.is_none() && is_content(self.provider, event) {
            self.metrics.time_to_first_token = Some(since_start);
        }
        let event_type: &str = &event.event_type;
        let data: &str = &event.data;
        match self.provider {
            Provider::Anthropic => match event_type {
                "message_stop" => self.complete = true,
                "error" => {
                    return Err(ClientError::from_stream_error(
                        data,
                        self.metrics.request_id.clone(),
                    ));
                }
                "message_start" => {
                    if let Some(usage) = parse(data)
                        .as_ref()
                        .and_then(|value| value.get("message"))
                        .and_then(|message| message.get("usage"))
                    {
                        self.metrics.merge_usage(usage);
                    }
                }
                "message_delta" => {
                    if let Some(usage) = parse(data).as_ref().and_then(|value| value.get("usage")) {
                        self.metrics.merge_usage(usage);
                    }
                }
                _ => {}
            },
            Provider::OpenAiChat => {
                if data == "[DONE]" {
                    self.complete = true;
                } else if data.starts_with("{\"error\"") || event_type == "error" {
                    return Err(ClientError::from_stream_error(
                        data,
                        self.metrics.request_id.clone(),
                    ));
                } else if memchr::memmem::find(data.as_bytes(), b"\"usage\":{").is_some()
                    && let Some(usage) = parse(data).as_ref().and_then(|value| value.get("usage"))
                {
                    self.metrics.merge_usage(usage);
                }
            }
            Provider::OpenAiResponses => match event_type {
                "response.completed" | "response.incomplete" => {
                    self.complete = true;
                    if let Some(usage) = parse(data)
                        .as_ref()
                        .and_then(|value| value.get("response"))
                        .and_then(|response| response.get("usage"))
                    {
                        self.metrics.merge_usage(usage);
                    }
                }
                "response.failed" | "error" => {
                    // `response.failed` nests the error in the response object.
                    let nested = parse(data)
                        .and_then(|value| value.get("response").cloned())
                        .map(|response| response.to_string());
                    let source = nested.as_deref().unwrap_or(data);
                    return Err(ClientError::from_stream_error(
                        source,
                        self.metrics.request_id.clone(),
                    ));
                }
                _ => {}
            },
        }
        self.metrics.events += 1;
        self.last_event_type = Some(event.event_type.clone());
        Ok(())
    }
}

/// A parser with the configured event size cap.
fn new_parser(sender: &Sender) -> SseParser {
    let config = SseConfig::default().max_event_bytes(sender.config.max_event_bytes);
    SseParser::with_config(config)
}

fn parse(data: &str) -> Option<serde_json::Value> {
    serde_json::from_str(data).ok()
}

fn is_content(provider: Provider, event: &SseEvent) -> bool {
    let event_type: &str = &event.event_type;
    match provider {
        Provider::Anthropic => event_type == "content_block_delta",
        Provider::OpenAiChat => true,
        Provider::OpenAiResponses => event_type.ends_with(".delta"),
    }
}

impl Stream for ResponseStream {
    type Item = Result<StreamItem, ClientError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(retry) = this.next_unreported_retry() {
                return Poll::Ready(Some(Ok(StreamItem::Retry(retry))));
            }
            match &mut this.phase {
                Phase::Finished => return Poll::Ready(None),
                Phase::Connecting(connecting) => match connecting.as_mut().poll(cx) {
                    Poll::Pending => {
                        // A retry recorded during this poll is reported before the wait ends.
                        if let Some(retry) = this.next_unreported_retry() {
                            return Poll::Ready(Some(Ok(StreamItem::Retry(retry))));
                        }
                        return Poll::Pending;
                    }
                    Poll::Ready(Ok(response)) => this.on_headers(response),
                    Poll::Ready(Err(error)) => {
                        this.finish_metrics();
                        this.phase = Phase::Finished;
                        return Poll::Ready(Some(Err(error)));
                    }
                },
                Phase::Streaming { body, watchdog } => {
                    let item = this.parser.next_item().map(|item| match item {
                        SseItem::Event(event) => Some(event.to_owned()),
                        SseItem::Retry(_) => None,
                    });
                    // The parser drops an oversized event and reads on; the client stops
                    // instead (before any later event), because the message is now broken.
                    if this.parser.dropped_events() > 0 {
                        let error = ClientError::EventTooLarge {
                            limit: this.parser.config().max_event_bytes.unwrap_or(usize::MAX),
                            request_id: this.metrics.request_id.clone(),
                        };
                        if let Some(error) = this.fail(error, false) {
                            return Poll::Ready(Some(Err(error)));
                        }
                        continue;
                    }
                    if let Some(item) = item {
                        let Some(event) = item else {
                            continue;
                        };
                        watchdog.on_event(this.frame_at);
                        if let Err(error) = this.on_event(&event) {
                            if let Some(error) = this.fail(error, false) {
                                return Poll::Ready(Some(Err(error)));
                            }
                            continue;
                        }
                        return Poll::Ready(Some(Ok(StreamItem::Event(event))));
                    }
                    match Pin::new(body).poll_frame(cx) {
                        Poll::Ready(Some(Ok(frame))) => {
                            if let Ok(data) = frame.into_data() {
                                this.frame_at = Instant::now();
                                this.metrics.bytes_received += data.len() as u64;
                                this.parser.feed(data);
                            }
                        }
                        Poll::Ready(Some(Err(error))) => {
                            if this.complete {
                                // The answer is whole; a broken connection afterwards is moot.
                                this.finish_metrics();
                                this.phase = Phase::Finished;
                                continue;
                            }
                            let error = body_error(&error, this.metrics.request_id.clone());
                            if let Some(error) = this.fail(error, true) {
                                return Poll::Ready(Some(Err(error)));
                            }
                        }
                        Poll::Ready(None) => {
                            this.parser.finish();
                            if this.parser.next_item().is_some() {
                                // `finish` never dispatches, but stay correct if it ever does.
                                tracing::debug!("event completed at end of input ignored");
                            }
                            if this.complete {
                                this.finish_metrics();
                                this.phase = Phase::Finished;
                                continue;
                            }
                            let error = ClientError::Protocol {
                                message: "the stream ended before the provider's final event"
                                    .to_owned(),
                                request_id: this.metrics.request_id.clone(),
                            };
                            if let Some(error) = this.fail(error, true) {
                                return Poll::Ready(Some(Err(error)));
                            }
                        }
                        Poll::Pending => match watchdog.poll_alarm(cx) {
                            Poll::Pending => return Poll::Pending,
                            Poll::Ready(Alarm::Stall(elapsed)) => {
                                return Poll::Ready(Some(Ok(StreamItem::Stalled { elapsed })));
                            }
                            Poll::Ready(Alarm::Timeout(which, elapsed)) => {
                                let retryable = which != TimeoutKind::Total;
                                let error = ClientError::Timeout {
                                    which,
                                    elapsed,
                                    request_id: this.metrics.request_id.clone(),
                                };
                                if let Some(error) = this.fail(error, retryable) {
                                    return Poll::Ready(Some(Err(error)));
                                }
                            }
                        },
                    }
                }
            }
        }
    }
}
