//! The price of a combining mark (the `combining_marks` script count, U+0300–U+036F), fitted in
//! a second step.
//!
//! Decomposed text (NFD: `e` + U+0301 for `é`) is what macOS writes in file names and what some
//! PDFs copy, and o200k and cl100k spend one to two tokens on each mark of it. No document of
//! the corpus has a single mark, so the main fit cannot price them (their inputs are all zero)
//! and left to it they would cost the flat `other2` price of the kind the text falls in: nearly
//! nothing in `prose`, where decomposed French and Spanish fall, which put 42 of 95 decomposed
//! `latin-eu` catalogs below 0.85 of their o200k count and 65 of 95 of cl100k's.
//!
//! Decomposed documents as training rows of the main fit would let the fit move every Latin
//! price to suit them (session 42 tried a guard category of this kind: the refit priced a mark
//! at 21 cl100k tokens and pushed held-out `latin-eu` over 10%). So the main fit stays as it is,
//! and this step fits one number per family with every other coefficient fixed: the price of a
//! mark, the same in every text kind (the gates sum to one, so it adds that price per mark
//! whatever the kind: `fit::price_per_count`). The rows are the decomposed forms of the
//! `latin-eu` documents with at least [`MIN_MARKS`] marks, in the half of their source document;
//! the held-out ones are reported beside the accuracy table.

use anyhow::{Context, Result};
use ferroloop::tokens::{SCRIPT_NAMES, count_classes};
use unicode_normalization_alignments::UnicodeNormalization;

use crate::corpus::Doc;

/// The category the decomposed documents are reported under (never a category of the main fit).
pub const CATEGORY: &str = "decomposed";

/// The category whose documents are decomposed: catalogs of French, Spanish, Portuguese,
/// Catalan, Czech, Polish, ... (accented letters on nearly every line).
pub const SOURCE_CATEGORY: &str = "latin-eu";

/// A decomposed document needs at least this many marks to be a row: fewer, and its ratio says
/// little about their price.
pub const MIN_MARKS: u64 = 20;

/// The core's name of the count: its script and its model term.
pub const NAME: &str = "combining_marks";

/// The paragraph above the held-out decomposed documents' table in `accuracy.md`.
pub fn heading(held_out: usize) -> String {
    format!(
        "Decomposed text (not a category of the corpus): the NFD forms of the held-out \
         `{SOURCE_CATEGORY}` documents with at least {MIN_MARKS} combining marks, {held_out} \
         documents. The price of a mark is fitted on the training half's, with every other \
         coefficient fixed (`tools/fit-tokens/src/marks.rs`)."
    )
}

/// The combining marks of `text`, as the core counts them.
fn marks_in(text: &str) -> Result<u64> {
    let script = SCRIPT_NAMES
        .iter()
        .position(|&name| name == NAME)
        .context("the core has no combining_marks script")?;
    Ok(count_classes(text.as_bytes()).scripts[script])
}

/// The decomposed form of each document of [`SOURCE_CATEGORY`] whose NFD has at least
/// [`MIN_MARKS`] marks, with the document's half.
pub fn decomposed<'a>(docs: impl Iterator<Item = (&'a Doc, bool)>) -> Result<Vec<(Doc, bool)>> {
    let mut out = Vec::new();
    for (doc, train) in docs.filter(|(doc, _)| doc.category == SOURCE_CATEGORY) {
        let text: String = doc.text.nfd().map(|(c, _)| c).collect();
        if marks_in(&text)? >= MIN_MARKS {
            let doc = Doc {
                category: CATEGORY,
                source: format!("nfd:{}", doc.source),
                text,
            };
            out.push((doc, train));
        }
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn decomposes_accented_catalogs_only() {
        let doc = |category, text: &str| Doc {
            category,
            source: "s".into(),
            text: text.into(),
        };
        let french = doc(SOURCE_CATEGORY, &"Créer à partir d'un modèle. ".repeat(10));
        let english = doc(SOURCE_CATEGORY, &"Create from a template. ".repeat(10));
        let prose = doc("prose", &"Créer à partir d'un modèle. ".repeat(10));
        let out =
            decomposed([(&french, true), (&english, false), (&prose, true)].into_iter()).unwrap();
        assert_eq!(out.len(), 1);
        let (d, train) = &out[0];
        assert!(*train);
        assert_eq!(d.category, CATEGORY);
        assert_eq!(marks_in(&d.text).unwrap(), 30);
        assert!(d.text.starts_with("Cre\u{301}er a\u{300}"));
        assert!(crate::term_named(NAME).is_ok());
    }
}
