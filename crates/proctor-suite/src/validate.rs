//! Every check `proctor validate` makes beyond parsing. Each check adds to one list, so a
//! suite's author sees all its problems at once rather than one per run.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::assertion::{Assertion, Calls, Check, FileContains, FilesUnchanged, StateAssertion};
use crate::model::{
    AgentKind, Condition, Environment, Expect, MetricRef, Statistic, Task, Variant, METRICS,
    PER_TRIAL_METRICS,
};
use crate::parse::parse_toml;
use crate::patch::Patch;
use crate::problem::{Problem, ProblemKind, SourceFile};
use crate::suite::{read_script, Suite};

pub mod history;
pub mod leak;
mod visual;

/// The longest wall or check timeout a suite may ask for: a day.
const MAX_TIMEOUT_SECONDS: u64 = 86_400;

/// What the checks may assume beyond the suite's own files.
///
/// The default makes only the checks that depend on nothing but the suite, as every command
/// that opens a suite does; `proctor validate` also looks bare `allow` names up on the host and
/// may limit the per-task files it requires to the tasks that will run.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The folders a bare `allow` name is looked up in, in order: the runner's rule is `PATH`,
    /// then proctor's own folder. `None`: bare names are not looked up.
    pub search_path: Option<Vec<PathBuf>>,
    /// The tasks that will run: only they need a scripted-agent file and a model script.
    /// `None`: every task of the suite.
    pub tasks: Option<Vec<String>>,
    /// Whether to audit the fixture's `.git` folders with the `git` on `PATH` (see
    /// [`history`]): `proctor validate` and `proctor run` do.
    pub history: bool,
}

/// What [`check`] found: the errors that make a suite invalid, and the warnings that do not.
#[derive(Debug, Clone, Default)]
pub struct Checked {
    /// Every error; empty when the suite is valid.
    pub problems: Vec<Problem>,
    /// Everything worth a person's look that refuses nothing.
    pub warnings: Vec<Problem>,
}

/// All problems with a parsed suite; empty when it is valid.
pub fn problems(suite: &Suite) -> Vec<Problem> {
    problems_with(suite, &Options::default())
}

/// All problems with a parsed suite under `options`; empty when it is valid.
pub fn problems_with(suite: &Suite, options: &Options) -> Vec<Problem> {
    check(suite, options).problems
}

/// Every check under `options`: the errors and, apart, the warnings.
pub fn check(suite: &Suite, options: &Options) -> Checked {
    let mut v = Validator {
        suite,
        src: &suite.source,
        options,
        spans: toml::from_str(suite.source.text()).unwrap_or_default(),
        read: BTreeSet::new(),
        out: Vec::new(),
    };
    v.top_level();
    v.ids();
    v.hidden_parts();
    v.forbidden_files();
    v.variants();
    v.services();
    v.tasks();
    v.promotion();
    v.suite_folders();
    v.leaks();
    let (warnings, problems) = v
        .out
        .into_iter()
        .partition(|p| p.severity == crate::problem::Severity::Warning);
    Checked { problems, warnings }
}

struct Validator<'a> {
    suite: &'a Suite,
    src: &'a SourceFile,
    options: &'a Options,
    /// Spans the typed model does not keep (whole `allow` lists, `expect`).
    spans: Spans,
    /// Script files already parsed: variants often share them, and one report per file is enough.
    read: BTreeSet<PathBuf>,
    out: Vec<Problem>,
}

/// A second, lenient read of `suite.toml` for the spans of values the typed model keeps without
/// one. Its lists are in file order, like those of the typed model.
#[derive(Debug, Default, Deserialize)]
struct Spans {
    #[serde(default)]
    development_trials: Option<Spanned<toml::Value>>,
    #[serde(default)]
    release_trials: Option<Spanned<toml::Value>>,
    #[serde(default)]
    defaults: AllowSpan,
    #[serde(default)]
    variants: Vec<AllowSpan>,
    #[serde(default)]
    tasks: Vec<TaskSpans>,
}

#[derive(Debug, Default, Deserialize)]
struct AllowSpan {
    #[serde(default)]
    allow: Option<Spanned<toml::Value>>,
}

#[derive(Debug, Default, Deserialize)]
struct TaskSpans {
    #[serde(default)]
    allow: Option<Spanned<toml::Value>>,
    #[serde(default)]
    expect: Option<Spanned<toml::Value>>,
}

