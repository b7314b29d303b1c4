//! Text and offsets handed to JavaScript in batches, shared by the classes that return many
//! values per call (`SseParser`, `StreamDecoder`): a batch is one string holding the values back
//! to back plus their UTF-16 offsets, written into a `Uint32Array` the caller owns and reuses
//! (through a byte view). Also [`js_string`], one such text made of a single value.

use std::cell::RefCell;

use napi::bindgen_prelude::BufferSlice;
use napi::{Env, JsString};

use crate::error::FerroloopError;
use crate::utf16::{SLACK, Utf16Converter};

/// Where one field landed in the batch text, in UTF-16 code units.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) start: u32,
    pub(crate) end: u32,
}

/// The batch text, written straight into the form V8 copies in: Latin-1 bytes (the fields as
/// they are) while every field of the batch is ASCII; from the first field that is not, UTF-16
/// (the bytes so far widened once, then every field converted as it arrives). Each field is read
/// once, with no intermediate UTF-8 copy and no separate count of its UTF-16 length (the
/// conversion gives it). V8's own UTF-8 decoding of a non-ASCII string is several times slower
/// than our conversion plus its copy. The buffers are kept across chunks (cleared, not freed) so
/// a steady stream allocates nothing per chunk.
#[derive(Debug, Default)]
pub(crate) struct BatchText {
    /// The text while it is all ASCII (`wide_units` is `None`).
    narrow: Vec<u8>,
    /// UTF-16 conversion buffer: `wide[..units]` is the text once a field was not ASCII. Its
    /// length is its capacity (zeroed when it grows, not per chunk), so writing into it needs no
    /// `unsafe` and a conversion may overshoot by a block (`SLACK`).
    wide: Vec<u16>,
    /// Units written into `wide`; `None` while the text is ASCII (in `narrow`).
    wide_units: Option<usize>,
    /// The conversion loop for this CPU.
    converter: Utf16Converter,
}

impl BatchText {
    /// Length in UTF-16 code units (what JavaScript string indices count).
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.wide_units.unwrap_or(self.narrow.len())
    }

    #[inline]
    pub(crate) fn push(&mut self, field: &str) {
        let Some(units) = self.wide_units else {
            if field.is_ascii() {
                self.narrow.extend_from_slice(field.as_bytes());
                return;
            }
            // The first non-ASCII field: the ASCII text so far is widened once.
            let ascii = self.narrow.len();
            self.reserve_wide(ascii + field.len());
            for (unit, &byte) in self.wide.iter_mut().zip(&self.narrow) {
                *unit = u16::from(byte);
            }
            self.wide_units = Some(ascii);
            return self.push_wide(ascii, field);
        };
        self.push_wide(units, field);
    }

    /// Converts `field` into `wide` after its first `units` units.
    #[inline]
    fn push_wide(&mut self, units: usize, field: &str) {
        self.reserve_wide(units + field.len());
        let converter = self.converter;
        let written = self
            .wide
            .get_mut(units..)
            .map_or(0, |out| converter.convert(field, out));
        self.wide_units = Some(units + written);
    }

    /// Makes `wide` hold at least `units` units plus the conversion's slack.
    fn reserve_wide(&mut self, units: usize) {
        let needed = units + SLACK;
        if self.wide.len() < needed {
            self.wide.resize(needed.max(2 * self.wide.len()), 0);
        }
    }

    pub(crate) fn clear(&mut self) {
        self.narrow.clear();
        self.wide_units = None;
    }

    pub(crate) fn make_js_string<'env>(&self, env: &'env Env) -> napi::Result<JsString<'env>> {
        match self.wide_units {
            None => env.create_string_latin1(&self.narrow),
            Some(units) => env.create_string_utf16(self.wide.get(..units).unwrap_or_default()),
        }
    }

    /// Drops the buffers when they hold more than `units` UTF-16 units' worth (a kept scratch
    /// stays bounded).
    fn release_over(&mut self, units: usize) {
        if self.wide.len() > units || self.narrow.capacity() > 2 * units {
            *self = Self::default();
        }
    }

    /// The Latin-1 bytes while the text is all ASCII (`None` once it went UTF-16).
    #[cfg(test)]
    pub(crate) fn narrow_bytes(&self) -> Option<&[u8]> {
        self.wide_units.is_none().then_some(self.narrow.as_slice())
    }

    #[cfg(test)]
    pub(crate) fn units(&self) -> Vec<u16> {
        match self.wide_units {
            None => self.narrow.iter().map(|&b| u16::from(b)).collect(),
            Some(units) => self.wide[..units].to_vec(),
        }
    }
}

