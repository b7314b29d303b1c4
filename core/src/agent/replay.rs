//! Scripted models: SSE encoders for Anthropic messages (as the Messages API, OpenAI Chat
//! Completions or the OpenAI Responses API would stream them), a [`Model`] that decodes scripted
//! SSE bytes in-process, and the "explore this directory" conversation of `ferroloop run`'s
//! replay model (which reads any of the three request shapes).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde_json::{Value, json};

use super::model::{Model, ModelError, ModelEvent, ModelStream};
use super::openai::{ChatEventTranslator, ChatOptions, chat_request};
use super::responses::{ResponsesEventTranslator, responses_request};
use super::wire::translate_all;
use crate::decode::{DecodeEvent, Provider, StreamDecoder};
use crate::tokens::{Family, estimate_request_body, estimate_text};

fn sse_event(out: &mut String, event: &str, data: &Value) {
    out.push_str("event: ");
    out.push_str(event);
    out.push_str("\ndata: ");
    out.push_str(&data.to_string());
    out.push_str("\n\n");
}

/// Encodes a complete Anthropic message as the Messages streaming protocol would send it: text
/// in deltas of about `chunk_chars` characters, tool inputs as `input_json_delta` fragments, then
/// `message_delta` (stop reason, usage) and `message_stop`.
pub fn anthropic_sse(message: &Value, chunk_chars: usize) -> String {
    let chunk_chars = chunk_chars.max(1);
    let mut out = String::new();
    let mut start = message.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    start["stop_sequence"] = Value::Null;
    let usage = message.get("usage").cloned().unwrap_or_else(|| json!({}));
    start["usage"] = json!({
        "input_tokens": usage.get("input_tokens").cloned().unwrap_or(json!(0)),
        "cache_creation_input_tokens": usage.get("cache_creation_input_tokens").cloned().unwrap_or(json!(0)),
        "cache_read_input_tokens": usage.get("cache_read_input_tokens").cloned().unwrap_or(json!(0)),
        "output_tokens": 1,
    });
    sse_event(
        &mut out,
        "message_start",
        &json!({"type": "message_start", "message": start}),
    );
    let blocks = message
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (index, block) in blocks.iter().enumerate() {
        let kind = block
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let announced = match kind {
            "text" => json!({"type": "text", "text": ""}),
            "tool_use" | "server_tool_use" => {
                json!({"type": kind, "id": block["id"], "name": block["name"], "input": {}})
            }
            _ => block.clone(),
        };
        sse_event(
            &mut out,
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": announced}),
        );
        let pieces = |text: &str| -> Vec<String> {
            let chars: Vec<char> = text.chars().collect();
            chars
                .chunks(chunk_chars)
                .map(|c| c.iter().collect())
                .collect()
        };
        match kind {
            "text" => {
                for piece in pieces(
                    block
                        .get("text")
                        .and_then(Value::as_str)
                        .unwrap_or_default(),
                ) {
                    sse_event(
                        &mut out,
                        "content_block_delta",
                        &json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}}),
                    );
                }
            }
            "tool_use" | "server_tool_use" => {
                let input = block
                    .get("input")
                    .cloned()
                    .unwrap_or_else(|| json!({}))
                    .to_string();
                for piece in pieces(&input) {
                    sse_event(
                        &mut out,
                        "content_block_delta",
                        &json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": piece}}),
                    );
                }
            }
            _ => {}
        }
        sse_event(
            &mut out,
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        );
    }
    sse_event(
        &mut out,
        "message_delta",
        &json!({
            "type": "message_delta",
            "delta": {"stop_reason": message.get("stop_reason").cloned().unwrap_or(Value::Null), "stop_sequence": null},
            "usage": {"output_tokens": usage.get("output_tokens").cloned().unwrap_or(json!(1))},
        }),
    );
    sse_event(&mut out, "message_stop", &json!({"type": "message_stop"}));
    out
}

