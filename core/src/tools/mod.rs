//! Native built-in tools, opt-in per agent (cargo feature `tools`): `read`, `write`, `edit`,
//! `glob`, `grep` and `bash`.
//!
//! Every tool is confined to a [`Workspace`]: path arguments are resolved against its root with
//! symbolic links followed, and anything that lands outside is refused with
//! [`ToolFailure::OutsideWorkspace`]. `bash` runs in the root but is not sandboxed.
//!
//! Each tool has a name, a description for the model, a JSON schema for its input, and an
//! async `call(input, cancel)` returning the result text or a [`ToolFailure`] whose message is
//! written for the model. [`BuiltinTool`] gathers them behind one type that implements the
//! executor's [`Tool`] trait; [`builtin`] and [`all`] construct them.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use ferroloop::exec::{ToolExecutor, ToolRegistry, ToolUse};
//! use ferroloop::tools::{self, Workspace};
//! use serde_json::json;
//!
//! let dir = std::env::temp_dir();
//! let workspace = Workspace::new(&dir).unwrap();
//! let mut registry = ToolRegistry::new();
//! for tool in tools::all(&workspace) {
//!     registry.register(tool).unwrap();
//! }
//! let results = ToolExecutor::new(registry)
//!     .run(vec![ToolUse::new("t1", "read", json!({"file_path": "../../etc/passwd"}))])
//!     .await
//!     .unwrap();
//! assert!(results[0].is_error);
//! # });
//! ```
//!
//! | tool    | concurrency-safe | what it does                                                  |
//! |---------|------------------|---------------------------------------------------------------|
//! | `read`  | yes              | a text file, `cat -n` numbered, `offset`/`limit` in lines     |
//! | `write` | no               | create or replace a file, parent directories included         |
//! | `edit`  | no               | exact-string replace; 0 or (without `replace_all`) 2+ matches fail |
//! | `glob`  | yes              | files by glob, newest first, `.gitignore` honoured            |
//! | `grep`  | yes              | ripgrep's regex search: content / files / count modes          |
//! | `bash`  | no               | `bash -c` (else `sh -c`), timeout; process group killed at end |

mod bash;
mod edit;
mod failure;
mod glob;
mod grep;
mod output;
mod read;
mod walk;
mod workspace;
mod write;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::exec::{CancellationToken, Tool, ToolContext, ToolError, ToolFuture, ToolOutput};

pub use bash::{BashLimits, BashTool};
pub use edit::EditTool;
pub use failure::ToolFailure;
pub use glob::GlobTool;
pub use grep::{GrepLimits, GrepTool};
pub use read::{ReadLimits, ReadTool};
pub use workspace::{Workspace, WorkspaceError};
pub use write::WriteTool;

/// The names of the built-in tools, in the order [`all`] returns them.
pub const BUILTIN_TOOL_NAMES: [&str; 6] = [
    ReadTool::NAME,
    WriteTool::NAME,
    EditTool::NAME,
    GlobTool::NAME,
    GrepTool::NAME,
    BashTool::NAME,
];

/// One of the built-in tools.
#[derive(Debug, Clone)]
pub enum BuiltinTool {
    /// `read`.
    Read(ReadTool),
    /// `write`.
    Write(WriteTool),
    /// `edit`.
    Edit(EditTool),
    /// `glob`.
    Glob(GlobTool),
    /// `grep`.
    Grep(GrepTool),
    /// `bash`.
    Bash(BashTool),
}

