//! The scripted agent's file format: shell steps and a final answer.
//!
//! ```toml
//! answer = "I sent Dana the reply."   # or answer_from_step = 2
//! exit_code = 0
//!
//! [[steps]]
//! run = "chat send --to dana --text 'The report is ready.'"
//! ```

use serde::{Deserialize, Serialize};
use toml::Spanned;

/// A scripted agent's plan for one task. The default is the null agent: no steps, no answer.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// The final answer, verbatim.
    #[serde(default)]
    pub answer: Option<String>,
    /// The final answer is this step's stdout (1-based).
    #[serde(default)]
    pub answer_from_step: Option<Spanned<usize>>,
    /// The agent's own exit status.
    #[serde(default)]
    pub exit_code: i32,
    /// Shell commands run in order with `sh -c` in the workspace.
    #[serde(default)]
    pub steps: Vec<Step>,
}

/// One shell command of a scripted agent.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// The command line, run with `sh -c`.
    pub run: String,
}
