//! Anthropic Messages stream decoding (see [`AnthropicDecoder`]).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::error::{DecodeError, ProtocolError};
use super::events::DecodeEvent;
use super::json_str::{self, Halves};
use super::openai_chat::is_done_marker;
use super::partial_json::{PartialJson, PartialMode, Repair};
use super::{EventDecoder, data_type, data_value, decode_lone_surrogates_lossily, is_unnamed};
use crate::message::anthropic::{ContentBlock, Message};

/// Anthropic Messages streaming: `message_start`, `content_block_start/delta/stop`,
/// `message_delta`, `message_stop`, `ping`, `error`.
///
/// Accumulation follows anthropic-sdk-python's `accumulate_event`: text and thinking append,
/// a signature replaces, citations append, tool input fragments concatenate raw (parsed once, at
/// the block's stop; an empty buffer keeps the announced input, `{}`), a `compaction_delta`
/// appends its `content` to the `compaction` block and replaces its `encrypted_content` (as
/// anthropic-sdk-typescript's `BetaMessageStream`), `message_delta` assigns
/// a non-null `stop_reason`/`stop_sequence`, every non-null usage field and a top-level
/// `context_management`.
///
/// The tool-call events (`tool_use_ready`, `tool_use_invalid`, `tool_use_truncated`) are for
/// the calls the client runs, `tool_use` blocks, also one that arrives complete in
/// `message_start`. Calls the server runs (`server_tool_use`, `mcp_tool_use`) get none: their
/// input is accumulated into the message all the same.
#[derive(Debug)]
pub struct AnthropicDecoder {
    /// Boxed: a `Message` is large and most decoders live inside enums and futures.
    message: Option<Box<Message>>,
    blocks: Vec<BlockState>,
    stopped: bool,
    failure: Option<DecodeError>,
    events: Vec<DecodeEvent>,
    record: bool,
    text_fast_path: bool,
}

#[derive(Debug, Default)]
struct BlockState {
    /// The raw input of a tool-like block (`tool_use`, `server_tool_use`, or any block with an
    /// `input`), accumulated until the block is sealed.
    input: Option<PartialJson>,
    /// The block's input has been parsed (or reported invalid/truncated).
    sealed: bool,
    stopped: bool,
    /// Bytes of tool input handled: appended, then parsed once at the seal.
    work: u64,
    /// The high surrogate the block's last string delta ended with, waiting for the low half
    /// the next one starts with (see [`json_str::Halves`]). A text or thinking block shows it
    /// as U+FFFD meanwhile; a tool input holds it back.
    high_half: Option<u16>,
}

impl Default for AnthropicDecoder {
    fn default() -> Self {
        Self::new()
    }
}

/// `content_block_delta` with any delta type, borrowing its strings from the event data.
#[derive(Deserialize)]
struct RawBlockDelta<'a> {
    index: u64,
    #[serde(borrow)]
    delta: RawDelta<'a>,
}

#[derive(Deserialize)]
struct RawDelta<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    // The three strings a stream may split a character between are kept raw and read with
    // their halves (`string_value`).
    #[serde(borrow, default)]
    text: Option<&'a RawValue>,
    #[serde(borrow, default)]
    partial_json: Option<&'a RawValue>,
    #[serde(borrow, default)]
    thinking: Option<&'a RawValue>,
    #[serde(borrow, default)]
    signature: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    citation: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct IndexOnly {
    index: u64,
}

#[derive(Deserialize)]
struct MessageStart {
    message: Message,
}

#[derive(Deserialize)]
struct BlockStart {
    index: u64,
    content_block: Map<String, Value>,
}

#[derive(Deserialize)]
struct MessageDelta {
    #[serde(default)]
    delta: Map<String, Value>,
    #[serde(default)]
    usage: Option<Map<String, Value>>,
    /// Beta context management: the edits applied to the request (top level, not in `delta`).
    /// Present (`null` included) or absent.
    #[serde(default, deserialize_with = "present")]
    context_management: Option<Value>,
}

/// `Some` for a field that is present, `null` included (`Option<Value>` alone reads `null` as
/// absent).
fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

/// The delta types with a typed form (`RawDelta`); any other passes through.
const KNOWN_DELTAS: [&str; 5] = [
    "text_delta",
    "input_json_delta",
    "thinking_delta",
    "signature_delta",
    "citations_delta",
];

const DELTA_PREFIX: &str = r#"{"type":"content_block_delta","index":"#;

