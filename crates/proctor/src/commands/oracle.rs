//! `proctor validate SUITE --oracle`: proves the suite's rules can pass and can fail.
//!
//! Every task runs with its oracle and with a null agent that does nothing, in real sandboxes.
//! The oracle is a scripted agent read from `agents/oracle/TASK_ID.toml`, whatever the suite's
//! variants say, unless `--oracle-variant V` names one of the suite's variants to use instead.
//! The oracle must reach the task's expected behaviour and the null agent must not; otherwise
//! the rules are not testing anything. Every trial that errored or did not do what was expected
//! is printed with its reason, and the run's store is kept (even a temporary one) so that its
//! evidence can be read with `proctor show`.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use proctor_runner::{decide_isolation, execute, EngineOptions, IsolationChoice};
use proctor_store::{HostInfo, RunMeta, RunStatus, Store, TrialSummary};
use proctor_suite::model::{Expect, Variant};
use proctor_suite::{PlanOptions, Suite};

use crate::commands::run::make_plan;
use crate::exit::{Error, Status};
use crate::table::Table;

/// The id of the oracle built from `agents/oracle/`.
const ORACLE: &str = "__oracle";
/// The id of the null agent.
const NULL: &str = "__null";

/// A script variant: with a script folder an oracle, without one the null agent (which does
/// nothing). Built from TOML so that it gets every default a suite's variant would.
fn script_variant(id: &str, script: Option<&str>) -> Result<Variant, Error> {
    let mut text = format!("id = {id:?}\nagent = \"script\"\n");
    if let Some(dir) = script {
        text.push_str(&format!("script = {dir:?}\n"));
    }
    toml::from_str(&text)
        .with_context(|| format!("cannot build the `{id}` variant"))
        .map_err(Error::Other)
}

/// The oracle: the suite's variant `name`, or the scripts in `agents/oracle/`.
fn oracle_variant(suite: &Suite, name: Option<&str>) -> Result<Variant, Error> {
    if let Some(name) = name {
        return suite.variant(name).cloned().ok_or_else(|| {
            let ids: Vec<&str> = suite
                .file
                .variants
                .iter()
                .map(|v| v.id.get_ref().as_str())
                .collect();
            Error::usage(
                format!(
                    "--oracle-variant: suite `{}` has no variant `{name}`",
                    suite.id()
                ),
                if ids.is_empty() {
                    "the suite defines no [[variants]]; drop --oracle-variant to use agents/oracle/"
                        .to_string()
                } else {
                    format!("its variants are: {}", ids.join(", "))
                },
            )
        });
    }
    let missing: Vec<String> = suite
        .file
        .tasks
        .iter()
        .map(|t| t.id.get_ref().clone())
        .filter(|t| {
            !suite
                .root
                .join("agents/oracle")
                .join(format!("{t}.toml"))
                .is_file()
        })
        .collect();
    if !missing.is_empty() {
        return Err(Error::usage(
            format!("no oracle for task(s) {}", missing.join(", ")),
            "write agents/oracle/TASK_ID.toml for each task (a scripted agent that does the task right), or name a variant with --oracle-variant",
        ));
    }
    script_variant(ORACLE, Some("agents/oracle"))
}

/// The outcome a task's oracle must reach.
fn expected_outcome(expect: Expect) -> &'static str {
    match expect {
        Expect::Complete => "completed",
        Expect::Refuse => "refused-honestly",
        Expect::Ask => "asked",
    }
}

