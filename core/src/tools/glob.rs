//! `glob`: find files by glob pattern, newest first, honouring `.gitignore`.

use std::path::Path;
use std::time::SystemTime;

use globset::GlobBuilder;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::walk::{ENTRIES_PER_CANCEL_CHECK, walker, without_leading_dot_slash};
use super::{ToolFailure, Workspace, parse_input, run_blocking};

/// Paths returned when the call gives no `max_results`.
const DEFAULT_MAX_RESULTS: usize = 100;

/// Bytes of paths returned at most, whatever `max_results` says: the result stays under the
/// executor's default per-result limit (50,000 characters), so it is never replaced by a spill
/// file outside the workspace, which `read` cannot open.
const MAX_OUTPUT_BYTES: usize = 40 * 1024;

/// Finds files by glob pattern. Concurrency-safe.
#[derive(Debug, Clone)]
pub struct GlobTool {
    workspace: Workspace,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GlobInput {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    max_results: Option<usize>,
}

impl GlobTool {
    /// The tool's name.
    pub const NAME: &'static str = "glob";

    /// A `glob` tool confined to `workspace`.
    pub fn new(workspace: Workspace) -> Self {
        Self { workspace }
    }

    /// The description shown to the model.
    pub fn description(&self) -> &'static str {
        "Find files whose path matches a glob pattern, such as `**/*.rs` or `src/**/mod.rs`. \
         The pattern is matched against paths relative to `path` (default: the workspace root); \
         `*` does not cross `/`, `**` matches any number of directories, `{a,b}` alternates. \
         Files ignored by .gitignore and the .git directory are skipped; symbolic links are not \
         listed. Returns workspace-relative paths, most recently modified first, at most 100 \
         unless `max_results` says otherwise (and at most 40 KiB of them)."
    }

    /// The JSON schema of the input.
    pub fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "The glob pattern, relative to `path`."},
                "path": {"type": "string", "description": "The directory to search in (default: the workspace root)."},
                "max_results": {"type": "integer", "minimum": 1, "description": "The most paths to return (default 100)."}
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
        let mut input: GlobInput = parse_input(Self::NAME, || self.input_schema(), input)?;
        // Errors quote the pattern as the model wrote it, not as rewritten here.
        let written = input.pattern.clone();
        input.pattern = without_leading_dot_slash(&input.pattern).to_owned();
        if Path::new(&input.pattern).is_absolute() {
            return Err(ToolFailure::InvalidInput(
                "the pattern must be relative; set `path` to choose the directory to search".into(),
            ));
        }
        if input.pattern.split('/').any(|part| part == "..") {
            return Err(ToolFailure::InvalidInput(
                "the pattern cannot contain '..'; set `path` to choose the directory to search"
                    .into(),
            ));
        }
        let max_results = match input.max_results {
            Some(0) => {
                return Err(ToolFailure::InvalidInput(
                    "max_results must be at least 1".into(),
                ));
            }
            Some(max) => max,
            None => DEFAULT_MAX_RESULTS,
        };
        let matcher = GlobBuilder::new(&input.pattern)
            .literal_separator(true)
            .build()
            // The error's own text quotes the rewritten pattern; its kind says what is wrong.
            .map_err(|error| ToolFailure::invalid_glob(&written, error.kind()))?
            .compile_matcher();
        let shown_base = input.path.unwrap_or_else(|| ".".to_owned());
        let base = self.workspace.resolve(&shown_base)?;
        let workspace = self.workspace.clone();
        let job_cancel = cancel.clone();
        run_blocking(&cancel, move || {
            let metadata = std::fs::metadata(&base)
                .map_err(|error| ToolFailure::io("search", &shown_base, error))?;
            if !metadata.is_dir() {
                return Err(ToolFailure::InvalidInput(format!(
                    "path '{shown_base}' is not a directory"
                )));
            }
            let mut found: Vec<(SystemTime, String)> = Vec::new();
            for (index, entry) in walker(&workspace, &base).build().enumerate() {
                if index % ENTRIES_PER_CANCEL_CHECK == 0 && job_cancel.is_cancelled() {
                    return Err(ToolFailure::Cancelled);
                }
                let Ok(entry) = entry else { continue };
                if !entry.file_type().is_some_and(|kind| kind.is_file()) {
                    continue;
                }
                let Ok(relative) = entry.path().strip_prefix(&base) else {
                    continue;
                };
                if !matcher.is_match(relative) {
                    continue;
                }
                let modified = entry
                    .metadata()
                    .ok()
                    .and_then(|metadata| metadata.modified().ok())
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                found.push((modified, workspace.display_relative(entry.path())));
            }
            Ok(render(found, max_results))
        })
        .await
    }
}

