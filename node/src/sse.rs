//! `SseParser` for JavaScript: bytes in, the events each chunk completes out.
//!
//! Crossing the N-API boundary costs per value, so a chunk's events travel as one batch: a single
//! string holding every field back to back plus UTF-16 offsets (six per event: type, data and id,
//! each as start/end). `lib/sse.js` slices the string into `{event, data, id}` objects (V8 makes
//! substrings cheap). Consecutive events with the same id share one copy of it in the batch
//! string. Event types are interned across batches (see `TypeTable`): a type sent once is
//! afterwards sent as a reference to the JavaScript string made the first time, so a stream's
//! few types are neither copied into every batch nor sliced again per batch. The offsets are
//! written into a `Uint32Array` the caller owns and reuses: a new typed array per chunk would
//! cost an external buffer and a GC finalizer each time.

use napi::bindgen_prelude::BufferSlice;
use napi::{Env, JsString};
use napi_derive::napi;

use crate::batch::{BatchText, Span, append, put_offsets, take_kept_offsets, writable};
use crate::error::{FerroloopError, JsNumber};
use crate::exec::whole_usize;
use crate::guard;

/// Options for the `SseParser` class.
#[napi(object)]
#[derive(Debug, Default, Clone, Copy)]
pub struct SseParserOptions {
    /// Drop a pending event once it grows past this many bytes (memory stays bounded; parsing
    /// resumes after the next blank line). Unlimited when absent.
    pub max_event_bytes: Option<f64>,
}

/// Accumulates the events of one chunk into the batch encoding (reused across chunks).
#[derive(Debug, Default)]
struct BatchBuilder {
    text: BatchText,
    offsets: Vec<u32>,
    /// Event types sent once, referenced afterwards.
    types: TypeTable,
    /// The previous event's type and id with their spans in this batch (`None` after a clear),
    /// reused when the next event repeats them (types only once the table is full).
    last_type: LastField,
    last_id: LastField,
}

/// The event types both sides have interned, in the order they were first sent; `lib/sse.js`
/// keeps the matching JavaScript strings in an array under the same rule, so the indexes agree.
///
/// The protocol, per event, in the type's two offset slots `(a, b)`:
/// - `a > b`: the type is entry `a - 1` of the table (`b` is 0; a span always has `a <= b`);
/// - `a <= b`: the type is the span `a..b` of the batch text; if the table then holds fewer than
///   [`TYPE_TABLE_CAP`] entries, both sides append it (the native side sends a span for a type
///   only when it is not in the table, so a type is never appended twice).
///
/// Entries added while building a batch count only once the batch reached JavaScript: a batch
/// that fails (an error or a panic before `feedBatch` returns) is never decoded there, so the
/// next batch first drops them (`clear`).
#[derive(Debug, Default)]
struct TypeTable {
    names: Vec<String>,
    /// Entries JavaScript has (from batches that were returned).
    committed: usize,
    /// The entry the previous event referenced (checked first: types come in runs).
    last: Option<usize>,
}

/// Types kept per parser: streams have a handful; past this, types travel as text (as ids do).
const TYPE_TABLE_CAP: usize = 64;

impl TypeTable {
    /// The table entry equal to `event_type`, if any.
    fn find(&mut self, event_type: &str) -> Option<usize> {
        if let Some(last) = self.last
            && let Some(name) = self.names.get(last)
            && same_bytes(name.as_bytes(), event_type.as_bytes())
        {
            return Some(last);
        }
        let found = self
            .names
            .iter()
            .position(|name| same_bytes(name.as_bytes(), event_type.as_bytes()))?;
        self.last = Some(found);
        Some(found)
    }

    /// Adds `event_type` (known not to be in the table) if there is room; returns whether it did.
    fn add(&mut self, event_type: &str) -> bool {
        if self.names.len() >= TYPE_TABLE_CAP {
            return false;
        }
        self.last = Some(self.names.len());
        self.names.push(event_type.to_owned());
        true
    }

    /// Drops the entries of a batch that never reached JavaScript.
    fn roll_back(&mut self) {
        self.names.truncate(self.committed);
        if self.last.is_some_and(|last| last >= self.committed) {
            self.last = None;
        }
    }

