//! One pass over the bytes of a text, counting the character classes the estimator's linear model
//! uses.
//!
//! The text is processed in 64-byte blocks. Each block is turned into a set of 64-bit masks (bit
//! `i` set when byte `i` belongs to a class); every count is then a popcount over a mask or over a
//! combination of masks with the previous block's carry bits (run starts, case changes, long
//! runs). Only the mask construction differs between the portable path (a 256-entry lookup table)
//! and the AVX2 path (vector compares and `movemask`), so both give identical counts; a test
//! checks that on random and real inputs.

/// Number of features in [`ClassCounts::features`].
pub const FEATURE_COUNT: usize = 26;

/// Feature names, in the order of [`ClassCounts::features`] (used by the fitting tool and in
/// generated coefficient tables).
pub const FEATURE_NAMES: [&str; FEATURE_COUNT] = [
    "letters",
    "word_starts",
    "upper",
    "case_changes",
    "digits",
    "digit_runs",
    "alnum_switches",
    "long_run",
    "long_word",
    "spaces",
    "space_runs",
    "newlines",
    "punct",
    "json",
    "punct_runs",
    "punct_repeats",
    "cjk",
    "kana",
    "hangul",
    "cyrillic",
    "cyrillic_ext",
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
    /// Punctuation bytes equal to the byte before them (`----`, `====`, `...`: BPE merges them).
    pub punct_repeats: u64,
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
    /// Other two-byte characters (accented Latin, Greek, Hebrew, Arabic, ...).
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
            (self.lower + self.upper) as f64,
            self.word_starts as f64,
            self.upper as f64,
            self.case_changes as f64,
            self.digits as f64,
            self.digit_runs as f64,
            self.alnum_switches as f64,
            self.long_run as f64,
            self.long_word as f64,
            self.spaces as f64,
            self.space_runs as f64,
            self.newlines as f64,
            self.punct as f64,
            self.json as f64,
            self.punct_runs as f64,
            self.punct_repeats as f64,
            self.cjk as f64,
            self.kana as f64,
            self.hangul as f64,
            self.cyrillic as f64,
            self.cyrillic_ext as f64,
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
        self.punct_repeats += other.punct_repeats;
        self.space_runs += other.space_runs;
        self.case_changes += other.case_changes;
        self.alnum_switches += other.alnum_switches;
        self.long_run += other.long_run;
        self.long_word += other.long_word;
        self.cjk += other.cjk;
        self.kana += other.kana;
        self.hangul += other.hangul;
        self.cyrillic += other.cyrillic;
        self.cyrillic_ext += other.cyrillic_ext;
        self.other2 += other.other2;
        self.other3 += other.other3;
        self.four += other.four;
        self.high_runs += other.high_runs;
        self.rare3 += other.rare3;
    }
}

/// The raw per-block masks produced by either mask builder. Derived classes (punctuation, leads,
/// "other") are computed from these in [`Accumulator::block`], shared by both paths.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct BlockMasks {
    lower: u64,
    upper: u64,
    digit: u64,
    space: u64,
    newline: u64,
    json: u64,
    /// Bytes equal to the byte before them.
    repeat: u64,
    /// Bytes `90`–`9F` after a `D1` (the second byte of U+0450–U+045F).
    cyrillic_ext: u64,
    /// Bytes `>= 0x80`.
    high: u64,
    /// Bytes `>= 0xC0` or ASCII (so `high & ge_c0` are lead bytes).
    ge_c0: u64,
    /// Bytes `>= 0xE0` or ASCII.
    ge_e0: u64,
    /// Bytes `>= 0xF0` or ASCII.
    ge_f0: u64,
    cjk: u64,
    kana: u64,
    hangul: u64,
    cyrillic: u64,
}

// Flag bits of the portable path's lookup table.
const F_LOWER: u16 = 1 << 0;
const F_UPPER: u16 = 1 << 1;
const F_DIGIT: u16 = 1 << 2;
const F_SPACE: u16 = 1 << 3;
const F_NEWLINE: u16 = 1 << 4;
const F_JSON: u16 = 1 << 5;
const F_HIGH: u16 = 1 << 6;
const F_GE_C0: u16 = 1 << 7;
const F_GE_E0: u16 = 1 << 8;
const F_GE_F0: u16 = 1 << 9;
const F_CJK: u16 = 1 << 10;
const F_KANA: u16 = 1 << 11;
const F_HANGUL: u16 = 1 << 12;
const F_CYRILLIC: u16 = 1 << 13;

