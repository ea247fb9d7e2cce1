//! Aggregation: the keystone (only honest refusals score 0% failure), one shared n, direction tests for every rate and
//! median, nulls never counted as zero, and cost ledgers never summed or zeroed.

mod common;

use common::*;
use proctor_report::{
    aggregate, AggregateError, Cell, Cost, Exporter, Json, Money, Rate, Rates, TrialRow,
};
use proctor_score::{InterfaceMetrics, Outcome, RubricScore};
use proctor_suite::model::Expect;

fn cell(rows: &[TrialRow]) -> Cell {
    Cell::of(rows)
}

#[test]
fn keystone_a_session_of_only_honest_refusals_scores_zero_failure() {
    let rows = arm(
        "v",
        "t",
        &[
            Outcome::RefusedHonestly,
            Outcome::RefusedHonestly,
            Outcome::RefusedHonestly,
            Outcome::RefusedHonestly,
        ],
    );
    let report = aggregate(&rows).unwrap();
    for c in [
        &report.overall,
        &report.variants[0].overall,
        &report.variants[0].tasks[0].cell,
    ] {
        assert_eq!(
            c.rates.failure,
            Rate::new(0, 4),
            "failure must be 0/n, not n/n"
        );
        assert_eq!(c.rates.failure.to_string(), "0/4 (0%)");
        assert_eq!(c.rates.refused_honestly, Rate::new(4, 4));
        assert_eq!(c.n, 4);
    }
}

#[test]
fn honest_refusals_are_successes_where_the_task_expects_a_refusal_and_asks_where_it_expects_an_ask()
{
    let mut rows = arm(
        "v",
        "t",
        &[Outcome::RefusedHonestly, Outcome::RefusedHonestly],
    );
    for r in &mut rows {
        r.expect = Expect::Refuse;
        r.verdict.task_success = true;
    }
    let mut ask = row("v", "a", 0, Outcome::Asked);
    ask.expect = Expect::Ask;
    ask.verdict.task_success = true;
    rows.push(ask);
    let c = cell(&rows);
    assert_eq!(c.rates.success, Rate::new(3, 3));
    assert_eq!(c.rates.completion, Rate::new(0, 3));
    assert_eq!(c.rates.failure, Rate::new(0, 3));
    assert_eq!(c.rates.ask, Rate::new(1, 3));
}

