//! Conversations with real agents, through the real binary and a real sandbox, on the mock
//! model: the agent asks which environment to deploy to, the simulated user answers, and the
//! agent goes on with its own session (each CLI by its own resume mechanism, an ACP agent by
//! `session/load`) and deploys. The trial is `completed` with one ask, and the model's request
//! of the second turn holds the first prompt, the question and the reply: the session went on.
//!
//! These tests need the CLIs: run `agents/install.sh` first (CI does).

mod common;

use std::path::PathBuf;

use common::lab::{As, Lab};
use serde_json::Value;

fn require(exe: &str) {
    let dir = std::env::var_os("PROCTOR_AGENTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/proctor/agents")
        });
    let exe = dir.join("bin").join(exe);
    assert!(
        exe.exists(),
        "{} is not installed: run agents/install.sh (these tests drive the real CLIs)",
        exe.display()
    );
}

/// The model's turns: ask, then (on the reply) deploy, then say so.
const MODEL: &str = "[[turns]]\ntext = \"Which environment should I deploy to?\"\nusage = { input = 10, output = 2 }\n\n[[turns]]\ncalls = [{ role = \"shell\", command = \"echo production > env.txt\" }]\nusage = { input = 20, output = 2 }\n\n[[turns]]\ntext = \"Deployed to production.\"\nusage = { input = 30, output = 2 }\n";

/// The same for aider, which offers the model no tools (the command comes as a fenced block).
const MODEL_AIDER: &str = "main_requests = \"all\"\n\n[[turns]]\ntext = \"Which environment should I deploy to?\"\n\n[[turns]]\ntext = \"Deployed to production.\"\ncalls = [{ role = \"shell\", command = \"echo production > env.txt\" }]\n";

/// One deploy task with a user who names the environment, and the variant `id` (its
/// `[[variants]]` body given) on the model script `model`.
fn lab(id: &str, variant: &str, model: &str) -> Lab {
    let lab = Lab::new(&format!("conversation-{id}"));
    lab.write(
        "fixture/README.md",
        "Deploying writes the environment to env.txt.\n",
    );
    lab.write("agents/model.toml", model);
    lab.write(
        "suite.toml",
        &format!(
            r#"schema_version = 1
id = "lab"

[defaults]
wall_timeout_seconds = 180
allow = ["echo"]

[[variants]]
id = "{id}"
model_script = "agents/model.toml"
{variant}

[[tasks]]
id = "t"
prompt = "Deploy the app."

[tasks.refusal]
ask_patterns = ["\\?\\s*$"]

[tasks.user]
max_turns = 3
replies = [{{ when = "(?i)which environment", say = "production" }}]

[tasks.success]
all = [{{ file_contains = {{ path = "env.txt", pattern = "^production$" }} }}]
"#
        ),
    );
    lab
}

/// Runs the one trial and checks the conversation went on in the agent's own session.
fn goes_on(id: &str, variant: &str) {
    let model = if id == "aider" { MODEL_AIDER } else { MODEL };
    let lab = lab(id, variant, model);
    let out = lab.run(As::Me, &["--trials", "1"]);
    let trial = format!("t.{id}.0");
    let r = lab.record(&trial);
    let stdout =
        std::fs::read_to_string(lab.trial_dir(&trial).join("agent.stdout")).unwrap_or_default();
    assert_eq!(out.code, 0, "{}\n{r:#}\n{stdout}", out.stderr);
    assert_eq!(r["outcome"], "completed", "{}\n{stdout}", r["reason"]);
    assert_eq!(r["verdict"]["metrics"]["asks"], 1, "{r:#}");
    let turns = r["end_state"]["conversation"]["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2, "{turns:#?}");
    assert_eq!(turns[0]["answer"], "Which environment should I deploy to?");
    assert_eq!(turns[1]["prompt"], "production");
    assert_eq!(r["end_state"]["answer"], "Deployed to production.");
    // The model's first request of the second turn (its script's turn 2) holds the whole
    // conversation so far.
    let wire =
        std::fs::read_to_string(lab.trial_dir(&trial).join("services/__model/wire.jsonl")).unwrap();
    let second = wire
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["kind"] == "main" && v["turn"] == 2)
        .map(|v| v["request"].to_string())
        .expect("the model served no second turn");
    for text in [
        "Deploy the app.",
        "Which environment should I deploy to?",
        "production",
    ] {
        assert!(
            second.contains(text),
            "the second turn's request lacks {text:?}"
        );
    }
}

#[test]
fn claude_code_goes_on_with_its_session_when_the_user_answers() {
    require("claude");
    goes_on("claude", "agent = \"claude-code\"");
}

#[test]
fn an_acp_agent_goes_on_with_its_session_when_the_user_answers() {
    require("claude-agent-acp");
    goes_on(
        "claude-acp",
        "agent = \"acp\"\ncommand = [\"claude-agent-acp\"]\nenv = { IS_SANDBOX = \"1\", PROCTOR_ACP_MODE = \"acceptEdits\", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = \"1\" }",
    );
}

#[test]
fn codex_goes_on_with_its_session_when_the_user_answers() {
    require("codex");
    goes_on("codex", "agent = \"codex\"\nmodel = \"mock-model\"");
}

#[test]
fn copilot_goes_on_with_its_session_when_the_user_answers() {
    require("copilot");
    goes_on("copilot", "agent = \"copilot\"");
}

#[test]
fn gemini_goes_on_with_its_session_when_the_user_answers() {
    require("gemini");
    goes_on("gemini", "agent = \"gemini\"");
}

#[test]
fn opencode_goes_on_with_its_session_when_the_user_answers() {
    require("opencode");
    goes_on("opencode", "agent = \"opencode\"");
}

#[test]
fn aider_goes_on_with_its_chat_history_when_the_user_answers() {
    require("aider");
    goes_on("aider", "agent = \"aider\"");
}