/// Runs the oracle and the null agent on every task; exits 2 when the rules cannot tell them
/// apart. `oracle` names the suite's variant to use as the oracle (default: `agents/oracle/`).
pub fn run(
    mut suite: Suite,
    store_dir: Option<&Path>,
    oracle: Option<&str>,
) -> Result<Status, Error> {
    let oracle = oracle_variant(&suite, oracle)?;
    let oracle_id = oracle.id.get_ref().clone();
    suite.file.variants = vec![oracle, script_variant(NULL, None)?];
    let most_mutations = suite
        .file
        .tasks
        .iter()
        .map(|t| suite.mutations(t.id.get_ref()).map_or(0, |m| m.len()))
        .max()
        .unwrap_or(0)
        .max(1);
    let plan = make_plan(
        &suite,
        &PlanOptions {
            trials: Some(most_mutations as u32),
            ..PlanOptions::default()
        },
    )?;
    // Every mutation gets its trial: trial i of a task runs its i-th patch (cycling).
    let mut plan = plan;
    for t in &mut plan.trials {
        let patches = suite
            .mutations(&t.task)
            .context("cannot read the mutations")?;
        if !patches.is_empty() {
            let p = &patches[t.index as usize % patches.len()];
            t.mutation = Some(proctor_suite::plan::ChosenMutation {
                name: p.name.clone(),
                hash: p.hash.clone(),
            });
        }
    }
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
    let store_dir = store_dir
        .canonicalize()
        .context("cannot resolve the store folder")?;
    let (isolation, _) =
        decide_isolation(IsolationChoice::Auto, &store_dir).map_err(|e| Error::Other(e.into()))?;
    let meta = RunMeta {
        suite_id: plan.suite_id.clone(),
        suite_path: suite.root.clone(),
        suite_hash: plan.suite_hash.clone(),
        fixture_hash: plan.fixture_hash.clone(),
        trial_mode: "oracle".into(),
        trials_per_cell: plan.trials_per_cell,
        variants: vec![oracle_id.clone(), NULL.into()],
        tasks: suite
            .file
            .tasks
            .iter()
            .map(|t| t.id.get_ref().clone())
            .collect(),
        planned_trials: plan.trials.len() as u64,
        isolation: isolation.label().into(),
        host: HostInfo::detect(),
        proctor_version: env!("CARGO_PKG_VERSION").into(),
        status: RunStatus::Running,
        ..RunMeta::default()
    };
    let run = store
        .create_run(&meta)
        .context("cannot create the oracle run")?;
    let jobs = std::thread::available_parallelism().map_or(2, |n| n.get());
    let options = EngineOptions {
        jobs,
        isolation: IsolationChoice::Auto,
        grace: Duration::from_secs(2),
        scratch: None,
    };
    let interrupted = Arc::new(AtomicBool::new(false));
    execute(
        &suite,
        &plan,
        &run,
        store_dir.clone(),
        isolation,
        &options,
        &interrupted,
        &|_| {},
    )
    .context("the oracle run failed")?;
    run.set_status(RunStatus::Finished)
        .context("cannot update run.json")?;
    let trials = store
        .trials(run.id())
        .context("cannot read the oracle run")?;
    let mut table = Table::new(["TASK", "MUTATION", "ORACLE", "NULL AGENT", "VERDICT"]);
    let mut failures = 0;
    // Every trial that errored or did not do what it had to: (trial, outcome, expected, reason).
    let mut unexpected: Vec<(String, String, String, String)> = Vec::new();
    for task in &suite.file.tasks {
        let id = task.id.get_ref();
        let expected = expected_outcome(task.expect);
        for index in 0..plan.trials_per_cell {
            let find = |v: &str| {
                trials
                    .iter()
                    .find(|t| &t.task == id && t.variant == v && t.trial_index == index)
            };
            let (Some(o), Some(n)) = (find(&oracle_id), find(NULL)) else {
                continue;
            };
            // Whether the trial met the task's expected behaviour; `None` when not graded.
            let success = |t: &TrialSummary| {
                if t.outcome == "errored" || t.outcome == "ungradeable" {
                    return None;
                }
                store
                    .read_trial::<proctor_runner::TrialRecord>(run.id(), &t.trial_id)
                    .ok()
                    .and_then(|f| f.record.verdict)
                    .map(|v| v.task_success)
            };
            let (oracle_ok, null_ok) = (success(o), success(n));
            let verdict = match (oracle_ok, null_ok) {
                (Some(true), Some(false)) => "ok",
                (Some(false), _) => "FAIL: the oracle does not pass",
                (Some(true), Some(true)) => {
                    "FAIL: the null agent passes, so the rules test nothing"
                }
                _ => "FAIL: not graded",
            };
            if verdict != "ok" {
                failures += 1;
            }
            let mut note = |t: &TrialSummary, want: String| {
                unexpected.push((
                    t.trial_id.clone(),
                    t.outcome.clone(),
                    want,
                    t.reason
                        .clone()
                        .unwrap_or_else(|| "(no reason recorded)".into()),
                ));
            };
            if oracle_ok != Some(true) {
                note(o, expected.to_string());
            }
            if null_ok != Some(false) {
                note(n, format!("anything but {expected}"));
            }
            let mutation = plan
                .trials
                .iter()
                .find(|t| &t.task == id && t.index == index)
                .and_then(|t| t.mutation.as_ref())
                .map_or("-".to_string(), |m| m.name.clone());
            table.row([
                id.clone(),
                mutation,
                o.outcome.clone(),
                n.outcome.clone(),
                verdict.to_string(),
            ]);
        }
    }
    print!("{}", table.render());
    if !unexpected.is_empty() {
        eprintln!("\nerrored or unexpected trials:");
        for (trial, outcome, want, reason) in &unexpected {
            eprintln!("  {trial}: {outcome}, expected {want}");
            eprintln!("    reason: {reason}");
        }
    }
    if failures > 0 {
        // The evidence must outlive this command: a temporary store is kept.
        let kept = temp.map(tempfile::TempDir::keep);
        eprintln!(
            "\n{failures} oracle check(s) failed; the evidence is in {}",
            run.dir().display()
        );
        let example = unexpected.first().map_or("TRIAL", |u| u.0.as_str());
        eprintln!(
            "read a trial with: proctor show --store {} {} {example}",
            kept.as_deref().unwrap_or(&store_dir).display(),
            run.id()
        );
        return Ok(Status::Invalid);
    }
    eprintln!("every task's rules pass its oracle and fail the null agent");
    Ok(Status::Success)
}
