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
//!
//! A script that holds a conversation gives each of its turns as a `[[turns]]` table with the
//! same keys (and then none at the top):
//!
//! ```toml
//! [[turns]]
//! answer = "Which environment should I deploy to?"
//!
//! [[turns]]
//! answer = "Done."
//! [[turns.steps]]
//! run = "setenv production"
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
    /// The turns of a conversation, in order; empty: the script is one turn, given by the keys
    /// above.
    #[serde(default)]
    pub turns: Vec<ScriptTurn>,
}

/// One turn of a scripted agent's conversation: what it does and says after the prompt (the
/// first turn) or the user's reply.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptTurn {
    /// The turn's answer, verbatim.
    #[serde(default)]
    pub answer: Option<String>,
    /// The turn's answer is this step's stdout (1-based, among the turn's steps).
    #[serde(default)]
    pub answer_from_step: Option<Spanned<usize>>,
    /// The exit status the turn ends with.
    #[serde(default)]
    pub exit_code: i32,
    /// Shell commands run in order with `sh -c` in the workspace.
    #[serde(default)]
    pub steps: Vec<Step>,
}

impl Script {
    /// The script's turn `n` (counted from 1): the `[[turns]]` entry, or for a script without
    /// turns the script itself as its only turn. `None` past the last.
    pub fn turn(&self, n: usize) -> Option<ScriptTurn> {
        if self.turns.is_empty() {
            return (n == 1).then(|| ScriptTurn {
                answer: self.answer.clone(),
                answer_from_step: self.answer_from_step.clone(),
                exit_code: self.exit_code,
                steps: self.steps.clone(),
            });
        }
        n.checked_sub(1).and_then(|i| self.turns.get(i)).cloned()
    }
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
    step_kinds(&source, &script)?;
    if !script.turns.is_empty() {
        if let Some(key) = top_level_turn_key(&script) {
            return Err(Problem::in_file(
                ProblemKind::Inconsistent,
                path,
                format!("a script with [[turns]] also sets `{key}` at the top"),
            )
            .with_help("in a script with [[turns]], each turn gives its own answer, exit_code and [[turns.steps]]; move the top-level keys into the first [[turns]]"));
        }
    }
    answer_source(
        &source,
        &script.answer,
        &script.answer_from_step,
        &script.steps,
    )?;
    for turn in &script.turns {
        answer_source(&source, &turn.answer, &turn.answer_from_step, &turn.steps)?;
    }
    Ok(script)
}

/// Each step has exactly one of `run` and `mcp`; a top-level step's problem is placed at it.
fn step_kinds(source: &SourceFile, script: &Script) -> Result<(), Problem> {
    let wrong = |steps: &[Step]| {
        steps
            .iter()
            .position(|s| s.run.is_empty() == s.mcp.is_none())
    };
    let help = "write `run = \"COMMAND\"` for a shell step, or `mcp = { server = \"NAME\", tool = \"TOOL\", arguments = { ... } }` for a tool call";
    if let Some(n) = wrong(&script.steps) {
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
            source,
            span,
            format!("step {} must have exactly one of `run` and `mcp`", n + 1),
        )
        .with_label("a step")
        .with_help(help));
    }
    for (t, turn) in script.turns.iter().enumerate() {
        if let Some(n) = wrong(&turn.steps) {
            return Err(Problem::in_file(
                ProblemKind::Inconsistent,
                source.path(),
                format!(
                    "step {} of turn {} must have exactly one of `run` and `mcp`",
                    n + 1,
                    t + 1
                ),
            )
            .with_help(help));
        }
    }
    Ok(())
}

/// The first top-level key a script with `[[turns]]` must leave to its turns, if it sets one.
fn top_level_turn_key(script: &Script) -> Option<&'static str> {
    if script.answer.is_some() {
        Some("answer")
    } else if script.answer_from_step.is_some() {
        Some("answer_from_step")
    } else if script.exit_code != 0 {
        Some("exit_code")
    } else if !script.steps.is_empty() {
        Some("[[steps]]")
    } else {
        None
    }
}

/// One turn's answer comes from at most one place, and `answer_from_step` names a step of it.
fn answer_source(
    source: &SourceFile,
    answer: &Option<String>,
    from_step: &Option<Spanned<usize>>,
    steps: &[Step],
) -> Result<(), Problem> {
    let Some(step) = from_step else {
        return Ok(());
    };
    let n = *step.get_ref();
    if n == 0 || n > steps.len() {
        return Err(Problem::at(
            ProblemKind::InvalidValue,
            source,
            step.span(),
            format!(
                "`answer_from_step = {n}`, but the script has {} step(s)",
                steps.len()
            ),
        )
        .with_label("no such step")
        .with_help("steps are numbered from 1 in the order of the [[steps]] tables"));
    }
    if answer.is_some() {
        return Err(Problem::at(
            ProblemKind::Inconsistent,
            source,
            step.span(),
            "a script sets both `answer` and `answer_from_step`",
        )
        .with_label("second source of the answer")
        .with_help("keep one: `answer = \"...\"` or `answer_from_step = N`"));
    }
    Ok(())
}
