//! OpenAI Responses stream decoding (see [`OpenAiResponsesDecoder`]).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::error::{DecodeError, ProtocolError};
use super::events::DecodeEvent;
use super::json_str;
use super::{EventDecoder, data_type, data_value, decode_lone_surrogates_lossily, is_unnamed};
use crate::json_text::lone_surrogates_replaced;

type Object = Map<String, Value>;

/// OpenAI Responses streaming: `response.*` events.
///
/// Reasoning summary and reasoning text deltas are thinking deltas; a summary part after the
/// first starts with a `"\n\n"` thinking delta (summaries come in sections, which read joined
/// by a blank line).
///
/// The snapshot starts from `response.created`; output items, content parts, text and function
/// call arguments accumulate from the delta events; `*.done` events replace the piece they name
/// with its final value; `response.completed` (or `response.incomplete`) carries the
/// authoritative final response, which replaces the snapshot (when it carries no `output` at
/// all, as the chatgpt.com Codex backend sends it, the streamed items are kept, as openai-python
/// does). A function call is sealed at `response.function_call_arguments.done` (or its
/// `response.output_item.done`, whichever comes first).
///
/// A custom tool call (`custom_tool_call`, whose `input` is free text such as a patch, not
/// JSON) accumulates `response.custom_tool_call_input.delta` into `input` and is sealed at
/// `response.custom_tool_call_input.done` (or its `response.output_item.done`) with the input as
/// a JSON string: it is never parsed, so never invalid; left unfinished by `response.incomplete`
/// (or marked `incomplete`), it is truncated.
///
/// Output indexes are the stream's: an `output_item.added` without an item takes its index but
/// starts nothing, and an index may skip a few (openai-python tolerates both); events for such a
/// hole are an unknown-index error, and the holes are left out of the message. Unknown event
/// types pass through, whatever their data; data starting with `[DONE]` is ignored (the SDK stops
/// reading there on every endpoint).
#[derive(Debug)]
pub struct OpenAiResponsesDecoder {
    snapshot: Option<Object>,
    /// Per output index: the tool call there has been sealed.
    sealed: Vec<bool>,
    /// Whether `output` holds a hole (see [`OpenAiResponsesDecoder`]).
    holes: bool,
    done: bool,
    failure: Option<DecodeError>,
    events: Vec<DecodeEvent>,
    record: bool,
    /// The high halves the last text or refusal delta of a content part (or arguments delta of
    /// a function call) ended with, waiting for the low half the next delta of the same string
    /// starts with (see [`json_str::Halves`]); the string shows each as U+FFFD meanwhile.
    held: Vec<(PartText, u16)>,
}

/// A streamed string a high half may be held for: (output index, content index, which string).
type PartText = (usize, usize, Streamed);

/// Which streamed string of an output item a [`PartText`] is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Streamed {
    /// A content part's `text`.
    Text,
    /// A content part's `refusal`.
    Refusal,
    /// A function call's `arguments` (content index 0).
    Arguments,
    /// A reasoning item's `summary[i].text` (the content index is the summary index).
    Summary,
    /// A reasoning item's `content[i].text` (reasoning text).
    Reasoning,
    /// A custom tool call's `input` (content index 0); its deltas are passed on, not typed.
    CustomInput,
    /// An MCP call's `arguments` (content index 0); its deltas are passed on, not typed.
    McpArguments,
}

impl Streamed {
    /// The string's field in its part or item.
    fn field(self) -> &'static str {
        match self {
            Streamed::Text | Streamed::Summary | Streamed::Reasoning => "text",
            Streamed::Refusal => "refusal",
            Streamed::Arguments | Streamed::McpArguments => "arguments",
            Streamed::CustomInput => "input",
        }
    }
}

impl Default for OpenAiResponsesDecoder {
    fn default() -> Self {
        Self::new()
    }
}

/// `response.function_call_arguments.delta`, borrowed, so that a character cut between two
/// deltas can be joined ([`json_str::Halves`]).
#[derive(Deserialize)]
struct ArgumentsDelta<'a> {
    output_index: usize,
    #[serde(borrow, default)]
    delta: Option<&'a RawValue>,
}

/// `response.reasoning_summary_text.delta` and `response.reasoning_text.delta`, borrowed, so
/// that a character cut between two deltas can be joined ([`json_str::Halves`]).
#[derive(Deserialize)]
struct ReasoningDelta<'a> {
    output_index: usize,
    #[serde(default)]
    summary_index: Option<usize>,
    #[serde(default)]
    content_index: Option<usize>,
    #[serde(borrow)]
    delta: &'a RawValue,
}

/// `response.output_text.delta`, borrowed: the hot path.
#[derive(Deserialize)]
struct TextDelta<'a> {
    output_index: usize,
    #[serde(default)]
    content_index: usize,
    /// Raw: a JavaScript server may cut a character between two deltas ([`json_str::Halves`]).
    #[serde(borrow)]
    delta: &'a RawValue,
}

fn malformed(event_type: &str, detail: &str) -> DecodeError {
    ProtocolError::Malformed {
        event_type: event_type.to_owned(),
        detail: detail.to_owned(),
    }
    .into()
}

