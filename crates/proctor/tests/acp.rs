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
    // The diagnostic wraps where the lab's path (with its pid) makes it: read it unwrapped.
    let flat = common::unwrapped(&text);
    assert!(
        flat.contains("variant `acp` uses `agent = \"acp\"` but has no `command`"),
        "{text}"
    );
    assert!(
        text.contains("suite.toml:"),
        "the error names where: {text}"
    );
}

fn agents_bin(exe: &str) -> PathBuf {
    let dir = std::env::var_os("PROCTOR_AGENTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/proctor/agents")
        });
    let exe = dir.join("bin").join(exe);
    assert!(
        exe.exists(),
        "{} is not installed: run agents/install.sh (these tests drive the real ACP adapters)",
        exe.display()
    );
    exe
}

/// The model's turns for the real adapters: the allowed call, one that is no plain call of it
/// (so it must be refused), then the answer.
const ALLOWED_THEN_REFUSED: &str = "[[turns]]\ncalls = [{ role = \"shell\", command = \"tool ok\" }]\nusage = { input = 10, output = 2 }\n\n[[turns]]\ncalls = [{ role = \"shell\", command = \"tool ok && python3 -c \\\"open('x.txt','w').write('x')\\\"\" }]\nusage = { input = 10, output = 2 }\n\n[[turns]]\ntext = \"done\"\nusage = { input = 10, output = 2 }\n";

/// A one-task lab suite whose variant `id` is the given `[[variants]]` body, on the model
/// script `turns`.
fn real_acp_lab(id: &str, variant: &str, turns: &str) -> Lab {
    let lab = Lab::new(&format!("acp-{id}"));
    lab.write("fixture/README.md", "x\n");
    lab.write_exec("bin/tool", "#!/bin/sh\necho \"tool $*\"\n");
    lab.write("agents/model.toml", turns);
    lab.write(
        "suite.toml",
        &format!(
            "schema_version = 1\nid = \"lab\"\n\n[defaults]\nwall_timeout_seconds = 120\nallow = [\"bin/tool\"]\n\n[[variants]]\nid = \"{id}\"\nagent = \"acp\"\nmodel_script = \"agents/model.toml\"\n{variant}\n\n[[tasks]]\nid = \"t\"\nprompt = \"Use the tool.\"\n\n[tasks.interface]\ncommand = \"tool\"\n\n[tasks.success]\nall = [{{ calls = {{ verb = \"ok\", min = 1 }} }}]\n"
        ),
    );
    lab
}

/// Runs the lab's one trial and checks it: completed with the scripted answer, the allowed
/// call made through the shim, and `refused` denied calls, each a wrong turn that never ran.
fn completes(lab: &Lab, id: &str, refused: u64) -> Value {
    let out = lab.run(As::Me, &["--trials", "1"]);
    let trial = format!("t.{id}.0");
    let record = lab.record(&trial);
    let stdout =
        std::fs::read_to_string(lab.trial_dir(&trial).join("agent.stdout")).unwrap_or_default();
    assert_eq!(out.code, 0, "{}\n{record:#}\n{stdout}", out.stderr);
    assert_eq!(
        record["outcome"], "completed",
        "{}\n{stdout}",
        record["reason"]
    );
    let answer = std::fs::read_to_string(lab.trial_dir(&trial).join("answer.txt")).unwrap();
    assert_eq!(answer.trim(), "done", "{stdout}");
    let calls = record["end_state"]["calls"].as_array().unwrap();
    assert!(
        calls
            .iter()
            .any(|c| c["argv"] == serde_json::json!(["tool", "ok"]) && c["denied"].is_null()),
        "{calls:#?}\n{stdout}"
    );
    let metrics = &record["verdict"]["metrics"];
    assert_eq!(
        metrics["denied"], refused,
        "{metrics}\n{calls:#?}\n{stdout}"
    );
    assert_eq!(metrics["wrong_turns"], refused, "{metrics}");
    assert!(
        !lab.trial_dir(&trial).join("changes/files/x.txt").exists(),
        "the denied command ran"
    );
    record
}

