//! A streaming response: the body's `Bytes` frames go straight into the SSE parser; events come
//! out with retries and stall notices interleaved, under the watchdogs. Dropping the stream
//! drops the body, which aborts the connection.

use std::borrow::Cow;
use std::future::Future;
use std::ops::ControlFlow;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;
use http::Response;
use http_body::Body;
use hyper::body::Incoming;
use tokio::time::Instant;

use super::config::Provider;
use super::error::{self, ClientError, PartialResponse};
use super::metrics::{RequestMetrics, version_label};
use super::retry::RetryEvent;
use super::send::{Sender, body_error, response_request_id};
use super::watchdog::{Alarm, TimeoutKind, Watchdog};
use crate::decode::named_type;
use crate::decode::openai_chat::{is_done_marker, sets_finish_reason};
use crate::sse::{SseConfig, SseEvent, SseEventRef, SseItem, SseParser};

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
/// A failure before any event was delivered is retried like a failed response: a broken or
/// timed-out body, and a provider error of a transient class
/// ([`ClientError::is_transient_provider_error`]) arriving as the first event or as a JSON body
/// in place of the event stream (nothing was generated, so nothing was billed). A failure
/// after an event was delivered ends the stream with [`ClientError::Truncated`].
pub struct ResponseStream {
    sender: Sender,
    phase: Phase,
    parser: SseParser,
    ledger: Ledger,
    reported_retries: usize,
    /// Whether a retry may be recorded and not yet reported: false while streaming a response
    /// whose retries were all reported, so an event costs no lock.
    check_retries: bool,
}

/// What a stream knows about the events it delivered (apart from the parser, so it can be
/// updated while an event still borrows the parser).
struct Ledger {
    provider: Provider,
    start: Instant,
    metrics: RequestMetrics,
    complete: bool,
    /// OpenAI Chat: a chunk gave a choice its `finish_reason`. A body that ends cleanly after
    /// that, without `data: [DONE]`, still carried a whole answer (some servers leave the
    /// marker out; the decoder checks that every choice finished).
    finish_reason_seen: bool,
    /// The parser's count of comment lines and of blank lines that dispatched nothing when last
    /// looked at (a new one is a keep-alive).
    keepalives: u64,
    /// How many of the body bytes the sender read (error bodies of failed attempts, counted in
    /// its `Progress`) are in `metrics.bytes_received` already; the stream's own frames are
    /// added there as they come.
    synced_body_bytes: u64,
    /// The type of the last event delivered (reused buffer; empty before the first).
    last_event_type: String,
    /// When the last body frame arrived: every event parsed from it arrived then.
    frame_at: Instant,
    /// The first byte of the current response's body that is not whitespace, once seen. An
    /// event stream's lines start with a field name or `:`; a body that starts with `{`, `[`
    /// or `<` is a JSON document or an HTML page served without a content type.
    body_start: Option<u8>,
    /// The beginning of a body that may not be an event stream, kept to say what it was when
    /// it ends without an event (see [`keep_stray_body`](Self::keep_stray_body)): up to
    /// [`STRAY_BODY_LIMIT`] bytes of such a JSON document or page, to classify an error it
    /// carries; up to [`PLAIN_START_LIMIT`] of an unlabelled body without a field line, to
    /// quote it. Empty for an event stream.
    stray_body: Vec<u8>,
    /// Bytes other than blank space came past what `stray_body` kept: its excerpt is cut.
    stray_body_cut: bool,
    /// For a response not labelled `text/event-stream`, its status and content type
    /// (`200, text/plain`, `200, no content type`); `None` for one so labelled. Servers stream
    /// real events under such labels, so the body is parsed all the same; this only names it
    /// when it turns out to hold no event at all.
    unlabelled: Option<String>,
}

/// How much of a success body that is not an event stream is kept to read an error from.
const STRAY_BODY_LIMIT: usize = 64 << 10;

/// How much of the start of an unlabelled body without a field line is kept: enough bytes for
/// the [`error::EXCERPT_CHARS`] characters an error quotes (a character is at most 4 bytes).
const PLAIN_START_LIMIT: usize = 4 * error::EXCERPT_CHARS;

