//! The report stage: aggregate scored trials, compare two arms trial by trial, evaluate
//! promotion gates, and render the results as Markdown, JSON or terminal text.
//!
//! Every function here is pure: the caller reads the store and writes the files. The rules of
//! docs/metrics.md are enforced here and pinned by this crate's tests: every rate travels with its n
//! and all rates of a cell share one n (graded = trials − errored − ungradeable); an honest
//! refusal is not a failure; comparisons below the power threshold say `underpowered`; cost
//! ledgers are never summed into one score and a missing price makes money `incomplete`; a
//! relative change from an exact zero is `null` with `relative_unbounded = true`, and JSON never
//! holds Infinity or NaN.

pub mod aggregate;
pub mod compare;
pub mod export;
pub mod gate;
pub mod gate_report;
pub mod input;
pub mod metric;
pub mod provenance;
pub mod render;
pub mod side;
pub mod stats;

pub use aggregate::{
    aggregate, AggregateError, Aggregator, Cell, CostLedgers, CountLedger, ExpectedBehaviour,
    Medians, Money, OutcomeCounts, Rates, ReportWithoutTrials, RubricMean, RunReport,
    SecondsLedger, Summaries, TaskCell, TaskInfo, TokenLedgers, TrialSummary, VariantReport,
};
pub use compare::{
    compare, ArmInfo, ArmStats, Assessment, Change, CompareError, CompareOptions, Comparison,
    ComparisonCell, ComparisonVerdict, Differences, Discordance, LeftOutTask, MatchedPair,
    PairTrial, PassK, TaskComparison, Unmatched, DEFAULT_PASS_K_SHOWN,
};
pub use gate::{gate, GateError};
pub use gate_report::{Gate, GateNumber, GateReport};
pub use input::{Cost, Mutation, Tokens, TrialRow};
pub use provenance::{
    mixed, provenance_gate, ArmSource, Provenance, RunsLeftOut, SuiteDifference, Warning,
    WarningKind, PROVENANCE_GATE,
};
pub use render::{
    changes_section, escape_line, escape_text, escape_text_line, ChangesOf, Exporter, Json,
    Markdown, Table, Terminal,
};
pub use side::Side;
pub use stats::{Median, Rate, Statistic, Summary};

/// The version of the shape of every JSON document this crate writes.
///
/// 2 added each cell's `summaries` (median, mean and total of every per-trial metric, with n),
/// each comparison cell's `discordance` (the matched pairs by which arm succeeded) and a gate's
/// `statistic`. Documents of version 1 lack them and still read: a missing `summaries` reads
/// with every n = 0, a missing `discordance` with every count 0, a missing `statistic` as none.
///
/// 3: a comparison's `warnings` are typed (`kind` and `message`) and it has a `provenance`;
/// each change counts its pairs (`b_higher`, `b_lower`, `needs`), and the `noise` assessment
/// is gone (`no_clear_difference` or `underpowered` say it); a gate report lists its
/// `thresholds`, and a run report holds a release run's `gates`. Version 2 documents still
/// read (the new members are optional), except a comparison's warnings, which were plain text.
pub const SCHEMA_VERSION: u32 = 3;

/// The JSON Schema of the results document (`results.json`, a [`RunReport`]), for the CLI to
/// check into the repository and to test the written files against.
pub fn json_schema() -> serde_json::Value {
    schemars::schema_for!(RunReport).to_value()
}

/// The JSON Schema of a comparison document ([`Comparison`]).
pub fn comparison_json_schema() -> serde_json::Value {
    schemars::schema_for!(Comparison).to_value()
}

/// The JSON Schema of a promotion document ([`GateReport`]).
pub fn gate_json_schema() -> serde_json::Value {
    schemars::schema_for!(GateReport).to_value()
}
