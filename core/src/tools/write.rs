//! `write`: create or overwrite a file inside the workspace, creating parent directories.

use std::ffi::{OsStr, OsString};
use std::fs::{File, Metadata};
use std::io::{self, Write as _};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{CommitGate, ToolFailure, Workspace, parse_input, run_to_completion};

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

    /// Runs the tool. A cancellation is honoured up to the moment the new text takes the
    /// file's place (the file is then left as it was, and no temporary file remains); past it
    /// the write completes, so a file is never left half-written because of it.
    pub async fn call(
        &self,
        input: Value,
        cancel: CancellationToken,
    ) -> Result<String, ToolFailure> {
        self.run(input, CommitGate { cancel, ctx: None }).await
    }

    /// [`call`](Self::call), committing through `gate`.
    pub(super) async fn run(&self, input: Value, gate: CommitGate) -> Result<String, ToolFailure> {
        let input: WriteInput = parse_input(Self::NAME, || self.input_schema(), input)?;
        let path = self.workspace.resolve(&input.file_path)?;
        let workspace = self.workspace.clone();
        let cancel = gate.token().clone();
        run_to_completion(&cancel, move || {
            write_file(&workspace, &path, &input.file_path, &input.content, &gate)
        })
        .await
    }
}

fn write_file(
    workspace: &Workspace,
    path: &Path,
    shown: &str,
    content: &str,
    gate: &CommitGate,
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
    // `create_dir_all` would make the root again, and its parents: a moved or deleted project
    // would silently become a new, nearly empty one where nobody looks for the model's files.
    if !workspace.root().is_dir() {
        return Err(ToolFailure::WorkspaceRootGone(
            workspace.root().to_path_buf(),
        ));
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|error| {
            // The OS says "File exists" or "Not a directory" without naming the file in the
            // way; the model needs its name to choose another path.
            match parent
                .ancestors()
                .find(|dir| std::fs::metadata(dir).is_ok_and(|metadata| !metadata.is_dir()))
            {
                Some(file) => ToolFailure::ParentIsAFile {
                    path: shown.to_owned(),
                    file: workspace.display_relative(file),
                },
                None => ToolFailure::io("create the parent directories of", shown, error),
            }
        })?;
    }
    replace_file(path, content.as_bytes(), gate).map_err(|error| error.failure(shown))?;
    workspace.note_written(path);
    let lines = content.lines().count();
    let verb = if existed { "Overwrote" } else { "Created" };
    Ok(format!(
        "{verb} '{shown}' ({} bytes, {lines} lines)",
        content.len()
    ))
}

/// Why [`replace_file`] left the file as it was.
#[derive(Debug)]
pub(super) enum ReplaceError {
    /// The call was cancelled before the new text took the file's place.
    Cancelled,
    /// The file could not be written (it may be truncated only where it is written in place).
    Io(io::Error),
}

impl ReplaceError {
    /// The tool's failure, for the file `shown` as the model named it.
    pub(super) fn failure(self, shown: &str) -> ToolFailure {
        match self {
            Self::Cancelled => ToolFailure::Cancelled,
            Self::Io(error) => ToolFailure::io("write", shown, error),
        }
    }
}

impl From<io::Error> for ReplaceError {
    fn from(error: io::Error) -> Self {
        Self::Io(error)
    }
}

/// Writes `bytes` over `path` in place, once `gate` lets the change be made.
fn write_in_place(path: &Path, bytes: &[u8], gate: &CommitGate) -> Result<(), ReplaceError> {
    if !gate.pass() {
        return Err(ReplaceError::Cancelled);
    }
    Ok(std::fs::write(path, bytes)?)
}

