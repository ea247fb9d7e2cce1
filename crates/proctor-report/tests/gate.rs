//! Promotion gates: all pass on a good candidate; each one, failing alone, is the only failing
//! check; the zero-baseline rule; the errors.

mod common;

use common::*;
use proctor_report::{gate, Cost, Exporter, GateError, GateReport, Json, TrialRow};
use proctor_suite::model::{Promotion, ReportConfig};

const PROMOTION: &str = r#"
baseline = "control"
candidate = "method"
primary_metric = "completion_rate"
direction = "higher"
minimum_relative_improvement = 0.10
minimum_absolute_improvement = 0.05
strongest_success_tolerance = 0.02
no_regression = ["wrong_turns"]
require_complete_costs = true
"#;

fn promotion(extra: &[(&str, &str)]) -> Promotion {
    let mut table: toml::Table = toml::from_str(PROMOTION).unwrap();
    for (k, v) in extra {
        let value: toml::Table = toml::from_str(&format!("x = {v}")).unwrap();
        table.insert(k.to_string(), value["x"].clone());
    }
    toml::from_str(&toml::to_string(&table).unwrap()).unwrap()
}

/// `k` successes of 5 on each of two tasks, with `wt` wrong turns per trial and a known price.
fn variant(name: &str, k: usize, wt: u64) -> Vec<TrialRow> {
    ["t1", "t2"]
        .iter()
        .flat_map(|t| successes(name, t, k, 5))
        .map(|r| with_cost(with_metrics(r, wt, 5), Cost::Known { usd: 0.01 }))
        .collect()
}

/// A run where every gate passes: control 40%, method 80%, another control 80%.
fn passing() -> Vec<TrialRow> {
    [
        variant("control", 2, 2),
        variant("method", 4, 1),
        variant("other", 4, 1),
    ]
    .concat()
}

fn run(rows: &[TrialRow], p: &Promotion, threshold: u32) -> GateReport {
    gate(
        rows,
        p,
        &ReportConfig {
            underpowered_below: threshold,
        },
    )
    .unwrap()
}

fn failing(r: &GateReport) -> Vec<&str> {
    r.failed().map(|g| g.name.as_str()).collect()
}

#[test]
fn a_good_candidate_passes_every_gate() {
    let r = run(&passing(), &promotion(&[]), 5);
    assert!(r.passed, "{r:#?}");
    let names: Vec<&str> = r.gates.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "sample_size",
            "nonzero_success",
            "strongest_control",
            "primary_metric",
            "no_regression:wrong_turns",
            "complete_costs"
        ]
    );
    assert!(r
        .gates
        .iter()
        .all(|g| !g.explanation.is_empty() && !g.explanation.contains('\n')));
    let primary = &r.gates[3];
    let number = |name: &str| {
        primary
            .numbers
            .iter()
            .find(|n| n.name == name)
            .unwrap()
            .value
    };
    assert_eq!(number("baseline"), Some(0.4));
    assert_eq!(number("candidate"), Some(0.8));
}

#[test]
fn sample_size_failing_alone() {
    let r = run(&passing(), &promotion(&[]), 6);
    assert_eq!(failing(&r), ["sample_size"]);
    assert!(!r.passed);
    assert!(r.gates[0].explanation.contains("underpowered"));
}

#[test]
fn nonzero_success_failing_alone() {
    // Nobody succeeds; the candidate still makes fewer wrong turns.
    let rows = [variant("control", 0, 4), variant("method", 0, 1)].concat();
    let p = promotion(&[
        ("primary_metric", "\"wrong_turns\""),
        ("direction", "\"lower\""),
        ("no_regression", "[\"failure_rate\"]"),
    ]);
    let r = run(&rows, &p, 5);
    assert_eq!(failing(&r), ["nonzero_success"], "{r:#?}");
    assert!(r.gates[1].explanation.contains("0/10"));
}

#[test]
fn strongest_control_failing_alone() {
    let rows = [
        variant("control", 2, 2),
        variant("method", 4, 1),
        variant("other", 5, 1),
    ]
    .concat();
    let r = run(&rows, &promotion(&[]), 5);
    assert_eq!(failing(&r), ["strongest_control"], "{r:#?}");
    assert!(r.gates[2].explanation.contains("`other`"));
    // Within a 20-point tolerance, 80% against 100% passes.
    let r = run(
        &rows,
        &promotion(&[("strongest_success_tolerance", "0.2")]),
        5,
    );
    assert!(r.passed, "{r:#?}");
}

