//! End to end through the real agent CLIs, against proctor's mock model on 127.0.0.1.
//!
//! Each test runs one installed CLI (see `agents/install.sh`) with its adapter's launch, in a
//! fresh HOME and workspace, with a script that makes the model call the CLI's shell tool to run
//! `echo hi > hello.txt` and then answer "done". It checks the file, the parsed answer, the
//! agent-reported usage against the script's declared usage, and the wire counts. A second test
//! per CLI scripts a command outside the allow-list and checks it is parsed as a denied call.
//! A test whose CLI is not installed prints why and passes without running, except under `CI`
//! (which installs every CLI with `agents/install.sh`), where it fails: a green CI never hides
//! a CLI that did not run.
//!
//! With `PROCTOR_RECORD=1` the CLI's stdout/stderr go to `tests/recordings/` (the parser tests'
//! inputs) and, for the hello case, the requests it sent to `../proctor-mock-model/tests/requests/`
//! (the mock's).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use proctor_agents::{
    aider::Aider, claude_code::ClaudeCode, codex::Codex, copilot::Copilot, gemini::Gemini,
    opencode::Opencode, Adapter, AgentError, AgentOutput, Launch, LaunchContext, NextTurn,
    ReportedUsage, SessionContext,
};
use proctor_mock_model::{MockHandle, MockModel, MockOptions, Script, Stats};

const HELLO: &str = r#"
[[turns]]
calls = [{ role = "shell", command = "echo hi > hello.txt" }]
usage = { input = 120, output = 30, cache_read = 1000, cache_write = 50 }

[[turns]]
text = "done"
usage = { input = 200, output = 5, cache_read = 1100 }
"#;

/// aider sends no tools: one turn carries the command (as a fenced block) and the answer.
const HELLO_AIDER: &str = r#"
main_requests = "all"

[[turns]]
text = "done"
calls = [{ role = "shell", command = "echo hi > hello.txt" }]
usage = { input = 120, output = 30, cache_read = 1000 }
"#;

const DENIED: &str = r#"
[[turns]]
calls = [{ role = "shell", command = "python3 -c \"open('denied.txt','w').write('x')\"" }]
usage = { input = 10, output = 3 }

[[turns]]
text = "I could not run it."
usage = { input = 20, output = 2 }
"#;

/// A conversation: the first turn asks, the user answers, the second turn acts and answers.
const ASKS_THEN_ACTS: &str = r#"
[[turns]]
text = "Which file should I create?"

[[turns]]
calls = [{ role = "shell", command = "echo hi > hello.txt" }]

[[turns]]
text = "done"
"#;

/// The same for aider (no tools: the command comes as a fenced block in the reply).
const ASKS_THEN_ACTS_AIDER: &str = r#"
main_requests = "all"

[[turns]]
text = "Which file should I create?"

[[turns]]
text = "done"
calls = [{ role = "shell", command = "echo hi > hello.txt" }]
"#;

/// The user's reply in [`ASKS_THEN_ACTS`].
const REPLY: &str = "Call it hello.txt, please.";

const TIMEOUT: Duration = Duration::from_secs(240);

struct Run {
    output: AgentOutput,
    stats: Stats,
    workspace: PathBuf,
    status: Option<i32>,
    _dir: tempfile::TempDir,
}

fn record_dir(sub: &str) -> Option<PathBuf> {
    (std::env::var("PROCTOR_RECORD").ok().as_deref() == Some("1"))
        .then(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(sub))
}

/// Skips a test whose CLI this machine lacks, saying why; under `CI` the test fails instead.
fn skip(why: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "under CI every agent CLI must run (agents/install.sh installs them): {why}"
    );
    println!("skipping: {why}");
}

/// Strips what changes from run to run or machine to machine out of a recording.
fn scrub(text: &str, dir: &Path) -> String {
    text.replace(&dir.display().to_string(), "/TMP")
}

