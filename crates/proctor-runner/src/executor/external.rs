//! The external executor (`run --executor external`) and the worker every batch executor's
//! shards run in.
//!
//! The external executor writes the run and its shards and returns one `proctor worker`
//! command per shard, for another scheduler to run (Kubernetes, xargs or parallel over ssh:
//! docs/scale.md); `proctor collect RUN` then writes the results.
//!
//! [`run_shard`] is `proctor worker RUN --shard I/K`: it runs one shard of a run submitted to a
//! cluster, on whatever node the scheduler chose, with the usual engine. The run's plan is
//! rebuilt from its `run.json` (as `--resume` does) and the shard's trial ids are read from the
//! batch file the submitter wrote. Each trial is claimed before it runs (an atomic create in
//! `executor/claims/`), so no trial runs twice when two workers race; a trial finished or
//! claimed by another worker is skipped. Each finished trial is written atomically, as in a
//! local run; a worker killed mid-trial (scancel, a time limit, a node failure) leaves that
//! trial unfinished, for `run --resume RUN --executor slurm`. The store is opened with
//! [`proctor_store::Store::open_on_node`]: no SQLite, no `run.json` written from here.

use std::path::{Path, PathBuf};
use std::time::Duration;

use proctor_store::{Placement, Store};
use proctor_suite::shell::quote;

use super::record::{BatchOptions, ExecutorRecord, ExecutorRecordExt, Submission};
use super::slurm::{check_throttle, earlier_record};
use super::{batch, summary_of, Execution, Executor, Observer};
use crate::error::{Context, RunError};
use crate::executor::Resources;
use crate::opening::open_for_run;
use crate::session::plan_trials;
use crate::session::PlanRecordExt;
use crate::shard::{self, Batch, ShardStatus};
use crate::{access, decide_isolation, provision, EngineOptions, Job, PlanRecord, Session};

/// Writes the run's shards and returns the commands that run them.
#[derive(Debug, Default)]
pub struct External {
    given: BatchOptions,
    opts: BatchOptions,
    bin: PathBuf,
    record: ExecutorRecord,
}

impl External {
    /// The executor with the options of `run --executor external`.
    pub fn new(options: BatchOptions) -> External {
        External {
            given: options,
            ..Default::default()
        }
    }
}

impl Executor for External {
    fn name(&self) -> &'static str {
        "external"
    }

    fn prepare(&mut self, resume: Option<&str>, store: &Store) -> Result<(), RunError> {
        let earlier = earlier_record(resume, store);
        self.opts = self.given.effective(earlier.as_ref());
        self.bin = batch::proctor_bin(self.opts.proctor_bin.as_deref())?;
        check_throttle(&self.opts)
    }

    fn runs_here(&self) -> bool {
        false
    }

    fn probe_dir(&self) -> Option<PathBuf> {
        Some(std::env::temp_dir())
    }

    fn resumed(&mut self, session: &Session, observer: &mut dyn Observer) -> Result<(), RunError> {
        self.record = batch::resume(session, true, observer)?;
        Ok(())
    }

    /// Writes the batch and returns one `proctor worker` command per shard.
    fn execute(
        &mut self,
        session: &Session,
        _resources: Resources,
        observer: &mut dyn Observer,
    ) -> Result<Execution, RunError> {
        let mut record = std::mem::take(&mut self.record);
        record.set_options("external", String::new(), &self.opts, &self.bin);
        let (before, shards) = batch::shards(session, self.opts.shards)?;
        let Some(shards) = shards else {
            observer.note(&format!(
                "every trial of run {} is finished",
                session.run().id()
            ));
            return Ok(Execution::Finished(summary_of(session, before, before)));
        };
        let run = session.run();
        let number = Batch::next_number(run.dir()).context("cannot read the run's batches")?;
        let tasks = shards.len();
        let trials = shards.iter().map(Vec::len).sum();
        Batch { number, shards }
            .write(run.dir())
            .context("cannot write the batch")?;
        record.submissions.push(Submission {
            batch: number,
            tasks,
            trials,
            submitted_at: proctor_records::time::now_millis(),
            ..Default::default()
        });
        record.save(run)?;
        let jobs = record
            .jobs
            .map(|j| format!(" --jobs {j}"))
            .unwrap_or_default();
        let commands = (0..tasks)
            .map(|i| {
                format!(
                    "{} worker {} --store {} --batch {number} --shard {i}/{tasks}{jobs}",
                    quote(&self.bin.display().to_string()),
                    run.id(),
                    quote(&run.store().root().display().to_string())
                )
            })
            .collect();
        Ok(Execution::Planned {
            commands,
            batch: number,
            trials,
        })
    }
}

