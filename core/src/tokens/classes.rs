//! One pass over the bytes of a text, counting the character classes the estimator's model
//! (`model.rs`: linear per kind of text, the kinds gated by count ratios) uses.
//!
//! The text is processed in 64-byte blocks by one of three kernels, picked once per process
//! ([`Kernel::detect`]): AVX-512 where the CPU has AVX-512 BW/VBMI/VBMI2/VPOPCNTDQ and GFNI,
//! else AVX2, else the portable one. The portable and AVX2 kernels turn a block into a few
//! 64-bit masks (bit `i` set when byte `i` is in a class) and count with popcounts, carrying the
//! previous block's masks across block boundaries for the run and transition features (word
//! starts, case changes, long runs, consonant clusters, ...). The portable kernel builds the
//! masks as a bit transpose of per-byte flag bytes (computed with byte arithmetic the compiler
//! vectorizes) and counts them in `Runs::block`; the AVX2 kernel builds
//! them with vector compares and `vpmovmskb` and counts them in its own tuned copy of that
//! arithmetic (run lengths as chains of `shld` steps that carry each step's previous mask). The
//! AVX-512 kernel (`avx512.rs`) keeps the classes bit-sliced in class bytes instead and counts
//! run features for all classes at once with byte moves and carry-save counters.
//!
//! Non-ASCII work (UTF-8 leads by script, Cyrillic letter pairs, rare ideographs, the scripts of
//! `other2`/`other3` characters: `scripts.rs`) is done only
//! for blocks that contain a byte `>= 0x80`: the vector kernels mark those blocks and visit them
//! after each group of 64 blocks; the portable kernel counts lead bytes by range with a byte
//! histogram of those blocks. All kernels give identical counts; tests and the fuzz target check that against a
//! byte-at-a-time reference.

use std::sync::OnceLock;

use super::scripts::{PendingLeads, RARE_SCRIPT, SCRIPT_COUNT};

/// Number of features in [`ClassCounts::features`].
pub const FEATURE_COUNT: usize = 30;

/// Feature names, in the order of [`ClassCounts::features`] (used by the fitting tool and in
/// generated coefficient tables).
pub const FEATURE_NAMES: [&str; FEATURE_COUNT] = [
    "word_starts",
    "upper",
    "case_changes",
    "digits",
    "digit_runs",
    "alnum_switches",
    "long_run",
    "long_word",
    "consonant_runs",
    "spaces",
    "space_runs",
    "newlines",
    "punct",
    "json",
    "punct_runs",
    "cjk",
    "kana",
    "hangul",
    "cyrillic",
    "cyrillic_ext",
    "cyrillic_upper",
    "latin1",
    "latin_ext",
    "other2",
    "other3",
    "four",
    "high_runs",
    "rare3",
    "rare_letters",
    "th_pairs",
];

/// Index of `th_pairs` in [`FEATURE_NAMES`]: the one count whose price may be negative (see
/// [`ClassCounts::th_pairs`]).
pub const TH_PAIRS_FEATURE: usize = 29;

/// Alphanumeric runs longer than this many bytes count their further bytes as `long_run`
/// (base64, hex digests, minified identifiers): BPE vocabularies have few merges for them.
pub const LONG_RUN: u32 = 16;

/// Letters from this position on in a run of letters count as `long_word`.
pub const LONG_WORD: u32 = 8;

/// Consonants from this position on in a run of consonants count as `consonant_runs`...
pub const CONSONANT_RUN: u32 = 3;
/// ...up to this position: the feature measures clusters; longer runs (`xxxxxxxx`) are long runs
/// of letters, which `long_word` and `long_run` price.
pub const CONSONANT_RUN_END: u32 = 6;

/// Whether `b` is an ASCII vowel (`y` included), either case.
pub const fn is_vowel(b: u8) -> bool {
    matches!(b | 0x20, b'a' | b'e' | b'i' | b'o' | b'u' | b'y')
}

/// Whether `b` is one of the letters `k v z q`, either case ([`ClassCounts::rare_letters`]).
pub const fn is_rare_letter(b: u8) -> bool {
    matches!(b, b'k' | b'v' | b'z' | b'q' | b'K' | b'V' | b'Z' | b'Q')
}

/// Character-class counts of a text: the estimator's input.
///
/// Counts of multibyte characters are counts of UTF-8 lead bytes in the given range (continuation
/// bytes are not counted separately).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassCounts {
    /// Total number of bytes.
    pub bytes: u64,
    /// ASCII lowercase letters.
    pub lower: u64,
    /// ASCII uppercase letters.
    pub upper: u64,
    /// ASCII digits.
    pub digits: u64,
    /// Spaces, tabs and carriage returns.
    pub spaces: u64,
    /// Line feeds.
    pub newlines: u64,
    /// JSON structural characters: `{ } [ ] " : ,`.
    pub json: u64,
    /// Other ASCII bytes (punctuation, symbols, control characters).
    pub punct: u64,
    /// Starts of runs of ASCII letters (words).
    pub word_starts: u64,
    /// Starts of runs of digits.
    pub digit_runs: u64,
    /// Starts of runs of punctuation (JSON structural characters included).
    pub punct_runs: u64,
    /// Starts of runs of spaces.
    pub space_runs: u64,
    /// Uppercase letters directly after a lowercase letter (camelCase, base64).
    pub case_changes: u64,
    /// Letter→digit and digit→letter transitions (hex, base64, identifiers).
    pub alnum_switches: u64,
    /// Alphanumeric bytes preceded by at least [`LONG_RUN`]` - 1` alphanumeric bytes.
    pub long_run: u64,
    /// Letters preceded by at least [`LONG_WORD`]` - 1` letters (long words split into several
    /// tokens outside the vocabulary's common words).
    pub long_word: u64,
    /// ASCII consonants (letters other than `a e i o u y`) at positions [`CONSONANT_RUN`] to
    /// [`CONSONANT_RUN_END`] of a run of consonants: clusters that read as abbreviations,
    /// identifiers or foreign words, which vocabularies split more finely than pronounceable
    /// words.
    pub consonant_runs: u64,
    /// CJK ideographs (UTF-8 leads `E4`–`E9`: U+4E00–U+9FFF). The characters of lead `E4`
    /// before them (U+4000–U+4DFF: CJK Extension A and the Yijing hexagram symbols), which the
    /// vocabularies have no tokens for, are told apart by their first continuation byte
    /// ([`rare_block`]) and count as `other3` and in the `rare_script` script count instead.
    pub cjk: u64,
    /// Kana and CJK punctuation (lead `E3`: U+3000–U+33FF). The rest of lead `E3`
    /// (U+3400–U+3FFF: CJK Extension A) counts as `other3` and `rare_script` ([`rare_block`]).
    pub kana: u64,
    /// Hangul syllables and the blocks after them (leads `EA`–`ED`: U+AC00–U+DFFF). The
    /// characters of lead `EA` before the syllables (U+A000–U+ABFF: Yi, Vai, Javanese, Cham,
    /// ...), which the vocabularies have no tokens for, count as `other3` and `rare_script`
    /// ([`rare_block`]): counted as Hangul, Yi was estimated at 0.38 of its o200k count.
    pub hangul: u64,
    /// Cyrillic letters (leads `D0`–`D1`: U+0400–U+047F).
    pub cyrillic: u64,
    /// Cyrillic letters U+0450–U+045F (`ѐ ё ђ ѓ є ѕ і ї ј љ њ ћ ќ ѝ ў џ`): frequent in
    /// Ukrainian, Belarusian, Serbian and Macedonian, which tokenize worse than Russian.
    pub cyrillic_ext: u64,
    /// Uppercase Cyrillic letters U+0400–U+042F (headings in capitals split into many tokens).
    pub cyrillic_upper: u64,
    /// Latin-1 letters and symbols (leads `C2`–`C3`: U+0080–U+00FF; French, German, Spanish...).
    pub latin1: u64,
    /// Latin Extended-A/B (leads `C4`–`C8`: U+0100–U+023F; Czech, Polish, Turkish, Romanian,
    /// Hungarian...), which tokenize worse than Latin-1. The IPA letters of leads `C9`–`CA`
    /// are `other2`, with a script count of their own (`phonetic`).
    pub latin_ext: u64,
    /// Other two-byte characters (Greek, Hebrew, Arabic, ...).
    pub other2: u64,
    /// Other three-byte characters (general punctuation, symbols, fullwidth forms, ...).
    pub other3: u64,
    /// Four-byte characters (emoji, rare ideographs).
    pub four: u64,
    /// Starts of runs of non-ASCII bytes.
    pub high_runs: u64,
    /// Three-byte characters in U+3000–U+DFFF (kana, CJK, hangul) that are not single tokens in
    /// both OpenAI vocabularies ([`is_common3`]): rare and traditional characters cost 2–3 tokens.
    pub rare3: u64,
    /// ASCII letters `k v z q`, either case ([`is_rare_letter`]): rare in English, frequent in
    /// Dutch, German, Slavic and Scandinavian text and in identifiers, which English-centred
    /// vocabularies split more finely. It separates Latin-script languages that have no accents
    /// to count.
    pub rare_letters: u64,
    /// Characters of each script of [`SCRIPT_NAMES`](super::scripts::SCRIPT_NAMES) (a subset
    /// of `other2` and `other3`, told apart by code point: the scripts the vocabularies price
    /// differently although they share UTF-8 leads).
    pub scripts: [u64; SCRIPT_COUNT],
    /// ASCII `t` or `T` directly followed by `h`: the English digraph, a marker of English among
    /// Latin-script text. The vocabularies, English-centred, hold common English words whole
    /// and split Italian, Dutch or German words of the same letter counts more finely
    /// (claude-legacy: 4.7 bytes per token on the GPL, 2.7 on an Italian man page), which no
    /// per-letter count tells apart; this count lets the model price English letters lower.
    pub th_pairs: u64,
}

// `Default` by hand: the standard library derives it for arrays of at most 32 elements, and
// `scripts` has more.
impl Default for ClassCounts {
    fn default() -> Self {
        Self {
            bytes: 0,
            lower: 0,
            upper: 0,
            digits: 0,
            spaces: 0,
            newlines: 0,
            json: 0,
            punct: 0,
            word_starts: 0,
            digit_runs: 0,
            punct_runs: 0,
            space_runs: 0,
            case_changes: 0,
            alnum_switches: 0,
            long_run: 0,
            long_word: 0,
            consonant_runs: 0,
            cjk: 0,
            kana: 0,
            hangul: 0,
            cyrillic: 0,
            cyrillic_ext: 0,
            cyrillic_upper: 0,
            latin1: 0,
            latin_ext: 0,
            other2: 0,
            other3: 0,
            four: 0,
            high_runs: 0,
            rare3: 0,
            rare_letters: 0,
            scripts: [0; SCRIPT_COUNT],
            th_pairs: 0,
        }
    }
}

impl ClassCounts {
    /// The model's feature vector, in the order of [`FEATURE_NAMES`].
    pub fn features(&self) -> [f64; FEATURE_COUNT] {
        [
            self.word_starts as f64,
            self.upper as f64,
            self.case_changes as f64,
            self.digits as f64,
            self.digit_runs as f64,
            self.alnum_switches as f64,
            self.long_run as f64,
            self.long_word as f64,
            self.consonant_runs as f64,
            self.spaces as f64,
            self.space_runs as f64,
            self.newlines as f64,
            self.punct as f64,
            self.json as f64,
            self.punct_runs as f64,
            self.cjk as f64,
            self.kana as f64,
            self.hangul as f64,
            self.cyrillic as f64,
            self.cyrillic_ext as f64,
            self.cyrillic_upper as f64,
            self.latin1 as f64,
            self.latin_ext as f64,
            self.other2 as f64,
            self.other3 as f64,
            self.four as f64,
            self.high_runs as f64,
            self.rare3 as f64,
            self.rare_letters as f64,
            self.th_pairs as f64,
        ]
    }

