//! Aggregation: trial rows to cells (per variant × task, per variant, overall).
//!
//! The rules (docs/outcomes.md and docs/metrics.md):
//! - graded n = trials − errored − ungradeable, and it is the ONE denominator of every rate in a
//!   cell (success, completion, wrong, refusal, refused-honestly, refused-wrongly, ask, abandoned,
//!   failure = wrong + refused-wrongly + abandoned), so no rate can move by widening its own
//!   denominator;
//! - `errored` and `ungradeable` are counted apart and never enter n;
//! - a cell is `unreliable` when ungradeable trials are more than 20% of its trials;
//! - medians, means and totals of metrics are taken over graded trials only, each metric's three
//!   with its own n; a value a trial did not report is left out, never counted as 0;
//! - the rubric mean has its own n (graded trials whose task has a rubric with a nonzero maximum);
//! - cost ledgers (tokens by category, requests, CPU seconds, money) cover every trial, graded
//!   or not (the spend happened), are kept as separate fields and never summed into one score;
//!   money is `incomplete` as soon as one trial's price is missing.

use std::collections::{BTreeMap, BTreeSet};

use proctor_records::OutcomeTally;
use proctor_score::{Outcome, OutcomeKind};
use proctor_suite::model::Expect;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::gate_report::GateReport;
use crate::input::{Cost, TrialRow};
use crate::stats::{Median, Rate, Summary};
use crate::SCHEMA_VERSION;

/// Why trial rows cannot be aggregated into one report.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AggregateError {
    /// There was nothing to report on.
    #[error("no trials to report on")]
    NoTrials,
    /// The rows come from different suites; a report covers one suite.
    #[error("the trials come from different suites (`{first}` and `{other}`); a report covers one suite")]
    MixedSuites {
        /// The first suite id seen.
        first: String,
        /// Another suite id seen.
        other: String,
    },
    /// The same trial appears twice.
    #[error("trial `{trial_id}` of run `{run_id}` appears more than once")]
    DuplicateTrial {
        /// The run id.
        run_id: String,
        /// The repeated trial id.
        trial_id: String,
    },
}

/// A task's correct behaviour, as the report names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExpectedBehaviour {
    /// Do the task.
    Complete,
    /// Decline it.
    Refuse,
    /// Stop and ask the person.
    Ask,
}

impl From<Expect> for ExpectedBehaviour {
    fn from(e: Expect) -> Self {
        match e {
            Expect::Complete => ExpectedBehaviour::Complete,
            Expect::Refuse => ExpectedBehaviour::Refuse,
            Expect::Ask => ExpectedBehaviour::Ask,
        }
    }
}

impl ExpectedBehaviour {
    /// The spelling used in `suite.toml` and in the report.
    pub fn as_str(self) -> &'static str {
        match self {
            ExpectedBehaviour::Complete => "complete",
            ExpectedBehaviour::Refuse => "refuse",
            ExpectedBehaviour::Ask => "ask",
        }
    }
}

/// How many trials of a cell ended in each of the eight outcomes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OutcomeCounts {
    /// `completed`.
    pub completed: u64,
    /// `wrong` (including attributed reversals).
    pub wrong: u64,
    /// `refused-honestly`.
    pub refused_honestly: u64,
    /// `refused-wrongly`.
    pub refused_wrongly: u64,
    /// `asked`.
    pub asked: u64,
    /// `abandoned`.
    pub abandoned: u64,
    /// `errored`: operational failures, not evidence about the agent; never in n.
    pub errored: u64,
    /// `ungradeable`: the rules could not tell; never in n.
    pub ungradeable: u64,
}

impl OutcomeCounts {
    /// Adds one trial's outcome.
    pub fn add(&mut self, outcome: &Outcome) {
        match outcome {
            Outcome::Completed => self.completed += 1,
            Outcome::Wrong { .. } => self.wrong += 1,
            Outcome::RefusedHonestly => self.refused_honestly += 1,
            Outcome::RefusedWrongly => self.refused_wrongly += 1,
            Outcome::Asked => self.asked += 1,
            Outcome::Abandoned => self.abandoned += 1,
            Outcome::Errored { .. } => self.errored += 1,
            Outcome::Ungradeable { .. } => self.ungradeable += 1,
        }
    }

    /// Every trial counted.
    pub fn trials(&self) -> u64 {
        self.graded() + self.errored + self.ungradeable
    }

