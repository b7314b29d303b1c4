//! The AVX-512 kernel (AVX-512 F/BW/VBMI/VBMI2/VPOPCNTDQ and GFNI: Ice Lake, Zen 4 and later;
//! x86_64, detected at run time).
//!
//! Where the AVX2 kernel turns each class into a 64-bit mask and does the run and transition
//! arithmetic in general registers (13 carried masks, spilled), this kernel keeps the classes
//! *bit-sliced* in bytes: one table lookup (`vpermi2b`) gives each byte a class byte with eight
//! class bits, and every run or transition feature is computed for all eight classes at once by
//! moving whole class vectors along the text:
//!
//! - the class byte of the byte before (the previous block's and this block's class vectors
//!   moved by a byte: `valignq` + `vpshldq`) gives the same-class pairs (`class & before`); run
//!   starts are class totals less pairs, letter/digit switches the alphanumeric pairs less the
//!   letter and digit pairs, and a GF(2) bit move (`vgf2p8affineqb`) turns the uppercase pairs
//!   into case changes;
//! - run lengths are chains of `and`s with the pair vector moved by 1, 2, 3, 4 and 8 bytes, each
//!   carrying the previous block's vector (four carried vectors instead of 13 masks);
//! - the counts are *positional* popcounts of two event vectors (how many bytes have bit `b`
//!   set), accumulated over 16 blocks with a carry-save adder tree (Harley–Seal, two
//!   `vpternlogq` per vector and block); every 16th block counts the carries out of the tree
//!   (a GF(2) 8×8 bit transpose, `vpermb`, `vpopcntq`: three instructions for eight counts).
//!
//! The `th` pairs, for which no event bit is left, are counted in a short loop of their own over
//! each group of blocks while it is in L1 (two compares, a shift and a popcount per block).
//!
//! The non-ASCII part (multibyte scripts, Cyrillic pairs, rare ideographs, high-byte runs) runs
//! after each group of 64 blocks on the blocks with a byte `>= 0x80`: two more table lookups give
//! one-hot lead classes and the pair bytes (the byte before through a third lookup and a GF(2)
//! move), buffered and counted 16 blocks at a time the same way; the rare-character lookup
//! computes the code points of a block's kana/CJK/hangul leads in 16-bit lanes after compressing
//! their bytes together (`vpcompressb`) and gathers one bitmap word per lead (`vpgatherdd`); the
//! script lookup of the `other2`/`other3` and four-byte leads compresses and gathers the same
//! way, and its results are buffered and counted a thousand at a time (`ScriptIds`).
//!
//! Counts are identical to the other kernels' (the tests compare all three with a byte-at-a-time
//! reference).

use super::super::scripts::{
    FOUR_BYTE_BASE, MIXED_RUN, SCRIPT_COUNT, SCRIPT_OF, SCRIPT_OF_RUN, THREE_BYTE_BASE,
};
use super::{
    COMMON3_FIRST, ClassCounts, RARE_BLOCK_BYTES, RareBlocks, byte_class, in_byte_class,
    is_rare_letter, is_vowel,
};
use std::arch::x86_64::*;

// The bits of a class byte (ASCII bytes only; bytes `>= 0x80` and padding get 0).
/// `A`..=`Z`, `a`..=`z`.
const LETTER: u8 = 1 << 0;
/// `0`..=`9`.
const DIGIT: u8 = 1 << 1;
/// `A`..=`Z`.
const UPPER: u8 = 1 << 2;
/// Space, tab, carriage return.
const SPACE: u8 = 1 << 3;
/// Every other ASCII byte but the line feed (JSON punctuation and control bytes included).
const PUNCT: u8 = 1 << 4;
/// Letters other than vowels.
const CONSONANT: u8 = 1 << 5;
/// Letters and digits.
const ALNUM: u8 = 1 << 6;
/// JSON structural characters (a subset of `PUNCT`).
const JSON: u8 = 1 << 7;

/// The class byte of ASCII byte `b`. Line feeds get none: their total is what remains of the
/// byte count once the other classes and the high bytes are taken out.
const fn class_of(b: u8) -> u8 {
    let letter = in_byte_class(b, byte_class::LOWER) || in_byte_class(b, byte_class::UPPER);
    let digit = in_byte_class(b, byte_class::DIGIT);
    let space = in_byte_class(b, byte_class::SPACE);
    let mut c = 0;
    if letter {
        c |= LETTER | ALNUM;
        if !is_vowel(b) {
            c |= CONSONANT;
        }
    }
    if in_byte_class(b, byte_class::UPPER) {
        c |= UPPER;
    }
    if digit {
        c |= DIGIT | ALNUM;
    }
    if space {
        c |= SPACE;
    }
    if !letter && !digit && !space && b != b'\n' {
        c |= PUNCT;
    }
    if in_byte_class(b, byte_class::JSON) {
        c |= JSON;
    }
    c
}

/// Class bytes of `0x00..0x80`, the two 64-byte halves of the `vpermi2b` table.
const CLASS_TABLE: [u8; 128] = {
    let mut t = [0u8; 128];
    let mut b = 0;
    while b < 128 {
        t[b] = class_of(b as u8);
        b += 1;
    }
    t
};

/// `CONSONANT` at the low six bits of each rare letter ([`is_rare_letter`]), for a one-table
/// `vpermb` (which indexes by the low six bits). Of the four bytes sharing an index at most one
/// is a letter (uppercase letters have low bits `01`–`1A`, lowercase `21`–`3A`), so the lookup
/// `&` the class byte's `CONSONANT` is the rare letters. The eight class bits are taken, but the
/// consonant pairs on `CONSONANT` of the `pairs` vector are never counted: the rare letters
/// take that slot (and the `th` pairs are counted apart, [`ThPairs`]).
const RARE_TABLE: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut b = 0;
    while b < 128 {
        if is_rare_letter(b as u8) {
            t[b & 63] = CONSONANT;
        }
        b += 1;
    }
    t
};

/// A `vgf2p8affineqb` matrix setting output bit `to` to input bit `from` for each pair (every
/// other output bit 0): row `7 - to` of the matrix (byte `7 - to` of the `u64`) selects the
/// input bits whose parity is output bit `to`.
const fn bit_moves(moves: &[(u8, u8)]) -> i64 {
    let mut m = 0u64;
    let mut i = 0;
    while i < moves.len() {
        let (to, from) = moves[i];
        m |= 1 << (8 * (7 - to.trailing_zeros()) + from.trailing_zeros());
        i += 1;
    }
    m as i64
}

