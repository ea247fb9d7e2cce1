//! Comparison: matching and its refusals, the keystone at comparison level, direction tests for
//! every compared quantity, the power threshold, the sign test a direction needs (no verdict from
//! noise), and zero baselines.

mod common;

use common::*;
use proctor_report::{
    compare, Assessment, CompareError, CompareOptions, Comparison, ComparisonVerdict, Exporter,
    Json, Markdown, Rate, Side, Terminal, TrialRow, WarningKind,
};
use proctor_score::Outcome;

fn opts(threshold: u32) -> CompareOptions {
    CompareOptions {
        underpowered_below: threshold,
        label_a: None,
        label_b: None,
        variant_tasks: Default::default(),
    }
}

fn cmp(a: &[TrialRow], b: &[TrialRow], threshold: u32) -> Comparison {
    compare(a, b, &opts(threshold)).unwrap()
}

/// Two tasks × `n` trials per arm, with `ka` and `kb` successes per task.
fn two_tasks(ka: usize, kb: usize, n: usize) -> (Vec<TrialRow>, Vec<TrialRow>) {
    let a = [
        successes("control", "t1", ka, n),
        successes("control", "t2", ka, n),
    ]
    .concat();
    let b = [
        successes("method", "t1", kb, n),
        successes("method", "t2", kb, n),
    ]
    .concat();
    (a, b)
}

#[test]
fn keystone_an_arm_of_only_honest_refusals_has_zero_failure() {
    // 12 of 16 pairs where only B failed: beyond noise (the sign test needs 10 of 12).
    let a = arm("control", "t", &vec![Outcome::RefusedHonestly; 16]);
    let b = successes("method", "t", 4, 16);
    let c = cmp(&a, &b, 8);
    assert_eq!(c.overall.a.cell.rates.failure, Rate::new(0, 16));
    assert_eq!(c.tasks[0].comparison.a.cell.rates.failure, Rate::new(0, 16));
    assert_eq!(c.overall.differences.failure.a, Some(0.0));
    assert_eq!(c.overall.differences.failure.b, Some(0.75));
    assert_eq!(
        (
            c.overall.differences.failure.b_higher,
            c.overall.differences.failure.b_lower
        ),
        (12, 0)
    );
    assert_eq!(c.overall.differences.failure.assessment, Assessment::Worse);
}

#[test]
fn direction_matched_success_and_failure_differences_rise() {
    let (a, b) = two_tasks(2, 2, 5);
    let same = cmp(&a, &b, 8);
    let (a, b) = two_tasks(2, 4, 5);
    let more = cmp(&a, &b, 8);
    assert_eq!(same.overall.differences.success.difference, Some(0.0));
    assert!(
        more.overall.differences.success.difference > same.overall.differences.success.difference
    );
    assert!(more.overall.b.cell.rates.success.value() > same.overall.b.cell.rates.success.value());
    // Failure rises when B has more wrong trials.
    let (a, b) = two_tasks(2, 1, 5);
    let worse = cmp(&a, &b, 8);
    assert!(
        worse.overall.differences.failure.difference > same.overall.differences.failure.difference
    );
    assert!(worse.overall.b.cell.rates.failure.value() > same.overall.b.cell.rates.failure.value());
}

#[test]
fn direction_every_rate_of_an_arm_rises_with_its_outcome() {
    for (o, get) in [
        (
            Outcome::Completed,
            (|c: &proctor_report::Cell| c.rates.completion) as fn(&proctor_report::Cell) -> Rate,
        ),
        (wrong(), |c| c.rates.wrong),
        (Outcome::RefusedHonestly, |c| c.rates.refused_honestly),
        (Outcome::RefusedWrongly, |c| c.rates.refused_wrongly),
        (Outcome::Asked, |c| c.rates.ask),
        (Outcome::Abandoned, |c| c.rates.abandoned),
        (Outcome::RefusedWrongly, |c| c.rates.failure),
    ] {
        let a = arm(
            "control",
            "t",
            &[Outcome::Completed, Outcome::Asked, wrong()],
        );
        let b_base = arm(
            "method",
            "t",
            &[Outcome::Completed, Outcome::Asked, wrong()],
        );
        let mut b_more = arm(
            "method",
            "t",
            &[Outcome::Completed, Outcome::Asked, wrong()],
        );
        b_more.push(row("method", "t", 3, o.clone()));
        let mut a_more = a.clone();
        a_more.push(row("control", "t", 3, Outcome::Completed));
        let base = cmp(&a, &b_base, 1);
        let more = cmp(&a_more, &b_more, 1);
        assert!(
            get(&more.overall.b.cell).value() > get(&base.overall.b.cell).value(),
            "{o}"
        );
    }
}

#[test]
fn direction_matched_median_differences_rise() {
    // Six pairs: when every one of them differs, six of six is beyond noise.
    let mk = |variant: &str, wt: u64, calls: u64, tokens: u64, wall: f64| {
        (0..6u32)
            .map(|i| {
                let mut r = with_tokens(
                    with_metrics(row(variant, "t", i, Outcome::Completed), wt, calls),
                    tokens,
                    0,
                );
                r.wall_seconds = wall;
                r
            })
            .collect::<Vec<_>>()
    };
    let a = mk("control", 2, 10, 1000, 10.0);
    let low = cmp(&a, &mk("method", 2, 10, 1000, 10.0), 1);
    let high = cmp(&a, &mk("method", 6, 20, 3000, 30.0), 1);
    let (l, h) = (&low.overall.differences, &high.overall.differences);
    assert!(h.wrong_turns.difference > l.wrong_turns.difference);
    assert!(h.calls.difference > l.calls.difference);
    assert!(h.tokens.difference > l.tokens.difference);
    assert!(h.wall_seconds.difference > l.wall_seconds.difference);
    assert_eq!(h.wrong_turns.assessment, Assessment::Worse);
    assert_eq!(l.wrong_turns.assessment, Assessment::Same);
    // The arms' own medians rise too.
    assert!(
        high.overall.b.cell.medians.wrong_turns.median
            > low.overall.b.cell.medians.wrong_turns.median
    );
    assert!(high.overall.b.cell.medians.calls.median > low.overall.b.cell.medians.calls.median);
    assert!(high.overall.b.cell.medians.tokens.median > low.overall.b.cell.medians.tokens.median);
}

