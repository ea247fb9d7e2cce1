//! `proctor export RUN --atif DIR` (one ATIF trajectory per trial) and `--junit FILE` (a JUnit
//! XML report), and the JUnit files `run --junit` and `compare --gate --junit` write
//! (docs/export.md). Reading the store into them is [`proctor_runner::export`]'s; this module
//! says what was written.

use std::path::Path;

use anyhow::Context;
use proctor_report::export::atif;
use proctor_runner::export as exports;
use proctor_store::{RunHandle, Scoring, ScoringChoice};
use proctor_suite::Suite;

use crate::exit::{Error, Status};

/// The files `export` writes; at least one is given.
pub struct Formats<'a> {
    /// The HTML page.
    pub html: Option<&'a Path>,
    /// The folder of ATIF trajectories.
    pub atif: Option<&'a Path>,
    /// The JUnit XML file.
    pub junit: Option<&'a Path>,
}

/// `proctor export RUN [--html FILE] [--atif DIR] [--junit FILE] [--scoring S]`: every format
/// from the scoring `choice` picks (the latest by default), which each records.
pub fn run(
    store_dir: &Path,
    run: &str,
    formats: Formats<'_>,
    choice: ScoringChoice,
) -> Result<Status, Error> {
    let store = proctor_runner::overview::open_store(store_dir)?;
    let id = proctor_runner::overview::resolve(&store, run)?;
    let handle = store.open_run(&id).context("cannot open the run")?;
    let scoring = proctor_runner::export::pick_scoring(&handle, choice)?;
    errln!("{}", crate::summary::scoring_line(&id, &scoring));
    if let Some(html) = formats.html {
        crate::viewer::export_html(store_dir, id.as_str(), html, choice)?;
    }
    if let Some(file) = formats.junit {
        let (suite, _) = proctor_runner::stored_suite::open(&handle)?;
        write_junit_scored(&handle, &suite, file, &scoring)?;
    }
    if let Some(dir) = formats.atif {
        write_atif(&handle, dir, &scoring)?;
    }
    Ok(Status::Success)
}

/// Writes the JUnit XML report of `scoring` of a run to `file`.
fn write_junit_scored(
    run: &RunHandle,
    suite: &Suite,
    file: &Path,
    scoring: &Scoring,
) -> Result<(), Error> {
    let cases = exports::write_junit_scored(run, suite, file, scoring)?;
    errln!("wrote {} ({cases} test case(s))", file.display());
    Ok(())
}

/// Writes one ATIF trajectory per finished trial into `dir` (created when missing).
fn write_atif(run: &RunHandle, dir: &Path, scoring: &Scoring) -> Result<(), Error> {
    let done = exports::write_atif(run, dir, scoring)?;
    for n in &done.notes {
        errln!("note: {n}");
    }
    for d in &done.damaged {
        errln!(
            "warning: trial {} was not exported: {} (`proctor show {} {}` says more)",
            d.trial_id,
            d.reason,
            run.id(),
            d.trial_id
        );
    }
    if done.written == 0 {
        return Err(Error::usage(
            format!("run {} has no finished trials to export", run.id()),
            "finish it first (`proctor run SUITE --resume RUN`)",
        ));
    }
    errln!(
        "wrote {} ATIF trajectory file(s) ({}) into {}",
        done.written,
        atif::ATIF_VERSION,
        dir.display()
    );
    Ok(())
}
