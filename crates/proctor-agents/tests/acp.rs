//! proctor's ACP client against a real ACP agent process: the tiny test agent in
//! `tests/fixtures/acp_agent.py` (Python standard library), over real pipes. A task done
//! with an allowed and a refused command; a conversation of two turns, the second loading the
//! session; and an agent that cannot load one. Python 3 is needed (under `CI` its absence fails).

use std::path::{Path, PathBuf};

use proctor_agents::acp::client::{run, ClientError};
use proctor_agents::acp::{transcript, AcpPlan};
use proctor_agents::AgentOutput;
use serde_json::{json, Value};

fn python() -> Option<PathBuf> {
    let found = proctor_agents::cli::find_executable("python3").ok();
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "under CI python3 must be installed for the ACP test agent"
        );
        println!("skipping: python3 is not installed");
    }
    found
}

/// A plan running the test agent with `agent_plan` in `dir`'s workspace.
fn plan(dir: &Path, agent_plan: &Value, prompt: &str, resume: Option<String>) -> Option<AcpPlan> {
    let py = python()?;
    let ws = dir.join("workspace");
    std::fs::create_dir_all(&ws).unwrap();
    let mut agent_plan = agent_plan.clone();
    agent_plan["state"] = json!(dir.join("state"));
    let file = dir.join("agent-plan.json");
    std::fs::write(&file, agent_plan.to_string()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/acp_agent.py");
    Some(AcpPlan {
        command: vec![
            py.display().to_string(),
            script.display().to_string(),
            file.display().to_string(),
        ],
        cwd: ws,
        prompt: prompt.into(),
        allow: vec!["echo".into()],
        resume,
    })
}

/// Runs one turn; gives the transcript's lines and what the adapter reads from them.
fn turn(plan: &AcpPlan) -> Result<(Vec<Value>, AgentOutput), ClientError> {
    let mut out = Vec::new();
    run(plan, &mut out)?;
    let text = String::from_utf8(out).unwrap();
    let lines = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    Ok((lines, transcript::parse(&text, "")))
}

#[test]
fn an_acp_agent_completes_a_task_and_a_call_outside_the_allow_list_is_denied() {
    let dir = tempfile::tempdir().unwrap();
    let agent = json!({ "turns": [{
        "commands": ["echo hi > hello.txt", "python3 -c \"open('denied.txt','w').write('x')\""],
        "say": "done"
    }] });
    let Some(p) = plan(dir.path(), &agent, "Create hello.txt.", None) else {
        return;
    };
    let (lines, out) = turn(&p).unwrap();
    assert_eq!(
        std::fs::read_to_string(p.cwd.join("hello.txt")).unwrap(),
        "hi\n"
    );
    assert!(!p.cwd.join("denied.txt").exists(), "the denied command ran");
    assert_eq!(out.answer, "done");
    assert_eq!(
        out.session_id, None,
        "an agent that cannot load sessions gives none to go on with"
    );
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    assert_eq!(out.tool_calls.len(), 1, "{:?}", out.tool_calls);
    let call = &out.tool_calls[0];
    assert_eq!(call.command.as_deref(), Some("echo hi > hello.txt"));
    assert_eq!((call.ok, call.exit_code), (Some(true), Some(0)));
    assert_eq!(out.denied.len(), 1, "{:?}", out.denied);
    assert!(out.denied[0]
        .command
        .as_deref()
        .is_some_and(|c| c.starts_with("python3")));
    assert!(out.denied[0].reason.contains("not a plain call"));
    // The allowed call was granted once, never for good; the plan and the joined message are
    // in the transcript.
    let granted: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "permission" && l["granted"] == true)
        .collect();
    assert_eq!(granted.len(), 1);
    assert_eq!(granted[0]["option_id"], "allow");
    assert!(lines.iter().any(|l| l["type"] == "plan"));
    assert!(lines
        .iter()
        .any(|l| l["type"] == "agent_message" && l["text"] == "done"));
    assert_eq!(lines.last().unwrap()["type"], "answer");
}

#[test]
fn a_next_turn_loads_the_session_and_prompts_with_the_reply() {
    let dir = tempfile::tempdir().unwrap();
    let agent = json!({ "load_session": true, "turns": [
        { "say": "Which file should I create?" },
        { "commands": ["echo hi > hello.txt"], "say": "Done, as you said: {prompt}" }
    ] });
    let Some(first) = plan(dir.path(), &agent, "Create the file.", None) else {
        return;
    };
    let (_, one) = turn(&first).unwrap();
    assert_eq!(one.answer, "Which file should I create?");
    assert!(!first.cwd.join("hello.txt").exists());
    let second = plan(
        dir.path(),
        &agent,
        "hello.txt, please",
        one.session_id.clone(),
    )
    .unwrap();
    let (lines, two) = turn(&second).unwrap();
    assert_eq!(two.answer, "Done, as you said: hello.txt, please");
    assert_eq!(two.session_id, one.session_id);
    assert!(first.cwd.join("hello.txt").exists());
    // The first turn's two messages were replayed while loading, and not printed again.
    let session = lines.iter().find(|l| l["type"] == "acp.session").unwrap();
    assert_eq!(session["loaded"], true);
    assert_eq!(session["replayed"], 2);
    assert!(!lines
        .iter()
        .any(|l| l["text"] == "Which file should I create?"));
}

#[test]
fn an_agent_that_cannot_load_a_session_cannot_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let agent = json!({ "turns": [{ "say": "Which file?" }] });
    let Some(first) = plan(dir.path(), &agent, "Create the file.", None) else {
        return;
    };
    let (lines, one) = turn(&first).unwrap();
    // The adapter reports no session to go on with (so no next turn is started)...
    assert_eq!(one.session_id, None);
    // ...and a client asked to load the session all the same says why it cannot.
    let id = lines.last().unwrap()["session_id"]
        .as_str()
        .map(String::from);
    assert!(id.is_some());
    let second = plan(dir.path(), &agent, "hello.txt", id).unwrap();
    let e = turn(&second).unwrap_err();
    assert!(matches!(e, ClientError::NoLoadSession), "{e}");
    assert!(e.to_string().contains("loadSession"));
}
