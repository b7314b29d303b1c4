//! Stream decoding beside the naive baseline: `serde_json::Value` per event.

use bytes::Bytes;
use ferroloop::decode::{AnthropicDecoder, EventDecoder, StreamDecoder};
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
                (events, 0)
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
                                return (events, 0);
                            }
                        }
                    }
                }
                let blocks = naive
                    .message()
                    .and_then(|m| m["content"].as_array().map(Vec::len))
                    .unwrap_or(0);
                (events, blocks)
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
                        return (seen, 0);
                    }
                    seen += events.len();
                    events.clear();
                }
                let blocks = decoder
                    .decoder()
                    .message_ref()
                    .map_or(0, |m| m.content.len());
                (seen, blocks)
            }
        }
    }
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
                if let SseItem::Event(event) = item {
                    if let Ok(envelope) = serde_json::from_str::<Envelope<'_>>(event.data()) {
                        apply(&mut texts, &envelope);
                    }
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
