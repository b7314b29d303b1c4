//! What the two OpenAI translations ([`super::openai`] for Chat Completions,
//! [`super::responses`] for the Responses API) share: reading Anthropic blocks into what an
//! OpenAI message can hold, the tool results of a user message, recorded tool calls, usage, and
//! wrapping a model stream in a translator. Each API has its own part shapes
//! ([`PartShapes`]); what goes into them is decided once, here.

use std::collections::VecDeque;

use futures_util::StreamExt;
use serde_json::{Map, Value, json};

use super::model::{ModelError, ModelEvent, ModelStream};
use crate::decode::{DecodeEvent, SealedCallRef};

/// Request fields each translation handles itself, or that have no OpenAI meaning (dropped);
/// the others (`temperature`, `seed`, `reasoning`, ...) pass through.
pub(super) const NOT_PASSED_THROUGH: &[&str] = &[
    "model",
    "system",
    "messages",
    "tools",
    "tool_choice",
    "max_tokens",
    "stop_sequences",
    "stream",
    "metadata",
    "thinking",
    "top_k",
    "container",
    "mcp_servers",
    "betas",
    "stream_options",
    "cache_control",
    "context_management",
];

pub(super) fn block_type(block: &Value) -> &str {
    block.get("type").and_then(Value::as_str).unwrap_or("")
}

/// The text of a string or of the text blocks of a block list, blocks separated by a blank line.
pub(super) fn joined_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| block_type(b) == "text")
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n\n"),
        _ => String::new(),
    }
}

/// The signature of a thinking block that carries one (Anthropic's, or a Responses reasoning
/// item's encrypted content); `None` for unsigned reasoning (Chat Completions servers').
pub(super) fn signature(block: &Value) -> Option<&str> {
    block
        .get("signature")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// The arguments of a call as an input object (`{}` when empty or not valid JSON: the stream
/// reported the call as invalid or truncated, and it is not run).
pub(super) fn parse_arguments(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return json!({});
    }
    serde_json::from_str(arguments).unwrap_or_else(|_| json!({}))
}

/// The URL of an image block: a data URL for base64 data, else its URL (`None` for a Files API
/// image, which neither OpenAI API can see).
fn image_url(block: &Value) -> Option<String> {
    let source = block.get("source")?;
    match source.get("type").and_then(Value::as_str) {
        Some("base64") => Some(format!(
            "data:{};base64,{}",
            source.get("media_type")?.as_str()?,
            source.get("data")?.as_str()?
        )),
        Some("url") => Some(source.get("url")?.as_str()?.to_owned()),
        _ => None,
    }
}

/// The text of a document whose source is text (`"type": "text"`) or content blocks
/// (`"type": "content"`), `None` for another source.
fn document_text(block: &Value) -> Option<String> {
    let source = block.get("source")?;
    match source.get("type").and_then(Value::as_str) {
        Some("text") => source.get("data")?.as_str().map(str::to_owned),
        Some("content") => Some(joined_text(source.get("content")?)),
        _ => None,
    }
}

/// A base64 PDF document's file name (its title, else `document.pdf`) and data URL.
fn pdf_file(block: &Value) -> Option<(String, String)> {
    let source = block.get("source")?;
    let media = source.get("media_type")?.as_str()?;
    if source.get("type").and_then(Value::as_str) != Some("base64") || media != "application/pdf" {
        return None;
    }
    let data = source.get("data")?.as_str()?;
    let filename = block
        .get("title")
        .and_then(Value::as_str)
        .filter(|title| !title.trim().is_empty())
        .map_or_else(
            || "document.pdf".to_owned(),
            |title| {
                if title.to_ascii_lowercase().ends_with(".pdf") {
                    title.to_owned()
                } else {
                    format!("{title}.pdf")
                }
            },
        );
    Some((filename, format!("data:{media};base64,{data}")))
}