    /// Adds another text's counts (as if the texts were separated by a class boundary).
    pub fn add(&mut self, other: &ClassCounts) {
        self.bytes += other.bytes;
        self.lower += other.lower;
        self.upper += other.upper;
        self.digits += other.digits;
        self.spaces += other.spaces;
        self.newlines += other.newlines;
        self.json += other.json;
        self.punct += other.punct;
        self.word_starts += other.word_starts;
        self.digit_runs += other.digit_runs;
        self.punct_runs += other.punct_runs;
        self.space_runs += other.space_runs;
        self.case_changes += other.case_changes;
        self.alnum_switches += other.alnum_switches;
        self.long_run += other.long_run;
        self.long_word += other.long_word;
        self.consonant_runs += other.consonant_runs;
        self.cjk += other.cjk;
        self.kana += other.kana;
        self.hangul += other.hangul;
        self.cyrillic += other.cyrillic;
        self.cyrillic_ext += other.cyrillic_ext;
        self.cyrillic_upper += other.cyrillic_upper;
        self.latin1 += other.latin1;
        self.latin_ext += other.latin_ext;
        self.other2 += other.other2;
        self.other3 += other.other3;
        self.four += other.four;
        self.high_runs += other.high_runs;
        self.rare3 += other.rare3;
        self.rare_letters += other.rare_letters;
        self.th_pairs += other.th_pairs;
        for (mine, theirs) in self.scripts.iter_mut().zip(&other.scripts) {
            *mine += theirs;
        }
    }
}

/// Per-byte classes, counted without regard to neighbours. The ASCII ones are disjoint; the
/// `GE_*` ones are thresholds (`GE_C0` counts `C0`–`FF`), the script ones subsets of them.
pub(super) mod byte_class {
    pub const LOWER: usize = 0;
    pub const UPPER: usize = 1;
    pub const DIGIT: usize = 2;
    pub const SPACE: usize = 3;
    pub const NEWLINE: usize = 4;
    pub const JSON: usize = 5;
    pub const RARE_LETTER: usize = 6;
    pub const HIGH: usize = 7;
    pub const GE_C0: usize = 8;
    pub const GE_E0: usize = 9;
    pub const GE_F0: usize = 10;
    pub const CJK: usize = 11;
    pub const KANA: usize = 12;
    pub const HANGUL: usize = 13;
    pub const CYRILLIC: usize = 14;
    pub const LATIN1: usize = 15;
    pub const LATIN_EXT: usize = 16;
    /// Number of classes.
    pub const COUNT: usize = 17;
}

/// Whether byte `b` is in per-byte class `class` (the definition both kernels implement).
pub(super) const fn in_byte_class(b: u8, class: usize) -> bool {
    match class {
        byte_class::LOWER => b.is_ascii_lowercase(),
        byte_class::UPPER => b.is_ascii_uppercase(),
        byte_class::DIGIT => b.is_ascii_digit(),
        byte_class::SPACE => b == b' ' || b == b'\t' || b == b'\r',
        byte_class::NEWLINE => b == b'\n',
        byte_class::JSON => matches!(b, b'{' | b'}' | b'[' | b']' | b'"' | b':' | b','),
        byte_class::RARE_LETTER => is_rare_letter(b),
        byte_class::HIGH => b >= 0x80,
        byte_class::GE_C0 => b >= 0xC0,
        byte_class::GE_E0 => b >= 0xE0,
        byte_class::GE_F0 => b >= 0xF0,
        byte_class::CJK => b >= 0xE4 && b <= 0xE9,
        byte_class::KANA => b == 0xE3,
        byte_class::HANGUL => b >= 0xEA && b <= 0xED,
        byte_class::CYRILLIC => b == 0xD0 || b == 0xD1,
        byte_class::LATIN1 => b == 0xC2 || b == 0xC3,
        byte_class::LATIN_EXT => b >= 0xC4 && b <= 0xC8,
        _ => false,
    }
}

/// Lead bytes of the three-byte characters looked up in the [`is_common3`] bitmap.
const fn is_east_asian_lead(b: u8) -> bool {
    b >= 0xE3 && b <= 0xED
}

/// Where [`rare_block`] finds a character: not in a rare block.
pub const NOT_RARE: usize = 0;
/// Where [`rare_block`] finds a character: CJK Extension A of lead `E3` (U+3400–U+3FFF), which
/// the byte classes count as kana.
pub const RARE_OF_KANA: usize = 1;
/// Where [`rare_block`] finds a character: CJK Extension A of lead `E4` and the Yijing hexagram
/// symbols (U+4000–U+4DFF), which the byte classes count as CJK.
pub const RARE_OF_CJK: usize = 2;
/// Where [`rare_block`] finds a character: U+A000–U+ABFF (Yi, Vai, Javanese, Cham, ...), which
/// the byte classes count as Hangul.
pub const RARE_OF_HANGUL: usize = 3;

/// The rare blocks' bytes, read by [`rare_block`] and by the AVX-512 kernel's lookup: each
/// block's index ([`RARE_OF_KANA`], ...), its UTF-8 lead, and the first and last first
/// continuation byte of its characters.
pub const RARE_BLOCK_BYTES: [(usize, u8, u8, u8); 3] = [
    // U+3400–U+3FFF: CJK Extension A, lead `E3` (from `E3 90 80`).
    (RARE_OF_KANA, 0xE3, 0x90, 0xBF),
    // U+4000–U+4DFF: the rest of CJK Extension A and the hexagrams, lead `E4` (to `E4 B7 BF`).
    (RARE_OF_CJK, 0xE4, 0x80, 0xB7),
    // U+A000–U+ABFF, lead `EA` (the Hangul syllables start at U+AC00, `EA B0 80`).
    (RARE_OF_HANGUL, 0xEA, 0x80, 0xAF),
];

/// Whether the first three bytes of `word` (little-endian: the lead in the low byte) are a
/// complete character of a block the vocabularies have no tokens for although its lead is
/// kana's, CJK's or Hangul's, and which of those classes counts it: [`RARE_OF_KANA`],
/// [`RARE_OF_CJK`], [`RARE_OF_HANGUL`] or [`NOT_RARE`].
///
/// - CJK Unified Ideographs Extension A (U+3400–U+4DBF: lead `E3` from first continuation
///   `90`, lead `E4` up to `B6`) and the Yijing hexagram symbols after it (U+4DC0–U+4DFF, `E4
///   B7`): rare ideographs of names and classical text, and symbols, a token per byte in every
///   vocabulary. Counted as kana and CJK, a text of them was estimated at 0.41 of its o200k
///   count.
/// - U+A000–U+ABFF (lead `EA`, first continuation below `B0`; the Hangul syllables start at
///   U+AC00, `EA B0 80`). Counted as Hangul, Yi was estimated at 0.38 of its o200k count.
///
/// The bytes are [`RARE_BLOCK_BYTES`].
///
/// The kernels count these characters apart while they look the east-Asian leads up in the
/// [`is_common3`] bitmap (none of them is common: a test checks the bitmap), and move them to
/// `other3` and the `rare_script` count once the byte classes are applied.
#[inline(always)]
pub const fn rare_block(word: u32) -> usize {
    let complete = word & 0x00C0_C0F0 == 0x0080_80E0;
    let [lead, b1, _, _] = word.to_le_bytes();
    // Branch-free: at most one block matches, and the blocks' indexes are their sum.
    let mut block = NOT_RARE;
    let mut i = 0;
    while i < RARE_BLOCK_BYTES.len() {
        let (index, block_lead, first, last) = RARE_BLOCK_BYTES[i];
        let within = complete & (lead == block_lead) & (b1 >= first) & (b1 <= last);
        block += within as usize * index;
        i += 1;
    }
    block
}

/// Characters of the rare blocks ([`rare_block`]), by the class that counted them: index
/// [`RARE_OF_KANA`], [`RARE_OF_CJK`] or [`RARE_OF_HANGUL`] (index [`NOT_RARE`] is a tally of
/// the others, never read).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RareBlocks(pub(crate) [u64; 4]);

impl RareBlocks {
    /// Adds `other`'s characters to these.
    pub(crate) fn add(&mut self, other: &RareBlocks) {
        for (count, more) in self.0.iter_mut().zip(other.0) {
            *count += more;
        }
    }

    /// All characters of the rare blocks.
    pub(crate) fn total(&self) -> u64 {
        self.0[RARE_OF_KANA] + self.0[RARE_OF_CJK] + self.0[RARE_OF_HANGUL]
    }

    /// Moves the characters from the classes that counted them to `other3` and the
    /// `rare_script` script count, once the byte classes are applied.
    pub(crate) fn move_to_rare_script(&self, c: &mut ClassCounts) {
        let [_, kana, cjk, hangul] = self.0;
        debug_assert!(c.kana >= kana && c.cjk >= cjk && c.hangul >= hangul);
        c.kana = c.kana.saturating_sub(kana);
        c.cjk = c.cjk.saturating_sub(cjk);
        c.hangul = c.hangul.saturating_sub(hangul);
        let total = self.total();
        c.other3 += total;
        c.scripts[RARE_SCRIPT] += total;
    }
}

/// Totals of the per-byte classes, turned into the per-byte fields of [`ClassCounts`].
fn apply_byte_classes(c: &mut ClassCounts, t: &[u64; byte_class::COUNT]) {
    use byte_class::*;
    c.lower = t[LOWER];
    c.upper = t[UPPER];
    c.digits = t[DIGIT];
    c.spaces = t[SPACE];
    c.newlines = t[NEWLINE];
    c.json = t[JSON];
    c.rare_letters = t[RARE_LETTER];
    let classified = t[LOWER] + t[UPPER] + t[DIGIT] + t[SPACE] + t[NEWLINE] + t[JSON] + t[HIGH];
    c.punct = c.bytes.saturating_sub(classified);
    c.cjk = t[CJK];
    c.kana = t[KANA];
    c.hangul = t[HANGUL];
    c.cyrillic = t[CYRILLIC];
    c.latin1 = t[LATIN1];
    c.latin_ext = t[LATIN_EXT];
    c.four = t[GE_F0];
    c.other3 = (t[GE_E0] - t[GE_F0]) - (t[CJK] + t[KANA] + t[HANGUL]);
    c.other2 = (t[GE_C0] - t[GE_E0]) - (t[CYRILLIC] + t[LATIN1] + t[LATIN_EXT]);
}

/// The masks of one block that the run and transition features need (bit `i`: byte `i`).
/// Padding bytes past the end of the text are cleared by the caller.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct RunMasks {
    lower: u64,
    upper: u64,
    digit: u64,
    space: u64,
    /// ASCII bytes that are not letters, digits, spaces or line feeds (JSON punctuation
    /// included).
    punct: u64,
    /// Bytes `>= 0x80`.
    high: u64,
    /// ASCII vowels ([`is_vowel`]).
    vowel: u64,
    /// `t` and `T`.
    t: u64,
    /// `h`.
    h: u64,
}

/// The masks of a block with non-ASCII bytes that the multibyte run features need.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct HighMasks {
    /// `D1` bytes (lead of U+0440–U+047F).
    d1: u64,
    /// Bytes `90`–`9F` (after a `D1`: U+0450–U+045F).
    cont_9x: u64,
    /// `D0` bytes (lead of U+0400–U+043F).
    d0: u64,
    /// Bytes `80`–`AF` (after a `D0`: U+0400–U+042F).
    cont_upper: u64,
    /// Lead bytes `E3`–`ED` (kana, CJK, hangul).
    east_asian: u64,
}

/// How a kernel counts the bits of a mask.
trait PopCount {
    fn pop(x: u64) -> u64;
}

