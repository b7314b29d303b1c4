//! The token estimate of a text that arrives in pieces: a file read block by block, a log on a
//! pipe. Memory stays bounded by the longest line instead of the whole text.

use memchr::{memchr, memrchr};

use super::classes::{ClassCounts, count_classes};
use super::model::{Family, estimate_counts};

/// The longest unfinished line kept whole. A longer line (a base64 blob, minified JSON) is
/// counted in pieces of about this size.
pub const LONGEST_LINE_KEPT: usize = 1 << 20;

/// Estimates the tokens of a text fed in pieces of any size, with the result
/// [`estimate_bytes`](super::estimate_bytes) gives for the whole text.
///
/// A line feed ends every run the class counts look at (words, digits, spaces, punctuation,
/// non-ASCII text), so the counts of the text up to a line feed and of the rest add up to those
/// of the whole. The estimator counts each piece up to its last line feed at once and keeps only
/// the unfinished line. A line longer than [`LONGEST_LINE_KEPT`] is counted in pieces cut at a
/// character boundary, and only there can the result differ from the whole text's: a run cut in
/// two counts as two runs (a token or so per cut, one cut per MiB).
#[derive(Debug, Clone)]
pub struct TextEstimator {
    family: Family,
    counts: ClassCounts,
    /// The unfinished line: bytes after the last line feed seen.
    line: Vec<u8>,
}

impl TextEstimator {
    /// An estimator for `family`, before any text.
    pub fn new(family: Family) -> Self {
        Self {
            family,
            counts: ClassCounts::default(),
            line: Vec::new(),
        }
    }

    /// Adds the next piece of the text.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        if !self.line.is_empty() {
            let Some(end) = memchr(b'\n', bytes) else {
                self.line.extend_from_slice(bytes);
                if self.line.len() > LONGEST_LINE_KEPT {
                    self.count_long_line();
                }
                return;
            };
            self.line.extend_from_slice(&bytes[..=end]);
            self.counts.add(&count_classes(&self.line));
            self.line.clear();
            bytes = &bytes[end + 1..];
        }
        let whole_lines = memrchr(b'\n', bytes).map_or(0, |last| last + 1);
        if whole_lines > 0 {
            self.counts.add(&count_classes(&bytes[..whole_lines]));
        }
        self.line.extend_from_slice(&bytes[whole_lines..]);
        if self.line.len() > LONGEST_LINE_KEPT {
            self.count_long_line();
        }
    }

    /// Counts all of the kept line but its last (possibly incomplete) character.
    fn count_long_line(&mut self) {
        let cut = char_boundary_before(&self.line, self.line.len().saturating_sub(1));
        if cut == 0 {
            return;
        }
        self.counts.add(&count_classes(&self.line[..cut]));
        self.line.drain(..cut);
    }

    /// The class counts of the text so far.
    pub fn counts(&self) -> ClassCounts {
        let mut counts = self.counts;
        if !self.line.is_empty() {
            counts.add(&count_classes(&self.line));
        }
        counts
    }

    /// The estimate of the text so far: 0 for no text, else at least 1.
    pub fn estimate(&self) -> u64 {
        let counts = self.counts();
        if counts.bytes == 0 {
            return 0;
        }
        (estimate_counts(&counts, self.family).ceil() as u64).max(1)
    }

    /// The bytes kept for the unfinished line (at most about [`LONGEST_LINE_KEPT`] plus the
    /// last piece fed).
    pub fn pending_bytes(&self) -> usize {
        self.line.len()
    }
}