/// Why [`ResponseStream::poll_events`] returned.
pub(crate) enum Signal {
    /// Events went to the callback (at least one).
    Delivered,
    /// A retry to report.
    Retry(RetryEvent),
    /// The stall notice.
    Stalled(Duration),
}

impl std::fmt::Debug for ResponseStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseStream")
            .field("provider", &self.ledger.provider)
            .field("complete", &self.ledger.complete)
            .field("metrics", &self.ledger.metrics)
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
            phase: Phase::Connecting(connecting),
            parser,
            ledger: Ledger {
                provider,
                start,
                metrics: RequestMetrics::default(),
                complete: false,
                finish_reason_seen: false,
                keepalives: 0,
                synced_body_bytes: 0,
                last_event_type: String::new(),
                frame_at: start,
                body_start: None,
                stray_body: Vec::new(),
                stray_body_cut: false,
                unlabelled: None,
            },
            reported_retries: 0,
            check_retries: true,
        }
    }

    /// Measurements so far (final once the stream has ended).
    pub fn metrics(&self) -> &RequestMetrics {
        &self.ledger.metrics
    }

    /// True once the provider's terminal event arrived (`message_stop`, `[DONE]`,
    /// `response.completed` or `response.incomplete`).
    pub fn is_complete(&self) -> bool {
        self.ledger.complete
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
        let decoder = self.ledger.provider.decoder();
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
            let ledger = &mut self.ledger;
            ledger.metrics.attempts = progress.attempts;
            ledger.metrics.retries.clone_from(&progress.retries);
            let unsynced = progress.body_bytes.saturating_sub(ledger.synced_body_bytes);
            ledger.metrics.bytes_received = ledger.metrics.bytes_received.saturating_add(unsynced);
            ledger.synced_body_bytes = progress.body_bytes;
        }
    }

    fn on_headers(&mut self, response: Response<Incoming>) {
        let now = Instant::now();
        let metrics = &mut self.ledger.metrics;
        metrics.request_id = response_request_id(&response);
        metrics.http_version = Some(version_label(response.version()));
        metrics.time_to_headers = Some(now - self.sender.start);
        self.ledger.unlabelled = match error::media_type(response.headers()) {
            Some(media) if media == "text/event-stream" => None,
            media => Some(format!(
                "{}, {}",
                response.status().as_u16(),
                media.as_deref().unwrap_or("no content type")
            )),
        };
        self.sync_progress();
        let watchdog = Watchdog::new(&self.sender.config.timeouts, self.sender.start, now);
        self.ledger.frame_at = now;
        self.ledger.body_start = None;
        self.ledger.stray_body.clear();
        self.ledger.stray_body_cut = false;
        self.phase = Phase::Streaming {
            body: response.into_body(),
            watchdog,
        };
    }

    /// Ends the stream with `error`, or starts a new attempt when nothing was delivered yet
    /// and the failure may be retried. Returns the error to yield, if any.
    fn fail(&mut self, error: ClientError, retryable: bool) -> Option<ClientError> {
        if self.ledger.metrics.events == 0 && retryable {
            let attempt = self.sender.current_attempt();
            if let Some(wait) = self.sender.schedule_retry(attempt, &error, true, None) {
                let sender = self.sender.clone();
                self.parser = new_parser(&sender);
                self.ledger.new_attempt();
                self.check_retries = true;
                self.phase = Phase::Connecting(Box::pin(async move {
                    tokio::time::sleep(wait).await;
                    sender.send().await
                }));
                return None;
            }
        }
        self.finish_metrics();
        self.phase = Phase::Finished;
        let metrics = &self.ledger.metrics;
        if metrics.events == 0 {
            return Some(error);
        }
        Some(ClientError::Truncated {
            partial: PartialResponse {
                events: metrics.events,
                bytes: metrics.bytes_received,
                last_event_type: Some(self.ledger.last_event_type.clone()),
                message: None,
            },
            cause: Box::new(error),
            request_id: metrics.request_id.clone(),
        })
    }

    fn finish_metrics(&mut self) {
        self.sync_progress();
        self.ledger.metrics.total = Some(self.sender.start.elapsed());
    }
}

