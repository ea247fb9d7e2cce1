//! Importing Harbor tasks: small task folders written like real Terminal-Bench 2 tasks (same
//! task.toml fields, same tests/test.sh and solution/solve.sh contract), imported, then the
//! generated suite checked: its files, proctor's own reader and validator, and the generated
//! check and oracle run the way proctor runs them.

mod support;

use std::path::{Path, PathBuf};

use proctor_import::{import_harbor, ImportError, ImportOptions, ImportReport};
use support::*;

/// A Harbor task like Terminal-Bench 2's, with one field Harbor does not define
/// (`metadata.reviewer`) and a multi-file solution that refers to /solution.
fn hello_world(root: &Path) -> PathBuf {
    let dir = root.join("hello-world");
    write(
        &dir,
        "task.toml",
        r#"schema_version = "1.1"
artifacts = []

[task]
name = "terminal-bench/hello-world"
description = "Write a greeting to a file."
keywords = ["trivial"]
authors = [{ name = "Ada Lovelace", email = "ada@example.com" }, { name = "Charles Babbage" }]

[metadata]
author_name = "Ada Lovelace"
author_email = "ada@example.com"
difficulty = "easy"
category = "file-operations"
tags = ["trivial", "files"]
expert_time_estimate_min = 1.0
junior_time_estimate_min = 5.0
reviewer = "someone"

[verifier]
timeout_sec = 120.0

[agent]
timeout_sec = 300.0

[environment]
build_timeout_sec = 600.0
docker_image = "alexgshaw/hello-world:20251031"
cpus = 1
memory_mb = 2048
storage_mb = 10240
gpus = 0
allow_internet = true
mcp_servers = []

[verifier.env]

[environment.env]
GREETING_STYLE = "plain"

[solution.env]
"#,
    );
    write(
        &dir,
        "instruction.md",
        "Create a file `hello.txt` in the current directory containing `Hello, world!`.\n",
    );
    write(
        &dir,
        "environment/Dockerfile",
        "FROM python:3.13-slim\nWORKDIR /app\n",
    );
    write_exec(
        &dir,
        "tests/test.sh",
        r#"#!/bin/bash
# Harbor uploads tests/ to /tests and reads /logs/verifier/reward.txt.
mkdir -p /logs/verifier
if [ "$PWD" = "/" ]; then
  echo "Error: No working directory set." >&2
  exit 1
fi
if diff -q hello.txt /tests/expected.txt >/dev/null 2>&1; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"#,
    );
    write(&dir, "tests/expected.txt", "Hello, world!\n");
    write_exec(
        &dir,
        "solution/solve.sh",
        "#!/bin/bash\nset -euo pipefail\nbash /solution/write.sh\n",
    );
    write(
        &dir,
        "solution/write.sh",
        "printf 'Hello, world!\\n' > hello.txt\n",
    );
    dir
}

/// A task whose verifier writes several metrics to reward.json, with no solution.
fn metrics(root: &Path) -> PathBuf {
    let dir = root.join("metrics");
    write(
        &dir,
        "task.toml",
        r#"version = "1.0"

[metadata]
difficulty = "medium"

[verifier]
timeout_sec = 60

[environment]
docker_image = "ghcr.io/example/metrics:1"
allow_internet = false
"#,
    );
    write(
        &dir,
        "instruction.md",
        "Write the answer to answer.txt; faster is better.\n",
    );
    write_exec(
        &dir,
        "tests/test.sh",
        r#"#!/bin/bash
# Writes partial credit to /logs/verifier/reward.json.
mkdir -p /logs/verifier
command -v curl >/dev/null || curl -fsSL https://example.com/probe >/dev/null 2>&1 || true
acc=0
speed=0
[ -f answer.txt ] && acc=1
[ -f fast.txt ] && speed=0.5
printf '{"reward": %s, "accuracy": %s, "speed": %s}\n' "$acc" "$acc" "$speed" > /logs/verifier/reward.json
"#,
    );
    dir
}

