//! The scripted agent's file format: shell steps and a final answer.
//!
//! ```toml
//! answer = "I sent Dana the reply."   # or answer_from_step = 2
//! exit_code = 0
//!
//! [[steps]]
//! run = "chat send --to dana --text 'The report is ready.'"
//!
//! [[steps]]
//! mcp = { server = "notes", tool = "add_note", arguments = { title = "Report" } }
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

/// One step of a scripted agent: a shell command (`run`) or a tool call of an MCP server
/// (`mcp`), exactly one of the two.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// The command line, run with `sh -c`.
    #[serde(default)]
    pub run: String,
    /// A tool call, made as an MCP client through the server's shim: `mcp = { server =
    /// "notes", tool = "add_note", arguments = { title = "Milk" } }`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<McpStep>,
}

/// A scripted agent's tool call of an MCP server of the suite.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct McpStep {
    /// The server, by its name in `[[mcp_servers]]`.
    pub server: String,
    /// The tool called.
    pub tool: String,
    /// The call's arguments. Default: none (`{}`).
    #[serde(default = "no_arguments")]
    pub arguments: serde_json::Value,
}

fn no_arguments() -> serde_json::Value {
    serde_json::Value::Object(Default::default())
}

/// Reads and checks one scripted-agent file.
pub fn read_script(path: &Path) -> Result<Script, Problem> {
    let text = crate::parse::read_text(path, "the script")?;
    let source = SourceFile::new(path, text);
    let script: Script = parse_toml(&source)?;
    if let Some(n) = script
        .steps
        .iter()
        .position(|s| s.run.is_empty() == s.mcp.is_none())
    {
        /// Where each step is, for the problem's place.
        #[derive(Deserialize, Default)]
        struct StepSpans {
            #[serde(default)]
            steps: Vec<Spanned<toml::Table>>,
        }
        let spans: StepSpans = toml::from_str(source.text()).unwrap_or_default();
        let span = spans.steps.get(n).map_or(0..0, Spanned::span);
        return Err(Problem::at(
            ProblemKind::Inconsistent,
            &source,
            span,
            format!("step {} must have exactly one of `run` and `mcp`", n + 1),
        )
        .with_label("a step")
        .with_help("write `run = \"COMMAND\"` for a shell step, or `mcp = { server = \"NAME\", tool = \"TOOL\", arguments = { ... } }` for a tool call"));
    }
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
