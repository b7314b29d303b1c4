//! UTF-8 to UTF-16 conversion for the strings handed to V8 (see `batch::BatchText`).
//!
//! V8 takes non-ASCII text as UTF-16; its own UTF-8 decoding measured several times slower than
//! converting here and letting it copy the units. The standard library's `encode_utf16` works a
//! character at a time and was the largest cost of a batch in profiles, so the conversion is a
//! vector loop: AVX-512 (BW + VBMI2) when the CPU has it, chosen once per [`Utf16Converter`],
//! else sixteen-byte SSE2 blocks (x86-64 baseline), else a portable form of the same loop.

/// Units of room a conversion needs past the units it writes: the SSE2 and portable loops store
/// whole sixteen-unit blocks. (The AVX-512 loop writes exactly the units it produces.)
pub(crate) const SLACK: usize = 16;

/// A UTF-8 to UTF-16 converter using the best loop this CPU runs (detected once, at creation).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Utf16Converter {
    kernel: Kernel,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kernel {
    /// Sixteen-byte blocks ([`block16`]).
    Blocks16,
    /// AVX-512 BW + VL + VBMI2 ([`avx512`]).
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Default for Utf16Converter {
    fn default() -> Self {
        Self::detect()
    }
}

impl Utf16Converter {
    /// The converter for this CPU.
    pub(crate) fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        if avx512::available() {
            return Self {
                kernel: Kernel::Avx512,
            };
        }
        Self {
            kernel: Kernel::Blocks16,
        }
    }

    /// Every converter this CPU runs (the tests compare them).
    #[cfg(test)]
    fn all() -> Vec<Self> {
        let mut all = vec![Self {
            kernel: Kernel::Blocks16,
        }];
        #[cfg(target_arch = "x86_64")]
        if avx512::available() {
            all.push(Self {
                kernel: Kernel::Avx512,
            });
        }
        all
    }

    /// Writes `text` as UTF-16 into the front of `out` and returns the number of units written.
    /// `out` must hold `text.len() + SLACK` units (a character never takes more UTF-16 units
    /// than UTF-8 bytes), else nothing is written. Units past the returned count may be
    /// overwritten (scratch of the last block).
    #[inline]
    pub(crate) fn convert(self, text: &str, out: &mut [u16]) -> usize {
        self.convert_bytes(text.as_bytes(), out)
    }

    /// [`convert`](Self::convert) of bytes that should be UTF-8: malformed input gives wrong
    /// units (the binding only converts `str`s), never a panic or a write outside `out`.
    fn convert_bytes(self, utf8: &[u8], out: &mut [u16]) -> usize {
        if out.len() < utf8.len() + SLACK {
            return 0;
        }
        match self.kernel {
            Kernel::Blocks16 => convert_16(utf8, out),
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Kernel::Avx512` is only chosen when `avx512::available()` reported the
            // features the function is compiled for.
            Kernel::Avx512 => unsafe { avx512::convert(utf8, out) },
        }
    }
}

/// The sixteen-byte loop: the block is widened whole, then the position advances past its ASCII
/// prefix and one other character is decoded inline. The last (partial) block is copied into a
/// zero-padded buffer and converted the same way, so a short text does not fall back to a byte
/// loop at its end. `out` holds `utf8.len() + SLACK` units.
fn convert_16(utf8: &[u8], out: &mut [u16]) -> usize {
    let whole = utf8.len().saturating_sub(SLACK - 1);
    let (i, o) = convert_blocks(utf8, whole, 0, out, 0);
    let rest = utf8.get(i..).unwrap_or_default();
    if rest.is_empty() {
        return o.min(out.len());
    }
    // Every character starts and ends inside `rest` (`i` is at a character boundary), so the
    // padding is never decoded as part of one.
    let mut padded = [0u8; 2 * SLACK];
    if let Some(front) = padded.get_mut(..rest.len()) {
        front.copy_from_slice(rest);
    }
    let (_, o) = convert_blocks(&padded, rest.len(), 0, out, o);
    o.min(out.len())
}

/// The loop of [`convert_16`]: converts `src` from `i` while `i < end`, writing from `out[o]`;
/// returns where it stopped in both. A block is read at `i` only when sixteen bytes are there,
/// and it advances past `end` only into bytes of the same character (so a caller with blocks up
/// to `end` only gets every character that starts before `end`).
fn convert_blocks(
    src: &[u8],
    end: usize,
    mut i: usize,
    out: &mut [u16],
    mut o: usize,
) -> (usize, usize) {
    while i < end {
        if let (Some(block), Some(dest)) = (src.get(i..i + 16), out.get_mut(o..o + 16))
            && let (Ok(block), Ok(dest)) = (
                <&[u8; 16]>::try_from(block),
                <&mut [u16; 16]>::try_from(dest),
            )
        {
            let high = block16::widen(block, dest);
            if high == 0 {
                let step = SLACK.min(end - i);
                i += step;
                o += step;
                continue;
            }
            let ascii = (high.trailing_zeros() as usize).min(end - i);
            i += ascii;
            o += ascii;
            if i >= end {
                break;
            }
        }
        let Some((read, written)) = decode_one(src, i, out, o) else {
            break;
        };
        i += read;
        o += written;
    }
    (i, o)
}

/// Decodes the character whose first byte is `src[i]` into `out[o..]`; returns the bytes it
/// took and the units it wrote (one or two; never more units than bytes), or `None` when `i` or
/// `o` is out of range. Continuation bytes past the end read as zero bits.
#[inline]
fn decode_one(src: &[u8], i: usize, out: &mut [u16], o: usize) -> Option<(usize, usize)> {
    let &lead = src.get(i)?;
    // Continuation bytes carry six bits each (valid input always has them).
    let cont = |k: usize| src.get(i + k).map_or(0, |&b| u32::from(b & 0x3F));
    let unit = out.get_mut(o)?;
    Some(if lead < 0x80 {
        *unit = u16::from(lead);
        (1, 1)
    } else if lead < 0xE0 {
        *unit = ((u32::from(lead & 0x1F) << 6) | cont(1)) as u16;
        (2, 1)
    } else if lead < 0xF0 {
        *unit = ((u32::from(lead & 0x0F) << 12) | (cont(1) << 6) | cont(2)) as u16;
        (3, 1)
    } else {
        let scalar = (u32::from(lead & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3);
        let offset = scalar.wrapping_sub(0x1_0000);
        if let Some(pair) = out.get_mut(o..o + 2) {
            pair[0] = (0xD800 | ((offset >> 10) & 0x3FF)) as u16;
            pair[1] = (0xDC00 | (offset & 0x3FF)) as u16;
        }
        (4, 2)
    })
}

/// Sixteen-byte steps of the UTF-8 to UTF-16 work, with SSE2 on x86-64 (part of its baseline):
/// the compiler did not vectorize the portable loops well (measured: ~16 instructions a block
/// for the widening alone, against 5).
#[cfg(target_arch = "x86_64")]
mod block16 {
    use std::arch::x86_64::{
        _mm_loadu_si128, _mm_movemask_epi8, _mm_setzero_si128, _mm_storeu_si128, _mm_unpackhi_epi8,
        _mm_unpacklo_epi8,
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
}

/// The portable form of the x86-64 `block16` (also built for the tests, which compare the two).
#[cfg(not(target_arch = "x86_64"))]
use portable16 as block16;

/// The portable form of `block16`.
#[cfg(any(not(target_arch = "x86_64"), test))]
mod portable16 {
    /// The widening is a loop the compiler vectorizes. The mask is gathered eight bytes at a
    /// time: the top bits, moved to bits `8m`, times a constant whose products land at distinct
    /// bits (no carries), put byte `m`'s bit at bit `56 + m`. Built a bit at a time, inside the
    /// widening loop, the mask took twice as long (a standalone copy of both on x86-64: 5.6 →
    /// 2.7 ns a block).
    pub(super) fn widen(block: &[u8; 16], out: &mut [u16; 16]) -> u32 {
        for (unit, &byte) in out.iter_mut().zip(block) {
            *unit = u16::from(byte);
        }
        let (words, _) = block.as_chunks::<8>();
        words.iter().enumerate().fold(0, |high, (i, word)| {
            let tops = (u64::from_le_bytes(*word) >> 7) & 0x0101_0101_0101_0101;
            let gathered = tops.wrapping_mul(0x0102_0408_1020_4080) >> 56;
            high | ((gathered as u32) << (8 * i))
        })
    }
}

/// The AVX-512 loop: 64 bytes a step while they are ASCII (one load, two widenings), else 32
/// bytes a step read with masked loads (so a text's last block needs no padded copy); every
/// store is masked to exactly the units produced. An ASCII block is one widening. A block of
/// one-, two- and three-byte characters (the common non-ASCII case) is decoded in every lane at
/// once, as if each byte started a character, and the lanes that do start one (every byte but
/// continuation bytes) are compressed together (VBMI2). A four-byte character (two units: a
/// surrogate pair) is decoded alone, the lanes before it still going through the vector path.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::{
        __m256i, __m512i, _mm256_cmpeq_epi8_mask, _mm256_cmpge_epu8_mask, _mm256_maskz_loadu_epi8,
        _mm256_movepi8_mask, _mm256_set1_epi8, _mm512_and_si512, _mm512_castsi512_si256,
        _mm512_cvtepu8_epi16, _mm512_extracti64x4_epi64, _mm512_loadu_si512, _mm512_mask_mov_epi16,
        _mm512_mask_storeu_epi16, _mm512_maskz_compress_epi16, _mm512_movepi8_mask,
        _mm512_or_si512, _mm512_set1_epi16, _mm512_slli_epi16,
    };

    use super::decode_one;

    /// Whether this CPU runs [`convert`].
    pub(super) fn available() -> bool {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vl")
            && std::arch::is_x86_feature_detected!("avx512vbmi2")
            && std::arch::is_x86_feature_detected!("popcnt")
    }

    /// The bytes of `src` from `at` on, up to 32, in a vector (zeros past the end); `at` must be
    /// at most `src.len()`.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    fn load32(src: &[u8], at: usize) -> __m256i {
        let live = src.len().saturating_sub(at);
        let mask = if live >= 32 {
            u32::MAX
        } else {
            (1u32 << live) - 1
        };
        let at = at.min(src.len());
        // SAFETY: `at <= src.len()`, so the pointer is inside `src` or one past its end; the
        // masked load touches only the lanes in `mask`, which are the `min(32, live)` bytes from
        // `at`, all inside `src` (AVX-512 masked loads suppress faults of the other lanes and
        // never access them).
        unsafe { _mm256_maskz_loadu_epi8(mask, src.as_ptr().add(at).cast()) }
    }

    /// Writes the first `count` (at most 32) units of `units` to `out[at..]`; does nothing if
    /// they would not fit.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    fn store_units(out: &mut [u16], at: usize, units: __m512i, count: usize) {
        if count > 32 || at.checked_add(count).is_none_or(|end| end > out.len()) {
            return;
        }
        let mask = if count == 32 {
            u32::MAX
        } else {
            (1u32 << count) - 1
        };
        // SAFETY: `out[at..at + count]` is in bounds (checked above); the masked store writes
        // only those `count` lanes.
        unsafe { _mm512_mask_storeu_epi16(out.as_mut_ptr().add(at).cast(), mask, units) }
    }

    /// See the module documentation; same contract as `super::convert_16`, except that nothing
    /// is written past the units returned. `out` must hold `utf8.len()` units (checked by the
    /// caller, which also reserves the other loops' slack).
    ///
    /// # Safety
    ///
    /// The CPU must support the enabled features ([`available`]).
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi2,popcnt")]
    pub(super) unsafe fn convert(utf8: &[u8], out: &mut [u16]) -> usize {
        let n = utf8.len();
        // Invariant: `o <= i` (every step writes at most as many units as the bytes it passes),
        // so a block's units always fit in `out`, which holds `n` units.
        let (mut i, mut o) = (0, 0);
        while i < n {
            if n - i >= 64 {
                // SAFETY: `i + 64 <= n`: the unaligned 64-byte load stays inside `utf8`.
                let wide = unsafe { _mm512_loadu_si512(utf8.as_ptr().add(i).cast()) };
                if _mm512_movepi8_mask(wide) == 0 {
                    let halves = [
                        _mm512_castsi512_si256(wide),
                        _mm512_extracti64x4_epi64::<1>(wide),
                    ];
                    store_units(out, o, _mm512_cvtepu8_epi16(halves[0]), 32);
                    store_units(out, o + 32, _mm512_cvtepu8_epi16(halves[1]), 32);
                    i += 64;
                    o += 64;
                    continue;
                }
            }
            let mut step = (n - i).min(32);
            let bytes = load32(utf8, i);
            let high = _mm256_movepi8_mask(bytes);
            if high == 0 {
                store_units(out, o, _mm512_cvtepu8_epi16(bytes), step);
                i += step;
                o += step;
                continue;
            }
            let continuation =
                _mm256_cmpeq_epi8_mask(and8(bytes, 0xC0), _mm256_set1_epi8(0x80_u8 as i8));
            let mut starts = lanes(step) & !continuation;
            let four = _mm256_cmpge_epu8_mask(bytes, _mm256_set1_epi8(0xF0_u8 as i8)) & starts;
            if four != 0 {
                // A four-byte character is two units (a surrogate pair), which breaks the
                // one-unit-per-start rule: the lanes before it go through the vector path, the
                // character itself is decoded alone.
                let at = four.trailing_zeros() as usize;
                if at == 0 {
                    let Some((read, written)) = decode_one(utf8, i, out, o) else {
                        return o;
                    };
                    i += read;
                    o += written;
                    continue;
                }
                step = at;
                starts &= lanes(at);
            }
            let b0 = _mm512_cvtepu8_epi16(bytes);
            let b1 = low6(_mm512_cvtepu8_epi16(load32(utf8, (i + 1).min(n))));
            let b2 = low6(_mm512_cvtepu8_epi16(load32(utf8, (i + 2).min(n))));
            let two = _mm512_or_si512(_mm512_slli_epi16::<6>(and16(b0, 0x1F)), b1);
            let three = _mm512_or_si512(
                _mm512_or_si512(
                    _mm512_slli_epi16::<12>(and16(b0, 0x0F)),
                    _mm512_slli_epi16::<6>(b1),
                ),
                b2,
            );
            let lead2 = _mm256_cmpge_epu8_mask(bytes, _mm256_set1_epi8(0xC0_u8 as i8));
            let lead3 = _mm256_cmpge_epu8_mask(bytes, _mm256_set1_epi8(0xE0_u8 as i8));
            let units = _mm512_mask_mov_epi16(_mm512_mask_mov_epi16(b0, lead2, two), lead3, three);
            let count = starts.count_ones() as usize;
            store_units(out, o, _mm512_maskz_compress_epi16(starts, units), count);
            i += step;
            o += count;
        }
        o
    }

    /// The mask of the first `count` (at most 32) lanes.
    #[inline]
    fn lanes(count: usize) -> u32 {
        if count >= 32 {
            u32::MAX
        } else {
            (1u32 << count) - 1
        }
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    fn and8(v: __m256i, mask: u8) -> __m256i {
        std::arch::x86_64::_mm256_and_si256(v, _mm256_set1_epi8(mask as i8))
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    fn and16(v: __m512i, mask: u16) -> __m512i {
        _mm512_and_si512(v, _mm512_set1_epi16(mask as i16))
    }

    /// The six payload bits of continuation bytes (widened to 16-bit lanes).
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    fn low6(v: __m512i) -> __m512i {
        and16(v, 0x3F)
    }
}

/// `text` as UTF-16 units, what a conversion must produce (tests only).
#[cfg(test)]
pub(crate) fn wide(text: &str) -> Vec<u16> {
    text.encode_utf16().collect()
}

/// Texts for the conversion tests here and in `sse.rs`: ASCII, every UTF-8 length, characters
/// across the 16- and 32-byte block edges.
#[cfg(test)]
pub(crate) const TEST_SAMPLES: [&str; 13] = [
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
    "0123456789abcdefé",
    "0123456789abcdef0123456789abcde日本語0123456789abcdef0123456789abcdé😀",
];

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Converts with `converter` into a buffer with a sentinel before and after the room the
    /// contract asks for; checks the result against the standard library and the sentinels.
    fn check(converter: Utf16Converter, text: &str) {
        let room = text.len() + SLACK;
        let mut units = vec![7u16; room + 2];
        let written = converter.convert(text, &mut units[1..=room]);
        let expected = wide(text);
        assert_eq!(written, expected.len(), "{converter:?} {text:?}");
        assert_eq!(&units[1..=written], &expected[..], "{converter:?} {text:?}");
        assert_eq!(units[0], 7);
        assert_eq!(units[room + 1], 7);
    }

    #[test]
    fn every_converter_matches_the_standard_library_on_the_samples() {
        for converter in Utf16Converter::all() {
            for sample in TEST_SAMPLES {
                for start in 0..=sample.len() {
                    if let Some(tail) = sample.get(start..) {
                        check(converter, tail);
                    }
                }
            }
        }
    }

    #[test]
    fn the_avx512_converter_is_chosen_when_the_cpu_has_it() {
        #[cfg(target_arch = "x86_64")]
        assert_eq!(
            Utf16Converter::detect().kernel == Kernel::Avx512,
            avx512::available()
        );
    }

    #[test]
    fn conversion_needs_its_slack() {
        for converter in Utf16Converter::all() {
            let mut units = vec![0u16; 3 + SLACK - 1];
            assert_eq!(converter.convert("abc", &mut units), 0);
            let mut units = vec![0u16; 3 + SLACK];
            assert_eq!(converter.convert("abc", &mut units), 3);
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
            let mut portable = [0u16; 16];
            assert_eq!(portable16::widen(block, &mut portable), high);
            assert_eq!(portable, out);
        }
    }

    #[test]
    fn malformed_utf8_never_overruns() {
        let inputs: [&[u8]; 9] = [
            b"\xF0",
            b"\xF0\x9F",
            b"abc\xF4",
            b"\x80\x80\x80",
            b"\xE6\x97",
            b"0123456789abcdefghijklmnopqrstu\xF0",
            b"0123456789abcdefghijklmnopqrstu\xE6",
            b"\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF",
            b"\xC3\xC3\xC3\xC3\xC3\xC3\xC3\xC3\xC3\xC3\xC3\xC3\xC3\xC3\xC3\xC3\xC3\xC3\xC3\xC3\xC3\xC3\xC3\xC3\xC3\xC3\xC3\xC3\xC3\xC3\xC3\xC3\xC3",
        ];
        for converter in Utf16Converter::all() {
            for input in inputs {
                let room = input.len() + SLACK;
                let mut out = vec![7u16; room + 1];
                let written = converter.convert_bytes(input, &mut out[..room]);
                assert!(written <= room, "{converter:?} {input:?}");
                assert_eq!(out[room], 7, "{converter:?} {input:?}");
            }
        }
    }

    /// Text built from pieces that stress block boundaries: ASCII runs of any length between
    /// characters of every UTF-8 length.
    fn mixed_text() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            "[a-z ]{0,40}",
            Just("é".to_owned()),
            Just("ß".to_owned()),
            Just("\u{7ff}".to_owned()),
            Just("日本語".to_owned()),
            Just("テキスト".to_owned()),
            Just("\u{ffff}".to_owned()),
            Just("🚀".to_owned()),
            Just("\u{10ffff}".to_owned()),
            any::<char>().prop_map(String::from),
        ];
        prop::collection::vec(piece, 0..24).prop_map(|pieces| pieces.concat())
    }

    proptest! {
        #[test]
        fn every_converter_matches_encode_utf16(text in mixed_text()) {
            for converter in Utf16Converter::all() {
                check(converter, &text);
            }
        }

        #[test]
        fn every_converter_matches_encode_utf16_on_any_string(text in any::<String>()) {
            for converter in Utf16Converter::all() {
                check(converter, &text);
            }
        }
    }
}
