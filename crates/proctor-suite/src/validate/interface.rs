//! `[tasks.interface]`: the command whose calls are counted must be one the agent may run.

use toml::Spanned;

use super::{commands::allows, Validator};
use crate::model::Task;
use crate::problem::ProblemKind;

impl Validator<'_> {
    /// The interface command of a task must be on the allow list every variant runs it with:
    /// only allowed commands are shimmed, so calls of any other are never logged.
    pub(super) fn interface_allowed(&mut self, index: usize, task: &Task) {
        let Some(interface) = &task.interface else {
            return;
        };
        if self.interface_kind(task, interface) {
            return;
        }
        let command = interface.command.get_ref();
        let id = task.id.get_ref();
        let f = &self.suite.file;
        let spans = self.spans.tasks.get(index);
        let (base, base_span, whose) = match (&task.allow, &f.defaults.allow) {
            (Some(list), _) => (
                Some(list),
                spans.and_then(|s| s.allow.as_ref()).map(Spanned::span),
                "this task's `allow`",
            ),
            (None, Some(list)) => (
                Some(list),
                self.spans.defaults.allow.as_ref().map(Spanned::span),
                "the `allow` of [defaults], which this task inherits",
            ),
            (None, None) => (None, None, ""),
        };
        let base_used = f.variants.is_empty() || f.variants.iter().any(|v| v.allow.is_none());
        if base_used && !base.is_some_and(|list| allows(list, command)) {
            let mut p = self
                .at(
                    ProblemKind::Inconsistent,
                    interface.command.span(),
                    match base {
                        Some(_) => format!("task `{id}` counts calls of `{command}`, which its allow list does not include"),
                        None => format!("task `{id}` counts calls of `{command}`, but no `allow` list allows it"),
                    },
                )
                .with_label("not an allowed command");
            if let Some(span) = base_span {
                p = p.with_related(span, format!("{whose}: no `{command}`"));
            }
            let help = match (&task.allow, &f.defaults.allow) {
                (Some(_), _) => format!("add \"{command}\" to this task's `allow`: only allowed commands are shimmed, so calls of any other are never logged"),
                (None, Some(_)) => format!("add \"{command}\" to `allow` in [defaults] (or give this task its own `allow`): only allowed commands are shimmed, so calls of any other are never logged"),
                (None, None) => format!("add `allow = [\"{command}\"]` to [defaults] or to this task: only allowed commands are shimmed, so calls of any other are never logged"),
            };
            self.out.push(p.with_help(help));
        }
        for (v, variant) in f.variants.iter().enumerate() {
            let Some(list) = &variant.allow else {
                continue;
            };
            if allows(list, command) {
                continue;
            }
            let vid = variant.id.get_ref();
            let related = self
                .spans
                .variants
                .get(v)
                .and_then(|s| s.allow.as_ref())
                .map_or_else(|| variant.id.span(), Spanned::span);
            let p = self
                .at(
                    ProblemKind::Inconsistent,
                    interface.command.span(),
                    format!("task `{id}` counts calls of `{command}`, which the `allow` of variant `{vid}` does not include"),
                )
                .with_label("not allowed under this variant")
                .with_related(related, format!("replaces the task's allow list for variant `{vid}`"))
                .with_help(format!("add \"{command}\" to the `allow` of variant `{vid}`, or remove that `allow` so the task's list applies"));
            self.out.push(p);
        }
    }

    /// `verb_arg` places the verb under the `arg` rule only: with `verb = "first-operand"` it
    /// would be ignored.
    pub(super) fn interface_verb(&mut self, task: &Task) {
        let Some(interface) = &task.interface else {
            return;
        };
        if let (Some(arg), Some(rule)) = (&interface.verb_arg, &interface.verb) {
            if *rule.get_ref() == crate::model::VerbRule::FirstOperand {
                let p = self
                    .at(
                        ProblemKind::Inconsistent,
                        arg.span(),
                        "`verb_arg` is not used with `verb = \"first-operand\"`",
                    )
                    .with_label("ignored under this rule")
                    .with_related(rule.span(), "the verb is the first argument that is not an option")
                    .with_help("remove `verb_arg`, or remove `verb = \"first-operand\"` to take the verb at `verb_arg`");
                self.out.push(p);
            }
        }
    }
}
