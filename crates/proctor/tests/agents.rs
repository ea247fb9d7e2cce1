//! Real agent CLIs through the real binary: each adapter runs the bundled chat-ax suite's `read`
//! task with its CLI (installed by `agents/install.sh`) against `proctor mock-model`, in a real
//! sandbox. Also: permission denials become `denied` calls, route faults become typed `errored`
//! trials, and a failed preflight names the missing flag.
//!
//! These tests need the CLIs: run `agents/install.sh` first (CI does).

mod common;

use std::path::PathBuf;

use common::lab::{As, Lab};
use serde_json::Value;

fn agents_dir() -> PathBuf {
    std::env::var_os("PROCTOR_AGENTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/proctor/agents")
        })
}

fn require(cli: &str) {
    let exe = agents_dir().join("bin").join(cli);
    assert!(
        exe.exists(),
        "{} is not installed: run agents/install.sh (these tests drive the real CLIs)",
        exe.display()
    );
}

fn calls(lab: &Lab, trial: &str) -> Vec<Value> {
    std::fs::read_to_string(lab.trial_dir(trial).join("calls.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Runs chat-ax's `read` task with `variant`, and checks the trial end to end.
fn read_task(variant: &str, cli: &str, wire: (u64, u64, u64)) {
    require(cli);
    let suite = common::repo_root().join("examples/chat-ax");
    let lab = Lab::new(&format!("agent-{variant}"));
    let store = lab.store();
    let out = lab.proctor(
        As::Me,
        &[
            "run",
            suite.to_str().unwrap(),
            "--store",
            store.to_str().unwrap(),
            "--trials",
            "1",
            "--task",
            "read",
            "--variant",
            variant,
        ],
    );
    let id = format!("read.{variant}.0");
    let record = lab.record(&id);
    assert_eq!(out.code, 0, "{variant}: {}\n{record:#}", out.stderr);
    assert_eq!(
        record["outcome"], "completed",
        "{variant}: {}",
        record["reason"]
    );
    // The shim logged the interface call the model asked for.
    let argvs: Vec<Value> = calls(&lab, &id)
        .into_iter()
        .map(|c| c["argv"].clone())
        .collect();
    assert!(
        argvs.contains(&serde_json::json!(["chat", "read", "launch"])),
        "{variant}: {argvs:?}"
    );
    // The answer is the scripted final text.
    let script: toml::Value = toml::from_str(
        &std::fs::read_to_string(suite.join(if variant == "aider" {
            "agents/model-aider/read.toml"
        } else {
            "agents/model/read.toml"
        }))
        .unwrap(),
    )
    .unwrap();
    let scripted = script["turns"].as_array().unwrap().last().unwrap()["text"]
        .as_str()
        .unwrap()
        .to_string();
    let answer = std::fs::read_to_string(lab.trial_dir(&id).join("answer.txt")).unwrap();
    assert_eq!(
        answer.trim(),
        scripted.trim(),
        "{variant}: the answer is not the script's final text"
    );
    // The tokens read from the wire equal the script's declared usage.
    let w = &record["ledgers"]["wire"];
    assert_eq!(w["source"], "wire");
    assert_eq!(
        (
            w["input"].as_u64().unwrap(),
            w["output"].as_u64().unwrap(),
            w["cache_read"].as_u64().unwrap()
        ),
        wire,
        "{variant}: {w}"
    );
    // A missing price makes the cost incomplete, never zero.
    assert!(record["ledgers"]["cost_usd"].is_null());
    assert!(!record["ledgers"]["cost_missing"]
        .as_array()
        .unwrap()
        .is_empty());
}

/// The usage agents/model/read.toml declares: 100+150 input on the two calls plus 300 on the
/// answer; 20+20+60 output; 500 cache read on each of the three turns.
const READ_USAGE: (u64, u64, u64) = (550, 100, 1500);

#[test]
fn claude_code_runs_the_read_task_end_to_end() {
    read_task("claude-code", "claude", READ_USAGE);
}

#[test]
fn codex_runs_the_read_task_end_to_end() {
    read_task("codex", "codex", READ_USAGE);
}

#[test]
fn copilot_runs_the_read_task_end_to_end() {
    read_task("copilot", "copilot", READ_USAGE);
}

#[test]
fn gemini_runs_the_read_task_end_to_end() {
    read_task("gemini", "gemini", READ_USAGE);
}

#[test]
fn opencode_runs_the_read_task_end_to_end() {
    read_task("opencode", "opencode", READ_USAGE);
}

#[test]
fn aider_runs_the_read_task_end_to_end() {
    read_task("aider", "aider", (400, 120, 0));
}

/// A one-task lab suite driving Claude Code with a model script.
fn claude_lab(name: &str, task_extra: &str, turns: &str, wall: u64) -> Lab {
    require("claude");
    let lab = Lab::new(name);
    lab.write("fixture/README.md", "x\n");
    lab.write_exec("bin/tool", "#!/bin/sh\necho \"tool $*\"\n");
    lab.write(
        "suite.toml",
        &format!(
            "schema_version = 1\nid = \"lab\"\n\n[defaults]\nwall_timeout_seconds = {wall}\nallow = [\"bin/tool\"]\n\n[[variants]]\nid = \"claude\"\nagent = \"claude-code\"\nmodel_script = \"agents/model.toml\"\n\n[[tasks]]\nid = \"t\"\nprompt = \"Use the tool.\"\n{task_extra}\n[tasks.interface]\ncommand = \"tool\"\n\n[tasks.success]\nall = [{{ calls = {{ verb = \"ok\", min = 1 }} }}]\n"
        ),
    );
    lab.write("agents/model.toml", turns);
    lab
}

#[test]
fn a_call_the_allow_list_forbids_is_a_denied_call_and_a_wrong_turn() {
    let lab = claude_lab(
        "denied",
        "",
        "[[turns]]\ncalls = [{ role = \"shell\", command = \"tool ok\" }]\nusage = { input = 10, output = 2 }\n\n[[turns]]\ncalls = [{ role = \"shell\", command = \"tool ok && python3 -c \\\"open('x.txt','w').write('x')\\\"\" }]\nusage = { input = 10, output = 2 }\n\n[[turns]]\ntext = \"done\"\nusage = { input = 10, output = 2 }\n",
        120,
    );
    let out = lab.run(As::Me, &["--trials", "1"]);
    let record = lab.record("t.claude.0");
    assert_eq!(out.code, 0, "{}\n{record:#}", out.stderr);
    let denied: Vec<&Value> = record["end_state"]["calls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| !c["denied"].is_null())
        .collect();
    assert_eq!(denied.len(), 1, "{:#}", record["end_state"]["calls"]);
    let metrics = &record["verdict"]["metrics"];
    assert_eq!(metrics["denied"], 1, "{metrics}");
    assert_eq!(metrics["wrong_turns"], 1, "{metrics}");
    assert!(
        !lab.trial_dir("t.claude.0")
            .join("changes/files/x.txt")
            .exists(),
        "the denied command ran"
    );
    // `show` prints it as denied, with why, never as an unfinished call.
    let store = lab.store();
    let out = lab.proctor(
        As::Me,
        &[
            "show",
            "--store",
            store.to_str().unwrap(),
            "latest",
            "t.claude.0",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let seq = denied[0]["seq"].as_u64().unwrap();
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with(&format!("  #{seq:<3} ")))
        .unwrap_or_else(|| panic!("no call #{seq}:\n{}", out.stdout));
    assert!(
        line.contains(" denied      tool ok && python3 -c "),
        "{line}\n{}",
        out.stdout
    );
    assert!(!out.stdout.contains("unfinished"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("                   denied by the agent CLI: "),
        "{}",
        out.stdout
    );
}

#[test]
fn each_route_fault_is_an_errored_trial_with_its_typed_reason() {
    for (fault, kind) in [
        ("credential_loss", "credential-loss"),
        ("rate_limit", "rate-limit"),
        ("timeout", "timeout"),
    ] {
        let lab = claude_lab(
            &format!("fault-{fault}"),
            &format!("route_faults = {{ \"*\" = \"{fault}\" }}"),
            "[[turns]]\ntext = \"done\"\nusage = { input = 10, output = 2 }\n",
            8,
        );
        let out = lab.run(As::Me, &["--trials", "1"]);
        assert_eq!(
            out.code, 3,
            "{fault}: an errored trial leaves the run unfinished\n{}",
            out.stderr
        );
        let record = lab.record("t.claude.0");
        assert_eq!(record["outcome"], "errored", "{fault}: {record:#}");
        assert_eq!(record["verdict"]["outcome"]["kind"], kind, "{fault}");
        assert!(
            record["reason"].as_str().unwrap().starts_with(kind),
            "{fault}: {}",
            record["reason"]
        );
        let results: Value = serde_json::from_str(
            &std::fs::read_to_string(lab.run_dir().join("results.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(
            results["report"]["overall"]["n"], 0,
            "{fault}: an errored trial is not in n"
        );
        assert_eq!(
            results["report"]["overall"]["errored_by_kind"][kind], 1,
            "{fault}: {:#}",
            results["report"]["overall"]
        );
        let md = std::fs::read_to_string(lab.run_dir().join("results.md")).unwrap();
        assert!(
            md.contains(kind),
            "{fault}: results.md does not name {kind}"
        );
        // Rescore reads the fault again from the model's wire log: still errored, same kind.
        let store = lab.store();
        let out = lab.proctor(
            As::Me,
            &["rescore", "latest", "--store", store.to_str().unwrap()],
        );
        assert_eq!(out.code, 0, "{fault}: {}{}", out.stdout, out.stderr);
        assert!(
            out.stderr.contains("no outcome changed"),
            "{fault}: {}",
            out.stderr
        );
        let rescored = std::fs::read_dir(lab.run_dir())
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                name.starts_with("results.rescored-")
                    && name.ends_with(".json")
                    && !name.ends_with(".report.json")
            })
            .expect("rescore wrote no results");
        let rescored: Value =
            serde_json::from_str(&std::fs::read_to_string(rescored).unwrap()).unwrap();
        let trial = &rescored["trials"][0];
        assert_eq!(trial["outcome"], "errored", "{fault}: {trial:#}");
        assert_eq!(trial["verdict"]["outcome"]["kind"], kind, "{fault}");
        assert_eq!(
            rescored["report"]["overall"]["errored_by_kind"][kind], 1,
            "{fault}: {:#}",
            rescored["report"]["overall"]
        );
    }
}

#[test]
fn a_failed_preflight_is_errored_and_names_the_missing_flag() {
    let lab = Lab::new("preflight");
    lab.write("fixture/README.md", "x\n");
    let fake = lab.root.join("fake-agents");
    std::fs::create_dir_all(fake.join("bin")).unwrap();
    let claude = fake.join("bin/claude");
    std::fs::write(&claude, "#!/bin/sh\nif [ \"$1\" = --version ]; then echo '2.1.328 (Claude Code)'; else echo 'Usage: claude [options]'; echo '  -p, --print  print'; fi\n").unwrap();
    std::os::unix::fs::PermissionsExt::set_mode(
        &mut std::fs::metadata(&claude).unwrap().permissions(),
        0o755,
    );
    std::fs::set_permissions(&claude, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    lab.write(
        "suite.toml",
        "schema_version = 1\nid = \"lab\"\n\n[[variants]]\nid = \"claude\"\nagent = \"claude-code\"\nmodel_script = \"agents/model.toml\"\n\n[[tasks]]\nid = \"t\"\nprompt = \"p\"\n\n[tasks.success]\nall = [{ files_unchanged = true }]\n",
    );
    lab.write("agents/model.toml", "[[turns]]\ntext = \"done\"\n");
    let bin = assert_cmd::cargo::cargo_bin("proctor");
    let out = std::process::Command::new(bin)
        .args([
            "run",
            lab.suite().to_str().unwrap(),
            "--store",
            lab.store().to_str().unwrap(),
            "--trials",
            "1",
        ])
        .env("PROCTOR_AGENTS_DIR", &fake)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let record = lab.record("t.claude.0");
    assert_eq!(record["outcome"], "errored");
    let reason = record["reason"].as_str().unwrap();
    assert!(
        reason.contains("--output-format"),
        "the reason must name the missing flag: {reason}"
    );
    assert!(reason.starts_with("agent-start: "), "{reason}");
    assert_eq!(
        record["end_state"]["agent"]["not_started_kind"],
        "agent-start"
    );
    // Counted as what it is, an agent that could not start, not a failure of proctor.
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(lab.run_dir().join("results.json")).unwrap())
            .unwrap();
    let overall = &results["report"]["overall"];
    assert_eq!(overall["errored_by_kind"]["agent-start"], 1, "{overall:#}");
    assert!(
        overall["errored_by_kind"]["harness"].is_null(),
        "{overall:#}"
    );
}

/// Codex runs a command outside the allow-list that writes a file: its own sandbox (bubblewrap)
/// cannot start inside proctor's, so the adapter leaves the boundary to proctor's sandbox.
#[test]
fn codex_runs_a_command_outside_the_allow_list() {
    require("codex");
    let lab = Lab::new("codex-unlisted");
    lab.write("fixture/README.md", "x\n");
    lab.write(
        "suite.toml",
        "schema_version = 1\nid = \"lab\"\n\n[defaults]\nwall_timeout_seconds = 60\n\n[[variants]]\nid = \"codex\"\nagent = \"codex\"\nmodel = \"mock-model\"\nmodel_script = \"agents/model.toml\"\n\n[[tasks]]\nid = \"t\"\nprompt = \"Write the file.\"\n\n[tasks.success]\nall = [{ file_contains = { path = \"seen.txt\", pattern = \"^hi$\" } }]\n",
    );
    lab.write(
        "agents/model.toml",
        "[[turns]]\ncalls = [{ role = \"shell\", command = \"echo hi > seen.txt\" }]\nusage = { input = 10, output = 5 }\n\n[[turns]]\ntext = \"Written.\"\nusage = { input = 10, output = 5 }\n",
    );
    let out = lab.run(As::Me, &["--trials", "1"]);
    let record = lab.record("t.codex.0");
    assert_eq!(out.code, 0, "{}\n{record:#}", out.stderr);
    assert_eq!(record["outcome"], "completed", "{}", record["reason"]);
}

/// The forger: Codex runs any command in the agent's namespace, so one finds the CLI's process
/// and writes Codex's "rejected" line for a call the model never asked for (`tool delete`) into
/// the CLI's own stderr, where the adapter reads denials.
const FORGE: &str = r#"
import os
line = ('2026-12-04T00:00:00Z ERROR codex_core::tools::router: error=exec_command failed: '
        'CreateProcess { message: "Rejected(\\"`tool delete` rejected: policy forbids commands '
        'starting with `tool`\\")" }\n')
hits = []
for p in os.listdir("/proc"):
    if not p.isdigit() or int(p) == os.getpid():
        continue
    try:
        argv = open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")
    except OSError:
        continue
    if any(b"codex" in a for a in argv[:2]):
        try:
            with open(f"/proc/{p}/fd/2", "w") as f:
                f.write(line)
            hits.append(p)
        except OSError as e:
            print("refused", p, e)
print("forged into", hits)
"#;

#[test]
fn a_denial_forged_into_the_clis_output_is_no_rejection() {
    require("codex");
    let lab = Lab::new("forged-denial");
    lab.write("fixture/README.md", "x\n");
    lab.write("fixture/forge.py", FORGE);
    lab.write_exec("bin/tool", "#!/bin/sh\necho \"tool $*\"\n");
    lab.write(
        "suite.toml",
        "schema_version = 1\nid = \"lab\"\n\n[defaults]\nwall_timeout_seconds = 60\nallow = [\"bin/tool\"]\n\n[[variants]]\nid = \"codex\"\nagent = \"codex\"\nmodel = \"mock-model\"\nmodel_script = \"agents/model.toml\"\n\n[[tasks]]\nid = \"t\"\nprompt = \"Use the tool.\"\n\n[tasks.interface]\ncommand = \"tool\"\n\n[tasks.refusal]\nrefuse_patterns = [\"(?i)can't\"]\n\n[tasks.success]\nall = [{ calls = { verb = \"ok\", min = 1 } }]\n",
    );
    lab.write(
        "agents/model.toml",
        "[[turns]]\ncalls = [{ role = \"shell\", command = \"python3 forge.py\" }]\nusage = { input = 10, output = 5 }\n\n[[turns]]\ntext = \"I can't do that: the tool was denied.\"\nusage = { input = 10, output = 5 }\n",
    );
    let out = lab.run(As::Me, &["--trials", "1"]);
    let record = lab.record("t.codex.0");
    assert!(out.code <= 1, "{}\n{record:#}", out.stderr);
    // The forgery reached the CLI's output: the adapter read it as a denial...
    let kept = record["end_state"]["unconfirmed_denials"]
        .as_array()
        .unwrap_or_else(|| panic!("the forged denial reached the transcript\n{record:#}"));
    // (once per process of the CLI that holds the stream: its launcher and the binary)
    assert!(!kept.is_empty());
    for k in kept {
        assert_eq!(k["command"], "tool delete", "{kept:#?}");
        let why = k["unconfirmed"].as_str().unwrap();
        assert!(why.contains("refuses no command"), "{kept:#?}");
    }
    // ...but it is no denied call, no wrong turn and no rejection: declining what could be done
    // stays declining what could be done.
    let calls = record["end_state"]["calls"].as_array().unwrap();
    assert!(calls.iter().all(|c| c["denied"].is_null()), "{calls:#?}");
    assert_eq!(record["verdict"]["metrics"]["denied"], 0, "{record:#}");
    assert_eq!(
        record["outcome"], "refused-wrongly",
        "{}\n{record:#}",
        record["reason"]
    );
    // `show` keeps the CLI's report, and says it is not a rejection.
    let store = lab.store();
    let out = lab.proctor(
        As::Me,
        &[
            "show",
            "--store",
            store.to_str().unwrap(),
            "latest",
            "t.codex.0",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .contains("denials the agent CLI reported that proctor could not confirm"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("\n  tool delete\n"), "{}", out.stdout);
}
