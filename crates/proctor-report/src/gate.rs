//! Promotion gates (docs/metrics.md, "Gates").
//!
//! The arms are the variants of the given rows: the `[promotion]` baseline and candidate, and
//! every other variant as a control. (For `compare RUN_A RUN_B --gate`, pass the baseline and
//! controls from one run and the candidate from the other; matching still applies.)
//!
//! The gates, in order, each reported with the numbers it used and a one-line explanation:
//! 1. `sample_size`: every task has at least `underpowered_below` matched pairs graded in both
//!    the baseline and the candidate (a task only one arm ran has none). Pairs are counted per
//!    task, never pooled: three tasks of 3 pairs each are three comparisons that conclude
//!    nothing, not one of 9. A comparison below the power threshold cannot promote.
//! 2. `nonzero_success`: the candidate has at least one task success.
//! 3. `strongest_control`: the candidate's success rate is at least the strongest control's
//!    minus `strongest_success_tolerance` (0 when not set). The strongest control is the arm
//!    with the highest success rate among all arms except the candidate (the baseline included).
//!    These two gates use each arm's whole set of trials.
//! 4. `primary_metric`: the primary metric improved, in the configured `direction`, by at least
//!    `minimum_relative_improvement` OR `minimum_absolute_improvement` (whichever are set; when
//!    neither is set, any improvement above 0). Measured on the matched trials of baseline and
//!    candidate. From an exact zero baseline the relative improvement is unbounded
//!    (`relative = null`, `relative_unbounded = true`): a strictly positive improvement from 0
//!    passes the relative minimum, and no improvement never does.
//! 5. `no_regression:METRIC`, one per named metric: the candidate is not worse than the baseline
//!    in the metric's own better direction ([`crate::metric::better_when`]), on the matched
//!    trials. A per-trial metric (interface or cost) is compared by its mean, so that one task's
//!    tail of wrong turns fails the gate even where both medians are 0, unless the suite names
//!    another statistic (`calls:median`, `tokens:total`). A metric not measured in both arms
//!    fails: no regression cannot be shown.
//! 6. `no_regression_per_task:METRIC`, one per metric of `no_regression_per_task`: as
//!    `no_regression`, on every task's own matched trials; it fails naming each task where the
//!    candidate is worse (or where the metric is not measured in both arms), so a regression on
//!    one task cannot average away over the others.
//! 7. `complete_costs`: when `require_complete_costs`, every arm's money ledger is complete
//!    (known or not applicable); otherwise it passes as "not required".
//!
//! Rates are fractions (0.05 = 5 points). Comparisons allow 1e-9 for floating-point rounding.

use proctor_suite::model::{Direction, MetricRef, Promotion, ReportConfig};
use thiserror::Error;

use crate::aggregate::{first_seen, Cell, Money};
use crate::compare::{compare, CompareError, CompareOptions, Comparison};
use crate::gate_report::{Gate, GateNumber, GateReport};
use crate::input::TrialRow;
use crate::metric::{better_when, is_rate, metric, MetricValue};
use crate::stats::{number, Rate};
use crate::SCHEMA_VERSION;

/// Floating-point slack in gate comparisons.
const EPS: f64 = 1e-9;

/// Why the gates cannot be evaluated at all.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GateError {
    /// The baseline or candidate names no variant among the trials.
    #[error("promotion {role} `{variant}` has no trials (variants present: {present})")]
    UnknownVariant {
        /// `baseline` or `candidate`.
        role: &'static str,
        /// The variant id named.
        variant: String,
        /// The variants present.
        present: String,
    },
    /// The baseline and the candidate are the same variant.
    #[error("promotion baseline and candidate are the same variant `{0}`")]
    SameArm(String),
    /// A metric name proctor does not report.
    #[error("`{0}` is not a metric proctor reports")]
    UnknownMetric(String),
    /// Baseline and candidate cannot be matched.
    #[error(transparent)]
    Compare(#[from] CompareError),
}

