//! Comparing two arms trial by trial: two runs, or two variants of one run.
//!
//! Trials are matched by (task, trial index, mutation, fixture hash). The comparison refuses,
//! with the reason, when the suites differ, when the fixture differs, or when a matched pair ran
//! against different hidden mutations. Trials of one arm with no partner in the other are listed
//! in [`Comparison::unmatched`], never dropped silently; every number of the comparison is taken
//! over the matched trials only, so both arms answer the same tasks and trial indices.
//!
//! Per task and overall, each arm gets every rate as k/n, pass@k and pass^k, and the median,
//! mean and total of every per-trial metric with their n. The matched differences (b − a) on success, failure, wrong turns, calls, tokens and
//! wall time are taken over the pairs where both trials were graded (and, for a metric, both
//! reported it): the difference of the two arms' rates, or of the two arms' medians, over those
//! same pairs.
//!
//! A direction (`better` or `worse`) needs both arms at graded n ≥ `underpowered_below` AND the
//! matched pairs lopsided beyond what fair coin flips give: the exact two-sided sign test at 5%
//! ([`crate::stats::sign_test_critical`]). For success and failure the pairs counted are the
//! discordant ones ([`Discordance`]: one arm succeeded, the other did not); for a metric, the
//! pairs where both reported it and the values differ (ties dropped). With N such pairs a
//! direction needs at least K of the N on one side; fewer is `no clear difference`, with the
//! counts. Below the threshold, or with N ≤ 5 (where even N of N is within what fair coins give),
//! it is `underpowered`, by name, never "no effect". A difference that reads as zero (equal
//! rates or medians, or under [`SAME_WALL_SECONDS`] of median wall time) is `same` at or above
//! the threshold unless the pairs are lopsided. Success is compared first; wrong turns (fewer is
//! better) decide only when success is `same`.
//!
//! There are no p-values and no confidence intervals, deliberately.

use std::collections::{BTreeMap, BTreeSet};

use proctor_score::OutcomeKind;
use proctor_suite::model::ReportConfig;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::aggregate::{first_seen, Cell, ExpectedBehaviour};
use crate::input::{Mutation, TrialRow};
use crate::provenance::{Provenance, Warning, WarningKind};
use crate::side::Side;
use crate::stats::{pass_at_k, pass_pow_k, relative, Median, SignTest};
use crate::SCHEMA_VERSION;

/// A difference in median wall seconds smaller than this is no difference: reports show
/// seconds to 0.01, so anything smaller would read `+0` beside `better` or `worse`.
pub const SAME_WALL_SECONDS: f64 = 0.005;
/// Differences of counts and rates smaller than this are floating-point noise, i.e. zero.
const SAME_EXACT: f64 = 1e-9;

/// Why two arms cannot be compared.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CompareError {
    /// An arm has no trials.
    #[error("cannot compare: arm {side:?} has no trials")]
    EmptyArm {
        /// The empty arm.
        side: Side,
    },
    /// The trials come from different suites.
    #[error("cannot compare unlike suites: `{a}` and `{b}`")]
    DifferentSuites {
        /// A suite id of arm A.
        a: String,
        /// A different suite id (of arm B, or of arm A itself).
        b: String,
    },
    /// The arms ran against different fixture states.
    #[error("cannot compare different fixture states ({detail}): A has `{a}`, B has `{b}`")]
    FixtureMismatch {
        /// Where the difference was found.
        detail: String,
        /// Arm A's fixture hash(es).
        a: String,
        /// Arm B's fixture hash(es).
        b: String,
    },
    /// A matched pair ran against different hidden mutations.
    #[error(
        "cannot compare task `{task}` trial {trial_index}: A ran mutation {a}, B ran mutation {b}"
    )]
    MutationMismatch {
        /// The task id.
        task: String,
        /// The trial index.
        trial_index: u32,
        /// Arm A's mutation (`name@hash`, or `none`).
        a: String,
        /// Arm B's mutation.
        b: String,
    },
    /// One arm holds two trials for the same (task, trial index): it mixes variants or runs.
    #[error(
        "arm {side:?} holds two trials of task `{task}` trial {trial_index} (`{first}` and `{second}`); select one variant of one run per arm"
    )]
    AmbiguousArm {
        /// The arm.
        side: Side,
        /// The task id.
        task: String,
        /// The trial index.
        trial_index: u32,
        /// The first trial id.
        first: String,
        /// The second trial id.
        second: String,
    },
}

/// How to compare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompareOptions {
    /// An arm with fewer graded trials than this makes the verdict `underpowered`.
    pub underpowered_below: u32,
    /// A name for arm A; by default `RUN/VARIANT`.
    pub label_a: Option<String>,
    /// A name for arm B; by default `RUN/VARIANT`.
    pub label_b: Option<String>,
    /// The variants that run only some tasks (a variant's `tasks` in the suite), by id: they
    /// say why a task only one arm ran is left out.
    pub variant_tasks: BTreeMap<String, Vec<String>>,
}

impl CompareOptions {
    /// These options, with the `tasks` of `suite`'s variants that have one.
    pub fn with_variant_tasks(mut self, suite: &proctor_suite::model::SuiteFile) -> Self {
        self.variant_tasks = suite
            .variants
            .iter()
            .filter_map(|v| {
                let tasks = v.tasks.as_ref()?;
                Some((
                    v.id.get_ref().clone(),
                    tasks.iter().map(|t| t.get_ref().clone()).collect(),
                ))
            })
            .collect();
        self
    }
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions::from(&ReportConfig::default())
    }
}

impl From<&ReportConfig> for CompareOptions {
    fn from(c: &ReportConfig) -> Self {
        CompareOptions {
            underpowered_below: c.underpowered_below,
            label_a: None,
            label_b: None,
            variant_tasks: BTreeMap::new(),
        }
    }
}

/// What an arm is made of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ArmInfo {
    /// The arm's name.
    pub label: String,
    /// Runs its trials come from.
    pub run_ids: Vec<String>,
    /// Variants its trials come from.
    pub variants: Vec<String>,
    /// Suite content hashes its trials were run with.
    pub suite_hashes: Vec<String>,
    /// Trials given for the arm (matched and unmatched).
    pub trials: u64,
}