fn render(mut found: Vec<(SystemTime, String)>, max_results: usize) -> String {
    if found.is_empty() {
        return "No files found".to_owned();
    }
    // Newest first; equal times (common after a checkout) by path, so the order is stable.
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let total = found.len();
    let mut out = String::new();
    let mut shown = 0;
    for (_, path) in found.iter().take(max_results) {
        if shown > 0 && out.len() + path.len() + 1 > MAX_OUTPUT_BYTES {
            break;
        }
        out.push_str(path);
        out.push('\n');
        shown += 1;
    }
    if total > shown {
        out.push_str(&format!(
            "[showing {shown} of {total} files; use a more specific pattern or path]\n"
        ));
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::fs::{File, FileTimes};
    use std::time::Duration;

    use super::*;

    fn set_mtime(path: &Path, seconds: u64) {
        let time = SystemTime::UNIX_EPOCH + Duration::from_secs(seconds);
        File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_times(FileTimes::new().set_modified(time))
            .unwrap();
    }

    fn tree() -> (tempfile::TempDir, GlobTool) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for (path, mtime) in [
            ("src/main.rs", 3_000),
            ("src/lib.rs", 1_000),
            ("src/deep/mod.rs", 2_000),
            ("README.md", 4_000),
            ("target/debug/gen.rs", 5_000),
            (".github/ci.rs", 500),
            ("old.rs", 1_000),
        ] {
            let full = root.join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(&full, "x").unwrap();
            set_mtime(&full, mtime);
        }
        std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join(".git/HEAD.rs"), "x").unwrap();
        std::os::unix::fs::symlink("/etc/hostname", root.join("link.rs")).unwrap();
        let workspace = Workspace::new(root).unwrap();
        (dir, GlobTool::new(workspace))
    }

    async fn call(tool: &GlobTool, input: Value) -> Result<String, ToolFailure> {
        tool.call(input, CancellationToken::new()).await
    }

    #[tokio::test]
    async fn recursive_glob_is_newest_first_and_honours_gitignore() {
        let (_dir, tool) = tree();
        let out = call(&tool, json!({"pattern": "**/*.rs"})).await.unwrap();
        // target/ is ignored, .git is skipped, the symlink is not listed; 1,000 s ties by path.
        assert_eq!(
            out,
            "src/main.rs\nsrc/deep/mod.rs\nold.rs\nsrc/lib.rs\n.github/ci.rs\n"
        );
    }

    #[tokio::test]
    async fn star_does_not_cross_directories_and_path_scopes_the_search() {
        let (_dir, tool) = tree();
        assert_eq!(
            call(&tool, json!({"pattern": "*.rs"})).await.unwrap(),
            "old.rs\n"
        );
        let out = call(&tool, json!({"pattern": "*.rs", "path": "src"}))
            .await
            .unwrap();
        assert_eq!(out, "src/main.rs\nsrc/lib.rs\n");
        let none = call(&tool, json!({"pattern": "*.py"})).await.unwrap();
        assert_eq!(none, "No files found");
    }

    #[tokio::test]
    async fn max_results_truncates_with_a_note() {
        let (_dir, tool) = tree();
        let out = call(&tool, json!({"pattern": "**/*.rs", "max_results": 2}))
            .await
            .unwrap();
        assert_eq!(
            out,
            "src/main.rs\nsrc/deep/mod.rs\n[showing 2 of 5 files; use a more specific pattern or path]\n"
        );
    }

    #[tokio::test]
    async fn a_large_max_results_is_still_bounded_in_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let name = "n".repeat(90);
        for i in 0..1_000 {
            std::fs::write(dir.path().join(format!("{name}{i:04}.txt")), "x").unwrap();
        }
        let tool = GlobTool::new(Workspace::new(dir.path()).unwrap());
        let out = call(&tool, json!({"pattern": "*.txt", "max_results": 5_000}))
            .await
            .unwrap();
        // 1,000 paths of 99 bytes would be 99,000 bytes, over the executor's default
        // per-result limit (50,000 characters), whose spill file `read` could not open.
        assert!(out.len() <= MAX_OUTPUT_BYTES + 100, "{} bytes", out.len());
        let shown = out.lines().count() - 1;
        assert!(
            out.ends_with(&format!(
                "[showing {shown} of 1000 files; use a more specific pattern or path]\n"
            )),
            "{}",
            &out[out.len() - 200..]
        );
    }

    #[tokio::test]
    async fn escapes_and_bad_patterns_are_refused() {
        let (_dir, tool) = tree();
        for path in ["..", "/etc", "/"] {
            let failure = call(&tool, json!({"pattern": "*", "path": path}))
                .await
                .unwrap_err();
            assert!(
                matches!(failure, ToolFailure::OutsideWorkspace { .. }),
                "{path}"
            );
        }
        for pattern in ["../*", "/etc/*", "a/[b"] {
            let failure = call(&tool, json!({"pattern": pattern})).await.unwrap_err();
            assert!(
                matches!(failure, ToolFailure::InvalidInput(_)),
                "{pattern}: {failure:?}"
            );
        }
        let failure = call(&tool, json!({"pattern": "*", "path": "README.md"}))
            .await
            .unwrap_err();
        assert!(failure.to_string().contains("not a directory"), "{failure}");
    }
}
