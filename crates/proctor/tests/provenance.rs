//! Provenance in every comparison, through the real binary: picking the worst A run against the
//! best B run among four runs of a suite warns, naming the runs left out, and `compare --gate`
//! fails on it unless `--allow-mixed-runs` says the author meant it (then it still warns);
//! rescoring only B's run with a laxer suite warns, naming the part of the suite that differs
//! (the checks of the task), and `--gate` fails; a rescore's results name the suite that scored
//! them while each trial keeps the suite its agent ran against; runs of two suite versions name
//! the part that changed (a task's prompt), also when both are rescored with one suite. The
//! honest arms: two variants of
//! the only run, and two runs that are the only runs of the suite, compare with no warning and
//! gate as before.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::lab::{As, Lab, RunOut};
use common::outcomes::script;
use common::viewer::{get, serve};
use serde_json::Value;

/// A suite of one task (`out.txt` must be made) and two scripted variants, `a` the baseline and
/// `b` the candidate; each makes `out.txt` only when its knob file (outside the suite, bound
/// read-only into the trial by the suite's `binds`) says `ok`, so runs of the same suite differ.
fn knob_suite(lab: &Lab) {
    lab.write("fixture/README.md", "x\n");
    let knobs = lab.root.join("knobs");
    std::fs::create_dir_all(&knobs).unwrap();
    lab.write(
        "suite.toml",
        &format!("schema_version = 1\nid = \"picks\"\n\n[defaults]\nwall_timeout_seconds = 20\nbinds = [\"{}\"]\n\n[report]\nunderpowered_below = 6\n\n[promotion]\nbaseline = \"a\"\ncandidate = \"b\"\nprimary_metric = \"completion_rate\"\nminimum_absolute_improvement = 0.05\n\n[[variants]]\nid = \"a\"\nagent = \"script\"\nscript = \"agents/a\"\n\n[[variants]]\nid = \"b\"\nagent = \"script\"\nscript = \"agents/b\"\n\n[[tasks]]\nid = \"t\"\nprompt = \"Make out.txt.\"\n\n[tasks.success]\nall = [{{ file_added = \"out.txt\" }}]\n", knobs.display()),
    );
    for v in ["a", "b"] {
        let knob = knobs.join(v);
        lab.write(
            &format!("agents/{v}/t.toml"),
            &script(
                "done",
                0,
                &[&format!(
                    "if [ \"$(cat {})\" = ok ]; then echo hi > out.txt; fi; true",
                    knob.display()
                )],
            ),
        );
    }
}

/// Sets the knobs: whether `a` and `b` make `out.txt` in the next run.
fn knobs(lab: &Lab, a: bool, b: bool) {
    for (v, ok) in [("a", a), ("b", b)] {
        std::fs::write(lab.root.join("knobs").join(v), if ok { "ok" } else { "no" }).unwrap();
    }
}

