//! The files a variant's scripts live in: a scripted agent's `script` and a scripted model's
//! `model_script`, one file or one per task that will run, each parsed as it will be read.

use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::Validator;
use crate::model::{Task, Variant};
use crate::parse::parse_toml;
use crate::problem::{Problem, ProblemKind, SourceFile};
use crate::script::read_script;

/// The spans of a model script's turns, to point at the one that is inconsistent.
#[derive(Debug, Default, Deserialize)]
struct TurnSpans {
    #[serde(default)]
    turns: Vec<Spanned<toml::Value>>,
    #[serde(default)]
    alternatives: Vec<Spanned<TurnSpans>>,
}

/// The first line of `span` in `text`: a `[[turns]]` header, or an inline table.
fn first_line(text: &str, span: std::ops::Range<usize>) -> std::ops::Range<usize> {
    text.get(span.clone())
        .and_then(|s| s.find('\n'))
        .map_or(span.clone(), |n| span.start..span.start + n)
}

impl Validator<'_> {
    /// A `script` variant: its `script` path, and a scripted-agent file that parses for every
    /// task it will run.
    pub(super) fn script_variant(&mut self, variant: &Variant) {
        let Some(script) = &variant.script else {
            let p = self.at(
                ProblemKind::MissingKey,
                variant.id.span(),
                format!(
                    "variant `{}` uses `agent = \"script\"` but has no `script`",
                    variant.id.get_ref()
                ),
            ).with_label("this variant").with_help(
                "add `script = \"agents/NAME\"` (a folder of TASK_ID.toml files) or a path to one .toml used for every task",
            );
            self.out.push(p);
            return;
        };
        if !self.suite_path("script", script, true) {
            return;
        }
        let base = self.suite.root.join(script.get_ref());
        for task in &self.suite.file.tasks {
            let path = if base.is_dir() {
                base.join(format!("{}.toml", task.id.get_ref()))
            } else {
                base.clone()
            };
            if path.is_file() {
                if self.read.insert(path.clone()) {
                    if let Err(p) = read_script(&path) {
                        self.out.push(p);
                    }
                }
            } else if self.will_run(task) && variant.runs_task(task.id.get_ref()) {
                let p = self
                    .at(
                        ProblemKind::BadPath,
                        script.span(),
                        format!(
                            "variant `{}` has no script for task `{}`",
                            variant.id.get_ref(),
                            task.id.get_ref()
                        ),
                    )
                    .with_label(format!("expected {}", path.display()))
                    .with_help(format!(
                        "write {} with `answer = \"...\"` and [[steps]] `run = \"...\"` tables",
                        path.display()
                    ));
                self.out.push(p);
            }
        }
    }

    /// Whether `task` is among the tasks that will run.
    fn will_run(&self, task: &Task) -> bool {
        self.options
            .tasks
            .as_ref()
            .is_none_or(|ids| ids.iter().any(|id| id == task.id.get_ref()))
    }

    /// A variant's `model_script`: the file, or one `TASK_ID.toml` per task that will run, and
    /// each file parses as the mock model reads it.
    pub(super) fn model_script_variant(&mut self, variant: &Variant, ms: &Spanned<String>) {
        if !self.suite_path("model_script", ms, true) {
            return;
        }
        let base = self.suite.root.join(ms.get_ref());
        if !base.is_dir() {
            self.model_script_file(&base);
            return;
        }
        for task in &self.suite.file.tasks {
            let name = format!("{}.toml", task.id.get_ref());
            let path = base.join(&name);
            if path.is_file() {
                self.model_script_file(&path);
            } else if self.will_run(task) && variant.runs_task(task.id.get_ref()) {
                let rel = Path::new(ms.get_ref()).join(&name);
                let p = self
                    .at(
                        ProblemKind::BadPath,
                        ms.span(),
                        format!(
                            "variant `{}` has no model script for task `{}`",
                            variant.id.get_ref(),
                            task.id.get_ref()
                        ),
                    )
                    .with_label(format!("expected {}", rel.display()))
                    .with_help(format!(
                        "write {} in the suite: [[turns]] of tool calls, then a final `text` (see `proctor mock-model --help`)",
                        rel.display()
                    ));
                self.out.push(p);
            }
        }
    }

    /// Parses one model script as `proctor mock-model` will, once per file.
    pub(super) fn model_script_file(&mut self, path: &Path) {
        if !self.read.insert(path.to_path_buf()) {
            return;
        }
        let text = match crate::parse::read_text(path, "the model script") {
            Ok(t) => t,
            Err(p) => {
                self.out.push(p);
                return;
            }
        };
        let source = SourceFile::new(path, text);
        let script: crate::model_script::Script = match parse_toml(&source) {
            Ok(s) => s,
            Err(p) => {
                let p = if p.help.is_some() {
                    p
                } else {
                    p.with_help("a model script is [[turns]] tables of `calls` or a final `text`, each with its `usage` (see `proctor mock-model --help`)")
                };
                self.out.push(p);
                return;
            }
        };
        match script.validate(&path.display().to_string()) {
            Ok(()) => {}
            Err(crate::model_script::ScriptError::Invalid { turn, message, .. }) => {
                let turns: TurnSpans = toml::from_str(source.text()).unwrap_or_default();
                // The turn's first line: its [[turns]] header, or the inline table.
                let span = turns
                    .turns
                    .get(turn.saturating_sub(1))
                    .map_or(0..0, |t| t.span());
                let span = source.text()[span.clone()]
                    .find('\n')
                    .map_or(span.clone(), |n| span.start..span.start + n);
                let p = Problem::at(
                    ProblemKind::Inconsistent,
                    &source,
                    span,
                    format!("turn {turn} of the model script: {message}"),
                )
                .with_label(format!("turn {turn}"))
                .with_help("a turn is a final `text`, or `calls` each with `role = \"shell\"` and `command`, or with a tool's exact `name`");
                self.out.push(p);
            }
            Err(crate::model_script::ScriptError::InvalidAlternative {
                alternative,
                turn,
                message,
                ..
            }) => {
                let spans: TurnSpans = toml::from_str(source.text()).unwrap_or_default();
                let alt = spans.alternatives.get(alternative.saturating_sub(1));
                let span = match (alt, turn) {
                    (Some(a), Some(t)) => a
                        .get_ref()
                        .turns
                        .get(t.saturating_sub(1))
                        .map_or(a.span(), |t| t.span()),
                    (Some(a), None) => a.span(),
                    (None, _) => 0..0,
                };
                let span = first_line(source.text(), span);
                let what = match turn {
                    Some(t) => format!("alternative {alternative}, turn {t}"),
                    None => format!("alternative {alternative}"),
                };
                let p = Problem::at(
                    ProblemKind::Inconsistent,
                    &source,
                    span,
                    format!("{what} of the model script: {message}"),
                )
                .with_label(what)
                .with_help("an [[alternatives]] entry has a `weight` (1 to 1000000), an optional `name` and its own [[alternatives.turns]]");
                self.out.push(p);
            }
            Err(e) => {
                let p = self.file(ProblemKind::Inconsistent, path, e.to_string());
                self.out.push(p);
            }
        }
    }
}
