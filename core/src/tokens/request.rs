//! Request-level estimates over provider JSON (`serde_json::Value`): system prompt, tool
//! definitions, messages and their content blocks.
//!
//! Works on the Anthropic Messages shape (`system`, `tools[].input_schema`, typed content blocks)
//! on the OpenAI Chat shape (`role: system` messages, `tools[].function`, `image_url` parts,
//! `tool_calls`) and on the OpenAI Responses shape (`instructions`, `input` items). Unknown block
//! types are estimated from their canonical JSON, so nothing is silently counted as zero.

use serde_json::Value;

use super::defined_tools::{DefinedTool, UNDOCUMENTED_DEFINED_TOOL_TOKENS, anthropic_defined_tool};
use super::model::{Family, estimate_text};
use super::{audio, images};

/// Fixed per-request, per-message and per-block costs of a family's chat format.
///
/// OpenAI's are the documented chat-format costs (3 tokens per message, 3 to prime the reply).
/// Anthropic does not publish its framing: its per-message, per-block and per-tool values are
/// conservative guesses (not measured against the API), left to usage anchoring and the
/// correction factor to absorb; the tool preamble is the documented tool-use system prompt (346
/// tokens with `tool_choice` auto).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overheads {
    /// Added once per request (reply priming, framing).
    pub per_request: u64,
    /// Added per message (role markers).
    pub per_message: u64,
    /// Added per non-text content block (block framing, tool ids).
    pub per_block: u64,
    /// Added per tool definition (besides its name, description and schema text).
    pub per_tool: u64,
    /// Added once when the request defines at least one tool (the provider's tool-use prompt).
    pub tools_preamble: u64,
}

impl Overheads {
    /// The overheads of a family.
    pub fn of(family: Family) -> Overheads {
        if family.is_openai() {
            Overheads {
                per_request: 3,
                per_message: 3,
                per_block: 3,
                per_tool: 8,
                tools_preamble: 16,
            }
        } else {
            Overheads {
                per_request: 4,
                per_message: 4,
                per_block: 8,
                per_tool: 12,
                tools_preamble: 346,
            }
        }
    }
}

/// Flat estimate for a `redacted_thinking` block (its payload is encrypted, so its length says
/// nothing reliable about the tokens it stands for).
pub const REDACTED_THINKING_TOKENS: u64 = 1_000;

/// Tokens per PDF page (the top of Anthropic's documented 1,500–3,000 range: text plus the
/// page image).
pub const PDF_PAGE_TOKENS: u64 = 3_000;

/// How text is counted inside requests: the family's estimator, or a caller-supplied counter
/// (e.g. an exact tokenizer). Overheads, images and documents follow the family's rules either way.
#[derive(Clone, Copy)]
pub struct TextCounter<'a> {
    family: Family,
    count: Option<&'a dyn Fn(&str) -> u64>,
}

impl std::fmt::Debug for TextCounter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextCounter")
            .field("family", &self.family)
            .field("custom", &self.count.is_some())
            .finish()
    }
}

impl<'a> TextCounter<'a> {
    /// Text estimated with [`estimate_text`].
    pub fn estimate(family: Family) -> TextCounter<'static> {
        TextCounter {
            family,
            count: None,
        }
    }

    /// Text counted by `count` (overheads and media still follow `family`).
    pub fn with(family: Family, count: &'a dyn Fn(&str) -> u64) -> TextCounter<'a> {
        TextCounter {
            family,
            count: Some(count),
        }
    }

    /// The family whose overheads and media rules apply.
    pub fn family(&self) -> Family {
        self.family
    }

    /// Tokens of `text`.
    pub fn text(&self, text: &str) -> u64 {
        match self.count {
            Some(count) => count(text),
            None => estimate_text(text, self.family),
        }
    }
}

/// Counts a request body with a custom text counter (see [`TextCounter`]).
pub fn count_request_body(body: &Value, counter: &TextCounter<'_>) -> RequestEstimate {
    estimate_request_body_c(body, counter)
}

/// Counts a request from its parts with a custom text counter (see [`TextCounter`]).
pub fn count_request(
    system: Option<&Value>,
    tools: Option<&Value>,
    messages: &[Value],
    counter: &TextCounter<'_>,
) -> RequestEstimate {
    estimate_request_c(system, tools, messages, counter)
}

/// Estimates a request from its parts: `system` (a string or an array of text blocks), `tools`
/// (an array of tool definitions) and `messages`.
pub fn estimate_request(
    system: Option<&Value>,
    tools: Option<&Value>,
    messages: &[Value],
    family: Family,
) -> RequestEstimate {
    estimate_request_c(system, tools, messages, &TextCounter::estimate(family))
}

/// Estimates a whole request body (`{"system": .., "tools": .., "messages": [..], ...}`, or an
/// OpenAI Responses body: `{"instructions": .., "tools": .., "input": [..] | ".."}`, whose
/// `function_call`, `function_call_output` and `reasoning` items count like the blocks they
/// stand for); other fields (model, max_tokens, ...) cost nothing.
pub fn estimate_request_body(body: &Value, family: Family) -> RequestEstimate {
    estimate_request_body_c(body, &TextCounter::estimate(family))
}

/// Estimates the tool definitions array (Anthropic `{name, description, input_schema}` or OpenAI
/// `{type: function, function: {name, description, parameters}}`). For the Anthropic families,
/// a tool Anthropic defines (`{"type": "bash_20250124", "name": "bash"}`) costs its documented
/// figure, or a flat estimate plus its options when none is published
/// ([`defined_tools`](super::defined_tools)).
pub fn estimate_tools(tools: &Value, family: Family) -> u64 {
    estimate_tools_c(tools, &TextCounter::estimate(family))
}

