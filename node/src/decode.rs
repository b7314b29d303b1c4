//! `StreamDecoder` for JavaScript: raw SSE bytes of a provider stream in, typed events and the
//! accumulated message out (`ferroloop::decode`).
//!
//! Events and messages cross as JSON text, parsed by `JSON.parse` in `lib/decode.js`. Errors
//! carry a stable code; what does not fit in an error tag (the partial message of a truncated
//! stream, the provider's error payload, the events completed before the failure) is kept as
//! JSON for `takeErrorDetail`, which the wrapper attaches to the thrown error.

use ferroloop::decode::{
    DecodeError, DecodeEvent, EventDecoder, Provider, ProviderErrorKind, StreamDecoder,
};
use napi::bindgen_prelude::BufferSlice;
use napi::{Env, JsString};
use napi_derive::napi;
use serde_json::{Value, json};

use crate::batch::{BatchText, append, js_string, put_offsets, take_kept_offsets, writable};
use crate::error::{ErrorCode, FerroloopError};
use crate::extmem::ExternalMemory;
use crate::guard;

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
///
/// It tells V8 how much native memory it holds (`napi_adjust_external_memory`): the message
/// grows with the stream while the JavaScript wrapper stays small, so V8 would not see dropped
/// decoders as worth collecting.
#[napi(js_name = "StreamDecoder", custom_finalize)]
#[derive(Debug)]
pub struct NativeStreamDecoder {
    inner: StreamDecoder,
    events: Vec<DecodeEvent>,
    error_detail: Option<String>,
    /// The text of the batch being built (`feedBatch`), reused from chunk to chunk.
    batch_text: BatchText,
    /// Its offsets: four per event (see `feedBatch`).
    batch_offsets: Vec<u32>,
    /// Offsets of the last batch that did not fit the caller's array (see `takeOffsets`).
    pending_offsets: Vec<u32>,
    /// Bytes fed so far, which the size reported to V8 is estimated from.
    bytes_fed: usize,
    /// What was reported to V8 (see [`NativeStreamDecoder::native_size`]).
    memory: ExternalMemory,
}

/// The share of the bytes fed a decoder is reported to keep. The message holds the stream's text
/// without its framing, 15-28% of the bytes of the recorded and generated streams, in strings
/// with up to as much spare capacity, besides the parser's buffers: a live decoder measured about
/// 33 KB of RSS after a 64 KiB Anthropic stream and 350 KB after 1 MiB, a third of each.
pub(crate) const KEPT_SHARE: usize = 3;

impl napi::bindgen_prelude::ObjectFinalize for NativeStreamDecoder {
    /// Takes back the memory reported to V8 (the decoder is being freed).
    fn finalize(mut self, env: Env) -> napi::Result<()> {
        self.memory.release_in_finalizer(&env);
        Ok(())
    }
}

/// How `feedBatch` sends an event: [`EventKind::Json`], or the kind of text delta whose text is
/// the span (the common events: no JSON to write or to parse). `lib/decode.js` keeps the same
/// numbering.
#[derive(Debug, Clone, Copy)]
#[repr(u32)]
enum EventKind {
    /// The span is the event as JSON.
    Json = 0,
    TextDelta = 1,
    InputJsonDelta = 2,
    ThinkingDelta = 3,
    RefusalDelta = 4,
    SignatureDelta = 5,
}

/// The compact form of `event` (a text delta: its kind, block index and text), if it has one.
fn text_delta(event: &DecodeEvent) -> Option<(EventKind, u32, &str)> {
    let (kind, index, text) = match event {
        DecodeEvent::TextDelta { index, text } => (EventKind::TextDelta, index, text),
        DecodeEvent::InputJsonDelta {
            index,
            partial_json,
        } => (EventKind::InputJsonDelta, index, partial_json),
        DecodeEvent::ThinkingDelta { index, thinking } => {
            (EventKind::ThinkingDelta, index, thinking)
        }
        DecodeEvent::RefusalDelta { index, refusal } => (EventKind::RefusalDelta, index, refusal),
        DecodeEvent::SignatureDelta { index, signature } => {
            (EventKind::SignatureDelta, index, signature)
        }
        _ => return None,
    };
    // An index past u32 (never seen in practice) goes as JSON, which carries any number.
    Some((kind, u32::try_from(*index).ok()?, text.as_str()))
}