/// The note standing for a block a message cannot hold, so the model knows something was there
/// (and a message holding only that block is not sent empty).
fn left_out_note(block: &Value, holds: &str) -> String {
    let kind = block_type(block);
    let source = block.get("source");
    let what = source
        .and_then(|s| s.get("media_type"))
        .and_then(Value::as_str)
        .or_else(|| source.and_then(|s| s.get("url")).and_then(Value::as_str))
        .map(|what| format!(" ({what})"))
        .unwrap_or_default();
    let article = if kind.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("[{article} {kind} block{what} was left out: this endpoint takes {holds} only]")
}

/// The text of a search result (`search_result`: its title and source, then its text blocks).
fn search_result_text(block: &Value) -> Option<String> {
    let text = joined_text(block.get("content")?);
    let title = block.get("title").and_then(Value::as_str).unwrap_or("");
    let source = block.get("source").and_then(Value::as_str).unwrap_or("");
    let heading = match (title.is_empty(), source.is_empty()) {
        (false, false) => format!("{title} ({source})"),
        (false, true) => title.to_owned(),
        (true, false) => source.to_owned(),
        (true, true) => return Some(text),
    };
    Some(format!("{heading}\n\n{text}"))
}

/// The text standing for a block that is neither text nor an image: a text document's or a
/// search result's text, else a note saying it was left out (the endpoint takes `holds`).
fn other_block_text(block: &Value, holds: &str) -> String {
    match block_type(block) {
        "search_result" => search_result_text(block),
        _ => document_text(block),
    }
    .unwrap_or_else(|| left_out_note(block, holds))
}

/// The text of a tool result's blocks for a text-only tool output: text blocks, and text
/// documents and search results, as their text; any other block but an image it can send
/// (which follows in the user message) as a note saying what was left out, so the model does
/// not read an empty result.
fn tool_result_text(blocks: &[Value]) -> String {
    let parts: Vec<String> = blocks
        .iter()
        .filter_map(|block| match block_type(block) {
            "text" => block.get("text").and_then(Value::as_str).map(str::to_owned),
            // It follows in the user message.
            "image" if image_url(block).is_some() => None,
            _ => Some(other_block_text(block, "text results")),
        })
        .collect();
    parts.join("\n\n")
}

/// The text of a tool output for a result in error: neither API has an error flag there, so
/// the text says it (unless it already begins so), or the model reads a failure as a success.
fn error_text(text: String) -> String {
    let says_so = text
        .get(..5)
        .is_some_and(|start| start.eq_ignore_ascii_case("error"));
    if says_so {
        text
    } else {
        format!("Error: {text}")
    }
}

/// How one API writes the parts of a user message and a tool's output.
pub(super) struct PartShapes {
    /// A text part.
    pub text: fn(&str) -> Value,
    /// An image part from its URL (a data URL for base64 data).
    pub image: fn(String) -> Value,
    /// A PDF part from its file name and data URL.
    pub file: fn(String, String) -> Value,
    /// A tool's output from its call id and text.
    pub tool_output: fn(Value, String) -> Value,
    /// What the endpoint's user messages hold, for the note standing for a block they cannot.
    pub holds: &'static str,
}

impl PartShapes {
    /// A non-tool user block as a content part: text, images (by URL or base64), PDF documents,
    /// text documents and search results as their text, anything else as a note saying it was
    /// left out (never dropped without a trace). `None` for a text block without text.
    pub(super) fn user_part(&self, block: &Value) -> Option<Value> {
        let part = match block_type(block) {
            "text" => return Some((self.text)(block.get("text")?.as_str()?)),
            "image" => image_url(block).map(self.image),
            "document" => pdf_file(block).map(|(name, data)| (self.file)(name, data)),
            _ => None,
        };
        part.or_else(|| Some((self.text)(&other_block_text(block, self.holds))))
    }

