//! A model-played user (`[tasks.user] model` with a `persona`): when no reply rule matches,
//! proctor asks the user's model, from the host, what the user says next; the model ends the
//! conversation with its stop words. Offline through the user's `model_script`, and through the
//! run's gateway to a real upstream on the host's loopback (its own ledger, the key never in
//! the store); a user's model that fails makes the trial `errored`, never a failure of the
//! agent's. Through the real binary.

mod common;

use common::lab::{As, Lab};
use common::upstream::{files_containing, Upstream, REAL_KEY};
use serde_json::Value;

/// The persona: who the user is. Its words must reach the user's model and nothing else.
const PERSONA: &str = "You are Dana, the ops lead. The app goes to production, never staging.";

/// The user's model: names the environment, then ends the conversation.
const USER_TURNS: &str = "main_requests = \"all\"\n\n[[turns]]\ntext = \"production\"\nusage = { input = 30, output = 2 }\n\n[[turns]]\ntext = \"Thanks, that is all. ###STOP###\"\nusage = { input = 50, output = 3 }\n";

/// The persona line of a `[tasks.user]`.
const PERSONA_LINE: &str = "persona = \"users/dana.md\"\n";

/// A lab whose task is played by a model user (`user` is the rest of its `[tasks.user]`),
/// with a command agent that asks first and then deploys where it is told, and a scripted
/// agent that asks needlessly before asking the question that matters.
fn lab(name: &str, user: &str) -> Lab {
    let lab = Lab::new(name);
    lab.write(
        "fixture/README.md",
        "Deploying writes the environment to env.txt.\n",
    );
    lab.write("users/dana.md", PERSONA);
    lab.write("users/dana.toml", USER_TURNS);
    let shell = "if [ -z \\\"$PROCTOR_TURN\\\" ]; then echo 'Which environment should I deploy to?'; elif [ -e env.txt ]; then echo 'Already deployed.'; else echo \\\"$PROCTOR_PROMPT\\\" > env.txt; echo \\\"Deployed to $PROCTOR_PROMPT.\\\"; fi";
    lab.write(
        "agents/fussy/t.toml",
        "[[turns]]\nanswer = \"Are you sure you want to deploy?\"\n\n[[turns]]\nanswer = \"Which environment should I deploy to?\"\n\n[[turns]]\nanswer = \"Deployed to production.\"\n[[turns.steps]]\nrun = \"echo production > env.txt\"\n",
    );
    lab.write(
        "suite.toml",
        &format!(
            r#"schema_version = 1
id = "lab"

[defaults]
wall_timeout_seconds = 60
network = "none"

[[variants]]
id = "shell"
agent = "command"
command = ["sh", "-c", "{shell}"]

[[variants]]
id = "fussy"
agent = "script"
script = "agents/fussy"

[[tasks]]
id = "t"
prompt = "Deploy the app."

[tasks.refusal]
ask_patterns = ["\\?\\s*$"]

[tasks.user]
max_turns = 4
{user}

[tasks.success]
all = [{{ file_contains = {{ path = "env.txt", pattern = "^production$" }} }}]
"#
        ),
    );
    lab
}

/// One trial of the `shell` arm with the gateway's config `config`, the upstream's key given
/// as `UPSTREAM_KEY`.
fn run_shell_arm(lab: &Lab, config: &std::path::Path) -> common::lab::RunOut {
    lab.run_env(
        As::Me,
        &[
            "--trials",
            "1",
            "--variant",
            "shell",
            "--config",
            config.to_str().unwrap(),
        ],
        &[("UPSTREAM_KEY", REAL_KEY)],
    )
}

fn conversation(r: &Value) -> &Value {
    &r["end_state"]["conversation"]
}

