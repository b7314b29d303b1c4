//! The replay model of `ferroloop run` as a responder of the replay server: the scripted
//! "explore this directory" conversation (`ferroloop::agent::replay`), answered turn by turn from
//! the history in each request. Used by `ferroloop run` and by `ferroloop serve-replay
//! --agent-model`, so that binding test suites can drive a multi-turn agent run with parallel
//! tool calls over loopback HTTP.

use std::sync::Arc;

use ferroloop::agent::replay::{
    anthropic_sse, explore_directory_script, openai_chat_sse, openai_responses_sse,
};
use ferroloop::decode::Provider;
use ferroloop_replay::{Responder, ScriptBody, ScriptedResponse};
use serde_json::Value;

/// A responder answering each request with the next turn of the conversation, as a stream in
/// `provider`'s format (Anthropic Messages, OpenAI Chat Completions chunks or Responses events)
/// written in `chunk_bytes` pieces `delay_ms` apart.
pub fn explore_directory_responder(
    provider: Provider,
    chunk_bytes: usize,
    delay_ms: u64,
) -> Responder {
    Arc::new(move |request| {
        let body: Value = serde_json::from_str(&request.body).ok()?;
        let message = explore_directory_script(&body);
        let sse = match provider {
            Provider::Anthropic => anthropic_sse(&message, 12),
            Provider::OpenAiChat => openai_chat_sse(&message, 12),
            Provider::OpenAiResponses => openai_responses_sse(&message, 12),
        };
        Some(
            ScriptedResponse::ok(ScriptBody::Text(sse))
                .header("content-type", "text/event-stream")
                .chunked(chunk_bytes, delay_ms),
        )
    })
}