#[test]
fn direction_an_arm_that_asks_more_shows_more_asks_and_no_more_failures() {
    // The same outcomes in both arms (every trial completed); arm B asks twice where A asks
    // once: the asks difference rises and is worse, the failure difference does not move.
    let mk = |variant: &str, asks: u64| {
        (0..6u32)
            .map(|i| {
                let mut r = with_metrics(row(variant, "t", i, Outcome::Completed), 0, 3);
                if let Some(m) = r.verdict.metrics.as_mut() {
                    m.asks = asks;
                }
                r
            })
            .collect::<Vec<_>>()
    };
    let a = mk("control", 1);
    let same = cmp(&a, &mk("method", 1), 1).overall.differences;
    let more = cmp(&a, &mk("method", 2), 1).overall.differences;
    assert!(more.asks.difference > same.asks.difference);
    assert_eq!(more.asks.assessment, Assessment::Worse);
    assert_eq!(same.asks.assessment, Assessment::Same);
    assert_eq!(more.failure.difference, same.failure.difference);
    assert_eq!(more.failure.difference, Some(0.0));
    assert_eq!(
        more.wrong_turns.difference,
        Some(0.0),
        "an ask is no wrong turn"
    );
}

#[test]
fn direction_pass_at_k_and_pass_pow_k_rise_with_successes() {
    let (a, b1) = two_tasks(2, 2, 5);
    let (_, b2) = two_tasks(2, 4, 5);
    let low = cmp(&a, &b1, 8);
    let high = cmp(&a, &b2, 8);
    assert_eq!(low.pass_k_max, 5);
    assert_eq!(low.overall.b.pass_at_k.len(), 5);
    for k in 0..5 {
        // pass@k saturates at 1 once k > n - c: it never falls, and rises strictly before that.
        assert!(
            high.overall.b.pass_at_k[k].value >= low.overall.b.pass_at_k[k].value,
            "pass@{}",
            k + 1
        );
        assert!(
            high.overall.b.pass_pow_k[k].value >= low.overall.b.pass_pow_k[k].value,
            "pass^{}",
            k + 1
        );
    }
    for k in 0..3 {
        assert!(
            high.overall.b.pass_at_k[k].value > low.overall.b.pass_at_k[k].value,
            "pass@{}",
            k + 1
        );
    }
    for k in 0..4 {
        assert!(
            high.overall.b.pass_pow_k[k].value > low.overall.b.pass_pow_k[k].value,
            "pass^{}",
            k + 1
        );
        assert_eq!(high.overall.b.pass_at_k[k].tasks, 2);
    }
    // k = 1 is the success rate.
    assert_eq!(low.overall.b.pass_at_k[0].value, Some(0.4));
    // pass@k rises with k; pass^k falls.
    assert!(low.overall.b.pass_at_k[2].value > low.overall.b.pass_at_k[1].value);
    assert!(low.overall.b.pass_pow_k[2].value < low.overall.b.pass_pow_k[1].value);
}

#[test]
fn pass_k_goes_up_to_the_fewest_graded_trials_of_a_task() {
    let a = [
        successes("control", "t1", 1, 5),
        successes("control", "t2", 1, 3),
    ]
    .concat();
    let b = [
        successes("method", "t1", 1, 5),
        successes("method", "t2", 1, 3),
    ]
    .concat();
    let c = cmp(&a, &b, 1);
    assert_eq!(c.pass_k_max, 3);
    assert_eq!(c.tasks[0].comparison.b.pass_at_k.len(), 3);
}

#[test]
fn below_the_threshold_the_verdict_is_underpowered_never_same() {
    let (a, b) = two_tasks(3, 3, 3); // n = 6 per arm
    let c = cmp(&a, &b, 8);
    assert_eq!(c.overall.verdict, ComparisonVerdict::Underpowered);
    assert!(c
        .tasks
        .iter()
        .all(|t| t.comparison.verdict == ComparisonVerdict::Underpowered));
    assert_eq!(
        c.overall.differences.success.assessment,
        Assessment::Underpowered
    );
    assert!(c.overall.reason.contains("6"));
    // Even a large difference says nothing below the threshold.
    let (a, b) = two_tasks(0, 3, 3);
    assert_eq!(
        cmp(&a, &b, 8).overall.verdict,
        ComparisonVerdict::Underpowered
    );
}

#[test]
fn exactly_at_the_threshold_verdicts_appear() {
    let (a, b) = two_tasks(2, 2, 4); // n = 8 per arm
    assert_eq!(cmp(&a, &b, 8).overall.verdict, ComparisonVerdict::Same);
    // Every one of the 8 pairs discordant, all one way: 8 of 8 is beyond noise.
    let (a, b) = two_tasks(0, 4, 4);
    assert_eq!(cmp(&a, &b, 8).overall.verdict, ComparisonVerdict::Better);
    let (a, b) = two_tasks(4, 0, 4);
    assert_eq!(cmp(&a, &b, 8).overall.verdict, ComparisonVerdict::Worse);
    // 2 vs 0 discordant pairs (B vs A): too few pairs differ, whatever the graded n; the reason says so.
    let (a, b) = two_tasks(2, 3, 4);
    let c = cmp(&a, &b, 8);
    assert_eq!(c.overall.verdict, ComparisonVerdict::Underpowered);
    assert!(
        c.overall
            .reason
            .contains("2 vs 0 discordant pairs (B vs A): too few pairs differ"),
        "{}",
        c.overall.reason
    );
    // One arm under the threshold (an errored trial is not graded) is enough to withhold it.
    let (a, mut b) = two_tasks(2, 2, 4);
    b[7].verdict.outcome = errored();
    b[7].verdict.task_success = false;
    assert_eq!(
        cmp(&a, &b, 8).overall.verdict,
        ComparisonVerdict::Underpowered
    );
}

