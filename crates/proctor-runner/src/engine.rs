//! Executes a plan's trials with N workers, writes each finished trial to the store, and stops
//! cleanly on interruption: running trials are fully stopped and left unfinished, so
//! `run --resume` runs exactly them and the trials never started.
//!
//! The engine prints nothing. What happens to each trial is an [`Event`] (started, finished
//! with its summary, committed), delivered in order to one observer: the command line renders
//! them as progress, and anything else (a viewer, another executor) can take the same stream.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proctor_records::OutcomeTally;
use proctor_store::{RunHandle, TrialSummary};
use proctor_suite::plan::{Plan, PlannedTrial};
use proctor_suite::Suite;

use crate::layers::LayerCache;
use crate::record::TrialRecord;
use crate::scratch::Scratch;
use crate::spool::SpooledRecords;
use crate::trial::{run_trial, Isolation, RunContext};

/// Which isolation the user asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IsolationChoice {
    /// Overlay with namespaces where the machine allows it, else copy.
    #[default]
    Auto,
    /// Overlay with namespaces, or fail.
    Overlay,
    /// Copy the fixture and diff against a manifest (namespaces still used where available).
    Copy,
}

/// Why a run cannot proceed.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// Overlay isolation was asked for but the machine refuses it.
    #[error("overlay isolation is not available here: {0}")]
    OverlayUnavailable(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] proctor_store::StoreError),
    /// A file-system operation of the run failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Options of one execution.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Trials run at once.
    pub jobs: usize,
    /// Between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// Where per-trial scratch goes; `None` chooses (see [`crate::scratch::Scratch::create`]).
    pub scratch: Option<PathBuf>,
    /// The run's model gateway, when some trial reaches a real model.
    pub gateway: Option<std::sync::Arc<crate::gateway::RunGateway>>,
    /// The image each task runs in, by task id, resolved before the run (tasks without one run
    /// on the host's root).
    pub images: BTreeMap<String, std::sync::Arc<crate::image::TrialImage>>,
    /// Where `visual` checks find their browser; `None`: the first Chromium on the search path.
    pub browser: Option<proctor_browser::BrowserSource>,
}

/// What one execution runs: a suite's plan, into one run of the store, with the isolation
/// decided for it ([`decide_isolation`]).
#[derive(Clone, Copy)]
pub struct Job<'a> {
    /// The suite, opened from an absolute path (sandboxes mount its layers by absolute path).
    pub suite: &'a Suite,
    /// The trials; those the run already finished are skipped.
    pub plan: &'a Plan,
    /// The run the trials are stored in.
    pub run: &'a RunHandle,
    /// The store's root folder, absolute.
    pub store_root: &'a Path,
    /// The isolation in effect.
    pub isolation: Isolation,
    /// Where each trial's record goes as it is stored, for the run's results at the end (which
    /// then need not read it back); `None` to read every trial back then.
    pub results: Option<&'a Mutex<Option<SpooledRecords>>>,
}

/// What happens to a trial during an execution: for each trial, `Started`, then (unless the run
/// is interrupted while it runs) `Finished`, then (unless the store fails) `Committed`. Every
/// event is delivered from one thread, in the order it happened there, so an observer needs no
/// lock and sees each trial's events in that order.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A worker took the trial from the queue and is running it.
    Started {
        /// The trial.
        trial: PlannedTrial,
    },
    /// The trial ran to its end and was scored; its record is on its way to the store.
    Finished {
        /// The trial.
        trial: PlannedTrial,
        /// What the index keeps of it: outcome, reason, wall time, calls, wrong turns.
        summary: Box<TrialSummary>,
        /// Seconds the whole trial took (setup, agent, capture, checks).
        seconds: f64,
    },
    /// The trial's `trial.json` is written: it is finished in the store, and a resume will not
    /// run it again.
    Committed {
        /// The trial's id.
        trial_id: String,
    },
}

