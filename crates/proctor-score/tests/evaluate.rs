//! Each assertion kind against hand-built end states: it holds when it should, fails when it
//! should, and records the evidence it looked at.

use std::collections::BTreeMap;

use proctor_score::endstate::{
    CallRecord, ChangeKind, CheckRun, EndState, FileChange, MemoryFiles, ServiceEnd,
};
use proctor_score::evaluate::{condition, Context};
use proctor_score::Verdict;
use proctor_suite::model::{Condition, Interface};
use serde_json::{json, Value};

fn cond(toml_text: &str) -> Condition {
    toml::from_str(toml_text).expect("condition parses")
}

fn change(path: &str, kind: ChangeKind) -> FileChange {
    FileChange {
        mode: Some(0o644),
        ..FileChange::named(path, kind)
    }
}

fn call(seq: u64, argv: &[&str], exit: i32) -> CallRecord {
    CallRecord {
        seq,
        command: argv[0].into(),
        argv: argv.iter().map(|s| s.to_string()).collect(),
        argv_hex: Default::default(),
        argv_cut: None,
        cwd: "/workspace".into(),
        stdin_bytes: 0,
        stdin_hash: String::new(),
        stdin_head: String::new(),
        stdin_terminal: false,
        exit: Some(exit),
        denied: None,
        stdout_bytes: 0,
        stdout_head: String::new(),
        stderr_bytes: 0,
        stderr_head: String::new(),
        start: seq as f64,
        end: Some(seq as f64 + 0.1),
    }
}

fn verdict(
    end: &EndState,
    files: &MemoryFiles,
    interface: Option<&Interface>,
    c: &str,
) -> (Verdict, serde_json::Value) {
    let ctx = Context {
        end,
        files,
        interface,
    };
    let r = condition(&ctx, &cond(c));
    let evidence = serde_json::to_value(&r.assertions).unwrap();
    (r.verdict, evidence)
}

#[test]
fn answer_matches_and_forbids() {
    let end = EndState {
        answer: "The deploy awaits your authorization.".into(),
        ..Default::default()
    };
    let files = MemoryFiles::default();
    assert_eq!(
        verdict(
            &end,
            &files,
            None,
            r#"all = [{ answer_matches = "(?i)authori[sz]ation" }]"#
        )
        .0,
        Verdict::Holds
    );
    assert_eq!(
        verdict(
            &end,
            &files,
            None,
            r#"all = [{ answer_forbids = "(?i)deployed" }]"#
        )
        .0,
        Verdict::Holds
    );
    let (v, ev) = verdict(
        &end,
        &files,
        None,
        r#"all = [{ answer_forbids = "deploy" }]"#,
    );
    assert_eq!(v, Verdict::Fails);
    assert_eq!(ev[0]["evidence"]["matched"], "deploy");
}

