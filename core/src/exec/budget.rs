//! Result budgets: a result over its tool's limit, or the largest results of a turn over the
//! turn's aggregate budget, are written to a spill file
//! (`<spill_dir>/<tool_use_id>-<fingerprint of the text>.txt`) and replaced by a preview in a
//! fixed wrapper.
//!
//! The decision for a `tool_use_id` (and its content) is taken once and kept in a
//! [`ReplacementRecord`]: a replaced result is replaced by the very same bytes on every later
//! turn, and a result kept whole is never replaced later (its bytes are already in the
//! provider's prompt cache). The record serialises with serde, so a resumed session makes the
//! same decisions.
//!
//! A decision also holds a fingerprint of the text it replaced. Call ids are not always unique
//! (OpenAI-compatible servers that number calls `call_0`, `call_1`… in every response; one
//! executor serving many runs), and a later result that reuses an id with other content is a
//! different result: it is decided on its own, spilled to its own file, and never shown the
//! earlier result's preview.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::spill_file::write_spill_file;
use super::types::{ToolResult, ToolResultContent};

/// The default per-result limit, in characters.
pub const DEFAULT_MAX_RESULT_CHARS: usize = 50_000;
/// The default aggregate budget of one turn's results, in characters.
pub const DEFAULT_TURN_BUDGET_CHARS: usize = 200_000;
/// The default preview size, in bytes (cut back to a newline when there is one).
pub const DEFAULT_PREVIEW_BYTES: usize = 2_048;

/// Budget settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetConfig {
    /// Where spill files go (created with mode 0700 on first use; on Unix a directory owned by
    /// another user, or world-writable without the sticky bit, is refused and the result is cut
    /// to its preview instead). The empty path is refused by
    /// [`ExecutorConfig::check`](super::ExecutorConfig::check).
    pub spill_dir: PathBuf,
    /// The per-result limit for tools using [`ResultLimit::Default`](super::ResultLimit::Default).
    pub default_max_result_chars: usize,
    /// The aggregate budget of a turn's results; `None` disables it.
    pub turn_budget_chars: Option<usize>,
    /// The preview size in bytes.
    pub preview_bytes: usize,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        Self {
            spill_dir: std::env::temp_dir().join("ferroloop-tool-results"),
            default_max_result_chars: DEFAULT_MAX_RESULT_CHARS,
            turn_budget_chars: Some(DEFAULT_TURN_BUDGET_CHARS),
            preview_bytes: DEFAULT_PREVIEW_BYTES,
        }
    }
}

/// One decided replacement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replacement {
    /// The exact content the model sees instead of the result.
    pub content: String,
    /// The spill file holding the full result (`None` when it could not be written).
    pub path: Option<PathBuf>,
    /// The size of the original result, in characters.
    pub original_chars: usize,
    /// A fingerprint of the original text ([`text_fingerprint`]). `None` in records written
    /// before fingerprints were kept: such a replacement applies to any result of its id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<u64>,
}

impl Replacement {
    /// Whether this replacement stands for `text`: `text` is the original it replaced (same
    /// fingerprint), or already this replacement.
    fn stands_for(&self, text: &str, fingerprint: &mut Option<u64>) -> bool {
        let Some(own) = self.fingerprint else {
            return true;
        };
        if self.content == text {
            return true;
        }
        own == *fingerprint.get_or_insert_with(|| text_fingerprint(text))
    }
}

/// A stable 64-bit fingerprint of a result's text (FNV-1a over its UTF-8 bytes): stable across
/// processes and releases, so a serialised record keeps matching after a resume.
pub fn text_fingerprint(text: &str) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    text.bytes().fold(OFFSET, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(PRIME)
    })
}

/// The record key of a later decision for an id already decided for other content.
fn reused_id_key(tool_use_id: &str, fingerprint: u64) -> String {
    format!("{tool_use_id}#{fingerprint:016x}")
}

/// The budget decisions taken so far, by `tool_use_id`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ReplacementRecord {
    replaced: BTreeMap<String, Replacement>,
}

impl ReplacementRecord {
    /// An empty record.
    pub fn new() -> Self {
        Self::default()
    }

    /// The replacement first decided for `tool_use_id`, if a result of that id was replaced.
    pub fn replacement(&self, tool_use_id: &str) -> Option<&Replacement> {
        self.replaced.get(tool_use_id)
    }