/// Applied to the class byte of the byte before: a letter before, on `UPPER` (an uppercase
/// letter after a letter that is not uppercase is a case change).
const LETTER_ON_UPPER: i64 = bit_moves(&[(UPPER, LETTER)]);
/// `LETTER` on `JSON` (the long-word count takes the slot of the JSON pairs, not counted).
const LETTER_ON_JSON: i64 = bit_moves(&[(JSON, LETTER)]);

// `vpternlogq` truth tables, operands `a` = 0xF0, `b` = 0xCC, `c` = 0xAA.
/// `a ^ b ^ c` (sum of a full adder).
const XOR3: i32 = 0x96;
/// At least two of `a`, `b`, `c` (carry of a full adder).
const MAJORITY: i32 = 0xE8;
/// `a & (b ^ c)`.
const AND_XOR: i32 = 0x60;
/// `c ? b : a`.
const SELECT: i32 = 0xD8;
/// `a | (b & c)`.
const OR_AND: i32 = 0xF8;

/// The vector state carried from one block to the next: this block's class vector and the
/// intermediate vectors of the run-length chains (`run2`: bytes that end a run of at least 2
/// bytes of a class, for each class bit; `run8` alike; `run4_3`: `run4` but `run3` on
/// `CONSONANT`).
#[derive(Clone, Copy)]
struct Carry {
    class: __m512i,
    run2: __m512i,
    run4_3: __m512i,
    run8: __m512i,
}

/// `N` vectors of class or event bytes, counted together.
type Vectors<const N: usize> = [__m512i; N];

/// The two vectors whose positional popcounts are an ASCII block's counts.
///
/// - `classes`: the class bytes (`LETTER`, `UPPER`, `DIGIT`, `SPACE`, `PUNCT`, `JSON`), with
///   the bytes at the 16th byte of an alphanumeric run and after on `ALNUM` (`long_run`) and the
///   3rd to 6th consonants of a run on `CONSONANT` (`consonant_runs`);
/// - `pairs`: bytes of a class after a byte of the same class, for `LETTER`, `DIGIT`, `SPACE`,
///   `PUNCT` and `ALNUM` (the run starts are the class totals less these; the letter/digit
///   switches are the alphanumeric pairs less the letter and digit pairs), uppercase letters
///   after a letter that is not uppercase on `UPPER` (`case_changes`), the 8th letter of a
///   run and after on `JSON` (`long_word`), and the rare letters on `CONSONANT`
///   (`rare_letters`, a per-byte class in the one slot no pair count uses).
type Events = Vectors<2>;

/// The positional popcounts of the bytes of `v`: lane `j` (a `u64`) is how many bytes have
/// bit `j` set.
///
/// `vgf2p8affineqb` with `v` as the matrix transposes each 8×8 bit block (byte `j` of each
/// `u64` gets bit `j` of its eight bytes), `vpermb` gathers the eight bytes of bit `j` into
/// lane `j`, and `vpopcntq` counts them: three instructions for eight counts.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vpopcntdq,gfni")]
fn positional(v: __m512i) -> __m512i {
    // Byte `j` of each `u64`: `1 << j`, selecting bit `j` of every row.
    let select = _mm512_set1_epi64(0x8040_2010_0804_0201u64 as i64);
    let transposed = _mm512_gf2p8affine_epi64_epi8::<0>(select, v);
    // Byte `q` of lane `j` takes byte `j` of lane `q`.
    let mut indices = [0u8; 64];
    for (i, index) in indices.iter_mut().enumerate() {
        *index = (8 * (i % 8) + i / 8) as u8;
    }
    _mm512_popcnt_epi64(_mm512_permutexvar_epi8(load(&indices), transposed))
}

/// Positional counts of `N` event vectors, accumulated (lane `j` of vector `i`: bytes with
/// bit `j` set).
struct Counts<const N: usize> {
    lanes: Vectors<N>,
}

impl<const N: usize> Counts<N> {
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn new() -> Counts<N> {
        Counts {
            lanes: [_mm512_setzero_si512(); N],
        }
    }

    /// Adds the positional popcounts of `vectors`, times `1 << weight`.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vpopcntdq,gfni")]
    fn add(&mut self, vectors: &Vectors<N>, weight: u32) {
        for (lanes, &v) in self.lanes.iter_mut().zip(vectors) {
            let counts = _mm512_sllv_epi64(positional(v), _mm512_set1_epi64(i64::from(weight)));
            *lanes = _mm512_add_epi64(*lanes, counts);
        }
    }

    /// The count of `bit` in vector `vector`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn get(&self, vector: usize, bit: u8) -> u64 {
        let mut lanes = [0u64; 8];
        // SAFETY: `lanes` is 64 writable bytes; the unaligned store writes exactly them.
        unsafe { _mm512_storeu_si512(lanes.as_mut_ptr().cast(), self.lanes[vector]) };
        lanes[bit.trailing_zeros() as usize]
    }
}

/// A full adder per bit: the sum of `a`, `b`, `c` as (sum, carry).
#[inline]
#[target_feature(enable = "avx512f")]
fn add3<const N: usize>(
    a: &Vectors<N>,
    b: &Vectors<N>,
    c: &Vectors<N>,
) -> (Vectors<N>, Vectors<N>) {
    let mut sum = *a;
    let mut carry = *a;
    for i in 0..N {
        sum[i] = _mm512_ternarylogic_epi64::<XOR3>(a[i], b[i], c[i]);
        carry[i] = _mm512_ternarylogic_epi64::<MAJORITY>(a[i], b[i], c[i]);
    }
    (sum, carry)
}

/// Carry-save counters of event bits: each bit of `ones` counts 1, of `twos` 2, of `fours` 4,
/// of `eights` 8; carries out of `eights` (16) are counted as they come.
#[derive(Clone, Copy)]
struct Planes<const N: usize> {
    ones: Vectors<N>,
    twos: Vectors<N>,
    fours: Vectors<N>,
    eights: Vectors<N>,
}

impl<const N: usize> Planes<N> {
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn new() -> Planes<N> {
        let zero = [_mm512_setzero_si512(); N];
        Planes {
            ones: zero,
            twos: zero,
            fours: zero,
            eights: zero,
        }
    }

