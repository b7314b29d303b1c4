//! Which script the characters lumped together as `other2` and `other3` belong to.
//!
//! The class counts tell a character's script only by its UTF-8 lead byte, and one lead covers
//! scripts the vocabularies price very differently: Arabic and Armenian share two-byte leads,
//! Devanagari, Gurmukhi, Thai and Georgian three-byte ones, yet cl100k spends one token on an
//! Arabic letter and more than two on an Armenian or Georgian one. Counting the characters of
//! each script separately lets the model price each (`model.rs`: the script counts are terms
//! added to the flat `other2`/`other3` price, so a script the fit has never seen still costs
//! that price). Two-byte characters are looked up one by one, so a few of them count apart from
//! the rest of their script when they cost differently and tell languages apart (Greek capitals,
//! Hebrew points, the letters Persian and Pashto add to Arabic's: `SCRIPT_CHARACTERS`); three-byte
//! ones by blocks of 16 code points.
//!
//! The class-counting kernels count scripts in the blocks they visit for their non-ASCII work,
//! so ASCII text never pays for this. The portable and AVX2 kernels use `PendingLeads` (found
//! while the block is in cache, decoded in batches): a block's leads of `other2`/`other3`
//! characters are found with vector compares (SSE2, part of every x86-64 CPU; a byte loop
//! elsewhere) and only those are decoded, so Chinese or Japanese text with one box-drawing
//! character costs a few compares per block, not a decode. The AVX-512 kernel looks the leads up
//! sixteen at a time in `SCRIPT_OF` (`classes/avx512.rs`, `ScriptIds`), with the same result.

/// Number of script counts: 25 scripts, 4 groups of characters counted apart from their script,
/// then 3 groups of three-byte characters the first 25 left at the flat price, 1 of four-byte
/// characters, the combining marks, the miscellaneous symbols and dingbats, and the phonetic
/// letters (see [`SCRIPT_NAMES`]).
pub const SCRIPT_COUNT: usize = 36;

/// Index of `rare_script` in [`SCRIPT_NAMES`].
pub const RARE_SCRIPT: usize = 29;

/// Script names, in the order of [`ClassCounts::scripts`](super::ClassCounts::scripts). Entries
/// 25–28 are characters of the scripts before them that count apart (`SCRIPT_CHARACTERS`); the
/// last seven are groups of blocks rather than scripts:
///
/// - `rare_script`: letters of scripts the vocabularies have (almost) no tokens for, so that each
///   character costs about one token per UTF-8 byte (Tibetan, Mongolian, Cherokee, Canadian
///   syllabics, Runic, Ogham, Ol Chiki, Tifinagh, Glagolitic, Coptic, Balinese and the other
///   scripts of Indonesia and the Philippines, Hangul Jamo (decomposed Korean), Braille, Kangxi
///   radicals, CJK compatibility ideographs, ...), the precomposed letters of polytonic
///   Greek (Greek Extended, U+1F00–U+1FFF: `ἀ ῇ ὸ`), which cost about two o200k tokens and
///   three cl100k tokens each where a monotonic Greek letter costs a half and one and a half,
///   the two-byte Syriac and N'Ko (over-estimated by about a quarter, since the price is
///   fitted on three-byte scripts, where Thaana's price, which they shared, had them at 0.84),
///   and the blocks that share Hangul's lead byte `EA` below its syllables (U+A000–U+ABFF: Yi,
///   Lisu, Vai, Bamum, Javanese, Cham, Meetei Mayek, Latin Extended-D, ...), which the class
///   kernels tell from Hangul by the lead's first continuation byte
///   ([`ClassCounts::hangul`](super::ClassCounts::hangul)) and count here instead;
/// - `symbols`: arrows, mathematical operators, technical symbols, enclosed alphanumerics,
///   geometric shapes, the other symbol blocks of U+2070–U+2AFF and the supplemental
///   punctuation of U+2E00–U+2E7F: not the general punctuation
///   and currency signs of prose, nor box drawing, which has its own count, nor the blocks of
///   U+2600–U+27BF and U+2B00–U+2BFF (`misc_symbols`);
/// - `latin_ext_additional`: Latin Extended Additional (U+1E00–U+1EFF), the precomposed letters
///   of Vietnamese (ạ ế ồ ữ ...), which o200k spends about a token on and claude-legacy more;
/// - `rare_four`: four-byte characters other than emoji: the scripts and symbols of U+10000–U+1EFFF
///   (Gothic, Deseret, Shavian, Osage, cuneiform, musical symbols, mathematical alphanumerics
///   `𝐇𝐞𝐥𝐥𝐨`, Adlam, ...), the CJK ideographs of Extensions B–H (U+20000–U+3FFFF) and the
///   private use planes. Every four-byte character is also in `four`, whose price the emoji set
///   (about one to two o200k tokens); these cost up to four, one per byte.
///
/// - `combining_marks`: the combining diacritical marks (U+0300–U+036F) of decomposed text (NFD:
///   `e` + U+0301 for `é`, as macOS writes file names and some PDFs copy text), which o200k and
///   cl100k spend one to two tokens on, each. No document of the corpus has them, so the fit
///   cannot price them; `tools/fit-tokens` prices them in a second step, on the decomposed forms
///   of its Latin catalogs, with every other coefficient fixed;
/// - `misc_symbols`: the miscellaneous symbols, the dingbats and the symbols and arrows of
///   U+2B00–U+2BFF (`★ ☆ ☐ ☑ ♥ ✓ ✗ ✔ ✂ ⬆`), among which are the three-byte emoji (`✅ ❤ ⚠ ✨ ⭐
///   ☕`): o200k spends about a token on many of them, claude-legacy about one per byte. At the
///   flat `other3` price a list of star ratings was estimated at 0.70 of its claude-legacy
///   count. No corpus category has enough of them, and as a term of the main fit they took
///   prices of 14–25 tokens in the `script` kind from a few ideograph documents, so they are
///   priced like the combining marks, in a second step, on generated lines of such symbols;
/// - `phonetic`: the IPA Extensions and the Spacing Modifier Letters (U+0250–U+02FF: `ə ɪ ʊ ʃ
///   ʒ ɹ ˈ ː ʰ`) of phonetic transcriptions, which o200k spends about two tokens on, each, and
///   which the Latin Extended count priced like the letters of Czech or Polish: a transcription
///   was estimated at 0.51 of its o200k count. Their leads (`C9`–`CB`) count as `other2`, not
///   as Latin Extended. No category of the corpus has them, so they are priced like the
///   combining marks, in a second step, on generated transcriptions.
///
/// Before they had counts of their own these characters cost the flat `other3` price, fitted on
/// scripts the vocabularies know: Tibetan was estimated at a quarter of its o200k count.
pub const SCRIPT_NAMES: [&str; SCRIPT_COUNT] = [
    "greek",
    "armenian",
    "hebrew",
    "arabic",
    "arabic_ext",
    "thaana",
    "devanagari",
    "bengali",
    "gurmukhi",
    "gujarati",
    "oriya",
    "tamil",
    "telugu",
    "kannada",
    "malayalam",
    "sinhala",
    "thai",
    "lao",
    "myanmar",
    "georgian",
    "ethiopic",
    "khmer",
    "box",
    "private_use",
    "fullwidth",
    "greek_upper",
    "hebrew_points",
    "arabic_persian",
    "arabic_pashto",
    "rare_script",
    "symbols",
    "latin_ext_additional",
    "rare_four",
    "combining_marks",
    "misc_symbols",
    "phonetic",
];

