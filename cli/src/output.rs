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

/// `error` and its causes joined by ": ", like `{:#}`, but without a cause whose text the
/// message before it already ends with: many errors print their source in their own message,
/// and the chain would say it twice ("unusable: not a directory: not a directory").
pub fn describe(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let message = cause.to_string();
        if text.ends_with(&message) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&message);
    }
    text
}

/// Writes a line to stderr, as `eprintln!` does, but ignores a failed write (a closed pipe with
/// `2>&1 | head`, a full disk) instead of panicking: stderr that cannot be written must not turn
/// a clean exit status into a panic's 101.
pub fn report(args: std::fmt::Arguments<'_>) {
    let mut err = io::stderr().lock();
    let _ = err.write_fmt(args).and_then(|()| err.write_all(b"\n"));
}

/// Writes `value` as a JSON string (escaped per RFC 8259).
pub fn json_string(out: &mut impl Write, value: &str) -> io::Result<()> {
    serde_json::to_writer(&mut *out, value).map_err(io::Error::from)
}
