//! Assertions (`success`, rubric levels, caps): each kind's own rules.

use std::ops::Range;

use toml::Spanned;

use super::{paths::path_escape, Validator};
use crate::assertion::{Assertion, Calls, FileContains, FilesUnchanged, McpCalls, StateAssertion};
use crate::model::{Condition, Task};
use crate::problem::ProblemKind;

impl Validator<'_> {
    /// A `success` (or other) condition: exactly one non-empty list, `all` or `any`, and each of
    /// its assertions.
    pub(super) fn condition(&mut self, task: &Task, name: &str, cond: &Spanned<Condition>) {
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

    /// A regex that compiles, as the scorer compiles it.
    pub(super) fn regex(&mut self, re: &Spanned<String>) {
        if let Err(e) = regex::Regex::new(re.get_ref()) {
            let detail = e.to_string();
            let last = detail
                .lines()
                .last()
                .unwrap_or_default()
                .trim()
                .trim_start_matches("error: ")
                .to_string();
            let p = self.at(ProblemKind::BadPattern, re.span(), format!("the regex `{}` does not compile: {last}", re.get_ref())).with_label("invalid regex").with_help("regexes use Rust `regex` syntax; in TOML, '...' literal strings keep backslashes as written, and '''...''' ones also hold a ' (won't)");
            self.out.push(p);
        }
    }

    /// A workspace glob that stays inside the workspace and compiles.
    pub(super) fn glob(&mut self, span: Range<usize>, glob: &str) {
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

    /// Checks one assertion of `task` (and the one a `not` wraps).
    pub(super) fn assertion(&mut self, task: &Task, a: &Spanned<Assertion>) {
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
            Assertion::FileContains(fc) => self.file_contains(fc),
            Assertion::Check(c) => self.check(task, span, c),
            Assertion::Calls(c) => self.calls(task, span, c),
            Assertion::McpCalls(c) => self.mcp_calls(span, c),
            Assertion::State(s) => self.state(span, s),
            Assertion::Visual(v) => self.visual(span, v),
            Assertion::Steps(_) if task.steps.is_empty() => {
                let p = self
                    .at(
                        ProblemKind::Inconsistent,
                        span,
                        format!(
                            "a `steps` assertion in task `{}`, which has no [[tasks.steps]]",
                            task.id.get_ref()
                        ),
                    )
                    .with_label("no steps to reward")
                    .with_help("give the task its [[tasks.steps]], or use another assertion");
                self.out.push(p);
            }
            Assertion::Steps(_) => {}
            Assertion::Not(inner) => self.assertion(task, inner),
        }
    }

    /// An `mcp_calls` assertion: a server of the suite, bounds that can hold, a regex that
    /// compiles.
    fn mcp_calls(&mut self, span: Range<usize>, c: &McpCalls) {
        self.mcp_server_ref(&c.server);
        if let Some(re) = &c.args_match {
            self.regex(re);
        }
        if let (Some(min), Some(max)) = (c.min, c.max) {
            if min > max {
                let p = self
                    .at(
                        ProblemKind::Inconsistent,
                        span,
                        format!("`min = {min}` is above `max = {max}`: no count of calls holds"),
                    )
                    .with_label("bounds that cannot hold")
                    .with_help("swap them, or drop one");
                self.out.push(p);
            }
        }
    }

    /// A `file_contains` assertion: a path inside the workspace and a regex that compiles.
    fn file_contains(&mut self, fc: &FileContains) {
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

    /// A `calls` assertion: a task with an interface, bounds that can hold, a regex that
    /// compiles.
    fn calls(&mut self, task: &Task, span: Range<usize>, c: &Calls) {
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
                .with_help("add [tasks.interface] with `command = \"NAME\"` and `verb_arg = 1`");
            self.out.push(p);
        }
        if let Some(server) = task.interface.as_ref().and_then(|i| i.mcp.as_ref()) {
            let p = self
                .at(
                    ProblemKind::Inconsistent,
                    span.clone(),
                    format!(
                        "task `{}` counts command `calls`, but its interface is the MCP server `{}`",
                        task.id.get_ref(),
                        server.get_ref()
                    ),
                )
                .with_label("no command is counted")
                .with_help(format!(
                    "count its tool calls: `{{ mcp_calls = {{ server = \"{}\", tool = \"TOOL\", min = 1 }} }}`",
                    server.get_ref()
                ));
            self.out.push(p);
        }
        if let (Some(min), Some(max)) = (c.min, c.max) {
            if min > max {
                let p = self
                    .at(
                        ProblemKind::InvalidValue,
                        span,
                        format!("`calls` has min = {min} above max = {max}"),
                    )
                    .with_label("can never hold")
                    .with_help("swap or fix the bounds");
                self.out.push(p);
            }
        }
        for re in [&c.args_match, &c.stdin_matches].into_iter().flatten() {
            self.regex(re);
        }
    }

    /// A `state` assertion: a known service, a JSON pointer, exactly one test, a regex that
    /// compiles.
    fn state(&mut self, span: Range<usize>, s: &StateAssertion) {
        self.state_service(s);
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
            let p = self
                .at(
                    ProblemKind::Inconsistent,
                    span,
                    "a `state` assertion needs exactly one of `equals`, `matches` or `exists`",
                )
                .with_label(format!("{given} given"))
                .with_help("e.g. `equals = \"dana\"`, `matches = \"^re\"` or `exists = true`");
            self.out.push(p);
        }
        if let Some(re) = &s.matches {
            self.regex(re);
        }
    }

    /// The service a `state` assertion reads must be one of the suite's.
    fn state_service(&mut self, s: &StateAssertion) {
        let known: Vec<&str> = self
            .suite
            .file
            .services
            .iter()
            .map(|s| s.name.get_ref().as_str())
            .chain(
                self.suite
                    .file
                    .mcp_servers
                    .iter()
                    .map(|s| s.name.get_ref().as_str()),
            )
            .collect();
        if known.contains(&s.service.get_ref().as_str()) {
            return;
        }
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
}
