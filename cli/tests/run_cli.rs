//! `ferroloop run` against the embedded replay model: the real client, decoder, loop and
//! built-in tools over loopback HTTP, on a temporary directory.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

use serde_json::Value;

mod common;

/// `ferroloop run ARGS` in `dir`, without credentials: the replay model answers.
fn replay_run(dir: &std::path::Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ferroloop"));
    command
        .arg("run")
        .args(args)
        .current_dir(dir)
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("ANTHROPIC_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL");
    command
}

fn run_in(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    replay_run(dir, args).output().unwrap()
}

/// A loopback server for `ferroloop run --base-url`: the first `failures` requests get
/// `failure()`, the others the explore-directory conversation, encoded by `encode` (Anthropic
/// or Chat Completions SSE) and sent in small chunks. The runtime serves it until dropped.
fn explore_directory_server(
    dir: &std::path::Path,
    failures: usize,
    failure: fn() -> ferroloop_replay::ScriptedResponse,
    encode: fn(&Value, usize) -> String,
) -> (tokio::runtime::Runtime, ferroloop_replay::ReplayServer) {
    use ferroloop::agent::replay::explore_directory_script;
    use ferroloop_replay::{ReplayServer, Script, ScriptBody, ScriptedResponse, ServerOptions};

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let responder: ferroloop_replay::Responder = std::sync::Arc::new(move |request| {
        if request.index < failures {
            return Some(failure());
        }
        let body: Value = serde_json::from_str(&request.body).ok()?;
        Some(
            ScriptedResponse::ok(ScriptBody::Text(encode(
                &explore_directory_script(&body),
                12,
            )))
            .header("content-type", "text/event-stream")
            .chunked(64, 0),
        )
    });
    let options = ServerOptions {
        responder: Some(responder),
        ..ServerOptions::default()
    };
    let server = runtime
        .block_on(ReplayServer::start(&Script::default(), dir, options))
        .unwrap();
    (runtime, server)
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
fn openai_provider_without_a_key_runs_the_replay_model_as_chat_completions() {
    let dir = project();
    let out = run_in(dir.path(), &["--provider", "openai"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let first = text.lines().next().unwrap();
    assert!(
        first.contains("replay model (no OPENAI_API_KEY set)"),
        "{first}"
    );
    assert!(text.contains("TODO/FIXME search: 2 in 2 file(s)"), "{text}");
    let summary = text.lines().last().unwrap();
    assert!(
        summary.contains("end_turn · 3 turns · 5 tool calls"),
        "{summary}"
    );
}

/// `--provider openai-responses --base-url` against a loopback Responses server (after one
/// 429): the explore-directory conversation runs to its end with the real tools, every request
/// to `/v1/responses` with the whole history as items and nothing stored server-side.
#[test]
fn openai_responses_provider_against_a_base_url() {
    use ferroloop::agent::replay::openai_responses_sse;
    use ferroloop_replay::{ScriptBody, ScriptedResponse};

    let dir = project();
    let limited = || {
        let error =
            serde_json::json!({"error": {"type": "rate_limit_exceeded", "message": "slow down"}});
        ScriptedResponse::with_status(429, ScriptBody::Json(error)).header("retry-after-ms", "5")
    };
    let (_runtime, server) = explore_directory_server(dir.path(), 1, limited, openai_responses_sse);
    let base_url = format!("{}/v1", server.base_url());
    let out = Command::new(env!("CARGO_BIN_EXE_ferroloop"))
        .args([
            "run",
            "--provider",
            "openai-responses",
            "--base-url",
            &base_url,
        ])
        .current_dir(dir.path())
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env("OPENAI_API_KEY", "sk-test")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.lines().next().unwrap().contains("model gpt-5 at"),
        "{text}"
    );
    assert!(
        text.contains("The file I read starts with: \"# Tiny project\""),
        "{text}"
    );
    let summary = text.lines().last().unwrap();
    assert!(
        summary.contains("end_turn · 3 turns · 5 tool calls"),
        "{summary}"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    assert!(requests.iter().all(|r| r.path == "/v1/responses"));
    let last: Value = serde_json::from_str(&requests[3].body).unwrap();
    assert_eq!(last["store"], false);
    let outputs = last["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "function_call_output")
        .count();
    assert_eq!(outputs, 5);
}

/// `--provider openai --base-url` against a loopback Chat Completions server that answers the
/// first three requests with 529: the run falls back to `--fallback-model` and finishes the
/// explore-directory conversation with the real tools.
#[test]
fn openai_provider_against_a_base_url_with_a_fallback_model() {
    use ferroloop::agent::replay::openai_chat_sse;
    use ferroloop_replay::{ScriptBody, ScriptedResponse};

    let dir = project();
    let overloaded = || {
        let error =
            serde_json::json!({"error": {"type": "overloaded_error", "message": "Overloaded"}});
        ScriptedResponse::with_status(529, ScriptBody::Json(error))
    };
    let (_runtime, server) = explore_directory_server(dir.path(), 3, overloaded, openai_chat_sse);
    let base_url = format!("{}/v1", server.base_url());
    let out = Command::new(env!("CARGO_BIN_EXE_ferroloop"))
        .args(["run", "--provider", "openai", "--base-url", &base_url])
        .args(["--model", "gpt-big", "--fallback-model", "gpt-small"])
        .current_dir(dir.path())
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env("OPENAI_API_KEY", "sk-test")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let first = text.lines().next().unwrap();
    assert!(
        first.contains(&format!("model gpt-big at {base_url}")),
        "{first}"
    );
    assert!(
        text.contains("⇄ model gpt-big is overloaded (repeated_529")
            && text.contains("switching to gpt-small for the rest of the run"),
        "{text}"
    );
    assert!(
        text.contains("The file I read starts with: \"# Tiny project\""),
        "{text}"
    );
    let summary = text.lines().last().unwrap();
    assert!(
        summary.contains("end_turn · 3 turns · 5 tool calls"),
        "{summary}"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 6);
    assert!(requests.iter().all(|r| r.path == "/v1/chat/completions"));
    assert_eq!(requests[0].header("authorization"), Some("Bearer sk-test"));
    let models: Vec<String> = requests
        .iter()
        .map(|r| {
            serde_json::from_str::<Value>(&r.body).unwrap()["model"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        models,
        [
            "gpt-big",
            "gpt-big",
            "gpt-big",
            "gpt-small",
            "gpt-small",
            "gpt-small"
        ]
    );
    let last: Value = serde_json::from_str(&requests[5].body).unwrap();
    assert_eq!(last["messages"][0]["role"], "system");
    assert!(
        last["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["role"] == "tool")
    );
}

/// The final answer of the replay model counted the tools' "No files found" and "No matches
/// found" answers as one file each, and in an empty directory said it had read a file whose
/// first line was "No files found".
#[test]
fn the_replay_answer_counts_nothing_in_an_empty_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_in(dir.path(), &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("0 entries at the top level, 0 Markdown documents in the tree"),
        "{text}"
    );
    assert!(!text.contains("No files found\""), "{text}");
    assert!(!text.contains("The file I read"), "{text}");
}

/// A directory whose only file has a space in its name is not empty: the replay model reads
/// that file, and counts no Markdown document or defining file where the tools found none.
#[test]
fn the_replay_model_reads_a_file_with_a_space_in_its_name() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("my notes.txt"), "first line\n").unwrap();
    let out = run_in(dir.path(), &[]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("The file I read starts with: \"first line\""),
        "{text}"
    );
    assert!(
        text.contains("1 entries at the top level, 0 Markdown documents in the tree"),
        "{text}"
    );
    assert!(
        text.contains("- 0 files define functions or classes."),
        "{text}"
    );
}

/// A server that refuses every request with 401 (not retried): a run that ends in an error.
fn refusing_server(
    dir: &std::path::Path,
) -> (tokio::runtime::Runtime, ferroloop_replay::ReplayServer) {
    use ferroloop::agent::replay::anthropic_sse;
    use ferroloop_replay::{ScriptBody, ScriptedResponse};
    let refused = || {
        let error = serde_json::json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}});
        ScriptedResponse::with_status(401, ScriptBody::Json(error))
            .header("request-id", "req_refused")
    };
    explore_directory_server(dir, usize::MAX, refused, anthropic_sse)
}

/// `ferroloop run ARGS` against `base_url` with a key.
fn run_against(dir: &std::path::Path, base_url: &str, args: &[&str]) -> std::process::Output {
    replay_run(dir, args)
        .args(["--base-url", base_url])
        .env("ANTHROPIC_API_KEY", "sk-test")
        .output()
        .unwrap()
}

/// A run that ends with an error exits 1 and says why on stderr (stdout is the transcript);
/// a key the server refuses is such an error.
#[test]
fn a_run_ending_in_an_error_says_why_on_stderr() {
    let dir = project();
    let (_runtime, server) = refusing_server(dir.path());
    for args in [&["hi"][..], &["--json", "hi"][..]] {
        let out = run_against(dir.path(), &server.base_url(), args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.starts_with("ferroloop run: stopped (error): ")
                && stderr.contains("invalid x-api-key"),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// With `--json` the `stop` event of a failed run names the failure with a stable
/// `error_code` (a refused key: `authentication`) and says what the client knew of the failed
/// call (`status`, `request_id`, `retry_after`); a run that ends well has none (`null`).
#[test]
fn a_json_stop_event_carries_the_error_code() {
    let dir = project();
    let (_runtime, server) = refusing_server(dir.path());
    let last_event = |out: std::process::Output| {
        let stdout = String::from_utf8(out.stdout).unwrap();
        let line = stdout.lines().last().unwrap_or_default().to_owned();
        serde_json::from_str::<Value>(&line).unwrap()
    };
    let failed = last_event(run_against(
        dir.path(),
        &server.base_url(),
        &["--json", "hi"],
    ));
    assert_eq!(failed["type"], "stop", "{failed}");
    assert_eq!(failed["error_code"], "authentication", "{failed}");
    assert_eq!(failed["status"], 401, "{failed}");
    assert_eq!(failed["request_id"], "req_refused", "{failed}");
    assert!(failed["retry_after"].is_null(), "{failed}");
    let done = last_event(run_in(dir.path(), &["--json", "what is here?"]));
    assert_eq!(done["reason"], "end_turn", "{done}");
    for key in ["error_code", "status", "request_id", "retry_after"] {
        assert!(done.get(key).is_some_and(Value::is_null), "{key}: {done}");
    }
}

/// Bad arguments are usage errors (exit 2, the usage line, nothing on stdout, no run), like
/// clap's own: an empty or blank prompt, `--model` or `--fallback-model`, a `--base-url` the
/// client cannot use, `--replay` with `--base-url` (which one answers?). Before, the first
/// ones started a run that ended at once with an error (exit 1, after the banner), a bad
/// `--base-url` exited 1, and `--replay` silently ignored `--base-url`.
#[test]
fn bad_run_arguments_are_usage_errors() {
    let dir = project();
    let cases: [(&[&str], &str); 8] = [
        (&[""], "the prompt is empty"),
        (&["--json", " \n\t"], "the prompt is empty"),
        (&["--model", "", "hi"], "--model is empty"),
        (
            &["--fallback-model", " ", "hi"],
            "--fallback-model is empty",
        ),
        (&["--base-url", "", "hi"], "--base-url"),
        (&["--base-url", "localhost:8080", "hi"], "--base-url"),
        (
            &["--replay", "--base-url", "http://127.0.0.1:9"],
            "cannot be used with",
        ),
        (&["-"], "the prompt is empty"),
    ];
    for (args, says) in cases {
        let out = replay_run(dir.path(), args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(
            stderr.contains("Usage: ferroloop run"),
            "{args:?}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

/// `ferroloop run` with the replay model in `dir` and `input` written to its stdin, which is
/// then closed.
fn run_with_stdin(dir: &std::path::Path, args: &[&str], input: &[u8]) -> Output {
    use std::io::Write as _;
    let mut child = replay_run(dir, args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// `ferroloop run -` reads the prompt from stdin (before, `-` was sent as the prompt).
#[test]
fn a_dash_reads_the_prompt_from_stdin() {
    let dir = project();
    let out = run_with_stdin(
        dir.path(),
        &["--json", "-"],
        "what is in this\nproject? ✓\n".as_bytes(),
    );
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stop: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(stop["reason"], "end_turn", "{stop}");
    assert_eq!(
        stop["messages"][0]["content"], "what is in this\nproject? ✓\n",
        "{stop}"
    );
}

/// A prompt on stdin that cannot be read or is not UTF-8 is bad input (exit 1, no usage line), as
/// for every subcommand: an unreadable stdin was read as an empty prompt (a usage error), and a
/// byte order mark opening it was sent as part of the prompt, where `sse`, `decode` and
/// `tokens` drop it.
#[test]
fn a_stdin_prompt_is_read_as_the_other_subcommands_read_their_input() {
    let dir = project();
    let out = run_with_stdin(
        dir.path(),
        &["--json", "-"],
        "\u{feff}what is here?".as_bytes(),
    );
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stop: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(stop["messages"][0]["content"], "what is here?", "{stop}");

    let out = run_with_stdin(dir.path(), &["-"], b"\xff hi");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("ferroloop run: the prompt read from stdin is not UTF-8"),
        "{stderr}"
    );
    assert!(!stderr.contains("Usage:"), "{stderr}");
    assert!(out.stdout.is_empty());

    // A stdin opened for writing only cannot be read (EBADF).
    let write_only = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(dir.path().join("write-only"))
        .unwrap();
    let out = replay_run(dir.path(), &["-"])
        .stdin(write_only)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("ferroloop run: cannot read the prompt from stdin"),
        "{stderr}"
    );
}

/// `--max-turns 0` is a limit of no model call, as Python's `max_turns=0` and Node's
/// `maxTurns: 0`: the run stops at once with `max_turns` (exit 0) and sends nothing.
#[test]
fn max_turns_zero_makes_no_model_call() {
    let dir = project();
    let (_runtime, server) = refusing_server(dir.path());
    let out = run_against(
        dir.path(),
        &server.base_url(),
        &["--json", "--max-turns", "0", "hi"],
    );
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stop: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(stop["reason"], "max_turns", "{stop}");
    assert_eq!(stop["turns"], 0, "{stop}");
    assert!(server.requests().is_empty());
}

/// Sends SIGINT (`"INT"`) or SIGTERM (`"TERM"`) to `child`.
#[cfg(unix)]
fn send_signal(child: &std::process::Child, signal: &str) {
    let sent = Command::new("kill")
        .args([format!("-{signal}"), child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

/// Reads a `--json` run's first line, its `turn_start` (the run has begun).
#[cfg(unix)]
fn read_turn_start(stdout: &mut impl std::io::BufRead) {
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert!(first.contains("turn_start"), "{first}");
}

/// SIGINT (Ctrl-C) and SIGTERM stop the run cleanly: the running tools are cancelled, the
/// `stop` event (reason `aborted`) is still printed, and the exit status is 128 + the signal's
/// number, as a shell reports a command ended by it. Before, SIGINT exited 0, as if the run had
/// finished, and SIGTERM killed the process without the `stop` event.
#[cfg(unix)]
#[test]
fn a_signal_stops_the_run_cleanly_with_the_conventional_status() {
    use std::io::{BufReader, Read};
    use std::process::Stdio;

    for (signal, code) in [("INT", 130), ("TERM", 143)] {
        let dir = project();
        let mut child = replay_run(dir.path(), &["--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        read_turn_start(&mut stdout);
        send_signal(&child, signal);
        let mut rest = String::new();
        stdout.read_to_string(&mut rest).unwrap();
        let status = child.wait().unwrap();
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        assert_eq!(status.code(), Some(code), "SIG{signal}: {rest}\n{stderr}");
        let last: Value = serde_json::from_str(rest.lines().last().unwrap()).unwrap();
        assert_eq!(last["type"], "stop", "SIG{signal}");
        assert_eq!(last["reason"], "aborted", "SIG{signal}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// A signal still gives its status when the reader of stdout has gone first (Ctrl-C on
/// `ferroloop run --json | jq` ends jq too): writing the `stop` event then meets a closed pipe.
/// Before, that broken pipe made the exit a quiet 0.
#[cfg(unix)]
#[test]
fn a_signal_after_the_reader_went_away_still_gives_its_status() {
    use std::io::BufReader;
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    for (signal, code) in [("INT", 130), ("TERM", 143)] {
        let dir = project();
        // A server that never answers: the run waits for its first response and writes
        // nothing until the signal (a write into the closed pipe before it, such as a retry
        // event, would rightly end the run quietly, as `| head` does).
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base_url = format!("http://{}", silent.local_addr().unwrap());
        let mut child = replay_run(dir.path(), &["--json", "--base-url", &base_url])
            .env("ANTHROPIC_API_KEY", "sk-test")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        read_turn_start(&mut stdout);
        drop(stdout);
        send_signal(&child, signal);
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "SIG{signal}: the run did not end"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status.code(), Some(code), "SIG{signal}");
    }
}

/// Ctrl-C acts even while the run is stuck writing to a stdout nobody reads (a paused
/// terminal, a full pipe): the first signal cancels the run, the second ends the process with
/// the signal's status. Before, signals were only looked at between two writes, so a run
/// blocked in a write could not be interrupted at all.
#[cfg(unix)]
#[test]
fn signals_act_while_stdout_is_blocked() {
    use std::io::Write;
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    let dir = project();
    let (reader, mut writer) = std::io::pipe().unwrap();
    let child_stdout = writer.try_clone().unwrap();
    // Fill the pipe: the filler blocks once it is full, and so does the run's first write.
    let filler = std::thread::spawn(move || {
        let block = [b'.'; 4096];
        while writer.write_all(&block).is_ok() {}
    });
    std::thread::sleep(Duration::from_millis(300));
    let mut child = replay_run(dir.path(), &["--json"])
        .stdout(child_stdout)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Let the run start and block on its first event line.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the run should be blocked"
    );
    send_signal(&child, "INT");
    std::thread::sleep(Duration::from_millis(300));
    send_signal(&child, "INT");
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(reader);
    let _ = filler.join();
    let status = status.expect("the run ignored two SIGINTs while its stdout was blocked");
    assert_eq!(status.code(), Some(130));
}

/// The terminal view numbers retries from 1, as its summary counts them (it showed the
/// attempt about to be made: "retry 2" for the first retry, "retries 1" in the summary).
#[test]
fn the_terminal_view_numbers_retries_from_one() {
    use ferroloop::agent::replay::anthropic_sse;
    use ferroloop_replay::{ScriptBody, ScriptedResponse};

    let dir = project();
    let server_error = || {
        let error = serde_json::json!({"error": {"type": "api_error", "message": "boom"}});
        ScriptedResponse::with_status(500, ScriptBody::Json(error)).header("retry-after-ms", "10")
    };
    let (_runtime, server) = explore_directory_server(dir.path(), 1, server_error, anthropic_sse);
    let out = Command::new(env!("CARGO_BIN_EXE_ferroloop"))
        .args(["run", "--base-url", &server.base_url()])
        .current_dir(dir.path())
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{text}");
    assert!(text.contains("↻ retry 1 after HTTP 500"), "{text}");
    assert!(!text.contains("↻ retry 2"), "{text}");
    assert!(text.lines().last().unwrap().contains("retries 1"), "{text}");
}

/// A retry after an error that came without a status (here an `overloaded_error` as the first
/// event of a 200, which the client now retries) was shown as "after connection error", then
/// as "after a connection error, timeout or error event": the retry event now names the class
/// (`code`, `overloaded`), in the terminal view and in `--json`.
#[test]
fn the_terminal_view_does_not_call_every_retry_without_a_status_a_connection_error() {
    use ferroloop::agent::replay::anthropic_sse;
    use ferroloop_replay::{ScriptBody, ScriptedResponse};

    let dir = project();
    let overloaded_first = || {
        let error = serde_json::json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
        ScriptedResponse::ok(ScriptBody::Text(format!("event: error\ndata: {error}\n\n")))
            .header("content-type", "text/event-stream")
    };
    let (_runtime, server) =
        explore_directory_server(dir.path(), 1, overloaded_first, anthropic_sse);
    let out = Command::new(env!("CARGO_BIN_EXE_ferroloop"))
        .args(["run", "--base-url", &server.base_url()])
        .current_dir(dir.path())
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("↻ retry 1 after an overloaded error (no HTTP status)"),
        "{text}"
    );
    assert!(text.lines().last().unwrap().contains("retries 1"), "{text}");

    let (_runtime, server) =
        explore_directory_server(dir.path(), 1, overloaded_first, anthropic_sse);
    let out = Command::new(env!("CARGO_BIN_EXE_ferroloop"))
        .args(["run", "--json", "--base-url", &server.base_url()])
        .current_dir(dir.path())
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .output()
        .unwrap();
    assert!(out.status.success());
    let retries: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["type"] == "retry")
        .collect();
    assert_eq!(retries.len(), 1, "{retries:?}");
    assert_eq!(retries[0]["status"], Value::Null);
    assert_eq!(retries[0]["code"], "overloaded");
    assert_eq!(retries[0]["overloaded"], true);
}

/// With `--replay` and a key set, the banner said "replay model (no ANTHROPIC_API_KEY set)":
/// it now names the flag as the reason.
#[test]
fn the_banner_says_why_the_replay_model_answers() {
    let dir = project();
    let out = Command::new(env!("CARGO_BIN_EXE_ferroloop"))
        .args(["run", "--replay", "--max-turns", "1"])
        .current_dir(dir.path())
        .env("ANTHROPIC_API_KEY", "sk-ant-unused")
        .env_remove("ANTHROPIC_BASE_URL")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let first = text.lines().next().unwrap();
    assert!(first.contains("replay model (--replay)"), "{first}");
    assert!(!first.contains("no ANTHROPIC_API_KEY"), "{first}");
    let out = run_in(dir.path(), &["--max-turns", "1"]);
    let text = String::from_utf8(out.stdout).unwrap();
    let first = text.lines().next().unwrap();
    assert!(
        first.contains("replay model (no ANTHROPIC_API_KEY set)"),
        "{first}"
    );
}

/// `ferroloop run` (default prompt, terminal view) in `dir` against a replay server playing
/// `script`, with no credentials in the environment.
fn run_against_script(dir: &std::path::Path, script: &ferroloop_replay::Script) -> Output {
    run_against_script_with(dir, script, &[])
}

/// [`run_against_script`] with more `ferroloop run` arguments.
fn run_against_script_with(
    dir: &std::path::Path,
    script: &ferroloop_replay::Script,
    args: &[&str],
) -> Output {
    use ferroloop_replay::{ReplayServer, ServerOptions};

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = runtime
        .block_on(ReplayServer::start(script, dir, ServerOptions::default()))
        .unwrap();
    Command::new(env!("CARGO_BIN_EXE_ferroloop"))
        .args(["run", "--base-url", &server.base_url()])
        .args(args)
        .current_dir(dir)
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env("RUST_LOG", "off")
        .output()
        .unwrap()
}

/// A response that breaks off mid-stream is asked for again, and the text it had streamed is
/// discarded. The terminal view printed both attempts' text as one ("Hello thereHello there!")
/// with nothing to tell them apart; it now says the turn is asked again before the new text.
#[test]
fn the_terminal_view_marks_a_turn_asked_again_after_a_broken_stream() {
    use ferroloop_replay::Script;

    let dir = project();
    let fixture = common::shared("fixtures/anthropic/basic_response.sse");
    let fixture = fixture.to_str().unwrap();
    // Byte 690 is inside the third text delta: "Hello there" has streamed.
    let script = Script::from_json(&format!(
        r#"{{"responses": [
            {{"body": {{"fixture": {fixture:?}}}, "fault": {{"kind": "disconnect_after", "bytes": 690}}}},
            {{"body": {{"fixture": {fixture:?}}}}}
        ]}}"#
    ))
    .unwrap();
    let out = run_against_script(dir.path(), &script);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(
            "\n  ↻ the response broke off; asking again (the text above is discarded)\nHello there!"
        ),
        "{text}"
    );
}

/// A turn refused as too long mid-stream, after it had shown text, is asked again under its
/// number once the reactive compaction made the history smaller. The terminal view said "the
/// response broke off", which it had not: it now says the prompt was too long and the turn is
/// asked again after the compaction.
#[test]
fn the_terminal_view_says_a_turn_refused_as_too_long_is_asked_again_after_the_compaction() {
    use ferroloop_replay::Script;
    use serde_json::json;

    let event = |data: Value| json!({"event": data["type"], "data": data});
    let start = |id: &str| {
        event(json!({"type": "message_start", "message": {
            "id": id, "type": "message", "role": "assistant", "model": "m", "content": [],
            "stop_reason": null, "usage": {"input_tokens": 10, "output_tokens": 1}}}))
    };
    let text_block = |index: u32, text: &str| {
        [
            event(
                json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
            ),
            event(
                json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}}),
            ),
            event(json!({"type": "content_block_stop", "index": index})),
        ]
    };
    let end = |stop_reason: &str| {
        [
            event(
                json!({"type": "message_delta", "delta": {"stop_reason": stop_reason}, "usage": {"output_tokens": 5}}),
            ),
            event(json!({"type": "message_stop"})),
        ]
    };
    let answer = |id: &str, text: &str| {
        let mut events = vec![start(id)];
        events.extend(text_block(0, text));
        events.extend(end("end_turn"));
        json!({"body": {"events": events}})
    };
    // Turn 1: a long text (the history the compaction shrinks) and a call.
    let mut first = vec![start("msg_1")];
    first.extend(text_block(
        0,
        &"Looking around this directory first. ".repeat(100),
    ));
    first.extend([
        event(json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "glob", "input": {}}})),
        event(json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"pattern\": \"*\"}"}})),
        event(json!({"type": "content_block_stop", "index": 1})),
    ]);
    first.extend(end("tool_use"));
    // Turn 2: text shown, then the provider says the prompt is too long.
    let refused = vec![
        start("msg_2"),
        event(
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        event(
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "A partial answer"}}),
        ),
        event(
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"}}),
        ),
    ];
    let script = json!({"responses": [
        {"body": {"events": first}},
        {"body": {"events": refused}},
        answer("msg_3", "A short summary of the work so far."),
        answer("msg_4", "All done."),
    ]});
    let script = Script::from_json(&script.to_string()).unwrap();
    let dir = project();
    let out = run_against_script(dir.path(), &script);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains("broke off"), "{text}");
    assert!(
        text.contains(
            "\n  ↻ the prompt was too long; asking the turn again after the compaction (the text above is discarded)\nAll done."
        ),
        "{text}"
    );
}

