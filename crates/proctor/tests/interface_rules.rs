//! An interface's own help calls, help exit status and verb rule (`[tasks.interface] help`,
//! `help_exit`, `verb = "first-operand"`), through the real binary with Debian's `sqlite3`: the
//! same calls are counted as the interface declares, and a failing call dressed up as help stays
//! an error.

mod common;

use common::lab::{As, Lab};
use serde_json::Value;

/// A one-task sqlite3 lab over `fixture/shop.db`, with `interface` appended to
/// `[tasks.interface]`, whose agent runs `steps`.
fn sqlite_lab(name: &str, interface: &str, steps: &[&str]) -> Lab {
    let lab = Lab::new(name);
    let db = lab.suite().join("fixture/shop.db");
    let made = std::process::Command::new("sqlite3")
        .arg(&db)
        .arg("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT); INSERT INTO orders (item) VALUES ('pen');")
        .status()
        .unwrap();
    assert!(made.success());
    lab.one_task(
        &format!("allow = [\"sqlite3\"]\n[tasks.interface]\ncommand = \"sqlite3\"\n{interface}"),
        "{ calls = { min = 1 } }",
        steps,
        false,
    );
    lab
}

fn metrics(record: &Value) -> (u64, u64, u64, u64) {
    let m = &record["verdict"]["metrics"];
    let n = |k: &str| m[k].as_u64().unwrap_or_else(|| panic!("no {k} in {m:#}"));
    (
        n("help_calls"),
        n("errors"),
        n("recoveries"),
        n("wrong_turns"),
    )
}

/// The calls: two help calls that exit 1 by sqlite3's own design, a `.help` that exits 0, a
/// failing query behind a leading option, the same query fixed without it.
const STEPS: [&str; 5] = [
    "sqlite3 --help",
    "sqlite3 -help",
    "sqlite3 shop.db .help",
    "sqlite3 -readonly shop.db 'SELEC count(*) FROM orders'",
    "sqlite3 shop.db 'SELECT count(*) FROM orders'",
];

#[test]
fn sqlite3_s_help_calls_exit_status_and_verbs_count_as_its_interface_declares() {
    if !common::have_sqlite3() {
        return;
    }
    let declared = sqlite_lab(
        "iface-sqlite3",
        "verb = \"first-operand\"\nhelp = [\"--help\", \"-help\", \".help\"]\nhelp_exit = [1]",
        &STEPS,
    );
    let Some(record) = declared.run_graded(As::Me, false, &[]) else {
        return;
    };
    assert_eq!(record["outcome"], "completed", "{}", record["reason"]);
    let exits: Vec<Value> = record["end_state"]["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["exit"].clone())
        .collect();
    assert_eq!(exits, [1, 1, 0, 1, 0], "sqlite3's own exit statuses");
    // Three help calls; the one error is the bad query, which the fixed query (same verb,
    // shop.db, with the leading option skipped) recovers from.
    assert_eq!(metrics(&record), (3, 1, 1, 1));

    // The same calls under the default rules: only `--help` is help, its exit 1 is an error,
    // and `-help` is an error too; `-readonly` is the failed call's verb, so nothing recovers.
    let defaults = sqlite_lab("iface-sqlite3-defaults", "", &STEPS);
    let Some(record) = defaults.run_graded(As::Me, false, &[]) else {
        return;
    };
    assert_eq!(metrics(&record), (1, 3, 0, 3));
}

#[test]
fn a_failing_call_dressed_up_as_help_is_still_an_error() {
    if !common::have_sqlite3() {
        return;
    }
    // The trick: tack a help argument onto a failing query, hoping help's exit 1 forgives it.
    let lab = sqlite_lab(
        "iface-sqlite3-dressed",
        "help = [\"--help\", \"-help\", \".help\"]\nhelp_exit = [1]",
        &[
            "sqlite3 shop.db 'SELEC 1' .help",
            "sqlite3 shop.db 'DROP TABLE nothing_here' -help",
        ],
    );
    let Some(record) = lab.run_graded(As::Me, false, &[]) else {
        return;
    };
    let (help, errors, _, wrong_turns) = metrics(&record);
    assert_eq!((help, errors, wrong_turns), (2, 2, 2), "{record:#}");
}

#[test]
fn verb_arg_beside_the_first_operand_rule_is_refused_where_it_is_written() {
    let suite = common::TestSuite::minimal().edit(
        "[tasks.success]",
        "allow = [\"sh\"]\n\n[tasks.interface]\ncommand = \"sh\"\nverb = \"first-operand\"\nverb_arg = 2\n\n[tasks.success]",
    );
    let out = suite.validate();
    let text = format!("{}{}", out.stdout, out.stderr);
    assert_eq!(out.code, 2, "{text}");
    assert!(
        text.contains("`verb_arg` is not used with `verb = \"first-operand\"`"),
        "{text}"
    );
    assert!(text.contains("suite.toml:21:12"), "{text}");
    assert!(
        text.contains("remove `verb_arg`, or remove `verb = \"first-operand\"`"),
        "{text}"
    );
    // An unknown rule is refused with the rules there are.
    let suite = common::TestSuite::minimal().edit(
        "[tasks.success]",
        "allow = [\"sh\"]\n\n[tasks.interface]\ncommand = \"sh\"\nverb = \"second-operand\"\n\n[tasks.success]",
    );
    let out = suite.validate();
    let text = format!("{}{}", out.stdout, out.stderr);
    assert_eq!(out.code, 2, "{text}");
    assert!(text.contains("first-operand"), "{text}");
}
