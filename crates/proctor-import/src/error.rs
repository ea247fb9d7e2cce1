//! Why an import as a whole could not be made. A single task that cannot be imported is not an
//! error: it is skipped and listed in the report.

use std::path::PathBuf;

use crate::report::ImportReport;

/// An import that produced no suite.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// No task folder was given at all.
    #[error("no task folder given: name a task folder, or a folder of task folders")]
    NoInput,
    /// A given path does not exist.
    #[error("{}: no such file or folder", .0.display())]
    MissingInput(PathBuf),
    /// No given path is a task folder or a folder holding task folders (when some are, the
    /// others are reported in [`ImportReport::not_tasks`] and skipped).
    #[error(
        "{}: not a {format} task folder (it has no {marker}), and no folder in it is one",
        path.display()
    )]
    NoTasksFound {
        /// The path as given.
        path: PathBuf,
        /// `Harbor` or `Terminal-Bench`.
        format: &'static str,
        /// The file that marks a task folder of that format (`task.toml`, `task.yaml`).
        marker: &'static str,
    },
    /// The output folder already holds something; the import never writes over files.
    #[error(
        "{}: the output folder exists and is not empty; name a new folder (the import never writes over files)",
        .0.display()
    )]
    OutputNotEmpty(PathBuf),
    /// The output path exists and is a file.
    #[error("{}: the output path exists and is not a folder", .0.display())]
    OutputNotFolder(PathBuf),
    /// Every task was skipped, so there is no suite to write. The report says why for each.
    #[error("no task could be imported, so no suite was written\n{report}")]
    NothingImported {
        /// What was skipped and why.
        report: Box<ImportReport>,
    },
    /// Reading a task or writing the suite failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder being read or written.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl ImportError {
    /// An I/O error on `path`.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> ImportError {
        ImportError::Io {
            path: path.into(),
            source,
        }
    }
}
