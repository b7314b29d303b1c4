//! Bytes in, typed events out: an [`EventDecoder`] fed through an [`SseParser`].

use std::ops::ControlFlow;

use bytes::Bytes;
use serde_json::Value;

use super::{AnyDecoder, DecodeError, DecodeEvent, EventDecoder, Provider};
use crate::sse::{SseItem, SseParser};

/// A provider decoder behind its own SSE parser: the shape the bindings wrap
/// (`feed(bytes)` → events, `message()`, `finish()`).
#[derive(Debug)]
pub struct StreamDecoder<D = AnyDecoder> {
    sse: SseParser,
    decoder: D,
    /// Set by `finish`: the input has ended, and a later feed is [`DecodeError::Finished`].
    finished: bool,
    /// The first failure among the events the first `finish` decoded (those still queued when
    /// the input ended): every `finish` answers with it when the decoder has no earlier failure
    /// to answer with, so that a second call answers the same.
    end_failure: Option<DecodeError>,
}

impl StreamDecoder<AnyDecoder> {
    /// A stream decoder for `provider`.
    pub fn for_provider(provider: Provider) -> Self {
        Self::new(provider.decoder())
    }
}

impl<D: EventDecoder> StreamDecoder<D> {
    /// Wraps `decoder` with a fresh SSE parser.
    pub fn new(decoder: D) -> Self {
        Self::with_parser(decoder, SseParser::new())
    }

    /// Wraps `decoder` with a configured SSE parser.
    pub fn with_parser(decoder: D, sse: SseParser) -> Self {
        Self {
            sse,
            decoder,
            finished: false,
            end_failure: None,
        }
    }

    /// Feeds a chunk of raw bytes (split anywhere) and returns the typed events it completed.
    ///
    /// On error, the events completed before the failing SSE event are lost; use
    /// [`feed_into`](Self::feed_into) to keep them.
    pub fn feed(&mut self, chunk: Bytes) -> Result<Vec<DecodeEvent>, DecodeError> {
        let mut events = Vec::new();
        self.feed_into(chunk, &mut events)?;
        Ok(events)
    }

    /// Feeds a chunk and appends the typed events it completed to `out`. On error, `out` holds
    /// the events completed before the failing SSE event; the events after it stay queued and
    /// are decoded by the next call. After [`finish`](Self::finish), every feed is
    /// [`DecodeError::Finished`] and changes nothing.
    pub fn feed_into(
        &mut self,
        chunk: Bytes,
        out: &mut Vec<DecodeEvent>,
    ) -> Result<(), DecodeError> {
        if self.finished {
            return Err(DecodeError::Finished);
        }
        self.sse.feed(chunk);
        self.drain(out)
    }

    /// [`feed_into`](Self::feed_into) of a chunk the caller keeps (a read buffer, a
    /// JavaScript `Uint8Array`): the SSE parser reads it in place (see
    /// [`SseParser::feed_borrowed`]) instead of taking a copy, and keeps only what an
    /// unfinished event still needs. The same events and errors as `feed_into` given a copy:
    /// on error, `out` holds the events completed before the failing SSE event, and the events
    /// after it stay queued (the parser keeps its own copy of the chunk then) for the next call.
    pub fn feed_borrowed_into(
        &mut self,
        chunk: &[u8],
        out: &mut Vec<DecodeEvent>,
    ) -> Result<(), DecodeError> {
        if self.finished {
            return Err(DecodeError::Finished);
        }
        let decoder = &mut self.decoder;
        let mut failure = None;
        let _ = self
            .sse
            .feed_borrowed_until(chunk, |item| match decode_item(decoder, item, out) {
                Ok(()) => ControlFlow::Continue(()),
                Err(error) => {
                    failure = Some(error);
                    ControlFlow::Break(())
                }
            });
        failure.map_or(Ok(()), Err)
    }

    fn drain(&mut self, out: &mut Vec<DecodeEvent>) -> Result<(), DecodeError> {
        while let Some(item) = self.sse.next_item() {
            decode_item(&mut self.decoder, item, out)?;
        }
        Ok(())
    }

    /// A snapshot of the message accumulated so far (see [`EventDecoder::message`]).
    pub fn message(&self) -> Value {
        self.decoder.message()
    }

    /// [`message`](Self::message) as JSON text (see [`EventDecoder::message_json`]).
    pub fn message_json(&self) -> String {
        self.decoder.message_json()
    }

    /// Whether the stream reached its end marker.
    pub fn is_complete(&self) -> bool {
        self.decoder.is_complete()
    }

    /// Ends the input: the final message, or the stream's error — the first error an event
    /// raised (a provider's error event, [`DecodeError::InvalidJson`] or
    /// [`DecodeError::Protocol`]; the same error a feed returned, again, even when the events
    /// after it decoded and completed the message), else [`DecodeError::Truncated`] with the
    /// partial message. Bytes after the last complete SSE event are discarded.
    ///
    /// The rule of every binding: `finish` may be called again and answers the same (the same
    /// message, or a copy of the same error); only a feed after it is refused
    /// ([`DecodeError::Finished`]), since only a feed could change the answer. The events still
    /// queued when the input ends (behind an event that failed in a feed) are all decoded by
    /// the first call; a failure among them is the answer when no earlier event failed.
    pub fn finish(&mut self) -> Result<Value, DecodeError> {
        let ended = self.end_input(&mut Vec::new());
        Self::answer(ended, self.decoder.finish())
    }

    /// [`finish`](Self::finish) with the final message as JSON text (see
    /// [`EventDecoder::finish_json`]).
    pub fn finish_json(&mut self) -> Result<String, DecodeError> {
        let ended = self.end_input(&mut Vec::new());
        Self::answer(ended, self.decoder.finish_json())
    }