/// `count_ones` as the target compiles it (every target).
struct PortablePop;

impl PopCount for PortablePop {
    #[inline(always)]
    fn pop(x: u64) -> u64 {
        u64::from(x.count_ones())
    }
}

/// Bits of `x` moved up by one, with the previous block's last bit (`prev >> 63`) at bit 0: the
/// class of the byte before each byte.
#[inline(always)]
fn before(x: u64, prev: u64) -> u64 {
    (x << 1) | (prev >> 63)
}

/// Bits of `current` (this block) at which `len` consecutive bits end, looking back into `prev`
/// (`len <= 64`).
#[inline(always)]
fn run_ends(current: u64, prev: u64, len: u32) -> u64 {
    let mut run = (u128::from(current) << 64) | u128::from(prev);
    // After each step, a bit is set where `have` consecutive bits end.
    let mut have = 1;
    while have < len {
        let step = have.min(len - have);
        run &= run << step;
        have += step;
    }
    (run >> 64) as u64
}

/// The run and transition counts of the portable kernel, with the carry state between blocks
/// (the per-byte class totals come from its byte histogram).
///
/// The per-block popcounts of the eleven features are summed in 16-bit fields of three `u64`s
/// (four features each), spilled into `counts` every [`Runs::SPILL_EVERY`] blocks: three
/// additions per block instead of eleven, and nothing for the compiler to turn into vector
/// shuffles.
#[derive(Debug, Default)]
struct Runs {
    counts: ClassCounts,
    packed: [u64; 3],
    pending: u32,
    prev: RunMasks,
}

impl Runs {
    /// Blocks between spills of the packed fields (each block adds at most 64 to a field:
    /// 1023 × 64 < 65536).
    const SPILL_EVERY: u32 = 1023;

    /// Every feature of block `m`.
    #[inline(always)]
    fn block<P: PopCount>(&mut self, m: RunMasks) {
        let pop = P::pop;
        let p = self.prev;
        let letter = m.lower | m.upper;
        let prev_letter = p.lower | p.upper;
        let alnum = letter | m.digit;
        let consonant = letter & !m.vowel;
        let prev_consonant = prev_letter & !p.vowel;
        self.packed[1] += (pop(run_ends(alnum, prev_letter | p.digit, LONG_RUN)) << 32)
            | (pop(run_ends(letter, prev_letter, LONG_WORD)) << 48);
        self.packed[2] += pop(run_ends(consonant, prev_consonant, CONSONANT_RUN)
            & !run_ends(consonant, prev_consonant, CONSONANT_RUN_END + 1));
        self.transitions::<P>(m);
    }

    /// The features of block `m` other than the run lengths (`long_run`, `long_word`,
    /// `consonant_runs`).
    #[inline(always)]
    fn transitions<P: PopCount>(&mut self, m: RunMasks) {
        let pop = P::pop;
        let p = self.prev;
        let letter = m.lower | m.upper;
        let prev_letter = p.lower | p.upper;
        let letter_before = before(letter, prev_letter);
        let digit_before = before(m.digit, p.digit);
        let pack = |a: u64, b: u64, c: u64, d: u64| a | (b << 16) | (c << 32) | (d << 48);
        self.packed[0] += pack(
            pop(letter & !letter_before),
            pop(m.digit & !digit_before),
            pop(m.punct & !before(m.punct, p.punct)),
            pop(m.space & !before(m.space, p.space)),
        );
        self.packed[1] += pack(
            pop(m.upper & before(m.lower, p.lower)),
            pop((letter & digit_before) | (m.digit & letter_before)),
            0,
            0,
        );
        self.packed[2] +=
            (pop(m.high & !before(m.high, p.high)) << 16) | (pop(m.h & before(m.t, p.t)) << 32);
        self.prev = m;
        self.pending += 1;
        if self.pending == Self::SPILL_EVERY {
            self.spill();
        }
    }

    /// Adds the packed fields to `counts` and clears them.
    fn spill(&mut self) {
        let field = |x: u64, i: u32| (x >> (16 * i)) & 0xFFFF;
        let [a, b, d] = self.packed;
        let c = &mut self.counts;
        c.word_starts += field(a, 0);
        c.digit_runs += field(a, 1);
        c.punct_runs += field(a, 2);
        c.space_runs += field(a, 3);
        c.case_changes += field(b, 0);
        c.alnum_switches += field(b, 1);
        c.long_run += field(b, 2);
        c.long_word += field(b, 3);
        c.consonant_runs += field(d, 0);
        c.high_runs += field(d, 1);
        c.th_pairs += field(d, 2);
        self.packed = [0; 3];
        self.pending = 0;
    }

    /// The counts so far (the per-byte fields are filled in by the kernel).
    fn finish(mut self) -> ClassCounts {
        self.spill();
        self.counts
    }
}

/// The multibyte run features (Cyrillic pairs, rare three-byte characters, scripts) of the blocks that
/// have non-ASCII bytes, with their own carry: kernels may visit those blocks after the others.
#[derive(Debug, Default)]
struct HighRuns {
    cyrillic_ext: u64,
    cyrillic_upper: u64,
    rare3: u64,
    /// Characters of the rare blocks ([`rare_block`]).
    rare_blocks: RareBlocks,
    leads: PendingLeads,
    /// Index of the last block visited, and its `D1` and `D0` masks.
    last: Option<usize>,
    prev_d1: u64,
    prev_d0: u64,
}

impl HighRuns {
    /// Block `index` (`bytes[index * 64..]`); blocks must come in increasing order, skipping
    /// only blocks without non-ASCII bytes.
    #[inline(always)]
    fn block<P: PopCount>(&mut self, h: HighMasks, bytes: &[u8], index: usize) {
        let pop = P::pop;
        if self.last.is_none_or(|last| last + 1 != index) {
            // The block before was all ASCII.
            self.prev_d1 = 0;
            self.prev_d0 = 0;
        }
        self.cyrillic_ext += pop(h.cont_9x & before(h.d1, self.prev_d1));
        self.cyrillic_upper += pop(h.cont_upper & before(h.d0, self.prev_d0));
        self.prev_d1 = h.d1;
        self.prev_d0 = h.d0;
        self.last = Some(index);
        self.leads.push_block(bytes, index * 64);
        // Rare three-byte characters: a bitmap lookup per kana/CJK/hangul lead (scalar, shared
        // by both kernels; only texts in those scripts pay for it).
        let mut east_asian = h.east_asian;
        let start = index * 64;
        let window: Option<&[u8; 68]> =
            bytes.get(start..start + 68).and_then(|w| w.try_into().ok());
        if let Some(window) = window {
            // Every lead's three bytes (and one more) are in `window`: no check per lead.
            while east_asian != 0 {
                let j = east_asian.trailing_zeros() as usize;
                east_asian &= east_asian - 1;
                let word =
                    u32::from_le_bytes([window[j], window[j + 1], window[j + 2], window[j + 3]]);
                let block = rare_block(word);
                self.rare_blocks.0[block] += 1;
                self.rare3 += u64::from((block == NOT_RARE) & !is_common3_lead(word));
            }
        }
        // The last block of the text.
        while east_asian != 0 {
            let i = start + east_asian.trailing_zeros() as usize;
            east_asian &= east_asian - 1;
            let (common, block) = match bytes.get(i..i + 3) {
                Some(&[b0, b1, b2]) => (
                    is_common3(b0, b1, b2),
                    rare_block(u32::from_le_bytes([b0, b1, b2, 0])),
                ),
                _ => (false, NOT_RARE),
            };
            self.rare_blocks.0[block] += 1;
            self.rare3 += u64::from((block == NOT_RARE) & !common);
        }
    }

    /// Whether block `index`'s first byte may complete a Cyrillic pair: the block visited last
    /// is the one before and ended in `D0` or `D1`.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    fn cyrillic_carry(&self, index: usize) -> bool {
        self.last.is_some_and(|last| last + 1 == index) && (self.prev_d0 | self.prev_d1) >> 63 != 0
    }

    /// Copies the counts into `c` (`bytes`: the text, to decode the last script leads), whose
    /// byte classes must be applied already ([`RareBlocks::move_to_rare_script`] moves
    /// characters between them).
    fn finish(self, bytes: &[u8], c: &mut ClassCounts) {
        c.cyrillic_ext = self.cyrillic_ext;
        c.cyrillic_upper = self.cyrillic_upper;
        c.rare3 = self.rare3;
        c.scripts = self.leads.finish(bytes);
        self.rare_blocks.move_to_rare_script(c);
    }
}

// Flag bits of the portable kernel's first flag byte: the run masks.
const A_LOWER: u8 = 1 << 0;
const A_UPPER: u8 = 1 << 1;
const A_DIGIT: u8 = 1 << 2;
const A_SPACE: u8 = 1 << 3;
const A_PUNCT: u8 = 1 << 4;
const A_HIGH: u8 = 1 << 5;
const A_VOWEL: u8 = 1 << 6;
const A_T: u8 = 1 << 7;
// Flag bits of its second flag byte: the multibyte masks and the per-byte classes the first has
// no room for.
const B_D1: u8 = 1 << 0;
const B_CONT_9X: u8 = 1 << 1;
const B_D0: u8 = 1 << 2;
const B_CONT_UPPER: u8 = 1 << 3;
const B_EAST_ASIAN: u8 = 1 << 4;
const B_JSON: u8 = 1 << 5;
const B_RARE: u8 = 1 << 6;
const B_H: u8 = 1 << 7;

/// The two flag bytes of each byte of a block (the `A_*` and `B_*` bits), computed with byte
/// compares the compiler vectorizes (sixteen bytes an instruction with SSE2 or NEON). Two
/// 256-entry tables, a load and a store per byte and table, measured no faster; the same flags
/// as `const fn`s over [`in_byte_class`] vectorized worse (16% slower on the mixed corpus).
#[inline(always)]
fn block_flags(block: &[u8; 64]) -> [[u8; 64]; 2] {
    let mut flags = [[0u8; 64]; 2];
    for (i, &b) in block.iter().enumerate() {
        let is = |c: bool, bit: u8| if c { bit } else { 0 };
        let folded = b | 0x20;
        let lower = b.wrapping_sub(b'a') < 26;
        let upper = b.wrapping_sub(b'A') < 26;
        let digit = b.wrapping_sub(b'0') < 10;
        let space = b == b' ' || b == b'\t' || b == b'\r';
        let high = b >= 0x80;
        let punct = !(lower || upper || digit || space || high || b == b'\n');
        let vowel = folded == b'a'
            || folded == b'e'
            || folded == b'i'
            || folded == b'o'
            || folded == b'u'
            || folded == b'y';
        flags[0][i] = is(lower, A_LOWER)
            | is(upper, A_UPPER)
            | is(digit, A_DIGIT)
            | is(space, A_SPACE)
            | is(punct, A_PUNCT)
            | is(high, A_HIGH)
            | is(vowel, A_VOWEL)
            | is(folded == b't', A_T);
        let json =
            b == b'{' || b == b'}' || b == b'[' || b == b']' || b == b'"' || b == b':' || b == b',';
        let rare = folded == b'k' || folded == b'v' || folded == b'z' || folded == b'q';
        flags[1][i] = is(b == 0xD1, B_D1)
            | is(b.wrapping_sub(0x90) < 0x10, B_CONT_9X)
            | is(b == 0xD0, B_D0)
            | is(b.wrapping_sub(0x80) < 0x30, B_CONT_UPPER)
            | is(b.wrapping_sub(0xE3) < 0x0B, B_EAST_ASIAN)
            | is(json, B_JSON)
            | is(rare && (lower || upper), B_RARE)
            | is(b == b'h', B_H);
    }
    flags
}