/// Appends `field` to the batch text and returns where it landed.
#[inline]
pub(crate) fn append(text: &mut BatchText, field: &str) -> Result<Span, FerroloopError> {
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

/// The caller's offsets array (a byte view of a `Uint32Array`'s memory, see `lib/sse.js`) as a
/// mutable byte slice, checked to hold at least one offset and not to overlap `input` (both could
/// be views of one `ArrayBuffer`). Byte views are read by `napi_get_buffer_info`, which is
/// cheaper per call than `napi_get_typedarray_info` (that one tests the array's type against
/// each typed-array kind in turn); at one call per network packet it measured.
pub(crate) fn writable<'a>(
    out: &'a mut BufferSlice<'_>,
    input: Option<&[u8]>,
) -> Result<&'a mut [u8], FerroloopError> {
    if out.len() < OFFSET_BYTES {
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
    Ok(out)
}

/// Moves `kept` (the offsets of a batch that did not fit the caller's array) into `out`, a
/// byte view of a `Uint32Array` that must hold them all (`takeOffsets` of the batch classes).
pub(crate) fn take_kept_offsets(
    kept: &mut Vec<u32>,
    out: &mut BufferSlice<'_>,
) -> Result<(), FerroloopError> {
    let out = writable(out, None)?;
    let kept = std::mem::take(kept);
    if put_offsets(out, 0, &kept) {
        Ok(())
    } else {
        Err(FerroloopError::invalid_argument(format!(
            "offsets array too small: {} slots for {} offsets",
            out.len() / OFFSET_BYTES,
            kept.len()
        )))
    }
}

/// Bytes per offset in the caller's array (a `Uint32Array`, in the platform's byte order).
pub(crate) const OFFSET_BYTES: usize = 4;

/// Writes `values` into `out` from offset slot `first` on (native byte order, as a `Uint32Array`
/// on the same memory reads them); returns `false`, writing nothing, when they do not fit.
pub(crate) fn put_offsets(out: &mut [u8], first: usize, values: &[u32]) -> bool {
    let Some(slots) = out.get_mut(first * OFFSET_BYTES..(first + values.len()) * OFFSET_BYTES)
    else {
        return false;
    };
    for (slot, value) in slots.chunks_exact_mut(OFFSET_BYTES).zip(values) {
        slot.copy_from_slice(&value.to_ne_bytes());
    }
    true
}

thread_local! {
    /// The text of [`js_string`], one per thread (each JavaScript thread has its own). Kept
    /// between calls: a fresh buffer for a decoder's final message (megabytes) cost zeroing and
    /// page faults on every call.
    static SCRATCH: RefCell<BatchText> = RefCell::new(BatchText::default());
}

/// The largest scratch [`js_string`] keeps after a call (8 MiB of UTF-16); a larger one is
/// released.
const RETAINED_UNITS: usize = 1 << 22;

/// `text` as a JavaScript string, through a one-field [`BatchText`]: ASCII as Latin-1 (V8
/// copies the bytes), other text converted to UTF-16 here, which measured several times faster
/// than V8's own UTF-8 decoding of non-ASCII text (`napi_create_string_utf8`, what a returned
/// `String` goes through).
pub(crate) fn js_string<'env>(env: &'env Env, text: &str) -> napi::Result<JsString<'env>> {
    if text.is_ascii() {
        return env.create_string_latin1(text.as_bytes());
    }
    SCRATCH.with(|cell| {
        // Never re-entered (nothing in here calls back into JavaScript); a fresh text if it
        // ever were.
        let mut fresh = BatchText::default();
        let mut kept = cell.try_borrow_mut();
        let scratch = match kept.as_deref_mut() {
            Ok(scratch) => scratch,
            Err(_) => &mut fresh,
        };
        scratch.clear();
        scratch.push(text);
        let string = scratch.make_js_string(env);
        scratch.release_over(RETAINED_UNITS);
        string
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::utf16::{TEST_SAMPLES, wide};

    #[test]
    fn batch_text_widens_at_the_first_non_ascii_field() {
        let mut text = BatchText::default();
        let mut joined = String::new();
        for field in TEST_SAMPLES.iter().chain(&TEST_SAMPLES) {
            text.push(field);
            joined.push_str(field);
            assert_eq!(text.units(), wide(&joined));
            assert_eq!(text.len(), joined.encode_utf16().count());
            assert_eq!(text.wide_units.is_none(), joined.is_ascii());
        }
        text.clear();
        text.push("ascii again");
        assert_eq!(text.wide_units, None);
        assert_eq!(text.units(), wide("ascii again"));
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
}
