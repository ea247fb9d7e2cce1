//! Resolving the allow-list: each interface command to the real program the shim will run.
//!
//! A bare name is looked up on `PATH` at run start, then beside proctor's own executable (where
//! the bundled example tools are built); a name with a `/` is a path inside the suite.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

pub use proctor_trial_record::Allowed;

/// The folders searched for bare names: `PATH`, then proctor's own folder.
pub fn search_path() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(own) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        dirs.push(own);
    }
    dirs
}

fn executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Finds a program by name in `dirs`.
pub fn which(name: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    dirs.iter().map(|d| d.join(name)).find(|p| executable(p))
}

/// Resolves one allow-list entry.
pub fn resolve(entry: &str, suite_root: &Path, dirs: &[PathBuf]) -> Result<Allowed, String> {
    if entry.contains('/') {
        let real = suite_root.join(entry);
        if !executable(&real) {
            return Err(format!("`{entry}` is not an executable file in the suite"));
        }
        let name = real
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        return Ok(Allowed { name, real });
    }
    which(entry, dirs)
        .map(|real| Allowed {
            name: entry.to_string(),
            real,
        })
        .ok_or_else(|| format!("`{entry}` was not found on PATH or beside proctor"))
}
