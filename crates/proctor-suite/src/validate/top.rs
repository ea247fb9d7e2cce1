//! The top of `suite.toml`: the suite's id, `fixture`, the trial counts and their bounds, ids of
//! tasks, variants and services, and `[diff]`.

use std::collections::BTreeMap;
use std::ops::Range;

use toml::Spanned;

use super::{paths::path_escape, spans::span_of, Validator};
use crate::problem::ProblemKind;

/// Characters allowed in ids: they become folder names and trial ids.
fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

impl Validator<'_> {
    /// The suite's id, its fixture, its trial counts, and that it has tasks and variants.
    pub(super) fn top_level(&mut self) {
        let suite = self.suite;
        let f = &suite.file;
        self.id("suite", &f.id);
        let fixture = f.fixture.get_ref().clone();
        if let Some(why) = path_escape(&fixture) {
            let p = self
                .at(
                    ProblemKind::BadPath,
                    f.fixture.span(),
                    format!("the fixture path `{fixture}` {why}"),
                )
                .with_label("must stay inside the suite")
                .with_help("write a path relative to the suite directory, such as \"fixture\"");
            self.out.push(p);
        } else if !self.suite.fixture_dir().is_dir() {
            let span = f.fixture.span();
            let msg = format!("the fixture directory `{fixture}` does not exist in the suite");
            if span.is_empty() {
                let dir = self.suite.root.clone();
                let p = self.file(ProblemKind::BadPath, &dir, msg).with_help(
                    "create a `fixture/` folder with the starting workspace, or set `fixture = \"DIR\"` in suite.toml",
                );
                self.out.push(p);
            } else {
                let p = self.at(ProblemKind::BadPath, span, msg)
                    .with_label("no such directory")
                    .with_help("create it, or point `fixture` at the folder holding the starting workspace");
                self.out.push(p);
            }
        }
        if f.development_trials == 0 || f.release_trials == 0 {
            let root = self.suite.root.join("suite.toml");
            let p = self
                .file(
                    ProblemKind::InvalidValue,
                    &root,
                    "`development_trials` and `release_trials` must be at least 1",
                )
                .with_help("set them to the trials per (task, variant) you want");
            self.out.push(p);
        }
        self.trial_bounds();
        if f.tasks.is_empty() {
            let p = self
                .at(ProblemKind::Inconsistent, 0..0, "the suite has no tasks")
                .with_label("no [[tasks]] table in this file")
                .with_help("add a [[tasks]] table with `id`, `prompt` and `[tasks.success]`");
            self.out.push(p);
        }
        if f.variants.is_empty() {
            let p = self
                .at(ProblemKind::Inconsistent, 0..0, "the suite has no variants")
                .with_label("no [[variants]] table in this file")
                .with_help("add a [[variants]] table with `id` and `agent`");
            self.out.push(p);
        }
    }

    /// `development_trials` and `release_trials` within [`crate::plan::MAX_TRIALS_PER_CELL`]
    /// per (task, variant), and each times the (task, variant) pairs within
    /// [`crate::plan::MAX_PLANNED_TRIALS`]: what `run` would otherwise die allocating.
    fn trial_bounds(&mut self) {
        use crate::plan::{MAX_PLANNED_TRIALS, MAX_TRIALS_PER_CELL};
        let f = &self.suite.file;
        let cells = (f.tasks.len() as u64).saturating_mul(f.variants.len() as u64);
        for (key, n, span) in [
            (
                "development_trials",
                f.development_trials,
                span_of(&self.spans.development_trials),
            ),
            (
                "release_trials",
                f.release_trials,
                span_of(&self.spans.release_trials),
            ),
        ] {
            let total = cells.saturating_mul(u64::from(n));
            let p = if n > MAX_TRIALS_PER_CELL {
                self.at(
                    ProblemKind::InvalidValue,
                    span,
                    format!("`{key} = {n}` is more than the {MAX_TRIALS_PER_CELL} trials per (task, variant) a run may take"),
                )
                .with_label("too many trials")
                .with_help(format!("write `{key} = N` with N from 1 to {MAX_TRIALS_PER_CELL} (docs/suite-format.md, \"Bounds\")"))
            } else if total > MAX_PLANNED_TRIALS {
                let most = MAX_PLANNED_TRIALS / cells.max(1);
                self.at(
                    ProblemKind::InvalidValue,
                    span,
                    format!("`{key} = {n}` × {cells} (task, variant) pairs = {total} trials, more than the {MAX_PLANNED_TRIALS} a run may plan"),
                )
                .with_label("too many trials in total")
                .with_help(format!("write `{key} = N` with N at most {most} for this suite's {cells} (task, variant) pairs, or split the suite"))
            } else {
                continue;
            };
            self.out.push(p);
        }
    }

    /// An id (of the suite, a task, a variant or a service) of the characters ids may use.
    pub(super) fn id(&mut self, what: &str, id: &Spanned<String>) {
        if valid_id(id.get_ref()) {
            return;
        }
        let p = self
            .at(
                ProblemKind::InvalidValue,
                id.span(),
                format!("{what} id `{}` has characters ids cannot use", id.get_ref()),
            )
            .with_label("not a valid id")
            .with_help(
                "ids use letters, digits, `-` and `_` (at most 64): they name folders and trials",
            );
        self.out.push(p);
    }

    /// Task, variant and service ids: each valid, and none used twice among its kind.
    pub(super) fn ids(&mut self) {
        let suite = self.suite;
        let f = &suite.file;
        let groups: [(&str, Vec<&Spanned<String>>); 3] = [
            ("task", f.tasks.iter().map(|t| &t.id).collect()),
            ("variant", f.variants.iter().map(|v| &v.id).collect()),
            ("service", f.services.iter().map(|s| &s.name).collect()),
        ];
        for (what, ids) in groups {
            let mut seen: BTreeMap<&str, Range<usize>> = BTreeMap::new();
            for id in ids {
                self.id(what, id);
                if let Some(first) = seen.get(id.get_ref().as_str()) {
                    let (line, _) = self.src.line_column(first.start);
                    let p = self
                        .at(
                            ProblemKind::DuplicateId,
                            id.span(),
                            format!("two {what}s have the id `{}`", id.get_ref()),
                        )
                        .with_label(format!("already used on line {line}"))
                        .with_help(format!("give each {what} its own id"));
                    self.out.push(p);
                } else {
                    seen.insert(id.get_ref(), id.span());
                }
            }
        }
    }

    /// `[diff]` converters: a glob that compiles, an argv with a program and `{}` for the path.
    pub(super) fn diff_converters(&mut self) {
        let suite = self.suite;
        for (glob, argv) in &suite.file.diff {
            if let Err(e) = globset::Glob::new(glob) {
                let p = self
                    .at(
                        ProblemKind::InvalidValue,
                        argv.span(),
                        format!("`[diff]` glob `{glob}` does not compile: {e}"),
                    )
                    .with_label("for this glob")
                    .with_help("write a workspace glob such as \"*.db\" or \"data/**/*.sqlite\"");
                self.out.push(p);
            }
            let list = argv.get_ref();
            if list.first().is_none_or(|p| p.trim().is_empty())
                || !list.iter().any(|a| a.contains("{}"))
            {
                let p = self
                    .at(
                        ProblemKind::InvalidValue,
                        argv.span(),
                        format!("`[diff]` converter of `{glob}` needs a program and `{{}}` for the file's path"),
                    )
                    .with_label("no program, or no `{}`")
                    .with_help(format!("write e.g. \"{glob}\" = [\"sqlite3\", \"{{}}\", \".dump\"]: the argv that prints the file as text, `{{}}` standing for its path"));
                self.out.push(p);
            }
        }
    }
}
