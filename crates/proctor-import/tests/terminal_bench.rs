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
    // A RUN step: a Dockerfile of FROM alone imports as its base image without a build.
    write(
        &dir,
        "Dockerfile",
        "FROM ubuntu:24.04\nRUN apt-get update\n",
    );
    write_exec(&dir, "run-tests.sh", "#!/bin/bash\nexit 0\n");
    dir
}

/// A task with an interactive-terminal solution, graded by Terminal-Bench's swebench parser.
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
        "vim-edit: solution.yaml holds keystrokes",
        // The compose file takes the network away, and the tests fetch.
        "vim-edit: run-tests.sh or tests/ download while verifying (pip install), but the verifier phase has no network (check_network = \"none\")",
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
    assert_eq!(
        t["network"].as_str(),
        Some("internet"),
        "Terminal-Bench's default network: the internet"
    );
    assert_eq!(t["check_network"].as_str(), Some("internet"));
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

/// A Terminal-Bench task graded by `parser`, whose run-tests.sh prints `output` (a shell
/// snippet that may look at the workspace) and exits 0 either way, as the public datasets'
/// run-tests.sh do.
fn graded_by(root: &Path, id: &str, parser: &str, output: &str) -> PathBuf {
    let dir = root.join(id);
    write(
        &dir,
        "task.yaml",
        &format!("instruction: Fix it.\ndifficulty: hard\nparser_name: {parser}\n"),
    );
    write(
        &dir,
        "docker-compose.yaml",
        "services:\n  client:\n    image: ghcr.io/example/fix:1\n",
    );
    write_exec(
        &dir,
        "run-tests.sh",
        &format!("#!/bin/bash\n{output}\nexit 0\n"),
    );
    write_exec(&dir, "solution.sh", "#!/bin/bash\necho fixed > state.txt\n");
    dir
}

/// The check's exit status over a workspace whose `state.txt` holds `state`.
fn verdict_with(out: &Path, id: &str, state: &str) -> Option<i32> {
    let ws = check_workspace(out, id, &[("state.txt", state)]);
    let run = sh(ws.path(), "bash proctor-verify.sh");
    run.status.code()
}

/// Terminal-Bench's swebench parser: the block between its markers must read PASSED; the task's
/// run-tests.sh exits 0 either way, so its exit status decides nothing.
#[test]
fn the_swebench_parser_decides_and_the_exit_status_does_not() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let tasks = tmp.path().join("tasks");
    graded_by(
        &tasks,
        "swe",
        "swebench",
        r#"echo "+ pytest -rA tests/test_x.py"
echo "SWEBench results starts here"
if grep -q fixed state.txt; then echo PASSED; else echo FAILED; fi
echo "SWEBench results ends here""#,
    );
    // The grader could not run (its markers are missing): nothing is resolved.
    graded_by(
        &tasks,
        "swe-broken",
        "swebench",
        "echo 'uv: command not found'",
    );
    // Markers echoed earlier in the output: the block runs from the first start to the last end.
    graded_by(
        &tasks,
        "swe-twice",
        "swebench",
        r#"echo "SWEBench results starts here"
echo "  PASSED  "
echo "SWEBench results ends here"
echo "SWEBench results starts here"
echo "SWEBench results ends here""#,
    );
    let out = tmp.path().join("suite");
    let report = import_terminal_bench(&[tasks], &out, &ImportOptions::default()).expect("import");
    assert_eq!(report.imported, vec!["swe", "swe-broken", "swe-twice"]);
    let lines = warning_lines(&report).join("\n");
    assert!(!lines.contains("parser"), "{lines}");
    assert_eq!(verdict_with(&out, "swe", "fixed\n"), Some(0));
    assert_eq!(verdict_with(&out, "swe", "broken\n"), Some(1));
    assert_eq!(verdict_with(&out, "swe-broken", "fixed\n"), Some(1));
    assert_eq!(
        verdict_with(&out, "swe-twice", "fixed\n"),
        Some(1),
        "the block spans both pairs of markers, so it is not exactly PASSED"
    );
    let script = std::fs::read_to_string(out.join("holdout/swe/proctor-verify.sh")).expect("read");
    assert!(script.contains("swebench parser decides"), "{script}");
}

