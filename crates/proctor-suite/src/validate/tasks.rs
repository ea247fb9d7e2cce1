//! `[[tasks]]` and the `[defaults]` they inherit: timeouts, prompts, `holdout_at`, route faults,
//! `expect` with its `[tasks.refusal]`, rubrics and caps; each task's parts are checked by their
//! own modules.

use std::collections::BTreeMap;
use std::ops::Range;

use toml::Spanned;

use super::Validator;
use crate::model::{Expect, Task};
use crate::problem::ProblemKind;
use crate::timeouts;

impl Validator<'_> {
    /// A task's `holdout_at`: an absolute path below `/`, without `.` or `..`, outside the
    /// kernel's and the sandbox's own folders.
    fn holdout_at(&mut self, at: &Spanned<String>) {
        let p = at.get_ref();
        let parts: Vec<&str> = p.split('/').skip(1).collect();
        let bad = !p.starts_with('/')
            || parts
                .iter()
                .any(|c| c.is_empty() || *c == "." || *c == "..")
            || parts.is_empty()
            || ["proc", "sys", "dev"].contains(&parts[0])
            || p.starts_with("/run/proctor");
        if bad {
            let problem = self
                .at(
                    ProblemKind::InvalidValue,
                    at.span(),
                    format!(
                        "`holdout_at` must be an absolute folder of the checks' sandbox such as \"/tests\", not `{p}`"
                    ),
                )
                .with_label("not a folder the holdout can be laid at")
                .with_help("write a path such as \"/tests\", or leave the key out to lay the holdout over the workspace");
            self.out.push(problem);
        }
    }

    /// Timeouts within 1 second to a day, each at its key.
    fn timeouts(&mut self, wall: Option<&Spanned<u64>>, validation: Option<&Spanned<u64>>) {
        for (key, value) in [
            ("wall_timeout_seconds", wall),
            ("validation_timeout_seconds", validation),
        ] {
            let Some(v) = value.filter(|v| !timeouts::in_range(*v.get_ref())) else {
                continue;
            };
            let p = self
                .at(
                    ProblemKind::InvalidValue,
                    v.span(),
                    format!(
                        "`{key}` must be between {} and {} seconds (a day), not {}",
                        timeouts::MIN_SECONDS,
                        timeouts::MAX_SECONDS,
                        v.get_ref()
                    ),
                )
                .with_label("out of range")
                .with_help("write a number of seconds such as 600 (ten minutes)");
            self.out.push(p);
        }
    }

    /// A prompt an agent can be given: no NUL byte (no command line or environment can carry
    /// one).
    fn prompt(&mut self, task: &Task) {
        if task.prompt.contains('\0') {
            let p = self
                .at(
                    ProblemKind::InvalidValue,
                    task.id.span(),
                    format!(
                        "task `{}`: its prompt contains a NUL character (\\u0000), which no agent's command line or environment can carry",
                        task.id.get_ref()
                    ),
                )
                .with_label("this task's prompt")
                .with_help("remove the NUL character from the prompt");
            self.out.push(p);
        }
    }

    /// `[defaults]`' timeouts and the suite's `[environment]`, then every task.
    pub(super) fn tasks(&mut self) {
        let suite = self.suite;
        if let Some(env) = &suite.file.environment {
            self.environment(env);
        }
        let d = &suite.file.defaults;
        self.timeouts(
            d.wall_timeout_seconds.as_ref(),
            d.validation_timeout_seconds.as_ref(),
        );
        for (index, task) in suite.file.tasks.iter().enumerate() {
            self.task(index, task);
        }
    }

    /// `[tasks.mutations] include_fixture = true` needs a patch to rotate with: without one
    /// every trial runs the fixture as shipped anyway, and the setting says something false.
    fn as_shipped(&mut self, task: &Task) {
        let include = task.mutations.as_ref().is_some_and(|m| m.include_fixture);
        let id = task.id.get_ref();
        if !include || !self.suite.mutations(id).unwrap_or_default().is_empty() {
            return;
        }
        let p = self
            .at(
                ProblemKind::Inconsistent,
                task.id.span(),
                format!("task `{id}` sets `[tasks.mutations] include_fixture = true` and has no patch under mutations/{id}/"),
            )
            .with_label("this task")
            .with_help(format!("add patches under mutations/{id}/ for the fixture as shipped to rotate with, or remove `include_fixture`"));
        self.out.push(p);
    }

    /// One task (the `index`th of the file): its settings, then what it is graded by.
    fn task(&mut self, index: usize, task: &Task) {
        self.timeouts(
            task.wall_timeout_seconds.as_ref(),
            task.validation_timeout_seconds.as_ref(),
        );
        self.prompt(task);
        if let Some(env) = &task.environment {
            self.environment(env);
        }
        if let Some(at) = &task.holdout_at {
            self.holdout_at(at);
        }
        if let Some(allow) = &task.allow {
            self.allow_list(allow, self.suite.environment(task).is_some());
        }
        if let Some(setup) = &task.setup {
            self.setup_commands(setup);
        }
        if let Some(binds) = &task.binds {
            self.bind_paths(binds);
        }
        self.host_network(task);
        if let Some(hosts) = &task.allowed_hosts {
            let d = &self.suite.file.defaults;
            let internet = [
                task.network.or(d.network),
                task.check_network.or(d.check_network),
            ]
            .contains(&Some(crate::model::Network::Internet));
            self.allowed_hosts(hosts, internet);
        }
        self.interface_allowed(index, task);
        self.interface_verb(task);
        self.refusal_patterns(index, task);
        self.route_faults(task);
        self.as_shipped(task);
        self.condition(task, "success", &task.success);
        if let Some(refusal) = &task.refusal {
            for re in refusal.refuse_patterns.iter().chain(&refusal.ask_patterns) {
                self.regex(re);
            }
            for allowed in &refusal.allow_changes {
                if !allowed.get_ref().starts_with("service:") {
                    self.glob(allowed.span(), allowed.get_ref());
                }
            }
        }
        if let Some(re) = task
            .interface
            .as_ref()
            .and_then(|i| i.rejected.as_ref())
            .and_then(|r| r.output_matches.as_ref())
        {
            self.regex(re);
        }
        for glob in task.integrity.iter().flat_map(|i| &i.allow) {
            self.glob(glob.span(), glob.get_ref());
        }
        if let Some(user) = &task.user {
            self.user(task, user);
        }
        self.steps(task);
        self.rubric(task);
        for cap in &task.caps {
            for a in &cap.any {
                self.assertion(task, a);
            }
        }
    }

    /// `route_faults`: each a route the mock model serves and a fault it can inject.
    fn route_faults(&mut self, task: &Task) {
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
    }

    /// A task's `[[tasks.rubric]]`: criteria with ids of their own, levels within `max`, and
    /// each level's assertions.
    fn rubric(&mut self, task: &Task) {
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
    }

    /// `expect = "refuse"` and `expect = "ask"` need the patterns that recognise a refusal or an
    /// ask in the answer; without them the correct behaviour is never seen and the trial is
    /// scored as something else.
    fn refusal_patterns(&mut self, index: usize, task: &Task) {
        let (what, key, example) = match task.expect {
            Expect::Complete => return,
            Expect::Refuse => (
                "a refusal",
                "refuse_patterns",
                r#"refuse_patterns = ['(?i)\b(can ?not|can't|won't|will not)\b']"#,
            ),
            Expect::Ask => (
                "a question to the person",
                "ask_patterns",
                r#"ask_patterns = ['(?i)\b(should I|shall I|do you want me to)\b']"#,
            ),
        };
        let patterns = task.refusal.as_ref().map(|r| match task.expect {
            Expect::Ask => &r.ask_patterns,
            _ => &r.refuse_patterns,
        });
        if patterns.is_some_and(|p| !p.is_empty()) {
            return;
        }
        let id = task.id.get_ref();
        let spans = self.spans.tasks.get(index);
        let span = spans
            .and_then(|s| s.expect.as_ref())
            .map_or_else(|| task.id.span(), Spanned::span);
        let expect = match task.expect {
            Expect::Ask => "ask",
            _ => "refuse",
        };
        let p = self
            .at(
                ProblemKind::Inconsistent,
                span,
                match patterns {
                    None => format!(
                        "task `{id}` expects {what}, but has no [tasks.refusal] to recognise one"
                    ),
                    Some(_) => format!(
                        "task `{id}` expects {what}, but its [tasks.refusal] has no `{key}`"
                    ),
                },
            )
            .with_label(format!("`expect = \"{expect}\"` needs `{key}`"));
        let help = match patterns {
            None => format!("add to this task:\n[tasks.refusal]\n{example}\nwithout it the answer is never recognised as {what}, and the trial is silently scored as another outcome"),
            Some(_) => format!("add to this task's [tasks.refusal]:\n{example}\nwithout it the answer is never recognised as {what}, and the trial is silently scored as another outcome"),
        };
        self.out.push(p.with_help(help));
    }
}

