//! Finding the next CR or LF: the parser's hot loop.

/// A CR/LF searcher built once per parser. On x86-64 with AVX2 it keeps the prepared AVX2
/// searcher, which skips `memchr2`'s per-call CPU-feature dispatch and needle set-up — a
/// measurable share of the work when lines are short, as SSE lines are (callgrind figures in
/// BENCHMARKS.md). Elsewhere it is `memchr::memchr2`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LineEndFinder {
    #[cfg(target_arch = "x86_64")]
    avx2: Option<memchr::arch::x86_64::avx2::memchr::Two>,
}

impl LineEndFinder {
    pub(crate) fn new() -> Self {
        Self {
            #[cfg(target_arch = "x86_64")]
            avx2: memchr::arch::x86_64::avx2::memchr::Two::new(b'\r', b'\n'),
        }
    }

    /// The offset of the first CR or LF in `haystack`.
    #[inline]
    pub(crate) fn find(&self, haystack: &[u8]) -> Option<usize> {
        #[cfg(target_arch = "x86_64")]
        if let Some(searcher) = &self.avx2 {
            return searcher.find(haystack);
        }
        memchr::memchr2(b'\r', b'\n', haystack)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_memchr2_everywhere() {
        let finder = LineEndFinder::new();
        for len in 0..200 {
            for pos in 0..len {
                for byte in [b'\r', b'\n'] {
                    let mut hay = vec![b'a'; len];
                    hay[pos] = byte;
                    assert_eq!(finder.find(&hay), Some(pos));
                    assert_eq!(finder.find(&hay[pos + 1..]), None);
                }
            }
        }
    }
}