/// The bit planes of 64 flag bytes: bit `i` of `planes[k]` is bit `k` of `flags[i]`.
///
/// Building eight masks a bit at a time costs a shift, a test and an OR per flag and byte (the
/// portable kernel's time, before: 86 MiB/s). As a 64 × 8 bit-matrix transpose it is an 8 × 8
/// bit transpose within each word (three delta swaps, Hacker's Delight 7–3) and an 8 × 8 byte
/// transpose across the words (three rounds of half swaps): about 220 word operations for all
/// eight masks of a block.
#[inline(always)]
fn bit_planes(flags: &[u8; 64]) -> [u64; 8] {
    let (words, _) = flags.as_chunks::<8>();
    let mut w = [0u64; 8];
    for (word, bytes) in w.iter_mut().zip(words) {
        let mut x = u64::from_le_bytes(*bytes);
        // Byte `m` is row `m`, bit `k` column `k`; afterwards byte `k` holds column `k`.
        let t = (x ^ (x >> 7)) & 0x00AA_00AA_00AA_00AA;
        x ^= t ^ (t << 7);
        let t = (x ^ (x >> 14)) & 0x0000_CCCC_0000_CCCC;
        x ^= t ^ (t << 14);
        let t = (x ^ (x >> 28)) & 0x0000_0000_F0F0_F0F0;
        x ^= t ^ (t << 28);
        *word = x;
    }
    // Byte `k` of word `j` now holds plane `k` of bytes `8j..8j + 8`: transpose the bytes.
    swap_halves::<4>(&mut w, 0x0000_0000_FFFF_FFFF);
    swap_halves::<2>(&mut w, 0x0000_FFFF_0000_FFFF);
    swap_halves::<1>(&mut w, 0x00FF_00FF_00FF_00FF);
    w
}

/// One round of the byte transpose: words `j` and `j + STEP` (bit `STEP` of `j` clear) swap
/// the `STEP`-byte fields `low` does not select in `j` with the ones it selects in `j + STEP`.
/// (A constant step, so that every shift is by a constant.)
#[inline(always)]
fn swap_halves<const STEP: usize>(w: &mut [u64; 8], low: u64) {
    let shift = 8 * STEP as u32;
    for j in 0..8 {
        if j & STEP == 0 {
            let (a, b) = (w[j], w[j + STEP]);
            w[j] = (a & low) | ((b & low) << shift);
            w[j + STEP] = ((a >> shift) & low) | (b & !low);
        }
    }
}

/// Which kernel to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// The portable path: per-byte flags transposed into masks, plain Rust (every target; the
    /// kernel of aarch64).
    Portable,
    /// AVX2 vector compares and counters, POPCNT (x86_64 with AVX2, detected at run time).
    Avx2,
    /// AVX-512 bit-sliced class bytes and carry-save counters (x86_64 with AVX-512 F/BW/VBMI/
    /// VBMI2/VPOPCNTDQ and GFNI, detected at run time).
    Avx512,
}

impl Kernel {
    /// The fastest kernel this CPU supports (detected once per process).
    pub fn detect() -> Kernel {
        static DETECTED: OnceLock<Kernel> = OnceLock::new();
        *DETECTED.get_or_init(|| {
            #[cfg(target_arch = "x86_64")]
            {
                if avx512_supported() {
                    return Kernel::Avx512;
                }
                if avx2_supported() {
                    return Kernel::Avx2;
                }
            }
            Kernel::Portable
        })
    }
}

/// Whether the CPU has what the AVX2 kernel is compiled for: AVX2, POPCNT, and BMI1/BMI2
/// (`andn`, `shlx` in the mask arithmetic), which every AVX2 CPU so far also has; all checked.
#[cfg(target_arch = "x86_64")]
fn avx2_supported() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("popcnt")
        && std::arch::is_x86_feature_detected!("bmi1")
        && std::arch::is_x86_feature_detected!("bmi2")
}

/// Whether the CPU has what the AVX-512 kernel is compiled for: AVX-512 F and BW, VBMI (byte
/// permutes), VBMI2 (byte compression), VPOPCNTDQ (vector popcounts), GFNI (bit permutes
/// within bytes) and POPCNT (Ice Lake and later, Zen 4 and later).
#[cfg(target_arch = "x86_64")]
fn avx512_supported() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vbmi")
        && std::arch::is_x86_feature_detected!("avx512vbmi2")
        && std::arch::is_x86_feature_detected!("avx512vpopcntdq")
        && std::arch::is_x86_feature_detected!("gfni")
        && std::arch::is_x86_feature_detected!("popcnt")
}

/// Portable kernel: per block, two flag bytes per byte ([`block_flags`]) transposed
/// into sixteen masks ([`bit_planes`]), popcounts of the masks for the ASCII classes, and a byte
/// histogram of the blocks with non-ASCII bytes for the lead-byte ranges.
fn count_portable(bytes: &[u8]) -> ClassCounts {
    use byte_class::*;
    // The high bytes' classes come from a histogram of the blocks that have some; the ASCII
    // ones from the masks.
    let mut histogram = [0u64; 256];
    let mut totals = [0u64; byte_class::COUNT];
    let mut runs = Runs::default();
    let mut high_runs = HighRuns::default();
    for (index, block) in bytes.chunks(64).enumerate() {
        // The text's last block is padded with zeros, whose flags are masked off.
        let [run_flags, other_flags] = match <&[u8; 64]>::try_from(block) {
            Ok(full) => block_flags(full),
            Err(_) => {
                let mut padded = [0u8; 64];
                padded[..block.len()].copy_from_slice(block);
                block_flags(&padded)
            }
        };
        let mut run = bit_planes(&run_flags);
        let mut other = bit_planes(&other_flags);
        if block.len() < 64 {
            let valid = (1u64 << block.len()) - 1;
            for plane in run.iter_mut().chain(&mut other) {
                *plane &= valid;
            }
        }
        let [lower, upper, digit, space, punct, high, vowel, t] = run;
        let [d1, cont_9x, d0, cont_upper, east_asian, json, rare, h] = other;
        let pop = |x: u64| u64::from(x.count_ones());
        totals[LOWER] += pop(lower);
        totals[UPPER] += pop(upper);
        totals[DIGIT] += pop(digit);
        totals[SPACE] += pop(space);
        totals[JSON] += pop(json);
        totals[RARE_LETTER] += pop(rare);
        totals[HIGH] += pop(high);
        totals[NEWLINE] += block.len() as u64 - pop(lower | upper | digit | space | punct | high);
        let m = RunMasks {
            lower,
            upper,
            digit,
            space,
            punct,
            high,
            vowel,
            t,
            h,
        };
        runs.block::<PortablePop>(m);
        if high != 0 {
            for &b in block {
                histogram[usize::from(b)] += 1;
            }
            let h = HighMasks {
                d1,
                cont_9x,
                d0,
                cont_upper,
                east_asian,
            };
            high_runs.block::<PortablePop>(h, bytes, index);
        }
    }
    for (b, &n) in histogram.iter().enumerate().skip(0x80) {
        if n == 0 {
            continue;
        }
        for (class, total) in totals.iter_mut().enumerate().skip(GE_C0) {
            if in_byte_class(b as u8, class) {
                *total += n;
            }
        }
    }
    let mut counts = runs.finish();
    counts.bytes = bytes.len() as u64;
    apply_byte_classes(&mut counts, &totals);
    high_runs.finish(bytes, &mut counts);
    counts
}

#[cfg(target_arch = "x86_64")]
mod avx512;

#[cfg(target_arch = "x86_64")]
mod avx2 {
    //! The AVX2 kernel. Every function here requires AVX2 (and POPCNT, BMI1, BMI2), which `count` declares
    //! and its caller checks at run time.
    use super::{ClassCounts, HighMasks, HighRuns, PopCount, byte_class};
    use std::arch::x86_64::*;

