//! A run whose trials ran elsewhere, read back: its progress (`proctor status`), and its
//! collection (`proctor collect`): the index brought up to date with what the workers wrote
//! and the run reopened to be concluded, or, on a node (the dependent job of a detached Slurm
//! run), the results files written from the trial files alone.

use std::path::{Path, PathBuf};

use proctor_records::OutcomeTally;
use proctor_store::{RunId, RunMeta, Store, StoreError, TrialFile};

use super::batch::check_no_live_job;
use super::record::{ExecutorRecord, ExecutorRecordExt};
use super::slurm::follow::TaskCounts;
use super::summary_of;
use crate::error::{Context, RunError};
use crate::opening::open_for_run;
use crate::session::PlanRecordExt;
use crate::shard::ShardStatus;
use crate::{ExecutionSummary, Session};

/// What `proctor status RUN` shows.
#[derive(Debug, Clone)]
pub struct RunProgress {
    /// The run.
    pub id: RunId,
    /// Its `run.json`.
    pub meta: RunMeta,
    /// The executor's record, when it ran elsewhere.
    pub record: Option<ExecutorRecord>,
    /// Trials finished.
    pub finished: usize,
    /// Finished trials by outcome.
    pub outcomes: OutcomeTally,
    /// Its state: `running`, `ended, not collected ...`, or the store's status.
    pub state: String,
    /// Lines about its latest submission.
    pub lines: Vec<String>,
    /// Whether `results.json` is written.
    pub results: bool,
}

/// Opens `store_dir` and the run `prefix` names.
fn open(store_dir: &Path, prefix: &str) -> Result<(Store, RunId), RunError> {
    let store = Store::open(store_dir)
        .with_context(|| format!("cannot open the store at {}", store_dir.display()))?;
    let id = store.resolve_run(prefix).map_err(|e| {
        RunError::usage(e.to_string(), "`proctor list` shows the runs in this store")
    })?;
    Ok((store, id))
}

/// `proctor status RUN`: trials finished by outcome, and the latest submission's tasks.
pub fn progress(store_dir: &Path, prefix: &str) -> Result<RunProgress, RunError> {
    let (store, id) = open(store_dir, prefix)?;
    let run = store.open_run(&id).context("cannot open the run")?;
    let meta = run.meta();
    let mut outcomes = OutcomeTally::default();
    let mut finished = 0;
    run.for_each_trial(|f: TrialFile<serde::de::IgnoredAny>| {
        finished += 1;
        outcomes.add(f.summary.outcome, 1);
        Ok::<(), StoreError>(())
    })
    .context("cannot read the run's trials")?;
    let record = ExecutorRecord::of(&meta);
    let (live, lines) = match &record {
        Some(r) => submission_lines(run.dir(), r)?,
        None => (false, Vec::new()),
    };
    let observed = store.observed_status(&id, meta.status);
    let state = if live {
        "running".to_string()
    } else if record.is_some()
        && meta.status == proctor_store::RunStatus::Running
        && observed == proctor_store::RunStatus::Interrupted
    {
        // Its workers are done and nobody recorded the end yet.
        "ended, not collected (`proctor collect RUN`)".to_string()
    } else {
        observed.to_string()
    };
    Ok(RunProgress {
        results: run.dir().join("results.json").is_file(),
        id,
        meta,
        record,
        finished,
        outcomes,
        state,
        lines,
    })
}

/// Whether the latest submission still has tasks waiting or running, and lines saying how its
/// tasks (Slurm) or shards (external) stand.
fn submission_lines(run_dir: &Path, r: &ExecutorRecord) -> Result<(bool, Vec<String>), RunError> {
    let Some(s) = r.submissions.last() else {
        return Ok((false, Vec::new()));
    };
    let mut lines = Vec::new();
    let mut live = false;
    if r.kind == "slurm" {
        let counts = TaskCounts::read(run_dir, s)?;
        live = counts.pending + counts.running > 0;
        lines.push(format!(
            "{} (batch {} of {}, {} trial(s))",
            counts.line(&s.job_id),
            s.batch,
            r.submissions.len(),
            s.trials
        ));
        if let Some(c) = &s.collect_job {
            lines.push(format!(
                "collect job {c} writes the results when the job ends"
            ));
        }
    } else {
        let shards = ShardStatus::read_batch(run_dir, s.batch);
        let done = shards.values().filter(|x| x.state == "done").count();
        let running = shards.values().filter(|x| x.state == "running").count();
        lines.push(format!(
            "batch {}: {} shard(s): {done} done, {running} started and not done, {} not started",
            s.batch,
            s.tasks,
            s.tasks.saturating_sub(done + running)
        ));
    }
    Ok((live, lines))
}