/// The string-carrying delta types, in the order the fast path tries them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StringDelta {
    Text,
    InputJson,
    Thinking,
}

const DELTA_MIDDLES: [(&str, StringDelta); 3] = [
    (
        r#","delta":{"type":"text_delta","text":""#,
        StringDelta::Text,
    ),
    (
        r#","delta":{"type":"input_json_delta","partial_json":""#,
        StringDelta::InputJson,
    ),
    (
        r#","delta":{"type":"thinking_delta","thinking":""#,
        StringDelta::Thinking,
    ),
];

/// The hot path: `content_block_delta` with a `text_delta`, `input_json_delta` or
/// `thinking_delta`, in the exact compact shape the API sends, decoded without a JSON parser.
/// Anything else returns `None` and takes the general (serde) path, which decides validity.
fn fast_string_delta(data: &str) -> Option<(u64, StringDelta, Halves<'_>)> {
    let rest = data.strip_prefix(DELTA_PREFIX)?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    // JSON forbids leading zeros (`01`); such an index is left to serde, which rejects it.
    if digits == 0 || digits > 9 || (digits > 1 && rest.starts_with('0')) {
        return None;
    }
    let index: u64 = rest.get(..digits)?.parse().ok()?;
    let rest = rest.get(digits..)?;
    let (rest, kind) = DELTA_MIDDLES
        .iter()
        .find_map(|(middle, kind)| rest.strip_prefix(middle).map(|r| (r, *kind)))?;
    let (text, used) = json_str::string_body_halves(rest)?;
    let tail = rest.get(used..)?.strip_prefix("}}")?;
    json_str::is_json_whitespace(tail).then_some((index, kind, text))
}

fn parse<'a, T: Deserialize<'a>>(event_type: &str, data: &'a str) -> Result<T, DecodeError> {
    serde_json::from_str(data).map_err(|e| DecodeError::json(event_type, e))
}

/// A string field the typed form kept raw, read with the halves of characters at its ends.
fn string_value<'a>(event_type: &str, raw: &'a RawValue) -> Result<Halves<'a>, DecodeError> {
    json_str::raw_string_halves(raw).map_err(|e| DecodeError::json(event_type, e))
}

fn is_tool_like(block: &ContentBlock) -> bool {
    match block {
        ContentBlock::ToolUse(_) | ContentBlock::ServerToolUse(_) => true,
        ContentBlock::Other(map) => map.contains_key("input"),
        _ => false,
    }
}

impl AnthropicDecoder {
    /// A decoder waiting for `message_start`.
    pub fn new() -> Self {
        Self {
            message: None,
            blocks: Vec::new(),
            stopped: false,
            failure: None,
            events: Vec::new(),
            record: true,
            text_fast_path: true,
        }
    }

    /// Turns the hand-written string-delta fast path on or off (benchmarks compare it with the
    /// serde path; results are identical either way).
    #[doc(hidden)]
    pub fn set_text_fast_path(&mut self, enabled: bool) {
        self.text_fast_path = enabled;
    }

    /// The accumulated message, typed, without materialising partial tool inputs (those blocks
    /// show their announced input until sealed). `None` before `message_start`.
    pub fn message_ref(&self) -> Option<&Message> {
        self.message.as_deref()
    }

    /// A typed snapshot of the message with partial tool inputs filled in with their
    /// complete-so-far view (the SDK snapshot semantics).
    pub fn snapshot(&self) -> Option<Message> {
        let mut message = self.message.as_deref()?.clone();
        for (block, state) in message.content.iter_mut().zip(&self.blocks) {
            if state.sealed {
                continue;
            }
            if let Some(input) = &state.input
                && let Some(view) = partial_view(input)
            {
                set_input(block, view);
            }
        }
        Some(message)
    }

    /// The raw input text received so far for the block at `index` (tool-like blocks only).
    pub fn tool_input_text(&self, index: usize) -> Option<&str> {
        self.blocks
            .get(index)?
            .input
            .as_ref()
            .map(PartialJson::as_str)
    }

    /// The complete-so-far view of a tool block's input (see [`PartialJson`]). Costs the copy
    /// of the input; UIs that re-render on every delta should use
    /// [`tool_input_repair`](Self::tool_input_repair).
    pub fn tool_input_view(&mut self, index: usize, mode: PartialMode) -> Option<Value> {
        self.blocks.get_mut(index)?.input.as_mut()?.view(mode)
    }