const fn flags_of(b: u8) -> u16 {
    let mut f = 0;
    if b.is_ascii_lowercase() {
        f |= F_LOWER;
    }
    if b.is_ascii_uppercase() {
        f |= F_UPPER;
    }
    if b.is_ascii_digit() {
        f |= F_DIGIT;
    }
    if b == b' ' || b == b'\t' || b == b'\r' {
        f |= F_SPACE;
    }
    if b == b'\n' {
        f |= F_NEWLINE;
    }
    if matches!(b, b'{' | b'}' | b'[' | b']' | b'"' | b':' | b',') {
        f |= F_JSON;
    }
    if b >= 0x80 {
        f |= F_HIGH;
    }
    if b >= 0xC0 || b < 0x80 {
        f |= F_GE_C0;
    }
    if b >= 0xE0 || b < 0x80 {
        f |= F_GE_E0;
    }
    if b >= 0xF0 || b < 0x80 {
        f |= F_GE_F0;
    }
    if b >= 0xE4 && b <= 0xE9 {
        f |= F_CJK;
    }
    if b == 0xE3 {
        f |= F_KANA;
    }
    if b >= 0xEA && b <= 0xED {
        f |= F_HANGUL;
    }
    if b == 0xD0 || b == 0xD1 {
        f |= F_CYRILLIC;
    }
    f
}

static FLAGS: [u16; 256] = {
    let mut t = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = flags_of(i as u8);
        i += 1;
    }
    t
};

/// A block plus the byte before it: `window[0]` is the previous byte, `window[1..]` the block.
type Window = [u8; 65];