/// A trial with no partner in the other arm.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Unmatched {
    /// The arm it belongs to.
    pub side: Side,
    /// The run id.
    pub run_id: String,
    /// The trial id.
    pub trial_id: String,
    /// The task id.
    pub task: String,
    /// The variant id.
    pub variant: String,
    /// The trial index.
    pub trial_index: u32,
    /// The outcome label.
    #[schemars(with = "String")]
    pub outcome: OutcomeKind,
}

/// One arm's trial of a matched pair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PairTrial {
    /// The run id.
    pub run_id: String,
    /// The trial id.
    pub trial_id: String,
    /// The outcome label.
    #[schemars(with = "String")]
    pub outcome: OutcomeKind,
    /// Whether it was a task success; `null` when it was not graded (errored, ungradeable).
    pub success: Option<bool>,
}

/// Two trials matched by task and trial index: what every number of the comparison is made of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MatchedPair {
    /// The task id.
    pub task: String,
    /// The trial index.
    pub trial_index: u32,
    /// Arm A's trial.
    pub a: PairTrial,
    /// Arm B's trial.
    pub b: PairTrial,
}

impl MatchedPair {
    /// Whether the pair is discordant: graded in both arms, a success in exactly one (the pairs
    /// [`Discordance`] counts as `a_only` and `b_only`).
    pub fn is_discordant(&self) -> bool {
        matches!((self.a.success, self.b.success), (Some(a), Some(b)) if a != b)
    }
}

/// A task only one arm ran: none of its trials is in the comparison.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LeftOutTask {
    /// The task id.
    pub task: String,
    /// The arm that ran it.
    pub ran_in: Side,
    /// Its trials in that arm (each also in `unmatched`).
    pub trials: u64,
    /// Why the other arm has none: the variant's `tasks` leave it out, or no trial of it
    /// finished there.
    pub why: String,
}

/// One value of pass@k or pass^k.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PassK {
    /// k.
    pub k: u32,
    /// The estimate (0..1), the mean over tasks; `null` when no task could be estimated.
    pub value: Option<f64>,
    /// Tasks averaged over.
    pub tasks: u64,
}

/// One arm's numbers in a comparison cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ArmStats {
    /// Rates (k/n), outcome counts, medians and ledgers over the arm's matched trials.
    pub cell: Cell,
    /// pass@k for k = 1..=`pass_k_max` (unbiased estimator 1 − C(n−c,k)/C(n,k)).
    pub pass_at_k: Vec<PassK>,
    /// pass^k for k = 1..=`pass_k_max` (estimator C(c,k)/C(n,k)).
    pub pass_pow_k: Vec<PassK>,
}

/// How one compared quantity changed from arm A to arm B.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Assessment {
    /// B is better: both arms at or above the power threshold, and the pairs lopsided beyond
    /// the sign test's critical count.
    Better,
    /// B is worse: both arms at or above the power threshold, and the pairs lopsided beyond
    /// the sign test's critical count.
    Worse,
    /// No difference: equal rates or medians, and the pairs not lopsided (both arms at or above
    /// the power threshold).
    Same,
    /// A difference, but the pairs are not lopsided beyond what fair coin flips give (fewer
    /// than the critical count on either side): not a direction.
    NoClearDifference,
    /// Below the power threshold, or so few differing pairs (N ≤ 5) that even all of them on
    /// one side would say nothing: which is not "no effect".
    Underpowered,
    /// Not measured in both arms of any matched pair.
    NotMeasured,
}

impl Assessment {
    /// The label used in human-readable reports (words; JSON has the snake_case value).
    pub fn as_str(self) -> &'static str {
        match self {
            Assessment::Better => "better",
            Assessment::Worse => "worse",
            Assessment::Same => "same",
            Assessment::NoClearDifference => "no clear difference",
            Assessment::Underpowered => "underpowered",
            Assessment::NotMeasured => "not measured",
        }
    }
}

/// A matched difference b − a.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Change {
    /// Arm A's value over the pairs used; `null` when n = 0.
    pub a: Option<f64>,
    /// Arm B's value over the same pairs; `null` when n = 0.
    pub b: Option<f64>,
    /// Matched pairs used.
    pub n: u64,
    /// b − a; `null` when n = 0.
    pub difference: Option<f64>,
    /// (b − a) / a; `null` when n = 0 or a is exactly 0.
    pub relative: Option<f64>,
    /// True when a is exactly 0 and b is not: the relative change has no finite value.
    pub relative_unbounded: bool,
    /// Pairs where B's value is above A's (for success: B succeeded and A did not; for
    /// failure: B failed and A did not). The sign test counts these against `b_lower`.
    #[serde(default)]
    pub b_higher: u64,
    /// Pairs where B's value is below A's. Pairs with equal values (ties) are in neither count.
    #[serde(default)]
    pub b_lower: u64,
    /// The sign test's critical count for `b_higher + b_lower` pairs: a direction needs at
    /// least this many on one side. `null` when there are 5 or fewer such pairs (even all of
    /// them on one side is within what fair coin flips give at 5%).
    #[serde(default)]
    pub needs: Option<u64>,
    /// What the difference says, given the power threshold and the sign test.
    pub assessment: Assessment,
}

/// What kind of quantity a change is about, for its direction and what counts as zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Quantity {
    /// Higher is better (success).
    HigherRate,
    /// Lower is better (failure, wrong turns, calls, tokens).
    Lower,
    /// Lower is better; under [`SAME_WALL_SECONDS`] is no difference (wall time).
    Seconds,
}

impl Quantity {
    /// Whether a difference `d` (b − a, of two pairs' values or of two summaries) reads as 0.
    fn is_zero(self, d: f64) -> bool {
        d.abs()
            < if self == Quantity::Seconds {
                SAME_WALL_SECONDS
            } else {
                SAME_EXACT
            }
    }

