//! `grep`: regex search over the workspace with ripgrep's engine, honouring `.gitignore`.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use grep_matcher::{LineTerminator, Matcher as _};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
use ignore::overrides::{Override, OverrideBuilder};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::output::truncate_line;
use super::walk::{ENTRIES_PER_CANCEL_CHECK, walker, walker_keeping, without_leading_dot_slash};
use super::{ToolFailure, Workspace, parse_input, run_blocking};

/// Limits of the `grep` tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrepLimits {
    /// Results when the call gives no `max_results` (default 100): matching lines in `content`
    /// mode, files in the other modes.
    pub default_max_results: usize,
    /// Characters kept of one printed line (default 500).
    pub max_line_chars: usize,
    /// Bytes of output after which the search stops with a note (default 40 KiB: with the
    /// one line that may follow, the result stays under the executor's default per-result
    /// limit of 50,000 characters, so it is never replaced by a spill file `read` cannot open).
    pub max_output_bytes: usize,
}

impl Default for GrepLimits {
    fn default() -> Self {
        Self {
            default_max_results: 100,
            max_line_chars: 500,
            max_output_bytes: 40 * 1024,
        }
    }
}

/// Searches file contents by regular expression. Concurrency-safe.
#[derive(Debug, Clone)]
pub struct GrepTool {
    workspace: Workspace,
    limits: GrepLimits,
    /// Built from the limits once, so the model is told the numbers that actually apply.
    description: Arc<str>,
}

/// What `grep` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum OutputMode {
    /// `path:line:text` for matches, `path-line-text` for context, `--` between groups.
    Content,
    /// One path per file with at least one match.
    FilesWithMatches,
    /// `path:count` of matching lines per file.
    Count,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GrepInput {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    glob: Option<String>,
    #[serde(default)]
    output_mode: Option<OutputMode>,
    #[serde(default)]
    case_insensitive: bool,
    #[serde(default)]
    context: Option<usize>,
    #[serde(default)]
    max_results: Option<usize>,
}

impl GrepTool {
    /// The tool's name.
    pub const NAME: &'static str = "grep";

    /// A `grep` tool confined to `workspace`, with default limits.
    pub fn new(workspace: Workspace) -> Self {
        Self::with_limits(workspace, GrepLimits::default())
    }

