//! Workload generators and a naive reference decoder, shared by tests and benchmarks.
//!
//! Not part of the stable API.

use serde_json::{Map, Value, json};

const TEXT_PIECES: &[&str] = &[
    "Hello",
    " there",
    ", how",
    " can I",
    " help",
    " you",
    " today?",
    "\n\n",
    " 你好，世界",
    "。",
    "日本語の",
    "テキスト",
    " 🚀",
    " emoji 😀👍🏽",
    " naïve café",
    " \"quoted\"",
    " back\\slash",
    " tab\there",
    " — ",
    " The quick brown fox jumps over the lazy dog.",
    " 한국어",
    " Ελληνικά",
    " ok",
];

/// A deterministic pseudo-random sequence (xorshift), so workloads are reproducible.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A value in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

fn event(out: &mut String, kind: &str, data: &Value) {
    out.push_str("event: ");
    out.push_str(kind);
    out.push_str("\ndata: ");
    out.push_str(&data.to_string());
    out.push_str("\n\n");
}

/// An Anthropic Messages SSE stream of about `target_bytes`: text blocks of many small deltas
/// (ASCII, CJK, emoji, escapes), pings, and a `tool_use` block every few text blocks with its
/// input streamed in fragments. Ends with `message_delta` and `message_stop`.
pub fn anthropic_stream(target_bytes: usize, seed: u64) -> String {
    let mut rng = Rng::new(seed);
    let mut out = String::with_capacity(target_bytes + 4096);
    event(
        &mut out,
        "message_start",
        &json!({"type": "message_start", "message": {"id": "msg_bench", "type": "message", "role": "assistant",
            "model": "claude-bench", "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 1000, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 500,
                      "output_tokens": 1}}}),
    );
    let mut index = 0usize;
    while out.len() < target_bytes {
        if index % 4 == 3 {
            event(
                &mut out,
                "content_block_start",
                &json!({"type": "content_block_start", "index": index,
                    "content_block": {"type": "tool_use", "id": format!("toolu_{index}"), "name": "write_file", "input": {}}}),
            );
            let mut input = String::from(r#"{"path": "src/main.rs", "content": ""#);
            for _ in 0..40 {
                input.push_str(
                    TEXT_PIECES[rng.below(TEXT_PIECES.len())]
                        .replace('\\', "\\\\")
                        .replace('"', "\\\"")
                        .replace('\n', "\\n")
                        .replace('\t', "\\t")
                        .as_str(),
                );
            }
            input.push_str(r#"", "mode": 420}"#);
            let chars: Vec<char> = input.chars().collect();
            for piece in chars.chunks(12) {
                let fragment: String = piece.iter().collect();
                event(
                    &mut out,
                    "content_block_delta",
                    &json!({"type": "content_block_delta", "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": fragment}}),
                );
            }
        } else {
            event(
                &mut out,
                "content_block_start",
                &json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
            );
            for n in 0..200 {
                if n % 50 == 0 {
                    event(&mut out, "ping", &json!({"type": "ping"}));
                }
                let text = TEXT_PIECES[rng.below(TEXT_PIECES.len())];
                event(
                    &mut out,
                    "content_block_delta",
                    &json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}}),
                );
            }
        }
        event(
            &mut out,
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        );
        index += 1;
    }
    event(
        &mut out,
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null},
            "usage": {"output_tokens": 123456}}),
    );
    event(&mut out, "message_stop", &json!({"type": "message_stop"}));
    out
}

/// The naive baseline every Rust client writes: parse each event's data into a
/// `serde_json::Value`, then accumulate with lookups on it. Used as the benchmark's reference
/// point and as an independent oracle in tests.
#[derive(Debug, Default)]
pub struct NaiveAnthropic {
    message: Option<Value>,
    inputs: Vec<String>,
}

impl NaiveAnthropic {
    /// A fresh accumulator.
    pub fn new() -> Self {
        Self::default()
    }

    /// Accumulates one event's data.
    pub fn push(&mut self, data: &str) -> Result<(), serde_json::Error> {
        let event: Value = serde_json::from_str(data)?;
        let Some(message) = (match event["type"].as_str() {
            Some("message_start") => {
                self.message = Some(event["message"].clone());
                None
            }
            _ => self.message.as_mut(),
        }) else {
            return Ok(());
        };
        let index = event["index"].as_u64().unwrap_or(0) as usize;
        match event["type"].as_str().unwrap_or("") {
            "content_block_start" => {
                if let Some(content) = message["content"].as_array_mut() {
                    content.push(event["content_block"].clone());
                }
                self.inputs.resize(index + 1, String::new());
            }
            "content_block_delta" => {
                let delta = &event["delta"];
                let block = &mut message["content"][index];
                match delta["type"].as_str().unwrap_or("") {
                    "text_delta" => {
                        let text = format!(
                            "{}{}",
                            block["text"].as_str().unwrap_or(""),
                            delta["text"].as_str().unwrap_or("")
                        );
                        block["text"] = Value::String(text);
                    }
                    "input_json_delta" => {
                        if let Some(buf) = self.inputs.get_mut(index) {
                            buf.push_str(delta["partial_json"].as_str().unwrap_or(""));
                        }
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                if let Some(buf) = self.inputs.get(index).filter(|b| !b.is_empty()) {
                    message["content"][index]["input"] = serde_json::from_str(buf)?;
                }
            }
            "message_delta" => {
                for (k, v) in event["delta"].as_object().cloned().unwrap_or_default() {
                    message[k.as_str()] = v;
                }
                for (k, v) in event["usage"].as_object().cloned().unwrap_or_else(Map::new) {
                    if !v.is_null() {
                        message["usage"][k.as_str()] = v;
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The accumulated message.
    pub fn message(&self) -> Option<&Value> {
        self.message.as_ref()
    }
}