/// Terminal-Bench's pytest parser, line for line: SKIPPED and XFAIL pass, XPASS and ERROR fail,
/// lines it cannot read are ignored, a summary with no result resolves, no summary does not.
#[test]
fn the_pytest_parser_reads_the_summary_as_terminal_bench_does() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let tasks = tmp.path().join("tasks");
    let summary = |lines: &str| {
        format!(
            "echo '============================= test session starts =============================='\necho 'PASSED but this is not the summary'\necho '=========================== short test summary info ============================'\nprintf '%s\\n' {lines}\necho '========================= 2 passed in 0.02s ========================='"
        )
    };
    for (id, lines) in [
        ("passes", "'PASSED tests/test_a.py::test_one' 'SKIPPED [1] tests/test_a.py:9: no gpu' 'XFAIL tests/test_a.py::test_two - reason'"),
        ("fails", "'PASSED tests/test_a.py::test_one' 'FAILED tests/test_a.py::test_two - AssertionError: 1 - 2'"),
        ("xpass", "'PASSED tests/test_a.py::test_one' 'XPASS tests/test_a.py::test_two'"),
        ("collection-error", "'ERROR tests/test_a.py'"),
        ("empty-summary", "'nothing a parser reads here'"),
    ] {
        graded_by(&tasks, id, "pytest", &summary(lines));
    }
    graded_by(&tasks, "no-summary", "pytest", "echo '1 passed'");
    let out = tmp.path().join("suite");
    import_terminal_bench(&[tasks], &out, &ImportOptions::default()).expect("import");
    for (id, resolved) in [
        ("passes", true),
        ("fails", false),
        ("xpass", false),
        ("collection-error", false),
        ("empty-summary", true),
        ("no-summary", false),
    ] {
        let code = verdict_with(&out, id, "");
        assert_eq!(code, Some(if resolved { 0 } else { 1 }), "{id}");
    }
}

/// Terminal-Bench's mlebench parser: the block must read `ALL TESTS PASSED`.
#[test]
fn the_mlebench_parser_decides() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let tasks = tmp.path().join("tasks");
    graded_by(
        &tasks,
        "mle",
        "mlebench",
        r#"echo "MLEBench results starts here"
if grep -q fixed state.txt; then echo "ALL TESTS PASSED"; else echo "SOME TESTS FAILED"; fi
echo "MLEBench results ends here""#,
    );
    let out = tmp.path().join("suite");
    import_terminal_bench(&[tasks], &out, &ImportOptions::default()).expect("import");
    assert_eq!(verdict_with(&out, "mle", "fixed\n"), Some(0));
    assert_eq!(verdict_with(&out, "mle", "no\n"), Some(1));
}

/// A `parser_name` that is no Terminal-Bench parser: the task is skipped with the reason, never
/// given a check that a stand-in decides.
#[test]
fn a_name_that_is_no_terminal_bench_parser_skips_the_task() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let tasks = tmp.path().join("tasks");
    graded_by(&tasks, "odd", "junit", "true");
    graded_by(&tasks, "perf", "sweperf", "true");
    graded_by(&tasks, "lancer", "swelancer", "true");
    let out = tmp.path().join("suite");
    let report = import_terminal_bench(&[tasks], &out, &ImportOptions::default()).expect("import");
    assert_eq!(report.imported, vec!["lancer", "perf"]);
    let reasons: Vec<(&str, &str)> = report
        .skipped
        .iter()
        .map(|s| (s.id.as_str(), s.reason.as_str()))
        .collect();
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(
        reasons[0].0 == "odd"
            && reasons[0]
                .1
                .contains("\"junit\" is not a Terminal-Bench result parser"),
        "{reasons:?}"
    );
}

