//! `StreamDecoder` for JavaScript: raw SSE bytes of a provider stream in, typed events and the
//! accumulated message out (`ferroloop::decode`).
//!
//! Events and messages cross as JSON text, parsed by `JSON.parse` in `lib/decode.js`. Errors
//! carry a stable code; what does not fit in an error tag (the partial message of a truncated
//! stream, the provider's error payload, the events completed before the failure) is kept as
//! JSON for `takeErrorDetail`, which the wrapper attaches to the thrown error.

use ferroloop::decode::{DecodeError, DecodeEvent, EventDecoder, Provider, StreamDecoder};
use napi::{Env, JsString};
use napi_derive::napi;
use serde_json::{Value, json};

use crate::error::{ErrorCode, FerroloopError};
use crate::guard;
use crate::utf16::js_string;

/// Options for [`NativeStreamDecoder`].
#[napi(object)]
#[derive(Debug, Clone, Default)]
pub struct StreamDecoderOptions {
    /// `anthropic`, `openai-chat` or `openai-responses`.
    pub provider: String,
    /// Record typed events (default true). Off: `feed` returns no events and the decoder only
    /// accumulates the message (no per-delta allocation).
    pub events: Option<bool>,
}

/// A provider stream decoder: `feed(bytes)` returns the typed events completed by the chunk,
/// `message()` the message so far, `finish()` the final message.
#[napi(js_name = "StreamDecoder")]
#[derive(Debug)]
pub struct NativeStreamDecoder {
    inner: StreamDecoder,
    events: Vec<DecodeEvent>,
    error_detail: Option<String>,
}

/// The stable code of a decoder error.
fn code_of(err: &DecodeError) -> ErrorCode {
    match err {
        DecodeError::InvalidJson { .. } | DecodeError::Protocol(_) => ErrorCode::Protocol,
        DecodeError::Truncated { .. } => ErrorCode::StreamTruncated,
        DecodeError::Provider {
            error_type,
            message,
            ..
        } => match error_type.as_str() {
            "overloaded_error" => ErrorCode::Overloaded,
            "rate_limit_error" | "rate_limit_exceeded" => ErrorCode::RateLimited,
            "request_too_large" => ErrorCode::PromptTooLong,
            "invalid_request_error" if message.contains("prompt is too long") => {
                ErrorCode::PromptTooLong
            }
            "context_length_exceeded" => ErrorCode::PromptTooLong,
            _ => ErrorCode::ProviderError,
        },
    }
}

/// What the JS error gets besides its code and message.
fn detail_of(err: &DecodeError, events: &[DecodeEvent]) -> Value {
    let mut detail =
        json!({ "events": events.iter().map(DecodeEvent::to_json).collect::<Vec<_>>() });
    match err {
        DecodeError::Truncated { partial, .. } => {
            detail["partial"] = (**partial).clone();
        }
        DecodeError::Provider {
            error_type, raw, ..
        } => {
            detail["errorType"] = json!(error_type);
            detail["raw"] = raw.clone();
        }
        DecodeError::InvalidJson { .. } | DecodeError::Protocol(_) => {
            detail["errorType"] = json!(err.code());
        }
    }
    detail
}

impl NativeStreamDecoder {
    /// Records `err`'s detail for `takeErrorDetail` and returns the error to throw.
    fn fail(&mut self, err: &DecodeError) -> napi::Error {
        let events = std::mem::take(&mut self.events);
        let mut detail = detail_of(err, &events);
        if detail.get("partial").is_none() {
            detail["partial"] = self.inner.message();
        }
        self.error_detail = Some(detail.to_string());
        FerroloopError::new(code_of(err), err.to_string()).into()
    }

    /// The pending events as a JSON array, serialized straight to text (no `Value` tree).
    fn events_json<'env>(&mut self, env: &'env Env) -> napi::Result<Option<JsString<'env>>> {
        if self.events.is_empty() {
            return Ok(None);
        }
        let text = serde_json::to_string(&self.events)
            .map_err(|err| FerroloopError::internal(format!("event serialization: {err}")))?;
        self.events.clear();
        Ok(Some(js_string(env, &text)?))
    }
}

#[napi]
impl NativeStreamDecoder {
    /// A decoder for `options.provider`.
    #[napi(constructor)]
    pub fn new(options: StreamDecoderOptions) -> napi::Result<Self> {
        guard::sync(|| {
            let provider = Provider::from_name(&options.provider).ok_or_else(|| {
                FerroloopError::invalid_argument(format!(
                    "unknown provider '{}': expected anthropic, openai-chat or openai-responses",
                    options.provider
                ))
            })?;
            let mut inner = StreamDecoder::for_provider(provider);
            inner
                .decoder_mut()
                .set_record_events(options.events.unwrap_or(true));
            Ok(Self {
                inner,
                events: Vec::new(),
                error_detail: None,
            })
        })
    }

    /// Feeds raw bytes; returns the typed events they completed as a JSON array (`null` when
    /// none).
    #[napi(js_name = "feedJson")]
    pub fn feed_json<'env>(
        &mut self,
        env: &'env Env,
        chunk: &[u8],
    ) -> napi::Result<Option<JsString<'env>>> {
        guard::sync(|| {
            let mut events = std::mem::take(&mut self.events);
            // Read in place: the SSE parser copies only what an unfinished event needs.
            let fed = self.inner.feed_borrowed_into(chunk, &mut events);
            self.events = events;
            match fed {
                Ok(()) => self.events_json(env),
                Err(err) => Err(self.fail(&err)),
            }
        })
    }

    /// The message accumulated so far, as JSON (`null` before the first event).
    #[napi(js_name = "messageJson")]
    pub fn message_json<'env>(&self, env: &'env Env) -> napi::Result<JsString<'env>> {
        guard::sync(|| js_string(env, &self.inner.message_json()))
    }

    /// Whether the stream reached its end marker.
    #[napi(getter, js_name = "isComplete")]
    pub fn is_complete(&self) -> napi::Result<bool> {
        guard::sync(|| Ok(self.inner.is_complete()))
    }

    /// Ends the input; returns the final message as JSON, or throws `stream_truncated` (partial
    /// message in the detail), the provider's error, or `protocol`.
    #[napi(js_name = "finishJson")]
    pub fn finish_json<'env>(&mut self, env: &'env Env) -> napi::Result<JsString<'env>> {
        guard::sync(|| match self.inner.finish_json() {
            Ok(text) => js_string(env, &text),
            Err(err) => Err(self.fail(&err)),
        })
    }

    /// The detail of the last error thrown (JSON), once.
    #[napi(js_name = "takeErrorDetail")]
    pub fn take_error_detail(&mut self) -> napi::Result<Option<String>> {
        guard::sync(|| Ok(self.error_detail.take()))
    }
}
