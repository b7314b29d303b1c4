//! Anthropic Messages API shapes: request, response, content blocks and usage.
//!
//! Every struct keeps the fields it does not know in an `extra` map and every unknown block type
//! is kept whole in [`ContentBlock::Other`], so a decode → re-encode round trip loses nothing when
//! the API grows.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// A JSON object: the catch-all for fields and blocks this crate does not model.
pub type JsonObject = Map<String, Value>;

/// A complete (non-streaming) Messages API response: `{"type": "message", ...}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Message id (`msg_...`).
    pub id: String,
    /// Always `"message"`.
    #[serde(rename = "type", default = "message_type")]
    pub kind: String,
    /// Always `"assistant"` for responses.
    #[serde(default = "assistant_role")]
    pub role: String,
    /// The model that produced the message.
    #[serde(default)]
    pub model: String,
    /// The content blocks in order.
    #[serde(default)]
    pub content: Vec<ContentBlock>,
    /// Why the model stopped (`end_turn`, `max_tokens`, `tool_use`, ...); `null` while streaming.
    #[serde(default)]
    pub stop_reason: Option<String>,
    /// The stop sequence that matched, if any.
    #[serde(default)]
    pub stop_sequence: Option<String>,
    /// Token usage.
    #[serde(default)]
    pub usage: Usage,
    /// Fields not modelled here, preserved verbatim.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl Message {
    /// The JSON keys of the modelled fields. `extra` must hold none of them: the message would
    /// serialize with the key twice.
    pub(crate) const FIELDS: [&'static str; 8] = [
        "id",
        "type",
        "role",
        "model",
        "content",
        "stop_reason",
        "stop_sequence",
        "usage",
    ];
}

fn message_type() -> String {
    "message".to_owned()
}

fn assistant_role() -> String {
    "assistant".to_owned()
}

/// Token usage of a message, including the prompt-cache counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Uncached input tokens (0 when absent or `null`).
    #[serde(default, deserialize_with = "zero_if_null")]
    pub input_tokens: u64,
    /// Output tokens (cumulative while streaming; 0 when absent or `null`).
    #[serde(default, deserialize_with = "zero_if_null")]
    pub output_tokens: u64,
    /// Input tokens written to the prompt cache.
    #[serde(
        default,
        deserialize_with = "whole_count",
        skip_serializing_if = "Option::is_none"
    )]
    pub cache_creation_input_tokens: Option<u64>,
    /// Input tokens read from the prompt cache.
    #[serde(
        default,
        deserialize_with = "whole_count",
        skip_serializing_if = "Option::is_none"
    )]
    pub cache_read_input_tokens: Option<u64>,
    /// Server tool usage counters (e.g. `{"web_search_requests": 1}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_tool_use: Option<Value>,
    /// Fields not modelled here (`service_tier`, `cache_creation`, ...), preserved verbatim.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl Usage {
    /// Total tokens the request and answer occupy in the context window:
    /// input + cache creation + cache read + output.
    pub fn context_tokens(&self) -> u64 {
        self.input_tokens
            + self.cache_creation_input_tokens.unwrap_or(0)
            + self.cache_read_input_tokens.unwrap_or(0)
            + self.output_tokens
    }

    /// Applies one field of a streamed `message_delta.usage`: values are cumulative, so they are
    /// assigned, never added; a `null`, or a counter that is not a count, keeps the earlier value.
    /// A count written as a whole float (`9.0`, what a proxy holding counts as floats sends) is
    /// that count.
    pub fn assign_field(&mut self, key: &str, value: &Value) {
        if value.is_null() {
            return;
        }
        let as_u64 = crate::json_number::whole_u64(value);
        match (key, as_u64) {
            ("input_tokens", Some(n)) => self.input_tokens = n,
            ("output_tokens", Some(n)) => self.output_tokens = n,
            ("cache_creation_input_tokens", Some(n)) => self.cache_creation_input_tokens = Some(n),
            ("cache_read_input_tokens", Some(n)) => self.cache_read_input_tokens = Some(n),
            // Not into `extra`: the usage would serialize with the key twice.
            (
                "input_tokens"
                | "output_tokens"
                | "cache_creation_input_tokens"
                | "cache_read_input_tokens",
                None,
            ) => {}
            ("server_tool_use", _) => self.server_tool_use = Some(value.clone()),
            _ => {
                self.extra.insert(key.to_owned(), value.clone());
            }
        }
    }
}

