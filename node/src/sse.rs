//! `SseParser` for JavaScript: bytes in, the events each chunk completes out.
//!
//! Crossing the N-API boundary costs per value, so a chunk's events travel as one batch: a single
//! string holding every field back to back plus a `Uint32Array` of UTF-16 offsets (six per event:
//! type, data and id, each as start/end). `lib/sse.js` slices the string into `{event, data, id}`
//! objects (V8 makes substrings cheap). Consecutive events with the same type or id share one
//! copy of it in the batch string.

use bytes::Bytes;
use napi::bindgen_prelude::Uint32Array;
use napi_derive::napi;

use crate::error::FerroloopError;
use crate::guard;

/// Options for [`SseParser`].
#[napi(object)]
#[derive(Debug, Default, Clone, Copy)]
pub struct SseParserOptions {
    /// Drop a pending event once it grows past this many bytes (memory stays bounded; parsing
    /// resumes after the next blank line). Unlimited when absent.
    pub max_event_bytes: Option<f64>,
}

/// The events one chunk completed, encoded for `lib/sse.js` (see the module docs).
#[napi(object)]
pub struct SseBatch {
    /// Every field of every event, back to back.
    pub text: String,
    /// Six UTF-16 offsets into `text` per event: type start/end, data start/end, id start/end.
    pub offsets: Uint32Array,
}

/// Where one field landed in the batch text, in UTF-16 code units.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Span {
    start: u32,
    end: u32,
}

/// Accumulates the events of one chunk into the batch encoding.
#[derive(Debug, Default)]
struct BatchBuilder {
    text: String,
    /// Length of `text` in UTF-16 code units.
    text_utf16: u64,
    offsets: Vec<u32>,
    /// The previous event's type and id, reused when the next event repeats them.
    last_type: Option<(String, Span)>,
    last_id: Option<(String, Span)>,
}

impl BatchBuilder {
    fn push_event(&mut self, event_type: &str, data: &str, id: &str) -> Result<(), FerroloopError> {
        let type_span = match &self.last_type {
            Some((text, span)) if text == event_type => *span,
            _ => {
                let span = self.append(event_type)?;
                self.last_type = Some((event_type.to_owned(), span));
                span
            }
        };
        let data_span = self.append(data)?;
        let id_span = match &self.last_id {
            Some((text, span)) if text == id => *span,
            _ => {
                let span = self.append(id)?;
                self.last_id = Some((id.to_owned(), span));
                span
            }
        };
        for span in [type_span, data_span, id_span] {
            self.offsets.push(span.start);
            self.offsets.push(span.end);
        }
        Ok(())
    }

    fn append(&mut self, field: &str) -> Result<Span, FerroloopError> {
        let start = self.text_utf16;
        let end = start + utf16_len(field) as u64;
        let to_u32 = |n: u64| {
            u32::try_from(n).map_err(|_| {
                FerroloopError::invalid_argument(
                    "one chunk completed more than 4 GiB of event text; feed smaller chunks",
                )
            })
        };
        let span = Span {
            start: to_u32(start)?,
            end: to_u32(end)?,
        };
        self.text.push_str(field);
        self.text_utf16 = end;
        Ok(span)
    }

    fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    fn finish(self) -> SseBatch {
        SseBatch {
            text: self.text,
            offsets: Uint32Array::new(self.offsets),
        }
    }
}

/// Length of `text` in UTF-16 code units (what JavaScript string indices count).
pub fn utf16_len(text: &str) -> usize {
    if text.is_ascii() {
        return text.len();
    }
    // Every scalar value is one unit except those above U+FFFF (4-byte sequences), which are two:
    // count the bytes that start a scalar value, plus one more per 4-byte lead byte.
    text.bytes()
        .map(|b| usize::from((b & 0xC0) != 0x80) + usize::from(b >= 0xF0))
        .sum()
}