fn run(
    adapter: &dyn Adapter,
    name: &str,
    case: &str,
    script: &str,
    allow: &[&str],
    model: Option<&str>,
) -> Option<Run> {
    match adapter.preflight() {
        Ok(info) => eprintln!("{name}: {info:?}"),
        Err(e @ AgentError::NotInstalled { .. }) => {
            skip(&format!("{name}/{case}: {e}"));
            return None;
        }
        Err(e) => panic!("{name}: preflight failed: {e}"),
    }
    // Outside any repository: CLIs read instructions (AGENTS.md, CLAUDE.md) from parent folders
    // up to the repository root, and aider works from that root.
    let dir = tempfile::Builder::new()
        .prefix(&format!("proctor-e2e-{name}-"))
        .tempdir()
        .unwrap();
    let home = dir.path().join("home");
    let ws = dir.path().join("workspace");
    let agent_dir = dir.path().join("agent");
    for d in [&home, &ws, &agent_dir] {
        std::fs::create_dir_all(d).unwrap();
    }
    let log = dir.path().join("mock.jsonl");
    let server = MockModel::start_with(
        Script::parse(script).unwrap(),
        "127.0.0.1:0",
        MockOptions {
            log: Some(log.clone()),
            ..MockOptions::default()
        },
    )
    .unwrap();
    let ctx = LaunchContext {
        prompt: "Create hello.txt with the text hi, then say done.".into(),
        workspace: ws.clone(),
        model: model.map(String::from),
        proctor: PathBuf::from("/nonexistent/proctor"),
        agent_dir: agent_dir.clone(),
    };
    let session = SessionContext {
        model_base_url: Some(server.base_url()),
        allow: allow.iter().map(|s| s.to_string()).collect(),
        api_key: None,
        mcp: Vec::new(),
    };
    let launch = adapter.launch_session(&ctx, &session).unwrap();
    for (file, bytes) in &launch.files {
        std::fs::write(agent_dir.join(file), bytes).unwrap();
    }
    let (status, stdout, stderr) = run_to_exit(&launch, &ws, &home, dir.path(), name, case);
    let stats = server.stats();
    drop(server);
    let output = adapter.read(&stdout, &stderr);
    record(name, case, dir.path(), &stdout, &stderr, &log);
    eprintln!(
        "{name}/{case}: exit {:?}\n--- stderr (head)\n{}\n--- parsed\n{:#?}",
        status.code(),
        String::from_utf8_lossy(&stderr)
            .chars()
            .take(3000)
            .collect::<String>(),
        AgentOutput {
            transcript: Vec::new(),
            ..output.clone()
        }
    );
    Some(Run {
        output,
        stats,
        workspace: ws,
        status: status.code(),
        _dir: dir,
    })
}

/// Runs the launch in `ws` with a clean environment (HOME `home`, TMPDIR `tmp`) until it exits;
/// gives its status, stdout and stderr. Panics after [`TIMEOUT`].
fn run_to_exit(
    launch: &Launch,
    ws: &Path,
    home: &Path,
    tmp: &Path,
    name: &str,
    case: &str,
) -> (ExitStatus, Vec<u8>, Vec<u8>) {
    let mut cmd = Command::new(&launch.argv[0]);
    cmd.args(&launch.argv[1..])
        .current_dir(ws)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("TMPDIR", tmp)
        .env("LANG", "C.UTF-8")
        .env("TERM", "dumb")
        .env("NO_COLOR", "1")
        .envs(launch.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = so.read_to_end(&mut b);
        b
    });
    let t_err = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = se.read_to_end(&mut b);
        b
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            panic!("{name}/{case}: no exit within {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status, t_out.join().unwrap(), t_err.join().unwrap())
}

/// With `PROCTOR_RECORD=1`: writes the CLI's output to `tests/recordings/` and, for the hello
/// case, the requests it sent (from the mock's `log`) to `../proctor-mock-model/tests/requests/`.
fn record(name: &str, case: &str, dir: &Path, stdout: &[u8], stderr: &[u8], log: &Path) {
    if let Some(rec) = record_dir("tests/recordings") {
        std::fs::create_dir_all(&rec).unwrap();
        let so = scrub(&String::from_utf8_lossy(stdout), dir);
        let se = scrub(&String::from_utf8_lossy(stderr), dir);
        std::fs::write(rec.join(format!("{name}-{case}.stdout")), so).unwrap();
        std::fs::write(rec.join(format!("{name}-{case}.stderr")), se).unwrap();
    }
    if let Some(rec) =
        record_dir("../proctor-mock-model/tests/requests").filter(|_| case == "hello")
    {
        std::fs::create_dir_all(&rec).unwrap();
        let mut lines = String::new();
        for line in std::fs::read_to_string(log).unwrap().lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let keep = serde_json::json!({
                "method": v["method"], "path": v["path"], "query": v["query"],
                "kind": v["kind"], "turn": v["turn"], "request": v["request"],
            });
            lines.push_str(&scrub(&keep.to_string(), dir));
            lines.push('\n');
        }
        std::fs::write(rec.join(format!("{name}-{case}.jsonl")), lines).unwrap();
    }
}