impl BuiltinTool {
    /// The tool's name, as the model calls it.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Read(_) => ReadTool::NAME,
            Self::Write(_) => WriteTool::NAME,
            Self::Edit(_) => EditTool::NAME,
            Self::Glob(_) => GlobTool::NAME,
            Self::Grep(_) => GrepTool::NAME,
            Self::Bash(_) => BashTool::NAME,
        }
    }

    /// The description shown to the model.
    pub fn description(&self) -> &str {
        match self {
            Self::Read(tool) => tool.description(),
            Self::Write(tool) => tool.description(),
            Self::Edit(tool) => tool.description(),
            Self::Glob(tool) => tool.description(),
            Self::Grep(tool) => tool.description(),
            Self::Bash(tool) => tool.description(),
        }
    }

    /// The JSON schema of the tool's input.
    pub fn input_schema(&self) -> Value {
        match self {
            Self::Read(tool) => tool.input_schema(),
            Self::Write(tool) => tool.input_schema(),
            Self::Edit(tool) => tool.input_schema(),
            Self::Glob(tool) => tool.input_schema(),
            Self::Grep(tool) => tool.input_schema(),
            Self::Bash(tool) => tool.input_schema(),
        }
    }

    /// Whether calls may run alongside other concurrency-safe calls: true for the read-only
    /// tools (`read`, `glob`, `grep`), false for `write`, `edit` and `bash`, whatever the input.
    pub fn is_concurrency_safe(&self) -> bool {
        matches!(self, Self::Read(_) | Self::Glob(_) | Self::Grep(_))
    }

    /// Runs the tool on `input`. Cancelling `cancel` ends the call promptly with
    /// [`ToolFailure::Cancelled`] (`write` and `edit` stop only up to the moment their new
    /// text takes the file's place, leaving the file as it was; past it they complete).
    pub async fn call(
        &self,
        input: Value,
        cancel: CancellationToken,
    ) -> Result<String, ToolFailure> {
        self.call_in(input, cancel, None).await
    }

    /// [`call`](Self::call), in the executor's call `ctx` when there is one: `write` and `edit`
    /// tell it when they commit their change (see [`CommitGate`]).
    async fn call_in(
        &self,
        input: Value,
        cancel: CancellationToken,
        ctx: Option<ToolContext>,
    ) -> Result<String, ToolFailure> {
        match self {
            Self::Read(tool) => tool.call(input, cancel).await,
            Self::Write(tool) => tool.run(input, CommitGate { cancel, ctx }).await,
            Self::Edit(tool) => tool.run(input, CommitGate { cancel, ctx }).await,
            Self::Glob(tool) => tool.call(input, cancel).await,
            Self::Grep(tool) => tool.call(input, cancel).await,
            Self::Bash(tool) => tool.call(input, cancel).await,
        }
    }
}

/// The executor's view of a built-in tool. Every [`ToolFailure`] becomes a recoverable
/// [`ToolError::Failed`] carrying the failure's message (an `is_error` result; the turn goes on).
/// A failing `bash` call cancels its running siblings and the calls queued after it, as a shell
/// tool should: later commands were planned assuming it succeeded. Timeouts are the tool's own
/// (`bash`) or the executor's; the call's cancellation token reaches the tool either way.
impl Tool for BuiltinTool {
    fn name(&self) -> &str {
        BuiltinTool::name(self)
    }

    // Without this the trait's empty default applies, and the agent sends the tool to the model
    // with no description at all.
    fn description(&self) -> &str {
        BuiltinTool::description(self)
    }

    fn input_schema(&self) -> Value {
        BuiltinTool::input_schema(self)
    }

    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        BuiltinTool::is_concurrency_safe(self)
    }

    fn cancels_siblings_on_error(&self) -> bool {
        matches!(self, Self::Bash(_))
    }

    fn call(&self, input: Value, ctx: ToolContext) -> ToolFuture {
        let tool = self.clone();
        let cancel = ctx.cancellation_token().clone();
        Box::pin(async move {
            tool.call_in(input, cancel, Some(ctx))
                .await
                .map(ToolOutput::text)
                .map_err(|failure| ToolError::Failed(failure.to_string()))
        })
    }
}

/// The built-in tool called `name`, confined to `workspace`, with default limits; `None` for
/// an unknown name.
pub fn builtin(name: &str, workspace: &Workspace) -> Option<BuiltinTool> {
    let workspace = workspace.clone();
    Some(match name {
        ReadTool::NAME => BuiltinTool::Read(ReadTool::new(workspace)),
        WriteTool::NAME => BuiltinTool::Write(WriteTool::new(workspace)),
        EditTool::NAME => BuiltinTool::Edit(EditTool::new(workspace)),
        GlobTool::NAME => BuiltinTool::Glob(GlobTool::new(workspace)),
        GrepTool::NAME => BuiltinTool::Grep(GrepTool::new(workspace)),
        BashTool::NAME => BuiltinTool::Bash(BashTool::new(workspace)),
        _ => return None,
    })
}

/// Every built-in tool, confined to `workspace`, in [`BUILTIN_TOOL_NAMES`] order.
pub fn all(workspace: &Workspace) -> Vec<BuiltinTool> {
    BUILTIN_TOOL_NAMES
        .iter()
        .filter_map(|name| builtin(name, workspace))
        .collect()
}

