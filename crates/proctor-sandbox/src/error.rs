//! The errors of [`crate::run`].

use std::io;
use std::path::PathBuf;

/// Why a sandbox run could not produce a [`crate::SandboxReport`]. These are harness faults (an
/// operational failure of proctor), never evidence about the agent: a failed service guard or an
/// agent that cannot be executed is reported in [`crate::SandboxReport::not_started`] instead.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The spec is inconsistent (relative paths, empty command, bad service name, ...).
    #[error("invalid sandbox spec: {0}")]
    InvalidSpec(String),
    /// The sandbox init (`init_exe`) could not be started.
    #[error("cannot start the sandbox init {exe}: {source}")]
    Spawn {
        /// The binary that was executed.
        exe: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// Building the sandbox failed (a namespace, a mount, a file that could not be opened).
    #[error("sandbox setup failed: {0}")]
    Setup(String),
    /// The sandbox init ended without a complete report.
    #[error("the sandbox init ended without a report: {0}")]
    Init(String),
    /// The sandbox init was killed after the agent had run (a limit of the trial's own, such as
    /// its memory, can do that): the report holds what was seen until then, but the workspace's
    /// changes, which the init moves out at the end, are lost. Whether it was the agent's doing
    /// is for the caller to tell (from the trial's control group).
    #[error("the sandbox init ended without a report: {why}")]
    InitLost {
        /// How the init ended, and in which phase.
        why: String,
        /// What the run saw until the init was lost.
        report: Box<crate::SandboxReport>,
    },
    /// The sandbox did not finish within its deadline; every process of it was killed.
    #[error("the sandbox overran its deadline and was killed: {0}")]
    Watchdog(String),
    /// An I/O error in the calling process.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: io::Error,
    },
}

impl SandboxError {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        SandboxError::Io {
            context: context.into(),
            source,
        }
    }
}