/// Estimates one tool definition.
pub fn estimate_tool(tool: &Value, family: Family) -> u64 {
    estimate_tool_c(tool, &TextCounter::estimate(family))
}

/// Estimates one message: its content plus the per-message overhead. OpenAI `tool_calls` are
/// counted like `tool_use` blocks.
pub fn estimate_message(message: &Value, family: Family) -> u64 {
    estimate_message_c(message, &TextCounter::estimate(family))
}

/// Everything in a message except its `content`: the per-message overhead, OpenAI `tool_calls`,
/// `name` and `tool_call_id`.
pub fn estimate_message_frame(message: &Value, family: Family) -> u64 {
    estimate_message_frame_c(message, &TextCounter::estimate(family))
}

/// Estimates a `content` value: a string, one block, or an array of blocks.
pub fn estimate_content(content: &Value, family: Family) -> u64 {
    estimate_content_c(content, &TextCounter::estimate(family))
}

/// Estimates one content block by its `type`.
pub fn estimate_block(block: &Value, family: Family) -> u64 {
    estimate_block_c(block, &TextCounter::estimate(family))
}

/// Estimates a value the way the bindings' `estimate_tokens` / `estimateTokens` read it: a
/// string is text; an array is a list of messages; a request body ([`is_request_body`]: an
/// object with `messages`, `system` or `tools`, or an OpenAI Responses body with `input` or
/// `instructions`) is its [`RequestEstimate::total`], overheads included; an object with a
/// `role` is one message; any other object is one content block. `None` for a number, a
/// boolean or `null`, which are none of those.
pub fn estimate_value(value: &Value, family: Family) -> Option<u64> {
    Some(match value {
        Value::String(text) => estimate_text(text, family),
        Value::Array(messages) => messages
            .iter()
            .map(|message| estimate_message(message, family))
            .sum(),
        Value::Object(_) if is_request_body(value) => estimate_request_body(value, family).total(),
        Value::Object(fields) if fields.contains_key("role") => estimate_message(value, family),
        Value::Object(_) => estimate_block(value, family),
        Value::Number(_) | Value::Bool(_) | Value::Null => return None,
    })
}

/// Estimates a JSON value from its compact serialization (what providers render for tool
/// inputs and schemas).
pub fn estimate_json(value: &Value, family: Family) -> u64 {
    estimate_json_c(value, &TextCounter::estimate(family))
}

/// Token estimate of a request, by part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestEstimate {
    /// The system prompt (top-level `system`, or `system`/`developer` messages in OpenAI shape).
    pub system: u64,
    /// Tool definitions, including the tool-use preamble.
    pub tools: u64,
    /// All messages, including per-message overheads.
    pub messages: u64,
    /// Per-request overhead.
    pub overhead: u64,
}

impl RequestEstimate {
    /// The total.
    pub fn total(&self) -> u64 {
        self.system + self.tools + self.messages + self.overhead
    }
}

fn estimate_request_c(
    system: Option<&Value>,
    tools: Option<&Value>,
    messages: &[Value],
    c: &TextCounter<'_>,
) -> RequestEstimate {
    let mut estimate = RequestEstimate {
        system: system.map_or(0, |s| estimate_content_c(s, c)),
        tools: tools.map_or(0, |t| estimate_tools_c(t, c)),
        messages: 0,
        overhead: Overheads::of(c.family()).per_request,
    };
    for message in messages {
        let tokens = estimate_message_c(message, c);
        if is_system_message(message) {
            estimate.system += tokens;
        } else {
            estimate.messages += tokens;
        }
    }
    estimate
}

fn estimate_request_body_c(body: &Value, c: &TextCounter<'_>) -> RequestEstimate {
    // An OpenAI Responses body holds its messages and items in `input` (or one user message as
    // a string) and its system prompt in `instructions`.
    let prompt;
    let messages = match (body.get("messages"), body.get("input")) {
        (Some(messages), _) => messages.as_array().map_or(&[][..], Vec::as_slice),
        (None, Some(Value::Array(items))) => items.as_slice(),
        (None, Some(Value::String(text))) => {
            prompt = [serde_json::json!({"role": "user", "content": text})];
            &prompt[..]
        }
        (None, _) => &[][..],
    };
    let system = body.get("system").or_else(|| body.get("instructions"));
    // `functions` is the legacy (pre-`tools`) form of OpenAI tool definitions.
    let tools = body.get("tools").or_else(|| body.get("functions"));
    estimate_request_c(system, tools, messages, c)
}

/// Whether `value` is a request body: an object with `messages`, `system` or `tools`, or an
/// OpenAI Responses body (`instructions`, or an `input` list or string without a block's
/// `type`: a `tool_use` block's `input` is no request).
pub fn is_request_body(value: &Value) -> bool {
    let Value::Object(fields) = value else {
        return false;
    };
    ["messages", "system", "tools", "instructions"]
        .iter()
        .any(|key| fields.contains_key(*key))
        || (!fields.contains_key("type")
            && fields
                .get("input")
                .is_some_and(|input| input.is_array() || input.is_string()))
}

fn is_system_message(message: &Value) -> bool {
    matches!(
        message.get("role").and_then(Value::as_str),
        Some("system" | "developer")
    )
}

fn estimate_tools_c(tools: &Value, c: &TextCounter<'_>) -> u64 {
    let Some(tools) = tools.as_array() else {
        return 0;
    };
    if tools.is_empty() {
        return 0;
    }
    let overheads = Overheads::of(c.family());
    overheads.tools_preamble
        + tools
            .iter()
            .map(|tool| estimate_tool_c(tool, c) + overheads.per_tool)
            .sum::<u64>()
}

