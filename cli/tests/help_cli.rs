//! The help texts and the README agree with what the program does: every subcommand's options
//! are the ones the README's synopsis lines show, and the help says what a user needs to read
//! the run's output (which calls fall back, which repeated requests count as one turn).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::PathBuf;

mod common;
use common::{bin, run_stdin, shared};

fn help(args: &[&str]) -> String {
    let output = bin().args(args).arg("--help").output().unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

/// The `--long` options a text names (`--help` aside).
fn long_options(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(at) = text[i..].find("--") {
        let start = i + at;
        let before_ok = start == 0 || !bytes[start - 1].is_ascii_alphanumeric();
        let mut end = start + 2;
        while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'-') {
            end += 1;
        }
        let name = &text[start..end];
        if before_ok && end > start + 2 && bytes[start + 2].is_ascii_lowercase() && name != "--help"
        {
            found.insert(name.to_owned());
        }
        i = end;
    }
    found
}

/// The options of `ferroloop SUB --help`'s `Options:` section.
fn help_options(subcommand: &str) -> BTreeSet<String> {
    let text = help(&[subcommand]);
    let options = text.split("Options:").nth(1).expect("an Options: section");
    options
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|word| word.starts_with("--"))
        .map(|word| word.trim_end_matches(',').to_owned())
        .filter(|word| word != "--help")
        .collect()
}

/// The README's synopsis of `ferroloop SUB`: the first line that starts with it, and the
/// indented lines continuing it.
fn readme_synopsis(subcommand: &str) -> Option<String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    let readme = std::fs::read_to_string(path).unwrap();
    let prefix = format!("ferroloop {subcommand} ");
    let lines: Vec<&str> = readme.lines().collect();
    let start = lines.iter().position(|line| line.starts_with(&prefix))?;
    let mut synopsis = lines[start].to_owned();
    for line in &lines[start + 1..] {
        if line.starts_with("  ") && line.trim_start().starts_with('[') {
            synopsis.push(' ');
            synopsis.push_str(line.trim());
        } else {
            break;
        }
    }
    Some(synopsis)
}

#[test]
fn the_readme_synopses_list_every_option_of_each_subcommand() {
    for subcommand in ["sse", "decode", "tokens", "run", "bench"] {
        let synopsis = readme_synopsis(subcommand)
            .unwrap_or_else(|| panic!("README has no `ferroloop {subcommand} ...` synopsis"));
        assert_eq!(
            long_options(&synopsis),
            help_options(subcommand),
            "README's synopsis of `ferroloop {subcommand}`: {synopsis}"
        );
    }
}

#[test]
fn the_top_level_help_names_every_subcommand() {
    let text = help(&[]);
    let about = text.lines().next().unwrap();
    let commands = text.split("Commands:").nth(1).unwrap();
    let commands = commands.split("Options:").next().unwrap();
    for line in commands.lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        if name == "help" {
            continue;
        }
        assert!(about.contains(name), "{about:?} does not name {name}");
    }
}

#[test]
fn run_help_says_what_falls_back_and_what_counts_as_one_turn() {
    let text = help(&["run"]);
    let fallback = text
        .split("--fallback-model")
        .nth(1)
        .unwrap()
        .split("--provider")
        .next()
        .unwrap();
    // Overloads that came without an HTTP 529 count toward the switch, and the summariser's
    // call falls back too.
    assert!(fallback.contains("without a 529"), "{fallback}");
    assert!(fallback.contains("summary"), "{fallback}");
    let max_turns = text.split("--max-turns").nth(1).unwrap();
    // A turn asked again after a reactive compaction keeps its number.
    assert!(max_turns.contains("compacted"), "{max_turns}");
    // So does one sent again without a field the server refused (`stream_options`, ...).
    assert!(
        max_turns.contains("field the server refused"),
        "{max_turns}"
    );
    // The run's description names every provider a key selects.
    let about = text.lines().next().unwrap();
    assert!(about.contains("openai-responses"), "{about}");
}

#[test]
fn sse_help_says_what_the_event_size_limit_counts() {
    let text = help(&["sse"]);
    let limit = text.split("--max-event-bytes").nth(1).unwrap();
    // `data: b` is a 7-byte line: a limit below that drops an event whose data is one byte.
    assert!(limit.contains("field name"), "{limit}");
}

