//! `ferroloop run` against the embedded replay model: the real client, decoder, loop and
//! built-in tools over loopback HTTP, on a temporary directory.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use serde_json::Value;

fn run_in(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ferroloop"))
        .arg("run")
        .args(args)
        .current_dir(dir)
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("ANTHROPIC_BASE_URL")
        .output()
        .unwrap()
}

fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("README.md"),
        "# Tiny project\n\nTODO: more\n",
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(
        dir.path().join("src/lib.rs"),
        "pub fn answer() -> u32 { 42 } // FIXME\n",
    )
    .unwrap();
    dir
}

#[test]
fn the_terminal_view_says_the_model_is_scripted_and_summarises() {
    let dir = project();
    let out = run_in(dir.path(), &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let first = text.lines().next().unwrap();
    assert!(
        first.contains("replay model") && first.contains("scripted"),
        "{first}"
    );
    assert!(
        text.contains("✓ glob") && text.contains("✓ read") && text.contains("✓ grep"),
        "{text}"
    );
    assert!(
        text.contains("The file I read starts with: \"# Tiny project\""),
        "{text}"
    );
    assert!(text.contains("TODO/FIXME search: 2 in 2 file(s)"), "{text}");
    let summary = text.lines().last().unwrap();
    assert!(
        summary.contains("end_turn · 3 turns · 5 tool calls"),
        "{summary}"
    );
}

#[test]
fn json_mode_prints_the_event_stream() {
    let dir = project();
    let out = run_in(dir.path(), &["--json", "what is here?"]);
    assert!(out.status.success());
    let events: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events[0]["type"], "turn_start");
    let stop = events.last().unwrap();
    assert_eq!(stop["type"], "stop");
    assert_eq!(stop["reason"], "end_turn");
    assert_eq!(stop["tool_calls"], 5);
    let started = events
        .iter()
        .filter(|e| e["type"] == "tool_started")
        .count();
    let finished = events
        .iter()
        .filter(|e| e["type"] == "tool_finished" && e["is_error"] == false)
        .count();
    assert_eq!((started, finished), (5, 5));
    assert_eq!(stop["messages"][0]["content"], "what is here?");
}

#[test]
fn openai_provider_is_refused_clearly() {
    let dir = project();
    let out = run_in(dir.path(), &["--provider", "openai"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Anthropic Messages API"));
}