    /// A user message's blocks: its tool results as tool outputs (in order, so they follow the
    /// calls), and the parts of the user message that follows them: the other blocks, then the
    /// images the tools returned (a tool output holds text only), each labelled with its call.
    pub(super) fn user_side(&self, blocks: &[Value]) -> (Vec<Value>, Vec<Value>) {
        let mut outputs = Vec::new();
        let mut parts = Vec::new();
        for block in blocks {
            if block_type(block) != "tool_result" {
                parts.extend(self.user_part(block));
                continue;
            }
            let id = block.get("tool_use_id").cloned().unwrap_or(Value::Null);
            let (text, images) = match block.get("content") {
                Some(Value::Array(inner)) => {
                    let images: Vec<String> = inner
                        .iter()
                        .filter(|b| block_type(b) == "image")
                        .filter_map(image_url)
                        .collect();
                    (tool_result_text(inner), images)
                }
                Some(other) => (joined_text(other), Vec::new()),
                None => (String::new(), Vec::new()),
            };
            let text = if text.is_empty() && !images.is_empty() {
                "(the result is the image in the next message)".to_owned()
            } else {
                text
            };
            if !images.is_empty() {
                let label = format!(
                    "Image returned by tool call {}:",
                    id.as_str().unwrap_or_default()
                );
                parts.push((self.text)(&label));
                parts.extend(images.into_iter().map(self.image));
            }
            let text = if block.get("is_error").and_then(Value::as_bool) == Some(true) {
                error_text(text)
            } else {
                text
            };
            outputs.push((self.tool_output)(id, text));
        }
        (outputs, parts)
    }
}

/// A custom tool's name, description and input schema, the parts both APIs' function tools
/// share (`None` for a server tool: a `type` other than `custom` and no `input_schema`).
pub(super) fn function_fields(tool: &Value) -> Option<Map<String, Value>> {
    let name = tool.get("name")?.as_str()?;
    let kind = tool.get("type").and_then(Value::as_str);
    let schema = tool.get("input_schema");
    if schema.is_none() && kind.is_some_and(|k| k != "custom") {
        return None;
    }
    let mut fields = Map::new();
    fields.insert("name".to_owned(), Value::String(name.to_owned()));
    if let Some(description) = tool.get("description").filter(|d| d.is_string()) {
        fields.insert("description".to_owned(), description.clone());
    }
    fields.insert(
        "parameters".to_owned(),
        schema
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
    );
    Some(fields)
}

/// Anthropic-shaped usage from an OpenAI usage object (`null` without its `input` count):
/// `input` counts the cached tokens (`details.cached_tokens`) too, and Anthropic's
/// `input_tokens` does not.
pub(super) fn usage_from(usage: &Value, input: &str, details: &str, output: &str) -> Value {
    let Some(input) = usage.get(input).and_then(Value::as_u64) else {
        return Value::Null;
    };
    let count = |value: Option<&Value>| value.and_then(Value::as_u64).unwrap_or(0);
    let cached = count(usage.get(details).and_then(|d| d.get("cached_tokens"))).min(input);
    json!({
        "input_tokens": input - cached,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached,
        "output_tokens": count(usage.get(output)),
    })
}

/// A tool call as its seal reported it.
#[derive(Debug, Clone)]
pub(super) struct SealedCall {
    /// Its block.
    pub index: usize,
    pub id: String,
    pub name: String,
    /// The parsed input, when it was reported ready.
    pub input: Option<Value>,
}

impl SealedCall {
    /// The call a seal event reported, in block `index` of the translated message.
    pub(super) fn at(index: usize, call: SealedCallRef<'_>) -> Self {
        Self {
            index,
            id: call.id.to_owned(),
            name: call.name.to_owned(),
            input: call.input.cloned(),
        }
    }
}

/// Writes each sealed call into its block of `message`: what runs (or is answered) is what the
/// message records, whatever a server sent after the seal.
pub(super) fn record_sealed(message: &mut Value, sealed: &[SealedCall]) {
    let Some(blocks) = message.get_mut("content").and_then(Value::as_array_mut) else {
        return;
    };
    for call in sealed {
        if let Some(block) = blocks.get_mut(call.index)
            && block_type(block) == "tool_use"
        {
            block["id"] = Value::String(call.id.clone());
            block["name"] = Value::String(call.name.clone());
            if let Some(input) = &call.input {
                block["input"] = input.clone();
            }
        }
    }
}

