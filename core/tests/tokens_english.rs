//! English against other Latin-script languages of the same letters. The vocabularies hold
//! common English words whole and split Italian or Dutch ones more finely, which no per-letter
//! count tells apart: before session 33 the model priced all such text for its costliest
//! documents, and plain English in claude-legacy came out at 1.57× its exact count (the
//! paragraph below). `ClassCounts::th_pairs` marks English; these paragraphs, written for this
//! test, must stay at or above the floor in every family, and English must no longer be priced
//! like Italian.
//!
//! Needs the exact counters (`cargo test -p ferroloop --features exact --test tokens_english`).
#![cfg(feature = "exact")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use ferroloop::tokens::{Family, count_exact, estimate_text};

/// The floor: no document below this fraction of its exact count.
const FLOOR: f64 = 0.85;

const ENGLISH: &str = "The program reads the configuration file when it starts and writes an error message if an option is not valid. To change the default behaviour, set the environment variable before you start it; then the other threads pick it up.\n";
const ITALIAN: &str = "Il programma legge il file di configurazione all'avvio e scrive un messaggio di errore se una opzione non è valida. Per modificare il comportamento predefinito, impostate la variabile di ambiente prima di avviarlo.\n";
const DUTCH: &str = "Het programma leest bij het opstarten het configuratiebestand en schrijft een foutmelding als een optie ongeldig is. Om het standaardgedrag te wijzigen, zet je de omgevingsvariabele voordat je het start.\n";

/// Each paragraph 20 times, so that rounding does not matter.
const REPEAT: usize = 20;

/// Exact claude-legacy counts of each paragraph repeated [`REPEAT`] times (`fit-tokens --count`:
/// the claude-legacy vocabulary is not among the core's exact counters).
const LEGACY_EXACT: [(&str, f64); 3] = [(ENGLISH, 900.0), (ITALIAN, 1300.0), (DUTCH, 1360.0)];

fn ratio(text: &str, family: Family, exact: f64) -> f64 {
    estimate_text(text, family) as f64 / exact
}

#[test]
fn latin_script_paragraphs_stay_above_the_floor() {
    for paragraph in [ENGLISH, ITALIAN, DUTCH] {
        let text = paragraph.repeat(REPEAT);
        for family in [Family::O200k, Family::Cl100k] {
            let exact = count_exact(&text, family).unwrap() as f64;
            let r = ratio(&text, family, exact);
            assert!(
                (FLOOR..=1.5).contains(&r),
                "{family}: {r:.3} on {paragraph:?}"
            );
        }
    }
    for (paragraph, exact) in LEGACY_EXACT {
        let text = paragraph.repeat(REPEAT);
        for family in [Family::ClaudeLegacy, Family::Claude] {
            let r = ratio(&text, family, exact);
            assert!(
                (FLOOR..=1.5).contains(&r),
                "{family}: {r:.3} on {paragraph:?}"
            );
        }
    }
}

#[test]
fn english_is_not_priced_like_italian() {
    // claude-legacy spends 5.1 bytes per token on the English paragraph and 3.3 on the Italian
    // one; the session-32 model estimated 1.57× and 1.14× their exact counts.
    let [(english, english_exact), (italian, italian_exact), _] = LEGACY_EXACT;
    let english = ratio(&english.repeat(REPEAT), Family::ClaudeLegacy, english_exact);
    let italian = ratio(&italian.repeat(REPEAT), Family::ClaudeLegacy, italian_exact);
    assert!(english <= 1.35, "English: {english:.3}");
    assert!(english / italian <= 1.25, "{english:.3} / {italian:.3}");
}
