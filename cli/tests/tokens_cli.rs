//! `ferroloop tokens` as a program: the CLI contract of DESIGN.md.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use ferroloop::tokens::{Family, count_exact};
use serde_json::Value;

mod common;
use common::{bin, run_stdin};

fn sample(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/tokens/sample")
        .join(name)
}

fn expected(file: &str, key: &str) -> u64 {
    let all: Value =
        serde_json::from_str(&std::fs::read_to_string(sample("expected.json")).unwrap()).unwrap();
    all.as_array()
        .unwrap()
        .iter()
        .find(|e| e["file"] == file)
        .unwrap()[key]
        .as_u64()
        .unwrap()
}

fn lines(output: &std::process::Output) -> Vec<Value> {
    String::from_utf8(output.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn one_line_per_file_with_the_contract_fields() {
    let files = ["prose-0.txt", "base64-0.txt", "ja-0.txt"];
    let output = bin()
        .arg("tokens")
        .args(files.iter().map(|f| sample(f)))
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let lines = lines(&output);
    assert_eq!(lines.len(), 3);
    for (line, file) in lines.iter().zip(files) {
        assert_eq!(line["file"], sample(file).display().to_string());
        assert_eq!(line["method"], "estimate");
        assert_eq!(line["tokenizer"], "claude");
        assert!(line["tokens"].as_u64().unwrap() > 0);
        assert_eq!(line.as_object().unwrap().len(), 4);
    }
}

#[test]
fn exact_counts_match_tiktoken_on_text() {
    for (tokenizer, key) in [("o200k", "o200k"), ("cl100k", "cl100k")] {
        let output = bin()
            .args(["tokens", "--exact", "--tokenizer", tokenizer])
            .arg(sample("rust-0.txt"))
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        let line = &lines(&output)[0];
        assert_eq!(line["method"], "exact");
        assert_eq!(line["tokenizer"], tokenizer);
        assert_eq!(line["tokens"], expected("rust-0.txt", key));
    }
}

/// `--exact` counts text as it reads it, cutting between lines, so several read blocks' worth
/// must still count as the whole: from a file and from stdin, where the head read to look for a
/// request comes first.
#[test]
fn exact_counts_of_text_read_in_blocks_match_the_whole() {
    let mut text = String::new();
    for file in [
        "prose-0.txt",
        "logs-0.txt",
        "rust-0.txt",
        "zh-0.txt",
        "json-0.json",
    ] {
        text.push_str(&std::fs::read_to_string(sample(file)).unwrap());
    }
    let text = text.repeat((5 << 18) / text.len() + 1);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.txt");
    std::fs::write(&path, &text).unwrap();
    for family in [Family::O200k, Family::Cl100k] {
        let whole = count_exact(&text, family).unwrap();
        let name = family.name();
        let output = bin()
            .args(["tokens", "--exact", "--tokenizer", name])
            .arg(&path)
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        assert_eq!(lines(&output)[0]["tokens"], whole, "{name}");
        let output = run_stdin(
            &["tokens", "--exact", "--tokenizer", name, "-"],
            text.as_bytes(),
        );
        assert!(output.status.success(), "{output:?}");
        assert_eq!(lines(&output)[0]["tokens"], whole, "{name} from stdin");
    }
}

#[test]
fn estimates_are_close_to_exact() {
    let output = bin()
        .args(["tokens", "--tokenizer", "o200k"])
        .arg(sample("logs-0.txt"))
        .output()
        .unwrap();
    let estimate = lines(&output)[0]["tokens"].as_u64().unwrap() as f64;
    let exact = expected("logs-0.txt", "o200k") as f64;
    assert!(
        (estimate / exact - 1.0).abs() < 0.15,
        "{estimate} vs {exact}"
    );
}

#[test]
fn json_request_bodies_are_counted_as_requests() {
    let dir = std::env::temp_dir().join(format!("ferroloop-tokens-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let request = dir.join("request.json");
    let text = dir.join("request.txt");
    let body = r#"{"model": "claude-sonnet-4-5", "max_tokens": 100,
        "tools": [{"name": "ls", "description": "List files", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "hello"}]}"#;
    std::fs::write(&request, body).unwrap();
    std::fs::write(&text, body).unwrap();
    let output = bin()
        .arg("tokens")
        .arg(&request)
        .arg(&text)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let lines = lines(&output);
    // As a request, the tool-use preamble (346 tokens) is included; as text it is not.
    assert!(lines[0]["tokens"].as_u64().unwrap() > 346);
    assert!(lines[1]["tokens"].as_u64().unwrap() < 200);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn exact_is_refused_for_claude_and_missing_files_fail() {
    let output = bin()
        .args(["tokens", "--exact", "--tokenizer", "claude"])
        .arg(sample("prose-0.txt"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("o200k and cl100k"));

    let output = bin()
        .arg("tokens")
        .arg(sample("prose-0.txt"))
        .arg("/nonexistent/file.txt")
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert_eq!(
        lines(&output).len(),
        1,
        "the readable file is still counted"
    );

    let output = bin()
        .args(["tokens", "--tokenizer", "gpt2"])
        .arg(sample("prose-0.txt"))
        .output()
        .unwrap();
    assert!(!output.status.success());
}

/// A request whose only content is a 100×100 PNG padded to 300 KB: about 14 tokens of image, but
/// tens of thousands if its base64 were counted as text.
fn image_request() -> String {
    let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
    png.extend_from_slice(&100u32.to_be_bytes());
    png.extend_from_slice(&100u32.to_be_bytes());
    png.extend_from_slice(&[8, 6, 0, 0, 0]);
    png.resize(300_000, 0);
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut data = String::new();
    for chunk in png.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, &b)| acc | (u32::from(b) << (16 - 8 * i)));
        for i in 0..4 {
            data.push(if i <= chunk.len() {
                ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char
            } else {
                '='
            });
        }
    }
    serde_json::json!({"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
    ]}]})
    .to_string()
}

