//! The loop against the OpenAI Responses API (`POST /responses`): its history stays in the
//! Anthropic Messages shape, and this module translates at the edge, as [`super::openai`] does
//! for Chat Completions. OpenAI's reasoning models keep their reasoning between turns only here,
//! and some of them (the Codex models) answer nothing else.
//!
//! - Requests ([`responses_request`]): `system` becomes `instructions`; messages become `input`
//!   items in order: a user message's `tool_result` blocks become `function_call_output` items
//!   (text, beginning `Error: ` for an error result; images a tool returned follow in a user
//!   message, and blocks no part holds become a note, as on Chat Completions), then one
//!   user `message` with the rest (`input_text`, `input_image`, base64 PDFs as `input_file`); an
//!   assistant message's blocks become, in their order, `reasoning` items (a `thinking` block
//!   whose `signature` holds the item's `encrypted_content`; unsigned thinking has nothing to
//!   send and is left out), `message` items (string content, the shape every server takes) and
//!   `function_call` items. Tool
//!   definitions become flat `{"type": "function", name, description, parameters, "strict":
//!   false}` (the API's default would refuse most hand-written schemas); `max_tokens` becomes
//!   `max_output_tokens` (left out when the request's is `null`: the loop sets it so once a
//!   server refused the field, as the ChatGPT Codex backend does), `tool_choice` and `metadata.user_id` are mapped, and `stop_sequences`,
//!   which the API lacks, are dropped with the other Anthropic-only fields. `store` is `false`
//!   unless the request says otherwise, so nothing is kept on OpenAI's side; for a reasoning
//!   model (`o1`, `o3`, `o4`, `gpt-5` but `gpt-5-chat`, `codex`) `include` asks for
//!   `reasoning.encrypted_content`, which the API refuses for other models (the loop then sends
//!   the turn again with `"include": null`, which sends none). Encrypted content the API
//!   cannot verify (a Claude conversation's thinking signatures, or OpenAI's own after a key
//!   change: `invalid_encrypted_content`) is sent as it is: the loop then sends the turn again
//!   without the thinking of the history it had. Unknown fields
//!   (`reasoning`, `text`, `temperature`, `prompt_cache_key`, ...) pass through.
//! - Responses ([`message_from_response`], [`ResponsesEventTranslator`]): the Responses
//!   decoder's events and final `response` become Anthropic-shaped events and an Anthropic
//!   message: a `reasoning` item is a `thinking` block (its summary, or its reasoning text, and
//!   its `encrypted_content` as `signature`), a `message` item one `text` block (refusals
//!   included), a `function_call` a `tool_use` block (arguments parsed); other items (hosted
//!   tools) have no block. `status` `completed` is `end_turn` (`tool_use` with calls);
//!   `incomplete` for `max_output_tokens` is `max_tokens`, for `content_filter` `refusal`.
//!   Usage `input_tokens` (cached ones included) / `cached_tokens` / `output_tokens` becomes
//!   `input_tokens` (uncached) / `cache_read_input_tokens` / `output_tokens`.

use serde_json::{Map, Value, json};

use super::model::{ModelEvent, ModelStream};
use super::wire::{
    self, NOT_PASSED_THROUGH, PartShapes, SealedCall, TranslateEvents, block_type, function_fields,
    joined_text, parse_arguments, record_sealed, signature, translated, unsealed_calls,
};
use crate::decode::DecodeEvent;

/// Translates an Anthropic Messages request body into a Responses request body.
pub fn responses_request(request: &Value) -> Value {
    let empty = Map::new();
    let fields = request.as_object().unwrap_or(&empty);
    let mut out = Map::new();
    if let Some(model) = fields.get("model") {
        out.insert("model".to_owned(), model.clone());
    }
    if let Some(system) = fields.get("system") {
        let text = joined_text(system);
        if !text.trim().is_empty() {
            out.insert("instructions".to_owned(), Value::String(text));
        }
    }
    let messages = fields
        .get("messages")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    out.insert("input".to_owned(), Value::Array(input_items(messages)));
    let tools: Vec<Value> = fields
        .get("tools")
        .and_then(Value::as_array)
        .map(|tools| tools.iter().filter_map(function_tool).collect())
        .unwrap_or_default();
    if !tools.is_empty() {
        out.insert("tools".to_owned(), Value::Array(tools));
        if let Some(choice) = fields.get("tool_choice") {
            if let Some(translated) = tool_choice(choice) {
                out.insert("tool_choice".to_owned(), translated);
            }
            if let Some(disabled) = choice
                .get("disable_parallel_tool_use")
                .and_then(Value::as_bool)
            {
                out.insert("parallel_tool_calls".to_owned(), Value::Bool(!disabled));
            }
        }
    }
    if let Some(max) = fields
        .get("max_tokens")
        .filter(|m| m.is_number() && !fields.contains_key("max_output_tokens"))
    {
        out.insert("max_output_tokens".to_owned(), max.clone());
    }
    if fields.get("stream").and_then(Value::as_bool) == Some(true) {
        out.insert("stream".to_owned(), Value::Bool(true));
    }
    if let Some(user) = fields
        .get("metadata")
        .and_then(|m| m.get("user_id"))
        .filter(|u| u.is_string())
    {
        out.insert("user".to_owned(), user.clone());
    }
    for (key, value) in fields {
        if !NOT_PASSED_THROUGH.contains(&key.as_str()) && !out.contains_key(key) {
            out.insert(key.clone(), value.clone());
        }
    }
    // Nothing is stored on OpenAI's side unless the host asks: the history is sent whole every
    // turn, and reasoning travels encrypted with it.
    out.entry("store").or_insert(Value::Bool(false));
    let model = fields.get("model").and_then(Value::as_str).unwrap_or("");
    // `"include": null` sends none: the loop sets it once a model refused the encrypted
    // reasoning.
    if out.get("include").is_some_and(Value::is_null) {
        out.remove("include");
    } else if !out.contains_key("include")
        && out.get("store") == Some(&Value::Bool(false))
        && is_reasoning_model(model)
    {
        out.insert("include".to_owned(), json!(["reasoning.encrypted_content"]));
    }
    Value::Object(out)
}

