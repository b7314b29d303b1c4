//! The type of an event sent without an `event:` line.
//!
//! Anthropic and OpenAI Responses name each event twice: in the SSE `event:` field and in the
//! data's JSON `type`. Some proxies strip the `event:` lines; the event then arrives as the SSE
//! default, `message`, and only its `type` says what it is. The decoders and the client's
//! bookkeeping (the final event, an error event, the first content) read it the same way.

use std::borrow::Cow;

use serde::Deserialize;

use super::DecodeError;

/// An event's data, read for its `type` alone.
#[derive(Deserialize)]
struct TypeOnly<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
}

/// The `type` of an unnamed event's JSON data (what names it); `DecodeError::InvalidJson` for the
/// event `event_type` when the data is not a JSON object with a string `type`.
pub(crate) fn data_type<'a>(event_type: &str, data: &'a str) -> Result<Cow<'a, str>, DecodeError> {
    serde_json::from_str::<TypeOnly<'_>>(data)
        .map(|peek| peek.kind)
        .map_err(|e| DecodeError::json(event_type, e))
}

/// Whether an SSE event type is what an event without an `event:` line gets (the parser's
/// default, `message`, or nothing).
pub(crate) fn is_unnamed(event_type: &str) -> bool {
    matches!(event_type, "" | "message")
}

/// The event type of an event of a provider that names its events: `event_type` itself, or for
/// an unnamed event ([`is_unnamed`]) the `type` of its JSON data when it has one. Only the
/// client's bookkeeping needs it (the decoders match on the type themselves).
#[cfg(feature = "client")]
pub(crate) fn named_type<'a>(event_type: &'a str, data: &'a str) -> Cow<'a, str> {
    if !is_unnamed(event_type) {
        return Cow::Borrowed(event_type);
    }
    data_type(event_type, data).unwrap_or(Cow::Borrowed(event_type))
}

#[cfg(all(test, feature = "client"))]
mod tests {
    use super::*;

    #[test]
    fn a_named_event_keeps_its_name_whatever_its_data() {
        assert_eq!(
            named_type("message_stop", r#"{"type":"ping"}"#),
            "message_stop"
        );
        assert_eq!(named_type("error", "not json"), "error");
    }

    #[test]
    fn an_unnamed_event_is_named_by_its_data_s_type() {
        assert_eq!(
            named_type("message", r#"{"type":"message_stop"}"#),
            "message_stop"
        );
        assert_eq!(
            named_type("", r#"{"index":0,"type":"content_block_delta"}"#),
            "content_block_delta"
        );
        // Escapes in the type are read as JSON.
        assert_eq!(named_type("message", r#"{"type":"e\u0072ror"}"#), "error");
    }

    #[test]
    fn an_unnamed_event_without_a_type_stays_unnamed() {
        assert_eq!(named_type("message", "[DONE]"), "message");
        assert_eq!(named_type("message", r#"{"kind":"x"}"#), "message");
        assert_eq!(named_type("message", r#"{"type":7}"#), "message");
        assert_eq!(named_type("", "{"), "");
    }
}