/// How an execution ended.
#[derive(Debug, Clone, Default)]
pub struct ExecutionSummary {
    /// Trials in the plan.
    pub planned: usize,
    /// Trials finished before this execution (a resume).
    pub already_finished: usize,
    /// Trials finished by this execution.
    pub finished_now: usize,
    /// Outcome counts of the trials finished by this execution.
    pub outcomes: OutcomeTally,
    /// Whether the run was interrupted.
    pub interrupted: bool,
    /// Why proctor itself stopped the run before every trial ran, when it did: the store's file
    /// system filled up, or the store failed. The trials cut short were left unfinished (their
    /// folders emptied) for `run --resume`.
    pub stopped: Option<String>,
    /// The isolation in effect.
    pub isolation: String,
}

/// Decides the isolation a run gets, by asking the machine, never by assuming.
pub fn decide_isolation(
    choice: IsolationChoice,
    probe_dir: &Path,
) -> Result<(Isolation, Vec<String>), EngineError> {
    let caps = proctor_sandbox::probe_in(probe_dir);
    let mut notes = Vec::new();
    let namespaces = caps.user_namespaces.is_ok();
    if let Err(e) = &caps.user_namespaces {
        notes.push(format!("user namespaces unavailable: {e}"));
    }
    if let Err(e) = &caps.overlay {
        notes.push(format!("overlayfs unavailable: {e}"));
    }
    let iso = match choice {
        IsolationChoice::Overlay => {
            if !caps.overlay_sandbox() {
                return Err(EngineError::OverlayUnavailable(notes.join("; ")));
            }
            Isolation {
                overlay: true,
                namespaces: true,
            }
        }
        IsolationChoice::Copy => Isolation {
            overlay: false,
            namespaces,
        },
        IsolationChoice::Auto => Isolation {
            overlay: caps.overlay_sandbox(),
            namespaces,
        },
    };
    Ok((iso, notes))
}

/// The summary the index keeps of a record.
pub fn summary_of(record: &TrialRecord) -> TrialSummary {
    // The report's source of tokens: the wire where proctor saw the traffic, else what the
    // agent reported (report_row::tokens_of).
    let usage = record
        .ledgers
        .wire
        .as_ref()
        .or(record.ledgers.agent_reported.as_ref());
    TrialSummary {
        trial_id: record.plan.id.clone(),
        task: record.plan.task.clone(),
        variant: record.plan.variant.clone(),
        trial_index: record.plan.index,
        outcome: record.outcome.kind(),
        reason: Some(record.reason.clone()),
        wall_seconds: record.end_state.agent.wall_seconds,
        calls: record
            .verdict
            .as_ref()
            .and_then(|v| v.metrics)
            .map(|m| m.calls),
        wrong_turns: record
            .verdict
            .as_ref()
            .and_then(|v| v.metrics)
            .map(|m| m.wrong_turns),
        input_tokens: usage.and_then(|u| u.input),
        output_tokens: usage.and_then(|u| u.output),
        cost_usd: record.ledgers.cost_usd,
        limit_reached: record.limit_reached,
        flags: record
            .verdict
            .as_ref()
            .map(|v| v.integrity.flags().map(|f| f.describe()).collect())
            .unwrap_or_default(),
    }
}