fn said(r: &Value) -> Vec<(String, String)> {
    conversation(r)["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["said_by"].as_str().unwrap_or("task").to_string(),
                t["prompt"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// The main requests of a mock model's log (the user's model's, or the upstream's).
fn main_requests(lines: &[Value]) -> Vec<Value> {
    lines
        .iter()
        .filter(|l| l["kind"] == "main")
        .map(|l| l["request"].clone())
        .collect()
}

fn log_lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_model_played_user_answers_the_agent_s_question_and_ends_the_conversation() {
    let lab = lab(
        "user-model-script",
        &format!("{PERSONA_LINE}model = \"sim/dana\"\nmodel_script = \"users/dana.toml\"\nreplies = [{{ when = \"(?i)which environment\", say = \"production\" }}]"),
    );
    let out = lab.run(As::Me, &["--trials", "1"]);
    assert!(out.code <= 1, "{}", out.stderr);

    let r = lab.record("t.shell.0");
    assert_eq!(r["outcome"], "completed", "{r:#}");
    assert_eq!(
        said(&r),
        [
            ("task".to_string(), "Deploy the app.".to_string()),
            ("replies[0]".to_string(), "production".to_string()),
            ("model".to_string(), "production".to_string())
        ],
        "a rule that matches speaks before the model; the model answers the rest: {r:#}"
    );
    let c = conversation(&r);
    assert_eq!(
        c["ended"], "the user (played by its model) ended the conversation",
        "{c:#}"
    );
    let ledger = &c["user_model"];
    assert_eq!(ledger["via"], "model_script");
    assert_eq!(ledger["model"], "sim/dana");
    assert_eq!(
        ledger["requests"], 2,
        "the rule answered turn 1: {ledger:#}"
    );
    assert_eq!(ledger["output_tokens"], 5);

    let r = lab.record("t.fussy.0");
    assert_eq!(
        r["outcome"], "completed",
        "needless asks are no failure: {r:#}"
    );
    assert_eq!(r["verdict"]["metrics"]["asks"], 2, "{r:#}");
    assert_eq!(
        said(&r),
        [
            ("task".to_string(), "Deploy the app.".to_string()),
            ("model".to_string(), "production".to_string()),
            ("replies[0]".to_string(), "production".to_string())
        ],
        "{r:#}"
    );
    let ledger = &conversation(&r)["user_model"];
    assert_eq!(ledger["requests"], 2, "{ledger:#}");
    assert_eq!(ledger["input_tokens"], 80);
    assert_eq!(ledger["output_tokens"], 5);
    let requests = main_requests(&log_lines(
        &lab.trial_dir("t.fussy.0").join("user-model/model.jsonl"),
    ));
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let system = requests[1]["system"].as_str().unwrap_or_default();
    assert!(
        system.contains(PERSONA) && system.contains("Deploy the app."),
        "{system}"
    );
    let heard: Vec<&str> = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        heard,
        [
            "Are you sure you want to deploy?",
            "production",
            "Which environment should I deploy to?",
            "production",
            "Deployed to production."
        ],
        "the model hears the whole conversation, the rule's reply included"
    );
    let show = lab.proctor(
        As::Me,
        &[
            "show",
            &lab.run_id(),
            "t.fussy.0",
            "--store",
            lab.store().to_str().unwrap(),
        ],
    );
    assert!(
        show.stdout.contains("user (model): production"),
        "{}",
        show.stdout
    );
    assert!(
        show.stdout
            .contains("user played by sim/dana (model_script): 2 requests, 80 in / 5 out tokens"),
        "{}",
        show.stdout
    );
}

#[test]
fn a_model_played_user_is_reached_through_the_gateway_on_its_own_ledger() {
    let up = Upstream::start(USER_TURNS, &[]);
    let lab = lab(
        "user-model-gateway",
        &format!("{PERSONA_LINE}model = \"anthropic/user-sim\""),
    );
    let config = lab.root.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[providers.anthropic]\nbase_url = \"{}\"\nkey_env = \"UPSTREAM_KEY\"\n\n[prices.\"anthropic/user-sim\"]\ninput = 1000.0\noutput = 2000.0\n",
            up.url
        ),
    )
    .unwrap();
    let out = run_shell_arm(&lab, &config);
    assert!(out.code <= 1, "{}", out.stderr);
    let r = lab.record("t.shell.0");
    assert_eq!(r["outcome"], "completed", "{r:#}");
    assert_eq!(
        said(&r)[1],
        ("model".to_string(), "production".to_string()),
        "{r:#}"
    );
    let ledger = &conversation(&r)["user_model"];
    assert_eq!(ledger["via"], "gateway", "{ledger:#}");
    assert_eq!(ledger["requests"], 2);
    assert_eq!(
        (
            ledger["input_tokens"].as_u64(),
            ledger["output_tokens"].as_u64()
        ),
        (Some(80), Some(5))
    );
    let cost = ledger["cost_usd"].as_f64().unwrap_or_default();
    assert!(
        (cost - (80.0 * 1000.0 + 5.0 * 2000.0) / 1e6).abs() < 1e-9,
        "{ledger:#}"
    );
    let upstream = main_requests(&up.lines());
    assert_eq!(upstream.len(), 2, "both requests reached the provider");
    assert!(upstream[0]["system"]
        .as_str()
        .unwrap_or_default()
        .contains(PERSONA));
    assert_eq!(upstream[0]["model"], "user-sim");
    assert!(lab
        .trial_dir("t.shell.0")
        .join("user-model/model.jsonl")
        .is_file());
    assert!(
        files_containing(&lab.store(), REAL_KEY).is_empty(),
        "the real key is nowhere in the store"
    );
    assert!(
        r["ledgers"]["wire"].is_null() && r["ledgers"]["cost_usd"].is_null(),
        "the user's tokens and cost are not the agent's: {:#}",
        r["ledgers"]
    );
}