/// What `proctor worker` asks for.
#[derive(Debug, Clone, Default)]
pub struct WorkerRequest {
    /// The run (its id or a unique prefix).
    pub run: String,
    /// Which shard of the batch to run: `I/K`.
    pub shard: String,
    /// The batch (default: the run's latest).
    pub batch: Option<u32>,
    /// The store folder.
    pub store: PathBuf,
    /// Trials at once (default: the CPUs Slurm gave the task, else 1).
    pub jobs: Option<usize>,
    /// Folder for per-trial scratch, on the node.
    pub scratch: Option<PathBuf>,
    /// The configuration file of model providers.
    pub config: Option<PathBuf>,
    /// The image cache.
    pub image_cache: Option<PathBuf>,
}

/// `proctor worker`: runs the request's shard; `Ok(true)` when it was interrupted (its running
/// trials stay unfinished).
pub fn run_shard(request: &WorkerRequest, observer: &mut dyn Observer) -> Result<bool, RunError> {
    let (index, count) = parse_shard(&request.shard)?;
    let here = placement(index);
    let store = Store::open_on_node(&request.store, here.clone())
        .with_context(|| format!("cannot open the store at {}", request.store.display()))?;
    let id = store
        .resolve_run(&request.run)
        .map_err(|e| RunError::usage(e.to_string(), "pass the run id the submitter printed"))?;
    let run = store.open_run(&id).context("cannot open the run")?;
    let (suite, plan, record) = run_plan(&run, &id)?;
    let (number, batch) = read_batch(&run, &id, request.batch, count)?;
    let mut status = ShardStatus {
        batch: number,
        shard: index,
        state: "running".into(),
        placement: here.clone(),
        started_at: proctor_store::utc_now(),
        ended_at: None,
        finished: 0,
        skipped: 0,
        agent_versions: Default::default(),
    };
    status
        .write(run.dir())
        .context("cannot write the shard's status")?;
    let mine = claim_trials(&run, &batch.shards[index], &here, &mut status)?;
    let mut shard_plan = plan.clone();
    shard_plan.trials.retain(|t| mine.contains(&t.id));
    observer.note(&format!(
        "worker: run {id} · batch {number} · shard {index}/{count} · {} trial(s) to run, {} skipped · node {}",
        shard_plan.trials.len(),
        status.skipped,
        here.node()
    ));
    let (options, isolation) = engine_options(request, &suite, &shard_plan, &record, observer)?;
    let interrupted = crate::engine::install_interrupt_handler(|| {
        eprintln!("worker: stopped; the trials running now stay unfinished (resume the run)");
    })
    .context("cannot install the signal handler")?;
    let job = Job {
        suite: &suite,
        plan: &shard_plan,
        run: &run,
        store_root: store.root(),
        isolation,
        results: None,
    };
    observer.begin("", shard_plan.trials.len(), 0);
    let summary = crate::execute(job, &options, &interrupted, &mut |e| observer.event(e))
        .context("the shard failed")?;
    observer.end();
    status.finished = summary.finished_now;
    status.agent_versions = run.meta().agent_versions;
    status.ended_at = Some(proctor_store::utc_now());
    status.state = if summary.interrupted {
        "interrupted".into()
    } else {
        "done".into()
    };
    status
        .write(run.dir())
        .context("cannot write the shard's status")?;
    Ok(summary.interrupted)
}

