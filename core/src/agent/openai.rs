//! The loop against OpenAI Chat Completions: its history stays in the Anthropic Messages shape,
//! and this module translates at the edge.
//!
//! - Requests ([`chat_request`]): `system` becomes the first `system` message; an assistant
//!   message's text and `tool_use` blocks become `content` and `tool_calls`; a user message's
//!   `tool_result` blocks become `role: "tool"` messages, in order (a result in error begins
//!   with `Error: `, a `tool` message having no error flag), followed by one user message
//!   with the rest (text, images as `image_url` parts, images returned by tools too, base64 PDF
//!   documents as `file` parts with a data URL, text documents and search results as their
//!   text, any other block as a note saying it was left out; a `tool`
//!   message holds text only, so a tool's text document goes as its text and another document
//!   as a note saying it was left out); tool
//!   definitions become `{"type": "function", "function": {name, description, parameters}}`;
//!   `max_tokens` (to the [`MaxTokensField`] the options name, unless the request already holds
//!   a `max_completion_tokens`, which is then sent alone), `stop_sequences`, `tool_choice` and
//!   `metadata.user_id` are mapped; a streamed request asks for usage with
//!   `stream_options: {"include_usage": true}` (merged into the request's own `stream_options`;
//!   none when the request holds `"stream_options": null`, which the loop sets after a server
//!   refused the field); fields
//!   without a Chat Completions meaning (`thinking`, `top_k`, `cache_control` on blocks and on
//!   the request, `context_management`, server tools) are
//!   dropped; unknown fields (`temperature`, `seed`, ...) pass through.
//! - Responses ([`message_from_chat_completion`], [`ChatEventTranslator`]): the Chat
//!   decoder's events and final `chat.completion` become Anthropic-shaped events and an
//!   Anthropic message: text and `tool_use` blocks (input parsed), `finish_reason` `stop` /
//!   `length` / `tool_calls` / `content_filter` → `end_turn` / `max_tokens` / `tool_use` /
//!   `refusal`, and usage `prompt_tokens` / `completion_tokens` / `cached_tokens` →
//!   `input_tokens` (uncached) / `output_tokens` / `cache_read_input_tokens`. Reasoning text
//!   (`reasoning_content`, else `reasoning`) becomes a `thinking` block with an empty
//!   `signature`, the message's first block. It goes back as `reasoning_content` on an assistant
//!   message with `tool_calls` only: DeepSeek's thinking mode (and Kimi's, vLLM's reasoning
//!   parsers) answer a tool-call turn whose reasoning is missing with a 400, while reasoning on
//!   other assistant messages is ignored by some servers and refused by others (the first
//!   `deepseek-reasoner`). Signed thinking (an Anthropic response in the same history) is
//!   never sent.
//!
//! The Responses API is translated by [`super::responses`].

use serde_json::{Map, Value, json};

use super::model::{ModelEvent, ModelStream};
use super::wire::{
    self, NOT_PASSED_THROUGH, PartShapes, SealedCall, TranslateEvents, block_type, function_fields,
    joined_text, parse_arguments, record_sealed, signature, translated, unsealed_calls,
};
use crate::decode::DecodeEvent;

/// Which request field carries the output limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MaxTokensField {
    /// `max_completion_tokens`: OpenAI's current name (reasoning models refuse `max_tokens`).
    #[default]
    MaxCompletionTokens,
    /// `max_tokens`: the older name, the one most OpenAI-compatible servers understand.
    MaxTokens,
}

/// How requests are translated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChatOptions {
    /// The field for `max_tokens`.
    pub max_tokens_field: MaxTokensField,
}

/// Translates an Anthropic Messages request body into a Chat Completions request body.
pub fn chat_request(request: &Value, options: ChatOptions) -> Value {
    let empty = Map::new();
    let fields = request.as_object().unwrap_or(&empty);
    let mut out = Map::new();
    if let Some(model) = fields.get("model") {
        out.insert("model".to_owned(), model.clone());
    }
    let messages = fields
        .get("messages")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    out.insert(
        "messages".to_owned(),
        Value::Array(chat_messages(fields.get("system"), messages)),
    );
    let tools = fields
        .get("tools")
        .and_then(Value::as_array)
        .map(|tools| chat_tools(tools))
        .unwrap_or_default();
    let has_tools = !tools.is_empty();
    if has_tools {
        out.insert("tools".to_owned(), Value::Array(tools));
        if let Some(choice) = fields.get("tool_choice") {
            let (choice, parallel) = chat_tool_choice(choice);
            if let Some(choice) = choice {
                out.insert("tool_choice".to_owned(), choice);
            }
            if let Some(parallel) = parallel {
                out.insert("parallel_tool_calls".to_owned(), Value::Bool(parallel));
            }
        }
    }
    // A `max_completion_tokens` the host set (`AgentConfig::extra`) is the limit, and passes
    // through below: `max_tokens` beside it would be refused by reasoning models.
    if let Some(max) = fields
        .get("max_tokens")
        .filter(|m| m.is_number() && !fields.contains_key("max_completion_tokens"))
    {
        let key = match options.max_tokens_field {
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
            MaxTokensField::MaxTokens => "max_tokens",
        };
        out.insert(key.to_owned(), max.clone());
    }
    if let Some(stops) = fields
        .get("stop_sequences")
        .and_then(Value::as_array)
        .filter(|s| !s.is_empty())
    {
        out.insert("stop".to_owned(), Value::Array(stops.clone()));
    }
    if fields.get("stream").and_then(Value::as_bool) == Some(true) {
        out.insert("stream".to_owned(), Value::Bool(true));
        // Usage comes in a last chunk only when asked for. The request's own options (a
        // host's) are sent with it; `null` sends none (a server that refuses the field).
        match fields.get("stream_options") {
            Some(Value::Null) => {}
            Some(Value::Object(options)) => {
                let mut options = options.clone();
                options.entry("include_usage").or_insert(Value::Bool(true));
                out.insert("stream_options".to_owned(), Value::Object(options));
            }
            _ => {
                out.insert("stream_options".to_owned(), json!({"include_usage": true}));
            }
        }
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
    Value::Object(out)
}

/// Translates a system prompt and Anthropic messages into Chat Completions messages.
pub fn chat_messages(system: Option<&Value>, messages: &[Value]) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len() + 1);
    if let Some(system) = system {
        let text = joined_text(system);
        if !text.is_empty() {
            out.push(json!({"role": "system", "content": text}));
        }
    }
    for message in messages {
        let content = message.get("content").unwrap_or(&Value::Null);
        match message.get("role").and_then(Value::as_str) {
            Some("assistant") => out.push(assistant_message(content)),
            _ => user_messages(content, &mut out),
        }
    }
    out
}