    /// How many trials ended in `kind`.
    pub fn of(&self, kind: OutcomeKind) -> u64 {
        match kind {
            OutcomeKind::Completed => self.completed,
            OutcomeKind::Wrong => self.wrong,
            OutcomeKind::RefusedHonestly => self.refused_honestly,
            OutcomeKind::RefusedWrongly => self.refused_wrongly,
            OutcomeKind::Asked => self.asked,
            OutcomeKind::Abandoned => self.abandoned,
            OutcomeKind::Errored => self.errored,
            OutcomeKind::Ungradeable => self.ungradeable,
        }
    }

    /// Graded attempts: every trial whose outcome [`OutcomeKind::is_graded`] (all but `errored`
    /// and `ungradeable`).
    pub fn graded(&self) -> u64 {
        self.sum_where(OutcomeKind::is_graded)
    }

    /// The failures: every trial whose outcome [`OutcomeKind::is_failure`] (wrong +
    /// refused-wrongly + abandoned).
    pub fn failures(&self) -> u64 {
        self.sum_where(OutcomeKind::is_failure)
    }

    /// The trials whose outcome satisfies `which`.
    fn sum_where(&self, which: fn(OutcomeKind) -> bool) -> u64 {
        OutcomeKind::ALL
            .into_iter()
            .filter(|&k| which(k))
            .map(|k| self.of(k))
            .sum()
    }

    /// The counts in report order ([`OutcomeKind::ALL`]), each with its outcome's label.
    pub fn labelled(&self) -> [(&'static str, u64); 8] {
        OutcomeKind::ALL.map(|k| (k.label(), self.of(k)))
    }

    /// The counts as a tally: the outcomes that occurred, listed in the order of their labels.
    pub fn tally(&self) -> OutcomeTally {
        OutcomeKind::ALL
            .map(|k| (k, self.of(k)))
            .into_iter()
            .collect()
    }
}

/// Every rate of a cell. They all share one denominator, the cell's graded n.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Rates {
    /// Task success: `completed`, or the correct refusal / ask where the task expects one.
    pub success: Rate,
    /// `completed`.
    pub completion: Rate,
    /// `wrong`.
    pub wrong: Rate,
    /// Every refusal: `refused-honestly` + `refused-wrongly`.
    pub refusal: Rate,
    /// `refused-honestly`.
    pub refused_honestly: Rate,
    /// `refused-wrongly`.
    pub refused_wrongly: Rate,
    /// `asked`.
    pub ask: Rate,
    /// `abandoned`.
    pub abandoned: Rate,
    /// Failure: `wrong` + `refused-wrongly` + `abandoned`. An honest refusal is not a failure.
    pub failure: Rate,
}

impl Rates {
    /// The rates of `counts` with `successes` task successes among the graded trials.
    pub fn new(counts: &OutcomeCounts, successes: u64) -> Rates {
        let n = counts.graded();
        let r = |k| Rate::new(k, n);
        Rates {
            success: r(successes),
            completion: r(counts.completed),
            wrong: r(counts.wrong),
            refusal: r(counts.refused_honestly + counts.refused_wrongly),
            refused_honestly: r(counts.refused_honestly),
            refused_wrongly: r(counts.refused_wrongly),
            ask: r(counts.asked),
            abandoned: r(counts.abandoned),
            failure: r(counts.failures()),
        }
    }
}

/// The mean rubric total of the graded trials whose task has a rubric, with its own n.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RubricMean {
    /// Mean rubric total after caps; `null` when n = 0.
    pub mean: Option<f64>,
    /// Mean of total / maximum, from 0 to 1, comparable across tasks; `null` when n = 0.
    pub mean_fraction: Option<f64>,
    /// Graded trials with a rubric whose maximum is above 0.
    pub n: u64,
}

/// Medians of the per-trial metrics over the graded trials, each with its own n.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Medians {
    /// Interface calls.
    pub calls: Median,
    /// Wrong turns: errors + repeats + undone + denied.
    pub wrong_turns: Median,
    /// Calls that exited non-zero.
    pub errors: Median,
    /// Calls identical to the one right before.
    pub repeats: Median,
    /// Calls that reversed an earlier call.
    pub undone: Median,
    /// Calls the allow-list refused.
    pub denied: Median,
    /// Successes of a verb after failures of it.
    pub recoveries: Median,
    /// Calls asking for help.
    pub help_calls: Median,
    /// Answers that ask the person.
    #[serde(default)]
    pub asks: Median,
    /// Wall-clock seconds.
    pub wall_seconds: Median,
    /// Agent CPU seconds.
    pub agent_cpu_seconds: Median,
    /// Input + output tokens (known only when both are).
    pub tokens: Median,
    /// Input tokens.
    pub tokens_input: Median,
    /// Output tokens.
    pub tokens_output: Median,
    /// Cache-read tokens.
    pub tokens_cache_read: Median,
    /// Cache-write tokens.
    pub tokens_cache_write: Median,
    /// Model requests.
    pub requests: Median,
}

