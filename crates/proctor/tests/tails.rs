//! No summary hides a tail, end to end through the real binary: an arm whose wrong turns all sit
//! in one task has the same median as its baseline (0) but a higher mean and total, and
//! `compare --gate` fails `no_regression` on the mean; results.md shows median / mean / total
//! with n; compare counts the matched pairs by which arm succeeded.

mod common;

use common::lab::{As, Lab};
use serde_json::Value;

/// The interface command: `tool bad ...` is an error (exit 2), anything else succeeds.
const TOOL: &str =
    "#!/bin/sh\necho \"tool $*\"\n[ \"$1\" = bad ] && { echo usage >&2; exit 2; }\nexit 0\n";

fn task(id: &str) -> String {
    format!(
        "[[tasks]]\nid = \"{id}\"\nprompt = \"Do {id}.\"\nallow = [\"bin/tool\"]\n\n[tasks.interface]\ncommand = \"tool\"\n\n[tasks.success]\nall = [{{ calls = {{ verb = \"ok\", min = 1 }} }}]\n\n"
    )
}

fn script(steps: &[&str]) -> String {
    let mut s = String::from("answer = \"Done.\"\n");
    for step in steps {
        s.push_str(&format!("\n[[steps]]\nrun = '''{step}'''\n"));
    }
    s
}

/// Control and method on tasks a, b, c, d, 3 trials each. Both succeed on a, b and c; on c the
/// method first makes 8 distinct failing calls (8 wrong turns a trial, 24 in all). On d only
/// the method succeeds. Every gate but `no_regression:wrong_turns` (and `sample_size`: 3 pairs
/// per task are below the floor of 6) passes.
fn lab() -> Lab {
    let lab = Lab::new("tails");
    lab.write("fixture/README.md", "x\n");
    lab.write_exec("bin/tool", TOOL);
    let mut toml = String::from(
        "schema_version = 1\nid = \"tails\"\n\n[defaults]\nwall_timeout_seconds = 30\n\n[report]\nunderpowered_below = 6\n\n[promotion]\nbaseline = \"control\"\ncandidate = \"method\"\nprimary_metric = \"completion_rate\"\nminimum_absolute_improvement = 0.05\nno_regression = [\"wrong_turns\", \"wrong_turns:median\", \"calls:total\"]\n\n[[variants]]\nid = \"control\"\nagent = \"script\"\nscript = \"agents/control\"\n\n[[variants]]\nid = \"method\"\nagent = \"script\"\nscript = \"agents/method\"\n\n",
    );
    for t in ["a", "b", "c", "d"] {
        toml.push_str(&task(t));
    }
    lab.write("suite.toml", &toml);
    for t in ["a", "b", "c"] {
        lab.write(&format!("agents/control/{t}.toml"), &script(&["tool ok"]));
    }
    lab.write("agents/control/d.toml", &script(&["tool nope"]));
    for t in ["a", "b", "d"] {
        lab.write(&format!("agents/method/{t}.toml"), &script(&["tool ok"]));
    }
    let mut c: Vec<String> = (1..=8).map(|i| format!("tool bad {i} || true")).collect();
    c.push("tool ok".into());
    let c: Vec<&str> = c.iter().map(String::as_str).collect();
    lab.write("agents/method/c.toml", &script(&c));
    lab
}

fn gate<'a>(gates: &'a Value, name: &str) -> &'a Value {
    gates["gates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g.get("name").and_then(Value::as_str) == Some(name))
        .unwrap_or_else(|| panic!("no gate {name}: {gates:#}"))
}

#[test]
fn keystone_an_arm_whose_wrong_turns_sit_in_one_task_fails_no_regression() {
    let lab = lab();
    let out = lab.run(As::Me, &["--trials", "3"]);
    // The control fails task d: some graded trial did not succeed.
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    let store = lab.store();
    let s = store.to_str().unwrap();
    assert_results_show_median_mean_and_total(&lab);
    assert_show_gives_each_cells_wrong_turns(&lab, s);
    let doc = assert_gate_fails_on_the_mean(&lab, s);
    let text = assert_gate_text_names_the_statistic(&lab, s);
    assert_discordant_pairs_counted(&doc["comparison"], &text);
}

