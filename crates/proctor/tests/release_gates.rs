//! Gates that hold per task, and a release run that keeps its gate, through the real binary
//! (docs/metrics.md, "Gates"; issue 47 items 2 and 4).
//!
//! The suite: tasks `a`, `b`, `c`, variants `control` and `method`, scripted agents that succeed
//! or fail a task every time. Each dishonest gate of the issue gets its run: three tasks of 3
//! trials each (9 pooled pairs against a threshold of 8) fail `sample_size`, naming every task;
//! a method better overall but worse on one task fails `no_regression_per_task`, naming that
//! task, while the pooled `no_regression` passes; a release run whose gates pass exits 0 though
//! some of its trials failed, and one whose gates fail exits 4; either way the gates are in its
//! `results.json`, `results.md`, `show RUN` (text and JSON), the viewer's run page and API,
//! `export --html` and the JUnit reports, and a rescore applies them again; one whose gates pass
//! with errored trials exits 3; a run without gates exits by its trials. The honest arm of each:
//! the same suite where the method regresses nowhere passes every gate. (The floor on
//! `underpowered_below` and `release_trials` is checked by `validate`'s located diagnostics,
//! tests/validate.rs.)

mod common;

use common::lab::{As, Lab};
use common::outcomes::script;
use common::viewer::{get, serve};
use serde_json::Value;

/// The suite with `release_trials` and `underpowered_below` as given, gated per task on
/// success; `method_fails` names the tasks the method fails (the control fails `b` and `c`).
fn lab(name: &str, release_trials: u32, underpowered_below: u32, method_fails: &[&str]) -> Lab {
    let lab = Lab::new(name);
    lab.write("fixture/README.md", "x\n");
    let mut toml = format!(
        "schema_version = 1\nid = \"release\"\nrelease_trials = {release_trials}\n\n[defaults]\nwall_timeout_seconds = 30\n\n[report]\nunderpowered_below = {underpowered_below}\n\n[promotion]\nbaseline = \"control\"\ncandidate = \"method\"\nprimary_metric = \"success_rate\"\nminimum_absolute_improvement = 0.05\nno_regression = [\"success_rate\"]\nno_regression_per_task = [\"success_rate\"]\n\n[[variants]]\nid = \"control\"\nagent = \"script\"\nscript = \"agents/control\"\n\n[[variants]]\nid = \"method\"\nagent = \"script\"\nscript = \"agents/method\"\n\n"
    );
    for t in ["a", "b", "c"] {
        toml.push_str(&format!(
            "[[tasks]]\nid = \"{t}\"\nprompt = \"Make out.txt.\"\n\n[tasks.success]\nall = [{{ file_added = \"out.txt\" }}]\n\n"
        ));
    }
    lab.write("suite.toml", &toml);
    let made = script("made", 0, &["echo > out.txt"]);
    let not = script("no", 0, &[]);
    for t in ["a", "b", "c"] {
        let control = if t == "a" { &made } else { &not };
        let method = if method_fails.contains(&t) {
            &not
        } else {
            &made
        };
        lab.write(&format!("agents/control/{t}.toml"), control);
        lab.write(&format!("agents/method/{t}.toml"), method);
    }
    lab
}

fn gate<'a>(gates: &'a Value, name: &str) -> &'a Value {
    gates["gates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == name)
        .unwrap_or_else(|| panic!("no gate {name}: {gates:#}"))
}