/// A `text` block.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TextBlock {
    /// The text (empty when absent or `null`, as a streamed block's start may have it).
    #[serde(default)]
    pub text: String,
    /// Citations attached to the text, in arrival order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub citations: Option<Vec<Value>>,
    /// Fields not modelled here.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A `thinking` block (extended thinking).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThinkingBlock {
    /// The thinking text (empty when absent or `null`).
    #[serde(default)]
    pub thinking: String,
    /// The signature that lets the block be sent back.
    #[serde(default)]
    pub signature: String,
    /// Fields not modelled here.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A `redacted_thinking` block.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RedactedThinkingBlock {
    /// Encrypted thinking.
    pub data: String,
    /// Fields not modelled here.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A `tool_use` or `server_tool_use` block: a call the model makes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolUseBlock {
    /// Call id (`toolu_...` / `srvtoolu_...`).
    pub id: String,
    /// Tool name.
    pub name: String,
    /// The tool input (a JSON object for well-formed calls).
    #[serde(default = "empty_object")]
    pub input: Value,
    /// Fields not modelled here (e.g. `caller`).
    #[serde(flatten)]
    pub extra: JsonObject,
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

/// A `tool_result` block (sent by the client).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolResultBlock {
    /// The `tool_use` id this result answers.
    pub tool_use_id: String,
    /// A string or a list of content blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Value>,
    /// Whether the tool failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// Fields not modelled here (e.g. `cache_control`).
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// An `image` or `document` block: a `source` plus optional metadata.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SourceBlock {
    /// `{"type": "base64", "media_type": ..., "data": ...}`, `{"type": "url", ...}`, ...
    pub source: Value,
    /// Fields not modelled here.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// One content block. Unknown block types are kept whole in [`ContentBlock::Other`].
#[derive(Debug, Clone, PartialEq)]
pub enum ContentBlock {
    /// `text`
    Text(TextBlock),
    /// `thinking`
    Thinking(ThinkingBlock),
    /// `redacted_thinking`
    RedactedThinking(RedactedThinkingBlock),
    /// `tool_use`
    ToolUse(ToolUseBlock),
    /// `server_tool_use`
    ServerToolUse(ToolUseBlock),
    /// `tool_result`
    ToolResult(ToolResultBlock),
    /// `image`
    Image(SourceBlock),
    /// `document`
    Document(SourceBlock),
    /// Any other block (`web_search_tool_result`, future types, ...), including its `type`.
    Other(JsonObject),
}

impl ContentBlock {
    /// The block's wire `type`.
    pub fn block_type(&self) -> &str {
        match self {
            Self::Text(_) => "text",
            Self::Thinking(_) => "thinking",
            Self::RedactedThinking(_) => "redacted_thinking",
            Self::ToolUse(_) => "tool_use",
            Self::ServerToolUse(_) => "server_tool_use",
            Self::ToolResult(_) => "tool_result",
            Self::Image(_) => "image",
            Self::Document(_) => "document",
            Self::Other(map) => map.get("type").and_then(Value::as_str).unwrap_or(""),
        }
    }

    /// Converts a JSON object into a block. Never fails on a well-formed object: a known type
    /// whose fields do not match this model is kept as [`ContentBlock::Other`].
    pub fn from_object(mut map: JsonObject) -> Self {
        let kind = match map.get("type").and_then(Value::as_str) {
            Some(kind) => kind.to_owned(),
            None => return Self::Other(map),
        };
        let Some(type_value) = map.shift_remove("type") else {
            return Self::Other(map);
        };
        let converted = Self::typed_as(&kind, &map).or_else(|| {
            // Gateways write `null` for an empty field (`"signature": null` in a thinking
            // block's start): read as absent, or the block would lose its deltas as an unknown
            // one. Only a block the typed form refused is copied.
            if !map.values().any(Value::is_null) {
                return None;
            }
            let present: JsonObject = map
                .iter()
                .filter(|(_, value)| !value.is_null())
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect();
            Self::typed_as(&kind, &present)
        });
        match converted {
            Some(block) => block,
            None => {
                let mut with_type = JsonObject::new();
                with_type.insert("type".to_owned(), type_value);
                with_type.extend(map);
                Self::Other(with_type)
            }
        }
    }

