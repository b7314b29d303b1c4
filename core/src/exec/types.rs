//! Wire types at the executor's boundary: the `tool_use` it receives and the `tool_result` it
//! produces, in the Anthropic Messages wire shape.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool call requested by the model (an Anthropic `tool_use` block, without its `type` tag).
///
/// # A missing input
///
/// A `tool_use` without an `input` field means the empty input `{}`: that is what a model's
/// call to a tool without parameters carries in practice (an Anthropic stream with no input
/// fragments, an OpenAI-compatible server sending `"arguments": ""`), and how the decoders and
/// [`ToolUseBlock`](crate::message::anthropic::ToolUseBlock) already read it. Deserialising applies this
/// rule, and [`ToolUse::with_optional_input`] applies it for the bindings, so Python, Node and C
/// agree. An input that is present is kept as it is: `"input": null` or `"input": [1]` is not
/// an object, and the call gets an `is_error` result ("invalid input") when it runs. A use
/// without an `id` or a `name` is malformed and refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolUse {
    /// The call id chosen by the provider (`toolu_…`, `call_…`); echoed in the result.
    pub id: String,
    /// The name of the tool to run.
    pub name: String,
    /// The tool input as decoded from the stream (normally a JSON object); `{}` when the
    /// serialised use has no `input` field.
    #[serde(default = "empty_input")]
    pub input: Value,
}

/// The input of a use that has none: `{}`.
fn empty_input() -> Value {
    Value::Object(serde_json::Map::new())
}

impl ToolUse {
    /// Builds a tool use from its parts.
    pub fn new(id: impl Into<String>, name: impl Into<String>, input: Value) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            input,
        }
    }

    /// Builds a tool use whose input may be missing (`None`): a missing input is `{}`, the
    /// rule in [`ToolUse`]'s docs. `Some(Value::Null)` is an input that is present (and null),
    /// kept as it is.
    pub fn with_optional_input(
        id: impl Into<String>,
        name: impl Into<String>,
        input: Option<Value>,
    ) -> Self {
        Self::new(id, name, input.unwrap_or_else(empty_input))
    }
}

/// The content of a `tool_result`: a plain string or a list of content blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolResultContent {
    /// Plain text content.
    Text(String),
    /// Content blocks (`{"type":"text",...}`, `{"type":"image",...}`) kept as raw JSON.
    Blocks(Vec<Value>),
}

impl ToolResultContent {
    /// The number of characters (Unicode scalar values) of the text this content carries: the
    /// string itself, or the `text` fields of `text` blocks. Other blocks count zero.
    pub fn text_chars(&self) -> usize {
        match self {
            Self::Text(text) => text.chars().count(),
            Self::Blocks(blocks) => blocks
                .iter()
                .filter_map(text_of_block)
                .map(|text| text.chars().count())
                .sum(),
        }
    }

    /// The text this content carries, when it is made of text only (a string, or a list of
    /// `text` blocks joined by newlines). `None` when a block is not a text block (an image):
    /// such content is never replaced by a preview.
    pub fn as_plain_text(&self) -> Option<std::borrow::Cow<'_, str>> {
        match self {
            Self::Text(text) => Some(std::borrow::Cow::Borrowed(text.as_str())),
            Self::Blocks(blocks) => {
                let mut texts = Vec::with_capacity(blocks.len());
                for block in blocks {
                    texts.push(text_of_block(block)?);
                }
                Some(std::borrow::Cow::Owned(texts.join("\n")))
            }
        }
    }
}

impl ToolResultContent {
    /// This content as the providers take it in a `tool_result`: blocks that are not all
    /// content blocks (objects with a string `type`) — a tool that handed back a list of file
    /// names, say — become the JSON text of the list. Anthropic answers anything else with a
    /// 400, which ends an agent's run; the text keeps every value for the model to read.
    pub(crate) fn into_sendable(self) -> Self {
        match self {
            Self::Blocks(items) if !items.iter().all(is_content_block) => {
                Self::Text(Value::Array(items).to_string())
            }
            content => content,
        }
    }
}

