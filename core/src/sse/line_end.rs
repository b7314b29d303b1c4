//! Finding the next CR or LF: the parser's hot loop. The same pass notes where the first
//! non-ASCII byte before the line end is, so that most values need no UTF-8 check and the
//! others only a partial one.

/// The result of scanning for a line end. Two plain words (returned in registers, which
/// matters at one call per line) with sentinels instead of `Option`s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LineScan {
    /// The offset of the first CR or LF; the haystack's length when there is none.
    end: usize,
    /// A position at or before the first non-ASCII byte before `end`, with only ASCII bytes
    /// before it (so UTF-8 validation may start there); `LineScan::ASCII` when every byte
    /// before `end` is ASCII.
    first_high: usize,
}

impl LineScan {
    const ASCII: usize = usize::MAX;

    /// The offset of the line end, if the haystack (of `haystack_len` bytes) holds one.
    #[inline]
    pub(crate) fn end(self, haystack_len: usize) -> Option<usize> {
        (self.end < haystack_len).then_some(self.end)
    }

    /// Where UTF-8 validation of the bytes before the line end must start (every byte before
    /// it is ASCII), or `None` when they are all ASCII.
    #[inline]
    pub(crate) fn first_high(self) -> Option<usize> {
        (self.first_high != Self::ASCII).then_some(self.first_high)
    }
}

/// A CR/LF searcher built once per parser (the CPU-feature check happens once, not per line,
/// which matters because SSE lines are short). On x86-64 with AVX2 it is a fused search that
/// also notes the first non-ASCII byte it passes; elsewhere it is `memchr::memchr2` followed by
/// an ASCII check of the line.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LineEndFinder {
    #[cfg(target_arch = "x86_64")]
    avx2: bool,
}

impl LineEndFinder {
    pub(crate) fn new() -> Self {
        Self {
            #[cfg(target_arch = "x86_64")]
            avx2: std::arch::is_x86_feature_detected!("avx2"),
        }
    }

    /// [`scan`](Self::scan) of `chunk[pos..]` (offsets relative to `pos`). Near the chunk's end,
    /// where fewer than 32 bytes are left, it reads the chunk's last 32 bytes in one vector
    /// instead of going byte by byte.
    #[inline]
    pub(crate) fn scan_at(&self, chunk: &[u8], pos: usize) -> LineScan {
        #[cfg(target_arch = "x86_64")]
        if self.avx2 && chunk.len() >= 32 && chunk.len() - pos < 32 && pos < chunk.len() {
            // SAFETY: AVX2 is present (`new`), `chunk` has at least 32 bytes and `pos` lies in
            // its last 32.
            return unsafe { avx2::scan_tail(chunk, pos) };
        }
        self.scan(chunk.get(pos..).unwrap_or_default())
    }

    /// Finds the first CR or LF in `haystack` and the first non-ASCII byte before it.
    #[inline]
    pub(crate) fn scan(&self, haystack: &[u8]) -> LineScan {
        #[cfg(target_arch = "x86_64")]
        if self.avx2 {
            // SAFETY: `avx2` is true only when the CPU reported AVX2 support (`new`).
            return unsafe { avx2::scan(haystack) };
        }
        scan_portable(haystack)
    }
}

/// The portable search: `memchr2`, then where the first non-ASCII byte before the line end may
/// be.
fn scan_portable(haystack: &[u8]) -> LineScan {
    let end = memchr::memchr2(b'\r', b'\n', haystack).unwrap_or(haystack.len());
    let before = haystack.get(..end).unwrap_or(haystack);
    LineScan {
        end,
        first_high: first_high_word(before),
    }
}

/// The offset of the first non-ASCII byte of `bytes`, or `LineScan::ASCII`, eight bytes at a
/// time (a byte loop here cost as much as the `memchr2` before it, once per line).
fn first_high_word(bytes: &[u8]) -> usize {
    const HIGH_BITS: u64 = 0x8080_8080_8080_8080;
    let (words, tail) = bytes.as_chunks::<8>();
    for (i, word) in words.iter().enumerate() {
        let high = u64::from_le_bytes(*word) & HIGH_BITS;
        if high != 0 {
            // Little-endian: byte `j` of the word is bits `8j..8j + 8`.
            return 8 * i + (high.trailing_zeros() / 8) as usize;
        }
    }
    match tail.iter().position(|b| !b.is_ascii()) {
        Some(offset) => 8 * words.len() + offset,
        None => LineScan::ASCII,
    }
}

