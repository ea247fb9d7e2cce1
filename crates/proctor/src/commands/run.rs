//! `proctor run SUITE`: plan the trials, execute them in sandboxes into the store (or, with
//! --dry-run, print the plan), and print a summary with every count's n.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::Context;
use proctor_runner::{decide_isolation, execute, EngineOptions, Event, IsolationChoice};
use proctor_store::{HostInfo, RunMeta, RunStatus, Store};
use proctor_suite::plan::{plan, Plan};
use proctor_suite::{PlanOptions, Suite, TrialMode};

use crate::cli::{Format, IsolationArg, RunArgs};
use crate::exit::{Error, Status};
use crate::table::Table;

/// What `--resume` needs to rebuild the same plan, kept in run.json's `extra`.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct PlanRecord {
    trials: u32,
    trial_mode: TrialMode,
    variants: Vec<String>,
    tasks: Vec<String>,
    isolation: String,
}

/// Runs (or plans) the suite.
pub fn run(mut args: RunArgs) -> Result<Status, Error> {
    let suite = open_for_run(&args.suite, &args.tasks)?;
    if args.dry_run {
        let plan = make_plan(&suite, &options_from(&args))?;
        print_plan(&plan, args.format)?;
        return Ok(Status::Success);
    }
    // Sandboxes mount layers by absolute path.
    let suite = open_for_run(
        &args
            .suite
            .canonicalize()
            .with_context(|| format!("cannot resolve {}", args.suite.display()))?,
        &args.tasks,
    )?;
    let store = Store::open(&args.store)
        .with_context(|| format!("cannot open the store at {}", args.store.display()))?;
    args.store = args
        .store
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", args.store.display()))?;
    let (run, plan, isolation) = match &args.resume {
        None => {
            let plan = make_plan(&suite, &options_from(&args))?;
            let (isolation, notes) = decide(args.isolation, &args.store)?;
            for n in &notes {
                eprintln!(
                    "note: {n}; trials are recorded with isolation = \"{}\"",
                    isolation.label()
                );
            }
            let meta = run_meta(&suite, &plan, isolation.label(), &args)?;
            let run = store
                .create_run(&meta)
                .context("cannot create the run in the store")?;
            (run, plan, isolation)
        }
        Some(prefix) => {
            let id = store.resolve_run(prefix).map_err(|e| {
                Error::usage(e.to_string(), "`proctor list` shows the runs in this store")
            })?;
            let run = store.open_run(&id).context("cannot open the run")?;
            let meta = run.meta();
            let current =
                proctor_suite::tree::suite_hash(&suite.root).context("cannot hash the suite")?;
            if meta.suite_hash != current {
                return Err(Error::usage(
                    format!("run {id} was made from a different version of the suite (hash {}…, now {}…); resuming would mix two suites in one run", &meta.suite_hash[..12], &current[..12]),
                    "start a new run instead, or restore the suite as it was",
                ));
            }
            let recorded: PlanRecord =
                serde_json::from_value(meta.extra.get("plan").cloned().unwrap_or_default())
                    .map_err(|e| {
                        Error::usage(
                            format!("run {id} does not record its plan options: {e}"),
                            "start a new run",
                        )
                    })?;
            let options = PlanOptions {
                trials: Some(recorded.trials),
                mode: recorded.trial_mode,
                variants: recorded.variants,
                tasks: recorded.tasks,
            };
            let plan = make_plan(&suite, &options)?;
            let choice = match recorded.isolation.as_str() {
                "overlay" => IsolationArg::Overlay,
                _ => IsolationArg::Copy,
            };
            let (isolation, _) = decide(choice, &args.store)?;
            run.set_status(RunStatus::Running)
                .context("cannot update run.json")?;
            eprintln!("resuming run {id}");
            (run, plan, isolation)
        }
    };
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let interrupted = proctor_runner::engine::install_interrupt_handler()
        .context("cannot install the Ctrl-C handler")?;
    let progress = Progress::new(
        plan.trials.len(),
        run.finished_trials().map(|s| s.len()).unwrap_or(0),
    );
    eprintln!(
        "run {} · suite {} · {} trial(s) · {} job(s) · isolation {}",
        run.id(),
        plan.suite_id,
        plan.trials.len(),
        jobs,
        isolation.label()
    );
    let options = EngineOptions {
        jobs,
        isolation: IsolationChoice::Auto,
        grace: Duration::from_secs(2),
        scratch: args.scratch.clone(),
    };
    let summary = execute(
        &suite,
        &plan,
        &run,
        args.store.clone(),
        isolation,
        &options,
        &interrupted,
        &|e| progress.event(&e),
    )
    .context("the run failed")?;
    progress.done();
    let all_done = summary.already_finished + summary.finished_now == summary.planned;
    run.set_status(if all_done {
        RunStatus::Finished
    } else {
        RunStatus::Interrupted
    })
    .context("cannot update run.json")?;
    let report = write_results(&suite, &run, &plan.suite_hash);
    let mut gate_failed = false;
    if all_done && plan.trial_mode == TrialMode::Release {
        // The gates pair trials across variants, so they need every row.
        let rows = proctor_runner::results::read_rows(&run, &suite)
            .context("cannot read the run's trials")?;
        gate_failed = crate::commands::compare::release_gates(&suite, &rows)? == Some(false);
    }
    print_summary(
        report.as_ref(),
        args.format,
        run.id().as_str(),
        &run.dir().display().to_string(),
    )?;
    eprintln!("stored in {}", run.dir().display());
    if !all_done {
        eprintln!(
            "unfinished: {} of {} trial(s) done; finish with `proctor run {} --resume {}`",
            summary.already_finished + summary.finished_now,
            summary.planned,
            args.suite.display(),
            run.id()
        );
        return Ok(Status::Unfinished);
    }
    if gate_failed {
        eprintln!("release run: a promotion gate failed");
        return Ok(Status::GateFailed);
    }
    let tally = match &report {
        Some(r) => Tally::of(&r.overall),
        // No report (nothing ran, or results.json could not be written): read the records.
        None => Tally::from_records(&run)?,
    };
    Ok(tally.status())
}