/// Indexes at or past this are refused: an output list that long is a corrupt stream, and
/// filling the holes up to it would allocate without bound.
const INDEX_LIMIT: u64 = 1 << 20;

fn index_field(event: &Object, key: &str, event_type: &str) -> Result<usize, DecodeError> {
    let value = event
        .get(key)
        .ok_or_else(|| malformed(event_type, &format!("missing `{key}`")))?;
    // Present but unusable: said as such, not as "missing" (an audit was told `missing
    // `output_index`` of an event that had one, 1048576 or -1).
    let index = value.as_u64().ok_or_else(|| {
        malformed(
            event_type,
            &format!("`{key}` must be a non-negative integer, got {value}"),
        )
    })?;
    usize::try_from(index)
        .ok()
        .filter(|&i| (i as u64) < INDEX_LIMIT)
        .ok_or_else(|| {
            malformed(
                event_type,
                &format!(
                    "`{key}` {index} is out of range (at most {})",
                    INDEX_LIMIT - 1
                ),
            )
        })
}

impl OpenAiResponsesDecoder {
    /// A decoder waiting for `response.created`.
    pub fn new() -> Self {
        Self {
            snapshot: None,
            sealed: Vec::new(),
            holes: false,
            done: false,
            failure: None,
            events: Vec::new(),
            record: true,
            held: Vec::new(),
        }
    }

    fn emit(&mut self, event: impl FnOnce() -> DecodeEvent) {
        if self.record {
            self.events.push(event());
        }
    }

    fn snapshot_mut(&mut self, event_type: &str) -> Result<&mut Object, DecodeError> {
        if self.done {
            return Err(ProtocolError::AfterEnd {
                event_type: event_type.to_owned(),
            }
            .into());
        }
        self.snapshot.as_mut().ok_or_else(|| {
            ProtocolError::BeforeStart {
                event_type: event_type.to_owned(),
            }
            .into()
        })
    }

    fn output_mut(&mut self, event_type: &str) -> Result<&mut Vec<Value>, DecodeError> {
        let snapshot = self.snapshot_mut(event_type)?;
        let output = snapshot
            .entry("output")
            .or_insert_with(|| Value::Array(Vec::new()));
        if !output.is_array() {
            *output = Value::Array(Vec::new());
        }
        match output {
            Value::Array(items) => Ok(items),
            _ => Err(malformed(event_type, "`output` is not a list")),
        }
    }

    fn item_mut(&mut self, event_type: &str, index: usize) -> Result<&mut Object, DecodeError> {
        self.output_mut(event_type)?
            .get_mut(index)
            .and_then(Value::as_object_mut)
            .ok_or_else(|| {
                ProtocolError::UnknownIndex {
                    event_type: event_type.to_owned(),
                    index: index as u64,
                }
                .into()
            })
    }

    fn part_mut(
        &mut self,
        event_type: &str,
        index: usize,
        part: usize,
    ) -> Result<&mut Object, DecodeError> {
        self.item_mut(event_type, index)?
            .get_mut("content")
            .and_then(Value::as_array_mut)
            .and_then(|parts| parts.get_mut(part))
            .and_then(Value::as_object_mut)
            .ok_or_else(|| {
                ProtocolError::UnknownIndex {
                    event_type: event_type.to_owned(),
                    index: part as u64,
                }
                .into()
            })
    }

    /// Entry `at` of a reasoning item's `summary` (`Streamed::Summary`) or `content` list.
    fn reasoning_entry_mut(
        &mut self,
        index: usize,
        at: usize,
        streamed: Streamed,
    ) -> Option<&mut Object> {
        let list = if streamed == Streamed::Summary {
            "summary"
        } else {
            "content"
        };
        self.snapshot
            .as_mut()?
            .get_mut("output")?
            .get_mut(index)?
            .get_mut(list)?
            .get_mut(at)?
            .as_object_mut()
    }

