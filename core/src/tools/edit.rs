//! `edit`: exact-string replacement in a text file.

use std::borrow::Cow;
use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::output::{Utf16, looks_binary};
use super::write::replace_file;
use super::{CommitGate, ToolFailure, Workspace, parse_input, run_to_completion};

/// Replaces an exact string in a file. Not concurrency-safe.
#[derive(Debug, Clone)]
pub struct EditTool {
    workspace: Workspace,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EditInput {
    file_path: String,
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: bool,
}

impl EditTool {
    /// The tool's name.
    pub const NAME: &'static str = "edit";

    /// An `edit` tool confined to `workspace`.
    pub fn new(workspace: Workspace) -> Self {
        Self { workspace }
    }

    /// The description shown to the model.
    pub fn description(&self) -> &'static str {
        "Replace an exact string in a text file, which must have been read with `read` first \
         (and not changed since). `old_string` must match the file's text \
         exactly, whitespace and indentation included (do not include the line-number prefix \
         of `read` output). The edit fails if `old_string` is not found, or if it occurs more \
         than once and `replace_all` is not true: then add surrounding context to make it \
         unique. Reports how many occurrences were replaced."
    }

    /// The JSON schema of the input.
    pub fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "description": "The file to edit, relative to the workspace root (or absolute inside it)."},
                "old_string": {"type": "string", "description": "The exact text to replace."},
                "new_string": {"type": "string", "description": "The replacement text (must differ from old_string)."},
                "replace_all": {"type": "boolean", "default": false, "description": "Replace every occurrence instead of requiring exactly one."}
            },
            "required": ["file_path", "old_string", "new_string"],
            "additionalProperties": false
        })
    }

    /// Runs the tool. Like `write`, a cancellation is honoured up to the moment the edited
    /// text takes the file's place (the file is then left as it was); past it the edit
    /// completes.
    pub async fn call(
        &self,
        input: Value,
        cancel: CancellationToken,
    ) -> Result<String, ToolFailure> {
        self.run(input, CommitGate { cancel, ctx: None }).await
    }

    /// [`call`](Self::call), committing through `gate`.
    pub(super) async fn run(&self, input: Value, gate: CommitGate) -> Result<String, ToolFailure> {
        let input: EditInput = parse_input(Self::NAME, || self.input_schema(), input)?;
        if input.old_string.is_empty() {
            return Err(ToolFailure::InvalidInput(
                "old_string is empty; use `write` to create a file".into(),
            ));
        }
        if input.old_string == input.new_string {
            return Err(ToolFailure::InvalidInput(
                "old_string and new_string are identical; nothing would change".into(),
            ));
        }
        let path = self.workspace.resolve(&input.file_path)?;
        let workspace = self.workspace.clone();
        let cancel = gate.token().clone();
        run_to_completion(&cancel, move || edit_file(&workspace, &path, &input, &gate)).await
    }
}