    /// Marks every entry as known to JavaScript (the batch was returned).
    fn commit(&mut self) {
        self.committed = self.names.len();
    }
}

/// A type or id already in the batch text.
#[derive(Debug, Default)]
struct LastField {
    value: String,
    span: Option<Span>,
}

impl LastField {
    /// The span of `value` in the batch, appending it unless it repeats the last one.
    #[inline]
    fn span_of(&mut self, text: &mut BatchText, value: &str) -> Result<Span, FerroloopError> {
        if let Some(span) = self.span
            && same_bytes(self.value.as_bytes(), value.as_bytes())
        {
            return Ok(span);
        }
        let span = append(text, value)?;
        self.value.clear();
        self.value.push_str(value);
        self.span = Some(span);
        Ok(span)
    }
}

impl BatchBuilder {
    fn clear(&mut self) {
        self.text.clear();
        self.offsets.clear();
        self.types.roll_back();
        self.last_type.span = None;
        self.last_id.span = None;
    }

    /// The type's two offset slots (see [`TypeTable`]), appending its text when it is not
    /// interned.
    #[inline]
    fn type_slots(&mut self, event_type: &str) -> Result<Span, FerroloopError> {
        if let Some(index) = self.types.find(event_type) {
            let reference = u32::try_from(index + 1).unwrap_or(u32::MAX);
            return Ok(Span {
                start: reference,
                end: 0,
            });
        }
        if self.types.add(event_type) {
            return append(&mut self.text, event_type);
        }
        self.last_type.span_of(&mut self.text, event_type)
    }

    #[inline]
    fn push_event(&mut self, event_type: &str, data: &str, id: &str) -> Result<(), FerroloopError> {
        let type_span = self.type_slots(event_type)?;
        let data_span = append(&mut self.text, data)?;
        let id_span = self.last_id.span_of(&mut self.text, id)?;
        self.offsets.extend_from_slice(&[
            type_span.start,
            type_span.end,
            data_span.start,
            data_span.end,
            id_span.start,
            id_span.end,
        ]);
        Ok(())
    }

    fn event_count(&self) -> usize {
        self.offsets.len() / 6
    }
}

/// `a == b` for the short strings event types and ids are, compared inline a word at a time: the
/// `memcmp` call the standard comparison makes measured a fifth of a batch's time in profiles.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let word = |chunk: &[u8]| {
        let mut buf = [0u8; 8];
        buf.copy_from_slice(chunk);
        u64::from_ne_bytes(buf)
    };
    let (mut a_words, mut b_words) = (a.chunks_exact(8), b.chunks_exact(8));
    let mut differ = 0;
    for (x, y) in a_words.by_ref().zip(b_words.by_ref()) {
        differ |= word(x) ^ word(y);
    }
    for (x, y) in a_words.remainder().iter().zip(b_words.remainder()) {
        differ |= u64::from(x ^ y);
    }
    differ == 0
}

/// A WHATWG Server-Sent-Events parser: feed it byte chunks split anywhere; each `feed` returns
/// the events that chunk completed.
#[napi(js_name = "SseParser")]
#[derive(Debug)]
pub struct NativeSseParser {
    inner: ferroloop::sse::SseParser,
    /// The batch being built; its buffers are reused from chunk to chunk.
    batch: BatchBuilder,
    /// Offsets of the last batch that did not fit the caller's array (see `takeOffsets`).
    pending_offsets: Vec<u32>,
}

#[napi]
impl NativeSseParser {
    /// A parser, optionally with a cap on a pending event's size.
    #[napi(constructor)]
    pub fn new(options: Option<SseParserOptions>) -> napi::Result<Self> {
        guard::sync(|| {
            let limit = match options.and_then(|o| o.max_event_bytes) {
                None => None,
                Some(n) => match whole_usize(n, "maxEventBytes") {
                    Ok(bytes) if bytes >= 1 => Some(bytes),
                    // 0 would drop every event; past 2^64 was clamped to the largest size.
                    _ => {
                        return Err(FerroloopError::invalid_argument(format!(
                            "maxEventBytes must be a positive integer below 2^64, got {}",
                            JsNumber(n)
                        ))
                        .into());
                    }
                },
            };
            let config = ferroloop::sse::SseConfig::default().max_event_bytes(limit);
            Ok(Self {
                inner: ferroloop::sse::SseParser::with_config(config),
                batch: BatchBuilder::default(),
                pending_offsets: Vec::new(),
            })
        })
    }