/// The code point ranges of each script (inclusive; each starts and ends on a multiple of 16,
/// the granularity of the table for three-byte characters), by index into [`SCRIPT_NAMES`].
const SCRIPT_RANGES: [(usize, u32, u32); 59] = [
    (0, 0x0370, 0x03FF),  // Greek and Coptic
    (1, 0x0530, 0x058F),  // Armenian
    (2, 0x0590, 0x05FF),  // Hebrew
    (3, 0x0600, 0x067F),  // Arabic: the letters Arabic and Persian share
    (4, 0x0680, 0x06FF),  // Arabic: letters of Urdu, Pashto, Uyghur, Kurdish, Sindhi...
    (4, 0x0750, 0x077F),  // Arabic Supplement
    (4, 0x08A0, 0x08FF),  // Arabic Extended-A
    (4, 0xFB50, 0xFDFF),  // Arabic Presentation Forms-A
    (4, 0xFE70, 0xFEFF),  // Arabic Presentation Forms-B
    (5, 0x0780, 0x07BF),  // Thaana
    (6, 0x0900, 0x097F),  // Devanagari
    (7, 0x0980, 0x09FF),  // Bengali
    (8, 0x0A00, 0x0A7F),  // Gurmukhi
    (9, 0x0A80, 0x0AFF),  // Gujarati
    (10, 0x0B00, 0x0B7F), // Oriya
    (11, 0x0B80, 0x0BFF), // Tamil
    (12, 0x0C00, 0x0C7F), // Telugu
    (13, 0x0C80, 0x0CFF), // Kannada
    (14, 0x0D00, 0x0D7F), // Malayalam
    (15, 0x0D80, 0x0DFF), // Sinhala
    (16, 0x0E00, 0x0E7F), // Thai
    (17, 0x0E80, 0x0EFF), // Lao
    (18, 0x1000, 0x109F), // Myanmar
    (19, 0x10A0, 0x10FF), // Georgian
    (19, 0x1C90, 0x1CBF), // Georgian Extended
    (19, 0x2D00, 0x2D2F), // Georgian Supplement
    (20, 0x1200, 0x139F), // Ethiopic and its supplement
    (21, 0x1780, 0x17FF), // Khmer
    (21, 0x19E0, 0x19FF), // Khmer Symbols
    (22, 0x2500, 0x259F), // Box Drawing, Block Elements
    (23, 0xE000, 0xF8FF), // Private Use Area
    (24, 0xFF00, 0xFFEF), // Halfwidth and Fullwidth Forms
    (29, 0x0700, 0x074F), // Syriac
    (29, 0x07C0, 0x07FF), // NKo
    (29, 0x0800, 0x089F), // Samaritan, Mandaic, Syriac Supplement, Arabic Extended-B
    (29, 0x1F00, 0x1FFF), // Greek Extended: the precomposed letters of polytonic Greek
    (29, 0x0F00, 0x0FFF), // Tibetan
    (29, 0x1100, 0x11FF), // Hangul Jamo (decomposed Korean)
    (29, 0x13A0, 0x177F), // Cherokee, Canadian Syllabics, Ogham, Runic, Tagalog to Tagbanwa
    (29, 0x1800, 0x19DF), // Mongolian, Syllabics Extended, Limbu, Tai Le, New Tai Lue
    (29, 0x1A00, 0x1C8F), // Buginese, Tai Tham, Balinese, Sundanese, Batak, Lepcha, Ol Chiki
    (29, 0x1CC0, 0x1DFF), // Sundanese Supplement, Vedic, Phonetic Extensions, combining marks
    (29, 0x2800, 0x28FF), // Braille Patterns
    (29, 0x2C00, 0x2C5F), // Glagolitic
    (29, 0x2C80, 0x2CFF), // Coptic
    (29, 0x2D30, 0x2DFF), // Tifinagh, Ethiopic Extended, Cyrillic Extended-A
    (29, 0x2E80, 0x2FFF), // CJK Radicals Supplement, Kangxi Radicals, description characters
    (29, 0xF900, 0xFAFF), // CJK Compatibility Ideographs
    (30, 0x2070, 0x209F), // Superscripts and Subscripts
    (30, 0x20D0, 0x24FF), // symbol marks, letterlike, number forms, arrows, math, technical
    (30, 0x25A0, 0x25FF), // Geometric Shapes
    (30, 0x27C0, 0x27FF), // Miscellaneous Mathematical Symbols-A, Supplemental Arrows-A
    (30, 0x2900, 0x2AFF), // Supplemental Arrows-B, mathematical symbols and operators
    (30, 0x2E00, 0x2E7F), // Supplemental Punctuation
    (31, 0x1E00, 0x1EFF), // Latin Extended Additional (Vietnamese)
    (33, 0x0300, 0x036F), // Combining Diacritical Marks
    (34, 0x2600, 0x27BF), // Miscellaneous Symbols, Dingbats
    (34, 0x2B00, 0x2BFF), // Miscellaneous Symbols and Arrows
    (35, 0x0250, 0x02FF), // IPA Extensions, Spacing Modifier Letters
];