/// A task whose environment is only a Dockerfile, one that needs a build (a `RUN` step: a
/// Dockerfile of `FROM` and `WORKDIR` alone is imported as its base image).
fn dockerfile_only(root: &Path) -> PathBuf {
    let dir = root.join("build-me");
    write(
        &dir,
        "task.toml",
        "version = \"1.0\"\n\n[environment]\ncpus = 1\n",
    );
    write(&dir, "instruction.md", "Do it.\n");
    write(
        &dir,
        "environment/Dockerfile",
        "FROM ubuntu:24.04\nWORKDIR /app\nRUN apt-get update\n",
    );
    write_exec(
        &dir,
        "tests/test.sh",
        "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
    );
    dir
}

fn dataset() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let tasks = tmp.path().join("tasks");
    hello_world(&tasks);
    metrics(&tasks);
    dockerfile_only(&tasks);
    std::fs::create_dir_all(tasks.join("not-a-task")).expect("mkdir");
    (tmp, tasks)
}

#[test]
fn imports_a_dataset_folder_into_a_suite_that_proctor_validates() {
    let (tmp, tasks) = dataset();
    let out = tmp.path().join("suites").join("tb2");
    let report = import_harbor(&[tasks], &out, &ImportOptions::default()).expect("import");
    let warnings = assert_dataset_report(&report);

    // The generated files.
    let suite: toml::Table =
        toml::from_str(&std::fs::read_to_string(out.join("suite.toml")).expect("suite.toml"))
            .expect("suite.toml parses");
    assert_eq!(suite["schema_version"].as_integer(), Some(1));
    assert_eq!(suite["id"].as_str(), Some("tb2"));
    assert_eq!(suite["fixture"].as_str(), Some("fixture"));
    assert!(out.join("fixture").is_dir());
    assert_eq!(
        std::fs::read_dir(out.join("fixture"))
            .expect("fixture")
            .count(),
        0
    );
    let variant = &suite["variants"][0];
    assert_eq!(variant["id"].as_str(), Some("oracle"));
    assert_eq!(variant["agent"].as_str(), Some("script"));
    assert_eq!(variant["script"].as_str(), Some("agents/oracle"));

    let hello = &suite["tasks"][0];
    assert_hello_world_task(hello, &warnings);
    let m = &suite["tasks"][1];
    assert_metrics_task(m);
    assert_eq!(hello["check_network"].as_str(), Some("internet"));
    assert_comments_and_import_toml(&out);
    assert_task_files(&out);

    // proctor's own reader and validator accept it.
    assert_valid(&out);
}

/// The dataset's import report: two tasks imported, the one whose image is built skipped with
/// how to build it, each task's warnings (a skipped one's too), the folder that is not a task
/// named; gives the warnings, one a line.
fn assert_dataset_report(report: &ImportReport) -> String {
    assert_eq!(report.imported, vec!["hello-world", "metrics"]);
    assert_eq!(report.skipped.len(), 1);
    let (id, reason) = (&report.skipped[0].id, &report.skipped[0].reason);
    assert_eq!(id, "build-me");
    assert!(reason.contains("environment/Dockerfile"), "{reason}");
    assert!(
        reason.contains("docker build -t proctor-import-build-me environment"),
        "{reason}"
    );
    assert!(
        reason.contains("buildah bud -t proctor-import-build-me environment"),
        "{reason}"
    );
    assert!(
        reason.contains("image = \"oci-archive:images/build-me.tar\""),
        "{reason}"
    );

    let warnings = warning_lines(report).join("\n");
    for expected in [
        "hello-world: task.toml: unknown field `metadata.reviewer`, not imported",
        "metrics: tests/ download while verifying (curl), but the verifier phase has no network (check_network = \"none\")",
        "metrics: no solution/solve.sh: its oracle does nothing",
        // A skipped task's other warnings are reported too.
        "build-me: no solution/solve.sh: its oracle does nothing",
    ] {
        assert!(warnings.contains(expected), "missing {expected:?} in:\n{warnings}");
    }
    // The internet Harbor gives is the trial's own, isolated from the host: nothing to warn of.
    assert!(!warnings.contains("host's network"), "{warnings}");
    assert_eq!(report.not_tasks.len(), 1, "{:?}", report.not_tasks);
    assert!(report.not_tasks[0].folder.ends_with("not-a-task"));
    assert_eq!(
        report.not_tasks[0].why,
        "not a Harbor task folder (no task.toml)"
    );
    let shown = report.to_string();
    assert!(shown.starts_with("imported 2 task(s): hello-world, metrics\nskipped 1 task(s), by reason:\n  1 task(s): its image is built from environment/Dockerfile"), "{shown}");

    warnings
}