fn show(v: &MetricValue, name: &str) -> String {
    match (v.rate, v.value) {
        (Some(r), _) => r.to_string(),
        (None, Some(x)) if is_rate(name) => format!("{:.0}% (n={})", x * 100.0, v.n),
        (None, Some(x)) => format!("{} (n={})", number(x), v.n),
        (None, None) => format!("- (n={})", v.n),
    }
}

/// How a gate's explanation names the metric: `` `calls` `` for a rate, `` `calls` mean `` for
/// a statistic of a per-trial metric.
fn subject(name: &str, v: &MetricValue) -> String {
    let metric = MetricRef::split(name).metric;
    match v.statistic {
        Some(st) => format!("`{metric}` {}", st.as_str()),
        None => format!("`{metric}`"),
    }
}

fn amount(x: f64, name: &str) -> String {
    if is_rate(name) {
        format!("{:.1} points", x * 100.0)
    } else {
        number(x)
    }
}

/// Evaluates every promotion gate over the trials of a run (its variants are the arms).
pub fn gate(
    rows: &[TrialRow],
    promotion: &Promotion,
    config: &ReportConfig,
) -> Result<GateReport, GateError> {
    let variants: Vec<String> = first_seen(rows.iter().map(|r| (r.variant.clone(), ())))
        .into_iter()
        .map(|x| x.0)
        .collect();
    let (baseline, candidate) = check_promotion(promotion, &variants)?;
    let primary = promotion.primary_metric.get_ref().as_str();
    let of = |v: &str| {
        rows.iter()
            .filter(|r| r.variant == v)
            .cloned()
            .collect::<Vec<_>>()
    };
    let (base_rows, cand_rows) = (of(&baseline), of(&candidate));
    let opts = CompareOptions {
        underpowered_below: config.underpowered_below,
        label_a: Some(baseline.clone()),
        label_b: Some(candidate.clone()),
        variant_tasks: Default::default(),
    };
    let cmp = compare(&base_rows, &cand_rows, &opts)?;
    let (base_m, cand_m) = (&cmp.overall.a.cell, &cmp.overall.b.cell);
    let arms: Vec<(String, Cell)> = variants
        .iter()
        .map(|v| (v.clone(), Cell::of(rows.iter().filter(|r| &r.variant == v))))
        .collect();
    let cand_cell = arms
        .iter()
        .find(|(v, _)| *v == candidate)
        .map(|(_, c)| c.clone())
        .unwrap_or_else(|| Cell::of([]));

    let cs = cand_cell.rates.success;
    let mut gates = vec![
        sample_size_gate(&cmp, base_m, cand_m, config.underpowered_below),
        nonzero_success_gate(cs),
        strongest_control_gate(promotion, &arms, &candidate, cs),
        primary_gate(promotion, primary, base_m, cand_m),
    ];
    for m in &promotion.no_regression {
        gates.push(no_regression_gate(m.get_ref().as_str(), base_m, cand_m)?);
    }
    for m in &promotion.no_regression_per_task {
        gates.push(no_regression_per_task_gate(m.get_ref().as_str(), &cmp)?);
    }
    gates.push(complete_costs_gate(promotion, &arms));

    Ok(GateReport {
        schema_version: SCHEMA_VERSION,
        baseline,
        candidate,
        passed: gates.iter().all(|g| g.passed),
        thresholds: thresholds(promotion, config),
        gates,
    })
}

/// The thresholds the gates use, as `name = value`: the power threshold, the primary metric's
/// minimums, the strongest-control tolerance, and whether complete costs are required.
fn thresholds(promotion: &Promotion, config: &ReportConfig) -> Vec<String> {
    let mut out = vec![format!(
        "underpowered_below = {} per task",
        config.underpowered_below
    )];
    let primary = promotion.primary_metric.get_ref();
    match (
        promotion.minimum_relative_improvement,
        promotion.minimum_absolute_improvement,
    ) {
        (None, None) => out.push(format!("{primary}: any improvement")),
        (rel, abs) => {
            if let Some(r) = rel {
                out.push(format!("minimum_relative_improvement = {}", number(r)));
            }
            if let Some(a) = abs {
                out.push(format!("minimum_absolute_improvement = {}", number(a)));
            }
        }
    }
    out.push(format!(
        "strongest_success_tolerance = {}",
        number(promotion.strongest_success_tolerance.unwrap_or(0.0))
    ));
    if promotion.require_complete_costs {
        out.push("require_complete_costs = true".to_string());
    }
    out
}