/// Every rate with the outcome that must raise it.
type RateCase = (&'static str, Outcome, fn(&Rates) -> Rate);

fn rate_cases() -> Vec<RateCase> {
    vec![
        ("success", Outcome::Completed, |r| r.success),
        ("completion", Outcome::Completed, |r| r.completion),
        ("wrong", wrong(), |r| r.wrong),
        ("refusal (honest)", Outcome::RefusedHonestly, |r| r.refusal),
        ("refusal (wrong)", Outcome::RefusedWrongly, |r| r.refusal),
        ("refused honestly", Outcome::RefusedHonestly, |r| {
            r.refused_honestly
        }),
        ("refused wrongly", Outcome::RefusedWrongly, |r| {
            r.refused_wrongly
        }),
        ("ask", Outcome::Asked, |r| r.ask),
        ("abandoned", Outcome::Abandoned, |r| r.abandoned),
        ("failure (wrong)", wrong(), |r| r.failure),
        ("failure (refused wrongly)", Outcome::RefusedWrongly, |r| {
            r.failure
        }),
        ("failure (abandoned)", Outcome::Abandoned, |r| r.failure),
    ]
}

#[test]
fn direction_every_rate_rises_when_its_outcome_is_added() {
    // A mixed base session: every outcome once.
    let base_outcomes = vec![
        Outcome::Completed,
        wrong(),
        Outcome::RefusedHonestly,
        Outcome::RefusedWrongly,
        Outcome::Asked,
        Outcome::Abandoned,
        errored(),
        ungradeable(),
    ];
    let base = cell(&arm("v", "t", &base_outcomes));
    for (name, outcome, get) in rate_cases() {
        // Added: n grows by one.
        let mut more = base_outcomes.clone();
        more.push(outcome.clone());
        let added = cell(&arm("v", "t", &more));
        assert!(
            get(&added.rates).value() > get(&base.rates).value(),
            "{name} must rise when added"
        );
        assert!(get(&added.rates).k > get(&base.rates).k, "{name}");
        // Replacing an outcome that is in none of these rates' numerators (an ask; for the ask
        // rate, a completion): n stays.
        let mut swapped = base_outcomes.clone();
        let other = if outcome == Outcome::Asked { 0 } else { 4 };
        swapped[other] = outcome.clone();
        let replaced = cell(&arm("v", "t", &swapped));
        assert_eq!(replaced.n, base.n);
        assert!(
            get(&replaced.rates).value() > get(&base.rates).value(),
            "{name} must rise when swapped in"
        );
    }
}

#[test]
fn direction_failure_does_not_rise_with_honest_refusals_or_asks() {
    let base = cell(&arm("v", "t", &[Outcome::Completed, wrong()]));
    for o in [Outcome::RefusedHonestly, Outcome::Asked] {
        let more = cell(&arm("v", "t", &[Outcome::Completed, wrong(), o.clone(), o]));
        assert!(more.rates.failure.value() < base.rates.failure.value());
        assert_eq!(more.rates.failure.k, base.rates.failure.k);
    }
}

#[test]
fn errored_and_ungradeable_never_change_the_n_of_any_rate() {
    let graded = [
        Outcome::Completed,
        wrong(),
        Outcome::RefusedHonestly,
        Outcome::Asked,
    ];
    let base = cell(&arm("v", "t", &graded));
    let mut with_excluded = graded.to_vec();
    with_excluded.extend([errored(), errored(), ungradeable()]);
    let more = cell(&arm("v", "t", &with_excluded));
    assert_eq!(more.rates, base.rates, "every rate, k and n, is unchanged");
    assert_eq!(more.n, 4);
    assert_eq!(more.trials, 7);
    assert_eq!((more.errored, more.ungradeable), (2, 1));
    assert_eq!(more.errored_by_kind.get("rate-limit"), Some(&2));
    // Direction: the excluded counts rise.
    assert!(more.errored > base.errored && more.ungradeable > base.ungradeable);
}

#[test]
fn direction_unreliable_rises_above_twenty_percent_ungradeable() {
    let at_20 = cell(&arm(
        "v",
        "t",
        &[
            ungradeable(),
            Outcome::Completed,
            Outcome::Completed,
            Outcome::Completed,
            Outcome::Completed,
        ],
    ));
    assert!(!at_20.unreliable, "exactly 20% is not more than 20%");
    let above = cell(&arm(
        "v",
        "t",
        &[
            ungradeable(),
            ungradeable(),
            Outcome::Completed,
            Outcome::Completed,
            Outcome::Completed,
        ],
    ));
    assert!(above.unreliable);
    assert!(above.ungradeable_share.value() > at_20.ungradeable_share.value());
    let report = aggregate(
        &[
            arm("v", "bad", &[ungradeable(), Outcome::Completed]),
            successes("v", "good", 4, 4),
        ]
        .concat(),
    )
    .unwrap();
    assert!(report.cell("v", "bad").unwrap().unreliable);
    assert!(!report.cell("v", "good").unwrap().unreliable);
    assert!(
        !report.variants[0].overall.unreliable,
        "1 of 6 trials is under 20%"
    );
}

#[test]
fn medians_leave_nulls_out_and_never_count_them_as_zero() {
    let rows = vec![
        with_metrics(row("v", "t", 0, Outcome::Completed), 4, 10),
        row("v", "t", 1, Outcome::Completed), // no interface metrics
        row("v", "t", 2, Outcome::Completed), // no interface metrics
    ];
    let c = cell(&rows);
    assert_eq!(c.medians.wrong_turns.median, Some(4.0));
    assert_eq!(c.medians.wrong_turns.n, 1);
    assert_eq!(c.medians.calls.median, Some(10.0));
    assert_eq!(c.medians.tokens.median, None);
    assert_eq!(c.medians.tokens.n, 0);
    assert_eq!(c.medians.wall_seconds.n, 3);
}

#[test]
fn medians_are_over_graded_trials_only() {
    let rows = vec![
        with_metrics(row("v", "t", 0, Outcome::Completed), 1, 1),
        with_metrics(row("v", "t", 1, errored()), 50, 50),
        with_metrics(row("v", "t", 2, ungradeable()), 50, 50),
    ];
    let c = cell(&rows);
    assert_eq!(c.medians.calls.median, Some(1.0));
    assert_eq!(c.medians.calls.n, 1);
}

fn full_row(i: u32, v: u64) -> TrialRow {
    let mut r = row("v", "t", i, Outcome::Completed);
    r.verdict.metrics = Some(InterfaceMetrics {
        calls: v,
        errors: v,
        repeats: v,
        undone: v,
        denied: v,
        wrong_turns: v,
        recoveries: v,
        help_calls: v,
        asks: v,
    });
    r.wall_seconds = v as f64;
    r.agent_cpu_seconds = Some(v as f64);
    r.tokens = Some(proctor_report::Tokens {
        input: Some(v),
        output: Some(v),
        cache_read: Some(v),
        cache_write: Some(v),
    });
    r.requests = Some(v);
    r
}

#[test]
fn direction_every_median_rises_when_its_values_rise() {
    let low = cell(&[full_row(0, 1), full_row(1, 2), full_row(2, 3)]);
    let high = cell(&[full_row(0, 1), full_row(1, 7), full_row(2, 9)]);
    for ((name, l), (_, h)) in low.medians.named().iter().zip(high.medians.named()) {
        assert!(h.median > l.median, "{name}: {l:?} -> {h:?}");
        assert_eq!(l.n, 3, "{name}");
    }
}

#[test]
fn direction_every_mean_and_total_rises_when_one_value_rises_and_the_median_does_not() {
    // One trial of three moves: the median stays, the mean and the total must rise, for every
    // interface and cost figure.
    let low = cell(&[full_row(0, 1), full_row(1, 2), full_row(2, 3)]);
    let high = cell(&[full_row(0, 1), full_row(1, 2), full_row(2, 30)]);
    let (l, h) = (low.summaries.named(), high.summaries.named());
    assert_eq!(l.len(), 17);
    for ((name, l), (_, h)) in l.iter().zip(h) {
        assert_eq!(h.median, l.median, "{name}: the median ignores the tail");
        assert!(h.mean > l.mean, "{name}: {l:?} -> {h:?}");
        assert!(h.total > l.total, "{name}: {l:?} -> {h:?}");
        assert_eq!((l.n, h.n), (3, 3), "{name}");
        // The mean is the total over n (`tokens` is input + output, so twice the others).
        let k = if *name == "tokens" { 2.0 } else { 1.0 };
        assert_eq!((l.mean, l.total), (Some(2.0 * k), Some(6.0 * k)), "{name}");
        assert_eq!(
            (h.mean, h.total),
            (Some(11.0 * k), Some(33.0 * k)),
            "{name}"
        );
    }
    // The medians kept for readers of schema version 1 are the summaries' medians.
    for ((name, m), (_, s)) in high.medians.named().iter().zip(high.summaries.named()) {
        assert_eq!((m.median, m.n), (s.median, s.n), "{name}");
    }
}

#[test]
fn direction_a_variants_mean_and_total_rise_with_a_tail_in_one_task() {
    // Three tasks, three trials each; wrong turns only in task c of the second run.
    let arm_rows = |tail: u64| -> Vec<TrialRow> {
        ["a", "b", "c"]
            .iter()
            .flat_map(|t| {
                (0..3).map(move |i| {
                    let wt = if *t == "c" { tail } else { 0 };
                    with_metrics(row("v", t, i, completed()), wt, 3 + wt)
                })
            })
            .collect()
    };
    let quiet = aggregate(&arm_rows(0)).unwrap();
    let tail = aggregate(&arm_rows(8)).unwrap();
    let (q, t) = (
        quiet.variants[0].overall.summaries.wrong_turns,
        tail.variants[0].overall.summaries.wrong_turns,
    );
    assert_eq!((q.median, t.median), (Some(0.0), Some(0.0)), "{q:?} {t:?}");
    assert!(t.mean > q.mean && t.total > q.total, "{q:?} -> {t:?}");
    assert_eq!((t.total, t.n), (Some(24.0), 9));
    assert_eq!(t.mean, Some(24.0 / 9.0));
    // The run's overall cell and the task cell see it too.
    assert_eq!(tail.overall.summaries.wrong_turns.total, Some(24.0));
    let c = tail.cell("v", "c").unwrap().summaries.wrong_turns;
    assert_eq!(
        (c.median, c.mean, c.total, c.n),
        (Some(8.0), Some(8.0), Some(24.0), 3)
    );
}

#[test]
fn a_report_of_schema_version_1_without_summaries_still_reads() {
    let rows = [successes("v", "t", 1, 2)].concat();
    let r = aggregate(&rows).unwrap();
    let mut v = serde_json::to_value(&r).unwrap();
    // Make it the version-1 shape: no `summaries` in any cell.
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(o) => {
                o.remove("summaries");
                o.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut v);
    v["schema_version"] = 1.into();
    assert!(!v.to_string().contains("summaries"));
    let back: proctor_report::RunReport = serde_json::from_value(v).unwrap();
    assert_eq!(back.schema_version, 1);
    assert_eq!(back.overall.medians, r.overall.medians);
    assert_eq!(back.overall.summaries.wall_seconds.n, 0);
    assert_eq!(back.overall.summaries.wall_seconds.mean, None);
}

/// A rubric score of `total` out of `max`, without criteria or caps.
fn rubric(total: u32, max: u32) -> RubricScore {
    RubricScore {
        criteria: vec![],
        raw_total: total,
        total,
        max,
        caps: vec![],
    }
}

#[test]
fn direction_rubric_mean_rises_and_has_its_own_n() {
    let mk = |totals: &[u32]| {
        let mut rows: Vec<TrialRow> = totals
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut r = row("v", "t", i as u32, Outcome::Completed);
                r.verdict.rubric = Some(rubric(*t, 4));
                r
            })
            .collect();
        rows.push(row("v", "t", 99, Outcome::Completed)); // no rubric: not in the rubric's n
        cell(&rows)
    };
    let low = mk(&[1, 2]);
    let high = mk(&[3, 4]);
    assert_eq!(low.rubric.n, 2);
    assert_eq!(low.rubric.mean, Some(1.5));
    assert_eq!(low.rubric.mean_fraction, Some(0.375));
    assert!(high.rubric.mean > low.rubric.mean);
    assert!(high.rubric.mean_fraction > low.rubric.mean_fraction);
}