/// `hello-world` of `suite.toml`: its prompt, timeouts, network, image and environment, its
/// check, its tests laid where Harbor lays them, and its resources.
fn assert_hello_world_task(hello: &toml::Value, warnings: &str) {
    assert_eq!(hello["id"].as_str(), Some("hello-world"));
    assert_eq!(
        hello["prompt"].as_str(),
        Some("Create a file `hello.txt` in the current directory containing `Hello, world!`.\n")
    );
    assert_eq!(hello["difficulty"].as_str(), Some("easy"));
    assert_eq!(hello["wall_timeout_seconds"].as_integer(), Some(300));
    assert_eq!(hello["validation_timeout_seconds"].as_integer(), Some(120));
    assert_eq!(hello["network"].as_str(), Some("internet"));
    assert_eq!(
        hello["environment"]["image"].as_str(),
        Some("alexgshaw/hello-world:20251031")
    );
    assert_eq!(
        hello["environment"]["env"]["GREETING_STYLE"].as_str(),
        Some("plain")
    );
    assert_eq!(
        hello["success"]["all"][0]["check"].as_str(),
        Some("bash /tests/proctor-verify.sh")
    );
    // The tests are laid where Harbor lays them, never in the agent's workspace.
    assert_eq!(hello["holdout_at"].as_str(), Some("/tests"));
    assert!(hello.get("rubric").is_none());
    // Resources go to the environment table; no warning says they are dropped.
    assert_eq!(hello["environment"]["cpus"].as_integer(), Some(1));
    assert_eq!(hello["environment"]["memory_mb"].as_integer(), Some(2048));
    assert_eq!(hello["environment"]["storage_mb"].as_integer(), Some(10240));
    assert!(!warnings.contains("does not limit"), "{warnings}");
}