/// Why [`register_builtins`] refused the built-in tools a host asked for.
#[derive(Debug, thiserror::Error)]
pub enum BuiltinToolsError {
    /// No workspace was given and the current directory cannot be read.
    #[error("no workspace given and no current directory: {0}")]
    NoCurrentDirectory(#[source] std::io::Error),
    /// The workspace is not a usable directory.
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    /// No built-in tool has this name.
    #[error("unknown built-in tool {0:?}: expected one of {names}", names = BUILTIN_TOOL_NAMES.join(", "))]
    Unknown(String),
    /// The registry refused the tool (a tool of that name is already registered).
    #[error(transparent)]
    Registry(#[from] crate::exec::RegistryError),
}

/// Registers the built-in tools called `names` in `registry`, confined to the workspace `root`
/// (the current directory when `None`). The workspace may also read `spill_dir`, where the
/// executor writes oversized results: `read` then opens the files their previews point to.
/// Nothing is looked at (not even the current directory) when `names` is empty.
///
/// Every binding's agent offers the built-in tools through this one function, so that a name,
/// a workspace or a duplicate is judged, and said, the same way from Python, Node and C.
pub fn register_builtins(
    registry: &mut crate::exec::ToolRegistry,
    names: &[impl AsRef<str>],
    root: Option<&std::path::Path>,
    spill_dir: &std::path::Path,
) -> Result<(), BuiltinToolsError> {
    if names.is_empty() {
        return Ok(());
    }
    let root = match root {
        Some(root) => root.to_path_buf(),
        None => std::env::current_dir().map_err(BuiltinToolsError::NoCurrentDirectory)?,
    };
    let workspace = Workspace::new(&root)?.also_readable(spill_dir);
    for name in names {
        let name = name.as_ref();
        let tool =
            builtin(name, &workspace).ok_or_else(|| BuiltinToolsError::Unknown(name.to_owned()))?;
        registry.register(tool)?;
    }
    Ok(())
}

/// Parses the input of the tool called `tool`. A malformed input is described as the executor's
/// schema check describes it (the tool, where in the input, what was expected): the executor
/// runs that check before a call, but a host calling a tool directly does not, and serde's own
/// message names the Rust struct ("expected struct ReadInput") and not the field at fault. The
/// schema is built and checked only once parsing has failed, so a good input costs nothing more.
fn parse_input<T: DeserializeOwned>(
    tool: &str,
    schema: impl FnOnce() -> Value,
    mut input: Value,
) -> Result<T, ToolFailure> {
    let parsed = match &mut input {
        Value::Object(fields) => fields
            .iter_mut()
            .try_for_each(|(name, value)| whole_number_field(name, value)),
        _ => Ok(()),
    }
    // From a reference, so that the input is still there to be described if this fails.
    .and_then(|()| {
        T::deserialize(&input).map_err(|error| ToolFailure::InvalidInput(error.to_string()))
    });
    parsed.map_err(|failure| {
        let violations = crate::exec::InputSchema::compile(&schema())
            .ok()
            .and_then(|schema| schema.validate(&input).err());
        match (violations, failure) {
            (Some(violations), _) => {
                let details: Vec<String> = violations.iter().map(ToString::to_string).collect();
                ToolFailure::InvalidInput(format!("tool '{tool}': {}", details.join("; ")))
            }
            // The schema accepts what the parser refused (a count past `u64::MAX`, which JSON
            // Schema still calls an integer): the parser's own words, which name the field.
            (None, ToolFailure::InvalidInput(message)) => {
                ToolFailure::InvalidInput(format!("tool '{tool}': {message}"))
            }
            (None, other) => other,
        }
    })
}

/// Every number a built-in tool takes is a count (a line, a limit, milliseconds). The executor's
/// schema check accepts `2.0` for an integer, as JSON Schema does, but serde would refuse it as
/// a float: such a value is made an integer here. A number no count can be (a fraction, a
/// negative number, one past `u64::MAX`) is refused naming the field, which serde's message
/// would not; [`parse_input`] reports the schema's reason instead where the schema has one.
fn whole_number_field(name: &str, value: &mut Value) -> Result<(), ToolFailure> {
    let Value::Number(number) = &*value else {
        return Ok(());
    };
    if number.is_u64() {
        return Ok(());
    }
    match crate::json_number::whole_u64(value) {
        Some(whole) => {
            *value = Value::from(whole);
            Ok(())
        }
        None => Err(ToolFailure::InvalidInput(format!(
            "input.{name}: must be a whole number from 0 to {}, not {number}",
            u64::MAX
        ))),
    }
}

/// Runs blocking file-system work on the blocking pool; a cancellation returns at once (the
/// job itself polls the token and stops soon after).
async fn run_blocking<T, F>(cancel: &CancellationToken, job: F) -> Result<T, ToolFailure>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ToolFailure> + Send + 'static,
{
    if cancel.is_cancelled() {
        return Err(ToolFailure::Cancelled);
    }
    let handle = tokio::task::spawn_blocking(job);
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(ToolFailure::Cancelled),
        joined = handle => joined.map_err(worker_failed)?,
    }
}

/// Runs blocking work that must not be abandoned halfway (a file write): cancellation is
/// honoured before it starts, and then only where the job checks it (see [`CommitGate`]); the
/// call waits for the job, so that its answer says what the job did.
async fn run_to_completion<T, F>(cancel: &CancellationToken, job: F) -> Result<T, ToolFailure>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ToolFailure> + Send + 'static,
{
    if cancel.is_cancelled() {
        return Err(ToolFailure::Cancelled);
    }
    tokio::task::spawn_blocking(job)
        .await
        .map_err(worker_failed)?
}

/// The point of no return of a call that changes a file (`write`, `edit`), passed just before
/// the new text takes the file's place.
///
/// A call cancelled by then (or timed out: its timeout cancels its token) stops there and leaves
/// the file as it was: it is reported as cancelled (or timed out), which is then true. Past the
/// gate the change is made whatever comes, and the executor is told so (through the call's
/// context): the call's own answer is its outcome even when a cancellation is observed, or its
/// own timeout runs out, before the answer comes. Otherwise the executor's rule for an
/// answer that comes after a cancellation (it is the cancellation's) would report an applied
/// change as cancelled, and the model would redo an edit already made.
pub(crate) struct CommitGate {
    cancel: CancellationToken,
    /// The executor's context of the call; `None` for a direct call, where the caller reads
    /// the answer itself.
    ctx: Option<ToolContext>,
}

impl CommitGate {
    /// Whether the change may be committed: false once the call is cancelled. When true, the
    /// executor has been told that the change is being made.
    fn pass(&self) -> bool {
        if self.cancel.is_cancelled() {
            return false;
        }
        if let Some(ctx) = &self.ctx {
            ctx.committed();
        }
        true
    }

