//! Exit statuses and the errors a user can expect, each mapped to one status.

use std::process::ExitCode;

use proctor_suite::Problem;

/// The exit statuses every command shares (documented in `docs/outcomes.md`, "Exit status").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Every graded trial met its task's `expect` (a correct refusal or ask counts), a finished
    /// release run's promotion gates all passed, or a command that is not a run succeeded.
    Success = 0,
    /// Some graded trial did not meet its task's `expect`; for `verify`, some citation does not
    /// hold.
    NotSucceeded = 1,
    /// Invalid suite or usage; for `verify`, a malformed citation.
    Invalid = 2,
    /// A run is unfinished: interrupted, errored or ungradeable trials.
    Unfinished = 3,
    /// A promotion gate failed (`compare --gate`, or a finished release run of a suite with
    /// `[promotion]`).
    GateFailed = 4,
    /// proctor itself could not do its work: a store that cannot be opened, an I/O failure, a
    /// harness fault outside any trial. Nothing about the agents or the suite.
    Internal = 5,
}

impl From<Status> for ExitCode {
    fn from(s: Status) -> ExitCode {
        ExitCode::from(s as u8)
    }
}

/// An error the user can act on, with the status it exits with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The suite has problems; each is rendered as a diagnostic.
    #[error("the suite at {suite} has {} problem(s)", problems.len())]
    InvalidSuite {
        /// The suite directory as given.
        suite: String,
        /// Every problem found.
        problems: Vec<Problem>,
    },
    /// The command line asks for something impossible.
    #[error("{message}")]
    Usage {
        /// What was wrong.
        message: String,
        /// What to do instead.
        hint: Option<String>,
    },
    /// proctor stopped a run itself (its store ran out of space or failed): the run is
    /// recorded as `interrupted` with the reason, and it can be resumed once that is fixed.
    #[error("{message}")]
    Stopped {
        /// What stopped it.
        message: String,
        /// What to do, then how to resume.
        hint: String,
    },
    /// proctor's own failure (I/O, a store it cannot open), with its chain of causes.
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

impl Error {
    /// The exit status this error leads to.
    pub fn exit_code(&self) -> Status {
        match self {
            Error::InvalidSuite { .. } | Error::Usage { .. } => Status::Invalid,
            Error::Other(_) | Error::Stopped { .. } => Status::Internal,
        }
    }

    /// What to do about proctor's own failure, when the store says what went wrong: a damaged
    /// index (run `reindex`), a read-only store, a full disk.
    pub fn hint(&self) -> Option<String> {
        let Error::Other(e) = self else {
            return None;
        };
        let store = e
            .chain()
            .find_map(|c| c.downcast_ref::<proctor_store::StoreError>())?;
        store_hint(store)
    }

    /// A usage error with a hint.
    pub fn usage(message: impl Into<String>, hint: impl Into<String>) -> Error {
        Error::Usage {
            message: message.into(),
            hint: Some(hint.into()),
        }
    }
}

/// What to do about a store error, for the ones a user can fix.
pub fn store_hint(e: &proctor_store::StoreError) -> Option<String> {
    use proctor_store::StoreError;
    match e {
        StoreError::IndexDamaged { path, .. } => {
            let store = path.parent().unwrap_or(path);
            Some(format!(
                "`proctor reindex --store {}` moves the damaged index aside and rebuilds it from \
                 the run folders (no evidence is lost: the folders are the truth)",
                store.display()
            ))
        }
        StoreError::ReadOnly { .. } => Some(
            "a read-only store can be listed, shown, compared and exported; running, resuming, \
             rescoring and reindexing need a writable copy of it"
                .to_string(),
        ),
        e if e.is_out_of_space() => Some(
            "free space on the store's file system (or pass --store DIR on another one), then \
             try again"
                .to_string(),
        ),
        _ => None,
    }
}

impl From<proctor_runner::RunError> for Error {
    fn from(e: proctor_runner::RunError) -> Error {
        use proctor_runner::RunError;
        match e {
            RunError::InvalidSuite { suite, problems } => Error::InvalidSuite { suite, problems },
            RunError::Usage { message, hint } => Error::Usage { message, hint },
            RunError::Stopped { message, hint } => Error::Stopped { message, hint },
            RunError::Failed(boxed) => Error::Other(anyhow::Error::from_boxed(boxed)),
        }
    }
}

impl From<proctor_claims::ClaimsError> for Error {
    fn from(e: proctor_claims::ClaimsError) -> Error {
        match e {
            proctor_claims::ClaimsError::Usage { message, hint } => Error::usage(message, hint),
            other => Error::Other(anyhow::Error::new(other)),
        }
    }
}