/// `metrics` of `suite.toml`: no network, no wall timeout, its check with `--metrics` and its
/// rubric.
fn assert_metrics_task(m: &toml::Value) {
    assert_eq!(m["id"].as_str(), Some("metrics"));
    assert_eq!(
        m["network"].as_str(),
        Some("none"),
        "allow_internet = false"
    );
    assert_eq!(m["check_network"].as_str(), Some("none"));
    assert!(
        m.get("wall_timeout_seconds").is_none(),
        "no [agent] timeout_sec"
    );
    assert_eq!(m["validation_timeout_seconds"].as_integer(), Some(60));
    assert_eq!(
        m["success"]["all"][0]["check"]["command"].as_str(),
        Some("bash /tests/proctor-verify.sh --metrics")
    );
    let rubric = m["rubric"].as_array().expect("rubric");
    let ids: Vec<&str> = rubric
        .iter()
        .map(|c| c["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, vec!["accuracy", "speed"]);
    assert_eq!(rubric[0]["max"].as_integer(), Some(10));
    assert_eq!(rubric[0]["levels"].as_array().map(Vec::len), Some(10));
}

/// What `suite.toml`'s comments and `import.toml` keep of `hello-world` beyond the suite's keys.
fn assert_comments_and_import_toml(out: &Path) {
    let text = std::fs::read_to_string(out.join("suite.toml")).expect("suite.toml");
    assert!(
        text.contains("# name: terminal-bench/hello-world; authors: Ada Lovelace <ada@example.com>, Charles Babbage; keywords: trivial; author name: Ada Lovelace"),
        "{text}"
    );
    let about: toml::Table =
        toml::from_str(&std::fs::read_to_string(out.join("import.toml")).expect("import.toml"))
            .expect("parse");
    let hello = &about["tasks"]["hello-world"];
    assert_eq!(about["format"].as_str(), Some("harbor"));
    assert_eq!(
        hello["authors"][1]["name"].as_str(),
        Some("Charles Babbage")
    );
    assert_eq!(hello["keywords"][0].as_str(), Some("trivial"));
    assert_eq!(
        hello["metadata"]["category"].as_str(),
        Some("file-operations")
    );
    assert_eq!(hello["metadata"]["difficulty"].as_str(), Some("easy"));
    assert!(text.contains("# image: alexgshaw/hello-world:20251031"));
}

/// The holdouts and the oracle's steps and files written for the imported tasks alone.
fn assert_task_files(out: &Path) {
    for rel in [
        "holdout/hello-world/test.sh",
        "holdout/hello-world/expected.txt",
        "holdout/hello-world/proctor-verify.sh",
        "holdout/metrics/test.sh",
        "agents/oracle/hello-world.toml",
        "agents/oracle/metrics.toml",
        "agents/oracle/files/hello-world/solve.sh",
        "agents/oracle/files/hello-world/write.sh",
    ] {
        assert!(out.join(rel).is_file(), "{rel}");
    }
    assert!(!out.join("holdout/build-me").exists());
    assert!(oracle_steps(out, "metrics").is_empty());
}

#[test]
fn the_check_passes_the_oracle_and_fails_an_empty_end_state() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let task = hello_world(tmp.path());
    let out = tmp.path().join("suite");
    import_harbor(&[task], &out, &ImportOptions::default()).expect("import");

    // The null agent: nothing changed.
    let ws = check_workspace(&out, "hello-world", &[]);
    let run = sh(ws.path(), "bash proctor-verify.sh");
    assert_eq!(run.status.code(), Some(1), "{run:?}");

    // The oracle, step by step, in a workspace of its own; then the check over its end state.
    let agent_ws = tempfile::tempdir().expect("tempdir");
    run_oracle(&out, "hello-world", agent_ws.path());
    let hello = std::fs::read_to_string(agent_ws.path().join("hello.txt")).expect("hello.txt");
    assert_eq!(hello, "Hello, world!\n");
    let ws = check_workspace(&out, "hello-world", &[("hello.txt", &hello)]);
    let run = sh(ws.path(), "bash proctor-verify.sh");
    assert!(run.status.success(), "{run:?}");
    assert!(
        run.stdout.is_empty(),
        "the verifier's output goes to stderr"
    );
}

/// The score a rubric criterion's levels give for the check's stdout, as proctor scores it:
/// the first level whose assertions all hold.
fn score(criterion: &toml::Value, stdout: &str) -> i64 {
    for level in criterion["levels"].as_array().expect("levels") {
        let holds = level["all"].as_array().expect("all").iter().all(|a| {
            let pattern = a["check"]["stdout_matches"].as_str().expect("pattern");
            regex::Regex::new(pattern).expect("regex").is_match(stdout)
        });
        if holds {
            return level["score"].as_integer().expect("score");
        }
    }
    0
}

#[test]
fn reward_json_metrics_become_rubric_scores_and_reward_decides_success() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let task = metrics(tmp.path());
    let out = tmp.path().join("suite");
    import_harbor(&[task], &out, &ImportOptions::default()).expect("import");
    assert_valid(&out);
    let suite: toml::Table =
        toml::from_str(&std::fs::read_to_string(out.join("suite.toml")).expect("read"))
            .expect("parse");
    let task = &suite["tasks"][0];
    let success = task["success"]["all"][0]["check"]["stdout_matches"]
        .as_str()
        .expect("pattern");
    let success = regex::Regex::new(success).expect("regex");
    let rubric = task["rubric"].as_array().expect("rubric");

    let ws = check_workspace(&out, "metrics", &[("answer.txt", "42\n"), ("fast.txt", "")]);
    let run = sh(ws.path(), "bash proctor-verify.sh --metrics");
    assert!(run.status.success(), "{run:?}");
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(success.is_match(&stdout), "{stdout}");
    assert_eq!(score(&rubric[0], &stdout), 10, "accuracy 1: {stdout}");
    assert_eq!(score(&rubric[1], &stdout), 5, "speed 0.5: {stdout}");
    assert!(sh(ws.path(), "bash proctor-verify.sh").status.success());

    let ws = check_workspace(&out, "metrics", &[]);
    let run = sh(ws.path(), "bash proctor-verify.sh --metrics");
    assert!(run.status.success(), "{run:?}");
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(!success.is_match(&stdout), "{stdout}");
    assert_eq!(score(&rubric[0], &stdout), 0);
    assert_eq!(score(&rubric[1], &stdout), 0);
    assert_eq!(
        sh(ws.path(), "bash proctor-verify.sh").status.code(),
        Some(1)
    );
}

