//! `proctor validate SUITE --oracle`: proves the suite's rules can pass and can fail.
//!
//! Every task runs with its oracle (`agents/oracle/TASK_ID.toml`, a scripted agent) and with a
//! null agent that does nothing, in real sandboxes. The oracle must reach the task's expected
//! behaviour and the null agent must not; otherwise the rules are not testing anything.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use proctor_runner::{decide_isolation, execute, EngineOptions, IsolationChoice};
use proctor_store::{HostInfo, RunMeta, RunStatus, Store};
use proctor_suite::model::{AgentKind, Variant};
use proctor_suite::{PlanOptions, Suite};
use toml::Spanned;

use crate::commands::run::make_plan;
use crate::exit::{Error, Status};
use crate::table::Table;

const ORACLE: &str = "__oracle";
const NULL: &str = "__null";

fn variant(id: &str, script: Option<&str>) -> Variant {
    Variant {
        id: Spanned::new(0..0, id.to_string()),
        agent: AgentKind::Script,
        model: None,
        purpose: None,
        prompt_prefix: None,
        prompt_suffix: None,
        files: Default::default(),
        script: script.map(|s| Spanned::new(0..0, s.to_string())),
        command: None,
        model_script: None,
        allow: None,
        env: Default::default(),
    }
}

/// Runs the oracle and the null agent on every task; exits 2 when the rules cannot tell them apart.
pub fn run(mut suite: Suite, store_dir: Option<&Path>) -> Result<Status, Error> {
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
            "write agents/oracle/TASK_ID.toml for each task: a scripted agent that does the task right",
        ));
    }
    suite.file.variants = vec![variant(ORACLE, Some("agents/oracle")), variant(NULL, None)];
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
    let temp;
    let store_dir = match store_dir {
        Some(d) => d.to_path_buf(),
        None => {
            temp = tempfile::tempdir().context("cannot create a temporary store")?;
            temp.path().to_path_buf()
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
        variants: vec![ORACLE.into(), NULL.into()],
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
    for task in &suite.file.tasks {
        let id = task.id.get_ref();
        for index in 0..plan.trials_per_cell {
            let find = |v: &str| {
                trials
                    .iter()
                    .find(|t| &t.task == id && t.variant == v && t.trial_index == index)
            };
            let (Some(o), Some(n)) = (find(ORACLE), find(NULL)) else {
                continue;
            };
            let record = |t: &proctor_store::TrialSummary| {
                store
                    .read_trial::<proctor_runner::TrialRecord>(run.id(), &t.trial_id)
                    .ok()
                    .and_then(|f| f.record.verdict)
                    .map(|v| v.task_success)
            };
            let (oracle_ok, null_ok) = (record(o), record(n));
            let verdict = match (oracle_ok, null_ok) {
                (Some(true), Some(false)) => "ok".to_string(),
                (Some(true), Some(true)) => {
                    "FAIL: the null agent passes, so the rules test nothing".to_string()
                }
                (Some(false), _) => format!(
                    "FAIL: the oracle does not pass ({})",
                    o.reason.clone().unwrap_or_default()
                ),
                _ => format!("FAIL: not graded ({} / {})", o.outcome, n.outcome),
            };
            if verdict != "ok" {
                failures += 1;
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
                verdict,
            ]);
        }
    }
    print!("{}", table.render());
    if failures > 0 {
        eprintln!(
            "{failures} oracle check(s) failed; evidence in {}",
            run.dir().display()
        );
        return Ok(Status::Invalid);
    }
    eprintln!("every task's rules pass its oracle and fail the null agent");
    Ok(Status::Success)
}
