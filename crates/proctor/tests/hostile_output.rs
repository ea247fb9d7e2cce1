//! What a hostile agent prints or names reaches the person and the store harmlessly, end to end
//! through the real binary in real sandboxes, as this user and as uid 65534:
//! - terminal escapes in its answer and a file name are shown escaped (`\u{1b}`) by `run`,
//!   `show RUN`, `show RUN TRIAL`, `compare` and `results.md`, and kept exact in JSON;
//! - a call of an allowed tool with an argument that is not UTF-8 runs with the exact bytes and
//!   is logged with them;
//! - a `command` agent's large stdout, which is its answer, is stored once.

mod common;

use std::os::unix::fs::MetadataExt;

use common::lab::{users, As, Lab, RunOut};

/// The answer: OSC 52 (write the clipboard), BEL, and "clear the screen".
const ANSWER: &str = "hello \x1b]52;c;aGk=\x07 \x1b[2J";
/// How `show` prints it.
const ANSWER_SHOWN: &str = "hello \\u{1b}]52;c;aGk=\\u{7} \\u{1b}[2J";
/// The file the agent names with an escape, as `show` prints it.
const NAME_SHOWN: &str = "name\\u{1b}[31mred";

fn assert_harmless(what: &str, text: &str) {
    for c in text.chars() {
        let control = matches!(c, '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}');
        assert!(!control, "{what} holds the raw control {c:?}:\n{text}");
    }
}

fn assert_harmless_out(what: &str, out: &RunOut) {
    assert_harmless(&format!("{what} (stdout)"), &out.stdout);
    assert_harmless(&format!("{what} (stderr)"), &out.stderr);
}

/// A test file the agent plants, named with an escape, as `run` and `show` print it in the
/// integrity audit's flag.
const PLANTED_SHOWN: &str = "tests/test_x\\u{1b}[31mred.py";

/// A suite whose agent names files with an escape (one of them a planted test, which the
/// integrity audit flags by name on the progress line), and answers with escapes; the task wants
/// a file that is never made, so the trial is `wrong`.
fn escaping_lab(who: As) -> Lab {
    let lab = Lab::new(&format!("hostile-escapes-{who:?}"));
    lab.one_task(
        "",
        "{ file_added = \"never.txt\" }, { check = \"python3 -m pytest -q\" }",
        &[
            r#"printf x > "$(printf 'name\033[31mred')""#,
            r#"mkdir tests; echo 'def test_ok(): pass' > "tests/test_$(printf 'x\033[31mred').py""#,
            r"printf 'hello \033]52;c;aGk=\007 \033[2J'",
        ],
        true,
    );
    lab
}

