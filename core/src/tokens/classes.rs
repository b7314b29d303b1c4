//! One pass over the bytes of a text, counting the character classes the estimator's linear model
//! uses.
//!
//! The text is processed in 64-byte blocks. Both kernels turn a block into a few 64-bit masks
//! (bit `i` set when byte `i` is in a class) and count with popcounts, carrying the previous
//! block's masks across block boundaries: the ASCII per-byte classes (letters, digits, spaces,
//! JSON punctuation) and the run and transition features (word starts, case changes, long runs,
//! consonant clusters, ...) are one shared function (`Runs::block`), so the kernels differ only
//! in how the masks are built (a lookup table per byte, or AVX2 compares and `vpmovmskb`).
//!
//! Non-ASCII work (UTF-8 leads by script, Cyrillic letter pairs, rare ideographs) is done only
//! for blocks that contain a byte `>= 0x80`: the AVX2 kernel marks those blocks and visits them
//! after each group of 64 blocks, counting the script leads in vector byte counters; the portable
//! kernel takes them from a byte histogram. Both kernels give identical counts; tests and the
//! fuzz target check that against a byte-at-a-time reference.

/// Number of features in [`ClassCounts::features`].
pub const FEATURE_COUNT: usize = 28;

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
];

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

/// Character-class counts of a text: the estimator's input.
///
/// Counts of multibyte characters are counts of UTF-8 lead bytes in the given range (continuation
/// bytes are not counted separately).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
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
    /// CJK ideographs (UTF-8 leads `E4`–`E9`: U+4000–U+9FFF).
    pub cjk: u64,
    /// Kana and CJK punctuation (lead `E3`: U+3000–U+3FFF).
    pub kana: u64,
    /// Hangul syllables and nearby blocks (leads `EA`–`ED`: U+A000–U+DFFF).
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
    /// Latin Extended-A/B and IPA (leads `C4`–`CA`: U+0100–U+02BF; Czech, Polish, Turkish,
    /// Romanian, Hungarian...), which tokenize worse than Latin-1.
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
    }
}

/// Per-byte classes, counted without regard to neighbours. The ASCII ones are disjoint; the
/// `GE_*` ones are thresholds (`GE_C0` counts `C0`–`FF`), the script ones subsets of them.
mod byte_class {
    pub const LOWER: usize = 0;
    pub const UPPER: usize = 1;
    pub const DIGIT: usize = 2;
    pub const SPACE: usize = 3;
    pub const NEWLINE: usize = 4;
    pub const JSON: usize = 5;
    pub const HIGH: usize = 6;
    pub const GE_C0: usize = 7;
    pub const GE_E0: usize = 8;
    pub const GE_F0: usize = 9;
    pub const CJK: usize = 10;
    pub const KANA: usize = 11;
    pub const HANGUL: usize = 12;
    pub const CYRILLIC: usize = 13;
    pub const LATIN1: usize = 14;
    pub const LATIN_EXT: usize = 15;
    /// Number of classes.
    pub const COUNT: usize = 16;
}

/// Whether byte `b` is in per-byte class `class` (the definition both kernels implement).
const fn in_byte_class(b: u8, class: usize) -> bool {
    match class {
        byte_class::LOWER => b.is_ascii_lowercase(),
        byte_class::UPPER => b.is_ascii_uppercase(),
        byte_class::DIGIT => b.is_ascii_digit(),
        byte_class::SPACE => b == b' ' || b == b'\t' || b == b'\r',
        byte_class::NEWLINE => b == b'\n',
        byte_class::JSON => matches!(b, b'{' | b'}' | b'[' | b']' | b'"' | b':' | b','),
        byte_class::HIGH => b >= 0x80,
        byte_class::GE_C0 => b >= 0xC0,
        byte_class::GE_E0 => b >= 0xE0,
        byte_class::GE_F0 => b >= 0xF0,
        byte_class::CJK => b >= 0xE4 && b <= 0xE9,
        byte_class::KANA => b == 0xE3,
        byte_class::HANGUL => b >= 0xEA && b <= 0xED,
        byte_class::CYRILLIC => b == 0xD0 || b == 0xD1,
        byte_class::LATIN1 => b == 0xC2 || b == 0xC3,
        byte_class::LATIN_EXT => b >= 0xC4 && b <= 0xCA,
        _ => false,
    }
}

