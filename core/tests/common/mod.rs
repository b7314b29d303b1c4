//! Helpers shared by the integration tests: the repository's shared test data.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use bytes::Bytes;
use ferroloop::sse::{SseItem, SseParser};
use serde_json::{Value, json};

/// The repository's `tests/` folder (shared by the Rust, Python, Node and C suites).
pub fn shared_tests_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("tests")
}

/// Reads a file under `tests/`.
pub fn read_shared(path: &str) -> Vec<u8> {
    let full = shared_tests_dir().join(path);
    std::fs::read(&full).unwrap_or_else(|e| panic!("cannot read {}: {e}", full.display()))
}

/// An item as the CLI contract prints it.
pub fn item_json(item: &SseItem<'_>) -> Value {
    match item {
        SseItem::Event(e) => json!({"event": e.event_type(), "data": e.data(), "id": e.id()}),
        SseItem::Retry(ms) => json!({ "retry": ms }),
    }
}

/// Parses `input` fed in the given chunk sizes (cycled), returning the items as JSON.
pub fn parse_chunked(input: &[u8], sizes: &[usize]) -> Vec<Value> {
    let mut parser = SseParser::new();
    let mut out = Vec::new();
    let mut pos = 0;
    let mut turn = 0;
    while pos < input.len() {
        let size = sizes[turn % sizes.len()].max(1);
        turn += 1;
        let end = (pos + size).min(input.len());
        parser.feed(Bytes::copy_from_slice(&input[pos..end]));
        while let Some(item) = parser.next_item() {
            out.push(item_json(&item));
        }
        pos = end;
    }
    parser.finish();
    out
}
