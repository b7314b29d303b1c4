//! `ferroloop sse` as a program: the CLI contract of DESIGN.md.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

mod common;
use common::{bin, run_stdin, shared};

#[test]
fn fixtures_print_their_expected_lines_at_every_chunk_size() {
    for name in [
        "basic_response",
        "tool_use_response",
        "incomplete_partial_json_response",
    ] {
        let input = shared(&format!("fixtures/anthropic/{name}.sse"));
        let expected =
            std::fs::read_to_string(shared(&format!("sse/expected/anthropic-{name}.jsonl")))
                .unwrap();
        for chunk in [None, Some("1"), Some("5"), Some("1460")] {
            let mut cmd = bin();
            cmd.arg("sse").arg(&input);
            if let Some(n) = chunk {
                cmd.args(["--chunk", n]);
            }
            let out = cmd.output().unwrap();
            assert!(out.status.success());
            assert_eq!(
                String::from_utf8(out.stdout).unwrap(),
                expected,
                "{name} chunk {chunk:?}"
            );
        }
    }
}

#[test]
fn reads_stdin_and_prints_retry_and_ids() {
    let out = run_stdin(
        &["sse"],
        b"retry: 300\nid: 7\nevent: e\ndata: a\"b\n\ndata: tail",
    );
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "{\"retry\":300}\n{\"event\":\"e\",\"data\":\"a\\\"b\",\"id\":\"7\"}\n"
    );
}

#[test]
fn an_event_is_printed_while_the_pipe_is_still_open() {
    let mut child = bin()
        .arg("sse")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // A CR ends the line at once; the second CR is the blank line. Nothing more is sent.
    stdin.write_all(b"data: a\r\r").unwrap();
    stdin.flush().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        tx.send(line).unwrap();
    });
    let line = rx.recv_timeout(Duration::from_secs(20));
    drop(stdin);
    let _ = child.wait();
    assert_eq!(
        line.unwrap(),
        "{\"event\":\"message\",\"data\":\"a\",\"id\":\"\"}\n"
    );
}

#[test]
fn oversized_events_are_dropped_and_reported() {
    let mut child = bin()
        .args(["sse", "--max-event-bytes", "32"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = b"data: ok\n\ndata: ".to_vec();
    input.extend(vec![b'x'; 10_000]);
    input.extend_from_slice(b"\n\ndata: next\n\n");
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 2);
    assert!(stdout.contains("\"ok\"") && stdout.contains("\"next\""));
    assert!(
        String::from_utf8(out.stderr)
            .unwrap()
            .contains("dropped 1 event")
    );
}

#[test]
fn a_missing_file_is_a_clear_error() {
    let out = bin()
        .args(["sse", "/nonexistent/stream.sse"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8(out.stderr)
            .unwrap()
            .contains("cannot open /nonexistent/stream.sse")
    );
}

/// Dropped events are reported once per input chunk by `ferroloop sse`, not once more per
/// event by the parser's log: 100,000 oversized events wrote 100,000 warning lines on stderr.
#[test]
fn dropped_events_do_not_flood_stderr() {
    let mut child = bin()
        .env_remove("RUST_LOG")
        .args(["sse", "--max-event-bytes", "5"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let input = b"data: xxxxxxxxxxxxxxxxxxxx\n\n".repeat(1000);
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    // One report per input chunk (the pipe may split the input).
    let reported: u64 = stderr
        .lines()
        .map(|line| {
            line.strip_prefix("ferroloop sse: dropped ")
                .and_then(|rest| rest.split_once(' '))
                .and_then(|(n, _)| n.parse::<u64>().ok())
                .unwrap_or_else(|| panic!("unexpected stderr line: {line}"))
        })
        .sum();
    assert_eq!(reported, 1000, "{stderr}");
}

/// A comment line belongs to no event: a 300-byte one before (or inside) a 7-byte event under
/// `--max-event-bytes 100` dropped that event ("dropped 1 event(s) larger than 100 bytes").
#[test]
fn a_long_comment_does_not_drop_the_event_after_it() {
    let comment = format!(": {}", "c".repeat(300));
    for (input, data) in [
        (format!("{comment}\ndata: y\n\n"), "y"),
        (format!("data: x\n{comment}\ndata: y\n\n"), "x\\ny"),
    ] {
        for chunk in [None, Some("1"), Some("64")] {
            let mut args = vec!["sse", "--max-event-bytes", "100"];
            if let Some(n) = chunk {
                args.extend(["--chunk", n]);
            }
            let out = run_stdin(&args, input.as_bytes());
            assert!(out.status.success(), "chunk {chunk:?}");
            assert_eq!(
                String::from_utf8(out.stdout).unwrap(),
                format!("{{\"event\":\"message\",\"data\":\"{data}\",\"id\":\"\"}}\n"),
                "chunk {chunk:?}"
            );
            assert_eq!(
                String::from_utf8(out.stderr).unwrap(),
                "",
                "chunk {chunk:?}"
            );
        }
    }
}
