//! `proctor import` at the scale of a dataset, through the real binary: a few hundred generated
//! Harbor tasks of mixed kinds in two dataset folders, beside a folder that holds no task. The
//! report is a summary by reason (a count, then one line per task with its folder), the warnings
//! are grouped by kind with counts (a skipped task's included), the folder without a task is
//! reported and skipped, compose files are read before being judged, each phase's network is
//! written as the tasks ask, and `--name` names the suite.

mod common;

use std::path::Path;

use common::lab::{As, Lab};

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// The kinds of task generated, each `(name, count)`.
const KINDS: [(&str, usize); 8] = [
    ("plain", 90),      // imported, no solution
    ("solved", 40),     // imported, with a solution, an unknown field
    ("fetching", 20),   // imported, offline verifier that runs apt-get
    ("phased", 10),     // imported, offline agent, verifier with the network
    ("yml-data", 20),   // imported: its docker-compose.yml is data, not services
    ("dockerfile", 80), // skipped: only a Dockerfile that RUNs (every tenth only FROM + WORKDIR:
    //                     imported under --no-build, no builder needed)
    ("no-tests", 30), // skipped: no tests/test.sh
    ("compose", 10),  // imported: docker-compose.yaml's db runs as a sidecar
];

/// Writes task `n` of `kind` into `root`.
fn task(root: &Path, kind: &str, n: usize) {
    let dir = root.join(format!("{kind}-{n:03}"));
    let mut toml = String::from("version = \"1.0\"\n\n[metadata]\ndifficulty = \"easy\"\n");
    if kind == "solved" {
        toml.push_str("reviewer = \"someone\"\n");
    }
    match kind {
        "fetching" => toml.push_str("\n[environment]\ndocker_image = \"ghcr.io/example/t:1\"\nallow_internet = false\n"),
        "phased" => toml.push_str("\n[environment]\ndocker_image = \"ghcr.io/example/t:1\"\nnetwork_mode = \"no-network\"\n\n[verifier]\nnetwork_mode = \"public\"\n"),
        "dockerfile" => toml.push_str("\n[environment]\ncpus = 1\n"),
        _ => toml.push_str("\n[environment]\ndocker_image = \"ghcr.io/example/t:1\"\n"),
    }
    write(&dir, "task.toml", &toml);
    write(&dir, "instruction.md", &format!("Do task {n}.\n"));
    if kind != "no-tests" {
        let fetch = if kind == "fetching" || kind == "phased" {
            "apt-get install -y curl\n"
        } else {
            ""
        };
        write(
            &dir,
            "tests/test.sh",
            &format!("#!/bin/bash\n{fetch}echo 1 > /logs/verifier/reward.txt\n"),
        );
    }
    if kind == "solved" {
        write(&dir, "solution/solve.sh", "#!/bin/bash\ntouch done\n");
    }
    match kind {
        "dockerfile" if n.is_multiple_of(10) => write(
            &dir,
            "environment/Dockerfile",
            "FROM ubuntu:24.04\nWORKDIR /srv/app\nENV MODE=test\n",
        ),
        "dockerfile" => write(
            &dir,
            "environment/Dockerfile",
            "FROM ubuntu:24.04\nRUN apt-get update\n",
        ),
        "compose" => {
            write(&dir, "environment/Dockerfile", "FROM ubuntu:24.04\n");
            write(
                &dir,
                "environment/docker-compose.yaml",
                "services:\n  main:\n    build: .\n  db:\n    image: postgres:16\n",
            );
        }
        "yml-data" => write(
            &dir,
            "environment/docker-compose.yml",
            "# a fixture the task reads\n- step: build\n- step: test\n",
        ),
        _ => {}
    }
}

