//! The script format: what the server answers to its Nth request, as data (JSON).
//!
//! ```json
//! {
//!   "responses": [
//!     {"status": 429, "headers": {"retry-after-ms": "20"}, "body": {"json": {"type": "error"}}},
//!     {"body": {"fixture": "tests/fixtures/anthropic/basic_response.sse"}, "chunk_bytes": 1},
//!     {"body": {"events": [{"event": "ping", "data": {"type": "ping"}}]},
//!      "fault": {"kind": "disconnect_after", "bytes": 100}}
//!   ],
//!   "when_exhausted": "error"
//! }
//! ```
//!
//! Response `i` answers request `i` (counted from 0 across all connections), so a multi-turn
//! conversation is a list of turns, retries included. Relative fixture paths are resolved
//! against the script's base directory.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use serde::Deserialize;

use crate::ReplayError;

/// A whole script: the responses in request order and what to do after the last one.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// Response `i` answers request `i`.
    #[serde(default)]
    pub responses: Vec<ScriptedResponse>,
    /// What requests beyond the script get.
    #[serde(default)]
    pub when_exhausted: WhenExhausted,
}

/// What the server answers once the script has run out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WhenExhausted {
    /// A 410 with an Anthropic-shaped error body (not retryable, so a client fails fast).
    #[default]
    Error,
    /// The last response again (a fixture served for ever).
    RepeatLast,
}

/// One scripted response.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedResponse {
    /// HTTP status (default 200).
    #[serde(default = "default_status")]
    pub status: u16,
    /// Response headers. `content-type` defaults from the body kind.
    #[serde(default)]
    pub headers: serde_json::Map<String, serde_json::Value>,
    /// The body.
    #[serde(default)]
    pub body: ScriptBody,
    /// Write the body in pieces of this many bytes (default: in one piece).
    #[serde(default)]
    pub chunk_bytes: Option<usize>,
    /// Pause between pieces, in milliseconds (with `chunk_bytes = 1`: a 1-byte drip).
    #[serde(default)]
    pub chunk_delay_ms: u64,
    /// Wait this long before sending the response head.
    #[serde(default)]
    pub headers_delay_ms: u64,
    /// A scripted failure.
    #[serde(default)]
    pub fault: Option<Fault>,
}

fn default_status() -> u16 {
    200
}

/// Where a response body comes from.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScriptBody {
    /// No body.
    #[default]
    Empty,
    /// These exact bytes (UTF-8 text).
    Text(String),
    /// A JSON document (serialised compactly).
    Json(serde_json::Value),
    /// The bytes of a file (relative paths resolve against the script's base directory).
    Fixture(PathBuf),
    /// Server-Sent Events rendered from a list.
    Events(Vec<ScriptEvent>),
    /// `count` events `interval_us` apart, each carrying in its `id` field the server's send
    /// time in nanoseconds since [`crate::clock_origin`] (for latency measurements).
    Paced {
        /// How many events.
        count: u64,
        /// Microseconds between events.
        interval_us: u64,
        /// The `data` of each event.
        #[serde(default)]
        data: String,
    },
}

/// One event of an [`ScriptBody::Events`] list.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptEvent {
    /// The `event:` field (omitted when absent).
    #[serde(default)]
    pub event: Option<String>,
    /// The data: a string is written as is (one `data:` line per line), anything else as
    /// compact JSON.
    pub data: serde_json::Value,
    /// The `id:` field (omitted when absent).
    #[serde(default)]
    pub id: Option<String>,
}

/// A scripted failure.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// Close the connection before any response byte is written.
    ResetBeforeHeaders,
    /// Send the head and the first `bytes` bytes of the body, then abort the connection.
    DisconnectAfter {
        /// Body bytes sent before the disconnect.
        bytes: usize,
    },
    /// Send the first `bytes` bytes of the body, then go silent for `ms` milliseconds, then
    /// send the rest.
    StallAfter {
        /// Body bytes sent before the stall.
        bytes: usize,
        /// Length of the stall.
        ms: u64,
    },
}

/// A body ready to send: fixed bytes, or events generated at send time.
#[derive(Debug, Clone)]
pub(crate) enum PreparedBody {
    Bytes(Bytes),
    Paced {
        count: u64,
        interval_us: u64,
        data: String,
    },
}

impl Script {
    /// Parses a script from JSON text.
    pub fn from_json(text: &str) -> Result<Self, ReplayError> {
        serde_json::from_str(text).map_err(ReplayError::Script)
    }

    /// A script that serves one body with status 200, again and again.
    pub fn repeat(body: ScriptBody) -> Self {
        Self {
            responses: vec![ScriptedResponse::ok(body)],
            when_exhausted: WhenExhausted::RepeatLast,
        }
    }
}

impl ScriptedResponse {
    /// A 200 response with this body and no fault.
    pub fn ok(body: ScriptBody) -> Self {
        Self::with_status(200, body)
    }

