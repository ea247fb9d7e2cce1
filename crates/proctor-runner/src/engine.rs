//! Executes a plan's trials with N workers, writes each finished trial to the store, and stops
//! cleanly on interruption: running trials are fully stopped and left unfinished, so
//! `run --resume` runs exactly them and the trials never started.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proctor_store::{RunHandle, TrialSummary};
use proctor_suite::plan::{Plan, PlannedTrial};
use proctor_suite::Suite;

use crate::layers::LayerCache;
use crate::record::TrialRecord;
use crate::scratch::Scratch;
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
    /// Isolation asked for.
    pub isolation: IsolationChoice,
    /// Between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// Where per-trial scratch goes; `None` chooses (see [`crate::scratch::Scratch::create`]).
    pub scratch: Option<PathBuf>,
}

/// Something worth showing while a run goes on.
#[derive(Debug, Clone)]
pub enum Event {
    /// A trial finished and is in the store.
    Finished {
        /// The trial.
        trial: PlannedTrial,
        /// Its outcome.
        outcome: String,
        /// Why.
        reason: String,
        /// Seconds it took.
        seconds: f64,
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
    pub outcomes: BTreeMap<String, u64>,
    /// Whether the run was interrupted.
    pub interrupted: bool,
    /// The isolation in effect.
    pub isolation: String,
}

/// Decides the isolation a run gets, by asking the machine, never by assuming.
pub fn decide_isolation(
    choice: IsolationChoice,
    probe_dir: &std::path::Path,
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
    TrialSummary {
        trial_id: record.plan.id.clone(),
        task: record.plan.task.clone(),
        variant: record.plan.variant.clone(),
        trial_index: record.plan.index,
        outcome: record.outcome.clone(),
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
        input_tokens: None,
        output_tokens: None,
        cost_usd: None,
    }
}

/// Runs every unfinished trial of `plan` into `run`.
#[allow(clippy::too_many_arguments)]
pub fn execute(
    suite: &Suite,
    plan: &Plan,
    run: &RunHandle,
    store_root: PathBuf,
    isolation: Isolation,
    options: &EngineOptions,
    interrupted: &Arc<AtomicBool>,
    on_event: &(dyn Fn(Event) + Sync),
) -> Result<ExecutionSummary, EngineError> {
    let finished = run.finished_trials()?;
    // The plan's trials still to run, by position (the plan is not copied).
    let pending: VecDeque<usize> = (0..plan.trials.len())
        .filter(|&i| !finished.contains(&plan.trials[i].id))
        .collect();
    let already_finished = finished.len();
    drop(finished);
    let proctor_exe = std::env::current_exe()?;
    let scratch = Scratch::create(
        &store_root,
        run.id().as_str(),
        options.scratch.as_deref(),
        isolation.overlay,
    )?;
    let ctx = RunContext {
        suite,
        plan,
        run,
        store_root: store_root.clone(),
        hide: crate::trial::hidden_paths(&suite.root, &store_root),
        layers: LayerCache::new(store_root.join("cache")),
        isolation,
        proctor_exe,
        search_path: crate::allow::search_path(),
        work_root: scratch.work.clone(),
        socket_root: scratch.sockets.clone(),
        grace: options.grace,
        manifests: Mutex::new(BTreeMap::new()),
        sockets: AtomicU64::new(0),
        preflights: Mutex::new(BTreeMap::new()),
    };
    let queue = Mutex::new(pending);
    let outcomes: Mutex<BTreeMap<String, u64>> = Mutex::default();
    let finished_now = AtomicU64::new(0);
    let store_error: Mutex<Option<proctor_store::StoreError>> = Mutex::default();
    let jobs = options.jobs.max(1);
    // Workers run trials; one committer makes their evidence durable and commits them, several
    // at a time when they finish together (one `syncfs` per batch, off the workers' path). The
    // channel is bounded, so finished-but-uncommitted records never pile up in memory.
    let spawn_error: Mutex<Option<std::io::Error>> = Mutex::default();
    let (done_tx, done_rx) =
        std::sync::mpsc::sync_channel::<(&PlannedTrial, TrialRecord)>(jobs * 2);
    std::thread::scope(|scope| {
        for n in 0..jobs {
            let done_tx = done_tx.clone();
            let worker = std::thread::Builder::new().name(format!("trial-worker-{n}"));
            let spawned = worker.spawn_scoped(scope, || {
                let done_tx = done_tx;
                loop {
                    if interrupted.load(Ordering::SeqCst) {
                        break;
                    }
                    let next = queue.lock().ok().and_then(|mut q| q.pop_front());
                    let Some(trial) = next.and_then(|i| plan.trials.get(i)) else {
                        break;
                    };
                    let record = run_trial(&ctx, trial);
                    // A trial cut short by an interruption is not evidence: leave it unfinished.
                    if interrupted.load(Ordering::SeqCst) {
                        break;
                    }
                    if done_tx.send((trial, record)).is_err() {
                        break;
                    }
                }
            });
            if let Err(e) = spawned {
                if let Ok(mut slot) = spawn_error.lock() {
                    slot.get_or_insert(e);
                }
            }
        }
        drop(done_tx);
        let (finished_now, outcomes, store_error) = (&finished_now, &outcomes, &store_error);
        let committer = std::thread::Builder::new().name("trial-commit".into());
        let spawned = committer.spawn_scoped(scope, move || {
            // Every record sent was a whole trial before any interruption: commit them all,
            // unless the store fails.
            while let Ok(first) = done_rx.recv() {
                let mut batch = vec![first];
                batch.extend(done_rx.try_iter());
                let summaries: Vec<TrialSummary> =
                    batch.iter().map(|(_, record)| summary_of(record)).collect();
                let items: Vec<(&TrialSummary, &TrialRecord)> = summaries
                    .iter()
                    .zip(&batch)
                    .map(|(summary, (_, record))| (summary, record))
                    .collect();
                // The evidence files were written without waiting for the disk; finish_trials
                // makes them durable together, once, before each trial.json (the commit point).
                if let Err(e) = run.finish_trials(&items) {
                    if let Ok(mut slot) = store_error.lock() {
                        slot.get_or_insert(e);
                    }
                    interrupted.store(true, Ordering::SeqCst);
                    break;
                }
                for (trial, record) in batch {
                    finished_now.fetch_add(1, Ordering::SeqCst);
                    if let Ok(mut o) = outcomes.lock() {
                        *o.entry(record.outcome.clone()).or_default() += 1;
                    }
                    on_event(Event::Finished {
                        trial: trial.clone(),
                        outcome: record.outcome.clone(),
                        reason: record.reason.clone(),
                        seconds: record.timings_ms.get("total").copied().unwrap_or_default()
                            / 1000.0,
                    });
                }
            }
        });
        if let Err(e) = spawned {
            // Nothing can be committed: stop the workers; their trials stay unfinished.
            interrupted.store(true, Ordering::SeqCst);
            if let Ok(mut slot) = spawn_error.lock() {
                slot.get_or_insert(e);
            }
        }
    });

    // The agent CLI versions really used, into run.json.
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
        let _ = run.update_meta(|m| m.agent_versions.extend(versions));
    }
    scratch.remove();
    if let Some(e) = spawn_error.lock().ok().and_then(|mut s| s.take()) {
        return Err(e.into());
    }
    if let Some(e) = store_error.lock().ok().and_then(|mut s| s.take()) {
        return Err(e.into());
    }
    Ok(ExecutionSummary {
        planned: plan.trials.len(),
        already_finished,
        finished_now: finished_now.load(Ordering::SeqCst) as usize,
        outcomes: outcomes.into_inner().unwrap_or_default(),
        interrupted: interrupted.load(Ordering::SeqCst),
        isolation: isolation.label().to_string(),
    })
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

/// Installs SIGINT/SIGTERM handling: the first signal sets the flag and stops every running
/// trial; the run then ends with the unfinished trials left for `--resume`.
pub fn install_interrupt_handler() -> std::io::Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, flag.clone())?;
    }
    let watch = flag.clone();
    std::thread::Builder::new().name("interrupt".into()).spawn(move || loop {
        if watch.load(Ordering::SeqCst) {
            eprintln!("\ninterrupted: stopping running trials; finished trials are kept (resume with --resume)");
            kill_children();
            // Keep killing for a moment: a worker may have been starting a sandbox.
            for _ in 0..20 {
                std::thread::sleep(Duration::from_millis(50));
                kill_children();
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    })?;
    Ok(flag)
}