/// Encodes a complete Anthropic message as OpenAI Chat Completions would stream the same answer:
/// a first chunk with the role, text in `content` deltas of about `chunk_chars` characters, each
/// `tool_use` as a tool call (id and name first, then `arguments` fragments, one call after the
/// other), a chunk with the `finish_reason` (`stop`, `length`, `tool_calls`, `content_filter`), the usage-only
/// chunk (empty `choices`; cache reads as `prompt_tokens_details.cached_tokens`), then
/// `data: [DONE]`.
pub fn openai_chat_sse(message: &Value, chunk_chars: usize) -> String {
    let chunk_chars = chunk_chars.max(1);
    let id = format!(
        "chatcmpl-{}",
        message
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or("replay")
    );
    let model = message.get("model").cloned().unwrap_or(json!("replay"));
    let mut out = String::new();
    let mut chunk = |choices: Value, usage: Option<Value>| {
        let mut data = json!({
            "id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
            "system_fingerprint": null, "choices": choices,
        });
        if let Some(usage) = usage {
            data["usage"] = usage;
        }
        out.push_str("data: ");
        out.push_str(&data.to_string());
        out.push_str("\n\n");
    };
    let delta = |delta: Value| json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": null}]);
    chunk(delta(json!({"role": "assistant", "content": ""})), None);
    let pieces = |text: &str| -> Vec<String> {
        let chars: Vec<char> = text.chars().collect();
        chars
            .chunks(chunk_chars)
            .map(|c| c.iter().collect())
            .collect()
    };
    let blocks = message
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut tool_index = 0;
    for block in &blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                for piece in pieces(
                    block
                        .get("text")
                        .and_then(Value::as_str)
                        .unwrap_or_default(),
                ) {
                    chunk(delta(json!({"content": piece})), None);
                }
            }
            Some("tool_use") => {
                let announce = json!({"tool_calls": [{"index": tool_index, "id": block["id"], "type": "function", "function": {"name": block["name"], "arguments": ""}}]});
                chunk(delta(announce), None);
                let input = block
                    .get("input")
                    .cloned()
                    .unwrap_or_else(|| json!({}))
                    .to_string();
                for piece in pieces(&input) {
                    chunk(
                        delta(
                            json!({"tool_calls": [{"index": tool_index, "function": {"arguments": piece}}]}),
                        ),
                        None,
                    );
                }
                tool_index += 1;
            }
            _ => {}
        }
    }
    let finish = match message.get("stop_reason").and_then(Value::as_str) {
        Some("tool_use") => "tool_calls",
        Some("max_tokens") => "length",
        Some("refusal") => "content_filter",
        _ => "stop",
    };
    chunk(
        json!([{"index": 0, "delta": {}, "logprobs": null, "finish_reason": finish}]),
        None,
    );
    let usage = message.get("usage").cloned().unwrap_or_else(|| json!({}));
    let field = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    let cached = field("cache_read_input_tokens");
    let prompt = field("input_tokens") + field("cache_creation_input_tokens") + cached;
    let completion = field("output_tokens");
    chunk(
        json!([]),
        Some(json!({
            "prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
        })),
    );
    out.push_str("data: [DONE]\n\n");
    out
}