/// Whether `model` reasons, so that `include: ["reasoning.encrypted_content"]` is accepted
/// (other models refuse it: "Encrypted content is not supported with this model").
fn is_reasoning_model(model: &str) -> bool {
    let name = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    let o_series = ["o1", "o3", "o4"].iter().any(|prefix| {
        name.strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
    });
    let gpt5 = name.starts_with("gpt-5") && !name.contains("-chat");
    o_series || gpt5 || name.contains("codex")
}

/// An Anthropic tool definition as a Responses function tool (`None` for server tools).
fn function_tool(tool: &Value) -> Option<Value> {
    let mut function = Map::new();
    function.insert("type".to_owned(), json!("function"));
    function.extend(function_fields(tool)?);
    // Strict mode needs every property required and `additionalProperties: false`: schemas
    // written for Anthropic rarely are, and the API would refuse them.
    function.insert("strict".to_owned(), Value::Bool(false));
    Some(Value::Object(function))
}

fn tool_choice(choice: &Value) -> Option<Value> {
    match choice.get("type").and_then(Value::as_str)? {
        "auto" => Some(json!("auto")),
        "any" => Some(json!("required")),
        "none" => Some(json!("none")),
        "tool" => Some(json!({"type": "function", "name": choice.get("name")?})),
        _ => None,
    }
}

/// The `input` items of a history.
fn input_items(messages: &[Value]) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len() * 2);
    for message in messages {
        let content = message.get("content").unwrap_or(&Value::Null);
        match message.get("role").and_then(Value::as_str) {
            Some("assistant") => assistant_items(content, &mut out),
            _ => user_items(content, &mut out),
        }
    }
    out
}

fn assistant_items(content: &Value, out: &mut Vec<Value>) {
    let Value::Array(blocks) = content else {
        let text = joined_text(content);
        if !text.is_empty() {
            out.push(assistant_text(text));
        }
        return;
    };
    for block in blocks {
        match block_type(block) {
            "text" => {
                if let Some(text) = block.get("text").and_then(Value::as_str) {
                    out.push(assistant_text(text.to_owned()));
                }
            }
            "tool_use" => {
                let input = block.get("input").cloned().unwrap_or_else(|| json!({}));
                out.push(json!({
                    "type": "function_call",
                    "call_id": block.get("id").cloned().unwrap_or(Value::Null),
                    "name": block.get("name").cloned().unwrap_or(Value::Null),
                    "arguments": input.to_string(),
                }));
            }
            // Only a reasoning item's encrypted content lets the model see its reasoning again
            // (nothing is stored server-side): thinking without one (reasoning from a Chat
            // Completions server) has nothing to send.
            "thinking" => {
                let Some(encrypted) = signature(block) else {
                    continue;
                };
                let summary: Vec<Value> = block
                    .get("thinking")
                    .and_then(Value::as_str)
                    .filter(|t| !t.is_empty())
                    .map(|text| json!({"type": "summary_text", "text": text}))
                    .into_iter()
                    .collect();
                out.push(json!({
                    "type": "reasoning",
                    "summary": summary,
                    "encrypted_content": encrypted,
                }));
            }
            _ => {}
        }
    }
}

/// Assistant text as an input message with string content: OpenAI takes `output_text` parts
/// too, but servers that validate `input` against the SDK's types (vLLM) take them only with the
/// `id`, `status` and `annotations` of a stored output message, and an `id` sent with
/// `store: false` refers to nothing.
fn assistant_text(text: String) -> Value {
    json!({
        "type": "message",
        "role": "assistant",
        "content": text,
    })
}

/// The Responses API's parts: `input_text`, `input_image`, `input_file`, and
/// `function_call_output` items.
const RESPONSES_PARTS: PartShapes = PartShapes {
    text: |text| json!({"type": "input_text", "text": text}),
    image: |url| json!({"type": "input_image", "image_url": url, "detail": "auto"}),
    file: |filename, data| json!({"type": "input_file", "filename": filename, "file_data": data}),
    tool_output: |id, text| json!({"type": "function_call_output", "call_id": id, "output": text}),
    holds: "text, images by URL or base64 and PDF documents",
};