/// Two-byte characters whose script differs from their range's in [`SCRIPT_RANGES`] (inclusive
/// code point ranges below U+0800, where the table has one entry per character): they cost
/// differently from the rest of their script and tell texts apart that the script count alone
/// lumps together.
///
/// - Greek capitals: catalogs of names in capitals cost up to twice as many o200k tokens per
///   Greek character as running lowercase text.
/// - Hebrew points and cantillation marks, and the Yiddish ligatures: about a seventh of
///   Yiddish's Hebrew-script characters, almost none of Hebrew's.
/// - The letters Persian adds to Arabic's alphabet (pe, che, zhe, keheh, gaf, farsi yeh), which
///   Urdu, Kurdish and Pashto share: 19% of Persian's Arabic-script characters in the corpus,
///   4% of Uyghur's (pe, che and gaf: it writes neither keheh nor farsi yeh), whose own letters
///   stay in `arabic_ext`.
/// - The letters only Pashto writes (tte, dze, tse, ddal, rre, zhe with a ring, xin, kaf with a
///   ring, nun with a ring, yeh with a tail): Pashto costs fewer o200k tokens per character than
///   Uyghur or Sindhi, whose letters share the rest of `arabic_ext`.
const SCRIPT_CHARACTERS: [(usize, u32, u32); 24] = [
    (25, 0x0386, 0x038F), // Greek capitals with tonos
    (25, 0x0391, 0x03AB), // Greek capitals
    (26, 0x0591, 0x05BD), // Hebrew cantillation marks and points
    (26, 0x05BF, 0x05BF), // rafe
    (26, 0x05C1, 0x05C2), // shin and sin dots
    (26, 0x05C4, 0x05C5), // upper and lower dots
    (26, 0x05C7, 0x05C7), // qamats qatan
    (26, 0x05F0, 0x05F2), // Yiddish ligatures
    (27, 0x067E, 0x067E), // pe
    (27, 0x0686, 0x0686), // che
    (27, 0x0698, 0x0698), // zhe
    (27, 0x06A9, 0x06A9), // keheh
    (27, 0x06AF, 0x06AF), // gaf
    (27, 0x06CC, 0x06CC), // farsi yeh
    (28, 0x067C, 0x067C), // teh with a ring
    (28, 0x0681, 0x0681), // hah with hamza above
    (28, 0x0685, 0x0685), // hah with three dots above
    (28, 0x0689, 0x0689), // dal with a ring
    (28, 0x0693, 0x0693), // reh with a ring
    (28, 0x0696, 0x0696), // reh with a dot below and a dot above
    (28, 0x069A, 0x069A), // seen with a dot below and a dot above
    (28, 0x06AB, 0x06AB), // kaf with a ring
    (28, 0x06BC, 0x06BC), // noon with a ring
    (28, 0x06CD, 0x06CD), // yeh with a tail
];

/// Four-byte characters by script, in blocks of 4,096 code points (inclusive, aligned to
/// 4,096): the entry of a character is told by its lead and first continuation byte alone. The
/// emoji plane (U+1F000–U+1FFFF) and the tags (U+E0000–U+E0FFF) are in none: `four` prices them.
const FOUR_BYTE_RANGES: [(usize, u32, u32); 3] = [
    (32, 0x10000, 0x1EFFF), // SMP scripts, symbols, mathematical alphanumerics, Adlam, ...
    (32, 0x20000, 0x3FFFF), // CJK Unified Ideographs Extensions B–H
    (32, 0xF0000, 0x10FFFF), // Supplementary Private Use Areas
];

/// First entry of [`SCRIPT_OF`] for three-byte characters: the two-byte ones (U+0000–U+07FF)
/// have one entry per code point before it.
pub(super) const THREE_BYTE_BASE: usize = 0x800;

/// First entry of [`SCRIPT_OF`] for four-byte characters: entry `FOUR_BYTE_BASE + ((lead & 7)
/// << 6 | (first continuation & 0x3F))`, which is `code point >> 12` for a valid character (512
/// entries, so that the invalid leads `F5`–`F7` index inside the table too).
pub(super) const FOUR_BYTE_BASE: usize = THREE_BYTE_BASE + 4096;

/// Entries of [`SCRIPT_OF`]: the two-byte characters, 4096 blocks of 16 code points, then 512
/// of 4,096.
const SCRIPT_ENTRIES: usize = FOUR_BYTE_BASE + 512;

/// The script of each character below U+0800, then of each block of 16 code points below
/// U+10000, then of each block of 4,096 above: `0` for none, else index + 1. Three zero bytes
/// follow the last entry, so that a 4-byte read at any entry (the AVX-512 kernel gathers entries
/// as 32-bit words and keeps their low byte) stays inside the table.
pub(super) static SCRIPT_OF: [u8; SCRIPT_ENTRIES + 3] = script_table();

