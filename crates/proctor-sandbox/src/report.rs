//! What happened in one sandbox run: [`SandboxReport`] and its parts.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use proctor_records::isolation::{
    Exit, FullStop, Isolation, Namespace, ProbeOutcome, ServiceReport, WorkspaceKind,
};

/// The outcome of one [`crate::run`]: how the agent ended, what the services did, and what
/// isolation was really in effect. By the time it exists, no process of the trial is left.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxReport {
    /// The agent's exit code, when its main process exited normally.
    pub exit_code: Option<i32>,
    /// The signal that ended the agent's main process, if one did (SIGKILL when it was still
    /// running at the end of the grace period).
    pub signal: Option<i32>,
    /// The agent was still running at `wall_timeout` and was stopped.
    pub timed_out: bool,
    /// From the agent's start until its whole process tree was gone.
    pub wall: Duration,
    /// User plus system CPU time of the agent's process tree (every process of it, reaped or
    /// killed), where measurable.
    pub agent_cpu: Option<Duration>,
    /// One entry per service that was attempted, in start order.
    pub services: Vec<ServiceReport>,
    /// Why the agent never started (a service failed its readiness probe or guard, or the agent
    /// command could not be executed). `None` when the agent ran.
    pub not_started: Option<String>,
    /// What isolation was really in effect.
    pub isolation: Isolation,
    /// The whole call to `run`: setup, agent, full stop.
    pub total: Duration,
    /// What the trial ran into of its [`crate::SandboxLimits`].
    #[serde(default)]
    pub bounds: BoundsReport,
    /// In a conversation ([`crate::SandboxSpec::max_turns`] above 1), each turn of the agent in
    /// order; the fields above then say how the last turn ended (`exit_code`, `signal`), whether
    /// any turn reached the conversation's wall timeout, and the agent's whole time and CPU.
    /// Empty for a run of one turn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<TurnReport>,
}

/// One turn of the agent in a conversation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnReport {
    /// How the turn's main process ended; `None` when its command could not be executed.
    pub exit: Option<Exit>,
    /// Why the turn's command could not be executed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec_failed: Option<String>,
    /// The turn was still running at the conversation's wall timeout and was stopped.
    pub timed_out: bool,
    /// From the agent's first start to this turn's start.
    pub started: Duration,
    /// From the turn's start until its whole process tree was gone.
    pub wall: Duration,
    /// Bytes of the agent's stdout file written when the turn ended.
    pub stdout_end: u64,
    /// Bytes of the agent's stderr file written when the turn ended.
    pub stderr_end: u64,
}

/// What a trial ran into of its limits, as the sandbox saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundsReport {
    /// The trial's writable tmpfs was full when the agent stopped.
    pub disk_full: bool,
    /// Bytes of the agent's stdout left out between the kept head and tail.
    pub stdout_cut: u64,
    /// Bytes of the agent's stderr left out between the kept head and tail.
    pub stderr_cut: u64,
    /// Entries of the workspace that the agent made and that could not be carried off the
    /// trial's disk (an entry that cannot be read, a name the host refuses), each with its cause:
    /// at most [`LEFT_OUT_MAX`]; the rest are counted in `left_out_more`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<LeftOut>,
    /// How many more entries were left out than `left_out` lists.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub left_out_more: u64,
    /// As `left_out`, for an image root whose changes were carried out for the checks
    /// ([`crate::RootImage::keep_upper`]): paths relative to the root.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub root_left_out: Vec<LeftOut>,
    /// How many more root entries were left out than `root_left_out` lists.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub root_left_out_more: u64,
}

/// The most entries a [`BoundsReport`] lists as left out.
pub const LEFT_OUT_MAX: usize = 32;

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// An entry of the agent's workspace that the sandbox could not carry out, and why. Everything
/// below it was left out with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftOut {
    /// The entry's path, relative to the workspace.
    pub path: PathBuf,
    /// Why it could not be carried out (the system's error).
    pub cause: String,
}