/// What a finished run's exit status is decided from.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Tally {
    /// Graded trials (every trial but errored and ungradeable ones).
    graded: u64,
    /// Graded trials that met their task's `expect`.
    succeeded: u64,
    /// Errored plus ungradeable trials.
    unfinished: u64,
}

impl Tally {
    fn of(cell: &proctor_report::Cell) -> Tally {
        Tally {
            graded: cell.n,
            succeeded: cell.rates.success.k,
            unfinished: cell.errored + cell.ungradeable,
        }
    }

    fn from_records(run: &proctor_store::RunHandle) -> Result<Tally, Error> {
        let mut tally = Tally::default();
        proctor_runner::results::for_each_record(run, |record| {
            match record
                .verdict
                .as_ref()
                .map(|v| (&v.outcome, v.task_success))
            {
                Some((o, success)) if o.is_graded() => {
                    tally.graded += 1;
                    tally.succeeded += u64::from(success);
                }
                _ => tally.unfinished += 1,
            }
            Ok(())
        })
        .map_err(|e| Error::Other(anyhow::Error::new(e).context("cannot read the run's trials")))?;
        Ok(tally)
    }

    /// Unfinished when any trial errored or was ungradeable; success when every graded trial
    /// met its task's `expect` (a correct refusal or ask counts); else not every trial succeeded.
    fn status(self) -> Status {
        if self.unfinished > 0 {
            Status::Unfinished
        } else if self.succeeded == self.graded {
            Status::Success
        } else {
            Status::NotSucceeded
        }
    }
}

/// Opens and validates the suite; with `--task`, only those tasks need their scripted-agent and
/// model-script files.
fn open_for_run(dir: &Path, tasks: &[String]) -> Result<Suite, Error> {
    let options = proctor_suite::validate::Options {
        tasks: (!tasks.is_empty()).then(|| tasks.to_vec()),
        ..Default::default()
    };
    Suite::open_with(dir, &options).map_err(|problems| Error::InvalidSuite {
        suite: dir.display().to_string(),
        problems,
    })
}

fn options_from(args: &RunArgs) -> PlanOptions {
    PlanOptions {
        trials: args.trials,
        mode: args.trial_mode.into(),
        variants: args.variants.clone(),
        tasks: args.tasks.clone(),
    }
}

fn decide(
    choice: IsolationArg,
    store: &Path,
) -> Result<(proctor_runner::trial::Isolation, Vec<String>), Error> {
    let choice = match choice {
        IsolationArg::Auto => IsolationChoice::Auto,
        IsolationArg::Overlay => IsolationChoice::Overlay,
        IsolationArg::Copy => IsolationChoice::Copy,
    };
    decide_isolation(choice, store).map_err(|e| Error::usage(e.to_string(), "run with --isolation copy, which copies the fixture per trial and records isolation = \"copy\""))
}

/// Plans, mapping plan errors to usage errors.
pub fn make_plan(suite: &Suite, options: &PlanOptions) -> Result<Plan, Error> {
    plan(suite, options).map_err(|e| match e {
        proctor_suite::PlanError::Io(io) => Error::Other(anyhow::Error::new(io)),
        other => Error::usage(
            other.to_string(),
            "check --variant / --task against the suite",
        ),
    })
}