fn run_ids(store: &Path) -> BTreeSet<String> {
    std::fs::read_dir(store.join("runs"))
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// `proctor run` of the lab's suite with `extra`: the new run's id.
fn new_run(lab: &Lab, extra: &[&str]) -> String {
    let before = run_ids(&lab.store());
    let out = lab.run(As::Me, extra);
    assert!(out.code == 0 || out.code == 1, "{}", out.stderr);
    let after = run_ids(&lab.store());
    let new: Vec<&String> = after.difference(&before).collect();
    assert_eq!(new.len(), 1, "{before:?} -> {after:?}");
    new[0].clone()
}

/// `proctor compare ARGS --store STORE`.
fn compare(lab: &Lab, args: &[&str]) -> RunOut {
    let store = lab.store();
    let mut all = vec!["compare"];
    all.extend_from_slice(args);
    all.extend(["--store", store.to_str().unwrap()]);
    lab.proctor(As::Me, &all)
}

fn json(out: &RunOut) -> Value {
    serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", out.stdout, out.stderr))
}

/// The kinds of a comparison document's warnings.
fn kinds(doc: &Value) -> Vec<String> {
    doc["comparison"]["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["kind"].as_str().unwrap().to_string())
        .collect()
}

/// The gate named `name` of a `--gate --format json` document.
fn gate<'a>(doc: &'a Value, name: &str) -> Option<&'a Value> {
    doc["gates"]["gates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == name)
}

#[test]
fn best_of_four_picking_warns_and_fails_the_gate_unless_allowed() {
    let lab = Lab::new("provenance-picks");
    knob_suite(&lab);
    // Four runs of six trials a cell (a direction needs 6 of 6 differing pairs one way): A is
    // worst in run 2, B best in run 3.
    let mut runs = Vec::new();
    for (a, b) in [(true, false), (false, false), (true, true), (true, false)] {
        knobs(&lab, a, b);
        runs.push(new_run(&lab, &["--trials", "6"]));
    }
    let (r2, r3) = (&runs[1], &runs[2]);
    let (arm_a, arm_b) = (format!("{r2}/a"), format!("{r3}/b"));
    assert_picked_comparison_fails_on_provenance(&lab, &arm_a, &arm_b, &runs);
    assert_text_and_junit_name_the_picks(&lab, &arm_a, &arm_b, &runs);
    assert_mixed_runs_pass_only_when_allowed_with_the_gate(&lab, &arm_a, &arm_b);
    assert_viewer_names_the_picks(&lab, &arm_a, &arm_b, &runs);
}

/// The picked comparison (A from `runs`' second, B from its third): B +100 points, every
/// promotion gate but provenance passes; the warnings name the runs left out.
fn assert_picked_comparison_fails_on_provenance(
    lab: &Lab,
    arm_a: &str,
    arm_b: &str,
    runs: &[String],
) {
    let (r1, r2, r3, r4) = (&runs[0], &runs[1], &runs[2], &runs[3]);
    let out = compare(lab, &[arm_a, arm_b, "--gate", "--format", "json"]);
    assert_eq!(
        out.code, 4,
        "a mixed comparison fails the gate\n{}",
        out.stderr
    );
    let doc = json(&out);
    assert_eq!(doc["comparison"]["overall"]["verdict"], "better", "{doc:#}");
    assert_eq!(
        kinds(&doc),
        vec!["runs_left_out", "runs_left_out"],
        "{:#}",
        doc["comparison"]["warnings"]
    );
    let messages: Vec<&str> = doc["comparison"]["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["message"].as_str().unwrap())
        .collect();
    assert_eq!(
        messages[0],
        format!("3 other run(s) of suite `picks` with variant `a` (arm A) in the store were left out: {r1}, {r3}, {r4}")
    );
    assert_eq!(
        messages[1],
        format!("3 other run(s) of suite `picks` with variant `b` (arm B) in the store were left out: {r1}, {r2}, {r4}")
    );
    let p = &doc["comparison"]["provenance"];
    assert_eq!(p["a"]["run_id"], r2.as_str());
    assert_eq!(p["b"]["run_id"], r3.as_str());
    assert_eq!(p["b"]["scoring"], "original");
    let g = gate(&doc, "provenance").expect("a provenance gate");
    assert_eq!(g["passed"], false, "{g:#}");
    assert!(
        g["explanation"]
            .as_str()
            .unwrap()
            .contains("the comparison mixes runs (runs_left_out)"),
        "{g:#}"
    );
    assert_eq!(doc["gates"]["passed"], false);
    assert!(
        doc["gates"]["gates"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|g| g["name"] != "provenance")
            .all(|g| g["passed"] == true),
        "only provenance fails: {:#}",
        doc["gates"]
    );
    assert!(
        out.stderr.contains("a promotion gate failed: provenance"),
        "{}",
        out.stderr
    );
}

/// The text names the runs left out, the arms' provenance, and the failed gate; the JUnit
/// report has the gate as a failed test case.
fn assert_text_and_junit_name_the_picks(lab: &Lab, arm_a: &str, arm_b: &str, runs: &[String]) {
    let (r1, r2, r4) = (&runs[0], &runs[1], &runs[3]);
    let junit = lab.root.join("gates.xml");
    let text = compare(
        lab,
        &[arm_a, arm_b, "--gate", "--junit", junit.to_str().unwrap()],
    );
    assert_eq!(text.code, 4, "{}", text.stderr);
    let xml = std::fs::read_to_string(&junit).unwrap();
    let case = xml
        .split("<testcase")
        .find(|c| c.contains("name=\"provenance\""))
        .unwrap_or_else(|| panic!("no provenance test case in {xml}"));
    assert!(case.contains("<failure"), "{case}");
    let flat = common::unwrapped(&text.stdout);
    assert!(
        flat.contains(&format!(
            "runs_left_out: 3 other run(s) of suite picks with variant b (arm B) in the store were left out: {r1}, {r2}, {r4}"
        )),
        "{}",
        text.stdout
    );
    assert!(
        flat.contains(&format!(
            "provenance: A is run {r2} variant a, original scoring"
        )),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .lines()
            .any(|l| l.contains("provenance") && l.contains("FAIL")),
        "{}",
        text.stdout
    );
    assert!(
        text.stderr
            .contains("warning: runs_left_out: 3 other run(s)"),
        "{}",
        text.stderr
    );
}

/// Without --gate the comparison warns and exits 0, as every comparison; with
/// --allow-mixed-runs the gates pass, the warnings stay, and the provenance gate says why it
/// passed; --allow-mixed-runs means nothing without --gate.
fn assert_mixed_runs_pass_only_when_allowed_with_the_gate(lab: &Lab, arm_a: &str, arm_b: &str) {
    let plain = compare(lab, &[arm_a, arm_b, "--format", "json"]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    assert_eq!(kinds(&json(&plain)), vec!["runs_left_out", "runs_left_out"]);

    // The author says they meant it: the gates pass, the warnings stay, and the provenance
    // gate says why it passed.
    let allowed = compare(
        lab,
        &[
            arm_a,
            arm_b,
            "--gate",
            "--allow-mixed-runs",
            "--format",
            "json",
        ],
    );
    assert_eq!(allowed.code, 0, "{}", allowed.stderr);
    let doc = json(&allowed);
    assert_eq!(doc["gates"]["passed"], true, "{:#}", doc["gates"]);
    assert_eq!(kinds(&doc), vec!["runs_left_out", "runs_left_out"]);
    let g = gate(&doc, "provenance").expect("the provenance gate, passed");
    assert_eq!(g["passed"], true);
    assert!(
        g["explanation"]
            .as_str()
            .unwrap()
            .contains("allowed by --allow-mixed-runs"),
        "{g:#}"
    );
    assert!(
        allowed.stderr.contains("warning: runs_left_out"),
        "{}",
        allowed.stderr
    );
    // --allow-mixed-runs means nothing without --gate.
    let lone = compare(lab, &[arm_a, arm_b, "--allow-mixed-runs"]);
    assert_eq!(lone.code, 2, "{}", lone.stderr);
}

/// The viewer's comparison page names the runs left out too, and its gates fail on provenance.
fn assert_viewer_names_the_picks(lab: &Lab, arm_a: &str, arm_b: &str, runs: &[String]) {
    let (r1, r3, r4) = (&runs[0], &runs[2], &runs[3]);
    let server = serve(&lab.store());
    let (status, page) = get(&server, &format!("/compare?a={arm_a}&b={arm_b}"));
    assert_eq!(status, 200, "{page}");
    let mixed = page
        .split("id=\"mixed-runs\"")
        .nth(1)
        .unwrap_or_else(|| panic!("no mixed-runs list in {page}"));
    let mixed = &mixed[..mixed.find("</ul>").unwrap()];
    assert!(
        mixed.contains(&format!(
            "with variant `a` (arm A) in the store were left out: {r1}, {r3}, {r4}"
        )),
        "{mixed}"
    );
    assert!(page.contains("id=\"provenance\""), "{page}");
}

/// The rescore results of `run`: its one `results.rescored-*.json`.
fn rescore_doc(store: &Path, run: &str) -> (Value, std::path::PathBuf) {
    let dir = store.join("runs").join(run);
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with("results.rescored-")
                && n.ends_with(".json")
                && !n.ends_with(".report.json")
        })
        .expect("a rescore's results");
    (
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap(),
        file,
    )
}

#[test]
fn rescoring_one_arm_with_a_laxer_suite_names_the_difference_and_fails_the_gate() {
    let lab = Lab::new("provenance-rescore");
    knob_suite(&lab);
    // Neither variant makes out.txt: both arms fail the task.
    knobs(&lab, false, false);
    let ra = new_run(&lab, &["--trials", "6", "--variant", "a"]);
    let rb = new_run(&lab, &["--trials", "6", "--variant", "b"]);
    assert_honest_arms_compare_with_no_warning(&lab, &ra, &rb);
    // B's run alone is rescored with a laxer suite: the answer is enough.
    let lax = lab.root.join("lax-suite");
    common::lab::copy_dir(&lab.suite(), &lax);
    let toml = std::fs::read_to_string(lax.join("suite.toml")).unwrap();
    std::fs::write(
        lax.join("suite.toml"),
        toml.replace(
            "all = [{ file_added = \"out.txt\" }]",
            "all = [{ answer_matches = \"done\" }]",
        ),
    )
    .unwrap();
    let store = lab.store();
    let out = lab.proctor(
        As::Me,
        &[
            "rescore",
            &rb,
            "--suite",
            lax.to_str().unwrap(),
            "--store",
            store.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);

    let (ran_hash, scored_hash) = assert_rescore_names_the_suite_that_scored_it(&store, &rb);
    assert_comparison_names_the_different_rules(&lab, &ra, &rb, &ran_hash, &scored_hash);
    // With the flag it passes and still warns.
    let allowed = compare(
        &lab,
        &[&ra, &rb, "--gate", "--allow-mixed-runs", "--format", "json"],
    );
    assert_eq!(allowed.code, 0, "{}", allowed.stderr);
    assert_eq!(kinds(&json(&allowed)), vec!["different_rules"]);

    // Both runs in their own scoring: the honest comparison again.
    let original = compare(
        &lab,
        &[
            &ra,
            &rb,
            "--gate",
            "--scoring",
            "original",
            "--format",
            "json",
        ],
    );
    assert_eq!(original.code, 4, "{}", original.stderr);
    let doc = json(&original);
    assert_eq!(doc["comparison"]["warnings"], serde_json::json!([]));
    assert!(gate(&doc, "provenance").is_none());
}

/// The honest arms (runs `ra` and `rb`): two runs that are the only runs of the suite. No
/// warning, and the gates as before (no improvement: they fail, with no provenance gate among
/// them).
fn assert_honest_arms_compare_with_no_warning(lab: &Lab, ra: &str, rb: &str) {
    let honest = compare(lab, &[ra, rb, "--gate", "--format", "json"]);
    assert_eq!(honest.code, 4, "{}", honest.stderr);
    let doc = json(&honest);
    assert_eq!(
        doc["comparison"]["warnings"],
        serde_json::json!([]),
        "{doc:#}"
    );
    assert!(gate(&doc, "provenance").is_none(), "{:#}", doc["gates"]);
    assert_eq!(
        doc["comparison"]["overall"]["b"]["cell"]["rates"]["success"]["k"],
        0
    );
}

/// The rescore's results (of run `rb`) name the suite that scored them; each trial keeps the
/// suite its agent ran against; the rules are kept beside the results; the run's own results
/// keep naming the suite it ran. Gives the hashes of the suite the run ran and of the one that
/// rescored it.
fn assert_rescore_names_the_suite_that_scored_it(store: &Path, rb: &str) -> (String, String) {
    let (rescored, file) = rescore_doc(store, rb);
    let ran: Value = serde_json::from_slice(
        &std::fs::read(store.join("runs").join(rb).join("run.json")).unwrap(),
    )
    .unwrap();
    let ran_hash = ran["suite_hash"].as_str().unwrap();
    let scored_hash = rescored["suite_hash"].as_str().unwrap();
    assert_ne!(ran_hash, scored_hash);
    assert_eq!(
        rescored["report"]["suite_hashes"],
        serde_json::json!([scored_hash]),
        "suite_hashes name the rules that scored the trials"
    );
    for t in rescored["trials"].as_array().unwrap() {
        assert_eq!(t["hashes"]["suite"], ran_hash, "what the agent ran against");
    }
    let kept = file.with_extension("suite");
    assert!(
        kept.join("suite.json").is_file() && kept.join("suite/suite.toml").is_file(),
        "{}",
        kept.display()
    );
    assert!(std::fs::read_to_string(kept.join("suite/suite.toml"))
        .unwrap()
        .contains("answer_matches = \"done\""));
    let original: Value = serde_json::from_slice(
        &std::fs::read(store.join("runs").join(rb).join("results.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        original["report"]["suite_hashes"],
        serde_json::json!([ran_hash])
    );

    (ran_hash.to_string(), scored_hash.to_string())
}

/// The comparison reads B's rescore: B +100 points, and it says the rules differ, in the checks
/// of task t, with B's rescore named; only the provenance gate fails.
fn assert_comparison_names_the_different_rules(
    lab: &Lab,
    ra: &str,
    rb: &str,
    ran_hash: &str,
    scored_hash: &str,
) {
    let out = compare(lab, &[ra, rb, "--gate", "--format", "json"]);
    assert_eq!(out.code, 4, "{}", out.stderr);
    let doc = json(&out);
    assert_eq!(doc["comparison"]["overall"]["verdict"], "better", "{doc:#}");
    assert_eq!(kinds(&doc), vec!["different_rules"], "{doc:#}");
    let message = doc["comparison"]["warnings"][0]["message"]
        .as_str()
        .unwrap();
    assert!(
        message.starts_with(&format!(
            "the arms were scored by different suite versions: A by suite {}… (run {ra}'s own scoring), B by suite {}… (rescore 1 (",
            &ran_hash[..12],
            &scored_hash[..12]
        )) && message.ends_with(&format!(" of run {rb}); they differ in checks of task `t`")),
        "{message}"
    );
    let p = &doc["comparison"]["provenance"];
    assert_eq!(p["b"]["rescored"], true);
    assert_eq!(p["b"]["scored_suite_hash"], scored_hash);
    assert_eq!(p["b"]["ran_suite_hash"], ran_hash);
    assert_eq!(
        p["rules_differ"]["parts"],
        serde_json::json!(["checks of task `t`"])
    );
    assert_eq!(
        doc["comparison"]["b"]["suite_hashes"],
        serde_json::json!([scored_hash])
    );
    let g = gate(&doc, "provenance").expect("a provenance gate");
    assert_eq!(g["passed"], false);
    assert!(
        g["explanation"]
            .as_str()
            .unwrap()
            .contains("(different_rules)"),
        "{g:#}"
    );
    // Every other gate passes: only provenance stands between the laxer rescore and promotion.
    assert!(doc["gates"]["gates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["name"] != "provenance")
        .all(|g| g["passed"] == true));
}

#[test]
fn two_variants_of_the_only_run_compare_with_no_warning_and_gate_as_before() {
    let lab = Lab::new("provenance-honest");
    knob_suite(&lab);
    knobs(&lab, false, true);
    let run = new_run(&lab, &["--trials", "6"]);
    let out = compare(
        &lab,
        &[&run, "--variants", "a,b", "--gate", "--format", "json"],
    );
    assert_eq!(out.code, 0, "B makes out.txt, A does not: {}", out.stderr);
    let doc = json(&out);
    assert_eq!(
        doc["comparison"]["warnings"],
        serde_json::json!([]),
        "{doc:#}"
    );
    assert_eq!(doc["gates"]["passed"], true);
    assert!(gate(&doc, "provenance").is_none(), "{:#}", doc["gates"]);
    let p = &doc["comparison"]["provenance"];
    assert_eq!(p["a"]["run_id"], run.as_str());
    assert_eq!(p["b"]["run_id"], run.as_str());
    assert!(p.get("runs_left_out").is_none(), "{p:#}");
    let text = compare(&lab, &[&run, "--variants", "a,b", "--gate"]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(!text.stdout.contains("Warnings"), "{}", text.stdout);
    assert!(!text.stderr.contains("warning:"), "{}", text.stderr);
}

#[test]
fn runs_of_two_suite_versions_name_the_part_that_changed_even_rescored_alike() {
    let lab = Lab::new("provenance-versions");
    knob_suite(&lab);
    knobs(&lab, true, true);
    let ra = new_run(&lab, &["--trials", "2", "--variant", "a"]);
    // The suite's prompt is reworded before B's run.
    let toml = std::fs::read_to_string(lab.suite().join("suite.toml")).unwrap();
    lab.write(
        "suite.toml",
        &toml.replace("Make out.txt.", "Make the file out.txt."),
    );
    let rb = new_run(&lab, &["--trials", "2", "--variant", "b"]);

    let out = compare(&lab, &[&ra, &rb, "--gate", "--format", "json"]);
    assert_eq!(out.code, 4, "{}", out.stderr);
    let doc = json(&out);
    assert_eq!(kinds(&doc), vec!["different_rules"], "{doc:#}");
    let p = &doc["comparison"]["provenance"];
    assert_eq!(
        p["rules_differ"]["parts"],
        serde_json::json!(["prompt of task `t`"]),
        "{p:#}"
    );
    assert!(p.get("ran_differ").is_none(), "{p:#}");

    // Both runs rescored with the same suite: the rules agree, what the agents ran against
    // does not, and the comparison still says so, and still fails the gate.
    let store = lab.store();
    for run in [&ra, &rb] {
        let out = lab.proctor(
            As::Me,
            &[
                "rescore",
                run,
                "--suite",
                lab.suite().to_str().unwrap(),
                "--store",
                store.to_str().unwrap(),
            ],
        );
        assert_eq!(out.code, 0, "{}", out.stderr);
    }
    let out = compare(&lab, &[&ra, &rb, "--gate", "--format", "json"]);
    assert_eq!(out.code, 4, "{}", out.stderr);
    let doc = json(&out);
    assert_eq!(kinds(&doc), vec!["different_suite_run"], "{doc:#}");
    let p = &doc["comparison"]["provenance"];
    assert!(p.get("rules_differ").is_none(), "{p:#}");
    assert_eq!(
        p["ran_differ"]["parts"],
        serde_json::json!(["prompt of task `t`"]),
        "{p:#}"
    );
    assert!(
        doc["comparison"]["warnings"][0]["message"]
            .as_str()
            .unwrap()
            .ends_with("they differ in prompt of task `t`"),
        "{doc:#}"
    );
    assert_eq!(gate(&doc, "provenance").unwrap()["passed"], false);
}