    /// `map` (the block without its `type`) in the typed form of a known `kind`.
    fn typed_as(kind: &str, map: &JsonObject) -> Option<Self> {
        match kind {
            "text" => typed(map).map(Self::Text),
            "thinking" => typed(map).map(Self::Thinking),
            "redacted_thinking" => typed(map).map(Self::RedactedThinking),
            "tool_use" => typed(map).map(Self::ToolUse),
            "server_tool_use" => typed(map).map(Self::ServerToolUse),
            "tool_result" => typed(map).map(Self::ToolResult),
            "image" => typed(map).map(Self::Image),
            "document" => typed(map).map(Self::Document),
            _ => None,
        }
    }

    /// The block as a JSON value (wire shape).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// A count that proxies may write as `null` (`message_start`'s `"output_tokens": null`), read as
/// 0 until a `message_delta` assigns it.
fn zero_if_null<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    Ok(whole_count(deserializer)?.unwrap_or(0))
}

/// A token count: `None` for `null`, and a whole number written as an integer or as a float
/// with no fraction (`5.0`: proxies holding counts as floats send it, and the SDKs read it as 5).
/// Anything else (a fraction, a negative number, a string) is refused, as before.
fn whole_count<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    match Option::<Value>::deserialize(deserializer)? {
        None | Some(Value::Null) => Ok(None),
        Some(value) => crate::json_number::whole_u64(&value)
            .map(Some)
            .ok_or_else(|| {
                D::Error::custom(format!(
                    "a token count must be a whole number of at least 0, got {value}"
                ))
            }),
    }
}

fn typed<T: serde::de::DeserializeOwned>(map: &JsonObject) -> Option<T> {
    T::deserialize(MapRef(map)).ok()
}

/// Deserializes a `T` straight from a borrowed map without cloning it into a `Value` first.
struct MapRef<'a>(&'a JsonObject);

