//! The one error of this crate: an operation on a path failed.

use std::io;
use std::path::PathBuf;

/// A file-system operation on `path` failed; the callers turn it into their own error, keeping
/// the operation, the path and the cause.
#[derive(Debug, thiserror::Error)]
#[error("cannot {op} {}: {source}", path.display())]
pub struct FsError {
    /// What was being done (`create`, `write`, `sync`, `rename into place`, `lock` ...).
    pub op: &'static str,
    /// The file or directory involved.
    pub path: PathBuf,
    /// The underlying error.
    #[source]
    pub source: io::Error,
}

/// A mapper from an `io::Error` to an [`FsError`] for `op` on `path`.
pub(crate) fn fs_err(
    op: &'static str,
    path: impl Into<PathBuf>,
) -> impl FnOnce(io::Error) -> FsError {
    let path = path.into();
    move |source| FsError { op, path, source }
}
