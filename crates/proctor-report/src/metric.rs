//! The metrics a promotion may name ([`proctor_suite::model::METRICS`], a per-trial one with an
//! optional `:STATISTIC`), read from a cell, and the direction in which each one is better.

use proctor_suite::model::{Direction, MetricRef, Statistic};

use crate::aggregate::Cell;
use crate::stats::{Rate, Summary};

/// One metric's value in a cell, with the n it was taken over.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricValue {
    /// The value: a rate as a fraction 0..1, a per-trial metric's statistic in its unit, the
    /// rubric mean as a fraction of the maximum; `None` when nothing was measured.
    pub value: Option<f64>,
    /// The n it was taken over.
    pub n: u64,
    /// The rate behind a rate metric, for display.
    pub rate: Option<Rate>,
    /// The statistic of a per-trial metric (`None` for a rate or the rubric mean).
    pub statistic: Option<Statistic>,
}

impl MetricValue {
    fn rate(r: Rate) -> MetricValue {
        MetricValue {
            value: r.value(),
            n: r.n,
            rate: Some(r),
            statistic: None,
        }
    }
    fn per_trial(s: Summary, statistic: Statistic) -> MetricValue {
        MetricValue {
            value: s.get(statistic),
            n: s.n,
            rate: None,
            statistic: Some(statistic),
        }
    }
}

/// The value of metric `written` in `cell`: a metric name, or a per-trial metric's
/// `NAME:STATISTIC`; `None` when it names no metric proctor reports, names a statistic that is
/// not one, or gives a statistic to a rate.
///
/// `refusal_rate` counts every refusal (honest and wrong); `rubric_mean` is the mean of each
/// trial's total as a fraction of its maximum (comparable across tasks); `tokens` is input +
/// output tokens; the interface and cost metrics are taken over graded trials, by their mean
/// unless another statistic is named.
pub fn metric(cell: &Cell, written: &str) -> Option<MetricValue> {
    let r = &cell.rates;
    let m = &cell.summaries;
    let name = MetricRef::split(written);
    if name.is_per_trial() {
        let statistic = name.statistic()?;
        let summary = match name.metric {
            "wrong_turns" => m.wrong_turns,
            "calls" => m.calls,
            "errors" => m.errors,
            "repeats" => m.repeats,
            "undone" => m.undone,
            "denied" => m.denied,
            "recoveries" => m.recoveries,
            "help_calls" => m.help_calls,
            "asks" => m.asks,
            "tokens" => m.tokens,
            "requests" => m.requests,
            "wall_seconds" => m.wall_seconds,
            "agent_cpu_seconds" => m.agent_cpu_seconds,
            _ => return None,
        };
        return Some(MetricValue::per_trial(summary, statistic));
    }
    if name.statistic.is_some() {
        return None;
    }
    Some(match name.metric {
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
            statistic: None,
        },
        _ => return None,
    })
}

/// The direction in which metric `name` is better, used for `no_regression`; `None` for a
/// name proctor does not report. A `:STATISTIC` after the name is ignored: every statistic of a
/// metric is better in the metric's direction.
///
/// Higher is better for `completion_rate`, `success_rate`, `rubric_mean` and `recoveries`;
/// lower is better for everything else, including `refusal_rate` and `ask_rate` (declining or
/// asking more often is a regression of its own; where declining is right, `success_rate`
/// already counts it as a success).
pub fn better_when(name: &str) -> Option<Direction> {
    match MetricRef::split(name).metric {
        "completion_rate" | "success_rate" | "rubric_mean" | "recoveries" => {
            Some(Direction::Higher)
        }
        "failure_rate" | "wrong_rate" | "refusal_rate" | "ask_rate" | "abandoned_rate"
        | "wrong_turns" | "calls" | "errors" | "repeats" | "undone" | "denied" | "help_calls"
        | "asks" | "tokens" | "requests" | "wall_seconds" | "agent_cpu_seconds" => {
            Some(Direction::Lower)
        }
        _ => None,
    }
}

/// Whether `name` is a rate (its values are fractions 0..1, shown in percentage points).
pub fn is_rate(name: &str) -> bool {
    let name = MetricRef::split(name).metric;
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
        for written in proctor_suite::model::metric_spellings() {
            assert!(metric(&cell, &written).is_some(), "{written}");
        }
        assert!(metric(&cell, "calls:mode").is_none());
        assert!(metric(&cell, "success_rate:mean").is_none());
    }

    #[test]
    fn a_per_trial_metric_is_compared_by_its_mean_unless_a_statistic_is_named() {
        let cell = crate::aggregate::Cell::of([]);
        assert_eq!(
            metric(&cell, "wrong_turns").and_then(|v| v.statistic),
            Some(Statistic::Mean)
        );
        for st in Statistic::ALL {
            let written = format!("calls:{}", st.as_str());
            assert_eq!(metric(&cell, &written).and_then(|v| v.statistic), Some(st));
        }
        assert_eq!(
            metric(&cell, "failure_rate").and_then(|v| v.statistic),
            None
        );
    }
}
