//! A run from start to end: [`Session::start`] plans the trials, decides the isolation and
//! creates the run in the store; [`Session::resume`] reopens an interrupted run and rebuilds the
//! same plan from the options its `run.json` records (a [`PlanRecord`]), refusing when the suite
//! changed; [`Session::execute`] hands the plan to the engine; [`Session::close`] records how the
//! run ended and [`Session::write_results`] writes `results.json` and `results.md`.
//!
//! A session prints nothing: what it has to say is in its values (the isolation notes, the
//! engine's events, the errors), for the command line to render.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use proctor_records::run::{Isolation as RecordedIsolation, NoPlanSection, RunMode, RunSections};
use proctor_report::RunReport;
use proctor_store::{HostInfo, RunHandle, RunId, RunMeta, RunStatus, Store, StoreError};
use proctor_suite::plan::{plan, Plan, PlanError};
use proctor_suite::{PlanOptions, Suite};

use crate::engine::{
    decide_isolation, execute, EngineError, EngineOptions, Event, ExecutionSummary,
    IsolationChoice, Job,
};
use crate::results::ResultsError;
use crate::spool::SpooledRecords;
use crate::trial::Isolation;

/// What `--resume` needs to rebuild a run's plan, kept in `run.json` as `extra.plan`: the
/// record's type lives with the other run sections in `proctor-records`; what the runner does
/// with it is [`PlanRecordExt`].
pub use proctor_records::run::PlanSection as PlanRecord;

/// What the runner makes of a [`PlanRecord`]: the record of a plan, the plan options it
/// rebuilds, the isolation a resume asks for, and its place in `run.json`'s sections.
pub trait PlanRecordExt: Sized {
    /// The record of `plan`, made with `options`, run with `isolation`.
    fn new(plan: &Plan, options: &PlanOptions, isolation: Isolation) -> Self;
    /// The plan options that rebuild the same plan.
    fn options(&self) -> PlanOptions;
    /// The isolation a resume asks for: overlay again where the run had it, else copy.
    fn isolation_choice(&self) -> IsolationChoice;
    /// `run.json`'s sections holding this record.
    fn to_extra(&self) -> Option<RunSections>;
    /// The record in a `run.json`'s sections.
    fn from_extra(extra: &Option<RunSections>) -> Result<Self, NoPlanSection>;
}

impl PlanRecordExt for PlanRecord {
    fn new(plan: &Plan, options: &PlanOptions, isolation: Isolation) -> PlanRecord {
        PlanRecord {
            trials: plan.trials_per_cell,
            trial_mode: plan.trial_mode,
            variants: options.variants.clone(),
            tasks: options.tasks.clone(),
            isolation: isolation.recorded(),
            models: options.models.clone(),
        }
    }

    fn options(&self) -> PlanOptions {
        PlanOptions {
            trials: Some(self.trials),
            mode: self.trial_mode,
            variants: self.variants.clone(),
            tasks: self.tasks.clone(),
            models: self.models.clone(),
        }
    }

    fn isolation_choice(&self) -> IsolationChoice {
        match self.isolation {
            RecordedIsolation::Overlay => IsolationChoice::Overlay,
            RecordedIsolation::Copy | RecordedIsolation::CopyNoNamespaces => IsolationChoice::Copy,
        }
    }

    fn to_extra(&self) -> Option<RunSections> {
        Some(RunSections {
            plan: Some(self.clone()),
            ..RunSections::default()
        })
    }

    fn from_extra(extra: &Option<RunSections>) -> Result<PlanRecord, NoPlanSection> {
        RunSections::plan(extra.as_ref()).cloned()
    }
}

