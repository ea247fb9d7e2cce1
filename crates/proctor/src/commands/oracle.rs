//! `proctor validate SUITE --oracle`: proves the suite's rules can pass and can fail.
//!
//! Every task runs with its oracle and with a null agent that does nothing, in real sandboxes
//! ([`proctor_runner::oracle`]). The oracle is a scripted agent read from
//! `agents/oracle/TASK_ID.toml`, whatever the suite's variants say, unless `--oracle-variant V`
//! names one of the suite's variants to use instead. Each task's image is had first, task by
//! task: a task whose image cannot be had gets a row saying why and no trial, and the others
//! run. Every trial that errored or did not do what was expected is printed with its reason, then
//! the suite's summary ([`OracleSummary`]; also as JSON with `--json FILE`), and the run's store
//! is kept (even a temporary one) so that its evidence can be read with `proctor show`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use proctor_report::Table;
use proctor_runner::oracle::{OracleReport, OracleRequest};
use proctor_runner::oracle_summary::OracleSummary;
use proctor_runner::provision::{Images, Provisioned};
use proctor_runner::EngineOptions;
use proctor_store::Store;
use proctor_suite::Suite;

use crate::exit::{Error, Status};

/// What `validate --oracle` was asked beyond the suite and its images.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Asked<'a> {
    /// The store to keep the run in (`--store`; default: a temporary one).
    pub store: Option<&'a Path>,
    /// The suite's variant to use as the oracle (`--oracle-variant`).
    pub oracle: Option<&'a str>,
    /// Trials at once (`--jobs`; default: one per CPU).
    pub jobs: Option<u32>,
    /// Take up the newest oracle run of the suite in the store (`--resume`).
    pub resume: bool,
    /// Where the summary's JSON goes (`--json`).
    pub json: Option<&'a Path>,
    /// Build every image that has a `build` folder, even one that could be pulled (`--build`).
    pub build: bool,
}

/// Runs the oracle and the null agent on every task whose image can be had; exits 2 when the
/// rules cannot tell them apart or a task's image cannot be had. The tasks' images come from
/// `images` (`--config`, `--image-cache`), as for `run`.
pub(crate) fn run(suite: Suite, asked: Asked<'_>, images: Images<'_>) -> Result<Status, Error> {
    // A temporary store unless one is given; it is kept when a check fails (below).
    let mut temp = None;
    let store_dir = match asked.store {
        Some(d) => d.to_path_buf(),
        None => {
            let dir = tempfile::Builder::new()
                .prefix("proctor-oracle-")
                .tempdir()
                .context("cannot create a temporary store")?;
            let path = dir.path().to_path_buf();
            temp = Some(dir);
            path
        }
    };
    let store = Store::open(&store_dir).context("cannot open the store")?;
    let provisioned = provision(&suite, images, asked.build)?;
    let no_image: BTreeMap<String, String> = provisioned
        .failed
        .iter()
        .map(|(task, f)| (task.clone(), format!("image `{}`: {}", f.image, f.reason)))
        .collect();
    let options = EngineOptions {
        jobs: asked.jobs.map_or_else(
            || std::thread::available_parallelism().map_or(2, |n| n.get()),
            |j| j as usize,
        ),
        grace: Duration::from_secs(2),
        scratch: None,
        gateway: None,
        images: provisioned.images,
        browser: proctor_runner::access::browser_for(&suite, None)?,
    };
    let suite_id = suite.id().to_string();
    let request = OracleRequest {
        oracle: asked.oracle,
        resume: asked.resume,
        unavailable: &no_image,
    };
    let report = proctor_runner::oracle::run(suite, &store, request, &options)
        .map_err(proctor_runner::RunError::from)?;
    out_block!("{}", table(&report).text());
    print_unexpected(&report);
    let summary = OracleSummary::of(&suite_id, &report, provisioned.counts, &no_image);
    err_block!("\n{}\n", summary.text().trim_end());
    if let Some(path) = asked.json {
        write_json(path, &summary)?;
    }
    let failures = report.failures();
    if failures > 0 {
        // The evidence must outlive this command: a temporary store is kept.
        let kept: Option<PathBuf> = temp.map(tempfile::TempDir::keep);
        errln!(
            "\n{failures} oracle check(s) failed; the evidence is in {}",
            report.run_dir.display()
        );
        let example = report
            .unexpected
            .first()
            .map_or("TRIAL", |u| u.trial.as_str());
        errln!(
            "read a trial with: proctor show --store {} {} {example}",
            kept.as_deref().unwrap_or(store.root()).display(),
            report.run
        );
        return Ok(Status::Invalid);
    }
    errln!("every task's rules pass its oracle and fail the null agent");
    Ok(Status::Success)
}

/// Has the image of every task of `suite` that names one (building those that have a `build`
/// folder with `build`), saying each that was built and each that cannot be had.
fn provision(suite: &Suite, images: Images<'_>, build: bool) -> Result<Provisioned, Error> {
    let tasks: Vec<&str> = suite
        .file
        .tasks
        .iter()
        .map(|t| t.id.get_ref().as_str())
        .collect();
    let provisioned = proctor_runner::provision::each_task(suite, &tasks, images, build)?;
    for (task, image) in &provisioned.images {
        if let Some(note) = &image.note {
            errln!("task `{task}`: image `{}` {note}", image.reference);
        }
    }
    for (task, failure) in &provisioned.failed {
        errln!(
            "task `{task}`: image `{}` cannot be had, so the task does not run: {}",
            failure.image,
            failure.reason
        );
    }
    Ok(provisioned)
}

/// Writes the summary's JSON to `path`.
fn write_json(path: &Path, summary: &OracleSummary) -> Result<(), Error> {
    let mut text = serde_json::to_string_pretty(summary).map_err(anyhow::Error::new)?;
    text.push('\n');
    std::fs::write(path, text).map_err(|e| {
        Error::usage(
            format!("cannot write the summary to {}: {e}", path.display()),
            "pass --json FILE in a folder you can write",
        )
    })
}

/// A row per task and mutation: the two outcomes and the verdict.
fn table(report: &OracleReport) -> Table {
    let mut table = Table::new(&["TASK", "MUTATION", "ORACLE", "NULL AGENT", "VERDICT"]);
    for r in &report.rows {
        table.row([
            r.task.clone(),
            r.mutation.clone().unwrap_or_else(|| "-".to_string()),
            r.oracle.to_string(),
            r.null.to_string(),
            r.verdict.to_string(),
        ]);
    }
    table
}

/// Every trial that errored or did not do what it had to, with its reason.
fn print_unexpected(report: &OracleReport) {
    if report.unexpected.is_empty() {
        return;
    }
    errln!("\nerrored or unexpected trials:");
    for u in &report.unexpected {
        errln!("  {}: {}, expected {}", u.trial, u.outcome, u.expected);
        errln!("    reason: {}", u.reason);
    }
}