    /// A reasoning summary or reasoning text delta whose entry is there, appended as the text
    /// deltas are (a character cut between two deltas joined) and reported as thinking.
    /// Returns `false`, having changed nothing, otherwise: the event then goes the way of the
    /// other reasoning events ([`on_reasoning`](Self::on_reasoning)).
    fn on_reasoning_delta(&mut self, event_type: &str, data: &str) -> Result<bool, DecodeError> {
        let Ok(delta) = serde_json::from_str::<ReasoningDelta<'_>>(data) else {
            return Ok(false);
        };
        let (streamed, at) = if event_type == "response.reasoning_summary_text.delta" {
            (Streamed::Summary, delta.summary_index)
        } else {
            (Streamed::Reasoning, delta.content_index)
        };
        let Some(at) = at else {
            return Ok(false);
        };
        if self.done
            || self
                .reasoning_entry_mut(delta.output_index, at, streamed)
                .is_none()
        {
            return Ok(false);
        }
        let Ok(piece) = json_str::raw_string_halves(delta.delta) else {
            return Ok(false);
        };
        self.push_streamed(event_type, (delta.output_index, at, streamed), piece)?;
        Ok(true)
    }

    /// A content part's text or refusal delta.
    fn on_text_delta(
        &mut self,
        event_type: &str,
        data: &str,
        streamed: Streamed,
    ) -> Result<(), DecodeError> {
        let delta: TextDelta<'_> =
            serde_json::from_str(data).map_err(|e| DecodeError::json(event_type, e))?;
        let piece = json_str::raw_string_halves(delta.delta)
            .map_err(|e| DecodeError::json(event_type, e))?;
        self.push_streamed(
            event_type,
            (delta.output_index, delta.content_index, streamed),
            piece,
        )
    }

    /// A function call's arguments delta, appended as the text deltas are.
    fn on_arguments_delta(&mut self, event_type: &str, data: &str) -> Result<(), DecodeError> {
        let delta: ArgumentsDelta<'_> =
            serde_json::from_str(data).map_err(|e| DecodeError::json(event_type, e))?;
        let raw = delta
            .delta
            .filter(|raw| raw.get().starts_with('"'))
            .ok_or_else(|| malformed(event_type, "missing `delta`"))?;
        let piece =
            json_str::raw_string_halves(raw).map_err(|e| DecodeError::json(event_type, e))?;
        self.push_streamed(
            event_type,
            (delta.output_index, 0, Streamed::Arguments),
            piece,
        )
    }

    /// `response.custom_tool_call_input.delta` and `response.mcp_call_arguments.delta` for an
    /// item that is there: appended as the text deltas are (a character cut between two deltas
    /// joined), then passed on with `delta` as joined. Returns `false`, having changed nothing,
    /// otherwise: the general path reads the event (and reports what is wrong with it).
    fn on_call_input_delta(&mut self, event_type: &str, data: &str) -> Result<bool, DecodeError> {
        // The usual delta (no lone surrogate escape, no half held) is read once, by the general
        // path: this one would parse it a second time to pass it on.
        let holding = self
            .held
            .iter()
            .any(|(key, _)| matches!(key.2, Streamed::CustomInput | Streamed::McpArguments));
        if !holding && matches!(lone_surrogates_replaced(data), Cow::Borrowed(_)) {
            return Ok(false);
        }
        let Ok(delta) = serde_json::from_str::<ArgumentsDelta<'_>>(data) else {
            return Ok(false);
        };
        let Some(raw) = delta.delta.filter(|raw| raw.get().starts_with('"')) else {
            return Ok(false);
        };
        let index = delta.output_index;
        let item_is_there = self
            .snapshot
            .as_ref()
            .and_then(|s| s.get("output"))
            .and_then(|o| o.get(index))
            .is_some_and(Value::is_object);
        if self.done || !item_is_there {
            return Ok(false);
        }
        let Ok(piece) = json_str::raw_string_halves(raw) else {
            return Ok(false);
        };
        let streamed = if event_type == "response.custom_tool_call_input.delta" {
            Streamed::CustomInput
        } else {
            Streamed::McpArguments
        };
        let added = self.append_streamed(event_type, (index, 0, streamed), piece)?;
        if self.record {
            let mut event = data_value(data);
            if let Some(fields) = event.as_object_mut() {
                fields.insert("delta".to_owned(), Value::String(added));
            }
            self.pass_through(event_type, event);
        }
        Ok(true)
    }

    /// Appends a delta to the streamed string `key`, joining a character cut between this delta
    /// and the previous one (the high half `key` holds), and emits what it adds.
    fn push_streamed(
        &mut self,
        event_type: &str,
        key: PartText,
        piece: json_str::Halves<'_>,
    ) -> Result<(), DecodeError> {
        let added = self.append_streamed(event_type, key, piece)?;
        self.emit_text(key, added);
        Ok(())
    }

    /// Appends a delta to the streamed string `key` as [`push_streamed`](Self::push_streamed)
    /// does, and returns what it adds.
    fn append_streamed(
        &mut self,
        event_type: &str,
        key: PartText,
        piece: json_str::Halves<'_>,
    ) -> Result<String, DecodeError> {
        let at = self.held.iter().position(|(part, _)| *part == key);
        let mut held = at.map(|at| self.held.swap_remove(at).1);
        let (index, part, streamed) = key;
        let object = match streamed {
            Streamed::Arguments | Streamed::CustomInput | Streamed::McpArguments => {
                self.item_mut(event_type, index)?
            }
            Streamed::Text | Streamed::Refusal => self.part_mut(event_type, index, part)?,
            Streamed::Summary | Streamed::Reasoning => self
                .reasoning_entry_mut(index, part, streamed)
                .ok_or_else(|| unknown_index(event_type, part))?,
        };
        let slot = object
            .entry(streamed.field())
            .or_insert_with(|| Value::String(String::new()));
        if !slot.is_string() {
            // A string that is not one takes the delta's, as before.
            *slot = Value::String(String::new());
        }
        let Value::String(text) = slot else {
            return Err(malformed(event_type, "the streamed string is not a string"));
        };
        let added = json_str::push_halves(text, &mut held, piece);
        if let Some(high) = held {
            self.held.push((key, high));
        }
        Ok(added.into_owned())
    }

    /// Emits `text` as a delta of the streamed string `key`.
    fn emit_text(&mut self, key: PartText, text: String) {
        let (index, _, streamed) = key;
        match streamed {
            Streamed::Text => self.emit(|| DecodeEvent::TextDelta { index, text }),
            Streamed::Refusal => self.emit(|| DecodeEvent::RefusalDelta {
                index,
                refusal: text,
            }),
            Streamed::Arguments => self.emit(|| DecodeEvent::InputJsonDelta {
                index,
                partial_json: text,
            }),
            Streamed::Summary | Streamed::Reasoning => self.emit(|| DecodeEvent::ThinkingDelta {
                index,
                thinking: text,
            }),
            // Their deltas pass through as events of their own; the `done` event has the text.
            Streamed::CustomInput | Streamed::McpArguments => {}
        }
    }

    /// Sends the high halves the streamed strings of output `index` still hold (only the text,
    /// refusal or reasoning text of content part `part`, with `Some`) as the U+FFFD their text
    /// already shows.
    fn flush_halves(&mut self, index: usize, part: Option<usize>) {
        let of_part = |key: PartText, p: usize| {
            p == key.1
                && matches!(
                    key.2,
                    Streamed::Text | Streamed::Refusal | Streamed::Reasoning
                )
        };
        self.flush_held(|key| key.0 == index && part.is_none_or(|p| of_part(key, p)));
    }

    /// Sends the high halves of the streamed strings `which` selects as U+FFFD.
    fn flush_held(&mut self, which: impl Fn(PartText) -> bool) {
        let mut at = 0;
        while at < self.held.len() {
            let (key, _) = self.held[at];
            if which(key) {
                self.held.remove(at);
                self.emit_text(key, char::REPLACEMENT_CHARACTER.to_string());
            } else {
                at += 1;
            }
        }
    }

    /// Seals the tool call at stream index `index` of the snapshot, once.
    fn seal(&mut self, index: usize, ending: Ending) {
        if self.sealed.get(index).copied().unwrap_or(false) {
            return;
        }
        let event = self
            .snapshot
            .as_ref()
            .and_then(|s| s.get("output"))
            .and_then(|o| o.get(index))
            .and_then(|item| seal_event(index, item, ending));
        if let Some(event) = event {
            self.mark_sealed(index);
            self.events.push(event);
        }
    }

    fn mark_sealed(&mut self, index: usize) {
        if self.sealed.len() <= index {
            self.sealed.resize(index + 1, false);
        }
        self.sealed[index] = true;
    }

    /// Seals the calls of the final response's `output` not sealed yet, each under its stream
    /// index: the item with the same `id` (or `call_id`) in the snapshot, which sits at the same
    /// position unless the stream had holes.
    fn seal_final(&mut self, output: &[Value], ending: Ending) {
        let streamed: &[Value] = self
            .snapshot
            .as_ref()
            .and_then(|s| s.get("output"))
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice);
        let mut by_identity: Option<std::collections::HashMap<&str, usize>> = None;
        let mut targets = Vec::new();
        for (position, item) in output.iter().enumerate() {
            let Some(identity) = identity_of(item) else {
                targets.push((position, true));
                continue;
            };
            if streamed.get(position).and_then(identity_of) == Some(identity) {
                targets.push((position, true));
                continue;
            }
            let map = by_identity.get_or_insert_with(|| {
                streamed
                    .iter()
                    .enumerate()
                    .filter_map(|(i, item)| identity_of(item).map(|id| (id, i)))
                    .collect()
            });
            // Not streamed at all: it cannot have been sealed; its position names it.
            targets.push(map.get(identity).map_or((position, false), |&i| (i, true)));
        }
        for ((index, streamed), item) in targets.into_iter().zip(output) {
            if streamed && self.sealed.get(index).copied().unwrap_or(false) {
                continue;
            }
            if let Some(event) = seal_event(index, item, ending) {
                if streamed {
                    self.mark_sealed(index);
                }
                self.events.push(event);
            }
        }
    }

    /// The snapshot as the message: holes left out.
    fn snapshot_value(&self) -> Option<Object> {
        let mut snapshot = self.snapshot.clone()?;
        if self.holes
            && let Some(Value::Array(output)) = snapshot.get_mut("output")
        {
            output.retain(|item| !item.is_null());
        }
        Some(snapshot)
    }

    fn on_event(&mut self, event_type: &str, data: &str) -> Result<(), DecodeError> {
        match event_type {
            "response.output_text.delta" => {
                return self.on_text_delta(event_type, data, Streamed::Text);
            }
            "response.refusal.delta" => {
                return self.on_text_delta(event_type, data, Streamed::Refusal);
            }
            "response.function_call_arguments.delta" => {
                return self.on_arguments_delta(event_type, data);
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta"
                if self.on_reasoning_delta(event_type, data)? =>
            {
                return Ok(());
            }
            "response.custom_tool_call_input.delta" | "response.mcp_call_arguments.delta"
                if self.on_call_input_delta(event_type, data)? =>
            {
                return Ok(());
            }
            "error" => {
                // Not JSON, it is still the provider's error.
                let raw = data_value(data);
                return Err(self.fail(raw));
            }
            _ => {}
        }
        let known = handles(event_type);
        let value: Value = match serde_json::from_str(data) {
            Ok(value) => value,
            Err(e) if known => return Err(DecodeError::json(event_type, e)),
            Err(_) => data_value(data),
        };
        let mut event = match value {
            Value::Object(event) => event,
            _ if known => return Err(malformed(event_type, "the event is not an object")),
            data => {
                self.pass_through(event_type, data);
                return Ok(());
            }
        };
        match event_type {
            "response.created" => {
                if self.snapshot.is_some() {
                    return Err(ProtocolError::DuplicateStart {
                        event_type: event_type.to_owned(),
                    }
                    .into());
                }
                let Some(Value::Object(response)) = event.remove("response") else {
                    return Err(malformed(event_type, "missing `response`"));
                };
                let message = self.record.then(|| Value::Object(response.clone()));
                self.snapshot = Some(response);
                if let Some(message) = message {
                    self.events.push(DecodeEvent::MessageStart { message });
                }
            }
            "response.in_progress" | "response.queued" => {
                let snapshot = self.snapshot_mut(event_type)?;
                if let Some(Value::Object(response)) = event.remove("response") {
                    for (key, value) in response {
                        if key != "output" {
                            snapshot.insert(key, value);
                        }
                    }
                }
            }
            "response.output_item.added" => {
                let index = index_field(&event, "output_index", event_type)?;
                let item = event.remove("item").filter(|item| !item.is_null());
                let output = self.output_mut(event_type)?;
                if index > output.len() + MAX_HOLES {
                    return Err(ProtocolError::OutOfOrderIndex {
                        index: index as u64,
                        expected: output.len() as u64,
                    }
                    .into());
                }
                let holes = index > output.len() || item.is_none();
                while output.len() < index {
                    output.push(Value::Null);
                }
                let block = item.unwrap_or(Value::Null);
                let announced = !block.is_null();
                if index == output.len() {
                    output.push(block.clone());
                } else {
                    output[index] = block.clone();
                }
                self.holes |= holes;
                if announced {
                    self.emit(|| DecodeEvent::BlockStart { index, block });
                }
            }
            "response.output_item.done" => {
                let index = index_field(&event, "output_index", event_type)?;
                let slot = self
                    .output_mut(event_type)?
                    .get_mut(index)
                    .ok_or_else(|| unknown_index(event_type, index))?;
                // Without an item it finalizes nothing: the streamed one stands.
                if let Some(item) = event.remove("item").filter(|item| !item.is_null()) {
                    *slot = item;
                }
                self.flush_halves(index, None);
                self.emit(|| DecodeEvent::BlockStop { index });
                self.seal(index, Ending::Complete);
            }
            "response.content_part.added" | "response.content_part.done" => {
                let index = index_field(&event, "output_index", event_type)?;
                let part_index = index_field(&event, "content_index", event_type)?;
                let part = event.remove("part").unwrap_or(Value::Null);
                let item = self.item_mut(event_type, index)?;
                let parts = item
                    .entry("content")
                    .or_insert_with(|| Value::Array(Vec::new()));
                let Value::Array(parts) = parts else {
                    return Err(malformed(event_type, "`content` is not a list"));
                };
                if part_index < parts.len() {
                    parts[part_index] = part;
                } else if part_index == parts.len() {
                    parts.push(part);
                } else {
                    return Err(unknown_index(event_type, part_index));
                }
            }
            "response.output_text.done" | "response.refusal.done" => {
                let field = if event_type == "response.output_text.done" {
                    "text"
                } else {
                    "refusal"
                };
                let index = index_field(&event, "output_index", event_type)?;
                let part_index = index_field(&event, "content_index", event_type)?;
                self.flush_halves(index, Some(part_index));
                if let Some(text) = event.remove(field) {
                    self.part_mut(event_type, index, part_index)?
                        .insert(field.to_owned(), text);
                }
            }
            "response.output_text.annotation.added" => {
                let index = index_field(&event, "output_index", event_type)?;
                let part_index = index_field(&event, "content_index", event_type)?;
                let annotation = event.remove("annotation").unwrap_or(Value::Null);
                let at = event
                    .get("annotation_index")
                    .and_then(Value::as_u64)
                    .and_then(|i| usize::try_from(i).ok());
                let part = self.part_mut(event_type, index, part_index)?;
                match part
                    .entry("annotations")
                    .or_insert_with(|| Value::Array(Vec::new()))
                {
                    // An index already filled is the same annotation sent again (a replayed
                    // stream): replaced, as the SDK does, not duplicated.
                    Value::Array(list) => match at.and_then(|i| list.get_mut(i)) {
                        Some(slot) => *slot = annotation,
                        None => list.push(annotation),
                    },
                    other => *other = Value::Array(vec![annotation]),
                }
            }
            "response.function_call_arguments.done" => {
                let index = index_field(&event, "output_index", event_type)?;
                self.flush_halves(index, None);
                if let Some(arguments) = event.remove("arguments") {
                    self.item_mut(event_type, index)?
                        .insert("arguments".to_owned(), arguments);
                }
                self.seal(index, Ending::Complete);
            }
            "response.custom_tool_call_input.delta" | "response.mcp_call_arguments.delta" => {
                let index = index_field(&event, "output_index", event_type)?;
                let Some(fragment) = event.get("delta").and_then(Value::as_str) else {
                    return Err(malformed(event_type, "missing `delta`"));
                };
                let key = text_key(event_type);
                let item = self.item_mut(event_type, index)?;
                match item.get_mut(key) {
                    Some(Value::String(text)) => text.push_str(fragment),
                    _ => {
                        item.insert(key.to_owned(), Value::String(fragment.to_owned()));
                    }
                }
                self.pass_through(event_type, Value::Object(event));
            }
            "response.custom_tool_call_input.done" | "response.mcp_call_arguments.done" => {
                let index = index_field(&event, "output_index", event_type)?;
                // The text is final: a half it still holds stays the U+FFFD it shows.
                self.flush_held(|key| {
                    key.0 == index
                        && matches!(key.2, Streamed::CustomInput | Streamed::McpArguments)
                });
                let key = text_key(event_type);
                if let Some(text) = event.get(key).filter(|t| t.is_string()) {
                    let text = text.clone();
                    self.item_mut(event_type, index)?
                        .insert(key.to_owned(), text);
                }
                self.seal(index, Ending::Complete);
                self.pass_through(event_type, Value::Object(event));
            }
            "response.completed" | "response.incomplete" => {
                self.snapshot_mut(event_type)?;
                let Some(Value::Object(mut response)) = event.remove("response") else {
                    return Err(malformed(event_type, "missing `response`"));
                };
                let reason = response
                    .get("incomplete_details")
                    .and_then(|d| d.get("reason"))
                    .and_then(Value::as_str);
                let ending = match (event_type, reason) {
                    (_, Some("max_output_tokens")) => Ending::CutOff,
                    ("response.incomplete", _) => Ending::Incomplete,
                    _ => Ending::Complete,
                };
                match response.get("output") {
                    Some(Value::Array(output)) => self.seal_final(output, ending),
                    None | Some(Value::Null) => {
                        let count = self.output_mut(event_type)?.len();
                        for index in 0..count {
                            self.seal(index, ending);
                        }
                        self.keep_streamed_output(&mut response);
                    }
                    Some(_) => {}
                }
                let status = response.get("status").cloned().unwrap_or(Value::Null);
                let usage = response.get("usage").cloned().unwrap_or(Value::Null);
                // Why an incomplete response stopped (`max_output_tokens`, `content_filter`).
                let details = response
                    .get("incomplete_details")
                    .filter(|d| !d.is_null())
                    .cloned();
                self.snapshot = Some(response);
                self.emit(|| {
                    let mut delta = serde_json::json!({ "status": status });
                    if let Some(details) = details {
                        delta["incomplete_details"] = details;
                    }
                    DecodeEvent::MessageDelta { delta, usage }
                });
                self.done = true;
                self.emit(|| DecodeEvent::MessageStop);
            }
            "response.failed" => {
                let response = event.remove("response").unwrap_or(Value::Null);
                // `error: null` names no error: the response itself is the payload then.
                let error = response
                    .get("error")
                    .filter(|e| e.is_object())
                    .cloned()
                    .unwrap_or_else(|| response.clone());
                if let Value::Object(mut response) = response {
                    if matches!(response.get("output"), None | Some(Value::Null)) {
                        self.keep_streamed_output(&mut response);
                    }
                    self.snapshot = Some(response);
                }
                return Err(self.fail(error));
            }
            "response.reasoning_summary_part.added"
            | "response.reasoning_summary_part.done"
            | "response.reasoning_summary_text.delta"
            | "response.reasoning_summary_text.done"
            | "response.reasoning_text.delta"
            | "response.reasoning_text.done" => {
                if let Some(key) = reasoning_text_done(event_type, &event) {
                    // The text is final: a half it still holds stays U+FFFD.
                    self.flush_held(|held| held == key);
                }
                if !self.on_reasoning(event_type, &mut event) {
                    self.pass_through(event_type, Value::Object(event));
                }
            }
            _ => {
                self.on_hosted_call(event_type, &event);
                self.pass_through(event_type, Value::Object(event));
            }
        }
        Ok(())
    }

    /// Reasoning summary parts and text (`summary[summary_index]`) and reasoning text
    /// (`content[content_index]`), accumulated as openai-node does; text deltas are reported as
    /// thinking. Returns `false`, having changed nothing, when the event names nothing there:
    /// these events passed through before they were read, and a stream that sends them for an
    /// item it never announced still decodes.
    fn on_reasoning(&mut self, event_type: &str, event: &mut Object) -> bool {
        let (list, at_key) = if event_type.starts_with("response.reasoning_summary_") {
            ("summary", "summary_index")
        } else {
            ("content", "content_index")
        };
        let index = index_field(event, "output_index", event_type).ok();
        let at = index_field(event, at_key, event_type).ok();
        let (Some(index), Some(at)) = (index, at) else {
            return false;
        };
        if self.done {
            return false;
        }
        let Some(item) = self
            .snapshot
            .as_mut()
            .and_then(|s| s.get_mut("output"))
            .and_then(|o| o.get_mut(index))
            .and_then(Value::as_object_mut)
        else {
            return false;
        };
        if event_type.starts_with("response.reasoning_summary_part.") {
            let parts = item.entry(list).or_insert_with(|| Value::Array(Vec::new()));
            let Value::Array(parts) = parts else {
                return false;
            };
            if at > parts.len() {
                return false;
            }
            let Some(part) = event.remove("part") else {
                return false;
            };
            let opened = at == parts.len();
            if opened {
                parts.push(part);
            } else {
                parts[at] = part;
            }
            // A summary's parts are sections: the streamed thinking separates them with a blank
            // line, as the parts read joined.
            if opened && at > 0 && list == "summary" {
                self.emit(|| DecodeEvent::ThinkingDelta {
                    index,
                    thinking: "\n\n".to_owned(),
                });
            }
            return true;
        }
        let Some(entry) = item
            .get_mut(list)
            .and_then(|l| l.get_mut(at))
            .and_then(Value::as_object_mut)
        else {
            return false;
        };
        if event_type.ends_with(".done") {
            if let Some(text) = event.get("text").filter(|t| t.is_string()) {
                entry.insert("text".to_owned(), text.clone());
            }
            return true;
        }
        let Some(delta) = event.get("delta").and_then(Value::as_str) else {
            return false;
        };
        match entry.get_mut("text") {
            Some(Value::String(text)) => text.push_str(delta),
            _ => {
                entry.insert("text".to_owned(), Value::String(delta.to_owned()));
            }
        }
        self.emit(|| DecodeEvent::ThinkingDelta {
            index,
            thinking: delta.to_owned(),
        });
        true
    }

    /// A hosted tool call's progress (`response.web_search_call.searching`, ...) sets its item's
    /// `status`, and a code interpreter's code accumulates into `code`, as openai-node keeps them
    /// (`output_item.done` and the final response have the final values); the events still pass
    /// through. An event naming no such item changes nothing.
    fn on_hosted_call(&mut self, event_type: &str, event: &Object) {
        let Some((kind, what)) = event_type
            .strip_prefix("response.")
            .and_then(|rest| rest.split_once('.'))
        else {
            return;
        };
        let (item_type, status) = match (kind, what) {
            (
                "web_search_call"
                | "file_search_call"
                | "code_interpreter_call"
                | "image_generation_call"
                | "mcp_call",
                "in_progress" | "searching" | "interpreting" | "generating" | "completed"
                | "failed",
            ) => (kind, Some(what)),
            ("code_interpreter_call_code", "delta" | "done") => ("code_interpreter_call", None),
            _ => return,
        };
        let index = event
            .get("output_index")
            .and_then(Value::as_u64)
            .and_then(|i| usize::try_from(i).ok());
        let item = index.and_then(|index| {
            self.snapshot
                .as_mut()
                .filter(|_| !self.done)?
                .get_mut("output")?
                .get_mut(index)?
                .as_object_mut()
        });
        let Some(item) = item.filter(|i| i.get("type").and_then(Value::as_str) == Some(item_type))
        else {
            return;
        };
        if let Some(status) = status {
            item.insert("status".to_owned(), Value::String(status.to_owned()));
        } else if what == "done" {
            if let Some(code) = event.get("code").filter(|c| c.is_string()) {
                item.insert("code".to_owned(), code.clone());
            }
        } else if let Some(delta) = event.get("delta").and_then(Value::as_str) {
            match item.get_mut("code") {
                Some(Value::String(code)) => code.push_str(delta),
                _ => {
                    item.insert("code".to_owned(), Value::String(delta.to_owned()));
                }
            }
        }
    }

    fn pass_through(&mut self, event_type: &str, data: Value) {
        tracing::debug!(event_type, "event passed through");
        self.emit(|| DecodeEvent::Unknown {
            event_type: event_type.to_owned(),
            data,
        });
    }

    /// Gives `response` (a final response without `output`) the streamed items, holes left out:
    /// what openai-python recovers from the `output_item.done` events, which replaced them.
    fn keep_streamed_output(&mut self, response: &mut Object) {
        let mut output = match self.snapshot.as_mut().and_then(|s| s.remove("output")) {
            Some(Value::Array(output)) => output,
            _ => Vec::new(),
        };
        output.retain(|item| !item.is_null());
        response.insert("output".to_owned(), Value::Array(output));
    }

    fn fail(&mut self, raw: Value) -> DecodeError {
        let error = DecodeError::provider(raw);
        tracing::debug!(%error, "provider error in stream");
        error
    }
}

