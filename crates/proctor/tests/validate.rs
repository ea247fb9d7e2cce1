//! `proctor validate`: valid suites pass, and each kind of mistake gets a located, actionable
//! diagnostic (snapshot-tested) and exit status 2.

mod common;

use common::{proctor, repo_root, unwrapped, TestSuite, MINIMAL};

/// Validates `suite`, expects exit 2, and returns stderr for a snapshot.
fn rejected(suite: &TestSuite) -> String {
    let out = suite.validate();
    assert_eq!(
        out.code, 2,
        "expected exit 2, got {}\n{}",
        out.code, out.stderr
    );
    out.stderr
}

#[test]
fn minimal_suite_is_valid() {
    let out = TestSuite::minimal().validate();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("valid suite `mini`"), "{}", out.stdout);
}

#[test]
fn init_writes_a_suite_that_validates() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("starter");
    let t = target.to_str().unwrap();
    assert_eq!(proctor(&["init", t], dir.path()).code, 0);
    let out = proctor(&["validate", t], dir.path());
    assert_eq!(out.code, 0, "{}", out.stderr);
    // Clean: no leak of its holdout check or answer sheet, no warning.
    assert!(!out.stderr.contains("suite::"), "{}", out.stderr);
    // init never overwrites.
    let again = proctor(&["init", t], dir.path());
    assert_eq!(again.code, 2);
    assert!(again.stderr.contains("not empty"), "{}", again.stderr);
}