    /// Whether a result of `tool_use_id` was replaced.
    pub fn is_replaced(&self, tool_use_id: &str) -> bool {
        self.replaced.contains_key(tool_use_id)
    }

    /// The number of replaced results.
    pub fn replaced_len(&self) -> usize {
        self.replaced.len()
    }

    /// The replacement decided for this result: one recorded for its id that stands for its
    /// content (the same original text, or the replacement itself).
    pub fn replacement_for(
        &self,
        tool_use_id: &str,
        content: &ToolResultContent,
    ) -> Option<&Replacement> {
        let first = self.replaced.get(tool_use_id)?;
        if first.fingerprint.is_none() {
            return Some(first);
        }
        let text = content.as_plain_text()?;
        let mut fingerprint = None;
        if first.stands_for(&text, &mut fingerprint) {
            return Some(first);
        }
        let fingerprint = fingerprint.unwrap_or_else(|| text_fingerprint(&text));
        self.replaced
            .get(&reused_id_key(tool_use_id, fingerprint))
            .filter(|later| later.fingerprint == Some(fingerprint))
    }

    /// Records a new decision: under the id itself when it is the id's first, otherwise under a
    /// key of its own.
    fn insert(&mut self, tool_use_id: &str, replacement: Replacement) {
        let key = match (
            self.replaced.contains_key(tool_use_id),
            replacement.fingerprint,
        ) {
            (true, Some(fingerprint)) => reused_id_key(tool_use_id, fingerprint),
            _ => tool_use_id.to_owned(),
        };
        self.replaced.insert(key, replacement);
    }

    /// Puts the recorded replacements back into `results` (for instance the history rebuilt from
    /// original results on a later turn), byte for byte: a result gets the replacement decided
    /// for its id and its content, never one decided for other content under the same id.
    /// Returns how many were replaced.
    pub fn reapply(&self, results: &mut [ToolResult]) -> usize {
        self.reapply_marking(results).iter().filter(|&&m| m).count()
    }

    /// [`reapply`](Self::reapply), saying which results carry a recorded replacement.
    fn reapply_marking(&self, results: &mut [ToolResult]) -> Vec<bool> {
        let mut marked = vec![false; results.len()];
        if self.replaced.is_empty() {
            return marked;
        }
        for (result, mark) in results.iter_mut().zip(&mut marked) {
            if let Some(replacement) = self.replacement_for(&result.tool_use_id, &result.content) {
                result.content = ToolResultContent::Text(replacement.content.clone());
                *mark = true;
            }
        }
        marked
    }
}

/// Applies the per-result limit and the per-turn budget.
#[derive(Debug, Clone)]
pub struct ResultBudget {
    config: BudgetConfig,
}

impl ResultBudget {
    /// A budget with these settings.
    pub fn new(config: BudgetConfig) -> Self {
        Self { config }
    }

    /// The settings.
    pub fn config(&self) -> &BudgetConfig {
        &self.config
    }

    /// Applies a per-result limit of `limit` characters (`None`: unlimited). A result already
    /// replaced in `record` gets its recorded replacement; a result over the limit is spilled and
    /// recorded. Returns the content to deliver and whether it was spilled now.
    pub fn limit_result(
        &self,
        record: &mut ReplacementRecord,
        tool_use_id: &str,
        content: ToolResultContent,
        limit: Option<usize>,
    ) -> (ToolResultContent, bool) {
        if let Some(replacement) = record.replacement_for(tool_use_id, &content) {
            return (ToolResultContent::Text(replacement.content.clone()), false);
        }
        let Some(limit) = limit else {
            return (content, false);
        };
        if !exceeds(&content, limit) {
            return (content, false);
        }
        let Some(text) = content.as_plain_text() else {
            return (content, false);
        };
        let preview_bytes = self.config.preview_bytes.min(limit);
        let replacement = self.spill(tool_use_id, &text, preview_bytes);
        let delivered = ToolResultContent::Text(replacement.content.clone());
        record.insert(tool_use_id, replacement);
        (delivered, true)
    }

