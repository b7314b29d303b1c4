//! Provider message shapes (serde types) for the Anthropic Messages API and the OpenAI Chat
//! Completions and Responses APIs.
//!
//! The types preserve what they do not model (unknown fields, unknown block types), so a value
//! decoded and re-encoded keeps its meaning as the APIs grow.

pub mod anthropic;
pub mod openai;