fn runs(lab: &Lab) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(lab.store().join("runs"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    ids.sort();
    ids
}

#[test]
fn terminal_escapes_of_the_agent_never_reach_the_terminal() {
    for who in users() {
        let lab = escaping_lab(who);
        let run = lab.run(who, &[]);
        assert_eq!(run.code, 1, "{run:?}");
        assert_harmless_out("run", &run);
        assert!(run.stderr.contains("t.agent.0"), "{run:?}");
        assert!(run.stderr.contains(PLANTED_SHOWN), "{run:?}");

        let store = lab.store();
        let store = store.to_str().unwrap();
        let id = lab.run_id();
        // The exact text is in the record (JSON escapes it).
        let record = lab.record("t.agent.0");
        assert_eq!(record["end_state"]["answer"], ANSWER);
        let names: Vec<&str> = record["end_state"]["changes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["path"].as_str())
            .collect();
        assert!(names.contains(&"name\x1b[31mred"), "{names:?}");

        let show_run = lab.proctor(who, &["show", &id, "--store", store]);
        assert_eq!(show_run.code, 0, "{show_run:?}");
        assert_harmless_out("show RUN", &show_run);
        assert!(show_run.stdout.contains("t.agent.0"), "{show_run:?}");

        let show = lab.proctor(who, &["show", &id, "t.agent.0", "--store", store]);
        assert_eq!(show.code, 0, "{show:?}");
        assert_harmless_out("show RUN TRIAL", &show);
        assert!(
            show.stdout.contains(&format!("answer\n  {ANSWER_SHOWN}\n")),
            "{}",
            show.stdout
        );
        assert!(
            show.stdout
                .contains(&format!("added         {NAME_SHOWN}\n")),
            "{}",
            show.stdout
        );
        assert!(show.stdout.contains(PLANTED_SHOWN), "{}", show.stdout);

        // JSON keeps the exact text.
        let json = lab.proctor(
            who,
            &[
                "show",
                &id,
                "t.agent.0",
                "--store",
                store,
                "--format",
                "json",
            ],
        );
        assert_eq!(json.code, 0, "{json:?}");
        let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
        assert_eq!(v["end_state"]["answer"], ANSWER);

        let md = std::fs::read_to_string(lab.run_dir().join("results.md")).unwrap();
        assert_harmless("results.md", &md);
        assert!(md.contains("t.agent.0") || md.contains("| t |"), "{md}");

        // A second run to compare with.
        let again = lab.run(who, &[]);
        assert_eq!(again.code, 1, "{again:?}");
        assert_harmless_out("run again", &again);
        let ids = runs(&lab);
        assert_eq!(ids.len(), 2, "{ids:?}");
        let compare = lab.proctor(who, &["compare", &ids[0], &ids[1], "--store", store]);
        assert_harmless_out("compare", &compare);
        assert!(compare.stdout.contains("agent"), "{compare:?}");
    }
}

/// The interface command: writes the hex of its first argument's bytes into the workspace.
const HEX_TOOL: &str = "#!/bin/sh\nprintf '%s' \"$1\" | od -An -tx1 > got.hex\n";

#[test]
fn a_non_utf8_argument_runs_exactly_and_is_logged_with_its_bytes() {
    for who in users() {
        let lab = Lab::new(&format!("hostile-argv-{who:?}"));
        lab.write_exec("bin/tool", HEX_TOOL);
        lab.one_task(
            "allow = [\"bin/tool\"]\n\n[tasks.interface]\ncommand = \"tool\"\n",
            "{ file_added = \"got.hex\" }",
            &[r#"tool "$(printf 'a\377b')" plain; echo "exit $?""#],
            true,
        );
        let run = lab.run(who, &[]);
        assert_eq!(run.code, 0, "{run:?}");
        let trial = lab.trial_dir("t.agent.0");
        let got = std::fs::read_to_string(trial.join("changes/files/got.hex")).unwrap();
        assert_eq!(
            got.split_whitespace().collect::<Vec<_>>(),
            ["61", "ff", "62"],
            "the tool got other bytes"
        );
        let record = lab.record("t.agent.0");
        assert_eq!(record["end_state"]["answer"], "exit 0", "{record:#}");

        let log = std::fs::read_to_string(trial.join("calls.jsonl")).unwrap();
        let calls: Vec<serde_json::Value> = log
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(calls.len(), 1, "{log}");
        let call = &calls[0];
        assert_eq!(call["exit"], 0, "{call}");
        assert_eq!(
            call["argv"],
            serde_json::json!(["tool", "a\u{fffd}b", "plain"])
        );
        assert_eq!(call["argv_hex"], serde_json::json!({ "1": "61ff62" }));
        let recorded = &record["end_state"]["calls"][0];
        assert_eq!(recorded["argv_hex"], call["argv_hex"], "{recorded}");
        assert_eq!(recorded["exit"], 0);
    }
}

/// Bytes the trial's folder takes on disk (allocated blocks), its files counted once per inode.
fn disk_bytes(dir: &std::path::Path) -> u64 {
    let mut seen = std::collections::HashSet::new();
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file() && seen.insert(m.ino()))
        .map(|m| m.blocks() * 512)
        .sum()
}

#[test]
fn a_command_agents_large_stdout_is_stored_once() {
    const BYTES: u64 = 20_000_000;
    for who in users() {
        let lab = Lab::new(&format!("hostile-once-{who:?}"));
        lab.write(
            "suite.toml",
            &format!(
                "schema_version = 1\nid = \"lab\"\n\n[defaults]\nwall_timeout_seconds = 60\n\n[[variants]]\nid = \"cmd\"\nagent = \"command\"\ncommand = [\"sh\", \"-c\", \"head -c {BYTES} /dev/zero | tr '\\\\0' a; echo\"]\n\n[[tasks]]\nid = \"t\"\nprompt = \"Say a lot.\"\n\n[tasks.success]\nall = [{{ answer_matches = \"^aaaa\" }}]\n"
            ),
        );
        let run = lab.run(who, &[]);
        assert_eq!(run.code, 0, "{run:?}");
        let trial = lab.trial_dir("t.cmd.0");
        let answer = std::fs::metadata(trial.join("answer.txt")).unwrap();
        assert_eq!(answer.len(), BYTES, "answer.txt keeps the whole answer");
        assert!(
            !trial.join("agent.stdout").exists(),
            "the stdout is the answer"
        );
        assert_eq!(
            std::fs::read(trial.join("agent.stdout.tail")).unwrap(),
            b"\n",
            "what the answer left off of the stdout"
        );
        let on_disk = disk_bytes(&trial);
        // Once (20 MB) plus the bounded heads of the record and the transcript (1 MiB each),
        // never twice.
        assert!(
            on_disk < BYTES + 4 * 1024 * 1024,
            "{on_disk} bytes on disk for a {BYTES}-byte stdout"
        );
        assert!(on_disk >= BYTES, "{on_disk}");

        let store = lab.store();
        let show = lab.proctor(
            who,
            &[
                "show",
                &lab.run_id(),
                "t.cmd.0",
                "--store",
                store.to_str().unwrap(),
            ],
        );
        assert_eq!(show.code, 0, "{show:?}");
        assert!(
            show.stdout.contains("answer\n  aaaaaaaaaaaaaaaa"),
            "{}",
            &show.stdout[..2000.min(show.stdout.len())]
        );
        assert_eq!(
            lab.record("t.cmd.0")["outcome"],
            "completed",
            "the answer is graded whole"
        );
    }
}
