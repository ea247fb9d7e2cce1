//! `proctor validate`: valid suites pass, and each kind of mistake gets a located, actionable
//! diagnostic (snapshot-tested) and exit status 2.

mod common;

use common::{proctor, repo_root, TestSuite, MINIMAL};

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
    // init never overwrites.
    let again = proctor(&["init", t], dir.path());
    assert_eq!(again.code, 2);
    assert!(again.stderr.contains("not empty"), "{}", again.stderr);
}

#[test]
fn bundled_examples_are_valid() {
    for name in ["chat-ax", "traps"] {
        let path = repo_root().join("examples").join(name);
        let out = proctor(&["validate", path.to_str().unwrap()], &path);
        assert_eq!(out.code, 0, "examples/{name}:\n{}", out.stderr);
    }
}

#[test]
fn toml_syntax_error() {
    let s = TestSuite::minimal().edit("id = \"mini\"", "id = \"mini");
    insta::assert_snapshot!(rejected(&s));
}

#[test]
fn unknown_key_at_top_level() {
    let s = TestSuite::minimal().edit("id = \"mini\"", "id = \"mini\"\nfixtures = \"fixture\"");
    insta::assert_snapshot!(rejected(&s));
}

#[test]
fn unknown_key_in_defaults() {
    let s = TestSuite::minimal().edit("wall_timeout_seconds", "wall_timeout_secs");
    insta::assert_snapshot!(rejected(&s));
}

#[test]
fn unknown_key_in_variant() {
    let s = TestSuite::minimal().edit(
        "agent = \"script\"",
        "agent = \"script\"\nprompt_prefx = \"x\"",
    );
    insta::assert_snapshot!(rejected(&s));
}

#[test]
fn unknown_key_in_task() {
    let s = TestSuite::minimal().edit("prompt = ", "expected = \"complete\"\nprompt = ");
    insta::assert_snapshot!(rejected(&s));
}

#[test]
fn unknown_assertion_kind() {
    let s = TestSuite::minimal().edit(
        "{ file_contains",
        "{ answer_match = \"hi\" },\n  { file_contains",
    );
    insta::assert_snapshot!(rejected(&s));
}

#[test]
fn unknown_key_inside_an_assertion() {
    let s = TestSuite::minimal().edit("pattern = \"hi\"", "pattern = \"hi\", line = 1");
    insta::assert_snapshot!(rejected(&s));
}

#[test]
fn unknown_key_in_check_table() {
    let s = TestSuite::minimal().edit(
        "{ file_contains",
        "{ check = { command = \"true\", exit_code = 0 } },\n  { file_contains",
    );
    insta::assert_snapshot!(rejected(&s));
}

#[test]
fn wrong_type() {
    let s = TestSuite::minimal().edit(
        "wall_timeout_seconds = 30",
        "wall_timeout_seconds = \"30s\"",
    );
    insta::assert_snapshot!(rejected(&s));
}

#[test]
fn bad_enum_value() {
    let s = TestSuite::minimal().edit(
        "wall_timeout_seconds = 30",
        "wall_timeout_seconds = 30\nnetwork = \"offline\"",
    );
    insta::assert_snapshot!(rejected(&s));
}

#[test]
fn bad_expect_value() {
    let s = TestSuite::minimal().edit("prompt = ", "expect = \"refusal\"\nprompt = ");
    insta::assert_snapshot!(rejected(&s));
}

#[test]
fn bad_agent_value() {
    let s = TestSuite::minimal().edit("agent = \"script\"", "agent = \"claude\"");
    insta::assert_snapshot!(rejected(&s));
}

#[test]
fn missing_required_key() {
    let s = TestSuite::minimal().edit("prompt = \"Create hello.txt containing hi.\"\n", "");
    insta::assert_snapshot!(rejected(&s));
}

#[test]
fn bad_regex() {
    let s = TestSuite::minimal().edit("pattern = \"hi\"", "pattern = \"(hi\"");
    insta::assert_snapshot!(rejected(&s));
}

