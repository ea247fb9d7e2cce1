//! `run --executor slurm`: the plan is written to the store, one `sbatch --array` job runs
//! `proctor worker RUN --shard I/K` in each task, and this process follows the run from the
//! store (and `squeue`) and collects it at the end, as a local run does; with `--detach` it
//! returns at once and a dependent job writes the results. `status` and `collect` read such a
//! run at any time.
//!
//! Before anything is created or submitted, it checks what would make a submission fail half
//! way: `sbatch` on PATH, the partition, the options (`sbatch --test-only`), and that the store
//! (and the proctor binary) are on a file system the nodes see, by a one-task probe job that
//! reads a file written here.
//!
//! Workers never write `index.sqlite` nor `run.json` (see [`proctor_store::Store::open_on_node`]):
//! this process records the jobs in `run.json` and brings the index up to date with what they
//! wrote ([`proctor_store::Store::reindex_run`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context;
use proctor_runner::session::plan_trials;
use proctor_runner::shard::{self, Batch, ShardStatus};
use proctor_runner::{Event, ExecutionSummary, Session};
use proctor_store::{RunHandle, Store, StoreError, TrialFile};
use proctor_suite::plan::PlannedTrial;
use proctor_suite::shell::quote;

use crate::cli::{ExecutorArg, Format, RunArgs, SlurmArgs};
use crate::commands::models;
use crate::commands::run::{
    choice, conclude, open_for_run, open_suite_and_store, options_from, plan_error, session_error,
};
use crate::exit::{Error, Status};
use crate::progress::Progress;

/// How long the store probe job may take to run before the check gives up.
const PROBE_TIMEOUT: Duration = Duration::from_secs(300);

/// What `run.json` records of a Slurm run (`extra.executor`), and one `sbatch --array` of it:
/// run sections, so their types live in `proctor-records`.
pub use proctor_records::run::{SlurmSection as SlurmRecord, Submission};

/// A run's Slurm record, read from and written to `run.json`.
pub trait SlurmRecordExt: Sized {
    /// The record in a run's sections, when the run was submitted to Slurm.
    fn of(meta: &proctor_store::RunMeta) -> Option<Self>;
    /// Writes the record into the run's `run.json`.
    fn save(&self, run: &RunHandle) -> Result<(), Error>;
}

impl SlurmRecordExt for SlurmRecord {
    fn of(meta: &proctor_store::RunMeta) -> Option<SlurmRecord> {
        let record = meta.extra.as_ref()?.executor.clone()?;
        (!record.kind.is_empty()).then_some(record)
    }

    fn save(&self, run: &RunHandle) -> Result<(), Error> {
        run.update_meta(|m| m.sections_mut().executor = Some(self.clone()))
            .context("cannot record the Slurm job in run.json")?;
        Ok(())
    }
}

/// `sbatch`, `squeue`, `sinfo`, `scontrol` and `scancel`, with the options every job of a run
/// shares.
struct Slurm {
    partition: Option<String>,
    account: Option<String>,
    time: Option<String>,
    extra: Vec<String>,
}

impl Slurm {
    fn new(args: &SlurmArgs) -> Slurm {
        Slurm {
            partition: args.partition.clone(),
            account: args.account.clone(),
            time: args.time.clone(),
            extra: args.slurm_args.clone(),
        }
    }

    /// The sbatch options every job of the run gets.
    fn common(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(p) = &self.partition {
            out.push(format!("--partition={p}"));
        }
        if let Some(a) = &self.account {
            out.push(format!("--account={a}"));
        }
        if let Some(t) = &self.time {
            out.push(format!("--time={t}"));
        }
        out.extend(self.extra.iter().cloned());
        out
    }
}

/// Runs a Slurm client command; a missing command is a usage error naming what to install.
fn tool(name: &str, args: &[String]) -> Result<std::process::Output, Error> {
    match Command::new(name).args(args).output() {
        Ok(out) => Ok(out),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::usage(
            format!("`{name}` was not found on PATH: --executor slurm needs Slurm's client commands"),
            "run proctor on a machine that submits to your cluster (a login node; on Debian: apt-get install slurm-client), or use --executor local",
        )),
        Err(e) => Err(Error::Other(
            anyhow::Error::new(e).context(format!("cannot run {name}")),
        )),
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).trim().to_string()
}