impl Medians {
    /// The medians over `rows` (the caller passes the graded ones).
    pub fn of(rows: &[&TrialRow]) -> Medians {
        let mut samples = Samples::default();
        for r in rows {
            samples.add(r);
        }
        samples.summaries().medians()
    }

    /// The medians in report order, with their names.
    pub fn named(&self) -> [(&'static str, Median); 17] {
        [
            ("calls", self.calls),
            ("wrong_turns", self.wrong_turns),
            ("errors", self.errors),
            ("repeats", self.repeats),
            ("undone", self.undone),
            ("denied", self.denied),
            ("recoveries", self.recoveries),
            ("help_calls", self.help_calls),
            ("asks", self.asks),
            ("wall_seconds", self.wall_seconds),
            ("agent_cpu_seconds", self.agent_cpu_seconds),
            ("tokens", self.tokens),
            ("tokens_input", self.tokens_input),
            ("tokens_output", self.tokens_output),
            ("tokens_cache_read", self.tokens_cache_read),
            ("tokens_cache_write", self.tokens_cache_write),
            ("requests", self.requests),
        ]
    }
}

/// Median, mean and total of each per-trial metric over the graded trials, each with its own n
/// (the three statistics of one metric share it): the figures of [`Medians`], and beside each
/// median the mean and the total that a tail moves. Results written before schema version 2
/// have none, and read with every n = 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Summaries {
    /// Interface calls.
    pub calls: Summary,
    /// Wrong turns: errors + repeats + undone + denied.
    pub wrong_turns: Summary,
    /// Calls that exited non-zero.
    pub errors: Summary,
    /// Calls identical to the one right before.
    pub repeats: Summary,
    /// Calls that reversed an earlier call.
    pub undone: Summary,
    /// Calls the allow-list refused.
    pub denied: Summary,
    /// Successes of a verb after failures of it.
    pub recoveries: Summary,
    /// Calls asking for help.
    pub help_calls: Summary,
    /// Answers that ask the person.
    #[serde(default)]
    pub asks: Summary,
    /// Wall-clock seconds.
    pub wall_seconds: Summary,
    /// Agent CPU seconds.
    pub agent_cpu_seconds: Summary,
    /// Input + output tokens (known only when both are).
    pub tokens: Summary,
    /// Input tokens.
    pub tokens_input: Summary,
    /// Output tokens.
    pub tokens_output: Summary,
    /// Cache-read tokens.
    pub tokens_cache_read: Summary,
    /// Cache-write tokens.
    pub tokens_cache_write: Summary,
    /// Model requests.
    pub requests: Summary,
}

impl Summaries {
    /// The summaries over `rows` (the caller passes the graded ones).
    pub fn of(rows: &[&TrialRow]) -> Summaries {
        let mut samples = Samples::default();
        for r in rows {
            samples.add(r);
        }
        samples.summaries()
    }

    /// The summaries in report order, with their names (the names of [`Medians::named`]).
    pub fn named(&self) -> [(&'static str, Summary); 17] {
        [
            ("calls", self.calls),
            ("wrong_turns", self.wrong_turns),
            ("errors", self.errors),
            ("repeats", self.repeats),
            ("undone", self.undone),
            ("denied", self.denied),
            ("recoveries", self.recoveries),
            ("help_calls", self.help_calls),
            ("asks", self.asks),
            ("wall_seconds", self.wall_seconds),
            ("agent_cpu_seconds", self.agent_cpu_seconds),
            ("tokens", self.tokens),
            ("tokens_input", self.tokens_input),
            ("tokens_output", self.tokens_output),
            ("tokens_cache_read", self.tokens_cache_read),
            ("tokens_cache_write", self.tokens_cache_write),
            ("requests", self.requests),
        ]
    }

    /// The summary of the metric named as in [`Summaries::named`].
    pub fn get(&self, name: &str) -> Option<Summary> {
        self.named()
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, s)| s)
    }

    /// The medians alone, as [`Medians`].
    pub fn medians(&self) -> Medians {
        let m = |s: Summary| s.as_median();
        Medians {
            calls: m(self.calls),
            wrong_turns: m(self.wrong_turns),
            errors: m(self.errors),
            repeats: m(self.repeats),
            undone: m(self.undone),
            denied: m(self.denied),
            recoveries: m(self.recoveries),
            help_calls: m(self.help_calls),
            asks: m(self.asks),
            wall_seconds: m(self.wall_seconds),
            agent_cpu_seconds: m(self.agent_cpu_seconds),
            tokens: m(self.tokens),
            tokens_input: m(self.tokens_input),
            tokens_output: m(self.tokens_output),
            tokens_cache_read: m(self.tokens_cache_read),
            tokens_cache_write: m(self.tokens_cache_write),
            requests: m(self.requests),
        }
    }
}

