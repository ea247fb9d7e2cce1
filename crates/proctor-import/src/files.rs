//! The regular files of a task's folders (`tests/`, `solution/`), which are copied into the
//! suite. A suite may hold only regular files and folders, so symlinks and special files are
//! left out, with a warning.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use walkdir::WalkDir;

/// One file to copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileEntry {
    /// Where it is read from.
    pub src: PathBuf,
    /// Its path under the folder it is copied into, with `/` separators.
    pub rel: String,
    /// Whether any execute bit is set.
    pub executable: bool,
}

/// Every regular file under `dir`, sorted by path; what is left out is described in
/// `warnings` (paths relative to `shown_as`, e.g. `tests`).
pub(crate) fn collect(dir: &Path, shown_as: &str, warnings: &mut Vec<String>) -> Vec<FileEntry> {
    let mut out = Vec::new();
    for entry in WalkDir::new(dir)
        .follow_links(false)
        .sort_by_file_name()
        .min_depth(1)
    {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                warnings.push(format!("{shown_as}/: cannot be read completely ({e})"));
                continue;
            }
        };
        let rel = entry
            .path()
            .strip_prefix(dir)
            .map(|p| p.to_string_lossy().replace('\\', "/"))
            .unwrap_or_default();
        let ft = entry.file_type();
        if ft.is_dir() {
            continue;
        }
        if ft.is_symlink() {
            warnings.push(format!(
                "{shown_as}/{rel} is a symlink, which a suite may not hold; it was left out (copy the file it points to in its place to keep it)"
            ));
            continue;
        }
        if !ft.is_file() {
            warnings.push(format!(
                "{shown_as}/{rel} is not a regular file; it was left out"
            ));
            continue;
        }
        let executable = entry
            .metadata()
            .map(|m| m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false);
        out.push(FileEntry {
            src: entry.path().to_path_buf(),
            rel,
            executable,
        });
    }
    out
}

/// A single file as an entry named `rel`.
pub(crate) fn single(src: &Path, rel: &str) -> FileEntry {
    let executable = std::fs::metadata(src)
        .map(|m| m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false);
    FileEntry {
        src: src.to_path_buf(),
        rel: rel.to_string(),
        executable,
    }
}

/// `path` relative to the current folder when it lies under it (as the docs show it), else as
/// it is.
pub(crate) fn shown_path(path: &Path) -> PathBuf {
    let Ok(cwd) = std::env::current_dir() else {
        return path.to_path_buf();
    };
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    };
    let absolute = absolute.canonicalize().unwrap_or(absolute);
    let cwd = cwd.canonicalize().unwrap_or(cwd);
    match absolute.strip_prefix(&cwd) {
        Ok(rel) if rel.as_os_str().is_empty() => PathBuf::from("."),
        Ok(rel) => rel.to_path_buf(),
        Err(_) => path.to_path_buf(),
    }
}
