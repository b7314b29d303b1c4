//! The workspace root that confines every path a built-in tool touches.
//!
//! A path is resolved the way `realpath -m` does it: component by component, following every
//! symbolic link that exists (relative and absolute targets alike), treating `..` after a
//! resolved directory as its real parent, and keeping the components that do not exist yet
//! (a file `write` is about to create) as they are. Only the fully resolved path is checked
//! against the canonical root, so `..`, absolute paths and symbolic links (dangling ones
//! included) cannot lead outside it. Callers then use the resolved path, never the raw one.
//!
//! What this does not prevent: a process that swaps a directory for a symbolic link between the
//! check and the use (a TOCTOU race). The tools run on behalf of a model inside a workspace it
//! does not share with an adversary; the `bash` tool is not confined at all (it runs in the root).

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::Metadata;
use std::io;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use super::ToolFailure;

/// Files whose last-seen state a workspace remembers. Past it an arbitrary entry is forgotten:
/// its file must then be read again before it is changed (the safe direction).
const SEEN_FILES_CAP: usize = 65_536;

/// What a tool last saw of a file: its size, modification time and identity (device and
/// inode). A file whose stamp differs from the one recorded when it was read has been changed
/// by something else since.
///
/// The identity catches a file replaced by renaming another over it (editors, `sed -i`,
/// formatters) with the same size and, where timestamps are coarse (a jiffy on Linux, 2 s on
/// FAT), the same modification time. The change time is left out: a `chmod +x` would then
/// make the model read its own script again for nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileStamp {
    len: u64,
    modified: Option<SystemTime>,
    device: u64,
    inode: u64,
}

impl FileStamp {
    /// The stamp of a file's metadata.
    pub(crate) fn of(metadata: &Metadata) -> Self {
        Self {
            len: metadata.len(),
            modified: metadata.modified().ok(),
            device: metadata.dev(),
            inode: metadata.ino(),
        }
    }
}

/// Symbolic links followed while resolving one path before giving up (Linux's `MAXSYMLINKS`).
const MAX_SYMLINK_HOPS: usize = 40;

/// Why a [`Workspace`] could not be created.
#[derive(Debug, thiserror::Error)]
#[error("workspace root '{}' is unusable: {source}", root.display())]
pub struct WorkspaceError {
    root: PathBuf,
    #[source]
    source: io::Error,
}

/// A directory that confines the built-in tools. Cheap to clone.
///
/// It also remembers what `read` last saw of each file (size, modification time, inode),
/// shared by its clones: `write` over an existing file and `edit` refuse a file that was not
/// read through this workspace, or that changed since it was (a command, the user or an editor
/// wrote it), so a model never overwrites text it has not seen. Their own changes count as seen.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: Arc<Path>,
    /// Directories outside the root that `read` may also open: the executor's spill directory,
    /// whose files the previews of oversized results tell the model to read.
    readable: Arc<[PathBuf]>,
    /// The stamp of each file as last read or written by a tool, by resolved path.
    seen: Arc<Mutex<HashMap<PathBuf, FileStamp>>>,
}

/// Two workspaces are equal when they confine the same paths (what they have seen aside).
impl PartialEq for Workspace {
    fn eq(&self, other: &Self) -> bool {
        self.root == other.root && self.readable == other.readable
    }
}

impl Eq for Workspace {}

impl Workspace {
    /// A workspace rooted at `root`, which must be an existing directory. The root is stored
    /// canonicalised (symbolic links resolved), so a root reached through a link works.
    pub fn new(root: impl AsRef<Path>) -> Result<Self, WorkspaceError> {
        let root = root.as_ref();
        let fail = |source| WorkspaceError {
            root: root.to_path_buf(),
            source,
        };
        let canonical = std::fs::canonicalize(root).map_err(fail)?;
        let metadata = std::fs::metadata(&canonical).map_err(fail)?;
        if !metadata.is_dir() {
            return Err(fail(io::Error::new(
                io::ErrorKind::NotADirectory,
                "not a directory",
            )));
        }
        Ok(Self {
            root: Arc::from(canonical),
            readable: Arc::from([]),
            seen: Arc::default(),
        })
    }