/// Encodes a complete Anthropic message as the OpenAI Responses API would stream the same
/// answer: `response.created`, then one output item per block (a `thinking` block as a
/// `reasoning` item whose summary streams in `response.reasoning_summary_text.delta` events and
/// whose `signature` is its `encrypted_content`; text as a `message` item with `output_text`
/// deltas; each `tool_use` as a `function_call` with `arguments` deltas), pieces of about
/// `chunk_chars` characters, and `response.completed` (`response.incomplete` with
/// `max_output_tokens` for `max_tokens`, with `content_filter` for `refusal`) with every item and the usage (cache reads as
/// `input_tokens_details.cached_tokens`, included in `input_tokens`).
pub fn openai_responses_sse(message: &Value, chunk_chars: usize) -> String {
    let chunk_chars = chunk_chars.max(1);
    let id = format!(
        "resp_{}",
        message
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or("replay")
    );
    let model = message.get("model").cloned().unwrap_or(json!("replay"));
    let mut out = String::new();
    let mut event = |kind: &str, mut data: Value| {
        data["type"] = json!(kind);
        sse_event(&mut out, kind, &data);
    };
    let pieces = |text: &str| -> Vec<String> {
        let chars: Vec<char> = text.chars().collect();
        chars
            .chunks(chunk_chars)
            .map(|c| c.iter().collect())
            .collect()
    };
    let text_of = |block: &Value, key: &str| -> String {
        block
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    event(
        "response.created",
        json!({"response": {"id": id, "object": "response", "model": model, "status": "in_progress", "output": []}}),
    );
    let blocks = message
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut items = Vec::new();
    for block in &blocks {
        let index = items.len();
        let item = match block.get("type").and_then(Value::as_str) {
            Some("thinking") => {
                let thinking = text_of(block, "thinking");
                let rs = format!("rs_{index}");
                event(
                    "response.output_item.added",
                    json!({"output_index": index, "item": {"type": "reasoning", "id": rs, "summary": []}}),
                );
                event(
                    "response.reasoning_summary_part.added",
                    json!({"output_index": index, "item_id": rs, "summary_index": 0, "part": {"type": "summary_text", "text": ""}}),
                );
                for piece in pieces(&thinking) {
                    event(
                        "response.reasoning_summary_text.delta",
                        json!({"output_index": index, "item_id": rs, "summary_index": 0, "delta": piece}),
                    );
                }
                json!({"type": "reasoning", "id": rs, "summary": [{"type": "summary_text", "text": thinking}], "encrypted_content": text_of(block, "signature")})
            }
            Some("text") => {
                let text = text_of(block, "text");
                let msg = format!("msg_{index}");
                event(
                    "response.output_item.added",
                    json!({"output_index": index, "item": {"type": "message", "id": msg, "role": "assistant", "status": "in_progress", "content": []}}),
                );
                event(
                    "response.content_part.added",
                    json!({"output_index": index, "item_id": msg, "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
                );
                for piece in pieces(&text) {
                    event(
                        "response.output_text.delta",
                        json!({"output_index": index, "item_id": msg, "content_index": 0, "delta": piece}),
                    );
                }
                json!({"type": "message", "id": msg, "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": text, "annotations": []}]})
            }
            Some("tool_use") => {
                let arguments = block
                    .get("input")
                    .cloned()
                    .unwrap_or_else(|| json!({}))
                    .to_string();
                let fc = format!("fc_{index}");
                let announced = json!({"type": "function_call", "id": fc, "call_id": block["id"], "name": block["name"], "arguments": "", "status": "in_progress"});
                event(
                    "response.output_item.added",
                    json!({"output_index": index, "item": announced}),
                );
                for piece in pieces(&arguments) {
                    event(
                        "response.function_call_arguments.delta",
                        json!({"output_index": index, "item_id": fc, "delta": piece}),
                    );
                }
                event(
                    "response.function_call_arguments.done",
                    json!({"output_index": index, "item_id": fc, "arguments": arguments}),
                );
                json!({"type": "function_call", "id": fc, "call_id": block["id"], "name": block["name"], "arguments": arguments, "status": "completed"})
            }
            _ => continue,
        };
        event(
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        );
        items.push(item);
    }
    let usage = message.get("usage").cloned().unwrap_or_else(|| json!({}));
    let field = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    let cached = field("cache_read_input_tokens");
    let input = field("input_tokens") + field("cache_creation_input_tokens") + cached;
    let output = field("output_tokens");
    // A cut is `max_output_tokens`, a refusal the content filter's.
    let (kind, status, details) = match message.get("stop_reason").and_then(Value::as_str) {
        Some("max_tokens") => (
            "response.incomplete",
            "incomplete",
            json!({"reason": "max_output_tokens"}),
        ),
        Some("refusal") => (
            "response.incomplete",
            "incomplete",
            json!({"reason": "content_filter"}),
        ),
        _ => ("response.completed", "completed", Value::Null),
    };
    event(
        kind,
        json!({"response": {
            "id": id, "object": "response", "model": model, "status": status,
            "incomplete_details": details, "output": items,
            "usage": {"input_tokens": input, "input_tokens_details": {"cached_tokens": cached}, "output_tokens": output, "total_tokens": input + output},
        }}),
    );
    out
}

/// What a script answers to one request: the raw SSE body, or an error.
pub type ScriptReply = Result<Bytes, ModelError>;

/// A script: the call's number (0-based) and its request in, the reply out.
pub type Script = dyn Fn(usize, &Value) -> ScriptReply + Send + Sync;

/// A [`Model`] that answers each request with the SSE bytes a script returns, decoded
/// in-process in small chunks, exactly as a network stream would be.
///
/// [`ScriptedModel::new`] speaks Anthropic Messages; [`ScriptedModel::openai_chat`] speaks
/// OpenAI Chat Completions through the same translation as the client (the script sees the
/// translated request and answers with Chat Completions chunks, e.g. from
/// [`openai_chat_sse`]), and [`ScriptedModel::openai_responses`] the OpenAI Responses API
/// likewise (`response.*` events, e.g. from [`openai_responses_sse`]).
pub struct ScriptedModel {
    script: Arc<Script>,
    calls: Arc<AtomicUsize>,
    chunk: usize,
    provider: Provider,
}

impl std::fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedModel")
            .field("calls", &self.calls.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl ScriptedModel {
    /// A model whose `n`-th call (0-based) is answered by `script(n, request)`.
    pub fn new(script: impl Fn(usize, &Value) -> ScriptReply + Send + Sync + 'static) -> Self {
        Self {
            script: Arc::new(script),
            calls: Arc::new(AtomicUsize::new(0)),
            chunk: 61,
            provider: Provider::Anthropic,
        }
    }

    /// A model speaking OpenAI Chat Completions: `script(n, chat_request)` answers with
    /// `chat.completion.chunk` SSE bytes.
    pub fn openai_chat(
        script: impl Fn(usize, &Value) -> ScriptReply + Send + Sync + 'static,
    ) -> Self {
        Self {
            provider: Provider::OpenAiChat,
            ..Self::new(script)
        }
    }

    /// A model speaking the OpenAI Responses API: `script(n, responses_request)` answers with
    /// `response.*` SSE bytes (e.g. from [`openai_responses_sse`]).
    pub fn openai_responses(
        script: impl Fn(usize, &Value) -> ScriptReply + Send + Sync + 'static,
    ) -> Self {
        Self {
            provider: Provider::OpenAiResponses,
            ..Self::new(script)
        }
    }

    /// This model, also keeping every request its script is given (the translated one for
    /// [`openai_chat`](Self::openai_chat) and [`openai_responses`](Self::openai_responses)), in
    /// call order, for a test to look at.
    pub fn recorded(self) -> (Self, Arc<Mutex<Vec<Value>>>) {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&requests);
        let script = self.script;
        let model = Self {
            script: Arc::new(move |n: usize, request: &Value| {
                seen.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(request.clone());
                script(n, request)
            }),
            calls: self.calls,
            chunk: self.chunk,
            provider: self.provider,
        };
        (model, requests)
    }

    /// Calls made so far.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::Relaxed)
    }
}