/// A count ledger summed over the trials that reported it; `missing` says how many did not.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CountLedger {
    /// Sum over the trials that reported a value.
    pub total: u64,
    /// Trials that reported a value.
    pub reported: u64,
    /// Trials that did not; when above 0 the total is a partial sum, not the whole.
    pub missing: u64,
}

impl CountLedger {
    fn add(&mut self, v: Option<u64>) {
        match v {
            Some(v) => {
                self.total = self.total.saturating_add(v);
                self.reported += 1;
            }
            None => self.missing += 1,
        }
    }
}

/// A seconds ledger summed over the trials that reported it; `missing` says how many did not.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SecondsLedger {
    /// Sum over the trials that reported a value.
    pub total: f64,
    /// Trials that reported a value.
    pub reported: u64,
    /// Trials that did not; when above 0 the total is a partial sum, not the whole.
    pub missing: u64,
}

/// Model tokens by category, each its own ledger.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TokenLedgers {
    /// Input tokens.
    pub input: CountLedger,
    /// Output tokens.
    pub output: CountLedger,
    /// Cache-read tokens.
    pub cache_read: CountLedger,
    /// Cache-write tokens.
    pub cache_write: CountLedger,
}

/// The money ledger of a cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Money {
    /// Every priced trial's cost was known.
    Known {
        /// US dollars over the priced trials.
        usd: f64,
        /// Trials with a known price.
        trials: u64,
    },
    /// Some trial's price was missing: there is no total, never a zero.
    Incomplete {
        /// The price categories that were missing, sorted, without repeats.
        missing: Vec<String>,
        /// Trials whose price was missing.
        trials_missing: u64,
    },
    /// No trial had a price (scripted agents, human sittings).
    NotApplicable,
}

impl Money {
    /// Whether the ledger is complete (known or not applicable).
    pub fn is_complete(&self) -> bool {
        !matches!(self, Money::Incomplete { .. })
    }
}

/// The cost ledgers of a cell, over all its trials. Never summed into one score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CostLedgers {
    /// Tokens by category.
    pub tokens: TokenLedgers,
    /// Model requests.
    pub requests: CountLedger,
    /// Local CPU seconds of the agent.
    pub agent_cpu_seconds: SecondsLedger,
    /// Money.
    pub money: Money,
}

impl CostLedgers {
    /// The ledgers of `rows` (every trial, graded or not).
    pub fn of(rows: &[&TrialRow]) -> CostLedgers {
        let mut acc = CostAcc::default();
        for r in rows {
            acc.add(r);
        }
        acc.finish()
    }
}

/// The metric values of graded trials, kept (only the reported, finite ones) until their
/// medians, means and totals are taken; one list per metric of [`Medians`], in its field order.
#[derive(Debug, Clone, Default)]
struct Samples([Vec<f64>; 17]);

impl Samples {
    /// Adds one graded trial's values.
    fn add(&mut self, r: &TrialRow) {
        let metrics = r.verdict.metrics.as_ref();
        let im = |f: fn(&proctor_score::InterfaceMetrics) -> u64| metrics.map(|x| f(x) as f64);
        let tokens = r.tokens.as_ref();
        let tok =
            |f: fn(&crate::input::Tokens) -> Option<u64>| tokens.and_then(f).map(|t| t as f64);
        let values = [
            im(|x| x.calls),
            im(|x| x.wrong_turns),
            im(|x| x.errors),
            im(|x| x.repeats),
            im(|x| x.undone),
            im(|x| x.denied),
            im(|x| x.recoveries),
            im(|x| x.help_calls),
            Some(r.wall_seconds),
            r.agent_cpu_seconds,
            tok(|t| t.input_output()),
            tok(|t| t.input),
            tok(|t| t.output),
            tok(|t| t.cache_read),
            tok(|t| t.cache_write),
            r.requests.map(|x| x as f64),
            im(|x| x.asks),
        ];
        for (list, v) in self.0.iter_mut().zip(values) {
            if let Some(v) = v.filter(|v| v.is_finite()) {
                list.push(v);
            }
        }
    }