    /// Applies the per-turn budget to one turn's results (call it once per turn, with that
    /// turn's results): recorded replacements are reapplied, then, while the total exceeds the
    /// budget, the largest results not replaced before are spilled, largest first (a result no
    /// longer than its replacement would be is kept whole: replacing it cannot help). Applying it
    /// again to the same results changes nothing (they are under budget, or nothing is left to
    /// replace); history from earlier turns takes [`ReplacementRecord::reapply`] instead, so a
    /// result delivered whole is never replaced later. Returns how many were spilled now.
    pub fn enforce_turn(
        &self,
        record: &mut ReplacementRecord,
        results: &mut [ToolResult],
    ) -> usize {
        let decided = record.reapply_marking(results);
        let Some(budget) = self.config.turn_budget_chars else {
            return 0;
        };
        // Bytes bound characters from above: most turns are decided without counting.
        let bytes: usize = results.iter().map(|r| content_bytes(&r.content)).sum();
        if bytes <= budget {
            return 0;
        }
        let sizes: Vec<usize> = results.iter().map(|r| r.content.text_chars()).collect();
        let mut total: usize = sizes.iter().sum();
        let mut candidates: Vec<usize> = (0..results.len())
            .filter(|&i| !decided[i])
            .filter(|&i| results[i].content.as_plain_text().is_some())
            .collect();
        // Largest first; ties keep request order so the choice is deterministic.
        candidates.sort_by(|&a, &b| sizes[b].cmp(&sizes[a]).then(a.cmp(&b)));
        let mut spilled = 0;
        for index in candidates {
            if total <= budget {
                break;
            }
            let result = &mut results[index];
            let Some(text) = result.content.as_plain_text() else {
                continue;
            };
            // A small result may be shorter than its replacement would be: replacing it would
            // grow the turn and write a spill file for nothing.
            let path = self.spill_path(&result.tool_use_id, &text);
            if replacement_chars(&path, &text, self.config.preview_bytes) >= sizes[index] {
                continue;
            }
            let replacement = self.spill(&result.tool_use_id, &text, self.config.preview_bytes);
            let new_size = replacement.content.chars().count();
            result.content = ToolResultContent::Text(replacement.content.clone());
            record.insert(&result.tool_use_id, replacement);
            total = total - sizes[index] + new_size;
            spilled += 1;
        }
        spilled
    }

    /// Whether the turn budget could be exceeded by `results` (a cheap upper bound, so that most
    /// turns need neither counting nor the record's lock).
    pub(crate) fn turn_may_exceed(&self, results: &[ToolResult]) -> bool {
        self.config.turn_budget_chars.is_some_and(|budget| {
            results
                .iter()
                .map(|r| content_bytes(&r.content))
                .sum::<usize>()
                > budget
        })
    }

    /// The spill file of a result: `<id>-<fingerprint of the text>.txt` (the id sanitised as
    /// [`spill_file_name`] does). Two results share a file only when their texts are the same,
    /// so a file an earlier preview names is never overwritten with other text: not by a
    /// reused id, nor by ids that sanitise alike (`functions.read:0`, `functions_read_0`), nor
    /// by another executor spilling to the same directory (OpenAI-compatible servers number
    /// calls `call_0`, `call_1`… in every response, and the default directory is shared).
    fn spill_path(&self, tool_use_id: &str, text: &str) -> PathBuf {
        let name = format!(
            "{}-{:016x}.txt",
            spill_file_stem(tool_use_id),
            text_fingerprint(text)
        );
        self.config.spill_dir.join(name)
    }

    /// Writes the full text to its spill file and builds the replacement.
    fn spill(&self, tool_use_id: &str, text: &str, preview_bytes: usize) -> Replacement {
        let original_chars = text.chars().count();
        let fingerprint = Some(text_fingerprint(text));
        let path = self.spill_path(tool_use_id, text);
        let written = write_spill_file(&self.config.spill_dir, &path, text.as_bytes());
        let preview = preview_of(text, preview_bytes);
        match written {
            Ok(()) => Replacement {
                content: wrap_preview(preview, original_chars, Some(&path), None),
                path: Some(path),
                original_chars,
                fingerprint,
            },
            Err(error) => {
                tracing::warn!(%error, path = %path.display(), "could not write a spill file");
                Replacement {
                    content: wrap_preview(preview, original_chars, None, Some(&error.to_string())),
                    path: None,
                    original_chars,
                    fingerprint,
                }
            }
        }
    }
}

/// The length in characters of the replacement a spill to `path` would build for `text` once
/// its file is written (nothing is written).
fn replacement_chars(path: &Path, text: &str, preview_bytes: usize) -> usize {
    let preview = preview_of(text, preview_bytes);
    wrap_preview(preview, text.chars().count(), Some(path), None)
        .chars()
        .count()
}

