//! The built-in tools end to end on a temporary workspace: process-tree kills on timeout and
//! cancellation, confinement across every tool, and the tools driven through `BuiltinTool`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use ferroloop::exec::{
    CancellationToken, ExecutorConfig, ToolExecutor, ToolRegistry, ToolResult, ToolResultContent,
    ToolUse,
};
use ferroloop::tools::{self, BuiltinTool, ToolFailure, Workspace};
use serde_json::{Value, json};

fn workspace() -> (tempfile::TempDir, Workspace) {
    let dir = tempfile::tempdir().unwrap();
    let workspace = Workspace::new(dir.path()).unwrap();
    (dir, workspace)
}

fn tool(name: &str, workspace: &Workspace) -> BuiltinTool {
    tools::builtin(name, workspace).unwrap()
}

/// Whether process `pid` has exited: gone from /proc, or a zombie not yet reaped by its new
/// parent (a container's init may never reap it). Allows a few seconds for SIGKILL delivery.
/// Calls the built-in tool `name` of `workspace` on `input`, uncancelled.
async fn call(workspace: &Workspace, name: &str, input: Value) -> Result<String, ToolFailure> {
    tool(name, workspace)
        .call(input, CancellationToken::new())
        .await
}

fn process_is_gone(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return true,
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

/// Waits (bounded) until the shell has written every pid file, and reads them.
async fn wait_for_pids(dir: &Path, files: &[&str]) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let pids: Vec<Option<u32>> = files
            .iter()
            .map(|file| {
                std::fs::read_to_string(dir.join(file))
                    .ok()
                    .and_then(|text| text.trim().parse().ok())
            })
            .collect();
        if pids.iter().all(Option::is_some) {
            return pids.into_iter().flatten().collect();
        }
        assert!(
            Instant::now() < deadline,
            "the shell never wrote its pid files"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A command whose tree is three levels deep: our `sh`, a nested `sh`, and a background
/// `sleep` started by the nested shell. Each records its pid; the nested shell's pid is written
/// last, once the grandchild exists.
const PROCESS_TREE: &str = "echo $$ > shell.pid; \
     sh -c 'sleep 30 & echo $! > grandchild.pid; echo $$ > child.pid; sleep 30; wait'";

#[tokio::test]
async fn bash_timeout_kills_the_whole_process_tree() {
    let (dir, workspace) = workspace();
    let bash = tool("bash", &workspace);
    let started = Instant::now();
    let failure = bash
        .call(
            json!({"command": format!("echo before; {PROCESS_TREE}"), "timeout_ms": 1000}),
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    let elapsed = started.elapsed();
    // Returns at the timeout, not when the 30 s sleeps would have ended.
    assert!(elapsed < Duration::from_secs(15), "took {elapsed:?}");
    match &failure {
        ToolFailure::TimedOut { timeout_ms, output } => {
            assert_eq!(*timeout_ms, 1000);
            assert_eq!(output, "before\n");
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(
        failure
            .to_string()
            .starts_with("Command timed out after 1000 ms")
    );
    let pids = wait_for_pids(dir.path(), &["shell.pid", "child.pid", "grandchild.pid"]).await;
    for pid in pids {
        assert!(process_is_gone(pid), "process {pid} survived the timeout");
    }
}

#[tokio::test]
async fn bash_cancellation_kills_the_whole_process_tree() {
    let (dir, workspace) = workspace();
    let bash = tool("bash", &workspace);
    let cancel = CancellationToken::new();
    let call = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            bash.call(
                json!({"command": PROCESS_TREE, "timeout_ms": 60_000}),
                cancel,
            )
            .await
        })
    };
    // Cancel only once the whole tree exists, so the test does not depend on timing.
    let pids = wait_for_pids(dir.path(), &["shell.pid", "child.pid", "grandchild.pid"]).await;
    let started = Instant::now();
    cancel.cancel();
    let result = call.await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(matches!(result, Err(ToolFailure::Cancelled)), "{result:?}");
    for pid in pids {
        assert!(
            process_is_gone(pid),
            "process {pid} survived the cancellation"
        );
    }
}

#[tokio::test]
async fn dropping_a_running_bash_call_kills_its_process_tree() {
    let (dir, workspace) = workspace();
    let bash = tool("bash", &workspace);
    let call = tokio::spawn(async move {
        bash.call(json!({"command": PROCESS_TREE}), CancellationToken::new())
            .await
    });
    let pids = wait_for_pids(dir.path(), &["shell.pid", "child.pid", "grandchild.pid"]).await;
    // An executor that gives up on a call drops its future: the guard must kill the group.
    call.abort();
    assert!(call.await.unwrap_err().is_cancelled());
    for pid in pids {
        assert!(
            process_is_gone(pid),
            "process {pid} survived the dropped call"
        );
    }
}

#[tokio::test]
async fn every_path_taking_tool_refuses_escapes() {
    let outer = tempfile::tempdir().unwrap();
    std::fs::write(outer.path().join("secret.txt"), "secret").unwrap();
    let root = outer.path().join("ws");
    std::fs::create_dir(&root).unwrap();
    std::os::unix::fs::symlink("/etc", root.join("etc")).unwrap();
    std::os::unix::fs::symlink(outer.path().join("secret.txt"), root.join("secret")).unwrap();
    let workspace = Workspace::new(&root).unwrap();
    let secret = outer.path().join("secret.txt");
    let secret = secret.to_str().unwrap();
    for path in [
        "../secret.txt",
        secret,
        "/etc/passwd",
        "etc/passwd",
        "secret",
        "a/../../x",
    ] {
        let calls = [
            ("read", json!({"file_path": path})),
            ("write", json!({"file_path": path, "content": "pwned"})),
            (
                "edit",
                json!({"file_path": path, "old_string": "secret", "new_string": "pwned"}),
            ),
            ("glob", json!({"pattern": "*", "path": path})),
            ("grep", json!({"pattern": "secret", "path": path})),
        ];
        for (name, input) in calls {
            let failure = tool(name, &workspace)
                .call(input, CancellationToken::new())
                .await
                .unwrap_err();
            assert!(
                failure
                    .to_string()
                    .starts_with(&format!("Path '{path}' is outside the workspace '")),
                "{name} {path}: {failure}"
            );
        }
    }
    assert_eq!(
        std::fs::read_to_string(outer.path().join("secret.txt")).unwrap(),
        "secret"
    );
}

#[tokio::test]
async fn concurrency_safe_tools_run_side_by_side() {
    let (dir, workspace) = workspace();
    for i in 0..20 {
        std::fs::write(
            dir.path().join(format!("f{i:02}.txt")),
            format!("value {i}\n"),
        )
        .unwrap();
    }
    let calls = [
        ("read", json!({"file_path": "f03.txt"})),
        ("glob", json!({"pattern": "f1*.txt", "max_results": 3})),
        (
            "grep",
            json!({"pattern": "value 1[0-9]", "output_mode": "count"}),
        ),
    ];
    let results = futures::future::join_all(calls.iter().map(|(name, input)| {
        let tool = tool(name, &workspace);
        let input = input.clone();
        async move {
            assert!(tool.is_concurrency_safe());
            tool.call(input, CancellationToken::new()).await
        }
    }))
    .await;
    assert_eq!(results[0].as_ref().unwrap(), "     1\tvalue 3\n");
    // Same mtime granularity is likely: only the count and the note are certain.
    let glob = results[1].as_ref().unwrap();
    assert_eq!(
        glob.lines().filter(|line| line.starts_with("f1")).count(),
        3,
        "{glob}"
    );
    assert!(glob.ends_with("[showing 3 of 10 files; use a more specific pattern or path]\n"));
    let grep = results[2].as_ref().unwrap();
    assert_eq!(grep.lines().count(), 10, "{grep}");
    assert!(grep.starts_with("f10.txt:1\n"), "{grep}");
}

#[tokio::test]
async fn write_edit_read_round_trip() {
    let (_dir, workspace) = workspace();
    let call = |name: &str, input: serde_json::Value| {
        let tool = tool(name, &workspace);
        async move { tool.call(input, CancellationToken::new()).await }
    };
    call(
        "write",
        json!({"file_path": "src/new/lib.rs", "content": "fn a() {}\nfn b() {}\n"}),
    )
    .await
    .unwrap();
    let out = call(
        "edit",
        json!({"file_path": "src/new/lib.rs", "old_string": "fn b", "new_string": "fn c"}),
    )
    .await
    .unwrap();
    assert_eq!(out, "Replaced 1 occurrence in 'src/new/lib.rs'");
    let out = call("read", json!({"file_path": "src/new/lib.rs", "offset": 2}))
        .await
        .unwrap();
    assert_eq!(out, "     2\tfn c() {}\n");
    let out = call("grep", json!({"pattern": "fn c", "output_mode": "content"}))
        .await
        .unwrap();
    assert_eq!(out, "src/new/lib.rs:2:fn c() {}\n");
    let out = call("bash", json!({"command": "cat src/new/lib.rs | wc -l"}))
        .await
        .unwrap();
    assert_eq!(out, "2\nExit code: 0");
}

fn registry(workspace: &Workspace) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    for tool in tools::all(workspace) {
        registry.register(tool).unwrap();
    }
    registry
}

fn text(result: &ToolResult) -> &str {
    match &result.content {
        ToolResultContent::Text(text) => text,
        other => panic!("expected text, got {other:?}"),
    }
}

#[tokio::test]
async fn the_executor_runs_builtin_tools_with_results_in_request_order() {
    let (dir, workspace) = workspace();
    std::fs::write(dir.path().join("a.txt"), "x = 1\nx = 1\n").unwrap();
    let registry = registry(&workspace);
    assert_eq!(
        registry.names(),
        ["bash", "edit", "glob", "grep", "read", "write"]
    );
    let executor = ToolExecutor::new(registry);
    let results = executor
        .run(vec![
            ToolUse::new("t1", "read", json!({"file_path": "a.txt"})),
            ToolUse::new(
                "t2",
                "grep",
                json!({"pattern": "x", "output_mode": "count"}),
            ),
            ToolUse::new("t3", "read", json!({"file_path": "../../etc/passwd"})),
            ToolUse::new(
                "t4",
                "edit",
                json!({"file_path": "a.txt", "old_string": "x = 1", "new_string": "y"}),
            ),
            ToolUse::new("t5", "glob", json!({"pattern": "*.txt", "bogus": true})),
        ])
        .await
        .unwrap();
    let ids: Vec<_> = results.iter().map(|r| r.tool_use_id.as_str()).collect();
    assert_eq!(ids, ["t1", "t2", "t3", "t4", "t5"]);
    assert!(!results[0].is_error);
    assert_eq!(text(&results[0]), "     1\tx = 1\n     2\tx = 1\n");
    assert_eq!(text(&results[1]), "a.txt:2\n");
    assert!(results[2].is_error);
    assert!(
        text(&results[2]).contains("is outside the workspace"),
        "{}",
        text(&results[2])
    );
    assert!(results[3].is_error);
    assert!(
        text(&results[3]).contains("occurs 2 times"),
        "{}",
        text(&results[3])
    );
    // Unknown fields are refused (by the executor's schema check or the tool's own parsing).
    assert!(results[4].is_error);
    assert!(text(&results[4]).contains("bogus"), "{}", text(&results[4]));
}

#[tokio::test]
async fn an_executor_timeout_kills_the_bash_process_tree() {
    let (dir, workspace) = workspace();
    let executor = ToolExecutor::builder(registry(&workspace))
        .config(ExecutorConfig {
            default_timeout: Some(Duration::from_millis(1000)),
            ..ExecutorConfig::default()
        })
        .build();
    let started = Instant::now();
    let results = executor
        .run(vec![ToolUse::new(
            "t1",
            "bash",
            json!({"command": PROCESS_TREE}),
        )])
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(results[0].is_error);
    let pids = wait_for_pids(dir.path(), &["shell.pid", "child.pid", "grandchild.pid"]).await;
    for pid in pids {
        assert!(
            process_is_gone(pid),
            "process {pid} survived the executor's timeout"
        );
    }
}

#[tokio::test]
async fn a_failing_bash_call_cancels_the_calls_queued_after_it() {
    let (dir, workspace) = workspace();
    std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
    let executor = ToolExecutor::new(registry(&workspace));
    let results = executor
        .run(vec![
            ToolUse::new("t1", "read", json!({"file_path": "a.txt"})),
            ToolUse::new("t2", "bash", json!({"command": "echo broken; exit 2"})),
            ToolUse::new("t3", "read", json!({"file_path": "a.txt"})),
        ])
        .await
        .unwrap();
    assert!(!results[0].is_error);
    assert!(results[1].is_error);
    assert_eq!(
        text(&results[1]),
        "Command failed with exit code 2\nbroken\n"
    );
    assert!(results[2].is_error, "{:?}", results[2]);
}

/// `read` and `edit` on a named pipe (made by `bash`'s `mkfifo`, say) must refuse it rather
/// than block forever in `open` waiting for a writer.
#[tokio::test]
async fn read_and_edit_refuse_a_named_pipe_without_hanging() {
    let (dir, workspace) = workspace();
    let fifo = dir.path().join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let inputs = [
        ("read", json!({"file_path": "pipe"})),
        (
            "edit",
            json!({"file_path": "pipe", "old_string": "a", "new_string": "b"}),
        ),
    ];
    for (name, input) in inputs {
        let builtin = tool(name, &workspace);
        let call = builtin.call(input, CancellationToken::new());
        let result = tokio::time::timeout(Duration::from_secs(20), call).await;
        if result.is_err() {
            // Unblock the stuck reader (a writer's open lets it through) so the runtime can
            // shut down and the test fails instead of hanging.
            drop(std::fs::OpenOptions::new().write(true).open(&fifo));
            panic!("{name} on a named pipe hung");
        }
        let failure = result.unwrap().unwrap_err();
        assert!(
            matches!(failure, ToolFailure::NotAFile(_)),
            "{name}: {failure:?}"
        );
    }
}

/// `read` shows a CRLF file's lines without their `\r`, so the model's `old_string` has LF line
/// ends: the edit must still apply, and the file must keep CRLF everywhere.
#[tokio::test]
async fn edit_applies_lf_text_to_a_crlf_file_and_keeps_crlf() {
    let (dir, workspace) = workspace();
    let path = dir.path().join("win.rs");
    std::fs::write(&path, "fn a() {\r\n    1\r\n}\r\nfn b() {}\r\n").unwrap();
    let read = call(&workspace, "read", json!({"file_path": "win.rs"}))
        .await
        .unwrap();
    assert!(!read.contains('\r'), "{read:?}");
    let out = call(&workspace, "edit", json!({"file_path": "win.rs", "old_string": "fn a() {\n    1\n}\n", "new_string": "fn a() {\n    2\n    3\n}\n"})).await
        .unwrap();
    assert_eq!(out, "Replaced 1 occurrence in 'win.rs'");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "fn a() {\r\n    2\r\n    3\r\n}\r\nfn b() {}\r\n"
    );
    // A single-line edit never needed the fallback, and an absent text still fails.
    let failure = call(
        &workspace,
        "edit",
        json!({"file_path": "win.rs", "old_string": "fn c\n", "new_string": "x"}),
    )
    .await
    .unwrap_err();
    assert!(matches!(failure, ToolFailure::NoMatch(_)), "{failure:?}");
}