/// `sbatch --version`, which also shows that sbatch is there.
fn slurm_version() -> Result<String, Error> {
    let out = tool("sbatch", &["--version".to_string()])?;
    if !out.status.success() {
        return Err(Error::usage(
            format!("`sbatch --version` failed: {}", text(&out.stderr)),
            "check your Slurm installation (`sinfo` should answer)",
        ));
    }
    Ok(text(&out.stdout))
}

/// Checks that the partition asked for exists (or that the cluster has a default one).
fn check_partition(partition: Option<&str>) -> Result<(), Error> {
    let out = tool("sinfo", &["-h".into(), "-o".into(), "%P".into()])?;
    if !out.status.success() {
        return Err(Error::usage(
            format!("Slurm does not answer: sinfo: {}", text(&out.stderr)),
            "check that slurmctld runs and this machine may reach it (`sinfo`)",
        ));
    }
    let listed = text(&out.stdout);
    let names: Vec<&str> = listed.lines().map(str::trim).collect();
    let plain: Vec<&str> = names.iter().map(|n| n.trim_end_matches('*')).collect();
    match partition {
        Some(p) if !plain.contains(&p) => Err(Error::usage(
            format!("Slurm has no partition `{p}`"),
            format!(
                "pass one of this cluster's partitions with --partition: {}",
                plain.join(", ")
            ),
        )),
        None if !names.iter().any(|n| n.ends_with('*')) => Err(Error::usage(
            "this Slurm cluster has no default partition",
            format!("name one with --partition: {}", plain.join(", ")),
        )),
        _ => Ok(()),
    }
}

/// Asks Slurm whether it would take a job with these options, submitting nothing.
fn test_only(slurm: &Slurm, extra: &[String]) -> Result<(), Error> {
    let mut args = vec!["--test-only".to_string()];
    args.extend(slurm.common());
    args.extend(extra.iter().cloned());
    args.extend(["--wrap".to_string(), "true".to_string()]);
    let out = tool("sbatch", &args)?;
    if !out.status.success() {
        return Err(rejected(&out.stderr));
    }
    Ok(())
}

/// A job the scheduler refused, with its words.
fn rejected(stderr: &[u8]) -> Error {
    Error::usage(
        format!("Slurm rejected the job: {}", text(stderr)),
        "fix the option it names (--partition, --account, --time, --array-throttle or a --slurm-arg); nothing was submitted",
    )
}

/// `sbatch --parsable ARGS`: the job id.
fn sbatch(args: &[String]) -> Result<String, Error> {
    let mut all = vec!["--parsable".to_string()];
    all.extend(args.iter().cloned());
    let out = tool("sbatch", &all)?;
    if !out.status.success() {
        return Err(rejected(&out.stderr));
    }
    let id = text(&out.stdout);
    let id = id.lines().last().unwrap_or_default();
    let id = id.split(';').next().unwrap_or_default().trim().to_string();
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit()) {
        return Err(Error::Other(anyhow::anyhow!(
            "sbatch answered `{id}`, not a job id"
        )));
    }
    Ok(id)
}

fn scancel(job: &str) {
    let _ = Command::new("scancel").arg(job).output();
}

/// The job's tasks that Slurm still has and that have not ended (pending, held, requeued,
/// running, completing ...), by array task index: their state. Empty once every task has ended.
///
/// Every state is asked for (`-t all`): by default squeue leaves out some passing states (a
/// task being requeued), and a follower that saw no task then would take the job for ended.
fn queued_tasks(job: &str) -> Result<BTreeMap<String, String>, Error> {
    let mut tasks = job_states(job)?;
    tasks.retain(|_, state| !ended(state));
    Ok(tasks)
}

/// Whether a job state (squeue's `%T`) is final.
fn ended(state: &str) -> bool {
    matches!(
        state,
        "COMPLETED"
            | "FAILED"
            | "CANCELLED"
            | "TIMEOUT"
            | "NODE_FAIL"
            | "PREEMPTED"
            | "BOOT_FAIL"
            | "DEADLINE"
            | "OUT_OF_MEMORY"
            | "SPECIAL_EXIT"
            | "REVOKED"
    )
}

/// Whether a job state (squeue's `%T`) is waiting to run.
fn waiting(state: &str) -> bool {
    state == "PENDING" || state.starts_with("REQUEUE") || state.ends_with("_HOLD")
}

