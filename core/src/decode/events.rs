//! Typed decoder events, shared by every provider.

use serde::Serialize;
use serde_json::Value;

/// A typed event completed by the stream. Serialises to JSON with a `type` field
/// (`{"type": "text_delta", "index": 0, "text": "Hi"}`), the shape the bindings and
/// `ferroloop decode --events` expose.
///
/// `index` is the content block index (Anthropic), the choice index for text or the tool call's
/// position in the message's `tool_calls` for tool calls (OpenAI Chat: the chunk's `index` when
/// the server numbers its calls in order, as OpenAI does), or the output item index (OpenAI
/// Responses).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum DecodeEvent {
    /// The stream opened; `message` is the initial snapshot.
    MessageStart {
        /// The message as first announced.
        message: Value,
    },
    /// A content block (or output item) started.
    BlockStart {
        /// Block index.
        index: usize,
        /// The block as announced (tool inputs empty).
        block: Value,
    },
    /// Text appended to a text block.
    TextDelta {
        /// Block index.
        index: usize,
        /// The appended text.
        text: String,
    },
    /// Refusal text appended (OpenAI).
    RefusalDelta {
        /// Choice or output index.
        index: usize,
        /// The appended text.
        refusal: String,
    },
    /// Thinking text appended.
    ThinkingDelta {
        /// Block index.
        index: usize,
        /// The appended text.
        thinking: String,
    },
    /// A thinking block's signature (replaces the previous one).
    SignatureDelta {
        /// Block index.
        index: usize,
        /// The signature.
        signature: String,
    },
    /// A citation attached to a text block.
    CitationsDelta {
        /// Block index.
        index: usize,
        /// The citation object.
        citation: Value,
    },
    /// A fragment of a tool call's JSON input.
    InputJsonDelta {
        /// Block index (or tool call index).
        index: usize,
        /// The raw fragment.
        partial_json: String,
    },
    /// A delta with no typed event of its own, passed through unchanged: an Anthropic
    /// `compaction_delta` (accumulated onto its `compaction` block all the same) or a type this
    /// crate does not know.
    UnknownDelta {
        /// Block index.
        index: usize,
        /// The delta object as sent.
        delta: Value,
    },
    /// A content block (or output item) ended.
    BlockStop {
        /// Block index.
        index: usize,
    },
    /// A tool call is complete and its input parsed: the executor may start it now.
    ToolUseReady {
        /// Block index (or tool call index).
        index: usize,
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// The parsed input (`{}` when the model sent none); for an OpenAI Responses custom tool
        /// call, whose input is free text, that text as a JSON string.
        input: Value,
    },
    /// A tool call ended but its input is not valid JSON.
    ToolUseInvalid {
        /// Block index (or tool call index).
        index: usize,
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// The raw input text.
        partial_json: String,
        /// The parser's complaint.
        error: String,
    },
    /// The output limit (`max_tokens` / `length`), or Anthropic's streaming refusal, cut a tool
    /// call's input off: it must not run.
    ToolUseTruncated {
        /// Block index (or tool call index).
        index: usize,
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// The raw input text received.
        partial_json: String,
    },
    /// Message-level changes: stop reason, cumulative usage.
    MessageDelta {
        /// The `delta` object (Anthropic) or `{"finish_reason": ...}` (OpenAI).
        delta: Value,
        /// Usage as sent (cumulative), or `null`.
        usage: Value,
    },
    /// The stream reached its end marker.
    MessageStop,
    /// A keep-alive.
    Ping,
    /// An event of a type this crate does not know, passed through unchanged.
    Unknown {
        /// The SSE event type (or the JSON `type`).
        event_type: String,
        /// The event data (parsed JSON, or a string if it was not JSON).
        data: Value,
    },
}

impl DecodeEvent {
    /// The event as JSON (with its `type` field).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}