    /// Pairs where B is above A and where B is below A, of `pairs` (a, b); ties dropped.
    fn signs(self, pairs: impl IntoIterator<Item = (f64, f64)>) -> (u64, u64) {
        pairs.into_iter().fold((0, 0), |(up, down), (a, b)| {
            let d = b - a;
            if self.is_zero(d) {
                (up, down)
            } else if d > 0.0 {
                (up + 1, down)
            } else {
                (up, down + 1)
            }
        })
    }
}

impl Change {
    /// A change that was not measured (no pair reported the quantity).
    pub(crate) fn not_measured() -> Change {
        Change::new((None, None), 0, (0, 0), Quantity::Lower, false)
    }

    /// The change from `a` to `b` over `n` pairs, of which `b_higher` had B's value above A's
    /// and `b_lower` below (ties in neither).
    pub(crate) fn new(
        (a, b): (Option<f64>, Option<f64>),
        n: u64,
        (b_higher, b_lower): (u64, u64),
        q: Quantity,
        powered: bool,
    ) -> Change {
        let (Some(va), Some(vb)) = (a, b) else {
            return Change {
                a,
                b,
                n,
                difference: None,
                relative: None,
                relative_unbounded: false,
                b_higher,
                b_lower,
                needs: None,
                assessment: Assessment::NotMeasured,
            };
        };
        let d = vb - va;
        let (rel, unbounded) = relative(va, vb);
        let test = SignTest::of(b_higher, b_lower);
        Change {
            a,
            b,
            n,
            difference: Some(d),
            relative: rel,
            relative_unbounded: unbounded,
            b_higher,
            b_lower,
            needs: test.needs(),
            assessment: assess(d, test, q, powered),
        }
    }
}

/// The assessment of a difference `d` (b − a) whose pairs gave `test`.
fn assess(d: f64, test: SignTest, q: Quantity, powered: bool) -> Assessment {
    if !powered {
        // Below the threshold nothing is said, whatever the difference.
        return Assessment::Underpowered;
    }
    let zero = q.is_zero(d);
    match test {
        SignTest::Clear { higher, .. } => {
            // The summary must read the way the pairs lean: a lopsided sign test under a zero
            // (or opposite) difference of medians is no direction a reader could see.
            if zero || (d > 0.0) != higher {
                Assessment::NoClearDifference
            } else if higher == (q == Quantity::HigherRate) {
                Assessment::Better
            } else {
                Assessment::Worse
            }
        }
        _ if zero => Assessment::Same,
        SignTest::NotClear { .. } => Assessment::NoClearDifference,
        SignTest::NoPairs | SignTest::TooFew => Assessment::Underpowered,
    }
}

/// The matched differences of a comparison cell.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Differences {
    /// Success rate (fraction 0..1) over pairs graded in both arms.
    pub success: Change,
    /// Failure rate (fraction 0..1) over pairs graded in both arms.
    pub failure: Change,
    /// Median wrong turns over pairs where both reported interface metrics.
    pub wrong_turns: Change,
    /// Median calls over pairs where both reported interface metrics.
    pub calls: Change,
    /// Median asks (the agent's questions to the person) over pairs where both reported
    /// interface metrics; not measured in comparisons written before asks were counted.
    #[serde(default = "Change::not_measured")]
    pub asks: Change,
    /// Median input + output tokens over pairs where both reported them.
    pub tokens: Change,
    /// Median wall seconds over pairs graded in both arms.
    pub wall_seconds: Change,
}

/// The matched pairs graded in both arms, counted by which arm's trial was a task success: the
/// discordant pairs (one arm succeeded, the other did not) are where the arms differ, and the
/// concordant ones where they agree. Plain counts a reader can check trial by trial; no test
/// statistic and no p-value is made of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Discordance {
    /// Pairs where A's trial succeeded and B's did not.
    pub a_only: u64,
    /// Pairs where B's trial succeeded and A's did not.
    pub b_only: u64,
    /// Pairs where both trials succeeded.
    pub both: u64,
    /// Pairs where neither trial succeeded.
    pub neither: u64,
    /// Pairs graded in both arms: a_only + b_only + both + neither.
    pub n: u64,
}

impl Discordance {
    /// The counts of `pairs` (a, b), each pair given as whether A's and B's trial succeeded.
    pub fn of(pairs: impl IntoIterator<Item = (bool, bool)>) -> Discordance {
        let mut d = Discordance::default();
        for (a, b) in pairs {
            match (a, b) {
                (true, false) => d.a_only += 1,
                (false, true) => d.b_only += 1,
                (true, true) => d.both += 1,
                (false, false) => d.neither += 1,
            }
            d.n += 1;
        }
        d
    }

    /// The discordant pairs: a_only + b_only.
    pub fn discordant(&self) -> u64 {
        self.a_only + self.b_only
    }

    /// The concordant pairs: both + neither.
    pub fn concordant(&self) -> u64 {
        self.both + self.neither
    }
}

/// The verdict of a comparison cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ComparisonVerdict {
    /// B is better: success better beyond noise (the sign test on the discordant pairs), or
    /// the same success and fewer wrong turns beyond noise.
    Better,
    /// B is worse: success worse beyond noise, or the same success and more wrong turns beyond
    /// noise.
    Worse,
    /// The same success and the same wrong turns, with both arms at or above the power
    /// threshold.
    Same,
    /// The arms differ, but by no more than fair coin flips give: the discordant pairs (or the
    /// wrong-turn pairs) are short of the sign test's critical count on either side.
    NoClearDifference,
    /// An arm has fewer graded trials than the power threshold, or too few pairs differ (5 or
    /// fewer) for any count to be beyond noise: nothing is concluded.
    Underpowered,
}

impl ComparisonVerdict {
    /// The label used in human-readable reports (words; JSON has the snake_case value).
    pub fn as_str(self) -> &'static str {
        match self {
            ComparisonVerdict::Better => "better",
            ComparisonVerdict::Worse => "worse",
            ComparisonVerdict::Same => "same",
            ComparisonVerdict::NoClearDifference => "no clear difference",
            ComparisonVerdict::Underpowered => "underpowered",
        }
    }
}