fn failed(gates: &Value) -> Vec<&str> {
    gates["gates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["passed"] == false)
        .map(|g| g["name"].as_str().unwrap())
        .collect()
}

fn read_json(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Three tasks with 3 trials each: 9 pooled pairs pass a threshold of 8, but no task's own
/// comparison does; `compare --gate` fails `sample_size` naming the three tasks. The honest
/// arm: 8 trials each pass it.
#[test]
fn keystone_pooled_pairs_do_not_pass_the_sample_size_gate() {
    let lab = lab("gates-pooled", 8, 8, &[]);
    let out = lab.run(As::Me, &["--trials", "3"]);
    assert_eq!(out.code, 1, "the control fails b and c: {}", out.stderr);
    let store = lab.store();
    let s = store.to_str().unwrap();
    let compare = |lab: &Lab| {
        lab.proctor(
            As::Me,
            &[
                "compare",
                "latest",
                "--variants",
                "control,method",
                "--store",
                s,
                "--gate",
                "--format",
                "json",
            ],
        )
    };
    let gated = compare(&lab);
    assert_eq!(gated.code, 4, "{}\n{}", gated.stdout, gated.stderr);
    let doc: Value = serde_json::from_str(&gated.stdout).unwrap();
    let gates = &doc["gates"];
    assert_eq!(failed(gates), ["sample_size"], "{gates:#}");
    let size = gate(gates, "sample_size");
    assert_eq!(
        size["explanation"],
        "underpowered: 3 of 3 task(s) below 8 graded matched pairs: `a` 3, `b` 3, `c` 3 (pooled over tasks: 9 pairs, which does not count)"
    );
    // The text names the thresholds on the FAILED line.
    let text = lab.proctor(
        As::Me,
        &[
            "compare",
            "latest",
            "--variants",
            "control,method",
            "--store",
            s,
            "--gate",
        ],
    );
    assert_eq!(text.code, 4, "{}", text.stderr);
    assert!(
        text.stdout.contains("Promotion of method over control: FAILED (thresholds: underpowered_below = 8 per task, minimum_absolute_improvement = 0.05, strongest_success_tolerance = 0)"),
        "{}",
        text.stdout
    );

    // Honest arm: 8 trials per cell, every task at the threshold.
    let honest = self::lab("gates-pooled-honest", 8, 8, &[]);
    let out = honest.run(As::Me, &["--trials", "8"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let store = honest.store();
    let gated = honest.proctor(
        As::Me,
        &[
            "compare",
            "latest",
            "--variants",
            "control,method",
            "--store",
            store.to_str().unwrap(),
            "--gate",
            "--format",
            "json",
        ],
    );
    assert_eq!(gated.code, 0, "{}\n{}", gated.stdout, gated.stderr);
    let doc: Value = serde_json::from_str(&gated.stdout).unwrap();
    assert_eq!(
        failed(&doc["gates"]),
        Vec::<&str>::new(),
        "{:#}",
        doc["gates"]
    );
}

/// A release run whose gates pass exits 0 although the control's trials on `b` and `c` fail;
/// its gates are in results.json, results.md, `show`, the viewer, `export --html` and JUnit.
#[test]
fn keystone_a_release_run_keeps_its_gates_and_exits_by_them() {
    let lab = lab("gates-release", 6, 6, &[]);
    let junit = lab.root.join("run.xml");
    let out = lab.run(
        As::Me,
        &[
            "--trial-mode",
            "release",
            "--junit",
            junit.to_str().unwrap(),
        ],
    );
    // 36 trials, 12 of them failed (the control on b and c): the gates decide, and they pass.
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("release run: every promotion gate passed"),
        "{}",
        out.stderr
    );
    assert!(
        out.stdout.contains(
            "Promotion of method over control: PASSED (thresholds: underpowered_below = 6 per task"
        ),
        "{}",
        out.stdout
    );
    let run = lab.run_id();
    let dir = lab.run_dir();

    let gates = assert_results_keep_the_gates(&dir);
    // results.md: a section with the verdict, the thresholds and every gate.
    let md = std::fs::read_to_string(dir.join("results.md")).unwrap();
    assert!(
        md.contains("## Release gates: Promotion of `method` over `control`: PASSED (thresholds: underpowered_below = 6 per task"),
        "{md}"
    );
    assert!(
        md.contains("| no_regression_per_task:success_rate | pass |"),
        "{md}"
    );

    let store = lab.store();
    let s = store.to_str().unwrap();
    assert_show_gives_the_gates(&lab, &run, s, &gates);
    assert_html_export_has_the_gates(&lab, &run);
    assert_viewer_has_the_gates(&store, &run, &gates);
    assert_junit_has_a_case_per_gate(&lab, &run, s, &junit, &gates);
}

/// results.json and results.report.json keep the gates, typed as compare --gate prints them;
/// gives them.
fn assert_results_keep_the_gates(dir: &std::path::Path) -> Value {
    let results = read_json(&dir.join("results.json"));
    let gates = &results["report"]["gates"];
    assert_eq!(gates["passed"], true, "{gates:#}");
    assert_eq!(gates["baseline"], "control");
    assert_eq!(gates["candidate"], "method");
    assert_eq!(
        gate(gates, "sample_size")["explanation"],
        "every task has at least 6 graded matched pairs (3 task(s); fewest: `a` with 6)"
    );
    assert_eq!(
        gate(gates, "no_regression_per_task:success_rate")["passed"],
        true
    );
    assert_eq!(gates["thresholds"][0], "underpowered_below = 6 per task");
    let small = read_json(&dir.join("results.report.json"));
    assert_eq!(&small["gates"], gates);

    gates.clone()
}

/// show RUN: the gates after the trials; in JSON, under `gates`.
fn assert_show_gives_the_gates(lab: &Lab, run: &str, s: &str, gates: &Value) {
    let shown = lab.proctor(As::Me, &["show", "--store", s, run]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(
        shown
            .stdout
            .contains("Promotion of method over control: PASSED"),
        "{}",
        shown.stdout
    );
    assert!(
        shown
            .stdout
            .lines()
            .any(|l| l.starts_with("sample_size") && l.contains("pass")),
        "{}",
        shown.stdout
    );
    let shown = lab.proctor(As::Me, &["show", "--store", s, run, "--format", "json"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let doc: Value = serde_json::from_str(&shown.stdout).unwrap();
    assert_eq!(&doc["gates"], gates);
}

/// export --html: the run page has the gates section.
fn assert_html_export_has_the_gates(lab: &Lab, run: &str) {
    let (out, page) = lab.export_html(run, "run.html");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let html = std::fs::read_to_string(page).unwrap();
    assert!(html.contains("<h2>Promotion gates</h2>"), "{html}");
    assert!(
        html.contains("applied at the end of this release run"),
        "{html}"
    );
    assert!(html.contains("every gate passed"), "{html}");
    assert!(
        html.contains("<tr data-gate=\"no_regression_per_task:success_rate\"><td><code>no_regression_per_task:success_rate</code></td><td><span class=\"badge good\">passed</span>"),
        "{html}"
    );
    assert!(
        html.contains("thresholds: underpowered_below = 6 per task"),
        "{html}"
    );
}

/// The viewer: the run page and its API.
fn assert_viewer_has_the_gates(store: &std::path::Path, run: &str, gates: &Value) {
    let server = serve(store);
    let (status, body) = get(&server, &format!("/runs/{run}"));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("<h2>Promotion gates</h2>"), "{body}");
    assert!(body.contains("every gate passed"), "{body}");
    let (status, api) = get(&server, &format!("/api/runs/{run}"));
    assert_eq!(status, 200, "{api}");
    let api: Value = serde_json::from_str(&api).unwrap();
    assert_eq!(&api["report"]["gates"], gates, "{api:#}");
}

/// JUnit (run --junit's file `junit`, and export --junit): the trials, then one test case per
/// gate.
fn assert_junit_has_a_case_per_gate(
    lab: &Lab,
    run: &str,
    s: &str,
    junit: &std::path::Path,
    gates: &Value,
) {
    let xml = std::fs::read_to_string(junit).unwrap();
    assert!(
        xml.contains("<testsuite name=\"promotion control -&gt; method\""),
        "{xml}"
    );
    assert!(
        xml.contains(
            "<testcase name=\"no_regression_per_task:success_rate\" classname=\"promotion\""
        ),
        "{xml}"
    );
    assert!(
        xml.contains("<property name=\"threshold\" value=\"underpowered_below = 6 per task\"/>"),
        "{xml}"
    );
    // 36 trial cases (12 failures: the control on b and c) and the gates, none failed.
    let gate_cases = gates["gates"].as_array().unwrap().len();
    assert!(
        xml.contains(&format!("tests=\"{}\" failures=\"12\"", 36 + gate_cases)),
        "{xml}"
    );
    let exported = lab.root.join("export.xml");
    let out = lab.proctor(
        As::Me,
        &[
            "export",
            run,
            "--junit",
            exported.to_str().unwrap(),
            "--store",
            s,
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(std::fs::read_to_string(&exported).unwrap(), xml);
}

/// The method gains `b` and `c` and loses `a`: pooled it is better (1/3 -> 2/3), and the pooled
/// `no_regression:success_rate` passes, but `no_regression_per_task` fails naming `a`; the
/// release run exits 4 and its results, show, HTML and JUnit say which gate failed.
#[test]
fn keystone_a_regression_on_one_task_fails_the_release_run() {
    let lab = lab("gates-regress", 6, 6, &["a"]);
    let junit = lab.root.join("run.xml");
    let out = lab.run(
        As::Me,
        &[
            "--trial-mode",
            "release",
            "--junit",
            junit.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 4, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("release run: a promotion gate failed"),
        "{}",
        out.stderr
    );
    let dir = lab.run_dir();
    let results = read_json(&dir.join("results.json"));
    let gates = &results["report"]["gates"];
    assert_eq!(gates["passed"], false);
    assert_eq!(
        failed(gates),
        ["no_regression_per_task:success_rate"],
        "{gates:#}"
    );
    assert_eq!(gate(gates, "no_regression:success_rate")["passed"], true);
    assert_eq!(
        gate(gates, "no_regression_per_task:success_rate")["explanation"],
        "`success_rate` (higher is better) regressed on 1 of 3 task(s): `a` by 100.0 points (6/6 (100%) -> 0/6 (0%))"
    );
    let md = std::fs::read_to_string(dir.join("results.md")).unwrap();
    assert!(
        md.contains("## Release gates: Promotion of `method` over `control`: FAILED"),
        "{md}"
    );
    let run = lab.run_id();
    let store = lab.store();
    let shown = lab.proctor(As::Me, &["show", "--store", store.to_str().unwrap(), &run]);
    assert!(
        shown
            .stdout
            .lines()
            .any(|l| l.starts_with("no_regression_per_task:success_rate") && l.contains("FAIL")),
        "{}",
        shown.stdout
    );
    let (out, page) = lab.export_html(&run, "run.html");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let html = std::fs::read_to_string(page).unwrap();
    assert!(html.contains("a gate failed: not promoted"), "{html}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("<failure message=\"`success_rate` (higher is better) regressed on 1 of 3 task(s): `a` by 100.0 points"),
        "{xml}"
    );

    // A rescore of the release run applies the gates again, in the rescore's results, and
    // `show` (which reads the latest scoring) still shows them.
    let s = store.to_str().unwrap();
    let rescored = lab.proctor(As::Me, &["rescore", &run, "--store", s]);
    assert_eq!(rescored.code, 0, "{}\n{}", rescored.stdout, rescored.stderr);
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("results.rescored-") && name.ends_with(".report.json")
        })
        .unwrap_or_else(|| panic!("no rescore report in {}", dir.display()));
    let again = read_json(&file);
    assert_eq!(
        failed(&again["gates"]),
        ["no_regression_per_task:success_rate"]
    );
    let shown = lab.proctor(As::Me, &["show", "--store", s, &run]);
    assert!(shown.stderr.contains("rescore 1"), "{}", shown.stderr);
    assert!(
        shown
            .stdout
            .contains("Promotion of method over control: FAILED"),
        "{}",
        shown.stdout
    );
}

/// A run without gates exits as before: a dev run of the same suite, with failed trials, exits
/// 1 and keeps no gates.
#[test]
fn a_run_without_gates_exits_by_its_trials() {
    let lab = lab("gates-dev", 6, 6, &[]);
    let out = lab.run(As::Me, &["--trials", "1"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    let results = read_json(&lab.run_dir().join("results.json"));
    assert!(
        results["report"].get("gates").is_none(),
        "{:#}",
        results["report"]
    );
    let md = std::fs::read_to_string(lab.run_dir().join("results.md")).unwrap();
    assert!(!md.contains("Release gates"), "{md}");
}

/// A release run whose gates pass but which has errored trials (a third arm whose program does
/// not exist: its trials error at the start, and it is no arm of the gates) exits 3: the
/// harness lost evidence, and passing gates do not hide that.
#[test]
fn a_release_run_whose_gates_pass_with_errored_trials_is_unfinished() {
    let lab = lab("gates-errored", 6, 6, &[]);
    let toml = std::fs::read_to_string(lab.suite().join("suite.toml")).unwrap();
    lab.write(
        "suite.toml",
        &format!("{toml}[[variants]]\nid = \"broken\"\nagent = \"command\"\ncommand = [\"/nonexistent/agent\", \"{{prompt}}\"]\n"),
    );
    let out = lab.run(As::Me, &["--trial-mode", "release"]);
    assert_eq!(out.code, 3, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains(
            "release run: every promotion gate passed, but some trial is errored or ungradeable"
        ),
        "{}",
        out.stderr
    );
    let results = read_json(&lab.run_dir().join("results.json"));
    assert_eq!(results["report"]["gates"]["passed"], true);
    assert_eq!(results["report"]["overall"]["errored"], 18);
}
