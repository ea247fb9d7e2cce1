//! Messages that leave nothing to guess, through the real binary: `validate --oracle` names
//! every errored or unexpected trial with its reason and keeps its store; a service that dies
//! before it is ready leaves its output in the trial and its last lines in the reason; `show`
//! names the trials a run has when asked for one it never had, and prints the transcript, the
//! ledgers and the diff of every changed file.

mod common;

use common::lab::{As, Lab};

/// A suite with one task (`hello`: create hello.txt containing hi), the oracle scripts in
/// `agents/oracle/`, and the suite's variants `oracle` (the same scripts) and `lazy` (which
/// writes the wrong file).
fn oracle_lab(name: &str, success: &str) -> Lab {
    let lab = Lab::new(name);
    lab.write(
        "fixture/README.md",
        "a tiny fixture\nline two\nline three\n",
    );
    lab.write(
        "suite.toml",
        &format!(
            "schema_version = 1\nid = \"mini\"\n\n[defaults]\nwall_timeout_seconds = 30\n\n[[variants]]\nid = \"oracle\"\nagent = \"script\"\nscript = \"agents/oracle\"\n\n[[variants]]\nid = \"lazy\"\nagent = \"script\"\nscript = \"agents/lazy\"\n\n[[tasks]]\nid = \"hello\"\nprompt = \"Create hello.txt containing hi.\"\n\n[tasks.success]\nall = [{success}]\n"
        ),
    );
    lab.write(
        "agents/oracle/hello.toml",
        "answer = \"done\"\n\n[[steps]]\nrun = \"echo hi > hello.txt\"\n",
    );
    lab.write(
        "agents/lazy/hello.toml",
        "answer = \"done\"\n\n[[steps]]\nrun = \"echo nope > other.txt\"\n",
    );
    lab
}

const HELLO: &str = "{ file_contains = { path = \"hello.txt\", pattern = \"hi\" } }";

/// `proctor validate SUITE --oracle EXTRA...`, with temporary folders made inside the lab.
fn validate_oracle(lab: &Lab, extra: &[&str]) -> common::lab::RunOut {
    let suite = lab.suite();
    let mut args = vec!["validate", suite.to_str().unwrap(), "--oracle"];
    args.extend_from_slice(extra);
    let tmp = lab.root.to_str().unwrap().to_string();
    lab.proctor_env(As::Me, &args, &[("TMPDIR", &tmp)])
}

/// Snapshots `text` with what changes from run to run replaced: the lab's folder, run ids,
/// times.
fn snapshot(lab: &Lab, name: &str, text: &str) {
    let text = text.replace(lab.root.to_str().unwrap(), "[LAB]");
    insta::with_settings!({filters => vec![
        (r"\d{8}-\d{6}-[0-9a-f]{4}", "[RUN]"),
        (r"\d+\.\d+s\b", "[T]s"),
        (r"proctor-oracle-[A-Za-z0-9]+", "proctor-oracle-[TMP]"),
    ]}, {
        insta::assert_snapshot!(name, text);
    });
}

