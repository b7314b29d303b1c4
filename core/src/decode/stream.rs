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
        Self { sse, decoder }
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
    /// are decoded by the next call.
    pub fn feed_into(
        &mut self,
        chunk: Bytes,
        out: &mut Vec<DecodeEvent>,
    ) -> Result<(), DecodeError> {
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

    /// Ends the input: the final message, the provider's error, or [`DecodeError::Truncated`]
    /// with the partial message. Bytes after the last complete SSE event are discarded.
    pub fn finish(&mut self) -> Result<Value, DecodeError> {
        self.end_input()?;
        self.decoder.finish()
    }

    /// [`finish`](Self::finish) with the final message as JSON text (see
    /// [`EventDecoder::finish_json`]).
    pub fn finish_json(&mut self) -> Result<String, DecodeError> {
        self.end_input()?;
        self.decoder.finish_json()
    }

    /// Decodes the events still queued and ends the SSE input.
    fn end_input(&mut self) -> Result<(), DecodeError> {
        let mut ignored = Vec::new();
        self.drain(&mut ignored)?;
        if self.sse.finish() {
            tracing::debug!("unterminated SSE event discarded at end of input");
        }
        Ok(())
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