/// The calls of a completed `message` that stopped for `tool_use` and that no seal reported (a
/// server that ended without sealing them, or that sent them only in its final message), as
/// ready calls, so that each runs and is answered. By block index, not id: a server may repeat
/// an id or leave it empty.
pub(super) fn unsealed_calls(message: &Value, sealed: &[SealedCall]) -> Vec<DecodeEvent> {
    if message.get("stop_reason").and_then(Value::as_str) != Some("tool_use") {
        return Vec::new();
    }
    let blocks = message.get("content").and_then(Value::as_array);
    blocks
        .into_iter()
        .flatten()
        .enumerate()
        .filter(|(index, block)| {
            block_type(block) == "tool_use" && !sealed.iter().any(|call| call.index == *index)
        })
        .map(|(index, block)| DecodeEvent::ToolUseReady {
            index,
            id: block["id"].as_str().unwrap_or_default().to_owned(),
            name: block["name"].as_str().unwrap_or_default().to_owned(),
            input: block["input"].clone(),
        })
        .collect()
}

/// Translates one API's model events into the loop's (Anthropic-shaped) ones: each translator
/// says how a decoded event and a final message translate; the dispatch over model events is
/// shared ([`TranslateEvents::dispatch`]).
pub(super) trait TranslateEvents: Send + 'static {
    /// Translates one decoded event into `out`.
    fn translate_decoded(&mut self, event: DecodeEvent, out: &mut Vec<DecodeEvent>);

    /// A final (or partial) message of the API as the loop's message.
    fn loop_message(&self, message: &Value) -> Value;

    /// The completed message as the loop's, and the events that must come before it (calls a
    /// stream never sealed). By default the message alone.
    fn complete(&mut self, message: &Value) -> (Value, Vec<DecodeEvent>) {
        (self.loop_message(message), Vec::new())
    }

    /// The buffer reused for the decoded events of one model event (no allocation per event).
    fn scratch(&mut self) -> &mut Vec<DecodeEvent>;

    /// Translates one model event, appending the result to `out`.
    fn dispatch(&mut self, event: ModelEvent, out: &mut impl Extend<ModelEvent>)
    where
        Self: Sized,
    {
        match event {
            ModelEvent::Decoded(event) => {
                let mut scratch = std::mem::take(self.scratch());
                self.translate_decoded(event, &mut scratch);
                out.extend(scratch.drain(..).map(ModelEvent::Decoded));
                *self.scratch() = scratch;
            }
            ModelEvent::Completed {
                message,
                time_to_first_token,
                request_id,
            } => {
                let (message, before) = self.complete(&message);
                out.extend(before.into_iter().map(ModelEvent::Decoded));
                out.extend([ModelEvent::Completed {
                    message,
                    time_to_first_token,
                    request_id,
                }]);
            }
            ModelEvent::Failed(ModelError::Truncated {
                reason,
                partial,
                details,
            }) => {
                out.extend([ModelEvent::Failed(ModelError::Truncated {
                    reason,
                    partial: Box::new(self.loop_message(&partial)),
                    details,
                })]);
            }
            other => out.extend([other]),
        }
    }
}

/// Wraps a model stream into one in the loop's shape. The translated events wait in one queue
/// reused for the whole stream.
pub(super) fn translated(stream: ModelStream, translator: impl TranslateEvents) -> ModelStream {
    let state = (stream, translator, VecDeque::new());
    Box::pin(futures_util::stream::unfold(
        state,
        |(mut stream, mut translator, mut pending)| async move {
            loop {
                if let Some(event) = pending.pop_front() {
                    return Some((event, (stream, translator, pending)));
                }
                let event = stream.next().await?;
                translator.dispatch(event, &mut pending);
            }
        },
    ))
}

/// Every event of `events`, translated.
pub(super) fn translate_all(
    events: Vec<ModelEvent>,
    mut translator: impl TranslateEvents,
) -> Vec<ModelEvent> {
    let mut out = VecDeque::with_capacity(events.len());
    for event in events {
        translator.dispatch(event, &mut out);
    }
    out.into()
}