/// Whether `item` has the shape of a content block: an object with a string `type`.
fn is_content_block(item: &Value) -> bool {
    item.get("type").is_some_and(Value::is_string)
}

fn text_of_block(block: &Value) -> Option<&str> {
    if block.get("type")?.as_str()? != "text" {
        return None;
    }
    block.get("text")?.as_str()
}

impl From<String> for ToolResultContent {
    fn from(text: String) -> Self {
        Self::Text(text)
    }
}

impl From<&str> for ToolResultContent {
    fn from(text: &str) -> Self {
        Self::Text(text.to_owned())
    }
}

/// The answer to one [`ToolUse`]; serialises as
/// `{"type":"tool_result","tool_use_id":…,"content":…,"is_error":…}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename = "tool_result")]
pub struct ToolResult {
    /// The id of the [`ToolUse`] this result answers.
    pub tool_use_id: String,
    /// What the model reads.
    pub content: ToolResultContent,
    /// Whether the call failed (unknown tool, invalid input, error, timeout, cancellation, …).
    #[serde(default)]
    pub is_error: bool,
}

impl ToolResult {
    /// A successful result.
    pub fn success(tool_use_id: impl Into<String>, content: impl Into<ToolResultContent>) -> Self {
        Self {
            tool_use_id: tool_use_id.into(),
            content: content.into(),
            is_error: false,
        }
    }

    /// An error result carrying a model-readable message.
    pub fn error(tool_use_id: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            tool_use_id: tool_use_id.into(),
            content: ToolResultContent::Text(message.into()),
            is_error: true,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_result_serialises_in_wire_shape() {
        let result = ToolResult::error("toolu_1", "Unknown tool 'x'");
        let text = serde_json::to_string(&result).unwrap();
        assert_eq!(
            text,
            r#"{"type":"tool_result","tool_use_id":"toolu_1","content":"Unknown tool 'x'","is_error":true}"#
        );
        let back: ToolResult = serde_json::from_str(&text).unwrap();
        assert_eq!(back, result);
    }

    #[test]
    fn block_content_round_trips_and_is_error_defaults_false() {
        let wire =
            json!({"type":"tool_result","tool_use_id":"a","content":[{"type":"text","text":"hi"}]});
        let result: ToolResult = serde_json::from_value(wire).unwrap();
        assert!(!result.is_error);
        assert_eq!(result.content.text_chars(), 2);
        assert_eq!(result.content.as_plain_text().unwrap(), "hi");
        let image = ToolResultContent::Blocks(vec![json!({"type":"image","source":{}})]);
        assert!(image.as_plain_text().is_none());
        assert_eq!(image.text_chars(), 0);
    }

    #[test]
    fn tool_use_deserialises_from_wire_fields() {
        let use_: ToolUse =
            serde_json::from_value(json!({"id":"t","name":"read","input":{"path":"a"}})).unwrap();
        assert_eq!(use_, ToolUse::new("t", "read", json!({"path":"a"})));
    }

    #[test]
    fn tool_use_without_input_is_the_empty_object() {
        let use_: ToolUse = serde_json::from_value(json!({"id":"t","name":"now"})).unwrap();
        assert_eq!(use_, ToolUse::new("t", "now", json!({})));
        // A present input is kept as it is, null included (the executor refuses it later).
        let null: ToolUse =
            serde_json::from_value(json!({"id":"t","name":"now","input":null})).unwrap();
        assert_eq!(null.input, Value::Null);
        // Malformed uses are still refused.
        assert!(serde_json::from_value::<ToolUse>(json!({"name":"now","input":{}})).is_err());
        assert!(serde_json::from_value::<ToolUse>(json!({"id":"t","input":{}})).is_err());
        // The bindings' constructor applies the same rule.
        assert_eq!(ToolUse::with_optional_input("t", "now", None), use_);
        assert_eq!(
            ToolUse::with_optional_input("t", "now", Some(Value::Null)).input,
            Value::Null
        );
    }
}