    /// Records that a tool has seen `path` (resolved) as `stamp`: read it whole or in part, or
    /// wrote it.
    pub(crate) fn note_seen(&self, path: &Path, stamp: FileStamp) {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.len() >= SEEN_FILES_CAP && !seen.contains_key(path) {
            let forgotten = seen.keys().next().cloned();
            if let Some(forgotten) = forgotten {
                seen.remove(&forgotten);
            }
        }
        seen.insert(path.to_path_buf(), stamp);
    }

    /// Records `path`'s current state as seen (after a tool wrote it); a file that cannot be
    /// looked at is forgotten instead, so it must be read again.
    pub(crate) fn note_written(&self, path: &Path) {
        match std::fs::metadata(path) {
            Ok(metadata) => self.note_seen(path, FileStamp::of(&metadata)),
            Err(_) => {
                let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
                seen.remove(path);
            }
        }
    }

    /// Fails unless the existing file `path` (resolved; `shown` as the model named it), now
    /// described by `metadata`, was seen by a tool of this workspace and has not changed since.
    pub(crate) fn check_seen(
        &self,
        path: &Path,
        metadata: &Metadata,
        shown: &str,
    ) -> Result<(), ToolFailure> {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        match seen.get(path) {
            None => Err(ToolFailure::NotReadYet(shown.to_owned())),
            Some(stamp) if *stamp != FileStamp::of(metadata) => {
                Err(ToolFailure::ChangedSinceRead(shown.to_owned()))
            }
            Some(_) => Ok(()),
        }
    }

    /// This workspace with `dir` (outside the root, or not) also open to reading: `read` accepts
    /// paths below it, every other tool still only the root. Meant for the executor's spill
    /// directory ([`BudgetConfig::spill_dir`](crate::exec::BudgetConfig::spill_dir)), so that
    /// "Full output saved to: …" can be followed. `dir` need not exist yet; it is resolved
    /// (symbolic links followed) when a path is checked against it.
    pub fn also_readable(mut self, dir: impl Into<PathBuf>) -> Self {
        let mut dirs = self.readable.to_vec();
        dirs.push(dir.into());
        self.readable = Arc::from(dirs);
        self
    }

    /// The canonical root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves a path argument (relative to the root, or absolute) to a canonical path inside
    /// the workspace, following symbolic links; components that do not exist yet are kept.
    ///
    /// Fails with [`ToolFailure::OutsideWorkspace`] when the resolved path is not the root or
    /// below it, and with [`ToolFailure::InvalidInput`] on an empty path, a NUL byte, a leading
    /// `~` (home is not expanded), or a symbolic-link loop; with [`ToolFailure::NotADirectory`]
    /// when the path ends in `/` (or `/.`) but what it resolves to exists and is not a directory.
    ///
    /// A path that goes on past an existing file with `..` (`a.txt/../x`) fails with
    /// [`ToolFailure::PastAFile`], as the kernel refuses it (ENOTDIR), when that file is inside
    /// the workspace; with [`ToolFailure::OutsideWorkspace`] when it is not.
    pub fn resolve(&self, raw: &str) -> Result<PathBuf, ToolFailure> {
        self.resolve_within(raw, |path| path.starts_with(&self.root))
    }

    /// [`resolve`](Self::resolve) for reading: a path below one of the
    /// [`also_readable`](Self::also_readable) directories is accepted too.
    pub fn resolve_readable(&self, raw: &str) -> Result<PathBuf, ToolFailure> {
        let readable = |path: &Path| {
            self.readable.iter().any(|dir| {
                std::fs::canonicalize(dir).is_ok_and(|dir| path.starts_with(&dir) && path != dir)
            })
        };
        self.resolve_within(raw, |path| path.starts_with(&self.root) || readable(path))
    }

