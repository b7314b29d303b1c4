//! The price of a miscellaneous symbol or dingbat (the `misc_symbols` script count:
//! U+2600–U+27BF, U+2B00–U+2BFF, `★ ☆ ☐ ☑ ♥ ✓ ✗ ✔ ✂ ⬆ ✅ ❤ ⚠ ⭐`), fitted in a second step
//! as the combining marks are (`marks.rs`, `fit::price_per_count`).
//!
//! o200k spends about a token on many of these symbols and claude-legacy about one per UTF-8
//! byte. At the flat `other3` price a list of star ratings was estimated at 0.70 of its
//! claude-legacy count and a task list of check boxes at 0.72. No category of the corpus has
//! enough of them to price them, and as a term of the main fit (session 46) they took prices of
//! 14 o200k and 25 cl100k tokens in the `script` kind from a few ideograph documents that hold
//! one or two, and moved 40 rows of the held-out table. So the main fit leaves them out and this
//! step fits one price per family, the same in every kind, with every other coefficient fixed,
//! on generated lines of such symbols (`corpus::misc_symbol_docs`): ratings, task lists, table
//! rows of marks and runs of symbols, half of them held out and reported beside the accuracy
//! table.

/// The category the symbol documents are reported under (never a category of the main fit).
pub const CATEGORY: &str = "misc-symbols";

/// The core's name of the count: its script and its model term.
pub const NAME: &str = "misc_symbols";

/// The paragraph above the held-out symbol documents' table in `accuracy.md`.
pub fn heading(held_out: usize) -> String {
    format!(
        "Miscellaneous symbols and dingbats (not a category of the corpus): generated lines of \
         them (ratings, task lists, table rows of marks, runs of symbols), {held_out} held-out \
         documents. The price of a symbol is fitted on the training half's, with every other \
         coefficient fixed (`tools/fit-tokens/src/symbols.rs`)."
    )
}
