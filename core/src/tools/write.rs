//! `write`: create or overwrite a file inside the workspace, creating parent directories.

use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{ToolFailure, Workspace, parse_input, run_to_completion};

/// Writes a whole file. Not concurrency-safe.
#[derive(Debug, Clone)]
pub struct WriteTool {
    workspace: Workspace,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteInput {
    file_path: String,
    content: String,
}

impl WriteTool {
    /// The tool's name.
    pub const NAME: &'static str = "write";

    /// A `write` tool confined to `workspace`.
    pub fn new(workspace: Workspace) -> Self {
        Self { workspace }
    }

    /// The description shown to the model.
    pub fn description(&self) -> &'static str {
        "Write a file in the workspace, replacing it if it exists. Missing parent directories \
         are created. An existing file must have been read with `read` first, and not changed \
         since. Prefer `edit` to change part of an existing file. Paths are relative to the \
         workspace root."
    }

    /// The JSON schema of the input.
    pub fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "description": "The file to write, relative to the workspace root (or absolute inside it)."},
                "content": {"type": "string", "description": "The complete new content of the file."}
            },
            "required": ["file_path", "content"],
            "additionalProperties": false
        })
    }

    /// Runs the tool. Once started, the write is not interrupted by cancellation (a file is
    /// never left half-written because of it); a token cancelled before the start is honoured.
    pub async fn call(
        &self,
        input: Value,
        cancel: CancellationToken,
    ) -> Result<String, ToolFailure> {
        let input: WriteInput = parse_input(input)?;
        let path = self.workspace.resolve(&input.file_path)?;
        let workspace = self.workspace.clone();
        run_to_completion(&cancel, move || {
            write_file(&workspace, &path, &input.file_path, &input.content)
        })
        .await
    }
}

fn write_file(
    workspace: &Workspace,
    path: &Path,
    shown: &str,
    content: &str,
) -> Result<String, ToolFailure> {
    // Resolution drops a trailing `/`, which would turn "create under this directory" into a
    // file with the directory's name.
    if shown.ends_with('/') {
        return Err(ToolFailure::InvalidInput(format!(
            "'{shown}' names a directory; give the path of the file to write"
        )));
    }
    let existed = match std::fs::metadata(path) {
        Ok(metadata) if metadata.is_dir() => return Err(ToolFailure::IsADirectory(shown.into())),
        Ok(metadata) if !metadata.is_file() => return Err(ToolFailure::NotAFile(shown.into())),
        Ok(metadata) => {
            workspace.check_seen(path, &metadata, shown)?;
            true
        }
        Err(_) => false,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|error| ToolFailure::io("create the parent directories of", shown, error))?;
    }
    std::fs::write(path, content).map_err(|error| ToolFailure::io("write", shown, error))?;
    workspace.note_written(path);
    let lines = content.lines().count();
    let verb = if existed { "Overwrote" } else { "Created" };
    Ok(format!(
        "{verb} '{shown}' ({} bytes, {lines} lines)",
        content.len()
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn tool() -> (tempfile::TempDir, tempfile::TempDir, WriteTool) {
        let outer = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir_in(outer.path()).unwrap();
        let workspace = Workspace::new(dir.path()).unwrap();
        (outer, dir, WriteTool::new(workspace))
    }

    async fn call(tool: &WriteTool, input: Value) -> Result<String, ToolFailure> {
        tool.call(input, CancellationToken::new()).await
    }

    #[tokio::test]
    async fn creates_files_and_parent_directories_then_overwrites() {
        let (_outer, dir, tool) = tool();
        let out = call(
            &tool,
            json!({"file_path": "a/b/c.txt", "content": "one\ntwo\n"}),
        )
        .await
        .unwrap();
        assert_eq!(out, "Created 'a/b/c.txt' (8 bytes, 2 lines)");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a/b/c.txt")).unwrap(),
            "one\ntwo\n"
        );
        let out = call(&tool, json!({"file_path": "a/b/c.txt", "content": "x"}))
            .await
            .unwrap();
        assert_eq!(out, "Overwrote 'a/b/c.txt' (1 bytes, 1 lines)");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a/b/c.txt")).unwrap(),
            "x"
        );
    }

    #[tokio::test]
    async fn escapes_are_refused_and_nothing_is_written_outside() {
        let (outer, dir, tool) = tool();
        std::os::unix::fs::symlink(outer.path(), dir.path().join("out_dir")).unwrap();
        std::os::unix::fs::symlink(
            outer.path().join("planted.txt"),
            dir.path().join("dangling"),
        )
        .unwrap();
        let absolute = outer.path().join("abs.txt");
        for path in [
            "../escape.txt",
            "new/../../escape.txt",
            absolute.to_str().unwrap(),
            "out_dir/escape.txt",
            "dangling",
            "/etc/ferroloop-should-not-exist",
        ] {
            let failure = call(&tool, json!({"file_path": path, "content": "x"}))
                .await
                .unwrap_err();
            assert!(
                matches!(failure, ToolFailure::OutsideWorkspace { .. }),
                "{path}: {failure:?}"
            );
        }
        let mut outside: Vec<_> = std::fs::read_dir(outer.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        outside.sort();
        assert_eq!(outside, vec![dir.path().file_name().unwrap().to_owned()]);
    }

    #[tokio::test]
    async fn writing_over_a_directory_fails() {
        let (_outer, dir, tool) = tool();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        let failure = call(&tool, json!({"file_path": "d", "content": "x"}))
            .await
            .unwrap_err();
        assert!(matches!(failure, ToolFailure::IsADirectory(_)));
        let failure = call(&tool, json!({"file_path": "f"})).await.unwrap_err();
        assert!(failure.to_string().contains("content"), "{failure}");
    }

    #[tokio::test]
    async fn an_existing_file_is_overwritten_only_as_last_read() {
        let (_outer, dir, tool) = tool();
        let read = crate::tools::ReadTool::new(tool.workspace.clone());
        std::fs::write(dir.path().join("notes.txt"), "the user's notes\n").unwrap();
        let failure = call(&tool, json!({"file_path": "notes.txt", "content": "mine"}))
            .await
            .unwrap_err();
        assert!(matches!(failure, ToolFailure::NotReadYet(_)), "{failure:?}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(),
            "the user's notes\n"
        );

        read.call(json!({"file_path": "notes.txt"}), CancellationToken::new())
            .await
            .unwrap();
        std::fs::write(dir.path().join("notes.txt"), "the user's notes, edited\n").unwrap();
        let failure = call(&tool, json!({"file_path": "notes.txt", "content": "mine"}))
            .await
            .unwrap_err();
        assert!(
            matches!(failure, ToolFailure::ChangedSinceRead(_)),
            "{failure:?}"
        );

        read.call(json!({"file_path": "notes.txt"}), CancellationToken::new())
            .await
            .unwrap();
        call(&tool, json!({"file_path": "notes.txt", "content": "mine"}))
            .await
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(),
            "mine"
        );
    }
}
