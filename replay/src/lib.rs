//! A loopback HTTP server that replays recorded or scripted provider responses with scripted
//! faults (429 with `retry-after`, 529, 500 then success, a reset before the headers, a
//! disconnect or a stall mid-stream, a 1-byte drip, HTTP/2, TLS with a self-signed
//! certificate). The client's tests use it in process; `ferroloop serve-replay` runs it for the
//! Python and Node tests. It only ever binds 127.0.0.1.

mod body;
mod script;
mod server;
mod tls;

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Instant;

pub use body::ReplayBody;
pub use script::{
    Fault, Script, ScriptBody, ScriptEvent, ScriptedResponse, WhenExhausted, render_events,
};
pub use server::{RecordedRequest, ReplayServer, ServerOptions};

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The script is not valid JSON of the expected shape.
    #[error("invalid replay script: {0}")]
    Script(#[source] serde_json::Error),
    /// The script has a bad value (status, header).
    #[error("invalid replay script: {0}")]
    InvalidScript(String),
    /// A fixture file could not be read.
    #[error("cannot read fixture {path}: {source}")]
    Fixture {
        /// The resolved path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Binding or accepting failed.
    #[error("replay server I/O error: {0}")]
    Io(#[source] std::io::Error),
    /// The self-signed certificate or the TLS configuration failed.
    #[error("replay server TLS setup failed: {0}")]
    Tls(String),
}

/// The instant [`ScriptBody::Paced`] timestamps count from (nanoseconds, in the `id` field).
/// Shared by everything in the process, so an in-process client can compute latencies.
pub fn clock_origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}