/// A run whose turn broke off twice (the retry too) said "estimated input 0 vs reported 0"
/// in its summary, beside "tokens in 22": the broken calls' usage was counted in the totals
/// without the `usage` event the view sums. Both calls are now in both numbers.
#[test]
fn the_summary_of_a_turn_that_broke_off_twice_counts_both_calls() {
    use ferroloop_replay::Script;

    let dir = project();
    let fixture = common::shared("fixtures/anthropic/basic_response.sse");
    let fixture = fixture.to_str().unwrap();
    // Byte 690 is inside the third text delta: `message_start` reported 11 input tokens.
    let broken = format!(
        r#"{{"body": {{"fixture": {fixture:?}}}, "fault": {{"kind": "disconnect_after", "bytes": 690}}}}"#
    );
    let script = Script::from_json(&format!(r#"{{"responses": [{broken}, {broken}]}}"#)).unwrap();
    let out = run_against_script(dir.path(), &script);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{text}");
    let summary = text.lines().last().unwrap();
    assert!(summary.contains("tokens in 22 "), "{summary}");
    let estimated: u64 = summary
        .split("estimated input ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(estimated > 0, "{summary}");
    assert!(summary.contains(" vs reported 22 "), "{summary}");
    assert!(!summary.contains("first token -"), "{summary}");
}

/// A script whose first turn reports a context near the window (190,000 input tokens) and
/// calls a tool, so the loop compacts before the second turn: the summary call (6,000 in,
/// 300 out), then the answer (1,200 in, 30 out).
fn compaction_script() -> ferroloop_replay::Script {
    use ferroloop::agent::replay::anthropic_sse;
    use ferroloop_replay::{Script, ScriptBody, ScriptedResponse};

    let response = |content: Value, stop: &str, input: u64, output: u64| {
        let message = serde_json::json!({
            "id": "msg_compaction", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5", "content": content, "stop_reason": stop,
            "stop_sequence": null,
            "usage": {"input_tokens": input, "output_tokens": output},
        });
        ScriptedResponse::ok(ScriptBody::Text(anthropic_sse(&message, 12)))
            .header("content-type", "text/event-stream")
    };
    Script {
        responses: vec![
            response(
                serde_json::json!([{"type": "tool_use", "id": "toolu_1", "name": "glob", "input": {"pattern": "*.rs"}}]),
                "tool_use",
                190_000,
                20,
            ),
            response(
                serde_json::json!([{"type": "text", "text": "The user explored a project."}]),
                "end_turn",
                6_000,
                300,
            ),
            response(
                serde_json::json!([{"type": "text", "text": "Done."}]),
                "end_turn",
                1_200,
                30,
            ),
        ],
        ..Script::default()
    }
}

/// The summariser's call counted in "tokens in" but had no `usage` event, so the closing
/// summary's "reported" input fell short of it by the summary's input ("tokens in 197200 ...
/// vs reported 191200"). The summary call now has its event: the figures agree, and the
/// summary says what compaction cost; `--json` marks the call `"call": "compaction"`.
#[test]
fn the_summary_counts_the_compaction_call_and_agrees_with_the_totals() {
    let dir = project();
    let out = run_against_script(dir.path(), &compaction_script());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{text}");
    assert!(text.contains("context: "), "no compaction: {text}");
    let summary = text.lines().last().unwrap();
    assert!(
        summary.contains("tokens in 197200 / out 350 (compaction in 6000 / out 300) "),
        "{summary}"
    );
    assert!(summary.contains(" vs reported 197200 "), "{summary}");

    let out = run_against_script_with(dir.path(), &compaction_script(), &["--json"]);
    assert!(out.status.success());
    let events: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let usages: Vec<(&str, u64, u64)> = events
        .iter()
        .filter(|e| e["type"] == "usage")
        .map(|e| {
            (
                e["call"].as_str().unwrap(),
                e["turn"].as_u64().unwrap(),
                e["usage"]["input_tokens"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        usages,
        [
            ("turn", 1, 190_000),
            ("compaction", 2, 6_000),
            ("turn", 2, 1_200)
        ]
    );
    let stop = events.last().unwrap();
    assert_eq!(stop["type"], "stop");
    assert_eq!(
        (
            stop["input_tokens"].as_u64(),
            stop["output_tokens"].as_u64()
        ),
        (Some(197_200), Some(350))
    );
}

/// The README's sample of `ferroloop run --json` has the fields the program prints: each
/// sample line's keys (`usage`'s aside, the provider's own) are those of an event of its type
/// from a real run (the replay model's, and one against a server answering 529 first).
#[test]
fn the_readme_json_sample_has_the_fields_run_prints() {
    use std::collections::BTreeSet;

    let repo = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = std::fs::read_to_string(repo.join("README.md")).unwrap();
    let sample = readme
        .split("A few lines of `ferroloop run --json`")
        .nth(1)
        .expect("the README's --json sample")
        .split("```text\n")
        .nth(1)
        .unwrap()
        .split("```")
        .next()
        .unwrap();

    let dir = project();
    let mut printed = String::from_utf8(run_in(dir.path(), &["--json"]).stdout).unwrap();
    let script =
        std::fs::read_to_string(repo.join("tests/replay/overloaded_then_tool_use.json")).unwrap();
    let script = ferroloop_replay::Script::from_json(&script).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = runtime
        .block_on(ferroloop_replay::ReplayServer::start(
            &script,
            &repo,
            ferroloop_replay::ServerOptions::default(),
        ))
        .unwrap();
    let overloaded = Command::new(env!("CARGO_BIN_EXE_ferroloop"))
        .args([
            "run",
            "--json",
            "--base-url",
            &server.base_url(),
            "Weather?",
        ])
        .current_dir(dir.path())
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .output()
        .unwrap();
    assert!(overloaded.status.success(), "{overloaded:?}");
    printed.push_str(&String::from_utf8(overloaded.stdout).unwrap());

    let keys = |event: &Value| -> BTreeSet<String> {
        event.as_object().unwrap().keys().cloned().collect()
    };
    let events: Vec<Value> = printed
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut checked = 0;
    for line in sample.lines() {
        let shown: Value = serde_json::from_str(&line.replace("[...]", "[]")).unwrap();
        let of_type: Vec<&Value> = events
            .iter()
            .filter(|e| e["type"] == shown["type"])
            .collect();
        assert!(
            !of_type.is_empty(),
            "no {} event was printed",
            shown["type"]
        );
        assert!(
            of_type.iter().any(|e| keys(e) == keys(&shown)),
            "README line {line}\nhas other fields than the {} events printed: {:?}",
            shown["type"],
            keys(of_type[0])
        );
        checked += 1;
    }
    assert!(checked >= 8, "{sample}");
}
