//! A person's sitting (`proctor sit`) as the trial record keeps it.

use serde::{Deserialize, Serialize};

/// A person's sitting of a trial (`proctor sit`): the person sat in the agent's seat (variant
/// `human:NAME`, agent `human`), with the same sandbox, workspace, services and shims, on a
/// terminal; the trial is graded like any other.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SittingRecord {
    /// The person, as `--as` named them.
    pub person: String,
    /// How the final answer was given.
    pub answer_from: AnswerFrom,
    /// The person's prose notes (`--notes FILE`, or typed at the end), kept as written; `None`
    /// when they wrote none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    /// The wall timeout `--timeout` asked for, in seconds; `None`: the sitting had none.
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    /// Bytes the terminal showed the person during the sitting.
    pub terminal_bytes: u64,
    /// Bytes of those the transcript (`agent.stdout`) left out: past the trial's `output_mb`,
    /// its first and last halves are kept, the cut marked.
    #[serde(default)]
    pub terminal_cut: u64,
}

/// Where a sitting's final answer came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum AnswerFrom {
    /// Typed when asked, after the person left the shell and the trial had fully stopped.
    Asked,
    /// Given beforehand with `--answer`.
    Flag,
}
