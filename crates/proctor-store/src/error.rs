//! The one error type of the store.

use crate::RunId;
use std::path::PathBuf;

/// Everything that can go wrong while keeping or reading evidence.
///
/// Messages name the file or the run involved, so the CLI can print them as they are.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file-system operation failed.
    #[error("cannot {op} {}: {source}", path.display())]
    Io {
        /// What was being done (`write`, `read`, `rename`, `create directory` ...).
        op: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A JSON file could not be written or did not parse.
    #[error("{}: {source}", path.display())]
    Json {
        /// The JSON file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },

    /// A value to be written as JSON held NaN or ±Infinity, which JSON cannot express; nothing
    /// was written.
    #[error("{}: refusing to write a non-finite number (NaN or Infinity) at {at}", path.display())]
    NonFinite {
        /// The file that was not written.
        path: PathBuf,
        /// Where in the value, as `$.field[index]`.
        at: String,
    },

    /// The SQLite index failed.
    #[error("index {}: {source}", path.display())]
    Index {
        /// The `index.sqlite` file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: rusqlite::Error,
    },

    /// `index.sqlite` cannot be read at all: it is not a SQLite database, or SQLite finds it
    /// corrupt. `proctor reindex` ([`crate::Store::rebuild_index`]) moves it aside and rebuilds
    /// it from the run folders.
    #[error(
        "index {} is unreadable ({source}); it is damaged or is not a proctor index",
        path.display()
    )]
    IndexDamaged {
        /// The `index.sqlite` file.
        path: PathBuf,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },

    /// The store cannot be written (a read-only file system, or no write permission), and the
    /// operation must write.
    #[error("the store at {} is read-only: cannot {what}", root.display())]
    ReadOnly {
        /// The store's root directory.
        root: PathBuf,
        /// What could not be done (`rebuild the index`, `create a run`, ...).
        what: &'static str,
    },

    /// The index was written by a newer proctor with a schema this one does not know.
    #[error(
        "index {} has schema version {found}, newer than the {supported} this proctor knows; \
         use a newer proctor, or delete the file and run `reindex`",
        path.display()
    )]
    IndexTooNew {
        /// The `index.sqlite` file.
        path: PathBuf,
        /// The `user_version` found in the file.
        found: i64,
        /// The version this crate writes.
        supported: i64,
    },

    /// A string is not a run id.
    #[error("`{0}` is not a run id (expected YYYYMMDD-HHMMSS-xxxx, e.g. 20261129-221503-7f3a)")]
    InvalidRunId(String),

    /// A trial id cannot be used as a folder name inside the run.
    #[error("`{id}` cannot be a trial id: {why}")]
    InvalidTrialId {
        /// The rejected id.
        id: String,
        /// Why it was rejected.
        why: &'static str,
    },

    /// The store holds no run at all (for `latest` or any prefix).
    #[error("no runs in store {}", store.display())]
    NoRuns {
        /// The store's root directory.
        store: PathBuf,
    },

    /// No run id starts with the given prefix.
    #[error("no run matches `{prefix}`; latest runs: {}", join_ids(recent))]
    NoRunMatches {
        /// What the user typed.
        prefix: String,
        /// The newest few runs in the store, newest first.
        recent: Vec<RunId>,
    },

    /// Several run ids start with the given prefix.
    #[error(
        "`{prefix}` is ambiguous, it matches: {}; give more characters",
        join_ids(matches)
    )]
    AmbiguousRun {
        /// What the user typed.
        prefix: String,
        /// Every matching run id, oldest first.
        matches: Vec<RunId>,
    },

    /// A run id that is well formed but has no folder in the store.
    #[error("run {id} not found in store {}", store.display())]
    RunNotFound {
        /// The missing run.
        id: RunId,
        /// The store's root directory.
        store: PathBuf,
    },

    /// An `ungradeable` trial without a reason: proctor keeps no such record.
    #[error("trial {trial} is ungradeable without a reason; no reason, no record")]
    MissingReason {
        /// The trial id.
        trial: String,
    },

    /// Another process (or another handle in this one) is writing the run: it holds the run's
    /// lock file, so the run cannot be resumed now.
    #[error("run {id} is still running ({holder})")]
    RunLocked {
        /// The run.
        id: RunId,
        /// Who holds its lock, as the lock file names it.
        holder: crate::LockHolder,
    },

    /// The store was opened on a compute node ([`crate::Store::open_on_node`]), without its
    /// index: what needs the index must run where the store was opened with [`crate::Store::open`].
    #[error("store {} is open without its index (on a compute node); run this where the run was submitted", store.display())]
    NoIndex {
        /// The store's root folder.
        store: PathBuf,
    },

    /// A trial whose `trial.json` exists but is empty or does not parse (torn by a crash, cut
    /// short, overwritten): its outcome cannot be read. It counts as unfinished (`run --resume`
    /// runs it again); its other evidence files are left as they are.
    #[error("trial {trial} of run {run} is damaged: {reason}")]
    TrialDamaged {
        /// The run.
        run: RunId,
        /// The trial id.
        trial: String,
        /// What is wrong with its `trial.json`, in a sentence.
        reason: String,
        /// The `trial.json` file.
        path: PathBuf,
    },

    /// A trial that has no finished `trial.json`.
    #[error("trial {trial} of run {run} is not finished (no readable trial.json)")]
    TrialNotFound {
        /// The run.
        run: RunId,
        /// The trial id.
        trial: String,
    },

    /// The copy of its suite a run keeps (`suite/`, listed with hashes in `suite.json`) does
    /// not match its list: a file was changed, added or removed after the run kept it.
    #[error("the copy of the suite that run {run} keeps is damaged: {path}: {reason}")]
    KeptSuiteDamaged {
        /// The run.
        run: String,
        /// The file, relative to the kept suite's top (or `suite.json`).
        path: String,
        /// What is wrong, in a sentence.
        reason: String,
    },
}

impl StoreError {
    /// Whether this is the file system refusing a write because it is full (`ENOSPC`) or the
    /// user's quota is spent (`EDQUOT`): freeing space, not changing anything, fixes it.
    pub fn is_out_of_space(&self) -> bool {
        match self {
            StoreError::Io { source, .. } => is_out_of_space(source),
            StoreError::Index { source, .. } => matches!(
                source.sqlite_error_code(),
                Some(rusqlite::ErrorCode::DiskFull)
            ),
            _ => false,
        }
    }
}

/// Whether an I/O error is the file system being full (`ENOSPC`) or a spent quota (`EDQUOT`),
/// also when it is wrapped (`io::Error::other(inner)`) one or more times.
pub fn is_out_of_space(e: &std::io::Error) -> bool {
    if matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT)) {
        return true;
    }
    let inner = e.get_ref().map(|i| i as &(dyn std::error::Error + 'static));
    match inner {
        Some(inner) => {
            if let Some(io) = inner.downcast_ref::<std::io::Error>() {
                is_out_of_space(io)
            } else if let Some(store) = inner.downcast_ref::<StoreError>() {
                store.is_out_of_space()
            } else {
                false
            }
        }
        None => false,
    }
}

/// Short alias used throughout the crate.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

fn join_ids(ids: &[RunId]) -> String {
    if ids.is_empty() {
        return "(none)".to_string();
    }
    ids.iter()
        .map(|id| id.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Builds an [`StoreError::Io`] from an operation name and a path.
pub(crate) fn io_err(
    op: &'static str,
    path: impl Into<PathBuf>,
) -> impl FnOnce(std::io::Error) -> StoreError {
    let path = path.into();
    move |source| StoreError::Io { op, path, source }
}
