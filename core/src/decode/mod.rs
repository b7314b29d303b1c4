//! Provider stream decoding: SSE events in, typed events and the accumulated message out.
//!
//! One decoder per provider ([`AnthropicDecoder`], [`OpenAiChatDecoder`],
//! [`OpenAiResponsesDecoder`]), all implementing [`EventDecoder`]:
//!
//! - [`EventDecoder::push_event`] takes one SSE event (type and data) and accumulates it;
//! - the typed [`DecodeEvent`]s it completed are collected with [`EventDecoder::drain_events`];
//! - [`EventDecoder::message`] is a snapshot of the message so far, in the provider's own
//!   non-streaming response shape (always valid JSON);
//! - [`EventDecoder::finish`] ends the input: the final message, or the typed
//!   [`DecodeError::Truncated`] (carrying the partial message) if it never completed, or the
//!   stream's first error again (a provider's error event, an event that broke the JSON or the
//!   protocol) if an event failed.
//!
//! [`StreamDecoder`] puts an SSE parser in front: raw bytes in (`feed`), events out.
//!
//! Tool-call inputs are appended to one buffer per call and parsed once when the call is sealed
//! ([`DecodeEvent::ToolUseReady`]); a complete-so-far view for UIs is available through
//! [`partial_json::PartialJson`], computed incrementally.

mod anthropic;
pub(crate) mod classify;
mod error;
mod event_type;
mod events;
mod json_str;
pub(crate) mod openai_chat;
mod openai_responses;
pub mod partial_json;
mod stream;

pub use anthropic::AnthropicDecoder;
#[cfg(feature = "client")]
pub(crate) use classify::status_of_code;
pub use classify::{PromptSizes, prompt_too_long};
pub use error::{DecodeError, ProtocolError, ProviderErrorKind};
#[cfg(feature = "client")]
pub(crate) use event_type::named_type;
pub(crate) use event_type::{data_type, is_unnamed};
pub use events::{DecodeEvent, SealedCallRef};
pub use openai_chat::OpenAiChatDecoder;
pub use openai_responses::OpenAiResponsesDecoder;
pub use stream::StreamDecoder;

use std::borrow::Cow;

use serde_json::Value;

use crate::json_text::lone_surrogates_replaced;

/// Decodes one event's `data` with `decode`; when that fails on JSON holding a lone UTF-16
/// surrogate escape, decodes it again with each such escape replaced by `\ufffd`.
///
/// `"\ud83d"` alone is what `JSON.stringify` writes for a string cut inside a surrogate pair, as
/// a JavaScript gateway re-chunking text by UTF-16 index sends it. RFC 8259's grammar allows it;
/// serde_json refuses it, which failed the whole stream. The half character becomes U+FFFD (as
/// napi's and Python's conversions make it) and the rest of the event is kept. Only an event
/// whose JSON did not parse is decoded again, and every decoder parses an event's JSON before
/// it changes any state, so the failed attempt left nothing behind.
///
/// `decode` gets the data to parse and, on the second attempt, the data as sent: a decoder that
/// joins the halves of a character cut between two events reads them from there.
pub(crate) fn decode_lone_surrogates_lossily(
    data: &str,
    mut decode: impl FnMut(&str, Option<&str>) -> Result<(), DecodeError>,
) -> Result<(), DecodeError> {
    match decode(data, None) {
        Err(error @ DecodeError::InvalidJson { .. }) => match lone_surrogates_replaced(data) {
            Cow::Owned(repaired) => decode(&repaired, Some(data)),
            Cow::Borrowed(_) => Err(error),
        },
        result => result,
    }
}

/// The value of event data read only to pass it on or to report it (an unknown event, a
/// provider's error): JSON whose lone surrogate escapes read as U+FFFD, as in every other event,
/// and data that is not JSON at all as a string of its text.
pub(crate) fn data_value(data: &str) -> serde_json::Value {
    crate::json_text::from_str_lossy(data)
        .unwrap_or_else(|_| serde_json::Value::String(data.to_owned()))
}

/// The common interface of the provider decoders.
pub trait EventDecoder {
    /// Decodes and accumulates one SSE event. `event_type` is the SSE `event` field (`message`
    /// when absent); `data` is the event's data.
    ///
    /// A provider `error` event is returned as [`DecodeError::Provider`]; data that is not the
    /// JSON the event requires as [`DecodeError::InvalidJson`]; protocol violations as
    /// [`DecodeError::Protocol`]. After an error the decoder keeps its state and decodes the
    /// later events, so [`EventDecoder::message`] still shows what arrived; the first error is
    /// remembered, and [`finish`](Self::finish) answers with it.
    fn push_event(&mut self, event_type: &str, data: &str) -> Result<(), DecodeError>;

