//! Stream decoding beside the naive baseline: `serde_json::Value` per event.

use bytes::Bytes;
use ferroloop::decode::{AnthropicDecoder, EventDecoder, OpenAiChatDecoder, StreamDecoder};
use ferroloop::message::anthropic::ContentBlock;
use ferroloop::sse::{SseItem, SseParser};
use serde_json::{Map, Value};

/// How a decode run is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeImpl {
    /// ferroloop, typed events recorded (what a streaming UI uses).
    FerroloopEvents,
    /// ferroloop, accumulation only.
    FerroloopAccumulate,
    /// ferroloop with the hand-written text-delta fast path off: every event through serde
    /// borrowed structs.
    FerroloopSerdeOnly,
    /// The naive baseline: the same SSE parser, then `serde_json::Value` per event.
    NaiveValue,
    /// SSE framing only, no decoding: the floor every decoder above pays.
    SseOnly,
}

impl DecodeImpl {
    /// Every variant, in table order.
    pub const ALL: [Self; 5] = [
        Self::FerroloopEvents,
        Self::FerroloopAccumulate,
        Self::FerroloopSerdeOnly,
        Self::NaiveValue,
        Self::SseOnly,
    ];

    /// The name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Self::FerroloopEvents => "ferroloop (events)",
            Self::FerroloopAccumulate => "ferroloop (accumulate only)",
            Self::FerroloopSerdeOnly => "ferroloop (serde borrowed, no fast path)",
            Self::NaiveValue => "naive serde_json::Value per event",
            Self::SseOnly => "SSE framing only (floor)",
        }
    }

    /// Decodes an Anthropic stream fed as `chunks`; returns (events seen, content blocks).
    pub fn decode_anthropic(self, chunks: &[Bytes]) -> (usize, usize) {
        let summary = self.decode_anthropic_summary(chunks);
        (summary.events, summary.blocks)
    }

    /// Decodes an Anthropic stream fed as `chunks`; returns what was seen and accumulated.
    pub fn decode_anthropic_summary(self, chunks: &[Bytes]) -> DecodeSummary {
        match self {
            Self::SseOnly => {
                let mut parser = SseParser::new();
                let mut events = 0;
                let mut data_bytes = 0;
                for chunk in chunks {
                    parser.feed(chunk.clone());
                    while let Some(item) = parser.next_item() {
                        if let SseItem::Event(event) = item {
                            events += 1;
                            data_bytes += event.data().len();
                        }
                    }
                }
                std::hint::black_box(data_bytes);
                DecodeSummary {
                    events,
                    ..DecodeSummary::default()
                }
            }
            Self::NaiveValue => {
                let mut parser = SseParser::new();
                let mut naive = NaiveAnthropic::new();
                let mut events = 0;
                for chunk in chunks {
                    parser.feed(chunk.clone());
                    while let Some(item) = parser.next_item() {
                        if let SseItem::Event(event) = item {
                            events += 1;
                            if naive.push(event.data()).is_err() {
                                return DecodeSummary {
                                    events,
                                    ..DecodeSummary::default()
                                };
                            }
                        }
                    }
                }
                let content = naive
                    .message()
                    .and_then(|m| m["content"].as_array())
                    .map_or(&[][..], Vec::as_slice);
                DecodeSummary {
                    events,
                    blocks: content.len(),
                    text_bytes: content
                        .iter()
                        .filter_map(|b| b["text"].as_str())
                        .map(str::len)
                        .sum(),
                }
            }
            _ => {
                let mut inner = AnthropicDecoder::new();
                inner.set_record_events(self == Self::FerroloopEvents);
                inner.set_text_fast_path(self != Self::FerroloopSerdeOnly);
                let mut decoder = StreamDecoder::new(inner);
                let mut events = Vec::with_capacity(1024);
                let mut seen = 0;
                for chunk in chunks {
                    if decoder.feed_into(chunk.clone(), &mut events).is_err() {
                        return DecodeSummary {
                            events: seen,
                            ..DecodeSummary::default()
                        };
                    }
                    seen += events.len();
                    events.clear();
                }
                let content = decoder
                    .decoder()
                    .message_ref()
                    .map_or(&[][..], |m| m.content.as_slice());
                DecodeSummary {
                    events: seen,
                    blocks: content.len(),
                    text_bytes: content
                        .iter()
                        .map(|b| match b {
                            ContentBlock::Text(t) => t.text.len(),
                            _ => 0,
                        })
                        .sum(),
                }
            }
        }
    }
}

