//! Deterministic (seeded) workloads, so every run and every machine measures the same bytes.

use bytes::Bytes;

/// A small, fast, deterministic pseudo-random generator (xorshift64*), so workloads need no
/// dependency and never change between versions.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed` (0 is mapped to a fixed non-zero state).
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// One of `items`.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

const WORDS: &[&str] = &[
    "the",
    "model",
    "streams",
    "tokens",
    "while",
    "tools",
    "run",
    "in",
    "parallel",
    "and",
    "results",
    "arrive",
    "order",
    "function",
    "returns",
    "value",
    "file",
    "read",
    "error",
    "context",
    "window",
    "会话",
    "工具",
    "结果",
    "模型",
    "日本語",
    "テキスト",
    "한국어",
    "🚀",
    "✅",
    "naïve",
    "café",
    "Straße",
    "{\\\"json\\\": true}",
    "\\n",
    "fn main()",
    "let x = 42;",
];

/// Appends a JSON-escaped text fragment of a few words.
fn text_fragment(rng: &mut Rng, out: &mut String) {
    let words = 1 + rng.below(6);
    for i in 0..words {
        if i > 0 || rng.below(2) == 0 {
            out.push(' ');
        }
        let word: &&str = rng.pick(WORDS);
        out.push_str(word);
    }
}

/// An Anthropic Messages stream of about `target_bytes` bytes: `message_start`, text blocks
/// streamed as `text_delta`s (with CJK and emoji), a `tool_use` block streamed as
/// `input_json_delta`s every few blocks, pings, block stops, `message_delta` and `message_stop`.
/// The default workload is 6 MB, about 50,000 events.
pub fn anthropic_stream(seed: u64, target_bytes: usize) -> Bytes {
    let mut rng = Rng::new(seed);
    let mut out = String::with_capacity(target_bytes + 4096);
    out.push_str("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_bench\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-20250514\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":377,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,\"output_tokens\":1}}}\n\n");
    let mut index = 0u64;
    let mut fragment = String::new();
    while out.len() < target_bytes {
        if index % 5 == 4 {
            out.push_str(&format!("event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":{index},\"content_block\":{{\"type\":\"tool_use\",\"id\":\"toolu_{index:08}\",\"name\":\"read_file\",\"input\":{{}}}}}}\n\n"));
            let pieces = [
                "{\\\"path\\\": \\\"src/",
                "main",
                ".rs\\\", \\\"off",
                "set\\\": 1",
                "0, \\\"limit\\\": 200}",
            ];
            for piece in pieces {
                out.push_str(&format!("event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":{index},\"delta\":{{\"type\":\"input_json_delta\",\"partial_json\":\"{piece}\"}}}}\n\n"));
            }
        } else {
            out.push_str(&format!("event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":{index},\"content_block\":{{\"type\":\"text\",\"text\":\"\"}}}}\n\n"));
            let deltas = 50 + rng.below(400);
            for _ in 0..deltas {
                if rng.below(40) == 0 {
                    out.push_str("event: ping\ndata: {\"type\": \"ping\"}\n\n");
                }
                fragment.clear();
                text_fragment(&mut rng, &mut fragment);
                out.push_str(&format!("event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":{index},\"delta\":{{\"type\":\"text_delta\",\"text\":\"{fragment}\"}}}}\n\n"));
            }
        }
        out.push_str(&format!("event: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":{index}}}\n\n"));
        index += 1;
    }
    out.push_str("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":120000}}\n\n");
    out.push_str("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    Bytes::from(out)
}

/// An OpenAI Chat Completions stream of about `target_bytes` bytes: `chat.completion.chunk`
/// objects with one content delta each, a tool call streamed as `arguments` fragments every few
/// hundred chunks, a usage-only final chunk with empty `choices`, and `data: [DONE]`.
pub fn openai_chat_stream(seed: u64, target_bytes: usize) -> Bytes {
    let mut rng = Rng::new(seed);
    let mut out = String::with_capacity(target_bytes + 4096);
    let head = "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1727346172,\"model\":\"gpt-4o-2024-08-06\",\"system_fingerprint\":\"fp_5050236cbd\",\"choices\":[{\"index\":0,\"delta\":";
    out.push_str(head);
    out.push_str(
        "{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
    );
    let mut fragment = String::new();
    let mut n = 0u64;
    while out.len() < target_bytes {
        n += 1;
        if n.is_multiple_of(300) {
            let call = n / 300;
            out.push_str(head);
            out.push_str(&format!("{{\"tool_calls\":[{{\"index\":0,\"id\":\"call_{call}\",\"type\":\"function\",\"function\":{{\"name\":\"get_weather\",\"arguments\":\"\"}}}}]}},\"logprobs\":null,\"finish_reason\":null}}]}}\n\n"));
            for piece in ["{\\\"ci", "ty\\\": \\\"Par", "is\\\"}"] {
                out.push_str(head);
                out.push_str(&format!("{{\"tool_calls\":[{{\"index\":0,\"function\":{{\"arguments\":\"{piece}\"}}}}]}},\"logprobs\":null,\"finish_reason\":null}}]}}\n\n"));
            }
            continue;
        }
        fragment.clear();
        text_fragment(&mut rng, &mut fragment);
        out.push_str(head);
        out.push_str(&format!(
            "{{\"content\":\"{fragment}\"}},\"logprobs\":null,\"finish_reason\":null}}]}}\n\n"
        ));
    }
    out.push_str(head);
    out.push_str("{},\"logprobs\":null,\"finish_reason\":\"stop\"}]}\n\n");
    out.push_str("data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1727346172,\"model\":\"gpt-4o-2024-08-06\",\"choices\":[],\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":90000,\"total_tokens\":90020}}\n\n");
    out.push_str("data: [DONE]\n\n");
    Bytes::from(out)
}

