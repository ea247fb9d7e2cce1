//! The Slurm executor (`run --executor slurm`): the plan is written to the store, one `sbatch
//! --array` job runs `proctor worker RUN --shard I/K` in each task, and this process follows
//! the run from the store (and `squeue`) until its tasks end; with `--detach` it returns at
//! once and a dependent job writes the results.
//!
//! Before anything is created or submitted, it checks what would make a submission fail half
//! way: `sbatch` on PATH, the partition, the options (`sbatch --test-only`), and that the store
//! (and the proctor binary) are on a file system the nodes see, by a one-task probe job that
//! reads a file written here ([`probe`]).
//!
//! Workers never write `index.sqlite` nor `run.json` (see [`proctor_store::Store::open_on_node`]):
//! this process records the jobs in `run.json` and brings the index up to date with what they
//! wrote ([`proctor_store::Store::reindex_run`]).

pub mod client;
pub mod follow;
pub mod probe;

use std::path::{Path, PathBuf};

use proctor_store::Store;
use proctor_suite::shell::quote;

use self::client::{
    check_partition, queued_tasks, sbatch, scancel, slurm_version, test_only, Client,
};
use super::record::{BatchOptions, ExecutorRecord, ExecutorRecordExt, Submission};
use super::{batch, summary_of, Execution, Executor, Observer};
use crate::error::{Context, RunError};
use crate::executor::Resources;
use crate::shard::{self, Batch};
use crate::Session;

/// Runs the trials as a Slurm job array.
#[derive(Debug, Default)]
pub struct Slurm {
    given: BatchOptions,
    opts: BatchOptions,
    version: String,
    bin: PathBuf,
    probe_node: Option<String>,
    record: ExecutorRecord,
}

impl Slurm {
    /// The executor with the options of `run --executor slurm`.
    pub fn new(options: BatchOptions) -> Slurm {
        Slurm {
            given: options,
            ..Default::default()
        }
    }
}

impl Executor for Slurm {
    fn name(&self) -> &'static str {
        "slurm"
    }

    /// `sbatch --version`, which also shows that sbatch is there.
    fn available(&mut self) -> Result<(), RunError> {
        self.version = slurm_version()?;
        Ok(())
    }

    /// The options in force (a resume's own where not given), the partition, the binary, and
    /// (nothing created yet) whether Slurm would take the jobs and the nodes see the store.
    fn prepare(&mut self, resume: Option<&str>, store: &Store) -> Result<(), RunError> {
        let earlier = earlier_record(resume, store);
        self.opts = self.given.effective(earlier.as_ref());
        check_partition(self.opts.partition.as_deref())?;
        self.bin = batch::proctor_bin(self.opts.proctor_bin.as_deref())?;
        check_throttle(&self.opts)?;
        let slurm = Client::new(&self.opts);
        let cpus = self.opts.jobs.map(|j| format!("--cpus-per-task={j}"));
        test_only(&slurm, cpus.as_slice())?;
        self.probe_node = Some(probe::probe_store(&slurm, store.root(), &self.bin)?);
        Ok(())
    }

    fn runs_here(&self) -> bool {
        false
    }

    /// Upper layers go to the nodes' scratch, not to the (shared) store: the isolation is
    /// probed where they would go here.
    fn probe_dir(&self) -> Option<PathBuf> {
        Some(std::env::temp_dir())
    }

    fn resumed(&mut self, session: &Session, observer: &mut dyn Observer) -> Result<(), RunError> {
        self.record = batch::resume(session, false, observer)?;
        Ok(())
    }

    fn execute(
        &mut self,
        session: &Session,
        _resources: Resources,
        observer: &mut dyn Observer,
    ) -> Result<Execution, RunError> {
        let mut record = std::mem::take(&mut self.record);
        record.set_options("slurm", self.version.clone(), &self.opts, &self.bin);
        let (before, shards) = batch::shards(session, self.opts.shards)?;
        let Some(shards) = shards else {
            observer.note(&format!(
                "every trial of run {} is finished",
                session.run().id()
            ));
            return Ok(Execution::Finished(summary_of(session, before, before)));
        };
        let slurm = Client::new(&self.opts);
        let submitted = submit(
            session,
            &slurm,
            &record,
            self.opts.detach,
            shards,
            &self.bin,
        );
        let mut submission = match submitted {
            Ok(s) => s,
            Err(e) => {
                if !session.resumed() {
                    discard_run(session);
                }
                return Err(e);
            }
        };
        submission.probe_node = self.probe_node.take();
        record.submissions.push(submission.clone());
        record.save(session.run())?;
        if self.opts.detach {
            return Ok(Execution::Detached(submission));
        }
        let summary = follow::follow(session, &submission, before, observer)?;
        session
            .run()
            .store()
            .reindex_run(session.run().id())
            .context("cannot bring the index up to date with the run")?;
        Ok(Execution::Finished(summary))
    }
}

