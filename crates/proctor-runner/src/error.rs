//! The error a run's set-up and its executors return to the command line: each kind maps to
//! one exit status there (an invalid suite or usage: 2; proctor's own failure or a run it
//! stopped itself: 5), and carries what the user should do about it.

use proctor_suite::Problem;

/// Why a run (or a command about a run) could not do its work.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The suite has problems; each is rendered as a diagnostic.
    #[error("the suite at {suite} has {} problem(s)", problems.len())]
    InvalidSuite {
        /// The suite directory as given.
        suite: String,
        /// Every problem found.
        problems: Vec<Problem>,
    },
    /// The request asks for something impossible, or the machine lacks what it needs.
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
    /// proctor's own failure (I/O, a store it cannot open), with its chain of causes: the
    /// error itself is the first link (a [`Failure`] when a context was added).
    #[error(transparent)]
    Failed(Box<dyn std::error::Error + Send + Sync + 'static>),
}

impl RunError {
    /// A usage error with a hint.
    pub fn usage(message: impl Into<String>, hint: impl Into<String>) -> RunError {
        RunError::Usage {
            message: message.into(),
            hint: Some(hint.into()),
        }
    }

    /// proctor's own failure `e`, as it is.
    pub fn failed(e: impl std::error::Error + Send + Sync + 'static) -> RunError {
        RunError::Failed(Box::new(e))
    }

    /// proctor's own failure with a message: `message`, caused by nothing further.
    pub fn message(message: impl Into<String>) -> RunError {
        RunError::Failed(message.into().into())
    }
}

impl RunError {
    /// The error as one message (for the viewer, which shows it on a page): an invalid suite's
    /// every problem, each with its file, line and column.
    pub fn one_line(&self) -> String {
        match self {
            RunError::InvalidSuite { suite, problems } => {
                let each: Vec<String> = problems
                    .iter()
                    .map(|p| match &p.location {
                        Some(l) => format!(
                            "{}:{}:{}: {}",
                            p.file.display(),
                            l.line,
                            l.column,
                            p.message
                        ),
                        None => format!("{}: {}", p.file.display(), p.message),
                    })
                    .collect();
                format!("{suite} is not a valid suite: {}", each.join("; "))
            }
            RunError::Usage { message, hint } => match hint {
                Some(h) => format!("{message} ({h})"),
                None => message.clone(),
            },
            other => other.to_string(),
        }
    }
}

/// What proctor was doing when an error happened, and the error: the first link of a
/// [`RunError::Failed`] chain.
#[derive(Debug, thiserror::Error)]
#[error("{context}")]
pub struct Failure {
    context: String,
    #[source]
    source: Box<dyn std::error::Error + Send + Sync + 'static>,
}

impl Failure {
    /// `source`, the cause of `context`.
    pub fn new(
        context: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Failure {
        Failure {
            context: context.into(),
            source: Box::new(source),
        }
    }
}

impl From<Failure> for RunError {
    fn from(f: Failure) -> RunError {
        RunError::Failed(Box::new(f))
    }
}

/// Adds what proctor was doing to an error (as `anyhow::Context` does), making it a
/// [`RunError::Failed`].
pub trait Context<T> {
    /// The error, as the cause of `context`.
    fn context(self, context: impl Into<String>) -> Result<T, RunError>;
    /// [`Context::context`] with the message made only on error.
    fn with_context<S: Into<String>>(self, context: impl FnOnce() -> S) -> Result<T, RunError>;
}

impl<T, E: std::error::Error + Send + Sync + 'static> Context<T> for Result<T, E> {
    fn context(self, context: impl Into<String>) -> Result<T, RunError> {
        self.map_err(|e| {
            RunError::Failed(Box::new(Failure {
                context: context.into(),
                source: Box::new(e),
            }))
        })
    }

    fn with_context<S: Into<String>>(self, context: impl FnOnce() -> S) -> Result<T, RunError> {
        self.map_err(|e| {
            RunError::Failed(Box::new(Failure {
                context: context().into(),
                source: Box::new(e),
            }))
        })
    }
}