/// A user message: its tool results as `function_call_output` items (in order, right after the
/// calls), then one user message with the rest.
fn user_items(content: &Value, out: &mut Vec<Value>) {
    let Value::Array(blocks) = content else {
        let text = (RESPONSES_PARTS.text)(&joined_text(content));
        out.push(json!({"type": "message", "role": "user", "content": [text]}));
        return;
    };
    let (outputs, parts) = RESPONSES_PARTS.user_side(blocks);
    out.extend(outputs);
    if !parts.is_empty() {
        out.push(json!({"type": "message", "role": "user", "content": parts}));
    }
}

/// What an output item becomes in the Anthropic message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Thinking,
    Text,
    ToolUse,
}

fn item_kind(item: &Value) -> Option<Kind> {
    match item.get("type").and_then(Value::as_str)? {
        "reasoning" => Some(Kind::Thinking),
        "message" => Some(Kind::Text),
        "function_call" => Some(Kind::ToolUse),
        _ => None,
    }
}

/// The Anthropic block of an output item, complete.
fn item_block(item: &Value, kind: Kind) -> Value {
    let text_of = |list: &str, kind: &str| -> String {
        item.get(list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|part| part.get("type").and_then(Value::as_str) == Some(kind))
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n\n")
    };
    match kind {
        Kind::Thinking => {
            let summary = text_of("summary", "summary_text");
            let thinking = if summary.is_empty() {
                text_of("content", "reasoning_text")
            } else {
                summary
            };
            let signature = item
                .get("encrypted_content")
                .and_then(Value::as_str)
                .unwrap_or("");
            json!({"type": "thinking", "thinking": thinking, "signature": signature})
        }
        Kind::Text => {
            let text: String = item
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|part| match part.get("type").and_then(Value::as_str) {
                    Some("output_text") => part.get("text").and_then(Value::as_str),
                    Some("refusal") => part.get("refusal").and_then(Value::as_str),
                    _ => None,
                })
                .collect();
            json!({"type": "text", "text": text})
        }
        Kind::ToolUse => {
            let field = |key: &str| item.get(key).and_then(Value::as_str).unwrap_or("");
            json!({
                "type": "tool_use",
                "id": field("call_id"),
                "name": field("name"),
                "input": parse_arguments(field("arguments")),
            })
        }
    }
}

/// The loop's stop reason for a final `response`.
fn stop_reason(response: &Value, has_calls: bool) -> &'static str {
    let reason = response
        .get("incomplete_details")
        .and_then(|d| d.get("reason"))
        .and_then(Value::as_str);
    match reason {
        Some("max_output_tokens") => "max_tokens",
        Some("content_filter") => "refusal",
        _ if has_calls => "tool_use",
        _ => "end_turn",
    }
}

/// Anthropic-shaped usage from Responses usage (`null` when there is none). `input_tokens`
/// includes the cached tokens; Anthropic's does not.
pub fn anthropic_usage(usage: &Value) -> Value {
    wire::usage_from(
        usage,
        "input_tokens",
        "input_tokens_details",
        "output_tokens",
    )
}

/// Translates a final `response` into an Anthropic message, blocks in output order.
pub fn message_from_response(response: &Value) -> Value {
    let content: Vec<Value> = response
        .get("output")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|item| item_kind(item).map(|kind| item_block(item, kind)))
        .collect();
    let has_calls = content.iter().any(|b| block_type(b) == "tool_use");
    json!({
        "id": response.get("id").cloned().unwrap_or(json!("")),
        "type": "message",
        "role": "assistant",
        "model": response.get("model").cloned().unwrap_or(json!("")),
        "content": content,
        "stop_reason": stop_reason(response, has_calls),
        "stop_sequence": null,
        "usage": anthropic_usage(response.get("usage").unwrap_or(&Value::Null)),
    })
}

/// Translates the Responses decoder's events into the events an Anthropic stream would have
/// produced: one block per reasoning, message and function call item, numbered in order of
/// appearance; other items (hosted tools) have none and their events are dropped. Unknown
/// events pass through.
#[derive(Debug, Default)]
pub struct ResponsesEventTranslator {
    /// Per output index: its block and what the block is.
    blocks: Vec<Option<(usize, Kind)>>,
    count: usize,
    /// Blocks started and not stopped yet.
    open: Vec<usize>,
    sealed: Vec<SealedCall>,
    scratch: Vec<DecodeEvent>,
}

impl ResponsesEventTranslator {
    /// A translator for one stream.
    pub fn new() -> Self {
        Self::default()
    }

    fn block(&self, output: usize) -> Option<(usize, Kind)> {
        self.blocks.get(output).copied().flatten()
    }