    /// A `grep` tool with explicit limits.
    pub fn with_limits(workspace: Workspace, limits: GrepLimits) -> Self {
        let description = format!(
            "Search file contents with a regular expression (Rust regex syntax, like ripgrep). \
             Searches `path` (a file or directory, default: the workspace root) recursively, \
             skipping files ignored by .gitignore, the .git directory and binary files. \
             `glob` filters files (e.g. `*.rs`, `src/**/*.ts`; a glob with a `/` may be written \
             from the workspace root or from `path`). `output_mode`: \
             `files_with_matches` (default: matching file paths), `content` (matching lines as \
             `path:line:text`, with `context` lines around each as `path-line-text`), or `count` \
             (`path:count`); a printed line longer than {} characters is cut, around the first \
             match on a matching line. `case_insensitive` ignores case. At most {} results (lines in \
             content mode, files otherwise) unless `max_results` says otherwise; files in path \
             order.",
            limits.max_line_chars, limits.default_max_results
        );
        Self {
            workspace,
            limits,
            description: description.into(),
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
                "pattern": {"type": "string", "description": "The regular expression to search for."},
                "path": {"type": "string", "description": "The file or directory to search (default: the workspace root)."},
                "glob": {"type": "string", "description": "Only search files matching this glob, e.g. `*.rs`."},
                "output_mode": {"type": "string", "enum": ["content", "files_with_matches", "count"], "description": "What to print (default files_with_matches)."},
                "case_insensitive": {"type": "boolean", "default": false, "description": "Match regardless of case."},
                "context": {"type": "integer", "minimum": 0, "description": "Lines of context before and after each match (content mode)."},
                "max_results": {"type": "integer", "minimum": 1, "description": format!("The most results to return (default {}).", self.limits.default_max_results)}
            },
            "required": ["pattern"],
            "additionalProperties": false
        })
    }

    /// Runs the tool.
    pub async fn call(
        &self,
        input: Value,
        cancel: CancellationToken,
    ) -> Result<String, ToolFailure> {
        let input: GrepInput = parse_input(Self::NAME, || self.input_schema(), input)?;
        let mode = input.output_mode.unwrap_or(OutputMode::FilesWithMatches);
        let max_results = match input.max_results {
            Some(0) => {
                return Err(ToolFailure::InvalidInput(
                    "max_results must be at least 1".into(),
                ));
            }
            Some(max) => max,
            None => self.limits.default_max_results,
        };
        check_pattern(&input.pattern, input.case_insensitive)?;
        let build = |pattern: &str| {
            RegexMatcherBuilder::new()
                .case_insensitive(input.case_insensitive)
                // ripgrep's `--crlf` (with its always-on `multi_line`, so `^`/`$` are line
                // anchors): `$` also matches before `\r\n` and a match never takes the `\r`, so
                // anchored patterns work on CRLF files as the model sees them in `read`.
                .multi_line(true)
                .crlf(true)
                .build(pattern)
        };
        // The pattern parses alone (checked above), so a failure here may be grep-regex's
        // wrapping group closing inside a verbose-mode (`(?x)`) comment the pattern ends with.
        // A line break ends the comment and, in verbose mode, is whitespace: it changes nothing
        // else. Outside verbose mode it would be a literal line break, which grep-regex refuses,
        // and the first error stands.
        let matcher = build(&input.pattern)
            .or_else(|error| build(&format!("{}\n", input.pattern)).map_err(|_| error))
            .map_err(invalid_regex)?;
        let context = if mode == OutputMode::Content {
            input.context.unwrap_or(0)
        } else {
            0
        };
        let searcher = SearcherBuilder::new()
            .line_terminator(LineTerminator::crlf())
            .line_number(true)
            .before_context(context)
            .after_context(context)
            .binary_detection(BinaryDetection::quit(0))
            .build();
        let shown_base = input.path.unwrap_or_else(|| ".".to_owned());
        let base = self.workspace.resolve(&shown_base)?;
        let overrides = match &input.glob {
            None => None,
            Some(glob) => Some(glob_filter(&self.workspace, &base, glob)?),
        };
        let search = Search {
            workspace: self.workspace.clone(),
            limits: self.limits,
            mode,
            max_results,
            context,
            cancel: cancel.clone(),
            base: base.clone(),
        };
        run_blocking(&cancel, move || {
            std::fs::metadata(&base)
                .map_err(|error| ToolFailure::io("search", &shown_base, error))?;
            // The glob only narrows the walk. Handed to the walker as overrides (as ripgrep
            // does with `-g`) a glob that matches an ignored file or directory (`*`, `*.rs`)
            // would whitelist it past `.gitignore`, and the search would go through `target/`
            // or `node_modules/` although the tool promises to skip ignored files.
            let walk = match overrides {
                None => walker(&search.workspace, &base),
                Some(overrides) => walker_keeping(&search.workspace, &base, move |entry| {
                    let is_dir = entry.file_type().is_some_and(|kind| kind.is_dir());
                    !overrides.matched(entry.path(), is_dir).is_ignore()
                }),
            };
            search.run(walk.build(), &matcher, searcher)
        })
        .await
    }
}

/// Parses `pattern` alone, with the settings the matcher is built with. grep-regex parses every
/// pattern wrapped in a group, `(?:` and `)`: its syntax errors quote that wrapped pattern, one
/// the model never wrote, with the caret under the wrong character, and a pattern unbalanced on
/// its own (`a)|(b`) comes out balanced and is searched with a meaning nobody wrote. Parsed
/// here first, an invalid pattern is refused quoting it as given, with the parser's explanation.
fn check_pattern(pattern: &str, case_insensitive: bool) -> Result<(), ToolFailure> {
    regex_syntax::ParserBuilder::new()
        // As grep-regex sets them: a pattern may match bytes that are not UTF-8.
        .utf8(false)
        .case_insensitive(case_insensitive)
        .multi_line(true)
        .crlf(true)
        .build()
        .parse(pattern)
        .map(drop)
        .map_err(|error| ToolFailure::InvalidInput(format!("invalid regex: {error}")))
}

