//! What the commands share in showing runs: the engine's events as progress (an [`Observer`]
//! of the runner), a run's conclusion (its gates, its summary table, how to finish it) and the
//! exit status of its verdict, the line naming the scoring read, the JUnit files written, and
//! a trial's services.

use std::path::{Path, PathBuf};

use proctor_report::{Exporter, Table, Terminal};
use proctor_runner::conclusion::{Conclusion, Verdict};
use proctor_runner::export as exports;
use proctor_runner::{Event, ExecutionSummary, Observer, Session};
use proctor_store::{RunHandle, RunId, Scoring};
use proctor_suite::{Problem, Suite};

use crate::cli::Format;
use crate::exit::{Error, Status};
use crate::progress::Progress;

/// Shows what a run's set-up and execution have to say on stderr: notes and suite warnings as
/// they come, trials as progress lines (or a bar on a terminal).
#[derive(Default)]
pub struct Reporter {
    progress: Option<Progress>,
}

impl Observer for Reporter {
    fn note(&mut self, line: &str) {
        errln!("{line}");
    }

    fn warning(&mut self, problem: &Problem) {
        eprint!("{}", crate::render::problem(problem));
    }

    /// An empty header is not shown.
    fn begin(&mut self, header: &str, total: usize, done: usize) {
        if !header.is_empty() {
            errln!("{header}");
        }
        self.progress = Some(Progress::new(total, done));
    }

    fn event(&mut self, event: Event) {
        if let Some(p) = &mut self.progress {
            p.event(event);
        }
    }

    fn end(&mut self) {
        if let Some(p) = &self.progress {
            p.done();
        }
    }
}

/// The exit status of a run's verdict.
pub fn status_of(verdict: Verdict) -> Status {
    match verdict {
        Verdict::Success => Status::Success,
        Verdict::NotSucceeded => Status::NotSucceeded,
        Verdict::Unfinished => Status::Unfinished,
    }
}

/// Closes the run after its trials ran (here or on a cluster), writes its results, shows the
/// gates of a release run and the summary, and returns the run's exit status: a finished
/// release run with gates exits by them (0 passed, 4 failed; 3 when they passed but some trial
/// is errored or ungradeable), every other run by its trials. `resume_flags`
/// is added to the printed resume command (e.g. ` --executor slurm`).
pub fn conclude(
    session: &Session,
    summary: &ExecutionSummary,
    suite_arg: &Path,
    format: Format,
    resume_flags: &str,
) -> Result<Status, Error> {
    let conclusion = Conclusion::close(session, summary)?;
    if let Some(e) = &conclusion.results_error {
        errln!("warning: results.json was not written ({e}); `proctor show` reads the trials");
    }
    let gates = conclusion.release_gates(session)?;
    if let Some(report) = &gates {
        out_block!("\n{}", Terminal.gates(report));
    }
    let run = session.run();
    print_summary(
        conclusion.report.as_ref(),
        format,
        run.id().as_str(),
        &run.dir().display().to_string(),
    )?;
    errln!("stored in {}", run.dir().display());
    if let Some(why) = &summary.stopped {
        return Err(stopped(why, suite_arg, run.id().as_str()));
    }
    if !conclusion.all_done {
        errln!(
            "unfinished: {} of {} trial(s) done; finish with `proctor run {} --resume {}{resume_flags}`",
            summary.already_finished + summary.finished_now,
            summary.planned,
            suite_arg.display(),
            run.id()
        );
        return Ok(Status::Unfinished);
    }
    // A release run with gates exits by them: its purpose is the promotion, and a trial that
    // did not succeed is already in the gates' numbers. An errored or ungradeable trial still
    // makes a run whose gates passed unfinished: the harness, not the agent, lost evidence.
    let verdict = conclusion.tally(session)?.verdict();
    match gates {
        Some(g) if !g.passed => {
            errln!("release run: a promotion gate failed");
            Ok(Status::GateFailed)
        }
        Some(_) if verdict == Verdict::Unfinished => {
            errln!("release run: every promotion gate passed, but some trial is errored or ungradeable");
            Ok(Status::Unfinished)
        }
        Some(_) => {
            errln!("release run: every promotion gate passed");
            Ok(Status::Success)
        }
        None => Ok(status_of(verdict)),
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
    let outcomes = |cell: &proctor_report::Cell| cell.outcomes.tally();
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
            out_block!("{}", table.text());
        }
    }
    Ok(())
}