    /// `raw` resolved, when `allowed` accepts where it leads. What is wrong with a path is said
    /// only once it is known to stay where it is allowed, so that the answer says nothing
    /// about what lies outside.
    fn resolve_within(
        &self,
        raw: &str,
        allowed: impl Fn(&Path) -> bool,
    ) -> Result<PathBuf, ToolFailure> {
        match self.resolve_anywhere(raw)? {
            Resolved::Path(resolved) if allowed(&resolved) => {
                refuse_a_file_named_as_a_directory(raw, resolved)
            }
            Resolved::PastFile(file) if allowed(&file) => Err(ToolFailure::PastAFile {
                path: raw.to_owned(),
                file: self.display_relative(&file),
            }),
            Resolved::Path(_) | Resolved::PastFile(_) => Err(self.outside(raw)),
        }
    }

    fn outside(&self, raw: &str) -> ToolFailure {
        ToolFailure::OutsideWorkspace {
            path: raw.to_owned(),
            root: self.root.to_path_buf(),
        }
    }

    /// A path argument checked for what no tool accepts and resolved to a canonical path,
    /// wherever it leads.
    fn resolve_anywhere(&self, raw: &str) -> Result<Resolved, ToolFailure> {
        if raw.is_empty() {
            return Err(ToolFailure::InvalidInput("the path is empty".to_owned()));
        }
        if raw.contains('\0') {
            return Err(ToolFailure::InvalidInput(format!(
                "the path '{}' contains a NUL byte",
                raw.escape_debug()
            )));
        }
        // No shell expands `~` here; taken literally it would make a directory named `~` in
        // the workspace, which is never what a model writing `~/notes.txt` means.
        if raw == "~" || raw.starts_with("~/") {
            return Err(ToolFailure::InvalidInput(format!(
                "'{raw}': '~' is not expanded; give a path relative to the workspace root (or absolute inside it)"
            )));
        }
        let requested = Path::new(raw);
        let start = if requested.is_absolute() {
            PathBuf::from("/")
        } else {
            self.root.to_path_buf()
        };
        match resolve_from(start, requested) {
            Ok(resolved) => Ok(Resolved::Path(resolved)),
            Err(ResolveError::PastFile(file)) => Ok(Resolved::PastFile(file)),
            Err(ResolveError::SymlinkLoop) => Err(ToolFailure::InvalidInput(format!(
                "too many levels of symbolic links in '{raw}'"
            ))),
            Err(ResolveError::Io(source)) => Err(ToolFailure::io("resolve", raw, source)),
        }
    }

    /// `path` (a resolved path inside the workspace) relative to the root, for tool output;
    /// the root itself is `.`.
    pub fn display_relative(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(relative) if relative.as_os_str().is_empty() => ".".to_owned(),
            Ok(relative) => relative.to_string_lossy().into_owned(),
            Err(_) => path.to_string_lossy().into_owned(),
        }
    }
}

/// `resolved` (inside the workspace), unless `raw` ends as only a directory's path can (in `/` or
/// `/.`) and `resolved` exists as something else. The kernel refuses such a path (ENOTDIR), but
/// resolution drops the ending, as `Path::components` does: without this, `read a.txt/` would
/// read the file. Checked only once the path is known to be inside, so that the answer says
/// nothing about what lies outside.
fn refuse_a_file_named_as_a_directory(
    raw: &str,
    resolved: PathBuf,
) -> Result<PathBuf, ToolFailure> {
    let mut named = raw;
    while let Some(shorter) = named.strip_suffix('/').or_else(|| named.strip_suffix("/.")) {
        named = shorter;
    }
    if named.len() < raw.len()
        && std::fs::metadata(&resolved).is_ok_and(|metadata| !metadata.is_dir())
    {
        return Err(ToolFailure::NotADirectory {
            path: raw.to_owned(),
            file: named.to_owned(),
        });
    }
    Ok(resolved)
}

/// Where a path leads.
enum Resolved {
    /// The canonical path.
    Path(PathBuf),
    /// Nowhere: the path goes on past this existing non-directory with `..`.
    PastFile(PathBuf),
}

