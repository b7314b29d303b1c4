//! OpenAI Chat Completions and Responses shapes.
//!
//! These APIs are wide and fast-moving, so only the fields the decoders and the agent loop read
//! are typed; everything else is preserved in `extra` maps.

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use super::anthropic::JsonObject;

/// A non-streaming `chat.completion` object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatCompletion {
    /// Completion id (`chatcmpl-...`).
    pub id: String,
    /// Always `"chat.completion"`.
    pub object: String,
    /// Unix timestamp (seconds).
    #[serde(default)]
    pub created: u64,
    /// The model that answered.
    #[serde(default)]
    pub model: String,
    /// One entry per requested choice (`n`).
    #[serde(default)]
    pub choices: Vec<ChatChoice>,
    /// Token usage (present when the stream asked for `include_usage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<ChatUsage>,
    /// Fields not modelled here (`system_fingerprint`, `service_tier`, ...).
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// One choice of a chat completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatChoice {
    /// Choice index.
    pub index: u32,
    /// The assistant message.
    pub message: ChatMessage,
    /// Why generation stopped (`stop`, `length`, `tool_calls`, `content_filter`).
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// Fields not modelled here (`logprobs`, ...).
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// An assistant message of a chat completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `assistant`.
    #[serde(default)]
    pub role: Option<String>,
    /// The text, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// A refusal, if the model refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    /// Tool calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ChatToolCall>>,
    /// Fields not modelled here (`audio`, `annotations`, ...).
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A tool call of a chat completion message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatToolCall {
    /// Call id (`call_...`).
    #[serde(default)]
    pub id: String,
    /// `function`.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// The function and its JSON-encoded arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<ChatFunctionCall>,
    /// Fields not modelled here.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The function part of a tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatFunctionCall {
    /// Function name.
    #[serde(default)]
    pub name: String,
    /// Arguments as a JSON string.
    #[serde(default)]
    pub arguments: String,
    /// Fields not modelled here.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// Chat completion usage.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatUsage {
    /// Prompt tokens.
    #[serde(default)]
    pub prompt_tokens: u64,
    /// Completion tokens.
    #[serde(default)]
    pub completion_tokens: u64,
    /// Total.
    #[serde(default)]
    pub total_tokens: u64,
    /// Fields not modelled here (`prompt_tokens_details`, `completion_tokens_details`, ...).
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A Chat Completions request body. Messages and tools are kept as JSON: their shapes vary by
/// role and tool type, and the loop passes them through.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatCompletionRequest {
    /// Model name.
    pub model: String,
    /// The conversation (`{"role": ..., "content": ...}` objects).
    pub messages: Vec<Value>,
    /// Tool definitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Value>>,
    /// Whether to stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// Fields not modelled here (`max_completion_tokens`, `stream_options`, `tool_choice`, ...).
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A Responses API request body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResponsesRequest {
    /// Model name.
    pub model: String,
    /// A string or a list of input items.
    pub input: Value,
    /// Tool definitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Value>>,
    /// Fields not modelled here (`instructions`, `previous_response_id`, `reasoning`, ...).
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A Responses API `response` object. The shape is open, so it is kept as JSON with typed
/// accessors for what the loop reads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Response(pub JsonObject);

impl Response {
    /// The response id (`resp_...`).
    pub fn id(&self) -> Option<&str> {
        self.0.get("id").and_then(Value::as_str)
    }

    /// `in_progress`, `completed`, `failed`, `incomplete`, ...
    pub fn status(&self) -> Option<&str> {
        self.0.get("status").and_then(Value::as_str)
    }

    /// The output items (`message`, `function_call`, `reasoning`, ...).
    pub fn output(&self) -> &[Value] {
        self.0
            .get("output")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn chat_completion_round_trips_with_unknown_fields() {
        let raw = json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt",
            "system_fingerprint": "fp", "service_tier": "default",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": null,
                "message": {"role": "assistant", "content": null, "refusal": null, "annotations": [],
                    "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "f", "arguments": "{}"}}]}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3,
                      "completion_tokens_details": {"reasoning_tokens": 0}}
        });
        let completion: ChatCompletion = serde_json::from_value(raw.clone()).unwrap();
        let call = &completion.choices[0].message.tool_calls.as_ref().unwrap()[0];
        assert_eq!(call.function.as_ref().unwrap().name, "f");
        assert_eq!(completion.usage.as_ref().unwrap().total_tokens, 3);
        let back = serde_json::to_value(&completion).unwrap();
        // `content: null` and `refusal: null` are dropped on re-encode; everything else survives.
        let mut expected = raw;
        let message = expected["choices"][0]["message"].as_object_mut().unwrap();
        message.remove("content");
        message.remove("refusal");
        assert_eq!(back, expected);
    }

    #[test]
    fn requests_round_trip() {
        let chat = json!({"model": "gpt", "messages": [{"role": "user", "content": "hi"}], "stream": true,
            "stream_options": {"include_usage": true}, "tools": [{"type": "function", "function": {"name": "f"}}]});
        let parsed: ChatCompletionRequest = serde_json::from_value(chat.clone()).unwrap();
        assert_eq!(parsed.messages.len(), 1);
        assert_eq!(serde_json::to_value(&parsed).unwrap(), chat);
        let responses = json!({"model": "gpt", "input": [{"role": "user", "content": "hi"}], "instructions": "be brief"});
        let parsed: ResponsesRequest = serde_json::from_value(responses.clone()).unwrap();
        assert_eq!(serde_json::to_value(&parsed).unwrap(), responses);
    }

    #[test]
    fn response_accessors() {
        let response: Response = serde_json::from_value(json!({
            "id": "resp_1", "status": "completed", "output": [{"type": "message"}], "future": 1
        }))
        .unwrap();
        assert_eq!(response.id(), Some("resp_1"));
        assert_eq!(response.status(), Some("completed"));
        assert_eq!(response.output().len(), 1);
        assert_eq!(serde_json::to_value(&response).unwrap()["future"], 1);
    }
}