/// The line that says which scoring of `run` a command read, with how to read the others:
/// `run R: scored by rescore 2 of DATE UTC; original: --scoring original (rescores: 1 to 2)`.
pub fn scoring_line(run: &RunId, scoring: &Scoring) -> String {
    if scoring.is_rescore() {
        format!(
            "run {run}: {scoring}; original: --scoring original (rescores: 1 to {})",
            scoring.rescores
        )
    } else if scoring.rescores > 0 {
        format!(
            "run {run}: {scoring}; the latest: --scoring latest (rescores: 1 to {})",
            scoring.rescores
        )
    } else {
        format!("run {run}: {scoring}")
    }
}

/// Writes the JUnit XML report of a run's finished trials to `file`, from the run's latest
/// scoring.
pub fn write_junit(run: &RunHandle, suite: &Suite, file: &Path) -> Result<(), Error> {
    let cases = exports::write_junit(run, suite, file)?;
    errln!("wrote {} ({cases} test case(s))", file.display());
    Ok(())
}

/// Writes the promotion gates as a JUnit XML report to `file`.
pub fn write_gates_junit(report: &proctor_report::GateReport, file: &Path) -> Result<(), Error> {
    exports::write_gates_junit(report, file)?;
    errln!("wrote {} ({} gate(s))", file.display(), report.gates.len());
    Ok(())
}

/// `--junit` of `run`: written after the run's results.
pub fn junit_after_run(
    run: &RunHandle,
    suite: &Suite,
    file: Option<&PathBuf>,
) -> Result<(), Error> {
    match file {
        Some(f) => write_junit(run, suite, f),
        None => Ok(()),
    }
}

/// The services' logs kept in the trial's folder (`services/NAME.log`: every sidecar's, and
/// that of a service that kept the agent from starting), each with the command that pages it.
pub fn service_log_lines(run: &str, trial: &str, trial_dir: &std::path::Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(trial_dir.join("services")) else {
        return Vec::new();
    };
    let mut logs: Vec<(String, u64)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            name.ends_with(".log")
                .then(|| (name, e.metadata().map_or(0, |m| m.len())))
        })
        .collect();
    if logs.is_empty() {
        return Vec::new();
    }
    logs.sort();
    let mut out = vec!["service logs".to_string()];
    for (name, len) in logs {
        out.push(format!(
            "  {} {len} bytes: proctor show {run} {trial} --service {}",
            proctor_report::escape_line(&name),
            proctor_report::escape_line(&name)
        ));
    }
    out
}

/// `show RUN TRIAL`'s services section: each service's state and events, how much of them the
/// record holds, and the `--service` command that pages what it leaves out.
pub fn service_lines(
    run: &str,
    trial: &str,
    services: &std::collections::BTreeMap<String, proctor_score::endstate::ServiceEnd>,
) -> Vec<String> {
    use proctor_report::escape_line;
    if services.is_empty() {
        return Vec::new();
    }
    let page = |file: &str| format!("proctor show {run} {trial} --service {file}");
    let mut out = vec!["services".to_string()];
    for (name, end) in services {
        let name_shown = escape_line(name);
        let state = match (&end.state, end.state_omitted_bytes, &end.state_error) {
            (Some(v), _, _) => format!(
                "state {} bytes of JSON, in the record (`--format json` prints it)",
                proctor_score::endstate::json_len(v)
            ),
            (None, Some(bytes), _) => format!(
                "state {bytes} bytes of JSON: graded whole, too large for the record; page it: {}",
                page(&format!(
                    "{name}/{}",
                    end.state_file.as_deref().unwrap_or("STATE_FILE")
                ))
            ),
            (None, None, Some(why)) => format!("no state: {}", escape_line(why)),
            (None, None, None) => "no state".to_string(),
        };
        out.push(format!("  {name_shown:<10} {}", escape_line(&state)));
        let listed = end.events.len() as u64;
        let events = if end.events_omitted > 0 {
            format!(
                "events {} ({listed} in the record, every one graded); page them: {}",
                listed + end.events_omitted,
                page(&format!("{name}/events.jsonl"))
            )
        } else {
            format!("events {listed}")
        };
        out.push(format!("  {:<10} {}", "", escape_line(&events)));
    }
    out
}