#[test]
fn primary_metric_failing_alone() {
    // 40% -> 80%: +40 points, +100% relative.
    let p = promotion(&[
        ("minimum_relative_improvement", "1.5"),
        ("minimum_absolute_improvement", "0.5"),
    ]);
    let r = run(&passing(), &p, 5);
    assert_eq!(failing(&r), ["primary_metric"], "{r:#?}");
    // Either minimum is enough, met exactly: the absolute one alone, then the relative one alone.
    let p = promotion(&[
        ("minimum_relative_improvement", "1.5"),
        ("minimum_absolute_improvement", "0.4"),
    ]);
    assert!(run(&passing(), &p, 5).passed);
    let p = promotion(&[
        ("minimum_relative_improvement", "1.0"),
        ("minimum_absolute_improvement", "0.5"),
    ]);
    assert!(run(&passing(), &p, 5).passed);
}

#[test]
fn no_regression_failing_alone() {
    let rows = [
        variant("control", 2, 2),
        variant("method", 4, 3),
        variant("other", 4, 1),
    ]
    .concat();
    let r = run(&rows, &promotion(&[]), 5);
    assert_eq!(failing(&r), ["no_regression:wrong_turns"], "{r:#?}");
    assert!(r.gates[4].explanation.contains("regressed"));
}

#[test]
fn complete_costs_failing_alone() {
    let mut rows = passing();
    rows[0].cost = Cost::Incomplete {
        missing: vec!["cache_write".into()],
    };
    let r = run(&rows, &promotion(&[]), 5);
    assert_eq!(failing(&r), ["complete_costs"], "{r:#?}");
    assert!(r.gates[5].explanation.contains("cache_write"));
    // Not required: it passes and says so.
    let r = run(&rows, &promotion(&[("require_complete_costs", "false")]), 5);
    assert!(r.passed);
    assert!(r.gates[5].explanation.contains("not required"));
}

#[test]
fn an_improvement_from_an_exact_zero_baseline_is_unbounded_and_passes_the_relative_minimum() {
    let rows = [variant("control", 0, 2), variant("method", 4, 1)].concat();
    let mut table: toml::Table = toml::from_str(PROMOTION).unwrap();
    table.remove("minimum_absolute_improvement");
    let p: Promotion = toml::from_str(&toml::to_string(&table).unwrap()).unwrap();
    let r = run(&rows, &p, 5);
    let primary = r.gates.iter().find(|g| g.name == "primary_metric").unwrap();
    assert!(primary.passed, "{primary:#?}");
    let rel = primary
        .numbers
        .iter()
        .find(|n| n.name == "relative_improvement")
        .unwrap();
    assert_eq!((rel.value, rel.unbounded), (None, true));
    assert!(primary.explanation.contains("unbounded"));
    let text = Json.gates(&r);
    assert_finite_json(&text);
    assert!(text.contains("\"value\": null"));

    // No improvement from zero is not unbounded and does not pass.
    let rows = [variant("control", 0, 2), variant("method", 0, 1)].concat();
    let r = run(&rows, &p, 5);
    let primary = r.gates.iter().find(|g| g.name == "primary_metric").unwrap();
    assert!(!primary.passed);
    let rel = primary
        .numbers
        .iter()
        .find(|n| n.name == "relative_improvement")
        .unwrap();
    assert_eq!((rel.value, rel.unbounded), (None, false));
}

#[test]
fn a_lower_is_better_primary_metric_improves_downwards() {
    let p = promotion(&[
        ("primary_metric", "\"wrong_turns\""),
        ("direction", "\"lower\""),
        ("no_regression", "[]"),
    ]);
    let r = run(&passing(), &p, 5);
    assert!(r.passed, "{r:#?}");
    let p = promotion(&[
        ("primary_metric", "\"wrong_turns\""),
        ("direction", "\"higher\""),
        ("no_regression", "[]"),
    ]);
    assert_eq!(failing(&run(&passing(), &p, 5)), ["primary_metric"]);
}

#[test]
fn a_metric_measured_in_neither_arm_cannot_show_no_regression() {
    let p = promotion(&[("no_regression", "[\"tokens\"]")]);
    let r = run(&passing(), &p, 5);
    assert_eq!(failing(&r), ["no_regression:tokens"]);
    assert!(r.gates[4].explanation.contains("not measured"));
}

