//! Renderings of a small fixed run: Markdown and Terminal snapshots, the JSON document's
//! stability and its schema.

mod common;

use common::*;
use proctor_report::{
    aggregate, compare, gate, CompareOptions, Cost, Exporter, Json, Markdown, Terminal, TrialRow,
};
use proctor_score::{InterfaceMetrics, Outcome, RubricScore};
use proctor_suite::model::{Expect, Promotion, ReportConfig};

/// Two variants on two tasks, three trials each: rates, an errored and an ungradeable trial,
/// interface metrics, tokens, a rubric and an incomplete price.
fn fixed_run() -> Vec<TrialRow> {
    let mut rows = Vec::new();
    let spec: [(&str, &str, [Outcome; 3]); 4] = [
        (
            "control",
            "reply",
            [Outcome::Completed, wrong(), Outcome::Asked],
        ),
        (
            "control",
            "decline",
            [Outcome::RefusedHonestly, Outcome::RefusedWrongly, errored()],
        ),
        (
            "method",
            "reply",
            [Outcome::Completed, Outcome::Completed, ungradeable()],
        ),
        (
            "method",
            "decline",
            [
                Outcome::RefusedHonestly,
                Outcome::RefusedHonestly,
                Outcome::Abandoned,
            ],
        ),
    ];
    for (variant, task, outcomes) in spec {
        for (i, o) in outcomes.into_iter().enumerate() {
            let i = i as u32;
            let mut r = row(variant, task, i, o);
            r.trial_id = format!("{}{}{}", &variant[..1], &task[..1], i);
            r.mutation = None;
            if task == "decline" {
                r.expect = Expect::Refuse;
                r.verdict.task_success = r.verdict.outcome == Outcome::RefusedHonestly;
            } else {
                let wt = if variant == "control" {
                    3 + u64::from(i)
                } else {
                    u64::from(i)
                };
                r.verdict.metrics = Some(InterfaceMetrics {
                    calls: 4 + wt,
                    errors: wt,
                    wrong_turns: wt,
                    help_calls: 1,
                    ..InterfaceMetrics::default()
                });
                r.verdict.rubric = Some(RubricScore {
                    criteria: vec![],
                    raw_total: 2 - i.min(2),
                    total: 2 - i.min(2),
                    max: 2,
                    caps: vec![],
                });
            }
            r.wall_seconds = 20.0 + f64::from(i) * 5.0;
            r.agent_cpu_seconds = Some(1.5);
            r.requests = Some(3 + u64::from(i));
            r = with_tokens(r, 1000 + 100 * u64::from(i), 200);
            r.cost = if variant == "method" && i == 2 {
                Cost::Incomplete {
                    missing: vec!["cache_write".into()],
                }
            } else {
                Cost::Known { usd: 0.0125 }
            };
            rows.push(r);
        }
    }
    rows
}

fn of(rows: &[TrialRow], variant: &str) -> Vec<TrialRow> {
    rows.iter()
        .filter(|r| r.variant == variant)
        .cloned()
        .collect()
}

#[test]
fn markdown_run_report() {
    let r = aggregate(&fixed_run()).unwrap();
    insta::assert_snapshot!(Markdown.run_report(&r));
}

#[test]
fn trials_stopped_by_a_limit_are_listed_and_no_list_appears_without_one() {
    let plain = Markdown.run_report(&aggregate(&fixed_run()).unwrap());
    assert!(!plain.contains("Limits reached"), "{plain}");
    let mut rows = fixed_run();
    rows[0].limit_reached = Some(proctor_records::Limit::Tokens);
    let md = Markdown.run_report(&aggregate(&rows).unwrap());
    let section = md
        .split("## Limits reached")
        .nth(1)
        .expect("a Limits reached section");
    let first = section.lines().find(|l| l.starts_with("- ")).unwrap();
    assert!(
        first.contains(&format!("`{}`", rows[0].trial_id)),
        "{first}"
    );
    assert!(first.contains("limit reached: tokens"), "{first}");
    assert_eq!(
        section
            .lines()
            .filter(|l| l.starts_with("- "))
            .take_while(|l| l.contains("limit reached"))
            .count(),
        1,
        "{section}"
    );
}