    /// Moves the typed events completed so far into `out` (in order).
    fn drain_events(&mut self, out: &mut Vec<DecodeEvent>);

    /// Whether typed events are recorded (default `true`). Turning them off makes the decoder
    /// accumulate only, with no per-event allocation for text deltas.
    fn set_record_events(&mut self, record: bool);

    /// A snapshot of the message accumulated so far, in the provider's non-streaming response
    /// shape; `Value::Null` before the stream's first event.
    fn message(&self) -> Value;

    /// [`message`](Self::message) as JSON text: the same text as `message().to_string()`.
    /// Decoders that keep the message in a typed form serialize it directly, without building a
    /// `Value` tree first (what a binding handing the message over as JSON needs).
    fn message_json(&self) -> String {
        self.message().to_string()
    }

    /// Whether the stream reached its end marker (`message_stop`, `[DONE]`,
    /// `response.completed` or `response.incomplete`).
    fn is_complete(&self) -> bool;

    /// Ends the input. Returns the final message; or, if an event failed in
    /// [`push_event`](Self::push_event), the first such error again (the same variant and
    /// message: a provider's error event, [`DecodeError::InvalidJson`] or
    /// [`DecodeError::Protocol`]), even when the later events completed the message, which
    /// lacks what the failed event carried; otherwise [`DecodeError::Truncated`] with the
    /// partial message if the stream stopped early. May be called again: it answers the same.
    fn finish(&mut self) -> Result<Value, DecodeError>;

    /// [`finish`](Self::finish) with the final message as JSON text (see
    /// [`message_json`](Self::message_json)); the errors are the same.
    fn finish_json(&mut self) -> Result<String, DecodeError> {
        self.finish().map(|message| message.to_string())
    }
}

/// The providers whose streams can be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provider {
    /// Anthropic Messages API.
    Anthropic,
    /// OpenAI Chat Completions.
    OpenAiChat,
    /// OpenAI Responses.
    OpenAiResponses,
}

impl Provider {
    /// The provider's name on the command line and in the bindings.
    pub fn name(self) -> &'static str {
        match self {
            Self::Anthropic => "anthropic",
            Self::OpenAiChat => "openai-chat",
            Self::OpenAiResponses => "openai-responses",
        }
    }

    /// Parses a provider name (`anthropic`, `openai-chat`, `openai-responses`).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "anthropic" => Some(Self::Anthropic),
            "openai-chat" => Some(Self::OpenAiChat),
            "openai-responses" => Some(Self::OpenAiResponses),
            _ => None,
        }
    }

    /// A new decoder for this provider.
    pub fn decoder(self) -> AnyDecoder {
        match self {
            Self::Anthropic => AnyDecoder::Anthropic(AnthropicDecoder::new()),
            Self::OpenAiChat => AnyDecoder::OpenAiChat(OpenAiChatDecoder::new()),
            Self::OpenAiResponses => AnyDecoder::OpenAiResponses(OpenAiResponsesDecoder::new()),
        }
    }
}

/// A decoder for any provider, chosen at run time (what the CLI and the bindings hold).
#[derive(Debug)]
pub enum AnyDecoder {
    /// Anthropic Messages.
    Anthropic(AnthropicDecoder),
    /// OpenAI Chat Completions.
    OpenAiChat(OpenAiChatDecoder),
    /// OpenAI Responses.
    OpenAiResponses(OpenAiResponsesDecoder),
}

macro_rules! dispatch {
    ($self:ident, $d:ident => $e:expr) => {
        match $self {
            AnyDecoder::Anthropic($d) => $e,
            AnyDecoder::OpenAiChat($d) => $e,
            AnyDecoder::OpenAiResponses($d) => $e,
        }
    };
}

impl EventDecoder for AnyDecoder {
    fn push_event(&mut self, event_type: &str, data: &str) -> Result<(), DecodeError> {
        dispatch!(self, d => d.push_event(event_type, data))
    }
    fn drain_events(&mut self, out: &mut Vec<DecodeEvent>) {
        dispatch!(self, d => d.drain_events(out))
    }
    fn set_record_events(&mut self, record: bool) {
        dispatch!(self, d => d.set_record_events(record))
    }
    fn message(&self) -> Value {
        dispatch!(self, d => d.message())
    }
    fn message_json(&self) -> String {
        dispatch!(self, d => d.message_json())
    }
    fn is_complete(&self) -> bool {
        dispatch!(self, d => d.is_complete())
    }
    fn finish(&mut self) -> Result<Value, DecodeError> {
        dispatch!(self, d => d.finish())
    }
    fn finish_json(&mut self) -> Result<String, DecodeError> {
        dispatch!(self, d => d.finish_json())
    }
}