/// [`openai_chat_stream`] as OpenAI sends it since 2025: every chunk with `choices` ends with
/// an `obfuscation` string of random length (padding against size side channels), so no two
/// chunks differ in their text alone.
pub fn openai_chat_stream_obfuscated(seed: u64, target_bytes: usize) -> Bytes {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let plain = openai_chat_stream(seed, target_bytes);
    let mut rng = Rng::new(seed ^ 0x0bf5);
    let mut out = String::with_capacity(plain.len() + plain.len() / 8);
    for line in String::from_utf8_lossy(&plain).split_inclusive('\n') {
        match line.strip_suffix("]}\n") {
            Some(head) if line.starts_with("data: {") => {
                out.push_str(head);
                out.push_str("],\"obfuscation\":\"");
                for _ in 0..1 + rng.below(12) {
                    out.push(char::from(*rng.pick(ALPHABET)));
                }
                out.push_str("\"}\n");
            }
            _ => out.push_str(line),
        }
    }
    Bytes::from(out)
}

/// One event whose single `data:` line is `data_bytes` long (a huge tool result or image).
pub fn single_large_event(data_bytes: usize) -> Bytes {
    let mut out = Vec::with_capacity(data_bytes + 16);
    out.extend_from_slice(b"data: ");
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    out.extend((0..data_bytes).map(|i| alphabet[(i * 7 + i / 64) % alphabet.len()]));
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// Splits `input` into chunks of `size` bytes that share its storage.
pub fn chunked(input: &Bytes, size: usize) -> Vec<Bytes> {
    let size = size.max(1);
    (0..input.len())
        .step_by(size)
        .map(|start| input.slice(start..(start + size).min(input.len())))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn anthropic_stream_events_are_valid_json() {
        for item in ferroloop::sse::parse_all(anthropic_stream(5, 50_000)) {
            if let ferroloop::sse::SseOwnedItem::Event(event) = item {
                let value: serde_json::Value = serde_json::from_str(&event.data).unwrap();
                assert_eq!(value["type"].as_str(), Some(&*event.event_type));
            }
        }
    }

    #[test]
    fn anthropic_stream_is_deterministic_and_sized() {
        let a = anthropic_stream(7, 200_000);
        assert_eq!(a, anthropic_stream(7, 200_000));
        assert!(a.len() >= 200_000 && a.len() < 210_000);
        let events = ferroloop::sse::parse_all(a.clone());
        assert!(events.len() > 1000);
        assert!(
            std::str::from_utf8(&a).unwrap().contains("世界")
                || std::str::from_utf8(&a).unwrap().contains("会话")
        );
    }

    #[test]
    fn openai_chat_stream_is_valid_json_per_event() {
        let stream = openai_chat_stream(3, 100_000);
        let events = ferroloop::sse::parse_all(stream);
        assert!(events.len() > 300);
        for item in &events {
            if let ferroloop::sse::SseOwnedItem::Event(event) = item
                && &*event.data != "[DONE]"
            {
                let value: serde_json::Value = serde_json::from_str(&event.data).unwrap();
                assert_eq!(value["object"], "chat.completion.chunk");
            }
        }
    }

    #[test]
    fn obfuscated_openai_chat_stream_differs_only_by_padding() {
        let plain = ferroloop::sse::parse_all(openai_chat_stream(3, 50_000));
        let padded = ferroloop::sse::parse_all(openai_chat_stream_obfuscated(3, 50_000));
        assert_eq!(plain.len(), padded.len());
        let mut obfuscated = 0;
        for (a, b) in plain.iter().zip(&padded) {
            if let (ferroloop::sse::SseOwnedItem::Event(a), ferroloop::sse::SseOwnedItem::Event(b)) =
                (a, b)
                && &*a.data != "[DONE]"
            {
                let mut b: serde_json::Value = serde_json::from_str(&b.data).unwrap();
                if b.as_object_mut().unwrap().remove("obfuscation").is_some() {
                    obfuscated += 1;
                }
                assert_eq!(
                    serde_json::from_str::<serde_json::Value>(&a.data).unwrap(),
                    b
                );
            }
        }
        assert!(obfuscated + 2 >= plain.len());
    }

    #[test]
    fn chunks_cover_the_input() {
        let input = single_large_event(10_000);
        let chunks = chunked(&input, 1460);
        assert_eq!(chunks.iter().map(Bytes::len).sum::<usize>(), input.len());
    }
}