/// A request as `JSON.stringify` writes a string cut in the middle of an emoji: a lone
/// surrogate escape (`\ud83d`), which serde_json refuses. It is still a request (the image
/// from its header, the surrogate as U+FFFD, as in Python, Node and C); it was counted as text,
/// the base64 image included.
#[test]
fn a_request_with_a_lone_surrogate_escape_is_still_a_request() {
    let body = image_request();
    let cut = body.replacen(
        r#""content":["#,
        r#""content":[{"type":"text","text":"log tail: ok \ud83d"},"#,
        1,
    );
    let replaced = cut.replace(r"\ud83d", r"\ufffd");
    assert_ne!(cut, body);
    let dir = std::env::temp_dir().join(format!("ferroloop-tokens-lone-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (lone, fffd) = (dir.join("lone.json"), dir.join("fffd.json"));
    std::fs::write(&lone, &cut).unwrap();
    std::fs::write(&fffd, &replaced).unwrap();
    let output = bin().arg("tokens").arg(&lone).arg(&fffd).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let counted = lines(&output);
    let tokens = counted[0]["tokens"].as_u64().unwrap();
    assert!(tokens < 100, "{tokens}");
    assert_eq!(counted[1]["tokens"], tokens);
    // So is stdin.
    let stdin = run_stdin(&["tokens", "-"], cut.as_bytes());
    assert_eq!(lines(&stdin)[0]["tokens"], tokens);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_json_request_with_a_byte_order_mark_is_still_a_request() {
    let dir = std::env::temp_dir().join(format!("ferroloop-tokens-bom-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let plain = dir.join("plain.json");
    let bom = dir.join("bom.json");
    let body = image_request();
    std::fs::write(&plain, &body).unwrap();
    std::fs::write(&bom, [b"\xEF\xBB\xBF".as_slice(), body.as_bytes()].concat()).unwrap();
    let output = bin().arg("tokens").arg(&plain).arg(&bom).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let lines = lines(&output);
    let tokens = lines[0]["tokens"].as_u64().unwrap();
    assert!(tokens < 100, "{tokens}");
    assert_eq!(lines[1]["tokens"], tokens);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_dash_reads_stdin_and_counts_a_request_as_one() {
    let count = |input: &str| {
        let output = run_stdin(&["tokens", "-"], input.as_bytes());
        assert!(output.status.success(), "{output:?}");
        let lines = lines(&output);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0]["file"], "-");
        lines[0]["tokens"].as_u64().unwrap()
    };
    assert!(count(&image_request()) < 100);
    let text = std::fs::read_to_string(sample("prose-0.txt")).unwrap();
    let by_file = bin()
        .arg("tokens")
        .arg(sample("prose-0.txt"))
        .output()
        .unwrap();
    assert_eq!(count(&text), lines(&by_file)[0]["tokens"].as_u64().unwrap());
}

/// `-` given twice counts stdin twice: the second read found stdin at its end and printed
/// `"tokens": 0`, a wrong count rather than an error.
#[test]
fn a_dash_given_twice_counts_the_same_input() {
    let output = run_stdin(
        &["tokens", "-", "-"],
        b"The quick brown fox jumps over the lazy dog.",
    );
    assert!(output.status.success());
    let counts = lines(&output);
    assert_eq!(counts.len(), 2);
    assert!(counts[0]["tokens"].as_u64().unwrap() > 0, "{counts:?}");
    assert_eq!(counts[0]["tokens"], counts[1]["tokens"], "{counts:?}");
}

/// A text larger than a read block (here 3 MiB of mixed lines, one line crossing each block
/// boundary) is estimated as it is read, with the whole text's estimate, from a file and from
/// stdin alike.
#[test]
fn a_large_text_read_in_blocks_gets_the_whole_texts_estimate() {
    let mut text = String::new();
    let mut n = 0u64;
    while text.len() < 3 << 20 {
        n = n
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        match n >> 61 {
            0 => text.push_str("fn main() { println!(\"{}\", 42); }\n"),
            1 => text.push_str("2026-12-01T19:42:35Z INFO request id=7f3a latency_ms=12\n"),
            2 => text.push_str("Обычный русский текст, и ещё немного.\n"),
            3 => text.push_str("日本語のテキストと한국어 문장。\n"),
            4 => text.push_str(&format!("{n:016x}{n:016x}")),
            _ => text.push_str("The quick brown fox jumps over the lazy dog. "),
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.log");
    std::fs::write(&path, &text).unwrap();
    for family in ["claude", "o200k", "claude-legacy"] {
        let expected = ferroloop::tokens::estimate_text(&text, family.parse().unwrap());
        let output = bin()
            .args(["tokens", "--tokenizer", family])
            .arg(&path)
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        assert_eq!(lines(&output)[0]["tokens"], expected, "{family}");
        let output = run_stdin(&["tokens", "--tokenizer", family, "-"], text.as_bytes());
        assert!(output.status.success(), "{output:?}");
        assert_eq!(lines(&output)[0]["tokens"], expected, "{family} from stdin");
    }
}

/// Text on stdin is counted as it arrives: 256 MiB piped through keep the process's peak
/// memory far below the input's size. Before, all of stdin was read into memory first.
#[cfg(target_os = "linux")]
#[test]
fn text_on_stdin_is_not_held_in_memory() {
    use std::io::Write;
    use std::process::Stdio;

    let line = "2026-12-01T19:42:35Z INFO worker=3 request id=7f3a9c latency_ms=12 ok\n";
    let block = line.repeat((1 << 20) / line.len());
    let mut child = bin()
        .args(["tokens", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for _ in 0..256 {
        stdin.write_all(block.as_bytes()).unwrap();
    }
    let peak_kib = peak_resident_kib(&child);
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(lines(&output)[0]["tokens"].as_u64().unwrap() > 256 * 10_000);
    assert!(peak_kib < 96 * 1024, "peak resident memory {peak_kib} KiB");
}

/// The peak resident memory of a running child so far (`VmHWM`), in KiB.
#[cfg(target_os = "linux")]
fn peak_resident_kib(child: &std::process::Child) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A `.json` file that cannot be a request (it does not start as an object: an array of
/// records, a log of values) is counted as it is read, as text is: 256 MiB of it through a FIFO
/// named `.json` keep the process's peak memory far below the input's size. Before, every
/// `.json` file was read whole first.
#[cfg(target_os = "linux")]
#[test]
fn a_json_file_that_is_no_request_is_not_held_in_memory() {
    use std::io::Write;
    use std::process::Stdio;

    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("records.json");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let record =
        "{\"ts\":\"2026-12-01T19:42:35Z\",\"level\":\"info\",\"worker\":3,\"latency_ms\":12},\n";
    let block = record.repeat((1 << 20) / record.len());
    let child = bin()
        .args(["tokens"])
        .arg(&fifo)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Opening blocks until the child opens the FIFO for reading.
    let mut writer = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    writer.write_all(b"[\n").unwrap();
    for _ in 0..256 {
        writer.write_all(block.as_bytes()).unwrap();
    }
    writer.write_all(b"{}]\n").unwrap();
    let peak_kib = peak_resident_kib(&child);
    drop(writer);
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(lines(&output)[0]["tokens"].as_u64().unwrap() > 256 * 10_000);
    assert!(peak_kib < 96 * 1024, "peak resident memory {peak_kib} KiB");
}

/// A `.json` file that is no request is counted as text, whether it could be one (an object
/// without `messages`) or not (an array): the same count as the same bytes named `.txt`.
#[test]
fn json_files_that_are_no_requests_count_as_their_text() {
    let dir = tempfile::tempdir().unwrap();
    let texts = [
        "[{\"role\":\"user\",\"content\":\"hello there\"}, 1, 2, 3]\n",
        "\u{feff}  [\"a byte-order mark, then whitespace, then an array\"]",
        "{\"not\": \"a request\", \"messages\": 3}",
        "{\"broken\": ",
        "   \n  ",
    ];
    for (index, text) in texts.iter().enumerate() {
        let json = dir.path().join(format!("{index}.json"));
        let txt = dir.path().join(format!("{index}.txt"));
        std::fs::write(&json, text).unwrap();
        std::fs::write(&txt, text).unwrap();
        for exact in [false, true] {
            let mut command = bin();
            command.args(["tokens", "--tokenizer", "o200k"]);
            if exact {
                command.arg("--exact");
            }
            let output = command.arg(&json).arg(&txt).output().unwrap();
            assert!(output.status.success(), "{output:?}");
            let lines = lines(&output);
            assert_eq!(
                lines[0]["tokens"], lines[1]["tokens"],
                "{text:?} exact={exact}"
            );
        }
    }
}

/// Each request body of `tests/tokens/requests` counts as the total the table every language
/// shares gives it (`expected.tsv`, checked against the core in `core/tests/tokens_requests.rs`).
#[test]
fn request_bodies_count_as_the_shared_table_says() {
    let folder = common::shared("tokens/requests");
    let table = std::fs::read_to_string(folder.join("expected.tsv")).unwrap();
    let mut rows = 0;
    for family in ["o200k", "cl100k", "claude-legacy", "claude"] {
        let wanted: Vec<(&str, u64)> = table
            .lines()
            .skip(1)
            .map(|line| line.split('\t').collect::<Vec<_>>())
            .filter(|fields| fields[1] == family)
            .map(|fields| (fields[0], fields[6].parse().unwrap()))
            .collect();
        let output = bin()
            .args(["tokens", "--tokenizer", family])
            .args(wanted.iter().map(|(file, _)| folder.join(file)))
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        let lines = lines(&output);
        assert_eq!(lines.len(), wanted.len());
        for (line, (file, total)) in lines.iter().zip(&wanted) {
            assert!(line["file"].as_str().unwrap().ends_with(file), "{line}");
            assert_eq!(line["tokens"], *total, "{file} {family}");
            rows += 1;
        }
    }
    assert!(rows >= 20);
}