    /// Adds the 16 inputs `input(0)`, ..., `input(15)` (called in that order) and returns the
    /// carry out of `eights` (weight 16): Harley–Seal, a tree of 15 full adders.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn add16(&mut self, mut input: impl FnMut(usize) -> Vectors<N>) -> Vectors<N> {
        let Planes {
            mut ones,
            mut twos,
            mut fours,
            eights,
        } = *self;
        // Inputs `$i` and `$i + 1` into `ones`; evaluates to the carry (weight 2).
        macro_rules! two {
            ($i:expr) => {{
                let a = input($i);
                let b = input($i + 1);
                let (sum, carry) = add3(&ones, &a, &b);
                ones = sum;
                carry
            }};
        }
        // Inputs `$i..$i + 4`: evaluates to the carry out of `twos` (weight 4).
        macro_rules! four {
            ($i:expr) => {{
                let a = two!($i);
                let b = two!($i + 2);
                let (sum, carry) = add3(&twos, &a, &b);
                twos = sum;
                carry
            }};
        }
        // Inputs `$i..$i + 8`: evaluates to the carry out of `fours` (weight 8).
        macro_rules! eight {
            ($i:expr) => {{
                let a = four!($i);
                let b = four!($i + 4);
                let (sum, carry) = add3(&fours, &a, &b);
                fours = sum;
                carry
            }};
        }
        let a = eight!(0);
        let b = eight!(8);
        let (eights, sixteens) = add3(&eights, &a, &b);
        *self = Planes {
            ones,
            twos,
            fours,
            eights,
        };
        sixteens
    }

    /// Adds what the planes hold to `counts`.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vpopcntdq,gfni")]
    fn count(&self, counts: &mut Counts<N>) {
        counts.add(&self.ones, 0);
        counts.add(&self.twos, 1);
        counts.add(&self.fours, 2);
        counts.add(&self.eights, 3);
    }
}

/// `x` moved up by one 64-bit lane, the previous block's last lane (of `prev`) shifted in below
/// (`valignq`). With it, a move by `n` bytes (1 to 7) is one funnel shift per lane,
/// `_mm512_shldi_epi64::<{8 * n}>(x, lanes_up(x, prev))` (`vpshldq`, VBMI2): byte `i` of a
/// lane takes byte `i - n` of the lane, or byte `8 + i - n` of the lane below.
///
/// The funnel shift runs on port 0, and the moves by 1 and 2 bytes of one vector share the lane
/// move. LLVM turned the `vpermt2b` moves used before into `valignq` + `vpalignr` pairs, both
/// on port 5, which the class lookup and the rare-letter lookup also need: three moves were six
/// port-5 uops a block, now two (and three on port 0): with [`high_flags`], 5–6% off the
/// estimate of the mixed corpus (BENCHMARKS.md, session 42).
#[inline]
#[target_feature(enable = "avx512f")]
fn lanes_up(x: __m512i, prev: __m512i) -> __m512i {
    _mm512_alignr_epi64::<7>(x, prev)
}

/// The 64 bytes of `block` as a vector.
#[inline]
#[target_feature(enable = "avx512f")]
fn load(block: &[u8; 64]) -> __m512i {
    // SAFETY: `block` is 64 readable bytes; the unaligned load reads exactly them.
    unsafe { _mm512_loadu_si512(block.as_ptr().cast()) }
}

/// The constants of the block computation, built once per call.
struct Constants {
    table_low: __m512i,
    table_high: __m512i,
    rare: __m512i,
    /// `JSON | CONSONANT`: the bits of `pairs` that are not same-class pairs.
    pairs_other: __m512i,
    letter_on_upper: __m512i,
    letter_on_json: __m512i,
    alnum: __m512i,
    consonant: __m512i,
}

impl Constants {
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    fn new() -> Constants {
        let [table_low, table_high] = halves(&CLASS_TABLE);
        Constants {
            table_low,
            table_high,
            rare: load(&RARE_TABLE),
            pairs_other: _mm512_set1_epi8((JSON | CONSONANT) as i8),
            letter_on_upper: _mm512_set1_epi64(LETTER_ON_UPPER),
            letter_on_json: _mm512_set1_epi64(LETTER_ON_JSON),
            alnum: _mm512_set1_epi8(ALNUM as i8),
            consonant: _mm512_set1_epi8(CONSONANT as i8),
        }
    }
}

/// The event vectors of the 64 bytes `v` (`valid`: a bit per byte of the text; padding past
/// the end gets no class), and the block's mask of bytes `>= 0x80` (0: the block has no
/// non-ASCII part).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vbmi2,gfni")]
fn block(k: &Constants, carry: &mut Carry, v: __m512i, valid: u64) -> (Events, u64) {
    // `vpermi2b` indexes by the low 7 bits: bytes `>= 0x80` are zeroed instead.
    let high = _mm512_movepi8_mask(v);
    let class = _mm512_maskz_permutex2var_epi8(!high & valid, k.table_low, v, k.table_high);
    let rare = _mm512_permutexvar_epi8(v, k.rare);
    let p = *carry;
    let before = _mm512_shldi_epi64::<8>(class, lanes_up(class, p.class));
    // Same-class pairs; on `UPPER`, an uppercase letter after a letter and not after an
    // uppercase one (uppercase letters before are letters before: `^` is `& !`).
    let run2 = _mm512_ternarylogic_epi64::<AND_XOR>(
        class,
        before,
        _mm512_gf2p8affine_epi64_epi8::<0>(before, k.letter_on_upper),
    );
    // Run lengths: each step doubles (or extends) the run length a bit stands for. The chains
    // only read `ALNUM`, `LETTER` and `CONSONANT`, which `run2` has as plain pairs.
    let run2_lanes = lanes_up(run2, p.run2);
    let run3 = _mm512_and_si512(run2, _mm512_shldi_epi64::<8>(run2, run2_lanes));
    let run4 = _mm512_and_si512(run2, _mm512_shldi_epi64::<16>(run2, run2_lanes));
    // One move by 4 bytes gives both `run8` (`run4` and `run4` 4 bytes back) and, on
    // `CONSONANT`, `run7` (`run4` and `run3` 4 bytes back); moves by whole 32- and 64-bit lanes
    // are `valignd` and `valignq`, which leave their operands.
    let run4_3 = _mm512_ternarylogic_epi64::<SELECT>(run4, run3, k.consonant);
    let run8_7 = _mm512_and_si512(run4, _mm512_alignr_epi32::<15>(run4_3, p.run4_3));
    let run16 = _mm512_and_si512(run8_7, lanes_up(run8_7, p.run8));
    let long_run = _mm512_ternarylogic_epi64::<SELECT>(class, run16, k.alnum);
    let classes = _mm512_ternarylogic_epi64::<SELECT>(
        long_run,
        _mm512_andnot_si512(run8_7, run3),
        k.consonant,
    );
    let long_word = _mm512_gf2p8affine_epi64_epi8::<0>(run8_7, k.letter_on_json);
    let pairs = _mm512_ternarylogic_epi64::<SELECT>(
        run2,
        _mm512_ternarylogic_epi64::<OR_AND>(long_word, rare, class),
        k.pairs_other,
    );
    *carry = Carry {
        class,
        run2,
        run4_3,
        run8: run8_7,
    };
    ([classes, pairs], _cvtmask64_u64(high))
}

