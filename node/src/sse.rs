//! `SseParser` for JavaScript: bytes in, the events each chunk completes out.
//!
//! Crossing the N-API boundary costs per value, so a chunk's events travel as one batch: a single
//! string holding every field back to back plus UTF-16 offsets (six per event: type, data and id,
//! each as start/end). `lib/sse.js` slices the string into `{event, data, id}` objects (V8 makes
//! substrings cheap). Consecutive events with the same type or id share one copy of it in the
//! batch string. The offsets are written into a `Uint32Array` the caller owns and reuses: a new
//! typed array per chunk would cost an external buffer and a GC finalizer each time.

use bytes::Bytes;
use napi::bindgen_prelude::Uint32ArraySlice;
use napi::{Env, JsString};
use napi_derive::napi;

use crate::error::FerroloopError;
use crate::guard;

/// Options for the `SseParser` class.
#[napi(object)]
#[derive(Debug, Default, Clone, Copy)]
pub struct SseParserOptions {
    /// Drop a pending event once it grows past this many bytes (memory stays bounded; parsing
    /// resumes after the next blank line). Unlimited when absent.
    pub max_event_bytes: Option<f64>,
}

/// Where one field landed in the batch text, in UTF-16 code units.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Span {
    start: u32,
    end: u32,
}

/// The batch text: the fields' UTF-8 back to back, handed to V8 in the cheapest form it can copy
/// in: as is (a Latin-1 string) while every field is ASCII, else converted to UTF-16 in one pass
/// over the whole batch. V8's own UTF-8 decoding of a non-ASCII string is several times slower
/// than our conversion plus a copy; converting the batch at once (rather than field by field)
/// keeps the conversion in its sixteen-byte blocks except at the batch's very end. The buffers
/// are kept across chunks (cleared, not freed) so a steady stream allocates nothing per chunk.
#[derive(Debug, Default)]
struct BatchText {
    utf8: Vec<u8>,
    /// Length of the text in UTF-16 code units (what JavaScript string indices count).
    units: usize,
    /// UTF-16 conversion buffer; grown (and zeroed) only when a batch needs more room than any
    /// before it.
    wide: Vec<u16>,
}

impl BatchText {
    /// Length in UTF-16 code units.
    fn len(&self) -> usize {
        self.units
    }

    fn push(&mut self, field: &str) {
        self.utf8.extend_from_slice(field.as_bytes());
        self.units += utf16_len(field);
    }

    fn clear(&mut self) {
        self.utf8.clear();
        self.units = 0;
    }

    fn make_js_string<'env>(&mut self, env: &'env Env) -> napi::Result<JsString<'env>> {
        // As many UTF-16 units as bytes only when every byte is ASCII (any other character
        // takes more bytes than units).
        if self.units == self.utf8.len() {
            return env.create_string_latin1(&self.utf8);
        }
        if self.wide.len() < self.utf8.len() {
            self.wide.resize(self.utf8.len(), 0);
        }
        let written = utf8_to_utf16(&self.utf8, &mut self.wide);
        env.create_string_utf16(&self.wide[..written])
    }

    #[cfg(test)]
    fn units(&self) -> Vec<u16> {
        String::from_utf8_lossy(&self.utf8).encode_utf16().collect()
    }
}

/// The length of `text` in UTF-16 code units: one per character, two for those outside the
/// Basic Multilingual Plane (four-byte UTF-8).
fn utf16_len(text: &str) -> usize {
    let bytes = text.as_bytes();
    let whole = bytes.len() - bytes.len() % 16;
    let (blocks, rest) = bytes.split_at(whole);
    let mut units = block16::utf16_units(blocks);
    for &byte in rest {
        units += utf16_units_of_byte(byte);
    }
    units
}

/// The UTF-16 units a byte of valid UTF-8 accounts for: one where a character starts, another
/// for a four-byte lead (a surrogate pair), none for a continuation byte.
fn utf16_units_of_byte(byte: u8) -> usize {
    usize::from((byte as i8) >= -0x40) + usize::from(byte >= 0xF0)
}