/// Every task of the job that Slurm still knows, ended or not, by array task index.
fn job_states(job: &str) -> Result<BTreeMap<String, String>, Error> {
    let args: Vec<String> = ["-h", "-r", "-t", "all", "-j", job, "-o", "%K|%T"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let out = tool("squeue", &args)?;
    if !out.status.success() {
        let err = text(&out.stderr);
        // A job that left the controller's memory is not queued.
        if err.contains("Invalid job id") {
            return Ok(BTreeMap::new());
        }
        return Err(Error::Other(anyhow::anyhow!("squeue -j {job}: {err}")));
    }
    let mut tasks = BTreeMap::new();
    for line in text(&out.stdout).lines() {
        if let Some((task, state)) = line.split_once('|') {
            tasks.insert(task.trim().to_string(), state.trim().to_string());
        }
    }
    Ok(tasks)
}

/// The proctor binary the nodes run: `--proctor-bin`, else this one, by absolute path.
fn proctor_bin(given: Option<&Path>) -> Result<PathBuf, Error> {
    let path = match given {
        Some(p) => p.to_path_buf(),
        None => std::env::current_exe().context("cannot find this proctor binary")?,
    };
    path.canonicalize().map_err(|e| {
        Error::usage(
            format!("cannot use {} as the proctor binary: {e}", path.display()),
            "pass the path of a proctor binary on a shared file system with --proctor-bin",
        )
    })
}

/// Checks that the nodes see the store (and run the binary): writes a random token into a
/// file in the store, runs a one-task job that reads it and writes back beside it, and reads
/// the answer. Returns the node the probe ran on.
fn probe_store(slurm: &Slurm, store: &Path, bin: &Path) -> Result<String, Error> {
    let token = format!(
        "{:x}{:x}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    let file = store.join(format!(".slurm-probe-{token}"));
    let seen = probe_answer_path(&file);
    std::fs::write(&file, &token)
        .with_context(|| format!("cannot write the probe file {}", file.display()))?;
    let cleanup = || {
        let _ = std::fs::remove_file(&file);
        let _ = std::fs::remove_file(&seen);
    };
    let mut args = slurm.common();
    args.extend([
        "--job-name=proctor-store-probe".to_string(),
        "--output=/dev/null".to_string(),
        "--ntasks=1".to_string(),
        "--wrap".to_string(),
        format!(
            "exec {} __store-probe {}",
            quote(&bin.display().to_string()),
            quote(&file.display().to_string())
        ),
    ]);
    let job = match sbatch(&args) {
        Ok(job) => job,
        Err(e) => {
            cleanup();
            return Err(e);
        }
    };
    let deadline = Instant::now() + probe_timeout();
    loop {
        let queued = queued_tasks(&job)?;
        if queued.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            scancel(&job);
            cleanup();
            let states: Vec<String> = queued.into_values().collect();
            return Err(Error::usage(
                format!(
                    "the store probe job {job} did not run within {} s (state: {})",
                    probe_timeout().as_secs(),
                    states.join(", ")
                ),
                "the check needs one task to run: pick a partition with free nodes (--partition), or see `squeue -j` for why it waits",
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let answer = std::fs::read_to_string(&seen).ok();
    cleanup();
    match answer.as_deref().and_then(|a| a.split_once(' ')) {
        Some((t, node)) if t == token => Ok(node.trim().to_string()),
        _ => {
            let how = job_end(&job);
            Err(Error::usage(
                format!(
                    "the store at {} is not on a file system the Slurm nodes see: a probe job ({job}{how}) did not read the file written here",
                    store.display()
                ),
                format!(
                    "put the store on a shared file system (NFS, Lustre, GPFS, CephFS) with --store, and proctor too (it ran {}; --proctor-bin)",
                    bin.display()
                ),
            ))
        }
    }
}

fn probe_timeout() -> Duration {
    std::env::var("PROCTOR_SLURM_PROBE_TIMEOUT")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .map_or(PROBE_TIMEOUT, Duration::from_secs)
}

fn probe_answer_path(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".seen");
    PathBuf::from(name)
}

/// `, STATE exit CODE on NODE` of a finished job, as `scontrol` still knows it.
fn job_end(job: &str) -> String {
    let Ok(out) = Command::new("scontrol")
        .args(["show", "job", "-o", job])
        .output()
    else {
        return String::new();
    };
    let line = text(&out.stdout);
    let field = |key: &str| {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(key))
            .map(str::to_string)
    };
    match (field("JobState="), field("ExitCode="), field("NodeList=")) {
        (Some(s), Some(c), Some(n)) => format!(", {s} with exit code {c} on {n}"),
        _ => String::new(),
    }
}

/// `proctor __store-probe FILE`: on a node, reads the token the submitter wrote and writes it
/// back with this node's name.
pub fn store_probe(file: &Path) -> Result<Status, Error> {
    let token = std::fs::read_to_string(file).map_err(|e| {
        Error::usage(
            format!("cannot read {} on this node: {e}", file.display()),
            "the store must be on a file system every node sees",
        )
    })?;
    let node = proctor_store::HostInfo::detect().hostname;
    proctor_store::atomic_write(
        probe_answer_path(file),
        format!("{token} {node}\n").as_bytes(),
    )
    .context("cannot write the probe's answer")?;
    Ok(Status::Success)
}

/// `run --executor slurm`.
pub fn run(args: &RunArgs) -> Result<Status, Error> {
    let external = args.executor == ExecutorArg::External;
    let kind = if external { "external" } else { "slurm" };
    let version = if external {
        String::new()
    } else {
        slurm_version()?
    };
    let (suite, store) = open_suite_and_store(args)?;
    // A resume submits as the run did, unless told otherwise.
    let earlier = match &args.resume {
        Some(prefix) => store
            .resolve_run(prefix)
            .ok()
            .and_then(|id| store.run_meta(&id).ok())
            .and_then(|m| SlurmRecord::of(&m)),
        None => None,
    };
    let opts = effective(&args.slurm, earlier.as_ref());
    if !external {
        check_partition(opts.partition.as_deref())?;
    }
    let bin = proctor_bin(opts.proctor_bin.as_deref())?;
    if opts.array_throttle == Some(0) {
        return Err(Error::usage(
            "--array-throttle 0 would run no task",
            "pass 1 or more",
        ));
    }
    let slurm = Slurm::new(&opts);
    // Nothing is created or submitted until Slurm would take the jobs and the nodes see the store.
    let probe_node = if external {
        None
    } else {
        let cpus = args.jobs.map(|j| format!("--cpus-per-task={j}"));
        test_only(&slurm, cpus.as_slice())?;
        Some(probe_store(&slurm, store.root(), &bin)?)
    };
    let mut record = SlurmRecord::default();
    let session = start_or_resume(args, suite, &store, external, &mut record)?;
    set_options(&mut record, kind, version, &opts, &bin, args.jobs);
    for n in session.notes() {
        eprintln!(
            "note: {n}; trials are recorded with isolation = \"{}\"",
            session.isolation().label()
        );
    }
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
        eprintln!("every trial of run {} is finished", session.run().id());
        let summary = summary_of(&session, finished_before.len(), finished_before.len());
        return conclude(
            &session,
            &summary,
            &args.suite,
            args.format,
            &format!(" --executor {kind}"),
        );
    }
    let max_shards = opts
        .shards
        .unwrap_or_else(|| pending.len().div_ceil(4))
        .max(1);
    let shards = shard::shard(&pending, max_shards, |t| {
        shard::layer_key(session.suite(), t)
    });
    if external {
        return plan_only(&session, record, shards, &bin);
    }
    let submission = match submit(&session, &slurm, &record, opts.detach, shards, &bin) {
        Ok(mut s) => {
            s.probe_node = probe_node;
            s
        }
        Err(e) => {
            if !session.resumed() {
                discard_run(&store, session);
            }
            return Err(e);
        }
    };
    record.submissions.push(submission.clone());
    record.save(session.run())?;
    let id = session.run().id().clone();
    if opts.detach {
        print_detached(args.format, &id, &submission);
        return Ok(Status::Success);
    }
    let summary = follow(&session, &submission, finished_before.len())?;
    store
        .reindex_run(&id)
        .context("cannot bring the index up to date with the run")?;
    conclude(
        &session,
        &summary,
        &args.suite,
        args.format,
        " --executor slurm",
    )
}

/// Starts the run (its plan checked against the models, its isolation probed where the nodes'
/// upper layers go) or resumes the one `--resume` names (refused while its job is alive; the
/// claims of workers that ended without finishing are released). A resume reads the run's
/// recorded Slurm options into `record`.
fn start_or_resume(
    args: &RunArgs,
    suite: proctor_suite::Suite,
    store: &Store,
    external: bool,
    record: &mut SlurmRecord,
) -> Result<Session, Error> {
    let Some(prefix) = &args.resume else {
        let options = options_from(args);
        let mut planned = suite.clone();
        planned.apply_models(&options.models);
        let plan = plan_trials(&planned, &options).map_err(plan_error)?;
        models::check(&planned, &plan, args.config.as_deref())?;
        // Upper layers go to the nodes' scratch, not to the (shared) store: probe where they
        // would go here.
        let probe_dir = std::env::temp_dir();
        return Session::start_probing_in(
            suite,
            store,
            &options,
            choice(args.isolation),
            &probe_dir,
        )
        .map_err(session_error);
    };
    let session = Session::resume(suite, store, prefix).map_err(session_error)?;
    models::check(session.suite(), session.plan(), args.config.as_deref())?;
    *record = SlurmRecord::of(&session.run().meta()).unwrap_or_default();
    check_no_live_job(session.run().id().as_str(), record)?;
    if external {
        eprintln!("note: make sure no worker of this run still runs: its claims are released now");
    }
    let finished = session
        .run()
        .finished_trials()
        .context("cannot read the run")?;
    let released = shard::release_unfinished(session.run().dir(), &finished)
        .context("cannot release the claims of unfinished trials")?;
    if !released.is_empty() {
        eprintln!(
            "released {} trial(s) claimed by workers that ended before finishing them",
            released.len()
        );
    }
    eprintln!("resuming run {}", session.run().id());
    Ok(session)
}

/// Records in `record` the options this submission runs with (a resume keeps its earlier `jobs`
/// unless given, and its submissions).
fn set_options(
    record: &mut SlurmRecord,
    kind: &str,
    version: String,
    opts: &SlurmArgs,
    bin: &Path,
    jobs: Option<usize>,
) {
    record.kind = kind.into();
    record.slurm_version = version;
    record.partition = opts.partition.clone();
    record.account = opts.account.clone();
    record.time = opts.time.clone();
    record.array_throttle = opts.array_throttle;
    record.slurm_args = opts.slurm_args.clone();
    record.proctor_bin = bin.to_path_buf();
    record.jobs = jobs.or(record.jobs);
}

/// What a detached run prints: its id and job on stdout, how to follow it on stderr.
fn print_detached(format: Format, id: &proctor_store::RunId, submission: &Submission) {
    match format {
        Format::Json => println!(
            "{}",
            serde_json::json!({"run": id.as_str(), "job": submission.job_id, "collect_job": submission.collect_job, "tasks": submission.tasks, "trials": submission.trials})
        ),
        Format::Text => println!("{id} {}", submission.job_id),
    }
    eprintln!(
        "submitted run {id} as Slurm job {} ({} task(s), {} trial(s)); `proctor status {id}` shows its progress; job {} writes the results when it ends",
        submission.job_id,
        submission.tasks,
        submission.trials,
        submission.collect_job.as_deref().unwrap_or("-"),
    );
}

/// The Slurm options in force: those given, and for a resume, the run's own where not given.
fn effective(given: &SlurmArgs, earlier: Option<&SlurmRecord>) -> SlurmArgs {
    let mut opts = given.clone();
    if let Some(r) = earlier {
        opts.partition = opts.partition.or_else(|| r.partition.clone());
        opts.account = opts.account.or_else(|| r.account.clone());
        opts.time = opts.time.or_else(|| r.time.clone());
        opts.array_throttle = opts.array_throttle.or(r.array_throttle);
        if opts.slurm_args.is_empty() {
            opts.slurm_args = r.slurm_args.clone();
        }
        if opts.proctor_bin.is_none() {
            opts.proctor_bin = Some(r.proctor_bin.clone()).filter(|p| p.is_file());
        }
    }
    opts
}

/// Removes a run that never got its job: nothing is left half submitted.
fn discard_run(store: &Store, session: Session) {
    let dir = session.run().dir().to_path_buf();
    drop(session);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = store.reindex();
}

/// `--executor external`: writes the batch and prints one `proctor worker` command per shard.
fn plan_only(
    session: &Session,
    mut record: SlurmRecord,
    shards: Vec<Vec<String>>,
    bin: &Path,
) -> Result<Status, Error> {
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
    for i in 0..tasks {
        println!(
            "{} worker {} --store {} --batch {number} --shard {i}/{tasks}{jobs}",
            quote(&bin.display().to_string()),
            run.id(),
            quote(&run.store().root().display().to_string())
        );
    }
    eprintln!(
        "run {} planned as {tasks} shard(s) of {trials} trial(s) (batch {number}); run each command above where the store is seen (docs/scale.md), then `proctor collect {}`",
        run.id(),
        run.id()
    );
    Ok(Status::Success)
}

/// Refuses a resume while a job of the run is still queued or running.
fn check_no_live_job(run: &str, record: &SlurmRecord) -> Result<(), Error> {
    if record.kind != "slurm" {
        return Ok(());
    }
    for s in &record.submissions {
        let queued = queued_tasks(&s.job_id)?;
        if !queued.is_empty() {
            return Err(Error::usage(
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

/// Writes the batch and its script and submits the array (and, with `--detach`, the
/// dependent collect job). Either every job is submitted or none is.
fn submit(
    session: &Session,
    slurm: &Slurm,
    record: &SlurmRecord,
    detach: bool,
    shards: Vec<Vec<String>>,
    bin: &Path,
) -> Result<Submission, Error> {
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

fn summary_of(session: &Session, before: usize, now: usize) -> ExecutionSummary {
    ExecutionSummary {
        planned: session.plan().trials.len(),
        already_finished: before,
        finished_now: now.saturating_sub(before),
        outcomes: BTreeMap::new(),
        interrupted: false,
        isolation: session.isolation().label().to_string(),
        stopped: None,
    }
}

fn poll_interval() -> Duration {
    std::env::var("PROCTOR_SLURM_POLL_MS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .map_or(Duration::from_secs(2), Duration::from_millis)
}

/// The state of one submission's tasks: queued ones from squeue, ended ones from the shard
/// files their workers wrote.
#[derive(Debug, Default, PartialEq, Eq)]
struct TaskCounts {
    pending: usize,
    running: usize,
    done: usize,
    failed: Vec<usize>,
}

impl TaskCounts {
    fn read(run_dir: &Path, submission: &Submission) -> Result<TaskCounts, Error> {
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

    fn line(&self, job: &str) -> String {
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
fn follow(
    session: &Session,
    submission: &Submission,
    before: usize,
) -> Result<ExecutionSummary, Error> {
    let run = session.run();
    let plan = session.plan();
    let by_id: BTreeMap<&str, &PlannedTrial> =
        plan.trials.iter().map(|t| (t.id.as_str(), t)).collect();
    // Only a flag: the engine's handler would also kill this process's children (the squeue
    // that happens to be running), and there is no trial here to stop.
    install_stop_flag();
    eprintln!(
        "run {} · suite {} · {} trial(s) · Slurm job {} ({} task(s)) · isolation {}",
        run.id(),
        plan.suite_id,
        plan.trials.len(),
        submission.job_id,
        submission.tasks,
        session.isolation().label()
    );
    let mut progress = Progress::new(plan.trials.len(), before);
    let mut seen: BTreeSet<String> = run.finished_trials().context("cannot read the run")?;
    let mut last = String::new();
    let mut cancelled = false;
    loop {
        let counts = TaskCounts::read(run.dir(), submission)?;
        let finished = run.finished_trials().context("cannot read the run")?;
        for id in finished.difference(&seen) {
            if let Some(trial) = by_id.get(id.as_str()) {
                show_trial(run, trial, &mut progress);
            }
        }
        seen = finished;
        let line = counts.line(&submission.job_id);
        if line != last {
            eprintln!("{line}");
            last = line;
        }
        if counts.pending + counts.running == 0 {
            if !counts.failed.is_empty() {
                let logs = run.dir().join(shard::EXECUTOR_DIR).join(shard::LOGS_DIR);
                eprintln!(
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
                );
            }
            break;
        }
        if STOP.load(Ordering::SeqCst) && !cancelled {
            eprintln!("\ninterrupted: cancelling Slurm job {}; finished trials are kept (resume with --resume {} --executor slurm)", submission.job_id, run.id());
            scancel(&submission.job_id);
            cancelled = true;
        }
        std::thread::sleep(poll_interval());
    }
    progress.done();
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
fn show_trial(run: &RunHandle, trial: &PlannedTrial, progress: &mut Progress) {
    let file: Result<TrialFile<serde_json::Value>, StoreError> =
        run.store().read_trial(run.id(), &trial.id);
    let Ok(file) = file else {
        return;
    };
    let seconds = file.record["timings_ms"]["total"]
        .as_f64()
        .map_or(file.summary.wall_seconds, |ms| ms / 1000.0);
    progress.event(Event::Finished {
        trial: trial.clone(),
        summary: Box::new(file.summary),
        seconds,
    });
    progress.event(Event::Committed {
        trial_id: trial.id.clone(),
    });
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
    let live = SlurmRecord::of(meta)
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

/// `proctor status RUN`: trials finished by outcome, and the Slurm job's tasks.
pub fn status(store_dir: &Path, prefix: &str) -> Result<Status, Error> {
    let store = Store::open(store_dir)
        .with_context(|| format!("cannot open the store at {}", store_dir.display()))?;
    let id = store
        .resolve_run(prefix)
        .map_err(|e| Error::usage(e.to_string(), "`proctor list` shows the runs in this store"))?;
    let run = store.open_run(&id).context("cannot open the run")?;
    let meta = run.meta();
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    let mut finished = 0;
    run.for_each_trial(|f: TrialFile<serde::de::IgnoredAny>| {
        finished += 1;
        *outcomes.entry(f.summary.outcome.to_string()).or_default() += 1;
        Ok::<(), StoreError>(())
    })
    .context("cannot read the run's trials")?;
    let record = SlurmRecord::of(&meta);
    let mut live = false;
    let mut lines = Vec::new();
    if let Some((r, s)) = record
        .as_ref()
        .and_then(|r| Some((r, r.submissions.last()?)))
    {
        if r.kind == "slurm" {
            let counts = TaskCounts::read(run.dir(), s)?;
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
            let shards = ShardStatus::read_batch(run.dir(), s.batch);
            let done = shards.values().filter(|x| x.state == "done").count();
            let running = shards.values().filter(|x| x.state == "running").count();
            lines.push(format!(
                "batch {}: {} shard(s): {done} done, {running} started and not done, {} not started",
                s.batch,
                s.tasks,
                s.tasks.saturating_sub(done + running)
            ));
        }
    }
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
    let list = outcomes
        .iter()
        .map(|(o, n)| format!("{o} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    println!(
        "run {id} · suite {} · executor {} · {state}",
        meta.suite_id,
        record.as_ref().map_or("local", |r| r.kind.as_str())
    );
    println!(
        "trials: {finished}/{} finished{}",
        meta.planned_trials,
        if list.is_empty() {
            String::new()
        } else {
            format!(" ({list})")
        }
    );
    for l in lines {
        println!("{l}");
    }
    let results = run.dir().join("results.json").is_file();
    println!(
        "results: {}",
        if results {
            "written (results.json, results.md)"
        } else {
            "not written yet (`proctor collect RUN` writes them)"
        }
    );
    Ok(Status::Success)
}

/// `proctor collect RUN`: results.json and results.md from the trials in the store, the
/// index brought up to date and the run's status recorded; with `--on-node` (the dependent
/// job) the results files only.
pub fn collect(
    store_dir: &Path,
    prefix: &str,
    format: Format,
    on_node: bool,
) -> Result<Status, Error> {
    if on_node {
        return collect_on_node(store_dir, prefix);
    }
    let store = Store::open(store_dir)
        .with_context(|| format!("cannot open the store at {}", store_dir.display()))?;
    let id = store
        .resolve_run(prefix)
        .map_err(|e| Error::usage(e.to_string(), "`proctor list` shows the runs in this store"))?;
    let meta = store.open_run(&id).context("cannot open the run")?.meta();
    if let Some(record) = SlurmRecord::of(&meta) {
        check_no_live_job(id.as_str(), &record).map_err(|e| match e {
            Error::Usage { message, .. } => Error::usage(
                message,
                format!("collect when it has ended (`proctor status {id}` shows it); the trials finished so far are in the store"),
            ),
            other => other,
        })?;
    }
    let suite_dir = meta.suite_path.clone();
    let suite = open_for_run(&suite_dir, &[])?;
    let session = Session::resume(suite, &store, id.as_str()).map_err(session_error)?;
    store
        .reindex_run(&id)
        .context("cannot bring the index up to date with the run")?;
    let finished = session
        .run()
        .finished_trials()
        .context("cannot read the run")?
        .len();
    let summary = summary_of(&session, finished, finished);
    let flags = SlurmRecord::of(&meta)
        .map(|r| format!(" --executor {}", r.kind))
        .unwrap_or_default();
    conclude(&session, &summary, &suite_dir, format, &flags)
}

/// The dependent job's collect: the results files, written from the trial files alone.
fn collect_on_node(store_dir: &Path, prefix: &str) -> Result<Status, Error> {
    let node = proctor_store::HostInfo::detect().hostname;
    let store = Store::open_on_node(
        store_dir,
        serde_json::json!({"kind": "collect", "node": node}),
    )
    .with_context(|| format!("cannot open the store at {}", store_dir.display()))?;
    let id = store
        .resolve_run(prefix)
        .map_err(|e| Error::usage(e.to_string(), "pass the run's id"))?;
    let run = store.open_run(&id).context("cannot open the run")?;
    let meta = run.meta();
    let record =
        <proctor_runner::PlanRecord as proctor_runner::PlanRecordExt>::from_extra(&meta.extra)
            .context("the run does not record its plan")?;
    let mut suite = open_for_run(&meta.suite_path, &[])?;
    suite.apply_models(&record.models);
    let mut writer = proctor_runner::results::ResultsWriter::new(
        run.dir(),
        id.as_str(),
        &suite,
        &meta.suite_hash,
        false,
    )
    .context("cannot write the results")?;
    proctor_runner::results::for_each_record(&run, |r| writer.add(&r))
        .context("cannot read the run's trials")?;
    match writer.finish("results") {
        Ok(_) => eprintln!("wrote {}/results.json and results.md", run.dir().display()),
        Err(proctor_runner::results::ResultsError::Empty) => {
            eprintln!("no trial of run {id} is finished: no results to write")
        }
        Err(e) => return Err(Error::Other(anyhow::Error::new(e))),
    }
    Ok(Status::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_states_are_read_as_waiting_running_or_ended() {
        for s in [
            "PENDING",
            "REQUEUED",
            "REQUEUE_HOLD",
            "REQUEUE_FED",
            "RESV_DEL_HOLD",
        ] {
            assert!(waiting(s) && !ended(s), "{s}");
        }
        for s in [
            "RUNNING",
            "COMPLETING",
            "CONFIGURING",
            "SUSPENDED",
            "SIGNALING",
        ] {
            assert!(!waiting(s) && !ended(s), "{s}");
        }
        for s in [
            "COMPLETED",
            "FAILED",
            "CANCELLED",
            "TIMEOUT",
            "NODE_FAIL",
            "OUT_OF_MEMORY",
        ] {
            assert!(ended(s) && !waiting(s), "{s}");
        }
    }

    #[test]
    fn quoting_survives_quotes_and_spaces() {
        assert_eq!(quote("/a b/c"), "'/a b/c'");
        assert_eq!(quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn a_slurm_record_round_trips_through_run_json_extra() {
        let record = SlurmRecord {
            kind: "slurm".into(),
            slurm_version: "slurm-wlm 22.05.8".into(),
            partition: Some("debug".into()),
            proctor_bin: "/shared/proctor".into(),
            submissions: vec![Submission {
                batch: 1,
                job_id: "12".into(),
                tasks: 3,
                trials: 12,
                ..Default::default()
            }],
            ..Default::default()
        };
        let plan = proctor_records::run::PlanSection {
            trials: 1,
            trial_mode: proctor_records::run::TrialMode::Dev,
            variants: Vec::new(),
            tasks: Vec::new(),
            isolation: proctor_records::run::Isolation::Copy,
            models: Vec::new(),
        };
        let meta = proctor_store::RunMeta {
            extra: Some(proctor_records::run::RunSections {
                plan: Some(plan.clone()),
                executor: Some(record.clone()),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(SlurmRecord::of(&meta), Some(record));
        let local = proctor_store::RunMeta {
            extra: Some(proctor_records::run::RunSections {
                plan: Some(plan),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(SlurmRecord::of(&local), None);
    }
}
