//! `proctor export RUN --atif DIR | --junit FILE`, `run --junit` and `compare --gate --junit`
//! through the real binary (docs/export.md): every trajectory is validated against Harbor's own
//! ATIF models (`harbor.models.trajectories` from the harbor 0.26.0 wheel, which `.ci/run`
//! unzips into `target/harbor-0.26.0`, or `$PROCTOR_HARBOR_MODELS`), and every JUnit file is
//! read back by `junitparser` (PyPI) and by a second consumer, quick-xml's reader, whose counts
//! must equal the trials' outcomes. A real Claude Code trial on scripted turns exports a
//! trajectory whose tool calls, observations and token totals equal its wire ledger.
//!
//! Under `CI=true` a missing Python package or agent CLI fails the test; elsewhere the test
//! says so loudly and returns.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::lab::{As, Lab};
use common::outcomes::{script, write_eight_outcomes, Extra};
use serde_json::Value;

const VALIDATE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/export/validate_atif.py");

/// Fails under CI, else says the test's real part cannot run here.
fn missing(what: &str) -> bool {
    common::skip(&format!("{what} (.ci/run installs it)"));
    true
}

/// The folder holding `harbor/models/trajectories`, when it is there.
fn harbor() -> Option<PathBuf> {
    let dir = std::env::var_os("PROCTOR_HARBOR_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| common::repo_root().join("target/harbor-0.26.0"));
    dir.join("harbor/models/trajectories/trajectory.py")
        .is_file()
        .then_some(dir)
}

fn python_has(module: &str) -> bool {
    Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether the Python side is here: Harbor's models, pydantic and junitparser.
fn python_ready() -> Option<PathBuf> {
    let Some(dir) = harbor() else {
        missing("Harbor's ATIF models (target/harbor-0.26.0) are not unzipped");
        return None;
    };
    for m in ["pydantic", "junitparser"] {
        if !python_has(m) {
            missing(&format!("the Python package `{m}` is not installed"));
            return None;
        }
    }
    Some(dir)
}

/// Validates every `*.json` of `dir` with Harbor's `Trajectory.model_validate_json`; returns the
/// validator's summary of each file, by trial id.
fn validate_atif(harbor: &Path, dir: &Path) -> BTreeMap<String, Value> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no trajectory in {}", dir.display());
    let out = Command::new("python3")
        .arg(VALIDATE)
        .arg(harbor)
        .args(&files)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "Harbor's models refused a trajectory:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = stdout
        .lines()
        .find_map(|l| l.strip_prefix("SUMMARY "))
        .expect("a summary line");
    let v: BTreeMap<String, Value> = serde_json::from_str(summary).unwrap();
    v.into_iter()
        .map(|(path, s)| {
            let id = Path::new(&path)
                .file_stem()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (id, s)
        })
        .collect()
}

/// What junitparser reads of a JUnit file: per test case its suite, result kind, type and
/// message; and the totals.
fn junitparser(file: &Path) -> Value {
    let script = r#"
import json, sys
from junitparser import JUnitXml, Failure, Error, Skipped
xml = JUnitXml.fromfile(sys.argv[1])
cases = {}
suites = {}
for suite in xml:
    props = {p.name: p.value for p in suite.properties()}
    suites[suite.name] = {"tests": suite.tests, "failures": suite.failures, "errors": suite.errors,
                          "skipped": suite.skipped, "properties": props}
    for case in suite:
        kind, typ, msg = "passed", None, None
        for r in case.result:
            if isinstance(r, Failure): kind = "failure"
            elif isinstance(r, Error): kind = "error"
            elif isinstance(r, Skipped): kind = "skipped"
            typ, msg = r.type, r.message
        cases[case.name] = {"suite": suite.name, "kind": kind, "type": typ, "message": msg,
                            "classname": case.classname, "time": case.time}
print(json.dumps({"cases": cases, "suites": suites}))
"#;
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "junitparser cannot read {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The second consumer: quick-xml's reader, counting test cases and their results (and
/// checking the document is well formed to its end).
fn xml_counts(file: &Path) -> BTreeMap<String, u64> {
    use quick_xml::events::Event;
    let text = std::fs::read_to_string(file).unwrap();
    let mut reader = quick_xml::Reader::from_str(&text);
    let mut counts = BTreeMap::new();
    let mut depth = 0i64;
    loop {
        match reader.read_event().unwrap() {
            Event::Start(e) => {
                depth += 1;
                let name = e.name().0.to_string();
                *counts.entry(name).or_insert(0) += 1;
            }
            Event::Empty(e) => {
                let name = e.name().0.to_string();
                *counts.entry(name).or_insert(0) += 1;
            }
            Event::End(_) => depth -= 1,
            Event::Text(t) => {
                // No character XML 1.0 cannot carry.
                let text = t.xml10_content();
                assert!(
                    !text
                        .chars()
                        .any(|c| c < ' ' && !matches!(c, '\t' | '\n' | '\r')),
                    "{text:?}"
                );
            }
            Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(depth, 0, "unbalanced document");
    counts
}

/// A suite with each of the eight outcomes once, a task whose correct behaviour is to ask,
/// and a hostile trial: its answer and a file name it makes hold `]]>`, `<`, `&`, ESC (and the
/// answer NUL), and the reason quotes the file name.
fn eight_outcomes(lab: &Lab) {
    let extra = [
        Extra {
            id: "asked-wrongly",
            table: "",
            success: "{ file_added = \"out.txt\" }",
            script: script("Should I create out.txt?", 0, &[]),
        },
        Extra {
            id: "hostile",
            table: "",
            success: "{ files_unchanged = true }",
            script: script(
                "Done ]]> <b>&amp; \\u001b[31mred\\u001b[0m and a NUL \\u0000 here.",
                0,
                &["touch \"$(printf 'x]]><&\\033[1mname')\" && printf ']]><&\\033\\000!'"],
            ),
        },
    ];
    write_eight_outcomes(lab, &extra);
}

/// Each trial's outcome and task success, from its trial.json.
fn outcomes(lab: &Lab) -> BTreeMap<String, (String, bool)> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(lab.run_dir().join("trials")).unwrap() {
        let id = e.unwrap().file_name().to_string_lossy().into_owned();
        let r = lab.record(&id);
        let success = r["verdict"]["task_success"].as_bool().unwrap_or(false);
        out.insert(id, (r["outcome"].as_str().unwrap().to_string(), success));
    }
    out
}

fn expected_kind(outcome: &str, success: bool) -> &'static str {
    match outcome {
        "errored" => "error",
        "ungradeable" => "skipped",
        _ if success => "passed",
        _ => "failure",
    }
}

#[test]
fn every_outcome_maps_to_junit_and_every_trial_to_a_valid_atif_trajectory() {
    let lab = Lab::new("export-outcomes");
    eight_outcomes(&lab);
    let (got, run_xml) = run_every_outcome_with_junit(&lab);
    let store = lab.store();
    let atif = lab.root.join("atif");
    let junit = lab.root.join("export.xml");
    let out = lab.proctor(
        As::Me,
        &[
            "export",
            "latest",
            "--store",
            store.to_str().unwrap(),
            "--atif",
            atif.to_str().unwrap(),
            "--junit",
            junit.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    // run --junit and export --junit write the same report.
    assert_eq!(
        std::fs::read_to_string(&run_xml).unwrap(),
        std::fs::read_to_string(&junit).unwrap()
    );

    assert_junit_counts_are_the_outcomes(&junit, &got);

    let Some(harbor) = python_ready() else {
        return;
    };
    assert_junitparser_reads_each_case(&junit, &got);
    assert_every_trajectory_valid(&harbor, &atif, &got);
    assert_trajectories_keep_steps_answers_and_kinds(&atif);
}

/// One trial of each outcome, run with `--junit`: every outcome is there; gives the outcomes
/// by trial and the JUnit file.
fn run_every_outcome_with_junit(lab: &Lab) -> (BTreeMap<String, (String, bool)>, PathBuf) {
    let run_xml = lab.root.join("run.xml");
    let out = lab.run(
        As::Me,
        &["--trials", "1", "--junit", run_xml.to_str().unwrap()],
    );
    assert_eq!(
        out.code, 3,
        "errored and ungradeable trials: {}",
        out.stderr
    );
    assert!(
        run_xml.is_file(),
        "run --junit wrote nothing: {}",
        out.stderr
    );
    let got = outcomes(lab);
    let labels: Vec<&str> = got.values().map(|(o, _)| o.as_str()).collect();
    for o in [
        "completed",
        "wrong",
        "refused-honestly",
        "refused-wrongly",
        "asked",
        "abandoned",
        "errored",
        "ungradeable",
    ] {
        assert!(labels.contains(&o), "no {o} trial: {got:?}");
    }
    assert_eq!(got["asked-wrongly.agent.0"].0, "asked");
    assert_eq!(got["hostile.agent.0"].0, "wrong");

    (got, run_xml)
}

/// The second consumer: counts of elements of `junit` equal the outcomes (`got`).
fn assert_junit_counts_are_the_outcomes(junit: &Path, got: &BTreeMap<String, (String, bool)>) {
    let counts = xml_counts(junit);
    let want = |kind: &str| {
        got.values()
            .filter(|(o, s)| expected_kind(o, *s) == kind)
            .count() as u64
    };
    assert_eq!(counts["testcase"], got.len() as u64, "{counts:?}");
    assert_eq!(counts.get("failure").copied().unwrap_or(0), want("failure"));
    assert_eq!(counts.get("error").copied().unwrap_or(0), want("error"));
    assert_eq!(counts.get("skipped").copied().unwrap_or(0), want("skipped"));
    assert_eq!(counts["testsuite"], 10, "a suite per task");
    assert_eq!(
        want("failure"),
        5,
        "wrong, refused-wrongly, abandoned, hostile, asked-wrongly"
    );
}

/// junitparser: every case where its outcome says; the suites' properties; the hostile reason
/// survives, its ESC written visibly.
fn assert_junitparser_reads_each_case(junit: &Path, got: &BTreeMap<String, (String, bool)>) {
    let j = junitparser(junit);
    for (id, (outcome, success)) in got {
        let case = &j["cases"][id];
        assert_eq!(
            case["kind"],
            expected_kind(outcome, *success),
            "{id} ({outcome}): {case}"
        );
        let (task, rest) = id.split_once('.').unwrap();
        assert_eq!(case["suite"], task);
        assert_eq!(
            case["classname"],
            format!("{task}.{}", rest.split('.').next().unwrap())
        );
        match case["kind"].as_str().unwrap() {
            "failure" => assert_eq!(case["type"], outcome.as_str()),
            "error" => assert_eq!(case["type"], "errored:harness"),
            _ => {}
        }
    }
    let s = &j["suites"]["errored"];
    assert_eq!(s["errors"], 1);
    assert_eq!(s["properties"]["agent.trials"], "1");
    assert_eq!(
        s["properties"]["agent.n"], "0",
        "errored is not in graded n"
    );
    assert_eq!(j["suites"]["completed"]["properties"]["agent.n"], "1");
    assert_eq!(j["suites"]["asked"]["properties"]["expect"], "ask");
    // The hostile reason survives, its ESC written visibly.
    let hostile = j["cases"]["hostile.agent.0"]["message"].as_str().unwrap();
    assert!(hostile.contains("x]]><&\\u{1b}[1mname"), "{hostile}");
}

/// Every trial exported, every trajectory valid for Harbor's models, each with its outcome,
/// success, prompt and step count.
fn assert_every_trajectory_valid(
    harbor: &Path,
    atif: &Path,
    got: &BTreeMap<String, (String, bool)>,
) {
    let summaries = validate_atif(harbor, atif);
    assert_eq!(
        summaries.keys().collect::<Vec<_>>(),
        got.keys().collect::<Vec<_>>()
    );
    for (id, (outcome, success)) in got {
        let t: Value = serde_json::from_str(
            &std::fs::read_to_string(atif.join(format!("{id}.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(t["schema_version"], "ATIF-v1.8");
        assert_eq!(t["extra"]["outcome"], outcome.as_str(), "{id}");
        assert_eq!(t["extra"]["task_success"], *success, "{id}");
        assert_eq!(t["steps"][0]["source"], "user");
        // A trial the harness failed before launching received no prompt.
        let prompt = if outcome == "errored" {
            String::new()
        } else {
            format!("Do {}.", id.split('.').next().unwrap())
        };
        assert_eq!(t["steps"][0]["message"], prompt, "{id}");
        assert_eq!(
            t["final_metrics"]["total_steps"].as_u64(),
            Some(t["steps"].as_array().unwrap().len() as u64)
        );
    }
}

/// A scripted step is a step (the command, its output and exit, no model); the hostile answer
/// is kept exactly, NUL and ESC included; the errored trial's kind is in extra.
fn assert_trajectories_keep_steps_answers_and_kinds(atif: &Path) {
    let t: Value = serde_json::from_str(
        &std::fs::read_to_string(atif.join("completed.agent.0.json")).unwrap(),
    )
    .unwrap();
    let step = &t["steps"][1];
    assert_eq!(step["llm_call_count"], 0);
    assert_eq!(
        step["tool_calls"][0]["arguments"]["command"],
        "echo hi > out.txt"
    );
    assert_eq!(step["observation"]["results"][0]["extra"]["exit"], 0);
    assert_eq!(t["steps"][2]["message"], "Created out.txt.");
    // The hostile answer is kept exactly, NUL and ESC included.
    let t: Value =
        serde_json::from_str(&std::fs::read_to_string(atif.join("hostile.agent.0.json")).unwrap())
            .unwrap();
    assert_eq!(
        t["extra"]["answer"],
        "Done ]]> <b>&amp; \u{1b}[31mred\u{1b}[0m and a NUL \u{0} here."
    );
    assert_eq!(
        t["steps"][1]["observation"]["results"][0]["content"],
        "]]><&\u{1b}\u{0}!"
    );
    // The errored trial's kind is in extra.
    let t: Value =
        serde_json::from_str(&std::fs::read_to_string(atif.join("errored.agent.0.json")).unwrap())
            .unwrap();
    assert_eq!(t["extra"]["error_kind"], "harness");
}

#[test]
fn interface_calls_join_the_scripted_steps_that_made_them() {
    let lab = Lab::new("export-calls");
    lab.write_exec("bin/kv", "#!/bin/sh\necho \"kv $*\"\n");
    lab.one_task(
        "allow = [\"bin/kv\"]",
        "{ files_unchanged = true }",
        &[
            "kv get a",
            "echo no interface here",
            "kv put a 1 && kv get a",
        ],
        false,
    );
    let out = lab.run(As::Me, &[]);
    assert!(out.code == 0 || out.code == 1, "{}", out.stderr);
    let atif = lab.root.join("atif");
    let store = lab.store();
    let out = lab.proctor(
        As::Me,
        &[
            "export",
            lab.run_id().as_str(),
            "--store",
            store.to_str().unwrap(),
            "--atif",
            atif.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let t: Value =
        serde_json::from_str(&std::fs::read_to_string(atif.join("t.agent.0.json")).unwrap())
            .unwrap();
    let seqs = |step: usize| -> Vec<u64> {
        t["steps"][step]["observation"]["results"][0]["extra"]["interface_calls"]
            .as_array()
            .map(|a| a.iter().map(|c| c["seq"].as_u64().unwrap()).collect())
            .unwrap_or_default()
    };
    assert_eq!(seqs(1), vec![1], "{t:#}");
    assert_eq!(seqs(2), Vec::<u64>::new());
    assert_eq!(seqs(3), vec![2, 3]);
    if let Some(harbor) = python_ready() {
        validate_atif(&harbor, &atif);
    }
}

#[test]
fn export_needs_a_format_and_compare_junit_needs_gate() {
    let lab = Lab::new("export-usage");
    let store = lab.store();
    let out = lab.proctor(
        As::Me,
        &["export", "latest", "--store", store.to_str().unwrap()],
    );
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("--html"), "{}", out.stderr);
    let out = lab.proctor(As::Me, &["compare", "a", "b", "--junit", "x.xml"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("--gate"), "{}", out.stderr);
    let out = lab.proctor(As::Me, &["export", "latest", "--atif-version", "1.7"]);
    assert_eq!(out.code, 2, "an unknown flag is an error: {}", out.stderr);
}

#[test]
fn compare_gate_writes_the_gates_as_test_cases() {
    let lab = Lab::new("export-gates");
    lab.write("fixture/README.md", "x\n");
    lab.write(
        "suite.toml",
        "schema_version = 1\nid = \"gates\"\n\n[defaults]\nwall_timeout_seconds = 60\n\n[report]\nunderpowered_below = 6\n\n[promotion]\nbaseline = \"control\"\ncandidate = \"method\"\nprimary_metric = \"completion_rate\"\nminimum_absolute_improvement = 0.05\n\n[[variants]]\nid = \"control\"\nagent = \"script\"\nscript = \"agents/control\"\n\n[[variants]]\nid = \"method\"\nagent = \"script\"\nscript = \"agents/method\"\n\n[[tasks]]\nid = \"t\"\nprompt = \"Make out.txt.\"\n\n[tasks.success]\nall = [{ file_added = \"out.txt\" }]\n",
    );
    lab.write("agents/control/t.toml", &script("no", 0, &[]));
    lab.write(
        "agents/method/t.toml",
        &script("made", 0, &["echo > out.txt"]),
    );
    let out = lab.run(As::Me, &["--trials", "6"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let store = lab.store();
    let file = lab.root.join("gates.xml");
    let out = lab.proctor(
        As::Me,
        &[
            "compare",
            "latest",
            "--variants",
            "control,method",
            "--gate",
            "--store",
            store.to_str().unwrap(),
            "--junit",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 0, "the gates pass: {}{}", out.stdout, out.stderr);
    let counts = xml_counts(&file);
    assert!(counts["testcase"] >= 4, "{counts:?}");
    assert_eq!(counts.get("failure"), None, "{counts:?}");
    if python_ready().is_some() {
        let j = junitparser(&file);
        let cases = j["cases"].as_object().unwrap();
        assert!(cases.contains_key("sample_size"), "{j}");
        assert!(cases.contains_key("primary_metric"), "{j}");
        assert!(cases.values().all(|c| c["kind"] == "passed"), "{j}");
    }
}

fn agents_bin(cli: &str) -> PathBuf {
    std::env::var_os("PROCTOR_AGENTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/proctor/agents")
        })
        .join("bin")
        .join(cli)
}

/// The tool calls (id, command) of a wire response, and the tool results (id, text) a request
/// carries, read from the mock model's log the way a reader of the Anthropic wire would.
fn wire_calls(response: &Value) -> Vec<(String, String)> {
    let mut calls: BTreeMap<u64, (String, String)> = BTreeMap::new();
    for ev in response["sse"].as_array().into_iter().flatten() {
        let d = &ev["data"];
        let i = d["index"].as_u64().unwrap_or(0);
        if d["type"] == "content_block_start" && d["content_block"]["type"] == "tool_use" {
            calls.insert(
                i,
                (
                    d["content_block"]["id"].as_str().unwrap().to_string(),
                    String::new(),
                ),
            );
        }
        if d["type"] == "content_block_delta" {
            if let (Some(c), Some(j)) = (calls.get_mut(&i), d["delta"]["partial_json"].as_str()) {
                c.1.push_str(j);
            }
        }
    }
    calls
        .into_values()
        .map(|(id, json)| {
            let v: Value = serde_json::from_str(&json).unwrap();
            (id, v["command"].as_str().unwrap().to_string())
        })
        .collect()
}

fn wire_results(request: &Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for m in request["messages"].as_array().into_iter().flatten() {
        for b in m["content"].as_array().into_iter().flatten() {
            if b["type"] == "tool_result" {
                let text = match &b["content"] {
                    Value::String(s) => s.clone(),
                    Value::Array(parts) => parts
                        .iter()
                        .filter_map(|p| p["text"].as_str())
                        .collect::<Vec<_>>()
                        .join("\n"),
                    other => other.to_string(),
                };
                out.insert(b["tool_use_id"].as_str().unwrap().to_string(), text);
            }
        }
    }
    out
}

#[test]
fn a_real_claude_code_trial_exports_its_wire_ledger() {
    if !agents_bin("claude").exists() {
        missing("Claude Code is not installed (agents/install.sh)");
        return;
    }
    let lab = Lab::new("export-claude");
    common::lab::copy_dir(&common::repo_root().join("examples/chat-ax"), &lab.suite());
    let out = lab.run(
        As::Me,
        &[
            "--variant",
            "claude-code",
            "--task",
            "edit",
            "--trials",
            "1",
        ],
    );
    let id = "edit.claude-code.0";
    let record = lab.record(id);
    assert_eq!(record["outcome"], "completed", "{}\n{record:#}", out.stderr);
    let atif = lab.root.join("atif");
    let store = lab.store();
    let out = lab.proctor(
        As::Me,
        &[
            "export",
            "latest",
            "--store",
            store.to_str().unwrap(),
            "--atif",
            atif.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let Some(harbor) = python_ready() else {
        return;
    };
    let summaries = validate_atif(&harbor, &atif);
    let s = &summaries[id];
    assert_eq!(s["agent"], "claude-code");

    assert_steps_are_the_wire_ledgers_calls(&lab, id, s);
    assert_token_totals_are_the_wire_ledgers(&record, s);
    assert_each_interface_call_joined_to_its_tool_call(&atif, id);
}

/// The wire ledger of trial `id`, read here independently of proctor's exporter: one agent
/// step (of the validated trajectory `s`) per main request, its tool calls and their
/// observations as the agent sent them back.
fn assert_steps_are_the_wire_ledgers_calls(lab: &Lab, id: &str, s: &Value) {
    let wire: Vec<Value> =
        std::fs::read_to_string(lab.trial_dir(id).join("services/__model/wire.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    let main: Vec<&Value> = wire.iter().filter(|x| x["kind"] == "main").collect();
    assert!(main.len() >= 5, "the script's five turns: {}", main.len());
    let mut results = BTreeMap::new();
    for x in &main {
        results.extend(wire_results(&x["request"]));
    }
    let mut want_calls = Vec::new();
    for x in &main {
        want_calls.extend(wire_calls(&x["response"]));
    }
    assert_eq!(want_calls.len(), 4, "four shell calls: {want_calls:?}");

    let steps = s["steps"].as_array().unwrap();
    let agent_steps: Vec<&Value> = steps.iter().filter(|s| s["source"] == "agent").collect();
    assert_eq!(agent_steps.len(), main.len(), "one step per main request");
    let mut got_calls = Vec::new();
    for st in &agent_steps {
        for c in st["tool_calls"].as_array().unwrap() {
            got_calls.push((
                c["id"].as_str().unwrap().to_string(),
                c["arguments"]["command"].as_str().unwrap().to_string(),
            ));
        }
        for o in st["observations"].as_array().unwrap() {
            let cid = o["source_call_id"].as_str().unwrap();
            assert_eq!(o["content"].as_str(), results.get(cid).map(String::as_str));
        }
    }
    assert_eq!(got_calls, want_calls);
    // Every call's observation is there, as the agent sent it back.
    let observed: usize = agent_steps
        .iter()
        .map(|s| s["observations"].as_array().unwrap().len())
        .sum();
    assert_eq!(observed, 4);
}

/// Token totals equal the wire ledger of `record` (ATIF's prompt tokens include cached ones),
/// and the steps of `s` add up to them.
fn assert_token_totals_are_the_wire_ledgers(record: &Value, s: &Value) {
    let steps = s["steps"].as_array().unwrap();
    let w = &record["ledgers"]["wire"];
    let u = |k: &str| w[k].as_u64().unwrap();
    let prompt = u("input") + u("cache_read") + u("cache_write");
    assert_eq!(s["total_prompt_tokens"].as_u64(), Some(prompt));
    assert_eq!(s["total_completion_tokens"].as_u64(), Some(u("output")));
    assert_eq!(s["total_cached_tokens"].as_u64(), Some(u("cache_read")));
    let add = |k: &str| -> u64 { steps.iter().filter_map(|s| s[k].as_u64()).sum() };
    assert_eq!(add("prompt_tokens"), prompt);
    assert_eq!(add("completion_tokens"), u("output"));
    assert_eq!(add("cached_tokens"), u("cache_read"));
}

/// Each interface call is joined to the tool call that made it.
fn assert_each_interface_call_joined_to_its_tool_call(atif: &Path, id: &str) {
    let t: Value =
        serde_json::from_str(&std::fs::read_to_string(atif.join(format!("{id}.json"))).unwrap())
            .unwrap();
    let mut joined = Vec::new();
    for st in t["steps"].as_array().unwrap() {
        for r in st["observation"]["results"]
            .as_array()
            .into_iter()
            .flatten()
        {
            for c in r["extra"]["interface_calls"]
                .as_array()
                .into_iter()
                .flatten()
            {
                joined.push(c["seq"].as_u64().unwrap());
            }
        }
    }
    assert_eq!(joined, vec![1, 2, 3, 4], "{t:#}");
}