fn edit_file(
    workspace: &Workspace,
    path: &Path,
    input: &EditInput,
    gate: &CommitGate,
) -> Result<String, ToolFailure> {
    let shown = input.file_path.as_str();
    let metadata =
        std::fs::metadata(path).map_err(|error| ToolFailure::io("edit", shown, error))?;
    if metadata.is_dir() {
        return Err(ToolFailure::IsADirectory(shown.into()));
    }
    // Reading a named pipe would block until some writer appears, possibly forever.
    if !metadata.is_file() {
        return Err(ToolFailure::NotAFile(shown.into()));
    }
    workspace.check_seen(path, &metadata, shown)?;
    let bytes = std::fs::read(path).map_err(|error| ToolFailure::io("read", shown, error))?;
    // A UTF-16 file (which `read` shows as text) is edited as text and written back in its
    // own encoding, byte order mark included.
    let utf16 = Utf16::sniff(&bytes);
    let text = match utf16 {
        Some(encoding) => encoding
            .decode(&bytes[2..])
            .ok_or_else(|| ToolFailure::InvalidUtf16(shown.into()))?,
        None if looks_binary(&bytes) => return Err(ToolFailure::BinaryFile(shown.into())),
        None => String::from_utf8(bytes).map_err(|_| ToolFailure::NotUtf8(shown.into()))?,
    };
    if utf16.is_some() && looks_binary(text.as_bytes()) {
        return Err(ToolFailure::BinaryFile(shown.into()));
    }
    let mut old = Cow::Borrowed(input.old_string.as_str());
    let mut new = Cow::Borrowed(input.new_string.as_str());
    let mut count = text.matches(old.as_ref()).count();
    if count == 0 && text.contains("\r\n") && old.contains('\n') && !old.contains("\r\n") {
        // `read` shows CRLF lines without their `\r`, so a model copies LF text out of a CRLF
        // file; match it with CRLF line ends, and give the replacement the same ones.
        let crlf_old = to_crlf(&old);
        let crlf_count = text.matches(crlf_old.as_str()).count();
        if crlf_count > 0 {
            old = Cow::Owned(crlf_old);
            new = Cow::Owned(to_crlf(&new));
            count = crlf_count;
        }
    }
    if count > 0 && matches!(new, Cow::Borrowed(_)) && uses_crlf_only(&text) && new.contains('\n') {
        // The model writes LF line ends (that is what `read` shows); in a file whose every line
        // ends with CRLF, the lines it adds must too, or the file ends up with mixed ends.
        new = Cow::Owned(to_crlf(&new));
    }
    if count == 0 {
        if has_read_line_prefixes(&input.old_string) {
            return Err(ToolFailure::NoMatchWithLineNumbers(shown.into()));
        }
        return Err(ToolFailure::NoMatch(shown.into()));
    }
    if !input.replace_all {
        // `matches` counts non-overlapping occurrences; one that overlaps the first ("}\n}" in
        // "}\n}\n}") makes the edit just as ambiguous.
        let occurrences = if count == 1 {
            overlapping_occurrences(&text, &old)
        } else {
            count
        };
        if occurrences > 1 {
            return Err(ToolFailure::AmbiguousMatch {
                path: shown.into(),
                count: occurrences,
            });
        }
    }
    let edited = text.replace(old.as_ref(), &new);
    let edited = match utf16 {
        Some(encoding) => encoding.encode(&edited),
        None => edited.into_bytes(),
    };
    replace_file(path, &edited, gate).map_err(|error| error.failure(shown))?;
    workspace.note_written(path);
    let noun = if count == 1 {
        "occurrence"
    } else {
        "occurrences"
    };
    Ok(format!("Replaced {count} {noun} in '{shown}'"))
}

/// Whether every line of `text` starts with `read`'s numbering: optional spaces, digits, a tab.
fn has_read_line_prefixes(text: &str) -> bool {
    let text = text.strip_suffix('\n').unwrap_or(text);
    text.split('\n').all(|line| {
        let digits = line.trim_start_matches(' ');
        let rest = digits.trim_start_matches(|c: char| c.is_ascii_digit());
        rest.len() < digits.len() && rest.starts_with('\t')
    })
}

/// How many times `needle` (non-empty, with exactly one non-overlapping occurrence) occurs in
/// `text` counting overlaps. Every other occurrence then starts inside the first one, so only
/// a window of twice the needle's length is searched.
fn overlapping_occurrences(text: &str, needle: &str) -> usize {
    let Some(first) = text.find(needle) else {
        return 0;
    };
    let mut end = (first + 2 * needle.len()).min(text.len());
    while !text.is_char_boundary(end) {
        end += 1;
    }
    let window = &text[..end];
    let mut count = 0;
    let mut from = first;
    while let Some(found) = window[from..].find(needle) {
        count += 1;
        let at = from + found;
        // Resume one character later: occurrences may overlap.
        from = at + window[at..].chars().next().map_or(1, char::len_utf8);
        if from >= window.len() {
            break;
        }
    }
    count
}

/// Whether `text` has line ends and every one of them is CRLF.
fn uses_crlf_only(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut any = false;
    for end in memchr::memchr_iter(b'\n', bytes) {
        if end == 0 || bytes[end - 1] != b'\r' {
            return false;
        }
        any = true;
    }
    any
}