    /// Appends another set's values.
    fn extend(&mut self, other: &Samples) {
        for (mine, theirs) in self.0.iter_mut().zip(&other.0) {
            mine.extend_from_slice(theirs);
        }
    }

    fn summaries(&self) -> Summaries {
        let m = |i: usize| Summary::of(self.0[i].iter().map(|v| Some(*v)));
        Summaries {
            calls: m(0),
            wrong_turns: m(1),
            errors: m(2),
            repeats: m(3),
            undone: m(4),
            denied: m(5),
            recoveries: m(6),
            help_calls: m(7),
            wall_seconds: m(8),
            agent_cpu_seconds: m(9),
            tokens: m(10),
            tokens_input: m(11),
            tokens_output: m(12),
            tokens_cache_read: m(13),
            tokens_cache_write: m(14),
            requests: m(15),
            asks: m(16),
        }
    }
}

/// Running sums of the cost ledgers.
#[derive(Debug, Clone, Default)]
struct CostAcc {
    tokens: TokenLedgers,
    requests: CountLedger,
    cpu: SecondsLedger,
    usd: f64,
    known: u64,
    missing: BTreeSet<String>,
    trials_missing: u64,
}

impl CostAcc {
    fn add(&mut self, r: &TrialRow) {
        let t = r.tokens.unwrap_or_default();
        self.tokens.input.add(t.input);
        self.tokens.output.add(t.output);
        self.tokens.cache_read.add(t.cache_read);
        self.tokens.cache_write.add(t.cache_write);
        self.requests.add(r.requests);
        match r.agent_cpu_seconds.filter(|s| s.is_finite()) {
            Some(s) => {
                self.cpu.total += s;
                self.cpu.reported += 1;
            }
            None => self.cpu.missing += 1,
        }
        match &r.cost {
            Cost::Known { usd } if usd.is_finite() => {
                self.usd += usd;
                self.known += 1;
            }
            Cost::Known { .. } => {
                self.missing.insert("usd (not a finite number)".to_string());
                self.trials_missing += 1;
            }
            Cost::Incomplete { missing } => {
                if missing.is_empty() {
                    self.missing.insert("unnamed price".to_string());
                }
                self.missing.extend(missing.iter().cloned());
                self.trials_missing += 1;
            }
            Cost::NotApplicable => {}
        }
    }

    fn finish(&self) -> CostLedgers {
        let money = if self.trials_missing > 0 {
            Money::Incomplete {
                missing: self.missing.iter().cloned().collect(),
                trials_missing: self.trials_missing,
            }
        } else if self.known > 0 {
            Money::Known {
                usd: self.usd,
                trials: self.known,
            }
        } else {
            Money::NotApplicable
        };
        CostLedgers {
            tokens: self.tokens,
            requests: self.requests,
            agent_cpu_seconds: self.cpu,
            money,
        }
    }
}

/// Everything reported about one set of trials: one variant on one task, one variant overall,
/// or the whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Cell {
    /// Every trial of the cell.
    pub trials: u64,
    /// Graded attempts n = trials − errored − ungradeable: the denominator of every rate.
    pub n: u64,
    /// How many trials ended in each outcome.
    pub outcomes: OutcomeCounts,
    /// Every rate, each as k/n over the same n.
    pub rates: Rates,
    /// Graded trials flagged by the integrity audit (test tampering, an early exit): their
    /// outcome stands, and every rate that counts them says so.
    #[serde(default)]
    pub flagged: u64,
    /// Task successes among the flagged trials: the success rate's `k` holds this many
    /// flagged trials (`7/12, 2 flagged`).
    #[serde(default)]
    pub flagged_successes: u64,
    /// Operational failures, not evidence about the agent; not in n.
    pub errored: u64,
    /// Errored trials by error kind.
    pub errored_by_kind: BTreeMap<String, u64>,
    /// Trials the rules could not grade; not in n.
    pub ungradeable: u64,
    /// Ungradeable trials out of all trials (its own denominator: every trial).
    pub ungradeable_share: Rate,
    /// Whether ungradeable trials are more than 20% of the cell's trials.
    pub unreliable: bool,
    /// Mean rubric score, with its own n.
    pub rubric: RubricMean,
    /// Medians of the per-trial metrics over the graded trials, each with its own n (the same
    /// numbers as the `median`s of `summaries`, kept for readers of schema version 1).
    pub medians: Medians,
    /// Median, mean and total of the per-trial metrics over the graded trials, each with its
    /// own n. Absent (every n = 0) in results written before schema version 2.
    #[serde(default)]
    pub summaries: Summaries,
    /// Cost ledgers over every trial.
    pub costs: CostLedgers,
}

