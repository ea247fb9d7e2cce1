//! Atomic file writes: a temporary file in the same directory, written, synced, renamed over the
//! target (`tempfile`'s `persist`), and the directory synced.
//!
//! A reader sees either the old file or the complete new one, never a prefix, whatever moment the
//! writer dies at. A writer that dies before the rename leaves the old file as it was and a
//! `.NAME.tmp-…` file beside it ([`is_temp_name`]), which nothing reads. A write that fails (a
//! full disk, above all) removes its temporary file before returning the error.

use std::fs::{File, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

use crate::error::{fs_err, FsError};

/// The marker in the name of every temporary file: `.trial.json.tmp-XXXXXX`.
const TEMP_MARKER: &str = ".tmp-";

/// Whether a file name is one of this module's temporary files (left behind by a writer that
/// died before renaming).
pub fn is_temp_name(name: &str) -> bool {
    name.starts_with('.') && name.contains(TEMP_MARKER)
}

/// A file being written atomically: bytes go to a temporary file beside the target, and only
/// [`AtomicFile::commit`] makes them visible under the target's name.
///
/// Dropping it without committing deletes the temporary file and leaves the target untouched.
#[derive(Debug)]
pub struct AtomicFile {
    target: PathBuf,
    temp: NamedTempFile,
}

impl AtomicFile {
    /// Starts writing `target`, creating a temporary file in the same directory (which must exist).
    pub fn create(target: impl AsRef<Path>) -> Result<AtomicFile, FsError> {
        let target = target.as_ref();
        AtomicFile::create_in(parent_dir(target), target)
    }

    /// Starts writing `target` through a temporary file in `temp_dir`, which must be on the same
    /// file system (a cache's own scratch folder, say).
    pub fn create_in(temp_dir: &Path, target: impl AsRef<Path>) -> Result<AtomicFile, FsError> {
        let target = target.as_ref().to_path_buf();
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| FsError {
                op: "write",
                path: target.clone(),
                source: io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"),
            })?;
        let temp = tempfile::Builder::new()
            .prefix(&format!(".{name}{TEMP_MARKER}"))
            // As a plain `File::create` would: 0666 less the umask (tempfile's own is 0600).
            .permissions(Permissions::from_mode(0o666))
            .tempfile_in(temp_dir)
            .map_err(fs_err(
                "create",
                temp_dir.join(format!(".{name}{TEMP_MARKER}")),
            ))?;
        Ok(AtomicFile { target, temp })
    }

    /// The temporary file's path (for diagnostics and tests).
    pub fn temp_path(&self) -> &Path {
        self.temp.path()
    }

    /// Syncs the bytes, renames the temporary file over the target and syncs the target's
    /// directory, so the new content survives a power loss once this returns.
    pub fn commit(self) -> Result<(), FsError> {
        self.persist(true)
    }

    /// Renames the temporary file over the target without waiting for the disk: for a file
    /// that only counts once a later commit point is written, after one `syncfs` for all.
    pub fn commit_unsynced(self) -> Result<(), FsError> {
        self.persist(false)
    }

    /// Renames the temporary file over the target, waiting for the disk when `durable`.
    fn persist(mut self, durable: bool) -> Result<(), FsError> {
        let temp_path = self.temp.path().to_path_buf();
        self.temp.flush().map_err(fs_err("write", &temp_path))?;
        if durable {
            self.temp
                .as_file()
                .sync_all()
                .map_err(fs_err("sync", &temp_path))?;
        }
        // On failure the temporary file is dropped, which removes it.
        self.temp
            .persist(&self.target)
            .map_err(|e| fs_err("rename into place", &self.target)(e.error))?;
        if durable {
            sync_dir(parent_dir(&self.target))?;
        }
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.temp.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.temp.flush()
    }
}

/// The directory holding `path` (`.` for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Syncs a directory, making renames and creations inside it durable.
pub fn sync_dir(dir: &Path) -> Result<(), FsError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(fs_err("sync directory", dir))
}

/// Replaces `path` with `bytes` atomically (temporary file, fsync, rename, fsync of the directory).
///
/// The directory must exist. Readers see the old content or the new, never a mix.
pub fn atomic_write(path: impl AsRef<Path>, bytes: &[u8]) -> Result<(), FsError> {
    let mut f = AtomicFile::create(path)?;
    f.write_all(bytes)
        .map_err(fs_err("write", f.temp_path().to_path_buf()))?;
    f.commit()
}

/// Replaces `path` with `bytes` atomically (temporary file, then rename) without waiting for the
/// disk: readers, and a process killed at any moment, see the old content or the new, never a
/// mix. For files that only count once a later commit point is written; the caller makes them
/// durable together (one `syncfs`) before writing that.
pub fn atomic_write_unsynced(path: impl AsRef<Path>, bytes: &[u8]) -> Result<(), FsError> {
    let mut f = AtomicFile::create(path)?;
    f.write_all(bytes)
        .map_err(fs_err("write", f.temp_path().to_path_buf()))?;
    f.persist(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn names_in(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .expect("read dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn both_writers_replace_the_content_and_leave_no_temporary_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("a.json");
        atomic_write(&path, b"one").expect("write");
        atomic_write_unsynced(&path, b"two, longer").expect("rewrite");
        assert_eq!(std::fs::read(&path).expect("read"), b"two, longer");
        assert_eq!(names_in(dir.path()), vec!["a.json"]);
    }

    #[test]
    fn the_file_gets_the_mode_a_plain_create_would_give() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("a.json");
        atomic_write(&path, b"x").expect("write");
        let plain = dir.path().join("plain");
        std::fs::write(&plain, b"x").expect("write");
        let mode = |p: &Path| std::fs::metadata(p).expect("meta").mode() & 0o777;
        assert_eq!(mode(&path), mode(&plain));
    }

    #[test]
    fn a_temporary_file_in_another_folder_is_renamed_into_place() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tmp = dir.path().join("tmp");
        std::fs::create_dir(&tmp).expect("mkdir");
        let target = dir.path().join("blob");
        let mut f = AtomicFile::create_in(&tmp, &target).expect("create");
        assert!(f.temp_path().starts_with(&tmp));
        f.write_all(b"content").expect("write");
        f.commit().expect("commit");
        assert_eq!(std::fs::read(&target).expect("read"), b"content");
        assert!(names_in(&tmp).is_empty());
    }

    #[test]
    fn a_failed_rename_removes_the_temporary_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        // A folder with something in it cannot be replaced by a file.
        let target = dir.path().join("busy");
        std::fs::create_dir(&target).expect("mkdir");
        std::fs::write(target.join("x"), b"x").expect("write");
        let err = atomic_write(&target, b"y").expect_err("a file over a folder");
        assert_eq!(err.op, "rename into place");
        assert_eq!(names_in(dir.path()), vec!["busy"]);
    }
}
