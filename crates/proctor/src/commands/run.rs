//! `proctor run SUITE`: plan the trials, execute them in sandboxes into the store (or, with
//! --dry-run, print the plan), and print a summary with every count's n.
//!
//! Starting, resuming and closing the run is [`proctor_runner::Session`]'s; this command parses
//! the arguments, renders the engine's events as progress, and prints the results.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use proctor_report::Table;
use proctor_runner::gateway::RunGateway;
use proctor_runner::session::plan_trials;
use proctor_runner::{EngineOptions, ExecutionSummary, IsolationChoice, Session, SessionError};
use proctor_store::Store;
use proctor_suite::plan::{Plan, PlanError};
use proctor_suite::{PlanOptions, Suite, TrialMode};

use crate::cli::{ExecutorArg, Format, IsolationArg, RunArgs};
use crate::commands::{images, models};
use crate::exit::{Error, Status};
use crate::progress::Progress;

/// Runs (or plans) the suite.
pub fn run(args: RunArgs) -> Result<Status, Error> {
    if args.dry_run {
        let mut suite = open_for_run(&args.suite, &args.tasks)?;
        suite.apply_models(&args.models);
        let plan = plan_trials(&suite, &options_from(&args)).map_err(plan_error)?;
        print_plan(&plan, args.format)?;
        return Ok(Status::Success);
    }
    if args.executor != ExecutorArg::Local {
        if args.junit.is_some() {
            return Err(Error::usage(
                "--junit is written by a local run only",
                "after the cluster's run is collected, write it with `proctor export RUN --junit FILE`",
            ));
        }
        return crate::commands::slurm::run(&args);
    }
    let (session, resources) = open_session(&args)?;
    let summary = execute(&session, &args, resources)?;
    let status = conclude(&session, &summary, &args.suite, args.format, "");
    // The JUnit report of what finished, whatever the run's status (an unfinished run too).
    crate::commands::export::junit_after_run(session.run(), session.suite(), args.junit.as_ref())?;
    status
}

/// Closes the run after its trials ran (here or on a cluster), writes its results, prints the
/// summary and returns the run's exit status. `resume_flags` is added to the printed resume
/// command (e.g. ` --executor slurm`).
pub(crate) fn conclude(
    session: &Session,
    summary: &ExecutionSummary,
    suite_arg: &Path,
    format: Format,
    resume_flags: &str,
) -> Result<Status, Error> {
    let all_done = session.close(summary).map_err(session_error)?;
    let report = write_results(session);
    let mut gate_failed = false;
    if all_done && session.plan().trial_mode == TrialMode::Release {
        // The gates pair trials across variants, so they need every row.
        let rows = proctor_runner::results::read_rows(session.run(), session.suite())
            .context("cannot read the run's trials")?;
        gate_failed =
            crate::commands::compare::release_gates(session.suite(), &rows)? == Some(false);
    }
    let run = session.run();
    print_summary(
        report.as_ref(),
        format,
        run.id().as_str(),
        &run.dir().display().to_string(),
    )?;
    errln!("stored in {}", run.dir().display());
    if let Some(why) = &summary.stopped {
        return Err(stopped(why, suite_arg, run.id().as_str()));
    }
    if !all_done {
        errln!(
            "unfinished: {} of {} trial(s) done; finish with `proctor run {} --resume {}{resume_flags}`",
            summary.already_finished + summary.finished_now,
            summary.planned,
            suite_arg.display(),
            run.id()
        );
        return Ok(Status::Unfinished);
    }
    if gate_failed {
        errln!("release run: a promotion gate failed");
        return Ok(Status::GateFailed);
    }
    let tally = match &report {
        Some(r) => Tally::of(&r.overall),
        // No report (nothing ran, or results.json could not be written): read the records.
        None => Tally::from_records(run)?,
    };
    Ok(tally.status())
}

/// The run's suite, checked first where the user pointed (so that problems name the suite as
/// it was given) and then opened by its absolute path (sandboxes mount its layers by absolute
/// path), and the store.
pub(crate) fn open_suite_and_store(args: &RunArgs) -> Result<(Suite, Store), Error> {
    open_suite_and_store_at(&args.suite, &args.tasks, &args.store)
}

/// [`open_suite_and_store`] for the suite folder `suite` (with only `tasks` to run, when any are
/// named) and the store folder `store`.
pub(crate) fn open_suite_and_store_at(
    suite: &Path,
    tasks: &[String],
    store: &Path,
) -> Result<(Suite, Store), Error> {
    for w in open_checked(suite, tasks, true)?.1 {
        eprint!("{}", crate::render::problem(&w));
    }
    let suite_dir = suite
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", suite.display()))?;
    let suite = open_for_run(&suite_dir, tasks)?;
    let store = Store::open(store)
        .with_context(|| format!("cannot open the store at {}", store.display()))?;
    Ok((suite, store))
}