impl Model for ScriptedModel {
    fn stream(&self, request: Value) -> ModelStream {
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        let reply = match self.provider {
            Provider::Anthropic => (self.script)(n, &request),
            Provider::OpenAiResponses => (self.script)(n, &responses_request(&request)),
            Provider::OpenAiChat => {
                (self.script)(n, &chat_request(&request, ChatOptions::default()))
            }
        };
        let chunk = self.chunk;
        let mut items: Vec<ModelEvent> = Vec::new();
        match reply {
            Err(error) => items.push(ModelEvent::Failed(error)),
            Ok(body) => {
                let mut decoder = StreamDecoder::for_provider(self.provider);
                let mut events: Vec<DecodeEvent> = Vec::new();
                let mut failed = None;
                let mut pos = 0;
                while pos < body.len() && failed.is_none() {
                    let end = (pos + chunk).min(body.len());
                    if let Err(error) = decoder.feed_into(body.slice(pos..end), &mut events) {
                        failed = Some(error);
                    }
                    pos = end;
                }
                items.extend(events.into_iter().map(ModelEvent::Decoded));
                let last = match failed {
                    Some(error) => ModelEvent::Failed(error.into()),
                    None => match decoder.finish() {
                        Ok(message) => ModelEvent::Completed {
                            message,
                            time_to_first_token: None,
                            request_id: None,
                        },
                        Err(error) => ModelEvent::Failed(error.into()),
                    },
                };
                items.push(last);
            }
        }
        let items = match self.provider {
            Provider::Anthropic => items,
            Provider::OpenAiChat => translate_all(items, ChatEventTranslator::new()),
            Provider::OpenAiResponses => translate_all(items, ResponsesEventTranslator::new()),
        };
        Box::pin(futures_util::stream::iter(items))
    }
}