/// Both arms on one task, or overall.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ComparisonCell {
    /// Arm A.
    pub a: ArmStats,
    /// Arm B.
    pub b: ArmStats,
    /// Matched pairs in the cell.
    pub pairs: u64,
    /// Whether both arms have graded n at or above the power threshold.
    pub powered: bool,
    /// The matched differences b − a.
    pub differences: Differences,
    /// The pairs graded in both arms by which arm succeeded. Absent (all 0) in comparisons of
    /// schema version 1.
    #[serde(default)]
    pub discordance: Discordance,
    /// The verdict.
    pub verdict: ComparisonVerdict,
    /// Why, in one line with the numbers.
    pub reason: String,
}

/// One task's comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskComparison {
    /// The task id.
    pub task: String,
    /// Its correct behaviour.
    pub expect: ExpectedBehaviour,
    /// The comparison.
    pub comparison: ComparisonCell,
}

/// A trial-by-trial comparison of two arms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Comparison {
    /// The version of this document's shape.
    pub schema_version: u32,
    /// The suite id.
    pub suite_id: String,
    /// Arm A (the reference).
    pub a: ArmInfo,
    /// Arm B.
    pub b: ArmInfo,
    /// The power threshold: an arm with fewer graded trials makes a verdict `underpowered`.
    pub underpowered_below: u32,
    /// The largest k of pass@k and pass^k: the smallest graded trials per task of either arm.
    pub pass_k_max: u32,
    /// How many of the largest k values are left out of every `pass_at_k` and `pass_pow_k`
    /// (`compare --pass-k-max`): they list k = 1..=`pass_k_max` − this. Absent when none is.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pass_k_left_out: u32,
    /// Matched pairs.
    pub matched: u64,
    /// Trials with no partner in the other arm; in no number of the comparison.
    pub unmatched: Vec<Unmatched>,
    /// Tasks only one arm ran, with why: the comparison matches the shared tasks alone.
    /// Absent when both arms ran the same tasks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<LeftOutTask>,
    /// Things a reader should know, each by kind with its sentence: runs left out, arms scored
    /// or run under different suite versions, unmatched trials, tasks only one arm ran.
    pub warnings: Vec<Warning>,
    /// Where each arm comes from (run, variant, scoring, suite hashes) and the runs of the
    /// suite it leaves out; absent when the caller did not read the store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
    /// Over every matched pair.
    pub overall: ComparisonCell,
    /// Every matched pair, in arm A's order, with both trials' outcomes: which pairs differ.
    /// Absent in comparisons made before it was recorded.
    #[serde(default)]
    pub pairs: Vec<MatchedPair>,
    /// Per task, in the order first seen in arm A.
    pub tasks: Vec<TaskComparison>,
}

/// How many values of k `compare` lists by default (`--pass-k-max`): pass@1..pass@5 and
/// pass^1..pass^5 per task and overall.
pub const DEFAULT_PASS_K_SHOWN: u32 = 5;

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Comparison {
    /// Lists pass@k and pass^k only for k ≤ `k`, and records how many values of k are left
    /// out (`pass_k_left_out`). The other numbers are untouched.
    pub fn cap_pass_k(&mut self, k: u32) {
        let shown = k.min(self.pass_k_max);
        self.pass_k_left_out = self.pass_k_max - shown;
        let cells = std::iter::once(&mut self.overall)
            .chain(self.tasks.iter_mut().map(|t| &mut t.comparison));
        for cell in cells {
            for arm in [&mut cell.a, &mut cell.b] {
                arm.pass_at_k.retain(|p| p.k <= shown);
                arm.pass_pow_k.retain(|p| p.k <= shown);
            }
        }
    }
}

type Key<'a> = (&'a str, u32);

fn mutation_label(m: Option<&Mutation>) -> String {
    m.map_or_else(
        || "none".to_string(),
        // The fixture as shipped, one of a task's choices, has no patch and no hash.
        |m| match m.hash.as_str() {
            "" => format!("`{}`", m.name),
            hash => format!("`{}`@{hash}", m.name),
        },
    )
}

fn index<'a>(
    rows: &'a [TrialRow],
    side: Side,
) -> Result<BTreeMap<Key<'a>, &'a TrialRow>, CompareError> {
    let mut map: BTreeMap<Key<'a>, &'a TrialRow> = BTreeMap::new();
    for r in rows {
        if let Some(prev) = map.insert((r.task.as_str(), r.trial_index), r) {
            return Err(CompareError::AmbiguousArm {
                side,
                task: r.task.clone(),
                trial_index: r.trial_index,
                first: prev.trial_id.clone(),
                second: r.trial_id.clone(),
            });
        }
    }
    Ok(map)
}

fn distinct<'a>(rows: &'a [TrialRow], f: impl Fn(&'a TrialRow) -> &'a str) -> Vec<String> {
    first_seen(rows.iter().map(|r| (f(r).to_string(), ())))
        .into_iter()
        .map(|x| x.0)
        .collect()
}

fn arm_info(rows: &[TrialRow], label: Option<&String>) -> ArmInfo {
    let run_ids = distinct(rows, |r| &r.run_id);
    let variants = distinct(rows, |r| &r.variant);
    let label = label
        .cloned()
        .unwrap_or_else(|| format!("{}/{}", run_ids.join("+"), variants.join("+")));
    ArmInfo {
        label,
        run_ids,
        variants,
        suite_hashes: distinct(rows, |r| &r.suite_hash),
        trials: rows.len() as u64,
    }
}