#[test]
fn gate_errors_name_the_problem() {
    let rows = passing();
    let p = promotion(&[("candidate", "\"nope\"")]);
    let err = gate(&rows, &p, &ReportConfig::default()).unwrap_err();
    assert!(
        matches!(
            err,
            GateError::UnknownVariant {
                role: "candidate",
                ..
            }
        ),
        "{err}"
    );
    let p = promotion(&[("candidate", "\"control\"")]);
    assert!(matches!(
        gate(&rows, &p, &ReportConfig::default()),
        Err(GateError::SameArm(_))
    ));
    let p = promotion(&[("primary_metric", "\"vibes\"")]);
    assert_eq!(
        gate(&rows, &p, &ReportConfig::default()).unwrap_err(),
        GateError::UnknownMetric("vibes".into())
    );
    let mut bad = rows.clone();
    bad.iter_mut()
        .filter(|r| r.variant == "method")
        .for_each(|r| r.fixture_hash = "fx2".into());
    assert!(matches!(
        gate(&bad, &promotion(&[]), &ReportConfig::default()),
        Err(GateError::Compare(_))
    ));
}

/// Ten trials per arm over three tasks; the candidate's wrong turns all sit in task `c`
/// (24 over its trials there), so both arms' medians are 0 and only the mean and total move.
fn tail_in_one_task() -> Vec<TrialRow> {
    let arm = |v: &str, tail: &[u64]| -> Vec<TrialRow> {
        let mut rows = Vec::new();
        for (t, n) in [("a", 4u32), ("b", 3), ("c", 3)] {
            for i in 0..n {
                let wt = if t == "c" { tail[i as usize] } else { 0 };
                rows.push(with_cost(
                    with_metrics(row(v, t, i, completed()), wt, 4 + wt),
                    Cost::Known { usd: 0.01 },
                ));
            }
        }
        rows
    };
    [arm("control", &[0, 0, 0]), arm("method", &[8, 8, 8])].concat()
}