/// Translates Anthropic tool definitions into Chat Completions function tools. Server tools
/// (a `type` other than `custom`, and no `input_schema`) have no equivalent and are left out.
pub fn chat_tools(tools: &[Value]) -> Vec<Value> {
    tools
        .iter()
        .filter_map(function_fields)
        .map(|function| json!({"type": "function", "function": function}))
        .collect()
}

/// `tool_choice` and `parallel_tool_calls` from Anthropic's `tool_choice`.
fn chat_tool_choice(choice: &Value) -> (Option<Value>, Option<bool>) {
    let parallel = choice
        .get("disable_parallel_tool_use")
        .and_then(Value::as_bool)
        .map(|disabled| !disabled);
    let translated = match choice.get("type").and_then(Value::as_str) {
        Some("auto") => Some(json!("auto")),
        Some("any") => Some(json!("required")),
        Some("none") => Some(json!("none")),
        Some("tool") => choice
            .get("name")
            .map(|name| json!({"type": "function", "function": {"name": name}})),
        _ => None,
    };
    (translated, parallel)
}

fn assistant_message(content: &Value) -> Value {
    let blocks = match content {
        Value::Array(blocks) => blocks.as_slice(),
        other => return json!({"role": "assistant", "content": joined_text(other)}),
    };
    let text = joined_text(content);
    let reasoning = blocks
        .iter()
        .filter(|b| block_type(b) == "thinking" && signature(b).is_none())
        .filter_map(|b| b.get("thinking").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n\n");
    let calls: Vec<Value> = blocks
        .iter()
        .filter(|b| block_type(b) == "tool_use")
        .map(|b| {
            let input = b.get("input").cloned().unwrap_or_else(|| json!({}));
            json!({
                "id": b.get("id").cloned().unwrap_or(Value::Null),
                "type": "function",
                "function": {
                    "name": b.get("name").cloned().unwrap_or(Value::Null),
                    "arguments": input.to_string(),
                },
            })
        })
        .collect();
    let mut message = Map::new();
    message.insert("role".to_owned(), json!("assistant"));
    let content = if text.is_empty() && !calls.is_empty() {
        Value::Null
    } else {
        Value::String(text)
    };
    message.insert("content".to_owned(), content);
    if !calls.is_empty() {
        if !reasoning.is_empty() {
            message.insert("reasoning_content".to_owned(), Value::String(reasoning));
        }
        message.insert("tool_calls".to_owned(), Value::Array(calls));
    }
    Value::Object(message)
}

/// Chat Completions' parts: `text`, `image_url`, `file` parts, and `tool` messages.
const CHAT_PARTS: PartShapes = PartShapes {
    text: |text| json!({"type": "text", "text": text}),
    image: |url| json!({"type": "image_url", "image_url": {"url": url}}),
    file: |filename, data| json!({"type": "file", "file": {"filename": filename, "file_data": data}}),
    tool_output: |id, text| json!({"role": "tool", "tool_call_id": id, "content": text}),
    holds: "text, images by URL or base64 and PDF documents",
};

/// A user message: its tool results as `tool` messages (in order, so they follow the assistant
/// message that asked for them), then one user message with the rest.
fn user_messages(content: &Value, out: &mut Vec<Value>) {
    let blocks = match content {
        Value::Array(blocks) => blocks,
        other => {
            out.push(json!({"role": "user", "content": joined_text(other)}));
            return;
        }
    };
    let (mut tool_messages, parts) = CHAT_PARTS.user_side(blocks);
    let any_tool = !tool_messages.is_empty();
    out.append(&mut tool_messages);
    match parts.as_slice() {
        [] if any_tool => {}
        [] => out.push(json!({"role": "user", "content": ""})),
        [only] if block_type(only) == "text" => {
            out.push(json!({"role": "user", "content": only["text"].clone()}));
        }
        _ => out.push(json!({"role": "user", "content": parts})),
    }
}

/// The loop's stop reason for a Chat Completions `finish_reason`. Calls present mean `tool_use`
/// unless the output was cut (some compatible servers answer `stop` with tool calls).
pub fn stop_reason(finish_reason: Option<&str>, has_tool_calls: bool) -> &'static str {
    match finish_reason {
        Some("length") => "max_tokens",
        Some("content_filter") => "refusal",
        _ if has_tool_calls => "tool_use",
        _ => "end_turn",
    }
}

/// Anthropic-shaped usage from Chat Completions usage (`null` when there is none).
/// `prompt_tokens` includes the cached tokens; Anthropic's `input_tokens` does not.
pub fn anthropic_usage(usage: &Value) -> Value {
    wire::usage_from(
        usage,
        "prompt_tokens",
        "prompt_tokens_details",
        "completion_tokens",
    )
}