/// The most output indexes one `output_item.added` may skip (each costs a slot).
const MAX_HOLES: usize = 1024;

/// The event types [`OpenAiResponsesDecoder`] requires to be well-formed; the others pass
/// through, whatever their data (the reasoning events are read when they name a part there).
fn handles(event_type: &str) -> bool {
    matches!(
        event_type,
        "response.created"
            | "response.in_progress"
            | "response.queued"
            | "response.output_item.added"
            | "response.output_item.done"
            | "response.content_part.added"
            | "response.content_part.done"
            | "response.output_text.delta"
            | "response.output_text.done"
            | "response.output_text.annotation.added"
            | "response.refusal.delta"
            | "response.refusal.done"
            | "response.function_call_arguments.delta"
            | "response.function_call_arguments.done"
            | "response.custom_tool_call_input.delta"
            | "response.custom_tool_call_input.done"
            | "response.mcp_call_arguments.delta"
            | "response.mcp_call_arguments.done"
            | "response.completed"
            | "response.incomplete"
            | "response.failed"
    )
}

/// The item field a `*.delta` / `*.done` text event of a call writes.
fn text_key(event_type: &str) -> &'static str {
    if event_type.starts_with("response.custom_tool_call_input.") {
        "input"
    } else {
        "arguments"
    }
}

