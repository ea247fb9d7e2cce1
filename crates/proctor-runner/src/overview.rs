//! What `proctor list` and `proctor show RUN [TRIAL]` show of the store, read: the runs with
//! their observed status (a detached Slurm run whose job is alive is running) and rescores;
//! one run's trials in the scoring asked for, tallied per (task, variant) with the task
//! success its report holds; one trial's record, and the original beside a rescore's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use proctor_records::OutcomeTally;
use proctor_report::{Rate, Summary};
use proctor_score::OutcomeKind;
use proctor_store::{
    DamagedRun, DamagedTrial, RunHandle, RunId, RunListing, RunMeta, Scoring, Store, StoreError,
    TrialSummary,
};

use crate::error::{Context, RunError};
use crate::evidence;
use crate::TrialRecord;

/// Opens the store at `store`, or fails with a usage error when there is none.
pub fn open_store(store: &Path) -> Result<Store, RunError> {
    if !store.join("runs").is_dir() {
        return Err(RunError::usage(
            format!("no store at {}", store.display()),
            "run a suite first (`proctor run SUITE`), or pass --store DIR",
        ));
    }
    Store::open(store).with_context(|| format!("cannot open the store at {}", store.display()))
}

/// The run a user named (`latest`, an id or a unique prefix).
pub fn resolve(store: &Store, prefix: &str) -> Result<RunId, RunError> {
    store
        .resolve_run(prefix)
        .map_err(|e| RunError::usage(e.to_string(), "`proctor list` shows the runs in this store"))
}

/// The store's runs, newest first.
pub struct RunList {
    /// Each run, its status as observed ([`crate::executor::slurm::observed_status`]).
    pub runs: Vec<RunListing>,
    /// How many times each run was rescored (its OUTCOMES are the run's own, as the index holds
    /// them, so a rescored run says so).
    pub rescores: Vec<u32>,
    /// Runs the index could not read.
    pub damaged_runs: Vec<DamagedRun>,
}

impl RunList {
    /// Reads the list from the index.
    pub fn read(store: &Store) -> Result<RunList, RunError> {
        let mut runs = store.list_runs().context("cannot list the runs")?;
        runs.reverse();
        for r in &mut runs {
            r.meta.status = crate::executor::slurm::observed_status(store, &r.id, &r.meta);
        }
        let damaged_runs = store
            .damaged_runs()
            .context("cannot list the damaged runs")?;
        let rescores = runs
            .iter()
            .map(|r| {
                proctor_store::pick_scoring(
                    &store.run_dir(&r.id),
                    proctor_store::ScoringChoice::Latest,
                )
                .ok()
                .and_then(Result::ok)
                .map_or(0, |s| s.rescores)
            })
            .collect();
        Ok(RunList {
            runs,
            rescores,
            damaged_runs,
        })
    }
}

/// One run's trials in one scoring, as `show RUN` shows them.
pub struct RunOverview {
    /// The run's `run.json`, its status as observed.
    pub meta: RunMeta,
    /// Its finished trials, in the scoring's outcomes.
    pub trials: Vec<TrialSummary>,
    /// Its trials whose record does not parse.
    pub damaged: Vec<DamagedTrial>,
    /// Each (task, variant) cell.
    pub cells: Vec<CellView>,
    /// Whether the scoring has a report (else success and flagged are unknown).
    pub has_report: bool,
    /// The promotion gates the scoring's report keeps (a finished release run of a suite with
    /// `[promotion]`).
    pub gates: Option<proctor_report::GateReport>,
}

/// A (task, variant) cell of `show RUN`.
pub struct CellView {
    /// The task.
    pub task: String,
    /// The variant.
    pub variant: String,
    /// Graded trials (not errored, not ungradeable).
    pub graded: u64,
    /// Task success from the report, when it has the cell.
    pub success: Option<Rate>,
    /// Completed of graded.
    pub completed: Rate,
    /// Wrong turns of the graded trials.
    pub wrong_turns: Summary,
    /// Successes the integrity audit flagged (0 when the report lacks the cell).
    pub flagged_successes: u64,
    /// Graded trials the integrity audit flagged (test tampering, an early exit), whatever
    /// their outcome: the report cell's `flagged`, as results.json counts it (0 when the
    /// report lacks the cell).
    pub flagged: u64,
    /// Trials by outcome.
    pub outcomes: OutcomeTally,
}

