//! Exact token counts for the families with an offline vocabulary (feature `exact`), through
//! `tiktoken-rs`, which embeds the `o200k_base` and `cl100k_base` vocabularies.

use super::model::Family;
pub use super::vocabulary::{NoExactTokenizer, has_exact};

/// Counts the tokens of `text` exactly (special-token text is counted as ordinary text).
pub fn count_exact(text: &str, family: Family) -> Result<u64, NoExactTokenizer> {
    Ok(vocabulary(family)?.encode_ordinary(text).len() as u64)
}

/// Counts a text exactly as it arrives, a piece at a time, in memory bounded by the longest
/// stretch of the text without a place to cut it, instead of the whole text and its tokens.
///
/// The text is counted up to the last place where both vocabularies' pre-tokenizers must split
/// whatever surrounds it: after a line feed and before a printable ASCII character other than
/// `/` (a letter, a digit, punctuation: what log lines start with, a timestamp or a `[`). No
/// pre-token of `o200k` or `cl100k` runs from a line break into such a character: a word's or
/// a punctuation run's optional leading character is never `\r` or `\n`, numbers are digits
/// alone, and the whitespace and punctuation pieces that take line breaks end at the last of
/// them (`o200k`'s punctuation piece also takes the `/` after them, hence the exception), so
/// the counts of the two sides add up to the count of the whole. Invalid UTF-8 is replaced as
/// [`String::from_utf8_lossy`] does for the whole text: a line feed always ends a malformed
/// sequence.
pub struct ExactCounter {
    family: Family,
    bpe: &'static tiktoken_rs::CoreBPE,
    /// Bytes not counted yet: everything after the last cut.
    pending: Vec<u8>,
    /// How much of `pending` has been searched for a cut (the search never goes back).
    searched: usize,
    counted: u64,
    /// Uncounted bytes held before a cut is looked for ([`EXACT_FLUSH_BYTES`]; tests lower it).
    flush_at: usize,
    /// Bytes searched for a cut so far: the work the tests hold linear.
    scanned: u64,
}

/// Uncounted bytes held before a cut is looked for; counting tiny pieces would cost a call each.
const EXACT_FLUSH_BYTES: usize = 64 * 1024;

impl ExactCounter {
    /// A counter for `family` (o200k or cl100k).
    pub fn new(family: Family) -> Result<Self, NoExactTokenizer> {
        Ok(Self {
            family,
            bpe: vocabulary(family)?,
            pending: Vec::new(),
            searched: 0,
            counted: 0,
            flush_at: EXACT_FLUSH_BYTES,
            scanned: 0,
        })
    }

    /// Adds the next bytes of the text.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
        if self.pending.len() < self.flush_at {
            return;
        }
        let cut = last_cut(&self.pending, self.searched);
        self.scanned += self.pending.len().saturating_sub(self.searched) as u64;
        // A cut needs the byte after it, so the last byte is searched again with the next feed.
        self.searched = self.pending.len().saturating_sub(1);
        if let Some(cut) = cut {
            self.counted += count_bytes(self.bpe, &self.pending[..cut]);
            self.pending.drain(..cut);
            self.searched = self.pending.len().saturating_sub(1);
        }
    }

    /// The count of the text fed so far, ended where it stands.
    pub fn count(&self) -> u64 {
        self.counted + count_bytes(self.bpe, &self.pending)
    }

    /// Bytes held uncounted (for tests and memory accounting).
    pub fn pending_bytes(&self) -> usize {
        self.pending.len()
    }
}

impl std::fmt::Debug for ExactCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The vocabulary has no `Debug`; its family names it.
        f.debug_struct("ExactCounter")
            .field("family", &self.family)
            .field("pending_bytes", &self.pending.len())
            .field("counted", &self.counted)
            .finish_non_exhaustive()
    }
}

/// The end of the last line feed in `bytes[from..]` that a place to cut follows (see
/// [`ExactCounter`]).
fn last_cut(bytes: &[u8], from: usize) -> Option<usize> {
    let region = bytes.get(from..)?;
    memchr::memrchr_iter(b'\n', region)
        .map(|at| from + at + 1)
        .find(|&cut| bytes.get(cut).is_some_and(|&next| starts_a_cut(next)))
}

/// Whether a line feed followed by `byte` ends every pre-token of both vocabularies.
fn starts_a_cut(byte: u8) -> bool {
    byte.is_ascii_graphic() && byte != b'/'
}

fn count_bytes(bpe: &tiktoken_rs::CoreBPE, bytes: &[u8]) -> u64 {
    bpe.encode_ordinary(&String::from_utf8_lossy(bytes)).len() as u64
}