fn hello(adapter: &dyn Adapter, name: &str, model: Option<&str>, expect: ReportedUsage) {
    let script = if name == "aider" { HELLO_AIDER } else { HELLO };
    let Some(r) = run(adapter, name, "hello", script, &["echo"], model) else {
        return;
    };
    let declared = Script::parse(script).unwrap();
    assert_eq!(r.status, Some(0), "{name}: exit status");
    let hello = r.workspace.join("hello.txt");
    assert!(hello.exists(), "{name}: hello.txt was not made");
    assert_eq!(std::fs::read_to_string(&hello).unwrap(), "hi\n");
    assert_eq!(r.output.answer, "done", "{name}: answer");
    assert!(
        r.output.errors.is_empty(),
        "{name}: errors {:?}",
        r.output.errors
    );
    assert!(
        r.output.denied.is_empty(),
        "{name}: denied {:?}",
        r.output.denied
    );
    let shell = r.output.tool_calls.iter().find(|c| {
        c.command
            .as_deref()
            .is_some_and(|c| c.contains("echo hi > hello.txt"))
    });
    assert!(
        shell.is_some(),
        "{name}: no shell call in {:?}",
        r.output.tool_calls
    );
    assert_eq!(r.output.usage, Some(expect), "{name}: agent-reported usage");
    assert_eq!(r.stats.usage, declared.total_usage(), "{name}: wire usage");
    assert_eq!(
        r.stats.turns_served as usize,
        declared.turns.len(),
        "{name}: turns"
    );
    assert_eq!(r.stats.exhausted, 0, "{name}: asked past the script");
}

fn denied(adapter: &dyn Adapter, name: &str) {
    let Some(r) = run(adapter, name, "denied", DENIED, &["echo"], None) else {
        return;
    };
    assert!(
        !r.workspace.join("denied.txt").exists(),
        "{name}: the denied command ran"
    );
    assert_eq!(
        r.output.denied.len(),
        1,
        "{name}: denied {:?}",
        r.output.denied
    );
    let d = &r.output.denied[0];
    assert!(
        d.command.as_deref().is_some_and(|c| c.contains("python3")),
        "{name}: {d:?}"
    );
    assert!(!d.reason.is_empty());
    assert_eq!(r.output.answer, "I could not run it.");
}

fn usage(input: u64, output: u64, read: Option<u64>, write: Option<u64>) -> ReportedUsage {
    ReportedUsage {
        input: Some(input),
        output: Some(output),
        cache_read: read,
        cache_write: write,
        requests: None,
    }
}

#[test]
fn claude_code_hello() {
    hello(
        &ClaudeCode::new(),
        "claude-code",
        None,
        usage(320, 35, Some(2100), Some(50)),
    );
}

#[test]
fn claude_code_denied() {
    denied(&ClaudeCode::new(), "claude-code");
}

#[test]
fn codex_hello() {
    // The Responses wire has no cache-write category: the 50 written tokens count as input.
    // A model Codex has no metadata for gets its classic tools (`exec_command`); its default
    // model runs in "code mode", whose shell is reached through a JavaScript `exec` tool.
    hello(
        &Codex::new(),
        "codex",
        Some("mock-model"),
        usage(370, 35, Some(2100), Some(0)),
    );
}

#[test]
fn copilot_hello() {
    hello(
        &Copilot::new(),
        "copilot",
        None,
        ReportedUsage {
            requests: Some(2),
            ..usage(320, 35, Some(2100), Some(50))
        },
    );
}

#[test]
fn copilot_denied() {
    denied(&Copilot::new(), "copilot");
}

#[test]
fn gemini_hello() {
    hello(
        &Gemini::new(),
        "gemini",
        None,
        usage(370, 35, Some(2100), None),
    );
}

#[test]
fn gemini_denied() {
    denied(&Gemini::new(), "gemini");
}

#[test]
fn opencode_hello() {
    hello(
        &Opencode::new(),
        "opencode",
        None,
        ReportedUsage {
            requests: Some(2),
            ..usage(320, 35, Some(2100), Some(50))
        },
    );
}

#[test]
fn opencode_denied() {
    denied(&Opencode::new(), "opencode");
}

#[test]
fn aider_hello() {
    hello(
        &Aider::new(),
        "aider",
        None,
        ReportedUsage {
            requests: Some(1),
            ..usage(1120, 30, None, None)
        },
    );
}

