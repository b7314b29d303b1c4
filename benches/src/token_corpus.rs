//! The mixed token-estimation corpus: the committed held-out sample (`tests/tokens/sample`:
//! prose, code, JSON, logs, base64, hex, UUIDs, CJK, Cyrillic, European languages, agent
//! transcripts and sessions), concatenated in file-name order and repeated up to a size.

use std::path::PathBuf;

/// Directory of the committed sample.
pub fn sample_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/tokens/sample")
}

/// The sample documents concatenated (separated by blank lines), repeated until at least
/// `target_bytes` long. Empty if the sample is missing.
pub fn mixed_corpus(target_bytes: usize) -> String {
    let mut files: Vec<PathBuf> = std::fs::read_dir(sample_dir())
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| p.file_name().is_some_and(|n| n != "expected.json"));
    files.sort();
    let mut one = String::new();
    for path in files {
        if let Ok(text) = std::fs::read_to_string(path) {
            one.push_str(&text);
            one.push_str("\n\n");
        }
    }
    if one.is_empty() {
        return one;
    }
    let mut out = String::with_capacity(target_bytes + one.len());
    while out.len() < target_bytes {
        out.push_str(&one);
    }
    out
}