fn estimate_tool_c(tool: &Value, c: &TextCounter<'_>) -> u64 {
    if !c.family().is_openai() {
        match anthropic_defined_tool(tool) {
            Some(DefinedTool::Documented(tokens)) => return tokens,
            Some(DefinedTool::Undocumented) => {
                return UNDOCUMENTED_DEFINED_TOOL_TOKENS + estimate_json_c(tool, c);
            }
            None => {}
        }
    }
    let def = tool.get("function").unwrap_or(tool);
    let mut tokens = 0;
    for key in ["name", "description"] {
        if let Some(s) = def.get(key).and_then(Value::as_str) {
            tokens += c.text(s);
        }
    }
    match def.get("input_schema").or_else(|| def.get("parameters")) {
        Some(schema) => tokens += estimate_json_c(schema, c),
        // OpenAI's built-in tools (`{"type": "web_search_preview"}`) are defined by the
        // provider; count what is sent.
        None if def.get("name").is_none() => tokens += estimate_json_c(def, c),
        None => {}
    }
    tokens
}

fn estimate_message_c(message: &Value, c: &TextCounter<'_>) -> u64 {
    let body = match message_body(message) {
        MessageBody::Content(content) => estimate_content_c(content, c),
        MessageBody::Item(item) => estimate_block_c(item, c),
        MessageBody::Nothing => 0,
    };
    estimate_message_frame_c(message, c) + body
}

/// What of a message is estimated besides its frame ([`estimate_message_frame`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum MessageBody<'a> {
    /// A message's `content` (a string, a block or blocks); also a list entry that is no object
    /// (a bare string is its text), so that nothing in a list of messages is silently free.
    Content(&'a Value),
    /// An OpenAI Responses input item that is no message (`function_call`,
    /// `function_call_output`, `reasoning`, ...): the item itself, estimated as a block.
    Item(&'a Value),
    /// A message without content.
    Nothing,
}

/// Whether `message` is an OpenAI Responses input item other than a message: an object with a
/// `type` and no `role`.
fn is_item(message: &Value) -> bool {
    message.get("role").is_none() && message.get("type").is_some_and(Value::is_string)
}

/// The part of `message` estimated as content (see [`MessageBody`]).
pub(crate) fn message_body(message: &Value) -> MessageBody<'_> {
    if is_item(message) {
        return MessageBody::Item(message);
    }
    match message {
        Value::Object(fields) => fields
            .get("content")
            .map_or(MessageBody::Nothing, MessageBody::Content),
        Value::Null => MessageBody::Nothing,
        other => MessageBody::Content(other),
    }
}

fn estimate_message_frame_c(message: &Value, c: &TextCounter<'_>) -> u64 {
    let overheads = Overheads::of(c.family());
    let mut tokens = overheads.per_message;
    if is_item(message) {
        // An item's fields (a call's name, its id) are its block's.
        return tokens;
    }
    let calls = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    // The legacy (pre-`tools`) `function_call` is one call, still accepted by Chat Completions.
    let legacy = message.get("function_call").filter(|f| f.is_object());
    for call in calls.iter().chain(legacy) {
        let function = call.get("function").unwrap_or(call);
        tokens += overheads.per_block;
        if let Some(name) = function.get("name").and_then(Value::as_str) {
            tokens += c.text(name);
        }
        match function.get("arguments") {
            Some(Value::String(args)) => tokens += c.text(args),
            Some(args) => tokens += estimate_json_c(args, c),
            None => {}
        }
    }
    for key in ["name", "tool_call_id"] {
        if let Some(s) = message.get(key).and_then(Value::as_str) {
            tokens += c.text(s);
        }
    }
    tokens
}

fn estimate_content_c(content: &Value, c: &TextCounter<'_>) -> u64 {
    match content {
        Value::String(text) => c.text(text),
        Value::Array(blocks) => blocks.iter().map(|b| estimate_block_c(b, c)).sum(),
        Value::Null => 0,
        Value::Object(_) => estimate_block_c(content, c),
        other => estimate_json_c(other, c),
    }
}

fn estimate_block_c(block: &Value, c: &TextCounter<'_>) -> u64 {
    let overhead = Overheads::of(c.family()).per_block;
    let text_of = |key: &str| {
        block
            .get(key)
            .and_then(Value::as_str)
            .map_or(0, |s| c.text(s))
    };
    let Some(kind) = block.get("type").and_then(Value::as_str) else {
        return match block {
            Value::String(s) => c.text(s),
            other => estimate_json_c(other, c),
        };
    };
    match kind {
        "text" | "input_text" | "output_text" | "summary_text" | "reasoning_text" => {
            text_of("text")
        }
        "thinking" => text_of("thinking") + overhead,
        "redacted_thinking" => REDACTED_THINKING_TOKENS,
        "tool_use" | "server_tool_use" | "mcp_tool_use" => {
            let input = block.get("input").map_or(0, |v| estimate_json_c(v, c));
            text_of("name") + text_of("id") + input + overhead
        }
        "tool_result" | "web_search_tool_result" | "mcp_tool_result" => {
            let content = block
                .get("content")
                .map_or(0, |content| estimate_content_c(content, c));
            text_of("tool_use_id") + content + overhead
        }
        // OpenAI Responses input items (in `input`, beside messages).
        "function_call" | "custom_tool_call" => {
            let arguments = match block.get("arguments").or_else(|| block.get("input")) {
                Some(args) => estimate_json_c(args, c),
                None => 0,
            };
            text_of("name") + text_of("call_id") + arguments + overhead
        }
        "function_call_output" | "custom_tool_call_output" => {
            let output = match block.get("output") {
                Some(Value::String(text)) => c.text(text),
                Some(output) => estimate_content_c(output, c),
                None => 0,
            };
            text_of("call_id") + output + overhead
        }
        // Its `encrypted_content` is not counted, as a `thinking` block's signature is not.
        "reasoning" => {
            let text = ["summary", "content"]
                .iter()
                .filter_map(|key| block.get(*key))
                .map(|parts| estimate_content_c(parts, c))
                .sum::<u64>();
            text + overhead
        }
        "image" | "image_url" | "input_image" => {
            images::estimate_image(block, c.family()) + overhead
        }
        // From the clip's duration, never its base64 length (see `audio`).
        "input_audio" => audio::estimate_audio(block) + overhead,
        "document" => estimate_document_c(block, c) + overhead,
        "file" | "input_file" => estimate_file_c(block, c) + overhead,
        _ => estimate_unknown_c(block, c),
    }
}