/// A byte-at-a-time search for short haystacks, where vector set-up costs more than it saves.
#[inline]
fn scan_bytes(haystack: &[u8]) -> LineScan {
    let mut first_high = LineScan::ASCII;
    for (i, &byte) in haystack.iter().enumerate() {
        if byte == b'\r' || byte == b'\n' {
            return LineScan { end: i, first_high };
        }
        if byte >= 0x80 && first_high == LineScan::ASCII {
            first_high = i;
        }
    }
    LineScan {
        end: haystack.len(),
        first_high,
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{LineScan, scan_bytes};

    /// One 32-byte block: the CR/LF bit mask and the high-bit (non-ASCII) bit mask.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn masks(v: __m256i) -> (u32, u32) {
        let eol = _mm256_or_si256(
            _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\r' as i8)),
            _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\n' as i8)),
        );
        (
            _mm256_movemask_epi8(eol) as u32,
            _mm256_movemask_epi8(v) as u32,
        )
    }

    /// The result for a block at `offset` whose CR/LF mask `eol` is not zero; `high` holds the
    /// high-bit mask of this block and `first_high` the first non-ASCII position found before
    /// it (`LineScan::ASCII` when none).
    #[inline]
    fn found(offset: usize, eol: u32, high: u32, first_high: usize) -> LineScan {
        let bit = eol.trailing_zeros();
        // High bits below the line end (`bit` < 32 because `eol` is not zero).
        let before = high & ((1u32 << bit) - 1);
        LineScan {
            end: offset + bit as usize,
            first_high: if first_high == LineScan::ASCII && before != 0 {
                offset + before.trailing_zeros() as usize
            } else {
                first_high
            },
        }
    }

    /// Records the first non-ASCII byte of a block at `offset` with high-bit mask `high`.
    #[inline]
    fn note_high(first_high: &mut usize, offset: usize, high: u32) {
        if high != 0 && *first_high == LineScan::ASCII {
            *first_high = offset + high.trailing_zeros() as usize;
        }
    }

    /// The search of `chunk[pos..]` (fewer than 32 bytes) with one load of the chunk's last
    /// 32 bytes, its masks shifted past the bytes before `pos`.
    ///
    /// # Safety
    /// The CPU must support AVX2, `chunk.len() >= 32` and `chunk.len() - 32 <= pos < chunk.len()`.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn scan_tail(chunk: &[u8], pos: usize) -> LineScan {
        let len = chunk.len();
        let rest = len - pos;
        // SAFETY: `len >= 32`, so `len - 32 .. len` lies inside `chunk`.
        let v = unsafe { _mm256_loadu_si256(chunk.as_ptr().add(len - 32).cast()) };
        let (eol, high) = masks(v);
        let skip = 32 - rest;
        let (eol, high) = (eol >> skip, high >> skip);
        if eol != 0 {
            return found(0, eol, high, LineScan::ASCII);
        }
        let mut first_high = LineScan::ASCII;
        note_high(&mut first_high, 0, high);
        LineScan {
            end: rest,
            first_high,
        }
    }

    /// The fused CR/LF + non-ASCII search.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn scan(haystack: &[u8]) -> LineScan {
        let len = haystack.len();
        if len < 32 {
            return scan_bytes(haystack);
        }
        let ptr = haystack.as_ptr();
        let load = |offset: usize| {
            debug_assert!(offset + 32 <= len);
            // SAFETY: every caller passes `offset + 32 <= len`, so the unaligned 32-byte load
            // stays inside `haystack`.
            unsafe { _mm256_loadu_si256(ptr.add(offset).cast()) }
        };
        let mut offset = 0;
        let mut first_high = LineScan::ASCII;
        // Lines are mostly short: single blocks first, then four blocks per step for long lines.
        while offset + 32 <= len {
            let (eol, high) = masks(load(offset));
            if eol != 0 {
                return found(offset, eol, high, first_high);
            }
            note_high(&mut first_high, offset, high);
            offset += 32;
            if offset >= 128 {
                break;
            }
        }
        let cr = _mm256_set1_epi8(b'\r' as i8);
        let lf = _mm256_set1_epi8(b'\n' as i8);
        while offset + 128 <= len {
            let (a, b, c, d) = (
                load(offset),
                load(offset + 32),
                load(offset + 64),
                load(offset + 96),
            );
            let eq = |v| _mm256_or_si256(_mm256_cmpeq_epi8(v, cr), _mm256_cmpeq_epi8(v, lf));
            let any = _mm256_or_si256(_mm256_or_si256(eq(a), eq(b)), _mm256_or_si256(eq(c), eq(d)));
            if _mm256_movemask_epi8(any) != 0 {
                // The line end is in one of these blocks: settle it block by block below.
                break;
            }
            if first_high == LineScan::ASCII {
                let any_high = _mm256_or_si256(_mm256_or_si256(a, b), _mm256_or_si256(c, d));
                if _mm256_movemask_epi8(any_high) != 0 {
                    // The group's start: every byte before it is ASCII.
                    first_high = offset;
                }
            }
            offset += 128;
        }
        while offset + 32 <= len {
            let (eol, high) = masks(load(offset));
            if eol != 0 {
                return found(offset, eol, high, first_high);
            }
            note_high(&mut first_high, offset, high);
            offset += 32;
        }
        if offset < len {
            // The last block overlaps bytes already seen: shift its masks past them.
            let seen = 32 - (len - offset);
            let (eol, high) = masks(load(len - 32));
            let (eol, high) = (eol >> seen, high >> seen);
            if eol != 0 {
                return found(offset, eol, high, first_high);
            }
            note_high(&mut first_high, offset, high);
        }
        LineScan {
            end: len,
            first_high,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The line end and whether the bytes before it are ASCII.
    fn reference(hay: &[u8]) -> (Option<usize>, bool) {
        let end = hay.iter().position(|b| *b == b'\r' || *b == b'\n');
        (end, hay[..end.unwrap_or(hay.len())].is_ascii())
    }

    /// `found` agrees with the reference, and its `first_high` is a valid place to start UTF-8
    /// validation: at or before the first non-ASCII byte, with only ASCII before it.
    fn check(found: LineScan, hay: &[u8]) {
        let (end, ascii) = reference(hay);
        assert_eq!(found.end(hay.len()), end, "{hay:?}");
        assert_eq!(found.first_high().is_none(), ascii, "{hay:?}");
        if let Some(high) = found.first_high() {
            let line = &hay[..end.unwrap_or(hay.len())];
            let first = line.iter().position(|b| !b.is_ascii());
            assert!(first.is_some_and(|first| high <= first), "{hay:?}");
            assert!(hay[..high].is_ascii(), "{hay:?}");
        }
    }

    #[test]
    fn agrees_with_the_reference_everywhere() {
        let finder = LineEndFinder::new();
        for len in 0..300 {
            let plain = vec![b'a'; len];
            check(finder.scan(&plain), &plain);
            check(scan_portable(&plain), &plain);
            for pos in 0..len {
                for byte in [b'\r', b'\n', 0xC3, 0x80, 0xFF] {
                    let mut hay = plain.clone();
                    hay[pos] = byte;
                    check(finder.scan(&hay), &hay);
                    check(scan_portable(&hay), &hay);
                }
            }
        }
    }

    #[test]
    fn high_bytes_after_the_line_end_do_not_count() {
        let finder = LineEndFinder::new();
        for len in [1usize, 31, 32, 33, 100, 128, 129, 200, 300] {
            for end in 0..len {
                for high in 0..len {
                    if high == end {
                        continue;
                    }
                    let mut hay = vec![b'x'; len];
                    hay[end] = b'\n';
                    hay[high] = 0xE4;
                    check(finder.scan(&hay), &hay);
                    // Two non-ASCII bytes: the first one counts.
                    if high + 1 < len && high + 1 != end {
                        hay[high + 1] = 0xE4;
                        check(finder.scan(&hay), &hay);
                    }
                }
            }
        }
    }

    #[test]
    fn scan_at_agrees_with_the_reference_near_the_chunk_end() {
        let finder = LineEndFinder::new();
        for len in 0..80 {
            for special in 0..len {
                for byte in [b'\r', b'\n', 0xC3] {
                    let mut chunk: Vec<u8> = (0..len as u8).map(|i| b'a' + i % 26).collect();
                    chunk[special] = byte;
                    if special + 3 < len {
                        chunk[special + 3] = 0xE4;
                    }
                    for pos in 0..len {
                        check(finder.scan_at(&chunk, pos), &chunk[pos..]);
                    }
                }
            }
        }
    }

    #[test]
    fn finds_the_first_high_byte_exactly_in_short_lines() {
        let finder = LineEndFinder::new();
        let mut hay = vec![b'a'; 200];
        hay[150] = b'\n';
        hay[70] = 0xE4;
        hay[90] = 0xE4;
        assert_eq!(finder.scan(&hay).first_high(), Some(70));
        assert_eq!(scan_portable(&hay).first_high(), Some(70));
    }
}
