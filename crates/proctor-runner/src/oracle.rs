//! The oracle check of a suite: proves its rules can pass and can fail.
//!
//! Every task runs with its oracle and with a null agent that does nothing, in real sandboxes.
//! The oracle is a scripted agent read from `agents/oracle/TASK_ID.toml`, whatever the suite's
//! variants say, unless a variant of the suite is named to be the oracle instead. Every hidden
//! mutation of a task gets its own trial. The oracle must reach the task's expected behaviour
//! and the null agent must not; otherwise the rules are not testing anything. [`run`] returns an
//! [`OracleReport`] with a row per task and mutation and every trial that errored or did not do
//! what was expected; the run stays in the store so its evidence can be read.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use proctor_score::OutcomeKind;
use proctor_store::{RunHandle, RunId, RunStatus, Store, StoreError, TrialSummary};
use proctor_suite::model::{AgentKind, Expect, Spanned, Variant};
use proctor_suite::plan::{mutation_choices, plan, Plan, PlanError};
use proctor_suite::{PlanOptions, Suite};

use crate::engine::{decide_isolation, execute, EngineError, EngineOptions, IsolationChoice, Job};
use crate::record::TrialRecord;
use crate::session::run_meta;

/// The id of the oracle built from `agents/oracle/`.
pub const ORACLE: &str = "__oracle";
/// The id of the null agent.
pub const NULL: &str = "__null";
/// Where the default oracle's scripts are, in the suite.
const ORACLE_SCRIPTS: &str = "agents/oracle";

/// Why the oracle check could not run.
#[derive(Debug, thiserror::Error)]
pub enum OracleError {
    /// The variant named as the oracle is not one of the suite's.
    #[error("suite `{suite}` has no variant `{name}`")]
    UnknownVariant {
        /// The suite's id.
        suite: String,
        /// The variant asked for.
        name: String,
        /// The suite's variants.
        known: Vec<String>,
    },
    /// Tasks without an oracle script in `agents/oracle/`.
    #[error("no oracle for task(s) {}", .0.join(", "))]
    MissingOracle(Vec<String>),
    /// The plan could not be made.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A task's mutations could not be read.
    #[error("cannot read the mutations")]
    Mutations(#[source] std::io::Error),
    /// The isolation could not be decided.
    #[error(transparent)]
    Isolation(EngineError),
    /// The run could not be created in the store.
    #[error("cannot create the oracle run")]
    Create(#[source] StoreError),
    /// The earlier oracle run could not be taken up (`--resume`): another process holds it,
    /// or it cannot be read.
    #[error("cannot resume the oracle run {run}: {source}")]
    Resume {
        /// The run.
        run: RunId,
        /// Why.
        #[source]
        source: StoreError,
    },
    /// The engine failed.
    #[error("the oracle run failed")]
    Engine(#[source] EngineError),
    /// `run.json` could not be rewritten.
    #[error("cannot update run.json")]
    Status(#[source] StoreError),
    /// The run's trials could not be read back.
    #[error("cannot read the oracle run")]
    Read(#[source] StoreError),
}

/// What one task and mutation's pair of trials showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OracleVerdict {
    /// The oracle met the task's expected behaviour and the null agent did not.
    Ok,
    /// The oracle did not meet it.
    OracleFails,
    /// The null agent met it too: the rules test nothing.
    NullPasses,
    /// A trial was not graded (errored or ungradeable).
    NotGraded,
    /// The task's image could not be had: no trial ran.
    NoImage,
}

impl OracleVerdict {
    /// The verdict of an oracle and a null trial, from whether each met the task's expected
    /// behaviour (`None`: not graded).
    pub fn of(oracle: Option<bool>, null: Option<bool>) -> OracleVerdict {
        match (oracle, null) {
            (Some(true), Some(false)) => OracleVerdict::Ok,
            (Some(false), _) => OracleVerdict::OracleFails,
            (Some(true), Some(true)) => OracleVerdict::NullPasses,
            _ => OracleVerdict::NotGraded,
        }
    }
}

impl fmt::Display for OracleVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OracleVerdict::Ok => "ok",
            OracleVerdict::OracleFails => "FAIL: the oracle does not pass",
            OracleVerdict::NullPasses => "FAIL: the null agent passes, so the rules test nothing",
            OracleVerdict::NotGraded => "FAIL: not graded",
            OracleVerdict::NoImage => "FAIL: its image could not be had",
        })
    }
}