/// results.json: the method's wrong turns over all tasks: median 0, mean 2, total 24, n 12 (the
/// control's all 0); the medians field of schema version 1 kept; results.md shows the three with
/// n.
fn assert_results_show_median_mean_and_total(lab: &Lab) {
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(lab.run_dir().join("results.json")).unwrap())
            .unwrap();
    assert_eq!(results["report"]["schema_version"], 3);
    let variant = |v: &str| {
        results["report"]["variants"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["variant"] == v)
            .unwrap()
            .clone()
    };
    let method = variant("method");
    let control = variant("control");
    assert_eq!(
        method["overall"]["summaries"]["wrong_turns"],
        serde_json::json!({"median": 0.0, "mean": 2.0, "total": 24.0, "n": 12}),
        "{:#}",
        method["overall"]["summaries"]
    );
    assert_eq!(
        control["overall"]["summaries"]["wrong_turns"],
        serde_json::json!({"median": 0.0, "mean": 0.0, "total": 0.0, "n": 12})
    );
    // The medians field of schema version 1 is kept, and says the same median.
    assert_eq!(
        method["overall"]["medians"]["wrong_turns"],
        serde_json::json!({"median": 0.0, "n": 12})
    );
    // results.md shows the three with n.
    let md = std::fs::read_to_string(lab.run_dir().join("results.md")).unwrap();
    assert!(
        md.contains("## Interface metrics (median / mean / total over graded trials"),
        "{md}"
    );
    let row = md
        .lines()
        .find(|l| l.starts_with("| method | (all tasks) |") && l.contains("(n=12)"))
        .unwrap_or_else(|| panic!("{md}"));
    assert!(row.contains("| 0 / 2 / 24 (n=12) |"), "{row}");
}

/// proctor show RUN: each cell's wrong turns as median / mean / total with n.
fn assert_show_gives_each_cells_wrong_turns(lab: &Lab, s: &str) {
    let shown = lab.proctor(As::Me, &["show", "--store", s, "latest"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let c = shown
        .stdout
        .lines()
        .find(|l| l.starts_with("c ") && l.contains("method"))
        .unwrap_or_else(|| panic!("{}", shown.stdout));
    assert!(c.contains("8 / 8 / 24 (n=3)"), "{c}");
    assert!(
        shown
            .stdout
            .lines()
            .next()
            .unwrap()
            .contains("WRONG TURNS (median / mean / total)"),
        "{}",
        shown.stdout
    );
}

/// compare --gate: exit 4; the mean fails, the median (named) passes, and it is the only
/// failing gate besides the total of calls (which the 24 failing calls raise too) and the
/// sample size (3 pairs per task, below 6). Gives the JSON document.
fn assert_gate_fails_on_the_mean(lab: &Lab, s: &str) -> Value {
    let gated = lab.proctor(
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
    );
    assert_eq!(gated.code, 4, "{}\n{}", gated.stdout, gated.stderr);
    let doc: Value = serde_json::from_str(&gated.stdout).unwrap();
    let gates = &doc["gates"];
    let mean = gate(gates, "no_regression:wrong_turns");
    assert_eq!(mean["passed"], false, "{mean:#}");
    assert_eq!(mean["statistic"], "mean");
    assert_eq!(mean["numbers"][0]["value"], 0.0);
    assert_eq!(mean["numbers"][1]["value"], 2.0);
    assert_eq!(mean["numbers"][1]["n"], 12);
    let median = gate(gates, "no_regression:wrong_turns:median");
    assert_eq!(median["passed"], true, "{median:#}");
    assert_eq!(gate(gates, "no_regression:calls:total")["passed"], false);
    let failed: Vec<&str> = gates["gates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["passed"] == false)
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        failed,
        [
            "sample_size",
            "no_regression:wrong_turns",
            "no_regression:calls:total"
        ],
        "{gates:#}"
    );

    doc
}

/// The same in text: the gate line names the statistic and its numbers with n. Gives the text.
fn assert_gate_text_names_the_statistic(lab: &Lab, s: &str) -> String {
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
    let line = text
        .stdout
        .lines()
        .find(|l| l.starts_with("no_regression:wrong_turns (mean)"))
        .unwrap_or_else(|| panic!("{}", text.stdout));
    assert!(
        line.contains("FAIL") && line.contains("0 (n=12) -> 2 (n=12)"),
        "{line}"
    );

    text.stdout
}

/// Discordant pairs: on d the method succeeded and the control did not, 3 times; every other
/// pair succeeded in both; in the comparison `cmp` and in the `text` of compare.
fn assert_discordant_pairs_counted(cmp: &Value, text: &str) {
    assert_eq!(
        cmp["overall"]["discordance"],
        serde_json::json!({"a_only": 0, "b_only": 3, "both": 9, "neither": 0, "n": 12})
    );
    let task = |t: &str| {
        cmp["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["task"] == t)
            .unwrap()["comparison"]["discordance"]
            .clone()
    };
    assert_eq!(
        task("d"),
        serde_json::json!({"a_only": 0, "b_only": 3, "both": 0, "neither": 0, "n": 3})
    );
    assert_eq!(
        task("c"),
        serde_json::json!({"a_only": 0, "b_only": 0, "both": 3, "neither": 0, "n": 3})
    );
    let overall = text
        .lines()
        .skip_while(|l| !l.contains("A succeeded, B not"))
        .find(|l| l.starts_with("(all tasks)"))
        .unwrap_or_else(|| panic!("{text}"));
    let cells: Vec<&str> = overall.split_whitespace().collect();
    assert_eq!(
        cells,
        ["(all", "tasks)", "12", "0", "3", "9", "0"],
        "{overall}"
    );
}