#[test]
fn keystone_wrong_turns_in_one_task_fail_no_regression_though_both_medians_are_0() {
    let rows = tail_in_one_task();
    let p = promotion(&[
        ("primary_metric", "\"completion_rate\""),
        ("minimum_relative_improvement", "0.0"),
        ("minimum_absolute_improvement", "0.0"),
        (
            "no_regression",
            "[\"wrong_turns\", \"wrong_turns:median\", \"wrong_turns:total\"]",
        ),
    ]);
    let r = run(&rows, &p, 5);
    let by_name = |n: &str| r.gates.iter().find(|g| g.name == n).unwrap();
    // The default statistic is the mean: 0 -> 2.4 over 10 trials fails.
    let mean = by_name("no_regression:wrong_turns");
    assert!(!mean.passed, "{mean:#?}");
    assert_eq!(mean.statistic, Some(proctor_report::Statistic::Mean));
    assert_eq!(
        mean.explanation,
        "`wrong_turns` mean (lower is better) regressed by 2.4: 0 (n=10) -> 2.4 (n=10)"
    );
    assert_eq!(mean.numbers[0].value, Some(0.0));
    assert_eq!(mean.numbers[1].value, Some(2.4));
    assert_eq!((mean.numbers[0].n, mean.numbers[1].n), (Some(10), Some(10)));
    // The median, named, is blind to it: this is what the gate said before.
    let median = by_name("no_regression:wrong_turns:median");
    assert!(median.passed, "{median:#?}");
    assert!(
        median.explanation.contains("0 (n=10) -> 0 (n=10)"),
        "{}",
        median.explanation
    );
    // The total sees it: 0 -> 24.
    let total = by_name("no_regression:wrong_turns:total");
    assert!(!total.passed, "{total:#?}");
    assert_eq!(total.numbers[1].value, Some(24.0));
    assert!(!r.passed);
    // The gate line names the statistic and its numbers with n.
    let text = proctor_report::Terminal.gates(&r);
    let line = text
        .lines()
        .find(|l| l.starts_with("no_regression:wrong_turns (mean)"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("FAIL") && line.contains("0 (n=10) -> 2.4 (n=10)"),
        "{line}"
    );
}

#[test]
fn direction_no_regression_by_mean_fails_exactly_when_the_candidates_mean_rises() {
    let rows = |cand_tail: u64| {
        let mut rows = tail_in_one_task();
        for r in rows
            .iter_mut()
            .filter(|r| r.variant == "method" && r.task == "c")
        {
            *r = with_metrics(r.clone(), if r.trial_index == 0 { cand_tail } else { 0 }, 4);
        }
        rows
    };
    let p = promotion(&[("no_regression", "[\"wrong_turns\"]")]);
    let gate_of = |tail| {
        let r = run(&rows(tail), &p, 5);
        r.gates
            .into_iter()
            .find(|g| g.name == "no_regression:wrong_turns")
            .unwrap()
    };
    assert!(gate_of(0).passed);
    let one = gate_of(1);
    assert!(!one.passed, "{one:#?}");
    assert_eq!(one.numbers[1].value, Some(0.1));
    // Recoveries are better when higher: a candidate with fewer recoveries regresses.
    let p = promotion(&[("no_regression", "[\"recoveries:total\"]")]);
    let mut rr = tail_in_one_task();
    for r in rr.iter_mut().filter(|r| r.variant == "control") {
        if let Some(m) = r.verdict.metrics.as_mut() {
            m.recoveries = 1;
        }
    }
    let g = run(&rr, &p, 5)
        .gates
        .into_iter()
        .find(|g| g.name == "no_regression:recoveries:total")
        .unwrap();
    assert!(!g.passed, "{g:#?}");
    assert_eq!(g.numbers[0].value, Some(10.0));
}

#[test]
fn a_bad_statistic_is_an_unknown_metric() {
    for bad in ["wrong_turns:mode", "success_rate:mean", "vibes:mean"] {
        let p = promotion(&[("no_regression", &format!("[\"{bad}\"]"))]);
        let err = gate(&passing(), &p, &ReportConfig::default()).unwrap_err();
        assert_eq!(err, GateError::UnknownMetric(bad.into()));
    }
}

/// Every arm's trials on tasks `t1`, `t2`, `t3`: `k[i]` successes of `n` on task i.
fn per_task(name: &str, k: [usize; 3], n: usize) -> Vec<TrialRow> {
    ["t1", "t2", "t3"]
        .iter()
        .zip(k)
        .flat_map(|(t, k)| successes(name, t, k, n))
        .map(|r| with_cost(with_metrics(r, 0, 5), Cost::Known { usd: 0.01 }))
        .collect()
}

#[test]
fn keystone_sample_size_counts_pairs_per_task_never_pooled() {
    // Three tasks of 3 pairs each: 9 pooled pairs ≥ 8, but every task's own comparison is
    // below the threshold, so nothing may be promoted.
    let rows = [
        per_task("control", [1, 1, 1], 3),
        per_task("method", [3, 3, 3], 3),
    ]
    .concat();
    let r = run(&rows, &promotion(&[]), 8);
    assert_eq!(failing(&r), ["sample_size"], "{r:#?}");
    let g = &r.gates[0];
    assert_eq!(
        g.explanation,
        "underpowered: 3 of 3 task(s) below 8 graded matched pairs: `t1` 3, `t2` 3, `t3` 3 (pooled over tasks: 9 pairs, which does not count)"
    );
    let number = |name: &str| g.numbers.iter().find(|n| n.name == name).unwrap().value;
    assert_eq!(number("fewest_task_pairs"), Some(3.0));
    assert_eq!(number("tasks_below"), Some(3.0));
    assert_eq!(number("pairs:t2"), Some(3.0));
    // One task short is enough to fail, and only that task is named.
    let rows = [
        [
            per_task("control", [1, 1, 1], 8),
            successes("control", "t4", 1, 7),
        ]
        .concat(),
        [
            per_task("method", [8, 8, 8], 8),
            successes("method", "t4", 7, 7),
        ]
        .concat(),
    ]
    .concat();
    let rows: Vec<TrialRow> = rows
        .into_iter()
        .map(|r| with_cost(with_metrics(r, 0, 5), Cost::Known { usd: 0.01 }))
        .collect();
    let r = run(&rows, &promotion(&[]), 8);
    assert_eq!(failing(&r), ["sample_size"], "{r:#?}");
    assert!(
        r.gates[0]
            .explanation
            .contains("1 of 4 task(s) below 8 graded matched pairs: `t4` 7"),
        "{}",
        r.gates[0].explanation
    );
    // At the threshold on every task, it passes and says the fewest.
    let rows = [
        per_task("control", [1, 1, 1], 8),
        per_task("method", [8, 8, 8], 8),
    ]
    .concat();
    let r = run(&rows, &promotion(&[]), 8);
    assert!(r.passed, "{r:#?}");
    assert_eq!(
        r.gates[0].explanation,
        "every task has at least 8 graded matched pairs (3 task(s); fewest: `t1` with 8)"
    );
}

#[test]
fn keystone_a_regression_on_one_task_does_not_average_away_per_task() {
    // The candidate gains 6 successes on t1 and loses 4 on t3: pooled it is better (12/24 ->
    // 14/24), so `no_regression:success_rate` passes; per task it fails, naming t3 alone.
    let rows = [
        per_task("control", [2, 4, 6], 8),
        per_task("method", [8, 4, 2], 8),
    ]
    .concat();
    let p = promotion(&[
        ("no_regression", "[\"success_rate\"]"),
        (
            "no_regression_per_task",
            "[\"success_rate\", \"wrong_turns\"]",
        ),
        ("minimum_relative_improvement", "0.0"),
    ]);
    let r = run(&rows, &p, 8);
    assert_eq!(
        failing(&r),
        ["no_regression_per_task:success_rate"],
        "{r:#?}"
    );
    let g = r
        .gates
        .iter()
        .find(|g| g.name == "no_regression_per_task:success_rate")
        .unwrap();
    assert_eq!(
        g.explanation,
        "`success_rate` (higher is better) regressed on 1 of 3 task(s): `t3` by 50.0 points (6/8 (75%) -> 2/8 (25%))"
    );
    let number = |name: &str| g.numbers.iter().find(|n| n.name == name).unwrap().value;
    assert_eq!(number("t3:baseline"), Some(0.75));
    assert_eq!(number("t3:candidate"), Some(0.25));
    let wt = r
        .gates
        .iter()
        .find(|g| g.name == "no_regression_per_task:wrong_turns")
        .unwrap();
    assert!(wt.passed, "{wt:#?}");
    assert_eq!(
        wt.explanation,
        "`wrong_turns` mean (lower is better) is not worse on any of 3 task(s), each on its own matched trials"
    );
    // Without the regression on t3 the per-task gate passes.
    let rows = [
        per_task("control", [2, 4, 6], 8),
        per_task("method", [8, 4, 6], 8),
    ]
    .concat();
    let r = run(&rows, &p, 8);
    assert!(r.passed, "{r:#?}");
}

#[test]
fn the_verdict_line_shows_the_thresholds_it_used() {
    let rows = [
        per_task("control", [1, 1, 1], 8),
        per_task("method", [8, 8, 8], 8),
    ]
    .concat();
    let r = run(&rows, &promotion(&[]), 8);
    assert_eq!(
        r.thresholds,
        [
            "underpowered_below = 8 per task",
            "minimum_relative_improvement = 0.1",
            "minimum_absolute_improvement = 0.05",
            "strongest_success_tolerance = 0.02",
            "require_complete_costs = true"
        ]
    );
    let text = proctor_report::Terminal.gates(&r);
    assert!(
        text.starts_with("Promotion of method over control: PASSED (thresholds: underpowered_below = 8 per task, minimum_relative_improvement = 0.1, minimum_absolute_improvement = 0.05, strongest_success_tolerance = 0.02, require_complete_costs = true)\n"),
        "{text}"
    );
}

/// One trial of each graded outcome, in these numbers: 1 completed, 2 wrong, 3 refused
/// honestly (one of them the task's success), 4 refused wrongly, 5 asked, 6 abandoned; and an
/// errored and an ungradeable trial, which no rate counts.
fn every_outcome() -> Vec<TrialRow> {
    use proctor_score::Outcome;
    let counts = [
        (completed(), 1),
        (wrong(), 2),
        (Outcome::RefusedHonestly, 3),
        (Outcome::RefusedWrongly, 4),
        (Outcome::Asked, 5),
        (Outcome::Abandoned, 6),
        (errored(), 1),
        (ungradeable(), 1),
    ];
    let mut rows: Vec<TrialRow> = counts
        .iter()
        .flat_map(|(o, n)| std::iter::repeat_n(o.clone(), *n))
        .enumerate()
        .map(|(i, o)| row("v", "t", i as u32, o))
        .collect();
    rows[1].verdict.task_success = true; // the first honest refusal is the task's success
    rows.swap(1, 3);
    rows
}

/// Every metric a gate may name reads its own count from a cell: each rate's k over the graded
/// n, and each per-trial metric's own field.
#[test]
fn every_metric_reads_its_own_number_from_a_cell() {
    use proctor_report::metric::metric;
    let cell = proctor_report::Cell::of(&every_outcome());
    assert_eq!(cell.n, 21);
    let rate = |name: &str| {
        let v = metric(&cell, name).unwrap();
        (v.rate.map(|r| (r.k, r.n)), v.n)
    };
    for (name, k) in [
        ("completion_rate", 1),
        ("success_rate", 2),
        ("wrong_rate", 2),
        ("refusal_rate", 7),
        ("ask_rate", 5),
        ("abandoned_rate", 6),
        ("failure_rate", 2 + 4 + 6),
    ] {
        assert_eq!(rate(name), (Some((k, 21)), 21), "{name}");
    }
    let mut r = row("v", "t", 0, completed());
    r.verdict.metrics = Some(proctor_score::InterfaceMetrics {
        calls: 1,
        errors: 2,
        repeats: 3,
        undone: 4,
        denied: 5,
        wrong_turns: 6,
        recoveries: 7,
        help_calls: 8,
        asks: 14,
    });
    let mut r = with_tokens(r, 9, 10);
    r.requests = Some(11);
    r.wall_seconds = 12.0;
    r.agent_cpu_seconds = Some(13.0);
    r.verdict.rubric = Some(proctor_score::RubricScore {
        criteria: vec![],
        raw_total: 3,
        total: 3,
        max: 4,
        caps: vec![],
    });
    let cell = proctor_report::Cell::of([&r]);
    for (name, value) in [
        ("calls", 1.0),
        ("errors", 2.0),
        ("repeats", 3.0),
        ("undone", 4.0),
        ("denied", 5.0),
        ("wrong_turns", 6.0),
        ("recoveries", 7.0),
        ("help_calls", 8.0),
        ("asks", 14.0),
        ("tokens", 19.0),
        ("requests", 11.0),
        ("wall_seconds", 12.0),
        ("agent_cpu_seconds", 13.0),
        ("rubric_mean", 0.75),
    ] {
        let v = metric(&cell, name).unwrap();
        assert_eq!((v.value, v.n), (Some(value), 1), "{name}");
    }
}

/// The direction in which each metric is better: higher for completion, success, the rubric
/// and recoveries; lower for every other, refusals and asks included.
#[test]
fn each_metric_is_better_in_its_own_direction() {
    use proctor_report::metric::better_when;
    use proctor_suite::model::Direction;
    let higher = [
        "completion_rate",
        "success_rate",
        "rubric_mean",
        "recoveries",
    ];
    for name in proctor_suite::model::METRICS {
        let want = if higher.contains(name) {
            Direction::Higher
        } else {
            Direction::Lower
        };
        assert_eq!(better_when(name), Some(want), "{name}");
        assert_eq!(better_when(&format!("{name}:total")), Some(want), "{name}");
    }
    assert_eq!(better_when("vibes"), None);
}

fn gate_named<'r>(r: &'r GateReport, name: &str) -> &'r proctor_report::Gate {
    r.gates
        .iter()
        .find(|g| g.name == name)
        .unwrap_or_else(|| panic!("no gate {name}: {r:#?}"))
}