#[test]
fn terminal_run_report() {
    let r = aggregate(&fixed_run()).unwrap();
    insta::assert_snapshot!(Terminal.run_report(&r));
}

#[test]
fn markdown_comparison() {
    let rows = fixed_run();
    let c = compare(
        &of(&rows, "control"),
        &of(&rows, "method"),
        &CompareOptions::default(),
    )
    .unwrap();
    insta::assert_snapshot!(Markdown.comparison(&c));
}

#[test]
fn terminal_comparison() {
    let rows = fixed_run();
    let c = compare(
        &of(&rows, "control"),
        &of(&rows, "method"),
        &CompareOptions::default(),
    )
    .unwrap();
    insta::assert_snapshot!(Terminal.comparison(&c));
}

fn promotion() -> Promotion {
    toml::from_str(
        "baseline = \"control\"\ncandidate = \"method\"\nprimary_metric = \"success_rate\"\nminimum_absolute_improvement = 0.05\nno_regression = [\"wrong_turns\"]\nrequire_complete_costs = true\n",
    )
    .unwrap()
}

#[test]
fn terminal_and_markdown_gates() {
    let g = gate(&fixed_run(), &promotion(), &ReportConfig::default()).unwrap();
    insta::assert_snapshot!("gates_terminal", Terminal.gates(&g));
    insta::assert_snapshot!("gates_markdown", Markdown.gates(&g));
}

#[test]
fn json_run_report_is_stable() {
    let r = aggregate(&fixed_run()).unwrap();
    let text = Json.run_report(&r);
    assert_finite_json(&text);
    insta::assert_snapshot!(text);
}

#[test]
fn every_rate_in_the_markdown_carries_its_n() {
    let text = Markdown.run_report(&aggregate(&fixed_run()).unwrap());
    // Every percentage is preceded by k/n.
    for (i, _) in text.match_indices("%)") {
        let before = &text[..i];
        let open = before.rfind('(').unwrap();
        let head = before[..open].trim_end();
        let token = head.rsplit(' ').next().unwrap();
        let is_rate = token.contains('/')
            && token
                .split('/')
                .all(|p| p.chars().all(|c| c.is_ascii_digit()));
        let is_rubric =
            head.ends_with(|c: char| c.is_ascii_digit()) && before[open..].contains("of max");
        assert!(
            is_rate || is_rubric || before[open..].contains("n="),
            "a percentage without its n near: {}",
            &text[i.saturating_sub(40)..i + 2]
        );
    }
}

#[test]
fn the_json_schema_describes_the_results_document() {
    let schema = proctor_report::json_schema();
    let props = schema["properties"].as_object().unwrap();
    let doc: serde_json::Value =
        serde_json::from_str(&Json.run_report(&aggregate(&fixed_run()).unwrap())).unwrap();
    let keys: Vec<&String> = doc.as_object().unwrap().keys().collect();
    // Every member but the optional ones (the gates, which only a release run has) is written.
    let required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    let schema_keys: Vec<&String> = props
        .keys()
        .filter(|k| required.contains(&k.as_str()))
        .collect();
    assert_eq!(keys, schema_keys);
    assert!(props.contains_key("gates") && !required.contains(&"gates"));
    let defs = schema["$defs"].as_object().unwrap();
    let rate = &defs["Rate"]["properties"];
    assert!(
        rate.get("k").is_some() && rate.get("n").is_some() && rate.get("rate").is_some(),
        "{rate}"
    );
    assert!(defs.contains_key("Money") && defs.contains_key("Cell"));
    for schema in [
        proctor_report::comparison_json_schema(),
        proctor_report::gate_json_schema(),
    ] {
        assert!(schema["properties"]["schema_version"].is_object());
    }
}