/// The largest index `≤ end` of `bytes` that does not fall inside a UTF-8 sequence (a byte that
/// is not a continuation byte, looking back at most three bytes); `end` itself when the bytes
/// before it are not UTF-8 anyway.
fn char_boundary_before(bytes: &[u8], end: usize) -> usize {
    let is_continuation = |b: u8| b & 0xC0 == 0x80;
    let mut cut = end;
    while cut > 0 && end - cut < 4 && cut < bytes.len() && is_continuation(bytes[cut]) {
        cut -= 1;
    }
    if cut < bytes.len() && is_continuation(bytes[cut]) {
        end
    } else {
        cut
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::tokens::estimate_bytes;
    use proptest::prelude::*;

    fn fed(text: &[u8], cuts: &[usize], family: Family) -> TextEstimator {
        let mut estimator = TextEstimator::new(family);
        let mut start = 0;
        for &cut in cuts {
            let cut = cut.clamp(start, text.len());
            estimator.feed(&text[start..cut]);
            start = cut;
        }
        estimator.feed(&text[start..]);
        estimator
    }

    fn piece() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("\n".to_owned()),
            Just("\r\n".to_owned()),
            Just("  ".to_owned()),
            Just("\t".to_owned()),
            "[a-zA-Z]{1,12}",
            "[0-9a-f]{1,40}",
            "[A-Za-z0-9+/=]{1,80}",
            "[{}\\[\\]\":,.;!?()<>=_*#-]{1,4}",
            "[а-яА-ЯёіїєґђћјљњЎ]{1,8}",
            "[一-龥ぁ-んァ-ン가-힣]{1,8}",
            "[àéèüößçñøåčšžłőű]{1,4}",
            "[😀-🙏€™—“”]{1,3}",
        ]
    }

    proptest! {
        /// Any pieces give the counts, and so the estimate, of the whole text.
        #[test]
        fn pieces_add_up_to_the_whole(
            parts in prop::collection::vec(piece(), 0..60),
            cuts in prop::collection::vec(0usize..2000, 0..12),
        ) {
            let text = parts.concat();
            let mut cuts = cuts;
            cuts.sort_unstable();
            let estimator = fed(text.as_bytes(), &cuts, Family::Claude);
            prop_assert_eq!(estimator.counts(), count_classes(text.as_bytes()));
            for family in crate::tokens::FAMILIES {
                let estimator = fed(text.as_bytes(), &cuts, family);
                prop_assert_eq!(estimator.estimate(), estimate_bytes(text.as_bytes(), family));
            }
        }
    }

    proptest! {
        /// Bytes that are not UTF-8 add up too (binary files, a log with a stray byte).
        #[test]
        fn arbitrary_bytes_add_up_to_the_whole(
            bytes in prop::collection::vec(
                prop_oneof![Just(b'\n'), Just(0x80u8), Just(0xE4u8), Just(0xF0u8), any::<u8>()],
                0..400,
            ),
            cuts in prop::collection::vec(0usize..400, 0..12),
        ) {
            let mut cuts = cuts;
            cuts.sort_unstable();
            let estimator = fed(&bytes, &cuts, Family::Claude);
            prop_assert_eq!(estimator.counts(), count_classes(&bytes));
        }
    }

    #[test]
    fn nothing_fed_is_zero_tokens() {
        let mut estimator = TextEstimator::new(Family::O200k);
        assert_eq!(estimator.estimate(), 0);
        estimator.feed(b"");
        assert_eq!(estimator.estimate(), 0);
        estimator.feed(b"x");
        assert_eq!(estimator.estimate(), 1);
    }

    /// A line without end is not kept whole: the memory held stays near the limit, and the
    /// estimate stays within a token per cut of the whole text's.
    #[test]
    fn a_line_without_end_is_counted_in_bounded_pieces() {
        let block: Vec<u8> = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODkrLw€"
            .bytes()
            .cycle()
            .take(64 * 1024 + 7)
            .collect();
        let mut estimator = TextEstimator::new(Family::Cl100k);
        let mut whole = Vec::new();
        for _ in 0..80 {
            estimator.feed(&block);
            whole.extend_from_slice(&block);
            assert!(
                estimator.pending_bytes() <= LONGEST_LINE_KEPT + block.len(),
                "{}",
                estimator.pending_bytes()
            );
        }
        let exact = estimate_bytes(&whole, Family::Cl100k);
        let pieces = estimator.estimate();
        let cuts = (whole.len() / LONGEST_LINE_KEPT) as u64;
        assert!(
            pieces.abs_diff(exact) <= 2 * cuts + 1,
            "{pieces} vs {exact}"
        );
        assert_eq!(estimator.counts().bytes, whole.len() as u64);
    }

    #[test]
    fn long_lines_are_cut_between_characters() {
        let text = "ж".repeat(10);
        let bytes = text.as_bytes();
        for end in 0..=bytes.len() {
            let cut = char_boundary_before(bytes, end);
            assert!(text.is_char_boundary(cut), "{end} → {cut}");
            assert!(cut <= end && end - cut <= 1);
        }
        // Not UTF-8: a run of continuation bytes is cut where asked.
        assert_eq!(char_boundary_before(&[0x80; 10], 6), 6);
    }
}
