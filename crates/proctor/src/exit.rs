//! Exit statuses and the errors a user can expect, each mapped to one status.

use std::process::ExitCode;

use proctor_suite::Problem;

/// The exit statuses of DESIGN.md, "Commands".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Every trial graded and completed (or a command that is not a run succeeded).
    Success = 0,
    /// Some trial did not complete.
    NotCompleted = 1,
    /// Invalid suite or usage.
    Invalid = 2,
    /// A run is unfinished: interrupted, errored or ungradeable trials.
    Unfinished = 3,
    /// A promotion gate failed.
    GateFailed = 4,
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
    /// Anything else, with its chain of causes.
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

impl Error {
    /// The exit status this error leads to.
    pub fn exit_code(&self) -> Status {
        match self {
            Error::InvalidSuite { .. } | Error::Usage { .. } => Status::Invalid,
            Error::Other(_) => Status::Unfinished,
        }
    }

    /// A usage error with a hint.
    pub fn usage(message: impl Into<String>, hint: impl Into<String>) -> Error {
        Error::Usage {
            message: message.into(),
            hint: Some(hint.into()),
        }
    }
}