/// The span of a value the lenient read found, or the file's start.
fn span_of(value: &Option<Spanned<toml::Value>>) -> Range<usize> {
    value.as_ref().map_or(0..0, Spanned::span)
}

/// The spans of a model script's turns, to point at the one that is inconsistent.
#[derive(Debug, Default, Deserialize)]
struct TurnSpans {
    #[serde(default)]
    turns: Vec<Spanned<toml::Value>>,
}

/// Whether `r` reads as a registry image reference: `[HOST[:PORT]/]NAME[:TAG][@sha256:HEX]` with
/// a lower-case name and no white space (the runner parses it fully).
fn valid_image_reference(r: &str) -> bool {
    let (name, digest) = match r.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (r, None),
    };
    if let Some(d) = digest {
        let hex = d.strip_prefix("sha256:").unwrap_or("");
        if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return false;
        }
    }
    !name.is_empty()
        && !name.starts_with('/')
        && !name.ends_with([':', '/'])
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-/:".contains(c))
        && name
            .split('/')
            .skip(1)
            .all(|part| part.chars().all(|c| !c.is_ascii_uppercase()))
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

/// The folders at the top of a suite that the agent must never see: `holdout/` (for checks
/// only), `answers/` (for people), `mutations/` (applied, never shown as patches).
const HIDDEN_FOLDERS: &[(&str, &str)] = &[
    ("holdout", "the holdout files, which only checks may see"),
    ("answers", "the answer sheets"),
    ("mutations", "the hidden mutations"),
];

/// A suite path as its normal components (`.` and empty parts dropped); `[]` is the suite root.
/// `None` for a path [`path_escape`] refuses.
fn suite_parts(p: &str) -> Option<Vec<&str>> {
    if path_escape(p).is_some() {
        return None;
    }
    Path::new(p)
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .map(|c| match c {
            Component::Normal(n) => n.to_str(),
            _ => None,
        })
        .collect()
}

/// How a path written in the suite meets a hidden part of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Overlap {
    /// The path is the hidden part.
    Is,
    /// The hidden part lies inside the path.
    Contains,
    /// The path lies inside the hidden part.
    Inside,
}

impl Overlap {
    /// How `path` meets `hidden` (both as components), if it does.
    fn of(path: &[&str], hidden: &[&str]) -> Option<Overlap> {
        if path == hidden {
            Some(Overlap::Is)
        } else if hidden.starts_with(path) {
            Some(Overlap::Contains)
        } else if path.starts_with(hidden) {
            Some(Overlap::Inside)
        } else {
            None
        }
    }

    fn verb(self) -> &'static str {
        match self {
            Overlap::Is => "is",
            Overlap::Contains => "contains",
            Overlap::Inside => "lies inside",
        }
    }
}

/// A hidden part of the suite that a path meets: how, which part (as written in messages) and
/// what it holds. `overlap: None` is the suite folder itself, which holds every hidden part.
struct HiddenHit {
    overlap: Option<Overlap>,
    part: String,
    what: String,
}

impl HiddenHit {
    /// The end of the problem's message, after the path.
    fn describe(&self) -> String {
        match self.overlap {
            Some(o) => format!("{} `{}`, {}", o.verb(), self.part, self.what),
            None => "is the suite folder itself, which holds suite.toml and the hidden holdout/, answers/, mutations/ and agents/".to_string(),
        }
    }
}

/// Whether `p` is a file the runner can execute (its rule for allowed commands).
fn executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The name the agent types for an `allow` entry: the entry itself, or a path's file name.
fn allowed_name(entry: &str) -> &str {
    if entry.contains('/') {
        Path::new(entry)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(entry)
    } else {
        entry
    }
}

/// Whether an allow list lets the agent run `command`.
fn allows(list: &[Spanned<String>], command: &str) -> bool {
    list.iter()
        .any(|e| e.get_ref() == command || allowed_name(e.get_ref()) == allowed_name(command))
}

/// Agent CLIs that cannot run on a model script without a `model`, each with the reason.
const NAMES_ITS_MODEL: &[(AgentKind, &str)] = &[(
    AgentKind::Codex,
    "Codex's default model runs in \"code mode\", whose shell needs a `codex-code-mode-host` the npm package lacks, so it could not run a single command",
)];