    /// The token the call was given.
    fn token(&self) -> &CancellationToken {
        &self.cancel
    }
}

fn worker_failed(error: tokio::task::JoinError) -> ToolFailure {
    ToolFailure::Internal(format!("the tool's worker thread failed: {error}"))
}

#[cfg(test)]
pub(crate) mod test_support {
    use std::time::{Duration, Instant};

    /// Whether process `pid` has exited (gone from /proc, or a zombie awaiting its reaper),
    /// allowing a few seconds for a SIGKILL to be delivered.
    pub(crate) fn process_is_gone(pid: &str) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
                Err(_) => return true,
                // The state follows the parenthesised command name.
                Ok(stat)
                    if stat
                        .rsplit_once(") ")
                        .is_some_and(|(_, rest)| rest.starts_with('Z')) =>
                {
                    return true;
                }
                Ok(_) if Instant::now() >= deadline => return false,
                Ok(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn all_builds_every_tool_with_its_safety_and_a_schema() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = Workspace::new(dir.path()).unwrap();
        let tools = all(&workspace);
        let names: Vec<_> = tools.iter().map(BuiltinTool::name).collect();
        assert_eq!(names, BUILTIN_TOOL_NAMES);
        let safe: Vec<_> = tools
            .iter()
            .filter(|tool| tool.is_concurrency_safe())
            .map(BuiltinTool::name)
            .collect();
        assert_eq!(safe, ["read", "glob", "grep"]);
        for tool in &tools {
            let schema = tool.input_schema();
            assert_eq!(schema["type"], "object", "{}", tool.name());
            let required = schema["required"].as_array().unwrap();
            for field in required {
                let field = field.as_str().unwrap();
                assert!(
                    schema["properties"].get(field).is_some(),
                    "{}: {field}",
                    tool.name()
                );
            }
            assert!(!tool.description().is_empty());
        }
        assert!(builtin("nope", &workspace).is_none());
    }

    #[test]
    fn register_builtins_registers_the_named_tools_or_says_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let spill = dir.path().join("spill");
        let mut registry = crate::exec::ToolRegistry::new();
        register_builtins(&mut registry, &["read", "grep"], Some(dir.path()), &spill).unwrap();
        assert_eq!(registry.names(), ["grep", "read"]);