/// One task and mutation: the two trials' outcomes and the verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OracleRow {
    /// The task.
    pub task: String,
    /// The hidden mutation of this trial index, if the task has any.
    pub mutation: Option<String>,
    /// The oracle's outcome (`errored` when its image could not be had and no trial ran).
    pub oracle: OutcomeKind,
    /// The null agent's outcome (as the oracle's).
    pub null: OutcomeKind,
    /// Whether the rules told them apart.
    pub verdict: OracleVerdict,
    /// Whether the oracle was graded and met the task's expected behaviour.
    pub oracle_passed: bool,
    /// Whether the null agent was graded and did not meet it.
    pub null_failed: bool,
    /// The kinds of error of the pair's errored trials (`environment` for an image that could
    /// not be had), each once.
    pub errors: Vec<String>,
}

/// A trial that errored or did not do what it had to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unexpected {
    /// The trial's id.
    pub trial: String,
    /// Its outcome.
    pub outcome: OutcomeKind,
    /// What it should have been.
    pub expected: String,
    /// Why it came out as it did.
    pub reason: String,
}

/// The result of the oracle check.
#[derive(Debug, Clone)]
pub struct OracleReport {
    /// The run that holds the evidence.
    pub run: RunId,
    /// Its folder.
    pub run_dir: PathBuf,
    /// One row per task and trial index, in the suite's task order.
    pub rows: Vec<OracleRow>,
    /// Every trial that errored or did not do what it had to.
    pub unexpected: Vec<Unexpected>,
    /// Whether the run was an earlier one, resumed.
    pub resumed: bool,
}

impl OracleReport {
    /// Rows whose verdict is not [`OracleVerdict::Ok`].
    pub fn failures(&self) -> usize {
        self.rows
            .iter()
            .filter(|r| r.verdict != OracleVerdict::Ok)
            .count()
    }
}

/// What an oracle check is asked to do beyond its suite and store.
#[derive(Debug, Clone, Copy)]
pub struct OracleRequest<'a> {
    /// The suite's variant to use as the oracle (default: the scripts in `agents/oracle/`).
    pub oracle: Option<&'a str>,
    /// Resume the newest oracle run of the same suite (same content hash and oracle) in the
    /// store, running only the trials it has not finished; a new run when there is none.
    pub resume: bool,
    /// The tasks whose image could not be had, with why: they get no trial, only a row.
    pub unavailable: &'a BTreeMap<String, String>,
}

/// Runs the oracle and the null agent on every task of `suite` (opened from an absolute path)
/// into a run of `store` (a new one, or with [`OracleRequest::resume`] the one resumed), except
/// the tasks whose image could not be had, which get a row saying so.
pub fn run(
    mut suite: Suite,
    store: &Store,
    request: OracleRequest<'_>,
    options: &EngineOptions,
) -> Result<OracleReport, OracleError> {
    let oracle = oracle_variant(&suite, request.oracle)?;
    let oracle_id = oracle.id.get_ref().clone();
    suite.file.variants = vec![oracle, script_variant(NULL, None)];
    let mut plan = oracle_plan(&suite)?;
    plan.trials
        .retain(|t| !request.unavailable.contains_key(&t.task));
    let (isolation, _) =
        decide_isolation(IsolationChoice::Auto, store.root()).map_err(OracleError::Isolation)?;
    let earlier = if request.resume {
        resumable(store, &plan.suite_hash, &oracle_id)?
    } else {
        None
    };
    let resumed = earlier.is_some();
    let run = match earlier {
        Some(run) => store
            .resume_run(&run)
            .map_err(|source| OracleError::Resume { run, source })?,
        None => {
            let meta = run_meta(
                &suite,
                &plan,
                isolation,
                proctor_records::run::RunMode::Oracle,
                None,
            );
            store.create_run(&meta).map_err(OracleError::Create)?
        }
    };
    let job = Job {
        suite: &suite,
        plan: &plan,
        run: &run,
        store_root: store.root(),
        isolation,
        results: None,
    };
    execute(job, options, &AtomicBool::new(false), &mut |_| {}).map_err(OracleError::Engine)?;
    run.set_status(RunStatus::Finished)
        .map_err(OracleError::Status)?;
    let (rows, unexpected) = judge(&suite, &plan, &run, &oracle_id, request.unavailable)?;
    Ok(OracleReport {
        run: run.id().clone(),
        run_dir: run.dir().to_path_buf(),
        rows,
        unexpected,
        resumed,
    })
}