/// The stable code of a decoder error; a provider's error event gets its class's code (the
/// core's [`ProviderErrorKind`], the same for every binding and the client's in-stream errors).
fn code_of(err: &DecodeError) -> ErrorCode {
    match err {
        DecodeError::InvalidJson { .. } | DecodeError::Protocol(_) => ErrorCode::Protocol,
        // A misuse (a feed after finish): the core's code, C's status, a sealed turn's code.
        DecodeError::Finished => ErrorCode::InvalidState,
        DecodeError::Truncated { .. } => ErrorCode::StreamTruncated,
        DecodeError::Provider { .. } => match err.provider_kind() {
            Some(ProviderErrorKind::Overloaded) => ErrorCode::Overloaded,
            Some(ProviderErrorKind::RateLimited) => ErrorCode::RateLimited,
            Some(ProviderErrorKind::QuotaExceeded) => ErrorCode::QuotaExceeded,
            Some(ProviderErrorKind::PromptTooLong) => ErrorCode::PromptTooLong,
            Some(ProviderErrorKind::Authentication) => ErrorCode::Authentication,
            Some(ProviderErrorKind::Permission) => ErrorCode::Permission,
            Some(ProviderErrorKind::NotFound) => ErrorCode::NotFound,
            Some(ProviderErrorKind::InvalidRequest) => ErrorCode::InvalidRequest,
            Some(ProviderErrorKind::Server) => ErrorCode::Server,
            Some(ProviderErrorKind::Other) | None => ErrorCode::ProviderError,
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
        DecodeError::InvalidJson { .. } | DecodeError::Protocol(_) | DecodeError::Finished => {
            detail["errorType"] = json!(err.code());
        }
    }
    detail
}

impl NativeStreamDecoder {
    /// The native memory the decoder is estimated to hold: its own struct and the message, a
    /// share of the bytes fed (measuring the message's strings each chunk would cost per event).
    fn native_size(&self) -> usize {
        std::mem::size_of::<Self>() + self.bytes_fed / KEPT_SHARE
    }

    /// Counts `chunk` as fed and reports the decoder's new size to V8 when it moved a step.
    fn account(&mut self, env: &Env, chunk: &[u8]) {
        self.bytes_fed = self.bytes_fed.saturating_add(chunk.len());
        let size = self.native_size();
        self.memory.update(env, size);
    }

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

    /// Decodes `chunk` (read in place: the SSE parser copies only what an unfinished event
    /// needs) into the pending events; a decoding error becomes the error to throw (`fail`).
    fn feed_events(&mut self, chunk: &[u8]) -> napi::Result<()> {
        let mut events = std::mem::take(&mut self.events);
        let fed = self.inner.feed_borrowed_into(chunk, &mut events);
        self.events = events;
        fed.map_err(|err| self.fail(&err))
    }

    /// Writes the pending events into the batch text and offsets (see `feedBatch`) and clears
    /// them.
    fn build_batch(&mut self) -> Result<(), FerroloopError> {
        // Taken: an error below drops the events (the call throws), never sends them twice.
        let mut events = std::mem::take(&mut self.events);
        let (text, offsets) = (&mut self.batch_text, &mut self.batch_offsets);
        text.clear();
        offsets.clear();
        for event in &events {
            let (kind, index, span) = match text_delta(event) {
                Some((kind, index, delta)) => (kind, index, append(text, delta)?),
                None => {
                    let json = serde_json::to_string(event).map_err(|err| {
                        FerroloopError::internal(format!("event serialization: {err}"))
                    })?;
                    (EventKind::Json, 0, append(text, &json)?)
                }
            };
            offsets.extend_from_slice(&[kind as u32, index, span.start, span.end]);
        }
        events.clear();
        self.events = events;
        Ok(())
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
    pub fn new(env: Env, options: StreamDecoderOptions) -> napi::Result<Self> {
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
                batch_text: BatchText::default(),
                batch_offsets: Vec::new(),
                pending_offsets: Vec::new(),
                bytes_fed: 0,
                memory: ExternalMemory::new(&env, std::mem::size_of::<Self>()),
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
            self.account(env, chunk);
            self.feed_events(chunk)?;
            self.events_json(env)
        })
    }

    /// Feeds raw bytes; returns the typed events they completed as one batch (`null` when
    /// none): a text holding each event's span back to back, and in `out` (a byte view of a
    /// `Uint32Array`) the count `n` then four values per event: its kind (0: the span is the
    /// event's JSON; 1–5: a `text_delta`, `input_json_delta`, `thinking_delta`, `refusal_delta`
    /// or `signature_delta` whose text is the span), its block index (0 for JSON) and the
    /// span's start and end in UTF-16 units. When `out` has no room for `1 + 4n` values, only
    /// the count is written and the offsets are kept for [`take_offsets`](Self::take_offsets).
    /// Errors as `feedJson`.
    #[napi(
        js_name = "feedBatch",
        ts_args_type = "chunk: Uint8Array, out: Uint8Array"
    )]
    pub fn feed_batch<'env>(
        &mut self,
        env: &'env Env,
        chunk: BufferSlice<'_>,
        mut out: BufferSlice<'_>,
    ) -> napi::Result<Option<JsString<'env>>> {
        guard::sync(|| {
            let chunk: &[u8] = &chunk;
            let out = writable(&mut out, Some(chunk))?;
            self.account(env, chunk);
            self.feed_events(chunk)?;
            let count = u32::try_from(self.events.len()).map_err(|_| {
                FerroloopError::invalid_argument("one chunk completed over 2^32 events")
            })?;
            put_offsets(out, 0, &[count]);
            if count == 0 {
                return Ok(None);
            }
            self.build_batch()?;
            if !put_offsets(out, 1, &self.batch_offsets) {
                self.pending_offsets.clone_from(&self.batch_offsets);
            }
            Ok(Some(self.batch_text.make_js_string(env)?))
        })
    }

    /// Copies the offsets `feedBatch` could not fit into `out` (a byte view of a `Uint32Array`,
    /// which must hold them all).
    #[napi(js_name = "takeOffsets", ts_args_type = "out: Uint8Array")]
    pub fn take_offsets(&mut self, mut out: BufferSlice<'_>) -> napi::Result<()> {
        guard::sync(|| Ok(take_kept_offsets(&mut self.pending_offsets, &mut out)?))
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
