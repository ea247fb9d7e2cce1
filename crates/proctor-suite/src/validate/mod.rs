//! Every check `proctor validate` makes beyond parsing, and [`Suite::open`], which reads a suite
//! and gives it only when every check passes. Each check adds to one list, so a suite's author
//! sees all its problems at once rather than one per run.
//!
//! The rules are grouped by the part of the suite format they read: the top of `suite.toml`
//! (`top`), its `[[variants]]`, `[[tasks]]`, `[[services]]`, `[environment]`, `[promotion]`,
//! the assertions, the scripts variants run, and the suite's folders and hidden parts. A rule
//! lives in one module; [`check`] runs them in the order their problems are reported.

use std::collections::BTreeSet;
use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::problem::{Problem, ProblemKind, SourceFile};
use crate::suite::Suite;
use spans::Spans;

pub mod history;
pub mod leak;

mod argv;
mod assertions;
mod checks;
mod commands;
mod environment;
mod folders;
mod hidden;
mod interface;
mod mcp;
mod paths;
mod power;
mod promotion;
mod scripts;
mod services;
mod spans;
mod tasks;
mod top;
mod variants;
mod visual;

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
    v.prompts_fit();
    v.services();
    v.mcp_servers();
    v.tasks();
    v.promotion();
    v.power();
    v.suite_folders();
    v.leaks();
    let (warnings, problems) = v
        .out
        .into_iter()
        .partition(|p| p.severity == crate::problem::Severity::Warning);
    Checked { problems, warnings }
}

impl Suite {
    /// Reads and checks the suite in `dir`: every problem found, or a suite ready to plan.
    pub fn open(dir: &Path) -> Result<Suite, Vec<Problem>> {
        Suite::open_with(dir, &Options::default())
    }

    /// [`Suite::open`] with the checks `options` asks for (see [`Options`]).
    pub fn open_with(dir: &Path, options: &Options) -> Result<Suite, Vec<Problem>> {
        let suite = Suite::parse_all(dir)?;
        let problems = problems_with(&suite, options);
        if problems.is_empty() {
            Ok(suite)
        } else {
            Err(problems)
        }
    }
}

/// The checks' state: the suite, what they may assume, and the problems found so far.
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

impl<'a> Validator<'a> {
    /// A problem at `span` of `suite.toml`.
    fn at(&self, kind: ProblemKind, span: Range<usize>, msg: impl Into<String>) -> Problem {
        Problem::at(kind, self.src, span, msg)
    }

    /// A problem with a whole file or folder.
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
}