/// The streamed string a `response.reasoning_summary_text.done` or
/// `response.reasoning_text.done` event ends.
fn reasoning_text_done(event_type: &str, event: &Object) -> Option<PartText> {
    let (streamed, at_key) = match event_type {
        "response.reasoning_summary_text.done" => (Streamed::Summary, "summary_index"),
        "response.reasoning_text.done" => (Streamed::Reasoning, "content_index"),
        _ => return None,
    };
    let index = index_field(event, "output_index", event_type).ok()?;
    let at = index_field(event, at_key, event_type).ok()?;
    Some((index, at, streamed))
}

fn unknown_index(event_type: &str, index: usize) -> DecodeError {
    ProtocolError::UnknownIndex {
        event_type: event_type.to_owned(),
        index: index as u64,
    }
    .into()
}

/// An output item's identity: its `id`, else its `call_id`.
fn identity_of(item: &Value) -> Option<&str> {
    ["id", "call_id"].into_iter().find_map(|key| {
        item.get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    })
}

/// How the response ended for a call sealed without its own `done` event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// Completed (or the call's own `done` event sealed it).
    Complete,
    /// `response.incomplete` for another reason (a content filter).
    Incomplete,
    /// `response.incomplete` because of `max_output_tokens`.
    CutOff,
}