        let unknown = register_builtins(&mut registry, &["nope"], Some(dir.path()), &spill);
        let message = unknown.unwrap_err().to_string();
        assert_eq!(
            message,
            "unknown built-in tool \"nope\": expected one of read, write, edit, glob, grep, bash"
        );
        let twice = register_builtins(&mut registry, &["read"], Some(dir.path()), &spill);
        assert!(matches!(twice, Err(BuiltinToolsError::Registry(_))));
        let file = dir.path().join("file");
        std::fs::write(&file, "x").unwrap();
        let not_a_dir = register_builtins(&mut registry, &["glob"], Some(&file), &spill);
        assert!(matches!(not_a_dir, Err(BuiltinToolsError::Workspace(_))));
        // No names: nothing is checked, not even the workspace.
        let none: [&str; 0] = [];
        register_builtins(&mut registry, &none, Some(&file), &spill).unwrap();
        assert_eq!(registry.names(), ["grep", "read"]);
    }

    #[tokio::test]
    async fn a_token_cancelled_before_the_call_stops_every_tool_before_it_acts() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "abc\n").unwrap();
        let workspace = Workspace::new(dir.path()).unwrap();
        let inputs = [
            ("read", serde_json::json!({"file_path": "a.txt"})),
            (
                "write",
                serde_json::json!({"file_path": "new.txt", "content": "x"}),
            ),
            (
                "edit",
                serde_json::json!({"file_path": "a.txt", "old_string": "abc", "new_string": "z"}),
            ),
            ("glob", serde_json::json!({"pattern": "*"})),
            ("grep", serde_json::json!({"pattern": "abc"})),
            ("bash", serde_json::json!({"command": "touch ran.txt"})),
        ];
        for (name, input) in inputs {
            let cancel = CancellationToken::new();
            cancel.cancel();
            let result = builtin(name, &workspace).unwrap().call(input, cancel).await;
            assert!(
                matches!(result, Err(ToolFailure::Cancelled)),
                "{name}: {result:?}"
            );
        }
        assert!(!dir.path().join("new.txt").exists());
        assert!(!dir.path().join("ran.txt").exists());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
            "abc\n"
        );
    }

    /// Called directly (the executor checks the schema first), a malformed input is described
    /// as the executor would describe it: the tool, where in its input, and what was expected,
    /// never serde's account of a Rust struct.
    #[tokio::test]
    async fn a_malformed_input_names_the_tool_and_the_field_not_rust_types() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = Workspace::new(dir.path()).unwrap();
        let cases = [
            (
                "read",
                serde_json::json!("a.txt"),
                "input: expected object, got string",
            ),
            (
                "read",
                serde_json::json!({"file_path": 3}),
                "input.file_path: expected string, got number",
            ),
            // A negative number where a string belongs is a type error, not a bad count.
            (
                "read",
                serde_json::json!({"file_path": -1}),
                "input.file_path: expected string, got number",
            ),
            // A count the schema allows but no counter holds.
            (
                "read",
                serde_json::json!({"file_path": "a.txt", "offset": 1e300}),
                "input.offset: must be a whole number from 0 to 18446744073709551615, not 1e+300",
            ),
            (
                "write",
                serde_json::json!({"file_path": "a.txt"}),
                "input: missing required property \"content\"",
            ),
            (
                "edit",
                serde_json::json!({"file_path": "a.txt", "old_string": "a", "new_string": "b", "all": true}),
                "input: unexpected property \"all\"",
            ),
            (
                "glob",
                serde_json::json!({"pattern": "*", "max_results": "5"}),
                "input.max_results: expected integer, got string",
            ),
            (
                "grep",
                serde_json::json!({"pattern": "x", "output_mode": "lines"}),
                "input.output_mode: must be one of [\"content\",\"files_with_matches\",\"count\"]",
            ),
            (
                "bash",
                serde_json::json!({"command": "ls", "timeout_ms": 1.5}),
                "input.timeout_ms: expected integer, got number",
            ),
        ];
        for (name, input, expected) in cases {
            let failure = builtin(name, &workspace)
                .unwrap()
                .call(input, CancellationToken::new())
                .await
                .unwrap_err();
            assert_eq!(
                failure.to_string(),
                format!("Invalid input: tool '{name}': {expected}")
            );
        }
    }

    #[tokio::test]
    async fn dispatch_reaches_the_tool() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = Workspace::new(dir.path()).unwrap();
        let write = builtin("write", &workspace).unwrap();
        write
            .call(
                serde_json::json!({"file_path": "x.txt", "content": "hello\n"}),
                CancellationToken::new(),
            )
            .await
            .unwrap();
        let read = builtin("read", &workspace).unwrap();
        let out = read
            .call(
                serde_json::json!({"file_path": "x.txt"}),
                CancellationToken::new(),
            )
            .await
            .unwrap();
        assert_eq!(out, "     1\thello\n");
    }
}