impl Ledger {
    /// Forgets what the failed attempt left that would be taken for the next one's: its
    /// first-token time (an OpenAI Chat error chunk counts as content), the fresh parser's
    /// comment count, and the rest of the per-response state (which, with no event delivered,
    /// should already be at rest; cleared so that it provably is). The totals (bytes, and
    /// attempts and retries from the sender) run on across attempts.
    fn new_attempt(&mut self) {
        self.complete = false;
        self.finish_reason_seen = false;
        self.keepalives = 0;
        self.last_event_type.clear();
        self.body_start = None;
        self.stray_body.clear();
        self.stray_body_cut = false;
        self.unlabelled = None;
        self.metrics.time_to_first_event = None;
        self.metrics.time_to_first_token = None;
    }

    /// Notes where a body frame of the current response starts, and keeps the beginning of a
    /// body that does not look like an event stream. An event stream's lines start with a
    /// field name or `:`; one that starts with `{`, `[` or `<` is a JSON document or an HTML
    /// page. The start of an unlabelled body is kept too while `field_seen` (whether the
    /// parser has read a field line) says it has not shown itself an event stream: a proxy's
    /// plain-text page. Costs nothing once an event stream's first field is seen.
    fn keep_stray_body(&mut self, data: &[u8], field_seen: impl FnOnce() -> bool) {
        if self.body_start.is_none() {
            self.body_start = data.iter().copied().find(|b| !b.is_ascii_whitespace());
        }
        let limit = if self.metrics.events != 0 {
            0
        } else if matches!(self.body_start, Some(b'{' | b'[' | b'<')) {
            STRAY_BODY_LIMIT
        } else if self.unlabelled.is_some() && !field_seen() {
            PLAIN_START_LIMIT
        } else {
            0
        };
        let room = limit.saturating_sub(self.stray_body.len());
        let (kept, left) = data.split_at(data.len().min(room));
        self.stray_body.extend_from_slice(kept);
        // Only while something is kept: an event stream's bytes are never looked at again.
        if limit != 0 && !self.stray_body_cut {
            self.stray_body_cut = left.iter().any(|b| !b.is_ascii_whitespace());
        }
    }

    /// What to add to the error of a body that ended early (cleanly, or by a broken connection)
    /// when the body was not labelled an event stream and held no field line (`saw_field` is
    /// false): its status, content type and the start of its text, e.g. `: the response (200,
    /// text/plain) held no event: "Service Unavailable"`. A proxy's plain-text error page is
    /// otherwise reported only as a stream that ended early or a broken connection. `None` for
    /// anything that may have been a stream, and for a body with no text (nothing, or only
    /// whitespace, to show).
    fn no_event_note(&self, saw_field: bool) -> Option<String> {
        if saw_field {
            return None;
        }
        let what = self.unlabelled.as_deref()?;
        let excerpt = error::body_excerpt(&self.stray_body, self.stray_body_cut);
        // Quoted with its control characters escaped: a page's text goes into a log line.
        (!excerpt.is_empty()).then(|| format!(": the response ({what}) held no event: {excerpt:?}"))
    }

    /// The error for a success body that ended without an event and was not an event stream
    /// (see [`keep_stray_body`](Self::keep_stray_body)): the provider error a JSON body
    /// carries, classified as the same error arriving as an event, else a `Protocol` error
    /// naming what came.
    fn not_an_event_stream(&self) -> Option<ClientError> {
        if self.metrics.events != 0 {
            return None;
        }
        let what = match self.body_start? {
            b'{' | b'[' => "a JSON document",
            b'<' => "an HTML or XML page",
            _ => return None,
        };
        let request_id = self.metrics.request_id.clone();
        if let Some(error) = ClientError::from_json_error_body(&self.stray_body, request_id.clone())
        {
            return Some(error);
        }
        Some(ClientError::Protocol {
            message: format!(
                "expected an event stream, got {what} under a content type that is not \
                 text/event-stream (did the server ignore \"stream\": true?)"
            ),
            request_id,
        })
    }

