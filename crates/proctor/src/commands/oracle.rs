//! `proctor validate SUITE --oracle`: proves the suite's rules can pass and can fail.
//!
//! Every task runs with its oracle and with a null agent that does nothing, in real sandboxes
//! ([`proctor_runner::oracle`]). The oracle is a scripted agent read from
//! `agents/oracle/TASK_ID.toml`, whatever the suite's variants say, unless `--oracle-variant V`
//! names one of the suite's variants to use instead. Every trial that errored or did not do what
//! was expected is printed with its reason, and the run's store is kept (even a temporary one)
//! so that its evidence can be read with `proctor show`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use proctor_report::Table;
use proctor_runner::oracle::OracleReport;
use proctor_runner::EngineOptions;
use proctor_store::Store;
use proctor_suite::Suite;

use crate::exit::{Error, Status};

/// Runs the oracle and the null agent on every task; exits 2 when the rules cannot tell them
/// apart. `oracle` names the suite's variant to use as the oracle (default: `agents/oracle/`);
/// the tasks' images come from `images` (`--config`, `--image-cache`), as for `run`.
pub(crate) fn run(
    suite: Suite,
    store_dir: Option<&Path>,
    oracle: Option<&str>,
    images: proctor_runner::provision::Images<'_>,
) -> Result<Status, Error> {
    // A temporary store unless one is given; it is kept when a check fails (below).
    let mut temp = None;
    let store_dir = match store_dir {
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
    let tasks: Vec<&str> = suite
        .file
        .tasks
        .iter()
        .map(|t| t.id.get_ref().as_str())
        .collect();
    let images = proctor_runner::provision::for_tasks(&suite, &tasks, images.config, images.cache)?;
    let options = EngineOptions {
        jobs: std::thread::available_parallelism().map_or(2, |n| n.get()),
        grace: Duration::from_secs(2),
        scratch: None,
        gateway: None,
        images,
        browser: proctor_runner::access::browser_for(&suite, None)?,
    };
    let report = proctor_runner::oracle::run(suite, &store, oracle, &options)
        .map_err(proctor_runner::RunError::from)?;
    out!("{}", table(&report).text());
    print_unexpected(&report);
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