/// The strongest control is the best arm whatever the order the arms come in, and an arm with
/// no graded trial is no control.
#[test]
fn the_strongest_control_is_the_best_arm_in_any_order_and_needs_a_graded_trial() {
    // The strongest control (100%) comes first, a weaker one last.
    let rows = [
        variant("other", 5, 1),
        variant("control", 2, 2),
        variant("method", 4, 1),
        variant("weak", 1, 1),
    ]
    .concat();
    let r = run(&rows, &promotion(&[]), 5);
    let g = gate_named(&r, "strongest_control");
    assert!(!g.passed, "{g:#?}");
    assert!(g.explanation.contains("`other`"), "{}", g.explanation);
    assert_eq!(g.numbers[1].value, Some(1.0));
    // Controls of 40% and 60% against a candidate of 60%: it passes against the stronger.
    let rows = [
        variant("control", 2, 2),
        variant("method", 3, 1),
        variant("other", 3, 1),
    ]
    .concat();
    let r = run(
        &rows,
        &promotion(&[("strongest_success_tolerance", "0.0")]),
        5,
    );
    assert!(gate_named(&r, "strongest_control").passed, "{r:#?}");
    // A baseline whose every trial errored has nothing to compare with: the gate fails.
    let rows: Vec<TrialRow> = [
        variant("control", 0, 2)
            .into_iter()
            .map(|mut r| {
                r.verdict.outcome = errored();
                r.verdict.task_success = false;
                r
            })
            .collect(),
        variant("method", 4, 1),
    ]
    .concat();
    let r = run(&rows, &promotion(&[]), 5);
    let g = gate_named(&r, "strongest_control");
    assert!(!g.passed, "{g:#?}");
    assert_eq!(
        g.explanation,
        "no control arm has a graded trial to compare with"
    );
}