/// Models often write glob patterns as `./src/*.rs`; paths are matched without the `./`.
#[tokio::test]
async fn glob_accepts_a_leading_dot_slash() {
    let (dir, workspace) = workspace();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/a.rs"), "fn main() {}\n").unwrap();
    for pattern in ["./src/*.rs", "././src/*.rs", "./**/*.rs"] {
        let out = call(&workspace, "glob", json!({"pattern": pattern}))
            .await
            .unwrap();
        assert_eq!(out, "src/a.rs\n", "{pattern}");
    }
}

/// grep's `glob` filter with a leading `./`, as models write it.
#[tokio::test]
async fn grep_glob_filter_accepts_a_leading_dot_slash() {
    let (dir, workspace) = workspace();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/a.rs"), "fn main() {}\n").unwrap();
    std::fs::write(dir.path().join("b.rs"), "fn main() {}\n").unwrap();
    for glob in ["src/*.rs", "./src/*.rs"] {
        let out = call(&workspace, "grep", json!({"pattern": "main", "glob": glob}))
            .await
            .unwrap();
        assert_eq!(out, "src/a.rs\n", "{glob}");
    }
}

/// Line anchors work on CRLF files (ripgrep's `--crlf`): `read` shows the lines without their
/// `\r`, so a model searching for `\{$` or `^}$` expects them to match there too.
#[tokio::test]
async fn grep_line_anchors_match_in_a_crlf_file() {
    let (dir, workspace) = workspace();
    std::fs::write(dir.path().join("win.rs"), "fn main() {\r\n}\r\n").unwrap();
    std::fs::write(dir.path().join("unix.rs"), "fn unix() {\n}\n").unwrap();
    let grep = tool("grep", &workspace);
    let out = grep
        .call(
            json!({"pattern": "\\{$", "output_mode": "content"}),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out, "unix.rs:1:fn unix() {\nwin.rs:1:fn main() {\n");
    let out = grep
        .call(
            json!({"pattern": "^}$", "output_mode": "count"}),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out, "unix.rs:1\nwin.rs:1\n");
    // A match never includes the `\r`.
    let out = grep
        .call(
            json!({"pattern": "\\{\\s*$", "output_mode": "content"}),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out, "unix.rs:1:fn unix() {\nwin.rs:1:fn main() {\n");
}