/// Makes `bytes` the content of `path` (a resolved path whose parent directory exists) as one
/// step: they are written to a temporary file beside it, which then takes its place by
/// `rename`. A write cut short (a full disk, a crash, a killed process) thus leaves the old file
/// whole rather than truncated, and no reader ever sees half of the new text. The file keeps
/// its permissions (and its owner, where the process may set it).
///
/// A file the process may not write is refused as an in-place write would refuse it. The file
/// is written in place instead, as `std::fs::write` would, where a new file cannot
/// take its place unnoticed: a file with other hard links (they would keep the old text), one
/// whose owner cannot be given to the new file, or one in a directory this process may not
/// create files in.
///
/// `gate` is passed just before the new text takes the file's place (the rename, or the write
/// in place): a call cancelled by then leaves the file as it was, its temporary file removed.
pub(super) fn replace_file(
    path: &Path,
    bytes: &[u8],
    gate: &CommitGate,
) -> Result<(), ReplaceError> {
    let existing = match std::fs::metadata(path) {
        Ok(metadata) => Some(metadata),
        Err(error) if error.kind() == io::ErrorKind::NotFound => None,
        Err(error) => return Err(error.into()),
    };
    if existing.is_some() {
        // A rename needs only the directory's permission: without this, a file made read-only
        // (or immutable) to protect it would be replaced all the same. Opening it for writing,
        // as an in-place write would, asks the file's own permission.
        File::options().write(true).open(path)?;
    }
    if existing
        .as_ref()
        .is_some_and(|metadata| metadata.nlink() > 1)
    {
        return write_in_place(path, bytes, gate);
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return write_in_place(path, bytes, gate);
    };
    let (temporary, mut file) = match create_temporary(dir, name) {
        Ok(created) => created,
        Err(error) if error.kind() == io::ErrorKind::PermissionDenied => {
            return write_in_place(path, bytes, gate);
        }
        Err(error) => return Err(error.into()),
    };
    let written = (|| {
        if let Some(metadata) = &existing {
            if !keep_owner(&file, metadata) {
                return Ok(false);
            }
            file.set_permissions(metadata.permissions())?;
        }
        file.write_all(bytes)?;
        // Without it a power loss soon after the rename may leave an empty file on some file
        // systems: the rename can reach the disk before the data.
        file.sync_all()?;
        // The last moment the call may stop with the file untouched: the rename is the change.
        if !gate.pass() {
            return Err(ReplaceError::Cancelled);
        }
        std::fs::rename(&temporary, path)?;
        Ok(true)
    })();
    match written {
        Ok(true) => Ok(()),
        Ok(false) => {
            drop(file);
            let _ = std::fs::remove_file(&temporary);
            write_in_place(path, bytes, gate)
        }
        Err(error) => {
            drop(file);
            let _ = std::fs::remove_file(&temporary);
            Err(error)
        }
    }
}

/// Bytes of the file's name that the name of its temporary file repeats.
const TEMPORARY_NAME_PREFIX_BYTES: usize = 64;

