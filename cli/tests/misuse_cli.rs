//! `ferroloop sse`, `decode` and `tokens` given what a careless user gives them: zero-sized
//! options, directories, binary and empty files, non-UTF-8 streams, hostile JSON. DESIGN.md's
//! contract must hold, and every failure is a clear message and a non-zero exit, never a panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

mod common;
use common::{bin, run_stdin};

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/anthropic/tool_use_response.sse")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The program ended on its own terms: no panic message, whatever the exit code.
fn assert_no_panic(output: &Output) {
    let err = stderr(output);
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        output.status.code().is_some(),
        "killed by a signal: {output:?}"
    );
}

fn run(args: &[&str], files: &[&Path]) -> Output {
    let output = bin().args(args).args(files).output().unwrap();
    assert_no_panic(&output);
    output
}

/// Runs with `input` on stdin; a panic fails the test whatever the exit.
fn run_stdin_no_panic(args: &[&str], input: &[u8]) -> Output {
    let output = run_stdin(args, input);
    assert_no_panic(&output);
    output
}

fn json_lines(output: &Output) -> Vec<Value> {
    String::from_utf8(output.stdout.clone())
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn zero_chunk_and_zero_event_limit_are_usage_errors() {
    let fixture = fixture();
    for args in [
        &["sse", "--chunk", "0"][..],
        &["sse", "--max-event-bytes", "0"],
        &["decode", "--provider", "anthropic", "--chunk", "0"],
        &[
            "decode",
            "--provider",
            "anthropic",
            "--chunk",
            "99999999999999999999999",
        ],
    ] {
        let output = run(args, &[&fixture]);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {output:?}");
        assert!(
            stderr(&output).contains("invalid value"),
            "{args:?}: {output:?}"
        );
        assert!(output.stdout.is_empty());
    }
}

/// `--exact` with a family that has no offline vocabulary is a usage error like the others
/// (exit 2, clap's usage line): it exited 1, the code of a file that could not be read, so a
/// script could not tell a wrong invocation from a failed count.
#[test]
fn exact_with_a_family_without_a_vocabulary_is_a_usage_error() {
    let fixture = fixture();
    for tokenizer in ["claude", "claude-legacy"] {
        let args = ["tokens", "--exact", "--tokenizer", tokenizer];
        let output = run(&args, &[&fixture]);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {output:?}");
        let err = stderr(&output);
        assert!(
            err.contains("--exact is available for o200k and cl100k only"),
            "{err}"
        );
        assert!(err.contains("Usage:"), "{err}");
        assert!(output.stdout.is_empty());
    }
}

#[test]
fn a_directory_as_input_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["sse"][..],
        &["decode", "--provider", "openai-chat"],
        &["tokens"],
    ] {
        let output = run(args, &[dir.path()]);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {output:?}");
        assert!(
            stderr(&output).contains("directory"),
            "{args:?}: {output:?}"
        );
        assert!(output.stdout.is_empty());
    }
}

#[test]
fn invalid_utf8_in_a_stream_becomes_replacement_characters() {
    let output = run_stdin_no_panic(
        &["sse", "--chunk", "1"],
        b"event: \xff\xfe\nid: \xc3\ndata: a\xc3\n\n",
    );
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        json_lines(&output),
        [serde_json::json!({"event": "\u{fffd}\u{fffd}", "data": "a\u{fffd}", "id": "\u{fffd}"})]
    );
}

#[test]
fn decode_of_a_binary_stream_fails_cleanly() {
    let mut input = b"data: ".to_vec();
    input.extend((0u8..=255).cycle().take(4096));
    input.extend_from_slice(b"\n\n");
    let output = run_stdin_no_panic(&["decode", "--provider", "anthropic"], &input);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(stderr(&output).starts_with("ferroloop"), "{output:?}");
}

#[test]
fn tokens_of_odd_files_are_one_line_each() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    };
    let binary: Vec<u8> = (0u8..=255).cycle().take(3000).collect();
    let files = [
        write("binary.bin", &binary),
        write("empty.txt", b""),
        write("empty.json", b""),
        write("array.json", b"[1, 2, 3]"),
        write("not-utf8.json", b"\xff\xfe{}"),
        write("deep.json", &vec![b'['; 100_000]),
        write("deep-request.json", &{
            let mut body = b"{\"messages\": ".to_vec();
            body.extend(vec![b'['; 100_000]);
            body
        }),
        // One 8 MB line: no line-oriented buffering may choke on it.
        write("one-line.txt", &vec![b'a'; 8 << 20]),
    ];
    let refs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let output = run(&["tokens"], &refs);
    assert!(output.status.success(), "{output:?}");
    let lines = json_lines(&output);
    assert_eq!(lines.len(), files.len(), "{lines:?}");
    for (line, file) in lines.iter().zip(&files) {
        assert_eq!(line["file"], file.to_str().unwrap());
        assert_eq!(line["method"], "estimate");
        assert_eq!(line["tokenizer"], "claude");
        assert!(line["tokens"].is_u64(), "{line}");
    }
    // Empty files cost nothing; everything else costs something.
    assert_eq!(lines[1]["tokens"], 0);
    assert_eq!(lines[2]["tokens"], 0);
    for index in [0, 3, 4, 5, 6, 7] {
        assert!(
            lines[index]["tokens"].as_u64().unwrap() > 0,
            "{}",
            lines[index]
        );
    }
}