/// A run collected: reopened, its index brought up to date, ready to be concluded.
pub struct Collected {
    /// The run, reopened.
    pub session: Session,
    /// Its trials, all counted as finished before.
    pub summary: ExecutionSummary,
    /// The suite folder the run was made from.
    pub suite_dir: PathBuf,
    /// The executor it was submitted to, when not local (for the resume hint).
    pub executor: Option<String>,
}

/// `proctor collect RUN`: refused while a Slurm job of the run is alive; else the run is
/// reopened and the index brought up to date with what the workers wrote.
pub fn collect(store_dir: &Path, prefix: &str) -> Result<Collected, RunError> {
    let (store, id) = open(store_dir, prefix)?;
    let meta = store.open_run(&id).context("cannot open the run")?.meta();
    let record = ExecutorRecord::of(&meta);
    if let Some(record) = &record {
        check_no_live_job(id.as_str(), record).map_err(|e| match e {
            RunError::Usage { message, .. } => RunError::usage(
                message,
                format!("collect when it has ended (`proctor status {id}` shows it); the trials finished so far are in the store"),
            ),
            other => other,
        })?;
    }
    let suite_dir = meta.suite_path.clone();
    let suite = open_for_run(&suite_dir, &[])?;
    let session = Session::resume(suite, &store, id.as_str())?;
    store
        .reindex_run(&id)
        .context("cannot bring the index up to date with the run")?;
    let finished = session
        .run()
        .finished_trials()
        .context("cannot read the run")?
        .len();
    let summary = summary_of(&session, finished, finished);
    Ok(Collected {
        session,
        summary,
        suite_dir,
        executor: record.map(|r| r.kind),
    })
}

/// Where the results files of a run collected on a node went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeResults {
    /// `results.json` and `results.md` are written in this folder.
    Written(PathBuf),
    /// No trial of the run is finished: nothing was written.
    NoTrials(RunId),
}

/// The dependent job's collect (`collect --on-node`): the results files, written from the
/// trial files alone (no index, no `run.json`).
pub fn collect_on_node(store_dir: &Path, prefix: &str) -> Result<NodeResults, RunError> {
    let node = proctor_store::HostInfo::detect().hostname;
    let store = Store::open_on_node(store_dir, proctor_store::Placement::Collect { node })
        .with_context(|| format!("cannot open the store at {}", store_dir.display()))?;
    let id = store
        .resolve_run(prefix)
        .map_err(|e| RunError::usage(e.to_string(), "pass the run's id"))?;
    let run = store.open_run(&id).context("cannot open the run")?;
    let meta = run.meta();
    let record =
        crate::PlanRecord::from_extra(&meta.extra).context("the run does not record its plan")?;
    let mut suite = open_for_run(&meta.suite_path, &[])?;
    suite.apply_models(&record.models);
    let mut writer =
        crate::results::ResultsWriter::new(run.dir(), id.as_str(), &suite, &meta.suite_hash, false)
            .context("cannot write the results")?
            .for_run(&run);
    crate::results::for_each_record(&run, |r| writer.add(&r))
        .context("cannot read the run's trials")?;
    match writer.finish("results") {
        Ok(_) => Ok(NodeResults::Written(run.dir().to_path_buf())),
        Err(crate::results::ResultsError::Empty) => Ok(NodeResults::NoTrials(id)),
        Err(e) => Err(RunError::failed(e)),
    }
}