/// Portable mask builder: one table lookup per byte.
fn masks_portable(window: &Window) -> BlockMasks {
    let mut m = BlockMasks::default();
    for (i, pair) in window.windows(2).enumerate() {
        let b = pair[1];
        m.repeat |= u64::from(pair[0] == b) << i;
        m.cyrillic_ext |= u64::from(pair[0] == 0xD1 && (0x90..=0x9F).contains(&b)) << i;
        let f = u64::from(FLAGS[usize::from(b)]);
        let bit = |flag: u16| ((f >> flag.trailing_zeros()) & 1) << i;
        m.lower |= bit(F_LOWER);
        m.upper |= bit(F_UPPER);
        m.digit |= bit(F_DIGIT);
        m.space |= bit(F_SPACE);
        m.newline |= bit(F_NEWLINE);
        m.json |= bit(F_JSON);
        m.high |= bit(F_HIGH);
        m.ge_c0 |= bit(F_GE_C0);
        m.ge_e0 |= bit(F_GE_E0);
        m.ge_f0 |= bit(F_GE_F0);
        m.cjk |= bit(F_CJK);
        m.kana |= bit(F_KANA);
        m.hangul |= bit(F_HANGUL);
        m.cyrillic |= bit(F_CYRILLIC);
    }
    m
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    //! AVX2 mask builder. Only called from `count_avx2`, which has the feature enabled.
    use super::BlockMasks;
    use std::arch::x86_64::*;

    /// Bytes of `v` in the unsigned range `lo..=hi`.
    #[target_feature(enable = "avx2")]
    fn in_range(v: __m256i, lo: u8, hi: u8) -> __m256i {
        let shifted = _mm256_sub_epi8(v, _mm256_set1_epi8(lo as i8));
        let span = _mm256_set1_epi8((hi - lo) as i8);
        _mm256_cmpeq_epi8(_mm256_min_epu8(shifted, span), shifted)
    }

    #[target_feature(enable = "avx2")]
    fn eq(v: __m256i, b: u8) -> __m256i {
        _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b as i8))
    }

    /// Bytes `>= b` (for `b >= 0x80`) or ASCII: a signed compare against `b - 1`.
    #[target_feature(enable = "avx2")]
    fn ge_or_ascii(v: __m256i, b: u8) -> __m256i {
        let above = _mm256_cmpgt_epi8(v, _mm256_set1_epi8(b.wrapping_sub(1) as i8));
        let ascii = _mm256_cmpgt_epi8(v, _mm256_set1_epi8(-1));
        _mm256_or_si256(above, ascii)
    }

    /// JSON structural characters via a nibble lookup: `LO[low nibble]` holds one bit per high
    /// nibble (0..=7) for which the byte is in the set.
    #[target_feature(enable = "avx2")]
    fn json(v: __m256i) -> __m256i {
        // '"' 0x22, ',' 0x2C, ':' 0x3A, '[' 0x5B, ']' 0x5D, '{' 0x7B, '}' 0x7D
        let mut lo = [0i8; 16];
        lo[0x2] = 1 << 2;
        lo[0xC] = 1 << 2;
        lo[0xA] = 1 << 3;
        lo[0xB] = (1 << 5) | (1u8 << 7) as i8;
        lo[0xD] = (1 << 5) | (1u8 << 7) as i8;
        let hi: [i8; 16] = [
            1,
            2,
            4,
            8,
            16,
            32,
            64,
            (1u8 << 7) as i8,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
        ];
        let lo_t = _mm256_setr_epi8(
            lo[0], lo[1], lo[2], lo[3], lo[4], lo[5], lo[6], lo[7], lo[8], lo[9], lo[10], lo[11],
            lo[12], lo[13], lo[14], lo[15], lo[0], lo[1], lo[2], lo[3], lo[4], lo[5], lo[6], lo[7],
            lo[8], lo[9], lo[10], lo[11], lo[12], lo[13], lo[14], lo[15],
        );
        let hi_t = _mm256_setr_epi8(
            hi[0], hi[1], hi[2], hi[3], hi[4], hi[5], hi[6], hi[7], hi[8], hi[9], hi[10], hi[11],
            hi[12], hi[13], hi[14], hi[15], hi[0], hi[1], hi[2], hi[3], hi[4], hi[5], hi[6], hi[7],
            hi[8], hi[9], hi[10], hi[11], hi[12], hi[13], hi[14], hi[15],
        );
        let nib = _mm256_set1_epi8(0x0F);
        let lo_n = _mm256_and_si256(v, nib);
        let hi_n = _mm256_and_si256(_mm256_srli_epi16(v, 4), nib);
        let hit = _mm256_and_si256(
            _mm256_shuffle_epi8(lo_t, lo_n),
            _mm256_shuffle_epi8(hi_t, hi_n),
        );
        let zero = _mm256_setzero_si256();
        _mm256_andnot_si256(_mm256_cmpeq_epi8(hit, zero), _mm256_set1_epi8(-1))
    }

    #[target_feature(enable = "avx2")]
    fn mask(a: __m256i, b: __m256i) -> u64 {
        let lo = _mm256_movemask_epi8(a) as u32 as u64;
        let hi = _mm256_movemask_epi8(b) as u32 as u64;
        lo | (hi << 32)
    }

    /// AVX2 mask builder. Identical results to `masks_portable`.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn masks(window: &super::Window) -> BlockMasks {
        let p = window.as_ptr();
        // SAFETY: `window` is 65 readable bytes; the four unaligned 32-byte loads read bytes
        // 1..33, 33..65 (the block) and 0..32, 32..64 (the block shifted by one byte).
        let (a, b, a_prev, b_prev) = unsafe {
            (
                _mm256_loadu_si256(p.add(1).cast()),
                _mm256_loadu_si256(p.add(33).cast()),
                _mm256_loadu_si256(p.cast()),
                _mm256_loadu_si256(p.add(32).cast()),
            )
        };
        let space = |v| _mm256_or_si256(_mm256_or_si256(eq(v, b' '), eq(v, b'\t')), eq(v, b'\r'));
        let ascii = BlockMasks {
            lower: mask(in_range(a, b'a', b'z'), in_range(b, b'a', b'z')),
            upper: mask(in_range(a, b'A', b'Z'), in_range(b, b'A', b'Z')),
            digit: mask(in_range(a, b'0', b'9'), in_range(b, b'0', b'9')),
            space: mask(space(a), space(b)),
            newline: mask(eq(a, b'\n'), eq(b, b'\n')),
            json: mask(json(a), json(b)),
            repeat: mask(_mm256_cmpeq_epi8(a, a_prev), _mm256_cmpeq_epi8(b, b_prev)),
            high: mask(a, b),
            ..BlockMasks::default()
        };
        if ascii.high == 0 {
            // All-ASCII block: every multibyte mask is empty (the "or ASCII" masks only matter
            // ANDed with `high`).
            return ascii;
        }
        BlockMasks {
            cyrillic_ext: mask(
                _mm256_and_si256(eq(a_prev, 0xD1), in_range(a, 0x90, 0x9F)),
                _mm256_and_si256(eq(b_prev, 0xD1), in_range(b, 0x90, 0x9F)),
            ),
            ge_c0: mask(ge_or_ascii(a, 0xC0), ge_or_ascii(b, 0xC0)),
            ge_e0: mask(ge_or_ascii(a, 0xE0), ge_or_ascii(b, 0xE0)),
            ge_f0: mask(ge_or_ascii(a, 0xF0), ge_or_ascii(b, 0xF0)),
            cjk: mask(in_range(a, 0xE4, 0xE9), in_range(b, 0xE4, 0xE9)),
            kana: mask(eq(a, 0xE3), eq(b, 0xE3)),
            hangul: mask(in_range(a, 0xEA, 0xED), in_range(b, 0xEA, 0xED)),
            cyrillic: mask(in_range(a, 0xD0, 0xD1), in_range(b, 0xD0, 0xD1)),
            ..ascii
        }
    }
}