/// Interpreters whose first operand is the script they run.
const INTERPRETERS: &[&str] = &["python3", "python", "sh", "bash", "node", "ruby", "perl"];
/// Extensions that mark an interpreter's operand as a script file.
const SCRIPT_EXTENSIONS: &[&str] = &[".py", ".sh", ".js", ".rb", ".pl"];
/// Interpreter options after which the code is given inline, not as a file.
const INLINE_CODE_FLAGS: &[&str] = &["-c", "-m", "-e", "-E", "-p", "--eval", "--print"];

/// A file a `check` command needs from the workspace before the agent could have made it: the
/// program itself when it is a relative path (`./verify.sh`, `bin/check`), or the script an
/// interpreter runs (`python3 check_fix.py`). Returns the word as written and the path it names
/// relative to the workspace; `None` when the command names no such file or is too dynamic to
/// read (variables, globs, `python3 -c ...`).
fn check_file(command: &str) -> Option<(String, String)> {
    let words = first_command_words(command)?;
    let mut words = words
        .into_iter()
        .skip_while(|w| w.split_once('=').is_some_and(|(k, _)| is_var_name(k)));
    let program = words.next()?;
    let word = if program.contains('/') {
        program
    } else if INTERPRETERS.contains(&program.as_str()) {
        let mut operand = None;
        for w in words {
            if INLINE_CODE_FLAGS.contains(&w.as_str()) {
                return None;
            }
            if !w.starts_with('-') {
                operand = Some(w);
                break;
            }
        }
        let operand = operand?;
        if !SCRIPT_EXTENSIONS.iter().any(|e| operand.ends_with(e)) {
            return None;
        }
        operand
    } else {
        return None;
    };
    let path = Path::new(&word);
    if word.contains(['$', '`', '*', '?', '[', '{', '~'])
        || path.is_absolute()
        || path
            .components()
            .any(|c| matches!(c, Component::ParentDir | Component::RootDir))
    {
        return None;
    }
    let rel: PathBuf = path
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect();
    let rel = rel.to_str()?.to_string();
    (!rel.is_empty()).then_some((word, rel))
}

fn is_var_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The words of the first simple command of a shell command line, with quotes removed; `None`
/// when a quote is not closed. Words the shell expands keep their `$`, `*`, ... for the caller
/// to set aside.
fn first_command_words(command: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            // A comment starts only at the beginning of a word.
            '#' if !in_word => break,
            ';' | '&' | '|' | '<' | '>' | '(' | ')' | '\n' => break,
            '\'' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '\'' => break,
                        q => word.push(q),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => word.push(chars.next()?),
                        q => word.push(q),
                    }
                }
            }
            '\\' => {
                in_word = true;
                word.push(chars.next()?);
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Some(words)
}

impl<'a> Validator<'a> {
    fn at(&self, kind: ProblemKind, span: Range<usize>, msg: impl Into<String>) -> Problem {
        Problem::at(kind, self.src, span, msg)
    }

    fn file(&self, kind: ProblemKind, file: &Path, msg: impl Into<String>) -> Problem {
        Problem::in_file(kind, file, msg)
    }