    /// How to close a tool block's input text into valid JSON right now, in O(new bytes +
    /// nesting depth): keep `tool_input_text(index)[..cut]` and append `suffix`.
    pub fn tool_input_repair(&mut self, index: usize, mode: PartialMode) -> Option<Repair> {
        self.blocks.get_mut(index)?.input.as_mut()?.repair(mode)
    }

    /// Bytes handled so far for a tool block's input: fragments appended, the parse at the seal,
    /// and bytes scanned for partial views. A work counter for linearity tests.
    pub fn tool_input_work(&self, index: usize) -> Option<u64> {
        let state = self.blocks.get(index)?;
        Some(state.work + state.input.as_ref().map_or(0, PartialJson::work))
    }

    fn emit(&mut self, event: impl FnOnce() -> DecodeEvent) {
        if self.record {
            self.events.push(event());
        }
    }

    fn started(&mut self, event_type: &str) -> Result<&mut Message, DecodeError> {
        if self.stopped {
            return Err(ProtocolError::AfterEnd {
                event_type: event_type.to_owned(),
            }
            .into());
        }
        self.message.as_deref_mut().ok_or_else(|| {
            ProtocolError::BeforeStart {
                event_type: event_type.to_owned(),
            }
            .into()
        })
    }

    fn block_index(&self, event_type: &str, index: u64) -> Result<usize, DecodeError> {
        usize::try_from(index)
            .ok()
            .filter(|&i| i < self.blocks.len())
            .ok_or_else(|| {
                ProtocolError::UnknownIndex {
                    event_type: event_type.to_owned(),
                    index,
                }
                .into()
            })
    }

    /// Applies a text, tool-input or thinking fragment to its block.
    fn on_string_delta(
        &mut self,
        index: u64,
        kind: StringDelta,
        piece: Halves<'_>,
    ) -> Result<(), DecodeError> {
        const KIND: &str = "content_block_delta";
        self.started(KIND)?;
        let i = self.block_index(KIND, index)?;
        let block = self.message.as_mut().and_then(|m| m.content.get_mut(i));
        let state = &mut self.blocks[i];
        match kind {
            StringDelta::Text => {
                let Some(ContentBlock::Text(block)) = block else {
                    tracing::debug!(index, "text_delta for a non-text block ignored");
                    return Ok(());
                };
                let text = json_str::push_halves(&mut block.text, &mut state.high_half, piece);
                self.emit(|| DecodeEvent::TextDelta {
                    index: i,
                    text: text.into_owned(),
                });
            }
            StringDelta::Thinking => {
                let Some(ContentBlock::Thinking(block)) = block else {
                    tracing::debug!(index, "thinking_delta for a non-thinking block ignored");
                    return Ok(());
                };
                let thinking =
                    json_str::push_halves(&mut block.thinking, &mut state.high_half, piece);
                self.emit(|| DecodeEvent::ThinkingDelta {
                    index: i,
                    thinking: thinking.into_owned(),
                });
            }
            StringDelta::InputJson => {
                let text;
                match state.input.as_mut() {
                    Some(input) if !state.sealed => {
                        text = json_str::join_held(&mut state.high_half, piece);
                        input.push(&text);
                        state.work += text.len() as u64;
                    }
                    _ => {
                        tracing::debug!(
                            index,
                            "input_json_delta for a block without open input ignored"
                        );
                        return Ok(());
                    }
                }
                self.emit(|| DecodeEvent::InputJsonDelta {
                    index: i,
                    partial_json: text.into_owned(),
                });
            }
        }
        Ok(())
    }