/// The `th` pairs ([`ClassCounts::th_pairs`]), counted in a loop of their own over each group of
/// blocks right after the ASCII loop, while the group is in L1. In the ASCII loop, whose sixteen
/// event bits are all taken, the two compares and the mask arithmetic made LLVM spill across
/// the sixteen blocks it interleaves (`tokens_once avx512`, medians of 11 runs alternating with
/// the kernel without the count: 13% slower, against 12% this way; comparing 16-bit lanes at
/// even and odd offsets instead, with an unaligned load one byte further, 18%).
struct ThPairs {
    /// Bit 63: the last byte counted was `t` or `T`.
    prev_t: u64,
    total: u64,
}

impl ThPairs {
    /// Counts the blocks `blocks`, which follow the ones counted so far.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,popcnt")]
    fn blocks(&mut self, blocks: &[[u8; 64]]) {
        let case_bit = _mm512_set1_epi8(0x20);
        let (t, h) = (_mm512_set1_epi8(b't' as i8), _mm512_set1_epi8(b'h' as i8));
        for block in blocks {
            let v = load(block);
            let ts = _cvtmask64_u64(_mm512_cmpeq_epi8_mask(_mm512_or_si512(v, case_bit), t));
            let hs = _cvtmask64_u64(_mm512_cmpeq_epi8_mask(v, h));
            self.total += u64::from((hs & ((ts << 1) | (self.prev_t >> 63))).count_ones());
            self.prev_t = ts;
        }
    }
}

/// The two 64-byte halves of a 128-entry `vpermi2b` table.
#[inline]
#[target_feature(enable = "avx512f")]
fn halves(table: &[u8; 128]) -> [__m512i; 2] {
    let (halves, _) = table.as_chunks::<64>();
    [load(&halves[0]), load(&halves[1])]
}

// The non-ASCII part.

// One-hot classes of bytes `>= 0x80` by what they lead (continuation bytes: none).
/// Two-byte leads not below.
const OTHER2: u8 = 1 << 0;
/// `D0`, `D1`: Cyrillic.
const CYRILLIC: u8 = 1 << 1;
/// `C2`, `C3`: Latin-1.
const LATIN1: u8 = 1 << 2;
/// `C4`..=`C8`: Latin Extended.
const LATIN_EXT: u8 = 1 << 3;
/// Three-byte leads not below.
const OTHER3: u8 = 1 << 4;
/// `E4`..=`E9`: CJK ideographs.
const CJK: u8 = 1 << 5;
/// `E3`: kana.
const KANA: u8 = 1 << 6;
/// `EA`..=`ED`: hangul.
const HANGUL: u8 = 1 << 7;

// The other bits of bytes `>= 0x80`: four-byte leads and the bytes of the pair features.
/// `F0`..=`FF`.
const FOUR: u8 = 1 << 0;
/// Every byte `>= 0x80`.
const HIGH: u8 = 1 << 1;
/// Every byte `>= 0x80` again: after [`BEFORE`], the starts of runs of them.
const HIGH_START: u8 = 1 << 2;
/// `80`..=`AF` (after `D0`: U+0400–U+042F, uppercase Cyrillic).
const CONT_UPPER: u8 = 1 << 3;
/// `90`..=`9F` (after `D1`: U+0450–U+045F).
const CONT_EXT: u8 = 1 << 4;
/// `E3`..=`ED`: leads looked up in the rare-character bitmap.
const EAST_ASIAN: u8 = 1 << 5;
/// `D0`: lead of U+0400–U+043F.
const D0: u8 = 1 << 6;
/// `D1`: lead of U+0440–U+047F.
const D1: u8 = 1 << 7;

/// Applied to the pair bits of the byte before (with [`BEFORE_CONSTANT`]), what each pair bit
/// of a byte needs to be counted: `FOUR` and `HIGH` always, `HIGH_START` after a byte that is
/// not high, `CONT_UPPER` after `D0`, `CONT_EXT` after `D1`.
const BEFORE: i64 = bit_moves(&[(HIGH_START, HIGH), (CONT_UPPER, D0), (CONT_EXT, D1)]);
/// The constant part of [`BEFORE`] (the `imm8` of `vgf2p8affineqb`, XORed into the result).
const BEFORE_CONSTANT: i32 = (FOUR | HIGH | HIGH_START) as i32;

/// The lead class and pair bits of byte `b >= 0x80`.
const fn high_classes(b: u8) -> (u8, u8) {
    use byte_class as class;
    let lead = if in_byte_class(b, class::CYRILLIC) {
        CYRILLIC
    } else if in_byte_class(b, class::LATIN1) {
        LATIN1
    } else if in_byte_class(b, class::LATIN_EXT) {
        LATIN_EXT
    } else if in_byte_class(b, class::CJK) {
        CJK
    } else if in_byte_class(b, class::KANA) {
        KANA
    } else if in_byte_class(b, class::HANGUL) {
        HANGUL
    } else if in_byte_class(b, class::GE_F0) {
        0
    } else if in_byte_class(b, class::GE_E0) {
        OTHER3
    } else if in_byte_class(b, class::GE_C0) {
        OTHER2
    } else {
        0
    };
    let mut pair = HIGH | HIGH_START;
    if in_byte_class(b, class::GE_F0) {
        pair |= FOUR;
    }
    if b == 0xD0 {
        pair |= D0;
    }
    if b == 0xD1 {
        pair |= D1;
    }
    if b >= 0x80 && b <= 0xAF {
        pair |= CONT_UPPER;
    }
    if b >= 0x90 && b <= 0x9F {
        pair |= CONT_EXT;
    }
    if super::is_east_asian_lead(b) {
        pair |= EAST_ASIAN;
    }
    (lead, pair)
}

/// `vpermi2b` tables of [`high_classes`] over `0x80..=0xFF` (indexed by the low 7 bits).
const HIGH_TABLES: [[u8; 128]; 2] = {
    let mut t = [[0u8; 128]; 2];
    let mut i = 0;
    while i < 128 {
        let (lead, pair) = high_classes(0x80 + i as u8);
        t[0][i] = lead;
        t[1][i] = pair;
        i += 1;
    }
    t
};

