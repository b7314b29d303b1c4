//! Inputs found by fuzzing (`scripts/fuzz-smoke.sh`), kept as regression tests. Each test names
//! the fuzz target that found it.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use ferroloop::decode::partial_json::{PartialJson, PartialMode};
use serde_json::Value;

const MODES: [PartialMode; 2] = [
    PartialMode::DropIncompleteStrings,
    PartialMode::TrailingStrings,
];

fn fresh_view_text(text: &str, mode: PartialMode) -> Option<String> {
    let mut p = PartialJson::new();
    p.push(text);
    p.view_text(mode)
}

/// Feeds `pieces` one by one; after each, the incremental view must equal a fresh parse of the
/// same prefix and be valid JSON.
fn check_incremental(pieces: &[&str]) -> PartialJson {
    let mut out = None;
    for mode in MODES {
        let mut incremental = PartialJson::new();
        let mut prefix = String::new();
        for piece in pieces {
            incremental.push(piece);
            prefix.push_str(piece);
            let view = incremental.view_text(mode);
            assert_eq!(
                view,
                fresh_view_text(&prefix, mode),
                "{prefix:?} in {mode:?}"
            );
            if let Some(view) = &view {
                assert!(
                    serde_json::from_str::<Value>(view).is_ok(),
                    "view {view:?} of {prefix:?} is not JSON"
                );
            }
        }
        out = Some(incremental);
    }
    out.unwrap()
}

/// fuzz target `partial_json` (crash-974740d1): a raw control character inside a string was
/// accepted, so the "complete-so-far" view was not valid JSON (serde_json: "control character
/// (\u0000-\u001F) found while parsing a string").
#[test]
fn raw_control_character_in_a_string_is_invalid_json() {
    let text = "{\n  \"id\u{5}\u{3}{\n  \u{FFFD}id\": \"ms\"g_4Qp:";
    let p = check_incremental(&[text]);
    assert!(p.is_invalid());
    for mode in MODES {
        assert_eq!(fresh_view_text(text, mode).as_deref(), Some("{}"));
    }
    // In a value, the text before the control character is kept in trailing-strings mode.
    let p = check_incremental(&["{\"a\": \"xy", "z\u{1}w\"}"]);
    assert!(p.is_invalid());
    assert_eq!(
        fresh_view_text("{\"a\": \"xyz\u{1}w\"}", PartialMode::TrailingStrings).as_deref(),
        Some("{\"a\": \"xyz\"}")
    );
    // A line feed inside a string is a control character too.
    check_incremental(&["[\"line", "\nnext\"]"]);
}

/// Found while fixing the above: an invalid escape or surrogate after a fragment boundary left
/// the view at a different cut than a fresh parse of the same text (the state reached before the
/// error was not kept).
#[test]
fn errors_inside_strings_give_the_same_view_at_any_fragmentation() {
    for pieces in [
        &["{\"a\": \"ab", "c\\x\"}"][..],
        &["{\"a\": \"ab", "c\\u12G4\"}"][..],
        &["{\"a\": \"ab", "c\\udc00\"}"][..],
        &["{\"a\": \"ab", "c\\ud800x\"}"][..],
        &["{\"a\": \"ab", "c\\ud800\\n\"}"][..],
        &["[\"ab", "c", "\u{7}\"]"][..],
    ] {
        let p = check_incremental(pieces);
        assert!(p.is_invalid(), "{pieces:?}");
    }
}
