//! Finding the next CR or LF: the parser's hot loop. The same pass notes whether the bytes
//! before the line end are all ASCII, so that most values need no separate UTF-8 check.

/// The result of scanning for a line end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LineScan {
    /// The offset of the first CR or LF, if any.
    pub(crate) end: Option<usize>,
    /// Every byte before `end` (before the end of the haystack when there is none) is ASCII.
    pub(crate) ascii: bool,
}

/// A CR/LF searcher built once per parser (the CPU-feature check happens once, not per line,
/// which matters because SSE lines are short). On x86-64 with AVX2 it is a fused search that
/// also ORs the bytes it passes to report whether they were all ASCII; elsewhere it is
/// `memchr::memchr2` followed by an ASCII check of the line.
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

    /// Finds the first CR or LF in `haystack` and whether the bytes before it are ASCII.
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

/// The portable search: `memchr2`, then an ASCII check of the bytes before the line end.
fn scan_portable(haystack: &[u8]) -> LineScan {
    let end = memchr::memchr2(b'\r', b'\n', haystack);
    let before = haystack
        .get(..end.unwrap_or(haystack.len()))
        .unwrap_or(haystack);
    LineScan {
        end,
        ascii: before.is_ascii(),
    }
}

/// A byte-at-a-time search for short haystacks, where vector set-up costs more than it saves.
#[inline]
fn scan_bytes(haystack: &[u8]) -> LineScan {
    let mut high = 0u8;
    for (i, &byte) in haystack.iter().enumerate() {
        if byte == b'\r' || byte == b'\n' {
            return LineScan {
                end: Some(i),
                ascii: high < 0x80,
            };
        }
        high |= byte;
    }
    LineScan {
        end: None,
        ascii: high < 0x80,
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
    /// high-bit mask of this block and `seen_high` whether an earlier block had a high byte.
    #[inline]
    fn found(offset: usize, eol: u32, high: u32, seen_high: bool) -> LineScan {
        let bit = eol.trailing_zeros();
        // Bits below the line end (`bit` < 32 because `eol` is not zero).
        let before = (1u32 << bit) - 1;
        LineScan {
            end: Some(offset + bit as usize),
            ascii: !seen_high && high & before == 0,
        }
    }

    /// The fused CR/LF + ASCII search.
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
        let mut high_acc = _mm256_setzero_si256();
        // Lines are mostly short: single blocks first, then four blocks per step for long lines.
        while offset + 32 <= len {
            let v = load(offset);
            let (eol, high) = masks(v);
            if eol != 0 {
                return found(offset, eol, high, _mm256_movemask_epi8(high_acc) != 0);
            }
            high_acc = _mm256_or_si256(high_acc, v);
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
            high_acc = _mm256_or_si256(
                high_acc,
                _mm256_or_si256(_mm256_or_si256(a, b), _mm256_or_si256(c, d)),
            );
            offset += 128;
        }
        while offset + 32 <= len {
            let v = load(offset);
            let (eol, high) = masks(v);
            if eol != 0 {
                return found(offset, eol, high, _mm256_movemask_epi8(high_acc) != 0);
            }
            high_acc = _mm256_or_si256(high_acc, v);
            offset += 32;
        }
        if offset < len {
            // The last block overlaps bytes already seen: shift its masks past them.
            let seen = 32 - (len - offset);
            let (eol, high) = masks(load(len - 32));
            let (eol, high) = (eol >> seen, high >> seen);
            if eol != 0 {
                return found(offset, eol, high, _mm256_movemask_epi8(high_acc) != 0);
            }
            return LineScan {
                end: None,
                ascii: high == 0 && _mm256_movemask_epi8(high_acc) == 0,
            };
        }
        LineScan {
            end: None,
            ascii: _mm256_movemask_epi8(high_acc) == 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(hay: &[u8]) -> LineScan {
        let end = hay.iter().position(|b| *b == b'\r' || *b == b'\n');
        LineScan {
            end,
            ascii: hay[..end.unwrap_or(hay.len())].is_ascii(),
        }
    }

    #[test]
    fn agrees_with_the_reference_everywhere() {
        let finder = LineEndFinder::new();
        for len in 0..300 {
            let plain = vec![b'a'; len];
            assert_eq!(finder.scan(&plain), reference(&plain), "len {len}");
            assert_eq!(scan_portable(&plain), reference(&plain));
            for pos in 0..len {
                for byte in [b'\r', b'\n', 0xC3, 0x80, 0xFF] {
                    let mut hay = plain.clone();
                    hay[pos] = byte;
                    assert_eq!(finder.scan(&hay), reference(&hay), "len {len} pos {pos}");
                    assert_eq!(scan_portable(&hay), reference(&hay));
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
                    assert_eq!(finder.scan(&hay), reference(&hay), "{len} {end} {high}");
                }
            }
        }
    }
}