/// What a decode run saw and accumulated (compared across implementations).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DecodeSummary {
    /// Events seen (SSE events for the naive baseline, typed events for ferroloop).
    pub events: usize,
    /// Content blocks of the final message.
    pub blocks: usize,
    /// Bytes of text across the final message's text blocks.
    pub text_bytes: usize,
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
        let index = usize::try_from(event["index"].as_u64().unwrap_or(0)).unwrap_or(0);
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

/// What an OpenAI Chat decode accumulated: the length of the assistant's text and of all tool
/// call arguments (invariant under how calls are merged), compared across implementations.
pub fn openai_chat_checksum(message: &Value) -> u64 {
    let message = &message["choices"][0]["message"];
    let content = message["content"].as_str().map_or(0, str::len);
    let arguments: usize = message["tool_calls"]
        .as_array()
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .filter_map(|call| call["function"]["arguments"].as_str())
        .map(str::len)
        .sum();
    (content + arguments) as u64
}

/// ferroloop's OpenAI Chat decoder over `chunks` (typed events recorded or not); returns
/// [`openai_chat_checksum`] of the final message, or 0 if it failed.
pub fn ferroloop_openai_chat(chunks: &[Bytes], record_events: bool) -> u64 {
    openai_chat_with(chunks, record_events, true)
}

/// [`ferroloop_openai_chat`], accumulation only, with the template fast path off: every text
/// chunk through the serde borrowed structs (what a stream whose chunks differ in more than
/// their text costs).
pub fn ferroloop_openai_chat_serde(chunks: &[Bytes]) -> u64 {
    openai_chat_with(chunks, false, false)
}

fn openai_chat_with(chunks: &[Bytes], record_events: bool, template: bool) -> u64 {
    let mut inner = OpenAiChatDecoder::new();
    inner.set_record_events(record_events);
    inner.set_template_fast_path(template);
    let mut decoder = StreamDecoder::new(inner);
    let mut events = Vec::with_capacity(1024);
    for chunk in chunks {
        if decoder.feed_into(chunk.clone(), &mut events).is_err() {
            return 0;
        }
        std::hint::black_box(events.len());
        events.clear();
    }
    decoder
        .finish()
        .map_or(0, |message| openai_chat_checksum(&message))
}

/// The naive OpenAI Chat baseline over `chunks`: the same SSE parser, then
/// `serde_json::Value` per chunk, accumulated with lookups; returns [`openai_chat_checksum`]
/// of the final message, or 0 if a chunk did not parse.
pub fn naive_openai_chat(chunks: &[Bytes]) -> u64 {
    let mut parser = SseParser::new();
    let mut naive = NaiveOpenAiChat::default();
    for chunk in chunks {
        parser.feed(chunk.clone());
        while let Some(item) = parser.next_item() {
            if let SseItem::Event(event) = item
                && naive.push(event.data()).is_err()
            {
                return 0;
            }
        }
    }
    openai_chat_checksum(&naive.message())
}

/// The naive OpenAI Chat accumulator: one `serde_json::Value` per chunk; content appended,
/// tool calls merged by their `index` (arguments appended), usage and finish reason kept.
#[derive(Debug, Default)]
pub struct NaiveOpenAiChat {
    head: Option<Value>,
    content: String,
    tool_calls: Vec<Value>,
    finish_reason: Value,
    usage: Value,
}

impl NaiveOpenAiChat {
    /// Accumulates one chunk's data (`[DONE]` is ignored).
    pub fn push(&mut self, data: &str) -> Result<(), serde_json::Error> {
        if data == "[DONE]" {
            return Ok(());
        }
        let chunk: Value = serde_json::from_str(data)?;
        if self.head.is_none() {
            self.head = Some(chunk.clone());
        }
        if !chunk["usage"].is_null() {
            self.usage = chunk["usage"].clone();
        }
        let Some(choice) = chunk["choices"].get(0) else {
            return Ok(());
        };
        if !choice["finish_reason"].is_null() {
            self.finish_reason = choice["finish_reason"].clone();
        }
        let delta = &choice["delta"];
        if let Some(text) = delta["content"].as_str() {
            self.content.push_str(text);
        }
        for call in delta["tool_calls"]
            .as_array()
            .map_or(&[][..], Vec::as_slice)
        {
            let index = usize::try_from(call["index"].as_u64().unwrap_or(0)).unwrap_or(0);
            if self.tool_calls.len() <= index {
                self.tool_calls.resize(index + 1, Value::Null);
            }
            let slot = &mut self.tool_calls[index];
            if slot.is_null() {
                *slot = call.clone();
                continue;
            }
            if let Some(fragment) = call["function"]["arguments"].as_str() {
                let joined = format!(
                    "{}{fragment}",
                    slot["function"]["arguments"].as_str().unwrap_or("")
                );
                slot["function"]["arguments"] = Value::String(joined);
            }
        }
        Ok(())
    }

