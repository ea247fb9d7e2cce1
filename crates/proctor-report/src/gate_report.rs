//! The gates' findings as a document: every promotion check of a candidate with the numbers it
//! used (what `compare --gate` writes and what a release run's `results.json` carries).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use proctor_suite::model::Statistic;

/// A number a gate used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GateNumber {
    /// What it is.
    pub name: String,
    /// Its value; `null` when not measured (or a relative change from an exact zero).
    pub value: Option<f64>,
    /// The n it was taken over, where it has one.
    pub n: Option<u64>,
    /// True for a relative change from an exact zero baseline: no finite value exists.
    pub unbounded: bool,
}

impl GateNumber {
    pub(crate) fn of(name: &str, value: Option<f64>, n: Option<u64>) -> GateNumber {
        GateNumber {
            name: name.to_string(),
            value,
            n,
            unbounded: false,
        }
    }
}

/// One promotion check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Gate {
    /// The check's name.
    pub name: String,
    /// Whether it passed.
    pub passed: bool,
    /// The statistic of a per-trial metric the gate compared (`no_regression` and
    /// `primary_metric` on an interface or cost metric); absent for rates and other gates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statistic: Option<Statistic>,
    /// The numbers it used.
    pub numbers: Vec<GateNumber>,
    /// One line a person reads.
    pub explanation: String,
}

/// Every promotion check of a candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GateReport {
    /// The version of this document's shape.
    pub schema_version: u32,
    /// The baseline variant.
    pub baseline: String,
    /// The candidate variant.
    pub candidate: String,
    /// Whether every gate passed.
    pub passed: bool,
    /// The thresholds the gates used, as `name = value` in the order the gates use them
    /// (`underpowered_below = 8`, `minimum_absolute_improvement = 0.05`, ...): what the
    /// PASSED or FAILED line shows. Absent in reports made before it was recorded.
    #[serde(default)]
    pub thresholds: Vec<String>,
    /// The gates, in order.
    pub gates: Vec<Gate>,
}

impl GateReport {
    /// The gates that failed.
    pub fn failed(&self) -> impl Iterator<Item = &Gate> {
        self.gates.iter().filter(|g| !g.passed)
    }
}