/// [`SCRIPT_OF`]'s entry for every three-byte character of a run of 64 code points (index
/// `(lead & 0x0F) << 6 | (first continuation & 0x3F)`), or [`MIXED_RUN`] where its four blocks
/// of 16 differ. A block of text whose three-byte leads of interest are all in one such run
/// (the box drawing of a `tree` listing, the quotes and dashes of prose) needs no lookup per
/// character. (Only the AVX-512 kernel reads it.)
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(super) static SCRIPT_OF_RUN: [u8; 1024] = {
    let mut runs = [0u8; 1024];
    let mut run = 0;
    while run < 1024 {
        let first = SCRIPT_OF[THREE_BYTE_BASE + 4 * run];
        let mut same = true;
        let mut k = 1;
        while k < 4 {
            same &= SCRIPT_OF[THREE_BYTE_BASE + 4 * run + k] == first;
            k += 1;
        }
        runs[run] = if same { first } else { MIXED_RUN };
        run += 1;
    }
    runs
};

/// An entry of [`SCRIPT_OF_RUN`]: the run has characters of more than one script (or none).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(super) const MIXED_RUN: u8 = u8::MAX;

const fn script_table() -> [u8; SCRIPT_ENTRIES + 3] {
    let mut table = [0u8; SCRIPT_ENTRIES + 3];
    let mut r = 0;
    while r < FOUR_BYTE_RANGES.len() {
        let (script, first, last) = FOUR_BYTE_RANGES[r];
        let mut block = first >> 12;
        while block <= last >> 12 {
            table[FOUR_BYTE_BASE + block as usize] = script as u8 + 1;
            block += 1;
        }
        r += 1;
    }
    let mut r = 0;
    while r < SCRIPT_RANGES.len() {
        let (script, first, last) = SCRIPT_RANGES[r];
        let mut cp = first;
        while cp <= last {
            if cp < THREE_BYTE_BASE as u32 {
                table[cp as usize] = script as u8 + 1;
            }
            table[THREE_BYTE_BASE + (cp >> 4) as usize] = script as u8 + 1;
            cp += 1;
        }
        r += 1;
    }
    let mut r = 0;
    while r < SCRIPT_CHARACTERS.len() {
        let (script, first, last) = SCRIPT_CHARACTERS[r];
        let mut cp = first;
        while cp <= last {
            table[cp as usize] = script as u8 + 1;
            cp += 1;
        }
        r += 1;
    }
    table
}

/// Whether `b` is the lead of an `other2` or `other3` character (a two- or three-byte lead in
/// none of the classes the counts give their own field: Latin-1, Latin Extended, Cyrillic,
/// kana, CJK, hangul, by the class definitions of `classes.rs`) or of a four-byte character
/// (`F0`–`F4`). The SSE2 compares of [`lead_mask`] restate it as byte ranges, tested against
/// it for every byte value.
#[inline(always)]
fn is_other_lead(b: u8) -> bool {
    is_other23_lead(b) || (0xF0..=0xF4).contains(&b)
}

/// [`is_other_lead`] for two- and three-byte leads.
#[inline(always)]
fn is_other23_lead(b: u8) -> bool {
    use super::classes::{byte_class, in_byte_class};
    const OWN_FIELD: [usize; 6] = [
        byte_class::LATIN1,
        byte_class::LATIN_EXT,
        byte_class::CYRILLIC,
        byte_class::KANA,
        byte_class::CJK,
        byte_class::HANGUL,
    ];
    in_byte_class(b, byte_class::GE_C0)
        && !in_byte_class(b, byte_class::GE_F0)
        && !OWN_FIELD.iter().any(|&class| in_byte_class(b, class))
}

/// The script of the character whose lead is `bytes[i]` (an [`is_other_lead`] byte), if it is
/// one of [`SCRIPT_NAMES`]. A sequence cut short or with a byte that is not a continuation byte
/// has none.
#[inline(always)]
fn script_at(bytes: &[u8], i: usize) -> Option<usize> {
    let [b0, b1, b2, b3] = match bytes.get(i..i + 4) {
        Some(&[b0, b1, b2, b3]) => [b0, b1, b2, b3],
        // The text ends within four bytes: a zero byte is no continuation.
        _ => [0, 1, 2, 3].map(|k| bytes.get(i + k).copied().unwrap_or(0)),
    };
    let two = b0 < 0xE0;
    let four = b0 >= 0xF0;
    let continued = |b: u8| b & 0xC0 == 0x80;
    // No branch on the character's length: every block is computed and one is picked.
    let char2 = (usize::from(b0 & 0x1F) << 6) | usize::from(b1 & 0x3F);
    let block3 = (usize::from(b0 & 0x0F) << 8)
        | (usize::from(b1 & 0x3F) << 2)
        | usize::from((b2 & 0x3F) >> 4);
    let block4 = (usize::from(b0 & 0x07) << 6) | usize::from(b1 & 0x3F);
    let entry = if two {
        char2
    } else if four {
        FOUR_BYTE_BASE + block4
    } else {
        THREE_BYTE_BASE + block3
    };
    let valid = continued(b1) & (two | continued(b2)) & (!four | continued(b3));
    let script = SCRIPT_OF.get(entry).copied().unwrap_or(0);
    (valid & (script != 0)).then(|| usize::from(script) - 1)
}

/// Bytes scanned per step for a lead of interest.
const STEP: usize = 32;

/// Bit `j` set when `step[j]` is an [`is_other_lead`] byte. An ASCII step (the usual case) is
/// told by four word tests; otherwise the leads are found with vector compares.
#[inline(always)]
fn lead_mask(step: &[u8; STEP]) -> u32 {
    let word = |i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&step[i..i + 8]);
        u64::from_le_bytes(w)
    };
    let words = [word(0), word(8), word(16), word(24)];
    if (words[0] | words[1] | words[2] | words[3]) & 0x8080_8080_8080_8080 == 0 {
        return 0;
    }
    lead_mask_high(step, words)
}