impl Cell {
    /// The success rate as a reader sees it: `k/n (p%)`, and `, F flagged` when F of the k
    /// successes were flagged by the integrity audit.
    pub fn success_text(&self) -> String {
        match self.flagged_successes {
            0 => self.rates.success.to_string(),
            f => format!("{}, {f} flagged", self.rates.success),
        }
    }

    /// Aggregates the given trials.
    pub fn of<'a>(rows: impl IntoIterator<Item = &'a TrialRow>) -> Cell {
        let mut acc = CellAcc::default();
        for r in rows {
            acc.add(r, true);
        }
        acc.finish(&acc.samples)
    }
}

/// A [`Cell`] being built one trial at a time: counts and sums, and the metric values its
/// medians need (kept only where asked, so a trial's values are stored once, not per level).
#[derive(Debug, Clone, Default)]
struct CellAcc {
    outcomes: OutcomeCounts,
    errored_by_kind: BTreeMap<String, u64>,
    successes: u64,
    flagged: u64,
    flagged_successes: u64,
    rubric_total: f64,
    rubric_fraction: f64,
    rubric_n: u64,
    costs: CostAcc,
    samples: Samples,
}

impl CellAcc {
    /// Adds one trial; its metric values are kept when `keep_samples`.
    fn add(&mut self, r: &TrialRow, keep_samples: bool) {
        self.outcomes.add(&r.verdict.outcome);
        if let Outcome::Errored { kind } = &r.verdict.outcome {
            *self
                .errored_by_kind
                .entry(kind.as_str().to_string())
                .or_insert(0) += 1;
        }
        self.costs.add(r);
        if !r.verdict.outcome.is_graded() {
            return;
        }
        if r.verdict.task_success {
            self.successes += 1;
        }
        if r.verdict.flagged() {
            self.flagged += 1;
            if r.verdict.task_success {
                self.flagged_successes += 1;
            }
        }
        if let Some(s) = r.verdict.rubric.as_ref().filter(|s| s.max > 0) {
            self.rubric_total += f64::from(s.total);
            self.rubric_fraction += f64::from(s.total) / f64::from(s.max);
            self.rubric_n += 1;
        }
        if keep_samples {
            self.samples.add(r);
        }
    }

    /// The cell, with medians over `samples` (this cell's own, or its parts' gathered).
    fn finish(&self, samples: &Samples) -> Cell {
        let outcomes = self.outcomes;
        let trials = outcomes.trials();
        let summaries = samples.summaries();
        let rubric = match self.rubric_n {
            0 => RubricMean::default(),
            n => RubricMean {
                mean: Some(self.rubric_total / n as f64),
                mean_fraction: Some(self.rubric_fraction / n as f64),
                n,
            },
        };
        Cell {
            trials,
            n: outcomes.graded(),
            rates: Rates::new(&outcomes, self.successes),
            flagged: self.flagged,
            flagged_successes: self.flagged_successes,
            errored: outcomes.errored,
            errored_by_kind: self.errored_by_kind.clone(),
            ungradeable: outcomes.ungradeable,
            ungradeable_share: Rate::new(outcomes.ungradeable, trials),
            // more than 20%: ungradeable / trials > 1/5, in whole numbers.
            unreliable: outcomes.ungradeable * 5 > trials,
            outcomes,
            rubric,
            medians: summaries.medians(),
            summaries,
            costs: self.costs.finish(),
        }
    }
}

/// A task of the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TaskInfo {
    /// The task id.
    pub id: String,
    /// Its correct behaviour.
    pub expect: ExpectedBehaviour,
}

/// One variant's cell on one task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskCell {
    /// The task id.
    pub task: String,
    /// The cell.
    pub cell: Cell,
}

/// One variant: overall and per task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct VariantReport {
    /// The variant id.
    pub variant: String,
    /// Every trial of the variant.
    pub overall: Cell,
    /// Per task, in the run's task order; a task the variant has no trial of is left out.
    pub tasks: Vec<TaskCell>,
}

impl VariantReport {
    /// The variant's cell on `task`.
    pub fn task(&self, task: &str) -> Option<&Cell> {
        self.tasks.iter().find(|t| t.task == task).map(|t| &t.cell)
    }
}