/// The event sealing `item` if it is a tool call the host runs (`function_call`,
/// `custom_tool_call`), given how the response ended.
fn seal_event(index: usize, item: &Value, ending: Ending) -> Option<DecodeEvent> {
    let cut_off = ending == Ending::CutOff;
    let field = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    let (id, name) = (field("call_id"), field("name"));
    match item.get("type").and_then(Value::as_str)? {
        "function_call" => {
            let arguments = field("arguments");
            let parsed = if json_str::is_json_whitespace(&arguments) {
                Ok(Value::Object(Map::new()))
            } else {
                serde_json::from_str::<Value>(&arguments)
            };
            Some(match parsed {
                Ok(input) => DecodeEvent::ToolUseReady {
                    index,
                    id,
                    name,
                    input,
                },
                Err(_) if cut_off => DecodeEvent::ToolUseTruncated {
                    index,
                    id,
                    name,
                    partial_json: arguments,
                },
                Err(error) => DecodeEvent::ToolUseInvalid {
                    index,
                    id,
                    name,
                    partial_json: arguments,
                    error: error.to_string(),
                },
            })
        }
        // Free text, not JSON: there is nothing to parse, and no way to tell a cut-off input
        // from a complete one but the response (or the item) saying it is incomplete: such a
        // call must not run, whatever cut it.
        "custom_tool_call" => {
            let input = field("input");
            let unfinished = ending != Ending::Complete
                || item.get("status").and_then(Value::as_str) == Some("incomplete");
            Some(if unfinished {
                DecodeEvent::ToolUseTruncated {
                    index,
                    id,
                    name,
                    partial_json: input,
                }
            } else {
                DecodeEvent::ToolUseReady {
                    index,
                    id,
                    name,
                    input: Value::String(input),
                }
            })
        }
        _ => None,
    }
}

