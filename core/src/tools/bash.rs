//! `bash`: a shell command in the workspace root, with a timeout, capped combined output, and
//! the whole process tree killed on timeout or cancellation.
//!
//! The command runs as `bash -c COMMAND` (`sh -c` where no `bash` is on `PATH`: models write
//! bash — brace expansion, `[[`, `set -o pipefail` — and a tool named `bash` that runs dash
//! fails them in confusing ways) with stderr joined to stdout (one pipe, so the output
//! interleaves as written), in a new session (`setsid()` in the child), which is also a new
//! process group, so everything it starts — pipelines, background jobs, subshells — shares one
//! group id, the shell's pid. The new session has no controlling terminal: a program that
//! would prompt on `/dev/tty` (`git` asking for a password, `ssh`, `sudo`) fails at once instead
//! of stopping on the host's terminal until the timeout. On timeout or cancellation that group
//! is sent `SIGKILL`. When the shell exits on its own, the group is killed too: background jobs
//! it left behind do not outlive the call
//! (and cannot keep the output pipe open). A process that leaves the group on purpose
//! (`setsid`) escapes; reading its output after a kill is bounded so such a process cannot hang
//! the call. If the future is dropped mid-run (an executor timeout), a guard kills the group.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use super::output::HeadTailBuffer;
use super::{ToolFailure, Workspace, parse_input};

/// Limits of the `bash` tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BashLimits {
    /// Timeout when the call gives none (default 2 minutes).
    pub default_timeout: Duration,
    /// The largest timeout a call may ask for (default 10 minutes).
    pub max_timeout: Duration,
    /// Bytes of combined output kept: the first and last halves, with a marker between
    /// (default 30,000).
    pub max_output_bytes: usize,
}

impl Default for BashLimits {
    fn default() -> Self {
        Self {
            default_timeout: Duration::from_secs(120),
            max_timeout: Duration::from_secs(600),
            max_output_bytes: 30_000,
        }
    }
}

/// How long the output pipes are still drained after the process group was killed. Only a
/// process that left the group can keep them open that long.
const DRAIN_AFTER_KILL: Duration = Duration::from_secs(2);