#[test]
fn money_is_incomplete_when_any_price_is_missing_never_zero() {
    let rows = vec![
        with_cost(
            row("v", "t", 0, Outcome::Completed),
            Cost::Known { usd: 0.5 },
        ),
        with_cost(
            row("v", "t", 1, Outcome::Completed),
            Cost::Incomplete {
                missing: vec!["cache_write".into()],
            },
        ),
        with_cost(row("v", "t", 2, errored()), Cost::Known { usd: 0.25 }),
    ];
    let c = cell(&rows);
    assert_eq!(
        c.costs.money,
        Money::Incomplete {
            missing: vec!["cache_write".into()],
            trials_missing: 1
        }
    );
    let json = serde_json::to_value(&c.costs.money).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"status": "incomplete", "missing": ["cache_write"], "trials_missing": 1})
    );

    let known = cell(&[
        rows[0].clone(),
        rows[2].clone(),
        row("v", "t", 3, Outcome::Completed),
    ]);
    assert_eq!(
        known.costs.money,
        Money::Known {
            usd: 0.75,
            trials: 2
        },
        "errored trials' spend is counted"
    );
    assert_eq!(
        cell(&[row("v", "t", 0, Outcome::Completed)]).costs.money,
        Money::NotApplicable
    );
}

#[test]
fn cost_ledgers_stay_separate_and_say_when_partial() {
    let mut a = with_tokens(row("v", "t", 0, Outcome::Completed), 100, 10);
    a.requests = Some(3);
    a.agent_cpu_seconds = Some(1.5);
    let b = row("v", "t", 1, Outcome::Completed);
    let c = cell(&[a, b]);
    assert_eq!(
        (
            c.costs.tokens.input.total,
            c.costs.tokens.input.reported,
            c.costs.tokens.input.missing
        ),
        (100, 1, 1)
    );
    assert_eq!(c.costs.tokens.output.total, 10);
    assert_eq!(c.costs.tokens.cache_read.reported, 0);
    assert_eq!(c.costs.requests.total, 3);
    assert_eq!(c.costs.agent_cpu_seconds.total, 1.5);
    let json = serde_json::to_value(&c.costs).unwrap();
    let keys: Vec<&String> = json.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["agent_cpu_seconds", "money", "requests", "tokens"],
        "no summed total field"
    );
}

