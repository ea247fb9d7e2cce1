//! The plan: which trials a run executes, each with its hidden mutation.
//!
//! Trials are (task, variant, trial index). The mutation of a (task, trial index) is chosen by a
//! stable hash of (suite id, task id, trial index), so every variant of the same trial sees the
//! same mutation, and adding or removing a variant changes no choice.

use serde::{Deserialize, Serialize};

use crate::model::{Task, Variant};
use crate::suite::{MutationFile, Suite};
use crate::tree::{suite_hash, tree_hash};

/// The most trials per (task, variant) a suite (`development_trials`, `release_trials`) or
/// `run --trials` may ask for. Far beyond what anyone runs, and small enough that a typo (an
/// extra digit, `4294967295`) is refused instead of planned.
pub const MAX_TRIALS_PER_CELL: u32 = 100_000;

/// The most trials one run may plan in total (trials per cell × tasks × variants, after
/// `--model` matrices): the plan is held in memory before anything runs.
pub const MAX_PLANNED_TRIALS: u64 = 1_000_000;

/// How many trials per (task, variant) a run takes, by the suite's own settings: the trial
/// mode `run.json` records.
pub use proctor_records::run::TrialMode;

/// What the user asked to run.
#[derive(Debug, Clone, Default)]
pub struct PlanOptions {
    /// Overrides the trial mode's count.
    pub trials: Option<u32>,
    /// Which count to take from the suite.
    pub mode: TrialMode,
    /// Only these variants (all when empty).
    pub variants: Vec<String>,
    /// Only these tasks (all when empty).
    pub tasks: Vec<String>,
    /// The models of `proctor run --model` (`PROVIDER/MODEL`), applied to the suite with
    /// [`crate::Suite::apply_models`] before planning; empty keeps each variant's own.
    pub models: Vec<String>,
}

/// The hidden mutation chosen for a trial.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ChosenMutation {
    /// The patch's file name under `mutations/TASK_ID/`, or `as shipped` for the fixture as
    /// shipped (`[tasks.mutations] include_fixture = true`).
    pub name: String,
    /// BLAKE3 (hex) of the patch; empty for the fixture as shipped.
    pub hash: String,
    /// The fixture as shipped: no patch is applied. Written only when `true`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub as_shipped: bool,
}

/// The label of the fixture as shipped among a task's mutations.
pub const AS_SHIPPED: &str = "as shipped";

impl ChosenMutation {
    /// A patch under `mutations/TASK_ID/`.
    pub fn patch(file: &MutationFile) -> ChosenMutation {
        ChosenMutation {
            name: file.name.clone(),
            hash: file.hash.clone(),
            as_shipped: false,
        }
    }

    /// The fixture as shipped, with no patch.
    pub fn as_shipped() -> ChosenMutation {
        ChosenMutation {
            name: AS_SHIPPED.into(),
            hash: String::new(),
            as_shipped: true,
        }
    }

    /// The patch file's name, `None` for the fixture as shipped.
    pub fn patch_name(&self) -> Option<&str> {
        (!self.as_shipped).then_some(self.name.as_str())
    }
}

/// What the trials of `task` rotate over: each patch under `mutations/TASK_ID/` in name order,
/// then, with `[tasks.mutations] include_fixture = true`, the fixture as shipped. Empty when
/// the task has no patch.
pub fn mutation_choices(suite: &Suite, task: &Task) -> std::io::Result<Vec<ChosenMutation>> {
    let patches = suite.mutations(task.id.get_ref())?;
    let mut out: Vec<ChosenMutation> = patches.iter().map(ChosenMutation::patch).collect();
    if !out.is_empty() && task.mutations.as_ref().is_some_and(|m| m.include_fixture) {
        out.push(ChosenMutation::as_shipped());
    }
    Ok(out)
}

/// One trial of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlannedTrial {
    /// `TASK.VARIANT.INDEX`, unique within a run and usable as a folder name.
    pub id: String,
    /// The task id.
    pub task: String,
    /// The variant id.
    pub variant: String,
    /// 0-based trial index within (task, variant).
    pub index: u32,
    /// The hidden mutation, when the task has any.
    pub mutation: Option<ChosenMutation>,
    /// The trial's seed, from 0 to 2^53 - 1, derived from (suite id, task, variant, trial
    /// index) (see `docs/agents.md`), given to the agent as `PROCTOR_TRIAL_SEED` and to a
    /// `model_script`'s mock model. Absent in records made before trials had seeds.
    #[serde(default)]
    pub seed: Option<u64>,
}

/// Every trial a run executes, with the hashes that identify what they ran against.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    /// The suite's id.
    pub suite_id: String,
    /// BLAKE3 over the whole suite directory.
    pub suite_hash: String,
    /// BLAKE3 over the fixture's sorted walk.
    pub fixture_hash: String,
    /// The trial mode the count came from.
    pub trial_mode: TrialMode,
    /// Trials per (task, variant).
    pub trials_per_cell: u32,
    /// The trials, ordered by trial index, then task, then variant, so matched trials of
    /// different variants run close together in time.
    pub trials: Vec<PlannedTrial>,
}