/// Claims the shard's unfinished trials: each one this worker runs is claimed by it alone; the
/// others are counted as skipped.
fn claim_trials(
    run: &proctor_store::RunHandle,
    trials: &[String],
    here: &Placement,
    status: &mut ShardStatus,
) -> Result<Vec<String>, RunError> {
    let finished = run.finished_trials().context("cannot read the run")?;
    let mut mine = Vec::new();
    for trial in trials {
        if finished.contains(trial) {
            status.skipped += 1;
            continue;
        }
        let claimed = shard::claim(run.dir(), trial, here).context("cannot claim a trial")?
            || reclaim_own(run.dir(), trial, here)?;
        if claimed {
            mine.push(trial.clone());
        } else {
            status.skipped += 1;
        }
    }
    Ok(mine)
}

/// What the shard's trials share on this node: its scratch (never under the shared store: a
/// run's scratch folder is cleaned by pid, which means nothing across machines, and overlay
/// upper layers cannot live on NFS), the isolation decided there, the model gateway, the
/// images and the browser.
fn engine_options(
    request: &WorkerRequest,
    suite: &proctor_suite::Suite,
    plan: &proctor_suite::plan::Plan,
    record: &PlanRecord,
    observer: &mut dyn Observer,
) -> Result<(EngineOptions, crate::trial::Isolation), RunError> {
    let overlay = record.isolation_choice() == crate::IsolationChoice::Overlay;
    let jobs = request.jobs.unwrap_or_else(default_jobs);
    let scratch = request
        .scratch
        .clone()
        .unwrap_or_else(|| node_scratch(overlay, crate::scratch::may_write(suite, jobs)));
    std::fs::create_dir_all(&scratch)
        .with_context(|| format!("cannot create the scratch folder {}", scratch.display()))?;
    let (isolation, notes) =
        decide_isolation(record.isolation_choice(), &scratch).map_err(RunError::failed)?;
    for n in notes {
        observer.note(&format!("note: {n}"));
    }
    let config = request.config.as_deref();
    let access = access::check(suite, plan, config)?;
    // A worker builds only an image that cannot be pulled: `run --build` is for trials run here.
    let images = provision::for_run(suite, plan, config, request.image_cache.as_deref(), false)?;
    let gateway = access.map(access::start).transpose()?;
    let options = EngineOptions {
        jobs,
        grace: Duration::from_secs(2),
        scratch: Some(scratch),
        gateway,
        images,
        browser: access::browser_for(suite, config)?,
    };
    Ok((options, isolation))
}

/// Where this worker runs, from the scheduler's environment: stamped into every trial it
/// writes and into its claims.
pub fn placement(shard: usize) -> Placement {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let node = env("SLURMD_NODENAME").unwrap_or_else(|| proctor_store::HostInfo::detect().hostname);
    match (env("SLURM_ARRAY_JOB_ID"), env("SLURM_ARRAY_TASK_ID")) {
        (Some(job), Some(task)) => Placement::Slurm {
            job,
            array_task: task.parse::<u64>().ok(),
            task_job_id: env("SLURM_JOB_ID"),
            node,
            restart: env("SLURM_RESTART_COUNT")
                .and_then(|c| c.parse::<u64>().ok())
                .unwrap_or(0),
        },
        _ => Placement::Worker { shard, node },
    }
}

/// `I/K` → (I, K).
fn parse_shard(text: &str) -> Result<(usize, usize), RunError> {
    let bad = || {
        RunError::usage(
            format!("`{text}` is not a shard"),
            "write --shard I/K: the 0-based shard I of K shards (e.g. --shard 0/4)",
        )
    };
    let (i, k) = text.split_once('/').ok_or_else(bad)?;
    let i: usize = i.trim().parse().map_err(|_| bad())?;
    let k: usize = k.trim().parse().map_err(|_| bad())?;
    if k == 0 || i >= k {
        return Err(bad());
    }
    Ok((i, k))
}