#[test]
fn claude_codes_acp_adapter_completes_a_task_and_a_refused_permission_is_counted() {
    agents_bin("claude-agent-acp");
    // Claude Code refuses to start as root unless told it is in a sandbox (it is); its default
    // mode ("auto") decides permissions itself, so the variant sets `acceptEdits`, in which
    // every shell command that is no file edit asks the client.
    let lab = real_acp_lab(
        "claude-acp",
        "command = [\"claude-agent-acp\"]\nenv = { IS_SANDBOX = \"1\", PROCTOR_ACP_MODE = \"acceptEdits\", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = \"1\", DISABLE_AUTOUPDATER = \"1\" }",
        ALLOWED_THEN_REFUSED,
    );
    completes(&lab, "claude-acp", 1);
    // Both calls were asked of proctor's client: the plain call granted, the other refused.
    let stdout =
        std::fs::read_to_string(lab.trial_dir("t.claude-acp.0").join("agent.stdout")).unwrap();
    let asked: Vec<(bool, String)> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "permission")
        .map(|v| {
            (
                v["granted"] == true,
                v["command"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(asked.len(), 2, "{stdout}");
    assert_eq!(asked[0], (true, "tool ok".to_string()), "{stdout}");
    assert!(
        !asked[1].0 && asked[1].1.starts_with("tool ok && python3"),
        "{stdout}"
    );
}

/// codex-acp has no mode that both runs a command inside proctor's sandbox and asks the client
/// first: its asking modes run commands in Codex's own sandbox (bubblewrap), which cannot start
/// inside proctor's ("bwrap: setting up uid map: Operation not permitted"), so every command
/// fails. The variant uses `agent-full-access`, where it runs every command without asking (as
/// `agent = "codex"` does): the task completes, and no call can be refused.
#[test]
fn codexs_acp_adapter_completes_a_task() {
    agents_bin("codex-acp");
    // codex-acp reads its provider from CODEX_CONFIG; the endpoint is known only when the trial
    // starts, so it is `{model_base_url}`, filled in at launch.
    let lab = real_acp_lab(
        "codex-acp",
        "command = [\"codex-acp\"]\nenv = { NO_BROWSER = \"1\", MODEL_PROVIDER = \"proctor\", INITIAL_AGENT_MODE = \"agent-full-access\", CODEX_CONFIG = '{\"model\":\"mock-model\",\"model_provider\":\"proctor\",\"model_providers\":{\"proctor\":{\"name\":\"proctor\",\"base_url\":\"{model_base_url}/v1\",\"wire_api\":\"responses\",\"env_key\":\"OPENAI_API_KEY\"}}}' }",
        "[[turns]]\ncalls = [{ role = \"shell\", command = \"tool ok\" }]\nusage = { input = 10, output = 2 }\n\n[[turns]]\ntext = \"done\"\nusage = { input = 10, output = 2 }\n",
    );
    let record = completes(&lab, "codex-acp", 0);
    assert!(
        record["end_state"]["unconfirmed_denials"].is_null()
            || record["end_state"]["unconfirmed_denials"]
                .as_array()
                .is_some_and(|a| a.is_empty())
    );
}

/// A conversation: the first turn asks, the user answers, the second turn acts and answers.
const ASKS_THEN_ACTS: &str = "[[turns]]\ntext = \"Which file should I create?\"\n\n[[turns]]\ncalls = [{ role = \"shell\", command = \"echo hi > hello.txt\" }]\n\n[[turns]]\ntext = \"done\"\n";
/// The user's reply in [`ASKS_THEN_ACTS`].
const REPLY: &str = "Call it hello.txt, please.";

/// Runs one turn's launch (`proctor __acp-client PLAN`) in the conversation's HOME and
/// workspace, with `env` over the launch's; gives what the adapter reads of it.
fn acp_turn(
    adapter: &dyn proctor_agents::Adapter,
    launch: &proctor_agents::Launch,
    dirs: &(PathBuf, PathBuf, PathBuf),
    env: &[(&str, &str)],
) -> proctor_agents::AgentOutput {
    let (home, ws, agent) = dirs;
    for (file, bytes) in &launch.files {
        std::fs::write(agent.join(file), bytes).unwrap();
    }
    let out = std::process::Command::new(&launch.argv[0])
        .args(&launch.argv[1..])
        .current_dir(ws)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("LANG", "C.UTF-8")
        // The variant's environment first, the launch's over it, as a trial's.
        .envs(env.iter().copied())
        .envs(launch.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let read = adapter.read(&out.stdout, &out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    read
}

/// Two turns of an ACP agent on the mock model in one HOME and workspace, the second a new
/// client that loads the session: the first request of the second turn must carry the first
/// prompt, the agent's question and the user's reply, and the second turn acts.
fn acp_asks_then_acts(command: &[&str], env: &[(&str, &str)]) {
    use proctor_agents::{acp::AcpAdapter, Adapter, LaunchContext, NextTurn, SessionContext};
    let tmp = tempfile::tempdir().unwrap();
    let dirs = (
        tmp.path().join("home"),
        tmp.path().join("workspace"),
        tmp.path().join("agent"),
    );
    for d in [&dirs.0, &dirs.1, &dirs.2] {
        std::fs::create_dir_all(d).unwrap();
    }
    let log = tmp.path().join("mock.jsonl");
    let server = proctor_mock_model::MockModel::start_with(
        proctor_mock_model::Script::parse(ASKS_THEN_ACTS).unwrap(),
        "127.0.0.1:0",
        proctor_mock_model::MockOptions {
            log: Some(log.clone()),
            ..Default::default()
        },
    )
    .unwrap();
    let variant_env: std::collections::BTreeMap<String, String> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let adapter = AcpAdapter::new(command.iter().map(|s| s.to_string()).collect(), variant_env);
    let first_prompt = "Create the file the user wants with the text hi, then say done.";
    let mut ctx = LaunchContext {
        prompt: first_prompt.into(),
        workspace: dirs.1.clone(),
        model: None,
        proctor: assert_cmd::cargo::cargo_bin("proctor"),
        agent_dir: dirs.2.clone(),
    };
    let session = SessionContext {
        model_base_url: Some(server.base_url()),
        allow: vec!["echo".into()],
        api_key: None,
        mcp: Vec::new(),
    };
    let launch = adapter.launch_session(&ctx, &session).unwrap();
    let one = acp_turn(&adapter, &launch, &dirs, env);
    assert_eq!(one.answer, "Which file should I create?", "{one:#?}");
    assert!(one.session_id.is_some());
    ctx.prompt = REPLY.into();
    let next = NextTurn {
        turn: 2,
        session_id: one.session_id.clone(),
    };
    let launch = adapter.continue_session(&ctx, &session, &next).unwrap();
    let two = acp_turn(&adapter, &launch, &dirs, env);
    drop(server);
    assert_eq!(two.answer, "done", "{two:#?}");
    assert_eq!(two.session_id, one.session_id);
    assert_eq!(
        std::fs::read_to_string(dirs.1.join("hello.txt"))
            .ok()
            .as_deref(),
        Some("hi\n")
    );
    let second = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["kind"] == "main" && v["turn"] == 2)
        .map(|v| v["request"].to_string())
        .expect("the mock served no second turn");
    for text in [first_prompt, "Which file should I create?", REPLY] {
        assert!(
            second.contains(text),
            "the second turn's request lacks {text:?}"
        );
    }
}

#[test]
fn the_test_agent_goes_on_with_its_session_over_acp() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("agent-plan.json");
    std::fs::write(&plan, r#"{"model": true, "load_session": true}"#).unwrap();
    let agent = test_agent().display().to_string();
    let plan = plan.display().to_string();
    acp_asks_then_acts(&["python3", &agent, &plan], &[]);
}

#[test]
fn claude_codes_acp_adapter_goes_on_with_its_session() {
    agents_bin("claude-agent-acp");
    acp_asks_then_acts(
        &["claude-agent-acp"],
        &[
            ("IS_SANDBOX", "1"),
            ("PROCTOR_ACP_MODE", "acceptEdits"),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ],
    );
}

#[test]
fn codexs_acp_adapter_goes_on_with_its_session() {
    agents_bin("codex-acp");
    acp_asks_then_acts(
        &["codex-acp"],
        &[
            ("NO_BROWSER", "1"),
            ("MODEL_PROVIDER", "proctor"),
            ("INITIAL_AGENT_MODE", "agent-full-access"),
            ("CODEX_CONFIG", "{\"model\":\"mock-model\",\"model_provider\":\"proctor\",\"model_providers\":{\"proctor\":{\"name\":\"proctor\",\"base_url\":\"{model_base_url}/v1\",\"wire_api\":\"responses\",\"env_key\":\"OPENAI_API_KEY\"}}}"),
        ],
    );
}

/// An ACP agent that cannot load a session cannot go on: when the user answers, the adapter
/// says so, and the conversation ends there, on the agent's question.
#[test]
fn an_acp_agent_without_load_session_cannot_go_on() {
    let lab = Lab::new("acp-no-load");
    lab.write("fixture/README.md", "x\n");
    lab.write(
        "agents/acp_agent.py",
        &std::fs::read_to_string(test_agent()).unwrap(),
    );
    lab.write(
        "agents/agent-plan.json",
        r#"{"turns": [{"say": "Which environment should I deploy to?"}, {"commands": ["echo production > env.txt"], "say": "Deployed."}]}"#,
    );
    lab.write(
        "suite.toml",
        "schema_version = 1\nid = \"lab\"\n\n[defaults]\nwall_timeout_seconds = 60\n\n[[variants]]\nid = \"acp\"\nagent = \"acp\"\ncommand = [\"python3\", \"acp_agent.py\", \"agent-plan.json\"]\nfiles = { \"acp_agent.py\" = \"agents/acp_agent.py\", \"agent-plan.json\" = \"agents/agent-plan.json\" }\n\n[[tasks]]\nid = \"t\"\nprompt = \"Deploy the app.\"\n\n[tasks.refusal]\nask_patterns = [\"\\\\?\\\\s*$\"]\n\n[tasks.user]\nmax_turns = 3\nreplies = [{ when = \"(?i)which environment\", say = \"production\" }]\n\n[tasks.success]\nall = [{ file_contains = { path = \"env.txt\", pattern = \"^production$\" } }]\n",
    );
    let out = lab.run(As::Me, &["--trials", "1"]);
    let r = lab.record("t.acp.0");
    assert!(out.code <= 1, "{}\n{r:#}", out.stderr);
    assert_eq!(r["outcome"], "asked", "{r:#}");
    let conversation = &r["end_state"]["conversation"];
    assert_eq!(
        conversation["turns"].as_array().map(Vec::len),
        Some(1),
        "{r:#}"
    );
    let ended = conversation["ended"].as_str().unwrap_or_default();
    assert!(
        ended.contains("does not advertise `loadSession`"),
        "{ended}"
    );
    assert!(!lab
        .trial_dir("t.acp.0")
        .join("changes/files/env.txt")
        .exists());
}
