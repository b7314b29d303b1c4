//! `ferroloop serve-replay` as a program: the banner line, serving, request logging, and
//! stopping by itself (stdin closed, idle).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn spawn(args: &[&str]) -> (Child, mpsc::Receiver<serde_json::Value>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferroloop"))
        .arg("serve-replay")
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (lines, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            let _ = lines.send(serde_json::from_str(&line).unwrap());
        }
    });
    (child, receiver)
}

fn next_line(lines: &mpsc::Receiver<serde_json::Value>) -> serde_json::Value {
    lines.recv_timeout(Duration::from_secs(10)).unwrap()
}

fn wait_exit(child: &mut Child, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    false
}

fn post(addr: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let body = "{}";
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

#[test]
fn serves_a_fixture_logs_requests_and_exits_when_stdin_closes() {
    let (mut child, lines) = spawn(&[
        "--fixture",
        "tests/fixtures/anthropic/basic_response.sse",
        "--log-requests",
    ]);
    let banner = next_line(&lines);
    let addr = banner["addr"].as_str().unwrap().to_owned();
    assert!(addr.starts_with("127.0.0.1:"), "{banner}");
    assert_eq!(banner["url"], format!("http://{addr}"));
    assert_eq!(banner["tls"], false);

    let response = post(&addr, "/v1/messages");
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(
        response.contains("content-type: text/event-stream"),
        "{response}"
    );
    assert!(response.contains("event: message_stop"), "{response}");
    let logged = next_line(&lines);
    assert_eq!(logged["request"]["path"], "/v1/messages");
    assert_eq!(logged["request"]["body"], "{}");

    drop(child.stdin.take());
    assert!(
        wait_exit(&mut child, Duration::from_secs(10)),
        "still running after stdin closed"
    );
}

#[test]
fn follows_a_script_and_exits_when_idle() {
    let dir = std::env::temp_dir().join(format!("ferroloop-serve-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("script.json");
    std::fs::write(
        &script,
        r#"{"responses": [
            {"status": 529, "headers": {"retry-after": "0"}, "body": {"json": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}}},
            {"body": {"events": [{"event": "message_stop", "data": {"type": "message_stop"}}]}}
        ]}"#,
    )
    .unwrap();
    let (mut child, lines) = spawn(&[
        "--script",
        script.to_str().unwrap(),
        "--idle-exit-ms",
        "300",
        "--ignore-stdin",
    ]);
    let addr = next_line(&lines)["addr"].as_str().unwrap().to_owned();
    let first = post(&addr, "/v1/messages");
    assert!(first.starts_with("HTTP/1.1 529"), "{first}");
    assert!(first.contains("retry-after: 0"), "{first}");
    assert!(first.contains("overloaded_error"), "{first}");
    let second = post(&addr, "/v1/messages");
    assert!(second.starts_with("HTTP/1.1 200"), "{second}");
    assert!(
        second.contains("data: {\"type\":\"message_stop\"}"),
        "{second}"
    );
    let third = post(&addr, "/v1/messages");
    assert!(third.starts_with("HTTP/1.1 410"), "{third}");
    assert!(
        wait_exit(&mut child, Duration::from_secs(10)),
        "still running when idle"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn prints_the_certificate_with_tls() {
    let (mut child, lines) = spawn(&[
        "--fixture",
        "tests/fixtures/anthropic/basic_response.sse",
        "--tls",
    ]);
    let banner = next_line(&lines);
    assert!(
        banner["url"]
            .as_str()
            .unwrap()
            .starts_with("https://127.0.0.1:")
    );
    assert!(
        banner["cert_pem"]
            .as_str()
            .unwrap()
            .starts_with("-----BEGIN CERTIFICATE-----")
    );
    drop(child.stdin.take());
    assert!(wait_exit(&mut child, Duration::from_secs(10)));
}

#[test]
fn rejects_a_bad_script() {
    let dir =
        std::env::temp_dir().join(format!("ferroloop-serve-replay-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("bad.json");
    std::fs::write(&script, r#"{"responses": [{"stauts": 200}]}"#).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_ferroloop"))
        .args(["serve-replay", "--script", script.to_str().unwrap()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("invalid replay script"));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn agent_model_answers_with_the_scripted_conversation() {
    let (mut child, lines) = spawn(&["--agent-model"]);
    let banner = next_line(&lines);
    let addr = banner["addr"].as_str().unwrap().to_owned();
    let response = post(&addr, "/v1/messages");
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let body = dechunk(response.split_once("\r\n\r\n").unwrap().1);
    // The first turn explores with tool calls, streamed as a Messages stream.
    assert!(body.contains("\"type\":\"tool_use\""), "{body}");
    assert!(body.contains("event: message_stop"), "{body}");
    drop(child.stdin.take());
    assert!(wait_exit(&mut child, Duration::from_secs(10)));
}

#[test]
fn agent_model_speaks_openai_chat_completions_when_asked() {
    let (mut child, lines) = spawn(&["--agent-model", "--agent-model-provider", "openai"]);
    let banner = next_line(&lines);
    let addr = banner["addr"].as_str().unwrap().to_owned();
    let response = post(&addr, "/v1/chat/completions");
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let body = dechunk(response.split_once("\r\n\r\n").unwrap().1);
    // The same first turn, as Chat Completions chunks: tool calls, a finish reason, [DONE].
    assert!(
        body.contains("\"object\":\"chat.completion.chunk\""),
        "{body}"
    );
    assert!(body.contains("\"tool_calls\""), "{body}");
    assert!(body.contains("\"finish_reason\":\"tool_calls\""), "{body}");
    assert!(body.trim_end().ends_with("data: [DONE]"), "{body}");
    assert!(!body.contains("event: message_stop"), "{body}");
    drop(child.stdin.take());
    assert!(wait_exit(&mut child, Duration::from_secs(10)));
}

#[test]
fn agent_model_provider_needs_agent_model() {
    let output = Command::new(env!("CARGO_BIN_EXE_ferroloop"))
        .args([
            "serve-replay",
            "--fixture",
            "x.sse",
            "--agent-model-provider",
            "openai",
        ])
        .current_dir(repo())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    // A usage error, like every other misuse of the flags.
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--agent-model"), "{stderr}");
}

/// The payload of a `Transfer-Encoding: chunked` body.
fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap();
        if size == 0 {
            break;
        }
        out.push_str(&after[..size]);
        rest = &after[size + 2..];
    }
    out
}