/// `nonzero_success` says which way it went.
#[test]
fn nonzero_success_says_whether_a_task_succeeded() {
    let r = run(&passing(), &promotion(&[]), 5);
    let g = gate_named(&r, "nonzero_success");
    assert!(g.passed);
    assert_eq!(g.explanation, "candidate success 8/10 (80%) is nonzero");
    let rows = [variant("control", 2, 2), variant("method", 0, 1)].concat();
    let g = gate_named(&run(&rows, &promotion(&[]), 5), "nonzero_success").clone();
    assert!(!g.passed);
    assert_eq!(
        g.explanation,
        "candidate success 0/10 (0%): no task succeeded"
    );
}

/// A metric better when higher regresses when it falls, and an improvement is no regression.
#[test]
fn direction_no_regression_of_a_higher_is_better_metric_passes_when_it_rises() {
    let p = promotion(&[("no_regression", "[\"success_rate\", \"completion_rate\"]")]);
    let r = run(&passing(), &p, 5);
    assert!(r.passed, "{r:#?}");
    let g = gate_named(&r, "no_regression:success_rate");
    assert_eq!(
        (g.numbers[0].value, g.numbers[1].value),
        (Some(0.4), Some(0.8))
    );
    // The same arms the other way round: the success rate fell.
    let rows = [
        variant("control", 4, 1),
        variant("method", 2, 1),
        variant("other", 1, 1),
    ]
    .concat();
    let r = run(&rows, &p, 5);
    assert!(!gate_named(&r, "no_regression:success_rate").passed);
    // Equal is no regression.
    let rows = [variant("control", 4, 1), variant("method", 4, 1)].concat();
    let r = run(&rows, &p, 5);
    assert!(
        gate_named(&r, "no_regression:success_rate").passed,
        "{r:#?}"
    );
}