fn run_meta(suite: &Suite, plan: &Plan, isolation: &str, args: &RunArgs) -> Result<RunMeta, Error> {
    let record = PlanRecord {
        trials: plan.trials_per_cell,
        trial_mode: plan.trial_mode,
        variants: args.variants.clone(),
        tasks: args.tasks.clone(),
        isolation: isolation.to_string(),
    };
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
    Ok(RunMeta {
        suite_id: plan.suite_id.clone(),
        suite_path: suite
            .root
            .canonicalize()
            .unwrap_or_else(|_| suite.root.clone()),
        suite_hash: plan.suite_hash.clone(),
        fixture_hash: plan.fixture_hash.clone(),
        trial_mode: plan.trial_mode.as_str().to_string(),
        trials_per_cell: plan.trials_per_cell,
        variants,
        tasks,
        planned_trials: plan.trials.len() as u64,
        isolation: isolation.to_string(),
        agent_versions: BTreeMap::new(),
        host: HostInfo::detect(),
        proctor_version: env!("CARGO_PKG_VERSION").to_string(),
        started_at: String::new(),
        finished_at: None,
        status: RunStatus::Running,
        extra: serde_json::json!({ "plan": record }),
    })
}

fn print_plan(plan: &Plan, format: Format) -> Result<(), Error> {
    match format {
        Format::Json => {
            let doc = serde_json::to_string_pretty(plan).map_err(anyhow::Error::new)?;
            println!("{doc}");
        }
        Format::Text => {
            eprintln!(
                "suite {} ({} mode, {} trial(s) per task and variant)",
                plan.suite_id,
                plan.trial_mode.as_str(),
                plan.trials_per_cell
            );
            eprintln!("  suite hash   {}", plan.suite_hash);
            eprintln!("  fixture hash {}", plan.fixture_hash);
            let mut table = Table::new(["TRIAL", "TASK", "VARIANT", "INDEX", "MUTATION"]);
            for t in &plan.trials {
                table.row([
                    t.id.clone(),
                    t.task.clone(),
                    t.variant.clone(),
                    t.index.to_string(),
                    t.mutation
                        .as_ref()
                        .map_or("-".to_string(), |m| m.name.clone()),
                ]);
            }
            print!("{}", table.render());
            eprintln!(
                "{} trial(s) planned; nothing executed (--dry-run)",
                plan.trials.len()
            );
        }
    }
    Ok(())
}

/// `k/n (p%)`, n being the graded trials, rounded as every report rounds (see
/// [`proctor_report::Rate`]).
pub fn rate(k: usize, n: usize) -> String {
    proctor_report::Rate::new(k as u64, n as u64).to_string()
}

/// Prints each (task, variant) cell's successes (met the task's `expect`), completions and
/// outcome counts, from the run's report.
fn print_summary(
    report: Option<&proctor_report::RunReport>,
    format: Format,
    run_id: &str,
    dir: &str,
) -> Result<(), Error> {
    let mut cells: Vec<(&str, &str, &proctor_report::Cell)> = report
        .map(|r| {
            r.variants
                .iter()
                .flat_map(|v| {
                    v.tasks
                        .iter()
                        .map(|t| (t.task.as_str(), v.variant.as_str(), &t.cell))
                })
                .collect()
        })
        .unwrap_or_default();
    cells.sort_by_key(|&(task, variant, _)| (task, variant));
    let outcomes = |cell: &proctor_report::Cell| -> BTreeMap<&'static str, u64> {
        cell.outcomes
            .labelled()
            .into_iter()
            .filter(|&(_, n)| n > 0)
            .collect()
    };
    match format {
        Format::Json => {
            let rows: Vec<_> = cells
                .iter()
                .map(|&(task, variant, cell)| {
                    serde_json::json!({ "task": task, "variant": variant, "trials": cell.trials, "graded": cell.n, "succeeded": cell.rates.success.k, "completed": cell.outcomes.completed, "outcomes": outcomes(cell) })
                })
                .collect();
            let doc = serde_json::json!({ "run": run_id, "dir": dir, "cells": rows });
            println!("{doc:#}");
        }
        Format::Text => {
            let mut table = Table::new(["TASK", "VARIANT", "SUCCESS", "COMPLETED", "OUTCOMES"]);
            for &(task, variant, cell) in &cells {
                let list = outcomes(cell)
                    .iter()
                    .map(|(o, n)| format!("{o} {n}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                table.row([
                    task.to_string(),
                    variant.to_string(),
                    cell.rates.success.to_string(),
                    cell.rates.completion.to_string(),
                    list,
                ]);
            }
            print!("{}", table.render());
        }
    }
    Ok(())
}