/// A new file beside `name` in `dir`, named so that no other writer (another tool call,
/// another process) picks the same name, and hidden so that a stray one left by a crash is
/// not taken for part of the project.
fn create_temporary(dir: &Path, name: &OsStr) -> io::Result<(PathBuf, File)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut last_error = None;
    for _ in 0..16 {
        let mut temporary_name = OsString::from(".");
        // Only the start of the name: the file's own name may already be as long as the file
        // system allows, and the temporary one must fit too.
        temporary_name.push(OsStr::from_bytes(
            &name.as_bytes()[..name.len().min(TEMPORARY_NAME_PREFIX_BYTES)],
        ));
        temporary_name.push(format!(
            ".ferroloop-{}-{}.tmp",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let temporary = dir.join(temporary_name);
        match File::options()
            .write(true)
            .create_new(true)
            .open(&temporary)
        {
            Ok(file) => return Ok((temporary, file)),
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => last_error = Some(error),
            Err(error) => return Err(error),
        }
    }
    Err(last_error.unwrap_or_else(|| io::Error::other("no free temporary file name")))
}

/// Gives `file` the owner and group of the file it replaces; false when that is not allowed
/// (a file of another user, unless the process is privileged).
fn keep_owner(file: &File, metadata: &Metadata) -> bool {
    let Ok(current) = file.metadata() else {
        return false;
    };
    if current.uid() == metadata.uid() && current.gid() == metadata.gid() {
        return true;
    }
    std::os::unix::fs::fchown(file, Some(metadata.uid()), Some(metadata.gid())).is_ok()
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
    async fn a_file_with_the_longest_name_allowed_can_be_overwritten() {
        // The temporary file beside it must fit the file system's name limit too.
        let (_outer, dir, tool) = tool();
        let name = "n".repeat(255);
        std::fs::write(dir.path().join(&name), "old").unwrap();
        let metadata = std::fs::metadata(dir.path().join(&name)).unwrap();
        tool.workspace.note_seen(
            &dir.path().join(&name),
            crate::tools::workspace::FileStamp::of(&metadata),
        );
        call(&tool, json!({"file_path": name, "content": "new"}))
            .await
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join(&name)).unwrap(),
            "new"
        );
    }

    #[tokio::test]
    async fn a_file_the_process_may_not_write_is_not_replaced() {
        use std::os::unix::fs::PermissionsExt as _;

        // A privileged process may write any file: there is nothing to see.
        // SAFETY: `geteuid` has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            return;
        }
        // A file made read-only stays as it is, although the directory would let a new file
        // be renamed over it.
        let (_outer, dir, tool) = tool();
        let path = dir.path().join("locked.txt");
        std::fs::write(&path, "keep me").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
        let metadata = std::fs::metadata(&path).unwrap();
        tool.workspace
            .note_seen(&path, crate::tools::workspace::FileStamp::of(&metadata));
        let failure = call(&tool, json!({"file_path": "locked.txt", "content": "x"}))
            .await
            .unwrap_err();
        assert!(
            failure
                .to_string()
                .starts_with("Cannot write 'locked.txt': Permission denied"),
            "{failure}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "keep me");
    }

    #[tokio::test]
    async fn a_file_where_a_parent_directory_should_be_is_named() {
        let (_outer, dir, tool) = tool();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/lib.rs"), "x").unwrap();
        for path in ["src/lib.rs/mod.rs", "src/lib.rs/deeper/mod.rs"] {
            let failure = call(&tool, json!({"file_path": path, "content": "x"}))
                .await
                .unwrap_err();
            assert_eq!(
                failure.to_string(),
                format!(
                    "Cannot create '{path}': 'src/lib.rs' is a file, not a directory; choose another path or remove the file first"
                )
            );
        }
    }

    #[tokio::test]
    async fn a_workspace_root_that_is_gone_is_not_created_again() {
        // The project was moved or deleted: recreating an empty root there would scatter the
        // model's files where nobody looks for them.
        let (_outer, dir, tool) = tool();
        let root = dir.path().to_path_buf();
        dir.close().unwrap();
        let failure = call(&tool, json!({"file_path": "src/a.rs", "content": "x"}))
            .await
            .unwrap_err();
        assert_eq!(
            failure.to_string(),
            format!(
                "The workspace root '{}' no longer exists; nothing was written",
                root.display()
            )
        );
        assert!(!root.exists());
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

    /// The commit gate decides, not the timing of a cancellation: a call cancelled by the time
    /// its new text is ready leaves the file as it was, by rename or in place (a file with a
    /// second hard link), and no temporary file behind.
    #[test]
    fn a_cancelled_gate_leaves_the_file_and_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.txt");
        let linked = dir.path().join("linked.txt");
        for hard_link in [false, true] {
            std::fs::write(&path, "old\n").unwrap();
            if hard_link {
                std::fs::hard_link(&path, &linked).unwrap();
            }
            let cancel = CancellationToken::new();
            cancel.cancel();
            let gate = CommitGate { cancel, ctx: None };
            let replaced = replace_file(&path, b"new\n", &gate);
            assert!(
                matches!(replaced, Err(ReplaceError::Cancelled)),
                "hard link {hard_link}: {replaced:?}"
            );
            assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\n");
            let mut names: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|entry| entry.unwrap().file_name().into_string().unwrap())
                .collect();
            names.sort();
            let expected: &[&str] = if hard_link {
                &["f.txt", "linked.txt"]
            } else {
                &["f.txt"]
            };
            assert_eq!(names, expected, "hard link {hard_link}");

            let gate = CommitGate {
                cancel: CancellationToken::new(),
                ctx: None,
            };
            replace_file(&path, b"new\n", &gate).unwrap();
            assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
            if hard_link {
                // Written in place: the other name sees the new text too.
                assert_eq!(std::fs::read_to_string(&linked).unwrap(), "new\n");
                std::fs::remove_file(&linked).unwrap();
            }
        }
    }
}