#[test]
fn copilot_uses_the_unpacked_package() {
    let Ok(exe) = proctor_agents::cli::find_executable("copilot") else {
        skip("copilot is not installed");
        return;
    };
    let from_install = proctor_agents::cli::agents_dir().is_some_and(|d| exe.starts_with(d));
    if !from_install {
        skip(&format!(
            "copilot at {} was not installed by agents/install.sh",
            exe.display()
        ));
        return;
    }
    let pkg = proctor_agents::copilot::unpacked_package(&exe);
    assert!(
        pkg.is_some(),
        "agents/install.sh unpacks copilot's package once"
    );
    let ctx = LaunchContext {
        prompt: "p".into(),
        workspace: "/w".into(),
        model: None,
        proctor: "/p".into(),
        agent_dir: "/a".into(),
    };
    let session = SessionContext {
        model_base_url: Some("http://127.0.0.1:9".into()),
        ..SessionContext::default()
    };
    let launch = Copilot::new().launch_session(&ctx, &session).unwrap();
    let script = String::from_utf8(launch.files[0].1.clone()).unwrap();
    assert!(script.contains("$HOME/.cache/copilot/pkg"), "{script}");
}

/// Runs `launch` in the conversation's folders and reads it with `adapter`.
fn turn(
    adapter: &dyn Adapter,
    launch: &Launch,
    dirs: &Dirs,
    name: &str,
    case: &str,
) -> AgentOutput {
    for (file, bytes) in &launch.files {
        std::fs::write(dirs.agent.join(file), bytes).unwrap();
    }
    let (status, stdout, stderr) =
        run_to_exit(launch, &dirs.ws, &dirs.home, &dirs.root, name, case);
    let out = adapter.read(&stdout, &stderr);
    eprintln!(
        "{name}/{case}: exit {:?}\n--- stderr (head)\n{}\n--- answer {:?}, session {:?}, calls {:?}, errors {:?}",
        status.code(),
        String::from_utf8_lossy(&stderr).chars().take(3000).collect::<String>(),
        out.answer,
        out.session_id,
        out.tool_calls.iter().map(|c| c.command.clone()).collect::<Vec<_>>(),
        out.errors,
    );
    assert_eq!(status.code(), Some(0), "{name}/{case}: exit status");
    out
}

/// The folders of one conversation: one HOME, one workspace, one agent folder for every turn.
struct Dirs {
    root: PathBuf,
    home: PathBuf,
    ws: PathBuf,
    agent: PathBuf,
}

/// Two invocations of the CLI in the same HOME and workspace: the first asks, the second is
/// launched by `continue_session` with the user's reply. The first request of the second turn
/// must carry the first prompt, the agent's question and the reply; the second turn acts.
fn asks_then_acts(adapter: &dyn Adapter, name: &str, model: Option<&str>) {
    match adapter.preflight() {
        Ok(info) => eprintln!("{name}: {info:?}"),
        Err(e @ AgentError::NotInstalled { .. }) => {
            skip(&format!("{name}/resume: {e}"));
            return;
        }
        Err(e) => panic!("{name}: preflight failed: {e}"),
    }
    let (tmp, dirs) = conversation_dirs(name);
    let log = tmp.path().join("mock.jsonl");
    let server = asks_then_acts_model(name, &log);
    let first_prompt = "Create the file the user wants with the text hi, then say done.";
    let mut ctx = LaunchContext {
        prompt: first_prompt.into(),
        workspace: dirs.ws.clone(),
        model: model.map(String::from),
        proctor: PathBuf::from("/nonexistent/proctor"),
        agent_dir: dirs.agent.clone(),
    };
    let session = SessionContext {
        model_base_url: Some(server.base_url()),
        allow: vec!["echo".into()],
        api_key: None,
        mcp: Vec::new(),
    };
    let launch = adapter.launch_session(&ctx, &session).unwrap();
    let one = turn(adapter, &launch, &dirs, name, "resume-1");
    assert_first_turn_asks(&one, &dirs, name);
    ctx.prompt = REPLY.into();
    let next = NextTurn {
        turn: 2,
        session_id: one.session_id.clone(),
    };
    let launch = adapter.continue_session(&ctx, &session, &next).unwrap();
    let two = turn(adapter, &launch, &dirs, name, "resume-2");
    let stats = server.stats();
    drop(server);
    assert_second_turn_acts(&one, &two, &dirs, name);
    assert_eq!(stats.exhausted, 0, "{name}: asked past the script");
    assert_second_turn_request_carries_the_conversation(&log, name, first_prompt);
}

