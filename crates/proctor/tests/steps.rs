//! A task in steps, shaped like Harbor's multi-step cookbook task: two steps in one sandbox,
//! each with its prompt, its check (shared and own tests at /tests, a reward in
//! /logs/verifier/reward.txt), a step's files uploaded with a setup.sh that deletes itself, a
//! healthcheck and `min_reward`. The oracle passes every step; an arm whose first step fails
//! stops there; an arm that forges its reward before the check gets none; and the tests are
//! never in the agent's sight (the oracle counts /tests during its turn, and its check fails
//! unless it saw nothing). Through the real binary, as root and as uid 65534.

mod common;

use common::lab::{change_paths, real_isolation, users, Lab};
use serde_json::Value;

fn lab(name: &str) -> Lab {
    let lab = Lab::new(name);
    lab.write("fixture/README.md", "A greeter.\n");
    let variants = common::lab::script_variants(&["oracle", "broken", "forger"]);
    lab.write(
        "suite.toml",
        &format!(
            r#"schema_version = 1
id = "lab"

[defaults]
wall_timeout_seconds = 60
allow = ["cat"]

{variants}[[tasks]]
id = "t"
prompt = "Write greet.sh, then make it greet by name."

[[tasks.steps]]
name = "scaffold"
prompt = "Create an executable greet.sh that prints hello."
min_reward = 1.0

[[tasks.steps]]
name = "implement"
prompt = "Make greet.sh print Hello, NAME! with the name in config.txt."
check_env = {{ EXPECTED_GREETING = "Hello, Harbor!" }}
healthcheck = {{ command = "test -x greet.sh", retries = 2 }}

[tasks.success]
all = [{{ steps = {{ min_reward = 1.0 }} }}]
"#
        ),
    );
    lab.write(
        "steps/t/tests/helpers.sh",
        "pass() { echo 1 > /logs/verifier/reward.txt; exit 0; }\nfail() { echo 0 > /logs/verifier/reward.txt; exit 0; }\n",
    );
    lab.write(
        "steps/t/scaffold/tests/test.sh",
        // The oracle counts what it saw in /tests during its turn: the check fails unless nothing.
        ". /tests/helpers.sh\n[ \"$(cat tests-seen.txt 2>/dev/null || echo 0)\" = 0 ] || fail\n[ -x greet.sh ] || fail\n[ \"$(./greet.sh)\" = hello ] && pass\nfail\n",
    );
    lab.write(
        "steps/t/implement/tests/test.sh",
        ". /tests/helpers.sh\n[ \"$(./greet.sh)\" = \"$EXPECTED_GREETING\" ] || fail\n[ \"$(cat /tests/expected.txt)\" = \"$EXPECTED_GREETING\" ] || fail\necho World > config.txt\n[ \"$(./greet.sh)\" = 'Hello, World!' ] && pass\nfail\n",
    );
    lab.write("steps/t/implement/tests/expected.txt", "Hello, Harbor!\n");
    lab.write("steps/t/implement/workdir/config.txt", "Harbor   \n");
    lab.write(
        "steps/t/implement/workdir/setup.sh",
        "printf '%s\\n' \"$(tr -d '[:space:]' < config.txt)\" > config.txt\nrm -- \"$0\"\n",
    );
    let hello = "printf '#!/bin/sh\\necho hello\\n' > greet.sh && chmod +x greet.sh";
    let by_name =
        "printf '#!/bin/sh\\necho \"Hello, $(cat config.txt)!\"\\n' > greet.sh && chmod +x greet.sh";
    lab.write(
        "agents/oracle/t.toml",
        &format!(
            "[[turns]]\nanswer = \"Scaffolded.\"\n[[turns.steps]]\nrun = '''{hello}'''\n[[turns.steps]]\nrun = 'ls -A /tests | wc -l > tests-seen.txt'\n\n[[turns]]\nanswer = \"Greets by name.\"\n[[turns.steps]]\nrun = '''{by_name}'''\n"
        ),
    );
    lab.write(
        "agents/broken/t.toml",
        "[[turns]]\nanswer = \"Scaffolded.\"\n[[turns.steps]]\nrun = \"printf 'echo bye' > greet.sh\"\n\n[[turns]]\nanswer = \"Never asked.\"\n",
    );
    lab.write(
        "agents/forger/t.toml",
        "[[turns]]\nanswer = \"Scaffolded.\"\n[[turns.steps]]\nrun = 'mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt; echo x > greet.sh'\n",
    );
    lab
}

fn steps(r: &Value) -> &Value {
    &r["end_state"]["steps"]
}

#[test]
fn each_step_is_checked_in_the_trial_and_min_reward_stops_the_rest() {
    for who in users() {
        let lab = lab(&format!("steps-{who:?}"));
        let out = lab.run(who, &["--trials", "1"]);
        let r = lab.record("t.oracle.0");
        if !real_isolation(&r, false) {
            return;
        }
        assert!(out.code <= 1, "{who:?}: {}", out.stderr);

        assert_eq!(r["outcome"], "completed", "{who:?}: {r:#}");
        assert_eq!(
            r["end_state"]["calls"],
            serde_json::json!([]),
            "{who:?}: the checks' own `cat` calls are never the agent's interface calls"
        );
        let s = steps(&r);
        assert_eq!(s["reward"], 1.0, "{who:?}: {s:#}");
        assert_eq!(s["strategy"], "mean");
        assert_eq!(s["steps"][0]["name"], "scaffold");
        assert_eq!(s["steps"][0]["reward_from"], "reward.txt");
        assert_eq!(s["steps"][1]["reward"], 1.0, "{who:?}: {s:#}");
        assert!(s.get("stopped_early").is_none(), "{who:?}: {s:#}");
        let changed = change_paths(&r);
        assert!(
            changed.contains(&"config.txt"),
            "the step's file was laid in: {changed:?}"
        );
        assert!(
            !changed.contains(&"setup.sh"),
            "its setup.sh ran and deleted itself: {changed:?}"
        );
        let seen =
            std::fs::read_to_string(lab.trial_dir("t.oracle.0").join("steps/scaffold/check.txt"));
        assert!(seen.is_ok(), "{who:?}: each step's check output is kept");
        let prompts: Vec<&str> = r["end_state"]["conversation"]["turns"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["prompt"].as_str())
            .collect();
        assert_eq!(
            prompts,
            [
                "Create an executable greet.sh that prints hello.",
                "Make greet.sh print Hello, NAME! with the name in config.txt."
            ],
            "{who:?}"
        );

        let r = lab.record("t.broken.0");
        assert_eq!(r["outcome"], "wrong", "{who:?}: {r:#}");
        let s = steps(&r);
        assert_eq!(s["steps"].as_array().unwrap().len(), 1, "{who:?}: {s:#}");
        assert_eq!(s["steps"][0]["reward"], 0.0);
        assert_eq!(s["reward"], 0.0, "the step not reached counts 0");
        assert!(
            s["stopped_early"]
                .as_str()
                .unwrap_or_default()
                .contains("under its min_reward 1"),
            "{who:?}: {s:#}"
        );

        let r = lab.record("t.forger.0");
        assert_eq!(r["outcome"], "wrong", "{who:?}: {r:#}");
        assert_eq!(
            steps(&r)["steps"][0]["reward"],
            0.0,
            "{who:?}: a reward written before the check is gone when it runs"
        );
    }
}