/// One trial, as listed in the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TrialSummary {
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
    /// The hidden mutation's name, when there was one.
    pub mutation: Option<String>,
    /// The outcome label.
    #[schemars(with = "String")]
    pub outcome: OutcomeKind,
    /// Whether it counts as a success for its task.
    pub task_success: bool,
    /// Why: the verdict's reason (for `ungradeable`, the reason it requires).
    pub reason: String,
    /// The gateway limit the trial reached, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub limit_reached: Option<proctor_records::Limit>,
    /// The integrity audit's flags that stand beside the outcome (test tampering, an early
    /// exit), each as `kind: path why`; absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
}

impl From<&TrialRow> for TrialSummary {
    fn from(r: &TrialRow) -> Self {
        TrialSummary {
            run_id: r.run_id.clone(),
            trial_id: r.trial_id.clone(),
            task: r.task.clone(),
            variant: r.variant.clone(),
            trial_index: r.trial_index,
            mutation: r.mutation.as_ref().map(|m| m.name.clone()),
            outcome: r.verdict.outcome.kind(),
            task_success: r.verdict.task_success,
            reason: match &r.verdict.outcome {
                Outcome::Ungradeable { reason } if r.verdict.reason.is_empty() => reason.clone(),
                _ => r.verdict.reason.clone(),
            },
            limit_reached: r.limit_reached,
            flags: r.verdict.integrity.flags().map(|f| f.describe()).collect(),
        }
    }
}

/// The results document of a run (`results.json`): every cell, and every trial's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunReport {
    /// The version of this document's shape; see [`crate::json_schema`].
    pub schema_version: u32,
    /// The runs the trials come from (one for a run's own results).
    pub run_ids: Vec<String>,
    /// The suite id.
    pub suite_id: String,
    /// The suite content hashes seen (one unless the rows span runs of changed suites).
    pub suite_hashes: Vec<String>,
    /// The tasks, in the order first seen.
    pub tasks: Vec<TaskInfo>,
    /// Every trial of the run.
    pub overall: Cell,
    /// Per variant, in the order first seen.
    pub variants: Vec<VariantReport>,
    /// Every trial, in input order.
    pub trials: Vec<TrialSummary>,
    /// The promotion gates of a finished release run of a suite with `[promotion]`, as
    /// `compare --gate` reports them; absent for every other run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gates: Option<GateReport>,
}

/// A run's report without its list of trials (`results.report.json`): the rates a reader needs,
/// in a size that does not grow with the run, written straight from the report it borrows.
#[derive(Debug, Serialize)]
pub struct ReportWithoutTrials<'a> {
    /// [`RunReport::schema_version`].
    pub schema_version: u32,
    /// [`RunReport::run_ids`].
    pub run_ids: &'a [String],
    /// [`RunReport::suite_id`].
    pub suite_id: &'a str,
    /// [`RunReport::suite_hashes`].
    pub suite_hashes: &'a [String],
    /// [`RunReport::tasks`].
    pub tasks: &'a [TaskInfo],
    /// [`RunReport::overall`].
    pub overall: &'a Cell,
    /// [`RunReport::variants`].
    pub variants: &'a [VariantReport],
    /// [`RunReport::gates`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gates: Option<&'a GateReport>,
}

impl RunReport {
    /// The report without its list of trials, for `results.report.json`.
    pub fn without_trials(&self) -> ReportWithoutTrials<'_> {
        ReportWithoutTrials {
            schema_version: self.schema_version,
            run_ids: &self.run_ids,
            suite_id: &self.suite_id,
            suite_hashes: &self.suite_hashes,
            tasks: &self.tasks,
            overall: &self.overall,
            variants: &self.variants,
            gates: self.gates.as_ref(),
        }
    }

    /// The variant's report.
    pub fn variant(&self, variant: &str) -> Option<&VariantReport> {
        self.variants.iter().find(|v| v.variant == variant)
    }

    /// The cell of `variant` on `task`.
    pub fn cell(&self, variant: &str, task: &str) -> Option<&Cell> {
        self.variant(variant)?.task(task)
    }
}

/// Aggregates the trials of one suite: per variant × task, per variant, and overall.
/// Variants and tasks keep the order in which they first appear in `rows`.
pub fn aggregate(rows: &[TrialRow]) -> Result<RunReport, AggregateError> {
    let mut aggregator = Aggregator::default();
    for r in rows {
        aggregator.add(r)?;
    }
    aggregator.finish()
}