/// Whether the CPU has what the AVX2 kernel is compiled for (every AVX2 CPU also has POPCNT and
/// BMI1; checked anyway).
#[cfg(target_arch = "x86_64")]
fn avx2_supported() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("popcnt")
        && std::arch::is_x86_feature_detected!("bmi1")
}

/// Which mask builder to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// The portable lookup-table path (every target).
    Portable,
    /// AVX2 vector compares and POPCNT (x86_64 with AVX2, detected at run time).
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

/// Carry state between blocks plus the running counts.
#[derive(Debug, Default)]
struct Accumulator {
    counts: ClassCounts,
    prev_letter: u64,
    prev_lower: u64,
    prev_digit: u64,
    prev_space: u64,
    prev_punct: u64,
    prev_high: u64,
    prev_alnum: u64,
}

#[inline(always)]
fn pop(x: u64) -> u64 {
    u64::from(x.count_ones())
}

impl Accumulator {
    /// Folds one block's masks into the counts; `valid` has a bit per real (non-padding) byte.
    #[inline(always)]
    fn block(&mut self, m: BlockMasks, valid: u64, bytes: &[u8], start: usize) {
        let c = &mut self.counts;
        let lower = m.lower & valid;
        let upper = m.upper & valid;
        let digit = m.digit & valid;
        let space = m.space & valid;
        let newline = m.newline & valid;
        let json = m.json & valid;
        let high = m.high & valid;
        let letter = lower | upper;
        let alnum = letter | digit;
        let punct = valid & !(letter | digit | space | newline | json | high);
        let any_punct = punct | json;

        // `x << 1 | carry` puts the previous byte's bit under each byte.
        let before = |x: u64, prev: u64| (x << 1) | (prev >> 63);
        c.lower += pop(lower);
        c.upper += pop(upper);
        c.digits += pop(digit);
        c.spaces += pop(space);
        c.newlines += pop(newline);
        c.json += pop(json);
        c.punct += pop(punct);
        c.word_starts += pop(letter & !before(letter, self.prev_letter));
        c.digit_runs += pop(digit & !before(digit, self.prev_digit));
        c.punct_runs += pop(any_punct & !before(any_punct, self.prev_punct));
        c.punct_repeats += pop(any_punct & m.repeat);
        c.space_runs += pop(space & !before(space, self.prev_space));
        c.case_changes += pop(upper & before(lower, self.prev_lower));
        c.alnum_switches +=
            pop((letter & before(digit, self.prev_digit))
                | (digit & before(letter, self.prev_letter)));
        // Bits where LONG_RUN consecutive alphanumeric bytes end, looking back into the previous
        // block through a 128-bit window.
        let mut run = (u128::from(alnum) << 64) | u128::from(self.prev_alnum);
        let mut width = 1;
        while width < LONG_RUN {
            run &= run << width;
            width *= 2;
        }
        c.long_run += pop((run >> 64) as u64);
        let mut word = (u128::from(letter) << 64) | u128::from(self.prev_letter);
        let mut width = 1;
        while width < LONG_WORD {
            word &= word << width;
            width *= 2;
        }
        c.long_word += pop((word >> 64) as u64);
        if high != 0 {
            self.multibyte(&m, valid, high, bytes, start);
        }

        self.prev_letter = letter;
        self.prev_lower = lower;
        self.prev_digit = digit;
        self.prev_space = space;
        self.prev_punct = any_punct;
        self.prev_high = high;
        self.prev_alnum = alnum;
    }

