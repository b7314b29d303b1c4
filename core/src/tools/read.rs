//! `read`: a text file with `cat -n`-style line numbers, a window of lines, bounded output.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::output::{Utf16, Utf16Reader, looks_binary, truncate_line};
use super::workspace::FileStamp;
use super::{ToolFailure, Workspace, parse_input, run_blocking};

/// Limits of the `read` tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimits {
    /// Lines returned when the call gives no `limit` (default 2,000).
    pub default_line_limit: usize,
    /// Characters kept of one line; the rest is replaced by a marker (default 2,000).
    pub max_line_chars: usize,
    /// Bytes of output a call returns at most (the first line excepted), then a "continue at
    /// offset" note; bounds the result whatever the file's size. The default, 48 KiB, keeps
    /// a page under the executor's default per-result limit (50,000 characters): a page over
    /// it would be replaced by a preview and a spill file outside the workspace, which `read`
    /// cannot open.
    pub max_output_bytes: usize,
}

impl Default for ReadLimits {
    fn default() -> Self {
        Self {
            default_line_limit: 2_000,
            max_line_chars: 2_000,
            max_output_bytes: 48 * 1024,
        }
    }
}

/// Reads a text file from the workspace. Concurrency-safe.
#[derive(Debug, Clone)]
pub struct ReadTool {
    workspace: Workspace,
    limits: ReadLimits,
    /// Built from the limits once, so the model is told the numbers that actually apply.
    description: Arc<str>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadInput {
    file_path: String,
    #[serde(default)]
    offset: Option<usize>,
    #[serde(default)]
    limit: Option<usize>,
}

impl ReadTool {
    /// The tool's name.
    pub const NAME: &'static str = "read";

    /// A `read` tool confined to `workspace`, with default limits.
    pub fn new(workspace: Workspace) -> Self {
        Self::with_limits(workspace, ReadLimits::default())
    }

    /// A `read` tool with explicit limits.
    pub fn with_limits(workspace: Workspace, limits: ReadLimits) -> Self {
        let description = format!(
            "Read a text file from the workspace. Output lines are numbered like `cat -n` \
             (line number, tab, content), starting at 1. By default up to {} lines are returned \
             from the start; use `offset` (1-based line number to start at) and `limit` (number \
             of lines) to read other parts of long files. Lines longer than {} characters are \
             truncated. UTF-16 files with a byte order mark are read as text; binary files \
             are refused. Paths are relative to the workspace root.",
            limits.default_line_limit, limits.max_line_chars
        );
        Self {
            workspace,
            limits,
            description: description.into(),
        }
    }

    /// The description shown to the model; it states this tool's limits.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The JSON schema of the input.
    pub fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "description": "The file to read, relative to the workspace root (or absolute inside it)."},
                "offset": {"type": "integer", "minimum": 1, "description": "The 1-based line number to start reading at (default 1)."},
                "limit": {"type": "integer", "minimum": 1, "description": format!("How many lines to read (default {}).", self.limits.default_line_limit)}
            },
            "required": ["file_path"],
            "additionalProperties": false
        })
    }

    /// Runs the tool.
    pub async fn call(
        &self,
        input: Value,
        cancel: CancellationToken,
    ) -> Result<String, ToolFailure> {
        let input: ReadInput = parse_input(Self::NAME, || self.input_schema(), input)?;
        let offset = input.offset.unwrap_or(1).max(1);
        let limit = match input.limit {
            Some(0) => return Err(ToolFailure::InvalidInput("limit must be at least 1".into())),
            Some(limit) => limit,
            None => self.limits.default_line_limit,
        };
        let path = self.workspace.resolve_readable(&input.file_path)?;
        let limits = self.limits;
        let job_cancel = cancel.clone();
        let workspace = self.workspace.clone();
        run_blocking(&cancel, move || {
            let (text, stamp) =
                read_lines(&path, &input.file_path, offset, limit, &limits, &job_cancel)?;
            match text {
                // Any successful read counts, a page of a long file included (as it does for
                // Claude Code): the model has seen the file as it is now.
                Ok(_) |
                // A binary file is refused, but the model then knows what the file is, which
                // is all it can know of it: recorded as seen, so that `write` may replace it
                // whole (nothing else could), though not once it changed since.
                Err(ToolFailure::BinaryFile(_)) => workspace.note_seen(&path, stamp),
                Err(_) => {}
            }
            text
        })
        .await
    }
}

/// Lines checked between two looks at the cancellation token.
const LINES_PER_CANCEL_CHECK: usize = 4096;