/// Builds the [`RunReport`] of trials given one at a time, holding only what the report needs
/// (counts, sums, the metric values medians are taken over, and each trial's summary line),
/// never the rows themselves: the report of a 100,000-trial run costs a few bytes per trial.
///
/// Gives exactly what [`aggregate`] gives for the same rows in the same order.
#[derive(Debug, Default)]
pub struct Aggregator {
    suite_id: Option<String>,
    run_ids: Vec<String>,
    suite_hashes: Vec<String>,
    tasks: Vec<TaskInfo>,
    /// Each variant with its overall cell, in the order first seen.
    variants: Vec<(String, CellAcc)>,
    overall: CellAcc,
    /// (variant index, task index) → the cell; the only level that keeps metric values.
    cells: BTreeMap<(usize, usize), CellAcc>,
    trials: Vec<TrialSummary>,
}

impl Aggregator {
    /// Adds one trial. Fails when it comes from another suite than the first trial.
    pub fn add(&mut self, r: &TrialRow) -> Result<(), AggregateError> {
        match &self.suite_id {
            None => self.suite_id = Some(r.suite_id.clone()),
            Some(first) if *first != r.suite_id => {
                return Err(AggregateError::MixedSuites {
                    first: first.clone(),
                    other: r.suite_id.clone(),
                })
            }
            Some(_) => {}
        }
        if !self.run_ids.contains(&r.run_id) {
            self.run_ids.push(r.run_id.clone());
        }
        if !self.suite_hashes.contains(&r.suite_hash) {
            self.suite_hashes.push(r.suite_hash.clone());
        }
        let task = position_or_push(
            &mut self.tasks,
            |t| t.id == r.task,
            || TaskInfo {
                id: r.task.clone(),
                expect: r.expect.into(),
            },
        );
        let variant = position_or_push(
            &mut self.variants,
            |(v, _)| *v == r.variant,
            || (r.variant.clone(), CellAcc::default()),
        );
        self.overall.add(r, false);
        self.variants[variant].1.add(r, false);
        self.cells.entry((variant, task)).or_default().add(r, true);
        self.trials.push(TrialSummary::from(r));
        Ok(())
    }

    /// The report. Fails when no trial was added, or when one trial was added twice.
    pub fn finish(self) -> Result<RunReport, AggregateError> {
        let suite_id = self.suite_id.ok_or(AggregateError::NoTrials)?;
        let mut order: Vec<usize> = (0..self.trials.len()).collect();
        let key = |i: &usize| (&self.trials[*i].run_id, &self.trials[*i].trial_id);
        order.sort_by(|a, b| key(a).cmp(&key(b)));
        if let Some(w) = order.windows(2).find(|w| key(&w[0]) == key(&w[1])) {
            let t = &self.trials[w[1]];
            return Err(AggregateError::DuplicateTrial {
                run_id: t.run_id.clone(),
                trial_id: t.trial_id.clone(),
            });
        }
        drop(order);
        let mut everything = Samples::default();
        let variants = self
            .variants
            .into_iter()
            .enumerate()
            .map(|(vi, (variant, acc))| {
                let mut mine = Samples::default();
                let tasks = self
                    .tasks
                    .iter()
                    .enumerate()
                    .filter_map(|(ti, t)| {
                        let cell = self.cells.get(&(vi, ti))?;
                        mine.extend(&cell.samples);
                        Some(TaskCell {
                            task: t.id.clone(),
                            cell: cell.finish(&cell.samples),
                        })
                    })
                    .collect();
                everything.extend(&mine);
                VariantReport {
                    overall: acc.finish(&mine),
                    variant,
                    tasks,
                }
            })
            .collect();
        Ok(RunReport {
            schema_version: SCHEMA_VERSION,
            run_ids: self.run_ids,
            suite_id,
            suite_hashes: self.suite_hashes,
            overall: self.overall.finish(&everything),
            tasks: self.tasks,
            variants,
            trials: self.trials,
            gates: None,
        })
    }
}

/// The position of the first item of `items` that `is_it`, pushing `make()` when there is none.
fn position_or_push<T>(
    items: &mut Vec<T>,
    is_it: impl Fn(&T) -> bool,
    make: impl FnOnce() -> T,
) -> usize {
    items.iter().position(is_it).unwrap_or_else(|| {
        items.push(make());
        items.len() - 1
    })
}

/// The distinct keys of `items` in the order first seen, each with its first value.
pub(crate) fn first_seen<V>(items: impl IntoIterator<Item = (String, V)>) -> Vec<(String, V)> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for (k, v) in items {
        if seen.insert(k.clone()) {
            out.push((k, v));
        }
    }
    out
}