    /// [`finish_json`](Self::finish_json) that also appends to `out` the typed events of what
    /// the end of the input decodes (the events still queued, and the tool calls the end
    /// seals): for a binding that hands out every event (C's `fl_decoder_next_event`). A
    /// second call appends nothing and answers the same.
    pub fn finish_json_into(&mut self, out: &mut Vec<DecodeEvent>) -> Result<String, DecodeError> {
        let ended = self.end_input(out);
        let result = Self::answer(ended, self.decoder.finish_json());
        self.decoder.drain_events(out);
        result
    }

    /// The answer of `finish`: the decoder's, which is the stream's first failure if an event
    /// failed (the provider decoders remember it); the failure of an event decoded at the end
    /// of the input when the decoder has no error of its own to give (a decoder that does not
    /// remember its failures).
    fn answer<T>(
        ended: Result<(), DecodeError>,
        finished: Result<T, DecodeError>,
    ) -> Result<T, DecodeError> {
        match (ended, finished) {
            (Err(end_failure), Ok(_) | Err(DecodeError::Truncated { .. })) => Err(end_failure),
            (_, finished) => finished,
        }
    }

    /// Decodes the events still queued and ends the SSE input, the first time; answers with
    /// the first failure of those events every time.
    fn end_input(&mut self, out: &mut Vec<DecodeEvent>) -> Result<(), DecodeError> {
        if !self.finished {
            self.finished = true;
            // Every queued event is decoded now, and only now: a later call sees the same
            // decoder, so it answers the same.
            while let Some(item) = self.sse.next_item() {
                if let Err(error) = decode_item(&mut self.decoder, item, out) {
                    self.end_failure.get_or_insert(error);
                }
            }
            if self.sse.finish() {
                tracing::debug!("unterminated SSE event discarded at end of input");
            }
        }
        match &self.end_failure {
            Some(error) => Err(error.clone()),
            None => Ok(()),
        }
    }

    /// The provider decoder (for its typed accessors).
    pub fn decoder(&self) -> &D {
        &self.decoder
    }

    /// The provider decoder, mutably (e.g. [`EventDecoder::set_record_events`]).
    pub fn decoder_mut(&mut self) -> &mut D {
        &mut self.decoder
    }
}

/// Decodes one SSE item (events only; `retry` is not the decoder's) and moves the typed events
/// it completed into `out`, also when it fails.
fn decode_item<D: EventDecoder>(
    decoder: &mut D,
    item: SseItem<'_>,
    out: &mut Vec<DecodeEvent>,
) -> Result<(), DecodeError> {
    let SseItem::Event(event) = item else {
        return Ok(());
    };
    let result = decoder.push_event(event.event_type(), event.data());
    decoder.drain_events(out);
    result
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const STREAM: &str = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",",
        "\"type\":\"message\",\"role\":\"assistant\",\"model\":\"x\",\"content\":[],",
        "\"stop_reason\":null,\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":",
        "{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );

    /// Bytes fed after `finish()` are refused as such (they used to be decoded as a
    /// continuation of the finished stream: "a second `message_start` in one stream"), in both
    /// ways of feeding, and leave the finished message as it was.
    #[test]
    fn a_feed_after_finish_is_refused_and_changes_nothing() {
        let mut decoder = StreamDecoder::for_provider(Provider::Anthropic);
        decoder.feed(Bytes::from_static(STREAM.as_bytes())).unwrap();
        let message = decoder.finish().unwrap();
        let again = decoder.feed(Bytes::from_static(STREAM.as_bytes()));
        assert!(matches!(again, Err(DecodeError::Finished)), "{again:?}");
        let mut events = Vec::new();
        let borrowed = decoder.feed_borrowed_into(STREAM.as_bytes(), &mut events);
        assert!(
            matches!(borrowed, Err(DecodeError::Finished)),
            "{borrowed:?}"
        );
        assert!(events.is_empty());
        assert_eq!(
            decoder.finish().unwrap(),
            message,
            "a second finish answers the same"
        );
        assert_eq!(decoder.message(), message);
        assert_eq!(DecodeError::Finished.code(), "invalid_state");
    }

    /// `finish()` called again answers the same: the same error, not what decoding the events
    /// queued behind the first failure gives (the first call failed on the second bad event,
    /// the second call went on to the `message_stop` and returned a message).
    #[test]
    fn finish_called_again_answers_the_same_after_failing_events() {
        let start = STREAM.split("event: message_delta").next().unwrap();
        let input = format!(
            "{start}event: content_block_delta\ndata: {{first\n\n\
             event: content_block_delta\ndata: {{second\n\n\
             event: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\n"
        );
        for borrowed in [false, true] {
            let mut decoder = StreamDecoder::for_provider(Provider::Anthropic);
            let mut events = Vec::new();
            let fed = if borrowed {
                decoder.feed_borrowed_into(input.as_bytes(), &mut events)
            } else {
                decoder.feed_into(Bytes::from(input.clone()), &mut events)
            };
            assert!(
                matches!(fed, Err(DecodeError::InvalidJson { .. })),
                "{fed:?}"
            );
            let answers: Vec<String> = (0..3)
                .map(|_| match decoder.finish() {
                    Ok(message) => format!("message {message}"),
                    Err(error) => format!("{}: {error}", error.code()),
                })
                .collect();
            assert!(answers[0].starts_with("invalid_json"), "{answers:?}");
            assert_eq!(answers[0], answers[1], "borrowed: {borrowed}");
            assert_eq!(answers[1], answers[2], "borrowed: {borrowed}");
            assert_eq!(
                decoder.finish_json().map_err(|error| error.to_string()),
                Err(answers[0].trim_start_matches("invalid_json: ").to_owned())
            );
        }
    }
}