/// The non-ASCII part: event vectors of the blocks with a byte `>= 0x80`, buffered and added
/// 16 at a time into carry-save counters like the ASCII part's, and the rare-character count.
struct HighPart {
    lead_tables: [__m512i; 2],
    pair_tables: [__m512i; 2],
    before: __m512i,
    planes: Planes<2>,
    buffer: [Vectors<2>; 16],
    buffered: usize,
    counts: Counts<2>,
    rare3: u64,
    /// Characters of the rare blocks ([`super::rare_block`]).
    rare_blocks: RareBlocks,
    scripts: ScriptIds,
}

impl HighPart {
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn new() -> HighPart {
        HighPart {
            lead_tables: halves(&HIGH_TABLES[0]),
            pair_tables: halves(&HIGH_TABLES[1]),
            before: _mm512_set1_epi64(BEFORE),
            planes: Planes::new(),
            buffer: [[_mm512_setzero_si512(); 2]; 16],
            buffered: 0,
            counts: Counts::new(),
            rare3: 0,
            rare_blocks: RareBlocks::default(),
            scripts: ScriptIds {
                ids: [0; SCRIPT_IDS + 64],
                len: 0,
                scripts: [0; SCRIPT_COUNT],
            },
        }
    }

    /// The non-ASCII part of the block starting at `bytes[start]`.
    #[inline]
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vbmi,avx512vbmi2,avx512vpopcntdq,gfni,popcnt"
    )]
    fn block(&mut self, bytes: &[u8], start: usize) {
        let [before, v, next1, next2, next3] = window(bytes, start);
        let classes = |tables: [__m512i; 2], x| {
            let high = _mm512_movepi8_mask(x);
            _mm512_maskz_permutex2var_epi8(high, tables[0], x, tables[1])
        };
        let lead = classes(self.lead_tables, v);
        let pair = classes(self.pair_tables, v);
        let pair_before = classes(self.pair_tables, before);
        let counted = _mm512_and_si512(
            pair,
            _mm512_gf2p8affine_epi64_epi8::<BEFORE_CONSTANT>(pair_before, self.before),
        );
        self.buffer[self.buffered % 16] = [lead, counted];
        self.buffered += 1;
        if self.buffered == 16 {
            let buffer = &self.buffer;
            let sixteens = self.planes.add16(|i| buffer[i]);
            self.counts.add(&sixteens, 4);
            self.buffered = 0;
        }
        let east_asian = _mm512_test_epi8_mask(pair, _mm512_set1_epi8(EAST_ASIAN as i8));
        if east_asian != 0 {
            let (rare, moved) = rare3(east_asian, v, next1, next2);
            self.rare3 += rare;
            self.rare_blocks.add(&moved);
        }
        // Leads of `other2`/`other3` characters and of four-byte ones (`F0`..=`F4`), whose
        // scripts are told apart.
        let four = _mm512_cmple_epu8_mask(
            _mm512_sub_epi8(v, _mm512_set1_epi8(0xF0u8 as i8)),
            _mm512_set1_epi8(4),
        );
        let other = _mm512_test_epi8_mask(lead, _mm512_set1_epi8((OTHER2 | OTHER3) as i8)) | four;
        if other != 0
            && (four != 0 || !self.scripts.one_run(other, bytes, start, [v, next1, next2]))
        {
            let window = [v, next1, next2, next3];
            if four == 0 {
                self.scripts.block::<false>(other, window);
            } else {
                self.scripts.block::<true>(other, window);
            }
        }
    }

    /// The positional counts of the lead classes (vector 0) and the counted pair bits (vector
    /// 1), the rare-character count, the characters of the rare blocks and the script counts.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vpopcntdq,gfni,popcnt")]
    fn finish(mut self) -> (Counts<2>, u64, RareBlocks, [u64; SCRIPT_COUNT]) {
        for events in &self.buffer[..self.buffered] {
            self.counts.add(events, 0);
        }
        self.planes.count(&mut self.counts);
        self.scripts.flush();
        (
            self.counts,
            self.rare3,
            self.rare_blocks,
            self.scripts.scripts,
        )
    }
}

/// The 64 bytes of the block at `bytes[start]`, moved back by one byte (`before`: the byte
/// before the block first, 0 at the start of the text), and on by one, two and three bytes (the
/// continuations of each lead); zeros past the end of the text.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vbmi2,avx512vpopcntdq,gfni,popcnt")]
fn window(bytes: &[u8], start: usize) -> [__m512i; 5] {
    let inside: Option<&[u8; 68]> = match start.checked_sub(1) {
        Some(first) => bytes.get(first..start + 67).and_then(|w| w.try_into().ok()),
        None => None,
    };
    let padded;
    let window = match inside {
        Some(window) => window,
        None => {
            padded = padded_window(bytes, start);
            &padded
        }
    };
    let (before, _) = window.as_chunks::<64>();
    let (bytes, _) = window[1..].as_chunks::<64>();
    let (next1, _) = window[2..].as_chunks::<64>();
    let (next2, _) = window[3..].as_chunks::<64>();
    let (next3, _) = window[4..].as_chunks::<64>();
    [
        load(&before[0]),
        load(&bytes[0]),
        load(&next1[0]),
        load(&next2[0]),
        load(&next3[0]),
    ]
}

/// The bytes of [`window`] at the start or end of the text.
#[cold]
#[inline(never)]
fn padded_window(bytes: &[u8], start: usize) -> [u8; 68] {
    let mut padded = [0u8; 68];
    let rest = bytes.get(start..).unwrap_or(&[]);
    let len = rest.len().min(67);
    padded[1..=len].copy_from_slice(&rest[..len]);
    if let Some(&before) = start.checked_sub(1).and_then(|s| bytes.get(s)) {
        padded[0] = before;
    }
    padded
}

/// Bit `i`: byte `i` of `x` is a continuation byte (`80`..=`BF`).
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn continuations(x: __m512i) -> u64 {
    let top = _mm512_and_si512(x, _mm512_set1_epi8(0xC0u8 as i8));
    _cvtmask64_u64(_mm512_cmpeq_epi8_mask(top, _mm512_set1_epi8(0x80u8 as i8)))
}

