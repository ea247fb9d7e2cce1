//! Where a comparison's arms come from, and what a reader must know about it: the run, variant
//! and scoring of each arm, the suite each arm's agent ran against and the suite whose rules
//! scored it, the parts of the suite that differ between the arms, and the runs of the same
//! suite and variants in the store that the comparison leaves out.
//!
//! A comparison's [`Warning`]s each carry a [`WarningKind`]; the kinds that say the arms were
//! picked or scored apart ([`WarningKind::mixes_runs`]) fail `compare --gate` unless the author
//! says they meant it (`--allow-mixed-runs`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::gate_report::{Gate, GateReport};
use crate::side::Side;

/// What a comparison warning is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WarningKind {
    /// Other runs of the suite in the store hold an arm's variant and are in no number of the
    /// comparison: the arms may have been picked among them.
    RunsLeftOut,
    /// The arms were scored by different suite contents (a rescore with another suite, or runs
    /// of different suite versions).
    DifferentRules,
    /// The arms' agents ran against different suite contents (prompts, fixture, settings may
    /// differ), though their rules are the same.
    DifferentSuiteRun,
    /// Trials of one arm have no partner in the other.
    Unmatched,
    /// A task only one arm ran.
    TaskLeftOut,
}

impl WarningKind {
    /// The label used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            WarningKind::RunsLeftOut => "runs_left_out",
            WarningKind::DifferentRules => "different_rules",
            WarningKind::DifferentSuiteRun => "different_suite_run",
            WarningKind::Unmatched => "unmatched",
            WarningKind::TaskLeftOut => "task_left_out",
        }
    }

    /// Whether a warning of this kind says the arms were picked from several runs or scored
    /// apart: `compare --gate` fails on it unless `--allow-mixed-runs` is given.
    pub fn mixes_runs(self) -> bool {
        matches!(
            self,
            WarningKind::RunsLeftOut | WarningKind::DifferentRules | WarningKind::DifferentSuiteRun
        )
    }
}

/// A thing a reader of a comparison should know, by kind, with its sentence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Warning {
    /// What it is about.
    pub kind: WarningKind,
    /// The sentence, with the runs, hashes and parts it names.
    pub message: String,
}

impl Warning {
    /// A warning of `kind` saying `message`.
    pub fn new(kind: WarningKind, message: impl Into<String>) -> Warning {
        Warning {
            kind,
            message: message.into(),
        }
    }
}

/// Where one arm's trials come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ArmSource {
    /// The run.
    pub run_id: String,
    /// The variant.
    pub variant: String,
    /// The scoring read: `original`, or `rescore N (DATE UTC)`.
    pub scoring: String,
    /// Whether that scoring is a rescore.
    pub rescored: bool,
    /// The hash of the suite the run's agents ran against.
    pub ran_suite_hash: String,
    /// The hash of the suite whose rules scored the trials read (the rescore's suite for a
    /// rescore, else the one the run ran against).
    pub scored_suite_hash: String,
}

/// Other runs of the suite in the store holding a variant of the comparison, left out of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RunsLeftOut {
    /// The variant.
    pub variant: String,
    /// The arms it is the variant of.
    pub arms: Vec<Side>,
    /// The runs left out, oldest first.
    pub runs: Vec<String>,
}

/// The suite contents two arms differ by: the parts named (`checks of task t`, `holdout of task
/// t`, `prompt of task t`, `fixture`, ...), or why they cannot be named.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SuiteDifference {
    /// Arm A's suite hash.
    pub a: String,
    /// Arm B's suite hash.
    pub b: String,
    /// The parts that differ, each once, in suite order; empty when they cannot be named.
    pub parts: Vec<String>,
    /// Why the parts cannot be named (a run that keeps no copy of its suite); absent when they
    /// are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown: Option<String>,
}

impl SuiteDifference {
    /// The parts as a phrase: `they differ in X, Y` or why they cannot be named.
    fn phrase(&self) -> String {
        match (&self.unknown, self.parts.is_empty()) {
            (Some(why), _) => format!("which parts differ is not known: {why}"),
            (None, true) => {
                "no kept file differs (the suites differ outside what runs keep)".into()
            }
            (None, false) => format!("they differ in {}", self.parts.join(", ")),
        }
    }
}