/// Builds an Anthropic message from content blocks, with usage estimated from the request and
/// the content (the replay model has no tokenizer of its own).
pub fn scripted_message(request: &Value, content: Vec<Value>, stop_reason: &str) -> Value {
    let input = estimate_request_body(request, Family::Claude).total();
    let output: u64 = content
        .iter()
        .map(|b| match b.get("type").and_then(Value::as_str) {
            Some("text") => estimate_text(b["text"].as_str().unwrap_or_default(), Family::Claude),
            _ => estimate_text(&b.to_string(), Family::Claude),
        })
        .sum();
    json!({
        "id": format!("msg_replay_{}", input),
        "type": "message",
        "role": "assistant",
        "model": request.get("model").cloned().unwrap_or(json!("replay")),
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": null,
        "usage": {
            "input_tokens": input,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": output.max(1),
        },
    })
}

fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|x| x.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

/// The tool results a message carries, by call id: the `tool_result` blocks of an Anthropic
/// user message, or an OpenAI `tool` message.
fn results_of(message: &Value) -> Vec<(String, String)> {
    if message.get("role").and_then(Value::as_str) == Some("tool") {
        let id = message["tool_call_id"].as_str().unwrap_or_default();
        return vec![(id.to_owned(), content_text(&message["content"]))];
    }
    message
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
        .map(|b| {
            // An error result (a refused path, a failed search) lists nothing.
            let text = if b.get("is_error").and_then(Value::as_bool) == Some(true) {
                String::new()
            } else {
                content_text(&b["content"])
            };
            (
                b["tool_use_id"].as_str().unwrap_or_default().to_owned(),
                text,
            )
        })
        .collect()
}

/// The lines of a `glob` or `grep` result that name something: not the tools' "No files found"
/// and "No matches found" answers, nor their bracketed notes (`[showing 2 of 250 files; ...]`).
fn listed(output: &str) -> impl Iterator<Item = &str> {
    output.lines().map(str::trim).filter(|line| {
        !line.is_empty()
            && *line != "No files found"
            && *line != "No matches found"
            && !(line.starts_with('[') && line.ends_with(']'))
    })
}

/// `"+"` when a `grep` result says it stopped early (its counts are lower bounds), else `""`.
fn capped(output: &str) -> &'static str {
    if output
        .lines()
        .any(|line| line.trim().starts_with("[results truncated"))
    {
        "+"
    } else {
        ""
    }
}

/// How many things a `glob` or `grep` result names: the total of a capped `glob` listing's
/// `[showing N of M files; ...]` note, else the lines that name something.
fn listed_count(output: &str) -> usize {
    output
        .lines()
        .filter_map(|line| line.trim().strip_prefix("[showing "))
        .filter_map(|rest| rest.split_once(" of ")?.1.split_once(' ')?.0.parse().ok())
        .next()
        .unwrap_or_else(|| listed(output).count())
}

/// Whether a Responses `input` item is the model's (an assistant message, reasoning or a call).
fn is_model_item(item: &Value) -> bool {
    match item.get("type").and_then(Value::as_str) {
        Some("reasoning" | "function_call") => true,
        _ => item["role"] == "assistant",
    }
}

/// The `function_call_output` items among Responses `input` items, as (call id, output).
fn output_results(items: &[Value]) -> Vec<(String, String)> {
    items
        .iter()
        .filter(|item| item["type"] == "function_call_output")
        .map(|item| {
            let text = |key: &str| item[key].as_str().unwrap_or_default().to_owned();
            (text("call_id"), text("output"))
        })
        .collect()
}

