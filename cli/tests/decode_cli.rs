//! `ferroloop decode` as a program: the CLI contract of DESIGN.md.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::{Output, Stdio};

use serde_json::Value;

mod common;
use common::{bin, run_stdin, shared};

fn decode_stdin(provider: &str, input: &[u8], extra: &[&str]) -> Output {
    let mut args = vec!["decode", "--provider", provider];
    args.extend_from_slice(extra);
    run_stdin(&args, input)
}

#[test]
fn fixtures_decode_to_the_expected_message_at_every_chunk_size() {
    let mut checked = 0;
    for provider in ["anthropic", "openai-chat", "openai-responses"] {
        let dirs = [
            shared(&format!("fixtures/{provider}")),
            shared(&format!("decode/streams/{provider}")),
        ];
        let paths = dirs
            .iter()
            .filter_map(|dir| std::fs::read_dir(dir).ok())
            .flatten()
            .map(|entry| entry.unwrap().path());
        for path in paths {
            if path.extension().is_none_or(|e| e != "sse") {
                continue;
            }
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            let expected_path = shared(&format!("decode/expected/{provider}/{name}.json"));
            let Ok(expected) = std::fs::read_to_string(expected_path) else {
                continue; // a failing stream: see `shared_failing_streams_exit_1`
            };
            let expected: Value = serde_json::from_str(&expected).unwrap();
            checked += 1;
            for chunk in [None, Some("1"), Some("7"), Some("64")] {
                let mut cmd = bin();
                cmd.args(["decode", "--provider", provider]).arg(&path);
                if let Some(n) = chunk {
                    cmd.args(["--chunk", n]);
                }
                let out = cmd.output().unwrap();
                assert!(
                    out.status.success(),
                    "{name}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let stdout = String::from_utf8(out.stdout).unwrap();
                assert_eq!(stdout.lines().count(), 1, "one JSON document on one line");
                let message: Value = serde_json::from_str(&stdout).unwrap();
                assert_eq!(message, expected, "{provider}/{name} chunk {chunk:?}");
            }
        }
    }
    assert_eq!(
        checked, 14,
        "3 + 4 recorded fixtures, 7 hand-written streams"
    );
}

#[test]
fn shared_failing_streams_exit_1() {
    for (name, needle) in [
        ("error_overloaded", "overloaded_error"),
        ("truncated", "truncated"),
    ] {
        let path = shared(&format!("decode/streams/anthropic/{name}.sse"));
        for chunk in ["1", "64"] {
            let out = bin()
                .args(["decode", "--provider", "anthropic", "--chunk", chunk])
                .arg(&path)
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(1), "{name}");
            let stderr = String::from_utf8(out.stderr).unwrap();
            assert!(stderr.contains(needle), "{name}: {stderr}");
            assert_eq!(stderr.lines().count(), 1, "one clear line: {stderr}");
            let partial: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(partial["content"][0]["text"], "Partial answ");
        }
    }
}

#[test]
fn events_flag_prints_typed_events_then_the_message() {
    let path = shared("fixtures/anthropic/tool_use_response.sse");
    let out = bin()
        .args([
            "decode",
            "--provider",
            "anthropic",
            "--events",
            "--chunk",
            "3",
        ])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success());
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (message, events) = lines.split_last().unwrap();
    assert_eq!(message["type"], "message");
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"message_start"));
    assert_eq!(kinds.last(), Some(&"message_stop"));
    assert!(kinds.contains(&"ping"));
    let ready = events
        .iter()
        .find(|e| e["type"] == "tool_use_ready")
        .unwrap();
    assert_eq!(ready["input"]["location"], "Paris");
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "I'll check the current weather in Paris for you.");
}

#[test]
fn mid_stream_error_exits_1_with_a_clear_message() {
    let input = concat!(
        "event: message_start\n",
        "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_e\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n",
        "event: error\n",
        "data: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
    );
    let out = decode_stdin("anthropic", input.as_bytes(), &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("overloaded_error") && stderr.contains("Overloaded"),
        "{stderr}"
    );
}