/// Compares arm `b` against arm `a` trial by trial (differences are b − a).
pub fn compare(
    a: &[TrialRow],
    b: &[TrialRow],
    opts: &CompareOptions,
) -> Result<Comparison, CompareError> {
    let suite = check_comparable(a, b)?;
    let Matching { pairs, unmatched } = match_trials(a, b)?;
    let info_a = arm_info(a, opts.label_a.as_ref());
    let info_b = arm_info(b, opts.label_b.as_ref());
    let left_out = left_out(a, b, opts);
    let mut warnings = warnings(&info_a, &info_b, &unmatched);
    warnings.extend(left_out.iter().map(|l| {
        Warning::new(
            WarningKind::TaskLeftOut,
            format!(
                "task `{}` is left out: only arm {:?} ran it ({} trial(s)); {}",
                l.task, l.ran_in, l.trials, l.why
            ),
        )
    }));

    let tasks: Vec<(String, ExpectedBehaviour)> =
        first_seen(pairs.iter().map(|(ra, _)| (ra.task.clone(), ra.expect)))
            .into_iter()
            .map(|(t, e)| (t, e.into()))
            .collect();
    let by_task: Vec<Vec<(&TrialRow, &TrialRow)>> = tasks
        .iter()
        .map(|(t, _)| {
            pairs
                .iter()
                .copied()
                .filter(|(ra, _)| &ra.task == t)
                .collect()
        })
        .collect();
    let pass_k_max = pass_k_max(&by_task);
    let threshold = u64::from(opts.underpowered_below);
    let task_cells = tasks
        .iter()
        .zip(&by_task)
        .map(|((task, expect), ps)| TaskComparison {
            task: task.clone(),
            expect: *expect,
            comparison: cell(std::slice::from_ref(ps), pass_k_max, threshold),
        })
        .collect();
    Ok(Comparison {
        schema_version: SCHEMA_VERSION,
        suite_id: suite.clone(),
        a: info_a,
        b: info_b,
        underpowered_below: opts.underpowered_below,
        pass_k_max,
        pass_k_left_out: 0,
        matched: pairs.len() as u64,
        unmatched,
        left_out,
        warnings,
        provenance: None,
        overall: cell(&by_task, pass_k_max, threshold),
        tasks: task_cells,
        pairs: pairs
            .iter()
            .map(|(ra, rb)| MatchedPair {
                task: ra.task.clone(),
                trial_index: ra.trial_index,
                a: pair_trial(ra),
                b: pair_trial(rb),
            })
            .collect(),
    })
}

/// Refuses arms that cannot be compared: an empty arm, unlike suites, or different sets of
/// fixtures. Gives the suite id.
fn check_comparable<'a>(a: &'a [TrialRow], b: &[TrialRow]) -> Result<&'a String, CompareError> {
    if a.is_empty() {
        return Err(CompareError::EmptyArm { side: Side::A });
    }
    if b.is_empty() {
        return Err(CompareError::EmptyArm { side: Side::B });
    }
    let suite = &a[0].suite_id;
    if let Some(other) = a.iter().chain(b).find(|r| &r.suite_id != suite) {
        return Err(CompareError::DifferentSuites {
            a: suite.clone(),
            b: other.suite_id.clone(),
        });
    }
    let fixtures_a: BTreeSet<&str> = a.iter().map(|r| r.fixture_hash.as_str()).collect();
    let fixtures_b: BTreeSet<&str> = b.iter().map(|r| r.fixture_hash.as_str()).collect();
    if fixtures_a != fixtures_b {
        let join = |s: &BTreeSet<&str>| s.iter().copied().collect::<Vec<_>>().join(", ");
        return Err(CompareError::FixtureMismatch {
            detail: "the arms ran against different fixtures".into(),
            a: join(&fixtures_a),
            b: join(&fixtures_b),
        });
    }
    Ok(suite)
}

/// The trials of two arms, matched.
struct Matching<'r> {
    /// The matched pairs (a, b), in arm A's order.
    pairs: Vec<(&'r TrialRow, &'r TrialRow)>,
    /// The trials with no partner: arm A's, then arm B's.
    unmatched: Vec<Unmatched>,
}

/// Matches the trials of two arms by (task, trial index); refuses a pair that ran against
/// different fixtures or hidden mutations.
fn match_trials<'r>(a: &'r [TrialRow], b: &'r [TrialRow]) -> Result<Matching<'r>, CompareError> {
    let ia = index(a, Side::A)?;
    let ib = index(b, Side::B)?;
    let mut pairs: Vec<(&TrialRow, &TrialRow)> = Vec::new();
    let mut unmatched = Vec::new();
    for ra in a {
        match ib.get(&(ra.task.as_str(), ra.trial_index)) {
            Some(rb) => {
                check_pair(ra, rb)?;
                pairs.push((ra, rb));
            }
            None => unmatched.push(unmatched_of(Side::A, ra)),
        }
    }
    for rb in b {
        if !ia.contains_key(&(rb.task.as_str(), rb.trial_index)) {
            unmatched.push(unmatched_of(Side::B, rb));
        }
    }
    Ok(Matching { pairs, unmatched })
}

/// Refuses a matched pair that ran against different fixtures or hidden mutations.
fn check_pair(ra: &TrialRow, rb: &TrialRow) -> Result<(), CompareError> {
    if ra.fixture_hash != rb.fixture_hash {
        return Err(CompareError::FixtureMismatch {
            detail: format!("task `{}` trial {}", ra.task, ra.trial_index),
            a: ra.fixture_hash.clone(),
            b: rb.fixture_hash.clone(),
        });
    }
    if ra.mutation != rb.mutation {
        return Err(CompareError::MutationMismatch {
            task: ra.task.clone(),
            trial_index: ra.trial_index,
            a: mutation_label(ra.mutation.as_ref()),
            b: mutation_label(rb.mutation.as_ref()),
        });
    }
    Ok(())
}

/// A trial of arm `side` with no partner in the other arm.
fn pair_trial(r: &TrialRow) -> PairTrial {
    PairTrial {
        run_id: r.run_id.clone(),
        trial_id: r.trial_id.clone(),
        outcome: r.verdict.outcome.kind(),
        success: r
            .verdict
            .outcome
            .is_graded()
            .then_some(r.verdict.task_success),
    }
}

fn unmatched_of(side: Side, r: &TrialRow) -> Unmatched {
    Unmatched {
        side,
        run_id: r.run_id.clone(),
        trial_id: r.trial_id.clone(),
        task: r.task.clone(),
        variant: r.variant.clone(),
        trial_index: r.trial_index,
        outcome: r.verdict.outcome.kind(),
    }
}