/// [`lead_mask`] of a step with a byte `>= 0x80`: SSE2 (part of every x86-64 CPU), sixteen bytes
/// a compare.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn lead_mask_high(_step: &[u8; STEP], words: [u64; 4]) -> u32 {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set_epi64x,
        _mm_set1_epi8, _mm_sub_epi8,
    };
    // `lo <= b <= hi` as `min(b - lo, hi - lo) == b - lo` on unsigned bytes.
    // SAFETY: SSE2 is part of the x86-64 baseline (every x86-64 CPU has it; the intrinsics are
    // only `unsafe` to call from a closure); no memory is read through a pointer.
    let in_range = |v: __m128i, lo: u8, hi: u8| unsafe {
        let t = _mm_sub_epi8(v, _mm_set1_epi8(lo as i8));
        _mm_cmpeq_epi8(_mm_min_epu8(t, _mm_set1_epi8((hi - lo) as i8)), t)
    };
    // SAFETY: as above.
    let half = |lo: u64, hi: u64| unsafe {
        let v = _mm_set_epi64x(hi as i64, lo as i64);
        let leads = _mm_or_si128(
            _mm_or_si128(in_range(v, 0xC0, 0xC1), in_range(v, 0xC9, 0xCF)),
            _mm_or_si128(
                _mm_or_si128(in_range(v, 0xD2, 0xDF), in_range(v, 0xE0, 0xE2)),
                _mm_or_si128(in_range(v, 0xEE, 0xEF), in_range(v, 0xF0, 0xF4)),
            ),
        );
        _mm_movemask_epi8(leads) as u32 & 0xFFFF
    };
    half(words[0], words[1]) | (half(words[2], words[3]) << 16)
}

/// [`lead_mask`] of a step with a byte `>= 0x80`, elsewhere.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn lead_mask_high(step: &[u8; STEP], _words: [u64; 4]) -> u32 {
    lead_mask_portable(step)
}

/// [`lead_mask`] without `std::arch`: a byte per lead flag, in a loop the compiler vectorizes
/// (NEON on aarch64), then eight flags gathered into a byte with one multiplication (the flags
/// are 0 or 1 at bits `8m`; the products land at distinct bits, so nothing carries, and flag
/// `m` lands at bit `56 + m`). A byte at a time, the mask cost a shift and an OR per byte.
#[cfg(any(not(target_arch = "x86_64"), test))]
#[inline(always)]
fn lead_mask_portable(step: &[u8; STEP]) -> u32 {
    let mut flags = [0u8; STEP];
    for (flag, &b) in flags.iter_mut().zip(step) {
        *flag = u8::from(is_other_lead(b));
    }
    let (words, _) = flags.as_chunks::<8>();
    words.iter().enumerate().fold(0, |mask, (i, word)| {
        let gathered = u64::from_le_bytes(*word).wrapping_mul(0x0102_0408_1020_4080) >> 56;
        mask | ((gathered as u32) << (8 * i))
    })
}

/// Leads of `other2`/`other3` characters found by a class-counting kernel in the blocks it
/// visits for their non-ASCII bytes, decoded in batches. Decoding them where they are found
/// would put a function call in the kernel's vector loop (every vector register is
/// caller-saved, so each call spills and reloads them; measured: +20–30% on the mixed corpus),
/// or, inlined, make the kernel's block function too large to be inlined itself.
#[derive(Debug, Clone)]
pub(super) struct PendingLeads {
    /// Start of each block with leads, and the leads (bit `j`: `bytes[start + j]`).
    blocks: [(usize, u64); PENDING],
    len: usize,
    /// The counts of the leads decoded so far.
    scripts: [u64; SCRIPT_COUNT],
}

/// Blocks with leads kept before they are decoded.
const PENDING: usize = 64;

impl Default for PendingLeads {
    fn default() -> Self {
        Self {
            blocks: [(0, 0); PENDING],
            len: 0,
            scripts: [0; SCRIPT_COUNT],
        }
    }
}

impl PendingLeads {
    /// Records the leads `leads` of the block at `bytes[start..]` (no-op without any).
    #[inline(always)]
    pub(super) fn push(&mut self, bytes: &[u8], start: usize, leads: u64) {
        if leads == 0 {
            return;
        }
        self.blocks[self.len % PENDING] = (start, leads);
        self.len += 1;
        if self.len == PENDING {
            self.decode(bytes);
        }
    }

    /// Records the leads of the 64-byte block at `bytes[start..]` (or what the text has of
    /// it), found here (for the kernels without their own lead classes).
    #[inline(always)]
    pub(super) fn push_block(&mut self, bytes: &[u8], start: usize) {
        let end = bytes.len().min(start.saturating_add(2 * STEP));
        let Some(block) = bytes.get(start..end) else {
            return;
        };
        let leads = match (block.first_chunk::<STEP>(), block.last_chunk::<STEP>()) {
            (Some(first), Some(second)) if block.len() == 2 * STEP => {
                u64::from(lead_mask(first)) | (u64::from(lead_mask(second)) << STEP)
            }
            // The text's last, shorter block.
            _ => block
                .iter()
                .enumerate()
                .fold(0, |m, (j, &b)| m | (u64::from(is_other_lead(b)) << j)),
        };
        self.push(bytes, start, leads);
    }

    /// Decodes the pending leads into [`PendingLeads::scripts`].
    #[inline(never)]
    pub(super) fn decode(&mut self, bytes: &[u8]) {
        for &(start, mut leads) in &self.blocks[..self.len.min(PENDING)] {
            while leads != 0 {
                if let Some(script) = script_at(bytes, start + leads.trailing_zeros() as usize) {
                    self.scripts[script] += 1;
                }
                leads &= leads - 1;
            }
        }
        self.len = 0;
    }

    /// The script counts of every block pushed.
    pub(super) fn finish(mut self, bytes: &[u8]) -> [u64; SCRIPT_COUNT] {
        self.decode(bytes);
        self.scripts
    }
}