/// Outputs of a task's tests, by parser: each is read by `proctor-verify.sh` and by
/// Terminal-Bench's own parser of that name, which must agree on every one.
const PARITY_OUTPUTS: &[(&str, &str)] = &[
    ("pytest", "============ short test summary info ============\nPASSED tests/test_a.py::test_one\nSKIPPED [1] tests/test_a.py:9: no gpu\nXFAIL tests/test_a.py::test_two - reason"),
    ("pytest", "============ short test summary info ============\nPASSED tests/test_a.py::test_one\nFAILED tests/test_a.py::test_two - AssertionError: 1 - 2"),
    ("pytest", "== SHORT TEST SUMMARY INFO ==\nXPASS tests/test_a.py::test_two"),
    ("pytest", "=== short test summary info ===\nERROR tests/test_a.py"),
    ("pytest", "=== short test summary info ===\nFAILED tests/t.py::test_x - boom\nPASSED tests/t.py::test_x"),
    ("pytest", "=== short test summary info ===\nPASSED: tests/t.py::test_x\r\nnothing else"),
    ("pytest", "=== short test summary info ===\nsome words here"),
    ("pytest", "1 passed in 0.01s"),
    ("swebench", "SWEBench results starts here\nPASSED\nSWEBench results ends here"),
    ("swebench", "SWEBench results starts here\n  PASSED \t\nSWEBench results ends here"),
    ("swebench", "SWEBench results starts here\nFAILED\nSWEBench results ends here"),
    ("swebench", "SWEBench results starts here\nPASSED"),
    ("swebench", "SWEBench results starts here\nPASSED\nSWEBench results ends here\nSWEBench results starts here\nFAILED\nSWEBench results ends here"),
    ("mlebench", "ALL TESTS PASSED"),
    ("mlebench", "MLEBench results starts here\nALL TESTS PASSED\nMLEBench results ends here"),
    ("mlebench", "MLEBench results starts here\nALL TESTS PASSED.\nMLEBench results ends here"),
    ("mlebench", "setup done\nMLEBench results starts here\nSOME TESTS FAILED\nMLEBench results ends here"),
    ("swelancer", "Running...\nSWE Lancer SUCCESS"),
    ("swelancer", "swe lancer failure"),
    ("swelancer", "swe lancer failure\nthen: swe lancer success"),
    ("swelancer", "user_tool started\nevery step Completed"),
    ("swelancer", "user_tool started"),
    ("swelancer", "swe lancer failure\nuser_tool completed"),
    ("swelancer", "SWE-Lancer success"),
    ("swelancer", ""),
    ("sweperf", "SWE-Perf results starts here\nPASSED\nSWE-Perf results ends here"),
    ("sweperf", "SWE-Perf results starts here\nFAILED\nSWE-Perf results ends here"),
    ("sweperf", "SWE-Perf results ends here\nPASSED"),
    ("sweperf", "SWEBench results starts here\nPASSED\nSWEBench results ends here"),
];

/// Where Terminal-Bench's own parsers are (`terminal_bench/parsers`; ci/setup unzips them from
/// the `terminal-bench` wheel), or None, said, when they are not (a failure under CI).
fn terminal_bench_parsers() -> Option<PathBuf> {
    let dir = std::env::var_os("PROCTOR_TERMINAL_BENCH")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/terminal-bench-0.2.18")
        });
    if dir
        .join("terminal_bench/parsers/parser_factory.py")
        .is_file()
    {
        return Some(dir);
    }
    let why = format!(
        "Terminal-Bench's parsers are not in {} (ci/setup unzips them)",
        dir.display()
    );
    assert!(std::env::var_os("CI").is_none(), "under CI: {why}");
    eprintln!("SKIPPED: {why}");
    None
}

