//! `ferroloop tokens [--tokenizer NAME] [--exact] FILE...`: estimate (or count exactly) the tokens
//! of each file, one JSON object per line:
//! `{"file": PATH, "tokens": N, "method": "estimate"|"exact", "tokenizer": NAME}`.
//!
//! A `.json` file holding a Messages request body (an object with a `messages` array) is counted
//! as a request (system, tools, messages, per-block rules); anything else as plain text. `-` is
//! stdin, counted as a request when it holds one (it has no extension to go by). With
//! `--exact`, text is counted by the family's exact tokenizer (o200k and cl100k only); request
//! overheads and images still follow the documented rules.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use ferroloop::tokens::{Family, TextCounter, count_exact, count_request_body, estimate_bytes};
use serde_json::{Value, json};

/// Arguments of `ferroloop tokens`.
#[derive(Debug, clap::Args)]
pub struct TokensArgs {
    /// Tokenizer family: o200k, cl100k, claude-legacy or claude.
    #[arg(long, default_value = "claude")]
    tokenizer: Family,
    /// Count exactly with the embedded vocabulary (o200k and cl100k only).
    #[arg(long)]
    exact: bool,
    /// Files to count (`-`: stdin).
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

/// Runs `ferroloop tokens`. Files that cannot be read are reported on stderr and make the exit
/// status 1; the other files are still counted.
pub fn run(args: TokensArgs) -> anyhow::Result<ExitCode> {
    let family = args.tokenizer;
    if args.exact && !ferroloop::tokens::has_exact(family) {
        bail!(
            "--exact is available for o200k and cl100k only (no offline vocabulary for {family})"
        );
    }
    let method = if args.exact { "exact" } else { "estimate" };
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let mut status = ExitCode::SUCCESS;
    // Read once: `-` given twice counts the same input twice, not the rest of a spent stdin.
    let mut stdin: Option<Vec<u8>> = None;
    for path in &args.files {
        match count_file(path, family, args.exact, &mut stdin) {
            Ok(tokens) => {
                let line = json!({
                    "file": path.display().to_string(),
                    "tokens": tokens,
                    "method": method,
                    "tokenizer": family.name(),
                });
                serde_json::to_writer(&mut out, &line)?;
                out.write_all(b"\n")?;
                out.flush()?;
            }
            Err(error) => {
                // On stderr, not in the log: `RUST_LOG=off` must not hide why the exit is 1.
                // The error names the path.
                eprintln!("ferroloop: {}", crate::output::describe(&error));
                status = ExitCode::FAILURE;
            }
        }
    }
    Ok(status)
}

fn count_file(
    path: &Path,
    family: Family,
    exact: bool,
    stdin_bytes: &mut Option<Vec<u8>>,
) -> anyhow::Result<u64> {
    let stdin = path.as_os_str() == "-";
    let read;
    let bytes: &[u8] = if stdin {
        if stdin_bytes.is_none() {
            let mut bytes = Vec::new();
            io::stdin()
                .lock()
                .read_to_end(&mut bytes)
                .context("cannot read stdin")?;
            *stdin_bytes = Some(bytes);
        }
        stdin_bytes.as_deref().unwrap_or_default()
    } else {
        read = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        &read
    };
    let exact_text = |text: &str| count_exact(text, family).unwrap_or(0);
    if (stdin
        || path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json")))
        && let Some(body) = as_request(bytes)
    {
        let counter = if exact {
            TextCounter::with(family, &exact_text)
        } else {
            TextCounter::estimate(family)
        };
        return Ok(count_request_body(&body, &counter).total());
    }
    if exact {
        Ok(exact_text(&String::from_utf8_lossy(bytes)))
    } else {
        Ok(estimate_bytes(bytes, family))
    }
}

/// The file as a Messages request body, if it is one.
fn as_request(bytes: &[u8]) -> Option<Value> {
    // Editors on Windows save JSON with a byte-order mark, which serde_json refuses; counted as
    // text instead, the request's base64 images would be estimated from their length.
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let value: Value = serde_json::from_slice(bytes).ok()?;
    value.get("messages")?.as_array()?;
    Some(value)
}
