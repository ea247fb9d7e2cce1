//! `--model` on a suite (one model replaces, several make a matrix) and per-trial `limits`
//! (a task's keys over `[defaults]`, one by one).

use std::path::Path;

use proctor_suite::plan::plan;
use proctor_suite::{PlanOptions, Suite};

const SUITE: &str = r#"schema_version = 1
id = "m"

[defaults]
limits = { tokens = 1000, requests = 5 }

[[variants]]
id = "cc"
agent = "claude-code"
model = "anthropic/claude-a"

[[variants]]
id = "scripted"
agent = "claude-code"
model_script = "agents/model.toml"

[[variants]]
id = "oracle"
agent = "script"
script = "agents/oracle"

[[tasks]]
id = "t"
prompt = "p"
limits = { tokens = 10, cost_usd = 0.25 }
[tasks.success]
all = [{ file_contains = { path = "x", pattern = "x" } }]

[[tasks]]
id = "u"
prompt = "p"
[tasks.success]
all = [{ file_contains = { path = "x", pattern = "x" } }]
"#;

fn suite(dir: &Path) -> Suite {
    std::fs::write(dir.join("suite.toml"), SUITE).unwrap();
    std::fs::create_dir_all(dir.join("fixture")).unwrap();
    Suite::parse(dir).unwrap()
}

fn ids(s: &Suite) -> Vec<(String, Option<String>)> {
    s.file
        .variants
        .iter()
        .map(|v| (v.id.get_ref().clone(), v.model.clone()))
        .collect()
}

#[test]
fn one_model_replaces_the_model_of_every_variant_that_takes_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = suite(dir.path());
    s.apply_models(&["openai/gpt-5".to_string()]);
    assert_eq!(
        ids(&s),
        [
            ("cc".into(), Some("openai/gpt-5".into())),
            ("scripted".into(), None),
            ("oracle".into(), None),
        ],
        "scripted turns and scripted agents keep theirs"
    );
}

#[test]
fn several_models_run_each_such_variant_once_per_model_and_its_name_selects_them_all() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = suite(dir.path());
    s.apply_models(&[
        "anthropic/claude-a".into(),
        "openrouter/meta/llama-4".into(),
    ]);
    assert_eq!(
        ids(&s),
        [
            (
                "cc--anthropic-claude-a".into(),
                Some("anthropic/claude-a".into())
            ),
            (
                "cc--openrouter-meta-llama-4".into(),
                Some("openrouter/meta/llama-4".into())
            ),
            ("scripted".into(), None),
            ("oracle".into(), None),
        ]
    );
    let options = PlanOptions {
        trials: Some(1),
        variants: vec!["cc".into()],
        ..PlanOptions::default()
    };
    let p = plan(&s, &options).unwrap();
    let planned: Vec<&str> = p.trials.iter().map(|t| t.variant.as_str()).collect();
    assert_eq!(
        planned,
        [
            "cc--anthropic-claude-a",
            "cc--openrouter-meta-llama-4",
            "cc--anthropic-claude-a",
            "cc--openrouter-meta-llama-4"
        ],
        "--variant cc selects both arms of its matrix, on both tasks"
    );
}

#[test]
fn a_tasks_limits_override_the_defaults_key_by_key() {
    let dir = tempfile::tempdir().unwrap();
    let s = suite(dir.path());
    let v = s.variant("cc").unwrap();
    let t = s.settings(s.task("t").unwrap(), v).limits;
    assert_eq!(
        (t.tokens, t.cost_usd, t.requests),
        (Some(10), Some(0.25), Some(5))
    );
    let u = s.settings(s.task("u").unwrap(), v).limits;
    assert_eq!(
        (u.tokens, u.cost_usd, u.requests),
        (Some(1000), None, Some(5))
    );
}

#[test]
fn an_unknown_limit_is_refused_by_the_parser() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("suite.toml"),
        SUITE.replace(
            "limits = { tokens = 1000, requests = 5 }",
            "limits = { token = 1000 }",
        ),
    )
    .unwrap();
    let e = Suite::parse(dir.path()).unwrap_err();
    assert!(e.message.contains("unknown field `token`"), "{}", e.message);
}