enum ResolveError {
    SymlinkLoop,
    /// `..` after an existing non-directory (canonical path given): the kernel refuses it
    /// (ENOTDIR), and popping it lexically would lead elsewhere.
    PastFile(PathBuf),
    Io(io::Error),
}

/// `realpath -m`: resolve `path` starting from the canonical directory `current`.
fn resolve_from(mut current: PathBuf, path: &Path) -> Result<PathBuf, ResolveError> {
    // Components still to process, in reverse order (the next one is at the end), so that a
    // link's target can be spliced in front of the rest.
    let mut pending: Vec<PendingComponent> = path.components().rev().map(to_pending).collect();
    // Number of trailing components of `current` that do not exist on disk. While it is
    // non-zero nothing below can exist either, so no link lookups are made; `..` steps back
    // out of the missing part lexically, which is exact because missing names are not links.
    let mut missing_depth = 0usize;
    let mut hops = 0usize;
    while let Some(component) = pending.pop() {
        match component {
            PendingComponent::Root => {
                current = PathBuf::from("/");
                missing_depth = 0;
            }
            PendingComponent::Current => {}
            PendingComponent::Parent => {
                // The deepest part that exists must be a directory, or the kernel stops here;
                // `a.txt/x/..` too (the missing part below a file is no directory either).
                let existing = current.ancestors().nth(missing_depth).unwrap_or(&current);
                if std::fs::metadata(existing).is_ok_and(|metadata| !metadata.is_dir()) {
                    return Err(ResolveError::PastFile(existing.to_path_buf()));
                }
                current.pop();
                missing_depth = missing_depth.saturating_sub(1);
            }
            PendingComponent::Normal(name) => {
                current.push(&name);
                if missing_depth > 0 {
                    missing_depth += 1;
                    continue;
                }
                match std::fs::symlink_metadata(&current) {
                    Ok(metadata) if metadata.file_type().is_symlink() => {
                        hops += 1;
                        if hops > MAX_SYMLINK_HOPS {
                            return Err(ResolveError::SymlinkLoop);
                        }
                        let target = std::fs::read_link(&current).map_err(ResolveError::Io)?;
                        current.pop();
                        pending.extend(target.components().rev().map(to_pending));
                    }
                    Ok(_) => {}
                    Err(error)
                        if matches!(
                            error.kind(),
                            io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                        ) =>
                    {
                        missing_depth = 1;
                    }
                    Err(error) => return Err(ResolveError::Io(error)),
                }
            }
        }
    }
    Ok(current)
}

enum PendingComponent {
    Root,
    Current,
    Parent,
    Normal(OsString),
}