#[test]
fn success_is_compared_first_then_wrong_turns() {
    let mk = |variant: &str, k: usize, wt: u64| {
        successes(variant, "t", k, 16)
            .into_iter()
            .map(|r| with_metrics(r, wt, 5))
            .collect::<Vec<_>>()
    };
    // Equal success, fewer wrong turns: better.
    let c = cmp(&mk("control", 4, 3), &mk("method", 4, 1), 8);
    assert_eq!(c.overall.verdict, ComparisonVerdict::Better);
    assert!(
        c.overall
            .reason
            .contains("median wrong turns 3 -> 1 (n=16;"),
        "the reason gives the medians it rests on: {}",
        c.overall.reason
    );
    // More success (8 of 8 discordant pairs B's) despite more wrong turns: better.
    let c = cmp(&mk("control", 4, 1), &mk("method", 12, 3), 8);
    assert_eq!(c.overall.verdict, ComparisonVerdict::Better);
    // Equal success, more wrong turns: worse.
    let c = cmp(&mk("control", 4, 1), &mk("method", 4, 3), 8);
    assert_eq!(c.overall.verdict, ComparisonVerdict::Worse);
}

#[test]
fn a_metric_difference_needs_its_pairs_lopsided_and_is_underpowered_below_the_threshold() {
    // Calls and tokens per pair: `b_more` of the `n` pairs have B higher, the rest equal.
    let mk = |n: usize, b_more: usize| {
        let a: Vec<TrialRow> = successes("control", "t", n / 2, n)
            .into_iter()
            .map(|r| with_tokens(with_metrics(r, 10, 10), 1000, 0))
            .collect();
        let b: Vec<TrialRow> = successes("method", "t", n / 2, n)
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                let up = u64::from(i < b_more) * 2;
                with_tokens(with_metrics(r, 10 + up, 10 + up), 1000 + up * 100, 0)
            })
            .collect();
        (a, b)
    };
    // Below the threshold every difference is underpowered, small or large (no `noise`).
    let (a, b) = mk(4, 4);
    let below = cmp(&a, &b, 8);
    for (name, c) in changes(&below.overall.differences) {
        assert_eq!(c.assessment, Assessment::Underpowered, "{name}");
    }
    // At the threshold, 4 of 4 pairs higher is still too few pairs to say anything.
    let few = cmp(&a, &b, 4).overall.differences;
    assert_eq!(few.calls.assessment, Assessment::Underpowered);
    assert_eq!(
        (few.calls.b_higher, few.calls.b_lower, few.calls.needs),
        (4, 0, None)
    );
    // 8 of 8: worse, by the calls' own pairs.
    let (a, b) = mk(8, 8);
    let all = cmp(&a, &b, 8).overall.differences;
    for c in [all.calls, all.tokens, all.wrong_turns] {
        assert_eq!(c.assessment, Assessment::Worse);
        assert_eq!((c.b_higher, c.b_lower, c.needs), (8, 0, Some(8)));
    }
    // 5 of 9 pairs higher, 4 equal: the median moved (10 -> 12), but 5 differing pairs are too
    // few. 9 of 16 higher, 7 equal: 9 of 9 differing pairs is beyond the 8 that 9 need.
    let (a, b) = mk(9, 5);
    let c = cmp(&a, &b, 8).overall.differences.calls;
    assert_eq!(c.difference, Some(2.0));
    assert_eq!(c.assessment, Assessment::Underpowered);
    let (a, b) = mk(16, 9);
    let c = cmp(&a, &b, 8).overall.differences.calls;
    assert_eq!((c.b_higher, c.b_lower, c.needs), (9, 0, Some(8)));
    assert_eq!(c.assessment, Assessment::Worse);
}

#[test]
fn a_zero_baseline_serializes_relative_null_and_unbounded() {
    let (a, b) = two_tasks(0, 2, 4);
    let c = cmp(&a, &b, 8);
    let s = &c.overall.differences.success;
    assert_eq!((s.relative, s.relative_unbounded), (None, true));
    let text = Json.comparison(&c);
    assert_finite_json(&text);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let success = &v["overall"]["differences"]["success"];
    assert_eq!(success["relative"], serde_json::Value::Null);
    assert_eq!(success["relative_unbounded"], true);
    assert_eq!(success["a"], 0.0);
    assert_eq!(success["b"], 0.5);
    // 0 -> 0 is no change: null, not unbounded.
    let (a, b) = two_tasks(0, 0, 4);
    let s = cmp(&a, &b, 8).overall.differences.success;
    assert_eq!((s.relative, s.relative_unbounded), (None, false));
}

#[test]
fn every_json_output_is_free_of_nan_and_infinity() {
    // Zero baselines everywhere, an arm with no graded trial, tasks with no metrics.
    let a = [
        arm("control", "t1", &[errored(), ungradeable()]),
        successes("control", "t2", 0, 3),
    ]
    .concat();
    let b = [
        arm(
            "method",
            "t1",
            &[Outcome::Completed, Outcome::RefusedHonestly],
        ),
        successes("method", "t2", 3, 3),
    ]
    .concat();
    let b: Vec<TrialRow> = b
        .into_iter()
        .map(|r| with_tokens(with_metrics(r, 2, 3), 10, 0))
        .collect();
    let a: Vec<TrialRow> = a
        .into_iter()
        .map(|r| with_tokens(with_metrics(r, 0, 0), 0, 0))
        .collect();
    let c = cmp(&a, &b, 8);
    assert_finite_json(&Json.comparison(&c));
    let all = [a, b].concat();
    assert_finite_json(&Json.run_report(&proctor_report::aggregate(&all).unwrap()));
    for schema in [
        proctor_report::json_schema(),
        proctor_report::comparison_json_schema(),
        proctor_report::gate_json_schema(),
    ] {
        assert_finite_json(&schema.to_string());
    }
}

#[test]
fn matching_refuses_different_suites_with_the_reason() {
    let a = successes("control", "t", 1, 2);
    let mut b = successes("method", "t", 1, 2);
    b.iter_mut().for_each(|r| r.suite_id = "other".into());
    let err = compare(&a, &b, &opts(8)).unwrap_err();
    assert_eq!(
        err,
        CompareError::DifferentSuites {
            a: "suite".into(),
            b: "other".into()
        }
    );
    assert!(err.to_string().contains("unlike suites"), "{err}");
}

