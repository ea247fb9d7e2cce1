//! Atomic file writes: a temporary file in the same directory, written, synced, renamed over the
//! target, and the directory synced.
//!
//! A reader sees either the old file or the complete new one, never a prefix, whatever moment the
//! writer dies at. A writer that dies before the rename leaves the old file as it was and a
//! `.NAME.tmp-…` file beside it, which nothing in the store ever reads. A write that fails (a
//! full disk, above all) removes its temporary file before returning the error.

use crate::error::{io_err, Result, StoreError};
use crate::finite::check_finite;
use serde::Serialize;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The marker in the name of every temporary file: `.trial.json.tmp-PID-N`.
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
    temp: PathBuf,
    file: Option<File>,
}

impl AtomicFile {
    /// Starts writing `target`, creating a temporary file in the same directory (which must exist).
    pub fn create(target: impl AsRef<Path>) -> Result<AtomicFile> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let target = target.as_ref().to_path_buf();
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| StoreError::Io {
                op: "write",
                path: target.clone(),
                source: io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"),
            })?;
        let temp = target.with_file_name(format!(
            ".{name}{TEMP_MARKER}{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            .map_err(io_err("create", &temp))?;
        Ok(AtomicFile {
            target,
            temp,
            file: Some(file),
        })
    }

    /// The temporary file's path (for diagnostics and tests).
    pub fn temp_path(&self) -> &Path {
        &self.temp
    }

    /// Syncs the bytes, renames the temporary file over the target and syncs the directory, so
    /// the new content survives a power loss once this returns.
    pub fn commit(mut self) -> Result<()> {
        let file = self.file.take();
        if let Some(mut file) = file {
            file.flush().map_err(io_err("write", &self.temp))?;
            file.sync_all().map_err(io_err("sync", &self.temp))?;
        }
        fs::rename(&self.temp, &self.target).map_err(io_err("rename into place", &self.target))?;
        sync_dir(parent_dir(&self.target))?;
        // Renamed: nothing for Drop to clean up.
        self.temp = PathBuf::new();
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.file {
            Some(f) => f.write(buf),
            None => Err(io::Error::other("atomic file already committed")),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.file {
            Some(f) => f.flush(),
            None => Ok(()),
        }
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if !self.temp.as_os_str().is_empty() {
            self.file = None;
            let _ = fs::remove_file(&self.temp);
        }
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
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("sync directory", dir))
}

/// Replaces `path` with `bytes` atomically (temporary file, fsync, rename, fsync of the directory).
///
/// The directory must exist. Readers see the old content or the new, never a mix.
pub fn atomic_write(path: impl AsRef<Path>, bytes: &[u8]) -> Result<()> {
    let path = path.as_ref();
    let mut f = AtomicFile::create(path)?;
    f.write_all(bytes).map_err(io_err("write", f.temp_path()))?;
    f.commit()
}

/// Replaces `path` with `bytes` atomically (temporary file, then rename) without waiting for the
/// disk: readers, and a proctor killed at any moment, see the old content or the new, never a
/// mix. For a trial's evidence files, which only count once the trial's `trial.json` exists; the
/// caller makes them durable together (one `syncfs`) before writing that commit point.
pub fn atomic_write_unsynced(path: impl AsRef<Path>, bytes: &[u8]) -> Result<()> {
    let path = path.as_ref();
    let dir = parent_dir(path);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let temp = dir.join(format!(".{name}{TEMP_MARKER}{}-u{n}", std::process::id()));
    if let Err(e) = fs::write(&temp, bytes) {
        // A full disk (or any other failure) must not leave the part written behind.
        let _ = fs::remove_file(&temp);
        return Err(io_err("write", &temp)(e));
    }
    fs::rename(&temp, path).map_err(|e| {
        let _ = fs::remove_file(&temp);
        io_err("rename into place", path)(e)
    })
}

/// [`atomic_write_unsynced`] of pretty JSON, refusing non-finite numbers.
pub fn atomic_write_json_unsynced<T: Serialize + ?Sized>(
    path: impl AsRef<Path>,
    value: &T,
) -> Result<()> {
    let path = path.as_ref();
    let bytes = to_json_bytes(path, value)?;
    atomic_write_unsynced(path, &bytes)
}

/// Serializes `value` as pretty JSON (with a final newline) without writing anything.
///
/// Fails with [`StoreError::NonFinite`] when the value holds NaN or ±Infinity anywhere, instead of
/// the `null` that `serde_json` would silently write; `path` is only used in errors.
pub fn to_json_bytes<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<Vec<u8>> {
    ensure_finite(path, value)?;
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|source| StoreError::Json {
        path: path.to_path_buf(),
        source,
    })?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Fails with [`StoreError::NonFinite`] when `value` holds NaN or ±Infinity anywhere: the check
/// for a writer that streams JSON itself instead of going through [`to_json_bytes`]. `path` is
/// only used in the error.
pub fn ensure_finite<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<()> {
    check_finite(value).map_err(|n| StoreError::NonFinite {
        path: path.to_path_buf(),
        at: n.path,
    })
}

/// Replaces `path` with `value` as pretty JSON, atomically.
///
/// A value holding NaN or ±Infinity is refused with [`StoreError::NonFinite`] and nothing is
/// written: JSON in the store never holds a non-finite number, nor a `null` standing in for one.
pub fn atomic_write_json<T: Serialize + ?Sized>(path: impl AsRef<Path>, value: &T) -> Result<()> {
    let path = path.as_ref();
    let bytes = to_json_bytes(path, value)?;
    atomic_write(path, &bytes)
}
