//! The typed failure of a built-in tool call: its `Display` is the message the model reads.

use std::path::PathBuf;

/// Why a built-in tool call failed. The `Display` text is written for the model: it says what went
/// wrong and, where possible, what to do instead. A failure becomes an `is_error` tool result.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolFailure {
    /// The input did not match the tool's schema or violated one of its rules.
    #[error("Invalid input: {0}")]
    InvalidInput(String),
    /// A path argument resolves (after `..` and symbolic links) outside the workspace root.
    #[error("Path '{path}' is outside the workspace '{}'", root.display())]
    OutsideWorkspace {
        /// The path as the model gave it.
        path: String,
        /// The workspace root.
        root: PathBuf,
    },
    /// A file or directory that must exist does not.
    #[error("'{0}' does not exist")]
    NotFound(String),
    /// A file was expected but the path names a directory.
    #[error("'{0}' is a directory, not a file")]
    IsADirectory(String),
    /// The path ends in `/` (or `/.`), which names a directory, but what it leads to is a file
    /// (or another non-directory); the kernel refuses such a path too.
    #[error("'{path}' names a directory, but '{file}' is not one; use '{file}' to name the file")]
    NotADirectory {
        /// The path as the model gave it.
        path: String,
        /// The same path without its trailing `/` (or `/.`).
        file: String,
    },
    /// The path goes on past an existing file (or another non-directory) with `..`, as in
    /// `a.txt/../x`, as if the file were a directory. The kernel refuses such a path
    /// (ENOTDIR); resolved lexically it would name another file (`x`).
    #[error(
        "'{path}' goes on past '{file}' as if it were a directory, but it is not one; name the path without it"
    )]
    PastAFile {
        /// The path as the model gave it.
        path: String,
        /// The file it goes on past, relative to the workspace root.
        file: String,
    },
    /// A text file was expected but the path names something else.
    #[error("'{0}' is not a regular file")]
    NotAFile(String),
    /// `write`: a component of the path's directory is an existing file, so the directories
    /// the new file needs cannot be created.
    #[error(
        "Cannot create '{path}': '{file}' is a file, not a directory; choose another path or remove the file first"
    )]
    ParentIsAFile {
        /// The path as the model gave it.
        path: String,
        /// The file in the way, relative to the workspace root.
        file: String,
    },
    /// `write`: the workspace root is no longer a directory (moved or deleted); it is not
    /// created again.
    #[error("The workspace root '{}' no longer exists; nothing was written", .0.display())]
    WorkspaceRootGone(PathBuf),
    /// The file holds binary data (a NUL byte was found), which the text tools refuse. `read`
    /// records the file as seen all the same (and `edit` says this only of a file seen and not
    /// changed since), so `write` may replace it whole.
    #[error(
        "'{0}' appears to be a binary file (it contains NUL bytes); only text files can be read or edited; `write` may replace it whole"
    )]
    BinaryFile(String),
    /// The file is not valid UTF-8, so an exact-string edit cannot be applied safely.
    #[error("'{0}' is not valid UTF-8 text; it cannot be edited")]
    NotUtf8(String),
    /// The file is UTF-16 (it starts with a byte order mark) but holds unpaired surrogates, so
    /// an edit could not write it back unchanged around the replacement.
    #[error(
        "'{0}' is UTF-16 text with invalid code units (unpaired surrogates); it cannot be edited"
    )]
    InvalidUtf16(String),
    /// `write` over an existing file, or `edit`: the file was not read through this workspace
    /// first, so its current text is unknown to the model.
    #[error(
        "'{0}' has not been read yet; read it before changing it, so that nothing in it is lost"
    )]
    NotReadYet(String),
    /// `write` over an existing file, or `edit`: the file changed (size, modification time or
    /// inode) since it was last read, by a command, the user or another program.
    #[error(
        "'{0}' has changed since it was last read (by a command, the user or another program); read it again before changing it"
    )]
    ChangedSinceRead(String),
    /// `edit`: `old_string` does not occur in the file.
    #[error(
        "old_string was not found in '{0}'; read the file and copy the exact text, including whitespace"
    )]
    NoMatch(String),
    /// `edit`: `old_string` does not occur in the file, and every line of it starts like a line
    /// of `read` output (spaces, a line number, a tab): the model copied the numbering.
    #[error(
        "old_string was not found in '{0}'; it seems to include the line-number prefixes of `read` output (spaces, a number, a tab): copy only the text after the tab"
    )]
    NoMatchWithLineNumbers(String),
    /// `edit`: `old_string` occurs more than once and `replace_all` was not set.
    #[error(
        "old_string occurs {count} times in '{path}'; include more surrounding context to make it unique, or set replace_all to true"
    )]
    AmbiguousMatch {
        /// The file as the model named it.
        path: String,
        /// How many (non-overlapping) occurrences were found.
        count: usize,
    },
    /// An operating-system error on a file.
    #[error("Cannot {operation} '{path}': {source}")]
    Io {
        /// What was being done ("read", "write", "create directories for", ...).
        operation: &'static str,
        /// The path as the model named it.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// `bash`: the command exited with a non-zero status.
    #[error("Command failed with exit code {code}\n{output}")]
    CommandFailed {
        /// The exit status.
        code: i32,
        /// Combined stdout and stderr (capped).
        output: String,
    },
    /// `bash`: the shell was killed by a signal it did not send itself.
    #[error("Command was killed by signal {signal}\n{output}")]
    CommandKilled {
        /// The signal number.
        signal: i32,
        /// Combined stdout and stderr (capped).
        output: String,
    },
    /// `bash`: the command ran past its timeout; its whole process group was killed.
    #[error(
        "Command timed out after {timeout_ms} ms; it and every process it started were killed\n{output}"
    )]
    TimedOut {
        /// The timeout that expired.
        timeout_ms: u64,
        /// Combined stdout and stderr up to the timeout (capped).
        output: String,
    },
    /// The call was cancelled (by the host, the user or the executor) before it finished.
    #[error("The tool call was cancelled")]
    Cancelled,
    /// A bug or an unexpected environment failure (for example a worker thread that panicked).
    #[error("Internal error: {0}")]
    Internal(String),
}

impl ToolFailure {
    /// The [`ToolFailure::InvalidInput`] of a glob that does not parse: `glob`'s pattern and
    /// `grep`'s glob filter say it in the same words. `written` is the glob as the model wrote
    /// it (the parsers quote it as the tools rewrote it), `problem` what is wrong with it.
    pub(crate) fn invalid_glob(written: &str, problem: impl std::fmt::Display) -> Self {
        Self::InvalidInput(format!("invalid glob pattern '{written}': {problem}"))
    }

    /// An [`ToolFailure::Io`] for `path`, mapping "not found" to [`ToolFailure::NotFound`].
    pub(crate) fn io(operation: &'static str, path: &str, source: std::io::Error) -> Self {
        if source.kind() == std::io::ErrorKind::NotFound {
            Self::NotFound(path.to_owned())
        } else {
            Self::Io {
                operation,
                path: path.to_owned(),
                source,
            }
        }
    }
}