/// Checks that the baseline and the candidate are two different variants among `variants`,
/// and that every metric named is one proctor reports; gives the baseline and the candidate.
fn check_promotion(
    promotion: &Promotion,
    variants: &[String],
) -> Result<(String, String), GateError> {
    let baseline = promotion.baseline.get_ref().clone();
    let candidate = promotion.candidate.get_ref().clone();
    for (role, v) in [("baseline", &baseline), ("candidate", &candidate)] {
        if !variants.contains(v) {
            return Err(GateError::UnknownVariant {
                role,
                variant: v.clone(),
                present: variants.join(", "),
            });
        }
    }
    if baseline == candidate {
        return Err(GateError::SameArm(baseline));
    }
    let primary = promotion.primary_metric.get_ref().as_str();
    for m in std::iter::once(primary).chain(
        promotion
            .no_regression
            .iter()
            .chain(&promotion.no_regression_per_task)
            .map(|m| m.get_ref().as_str()),
    ) {
        if better_when(m).is_none() || metric(&Cell::of([]), m).is_none() {
            return Err(GateError::UnknownMetric(m.to_string()));
        }
    }
    Ok((baseline, candidate))
}

/// Gate 1, `sample_size`: every task has at least `threshold` matched pairs graded in both
/// arms; a task only one arm ran has none. Fails naming the tasks below.
fn sample_size_gate(cmp: &Comparison, base_m: &Cell, cand_m: &Cell, threshold: u32) -> Gate {
    let t = u64::from(threshold);
    let mut per_task: Vec<(String, u64)> = cmp
        .tasks
        .iter()
        .map(|tc| (tc.task.clone(), tc.comparison.discordance.n))
        .collect();
    per_task.extend(cmp.left_out.iter().map(|l| (l.task.clone(), 0)));
    let below: Vec<&(String, u64)> = per_task.iter().filter(|(_, n)| *n < t).collect();
    let pooled = cmp.overall.discordance.n;
    let fewest = per_task.iter().min_by_key(|(_, n)| *n);
    let mut numbers = vec![
        GateNumber::of("baseline_n", Some(base_m.n as f64), None),
        GateNumber::of("candidate_n", Some(cand_m.n as f64), None),
        GateNumber::of("underpowered_below", Some(f64::from(threshold)), None),
        GateNumber::of(
            "fewest_task_pairs",
            fewest.map(|(_, n)| *n as f64),
            Some(per_task.len() as u64),
        ),
        GateNumber::of(
            "tasks_below",
            Some(below.len() as f64),
            Some(per_task.len() as u64),
        ),
    ];
    numbers.extend(
        per_task
            .iter()
            .map(|(task, n)| GateNumber::of(&format!("pairs:{task}"), Some(*n as f64), None)),
    );
    let passed = below.is_empty() && !per_task.is_empty();
    let explanation = match fewest {
        None => format!("underpowered: no task has a matched pair; every task needs at least {threshold}"),
        Some((task, n)) if passed => format!(
            "every task has at least {threshold} graded matched pairs ({} task(s); fewest: `{task}` with {n})",
            per_task.len()
        ),
        Some(_) => format!(
            "underpowered: {} of {} task(s) below {threshold} graded matched pairs: {} (pooled over tasks: {pooled} pairs, which does not count)",
            below.len(),
            per_task.len(),
            below
                .iter()
                .map(|(task, n)| format!("`{task}` {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    Gate {
        statistic: None,
        name: "sample_size".into(),
        passed,
        numbers,
        explanation,
    }
}

/// Gate 2, `nonzero_success`: the candidate has at least one task success.
fn nonzero_success_gate(cs: Rate) -> Gate {
    Gate {
        statistic: None,
        name: "nonzero_success".into(),
        passed: cs.k > 0,
        numbers: vec![GateNumber::of("candidate_success", cs.value(), Some(cs.n))],
        explanation: if cs.k > 0 {
            format!("candidate success {cs} is nonzero")
        } else {
            format!("candidate success {cs}: no task succeeded")
        },
    }
}

/// Gate 3, `strongest_control`: the candidate's success rate `cs` is at least the strongest
/// other arm's minus the tolerance.
fn strongest_control_gate(
    promotion: &Promotion,
    arms: &[(String, Cell)],
    candidate: &str,
    cs: Rate,
) -> Gate {
    let tolerance = promotion.strongest_success_tolerance.unwrap_or(0.0);
    let strongest = arms
        .iter()
        .filter(|(v, c)| *v != candidate && c.n > 0)
        .fold(None::<&(String, Cell)>, |best, arm| match best {
            Some(b) if b.1.rates.success.value() >= arm.1.rates.success.value() => Some(b),
            _ => Some(arm),
        });
    match (strongest, cs.value()) {
        (Some((id, c)), Some(cv)) => {
            let sv = c.rates.success.value().unwrap_or(0.0);
            let passed = cv >= sv - tolerance - EPS;
            Gate {
                statistic: None,
                name: "strongest_control".into(),
                passed,
                numbers: vec![
                    GateNumber::of("candidate_success", Some(cv), Some(cs.n)),
                    GateNumber::of("strongest_control_success", Some(sv), Some(c.rates.success.n)),
                    GateNumber::of("tolerance", Some(tolerance), None),
                ],
                explanation: format!(
                    "candidate success {cs} {} the strongest control arm `{id}` {} minus the tolerance of {:.1} points",
                    if passed { "is at least" } else { "is below" },
                    c.rates.success,
                    tolerance * 100.0
                ),
            }
        }
        (None, _) => Gate {
            statistic: None,
            name: "strongest_control".into(),
            passed: false,
            numbers: vec![GateNumber::of("tolerance", Some(tolerance), None)],
            explanation: "no control arm has a graded trial to compare with".into(),
        },
        (Some((id, c)), None) => Gate {
            statistic: None,
            name: "strongest_control".into(),
            passed: false,
            numbers: vec![
                GateNumber::of("candidate_success", None, Some(0)),
                GateNumber::of(
                    "strongest_control_success",
                    c.rates.success.value(),
                    Some(c.rates.success.n),
                ),
                GateNumber::of("tolerance", Some(tolerance), None),
            ],
            explanation: format!(
                "the candidate has no graded trial to set against `{id}` {}",
                c.rates.success
            ),
        },
    }
}

/// How the candidate stands against the baseline on one metric, in its better direction.
enum Regression {
    /// Measured in both arms: worse by this much (0 or less is no regression).
    Measured(f64),
    /// Not measured in both arms: no regression cannot be shown.
    NotMeasured,
}

/// The metric `name` of both cells, and how the candidate stands; `None` for a metric proctor
/// does not report.
fn regression(
    name: &str,
    base: &Cell,
    cand: &Cell,
) -> Option<(MetricValue, MetricValue, Regression)> {
    let (a, b) = (metric(base, name)?, metric(cand, name)?);
    let dir = better_when(name).unwrap_or(Direction::Lower);
    let r = match (a.value, b.value) {
        (Some(va), Some(vb)) => Regression::Measured(if dir == Direction::Higher {
            va - vb
        } else {
            vb - va
        }),
        _ => Regression::NotMeasured,
    };
    Some((a, b, r))
}

/// `higher` or `lower`: which way metric `name` is better.
fn better_way(name: &str) -> &'static str {
    if better_when(name) == Some(Direction::Higher) {
        "higher"
    } else {
        "lower"
    }
}

/// Gate 5, `no_regression:NAME`: the candidate is not worse than the baseline in the metric's
/// own better direction, on the matched trials; a per-trial metric by its mean, or by the
/// statistic named (`NAME:STATISTIC`).
fn no_regression_gate(name: &str, base_m: &Cell, cand_m: &Cell) -> Result<Gate, GateError> {
    let Some((a, b, r)) = regression(name, base_m, cand_m) else {
        return Err(GateError::UnknownMetric(name.to_string()));
    };
    let what = subject(name, &a);
    let way = better_way(name);
    let numbers = vec![
        GateNumber::of("baseline", a.value, Some(a.n)),
        GateNumber::of("candidate", b.value, Some(b.n)),
    ];
    let (passed, explanation) = match r {
        Regression::Measured(worse_by) if worse_by <= EPS => (
            true,
            format!(
                "{what} ({way} is better) {} -> {}: no regression",
                show(&a, name),
                show(&b, name)
            ),
        ),
        Regression::Measured(worse_by) => (
            false,
            format!(
                "{what} ({way} is better) regressed by {}: {} -> {}",
                amount(worse_by, name),
                show(&a, name),
                show(&b, name)
            ),
        ),
        Regression::NotMeasured => (
            false,
            format!(
                "{what} is not measured in both arms ({} -> {}), so no regression cannot be shown",
                show(&a, name),
                show(&b, name)
            ),
        ),
    };
    Ok(Gate {
        statistic: a.statistic,
        name: format!("no_regression:{name}"),
        passed,
        numbers,
        explanation,
    })
}

/// Gate 6, `no_regression_per_task:NAME`: on every task's own matched trials, the candidate is
/// not worse than the baseline; fails naming each task where it is (or where the metric is not
/// measured in both arms).
fn no_regression_per_task_gate(name: &str, cmp: &Comparison) -> Result<Gate, GateError> {
    let mut numbers = Vec::new();
    let mut failed: Vec<String> = Vec::new();
    let mut statistic = None;
    let mut what = format!("`{name}`");
    for tc in &cmp.tasks {
        let (base, cand) = (&tc.comparison.a.cell, &tc.comparison.b.cell);
        let Some((a, b, r)) = regression(name, base, cand) else {
            return Err(GateError::UnknownMetric(name.to_string()));
        };
        statistic = a.statistic;
        what = subject(name, &a);
        let task = &tc.task;
        numbers.push(GateNumber::of(
            &format!("{task}:baseline"),
            a.value,
            Some(a.n),
        ));
        numbers.push(GateNumber::of(
            &format!("{task}:candidate"),
            b.value,
            Some(b.n),
        ));
        match r {
            Regression::Measured(worse_by) if worse_by <= EPS => {}
            Regression::Measured(worse_by) => failed.push(format!(
                "`{task}` by {} ({} -> {})",
                amount(worse_by, name),
                show(&a, name),
                show(&b, name)
            )),
            Regression::NotMeasured => failed.push(format!(
                "`{task}` not measured in both arms ({} -> {})",
                show(&a, name),
                show(&b, name)
            )),
        }
    }
    let way = better_way(name);
    let tasks = cmp.tasks.len();
    let passed = failed.is_empty() && tasks > 0;
    let explanation = if tasks == 0 {
        format!("{what}: no task has matched trials, so no regression cannot be shown")
    } else if passed {
        format!("{what} ({way} is better) is not worse on any of {tasks} task(s), each on its own matched trials")
    } else {
        format!(
            "{what} ({way} is better) regressed on {} of {tasks} task(s): {}",
            failed.len(),
            failed.join("; ")
        )
    };
    Ok(Gate {
        statistic,
        name: format!("no_regression_per_task:{name}"),
        passed,
        numbers,
        explanation,
    })
}

/// Gate 7, `complete_costs`: when required, every arm's money ledger is complete.
fn complete_costs_gate(promotion: &Promotion, arms: &[(String, Cell)]) -> Gate {
    if !promotion.require_complete_costs {
        return Gate {
            statistic: None,
            name: "complete_costs".into(),
            passed: true,
            numbers: vec![],
            explanation: "not required by [promotion] (require_complete_costs = false)".into(),
        };
    }
    let incomplete: Vec<String> = arms
        .iter()
        .filter_map(|(v, c)| match &c.costs.money {
            Money::Incomplete {
                missing,
                trials_missing,
            } => Some(format!(
                "`{v}` ({trials_missing} trial(s) missing {})",
                missing.join(", ")
            )),
            _ => None,
        })
        .collect();
    Gate {
        statistic: None,
        name: "complete_costs".into(),
        passed: incomplete.is_empty(),
        numbers: vec![GateNumber::of(
            "incomplete_arms",
            Some(incomplete.len() as f64),
            Some(arms.len() as u64),
        )],
        explanation: if incomplete.is_empty() {
            format!("every arm's money ledger is complete ({} arms)", arms.len())
        } else {
            format!("incomplete money ledger: {}", incomplete.join("; "))
        },
    }
}

/// A relative improvement in words: `+12.5%`, or what an exact zero baseline makes of it.
fn relative_text(relative: Option<f64>, unbounded: bool) -> String {
    match relative {
        Some(r) => format!("{:+.1}%", r * 100.0),
        None if unbounded => "unbounded (from an exact zero)".to_string(),
        None => "none (from an exact zero, no improvement)".to_string(),
    }
}

/// The improvement the primary gate wants, in words.
fn wanted_text(min_rel: Option<f64>, min_abs: Option<f64>, name: &str) -> String {
    match (min_rel, min_abs) {
        (Some(r), Some(x)) => format!(
            "at least {:.1}% relative or {} absolute",
            r * 100.0,
            amount(x, name)
        ),
        (Some(r), None) => format!("at least {:.1}% relative", r * 100.0),
        (None, Some(x)) => format!("at least {} absolute", amount(x, name)),
        (None, None) => "any improvement".to_string(),
    }
}

/// Gate 4, `primary_metric`: the primary metric improved enough, in the configured direction,
/// on the matched trials.
fn primary_gate(promotion: &Promotion, name: &str, base: &Cell, cand: &Cell) -> Gate {
    let min_rel = promotion.minimum_relative_improvement;
    let min_abs = promotion.minimum_absolute_improvement;
    let dir = promotion.direction;
    let way = if dir == Direction::Higher {
        "higher"
    } else {
        "lower"
    };
    let (a, b) = match (metric(base, name), metric(cand, name)) {
        (Some(a), Some(b)) => (a, b),
        _ => {
            return Gate {
                statistic: None,
                name: "primary_metric".into(),
                passed: false,
                numbers: vec![],
                explanation: format!("`{name}` is not a metric proctor reports"),
            }
        }
    };
    let mut numbers = vec![
        GateNumber::of("baseline", a.value, Some(a.n)),
        GateNumber::of("candidate", b.value, Some(b.n)),
    ];
    let (Some(va), Some(vb)) = (a.value, b.value) else {
        return Gate {
            statistic: a.statistic,
            name: "primary_metric".into(),
            passed: false,
            numbers,
            explanation: format!(
                "{} is not measured in both arms ({} -> {})",
                subject(name, &a),
                show(&a, name),
                show(&b, name)
            ),
        };
    };
    let improvement = if dir == Direction::Higher {
        vb - va
    } else {
        va - vb
    };
    let (relative, unbounded) = if va == 0.0 {
        (None, improvement > 0.0)
    } else {
        (Some(improvement / va.abs()), false)
    };
    numbers.push(GateNumber::of("improvement", Some(improvement), None));
    numbers.push(GateNumber {
        name: "relative_improvement".into(),
        value: relative,
        n: None,
        unbounded,
    });
    numbers.push(GateNumber::of(
        "minimum_relative_improvement",
        min_rel,
        None,
    ));
    numbers.push(GateNumber::of(
        "minimum_absolute_improvement",
        min_abs,
        None,
    ));
    let rel_ok = min_rel.is_some_and(|m| match relative {
        Some(r) => r >= m - EPS,
        None => unbounded,
    });
    let abs_ok = min_abs.is_some_and(|m| improvement >= m - EPS);
    let passed = if min_rel.is_none() && min_abs.is_none() {
        improvement > EPS
    } else {
        rel_ok || abs_ok
    };
    let rel_text = relative_text(relative, unbounded);
    let wanted = wanted_text(min_rel, min_abs, name);
    Gate {
        statistic: a.statistic,
        name: "primary_metric".into(),
        passed,
        numbers,
        explanation: format!(
            "{} ({way} is better) {} -> {}: improvement {} ({rel_text}); wanted {wanted}",
            subject(name, &a),
            show(&a, name),
            show(&b, name),
            amount(improvement, name)
        ),
    }
}