/// How many of the kana/CJK/hangul leads `leads` of `v` (continuations in `next1`, `next2`)
/// are not common characters ([`super::is_common3`]) and not in a rare block, and how many are
/// in each rare block: CJK Extension A counted as kana, Extension A and the hexagrams counted
/// as CJK, U+A000–U+ABFF counted as Hangul ([`super::rare_block`]).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi2,popcnt")]
fn rare3(leads: u64, v: __m512i, next1: __m512i, next2: __m512i) -> (u64, RareBlocks) {
    let complete = leads & continuations(next1) & continuations(next2);
    // Each block's complete characters: its lead, then a first continuation within its range
    // (a compare for each bound inside the continuations' `80`–`BF`: one for every block).
    // Text without the lead (Korean has no `E3`, Japanese kana no `EA`) skips the block.
    let mut moved = RareBlocks::default();
    for (index, lead, first, last) in RARE_BLOCK_BYTES {
        let of_lead = _mm512_mask_cmpeq_epi8_mask(complete, v, _mm512_set1_epi8(lead as i8));
        if of_lead == 0 {
            continue;
        }
        let mut within = of_lead;
        if first > 0x80 {
            within = _mm512_mask_cmpge_epu8_mask(within, next1, _mm512_set1_epi8(first as i8));
        }
        if last < 0xBF {
            within = _mm512_mask_cmple_epu8_mask(within, next1, _mm512_set1_epi8(last as i8));
        }
        moved.0[index] = u64::from(within.count_ones());
    }
    // A lead without two continuation bytes is not a common character.
    let mut rare = u64::from((leads & !complete).count_ones());
    // Each complete lead is followed by two bytes that are not leads: at most 22 in a block
    // (so they fit the 32 16-bit lanes below).
    let n = complete.count_ones() as usize;
    let words = |x| {
        let packed = _mm512_maskz_compress_epi8(complete, x);
        _mm512_cvtepu8_epi16(_mm512_castsi512_si256(packed))
    };
    // Code point: 4 bits of the lead, 6 of each continuation.
    let low12 = _mm512_ternarylogic_epi64::<SELECT>(
        words(next2),
        _mm512_slli_epi16::<6>(words(next1)),
        _mm512_set1_epi16(0x0FC0),
    );
    let code_points = _mm512_or_si512(low12, _mm512_slli_epi16::<12>(words(v)));
    // A lead in `E3`..=`ED` gives a code point in `0x3000..0xE000`: an index in the bitmap.
    let indices = _mm512_sub_epi16(code_points, _mm512_set1_epi16(COMMON3_FIRST as i16));
    let bitmap = &super::super::common3::COMMON3;
    // The bitmap as 32-bit words (little-endian: bit `i` of a `u64` is bit `i % 32` of its
    // word `i / 32`), one gathered word per lead.
    let last_word = _mm512_set1_epi32((bitmap.len() * 2 - 1) as i32);
    let lookup = |half: __m256i, count: usize| {
        let index = _mm512_cvtepu16_epi32(half);
        let word_index = _mm512_min_epu32(_mm512_srli_epi32::<5>(index), last_word);
        let lanes = ((1u32 << count) - 1) as u16;
        // SAFETY: the lanes in `lanes` read the 4-byte word `word_index` of `bitmap`, which is
        // at most its last (`min` above); the other lanes read nothing. AVX-512 F is enabled.
        let words = unsafe {
            _mm512_mask_i32gather_epi32::<4>(
                _mm512_setzero_si512(),
                lanes,
                word_index,
                bitmap.as_ptr().cast(),
            )
        };
        let bit = _mm512_and_si512(index, _mm512_set1_epi32(31));
        let bits = _mm512_srlv_epi32(words, bit);
        let common = _mm512_mask_test_epi32_mask(lanes, bits, _mm512_set1_epi32(1));
        (count - common.count_ones() as usize) as u64
    };
    rare += lookup(_mm512_castsi512_si256(indices), n.min(16));
    if n > 16 {
        rare += lookup(_mm512_extracti64x4_epi64::<1>(indices), n - 16);
    }
    // The lookup counted them as rare: none of them is common (a test checks the bitmap).
    (rare - moved.total(), moved)
}

/// Script ids (a script's index in `scripts::SCRIPT_NAMES` plus one; 0: none) of the
/// `other2`/`other3` and four-byte leads, found a block at a time and counted in batches
/// ([`ScriptIds::flush`]).
///
/// Each block's leads are decoded sixteen at a time: the leads and the three bytes after each are
/// compressed together and widened to 32-bit lanes, which compute the [`SCRIPT_OF`] entry (a
/// two-byte character's code point, [`THREE_BYTE_BASE`] plus a three-byte one's block of 16
/// code points, or [`FOUR_BYTE_BASE`] plus a four-byte one's block of 4,096, as
/// `scripts::script_at` does) and gather it. Nothing waits for the gathers: their
/// ids are stored, and only counted once a thousand have been buffered.
///
/// Decoding the leads one at a time (what the other kernels do, `PendingLeads`) was 12% of this
/// kernel's time on the mixed corpus, whose box-drawn trees put a dozen leads in a block.
struct ScriptIds {
    /// `len` ids, then zeros or stale ids up to the slack.
    ids: [u8; SCRIPT_IDS + 64],
    len: usize,
    scripts: [u64; SCRIPT_COUNT],
}

/// Ids buffered before they are counted (a block adds at most 64). Small enough that zeroing
/// the buffer costs a short text nothing measurable (with 4,096, estimating a 32-byte text took
/// 5–10% longer); a larger one would not count faster, as counting costs the same per id.
const SCRIPT_IDS: usize = 1024;