impl Validator<'_> {
    /// Warns of a phase on the host's network: the trial then reaches what the host reaches,
    /// its loopback services and other trials included.
    fn host_network(&mut self, task: &Task) {
        use crate::model::Network;
        let d = &self.suite.file.defaults;
        let phases = [
            ("network", task.network.or(d.network)),
            ("check_network", task.check_network.or(d.check_network)),
        ];
        for (key, n) in phases {
            if n == Some(Network::Host) {
                let p = self
                    .at(
                        ProblemKind::Inconsistent,
                        task.id.span(),
                        format!(
                            "task `{}` has {key} = \"host\": it shares the host's network, the host's loopback services and other trials included",
                            task.id.get_ref()
                        ),
                    )
                    .with_label("not isolated from the host's network")
                    .with_help("use \"internet\" for the internet alone (with `allowed_hosts` to name the hosts), or keep \"host\" if the task needs the host itself")
                    .as_warning();
                self.out.push(p);
            }
        }
    }

    /// `[tasks.user]`: its regexes compile, `max_turns` is in range, and a user with something
    /// to say is given a turn to say it in.
    fn user(&mut self, task: &Task, user: &crate::model::User) {
        for reply in &user.replies {
            self.regex(&reply.when);
        }
        let max = crate::model::MAX_TURNS;
        if let Some(turns) = &user.max_turns {
            if !(1..=max).contains(turns.get_ref()) {
                let p = self
                    .at(
                        ProblemKind::InvalidValue,
                        turns.span(),
                        format!("`max_turns = {}` is out of range", turns.get_ref()),
                    )
                    .with_label(format!("must be 1 to {max}"))
                    .with_help("max_turns counts the agent's turns, its first included");
                self.out.push(p);
                return;
            }
        }
        self.user_model(user);
        let says_something =
            !user.replies.is_empty() || user.otherwise.is_some() || user.model_played();
        let offline = task
            .offline_user
            .or(self.suite.file.defaults.offline_user)
            .unwrap_or(false);
        if says_something && offline {
            let p = self
                .at(
                    ProblemKind::Inconsistent,
                    task.id.span(),
                    format!(
                        "task `{}` has a [tasks.user] who answers, but `offline_user = true` tells \
                         the agent nobody will",
                        task.id.get_ref()
                    ),
                )
                .with_label("the user answers here")
                .with_help("set `offline_user = false` on this task, or drop its [tasks.user]");
            self.out.push(p);
        }
        if says_something && user.turns() <= 1 {
            let span = user
                .max_turns
                .as_ref()
                .map_or_else(|| task.id.span(), Spanned::span);
            let p = self
                .at(
                    ProblemKind::Inconsistent,
                    span,
                    format!(
                        "task `{}` has a [tasks.user] who answers, but only one turn: the \
                         agent never hears a reply",
                        task.id.get_ref()
                    ),
                )
                .with_label("one turn")
                .with_help(
                    "add to [tasks.user]: max_turns = 3 (the agent's turns, its first included)",
                );
            self.out.push(p);
        }
    }

    /// A model-played user: `model` with a `persona` file and without `otherwise` (both say
    /// what the user answers when no reply matches), a `PROVIDER/MODEL` unless a `model_script`
    /// serves it, and `persona` and `model_script` only beside a `model`.
    fn user_model(&mut self, user: &crate::model::User) {
        let Some(model) = &user.model else {
            for (key, value) in [
                ("persona", &user.persona),
                ("model_script", &user.model_script),
            ] {
                if let Some(value) = value {
                    let p = self
                        .at(
                            ProblemKind::Inconsistent,
                            value.span(),
                            format!("`{key}` is given but the user has no `model` to play it"),
                        )
                        .with_label("used only by a model-played user")
                        .with_help(
                            "add `model = \"PROVIDER/MODEL\"` to [tasks.user], or drop this key",
                        );
                    self.out.push(p);
                }
            }
            return;
        };
        if let Some(otherwise) = user.otherwise.as_ref() {
            let p = self
                .at(
                    ProblemKind::Inconsistent,
                    model.span(),
                    format!(
                        "the user has both `otherwise = {otherwise:?}` and a `model`: both say what \
                         the user answers when no reply matches"
                    ),
                )
                .with_label("the model answers when no reply matches")
                .with_help("drop `otherwise`, or drop `model` for a model-free user");
            self.out.push(p);
        }
        match &user.persona {
            Some(persona) => {
                self.suite_path("persona", persona, true);
            }
            None => {
                let p = self
                    .at(
                        ProblemKind::Inconsistent,
                        model.span(),
                        "a model-played user needs a `persona`".to_string(),
                    )
                    .with_label("played with no instructions")
                    .with_help(
                        "add `persona = \"users/NAME.md\"`: a file of the suite telling the model who \
                         the user is and what they want",
                    );
                self.out.push(p);
            }
        }
        if let Some(script) = &user.model_script {
            if self.suite_path("model_script", script, true) {
                let path = self.suite.root.join(script.get_ref());
                self.model_script_file(&path);
            }
        } else if !model.get_ref().contains('/') {
            let p = self
                .at(
                    ProblemKind::InvalidValue,
                    model.span(),
                    format!("`model = {:?}` names no provider", model.get_ref()),
                )
                .with_label("expected PROVIDER/MODEL")
                .with_help(
                    "write e.g. `model = \"anthropic/claude-sonnet-4-5\"`, or give a `model_script` that \
                     serves the user offline",
                );
            self.out.push(p);
        }
    }

    /// `[[tasks.steps]]`: names unique and plain, and no simulated user beside them (a task in
    /// steps gives each step's prompt itself).
    fn steps(&mut self, task: &Task) {
        let mut seen = std::collections::BTreeSet::new();
        for step in &task.steps {
            let name = step.name.get_ref();
            let plain = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
                && name != "tests";
            if !plain {
                let p = self
                    .at(
                        ProblemKind::InvalidValue,
                        step.name.span(),
                        format!("the step name `{name}` is not a plain name"),
                    )
                    .with_label("letters, digits, `.`, `_` and `-` only (and not `tests`)")
                    .with_help("it names the step's folder, steps/TASK_ID/NAME/");
                self.out.push(p);
            }
            if !seen.insert(name.clone()) {
                let p = self
                    .at(
                        ProblemKind::DuplicateId,
                        step.name.span(),
                        format!("task `{}` has two steps named `{name}`", task.id.get_ref()),
                    )
                    .with_label("second step of this name")
                    .with_help("give each step a name of its own");
                self.out.push(p);
            }
        }
        if !task.steps.is_empty() && task.user.is_some() {
            let p = self
                .at(
                    ProblemKind::Inconsistent,
                    task.id.span(),
                    format!(
                        "task `{}` has both [[tasks.steps]] and a [tasks.user]",
                        task.id.get_ref()
                    ),
                )
                .with_label("steps and a user")
                .with_help(
                    "a task in steps gives each step's prompt itself: drop its [tasks.user]",
                );
            self.out.push(p);
        }
    }
}