/// Where a comparison's arms come from, and what was left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Provenance {
    /// Arm A's source.
    pub a: ArmSource,
    /// Arm B's source.
    pub b: ArmSource,
    /// The suite id (runs of it are the ones counted as left out).
    pub suite_id: String,
    /// Runs of the suite holding an arm's variant that the comparison leaves out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs_left_out: Vec<RunsLeftOut>,
    /// How the suites whose rules scored the arms differ; absent when they are the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules_differ: Option<SuiteDifference>,
    /// How the suites the arms' agents ran against differ; absent when they are the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ran_differ: Option<SuiteDifference>,
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

impl ArmSource {
    /// `run R variant V, original scoring (suite H…)`.
    pub fn describe(&self) -> String {
        let rules = if self.scored_suite_hash == self.ran_suite_hash {
            format!("suite {}…", short(&self.ran_suite_hash))
        } else {
            format!(
                "ran against suite {}…, scored by suite {}…",
                short(&self.ran_suite_hash),
                short(&self.scored_suite_hash)
            )
        };
        format!(
            "run {} variant `{}`, {} scoring ({rules})",
            self.run_id,
            self.variant,
            if self.rescored {
                self.scoring.clone()
            } else {
                "original".into()
            }
        )
    }
}

impl Provenance {
    /// Whether the arms come from different runs.
    pub fn different_runs(&self) -> bool {
        self.a.run_id != self.b.run_id
    }

    /// The warnings it gives, in the order: runs left out, different rules, different suites
    /// run against.
    pub fn warnings(&self) -> Vec<Warning> {
        let mut out = Vec::new();
        for l in &self.runs_left_out {
            let arms = l
                .arms
                .iter()
                .map(|s| format!("{s:?}"))
                .collect::<Vec<_>>()
                .join(" and ");
            out.push(Warning::new(
                WarningKind::RunsLeftOut,
                format!(
                    "{} other run(s) of suite `{}` with variant `{}` (arm {arms}) in the store were left out: {}",
                    l.runs.len(),
                    self.suite_id,
                    l.variant,
                    l.runs.join(", ")
                ),
            ));
        }
        if let Some(d) = &self.rules_differ {
            let how = |s: &ArmSource| {
                if s.rescored {
                    format!("{} of run {}", s.scoring, s.run_id)
                } else {
                    format!("run {}'s own scoring", s.run_id)
                }
            };
            out.push(Warning::new(
                WarningKind::DifferentRules,
                format!(
                    "the arms were scored by different suite versions: A by suite {}… ({}), B by suite {}… ({}); {}",
                    short(&d.a),
                    how(&self.a),
                    short(&d.b),
                    how(&self.b),
                    d.phrase()
                ),
            ));
        }
        if let Some(d) = &self.ran_differ {
            out.push(Warning::new(
                WarningKind::DifferentSuiteRun,
                format!(
                    "the arms' agents ran against different suite versions: A (run {}) suite {}…, B (run {}) suite {}…; {}",
                    self.a.run_id,
                    short(&d.a),
                    self.b.run_id,
                    short(&d.b),
                    d.phrase()
                ),
            ));
        }
        out
    }
}

/// The warnings among `warnings` that make a comparison mixed ([`WarningKind::mixes_runs`]).
pub fn mixed(warnings: &[Warning]) -> Vec<&Warning> {
    warnings.iter().filter(|w| w.kind.mixes_runs()).collect()
}

/// The name of the gate [`provenance_gate`] adds.
pub const PROVENANCE_GATE: &str = "provenance";