    /// Bytes of `v` in the unsigned range `lo..=hi`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn in_range(v: __m256i, lo: u8, hi: u8) -> __m256i {
        let shifted = _mm256_sub_epi8(v, _mm256_set1_epi8(lo as i8));
        let span = _mm256_set1_epi8((hi - lo) as i8);
        _mm256_cmpeq_epi8(_mm256_min_epu8(shifted, span), shifted)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn eq(v: __m256i, b: u8) -> __m256i {
        _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b as i8))
    }

    /// Bytes `>= b` (unsigned).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn at_least(v: __m256i, b: u8) -> __m256i {
        _mm256_cmpeq_epi8(_mm256_max_epu8(v, _mm256_set1_epi8(b as i8)), v)
    }

    /// A 16-entry table repeated in both lanes, for `_mm256_shuffle_epi8`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn table(t: [u8; 16]) -> __m256i {
        // SAFETY: `t` is 16 readable bytes; the unaligned load reads exactly them.
        let lane = unsafe { _mm_loadu_si128(t.as_ptr().cast()) };
        _mm256_broadcastsi128_si256(lane)
    }

    /// Spaces, tabs and carriage returns: a table indexed by the low nibble holds the one
    /// candidate byte per nibble (`shuffle` gives 0 for bytes `>= 0x80`, which never match).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn space(v: __m256i) -> __m256i {
        let mut t = [0xFFu8; 16];
        t[0x0] = b' ';
        t[0x9] = b'\t';
        t[0xD] = b'\r';
        _mm256_cmpeq_epi8(_mm256_shuffle_epi8(table(t), v), v)
    }

    /// JSON structural characters `" , : [ ] { }`, the same way with two tables (`[` and `{`,
    /// `]` and `}` share a low nibble).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn json(v: __m256i) -> __m256i {
        let mut first = [0xFFu8; 16];
        first[0x2] = b'"';
        first[0xC] = b',';
        first[0xA] = b':';
        first[0xB] = b'[';
        first[0xD] = b']';
        let mut second = [0xFFu8; 16];
        second[0xB] = b'{';
        second[0xD] = b'}';
        _mm256_or_si256(
            _mm256_cmpeq_epi8(_mm256_shuffle_epi8(table(first), v), v),
            _mm256_cmpeq_epi8(_mm256_shuffle_epi8(table(second), v), v),
        )
    }

    /// The sign bits of the 32 bytes of `v` (`vpmovmskb`). Written as inline assembly on
    /// purpose: with the intrinsic, LLVM folds the masks' later integer logic back into vectors
    /// of booleans, which AVX2 cannot hold, and expands them byte by byte (4× slower).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn movemask(v: __m256i) -> u64 {
        let bits: u64;
        // SAFETY: `vpmovmskb` only reads the vector register and writes the general-purpose
        // one (its 32-bit form clears the upper half, so the `u64` is the mask); AVX2 is
        // enabled for this function, so the instruction exists.
        unsafe {
            std::arch::asm!(
                "vpmovmskb {bits:e}, {v}",
                bits = lateout(reg) bits,
                v = in(ymm_reg) v,
                options(pure, nomem, nostack, preserves_flags),
            );
        }
        bits
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn mask(a: __m256i, b: __m256i) -> u64 {
        movemask(a) | (movemask(b) << 32)
    }

    /// `popcnt` as inline assembly. With `count_ones`, LLVM gathers the block's dozen popcounts
    /// into vectors (moves, unpacks and a shuffle-based count), which costs more than it saves.
    struct Popcnt;

    impl PopCount for Popcnt {
        #[inline(always)]
        fn pop(x: u64) -> u64 {
            let n: u64;
            // SAFETY: `popcnt` reads and writes general-purpose registers only. This type is
            // used only inside `count`, which runs after `avx2_supported` checked POPCNT.
            unsafe {
                std::arch::asm!(
                    "popcnt {n}, {x}",
                    n = lateout(reg) n,
                    x = in(reg) x,
                    options(pure, nomem, nostack),
                );
            }
            n
        }
    }

    /// Byte counters for `N` per-byte classes: one counter per lane and class, incremented by
    /// subtracting compare results (`-1`), drained into `totals` before they can overflow.
    struct Counters<const N: usize> {
        lanes: [__m256i; N],
        totals: [u64; N],
    }

    /// Blocks between drains: each block adds at most 2 per lane (2 × 64 = 128 fits a byte),
    /// and a group's blocks with non-ASCII bytes fit a `u64` bitmap.
    const DRAIN_EVERY: usize = 64;

    impl<const N: usize> Counters<N> {
        #[inline]
        #[target_feature(enable = "avx2")]
        fn new() -> Counters<N> {
            Counters {
                lanes: [_mm256_setzero_si256(); N],
                totals: [0; N],
            }
        }

        #[inline]
        #[target_feature(enable = "avx2")]
        fn add(&mut self, counter: usize, a: __m256i, b: __m256i) {
            let lane = &mut self.lanes[counter];
            *lane = _mm256_sub_epi8(_mm256_sub_epi8(*lane, a), b);
        }

        #[inline]
        #[target_feature(enable = "avx2")]
        fn drain(&mut self) {
            for (lane, total) in self.lanes.iter_mut().zip(&mut self.totals) {
                let sums = _mm256_sad_epu8(*lane, _mm256_setzero_si256());
                let pair = _mm_add_epi64(
                    _mm256_castsi256_si128(sums),
                    _mm256_extracti128_si256(sums, 1),
                );
                *total += (_mm_cvtsi128_si64(pair) + _mm_extract_epi64(pair, 1)) as u64;
                *lane = _mm256_setzero_si256();
            }
        }
    }

    /// Counter of JSON punctuation, the one ASCII per-byte class without a mask of its own.
    type JsonCounter = Counters<1>;

    /// Counters of the multibyte classes (`byte_class::GE_C0..`), offset by `GE_C0`.
    type HighCounters = Counters<{ byte_class::COUNT - byte_class::GE_C0 }>;

    /// `x` moved up by `by` (1..=63) with the top `by` bits of the previous block's `prev`
    /// shifted in below: the upper half of `(x:prev) << by` (one `shld`).
    #[inline(always)]
    fn shift_in(x: u64, prev: u64, by: u32) -> u64 {
        (x << by) | (prev >> (64 - by))
    }

    /// The previous block's masks that the ASCII features look back into: the classes of the
    /// transitions, and the intermediate masks of the run-length chains (`alnum4`: bytes that
    /// end a run of at least 4 alphanumerics, ...), so that each step of a chain is one
    /// `shld` and one `and` whatever the run's length before the block.
    #[derive(Default, Clone, Copy)]
    struct Carry {
        letter: u64,
        digit: u64,
        punct: u64,
        space: u64,
        lower: u64,
        alnum2: u64,
        alnum4: u64,
        alnum8: u64,
        letter2: u64,
        letter4: u64,
        consonant: u64,
        consonant2: u64,
        consonant4: u64,
        t: u64,
    }

    /// Totals of the ASCII loop, one per count.
    #[derive(Default)]
    struct AsciiTotals {
        letters: u64,
        rare_letters: u64,
        upper: u64,
        digits: u64,
        spaces: u64,
        newlines: u64,
        word_starts: u64,
        digit_runs: u64,
        punct_runs: u64,
        space_runs: u64,
        case_changes: u64,
        alnum_switches: u64,
        long_run: u64,
        long_word: u64,
        consonant_runs: u64,
        th_pairs: u64,
    }

    /// Total and run starts of bytes `>= 0x80`, counted in the non-ASCII pass (an ASCII block
    /// adds nothing to either).
    #[derive(Default)]
    struct HighBytes {
        total: u64,
        runs: u64,
    }

    /// The per-byte classes of one 32-byte half that become masks, as compare results.
    struct HalfClasses {
        letter: __m256i,
        /// Bit 5 of each byte moved to bit 7 (lowercase among letters).
        case: __m256i,
        digit: __m256i,
        space: __m256i,
        newline: __m256i,
        consonant: __m256i,
        json: __m256i,
        /// [`super::is_rare_letter`].
        rare_letter: __m256i,
        /// `t` and `T`.
        t: __m256i,
        /// `h`.
        h: __m256i,
    }

    /// The classes of the 32 bytes `v`. Ranges are one signed compare after an addition that
    /// moves the range to the top of the positive bytes (the addition is a bijection, so no
    /// other byte lands there); letters are tested case-folded.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn classify(v: __m256i) -> HalfClasses {
        let set = |b: u8| _mm256_set1_epi8(b as i8);
        let folded = _mm256_or_si256(v, set(0x20));
        // `a`..=`z` + 5 → 0x66..=0x7F; `0`..=`9` + 0x46 → 0x76..=0x7F.
        let letter = _mm256_cmpgt_epi8(_mm256_add_epi8(folded, set(5)), set(0x65));
        let digit = _mm256_cmpgt_epi8(_mm256_add_epi8(v, set(0x46)), set(0x75));
        // Vowels: bits 1..=4 of the folded letter index a table with one vowel per slot
        // (a e i o u y land on 0 2 4 7 A C); empty slots hold 0, which no folded byte is.
        let mut vowels = [0u8; 16];
        for vowel in *b"aeiouy" {
            vowels[usize::from((vowel >> 1) & 0x0F)] = vowel;
        }
        let slot = _mm256_and_si256(_mm256_srli_epi16(folded, 1), set(0x0F));
        let vowel = _mm256_cmpeq_epi8(_mm256_shuffle_epi8(table(vowels), slot), folded);
        // Rare letters the same way (k v z q land on 5 B D 8).
        let mut rare = [0u8; 16];
        for letter in *b"kvzq" {
            rare[usize::from((letter >> 1) & 0x0F)] = letter;
        }
        let rare_letter = _mm256_cmpeq_epi8(_mm256_shuffle_epi8(table(rare), slot), folded);
        HalfClasses {
            letter,
            case: _mm256_slli_epi16(v, 2),
            digit,
            space: space(v),
            newline: eq(v, b'\n'),
            consonant: _mm256_andnot_si256(vowel, letter),
            json: json(v),
            rare_letter,
            t: eq(folded, b't'),
            h: eq(v, b'h'),
        }
    }

    /// The non-ASCII part of block `index` (its bytes `a`, `b`), which has a byte `>= 0x80`.
    #[inline(never)]
    #[target_feature(enable = "avx2,popcnt,bmi1,bmi2")]
    fn high_block(
        counters: &mut HighCounters,
        runs: &mut HighRuns,
        high_bytes: &mut HighBytes,
        a: __m256i,
        b: __m256i,
        bytes: &[u8],
        index: usize,
    ) {
        // Padding bytes are zero: not high.
        let high = mask(a, b);
        let last_before = (index * 64).checked_sub(1).and_then(|i| bytes.get(i));
        let high_before = (high << 1) | u64::from(last_before.is_some_and(|&b| b >= 0x80));
        high_bytes.total += Popcnt::pop(high);
        high_bytes.runs += Popcnt::pop(high & !high_before);
        let (ge_c0_a, ge_c0_b) = (at_least(a, 0xC0), at_least(b, 0xC0));
        let (ge_e0_a, ge_e0_b) = (at_least(a, 0xE0), at_least(b, 0xE0));
        let mut add = |class: usize, x, y| counters.add(class - byte_class::GE_C0, x, y);
        add(byte_class::GE_C0, ge_c0_a, ge_c0_b);
        add(byte_class::GE_E0, ge_e0_a, ge_e0_b);
        add(byte_class::GE_F0, at_least(a, 0xF0), at_least(b, 0xF0));
        // The script counters and masks only for the leads present (a document keeps to one
        // script for many blocks, so the branches predict well); a block with no two-byte
        // lead still looks at its continuation bytes when the block before ended in `D0`/`D1`.
        let mut h = HighMasks::default();
        if mask(ge_e0_a, ge_e0_b) != 0 {
            add(
                byte_class::CJK,
                in_range(a, 0xE4, 0xE9),
                in_range(b, 0xE4, 0xE9),
            );
            add(byte_class::KANA, eq(a, 0xE3), eq(b, 0xE3));
            add(
                byte_class::HANGUL,
                in_range(a, 0xEA, 0xED),
                in_range(b, 0xEA, 0xED),
            );
            h.east_asian = mask(in_range(a, 0xE3, 0xED), in_range(b, 0xE3, 0xED));
        }
        let two_byte = mask(
            _mm256_andnot_si256(ge_e0_a, ge_c0_a),
            _mm256_andnot_si256(ge_e0_b, ge_c0_b),
        );
        if two_byte != 0 {
            add(
                byte_class::CYRILLIC,
                in_range(a, 0xD0, 0xD1),
                in_range(b, 0xD0, 0xD1),
            );
            add(
                byte_class::LATIN1,
                in_range(a, 0xC2, 0xC3),
                in_range(b, 0xC2, 0xC3),
            );
            add(
                byte_class::LATIN_EXT,
                in_range(a, 0xC4, 0xC8),
                in_range(b, 0xC4, 0xC8),
            );
        }
        if two_byte != 0 || runs.cyrillic_carry(index) {
            h.d1 = mask(eq(a, 0xD1), eq(b, 0xD1));
            h.cont_9x = mask(in_range(a, 0x90, 0x9F), in_range(b, 0x90, 0x9F));
            h.d0 = mask(eq(a, 0xD0), eq(b, 0xD0));
            h.cont_upper = mask(in_range(a, 0x80, 0xAF), in_range(b, 0x80, 0xAF));
        }
        runs.block::<Popcnt>(h, bytes, index);
    }

    /// The two 32-byte halves of the 64 bytes at `p`.
    ///
    /// # Safety
    /// `p` must point to 64 readable bytes.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn load(p: *const u8) -> (__m256i, __m256i) {
        // SAFETY: the caller guarantees 64 readable bytes; the two unaligned loads read 0..32
        // and 32..64.
        unsafe {
            (
                _mm256_loadu_si256(p.cast()),
                _mm256_loadu_si256(p.add(32).cast()),
            )
        }
    }

    /// The ASCII part of one 64-byte block `a`, `b` (`valid` has a bit per byte of the text;
    /// the rest is zero padding, which only the punctuation mask would count). Evaluates to
    /// the block's mask of bytes `>= 0x80`; the caller runs [`high_block`] if it is not 0. A
    /// macro rather than a function: LLVM does not inline a function this size called from two
    /// places, and through a call the carries and totals live in memory.
    macro_rules! ascii_block {
        ($carry:expr, $totals:expr, $json:expr, $a:expr, $b:expr, $valid:expr) => {{
            let carry: &mut Carry = $carry;
            let t: &mut AsciiTotals = $totals;
            let json: &mut JsonCounter = $json;
            let (a, b): (__m256i, __m256i) = ($a, $b);
            let valid: u64 = $valid;
            let pop = Popcnt::pop;
            let (ca, cb) = (classify(a), classify(b));
            json.add(0, ca.json, cb.json);
            let high = mask(a, b);
            let letter = mask(ca.letter, cb.letter);
            let case = mask(ca.case, cb.case);
            let digit = mask(ca.digit, cb.digit);
            let space = mask(ca.space, cb.space);
            let newline = mask(ca.newline, cb.newline);
            let consonant = mask(ca.consonant, cb.consonant);
            let lower = letter & case;
            let upper = letter & !case;
            let punct = !(letter | digit | space | newline | high) & valid;
            let p = *carry;
            t.letters += pop(letter);
            t.upper += pop(upper);
            t.digits += pop(digit);
            t.spaces += pop(space);
            t.newlines += pop(newline);
            t.rare_letters += pop(mask(ca.rare_letter, cb.rare_letter));
            // Transitions: a class starting, or changing into another.
            let letter_before = shift_in(letter, p.letter, 1);
            let digit_before = shift_in(digit, p.digit, 1);
            t.word_starts += pop(letter & !letter_before);
            t.digit_runs += pop(digit & !digit_before);
            t.punct_runs += pop(punct & !shift_in(punct, p.punct, 1));
            t.space_runs += pop(space & !shift_in(space, p.space, 1));
            t.case_changes += pop(upper & shift_in(lower, p.lower, 1));
            t.alnum_switches += pop((letter & digit_before) | (digit & letter_before));
            // Run lengths: each step doubles (or extends) the run length a bit stands for.
            let alnum2 = (letter | digit) & (letter_before | digit_before);
            let alnum4 = alnum2 & shift_in(alnum2, p.alnum2, 2);
            let alnum8 = alnum4 & shift_in(alnum4, p.alnum4, 4);
            t.long_run += pop(alnum8 & shift_in(alnum8, p.alnum8, 8));
            let letter2 = letter & letter_before;
            let letter4 = letter2 & shift_in(letter2, p.letter2, 2);
            t.long_word += pop(letter4 & shift_in(letter4, p.letter4, 4));
            let consonant2 = consonant & shift_in(consonant, p.consonant, 1);
            let consonant3 = consonant2 & shift_in(consonant2, p.consonant2, 1);
            let consonant4 = consonant2 & shift_in(consonant2, p.consonant2, 2);
            let consonant7 = consonant4 & shift_in(consonant4, p.consonant4, 3);
            t.consonant_runs += pop(consonant3 & !consonant7);
            let letter_t = mask(ca.t, cb.t);
            t.th_pairs += pop(mask(ca.h, cb.h) & shift_in(letter_t, p.t, 1));
            *carry = Carry {
                letter,
                digit,
                punct,
                space,
                lower,
                alnum2,
                alnum4,
                alnum8,
                letter2,
                letter4,
                consonant,
                consonant2,
                consonant4,
                t: letter_t,
            };
            high
        }};
    }

    /// Counts the classes of `bytes`.
    ///
    /// Blocks are visited in groups of [`DRAIN_EVERY`]: first the ASCII part of every block
    /// (a tight loop: class compares, seven masks, their arithmetic and popcounts), then the
    /// non-ASCII part of the blocks that have a byte `>= 0x80` (with the high bytes' total and
    /// run starts, which are 0 in the others), then the byte counters are drained. Two other
    /// layouts measured worse: run lengths in one 4-lane vector chain (its constants and
    /// counters took the vector registers the class compares need), and a vector pass storing
    /// each group's masks followed by a scalar pass over them (the scalar pass still spilled its
    /// thirteen carried masks, and LLVM gathered its totals into vectors).
    #[target_feature(enable = "avx2,popcnt,bmi1,bmi2")]
    pub(super) fn count(bytes: &[u8]) -> ClassCounts {
        const _: () = {
            assert!(super::LONG_RUN == 16 && super::LONG_WORD == 8);
            assert!(super::CONSONANT_RUN == 3 && super::CONSONANT_RUN_END == 6);
        };
        let mut high = HighCounters::new();
        let mut json = JsonCounter::new();
        let mut carry = Carry::default();
        let mut totals = AsciiTotals::default();
        let mut high_bytes = HighBytes::default();
        let mut high_runs = HighRuns::default();
        // The mask of bytes `>= 0x80` of each block of a group (the blocks the non-ASCII pass
        // visits): one store per block in the ASCII loop.
        let mut highs = [0u64; DRAIN_EVERY];
        let blocks = bytes.chunks_exact(64);
        let tail = blocks.remainder();
        let full = bytes.len() / 64;
        let mut group_start = 0;
        while group_start < full {
            let group_end = full.min(group_start + DRAIN_EVERY);
            let group = &bytes[group_start * 64..group_end * 64];
            for (high_mask, block) in highs.iter_mut().zip(group.chunks_exact(64)) {
                // SAFETY: `block` is 64 bytes.
                let (a, b) = unsafe { load(block.as_ptr()) };
                *high_mask = ascii_block!(&mut carry, &mut totals, &mut json, a, b, u64::MAX);
            }
            for (i, (&high_mask, block)) in highs.iter().zip(group.chunks_exact(64)).enumerate() {
                if high_mask != 0 {
                    // SAFETY: `block` is 64 bytes.
                    let (a, b) = unsafe { load(block.as_ptr()) };
                    let index = group_start + i;
                    high_block(
                        &mut high,
                        &mut high_runs,
                        &mut high_bytes,
                        a,
                        b,
                        bytes,
                        index,
                    );
                }
            }
            high.drain();
            json.drain();
            group_start = group_end;
        }
        if !tail.is_empty() {
            let mut padded = [0u8; 64];
            padded[..tail.len()].copy_from_slice(tail);
            let valid = (1u64 << tail.len()) - 1;
            // SAFETY: `padded` is 64 bytes.
            let (a, b) = unsafe { load(padded.as_ptr()) };
            if ascii_block!(&mut carry, &mut totals, &mut json, a, b, valid) != 0 {
                high_block(
                    &mut high,
                    &mut high_runs,
                    &mut high_bytes,
                    a,
                    b,
                    bytes,
                    full,
                );
            }
            high.drain();
            json.drain();
        }
        let t = totals;
        let mut counts = ClassCounts {
            word_starts: t.word_starts,
            digit_runs: t.digit_runs,
            punct_runs: t.punct_runs,
            space_runs: t.space_runs,
            case_changes: t.case_changes,
            alnum_switches: t.alnum_switches,
            long_run: t.long_run,
            long_word: t.long_word,
            consonant_runs: t.consonant_runs,
            th_pairs: t.th_pairs,
            high_runs: high_bytes.runs,
            ..ClassCounts::default()
        };
        let mut classes = [0u64; byte_class::COUNT];
        classes[byte_class::LOWER] = t.letters - t.upper;
        classes[byte_class::UPPER] = t.upper;
        classes[byte_class::DIGIT] = t.digits;
        classes[byte_class::SPACE] = t.spaces;
        classes[byte_class::NEWLINE] = t.newlines;
        classes[byte_class::JSON] = json.totals[0];
        classes[byte_class::RARE_LETTER] = t.rare_letters;
        classes[byte_class::HIGH] = high_bytes.total;
        classes[byte_class::GE_C0..].copy_from_slice(&high.totals);
        counts.bytes = bytes.len() as u64;
        super::apply_byte_classes(&mut counts, &classes);
        high_runs.finish(bytes, &mut counts);
        counts
    }
}