fn to_pending(component: Component<'_>) -> PendingComponent {
    match component {
        // Prefixes exist only on Windows; treat them like a root.
        Component::Prefix(_) | Component::RootDir => PendingComponent::Root,
        Component::CurDir => PendingComponent::Current,
        Component::ParentDir => PendingComponent::Parent,
        Component::Normal(name) => PendingComponent::Normal(name.to_os_string()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn setup() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ws/sub")).unwrap();
        std::fs::write(dir.path().join("ws/sub/file.txt"), "hi").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "secret").unwrap();
        let workspace = Workspace::new(dir.path().join("ws")).unwrap();
        (dir, workspace)
    }

    fn assert_outside(workspace: &Workspace, raw: &str) {
        match workspace.resolve(raw) {
            Err(failure @ ToolFailure::OutsideWorkspace { .. }) => {
                let message = failure.to_string();
                assert!(message.starts_with(&format!("Path '{raw}' is outside the workspace '")));
                assert!(message.contains(&workspace.root().display().to_string()));
            }
            other => panic!("{raw}: expected OutsideWorkspace, got {other:?}"),
        }
    }

    #[test]
    fn relative_and_absolute_paths_inside_resolve_to_canonical_paths() {
        let (_dir, ws) = setup();
        let expected = ws.root().join("sub/file.txt");
        assert_eq!(ws.resolve("sub/file.txt").unwrap(), expected);
        assert_eq!(ws.resolve("./sub/../sub/./file.txt").unwrap(), expected);
        let absolute = expected.to_str().unwrap().to_owned();
        assert_eq!(ws.resolve(&absolute).unwrap(), expected);
        assert_eq!(ws.resolve(".").unwrap(), ws.root());
        assert_eq!(ws.display_relative(&expected), "sub/file.txt");
        assert_eq!(ws.display_relative(ws.root()), ".");
    }

    #[test]
    fn paths_that_do_not_exist_yet_resolve_inside() {
        let (_dir, ws) = setup();
        assert_eq!(
            ws.resolve("new/deeper/f.txt").unwrap(),
            ws.root().join("new/deeper/f.txt")
        );
        // `..` out of a missing directory is lexical and stays inside.
        assert_eq!(ws.resolve("new/../sub/x").unwrap(), ws.root().join("sub/x"));
    }

    #[test]
    fn dot_dot_escapes_are_refused() {
        let (_dir, ws) = setup();
        assert_outside(&ws, "../secret.txt");
        assert_outside(&ws, "sub/../../secret.txt");
        assert_outside(&ws, "..");
        assert_outside(&ws, "missing/../../secret.txt");
        assert_outside(&ws, "missing/a/../../../x");
    }

    #[test]
    fn absolute_paths_outside_are_refused() {
        let (dir, ws) = setup();
        assert_outside(&ws, "/etc/passwd");
        assert_outside(&ws, "/");
        assert_outside(&ws, dir.path().join("secret.txt").to_str().unwrap());
        // A sibling whose name merely starts with the root's name is outside too.
        std::fs::create_dir(dir.path().join("ws2")).unwrap();
        assert_outside(&ws, dir.path().join("ws2").to_str().unwrap());
    }

    #[test]
    fn symlinks_that_leave_the_workspace_are_refused() {
        let (dir, ws) = setup();
        symlink("/etc", ws.root().join("etc_link")).unwrap();
        symlink(dir.path().join("secret.txt"), ws.root().join("secret_link")).unwrap();
        symlink("../..", ws.root().join("sub/up_link")).unwrap();
        // A dangling link pointing outside: writing through it would create a file outside.
        symlink(
            dir.path().join("not_yet.txt"),
            ws.root().join("dangling_out"),
        )
        .unwrap();
        assert_outside(&ws, "etc_link");
        assert_outside(&ws, "etc_link/passwd");
        assert_outside(&ws, "secret_link");
        assert_outside(&ws, "sub/up_link/secret.txt");
        assert_outside(&ws, "dangling_out");
        assert_outside(&ws, "dangling_out/child");
    }

    #[test]
    fn symlinks_that_stay_inside_are_followed() {
        let (_dir, ws) = setup();
        symlink("sub", ws.root().join("alias")).unwrap();
        symlink("file.txt", ws.root().join("sub/file_link")).unwrap();
        symlink(ws.root().join("sub/new.txt"), ws.root().join("dangling_in")).unwrap();
        assert_eq!(
            ws.resolve("alias/file.txt").unwrap(),
            ws.root().join("sub/file.txt")
        );
        assert_eq!(
            ws.resolve("sub/file_link").unwrap(),
            ws.root().join("sub/file.txt")
        );
        assert_eq!(
            ws.resolve("dangling_in").unwrap(),
            ws.root().join("sub/new.txt")
        );
        // `..` after a link goes to the parent of the link's target, as the kernel does.
        symlink(ws.root().join("sub"), ws.root().join("deep")).unwrap();
        assert_eq!(
            ws.resolve("deep/../sub/file.txt").unwrap(),
            ws.root().join("sub/file.txt")
        );
    }

    #[test]
    fn a_root_reached_through_a_symlink_is_canonicalised() {
        let (dir, _ws) = setup();
        symlink(dir.path().join("ws"), dir.path().join("ws_link")).unwrap();
        let ws = Workspace::new(dir.path().join("ws_link")).unwrap();
        assert_eq!(
            ws.root(),
            std::fs::canonicalize(dir.path().join("ws")).unwrap()
        );
        let via_link = dir.path().join("ws_link/sub/file.txt");
        assert_eq!(
            ws.resolve(via_link.to_str().unwrap()).unwrap(),
            ws.root().join("sub/file.txt")
        );
    }

    #[test]
    fn symlink_loops_and_bad_input_are_clear_errors() {
        let (_dir, ws) = setup();
        symlink("loop_b", ws.root().join("loop_a")).unwrap();
        symlink("loop_a", ws.root().join("loop_b")).unwrap();
        let message = ws.resolve("loop_a").unwrap_err().to_string();
        assert!(
            message.contains("too many levels of symbolic links"),
            "{message}"
        );
        assert!(matches!(ws.resolve(""), Err(ToolFailure::InvalidInput(_))));
        for raw in ["~", "~/notes.txt"] {
            let message = ws.resolve(raw).unwrap_err().to_string();
            assert!(message.contains("'~' is not expanded"), "{message}");
        }
        // A name that merely starts with `~` is an ordinary name.
        assert_eq!(ws.resolve("~backup").unwrap(), ws.root().join("~backup"));
        assert!(matches!(
            ws.resolve("a\0b"),
            Err(ToolFailure::InvalidInput(_))
        ));
    }

    /// Wherever the kernel can resolve a path, ours must agree with it, and a path we accept
    /// must lie inside the root whatever the kernel says.
    #[test]
    fn resolution_agrees_with_the_kernel() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};

        let (_dir, ws) = setup();
        let root = ws.root().to_path_buf();
        symlink("..", root.join("link_up")).unwrap();
        symlink("/etc", root.join("link_etc")).unwrap();
        symlink("../sub", root.join("sub/link_self")).unwrap();
        symlink("sub/file.txt", root.join("link_file")).unwrap();
        symlink("../nowhere", root.join("dangling")).unwrap();
        let component = prop::sample::select(vec![
            "sub",
            "file.txt",
            "..",
            ".",
            "link_up",
            "link_etc",
            "link_self",
            "link_file",
            "dangling",
            "missing",
            "ws",
            "passwd",
            "secret.txt",
        ]);
        let strategy = (any::<bool>(), prop::collection::vec(component, 1..7));
        let mut runner = TestRunner::new(Config {
            cases: 2_000,
            failure_persistence: None,
            ..Config::default()
        });
        runner
            .run(&strategy, |(absolute, parts)| {
                let relative = parts.join("/");
                let raw = if absolute {
                    format!("{}/{relative}", root.display())
                } else {
                    relative
                };
                let ours = ws.resolve(&raw);
                let kernel = std::fs::canonicalize(root.join(&raw));
                match (&ours, &kernel) {
                    (Ok(path), Ok(real)) => prop_assert_eq!(path, real, "{}", raw),
                    (Err(ToolFailure::OutsideWorkspace { .. }), Ok(real)) => {
                        prop_assert!(!real.starts_with(&root), "{} -> {:?}", raw, real);
                    }
                    (Ok(path), Err(_)) => prop_assert!(path.starts_with(&root), "{}", raw),
                    (Err(ToolFailure::OutsideWorkspace { .. }), Err(_)) => {}
                    // A file named with a trailing `/.`: refused only where the kernel refuses.
                    (Err(ToolFailure::NotADirectory { .. }), Err(_)) => {}
                    // `..` after a file: likewise.
                    (Err(ToolFailure::PastAFile { .. }), Err(_)) => {}
                    (Err(other), _) => prop_assert!(false, "{}: unexpected {:?}", raw, other),
                }
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn a_root_that_is_not_a_directory_is_refused() {
        let (dir, _ws) = setup();
        assert!(Workspace::new(dir.path().join("secret.txt")).is_err());
        assert!(Workspace::new(dir.path().join("missing")).is_err());
    }
}