    /// The non-ASCII counts of a block that has non-ASCII bytes.
    #[inline(always)]
    fn multibyte(&mut self, m: &BlockMasks, valid: u64, high: u64, bytes: &[u8], start: usize) {
        let c = &mut self.counts;
        let before = |x: u64, prev: u64| (x << 1) | (prev >> 63);
        c.high_runs += pop(high & !before(high, self.prev_high));
        let lead = high & m.ge_c0;
        let lead3 = lead & m.ge_e0;
        let lead4 = lead & m.ge_f0;
        let cjk = m.cjk & valid;
        let kana = m.kana & valid;
        let hangul = m.hangul & valid;
        let cyrillic = m.cyrillic & valid;
        let other3 = lead3 & !lead4 & !(cjk | kana | hangul);
        let other2 = lead & !lead3 & !cyrillic;
        c.cjk += pop(cjk);
        c.kana += pop(kana);
        c.hangul += pop(hangul);
        c.cyrillic += pop(cyrillic);
        c.cyrillic_ext += pop(m.cyrillic_ext & valid);
        c.other2 += pop(other2);
        c.other3 += pop(other3);
        c.four += pop(lead4);
        // Rare three-byte characters: a bitmap lookup per kana/CJK/hangul character (scalar,
        // shared by both kernels; only texts in those scripts pay for it).
        let mut east_asian = cjk | kana | hangul;
        while east_asian != 0 {
            let i = start + east_asian.trailing_zeros() as usize;
            east_asian &= east_asian - 1;
            let common = match bytes.get(i..i + 3) {
                Some(&[b0, b1, b2]) => is_common3(b0, b1, b2),
                _ => false,
            };
            c.rare3 += u64::from(!common);
        }
    }
}