/// Adds to `scripts` the number of characters of each script in `bytes` (counted at their lead
/// bytes): what the kernels count, for a whole text at once.
pub fn count_scripts(bytes: &[u8], scripts: &mut [u64; SCRIPT_COUNT]) {
    let mut leads = PendingLeads::default();
    for start in (0..bytes.len()).step_by(2 * STEP) {
        leads.push_block(bytes, start);
    }
    for (mine, counted) in scripts.iter_mut().zip(leads.finish(bytes)) {
        *mine += counted;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn every_lead_mask_matches_a_byte_at_a_time_mask() {
        // Every byte value at every position of a step, beside ASCII and beside other leads.
        for filler in [b'a', 0xD5, 0x80] {
            for position in 0..STEP {
                for b in 0..=255u8 {
                    let mut step = [filler; STEP];
                    step[position] = b;
                    let expected = step
                        .iter()
                        .enumerate()
                        .fold(0u32, |m, (j, &x)| m | (u32::from(is_other_lead(x)) << j));
                    assert_eq!(lead_mask_portable(&step), expected, "{step:?}");
                    assert_eq!(lead_mask(&step), expected, "{step:?}");
                }
            }
        }
    }

    /// Character by character through `char` decoding: the definition `count_scripts`
    /// implements, for valid UTF-8.
    fn reference(text: &str) -> [u64; SCRIPT_COUNT] {
        let mut out = [0; SCRIPT_COUNT];
        for ch in text.chars() {
            let lead = ch.to_string().as_bytes()[0];
            if !is_other_lead(lead) {
                continue;
            }
            let cp = u32::from(ch);
            let within = |&&(_, first, last): &&(usize, u32, u32)| (first..=last).contains(&cp);
            let script = SCRIPT_CHARACTERS
                .iter()
                .find(within)
                .or_else(|| SCRIPT_RANGES.iter().find(within))
                .or_else(|| FOUR_BYTE_RANGES.iter().find(within));
            if let Some(&(script, _, _)) = script {
                out[script] += 1;
            }
        }
        out
    }

    fn counted(bytes: &[u8]) -> [u64; SCRIPT_COUNT] {
        let mut out = [0; SCRIPT_COUNT];
        count_scripts(bytes, &mut out);
        out
    }

    fn of(name: &str) -> usize {
        SCRIPT_NAMES.iter().position(|n| *n == name).unwrap()
    }

    #[test]
    fn ranges_are_aligned_and_disjoint() {
        let mut seen = [false; 4096];
        for &(script, first, last) in &SCRIPT_RANGES {
            assert!(script < SCRIPT_COUNT);
            assert_eq!(first % 16, 0, "{first:#x}");
            assert_eq!(last % 16, 15, "{last:#x}");
            for block in first >> 4..=last >> 4 {
                assert!(!seen[block as usize], "{first:#x} overlaps");
                seen[block as usize] = true;
            }
        }
        // Every script has a range.
        for script in 0..SCRIPT_COUNT {
            let mut all = SCRIPT_RANGES
                .iter()
                .chain(&SCRIPT_CHARACTERS)
                .chain(&FOUR_BYTE_RANGES);
            assert!(all.any(|r| r.0 == script), "{script}");
        }
        // Four-byte ranges: whole blocks of 4,096 code points, above U+FFFF, disjoint.
        let mut seen = [false; 0x110];
        for &(script, first, last) in &FOUR_BYTE_RANGES {
            assert!(script < SCRIPT_COUNT);
            assert!(first >= 0x10000 && last <= 0x10FFFF, "{first:#x}");
            assert_eq!((first % 4096, last % 4096), (0, 4095), "{first:#x}");
            for block in first >> 12..=last >> 12 {
                assert!(!seen[block as usize], "{first:#x} overlaps");
                seen[block as usize] = true;
            }
        }
    }

    #[test]
    fn counts_four_byte_characters_other_than_emoji() {
        // Gothic, Shavian, Deseret, mathematical alphanumerics, Adlam, CJK Extension B, a
        // supplementary private use character; not emoji, flags, skin tones or tags.
        let text = "𐌰𐌱 𐑖𐑱 𐐀 𝐇𝐞𝐥𝐥𝐨 𞤀𞤣 𠀀𪚲 \u{F0001} 😀🚀 🇺🇸 👍🏽 🏴\u{E0067}\u{E0062}";
        let c = counted(text.as_bytes());
        assert_eq!(c, reference(text));
        assert_eq!(c[of("rare_four")], 2 + 2 + 1 + 5 + 2 + 2 + 1);
        // A cut or malformed four-byte sequence counts nothing.
        let gothic = "𐌰".as_bytes();
        assert_eq!(counted(&gothic[..3]), [0; SCRIPT_COUNT]);
        assert_eq!(counted(&[0xF0, 0x90, 0x8C, b'a']), [0; SCRIPT_COUNT]);
        assert_eq!(counted(&[0xF5, 0x80, 0x80, 0x80]), [0; SCRIPT_COUNT]);
    }

    #[test]
    fn characters_refine_two_byte_ranges_without_overlapping() {
        let mut seen = [false; THREE_BYTE_BASE];
        for &(script, first, last) in &SCRIPT_CHARACTERS {
            assert!(script < SCRIPT_COUNT);
            assert!(first <= last && last < THREE_BYTE_BASE as u32, "{first:#x}");
            // Within one range of another script.
            let range = SCRIPT_RANGES.iter().find(|r| (r.1..=r.2).contains(&first));
            assert!(
                range.is_some_and(|r| last <= r.2 && r.0 != script),
                "{first:#x}"
            );
            for cp in first..=last {
                assert!(!seen[cp as usize], "{cp:#x} overlaps");
                seen[cp as usize] = true;
            }
        }
    }

    #[test]
    fn refined_characters_count_as_their_own_script() {
        let text = "Ελληνικά ΑΘΗΝΑ Άγιος ΐ עברית אַ װ ײ בְּ־ فارسی پچژکگ ئۇيغۇرچە پښتو";
        let c = counted(text.as_bytes());
        assert_eq!(c, reference(text));
        assert_eq!(c[of("greek_upper")], 7);
        assert_eq!(c[of("greek")], 7 + 4 + 1);
        assert_eq!(c[of("hebrew_points")], 5);
        assert_eq!(c[of("hebrew")], 5 + 2 + 1);
        // Uyghur's che is one of them, and so is Pashto's pe.
        assert_eq!(c[of("arabic_persian")], 6 + 1 + 1);
        assert_eq!(c[of("arabic_pashto")], 1);
        assert_eq!(c[of("arabic")], 4 + 4 + 2);
        assert_eq!(c[of("arabic_ext")], 3);
    }

    #[test]
    fn runs_of_one_script_are_told_as_such() {
        let mut one_script = 0;
        for run in 0..1024u32 {
            // The three-byte characters of the run: lead `E0 | run >> 6`, first continuation
            // `80 | run & 0x3F`, the 64 last continuation bytes.
            let scripts: Vec<Option<usize>> = (0..64u8)
                .map(|last| {
                    let bytes = [
                        0xE0 | (run >> 6) as u8,
                        0x80 | (run & 0x3F) as u8,
                        0x80 | last,
                    ];
                    script_at(&bytes, 0)
                })
                .collect();
            let entry = SCRIPT_OF_RUN[run as usize];
            if scripts.iter().all(|s| *s == scripts[0]) {
                one_script += 1;
                assert_eq!(entry, scripts[0].map_or(0, |s| s as u8 + 1), "run {run:#x}");
            } else {
                assert_eq!(entry, MIXED_RUN, "run {run:#x}");
            }
        }
        // Runs of box drawing, of general punctuation (none) and of private use are whole.
        assert!(one_script > 900);
        assert_eq!(SCRIPT_OF_RUN[0x2500 >> 6], of("box") as u8 + 1);
        assert_eq!(SCRIPT_OF_RUN[0x2000 >> 6], 0);
        assert_eq!(SCRIPT_OF_RUN[0xE5C0 >> 6], of("private_use") as u8 + 1);
        assert_eq!(SCRIPT_OF_RUN[0x2580 >> 6], MIXED_RUN);
    }

    #[test]
    fn counts_each_script() {
        let text = "Ελληνικά Հայերեն עברית العربية ئۇيغۇرچە हिन्दी ਪੰਜਾਬੀ தமிழ் ไทย ქართული \
                    ├── src │ └── ╞═╪═╡ ╰─ █ \u{E5FF} ＡＢＣ１２３";
        let c = counted(text.as_bytes());
        assert_eq!(c, reference(text));
        assert_eq!(c[of("greek")], 7);
        assert_eq!(c[of("greek_upper")], 1);
        assert_eq!(c[of("armenian")], 7);
        assert_eq!(c[of("hebrew")], 5);
        assert_eq!(c[of("thai")], 3);
        assert_eq!(c[of("georgian")], 7);
        assert_eq!(c[of("box")], 7 + 5 + 3);
        assert_eq!(c[of("private_use")], 1);
        assert_eq!(c[of("fullwidth")], 6);
        assert!(c[of("arabic")] > 0 && c[of("arabic_ext")] > 0);
    }

    #[test]
    fn other_scripts_and_classes_are_not_counted() {
        // Latin-1, Latin Extended, Cyrillic, CJK, kana, hangul, four-byte emoji, general
        // punctuation, currency signs, variation selectors, the replacement character.
        let text = "é ł ж 中 か 한 😀 “quotes” — € \u{FE0F} \u{FFFD}";
        assert_eq!(counted(text.as_bytes()), [0; SCRIPT_COUNT]);
    }

    #[test]
    fn counts_miscellaneous_symbols_and_dingbats() {
        // U+2600 and U+27BF (the ends of the first range), U+2B00 and U+2BFF (of the second),
        // and the three-byte emoji, stars, boxes and marks between them; a variation selector
        // is not one.
        let text = "\u{2600}\u{27BF}\u{2B00}\u{2BFF} ✅ ❤\u{FE0F} ⭐ ★☆ ☐☑ ✓✗ ⬆";
        let c = counted(text.as_bytes());
        assert_eq!(c, reference(text));
        assert_eq!(c[of("misc_symbols")], 4 + 1 + 1 + 1 + 2 + 2 + 2 + 1);
        assert_eq!(c.iter().sum::<u64>(), c[of("misc_symbols")]);
        // Beside them: geometric shapes and mathematical symbols stay `symbols`.
        let c = counted("■ ⟶ ★".as_bytes());
        assert_eq!((c[of("symbols")], c[of("misc_symbols")]), (2, 1));
    }

    #[test]
    fn counts_combining_marks_of_decomposed_text() {
        // French and Vietnamese in NFD (a base letter, then its marks), and a letter with
        // stacked marks. The precomposed letters (Latin-1, Latin Extended Additional) are not
        // marks.
        let text = "Cre\u{301}er un fichier a\u{300} partir d'un mode\u{300}le \
                    Tie\u{302}\u{301}ng Vie\u{323}\u{302}t \
                    Z\u{36F}\u{300}\u{301}\u{302}\u{303}\u{304}\u{305} \
                    Créer à modèle Tiếng";
        let c = counted(text.as_bytes());
        assert_eq!(c, reference(text));
        assert_eq!(c[of("combining_marks")], 3 + 4 + 7);
        assert_eq!(c[of("latin_ext_additional")], 1);
        // U+0300 and U+036F, the range's ends, and the characters just outside it: U+02FF
        // (a modifier letter, `phonetic`) and U+0370 (Greek).
        let ends = "\u{2FF}\u{300}\u{36F}\u{370}";
        let c = counted(ends.as_bytes());
        assert_eq!(c[of("combining_marks")], 2);
        assert_eq!(c[of("greek")], 1);
        assert_eq!(c[of("phonetic")], 1);
        assert_eq!(c.iter().sum::<u64>(), 4);
    }

    #[test]
    fn counts_phonetic_letters_of_leads_c9_to_cb() {
        // A transcription with stress and length marks and an aspirated stop, beside the
        // letters just outside the range: U+0240-U+024F (Latin Extended-B, lead `C9`, no
        // script) and U+023F (lead `C8`), and Polish and Czech letters.
        let text = "/ˈfəʊnɪm/ [tʰɔːt] ʃʒŋɹɐ ˌɪntəˈnæʃənəl ɀ ɏ ȿ łódź přítel";
        let c = counted(text.as_bytes());
        assert_eq!(c, reference(text));
        // `ŋ` (U+014B) and `æ` (U+00E6) are Latin Extended-A and Latin-1.
        assert_eq!(c[of("phonetic")], 4 + 3 + 4 + 7);
        assert_eq!(c.iter().sum::<u64>(), c[of("phonetic")]);
        let classes = crate::tokens::count_classes(text.as_bytes());
        // `ɀ ɏ` and the phonetic letters are `other2`; `ŋ ȿ ł ź ř` Latin Extended.
        assert_eq!(classes.other2, 18 + 2);
        assert_eq!(classes.latin_ext, 5);
        assert_eq!(classes.latin1, 3);
        // The range's ends, and U+024F before it.
        let ends = "\u{24F}\u{250}\u{2FF}";
        assert_eq!(counted(ends.as_bytes())[of("phonetic")], 2);
    }

    #[test]
    fn rare_script_is_named_by_its_index() {
        assert_eq!(SCRIPT_NAMES[RARE_SCRIPT], "rare_script");
    }

    #[test]
    fn syriac_and_nko_count_as_rare_scripts_and_thaana_apart() {
        // Syriac 4 (U+074F, its last), N'Ko 3 (U+07FF, its last), Thaana 4 (U+07BF, its last).
        let text = "ܠܫܢ\u{74F} ߒߞ\u{7FF} ދިވ\u{7BF}";
        let c = counted(text.as_bytes());
        assert_eq!(c, reference(text));
        assert_eq!(c[RARE_SCRIPT], 4 + 3);
        assert_eq!(c[of("thaana")], 4);
    }

    #[test]
    fn counts_rare_scripts_symbols_and_vietnamese() {
        let text = "བོད་ཡིག ᠮᠣᠩᠭᠣᠯ ᏣᎳᎩ ᐃᓄᒃᑎᑐᑦ ᚠᚢᚦ ⠓⠑ \u{1100}\u{1161} ⲁⲃ ⵜⴰ ⰰ ⼀ \
                    ∀x∈ℝ: x²≥0 ⇒ ① ▶ ⟶ ⤴ ⁿ ⸮ \
                    Tiếng Việt";
        let c = counted(text.as_bytes());
        assert_eq!(c, reference(text));
        // Tibetan 7 (the tsheg too), Mongolian 6, Cherokee 3, syllabics 6, Runic 3, Braille 2,
        // Hangul Jamo 2, Coptic 2, Tifinagh 2, Glagolitic 1, a Kangxi radical 1.
        assert_eq!(
            c[of("rare_script")],
            7 + 6 + 3 + 6 + 3 + 2 + 2 + 2 + 2 + 1 + 1
        );
        // ∀ ∈ ℝ ≥ ⇒ ① ▶ ⟶ ⤴ ⁿ ⸮ (² is Latin-1).
        assert_eq!(c[of("symbols")], 11);
        // ế and ệ (Latin Extended Additional); the other letters are Latin-1 or ASCII.
        assert_eq!(c[of("latin_ext_additional")], 2);
    }

    #[test]
    fn cut_and_malformed_sequences_count_nothing() {
        let thai = "ไ".as_bytes();
        assert_eq!(counted(&thai[..2]), [0; SCRIPT_COUNT]);
        assert_eq!(counted(&[0xE0, 0xB8, b'a']), [0; SCRIPT_COUNT]);
        assert_eq!(counted(&[0xD7]), [0; SCRIPT_COUNT]);
        assert_eq!(counted(&[0xD7, 0x90])[of("hebrew")], 1);
    }

    #[test]
    fn characters_across_step_boundaries() {
        for pad in 0..40 {
            let text = format!("{}ไทยעב", "a".repeat(pad));
            let c = counted(text.as_bytes());
            assert_eq!(c[of("thai")], 3, "pad {pad}");
            assert_eq!(c[of("hebrew")], 2, "pad {pad}");
        }
    }

    #[test]
    fn the_lead_mask_marks_exactly_the_other_leads() {
        for first in 0..=255u8 {
            let mut step = [0u8; STEP];
            for (j, b) in step.iter_mut().enumerate() {
                *b = first.wrapping_add((j * 37) as u8);
            }
            let expected = (0..STEP).fold(0u32, |m, j| m | u32::from(is_other_lead(step[j])) << j);
            assert_eq!(lead_mask(&step), expected, "{first}");
        }
    }

    proptest! {
        #[test]
        fn matches_the_reference(text in "[a-z \\n{}éəˈɏ中ж😀αΑΆԱאַװبیپښڭक਼ਪதไລမაሰកᏣ─╰\u{E000}\u{F8FF}＂ｆཀᠮ⠓∀⇒①ệ✅𐌰𝐇𞤀𠀀\u{F0001}🇺]{0,200}") {
            prop_assert_eq!(counted(text.as_bytes()), reference(&text));
        }

        #[test]
        fn never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let c = counted(&bytes);
            let leads = bytes.iter().filter(|&&b| is_other_lead(b)).count() as u64;
            prop_assert!(c.iter().sum::<u64>() <= leads);
        }
    }
}
