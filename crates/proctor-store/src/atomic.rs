//! Atomic file writes (through `proctor-fs`): a temporary file in the same directory, written,
//! synced, renamed over the target, and the directory synced; and the store's JSON on top.
//!
//! A reader sees either the old file or the complete new one, never a prefix, whatever moment the
//! writer dies at. A writer that dies before the rename leaves the old file as it was and a
//! `.NAME.tmp-…` file beside it, which nothing in the store ever reads. A write that fails (a
//! full disk, above all) removes its temporary file before returning the error.

use crate::error::{Result, StoreError};
use crate::finite::check_finite;
use serde::Serialize;
use std::io::{self, Write};
use std::path::Path;

pub use proctor_fs::is_temp_name;

impl From<proctor_fs::FsError> for StoreError {
    fn from(e: proctor_fs::FsError) -> StoreError {
        StoreError::Io {
            op: e.op,
            path: e.path,
            source: e.source,
        }
    }
}

/// A file being written atomically: bytes go to a temporary file beside the target, and only
/// [`AtomicFile::commit`] makes them visible under the target's name (the store's face of
/// [`proctor_fs::AtomicFile`]).
///
/// Dropping it without committing deletes the temporary file and leaves the target untouched.
#[derive(Debug)]
pub struct AtomicFile(proctor_fs::AtomicFile);

impl AtomicFile {
    /// Starts writing `target`, creating a temporary file in the same directory (which must exist).
    pub fn create(target: impl AsRef<Path>) -> Result<AtomicFile> {
        Ok(AtomicFile(proctor_fs::AtomicFile::create(target)?))
    }

    /// The temporary file's path (for diagnostics and tests).
    pub fn temp_path(&self) -> &Path {
        self.0.temp_path()
    }

    /// Syncs the bytes, renames the temporary file over the target and syncs the directory, so
    /// the new content survives a power loss once this returns.
    pub fn commit(self) -> Result<()> {
        Ok(self.0.commit()?)
    }

    /// Renames the temporary file over the target without waiting for the disk: for a file
    /// that only counts once a later commit point is written, after one `syncfs` for all.
    pub fn commit_unsynced(self) -> Result<()> {
        Ok(self.0.commit_unsynced()?)
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// Syncs a directory, making renames and creations inside it durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    Ok(proctor_fs::sync_dir(dir)?)
}

/// Replaces `path` with `bytes` atomically (temporary file, fsync, rename, fsync of the directory).
///
/// The directory must exist. Readers see the old content or the new, never a mix.
pub fn atomic_write(path: impl AsRef<Path>, bytes: &[u8]) -> Result<()> {
    Ok(proctor_fs::atomic_write(path, bytes)?)
}

/// Replaces `path` with `bytes` atomically (temporary file, then rename) without waiting for the
/// disk: readers, and a proctor killed at any moment, see the old content or the new, never a
/// mix. For a trial's evidence files, which only count once the trial's `trial.json` exists; the
/// caller makes them durable together (one `syncfs`) before writing that commit point.
pub fn atomic_write_unsynced(path: impl AsRef<Path>, bytes: &[u8]) -> Result<()> {
    Ok(proctor_fs::atomic_write_unsynced(path, bytes)?)
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