/// The newest oracle run in `store` of the suite whose content hash is `suite_hash`, run with
/// the oracle `oracle_id`: the one `--resume` takes up.
fn resumable(
    store: &Store,
    suite_hash: &str,
    oracle_id: &str,
) -> Result<Option<RunId>, OracleError> {
    let runs = store.list_runs().map_err(OracleError::Read)?;
    Ok(runs
        .into_iter()
        .rev()
        .find(|r| {
            r.meta.trial_mode == proctor_records::run::RunMode::Oracle
                && r.meta.suite_hash == suite_hash
                && r.meta.variants.iter().all(|v| v == oracle_id || v == NULL)
        })
        .map(|r| r.id))
}

/// A script variant: with a script folder an oracle, without one the null agent (which does
/// nothing). Every other setting is what a suite's variant gets when it leaves it out.
fn script_variant(id: &str, script: Option<&str>) -> Variant {
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
        tasks: None,
        matrix_of: None,
    }
}

/// The oracle: the suite's variant `name`, or the scripts in `agents/oracle/`.
fn oracle_variant(suite: &Suite, name: Option<&str>) -> Result<Variant, OracleError> {
    if let Some(name) = name {
        return suite
            .variant(name)
            .cloned()
            .ok_or_else(|| OracleError::UnknownVariant {
                suite: suite.id().to_string(),
                name: name.to_string(),
                known: suite
                    .file
                    .variants
                    .iter()
                    .map(|v| v.id.get_ref().clone())
                    .collect(),
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
                .join(ORACLE_SCRIPTS)
                .join(format!("{t}.toml"))
                .is_file()
        })
        .collect();
    if !missing.is_empty() {
        return Err(OracleError::MissingOracle(missing));
    }
    Ok(script_variant(ORACLE, Some(ORACLE_SCRIPTS)))
}

/// Every task and variant once per hidden mutation of the task (the fixture as shipped being one
/// with `include_fixture`; once when it has none), trial
/// `i` of a task running its `i`-th mutation, so that every mutation gets its trial and none
/// twice.
fn oracle_plan(suite: &Suite) -> Result<Plan, OracleError> {
    let mut choices = std::collections::BTreeMap::new();
    for task in &suite.file.tasks {
        let of_task = mutation_choices(suite, task).map_err(OracleError::Mutations)?;
        choices.insert(task.id.get_ref().clone(), of_task);
    }
    let most_mutations = choices.values().map(Vec::len).max().unwrap_or(0).max(1);
    let options = PlanOptions {
        trials: Some(most_mutations as u32),
        ..PlanOptions::default()
    };
    let mut plan = plan(suite, &options)?;
    let mut kept = Vec::with_capacity(plan.trials.len());
    for mut t in std::mem::take(&mut plan.trials) {
        let of_task = choices.get(&t.task).map_or(&[][..], Vec::as_slice);
        if t.index as usize >= of_task.len().max(1) {
            continue;
        }
        if let Some(m) = of_task.get(t.index as usize) {
            t.mutation = Some(m.clone());
        }
        kept.push(t);
    }
    plan.trials = kept;
    Ok(plan)
}

/// The outcome a task's oracle must reach.
fn expected_outcome(expect: Expect) -> OutcomeKind {
    match expect {
        Expect::Complete => OutcomeKind::Completed,
        Expect::Refuse => OutcomeKind::RefusedHonestly,
        Expect::Ask => OutcomeKind::Asked,
    }
}

/// Reads the finished run back: a row per task and trial index, and every trial that errored
/// or did not do what it had to.
fn judge(
    suite: &Suite,
    plan: &Plan,
    run: &RunHandle,
    oracle_id: &str,
    unavailable: &BTreeMap<String, String>,
) -> Result<(Vec<OracleRow>, Vec<Unexpected>), OracleError> {
    let store = run.store();
    let trials = store.trials(run.id()).map_err(OracleError::Read)?;
    // The kind of error of an errored trial, from its record.
    let error_kind = |t: &TrialSummary| {
        if t.outcome != OutcomeKind::Errored {
            return None;
        }
        let kind = store
            .read_trial::<TrialRecord>(run.id(), &t.trial_id)
            .ok()
            .and_then(|f| match f.record.outcome {
                proctor_score::Outcome::Errored { kind } => Some(kind.as_str().to_string()),
                _ => None,
            });
        Some(kind.unwrap_or_else(|| "unknown".into()))
    };
    // Whether the trial met the task's expected behaviour; `None` when not graded.
    let success = |t: &TrialSummary| {
        if !t.outcome.is_graded() {
            return None;
        }
        store
            .read_trial::<TrialRecord>(run.id(), &t.trial_id)
            .ok()
            .and_then(|f| f.record.verdict)
            .map(|v| v.task_success)
    };
    let (mut rows, mut unexpected) = (Vec::new(), Vec::new());
    for task in &suite.file.tasks {
        let id = task.id.get_ref();
        let expected = expected_outcome(task.expect);
        if unavailable.contains_key(id) {
            rows.push(OracleRow {
                task: id.clone(),
                mutation: None,
                oracle: OutcomeKind::Errored,
                null: OutcomeKind::Errored,
                verdict: OracleVerdict::NoImage,
                oracle_passed: false,
                null_failed: false,
                errors: vec![proctor_score::ErrorKind::Environment.as_str().to_string()],
            });
            continue;
        }
        for index in 0..plan.trials_per_cell {
            let find = |v: &str| {
                trials
                    .iter()
                    .find(|t| &t.task == id && t.variant == v && t.trial_index == index)
            };
            let (Some(o), Some(n)) = (find(oracle_id), find(NULL)) else {
                continue;
            };
            let (oracle_ok, null_ok) = (success(o), success(n));
            if oracle_ok != Some(true) {
                unexpected.push(unexpected_trial(o, expected.to_string()));
            }
            if null_ok != Some(false) {
                unexpected.push(unexpected_trial(n, format!("anything but {expected}")));
            }
            let mutation = plan
                .trials
                .iter()
                .find(|t| &t.task == id && t.index == index)
                .and_then(|t| t.mutation.as_ref())
                .map(|m| m.name.clone());
            let mut errors: Vec<String> = [o, n].into_iter().filter_map(error_kind).collect();
            errors.dedup();
            rows.push(OracleRow {
                task: id.clone(),
                mutation,
                oracle: o.outcome,
                null: n.outcome,
                verdict: OracleVerdict::of(oracle_ok, null_ok),
                oracle_passed: oracle_ok == Some(true),
                null_failed: null_ok == Some(false),
                errors,
            });
        }
    }
    Ok((rows, unexpected))
}

fn unexpected_trial(t: &TrialSummary, expected: String) -> Unexpected {
    Unexpected {
        trial: t.trial_id.clone(),
        outcome: t.outcome,
        expected,
        reason: t
            .reason
            .clone()
            .unwrap_or_else(|| "(no reason recorded)".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_oracle_that_passes_beside_a_null_agent_that_fails_is_ok() {
        use OracleVerdict::*;
        assert_eq!(OracleVerdict::of(Some(true), Some(false)), Ok);
        assert_eq!(OracleVerdict::of(Some(false), Some(false)), OracleFails);
        assert_eq!(OracleVerdict::of(Some(false), None), OracleFails);
        assert_eq!(OracleVerdict::of(Some(true), Some(true)), NullPasses);
        assert_eq!(OracleVerdict::of(None, Some(false)), NotGraded);
        assert_eq!(OracleVerdict::of(Some(true), None), NotGraded);
    }

    #[test]
    fn the_null_agent_is_a_script_variant_without_a_script() {
        let null = script_variant(NULL, None);
        assert_eq!(null.id.get_ref(), NULL);
        assert_eq!(null.agent, AgentKind::Script);
        assert!(null.script.is_none() && null.env.is_empty() && null.allow.is_none());
        let oracle = script_variant(ORACLE, Some(ORACLE_SCRIPTS));
        assert_eq!(
            oracle.script.as_ref().map(|s| s.get_ref().as_str()),
            Some("agents/oracle")
        );
    }
}
