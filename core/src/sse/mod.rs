//! Server-Sent-Events framing: a sans-IO, zero-copy, linear-time parser that follows the WHATWG
//! HTML "event stream" algorithm exactly, and a [`futures_core::Stream`] adapter on top of it.
//!
//! Rules implemented (see `DESIGN.md` §1): one leading BOM stripped, even when split across
//! chunks; CRLF, LF and CR line ends, a CR at the end of a chunk ends the line at once; `:`
//! comments; `event`, `data`, `id` (ignored when it contains NUL, persists, empty resets) and
//! `retry` (ASCII digits only); unknown fields ignored; a blank line dispatches; no data, no
//! event; invalid UTF-8 becomes U+FFFD; an unterminated event at end of input is discarded.

mod event;
mod line_end;
mod parser;
mod stream;

pub use event::{SseEvent, SseEventRef, SseItem};
pub use parser::{SseConfig, SseOwnedItem, SseParser, parse_all};
pub use stream::SseStream;
