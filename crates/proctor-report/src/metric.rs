//! The metrics a promotion may name ([`proctor_suite::model::METRICS`]), read from a cell, and
//! the direction in which each one is better.

use proctor_suite::model::Direction;

use crate::aggregate::Cell;
use crate::stats::{Median, Rate};

/// One metric's value in a cell, with the n it was taken over.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricValue {
    /// The value: a rate as a fraction 0..1, a median in its unit, the rubric mean as a
    /// fraction of the maximum; `None` when nothing was measured.
    pub value: Option<f64>,
    /// The n it was taken over.
    pub n: u64,
    /// The rate behind a rate metric, for display.
    pub rate: Option<Rate>,
}

impl MetricValue {
    fn rate(r: Rate) -> MetricValue {
        MetricValue {
            value: r.value(),
            n: r.n,
            rate: Some(r),
        }
    }
    fn median(m: Median) -> MetricValue {
        MetricValue {
            value: m.median,
            n: m.n,
            rate: None,
        }
    }
}

/// The value of metric `name` in `cell`; `None` when `name` is not a metric proctor reports.
///
/// `refusal_rate` counts every refusal (honest and wrong); `rubric_mean` is the mean of each
/// trial's total as a fraction of its maximum (comparable across tasks); `tokens` is input +
/// output tokens; the interface and cost metrics are medians over graded trials.
pub fn metric(cell: &Cell, name: &str) -> Option<MetricValue> {
    let r = &cell.rates;
    let m = &cell.medians;
    Some(match name {
        "completion_rate" => MetricValue::rate(r.completion),
        "success_rate" => MetricValue::rate(r.success),
        "failure_rate" => MetricValue::rate(r.failure),
        "wrong_rate" => MetricValue::rate(r.wrong),
        "refusal_rate" => MetricValue::rate(r.refusal),
        "ask_rate" => MetricValue::rate(r.ask),
        "abandoned_rate" => MetricValue::rate(r.abandoned),
        "rubric_mean" => MetricValue {
            value: cell.rubric.mean_fraction,
            n: cell.rubric.n,
            rate: None,
        },
        "wrong_turns" => MetricValue::median(m.wrong_turns),
        "calls" => MetricValue::median(m.calls),
        "errors" => MetricValue::median(m.errors),
        "repeats" => MetricValue::median(m.repeats),
        "undone" => MetricValue::median(m.undone),
        "denied" => MetricValue::median(m.denied),
        "recoveries" => MetricValue::median(m.recoveries),
        "help_calls" => MetricValue::median(m.help_calls),
        "tokens" => MetricValue::median(m.tokens),
        "requests" => MetricValue::median(m.requests),
        "wall_seconds" => MetricValue::median(m.wall_seconds),
        "agent_cpu_seconds" => MetricValue::median(m.agent_cpu_seconds),
        _ => return None,
    })
}

/// The direction in which metric `name` is better, used for `no_regression`; `None` for a
/// name proctor does not report.
///
/// Higher is better for `completion_rate`, `success_rate`, `rubric_mean` and `recoveries`;
/// lower is better for everything else, including `refusal_rate` and `ask_rate` (declining or
/// asking more often is a regression of its own; where declining is right, `success_rate`
/// already counts it as a success).
pub fn better_when(name: &str) -> Option<Direction> {
    match name {
        "completion_rate" | "success_rate" | "rubric_mean" | "recoveries" => {
            Some(Direction::Higher)
        }
        "failure_rate" | "wrong_rate" | "refusal_rate" | "ask_rate" | "abandoned_rate"
        | "wrong_turns" | "calls" | "errors" | "repeats" | "undone" | "denied" | "help_calls"
        | "tokens" | "requests" | "wall_seconds" | "agent_cpu_seconds" => Some(Direction::Lower),
        _ => None,
    }
}

/// Whether `name` is a rate (its values are fractions 0..1, shown in percentage points).
pub fn is_rate(name: &str) -> bool {
    name.ends_with("_rate") || name == "rubric_mean"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_a_suite_may_name_is_readable_and_has_a_direction() {
        let cell = crate::aggregate::Cell::of([]);
        for name in proctor_suite::model::METRICS {
            assert!(metric(&cell, name).is_some(), "{name}");
            assert!(better_when(name).is_some(), "{name}");
        }
        assert!(metric(&cell, "vibes").is_none());
    }
}
