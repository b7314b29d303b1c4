//! Writing one spill file without trusting what is already on disk.
//!
//! The default spill directory sits in the shared temporary directory, where another local user
//! may have created it first or planted a symbolic link named like a call id (ids are easy to
//! guess). So the text is written to a file created fresh (`create_new`, which never follows a
//! link) with mode 0600 in a directory created with mode 0700, and on Unix the directory is
//! refused when another user could read, replace or redirect what is written there.
//!
//! The fresh file has a name of its own and is renamed onto the spill file's name once it is
//! complete. Several writers of one name (executors in other threads or processes spilling the
//! same id and text to the default directory) then never collide, and a reader never sees a
//! half-written file: the name holds the previous complete file until the rename replaces it
//! (also a link planted there, which the rename replaces instead of following).

use std::fs::OpenOptions;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Writes `bytes` to `path` inside `dir`, creating `dir` (mode 0700) when it is missing and
/// replacing a previous file (or link) of the same name.
pub(crate) fn write_spill_file(dir: &Path, path: &Path, bytes: &[u8]) -> io::Result<()> {
    create_private_dir(dir)?;
    let (mut file, partial) = create_partial_file(dir, path)?;
    let written = check_dir_is_private_to_writer(dir, &file)
        .and_then(|()| file.write_all(bytes))
        .and_then(|()| file.flush());
    drop(file);
    let renamed = written.and_then(|()| std::fs::rename(&partial, path));
    if renamed.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    renamed
}

/// Creates a fresh private file beside `path` to write it under, with a name no other writer
/// uses: the process id, a counter, and a retry past a name somebody else already took.
fn create_partial_file(dir: &Path, path: &Path) -> io::Result<(std::fs::File, PathBuf)> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let stem = path.file_name().map_or_else(
        || "spill".into(),
        |name| name.to_string_lossy().into_owned(),
    );
    let mut attempts = 0;
    loop {
        let partial = dir.join(format!(
            ".{stem}.{}.{}.partial",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        match open_new_private(&partial) {
            Ok(file) => return Ok((file, partial)),
            // Taken (by a process with this id in another container, or planted): another name.
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists && attempts < 16 => {
                attempts += 1;
            }
            Err(error) => return Err(error),
        }
    }
}

fn create_private_dir(dir: &Path) -> io::Result<()> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let mut builder = std::fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    match builder.create(dir) {
        Err(error) if error.kind() != io::ErrorKind::AlreadyExists => Err(error),
        _ => Ok(()),
    }
}

fn open_new_private(path: &Path) -> io::Result<std::fs::File> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// On Unix: the directory (and the link naming it, if it is one) must belong to the user who
/// just created `file` (or to root), and must not be writable by others unless it is sticky.
#[cfg(unix)]
fn check_dir_is_private_to_writer(dir: &Path, file: &std::fs::File) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt as _;

    const ROOT: u32 = 0;
    const STICKY: u32 = 0o1000;
    const WRITABLE_BY_OTHERS: u32 = 0o002;

    let writer = file.metadata()?.uid();
    let refuse = |why: String| {
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "refusing spill directory {}: {why}; choose another spill directory",
                dir.display()
            ),
        ))
    };
    let link = std::fs::symlink_metadata(dir)?;
    if link.file_type().is_symlink() && link.uid() != writer && link.uid() != ROOT {
        return refuse(format!(
            "it is a symbolic link owned by another user (uid {})",
            link.uid()
        ));
    }
    let target = std::fs::metadata(dir)?;
    if target.uid() != writer && target.uid() != ROOT {
        return refuse(format!(
            "it is owned by another user (uid {})",
            target.uid()
        ));
    }
    if target.mode() & WRITABLE_BY_OTHERS != 0 && target.mode() & STICKY == 0 {
        return refuse("anyone may replace files in it (world-writable, not sticky)".into());
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_dir_is_private_to_writer(_dir: &Path, _file: &std::fs::File) -> io::Result<()> {
    Ok(())
}

#[cfg(all(test, unix))]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    use std::path::PathBuf;

    use super::*;

    fn fresh_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "ferroloop-spill-file-test-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_new_directory_and_file_are_private() {
        let base = fresh_dir("private");
        let dir = base.join("spill");
        let path = dir.join("t1.txt");
        write_spill_file(&dir, &path, b"full result").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"full result");
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        // Spilling the same id again replaces the file.
        write_spill_file(&dir, &path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn a_planted_link_is_replaced_not_followed() {
        let base = fresh_dir("link");
        let dir = base.join("spill");
        std::fs::create_dir(&dir).unwrap();
        let victim = base.join("victim");
        std::fs::write(&victim, b"keep me").unwrap();
        let path = dir.join("toolu_guessable.txt");
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        write_spill_file(&dir, &path, b"result").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
        let written = std::fs::symlink_metadata(&path).unwrap();
        assert!(written.file_type().is_file());
        assert_eq!(std::fs::read(&path).unwrap(), b"result");
        let _ = std::fs::remove_dir_all(&base);
    }

    /// Writers of one name at once (executors in other threads spilling the same id and text
    /// to the shared default directory) all succeed, and the name always holds a whole file.
    /// With remove-then-create, some failed with "File exists" and readers saw partial files.
    #[test]
    fn concurrent_writers_of_one_name_all_succeed() {
        let base = fresh_dir("race");
        let dir = base.join("spill");
        let path = dir.join("call_0-same.txt");
        let text = "x".repeat(64 * 1024);
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| {
                    for _ in 0..50 {
                        write_spill_file(&dir, &path, text.as_bytes()).unwrap();
                        assert_eq!(std::fs::read(&path).unwrap().len(), text.len());
                    }
                });
            }
        });
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(names, ["call_0-same.txt"], "no partial file is left behind");
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn a_world_writable_directory_without_the_sticky_bit_is_refused() {
        let base = fresh_dir("open");
        let dir = base.join("spill");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let path = dir.join("t.txt");
        let error = write_spill_file(&dir, &path, b"secret").unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::PermissionDenied);
        assert!(error.to_string().contains("world-writable"), "{error}");
        assert!(!path.exists(), "nothing is left behind");
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            0,
            "no partial file either"
        );
        // Sticky, like /tmp itself: accepted.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
        write_spill_file(&dir, &path, b"ok").unwrap();
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn a_directory_owned_by_another_user_is_refused() {
        let base = fresh_dir("foreign");
        let dir = base.join("spill");
        std::fs::create_dir(&dir).unwrap();
        // Only root can give a directory away; elsewhere this case cannot be set up.
        if std::os::unix::fs::chown(&dir, Some(54_321), None).is_err() {
            let _ = std::fs::remove_dir_all(&base);
            return;
        }
        let path = dir.join("t.txt");
        let error = write_spill_file(&dir, &path, b"secret").unwrap_err();
        assert!(error.to_string().contains("uid 54321"), "{error}");
        assert!(!path.exists());
        let _ = std::fs::remove_dir_all(&base);
    }
}