#[test]
fn a_dataset_import_prints_a_summary_by_reason_and_skips_folders_without_tasks() {
    let lab = Lab::new("import-scale");
    lay_out_the_dataset(&lab);
    let out = lab.proctor(
        As::Me,
        &[
            "import",
            "harbor",
            "part-a",
            "notes",
            "part-b",
            "--out",
            "suite-out",
            "--name",
            "Generated dataset",
            // Dockerfile tasks are skipped with the commands that build them, not built.
            "--no-build",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_import_summary_by_reason(&out.stderr);
    assert_imported_suite_networks_and_environments(&lab);
    let v = lab.proctor(As::Me, &["validate", "suite-out"]);
    assert_eq!(v.code, 0, "{}", v.stderr);
}

/// Two dataset folders (half the tasks of each kind each) and one folder with no task in it:
/// 300 tasks.
fn lay_out_the_dataset(lab: &Lab) {
    for (kind, count) in KINDS {
        for n in 0..count {
            let half = if n % 2 == 0 { "part-a" } else { "part-b" };
            task(&lab.root.join(half), kind, n);
        }
    }
    write(&lab.root.join("notes"), "README.md", "not a task\n");
    std::fs::create_dir_all(lab.root.join("part-a/assets")).unwrap();
    let total: usize = KINDS.iter().map(|(_, c)| c).sum();
    assert_eq!(total, 300);
}

/// The import's summary (`e`, its standard error): skipped tasks by reason with one line each,
/// build commands once, folders without a task, warnings by kind with counts, in a length a
/// person reads.
fn assert_import_summary_by_reason(e: &str) {
    let has = |line: &str| e.lines().any(|l| l == line);
    assert!(e.starts_with("imported 198 task(s): "), "{e}");
    assert!(has("skipped 102 task(s), by reason:"), "{e}");
    assert!(has("  72 task(s): its image is built from environment/Dockerfile, and task.toml names no [environment] docker_image, and the import was told not to build images (--no-build); it never guesses one."), "{e}");
    assert!(
        has("  30 task(s): it has no tests/test.sh, so nothing could check its end state"),
        "{e}"
    );
    // One line per skipped task, with its folder.
    let task_lines = e
        .lines()
        .filter(|l| l.starts_with("    ") && l.contains("  part-"))
        .count();
    assert_eq!(task_lines, 102, "{e}");
    assert!(has("    dockerfile-001  part-b/dockerfile-001"), "{e}");
    assert!(has("    no-tests-001  part-b/no-tests-001"), "{e}");
    // The build commands are shown once for the group, not once per task.
    assert_eq!(e.matches("docker build -t").count(), 1, "{e}");
    // Folders without a task: reported, skipped, the rest imported.
    assert!(has("skipped 2 folder(s) that hold no task:"), "{e}");
    assert!(
        has("  notes: not a Harbor task folder (no task.toml), and no folder in it is one"),
        "{e}"
    );
    assert!(
        has("  part-a/assets: not a Harbor task folder (no task.toml)"),
        "{e}"
    );
    // Warnings by kind, with counts; the skipped tasks' own included (no solution).
    assert!(has("  260 task(s): no solution/solve.sh: its oracle does nothing, so `proctor validate --oracle` fails for it"), "{e}");
    assert!(
        has("  40 task(s): task.toml: unknown field `metadata.reviewer`, not imported"),
        "{e}"
    );
    assert!(has("  20 task(s): tests/ download while verifying (apt-get install), but the verifier phase has no network (check_network = \"none\"), so the check fails unless the image already holds what they fetch"), "{e}");
    assert!(
        !e.contains("host's network"),
        "the internet is the trial's own: {e}"
    );
    // A summary a person can read: about one line per skipped task, not pages of each.
    assert!(e.lines().count() < 180, "{} lines:\n{e}", e.lines().count());
}

/// The suite: named, each phase's network as asked, the .yml tasks imported, a Dockerfile of
/// FROM and WORKDIR/ENV imported as its base image, a compose service beside `main` as the
/// task's sidecar.
fn assert_imported_suite_networks_and_environments(lab: &Lab) {
    let text = std::fs::read_to_string(lab.root.join("suite-out/suite.toml")).unwrap();
    let suite: toml::Table = toml::from_str(&text).unwrap();
    assert_eq!(suite["name"].as_str(), Some("Generated dataset"));
    let tasks = suite["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 198);
    let of = |id: &str| tasks.iter().find(|t| t["id"].as_str() == Some(id)).unwrap();
    let phased = of("phased-000");
    assert_eq!(phased["network"].as_str(), Some("none"));
    assert_eq!(phased["check_network"].as_str(), Some("internet"));
    let fetching = of("fetching-000");
    assert_eq!(fetching["network"].as_str(), Some("none"));
    assert_eq!(fetching["check_network"].as_str(), Some("none"));
    // Only FROM + WORKDIR/ENV: imported under --no-build as its base image, set up as it says.
    let based = of("dockerfile-010");
    assert_eq!(based["environment"]["image"].as_str(), Some("ubuntu:24.04"));
    assert_eq!(based["environment"]["workdir"].as_str(), Some("/srv/app"));
    assert_eq!(based["environment"]["env"]["MODE"].as_str(), Some("test"));
    // Several compose services: the one beside `main` is the task's sidecar.
    let compose = of("compose-000");
    assert_eq!(compose["services"][0]["name"].as_str(), Some("db"));
    assert_eq!(
        compose["services"][0]["image"].as_str(),
        Some("postgres:16")
    );
    assert_eq!(compose["network"].as_str(), Some("internet"));
    let plain = of("plain-000");
    assert_eq!(plain["network"].as_str(), Some("internet"));
    assert_eq!(plain["check_network"].as_str(), Some("internet"));
    assert!(tasks
        .iter()
        .any(|t| t["id"].as_str() == Some("yml-data-019")));
    assert!(text.contains("# network: agent: [environment] network_mode = \"no-network\"; verifier: [verifier] network_mode = \"public\"\n"), "{text}");
}

/// Terminal-Bench gives every task's container Docker's network: the import gives both phases
/// the host's network, and says so once per dataset, as a group.
#[test]
fn terminal_bench_tasks_get_the_network_terminal_bench_gives_with_a_word() {
    let lab = Lab::new("import-tb-network");
    for n in 0..12 {
        let dir = lab.root.join("tasks").join(format!("t-{n:02}"));
        write(&dir, "task.yaml", "instruction: Do it.\n");
        let compose = if n < 4 {
            "services:\n  client:\n    image: ghcr.io/example/t:1\n    network_mode: none\n"
        } else {
            "services:\n  client:\n    image: ghcr.io/example/t:1\n"
        };
        write(&dir, "docker-compose.yaml", compose);
        write(
            &dir,
            "run-tests.sh",
            "#!/bin/bash\npip install pytest\npytest -rA\n",
        );
        write(&dir, "solution.sh", "#!/bin/bash\ntouch done\n");
    }
    let out = lab.proctor(
        As::Me,
        &["import", "terminal-bench", "tasks", "--out", "tb"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let e = &out.stderr;
    assert!(!e.contains("network = \"host\""), "{e}");
    assert!(e.lines().any(|l| l.starts_with("  4 task(s): run-tests.sh or tests/ download while verifying (pip install), but the verifier phase has no network")), "{e}");
    let suite: toml::Table =
        toml::from_str(&std::fs::read_to_string(lab.root.join("tb/suite.toml")).unwrap()).unwrap();
    let tasks = suite["tasks"].as_array().unwrap();
    let nets: Vec<(&str, &str)> = tasks
        .iter()
        .map(|t| {
            (
                t["network"].as_str().unwrap(),
                t["check_network"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        nets.iter()
            .filter(|n| **n == ("internet", "internet"))
            .count(),
        8
    );
    assert_eq!(nets.iter().filter(|n| **n == ("none", "none")).count(), 4);
}

/// `--description KEY` through the binary: Terminal-Bench tasks shaped like livecodebenchpro's
/// (`instruction: base` beside `descriptions`) are prompted with the `base` text, or with the
/// entry the flag names; a task without that entry is skipped with its keys, counted; Harbor
/// refuses the flag.
#[test]
fn description_chooses_the_terminal_bench_prompt_and_harbor_refuses_it() {
    let lab = Lab::new("import-description");
    for n in 0..3 {
        let dir = lab.root.join("tasks").join(format!("lcb-{n}"));
        let problem = if n < 2 {
            format!("  - key: problem\n    description: Solve problem {n}.\n")
        } else {
            String::new()
        };
        write(
            &dir,
            "task.yaml",
            &format!("descriptions:\n  - key: base\n    description: Write /app/main.cpp.\n{problem}instruction: base\nauthor: LCB Team\n"),
        );
        write(
            &dir,
            "docker-compose.yaml",
            "services:\n  client:\n    image: ghcr.io/example/t:1\n    network_mode: none\n",
        );
        write(&dir, "run-tests.sh", "#!/bin/bash\npytest -rA\n");
        write(&dir, "solution.sh", "#!/bin/bash\ntouch main.cpp\n");
    }
    let prompts = |suite: &str| -> Vec<String> {
        let text = std::fs::read_to_string(lab.root.join(suite).join("suite.toml")).unwrap();
        let suite: toml::Table = toml::from_str(&text).unwrap();
        suite["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["prompt"].as_str().unwrap().trim().to_string())
            .collect()
    };
    let base = lab.proctor(
        As::Me,
        &["import", "terminal-bench", "tasks", "--out", "base"],
    );
    assert_eq!(base.code, 0, "{}", base.stderr);
    assert_eq!(prompts("base"), ["Write /app/main.cpp."; 3]);
    assert!(
        base.stderr.lines().any(|l| l == "  3 task(s): task.yaml: instruction = \"base\" names the `descriptions` entry `base`: its text is the prompt (Terminal-Bench itself would send the word `base`)"),
        "{}",
        base.stderr
    );
    let chosen = lab.proctor(
        As::Me,
        &[
            "import",
            "terminal-bench",
            "tasks",
            "--out",
            "problem",
            "--description",
            "problem",
        ],
    );
    assert_eq!(chosen.code, 0, "{}", chosen.stderr);
    assert_eq!(prompts("problem"), ["Solve problem 0.", "Solve problem 1."]);
    assert!(
        chosen.stderr.contains("  1 task(s): task.yaml has no `descriptions` entry `problem` (--description problem); its entries: base\n    lcb-2  tasks/lcb-2\n"),
        "{}",
        chosen.stderr
    );
    let harbor = lab.proctor(
        As::Me,
        &[
            "import",
            "harbor",
            "tasks",
            "--out",
            "h",
            "--description",
            "base",
        ],
    );
    assert_eq!(harbor.code, 2, "{}", harbor.stderr);
    assert!(
        harbor
            .stderr
            .contains("--description chooses among a Terminal-Bench task's `descriptions`"),
        "{}",
        harbor.stderr
    );
    assert!(!lab.root.join("h").exists());
}
