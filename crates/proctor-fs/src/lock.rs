//! Advisory file locks (`flock`, through std's `File::lock`), held until dropped.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::Path;

use crate::error::{fs_err, FsError};

/// An `flock` held until dropped (closing the file releases it, also when the process dies). The
/// file is opened close-on-exec, so programs started meanwhile never inherit the lock.
#[derive(Debug)]
pub struct FileLock {
    _file: File,
}

impl FileLock {
    /// Takes an exclusive (or, when `!exclusive`, shared) lock on `path`, making the file if
    /// needed, and waits for it.
    pub fn acquire(path: &Path, exclusive: bool) -> Result<FileLock, FsError> {
        let file = open_lock_file(path)?;
        if exclusive {
            file.lock().map_err(fs_err("lock", path))?;
        } else {
            file.lock_shared().map_err(fs_err("lock", path))?;
        }
        Ok(FileLock { _file: file })
    }

    /// Takes an exclusive lock on `path` if nobody holds any lock on it; `None` otherwise.
    pub fn try_exclusive(path: &Path) -> Result<Option<FileLock>, FsError> {
        let file = open_lock_file(path)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(FileLock { _file: file })),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => Err(fs_err("lock", path)(e)),
        }
    }
}

/// Opens (making it if needed) a lock file for reading and writing, keeping its content.
fn open_lock_file(path: &Path) -> Result<File, FsError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(fs_err("open the lock file", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exclusive_lock_keeps_others_out_until_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.lock");
        let held = FileLock::acquire(&path, true).expect("lock");
        assert!(
            FileLock::try_exclusive(&path).expect("try").is_none(),
            "a second exclusive lock was granted while the first is held"
        );
        drop(held);
        assert!(FileLock::try_exclusive(&path).expect("try").is_some());
    }

    #[test]
    fn a_shared_lock_blocks_an_exclusive_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.lock");
        let _shared = FileLock::acquire(&path, false).expect("shared");
        assert!(FileLock::try_exclusive(&path).expect("try").is_none());
    }
}
