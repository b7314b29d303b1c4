//! Provider message shapes (serde types) for the Anthropic Messages API and the OpenAI Chat
//! Completions and Responses APIs.
//!
//! The types preserve what they do not model (unknown fields, unknown block types), so a value
//! decoded and re-encoded keeps its meaning as the APIs grow.

pub mod anthropic;
pub mod openai;

/// The JSON kind of a value ("a number", "an object", ...), for error messages.
pub(crate) fn json_kind(value: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