impl From<proctor_suite::plan::PlanError> for RunError {
    /// Options that do not fit the suite are a usage error; a suite that cannot be read is
    /// proctor's failure.
    fn from(e: proctor_suite::plan::PlanError) -> RunError {
        match e {
            proctor_suite::plan::PlanError::Io(io) => RunError::failed(io),
            other => RunError::usage(
                other.to_string(),
                "check --variant / --task against the suite",
            ),
        }
    }
}

impl From<crate::session::SessionError> for RunError {
    /// Why a run could not start or resume, with what to do about it.
    fn from(e: crate::session::SessionError) -> RunError {
        use crate::session::SessionError;
        if let SessionError::Plan(p) = e {
            return RunError::from(p);
        }
        let hint = match &e {
            SessionError::Isolation(_) => "run with --isolation copy, which copies the fixture per trial and records isolation = \"copy\"",
            SessionError::UnknownRun(_) => "`proctor list` shows the runs in this store",
            SessionError::SuiteChanged { .. } => "start a new run instead, or restore the suite as it was",
            SessionError::NoPlanRecord { .. } => "start a new run",
            SessionError::StillRunning(_) => "wait for that process to end (`proctor list` shows the run as running until then), or stop it with Ctrl-C and resume again; a run killed without a chance to record its end is shown as interrupted and resumes",
            _ => return RunError::failed(e),
        };
        RunError::usage(e.to_string(), hint)
    }
}

impl From<crate::oracle::OracleError> for RunError {
    /// Why the oracle check could not run, with what to do about it.
    fn from(e: crate::oracle::OracleError) -> RunError {
        use crate::oracle::OracleError;
        match e {
        OracleError::UnknownVariant { ref known, .. } if known.is_empty() => RunError::usage(
            format!("--oracle-variant: {e}"),
            "the suite defines no [[variants]]; drop --oracle-variant to use agents/oracle/",
        ),
        OracleError::UnknownVariant { ref known, .. } => {
            let hint = format!("its variants are: {}", known.join(", "));
            RunError::usage(format!("--oracle-variant: {e}"), hint)
        }
        OracleError::MissingOracle(_) => RunError::usage(
            e.to_string(),
            "write agents/oracle/TASK_ID.toml for each task (a scripted agent that does the task right), or name a variant with --oracle-variant",
        ),
        OracleError::Plan(p) => RunError::from(p),
        OracleError::Resume { .. } => RunError::usage(
            e.to_string(),
            "wait for the process that runs it to end, or drop --resume to start a new run",
        ),
        other => RunError::failed(other),
    }
    }
}

impl From<crate::sit::SitError> for RunError {
    /// A sitting's error as the user sees it.
    fn from(e: crate::sit::SitError) -> RunError {
        use crate::sit::SitError;
        match e {
        SitError::Plan(p) => RunError::from(p),
        SitError::BadName(_) => RunError::usage(e.to_string(), "for example --as dana"),
        SitError::Isolation(_) => RunError::usage(
            e.to_string(),
            "sit with --isolation copy, which copies the fixture and records isolation = \"copy\"",
        ),
        other => RunError::failed(other),
    }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_context_is_the_first_link_and_the_error_its_cause() {
        let e = Err::<(), _>(std::io::Error::other("disk on fire"))
            .context("cannot read the run")
            .unwrap_err();
        let RunError::Failed(boxed) = e else {
            panic!("not a failure: {e:?}");
        };
        assert_eq!(boxed.to_string(), "cannot read the run");
        let cause = boxed.source().map(ToString::to_string);
        assert_eq!(cause.as_deref(), Some("disk on fire"));
        assert!(boxed
            .source()
            .and_then(|c| c.downcast_ref::<std::io::Error>())
            .is_some());
    }

    #[test]
    fn one_line_keeps_the_hint_and_the_context() {
        let usage = RunError::usage("no task `x`", "the tasks are: a, b");
        assert_eq!(usage.one_line(), "no task `x` (the tasks are: a, b)");
        let failed = Err::<(), _>(std::io::Error::other("gone"))
            .context("cannot read the run")
            .unwrap_err();
        assert_eq!(failed.one_line(), "cannot read the run");
    }
}