/// Whether the three-byte UTF-8 sequence `b0 b1 b2` (lead `E3`–`ED`) encodes a character that is
/// a single token in both `o200k` and `cl100k` (bitmap generated by `tools/fit-tokens`).
pub fn is_common3(b0: u8, b1: u8, b2: u8) -> bool {
    if !(0xE3..=0xED).contains(&b0) || b1 & 0xC0 != 0x80 || b2 & 0xC0 != 0x80 {
        return false;
    }
    let cp = (u32::from(b0 & 0x0F) << 12) | (u32::from(b1 & 0x3F) << 6) | u32::from(b2 & 0x3F);
    let Some(index) = cp.checked_sub(COMMON3_FIRST) else {
        return false;
    };
    let word = super::common3::COMMON3
        .get((index / 64) as usize)
        .copied()
        .unwrap_or(0);
    (word >> (index % 64)) & 1 == 1
}

/// [`is_common3`] of the first three bytes of `word` (little-endian: the lead in the low
/// byte), for a lead known to be in `E3`–`ED`: no branch but the bitmap's bounds check, for the
/// per-character loop over kana, CJK and hangul text.
#[inline(always)]
fn is_common3_lead(word: u32) -> bool {
    debug_assert!((0xE3..=0xED).contains(&(word & 0xFF)));
    let continuations = word & 0x00C0_C000 == 0x0080_8000;
    let cp = ((word & 0x0F) << 12) | ((word >> 2) & 0x0FC0) | ((word >> 16) & 0x3F);
    // A lead in `E3`–`ED` gives `cp >= 0x3000`.
    let index = cp.wrapping_sub(COMMON3_FIRST);
    let bits = super::common3::COMMON3
        .get((index / 64) as usize)
        .copied()
        .unwrap_or(0);
    continuations & ((bits >> (index % 64)) & 1 == 1)
}

/// The compiled-in [`is_common3`] bitmap (bit `cp - COMMON3_FIRST`), for the fitting tool.
pub fn common3_bitmap() -> &'static [u64] {
    &super::common3::COMMON3
}

/// First code point of the [`is_common3`] bitmap (U+3000; it ends at U+DFFF).
pub const COMMON3_FIRST: u32 = 0x3000;
/// Number of code points in the [`is_common3`] bitmap.
pub const COMMON3_LEN: u32 = 0xE000 - 0x3000;

/// Counts the character classes of `bytes` with the given kernel. A kernel the CPU does not
/// support falls back to [`Kernel::Portable`].
pub fn count_classes_with(bytes: &[u8], kernel: Kernel) -> ClassCounts {
    match kernel {
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 if avx2_supported() => {
            // SAFETY: AVX2, POPCNT, BMI1 and BMI2 support was just checked.
            unsafe { avx2::count(bytes) }
        }
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx512 if avx512_supported() => {
            // SAFETY: AVX-512 F/BW/VBMI/VBMI2/VPOPCNTDQ, GFNI and POPCNT support was just
            // checked.
            unsafe { avx512::count(bytes) }
        }
        _ => count_portable(bytes),
    }
}