/// What a worker tells the committer.
enum Report<'p> {
    /// It took this trial from the queue.
    Started(&'p PlannedTrial),
    /// The trial ran to its end before any interruption: its record, to be committed.
    Finished(&'p PlannedTrial, Box<TrialRecord>),
}

/// What the committer counted.
#[derive(Default)]
struct Commits {
    /// Trials committed.
    trials: usize,
    /// Their outcomes.
    outcomes: OutcomeTally,
    /// Why committing stopped: the store failed (see [`ExecutionSummary::stopped`]).
    stopped: Option<String>,
}

/// Runs every unfinished trial of the job's plan into its run, `options.jobs` at a time, and
/// reports each trial's [`Event`]s to `on_event`. When `interrupted` is set (by Ctrl-C, or by a
/// store failure) no further trial starts, and the trials cut short are left unfinished.
pub fn execute(
    job: Job<'_>,
    options: &EngineOptions,
    interrupted: &AtomicBool,
    on_event: &mut (dyn FnMut(Event) + Send),
) -> Result<ExecutionSummary, EngineError> {
    let finished = job.run.finished_trials()?;
    // The plan's trials still to run, by position (the plan is not copied).
    let pending: VecDeque<usize> = (0..job.plan.trials.len())
        .filter(|&i| !finished.contains(&job.plan.trials[i].id))
        .collect();
    let already_finished = finished.len();
    drop(finished);
    let proctor_exe = std::env::current_exe()?;
    let scratch = Scratch::create(
        job.store_root,
        job.run.id().as_str(),
        options.scratch.as_deref(),
        job.isolation.overlay,
        crate::scratch::may_write(job.suite, options.jobs.max(1)),
    )?;
    let ctx = context(&job, options, &scratch, proctor_exe);
    let outcome = run_workers(
        &ctx,
        pending,
        (options.jobs.max(1), job.results),
        interrupted,
        on_event,
    );
    record_agent_versions(&ctx);
    if let Ok(c) = &ctx.cgroups {
        c.remove();
    }
    scratch.remove();
    let committed = outcome?;
    let stopped = committed.stopped.or_else(|| {
        ctx.store_full()
            .map(|why| format!("the store ran out of space ({why})"))
    });
    Ok(ExecutionSummary {
        planned: job.plan.trials.len(),
        already_finished,
        finished_now: committed.trials,
        outcomes: committed.outcomes,
        interrupted: interrupted.load(Ordering::SeqCst),
        isolation: job.isolation.label().to_string(),
        stopped,
    })
}

/// What every trial of the job shares (with the run's control groups, when the trials run in
/// namespaces).
pub(crate) fn context<'a>(
    job: &Job<'a>,
    options: &EngineOptions,
    scratch: &Scratch,
    proctor_exe: PathBuf,
) -> RunContext<'a> {
    let store_root = job.store_root.to_path_buf();
    RunContext {
        suite: job.suite,
        plan: job.plan,
        run: job.run,
        hide: crate::trial::hidden_paths(&job.suite.root, &store_root),
        store_root: store_root.clone(),
        layers: LayerCache::new(store_root.join("cache")),
        isolation: job.isolation,
        proctor_exe,
        search_path: crate::allow::search_path(),
        work_root: scratch.work.clone(),
        skeletons: crate::skeletons::Skeletons::new(&scratch.work),
        calls: crate::calls::Listeners::new(scratch.sockets.clone()),
        grace: options.grace,
        start_copies: Mutex::default(),
        scripts: Mutex::new(BTreeMap::new()),
        preflights: Mutex::new(BTreeMap::new()),
        host_programs: Mutex::new(BTreeMap::new()),
        cgroups: if job.isolation.namespaces {
            crate::cgroup::RunCgroups::create().map(std::sync::Arc::new)
        } else {
            Err("the trials run without namespaces".into())
        },
        store_full: Mutex::new(None),
        browser: options.browser.clone().unwrap_or_else(|| {
            proctor_browser::BrowserSource::SearchPath(crate::allow::search_path())
        }),
        gateway: options.gateway.clone(),
        images: options.images.clone(),
        runtime: if options.images.is_empty() {
            None
        } else {
            crate::image::HostRuntime::of_this_process()
                .ok()
                .flatten()
                .map(std::sync::Arc::new)
        },
    }
}

/// Runs the pending trials on `jobs` worker threads; one committer thread makes their evidence
/// durable and commits them, several at a time when they finish together (one `syncfs` per
/// batch, off the workers' path), and delivers every event. The channel between them is
/// bounded, so finished-but-uncommitted records never pile up in memory.
fn run_workers(
    ctx: &RunContext<'_>,
    pending: VecDeque<usize>,
    (jobs, results): (usize, Option<&Mutex<Option<SpooledRecords>>>),
    interrupted: &AtomicBool,
    on_event: &mut (dyn FnMut(Event) + Send),
) -> Result<Commits, EngineError> {
    let queue = Mutex::new(pending);
    let spawn_error: Mutex<Option<std::io::Error>> = Mutex::default();
    // Reports of a few trials per worker wait without blocking it while the committer makes a
    // batch durable.
    let (tx, rx) = std::sync::mpsc::sync_channel::<Report<'_>>(jobs * 8);
    let committed = std::thread::scope(|scope| {
        for n in 0..jobs {
            let tx = tx.clone();
            let worker = std::thread::Builder::new().name(format!("trial-worker-{n}"));
            let spawned = worker.spawn_scoped(scope, || work(ctx, &queue, interrupted, tx));
            if let Err(e) = spawned {
                keep_first(&spawn_error, e);
            }
        }
        drop(tx);
        let committer = std::thread::Builder::new().name("trial-commit".into());
        match committer.spawn_scoped(scope, || {
            commit((ctx.run, results), rx, interrupted, on_event)
        }) {
            Ok(handle) => handle.join().ok(),
            Err(e) => {
                // Nothing can be committed: stop the workers; their trials stay unfinished.
                interrupted.store(true, Ordering::SeqCst);
                keep_first(&spawn_error, e);
                None
            }
        }
    });
    if let Some(e) = spawn_error.lock().ok().and_then(|mut s| s.take()) {
        return Err(e.into());
    }
    match committed {
        Some(result) => Ok(result?),
        None => Err(std::io::Error::other("the committer thread panicked").into()),
    }
}