/// A WHATWG Server-Sent-Events parser: feed it byte chunks split anywhere; each `feed` returns
/// the events that chunk completed.
#[napi(js_name = "SseParser")]
#[derive(Debug)]
pub struct NativeSseParser {
    inner: ferroloop::sse::SseParser,
}

#[napi]
impl NativeSseParser {
    /// A parser, optionally with a cap on a pending event's size.
    #[napi(constructor)]
    pub fn new(options: Option<SseParserOptions>) -> napi::Result<Self> {
        guard::sync(|| {
            let limit = match options.and_then(|o| o.max_event_bytes) {
                None => None,
                Some(n) if n.is_finite() && n >= 1.0 && n.fract() == 0.0 => Some(n as usize),
                Some(n) => {
                    return Err(FerroloopError::invalid_argument(format!(
                        "maxEventBytes must be a positive integer, got {n}"
                    ))
                    .into());
                }
            };
            let config = ferroloop::sse::SseConfig::default().max_event_bytes(limit);
            Ok(Self {
                inner: ferroloop::sse::SseParser::with_config(config),
            })
        })
    }

    /// Feeds a chunk; returns the events it completed as a batch (`null` when none).
    #[napi(js_name = "feedBatch")]
    pub fn feed_batch(&mut self, chunk: &[u8]) -> napi::Result<Option<SseBatch>> {
        guard::sync(|| {
            self.inner.feed(Bytes::copy_from_slice(chunk));
            let mut batch = BatchBuilder::default();
            while let Some(item) = self.inner.next_item() {
                if let ferroloop::sse::SseItem::Event(ev) = item {
                    batch.push_event(ev.event_type(), ev.data(), ev.id())?;
                }
            }
            Ok((!batch.is_empty()).then(|| batch.finish()))
        })
    }

    /// Ends the stream; returns whether an unterminated event was discarded. The parser may then
    /// be fed a new stream (a reconnection); `lastEventId` and `retry` are kept.
    #[napi]
    pub fn finish(&mut self) -> napi::Result<bool> {
        guard::sync(|| Ok(self.inner.finish()))
    }

    /// The reconnection time set by the last valid `retry` field, in milliseconds.
    #[napi(getter)]
    pub fn retry(&self) -> napi::Result<Option<f64>> {
        guard::sync(|| Ok(self.inner.retry().map(|ms| ms as f64)))
    }

    /// The last event id seen (persists across events).
    #[napi(getter)]
    pub fn last_event_id(&self) -> napi::Result<String> {
        guard::sync(|| Ok(self.inner.last_event_id().to_owned()))
    }

    /// Events dropped for exceeding `maxEventBytes`.
    #[napi(getter)]
    pub fn dropped_events(&self) -> napi::Result<f64> {
        guard::sync(|| Ok(self.inner.dropped_events() as f64))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn utf16_len_counts_code_units() {
        assert_eq!(utf16_len(""), 0);
        assert_eq!(utf16_len("abc"), 3);
        assert_eq!(utf16_len("é"), 1);
        assert_eq!(utf16_len("日本"), 2);
        assert_eq!(utf16_len("a😀b"), 4);
        assert_eq!(utf16_len("\u{FFFD}"), 1);
        for s in ["héllo 😀 wörld", "ascii", "\u{10FFFF}x"] {
            assert_eq!(utf16_len(s), s.encode_utf16().count());
        }
    }

    #[test]
    fn batch_shares_repeated_type_and_id() {
        let mut b = BatchBuilder::default();
        b.push_event("delta", "x", "").unwrap();
        b.push_event("delta", "😀", "").unwrap();
        b.push_event("stop", "z", "7").unwrap();
        // "delta" + "" + "x" + "😀"(2 units) + "stop" + "z" + "7"
        assert_eq!(b.text, "deltax😀stopz7");
        assert_eq!(
            b.offsets,
            vec![0, 5, 5, 6, 6, 6, 0, 5, 6, 8, 6, 6, 8, 12, 12, 13, 13, 14]
        );
    }
}