/// Counts the character classes of `bytes` with the fastest kernel available.
pub fn count_classes(bytes: &[u8]) -> ClassCounts {
    count_classes_with(bytes, Kernel::detect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A byte-at-a-time reference implementation of the class definitions.
    fn reference(bytes: &[u8]) -> ClassCounts {
        let mut c = ClassCounts {
            bytes: bytes.len() as u64,
            ..ClassCounts::default()
        };
        let mut prev: Option<u8> = None;
        let mut alnum_run = 0u32;
        let mut letter_run = 0u32;
        let mut consonant_run = 0u32;
        // Complete characters of the rare blocks, by decoding (the kernels test the bytes).
        let mut rare_blocks = RareBlocks::default();
        for (i, &b) in bytes.iter().enumerate() {
            if is_east_asian_lead(b) {
                let (common, block) = match bytes.get(i..i + 3) {
                    Some(&[b0, b1, b2]) => (
                        is_common3(b0, b1, b2),
                        match std::str::from_utf8(&[b0, b1, b2]).map(|s| s.chars().next()) {
                            Ok(Some('\u{3400}'..='\u{3FFF}')) => RARE_OF_KANA,
                            Ok(Some('\u{4000}'..='\u{4DFF}')) => RARE_OF_CJK,
                            Ok(Some('\u{A000}'..='\u{ABFF}')) => RARE_OF_HANGUL,
                            _ => NOT_RARE,
                        },
                    ),
                    _ => (false, NOT_RARE),
                };
                c.rare3 += u64::from(!common && block == NOT_RARE);
                rare_blocks.0[block] += 1;
            }
        }
        let is_space = |b: u8| matches!(b, b' ' | b'\t' | b'\r');
        let is_punct = |b: u8| b < 0x80 && !b.is_ascii_alphanumeric() && !is_space(b) && b != b'\n';
        for &b in bytes {
            let (lower, upper, digit) = (
                b.is_ascii_lowercase(),
                b.is_ascii_uppercase(),
                b.is_ascii_digit(),
            );
            let letter = lower || upper;
            let p_letter = prev.is_some_and(|p| p.is_ascii_alphabetic());
            let p_digit = prev.is_some_and(|p| p.is_ascii_digit());
            c.lower += u64::from(lower);
            c.upper += u64::from(upper);
            c.digits += u64::from(digit);
            c.spaces += u64::from(is_space(b));
            c.newlines += u64::from(b == b'\n');
            let json = matches!(b, b'{' | b'}' | b'[' | b']' | b'"' | b':' | b',');
            c.json += u64::from(json);
            c.rare_letters += u64::from(matches!(b | 0x20, b'k' | b'v' | b'z' | b'q'));
            c.th_pairs += u64::from(b == b'h' && prev.is_some_and(|p| p == b't' || p == b'T'));
            c.punct += u64::from(is_punct(b) && !json);
            c.word_starts += u64::from(letter && !p_letter);
            c.digit_runs += u64::from(digit && !p_digit);
            c.punct_runs += u64::from(is_punct(b) && !prev.is_some_and(is_punct));
            c.cyrillic_ext += u64::from(prev == Some(0xD1) && (0x90..=0x9F).contains(&b));
            c.cyrillic_upper += u64::from(prev == Some(0xD0) && (0x80..=0xAF).contains(&b));
            c.space_runs += u64::from(is_space(b) && !prev.is_some_and(is_space));
            c.high_runs += u64::from(b >= 0x80 && prev.is_none_or(|p| p < 0x80));
            c.case_changes += u64::from(upper && prev.is_some_and(|p| p.is_ascii_lowercase()));
            c.alnum_switches += u64::from((letter && p_digit) || (digit && p_letter));
            alnum_run = if letter || digit { alnum_run + 1 } else { 0 };
            c.long_run += u64::from(alnum_run >= LONG_RUN);
            letter_run = if letter { letter_run + 1 } else { 0 };
            c.long_word += u64::from(letter_run >= LONG_WORD);
            consonant_run = if letter && !is_vowel(b) {
                consonant_run + 1
            } else {
                0
            };
            c.consonant_runs +=
                u64::from((CONSONANT_RUN..=CONSONANT_RUN_END).contains(&consonant_run));
            match b {
                0xE4..=0xE9 => c.cjk += 1,
                0xE3 => c.kana += 1,
                0xEA..=0xED => c.hangul += 1,
                0xD0 | 0xD1 => c.cyrillic += 1,
                0xC2 | 0xC3 => c.latin1 += 1,
                0xC4..=0xC8 => c.latin_ext += 1,
                0xC0..=0xDF => c.other2 += 1,
                0xE0..=0xEF => c.other3 += 1,
                0xF0..=0xFF => c.four += 1,
                _ => {}
            }
            prev = Some(b);
        }
        crate::tokens::scripts::count_scripts(bytes, &mut c.scripts);
        rare_blocks.move_to_rare_script(&mut c);
        c
    }

    /// Every kernel (those the CPU lacks fall back to the portable one).
    const KERNELS: [Kernel; 3] = [Kernel::Portable, Kernel::Avx2, Kernel::Avx512];

    fn check(bytes: &[u8]) {
        let expected = reference(bytes);
        for kernel in KERNELS {
            assert_eq!(count_classes_with(bytes, kernel), expected, "{kernel:?}");
        }
        assert_eq!(count_classes(bytes), expected);
    }

    #[test]
    fn bit_planes_transpose_flag_bytes() {
        // Every flag byte value at every position, in 256 rotations.
        for rotation in 0..256usize {
            let flags: [u8; 64] = std::array::from_fn(|i| (i * 37 + rotation * 11) as u8);
            let planes = bit_planes(&flags);
            for (k, &plane) in planes.iter().enumerate() {
                let expected = flags
                    .iter()
                    .enumerate()
                    .fold(0u64, |m, (i, &f)| m | (u64::from(f >> k & 1) << i));
                assert_eq!(plane, expected, "plane {k}, rotation {rotation}");
            }
        }
    }

    #[test]
    fn block_flags_are_the_byte_classes() {
        // Each flag bit against its class, for every byte value at every position of a block.
        use byte_class::*;
        for offset in (0..256).step_by(64) {
            let bytes: [u8; 64] = std::array::from_fn(|i| (i + offset) as u8);
            let [run, other] = block_flags(&bytes);
            for (i, &b) in bytes.iter().enumerate() {
                let class = |c| in_byte_class(b, c);
                let ascii_other =
                    b < 0x80 && b != b'\n' && ![LOWER, UPPER, DIGIT, SPACE].into_iter().any(class);
                let expected_run = [
                    class(LOWER),
                    class(UPPER),
                    class(DIGIT),
                    class(SPACE),
                    ascii_other,
                    class(HIGH),
                    is_vowel(b),
                    b == b't' || b == b'T',
                ];
                let expected_other = [
                    b == 0xD1,
                    (0x90..=0x9F).contains(&b),
                    b == 0xD0,
                    (0x80..=0xAF).contains(&b),
                    (0xE3..=0xED).contains(&b),
                    class(JSON),
                    class(RARE_LETTER),
                    b == b'h',
                ];
                for (k, (&r, &o)) in expected_run.iter().zip(&expected_other).enumerate() {
                    assert_eq!(run[i] >> k & 1 == 1, r, "byte {b:#04x}, run flag {k}");
                    assert_eq!(other[i] >> k & 1 == 1, o, "byte {b:#04x}, other flag {k}");
                }
            }
        }
    }

    #[test]
    fn script_leads_in_more_blocks_than_are_decoded_at_once() {
        // More than 64 blocks with leads (decoded in batches of 64), at every alignment, and
        // one cut short at the end.
        for pad in 0..3 {
            let text = format!("{}{}ไ", "x".repeat(pad), "ไทย a Ελλ ├─ b\n".repeat(400));
            check(text.as_bytes());
            check(&text.as_bytes()[..text.len() - 1]);
        }
        let c = count_classes("Ελλ ".repeat(1000).as_bytes());
        assert_eq!(c.scripts[0], 2000, "greek");
        assert_eq!(c.scripts[25], 1000, "greek_upper");
    }

    #[test]
    fn script_leads_past_the_avx512_buffer_and_many_to_a_block() {
        // The AVX-512 kernel buffers 1,024 script ids before counting them: 30,000 leads flush
        // it several times mid-text. Blocks with 32 two-byte leads (Greek, Arabic), ~21
        // three-byte ones (box drawing, Thai), several scripts in one block, and 64 bare leads
        // (no continuation: no script), at every alignment.
        let many = "├─┤".repeat(10_000);
        let mixed = "αβγδ ابت ไทย ─│ ｆｕ ∑ Ա ᄀ \u{E000}".repeat(300);
        let bare = [0xE2u8; 64 * 3];
        let leads_then_one = [&[0xCEu8; 63][..], "α".as_bytes()].concat();
        for pad in 0..3 {
            let padding = "x".repeat(pad);
            check(format!("{padding}{many}").as_bytes());
            check(format!("{padding}{mixed}").as_bytes());
            check(format!("{padding}{}", "αβγδεζηθ".repeat(40)).as_bytes());
            check(&[padding.as_bytes(), &bare[..]].concat());
            check(&[padding.as_bytes(), &leads_then_one].concat());
        }
        let c = count_classes(many.as_bytes());
        let box_script = crate::tokens::scripts::SCRIPT_NAMES
            .iter()
            .position(|n| *n == "box")
            .unwrap();
        assert_eq!(c.scripts[box_script], 30_000);
    }

    #[test]
    fn counts_a_mixed_sample() {
        let text = "Hello wORLD 42, {\"k\": [1,2]}\n\tпривет Її 你好 こんにちは 안녕 é ł 😀 — α";
        check(text.as_bytes());
        let c = count_classes(text.as_bytes());
        assert_eq!(c.cjk, 2);
        assert_eq!(c.kana, 5);
        assert_eq!(c.hangul, 2);
        assert_eq!(c.cyrillic, 8);
        assert_eq!(c.cyrillic_ext, 1);
        assert_eq!(c.cyrillic_upper, 1);
        assert_eq!(c.latin1, 1);
        assert_eq!(c.latin_ext, 1);
        assert_eq!(c.other2, 1);
        assert_eq!(c.four, 1);
        assert_eq!(c.other3, 1);
        assert_eq!(c.newlines, 1);
        assert_eq!(c.digits, 4);
        assert_eq!(c.case_changes, 1);
        assert_eq!(c.json, 9);
        // "wORLD": R L D.
        assert_eq!(c.consonant_runs, 1);
        let c = count_classes(b"xxxxxxxxxx strength");
        // x at positions 3..=6, then "str" (r) and "ngth" (t, h).
        assert_eq!(c.consonant_runs, 4 + 1 + 2);
    }

    #[test]
    fn runs_cross_block_boundaries() {
        for offset in [0, 1, 30, 55, 60, 63, 64, 65, 127] {
            let mut s = " ".repeat(offset);
            s.push_str(&"a1".repeat(20));
            s.push_str(" Abcdefghijklmn ");
            s.push_str(&"ї".repeat(40));
            s.push_str(&"漢".repeat(40));
            let c = count_classes(s.as_bytes());
            assert_eq!(c.long_run, 40 - u64::from(LONG_RUN) + 1);
            check(s.as_bytes());
        }
    }

    #[test]
    fn cyrillic_pairs_split_across_blocks() {
        // The lead ends one block and the continuation starts the next, which has no two-byte
        // lead of its own (CJK, ASCII, or the end of the text after it).
        for (letter, after) in [("ї", "漢字"), ("Ї", "abc"), ("ѓ", ""), ("Я", "—")] {
            let text = format!("{}{letter}{}", "a".repeat(63), after.repeat(30));
            let c = count_classes(text.as_bytes());
            assert_eq!(
                c.cyrillic_ext + c.cyrillic_upper,
                1,
                "{letter} before {after:?}"
            );
            check(text.as_bytes());
        }
    }

    #[test]
    fn counters_drain_before_overflowing() {
        // Far more than 255 blocks of one class, and a tail.
        let text = "a".repeat(64 * 600 + 17);
        let c = count_classes(text.as_bytes());
        assert_eq!(c.lower, text.len() as u64);
        assert_eq!(c.word_starts, 1);
        check(text.as_bytes());
        let text = "é".repeat(64 * 300 + 5);
        check(text.as_bytes());
    }

    #[test]
    fn kernels_agree_across_groups_of_blocks() {
        // Non-ASCII blocks scattered over several 64-block groups (the AVX2 kernel visits them
        // after each group), with a tail.
        let mut text = String::new();
        for i in 0..400 {
            text.push_str(&"plain ascii text, {\"k\": 1}\n".repeat(i % 7));
            if i % 3 == 0 {
                text.push_str("Їжак їсть 漢字かな한글 ë ł 😀 ");
            }
        }
        assert!(text.len() > 3 * 64 * 64);
        check(text.as_bytes());
    }

    #[test]
    fn kernels_agree_with_one_non_ascii_character_anywhere_in_a_group() {
        // The AVX-512 kernel notes which chunks of sixteen blocks have a byte `>= 0x80` and
        // only then which of their blocks: one character at every block of a group, at either
        // end of a block and across two blocks.
        let ascii = "let x = value_of(\"key\", 42); // plain\n".repeat(140);
        for block in 0..66 {
            for offset in [0, 1, 62, 63] {
                let at = block * 64 + offset;
                let mut text = ascii[..at].to_string();
                text.push('é');
                text.push_str(&ascii[at..]);
                check(text.as_bytes());
            }
        }
    }

    #[test]
    fn kernels_agree_on_decomposed_text() {
        // Combining marks (U+0300–U+036F, leads `CC` and `CD`) after ASCII letters, one to
        // seven to a letter, at every offset of a block.
        let word = "cafe\u{301} a\u{300} Vie\u{323}\u{302}t Z\u{300}\u{301}\u{302}\u{303}\u{304}\u{305}\u{36F} ";
        for pad in 0..64 {
            let text = format!("{}{}", "x".repeat(pad), word.repeat(20));
            check(text.as_bytes());
            let scripts = count_classes(text.as_bytes()).scripts;
            let marks = super::super::scripts::SCRIPT_NAMES
                .iter()
                .position(|name| *name == "combining_marks")
                .unwrap();
            assert_eq!(scripts[marks], 20 * (1 + 1 + 2 + 7), "pad {pad}");
        }
    }

    /// [`rare_block`] of the first three bytes of `bytes`.
    fn block_of(bytes: &[u8]) -> usize {
        let mut word = [0u8; 4];
        word[..3].copy_from_slice(&bytes[..3]);
        rare_block(u32::from_le_bytes(word))
    }

    /// Counts `word` 20 times after every padding of a block, then the first `cut` bytes (0, 1
    /// or 2) of `last`, in every kernel against the reference, and hands each count and
    /// whether a sequence was cut short to `expect`.
    fn at_every_offset_and_cut(word: &str, last: char, expect: impl Fn(&ClassCounts, bool)) {
        let mut utf8 = [0u8; 4];
        let last = last.encode_utf8(&mut utf8).as_bytes();
        for pad in 0..64 {
            let text = format!("{}{}", "x".repeat(pad), word.repeat(20));
            for cut in [0, 1, 2] {
                let mut bytes = text.as_bytes().to_vec();
                bytes.extend_from_slice(&last[..cut]);
                check(&bytes);
                expect(&count_classes(&bytes), cut > 0);
            }
        }
    }

    /// Every three-byte character of `chars` is in block `expected(ch)` and not common: the
    /// AVX-512 kernel's bitmap lookup counts a rare block's characters as rare, and takes them
    /// back.
    fn assert_blocks(chars: std::ops::RangeInclusive<char>, expected: impl Fn(char) -> usize) {
        for ch in chars.filter(|ch| ch.len_utf8() == 3) {
            let mut buf = [0u8; 4];
            ch.encode_utf8(&mut buf);
            assert!(!is_common3(buf[0], buf[1], buf[2]), "{ch:?}");
            assert_eq!(block_of(&buf), expected(ch), "{ch:?}");
        }
    }

    #[test]
    fn characters_before_the_hangul_syllables_count_as_a_rare_script() {
        // Lead `EA` below U+AC00 (Yi, Vai, Javanese, the first and last such characters) beside
        // Hangul syllables (the first, U+AC00, too) and ideographs, at every offset of a block,
        // with a sequence cut short at the end.
        let word = "ꆈꌠꁱ ꕙꔤ ꦧꦱꦗꦮ \u{A000}\u{ABFF}\u{AC00} 한국 中文 ";
        at_every_offset_and_cut(word, 'ꆈ', |c, cut| {
            let pre = 20 * (3 + 2 + 4 + 2);
            assert_eq!(c.scripts[RARE_SCRIPT], pre);
            assert_eq!(c.hangul, 20 * 3 + u64::from(cut));
            assert_eq!(c.other3, pre);
            // Only the ideographs may be rare, and the cut sequence is.
            assert!(c.rare3 <= 20 * 2 + 1);
            assert_eq!(c.rare3 % 20, u64::from(cut));
        });
        assert_blocks('\u{A000}'..='\u{ABFF}', |_| RARE_OF_HANGUL);
        for (bytes, expected) in [
            ([0xEA, 0x80, 0x80], RARE_OF_HANGUL),
            ([0xEA, 0xAF, 0xBF], RARE_OF_HANGUL),
            ([0xEA, 0xB0, 0x80], NOT_RARE),
            ([0xEA, 0x80, b'a'], NOT_RARE),
            ([0xEB, 0x80, 0x80], NOT_RARE),
        ] {
            assert_eq!(block_of(&bytes), expected, "{bytes:x?}");
        }
    }

    #[test]
    fn cjk_extension_a_and_the_hexagrams_count_as_a_rare_script() {
        // CJK Extension A of lead `E3` (the first, U+3400, and the last, U+3FFF) and of lead
        // `E4`, the last of it (U+4DB5, U+4DBF), the hexagrams (U+4DC0, U+4DFF), beside kana,
        // CJK punctuation, the first ideograph of the main block (U+4E00) and others, at every
        // offset of a block, with a sequence cut short at the end.
        let word = "㐀㑇㒨 \u{3FFF}\u{4000}䀀䕫 \u{4DB5}\u{4DBF}䷀䷿ 一中文 かな。 ";
        at_every_offset_and_cut(word, '䀀', |c, cut| {
            let (of_kana, of_cjk) = (20 * 4, 20 * 7);
            assert_eq!(c.scripts[RARE_SCRIPT], of_kana + of_cjk);
            assert_eq!(c.kana, 20 * 3);
            assert_eq!(c.cjk, 20 * 3 + u64::from(cut));
            assert_eq!(c.other3, of_kana + of_cjk);
            // Only the cut sequence may be rare among the others.
            assert_eq!(c.rare3 % 20, u64::from(cut));
        });
        assert_blocks('\u{3400}'..='\u{4DFF}', |ch| {
            if ch < '\u{4000}' {
                RARE_OF_KANA
            } else {
                RARE_OF_CJK
            }
        });
        for (ch, expected) in [
            ('\u{33FF}', NOT_RARE),
            ('\u{4E00}', NOT_RARE),
            ('あ', NOT_RARE),
        ] {
            let mut buf = [0u8; 4];
            assert_eq!(
                block_of(ch.encode_utf8(&mut buf).as_bytes()),
                expected,
                "{ch:?}"
            );
        }
        // A lead without its continuations is no character of a block.
        assert_eq!(block_of(&[0xE3, 0x90, b'a']), NOT_RARE);
        assert_eq!(block_of(&[0xE4, b'a', 0x80]), NOT_RARE);
    }

    #[test]
    fn kernels_agree_on_blocks_of_one_run_of_three_byte_characters() {
        // The AVX-512 kernel counts a block's scripts at once when its leads to look up are all
        // one lead and first continuation byte of a run with one script: box drawing alone,
        // quotes alone, private use alone; and, to take the slower way, two runs, a run of two
        // scripts (U+2580–U+25BF: block elements and geometric shapes), and sequences cut
        // before or at their last byte, each alone in its block or with others.
        let pieces = [
            "├── src\n│   └── main.rs\n",
            "“quoted” — dash… ",
            "\u{E5FF}\u{E5FA} icons ",
            "├─╭╮ two runs ",
            "█▀▄ ■□ a mixed run ",
            "\u{2500}x\u{2502}",
            "cut \u{FFFD}",
        ];
        let cut: [&[u8]; 3] = [b"\xE2\x94", b"\xE2\x94a", b"\xE2\x94\x80"];
        for (i, piece) in pieces.iter().enumerate() {
            for (j, other) in pieces.iter().enumerate() {
                let mut text = Vec::new();
                for k in 0..40 {
                    text.extend_from_slice(b"plain words between ");
                    text.extend_from_slice(if k % 2 == 0 { piece } else { other }.as_bytes());
                    if k % 7 == 3 {
                        text.extend_from_slice(cut[(i + j + k) % 3]);
                    }
                }
                check(&text);
            }
        }
    }

    #[test]
    fn kernels_agree_on_real_text() {
        check(include_str!("classes.rs").as_bytes());
        check(include_str!("request.rs").as_bytes());
    }

    #[test]
    fn the_lead_lookup_matches_is_common3() {
        for b0 in 0xE3..=0xEDu8 {
            for b1 in 0..=255u8 {
                for b2 in [
                    0x00, 0x41, 0x7F, 0x80, 0x8F, 0x9A, 0xA5, 0xBF, 0xC0, 0xE3, 0xFF,
                ] {
                    let word = u32::from_le_bytes([b0, b1, b2, 0xFF]);
                    assert_eq!(
                        is_common3_lead(word),
                        is_common3(b0, b1, b2),
                        "{b0:x} {b1:x} {b2:x}"
                    );
                }
            }
        }
        // Every character of the bitmap's range, and the count of common ones.
        let mut common = 0u32;
        for c in (0x3000..0xE000u32).filter_map(char::from_u32) {
            let mut buf = [0u8; 4];
            c.encode_utf8(&mut buf);
            let fast = is_common3_lead(u32::from_le_bytes(buf));
            assert_eq!(fast, is_common3(buf[0], buf[1], buf[2]), "{c:?}");
            common += u32::from(fast);
        }
        let ones: u32 = common3_bitmap().iter().map(|w| w.count_ones()).sum();
        assert_eq!(common, ones);
    }

    /// Bytes at the edges of the classes: vowels and consonants of both cases, the rare letters
    /// and the bytes sharing their table slots (`j w` in the AVX2 kernel's; `+ 6 1 :`, control
    /// and high bytes with the same low six bits in the AVX-512 kernel's), the bytes beside
    /// `A`..=`Z`, `a`..=`z` and `0`..=`9`, the spaces, line feed, JSON punctuation, control
    /// bytes, the UTF-8 leads and continuations the multibyte classes and the rare blocks split
    /// on, and for the `th` pairs `h H` and `\xf4 \xe8` (`t` and `h` with the high bit set).
    const EDGE_BYTES: &[u8] = b"aeiouyAEIOUYbtxzBTXZkvqKVQjwJWhH\xf4\xe8+61\x0b\x16\x11\xab\xeb\xb6@[`{09/: \t\r\n\",[]{}-\x00\x1f\x7f\
        \x80\x8f\x90\x9f\xa0\xaf\xb0\xb7\xb8\xbf\xc0\xc2\xc3\xc4\xca\xcb\xcf\xd0\xd1\xd2\xdf\
        \xe0\xe2\xe3\xe4\xe9\xea\xed\xee\xef\xf0\xff";

    /// Runs of one edge byte (run lengths around the features' thresholds and the 64-byte
    /// block size) and short mixes of edge bytes, up to a few thousand bytes so that inputs
    /// cross blocks, groups of 64 blocks (the AVX2 kernel's deferred non-ASCII pass) and a
    /// tail.
    fn adversarial_bytes() -> impl Strategy<Value = Vec<u8>> {
        let edge = || proptest::sample::select(EDGE_BYTES);
        let run = (edge(), 1usize..=70).prop_map(|(b, n)| vec![b; n]);
        let mix = proptest::collection::vec(edge(), 1..40);
        proptest::collection::vec(prop_oneof![run, mix], 0..120).prop_map(|parts| parts.concat())
    }

    proptest! {
        #[test]
        fn kernels_agree_on_adversarial_bytes(bytes in adversarial_bytes()) {
            let portable = count_classes_with(&bytes, Kernel::Portable);
            prop_assert_eq!(count_classes_with(&bytes, Kernel::Avx2), portable);
            prop_assert_eq!(count_classes_with(&bytes, Kernel::Avx512), portable);
            prop_assert_eq!(portable, reference(&bytes));
            // The same bytes one position later: every run crosses block edges differently.
            let mut shifted = vec![b'a'];
            shifted.extend_from_slice(&bytes);
            let portable = count_classes_with(&shifted, Kernel::Portable);
            prop_assert_eq!(count_classes_with(&shifted, Kernel::Avx2), portable);
            prop_assert_eq!(count_classes_with(&shifted, Kernel::Avx512), portable);
        }

        #[test]
        fn kernels_match_the_reference(bytes in proptest::collection::vec(any::<u8>(), 0..700)) {
            let expected = reference(&bytes);
            for kernel in KERNELS {
                prop_assert_eq!(count_classes_with(&bytes, kernel), expected);
            }
        }

        #[test]
        fn kernels_match_on_text(s in "[a-zA-Z0-9 \\t\\r\\n{}\":,.\\-_/+=éłəˈɏαї中かㄱ한ꆈꦧ\u{ABFF}\u{AC00}\u{33FF}㐀䶵䷀一й😀ไש─\u{E000}ｆ]{0,400}") {
            let expected = reference(s.as_bytes());
            for kernel in KERNELS {
                prop_assert_eq!(count_classes_with(s.as_bytes(), kernel), expected);
            }
        }
    }
}