/// Opens the suite (from its absolute path: sandboxes mount layers by absolute path) and the
/// store, checks that every model the trials reach is usable (a provider that serves the
/// agent's API, a key in the environment) before anything is created, and starts the run, or
/// resumes the one `--resume` names; then starts the run's model gateway if a trial needs it.
fn open_session(args: &RunArgs) -> Result<(Session, RunResources), Error> {
    let (suite, store) = open_suite_and_store(args)?;
    let (session, access, images) = match &args.resume {
        None => {
            let options = options_from(args);
            let mut planned = suite.clone();
            planned.apply_models(&options.models);
            let plan = plan_trials(&planned, &options).map_err(plan_error)?;
            let access = models::check(&planned, &plan, args.config.as_deref())?;
            let images = images::for_run(
                &planned,
                &plan,
                args.config.as_deref(),
                args.image_cache.as_deref(),
            )?;
            let session = Session::start(suite, &store, &options, choice(args.isolation))
                .map_err(session_error)?;
            images::record_in_run(session.run(), &images)?;
            (session, access, images)
        }
        Some(prefix) => {
            let session = Session::resume(suite, &store, prefix).map_err(session_error)?;
            let access = models::check(session.suite(), session.plan(), args.config.as_deref())?;
            let images = images::for_run(
                session.suite(),
                session.plan(),
                args.config.as_deref(),
                args.image_cache.as_deref(),
            )?;
            images::check_resume(session.run(), &images)?;
            (session, access, images)
        }
    };
    for n in session.notes() {
        errln!(
            "note: {n}; trials are recorded with isolation = \"{}\"",
            session.isolation().label()
        );
    }
    if session.resumed() {
        errln!("resuming run {}", session.run().id());
    }
    let gateway = access.map(models::start).transpose()?;
    let browser = models::browser_for(session.suite(), args.config.as_deref())?;
    Ok((
        session,
        RunResources {
            gateway,
            images,
            browser,
        },
    ))
}

/// What a run's trials share beyond the session: the model gateway and the unpacked images.
struct RunResources {
    gateway: Option<Arc<RunGateway>>,
    images: std::collections::BTreeMap<String, Arc<proctor_runner::image::TrialImage>>,
    browser: Option<proctor_browser::BrowserSource>,
}

/// Executes the session's unfinished trials, with Ctrl-C handling and progress on stderr.
fn execute(
    session: &Session,
    args: &RunArgs,
    resources: RunResources,
) -> Result<ExecutionSummary, Error> {
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let interrupted = proctor_runner::engine::install_interrupt_handler(|| {
        errln!(
            "\ninterrupted: stopping running trials; finished trials are kept (resume with --resume)"
        );
    })
    .context("cannot install the Ctrl-C handler")?;
    let plan = session.plan();
    let mut progress = Progress::new(plan.trials.len(), session.finished_before());
    errln!(
        "run {} · suite {} · {} trial(s) · {} job(s) · isolation {}",
        session.run().id(),
        plan.suite_id,
        plan.trials.len(),
        jobs,
        session.isolation().label()
    );
    let options = EngineOptions {
        jobs,
        grace: Duration::from_secs(2),
        scratch: args.scratch.clone(),
        gateway: resources.gateway,
        images: resources.images,
        browser: resources.browser,
    };
    let summary = session
        .execute(&options, &interrupted, &mut |e| progress.event(e))
        .context("the run failed")?;
    progress.done();
    Ok(summary)
}

/// Writes results.json and results.md for the run and returns its report; a failure is
/// reported, not fatal: every trial is already in the store and `proctor rescore` can write them
/// again.
pub(crate) fn write_results(session: &Session) -> Option<proctor_report::RunReport> {
    match session.write_results() {
        Ok(report) => report,
        Err(e) => {
            errln!("warning: results.json was not written ({e}); `proctor show` reads the trials");
            None
        }
    }
}

/// What a finished run's exit status is decided from.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tally {
    /// Graded trials (every trial but errored and ungradeable ones).
    graded: u64,
    /// Graded trials that met their task's `expect`.
    succeeded: u64,
    /// Errored plus ungradeable trials.
    unfinished: u64,
}

impl Tally {
    pub(crate) fn of(cell: &proctor_report::Cell) -> Tally {
        Tally {
            graded: cell.n,
            succeeded: cell.rates.success.k,
            unfinished: cell.errored + cell.ungradeable,
        }
    }

