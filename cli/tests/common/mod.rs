//! Helpers shared by the CLI's integration tests.
// Each test crate uses its own subset of these.
#![allow(dead_code)]

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// The `ferroloop` binary under test.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ferroloop"))
}

/// A path in the repository's shared `tests/` directory.
pub fn shared(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests")
        .join(path)
}

/// Runs `ferroloop ARGS` with `input` on stdin and collects stdout and stderr.
pub fn run_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = bin()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}
