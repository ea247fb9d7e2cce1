//! Every check `proctor validate` makes beyond parsing. Each check adds to one list, so a
//! suite's author sees all its problems at once rather than one per run.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::os::unix::fs::FileTypeExt;
use std::path::{Component, Path};

use toml::Spanned;

use crate::assertion::{Assertion, FilesUnchanged};
use crate::model::{AgentKind, Condition, Task, METRICS};
use crate::patch::Patch;
use crate::problem::{Problem, ProblemKind, SourceFile};
use crate::suite::{read_script, Suite};

/// All problems with a parsed suite; empty when it is valid.
pub fn problems(suite: &Suite) -> Vec<Problem> {
    let mut v = Validator {
        suite,
        src: &suite.source,
        out: Vec::new(),
    };
    v.top_level();
    v.ids();
    v.forbidden_files();
    v.variants();
    v.services();
    v.tasks();
    v.promotion();
    v.suite_folders();
    v.out
}

struct Validator<'a> {
    suite: &'a Suite,
    src: &'a SourceFile,
    out: Vec<Problem>,
}

/// Characters allowed in ids: they become folder names and trial ids.
fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Why a path written in the suite may not be used, if it may not.
fn path_escape(p: &str) -> Option<&'static str> {
    let path = Path::new(p);
    if p.is_empty() {
        return Some("is empty");
    }
    if path.is_absolute() {
        return Some("is absolute");
    }
    if path.components().any(|c| c == Component::ParentDir) {
        return Some("climbs out with `..`");
    }
    None
}

impl<'a> Validator<'a> {
    fn at(&self, kind: ProblemKind, span: Range<usize>, msg: impl Into<String>) -> Problem {
        Problem::at(kind, self.src, span, msg)
    }

    fn file(&self, kind: ProblemKind, file: &Path, msg: impl Into<String>) -> Problem {
        Problem::in_file(kind, file, msg)
    }