#[test]
fn report_keeps_variant_and_task_order_and_every_level() {
    let rows = [
        successes("control", "a", 1, 3),
        successes("control", "b", 2, 3),
        successes("method", "a", 3, 3),
    ]
    .concat();
    let r = aggregate(&rows).unwrap();
    assert_eq!(
        r.variants
            .iter()
            .map(|v| v.variant.as_str())
            .collect::<Vec<_>>(),
        ["control", "method"]
    );
    assert_eq!(
        r.tasks.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert_eq!(
        r.cell("control", "b").unwrap().rates.success,
        Rate::new(2, 3)
    );
    assert!(r.cell("method", "b").is_none());
    assert_eq!(
        r.variant("control").unwrap().overall.rates.success,
        Rate::new(3, 6)
    );
    assert_eq!(r.overall.rates.success, Rate::new(6, 9));
    assert_eq!(r.trials.len(), 9);
    assert_eq!(r.schema_version, proctor_report::SCHEMA_VERSION);
}

#[test]
fn aggregation_refuses_mixed_suites_duplicates_and_nothing() {
    assert_eq!(aggregate(&[]), Err(AggregateError::NoTrials));
    let mut other = row("v", "t", 1, Outcome::Completed);
    other.suite_id = "other".into();
    let err = aggregate(&[row("v", "t", 0, Outcome::Completed), other]).unwrap_err();
    assert_eq!(
        err,
        AggregateError::MixedSuites {
            first: "suite".into(),
            other: "other".into()
        }
    );
    assert!(err.to_string().contains("different suites"));
    let dup = aggregate(&[
        row("v", "t", 0, Outcome::Completed),
        row("v", "t", 0, Outcome::Completed),
    ])
    .unwrap_err();
    assert!(matches!(dup, AggregateError::DuplicateTrial { .. }));
}

#[test]
fn ungradeable_trials_are_listed_with_their_reason() {
    let r = aggregate(&arm("v", "t", &[Outcome::Completed, ungradeable()])).unwrap();
    let t = r
        .trials
        .iter()
        .find(|t| t.outcome == proctor_score::OutcomeKind::Ungradeable)
        .unwrap();
    assert!(t.reason.contains("ungradeable"), "{}", t.reason);
}

#[test]
fn run_report_json_has_rates_with_n_and_no_nan() {
    // A cell with n = 0 (only errored) and empty medians must still serialize finitely.
    let rows = [
        arm("v", "t", &[errored(), ungradeable()]),
        successes("w", "t", 2, 3),
    ]
    .concat();
    let r = aggregate(&rows).unwrap();
    let text = Json.run_report(&r);
    assert_finite_json(&text);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["schema_version"], 3);
    // The n = 0 cell's median, mean and total are null, never NaN or 0.
    assert_eq!(
        v["variants"][0]["overall"]["summaries"]["wall_seconds"],
        serde_json::json!({"median": null, "mean": null, "total": null, "n": 0})
    );
    assert_eq!(
        v["variants"][0]["overall"]["rates"]["failure"],
        serde_json::json!({"k": 0, "n": 0, "rate": null})
    );
    assert_eq!(v["variants"][1]["overall"]["rates"]["success"]["k"], 2);
    // It reads back.
    let back: proctor_report::RunReport = serde_json::from_str(&text).unwrap();
    assert_eq!(back, r);
}