/// Lead bytes of the three-byte characters looked up in the [`is_common3`] bitmap.
const fn is_east_asian_lead(b: u8) -> bool {
    b >= 0xE3 && b <= 0xED
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

/// The run and transition counts, with the carry state between blocks. Shared by both kernels
/// (the per-byte class totals are counted by each kernel in its own way: a histogram, vector
/// byte counters).
///
/// The per-block popcounts of the ten features are summed in 16-bit fields of three `u64`s
/// (four features each), spilled into `counts` every [`Runs::SPILL_EVERY`] blocks: three
/// additions per block instead of ten, and nothing for the compiler to turn into vector
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

    /// The features of block `m` other than `long_run`, `long_word` and `consonant_runs` (the
    /// run lengths, which the AVX2 kernel counts in vector registers).
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
        self.packed[2] += pop(m.high & !before(m.high, p.high)) << 16;
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
        self.packed = [0; 3];
        self.pending = 0;
    }

    /// The counts so far (the per-byte fields are filled in by the kernel).
    fn finish(mut self) -> ClassCounts {
        self.spill();
        self.counts
    }
}

/// The multibyte run features (Cyrillic pairs, rare three-byte characters) of the blocks that
/// have non-ASCII bytes, with their own carry: kernels may visit those blocks after the others.
#[derive(Debug, Default)]
struct HighRuns {
    cyrillic_ext: u64,
    cyrillic_upper: u64,
    rare3: u64,
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
        // Rare three-byte characters: a bitmap lookup per kana/CJK/hangul lead (scalar, shared
        // by both kernels; only texts in those scripts pay for it).
        let mut east_asian = h.east_asian;
        while east_asian != 0 {
            let i = index * 64 + east_asian.trailing_zeros() as usize;
            east_asian &= east_asian - 1;
            let common = match bytes.get(i..i + 3) {
                Some(&[b0, b1, b2]) => is_common3(b0, b1, b2),
                _ => false,
            };
            self.rare3 += u64::from(!common);
        }
    }

    /// Copies the counts into `c`.
    fn finish(&self, c: &mut ClassCounts) {
        c.cyrillic_ext = self.cyrillic_ext;
        c.cyrillic_upper = self.cyrillic_upper;
        c.rare3 = self.rare3;
    }
}

// Flag bits of the portable path's lookup table (the run masks and multibyte masks).
const F_LOWER: u8 = 1 << 0;
const F_UPPER: u8 = 1 << 1;
const F_DIGIT: u8 = 1 << 2;
const F_SPACE: u8 = 1 << 3;
const F_PUNCT: u8 = 1 << 4;
const F_HIGH: u8 = 1 << 5;
const F_D1: u8 = 1 << 6;
const F_EAST_ASIAN: u8 = 1 << 7;

const fn flags_of(b: u8) -> u8 {
    let mut f = 0;
    if in_byte_class(b, byte_class::LOWER) {
        f |= F_LOWER;
    }
    if in_byte_class(b, byte_class::UPPER) {
        f |= F_UPPER;
    }
    if in_byte_class(b, byte_class::DIGIT) {
        f |= F_DIGIT;
    }
    if in_byte_class(b, byte_class::SPACE) {
        f |= F_SPACE;
    }
    if b < 0x80 && f == 0 && b != b'\n' {
        f |= F_PUNCT;
    }
    if b >= 0x80 {
        f |= F_HIGH;
    }
    if b == 0xD1 {
        f |= F_D1;
    }
    if is_east_asian_lead(b) {
        f |= F_EAST_ASIAN;
    }
    f
}

static FLAGS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = flags_of(i as u8);
        i += 1;
    }
    t
};