/// With only an absolute minimum, only the absolute improvement counts; with none, any
/// improvement above 0 passes and none does not.
#[test]
fn the_primary_minimum_that_is_set_is_the_one_that_counts() {
    // 40% -> 80%: +40 points, +100%.
    let only_abs = |abs: &str| {
        let mut table: toml::Table = toml::from_str(PROMOTION).unwrap();
        table.remove("minimum_relative_improvement");
        table.insert(
            "minimum_absolute_improvement".into(),
            abs.parse::<f64>().unwrap().into(),
        );
        toml::from_str::<Promotion>(&toml::to_string(&table).unwrap()).unwrap()
    };
    assert!(!gate_named(&run(&passing(), &only_abs("0.5"), 5), "primary_metric").passed);
    assert!(gate_named(&run(&passing(), &only_abs("0.4"), 5), "primary_metric").passed);
    let none = {
        let mut table: toml::Table = toml::from_str(PROMOTION).unwrap();
        table.remove("minimum_relative_improvement");
        table.remove("minimum_absolute_improvement");
        toml::from_str::<Promotion>(&toml::to_string(&table).unwrap()).unwrap()
    };
    assert!(gate_named(&run(&passing(), &none, 5), "primary_metric").passed);
    let equal = [variant("control", 4, 1), variant("method", 4, 1)].concat();
    let g = gate_named(&run(&equal, &none, 5), "primary_metric").clone();
    assert!(!g.passed, "no improvement is not an improvement: {g:#?}");
    // From an exact zero with a lower-is-better metric, a fall to zero is no improvement.
    let p = promotion(&[
        ("primary_metric", "\"wrong_turns\""),
        ("direction", "\"lower\""),
        ("no_regression", "[]"),
    ]);
    let zero = [variant("control", 2, 0), variant("method", 4, 0)].concat();
    let g = gate_named(&run(&zero, &p, 5), "primary_metric").clone();
    assert!(!g.passed, "{g:#?}");
    let rel = g
        .numbers
        .iter()
        .find(|n| n.name == "relative_improvement")
        .unwrap();
    assert_eq!((rel.value, rel.unbounded), (None, false));
}