/// Why a plan cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// `--variant` named a variant the suite does not have.
    #[error("no variant `{name}` in this suite (variants: {known})")]
    UnknownVariant {
        /// What was asked for.
        name: String,
        /// What exists.
        known: String,
    },
    /// `--task` named a task the suite does not have.
    #[error("no task `{name}` in this suite (tasks: {known})")]
    UnknownTask {
        /// What was asked for.
        name: String,
        /// What exists.
        known: String,
    },
    /// `--trials 0`.
    #[error("--trials must be at least 1")]
    ZeroTrials,
    /// More trials per (task, variant) than [`MAX_TRIALS_PER_CELL`].
    #[error("{trials} trials per (task, variant) is more than the {max} a run may take")]
    TooManyPerCell {
        /// What was asked for.
        trials: u32,
        /// [`MAX_TRIALS_PER_CELL`].
        max: u32,
    },
    /// More trials in total than [`MAX_PLANNED_TRIALS`].
    #[error(
        "{trials} trials per (task, variant) × {cells} (task, variant) pairs = {total} trials, more than the {max} a run may plan"
    )]
    TooManyPlanned {
        /// Trials per (task, variant).
        trials: u32,
        /// (task, variant) pairs selected.
        cells: u64,
        /// Their product.
        total: u64,
        /// [`MAX_PLANNED_TRIALS`].
        max: u64,
    },
    /// The selected variants run none of the selected tasks (each variant's `tasks`).
    #[error("no trial to run: {detail}")]
    NoTrials {
        /// Which variant runs which tasks.
        detail: String,
    },
    /// The suite could not be read while hashing it.
    #[error("cannot read the suite while hashing it: {0}")]
    Io(#[from] std::io::Error),
}

/// The index of the mutation chosen for (suite, task, trial index) among `count` patches.
pub fn choose_mutation(suite_id: &str, task_id: &str, index: u32, count: usize) -> Option<usize> {
    if count == 0 {
        return None;
    }
    let mut hasher = blake3::Hasher::new();
    hasher.update(b"proctor mutation v1\0");
    hasher.update(suite_id.as_bytes());
    hasher.update(b"\0");
    hasher.update(task_id.as_bytes());
    hasher.update(b"\0");
    hasher.update(&index.to_le_bytes());
    let digest = hasher.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest.as_bytes()[..8]);
    Some((u64::from_le_bytes(first) % count as u64) as usize)
}

/// The largest seed [`trial_seed`] gives: 2^53 - 1, so that the seed survives every JSON
/// reader (JavaScript and `jq` hold numbers as doubles) exactly.
pub const MAX_TRIAL_SEED: u64 = (1 << 53) - 1;