/// The failure for a pattern grep-regex refuses although it parses.
fn invalid_regex(error: grep_regex::Error) -> ToolFailure {
    match error.kind() {
        // Its own words ("the literal \"\\n\" is not allowed in a regex") do not say why:
        // lines are searched one at a time, so a line break can never be part of a match.
        grep_regex::ErrorKind::NotAllowed(_) => ToolFailure::InvalidInput(
            "invalid regex: it matches a line break (\\n), and grep searches one line at a time; \
             search for text within a single line"
                .to_owned(),
        ),
        _ => ToolFailure::InvalidInput(format!("invalid regex: {error}")),
    }
}

/// The `glob` filter as ripgrep's override globs (gitignore syntax; a leading `!` negates).
///
/// ripgrep roots them at its working directory, which for a model is the workspace root, so
/// `path: "src", glob: "src/**/*.ts"` finds files; a glob written from the searched directory
/// (`app/*.ts` under `src`) is also honoured. Only an anchored glob (one with a `/` before its
/// end) can differ between the two readings; an unanchored one (`*.rs`) matches at any depth.
/// A leading `./` is dropped (after a `!` too).
fn glob_filter(workspace: &Workspace, base: &Path, glob: &str) -> Result<Override, ToolFailure> {
    // ignore's text quotes the glob as rewritten here (no `./`, a prefix added): only what is
    // wrong is kept, after the glob as the model wrote it.
    let invalid = |error: ignore::Error| {
        let problem = match error {
            ignore::Error::Glob { err, .. } => err,
            other => other.to_string(),
        };
        ToolFailure::invalid_glob(glob, problem)
    };
    let (bang, pattern) = match glob.strip_prefix('!') {
        Some(negated) => ("!", without_leading_dot_slash(negated)),
        None => ("", without_leading_dot_slash(glob)),
    };
    let mut builder = OverrideBuilder::new(workspace.root());
    builder.add(&format!("{bang}{pattern}")).map_err(invalid)?;
    let anchored = pattern.trim_end_matches('/').contains('/');
    let from_base = base
        .strip_prefix(workspace.root())
        .ok()
        .filter(|relative| !relative.as_os_str().is_empty());
    if let Some(relative) = from_base.filter(|_| anchored) {
        let prefix = escape_glob(&relative.to_string_lossy());
        let rest = pattern.trim_start_matches('/');
        builder
            .add(&format!("{bang}{prefix}/{rest}"))
            .map_err(invalid)?;
    }
    builder.build().map_err(invalid)
}