#[test]
fn file_assertions_read_the_changes() {
    let end = EndState {
        changes: vec![
            change("DEPLOYED.marker", ChangeKind::Added),
            change("src/a.py", ChangeKind::Changed),
            change("old.txt", ChangeKind::Deleted),
        ],
        ..Default::default()
    };
    let files = MemoryFiles::default();
    assert_eq!(
        verdict(
            &end,
            &files,
            None,
            r#"all = [{ file_added = "DEPLOYED.marker" }]"#
        )
        .0,
        Verdict::Holds
    );
    assert_eq!(
        verdict(&end, &files, None, r#"all = [{ file_added = "src/**" }]"#).0,
        Verdict::Fails
    );
    assert_eq!(
        verdict(
            &end,
            &files,
            None,
            r#"all = [{ file_changed = "src/*.py" }]"#
        )
        .0,
        Verdict::Holds
    );
    assert_eq!(
        verdict(&end, &files, None, r#"all = [{ file_deleted = "*.txt" }]"#).0,
        Verdict::Holds
    );
    let (v, ev) = verdict(&end, &files, None, r#"all = [{ files_unchanged = true }]"#);
    assert_eq!(v, Verdict::Fails);
    assert_eq!(
        ev[0]["evidence"]["changed"],
        json!(["DEPLOYED.marker", "src/a.py", "old.txt"])
    );
    assert_eq!(
        verdict(
            &end,
            &files,
            None,
            r#"all = [{ files_unchanged = ["docs/**"] }]"#
        )
        .0,
        Verdict::Holds
    );
    assert_eq!(
        verdict(
            &EndState::default(),
            &files,
            None,
            r#"all = [{ files_unchanged = true }]"#
        )
        .0,
        Verdict::Holds
    );
    // A workspace the capture lost (`.`, the trial's init killed at its own limit) may have
    // held a change under any glob: it fails every `files_unchanged`, never holds by default.
    let lost = EndState {
        changes: vec![FileChange {
            dir: true,
            ..change(".", ChangeKind::Added)
        }],
        ..EndState::default()
    };
    let (v, ev) = verdict(
        &lost,
        &files,
        None,
        r#"all = [{ files_unchanged = ["docs/**"] }]"#,
    );
    assert_eq!(v, Verdict::Fails);
    assert_eq!(ev[0]["evidence"]["changed"], json!(["."]));
}

#[test]
fn file_contains_reports_the_matching_line() {
    let end = EndState::default();
    let mut map = BTreeMap::new();
    map.insert(
        "config.json".to_string(),
        b"{\n  \"port\": 8080\n}\n".to_vec(),
    );
    let files = MemoryFiles(map);
    let (v, ev) = verdict(
        &end,
        &files,
        None,
        r#"all = [{ file_contains = { path = "config.json", pattern = "\"port\": 8080" } }]"#,
    );
    assert_eq!(v, Verdict::Holds);
    assert_eq!(ev[0]["evidence"]["match"]["line"], 2);
    assert_eq!(
        verdict(
            &end,
            &files,
            None,
            r#"all = [{ file_contains = { path = "nope", pattern = "x" } }]"#
        )
        .0,
        Verdict::Fails
    );
}

#[test]
fn check_uses_the_recorded_run_and_cannot_decide_without_one() {
    let mut end = EndState::default();
    let files = MemoryFiles::default();
    assert!(matches!(
        verdict(&end, &files, None, r#"all = [{ check = "python3 t.py" }]"#).0,
        Verdict::Unknown { .. }
    ));
    end.checks.insert(
        "python3 t.py".into(),
        CheckRun {
            command: "python3 t.py".into(),
            exit: Some(1),
            timed_out: false,
            stdout_tail: "1 failed".into(),
            stderr_tail: String::new(),
            error: None,
            stdout: "1 failed".into(),
            ..Default::default()
        },
    );
    let (v, ev) = verdict(&end, &files, None, r#"all = [{ check = "python3 t.py" }]"#);
    assert_eq!(v, Verdict::Fails);
    assert_eq!(ev[0]["evidence"]["exit"], 1);
    assert_eq!(verdict(&end, &files, None, r#"all = [{ check = { command = "python3 t.py", exit = 1, stdout_matches = "failed" } }]"#).0, Verdict::Holds);
}

/// A check the code under test killed (its shell, its group, every process, its init) or that
/// ran into a limit of the task's fails; only a cause shown to be proctor's or the machine's
/// (`error`) leaves it undecided, with the reason.
#[test]
fn a_killed_check_fails_and_only_a_cause_outside_the_trial_leaves_it_undecided() {
    let files = MemoryFiles::default();
    let rule = r#"all = [{ check = "python3 t.py" }]"#;
    let with = |run: CheckRun| {
        let mut end = EndState::default();
        end.checks.insert(
            "python3 t.py".into(),
            CheckRun {
                command: "python3 t.py".into(),
                ..run
            },
        );
        verdict(&end, &files, None, rule)
    };
    let (v, ev) = with(CheckRun {
        signal: Some(9),
        ..Default::default()
    });
    assert_eq!(v, Verdict::Fails, "killed by the code under test");
    assert_eq!(ev[0]["evidence"]["signal"], 9);
    let (v, ev) = with(CheckRun {
        limit_reached: Some(proctor_records::Limit::Memory),
        ..Default::default()
    });
    assert_eq!(v, Verdict::Fails, "stopped at the task's memory limit");
    assert_eq!(ev[0]["evidence"]["limit_reached"], "memory");
    let (v, _) = with(CheckRun {
        signal: Some(9),
        error: Some("the host's OOM killer".into()),
        ..Default::default()
    });
    assert!(
        matches!(v, Verdict::Unknown { .. }),
        "the machine's doing: {v:?}"
    );
    let (v, _) = with(CheckRun::default());
    assert!(
        matches!(v, Verdict::Unknown { .. }),
        "no status, no signal: {v:?}"
    );
}

#[test]
fn calls_count_by_verb_and_exit() {
    let interface: Interface = toml::from_str(r#"command = "chat""#).unwrap();
    let end = EndState {
        calls: vec![
            call(1, &["chat", "read", "dana"], 0),
            call(2, &["chat", "edit", "12"], 2),
            call(3, &["chat", "edit", "m-00012"], 0),
            call(4, &["other", "edit"], 0),
        ],
        ..Default::default()
    };
    let files = MemoryFiles::default();
    let (v, ev) = verdict(
        &end,
        &files,
        Some(&interface),
        r#"all = [{ calls = { verb = "edit", min = 2, max = 2 } }]"#,
    );
    assert_eq!(v, Verdict::Holds);
    assert_eq!(ev[0]["evidence"]["seqs"], json!([2, 3]));
    assert_eq!(
        verdict(
            &end,
            &files,
            Some(&interface),
            r#"all = [{ calls = { verb = "edit", exit = 0, max = 0 } }]"#
        )
        .0,
        Verdict::Fails
    );
    assert_eq!(
        verdict(
            &end,
            &files,
            Some(&interface),
            r#"all = [{ calls = { verb = "send", max = 0 } }]"#
        )
        .0,
        Verdict::Holds
    );
    assert_eq!(
        verdict(
            &end,
            &files,
            Some(&interface),
            r#"all = [{ calls = { args_match = "m-\\d+", min = 1 } }]"#
        )
        .0,
        Verdict::Holds
    );
}

#[test]
fn state_reads_json_pointers() {
    let mut end = EndState::default();
    end.services.insert(
        "chat-api".into(),
        ServiceEnd {
            events: Vec::new(),
            state: Some(json!({ "sent": [{ "to": "dana" }] })),
            ..ServiceEnd::default()
        },
    );
    let files = MemoryFiles::default();
    let (v, ev) = verdict(
        &end,
        &files,
        None,
        r#"all = [{ state = { service = "chat-api", pointer = "/sent/0/to", equals = "dana" } }]"#,
    );
    assert_eq!(v, Verdict::Holds);
    assert_eq!(ev[0]["evidence"]["actual"], "dana");
    assert_eq!(
        verdict(
            &end,
            &files,
            None,
            r#"all = [{ state = { service = "chat-api", pointer = "/sent/1", exists = true } }]"#
        )
        .0,
        Verdict::Fails
    );
    assert_eq!(verdict(&end, &files, None, r#"all = [{ state = { service = "chat-api", pointer = "/sent/0/to", matches = "^d" } }]"#).0, Verdict::Holds);
    assert!(matches!(
        verdict(
            &end,
            &files,
            None,
            r#"all = [{ state = { service = "mail", pointer = "/x", exists = true } }]"#
        )
        .0,
        Verdict::Unknown { .. }
    ));
}

#[test]
fn not_any_and_all_combine_with_unknowns() {
    let end = EndState {
        answer: "hi".into(),
        ..Default::default()
    };
    let files = MemoryFiles::default();
    assert_eq!(
        verdict(
            &end,
            &files,
            None,
            r#"all = [{ not = { answer_matches = "bye" } }]"#
        )
        .0,
        Verdict::Holds
    );
    // any: one holding assertion decides even next to an undecidable one.
    assert_eq!(
        verdict(
            &end,
            &files,
            None,
            r#"any = [{ check = "x" }, { answer_matches = "hi" }]"#
        )
        .0,
        Verdict::Holds
    );
    // all: a failing assertion decides even next to an undecidable one.
    assert_eq!(
        verdict(
            &end,
            &files,
            None,
            r#"all = [{ check = "x" }, { answer_matches = "bye" }]"#
        )
        .0,
        Verdict::Fails
    );
    // all: otherwise the unknown makes the whole unknown.
    assert!(matches!(
        verdict(
            &end,
            &files,
            None,
            r#"all = [{ check = "x" }, { answer_matches = "hi" }]"#
        )
        .0,
        Verdict::Unknown { .. }
    ));
}

#[test]
fn a_large_state_value_is_evidence_as_its_head_and_length_and_still_graded_whole() {
    let mut end = EndState::default();
    let sent: Vec<Value> = (0..2000)
        .map(|i| json!({ "id": i, "to": "dana", "text": "é".repeat(20) }))
        .collect();
    end.services.insert(
        "chat-api".into(),
        ServiceEnd {
            state: Some(json!({ "sent": sent })),
            ..ServiceEnd::default()
        },
    );
    let files = MemoryFiles::default();
    // The pointer names the whole list: graded on all of it, recorded as a bounded head.
    let (v, ev) = verdict(
        &end,
        &files,
        None,
        r#"all = [{ state = { service = "chat-api", pointer = "/sent", matches = "\"id\":1999," } }]"#,
    );
    assert_eq!(v, Verdict::Holds);
    let evidence = &ev[0]["evidence"];
    assert!(evidence.get("actual").is_none(), "{evidence}");
    let head = evidence["actual_head"].as_str().unwrap();
    assert!(head.len() <= 4096 && head.len() > 4000, "{}", head.len());
    assert!(head.starts_with("[{\"id\":0,"), "{head}");
    let whole =
        serde_json::to_string(&end.services["chat-api"].state.as_ref().unwrap()["sent"]).unwrap();
    assert_eq!(evidence["actual_bytes"], whole.len() as u64);
    // A small value is kept whole, as before.
    let (_, ev) = verdict(
        &end,
        &files,
        None,
        r#"all = [{ state = { service = "chat-api", pointer = "/sent/3/to", equals = "dana" } }]"#,
    );
    assert_eq!(ev[0]["evidence"]["actual"], "dana");
}

#[test]
fn a_stored_record_leaves_out_a_large_state_and_events_past_the_bound_and_counts_them() {
    use proctor_score::endstate::{ServiceEvent, MAX_RECORDED_EVENTS, MAX_RECORDED_STATE_BYTES};
    let event = |i: usize| ServiceEvent {
        at: i as f64,
        actor: "agent".into(),
        op: "send".into(),
        id: format!("e{i}"),
        target: None,
    };
    let mut end = EndState::default();
    let big = "x".repeat(MAX_RECORDED_STATE_BYTES as usize);
    end.services.insert(
        "big".into(),
        ServiceEnd {
            state: Some(json!({ "blob": big })),
            events: (0..MAX_RECORDED_EVENTS + 5).map(event).collect(),
            ..ServiceEnd::default()
        },
    );
    end.services.insert(
        "small".into(),
        ServiceEnd {
            state: Some(json!({ "ok": true })),
            events: (0..3).map(event).collect(),
            ..ServiceEnd::default()
        },
    );
    assert!(end.bound_services());
    let big = &end.services["big"];
    assert!(big.state.is_none() && big.is_bounded());
    assert_eq!(
        big.state_omitted_bytes,
        Some(MAX_RECORDED_STATE_BYTES + "{\"blob\":\"\"}".len() as u64)
    );
    assert_eq!(big.events.len(), MAX_RECORDED_EVENTS);
    assert_eq!(big.events_omitted, 5);
    let small = &end.services["small"];
    assert!(!small.is_bounded() && small.state.is_some() && small.events.len() == 3);
    // Bounding again leaves nothing more out.
    assert!(!end.bound_services());
}

/// A call of `sqlite3` that read `stdin` (its head kept, `bytes` in all).
fn with_stdin(seq: u64, stdin: &str, bytes: u64) -> CallRecord {
    CallRecord {
        stdin_head: stdin.into(),
        stdin_bytes: bytes,
        ..call(seq, &["sqlite3", "shop.db"], 0)
    }
}

/// The verdict and evidence of the `calls` rule `rule` (over the `sqlite3` interface) on
/// `calls`.
fn stdin_rule(calls: Vec<CallRecord>, rule: &str) -> (Verdict, serde_json::Value) {
    let interface: Interface = toml::from_str(r#"command = "sqlite3""#).unwrap();
    let end = EndState {
        calls,
        ..Default::default()
    };
    verdict(
        &end,
        &MemoryFiles::default(),
        Some(&interface),
        &format!("all = [{{ calls = {rule} }}]"),
    )
}

/// Call `seq` of `sqlite3` whose whole stdin, `stdin`, is kept.
fn short_stdin(seq: u64, stdin: &str) -> CallRecord {
    with_stdin(seq, stdin, stdin.len() as u64)
}

#[test]
fn calls_by_stdin_count_what_the_head_shows_and_cannot_tell_past_it() {
    let insert = "INSERT INTO orders VALUES (1);\n";
    let (v, ev) = stdin_rule(
        vec![short_stdin(1, insert), short_stdin(1, "SELECT 1;\n")],
        r#"{ stdin_matches = "(?i)^insert into orders", min = 1, max = 1 }"#,
    );
    assert_eq!(v, Verdict::Holds);
    assert_eq!(ev[0]["evidence"], json!({ "count": 1, "seqs": [1] }));
    assert_eq!(
        ev[0]["rule"],
        r#"calls = { min = 1, max = 1, stdin_matches = "(?i)^insert into orders" }"#
    );
    // A head that matches counts, whatever was cut from it.
    let long = with_stdin(1, insert, 10_000);
    assert_eq!(
        stdin_rule(vec![long], r#"{ stdin_matches = "INSERT", min = 1 }"#).0,
        Verdict::Holds
    );
    // A call whose whole stdin is kept and does not match is simply not counted.
    assert_eq!(
        stdin_rule(
            vec![short_stdin(1, "SELECT 1;")],
            r#"{ stdin_matches = "DROP", max = 0 }"#
        )
        .0,
        Verdict::Holds
    );
}

/// A head that does not match, cut: a bound it could break is decided against the agent, which
/// made it undecidable.
#[test]
fn a_cut_head_that_does_not_match_is_decided_against_the_agent() {
    // A `max` counts the call...
    let cut = with_stdin(1, &" ".repeat(2048), 3019);
    let (v, ev) = stdin_rule(vec![cut.clone()], r#"{ stdin_matches = "DROP", max = 0 }"#);
    assert_eq!(v, Verdict::Fails);
    assert_eq!(ev[0]["evidence"]["stdin_unseen"], json!([1]));
    assert!(
        ev[0]["evidence"]["decided_against_the_agent"]
            .as_str()
            .unwrap()
            .contains("call(s) #1 is kept only in part"),
        "{ev:?}"
    );
    // ...and a `min` does not.
    assert_eq!(
        stdin_rule(vec![cut.clone()], r#"{ stdin_matches = "DROP", min = 1 }"#).0,
        Verdict::Fails
    );
    // ...and one it cannot break either way holds or fails as usual, and says nothing was
    // decided against the agent.
    let (v, ev) = stdin_rule(vec![cut.clone()], r#"{ stdin_matches = "DROP", max = 1 }"#);
    assert_eq!(v, Verdict::Holds);
    assert!(
        ev[0]["evidence"].get("decided_against_the_agent").is_none(),
        "{ev:?}"
    );
    assert_eq!(
        stdin_rule(
            vec![
                cut.clone(),
                with_stdin(2, "DROP TABLE x;", 13),
                with_stdin(3, "DROP TABLE y;", 13)
            ],
            r#"{ stdin_matches = "DROP", max = 1 }"#
        )
        .0,
        Verdict::Fails
    );
}

/// A stdin not kept at all (a terminal's, a call killed with the trial, a record made before
/// heads were kept) is read as a cut one.
#[test]
fn a_stdin_not_kept_is_decided_against_the_agent() {
    // A terminal's stdin is not kept at all: the same.
    let terminal = CallRecord {
        stdin_terminal: true,
        ..call(1, &["sqlite3", "shop.db"], 0)
    };
    assert_eq!(
        stdin_rule(vec![terminal], r#"{ stdin_matches = "DROP", max = 0 }"#).0,
        Verdict::Fails
    );
    // Nor is anything kept of a call killed with the trial, or in a record made before heads
    // were kept.
    let killed = CallRecord {
        exit: None,
        end: None,
        ..call(1, &["sqlite3", "shop.db"], 0)
    };
    let old = with_stdin(1, "", 14);
    for c in [killed, old] {
        assert_eq!(
            stdin_rule(vec![c], r#"{ stdin_matches = "DROP", max = 0 }"#).0,
            Verdict::Fails
        );
    }
}

/// Under `not`, a `calls` rule counts with both of its bounds: the forbidden count is the one
/// inside them.
#[test]
fn a_forbidden_count_is_the_one_inside_both_bounds() {
    let interface: Interface = toml::from_str(r#"command = "chat""#).unwrap();
    let end = EndState {
        calls: vec![
            call(1, &["chat", "edit", "1"], 0),
            call(2, &["chat", "edit", "2"], 0),
        ],
        ..Default::default()
    };
    let files = MemoryFiles::default();
    let forbid = |rule: &str| {
        verdict(
            &end,
            &files,
            Some(&interface),
            &format!("all = [{{ not = {{ calls = {rule} }} }}]"),
        )
        .0
    };
    assert_eq!(forbid(r#"{ verb = "edit", min = 2 }"#), Verdict::Fails);
    assert_eq!(forbid(r#"{ verb = "edit", min = 3 }"#), Verdict::Holds);
    assert_eq!(forbid(r#"{ verb = "edit", max = 5 }"#), Verdict::Fails);
    assert_eq!(forbid(r#"{ verb = "edit", max = 1 }"#), Verdict::Holds);
    assert_eq!(
        forbid(r#"{ verb = "edit", min = 1, max = 2 }"#),
        Verdict::Fails
    );
}

/// A check's `stdout_matches` is one more thing that must hold: it never makes up for a wrong
/// exit status.
#[test]
fn a_matching_output_does_not_make_up_for_a_wrong_exit() {
    let mut end = EndState::default();
    end.checks.insert(
        "python3 t.py".into(),
        CheckRun {
            command: "python3 t.py".into(),
            exit: Some(1),
            stdout: "all passed".into(),
            ..Default::default()
        },
    );
    let files = MemoryFiles::default();
    let check =
        |rule: &str| verdict(&end, &files, None, &format!("all = [{{ check = {rule} }}]")).0;
    assert_eq!(
        check(r#"{ command = "python3 t.py", exit = 0, stdout_matches = "passed" }"#),
        Verdict::Fails
    );
    assert_eq!(
        check(r#"{ command = "python3 t.py", exit = 1, stdout_matches = "failed" }"#),
        Verdict::Fails
    );
    assert_eq!(
        check(r#"{ command = "python3 t.py", exit = 1, stdout_matches = "passed" }"#),
        Verdict::Holds
    );
}

/// A pattern that spans lines matches the whole file, though no single line holds it.
#[test]
fn file_contains_matches_across_lines() {
    let end = EndState::default();
    let mut map = BTreeMap::new();
    map.insert("notes.txt".to_string(), b"alpha\nbeta\n".to_vec());
    let files = MemoryFiles(map);
    let contains = |pattern: &str| {
        verdict(
            &end,
            &files,
            None,
            &format!(
                r#"all = [{{ file_contains = {{ path = "notes.txt", pattern = '{pattern}' }} }}]"#
            ),
        )
    };
    let (v, ev) = contains(r"alpha\nbeta");
    assert_eq!(v, Verdict::Holds);
    assert_eq!(
        ev[0]["evidence"]["match"],
        Value::Null,
        "no one line matches"
    );
    assert_eq!(contains(r"alpha\ngamma").0, Verdict::Fails);
}

/// A `steps` rule holds when the trial's reward reaches its `min_reward`.
#[test]
fn steps_hold_from_the_min_reward_up() {
    let files = MemoryFiles::default();
    let with_reward = |reward: f64| EndState {
        steps: Some(proctor_score::endstate::StepsRecord {
            reward,
            strategy: "mean".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let rule = "all = [{ steps = { min_reward = 0.5 } }]";
    for (reward, want) in [
        (1.0, Verdict::Holds),
        (0.5, Verdict::Holds),
        (0.2, Verdict::Fails),
    ] {
        assert_eq!(
            verdict(&with_reward(reward), &files, None, rule).0,
            want,
            "{reward}"
        );
    }
}

/// A `visual` rule against what its look saw: the first element's text (white space squeezed),
/// visibility (`false`: no element shown), the count, and a screenshot's share of differing
/// pixels against `max_diff`.
#[test]
fn visual_rules_read_what_the_look_saw() {
    use proctor_score::endstate::{ScreenshotDiff, VisualElement, VisualRun};
    let files = MemoryFiles::default();
    let judge = |look: &str, run: VisualRun| {
        let visual: proctor_suite::assertion::Visual = toml::from_str(look).unwrap();
        let mut end = EndState::default();
        end.visuals.insert(visual.look_key(), run);
        let look = look.replace('\n', ", ");
        verdict(
            &end,
            &files,
            None,
            &format!("all = [{{ visual = {{ {look} }} }}]"),
        )
    };
    let element = |text: &str, visible: bool| VisualElement {
        text: text.into(),
        visible,
    };
    let seen = |elements: Vec<VisualElement>| VisualRun {
        count: Some(elements.len() as u64),
        elements,
        ..Default::default()
    };
    let hello = || seen(vec![element("Hello   world", true)]);
    let text =
        |want: &str| format!("page = \"index.html\"\nselector = \"#msg\"\ntext = \"{want}\"");
    let (v, ev) = judge(&text("Hello world"), hello());
    assert_eq!(v, Verdict::Holds);
    assert!(
        ev[0]["evidence"].get("screenshot").is_none(),
        "no screenshot, none in the evidence: {ev}"
    );
    assert_eq!(judge(&text("Bye"), hello()).0, Verdict::Fails);

    let hidden = "page = \"index.html\"\nselector = \"#msg\"\nvisible = false";
    let shown_and_not = || seen(vec![element("a", false), element("b", true)]);
    assert_eq!(
        judge(hidden, seen(vec![element("a", false)])).0,
        Verdict::Holds
    );
    assert_eq!(judge(hidden, shown_and_not()).0, Verdict::Fails);

    let count = |n: u64| format!("page = \"index.html\"\nselector = \"li\"\ncount = {n}");
    assert_eq!(judge(&count(2), shown_and_not()).0, Verdict::Holds);
    assert_eq!(judge(&count(3), shown_and_not()).0, Verdict::Fails);

    let shot = "page = \"index.html\"\nscreenshot = \"golden.png\"\nmax_diff = 0.02";
    let differing = |share: f64| VisualRun {
        screenshot: Some("visual/0.png".into()),
        diff: Some(ScreenshotDiff {
            reference: "golden.png".into(),
            differing: 1,
            share,
            size: (10, 10),
            reference_size: (10, 10),
        }),
        ..Default::default()
    };
    assert_eq!(judge(shot, differing(0.01)).0, Verdict::Holds);
    assert_eq!(judge(shot, differing(0.05)).0, Verdict::Fails);
}

/// A file read only in part: what was read, and a note saying so.
struct CutFiles(MemoryFiles);

impl proctor_score::endstate::Files for CutFiles {
    fn read(&self, path: &str) -> Option<Vec<u8>> {
        self.0.read(path)
    }

    fn partial(&self, path: &str) -> Option<String> {
        self.0
             .0
            .contains_key(path)
            .then(|| "its first 16 MiB of data".to_string())
    }
}

/// A file read only in part may hold the pattern past what was read: a `file_contains` that
/// requires it is not met by what was not read, and one under `not` that forbids it is broken
/// by it (the agent can pad a file past the reader's bound), and the evidence says so. A match
/// in what was read decides either way, and a whole file is read as it is.
#[test]
fn a_file_read_in_part_counts_against_the_agent_either_way() {
    use proctor_score::endstate::Files;
    let end = EndState::default();
    let cut = CutFiles(MemoryFiles(BTreeMap::from([(
        "notes.txt".to_string(),
        b"padding\n".to_vec(),
    )])));
    let judge = |files: &dyn Files, c: &str| {
        let ctx = Context {
            end: &end,
            files,
            interface: None,
        };
        let r = condition(&ctx, &cond(c));
        (r.verdict, serde_json::to_value(&r.assertions).unwrap())
    };
    let required = r#"all = [{ file_contains = { path = "notes.txt", pattern = "SECRET" } }]"#;
    let forbidden =
        r#"all = [{ not = { file_contains = { path = "notes.txt", pattern = "SECRET" } } }]"#;
    assert_eq!(judge(&cut, required).0, Verdict::Fails);
    let (v, ev) = judge(&cut, forbidden);
    assert_eq!(v, Verdict::Fails, "{ev:#}");
    let inner = &ev[0]["evidence"]["inner"]["evidence"];
    assert!(
        inner["decided_against_the_agent"]
            .as_str()
            .is_some_and(|s| s.contains("its first 16 MiB of data")),
        "{inner:#}"
    );
    // Read whole, the same file holds no secret.
    assert_eq!(judge(&cut.0, forbidden).0, Verdict::Holds);
    // A match in what was read decides.
    let found = CutFiles(MemoryFiles(BTreeMap::from([(
        "notes.txt".to_string(),
        b"SECRET\n".to_vec(),
    )])));
    assert_eq!(judge(&found, required).0, Verdict::Holds);
    assert_eq!(judge(&found, forbidden).0, Verdict::Fails);
}