#[test]
fn matching_refuses_different_fixtures_with_the_reason() {
    let a = successes("control", "t", 1, 2);
    let mut b = successes("method", "t", 1, 2);
    b.iter_mut().for_each(|r| r.fixture_hash = "fx2".into());
    let err = compare(&a, &b, &opts(8)).unwrap_err();
    assert!(matches!(err, CompareError::FixtureMismatch { .. }));
    assert!(
        err.to_string().contains("fixture") && err.to_string().contains("fx2"),
        "{err}"
    );
    // The same fixtures in both arms, but a pair that disagrees.
    let mut a = successes("control", "t", 1, 2);
    let mut b = successes("method", "t", 1, 2);
    a[0].fixture_hash = "fx2".into();
    b[1].fixture_hash = "fx2".into();
    let err = compare(&a, &b, &opts(8)).unwrap_err();
    assert!(err.to_string().contains("task `t` trial 0"), "{err}");
}

#[test]
fn matching_refuses_a_pair_with_different_mutations() {
    let a: Vec<TrialRow> = successes("control", "t", 1, 2)
        .into_iter()
        .map(|r| with_mutation(r, "m1.patch"))
        .collect();
    let mut b: Vec<TrialRow> = successes("method", "t", 1, 2)
        .into_iter()
        .map(|r| with_mutation(r, "m1.patch"))
        .collect();
    b[1] = with_mutation(b[1].clone(), "m2.patch");
    let err = compare(&a, &b, &opts(8)).unwrap_err();
    assert!(matches!(
        err,
        CompareError::MutationMismatch { trial_index: 1, .. }
    ));
    assert!(
        err.to_string().contains("m1.patch") && err.to_string().contains("m2.patch"),
        "{err}"
    );
    // Same mutations match.
    b[1] = with_mutation(b[1].clone(), "m1.patch");
    assert_eq!(cmp(&a, &b, 8).matched, 2);
}

#[test]
fn unmatched_trials_are_listed_not_dropped() {
    let a = successes("control", "t", 2, 4);
    let mut b = successes("method", "t", 2, 3);
    b.push(row("method", "other", 0, Outcome::Completed));
    let c = cmp(&a, &b, 1);
    assert_eq!(c.matched, 3);
    assert_eq!(c.unmatched.len(), 2);
    assert!(c
        .unmatched
        .iter()
        .any(|u| u.side == Side::A && u.task == "t" && u.trial_index == 3));
    assert!(c
        .unmatched
        .iter()
        .any(|u| u.side == Side::B && u.task == "other"));
    assert!(c
        .warnings
        .iter()
        .any(|w| w.kind == WarningKind::Unmatched
            && w.message.contains("2 trial(s) have no partner")));
    assert_eq!(
        c.overall.a.cell.trials, 3,
        "numbers are over matched trials"
    );
    assert_eq!(c.a.trials, 4, "the arm's own count keeps every trial given");
}

#[test]
fn an_arm_mixing_variants_is_refused() {
    let a = [
        successes("control", "t", 1, 2),
        successes("other", "t", 1, 2),
    ]
    .concat();
    let b = successes("method", "t", 1, 2);
    let err = compare(&a, &b, &opts(8)).unwrap_err();
    assert!(
        matches!(err, CompareError::AmbiguousArm { side: Side::A, .. }),
        "{err}"
    );
    assert!(matches!(
        compare(&[], &b, &opts(8)),
        Err(CompareError::EmptyArm { side: Side::A })
    ));
}

#[test]
fn a_changed_suite_hash_is_a_warning() {
    let a = successes("control", "t", 1, 2);
    let mut b = successes("control", "t", 1, 2);
    b.iter_mut().for_each(|r| {
        r.suite_hash = "sh2".into();
        r.run_id = "R2".into();
    });
    let c = cmp(&a, &b, 1);
    assert!(c
        .warnings
        .iter()
        .any(|w| w.kind == WarningKind::DifferentRules
            && w.message.contains("scored by different suite versions")));
    assert_eq!(c.a.label, "R1/control");
    assert_eq!(c.b.label, "R2/control");
}

#[test]
fn errored_pairs_are_out_of_the_matched_difference_n() {
    let a = successes("control", "t", 2, 4);
    let mut b = successes("method", "t", 2, 4);
    b[0].verdict.outcome = errored();
    b[0].verdict.task_success = false;
    let c = cmp(&a, &b, 1);
    assert_eq!(c.overall.differences.success.n, 3);
    assert_eq!(c.overall.b.cell.n, 3);
    assert_eq!(c.overall.a.cell.n, 4);
}