#[test]
fn a_verifier_that_writes_no_reward_is_not_a_pass() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let task = hello_world(tmp.path());
    write_exec(&task, "tests/test.sh", "#!/bin/bash\nexit 0\n");
    let out = tmp.path().join("suite");
    import_harbor(&[task], &out, &ImportOptions::default()).expect("import");
    let ws = check_workspace(&out, "hello-world", &[]);
    assert_eq!(
        sh(ws.path(), "bash proctor-verify.sh").status.code(),
        Some(3)
    );
}

#[test]
fn a_saved_archive_beside_a_dockerfile_only_task_becomes_its_image() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let task = dockerfile_only(tmp.path());
    write(&task, "proctor-image.tar", "not really an archive");
    let out = tmp.path().join("suite");
    let report = import_harbor(&[task], &out, &ImportOptions::default()).expect("import");
    assert_eq!(report.imported, vec!["build-me"]);
    assert!(out.join("images/build-me.tar").is_file());
    let suite: toml::Table =
        toml::from_str(&std::fs::read_to_string(out.join("suite.toml")).expect("read"))
            .expect("parse");
    assert_eq!(
        suite["tasks"][0]["environment"]["image"].as_str(),
        Some("oci-archive:images/build-me.tar")
    );
    assert_valid(&out);
}

#[test]
fn nothing_importable_is_an_error_carrying_the_report() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let task = dockerfile_only(tmp.path());
    let out = tmp.path().join("suite");
    let err = import_harbor(&[task], &out, &ImportOptions::default()).expect_err("nothing");
    match &err {
        ImportError::NothingImported { report } => {
            assert_eq!(report.skipped.len(), 1);
        }
        other => panic!("{other}"),
    }
    assert!(err.to_string().contains("docker build"));
    assert!(!out.exists(), "nothing is written");
}

#[test]
fn the_output_must_be_new_or_empty_and_inputs_must_be_tasks() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let task = hello_world(tmp.path());
    let out = tmp.path().join("suite");
    write(&out, "keep.txt", "mine");
    let err = import_harbor(std::slice::from_ref(&task), &out, &ImportOptions::default())
        .expect_err("busy");
    assert!(matches!(err, ImportError::OutputNotEmpty(_)), "{err}");
    assert_eq!(
        std::fs::read_to_string(out.join("keep.txt")).expect("kept"),
        "mine"
    );

    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    let options = ImportOptions {
        suite_id: Some("my suite".into()),
        name: Some("Imported".into()),
        build: None,
        description: None,
    };
    import_harbor(&[task], &empty, &options).expect("an empty folder is fine");
    let suite: toml::Table =
        toml::from_str(&std::fs::read_to_string(empty.join("suite.toml")).expect("read"))
            .expect("parse");
    assert_eq!(suite["id"].as_str(), Some("my-suite"));
    assert_eq!(suite["name"].as_str(), Some("Imported"));

    let nowhere = tmp.path().join("nowhere");
    let err = import_harbor(&[nowhere], &tmp.path().join("x"), &ImportOptions::default())
        .expect_err("missing");
    assert!(matches!(err, ImportError::MissingInput(_)), "{err}");
    let err = import_harbor(&[empty], &tmp.path().join("y"), &ImportOptions::default())
        .expect_err("not tasks");
    assert!(matches!(err, ImportError::NoTasksFound { .. }), "{err}");
}

#[test]
fn a_copy_of_a_test_in_the_build_context_is_reported() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let tasks = tmp.path().join("tasks");
    let dir = hello_world(&tasks);
    // environment/ (the build context) carries the verifier, with CRLF line endings.
    let test = std::fs::read_to_string(dir.join("tests/test.sh")).expect("read");
    write(
        &dir,
        "environment/app/check.sh",
        &test.replace('\n', "\r\n"),
    );
    let report = import_harbor(&[tasks], &tmp.path().join("out"), &ImportOptions::default())
        .expect("import");
    let lines = warning_lines(&report);
    let found: Vec<&String> = lines
        .iter()
        .filter(|w| w.contains("build context"))
        .collect();
    assert_eq!(
        found,
        ["hello-world: environment/app/check.sh, in the image's build context, has the content of tests/test.sh: if the Dockerfile copies it in, the agent can read it in its environment; remove it from the build context"],
        "{lines:#?}"
    );
}