    pub(crate) fn from_records(run: &proctor_store::RunHandle) -> Result<Tally, Error> {
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
    pub(crate) fn status(self) -> Status {
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
pub(crate) fn open_for_run(dir: &Path, tasks: &[String]) -> Result<Suite, Error> {
    open_checked(dir, tasks, false).map(|(suite, _)| suite)
}

/// [`open_for_run`], with the warnings found. With `history`, the fixture's `.git` folders are
/// audited too (a leak in them refuses the run; the rest are warnings).
pub(crate) fn open_checked(
    dir: &Path,
    tasks: &[String],
    history: bool,
) -> Result<(Suite, Vec<proctor_suite::Problem>), Error> {
    let options = proctor_suite::validate::Options {
        tasks: (!tasks.is_empty()).then(|| tasks.to_vec()),
        history,
        ..Default::default()
    };
    let invalid = |problems| Error::InvalidSuite {
        suite: dir.display().to_string(),
        problems,
    };
    let suite = Suite::parse(dir).map_err(|p| invalid(vec![p]))?;
    let checked = proctor_suite::validate::check(&suite, &options);
    if checked.problems.is_empty() {
        Ok((suite, checked.warnings))
    } else {
        Err(invalid(checked.problems))
    }
}

pub(crate) fn options_from(args: &RunArgs) -> PlanOptions {
    PlanOptions {
        trials: args.trials,
        mode: args.trial_mode.into(),
        variants: args.variants.clone(),
        tasks: args.tasks.clone(),
        models: args.models.clone(),
    }
}

pub(crate) fn choice(isolation: IsolationArg) -> IsolationChoice {
    match isolation {
        IsolationArg::Auto => IsolationChoice::Auto,
        IsolationArg::Overlay => IsolationChoice::Overlay,
        IsolationArg::Copy => IsolationChoice::Copy,
    }
}

/// A plan error as the user sees it: options that do not fit the suite are a usage error.
pub fn plan_error(e: PlanError) -> Error {
    match e {
        PlanError::Io(io) => Error::Other(anyhow::Error::new(io)),
        other => Error::usage(
            other.to_string(),
            "check --variant / --task against the suite",
        ),
    }
}

/// The error of a run proctor stopped itself (its `run.json` already says `interrupted` and
/// why): what to do before resuming it.
fn stopped(why: &str, suite: &Path, run: &str) -> Error {
    let first = if why.starts_with("the store ran out of space") {
        "free space on the store's file system (or move the store to a larger one)"
    } else {
        "fix what the store reported"
    };
    Error::Stopped {
        message: format!("run {run} stopped: {why}"),
        hint: format!(
            "{first}, then `proctor run {} --resume {run}` runs the trials left",
            suite.display()
        ),
    }
}

/// Why a run could not start or resume, with what to do about it.
pub(crate) fn session_error(e: SessionError) -> Error {
    if let SessionError::Plan(p) = e {
        return plan_error(p);
    }
    let hint = match &e {
        SessionError::Isolation(_) => "run with --isolation copy, which copies the fixture per trial and records isolation = \"copy\"",
        SessionError::UnknownRun(_) => "`proctor list` shows the runs in this store",
        SessionError::SuiteChanged { .. } => "start a new run instead, or restore the suite as it was",
        SessionError::NoPlanRecord { .. } => "start a new run",
        SessionError::StillRunning(_) => "wait for that process to end (`proctor list` shows the run as running until then), or stop it with Ctrl-C and resume again; a run killed without a chance to record its end is shown as interrupted and resumes",
        _ => return Error::Other(anyhow::Error::new(e)),
    };
    Error::usage(e.to_string(), hint)
}

fn print_plan(plan: &Plan, format: Format) -> Result<(), Error> {
    match format {
        Format::Json => {
            let doc = serde_json::to_string_pretty(plan).map_err(anyhow::Error::new)?;
            println!("{doc}");
        }
        Format::Text => {
            errln!(
                "suite {} ({} mode, {} trial(s) per task and variant)",
                plan.suite_id,
                plan.trial_mode.as_str(),
                plan.trials_per_cell
            );
            errln!("  suite hash   {}", plan.suite_hash);
            errln!("  fixture hash {}", plan.fixture_hash);
            let mut table = Table::new(&["TRIAL", "TASK", "VARIANT", "INDEX", "MUTATION"]);
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
            out!("{}", table.text());
            errln!(
                "{} trial(s) planned; nothing executed (--dry-run)",
                plan.trials.len()
            );
        }
    }
    Ok(())
}

/// Prints each (task, variant) cell's successes (met the task's `expect`), completions and
/// outcome counts, from the run's report.
pub(crate) fn print_summary(
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
                    serde_json::json!({ "task": task, "variant": variant, "trials": cell.trials, "graded": cell.n, "succeeded": cell.rates.success.k, "flagged": cell.flagged, "flagged_successes": cell.flagged_successes, "completed": cell.outcomes.completed, "outcomes": outcomes(cell) })
                })
                .collect();
            let doc = serde_json::json!({ "run": run_id, "dir": dir, "cells": rows });
            println!("{doc:#}");
        }
        Format::Text => {
            let mut table = Table::new(&["TASK", "VARIANT", "SUCCESS", "COMPLETED", "OUTCOMES"]);
            for &(task, variant, cell) in &cells {
                let list = outcomes(cell)
                    .iter()
                    .map(|(o, n)| format!("{o} {n}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                table.row([
                    task.to_string(),
                    variant.to_string(),
                    cell.success_text(),
                    cell.rates.completion.to_string(),
                    list,
                ]);
            }
            out!("{}", table.text());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