    /// Bookkeeping for a delivered event; an error when the event is the provider's error.
    fn on_event(&mut self, event: &SseEventRef<'_>) -> Result<(), ClientError> {
        if self.metrics.events == 0 {
            self.metrics.time_to_first_event = Some(self.frame_at - self.start);
        }
        let data = event.data();
        // Anthropic and Responses events stripped of their `event:` line (some proxies) are
        // named by their data's `type`, as the decoders read them: the final event and an
        // error event must be seen as such (a whole answer is not truncated; an overloaded
        // error as the first event is retried).
        let event_type = match self.provider {
            Provider::Anthropic | Provider::OpenAiResponses => named_type(event.event_type(), data),
            Provider::OpenAiChat => Cow::Borrowed(event.event_type()),
        };
        let event_type = event_type.as_ref();
        if self.metrics.time_to_first_token.is_none() && is_content(self.provider, event_type) {
            self.metrics.time_to_first_token = Some(self.frame_at - self.start);
        }
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
                if is_done_marker(data) {
                    self.complete = true;
                } else if event_type == "error" || is_chat_error_chunk(data) {
                    return Err(ClientError::from_stream_error(
                        data,
                        self.metrics.request_id.clone(),
                    ));
                } else {
                    self.finish_reason_seen = self.finish_reason_seen || sets_finish_reason(data);
                    if memchr::memmem::find(data.as_bytes(), b"\"usage\":{").is_some()
                        && let Some(usage) =
                            parse(data).as_ref().and_then(|value| value.get("usage"))
                    {
                        self.metrics.merge_usage(usage);
                    }
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
        self.last_event_type.clear();
        self.last_event_type.push_str(event_type);
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

/// Whether an OpenAI Chat chunk is a provider's error: a JSON object with a top-level `error`
/// member, whatever its whitespace and key order (`{"error": ...}`, `{ "error": ...}`,
/// pretty-printed, or OpenRouter's ordinary-looking chunk with an `error` object beside choices
/// that end with `finish_reason: "error"`). The decoder's rule: a non-null `error`, or an
/// `error` (null too) without `choices`.
///
/// Every chunk goes through here, so the common case costs one substring scan: only a chunk
/// holding `"error"` followed by `:` is parsed. Inside a JSON string every quote is escaped,
/// so those bytes end a string only where it closes, and a closed string followed by `:` is a
/// key: text that merely mentions the word in a delta never gets parsed (a delta that is
/// exactly `"error"` is followed by `,` or `}`).
fn is_chat_error_chunk(data: &str) -> bool {
    static ERROR_KEY: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\"error\""));
    let bytes = data.as_bytes();
    let keyed = ERROR_KEY.find_iter(bytes).any(|at| {
        let after = bytes.get(at + b"\"error\"".len()..).unwrap_or_default();
        after.iter().find(|byte| !byte.is_ascii_whitespace()) == Some(&b':')
    });
    if !keyed {
        return false;
    }
    // Rare (an error, or a nested object with an `error` key): a real parse decides whether
    // the member is the chunk's own.
    match parse(data) {
        Some(serde_json::Value::Object(chunk)) => {
            crate::decode::openai_chat::is_error_chunk(&chunk)
        }
        _ => false,
    }
}

fn is_content(provider: Provider, event_type: &str) -> bool {
    match provider {
        Provider::Anthropic => event_type == "content_block_delta",
        Provider::OpenAiChat => true,
        Provider::OpenAiResponses => event_type.ends_with(".delta"),
    }
}

impl ResponseStream {
    /// Drives the request: each event parsed is checked and counted, then handed, borrowed, to
    /// `on_event`, which may stop the batch with `Break`. Returns [`Signal::Delivered`] once
    /// `on_event` was called and either stopped or the body data received so far is used up;
    /// the next body frame is read only by a later call, so the caller sees every event before
    /// the stream waits on the network again.
    pub(crate) fn poll_events(
        &mut self,
        cx: &mut Context<'_>,
        on_event: &mut impl FnMut(SseEventRef<'_>) -> ControlFlow<()>,
    ) -> Poll<Option<Result<Signal, ClientError>>> {
        loop {
            if self.check_retries {
                if let Some(retry) = self.next_unreported_retry() {
                    return Poll::Ready(Some(Ok(Signal::Retry(retry))));
                }
                // Streaming, every retry of the request is behind us.
                self.check_retries = !matches!(self.phase, Phase::Streaming { .. });
            }
            match &mut self.phase {
                Phase::Finished => return Poll::Ready(None),
                Phase::Connecting(connecting) => match connecting.as_mut().poll(cx) {
                    Poll::Pending => {
                        // A retry recorded during this poll is reported before the wait ends.
                        if let Some(retry) = self.next_unreported_retry() {
                            return Poll::Ready(Some(Ok(Signal::Retry(retry))));
                        }
                        return Poll::Pending;
                    }
                    Poll::Ready(Ok(response)) => self.on_headers(response),
                    Poll::Ready(Err(error)) => {
                        self.finish_metrics();
                        self.phase = Phase::Finished;
                        return Poll::Ready(Some(Err(error)));
                    }
                },
                Phase::Streaming { body, watchdog } => {
                    let mut delivered = false;
                    let mut failure = None;
                    loop {
                        let (dropped, item) = self.parser.next_item_and_dropped();
                        // The parser drops an oversized event and reads on; the client stops
                        // instead (before any later event), because the message is now broken.
                        if dropped > 0 {
                            failure = Some(ClientError::EventTooLarge {
                                limit: self.parser.config().max_event_bytes.unwrap_or(usize::MAX),
                                request_id: self.ledger.metrics.request_id.clone(),
                            });
                            break;
                        }
                        let Some(item) = item else { break };
                        let SseItem::Event(event) = item else {
                            continue;
                        };
                        if let Err(error) = self.ledger.on_event(&event) {
                            failure = Some(error);
                            break;
                        }
                        delivered = true;
                        if on_event(event).is_break() {
                            break;
                        }
                    }
                    // A comment (`: keep-alive`) or a bare blank line: both are what servers
                    // send to show they are alive while the model works.
                    let keepalives = self.parser.comments() + self.parser.empty_dispatches();
                    if keepalives != self.ledger.keepalives {
                        self.ledger.keepalives = keepalives;
                        watchdog.on_keepalive(self.ledger.frame_at);
                    }
                    if delivered {
                        // Every event of a batch came from frames that arrived by `frame_at`.
                        watchdog.on_event(self.ledger.frame_at);
                        if self.ledger.complete {
                            watchdog.on_complete(Instant::now());
                        }
                    }
                    if let Some(error) = failure {
                        // Events handed on before the failure stay delivered; the error follows.
                        // A provider error before anything was delivered is retried when its
                        // class is transient (`fail` retries only while `events` is 0). An
                        // Anthropic `ping` counts as delivered: a raw stream's caller has
                        // seen it, and the rule "nothing retried after an event reached the
                        // caller" has no exceptions to reason about (Anthropic sends its
                        // pings after `message_start` anyway). A comment (`: keep-alive`) is
                        // not an event, so an error after comments only is still retried.
                        let retryable = error.is_transient_provider_error();
                        if let Some(error) = self.fail(error, retryable) {
                            return Poll::Ready(Some(Err(error)));
                        }
                        continue;
                    }
                    if delivered {
                        return Poll::Ready(Some(Ok(Signal::Delivered)));
                    }
                    match Pin::new(body).poll_frame(cx) {
                        Poll::Ready(Some(Ok(frame))) => {
                            if let Ok(data) = frame.into_data() {
                                self.ledger.frame_at = Instant::now();
                                self.ledger.metrics.bytes_received += data.len() as u64;
                                // Per frame, not per event (the parser has read every earlier
                                // frame's whole lines by now).
                                let parser = &self.parser;
                                self.ledger.keep_stray_body(&data, || parser.saw_field());
                                self.parser.feed(data);
                            }
                        }
                        Poll::Ready(Some(Err(error))) => {
                            if self.ledger.complete {
                                // The answer is whole; a broken connection afterwards is moot.
                                self.finish_metrics();
                                self.phase = Phase::Finished;
                                continue;
                            }
                            let mut error =
                                body_error(&error, self.ledger.metrics.request_id.clone());
                            // A page that was never a stream says what it was, broken off or
                            // not (as at a clean end, below).
                            if let (ClientError::Connection { message, .. }, Some(note)) = (
                                &mut error,
                                self.ledger.no_event_note(self.parser.saw_field()),
                            ) {
                                message.push_str(&note);
                            }
                            if let Some(error) = self.fail(error, true) {
                                return Poll::Ready(Some(Err(error)));
                            }
                        }
                        Poll::Ready(None) => {
                            self.parser.finish();
                            if self.parser.next_item().is_some() {
                                // `finish` never dispatches, but stay correct if it ever does.
                                tracing::debug!("event completed at end of input ignored");
                            }
                            if self.ledger.complete || self.ledger.finish_reason_seen {
                                self.finish_metrics();
                                self.phase = Phase::Finished;
                                continue;
                            }
                            // A body that was never an event stream (a server that
                            // ignored `"stream": true` and labelled it generically) gets the
                            // same answer again, and may have been billed: not retried. A
                            // JSON body carrying a transient provider error (an overload, a
                            // rate limit) generated nothing: retried as that error's event
                            // would be.
                            let (error, retryable) = match self.ledger.not_an_event_stream() {
                                Some(error) => {
                                    let retryable = error.is_transient_provider_error();
                                    (error, retryable)
                                }
                                // Still a broken stream, retried as one (a server may stream
                                // under text/plain and break before its first line); an
                                // unlabelled body with no field line is named in the message,
                                // so that a proxy's error page is seen for what it is.
                                None => {
                                    let mut message = String::from(
                                        "the stream ended before the provider's final event",
                                    );
                                    if let Some(note) =
                                        self.ledger.no_event_note(self.parser.saw_field())
                                    {
                                        message.push_str(&note);
                                    }
                                    let error = ClientError::Protocol {
                                        message,
                                        request_id: self.ledger.metrics.request_id.clone(),
                                    };
                                    (error, true)
                                }
                            };
                            if let Some(error) = self.fail(error, retryable) {
                                return Poll::Ready(Some(Err(error)));
                            }
                        }
                        Poll::Pending => match watchdog.poll_alarm(cx) {
                            Poll::Pending => return Poll::Pending,
                            Poll::Ready(Alarm::Stall(elapsed)) => {
                                return Poll::Ready(Some(Ok(Signal::Stalled(elapsed))));
                            }
                            Poll::Ready(Alarm::GraceOver) => {
                                // The answer is whole; the body that never ends is dropped
                                // (and its connection with it).
                                tracing::debug!("body not ended after the final event; dropped");
                                self.finish_metrics();
                                self.phase = Phase::Finished;
                            }
                            Poll::Ready(Alarm::Timeout(which, elapsed)) => {
                                let retryable = which != TimeoutKind::Total;
                                let error = ClientError::Timeout {
                                    which,
                                    elapsed,
                                    request_id: self.ledger.metrics.request_id.clone(),
                                };
                                if let Some(error) = self.fail(error, retryable) {
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

impl Stream for ResponseStream {
    type Item = Result<StreamItem, ClientError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let mut delivered = None;
        let polled = this.poll_events(cx, &mut |event| {
            delivered = Some(event.to_owned());
            ControlFlow::Break(())
        });
        Poll::Ready(match polled {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(None) => None,
            Poll::Ready(Some(Err(error))) => Some(Err(error)),
            Poll::Ready(Some(Ok(signal))) => Some(Ok(match signal {
                Signal::Retry(retry) => StreamItem::Retry(retry),
                Signal::Stalled(elapsed) => StreamItem::Stalled { elapsed },
                // `Delivered` means the callback ran, so the event is there.
                Signal::Delivered => match delivered {
                    Some(event) => StreamItem::Event(event),
                    None => return Poll::Ready(None),
                },
            })),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::is_chat_error_chunk;

    /// An error chunk is told by its top-level `error` member in any layout; a chunk that only
    /// mentions the word, or nests an `error` key, or carries `"error": null` beside its
    /// choices, is not one.
    #[test]
    fn chat_error_chunks_are_told_by_their_top_level_error_member() {
        for error in [
            r#"{"error":{"code":502,"message":"x"}}"#,
            r#"{ "error": {"code": 502}}"#,
            "{\n  \"error\" :\n {\"code\": 502}\n}",
            r#"{"id":"gen-1","object":"chat.completion.chunk","error":{"code":502},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}"#,
            r#"{"error":"upstream failed"}"#,
            r#"{"error":null}"#,
        ] {
            assert!(is_chat_error_chunk(error), "{error}");
        }
        for chunk in [
            r#"{"choices":[{"index":0,"delta":{"content":"error"},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"\"error\": 1"},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"error"}]}"#,
            r#"{"choices":[],"error":null}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[]},"logprobs":{"error":1}}]}"#,
            r#"{"error": 1"#,
            "\"error\":",
            "",
        ] {
            assert!(!is_chat_error_chunk(chunk), "{chunk}");
        }
    }
}