/// `^` and `$` anchor at every line, not only at the start and end of the file.
#[tokio::test]
async fn grep_line_anchors_match_on_every_line() {
    let (dir, workspace) = workspace();
    std::fs::write(dir.path().join("a.rs"), "x\nfn one() {\n}\nfn two() {\n}\n").unwrap();
    let grep = tool("grep", &workspace);
    for (pattern, expected) in [
        ("^fn", "a.rs:2:fn one() {\na.rs:4:fn two() {\n"),
        ("\\{$", "a.rs:2:fn one() {\na.rs:4:fn two() {\n"),
        ("^}$", "a.rs:3:}\na.rs:5:}\n"),
    ] {
        let out = grep
            .call(
                json!({"pattern": pattern, "output_mode": "content"}),
                CancellationToken::new(),
            )
            .await
            .unwrap();
        assert_eq!(out, expected, "{pattern}");
    }
}

/// `write` must not turn `~/x` into a directory named `~` inside the workspace, nor `dir/`
/// into a file named `dir`.
#[tokio::test]
async fn write_refuses_a_home_path_and_a_trailing_slash() {
    let (dir, workspace) = workspace();
    for path in ["~/notes.txt", "newdir/"] {
        let failure = call(
            &workspace,
            "write",
            json!({"file_path": path, "content": "x"}),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(failure, ToolFailure::InvalidInput(_)),
            "{path}: {failure:?}"
        );
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// A path ending in `/` (or `/.`) names a directory, and the kernel refuses one whose last
/// name is a file (ENOTDIR). Path resolution drops the ending, so without a check `read`, `edit`
/// and `grep` would act on the file; every tool refuses it alike, saying which file is meant.
#[tokio::test]
async fn a_trailing_slash_on_a_file_is_refused_by_every_tool() {
    let (dir, workspace) = workspace();
    std::fs::write(dir.path().join("a.txt"), "needle\n").unwrap();
    std::os::unix::fs::symlink("a.txt", dir.path().join("link")).unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("sub/b.txt"), "needle\n").unwrap();
    call(&workspace, "read", json!({"file_path": "a.txt"}))
        .await
        .unwrap();
    for (path, file) in [
        ("a.txt/", "a.txt"),
        ("a.txt/.", "a.txt"),
        ("link//", "link"),
    ] {
        let inputs = [
            ("read", json!({"file_path": path})),
            (
                "edit",
                json!({"file_path": path, "old_string": "needle", "new_string": "pin"}),
            ),
            ("grep", json!({"pattern": "needle", "path": path})),
            ("glob", json!({"pattern": "*", "path": path})),
            ("write", json!({"file_path": path, "content": "x"})),
        ];
        for (name, input) in inputs {
            let failure = tool(name, &workspace)
                .call(input, CancellationToken::new())
                .await
                .unwrap_err();
            assert!(
                matches!(failure, ToolFailure::NotADirectory { .. }),
                "{name} {path}: {failure:?}"
            );
            assert_eq!(
                failure.to_string(),
                format!(
                    "'{path}' names a directory, but '{file}' is not one; use '{file}' to name the file"
                ),
                "{name}"
            );
        }
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "needle\n"
    );
    // A directory keeps its trailing slash.
    let out = call(
        &workspace,
        "grep",
        json!({"pattern": "needle", "path": "sub/"}),
    )
    .await
    .unwrap();
    assert_eq!(out, "sub/b.txt\n");
}

/// An invalid glob is quoted as the model wrote it, once, with what is wrong: not as the tools
/// rewrote it (a leading `./` dropped), nor the parser's own quote of that rewrite beside it.
/// `glob`'s pattern and `grep`'s glob filter say it in the same words.
#[tokio::test]
async fn an_invalid_glob_is_quoted_as_written() {
    let (_dir, workspace) = workspace();
    for (glob, problem) in [
        ("./[a", "unclosed character class; missing ']'"),
        (
            "src/{a,b",
            "unclosed alternate group; missing '}' (maybe escape '{' with '[{]'?)",
        ),
    ] {
        let expected = format!("Invalid input: invalid glob pattern '{glob}': {problem}");
        let failure = call(&workspace, "glob", json!({"pattern": glob}))
            .await
            .unwrap_err();
        assert_eq!(failure.to_string(), expected, "glob");
        let failure = call(&workspace, "grep", json!({"pattern": "x", "glob": glob}))
            .await
            .unwrap_err();
        assert_eq!(failure.to_string(), expected, "grep");
    }
}

/// A NUL byte stops the search of a file (ripgrep's binary detection). When that file matched
/// before it, or was named by `path`, the output says so instead of a silently partial count or
/// a "No matches found"; binary files met during a walk with no match stay silent.
#[tokio::test]
async fn grep_says_when_a_nul_byte_cut_a_file_short() {
    let (dir, workspace) = workspace();
    std::fs::write(dir.path().join("bin.dat"), b"needle\0\x01\x02").unwrap();
    let mut late = "needle\n".repeat(20_000).into_bytes();
    late.extend_from_slice(b"\0\nneedle last\n");
    std::fs::write(dir.path().join("late.txt"), late).unwrap();
    let grep = tool("grep", &workspace);
    let call = |input: serde_json::Value| grep.call(input, CancellationToken::new());
    let note = "binary file (a NUL byte at byte";

    let out = call(json!({"pattern": "needle", "path": "bin.dat"}))
        .await
        .unwrap();
    assert!(out.starts_with("[bin.dat: binary file"), "{out}");
    let out = call(json!({"pattern": "needle", "output_mode": "count"}))
        .await
        .unwrap();
    assert!(out.starts_with("late.txt:"), "{out}");
    assert!(out.contains(&format!("[late.txt: {note} 140000)")), "{out}");
    assert!(!out.contains("bin.dat"), "{out}");
    let out = call(json!({"pattern": "zzz"})).await.unwrap();
    assert_eq!(out, "No matches found");
}

/// The command runs in a session of its own, without a controlling terminal, so a program that
/// prompts on `/dev/tty` (git credentials, ssh, sudo) fails at once instead of stopping on the
/// host's terminal until the timeout. The session id (field 6 of /proc/PID/stat) is the shell's
/// pid, and `/dev/tty` cannot be opened.
#[tokio::test]
async fn bash_runs_in_its_own_session_without_a_terminal() {
    let (_dir, workspace) = workspace();
    let out = call(&workspace, "bash", json!({"command": "echo $$ $(cut -d' ' -f6 /proc/$$/stat); (exec 3</dev/tty) 2>/dev/null && echo tty || echo no-tty"})).await
        .unwrap();
    let mut lines = out.lines();
    let ids: Vec<&str> = lines.next().unwrap().split(' ').collect();
    assert_eq!(ids[0], ids[1], "{out}");
    assert_eq!(lines.next(), Some("no-tty"), "{out}");
}

#[test]
fn registered_builtin_tools_carry_their_description_for_the_model() {
    // The agent builds the request's tool definitions from the registry's `Tool::description`;
    // an empty one there means the model never sees how a tool behaves.
    let (_dir, workspace) = workspace();
    let registry = registry(&workspace);
    for name in tools::BUILTIN_TOOL_NAMES {
        let registered = registry.get(name).unwrap();
        let direct = tool(name, &workspace);
        assert!(!registered.description().is_empty(), "{name}");
        assert_eq!(registered.description(), direct.description(), "{name}");
    }
}

#[test]
fn descriptions_and_schemas_state_the_configured_limits() {
    use ferroloop::tools::{BashLimits, BashTool, GrepLimits, GrepTool, ReadLimits, ReadTool};
    let (_dir, workspace) = workspace();
    let read = ReadTool::with_limits(
        workspace.clone(),
        ReadLimits {
            default_line_limit: 50,
            max_line_chars: 300,
            ..ReadLimits::default()
        },
    );
    let text = read.description();
    assert!(text.contains("up to 50 lines"), "{text}");
    assert!(text.contains("longer than 300 characters"), "{text}");
    assert!(!text.contains("2000"), "{text}");
    let schema = read.input_schema().to_string();
    assert!(schema.contains("(default 50)"), "{schema}");

    let grep = GrepTool::with_limits(
        workspace.clone(),
        GrepLimits {
            default_max_results: 20,
            ..GrepLimits::default()
        },
    );
    let text = grep.description();
    assert!(text.contains("At most 20 results"), "{text}");
    assert!(!text.contains("100"), "{text}");
    let schema = grep.input_schema().to_string();
    assert!(schema.contains("(default 20)"), "{schema}");

    let bash = BashTool::with_limits(
        workspace,
        BashLimits {
            default_timeout: Duration::from_secs(5),
            max_timeout: Duration::from_secs(60),
            max_output_bytes: 1_000,
        },
    );
    let text = bash.description();
    assert!(text.contains("default 5000, at most 60000"), "{text}");
    assert!(text.contains("first 500 and last 500 bytes"), "{text}");
    assert!(
        !text.contains("120000") && !text.contains("15000"),
        "{text}"
    );
    let schema = bash.input_schema();
    assert_eq!(schema["properties"]["timeout_ms"]["maximum"], 60_000);
    let timeout = schema["properties"]["timeout_ms"]["description"]
        .as_str()
        .unwrap();
    assert!(timeout.contains("(default 5000"), "{timeout}");
}

/// Lists what `glob` and `grep` (files mode) report for `**/*` and `x` under `path`.
async fn glob_and_grep(workspace: &Workspace, path: &str) -> (String, String) {
    let glob = tool("glob", workspace)
        .call(
            json!({"pattern": "**/*", "path": path}),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let grep = tool("grep", workspace)
        .call(
            json!({"pattern": "x", "path": path}),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let mut glob: Vec<&str> = glob.lines().collect();
    glob.sort_unstable();
    (glob.join(" "), grep.lines().collect::<Vec<_>>().join(" "))
}

#[tokio::test]
async fn ignore_files_above_the_workspace_apply_only_within_its_git_repository() {
    // top/            not a repository; its .gitignore hides every .rs file, its .ignore *.md
    //   outside-repo/ the workspace: not in any repository
    //   repo/         a repository hiding *.tmp (.gitignore) and *.bak (.git/info/exclude)
    //     ws/         the workspace inside it
    let top = tempfile::tempdir().unwrap();
    let top = top.path();
    std::fs::write(top.join(".gitignore"), "*.rs\n").unwrap();
    std::fs::write(top.join(".ignore"), "*.md\n").unwrap();
    for dir in ["outside-repo/sub", "repo/.git/info", "repo/ws/sub"] {
        std::fs::create_dir_all(top.join(dir)).unwrap();
    }
    std::fs::write(top.join("repo/.gitignore"), "*.tmp\n").unwrap();
    std::fs::write(top.join("repo/.git/info/exclude"), "*.bak\n").unwrap();
    for file in [
        "outside-repo/main.rs",
        "outside-repo/notes.md",
        "outside-repo/sub/lib.rs",
        "outside-repo/sub/debug.log",
        "repo/ws/main.rs",
        "repo/ws/notes.md",
        "repo/ws/scratch.tmp",
        "repo/ws/sub/lib.rs",
        "repo/ws/sub/old.bak",
    ] {
        std::fs::write(top.join(file), "x\n").unwrap();
    }
    // The workspace's own ignore file applies to a search below its root.
    std::fs::write(top.join("outside-repo/.gitignore"), "*.log\n").unwrap();

    let outside = Workspace::new(top.join("outside-repo")).unwrap();
    let (glob, grep) = glob_and_grep(&outside, ".").await;
    assert_eq!(glob, ".gitignore main.rs notes.md sub/lib.rs");
    assert_eq!(grep, "main.rs notes.md sub/lib.rs");
    let (glob, grep) = glob_and_grep(&outside, "sub").await;
    assert_eq!(glob, "sub/lib.rs");
    assert_eq!(grep, "sub/lib.rs");

    let inside = Workspace::new(top.join("repo/ws")).unwrap();
    let (glob, grep) = glob_and_grep(&inside, ".").await;
    assert_eq!(glob, "main.rs notes.md sub/lib.rs");
    assert_eq!(grep, "main.rs notes.md sub/lib.rs");
    let (glob, _) = glob_and_grep(&inside, "sub").await;
    assert_eq!(glob, "sub/lib.rs");
}

#[tokio::test]
async fn whole_numbers_written_as_floats_are_accepted_like_the_schema_check_accepts_them() {
    // The executor's schema check counts `2.0` as an integer (JSON does not tell them apart,
    // and some models write numbers that way); the tools must then not refuse it themselves.
    let (dir, workspace) = workspace();
    std::fs::write(dir.path().join("a.txt"), "one\ntwo\nthree\n").unwrap();
    let executor = ToolExecutor::new(registry(&workspace));
    let results = executor
        .run(vec![
            ToolUse::new(
                "t1",
                "read",
                json!({"file_path": "a.txt", "offset": 2.0, "limit": 1.0}),
            ),
            ToolUse::new(
                "t2",
                "grep",
                json!({"pattern": "two", "output_mode": "content", "context": 1.0, "max_results": 5.0}),
            ),
            ToolUse::new("t3", "glob", json!({"pattern": "*.txt", "max_results": 1.0})),
            ToolUse::new("t4", "bash", json!({"command": "echo hi", "timeout_ms": 5000.0})),
            ToolUse::new("t5", "read", json!({"file_path": "a.txt", "offset": 1.5})),
        ])
        .await
        .unwrap();
    let texts: Vec<&str> = results.iter().map(text).collect();
    assert_eq!(
        texts[..4],
        [
            "     2\ttwo\n[more lines follow; continue with offset=3]\n",
            "a.txt-1-one\na.txt:2:two\na.txt-3-three\n",
            "a.txt\n",
            "hi\nExit code: 0",
        ]
    );
    assert!(results[..4].iter().all(|result| !result.is_error));
    assert!(results[4].is_error);
    assert!(texts[4].contains("offset"), "{}", texts[4]);
}

#[tokio::test]
async fn grep_glob_filters_are_matched_from_the_workspace_root_as_well_as_from_path() {
    // ripgrep roots `--glob` at the working directory (the workspace root here), not at the
    // searched path: `path: "src", glob: "src/**/*.ts"` must not silently find nothing.
    let (dir, workspace) = workspace();
    for file in [
        "src/app/x.ts",
        "src/app/y.js",
        "src/[v1]/z.ts",
        "other/w.ts",
    ] {
        let full = dir.path().join(file);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, "needle\n").unwrap();
    }
    let grep = tool("grep", &workspace);
    let search = |path: &'static str, glob: &'static str| {
        let grep = grep.clone();
        async move {
            grep.call(
                json!({"pattern": "needle", "path": path, "glob": glob}),
                CancellationToken::new(),
            )
            .await
            .unwrap()
        }
    };
    for (path, glob, expected) in [
        ("src", "src/**/*.ts", "src/[v1]/z.ts\nsrc/app/x.ts\n"),
        ("src", "src/app/*.ts", "src/app/x.ts\n"),
        ("src", "app/*.ts", "src/app/x.ts\n"),
        ("src", "**/*.ts", "src/[v1]/z.ts\nsrc/app/x.ts\n"),
        ("src", "*.js", "src/app/y.js\n"),
        ("src", "!src/app/*", "src/[v1]/z.ts\n"),
        ("src", "!app/*", "src/[v1]/z.ts\n"),
        ("src/[v1]", "src/[[]v1]/*.ts", "src/[v1]/z.ts\n"),
        ("src/[v1]", "*.ts", "src/[v1]/z.ts\n"),
        (".", "src/**/*.ts", "src/[v1]/z.ts\nsrc/app/x.ts\n"),
        ("other", "src/**/*.ts", "No matches found"),
    ] {
        assert_eq!(
            search(path, glob).await,
            expected,
            "path {path}, glob {glob}"
        );
    }
}

#[tokio::test]
async fn read_and_grep_pages_fit_the_executors_default_result_limit() {
    // A result over the executor's per-result limit is replaced by a preview and a spill file
    // outside the workspace, which `read` refuses to open: the model would be stuck. With the
    // default limits, `read` and `grep` must cut their own output first and say how to go on.
    let (dir, workspace) = workspace();
    let line = "x".repeat(99);
    let text: String = (0..2_000).map(|_| format!("{line}\n")).collect();
    std::fs::write(dir.path().join("big.txt"), &text).unwrap();
    let executor = ToolExecutor::new(registry(&workspace));
    let results = executor
        .run(vec![
            ToolUse::new("t1", "read", json!({"file_path": "big.txt"})),
            ToolUse::new(
                "t2",
                "grep",
                json!({"pattern": "x", "output_mode": "content", "max_results": 2000}),
            ),
        ])
        .await
        .unwrap();
    let read = text_of(&results[0]);
    assert!(!read.contains("Output too large"), "{}", &read[..200]);
    assert!(
        read.contains("continue with offset="),
        "{}",
        &read[read.len() - 200..]
    );
    assert!(read.len() < ferroloop::exec::budget::DEFAULT_MAX_RESULT_CHARS);
    let grep = text_of(&results[1]);
    assert!(!grep.contains("Output too large"), "{}", &grep[..200]);
    assert!(
        grep.contains("[results truncated"),
        "{}",
        &grep[grep.len() - 200..]
    );
}

fn text_of(result: &ToolResult) -> String {
    assert!(!result.is_error, "{result:?}");
    text(result).to_owned()
}

#[tokio::test]
async fn edit_gives_new_lines_a_crlf_files_line_ends_even_when_old_string_is_one_line() {
    let (dir, workspace) = workspace();
    let path = dir.path().join("win.rs");
    std::fs::write(&path, "fn a() {\r\n    1\r\n}\r\n").unwrap();
    let read = tool("read", &workspace);
    let read_it = || read.call(json!({"file_path": "win.rs"}), CancellationToken::new());
    read_it().await.unwrap();
    let edit = tool("edit", &workspace);
    edit.call(
        json!({"file_path": "win.rs", "old_string": "    1", "new_string": "    1\n    2"}),
        CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "fn a() {\r\n    1\r\n    2\r\n}\r\n"
    );
    // A file with LF line ends, or mixed ones, gets new_string as written.
    std::fs::write(&path, "a\r\nb\nc\r\n").unwrap();
    read_it().await.unwrap();
    edit.call(
        json!({"file_path": "win.rs", "old_string": "b", "new_string": "b\nb2"}),
        CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "a\r\nb\nb2\nc\r\n");
}

/// An oversized result's preview says "Full output saved to: <spill file>. Read that file…";
/// the spill directory lies outside the workspace, so `read` must be allowed there (and only
/// there, and only `read`) for the model to follow it.
#[tokio::test]
async fn read_can_open_the_spill_file_a_preview_points_to() {
    let (dir, workspace) = workspace();
    let spill = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let workspace = workspace.also_readable(spill.path().join("results"));
    let big: String = (0..3_000).map(|i| format!("line {i:05}\n")).collect();
    std::fs::write(dir.path().join("big.txt"), &big).unwrap();
    std::fs::write(outside.path().join("secret.txt"), "no").unwrap();

    let mut config = ExecutorConfig::default();
    config.budget.spill_dir = spill.path().join("results");
    config.budget.default_max_result_chars = 1_000;
    let executor = ToolExecutor::builder(registry(&workspace))
        .config(config)
        .build();
    let results = executor
        .run(vec![ToolUse::new(
            "r1",
            "read",
            json!({"file_path": "big.txt", "limit": 3000}),
        )])
        .await
        .unwrap();
    let preview = text(&results[0]);
    let saved = preview
        .lines()
        .find_map(|line| {
            line.strip_prefix("Output too large (")
                .and_then(|rest| rest.split("saved to: ").nth(1))
        })
        .unwrap_or_else(|| panic!("{preview}"))
        .to_owned();
    let spill_dir = Path::new(&saved).parent().unwrap().display().to_string();

    let mut results = executor
        .run(vec![
            ToolUse::new("r2", "read", json!({"file_path": saved, "offset": 10, "limit": 2})),
            ToolUse::new("r3", "read", json!({"file_path": outside.path().join("secret.txt")})),
            ToolUse::new("r4", "read", json!({"file_path": format!("{}/../../{}/secret.txt", spill_dir, outside.path().display())})),
            ToolUse::new("r5", "write", json!({"file_path": saved, "content": "x"})),
            // Through the spill file, as if it were a directory: refused as the kernel refuses
            // it (ENOTDIR), wherever `..` would have led.
            ToolUse::new("r6", "read", json!({"file_path": format!("{}/../../{}/secret.txt", saved, outside.path().display())})),
        ])
        .await
        .unwrap();
    let past_the_file = results.pop().unwrap();
    assert!(past_the_file.is_error);
    assert!(
        text(&past_the_file).contains(&format!("goes on past '{saved}'")),
        "{}",
        text(&past_the_file)
    );
    assert!(!results[0].is_error, "{}", text(&results[0]));
    assert!(
        text(&results[0]).contains("line 00009"),
        "{}",
        text(&results[0])
    );
    for refused in &results[1..] {
        assert!(refused.is_error, "{}", text(refused));
        assert!(text(refused).contains("outside"), "{}", text(refused));
    }
}

/// Every size `file` had while `writes` ran, as seen by a reader polling it meanwhile.
async fn sizes_seen_during(file: &Path, writes: impl std::future::Future<Output = ()>) -> Vec<u64> {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (file, stop) = (file.to_path_buf(), stop.clone());
        std::thread::spawn(move || {
            let mut sizes = std::collections::BTreeSet::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(metadata) = std::fs::metadata(&file) {
                    sizes.insert(metadata.len());
                }
            }
            sizes
        })
    };
    writes.await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    reader.join().unwrap().into_iter().collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn write_and_edit_replace_a_file_whole_never_leaving_it_truncated() {
    use std::os::unix::fs::PermissionsExt as _;

    // A write that stops halfway (a full disk, a crash) must leave the old text, not a cut
    // one: another process never sees the file anything but whole, old or new.
    let (dir, workspace) = workspace();
    let path = dir.path().join("big.txt");
    let old = "a".repeat(4 << 20);
    let new = "b".repeat(4 << 20);
    std::fs::write(&path, &old).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o750)).unwrap();
    let read = tool("read", &workspace);
    let write = tool("write", &workspace);
    let edit = tool("edit", &workspace);
    let sizes = sizes_seen_during(&path, async {
        for round in 0..4 {
            read.call(json!({"file_path": "big.txt", "limit": 1}), CancellationToken::new())
                .await
                .unwrap();
            let content = if round % 2 == 0 { &new } else { &old };
            write
                .call(
                    json!({"file_path": "big.txt", "content": content}),
                    CancellationToken::new(),
                )
                .await
                .unwrap();
        }
        edit.call(
            json!({"file_path": "big.txt", "old_string": "a", "new_string": "cc", "replace_all": true}),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    })
    .await;
    let whole = [4u64 << 20, 8 << 20];
    assert!(
        sizes.iter().all(|size| whole.contains(size)),
        "sizes seen: {sizes:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "cc".repeat(4 << 20)
    );
    // The replacement keeps the file's permissions, and leaves no temporary file behind.
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o750);
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert_eq!(names, ["big.txt"]);
}

