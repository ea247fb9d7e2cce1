//! What the executors that hand shards to a scheduler share (Slurm, external): the proctor
//! binary the nodes run, the checks of a resume (no earlier submission alive, the claims of
//! workers that ended unfinished released), and the run's unfinished trials cut into shards.

use std::path::{Path, PathBuf};

use proctor_suite::plan::PlannedTrial;

use super::record::{ExecutorRecord, ExecutorRecordExt};
use super::slurm::client::queued_tasks;
use super::Observer;
use crate::error::{Context, RunError};
use crate::{shard, Session};

/// The proctor binary the nodes run: `given`, else this one, by absolute path.
pub fn proctor_bin(given: Option<&Path>) -> Result<PathBuf, RunError> {
    let path = match given {
        Some(p) => p.to_path_buf(),
        None => std::env::current_exe().context("cannot find this proctor binary")?,
    };
    path.canonicalize().map_err(|e| {
        RunError::usage(
            format!("cannot use {} as the proctor binary: {e}", path.display()),
            "pass the path of a proctor binary on a shared file system with --proctor-bin",
        )
    })
}

/// A resumed run's record, read once its session is open: refused while a job of the run is
/// still alive; the claims of workers that ended without finishing are released.
pub fn resume(
    session: &Session,
    external: bool,
    observer: &mut dyn Observer,
) -> Result<ExecutorRecord, RunError> {
    let record = ExecutorRecord::of(&session.run().meta()).unwrap_or_default();
    check_no_live_job(session.run().id().as_str(), &record)?;
    if external {
        observer
            .note("note: make sure no worker of this run still runs: its claims are released now");
    }
    let finished = session
        .run()
        .finished_trials()
        .context("cannot read the run")?;
    let released = shard::release_unfinished(session.run().dir(), &finished)
        .context("cannot release the claims of unfinished trials")?;
    if !released.is_empty() {
        observer.note(&format!(
            "released {} trial(s) claimed by workers that ended before finishing them",
            released.len()
        ));
    }
    Ok(record)
}

/// Refuses a resume (or a collect) while a Slurm job of the run is still queued or running.
pub fn check_no_live_job(run: &str, record: &ExecutorRecord) -> Result<(), RunError> {
    if record.kind != "slurm" {
        return Ok(());
    }
    for s in &record.submissions {
        let queued = queued_tasks(&s.job_id)?;
        if !queued.is_empty() {
            return Err(RunError::usage(
                format!(
                    "run {run} still has Slurm job {} with {} task(s) queued or running",
                    s.job_id,
                    queued.len()
                ),
                format!(
                    "wait for it (`proctor status {run}`), or cancel it with `scancel {}` and resume again",
                    s.job_id
                ),
            ));
        }
    }
    Ok(())
}

/// Trial ids, one list per shard.
pub type Shards = Vec<Vec<String>>;

/// The run's unfinished trials cut into at most `max_shards` shards (default: one per 4
/// trials), trials that share layers together; `None` when every trial is finished. Also the
/// number finished before.
pub fn shards(
    session: &Session,
    max_shards: Option<usize>,
) -> Result<(usize, Option<Shards>), RunError> {
    let finished_before = session
        .run()
        .finished_trials()
        .context("cannot read the run")?;
    let pending: Vec<&PlannedTrial> = session
        .plan()
        .trials
        .iter()
        .filter(|t| !finished_before.contains(&t.id))
        .collect();
    if pending.is_empty() {
        return Ok((finished_before.len(), None));
    }
    let max_shards = max_shards
        .unwrap_or_else(|| pending.len().div_ceil(4))
        .max(1);
    let shards = shard::shard(&pending, max_shards, |t| {
        shard::layer_key(session.suite(), t)
    });
    Ok((finished_before.len(), Some(shards)))
}
