//! Writing JSON lines to stdout.

use std::io::{self, Write};

/// True when `error` is stdout having been closed by its reader (`ferroloop sse | head`), which
/// is a normal way for a pipeline to end, not a failure.
pub fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error
        .chain()
        .filter_map(|cause| cause.downcast_ref::<io::Error>())
        .any(|e| e.kind() == io::ErrorKind::BrokenPipe)
}

/// Writes `value` as a JSON string (escaped per RFC 8259).
pub fn json_string(out: &mut impl Write, value: &str) -> io::Result<()> {
    serde_json::to_writer(&mut *out, value).map_err(io::Error::from)
}