/// The numbered lines of the file `path`, or why they are not shown, with the file's stamp as
/// it was opened; the error is the file's that could not be opened or looked at.
fn read_lines(
    path: &Path,
    shown: &str,
    offset: usize,
    limit: usize,
    limits: &ReadLimits,
    cancel: &CancellationToken,
) -> Result<(Result<String, ToolFailure>, FileStamp), ToolFailure> {
    // Non-blocking, so that opening a named pipe returns at once instead of waiting forever
    // for a writer (the metadata check below then refuses it); regular files ignore the flag.
    let file = File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|error| ToolFailure::io("read", shown, error))?;
    let metadata = file
        .metadata()
        .map_err(|error| ToolFailure::io("read", shown, error))?;
    if metadata.is_dir() {
        return Err(ToolFailure::IsADirectory(shown.to_owned()));
    }
    if !metadata.is_file() {
        return Err(ToolFailure::NotAFile(shown.to_owned()));
    }
    // Taken before reading: a change during the read makes the stamp stale, never current.
    let stamp = FileStamp::of(&metadata);
    let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, file);
    let prefix = reader
        .fill_buf()
        .map_err(|error| ToolFailure::io("read", shown, error))?;
    // UTF-16 is full of NUL bytes: without this it would be refused as binary, although
    // `grep` (ripgrep's BOM sniffing) searches it as text.
    if let Some(encoding) = Utf16::sniff(prefix) {
        reader.consume(2);
        let mut decoded =
            BufReader::with_capacity(READ_BUFFER_BYTES, Utf16Reader::new(reader, encoding));
        let text = number_lines(&mut decoded, shown, offset, limit, limits, cancel);
        return Ok((text, stamp));
    }
    let text = number_lines(&mut reader, shown, offset, limit, limits, cancel);
    Ok((text, stamp))
}

/// Bytes read from the file at a time.
const READ_BUFFER_BYTES: usize = 64 * 1024;

/// The numbered window of lines of `reader` (UTF-8, or bytes shown as UTF-8 where they are not).
fn number_lines(
    reader: &mut impl BufRead,
    shown: &str,
    offset: usize,
    limit: usize,
    limits: &ReadLimits,
    cancel: &CancellationToken,
) -> Result<String, ToolFailure> {
    let prefix = reader
        .fill_buf()
        .map_err(|error| ToolFailure::io("read", shown, error))?;
    if prefix.is_empty() {
        return Ok(format!("'{shown}' is empty"));
    }
    if looks_binary(prefix) {
        return Err(ToolFailure::BinaryFile(shown.to_owned()));
    }

    let mut out = String::new();
    let mut line = Vec::new();
    // Enough bytes for `max_line_chars` characters of up to 4 bytes each: a line is never held
    // in memory beyond that, however long it is (minified files have multi-megabyte lines).
    let line_byte_cap = limits.max_line_chars.saturating_mul(4).max(4);
    let mut number = 0usize;
    let mut emitted = 0usize;
    loop {
        let cap = if number + 1 < offset {
            0
        } else {
            line_byte_cap
        };
        let Some(dropped) = read_line_capped(reader, &mut line, cap)
            .map_err(|error| ToolFailure::io("read", shown, error))?
        else {
            break;
        };
        number += 1;
        if number.is_multiple_of(LINES_PER_CANCEL_CHECK) && cancel.is_cancelled() {
            return Err(ToolFailure::Cancelled);
        }
        if number < offset {
            continue;
        }
        if emitted == limit {
            let _ = writeln!(out, "[more lines follow; continue with offset={number}]");
            return Ok(out);
        }
        let text = String::from_utf8_lossy(strip_line_end(&line));
        let numbered = format!(
            "{number:>6}\t{}\n",
            truncate_line(&text, limits.max_line_chars, dropped)
        );
        // The cap is a bound, not a threshold: the line that would cross it is left for the next
        // page (the first line of a page is always shown, however long).
        if emitted > 0 && out.len() + numbered.len() > limits.max_output_bytes {
            let _ = writeln!(
                out,
                "[output capped at {} bytes; continue with offset={number}]",
                limits.max_output_bytes
            );
            return Ok(out);
        }
        out.push_str(&numbered);
        emitted += 1;
    }
    if emitted == 0 {
        return Ok(format!(
            "'{shown}' has {number} lines; offset {offset} is past the end"
        ));
    }
    Ok(out)
}