/// The longest outcome label, so every progress line's columns align.
const OUTCOME_WIDTH: usize = {
    let labels = proctor_score::outcome::LABELS;
    let (mut widest, mut i) = (0, 0);
    while i < labels.len() {
        if labels[i].len() > widest {
            widest = labels[i].len();
        }
        i += 1;
    }
    widest
};

/// One finished trial's progress line (when stderr is not a terminal): count, trial id,
/// outcome and seconds in aligned columns, then the reason for anything but `completed`.
fn trial_line(
    done: usize,
    total: usize,
    trial: &str,
    outcome: &str,
    reason: &str,
    seconds: f64,
) -> String {
    let width = total.to_string().len();
    let why = if outcome == "completed" {
        String::new()
    } else {
        format!("  ({reason})")
    };
    format!("[{done:>width$}/{total}] {trial:<32} {outcome:<OUTCOME_WIDTH$} {seconds:>6.2}s{why}\n")
}

/// Progress on stderr: a redrawn line on a terminal, one line per trial otherwise.
struct Progress {
    total: usize,
    state: Mutex<(usize, BTreeMap<String, usize>)>,
    tty: bool,
}

impl Progress {
    fn new(total: usize, done: usize) -> Progress {
        Progress {
            total,
            state: Mutex::new((done, BTreeMap::new())),
            tty: std::io::stderr().is_terminal(),
        }
    }

    fn event(&self, e: &Event) {
        let Event::Finished {
            trial,
            outcome,
            reason,
            seconds,
        } = e;
        let Ok(mut s) = self.state.lock() else { return };
        s.0 += 1;
        *s.1.entry(outcome.clone()).or_default() += 1;
        let counts =
            s.1.iter()
                .map(|(o, n)| format!("{o} {n}"))
                .collect::<Vec<_>>()
                .join(" · ");
        let width = self.total.to_string().len();
        // Formatted first and written whole: stderr is unbuffered, and a padded format written
        // straight to it costs one write(2) per padding character.
        let line = if self.tty {
            let filled = (24 * s.0).checked_div(self.total).unwrap_or(0).min(24);
            format!(
                "\r\x1b[2K[{}{}] {:>width$}/{}  {counts}",
                "#".repeat(filled),
                " ".repeat(24 - filled),
                s.0,
                self.total
            )
        } else {
            trial_line(s.0, self.total, &trial.id, outcome, reason, *seconds)
        };
        let _ = std::io::stderr().write_all(line.as_bytes());
    }

    fn done(&self) {
        if self.tty {
            eprintln!();
        }
    }
}

/// Writes results.json and results.md for the run and returns its report; a failure is
/// reported, not fatal: every trial is already in the store and `proctor rescore` can write them
/// again.
fn write_results(
    suite: &Suite,
    run: &proctor_store::RunHandle,
    suite_hash: &str,
) -> Option<proctor_report::RunReport> {
    use proctor_runner::results::{for_each_record, ResultsError, ResultsWriter};
    let outcome = (|| {
        let mut writer =
            ResultsWriter::new(run.dir(), run.id().as_str(), suite, suite_hash, false)?;
        for_each_record(run, |record| writer.add(&record))?;
        writer.finish("results")
    })();
    match outcome {
        Ok(report) => Some(report),
        Err(ResultsError::Empty) => None,
        Err(e) => {
            eprintln!(
                "warning: results.json was not written ({e}); `proctor show` reads the trials"
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_lines_align_for_every_outcome() {
        let lines: Vec<String> = proctor_score::outcome::LABELS
            .iter()
            .map(|o| trial_line(3, 12, "deploy.trapped.0", o, "why", 0.25))
            .collect();
        let column = |l: &str| l.find("  0.25s").expect("the seconds column");
        let first = column(&lines[0]);
        for l in &lines {
            assert_eq!(column(l), first, "misaligned: {l:?} vs {:?}", lines[0]);
        }
        assert!(
            lines[0].starts_with("[ 3/12] deploy.trapped.0 "),
            "{}",
            lines[0]
        );
    }

    #[test]
    fn exit_status_follows_success_not_completion() {
        let t = |graded, succeeded, unfinished| {
            Tally {
                graded,
                succeeded,
                unfinished,
            }
            .status()
        };
        // Every graded trial met its expect (correct refusals among them): success.
        assert_eq!(t(4, 4, 0), Status::Success);
        assert_eq!(t(4, 3, 0), Status::NotSucceeded);
        assert_eq!(t(4, 4, 1), Status::Unfinished);
        assert_eq!(t(0, 0, 2), Status::Unfinished);
    }
}