/// The `type` names of `AgentEvent` (core/src/agent/events.rs): its variants in snake_case.
fn agent_event_types() -> Vec<String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../core/src/agent/events.rs");
    let source = std::fs::read_to_string(path).unwrap();
    let body = source.split("pub enum AgentEvent {").nth(1).unwrap();
    let mut types = Vec::new();
    for line in body.lines() {
        if line.starts_with('}') {
            break;
        }
        let Some(rest) = line.strip_prefix("    ") else {
            continue;
        };
        if !rest.starts_with(|c: char| c.is_ascii_uppercase()) {
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(char::is_ascii_alphanumeric)
            .collect();
        let mut snake = String::new();
        for (i, c) in name.chars().enumerate() {
            if c.is_ascii_uppercase() && i > 0 {
                snake.push('_');
            }
            snake.push(c.to_ascii_lowercase());
        }
        types.push(snake);
    }
    types
}

#[test]
fn the_readme_lists_every_agent_event_type_for_python_and_node() {
    let types = agent_event_types();
    assert!(types.contains(&"cache_break".to_owned()), "{types:?}");
    assert!(types.contains(&"stop".to_owned()), "{types:?}");
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    let readme = std::fs::read_to_string(path).unwrap();
    for (binding, start, end) in [
        (
            "Node",
            "`run(prompt, { signal })` is an async iterable of",
            "`result()`",
        ),
        (
            "Python",
            "`async for event in agent.run(prompt)` yields",
            "Python tools run",
        ),
    ] {
        let list = readme
            .split(start)
            .nth(1)
            .unwrap()
            .split(end)
            .next()
            .unwrap();
        for name in &types {
            assert!(
                list.contains(&format!("`{name}`")),
                "the README's {binding} event list does not name `{name}`: {list}"
            );
        }
    }
}

fn readme() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    std::fs::read_to_string(path).unwrap()
}

