//! Builders of trial rows for the report stage's tests.
#![allow(dead_code)]

use proctor_report::{Cost, Mutation, Tokens, TrialRow};
use proctor_score::{ErrorKind, InterfaceMetrics, Outcome, TrialVerdict};
use proctor_suite::model::Expect;

pub fn completed() -> Outcome {
    Outcome::Completed
}
pub fn wrong() -> Outcome {
    Outcome::Wrong { reversed: false }
}
pub fn errored() -> Outcome {
    Outcome::Errored {
        kind: ErrorKind::RateLimit,
    }
}
pub fn ungradeable() -> Outcome {
    Outcome::Ungradeable {
        reason: "the check crashed".into(),
    }
}

/// A trial of `variant` on `task` with index `i` and outcome `o`; success follows the outcome
/// for `expect = complete`.
pub fn row(variant: &str, task: &str, i: u32, o: Outcome) -> TrialRow {
    let task_success = o == Outcome::Completed;
    TrialRow {
        limit_reached: None,
        run_id: "R1".into(),
        trial_id: format!("{variant}-{task}-{i}"),
        task: task.into(),
        variant: variant.into(),
        trial_index: i,
        mutation: None,
        fixture_hash: "fx".into(),
        suite_id: "suite".into(),
        suite_hash: "sh".into(),
        expect: Expect::Complete,
        verdict: TrialVerdict {
            reason: format!("{} by test", o.label()),
            outcome: o,
            task_success,
            success: None,
            rubric: None,
            metrics: None,
            reversed: false,
            answer_reads_as: None,
            integrity: Default::default(),
        },
        wall_seconds: 10.0,
        agent_cpu_seconds: None,
        tokens: None,
        requests: None,
        cost: Cost::NotApplicable,
    }
}

/// Rows of one arm on one task: the outcomes in order, indices 0...
pub fn arm(variant: &str, task: &str, outcomes: &[Outcome]) -> Vec<TrialRow> {
    outcomes
        .iter()
        .enumerate()
        .map(|(i, o)| row(variant, task, i as u32, o.clone()))
        .collect()
}

/// `k` completed then `n - k` wrong.
pub fn successes(variant: &str, task: &str, k: usize, n: usize) -> Vec<TrialRow> {
    let outcomes: Vec<Outcome> = (0..n)
        .map(|i| if i < k { completed() } else { wrong() })
        .collect();
    arm(variant, task, &outcomes)
}

pub fn with_metrics(mut r: TrialRow, wrong_turns: u64, calls: u64) -> TrialRow {
    r.verdict.metrics = Some(InterfaceMetrics {
        calls,
        errors: wrong_turns,
        wrong_turns,
        ..InterfaceMetrics::default()
    });
    r
}

pub fn with_tokens(mut r: TrialRow, input: u64, output: u64) -> TrialRow {
    r.tokens = Some(Tokens {
        input: Some(input),
        output: Some(output),
        cache_read: None,
        cache_write: None,
    });
    r
}

pub fn with_mutation(mut r: TrialRow, name: &str) -> TrialRow {
    r.mutation = Some(Mutation {
        name: name.into(),
        hash: format!("h-{name}"),
    });
    r
}

pub fn with_cost(mut r: TrialRow, cost: Cost) -> TrialRow {
    r.cost = cost;
    r
}

/// Scans a JSON text for non-standard numbers.
pub fn assert_finite_json(text: &str) {
    for bad in ["NaN", "Infinity"] {
        assert!(!text.contains(bad), "JSON holds {bad}:\n{text}");
    }
    let v: serde_json::Value = serde_json::from_str(text).expect("valid JSON");
    fn walk(v: &serde_json::Value) {
        match v {
            serde_json::Value::Number(n) => assert!(n.as_f64().is_some_and(f64::is_finite), "{n}"),
            serde_json::Value::Array(a) => a.iter().for_each(walk),
            serde_json::Value::Object(o) => o.values().for_each(walk),
            _ => {}
        }
    }
    walk(&v);
}