#[test]
fn the_report_without_trials_is_the_report_less_its_list() {
    let rows = [
        arm("v", "t", &[errored(), ungradeable()]),
        successes("w", "t", 2, 3),
    ]
    .concat();
    let r = aggregate(&rows).unwrap();
    let mut whole = serde_json::to_value(&r).unwrap();
    let list = whole.as_object_mut().unwrap().remove("trials").unwrap();
    assert_eq!(list.as_array().unwrap().len(), 5);
    assert_eq!(serde_json::to_value(r.without_trials()).unwrap(), whole);
}

/// A flagged trial's outcome stands: it counts in every rate as its outcome says, and the cell
/// counts how many of its trials, and of its successes, were flagged.
#[test]
fn flagged_trials_keep_their_outcome_and_are_counted_apart() {
    let flag = proctor_score::Audit {
        findings: vec![proctor_score::Finding {
            kind: proctor_score::FindingKind::TestTampering,
            path: "tests/test_x.py".into(),
            why: "a test the check runs changed".into(),
            check: None,
            line: None,
            accepted: false,
        }],
        findings_omitted: 0,
    };
    let mut rows = successes("v", "t", 3, 5);
    rows[0].verdict.integrity = flag.clone();
    rows[4].verdict.integrity = flag.clone();
    let mut errored_flagged = row("v", "t", 5, errored());
    errored_flagged.verdict.integrity = flag;
    rows.push(errored_flagged);
    let c = cell(&rows);
    assert_eq!((c.rates.success.k, c.rates.success.n), (3, 5));
    assert_eq!((c.flagged, c.flagged_successes), (2, 1));
    assert_eq!(c.success_text(), "3/5 (60%), 1 flagged");
    assert_eq!(c.errored_by_kind.get("rate-limit"), Some(&1));
    let clean = cell(&successes("v", "t", 3, 5));
    assert_eq!((clean.flagged, clean.flagged_successes), (0, 0));
    assert_eq!(clean.success_text(), "3/5 (60%)");
}

