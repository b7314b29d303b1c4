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
//! whatever the kind). The rows are the decomposed forms of the `latin-eu` documents with at
//! least [`MIN_MARKS`] marks, in the half of their source document; the held-out ones are
//! reported beside the accuracy table.

use anyhow::{Context, Result};
use ferroloop::tokens::{SCRIPT_NAMES, TERM_COUNT, count_classes, term_name};
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
const NAME: &str = "combining_marks";

/// The model term of the combining marks.
pub fn term() -> Result<usize> {
    (0..TERM_COUNT)
        .find(|&t| term_name(t) == NAME)
        .context("the core has no combining_marks term")
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

/// One training row of a second step (the marks', and `symbols.rs`'s): the estimate without the
/// priced term, the term's count, and what the family is fitted to.
pub struct Row {
    pub base: f64,
    pub count: f64,
    pub target: f64,
}

/// The price per counted character (a mark, a symbol): least squares on relative error with under-estimates weighing
/// `under_weight` times as much (iteratively re-weighted, as the main fit), not below zero; then
/// raised, as the main fit's safety scale is, until at most `floor_quantile` of the rows are
/// below `floor_ratio`.
pub fn price(
    rows: &[Row],
    under_weight: f64,
    rounds: usize,
    floor_ratio: f64,
    floor_quantile: f64,
) -> f64 {
    let rows: Vec<&Row> = rows
        .iter()
        .filter(|r| r.count > 0.0 && r.target > 0.0)
        .collect();
    if rows.is_empty() {
        return 0.0;
    }
    let mut price = 0.0;
    for _ in 0..=rounds {
        let (mut numerator, mut denominator) = (0.0, 0.0);
        for row in &rows {
            let ratio = (row.base + price * row.count) / row.target;
            let weight = if ratio < 1.0 { under_weight } else { 1.0 };
            let scale = row.target * row.target;
            numerator += weight * (row.target - row.base) * row.count / scale;
            denominator += weight * row.count * row.count / scale;
        }
        price = (numerator / denominator).max(0.0);
    }
    // The price each row needs to reach the floor, highest first; the rows the quantile allows
    // below it are skipped.
    let mut needed: Vec<f64> = rows
        .iter()
        .map(|r| (floor_ratio * r.target - r.base) / r.count)
        .collect();
    needed.sort_by(|a, b| b.total_cmp(a));
    let allowed_below = (floor_quantile * rows.len() as f64).floor() as usize;
    needed
        .get(allowed_below)
        .map_or(price, |&floor_price| price.max(floor_price))
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
        assert!(term().is_ok());
    }

    #[test]
    fn the_price_fits_the_marks_cost() {
        // Each row costs 2 tokens a mark beyond its base: the price is 2, under any weight.
        let rows: Vec<Row> = (1..20)
            .map(|i| Row {
                base: 100.0 * i as f64,
                count: 10.0 * i as f64,
                target: 120.0 * i as f64,
            })
            .collect();
        for weight in [1.0, 3.0, 8.0] {
            assert!((price(&rows, weight, 8, 0.85, 0.005) - 2.0).abs() < 1e-9);
        }
        // A row far below its floor at that price raises it to what the row needs.
        let mut low = rows;
        low.push(Row {
            base: 10.0,
            count: 10.0,
            target: 100.0,
        });
        let p = price(&low, 3.0, 8, 0.85, 0.005);
        assert!((p - 7.5).abs() < 1e-9, "{p}");
        // No marks: no price.
        assert_eq!(price(&[], 3.0, 8, 0.85, 0.005), 0.0);
    }
}