/// A block of a type without its own rule (a server tool's result: `web_fetch_tool_result`,
/// `code_execution_tool_result`, ...; a type newer than this crate) costs its JSON text, except
/// the image, document and file blocks nested in it, which cost what they cost at the top level:
/// a web fetch of a PDF holds the PDF as a base64 `document`, and its JSON text would be
/// estimated from the base64 length (a 300 KB PDF as ~150k tokens instead of its pages).
fn estimate_unknown_c(block: &Value, c: &TextCounter<'_>) -> u64 {
    if !holds_media(block) {
        return estimate_json_c(block, c);
    }
    let mut media = 0;
    let rest = without_media(block, c, &mut media);
    estimate_json_c(&rest, c) + media
}

/// Whether `value` is an image, audio, document or file block: the type and the field that carries
/// its data (so a JSON schema's `{"type": "image"}` is not mistaken for one).
fn is_media_block(value: &Value) -> bool {
    let Some(kind) = value.get("type").and_then(Value::as_str) else {
        return false;
    };
    let has = |key: &str| value.get(key).is_some();
    match kind {
        "image" | "document" => value.get("source").is_some_and(Value::is_object),
        "image_url" => has("image_url"),
        "input_image" => has("image_url") || has("file_id"),
        "file" => value.get("file").is_some_and(Value::is_object),
        "input_file" => has("file_data") || has("file_id") || has("file_url"),
        "input_audio" => value.get("input_audio").is_some_and(Value::is_object),
        _ => false,
    }
}

/// Whether a media block is nested anywhere in `value` (below its top level).
fn holds_media(value: &Value) -> bool {
    let is_or_holds = |child: &Value| is_media_block(child) || holds_media(child);
    match value {
        Value::Array(items) => items.iter().any(is_or_holds),
        Value::Object(fields) => fields.values().any(is_or_holds),
        _ => false,
    }
}

/// `value` with every nested media block replaced by `null`, their costs added to `media`.
fn without_media(value: &Value, c: &TextCounter<'_>, media: &mut u64) -> Value {
    match value {
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| without_media_child(item, c, media))
                .collect(),
        ),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(key, child)| (key.clone(), without_media_child(child, c, media)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn without_media_child(child: &Value, c: &TextCounter<'_>, media: &mut u64) -> Value {
    if is_media_block(child) {
        *media += estimate_block_c(child, c);
        Value::Null
    } else {
        without_media(child, c, media)
    }
}

fn estimate_document_c(block: &Value, c: &TextCounter<'_>) -> u64 {
    let mut tokens = 0;
    for key in ["title", "context"] {
        if let Some(s) = block.get(key).and_then(Value::as_str) {
            tokens += c.text(s);
        }
    }
    let Some(source) = block.get("source") else {
        return tokens + PDF_PAGE_TOKENS;
    };
    let source_type = source.get("type").and_then(Value::as_str);
    tokens
        + match (source_type, source.get("data"), source.get("content")) {
            (Some("text"), Some(Value::String(text)), _) => c.text(text),
            (Some("content"), _, Some(content)) => estimate_content_c(content, c),
            (Some("base64"), Some(Value::String(data)), _) => {
                images::pdf_page_estimate(&images::decode(data)) * PDF_PAGE_TOKENS
            }
            // URL or file sources: the size is unknown here; one page is the floor.
            _ => PDF_PAGE_TOKENS,
        }
}

/// OpenAI file inputs: Chat's `{"type": "file", "file": {file_data | file_id, filename}}` and
/// Responses' `{"type": "input_file", file_data | file_id | file_url, filename}`. A PDF (data with
/// a `%PDF-` header) costs what an Anthropic PDF does (per page); anything else is text, decoded
/// lossily when it is not UTF-8 (a Latin-1 CSV); never the base64 length.
fn estimate_file_c(block: &Value, c: &TextCounter<'_>) -> u64 {
    let file = block.get("file").unwrap_or(block);
    let name = file
        .get("filename")
        .and_then(Value::as_str)
        .map_or(0, |s| c.text(s));
    let pages = match file.get("file_data").and_then(Value::as_str) {
        Some(data) => {
            // A data URL, or bare base64.
            let base64 = data
                .strip_prefix("data:")
                .and_then(|rest| rest.split_once(',').map(|(_, b)| b))
                .unwrap_or(data);
            let bytes = images::decode(base64);
            if !images::looks_like_pdf(&bytes) {
                // Only a PDF is paged: other bytes are text, in whatever encoding (a flat page
                // was a 500 kB Latin-1 CSV's cost).
                return name + c.text(&String::from_utf8_lossy(&bytes));
            }
            images::pdf_page_estimate(&bytes)
        }
        // A file id or URL: the size is unknown here; one page is the floor.
        None => 1,
    };
    name + pages * PDF_PAGE_TOKENS
}

fn estimate_json_c(value: &Value, c: &TextCounter<'_>) -> u64 {
    match value {
        Value::String(s) => c.text(s),
        other => c.text(&canonical_json(other)),
    }
}

/// The compact JSON text of `value` that is counted: serde_json's, except that numbers are
/// written as JavaScript's `JSON.stringify` writes them ([`js_number`]: `1.0` as `1`, `2e10` as
/// `20000000000`, `-0.0` as `0`). Node re-serialises a value with `JSON.stringify` before the
/// core sees it, so without this the same request counted differently in Node than in the CLI,
/// C and Python. Strings are escaped the same way by both.
pub fn canonical_json(value: &Value) -> String {
    let mut out = Vec::with_capacity(128);
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, JsNumbers);
    // Writing a `Value` to a `Vec` cannot fail (keys are strings, non-finite numbers are not
    // representable in a `Value`); the fallback keeps the function total regardless.
    if serde::Serialize::serialize(value, &mut serializer).is_err() {
        return value.to_string();
    }
    String::from_utf8(out)
        .unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into_owned())
}