/// `proctor-verify.sh` resolves exactly what Terminal-Bench's own parsers resolve: every output
/// above, for all five parsers, read by the imported check and by Terminal-Bench's code.
#[test]
fn proctor_verify_resolves_exactly_what_terminal_benchs_own_parsers_resolve() {
    let Some(tb) = terminal_bench_parsers() else {
        return;
    };
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/terminal_bench/tb_parse.py");
    let tmp = tempfile::tempdir().expect("tempdir");
    let tasks = tmp.path().join("tasks");
    for (i, (parser, output)) in PARITY_OUTPUTS.iter().enumerate() {
        let body = format!("cat <<'PROCTOR_OUTPUT_END'\n{output}\nPROCTOR_OUTPUT_END");
        graded_by(&tasks, &format!("case-{i:02}"), parser, &body);
    }
    let out = tmp.path().join("suite");
    let report = import_terminal_bench(&[tasks], &out, &ImportOptions::default()).expect("import");
    assert_eq!(report.imported.len(), PARITY_OUTPUTS.len(), "{report:?}");
    let mut resolved = [0, 0];
    for (i, (parser, output)) in PARITY_OUTPUTS.iter().enumerate() {
        let id = format!("case-{i:02}");
        let ours = verdict_with(&out, &id, "");
        let file = tmp.path().join(format!("{id}.out"));
        std::fs::write(&file, format!("{output}\n")).expect("write the output");
        let theirs = std::process::Command::new("python3")
            .arg(&driver)
            .arg(parser)
            .arg(&file)
            .env("PYTHONPATH", &tb)
            .output()
            .expect("python3 runs");
        assert!(
            theirs.status.success(),
            "Terminal-Bench's {parser} parser: {}",
            String::from_utf8_lossy(&theirs.stderr)
        );
        let theirs = String::from_utf8_lossy(&theirs.stdout).trim() == "resolved";
        assert_eq!(
            ours,
            Some(if theirs { 0 } else { 1 }),
            "{id} ({parser}): Terminal-Bench says {}, over {output:?}",
            if theirs { "resolved" } else { "unresolved" }
        );
        resolved[usize::from(theirs)] += 1;
    }
    // Both verdicts occur for the corpus to tell anything.
    assert!(resolved[0] >= 10 && resolved[1] >= 10, "{resolved:?}");
}

/// A task shaped like terminal-bench-datasets' livecodebenchpro: `instruction: base` names the
/// `descriptions` entry whose text is the prompt; the other entry is kept, and `--description`
/// chooses it.
fn livecodebenchpro(root: &Path) -> PathBuf {
    let dir = root.join("lcbpro-1983a");
    write(
        &dir,
        "task.yaml",
        r#"descriptions:
  - key: base
    description: |
      LiveCodeBench Pro (Mini) - external judge.

      The agent must create a C++17 solution file at /app/main.cpp.
  - key: problem
    description: |
      An array of integers is beautiful subject to an integer $k$ if ...

      ### Input
instruction: base
author_email: shz060@ucsd.edu
author: LiveCodeBench Pro Team
difficulty: easy
tags: []
max_agent_timeout_sec: 300
max_test_timeout_sec: 180
"#,
    );
    write(
        &dir,
        "docker-compose.yaml",
        "services:\n  client:\n    image: ghcr.io/example/lcb:1\n    working_dir: /app\n    command: [\"sleep\", \"infinity\"]\n",
    );
    write_exec(
        &dir,
        "run-tests.sh",
        "#!/bin/bash\nset -euo pipefail\npython -m pytest /app/tests/test_outputs.py --tb=short -rA --color=no --disable-warnings -v",
    );
    write(
        &dir,
        "tests/test_outputs.py",
        "def test_judge():\n    pass\n",
    );
    write_exec(
        &dir,
        "solution.sh",
        "#!/bin/bash\necho \"Oracle solution script\"\n",
    );
    dir
}