    /// Translates one decoder event into `out`.
    pub fn translate(&mut self, event: DecodeEvent, out: &mut Vec<DecodeEvent>) {
        match event {
            DecodeEvent::MessageStart { message } => {
                let mut start = message_from_response(&message);
                start["content"] = json!([]);
                start["stop_reason"] = Value::Null;
                out.push(DecodeEvent::MessageStart { message: start });
            }
            DecodeEvent::BlockStart { index, block } => {
                let Some(kind) = item_kind(&block) else {
                    return;
                };
                if self.block(index).is_some() {
                    return;
                }
                if self.blocks.len() <= index {
                    self.blocks.resize(index + 1, None);
                }
                let at = self.count;
                self.count += 1;
                self.blocks[index] = Some((at, kind));
                self.open.push(at);
                let start = match kind {
                    Kind::Thinking => json!({"type": "thinking", "thinking": "", "signature": ""}),
                    Kind::Text => json!({"type": "text", "text": ""}),
                    Kind::ToolUse => {
                        let mut block = item_block(&block, kind);
                        block["input"] = json!({});
                        block
                    }
                };
                out.push(DecodeEvent::BlockStart {
                    index: at,
                    block: start,
                });
            }
            DecodeEvent::TextDelta { index, text }
            | DecodeEvent::RefusalDelta {
                index,
                refusal: text,
            } => {
                if let Some((at, Kind::Text)) = self.block(index) {
                    out.push(DecodeEvent::TextDelta { index: at, text });
                }
            }
            DecodeEvent::ThinkingDelta { index, thinking } => {
                if let Some((at, Kind::Thinking)) = self.block(index) {
                    out.push(DecodeEvent::ThinkingDelta {
                        index: at,
                        thinking,
                    });
                }
            }
            DecodeEvent::InputJsonDelta {
                index,
                partial_json,
            } => {
                if let Some((at, Kind::ToolUse)) = self.block(index) {
                    out.push(DecodeEvent::InputJsonDelta {
                        index: at,
                        partial_json,
                    });
                }
            }
            DecodeEvent::BlockStop { index } => {
                if let Some((at, _)) = self.block(index) {
                    self.stop(at, out);
                }
            }
            mut event @ (DecodeEvent::ToolUseReady { .. }
            | DecodeEvent::ToolUseInvalid { .. }
            | DecodeEvent::ToolUseTruncated { .. }) => {
                let Some(call) = event.sealed_call() else {
                    return;
                };
                let Some((at, Kind::ToolUse)) = self.block(call.index) else {
                    return;
                };
                self.sealed.push(SealedCall::at(at, call));
                if let Some(index) = event.index_mut() {
                    *index = at;
                }
                out.push(event);
            }
            DecodeEvent::MessageDelta { delta, usage } => {
                // The same reason as the final message's: the delta carries the status and,
                // for an incomplete response, its `incomplete_details`.
                let has_calls = self
                    .blocks
                    .iter()
                    .flatten()
                    .any(|(_, k)| *k == Kind::ToolUse);
                let stop = delta
                    .get("status")
                    .is_some()
                    .then(|| stop_reason(&delta, has_calls));
                let delta = match stop {
                    Some(stop) => json!({"stop_reason": stop, "stop_sequence": null}),
                    None => json!({}),
                };
                out.push(DecodeEvent::MessageDelta {
                    delta,
                    usage: anthropic_usage(&usage),
                });
            }
            DecodeEvent::MessageStop => {
                for at in std::mem::take(&mut self.open) {
                    out.push(DecodeEvent::BlockStop { index: at });
                }
                out.push(DecodeEvent::MessageStop);
            }
            // Signature, citation and unknown deltas name output indexes the loop has no
            // block for; unknown events (hosted tools' progress) pass through.
            DecodeEvent::SignatureDelta { .. }
            | DecodeEvent::CitationsDelta { .. }
            | DecodeEvent::UnknownDelta { .. } => {}
            other => out.push(other),
        }
    }

    fn stop(&mut self, at: usize, out: &mut Vec<DecodeEvent>) {
        if let Some(position) = self.open.iter().position(|&open| open == at) {
            self.open.remove(position);
            out.push(DecodeEvent::BlockStop { index: at });
        }
    }

    /// The final `response` as an Anthropic message, each sealed call as it was sealed.
    pub fn message(&self, response: &Value) -> Value {
        let mut message = message_from_response(response);
        record_sealed(&mut message, &self.sealed_in(response));
        message
    }

    /// The sealed calls, numbered as blocks of the message `response` becomes. The stream
    /// numbers blocks in the order its items arrived, the message in the order of the
    /// response's `output`, which may hold items the stream never sent (a server that sends its
    /// output only in `response.completed`).
    fn sealed_in(&self, response: &Value) -> Vec<SealedCall> {
        let mut next = 0;
        let message_blocks: Vec<Option<usize>> = response
            .get("output")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|item| {
                item_kind(item).map(|_| {
                    next += 1;
                    next - 1
                })
            })
            .collect();
        self.sealed
            .iter()
            .filter_map(|call| {
                let output = self
                    .blocks
                    .iter()
                    .position(|block| block.is_some_and(|(at, _)| at == call.index))?;
                let index = (*message_blocks.get(output)?)?;
                Some(SealedCall {
                    index,
                    ..call.clone()
                })
            })
            .collect()
    }

    /// Translates one item of a model stream in the Responses shape, appending the result to
    /// `out`.
    pub fn translate_model_event(&mut self, event: ModelEvent, out: &mut impl Extend<ModelEvent>) {
        self.dispatch(event, out);
    }
}

