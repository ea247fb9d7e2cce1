//! `[[variants]]`: their `files`, `tasks`, `allow`, agent kind and what it needs.

use std::collections::BTreeSet;

use toml::Spanned;

use super::{paths::path_escape, Validator};
use crate::model::{AgentKind, Variant};
use crate::problem::ProblemKind;

/// Agent CLIs that cannot run on a model script without a `model`, each with the reason.
const NAMES_ITS_MODEL: &[(AgentKind, &str)] = &[(
    AgentKind::Codex,
    "Codex's default model runs in \"code mode\", whose shell needs a `codex-code-mode-host` the npm package lacks, so it could not run a single command",
)];

impl Validator<'_> {
    /// `[defaults]`' `allow` and `setup`, `[diff]`, then each variant: its `tasks`, `files`,
    /// `allow`, scripts, and what its agent kind needs.
    pub(super) fn variants(&mut self) {
        let suite = self.suite;
        // Defaults and variant lists reach every task: they are looked up on this machine unless
        // every task runs in an image.
        let all_in_images = !suite.file.tasks.is_empty()
            && suite
                .file
                .tasks
                .iter()
                .all(|t| suite.environment(t).is_some());
        if let Some(allow) = &suite.file.defaults.allow {
            self.allow_list(allow, all_in_images);
        }
        if let Some(setup) = &suite.file.defaults.setup {
            self.setup_commands(setup);
        }
        if let Some(binds) = &suite.file.defaults.binds {
            self.bind_paths(binds);
        }
        if let Some(hosts) = &suite.file.defaults.allowed_hosts {
            let internet =
                |n: Option<crate::model::Network>| n == Some(crate::model::Network::Internet);
            let d = &suite.file.defaults;
            let any = internet(d.network)
                || internet(d.check_network)
                || suite
                    .file
                    .tasks
                    .iter()
                    .any(|t| internet(t.network) || internet(t.check_network));
            self.allowed_hosts(hosts, any);
        }
        self.diff_converters();
        for variant in &suite.file.variants {
            self.variant_tasks(variant);
            for (dest, src) in &variant.files {
                if let Some(why) = path_escape(dest) {
                    let p = self
                        .at(
                            ProblemKind::BadPath,
                            src.span(),
                            format!("the workspace path `{dest}` in `files` {why}"),
                        )
                        .with_label("destination of this file")
                        .with_help(
                            "keys of `files` are paths inside the workspace, such as \"SKILL.md\"",
                        );
                    self.out.push(p);
                }
                self.suite_path("files", src, true);
            }
            if let Some(allow) = &variant.allow {
                self.allow_list(allow, all_in_images);
            }
            if let Some(ms) = &variant.model_script {
                self.model_script_variant(variant, ms);
                self.model_for_script(variant, ms);
            }
            match variant.agent {
                AgentKind::Script => self.script_variant(variant),
                AgentKind::Command => match &variant.command {
                    None => {
                        let p = self.at(
                            ProblemKind::MissingKey,
                            variant.id.span(),
                            format!("variant `{}` uses `agent = \"command\"` but has no `command`", variant.id.get_ref()),
                        ).with_label("this variant").with_help(
                            "add `command = [\"my-agent\", \"--prompt\", \"{prompt}\"]`; {prompt}, {workspace} and {model} are filled in",
                        );
                        self.out.push(p);
                    }
                    Some(cmd) if cmd.get_ref().is_empty() => {
                        let p = self
                            .at(ProblemKind::InvalidValue, cmd.span(), "`command` is empty")
                            .with_label("empty argv")
                            .with_help("give the program and its arguments");
                        self.out.push(p);
                    }
                    Some(_) => {}
                },
                AgentKind::Acp => self.acp_variant(variant),
                _ => {}
            }
            if variant.agent != AgentKind::Script {
                if let Some(script) = &variant.script {
                    let p = self.at(
                        ProblemKind::Inconsistent,
                        script.span(),
                        format!("`script` is only read for `agent = \"script\"`, but this variant uses `{}`", variant.agent.as_str()),
                    ).with_label("ignored").with_help("remove `script`, or set `agent = \"script\"`");
                    self.out.push(p);
                }
            }
        }
    }

    /// An `agent = "acp"` variant: its `command` starts the ACP agent, so it must give one.
    fn acp_variant(&mut self, variant: &Variant) {
        match &variant.command {
            None => {
                let p = self
                    .at(
                        ProblemKind::MissingKey,
                        variant.id.span(),
                        format!(
                            "variant `{}` uses `agent = \"acp\"` but has no `command`",
                            variant.id.get_ref()
                        ),
                    )
                    .with_label("this variant")
                    .with_help(
                        "add the command that starts the ACP agent on stdio, e.g. `command = [\"claude-agent-acp\"]`",
                    );
                self.out.push(p);
            }
            Some(cmd) if cmd.get_ref().is_empty() => {
                let p = self
                    .at(ProblemKind::InvalidValue, cmd.span(), "`command` is empty")
                    .with_label("empty argv")
                    .with_help("give the ACP agent's program and its arguments");
                self.out.push(p);
            }
            Some(_) => {}
        }
    }

    /// A variant's `tasks`: at least one, each a task of the suite, none twice.
    fn variant_tasks(&mut self, variant: &Variant) {
        let Some(tasks) = &variant.tasks else { return };
        let id = variant.id.get_ref();
        if tasks.is_empty() {
            let p = self
                .at(
                    ProblemKind::InvalidValue,
                    variant.id.span(),
                    format!("variant `{id}` has `tasks = []`: it would run no task"),
                )
                .with_label("this variant")
                .with_help("name the tasks it runs, or remove `tasks` to run it on every task");
            self.out.push(p);
            return;
        }
        let known: Vec<&str> = self
            .suite
            .file
            .tasks
            .iter()
            .map(|t| t.id.get_ref().as_str())
            .collect();
        let mut seen = BTreeSet::new();
        for t in tasks {
            let name = t.get_ref().as_str();
            if !known.contains(&name) {
                let hint = crate::problem::nearest(name, known.iter().copied())
                    .map(|n| format!("did you mean `{n}`?"))
                    .unwrap_or_else(|| format!("tasks of this suite: {}", known.join(", ")));
                let p = self
                    .at(
                        ProblemKind::UnknownReference,
                        t.span(),
                        format!(
                            "variant `{id}` names task `{name}`, which this suite does not have"
                        ),
                    )
                    .with_label("no such task")
                    .with_help(hint);
                self.out.push(p);
            } else if !seen.insert(name) {
                let p = self
                    .at(
                        ProblemKind::DuplicateId,
                        t.span(),
                        format!("variant `{id}` names task `{name}` twice"),
                    )
                    .with_label("named again")
                    .with_help("name each task once");
                self.out.push(p);
            }
        }
    }

    /// A model script serves any model name, but an agent CLI in [`NAMES_ITS_MODEL`] cannot
    /// run one without a name: `proctor run --model` does not reach a variant with a model
    /// script, so without `model` the variant could never work.
    fn model_for_script(&mut self, variant: &Variant, ms: &Spanned<String>) {
        let Some((_, why)) = NAMES_ITS_MODEL
            .iter()
            .find(|(agent, _)| *agent == variant.agent)
        else {
            return;
        };
        if variant.model.is_some() {
            return;
        }
        let id = variant.id.get_ref();
        let agent = variant.agent.as_str();
        let p = self
            .at(
                ProblemKind::Inconsistent,
                ms.span(),
                format!("variant `{id}` runs `{agent}` on a model script but names no `model`: {why}"),
            )
            .with_label("scripted turns, no model named")
            .with_related(variant.id.span(), "this variant")
            .with_help(format!(
                "add `model = \"mock-model\"` to variant `{id}` (any name {agent} has no metadata for; it is looked up in `[prices]`)"
            ));
        self.out.push(p);
    }
}