/// Keeps the first error of several threads.
fn keep_first<E>(slot: &Mutex<Option<E>>, e: E) {
    if let Ok(mut slot) = slot.lock() {
        slot.get_or_insert(e);
    }
}

/// One worker: takes trials from the queue and runs each whole, until the queue is empty, the
/// run is interrupted, or the committer is gone.
fn work<'p>(
    ctx: &RunContext<'p>,
    queue: &Mutex<VecDeque<usize>>,
    interrupted: &AtomicBool,
    tx: SyncSender<Report<'p>>,
) {
    loop {
        if interrupted.load(Ordering::SeqCst) {
            break;
        }
        let next = queue.lock().ok().and_then(|mut q| q.pop_front());
        let Some(trial) = next.and_then(|i| ctx.plan.trials.get(i)) else {
            break;
        };
        if tx.send(Report::Started(trial)).is_err() {
            break;
        }
        let record = run_trial(ctx, trial);
        // The store filled up while this trial (or another) kept its evidence: what is in its
        // folder is incomplete. Stop the run, and empty the folder to give the space back.
        if ctx.store_full().is_some() {
            interrupted.store(true, Ordering::SeqCst);
            let _ = ctx.run.discard_unfinished_trial(&trial.id);
            break;
        }
        // A trial cut short by an interruption is not evidence: leave it unfinished.
        if interrupted.load(Ordering::SeqCst) {
            break;
        }
        if tx.send(Report::Finished(trial, Box::new(record))).is_err() {
            // The committer stopped (the store failed): this trial will not be recorded.
            let _ = ctx.run.discard_unfinished_trial(&trial.id);
            break;
        }
    }
}

/// How long the committer gathers finished trials into one batch after the first: the batch's
/// evidence is made durable with one `syncfs` (a flush of the disk's cache) and its rows go into
/// the index in one transaction, where one of each per trial would cost the disk more than the
/// trials cost the processor. A crash or power loss loses at most this much more finished work,
/// which `run --resume` runs again.
const GROUP_COMMIT_WINDOW: Duration = Duration::from_millis(20);

/// The most finished trials one batch holds (their records wait in memory until committed).
const GROUP_COMMIT_MAX: usize = 64;