/// The tool results sent since the last assistant message of a request (any shape).
fn last_results(request: &Value) -> Vec<(String, String)> {
    if let Some(items) = request.get("input").and_then(Value::as_array) {
        let since = items.iter().rposition(is_model_item).map_or(0, |i| i + 1);
        return output_results(&items[since..]);
    }
    let messages = request
        .get("messages")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let since = messages
        .iter()
        .rposition(|m| m["role"] == "assistant")
        .map_or(0, |i| i + 1);
    messages[since..].iter().flat_map(results_of).collect()
}

/// How many assistant turns a request's history already holds (in a Responses `input`, each
/// run of the model's items is one turn).
fn assistant_turns(request: &Value) -> usize {
    if let Some(items) = request.get("input").and_then(Value::as_array) {
        let mut previous = false;
        return items
            .iter()
            .filter(|item| {
                let model = is_model_item(item);
                let starts = model && !previous;
                previous = model;
                starts
            })
            .count();
    }
    request
        .get("messages")
        .and_then(Value::as_array)
        .map(|m| m.iter().filter(|x| x["role"] == "assistant").count())
        .unwrap_or(0)
}

/// The scripted conversation of `ferroloop run`'s replay model: it explores the current
/// directory with `glob`, `grep` and `read` (several calls in parallel), then answers from what
/// the tools returned. Only the model is scripted; the tools run for real. `request` is an
/// Anthropic Messages, OpenAI Chat Completions or Responses request; the answer is an Anthropic
/// message (encode it with [`anthropic_sse`], [`openai_chat_sse`] or [`openai_responses_sse`]).
pub fn explore_directory_script(request: &Value) -> Value {
    let text = |t: &str| json!({"type": "text", "text": t});
    let call = |id: &str, name: &str, input: Value| json!({"type": "tool_use", "id": id, "name": name, "input": input});
    match assistant_turns(request) {
        0 => scripted_message(
            request,
            vec![
                text(
                    "I'll start by looking around this directory: the files at the top, the documentation, and any open TODOs.",
                ),
                call("toolu_replay_01", "glob", json!({"pattern": "*"})),
                call("toolu_replay_02", "glob", json!({"pattern": "**/*.md"})),
                call(
                    "toolu_replay_03",
                    "grep",
                    json!({"pattern": "TODO|FIXME", "output_mode": "count"}),
                ),
            ],
            "tool_use",
        ),
        1 => {
            let results = last_results(request);
            let files: Vec<String> = results
                .iter()
                .filter(|(id, _)| id == "toolu_replay_01" || id == "toolu_replay_02")
                .flat_map(|(_, out)| listed(out).map(str::to_owned).collect::<Vec<_>>())
                .collect();
            let pick = files
                .iter()
                .find(|f| f.to_ascii_lowercase().contains("readme"))
                .or_else(|| {
                    files
                        .iter()
                        .find(|f| f.ends_with(".md") || f.ends_with(".toml") || f.ends_with(".txt"))
                })
                .or_else(|| files.first())
                .cloned();
            let mut content = vec![];
            match pick {
                Some(path) => {
                    content.push(text(&format!(
                        "Let me read `{path}` and check which files define things."
                    )));
                    content.push(call(
                        "toolu_replay_04",
                        "read",
                        json!({"file_path": path, "limit": 40}),
                    ));
                    content.push(call("toolu_replay_05", "grep", json!({"pattern": "^(fn|pub fn|def|class|function|export) ", "output_mode": "files_with_matches"})));
                }
                None => {
                    content.push(text(
                        "The directory looks empty; let me double-check hidden files.",
                    ));
                    content.push(call("toolu_replay_04", "glob", json!({"pattern": ".*"})));
                }
            }
            scripted_message(request, content, "tool_use")
        }
        _ => {
            let all: Vec<(String, String)> = match request.get("input").and_then(Value::as_array) {
                Some(items) => output_results(items),
                None => request
                    .get("messages")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .flat_map(results_of)
                    .collect(),
            };
            let lookup = |id: &str| {
                all.iter()
                    .find(|(i, _)| i == id)
                    .map(|(_, t)| t.as_str())
                    .unwrap_or("")
            };
            let top = listed_count(lookup("toolu_replay_01"));
            let docs = listed_count(lookup("toolu_replay_02"));
            // `grep` in count mode answers `path:count` per file.
            let counts: Vec<u64> = lookup("toolu_replay_03")
                .lines()
                .filter_map(|l| l.rsplit_once(':').and_then(|(_, n)| n.trim().parse().ok()))
                .collect();
            let todos = match counts.len() {
                0 => "none found".to_owned(),
                files => format!(
                    "{}{more} in {files}{more} file(s)",
                    counts.iter().sum::<u64>(),
                    more = capped(lookup("toolu_replay_03"))
                ),
            };
            // The second turn read a file (beside a `grep`), or, finding none, listed the
            // hidden ones.
            let read_a_file = all.iter().any(|(id, _)| id == "toolu_replay_05");
            let second = if read_a_file {
                let first_line = lookup("toolu_replay_04")
                    .lines()
                    .map(|l| l.split_once('\t').map_or(l, |(_, rest)| rest).trim())
                    .find(|l| !l.is_empty())
                    .unwrap_or("(empty)")
                    .to_owned();
                let defining = format!(
                    "{}{}",
                    listed_count(lookup("toolu_replay_05")),
                    capped(lookup("toolu_replay_05"))
                );
                format!(
                    "- The file I read starts with: \"{first_line}\".\n- {defining} files define functions or classes."
                )
            } else {
                let hidden = listed_count(lookup("toolu_replay_04"));
                format!("- There was no file to read; {hidden} hidden files.")
            };
            let answer = format!(
                "Here is what I found.\n\n- {top} entries at the top level, {docs} Markdown documents in the tree.\n- TODO/FIXME search: {todos}.\n{second}\n\n(This answer came from ferroloop's scripted replay model; the tool results above are real.)"
            );
            scripted_message(request, vec![text(&answer)], "end_turn")
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn encoded_message_decodes_back_to_itself() {
        let request = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        let message = scripted_message(
            &request,
            vec![
                json!({"type": "text", "text": "héllo wörld, 世界 🚀 and more text"}),
                json!({"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a \"b\".txt", "n": [1, 2]}}),
            ],
            "tool_use",
        );
        let sse = anthropic_sse(&message, 5);
        let mut decoder = StreamDecoder::for_provider(Provider::Anthropic);
        decoder.feed(Bytes::from(sse)).unwrap();
        let decoded = decoder.finish().unwrap();
        assert_eq!(decoded["content"], message["content"]);
        assert_eq!(decoded["stop_reason"], "tool_use");
        assert_eq!(
            decoded["usage"]["output_tokens"],
            message["usage"]["output_tokens"]
        );
    }

    #[test]
    fn the_openai_encoding_translates_back_to_the_same_message() {
        let request = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        let mut message = scripted_message(
            &request,
            vec![
                json!({"type": "text", "text": "two calls, 世界 🚀"}),
                json!({"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a \"b\".txt"}}),
                json!({"type": "tool_use", "id": "t2", "name": "glob", "input": {}}),
            ],
            "tool_use",
        );
        message["usage"]["cache_read_input_tokens"] = json!(3);
        let sse = openai_chat_sse(&message, 4);
        assert!(sse.ends_with("data: [DONE]\n\n"));
        let model = ScriptedModel::openai_chat(move |_, chat| {
            assert_eq!(
                chat["messages"][0],
                json!({"role": "user", "content": "hi"})
            );
            Ok(Bytes::from(sse.clone()))
        });
        let items: Vec<ModelEvent> =
            futures::executor::block_on(futures::StreamExt::collect(model.stream(request)));
        let ready: Vec<&str> = items
            .iter()
            .filter_map(|i| match i {
                ModelEvent::Decoded(DecodeEvent::ToolUseReady { id, .. }) => Some(id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(ready, ["t1", "t2"]);
        let Some(ModelEvent::Completed {
            message: decoded, ..
        }) = items.last()
        else {
            panic!("no final message: {items:?}");
        };
        assert_eq!(decoded["content"], message["content"]);
        assert_eq!(decoded["stop_reason"], "tool_use");
        assert_eq!(decoded["usage"], message["usage"]);
    }

    #[test]
    fn the_script_reads_tool_results_in_either_shape() {
        let anthropic = json!({"messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "glob", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "x.md"}]},
        ]});
        let chat =
            json!({"messages": chat_request(&anthropic, ChatOptions::default())["messages"]});
        assert_eq!(
            last_results(&anthropic),
            vec![("a".to_owned(), "x.md".to_owned())]
        );
        assert_eq!(last_results(&chat), last_results(&anthropic));
        assert_eq!(assistant_turns(&chat), 1);
    }

    /// A request whose history holds the first two turns of the script, with these results.
    fn history(turn1: [&str; 3], turn2: Vec<(&str, &str, &str)>) -> Value {
        let call =
            |id: &str, name: &str| json!({"type": "tool_use", "id": id, "name": name, "input": {}});
        let result = |id: &str, text: &str| json!({"type": "tool_result", "tool_use_id": id, "content": text});
        let (calls2, results2): (Vec<Value>, Vec<Value>) = turn2
            .iter()
            .map(|(id, name, text)| (call(id, name), result(id, text)))
            .unzip();
        json!({"messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [
                call("toolu_replay_01", "glob"), call("toolu_replay_02", "glob"), call("toolu_replay_03", "grep"),
            ]},
            {"role": "user", "content": [
                result("toolu_replay_01", turn1[0]), result("toolu_replay_02", turn1[1]), result("toolu_replay_03", turn1[2]),
            ]},
            {"role": "assistant", "content": calls2},
            {"role": "user", "content": results2},
        ]})
    }

    /// The script's second turn, answering the first turn's results of `request`.
    fn second_turn(request: &Value) -> Value {
        let messages: Vec<Value> = request["messages"]
            .as_array()
            .map(|messages| messages.iter().take(3).cloned().collect())
            .unwrap_or_default();
        explore_directory_script(&json!({ "messages": messages }))
    }

    fn answer(request: &Value) -> String {
        explore_directory_script(request)["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    #[test]
    fn the_answer_does_not_count_the_tools_nothing_found_answers() {
        let request = history(
            ["a.txt\n", "No files found", "No matches found"],
            vec![
                ("toolu_replay_04", "read", "     1\thi\n"),
                ("toolu_replay_05", "grep", "No matches found"),
            ],
        );
        let text = answer(&request);
        assert!(
            text.contains("1 entries at the top level, 0 Markdown documents in the tree"),
            "{text}"
        );
        assert!(
            text.contains("- 0 files define functions or classes."),
            "{text}"
        );
    }

    #[test]
    fn the_answer_counts_every_file_of_a_capped_listing() {
        let request = history(
            [
                "a\nb\n[showing 2 of 250 files; use a more specific pattern or path]\n",
                "No files found",
                "a:2\nb:3\n[results truncated at 2 files; narrow the search with path, glob or a more specific pattern]\n",
            ],
            vec![
                ("toolu_replay_04", "read", "     1\thi\n"),
                (
                    "toolu_replay_05",
                    "grep",
                    "a\n[results truncated at 1 files; narrow the search with path, glob or a more specific pattern]\n",
                ),
            ],
        );
        let text = answer(&request);
        assert!(text.contains("250 entries at the top level"), "{text}");
        assert!(
            text.contains("TODO/FIXME search: 5+ in 2+ file(s)"),
            "{text}"
        );
        assert!(text.contains("- 1+ files define"), "{text}");
    }

    #[test]
    fn an_empty_directory_is_not_a_file_read() {
        let first = history(
            ["No files found", "No files found", "No matches found"],
            vec![],
        );
        let turn2 = second_turn(&first);
        assert_eq!(turn2["content"][1]["name"], "glob", "{turn2}");
        let request = history(
            ["No files found", "No files found", "No matches found"],
            vec![("toolu_replay_04", "glob", "No files found")],
        );
        let text = answer(&request);
        assert!(
            text.contains("0 entries at the top level, 0 Markdown"),
            "{text}"
        );
        assert!(!text.contains("The file I read"), "{text}");
    }

    #[test]
    fn a_file_name_with_a_space_is_a_file() {
        let request = history(
            ["my notes.txt\n", "No files found", "No matches found"],
            vec![],
        );
        let turn2 = second_turn(&request);
        assert_eq!(
            turn2["content"][1]["input"]["file_path"], "my notes.txt",
            "{turn2}"
        );
    }
}