#[test]
fn a_primary_metric_with_a_bad_statistic_is_an_unknown_metric() {
    let p = promotion(&[("primary_metric", "\"calls:mode\"")]);
    assert_eq!(
        gate(&passing(), &p, &ReportConfig::default()).unwrap_err(),
        GateError::UnknownMetric("calls:mode".into())
    );
}

/// Arms that share no task have no matched trials: no regression per task cannot be shown.
#[test]
fn arms_with_no_task_in_common_cannot_show_no_regression_per_task() {
    let rows = [
        successes("control", "t1", 2, 5),
        successes("method", "t2", 4, 5),
    ]
    .concat();
    let p = promotion(&[
        ("no_regression", "[]"),
        ("no_regression_per_task", "[\"success_rate\"]"),
        ("require_complete_costs", "false"),
    ]);
    let r = run(&rows, &p, 5);
    let g = gate_named(&r, "no_regression_per_task:success_rate");
    assert!(!g.passed, "{g:#?}");
    assert_eq!(
        g.explanation,
        "`success_rate`: no task has matched trials, so no regression cannot be shown"
    );
    let s = gate_named(&r, "sample_size");
    assert!(!s.passed, "{s:#?}");
}

#[test]
fn the_primary_gate_says_which_way_is_better_and_what_it_wanted() {
    let r = run(&passing(), &promotion(&[]), 5);
    assert_eq!(
        gate_named(&r, "primary_metric").explanation,
        "`completion_rate` (higher is better) 4/10 (40%) -> 8/10 (80%): improvement 40.0 points (+100.0%); wanted at least 10.0% relative or 5.0 points absolute"
    );
    let p = promotion(&[
        ("primary_metric", "\"wrong_turns\""),
        ("direction", "\"lower\""),
        ("no_regression", "[]"),
    ]);
    let g = gate_named(&run(&passing(), &p, 5), "primary_metric").clone();
    assert!(
        g.explanation
            .starts_with("`wrong_turns` mean (lower is better) 2 (n=10) -> 1 (n=10)"),
        "{}",
        g.explanation
    );
    let improvement = |g: &proctor_report::Gate| {
        g.numbers
            .iter()
            .find(|n| n.name == "improvement")
            .and_then(|n| n.value)
    };
    assert_eq!(improvement(&g), Some(1.0));
    // Direction: more wrong turns in the candidate is no improvement where lower is better.
    let worse = [variant("control", 2, 1), variant("method", 4, 2)].concat();
    let g = gate_named(&run(&worse, &p, 5), "primary_metric").clone();
    assert!(!g.passed, "{g:#?}");
    assert_eq!(improvement(&g), Some(-1.0));
}

/// Without a minimum, an improvement must be beyond the float slack (1e-9): exactly that much
/// is no improvement.
#[test]
fn an_improvement_of_only_the_float_slack_is_no_improvement() {
    let cpu = |v: &str, secs: f64| -> Vec<TrialRow> {
        variant(v, 4, 1)
            .into_iter()
            .map(|mut r| {
                r.agent_cpu_seconds = Some(secs);
                r
            })
            .collect()
    };
    let mut table: toml::Table = toml::from_str(PROMOTION).unwrap();
    table.remove("minimum_relative_improvement");
    table.remove("minimum_absolute_improvement");
    table.insert("primary_metric".into(), "agent_cpu_seconds:median".into());
    let p: Promotion = toml::from_str(&toml::to_string(&table).unwrap()).unwrap();
    let primary = |b: f64| {
        let rows = [cpu("control", 0.0), cpu("method", b)].concat();
        gate_named(&run(&rows, &p, 5), "primary_metric").clone()
    };
    let slack = primary(1e-9);
    assert_eq!(
        slack
            .numbers
            .iter()
            .find(|n| n.name == "improvement")
            .and_then(|n| n.value),
        Some(1e-9)
    );
    assert!(!slack.passed, "{slack:#?}");
    assert!(primary(2e-9).passed);
}
