//! `ferroloop tokens [--tokenizer NAME] [--exact] FILE...`: estimate (or count exactly) the tokens
//! of each file, one JSON object per line:
//! `{"file": PATH, "tokens": N, "method": "estimate"|"exact", "tokenizer": NAME}`.
//!
//! A `.json` file holding a request body (an object with a `messages` array, or an OpenAI
//! Responses body with an `input` array or string) is counted as a request (system, tools,
//! messages, per-block rules); anything else as plain text. `-` is
//! stdin, counted as a request when it holds one (it has no extension to go by). With
//! `--exact`, text is counted by the family's exact tokenizer (o200k and cl100k only); request
//! overheads and images still follow the documented rules. Plain text is estimated, or counted
//! exactly, as it is read, a block at a time, so a large log does not have to fit in memory;
//! so is a `.json` file or stdin that cannot be a request (it does not start as a JSON object:
//! an array of records). Only an input that starts as an object is read whole, to be parsed.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use ferroloop::tokens::json_text::parse_json_for_counting;
use ferroloop::tokens::{
    ExactCounter, Family, TextCounter, TextEstimator, count_exact, count_request_body,
    estimate_bytes,
};
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

impl TokensArgs {
    /// What clap cannot check alone: `--exact` needs a family with an offline vocabulary.
    /// `Err` is the message of a usage error.
    pub fn check(&self) -> Result<(), String> {
        let family = self.tokenizer;
        if self.exact && !ferroloop::tokens::has_exact(family) {
            return Err(format!(
                "--exact is available for o200k and cl100k only (no offline vocabulary for {family})"
            ));
        }
        Ok(())
    }
}

/// Runs `ferroloop tokens` (its arguments [checked](TokensArgs::check)). Files that cannot be
/// read are reported on stderr and make the exit status 1; the other files are still counted.
pub fn run(args: TokensArgs) -> anyhow::Result<ExitCode> {
    let family = args.tokenizer;
    let method = if args.exact { "exact" } else { "estimate" };
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let mut status = ExitCode::SUCCESS;
    // Counted once: `-` given twice counts the same input twice, not the rest of a spent stdin.
    let mut stdin_tokens: Option<u64> = None;
    for path in &args.files {
        let counted = if path.as_os_str() == "-" {
            match stdin_tokens {
                Some(tokens) => Ok(tokens),
                None => count_stdin(family, args.exact).inspect(|&n| stdin_tokens = Some(n)),
            }
        } else {
            count_file(path, family, args.exact)
        };
        match counted {
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
                crate::output::report(format_args!(
                    "ferroloop: {}",
                    crate::output::describe(&error)
                ));
                status = ExitCode::FAILURE;
            }
        }
    }
    Ok(status)
}

/// Bytes read at a time from a text counted as it is read.
const READ_BLOCK: usize = 1 << 20;

fn count_file(path: &Path, family: Family, exact: bool) -> anyhow::Result<u64> {
    let is_json = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    let mut file =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let counted = if is_json {
        count_maybe_request(&mut file, family, exact)
    } else {
        count_read(&mut file, &[], family, exact)
    };
    counted.with_context(|| format!("cannot read {}", path.display()))
}

/// Stdin: a request when it holds one (it has no extension to go by), else text.
fn count_stdin(family: Family, exact: bool) -> anyhow::Result<u64> {
    let mut stdin = crate::input::stdin().context("cannot read stdin")?;
    count_maybe_request(&mut stdin, family, exact).context("cannot read stdin")
}

/// An input that may hold a request (a `.json` file, stdin): a request when it is one, else
/// text. Only an input that starts as a JSON object (`{` after any byte-order mark and
/// whitespace) can be a request, and only such an input is read whole; any other is counted
/// as it is read.
fn count_maybe_request(reader: &mut impl Read, family: Family, exact: bool) -> io::Result<u64> {
    let mut head = Vec::new();
    loop {
        let start = head.len();
        head.resize(start + 64 * 1024, 0);
        let n = read_some(reader, &mut head[start..])?;
        head.truncate(start + n);
        let body = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&head);
        let first = body.iter().find(|b| !b.is_ascii_whitespace());
        if n == 0 || first.is_some() || head.len() >= READ_BLOCK {
            break;
        }
    }
    let body = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&head);
    let may_be_request = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    if may_be_request {
        reader.read_to_end(&mut head)?;
        return Ok(count_bytes(&head, family, exact));
    }
    count_read(reader, &head, family, exact)
}

/// The count of `head` followed by the rest of `reader`, read and counted a block at a time:
/// estimated, or exactly (`--exact`) in memory bounded by the longest line.
fn count_read(reader: &mut impl Read, head: &[u8], family: Family, exact: bool) -> io::Result<u64> {
    if exact {
        let mut counter = ExactCounter::new(family).map_err(io::Error::other)?;
        feed_blocks(reader, head, |bytes| counter.feed(bytes))?;
        return Ok(counter.count());
    }
    let mut estimator = TextEstimator::new(family);
    feed_blocks(reader, head, |bytes| estimator.feed(bytes))?;
    Ok(estimator.estimate())
}

/// Hands `head`, then the rest of `reader` a block at a time, to `feed`.
fn feed_blocks(reader: &mut impl Read, head: &[u8], mut feed: impl FnMut(&[u8])) -> io::Result<()> {
    feed(head);
    let mut block = vec![0; READ_BLOCK];
    loop {
        match read_some(reader, &mut block)? {
            0 => return Ok(()),
            n => feed(&block[..n]),
        }
    }
}

/// One read, retried when interrupted by a signal.
fn read_some(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match reader.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}

/// Counts an input read whole: as a request when it holds one, else as text.
fn count_bytes(bytes: &[u8], family: Family, exact: bool) -> u64 {
    let exact_text = |text: &str| count_exact(text, family).unwrap_or(0);
    if let Some(body) = as_request(bytes) {
        let counter = if exact {
            TextCounter::with(family, &exact_text)
        } else {
            TextCounter::estimate(family)
        };
        return count_request_body(&body, &counter).total();
    }
    if exact {
        exact_text(&String::from_utf8_lossy(bytes))
    } else {
        estimate_bytes(bytes, family)
    }
}

/// The file as a request body, if it is one: a Messages or Chat body (a `messages` array) or an
/// OpenAI Responses body (an `input` array or string).
fn as_request(bytes: &[u8]) -> Option<Value> {
    // Editors on Windows save JSON with a byte-order mark, which serde_json refuses; counted as
    // text instead, the request's base64 images would be estimated from their length.
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    // Parsed as every binding parses JSON text to count: a lone surrogate escape (what
    // `JSON.stringify` writes for a string cut inside an emoji), which serde_json refuses,
    // reads as U+FFFD, so the request is not counted as text, base64 images and all.
    let text = std::str::from_utf8(bytes).ok()?;
    let value = parse_json_for_counting(text).ok()?;
    let is_request = match (value.get("messages"), value.get("input")) {
        (Some(messages), _) => messages.is_array(),
        (None, Some(input)) => input.is_array() || input.is_string(),
        (None, None) => false,
    };
    is_request.then_some(value)
}
