//! `agent = "acp"` through the real binary, in a real sandbox: proctor's ACP client
//! (`proctor __acp-client`) drives an ACP agent. The fast, deterministic agent is the Python
//! test agent of `crates/proctor-agents/tests/fixtures/acp_agent.py`; the ACP adapters of
//! Claude Code and Codex (installed by `agents/install.sh`) run against `proctor mock-model`.

mod common;

use std::path::PathBuf;

use common::lab::{As, Lab};
use serde_json::Value;

fn test_agent() -> PathBuf {
    common::repo_root().join("crates/proctor-agents/tests/fixtures/acp_agent.py")
}

/// A one-task lab suite whose `acp` variant runs the test agent with `agent_plan` on the model
/// script `turns`; the task is done when the interface `tool` was called with `ok`. The agent
/// and its plan reach the workspace as the variant's `files` (the repository is outside what a
/// sandbox sees).
fn acp_lab(name: &str, agent_plan: &str, turns: &str) -> Lab {
    let lab = Lab::new(name);
    lab.write("fixture/README.md", "x\n");
    lab.write_exec("bin/tool", "#!/bin/sh\necho \"tool $*\"\n");
    lab.write(
        "agents/acp_agent.py",
        &std::fs::read_to_string(test_agent()).unwrap(),
    );
    lab.write("agents/agent-plan.json", agent_plan);
    lab.write("agents/model.toml", turns);
    lab.write(
        "suite.toml",
        "schema_version = 1\nid = \"lab\"\n\n[defaults]\nwall_timeout_seconds = 60\nallow = [\"bin/tool\"]\n\n[[variants]]\nid = \"acp\"\nagent = \"acp\"\ncommand = [\"python3\", \"acp_agent.py\", \"agent-plan.json\"]\nmodel_script = \"agents/model.toml\"\nfiles = { \"acp_agent.py\" = \"agents/acp_agent.py\", \"agent-plan.json\" = \"agents/agent-plan.json\" }\n\n[[tasks]]\nid = \"t\"\nprompt = \"Use the tool.\"\n\n[tasks.interface]\ncommand = \"tool\"\n\n[tasks.success]\nall = [{ calls = { verb = \"ok\", min = 1 } }]\n",
    );
    lab
}

#[test]
fn an_acp_agent_completes_a_task_and_a_refused_permission_is_a_denied_call() {
    // The model asks for the allowed call, then for one that is no plain call of it, then answers:
    // the agent asks proctor's client for each, and the wire log confirms the denied one.
    let lab = acp_lab(
        "acp-task",
        r#"{"model": true}"#,
        "[[turns]]\ncalls = [{ role = \"shell\", command = \"tool ok\" }]\n\n[[turns]]\ncalls = [{ role = \"shell\", command = \"tool ok && python3 -c \\\"open('x.txt','w').write('x')\\\"\" }]\n\n[[turns]]\ntext = \"done\"\n",
    );
    let out = lab.run(As::Me, &["--trials", "1"]);
    let record = lab.record("t.acp.0");
    assert_eq!(out.code, 0, "{}\n{record:#}", out.stderr);
    assert_eq!(record["outcome"], "completed", "{}", record["reason"]);
    let answer = std::fs::read_to_string(lab.trial_dir("t.acp.0").join("answer.txt")).unwrap();
    assert_eq!(answer.trim(), "done");
    // The allowed call went through the shim; the refused one is a denied call and a wrong
    // turn, and never ran.
    let calls = record["end_state"]["calls"].as_array().unwrap();
    let argvs: Vec<&Value> = calls.iter().map(|c| &c["argv"]).collect();
    assert!(
        argvs.contains(&&serde_json::json!(["tool", "ok"])),
        "{calls:#?}"
    );
    let denied: Vec<&Value> = calls.iter().filter(|c| !c["denied"].is_null()).collect();
    assert_eq!(denied.len(), 1, "{calls:#?}");
    let metrics = &record["verdict"]["metrics"];
    assert_eq!(metrics["denied"], 1, "{metrics}");
    assert_eq!(metrics["wrong_turns"], 1, "{metrics}");
    assert!(
        !lab.trial_dir("t.acp.0")
            .join("changes/files/x.txt")
            .exists(),
        "the denied command ran"
    );
    // `show` reads the client's transcript with the adapter: the call, and the refusal with why.
    let store = lab.store();
    let out = lab.proctor(
        As::Me,
        &[
            "show",
            "--store",
            store.to_str().unwrap(),
            "latest",
            "t.acp.0",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("transcript (acp: "), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("is not a plain call of an allow-listed command"),
        "{}",
        out.stdout
    );
}

#[test]
fn an_acp_variant_without_a_command_is_refused_by_validate() {
    let lab = Lab::new("acp-no-command");
    lab.write("fixture/README.md", "x\n");
    lab.write(
        "suite.toml",
        "schema_version = 1\nid = \"lab\"\n\n[[variants]]\nid = \"acp\"\nagent = \"acp\"\n\n[[tasks]]\nid = \"t\"\nprompt = \"p\"\n\n[tasks.success]\nall = [{ files_unchanged = true }]\n",
    );
    let suite = lab.suite();
    let out = lab.proctor(As::Me, &["validate", suite.to_str().unwrap()]);
    assert_ne!(out.code, 0, "{}", out.stdout);
    let text = format!("{}{}", out.stdout, out.stderr);
    assert!(text.contains("variant `acp` uses `agent"), "{text}");
    assert!(text.contains("but has no `command`"), "{text}");
    assert!(
        text.contains("suite.toml:"),
        "the error names where: {text}"
    );
}