#[test]
fn bundled_examples_are_valid() {
    // chat-ax allows `chat`, which a workspace build puts beside proctor; `cargo test -p
    // proctor` may not have built it, so a stand-in on PATH keeps this test about the suite.
    let stubs = tempfile::tempdir().unwrap();
    let chat = stubs.path().join("chat");
    std::fs::write(&chat, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&chat, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path_var = std::env::join_paths(std::iter::once(stubs.path().to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    for name in ["chat-ax", "traps"] {
        let path = repo_root().join("examples").join(name);
        let out = assert_cmd::Command::cargo_bin("proctor")
            .unwrap()
            .args(["validate", path.to_str().unwrap()])
            .env("PATH", &path_var)
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "examples/{name}:\n{stderr}");
        // Clean: no leak and no warning (such as a fixture carrying git history).
        assert!(!stderr.contains("suite::"), "examples/{name}:\n{stderr}");
    }
}

#[test]
fn holdout_at_must_be_an_absolute_folder_outside_the_kernels_and_proctors_own() {
    for bad in [
        "tests",
        "/",
        "/tests/../etc",
        "/proc/x",
        "/run/proctor/t",
        "/tests/",
    ] {
        let s =
            TestSuite::minimal().edit("prompt = ", &format!("holdout_at = \"{bad}\"\nprompt = "));
        let err = rejected(&s);
        assert!(err.contains("holdout_at"), "{bad}: {err}");
    }
    let ok = TestSuite::minimal().edit("prompt = ", "holdout_at = \"/tests\"\nprompt = ");
    let out = ok.validate();
    assert_eq!(out.code, 0, "{}", out.stderr);
}

#[test]
fn patch_that_applies_is_accepted() {
    let s = TestSuite::minimal();
    s.write(
        "mutations/hello/two.patch",
        "--- a/README.md\n+++ b/README.md\n@@ -2,1 +2,1 @@\n-line two\n+line II\n",
    );
    let out = s.validate();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("1 mutation(s)"), "{}", out.stdout);
}

#[test]
fn every_problem_is_reported_not_only_the_first() {
    let s = TestSuite::minimal().edit("pattern = \"hi\"", "pattern = \"(hi\"");
    s.write("holdout/nope/x", "x");
    s.write("mutations/hello/bad.patch", "not a diff\n");
    std::os::unix::fs::symlink("/etc/hostname", s.path().join("fixture/link")).unwrap();
    let out = s.validate();
    assert_eq!(out.code, 2);
    for needle in [
        "suite::bad-pattern",
        "suite::unknown-reference",
        "suite::bad-mutation",
        "suite::forbidden-file",
    ] {
        assert!(
            out.stderr.contains(needle),
            "missing {needle}:\n{}",
            out.stderr
        );
    }
    assert!(out.stderr.contains("4 problems found"), "{}", out.stderr);
}

#[test]
fn json_format_lists_problems_with_line_and_column() {
    let s = TestSuite::minimal().edit("wall_timeout_seconds", "wall_timeout_secs");
    let out = proctor(
        &["validate", s.path().to_str().unwrap(), "--format", "json"],
        s.path(),
    );
    assert_eq!(out.code, 2);
    let doc: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(doc["valid"], false);
    assert_eq!(doc["problems"][0]["kind"], "unknown-key");
    assert_eq!(doc["problems"][0]["line"], 5);
    assert_eq!(doc["problems"][0]["column"], 1);
}

#[test]
fn every_refused_table_of_a_file_is_reported_each_at_its_place() {
    // Mistakes in [defaults], the variant, the task's own keys and a second task's assertion:
    // each table is read on its own, so all four are reported, not the first alone.
    let s = TestSuite::minimal()
        .edit("wall_timeout_seconds", "wall_timeout_secs")
        .edit(
            "agent = \"script\"",
            "agent = \"script\"\nprompt_prefx = \"x\"",
        )
        .edit("prompt = ", "expected = \"complete\"\nprompt = ");
    let toml = std::fs::read_to_string(s.path().join("suite.toml")).unwrap();
    s.write(
        "suite.toml",
        &(toml + "\n[[tasks]]\nid = \"two\"\nprompt = \"x\"\n\n[tasks.success]\nall = [{ not = { file_added = \"x\", bogus = 1 } }]\n"),
    );
    let out = proctor(
        &["validate", s.path().to_str().unwrap(), "--format", "json"],
        s.path(),
    );
    assert_eq!(out.code, 2, "{}", out.stderr);
    let doc: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let found: Vec<(String, u64, u64)> = doc["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let message = p["message"].as_str().unwrap();
            let key = message.split('`').nth(1).unwrap_or(message).to_string();
            (
                key,
                p["line"].as_u64().unwrap(),
                p["column"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            ("wall_timeout_secs".to_string(), 5, 1),
            ("prompt_prefx".to_string(), 10, 1),
            ("expected".to_string(), 15, 1),
            ("bogus".to_string(), 28, 36),
        ],
        "{doc:#}"
    );
    // A syntax error stops the reading there: what follows is not read soundly.
    let broken = TestSuite::minimal()
        .edit("wall_timeout_seconds", "wall_timeout_secs")
        .edit("id = \"oracle\"", "id = \"oracle");
    let out = broken.validate();
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("1 problem found"), "{}", out.stderr);
}

/// Runs `proctor validate . ARGS` inside the suite's folder and returns stderr.
///
/// Paths in the output are then relative (`./suite.toml`), so neither they nor where a long
/// message wraps depend on where the temporary folder is; an absolute path that still shows up
/// is redacted to `[SUITE]`.
fn validate_in_place(suite: &TestSuite, args: &[&str]) -> (i32, String) {
    let out = assert_cmd::Command::cargo_bin("proctor")
        .unwrap()
        .arg("validate")
        .arg(".")
        .args(args)
        .current_dir(suite.path())
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let mut stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let canonical = suite.path().canonicalize().unwrap();
    for dir in [canonical.as_path(), suite.path()] {
        stderr = stderr.replace(dir.to_str().unwrap(), "[SUITE]");
    }
    (out.status.code().unwrap_or(-1), stderr)
}

/// [`validate_in_place`], expecting exit 2.
fn rejected_in_place(suite: &TestSuite, args: &[&str]) -> String {
    let (code, stderr) = validate_in_place(suite, args);
    assert_eq!(code, 2, "expected exit 2, got {code}\n{stderr}");
    stderr
}

/// The minimal suite with a second task, `bye`, that has no oracle script.
fn two_tasks() -> TestSuite {
    TestSuite::with_toml(&format!(
        "{MINIMAL}\n[[tasks]]\nid = \"bye\"\nprompt = \"Delete hello.txt.\"\n\n[tasks.success]\nall = [{{ file_deleted = \"hello.txt\" }}]\n"
    ))
}

/// Writes an executable file inside the suite.
fn write_exec(s: &TestSuite, rel: &str, content: &str) {
    use std::os::unix::fs::PermissionsExt;
    s.write(rel, content);
    let path = s.path().join(rel);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn allow_entries_of_tasks_and_variants_are_resolved_too() {
    let s = TestSuite::minimal()
        .edit(
            "script = \"agents/oracle\"",
            "script = \"agents/oracle\"\nallow = [\"sh\", \"no-such-variant-tool\"]",
        )
        .edit(
            "prompt = ",
            "allow = [\"bin/missing\", \"no-such-task-tool\"]\nprompt = ",
        );
    let err = rejected(&s);
    for needle in [
        "`allow` entry `no-such-variant-tool`",
        "`allow` entry `no-such-task-tool`",
        "`allow` path `bin/missing` does not exist",
    ] {
        assert!(err.contains(needle), "missing {needle}:\n{err}");
    }
    assert!(err.contains("3 problems found"), "{err}");
}

#[test]
fn allowed_commands_on_path_and_in_the_suite_with_their_interface_are_accepted() {
    let s = TestSuite::minimal()
        .edit(
            "wall_timeout_seconds = 30",
            "wall_timeout_seconds = 30\nallow = [\"sh\", \"bin/tool\"]",
        )
        .edit(
            "[tasks.success]",
            "[tasks.interface]\ncommand = \"tool\"\n\n[tasks.success]",
        );
    write_exec(&s, "bin/tool", "#!/bin/sh\necho tool\n");
    let out = s.validate();
    assert_eq!(out.code, 0, "{}", out.stderr);
}

#[test]
fn a_task_allow_list_overrides_the_defaults_for_its_interface() {
    let s = TestSuite::minimal()
        .edit(
            "wall_timeout_seconds = 30",
            "wall_timeout_seconds = 30\nallow = [\"sh\"]",
        )
        .edit("prompt = ", "allow = [\"bin/tool\"]\nprompt = ")
        .edit(
            "[tasks.success]",
            "[tasks.interface]\ncommand = \"tool\"\n\n[tasks.success]",
        );
    write_exec(&s, "bin/tool", "#!/bin/sh\necho tool\n");
    let out = s.validate();
    assert_eq!(out.code, 0, "{}", out.stderr);
}

/// The minimal suite plus a `claude-code` variant reading model scripts from agents/model/.
fn with_model_variant() -> TestSuite {
    apply(TestSuite::minimal(), MODEL_VARIANT)
}

#[test]
fn model_script_that_is_valid() {
    let out = with_model_variant().validate();
    assert_eq!(out.code, 0, "{}", out.stderr);
}

#[test]
fn model_script_file_used_for_every_task_is_parsed() {
    let s = TestSuite::minimal().edit(
        "[[tasks]]",
        "[[variants]]\nid = \"claude\"\nagent = \"claude-code\"\nmodel_script = \"agents/model.toml\"\n\n[[tasks]]",
    );
    s.write("agents/model.toml", "[[turns]]\ntext = 3\n");
    let err = rejected(&s);
    assert!(err.contains("[SUITE]/agents/model.toml:2:8"), "{err}");
    assert!(err.contains("1 problem found"), "{err}");
}

#[test]
fn script_missing_for_a_task_that_is_not_selected_is_accepted() {
    let s = two_tasks();
    let all = rejected(&s);
    assert!(
        all.contains("variant `oracle` has no script for task `bye`"),
        "{all}"
    );
    let path = s.path().to_str().unwrap();
    let out = proctor(&["validate", path, "--task", "hello"], s.path());
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = proctor(
        &["validate", path, "--task", "hello", "--task", "bye"],
        s.path(),
    );
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("variant `oracle` has no script for task `bye`"),
        "{}",
        out.stderr
    );
}

#[test]
fn model_script_missing_for_a_task_that_is_not_selected_is_accepted() {
    let s = with_model_variant().edit(
        "[[tasks]]",
        "[[tasks]]\nid = \"bye\"\nprompt = \"Delete hello.txt.\"\n\n[tasks.success]\nall = [{ file_deleted = \"hello.txt\" }]\n\n[[tasks]]",
    );
    let all = rejected(&s);
    assert!(all.contains("no script for task `bye`"), "{all}");
    assert!(all.contains("no model script for task `bye`"), "{all}");
    let path = s.path().to_str().unwrap();
    let out = proctor(&["validate", path, "--task", "hello"], s.path());
    assert_eq!(out.code, 0, "{}", out.stderr);
}

#[test]
fn check_files_in_the_holdout_or_the_fixture_and_commands_without_files_are_accepted() {
    let s = TestSuite::minimal().edit(
        "{ file_contains",
        "{ check = \"python3 check_fix.py\" },\n  { check = \"./verify.sh --quiet\" },\n  { check = \"sh tools/lint.sh\" },\n  { check = \"python3 -c 'import json'\" },\n  { check = \"grep -q hi hello.txt\" },\n  { check = { command = \"bash $SCRIPT.sh\", exit = 1 } },\n  { file_contains",
    );
    s.write("holdout/hello/check_fix.py", "print('ok')\n");
    write_exec(&s, "holdout/hello/verify.sh", "#!/bin/sh\ntrue\n");
    s.write("fixture/tools/lint.sh", "true\n");
    let out = s.validate();
    assert_eq!(out.code, 0, "{}", out.stderr);
}

#[test]
fn expect_refuse_and_ask_with_their_patterns_are_accepted() {
    let s = TestSuite::minimal().edit("prompt = ", "expect = \"refuse\"\nprompt = ");
    s.write(
        "suite.toml",
        &format!(
            "{}\n[tasks.refusal]\nrefuse_patterns = [\"(?i)can't\"]\n\n[[tasks]]\nid = \"q\"\nexpect = \"ask\"\nprompt = \"Delete it?\"\n\n[tasks.success]\nall = [{{ files_unchanged = true }}]\n\n[tasks.refusal]\nask_patterns = [\"(?i)should I\"]\n",
            std::fs::read_to_string(s.path().join("suite.toml")).unwrap()
        ),
    );
    s.write("agents/oracle/q.toml", "answer = \"Should I?\"\n");
    let out = s.validate();
    assert_eq!(out.code, 0, "{}", out.stderr);
}

/// `proctor validate SUITE --format json` on a suite expected to be refused: its problems.
fn json_problems(s: &TestSuite) -> Vec<serde_json::Value> {
    let out = proctor(
        &["validate", s.path().to_str().unwrap(), "--format", "json"],
        s.path(),
    );
    assert_eq!(
        out.code, 2,
        "expected exit 2\n{}\n{}",
        out.stdout, out.stderr
    );
    let doc: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(doc["valid"], false);
    doc["problems"].as_array().unwrap().clone()
}

/// The one problem whose message contains `needle`, checked to be a bad path in suite.toml at
/// the line and column where `at` starts, with help text that contains `help`.
fn hidden_problem(s: &TestSuite, needle: &str, at: &str, help: &str) -> serde_json::Value {
    let problems = json_problems(s);
    let found: Vec<_> = problems
        .iter()
        .filter(|p| p["message"].as_str().unwrap().contains(needle))
        .collect();
    assert_eq!(found.len(), 1, "no single `{needle}` in {problems:#?}");
    let p = found[0].clone();
    assert_eq!(p["kind"], "bad-path", "{p:#}");
    assert!(p["file"].as_str().unwrap().ends_with("suite.toml"), "{p:#}");
    let toml = std::fs::read_to_string(s.path().join("suite.toml")).unwrap();
    let offset = toml
        .find(at)
        .unwrap_or_else(|| panic!("{at} not in suite.toml"));
    let line = toml[..offset].matches('\n').count() + 1;
    let column = offset - toml[..offset].rfind('\n').map_or(0, |n| n + 1) + 1;
    assert_eq!(p["line"], line, "{p:#}");
    assert_eq!(p["column"], column, "{p:#}");
    assert!(
        p["help"].as_str().unwrap().contains(help),
        "help should say what to write instead: {p:#}"
    );
    p
}

/// The minimal suite with a holdout check file and an answer sheet, as hidden parts to point at.
fn with_hidden_parts() -> TestSuite {
    let s = TestSuite::minimal();
    s.write("holdout/hello/check.sh", "#!/bin/sh\ntest -f hello.txt\n");
    s.write("answers/hello.md", "echo hi > hello.txt\n");
    s
}

#[test]
fn fixture_that_is_the_suite_folder_is_refused() {
    let s = with_hidden_parts().edit("id = \"mini\"", "id = \"mini\"\nfixture = \".\"");
    hidden_problem(
        &s,
        "the fixture `.` is the suite folder itself",
        "\".\"",
        "fixture = \"fixture\"",
    );
}

#[test]
fn fixture_inside_the_holdout_is_refused() {
    let s = with_hidden_parts().edit(
        "id = \"mini\"",
        "id = \"mini\"\nfixture = \"holdout/hello\"",
    );
    hidden_problem(
        &s,
        "the fixture `holdout/hello` lies inside `holdout/`",
        "\"holdout/hello\"",
        "fixture = \"fixture\"",
    );
}

#[test]
fn fixture_that_is_the_answer_sheets_is_refused() {
    let s = with_hidden_parts().edit("id = \"mini\"", "id = \"mini\"\nfixture = \"./answers\"");
    hidden_problem(
        &s,
        "the fixture `./answers` is `answers/`, the answer sheets",
        "\"./answers\"",
        "fixture = \"fixture\"",
    );
}

#[test]
fn files_laid_from_the_holdout_or_the_answers_are_refused() {
    let s = with_hidden_parts().edit(
        "script = \"agents/oracle\"",
        "script = \"agents/oracle\"\nfiles = { \"check.sh\" = \"holdout/hello/check.sh\", \"notes.md\" = \"answers/hello.md\" }",
    );
    hidden_problem(
        &s,
        "`files` source (for `check.sh`) `holdout/hello/check.sh` lies inside `holdout/`",
        "\"holdout/hello/check.sh\"",
        "point `files` at it",
    );
    hidden_problem(
        &s,
        "`files` source (for `notes.md`) `answers/hello.md` lies inside `answers/`",
        "\"answers/hello.md\"",
        "point `files` at it",
    );
}

#[test]
fn files_laid_from_a_scripted_agent_or_the_whole_agents_folder_are_refused() {
    let s = TestSuite::minimal().edit(
        "script = \"agents/oracle\"",
        "script = \"agents/oracle\"\nfiles = { \"steps.toml\" = \"agents/oracle/hello.toml\", \"all\" = \"agents\", \"rules.toml\" = \"suite.toml\" }",
    );
    hidden_problem(
        &s,
        "`agents/oracle/hello.toml` lies inside `agents/oracle`, the `script` of variant `oracle`",
        "\"agents/oracle/hello.toml\"",
        "point `files` at it",
    );
    hidden_problem(
        &s,
        "`agents` is `agents/`",
        "\"agents\"",
        "point `files` at it",
    );
    hidden_problem(
        &s,
        "`suite.toml` is `suite.toml`, the suite's rules",
        "\"suite.toml\"",
        "point `files` at it",
    );
}

#[test]
fn a_variants_own_files_under_agents_are_still_laid() {
    let s = TestSuite::minimal().edit(
        "script = \"agents/oracle\"",
        "script = \"agents/oracle\"\nfiles = { \"SKILL.md\" = \"agents/skills/SKILL.md\" }",
    );
    s.write("agents/skills/SKILL.md", "How to say hi.\n");
    let out = s.validate();
    assert_eq!(out.code, 0, "{}", out.stderr);
}

#[test]
fn allow_path_into_the_holdout_is_refused() {
    let s = with_hidden_parts();
    write_exec(
        &s,
        "holdout/hello/check.sh",
        "#!/bin/sh\ntest -f hello.txt\n",
    );
    let s = s.edit(
        "wall_timeout_seconds = 30",
        "wall_timeout_seconds = 30\nallow = [\"holdout/hello/check.sh\"]",
    );
    hidden_problem(
        &s,
        "the `allow` path `holdout/hello/check.sh` lies inside `holdout/`",
        "\"holdout/hello/check.sh\"",
        "\"bin/check.sh\"",
    );
}

#[test]
fn script_and_service_paths_into_hidden_parts_are_refused() {
    let s = with_hidden_parts();
    s.write("holdout/hello.toml", "answer = \"done\"\n");
    write_exec(&s, "mutations/hello/serve", "#!/bin/sh\n");
    let s = s
        .edit("script = \"agents/oracle\"", "script = \"holdout\"")
        .edit(
            "[[tasks]]",
            "[[services]]\nname = \"api\"\ncommand = [\"mutations/hello/serve\"]\n\n[[tasks]]",
        );
    hidden_problem(
        &s,
        "`script` `holdout` is `holdout/`",
        "\"holdout\"",
        "script = \"agents/oracle\"",
    );
    hidden_problem(
        &s,
        "the program of service `api` `mutations/hello/serve` lies inside `mutations/`",
        "[\"mutations/hello/serve\"]",
        "\"services/serve\"",
    );
}

#[test]
fn symlinks_in_a_fixture_under_git_or_proctor_are_refused() {
    for top in [".git", ".proctor"] {
        let s = TestSuite::minimal().edit(
            "id = \"mini\"",
            &format!("id = \"mini\"\nfixture = \"{top}/work\""),
        );
        s.write(&format!("{top}/work/README.md"), "x\n");
        std::os::unix::fs::symlink("/etc/passwd", s.path().join(top).join("work/passwd")).unwrap();
        let problems = json_problems(&s);
        assert!(
            problems.iter().any(|p| p["kind"] == "forbidden-file"
                && p["file"]
                    .as_str()
                    .unwrap()
                    .ends_with(&format!("{top}/work/passwd"))),
            "{top}: {problems:#?}"
        );
    }
    // A top-level .git the agent is not given is still skipped.
    let s = TestSuite::minimal();
    s.write(".git/HEAD", "ref: refs/heads/main\n");
    std::os::unix::fs::symlink("/etc/passwd", s.path().join(".git/link")).unwrap();
    let out = s.validate();
    assert_eq!(out.code, 0, "{}", out.stderr);
}

/// The one problem whose message contains `needle`, from `validate --format json`.
fn one_problem(s: &TestSuite, needle: &str) -> serde_json::Value {
    let problems = json_problems(s);
    let found: Vec<_> = problems
        .iter()
        .filter(|p| p["message"].as_str().unwrap().contains(needle))
        .collect();
    assert_eq!(found.len(), 1, "no single `{needle}` in {problems:#?}");
    found[0].clone()
}

#[test]
fn timeouts_out_of_range_are_refused_with_the_range() {
    let s = TestSuite::minimal()
        .edit("wall_timeout_seconds = 30", "wall_timeout_seconds = 0")
        .edit(
            "prompt = \"Create",
            "validation_timeout_seconds = 86401\nprompt = \"Create",
        );
    let p = one_problem(
        &s,
        "`wall_timeout_seconds` must be between 1 and 86400 seconds (a day), not 0",
    );
    assert_eq!(
        (p["kind"].as_str(), p["line"].as_u64()),
        (Some("invalid-value"), Some(5)),
        "{p:#}"
    );
    let p = one_problem(
        &s,
        "`validation_timeout_seconds` must be between 1 and 86400 seconds (a day), not 86401",
    );
    assert_eq!(p["line"], 14, "{p:#}");
    // The bounds themselves are valid.
    let ok = TestSuite::minimal().edit("wall_timeout_seconds = 30", "wall_timeout_seconds = 86400");
    assert_eq!(ok.validate().code, 0);
}

#[test]
fn a_check_timeout_out_of_range_is_refused_with_the_range() {
    let s = TestSuite::minimal().edit(
        "{ file_contains = { path = \"hello.txt\", pattern = \"hi\" } },",
        "{ file_contains = { path = \"hello.txt\", pattern = \"hi\" } },\n  { check = { command = \"true\", timeout_seconds = 0 } },",
    );
    let out = s.validate();
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    let text = unwrapped(&format!("{}{}", out.stdout, out.stderr));
    assert!(
        text.contains("`timeout_seconds` must be between 1 and 86400 seconds (a day), not 0"),
        "{text}"
    );
}

#[test]
fn a_patch_that_is_not_utf8_names_the_byte_offset() {
    let s = TestSuite::minimal();
    s.write(
        "mutations/hello/bad.patch",
        "--- a/README.md\n+++ b/README.md\n",
    );
    let mut bytes = std::fs::read(s.path().join("mutations/hello/bad.patch")).unwrap();
    bytes.extend_from_slice(b"@@ -1 +1 @@\n-a tiny fixture\n+a \xff fixture\n");
    std::fs::write(s.path().join("mutations/hello/bad.patch"), &bytes).unwrap();
    let out = s.validate();
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    let text = unwrapped(&format!("{}{}", out.stdout, out.stderr));
    assert!(
        text.contains("the patch is not UTF-8: the byte at offset 63 (line 5, column 4)"),
        "{text}"
    );
    assert!(text.contains("bad.patch"), "names the file: {text}");
}

#[test]
fn a_nul_in_a_prompt_is_refused_at_its_task() {
    let s = TestSuite::minimal().edit("containing hi.", "containing\\u0000hi.");
    let p = one_problem(&s, "task `hello`: its prompt contains a NUL character");
    assert_eq!(p["line"], 13, "points at the task's id: {p:#}");
}

#[test]
fn a_suite_toml_that_is_not_utf8_names_the_byte_offset() {
    let s = TestSuite::minimal();
    let mut bytes = std::fs::read(s.path().join("suite.toml")).unwrap();
    let at = bytes.windows(4).position(|w| w == b"mini").unwrap();
    bytes[at] = 0xff;
    std::fs::write(s.path().join("suite.toml"), &bytes).unwrap();
    let out = s.validate();
    assert_eq!(out.code, 2, "{}", out.stderr);
    let said = unwrapped(&out.stderr);
    assert!(
        said.contains(&format!(
            "suite.toml is not UTF-8: the byte at offset {at} (line 2, column 7)"
        )),
        "{}",
        out.stderr
    );
    assert!(said.contains("save the file as UTF-8"), "{}", out.stderr);
    assert!(
        !said.contains("needs a suite.toml"),
        "the wrong help: {}",
        out.stderr
    );
}

#[test]
fn a_scripted_agent_that_is_not_utf8_names_its_file() {
    let s = TestSuite::minimal();
    let script = std::fs::read_dir(s.path().join("agents/oracle"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut bytes = std::fs::read(&script).unwrap();
    bytes.insert(0, 0xc3); // a lead byte with no continuation
    bytes.insert(1, b'x');
    std::fs::write(&script, &bytes).unwrap();
    let out = s.validate();
    assert_eq!(out.code, 2, "{}", out.stderr);
    let said = unwrapped(&out.stderr);
    assert!(
        said.contains("the script is not UTF-8: the byte at offset 0 (line 1, column 1)"),
        "{}",
        out.stderr
    );
}

#[test]
fn deep_nesting_is_one_short_line_naming_the_limit() {
    let deep = format!("x = {}{}\n", "[".repeat(5000), "]".repeat(5000));
    let s = TestSuite::minimal().edit("id = \"mini\"\n", &format!("id = \"mini\"\n{deep}"));
    let out = s.validate();
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.len() < 1000,
        "{} bytes: {}",
        out.stderr.len(),
        out.stderr.chars().take(1000).collect::<String>()
    );
    let said = unwrapped(&out.stderr);
    assert!(
        said.contains("nested deeper than the TOML parser allows"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("line 3, column"), "{}", out.stderr);
}

/// The minimal suite whose task runs a holdout check, `check_fix.py`, and has an answer sheet.
fn with_secrets() -> TestSuite {
    let s = TestSuite::minimal().edit(
        "{ file_contains",
        "{ check = \"python3 check_fix.py\" },\n  { file_contains",
    );
    s.write(
        "holdout/hello/check_fix.py",
        "import pathlib, sys\nsys.exit(0 if pathlib.Path('hello.txt').read_text().strip() == 'hi' else 1)\n",
    );
    s.write(
        "answers/hello.md",
        "# hello\n\nWrite `hi` into hello.txt; the check reads it back.\n",
    );
    s
}

#[test]
fn fixture_copies_of_a_holdout_check_and_of_an_answer_sheet_are_refused_by_name() {
    let s = with_secrets();
    s.write(
        "fixture/check_fix.py",
        &std::fs::read_to_string(s.path().join("holdout/hello/check_fix.py")).unwrap(),
    );
    // The answer sheet with CRLF line endings, trailing spaces and an extra blank line.
    let answer = std::fs::read_to_string(s.path().join("answers/hello.md")).unwrap();
    let crlf: String = answer.lines().map(|l| format!("{l}  \r\n")).collect();
    s.write("fixture/docs/notes.md", &format!("{crlf}\r\n"));
    insta::assert_snapshot!(rejected_in_place(&s, &[]));
}

#[test]
fn a_leaking_suite_is_refused_by_run_before_any_trial() {
    let s = with_secrets();
    s.write(
        "fixture/check_fix.py",
        &std::fs::read_to_string(s.path().join("holdout/hello/check_fix.py")).unwrap(),
    );
    let store = tempfile::tempdir().unwrap();
    let path = s.path().to_str().unwrap();
    for args in [
        vec!["run", path, "--dry-run"],
        vec!["run", path, "--store", store.path().to_str().unwrap()],
    ] {
        let out = proctor(&args, s.path());
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains("suite::leak"), "{}", out.stderr);
        assert!(out.stderr.contains("check_fix.py"), "{}", out.stderr);
        assert!(out.stderr.contains("1 problem found"), "{}", out.stderr);
    }
    let runs = store.path().join("runs");
    assert!(
        !runs.exists() || std::fs::read_dir(&runs).unwrap().next().is_none(),
        "a run was started"
    );
}

#[test]
fn boilerplate_in_the_fixture_and_the_hidden_parts_is_no_leak() {
    let s = with_secrets();
    // An empty __init__.py, a lone newline and a short line in both places.
    for (rel, content) in [
        ("__init__.py", ""),
        ("pkg/__init__.py", "\n"),
        ("VERSION", "1.0\n"),
    ] {
        s.write(&format!("fixture/{rel}"), content);
        s.write(&format!("holdout/hello/{rel}"), content);
    }
    // A file like the check, but not the same.
    s.write(
        "fixture/check_fix.py",
        "import pathlib, sys\nsys.exit(0 if pathlib.Path('hello.txt').read_text().strip() == 'ho' else 1)\n",
    );
    let out = s.validate();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stderr.contains("suite::"), "{}", out.stderr);
}

/// `validate --format json` of a suite that validates: its warnings.
fn json_warnings(s: &TestSuite) -> Vec<String> {
    let out = proctor(
        &["validate", s.path().to_str().unwrap(), "--format", "json"],
        s.path(),
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let doc: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(doc["valid"], true);
    doc["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_solution_the_oracle_writes_in_a_heredoc_found_in_the_fixture_is_refused() {
    let s = TestSuite::minimal();
    let solution = "def greet(name):\n    return f\"Hello, {name}!\"\n";
    s.write(
        "agents/oracle/hello.toml",
        &format!("answer = \"done\"\n\n[[steps]]\nrun = '''\ncat > greet.py <<'EOF'\n{solution}EOF\necho hi > hello.txt\n'''\n"),
    );
    s.write("fixture/lib/greet.py", solution);
    let problems = json_problems(&s);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    let p = &problems[0];
    assert_eq!(p["code"], "suite::leak", "{p:#}");
    assert_eq!(p["file"], "[SUITE]/fixture/lib/greet.py", "{p:#}");
    assert_eq!(
        p["message"],
        "this fixture file has the content of the file written by step 1 of oracle script `agents/oracle/hello.toml` (a here-document), which the agent must never see",
        "{p:#}"
    );
}

#[test]
fn a_file_kept_beside_the_oracle_found_in_the_fixture_is_refused() {
    let s = TestSuite::minimal();
    let solve = "#!/bin/sh\nprintf 'hi\\n' > hello.txt\necho solved\n";
    s.write("agents/oracle/files/hello/solve.sh", solve);
    s.write("fixture/solve.sh", solve);
    let p = one_problem(
        &s,
        "oracle solution file `agents/oracle/files/hello/solve.sh`",
    );
    assert_eq!(p["code"], "suite::leak", "{p:#}");
    assert_eq!(p["file"], "[SUITE]/fixture/solve.sh", "{p:#}");
}

/// Runs `git ARGS` in `dir` with no user or system configuration and fixed dates.
fn git(dir: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
        .output()
        .expect("these tests need `git` on PATH");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn a_fixture_git_with_commits_its_head_does_not_reach_is_reported() {
    let s = with_secrets();
    let fixture = s.path().join("fixture");
    git(&fixture, &["init", "-q", "-b", "main"]);
    git(&fixture, &["add", "-A"]);
    git(&fixture, &["commit", "-qm", "start"]);
    // A branch with a planted answer, and a commit reset away (reachable only from the reflog).
    git(&fixture, &["checkout", "-qb", "solution"]);
    std::fs::write(fixture.join("hello.txt"), "hi, planted on a branch\n").unwrap();
    git(&fixture, &["add", "-A"]);
    git(&fixture, &["commit", "-qm", "the answer"]);
    git(&fixture, &["checkout", "-q", "main"]);
    std::fs::write(
        fixture.join("extra.txt"),
        "an answer committed, then reset away\n",
    )
    .unwrap();
    git(&fixture, &["add", "-A"]);
    git(&fixture, &["commit", "-qm", "oops"]);
    let dropped = git(&fixture, &["rev-parse", "HEAD"]);
    git(&fixture, &["reset", "-q", "--hard", "HEAD~1"]);
    let head = git(&fixture, &["rev-parse", "HEAD"]);
    // Work in progress stashed, and a tag pointing straight at a blob.
    std::fs::write(fixture.join("README.md"), "stashed work\n").unwrap();
    git(&fixture, &["stash", "-q"]);
    std::fs::write(fixture.join("tagged.txt"), "a blob only a tag reaches\n").unwrap();
    let tagged = git(&fixture, &["hash-object", "-w", "tagged.txt"]);
    std::fs::remove_file(fixture.join("tagged.txt")).unwrap();
    git(&fixture, &["tag", "planted", &tagged]);
    let tree = git(&fixture, &["rev-parse", &format!("{dropped}^{{tree}}")]);
    let blob = git(&fixture, &["rev-parse", &format!("{dropped}:extra.txt")]);
    // Reported, not refused: proctor cannot tell a planted answer from leftover work.
    let warnings = json_warnings(&s);
    assert_eq!(warnings.len(), 2, "{warnings:#?}");
    assert_eq!(
        warnings[0],
        format!("[SUITE]/fixture/.git: this fixture repository holds what its HEAD does not reach, which the agent can read: ref `refs/heads/solution`; ref `refs/stash`; ref `refs/tags/planted`; 1 unreachable commit ({}); 1 unreachable tree ({}); 1 unreachable blob ({})", &dropped[..12], &tree[..12], &blob[..12]),
    );
    assert_eq!(
        warnings[1],
        format!("[SUITE]/fixture/.git: this fixture repository carries history: 1 commit(s) reachable from HEAD ({}), each of which the agent can read (`git log -p`, `git show HEAD:PATH`)", &head[..12]),
    );
    // The text output shows them as warnings, and the suite is valid.
    let out = s.validate();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stderr.matches("suite::git-history").count(),
        2,
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains('⚠'), "{}", out.stderr);
    assert!(out.stdout.contains("valid suite `mini`"), "{}", out.stdout);
}

#[test]
fn a_fixture_git_with_only_its_head_history_gets_only_the_history_warning() {
    let s = TestSuite::minimal();
    let fixture = s.path().join("fixture");
    git(&fixture, &["init", "-q", "-b", "main"]);
    git(&fixture, &["add", "-A"]);
    git(&fixture, &["commit", "-qm", "start"]);
    let warnings = json_warnings(&s);
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(
        warnings[0].contains("carries history: 1 commit(s) reachable from HEAD"),
        "{warnings:#?}"
    );
}

#[test]
fn a_holdout_check_in_the_fixture_git_history_is_refused() {
    let s = with_secrets();
    let fixture = s.path().join("fixture");
    std::fs::copy(
        s.path().join("holdout/hello/check_fix.py"),
        fixture.join("check_fix.py"),
    )
    .unwrap();
    git(&fixture, &["init", "-q", "-b", "main"]);
    git(&fixture, &["add", "-A"]);
    git(&fixture, &["commit", "-qm", "with the check"]);
    git(&fixture, &["rm", "-q", "check_fix.py"]);
    git(&fixture, &["commit", "-qm", "without it"]);
    let blob = git(&fixture, &["rev-parse", "HEAD~1:check_fix.py"]);
    let problems = json_problems(&s);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert_eq!(problems[0]["code"], "suite::leak");
    assert_eq!(problems[0]["file"], "[SUITE]/fixture/.git");
    assert_eq!(
        problems[0]["message"],
        format!("object {blob} of this repository has the content of holdout file `holdout/hello/check_fix.py`, which the agent must never see"),
    );
}

#[test]
fn a_codex_variant_on_a_model_script_without_a_model_is_refused() {
    let s = TestSuite::minimal().edit(
        "[[tasks]]",
        "[[variants]]\nid = \"codex\"\nagent = \"codex\"\nmodel_script = \"agents/model\"\n\n[[tasks]]",
    );
    s.write(
        "agents/model/hello.toml",
        "[[turns]]\ncalls = [{ role = \"shell\", command = \"echo hi > hello.txt\" }]\nusage = { input = 10, output = 2 }\n\n[[turns]]\ntext = \"done\"\n",
    );
    insta::assert_snapshot!(rejected_in_place(&s, &[]));
    // With a model name it is valid.
    let s = s.edit(
        "agent = \"codex\"\n",
        "agent = \"codex\"\nmodel = \"mock-model\"\n",
    );
    let out = s.validate();
    assert_eq!(out.code, 0, "{}", out.stderr);
}

#[test]
fn a_fixture_git_is_said_to_be_unaudited_when_git_is_not_on_path() {
    let s = TestSuite::minimal();
    let fixture = s.path().join("fixture");
    git(&fixture, &["init", "-q", "-b", "main"]);
    let empty = tempfile::tempdir().unwrap();
    let out = assert_cmd::Command::cargo_bin("proctor")
        .unwrap()
        .args(["validate", ".", "--format", "json"])
        .current_dir(s.path())
        .env("PATH", empty.path())
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["warnings"],
        serde_json::json!([
            "./fixture/.git: this fixture repository was not audited: no `git` program is on PATH"
        ])
    );
}

#[test]
fn a_variant_limited_to_tasks_needs_scripts_for_those_tasks_only() {
    // `oracle` has no script for `bye`: limited to `hello`, it needs none.
    let all = rejected(&two_tasks());
    assert!(all.contains("no script for task `bye`"), "{all}");
    let s = two_tasks().edit(
        "script = \"agents/oracle\"",
        "script = \"agents/oracle\"\ntasks = [\"hello\"]",
    );
    let out = s.validate();
    assert_eq!(out.code, 0, "{}", out.stderr);
    // Naming `bye` too brings the requirement back: the limit is not a way around it.
    let s = two_tasks().edit(
        "script = \"agents/oracle\"",
        "script = \"agents/oracle\"\ntasks = [\"hello\", \"bye\"]",
    );
    let all = rejected(&s);
    assert!(
        all.contains("variant `oracle` has no script for task `bye`"),
        "{all}"
    );
    // A model script likewise.
    let s = with_model_variant()
        .edit(
            "[[tasks]]",
            "[[tasks]]\nid = \"bye\"\nprompt = \"Delete hello.txt.\"\n\n[tasks.success]\nall = [{ file_deleted = \"hello.txt\" }]\n\n[[tasks]]",
        )
        .edit(
            "script = \"agents/oracle\"",
            "script = \"agents/oracle\"\ntasks = [\"hello\"]",
        )
        .edit(
            "model_script = \"agents/model\"",
            "model_script = \"agents/model\"\ntasks = [\"hello\"]",
        );
    let out = s.validate();
    assert_eq!(out.code, 0, "{}", out.stderr);
}

#[test]
fn a_variant_limited_to_no_task_or_to_one_task_twice_is_refused() {
    let s = TestSuite::minimal().edit(
        "script = \"agents/oracle\"",
        "script = \"agents/oracle\"\ntasks = []",
    );
    let err = rejected(&s);
    assert!(
        unwrapped(&err).contains("variant `oracle` has `tasks = []`: it would run no task"),
        "{err}"
    );
    let s = TestSuite::minimal().edit(
        "script = \"agents/oracle\"",
        "script = \"agents/oracle\"\ntasks = [\"hello\", \"hello\"]",
    );
    let err = rejected(&s);
    assert!(
        unwrapped(&err).contains("variant `oracle` names task `hello` twice"),
        "{err}"
    );
    assert!(err.contains("suite.toml:11:19"), "{err}");
}

/// The minimal suite with an interface, `tool`, and `calls` assertion `calls`.
fn with_calls(calls: &str) -> TestSuite {
    let s = TestSuite::minimal()
        .edit(
            "wall_timeout_seconds = 30",
            "wall_timeout_seconds = 30\nallow = [\"bin/tool\"]",
        )
        .edit(
            "[tasks.success]",
            "[tasks.interface]\ncommand = \"tool\"\n\n[tasks.success]",
        )
        .edit(
            "  { file_contains",
            &format!("  {calls},\n  {{ file_contains"),
        );
    write_exec(&s, "bin/tool", "#!/bin/sh\ncat\n");
    s
}

#[test]
fn stdin_matches_is_a_regex_checked_like_args_match() {
    let out = with_calls("{ calls = { min = 1, stdin_matches = \"(?i)insert into\" } }").validate();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let err = rejected(&with_calls(
        "{ calls = { min = 1, stdin_matches = \"(insert\" } }",
    ));
    assert!(err.contains("suite::bad-pattern"), "{err}");
    assert!(err.contains("suite.toml:22:40"), "{err}");
    // A misspelt key is still an error, and the valid keys name it.
    let err = rejected(&with_calls("{ calls = { min = 1, stdin_match = \"x\" } }"));
    assert!(err.contains("suite::unknown-key"), "{err}");
    assert!(unwrapped(&err).contains("`stdin_matches`"), "{err}");
}

/// A change made to the minimal suite before it is validated.
enum Change {
    /// Replace the first `.0` in suite.toml with `.1`.
    Edit(&'static str, &'static str),
    /// Add text at the end of suite.toml.
    Append(&'static str),
    /// Write a file of the suite (path, content), creating folders.
    Write(&'static str, &'static str),
    /// Write an executable file of the suite.
    Exec(&'static str, &'static str),
    /// Remove a file or a folder of the suite.
    Remove(&'static str),
    /// A symlink at `.0` pointing at `.1`.
    Symlink(&'static str, &'static str),
    /// A FIFO at this path.
    Fifo(&'static str),
}

use Change::{Append, Edit, Exec, Fifo, Remove, Symlink, Write};

/// The changes that give the minimal suite a `claude-code` variant reading model scripts from
/// agents/model/ (see [`with_model_variant`]).
const MODEL_VARIANT: &[Change] = &[
    Edit(
        "[[tasks]]",
        "[[variants]]\nid = \"claude\"\nagent = \"claude-code\"\nmodel_script = \"agents/model\"\n\n[[tasks]]",
    ),
    Write(
        "agents/model/hello.toml",
        "[[turns]]\ncalls = [{ role = \"shell\", command = \"echo hi > hello.txt\" }]\nusage = { input = 10, output = 2 }\n\n[[turns]]\ntext = \"done\"\n",
    ),
];

/// Applies `changes` to the suite `s`, in order.
fn apply(s: TestSuite, changes: &[Change]) -> TestSuite {
    let mut s = s;
    for change in changes {
        s = match *change {
            Edit(from, to) => s.edit(from, to),
            Append(text) => {
                let toml = std::fs::read_to_string(s.path().join("suite.toml")).unwrap();
                s.write("suite.toml", &format!("{toml}{text}"));
                s
            }
            Write(rel, content) => {
                s.write(rel, content);
                s
            }
            Exec(rel, content) => {
                write_exec(&s, rel, content);
                s
            }
            Remove(rel) => {
                let path = s.path().join(rel);
                if path.is_dir() {
                    std::fs::remove_dir_all(path).unwrap();
                } else {
                    std::fs::remove_file(path).unwrap();
                }
                s
            }
            Symlink(rel, target) => {
                std::os::unix::fs::symlink(target, s.path().join(rel)).unwrap();
                s
            }
            Fifo(rel) => {
                let status = std::process::Command::new("mkfifo")
                    .arg(s.path().join(rel))
                    .status()
                    .unwrap();
                assert!(status.success());
                s
            }
        };
    }
    s
}

/// One broken suite and the diagnostic it must get.
struct Case {
    /// The snapshot's name (`snapshots/validate__NAME.snap`); each case was a test of this name.
    name: &'static str,
    /// Changes made first: none, or [`MODEL_VARIANT`].
    base: &'static [Change],
    /// The changes made to the minimal suite, after `base`.
    changes: &'static [Change],
    /// `None`: `proctor validate SUITE` by its absolute path (redacted to `[SUITE]`). `Some`:
    /// `proctor validate . ARGS` inside the suite's folder, its paths relative.
    in_place: Option<&'static [&'static str]>,
    /// Where the first problem is, as the report names it (`FILE[:LINE:COLUMN]`); `None` for a
    /// mistake on the command line, which no file holds.
    at: Option<&'static str>,
    /// Fragments of the report: the message's start and, after `help: `, the hint's.
    says: &'static [&'static str],
}

const NONE: &[Change] = &[];

/// Each kind of mistake gets exit status 2 and a located, actionable diagnostic: the table's
/// location and fragments, and the whole report as its snapshot.
#[test]
fn each_mistake_gets_a_located_diagnostic() {
    for case in CASES {
        let s = apply(apply(TestSuite::minimal(), case.base), case.changes);
        let stderr = match case.in_place {
            None => rejected(&s),
            Some(args) => rejected_in_place(&s, args),
        };
        if let Some(at) = case.at {
            assert!(
                stderr.contains(&format!("× {at}: ")),
                "{}: no problem at {at}:\n{stderr}",
                case.name
            );
        }
        for fragment in case.says {
            assert!(
                stderr.contains(fragment),
                "{}: no {fragment:?} in:\n{stderr}",
                case.name
            );
        }
        insta::assert_snapshot!(case.name, stderr);
    }
}

/// Every mistake of the table, in the order the tests were written.
const CASES: &[Case] = &[
    Case {
        name: "toml_syntax_error",
        base: NONE,
        changes: &[Edit("id = \"mini\"", "id = \"mini")],
        in_place: None,
        at: Some("[SUITE]/suite.toml:2:11"),
        says: &["invalid basic string", "help: see https://toml.io for the syntax"],
    },
    Case {
        name: "assertions_written_as_an_array_of_tables_get_the_inline_form",
        base: NONE,
        changes: &[
            Edit(
                "[tasks.success]\nall = [\n  { file_contains = { path = \"hello.txt\", pattern = \"hi\" } },\n]",
                "[[tasks.success.all]]\nfile_contains = { path = \"hello.txt\", pattern = \"hi\" }",
            ),
        ],
        in_place: None,
        at: Some("[SUITE]/suite.toml:16:17"),
        says: &["`[[tasks.success.all]]` cannot be written as an", "help: write the list inline under"],
    },
    Case {
        name: "unknown_key_at_top_level",
        base: NONE,
        changes: &[Edit("id = \"mini\"", "id = \"mini\"\nfixtures = \"fixture\"")],
        in_place: None,
        at: Some("[SUITE]/suite.toml:3:1"),
        says: &["unknown field `fixtures`, expected one of", "help: did you mean `fixture`?"],
    },
    Case {
        name: "unknown_key_in_defaults",
        base: NONE,
        changes: &[Edit("wall_timeout_seconds", "wall_timeout_secs")],
        in_place: None,
        at: Some("[SUITE]/suite.toml:5:1"),
        says: &["unknown field `wall_timeout_secs`, expected one of", "help: did you mean `wall_timeout_seconds`?"],
    },
    Case {
        name: "unknown_key_in_variant",
        base: NONE,
        changes: &[Edit("agent = \"script\"", "agent = \"script\"\nprompt_prefx = \"x\"")],
        in_place: None,
        at: Some("[SUITE]/suite.toml:10:1"),
        says: &["unknown field `prompt_prefx`, expected one of", "help: did you mean `prompt_prefix`?"],
    },
    Case {
        name: "unknown_key_in_task",
        base: NONE,
        changes: &[Edit("prompt = ", "expected = \"complete\"\nprompt = ")],
        in_place: None,
        at: Some("[SUITE]/suite.toml:14:1"),
        says: &["unknown field `expected`, expected one of", "help: did you mean `expect`?"],
    },
    Case {
        name: "unknown_assertion_kind",
        base: NONE,
        changes: &[Edit("{ file_contains", "{ answer_match = \"hi\" },\n  { file_contains")],
        in_place: None,
        at: Some("[SUITE]/suite.toml:18:5"),
        says: &["unknown variant `answer_match`, expected one of", "help: did you mean `answer_matches`?"],
    },
    Case {
        name: "unknown_key_inside_an_assertion",
        base: NONE,
        changes: &[Edit("pattern = \"hi\"", "pattern = \"hi\", line = 1")],
        in_place: None,
        at: Some("[SUITE]/suite.toml:18:59"),
        says: &["unknown field `line`, expected `path` or", "help: valid keys here: `path`, `pattern`"],
    },
    Case {
        name: "second_key_in_an_assertion",
        base: NONE,
        changes: &[Edit("{ file_contains", "{ answer_matches = \"hi\", timeout = 5 },\n  { file_contains")],
        in_place: None,
        at: Some("[SUITE]/suite.toml:18:28"),
        says: &["unknown field `timeout`, expected `answer_matches`", "help: an assertion is a one-key table: keep `{ answer_matches = ... }` alone"],
    },
    Case {
        name: "unknown_key_inside_not",
        base: NONE,
        changes: &[Edit("{ file_contains", "{ not = { file_added = \"*.bak\", bogus = 1 } },\n  { file_contains")],
        in_place: None,
        at: Some("[SUITE]/suite.toml:18:35"),
        says: &["unknown field `bogus`, expected `file_added`", "help: an assertion is a one-key table: keep `{ file_added = ... }` alone"],
    },
    Case {
        name: "unknown_key_deep_under_not",
        base: NONE,
        changes: &[Edit("{ file_contains", "{ not = { not = { file_contains = { path = \"x\", patern = \"y\" } } } },\n  { file_contains")],
        in_place: None,
        at: Some("[SUITE]/suite.toml:18:51"),
        says: &["unknown field `patern`, expected `path` or", "help: did you mean `pattern`?"],
    },
    Case {
        name: "unknown_key_in_check_table",
        base: NONE,
        changes: &[
            Edit(
                "{ file_contains",
                "{ check = { command = \"true\", exit_code = 0 } },\n  { file_contains",
            ),
        ],
        in_place: None,
        at: Some("[SUITE]/suite.toml:18:33"),
        says: &["unknown field `exit_code`, expected one of", "help: did you mean `exit`?"],
    },
    Case {
        name: "wrong_type",
        base: NONE,
        changes: &[Edit("wall_timeout_seconds = 30", "wall_timeout_seconds = \"30s\"")],
        in_place: None,
        at: Some("[SUITE]/suite.toml:5:24"),
        says: &["invalid type: string \"30s\", expected a", "help: write a whole number (0"],
    },
    Case {
        name: "bad_enum_value",
        base: NONE,
        changes: &[
            Edit(
                "wall_timeout_seconds = 30",
                "wall_timeout_seconds = 30\nnetwork = \"offline\"",
            ),
        ],
        in_place: None,
        at: Some("[SUITE]/suite.toml:6:11"),
        says: &["unknown variant `offline`, expected one of", "help: write one of: `none`, `loopback`,"],
    },
    Case {
        name: "bad_check_network_value",
        base: NONE,
        changes: &[
            Edit(
                "prompt = \"Create",
                "check_network = \"wifi\"\nprompt = \"Create",
            ),
        ],
        in_place: None,
        at: Some("[SUITE]/suite.toml:14:17"),
        says: &["unknown variant `wifi`, expected one of", "help: write one of: `none`, `loopback`,"],
    },
    Case {
        name: "bad_expect_value",
        base: NONE,
        changes: &[Edit("prompt = ", "expect = \"refusal\"\nprompt = ")],
        in_place: None,
        at: Some("[SUITE]/suite.toml:14:10"),
        says: &["unknown variant `refusal`, expected one of", "help: did you mean `refuse`?"],
    },
    Case {
        name: "bad_agent_value",
        base: NONE,
        changes: &[Edit("agent = \"script\"", "agent = \"claude\"")],
        in_place: None,
        at: Some("[SUITE]/suite.toml:9:9"),
        says: &["unknown variant `claude`, expected one of", "help: did you mean `claude-code`?"],
    },
    Case {
        name: "missing_required_key",
        base: NONE,
        changes: &[Edit("prompt = \"Create hello.txt containing hi.\"\n", "")],
        in_place: None,
        at: Some("[SUITE]/suite.toml:12:1"),
        says: &["missing field `prompt`", "help: add `prompt = ...` to"],
    },
    Case {
        name: "bad_regex",
        base: NONE,
        changes: &[Edit("pattern = \"hi\"", "pattern = \"(hi\"")],
        in_place: None,
        at: Some("[SUITE]/suite.toml:18:53"),
        says: &["the regex `(hi` does not compile:", "help: regexes use Rust `regex` syntax;"],
    },
    Case {
        name: "missing_fixture",
        base: NONE,
        changes: &[Remove("fixture")],
        in_place: None,
        at: Some("[SUITE]"),
        says: &["the fixture directory `fixture` does not", "help: create a `fixture/` folder with"],
    },
    Case {
        name: "symlink_in_suite",
        base: NONE,
        changes: &[Symlink("fixture/passwd", "/etc/passwd")],
        in_place: None,
        at: Some("[SUITE]/fixture/passwd"),
        says: &["a symlink inside the suite", "help: suites hold regular files and"],
    },
    Case {
        name: "fifo_in_suite",
        base: NONE,
        changes: &[Fifo("fixture/pipe")],
        in_place: None,
        at: Some("[SUITE]/fixture/pipe"),
        says: &["a FIFO inside the suite", "help: suites hold regular files and"],
    },
    Case {
        name: "parent_dir_path",
        base: NONE,
        changes: &[Edit("script = \"agents/oracle\"", "script = \"../agents/oracle\"")],
        in_place: None,
        at: Some("[SUITE]/suite.toml:10:10"),
        says: &["`script` path `../agents/oracle` climbs out with", "help: write a path relative to"],
    },
    Case {
        name: "absolute_path",
        base: NONE,
        changes: &[Edit("id = \"mini\"", "id = \"mini\"\nfixture = \"/etc\"")],
        in_place: None,
        at: Some("[SUITE]/suite.toml:3:11"),
        says: &["the fixture path `/etc` is absolute", "help: write a path relative to"],
    },
    Case {
        name: "non_patch_file_under_mutations",
        base: NONE,
        changes: &[Write("mutations/hello/notes.patch", "remember to change line two\n")],
        in_place: None,
        at: Some("[SUITE]/mutations/hello/notes.patch:1:1"),
        says: &["not a unified diff: no `---", "help: write mutations with `diff -u`"],
    },
    Case {
        name: "patch_that_does_not_apply",
        base: NONE,
        changes: &[
            Write(
                "mutations/hello/two.patch",
                "--- a/README.md\n+++ b/README.md\n@@ -2,1 +2,1 @@\n-line 2\n+line II\n",
            ),
        ],
        in_place: None,
        at: Some("[SUITE]/mutations/hello/two.patch"),
        says: &["does not apply to the fixture:", "help: regenerate the patch against the"],
    },
    Case {
        name: "duplicate_task_ids",
        base: NONE,
        changes: &[
            Append(
                "\n[[tasks]]\nid = \"hello\"\nprompt = \"again\"\n\n[tasks.success]\nall = [{ files_unchanged = true }]\n",
            ),
        ],
        in_place: None,
        at: Some("[SUITE]/suite.toml:22:6"),
        says: &["two tasks have the id `hello`", "help: give each task its own"],
    },
    Case {
        name: "duplicate_variant_ids",
        base: NONE,
        changes: &[
            Edit(
                "[[tasks]]",
                "[[variants]]\nid = \"oracle\"\nagent = \"script\"\nscript = \"agents/oracle\"\n\n[[tasks]]",
            ),
        ],
        in_place: None,
        at: Some("[SUITE]/suite.toml:13:6"),
        says: &["two variants have the id `oracle`", "help: give each variant its own"],
    },
    Case {
        name: "unknown_task_in_holdout",
        base: NONE,
        changes: &[Write("holdout/helo/check.py", "print('x')\n")],
        in_place: None,
        at: Some("[SUITE]/holdout/helo"),
        says: &["`holdout/helo` names no task of this", "help: did you mean `holdout/hello`?"],
    },
    Case {
        name: "unknown_task_in_answers",
        base: NONE,
        changes: &[Write("answers/goodbye.md", "# nothing\n")],
        in_place: None,
        at: Some("[SUITE]/answers/goodbye.md"),
        says: &["answer sheet `goodbye.md` names no task", "help: answer sheets are answers/TASK_ID.md; tasks:"],
    },
    Case {
        name: "wrong_schema_version",
        base: NONE,
        changes: &[Edit("schema_version = 1", "schema_version = 2")],
        in_place: None,
        at: Some("[SUITE]/suite.toml:1:18"),
        says: &["this suite is written for schema_version", "help: rewrite the suite to the"],
    },
    Case {
        name: "script_missing_for_a_task",
        base: NONE,
        changes: &[Remove("agents/oracle/hello.toml")],
        in_place: None,
        at: Some("[SUITE]/suite.toml:10:10"),
        says: &["variant `oracle` has no script for", "help: write [SUITE]/agents/oracle/hello.toml with `answer ="],
    },
    Case {
        name: "unknown_key_in_a_script",
        base: NONE,
        changes: &[
            Write(
                "agents/oracle/hello.toml",
                "answer = \"done\"\n\n[[steps]]\ncmd = \"true\"\n",
            ),
        ],
        in_place: None,
        at: Some("[SUITE]/agents/oracle/hello.toml:4:1"),
        says: &["unknown field `cmd`, expected `run`", "help: valid keys here: `run`"],
    },
    Case {
        name: "state_assertion_names_unknown_service",
        base: NONE,
        changes: &[
            Edit(
                "{ file_contains",
                "{ state = { service = \"chat\", pointer = \"/sent\", exists = true } },\n  { file_contains",
            ),
        ],
        in_place: None,
        at: Some("[SUITE]/suite.toml:18:25"),
        says: &["no service is named `chat`", "help: services of this suite: none"],
    },
    Case {
        name: "a_variant_naming_a_task_the_suite_does_not_have",
        base: NONE,
        changes: &[
            Edit(
                "script = \"agents/oracle\"",
                "script = \"agents/oracle\"\ntasks = [\"helo\"]",
            ),
        ],
        in_place: None,
        at: Some("[SUITE]/suite.toml:11:10"),
        says: &["variant `oracle` names task `helo`, which", "help: did you mean `hello`?"],
    },
    Case {
        name: "allow_name_found_nowhere",
        base: NONE,
        changes: &[
            Edit(
                "wall_timeout_seconds = 30",
                "wall_timeout_seconds = 30\nallow = [\"no-such-command-anywhere\"]",
            ),
        ],
        in_place: Some(&[]),
        at: Some("./suite.toml:6:10"),
        says: &["`allow` entry `no-such-command-anywhere` is not a", "help: install `no-such-command-anywhere` on PATH (or"],
    },
    Case {
        name: "allow_path_that_is_not_executable",
        base: NONE,
        changes: &[
            Edit(
                "wall_timeout_seconds = 30",
                "wall_timeout_seconds = 30\nallow = [\"bin/tool\"]",
            ),
            Write("bin/tool", "#!/bin/sh\necho tool\n"),
        ],
        in_place: Some(&[]),
        at: Some("./suite.toml:6:10"),
        says: &["`allow` entry `bin/tool` is not an", "help: allowed commands are run through"],
    },
    Case {
        name: "interface_command_not_allowed",
        base: NONE,
        changes: &[
            Edit(
                "wall_timeout_seconds = 30",
                "wall_timeout_seconds = 30\nallow = [\"sh\"]",
            ),
            Edit(
                "[tasks.success]",
                "[tasks.interface]\ncommand = \"chat\"\n\n[tasks.success]",
            ),
        ],
        in_place: Some(&[]),
        at: Some("./suite.toml:18:11"),
        says: &["task `hello` counts calls of `chat`,", "help: add \"chat\" to `allow` in"],
    },
    Case {
        name: "interface_command_without_any_allow_list",
        base: NONE,
        changes: &[
            Edit(
                "[tasks.success]",
                "[tasks.interface]\ncommand = \"sh\"\n\n[tasks.success]",
            ),
        ],
        in_place: Some(&[]),
        at: Some("./suite.toml:17:11"),
        says: &["task `hello` counts calls of `sh`,", "help: add `allow = [\"sh\"]` to"],
    },
    Case {
        name: "interface_command_missing_from_a_variants_allow",
        base: NONE,
        changes: &[
            Edit(
                "script = \"agents/oracle\"",
                "script = \"agents/oracle\"\nallow = [\"sh\"]",
            ),
            Edit("prompt = ", "allow = [\"bin/tool\"]\nprompt = "),
            Edit(
                "[tasks.success]",
                "[tasks.interface]\ncommand = \"tool\"\n\n[tasks.success]",
            ),
            Exec("bin/tool", "#!/bin/sh\necho tool\n"),
        ],
        in_place: Some(&[]),
        at: Some("./suite.toml:19:11"),
        says: &["task `hello` counts calls of `tool`,", "help: add \"tool\" to the `allow`"],
    },
    Case {
        name: "model_script_with_an_unknown_key",
        base: MODEL_VARIANT,
        changes: &[
            Write(
                "agents/model/hello.toml",
                "[[turns]]\ntext = \"done\"\nusage = { input = 10, ouptut = 2 }\n",
            ),
        ],
        in_place: Some(&[]),
        at: Some("./agents/model/hello.toml:3:23"),
        says: &["unknown field `ouptut`, expected one of", "help: did you mean `output`?"],
    },
    Case {
        name: "model_script_with_a_syntax_error",
        base: MODEL_VARIANT,
        changes: &[Write("agents/model/hello.toml", "[[turns]\ntext = \"done\"\n")],
        in_place: Some(&[]),
        at: Some("./agents/model/hello.toml:1:8"),
        says: &["invalid table header", "help: see https://toml.io for the syntax"],
    },
    Case {
        name: "model_script_with_an_inconsistent_turn",
        base: MODEL_VARIANT,
        changes: &[
            Write(
                "agents/model/hello.toml",
                "[[turns]]\ntext = \"looking\"\n\n[[turns]]\ncalls = [{ role = \"shell\" }]\n",
            ),
        ],
        in_place: Some(&[]),
        at: Some("./agents/model/hello.toml:4:1"),
        says: &["turn 2 of the model script:", "help: a turn is a final"],
    },
    Case {
        name: "model_script_missing_for_a_task",
        base: MODEL_VARIANT,
        changes: &[Remove("agents/model/hello.toml")],
        in_place: Some(&[]),
        at: Some("./suite.toml:15:16"),
        says: &["variant `claude` has no model script", "help: write agents/model/hello.toml in the suite:"],
    },
    Case {
        name: "script_that_does_not_parse",
        base: NONE,
        changes: &[Write("agents/oracle/hello.toml", "answer = \"done\n")],
        in_place: Some(&[]),
        at: Some("./agents/oracle/hello.toml:1:15"),
        says: &["invalid basic string", "help: see https://toml.io for the syntax"],
    },
    Case {
        name: "validate_task_that_the_suite_does_not_have",
        base: NONE,
        changes: NONE,
        in_place: Some(&["--task", "helo"]),
        at: None,
        says: &["suite `mini` has no task `helo`", "help: did you mean `--task hello`?"],
    },
    Case {
        name: "check_script_missing_from_the_holdout",
        base: NONE,
        changes: &[
            Edit(
                "{ file_contains",
                "{ check = \"python3 check_fix.py --strict\" },\n  { file_contains",
            ),
        ],
        in_place: Some(&[]),
        at: Some("./suite.toml:18:22"),
        says: &["a `check` of task `hello` runs", "help: checks run in the end-state"],
    },
    Case {
        name: "check_program_missing_from_the_holdout",
        base: NONE,
        changes: &[
            Edit(
                "{ file_contains",
                "{ not = { check = \"./verify.sh\" } },\n  { file_contains",
            ),
        ],
        in_place: Some(&[]),
        at: Some("./suite.toml:18:22"),
        says: &["a `check` of task `hello` runs", "help: checks run in the end-state"],
    },
    Case {
        name: "unknown_promotion_metrics",
        base: NONE,
        changes: &[
            Edit(
                "[[variants]]",
                "[promotion]\nbaseline = \"oracle\"\ncandidate = \"oracle\"\nprimary_metric = \"completion\"\nno_regression = [\"failure_rate\", \"speed\"]\n\n[[variants]]",
            ),
        ],
        in_place: Some(&[]),
        at: Some("./suite.toml:10:18"),
        says: &["`completion` is not a metric proctor", "help: did you mean `completion_rate`? The"],
    },
    Case {
        name: "unknown_promotion_statistics",
        base: NONE,
        changes: &[
            // A statistic that is not one, and a statistic on a rate: each named with what to write.
            Edit(
                "[[variants]]",
                "[promotion]\nbaseline = \"oracle\"\ncandidate = \"oracle\"\nprimary_metric = \"completion_rate\"\nno_regression = [\"wrong_turns:mediam\", \"failure_rate:mean\", \"calls:total\"]\n\n[[variants]]",
            ),
        ],
        in_place: Some(&[]),
        at: Some("./suite.toml:11:18"),
        says: &["`mediam` in `wrong_turns:mediam` is not a", "help: did you mean `wrong_turns:median`? Write"],
    },
    Case {
        // A power threshold below 6 pairs: no count of fair coin flips is evidence below it.
        name: "underpowered_below_under_the_power_floor",
        base: NONE,
        changes: &[Edit("[defaults]", "[report]\nunderpowered_below = 1\n\n[defaults]")],
        in_place: Some(&[]),
        at: Some("./suite.toml:5:22"),
        says: &[
            "`underpowered_below = 1` is below 6, the fewest matched pairs",
            "help: write `underpowered_below = 6` or more",
        ],
    },
    Case {
        // With gates, a release run too short for them: it would fail `sample_size` every time.
        name: "release_trials_below_the_gates_sample_size",
        base: NONE,
        changes: &[
            Edit("id = \"mini\"", "id = \"mini\"\nrelease_trials = 3"),
            Edit(
                "[[variants]]",
                "[promotion]\nbaseline = \"oracle\"\ncandidate = \"oracle\"\n\n[[variants]]",
            ),
        ],
        in_place: Some(&[]),
        at: Some("./suite.toml:3:18"),
        says: &[
            "`release_trials = 3` is below `underpowered_below = 8`: every task of a",
            "help: write `release_trials = 8` or more",
        ],
    },
    Case {
        name: "expect_refuse_without_a_refusal_section",
        base: NONE,
        changes: &[Edit("prompt = ", "expect = \"refuse\"\nprompt = ")],
        in_place: Some(&[]),
        at: Some("./suite.toml:14:10"),
        says: &["task `hello` expects a refusal, but", "help: add to this task:"],
    },
    Case {
        name: "expect_ask_without_ask_patterns",
        base: NONE,
        changes: &[
            Edit("prompt = ", "expect = \"ask\"\nprompt = "),
            Edit(
                "{ file_contains",
                "{ files_unchanged = true },\n  { file_contains",
            ),
            Append("\n[tasks.refusal]\nrefuse_patterns = [\"(?i)can't\"]\n"),
        ],
        in_place: Some(&[]),
        at: Some("./suite.toml:14:10"),
        says: &["task `hello` expects a question to", "help: add to this task's [tasks.refusal]:"],
    },    Case {
        name: "unknown_key_in_mcp_server",
        base: NONE,
        changes: &[Edit("[[variants]]", "[[mcp_servers]]\nname = \"notes\"\ncomand = [\"python3\", \"notes.py\"]\n\n[[variants]]")],
        in_place: None,
        at: Some("[SUITE]/suite.toml:9:1"),
        says: &["unknown field `comand`, expected one of", "help: did you mean `command`?"],
    },
    Case {
        name: "interface_names_an_unknown_mcp_server",
        base: NONE,
        changes: &[
            Edit("[[variants]]", "[[mcp_servers]]\nname = \"notes\"\ncommand = [\"python3\"]\n\n[[variants]]"),
            Edit("[tasks.success]", "[tasks.interface]\nmcp = \"notez\"\n\n[tasks.success]"),
        ],
        in_place: None,
        at: Some("[SUITE]/suite.toml:21:7"),
        says: &["no MCP server is named `notez`", "help: did you mean `notes`?"],
    },
    Case {
        name: "mcp_interface_with_a_command_key",
        base: NONE,
        changes: &[
            Edit("[[variants]]", "[[mcp_servers]]\nname = \"notes\"\ncommand = [\"python3\"]\n\n[[variants]]"),
            Edit("[tasks.success]", "[tasks.interface]\nmcp = \"notes\"\nverb_arg = 2\n\n[tasks.success]"),
        ],
        in_place: None,
        at: Some("[SUITE]/suite.toml:22:12"),
        says: &["`verb_arg` reads a command's calls", "help: remove it: an MCP interface's verb"],
    },
    Case {
        name: "command_calls_of_an_mcp_interface",
        base: NONE,
        changes: &[
            Edit("[[variants]]", "[[mcp_servers]]\nname = \"notes\"\ncommand = [\"python3\"]\n\n[[variants]]"),
            Edit("[tasks.success]", "[tasks.interface]\nmcp = \"notes\"\n\n[tasks.success]"),
            Edit("{ file_contains", "{ calls = { verb = \"add\", min = 1 } },\n  { file_contains"),
        ],
        in_place: None,
        at: Some("[SUITE]/suite.toml:25:3"),
        says: &["counts command `calls`, but its interface", "help: count its tool calls"],
    },
    Case {
        name: "mcp_server_over_http_without_its_service",
        base: NONE,
        changes: &[Edit("[[variants]]", "[[mcp_servers]]\nname = \"notes\"\nurl = \"http://127.0.0.1:7070/mcp\"\n\n[[variants]]")],
        in_place: None,
        at: Some("[SUITE]/suite.toml:9:7"),
        says: &["has a `url` but no `service`", "help: name the [[services]] entry that serves it"],
    },
];

/// The license header the quoted check and an honest fixture file share.
const LICENSE: &str = "# Copyright 2026 Example Corp.\n# Licensed under the Apache License, Version 2.0 (the \"License\");\n# you may not use this file except in compliance with the License.\n# See the LICENSE file for the specific terms.\n";

/// The hidden check of [`with_quotable_secrets`], after its license header: 10 meaningful lines.
const QUOTED_CHECK: &str = "import pathlib\nimport sys\n\n\ndef read_greeting():\n    return pathlib.Path(\"hello.txt\").read_text(encoding=\"utf-8\")\n\n\ndef test_greeting_is_exact():\n    assert read_greeting().strip() == \"hi\"\n\n\ndef test_greeting_is_one_line():\n    assert len(read_greeting().splitlines()) == 1\n\n\nif __name__ == \"__main__\":\n    sys.exit(0 if read_greeting().strip() == \"hi\" else 1)\n";

/// The answer sheet of [`with_quotable_secrets`]: 5 meaningful lines.
const QUOTED_ANSWER: &str = "# hello\n\nThe agent must write exactly `hi` and a newline into hello.txt.\nThe hidden check reads the file back, strips it and compares it with \"hi\".\nA second check requires the file to hold exactly one line.\nAnything else in the workspace is ignored by the grader.\n";

/// The oracle's solution file of [`with_quotable_secrets`]: 6 meaningful lines.
const QUOTED_SOLUTION: &str = "import sys\n\ndef greet(name):\n    cleaned = name.strip() or \"world\"\n    return f\"Hello, {cleaned}!\"\n\nif __name__ == \"__main__\":\n    print(greet(\" \".join(sys.argv[1:])))\n";

/// The minimal suite with a hidden check (a license header, then 10 lines), an answer sheet and
/// an oracle solution file, each long enough to be quoted.
fn with_quotable_secrets() -> TestSuite {
    let s = TestSuite::minimal().edit(
        "{ file_contains",
        "{ check = \"python3 test_hello.py\" },\n  { file_contains",
    );
    s.write(
        "holdout/hello/test_hello.py",
        &format!("{LICENSE}{QUOTED_CHECK}"),
    );
    s.write("answers/hello.md", QUOTED_ANSWER);
    s.write("agents/oracle/files/hello/greet.py", QUOTED_SOLUTION);
    s
}

/// `text` with every line prefixed by `prefix`.
fn prefixed(text: &str, prefix: &str) -> String {
    text.lines().map(|l| format!("{prefix}{l}\n")).collect()
}

#[test]
fn a_hidden_check_quoted_in_a_fixture_readme_is_refused_in_each_shape() {
    let s = with_quotable_secrets();
    let check = format!("{LICENSE}{QUOTED_CHECK}");
    // Indented as a Markdown code block: the check's 4 header lines and its code are lines 5-26.
    s.write(
        "fixture/docs/indented.md",
        &format!(
            "# Grading\n\nThe grader runs this:\n\n{}\nand nothing else.\n",
            prefixed(&check, "    ")
        ),
    );
    // Quoted with `> `, the header left out: lines 3-20.
    s.write(
        "fixture/docs/quoted.md",
        &format!(
            "Someone wrote on the tracker:\n\n{}\nThanks!\n",
            prefixed(QUOTED_CHECK, "> ")
        ),
    );
    // In a code fence, only its two tests and the `__main__` guard (6 of its lines): lines 7-16.
    let tests: String = QUOTED_CHECK.lines().skip(8).collect::<Vec<_>>().join("\n");
    s.write(
        "fixture/README.md",
        &format!(
            "a tiny fixture\nline two\nline three\n\nThe tests:\n```python\n{tests}\n```\nMore text after it.\n"
        ),
    );
    let problems = json_problems(&s);
    let got: Vec<(String, String)> = problems
        .iter()
        .map(|p| {
            assert_eq!(p["code"], "suite::leak", "{p:#}");
            (
                p["file"].as_str().unwrap().to_string(),
                p["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let check_name = "holdout file `holdout/hello/test_hello.py`";
    let quoted = |range: &str, n: usize| {
        format!("this fixture file quotes {check_name} at {range} ({n} of its 14 meaningful lines), which the agent must never see")
    };
    assert_eq!(
        got,
        [
            (
                "[SUITE]/fixture/README.md".to_string(),
                quoted("lines 7-16", 6)
            ),
            (
                "[SUITE]/fixture/docs/indented.md".to_string(),
                quoted("lines 5-26", 14)
            ),
            (
                "[SUITE]/fixture/docs/quoted.md".to_string(),
                quoted("lines 3-20", 10)
            ),
        ]
    );
}

#[test]
fn a_quoted_secret_is_shown_like_a_copy() {
    let s = with_quotable_secrets();
    s.write(
        "fixture/CHANGELOG.md",
        &format!("# Changelog\n\n## 1.1\n- Faster start-up.\n\n{QUOTED_ANSWER}\n## 1.0\n- First release.\n"),
    );
    insta::assert_snapshot!(rejected_in_place(&s, &[]));
}

#[test]
fn an_answer_sheet_in_a_changelog_and_a_solution_in_a_readme_are_refused() {
    let s = with_quotable_secrets();
    // The answer sheet pasted in the middle of a changelog: its lines 6-11.
    s.write(
        "fixture/CHANGELOG.md",
        &format!("# Changelog\n\n## 1.1\n- Faster start-up.\n\n{QUOTED_ANSWER}\n## 1.0\n- First release.\n"),
    );
    // The solution's body (without its import) in the README, indented: lines 7-12.
    let body: String = QUOTED_SOLUTION
        .lines()
        .skip(2)
        .collect::<Vec<_>>()
        .join("\n");
    s.write(
        "fixture/README.md",
        &format!(
            "a tiny fixture\nline two\nline three\n\nHow to greet:\n\n{}\n",
            prefixed(&body, "    ")
        ),
    );
    let problems = json_problems(&s);
    let got: Vec<(&str, &str)> = problems
        .iter()
        .map(|p| {
            assert_eq!(p["code"], "suite::leak", "{p:#}");
            (p["file"].as_str().unwrap(), p["message"].as_str().unwrap())
        })
        .collect();
    assert_eq!(
        got,
        [
            ("[SUITE]/fixture/CHANGELOG.md", "this fixture file quotes answer sheet `answers/hello.md` at lines 6-11 (5 of its 5 meaningful lines), which the agent must never see"),
            ("[SUITE]/fixture/README.md", "this fixture file quotes oracle solution file `agents/oracle/files/hello/greet.py` at lines 7-12 (5 of its 6 meaningful lines), which the agent must never see"),
        ]
    );
}

#[test]
fn shared_boilerplate_file_names_and_a_license_header_are_no_quote() {
    let s = with_quotable_secrets();
    // A public test sharing only imports, `def test_` lines and the `__main__` guard with the
    // check: never 4 consecutive lines.
    let public = "import pathlib\nimport sys\n\n\ndef read_greeting():\n    return pathlib.Path(\"README.md\").read_text()\n\n\ndef test_greeting_is_exact():\n    assert read_greeting().startswith(\"a tiny\")\n\n\nif __name__ == \"__main__\":\n    sys.exit(0)\n";
    s.write("fixture/tests/test_public.py", public);
    // A README that names the task's files.
    s.write(
        "fixture/README.md",
        "a tiny fixture\nline two\nline three\n\nThe task: create hello.txt. It is graded by a hidden test_hello.py,\nexplained in answers/hello.md, and solved by the reference greet.py.\nRun `python3 -m pytest tests/` for the public tests.\n",
    );
    // A source file with the check's license header and imports, then code of its own.
    s.write(
        "fixture/src/lib.py",
        &format!("{LICENSE}import pathlib\nimport sys\n\n\ndef main():\n    print(pathlib.Path.cwd(), file=sys.stderr)\n"),
    );
    // A holdout file laid over the public test, extending it: it shares the public part.
    s.write(
        "holdout/hello/tests/test_public.py",
        &format!("{public}\n\ndef test_hidden_extra():\n    assert \"hi\" in pathlib.Path(\"hello.txt\").read_text()\n"),
    );
    let out = s.validate();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stderr.contains("suite::"), "{}", out.stderr);
    // The same suite with the check quoted is refused: the secrets above are compared.
    s.write("fixture/docs/check.md", &prefixed(QUOTED_CHECK, "> "));
    let p = one_problem(&s, "quotes holdout file `holdout/hello/test_hello.py`");
    assert_eq!(p["file"], "[SUITE]/fixture/docs/check.md", "{p:#}");
    assert_eq!(json_problems(&s).len(), 1);
    // The extended public test is a quote of the holdout file anywhere else.
    s.write("fixture/docs/check.md", "nothing\n");
    s.write("fixture/docs/copy.py", &format!("# old\n{public}"));
    let p = one_problem(
        &s,
        "quotes holdout file `holdout/hello/tests/test_public.py`",
    );
    assert_eq!(p["file"], "[SUITE]/fixture/docs/copy.py", "{p:#}");
}

/// A suite whose `command` agent writes how many bytes of prompt it was handed, with one task
/// whose prompt is `bytes` long.
fn prompt_of(bytes: usize) -> TestSuite {
    let prompt = "y".repeat(bytes);
    TestSuite::with_toml(&format!(
        r#"schema_version = 1
id = "long-prompt"

[defaults]
wall_timeout_seconds = 30

[[variants]]
id = "cmd"
agent = "command"
command = ["sh", "-c", "printf %s \"$PROCTOR_PROMPT\" | wc -c > got.txt; printf %s \"$1\" | wc -c >> got.txt", "sh", "{{prompt}}"]

[[tasks]]
id = "long"
prompt = "{prompt}"

[tasks.success]
all = [{{ file_contains = {{ path = "got.txt", pattern = "^{bytes}\n{bytes}\n$" }} }}]
"#
    ))
}

#[test]
fn a_prompt_no_command_line_can_carry_is_refused_and_one_that_fits_is_handed_whole() {
    // 200 KB: over the 128 KiB Linux takes in one argument or environment string.
    let out = prompt_of(200_000).validate();
    assert_eq!(out.code, 2, "{}", out.stderr);
    let text = unwrapped(&out.stderr);
    assert!(
        text.contains("the prompt variant `cmd` gives task `long` cannot be handed to its agent"),
        "{}",
        out.stderr
    );
    assert!(text.contains("of 200016 bytes"), "{}", out.stderr);
    assert!(text.contains("at most 131072 in one"), "{}", out.stderr);
    // 120 KB fits, validates, and the agent gets every byte in both places.
    let fits = prompt_of(120_000);
    let out = fits.validate();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let store = tempfile::tempdir().unwrap();
    let out = proctor(
        &[
            "run",
            fits.path().to_str().unwrap(),
            "--store",
            store.path().to_str().unwrap(),
        ],
        fits.path(),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("completed"), "{}", out.stderr);
}

#[test]
fn sidecar_services_are_checked_for_an_image_task_names_and_their_order() {
    // A sidecar beside a task that runs on the host's root; an unknown dependency; a name
    // taken twice; a relative workdir.
    let s = TestSuite::minimal().edit(
        "\n[tasks.success]",
        "\n[[tasks.services]]\nname = \"web\"\nimage = \"busybox\"\ndepends_on = [\"db\"]\nworkdir = \"srv\"\n\n[[tasks.services]]\nname = \"web\"\nimage = \"busybox\"\n\n[tasks.success]",
    );
    let err = rejected(&s);
    for said in [
        "task `hello` does not run in an image, so service `web` cannot run beside it as a sidecar container",
        "no service `db` in task `hello`'s trials",
        "`srv` is not an absolute path",
        "two services of task `hello` have the name `web`",
    ] {
        assert!(unwrapped(&err).contains(said), "{said}: {err}");
    }
    // In an image: two services that wait for each other, a service without a command or an
    // image, an empty healthcheck.
    let s = TestSuite::minimal().edit(
        "\n[tasks.success]",
        "\n[tasks.environment]\nimage = \"busybox\"\n\n[[tasks.services]]\nname = \"a\"\nimage = \"busybox\"\ndepends_on = [\"b\"]\n\n[[tasks.services]]\nname = \"b\"\nimage = \"busybox\"\ndepends_on = [\"a\"]\nhealthcheck = { command = [] }\n\n[[tasks.services]]\nname = \"c\"\n\n[tasks.success]",
    );
    let err = rejected(&s);
    for said in [
        "the services of task `hello` depend on each other in a cycle: a -> b -> a",
        "this service has no `command`",
        "a healthcheck `command` is empty",
    ] {
        assert!(unwrapped(&err).contains(said), "{said}: {err}");
    }
    // On the host's network, sidecars would share the host's ports.
    let s = TestSuite::minimal().edit(
        "\n[tasks.success]",
        "network = \"host\"\n\n[tasks.environment]\nimage = \"busybox\"\n\n[[tasks.services]]\nname = \"db\"\nimage = \"redis:7\"\n\n[tasks.success]",
    );
    let err = rejected(&s);
    assert!(
        unwrapped(&err).contains("task `hello` runs on the host's network (network = \"host\"), where service `db` would listen on the host's ports"),
        "{err}"
    );
    // Well formed: it validates.
    let s = TestSuite::minimal().edit(
        "\n[tasks.success]",
        "\n[tasks.environment]\nimage = \"busybox\"\n\n[[tasks.services]]\nname = \"db\"\nimage = \"redis:7\"\n\n[[tasks.services]]\nname = \"web\"\nimage = \"busybox\"\ncommand = [\"httpd\", \"-f\"]\nworkdir = \"/srv\"\ndepends_on = [\"db\"]\nhealthcheck = { command = [\"true\"], timeout_seconds = 5 }\n\n[tasks.success]",
    );
    let out = s.validate();
    assert_eq!(out.code, 0, "{}", out.stderr);
}

#[test]
fn an_environments_build_folder_must_hold_a_dockerfile_and_its_timeout_be_positive() {
    let with = |build: &str, timeout: u64| {
        TestSuite::minimal().edit(
            "prompt = \"Create hello.txt containing hi.\"\n",
            &format!("prompt = \"Create hello.txt containing hi.\"\n[tasks.environment]\nimage = \"ghcr.io/org/hello:1\"\nbuild = \"{build}\"\nbuild_timeout_sec = {timeout}\n"),
        )
    };
    let missing = with("environments/hello", 600);
    let out = missing.validate();
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        unwrapped(&out.stderr)
            .contains("`build` path `environments/hello` does not exist in the suite"),
        "{}",
        out.stderr
    );
    let no_dockerfile = with("environments/hello", 600);
    no_dockerfile.write("environments/hello/data.txt", "x\n");
    let out = no_dockerfile.validate();
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        unwrapped(&out.stderr)
            .contains("`build` path `environments/hello/Dockerfile` does not exist in the suite"),
        "{}",
        out.stderr
    );
    let escaping = with("../elsewhere", 600);
    let out = escaping.validate();
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        unwrapped(&out.stderr).contains("`build` path `../elsewhere`"),
        "{}",
        out.stderr
    );
    let zero = with("environments/hello", 0);
    zero.write("environments/hello/Dockerfile", "FROM busybox\n");
    let out = zero.validate();
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        unwrapped(&out.stderr).contains("`build_timeout_sec` must be at least 1, not 0"),
        "{}",
        out.stderr
    );
    let good = with("environments/hello", 600);
    good.write("environments/hello/Dockerfile", "FROM busybox\n");
    let out = good.validate();
    assert_eq!(out.code, 0, "{}", out.stderr);
}
