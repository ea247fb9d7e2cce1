//! Importing older Terminal-Bench tasks (task.yaml, docker-compose.yaml, run-tests.sh,
//! solution.sh), written like the tasks of Terminal-Bench's own repository.

mod support;

use std::path::{Path, PathBuf};

use proctor_import::{import_terminal_bench, ImportOptions};
use support::*;

/// A task whose compose service runs a prebuilt image, with a field Terminal-Bench does not
/// define (`reviewer`).
fn prebuilt(root: &Path) -> PathBuf {
    let dir = root.join("answer-42");
    write(
        &dir,
        "task.yaml",
        r#"# Terminal-Bench Canary String, DO NOT REMOVE
instruction: |-
  Write the answer, 42, to output.txt in the current directory.
author_name: Grace Hopper
author_email: grace@example.com
difficulty: easy
category: software-engineering
tags:
  - trivial
parser_name: pytest
max_agent_timeout_sec: 180.0
max_test_timeout_sec: 30.0
run_tests_in_same_shell: false
disable_asciinema: false
estimated_duration_sec:
expert_time_estimate_min: 1
junior_time_estimate_min: 5
reviewer: someone
"#,
    );
    write(
        &dir,
        "docker-compose.yaml",
        r#"services:
  client:
    image: ghcr.io/example/answer-42:20250620
    container_name: ${T_BENCH_TASK_DOCKER_CLIENT_CONTAINER_NAME}
    command: [ "sh", "-c", "sleep infinity" ]
    environment:
      - TEST_DIR=${T_BENCH_TEST_DIR}
      - ANSWER_FORMAT=plain
    volumes:
      - ${T_BENCH_TASK_LOGS_PATH}:${T_BENCH_CONTAINER_LOGS_PATH}
"#,
    );
    write(&dir, "Dockerfile", "FROM python:3.13-slim\nWORKDIR /app\n");
    write_exec(
        &dir,
        "run-tests.sh",
        r#"#!/bin/bash
# Terminal-Bench copies this and tests/ to $TEST_DIR (/tests) and runs it in the task's
# working directory; its pytest parser reads the short test summary (pytest -rA).
if [ -f /tests/test_outputs.py ] && [ -f "$TEST_DIR/test_outputs.py" ] && [ "$(cat output.txt 2>/dev/null)" = "42" ]; then
  echo "=========================== short test summary info ============================"
  echo "PASSED tests/test_outputs.py::test_answer"
  echo "============================== 1 passed in 0.01s ==============================="
else
  echo "=========================== short test summary info ============================"
  echo "FAILED tests/test_outputs.py::test_answer - AssertionError"
  echo "============================== 1 failed in 0.01s ==============================="
fi
exit 0
"#,
    );
    write(
        &dir,
        "tests/test_outputs.py",
        "def test_answer():\n    assert open('output.txt').read().strip() == '42'\n",
    );
    write_exec(&dir, "solution.sh", "#!/bin/bash\necho 42 > output.txt\n");
    dir
}

/// A task built by the harness from its Dockerfile, as most Terminal-Bench tasks are.
fn built(root: &Path) -> PathBuf {
    let dir = root.join("build-it");
    write(
        &dir,
        "task.yaml",
        "instruction: Fix the build.\ndifficulty: medium\n",
    );
    write(
        &dir,
        "docker-compose.yaml",
        r#"services:
  client:
    build:
      dockerfile: Dockerfile
    image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}
    container_name: ${T_BENCH_TASK_DOCKER_CLIENT_CONTAINER_NAME}
    command: [ "sh", "-c", "sleep infinity" ]
"#,
    );
    write(&dir, "Dockerfile", "FROM ubuntu:24.04\n");
    write_exec(&dir, "run-tests.sh", "#!/bin/bash\nexit 0\n");
    dir
}

/// A task with an interactive-terminal solution and a parser proctor does not have.
fn keystrokes(root: &Path) -> PathBuf {
    let dir = root.join("vim-edit");
    write(
        &dir,
        "task.yaml",
        "descriptions:\n  - key: base\n    description: Edit notes.txt with vim.\nparser_name: swebench\nmax_agent_timeout_sec: 90\n",
    );
    write(
        &dir,
        "docker-compose.yaml",
        "services:\n  client:\n    image: ghcr.io/example/vim:1\n    working_dir: /work\n    network_mode: none\n",
    );
    write_exec(
        &dir,
        "run-tests.sh",
        "#!/bin/bash\npip install pytest\ngrep -q edited notes.txt\n",
    );
    write(
        &dir,
        "solution.yaml",
        "- command: vim notes.txt\n  min_timeout_sec: 0.1\n  block: false\n  append_enter: true\n",
    );
    dir
}