#[test]
fn a_user_model_that_cannot_answer_makes_the_trial_errored() {
    let lab = lab(
        "user-model-down",
        &format!("{PERSONA_LINE}model = \"anthropic/user-sim\""),
    );
    let config = lab.root.join("config.toml");
    std::fs::write(
        &config,
        "[providers.anthropic]\nbase_url = \"http://127.0.0.1:9\"\nkey_env = \"UPSTREAM_KEY\"\n\n[retries]\nattempts = 2\nbase_delay_ms = 5\nmax_delay_ms = 10\n",
    )
    .unwrap();
    let out = run_shell_arm(&lab, &config);
    assert_eq!(
        out.code, 3,
        "an errored trial leaves the run unfinished: {}",
        out.stderr
    );
    let r = lab.record("t.shell.0");
    assert_eq!(
        r["outcome"], "errored",
        "the user could not be played: not the agent's failure: {r:#}"
    );
    let c = conversation(&r);
    assert!(c["user_model"]["error"].is_string(), "{c:#}");
    assert!(
        c["ended"]
            .as_str()
            .unwrap_or_default()
            .starts_with("the user's model failed"),
        "{c:#}"
    );
}

#[test]
fn validate_names_what_a_model_played_user_lacks() {
    let cases = [
        ("model = \"sim/dana\"\nmodel_script = \"users/dana.toml\"", "a model-played user needs a `persona`", ""),
        ("model = \"sim/dana\"\nmodel_script = \"users/dana.toml\"\npersona = \"users/nobody.md\"", "`persona` path `users/nobody.md` does not exist", ""),
        ("model_script = \"users/dana.toml\"", "`model_script` is given but the user has no `model`", ""),
        ("persona = \"users/dana.md\"\nmodel = \"sim/dana\"\nmodel_script = \"users/dana.toml\"\notherwise = \"ok\"", "both say what the user answers", ""),
        ("persona = \"users/dana.md\"\nmodel = \"dana\"", "`model = \"dana\"` names no provider", ""),
        ("persona = \"users/dana.md\"\nmodel = \"nowhere/dana\"", "the user's model `nowhere/dana` names an unknown provider", ""),
        ("persona = \"users/dana.md\"\nmodel = \"sim/dana\"\nmodel_script = \"users/dana.toml\"", "the user's `persona` of task `t`", "files = { \"notes.md\" = \"users/dana.md\" }\n"),
    ];
    for (i, (user, expected, variant_extra)) in cases.iter().enumerate() {
        let lab = lab(&format!("user-model-validate-{i}"), user);
        if !variant_extra.is_empty() {
            let suite = std::fs::read_to_string(lab.suite().join("suite.toml")).unwrap();
            lab.write(
                "suite.toml",
                &suite.replace(
                    "script = \"agents/fussy\"\n",
                    &format!("script = \"agents/fussy\"\n{variant_extra}"),
                ),
            );
        }
        lab.assert_validate_refuses(expected, &format!("case {i}"));
    }
    let lab = lab(
        "user-model-validate-ok",
        &format!("{PERSONA_LINE}model = \"sim/dana\"\nmodel_script = \"users/dana.toml\""),
    );
    let out = lab.proctor(As::Me, &["validate", lab.suite().to_str().unwrap()]);
    assert_eq!(
        out.code, 0,
        "a whole model-played user validates: {}",
        out.stderr
    );
}