/// The seed of trial `index` of (`task_id`, `variant_id`) in suite `suite_id`: the first 8
/// bytes of a BLAKE3 hash of the four (a stable hash: the same on every machine and release),
/// kept to 53 bits ([`MAX_TRIAL_SEED`]). Different trial indices, tasks and variants get
/// different seeds; a rerun of the same trial gets the same one.
pub fn trial_seed(suite_id: &str, task_id: &str, variant_id: &str, index: u32) -> u64 {
    let mut hasher = blake3::Hasher::new();
    hasher.update(b"proctor trial seed v1\0");
    for part in [suite_id, task_id, variant_id] {
        hasher.update(&(part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hasher.update(&index.to_le_bytes());
    let digest = hasher.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest.as_bytes()[..8]);
    u64::from_le_bytes(first) & MAX_TRIAL_SEED
}

/// Builds the plan for `suite` under `options`.
pub fn plan(suite: &Suite, options: &PlanOptions) -> Result<Plan, PlanError> {
    check_names(suite, options)?;
    let trials = match options.trials {
        Some(0) => return Err(PlanError::ZeroTrials),
        Some(n) => n,
        None => match options.mode {
            TrialMode::Dev => suite.file.development_trials,
            TrialMode::Release => suite.file.release_trials,
        },
    };
    let selected = |list: &[String], id: &str| list.is_empty() || list.iter().any(|x| x == id);
    let tasks: Vec<_> = suite
        .file
        .tasks
        .iter()
        .filter(|t| selected(&options.tasks, t.id.get_ref()))
        .collect();
    let variants: Vec<_> = suite
        .file
        .variants
        .iter()
        .filter(|v| options.variants.is_empty() || options.variants.iter().any(|n| v.is_named(n)))
        .collect();
    // Bounded before anything is allocated for the trials.
    if trials > MAX_TRIALS_PER_CELL {
        return Err(PlanError::TooManyPerCell {
            trials,
            max: MAX_TRIALS_PER_CELL,
        });
    }
    let cells = tasks
        .iter()
        .map(|t| {
            variants
                .iter()
                .filter(|v| v.runs_task(t.id.get_ref()))
                .count() as u64
        })
        .sum::<u64>();
    if cells == 0 && !tasks.is_empty() {
        return Err(PlanError::NoTrials {
            detail: tasks_run_only(&variants),
        });
    }
    let total = cells.saturating_mul(u64::from(trials));
    if total > MAX_PLANNED_TRIALS {
        return Err(PlanError::TooManyPlanned {
            trials,
            cells,
            total,
            max: MAX_PLANNED_TRIALS,
        });
    }
    let planned = planned_trials(suite, &tasks, &variants, trials, total)?;
    Ok(Plan {
        suite_id: suite.id().to_string(),
        suite_hash: suite_hash(&suite.root)?,
        fixture_hash: tree_hash(&suite.fixture_dir())?,
        trial_mode: options.mode,
        trials_per_cell: trials,
        trials: planned,
    })
}

/// Every variant and task `options` names is one of the suite's.
fn check_names(suite: &Suite, options: &PlanOptions) -> Result<(), PlanError> {
    let known_variants = || {
        suite
            .file
            .variants
            .iter()
            .map(|v| v.id.get_ref().as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let known_tasks = || {
        suite
            .file
            .tasks
            .iter()
            .map(|t| t.id.get_ref().as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    for name in &options.variants {
        if !suite.file.variants.iter().any(|v| v.is_named(name)) {
            return Err(PlanError::UnknownVariant {
                name: name.clone(),
                known: known_variants(),
            });
        }
    }
    for name in &options.tasks {
        if suite.task(name).is_none() {
            return Err(PlanError::UnknownTask {
                name: name.clone(),
                known: known_tasks(),
            });
        }
    }
    Ok(())
}

/// Which tasks each variant is limited to, for the error of a selection that runs none.
fn tasks_run_only(variants: &[&Variant]) -> String {
    variants
        .iter()
        .map(|v| {
            let only = v
                .tasks
                .iter()
                .flatten()
                .map(|t| format!("`{}`", t.get_ref()))
                .collect::<Vec<_>>()
                .join(", ");
            format!("variant `{}` runs only task(s) {only}", v.id.get_ref())
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The trials, index by index, then task by task, then variant by variant, each with the
/// mutation chosen for its (task, index); `total` is their count.
fn planned_trials(
    suite: &Suite,
    tasks: &[&Task],
    variants: &[&Variant],
    trials: u32,
    total: u64,
) -> Result<Vec<PlannedTrial>, PlanError> {
    let mut mutations: Vec<Vec<ChosenMutation>> = Vec::new();
    for task in tasks {
        mutations.push(mutation_choices(suite, task)?);
    }
    let mut out = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    for index in 0..trials {
        for (task, choices) in tasks.iter().zip(&mutations) {
            let chosen = choose_mutation(suite.id(), task.id.get_ref(), index, choices.len())
                .map(|i| choices[i].clone());
            for variant in variants.iter().filter(|v| v.runs_task(task.id.get_ref())) {
                out.push(PlannedTrial {
                    id: format!("{}.{}.{}", task.id.get_ref(), variant.id.get_ref(), index),
                    task: task.id.get_ref().clone(),
                    variant: variant.id.get_ref().clone(),
                    index,
                    mutation: chosen.clone(),
                    seed: Some(trial_seed(
                        suite.id(),
                        task.id.get_ref(),
                        variant.id.get_ref(),
                        index,
                    )),
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn choice_is_stable() {
        let a = choose_mutation("s", "t", 3, 4);
        assert_eq!(a, choose_mutation("s", "t", 3, 4));
        assert_eq!(choose_mutation("s", "t", 3, 0), None);
    }

    #[test]
    fn seeds_are_stable_and_differ_by_index_task_and_variant() {
        let s = trial_seed("suite", "task", "a", 0);
        assert_eq!(s, trial_seed("suite", "task", "a", 0));
        // A fixed value: the derivation is part of the record format and must never drift.
        assert_eq!(s, 6_091_343_045_694_801);
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..1000 {
            let seed = trial_seed("suite", "task", "a", i);
            assert!(seed <= MAX_TRIAL_SEED);
            assert!(seen.insert(seed), "trial {i} repeats a seed");
        }
        assert_ne!(s, trial_seed("suite", "task", "b", 0));
        assert_ne!(s, trial_seed("suite", "other", "a", 0));
        assert_ne!(s, trial_seed("other", "task", "a", 0));
        // The parts are length-prefixed: moving a character between them changes the seed.
        assert_ne!(trial_seed("ab", "c", "a", 0), trial_seed("a", "bc", "a", 0));
    }

    proptest! {
        /// Over many trial indices every patch is chosen, and none far more than its share.
        #[test]
        fn choice_covers_every_patch_roughly_evenly(count in 1usize..8, task in "[a-z]{1,12}") {
            let trials = 400u32;
            let mut seen = vec![0u32; count];
            for i in 0..trials {
                let k = choose_mutation("suite", &task, i, count).unwrap();
                seen[k] += 1;
            }
            let share = f64::from(trials) / count as f64;
            for (k, n) in seen.iter().enumerate() {
                prop_assert!(*n > 0, "patch {k} never chosen: {seen:?}");
                prop_assert!(f64::from(*n) < share * 1.6 && f64::from(*n) > share * 0.4,
                    "patch {k} chosen {n} times, expected about {share}: {seen:?}");
            }
        }
    }
}