#[test]
fn imports_terminal_bench_tasks_into_a_suite_that_proctor_validates() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let tasks = tmp.path().join("tasks");
    prebuilt(&tasks);
    built(&tasks);
    keystrokes(&tasks);
    let out = tmp.path().join("tb1");
    let report = import_terminal_bench(&[tasks], &out, &ImportOptions::default()).expect("import");

    assert_eq!(report.imported, vec!["answer-42", "vim-edit"]);
    assert_eq!(report.skipped.len(), 1);
    assert_eq!(report.skipped[0].id, "build-it");
    let reason = &report.skipped[0].reason;
    assert!(reason.contains("docker-compose.yaml builds it"), "{reason}");
    assert!(
        reason.contains("docker build -t proctor-import-build-it ."),
        "{reason}"
    );
    let warnings = warning_lines(&report).join("\n");
    for expected in [
        "answer-42: task.yaml: unknown field `reviewer`, not imported",
        "vim-edit: task.yaml: parser_name = \"swebench\"",
        "vim-edit: solution.yaml holds keystrokes",
        // The compose file takes the network away, and the tests fetch.
        "vim-edit: run-tests.sh or tests/ download while verifying (pip install), but the verifier phase has no network (check_network = \"none\")",
        // Terminal-Bench's own default: Docker's network, to the agent and the tests, said.
        "answer-42: network = \"host\", check_network = \"host\": Terminal-Bench runs the task's container on Docker's default network (the internet), for the agent and the tests alike",
    ] {
        assert!(
            warnings.contains(expected),
            "missing {expected:?} in:\n{warnings}"
        );
    }
    assert!(!warnings.contains("answer-42: task.yaml: unknown field `instruction`"));

    let suite: toml::Table =
        toml::from_str(&std::fs::read_to_string(out.join("suite.toml")).expect("read"))
            .expect("parse");
    let t = &suite["tasks"][0];
    assert_eq!(
        t["prompt"].as_str(),
        Some("Write the answer, 42, to output.txt in the current directory.")
    );
    assert_eq!(t["difficulty"].as_str(), Some("easy"));
    assert_eq!(t["wall_timeout_seconds"].as_integer(), Some(180));
    assert_eq!(t["validation_timeout_seconds"].as_integer(), Some(30));
    assert_eq!(t["network"].as_str(), Some("host"));
    assert_eq!(t["check_network"].as_str(), Some("host"));
    assert_eq!(
        t["environment"]["image"].as_str(),
        Some("ghcr.io/example/answer-42:20250620")
    );
    assert_eq!(
        t["environment"]["env"]["ANSWER_FORMAT"].as_str(),
        Some("plain")
    );
    assert!(t["environment"]["env"].get("TEST_DIR").is_none());
    let v = &suite["tasks"][1];
    assert_eq!(v["prompt"].as_str(), Some("Edit notes.txt with vim."));
    assert_eq!(v["wall_timeout_seconds"].as_integer(), Some(90));
    assert_eq!(
        v["validation_timeout_seconds"].as_integer(),
        Some(60),
        "Terminal-Bench's default"
    );
    assert_eq!(v["environment"]["workdir"].as_str(), Some("/work"));
    assert_eq!(v["network"].as_str(), Some("none"));
    assert_eq!(v["check_network"].as_str(), Some("none"));

    assert!(out.join("holdout/answer-42/run-tests.sh").is_file());
    assert!(out.join("holdout/answer-42/test_outputs.py").is_file());
    assert!(oracle_steps(&out, "vim-edit").is_empty());
    assert_valid(&out);
}

#[test]
fn the_pytest_summary_decides_and_the_oracle_passes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let task = prebuilt(tmp.path());
    let out = tmp.path().join("suite");
    import_terminal_bench(&[task], &out, &ImportOptions::default()).expect("import");

    let ws = check_workspace(&out, "answer-42", &[]);
    let run = sh(ws.path(), "bash proctor-verify.sh");
    assert_eq!(
        run.status.code(),
        Some(1),
        "run-tests.sh exits 0, the summary says FAILED: {run:?}"
    );

    let agent_ws = tempfile::tempdir().expect("tempdir");
    run_oracle(&out, "answer-42", agent_ws.path());
    let answer = std::fs::read_to_string(agent_ws.path().join("output.txt")).expect("output");
    let ws = check_workspace(&out, "answer-42", &[("output.txt", &answer)]);
    let run = sh(ws.path(), "bash proctor-verify.sh");
    assert!(run.status.success(), "{run:?}");
}

#[test]
fn a_dockerfile_that_copies_the_tests_and_solution_into_the_image_is_reported() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let tasks = tmp.path().join("tasks");
    let dir = prebuilt(&tasks);
    write(
        &dir,
        "Dockerfile",
        "FROM python:3.13-slim\nWORKDIR /app\n# COPY tests /commented-out\nCOPY requirements.txt \\\n     ./tests/ /app/\n",
    );
    write(&dir, "requirements.txt", "pytest\n");
    let out = tmp.path().join("tb1");
    let report = import_terminal_bench(&[tasks], &out, &ImportOptions::default()).expect("import");
    assert_eq!(report.imported, vec!["answer-42"]);
    let lines = warning_lines(&report);
    let copies: Vec<&String> = lines
        .iter()
        .filter(|w| w.contains("into the image"))
        .collect();
    assert_eq!(
        copies,
        ["answer-42: Dockerfile line 4 (`COPY requirements.txt ./tests/ /app/`) copies tests/test_outputs.py into the image: the agent can read the task's tests or solution in its environment; build the image without them (the verifier is given tests/ by itself)"],
        "{lines:#?}"
    );

    // Copying the whole build context takes in run-tests.sh and solution.sh too.
    let tasks = tmp.path().join("tasks2");
    let dir = prebuilt(&tasks);
    write(&dir, "Dockerfile", "FROM python:3.13-slim\nCOPY . /app\n");
    let report =
        import_terminal_bench(&[tasks], &tmp.path().join("tb2"), &ImportOptions::default())
            .expect("import");
    let warnings = warning_lines(&report).join("\n");
    assert!(
        warnings.contains("answer-42: Dockerfile line 2 (`COPY . /app`) copies tests/test_outputs.py, run-tests.sh, solution.sh into the image"),
        "{warnings}"
    );
}

#[test]
fn a_task_whose_dockerfile_copies_nothing_of_its_tests_raises_no_leak_warning() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let tasks = tmp.path().join("tasks");
    prebuilt(&tasks);
    let report = import_terminal_bench(&[tasks], &tmp.path().join("tb"), &ImportOptions::default())
        .expect("import");
    let warnings = warning_lines(&report).join("\n");
    assert!(!warnings.contains("into the image"), "{warnings}");
    assert!(!warnings.contains("build context"), "{warnings}");
}