/// Writes `utf8` (valid UTF-8: whole `str` fields back to back) as UTF-16 into the front of
/// `out` (which must hold `utf8.len()` units) and returns the number of units written.
///
/// Works sixteen bytes at a time: the block is widened whole, then the position advances past
/// its ASCII prefix and one other character is decoded inline. Writing a whole block is in
/// bounds because a character never takes more UTF-16 units than UTF-8 bytes, so the output
/// position trails the input's. The input is not validated again (that would be another pass);
/// malformed input could only produce wrong units, never a panic or an overrun. (The standard
/// library's `encode_utf16` iterator works a character at a time and was the largest cost of a
/// batch in profiles.)
fn utf8_to_utf16(utf8: &[u8], out: &mut [u16]) -> usize {
    let Some(out) = out.get_mut(..utf8.len()) else {
        return 0;
    };
    let (mut i, mut o) = (0, 0);
    while i < utf8.len() {
        if let (Some(block), Some(dest)) = (utf8.get(i..i + 16), out.get_mut(o..o + 16))
            && let (Ok(block), Ok(dest)) = (
                <&[u8; 16]>::try_from(block),
                <&mut [u16; 16]>::try_from(dest),
            )
        {
            let high = block16::widen(block, dest);
            if high == 0 {
                i += 16;
                o += 16;
                continue;
            }
            let ascii = high.trailing_zeros() as usize;
            i += ascii;
            o += ascii;
        }
        let lead = utf8[i];
        // Continuation bytes carry six bits each (valid input always has them).
        let cont = |k: usize| utf8.get(i + k).map_or(0, |&b| u32::from(b & 0x3F));
        if lead < 0x80 {
            out[o] = u16::from(lead);
            i += 1;
            o += 1;
        } else if lead < 0xE0 {
            out[o] = ((u32::from(lead & 0x1F) << 6) | cont(1)) as u16;
            i += 2;
            o += 1;
        } else if lead < 0xF0 {
            out[o] = ((u32::from(lead & 0x0F) << 12) | (cont(1) << 6) | cont(2)) as u16;
            i += 3;
            o += 1;
        } else {
            let scalar =
                (u32::from(lead & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3);
            let offset = scalar.wrapping_sub(0x1_0000);
            if let Some(pair) = out.get_mut(o..o + 2) {
                pair[0] = (0xD800 | ((offset >> 10) & 0x3FF)) as u16;
                pair[1] = (0xDC00 | (offset & 0x3FF)) as u16;
            }
            i += 4;
            o += 2;
        }
    }
    o.min(out.len())
}

/// Sixteen-byte steps of the UTF-8 to UTF-16 work, with SSE2 on x86-64 (part of its baseline):
/// the compiler did not vectorize the portable loops well (measured: ~16 instructions a block
/// for the widening alone, against 5).
#[cfg(target_arch = "x86_64")]
mod block16 {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_cmplt_epi8, _mm_cvtsi128_si64, _mm_loadu_si128, _mm_max_epu8,
        _mm_movemask_epi8, _mm_sad_epu8, _mm_set1_epi8, _mm_setzero_si128, _mm_storeu_si128,
        _mm_sub_epi8, _mm_unpackhi_epi8, _mm_unpackhi_epi64, _mm_unpacklo_epi8,
    };

    /// Writes the sixteen bytes as sixteen UTF-16 units; returns the mask of non-ASCII bytes
    /// (bit `k` for byte `k`).
    #[inline]
    pub(super) fn widen(block: &[u8; 16], out: &mut [u16; 16]) -> u32 {
        // SAFETY: SSE2 is part of the x86-64 baseline (every build of this target enables it);
        // the load reads exactly the sixteen bytes of `block` and the two stores write exactly
        // the 32 bytes of `out` (all unaligned forms).
        unsafe {
            let v = _mm_loadu_si128(block.as_ptr().cast());
            let zero = _mm_setzero_si128();
            let dest = out.as_mut_ptr();
            _mm_storeu_si128(dest.cast(), _mm_unpacklo_epi8(v, zero));
            _mm_storeu_si128(dest.add(8).cast(), _mm_unpackhi_epi8(v, zero));
            _mm_movemask_epi8(v) as u32
        }
    }

    /// The UTF-16 units `blocks` (valid UTF-8, a multiple of sixteen bytes long) accounts for
    /// (see `utf16_units_of_byte`): per-lane byte counters of continuation bytes and four-byte
    /// leads, summed every 255 blocks (before a counter can wrap) and at the end.
    #[inline]
    pub(super) fn utf16_units(blocks: &[u8]) -> usize {
        let mut units = blocks.len();
        for group in blocks.chunks(16 * 255) {
            // SAFETY: SSE2 is part of the x86-64 baseline; each load reads sixteen bytes that
            // `chunks_exact` guarantees are inside `group`.
            let (continuation, four_byte) = unsafe {
                let (mut continuation, mut four_byte) = (_mm_setzero_si128(), _mm_setzero_si128());
                for block in group.chunks_exact(16) {
                    let v = _mm_loadu_si128(block.as_ptr().cast());
                    // Continuation bytes are 0x80..=0xBF, i.e. below -64 as signed bytes; a
                    // true comparison is -1, so subtracting it counts.
                    continuation =
                        _mm_sub_epi8(continuation, _mm_cmplt_epi8(v, _mm_set1_epi8(-64)));
                    // Four-byte leads are 0xF0 and above: max(v, 0xF0) == v.
                    let lead = _mm_cmpeq_epi8(_mm_max_epu8(v, _mm_set1_epi8(-16)), v);
                    four_byte = _mm_sub_epi8(four_byte, lead);
                }
                (lane_sum(continuation), lane_sum(four_byte))
            };
            units = units - continuation + four_byte;
        }
        units
    }

    /// The sum of the sixteen unsigned byte lanes of `v`.
    ///
    /// # Safety
    /// Needs SSE2 (the x86-64 baseline).
    #[inline]
    unsafe fn lane_sum(v: __m128i) -> usize {
        // SAFETY: SSE2 only (see above); `_mm_sad_epu8` against zero sums each half's bytes
        // into its 64-bit lane.
        unsafe {
            let sums = _mm_sad_epu8(v, _mm_setzero_si128());
            (_mm_cvtsi128_si64(sums) + _mm_cvtsi128_si64(_mm_unpackhi_epi64(sums, sums))) as usize
        }
    }
}