/// `text` with every line end (LF or CRLF) made CRLF.
fn to_crlf(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\n', "\r\n")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::tools::ReadTool;
    use crate::tools::workspace::FileStamp;

    fn tool(content: &str) -> (tempfile::TempDir, EditTool) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f.txt"), content).unwrap();
        let workspace = Workspace::new(dir.path()).unwrap();
        (dir, EditTool::new(workspace))
    }

    /// Marks `name` as read through the tool's workspace, as a `read` call would.
    fn mark_read(tool: &EditTool, name: &str) {
        let path = tool.workspace.root().join(name);
        let metadata = std::fs::metadata(&path).unwrap();
        tool.workspace.note_seen(&path, FileStamp::of(&metadata));
    }

    /// Edits `f.txt`, read (as it is now) just before.
    async fn edit(tool: &EditTool, old: &str, new: &str, all: bool) -> Result<String, ToolFailure> {
        mark_read(tool, "f.txt");
        tool.call(
            json!({"file_path": "f.txt", "old_string": old, "new_string": new, "replace_all": all}),
            CancellationToken::new(),
        )
        .await
    }

    fn content(dir: &tempfile::TempDir) -> String {
        std::fs::read_to_string(dir.path().join("f.txt")).unwrap()
    }

    #[tokio::test]
    async fn zero_matches_fail_and_leave_the_file_alone() {
        let (dir, tool) = tool("alpha beta\n");
        let failure = edit(&tool, "gamma", "delta", false).await.unwrap_err();
        assert!(matches!(failure, ToolFailure::NoMatch(ref p) if p == "f.txt"));
        assert!(failure.to_string().contains("not found"));
        assert_eq!(content(&dir), "alpha beta\n");
    }

    #[tokio::test]
    async fn old_string_with_read_line_numbers_gets_a_specific_hint() {
        let (dir, tool) = tool("fn a() {\n    1\n}\n");
        let failure = edit(&tool, "     1\tfn a() {\n     2\t    1\n", "x", false)
            .await
            .unwrap_err();
        assert!(
            matches!(failure, ToolFailure::NoMatchWithLineNumbers(ref p) if p == "f.txt"),
            "{failure:?}"
        );
        assert!(
            failure.to_string().contains("line-number prefixes"),
            "{failure}"
        );
        assert_eq!(content(&dir), "fn a() {\n    1\n}\n");
        // Text that merely contains digits and tabs gets the ordinary message.
        for old in ["12 apples\t", "\tindented", "2\tx\nplain"] {
            let failure = edit(&tool, old, "x", false).await.unwrap_err();
            assert!(
                matches!(failure, ToolFailure::NoMatch(_)),
                "{old:?}: {failure:?}"
            );
        }
    }

    #[tokio::test]
    async fn one_match_is_replaced() {
        let (dir, tool) = tool("alpha beta\n");
        let out = edit(&tool, "beta", "gamma", false).await.unwrap();
        assert_eq!(out, "Replaced 1 occurrence in 'f.txt'");
        assert_eq!(content(&dir), "alpha gamma\n");
    }

    #[tokio::test]
    async fn two_matches_fail_without_replace_all_and_succeed_with_it() {
        let (dir, tool) = tool("x = 1;\nx = 1;\n");
        let failure = edit(&tool, "x = 1", "x = 2", false).await.unwrap_err();
        assert!(matches!(
            failure,
            ToolFailure::AmbiguousMatch { count: 2, .. }
        ));
        assert!(failure.to_string().contains("occurs 2 times"), "{failure}");
        assert_eq!(content(&dir), "x = 1;\nx = 1;\n");
        let out = edit(&tool, "x = 1", "x = 2", true).await.unwrap();
        assert_eq!(out, "Replaced 2 occurrences in 'f.txt'");
        assert_eq!(content(&dir), "x = 2;\nx = 2;\n");
    }

    #[tokio::test]
    async fn utf16_files_are_edited_in_their_own_encoding() {
        for encoding in [Utf16::LittleEndian, Utf16::BigEndian] {
            let encode = |text: &str| encoding.encode(text);
            let (dir, tool) = tool("");
            std::fs::write(dir.path().join("f.txt"), encode("key = old 𝄞\r\nnext\r\n")).unwrap();
            let out = edit(&tool, "old 𝄞\nnext", "new ✓\nlast", false)
                .await
                .unwrap();
            assert_eq!(out, "Replaced 1 occurrence in 'f.txt'");
            assert_eq!(
                std::fs::read(dir.path().join("f.txt")).unwrap(),
                encode("key = new ✓\r\nlast\r\n"),
                "{encoding:?}"
            );
        }
        // Unpaired surrogates cannot round-trip: the file is refused, untouched.
        let (dir, tool) = tool("");
        let broken = [0xFF, 0xFE, b'a', 0x00, 0x00, 0xD8, b'b', 0x00];
        std::fs::write(dir.path().join("f.txt"), broken).unwrap();
        let failure = edit(&tool, "a", "c", false).await.unwrap_err();
        assert!(
            matches!(failure, ToolFailure::InvalidUtf16(_)),
            "{failure:?}"
        );
        assert_eq!(std::fs::read(dir.path().join("f.txt")).unwrap(), broken);
    }

    #[tokio::test]
    async fn overlapping_occurrences_are_ambiguous_too() {
        // "}\n}" occurs at two places in three closing braces; which one the model meant is
        // unknown, so the edit must not silently pick the first.
        let (dir, tool) = tool("    }\n}\n}\n");
        let failure = edit(&tool, "}\n}", "}", false).await.unwrap_err();
        assert!(
            matches!(failure, ToolFailure::AmbiguousMatch { count: 2, .. }),
            "{failure:?}"
        );
        assert_eq!(content(&dir), "    }\n}\n}\n");
        // With replace_all, the non-overlapping occurrences are replaced, as reported.
        let out = edit(&tool, "}\n}", "}", true).await.unwrap();
        assert_eq!(out, "Replaced 1 occurrence in 'f.txt'");
        assert_eq!(content(&dir), "    }\n}\n");
        // Enough context makes it unique again.
        let out = edit(&tool, "    }\n}", "  }\n}", false).await.unwrap();
        assert_eq!(out, "Replaced 1 occurrence in 'f.txt'");
        assert_eq!(content(&dir), "  }\n}\n");
    }

    #[tokio::test]
    async fn degenerate_inputs_binary_files_and_escapes_are_refused() {
        let (dir, tool) = tool("abc");
        assert!(matches!(
            edit(&tool, "", "x", false).await,
            Err(ToolFailure::InvalidInput(_))
        ));
        assert!(matches!(
            edit(&tool, "a", "a", false).await,
            Err(ToolFailure::InvalidInput(_))
        ));
        std::fs::write(dir.path().join("b.bin"), b"a\0b").unwrap();
        mark_read(&tool, "b.bin");
        let failure = tool
            .call(
                json!({"file_path": "b.bin", "old_string": "a", "new_string": "c"}),
                CancellationToken::new(),
            )
            .await
            .unwrap_err();
        assert!(matches!(failure, ToolFailure::BinaryFile(_)));
        std::os::unix::fs::symlink("/etc/hostname", dir.path().join("host")).unwrap();
        for path in ["host", "../f.txt", "/etc/hostname"] {
            let failure = tool
                .call(
                    json!({"file_path": path, "old_string": "a", "new_string": "c"}),
                    CancellationToken::new(),
                )
                .await
                .unwrap_err();
            assert!(
                matches!(failure, ToolFailure::OutsideWorkspace { .. }),
                "{path}"
            );
        }
    }

    #[tokio::test]
    async fn a_file_not_read_or_changed_since_it_was_read_is_not_edited() {
        let (dir, tool) = tool("a = 1\n");
        let read = ReadTool::new(tool.workspace.clone());
        let call = |old: &str, new: &str| {
            tool.call(
                json!({"file_path": "f.txt", "old_string": old, "new_string": new}),
                CancellationToken::new(),
            )
        };
        let failure = call("a = 1", "a = 2").await.unwrap_err();
        assert!(matches!(failure, ToolFailure::NotReadYet(_)), "{failure:?}");
        assert!(failure.to_string().contains("read it before"), "{failure}");
        assert_eq!(content(&dir), "a = 1\n");

        // Read (a page is enough): edits go through, one after the other without re-reading.
        read.call(
            json!({"file_path": "f.txt", "limit": 1}),
            CancellationToken::new(),
        )
        .await
        .unwrap();
        call("a = 1", "a = 2").await.unwrap();
        call("a = 2", "a = 3").await.unwrap();
        assert_eq!(content(&dir), "a = 3\n");

        // Something else writes the file: the next edit asks for a fresh read.
        std::fs::write(dir.path().join("f.txt"), "a = 3\nb = 1\n").unwrap();
        let failure = call("a = 3", "a = 4").await.unwrap_err();
        assert!(
            matches!(failure, ToolFailure::ChangedSinceRead(_)),
            "{failure:?}"
        );
        assert_eq!(content(&dir), "a = 3\nb = 1\n");
        read.call(json!({"file_path": "f.txt"}), CancellationToken::new())
            .await
            .unwrap();
        call("a = 3", "a = 4").await.unwrap();
        assert_eq!(content(&dir), "a = 4\nb = 1\n");

        // Another workspace over the same root has seen nothing.
        let other = EditTool::new(Workspace::new(dir.path()).unwrap());
        let failure = other
            .call(
                json!({"file_path": "f.txt", "old_string": "a = 4", "new_string": "a = 5"}),
                CancellationToken::new(),
            )
            .await
            .unwrap_err();
        assert!(matches!(failure, ToolFailure::NotReadYet(_)), "{failure:?}");
    }
}
