//! The report stage's input: one row per trial, as the caller reads it from the store.

use proctor_score::TrialVerdict;
use proctor_suite::model::Expect;
use serde::{Deserialize, Serialize};

/// One scored trial with everything the report needs about it. The caller builds these from
/// the store; this crate never reads a file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialRow {
    /// The run the trial belongs to.
    pub run_id: String,
    /// The trial's id, unique within its run.
    pub trial_id: String,
    /// The task id.
    pub task: String,
    /// The variant id (the arm).
    pub variant: String,
    /// 0-based trial index within (task, variant); matched across variants and runs.
    pub trial_index: u32,
    /// The hidden mutation applied to the fixture, when the task has any.
    #[serde(default)]
    pub mutation: Option<Mutation>,
    /// The fixture's tree hash.
    pub fixture_hash: String,
    /// The suite's id.
    pub suite_id: String,
    /// The suite's content hash.
    pub suite_hash: String,
    /// The task's correct behaviour.
    #[serde(default)]
    pub expect: Expect,
    /// What scoring decided.
    pub verdict: TrialVerdict,
    /// Wall-clock seconds the agent ran.
    pub wall_seconds: f64,
    /// CPU seconds the agent's processes used, when measured.
    #[serde(default)]
    pub agent_cpu_seconds: Option<f64>,
    /// Model tokens by category, when the model gateway or the agent reported them.
    #[serde(default)]
    pub tokens: Option<Tokens>,
    /// Model requests made, when known.
    #[serde(default)]
    pub requests: Option<u64>,
    /// The money the trial cost.
    pub cost: Cost,
    /// The per-trial limit of the model gateway the trial reached (`tokens`, `cost_usd`,
    /// `requests`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_reached: Option<proctor_records::Limit>,
}

/// The hidden mutation a trial ran against.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Mutation {
    /// The patch's file name.
    pub name: String,
    /// The patch's content hash.
    pub hash: String,
}

/// Model tokens of one trial by category; each is `None` when it was not reported (never 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    /// Input (prompt) tokens, excluding cache reads.
    #[serde(default)]
    pub input: Option<u64>,
    /// Output (completion) tokens.
    #[serde(default)]
    pub output: Option<u64>,
    /// Tokens read from the provider's prompt cache.
    #[serde(default)]
    pub cache_read: Option<u64>,
    /// Tokens written to the provider's prompt cache.
    #[serde(default)]
    pub cache_write: Option<u64>,
}

impl Tokens {
    /// The `tokens` metric: input + output, known only when both are. Cache reads and writes
    /// are priced and reported apart and are not added in.
    pub fn input_output(&self) -> Option<u64> {
        Some(self.input?.saturating_add(self.output?))
    }
}

/// The money a trial cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Cost {
    /// Every price needed was known.
    Known {
        /// US dollars.
        usd: f64,
    },
    /// Some price was missing: the estimate is incomplete, never zero.
    Incomplete {
        /// The categories (or models) whose price was missing.
        missing: Vec<String>,
    },
    /// No price applies (a scripted agent, a human sitting).
    NotApplicable,
}