/// A file `tokens` cannot read is reported on stderr whatever `RUST_LOG` says: it used to be a
/// log record only, so `RUST_LOG=off` left an exit code of 1 and no word about why.
#[test]
fn an_unreadable_file_is_reported_even_with_logging_off() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.txt");
    let output = bin()
        .env("RUST_LOG", "off")
        .arg("tokens")
        .arg(&missing)
        .output()
        .unwrap();
    assert_no_panic(&output);
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(err.starts_with("ferroloop: "), "{err}");
    assert!(err.contains(missing.to_str().unwrap()), "{err}");
    assert!(err.contains("No such file"), "{err}");
}

/// An error that prints its cause itself is not followed by that cause again: `run --dir FILE`
/// said "... is unusable: not a directory: not a directory".
#[test]
fn an_error_names_its_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.txt");
    std::fs::write(&file, "not a directory").unwrap();
    let output = bin()
        .args(["run", "--replay", "--json", "--dir"])
        .arg(&file)
        .arg("hi")
        .output()
        .unwrap();
    assert_no_panic(&output);
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert_eq!(err.matches("not a directory").count(), 1, "{err}");
    assert!(err.starts_with("ferroloop: cannot use "), "{err}");
}

/// `--chunk N` with N larger than the input (up to `u64::MAX`) feeds the whole input as one
/// chunk. The reader allocated N bytes up front: `u64::MAX` panicked with "capacity overflow",
/// and a terabyte was zero-filled until the kernel killed the process.
#[test]
fn a_chunk_size_larger_than_the_input_is_one_chunk() {
    let max = u64::MAX.to_string();
    let out = run_stdin_no_panic(&["sse", "--chunk", &max], b"data: a\n\ndata: b\n\n");
    assert!(out.status.success(), "{}", stderr(&out));
    let events = json_lines(&out);
    assert_eq!(events.len(), 2);
    assert_eq!(events[1]["data"], "b");
    let stream = std::fs::read(fixture()).unwrap();
    let out = run_stdin_no_panic(
        &["decode", "--provider", "anthropic", "--chunk", &max],
        &stream,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(json_lines(&out)[0]["stop_reason"], "tool_use");
}

/// A file `tokens` cannot read is named once: the message said
/// "ferroloop: PATH: reading PATH: No such file or directory".
#[test]
fn an_unreadable_file_is_named_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.txt");
    let output = run(&["tokens"], &[&missing]);
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert_eq!(err.matches(missing.to_str().unwrap()).count(), 1, "{err}");
    assert!(err.starts_with("ferroloop: cannot read "), "{err}");
}

/// Stdin that cannot be read (opened for writing only: every read fails with EBADF) is an
/// error that says so, exit 1. Rust's `io::stdin()` reads EBADF as end of input, so `sse`
/// printed nothing and exited 0, `decode` blamed a truncated stream and `tokens -` counted
/// 0 tokens.
#[cfg(unix)]
#[test]
fn an_unreadable_stdin_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let sink = dir.path().join("write-only");
    for args in [
        &["sse"][..],
        &["sse", "-"],
        &["decode", "--provider", "anthropic"],
        &["tokens", "-"],
    ] {
        let write_only = std::fs::File::create(&sink).unwrap();
        let output = bin()
            .args(args)
            .stdin(std::process::Stdio::from(write_only))
            .output()
            .unwrap();
        assert_no_panic(&output);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {err}");
        assert!(output.stdout.is_empty(), "{args:?}: {output:?}");
        assert!(
            err.starts_with("ferroloop: cannot read stdin"),
            "{args:?}: {err}"
        );
        assert!(err.contains("Bad file descriptor"), "{args:?}: {err}");
    }
}

/// A stderr that cannot be written (`2>&1 | head` after the reader left, a full disk) leaves the
/// exit status the run had: 1 for an error it could not report, never a panic's 101. Every
/// message went through `eprintln!`, which panics when the write fails.
#[test]
fn an_unwritable_stderr_does_not_turn_an_exit_into_a_panic() {
    let full = || std::fs::OpenOptions::new().write(true).open("/dev/full");
    if full().is_err() {
        return; // No /dev/full on this system.
    }
    let missing = "/nonexistent/ferroloop-input";
    let cases: [&[&str]; 4] = [
        &["decode", "--provider", "anthropic", "/dev/null"],
        &["sse", missing],
        &["tokens", missing],
        &["decode", "--provider", "openai", missing],
    ];
    for args in cases {
        let output = bin()
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(full().unwrap())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1), "{args:?}");
    }
}