/// `path` as a glob matching exactly itself: every character a glob or a gitignore line
/// gives a meaning to is escaped with a backslash.
fn escape_glob(path: &str) -> String {
    let mut escaped = String::with_capacity(path.len());
    for c in path.chars() {
        if matches!(c, '\\' | '*' | '?' | '[' | ']' | '{' | '}' | '!' | '#') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// One search: its settings and the output being built.
struct Search {
    workspace: Workspace,
    limits: GrepLimits,
    mode: OutputMode,
    max_results: usize,
    context: usize,
    cancel: CancellationToken,
    /// What `path` resolved to: a file named there is reported even when nothing matched.
    base: PathBuf,
}

/// Output and counters across files.
struct Progress {
    out: String,
    results: usize,
    truncated: bool,
}

impl Search {
    fn run(
        &self,
        walk: ignore::Walk,
        matcher: &RegexMatcher,
        mut searcher: Searcher,
    ) -> Result<String, ToolFailure> {
        let mut progress = Progress {
            out: String::new(),
            results: 0,
            truncated: false,
        };
        for (index, entry) in walk.enumerate() {
            if index % ENTRIES_PER_CANCEL_CHECK == 0 && self.cancel.is_cancelled() {
                return Err(ToolFailure::Cancelled);
            }
            let entry = match entry {
                Ok(entry) => entry,
                Err(error) => {
                    tracing::debug!(%error, "grep: skipping an unreadable entry");
                    continue;
                }
            };
            // Regular files only: a symbolic link may point outside the workspace.
            if !entry.file_type().is_some_and(|kind| kind.is_file()) {
                continue;
            }
            self.search_file(entry.path(), matcher, &mut searcher, &mut progress);
            if self.cancel.is_cancelled() {
                return Err(ToolFailure::Cancelled);
            }
            if progress.truncated {
                break;
            }
        }
        let mut out = progress.out;
        if out.is_empty() {
            return Ok("No matches found".to_owned());
        }
        if progress.truncated {
            let _ = writeln!(
                out,
                "[results truncated at {} {}; narrow the search with path, glob or a more specific pattern]",
                progress.results,
                if self.mode == OutputMode::Content {
                    "matching lines"
                } else {
                    "files"
                }
            );
        }
        Ok(out)
    }

    fn search_file(
        &self,
        path: &Path,
        matcher: &RegexMatcher,
        searcher: &mut Searcher,
        progress: &mut Progress,
    ) {
        let shown = self.workspace.display_relative(path);
        let mut sink = FileSink {
            search: self,
            matcher,
            shown: &shown,
            progress,
            matched_lines: 0,
            printed_in_file: false,
            binary_offset: None,
            pending_before: VecDeque::new(),
            pending_bytes: 0,
            dropped_before: false,
        };
        if let Err(error) = searcher.search_path(matcher, path, &mut sink) {
            tracing::debug!(%error, path = %shown, "grep: skipping an unreadable file");
        }
        let matched_lines = sink.matched_lines;
        let binary_offset = sink.binary_offset;
        // Like ripgrep, a file stops being searched at its first NUL byte (the text before it,
        // back to the start of the buffer, is dropped too). Binary files met during a walk are
        // skipped silently; but a file that did match, or that was named by `path`, gets a note
        // so that a partial count or a silent "no matches" is not taken as the whole truth.
        let binary_note = binary_offset
            .filter(|_| matched_lines > 0 || path == self.base)
            .map(|offset| {
                format!(
                    "[{shown}: binary file (a NUL byte at byte {offset}); searching it stopped there, so matches may be missing]\n"
                )
            });
        if matched_lines == 0 || self.mode == OutputMode::Content {
            if let Some(note) = binary_note {
                progress.out.push_str(&note);
            }
            return;
        }
        if self.is_full(progress) {
            progress.truncated = true;
            return;
        }
        if self.mode == OutputMode::Count {
            let _ = writeln!(progress.out, "{shown}:{matched_lines}");
        } else {
            progress.out.push_str(&shown);
            progress.out.push('\n');
        }
        if let Some(note) = binary_note {
            progress.out.push_str(&note);
        }
        progress.results += 1;
    }

    /// Whether no further result may be added: the result count or the output size is reached.
    fn is_full(&self, progress: &Progress) -> bool {
        progress.results >= self.max_results || progress.out.len() >= self.limits.max_output_bytes
    }
}

/// Receives one file's matches from the searcher.
struct FileSink<'a> {
    search: &'a Search,
    /// To find where on a long line the match is, so that the kept part shows it.
    matcher: &'a RegexMatcher,
    shown: &'a str,
    progress: &'a mut Progress,
    matched_lines: u64,
    printed_in_file: bool,
    /// Where binary data stopped the search, if it did.
    binary_offset: Option<u64>,
    /// Before-context lines of the coming match, held back so that they can never crowd the
    /// match itself out of the capped output: they may use half the room left, and the
    /// farthest from the match are dropped first.
    pending_before: VecDeque<String>,
    pending_bytes: usize,
    /// Whether lines were dropped from `pending_before` (the group then starts with `--`).
    dropped_before: bool,
}

impl FileSink<'_> {
    /// One output line: `path:number:text` for a match, `path-number-text` for context.
    fn render_line(&self, separator: char, line_number: Option<u64>, bytes: &[u8]) -> String {
        let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        let max_chars = self.search.limits.max_line_chars;
        let text = String::from_utf8_lossy(bytes);
        // On a long matching line, keep the part around the first match rather than the start,
        // which may not contain it (minified files are one line).
        let skipped = if separator == ':' && text.len() > max_chars {
            self.chars_to_skip(bytes, max_chars)
        } else {
            0
        };
        let text = match skipped {
            0 => text,
            skipped => {
                let start = text
                    .char_indices()
                    .nth(skipped)
                    .map_or(text.len(), |(at, _)| at);
                Cow::Owned(text[start..].to_owned())
            }
        };
        let text = truncate_line(&text, max_chars, 0);
        let mut line = String::with_capacity(self.shown.len() + text.len() + 16);
        line.push_str(self.shown);
        line.push(separator);
        if let Some(number) = line_number {
            let _ = write!(line, "{number}{separator}");
        }
        if skipped > 0 {
            let _ = write!(line, "[{skipped} characters omitted] …");
        }
        line.push_str(&text);
        line.push('\n');
        line
    }

    /// How many leading characters of a matching line to leave out so that its first match
    /// shows in the `max_chars` kept, a quarter of them before it: 0 when the match already
    /// ends within them from the start.
    fn chars_to_skip(&self, line: &[u8], max_chars: usize) -> usize {
        let Ok(Some(found)) = self.matcher.find(line) else {
            return 0;
        };
        let chars_before = |end: usize| String::from_utf8_lossy(&line[..end]).chars().count();
        if chars_before(found.end()) <= max_chars {
            return 0;
        }
        chars_before(found.start()).saturating_sub(max_chars / 4)
    }

    fn emit(&mut self, line: &str) {
        let out = &mut self.progress.out;
        if !self.printed_in_file {
            // Groups of different files are separated like ripgrep does when context is on.
            if self.search.context > 0 && !out.is_empty() {
                out.push_str("--\n");
            }
            self.printed_in_file = true;
        } else if self.dropped_before && !out.ends_with("--\n") {
            // Lines between the previous group and this one were left out.
            out.push_str("--\n");
        }
        self.dropped_before = false;
        out.push_str(line);
    }

    /// Prints the held-back before-context lines of the match about to be printed.
    fn flush_before(&mut self) {
        let pending = std::mem::take(&mut self.pending_before);
        for line in &pending {
            self.emit(line);
        }
        self.pending_bytes = 0;
    }
}