/// The tasks only one arm ran, in the order first seen, each with why the other has none.
fn left_out(a: &[TrialRow], b: &[TrialRow], opts: &CompareOptions) -> Vec<LeftOutTask> {
    let tasks =
        |rows: &[TrialRow]| -> BTreeSet<String> { rows.iter().map(|r| r.task.clone()).collect() };
    let (in_a, in_b) = (tasks(a), tasks(b));
    let mut out = Vec::new();
    for (side, rows, other_rows, other_tasks) in [(Side::A, a, b, &in_b), (Side::B, b, a, &in_a)] {
        let order = first_seen(rows.iter().map(|r| (r.task.clone(), ())));
        for (task, ()) in order {
            if other_tasks.contains(&task) {
                continue;
            }
            let other = if side == Side::A { Side::B } else { Side::A };
            let variants: BTreeSet<&str> = other_rows.iter().map(|r| r.variant.as_str()).collect();
            let limits: Vec<String> = variants
                .iter()
                .filter_map(|v| {
                    let only = opts.variant_tasks.get(*v)?;
                    (!only.contains(&task)).then(|| {
                        let list = only
                            .iter()
                            .map(|t| format!("`{t}`"))
                            .collect::<Vec<_>>()
                            .join(", ");
                        format!("variant `{v}` runs only task(s) {list}")
                    })
                })
                .collect();
            let why = if !limits.is_empty() && limits.len() == variants.len() {
                format!("arm {other:?}'s {}", limits.join("; "))
            } else {
                format!("arm {other:?} has no finished trial of it")
            };
            out.push(LeftOutTask {
                trials: rows.iter().filter(|r| r.task == task).count() as u64,
                task,
                ran_in: side,
                why,
            });
        }
    }
    out
}

/// What a reader should know: the suite that scored the arms changed between them, or trials
/// are unmatched. (Where the arms come from is [`Provenance`]'s, which the caller adds.)
fn warnings(info_a: &ArmInfo, info_b: &ArmInfo, unmatched: &[Unmatched]) -> Vec<Warning> {
    let mut warnings = Vec::new();
    if info_a.suite_hashes != info_b.suite_hashes {
        warnings.push(Warning::new(
            WarningKind::DifferentRules,
            format!(
                "the arms were scored by different suite versions (A: {}; B: {}): check that the rules are the same",
                info_a.suite_hashes.join(", "),
                info_b.suite_hashes.join(", ")
            ),
        ));
    }
    if !unmatched.is_empty() {
        warnings.push(Warning::new(
            WarningKind::Unmatched,
            format!(
                "{} trial(s) have no partner in the other arm and are in no number below",
                unmatched.len()
            ),
        ));
    }
    warnings
}

impl Comparison {
    /// Sets where the arms come from, its warnings first (a provenance warning about different
    /// rules replaces the comparison's own, which names hashes only).
    pub fn with_provenance(mut self, provenance: Provenance) -> Comparison {
        let mut warnings = provenance.warnings();
        let named = warnings
            .iter()
            .any(|w| w.kind == WarningKind::DifferentRules);
        warnings.extend(
            self.warnings
                .into_iter()
                .filter(|w| !(named && w.kind == WarningKind::DifferentRules)),
        );
        self.warnings = warnings;
        self.provenance = Some(provenance);
        self
    }
}

/// The largest k: the smallest number of graded trials per task in either arm, over the tasks
/// graded at least once in both.
fn pass_k_max(by_task: &[Vec<(&TrialRow, &TrialRow)>]) -> u32 {
    let graded = |ps: &[(&TrialRow, &TrialRow)], side: Side| {
        ps.iter()
            .filter(|(ra, rb)| {
                if side == Side::A { ra } else { rb }
                    .verdict
                    .outcome
                    .is_graded()
            })
            .count() as u64
    };
    let pass_k_max = by_task
        .iter()
        .map(|ps| graded(ps, Side::A).min(graded(ps, Side::B)))
        .filter(|&n| n > 0)
        .min()
        .unwrap_or(0);
    u32::try_from(pass_k_max).unwrap_or(u32::MAX)
}

fn pick<'r>(p: &(&'r TrialRow, &'r TrialRow), side: Side) -> &'r TrialRow {
    match side {
        Side::A => p.0,
        Side::B => p.1,
    }
}

/// One arm's statistics over the matched pairs `all` (grouped by task in `groups`): its cell,
/// pass@k and pass^k for k up to `k_max`.
fn arm_stats<'r>(
    groups: &[Vec<(&'r TrialRow, &'r TrialRow)>],
    all: &[(&'r TrialRow, &'r TrialRow)],
    side: Side,
    k_max: u32,
) -> ArmStats {
    let pick = |p: &(&'r TrialRow, &'r TrialRow)| pick(p, side);
    let per_task: Vec<(u64, u64)> = groups
        .iter()
        .map(|ps| {
            let graded: Vec<&TrialRow> = ps
                .iter()
                .map(pick)
                .filter(|r| r.verdict.outcome.is_graded())
                .collect();
            (
                graded.len() as u64,
                graded.iter().filter(|r| r.verdict.task_success).count() as u64,
            )
        })
        .collect();
    let estimate = |f: fn(u64, u64, u64) -> Option<f64>| {
        (1..=k_max)
            .map(|k| {
                let vals: Vec<f64> = per_task
                    .iter()
                    .filter_map(|&(n, c)| f(n, c, u64::from(k)))
                    .collect();
                let tasks = vals.len() as u64;
                PassK {
                    k,
                    value: (tasks > 0).then(|| vals.iter().sum::<f64>() / tasks as f64),
                    tasks,
                }
            })
            .collect::<Vec<_>>()
    };
    ArmStats {
        cell: Cell::of(all.iter().map(pick)),
        pass_at_k: estimate(pass_at_k),
        pass_pow_k: estimate(pass_pow_k),
    }
}

