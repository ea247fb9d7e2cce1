//! The scripted agent's file format: shell steps and a final answer.
//!
//! ```toml
//! answer = "I sent Dana the reply."   # or answer_from_step = 2
//! exit_code = 0
//!
//! [[steps]]
//! run = "chat send --to dana --text 'The report is ready.'"
//! ```

use std::path::Path;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::parse::parse_toml;
use crate::problem::{Problem, ProblemKind, SourceFile};

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

/// Reads and checks one scripted-agent file.
pub fn read_script(path: &Path) -> Result<Script, Problem> {
    let text = crate::parse::read_text(path, "the script")?;
    let source = SourceFile::new(path, text);
    let script: Script = parse_toml(&source)?;
    if let Some(step) = &script.answer_from_step {
        let n = *step.get_ref();
        if n == 0 || n > script.steps.len() {
            return Err(Problem::at(
                ProblemKind::InvalidValue,
                &source,
                step.span(),
                format!(
                    "`answer_from_step = {n}`, but the script has {} step(s)",
                    script.steps.len()
                ),
            )
            .with_label("no such step")
            .with_help("steps are numbered from 1 in the order of the [[steps]] tables"));
        }
        if script.answer.is_some() {
            return Err(Problem::at(
                ProblemKind::Inconsistent,
                &source,
                step.span(),
                "a script sets both `answer` and `answer_from_step`",
            )
            .with_label("second source of the answer")
            .with_help("keep one: `answer = \"...\"` or `answer_from_step = N`"));
        }
    }
    Ok(script)
}