/// The portable form of the x86-64 `block16` (also built for the tests, which compare the two).
#[cfg(not(target_arch = "x86_64"))]
use portable16 as block16;

/// The portable form of `block16`.
#[cfg(any(not(target_arch = "x86_64"), test))]
mod portable16 {
    pub(super) fn widen(block: &[u8; 16], out: &mut [u16; 16]) -> u32 {
        let mut high = 0;
        for (k, (unit, &byte)) in out.iter_mut().zip(block).enumerate() {
            *unit = u16::from(byte);
            high |= u32::from(byte >> 7) << k;
        }
        high
    }

    pub(super) fn utf16_units(blocks: &[u8]) -> usize {
        blocks.iter().map(|&b| super::utf16_units_of_byte(b)).sum()
    }
}

/// Accumulates the events of one chunk into the batch encoding (reused across chunks).
#[derive(Debug, Default)]
struct BatchBuilder {
    text: BatchText,
    offsets: Vec<u32>,
    /// The previous event's type and id with their spans in this batch (`None` after a clear),
    /// reused when the next event repeats them.
    last_type: LastField,
    last_id: LastField,
}

/// A type or id already in the batch text.
#[derive(Debug, Default)]
struct LastField {
    value: String,
    span: Option<Span>,
}

impl LastField {
    /// The span of `value` in the batch, appending it unless it repeats the last one.
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
        self.last_type.span = None;
        self.last_id.span = None;
    }

    fn push_event(&mut self, event_type: &str, data: &str, id: &str) -> Result<(), FerroloopError> {
        let type_span = self.last_type.span_of(&mut self.text, event_type)?;
        let data_span = append(&mut self.text, data)?;
        let id_span = self.last_id.span_of(&mut self.text, id)?;
        for span in [type_span, data_span, id_span] {
            self.offsets.push(span.start);
            self.offsets.push(span.end);
        }
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

/// Appends `field` to the batch text and returns where it landed.
fn append(text: &mut BatchText, field: &str) -> Result<Span, FerroloopError> {
    let too_long = |_| {
        FerroloopError::invalid_argument(
            "one chunk completed over 4 Gi characters of event text; feed smaller chunks",
        )
    };
    let start = u32::try_from(text.len()).map_err(too_long)?;
    text.push(field);
    let end = u32::try_from(text.len()).map_err(too_long)?;
    Ok(Span { start, end })
}

/// The caller's offsets array as a mutable slice, checked to be non-empty and not to overlap
/// `input` (both could be views of one `ArrayBuffer`).
fn writable<'a>(
    out: &'a mut Uint32ArraySlice<'_>,
    input: Option<&[u8]>,
) -> Result<&'a mut [u32], FerroloopError> {
    if out.is_empty() {
        return Err(FerroloopError::invalid_argument("offsets array is empty"));
    }
    let out_range = out.as_ptr_range();
    let out_range = out_range.start as usize..out_range.end as usize;
    if let Some(input) = input {
        let in_range = input.as_ptr_range();
        if (in_range.start as usize) < out_range.end && out_range.start < in_range.end as usize {
            return Err(FerroloopError::invalid_argument(
                "the offsets array overlaps the chunk's memory",
            ));
        }
    }
    // SAFETY: the slice is a live typed array argument of the current synchronous call, so its
    // memory stays valid and JavaScript cannot run (nor touch it) until we return; it is not
    // empty (a zero-length view may hold a dangling pointer); and it does not overlap the only
    // other borrowed JS memory of the call (`input`, checked above). A reused offsets array is
    // the measured fast path: allocating a typed array per chunk cost more than parsing.
    Ok(unsafe { out.as_mut() })
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
                batch: BatchBuilder::default(),
                pending_offsets: Vec::new(),
            })
        })
    }

    /// Feeds a chunk; returns the batch text of the events it completed (`null` when none).
    ///
    /// `out[0]` receives the event count `n`; when `out` has room for `1 + 6n` values the offsets
    /// follow in `out[1..]`, otherwise they are kept for [`take_offsets`](Self::take_offsets).
    #[napi(
        js_name = "feedBatch",
        ts_args_type = "chunk: Uint8Array, out: Uint32Array"
    )]
    pub fn feed_batch<'env>(
        &mut self,
        env: &'env Env,
        chunk: &[u8],
        mut out: Uint32ArraySlice<'_>,
    ) -> napi::Result<Option<JsString<'env>>> {
        guard::sync(|| {
            let out = writable(&mut out, Some(chunk))?;
            self.inner.feed(Bytes::copy_from_slice(chunk));
            let batch = &mut self.batch;
            batch.clear();
            while let Some(item) = self.inner.next_item() {
                if let ferroloop::sse::SseItem::Event(ev) = item {
                    batch.push_event(ev.event_type(), ev.data(), ev.id())?;
                }
            }
            let count = batch.event_count();
            out[0] = u32::try_from(count).map_err(|_| {
                FerroloopError::invalid_argument("one chunk completed over 2^32 events")
            })?;
            if count == 0 {
                return Ok(None);
            }
            match out.get_mut(1..=batch.offsets.len()) {
                Some(slots) => slots.copy_from_slice(&batch.offsets),
                None => self.pending_offsets.clone_from(&batch.offsets),
            }
            batch.text.make_js_string(env).map(Some)
        })
    }

    /// Copies the offsets `feedBatch` could not fit into `out` (which must hold them all).
    #[napi(js_name = "takeOffsets", ts_args_type = "out: Uint32Array")]
    pub fn take_offsets(&mut self, mut out: Uint32ArraySlice<'_>) -> napi::Result<()> {
        guard::sync(|| {
            let out = writable(&mut out, None)?;
            let pending = std::mem::take(&mut self.pending_offsets);
            match out.get_mut(..pending.len()) {
                Some(slots) => {
                    slots.copy_from_slice(&pending);
                    Ok(())
                }
                None => Err(FerroloopError::invalid_argument(format!(
                    "offsets array too small: {} slots for {} offsets",
                    out.len(),
                    pending.len()
                ))
                .into()),
            }
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

    fn wide(text: &str) -> Vec<u16> {
        text.encode_utf16().collect()
    }

    #[test]
    fn utf8_to_utf16_matches_the_standard_library() {
        let samples = [
            "",
            "a",
            "plain ascii longer than one word",
            "é",
            "abcdefgé",
            "abcdefghé日本語 mixed 😀 with ascii runs of various lengths 12345678",
            "😀😀😀",
            "\u{7f}\u{80}\u{7ff}\u{800}\u{ffff}\u{10000}\u{10ffff}",
            "sixteen bytes ok, then é at 17, 日本語 at 30, and 😀 straddling the second block!",
            "0123456789abcdef0123456789abcdef",
            "0123456789abcde😀0123456789abcdef日",
        ];
        for sample in samples {
            for start in 0..sample.len() {
                let Some(tail) = sample.get(start..) else {
                    continue;
                };
                let mut units = vec![7u16; tail.len() + 1];
                let written = utf8_to_utf16(tail.as_bytes(), &mut units[1..]);
                let expected: Vec<u16> = tail.encode_utf16().collect();
                assert_eq!(&units[1..=written], &expected[..], "{tail:?}");
                assert_eq!(units[0], 7);
            }
        }
    }

    #[test]
    fn block16_matches_the_byte_rules() {
        let text = "0123456789abcde😀0123456789abcdef日本語 naïve café Straße \u{10FFFF}\u{7f}\u{80}\u{7ff}";
        let bytes = text.as_bytes();
        for start in 0..bytes.len() - 16 {
            let block = <&[u8; 16]>::try_from(&bytes[start..start + 16]).unwrap();
            let mut out = [0u16; 16];
            let high = block16::widen(block, &mut out);
            for k in 0..16 {
                assert_eq!(out[k], u16::from(block[k]));
                assert_eq!(high >> k & 1, u32::from(block[k] >= 0x80));
            }
            let expected: usize = block.iter().map(|&b| utf16_units_of_byte(b)).sum();
            assert_eq!(block16::utf16_units(block), expected, "at {start}");
            let mut portable = [0u16; 16];
            assert_eq!(portable16::widen(block, &mut portable), high);
            assert_eq!(portable, out);
            assert_eq!(portable16::utf16_units(block), expected);
        }
        // Long enough for several counter groups of 255 blocks.
        let long = text.repeat(200);
        let whole = long.len() - long.len() % 16;
        let expected: usize = long.as_bytes()[..whole]
            .iter()
            .map(|&b| utf16_units_of_byte(b))
            .sum();
        assert_eq!(block16::utf16_units(&long.as_bytes()[..whole]), expected);
        assert_eq!(utf16_len(&long), long.encode_utf16().count());
    }

    #[test]
    fn utf16_len_counts_units() {
        for sample in [
            "",
            "abc",
            "é",
            "日本語",
            "😀",
            "a😀é日\u{10FFFF}\u{7f}\u{80}",
            "naïve café",
            "a longer field: 会话 工具 结果 🚀 ✅ naïve café Straße, over several blocks 😀😀",
        ] {
            assert_eq!(
                utf16_len(sample),
                sample.encode_utf16().count(),
                "{sample:?}"
            );
        }
    }

    #[test]
    fn malformed_utf8_never_overruns() {
        let inputs: [&[u8]; 5] = [
            b"\xF0",
            b"\xF0\x9F",
            b"abc\xF4",
            b"\x80\x80\x80",
            b"\xE6\x97",
        ];
        for input in inputs {
            let mut out = vec![0u16; input.len()];
            assert!(utf8_to_utf16(input, &mut out) <= input.len());
        }
    }

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
        assert_eq!(b.text.utf8, b"messagehello1");
        assert_eq!(b.text.len(), 13);
        assert_eq!(b.offsets, vec![0, 7, 7, 12, 12, 13]);
    }

    #[test]
    fn offsets_count_utf16_units() {
        let mut text = BatchText::default();
        for (field, len) in [
            ("ab", 2),
            ("é", 3),
            ("日本", 5),
            ("😀", 7),
            ("\u{10FFFF}x", 10),
        ] {
            append(&mut text, field).unwrap();
            assert_eq!(text.len(), len, "after {field}");
        }
        assert_eq!(text.units(), wide("abé日本😀\u{10FFFF}x"));
    }

    #[test]
    fn batch_shares_repeated_type_and_id() {
        let mut b = BatchBuilder::default();
        b.push_event("delta", "x", "").unwrap();
        b.push_event("delta", "😀", "").unwrap();
        b.push_event("stop", "z", "7").unwrap();
        // "delta" + "" + "x" + "😀"(2 units) + "stop" + "z" + "7"
        assert_eq!(b.text.units(), wide("deltax😀stopz7"));
        assert_eq!(
            b.offsets,
            vec![0, 5, 5, 6, 6, 6, 0, 5, 6, 8, 6, 6, 8, 12, 12, 13, 13, 14]
        );
    }

    #[test]
    fn cleared_builder_forgets_spans_and_goes_back_to_ascii() {
        let mut b = BatchBuilder::default();
        b.push_event("delta", "😀", "1").unwrap();
        b.clear();
        b.push_event("delta", "x", "1").unwrap();
        assert_eq!(b.text.utf8, b"deltax1");
        assert_eq!(b.text.len(), 7);
        assert_eq!(b.offsets, vec![0, 5, 5, 6, 6, 7]);
    }
}