impl TranslateEvents for ResponsesEventTranslator {
    fn translate_decoded(&mut self, event: DecodeEvent, out: &mut Vec<DecodeEvent>) {
        self.translate(event, out);
    }

    fn loop_message(&self, message: &Value) -> Value {
        self.message(message)
    }

    /// What only the final `response` holds comes before the message: the text and thinking of
    /// items the stream never sent, as deltas (hosts show what the model said), and calls never
    /// sealed, as ready calls (so they run and are answered).
    fn complete(&mut self, response: &Value) -> (Value, Vec<DecodeEvent>) {
        let sealed = self.sealed_in(response);
        let mut message = message_from_response(response);
        record_sealed(&mut message, &sealed);
        let mut before = Vec::new();
        let output = response.get("output").and_then(Value::as_array);
        let blocks = message.get("content").and_then(Value::as_array);
        let unstreamed = output
            .into_iter()
            .flatten()
            .enumerate()
            .filter(|(_, item)| item_kind(item).is_some())
            .zip(blocks.into_iter().flatten().enumerate())
            .filter(|((output, _), _)| self.block(*output).is_none());
        for (_, (index, block)) in unstreamed {
            let text = |key: &str| {
                block[key]
                    .as_str()
                    .filter(|t| !t.is_empty())
                    .map(str::to_owned)
            };
            match block_type(block) {
                "text" => {
                    before.extend(text("text").map(|text| DecodeEvent::TextDelta { index, text }))
                }
                "thinking" => before.extend(
                    text("thinking").map(|thinking| DecodeEvent::ThinkingDelta { index, thinking }),
                ),
                _ => {}
            }
        }
        before.extend(unsealed_calls(&message, &sealed));
        (message, before)
    }

    fn scratch(&mut self) -> &mut Vec<DecodeEvent> {
        &mut self.scratch
    }
}