#[tokio::test]
async fn a_file_replaced_by_another_of_the_same_size_and_time_counts_as_changed() {
    // Editors, `sed -i` and formatters replace a file by renaming a new one over it. On a file
    // system with coarse timestamps (a jiffy on Linux, 2 s on FAT) the new file may carry the
    // old one's time, and an edit of the same length keeps the size: only the inode tells.
    let (dir, workspace) = workspace();
    let path = dir.path().join("config.toml");
    std::fs::write(&path, "debug = false\n").unwrap();
    call(&workspace, "read", json!({"file_path": "config.toml"}))
        .await
        .unwrap();
    let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
    let replacement = dir.path().join(".config.toml.new");
    std::fs::write(&replacement, "debug = true!\n").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&replacement)
        .unwrap()
        .set_modified(modified)
        .unwrap();
    std::fs::rename(&replacement, &path).unwrap();
    let failure = call(
        &workspace,
        "write",
        json!({"file_path": "config.toml", "content": "debug = 0\n"}),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(failure, ToolFailure::ChangedSinceRead(_)),
        "{failure:?}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "debug = true!\n");
}

/// A `write` or `edit` that has put its file in place stands as it is: cancelled afterwards
/// (its turn cancelled before the executor saw its answer), it is reported with its own answer,
/// not as cancelled, since the file did change. A model told "cancelled" would redo an edit
/// that was applied.
#[tokio::test]
async fn a_write_or_edit_that_completed_keeps_its_answer_when_cancelled_afterwards() {
    for (name, expected) in [
        ("write", "Overwrote 'f.txt' (4 bytes, 1 lines)"),
        ("edit", "Replaced 1 occurrence in 'f.txt'"),
    ] {
        let (dir, workspace) = workspace();
        let path = dir.path().join("f.txt");
        std::fs::write(&path, "old\n").unwrap();
        call(&workspace, "read", json!({"file_path": "f.txt"}))
            .await
            .unwrap();
        let input = if name == "write" {
            json!({"file_path": "f.txt", "content": "new\n"})
        } else {
            json!({"file_path": "f.txt", "old_string": "old", "new_string": "new"})
        };
        let executor = ToolExecutor::new(registry(&workspace));
        let mut turn = executor.turn();
        turn.submit(ToolUse::new("t1", name, input)).unwrap();
        turn.begin_finish();
        // Start the call, then keep the turn from seeing its answer until it was cancelled.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let polled =
                std::future::poll_fn(|cx| std::task::Poll::Ready(turn.poll_finish(cx))).await;
            assert!(polled.is_pending(), "{name}: ended before it was cancelled");
            let waited = Instant::now() + Duration::from_millis(100);
            while Instant::now() < waited && std::fs::read_to_string(&path).unwrap() == "old\n" {
                std::thread::sleep(Duration::from_millis(1));
            }
            if std::fs::read_to_string(&path).unwrap() == "new\n" {
                break;
            }
            assert!(Instant::now() < deadline, "{name}: never written");
        }
        // Time for the tool to return its answer once the file is in place.
        std::thread::sleep(Duration::from_millis(300));
        turn.cancel();
        let results = std::future::poll_fn(|cx| turn.poll_finish(cx))
            .await
            .unwrap();
        assert_eq!(text(&results[0]), expected, "{name}");
        assert!(!results[0].is_error, "{name}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
    }
}