    fn top_level(&mut self) {
        let f = &self.suite.file;
        if !valid_id(f.id.get_ref()) {
            let p = self.at(
                ProblemKind::InvalidValue,
                f.id.span(),
                format!("suite id `{}` has characters ids cannot use", f.id.get_ref()),
            ).with_label("not a valid id").with_help(
                "ids use letters, digits, `-` and `_` (at most 64): they name folders and trials",
            );
            self.out.push(p);
        }
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

    fn ids(&mut self) {
        let f = &self.suite.file;
        let groups: [(&str, Vec<&Spanned<String>>); 3] = [
            ("task", f.tasks.iter().map(|t| &t.id).collect()),
            ("variant", f.variants.iter().map(|v| &v.id).collect()),
            ("service", f.services.iter().map(|s| &s.name).collect()),
        ];
        for (what, ids) in groups {
            let mut seen: BTreeMap<&str, Range<usize>> = BTreeMap::new();
            for id in ids {
                if what != "suite" && !valid_id(id.get_ref()) {
                    let p = self.at(
                        ProblemKind::InvalidValue,
                        id.span(),
                        format!("{what} id `{}` has characters ids cannot use", id.get_ref()),
                    ).with_label("not a valid id").with_help(
                        "ids use letters, digits, `-` and `_` (at most 64): they name folders and trials",
                    );
                    self.out.push(p);
                }
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

    fn forbidden_files(&mut self) {
        let root = self.suite.root.clone();
        let walker = walkdir::WalkDir::new(&root)
            .min_depth(1)
            .sort_by_file_name()
            .into_iter()
            .filter_entry(|e| {
                !(e.depth() == 1 && (e.file_name() == ".git" || e.file_name() == ".proctor"))
            });
        for entry in walker {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    let path = e.path().unwrap_or(&root).to_path_buf();
                    let p = self.file(ProblemKind::BadPath, &path, format!("cannot read: {e}"));
                    self.out.push(p);
                    continue;
                }
            };
            let ft = entry.file_type();
            let what = if ft.is_symlink() {
                "a symlink"
            } else if ft.is_fifo() {
                "a FIFO"
            } else if ft.is_socket() {
                "a socket"
            } else if ft.is_block_device() || ft.is_char_device() {
                "a device file"
            } else {
                continue;
            };
            let path = entry.path().to_path_buf();
            let p = self.file(
                ProblemKind::ForbiddenFile,
                &path,
                format!("{what} inside the suite"),
            ).with_help(
                "suites hold regular files and folders only, so that what an agent sees cannot reach outside them; replace it with a copy of the file it stands for",
            );
            self.out.push(p);
        }
    }

    /// Checks a path-valued field: relative, not climbing out, and (when `must_exist`) present.
    fn suite_path(&mut self, field: &str, value: &Spanned<String>, must_exist: bool) -> bool {
        let v = value.get_ref();
        if let Some(why) = path_escape(v) {
            let p = self
                .at(
                    ProblemKind::BadPath,
                    value.span(),
                    format!("`{field}` path `{v}` {why}"),
                )
                .with_label("must stay inside the suite")
                .with_help("write a path relative to the suite directory, without `..`");
            self.out.push(p);
            return false;
        }
        if must_exist && !self.suite.root.join(v).exists() {
            let p = self
                .at(
                    ProblemKind::BadPath,
                    value.span(),
                    format!("`{field}` path `{v}` does not exist in the suite"),
                )
                .with_label("no such file")
                .with_help(format!(
                    "create {} or fix the path",
                    self.suite.root.join(v).display()
                ));
            self.out.push(p);
            return false;
        }
        true
    }

    fn allow_list(&mut self, allow: &[Spanned<String>]) {
        for a in allow {
            if a.get_ref().contains('/') {
                self.suite_path("allow", a, true);
            } else if a.get_ref().is_empty() {
                let p = self
                    .at(
                        ProblemKind::InvalidValue,
                        a.span(),
                        "an empty command name in `allow`",
                    )
                    .with_label("empty")
                    .with_help(
                        "name a command on PATH, or a path inside the suite such as \"bin/tool\"",
                    );
                self.out.push(p);
            }
        }
    }

    fn variants(&mut self) {
        let suite = self.suite;
        if let Some(allow) = &suite.file.defaults.allow {
            self.allow_list(allow);
        }
        for variant in &suite.file.variants {
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
                self.allow_list(allow);
            }
            if let Some(ms) = &variant.model_script {
                if self.suite_path("model_script", ms, true) {
                    let base = self.suite.root.join(ms.get_ref());
                    if base.is_dir() {
                        for task in &self.suite.file.tasks {
                            let p = base.join(format!("{}.toml", task.id.get_ref()));
                            if !p.is_file() {
                                let pr = self.at(ProblemKind::BadPath, ms.span(), format!("variant `{}` has no model script for task `{}`", variant.id.get_ref(), task.id.get_ref()))
                                    .with_label(format!("expected {}", p.display()))
                                    .with_help("write [[turns]] of tool calls and a final text for this task (see `proctor mock-model --help`)");
                                self.out.push(pr);
                            }
                        }
                    }
                }
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

    fn script_variant(&mut self, variant: &crate::model::Variant) {
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
            if !path.is_file() {
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
                continue;
            }
            if base.is_dir() || task.id == self.suite.file.tasks[0].id {
                if let Err(p) = read_script(&path) {
                    self.out.push(p);
                }
            }
        }
    }

    fn services(&mut self) {
        for service in &self.suite.file.services {
            let argv = service.command.get_ref();
            match argv.first() {
                None => {
                    let p = self.at(ProblemKind::InvalidValue, service.command.span(), "a service `command` is empty").with_label("empty argv").with_help("give the program and its arguments, e.g. [\"services/mock\", \"--port\", \"7070\"]");
                    self.out.push(p);
                }
                Some(prog) if prog.contains('/') => {
                    let spanned = Spanned::new(service.command.span(), prog.clone());
                    self.suite_path("command", &spanned, true);
                }
                Some(_) => {}
            }
            if let Some(state) = &service.state {
                self.suite_path("state", state, false);
            }
            for url in [
                service.ready.as_ref().map(|r| &r.http),
                service.guard.as_ref().map(|g| &g.http),
            ]
            .into_iter()
            .flatten()
            {
                if !url.get_ref().starts_with("http://") {
                    let p = self.at(ProblemKind::InvalidValue, url.span(), format!("`{}` is not an http:// URL", url.get_ref())).with_label("expected http://HOST:PORT/PATH").with_help("services are probed over plain HTTP inside the trial, e.g. \"http://127.0.0.1:7070/health\"");
                    self.out.push(p);
                }
            }
        }
    }

    fn tasks(&mut self) {
        let suite = self.suite;
        for task in &suite.file.tasks {
            if let Some(allow) = &task.allow {
                self.allow_list(allow);
            }
            for (route, kind) in &task.route_faults {
                if !crate::model::FAULT_ROUTES.contains(&route.as_str()) {
                    let p = self
                        .at(
                            ProblemKind::InvalidValue,
                            kind.span(),
                            format!("`route_faults` names an unknown model route `{route}`"),
                        )
                        .with_label("unknown route")
                        .with_help(format!("routes: {}", crate::model::FAULT_ROUTES.join(", ")));
                    self.out.push(p);
                }
                if !crate::model::FAULT_KINDS.contains(&kind.get_ref().as_str()) {
                    let p = self
                        .at(
                            ProblemKind::InvalidValue,
                            kind.span(),
                            format!("`{}` is not a route fault", kind.get_ref()),
                        )
                        .with_label("unknown fault")
                        .with_help(format!(
                            "write one of: {}",
                            crate::model::FAULT_KINDS.join(", ")
                        ));
                    self.out.push(p);
                }
            }
            self.condition(task, "success", &task.success);
            if let Some(refusal) = &task.refusal {
                for re in refusal.refuse_patterns.iter().chain(&refusal.ask_patterns) {
                    self.regex(re);
                }
            }
            let mut criteria: BTreeMap<&str, Range<usize>> = BTreeMap::new();
            for criterion in &task.rubric {
                if let Some(first) = criteria.get(criterion.id.get_ref().as_str()) {
                    let (line, _) = self.src.line_column(first.start);
                    let p = self
                        .at(
                            ProblemKind::DuplicateId,
                            criterion.id.span(),
                            format!(
                                "two rubric criteria of task `{}` have the id `{}`",
                                task.id.get_ref(),
                                criterion.id.get_ref()
                            ),
                        )
                        .with_label(format!("already used on line {line}"))
                        .with_help("give each criterion its own id");
                    self.out.push(p);
                }
                criteria.insert(criterion.id.get_ref(), criterion.id.span());
                for level in &criterion.levels {
                    if level.get_ref().score > criterion.max {
                        let p = self
                            .at(
                                ProblemKind::InvalidValue,
                                level.span(),
                                format!(
                                    "a level scores {} but criterion `{}` has max = {}",
                                    level.get_ref().score,
                                    criterion.id.get_ref(),
                                    criterion.max
                                ),
                            )
                            .with_label("score above max")
                            .with_help("lower the score or raise `max`");
                        self.out.push(p);
                    }
                    for a in &level.get_ref().all {
                        self.assertion(task, a);
                    }
                }
            }
            for cap in &task.caps {
                for a in &cap.any {
                    self.assertion(task, a);
                }
            }
        }
    }

    fn condition(&mut self, task: &Task, name: &str, cond: &Spanned<Condition>) {
        let c = cond.get_ref();
        match (&c.all, &c.any) {
            (Some(_), Some(_)) => {
                let p = self.at(ProblemKind::Inconsistent, cond.span(), format!("`{name}` has both `all` and `any`")).with_label("one list expected").with_help("keep one: `all = [...]` (every assertion holds) or `any = [...]` (at least one holds)");
                self.out.push(p);
            }
            (None, None) => {
                let p = self
                    .at(
                        ProblemKind::MissingKey,
                        cond.span(),
                        format!("`{name}` has neither `all` nor `any`"),
                    )
                    .with_label("no assertions")
                    .with_help(
                        "write `all = [{ files_unchanged = true }]` or another list of assertions",
                    );
                self.out.push(p);
            }
            (Some(list), None) | (None, Some(list)) if list.is_empty() => {
                let p = self.at(ProblemKind::Inconsistent, cond.span(), format!("`{name}` has an empty list of assertions, which would hold for anything")).with_label("empty").with_help("give at least one assertion");
                self.out.push(p);
            }
            _ => {}
        }
        for a in c.assertions() {
            self.assertion(task, a);
        }
    }

    fn regex(&mut self, re: &Spanned<String>) {
        if let Err(e) = regex::Regex::new(re.get_ref()) {
            let detail = e.to_string();
            let last = detail
                .lines()
                .last()
                .unwrap_or_default()
                .trim()
                .trim_start_matches("error: ")
                .to_string();
            let p = self.at(ProblemKind::BadPattern, re.span(), format!("the regex `{}` does not compile: {last}", re.get_ref())).with_label("invalid regex").with_help("regexes use Rust `regex` syntax; in TOML, prefer '...' literal strings so backslashes stay as written");
            self.out.push(p);
        }
    }

    fn glob(&mut self, span: Range<usize>, glob: &str) {
        if let Some(why) = path_escape(glob) {
            let p = self
                .at(
                    ProblemKind::BadPath,
                    span,
                    format!("the glob `{glob}` {why}"),
                )
                .with_label("must stay inside the workspace")
                .with_help("globs match workspace-relative paths, such as \"src/**/*.py\"");
            self.out.push(p);
            return;
        }
        if let Err(e) = globset::Glob::new(glob) {
            let p = self
                .at(
                    ProblemKind::BadPattern,
                    span,
                    format!("the glob `{glob}` does not compile: {}", e.kind()),
                )
                .with_label("invalid glob")
                .with_help("globs use `*`, `**`, `?`, `[abc]` and `{a,b}`");
            self.out.push(p);
        }
    }

    fn assertion(&mut self, task: &Task, a: &Spanned<Assertion>) {
        let span = a.span();
        match a.get_ref() {
            Assertion::AnswerMatches(re) | Assertion::AnswerForbids(re) => self.regex(re),
            Assertion::FilesUnchanged(FilesUnchanged::Under(globs)) => {
                for g in globs {
                    self.glob(span.clone(), g);
                }
            }
            Assertion::FilesUnchanged(FilesUnchanged::Everywhere(_)) => {}
            Assertion::FileAdded(g) | Assertion::FileDeleted(g) | Assertion::FileChanged(g) => {
                self.glob(g.span(), g.get_ref());
            }
            Assertion::FileContains(fc) => {
                if let Some(why) = path_escape(fc.path.get_ref()) {
                    let p = self
                        .at(
                            ProblemKind::BadPath,
                            fc.path.span(),
                            format!("`file_contains` path `{}` {why}", fc.path.get_ref()),
                        )
                        .with_label("must stay inside the workspace")
                        .with_help("write a workspace-relative path");
                    self.out.push(p);
                }
                self.regex(&fc.pattern);
            }
            Assertion::Check(c) => {
                if c.command.trim().is_empty() {
                    let p = self
                        .at(
                            ProblemKind::InvalidValue,
                            span.clone(),
                            "a `check` with an empty command",
                        )
                        .with_label("empty")
                        .with_help("give a shell command such as \"python3 check.py\"");
                    self.out.push(p);
                }
                if let Some(re) = &c.stdout_matches {
                    self.regex(re);
                }
            }
            Assertion::Calls(c) => {
                if task.interface.is_none() {
                    let p = self
                        .at(
                            ProblemKind::Inconsistent,
                            span.clone(),
                            format!(
                                "task `{}` counts `calls` but has no [tasks.interface]",
                                task.id.get_ref()
                            ),
                        )
                        .with_label("needs an interface")
                        .with_help(
                            "add [tasks.interface] with `command = \"NAME\"` and `verb_arg = 1`",
                        );
                    self.out.push(p);
                }
                if let (Some(min), Some(max)) = (c.min, c.max) {
                    if min > max {
                        let p = self
                            .at(
                                ProblemKind::InvalidValue,
                                span.clone(),
                                format!("`calls` has min = {min} above max = {max}"),
                            )
                            .with_label("can never hold")
                            .with_help("swap or fix the bounds");
                        self.out.push(p);
                    }
                }
                if let Some(re) = &c.args_match {
                    self.regex(re);
                }
            }
            Assertion::State(s) => {
                let known: Vec<&str> = self
                    .suite
                    .file
                    .services
                    .iter()
                    .map(|s| s.name.get_ref().as_str())
                    .collect();
                if !known.contains(&s.service.get_ref().as_str()) {
                    let hint = crate::problem::nearest(s.service.get_ref(), known.iter().copied())
                        .map(|n| format!("did you mean `{n}`?"))
                        .unwrap_or_else(|| {
                            format!(
                                "services of this suite: {}",
                                if known.is_empty() {
                                    "none".to_string()
                                } else {
                                    known.join(", ")
                                }
                            )
                        });
                    let p = self
                        .at(
                            ProblemKind::UnknownReference,
                            s.service.span(),
                            format!("no service is named `{}`", s.service.get_ref()),
                        )
                        .with_label("unknown service")
                        .with_help(hint);
                    self.out.push(p);
                }
                let ptr = s.pointer.get_ref();
                if !ptr.is_empty() && !ptr.starts_with('/') {
                    let p = self
                        .at(
                            ProblemKind::InvalidValue,
                            s.pointer.span(),
                            format!("`{ptr}` is not a JSON pointer"),
                        )
                        .with_label("must start with /")
                        .with_help(format!("write \"/{ptr}\" (RFC 6901: /key/0/field)"));
                    self.out.push(p);
                }
                let given = [s.equals.is_some(), s.matches.is_some(), s.exists.is_some()]
                    .iter()
                    .filter(|b| **b)
                    .count();
                if given != 1 {
                    let p = self.at(ProblemKind::Inconsistent, span, "a `state` assertion needs exactly one of `equals`, `matches` or `exists`").with_label(format!("{given} given")).with_help("e.g. `equals = \"dana\"`, `matches = \"^re\"` or `exists = true`");
                    self.out.push(p);
                }
                if let Some(re) = &s.matches {
                    self.regex(re);
                }
            }
            Assertion::Not(inner) => self.assertion(task, inner),
        }
    }

    fn promotion(&mut self) {
        let Some(promotion) = &self.suite.file.promotion else {
            return;
        };
        let variants: Vec<&str> = self
            .suite
            .file
            .variants
            .iter()
            .map(|v| v.id.get_ref().as_str())
            .collect();
        for (field, value) in [
            ("baseline", &promotion.baseline),
            ("candidate", &promotion.candidate),
        ] {
            if !variants.contains(&value.get_ref().as_str()) {
                let hint = crate::problem::nearest(value.get_ref(), variants.iter().copied())
                    .map(|n| format!("did you mean `{n}`?"))
                    .unwrap_or_else(|| format!("variants of this suite: {}", variants.join(", ")));
                let p = self
                    .at(
                        ProblemKind::UnknownReference,
                        value.span(),
                        format!(
                            "promotion `{field}` names no variant: `{}`",
                            value.get_ref()
                        ),
                    )
                    .with_label("unknown variant")
                    .with_help(hint);
                self.out.push(p);
            }
        }
        for metric in std::iter::once(&promotion.primary_metric).chain(&promotion.no_regression) {
            if !METRICS.contains(&metric.get_ref().as_str()) {
                let hint = crate::problem::nearest(metric.get_ref(), METRICS.iter().copied())
                    .map(|n| format!("did you mean `{n}`?"))
                    .unwrap_or_else(|| format!("metrics: {}", METRICS.join(", ")));
                let p = self
                    .at(
                        ProblemKind::UnknownReference,
                        metric.span(),
                        format!("`{}` is not a metric proctor reports", metric.get_ref()),
                    )
                    .with_label("unknown metric")
                    .with_help(hint);
                self.out.push(p);
            }
        }
    }

    fn suite_folders(&mut self) {
        let root = self.suite.root.clone();
        let tasks: BTreeSet<&str> = self
            .suite
            .file
            .tasks
            .iter()
            .map(|t| t.id.get_ref().as_str())
            .collect();
        let task_list = tasks.iter().copied().collect::<Vec<_>>().join(", ");
        for folder in ["holdout", "mutations"] {
            let dir = root.join(folder);
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
            entries.sort_by_key(|e| e.file_name());
            for entry in entries {
                let name = entry.file_name().to_string_lossy().into_owned();
                let path = entry.path();
                if !path.is_dir() || path.is_symlink() {
                    let p = self.file(ProblemKind::UnknownReference, &path, format!("`{folder}/{name}` is referenced by no task")).with_help(format!("files under {folder}/ live in a folder named after their task: {folder}/TASK_ID/..."));
                    self.out.push(p);
                    continue;
                }
                if !tasks.contains(name.as_str()) {
                    let hint = crate::problem::nearest(&name, tasks.iter().copied())
                        .map(|n| format!("did you mean `{folder}/{n}`?"))
                        .unwrap_or_else(|| format!("tasks of this suite: {task_list}"));
                    let p = self
                        .file(
                            ProblemKind::UnknownReference,
                            &path,
                            format!("`{folder}/{name}` names no task of this suite"),
                        )
                        .with_help(hint);
                    self.out.push(p);
                    continue;
                }
                if folder == "mutations" {
                    self.mutations_of(&path);
                }
            }
        }
        let answers = root.join("answers");
        if let Ok(entries) = std::fs::read_dir(&answers) {
            let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
            entries.sort_by_key(|e| e.file_name());
            for entry in entries {
                let path = entry.path();
                let stem = path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                if !path.is_file() || !tasks.contains(stem.as_str()) {
                    let p = self
                        .file(
                            ProblemKind::UnknownReference,
                            &path,
                            format!(
                                "answer sheet `{}` names no task of this suite",
                                path.file_name()
                                    .map(|n| n.to_string_lossy().into_owned())
                                    .unwrap_or_default()
                            ),
                        )
                        .with_help(format!(
                            "answer sheets are answers/TASK_ID.md; tasks: {task_list}"
                        ));
                    self.out.push(p);
                }
            }
        }
    }

    fn mutations_of(&mut self, dir: &Path) {
        let fixture = self.suite.fixture_dir();
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
        entries.sort_by_key(|e| e.file_name());
        if entries.is_empty() {
            let p = self.file(ProblemKind::BadMutation, dir, "an empty mutations folder").with_help("add one or more .patch files (unified diffs against the fixture), or remove the folder");
            self.out.push(p);
        }
        for entry in entries {
            let path = entry.path();
            if !path.is_file() {
                let p = self
                    .file(ProblemKind::BadMutation, &path, "not a patch file")
                    .with_help("a mutations/TASK_ID/ folder holds unified-diff files only");
                self.out.push(p);
                continue;
            }
            let text = match std::fs::read_to_string(&path) {
                Ok(t) => t,
                Err(e) => {
                    let p = self.file(
                        ProblemKind::BadMutation,
                        &path,
                        format!("cannot read as text: {e}"),
                    );
                    self.out.push(p);
                    continue;
                }
            };
            let patch = match Patch::parse(&text) {
                Ok(p) => p,
                Err(e) => {
                    let source = SourceFile::new(&path, text.clone());
                    let start = line_offset(&text, e.line);
                    let end = text[start..].find('\n').map_or(text.len(), |n| start + n);
                    let p = Problem::at(ProblemKind::BadMutation, &source, start..end, format!("not a unified diff: {}", e.message))
                        .with_label("here")
                        .with_help("write mutations with `diff -u` or `git diff`: `--- a/PATH`, `+++ b/PATH`, then `@@ -l,n +l,n @@` hunks");
                    self.out.push(p);
                    continue;
                }
            };
            if fixture.is_dir() {
                let read = |rel: &str| std::fs::read(fixture.join(rel)).ok();
                if let Err(e) = patch.apply(read) {
                    let p = self.file(ProblemKind::BadMutation, &path, format!("does not apply to the fixture: {e}")).with_help("regenerate the patch against the current fixture with `diff -u` or `git diff --no-index`");
                    self.out.push(p);
                }
            }
        }
    }
}

fn line_offset(text: &str, line: usize) -> usize {
    if line <= 1 {
        return 0;
    }
    text.match_indices('\n')
        .nth(line - 2)
        .map_or(text.len(), |(i, _)| i + 1)
}