impl RunOverview {
    /// Reads `run` in `scoring`.
    pub fn read(
        store: &Store,
        run: &RunHandle,
        scoring: &Scoring,
    ) -> Result<RunOverview, RunError> {
        let id = run.id();
        let mut meta = store.run_meta(id).context("cannot read the run")?;
        meta.status = crate::executor::slurm::observed_status(store, id, &meta);
        let mut trials = store.trials(id).context("cannot read the run's trials")?;
        let mut rescored = if scoring.is_rescore() {
            crate::results::rescored_summaries(run, scoring)
                .with_context(|| format!("cannot read {}", scoring.file))?
        } else {
            BTreeMap::new()
        };
        for t in &mut trials {
            if let Some(by) = rescored.remove(&t.trial_id) {
                t.outcome = by.outcome;
                t.reason = by.reason;
                t.calls = by.calls;
                t.wrong_turns = by.wrong_turns;
                t.flags = by.flags;
            }
        }
        let damaged = store
            .damaged_trials(id)
            .context("cannot read the run's damaged trials")?;
        let report = report_cells(&store.run_dir(id), scoring);
        Ok(RunOverview {
            cells: cells(&trials, report.as_ref().map(|r| &r.0)),
            has_report: report.is_some(),
            gates: report.and_then(|r| r.1),
            meta,
            trials,
            damaged,
        })
    }
}

/// Variants side by side per task: n, outcome counts and the wrong turns of the graded trials
/// in every cell.
fn cells(
    trials: &[TrialSummary],
    report: Option<&BTreeMap<(String, String), ReportCell>>,
) -> Vec<CellView> {
    let mut cells: BTreeMap<(String, String), OutcomeTally> = BTreeMap::new();
    let mut wrong_turns: BTreeMap<(String, String), Vec<Option<f64>>> = BTreeMap::new();
    for t in trials {
        let key = (t.task.clone(), t.variant.clone());
        if t.outcome.is_graded() {
            wrong_turns
                .entry(key.clone())
                .or_default()
                .push(t.wrong_turns.map(|w| w as f64));
        }
        cells.entry(key).or_default().add(t.outcome, 1);
    }
    cells
        .into_iter()
        .map(|(key, counts)| {
            let graded: u64 = counts
                .iter()
                .filter(|(o, _)| o.is_graded())
                .map(|(_, n)| n)
                .sum();
            let completed = counts.get(OutcomeKind::Completed);
            let cell = report.and_then(|r| r.get(&key));
            let wrong_turns = Summary::of(wrong_turns.get(&key).into_iter().flatten().copied());
            CellView {
                graded,
                success: cell.and_then(|c| c.success),
                completed: Rate::new(completed, graded),
                wrong_turns,
                flagged_successes: cell.map_or(0, |c| c.flagged_successes),
                flagged: cell.map_or(0, |c| c.flagged),
                outcomes: counts,
                task: key.0,
                variant: key.1,
            }
        })
        .collect()
}

/// One trial as `show RUN TRIAL` shows it.
pub enum TrialView {
    /// Its record in the scoring asked for, and the run's own when that is a rescore.
    Found {
        /// The record shown.
        record: Box<TrialRecord>,
        /// The run's own record, when `record` is a rescore's.
        original: Option<Box<TrialRecord>>,
        /// The trial's folder.
        dir: PathBuf,
    },
    /// Its `trial.json` does not parse: it counts as unfinished.
    Damaged {
        /// Why.
        reason: String,
        /// The file.
        path: PathBuf,
    },
}