fn vocabulary(family: Family) -> Result<&'static tiktoken_rs::CoreBPE, NoExactTokenizer> {
    match family {
        Family::O200k => Ok(tiktoken_rs::o200k_base_singleton()),
        Family::Cl100k => Ok(tiktoken_rs::cl100k_base_singleton()),
        other => Err(NoExactTokenizer(other)),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn counts_known_strings() {
        assert_eq!(count_exact("hello world", Family::O200k).unwrap(), 2);
        assert_eq!(count_exact("hello world", Family::Cl100k).unwrap(), 2);
        assert_eq!(count_exact("", Family::O200k).unwrap(), 0);
        assert_eq!(count_exact("<|endoftext|>", Family::Cl100k).unwrap(), 7);
        assert!(count_exact("x", Family::Claude).is_err());
        assert!(ExactCounter::new(Family::ClaudeLegacy).is_err());
    }

    /// Pieces chosen to sit on both sides of a cut: line breaks of every kind before letters,
    /// digits, punctuation, spaces and multibyte text, contractions, and malformed UTF-8.
    fn piece() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            Just(b"\n".to_vec()),
            Just(b"\r\n".to_vec()),
            Just(b"\n\n".to_vec()),
            Just(b" \n".to_vec()),
            Just(b"\t\n  ".to_vec()),
            Just(b"word".to_vec()),
            Just(b"Word".to_vec()),
            Just(b"'s".to_vec()),
            Just(b"'ll".to_vec()),
            Just(b" the".to_vec()),
            Just(b"12345".to_vec()),
            Just(b"{}".to_vec()),
            Just(b"[".to_vec()),
            Just(b"-".to_vec()),
            Just(b"/".to_vec()),
            Just(b"/a".to_vec()),
            Just(b".".to_vec()),
            Just(b"  ".to_vec()),
            Just("\u{4e2d}\u{6587}".as_bytes().to_vec()),
            Just("\u{00e9}t\u{00e9}".as_bytes().to_vec()),
            Just("\u{1f600}".as_bytes().to_vec()),
            Just(b"\xe2\x82".to_vec()),
            Just(b"\xff".to_vec()),
            "[a-zA-Z]{1,12}".prop_map(String::into_bytes),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]

        #[test]
        fn counts_in_pieces_equal_the_count_of_the_whole(
            pieces in proptest::collection::vec(piece(), 0..200),
            feeds in proptest::collection::vec(1usize..64, 1..50),
            flush_at in 1usize..96,
            cl100k in any::<bool>(),
        ) {
            let family = if cl100k { Family::Cl100k } else { Family::O200k };
            let text: Vec<u8> = pieces.concat();
            let whole = count_exact(&String::from_utf8_lossy(&text), family).unwrap();
            let mut counter = ExactCounter::new(family).unwrap();
            counter.flush_at = flush_at;
            let mut rest = &text[..];
            for &size in feeds.iter().cycle() {
                if rest.is_empty() {
                    break;
                }
                let (now, later) = rest.split_at(size.min(rest.len()));
                counter.feed(now);
                prop_assert_eq!(counter.count(), {
                    let fed = text.len() - later.len();
                    count_exact(&String::from_utf8_lossy(&text[..fed]), family).unwrap()
                });
                rest = later;
            }
            prop_assert_eq!(counter.count(), whole);
        }
    }

    #[test]
    fn memory_is_bounded_by_the_longest_stretch_without_a_cut() {
        let line = "Every line of this log starts with a letter, so it can be cut.\n";
        let mut counter = ExactCounter::new(Family::O200k).unwrap();
        let mut whole = String::new();
        for _ in 0..20_000 {
            counter.feed(line.as_bytes());
            whole.push_str(line);
        }
        assert!(counter.pending_bytes() <= EXACT_FLUSH_BYTES + line.len());
        assert!(
            counter.scanned <= 2 * whole.len() as u64,
            "{}",
            counter.scanned
        );
        assert_eq!(counter.count(), count_exact(&whole, Family::O200k).unwrap());
    }

    /// Log lines that start with a timestamp or a bracket are cut too (only lines starting
    /// with a letter were: a log of timestamped lines was held whole).
    #[test]
    fn lines_starting_with_digits_or_punctuation_are_cut() {
        for line in [
            "2026-12-03T23:30:00Z INFO request served in 12 ms\n",
            "[2026-12-03 23:30:00] worker 7 started\n",
        ] {
            for family in [Family::O200k, Family::Cl100k] {
                let mut counter = ExactCounter::new(family).unwrap();
                counter.flush_at = 1024;
                let mut whole = String::new();
                for _ in 0..2_000 {
                    counter.feed(line.as_bytes());
                    whole.push_str(line);
                }
                assert!(counter.pending_bytes() <= 1024 + line.len(), "{line:?}");
                assert_eq!(counter.count(), count_exact(&whole, family).unwrap());
            }
        }
        // A line feed before `/` is no cut: o200k's punctuation piece runs over both (".\n//"
        // is one token, ".\n" and "//" two).
        let text = ".\n//";
        assert_eq!(last_cut(text.as_bytes(), 0), None);
        assert_eq!(count_exact(text, Family::O200k).unwrap(), 1);
        assert_eq!(
            count_exact(".\n", Family::O200k).unwrap() + count_exact("//", Family::O200k).unwrap(),
            2
        );
    }

    #[test]
    fn a_text_without_a_cut_is_searched_once() {
        // One long line fed a byte at a time: each feed searches only the new byte (and the one
        // before it), so this finishes at once instead of rescanning the held bytes per feed.
        let mut counter = ExactCounter::new(Family::Cl100k).unwrap();
        counter.flush_at = 16;
        let line = "0123456789+/".repeat(20_000);
        for byte in line.as_bytes() {
            counter.feed(std::slice::from_ref(byte));
        }
        assert_eq!(counter.pending_bytes(), line.len());
        assert!(
            counter.scanned <= 2 * line.len() as u64,
            "{}",
            counter.scanned
        );
        assert_eq!(counter.count(), count_exact(&line, Family::Cl100k).unwrap());
    }
}