/// The comparison over the pairs of the given tasks (one group per task).
fn cell<'r>(
    groups: &[Vec<(&'r TrialRow, &'r TrialRow)>],
    k_max: u32,
    threshold: u64,
) -> ComparisonCell {
    let all: Vec<(&'r TrialRow, &'r TrialRow)> = groups.iter().flatten().copied().collect();
    let a = arm_stats(groups, &all, Side::A, k_max);
    let b = arm_stats(groups, &all, Side::B, k_max);
    let powered = a.cell.n >= threshold && b.cell.n >= threshold;

    let both: Vec<(&TrialRow, &TrialRow)> = all
        .iter()
        .copied()
        .filter(|(ra, rb)| ra.verdict.outcome.is_graded() && rb.verdict.outcome.is_graded())
        .collect();
    let n = both.len() as u64;
    let share = |f: &dyn Fn(&TrialRow) -> bool| {
        let ka = both.iter().filter(|(ra, _)| f(ra)).count();
        let kb = both.iter().filter(|(_, rb)| f(rb)).count();
        (
            (n > 0).then(|| ka as f64 / n as f64),
            (n > 0).then(|| kb as f64 / n as f64),
        )
    };
    let (sa, sb) = share(&|r| r.verdict.task_success);
    let (fa, fb) = share(&|r| r.verdict.outcome.is_failure());
    let medians = |f: &dyn Fn(&TrialRow) -> Option<f64>, q: Quantity| {
        let ps: Vec<(f64, f64)> = both
            .iter()
            .filter_map(|(ra, rb)| Some((f(ra)?, f(rb)?)))
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .collect();
        let ma = Median::of(ps.iter().map(|p| Some(p.0)));
        let mb = Median::of(ps.iter().map(|p| Some(p.1)));
        Change::new(
            (ma.median, mb.median),
            ps.len() as u64,
            q.signs(ps.iter().copied()),
            q,
            powered,
        )
    };
    let outcome_signs = |f: &dyn Fn(&TrialRow) -> bool| {
        Quantity::Lower.signs(
            both.iter()
                .map(|(ra, rb)| (f64::from(u8::from(f(ra))), f64::from(u8::from(f(rb))))),
        )
    };
    let differences = Differences {
        success: Change::new(
            (sa, sb),
            n,
            outcome_signs(&|r| r.verdict.task_success),
            Quantity::HigherRate,
            powered,
        ),
        failure: Change::new(
            (fa, fb),
            n,
            outcome_signs(&|r| r.verdict.outcome.is_failure()),
            Quantity::Lower,
            powered,
        ),
        wrong_turns: medians(
            &|r| r.verdict.metrics.map(|m| m.wrong_turns as f64),
            Quantity::Lower,
        ),
        calls: medians(
            &|r| r.verdict.metrics.map(|m| m.calls as f64),
            Quantity::Lower,
        ),
        asks: medians(
            &|r| r.verdict.metrics.map(|m| m.asks as f64),
            Quantity::Lower,
        ),
        tokens: medians(
            &|r| r.tokens.and_then(|t| t.input_output()).map(|t| t as f64),
            Quantity::Lower,
        ),
        wall_seconds: medians(&|r| Some(r.wall_seconds), Quantity::Seconds),
    };
    let discordance = Discordance::of(
        both.iter()
            .map(|(ra, rb)| (ra.verdict.task_success, rb.verdict.task_success)),
    );
    let (verdict, reason) = verdict(&a, &b, &differences, powered, threshold);
    ComparisonCell {
        a,
        b,
        pairs: all.len() as u64,
        powered,
        differences,
        discordance,
        verdict,
        reason,
    }
}

/// A change's sign-test counts as a reader checks them, B's side first:
/// `4 vs 2 discordant pairs (B vs A); a direction needs at least 6 of 6 on one side`.
fn counts(c: &Change, what: &str) -> String {
    let n = c.b_higher + c.b_lower;
    let (hi, lo) = (c.b_higher, c.b_lower);
    match c.needs {
        Some(k) => format!("{hi} vs {lo} {what}; a direction needs at least {k} of {n} on one side"),
        None if n == 0 => format!("0 {what}"),
        None => format!(
            "{hi} vs {lo} {what}: too few pairs differ (even {n} of {n} on one side is within what fair coin flips give at 5%; a direction needs 6 or more)"
        ),
    }
}

fn verdict(
    a: &ArmStats,
    b: &ArmStats,
    d: &Differences,
    powered: bool,
    threshold: u64,
) -> (ComparisonVerdict, String) {
    if !powered {
        return (
            ComparisonVerdict::Underpowered,
            format!(
                "graded n is {} in A and {} in B; both must be at least {threshold}",
                a.cell.n, b.cell.n
            ),
        );
    }
    let s = &d.success;
    if s.difference.is_none() {
        return (
            ComparisonVerdict::Underpowered,
            "no matched pair was graded in both arms".to_string(),
        );
    }
    let success = format!(
        "success {} -> {} ({}, {} pairs graded in both)",
        a.cell.rates.success,
        b.cell.rates.success,
        points_of(s),
        s.n,
    );
    let discordant = counts(s, "discordant pairs (B vs A)");
    // The verdict follows the success change's own assessment, so that a difference that reads
    // as +0 can never be `better` or `worse`, nor one within noise.
    match s.assessment {
        Assessment::Better => {
            return (
                ComparisonVerdict::Better,
                format!("{success}: {discordant}"),
            )
        }
        Assessment::Worse => return (ComparisonVerdict::Worse, format!("{success}: {discordant}")),
        Assessment::NoClearDifference => {
            return (
                ComparisonVerdict::NoClearDifference,
                format!("{success}: no clear difference, {discordant}"),
            )
        }
        Assessment::Underpowered => {
            return (
                ComparisonVerdict::Underpowered,
                format!("{success}: {discordant}"),
            )
        }
        Assessment::Same | Assessment::NotMeasured => {}
    }
    by_wrong_turns(s, &d.wrong_turns)
}

