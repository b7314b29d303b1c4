//! The directory walk shared by `glob` and `grep`: ripgrep's `ignore` walker, configured once.

use std::path::Path;

use ignore::WalkBuilder;

/// A sequential walker over `base`, sorted by file name so results are deterministic.
///
/// What it skips: whatever `.gitignore`, `.git/info/exclude` and `.ignore` files exclude (inside
/// a git repository or not: `require_git(false)`), and `.git` directories. What it keeps: hidden
/// files that are not ignored (a model asking for `.github/**` should find them). The user's
/// global git excludes are not read, so results do not depend on the machine. Symbolic links are
/// not followed, so the walk never leaves the tree it started in.
pub(crate) fn walker(base: &Path) -> WalkBuilder {
    let mut builder = WalkBuilder::new(base);
    builder
        .hidden(false)
        .ignore(true)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(false)
        .parents(true)
        .require_git(false)
        .follow_links(false)
        .filter_entry(|entry| entry.file_name() != ".git")
        .sort_by_file_name(|a, b| a.cmp(b));
    builder
}

/// Entries visited between two looks at the cancellation token.
pub(crate) const ENTRIES_PER_CANCEL_CHECK: usize = 256;

/// `pattern` without leading `./` components. Walked paths are matched relative to the base and
/// never start with `./`, but models often write `./src/**/*.rs` anyway.
pub(crate) fn without_leading_dot_slash(mut pattern: &str) -> &str {
    while let Some(rest) = pattern.strip_prefix("./") {
        pattern = rest.trim_start_matches('/');
    }
    pattern
}
