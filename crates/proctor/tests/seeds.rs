//! Reproducible simulated agents through the real binary: every agent gets its trial's index
//! and seed (`PROCTOR_TRIAL_INDEX`, `PROCTOR_TRIAL_SEED`), recorded in `trial.json`; a scripted
//! agent that acts on the seed gives the same trials on a rerun; a model script's weighted
//! alternatives are chosen by the seed, the same ones on a rerun.
//!
//! The model-script test drives the real Claude Code CLI (installed by `agents/install.sh`).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use common::lab::{As, Lab};
use serde_json::Value;

/// Every trial of the run in `store` (the only one): id → record.
fn records(store: &Path) -> BTreeMap<String, Value> {
    let runs: Vec<PathBuf> = std::fs::read_dir(store.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let mut out = BTreeMap::new();
    for t in std::fs::read_dir(runs[0].join("trials")).unwrap() {
        let t = t.unwrap().path();
        let text = std::fs::read_to_string(t.join("trial.json")).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        let id = t.file_name().unwrap().to_string_lossy().into_owned();
        out.insert(id, v["record"].clone());
    }
    out
}

/// `proctor run` of the lab's suite into a fresh store `name` under the lab.
fn run_into(lab: &Lab, name: &str, trials: &str) -> (common::lab::RunOut, BTreeMap<String, Value>) {
    let store = lab.suite().parent().unwrap().join(name);
    let suite = lab.suite();
    let out = lab.proctor(
        As::Me,
        &[
            "run",
            suite.to_str().unwrap(),
            "--store",
            store.to_str().unwrap(),
            "--trials",
            trials,
        ],
    );
    assert!(
        out.code == 0 || out.code == 1,
        "exit {}: {}",
        out.code,
        out.stderr
    );
    (out, records(&store))
}

/// The seed's share: 7 seeds in 10 make the scripted agent do the task.
const SEEDED_STEP: &str = r#"echo "$PROCTOR_TRIAL_INDEX $PROCTOR_TRIAL_SEED"; if [ $((PROCTOR_TRIAL_SEED % 10)) -lt 7 ]; then echo done > out.txt; fi"#;

#[test]
fn a_seeded_scripted_agent_gives_the_same_trials_twice_and_each_trial_its_own_seed() {
    let lab = Lab::new("seeded-script");
    lab.write("fixture/README.md", "x\n");
    lab.write(
        "suite.toml",
        "schema_version = 1\nid = \"seeds\"\n\n[defaults]\nwall_timeout_seconds = 30\n\n[[variants]]\nid = \"a\"\nagent = \"script\"\nscript = \"agents/agent\"\n\n[[variants]]\nid = \"b\"\nagent = \"script\"\nscript = \"agents/agent\"\n\n[[tasks]]\nid = \"t\"\nprompt = \"Write out.txt.\"\n\n[tasks.success]\nall = [{ file_added = \"out.txt\" }]\n",
    );
    lab.write(
        "agents/agent/t.toml",
        &format!("answer_from_step = 1\n\n[[steps]]\nrun = '''{SEEDED_STEP}'''\n"),
    );
    let (_, first) = run_into(&lab, "store1", "12");
    let (_, second) = run_into(&lab, "store2", "12");
    assert_eq!(first.len(), 24);
    let outcome = |r: &Value| r["outcome"].as_str().unwrap().to_string();
    let mut seeds = BTreeSet::new();
    let mut outcomes = BTreeSet::new();
    for (id, r) in &first {
        let again = &second[id];
        // The same trial, the same seed and the same outcome on the rerun.
        assert_eq!(r["plan"]["seed"], again["plan"]["seed"], "{id}");
        assert_eq!(outcome(r), outcome(again), "{id}");
        let seed = r["plan"]["seed"].as_u64().expect("a recorded seed");
        let index = r["plan"]["index"].as_u64().unwrap();
        // The agent saw the recorded index and seed.
        let answer = r["end_state"]["answer"].as_str().unwrap_or_default();
        assert_eq!(answer, format!("{index} {seed}"), "{id}: {r:#}");
        // And acted on it: the outcome is the one its seed says.
        let want = if seed % 10 < 7 { "completed" } else { "wrong" };
        assert_eq!(outcome(r), want, "{id}: seed {seed}");
        assert!(
            seeds.insert(seed),
            "{id}: seed {seed} repeats another trial's"
        );
        outcomes.insert(outcome(r));
    }
    // The seed varies the outcome: both kinds appear among the 24 trials.
    assert_eq!(
        outcomes,
        BTreeSet::from(["completed".to_string(), "wrong".to_string()])
    );
}

#[test]
fn a_model_script_with_weights_9_to_1_chooses_both_and_the_same_ones_on_a_rerun() {
    let agents = std::env::var_os("PROCTOR_AGENTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/proctor/agents")
        });
    let claude = agents.join("bin/claude");
    assert!(
        claude.exists(),
        "{} is not installed: run agents/install.sh (this test drives the real CLI)",
        claude.display()
    );
    let lab = Lab::new("seeded-model");
    lab.write("fixture/README.md", "x\n");
    lab.write(
        "suite.toml",
        "schema_version = 1\nid = \"weights\"\n\n[defaults]\nwall_timeout_seconds = 120\n\n[[variants]]\nid = \"claude\"\nagent = \"claude-code\"\nmodel_script = \"agents/model.toml\"\n\n[[tasks]]\nid = \"t\"\nprompt = \"Write careful.txt.\"\n\n[tasks.success]\nall = [{ file_added = \"careful.txt\" }]\n",
    );
    lab.write(
        "agents/model.toml",
        "[[alternatives]]\nname = \"careful\"\nweight = 9\n[[alternatives.turns]]\ncalls = [{ role = \"shell\", command = \"echo ok > careful.txt\" }]\nusage = { input = 10, output = 2 }\n[[alternatives.turns]]\ntext = \"done\"\nusage = { input = 10, output = 2 }\n\n[[alternatives]]\nname = \"careless\"\nweight = 1\n[[alternatives.turns]]\ncalls = [{ role = \"shell\", command = \"echo oops > careless.txt\" }]\nusage = { input = 10, output = 2 }\n[[alternatives.turns]]\ntext = \"done\"\nusage = { input = 10, output = 2 }\n",
    );
    let validated = lab.proctor(As::Me, &["validate", lab.suite().to_str().unwrap()]);
    assert_eq!(
        validated.code, 0,
        "{}{}",
        validated.stdout, validated.stderr
    );
    let (_, first) = run_into(&lab, "store1", "40");
    let (_, second) = run_into(&lab, "store2", "40");
    assert_eq!(first.len(), 40);
    let mut chosen: BTreeMap<&str, u32> = BTreeMap::new();
    for (id, r) in &first {
        let seed = r["plan"]["seed"].as_u64().expect("a recorded seed");
        let outcome = r["outcome"].as_str().unwrap();
        // Alternative 1 for seed % 10 in 0..9, alternative 2 for 9: the outcome follows.
        let (name, want) = if seed % 10 < 9 {
            ("careful", "completed")
        } else {
            ("careless", "wrong")
        };
        assert_eq!(outcome, want, "{id}: seed {seed}: {r:#}");
        *chosen.entry(name).or_default() += 1;
        assert_eq!(second[id]["plan"]["seed"], r["plan"]["seed"], "{id}");
        assert_eq!(second[id]["outcome"], r["outcome"], "{id}");
    }
    assert!(
        chosen.get("careful").copied().unwrap_or(0) > 0
            && chosen.get("careless").copied().unwrap_or(0) > 0,
        "both alternatives must be chosen over 40 trials: {chosen:?}"
    );
}