    /// The leak audit ([`leak`]) of the fixture and, with [`Options::history`], of its `.git`
    /// folders ([`history`]).
    fn leaks(&mut self) {
        if !self.suite.fixture_dir().is_dir() {
            return;
        }
        let secrets = leak::Secrets::of(self.suite);
        let audit = leak::audit_fixture(self.suite, &secrets);
        self.out.extend(audit.problems);
        if !self.options.history {
            return;
        }
        for dir in audit.git_dirs {
            self.out.extend(history::audit(&dir, &secrets));
        }
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

    /// Every suite path whose content the agent is given: the fixture, each variant's `files`
    /// sources and each `allow` path (a program the agent can read as well as run).
    fn laid_paths(&self) -> Vec<String> {
        let f = &self.suite.file;
        let mut out = vec![f.fixture.get_ref().clone()];
        for v in &f.variants {
            out.extend(v.files.values().map(|src| src.get_ref().clone()));
        }
        let lists = std::iter::once(&f.defaults.allow)
            .chain(f.variants.iter().map(|v| &v.allow))
            .chain(f.tasks.iter().map(|t| &t.allow))
            .flatten();
        for list in lists {
            out.extend(
                list.iter()
                    .filter(|a| a.get_ref().contains('/'))
                    .map(|a| a.get_ref().clone()),
            );
        }
        out
    }

    /// The hidden part of the suite `path` meets, if any. Hidden from everything: `holdout/`,
    /// `answers/`, `mutations/` and `suite.toml`. Hidden from what the agent is given (`laid`):
    /// also `agents/` as a whole and every variant's `script` and `model_script` (the steps of
    /// scripted agents and the turns of scripted models, read by proctor and never laid into a
    /// workspace); a variant's own files elsewhere under `agents/` may be laid.
    fn hidden_hit(&self, path: &str, laid: bool) -> Option<HiddenHit> {
        let parts = suite_parts(path)?;
        if parts.is_empty() {
            return Some(HiddenHit {
                overlap: None,
                part: ".".to_string(),
                what: String::new(),
            });
        }
        let mut fixed: Vec<(Vec<&str>, String, String)> = HIDDEN_FOLDERS
            .iter()
            .map(|(name, what)| (vec![*name], format!("{name}/"), what.to_string()))
            .collect();
        fixed.push((
            vec!["suite.toml"],
            "suite.toml".to_string(),
            "the suite's rules".to_string(),
        ));
        for (hidden, part, what) in fixed {
            if let Some(overlap) = Overlap::of(&parts, &hidden) {
                return Some(HiddenHit {
                    overlap: Some(overlap),
                    part,
                    what,
                });
            }
        }
        if !laid {
            return None;
        }
        if parts == ["agents"] {
            return Some(HiddenHit {
                overlap: Some(Overlap::Is),
                part: "agents/".to_string(),
                what: "the folder of the scripted agents and model scripts".to_string(),
            });
        }
        for v in &self.suite.file.variants {
            for (key, value) in [("script", &v.script), ("model_script", &v.model_script)] {
                let Some(value) = value else {
                    continue;
                };
                let Some(hidden) = suite_parts(value.get_ref()).filter(|h| !h.is_empty()) else {
                    continue;
                };
                if let Some(overlap) = Overlap::of(&parts, &hidden) {
                    return Some(HiddenHit {
                        overlap: Some(overlap),
                        part: hidden.join("/"),
                        what: format!("the `{key}` of variant `{}`", v.id.get_ref()),
                    });
                }
            }
        }
        None
    }

    /// One problem for a path that meets a hidden part of the suite.
    fn hidden_problem(
        &self,
        span: Range<usize>,
        field: &str,
        path: &str,
        hit: &HiddenHit,
        help: String,
    ) -> Problem {
        self.at(
            ProblemKind::BadPath,
            span,
            format!("{field} `{path}` {}", hit.describe()),
        )
        .with_label("hidden from the agent")
        .with_help(help)
    }

    /// No path the suite writes may hand the agent (or an agent's script) a hidden part of the
    /// suite: the fixture, `files`, `allow` paths, `script`, `model_script` and services'
    /// programs are each checked against `holdout/`, `answers/`, `mutations/` and `suite.toml`,
    /// and what is laid into a workspace also against `agents/` and the scripted agents' files.
    fn hidden_parts(&mut self) {
        let suite = self.suite;
        let f = &suite.file;
        let hidden_list =
            "holdout/, answers/, mutations/ and suite.toml are never shown to the agent";
        let fixture = f.fixture.get_ref();
        if let Some(hit) = self.hidden_hit(fixture, true) {
            let p = self.hidden_problem(
                f.fixture.span(),
                "the fixture",
                fixture,
                &hit,
                format!("keep the starting workspace in a folder of its own and point at it, such as `fixture = \"fixture\"`; {hidden_list}"),
            );
            self.out.push(p);
        }
        for v in &f.variants {
            for (dest, src) in &v.files {
                if let Some(hit) = self.hidden_hit(src.get_ref(), true) {
                    let p = self.hidden_problem(
                        src.span(),
                        &format!("`files` source (for `{dest}`)"),
                        src.get_ref(),
                        &hit,
                        format!("copy what the agent may see into a file of its own, such as \"files/{}/{dest}\", and point `files` at it; {hidden_list}, nor are scripted agents' files", v.id.get_ref()),
                    );
                    self.out.push(p);
                }
            }
            for (key, value) in [("script", &v.script), ("model_script", &v.model_script)] {
                let Some(value) = value else {
                    continue;
                };
                if let Some(hit) = self.hidden_hit(value.get_ref(), false) {
                    let p = self.hidden_problem(
                        value.span(),
                        &format!("`{key}`"),
                        value.get_ref(),
                        &hit,
                        format!("keep scripted agents and model scripts under agents/, such as `{key} = \"agents/{}\"`", v.id.get_ref()),
                    );
                    self.out.push(p);
                }
            }
        }
        let lists = std::iter::once(&f.defaults.allow)
            .chain(f.variants.iter().map(|v| &v.allow))
            .chain(f.tasks.iter().map(|t| &t.allow))
            .flatten();
        for list in lists {
            for a in list.iter().filter(|a| a.get_ref().contains('/')) {
                if let Some(hit) = self.hidden_hit(a.get_ref(), true) {
                    let name = allowed_name(a.get_ref());
                    let p = self.hidden_problem(
                        a.span(),
                        "the `allow` path",
                        a.get_ref(),
                        &hit,
                        format!("the agent can read every program it is allowed: put the program in a folder of its own, such as \"bin/{name}\", and allow that path; {hidden_list}"),
                    );
                    self.out.push(p);
                }
            }
        }
        for service in &f.services {
            let Some(prog) = service
                .command
                .get_ref()
                .first()
                .filter(|p| p.contains('/'))
            else {
                continue;
            };
            if let Some(hit) = self.hidden_hit(prog, true) {
                let name = allowed_name(prog);
                let p = self.hidden_problem(
                    service.command.span(),
                    &format!("the program of service `{}`", service.name.get_ref()),
                    prog,
                    &hit,
                    format!("put the service's program in a folder of its own, such as \"services/{name}\"; {hidden_list}"),
                );
                self.out.push(p);
            }
        }
    }

    fn forbidden_files(&mut self) {
        let root = self.suite.root.clone();
        // A top-level `.git` or `.proctor` is skipped (version control, proctor's own store),
        // unless something the agent is given (the fixture, a variant's `files`, an `allow`
        // path) is, contains or lies inside it: then every file of it is checked like the rest.
        let laid = self.laid_paths();
        let skipped: BTreeSet<&str> = [".git", ".proctor"]
            .into_iter()
            .filter(|name| {
                !laid
                    .iter()
                    .filter_map(|p| suite_parts(p))
                    .any(|parts| Overlap::of(&parts, &[*name]).is_some())
            })
            .collect();
        let walker = walkdir::WalkDir::new(&root)
            .min_depth(1)
            .sort_by_file_name()
            .into_iter()
            .filter_entry(|e| {
                !(e.depth() == 1 && e.file_name().to_str().is_some_and(|n| skipped.contains(n)))
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

    /// Checks each entry of an allow list resolves as the runner resolves it: a path inside the
    /// suite to an executable file, or a bare name found in the search path.
    /// `in_image`: the list applies to trials that run in an OCI image, where bare names are
    /// found on the image's `PATH` when the run starts, not on this machine's.
    /// `[diff]` converters: a glob that compiles, an argv with a program and `{}` for the path.
    fn diff_converters(&mut self) {
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

    /// `setup` commands: each a command line for `sh -c`, none empty.
    fn setup_commands(&mut self, setup: &[Spanned<String>]) {
        for c in setup.iter().filter(|c| c.get_ref().trim().is_empty()) {
            let p = self
                .at(
                    ProblemKind::InvalidValue,
                    c.span(),
                    "an empty command in `setup`",
                )
                .with_label("empty")
                .with_help("write a command line for `sh -c`, e.g. \"sqlite3 shop.db < seed.sql\", or remove the entry");
            self.out.push(p);
        }
    }

    fn allow_list(&mut self, allow: &[Spanned<String>], in_image: bool) {
        for a in allow {
            let entry = a.get_ref();
            if entry.contains('/') {
                if self.suite_path("allow", a, true) && !executable(&self.suite.root.join(entry)) {
                    let p = self
                        .at(
                            ProblemKind::BadPath,
                            a.span(),
                            format!("`allow` entry `{entry}` is not an executable file"),
                        )
                        .with_label("not executable")
                        .with_help(format!(
                            "allowed commands are run through shims: make it executable (`chmod +x {entry}` in the suite folder)"
                        ));
                    self.out.push(p);
                }
            } else if entry.is_empty() {
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
            } else if let (Some(dirs), false) = (&self.options.search_path, in_image) {
                if !dirs.iter().any(|d| executable(&d.join(entry))) {
                    let p = self
                        .at(
                            ProblemKind::UnknownReference,
                            a.span(),
                            format!("`allow` entry `{entry}` is not a path inside the suite and no program of that name is on PATH"),
                        )
                        .with_label("found nowhere")
                        .with_help(format!(
                            "install `{entry}` on PATH (or beside proctor), or put the program in the suite and allow it by path, such as \"bin/{entry}\""
                        ));
                    self.out.push(p);
                }
            }
        }
    }

    fn variants(&mut self) {
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

    fn script_variant(&mut self, variant: &Variant) {
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
    fn model_script_variant(&mut self, variant: &Variant, ms: &Spanned<String>) {
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
    fn model_script_file(&mut self, path: &Path) {
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
        let script: proctor_mock_model::Script = match parse_toml(&source) {
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
            Err(proctor_mock_model::ScriptError::Invalid { turn, message, .. }) => {
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
            Err(e) => {
                let p = self.file(ProblemKind::Inconsistent, path, e.to_string());
                self.out.push(p);
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

    /// An `[environment]` table: an archive or layout image inside the suite that exists, a
    /// registry reference of valid characters, an absolute `workdir`, positive resource hints.
    fn environment(&mut self, env: &Environment) {
        if let Some(image) = &env.image {
            let v = image.get_ref();
            let local = v
                .strip_prefix("oci-archive:")
                .or_else(|| v.strip_prefix("oci:"));
            match local {
                Some(path) => {
                    let path = Spanned::new(image.span(), path.to_string());
                    self.suite_path("image", &path, true);
                }
                None if !valid_image_reference(v) => {
                    let p = self
                        .at(
                            ProblemKind::InvalidValue,
                            image.span(),
                            format!("`{v}` is not an image reference"),
                        )
                        .with_label("not an image")
                        .with_help("write \"oci-archive:PATH\" or \"oci:PATH\" (in the suite), or a registry reference such as \"python:3.12-slim\", \"ghcr.io/org/img:tag\" or \"REPO@sha256:<64 hex>\"");
                    self.out.push(p);
                }
                None => {}
            }
        }
        if let Some(cpus) = env
            .cpus
            .as_ref()
            .filter(|c| !(c.get_ref().is_finite() && *c.get_ref() > 0.0))
        {
            let p = self
                .at(
                    ProblemKind::InvalidValue,
                    cpus.span(),
                    format!("`cpus` must be a positive number, not {}", cpus.get_ref()),
                )
                .with_label("not a positive number")
                .with_help("write a number of CPUs such as 2 or 0.5");
            self.out.push(p);
        }
        for (key, value) in [
            ("memory_mb", &env.memory_mb),
            ("storage_mb", &env.storage_mb),
        ] {
            if let Some(v) = value.as_ref().filter(|v| *v.get_ref() == 0) {
                let p = self
                    .at(
                        ProblemKind::InvalidValue,
                        v.span(),
                        format!("`{key}` must be at least 1 (MiB), not 0"),
                    )
                    .with_label("zero")
                    .with_help("write a size in MiB such as 4096, or leave the key out");
                self.out.push(p);
            }
        }
        if let Some(w) = &env.workdir {
            if !w.get_ref().starts_with('/') || w.get_ref().split('/').any(|c| c == "..") {
                let p = self
                    .at(
                        ProblemKind::InvalidValue,
                        w.span(),
                        format!(
                            "`workdir` must be an absolute folder inside the image, not `{}`",
                            w.get_ref()
                        ),
                    )
                    .with_label("not absolute")
                    .with_help("write a path such as \"/app\"");
                self.out.push(p);
            } else if w.get_ref().split('/').all(|c| c.is_empty() || c == ".") {
                let p = self
                    .at(
                        ProblemKind::InvalidValue,
                        w.span(),
                        format!(
                            "`workdir` is `{}`, the root of the file system: the workspace is laid at the working directory, which cannot be the root",
                            w.get_ref()
                        ),
                    )
                    .with_label("the root")
                    .with_help("write a folder such as \"/app\"");
                self.out.push(p);
            }
        }
    }

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
            let Some(v) = value.filter(|v| !(1..=MAX_TIMEOUT_SECONDS).contains(v.get_ref())) else {
                continue;
            };
            let p = self
                .at(
                    ProblemKind::InvalidValue,
                    v.span(),
                    format!(
                        "`{key}` must be between 1 and {MAX_TIMEOUT_SECONDS} seconds (a day), not {}",
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

    fn tasks(&mut self) {
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
                self.allow_list(allow, suite.environment(task).is_some());
            }
            if let Some(setup) = &task.setup {
                self.setup_commands(setup);
            }
            self.interface_allowed(index, task);
            self.interface_verb(task);
            self.refusal_patterns(index, task);
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

    /// The interface command of a task must be on the allow list every variant runs it with:
    /// only allowed commands are shimmed, so calls of any other are never logged.
    fn interface_allowed(&mut self, index: usize, task: &Task) {
        let Some(interface) = &task.interface else {
            return;
        };
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
    fn interface_verb(&mut self, task: &Task) {
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
            let p = self.at(ProblemKind::BadPattern, re.span(), format!("the regex `{}` does not compile: {last}", re.get_ref())).with_label("invalid regex").with_help("regexes use Rust `regex` syntax; in TOML, '...' literal strings keep backslashes as written, and '''...''' ones also hold a ' (won't)");
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

    /// Checks one assertion of `task` (and the one a `not` wraps).
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
            Assertion::FileContains(fc) => self.file_contains(fc),
            Assertion::Check(c) => self.check(task, span, c),
            Assertion::Calls(c) => self.calls(task, span, c),
            Assertion::State(s) => self.state(span, s),
            Assertion::Visual(v) => self.visual(span, v),
            Assertion::Not(inner) => self.assertion(task, inner),
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

    /// A `check` assertion: a command, a regex that compiles, and the program it runs.
    fn check(&mut self, task: &Task, span: Range<usize>, c: &Check) {
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
        self.check_program(task, span, &c.command);
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

    /// A `check` that runs a file of its own (`./verify.sh`, `python3 check_fix.py`) needs it
    /// in the workspace the check runs in: the fixture, with `holdout/TASK_ID/` laid over it
    /// (or a file every variant copies in).
    fn check_program(&mut self, task: &Task, span: Range<usize>, command: &str) {
        let Some((word, rel)) = check_file(command) else {
            return;
        };
        let id = task.id.get_ref();
        let holdout = self.suite.root.join("holdout").join(id);
        let variants = &self.suite.file.variants;
        let copied_in = !variants.is_empty()
            && variants.iter().all(|v| {
                v.files.keys().any(|dest| {
                    Path::new(dest)
                        .components()
                        .eq(Path::new(&rel).components())
                })
            });
        if holdout.join(&rel).is_file()
            || self.suite.fixture_dir().join(&rel).is_file()
            || copied_in
        {
            return;
        }
        // Point at the word itself when it is written verbatim inside the assertion.
        let text = self.src.text();
        let span = text
            .get(span.clone())
            .and_then(|t| t.find(word.as_str()))
            .map_or(span.clone(), |at| {
                span.start + at..span.start + at + word.len()
            });
        let fixture = self.suite.file.fixture.get_ref();
        let p = self
            .at(
                ProblemKind::BadPath,
                span,
                format!("a `check` of task `{id}` runs `{word}`, which is neither in holdout/{id}/ nor in the fixture"),
            )
            .with_label("no such file")
            .with_help(format!(
                "checks run in the end-state workspace with holdout/{id}/ laid over it: write holdout/{id}/{rel}, or add {rel} to `{fixture}/`, or fix the path"
            ));
        self.out.push(p);
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
            if let Some(p) = self.metric_problem(metric) {
                self.out.push(p);
            }
        }
    }

    /// The problem with a metric as `[promotion]` names it (`NAME` or `NAME:STATISTIC`), if any:
    /// a name proctor does not report, a statistic that is not one, or a statistic on a rate.
    fn metric_problem(&self, metric: &Spanned<String>) -> Option<Problem> {
        let written = metric.get_ref().as_str();
        let r = MetricRef::split(written);
        if !METRICS.contains(&r.metric) {
            let list = METRICS.join(", ");
            let hint = match crate::problem::nearest(r.metric, METRICS.iter().copied()) {
                Some(n) => format!("did you mean `{n}`? The metrics are: {list}"),
                None => format!("write one of the metrics: {list}"),
            };
            return Some(
                self.at(
                    ProblemKind::UnknownReference,
                    metric.span(),
                    format!("`{}` is not a metric proctor reports", r.metric),
                )
                .with_label("unknown metric")
                .with_help(hint),
            );
        }
        let statistic = r.statistic?;
        let choices = Statistic::ALL
            .iter()
            .map(|s| format!("`{}:{}`", r.metric, s.as_str()))
            .collect::<Vec<_>>()
            .join(", ");
        if !r.is_per_trial() {
            return Some(
                self.at(
                    ProblemKind::UnknownReference,
                    metric.span(),
                    format!(
                        "`{}` is one number per arm and takes no statistic, but `{written}` names `{statistic}`",
                        r.metric
                    ),
                )
                .with_label("no statistic here")
                .with_help(format!(
                    "write `{}` alone; a statistic (median, mean, total) applies only to the per-trial metrics: {}",
                    r.metric,
                    PER_TRIAL_METRICS.join(", ")
                )),
            );
        }
        if Statistic::parse(statistic).is_some() {
            return None;
        }
        let names: Vec<&str> = Statistic::ALL.iter().map(|s| s.as_str()).collect();
        let hint = match crate::problem::nearest(statistic, names.iter().copied()) {
            Some(n) => format!(
                "did you mean `{}:{n}`? Write one of {choices}, or `{}` alone for the mean",
                r.metric, r.metric
            ),
            None => format!(
                "write one of {choices}, or `{}` alone for the mean",
                r.metric
            ),
        };
        Some(
            self.at(
                ProblemKind::UnknownReference,
                metric.span(),
                format!("`{statistic}` in `{written}` is not a statistic proctor reports"),
            )
            .with_label("unknown statistic")
            .with_help(hint),
        )
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
            let text = match crate::parse::read_text(&path, "the patch") {
                Ok(t) => t,
                Err(p) => {
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
                        .with_help("write mutations with `diff -u` or `git diff`: `--- a/PATH`, `+++ b/PATH`, then `@@ -l,n +l,n @@` hunks; a binary file's change with `git diff --binary`");
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

#[cfg(test)]
mod tests {
    use super::*;

    fn needed(command: &str) -> Option<String> {
        check_file(command).map(|(_, rel)| rel)
    }

    #[test]
    fn check_files_are_read_off_relative_programs_and_interpreter_scripts() {
        assert_eq!(
            needed("python3 check_fix.py").as_deref(),
            Some("check_fix.py")
        );
        assert_eq!(needed("./verify.sh").as_deref(), Some("verify.sh"));
        assert_eq!(needed("bin/check --all").as_deref(), Some("bin/check"));
        assert_eq!(
            needed("sh ./t/run.sh && echo ok").as_deref(),
            Some("t/run.sh")
        );
        assert_eq!(
            needed("python3 -u 'check me.py'").as_deref(),
            Some("check me.py")
        );
        assert_eq!(needed("LANG=C perl check.pl").as_deref(), Some("check.pl"));
        assert_eq!(
            needed("node  check.js 2>/dev/null").as_deref(),
            Some("check.js")
        );
        assert_eq!(
            needed("ruby \"spec/check.rb\"").as_deref(),
            Some("spec/check.rb")
        );
    }

    #[test]
    fn check_commands_that_name_no_file_of_their_own_are_left_alone() {
        for command in [
            "python3 -c 'import sys; sys.exit(0)'",
            "python3 -m pytest -q",
            "grep -q foo file.txt",
            "test -f out.txt",
            "cd sub && python3 check.py",
            "python3 $CHECK.py",
            "sh -c './x.sh'",
            "bash -e",
            "python3 -W ignore check.py",
            "/usr/bin/env python3 check.py",
            "../outside.sh",
            "python3 ../outside.py",
            "python3 check_*.py",
            "node -e 'x.js'",
            "perl -E 'say 1' x.pl",
            "python3 'unclosed.py",
            "# ./commented.sh",
            "",
        ] {
            assert_eq!(needed(command), None, "{command}");
        }
    }

    #[test]
    fn allowed_names_are_file_names_of_paths() {
        assert_eq!(allowed_name("bin/tool"), "tool");
        assert_eq!(allowed_name("chat"), "chat");
        let list = vec![Spanned::new(0..0, "bin/tool".to_string())];
        assert!(allows(&list, "tool"));
        assert!(allows(&list, "bin/tool"));
        assert!(!allows(&list, "chat"));
    }
}