/// serde_json's compact formatter with ECMAScript number formatting.
struct JsNumbers;

impl serde_json::ser::Formatter for JsNumbers {
    fn write_f64<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        value: f64,
    ) -> std::io::Result<()> {
        w.write_all(js_number(value).as_bytes())
    }

    fn write_f32<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        value: f32,
    ) -> std::io::Result<()> {
        self.write_f64(w, f64::from(value))
    }

    fn write_i64<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        value: i64,
    ) -> std::io::Result<()> {
        // Beyond 2^53 a JavaScript number holds the nearest double, which is what Node writes.
        if value.unsigned_abs() > MAX_SAFE_INTEGER {
            return self.write_f64(w, value as f64);
        }
        write!(w, "{value}")
    }

    fn write_u64<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        value: u64,
    ) -> std::io::Result<()> {
        if value > MAX_SAFE_INTEGER {
            return self.write_f64(w, value as f64);
        }
        write!(w, "{value}")
    }
}

/// The largest integer every larger one of which a double may not hold exactly (2^53).
const MAX_SAFE_INTEGER: u64 = 1 << 53;

/// `value` as ECMAScript's `Number::toString` writes it (what `JSON.stringify` writes for a
/// finite number): the shortest digits that read back as `value`, without an exponent from
/// 1e-7 up to 1e21, with `e+N` / `e-N` outside; `-0` as `0`; non-finite values as `null`
/// (as `JSON.stringify` writes them).
pub fn js_number(value: f64) -> String {
    if !value.is_finite() {
        return "null".to_owned();
    }
    if value == 0.0 {
        return "0".to_owned();
    }
    let sign = if value < 0.0 { "-" } else { "" };
    // Rust writes the shortest round-trip digits too: `d.ddde±x`.
    let scientific = format!("{:e}", value.abs());
    let (mantissa, exponent) = scientific
        .split_once('e')
        .unwrap_or((scientific.as_str(), "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exponent: i64 = exponent.parse().unwrap_or(0);
    // ECMAScript's n: the value is 0.digits × 10^n.
    let n = exponent + 1;
    let k = digits.len() as i64;
    let body = if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        let (int, frac) = digits.split_at(n as usize);
        format!("{int}.{frac}")
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let e_sign = if n - 1 < 0 { '-' } else { '+' };
        let (first, rest) = digits.split_at(1);
        let dot = if rest.is_empty() { "" } else { "." };
        format!("{first}{dot}{rest}e{e_sign}{}", (n - 1).abs())
    };
    format!("{sign}{body}")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn estimate_value_reads_text_messages_requests_and_blocks() {
        let family = Family::default();
        let message = json!({"role": "user", "content": "What is the weather in Paris?"});
        let block = json!({"type": "text", "text": "What is the weather in Paris?"});
        let body = json!({"system": "Be terse.", "messages": [message.clone()]});
        assert_eq!(
            estimate_value(&json!("some text"), family),
            Some(estimate_text("some text", family))
        );
        assert_eq!(
            estimate_value(&json!([message.clone(), message.clone()]), family),
            Some(2 * estimate_message(&message, family))
        );
        assert_eq!(
            estimate_value(&message, family),
            Some(estimate_message(&message, family))
        );
        assert_eq!(
            estimate_value(&body, family),
            Some(estimate_request_body(&body, family).total())
        );
        assert_eq!(
            estimate_value(&block, family),
            Some(estimate_block(&block, family))
        );
        for nothing in [json!(3), json!(true), Value::Null] {
            assert_eq!(estimate_value(&nothing, family), None);
        }
    }

    #[test]
    fn request_parts_add_up() {
        let body = json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 1024,
            "system": "You are a helpful assistant.",
            "tools": [{"name": "get_weather", "description": "Get the weather",
                       "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
            "messages": [
                {"role": "user", "content": "What's the weather in Paris?"},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Let me check."},
                    {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_01", "content": [{"type": "text", "text": "18°C, sunny"}]}
                ]}
            ]
        });
        let family = Family::Claude;
        let e = estimate_request_body(&body, family);
        assert_eq!(
            e.system,
            estimate_text("You are a helpful assistant.", family)
        );
        assert!(e.tools > Overheads::of(family).tools_preamble);
        assert!(e.messages > 3 * Overheads::of(family).per_message);
        assert_eq!(e.total(), e.system + e.tools + e.messages + e.overhead);
    }

    #[test]
    fn openai_system_messages_count_as_system() {
        let messages = vec![
            json!({"role": "system", "content": "Be brief."}),
            json!({"role": "user", "content": "Hi"}),
        ];
        let e = estimate_request(None, None, &messages, Family::O200k);
        assert_eq!(e.system, 3 + estimate_text("Be brief.", Family::O200k));
        assert_eq!(e.messages, 3 + estimate_text("Hi", Family::O200k));
    }

    #[test]
    fn anthropic_defined_tools_cost_their_definition_not_their_name() {
        let bash = json!({"type": "bash_20250124", "name": "bash"});
        let search = json!({"type": "web_search_20250305", "name": "web_search",
                            "allowed_domains": ["docs.rs", "crates.io"]});
        for family in [Family::Claude, Family::ClaudeLegacy] {
            assert_eq!(estimate_tool(&bash, family), 245);
            let options = estimate_json(&search, family);
            assert_eq!(estimate_tool(&search, family), 700 + options);
            let overheads = Overheads::of(family);
            assert_eq!(
                estimate_tools(&json!([bash, search]), family),
                overheads.tools_preamble + 2 * overheads.per_tool + 245 + 700 + options
            );
        }
        // The OpenAI families have no such tools: what is sent is counted.
        assert!(estimate_tool(&bash, Family::O200k) < 20);
    }

    #[test]
    fn redacted_thinking_is_flat() {
        let short = json!({"type": "redacted_thinking", "data": "abc"});
        let long = json!({"type": "redacted_thinking", "data": "x".repeat(100_000)});
        assert_eq!(
            estimate_block(&short, Family::Claude),
            REDACTED_THINKING_TOKENS
        );
        assert_eq!(
            estimate_block(&long, Family::Claude),
            REDACTED_THINKING_TOKENS
        );
    }

    #[test]
    fn unknown_blocks_are_not_free() {
        let block = json!({"type": "future_block", "payload": "some content here"});
        assert!(estimate_block(&block, Family::Claude) > 3);
    }

    #[test]
    fn openai_tool_calls_count() {
        let with_calls = json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{\"path\":\"/tmp\"}"}}
        ]});
        assert!(estimate_message(&with_calls, Family::O200k) > 3 + 3);
        let legacy = json!({"role": "assistant", "content": null,
            "function_call": {"name": "ls", "arguments": "{\"path\":\"/tmp\"}"}});
        assert_eq!(
            estimate_message(&legacy, Family::O200k),
            estimate_message(&with_calls, Family::O200k)
        );
        let def = json!({"name": "ls", "description": "List a directory",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}});
        let tools = estimate_request_body(
            &json!({"tools": [{"type": "function", "function": def}], "messages": []}),
            Family::O200k,
        );
        let functions =
            estimate_request_body(&json!({"functions": [def], "messages": []}), Family::O200k);
        assert_eq!(functions, tools);
    }

    #[test]
    fn documents_by_source() {
        let text = json!({"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "hello world"}});
        assert!(estimate_block(&text, Family::Claude) < 20);
        let url = json!({"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}});
        assert_eq!(estimate_block(&url, Family::Claude), PDF_PAGE_TOKENS + 8);
    }

    #[test]
    fn openai_files_count_by_page_not_by_base64_length() {
        let pdf = b"%PDF-1.4\n1 0 obj<</Type /Pages /Count 2>>\n2 0 obj<</Type /Page>>\n3 0 obj<</Type /Page>>\n";
        let mut padded = pdf.to_vec();
        padded.extend(std::iter::repeat_n(b'x', 300_000));
        let data = crate::tokens::images::encode_base64(&padded);
        let chat = json!({"type": "file", "file": {"filename": "a.pdf", "file_data": format!("data:application/pdf;base64,{data}")}});
        let responses =
            json!({"type": "input_file", "filename": "a.pdf", "file_data": data.clone()});
        let by_id = json!({"type": "file", "file": {"file_id": "file-abc"}});
        for family in [Family::O200k, Family::Claude] {
            let overhead = Overheads::of(family).per_block;
            let name = estimate_text("a.pdf", family);
            assert_eq!(
                estimate_block(&chat, family),
                name + 2 * PDF_PAGE_TOKENS + overhead
            );
            assert_eq!(
                estimate_block(&responses, family),
                name + 2 * PDF_PAGE_TOKENS + overhead
            );
            assert_eq!(estimate_block(&by_id, family), PDF_PAGE_TOKENS + overhead);
        }
        // A text file is its text, however long.
        let text = "fn main() { println!(\"hello\"); }\n".repeat(2_000);
        let file = json!({"type": "input_file", "file_data": format!("data:text/plain;base64,{}", crate::tokens::images::encode_base64(text.as_bytes()))});
        assert_eq!(
            estimate_block(&file, Family::O200k),
            estimate_text(&text, Family::O200k) + Overheads::of(Family::O200k).per_block
        );
    }

    /// An audio part costs its duration (a minute of 128 kbit/s MP3: 600 tokens), not its base64
    /// length (about 1.3 MB of text: hundreds of thousands of tokens), at the top level and
    /// nested in a block of another type.
    #[test]
    fn openai_audio_counts_by_duration_not_by_base64_length() {
        let minute = crate::tokens::images::encode_base64(&vec![0x5Au8; 960_000]);
        let audio =
            json!({"type": "input_audio", "input_audio": {"data": minute, "format": "mp3"}});
        let overhead = Overheads::of(Family::O200k).per_block;
        assert_eq!(estimate_block(&audio, Family::O200k), 600 + overhead);
        let message =
            json!({"role": "user", "content": [{"type": "text", "text": "transcribe"}, audio]});
        assert!(estimate_message(&message, Family::O200k) < 1_000);
        let nested = json!({"type": "a_future_block", "parts": [audio]});
        assert!(estimate_block(&nested, Family::O200k) < 1_000);
    }

    #[test]
    fn custom_counters_count_text_only() {
        let body = json!({"system": "abcd", "messages": [{"role": "user", "content": "12345678"}]});
        let by_length = |s: &str| s.len() as u64;
        let counted = count_request_body(&body, &TextCounter::with(Family::O200k, &by_length));
        assert_eq!(counted.system, 4);
        assert_eq!(
            counted.messages,
            8 + Overheads::of(Family::O200k).per_message
        );
        assert_eq!(
            count_request_body(&body, &TextCounter::estimate(Family::O200k)),
            estimate_request_body(&body, Family::O200k)
        );
    }

    /// A server tool's result holding a fetched PDF (Anthropic's `web_fetch_tool_result`)
    /// costs the PDF's pages, not its base64 length; an image nested in an unknown block costs
    /// its dimensions. The rest of the block is still its JSON text.
    #[test]
    fn media_nested_in_unknown_blocks_are_not_estimated_from_base64() {
        let pdf = b"%PDF-1.4\n1 0 obj<</Type /Pages /Count 2>>\n2 0 obj<</Type /Page>>\n3 0 obj<</Type /Page>>\n";
        let mut padded = pdf.to_vec();
        padded.extend(std::iter::repeat_n(b'x', 300_000));
        let data = crate::tokens::images::encode_base64(&padded);
        let document = json!({"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": data}, "title": "Report"});
        let fetch = |content: Value| {
            json!({"type": "web_fetch_tool_result", "tool_use_id": "srvtoolu_01", "content": {
                "type": "web_fetch_result", "url": "https://example.com/report.pdf",
                "retrieved_at": "2026-01-01T00:00:00Z", "content": content}})
        };
        for family in [Family::Claude, Family::O200k] {
            let with_pdf = estimate_block(&fetch(document.clone()), family);
            let without = estimate_block(&fetch(Value::Null), family);
            assert_eq!(
                with_pdf,
                without + estimate_block(&document, family),
                "{family}"
            );
            assert!(with_pdf < 2 * PDF_PAGE_TOKENS + 200, "{family}: {with_pdf}");
        }
        // An image in a block of a future type.
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        png.extend_from_slice(&200u32.to_be_bytes());
        png.extend_from_slice(&100u32.to_be_bytes());
        png.extend(std::iter::repeat_n(0u8, 200_000));
        let image = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png",
            "data": crate::tokens::images::encode_base64(&png)}});
        let future = json!({"type": "future_result", "content": [{"type": "text", "text": "a chart"}, image]});
        let bare = json!({"type": "future_result", "content": [{"type": "text", "text": "a chart"}, null]});
        assert_eq!(
            estimate_block(&future, Family::Claude),
            estimate_block(&bare, Family::Claude) + estimate_block(&image, Family::Claude)
        );
        // A schema's `{"type": "image"}` without a source is not an image block.
        let schema = json!({"type": "future_tool", "input_schema": {"type": "image"}});
        assert_eq!(
            estimate_block(&schema, Family::Claude),
            estimate_text(&schema.to_string(), Family::Claude)
        );
    }

    /// An OpenAI Responses body counts its `instructions`, its `input` (items included) and
    /// its tools; it was three tokens of overhead whatever it held.
    #[test]
    fn openai_responses_bodies_count_their_input() {
        let output = "total 48\ndrwxr-xr-x  5 user staff  160 Jan  1 12:00 src\n".repeat(40);
        let body = json!({
            "model": "gpt-5", "instructions": "You are a coding agent.",
            "tools": [{"type": "function", "name": "shell", "description": "Run a command",
                       "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}],
            "input": [
                {"role": "user", "content": [{"type": "input_text", "text": "List the files."}]},
                {"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAAAB".repeat(500),
                 "summary": [{"type": "summary_text", "text": "Run ls."}]},
                {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": "{\"cmd\":\"ls -l\"}"},
                {"type": "function_call_output", "call_id": "call_1", "output": output},
            ]
        });
        for family in [Family::O200k, Family::Claude] {
            let e = estimate_request_body(&body, family);
            let text = |s: &str| estimate_text(s, family);
            let o = Overheads::of(family);
            assert_eq!(e.system, text("You are a coding agent."), "{family}");
            assert!(e.tools > o.tools_preamble, "{family}");
            assert_eq!(
                e.messages,
                4 * o.per_message
                    + text("List the files.")
                    + (text("Run ls.") + o.per_block)
                    + (text("shell") + text("call_1") + text("{\"cmd\":\"ls -l\"}") + o.per_block)
                    + (text("call_1") + text(&output) + o.per_block),
                "{family}"
            );
            assert_eq!(estimate_value(&body, family), Some(e.total()));
            // `input` as one string is one user message.
            let short = json!({"input": "Hello there", "instructions": "Be brief."});
            let e = estimate_request_body(&short, family);
            assert_eq!(e.messages, o.per_message + text("Hello there"));
            assert_eq!(e.system, text("Be brief."));
        }
        // A tool_use block's `input` does not make it a request body.
        let call = json!({"type": "tool_use", "id": "t", "name": "ls", "input": {"path": "/"}});
        assert!(!is_request_body(&call));
        assert_eq!(
            estimate_value(&call, Family::Claude),
            Some(estimate_block(&call, Family::Claude))
        );
    }

    /// A list entry that is no message object (a bare string) is not free: it costs its text.
    #[test]
    fn bare_strings_in_a_list_of_messages_cost_their_text() {
        let text = "A paragraph of notes the caller put straight into the list. ".repeat(10);
        for family in [Family::O200k, Family::Claude] {
            let per_message = Overheads::of(family).per_message;
            assert_eq!(
                estimate_value(&json!([text.clone(), 7]), family),
                Some(2 * per_message + estimate_text(&text, family) + estimate_text("7", family))
            );
        }
    }

    /// A PDF whose pages are in compressed object streams (pdfTeX, most PDF 1.5+ writers) costs
    /// its pages, in a document and in an OpenAI file alike; it cost one page.
    #[test]
    fn pdfs_with_compressed_page_trees_cost_their_pages() {
        let data =
            crate::tokens::images::encode_base64(&crate::tokens::images::tests::objstm_pdf(36));
        let document = json!({"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": data}});
        let file = json!({"type": "input_file", "file_data": format!("data:application/pdf;base64,{data}")});
        for family in [Family::Claude, Family::O200k] {
            let per_block = Overheads::of(family).per_block;
            assert_eq!(
                estimate_block(&document, family),
                36 * PDF_PAGE_TOKENS + per_block
            );
            assert_eq!(
                estimate_block(&file, family),
                36 * PDF_PAGE_TOKENS + per_block
            );
        }
    }

    /// A PDF whose page count cannot be read (here: its object stream is not Flate) is
    /// estimated from its size, one page per 10 kB, not as a single page.
    #[test]
    fn pdfs_without_a_readable_count_are_estimated_from_their_size() {
        let mut pdf =
            b"%PDF-1.5\n5 0 obj\n<< /Type /ObjStm /N 90 /Filter /LZWDecode >>\nstream\n".to_vec();
        pdf.extend((0..300_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
        pdf.extend_from_slice(b"\nendstream\nendobj\n");
        let data = crate::tokens::images::encode_base64(&pdf);
        let pages = pdf.len() as u64 / 10_000;
        assert_eq!(pages, 30);
        let document = json!({"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": data}});
        let file = json!({"type": "file", "file": {"file_data": data}});
        for family in [Family::Claude, Family::O200k] {
            let per_block = Overheads::of(family).per_block;
            assert_eq!(
                estimate_block(&document, family),
                pages * PDF_PAGE_TOKENS + per_block
            );
            assert_eq!(
                estimate_block(&file, family),
                pages * PDF_PAGE_TOKENS + per_block
            );
        }
    }

    /// A text file that is not UTF-8 (a Latin-1 CSV) is its text, lossily decoded, however
    /// long: it cost one flat page whatever its size.
    #[test]
    fn non_utf8_text_files_cost_their_text() {
        let text: String = (0..2_000)
            .map(|i| format!("{i};café;résumé;{}\n", f64::from(i) * 3.5))
            .collect();
        let latin1: Vec<u8> = text.chars().map(|c| c as u8).collect();
        assert!(std::str::from_utf8(&latin1).is_err());
        let data = crate::tokens::images::encode_base64(&latin1);
        let file = json!({"type": "input_file", "filename": "data.csv", "file_data": format!("data:text/csv;base64,{data}")});
        let family = Family::O200k;
        let expected = estimate_text("data.csv", family)
            + estimate_text(&String::from_utf8_lossy(&latin1), family)
            + Overheads::of(family).per_block;
        assert_eq!(estimate_block(&file, family), expected);
        assert!(expected > 10_000, "{expected}");
    }

    /// The JSON text counted for a tool input writes numbers as JavaScript's `JSON.stringify`
    /// does, so that Node (which re-serialises with it) counts what the CLI, C and Python do.
    #[test]
    fn json_numbers_are_counted_as_javascript_writes_them() {
        let seen = std::cell::RefCell::new(Vec::<String>::new());
        let record = |text: &str| {
            seen.borrow_mut().push(text.to_owned());
            0
        };
        let counter = TextCounter::with(Family::O200k, &record);
        let body: Value = serde_json::from_str(
            r#"{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"n","input":{"x":1.0,"y":2e10,"z":-0.0,"big":123456789012345678901234567890,"e":1e21,"small":1.5e-7}}]}]}"#,
        )
        .unwrap();
        count_request_body(&body, &counter);
        assert!(
            seen.borrow().contains(
                &r#"{"x":1,"y":20000000000,"z":0,"big":1.2345678901234568e+29,"e":1e+21,"small":1.5e-7}"#
                    .to_owned()
            ),
            "{:?}",
            seen.borrow()
        );
    }

    /// `js_number` against what node's `JSON.stringify` printed for the same values.
    #[test]
    fn numbers_are_written_as_json_stringify_writes_them() {
        let cases: &[(f64, &str)] = &[
            (1.0, "1"),
            (2e10, "20000000000"),
            (-0.0, "0"),
            (0.1, "0.1"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (
                123_456_789_012_345_680_000_000_000_000.0,
                "1.2345678901234568e+29",
            ),
            (1.5e-7, "1.5e-7"),
            (0.000_001, "0.000001"),
            (1e-7, "1e-7"),
            (-1.5, "-1.5"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (0.1 + 0.2, "0.30000000000000004"),
            (123.456, "123.456"),
            (1e300, "1e+300"),
            (-1e-7, "-1e-7"),
            (2.5e-5, "0.000025"),
            (1.25e21, "1.25e+21"),
            (f64::NAN, "null"),
        ];
        for &(value, js) in cases {
            assert_eq!(js_number(value), js, "{value:e}");
        }
        // Integers beyond 2^53 are written as the double JavaScript holds.
        let big = json!([
            u64::MAX,
            i64::MIN,
            9_007_199_254_740_993u64,
            9_007_199_254_740_992u64,
            100
        ]);
        assert_eq!(
            canonical_json(&big),
            "[18446744073709552000,-9223372036854776000,9007199254740992,9007199254740992,100]"
        );
        // Strings are escaped as `JSON.stringify` escapes them (as serde_json does).
        let text = json!({"s": "a\"b\\c\n\u{1}\u{7f}é/"});
        assert_eq!(canonical_json(&text), text.to_string());
    }

    #[test]
    fn odd_shapes_never_panic() {
        for v in [
            json!(null),
            json!(1),
            json!("s"),
            json!([1, {"type": 3}]),
            json!({"content": {"a": 1}}),
        ] {
            let _ = estimate_content(&v, Family::Claude);
            let _ = estimate_message(&v, Family::Claude);
            let _ = estimate_tools(&v, Family::Claude);
            let _ = estimate_request_body(&v, Family::Claude);
        }
    }
}
