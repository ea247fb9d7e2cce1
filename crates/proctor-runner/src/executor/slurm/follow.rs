//! Following a Slurm submission from the store (and `squeue`) until its tasks leave the queue:
//! each trial the store shows finished is shown as the engine's events would show it, and the
//! tasks' states as they change. Ctrl-C cancels the job: its running trials stay unfinished,
//! for `--resume`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;

use proctor_store::{RunHandle, StoreError, TrialFile};
use proctor_suite::plan::PlannedTrial;

use super::client::{queued_tasks, scancel, waiting};
use crate::error::{Context, RunError};
use crate::executor::record::Submission;
use crate::executor::{summary_of, Observer};
use crate::shard::{self, ShardStatus};
use crate::{Event, ExecutionSummary, Session};

fn poll_interval() -> Duration {
    std::env::var("PROCTOR_SLURM_POLL_MS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .map_or(Duration::from_secs(2), Duration::from_millis)
}

/// The state of one submission's tasks: queued ones from squeue, ended ones from the shard
/// files their workers wrote.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct TaskCounts {
    /// Tasks waiting to run.
    pub pending: usize,
    /// Tasks running.
    pub running: usize,
    /// Tasks whose worker finished its shard.
    pub done: usize,
    /// Tasks that ended before finishing their shard.
    pub failed: Vec<usize>,
}

impl TaskCounts {
    /// The counts of `submission`'s tasks now.
    pub fn read(run_dir: &Path, submission: &Submission) -> Result<TaskCounts, RunError> {
        let queued = queued_tasks(&submission.job_id)?;
        let shards = ShardStatus::read_batch(run_dir, submission.batch);
        let mut c = TaskCounts::default();
        for i in 0..submission.tasks {
            match queued.get(&i.to_string()).map(String::as_str) {
                Some(state) if waiting(state) => c.pending += 1,
                Some(_) => c.running += 1,
                None => match shards.get(&i) {
                    Some(s) if s.state == "done" => c.done += 1,
                    _ => c.failed.push(i),
                },
            }
        }
        Ok(c)
    }

    /// One line saying them.
    pub fn line(&self, job: &str) -> String {
        format!(
            "slurm job {job}: {} pending, {} running, {} failed, {} done task(s)",
            self.pending,
            self.running,
            self.failed.len(),
            self.done
        )
    }
}

/// Follows the submission until its tasks leave the queue, showing each trial as the store
/// shows it finished (the same progress lines as a local run) and the tasks' states as they
/// change. Ctrl-C cancels the job: its running trials stay unfinished, for `--resume`.
pub fn follow(
    session: &Session,
    submission: &Submission,
    before: usize,
    observer: &mut dyn Observer,
) -> Result<ExecutionSummary, RunError> {
    let run = session.run();
    let plan = session.plan();
    let by_id: BTreeMap<&str, &PlannedTrial> =
        plan.trials.iter().map(|t| (t.id.as_str(), t)).collect();
    // Only a flag: the engine's handler would also kill this process's children (the squeue
    // that happens to be running), and there is no trial here to stop.
    install_stop_flag();
    observer.begin(
        &format!(
            "run {} · suite {} · {} trial(s) · Slurm job {} ({} task(s)) · isolation {}",
            run.id(),
            plan.suite_id,
            plan.trials.len(),
            submission.job_id,
            submission.tasks,
            session.isolation().label()
        ),
        plan.trials.len(),
        before,
    );
    let mut seen: BTreeSet<String> = run.finished_trials().context("cannot read the run")?;
    let mut last = String::new();
    let mut cancelled = false;
    loop {
        let counts = TaskCounts::read(run.dir(), submission)?;
        let finished = run.finished_trials().context("cannot read the run")?;
        for id in finished.difference(&seen) {
            if let Some(trial) = by_id.get(id.as_str()) {
                show_trial(run, trial, observer);
            }
        }
        seen = finished;
        let line = counts.line(&submission.job_id);
        if line != last {
            observer.note(&line);
            last = line;
        }
        if counts.pending + counts.running == 0 {
            if !counts.failed.is_empty() {
                let logs = run.dir().join(shard::EXECUTOR_DIR).join(shard::LOGS_DIR);
                observer.note(&format!(
                    "{} array task(s) ended before finishing their shard ({}); their logs: {}/{}_I.out",
                    counts.failed.len(),
                    counts
                        .failed
                        .iter()
                        .map(usize::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                    logs.display(),
                    submission.job_id
                ));
            }
            break;
        }
        if STOP.load(Ordering::SeqCst) && !cancelled {
            observer.note(&format!("\ninterrupted: cancelling Slurm job {}; finished trials are kept (resume with --resume {} --executor slurm)", submission.job_id, run.id()));
            scancel(&submission.job_id);
            cancelled = true;
        }
        std::thread::sleep(poll_interval());
    }
    observer.end();
    let mut summary = summary_of(session, before, seen.len());
    summary.interrupted = cancelled;
    Ok(summary)
}

/// Set by SIGINT or SIGTERM while a run is followed.
static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_stop(_: libc::c_int) {
    // Storing to an atomic is async-signal-safe.
    STOP.store(true, Ordering::SeqCst);
}

/// Makes SIGINT and SIGTERM set [`STOP`].
fn install_stop_flag() {
    let handler: extern "C" fn(libc::c_int) = on_stop;
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: installing a handler that only stores to an atomic.
        unsafe {
            libc::signal(sig, handler as libc::sighandler_t);
        }
    }
}

/// Shows a trial the store has finished as the engine's events would.
fn show_trial(run: &RunHandle, trial: &PlannedTrial, observer: &mut dyn Observer) {
    let file: Result<TrialFile<serde_json::Value>, StoreError> =
        run.store().read_trial(run.id(), &trial.id);
    let Ok(file) = file else {
        return;
    };
    let seconds = file.record["timings_ms"]["total"]
        .as_f64()
        .map_or(file.summary.wall_seconds, |ms| ms / 1000.0);
    observer.event(Event::Finished {
        trial: trial.clone(),
        summary: Box::new(file.summary),
        seconds,
    });
    observer.event(Event::Committed {
        trial_id: trial.id.clone(),
    });
}