/// Every change of a comparison, by name.
fn changes(
    d: &proctor_report::compare::Differences,
) -> [(&'static str, proctor_report::compare::Change); 6] {
    [
        ("success", d.success),
        ("failure", d.failure),
        ("wrong turns", d.wrong_turns),
        ("calls", d.calls),
        ("tokens", d.tokens),
        ("wall seconds", d.wall_seconds),
    ]
}

#[test]
fn a_zero_difference_is_same_at_the_threshold_and_underpowered_below_it() {
    let mk = |variant: &str, n: usize, wall: f64| {
        successes(variant, "t", n / 2, n)
            .into_iter()
            .map(|r| {
                let mut r = with_tokens(with_metrics(r, 2, 7), 1000, 100);
                r.wall_seconds = wall;
                r
            })
            .collect::<Vec<_>>()
    };
    // Identical arms, and arms whose wall time differs by less than the 0.01 s a report shows.
    for wall_b in [10.0, 10.003, 9.997] {
        let at = cmp(&mk("control", 4, 10.0), &mk("method", 4, wall_b), 4);
        assert_eq!(at.overall.verdict, ComparisonVerdict::Same, "{wall_b}");
        for (name, c) in changes(&at.overall.differences) {
            assert_eq!(c.assessment, Assessment::Same, "{name} at {wall_b}");
        }
        let below = cmp(&mk("control", 4, 10.0), &mk("method", 4, wall_b), 5);
        assert_eq!(below.overall.verdict, ComparisonVerdict::Underpowered);
        for (name, c) in changes(&below.overall.differences) {
            // Never `noise` (a zero difference is not a small one), never a direction.
            assert_eq!(c.assessment, Assessment::Underpowered, "{name} at {wall_b}");
        }
    }
    // A wall-time difference a report shows (0.01 s and up), in each of 6 pairs, keeps its
    // direction.
    let slower = cmp(&mk("control", 6, 10.0), &mk("method", 6, 10.02), 4);
    assert_eq!(
        slower.overall.differences.wall_seconds.assessment,
        Assessment::Worse
    );
}

#[test]
fn no_rendered_difference_reads_plus_zero_beside_better_or_worse() {
    // Medians of an even number of wall times carry floating-point noise ((0.1 + 0.2) / 2 is
    // not 0.15), and a one-trial difference over many pairs is well under one point.
    let mk = |variant: &str, walls: &[f64], k: usize, n: usize| {
        successes(variant, "t", k, n)
            .into_iter()
            .enumerate()
            .map(|(i, mut r)| {
                r.wall_seconds = walls[i % walls.len()];
                r
            })
            .collect::<Vec<_>>()
    };
    let a = mk("control", &[0.1, 0.2], 150, 300);
    let b = mk("method", &[0.15], 151, 300);
    let c = cmp(&a, &b, 8);
    assert_eq!(
        c.overall.differences.wall_seconds.assessment,
        Assessment::Same
    );
    // One discordant pair is no direction: far too few pairs differ.
    assert_eq!(
        c.overall.differences.success.assessment,
        Assessment::Underpowered
    );
    assert_eq!(c.overall.verdict, ComparisonVerdict::Underpowered);
    assert!(
        c.overall.reason.contains("+0.3 points"),
        "{}",
        c.overall.reason
    );
    for text in [
        proctor_report::Terminal.comparison(&c),
        proctor_report::Markdown.comparison(&c),
    ] {
        for line in text.lines() {
            let cells: Vec<&str> = line.split(['|', ' ']).filter(|s| !s.is_empty()).collect();
            let directed = cells.iter().any(|c| *c == "better" || *c == "worse");
            let zero = line.contains(" +0 ") || line.contains("+0 points");
            assert!(
                !(directed && zero),
                "reads +0 with a direction: {line}\n{text}"
            );
        }
    }
}

#[test]
fn discordant_and_concordant_pairs_are_counted_per_task_and_overall() {
    // Task t1, 6 pairs: A succeeds in 0..4, B in 2..6 -> A only 2 (0, 1), B only 2 (4, 5),
    // both 2 (2, 3), neither 0. Task t2, 4 pairs: A succeeds in 0, B in none; pair 3 errored
    // in B, so it is graded in one arm only and counted nowhere.
    let outcomes = |ok: &dyn Fn(u32) -> bool, n: u32| -> Vec<Outcome> {
        (0..n)
            .map(|i| if ok(i) { completed() } else { wrong() })
            .collect()
    };
    let mut a = arm("A", "t1", &outcomes(&|i| i < 4, 6));
    let mut b = arm("B", "t1", &outcomes(&|i| i >= 2, 6));
    a.extend(arm("A", "t2", &outcomes(&|i| i == 0, 4)));
    let mut b2 = arm("B", "t2", &outcomes(&|_| false, 4));
    b2[3].verdict.outcome = errored();
    b.extend(b2);
    let c = cmp(&a, &b, 1);
    let d = |task: &str| {
        c.tasks
            .iter()
            .find(|t| t.task == task)
            .unwrap()
            .comparison
            .discordance
    };
    let t1 = d("t1");
    assert_eq!(
        (t1.a_only, t1.b_only, t1.both, t1.neither, t1.n),
        (2, 2, 2, 0, 6)
    );
    let t2 = d("t2");
    assert_eq!(
        (t2.a_only, t2.b_only, t2.both, t2.neither, t2.n),
        (1, 0, 0, 2, 3)
    );
    let all = c.overall.discordance;
    assert_eq!(
        (all.a_only, all.b_only, all.both, all.neither, all.n),
        (3, 2, 2, 2, 9)
    );
    assert_eq!((all.discordant(), all.concordant()), (5, 4));
    // The success rates hide the t1 swap (4/6 each); the counts do not.
    let t1c = &c.tasks[0].comparison;
    assert_eq!(t1c.a.cell.rates.success, t1c.b.cell.rates.success);
    // In JSON, Markdown and text.
    let json: serde_json::Value = serde_json::from_str(&Json.comparison(&c)).unwrap();
    assert_eq!(
        json["overall"]["discordance"],
        serde_json::json!({"a_only": 3, "b_only": 2, "both": 2, "neither": 2, "n": 9})
    );
    for text in [Terminal.comparison(&c), Markdown.comparison(&c)] {
        assert!(text.contains("A succeeded, B not"), "{text}");
        let overall = text
            .lines()
            .skip_while(|l| !l.contains("A succeeded, B not"))
            .find(|l| l.contains("(all tasks)"))
            .unwrap();
        let cells: Vec<&str> = overall
            .split(['|', ' '])
            .filter(|x| !x.is_empty())
            .collect();
        assert_eq!(
            cells,
            ["(all", "tasks)", "9", "3", "2", "2", "2"],
            "{overall}"
        );
    }
}

#[test]
fn direction_discordant_counts_rise_when_one_arm_wins_more_pairs() {
    let (a, b_low) = two_tasks(2, 2, 5);
    let (_, b_high) = two_tasks(2, 4, 5);
    let low = cmp(&a, &b_low, 1).overall.discordance;
    let high = cmp(&a, &b_high, 1).overall.discordance;
    assert!(high.b_only > low.b_only, "{low:?} -> {high:?}");
    assert_eq!(high.n, low.n);
}

#[test]
fn each_arm_of_a_comparison_reports_median_mean_and_total() {
    let a: Vec<TrialRow> = (0..4)
        .map(|i| with_metrics(row("A", "t", i, completed()), 0, 2))
        .collect();
    let b: Vec<TrialRow> = (0..4)
        .map(|i| {
            with_metrics(
                row("B", "t", i, completed()),
                if i == 0 { 12 } else { 0 },
                2,
            )
        })
        .collect();
    let c = cmp(&a, &b, 1);
    let (sa, sb) = (
        c.overall.a.cell.summaries.wrong_turns,
        c.overall.b.cell.summaries.wrong_turns,
    );
    assert_eq!(sa.median, sb.median);
    assert!(sb.mean > sa.mean && sb.total > sa.total, "{sa:?} -> {sb:?}");
    assert_eq!((sb.mean, sb.total, sb.n), (Some(3.0), Some(12.0), 4));
    let text = Terminal.comparison(&c);
    assert!(text.contains("0 / 3 / 12 (n=4)"), "{text}");
}

/// A small deterministic random number generator (SplitMix64), so the simulations below give
/// the same comparisons on every run.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// True with probability `p`.
    fn chance(&mut self, p: f64) -> bool {
        ((self.next() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
}

/// `n` trials of task `t` for `variant`, each a success with probability `p`.
fn simulated(rng: &mut SplitMix, variant: &str, p: f64, n: usize) -> Vec<TrialRow> {
    let outcomes: Vec<Outcome> = (0..n)
        .map(|_| if rng.chance(p) { completed() } else { wrong() })
        .collect();
    arm(variant, "t", &outcomes)
}

#[test]
fn equal_arms_over_many_seeds_are_rarely_called_different() {
    // 2,000 comparisons of two arms with the same success probability (0.2, 0.5 or 0.8), 30
    // pairs each: a fair coin decides every discordant pair, so the two-sided sign test at 5%
    // calls at most ~5% of them better or worse (fewer: the test is discrete).
    let mut rng = SplitMix(47);
    let (mut called, mut no_clear, total) = (0, 0, 2000);
    for i in 0..total {
        let p = [0.2, 0.5, 0.8][i % 3];
        let a = simulated(&mut rng, "A", p, 30);
        let b = simulated(&mut rng, "B", p, 30);
        let c = cmp(&a, &b, 8);
        match c.overall.verdict {
            ComparisonVerdict::Better | ComparisonVerdict::Worse => {
                called += 1;
                // A direction always has its critical count on one side.
                let s = c.overall.differences.success;
                assert!(s.b_higher.max(s.b_lower) >= s.needs.unwrap(), "{s:?}");
            }
            ComparisonVerdict::NoClearDifference => no_clear += 1,
            _ => {}
        }
    }
    let rate = f64::from(called) / total as f64;
    eprintln!("equal arms called different: {called} of {total}; no clear difference: {no_clear}");
    assert!(
        rate <= 0.06,
        "{called} of {total} equal comparisons called different"
    );
    // The rule is not vacuous: many comparisons differ without being called.
    assert!(
        no_clear > total / 4,
        "{no_clear} no clear difference of {total}"
    );
}

#[test]
fn a_lopsided_arm_is_always_called() {
    // B succeeds with 0.9, A with 0.2, over 30 pairs: called better every time (and worse the
    // other way round), with the counts in the reason.
    let mut rng = SplitMix(2026);
    for _ in 0..500 {
        let a = simulated(&mut rng, "A", 0.2, 30);
        let b = simulated(&mut rng, "B", 0.9, 30);
        let c = cmp(&a, &b, 8);
        assert_eq!(
            c.overall.verdict,
            ComparisonVerdict::Better,
            "{}",
            c.overall.reason
        );
        assert!(c
            .overall
            .reason
            .contains("discordant pairs (B vs A); a direction needs at least"));
        assert_eq!(cmp(&b, &a, 8).overall.verdict, ComparisonVerdict::Worse);
    }
}

/// Two arms of one task whose pairs are, in order: `a_only` where only A succeeded, `b_only`
/// where only B did, `both` where both did and `neither` where neither did.
fn by_pairs(
    a_only: usize,
    b_only: usize,
    both: usize,
    neither: usize,
) -> (Vec<TrialRow>, Vec<TrialRow>) {
    let mut a = Vec::new();
    let mut b = Vec::new();
    for (n, (sa, sb)) in [
        (a_only, (true, false)),
        (b_only, (false, true)),
        (both, (true, true)),
        (neither, (false, false)),
    ] {
        for _ in 0..n {
            a.push(if sa { completed() } else { wrong() });
            b.push(if sb { completed() } else { wrong() });
        }
    }
    (arm("A", "t", &a), arm("B", "t", &b))
}

#[test]
fn a_difference_within_noise_is_no_clear_difference_with_the_counts() {
    // The issue's case: 2 vs 4 discordant pairs (a fair coin does that 69% of the time).
    let (a, b) = by_pairs(4, 2, 3, 3);
    let c = cmp(&a, &b, 8);
    let d = c.overall.discordance;
    assert_eq!((d.a_only, d.b_only), (4, 2));
    assert_eq!(c.overall.verdict, ComparisonVerdict::NoClearDifference);
    assert_eq!(
        c.overall.differences.success.assessment,
        Assessment::NoClearDifference
    );
    assert!(
        c.overall.reason.contains(
            "no clear difference, 2 vs 4 discordant pairs (B vs A); a direction needs at least 6 of 6 on one side"
        ),
        "{}",
        c.overall.reason
    );
    let json: serde_json::Value = serde_json::from_str(&Json.comparison(&c)).unwrap();
    assert_eq!(json["overall"]["verdict"], "no_clear_difference");
    let success = &json["overall"]["differences"]["success"];
    assert_eq!(success["assessment"], "no_clear_difference");
    assert_eq!(
        (&success["b_higher"], &success["b_lower"], &success["needs"]),
        (&2.into(), &4.into(), &6.into())
    );
    for text in [Terminal.comparison(&c), Markdown.comparison(&c)] {
        assert!(text.contains("no clear difference"), "{text}");
        assert!(!text.contains("no_clear_difference"), "{text}");
        assert!(text.contains("2 vs 4 (needs 6)"), "{text}");
    }
    // The issue's other case, 1 vs 2: too few pairs differ, and the reason says which rule.
    let (a, b) = by_pairs(2, 1, 10, 10);
    let c = cmp(&a, &b, 8);
    assert_eq!(c.overall.verdict, ComparisonVerdict::Underpowered);
    assert!(
        c.overall
            .reason
            .contains("1 vs 2 discordant pairs (B vs A): too few pairs differ"),
        "{}",
        c.overall.reason
    );
    // At the boundary: 8 discordant pairs need 8; 9 need 8.
    for (a_only, b_only, expect) in [
        (1, 7, ComparisonVerdict::NoClearDifference),
        (0, 8, ComparisonVerdict::Better),
        (1, 8, ComparisonVerdict::Better),
        (8, 1, ComparisonVerdict::Worse),
        (2, 7, ComparisonVerdict::NoClearDifference),
    ] {
        let (a, b) = by_pairs(a_only, b_only, 4, 4);
        assert_eq!(
            cmp(&a, &b, 8).overall.verdict,
            expect,
            "{a_only} vs {b_only}"
        );
    }
}

#[test]
fn the_sign_test_table_in_docs_is_the_codes() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/metrics.md"),
    )
    .unwrap();
    let start = doc
        .find("<!-- sign-test-table")
        .expect("the table's marker");
    let end = doc
        .find("<!-- /sign-test-table -->")
        .expect("the table's end marker");
    let rows: Vec<(u64, u64, u64)> = doc[start..end]
        .lines()
        .filter(|l| l.starts_with("| ") && l.chars().nth(2).is_some_and(|c| c.is_ascii_digit()))
        .map(|l| {
            let cells: Vec<u64> = l
                .split('|')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(|c| c.parse().unwrap())
                .collect();
            (cells[0], cells[1], cells[2])
        })
        .collect();
    let expected: Vec<(u64, u64, u64)> = (6..=30)
        .map(|n| {
            let k = proctor_report::stats::sign_test_critical(n).unwrap();
            (n, k, n - k)
        })
        .collect();
    assert_eq!(rows, expected);
    // And the figures the text gives beyond the table.
    assert!(doc.contains("N = 50 needs 33, N = 100 needs 61"));
    assert_eq!(proctor_report::stats::sign_test_critical(50), Some(33));
    assert_eq!(proctor_report::stats::sign_test_critical(100), Some(61));
    assert_eq!(proctor_report::stats::sign_test_critical(5), None);
}

#[test]
fn a_pair_is_discordant_only_when_both_were_graded_and_exactly_one_succeeded() {
    // Task t1: A succeeds in 3 of 4, B in 1 of 4 (pairs 0 and 2 on each side: 2 discordant
    // pairs); task t2: one errored trial in B, not graded, never discordant.
    let a = [successes("a", "t1", 3, 4), successes("a", "t2", 1, 1)].concat();
    let mut b = [successes("b", "t1", 1, 4), successes("b", "t2", 0, 1)].concat();
    b[4] = row("b", "t2", 0, errored());
    let c = cmp(&a, &b, 1);
    let discordant: Vec<(&str, u32)> = c
        .pairs
        .iter()
        .filter(|p| p.is_discordant())
        .map(|p| (p.task.as_str(), p.trial_index))
        .collect();
    assert_eq!(discordant, [("t1", 1), ("t1", 2)]);
    assert_eq!(c.overall.discordance.discordant(), 2);
    let errored_pair = c.pairs.iter().find(|p| p.task == "t2").unwrap();
    assert_eq!(errored_pair.b.success, None);
    assert!(!errored_pair.is_discordant());
}

#[test]
fn compare_options_take_the_tasks_of_the_variants_that_name_some() {
    let suite: proctor_suite::model::SuiteFile = toml::from_str(
        r#"
schema_version = 1
id = "s"

[[variants]]
id = "all"
agent = "script"
script = "agents/a"

[[variants]]
id = "narrow"
agent = "script"
script = "agents/a"
tasks = ["t2"]

[[tasks]]
id = "t1"
prompt = "p"
[tasks.success]
all = [{ files_unchanged = true }]

[[tasks]]
id = "t2"
prompt = "p"
[tasks.success]
all = [{ files_unchanged = true }]
"#,
    )
    .unwrap();
    let options = opts(5).with_variant_tasks(&suite);
    assert_eq!(
        options.variant_tasks,
        [("narrow".to_string(), vec!["t2".to_string()])].into()
    );
    assert_eq!(options.underpowered_below, 5, "the rest is kept");
}

#[test]
fn capping_pass_k_lists_k_up_to_the_cap_everywhere_and_says_how_many_are_left_out() {
    let (a, b) = two_tasks(2, 3, 4);
    let full = cmp(&a, &b, 1);
    assert_eq!(full.pass_k_max, 4);
    assert_eq!(full.pass_k_left_out, 0);
    let json = serde_json::to_value(&full).unwrap();
    assert!(
        json.get("pass_k_left_out").is_none(),
        "absent when nothing is left out"
    );

    let mut capped = full.clone();
    capped.cap_pass_k(2);
    assert_eq!(capped.pass_k_left_out, 2);
    let cells = std::iter::once(&capped.overall).chain(capped.tasks.iter().map(|t| &t.comparison));
    for cell in cells {
        for arm in [&cell.a, &cell.b] {
            let ks: Vec<u32> = arm.pass_at_k.iter().map(|p| p.k).collect();
            assert_eq!(ks, [1, 2]);
            let ks: Vec<u32> = arm.pass_pow_k.iter().map(|p| p.k).collect();
            assert_eq!(ks, [1, 2]);
        }
    }
    assert_eq!(capped.overall.a.pass_at_k, full.overall.a.pass_at_k[..2]);
    assert_eq!(
        capped.overall.differences, full.overall.differences,
        "the rest is untouched"
    );
    let json = serde_json::to_value(&capped).unwrap();
    assert_eq!(json["pass_k_left_out"], 2);

    let mut wide = full.clone();
    wide.cap_pass_k(10);
    assert_eq!(wide, full, "a cap above pass_k_max leaves everything");
}

#[test]
fn a_task_only_one_arm_ran_is_left_out_with_why() {
    let a = [
        successes("control", "t1", 1, 2),
        successes("control", "t2", 1, 2),
        successes("control", "t3", 1, 3),
    ]
    .concat();
    let b = [
        successes("narrow", "t1", 1, 2),
        successes("narrow", "t4", 1, 1),
    ]
    .concat();
    let mut options = opts(1);
    options.variant_tasks = [(
        "narrow".to_string(),
        vec!["t1".to_string(), "t4".to_string()],
    )]
    .into();
    let c = compare(&a, &b, &options).unwrap();
    let left: Vec<(&str, Side, u64, &str)> = c
        .left_out
        .iter()
        .map(|l| (l.task.as_str(), l.ran_in, l.trials, l.why.as_str()))
        .collect();
    let narrow = "arm B's variant `narrow` runs only task(s) `t1`, `t4`";
    assert_eq!(
        left,
        [
            ("t2", Side::A, 2, narrow),
            ("t3", Side::A, 3, narrow),
            ("t4", Side::B, 1, "arm A has no finished trial of it"),
        ]
    );
    assert_eq!(c.matched, 2, "only t1 is matched");

    // Where only some of the other arm's variants leave the task out, it is not their `tasks`
    // that explain it.
    let mut b2 = b.clone();
    b2.extend(successes("wide", "t1", 1, 2).into_iter().map(|mut r| {
        r.trial_index += 10;
        r
    }));
    let c = compare(&a, &b2, &options).unwrap();
    let t2 = c.left_out.iter().find(|l| l.task == "t2").unwrap();
    assert_eq!(t2.why, "arm B has no finished trial of it");
}

#[test]
fn a_task_one_arm_never_graded_bounds_no_k_and_has_no_rates_to_compare() {
    // t1: both arms graded 4 times; t2: arm A's two trials errored, arm B's graded.
    let a = [
        successes("control", "t1", 2, 4),
        arm("control", "t2", &[errored(), errored()]),
    ]
    .concat();
    let b = [
        successes("method", "t1", 3, 4),
        successes("method", "t2", 1, 2),
    ]
    .concat();
    let c = cmp(&a, &b, 1);
    assert_eq!(c.pass_k_max, 4, "t2, graded 0 times in A, bounds no k");
    let t2 = &c.tasks.iter().find(|t| t.task == "t2").unwrap().comparison;
    for p in t2.a.pass_at_k.iter().chain(&t2.a.pass_pow_k) {
        assert_eq!((p.value, p.tasks), (None, 0), "k = {}: never 0/0", p.k);
    }
    // Arm B has 2 graded trials of t2: k = 1, 2 are estimated, k = 3, 4 are not.
    let b_tasks: Vec<u64> = t2.b.pass_at_k.iter().map(|p| p.tasks).collect();
    assert_eq!(b_tasks, [1, 1, 0, 0]);
    assert_eq!(t2.b.pass_at_k[3].value, None);
    let (success, failure) = (t2.differences.success, t2.differences.failure);
    assert_eq!(
        (success.a, success.b),
        (None, None),
        "no pair graded in both"
    );
    assert_eq!((failure.a, failure.b), (None, None));
}

fn source(run: &str, hash: &str) -> proctor_report::ArmSource {
    proctor_report::ArmSource {
        run_id: run.into(),
        variant: "v".into(),
        scoring: "original".into(),
        rescored: false,
        ran_suite_hash: hash.into(),
        scored_suite_hash: hash.into(),
    }
}

#[test]
fn provenance_warnings_come_first_and_its_different_rules_replace_the_comparisons() {
    let (a, mut b) = two_tasks(2, 2, 4);
    for r in &mut b {
        r.suite_hash = "other".into();
    }
    let c = cmp(&a, &b, 1);
    let kinds = |c: &Comparison| c.warnings.iter().map(|w| w.kind).collect::<Vec<_>>();
    assert_eq!(kinds(&c), [WarningKind::DifferentRules]);
    let own = c.warnings[0].message.clone();

    // A provenance that names how the rules differ: its warning alone.
    let named = proctor_report::Provenance {
        a: source("r1", "h1"),
        b: source("r2", "other"),
        suite_id: "s".into(),
        runs_left_out: vec![proctor_report::RunsLeftOut {
            variant: "v".into(),
            arms: vec![Side::A],
            runs: vec!["r0".into()],
        }],
        rules_differ: Some(proctor_report::SuiteDifference {
            a: "h1".into(),
            b: "other".into(),
            parts: vec!["checks of task t1".into()],
            unknown: None,
        }),
        ran_differ: None,
    };
    let with = c.clone().with_provenance(named.clone());
    assert_eq!(
        kinds(&with),
        [WarningKind::RunsLeftOut, WarningKind::DifferentRules]
    );
    assert_ne!(
        with.warnings[1].message, own,
        "the provenance's, naming parts"
    );
    assert_eq!(with.provenance, Some(named.clone()));

    // A provenance that does not: the comparison's own stays, after the provenance's.
    let unnamed = proctor_report::Provenance {
        rules_differ: None,
        ..named
    };
    let with = c.with_provenance(unnamed);
    assert_eq!(
        kinds(&with),
        [WarningKind::RunsLeftOut, WarningKind::DifferentRules]
    );
    assert_eq!(with.warnings[1].message, own);
}

#[test]
fn a_pair_whose_value_is_not_a_finite_number_is_left_out_of_the_metrics_difference() {
    let a = successes("control", "t", 2, 4);
    let mut b = successes("method", "t", 2, 4);
    for (i, r) in b.iter_mut().enumerate() {
        r.wall_seconds = if i == 0 { f64::INFINITY } else { 2.0 };
    }
    let a: Vec<TrialRow> = a
        .into_iter()
        .map(|mut r| {
            r.wall_seconds = 1.0;
            r
        })
        .collect();
    let d = cmp(&a, &b, 1).overall.differences.wall_seconds;
    assert_eq!(d.n, 3, "the pair with B's infinite wall time is left out");
    assert_eq!((d.a, d.b), (Some(1.0), Some(2.0)));
}
