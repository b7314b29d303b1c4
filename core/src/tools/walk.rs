//! The directory walk shared by `glob` and `grep`: ripgrep's `ignore` walker, configured once.

use std::path::Path;

use ignore::{DirEntry, WalkBuilder};

use super::Workspace;

/// A sequential walker over `base` (a resolved path inside `workspace`), sorted by file name so
/// results are deterministic.
///
/// What it skips: whatever `.gitignore`, `.git/info/exclude` and `.ignore` files exclude (inside
/// a git repository or not: `require_git(false)`), and `.git` directories. What it keeps: hidden
/// files that are not ignored (a model asking for `.github/**` should find them). The user's
/// global git excludes are not read, so results do not depend on the machine. Symbolic links are
/// not followed, so the walk never leaves the tree it started in.
///
/// Ignore files in directories above `base` apply up to a boundary: the root of the git
/// repository holding the workspace, or the workspace root when there is none. Left to itself,
/// the crate (with `require_git(false)`) would read every ancestor's `.gitignore` and `.ignore`
/// up to `/`, so a stray `~/.gitignore` or `/tmp/.gitignore` would hide the workspace's files.
pub(crate) fn walker(workspace: &Workspace, base: &Path) -> WalkBuilder {
    walker_keeping(workspace, base, |_| true)
}

/// [`walker`], also skipping the entries (directories pruned with their contents) for which
/// `keep` is false. `keep` can only narrow the walk: what the ignore files exclude stays
/// excluded whatever it says.
pub(crate) fn walker_keeping<F>(workspace: &Workspace, base: &Path, keep: F) -> WalkBuilder
where
    F: Fn(&DirEntry) -> bool + Send + Sync + 'static,
{
    let mut builder = WalkBuilder::new(base);
    builder
        .hidden(false)
        .ignore(true)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(false)
        .parents(false)
        .require_git(false)
        .follow_links(false)
        .filter_entry(move |entry| entry.file_name() != ".git" && keep(entry))
        .sort_by_file_name(|a, b| a.cmp(b));
    add_ancestor_ignore_files(&mut builder, workspace.root(), base);
    builder
}

/// Adds the ignore files of the directories above `base`, up to the boundary, as explicit
/// ignore files rooted at their own directory. They rank below every ignore file met during
/// the walk (a nearer file wins, as in git); among them the nearest is added last, which the
/// crate ranks highest.
fn add_ancestor_ignore_files(builder: &mut WalkBuilder, root: &Path, base: &Path) {
    let repository = root.ancestors().find(|dir| dir.join(".git").exists());
    let boundary = repository.unwrap_or(root);
    let mut dirs: Vec<&Path> = base
        .ancestors()
        .skip(1)
        .take_while(|dir| dir.starts_with(boundary))
        .collect();
    dirs.reverse();
    let mut files = Vec::new();
    // A walk that starts at the repository's root reads its exclude file itself.
    if let Some(repository) = repository.filter(|repository| *repository != base) {
        files.push((repository, repository.join(".git/info/exclude")));
    }
    for dir in dirs {
        files.push((dir, dir.join(".gitignore")));
        files.push((dir, dir.join(".ignore")));
    }
    for (dir, file) in files {
        if !file.is_file() {
            continue;
        }
        // `add_ignore` roots a file's patterns at the walker's current directory.
        builder.current_dir(dir);
        if let Some(error) = builder.add_ignore(&file) {
            tracing::debug!(%error, file = %file.display(), "walk: a parent ignore file is partly unusable");
        }
    }
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