/// Where a content block of the translated message comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Thinking,
    Text,
    Tool(usize),
}

/// Translates a `chat.completion` (its first choice) into an Anthropic message, text first.
pub fn message_from_chat_completion(completion: &Value) -> Value {
    assemble(completion, None, None)
}

/// The Anthropic message of `completion`, blocks in `order` (else thinking, text, calls), with
/// `reasoning` as the thinking when the stream's reasoning was followed (else the message's).
fn assemble(completion: &Value, order: Option<&[Slot]>, reasoning: Option<&str>) -> Value {
    let choice = completion
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c.is_object()));
    let message = choice.and_then(|c| c.get("message"));
    let field = |key: &str| {
        message
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let mut text = field("content").to_owned();
    text.push_str(field("refusal"));
    // A whole message's reasoning is in one field: `reasoning_content`, else `reasoning`
    // (servers sending both send the same text twice). A stream may switch fields from one
    // delta to the next, so there the translator's own record is the text.
    let reasoning = reasoning.unwrap_or_else(|| {
        Some(field("reasoning_content"))
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| field("reasoning"))
    });
    let calls = message
        .and_then(|m| m.get("tool_calls"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let tool_block = |call: &Value| {
        let function = call.get("function");
        // Strings, as the decoder reports them ("" when missing or of another kind): the loop
        // matches the stream's calls to the message's blocks by them.
        let name = function
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        let id = call.get("id").and_then(Value::as_str).unwrap_or_default();
        let arguments = function.and_then(|f| f.get("arguments"));
        // A JSON object is the input itself (servers that send one instead of a string).
        let input = match arguments {
            Some(object @ Value::Object(_)) => object.clone(),
            other => parse_arguments(other.and_then(Value::as_str).unwrap_or("")),
        };
        json!({
            "type": "tool_use",
            "id": id,
            "name": name,
            "input": input,
        })
    };
    let default_order: Vec<Slot>;
    let order = match order {
        Some(order) => order,
        None => {
            default_order = [Slot::Thinking, Slot::Text]
                .into_iter()
                .chain((0..calls.len()).map(Slot::Tool))
                .collect();
            &default_order
        }
    };
    let mut content = Vec::with_capacity(calls.len() + 2);
    let mut thinking_done = false;
    let mut text_done = false;
    let mut tools_done = vec![false; calls.len()];
    // Blocks in the order the stream opened them, then anything it did not announce.
    let trailing = [Slot::Thinking, Slot::Text]
        .into_iter()
        .chain((0..calls.len()).map(Slot::Tool));
    for slot in order.iter().copied().chain(trailing) {
        match slot {
            Slot::Thinking if !thinking_done => {
                thinking_done = true;
                if !reasoning.is_empty() {
                    content
                        .push(json!({"type": "thinking", "thinking": reasoning, "signature": ""}));
                }
            }
            Slot::Text if !text_done => {
                text_done = true;
                if !text.is_empty() {
                    content.push(json!({"type": "text", "text": text}));
                }
            }
            Slot::Tool(i) if tools_done.get(i) == Some(&false) => {
                tools_done[i] = true;
                content.push(tool_block(&calls[i]));
            }
            _ => {}
        }
    }
    let finish = choice
        .and_then(|c| c.get("finish_reason"))
        .and_then(Value::as_str);
    let stop = if choice.is_some() && finish.is_some() {
        Value::String(stop_reason(finish, !calls.is_empty()).to_owned())
    } else {
        Value::Null
    };
    json!({
        "id": completion.get("id").cloned().unwrap_or(json!("")),
        "type": "message",
        "role": "assistant",
        "model": completion.get("model").cloned().unwrap_or(json!("")),
        "content": content,
        "stop_reason": stop,
        "stop_sequence": null,
        "usage": anthropic_usage(completion.get("usage").unwrap_or(&Value::Null)),
    })
}

/// Translates the Chat decoder's events (first choice) into the events an Anthropic stream
/// would have produced: text in one text block, each tool call in its own block, block indices
/// in order of appearance, finish reason and usage in Anthropic terms. Then translates the final
/// message with the same block order.
#[derive(Debug, Default)]
pub struct ChatEventTranslator {
    slots: Vec<Slot>,
    thinking_block: Option<usize>,
    /// The first choice's reasoning as the decoder reported it, delta by delta.
    reasoning: String,
    text_block: Option<usize>,
    tool_blocks: Vec<Option<usize>>,
    /// The tool calls already reported sealed (ready, invalid or truncated), as reported: what
    /// runs (or is answered), and so what the recorded message says, whatever fragments a
    /// server sends after the seal.
    sealed: Vec<SealedCall>,
    /// Reused for the decoded events of one model event (no allocation per event).
    scratch: Vec<DecodeEvent>,
}

impl ChatEventTranslator {
    /// A translator for one stream.
    pub fn new() -> Self {
        Self::default()
    }

    fn text_block(&mut self, out: &mut Vec<DecodeEvent>) -> usize {
        if let Some(index) = self.text_block {
            return index;
        }
        let index = self.slots.len();
        self.slots.push(Slot::Text);
        self.text_block = Some(index);
        out.push(DecodeEvent::BlockStart {
            index,
            block: json!({"type": "text", "text": ""}),
        });
        index
    }

    fn thinking_block(&mut self, out: &mut Vec<DecodeEvent>) -> usize {
        if let Some(index) = self.thinking_block {
            return index;
        }
        let index = self.slots.len();
        self.slots.push(Slot::Thinking);
        self.thinking_block = Some(index);
        out.push(DecodeEvent::BlockStart {
            index,
            block: json!({"type": "thinking", "thinking": "", "signature": ""}),
        });
        index
    }

    /// The block index of tool call `tool`, and whether it is new.
    fn tool_block(&mut self, tool: usize) -> (usize, bool) {
        if self.tool_blocks.len() <= tool {
            self.tool_blocks.resize(tool + 1, None);
        }
        if let Some(index) = self.tool_blocks[tool] {
            return (index, false);
        }
        let index = self.slots.len();
        self.slots.push(Slot::Tool(tool));
        self.tool_blocks[tool] = Some(index);
        (index, true)
    }

    fn has_tools(&self) -> bool {
        self.slots.iter().any(|s| matches!(s, Slot::Tool(_)))
    }

    /// Translates one decoder event into `out`.
    pub fn translate(&mut self, event: DecodeEvent, out: &mut Vec<DecodeEvent>) {
        match event {
            DecodeEvent::MessageStart { message } => {
                let mut start = assemble(&message, Some(&[][..]), Some(""));
                start["content"] = json!([]);
                start["stop_reason"] = Value::Null;
                out.push(DecodeEvent::MessageStart { message: start });
            }
            DecodeEvent::TextDelta { index: 0, text }
            | DecodeEvent::RefusalDelta {
                index: 0,
                refusal: text,
            } => {
                let index = self.text_block(out);
                out.push(DecodeEvent::TextDelta { index, text });
            }
            DecodeEvent::TextDelta { .. } | DecodeEvent::RefusalDelta { .. } => {}
            // Reasoning (`reasoning_content`, `reasoning`) is a thinking block of its own (see
            // the module docs for when it is sent back). Other choices' reasoning is dropped
            // like their text.
            DecodeEvent::ThinkingDelta { index: 0, thinking } => {
                let index = self.thinking_block(out);
                self.reasoning.push_str(&thinking);
                out.push(DecodeEvent::ThinkingDelta { index, thinking });
            }
            DecodeEvent::ThinkingDelta { .. } => {}
            DecodeEvent::BlockStart { index, block } => {
                let (index, new) = self.tool_block(index);
                if new {
                    let function = block.get("function");
                    let name = function
                        .and_then(|f| f.get("name"))
                        .cloned()
                        .unwrap_or(json!(""));
                    out.push(DecodeEvent::BlockStart {
                        index,
                        block: json!({"type": "tool_use", "id": block.get("id").cloned().unwrap_or(json!("")), "name": name, "input": {}}),
                    });
                }
            }
            DecodeEvent::InputJsonDelta {
                index,
                partial_json,
            } => {
                let (index, _) = self.tool_block(index);
                out.push(DecodeEvent::InputJsonDelta {
                    index,
                    partial_json,
                });
            }
            mut event @ (DecodeEvent::ToolUseReady { .. }
            | DecodeEvent::ToolUseInvalid { .. }
            | DecodeEvent::ToolUseTruncated { .. }) => {
                let Some(call) = event.sealed_call() else {
                    return;
                };
                let (index, _) = self.tool_block(call.index);
                self.sealed.push(SealedCall::at(index, call));
                if let Some(at) = event.index_mut() {
                    *at = index;
                }
                out.push(event);
                out.push(DecodeEvent::BlockStop { index });
            }
            DecodeEvent::MessageDelta { delta, usage } => {
                let delta = match delta.get("finish_reason").and_then(Value::as_str) {
                    Some(reason) => {
                        json!({"stop_reason": stop_reason(Some(reason), self.has_tools()), "stop_sequence": null})
                    }
                    None => json!({}),
                };
                out.push(DecodeEvent::MessageDelta {
                    delta,
                    usage: anthropic_usage(&usage),
                });
            }
            DecodeEvent::MessageStop => {
                let mut open: Vec<usize> = self
                    .thinking_block
                    .into_iter()
                    .chain(self.text_block)
                    .collect();
                open.sort_unstable();
                for index in open {
                    out.push(DecodeEvent::BlockStop { index });
                }
                out.push(DecodeEvent::MessageStop);
            }
            other => out.push(other),
        }
    }

    /// The final `chat.completion` as an Anthropic message, blocks in stream order.
    pub fn message(&self, completion: &Value) -> Value {
        assemble(completion, Some(&self.slots), Some(&self.reasoning))
    }

    /// Translates one item of a model stream whose decoded events and final message are in the
    /// Chat Completions shape, appending the result to `out`. A call the stream never sealed (a
    /// server that ends without a `finish_reason`) is reported ready before the final message, so
    /// it runs and is answered.
    pub fn translate_model_event(&mut self, event: ModelEvent, out: &mut impl Extend<ModelEvent>) {
        self.dispatch(event, out);
    }
}

impl TranslateEvents for ChatEventTranslator {
    fn translate_decoded(&mut self, event: DecodeEvent, out: &mut Vec<DecodeEvent>) {
        self.translate(event, out);
    }

    fn loop_message(&self, message: &Value) -> Value {
        self.message(message)
    }

    fn complete(&mut self, completion: &Value) -> (Value, Vec<DecodeEvent>) {
        let mut message = self.message(completion);
        // A whole answer without a `finish_reason` (servers that send none, or `null` on every
        // chunk, before `[DONE]`): its calls were sealed at `[DONE]`, and they run, as `stop`
        // with calls does.
        if message.get("stop_reason").is_some_and(Value::is_null) {
            let has_calls = message
                .get("content")
                .and_then(Value::as_array)
                .is_some_and(|blocks| blocks.iter().any(|b| block_type(b) == "tool_use"));
            message["stop_reason"] = Value::String(stop_reason(None, has_calls).to_owned());
        }
        // Fragments after a call was sealed (a server streaming past its finish reason) changed
        // the message's call but not what runs: record what runs.
        record_sealed(&mut message, &self.sealed);
        let before = unsealed_calls(&message, &self.sealed);
        (message, before)
    }

    fn scratch(&mut self) -> &mut Vec<DecodeEvent> {
        &mut self.scratch
    }
}

/// Wraps a model stream in the Chat Completions shape into one in the loop's shape.
pub fn translate_chat_stream(stream: ModelStream) -> ModelStream {
    translated(stream, ChatEventTranslator::new())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::decode::{EventDecoder, OpenAiChatDecoder};

    #[test]
    fn requests_translate_system_tools_limits_and_extras() {
        let request = json!({
            "model": "gpt-4o",
            "max_tokens": 512,
            "system": [{"type": "text", "text": "Be terse.", "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [
                {"name": "read", "description": "Read a file", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}, "cache_control": {"type": "ephemeral"}},
                {"type": "web_search_20250305", "name": "web_search"},
            ],
            "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
            "stop_sequences": ["END"],
            "stream": true,
            "temperature": 0.2,
            "thinking": {"type": "enabled", "budget_tokens": 1000},
            "top_k": 5,
            "metadata": {"user_id": "u1"},
        });
        let chat = chat_request(&request, ChatOptions::default());
        assert_eq!(
            chat,
            json!({
                "model": "gpt-4o",
                "messages": [
                    {"role": "system", "content": "Be terse."},
                    {"role": "user", "content": "hi"},
                ],
                "tools": [{"type": "function", "function": {"name": "read", "description": "Read a file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}],
                "tool_choice": "required",
                "parallel_tool_calls": false,
                "max_completion_tokens": 512,
                "stop": ["END"],
                "stream": true,
                "stream_options": {"include_usage": true},
                "user": "u1",
                "temperature": 0.2,
            })
        );
        let legacy = chat_request(
            &request,
            ChatOptions {
                max_tokens_field: MaxTokensField::MaxTokens,
            },
        );
        assert_eq!(legacy["max_tokens"], 512);
        assert!(legacy.get("max_completion_tokens").is_none());
    }

    /// Anthropic's request-level fields with no Chat meaning (automatic prompt caching's
    /// top-level `cache_control`, `context_management`) were passed through, and servers that
    /// refuse unknown fields answered 400.
    #[test]
    fn anthropic_request_level_fields_are_not_sent_to_chat() {
        let request = json!({
            "model": "gpt-4o", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}],
            "cache_control": {"type": "ephemeral"},
            "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
        });
        let chat = chat_request(&request, ChatOptions::default());
        assert!(chat.get("cache_control").is_none(), "{chat}");
        assert!(chat.get("context_management").is_none(), "{chat}");
    }

    /// A host whose server needs the other field than the one the client picks (a reasoning
    /// model behind Azure or a gateway refuses `max_tokens`) names it in the request's extra
    /// fields; only that one is sent, never both (OpenAI refuses a request with both).
    #[test]
    fn an_explicit_output_limit_field_replaces_the_translated_one() {
        let request = json!({
            "model": "o3",
            "max_tokens": 512,
            "max_completion_tokens": 4096,
            "messages": [{"role": "user", "content": "hi"}],
        });
        let chat = chat_request(
            &request,
            ChatOptions {
                max_tokens_field: MaxTokensField::MaxTokens,
            },
        );
        assert_eq!(chat["max_completion_tokens"], 4096);
        assert!(chat.get("max_tokens").is_none(), "{chat}");
    }

    #[test]
    fn parallel_tool_calls_and_their_results_keep_their_order() {
        let messages = vec![
            json!({"role": "user", "content": [{"type": "text", "text": "look"}]}),
            json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "s"},
                {"type": "text", "text": "Reading both."},
                {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a"}},
                {"type": "tool_use", "id": "t2", "name": "read", "input": {"path": "b"}},
            ]}),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "A"},
                {"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": "B1"}, {"type": "text", "text": "B2"}], "is_error": true},
                {"type": "text", "text": "Resume directly."},
            ]}),
            json!({"role": "assistant", "content": [
                {"type": "tool_use", "id": "t3", "name": "glob", "input": {}},
            ]}),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t3", "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}},
                ]},
            ]}),
        ];
        let chat = chat_messages(None, &messages);
        assert_eq!(
            chat,
            vec![
                json!({"role": "user", "content": "look"}),
                json!({"role": "assistant", "content": "Reading both.", "tool_calls": [
                    {"id": "t1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}},
                    {"id": "t2", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"b\"}"}},
                ]}),
                json!({"role": "tool", "tool_call_id": "t1", "content": "A"}),
                json!({"role": "tool", "tool_call_id": "t2", "content": "Error: B1\n\nB2"}),
                json!({"role": "user", "content": "Resume directly."}),
                json!({"role": "assistant", "content": null, "tool_calls": [
                    {"id": "t3", "type": "function", "function": {"name": "glob", "arguments": "{}"}},
                ]}),
                json!({"role": "tool", "tool_call_id": "t3", "content": "(the result is the image in the next message)"}),
                json!({"role": "user", "content": [
                    {"type": "text", "text": "Image returned by tool call t3:"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
                ]}),
            ]
        );
    }

    /// A Chat `tool` message holds text only. A tool's document blocks (Anthropic takes them in
    /// results) were dropped without a trace, the model reading an empty result: a text
    /// document goes as its text, anything else as a note saying what was left out.
    #[test]
    fn documents_returned_by_tools_reach_the_model_as_text_or_a_note() {
        let messages = vec![
            json!({"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "fetch", "input": {}},
            ]}),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": [
                    {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "The notes."}},
                    {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBER"}},
                ]},
            ]}),
        ];
        let chat = chat_messages(None, &messages);
        let tool = &chat[1];
        assert_eq!(tool["role"], "tool");
        let content = tool["content"].as_str().unwrap();
        assert!(content.starts_with("The notes."), "{content}");
        assert!(content.contains("application/pdf"), "{content}");
    }

    /// A `tool` message has no error flag: a failed call's result read like a successful one,
    /// and the model went on as if the tool had worked. The translated content says so.
    #[test]
    fn an_error_result_says_so_in_its_tool_message() {
        let messages = vec![
            json!({"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "read", "input": {}},
                {"type": "tool_use", "id": "t2", "name": "read", "input": {}},
                {"type": "tool_use", "id": "t3", "name": "read", "input": {}},
            ]}),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "no such file", "is_error": true},
                {"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": "Error: denied"}], "is_error": true},
                {"type": "tool_result", "tool_use_id": "t3", "content": "fine", "is_error": false},
            ]}),
        ];
        let chat = chat_messages(None, &messages);
        assert_eq!(chat[1]["content"], "Error: no such file");
        // A message that already says it is not said twice.
        assert_eq!(chat[2]["content"], "Error: denied");
        assert_eq!(chat[3]["content"], "fine");
    }

    /// Chat Completions takes a PDF in a user message as a `file` part with a data URL; a
    /// user's own PDF document was dropped (the model never saw it, and a message holding
    /// only the PDF went out empty). Documents Chat has no part for become a note.
    #[test]
    fn a_user_s_pdf_document_becomes_a_file_part() {
        let messages = vec![json!({"role": "user", "content": [
            {"type": "document", "title": "report.pdf", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBER"}},
            {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBEX"}},
            {"type": "document", "source": {"type": "content", "content": [{"type": "text", "text": "Chunk."}]}},
            {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}},
            {"type": "text", "text": "Summarise."},
        ]})];
        let chat = chat_messages(None, &messages);
        let parts = chat[0]["content"].as_array().unwrap();
        assert_eq!(
            parts[0],
            json!({"type": "file", "file": {"filename": "report.pdf", "file_data": "data:application/pdf;base64,JVBER"}})
        );
        assert_eq!(parts[1]["type"], "file");
        assert_eq!(
            parts[1]["file"]["file_data"],
            "data:application/pdf;base64,JVBEX"
        );
        assert!(
            parts[1]["file"]["filename"]
                .as_str()
                .unwrap()
                .ends_with(".pdf")
        );
        assert_eq!(parts[2], json!({"type": "text", "text": "Chunk."}));
        assert_eq!(parts[3]["type"], "text");
        assert!(
            parts[3]["text"]
                .as_str()
                .unwrap()
                .contains("https://example.com/a.pdf"),
            "{}",
            parts[3]
        );
        assert_eq!(parts[4], json!({"type": "text", "text": "Summarise."}));
        // Alone, it is still sent (not an empty user message).
        let only = vec![json!({"role": "user", "content": [
            {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBER"}},
        ]})];
        assert_eq!(chat_messages(None, &only)[0]["content"][0]["type"], "file");
    }

    /// `stream_options` the request holds replaces the default (a host's extra options keep
    /// usage on), and `null` (a server that refused the field) sends none.
    #[test]
    fn a_request_s_stream_options_replace_the_default_and_null_sends_none() {
        let mut request = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
            "stream": true, "stream_options": {"continuous_usage_stats": true}});
        let chat = chat_request(&request, ChatOptions::default());
        assert_eq!(
            chat["stream_options"],
            json!({"continuous_usage_stats": true, "include_usage": true})
        );
        request["stream_options"] = Value::Null;
        let chat = chat_request(&request, ChatOptions::default());
        assert!(chat.get("stream_options").is_none(), "{chat}");
        assert_eq!(chat["stream"], true);
    }

    #[test]
    fn reasoning_goes_back_with_tool_calls_only_and_signed_thinking_never() {
        let call = json!({"type": "tool_use", "id": "c1", "name": "read", "input": {}});
        let messages = [
            json!({"role": "user", "content": "go"}),
            json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Plan.", "signature": ""}, call.clone()]}),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "x"}]}),
            json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Done.", "signature": ""},
                {"type": "text", "text": "Read."}]}),
            json!({"role": "user", "content": "more"}),
            json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Signed.", "signature": "sig"}, call]}),
        ];
        let chat = chat_messages(None, &messages);
        let assistants: Vec<&Value> = chat.iter().filter(|m| m["role"] == "assistant").collect();
        assert_eq!(assistants[0]["reasoning_content"], "Plan.");
        assert_eq!(assistants[0]["content"], Value::Null);
        assert_eq!(
            assistants[1],
            &json!({"role": "assistant", "content": "Read."})
        );
        assert!(
            assistants[2].get("reasoning_content").is_none(),
            "{}",
            assistants[2]
        );
    }

    #[test]
    fn streamed_reasoning_opens_the_first_block() {
        let chunk = |delta: Value, finish: Value| {
            json!({"id": "c", "object": "chat.completion.chunk", "model": "m",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        };
        let mut sse = String::new();
        for c in [
            chunk(
                json!({"role": "assistant", "reasoning_content": "A"}),
                Value::Null,
            ),
            chunk(json!({"reasoning": "B"}), Value::Null),
            chunk(json!({"content": "Hi"}), Value::Null),
            chunk(json!({}), json!("stop")),
        ] {
            sse.push_str(&format!("data: {c}\n\n"));
        }
        sse.push_str("data: [DONE]\n\n");
        let (events, message) = decode_translated(&sse);
        let starts: Vec<(usize, &str)> = events
            .iter()
            .filter_map(|e| match e {
                DecodeEvent::BlockStart { index, block } => {
                    Some((*index, block["type"].as_str().unwrap()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(starts, [(0, "thinking"), (1, "text")]);
        let stops: Vec<usize> = events
            .iter()
            .filter_map(|e| match e {
                DecodeEvent::BlockStop { index } => Some(*index),
                _ => None,
            })
            .collect();
        assert_eq!(stops, [0, 1]);
        assert_eq!(
            message["content"],
            json!([
                {"type": "thinking", "thinking": "AB", "signature": ""},
                {"type": "text", "text": "Hi"},
            ])
        );
    }

    #[test]
    fn user_images_become_image_url_parts() {
        let messages = vec![json!({"role": "user", "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
        ]})];
        assert_eq!(
            chat_messages(Some(&json!("sys")), &messages),
            vec![
                json!({"role": "system", "content": "sys"}),
                json!({"role": "user", "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                ]}),
            ]
        );
    }

    /// Blocks Chat has no part for (an image from Anthropic's Files API, a search result, a
    /// block type it does not know) were dropped without a trace, from user messages and tool
    /// results alike: a result holding only such an image read as an empty success. A search
    /// result goes as its text, anything else as a note.
    #[test]
    fn blocks_without_a_chat_part_are_never_dropped_silently() {
        let file_image =
            json!({"type": "image", "source": {"type": "file", "file_id": "file_011"}});
        let messages = vec![
            json!({"role": "user", "content": [
                file_image.clone(),
                {"type": "search_result", "source": "https://example.com/doc", "title": "Doc",
                 "content": [{"type": "text", "text": "Found text."}]},
                {"type": "future_block", "data": 1},
            ]}),
            json!({"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "shot", "input": {}},
            ]}),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": [file_image]},
            ]}),
        ];
        let chat = chat_messages(None, &messages);
        let parts = chat[0]["content"].as_array().unwrap();
        assert_eq!(parts.len(), 3, "{parts:#?}");
        assert!(
            parts[0]["text"].as_str().unwrap().contains("image"),
            "{}",
            parts[0]
        );
        let found = parts[1]["text"].as_str().unwrap();
        assert!(
            found.contains("Found text.") && found.contains("Doc"),
            "{found}"
        );
        assert!(parts[2]["text"].as_str().unwrap().contains("future_block"));
        let tool = chat[2]["content"].as_str().unwrap();
        assert!(tool.contains("image"), "{tool:?}");
    }

    #[test]
    fn finish_reasons_and_usage_map_to_anthropic_terms() {
        assert_eq!(stop_reason(Some("stop"), false), "end_turn");
        assert_eq!(stop_reason(Some("stop"), true), "tool_use");
        assert_eq!(stop_reason(Some("tool_calls"), true), "tool_use");
        assert_eq!(stop_reason(Some("tool_calls"), false), "end_turn");
        assert_eq!(stop_reason(Some("length"), true), "max_tokens");
        assert_eq!(stop_reason(Some("content_filter"), false), "refusal");
        assert_eq!(
            anthropic_usage(
                &json!({"prompt_tokens": 1200, "completion_tokens": 30, "total_tokens": 1230, "prompt_tokens_details": {"cached_tokens": 1024}})
            ),
            json!({"input_tokens": 176, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 1024, "output_tokens": 30})
        );
        assert_eq!(anthropic_usage(&Value::Null), Value::Null);
    }

    #[test]
    fn a_completion_becomes_an_anthropic_message() {
        let completion = json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": "Two reads.",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{\"path\": \"a\"}"}},
                    {"id": "c2", "type": "function", "function": {"name": "read", "arguments": ""}},
                ]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5},
        });
        let message = message_from_chat_completion(&completion);
        assert_eq!(
            message["content"],
            json!([
                {"type": "text", "text": "Two reads."},
                {"type": "tool_use", "id": "c1", "name": "read", "input": {"path": "a"}},
                {"type": "tool_use", "id": "c2", "name": "read", "input": {}},
            ])
        );
        assert_eq!(message["stop_reason"], "tool_use");
        assert_eq!(message["usage"]["input_tokens"], 10);
        assert_eq!(message["usage"]["output_tokens"], 5);
    }

    fn decode_translated(sse: &str) -> (Vec<DecodeEvent>, Value) {
        let mut decoder = OpenAiChatDecoder::new();
        let mut raw = Vec::new();
        for line in sse.lines().filter_map(|l| l.strip_prefix("data: ")) {
            decoder.push_event("message", line).unwrap();
            decoder.drain_events(&mut raw);
        }
        let mut translator = ChatEventTranslator::new();
        let mut events = Vec::new();
        for event in raw {
            translator.translate(event, &mut events);
        }
        let message = translator.message(&decoder.finish().unwrap());
        (events, message)
    }

    #[test]
    fn stream_events_translate_to_anthropic_blocks_in_order() {
        let chunk = |delta: Value, finish: Value| {
            json!({"id": "c", "object": "chat.completion.chunk", "model": "m",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        };
        let chunks = [
            chunk(json!({"role": "assistant", "content": ""}), Value::Null),
            chunk(json!({"content": "Hel"}), Value::Null),
            chunk(json!({"content": "lo"}), Value::Null),
            chunk(
                json!({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "read", "arguments": "{\"pa"}}]}),
                Value::Null,
            ),
            chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": "th\":\"a\"}"}}]}),
                Value::Null,
            ),
            chunk(
                json!({"tool_calls": [{"index": 1, "id": "c2", "type": "function", "function": {"name": "glob", "arguments": "{}"}}]}),
                Value::Null,
            ),
            chunk(json!({}), json!("tool_calls")),
            json!({"id": "c", "object": "chat.completion.chunk", "model": "m", "choices": [],
                   "usage": {"prompt_tokens": 7, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 2}}}),
        ];
        let mut sse = String::new();
        for c in chunks {
            sse.push_str(&format!("data: {c}\n\n"));
        }
        sse.push_str("data: [DONE]\n\n");
        let (events, message) = decode_translated(&sse);
        let ready: Vec<(usize, &str)> = events
            .iter()
            .filter_map(|e| match e {
                DecodeEvent::ToolUseReady { index, id, .. } => Some((*index, id.as_str())),
                _ => None,
            })
            .collect();
        // The first call is sealed when the second starts, before the finish reason.
        assert_eq!(ready, vec![(1, "c1"), (2, "c2")]);
        let text: String = events
            .iter()
            .filter_map(|e| match e {
                DecodeEvent::TextDelta { index: 0, text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(text, "Hello");
        assert!(events.iter().any(|e| matches!(e, DecodeEvent::MessageDelta { delta, .. } if delta["stop_reason"] == "tool_use")));
        assert!(events.iter().any(|e| matches!(e, DecodeEvent::MessageDelta { usage, .. } if usage["cache_read_input_tokens"] == 2 && usage["input_tokens"] == 5)));
        assert_eq!(
            message["content"],
            json!([
                {"type": "text", "text": "Hello"},
                {"type": "tool_use", "id": "c1", "name": "read", "input": {"path": "a"}},
                {"type": "tool_use", "id": "c2", "name": "glob", "input": {}},
            ])
        );
        assert_eq!(message["stop_reason"], "tool_use");
        assert_eq!(message["id"], "c");
    }

    /// A call whose id or name is not a string gets "" in the message, as the decoder reports it
    /// (the loop then gives the call an id of its own), never a number in a `tool_use` block.
    #[test]
    fn ids_and_names_that_are_not_strings_become_empty() {
        let completion = json!({"id": "c", "model": "m", "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": 5, "type": "function", "function": {"name": ["read"], "arguments": "{}"}}]}}]});
        let message = message_from_chat_completion(&completion);
        assert_eq!(
            message["content"],
            json!([{"type": "tool_use", "id": "", "name": "", "input": {}}])
        );
    }

    /// What the translator makes of the stream's final `chat.completion`.
    fn complete(translator: &mut ChatEventTranslator, completion: Value) -> Vec<ModelEvent> {
        let mut out = Vec::new();
        translator.translate_model_event(
            ModelEvent::Completed {
                message: completion,
                time_to_first_token: None,
                request_id: None,
            },
            &mut out,
        );
        out
    }

    /// A translator that saw call `c1` (`read`, block 0) start and be sealed with `{"path": "a"}`.
    fn translator_with_a_sealed_call() -> ChatEventTranslator {
        let mut translator = ChatEventTranslator::new();
        let mut events = Vec::new();
        translator.translate(
            DecodeEvent::BlockStart {
                index: 0,
                block: json!({"id": "c1", "type": "function", "function": {"name": "read"}}),
            },
            &mut events,
        );
        translator.translate(
            DecodeEvent::ToolUseReady {
                index: 0,
                id: "c1".to_owned(),
                name: "read".to_owned(),
                input: json!({"path": "a"}),
            },
            &mut events,
        );
        translator
    }

    /// Fragments a server sends after a call was sealed (past its finish reason) change the
    /// completion's call; the recorded message keeps the id, name and input the call was sealed
    /// (and run) with.
    #[test]
    fn the_message_records_the_input_a_call_was_sealed_with() {
        let mut translator = translator_with_a_sealed_call();
        let completion = json!({"id": "c", "model": "m", "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "c1late", "type": "function", "function": {"name": "readlate", "arguments": "{\"path\":\"a\"} late"}}]}}]});
        let out = complete(&mut translator, completion);
        let [ModelEvent::Completed { message, .. }] = out.as_slice() else {
            panic!("{out:#?}");
        };
        assert_eq!(
            message["content"][0],
            json!({"type": "tool_use", "id": "c1", "name": "read", "input": {"path": "a"}})
        );
    }

    /// Sealed calls are tracked by block, not by id: a second call repeating the id of a sealed
    /// one is still reported (before, it was taken for the sealed one and never ran).
    #[test]
    fn a_call_repeating_a_sealed_calls_id_is_still_reported() {
        let mut translator = translator_with_a_sealed_call();
        let call = |path: &str| json!({"id": "c1", "type": "function", "function": {"name": "read", "arguments": format!("{{\"path\":\"{path}\"}}")}});
        let completion = json!({"id": "c", "model": "m", "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null, "tool_calls": [call("a"), call("b")]}}]});
        let out = complete(&mut translator, completion);
        assert_eq!(out.len(), 2, "{out:#?}");
        assert!(
            matches!(&out[0], ModelEvent::Decoded(DecodeEvent::ToolUseReady { index: 1, id, input, .. }) if id == "c1" && input["path"] == "b"),
            "{out:#?}"
        );
    }

    #[test]
    fn a_call_never_sealed_is_reported_before_the_final_message() {
        let mut translator = ChatEventTranslator::new();
        let completion = json!({"id": "c", "model": "m", "choices": [{"index": 0, "finish_reason": "stop", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "c9", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"x\"}"}}]}}]});
        let out = complete(&mut translator, completion);
        assert!(
            matches!(&out[0], ModelEvent::Decoded(DecodeEvent::ToolUseReady { id, input, .. }) if id == "c9" && input["path"] == "x")
        );
        assert!(
            matches!(&out[1], ModelEvent::Completed { message, .. } if message["stop_reason"] == "tool_use")
        );
    }
}