#[test]
fn validate_oracle_prints_each_unexpected_trial_with_its_reason_and_keeps_the_store() {
    let lab = oracle_lab("oracle-fails", HELLO);
    let out = validate_oracle(&lab, &["--oracle-variant", "lazy"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stdout
            .contains("hello  -         wrong   abandoned   FAIL: the oracle does not pass"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains("  hello.lazy.0: wrong, expected completed\n    reason: failing: file_contains = { path = \"hello.txt\", pattern = \"hi\" }\n"),
        "{}",
        out.stderr
    );
    // The temporary store is kept, and the command says where and how to read it.
    let line = out
        .stderr
        .lines()
        .find(|l| l.starts_with("read a trial with: proctor show --store "))
        .unwrap_or_else(|| panic!("{}", out.stderr));
    let words: Vec<&str> = line.split_whitespace().collect();
    let (store, run) = (words[7], words[8]);
    assert!(store.contains("proctor-oracle-"), "{line}");
    assert_eq!(words[9], "hello.lazy.0", "{line}");
    snapshot(&lab, "validate_oracle_failed", &out.stderr);
    let shown = lab.proctor(As::Me, &["show", "--store", store, run, "hello.lazy.0"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(
        shown.stdout.contains("outcome    wrong"),
        "{}",
        shown.stdout
    );
    assert!(
        out.stderr
            .contains(&format!("the evidence is in {store}/runs/{run}")),
        "{}",
        out.stderr
    );
}

#[test]
fn validate_oracle_names_a_null_agent_that_passes() {
    // The rule holds on the untouched fixture: the null agent passes it.
    let lab = oracle_lab(
        "oracle-null-passes",
        "{ file_contains = { path = \"README.md\", pattern = \"tiny\" } }",
    );
    let store = lab.store();
    let out = validate_oracle(&lab, &["--store", store.to_str().unwrap()]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stdout
            .contains("FAIL: the null agent passes, so the rules test nothing"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr
            .contains("  hello.__null.0: completed, expected anything but completed\n    reason: "),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(&format!(
            "read a trial with: proctor show --store {}",
            store.display()
        )),
        "{}",
        out.stderr
    );
}

#[test]
fn validate_oracle_variant_picks_the_oracle_and_an_unknown_one_lists_the_variants() {
    let lab = oracle_lab("oracle-variant", HELLO);
    // The default oracle (agents/oracle/) and the suite's `oracle` variant both pass.
    for extra in [&[][..], &["--oracle-variant", "oracle"][..]] {
        let out = validate_oracle(&lab, extra);
        assert_eq!(out.code, 0, "{extra:?}: {}", out.stderr);
        assert!(
            out.stderr
                .contains("every task's rules pass its oracle and fail the null agent"),
            "{}",
            out.stderr
        );
    }
    // Nothing is left behind when every check passed.
    let left: Vec<_> = std::fs::read_dir(&lab.root)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("proctor-oracle-")
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");

    let out = validate_oracle(&lab, &["--oracle-variant", "nope"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("error: --oracle-variant: suite `mini` has no variant `nope`"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("help: its variants are: oracle, lazy"),
        "{}",
        out.stderr
    );
    // It means nothing without --oracle.
    let suite = lab.suite();
    let out = lab.proctor(
        As::Me,
        &[
            "validate",
            suite.to_str().unwrap(),
            "--oracle-variant",
            "lazy",
        ],
    );
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("--oracle"), "{}", out.stderr);
}

#[test]
fn validate_help_says_where_the_oracle_is_read_from() {
    let lab = Lab::new("oracle-help");
    let out = lab.proctor(As::Me, &["validate", "--help"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let help = out.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(help.contains("`agents/oracle/TASK_ID.toml`"), "{help}");
    assert!(
        help.contains("--oracle-variant <V> Use this variant of the suite as the oracle instead of `agents/oracle/`"),
        "{help}"
    );
}

#[test]
fn a_service_that_dies_before_it_is_ready_errors_the_trial_with_its_last_lines() {
    let lab = Lab::new("service-dies");
    lab.write("fixture/README.md", "x\n");
    lab.write(
        "suite.toml",
        "schema_version = 1\nid = \"lab\"\n\n[defaults]\nwall_timeout_seconds = 30\n\n[[services]]\nname = \"svc\"\ncommand = [\"sh\", \"-c\", \"echo starting; for i in 1 2 3 4 5 6; do echo line $i >&2; done; echo boom >&2; exit 3\"]\nready = { http = \"http://127.0.0.1:7071/health\", timeout_seconds = 10 }\n\n[[variants]]\nid = \"agent\"\nagent = \"script\"\nscript = \"agents/agent\"\n\n[[tasks]]\nid = \"t\"\nprompt = \"Do the thing.\"\n\n[tasks.success]\nall = [{ files_unchanged = true }]\n",
    );
    lab.write("agents/agent/t.toml", "answer = \"done\"\n");
    let out = lab.run(As::Me, &["--trials", "1"]);
    assert_eq!(
        out.code, 3,
        "an errored trial leaves the run unfinished\n{}",
        out.stderr
    );
    let record = lab.record("t.agent.0");
    assert_eq!(record["outcome"], "errored", "{record:#}");
    let reason = record["reason"].as_str().unwrap();
    assert_eq!(
        reason,
        "service-guard: service svc was not ready: it exited (exit code 3) before it was ready; its output ends: line 3 ⏎ line 4 ⏎ line 5 ⏎ line 6 ⏎ boom (all of it in services/svc.log)",
    );
    // The whole output is evidence in the trial's folder.
    let log = std::fs::read_to_string(lab.trial_dir("t.agent.0").join("services/svc.log")).unwrap();
    assert!(
        log.contains("starting\n") && log.ends_with("boom\n"),
        "{log}"
    );
    // `show` prints the reason as recorded.
    let store = lab.store();
    let shown = lab.proctor(
        As::Me,
        &[
            "show",
            "--store",
            store.to_str().unwrap(),
            "latest",
            "t.agent.0",
        ],
    );
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(
        shown.stdout.contains(&format!("reason     {reason}\n")),
        "{}",
        shown.stdout
    );
    assert!(
        shown
            .stdout
            .contains("\ntranscript: none (the agent never started)\n"),
        "{}",
        shown.stdout
    );
}

/// A suite whose agent edits a mutated file, adds a long text file and a binary one, deletes
/// one and runs a failing command; run with `trials` trials.
fn show_lab(name: &str, trials: &str) -> Lab {
    let lab = Lab::new(name);
    lab.write(
        "fixture/README.md",
        "a tiny fixture\nline two\nline three\n",
    );
    lab.write("fixture/notes.md", "keep\nme\n");
    lab.write(
        "mutations/t/two.patch",
        "--- a/README.md\n+++ b/README.md\n@@ -2,1 +2,1 @@\n-line two\n+line II\n",
    );
    lab.one_task(
        "",
        "{ file_contains = { path = \"README.md\", pattern = \"line 2\" } }",
        &[
            "sed -i 's/line II/line 2/' README.md && echo edited",
            "seq 1 250 > long.txt; printf 'a\\000b' > blob.bin; rm notes.md",
            "echo to stdout; echo to stderr >&2; exit 4",
        ],
        false,
    );
    let out = lab.run(As::Me, &["--trials", trials]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    lab
}

#[test]
fn show_prints_the_transcript_ledgers_and_a_bounded_diff_against_the_start_state() {
    let lab = show_lab("show-trial", "1");
    let store = lab.store();
    let out = lab.proctor(
        As::Me,
        &[
            "show",
            "--store",
            store.to_str().unwrap(),
            "latest",
            "t.agent.0",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    // The diff is against the mutated README (line II), not the fixture's (line two).
    assert!(
        out.stdout.contains("    -line II\n    +line 2\n"),
        "{}",
        out.stdout
    );
    snapshot(&lab, "show_trial", &out.stdout);
}

#[test]
fn show_of_a_trial_the_run_never_had_names_the_trials_it_has() {
    let lab = show_lab("show-unknown", "12");
    let store = lab.store();
    let store = store.to_str().unwrap();
    let out = lab.proctor(As::Me, &["show", "--store", store, "latest", "t.agent.12"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert_eq!(out.stdout, "");
    snapshot(&lab, "show_unknown_trial", &out.stderr);
    let out = lab.proctor(As::Me, &["show", "--store", store, "latest", "t.oracle.0"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("error: no trial t.oracle.0 in run ")
            && out
                .stderr
                .contains("; trials are t.agent.0, t.agent.1, t.agent.2, "),
        "{}",
        out.stderr
    );
}

#[test]
fn show_of_a_planned_trial_that_never_finished_says_so() {
    let lab = show_lab("show-unfinished", "2");
    // As if the run had been killed before its second trial finished.
    let dir = lab.trial_dir("t.agent.1");
    std::fs::remove_file(dir.join("trial.json")).unwrap();
    let store = lab.store();
    let store = store.to_str().unwrap();
    assert_eq!(lab.proctor(As::Me, &["reindex", "--store", store]).code, 0);
    let out = lab.proctor(As::Me, &["show", "--store", store, "latest", "t.agent.1"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("error: trial t.agent.1 of run ")
            && out
                .stderr
                .contains(" has not finished (the run is finished)")
            && out.stderr.contains("--resume"),
        "{}",
        out.stderr
    );
}

#[test]
fn show_prints_every_command_a_real_cli_ran_and_its_token_ledgers() {
    let agents = std::env::var_os("PROCTOR_AGENTS_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/proctor/agents")
        });
    assert!(
        agents.join("bin/claude").exists(),
        "Claude Code is not installed: run agents/install.sh (this test drives the real CLI)"
    );
    let lab = Lab::new("show-cli");
    lab.write("fixture/README.md", "x\n");
    lab.write_exec("bin/tool", "#!/bin/sh\necho \"tool $*\"\n");
    lab.write(
        "suite.toml",
        "schema_version = 1\nid = \"lab\"\n\n[defaults]\nwall_timeout_seconds = 120\nallow = [\"bin/tool\"]\n\n[[variants]]\nid = \"claude\"\nagent = \"claude-code\"\nmodel_script = \"agents/model.toml\"\n\n[[tasks]]\nid = \"t\"\nprompt = \"Use the tool.\"\n[tasks.interface]\ncommand = \"tool\"\n\n[tasks.success]\nall = [{ calls = { verb = \"ok\", min = 1 } }]\n",
    );
    // One interface call and one plain shell command, which the calls log does not show.
    lab.write(
        "agents/model.toml",
        "[[turns]]\ncalls = [{ role = \"shell\", command = \"tool ok\" }]\nusage = { input = 10, output = 2 }\n\n[[turns]]\ncalls = [{ role = \"shell\", command = \"echo made > made.txt && echo wrote it\" }]\nusage = { input = 12, output = 3 }\n\n[[turns]]\ntext = \"done\"\nusage = { input = 14, output = 4 }\n",
    );
    let out = lab.run(As::Me, &["--trials", "1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let store = lab.store();
    let out = lab.proctor(
        As::Me,
        &[
            "show",
            "--store",
            store.to_str().unwrap(),
            "latest",
            "t.claude.0",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let text = &out.stdout;
    assert!(text.contains("interface calls (1)\n"), "{text}");
    assert!(text.contains("transcript (claude-code: "), "{text}");
    assert!(text.contains(" 2 tool call(s), 0 refused)"), "{text}");
    assert!(text.contains("Bash: tool ok\n"), "{text}");
    assert!(
        text.contains("Bash: echo made > made.txt && echo wrote it\n"),
        "{text}"
    );
    assert!(text.contains("output  wrote it\n"), "{text}");
    assert!(text.contains("\n  wire "), "{text}");
    assert!(
        text.contains("  added    made.txt  (5 bytes)\n    @@ -0,0 +1 @@\n    +made\n"),
        "{text}"
    );
}

/// `validate --oracle` runs each task once per hidden mutation of its own (once when it has
/// none): a task with two mutations gets two rows, one with none gets one.
#[test]
fn validate_oracle_runs_each_task_once_per_mutation_of_its_own() {
    let lab = oracle_lab("oracle-per-mutation", HELLO);
    let toml = std::fs::read_to_string(lab.suite().join("suite.toml")).unwrap();
    lab.write(
        "suite.toml",
        &format!(
            "{toml}\n[[tasks]]\nid = \"other\"\nprompt = \"Create other.txt.\"\n\n[tasks.success]\nall = [{{ file_added = \"other.txt\" }}]\n"
        ),
    );
    lab.write(
        "agents/oracle/other.toml",
        "answer = \"done\"\n\n[[steps]]\nrun = \"echo x > other.txt\"\n",
    );
    lab.write("agents/lazy/other.toml", "answer = \"done\"\n");
    for (name, from, to) in [
        ("two", "line two", "line 2"),
        ("three", "line three", "line 3"),
    ] {
        let body = match name {
            "two" => format!(" a tiny fixture\n-{from}\n+{to}\n line three\n"),
            _ => format!(" a tiny fixture\n line two\n-{from}\n+{to}\n"),
        };
        lab.write(
            &format!("mutations/hello/{name}.patch"),
            &format!("--- a/README.md\n+++ b/README.md\n@@ -1,3 +1,3 @@\n{body}"),
        );
    }
    let out = validate_oracle(&lab, &[]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let all = format!("{}{}", out.stdout, out.stderr);
    let rows = |task: &str| {
        all.lines()
            .filter(|l| l.starts_with(&format!("{task} ")))
            .collect::<Vec<_>>()
    };
    let hello = rows("hello");
    assert_eq!(hello.len(), 2, "one row per mutation:\n{all}");
    assert!(hello.iter().any(|l| l.contains("three.patch")), "{all}");
    assert!(hello.iter().any(|l| l.contains("two.patch")), "{all}");
    assert_eq!(rows("other").len(), 1, "one row without mutations:\n{all}");
}
