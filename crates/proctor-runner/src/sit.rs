//! A person's sitting of a trial (`proctor sit`): agent numbers mean more beside a person's on
//! the same task.
//!
//! A sitting is one trial of one task whose variant is the person, `human:NAME` (agent kind
//! `human`): the same fresh sandbox, workspace, services, guard and shims an agent's trial gets,
//! with the person's shell on a terminal in the agent's seat. It runs through the same stages as
//! any trial ([`run_trial_attended`]); only stage 3, execute, is the caller's [`Attendance`],
//! which relays the terminal and, after the full stop, gives the person's answer. It is graded
//! by the same rules, into a run of its own (`trial_mode = "sitting"`) that `compare`, `show`,
//! `list` and the viewer read like any other. The record says who sat, where the answer came
//! from and the person's notes ([`SittingRecord`]).
//!
//! A sitting has no wall timeout unless one is asked for. It is not resumable: a sitting cut
//! short leaves its run `interrupted` with no trial.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use proctor_records::run::{RunMode, RunSections, SittingSection};
use proctor_report::RunReport;
use proctor_store::{RunHandle, RunStatus, Store, StoreError};
use proctor_suite::model::{AgentKind, Spanned, Variant};
use proctor_suite::plan::{plan, Plan, PlanError, PlannedTrial};
use proctor_suite::{PlanOptions, Settings, Suite, TrialMode};

use crate::engine::{
    decide_isolation, summary_of, EngineError, EngineOptions, IsolationChoice, Job,
};
use crate::record::{SittingRecord, TrialRecord};
use crate::scratch::Scratch;
use crate::session::run_meta;
use crate::trial::launch::Launched;
use crate::trial::{run_trial_attended, Attendance, Isolation, RunContext, TrialError, TrialPaths};

/// How the variant of a person's sitting starts: `human:NAME`.
pub const HUMAN_PREFIX: &str = "human:";

/// The longest names a sitting accepts.
pub const MAX_NAME: usize = 32;

/// The wall timeout of a sitting without `--timeout`: the longest the sandbox accepts (30 days),
/// i.e. none in practice. The sitting's record says that none was asked for.
pub const NO_TIMEOUT: Duration = Duration::from_secs(30 * 24 * 3600);