    fn on_delta(&mut self, data: &str) -> Result<(), DecodeError> {
        const KIND: &str = "content_block_delta";
        let raw: RawBlockDelta<'_> = match parse(KIND, data) {
            Ok(raw) => raw,
            Err(error) => return self.on_untyped_delta(data, error),
        };
        self.started(KIND)?;
        let i = self.block_index(KIND, raw.index)?;
        let delta = raw.delta;
        let missing = |field: &str| -> DecodeError {
            ProtocolError::Malformed {
                event_type: KIND.to_owned(),
                detail: format!("`{}` without `{field}`", delta.kind),
            }
            .into()
        };
        match delta.kind.as_ref() {
            "text_delta" => {
                let text = string_value(KIND, delta.text.ok_or_else(|| missing("text"))?)?;
                return self.on_string_delta(raw.index, StringDelta::Text, text);
            }
            "input_json_delta" => {
                let fragment = match delta.partial_json {
                    Some(raw) => string_value(KIND, raw)?,
                    None => Halves::whole(""),
                };
                return self.on_string_delta(raw.index, StringDelta::InputJson, fragment);
            }
            "thinking_delta" => {
                let raw_thinking = delta.thinking.ok_or_else(|| missing("thinking"))?;
                let thinking = string_value(KIND, raw_thinking)?;
                return self.on_string_delta(raw.index, StringDelta::Thinking, thinking);
            }
            "signature_delta" => {
                let signature = delta
                    .signature
                    .as_deref()
                    .ok_or_else(|| missing("signature"))?;
                if let Some(ContentBlock::Thinking(block)) = self.block_mut(i) {
                    signature.clone_into(&mut block.signature);
                    self.emit(|| DecodeEvent::SignatureDelta {
                        index: i,
                        signature: signature.to_owned(),
                    });
                }
            }
            "citations_delta" => {
                let raw_citation = delta.citation.ok_or_else(|| missing("citation"))?;
                let citation: Value = parse(KIND, raw_citation.get())?;
                if let Some(ContentBlock::Text(block)) = self.block_mut(i) {
                    block
                        .citations
                        .get_or_insert_with(Vec::new)
                        .push(citation.clone());
                    self.emit(|| DecodeEvent::CitationsDelta { index: i, citation });
                }
            }
            _ => {
                let whole: Value = parse(KIND, data)?;
                self.on_other_delta(i, whole);
            }
        }
        Ok(())
    }

    /// A `content_block_delta` the typed form rejected: a delta of a type this crate does not
    /// model may carry fields named like the known ones but of another type (`"text": {...}`),
    /// and still passes through. A known delta type keeps the parse error.
    fn on_untyped_delta(&mut self, data: &str, error: DecodeError) -> Result<(), DecodeError> {
        const KIND: &str = "content_block_delta";
        let Ok(whole) = serde_json::from_str::<Value>(data) else {
            return Err(error);
        };
        let kind = whole.pointer("/delta/type").and_then(Value::as_str);
        let index = whole.get("index").and_then(Value::as_u64);
        let (Some(kind), Some(index)) = (kind, index) else {
            return Err(error);
        };
        if KNOWN_DELTAS.contains(&kind) {
            return Err(error);
        }
        self.started(KIND)?;
        let i = self.block_index(KIND, index)?;
        self.on_other_delta(i, whole);
        Ok(())
    }

    /// A delta with no typed event: a `compaction_delta` (accumulated onto its `compaction`
    /// block) or a type this crate does not know (accumulation unchanged). Passed through as
    /// [`DecodeEvent::UnknownDelta`].
    fn on_other_delta(&mut self, i: usize, mut whole: Value) {
        let delta = whole.get_mut("delta").map_or(Value::Null, Value::take);
        if delta.get("type").and_then(Value::as_str) == Some("compaction_delta")
            && let Some(ContentBlock::Other(block)) = self.block_mut(i)
            && block.get("type").and_then(Value::as_str) == Some("compaction")
        {
            apply_compaction_delta(block, &delta);
        }
        self.emit(|| DecodeEvent::UnknownDelta { index: i, delta });
    }

    fn block_mut(&mut self, i: usize) -> Option<&mut ContentBlock> {
        self.message.as_mut()?.content.get_mut(i)
    }

    fn on_message_start(&mut self, data: &str) -> Result<(), DecodeError> {
        const KIND: &str = "message_start";
        let start: MessageStart = parse(KIND, data)?;
        if let Some(current) = self.message.as_deref() {
            // A gateway that repeats the frame of the open message (same id: LiteLLM's
            // Responses bridge, Bifrost) loses nothing: the repeat is ignored, as
            // anthropic-sdk-python's accumulator ignores it. Another message spliced into the
            // stream (an intermediary's retry after a lost upstream) must not be merged.
            if !self.stopped && start.message.id == current.id {
                tracing::debug!(id = %current.id, "repeated message_start ignored");
                return Ok(());
            }
            return Err(ProtocolError::DuplicateStart {
                event_type: KIND.to_owned(),
            }
            .into());
        }
        let mut message = start.message;
        self.blocks = message
            .content
            .iter()
            .map(|_| BlockState {
                input: None,
                sealed: true,
                stopped: true,
                work: 0,
                high_half: None,
            })
            .collect();
        // Content announced in message_start is complete already: a turn the server carried
        // on without sampling (programmatic tool calling: the container's next call to a
        // client tool) arrives whole in message_start, then message_stop.
        message.content.shrink_to_fit();
        if self.record {
            let snapshot = serde_json::to_value(&message).unwrap_or(Value::Null);
            self.events
                .push(DecodeEvent::MessageStart { message: snapshot });
        }
        // Such a call is sealed already: it runs like one streamed in a block.
        for (index, block) in message.content.iter().enumerate() {
            if let ContentBlock::ToolUse(tool) = block {
                self.events.push(DecodeEvent::ToolUseReady {
                    index,
                    id: tool.id.clone(),
                    name: tool.name.clone(),
                    input: tool.input.clone(),
                });
            }
        }
        self.message = Some(Box::new(message));
        Ok(())
    }

    fn on_block_start(&mut self, data: &str) -> Result<(), DecodeError> {
        const KIND: &str = "content_block_start";
        let start: BlockStart = parse(KIND, data)?;
        let expected = self.blocks.len();
        let record = self.record;
        let message = self.started(KIND)?;
        if usize::try_from(start.index).ok() != Some(expected) {
            return Err(ProtocolError::OutOfOrderIndex {
                index: start.index,
                expected: expected as u64,
            }
            .into());
        }
        let announced = record.then(|| Value::Object(start.content_block.clone()));
        let block = ContentBlock::from_object(start.content_block);
        let input = is_tool_like(&block).then(PartialJson::new);
        message.content.push(block);
        self.blocks.push(BlockState {
            sealed: input.is_none(),
            input,
            stopped: false,
            work: 0,
            high_half: None,
        });
        if let Some(block) = announced {
            self.events.push(DecodeEvent::BlockStart {
                index: expected,
                block,
            });
        }
        Ok(())
    }

    fn on_block_stop(&mut self, data: &str) -> Result<(), DecodeError> {
        const KIND: &str = "content_block_stop";
        let stop: IndexOnly = parse(KIND, data)?;
        self.started(KIND)?;
        let i = self.block_index(KIND, stop.index)?;
        self.blocks[i].stopped = true;
        self.flush_half(i);
        self.emit(|| DecodeEvent::BlockStop { index: i });
        self.seal(i, false);
        Ok(())
    }

    /// Ends a block's wait for the low half of a character: the high half it holds stays
    /// U+FFFD in a text or thinking block (and is sent as a delta of its own), and is added as
    /// U+FFFD to a tool input still open.
    fn flush_half(&mut self, i: usize) {
        const LONE: &str = "\u{FFFD}";
        let Some(state) = self.blocks.get_mut(i) else {
            return;
        };
        if state.high_half.take().is_none() {
            return;
        }
        let event = match (
            state.input.as_mut(),
            self.message.as_ref().and_then(|m| m.content.get(i)),
        ) {
            (Some(input), _) => {
                if state.sealed {
                    return;
                }
                input.push(LONE);
                state.work += LONE.len() as u64;
                DecodeEvent::InputJsonDelta {
                    index: i,
                    partial_json: LONE.to_owned(),
                }
            }
            (None, Some(ContentBlock::Text(_))) => DecodeEvent::TextDelta {
                index: i,
                text: LONE.to_owned(),
            },
            (None, Some(ContentBlock::Thinking(_))) => DecodeEvent::ThinkingDelta {
                index: i,
                thinking: LONE.to_owned(),
            },
            (None, _) => return,
        };
        self.emit(|| event);
    }

    /// Parses a tool block's input once and reports the outcome. With `cut_off` (the output
    /// limit was reached) an unparseable input is reported truncated rather than invalid.
    fn seal(&mut self, i: usize, cut_off: bool) {
        self.flush_half(i);
        let Some(state) = self.blocks.get_mut(i) else {
            return;
        };
        if state.sealed {
            return;
        }
        state.sealed = true;
        let Some(input) = state.input.as_mut() else {
            return;
        };
        let parsed = if json_str::is_json_whitespace(input.as_str()) {
            Ok(None)
        } else {
            state.work += input.as_str().len() as u64;
            input.parse_complete().map(Some)
        };
        let fallback_view = match &parsed {
            Err(_) => Some(partial_view(input).unwrap_or_else(|| Value::Object(Map::new()))),
            Ok(_) => None,
        };
        let raw_text = input.as_str().to_owned();
        let Some(block) = self.message.as_mut().and_then(|m| m.content.get_mut(i)) else {
            return;
        };
        match parsed {
            Ok(value) => {
                if let Some(value) = value {
                    set_input(block, value);
                }
                if let ContentBlock::ToolUse(tool) = block {
                    let event = DecodeEvent::ToolUseReady {
                        index: i,
                        id: tool.id.clone(),
                        name: tool.name.clone(),
                        input: tool.input.clone(),
                    };
                    self.events.push(event);
                }
            }
            Err(error) => {
                if let Some(view) = fallback_view {
                    set_input(block, view);
                }
                // Only a call the client runs is reported: a server tool's call is the
                // server's (a client answer to it would be refused by the API).
                let ContentBlock::ToolUse(tool) = block else {
                    tracing::debug!(index = i, %error, "server tool input not valid JSON");
                    return;
                };
                let (id, name) = (tool.id.clone(), tool.name.clone());
                let event = if cut_off {
                    DecodeEvent::ToolUseTruncated {
                        index: i,
                        id,
                        name,
                        partial_json: raw_text,
                    }
                } else {
                    DecodeEvent::ToolUseInvalid {
                        index: i,
                        id,
                        name,
                        partial_json: raw_text,
                        error: error.to_string(),
                    }
                };
                self.events.push(event);
            }
        }
    }

    fn on_message_delta(&mut self, data: &str) -> Result<(), DecodeError> {
        const KIND: &str = "message_delta";
        let delta: MessageDelta = parse(KIND, data)?;
        let message = self.started(KIND)?;
        for (key, value) in &delta.delta {
            match key.as_str() {
                // A `null` keeps the earlier value here too: a proxy's usage-only
                // `message_delta` after the real one (`"stop_reason": null`) does not erase
                // why the model stopped.
                "stop_reason" | "stop_sequence" if value.is_null() => {}
                "stop_reason" => message.stop_reason = value.as_str().map(str::to_owned),
                "stop_sequence" => message.stop_sequence = value.as_str().map(str::to_owned),
                // A delta does not replace what `message_start` set, and in `extra` the key
                // would be serialized twice (`message_json` would disagree with `message`).
                key if Message::FIELDS.contains(&key) => {}
                // A `null` keeps the earlier value, as in usage (a proxy's `"container": null`
                // does not erase the container `message_start` set).
                key if value.is_null() && message.extra.get(key).is_some_and(|v| !v.is_null()) => {}
                _ => {
                    message.extra.insert(key.clone(), value.clone());
                }
            }
        }
        if let Some(usage) = &delta.usage {
            for (key, value) in usage {
                message.usage.assign_field(key, value);
            }
        }
        if let Some(context_management) = delta.context_management {
            message
                .extra
                .insert("context_management".to_owned(), context_management);
        }
        // The limits, and a streaming classifier's refusal, cut the output wherever it was, an
        // open tool input included.
        let cut_off = matches!(
            message.stop_reason.as_deref(),
            Some("max_tokens" | "model_context_window_exceeded" | "refusal")
        );
        if self.record {
            self.events.push(DecodeEvent::MessageDelta {
                delta: Value::Object(delta.delta),
                usage: delta.usage.map_or(Value::Null, Value::Object),
            });
        }
        if cut_off {
            for i in 0..self.blocks.len() {
                if !self.blocks[i].stopped {
                    self.seal(i, true);
                }
            }
        }
        Ok(())
    }

    fn on_message_stop(&mut self) -> Result<(), DecodeError> {
        self.started("message_stop")?;
        for i in 0..self.blocks.len() {
            self.seal(i, false);
        }
        self.stopped = true;
        self.emit(|| DecodeEvent::MessageStop);
        Ok(())
    }

    fn on_error(&mut self, data: &str) -> DecodeError {
        let raw = data_value(data);
        let error = DecodeError::provider(raw);
        tracing::debug!(%error, "provider error event in stream");
        error
    }

    fn dispatch(&mut self, kind: &str, data: &str) -> Result<(), DecodeError> {
        match kind {
            "content_block_delta" => {
                match fast_string_delta(data).filter(|_| self.text_fast_path) {
                    Some((index, kind, text)) => self.on_string_delta(index, kind, text),
                    None => self.on_delta(data),
                }
            }
            "ping" => {
                self.emit(|| DecodeEvent::Ping);
                Ok(())
            }
            "content_block_start" => self.on_block_start(data),
            "content_block_stop" => self.on_block_stop(data),
            "message_start" => self.on_message_start(data),
            "message_delta" => self.on_message_delta(data),
            "message_stop" => self.on_message_stop(),
            "error" => Err(self.on_error(data)),
            _ => {
                let data = data_value(data);
                tracing::debug!(event_type = kind, "unknown event passed through");
                self.emit(|| DecodeEvent::Unknown {
                    event_type: kind.to_owned(),
                    data,
                });
                Ok(())
            }
        }
    }
}

