//! The task's `setup` commands as the trial record keeps them.

use serde::{Deserialize, Serialize};

/// The task's `setup` commands as they ran, in the trial's sandbox, before the agent started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SetupRecord {
    /// The commands, in order, each run with `sh -c` in the workspace.
    pub commands: Vec<String>,
    /// The 1-based index of the command that failed (the trial is then `errored (setup)`);
    /// absent when every command succeeded, or when the setup ended otherwise (timed out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<usize>,
    /// The exit status of the setup: 0, or the failed command's.
    pub exit: Option<i32>,
    /// The signal that killed it, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Whether it was stopped at the trial's wall timeout.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
    /// How long it ran, in milliseconds.
    pub milliseconds: u64,
    /// Bytes the commands wrote to stdout (all of it in the trial's `setup/stdout`).
    pub stdout_bytes: u64,
    /// The first bytes of stdout (2048), lossily decoded.
    pub stdout_head: String,
    /// Bytes the commands wrote to stderr (all of it in the trial's `setup/stderr`).
    pub stderr_bytes: u64,
    /// The first bytes of stderr (2048), lossily decoded.
    pub stderr_head: String,
    /// What the setup changed in the workspace: part of the start state, never the agent's
    /// changes (kept in the trial's `setup/changes/`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<proctor_score::FileChange>,
}