#[test]
fn a_livecodebenchpro_task_is_prompted_with_its_base_description_and_keeps_the_others() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let tasks = tmp.path().join("tasks");
    livecodebenchpro(&tasks);
    let out = tmp.path().join("suite");
    let report = import_terminal_bench(
        std::slice::from_ref(&tasks),
        &out,
        &ImportOptions::default(),
    )
    .expect("import");
    let text = std::fs::read_to_string(out.join("suite.toml")).expect("read");
    let suite: toml::Table = toml::from_str(&text).expect("parse");
    let prompt = suite["tasks"][0]["prompt"].as_str().expect("prompt");
    assert!(
        prompt.starts_with("LiveCodeBench Pro (Mini) - external judge.\n"),
        "{prompt}"
    );
    assert_eq!(suite["tasks"][0]["difficulty"].as_str(), Some("easy"));
    assert!(
        text.contains("# author: LiveCodeBench Pro Team; author email: shz060@ucsd.edu\n"),
        "{text}"
    );
    assert!(
        text.contains("# prompt: the `descriptions` entry `base`"),
        "{text}"
    );
    let kept =
        std::fs::read_to_string(out.join("descriptions/lcbpro-1983a/problem.md")).expect("kept");
    assert!(
        kept.starts_with("An array of integers is beautiful"),
        "{kept}"
    );
    assert!(out.join("descriptions/lcbpro-1983a/base.md").is_file());
    let about: toml::Table =
        toml::from_str(&std::fs::read_to_string(out.join("import.toml")).expect("import.toml"))
            .expect("parse");
    let task = &about["tasks"]["lcbpro-1983a"];
    assert_eq!(task["prompt"].as_str(), Some("descriptions.base"));
    assert_eq!(task["author"].as_str(), Some("LiveCodeBench Pro Team"));
    assert_eq!(task["author_email"].as_str(), Some("shz060@ucsd.edu"));
    assert!(
        task.get("max_agent_timeout_sec").is_none(),
        "suite.toml has a key for it"
    );
    let lines = warning_lines(&report).join("\n");
    assert!(
        lines.contains("instruction = \"base\" names the `descriptions` entry `base`"),
        "{lines}"
    );
    assert!(
        lines.contains("the other entries (problem) are kept"),
        "{lines}"
    );
    assert!(!lines.contains("unknown field `author`"), "{lines}");
    assert_valid(&out);

    let chosen = tmp.path().join("problem");
    let options = ImportOptions {
        description: Some("problem".into()),
        ..ImportOptions::default()
    };
    import_terminal_bench(std::slice::from_ref(&tasks), &chosen, &options).expect("import");
    let suite: toml::Table =
        toml::from_str(&std::fs::read_to_string(chosen.join("suite.toml")).expect("read"))
            .expect("parse");
    assert!(suite["tasks"][0]["prompt"]
        .as_str()
        .is_some_and(|p| p.starts_with("An array of integers")));

    let missing = ImportOptions {
        description: Some("hard".into()),
        ..ImportOptions::default()
    };
    let err = import_terminal_bench(&[tasks], &tmp.path().join("none"), &missing)
        .expect_err("no task has it");
    let proctor_import::ImportError::NothingImported { report } = err else {
        panic!("{err:?}");
    };
    assert_eq!(
        report.skipped[0].reason,
        "task.yaml has no `descriptions` entry `hard` (--description hard); its entries: base, problem"
    );
}

/// An image whose Dockerfile sets an ENTRYPOINT: Harbor and Terminal-Bench run it when the
/// container starts, proctor does not, and the report counts the tasks (skipped ones too).
#[test]
fn a_dockerfile_entrypoint_is_reported_for_imported_and_skipped_tasks() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let tasks = tmp.path().join("tasks");
    let dir = prebuilt(&tasks);
    write(
        &dir,
        "Dockerfile",
        "FROM python:3.13-slim\nCOPY entrypoint.sh /entrypoint.sh\nENTRYPOINT [\"/entrypoint.sh\"]\nWORKDIR /app\n",
    );
    let skipped = built(&tasks);
    write(
        &skipped,
        "Dockerfile",
        "FROM ubuntu:24.04 AS build\nENTRYPOINT [\"/not-this-stage\"]\nFROM ubuntu:24.04\nENTRYPOINT /start.sh\n",
    );
    let plain = keystrokes(&tasks);
    write(&plain, "Dockerfile", "FROM ubuntu:24.04\nCMD [\"bash\"]\n");
    let report = import_terminal_bench(
        &[tasks],
        &tmp.path().join("suite"),
        &ImportOptions::default(),
    )
    .expect("import");
    let kinds = report.warnings_by_kind();
    let (_, with) = kinds
        .iter()
        .find(|(kind, _)| kind.starts_with("Dockerfile sets an ENTRYPOINT"))
        .expect("reported");
    let ids: Vec<&str> = with.iter().map(|w| w.task.as_str()).collect();
    assert_eq!(ids, ["answer-42", "build-it"]);
}