/// The text bytes of `content` (an upper bound of its characters).
pub(crate) fn content_bytes(content: &ToolResultContent) -> usize {
    match content {
        ToolResultContent::Text(text) => text.len(),
        ToolResultContent::Blocks(_) => content.text_chars(),
    }
}

/// Whether `content` has more than `limit` characters (without counting when bytes suffice).
fn exceeds(content: &ToolResultContent, limit: usize) -> bool {
    match content {
        ToolResultContent::Text(text) if text.len() <= limit => false,
        _ => content.text_chars() > limit,
    }
}

/// The spill file name for a call id: characters other than ASCII letters, digits, `-` and `_`
/// become `_` (ids come from the model's provider and must not name other paths).
pub fn spill_file_name(tool_use_id: &str) -> String {
    let mut name = spill_file_stem(tool_use_id);
    name.push_str(".txt");
    name
}

/// [`spill_file_name`] without its extension.
fn spill_file_stem(tool_use_id: &str) -> String {
    let mut name: String = tool_use_id
        .chars()
        .take(200)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() {
        name.push_str("tool_result");
    }
    name
}

/// The first `max_bytes` of `text`, cut at a character boundary and then back to the last
/// newline when that keeps at least half of it.
pub fn preview_of(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let head = &text[..end];
    match memchr::memrchr(b'\n', head.as_bytes()) {
        Some(newline) if newline >= end / 2 => &head[..newline],
        _ => head,
    }
}