impl TrialView {
    /// Reads trial `trial` of `run` in `scoring`; an unknown trial is a usage error naming the
    /// trials the run has.
    pub fn read(
        store: &Store,
        run: &RunHandle,
        trial: &str,
        scoring: &Scoring,
    ) -> Result<TrialView, RunError> {
        let id = run.id();
        let file = match store.read_trial::<TrialRecord>(id, trial) {
            Ok(f) => f,
            Err(StoreError::TrialNotFound { .. }) => return Err(no_such_trial(store, id, trial)),
            Err(StoreError::TrialDamaged { reason, path, .. }) => {
                return Ok(TrialView::Damaged { reason, path })
            }
            Err(e) => {
                return Err(RunError::usage(
                    e.to_string(),
                    format!("`proctor show {id}` lists the trials of this run"),
                ))
            }
        };
        let rescored = if scoring.is_rescore() {
            crate::results::rescored_record(run, scoring, trial)
                .with_context(|| format!("cannot read {}", scoring.file))?
        } else {
            None
        };
        let (record, original) = match rescored {
            Some(r) => (r, Some(Box::new(file.record))),
            None => (file.record, None),
        };
        Ok(TrialView::Found {
            record: Box::new(record),
            original,
            dir: store
                .run_dir(id)
                .join(proctor_store::TRIALS_DIR)
                .join(trial),
        })
    }
}

/// What `show RUN` takes from a cell of the run's report.
struct ReportCell {
    /// Task success (a correct refusal or ask counts), as k/n; `None` when the report has none.
    success: Option<proctor_report::Rate>,
    /// The successes the integrity audit flagged.
    flagged_successes: u64,
    /// The graded trials the integrity audit flagged, whatever their outcome.
    flagged: u64,
}

/// What `show RUN` reads of a scoring's report: each (task, variant) cell, and the gates.
type ReportParts = (
    BTreeMap<(String, String), ReportCell>,
    Option<proctor_report::GateReport>,
);

/// Each (task, variant) cell's task success and flagged successes, and the promotion gates,
/// from the report of `scoring` (`results.report.json`, or a rescore's); `None` for a run that
/// has none yet (unfinished, or made before it). Success needs each task's `expect`, which the
/// index does not hold: the report does.
fn report_cells(run_dir: &Path, scoring: &Scoring) -> Option<ReportParts> {
    /// The members of `results.report.json` read here, typed (the others are skipped).
    #[derive(serde::Deserialize)]
    struct Variants {
        variants: Vec<proctor_report::VariantReport>,
        #[serde(default)]
        gates: Option<proctor_report::GateReport>,
    }
    let text = std::fs::read(run_dir.join(format!("{}.report.json", scoring.stem()))).ok()?;
    let report: Variants = serde_json::from_slice(&text).ok()?;
    let mut out = BTreeMap::new();
    for v in report.variants {
        for t in v.tasks {
            out.insert(
                (t.task, v.variant.clone()),
                ReportCell {
                    success: Some(t.cell.rates.success),
                    flagged_successes: t.cell.flagged_successes,
                    flagged: t.cell.flagged,
                },
            );
        }
    }
    Some((out, report.gates))
}

/// Trials named in the message for an unknown trial id.
const TRIALS_NAMED: usize = 10;

/// The error for a trial id that `read_trial` could not find: one the run planned but has not
/// finished, or one it never had, with the trials it does have.
fn no_such_trial(store: &Store, id: &RunId, trial: &str) -> RunError {
    let hint = format!("`proctor show {id}` lists every trial of this run with its outcome");
    let meta = store.run_meta(id).ok();
    let planned = meta.as_ref().is_some_and(|m| {
        m.tasks.iter().any(|t| {
            m.variants
                .iter()
                .any(|v| (0..m.trials_per_cell).any(|i| format!("{t}.{v}.{i}") == trial))
        })
    });
    let started = store
        .run_dir(id)
        .join(proctor_store::TRIALS_DIR)
        .join(trial)
        .is_dir();
    if planned || started {
        let status = meta.map_or("unknown", |m| store.observed_status(id, m.status).as_str());
        return RunError::usage(
            format!("trial {trial} of run {id} has not finished (the run is {status})"),
            format!("`proctor run SUITE --resume {id}` runs the trials it has not finished"),
        );
    }
    // In the index's order: by task, variant and trial index.
    let ids: Vec<String> = store
        .trials(id)
        .map(|ts| ts.into_iter().map(|t| t.trial_id).collect())
        .unwrap_or_default();
    if ids.is_empty() {
        return RunError::usage(
            format!("no trial {trial} in run {id}; it has no finished trial"),
            hint,
        );
    }
    RunError::usage(
        format!(
            "no trial {trial} in run {id}; trials are {}",
            evidence::some_of(&ids, TRIALS_NAMED)
        ),
        hint,
    )
}