/// What the README says `sse` and `decode` print on stderr and how they exit, they do.
#[test]
fn the_readme_quotes_the_sse_and_decode_diagnostics_as_printed() {
    let readme = readme();
    let quoted = "ferroloop sse: dropped 1 event(s) larger than N bytes";
    assert!(readme.contains(quoted), "README does not quote {quoted:?}");
    let dropped = run_stdin(
        &["sse", "--max-event-bytes", "7"],
        b"data: aaaaaaa\n\ndata: b\n\n",
    );
    assert!(dropped.status.success(), "{dropped:?}");
    let stderr = String::from_utf8_lossy(&dropped.stderr);
    assert_eq!(
        stderr.trim_end(),
        quoted.replace(" N ", " 7 "),
        "the README says a 7-byte `data: b` line fits a limit of 7"
    );
    assert_eq!(
        String::from_utf8_lossy(&dropped.stdout).trim_end(),
        r#"{"event":"message","data":"b","id":""}"#
    );

    assert!(readme.contains(r#"`{"retry":MS}`"#));
    let retry = run_stdin(&["sse"], b"retry: 10\ndata: x\n\n");
    assert_eq!(
        String::from_utf8_lossy(&retry.stdout),
        "{\"retry\":10}\n{\"event\":\"message\",\"data\":\"x\",\"id\":\"\"}\n"
    );

    let quoted = "ferroloop decode (anthropic): truncated stream: ";
    assert!(readme.contains(quoted), "README does not quote {quoted:?}");
    let stream = std::fs::read(shared("fixtures/anthropic/basic_response.sse")).unwrap();
    let cut = run_stdin(&["decode", "--provider", "anthropic"], &stream[..300]);
    assert_eq!(cut.status.code(), Some(1), "{cut:?}");
    assert!(
        String::from_utf8_lossy(&cut.stderr).starts_with(quoted),
        "{cut:?}"
    );
    // The message accumulated so far is still printed.
    let partial: serde_json::Value = serde_json::from_slice(&cut.stdout).unwrap();
    assert_eq!(partial["type"], "message");
}

/// What the README says `tokens` prints for an unreadable file and a family without a
/// vocabulary, and how it exits, it does.
#[test]
fn the_readme_quotes_the_tokens_diagnostics_as_printed() {
    let readme = readme();
    assert!(
        readme.contains("(`ferroloop: cannot read FILE: ...`) while the others are still counted")
    );
    let missing = "/nonexistent/ferroloop-readme-test";
    let readme_path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    let output = bin()
        .arg("tokens")
        .arg(missing)
        .arg(&readme_path)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with(&format!("ferroloop: cannot read {missing}: ")),
        "{stderr}"
    );
    let line: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(line["method"], "estimate");

    assert!(readme.contains("with another family it is a usage error, status 2"));
    let output = bin()
        .args(["tokens", "--exact", "--tokenizer", "claude", "-"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
}

/// The example command lines of the README's `sh` blocks (a `ferroloop` command with arguments,
/// not a `[OPTION]` synopsis), each split into the command and its `# comment`.
fn readme_command_examples() -> Vec<(String, Option<String>)> {
    let mut examples = Vec::new();
    let mut in_sh = false;
    for line in readme().lines() {
        match (in_sh, line.trim_start()) {
            (false, "```sh") => in_sh = true,
            (true, "```") => in_sh = false,
            (true, text) => {
                let (command, comment) = match text.split_once(" # ") {
                    Some((command, comment)) => (command.trim(), Some(comment.trim().to_owned())),
                    None => (text.trim(), None),
                };
                let runs_ferroloop =
                    command.starts_with("ferroloop ") || command.contains("| ferroloop ");
                if runs_ferroloop && !command.contains('[') {
                    examples.push((command.to_owned(), comment));
                }
            }
            (false, _) => {}
        }
    }
    examples
}

/// Each example command line of the README runs (from the repository root, as the paths in it
/// are) and prints what its comment, or the text after it, says it prints.
#[test]
fn the_readme_command_examples_run_and_print_what_they_say() {
    let readme = readme();
    let examples = readme_command_examples();
    let commands: Vec<&str> = examples
        .iter()
        .map(|(command, _)| command.as_str())
        .collect();
    assert_eq!(
        commands.len(),
        3,
        "a README example command was added or removed: check it here: {commands:?}"
    );
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let program = env!("CARGO_BIN_EXE_ferroloop");
    for (command, comment) in &examples {
        let line = if let Some(rest) = command.strip_prefix("ferroloop ") {
            format!("'{program}' {rest}")
        } else {
            command.replacen("| ferroloop ", &format!("| '{program}' "), 1)
        };
        let output = std::process::Command::new("sh")
            .arg("-c")
            .arg(&line)
            .current_dir(&repo)
            .output()
            .unwrap();
        assert!(output.status.success(), "{command}: {output:?}");
        let stdout = String::from_utf8(output.stdout).unwrap();
        // What the comment shows (`…` standing for what varies), or for `decode --events` the
        // events the text after the block quotes, appear in order in what was printed.
        let shown: Vec<String> = match comment {
            Some(comment) => vec![comment.clone()],
            None if command.starts_with("ferroloop decode ") && command.ends_with(" --events") => {
                let quoted = [
                    r#"{"type":"text_delta","index":0,"text":"I"}"#,
                    r#"{"type":"tool_use_ready","index":1,"id":"toolu_…","name":"get_weather","input":{"location":"Paris"}}"#,
                ];
                for text in quoted {
                    assert!(
                        readme.contains(&format!("`{text}`")),
                        "README no longer quotes {text}"
                    );
                }
                quoted.map(str::to_owned).to_vec()
            }
            None => panic!("{command}: no comment says what it prints; check it here"),
        };
        for expected in shown {
            let found = stdout.lines().any(|printed| {
                let mut rest = printed;
                expected.split('…').enumerate().all(|(i, piece)| {
                    let at = if i == 0 {
                        rest.starts_with(piece).then_some(0)
                    } else {
                        rest.find(piece)
                    };
                    at.is_some_and(|at| {
                        rest = &rest[at + piece.len()..];
                        true
                    })
                }) && (expected.ends_with('…') || rest.is_empty())
            });
            assert!(
                found,
                "{command}: printed no line like {expected}:\n{stdout}"
            );
        }
    }
}
