//! The price of a phonetic letter (the `phonetic` script count: the IPA Extensions and the
//! Spacing Modifier Letters, U+0250–U+02FF, `ə ɪ ʊ ʃ ʒ ɹ ˈ ː ʰ`), fitted in a second step as the
//! combining marks are (`marks.rs`, `fit::price_per_count`).
//!
//! o200k spends about two tokens on each of them in a transcription, and cl100k and
//! claude-legacy more. Counted with the Latin Extended letters (their leads `C9`–`CA` were in
//! that class until session 47) they were priced like the letters of Czech or Polish, and a
//! transcribed sentence was estimated at 0.51 of its o200k count, 0.64 of cl100k's and 0.72 of
//! claude-legacy's. No category of the corpus has enough of them to price them, so the main fit
//! leaves them out and this step fits one price per family, the same in every kind, with every
//! other coefficient fixed, on generated transcriptions (`corpus::phonetic_docs`): dictionary
//! entries, transcribed sentences, table rows of British and American forms and narrow
//! transcriptions, half of them held out and reported beside the accuracy table.

/// The category the transcriptions are reported under (never a category of the main fit).
pub const CATEGORY: &str = "phonetic";

/// The core's name of the count: its script and its model term.
pub const NAME: &str = "phonetic";

/// The paragraph above the held-out transcriptions' table in `accuracy.md`.
pub fn heading(held_out: usize) -> String {
    format!(
        "Phonetic transcriptions (not a category of the corpus): generated dictionary entries, \
         transcribed sentences, table rows of British and American forms and narrow \
         transcriptions, {held_out} held-out documents. The price of a phonetic letter (IPA \
         Extensions, Spacing Modifier Letters) is fitted on the training half's, with every other \
         coefficient fixed (`tools/fit-tokens/src/phonetic.rs`)."
    )
}