/// The SDK snapshot's view of a partial tool input.
fn partial_view(input: &PartialJson) -> Option<Value> {
    let mut scratch = input.clone();
    scratch.view(PartialMode::DropIncompleteStrings)
}

fn set_input(block: &mut ContentBlock, value: Value) {
    match block {
        ContentBlock::ToolUse(tool) | ContentBlock::ServerToolUse(tool) => tool.input = value,
        ContentBlock::Other(map) => {
            map.insert("input".to_owned(), value);
        }
        _ => {}
    }
}

/// A `compaction_delta` on a `compaction` block: `content` appends (a summary may come in
/// several deltas; a `null` adds nothing), a non-null `encrypted_content` replaces the earlier
/// one (a later `null` does not erase it).
fn apply_compaction_delta(block: &mut Map<String, Value>, delta: &Value) {
    if let Some(text) = delta.get("content").and_then(Value::as_str) {
        match block.get_mut("content") {
            Some(Value::String(content)) => content.push_str(text),
            _ => {
                block.insert("content".to_owned(), Value::String(text.to_owned()));
            }
        }
    }
    if let Some(encrypted) = delta.get("encrypted_content").filter(|v| !v.is_null()) {
        block.insert("encrypted_content".to_owned(), encrypted.clone());
    }
}