/// Which kernel to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// The portable path: a byte histogram and a lookup table (every target).
    Portable,
    /// AVX2 vector compares and counters, POPCNT (x86_64 with AVX2, detected at run time).
    Avx2,
}

impl Kernel {
    /// The fastest kernel this CPU supports.
    pub fn detect() -> Kernel {
        #[cfg(target_arch = "x86_64")]
        {
            if avx2_supported() {
                return Kernel::Avx2;
            }
        }
        Kernel::Portable
    }
}

/// Whether the CPU has what the AVX2 kernel is compiled for (every AVX2 CPU also has POPCNT;
/// checked anyway).
#[cfg(target_arch = "x86_64")]
fn avx2_supported() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("popcnt")
}

/// Portable kernel: a byte histogram for the per-byte classes, a table lookup per byte for the
/// run masks.
fn count_portable(bytes: &[u8]) -> ClassCounts {
    let mut histogram = [0u64; 256];
    let mut runs = Runs::default();
    let mut high_runs = HighRuns::default();
    for (index, block) in bytes.chunks(64).enumerate() {
        let mut m = RunMasks::default();
        let mut h = HighMasks::default();
        for (i, &b) in block.iter().enumerate() {
            histogram[usize::from(b)] += 1;
            let f = FLAGS[usize::from(b)];
            let bit = |flag: u8| u64::from(f & flag != 0) << i;
            m.lower |= bit(F_LOWER);
            m.upper |= bit(F_UPPER);
            m.digit |= bit(F_DIGIT);
            m.space |= bit(F_SPACE);
            m.punct |= bit(F_PUNCT);
            m.high |= bit(F_HIGH);
            h.d1 |= bit(F_D1);
            h.east_asian |= bit(F_EAST_ASIAN);
            m.vowel |= u64::from(is_vowel(b)) << i;
            h.cont_9x |= u64::from((0x90..=0x9F).contains(&b)) << i;
            h.d0 |= u64::from(b == 0xD0) << i;
            h.cont_upper |= u64::from((0x80..=0xAF).contains(&b)) << i;
        }
        runs.block::<PortablePop>(m);
        if m.high != 0 {
            high_runs.block::<PortablePop>(h, bytes, index);
        }
    }
    let mut totals = [0u64; byte_class::COUNT];
    for (b, &n) in histogram.iter().enumerate() {
        if n == 0 {
            continue;
        }
        for (class, total) in totals.iter_mut().enumerate() {
            if in_byte_class(b as u8, class) {
                *total += n;
            }
        }
    }
    let mut counts = runs.finish();
    high_runs.finish(&mut counts);
    counts.bytes = bytes.len() as u64;
    apply_byte_classes(&mut counts, &totals);
    counts
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    //! The AVX2 kernel. Every function here requires AVX2 (and POPCNT), which `count` declares
    //! and its caller checks at run time.
    use super::{ClassCounts, HighMasks, HighRuns, PopCount, RunMasks, Runs, byte_class};
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

    /// ASCII vowels `a e i o u y` of either case: the same table trick on the byte with its
    /// case bit set (only letters become vowels that way), with two tables because `e`/`u` and
    /// `i`/`y` share a low nibble.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn vowel(v: __m256i) -> __m256i {
        let folded = _mm256_or_si256(v, _mm256_set1_epi8(0x20));
        let mut first = [0xFFu8; 16];
        first[0x1] = b'a';
        first[0x5] = b'e';
        first[0x9] = b'i';
        first[0xF] = b'o';
        let mut second = [0xFFu8; 16];
        second[0x5] = b'u';
        second[0x9] = b'y';
        _mm256_or_si256(
            _mm256_cmpeq_epi8(_mm256_shuffle_epi8(table(first), folded), folded),
            _mm256_cmpeq_epi8(_mm256_shuffle_epi8(table(second), folded), folded),
        )
    }

    /// The union of six compare results.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn any_of(v: [__m256i; 6]) -> __m256i {
        _mm256_or_si256(
            _mm256_or_si256(_mm256_or_si256(v[0], v[1]), _mm256_or_si256(v[2], v[3])),
            _mm256_or_si256(v[4], v[5]),
        )
    }

    /// The sign bits of the 32 bytes of `v` (`vpmovmskb`). Written as inline assembly on
    /// purpose: with the intrinsic, LLVM folds the masks' later integer logic back into vectors
    /// of booleans, which AVX2 cannot hold, and expands them byte by byte (4× slower).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn movemask(v: __m256i) -> u32 {
        let bits: u32;
        // SAFETY: `vpmovmskb` only reads the vector register and writes the general-purpose
        // one; AVX2 is enabled for this function, so the instruction exists.
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
        u64::from(movemask(a)) | (u64::from(movemask(b)) << 32)
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

    /// The run-length features (`long_run`, `long_word`, `consonant_runs`) in vector registers:
    /// the alphanumeric, letter and consonant masks of a block side by side in the four `u64`
    /// lanes (consonants twice, for runs of [`super::CONSONANT_RUN`] and of
    /// [`super::CONSONANT_RUN_END`]` + 1`),
    /// shifted by a different amount per lane so that one chain of four steps finds every run
    /// end, with the previous block's masks as the carry. The scalar chain (`run_ends`) of the
    /// portable kernel kept a dozen 128-bit values in general-purpose registers.
    struct RunLengths {
        prev: __m256i,
        /// Bit counts per lane: `long_run`, `long_word`, `consonant_runs`, unused.
        totals: __m256i,
        /// Bit counts of the lower, upper, digit and space masks (the per-byte classes that
        /// have a mask anyway: counting them from it keeps fewer vector counters live).
        classes: __m256i,
    }

    /// Per-lane shifts of the four steps: after a step by `s` (at most the run length already
    /// reached), a bit is set where a run `s` longer ends. Alphanumerics reach 16
    /// ([`super::LONG_RUN`]), letters 8 ([`super::LONG_WORD`]), consonants 3 and 7.
    const RUN_STEPS: [[i64; 4]; 4] = [[1, 1, 1, 1], [2, 2, 1, 2], [4, 4, 0, 3], [8, 0, 0, 0]];
    const _: () = {
        assert!(super::LONG_RUN == 16 && super::LONG_WORD == 8);
        assert!(super::CONSONANT_RUN == 3 && super::CONSONANT_RUN_END + 1 == 7);
    };

    impl RunLengths {
        #[inline]
        #[target_feature(enable = "avx2")]
        fn new() -> RunLengths {
            RunLengths {
                prev: _mm256_setzero_si256(),
                totals: _mm256_setzero_si256(),
                classes: _mm256_setzero_si256(),
            }
        }

        #[inline]
        #[target_feature(enable = "avx2")]
        fn block(&mut self, alnum: u64, letter: u64, consonant: u64) {
            let low = _mm_insert_epi64(_mm_cvtsi64_si128(alnum as i64), letter as i64, 1);
            let high = _mm_set1_epi64x(consonant as i64);
            let current = _mm256_inserti128_si256(_mm256_castsi128_si256(low), high, 1);
            let (mut run, mut carry) = (current, self.prev);
            for step in RUN_STEPS {
                let by = _mm256_setr_epi64x(step[0], step[1], step[2], step[3]);
                let rest = _mm256_sub_epi64(_mm256_set1_epi64x(64), by);
                // 128-bit `(run:carry) &= (run:carry) << by` per lane (a shift by 64 gives 0).
                let shifted =
                    _mm256_or_si256(_mm256_sllv_epi64(run, by), _mm256_srlv_epi64(carry, rest));
                run = _mm256_and_si256(run, shifted);
                carry = _mm256_and_si256(carry, _mm256_sllv_epi64(carry, by));
            }
            self.prev = current;
            // Lane 2: consonants at positions 3..=6 (runs of 3 minus runs of 7).
            let longer = _mm256_blend_epi32(
                _mm256_setzero_si256(),
                _mm256_permute4x64_epi64(run, 0b11_11_11_11),
                0b0011_0000,
            );
            let features = _mm256_andnot_si256(longer, run);
            self.totals = _mm256_add_epi64(self.totals, popcount_lanes(features));
        }

        /// Counts the bits of four per-byte class masks.
        #[inline]
        #[target_feature(enable = "avx2")]
        fn classes(&mut self, lower: u64, upper: u64, digit: u64, space: u64) {
            let low = _mm_insert_epi64(_mm_cvtsi64_si128(lower as i64), upper as i64, 1);
            let high = _mm_insert_epi64(_mm_cvtsi64_si128(digit as i64), space as i64, 1);
            let masks = _mm256_inserti128_si256(_mm256_castsi128_si256(low), high, 1);
            self.classes = _mm256_add_epi64(self.classes, popcount_lanes(masks));
        }

        /// The totals of the class masks: lower, upper, digit, space.
        #[inline]
        #[target_feature(enable = "avx2")]
        fn class_totals(&self) -> [u64; 4] {
            let mut lanes = [0u64; 4];
            // SAFETY: `lanes` is 32 writable bytes; the unaligned store writes exactly them.
            unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), self.classes) };
            lanes
        }

        /// Adds the totals to `c`.
        #[inline]
        #[target_feature(enable = "avx2")]
        fn finish(&self, c: &mut ClassCounts) {
            let mut lanes = [0u64; 4];
            // SAFETY: `lanes` is 32 writable bytes; the unaligned store writes exactly them.
            unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), self.totals) };
            c.long_run += lanes[0];
            c.long_word += lanes[1];
            c.consonant_runs += lanes[2];
        }
    }

    /// The number of set bits of each `u64` lane (nibble table lookups, summed per lane).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn popcount_lanes(v: __m256i) -> __m256i {
        let bits = table([0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4]);
        let nibble = _mm256_set1_epi8(0x0F);
        let low = _mm256_shuffle_epi8(bits, _mm256_and_si256(v, nibble));
        let high = _mm256_shuffle_epi8(bits, _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble));
        _mm256_sad_epu8(_mm256_add_epi8(low, high), _mm256_setzero_si256())
    }

    /// Counters of the per-byte classes that have no mask of their own: line feeds, JSON
    /// punctuation and bytes `>= 0x80`, in this order.
    type AsciiCounters = Counters<3>;
    /// The classes of [`AsciiCounters`].
    const ASCII_COUNTED: [usize; 3] = [byte_class::NEWLINE, byte_class::JSON, byte_class::HIGH];

    /// Counters of the multibyte classes (`byte_class::GE_C0..`), offset by `GE_C0`.
    type HighCounters = Counters<{ byte_class::COUNT - byte_class::GE_C0 }>;

    /// The non-ASCII part of block `index` (its bytes `a`, `b`), which has a byte `>= 0x80`.
    #[inline(never)]
    #[target_feature(enable = "avx2,popcnt")]
    fn high_block(
        counters: &mut HighCounters,
        runs: &mut HighRuns,
        a: __m256i,
        b: __m256i,
        bytes: &[u8],
        index: usize,
    ) {
        let mut add = |class: usize, x, y| counters.add(class - byte_class::GE_C0, x, y);
        add(byte_class::GE_C0, at_least(a, 0xC0), at_least(b, 0xC0));
        add(byte_class::GE_E0, at_least(a, 0xE0), at_least(b, 0xE0));
        add(byte_class::GE_F0, at_least(a, 0xF0), at_least(b, 0xF0));
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
            in_range(a, 0xC4, 0xCA),
            in_range(b, 0xC4, 0xCA),
        );
        runs.block::<Popcnt>(
            HighMasks {
                d1: mask(eq(a, 0xD1), eq(b, 0xD1)),
                cont_9x: mask(in_range(a, 0x90, 0x9F), in_range(b, 0x90, 0x9F)),
                d0: mask(eq(a, 0xD0), eq(b, 0xD0)),
                cont_upper: mask(in_range(a, 0x80, 0xAF), in_range(b, 0x80, 0xAF)),
                east_asian: mask(in_range(a, 0xE3, 0xED), in_range(b, 0xE3, 0xED)),
            },
            bytes,
            index,
        );
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
    /// the rest is zero padding, which no per-byte class counts). Evaluates to whether the block
    /// has a byte `>= 0x80`, for which the caller runs [`high_block`]. A macro rather than a
    /// function: LLVM does not inline a function this size called from two places, and through
    /// a call the counters live in memory.
    macro_rules! ascii_block {
        ($runs:expr, $lengths:expr, $counters:expr, $a:expr, $b:expr, $valid:expr) => {{
            let runs: &mut Runs = $runs;
            let lengths: &mut RunLengths = $lengths;
            let counters: &mut AsciiCounters = $counters;
            let (a, b): (__m256i, __m256i) = ($a, $b);
            let valid: u64 = $valid;
            let (lower_a, lower_b) = (in_range(a, b'a', b'z'), in_range(b, b'a', b'z'));
            let (upper_a, upper_b) = (in_range(a, b'A', b'Z'), in_range(b, b'A', b'Z'));
            let (digit_a, digit_b) = (in_range(a, b'0', b'9'), in_range(b, b'0', b'9'));
            let (space_a, space_b) = (space(a), space(b));
            let (newline_a, newline_b) = (eq(a, b'\n'), eq(b, b'\n'));
            let zero = _mm256_setzero_si256();
            let (high_a, high_b) = (_mm256_cmpgt_epi8(zero, a), _mm256_cmpgt_epi8(zero, b));
            let other_a = any_of([lower_a, upper_a, digit_a, space_a, newline_a, high_a]);
            let other_b = any_of([lower_b, upper_b, digit_b, space_b, newline_b, high_b]);
            // Padding bytes are zero, which is in none of these classes.
            counters.add(0, newline_a, newline_b);
            counters.add(1, json(a), json(b));
            counters.add(2, high_a, high_b);
            let high = mask(a, b) & valid;
            let (lower, upper) = (mask(lower_a, lower_b), mask(upper_a, upper_b));
            let digit = mask(digit_a, digit_b);
            let consonant = mask(
                _mm256_andnot_si256(vowel(a), _mm256_or_si256(lower_a, upper_a)),
                _mm256_andnot_si256(vowel(b), _mm256_or_si256(lower_b, upper_b)),
            );
            let space = mask(space_a, space_b);
            lengths.block(lower | upper | digit, lower | upper, consonant);
            lengths.classes(lower, upper, digit, space);
            runs.transitions::<Popcnt>(RunMasks {
                lower,
                upper,
                digit,
                space,
                punct: !mask(other_a, other_b) & valid,
                high,
                // Only the run lengths need vowels.
                vowel: 0,
            });
            high != 0
        }};
    }

    /// Counts the classes of `bytes`.
    ///
    /// Blocks are visited in groups of [`DRAIN_EVERY`]: first the ASCII part of every block
    /// (a tight loop with its counters in registers), then the non-ASCII part of the blocks
    /// that need it, then the counters are drained.
    #[target_feature(enable = "avx2,popcnt")]
    pub(super) fn count(bytes: &[u8]) -> ClassCounts {
        let mut high = HighCounters::new();
        let mut ascii = AsciiCounters::new();
        let mut lengths = RunLengths::new();
        let mut runs = Runs::default();
        let mut high_runs = HighRuns::default();
        let blocks = bytes.chunks_exact(64);
        let tail = blocks.remainder();
        let full = bytes.len() / 64;
        let mut group_start = 0;
        while group_start < full {
            let group_end = full.min(group_start + DRAIN_EVERY);
            // Bit `i`: block `group_start + i` has non-ASCII bytes.
            let mut deferred = 0u64;
            for (i, block) in bytes[group_start * 64..group_end * 64]
                .chunks_exact(64)
                .enumerate()
            {
                // SAFETY: `block` is 64 bytes.
                let (a, b) = unsafe { load(block.as_ptr()) };
                let has_high = ascii_block!(&mut runs, &mut lengths, &mut ascii, a, b, u64::MAX);
                deferred |= u64::from(has_high) << i;
            }
            while deferred != 0 {
                let index = group_start + deferred.trailing_zeros() as usize;
                deferred &= deferred - 1;
                if let Some(block) = bytes.get(index * 64..index * 64 + 64) {
                    // SAFETY: `block` is 64 bytes.
                    let (a, b) = unsafe { load(block.as_ptr()) };
                    high_block(&mut high, &mut high_runs, a, b, bytes, index);
                }
            }
            high.drain();
            ascii.drain();
            group_start = group_end;
        }
        if !tail.is_empty() {
            let mut padded = [0u8; 64];
            padded[..tail.len()].copy_from_slice(tail);
            let valid = (1u64 << tail.len()) - 1;
            // SAFETY: `padded` is 64 bytes.
            let (a, b) = unsafe { load(padded.as_ptr()) };
            if ascii_block!(&mut runs, &mut lengths, &mut ascii, a, b, valid) {
                high_block(&mut high, &mut high_runs, a, b, bytes, full);
            }
            high.drain();
            ascii.drain();
        }
        let mut totals = [0u64; byte_class::COUNT];
        let mut counts = runs.finish();
        lengths.finish(&mut counts);
        for (class, total) in ASCII_COUNTED.into_iter().zip(ascii.totals) {
            totals[class] = total;
        }
        let [lower, upper, digit, space] = lengths.class_totals();
        totals[byte_class::LOWER] = lower;
        totals[byte_class::UPPER] = upper;
        totals[byte_class::DIGIT] = digit;
        totals[byte_class::SPACE] = space;
        totals[byte_class::GE_C0..].copy_from_slice(&high.totals);
        high_runs.finish(&mut counts);
        counts.bytes = bytes.len() as u64;
        super::apply_byte_classes(&mut counts, &totals);
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
            // SAFETY: AVX2 and POPCNT support was just checked.
            unsafe { avx2::count(bytes) }
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
        for (i, &b) in bytes.iter().enumerate() {
            if is_east_asian_lead(b) {
                let common = match bytes.get(i..i + 3) {
                    Some(&[b0, b1, b2]) => is_common3(b0, b1, b2),
                    _ => false,
                };
                c.rare3 += u64::from(!common);
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
                0xC4..=0xCA => c.latin_ext += 1,
                0xC0..=0xDF => c.other2 += 1,
                0xE0..=0xEF => c.other3 += 1,
                0xF0..=0xFF => c.four += 1,
                _ => {}
            }
            prev = Some(b);
        }
        c
    }

    fn check(bytes: &[u8]) {
        let expected = reference(bytes);
        assert_eq!(count_classes_with(bytes, Kernel::Portable), expected);
        assert_eq!(count_classes_with(bytes, Kernel::detect()), expected);
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
    fn kernels_agree_on_real_text() {
        check(include_str!("classes.rs").as_bytes());
        check(include_str!("request.rs").as_bytes());
    }

    proptest! {
        #[test]
        fn kernels_match_the_reference(bytes in proptest::collection::vec(any::<u8>(), 0..700)) {
            let expected = reference(&bytes);
            prop_assert_eq!(count_classes_with(&bytes, Kernel::Portable), expected);
            prop_assert_eq!(count_classes_with(&bytes, Kernel::detect()), expected);
        }

        #[test]
        fn kernels_match_on_text(s in "[a-zA-Z0-9 \\t\\r\\n{}\":,.\\-_/+=éłαї中かㄱ한й😀]{0,400}") {
            let expected = reference(s.as_bytes());
            prop_assert_eq!(count_classes_with(s.as_bytes(), Kernel::Portable), expected);
            prop_assert_eq!(count_classes_with(s.as_bytes(), Kernel::detect()), expected);
        }
    }
}