impl EventDecoder for OpenAiResponsesDecoder {
    fn push_event(&mut self, event_type: &str, data: &str) -> Result<(), DecodeError> {
        if data.starts_with("[DONE]") {
            return Ok(());
        }
        let result = decode_lone_surrogates_lossily(data, |data, _| match event_type {
            kind if is_unnamed(kind) => {
                data_type(event_type, data).and_then(|kind| self.on_event(&kind, data))
            }
            kind => self.on_event(kind, data),
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
        self.snapshot_value().map_or(Value::Null, Value::Object)
    }

    fn message_json(&self) -> String {
        if self.holes {
            return serde_json::to_string(&self.snapshot_value())
                .unwrap_or_else(|_| "null".to_owned());
        }
        // The snapshot serialized where it is (`None` is `null`), not copied into a `Value`.
        serde_json::to_string(&self.snapshot).unwrap_or_else(|_| "null".to_owned())
    }

    fn is_complete(&self) -> bool {
        self.done
    }

    fn finish(&mut self) -> Result<Value, DecodeError> {
        DecodeError::finish_result(
            self.failure.as_ref(),
            self.done,
            self.snapshot.is_some(),
            (
                "the stream ended before `response.created`",
                "the stream ended before `response.completed`",
            ),
            || self.message(),
        )
    }
}
