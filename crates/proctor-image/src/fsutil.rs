//! File system helpers of the cache: temporary paths removed unless kept, syncing, sizes; the
//! advisory locks and atomic writes are `proctor-fs`'s.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{ImageError, IoContext, Result};
use crate::unpack::remove_tree;

pub(crate) use proctor_fs::FileLock;

/// Flushes the file system holding `path` to disk (`syncfs`), so that what was written there
/// survives a power loss before it is renamed into place.
pub(crate) fn sync_file_system(path: &Path) -> Result<()> {
    use std::os::fd::AsRawFd;
    let dir = File::open(path).ctx("opening", path)?;
    // SAFETY: syncfs only reads the descriptor, which `dir` keeps open for the call.
    let rc = unsafe { libc::syncfs(dir.as_raw_fd()) };
    if rc != 0 {
        return Err(ImageError::io(
            "syncing the file system of",
            path,
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// A name no other process or thread uses at the same time: `PREFIX-PID-NANOS-N`.
pub(crate) fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}-{}-{nanos}-{n}", std::process::id())
}

/// A temporary file or folder, removed when dropped unless [`TempPath::keep`] was called.
#[derive(Debug)]
pub(crate) struct TempPath {
    path: PathBuf,
    armed: bool,
}

impl TempPath {
    /// Takes charge of `path` (which need not exist yet).
    pub(crate) fn new(path: PathBuf) -> TempPath {
        TempPath { path, armed: true }
    }

    /// The path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Leaves the path alone when dropped (it was renamed into place).
    pub(crate) fn keep(mut self) {
        self.armed = false;
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        if self.armed {
            // Best effort: whatever is left is removed by the next prune.
            let _ = remove_tree(&self.path);
        }
    }
}

/// Writes `bytes` to `target` atomically: a temporary file in `tmp_dir` (on the same file
/// system), flushed to disk, then renamed over `target` (`proctor_fs::AtomicFile`).
pub(crate) fn atomic_write(tmp_dir: &Path, target: &Path, bytes: &[u8]) -> Result<()> {
    let mut file = proctor_fs::AtomicFile::create_in(tmp_dir, target)?;
    file.write_all(bytes).ctx("writing", file.temp_path())?;
    file.commit()?;
    Ok(())
}

/// The total size of the regular files under `path` (not following links); 0 where unreadable.
pub(crate) fn tree_size(path: &Path) -> u64 {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return if meta.is_file() { meta.len() } else { 0 };
    }
    fs::read_dir(path)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| tree_size(&e.path()))
                .sum()
        })
        .unwrap_or(0)
}
