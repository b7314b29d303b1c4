//! The OpenAI Chat decoder's text fast paths (serde borrowed structs, and the template that
//! appends a chunk repeating the previous one's bytes around its content) against the general
//! path alone, on generated streams that mix what the fast paths take with everything that must
//! leave them: other heads and tails, whitespace, escapes, refusals, usage, finish reasons,
//! logprobs, tool calls, extra choices, unknown fields, invalid JSON, provider errors, chunks
//! after `[DONE]`. After every event the results, the typed events and the message must be
//! identical, and the fast decoder must give the same events at any SSE chunking.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use bytes::Bytes;
use ferroloop::decode::{DecodeEvent, EventDecoder, OpenAiChatDecoder, StreamDecoder};
use proptest::prelude::*;
use serde_json::Value;

/// Text with quotes, backslashes, control characters, multi-byte UTF-8 and a non-BMP
/// character.
fn text_piece() -> impl Strategy<Value = String> {
    "[a-z \"\\\\\n\r\té日😀/]{0,10}"
}

/// A JSON string literal for `text`, sometimes with every non-ASCII character `\u`-escaped
/// (surrogate pairs included), as some servers send it.
fn literal(text: &str, ascii_only: bool) -> String {
    let plain = serde_json::to_string(text).unwrap();
    if !ascii_only {
        return plain;
    }
    let mut out = String::new();
    for c in plain.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

const HEADS: [&str; 6] = [
    r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp_a","choices":["#,
    r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp_b","choices":["#,
    r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":["#,
    r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","usage":null,"system_fingerprint":"fp_\u0061","choices":["#,
    r#"{ "id": "chatcmpl-1", "object": "chat.completion.chunk", "system_fingerprint": "fp_a", "choices": [ "#,
    r#"{"obfuscation":"h","id":"chatcmpl-1","system_fingerprint":"fp_a","choices":["#,
];

const TAILS: [&str; 10] = [
    "]}",
    r#"],"obfuscation":"x1"}"#,
    r#"],"obfuscation":"y22"}"#,
    r#"],"obfuscation":"q\"3"}"#,
    r#"],"obfuscation":7}"#,
    r#"],"obfuscation":"z","extra":1}"#,
    r#"],"obfuscation":"z","usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#,
    "],\"obfuscation\":\"w4\"}\n",
    r#"],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}}"#,
    "] }\n",
];

/// One event of a generated stream (after the first chunk).
#[derive(Debug, Clone)]
enum Op {
    /// A content chunk: head, text, ASCII-only escapes, tail.
    Text(usize, String, bool, usize),
    Refusal(String),
    NullContent,
    Finish(String, &'static str),
    UsageOnly,
    Tool(usize, String),
    /// An arguments-only tool call chunk: head, call index, fragment, tail.
    Args(usize, usize, String, usize),
    Logprobs(String),
    Role(String),
    TwoChoices(String, String),
    ContentNumber,
    LoneSurrogate,
    NotJson,
    ProviderError,
    /// Reasoning text (`reasoning_content` or `reasoning`) next to null content.
    Reasoning(String, bool),
    /// An `error` object next to a text-only choice (OpenRouter): must leave the fast paths.
    ErrorNextToChoices(String),
    /// A whole tool call without `index` (Gemini).
    UnindexedTool(usize, String),
    Done,
    Record(bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => (0..HEADS.len(), text_piece(), any::<bool>(), 0..TAILS.len())
            .prop_map(|(h, t, a, tail)| Op::Text(h, t, a, tail)),
        12 => (text_piece(), any::<bool>()).prop_map(|(t, a)| Op::Text(0, t, a, 0)),
        1 => text_piece().prop_map(Op::Refusal),
        1 => Just(Op::NullContent),
        1 => (text_piece(), prop_oneof![Just("stop"), Just("length"), Just("")])
            .prop_map(|(t, r)| Op::Finish(t, r)),
        1 => Just(Op::UsageOnly),
        2 => (0..2usize, "[a-z{}\":, ]{0,6}").prop_map(|(i, a)| Op::Tool(i, a)),
        6 => (0..HEADS.len(), 0..2usize, text_piece(), 0..TAILS.len())
            .prop_map(|(h, i, a, tail)| Op::Args(h, i, a, tail)),
        6 => (0..2usize, "[a-z{}\":, ]{0,6}").prop_map(|(i, a)| Op::Args(0, i, a, 1)),
        1 => text_piece().prop_map(Op::Logprobs),
        1 => text_piece().prop_map(Op::Role),
        1 => (text_piece(), text_piece()).prop_map(|(a, b)| Op::TwoChoices(a, b)),
        1 => Just(Op::ContentNumber),
        1 => Just(Op::LoneSurrogate),
        1 => Just(Op::NotJson),
        1 => Just(Op::ProviderError),
        2 => (text_piece(), any::<bool>()).prop_map(|(t, r)| Op::Reasoning(t, r)),
        1 => text_piece().prop_map(Op::ErrorNextToChoices),
        1 => (0..2usize, "[a-z{}\":, ]{0,6}").prop_map(|(i, a)| Op::UnindexedTool(i, a)),
        1 => Just(Op::Done),
        1 => any::<bool>().prop_map(Op::Record),
    ]
}

fn choice(index: usize, delta: &str, extra: &str) -> String {
    format!(r#"{{"index":{index},"delta":{delta},"logprobs":null,"finish_reason":null{extra}}}"#)
}

/// The SSE event (type, data) for `op`; `None` for a decoder setting.
fn event(op: &Op) -> Option<(&'static str, String)> {
    let head = HEADS[0];
    let content = |t: &str| format!(r#"{{"content":{}}}"#, literal(t, false));
    let data = match op {
        Op::Text(h, text, ascii, tail) => format!(
            "{}{}{}",
            HEADS[*h],
            choice(0, &format!(r#"{{"content":{}}}"#, literal(text, *ascii)), ""),
            TAILS[*tail]
        ),
        Op::Refusal(t) => format!(
            "{head}{}]}}",
            choice(0, &format!(r#"{{"refusal":{}}}"#, literal(t, false)), "")
        ),
        Op::NullContent => format!("{head}{}]}}", choice(0, r#"{"content":null}"#, "")),
        Op::Finish(t, reason) => format!(
            r#"{head}{{"index":0,"delta":{},"finish_reason":"{reason}"}}]}}"#,
            content(t)
        ),
        Op::UsageOnly => r#"{"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":9,"total_tokens":12}}"#.to_owned(),
        Op::Tool(i, arguments) => format!(
            r#"{head}{}]}}"#,
            choice(
                0,
                &format!(
                    r#"{{"tool_calls":[{{"index":{i},"id":"call_{i}","type":"function","function":{{"name":"f","arguments":{}}}}}]}}"#,
                    literal(arguments, false)
                ),
                ""
            )
        ),
        Op::Args(h, i, arguments, tail) => format!(
            "{}{}{}",
            HEADS[*h],
            choice(
                0,
                &format!(
                    r#"{{"tool_calls":[{{"index":{i},"function":{{"arguments":{}}}}}]}}"#,
                    literal(arguments, false)
                ),
                ""
            ),
            TAILS[*tail]
        ),
        Op::Logprobs(t) => format!(
            r#"{head}{{"index":0,"delta":{},"logprobs":{{"content":[{{"token":"a","logprob":-0.5}}],"refusal":null}},"finish_reason":null}}]}}"#,
            content(t)
        ),
        Op::Role(t) => format!(
            "{head}{}]}}",
            choice(0, &format!(r#"{{"role":"assistant","content":{}}}"#, literal(t, false)), "")
        ),
        Op::TwoChoices(a, b) => format!(
            "{head}{},{}]}}",
            choice(0, &content(a), ""),
            choice(1, &content(b), "")
        ),
        Op::ContentNumber => format!("{head}{}]}}", choice(0, r#"{"content":5}"#, "")),
        Op::LoneSurrogate => format!("{head}{}]}}", choice(0, r#"{"content":"a\ud800b"}"#, "")),
        Op::NotJson => format!("{head}{}", choice(0, r#"{"content":"cut"#, "")),
        Op::ProviderError => {
            return Some(("error", r#"{"error":{"message":"overloaded","type":"server_error"}}"#.to_owned()));
        }
        Op::Reasoning(t, content_key) => {
            let key = if *content_key { "reasoning_content" } else { "reasoning" };
            format!(
                "{head}{}]}}",
                choice(0, &format!(r#"{{"content":null,"{key}":{}}}"#, literal(t, false)), "")
            )
        }
        Op::ErrorNextToChoices(t) => format!(
            r#"{head}{}],"error":{{"code":502,"message":"upstream"}}}}"#,
            choice(0, &content(t), "")
        ),
        Op::UnindexedTool(i, arguments) => format!(
            r#"{head}{}]}}"#,
            choice(
                0,
                &format!(
                    r#"{{"tool_calls":[{{"id":"call_u{i}","type":"function","function":{{"name":"f","arguments":{}}}}}]}}"#,
                    literal(arguments, false)
                ),
                ""
            )
        ),
        Op::Done => "[DONE]".to_owned(),
        Op::Record(_) => return None,
    };
    Some(("message", data))
}

const FIRST: &str = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp_a","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#;

fn decoder(fast: bool) -> OpenAiChatDecoder {
    let mut decoder = OpenAiChatDecoder::new();
    decoder.set_text_fast_path(fast);
    decoder
}

/// Events and errors, in order, from feeding `input` to a stream decoder cut at `cuts`
/// (events after a failing one stay queued: fed again with an empty chunk).
fn stream_run(input: &[u8], cuts: &[prop::sample::Index]) -> (Vec<DecodeEvent>, Vec<String>) {
    let mut points: Vec<usize> = cuts.iter().map(|c| c.index(input.len() + 1)).collect();
    points.push(input.len());
    points.sort_unstable();
    let mut decoder = StreamDecoder::new(decoder(true));
    let mut events = Vec::new();
    let mut errors = Vec::new();
    let mut start = 0;
    for end in points {
        let mut piece = Bytes::copy_from_slice(&input[start..end]);
        while let Err(error) = decoder.feed_into(std::mem::take(&mut piece), &mut events) {
            errors.push(format!("{error:?}"));
        }
        start = end;
    }
    errors.push(format!("{:?}", decoder.finish()));
    (events, errors)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn text_fast_paths_agree_with_the_general_path(
        ops in prop::collection::vec(op(), 0..40),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..20),
    ) {
        let mut fast = decoder(true);
        let mut general = decoder(false);
        let mut sse = String::new();
        let mut record = true;
        let mut whole_events = Vec::new();
        let mut whole_errors = Vec::new();
        let first = Op::Text(0, String::new(), false, 0);
        for op in std::iter::once(&first).chain(&ops) {
            if let Op::Record(on) = op {
                fast.set_record_events(*on);
                general.set_record_events(*on);
                record = *on;
                continue;
            }
            let Some((event_type, data)) = event(op) else {
                continue;
            };
            let data = if std::ptr::eq(op, &first) { FIRST.to_owned() } else { data };
            let a = fast.push_event(event_type, &data);
            let b = general.push_event(event_type, &data);
            prop_assert_eq!(format!("{a:?}"), format!("{b:?}"), "result of {}", data);
            let (mut ea, mut eb) = (Vec::new(), Vec::new());
            fast.drain_events(&mut ea);
            general.drain_events(&mut eb);
            prop_assert_eq!(&ea, &eb, "events of {}", data);
            prop_assert_eq!(fast.message(), general.message(), "message after {}", data);
            prop_assert_eq!(fast.is_complete(), general.is_complete());
            if record {
                whole_events.extend(ea);
                if let Err(e) = a {
                    whole_errors.push(format!("{e:?}"));
                }
            }
            sse.push_str(&format!("event: {event_type}\n"));
            for line in data.split('\n') {
                sse.push_str(&format!("data: {line}\n"));
            }
            sse.push('\n');
        }
        let (a, b) = (fast.finish(), general.finish());
        prop_assert_eq!(format!("{a:?}"), format!("{b:?}"));
        // The same stream through SSE at random chunkings (events always recorded).
        let (events, mut errors) = stream_run(sse.as_bytes(), &cuts);
        let finish = errors.pop();
        prop_assert_eq!(finish, Some(format!("{a:?}")));
        if ops.iter().all(|o| !matches!(o, Op::Record(false))) {
            prop_assert_eq!(events, whole_events);
            prop_assert_eq!(errors, whole_errors);
        }
    }
}

/// The bench's shape: a long run of identical-but-for-content chunks interrupted by tool calls
/// and ended by a finish reason and a usage chunk, decoded both ways to the same message.
#[test]
fn long_template_runs_match_the_general_path() {
    let mut chunks = vec![FIRST.to_owned()];
    for i in 0..500 {
        let op = if i % 50 == 49 {
            Op::Tool(0, format!("{{\"n\":{i}}}"))
        } else {
            Op::Text(0, format!("word {i} \"q\"\n"), i % 3 == 0, 0)
        };
        chunks.push(event(&op).unwrap().1);
    }
    chunks.push(event(&Op::Finish(String::new(), "stop")).unwrap().1);
    chunks.push(event(&Op::UsageOnly).unwrap().1);
    chunks.push("[DONE]".to_owned());
    let mut out = Vec::new();
    for fast in [true, false] {
        let mut d = decoder(fast);
        let mut events = Vec::new();
        for data in &chunks {
            d.push_event("message", data).unwrap();
            d.drain_events(&mut events);
        }
        out.push((d.finish().unwrap(), events));
    }
    assert_eq!(out[0], out[1]);
    let content = out[0].0["choices"][0]["message"]["content"]
        .as_str()
        .unwrap();
    assert!(content.starts_with("word 0 \"q\"\nword 1 \"q\"\n"));
    assert_eq!(out[0].0["usage"]["total_tokens"], Value::from(12));
}

/// Every recorded OpenAI Chat stream gives the same results, events and message with the fast
/// paths on and off.
#[test]
fn fixtures_match_the_general_path() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut seen = 0;
    for dir in ["tests/fixtures/openai-chat"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for path in entries.map(|e| e.unwrap().path()) {
            if path.extension().is_none_or(|x| x != "sse") {
                continue;
            }
            let input = Bytes::from(std::fs::read(&path).unwrap());
            let mut runs = Vec::new();
            for fast in [true, false] {
                let mut parser = ferroloop::sse::SseParser::new();
                parser.feed(input.clone());
                let mut d = decoder(fast);
                let mut log = Vec::new();
                while let Some(item) = parser.next_item() {
                    if let ferroloop::sse::SseItem::Event(event) = item {
                        let result = d.push_event(event.event_type(), event.data());
                        let mut events = Vec::new();
                        d.drain_events(&mut events);
                        log.push(format!("{result:?} {events:?} {}", d.message()));
                    }
                }
                log.push(format!("{:?}", d.finish()));
                runs.push(log);
            }
            assert_eq!(runs[0], runs[1], "{}", path.display());
            seen += 1;
        }
    }
    assert!(seen >= 4, "only {seen} streams");
}