/// Reads one line (through its `\n`) keeping at most `cap` bytes of it in `kept`. Returns the
/// number of characters (UTF-8 lead bytes, line end excluded) left out, or `None` at the end.
fn read_line_capped(
    reader: &mut impl BufRead,
    kept: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<Option<usize>> {
    kept.clear();
    let mut seen_any = false;
    let mut dropped_chars = 0usize;
    loop {
        let buffer = match reader.fill_buf() {
            Ok(buffer) => buffer,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        if buffer.is_empty() {
            return Ok(seen_any.then_some(dropped_chars));
        }
        seen_any = true;
        let (part, ends_line) = match memchr::memchr(b'\n', buffer) {
            Some(end) => (&buffer[..=end], true),
            None => (buffer, false),
        };
        let keep = cap.saturating_sub(kept.len()).min(part.len());
        kept.extend_from_slice(&part[..keep]);
        dropped_chars += part[keep..]
            .iter()
            .filter(|&&byte| byte & 0xC0 != 0x80 && byte != b'\n' && byte != b'\r')
            .count();
        let consumed = part.len();
        reader.consume(consumed);
        if ends_line {
            return Ok(Some(dropped_chars));
        }
    }
}

fn strip_line_end(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn tool(limits: ReadLimits) -> (tempfile::TempDir, ReadTool) {
        let dir = tempfile::tempdir().unwrap();
        let workspace = Workspace::new(dir.path()).unwrap();
        (dir, ReadTool::with_limits(workspace, limits))
    }

    async fn call(tool: &ReadTool, input: Value) -> Result<String, ToolFailure> {
        tool.call(input, CancellationToken::new()).await
    }

    #[tokio::test]
    async fn numbers_lines_like_cat_n() {
        let (dir, tool) = tool(ReadLimits::default());
        std::fs::write(dir.path().join("a.txt"), "first\r\nsecond\n\nfourth").unwrap();
        let out = call(&tool, json!({"file_path": "a.txt"})).await.unwrap();
        assert_eq!(
            out,
            "     1\tfirst\n     2\tsecond\n     3\t\n     4\tfourth\n"
        );
    }

    #[tokio::test]
    async fn offset_and_limit_select_a_window() {
        let (dir, tool) = tool(ReadLimits::default());
        let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
        std::fs::write(dir.path().join("a.txt"), text).unwrap();
        let out = call(
            &tool,
            json!({"file_path": "a.txt", "offset": 4, "limit": 2}),
        )
        .await
        .unwrap();
        assert_eq!(
            out,
            "     4\tline 4\n     5\tline 5\n[more lines follow; continue with offset=6]\n"
        );
        let tail = call(&tool, json!({"file_path": "a.txt", "offset": 9}))
            .await
            .unwrap();
        assert_eq!(tail, "     9\tline 9\n    10\tline 10\n");
        let past = call(&tool, json!({"file_path": "a.txt", "offset": 50}))
            .await
            .unwrap();
        assert_eq!(past, "'a.txt' has 10 lines; offset 50 is past the end");
    }

    #[tokio::test]
    async fn default_limit_applies() {
        let limits = ReadLimits {
            default_line_limit: 3,
            ..ReadLimits::default()
        };
        let (dir, tool) = tool(limits);
        std::fs::write(dir.path().join("a.txt"), "1\n2\n3\n4\n").unwrap();
        let out = call(&tool, json!({"file_path": "a.txt"})).await.unwrap();
        assert!(
            out.ends_with("     3\t3\n[more lines follow; continue with offset=4]\n"),
            "{out}"
        );
    }

    #[tokio::test]
    async fn long_lines_are_truncated_and_output_is_capped() {
        let limits = ReadLimits {
            max_line_chars: 5,
            max_output_bytes: 30,
            ..ReadLimits::default()
        };
        let (dir, tool) = tool(limits);
        std::fs::write(dir.path().join("a.txt"), "abcdefghij\nx\ny\nz\n").unwrap();
        let out = call(&tool, json!({"file_path": "a.txt"})).await.unwrap();
        let mut lines = out.lines();
        assert_eq!(
            lines.next(),
            Some("     1\tabcde… [line truncated: 5 more characters]")
        );
        assert_eq!(
            lines.next(),
            Some("[output capped at 30 bytes; continue with offset=2]")
        );
        assert_eq!(lines.next(), None);
    }

    #[tokio::test]
    async fn the_output_cap_is_never_crossed_after_the_first_line() {
        let limits = ReadLimits {
            max_output_bytes: 20,
            ..ReadLimits::default()
        };
        let (dir, tool) = tool(limits);
        std::fs::write(dir.path().join("a.txt"), "aaaa\nbbbb\ncccc\n").unwrap();
        let out = call(&tool, json!({"file_path": "a.txt"})).await.unwrap();
        // Two numbered lines would take 24 bytes: the second waits for the next page.
        assert_eq!(
            out,
            "     1\taaaa\n[output capped at 20 bytes; continue with offset=2]\n"
        );
        assert_eq!(ReadLimits::default().max_output_bytes, 48 * 1024);
    }

    #[tokio::test]
    async fn a_huge_line_is_read_with_bounded_memory_and_an_exact_marker() {
        let limits = ReadLimits {
            max_line_chars: 3,
            ..ReadLimits::default()
        };
        let (dir, tool) = tool(limits);
        // 1 MiB in one line, larger than the reader's buffer, then a short line.
        let mut text = "é".repeat(512 * 1024);
        text.push_str("\nend\n");
        std::fs::write(dir.path().join("min.js"), text).unwrap();
        let out = call(&tool, json!({"file_path": "min.js"})).await.unwrap();
        assert_eq!(
            out,
            format!(
                "     1\tééé… [line truncated: {} more characters]\n     2\tend\n",
                512 * 1024 - 3
            )
        );
    }

    #[tokio::test]
    async fn utf16_files_with_a_byte_order_mark_are_read_as_text() {
        // Windows tools (PowerShell's `Out-File`, resource compilers) write UTF-16; `grep`
        // searches such files, so `read` must show them instead of calling them binary.
        let limits = ReadLimits {
            max_line_chars: 4,
            ..ReadLimits::default()
        };
        let (dir, tool) = tool(limits);
        let text = "first\r\nsé ✓ 𝄞\r\nthird";
        std::fs::write(dir.path().join("le.txt"), Utf16::LittleEndian.encode(text)).unwrap();
        std::fs::write(dir.path().join("be.txt"), Utf16::BigEndian.encode(text)).unwrap();
        for file in ["le.txt", "be.txt"] {
            let out = call(&tool, json!({"file_path": file, "offset": 2}))
                .await
                .unwrap();
            assert_eq!(
                out,
                "     2\tsé ✓… [line truncated: 2 more characters]\n     3\tthir… [line truncated: 1 more characters]\n",
                "{file}"
            );
        }
        // A lone surrogate and an odd trailing byte become replacement characters.
        let mut broken = Utf16::LittleEndian.encode("a");
        broken.extend_from_slice(&[0x00, 0xD8, b'b', 0x00, b'c']);
        std::fs::write(dir.path().join("broken.txt"), broken).unwrap();
        let out = call(&tool, json!({"file_path": "broken.txt"}))
            .await
            .unwrap();
        assert_eq!(out, "     1\ta\u{FFFD}b\u{FFFD}\n");
    }

    #[tokio::test]
    async fn binary_files_are_refused() {
        let (dir, tool) = tool(ReadLimits::default());
        std::fs::write(dir.path().join("b.bin"), b"\x7fELF\x02\x01\x00\x00binary").unwrap();
        let failure = call(&tool, json!({"file_path": "b.bin"}))
            .await
            .unwrap_err();
        assert!(matches!(failure, ToolFailure::BinaryFile(ref p) if p == "b.bin"));
        assert!(failure.to_string().contains("binary"));
    }

    #[tokio::test]
    async fn missing_files_directories_and_empty_files_are_reported() {
        let (dir, tool) = tool(ReadLimits::default());
        std::fs::create_dir(dir.path().join("d")).unwrap();
        std::fs::write(dir.path().join("empty"), "").unwrap();
        let missing = call(&tool, json!({"file_path": "nope.txt"}))
            .await
            .unwrap_err();
        assert_eq!(missing.to_string(), "'nope.txt' does not exist");
        let directory = call(&tool, json!({"file_path": "d"})).await.unwrap_err();
        assert!(matches!(directory, ToolFailure::IsADirectory(_)));
        let empty = call(&tool, json!({"file_path": "empty"})).await.unwrap();
        assert_eq!(empty, "'empty' is empty");
    }

    #[tokio::test]
    async fn escapes_and_bad_input_are_refused() {
        let (dir, tool) = tool(ReadLimits::default());
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("passwd")).unwrap();
        for path in ["../x", "/etc/passwd", "passwd"] {
            let failure = call(&tool, json!({"file_path": path})).await.unwrap_err();
            assert!(
                matches!(failure, ToolFailure::OutsideWorkspace { .. }),
                "{path}: {failure:?}"
            );
        }
        let failure = call(&tool, json!({"path": "a"})).await.unwrap_err();
        assert!(failure.to_string().contains("file_path"), "{failure}");
        let failure = call(&tool, json!({"file_path": "a", "limit": 0}))
            .await
            .unwrap_err();
        assert!(matches!(failure, ToolFailure::InvalidInput(_)));
    }

    #[tokio::test]
    async fn a_cancelled_token_stops_the_call() {
        let (dir, tool) = tool(ReadLimits::default());
        std::fs::write(dir.path().join("a.txt"), "x\n").unwrap();
        let cancel = CancellationToken::new();
        cancel.cancel();
        let failure = tool
            .call(json!({"file_path": "a.txt"}), cancel)
            .await
            .unwrap_err();
        assert!(matches!(failure, ToolFailure::Cancelled));
    }
}