/// Wraps a model stream in the Responses shape into one in the loop's shape.
pub fn translate_responses_stream(stream: ModelStream) -> ModelStream {
    translated(stream, ResponsesEventTranslator::new())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::agent::replay::{openai_responses_sse, scripted_message};
    use crate::decode::{Provider, StreamDecoder};

    fn history() -> Value {
        json!({
            "model": "gpt-5.5",
            "system": [{"type": "text", "text": "Be brief."}],
            "max_tokens": 4096,
            "stop_sequences": ["END"],
            "metadata": {"user_id": "u-1"},
            "temperature": 0.2,
            "reasoning": {"effort": "high"},
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
            "tools": [
                {"name": "read", "description": "Reads a file.", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}},
                {"type": "web_search_20250305", "name": "web_search"},
            ],
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "Look at these."},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}},
                    {"type": "document", "title": "spec.pdf", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBER"}},
                ]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "Read the spec first.", "signature": "enc-1"},
                    {"type": "thinking", "thinking": "from a Chat server", "signature": ""},
                    {"type": "text", "text": "Reading."},
                    {"type": "tool_use", "id": "call_1", "name": "read", "input": {"path": "a"}},
                    {"type": "tool_use", "id": "call_2", "name": "read", "input": {"path": "b"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "call_1", "content": "A"},
                    {"type": "tool_result", "tool_use_id": "call_2", "content": [
                        {"type": "text", "text": "B"},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QUJD"}},
                    ]},
                    {"type": "text", "text": "Go on."},
                ]},
            ],
        })
    }

    #[test]
    fn a_history_becomes_input_items_in_order() {
        let body = responses_request(&history());
        assert_eq!(body["instructions"], "Be brief.");
        assert_eq!(body["max_output_tokens"], 4096);
        assert_eq!(body["store"], false);
        assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(body["user"], "u-1");
        assert_eq!(body["temperature"], 0.2);
        assert_eq!(body["reasoning"], json!({"effort": "high"}));
        assert_eq!(body["tool_choice"], "required");
        assert_eq!(body["parallel_tool_calls"], false);
        for gone in [
            "system",
            "messages",
            "max_tokens",
            "stop_sequences",
            "thinking",
            "metadata",
        ] {
            assert!(body.get(gone).is_none(), "{gone} was sent");
        }
        assert_eq!(
            body["tools"],
            json!([{"type": "function", "name": "read", "description": "Reads a file.", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}, "strict": false}])
        );
        let input = body["input"].as_array().unwrap();
        let kinds: Vec<&str> = input.iter().map(|i| i["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "message",
                "reasoning",
                "message",
                "function_call",
                "function_call",
                "function_call_output",
                "function_call_output",
                "message"
            ]
        );
        assert_eq!(
            input[0]["content"],
            json!([
                {"type": "input_text", "text": "Look at these."},
                {"type": "input_image", "image_url": "data:image/png;base64,iVBOR", "detail": "auto"},
                {"type": "input_file", "filename": "spec.pdf", "file_data": "data:application/pdf;base64,JVBER"},
            ])
        );
        // The encrypted reasoning goes back without an id (nothing is stored to refer to);
        // the unsigned thinking has nothing to send.
        assert_eq!(
            input[1],
            json!({"type": "reasoning", "summary": [{"type": "summary_text", "text": "Read the spec first."}], "encrypted_content": "enc-1"})
        );
        // Assistant text as a plain-string message, the shape every server validates (vLLM
        // refuses an `output_text` part without the `id`, `status` and `annotations` of a
        // stored output message).
        assert_eq!(
            input[2],
            json!({"type": "message", "role": "assistant", "content": "Reading."})
        );
        assert_eq!(
            input[3],
            json!({"type": "function_call", "call_id": "call_1", "name": "read", "arguments": "{\"path\":\"a\"}"})
        );
        assert_eq!(
            input[5],
            json!({"type": "function_call_output", "call_id": "call_1", "output": "A"})
        );
        assert_eq!(input[6]["output"], "B");
        assert_eq!(input[7]["role"], "user");
        assert_eq!(
            input[7]["content"][0]["text"],
            "Image returned by tool call call_2:"
        );
        assert_eq!(input[7]["content"][1]["type"], "input_image");
        assert_eq!(
            input[7]["content"][2],
            json!({"type": "input_text", "text": "Go on."})
        );
    }

    #[test]
    fn failed_results_say_so_and_no_block_goes_missing() {
        let body = responses_request(&json!({"model": "gpt-5", "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "read", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "c1", "is_error": true, "content": "no such file"},
                {"type": "image", "source": {"type": "file", "file_id": "file_1"}},
                {"type": "search_result", "title": "Doc", "source": "https://x", "content": [{"type": "text", "text": "found"}]},
            ]},
        ]}));
        let input = body["input"].as_array().unwrap();
        assert_eq!(
            input[2],
            json!({"type": "function_call_output", "call_id": "c1", "output": "Error: no such file"})
        );
        let parts = input[3]["content"].as_array().unwrap();
        assert!(
            parts[0]["text"]
                .as_str()
                .unwrap()
                .starts_with("[an image block was left out"),
            "{parts:?}"
        );
        assert_eq!(
            parts[1],
            json!({"type": "input_text", "text": "Doc (https://x)\n\nfound"})
        );
    }

    #[test]
    fn encrypted_reasoning_is_asked_for_reasoning_models_only() {
        let include = |model: &str| {
            responses_request(&json!({"model": model, "messages": []}))
                .get("include")
                .cloned()
        };
        for model in [
            "o3",
            "o4-mini",
            "o1-2024-12-17",
            "gpt-5",
            "gpt-5.5-pro",
            "gpt-5.1-codex-max",
            "codex-mini-latest",
            "openai/gpt-5",
        ] {
            assert_eq!(
                include(model),
                Some(json!(["reasoning.encrypted_content"])),
                "{model}"
            );
        }
        for model in ["gpt-4o", "gpt-4.1-mini", "gpt-5-chat-latest", "o3x", ""] {
            assert_eq!(include(model), None, "{model}");
        }
        // A host that stores responses, or names its own `include`, is left alone.
        let stored = responses_request(&json!({"model": "o3", "messages": [], "store": true}));
        assert_eq!(stored["store"], true);
        assert!(stored.get("include").is_none());
        let own = responses_request(&json!({"model": "o3", "messages": [], "include": []}));
        assert_eq!(own["include"], json!([]));
        let none = responses_request(&json!({"model": "o3", "messages": [], "include": null}));
        assert!(none.get("include").is_none(), "{none}");
    }

    fn decoded(sse: &str) -> (Vec<DecodeEvent>, Value) {
        let mut decoder = StreamDecoder::for_provider(Provider::OpenAiResponses);
        let mut events = Vec::new();
        for piece in sse.as_bytes().chunks(7) {
            decoder
                .feed_into(bytes::Bytes::copy_from_slice(piece), &mut events)
                .unwrap();
        }
        let message = decoder.finish().unwrap();
        let mut translator = ResponsesEventTranslator::new();
        let mut out = Vec::new();
        for event in events {
            translator.translate(event, &mut out);
        }
        (out, translator.message(&message))
    }

    #[test]
    fn a_streamed_response_becomes_an_anthropic_message_and_events() {
        let content = vec![
            json!({"type": "thinking", "thinking": "Both files.", "signature": "enc-9"}),
            json!({"type": "text", "text": "Reading both."}),
            json!({"type": "tool_use", "id": "call_a", "name": "read", "input": {"path": "a"}}),
            json!({"type": "tool_use", "id": "call_b", "name": "read", "input": {"path": "b"}}),
        ];
        let mut message = scripted_message(&json!({}), content.clone(), "tool_use");
        message["usage"] = json!({"input_tokens": 30, "cache_read_input_tokens": 70, "cache_creation_input_tokens": 0, "output_tokens": 12});
        let (events, final_message) = decoded(&openai_responses_sse(&message, 3));
        assert_eq!(final_message["content"], json!(content));
        assert_eq!(final_message["stop_reason"], "tool_use");
        assert_eq!(
            final_message["usage"],
            json!({"input_tokens": 30, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 70, "output_tokens": 12})
        );
        let starts: Vec<(usize, &str)> = events
            .iter()
            .filter_map(|e| match e {
                DecodeEvent::BlockStart { index, block } => {
                    Some((*index, block["type"].as_str().unwrap()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            starts,
            [
                (0, "thinking"),
                (1, "text"),
                (2, "tool_use"),
                (3, "tool_use")
            ]
        );
        let text: String = events
            .iter()
            .filter_map(|e| match e {
                DecodeEvent::TextDelta { index: 1, text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(text, "Reading both.");
        let thinking: String = events
            .iter()
            .filter_map(|e| match e {
                DecodeEvent::ThinkingDelta { index: 0, thinking } => Some(thinking.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(thinking, "Both files.");
        let ready: Vec<(usize, &str)> = events
            .iter()
            .filter_map(|e| match e {
                DecodeEvent::ToolUseReady { index, id, .. } => Some((*index, id.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(ready, [(2, "call_a"), (3, "call_b")]);
        let stops = events
            .iter()
            .filter(|e| matches!(e, DecodeEvent::BlockStop { .. }))
            .count();
        assert_eq!(stops, 4);
        assert!(events.iter().any(|e| matches!(
            e,
            DecodeEvent::MessageDelta { delta, .. } if delta["stop_reason"] == "tool_use"
        )));
        // The message goes back as the items it came from.
        let again = responses_request(&json!({"model": "o3", "messages": [
            {"role": "user", "content": "read a and b"},
            {"role": "assistant", "content": final_message["content"]},
        ]}));
        let kinds: Vec<&str> = again["input"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "message",
                "reasoning",
                "message",
                "function_call",
                "function_call"
            ]
        );
        assert_eq!(again["input"][1]["encrypted_content"], "enc-9");
    }

    /// The model events a whole Responses SSE stream becomes for the loop.
    fn translated_model_events(sse: &str) -> Vec<ModelEvent> {
        let mut decoder = StreamDecoder::for_provider(Provider::OpenAiResponses);
        let mut events = Vec::new();
        decoder
            .feed_into(bytes::Bytes::copy_from_slice(sse.as_bytes()), &mut events)
            .unwrap();
        let response = decoder.finish().unwrap();
        let mut translator = ResponsesEventTranslator::new();
        let mut out = Vec::new();
        for event in events {
            translator.translate_model_event(ModelEvent::Decoded(event), &mut out);
        }
        translator.translate_model_event(
            ModelEvent::Completed {
                message: response,
                time_to_first_token: None,
                request_id: None,
            },
            &mut out,
        );
        out
    }

    fn sse_of(events: &[Value]) -> String {
        events
            .iter()
            .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
            .collect()
    }

    /// A server that sends its output only in `response.completed` (a proxy that does not
    /// stream, or one that streams some items only): the calls only the final response holds
    /// are reported ready before the message, so the loop runs them instead of answering "The
    /// call was not run.", and their text comes as deltas; calls the stream sealed are not
    /// reported twice. (Found by the fuzz target `agent_openai_responses`.)
    #[test]
    fn calls_only_the_final_response_holds_are_reported_ready() {
        let call = |id: &str, path: &str| json!({"type": "function_call", "id": format!("fc_{id}"), "call_id": id, "name": "read", "arguments": json!({"path": path}).to_string(), "status": "completed"});
        let text = json!({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": "Reading.", "annotations": []}]});
        let response = |output: Vec<Value>| json!({"id": "resp_1", "object": "response", "status": "completed", "model": "m", "output": output, "usage": {"input_tokens": 5, "output_tokens": 9, "total_tokens": 14}});
        let ready = |events: &[ModelEvent]| -> Vec<(usize, String, Value)> {
            events
                .iter()
                .filter_map(|e| match e {
                    ModelEvent::Decoded(DecodeEvent::ToolUseReady {
                        index, id, input, ..
                    }) => Some((*index, id.clone(), input.clone())),
                    _ => None,
                })
                .collect()
        };

        // Nothing streamed: both calls are reported, at their blocks of the final message.
        let events = translated_model_events(&sse_of(&[
            json!({"type": "response.created", "response": response(vec![])}),
            json!({"type": "response.completed", "response": response(vec![text.clone(), call("call_a", "a"), call("call_b", "b")])}),
        ]));
        assert_eq!(
            ready(&events),
            [
                (1, "call_a".to_owned(), json!({"path": "a"})),
                (2, "call_b".to_owned(), json!({"path": "b"}))
            ]
        );
        let Some(ModelEvent::Completed { message, .. }) = events.last() else {
            panic!("no final message: {events:?}");
        };
        assert_eq!(message["stop_reason"], "tool_use");
        assert_eq!(message["content"][2]["id"], "call_b");
        // Its text too, which no delta carried.
        assert!(events.iter().any(|e| matches!(
            e,
            ModelEvent::Decoded(DecodeEvent::TextDelta { index: 0, text }) if text == "Reading."
        )));

        // The first call streamed and sealed (after a text item the stream left out): it is
        // reported once, and the second, which only the final response holds, once too.
        let events = translated_model_events(&sse_of(&[
            json!({"type": "response.created", "response": response(vec![])}),
            json!({"type": "response.output_item.added", "output_index": 1, "item": {"type": "function_call", "id": "fc_call_a", "call_id": "call_a", "name": "read", "arguments": "", "status": "in_progress"}}),
            json!({"type": "response.function_call_arguments.delta", "output_index": 1, "item_id": "fc_call_a", "delta": "{\"path\":\"a\"}"}),
            json!({"type": "response.output_item.done", "output_index": 1, "item": call("call_a", "a")}),
            json!({"type": "response.completed", "response": response(vec![text, call("call_a", "a"), call("call_b", "b")])}),
        ]));
        let ids: Vec<String> = ready(&events).into_iter().map(|(_, id, _)| id).collect();
        assert_eq!(ids, ["call_a", "call_b"]);
        let Some(ModelEvent::Completed { message, .. }) = events.last() else {
            panic!("no final message: {events:?}");
        };
        assert_eq!(message["content"][1]["input"], json!({"path": "a"}));
    }

    /// OpenAI streams a reasoning summary in several parts (one per bold-titled section): the
    /// final thinking block joins them with a blank line, and the streamed thinking read the
    /// same, not the parts run together.
    #[test]
    fn a_summary_in_several_parts_streams_as_it_ends() {
        let events = [
            json!({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}}),
            json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning", "id": "rs_1", "summary": []}}),
            json!({"type": "response.reasoning_summary_part.added", "output_index": 0, "summary_index": 0, "part": {"type": "summary_text", "text": ""}}),
            json!({"type": "response.reasoning_summary_text.delta", "output_index": 0, "summary_index": 0, "delta": "**Reading**"}),
            json!({"type": "response.reasoning_summary_part.done", "output_index": 0, "summary_index": 0, "part": {"type": "summary_text", "text": "**Reading**"}}),
            json!({"type": "response.reasoning_summary_part.added", "output_index": 0, "summary_index": 1, "part": {"type": "summary_text", "text": ""}}),
            json!({"type": "response.reasoning_summary_text.delta", "output_index": 0, "summary_index": 1, "delta": "**Answering**"}),
            json!({"type": "response.output_item.done", "output_index": 0, "item": {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "**Reading**"}, {"type": "summary_text", "text": "**Answering**"}], "encrypted_content": "gAAAAAx"}}),
            json!({"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "output": [
                {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "**Reading**"}, {"type": "summary_text", "text": "**Answering**"}], "encrypted_content": "gAAAAAx"},
            ]}}),
        ];
        let sse: String = events
            .iter()
            .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
            .collect();
        let (events, message) = decoded(&sse);
        let streamed: String = events
            .iter()
            .filter_map(|e| match e {
                DecodeEvent::ThinkingDelta { thinking, .. } => Some(thinking.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(
            message["content"][0]["thinking"],
            "**Reading**\n\n**Answering**"
        );
        assert_eq!(streamed, "**Reading**\n\n**Answering**");
    }

    #[test]
    fn incomplete_responses_map_to_their_stop_reasons() {
        let cut = scripted_message(
            &json!({}),
            vec![json!({"type": "text", "text": "Half"})],
            "max_tokens",
        );
        let (_, message) = decoded(&openai_responses_sse(&cut, 2));
        assert_eq!(message["stop_reason"], "max_tokens");
        assert_eq!(
            message["content"],
            json!([{"type": "text", "text": "Half"}])
        );
        // A content filter's cut is a refusal in the stream's view too.
        let refused = scripted_message(
            &json!({}),
            vec![json!({"type": "text", "text": "I can"})],
            "refusal",
        );
        let (events, message) = decoded(&openai_responses_sse(&refused, 2));
        assert_eq!(message["stop_reason"], "refusal");
        let streamed: Vec<&Value> = events
            .iter()
            .filter_map(|e| match e {
                DecodeEvent::MessageDelta { delta, .. } => Some(&delta["stop_reason"]),
                _ => None,
            })
            .collect();
        assert_eq!(streamed, [&json!("refusal")]);
        let filtered = json!({"status": "incomplete", "incomplete_details": {"reason": "content_filter"}, "output": []});
        assert_eq!(message_from_response(&filtered)["stop_reason"], "refusal");
        let hosted = json!({"status": "completed", "output": [
            {"type": "web_search_call", "id": "ws_1", "status": "completed"},
            {"type": "message", "content": [{"type": "output_text", "text": "Found "}, {"type": "refusal", "refusal": "nothing."}]},
        ]});
        let message = message_from_response(&hosted);
        assert_eq!(
            message["content"],
            json!([{"type": "text", "text": "Found nothing."}])
        );
        assert_eq!(message["stop_reason"], "end_turn");
        assert!(message["usage"].is_null());
    }
}