/// Adds to `report` the `provenance` gate of a comparison whose warnings are `warnings`, when it
/// is mixed ([`mixed`]): failed, naming the kinds, unless `allowed` (`--allow-mixed-runs`),
/// when it passes and still names them. An unmixed comparison's gates are left as they are.
pub fn provenance_gate(report: &mut GateReport, warnings: &[Warning], allowed: bool) {
    let found = mixed(warnings);
    if found.is_empty() {
        return;
    }
    let mut kinds: Vec<&str> = Vec::new();
    for w in &found {
        if !kinds.contains(&w.kind.as_str()) {
            kinds.push(w.kind.as_str());
        }
    }
    let explanation = if allowed {
        format!(
            "the comparison mixes runs ({}), allowed by --allow-mixed-runs: see the warnings",
            kinds.join(", ")
        )
    } else {
        format!(
            "the comparison mixes runs ({}): its arms may be picked among runs or scored apart (see the warnings); give --allow-mixed-runs if this is what you meant",
            kinds.join(", ")
        )
    };
    report.gates.push(Gate {
        name: PROVENANCE_GATE.to_string(),
        passed: allowed,
        statistic: None,
        numbers: Vec::new(),
        explanation,
    });
    report.passed &= allowed;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(run: &str, variant: &str, ran: &str, scored: &str) -> ArmSource {
        ArmSource {
            run_id: run.into(),
            variant: variant.into(),
            scoring: if ran == scored {
                "original".into()
            } else {
                "rescore 1 (2026-12-05 00:00:00 UTC)".into()
            },
            rescored: ran != scored,
            ran_suite_hash: ran.into(),
            scored_suite_hash: scored.into(),
        }
    }

    #[test]
    fn one_run_with_nothing_left_out_gives_no_warning() {
        let p = Provenance {
            a: source("r1", "a", "h1", "h1"),
            b: source("r1", "b", "h1", "h1"),
            suite_id: "s".into(),
            runs_left_out: Vec::new(),
            rules_differ: None,
            ran_differ: None,
        };
        assert!(p.warnings().is_empty());
        assert!(!p.different_runs());
    }

    #[test]
    fn left_out_runs_and_a_rescore_are_named_and_mix_the_comparison() {
        let p = Provenance {
            a: source("r2", "a", "h1", "h1"),
            b: source("r3", "b", "h1", "h2"),
            suite_id: "s".into(),
            runs_left_out: vec![RunsLeftOut {
                variant: "b".into(),
                arms: vec![Side::B],
                runs: vec!["r1".into(), "r4".into(), "r5".into()],
            }],
            rules_differ: Some(SuiteDifference {
                a: "h1".into(),
                b: "h2".into(),
                parts: vec!["checks of task `t`".into()],
                unknown: None,
            }),
            ran_differ: None,
        };
        let w = p.warnings();
        assert_eq!(w.len(), 2);
        assert_eq!(w[0].kind, WarningKind::RunsLeftOut);
        assert_eq!(
            w[0].message,
            "3 other run(s) of suite `s` with variant `b` (arm B) in the store were left out: r1, r4, r5"
        );
        assert_eq!(w[1].kind, WarningKind::DifferentRules);
        assert!(
            w[1].message
                .contains("rescore 1 (2026-12-05 00:00:00 UTC) of run r3")
                && w[1].message.contains("they differ in checks of task `t`"),
            "{}",
            w[1].message
        );
        assert_eq!(mixed(&w).len(), 2);
        assert!(mixed(&[Warning::new(WarningKind::Unmatched, "x")]).is_empty());
    }

    fn report() -> GateReport {
        GateReport {
            schema_version: crate::SCHEMA_VERSION,
            baseline: "a".into(),
            candidate: "b".into(),
            passed: true,
            thresholds: Vec::new(),
            gates: Vec::new(),
        }
    }

    #[test]
    fn the_provenance_gate_fails_a_mixed_comparison_unless_allowed() {
        let left_out = [Warning::new(WarningKind::RunsLeftOut, "r1 left out")];
        let mut r = report();
        provenance_gate(&mut r, &left_out, false);
        assert!(!r.passed);
        assert_eq!(r.gates.len(), 1);
        assert_eq!(r.gates[0].name, PROVENANCE_GATE);
        assert!(r.gates[0].explanation.contains("(runs_left_out)"));
        let mut r = report();
        provenance_gate(&mut r, &left_out, true);
        assert!(r.passed && r.gates[0].passed);
        assert!(r.gates[0]
            .explanation
            .contains("allowed by --allow-mixed-runs"));
        // A comparison that is not mixed keeps its gates as they are.
        let mut r = report();
        provenance_gate(&mut r, &[Warning::new(WarningKind::Unmatched, "x")], false);
        assert!(r.passed && r.gates.is_empty());
    }
}