/// A resume submits as the run did, unless told otherwise: the run's record.
pub(super) fn earlier_record(resume: Option<&str>, store: &Store) -> Option<ExecutorRecord> {
    let prefix = resume?;
    store
        .resolve_run(prefix)
        .ok()
        .and_then(|id| store.run_meta(&id).ok())
        .and_then(|m| ExecutorRecord::of(&m))
}

/// `--array-throttle 0` would run no task.
pub(super) fn check_throttle(opts: &BatchOptions) -> Result<(), RunError> {
    if opts.array_throttle == Some(0) {
        return Err(RunError::usage(
            "--array-throttle 0 would run no task",
            "pass 1 or more",
        ));
    }
    Ok(())
}

/// Removes a run that never got its job: nothing is left half submitted.
fn discard_run(session: &Session) {
    let _ = std::fs::remove_dir_all(session.run().dir());
    let _ = session.run().store().reindex();
}

/// Writes the batch and its script and submits the array (and, with `--detach`, the
/// dependent collect job). Either every job is submitted or none is.
fn submit(
    session: &Session,
    slurm: &Client,
    record: &ExecutorRecord,
    detach: bool,
    shards: Vec<Vec<String>>,
    bin: &Path,
) -> Result<Submission, RunError> {
    let run = session.run();
    let run_dir = run.dir();
    let store = run.store().root();
    let number = Batch::next_number(run_dir).context("cannot read the run's batches")?;
    let tasks = shards.len();
    let trials = shards.iter().map(Vec::len).sum();
    let batch = Batch { number, shards };
    batch.write(run_dir).context("cannot write the batch")?;
    let exec_dir = run_dir.join(shard::EXECUTOR_DIR);
    let script = exec_dir.join(format!("batch-{number}.sh"));
    let jobs = record
        .jobs
        .map(|j| format!(" --jobs {j}"))
        .unwrap_or_default();
    let body = format!(
        "#!/bin/sh\n# Array task I of run {id}, batch {number}: proctor worker runs shard I of {tasks} (docs/scale.md).\nexec {bin} worker {id} --store {store} --batch {number} --shard \"$SLURM_ARRAY_TASK_ID/{tasks}\"{jobs}\n",
        id = run.id(),
        bin = quote(&bin.display().to_string()),
        store = quote(&store.display().to_string()),
    );
    proctor_store::atomic_write(&script, body.as_bytes()).context("cannot write the job script")?;
    let logs = exec_dir.join(shard::LOGS_DIR);
    let throttle = record
        .array_throttle
        .map(|n| format!("%{n}"))
        .unwrap_or_default();
    let mut sb = vec![
        format!("--array=0-{}{throttle}", tasks - 1),
        format!("--job-name=proctor-{}", run.id()),
        format!("--output={}/%A_%a.out", logs.display()),
        // A requeued task appends to its first attempt's log.
        "--open-mode=append".to_string(),
        format!("--chdir={}", store.display()),
    ];
    if let Some(j) = record.jobs {
        sb.push(format!("--cpus-per-task={j}"));
    }
    sb.extend(slurm.common());
    sb.push(script.display().to_string());
    let job_id = sbatch(&sb)?;
    let mut collect_job = None;
    if detach {
        let mut cb = vec![
            format!("--dependency=afterany:{job_id}"),
            format!("--job-name=proctor-collect-{}", run.id()),
            format!("--output={}/collect-%j.out", logs.display()),
            format!("--chdir={}", store.display()),
        ];
        cb.extend(slurm.common());
        cb.extend([
            "--wrap".to_string(),
            format!(
                "exec {} collect {} --store {} --on-node",
                quote(&bin.display().to_string()),
                run.id(),
                quote(&store.display().to_string())
            ),
        ]);
        match sbatch(&cb) {
            Ok(id) => collect_job = Some(id),
            Err(e) => {
                scancel(&job_id);
                return Err(e);
            }
        }
    }
    Ok(Submission {
        batch: number,
        job_id,
        tasks,
        trials,
        collect_job,
        submitted_at: proctor_records::time::now_millis(),
        probe_node: None,
    })
}

/// The status to show for a run: as [`Store::observed_status`], except that a run recorded as
/// running whose Slurm job still has tasks waiting or running is running (a detached run: no
/// process holds it, its workers are on the nodes). Slurm is asked only about such runs; when it
/// cannot be asked, the store's answer stands.
pub fn observed_status(
    store: &Store,
    id: &proctor_store::RunId,
    meta: &proctor_store::RunMeta,
) -> proctor_store::RunStatus {
    use proctor_store::RunStatus;
    let seen = store.observed_status(id, meta.status);
    if meta.status != RunStatus::Running || seen != RunStatus::Interrupted {
        return seen;
    }
    let live = ExecutorRecord::of(meta)
        .filter(|r| r.kind == "slurm")
        .and_then(|r| r.submissions.last().cloned())
        .and_then(|s| queued_tasks(&s.job_id).ok())
        .is_some_and(|q| !q.is_empty());
    if live {
        RunStatus::Running
    } else {
        seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_survives_quotes_and_spaces() {
        assert_eq!(quote("/a b/c"), "'/a b/c'");
        assert_eq!(quote("it's"), r"'it'\''s'");
    }
}