#[test]
fn a_model_script_alternative_without_a_usable_weight_is_located_by_validate() {
    let lab = Lab::new("seeded-bad-weight");
    lab.write("fixture/README.md", "x\n");
    lab.write(
        "suite.toml",
        "schema_version = 1\nid = \"weights\"\n\n[[variants]]\nid = \"claude\"\nagent = \"claude-code\"\nmodel_script = \"agents/model.toml\"\n\n[[tasks]]\nid = \"t\"\nprompt = \"p\"\n\n[tasks.success]\nall = [{ files_unchanged = true }]\n",
    );
    lab.write(
        "agents/model.toml",
        "[[alternatives]]\nweight = 1\n[[alternatives.turns]]\ntext = \"a\"\n\n[[alternatives]]\nweight = 0\n[[alternatives.turns]]\ntext = \"b\"\n",
    );
    let out = lab.proctor(As::Me, &["validate", lab.suite().to_str().unwrap()]);
    let said = format!("{}{}", out.stdout, out.stderr);
    assert_ne!(out.code, 0, "{said}");
    // The report wraps where the lab's path makes it: read it unwrapped.
    let flat = common::unwrapped(&said);
    assert!(
        flat.contains("alternative 2 of the model script: `weight = 0`"),
        "{said}"
    );
    // Pointed at the second `[[alternatives]]` header, line 6.
    assert!(flat.contains("model.toml:6:"), "{said}");
    // An unknown key in an alternative is an error with its line.
    lab.write(
        "agents/model.toml",
        "[[alternatives]]\nweight = 1\nwieght = 2\n[[alternatives.turns]]\ntext = \"a\"\n",
    );
    let out = lab.proctor(As::Me, &["validate", lab.suite().to_str().unwrap()]);
    let said = format!("{}{}", out.stdout, out.stderr);
    assert_ne!(out.code, 0, "{said}");
    assert!(
        said.contains("wieght") && said.contains("model.toml:3:"),
        "{said}"
    );
}