/// Runs a shell command. Not concurrency-safe.
#[derive(Debug, Clone)]
pub struct BashTool {
    workspace: Workspace,
    limits: BashLimits,
    /// Built from the limits once, so the model is told the numbers that actually apply.
    description: Arc<str>,
    /// The shell the commands run in: `bash` found on `PATH`, else `sh`.
    shell: Arc<std::path::Path>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BashInput {
    command: String,
    #[serde(default)]
    timeout_ms: Option<u64>,
    /// Accepted for models that describe their commands; not used.
    #[serde(default)]
    #[allow(dead_code)]
    description: Option<String>,
}

/// The shell to run commands in: the first executable `bash` on `PATH`, else `sh` (POSIX
/// guarantees one).
fn find_shell() -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt as _;

    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join("bash"))
        .find(|path| {
            std::fs::metadata(path)
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
        .unwrap_or_else(|| "sh".into())
}

/// How the run ended.
enum Ending {
    Exited(std::process::ExitStatus),
    TimedOut,
    Cancelled,
}

impl BashTool {
    /// The tool's name.
    pub const NAME: &'static str = "bash";

    /// A `bash` tool running in `workspace`'s root, with default limits.
    pub fn new(workspace: Workspace) -> Self {
        Self::with_limits(workspace, BashLimits::default())
    }

    /// A `bash` tool with explicit limits.
    pub fn with_limits(workspace: Workspace, limits: BashLimits) -> Self {
        let (head, tail) = HeadTailBuffer::capacities(limits.max_output_bytes);
        let shell = find_shell();
        let shell_name = if shell.ends_with("bash") {
            "bash"
        } else {
            "sh"
        };
        let description = format!(
            "Run a shell command with `{shell_name} -c` in the workspace root and return its combined \
             stdout and stderr. Each call starts a fresh shell (no state carries over). The \
             command is killed, with every process it started, after `timeout_ms` (default \
             {}, at most {}); background processes do not outlive the call. Long output \
             keeps its first {head} and last {tail} bytes. A non-zero exit code is reported as \
             an error with the output. Prefer the read, glob and grep tools for reading and \
             searching files.",
            millis(limits.default_timeout),
            millis(limits.max_timeout)
        );
        Self {
            workspace,
            limits,
            description: description.into(),
            shell: shell.into(),
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
                "command": {"type": "string", "description": "The shell command to run."},
                "timeout_ms": {"type": "integer", "minimum": 1, "maximum": millis(self.limits.max_timeout), "description": format!("Timeout in milliseconds (default {}).", millis(self.limits.default_timeout))},
                "description": {"type": "string", "description": "A short description of what the command does (optional)."}
            },
            "required": ["command"],
            "additionalProperties": false
        })
    }

    /// Runs the tool.
    pub async fn call(
        &self,
        input: Value,
        cancel: CancellationToken,
    ) -> Result<String, ToolFailure> {
        let input: BashInput = parse_input(Self::NAME, || self.input_schema(), input)?;
        if input.command.trim().is_empty() {
            return Err(ToolFailure::InvalidInput("the command is empty".into()));
        }
        let timeout = match input.timeout_ms {
            Some(0) => {
                return Err(ToolFailure::InvalidInput(
                    "timeout_ms must be at least 1".into(),
                ));
            }
            Some(ms) => Duration::from_millis(ms).min(self.limits.max_timeout),
            None => self.limits.default_timeout,
        };
        if cancel.is_cancelled() {
            return Err(ToolFailure::Cancelled);
        }
        let (ending, output) = self.run(&input.command, timeout, &cancel).await?;
        match ending {
            Ending::Exited(status) => exit_result(status, output),
            Ending::TimedOut => Err(ToolFailure::TimedOut {
                timeout_ms: millis(timeout),
                output,
            }),
            Ending::Cancelled => Err(ToolFailure::Cancelled),
        }
    }

    async fn run(
        &self,
        command: &str,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<(Ending, String), ToolFailure> {
        let mut shell = Command::new(&*self.shell);
        shell
            .arg("-c")
            .arg(command)
            .current_dir(self.workspace.root())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            // Replaced by stdout's pipe in the child, below.
            .stderr(Stdio::null())
            .kill_on_drop(true);
        // SAFETY: the closure runs in the forked child before `exec`; it only calls `setsid` and
        // `dup2`, which are async-signal-safe, allocate nothing and touch no lock. `setsid`
        // makes the child a session and group leader (it cannot fail: a freshly forked child
        // leads no group, which is why `process_group(0)` must not be used with it). `dup2`
        // makes stderr a second handle on stdout's pipe, so the output interleaves exactly as
        // the command wrote it (the same as `2>&1`) without rewriting the command.
        unsafe {
            shell.pre_exec(|| {
                if libc::setsid() == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::dup2(libc::STDOUT_FILENO, libc::STDERR_FILENO) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = shell.spawn().map_err(|error| {
            // A working directory that is gone fails the spawn with ENOENT, which would read as
            // "no such shell" and send the model looking for a missing bash.
            let root = self.workspace.root();
            if root.is_dir() {
                ToolFailure::Io {
                    operation: "start",
                    path: self.shell.display().to_string(),
                    source: error,
                }
            } else {
                ToolFailure::Io {
                    operation: "run commands in the workspace root",
                    path: root.display().to_string(),
                    source: error,
                }
            }
        })?;
        let group = child
            .id()
            .and_then(|pid| libc::pid_t::try_from(pid).ok())
            .map(ProcessGroup::new)
            .ok_or_else(|| ToolFailure::Internal("the shell has no process id".into()))?;
        let Some(mut stdout) = child.stdout.take() else {
            return Err(ToolFailure::Internal(
                "the shell's output pipe is missing".into(),
            ));
        };

        let mut output = HeadTailBuffer::new(self.limits.max_output_bytes);
        let mut chunk = vec![0u8; 8 * 1024];
        let mut stdout_open = true;
        let mut status = None;
        let mut ending: Option<Ending> = None;
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let drain_deadline = tokio::time::sleep(Duration::MAX);
        tokio::pin!(drain_deadline);
        let mut killed = false;

        while stdout_open || status.is_none() {
            tokio::select! {
                read = stdout.read(&mut chunk), if stdout_open => match read {
                    Ok(0) | Err(_) => stdout_open = false,
                    Ok(n) => output.push(&chunk[..n]),
                },
                waited = child.wait(), if status.is_none() => {
                    let exit = waited.map_err(|error| ToolFailure::Io {
                        operation: "wait for",
                        path: self.shell.display().to_string(),
                        source: error,
                    })?;
                    status = Some(exit);
                    if ending.is_none() {
                        ending = Some(Ending::Exited(exit));
                    }
                    // Leftover background jobs would keep the pipes open: end them now.
                    if !killed {
                        group.kill();
                        killed = true;
                        drain_deadline.as_mut().reset(tokio::time::Instant::now() + DRAIN_AFTER_KILL);
                    }
                },
                () = &mut deadline, if !killed => {
                    tracing::debug!(?timeout, "bash: timed out; killing the process group");
                    group.kill();
                    killed = true;
                    ending = Some(Ending::TimedOut);
                    drain_deadline.as_mut().reset(tokio::time::Instant::now() + DRAIN_AFTER_KILL);
                },
                () = cancel.cancelled(), if !killed => {
                    tracing::debug!("bash: cancelled; killing the process group");
                    group.kill();
                    killed = true;
                    ending = Some(Ending::Cancelled);
                    drain_deadline.as_mut().reset(tokio::time::Instant::now() + DRAIN_AFTER_KILL);
                },
                () = &mut drain_deadline => {
                    tracing::warn!("bash: a process outside the killed group holds the output pipe open; not waiting for it");
                    break;
                },
            }
        }
        if status.is_none() {
            // The drain was abandoned before the shell was reaped; it was sent SIGKILL already.
            let _ = child.wait().await;
        }
        group.disarm();
        let ending = ending.unwrap_or(Ending::Cancelled);
        Ok((ending, output.render()))
    }
}

/// `duration` in whole milliseconds, saturating.
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn exit_result(status: std::process::ExitStatus, output: String) -> Result<String, ToolFailure> {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(0), _) => {
            if output.is_empty() {
                Ok("(no output)\nExit code: 0".to_owned())
            } else {
                let separator = if output.ends_with('\n') { "" } else { "\n" };
                Ok(format!("{output}{separator}Exit code: 0"))
            }
        }
        (Some(code), _) => Err(ToolFailure::CommandFailed { code, output }),
        (None, Some(signal)) => Err(ToolFailure::CommandKilled { signal, output }),
        (None, None) => Err(ToolFailure::Internal(format!(
            "the shell ended with an unknown status {status:?}"
        ))),
    }
}

/// The command's process group; killed when dropped unless disarmed, so that dropping the
/// call's future (an executor timeout, an aborted task) never leaves the tree running.
struct ProcessGroup {
    id: libc::pid_t,
    armed: bool,
}

impl ProcessGroup {
    fn new(id: libc::pid_t) -> Self {
        Self { id, armed: true }
    }

    /// Sends `SIGKILL` to every process in the group.
    fn kill(&self) {
        // SAFETY: `killpg` takes two integers and has no memory-safety preconditions. The group
        // id is the pid of our own child, made a group leader by `setsid()`; the id
        // cannot be reused while the child is unreaped or any group member lives.
        let result = unsafe { libc::killpg(self.id, libc::SIGKILL) };
        if result != 0 {
            // ESRCH: the group is already gone, which is the goal.
            tracing::trace!(group = self.id, error = %std::io::Error::last_os_error(), "killpg");
        }
    }

    /// The group is dealt with; do not signal it again on drop (its id may be reused).
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if self.armed {
            self.kill();
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn tool(limits: BashLimits) -> (tempfile::TempDir, BashTool) {
        let dir = tempfile::tempdir().unwrap();
        let workspace = Workspace::new(dir.path()).unwrap();
        (dir, BashTool::with_limits(workspace, limits))
    }

    async fn call(tool: &BashTool, input: Value) -> Result<String, ToolFailure> {
        tool.call(input, CancellationToken::new()).await
    }

    /// Models write bash: where bash exists, the tool runs it (it ran `sh`, dash on Debian,
    /// where `{a,b}` stays literal, `[[` is "not found" and `set -o pipefail` is illegal), and
    /// the description names the shell that runs.
    #[tokio::test]
    async fn commands_run_in_bash_when_there_is_one() {
        let (_dir, tool) = tool(BashLimits::default());
        if !find_shell().ends_with("bash") {
            assert!(tool.description.contains("`sh -c`"));
            return;
        }
        assert!(
            tool.description.contains("`bash -c`"),
            "{}",
            tool.description
        );
        let out = call(
            &tool,
            json!({"command": "set -o pipefail; mkdir -p x/{a,b} && [[ -d x/a && -d x/b ]] && echo both"}),
        )
        .await
        .unwrap();
        assert_eq!(out, "both\nExit code: 0");
    }

    #[tokio::test]
    async fn runs_in_the_workspace_root_and_reports_the_exit_code() {
        let (dir, tool) = tool(BashLimits::default());
        let out = call(&tool, json!({"command": "pwd; echo err >&2"}))
            .await
            .unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(out, format!("{}\nerr\nExit code: 0", root.display()));
        assert_eq!(
            call(&tool, json!({"command": "true"})).await.unwrap(),
            "(no output)\nExit code: 0"
        );
    }

    #[tokio::test]
    async fn a_non_zero_exit_is_a_failure_with_the_output() {
        let (_dir, tool) = tool(BashLimits::default());
        let failure = call(&tool, json!({"command": "echo partial; exit 3"}))
            .await
            .unwrap_err();
        assert!(matches!(
            failure,
            ToolFailure::CommandFailed { code: 3, .. }
        ));
        assert_eq!(
            failure.to_string(),
            "Command failed with exit code 3\npartial\n"
        );
        let failure = call(&tool, json!({"command": "kill -TERM $$"}))
            .await
            .unwrap_err();
        assert!(
            matches!(failure, ToolFailure::CommandKilled { signal: 15, .. }),
            "{failure:?}"
        );
    }

    #[tokio::test]
    async fn long_output_is_capped_head_and_tail() {
        let limits = BashLimits {
            max_output_bytes: 40,
            ..BashLimits::default()
        };
        let (_dir, tool) = tool(limits);
        let out = call(
            &tool,
            json!({"command": "echo start; seq 1 10000 >/dev/null; i=0; while [ $i -lt 200 ]; do echo line$i; i=$((i+1)); done; echo finish"}),
        )
        .await
        .unwrap();
        assert!(out.starts_with("start\nline0\nline1\n"), "{out}");
        assert!(out.contains("bytes of output elided"), "{out}");
        assert!(out.ends_with("line199\nfinish\nExit code: 0"), "{out}");
    }

    #[tokio::test]
    async fn background_jobs_do_not_outlive_the_call() {
        let (dir, tool) = tool(BashLimits::default());
        // The job holds the output pipe open; the call must still end when the shell does.
        let out = call(
            &tool,
            json!({"command": "sleep 30 & echo $! > bg.pid; echo started"}),
        )
        .await
        .unwrap();
        assert_eq!(out, "started\nExit code: 0");
        let pid = std::fs::read_to_string(dir.path().join("bg.pid")).unwrap();
        assert!(crate::tools::test_support::process_is_gone(pid.trim()));
    }

    #[tokio::test]
    async fn a_workspace_root_that_is_gone_is_named_not_the_shell() {
        // The kernel reports a missing working directory as the program not being found.
        let outer = tempfile::tempdir().unwrap();
        let root = outer.path().join("ws");
        std::fs::create_dir(&root).unwrap();
        let tool = BashTool::new(Workspace::new(&root).unwrap());
        std::fs::remove_dir(&root).unwrap();
        let message = call(&tool, json!({"command": "true"}))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with(&format!(
                "Cannot run commands in the workspace root '{}': ",
                tool.workspace.root().display()
            )),
            "{message}"
        );
    }

    #[tokio::test]
    async fn bad_input_is_refused() {
        let (_dir, tool) = tool(BashLimits::default());
        for input in [
            json!({"command": "  "}),
            json!({"command": "x", "timeout_ms": 0}),
            json!({"cmd": "ls"}),
        ] {
            let failure = call(&tool, input.clone()).await.unwrap_err();
            assert!(
                matches!(failure, ToolFailure::InvalidInput(_)),
                "{input}: {failure:?}"
            );
        }
    }
}