impl ScriptIds {
    /// Adds the ids of the leads `leads` of `window[0]` (continuations in `window[1..]`: the
    /// bytes one, two and three on). `FOUR`: some of them are four-byte leads; without, the
    /// four-byte lanes are not computed.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi2,popcnt")]
    fn block<const FOUR: bool>(&mut self, leads: u64, window: [__m512i; 4]) {
        if self.len > SCRIPT_IDS - 64 {
            self.flush();
        }
        let n = leads.count_ones() as usize;
        let [v, next1, next2, next3] = window;
        let compress = |x| _mm512_maskz_compress_epi8(leads, x);
        // The third continuation byte only matters to four-byte leads, which most blocks lack.
        let third = if FOUR {
            compress(next3)
        } else {
            _mm512_setzero_si512()
        };
        let mut packed = [compress(v), compress(next1), compress(next2), third];
        let set1 = _mm512_set1_epi32;
        let continuation = |b| _mm512_cmpeq_epi32_mask(_mm512_and_si512(b, set1(0xC0)), set1(0x80));
        let low6 = |b| _mm512_and_si512(b, set1(0x3F));
        let mut left = n;
        while left > 0 {
            let [b0, b1, b2, b3] = packed.map(|p| _mm512_cvtepu8_epi32(_mm512_castsi512_si128(p)));
            let step = left.min(16);
            let in_step = (u32::MAX >> (32 - step)) as u16;
            let two = _mm512_cmplt_epu32_mask(b0, set1(0xE0));
            let four = if FOUR {
                _mm512_cmpge_epu32_mask(b0, set1(0xF0))
            } else {
                0
            };
            let valid =
                in_step & continuation(b1) & (two | continuation(b2)) & (!four | continuation(b3));
            let char2 = _mm512_or_si512(
                _mm512_slli_epi32::<6>(_mm512_and_si512(b0, set1(0x1F))),
                low6(b1),
            );
            let block3 = _mm512_add_epi32(
                _mm512_or_si512(
                    _mm512_or_si512(
                        _mm512_slli_epi32::<8>(_mm512_and_si512(b0, set1(0x0F))),
                        _mm512_slli_epi32::<2>(low6(b1)),
                    ),
                    _mm512_srli_epi32::<4>(low6(b2)),
                ),
                set1(THREE_BYTE_BASE as i32),
            );
            let block34 = if FOUR {
                let block4 = _mm512_add_epi32(
                    _mm512_or_si512(
                        _mm512_slli_epi32::<6>(_mm512_and_si512(b0, set1(0x07))),
                        low6(b1),
                    ),
                    set1(FOUR_BYTE_BASE as i32),
                );
                _mm512_mask_blend_epi32(four, block3, block4)
            } else {
                block3
            };
            let entry = _mm512_mask_blend_epi32(two, block34, char2);
            // SAFETY: each lane in `valid` reads the 4 bytes at `SCRIPT_OF[entry]`, and `entry`
            // is at most `FOUR_BYTE_BASE + 0x1FF`, the table's last entry, which three more
            // bytes follow (a two-byte entry is below `THREE_BYTE_BASE`, a three-byte one below
            // `FOUR_BYTE_BASE`); the other lanes read nothing. AVX-512 F is enabled.
            let words = unsafe {
                _mm512_mask_i32gather_epi32::<1>(
                    _mm512_setzero_si512(),
                    valid,
                    entry,
                    SCRIPT_OF.as_ptr().cast(),
                )
            };
            // The low byte of each word is the lead's script id (`vpmovdb` truncates); lanes
            // past `step` are zeros, overwritten by the next step's ids.
            if let Some(out) = self.ids.get_mut(self.len..self.len + 16) {
                // SAFETY: `out` is 16 writable bytes; the unaligned store writes exactly them.
                unsafe { _mm_storeu_si128(out.as_mut_ptr().cast(), _mm512_cvtepi32_epi8(words)) };
            }
            self.len += step;
            left -= step;
            packed = packed.map(|p| _mm512_alignr_epi32::<4>(_mm512_setzero_si512(), p));
        }
    }

    /// Counts the leads `leads` of `window[0]` (continuations in `window[1..]`) at once and
    /// returns `true` when they are all the same three-byte lead and first continuation byte,
    /// of a run of 64 code points with one script (or none: [`SCRIPT_OF_RUN`]); else counts
    /// nothing and returns `false`. `bytes[start..]` are the bytes of `window[0]`.
    ///
    /// Two thirds of the mixed corpus's blocks with leads to look up are such blocks (the box
    /// drawing of `tree` listings; one script's text and the quotes and dashes of prose would
    /// be too): three compares replace the compresses, the gather and the buffered ids of
    /// [`ScriptIds::block`], 2% of the estimate's time. Allowing several runs of one lead
    /// (a `vpermb` over its 64 runs), or up to four runs of any leads, took no more off.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,popcnt")]
    fn one_run(&mut self, leads: u64, bytes: &[u8], start: usize, window: [__m512i; 3]) -> bool {
        let first = start + leads.trailing_zeros() as usize;
        let (Some(&lead), Some(&next)) = (bytes.get(first), bytes.get(first + 1)) else {
            return false;
        };
        if lead & 0xF0 != 0xE0 || next & 0xC0 != 0x80 {
            return false;
        }
        let run = SCRIPT_OF_RUN[usize::from(lead & 0x0F) << 6 | usize::from(next & 0x3F)];
        if run == MIXED_RUN {
            return false;
        }
        let [v, next1, next2] = window;
        let equal = |x, b: u8| _mm512_mask_cmpeq_epi8_mask(leads, x, _mm512_set1_epi8(b as i8));
        if equal(v, lead) & equal(next1, next) & continuations(next2) != leads {
            return false;
        }
        if let Some(count) = usize::from(run)
            .checked_sub(1)
            .and_then(|s| self.scripts.get_mut(s))
        {
            *count += u64::from(leads.count_ones());
        }
        true
    }

    /// Counts the buffered ids into `scripts`: a compare and a popcount per script and 64 ids.
    #[inline(never)]
    #[target_feature(enable = "avx512f,avx512bw,popcnt")]
    fn flush(&mut self) {
        let (chunks, _) = self.ids.as_chunks::<64>();
        let used = self.len.div_ceil(64);
        let last_valid = match self.len % 64 {
            0 => u64::MAX,
            r => (1u64 << r) - 1,
        };
        for (script, count) in self.scripts.iter_mut().enumerate() {
            let id = _mm512_set1_epi8(script as i8 + 1);
            for (i, chunk) in chunks.iter().take(used).enumerate() {
                let valid = if i + 1 == used { last_valid } else { u64::MAX };
                let same = _mm512_mask_cmpeq_epi8_mask(valid, load(chunk), id);
                *count += u64::from(same.count_ones());
            }
        }
        self.len = 0;
    }
}

/// Blocks per group: the ASCII part of a group's blocks runs before their non-ASCII part (a
/// bit per block in a `u64` marks the blocks with bytes `>= 0x80`).
const GROUP: usize = 64;

