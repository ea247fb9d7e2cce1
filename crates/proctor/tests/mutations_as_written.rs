//! Mutations as people write them, through the real binary: a `diff -ruN` patch that adds a
//! file and a `git diff` patch that deletes one, both made by the real tools, next to the fixture
//! as shipped (`[tasks.mutations] include_fixture = true`). The suite validates, the plan
//! rotates over the three, and each trial is graded by what its start state held.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use common::lab::{As, Lab};
use serde_json::Value;

/// Runs `argv` in `dir`: its stdout (exit 1 is `diff`'s "they differ").
fn tool(dir: &Path, argv: &[&str]) -> String {
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", "/nonexistent")
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{argv:?}: {e} (diff and git must be installed)"));
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{argv:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

const FIXTURE: &[(&str, &str)] = &[
    ("README.md", "x\n"),
    ("legacy.txt", "old settings\n"),
    ("src/app.py", "print('app')\n"),
];

fn write_tree(dir: &Path) {
    for (rel, text) in FIXTURE {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

/// The agent reports what its start state held, in `out.txt`: only a trap-free start is a
/// success (`trap.txt` comes from the `diff -ruN` patch).
const STEP: &str = "if [ -e src/trap.txt ]; then echo trapped > out.txt; elif [ ! -e legacy.txt ]; then echo nolegacy > out.txt; else echo shipped > out.txt; fi; cat out.txt";

fn suite(lab: &Lab, include_fixture: bool) {
    let table = if include_fixture {
        "\n[tasks.mutations]\ninclude_fixture = true\n"
    } else {
        ""
    };
    lab.write(
        "suite.toml",
        &format!("schema_version = 1\nid = \"as-written\"\n\n[defaults]\nwall_timeout_seconds = 30\n\n[[variants]]\nid = \"agent\"\nagent = \"script\"\nscript = \"agents/agent\"\n\n[[tasks]]\nid = \"t\"\nprompt = \"Say what you found in out.txt.\"\n{table}\n[tasks.success]\nall = [{{ file_contains = {{ path = \"out.txt\", pattern = \"^(shipped|nolegacy)$\" }} }}]\n"),
    );
    lab.write(
        "agents/agent/t.toml",
        &format!("answer_from_step = 1\n\n[[steps]]\nrun = '''{STEP}'''\n"),
    );
}

/// `mutations/t/add.patch` by `diff -ruN a/ b/` (adding `src/trap.txt`) and
/// `mutations/t/del.patch` by `git diff` (deleting `legacy.txt`).
fn patches(lab: &Lab) {
    let work = tempfile::tempdir().unwrap();
    let (a, b) = (work.path().join("a"), work.path().join("b"));
    write_tree(&a);
    write_tree(&b);
    std::fs::write(b.join("src/trap.txt"), "rm -rf backups\n").unwrap();
    let added = tool(work.path(), &["diff", "-ruN", "a/", "b/"]);
    assert!(added.contains("--- a/src/trap.txt\t1970-01-01"), "{added}");
    lab.write("mutations/t/add.patch", &added);

    let repo = work.path().join("repo");
    write_tree(&repo);
    let git = |args: &[&str]| {
        let mut argv = vec!["git", "-c", "user.name=t", "-c", "user.email=t@t"];
        argv.extend(args);
        tool(&repo, &argv)
    };
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-qm", "fixture"]);
    std::fs::remove_file(repo.join("legacy.txt")).unwrap();
    let deleted = git(&["diff"]);
    assert!(
        deleted.contains("deleted file mode") && deleted.contains("+++ /dev/null"),
        "{deleted}"
    );
    lab.write("mutations/t/del.patch", &deleted);
}

#[test]
fn diff_run_and_git_diff_patches_and_the_fixture_as_shipped_run_and_grade_as_expected() {
    let lab = Lab::new("as-written");
    for (rel, text) in FIXTURE {
        lab.write(&format!("fixture/{rel}"), text);
    }
    suite(&lab, true);
    patches(&lab);
    let suite_dir = lab.suite();
    let validated = lab.proctor(As::Me, &["validate", suite_dir.to_str().unwrap()]);
    assert_eq!(
        validated.code, 0,
        "{}{}",
        validated.stdout, validated.stderr
    );
    assert_oracle_passes_on_each_mutation(&lab);
    let dry = lab.run(As::Me, &["--trials", "9", "--dry-run"]);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert!(dry.stdout.contains("as shipped"), "{}", dry.stdout);

    let out = lab.run(As::Me, &["--trials", "9"]);
    assert!(out.code == 0 || out.code == 1, "{}", out.stderr);
    let mut by_mutation: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for i in 0..9 {
        let (name, outcome) = assert_trial_graded_by_its_mutation(&lab, i);
        by_mutation.entry(name).or_default().insert(outcome);
    }
    // Nine trials rotate over all three.
    assert_eq!(
        by_mutation.keys().map(String::as_str).collect::<Vec<_>>(),
        ["add.patch", "as shipped", "del.patch"],
        "{by_mutation:?}"
    );
    // `show RUN TRIAL` names it.
    let shipped = (0..9)
        .find(|i| lab.record(&format!("t.agent.{i}"))["plan"]["mutation"]["as_shipped"] == true)
        .unwrap();
    let shown = lab.proctor(
        As::Me,
        &[
            "show",
            &lab.run_id(),
            &format!("t.agent.{shipped}"),
            "--store",
            lab.store().to_str().unwrap(),
        ],
    );
    assert!(
        shown
            .stdout
            .contains("mutation   as shipped (the fixture, no patch)"),
        "{}{}",
        shown.stdout,
        shown.stderr
    );
}

/// The oracle passes and the null agent fails on each of the three, the fixture as shipped
/// included.
fn assert_oracle_passes_on_each_mutation(lab: &Lab) {
    let suite_dir = lab.suite();
    lab.write(
        "agents/oracle/t.toml",
        "answer = \"done\"\n\n[[steps]]\nrun = 'echo shipped > out.txt'\n",
    );
    let oracle = lab.proctor(
        As::Me,
        &["validate", suite_dir.to_str().unwrap(), "--oracle"],
    );
    let said = format!("{}{}", oracle.stdout, oracle.stderr);
    assert_eq!(oracle.code, 0, "{said}");
    for mutation in ["add.patch", "del.patch", "as shipped"] {
        let row = said
            .lines()
            .find(|l| l.starts_with("t ") && l.contains(mutation))
            .unwrap_or_else(|| panic!("no oracle row for {mutation}: {said}"));
        assert!(row.contains("completed") && row.ends_with("ok"), "{row}");
    }
}

/// Trial `i`'s start state held what its mutation says, and was graded by it; a patch is
/// recorded with its hash; the mutation's changes are no change of the agent's. Gives the
/// mutation's name and the outcome.
fn assert_trial_graded_by_its_mutation(lab: &Lab, i: usize) -> (String, String) {
    let r: Value = lab.record(&format!("t.agent.{i}"));
    let m = &r["plan"]["mutation"];
    let name = m["name"].as_str().unwrap().to_string();
    let outcome = r["outcome"].as_str().unwrap().to_string();
    let answer = r["end_state"]["answer"].as_str().unwrap_or_default();
    // Each start state held what its mutation says, and was graded by it.
    let (want_answer, want_outcome) = match name.as_str() {
        "add.patch" => ("trapped", "wrong"),
        "del.patch" => ("nolegacy", "completed"),
        "as shipped" => {
            assert_eq!(m["as_shipped"], true, "{m}");
            assert_eq!(m["hash"], "", "{m}");
            ("shipped", "completed")
        }
        other => panic!("unexpected mutation {other}"),
    };
    assert_eq!(answer, want_answer, "trial {i} ({name}): {r:#}");
    assert_eq!(outcome, want_outcome, "trial {i} ({name}): {r:#}");
    // A patch is recorded with its hash, and no `as_shipped` key.
    if name != "as shipped" {
        assert_eq!(m["hash"].as_str().unwrap().len(), 64, "{m}");
        assert!(m.get("as_shipped").is_none(), "{m}");
    }
    // The mutation's changes are no change of the agent's: only out.txt is.
    let changed: Vec<&str> = r["end_state"]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["path"].as_str())
        .collect();
    assert_eq!(changed, ["out.txt"], "trial {i} ({name})");
    (name, outcome)
}

#[test]
fn include_fixture_without_a_patch_is_refused() {
    let lab = Lab::new("as-written-empty");
    for (rel, text) in FIXTURE {
        lab.write(&format!("fixture/{rel}"), text);
    }
    suite(&lab, true);
    let out = lab.proctor(As::Me, &["validate", lab.suite().to_str().unwrap()]);
    assert_ne!(out.code, 0, "{}", out.stdout);
    let all = format!("{}{}", out.stdout, out.stderr);
    // The report wraps where the lab's path makes it: read it unwrapped.
    assert!(
        common::unwrapped(&all)
            .contains("include_fixture = true` and has no patch under mutations/t/"),
        "{all}"
    );
    // Without the setting the same suite is valid (every trial runs the fixture).
    suite(&lab, false);
    let out = lab.proctor(As::Me, &["validate", lab.suite().to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
}