/// Why a run cannot start or resume.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The plan options do not fit the suite, or the suite could not be read.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The isolation asked for is not available.
    #[error(transparent)]
    Isolation(EngineError),
    /// The run to resume was not found (or the prefix is ambiguous).
    #[error(transparent)]
    UnknownRun(StoreError),
    /// The suite changed since the run started: resuming would mix two suites in one run.
    #[error("run {run} was made from a different version of the suite (hash {}…, now {}…); resuming would mix two suites in one run", short(.was), short(.now))]
    SuiteChanged {
        /// The run.
        run: RunId,
        /// The suite hash the run recorded.
        was: String,
        /// The suite's hash now.
        now: String,
    },
    /// The run's `run.json` does not say how its plan was made.
    #[error("run {run} does not record its plan options: {source}")]
    NoPlanRecord {
        /// The run.
        run: RunId,
        /// Why the record could not be read.
        source: NoPlanSection,
    },
    /// The suite could not be hashed.
    #[error("cannot hash the suite")]
    Hash(#[source] std::io::Error),
    /// The run could not be created in the store.
    #[error("cannot create the run in the store")]
    Create(#[source] StoreError),
    /// The run could not be reopened.
    #[error("cannot open the run")]
    Open(#[source] StoreError),
    /// Another process is still running the run (it holds the run's lock): resuming now would
    /// run the same trials twice and overwrite their evidence. The error names the holder.
    #[error(transparent)]
    StillRunning(StoreError),
    /// `run.json` could not be rewritten.
    #[error("cannot update run.json")]
    Status(#[source] StoreError),
}

/// The first 12 characters of a hash.
fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// Plans the suite's trials.
pub fn plan_trials(suite: &Suite, options: &PlanOptions) -> Result<Plan, PlanError> {
    plan(suite, options)
}

/// A run of one suite's plan in one store, started or resumed.
pub struct Session {
    suite: Suite,
    plan: Plan,
    run: RunHandle,
    store_root: PathBuf,
    isolation: Isolation,
    notes: Vec<String>,
    resumed: bool,
    /// The records of the trials this session stored, spooled as they were (see
    /// [`Session::write_results`]); `None` until an execution starts, or when no spool could
    /// be made.
    spooled: std::sync::Mutex<Option<SpooledRecords>>,
}

impl Session {
    /// Starts a new run: applies `options.models` to the suite ([`Suite::apply_models`]), plans
    /// it with `options`, decides the isolation by asking the
    /// machine, and creates the run (its `run.json` records a [`PlanRecord`]), which keeps a
    /// hashed copy of the suite folder ([`proctor_store::keep_suite`]). The suite must have been
    /// opened from an absolute path.
    pub fn start(
        suite: Suite,
        store: &Store,
        options: &PlanOptions,
        isolation: IsolationChoice,
    ) -> Result<Session, SessionError> {
        let probe_dir = store.root().to_path_buf();
        Session::start_probing_in(suite, store, options, isolation, &probe_dir)
    }

    /// [`Session::start`], with the isolation decided by probing in `probe_dir` (where the
    /// trials' upper layers will be) instead of the store: for runs whose trials run on other
    /// machines, where the store is on a network file system that cannot hold upper layers.
    pub fn start_probing_in(
        mut suite: Suite,
        store: &Store,
        options: &PlanOptions,
        isolation: IsolationChoice,
        probe_dir: &Path,
    ) -> Result<Session, SessionError> {
        suite.apply_models(&options.models);
        let plan = plan(&suite, options)?;
        let store_root = store.root().to_path_buf();
        let (isolation, notes) =
            decide_isolation(isolation, probe_dir).map_err(SessionError::Isolation)?;
        let record = PlanRecord::new(&plan, options, isolation);
        let meta = run_meta(
            &suite,
            &plan,
            isolation,
            plan.trial_mode.into(),
            record.to_extra(),
        );
        let run = store.create_run(&meta).map_err(SessionError::Create)?;
        // The run keeps the suite as it read it, hashed, so that it can be read, compared and
        // rescored from the store alone whatever later happens to the suite folder.
        proctor_store::keep_suite(&store_root, run.dir(), &suite.root)
            .map_err(SessionError::Create)?;
        Ok(Session {
            suite,
            plan,
            run,
            store_root,
            isolation,
            notes,
            resumed: false,
            spooled: std::sync::Mutex::new(None),
        })
    }

    /// Reopens the run `prefix` names (an id, a unique prefix or `latest`) to run its unfinished
    /// trials: takes the run's lock (held as long as the session; refused with
    /// [`SessionError::StillRunning`] while another process runs it), rebuilds the plan (and its
    /// models) from the run's [`PlanRecord`], and refuses the run when the suite's content hash
    /// changed since it started.
    pub fn resume(mut suite: Suite, store: &Store, prefix: &str) -> Result<Session, SessionError> {
        let id = store
            .resolve_run(prefix)
            .map_err(SessionError::UnknownRun)?;
        // The lock first: while another process runs the run, nothing else about it matters.
        let run = store.resume_run(&id).map_err(|e| match e {
            e @ StoreError::RunLocked { .. } => SessionError::StillRunning(e),
            e => SessionError::Open(e),
        })?;
        let meta = run.meta();
        let now = proctor_suite::tree::suite_hash(&suite.root).map_err(SessionError::Hash)?;
        if meta.suite_hash != now {
            return Err(SessionError::SuiteChanged {
                run: id,
                was: meta.suite_hash,
                now,
            });
        }
        let record = PlanRecord::from_extra(&meta.extra)
            .map_err(|source| SessionError::NoPlanRecord { run: id, source })?;
        suite.apply_models(&record.models);
        let plan = plan(&suite, &record.options())?;
        let store_root = store.root().to_path_buf();
        let (isolation, _) = decide_isolation(record.isolation_choice(), &store_root)
            .map_err(SessionError::Isolation)?;
        run.set_status(RunStatus::Running)
            .map_err(SessionError::Status)?;
        Ok(Session {
            suite,
            plan,
            run,
            store_root,
            isolation,
            notes: Vec::new(),
            resumed: true,
            spooled: std::sync::Mutex::new(None),
        })
    }

    /// The suite.
    pub fn suite(&self) -> &Suite {
        &self.suite
    }

    /// The plan: every trial of the run, finished or not.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The run in the store.
    pub fn run(&self) -> &RunHandle {
        &self.run
    }

    /// The isolation in effect.
    pub fn isolation(&self) -> Isolation {
        self.isolation
    }

    /// What the machine refused when the isolation was decided (a new run only): each note
    /// explains why the run's isolation is weaker than the best.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Whether this session resumed an earlier run.
    pub fn resumed(&self) -> bool {
        self.resumed
    }

    /// Trials the run finished before now (`0` for a new run when the store reads nothing).
    pub fn finished_before(&self) -> usize {
        self.run.finished_trials().map(|s| s.len()).unwrap_or(0)
    }

    /// Runs every unfinished trial (see [`execute`]).
    pub fn execute(
        &self,
        options: &EngineOptions,
        interrupted: &AtomicBool,
        on_event: &mut (dyn FnMut(Event) + Send),
    ) -> Result<ExecutionSummary, EngineError> {
        // A spool that cannot be made leaves the results to read every trial back.
        if let Ok(mut spooled) = self.spooled.lock() {
            *spooled = SpooledRecords::new(self.run.dir()).ok();
        }
        let job = Job {
            suite: &self.suite,
            plan: &self.plan,
            run: &self.run,
            store_root: &self.store_root,
            isolation: self.isolation,
            results: Some(&self.spooled),
        };
        execute(job, options, interrupted, on_event)
    }

    /// Records how the run ended: `finished` when every planned trial is, else `interrupted`
    /// (with the reason when proctor stopped it, [`ExecutionSummary::stopped`], after deleting
    /// any temporary file left in the run's folder). Returns whether every planned trial is
    /// finished.
    pub fn close(&self, summary: &ExecutionSummary) -> Result<bool, SessionError> {
        if let Some(why) = &summary.stopped {
            // A full disk must not keep what failed writes left behind.
            let _ = self.run.remove_temporaries();
            self.run.set_stopped(why).map_err(SessionError::Status)?;
            return Ok(false);
        }
        let all_done = summary.already_finished + summary.finished_now == summary.planned;
        let status = if all_done {
            RunStatus::Finished
        } else {
            RunStatus::Interrupted
        };
        self.run.set_status(status).map_err(SessionError::Status)?;
        Ok(all_done)
    }

    /// Writes `results.json` and `results.md` from every finished trial and returns the report;
    /// `None` when no trial is finished.
    ///
    /// The trials this session stored were spooled as they were: only the others (a resumed
    /// run's earlier trials) are read back from the store.
    pub fn write_results(&self) -> Result<Option<RunReport>, ResultsError> {
        let spooled = self.spooled.lock().ok().and_then(|mut s| s.take());
        crate::results::write_run_results_with(
            &self.run,
            &self.suite,
            &self.plan.suite_hash,
            spooled,
        )
    }
}

/// The `run.json` of a new run of `plan`.
pub(crate) fn run_meta(
    suite: &Suite,
    plan: &Plan,
    isolation: Isolation,
    trial_mode: RunMode,
    extra: Option<RunSections>,
) -> RunMeta {
    let mut variants: Vec<String> = Vec::new();
    let mut tasks: Vec<String> = Vec::new();
    for t in &plan.trials {
        if !variants.contains(&t.variant) {
            variants.push(t.variant.clone());
        }
        if !tasks.contains(&t.task) {
            tasks.push(t.task.clone());
        }
    }
    RunMeta {
        suite_id: plan.suite_id.clone(),
        suite_path: canonical(&suite.root),
        suite_hash: plan.suite_hash.clone(),
        fixture_hash: plan.fixture_hash.clone(),
        trial_mode,
        trials_per_cell: plan.trials_per_cell,
        variants,
        tasks,
        planned_trials: plan.trials.len() as u64,
        isolation: isolation.recorded(),
        agent_versions: BTreeMap::new(),
        host: HostInfo::detect(),
        proctor_version: env!("CARGO_PKG_VERSION").to_string(),
        started_at: None,
        finished_at: None,
        status: RunStatus::Running,
        stop_reason: None,
        extra,
    }
}

fn canonical(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proctor_suite::TrialMode;

    /// A suite with one task, `t`, and one scripted variant, `agent`, in `dir`.
    fn write_suite(dir: &Path) {
        let files = [
            (
                "suite.toml",
                "schema_version = 1\nid = \"lab\"\n\n[[variants]]\nid = \"agent\"\nagent = \"script\"\nscript = \"agents/agent\"\n\n[[variants]]\nid = \"other\"\nagent = \"script\"\nscript = \"agents/agent\"\n\n[[tasks]]\nid = \"t\"\nprompt = \"Do the thing.\"\n\n[tasks.success]\nall = [{ files_unchanged = true }]\n",
            ),
            ("fixture/README.md", "x\n"),
            ("agents/agent/t.toml", "answer = \"done\"\n"),
        ];
        for (path, text) in files {
            let path = dir.join(path);
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        }
    }

    fn open(dir: &Path) -> Suite {
        Suite::open(dir).unwrap_or_else(|p| panic!("invalid suite: {p:?}"))
    }

    fn lab() -> (tempfile::TempDir, PathBuf, Store) {
        let tmp = tempfile::tempdir().expect("a temporary folder");
        let suite = tmp.path().join("suite");
        write_suite(&suite);
        let store = Store::open(tmp.path().join("store")).expect("a store");
        (tmp, suite, store)
    }

    fn options() -> PlanOptions {
        PlanOptions {
            trials: Some(3),
            mode: TrialMode::Release,
            variants: vec!["other".to_string()],
            tasks: Vec::new(),
            models: Vec::new(),
        }
    }

    #[test]
    fn a_plan_record_round_trips_through_json() {
        let record = PlanRecord {
            trials: 3,
            trial_mode: proctor_records::run::TrialMode::Release,
            variants: vec!["a".into(), "b".into()],
            tasks: vec!["t".into()],
            isolation: RecordedIsolation::Copy,
            models: vec!["anthropic/claude-a".into(), "openai/gpt-5".into()],
        };
        let extra = record.to_extra();
        let json = serde_json::to_value(&extra).expect("json");
        assert_eq!(json["plan"]["trial_mode"], "release");
        let text = serde_json::to_string(&extra).expect("json");
        let back: Option<RunSections> = serde_json::from_str(&text).expect("json");
        assert_eq!(PlanRecord::from_extra(&back).expect("a record"), record);
        assert_eq!(record.options().trials, Some(3));
        assert_eq!(
            record.options().models,
            record.models,
            "a resume runs the same models"
        );
        assert_eq!(record.isolation_choice(), IsolationChoice::Copy);
        assert!(PlanRecord::from_extra(&None).is_err());
    }

    #[test]
    fn a_started_run_records_its_plan_and_a_resume_rebuilds_the_same_plan() {
        let (_tmp, dir, store) = lab();
        let started = Session::start(open(&dir), &store, &options(), IsolationChoice::Copy)
            .expect("a new run");
        assert!(!started.resumed());
        assert_eq!(started.plan().trials.len(), 3);
        assert!(started.plan().trials.iter().all(|t| t.variant == "other"));
        // What run.json holds, read back from the disk.
        let meta = store.open_run(started.run().id()).expect("the run").meta();
        let record = PlanRecord::from_extra(&meta.extra).expect("a plan record");
        assert_eq!(
            record,
            PlanRecord::new(started.plan(), &options(), started.isolation())
        );
        assert_eq!(meta.variants, vec!["other".to_string()]);
        assert_eq!(meta.trial_mode.as_str(), "release");
        let prefix = started.run().id().as_str()[..12].to_string();
        // While the first session lives, it holds the run: a resume is refused, naming it.
        let refused = Session::resume(open(&dir), &store, &prefix);
        let Err(e @ SessionError::StillRunning(_)) = refused else {
            panic!("resumed a run another session still holds");
        };
        assert!(
            e.to_string()
                .contains(&format!("is still running (pid {}", std::process::id())),
            "{e}"
        );
        let first_plan = started.plan().trials.clone();
        let first_isolation = started.isolation();
        let first_id = started.run().id().clone();
        drop(started);
        let resumed = Session::resume(open(&dir), &store, &prefix).expect("a resume");
        assert!(resumed.resumed());
        assert_eq!(resumed.run().id(), &first_id);
        assert_eq!(resumed.plan().trials, first_plan);
        assert_eq!(resumed.plan().trial_mode, TrialMode::Release);
        assert_eq!(resumed.isolation(), first_isolation);
    }

    #[test]
    fn resume_refuses_a_suite_whose_hash_changed() {
        let (_tmp, dir, store) = lab();
        let started = Session::start(open(&dir), &store, &options(), IsolationChoice::Copy)
            .expect("a new run");
        let id = started.run().id().clone();
        drop(started);
        std::fs::write(dir.join("fixture/README.md"), "changed\n").expect("write");
        let refused = Session::resume(open(&dir), &store, id.as_str());
        let Err(e @ SessionError::SuiteChanged { .. }) = refused else {
            panic!("resumed a run of a changed suite");
        };
        assert!(
            e.to_string().contains("different version of the suite"),
            "{e}"
        );
        // Restored, the suite resumes again.
        std::fs::write(dir.join("fixture/README.md"), "x\n").expect("write");
        assert!(Session::resume(open(&dir), &store, id.as_str()).is_ok());
    }

    #[test]
    fn resume_refuses_a_run_that_records_no_plan() {
        let (_tmp, dir, store) = lab();
        let suite = open(&dir);
        let plan = plan_trials(&suite, &options()).expect("a plan");
        let iso = Isolation {
            overlay: false,
            namespaces: false,
        };
        let meta = run_meta(&suite, &plan, iso, RunMode::Oracle, None);
        let id = store.create_run(&meta).expect("a run").id().clone();
        let refused = Session::resume(suite, &store, id.as_str());
        assert!(
            matches!(refused, Err(SessionError::NoPlanRecord { .. })),
            "resumed a run without a plan record"
        );
    }
}