/// The verdict between arms of equal success: by wrong turns, beyond noise only.
fn by_wrong_turns(s: &Change, w: &Change) -> (ComparisonVerdict, String) {
    let equal = format!(
        "equal success ({}, {})",
        points_of(s),
        counts(s, "discordant pairs (B vs A)")
    );
    let median_wt = |w: &Change| match (w.a, w.b) {
        (Some(ma), Some(mb)) => format!(
            "median wrong turns {} -> {} (n={}; {})",
            crate::stats::number(ma),
            crate::stats::number(mb),
            w.n,
            counts(w, "pairs (more wrong turns in B vs in A)")
        ),
        _ => "wrong turns not measured".to_string(),
    };
    match w.assessment {
        Assessment::Better => (
            ComparisonVerdict::Better,
            format!("{equal}; {}", median_wt(w)),
        ),
        Assessment::Worse => (
            ComparisonVerdict::Worse,
            format!("{equal}; {}", median_wt(w)),
        ),
        Assessment::NoClearDifference => (
            ComparisonVerdict::NoClearDifference,
            format!(
                "{equal}; wrong turns: no clear difference, {}",
                median_wt(w)
            ),
        ),
        Assessment::Underpowered => (
            ComparisonVerdict::Underpowered,
            format!("{equal}; {}", median_wt(w)),
        ),
        Assessment::NotMeasured => (
            ComparisonVerdict::Same,
            format!("{equal}; wrong turns not measured"),
        ),
        Assessment::Same => (
            ComparisonVerdict::Same,
            format!("{equal} and equal median wrong turns (n={})", w.n),
        ),
    }
}

/// A change's difference in points, or `-`.
fn points_of(c: &Change) -> String {
    c.difference
        .map_or_else(|| "-".to_string(), crate::stats::points)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLEAR_UP: SignTest = SignTest::Clear {
        higher: true,
        needs: 6,
    };
    const CLEAR_DOWN: SignTest = SignTest::Clear {
        higher: false,
        needs: 6,
    };

    /// A difference reads as none only under its threshold: at it, it is a difference.
    #[test]
    fn a_difference_at_the_threshold_is_a_difference() {
        assert!(Quantity::Seconds.is_zero(SAME_WALL_SECONDS / 2.0));
        assert!(!Quantity::Seconds.is_zero(SAME_WALL_SECONDS));
        assert!(Quantity::Lower.is_zero(SAME_EXACT / 2.0));
        assert!(!Quantity::Lower.is_zero(SAME_EXACT));
        assert!(!Quantity::HigherRate.is_zero(-SAME_EXACT));
    }

    #[test]
    fn below_the_power_threshold_nothing_is_said() {
        for test in [CLEAR_UP, CLEAR_DOWN, SignTest::NotClear { needs: 8 }] {
            assert_eq!(
                assess(0.5, test, Quantity::HigherRate, false),
                Assessment::Underpowered
            );
        }
    }

    /// Direction: a lopsided sign test that agrees with the difference is better where the
    /// quantity is better that way, worse otherwise.
    #[test]
    fn a_clear_sign_test_that_agrees_with_the_difference_gives_the_direction() {
        use Assessment::*;
        assert_eq!(assess(0.3, CLEAR_UP, Quantity::HigherRate, true), Better);
        assert_eq!(assess(-0.3, CLEAR_DOWN, Quantity::HigherRate, true), Worse);
        assert_eq!(assess(2.0, CLEAR_UP, Quantity::Lower, true), Worse);
        assert_eq!(assess(-2.0, CLEAR_DOWN, Quantity::Lower, true), Better);
        assert_eq!(assess(-2.0, CLEAR_DOWN, Quantity::Seconds, true), Better);
        // Against the difference, or under a zero one, it is no direction a reader could see.
        assert_eq!(
            assess(-0.3, CLEAR_UP, Quantity::HigherRate, true),
            NoClearDifference
        );
        assert_eq!(
            assess(0.3, CLEAR_DOWN, Quantity::HigherRate, true),
            NoClearDifference
        );
        assert_eq!(
            assess(0.0, CLEAR_UP, Quantity::HigherRate, true),
            NoClearDifference
        );
        assert_eq!(
            assess(0.001, CLEAR_UP, Quantity::Seconds, true),
            NoClearDifference
        );
    }

    #[test]
    fn without_a_clear_sign_test_a_zero_difference_is_same_and_another_is_not_clear() {
        use Assessment::*;
        let not_clear = SignTest::NotClear { needs: 8 };
        assert_eq!(assess(0.0, not_clear, Quantity::HigherRate, true), Same);
        assert_eq!(
            assess(0.1, not_clear, Quantity::HigherRate, true),
            NoClearDifference
        );
        assert_eq!(assess(0.004, not_clear, Quantity::Seconds, true), Same);
        assert_eq!(
            assess(0.006, not_clear, Quantity::Seconds, true),
            NoClearDifference
        );
        assert_eq!(
            assess(0.004, not_clear, Quantity::Lower, true),
            NoClearDifference
        );
        for few in [SignTest::NoPairs, SignTest::TooFew] {
            assert_eq!(assess(0.0, few, Quantity::Lower, true), Same);
            assert_eq!(assess(1.0, few, Quantity::Lower, true), Underpowered);
        }
    }

    #[test]
    fn signs_count_pairs_up_and_down_and_drop_ties() {
        let pairs = [(0.0, 1.0), (1.0, 0.0), (2.0, 5.0), (1.0, 1.0), (3.0, 3.001)];
        assert_eq!(Quantity::Lower.signs(pairs), (3, 1));
        assert_eq!(Quantity::HigherRate.signs(pairs), (3, 1));
        assert_eq!(
            Quantity::Seconds.signs(pairs),
            (2, 1),
            "1 ms is no difference"
        );
        assert_eq!(Quantity::Lower.signs([]), (0, 0));
    }

    #[test]
    fn discordance_counts_each_kind_of_pair() {
        let d = Discordance::of([
            (true, false),
            (false, true),
            (false, true),
            (true, true),
            (true, true),
            (true, true),
            (false, false),
        ]);
        assert_eq!(
            (d.a_only, d.b_only, d.both, d.neither, d.n),
            (1, 2, 3, 1, 7)
        );
        assert_eq!((d.discordant(), d.concordant()), (3, 4));
    }
}