impl<'de> Deserializer<'de> for MapRef<'de> {
    type Error = serde_json::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(
        self,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        let iter = self.0.iter().map(|(k, v)| (k.as_str(), v));
        let mut access = serde::de::value::MapDeserializer::new(iter);
        let value = visitor.visit_map(&mut access)?;
        access.end()?;
        Ok(value)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum KnownBlockRef<'a> {
    Text(&'a TextBlock),
    Thinking(&'a ThinkingBlock),
    RedactedThinking(&'a RedactedThinkingBlock),
    ToolUse(&'a ToolUseBlock),
    ServerToolUse(&'a ToolUseBlock),
    ToolResult(&'a ToolResultBlock),
    Image(&'a SourceBlock),
    Document(&'a SourceBlock),
}

impl Serialize for ContentBlock {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let known = match self {
            Self::Text(b) => KnownBlockRef::Text(b),
            Self::Thinking(b) => KnownBlockRef::Thinking(b),
            Self::RedactedThinking(b) => KnownBlockRef::RedactedThinking(b),
            Self::ToolUse(b) => KnownBlockRef::ToolUse(b),
            Self::ServerToolUse(b) => KnownBlockRef::ServerToolUse(b),
            Self::ToolResult(b) => KnownBlockRef::ToolResult(b),
            Self::Image(b) => KnownBlockRef::Image(b),
            Self::Document(b) => KnownBlockRef::Document(b),
            Self::Other(map) => return map.serialize(serializer),
        };
        known.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::Object(map) => Ok(Self::from_object(map)),
            other => Err(D::Error::custom(format!(
                "a content block must be a JSON object, got {other}"
            ))),
        }
    }
}

/// The content of a request message: a plain string or a list of blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MessageContent {
    /// Shorthand for one text block.
    Text(String),
    /// Content blocks.
    Blocks(Vec<ContentBlock>),
}

/// One turn of a request's `messages`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputMessage {
    /// `user` or `assistant`.
    pub role: String,
    /// The turn's content.
    pub content: MessageContent,
    /// Fields not modelled here.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A Messages API request body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessagesRequest {
    /// Model name.
    pub model: String,
    /// The conversation.
    pub messages: Vec<InputMessage>,
    /// Output token cap.
    pub max_tokens: u64,
    /// System prompt: a string or a list of text blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<Value>,
    /// Tool definitions (kept as JSON: their shape varies by tool type).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Value>>,
    /// Whether to stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// Fields not modelled here (`temperature`, `thinking`, `tool_choice`, `metadata`, ...).
    #[serde(flatten)]
    pub extra: JsonObject,
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_block_type_round_trips() {
        let raw = json!({"type": "mystery_block", "payload": {"a": [1, 2]}, "flag": true});
        let block: ContentBlock = serde_json::from_value(raw.clone()).unwrap();
        assert!(matches!(block, ContentBlock::Other(_)));
        assert_eq!(block.block_type(), "mystery_block");
        assert_eq!(serde_json::to_value(&block).unwrap(), raw);
    }

    #[test]
    fn known_block_keeps_unknown_fields() {
        let raw = json!({"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"x": 1},
                         "caller": {"type": "direct"}});
        let block: ContentBlock = serde_json::from_value(raw.clone()).unwrap();
        let ContentBlock::ToolUse(tool) = &block else {
            panic!("expected tool_use, got {block:?}")
        };
        assert_eq!(tool.extra.get("caller"), Some(&json!({"type": "direct"})));
        assert_eq!(serde_json::to_value(&block).unwrap(), raw);
    }

    #[test]
    fn known_type_with_wrong_shape_is_kept_as_other() {
        let raw = json!({"type": "text", "text": 5});
        let block: ContentBlock = serde_json::from_value(raw.clone()).unwrap();
        assert!(matches!(block, ContentBlock::Other(_)));
        assert_eq!(serde_json::to_value(&block).unwrap(), raw);
    }

    #[test]
    fn request_round_trips_with_every_block_type() {
        let raw = json!({
            "model": "claude-x", "max_tokens": 100, "temperature": 0.5,
            "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                    {"type": "redacted_thinking", "data": "xx"},
                    {"type": "text", "text": "a", "citations": [{"type": "char_location"}]},
                    {"type": "tool_use", "id": "t1", "name": "f", "input": {}},
                    {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {"q": 1}},
                    {"type": "web_search_tool_result", "tool_use_id": "s1", "content": []}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "ok", "is_error": false},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}},
                    {"type": "document", "source": {"type": "text", "data": "doc"}, "title": "T"}
                ]}
            ]
        });
        let req: MessagesRequest = serde_json::from_value(raw.clone()).unwrap();
        assert_eq!(req.messages.len(), 3);
        let MessageContent::Blocks(blocks) = &req.messages[1].content else {
            panic!("expected blocks")
        };
        let kinds: Vec<&str> = blocks.iter().map(ContentBlock::block_type).collect();
        assert_eq!(
            kinds,
            [
                "thinking",
                "redacted_thinking",
                "text",
                "tool_use",
                "server_tool_use",
                "web_search_tool_result"
            ]
        );
        assert_eq!(serde_json::to_value(&req).unwrap(), raw);
    }

    /// A token count written as a whole float (`5.0`) is that count: `message_start`'s failed
    /// the whole stream as "invalid JSON", and `message_delta`'s was ignored, leaving the
    /// earlier, smaller count in the final usage.
    #[test]
    fn usage_counts_written_as_whole_floats_are_counts() {
        let usage: Usage =
            serde_json::from_value(json!({"input_tokens": 5.0, "output_tokens": null,
            "cache_read_input_tokens": 3.0, "cache_creation_input_tokens": null}))
            .unwrap();
        assert_eq!(usage.input_tokens, 5);
        assert_eq!(usage.output_tokens, 0);
        assert_eq!(usage.cache_read_input_tokens, Some(3));
        assert_eq!(usage.cache_creation_input_tokens, None);
        for refused in [
            json!({"input_tokens": 2.5}),
            json!({"input_tokens": -1}),
            json!({"output_tokens": "7"}),
        ] {
            assert!(
                serde_json::from_value::<Usage>(refused.clone()).is_err(),
                "{refused}"
            );
        }
        let mut usage = usage;
        usage.assign_field("output_tokens", &json!(9.0));
        usage.assign_field("input_tokens", &json!(2.5));
        assert_eq!(usage.output_tokens, 9);
        assert_eq!(
            usage.input_tokens, 5,
            "a fraction is not a count: the earlier value stays"
        );
        assert!(usage.extra.is_empty());
    }

    #[test]
    fn usage_assignment_is_cumulative_and_null_keeps() {
        let mut usage: Usage = serde_json::from_value(
            json!({"input_tokens": 10, "output_tokens": 1, "cache_read_input_tokens": 5}),
        )
        .unwrap();
        usage.assign_field("output_tokens", &json!(7));
        usage.assign_field("output_tokens", &json!(9));
        usage.assign_field("cache_read_input_tokens", &Value::Null);
        usage.assign_field("service_tier", &json!("standard"));
        assert_eq!(usage.output_tokens, 9);
        assert_eq!(usage.cache_read_input_tokens, Some(5));
        assert_eq!(usage.context_tokens(), 24);
        assert_eq!(usage.extra.get("service_tier"), Some(&json!("standard")));
    }
}