    /// Feeds a chunk; returns the batch text of the events it completed (`null` when none).
    ///
    /// `out` is a byte view of a `Uint32Array` (`new Uint8Array(offsets.buffer, ...)`): its
    /// first value receives the event count `n`; when it has room for `1 + 6n` values the offsets
    /// follow, otherwise they are kept for [`take_offsets`](Self::take_offsets). A type's two
    /// offsets may be a reference to an interned type instead of a span (see `TypeTable`): the
    /// caller must decode every batch returned, in order.
    #[napi(
        js_name = "feedBatch",
        ts_args_type = "chunk: Uint8Array, out: Uint8Array"
    )]
    pub fn feed_batch<'env>(
        &mut self,
        env: &'env Env,
        chunk: BufferSlice<'_>,
        mut out: BufferSlice<'_>,
    ) -> napi::Result<Option<JsString<'env>>> {
        guard::sync(|| {
            let chunk: &[u8] = &chunk;
            let out = writable(&mut out, Some(chunk))?;
            let batch = &mut self.batch;
            batch.clear();
            // Read in place: the core copies only what an unfinished line or event needs.
            let mut failed = None;
            self.inner.feed_borrowed(chunk, |item| {
                if let ferroloop::sse::SseItem::Event(ev) = item
                    && failed.is_none()
                    && let Err(err) = batch.push_event(ev.event_type(), ev.data(), ev.id())
                {
                    failed = Some(err);
                }
            });
            if let Some(err) = failed {
                return Err(err.into());
            }
            let count = batch.event_count();
            let count_value = u32::try_from(count).map_err(|_| {
                FerroloopError::invalid_argument("one chunk completed over 2^32 events")
            })?;
            put_offsets(out, 0, &[count_value]);
            if count == 0 {
                return Ok(None);
            }
            if !put_offsets(out, 1, &batch.offsets) {
                self.pending_offsets.clone_from(&batch.offsets);
            }
            let text = batch.text.make_js_string(env)?;
            // The batch reaches JavaScript, which interns its new types.
            batch.types.commit();
            Ok(Some(text))
        })
    }

    /// Copies the offsets `feedBatch` could not fit into `out` (a byte view of a `Uint32Array`,
    /// which must hold them all).
    #[napi(js_name = "takeOffsets", ts_args_type = "out: Uint8Array")]
    pub fn take_offsets(&mut self, mut out: BufferSlice<'_>) -> napi::Result<()> {
        guard::sync(|| Ok(take_kept_offsets(&mut self.pending_offsets, &mut out)?))
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

    /// The last event id: what a reconnection sends as `Last-Event-ID`. An id field takes
    /// effect at the blank line that ends its event (also one with no data, which yields no
    /// event); an event cut off by `finish()` never changes it.
    #[napi(getter)]
    pub fn last_event_id(&self) -> napi::Result<String> {
        guard::sync(|| Ok(self.inner.last_event_id().to_owned()))
    }

    /// Events dropped for exceeding `maxEventBytes`.
    #[napi(getter)]
    pub fn dropped_events(&self) -> napi::Result<f64> {
        guard::sync(|| Ok(self.inner.dropped_events() as f64))
    }

    /// Total bytes fed so far (Python's `bytes_fed`).
    #[napi(getter)]
    pub fn bytes_fed(&self) -> napi::Result<f64> {
        guard::sync(|| Ok(self.inner.bytes_fed() as f64))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::utf16::wide;

    #[test]
    fn same_bytes_is_byte_equality() {
        let samples: [&[u8]; 8] = [
            b"",
            b"a",
            b"b",
            b"content_block_delta",
            b"content_block_delte",
            b"Content_block_delta",
            b"content_block_delta_",
            b"12345678",
        ];
        for a in samples {
            for b in samples {
                assert_eq!(same_bytes(a, b), a == b, "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn ascii_batches_stay_one_byte_per_character() {
        let mut b = BatchBuilder::default();
        b.push_event("message", "hello", "1").unwrap();
        assert_eq!(b.text.narrow_bytes(), Some(&b"messagehello1"[..]));
        assert_eq!(b.text.len(), 13);
        assert_eq!(b.offsets, vec![0, 7, 7, 12, 12, 13]);
    }

    #[test]
    fn batch_shares_repeated_id_and_interns_types() {
        let mut b = BatchBuilder::default();
        b.push_event("delta", "x", "").unwrap();
        b.push_event("delta", "😀", "").unwrap();
        b.push_event("stop", "z", "7").unwrap();
        b.push_event("delta", "w", "7").unwrap();
        // "delta" + "" + "x" + "😀"(2 units) + "stop" + "z" + "7" + "w"
        assert_eq!(b.text.units(), wide("deltax😀stopz7w"));
        assert_eq!(
            b.offsets,
            vec![
                0, 5, 5, 6, 6, 6, // "delta" sent as text (interned as entry 0)
                1, 0, 6, 8, 6, 6, // entry 0
                8, 12, 12, 13, 13, 14, // "stop" sent as text (entry 1)
                1, 0, 14, 15, 13, 14, // entry 0 again; the id's span reused
            ]
        );
        // A later batch refers to both without sending them again.
        b.types.commit();
        b.clear();
        b.push_event("stop", "a", "").unwrap();
        b.push_event("delta", "b", "").unwrap();
        assert_eq!(b.text.units(), wide("ab"));
        assert_eq!(b.offsets, vec![2, 0, 0, 1, 1, 1, 1, 0, 1, 2, 1, 1]);
    }

    #[test]
    fn types_of_a_batch_that_never_reached_javascript_are_dropped() {
        let mut b = BatchBuilder::default();
        b.push_event("kept", "x", "").unwrap();
        b.types.commit();
        b.push_event("lost", "y", "").unwrap();
        // No commit: the batch failed before JavaScript saw it.
        b.clear();
        b.push_event("lost", "z", "").unwrap();
        b.push_event("kept", "w", "").unwrap();
        assert_eq!(
            b.text.units(),
            wide("lostz")
                .into_iter()
                .chain(wide("w"))
                .collect::<Vec<_>>()
        );
        // "lost" is sent as text again (and interned as entry 1 again); "kept" is entry 0.
        assert_eq!(b.offsets, vec![0, 4, 4, 5, 5, 5, 1, 0, 5, 6, 5, 5]);
        assert_eq!(b.types.names, ["kept", "lost"]);
    }

    #[test]
    fn types_past_the_table_travel_as_text() {
        let mut b = BatchBuilder::default();
        for n in 0..TYPE_TABLE_CAP {
            b.push_event(&format!("t{n}"), "", "").unwrap();
        }
        b.types.commit();
        b.clear();
        b.push_event("extra", "a", "").unwrap();
        b.push_event("extra", "b", "").unwrap();
        b.push_event("t3", "c", "").unwrap();
        assert_eq!(b.types.names.len(), TYPE_TABLE_CAP);
        // Not interned: sent once per batch as text, the span shared by consecutive events.
        assert_eq!(
            b.offsets,
            vec![0, 5, 5, 6, 6, 6, 0, 5, 6, 7, 6, 6, 4, 0, 7, 8, 6, 6]
        );
    }

    #[test]
    fn cleared_builder_forgets_spans_and_goes_back_to_ascii() {
        let mut b = BatchBuilder::default();
        b.push_event("delta", "😀", "1").unwrap();
        b.clear();
        b.push_event("delta", "x", "1").unwrap();
        assert_eq!(b.text.narrow_bytes(), Some(&b"deltax1"[..]));
        assert_eq!(b.text.len(), 7);
        assert_eq!(b.offsets, vec![0, 5, 5, 6, 6, 7]);
    }
}
