//! The request estimates every language must agree on: each request body in
//! `tests/tokens/requests/*.json`, estimated for each tokenizer family, must give the parts
//! written in `tests/tokens/requests/expected.tsv`. The Python, Node and C suites and the CLI
//! check the same table, so a rule that a binding bends (a number it reads differently, a block
//! it drops) shows up as a different number there.
//!
//! The table is the core's output, not a measurement: after a deliberate change to the
//! estimator (its coefficients or block rules), regenerate it with
//! `FERROLOOP_BLESS=1 cargo test -p ferroloop --test tokens_requests` and review the diff.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::path::PathBuf;

use ferroloop::tokens::{FAMILIES, estimate_request_body};
use serde_json::Value;

fn requests_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/tokens/requests")
}

/// The table as the core computes it now: a header line, then one line per body and family.
fn table() -> String {
    let mut names: Vec<String> = std::fs::read_dir(requests_dir())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".json"))
        .collect();
    names.sort();
    assert!(names.len() >= 5, "fixtures missing: {names:?}");
    let mut table = String::from("file\ttokenizer\tsystem\ttools\tmessages\toverhead\ttotal\n");
    for name in &names {
        let text = std::fs::read_to_string(requests_dir().join(name)).unwrap();
        let body: Value = serde_json::from_str(&text).unwrap();
        for family in FAMILIES {
            let e = estimate_request_body(&body, family);
            writeln!(
                table,
                "{name}\t{family}\t{}\t{}\t{}\t{}\t{}",
                e.system,
                e.tools,
                e.messages,
                e.overhead,
                e.total()
            )
            .unwrap();
        }
    }
    table
}

#[test]
fn request_estimates_match_the_shared_table() {
    let path = requests_dir().join("expected.tsv");
    let now = table();
    if std::env::var_os("FERROLOOP_BLESS").is_some() {
        std::fs::write(&path, &now).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    for (line, (want, got)) in committed.lines().zip(now.lines()).enumerate() {
        assert_eq!(
            got,
            want,
            "expected.tsv line {}: regenerate with FERROLOOP_BLESS=1 after a deliberate change",
            line + 1
        );
    }
    assert_eq!(committed.lines().count(), now.lines().count());
}