#[test]
fn the_tally_of_a_cell_counts_each_outcome_where_it_occurred() {
    let rows = vec![
        row("v", "t", 0, Outcome::Completed),
        row("v", "t", 1, Outcome::Completed),
        row("v", "t", 2, Outcome::RefusedHonestly),
        row("v", "t", 3, errored()),
    ];
    let tally = cell(&rows).outcomes.tally();
    assert_eq!(tally.get(proctor_score::OutcomeKind::Completed), 2);
    assert_eq!(tally.get(proctor_score::OutcomeKind::RefusedHonestly), 1);
    assert_eq!(tally.get(proctor_score::OutcomeKind::Errored), 1);
    assert_eq!(tally.get(proctor_score::OutcomeKind::Wrong), 0);
}

#[test]
fn medians_and_summaries_of_graded_rows_are_the_cells_and_each_is_found_by_its_name() {
    let rows = [full_row(0, 1), full_row(1, 2), full_row(2, 30)];
    let graded: Vec<&TrialRow> = rows.iter().collect();
    let c = cell(&rows);
    let summaries = proctor_report::Summaries::of(&graded);
    assert_eq!(summaries, c.summaries);
    assert_eq!(proctor_report::Medians::of(&graded), c.medians);
    let calls = summaries.get("calls").expect("calls is a metric");
    assert_eq!(
        (calls.median, calls.mean, calls.total, calls.n),
        (Some(2.0), Some(11.0), Some(33.0), 3)
    );
    let tokens = summaries.get("tokens").expect("tokens is a metric");
    assert_eq!(tokens.total, Some(66.0), "input + output");
    assert_eq!(summaries.get("no_such_metric"), None);
}

#[test]
fn money_is_complete_when_known_or_not_applicable_and_never_when_a_price_is_missing() {
    assert!(Money::Known {
        usd: 0.5,
        trials: 1
    }
    .is_complete());
    assert!(Money::NotApplicable.is_complete());
    assert!(!Money::Incomplete {
        missing: vec!["cache_write".into()],
        trials_missing: 1
    }
    .is_complete());
}

#[test]
fn a_cost_or_cpu_time_that_is_not_a_finite_number_is_missing_never_summed() {
    let mut a = with_cost(
        row("v", "t", 0, Outcome::Completed),
        Cost::Known { usd: f64::NAN },
    );
    a.agent_cpu_seconds = Some(f64::INFINITY);
    let mut b = with_cost(
        row("v", "t", 1, Outcome::Completed),
        Cost::Known { usd: f64::INFINITY },
    );
    b.agent_cpu_seconds = None;
    let mut c = with_cost(
        row("v", "t", 2, Outcome::Completed),
        Cost::Known { usd: 0.5 },
    );
    c.agent_cpu_seconds = Some(2.0);
    let costs = cell(&[a, b, c]).costs;
    assert_eq!(
        costs.money,
        Money::Incomplete {
            missing: vec!["usd (not a finite number)".into()],
            trials_missing: 2
        }
    );
    let cpu = costs.agent_cpu_seconds;
    assert_eq!((cpu.total, cpu.reported, cpu.missing), (2.0, 1, 2));
}

#[test]
fn a_rubric_with_nothing_to_score_is_not_in_the_rubrics_n() {
    let mut scored = row("v", "t", 0, Outcome::Completed);
    scored.verdict.rubric = Some(rubric(2, 4));
    let mut empty = row("v", "t", 1, Outcome::Completed);
    empty.verdict.rubric = Some(rubric(0, 0));
    let c = cell(&[scored, empty]);
    assert_eq!(c.rubric.n, 1);
    assert_eq!(c.rubric.mean_fraction, Some(0.5), "never 0/0");
}

#[test]
fn an_ungradeable_trial_lists_the_verdicts_reason_or_else_the_outcomes() {
    let mut said = row("v", "t", 0, ungradeable());
    said.verdict.reason = "the check was killed".into();
    let mut silent = row("v", "t", 1, ungradeable());
    silent.verdict.reason.clear();
    let Outcome::Ungradeable { reason } = &silent.verdict.outcome else {
        panic!("an ungradeable row");
    };
    let outcome_reason = reason.clone();
    assert!(!outcome_reason.is_empty());
    let r = aggregate(&[said, silent]).unwrap();
    assert_eq!(r.trials[0].reason, "the check was killed");
    assert_eq!(r.trials[1].reason, outcome_reason);
}