/// A path that goes on past a file with `..` (`a.txt/../x`) is refused, as the kernel refuses it
/// (ENOTDIR), by every tool: resolved lexically it would name `x`, a file the model did not
/// name. The refusal names the file, and says nothing of one outside the workspace.
#[tokio::test]
async fn a_path_going_on_past_a_file_is_refused_by_every_tool() {
    let outer = tempfile::tempdir().unwrap();
    std::fs::create_dir(outer.path().join("ws")).unwrap();
    std::fs::write(outer.path().join("secret.txt"), "secret\n").unwrap();
    let root = outer.path().join("ws");
    let workspace = Workspace::new(&root).unwrap();
    std::fs::write(root.join("a.txt"), "needle\n").unwrap();
    std::fs::write(root.join("x"), "needle\n").unwrap();
    std::os::unix::fs::symlink("a.txt", root.join("link")).unwrap();
    std::os::unix::fs::symlink("a.txt/../x", root.join("through")).unwrap();
    for name in ["a.txt", "x"] {
        call(&workspace, "read", json!({"file_path": name}))
            .await
            .unwrap();
    }
    let inputs = |path: &str| {
        [
            ("read", json!({"file_path": path})),
            (
                "edit",
                json!({"file_path": path, "old_string": "needle", "new_string": "pin"}),
            ),
            ("grep", json!({"pattern": "needle", "path": path})),
            ("glob", json!({"pattern": "*", "path": path})),
            ("write", json!({"file_path": path, "content": "x"})),
        ]
    };
    for path in [
        "a.txt/../x",
        "./a.txt/./../x",
        "a.txt/..",
        "link/../x",
        "through",
        "a.txt/../../ws/x",
        "a.txt/missing/../../x",
    ] {
        for (name, input) in inputs(path) {
            let failure = tool(name, &workspace)
                .call(input, CancellationToken::new())
                .await
                .unwrap_err();
            assert_eq!(
                failure.to_string(),
                format!(
                    "'{path}' goes on past 'a.txt' as if it were a directory, but it is not one; name the path without it"
                ),
                "{name} {path}"
            );
        }
    }
    // A file outside is not described: the path is outside, whatever it would have led to.
    for (name, input) in inputs("../secret.txt/../ws/x") {
        let failure = tool(name, &workspace)
            .call(input, CancellationToken::new())
            .await
            .unwrap_err();
        assert!(
            matches!(failure, ToolFailure::OutsideWorkspace { .. }),
            "{name}: {failure:?}"
        );
    }
    assert_eq!(std::fs::read_to_string(root.join("x")).unwrap(), "needle\n");
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "needle\n"
    );
    // `..` after a directory still climbs out of it.
    std::fs::create_dir(root.join("sub")).unwrap();
    let out = call(&workspace, "read", json!({"file_path": "sub/../x"}))
        .await
        .unwrap();
    assert_eq!(out, "     1\tneedle\n");
}