/// A fresh temporary folder holding one conversation's HOME, workspace and agent folder.
fn conversation_dirs(name: &str) -> (tempfile::TempDir, Dirs) {
    let tmp = tempfile::Builder::new()
        .prefix(&format!("proctor-e2e-{name}-resume-"))
        .tempdir()
        .unwrap();
    let dirs = Dirs {
        root: tmp.path().to_path_buf(),
        home: tmp.path().join("home"),
        ws: tmp.path().join("workspace"),
        agent: tmp.path().join("agent"),
    };
    for d in [&dirs.home, &dirs.ws, &dirs.agent] {
        std::fs::create_dir_all(d).unwrap();
    }
    (tmp, dirs)
}

/// The mock model playing the asks-then-acts script for agent `name` (aider's own script for
/// aider), logging every exchange to `log`.
fn asks_then_acts_model(name: &str, log: &Path) -> MockHandle {
    let script = if name == "aider" {
        ASKS_THEN_ACTS_AIDER
    } else {
        ASKS_THEN_ACTS
    };
    MockModel::start_with(
        Script::parse(script).unwrap(),
        "127.0.0.1:0",
        MockOptions {
            log: Some(log.to_path_buf()),
            ..MockOptions::default()
        },
    )
    .unwrap()
}

/// The first turn asked its question, reported the session a next turn resumes (every agent
/// but aider) and did not act before the reply.
fn assert_first_turn_asks(one: &AgentOutput, dirs: &Dirs, name: &str) {
    assert_eq!(
        one.answer, "Which file should I create?",
        "{name}: turn 1 answer"
    );
    assert_eq!(
        one.session_id.is_some(),
        name != "aider",
        "{name}: the session id a next turn resumes"
    );
    assert!(
        !dirs.ws.join("hello.txt").exists(),
        "{name}: acted before the reply"
    );
}

/// The second turn made `hello.txt` with its `echo` call, answered `done` without errors, and
/// went on in the first turn's session.
fn assert_second_turn_acts(one: &AgentOutput, two: &AgentOutput, dirs: &Dirs, name: &str) {
    assert_eq!(
        std::fs::read_to_string(dirs.ws.join("hello.txt"))
            .ok()
            .as_deref(),
        Some("hi\n"),
        "{name}: the second turn did not make hello.txt"
    );
    assert_eq!(two.answer, "done", "{name}: turn 2 answer");
    assert!(two.errors.is_empty(), "{name}: errors {:?}", two.errors);
    if one.session_id.is_some() {
        assert_eq!(
            two.session_id, one.session_id,
            "{name}: the same session goes on"
        );
    }
    assert!(
        two.tool_calls.iter().any(|c| c
            .command
            .as_deref()
            .is_some_and(|c| c.contains("echo hi > hello.txt"))),
        "{name}: turn 2's calls {:?}",
        two.tool_calls
    );
}

/// The second turn's first request (in the mock's `log`) carries the first prompt, the agent's
/// question and the user's reply.
fn assert_second_turn_request_carries_the_conversation(log: &Path, name: &str, first_prompt: &str) {
    let second = second_turn_request(log);
    for (what, text) in [
        ("the first prompt", first_prompt),
        ("the agent's question", "Which file should I create?"),
        ("the user's reply", REPLY),
    ] {
        assert!(
            second.contains(text),
            "{name}: the second turn's first request lacks {what}: {}",
            cli_head(&second)
        );
    }
}

/// The body of the request the mock answered with the script's second turn, as JSON text.
fn second_turn_request(log: &Path) -> String {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["kind"] == "main" && v["turn"] == 2)
        .map(|v| v["request"].to_string())
        .expect("the mock served no second turn")
}

fn cli_head(s: &str) -> &str {
    proctor_agents::cli::head_of(s, 4000)
}

#[test]
fn claude_code_resumes_its_session() {
    asks_then_acts(&ClaudeCode::new(), "claude-code", None);
}

#[test]
fn codex_resumes_its_session() {
    asks_then_acts(&Codex::new(), "codex", Some("mock-model"));
}

#[test]
fn copilot_resumes_its_session() {
    asks_then_acts(&Copilot::new(), "copilot", None);
}

#[test]
fn gemini_resumes_its_session() {
    asks_then_acts(&Gemini::new(), "gemini", None);
}

#[test]
fn opencode_resumes_its_session() {
    asks_then_acts(&Opencode::new(), "opencode", None);
}

#[test]
fn aider_resumes_its_chat_history() {
    asks_then_acts(&Aider::new(), "aider", None);
}