/// A mid-stream error is reported as it arrives: on a pipe its writer keeps open, `decode`
/// printed nothing and went on waiting for the end of the input, which may never come.
#[test]
fn a_mid_stream_error_is_reported_without_waiting_for_the_end_of_the_input() {
    use std::io::Write as _;
    let input = concat!(
        "event: message_start\n",
        "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_e\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n",
        "event: error\n",
        "data: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
    );
    let mut child = bin()
        .args(["decode", "--provider", "anthropic"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    stdin.flush().unwrap();
    // The writer stays open: only the error can end the run.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        status.is_some(),
        "still waiting for the input's end: {stderr}"
    );
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("overloaded_error"), "{stderr}");
}

#[test]
fn truncated_stream_exits_1_and_prints_the_partial_message() {
    let full = std::fs::read(shared("fixtures/anthropic/basic_response.sse")).unwrap();
    let cut = full.len() / 2;
    let out = decode_stdin("anthropic", &full[..cut], &["--chunk", "7"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("truncated"), "{stderr}");
    let partial: Value = serde_json::from_str(&String::from_utf8(out.stdout).unwrap()).unwrap();
    assert_eq!(partial["id"], "msg_4QpJur2dWWDjF6C758FbBw5vm12BaVipnK");

    // A Chat stream cut before its finish_reason is truncated; one that only lacks `[DONE]`
    // after it is whole (some servers leave the marker out).
    let chat = std::fs::read(shared("fixtures/openai-chat/2018feb66ae1.sse")).unwrap();
    let text = String::from_utf8(chat.clone()).unwrap();
    let finish = text.find("\"finish_reason\":\"tool_calls\"").unwrap();
    let before_finish = text[..finish].rfind("data: ").unwrap();
    let out = decode_stdin("openai-chat", &chat[..before_finish], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8(out.stderr).unwrap().contains("[DONE]"));
    let without_done = &chat[..chat.len() - "data: [DONE]\n\n".len()];
    let out = decode_stdin("openai-chat", without_done, &[]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let message: Value = serde_json::from_str(&String::from_utf8(out.stdout).unwrap()).unwrap();
    assert_eq!(message["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(message["usage"]["total_tokens"], 60);
}

/// `run` and `serve-replay` name Chat Completions `openai` (alias `openai-chat`); `decode` takes
/// both names too, for the same answer.
#[test]
fn openai_is_a_name_of_openai_chat() {
    let input = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi\"},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let by_alias = decode_stdin("openai", input.as_bytes(), &[]);
    let by_name = decode_stdin("openai-chat", input.as_bytes(), &[]);
    assert!(
        by_alias.status.success(),
        "{}",
        String::from_utf8_lossy(&by_alias.stderr)
    );
    assert_eq!(by_alias.stdout, by_name.stdout);
    let message: Value = serde_json::from_slice(&by_alias.stdout).unwrap();
    assert_eq!(message["choices"][0]["message"]["content"], "Hi");
}

#[test]
fn unknown_provider_is_a_usage_error() {
    let out = bin()
        .args(["decode", "--provider", "gemini"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8(out.stderr).unwrap().contains("gemini"));
}

/// OpenRouter reports an upstream failure after HTTP 200 as a chunk with an `error` object next
/// to choices ending with `finish_reason: "error"`: exit 1 naming the error, not a normal answer.
#[test]
fn openai_chat_error_next_to_choices_exits_1_with_the_message() {
    let input = concat!(
        "data: {\"id\":\"gen-1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"gen-1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"gen-1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"provider\":\"Upstream\",\"error\":{\"code\":502,\"message\":\"Upstream provider went away\"},\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"finish_reason\":\"error\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let out = decode_stdin("openai-chat", input.as_bytes(), &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("Upstream provider went away"), "{stderr}");
}