/// Counts the classes of `bytes`.
///
/// Blocks are visited in groups of [`GROUP`]: first the ASCII part of every block (16 blocks
/// at a time into the carry-save counters; the last group's blocks short of 16 counted one by
/// one), then the non-ASCII part of the blocks that have a byte `>= 0x80`, so the ASCII loop
/// holds no call and no branch on the data.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vbmi2,avx512vpopcntdq,gfni,popcnt")]
pub(super) fn count(bytes: &[u8]) -> ClassCounts {
    const _: () = {
        assert!(super::LONG_RUN == 16 && super::LONG_WORD == 8);
        assert!(super::CONSONANT_RUN == 3 && super::CONSONANT_RUN_END == 6);
    };
    let k = Constants::new();
    let zero = _mm512_setzero_si512();
    let mut carry = Carry {
        class: zero,
        run2: zero,
        run4_3: zero,
        run8: zero,
    };
    let mut planes = Planes::<2>::new();
    let mut counts = Counts::<2>::new();
    let mut high = HighPart::new();
    let mut th = ThPairs {
        prev_t: 0,
        total: 0,
    };
    let (blocks, tail) = bytes.as_chunks::<64>();
    for (group_index, group) in blocks.chunks(GROUP).enumerate() {
        // Bit `i`: block `i` of the group has a byte `>= 0x80`.
        let mut high_blocks = 0u64;
        let (chunks, rest) = group.as_chunks::<16>();
        for (c, chunk) in chunks.iter().enumerate() {
            // The chunk's bytes `>= 0x80`, or-ed; which blocks have them is worked out only
            // when there are some ([`high_flags`]).
            let mut any_high = 0u64;
            let sixteens = planes.add16(|i| {
                let (events, mask) = block(&k, &mut carry, load(&chunk[i]), u64::MAX);
                any_high |= mask;
                events
            });
            counts.add(&sixteens, 4);
            if any_high != 0 {
                high_blocks |= high_flags(chunk) << (16 * c);
            }
        }
        for (i, block_bytes) in rest.iter().enumerate() {
            let (events, mask) = block(&k, &mut carry, load(block_bytes), u64::MAX);
            high_blocks |= u64::from(mask != 0) << (16 * chunks.len() + i);
            counts.add(&events, 0);
        }
        th.blocks(group);
        while high_blocks != 0 {
            let i = high_blocks.trailing_zeros() as usize;
            high_blocks &= high_blocks - 1;
            high.block(bytes, (group_index * GROUP + i) * 64);
        }
    }
    if !tail.is_empty() {
        let mut padded = [0u8; 64];
        padded[..tail.len()].copy_from_slice(tail);
        let valid = (1u64 << tail.len()) - 1;
        let (events, high_mask) = block(&k, &mut carry, load(&padded), valid);
        counts.add(&events, 0);
        th.blocks(&[padded]);
        if high_mask != 0 {
            high.block(bytes, blocks.len() * 64);
        }
    }
    planes.count(&mut counts);
    let (high_counts, rare3, rare_blocks, scripts) = high.finish();
    let mut counts = finish(bytes.len() as u64, &counts, &high_counts, rare3);
    counts.scripts = scripts;
    rare_blocks.move_to_rare_script(&mut counts);
    counts.th_pairs = th.total;
    counts
}

/// Bit `i`: block `i` of `blocks` has a byte `>= 0x80`.
///
/// Run only for the chunks of sixteen blocks that have such a byte (the ASCII loop keeps just
/// the `or` of its sixteen masks). Built inside the ASCII loop, the sixteen flags were moved
/// into vector registers and merged there (`vmovq`, `vpunpcklqdq`, `vinserti128`: shuffles on
/// port 5, which the loop is short of) in every chunk; kept out of line so that LLVM does not
/// fold it back (inlined, the estimate of the mixed corpus took 2% longer).
#[inline(never)]
#[target_feature(enable = "avx512f,avx512bw")]
fn high_flags(blocks: &[[u8; 64]; 16]) -> u64 {
    let mut flags = 0u64;
    for (i, block) in blocks.iter().enumerate() {
        flags |= u64::from(_mm512_movepi8_mask(load(block)) != 0) << i;
    }
    flags
}

/// The class counts from the positional counts of both parts.
#[target_feature(enable = "avx512f")]
fn finish(bytes: u64, ascii: &Counts<2>, high: &Counts<2>, rare3: u64) -> ClassCounts {
    let (classes, pairs) = (|bit| ascii.get(0, bit), |bit| ascii.get(1, bit));
    let (letters, upper, digits, spaces, punct) = (
        classes(LETTER),
        classes(UPPER),
        classes(DIGIT),
        classes(SPACE),
        classes(PUNCT),
    );
    let (letter_pairs, digit_pairs) = (pairs(LETTER), pairs(DIGIT));
    let (lead, pair) = (|bit| high.get(0, bit), |bit| high.get(1, bit));
    let high_bytes = pair(HIGH);
    let mut counts = ClassCounts {
        bytes,
        word_starts: letters.saturating_sub(letter_pairs),
        digit_runs: digits.saturating_sub(digit_pairs),
        punct_runs: punct.saturating_sub(pairs(PUNCT)),
        space_runs: spaces.saturating_sub(pairs(SPACE)),
        case_changes: pairs(UPPER),
        alnum_switches: pairs(ALNUM).saturating_sub(letter_pairs + digit_pairs),
        long_run: classes(ALNUM),
        long_word: pairs(JSON),
        consonant_runs: classes(CONSONANT),
        high_runs: pair(HIGH_START),
        cyrillic_ext: pair(CONT_EXT),
        cyrillic_upper: pair(CONT_UPPER),
        rare3,
        ..ClassCounts::default()
    };
    let four = pair(FOUR);
    let three = lead(OTHER3) + lead(CJK) + lead(KANA) + lead(HANGUL);
    let two = lead(OTHER2) + lead(CYRILLIC) + lead(LATIN1) + lead(LATIN_EXT);
    let mut totals = [0u64; byte_class::COUNT];
    totals[byte_class::LOWER] = letters.saturating_sub(upper);
    totals[byte_class::UPPER] = upper;
    totals[byte_class::DIGIT] = digits;
    totals[byte_class::SPACE] = spaces;
    // Every byte is a letter, digit, space, punctuation, line feed or high byte.
    totals[byte_class::NEWLINE] =
        bytes.saturating_sub(letters + digits + spaces + punct + high_bytes);
    totals[byte_class::JSON] = classes(JSON);
    totals[byte_class::RARE_LETTER] = pairs(CONSONANT);
    totals[byte_class::HIGH] = high_bytes;
    totals[byte_class::GE_C0] = two + three + four;
    totals[byte_class::GE_E0] = three + four;
    totals[byte_class::GE_F0] = four;
    totals[byte_class::CJK] = lead(CJK);
    totals[byte_class::KANA] = lead(KANA);
    totals[byte_class::HANGUL] = lead(HANGUL);
    totals[byte_class::CYRILLIC] = lead(CYRILLIC);
    totals[byte_class::LATIN1] = lead(LATIN1);
    totals[byte_class::LATIN_EXT] = lead(LATIN_EXT);
    super::apply_byte_classes(&mut counts, &totals);
    counts
}