impl Sink for FileSink<'_> {
    type Error = std::io::Error;

    fn matched(
        &mut self,
        _searcher: &Searcher,
        found: &SinkMatch<'_>,
    ) -> Result<bool, Self::Error> {
        self.matched_lines += 1;
        match self.search.mode {
            // One match is enough to list the file.
            OutputMode::FilesWithMatches => Ok(false),
            OutputMode::Count => Ok(!self.search.cancel.is_cancelled()),
            OutputMode::Content => {
                if self.search.is_full(self.progress) {
                    // Only now is it known that results were left out.
                    self.progress.truncated = true;
                    return Ok(false);
                }
                self.flush_before();
                let line = self.render_line(':', found.line_number(), found.bytes());
                self.emit(&line);
                self.progress.results += 1;
                Ok(!self.search.cancel.is_cancelled())
            }
        }
    }

    fn context(
        &mut self,
        _searcher: &Searcher,
        context: &SinkContext<'_>,
    ) -> Result<bool, Self::Error> {
        if self.search.mode != OutputMode::Content {
            return Ok(!self.search.cancel.is_cancelled());
        }
        let cap = self.search.limits.max_output_bytes;
        let line = self.render_line('-', context.line_number(), context.bytes());
        if *context.kind() == SinkContextKind::Before {
            let room = cap.saturating_sub(self.progress.out.len()) / 2;
            self.pending_bytes += line.len();
            self.pending_before.push_back(line);
            while self.pending_bytes > room {
                let Some(dropped) = self.pending_before.pop_front() else {
                    break;
                };
                self.pending_bytes -= dropped.len();
                self.dropped_before = true;
            }
        } else {
            // After-context counts toward the output cap like matches do: a large `context`
            // would otherwise print whole files past it.
            if self.progress.out.len() >= cap {
                self.progress.truncated = true;
                return Ok(false);
            }
            self.emit(&line);
        }
        Ok(!self.search.cancel.is_cancelled())
    }

    fn binary_data(
        &mut self,
        _searcher: &Searcher,
        binary_byte_offset: u64,
    ) -> Result<bool, Self::Error> {
        self.binary_offset = Some(binary_byte_offset);
        Ok(false)
    }

    fn context_break(&mut self, _searcher: &Searcher) -> Result<bool, Self::Error> {
        if self.search.mode == OutputMode::Content {
            self.progress.out.push_str("--\n");
        }
        Ok(true)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn tree() -> (tempfile::TempDir, GrepTool) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let files: [(&str, &[u8]); 6] = [
            ("src/a.rs", b"fn alpha() {}\n// TODO: one\nfn beta() {}\n"),
            ("src/b.rs", b"let x = 1;\nlet todo = 2;\n"),
            ("notes.md", b"TODO: write docs\n"),
            ("target/out.rs", b"// TODO: generated\n"),
            ("blob.bin", b"TODO\0binary"),
            (
                "ctx.txt",
                b"l1\nl2\nneedle 3\nl4\nl5\nl6\nl7\nneedle 8\nl9\n",
            ),
        ];
        for (path, content) in files {
            let full = root.join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(&full, content).unwrap();
        }
        std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
        std::fs::write(root.join("outside.txt"), "unused").unwrap();
        let workspace = Workspace::new(root).unwrap();
        (dir, GrepTool::new(workspace))
    }

    async fn call(tool: &GrepTool, input: Value) -> Result<String, ToolFailure> {
        tool.call(input, CancellationToken::new()).await
    }

    #[tokio::test]
    async fn files_with_matches_honours_gitignore_and_skips_binary_files() {
        let (_dir, tool) = tree();
        let out = call(&tool, json!({"pattern": "TODO"})).await.unwrap();
        assert_eq!(out, "notes.md\nsrc/a.rs\n");
    }

    #[tokio::test]
    async fn case_insensitive_and_count_modes() {
        let (_dir, tool) = tree();
        let out = call(
            &tool,
            json!({"pattern": "todo", "case_insensitive": true, "output_mode": "count"}),
        )
        .await
        .unwrap();
        assert_eq!(out, "notes.md:1\nsrc/a.rs:1\nsrc/b.rs:1\n");
        let out = call(&tool, json!({"pattern": "let", "output_mode": "count"}))
            .await
            .unwrap();
        assert_eq!(out, "src/b.rs:2\n");
    }

    #[tokio::test]
    async fn content_mode_prints_lines_and_context_groups() {
        let (_dir, tool) = tree();
        let out = call(
            &tool,
            json!({"pattern": "^fn", "output_mode": "content", "path": "src"}),
        )
        .await
        .unwrap();
        assert_eq!(out, "src/a.rs:1:fn alpha() {}\nsrc/a.rs:3:fn beta() {}\n");
        let out = call(
            &tool,
            json!({"pattern": "needle", "output_mode": "content", "context": 1, "path": "ctx.txt"}),
        )
        .await
        .unwrap();
        assert_eq!(
            out,
            "ctx.txt-2-l2\nctx.txt:3:needle 3\nctx.txt-4-l4\n--\nctx.txt-7-l7\nctx.txt:8:needle 8\nctx.txt-9-l9\n"
        );
    }

    #[tokio::test]
    async fn glob_filter_and_max_results() {
        let (_dir, tool) = tree();
        let out = call(&tool, json!({"pattern": "TODO|todo", "glob": "*.rs"}))
            .await
            .unwrap();
        assert_eq!(out, "src/a.rs\nsrc/b.rs\n");
        let out = call(
            &tool,
            json!({"pattern": "l\\d", "output_mode": "content", "max_results": 2, "path": "ctx.txt"}),
        )
        .await
        .unwrap();
        assert_eq!(
            out,
            "ctx.txt:1:l1\nctx.txt:2:l2\n[results truncated at 2 matching lines; narrow the search with path, glob or a more specific pattern]\n"
        );
        let none = call(&tool, json!({"pattern": "no such text"}))
            .await
            .unwrap();
        assert_eq!(none, "No matches found");
    }

    #[tokio::test]
    async fn a_glob_filter_does_not_bring_back_ignored_files() {
        // The glob narrows the search; it must not let `.gitignore`d files and directories in
        // (ripgrep's override globs, used as such, would whitelist whatever they match).
        let (dir, tool) = tree();
        std::fs::write(dir.path().join("gen.rs"), "// TODO: generated too\n").unwrap();
        let gitignore = dir.path().join(".gitignore");
        std::fs::write(&gitignore, "target/\ngen.rs\n").unwrap();
        for glob in ["*.rs", "*", "**", "target/**"] {
            let out = call(&tool, json!({"pattern": "TODO", "glob": glob}))
                .await
                .unwrap();
            assert!(
                !out.contains("target/") && !out.contains("gen.rs"),
                "{glob}: {out}"
            );
        }
        let out = call(&tool, json!({"pattern": "TODO", "glob": "*.rs"}))
            .await
            .unwrap();
        assert_eq!(out, "src/a.rs\n");
        // A negated glob still prunes what it names, directories included.
        let out = call(&tool, json!({"pattern": "TODO|todo", "glob": "!src/"}))
            .await
            .unwrap();
        assert_eq!(out, "notes.md\n");
    }

    /// Writes `text` to `file` and greps it in content mode with `context` lines around each
    /// match, the output capped at `cap` bytes.
    async fn grep_capped(
        dir: &tempfile::TempDir,
        file: &str,
        text: &str,
        cap: usize,
        pattern: &str,
        context: usize,
    ) -> String {
        std::fs::write(dir.path().join(file), text).unwrap();
        let limits = GrepLimits {
            max_output_bytes: cap,
            ..GrepLimits::default()
        };
        let tool = GrepTool::with_limits(Workspace::new(dir.path()).unwrap(), limits);
        let input = json!({"pattern": pattern, "output_mode": "content", "context": context});
        call(&tool, input).await.unwrap()
    }

    #[tokio::test]
    async fn context_lines_cannot_push_the_output_past_its_cap() {
        let dir = tempfile::tempdir().unwrap();
        let mut text: String = (1..=5_000).map(|i| format!("line {i}\n")).collect();
        text.push_str("needle\n");
        text.extend((1..=5_000).map(|i| format!("after {i}\n")));
        let out = grep_capped(&dir, "big.log", &text, 2_000, "needle", 1_000_000).await;
        // Cut where the cap is reached: a few lines over it at most, and said so; the match
        // is shown with the before-context nearest to it, whatever the context asked for.
        assert!(out.len() < 2_000 + 200, "{} bytes", out.len());
        assert!(
            out.starts_with("big.log-") && !out.starts_with("big.log-1-"),
            "{out}"
        );
        assert!(
            out.contains("big.log-5000-line 5000\nbig.log:5001:needle\nbig.log-5002-after 1\n"),
            "{out}"
        );
        assert!(
            out.ends_with("narrow the search with path, glob or a more specific pattern]\n"),
            "{out}"
        );
    }

    #[tokio::test]
    async fn before_context_cut_for_room_is_marked_as_a_gap() {
        let dir = tempfile::tempdir().unwrap();
        let text: String = (1..=40)
            .map(|i| {
                if i == 1 || i == 21 {
                    "hit\n".to_owned()
                } else {
                    format!("l{i:02}\n")
                }
            })
            .collect();
        let out = grep_capped(&dir, "f.txt", &text, 300, "hit", 10).await;
        // Lines 2-11 follow the first hit; of 12-20, only the nearest to the second hit fit.
        assert!(out.starts_with("f.txt:1:hit\nf.txt-2-l02\n"), "{out}");
        assert!(out.contains("f.txt-11-l11\n--\n"), "{out}");
        assert!(!out.contains("f.txt-12-"), "{out}");
        assert!(out.contains("f.txt-20-l20\nf.txt:21:hit\n"), "{out}");
    }

    #[tokio::test]
    async fn a_match_whose_whole_before_context_was_dropped_still_shows_the_gap() {
        let dir = tempfile::tempdir().unwrap();
        let long = "y".repeat(80);
        let text: String = (1..=30)
            .map(|i| match i {
                1 | 21 => "hit\n".to_owned(),
                12..=20 => format!("{long}\n"),
                _ => format!("l{i:02}\n"),
            })
            .collect();
        let out = grep_capped(&dir, "f.txt", &text, 300, "hit", 10).await;
        assert!(out.contains("f.txt-11-l11\n--\nf.txt:21:hit\n"), "{out}");
    }

    #[tokio::test]
    async fn a_match_far_into_a_long_line_is_shown_with_its_surroundings() {
        // Minified files: a match past the kept characters would otherwise be cut away, and
        // `read` cuts long lines too, so the model could never see it.
        let dir = tempfile::tempdir().unwrap();
        let line = format!(
            "{}NEEDLE{}\nshort NEEDLE\n",
            "a".repeat(3_000),
            "é".repeat(3_000)
        );
        std::fs::write(dir.path().join("min.js"), line).unwrap();
        let limits = GrepLimits {
            max_line_chars: 100,
            ..GrepLimits::default()
        };
        let tool = GrepTool::with_limits(Workspace::new(dir.path()).unwrap(), limits);
        let out = call(
            &tool,
            json!({"pattern": "NEEDLE", "output_mode": "content"}),
        )
        .await
        .unwrap();
        assert_eq!(
            out,
            format!(
                "min.js:1:[2975 characters omitted] …{}NEEDLE{}… [line truncated: 2931 more characters]\nmin.js:2:short NEEDLE\n",
                "a".repeat(25),
                "é".repeat(69)
            )
        );
    }

    #[tokio::test]
    async fn escapes_and_bad_patterns_are_refused() {
        let (dir, tool) = tree();
        std::os::unix::fs::symlink("/etc", dir.path().join("etc_link")).unwrap();
        for path in ["..", "/etc", "etc_link"] {
            let failure = call(&tool, json!({"pattern": "root", "path": path}))
                .await
                .unwrap_err();
            assert!(
                matches!(failure, ToolFailure::OutsideWorkspace { .. }),
                "{path}"
            );
        }
        // The symlinked directory is not followed by a search of the root either.
        let out = call(&tool, json!({"pattern": "root"})).await.unwrap();
        assert_eq!(out, "No matches found");
        let failure = call(&tool, json!({"pattern": "("})).await.unwrap_err();
        assert!(
            failure
                .to_string()
                .starts_with("Invalid input: invalid regex"),
            "{failure}"
        );
        let failure = call(&tool, json!({"pattern": "x", "output_mode": "lines"}))
            .await
            .unwrap_err();
        assert!(matches!(failure, ToolFailure::InvalidInput(_)));
    }

    /// A verbose-mode pattern may end in a comment. grep-regex's wrapping group then closes
    /// inside the comment: the pattern must still be searched, not refused as unbalanced.
    #[tokio::test]
    async fn a_verbose_pattern_ending_in_a_comment_is_searched() {
        let (_dir, tool) = tree();
        let out = call(
            &tool,
            json!({"pattern": "(?x) nee dle \\s 8  # the second one", "output_mode": "content"}),
        )
        .await
        .unwrap();
        assert_eq!(out, "ctx.txt:8:needle 8\n");
    }

    /// grep-regex's "the literal \"\\n\" is not allowed in a regex" does not say why: a
    /// model that wrote a line break meant to match across lines, which grep does not do.
    #[tokio::test]
    async fn a_pattern_with_a_line_break_is_refused_saying_why() {
        let (_dir, tool) = tree();
        for pattern in ["needle 3\\nl4", "needle 3\nl4", "(?s)needle.*\\n"] {
            let failure = call(&tool, json!({"pattern": pattern})).await.unwrap_err();
            assert_eq!(
                failure.to_string(),
                "Invalid input: invalid regex: it matches a line break (\\n), and grep searches \
                 one line at a time; search for text within a single line",
                "{pattern}"
            );
        }
    }

    /// The model must see its own pattern in the error, with the caret under the offending
    /// character, not the group grep-regex wraps every pattern in before parsing it.
    #[tokio::test]
    async fn an_invalid_regex_is_shown_as_written() {
        let (_dir, tool) = tree();
        let failure = call(&tool, json!({"pattern": "fo(o"})).await.unwrap_err();
        assert_eq!(
            failure.to_string(),
            "Invalid input: invalid regex: regex parse error:\n    fo(o\n      ^\nerror: unclosed group"
        );
        let failure = call(&tool, json!({"pattern": r"\p{Nope}x"}))
            .await
            .unwrap_err();
        let message = failure.to_string();
        assert!(message.contains("\n    \\p{Nope}x\n"), "{message}");
        assert!(message.contains("Unicode property not found"), "{message}");
        assert!(!message.contains("(?:"), "{message}");
        // Unbalanced alone, balanced once wrapped: the pattern is refused rather than searched
        // with a meaning the model did not write.
        let failure = call(&tool, json!({"pattern": "a)|(b"})).await.unwrap_err();
        let message = failure.to_string();
        assert!(message.contains("\n    a)|(b\n"), "{message}");
        assert!(message.contains("unopened group"), "{message}");
    }
}