#[test]
fn a_test_quoted_in_a_build_context_file_is_reported() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let tasks = tmp.path().join("tasks");
    let dir = hello_world(&tasks);
    // A README of the build context quoting the verifier inside other text, as a Markdown quote.
    let test = std::fs::read_to_string(dir.join("tests/test.sh")).expect("read");
    let quoted: String = test.lines().map(|l| format!("> {l}\n")).collect();
    write(
        &dir,
        "environment/README.md",
        &format!("# The image\n\nThe grader does this:\n\n{quoted}\nThat is all.\n"),
    );
    // Notes that only name the verifier's files are no quote.
    write(
        &dir,
        "environment/NOTES.md",
        "The verifier is tests/test.sh; it writes /logs/verifier/reward.txt\nafter comparing hello.txt with tests/expected.txt.\n",
    );
    let report = import_harbor(&[tasks], &tmp.path().join("out"), &ImportOptions::default())
        .expect("import");
    let lines = warning_lines(&report);
    let found: Vec<&String> = lines
        .iter()
        .filter(|w| w.contains("build context"))
        .collect();
    assert_eq!(
        found,
        ["hello-world: environment/README.md, in the image's build context, quotes tests/test.sh at lines 5-15 (10 of its 10 meaningful lines): if the Dockerfile copies it in, the agent can read it in its environment; remove the quoted lines"],
        "{lines:#?}"
    );
}

/// A Harbor task whose agent is given MCP servers: `stdio` ones as `command` and `args`, and one
/// over `streamable-http` when `http` is set.
fn with_mcp(root: &Path, id: &str, http: bool) -> PathBuf {
    let dir = root.join(id);
    let mut toml = String::from(
        "version = \"1.0\"\n\n[environment]\ndocker_image = \"python:3.13-slim\"\n\n[[environment.mcp_servers]]\nname = \"notes\"\ntransport = \"stdio\"\ncommand = \"python3\"\nargs = [\"/app/notes.py\", \"--quiet\"]\n",
    );
    if http {
        toml += "\n[[environment.mcp_servers]]\nname = \"search\"\ntransport = \"streamable-http\"\nurl = \"http://search:8000/mcp\"\n";
    }
    write(&dir, "task.toml", &toml);
    write(&dir, "instruction.md", "Add a note titled Milk.\n");
    write_exec(
        &dir,
        "tests/test.sh",
        "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
    );
    write_exec(&dir, "solution/solve.sh", "#!/bin/bash\ntrue\n");
    dir
}

#[test]
fn a_tasks_stdio_mcp_servers_are_carried_and_one_over_http_skips_the_task() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let tasks = tmp.path().join("tasks");
    with_mcp(&tasks, "notes-task", false);
    with_mcp(&tasks, "search-task", true);
    let out = tmp.path().join("suite");
    let report = import_harbor(&[tasks], &out, &ImportOptions::default()).expect("import");
    assert_eq!(report.imported, vec!["notes-task"]);
    assert_eq!(report.skipped.len(), 1);
    let reason = &report.skipped[0].reason;
    assert!(
        reason.contains("`search` is served by `search`, which is none of the task's containers"),
        "{reason}"
    );
    let warnings = warning_lines(&report).join("\n");
    assert!(!warnings.contains("mcp_servers"), "{warnings}");
    let text = std::fs::read_to_string(out.join("suite.toml")).expect("suite.toml");
    let suite: toml::Table = toml::from_str(&text).expect("suite.toml parses");
    let servers = suite["mcp_servers"].as_array().expect("mcp_servers");
    assert_eq!(servers.len(), 1, "{text}");
    assert_eq!(servers[0]["name"].as_str(), Some("notes"));
    assert_eq!(
        servers[0]["command"],
        toml::Value::Array(
            ["python3", "/app/notes.py", "--quiet"]
                .map(|a| toml::Value::String(a.into()))
                .to_vec()
        )
    );
    // proctor reads and validates what it wrote.
    proctor_suite::Suite::open(&out).unwrap_or_else(|p| panic!("{p:?}\n{text}"));
}