    /// The accumulated `chat.completion`-shaped message.
    pub fn message(&self) -> Value {
        let mut message = Map::new();
        message.insert("role".into(), "assistant".into());
        message.insert("content".into(), Value::String(self.content.clone()));
        if !self.tool_calls.is_empty() {
            message.insert("tool_calls".into(), Value::Array(self.tool_calls.clone()));
        }
        let mut out = self
            .head
            .clone()
            .unwrap_or_else(|| Value::Object(Map::new()));
        out["object"] = "chat.completion".into();
        out["choices"] = serde_json::json!([{
            "index": 0,
            "message": message,
            "finish_reason": self.finish_reason,
        }]);
        out["usage"] = self.usage.clone();
        out
    }
}

/// The JSON-parser choice for the decoder's per-event parse, isolated: the same SSE framing and
/// the same accumulation (text deltas appended per block index), with each event's data parsed
/// into the same borrowed struct by `serde_json` or by `simd-json` (which needs a mutable copy
/// of each event's data).
pub mod parser_choice {
    use std::borrow::Cow;

    use bytes::Bytes;
    use ferroloop::sse::{SseItem, SseParser};
    use serde::Deserialize;

    /// Every Anthropic event, borrowed.
    #[derive(Deserialize)]
    struct Envelope<'a> {
        #[serde(rename = "type", borrow)]
        kind: Cow<'a, str>,
        #[serde(default)]
        index: Option<usize>,
        #[serde(default, borrow)]
        delta: Option<Delta<'a>>,
    }

    #[derive(Deserialize)]
    struct Delta<'a> {
        #[serde(default, borrow)]
        text: Option<Cow<'a, str>>,
        #[serde(default, borrow)]
        partial_json: Option<Cow<'a, str>>,
    }

    fn apply(texts: &mut Vec<String>, event: &Envelope<'_>) {
        if event.kind != "content_block_delta" {
            return;
        }
        let (Some(index), Some(delta)) = (event.index, &event.delta) else {
            return;
        };
        if texts.len() <= index {
            texts.resize(index + 1, String::new());
        }
        if let Some(text) = delta.text.as_deref().or(delta.partial_json.as_deref()) {
            texts[index].push_str(text);
        }
    }

    /// With `serde_json::from_str` into the borrowed struct. Returns the accumulated bytes.
    pub fn serde_json_borrowed(chunks: &[Bytes]) -> usize {
        let mut parser = SseParser::new();
        let mut texts = Vec::new();
        for chunk in chunks {
            parser.feed(chunk.clone());
            while let Some(item) = parser.next_item() {
                if let SseItem::Event(event) = item
                    && let Ok(envelope) = serde_json::from_str::<Envelope<'_>>(event.data())
                {
                    apply(&mut texts, &envelope);
                }
            }
        }
        texts.iter().map(String::len).sum()
    }

    /// With `simd_json::serde::from_slice` into the same struct (data copied into a reused
    /// buffer first: simd-json parses in place).
    #[cfg(feature = "simd-json")]
    pub fn simd_json_borrowed(chunks: &[Bytes]) -> usize {
        let mut parser = SseParser::new();
        let mut texts = Vec::new();
        let mut scratch: Vec<u8> = Vec::with_capacity(4096);
        let mut buffers = simd_json::Buffers::default();
        for chunk in chunks {
            parser.feed(chunk.clone());
            while let Some(item) = parser.next_item() {
                if let SseItem::Event(event) = item {
                    scratch.clear();
                    scratch.extend_from_slice(event.data().as_bytes());
                    if let Ok(envelope) = simd_json::serde::from_slice_with_buffers::<Envelope<'_>>(
                        &mut scratch,
                        &mut buffers,
                    ) {
                        apply(&mut texts, &envelope);
                    }
                }
            }
        }
        texts.iter().map(String::len).sum()
    }
}