/// The committer: delivers each report's event and commits every record sent (each was a whole
/// trial before any interruption), unless the store fails; a store failure interrupts the run,
/// leaves the trials of the failed batch unfinished (their folders emptied: they are run again
/// on resume) and says why in [`Commits::stopped`].
fn commit(
    (run, results): (&RunHandle, Option<&Mutex<Option<SpooledRecords>>>),
    rx: Receiver<Report<'_>>,
    interrupted: &AtomicBool,
    on_event: &mut (dyn FnMut(Event) + Send),
) -> Result<Commits, proctor_store::StoreError> {
    let mut committed = Commits::default();
    while let Ok(first) = rx.recv() {
        let mut batch: Vec<(TrialSummary, Box<TrialRecord>)> = Vec::new();
        // Set by the batch's first finished trial: until then, only what is queued is taken.
        let mut deadline: Option<Instant> = None;
        let mut next = Some(first);
        while let Some(report) = next.take() {
            match report {
                Report::Started(trial) => on_event(Event::Started {
                    trial: trial.clone(),
                }),
                Report::Finished(trial, record) => {
                    let summary = summary_of(&record);
                    on_event(Event::Finished {
                        trial: trial.clone(),
                        summary: Box::new(summary.clone()),
                        seconds: record.timings_ms.total / 1000.0,
                    });
                    batch.push((summary, record));
                    deadline.get_or_insert_with(|| Instant::now() + GROUP_COMMIT_WINDOW);
                }
            }
            if batch.len() >= GROUP_COMMIT_MAX {
                break;
            }
            // The workers gone (the run's end, or an interruption): the batch is complete.
            next = match deadline {
                None => rx.try_recv().ok(),
                Some(d) => rx
                    .recv_timeout(d.saturating_duration_since(Instant::now()))
                    .ok(),
            };
        }
        if batch.is_empty() {
            continue;
        }
        let items: Vec<(&TrialSummary, &TrialRecord)> = batch
            .iter()
            .map(|(summary, record)| (summary, &**record))
            .collect();
        // The evidence files were written without waiting for the disk; finish_trials makes
        // them durable together, once, before each trial.json (the commit point).
        if let Err(e) = run.finish_trials(&items) {
            interrupted.store(true, Ordering::SeqCst);
            // A trial of the batch may have been committed before the failure.
            let finished = run.finished_trials().unwrap_or_default();
            for (summary, _) in &batch {
                if finished.contains(&summary.trial_id) {
                    committed.trials += 1;
                    committed.outcomes.add(summary.outcome, 1);
                    on_event(Event::Committed {
                        trial_id: summary.trial_id.clone(),
                    });
                } else {
                    let _ = run.discard_unfinished_trial(&summary.trial_id);
                }
            }
            committed.stopped = Some(if e.is_out_of_space() {
                format!("the store ran out of space ({e})")
            } else {
                format!("the store failed ({e})")
            });
            // Later reports are trials cut short by the stop: not evidence.
            return Ok(committed);
        }
        if let Some(spooled) = results
            .and_then(|r| r.lock().ok())
            .as_mut()
            .and_then(|s| s.as_mut())
        {
            // A record that cannot be spooled leaves the results to read every trial back at
            // the end, which reports why; nothing more is spooled after it.
            for (_, record) in &batch {
                if !spooled.usable() || spooled.add_committed(record).is_err() {
                    break;
                }
            }
        }
        for (summary, _) in batch {
            committed.trials += 1;
            committed.outcomes.add(summary.outcome, 1);
            on_event(Event::Committed {
                trial_id: summary.trial_id,
            });
        }
    }
    Ok(committed)
}

/// The agent CLI versions really used, into run.json.
fn record_agent_versions(ctx: &RunContext<'_>) {
    let versions: BTreeMap<String, String> = ctx
        .preflights
        .lock()
        .map(|m| {
            m.iter()
                .map(|(v, r)| {
                    (
                        v.clone(),
                        match r {
                            Ok(Some(info)) => format!(
                                "{} {} (tested with {})",
                                info.agent, info.version, info.tested_version
                            ),
                            Ok(None) => "n/a".to_string(),
                            Err(e) => format!("unavailable: {e}"),
                        },
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    if !versions.is_empty() {
        let _ = ctx.run.update_meta(|m| m.agent_versions.extend(versions));
    }
}

/// Kills every direct child process of proctor (each one a sandbox's init, whose death takes
/// its whole trial with it). Used when the run is interrupted.
pub fn kill_children() {
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // The fields after the parenthesised command name: state, ppid, ...
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let ppid = rest
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(me) {
            // SAFETY: kill(2) with a pid read from /proc; at worst the process is already gone.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

/// Installs SIGINT/SIGTERM handling: the first signal sets the returned flag, calls
/// `on_interrupt` once (to tell the user), and stops every running trial; the run then ends with
/// the unfinished trials left for `--resume`.
pub fn install_interrupt_handler(
    on_interrupt: impl FnOnce() + Send + 'static,
) -> std::io::Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, flag.clone())?;
    }
    let watch = flag.clone();
    std::thread::Builder::new()
        .name("interrupt".into())
        .spawn(move || {
            while !watch.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(50));
            }
            on_interrupt();
            kill_children();
            // Keep killing for a moment: a worker may have been starting a sandbox.
            for _ in 0..20 {
                std::thread::sleep(Duration::from_millis(50));
                kill_children();
            }
        })?;
    Ok(flag)
}