#[test]
fn missing_fixture() {
    let s = TestSuite::minimal();
    std::fs::remove_dir_all(s.path().join("fixture")).unwrap();
    insta::assert_snapshot!(rejected(&s));
}

#[test]
fn symlink_in_suite() {
    let s = TestSuite::minimal();
    std::os::unix::fs::symlink("/etc/passwd", s.path().join("fixture/passwd")).unwrap();
    insta::assert_snapshot!(rejected(&s));
}

#[test]
fn fifo_in_suite() {
    let s = TestSuite::minimal();
    let fifo = s.path().join("fixture/pipe");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    insta::assert_snapshot!(rejected(&s));
}

#[test]
fn parent_dir_path() {
    let s = TestSuite::minimal().edit(
        "script = \"agents/oracle\"",
        "script = \"../agents/oracle\"",
    );
    insta::assert_snapshot!(rejected(&s));
}

#[test]
fn absolute_path() {
    let s = TestSuite::minimal().edit("id = \"mini\"", "id = \"mini\"\nfixture = \"/etc\"");
    insta::assert_snapshot!(rejected(&s));
}

#[test]
fn non_patch_file_under_mutations() {
    let s = TestSuite::minimal();
    s.write(
        "mutations/hello/notes.patch",
        "remember to change line two\n",
    );
    insta::assert_snapshot!(rejected(&s));
}

#[test]
fn patch_that_does_not_apply() {
    let s = TestSuite::minimal();
    s.write(
        "mutations/hello/two.patch",
        "--- a/README.md\n+++ b/README.md\n@@ -2,1 +2,1 @@\n-line 2\n+line II\n",
    );
    insta::assert_snapshot!(rejected(&s));
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
fn duplicate_task_ids() {
    let s = TestSuite::with_toml(&format!(
        "{MINIMAL}\n[[tasks]]\nid = \"hello\"\nprompt = \"again\"\n\n[tasks.success]\nall = [{{ files_unchanged = true }}]\n"
    ));
    insta::assert_snapshot!(rejected(&s));
}

#[test]
fn duplicate_variant_ids() {
    let s = TestSuite::minimal().edit(
        "[[tasks]]",
        "[[variants]]\nid = \"oracle\"\nagent = \"script\"\nscript = \"agents/oracle\"\n\n[[tasks]]",
    );
    insta::assert_snapshot!(rejected(&s));
}

#[test]
fn unknown_task_in_holdout() {
    let s = TestSuite::minimal();
    s.write("holdout/helo/check.py", "print('x')\n");
    insta::assert_snapshot!(rejected(&s));
}

#[test]
fn unknown_task_in_answers() {
    let s = TestSuite::minimal();
    s.write("answers/goodbye.md", "# nothing\n");
    insta::assert_snapshot!(rejected(&s));
}

#[test]
fn wrong_schema_version() {
    let s = TestSuite::minimal().edit("schema_version = 1", "schema_version = 2");
    insta::assert_snapshot!(rejected(&s));
}

#[test]
fn script_missing_for_a_task() {
    let s = TestSuite::minimal();
    std::fs::remove_file(s.path().join("agents/oracle/hello.toml")).unwrap();
    insta::assert_snapshot!(rejected(&s));
}

#[test]
fn unknown_key_in_a_script() {
    let s = TestSuite::minimal();
    s.write(
        "agents/oracle/hello.toml",
        "answer = \"done\"\n\n[[steps]]\ncmd = \"true\"\n",
    );
    insta::assert_snapshot!(rejected(&s));
}

#[test]
fn state_assertion_names_unknown_service() {
    let s = TestSuite::minimal().edit(
        "{ file_contains",
        "{ state = { service = \"chat\", pointer = \"/sent\", exists = true } },\n  { file_contains",
    );
    insta::assert_snapshot!(rejected(&s));
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