impl EventDecoder for AnthropicDecoder {
    fn push_event(&mut self, event_type: &str, data: &str) -> Result<(), DecodeError> {
        // OpenAI's end marker, which some gateways append to every stream they relay (after
        // `message_stop` here): not an Anthropic event, and no reason to fail a whole answer.
        if is_unnamed(event_type) && is_done_marker(data) {
            return Ok(());
        }
        let result = decode_lone_surrogates_lossily(data, |data, _| match event_type {
            // No `event:` line (some proxies): the JSON `type` names the event.
            kind if is_unnamed(kind) => {
                data_type(event_type, data).and_then(|kind| self.dispatch(&kind, data))
            }
            kind => self.dispatch(kind, data),
        });
        DecodeError::remember(&mut self.failure, result)
    }

    fn drain_events(&mut self, out: &mut Vec<DecodeEvent>) {
        out.append(&mut self.events);
    }

    fn set_record_events(&mut self, record: bool) {
        self.record = record;
    }

    fn message(&self) -> Value {
        self.snapshot()
            .and_then(|m| serde_json::to_value(m).ok())
            .unwrap_or(Value::Null)
    }

    fn message_json(&self) -> String {
        let Some(message) = self.message.as_deref() else {
            return "null".to_owned();
        };
        // A tool input still streaming is patched into a copy (`snapshot`); otherwise the
        // message is serialized where it is, with no copy of its text.
        let open_input = self
            .blocks
            .iter()
            .any(|state| !state.sealed && state.input.is_some());
        let text = if open_input {
            self.snapshot().map(|m| serde_json::to_string(&m))
        } else {
            Some(serde_json::to_string(message))
        };
        text.and_then(Result::ok)
            .unwrap_or_else(|| "null".to_owned())
    }

    fn is_complete(&self) -> bool {
        self.stopped
    }

    fn finish(&mut self) -> Result<Value, DecodeError> {
        match self.finish_error() {
            Some(error) => Err(error),
            None => Ok(self.message()),
        }
    }

    fn finish_json(&mut self) -> Result<String, DecodeError> {
        match self.finish_error() {
            Some(error) => Err(error),
            None => Ok(self.message_json()),
        }
    }
}

impl AnthropicDecoder {
    /// What `finish` fails with, if anything.
    fn finish_error(&self) -> Option<DecodeError> {
        DecodeError::finish_error(
            self.failure.as_ref(),
            self.stopped,
            self.message.is_some(),
            (
                "the stream ended before `message_start`",
                "the stream ended before `message_stop`",
            ),
            || self.message(),
        )
    }
}