/// A claim this very array task made before it was requeued (same job and array task) is its
/// own: the earlier attempt was killed with the node, and its trial is unfinished.
fn reclaim_own(run_dir: &Path, trial: &str, here: &Placement) -> Result<bool, RunError> {
    if !matches!(here, Placement::Slurm { .. }) {
        return Ok(false);
    }
    let claims = shard::claims(run_dir).context("cannot read the claims")?;
    let Some(Some(who)) = claims.get(trial) else {
        return Ok(false);
    };
    if here.requeued_from(who) {
        let path = run_dir
            .join(shard::EXECUTOR_DIR)
            .join(shard::CLAIMS_DIR)
            .join(trial);
        std::fs::remove_file(&path).context("cannot take over a claim")?;
        return shard::claim(run_dir, trial, here).context("cannot claim a trial");
    }
    Ok(false)
}

/// The run's suite (refused when it changed since the run was submitted), its plan rebuilt as
/// the submitter made it, and the plan's record.
fn run_plan(
    run: &proctor_store::RunHandle,
    id: &proctor_store::RunId,
) -> Result<(proctor_suite::Suite, proctor_suite::plan::Plan, PlanRecord), RunError> {
    let meta = run.meta();
    let record = PlanRecord::from_extra(&meta.extra).map_err(|e| {
        RunError::usage(
            format!("run {id} does not record its plan: {e}"),
            "submit it again with `proctor run --executor slurm`",
        )
    })?;
    let mut suite = open_for_run(&meta.suite_path, &record.tasks)?;
    let now = proctor_suite::tree::suite_hash(&suite.root).context("cannot hash the suite")?;
    if now != meta.suite_hash {
        return Err(RunError::usage(
            format!(
                "the suite at {} changed since run {id} was submitted",
                meta.suite_path.display()
            ),
            "restore the suite as it was, or start a new run",
        ));
    }
    suite.apply_models(&record.models);
    let plan = plan_trials(&suite, &record.options())?;
    Ok((suite, plan, record))
}

/// The batch the worker runs a shard of (`--batch`, else the latest), which must have `count`
/// shards.
fn read_batch(
    run: &proctor_store::RunHandle,
    id: &proctor_store::RunId,
    given: Option<u32>,
    count: usize,
) -> Result<(u32, Batch), RunError> {
    let number = match given {
        Some(n) => n,
        None => Batch::next_number(run.dir())
            .context("cannot read the run's batches")?
            .saturating_sub(1),
    };
    let batch = Batch::read(run.dir(), number).map_err(|e| {
        RunError::usage(
            format!("run {id} has no batch {number}: {e}"),
            "run the worker of a submitted run (`proctor run --executor slurm` writes the batch)",
        )
    })?;
    if batch.shards.len() != count {
        return Err(RunError::usage(
            format!(
                "batch {number} of run {id} has {} shard(s), not {count}",
                batch.shards.len()
            ),
            format!("pass --shard I/{}", batch.shards.len()),
        ));
    }
    Ok((number, batch))
}

/// This node's scratch: `/dev/shm` when it is a tmpfs with room for what the trials may write
/// (`may_write` bytes, and more) and the run isolates with an overlay (a copy of the fixture
/// belongs on disk), else the temporary folder.
fn node_scratch(overlay: bool, may_write: u64) -> std::path::PathBuf {
    let shm = overlay
        .then(|| crate::scratch::shm_base(may_write))
        .flatten();
    shm.unwrap_or_else(|| {
        // SAFETY: getuid(2) cannot fail.
        let uid = unsafe { libc::getuid() };
        std::env::temp_dir().join(format!("proctor-{uid}"))
    })
}

/// Trials at once: the CPUs Slurm gave the task, else 1.
fn default_jobs() -> usize {
    ["SLURM_CPUS_PER_TASK", "SLURM_CPUS_ON_NODE"]
        .iter()
        .find_map(|k| std::env::var(k).ok().and_then(|v| v.parse::<usize>().ok()))
        .unwrap_or(1)
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_read_as_i_of_k() {
        assert_eq!(parse_shard("0/4").ok(), Some((0, 4)));
        assert_eq!(parse_shard("3/4").ok(), Some((3, 4)));
        assert!(parse_shard("4/4").is_err());
        assert!(parse_shard("1/0").is_err());
        assert!(parse_shard("1").is_err());
        assert!(parse_shard("a/b").is_err());
    }
}