fn wrap_preview(
    preview: &str,
    original_chars: usize,
    path: Option<&Path>,
    error: Option<&str>,
) -> String {
    let mut out = String::with_capacity(preview.len() + 256);
    out.push_str("<tool-output-truncated>\n");
    match (path, error) {
        (Some(path), _) => {
            let _ = writeln!(
                out,
                "Output too large ({original_chars} characters). Full output saved to: {}",
                path.display()
            );
            out.push_str("Read that file to see the rest.\n");
        }
        (None, error) => {
            let _ = writeln!(
                out,
                "Output too large ({original_chars} characters) and could not be saved ({}). Only the beginning is shown.",
                error.unwrap_or("unknown error")
            );
        }
    }
    let _ = write!(
        out,
        "\nPreview (first {} characters):\n",
        preview.chars().count()
    );
    out.push_str(preview);
    out.push_str("\n...\n</tool-output-truncated>");
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// Where a result of `id` with `text` is spilled in `dir`.
    fn spilled_to(dir: &Path, id: &str, text: &str) -> PathBuf {
        dir.join(format!(
            "{}-{:016x}.txt",
            spill_file_stem(id),
            text_fingerprint(text)
        ))
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "ferroloop-budget-test-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn budget(dir: &Path, turn: Option<usize>) -> ResultBudget {
        ResultBudget::new(BudgetConfig {
            spill_dir: dir.to_owned(),
            default_max_result_chars: 100,
            turn_budget_chars: turn,
            preview_bytes: 64,
        })
    }

    fn lines(n: usize) -> String {
        (0..n).map(|i| format!("line {i:03}\n")).collect()
    }

    #[test]
    fn preview_cuts_at_newline_and_char_boundary() {
        assert_eq!(preview_of("short", 10), "short");
        assert_eq!(preview_of("aaaa\nbbbbbb", 8), "aaaa");
        assert_eq!(
            preview_of("a\nbbbbbbbbbbb", 8),
            "a\nbbbbbb",
            "newline too early: byte cut"
        );
        assert_eq!(preview_of("ééééé", 5), "éé");
    }

    #[test]
    fn spill_file_names_are_sanitised() {
        assert_eq!(spill_file_name("toolu_01A-b"), "toolu_01A-b.txt");
        assert_eq!(spill_file_name("../../etc/passwd"), "______etc_passwd.txt");
        assert_eq!(spill_file_name(""), "tool_result.txt");
    }

    #[test]
    fn over_limit_result_is_spilled_with_a_preview() {
        let dir = temp_dir("limit");
        let budget = budget(&dir, None);
        let mut record = ReplacementRecord::new();
        let text = lines(50);
        let (content, spilled) = budget.limit_result(
            &mut record,
            "t1",
            ToolResultContent::Text(text.clone()),
            Some(100),
        );
        assert!(spilled);
        let path = spilled_to(&dir, "t1", &text);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        let ToolResultContent::Text(preview) = content else {
            panic!("text expected")
        };
        let expected = format!(
            "<tool-output-truncated>\nOutput too large (450 characters). Full output saved to: {}\n\
             Read that file to see the rest.\n\nPreview (first 62 characters):\n{}\n...\n</tool-output-truncated>",
            path.display(),
            &text[..62]
        );
        assert_eq!(preview, expected);
        assert_eq!(record.replacement("t1").unwrap().original_chars, 450);
        // Under the limit: untouched and undecided.
        let small = ToolResultContent::Text("ok".into());
        assert_eq!(
            budget.limit_result(&mut record, "t2", small.clone(), Some(100)),
            (small, false)
        );
        assert!(!record.is_replaced("t2"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn images_and_unlimited_are_never_spilled() {
        let dir = temp_dir("images");
        let budget = budget(&dir, None);
        let mut record = ReplacementRecord::new();
        let big = ToolResultContent::Text("x".repeat(1000));
        assert!(!budget.limit_result(&mut record, "a", big, None).1);
        let image = ToolResultContent::Blocks(vec![
            serde_json::json!({"type": "text", "text": "y".repeat(1000)}),
            serde_json::json!({"type": "image", "source": {}}),
        ]);
        assert!(!budget.limit_result(&mut record, "b", image, Some(10)).1);
        assert!(!dir.exists());
    }

    /// A replacement (the wrapper, the path, the preview) can be longer than a small result:
    /// replacing such a result makes the turn larger, never brings it under budget, and
    /// writes a spill file for nothing. The budget replaces only results it shrinks.
    #[test]
    fn turn_budget_never_replaces_a_result_by_a_longer_preview() {
        let dir = temp_dir("no-growth");
        let budget = budget(&dir, Some(300));
        let mut record = ReplacementRecord::new();
        let mut results: Vec<ToolResult> = (0..10)
            .map(|i| ToolResult::success(format!("small{i}"), "s".repeat(40)))
            .collect();
        results.push(ToolResult::success("big", lines(100)));
        let originals = results.clone();
        assert_eq!(budget.enforce_turn(&mut record, &mut results), 1);
        assert_eq!(
            results[..10],
            originals[..10],
            "small results are kept whole"
        );
        assert_ne!(results[10], originals[10], "the large one is replaced");
        assert_eq!(record.replaced_len(), 1);
        for i in 0..10 {
            assert!(!dir.join(format!("small{i}.txt")).exists());
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn turn_budget_replaces_largest_first_and_decisions_are_stable() {
        let dir = temp_dir("turn");
        let budget = budget(&dir, Some(1_300));
        let mut record = ReplacementRecord::new();
        let originals = vec![
            ToolResult::success("a", "a".repeat(300)),
            ToolResult::success("b", "b".repeat(700)),
            ToolResult::success("c", "c".repeat(500)),
        ];
        let mut turn1 = originals.clone();
        assert_eq!(budget.enforce_turn(&mut record, &mut turn1), 1);
        assert_eq!(turn1[0], originals[0]);
        assert_ne!(turn1[1], originals[1], "the largest is replaced");
        assert_eq!(turn1[2], originals[2]);
        assert_eq!(
            std::fs::read_to_string(spilled_to(&dir, "b", &"b".repeat(700))).unwrap(),
            "b".repeat(700)
        );

        // Enforcing again on the same results changes nothing.
        let mut again = turn1.clone();
        assert_eq!(budget.enforce_turn(&mut record, &mut again), 0);
        assert_eq!(again, turn1);

        // The next turn has its own budget: its large result is replaced; history rebuilt from
        // the originals gets the earlier decisions back byte for byte.
        let mut turn2 = vec![ToolResult::success("d", "d".repeat(1_400))];
        assert_eq!(budget.enforce_turn(&mut record, &mut turn2), 1);
        let mut history = originals.clone();
        assert_eq!(record.reapply(&mut history), 1);
        assert_eq!(history, turn1);

        // The record survives a serde round trip (session resume) and reapplies identically.
        let json = serde_json::to_string(&record).unwrap();
        let resumed: ReplacementRecord = serde_json::from_str(&json).unwrap();
        let mut history = originals.clone();
        history.push(ToolResult::success("d", "d".repeat(1_400)));
        assert_eq!(resumed.reapply(&mut history), 2);
        assert_eq!(history[..3], turn1[..]);
        assert_eq!(history[3], turn2[0]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn text_fingerprints_are_fnv1a_64() {
        // The published FNV-1a test vectors: a record written by one build matches in another.
        assert_eq!(text_fingerprint(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(text_fingerprint("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(text_fingerprint("foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn a_reused_id_with_other_content_is_decided_on_its_own() {
        let dir = temp_dir("reused");
        let budget = budget(&dir, None);
        let mut record = ReplacementRecord::new();
        let first = "A\n".repeat(100);
        let second = "B\n".repeat(100);
        let text = |content: ToolResultContent| match content {
            ToolResultContent::Text(text) => text,
            other => panic!("{other:?}"),
        };
        let (delivered_first, spilled) = budget.limit_result(
            &mut record,
            "call_0",
            ToolResultContent::Text(first.clone()),
            Some(100),
        );
        assert!(spilled);
        let delivered_first = text(delivered_first);
        // The same id, other content (a server numbering calls per response): its own preview
        // and its own file; the first file, named in the first preview, is left as it was.
        let (delivered_second, spilled) = budget.limit_result(
            &mut record,
            "call_0",
            ToolResultContent::Text(second.clone()),
            Some(100),
        );
        assert!(spilled, "decided on its own");
        let delivered_second = text(delivered_second);
        assert!(delivered_second.contains("B\nB\n"), "{delivered_second}");
        assert!(!delivered_second.contains("A\n"), "{delivered_second}");
        assert_eq!(
            std::fs::read_to_string(spilled_to(&dir, "call_0", &first)).unwrap(),
            first
        );
        let second_path = record
            .replacement_for("call_0", &ToolResultContent::Text(second.clone()))
            .and_then(|r| r.path.clone())
            .unwrap();
        assert_ne!(second_path, spilled_to(&dir, "call_0", &first));
        assert_eq!(std::fs::read_to_string(&second_path).unwrap(), second);
        assert_eq!(record.replaced_len(), 2);

        // The first content again gets its recorded bytes; nothing new is written.
        let (again, spilled) = budget.limit_result(
            &mut record,
            "call_0",
            ToolResultContent::Text(first.clone()),
            Some(100),
        );
        assert!(!spilled);
        assert_eq!(text(again), delivered_first);

        // History rebuilt from the originals: each result gets its own replacement, and a small
        // result under the same id is not given either preview.
        let mut history = vec![
            ToolResult::success("call_0", first.clone()),
            ToolResult::success("call_0", second.clone()),
            ToolResult::success("call_0", "ok"),
        ];
        assert_eq!(record.reapply(&mut history), 2);
        assert_eq!(history[0].content, ToolResultContent::Text(delivered_first));
        assert_eq!(
            history[1].content,
            ToolResultContent::Text(delivered_second)
        );
        assert_eq!(history[2].content, ToolResultContent::Text("ok".into()));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_turn_budget_does_not_give_a_reused_id_an_earlier_preview() {
        let dir = temp_dir("reused-turn");
        let budget = budget(&dir, Some(300));
        let mut record = ReplacementRecord::new();
        let mut turn1 = vec![ToolResult::success("call_0", "a".repeat(700))];
        assert_eq!(budget.enforce_turn(&mut record, &mut turn1), 1);
        // The next response numbers its calls from 0 again.
        let originals = vec![
            ToolResult::success("call_0", "small"),
            ToolResult::success("call_1", "b".repeat(700)),
        ];
        let mut turn2 = originals.clone();
        assert_eq!(budget.enforce_turn(&mut record, &mut turn2), 1);
        assert_eq!(turn2[0], originals[0], "not the first turn's preview");
        assert_ne!(turn2[1], originals[1]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_record_written_before_fingerprints_still_applies_to_its_ids() {
        let json =
            r#"{"replaced":{"t1":{"content":"<preview>","path":null,"original_chars":900}}}"#;
        let record: ReplacementRecord = serde_json::from_str(json).unwrap();
        let mut history = vec![ToolResult::success("t1", "x".repeat(900))];
        assert_eq!(record.reapply(&mut history), 1);
        assert_eq!(
            history[0].content,
            ToolResultContent::Text("<preview>".into())
        );
        // New decisions serialise their fingerprint.
        let dir = temp_dir("fingerprint-json");
        let budget = budget(&dir, None);
        let mut record = ReplacementRecord::new();
        budget.limit_result(
            &mut record,
            "t2",
            ToolResultContent::Text("y".repeat(500)),
            Some(100),
        );
        let json = serde_json::to_value(&record).unwrap();
        assert_eq!(
            json["replaced"]["t2"]["fingerprint"],
            text_fingerprint(&"y".repeat(500))
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