    /// A response with this status and body and no fault.
    pub fn with_status(status: u16, body: ScriptBody) -> Self {
        Self {
            status,
            headers: serde_json::Map::new(),
            body,
            chunk_bytes: None,
            chunk_delay_ms: 0,
            headers_delay_ms: 0,
            fault: None,
        }
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers
            .insert(name.to_owned(), serde_json::Value::String(value.to_owned()));
        self
    }

    /// Sets the fault.
    pub fn fault(mut self, fault: Fault) -> Self {
        self.fault = Some(fault);
        self
    }

    /// Writes the body in pieces of `bytes` bytes, `delay_ms` apart.
    pub fn chunked(mut self, bytes: usize, delay_ms: u64) -> Self {
        self.chunk_bytes = Some(bytes);
        self.chunk_delay_ms = delay_ms;
        self
    }
}

impl ScriptBody {
    /// The content type a client expects for this kind of body.
    pub(crate) fn default_content_type(&self) -> Option<&'static str> {
        match self {
            ScriptBody::Empty => None,
            ScriptBody::Text(_) => Some("text/plain; charset=utf-8"),
            ScriptBody::Json(_) => Some("application/json"),
            ScriptBody::Fixture(path) => Some(
                if path
                    .extension()
                    .is_some_and(|extension| extension == "json")
                {
                    "application/json"
                } else {
                    "text/event-stream"
                },
            ),
            ScriptBody::Events(_) | ScriptBody::Paced { .. } => Some("text/event-stream"),
        }
    }

    /// Loads files and renders events, once, at server start.
    pub(crate) fn prepare(&self, base_dir: &Path) -> Result<PreparedBody, ReplayError> {
        let bytes = match self {
            ScriptBody::Empty => Bytes::new(),
            ScriptBody::Text(text) => Bytes::from(text.clone()),
            ScriptBody::Json(value) => Bytes::from(value.to_string()),
            ScriptBody::Fixture(path) => {
                let path = base_dir.join(path);
                let bytes = std::fs::read(&path).map_err(|source| ReplayError::Fixture {
                    path: path.clone(),
                    source,
                })?;
                Bytes::from(bytes)
            }
            ScriptBody::Events(events) => Bytes::from(render_events(events)),
            ScriptBody::Paced {
                count,
                interval_us,
                data,
            } => {
                return Ok(PreparedBody::Paced {
                    count: *count,
                    interval_us: *interval_us,
                    data: data.clone(),
                });
            }
        };
        Ok(PreparedBody::Bytes(bytes))
    }
}

/// Renders events as an event stream, each ended by a blank line.
pub fn render_events(events: &[ScriptEvent]) -> String {
    let mut out = String::new();
    for event in events {
        if let Some(name) = &event.event {
            out.push_str("event: ");
            out.push_str(name);
            out.push('\n');
        }
        if let Some(id) = &event.id {
            out.push_str("id: ");
            out.push_str(id);
            out.push('\n');
        }
        let data = match &event.data {
            serde_json::Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        for line in data.split('\n') {
            out.push_str("data: ");
            out.push_str(line);
            out.push('\n');
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_script_with_every_kind_of_body_and_fault() {
        let script = Script::from_json(
            r#"{"responses": [
                {"status": 429, "headers": {"retry-after": "1"}, "body": {"json": {"a": 1}}},
                {"body": {"fixture": "x.sse"}, "chunk_bytes": 1, "chunk_delay_ms": 2},
                {"body": {"events": [{"event": "ping", "data": {"type": "ping"}}]},
                 "fault": {"kind": "disconnect_after", "bytes": 10}},
                {"body": {"text": "hi"}, "fault": {"kind": "stall_after", "bytes": 1, "ms": 5}},
                {"fault": {"kind": "reset_before_headers"}},
                {"body": {"paced": {"count": 3, "interval_us": 1000}}}
            ], "when_exhausted": "repeat_last"}"#,
        )
        .unwrap();
        assert_eq!(script.responses.len(), 6);
        assert_eq!(script.responses[0].status, 429);
        assert_eq!(script.responses[1].status, 200);
        assert_eq!(script.responses[1].chunk_bytes, Some(1));
        assert_eq!(
            script.responses[2].fault,
            Some(Fault::DisconnectAfter { bytes: 10 })
        );
        assert_eq!(
            script.responses[3].fault,
            Some(Fault::StallAfter { bytes: 1, ms: 5 })
        );
        assert_eq!(script.responses[4].fault, Some(Fault::ResetBeforeHeaders));
        assert_eq!(script.when_exhausted, WhenExhausted::RepeatLast);
    }

    #[test]
    fn rejects_unknown_fields() {
        assert!(Script::from_json(r#"{"responses": [{"stauts": 200}]}"#).is_err());
    }

    #[test]
    fn renders_events_with_multiline_data() {
        let events = vec![
            ScriptEvent {
                event: Some("message_start".into()),
                data: serde_json::json!({"type": "message_start"}),
                id: None,
            },
            ScriptEvent {
                event: None,
                data: serde_json::Value::String("a\nb".into()),
                id: Some("7".into()),
            },
        ];
        assert_eq!(
            render_events(&events),
            "event: message_start\ndata: {\"type\":\"message_start\"}\n\nid: 7\ndata: a\ndata: b\n\n"
        );
    }
}
