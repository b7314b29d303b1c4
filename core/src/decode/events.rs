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
    /// The output limit (`max_tokens` / `length`, Anthropic's `model_context_window_exceeded`),
    /// or Anthropic's streaming refusal, cut a tool call's input off: it must not run. An OpenAI
    /// Responses custom tool call (free text) is reported so whenever a `response.incomplete`
    /// (for any reason) or its own `incomplete` status left it unfinished.
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

/// The call a seal event reports (see [`DecodeEvent::sealed_call`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SealedCallRef<'a> {
    /// Block index (or tool call index).
    pub index: usize,
    /// Call id.
    pub id: &'a str,
    /// Tool name.
    pub name: &'a str,
    /// The parsed input of a call reported ready; `None` for an invalid or truncated one (it
    /// does not run).
    pub input: Option<&'a Value>,
}

impl DecodeEvent {
    /// The event as JSON (with its `type` field).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The call a seal event (`ToolUseReady`, `ToolUseInvalid`, `ToolUseTruncated`) reports;
    /// `None` for the other events.
    pub fn sealed_call(&self) -> Option<SealedCallRef<'_>> {
        let (index, id, name, input) = match self {
            Self::ToolUseReady {
                index,
                id,
                name,
                input,
            } => (*index, id, name, Some(input)),
            Self::ToolUseInvalid {
                index, id, name, ..
            }
            | Self::ToolUseTruncated {
                index, id, name, ..
            } => (*index, id, name, None),
            _ => return None,
        };
        Some(SealedCallRef {
            index,
            id,
            name,
            input,
        })
    }

    /// The block (or tool call, or output item) index of the events that carry one, to
    /// renumber them (a translation into another provider's blocks).
    pub fn index_mut(&mut self) -> Option<&mut usize> {
        match self {
            Self::BlockStart { index, .. }
            | Self::TextDelta { index, .. }
            | Self::RefusalDelta { index, .. }
            | Self::ThinkingDelta { index, .. }
            | Self::SignatureDelta { index, .. }
            | Self::CitationsDelta { index, .. }
            | Self::InputJsonDelta { index, .. }
            | Self::UnknownDelta { index, .. }
            | Self::BlockStop { index }
            | Self::ToolUseReady { index, .. }
            | Self::ToolUseInvalid { index, .. }
            | Self::ToolUseTruncated { index, .. } => Some(index),
            Self::MessageStart { .. }
            | Self::MessageDelta { .. }
            | Self::MessageStop
            | Self::Ping
            | Self::Unknown { .. } => None,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn seal_events_name_their_call_and_indexed_events_renumber() {
        let mut ready = DecodeEvent::ToolUseReady {
            index: 2,
            id: "c1".into(),
            name: "read".into(),
            input: json!({"path": "a"}),
        };
        let call = ready.sealed_call().unwrap();
        assert_eq!((call.index, call.id, call.name), (2, "c1", "read"));
        assert_eq!(call.input, Some(&json!({"path": "a"})));
        *ready.index_mut().unwrap() = 5;
        assert_eq!(ready.sealed_call().unwrap().index, 5);
        let cut = DecodeEvent::ToolUseTruncated {
            index: 1,
            id: "c2".into(),
            name: "write".into(),
            partial_json: "{".into(),
        };
        assert_eq!(cut.sealed_call().unwrap().input, None);
        assert!(DecodeEvent::BlockStop { index: 0 }.sealed_call().is_none());
        assert!(DecodeEvent::MessageStop.index_mut().is_none());
        let mut delta = DecodeEvent::TextDelta {
            index: 0,
            text: "hi".into(),
        };
        *delta.index_mut().unwrap() = 3;
        assert_eq!(delta.to_json()["index"], 3);
    }
}