/// Why a sitting cannot start, or cannot be recorded.
#[derive(Debug, thiserror::Error)]
pub enum SitError {
    /// The person's name cannot be part of a variant id.
    #[error("`{0}` is not a name for a sitting: use 1 to {MAX_NAME} letters, digits, `-` or `_`, starting with a letter or digit")]
    BadName(String),
    /// The task is not one of the suite's (or the suite could not be planned).
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The isolation asked for is not available.
    #[error(transparent)]
    Isolation(EngineError),
    /// The run could not be created in the store.
    #[error("cannot create the sitting's run in the store")]
    Create(#[source] StoreError),
    /// The trial's scratch could not be made.
    #[error("cannot make the sitting's scratch folder")]
    Scratch(#[source] std::io::Error),
    /// proctor's own executable could not be found (it is the sandbox's init).
    #[error("cannot find proctor's own executable")]
    Exe(#[source] std::io::Error),
    /// The trial could not be written to the store.
    #[error("cannot record the sitting")]
    Commit(#[source] StoreError),
}

/// Whether `name` can name a person in a variant id: 1 to [`MAX_NAME`] ASCII letters, digits,
/// `-` and `_`, starting with a letter or digit (it becomes part of folder names and trial ids).
pub fn valid_name(name: &str) -> bool {
    name.len() <= MAX_NAME
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The variant id of `name`'s sittings: `human:NAME`.
pub fn variant_id(name: &str) -> String {
    format!("{HUMAN_PREFIX}{name}")
}

/// The variant of a person's sitting: agent `human`, `command` the shell they get, `env` added
/// to the trial's environment (their terminal's `TERM`), nothing laid in, no model.
pub fn human_variant(name: &str, shell: Vec<String>, env: BTreeMap<String, String>) -> Variant {
    Variant {
        id: Spanned::new(0..0, variant_id(name)),
        agent: AgentKind::Human,
        model: None,
        purpose: Some(format!("{name}'s sitting (proctor sit)")),
        prompt_prefix: None,
        prompt_suffix: None,
        files: BTreeMap::new(),
        script: None,
        command: Some(Spanned::new(0..0, shell)),
        model_script: None,
        allow: None,
        env,
        tasks: None,
        matrix_of: None,
    }
}

/// The variant behind a recorded variant id of a sitting (`human:NAME`), for reading a sitting's
/// trial again (`rescore`): the settings and the start state do not depend on the shell.
pub fn variant_of_id(id: &str) -> Option<Variant> {
    let name = id.strip_prefix(HUMAN_PREFIX).filter(|n| valid_name(n))?;
    Some(human_variant(name, vec!["sh".into()], BTreeMap::new()))
}

/// What a sitting is made of.
#[derive(Debug, Clone)]
pub struct SittingOptions {
    /// The person's name (`--as`).
    pub person: String,
    /// The task sat.
    pub task: String,
    /// The shell the person gets (argv).
    pub shell: Vec<String>,
    /// Environment added for the person (their terminal's `TERM`).
    pub env: BTreeMap<String, String>,
    /// The wall timeout; `None`: none.
    pub timeout: Option<Duration>,
    /// The isolation asked for.
    pub isolation: IsolationChoice,
    /// Where the trial's scratch goes (`None`: chosen as for a run).
    pub scratch: Option<PathBuf>,
    /// Between SIGTERM and SIGKILL at the full stop.
    pub grace: Duration,
    /// The image the task runs in, by task id, when it names one (resolved beforehand, as for a
    /// run).
    pub images: BTreeMap<String, std::sync::Arc<crate::image::TrialImage>>,
    /// Where the task's `visual` checks find their browser (`None`: as for a run).
    pub browser: Option<proctor_browser::BrowserSource>,
}

/// A sitting's run: created by [`Sitting::start`], its one trial run by [`Sitting::sit`] and
/// recorded by [`Sitting::record`] (or left out by [`Sitting::abandon`]).
pub struct Sitting {
    suite: Suite,
    plan: Plan,
    run: RunHandle,
    store_root: PathBuf,
    isolation: Isolation,
    notes: Vec<String>,
    options: SittingOptions,
}

impl Sitting {
    /// Plans the sitting (one trial of `options.task` for `human:NAME`, trial index 0, so it
    /// meets the same hidden mutation as every variant's first trial), decides the isolation by
    /// asking the machine, and creates its run. The suite must have been opened from an absolute
    /// path.
    pub fn start(
        mut suite: Suite,
        store: &Store,
        options: SittingOptions,
    ) -> Result<Sitting, SitError> {
        if !valid_name(&options.person) {
            return Err(SitError::BadName(options.person));
        }
        let variant = human_variant(&options.person, options.shell.clone(), options.env.clone());
        let id = variant.id.get_ref().clone();
        suite.file.variants = vec![variant];
        let plan_options = PlanOptions {
            trials: Some(1),
            mode: TrialMode::Dev,
            variants: vec![id],
            tasks: vec![options.task.clone()],
            models: Vec::new(),
        };
        let plan = plan(&suite, &plan_options)?;
        let store_root = store.root().to_path_buf();
        let (isolation, notes) =
            decide_isolation(options.isolation, &store_root).map_err(SitError::Isolation)?;
        let extra = RunSections {
            sitting: Some(SittingSection {
                person: options.person.clone(),
                task: options.task.clone(),
            }),
            ..RunSections::default()
        };
        let meta = run_meta(&suite, &plan, isolation, RunMode::Sitting, Some(extra));
        let run = store.create_run(&meta).map_err(SitError::Create)?;
        Ok(Sitting {
            suite,
            plan,
            run,
            store_root,
            isolation,
            notes,
            options,
        })
    }

    /// The sitting's run.
    pub fn run(&self) -> &RunHandle {
        &self.run
    }

    /// Its one trial.
    pub fn trial(&self) -> &PlannedTrial {
        &self.plan.trials[0]
    }

    /// The isolation in effect.
    pub fn isolation(&self) -> Isolation {
        self.isolation
    }

    /// What the machine refused when the isolation was decided.
    pub fn isolation_notes(&self) -> &[String] {
        &self.notes
    }

    /// The prompt the person is given: exactly what an agent's trial of the task gets.
    pub fn prompt(&self) -> String {
        let task = self.suite.task(&self.options.task);
        match (task, self.suite.file.variants.first()) {
            (Some(task), Some(variant)) => self.suite.prompt(task, variant),
            _ => String::new(),
        }
    }

    /// Runs the trial with `attendance` in the agent's seat, to its record (an `errored` one
    /// when a stage could not go on). Nothing is in the store yet: see [`Sitting::record`].
    pub fn sit(&self, attendance: &mut dyn Attendance) -> Result<TrialRecord, SitError> {
        let scratch = Scratch::create(
            &self.store_root,
            self.run.id().as_str(),
            self.options.scratch.as_deref(),
            self.isolation.overlay,
            crate::scratch::may_write(&self.suite, 1),
        )
        .map_err(SitError::Scratch)?;
        let ctx = self.context(&scratch)?;
        let mut seat = Seat {
            inner: attendance,
            timeout: self.options.timeout,
        };
        let record = run_trial_attended(&ctx, self.trial(), &mut seat);
        if let Ok(c) = &ctx.cgroups {
            c.remove();
        }
        scratch.remove();
        Ok(record)
    }

    /// What the trial shares with a run's: one trial, no model gateway.
    fn context<'a>(&'a self, scratch: &Scratch) -> Result<RunContext<'a>, SitError> {
        let job = Job {
            suite: &self.suite,
            plan: &self.plan,
            run: &self.run,
            store_root: &self.store_root,
            isolation: self.isolation,
            results: None,
        };
        let options = EngineOptions {
            jobs: 1,
            grace: self.options.grace,
            scratch: self.options.scratch.clone(),
            gateway: None,
            images: self.options.images.clone(),
            browser: self.options.browser.clone(),
        };
        let exe = std::env::current_exe().map_err(SitError::Exe)?;
        Ok(crate::engine::context(&job, &options, scratch, exe))
    }

    /// Writes the sitting's trial into its run with `sitting` in its record, marks the run
    /// finished and writes its results; gives the run's report (`None` when the results could
    /// not be written: the trial is in the store all the same, and `rescore` writes them).
    pub fn record(
        &self,
        mut record: TrialRecord,
        sitting: SittingRecord,
    ) -> Result<Option<RunReport>, SitError> {
        record.sitting = Some(sitting);
        let summary = summary_of(&record);
        self.run
            .finish_trial(&summary, &record)
            .map_err(SitError::Commit)?;
        self.run
            .set_status(RunStatus::Finished)
            .map_err(SitError::Commit)?;
        Ok(self.write_results().ok().flatten())
    }

    /// Leaves the sitting out of the store: its trial's folder is emptied and the run recorded
    /// as stopped, with `why`.
    pub fn abandon(&self, why: &str) -> Result<(), SitError> {
        let _ = self.run.discard_unfinished_trial(&self.trial().id);
        self.run.set_stopped(why).map_err(SitError::Commit)
    }

    /// `results.json` and `results.md` of the run.
    fn write_results(&self) -> Result<Option<RunReport>, crate::results::ResultsError> {
        crate::results::write_run_results(&self.run, &self.suite, &self.plan.suite_hash)
    }
}

/// The caller's attendance with the sitting's wall timeout.
struct Seat<'a> {
    inner: &'a mut dyn Attendance,
    timeout: Option<Duration>,
}

impl Attendance for Seat<'_> {
    fn settle(&mut self, settings: &mut Settings) {
        settings.wall_timeout = self.timeout.unwrap_or(NO_TIMEOUT);
        self.inner.settle(settings);
    }

    fn execute(
        &mut self,
        launched: &mut Launched,
        calls_log: &mut crate::calls::CallsLog,
        paths: &TrialPaths,
    ) -> Result<crate::trial::execute::Executed, TrialError> {
        self.inner.execute(launched, calls_log, paths)
    }
}

/// The file the terminal's output is kept in while the sitting runs, in the trial's scratch;
/// moved to the agent's stdout (`agent.stdout` in the store) after the full stop.
pub fn terminal_log(paths: &TrialPaths) -> PathBuf {
    paths.work.join("terminal.out")
}

/// Makes what the terminal showed (kept in `log`) the trial's agent output, which the capture
/// stage keeps as `agent.stdout` and reads into the transcript.
pub fn keep_terminal_log(log: &Path, paths: &TrialPaths) -> std::io::Result<()> {
    std::fs::rename(log, paths.stdout())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_short_identifiers() {
        for ok in ["dana", "Dana-2", "a", "x_y", &"n".repeat(MAX_NAME)] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in [
            "",
            "-dana",
            "_x",
            "da na",
            "dana.k",
            "a/b",
            "é",
            &"n".repeat(MAX_NAME + 1),
        ] {
            assert!(!valid_name(bad), "{bad}");
        }
        assert_eq!(variant_id("dana"), "human:dana");
    }

    #[test]
    fn a_recorded_sitting_variant_is_read_back_and_nothing_else_is() {
        let v = variant_of_id("human:dana").expect("a person's variant");
        assert_eq!(v.agent, AgentKind::Human);
        assert_eq!(v.id.get_ref(), "human:dana");
        assert!(v.files.is_empty() && v.model.is_none() && !v.takes_a_model());
        assert!(variant_of_id("dana").is_none());
        assert!(variant_of_id("human:").is_none());
        assert!(variant_of_id("human:a.b").is_none());
    }
}