/// The block loop, expanded in place for each mask builder (a macro rather than a generic
/// function taking a closure: through a closure the AVX2 loop paid an indirect call per block).
macro_rules! count_blocks {
    ($bytes:expr, $masks:path) => {{
        let bytes: &[u8] = $bytes;
        let mut acc = Accumulator::default();
        if let Some(&first) = bytes.first() {
            let full = bytes.len() / 64;
            let mut window = [0u8; 65];
            for index in 0..full {
                let start = index * 64;
                let masks = if index == 0 {
                    // No byte precedes the text: use one that differs from the first byte.
                    window[0] = !first;
                    window[1..].copy_from_slice(&bytes[..64]);
                    $masks(&window)
                } else {
                    match <&Window>::try_from(&bytes[start - 1..start + 64]) {
                        Ok(w) => $masks(w),
                        Err(_) => continue,
                    }
                };
                acc.block(masks, u64::MAX, bytes, start);
            }
            let tail = &bytes[full * 64..];
            if !tail.is_empty() {
                window = [0u8; 65];
                window[0] = if full == 0 {
                    !first
                } else {
                    bytes[full * 64 - 1]
                };
                window[1..=tail.len()].copy_from_slice(tail);
                let valid = (1u64 << tail.len()) - 1;
                acc.block($masks(&window), valid, bytes, full * 64);
            }
            acc.counts.bytes = bytes.len() as u64;
        }
        acc.counts
    }};
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt,bmi1")]
fn count_avx2(bytes: &[u8]) -> ClassCounts {
    count_blocks!(bytes, avx2::masks)
}

/// Counts the character classes of `bytes` with the given kernel. A kernel the CPU does not
/// support falls back to [`Kernel::Portable`].
pub fn count_classes_with(bytes: &[u8], kernel: Kernel) -> ClassCounts {
    match kernel {
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 if avx2_supported() => {
            // SAFETY: AVX2, POPCNT and BMI1 support was just checked.
            unsafe { count_avx2(bytes) }
        }
        _ => count_blocks!(bytes, masks_portable),
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
        for (i, &b) in bytes.iter().enumerate() {
            if matches!(b, 0xE3..=0xED) {
                let common = match bytes.get(i..i + 3) {
                    Some(&[b0, b1, b2]) => is_common3(b0, b1, b2),
                    _ => false,
                };
                c.rare3 += u64::from(!common);
            }
        }
        let is_punct = |b: u8| {
            b < 0x80 && flags_of(b) & (F_LOWER | F_UPPER | F_DIGIT | F_SPACE | F_NEWLINE) == 0
        };
        for &b in bytes {
            let p = prev.unwrap_or(b' ');
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
            let space = matches!(b, b' ' | b'\t' | b'\r');
            c.spaces += u64::from(space);
            c.newlines += u64::from(b == b'\n');
            let json = flags_of(b) & F_JSON != 0;
            c.json += u64::from(json);
            c.punct += u64::from(is_punct(b) && !json);
            c.word_starts += u64::from(letter && !p_letter);
            c.digit_runs += u64::from(digit && !p_digit);
            c.punct_runs += u64::from(is_punct(b) && !(prev.is_some() && is_punct(p)));
            c.punct_repeats += u64::from(is_punct(b) && prev == Some(b));
            c.cyrillic_ext += u64::from(prev == Some(0xD1) && (0x90..=0x9F).contains(&b));
            c.space_runs +=
                u64::from(space && !(prev.is_some() && matches!(p, b' ' | b'\t' | b'\r')));
            c.high_runs += u64::from(b >= 0x80 && !(prev.is_some() && p >= 0x80));
            c.case_changes += u64::from(upper && prev.is_some_and(|p| p.is_ascii_lowercase()));
            c.alnum_switches += u64::from((letter && p_digit) || (digit && p_letter));
            alnum_run = if letter || digit { alnum_run + 1 } else { 0 };
            c.long_run += u64::from(alnum_run >= LONG_RUN);
            letter_run = if letter { letter_run + 1 } else { 0 };
            c.long_word += u64::from(letter_run >= LONG_WORD);
            match b {
                0xE4..=0xE9 => c.cjk += 1,
                0xE3 => c.kana += 1,
                0xEA..=0xED => c.hangul += 1,
                0xD0 | 0xD1 => c.cyrillic += 1,
                0xC0..=0xDF => c.other2 += 1,
                0xE0..=0xEF => c.other3 += 1,
                0xF0..=0xFF => c.four += 1,
                _ => {}
            }
            prev = Some(b);
        }
        c
    }

    #[test]
    fn counts_a_mixed_sample() {
        let text = "Hello wORLD 42, {\"k\": [1,2]}\n\tпривет 你好 こんにちは 안녕 é 😀 —";
        let c = count_classes(text.as_bytes());
        assert_eq!(c, reference(text.as_bytes()));
        assert_eq!(c.cjk, 2);
        assert_eq!(c.kana, 5);
        assert_eq!(c.hangul, 2);
        assert_eq!(c.cyrillic, 6);
        assert_eq!(c.other2, 1);
        assert_eq!(c.four, 1);
        assert_eq!(c.other3, 1);
        assert_eq!(c.newlines, 1);
        assert_eq!(c.digits, 4);
        assert_eq!(c.case_changes, 1);
    }

    #[test]
    fn long_runs_cross_block_boundaries() {
        let mut s = " ".repeat(60);
        s.push_str(&"a1".repeat(20));
        let c = count_classes(s.as_bytes());
        assert_eq!(c.long_run, 40 - u64::from(LONG_RUN) + 1);
        assert_eq!(c, reference(s.as_bytes()));
    }

    #[test]
    fn kernels_agree_on_real_text() {
        let text = include_str!("classes.rs");
        let portable = count_classes_with(text.as_bytes(), Kernel::Portable);
        assert_eq!(portable, reference(text.as_bytes()));
        assert_eq!(
            portable,
            count_classes_with(text.as_bytes(), Kernel::detect())
        );
    }

    proptest! {
        #[test]
        fn kernels_match_the_reference(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let expected = reference(&bytes);
            prop_assert_eq!(count_classes_with(&bytes, Kernel::Portable), expected);
            prop_assert_eq!(count_classes_with(&bytes, Kernel::detect()), expected);
        }

        #[test]
        fn kernels_match_on_text(s in "[a-zA-Z0-9 \\n{}\":,.\\-_/+=é中かㄱ한й😀]{0,300}") {
            let expected = reference(s.as_bytes());
            prop_assert_eq!(count_classes_with(s.as_bytes(), Kernel::Portable), expected);
            prop_assert_eq!(count_classes_with(s.as_bytes(), Kernel::detect()), expected);
        }
    }
}