/// A binary file can be replaced by `write`: `read` refuses to show it but records what it saw,
/// and says so. The rule that keeps a model from overwriting what it has not seen holds: a
/// binary file never read, or changed since the refused read, is still refused.
#[tokio::test]
async fn a_binary_file_read_and_refused_can_be_replaced_by_write() {
    let (dir, workspace) = workspace();
    let path = dir.path().join("logo.bin");
    std::fs::write(&path, b"\x89PNG\0\0binary").unwrap();
    let write = |content: &str| {
        let write = tool("write", &workspace);
        let input = json!({"file_path": "logo.bin", "content": content});
        async move { write.call(input, CancellationToken::new()).await }
    };
    let failure = write("text").await.unwrap_err();
    assert!(matches!(failure, ToolFailure::NotReadYet(_)), "{failure:?}");

    let read = || {
        let read = tool("read", &workspace);
        async move {
            read.call(json!({"file_path": "logo.bin"}), CancellationToken::new())
                .await
        }
    };
    let failure = read().await.unwrap_err();
    assert!(matches!(failure, ToolFailure::BinaryFile(_)), "{failure:?}");
    assert_eq!(
        failure.to_string(),
        "'logo.bin' appears to be a binary file (it contains NUL bytes); only text files can be read or edited; `write` may replace it whole"
    );
    // Changed since that read: refused.
    std::fs::write(&path, b"\x89PNG\0\0binary, changed").unwrap();
    let failure = write("text").await.unwrap_err();
    assert!(
        matches!(failure, ToolFailure::ChangedSinceRead(_)),
        "{failure:?}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), b"\x89PNG\0\0binary, changed");
    read().await.unwrap_err();
    let out = write("text\n").await.unwrap();
    assert_eq!(out, "Overwrote 'logo.bin' (5 bytes, 1 lines)");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "text\n");
    // `edit` still refuses a binary file it has seen (and says the same: edit reaches this only
    // for a file read and unchanged since, which `write` may replace).
    std::fs::write(dir.path().join("b.bin"), b"a\0b").unwrap();
    call(&workspace, "read", json!({"file_path": "b.bin"}))
        .await
        .unwrap_err();
    let failure = call(
        &workspace,
        "edit",
        json!({"file_path": "b.bin", "old_string": "a", "new_string": "c"}),
    )
    .await
    .unwrap_err();
    assert!(matches!(failure, ToolFailure::BinaryFile(_)), "{failure:?}");
    assert_eq!(
        failure.to_string(),
        "'b.bin' appears to be a binary file (it contains NUL bytes); only text files can be read or edited; `write` may replace it whole"
    );
}
