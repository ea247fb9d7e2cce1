//! Interface metrics (agent experience), computed from the calls log of one trial.
//!
//! The definitions are [`DEFINITIONS`], in the words of docs/metrics.md.

use std::collections::{BTreeMap, BTreeSet};

use proctor_suite::model::Interface;
use serde::{Deserialize, Serialize};

use crate::endstate::CallRecord;
use crate::mcp::{McpRecord, TOOLS_LIST};

/// Each interface metric's name and definition, as docs/metrics.md states them (a test keeps the
/// two the same): what the viewer shows beside a trial's figures. Code spans are in backticks.
pub const DEFINITIONS: [(&str, &str); 9] = [
    ("calls", "Interface calls made, denied ones included."),
    (
        "errors",
        "Calls that ran and exited non-zero, or never finished (still running when the trial stopped). Denied calls are not errors, nor is a call of nothing but help arguments that exits with one of `help_exit`.",
    ),
    (
        "repeats",
        "Calls identical to the call right before them: same argv and same stdin (BLAKE3).",
    ),
    (
        "undone",
        "Successful calls of the second verb of an `undo` pair that reverse an earlier successful call of its first verb (`[\"send\", \"unsend\"]`: a successful `unsend` after a successful `send`). Each successful first-verb call can be undone once.",
    ),
    (
        "denied",
        "Calls refused by the agent CLI's permission layer (proctor's shims never refuse).",
    ),
    ("wrong_turns", "`errors + repeats + undone + denied`."),
    (
        "recoveries",
        "Successful calls of a verb that follow at least one failed (not denied) call of the same verb since that verb's previous success: fail, fail, succeed is one recovery.",
    ),
    (
        "help_calls",
        "Calls whose arguments contain one of the interface's `help` arguments; by default `--help` or `-h`, or the verb `help`.",
    ),
    (
        "asks",
        "The agent's questions to the person: its answers, one per turn of a conversation (the final answer alone otherwise), that match the task's `ask_patterns`. Not wrong turns: an ask is its own result.",
    ),
];

/// The interface metrics of one trial.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct InterfaceMetrics {
    /// Interface calls made.
    pub calls: u64,
    /// Calls that exited non-zero or never finished.
    pub errors: u64,
    /// Calls identical to the one right before.
    pub repeats: u64,
    /// Calls that reverse an earlier call.
    pub undone: u64,
    /// Calls refused by the allow-list.
    pub denied: u64,
    /// errors + repeats + undone + denied.
    pub wrong_turns: u64,
    /// Successes of a verb after failures of that verb.
    pub recoveries: u64,
    /// Calls asking for help.
    pub help_calls: u64,
    /// Answers that ask the person (one per turn of a conversation).
    #[serde(default)]
    pub asks: u64,
}

/// Computes the metrics of the calls of `interface.command` in `calls` (in start order).
pub fn interface_metrics(interface: &Interface, calls: &[CallRecord]) -> InterfaceMetrics {
    let command = interface.command.get_ref();
    let ours: Vec<&CallRecord> = calls.iter().filter(|c| &c.command == command).collect();
    let verb = |c: &CallRecord| interface.verb_of(&c.argv).unwrap_or_default().to_string();
    let ok = |c: &CallRecord| c.denied.is_none() && interface.succeeded(&c.argv, c.exit);
    let mut m = InterfaceMetrics {
        calls: ours.len() as u64,
        ..InterfaceMetrics::default()
    };
    // Successful calls by verb, waiting to be undone.
    let mut undoable: BTreeMap<String, u64> = BTreeMap::new();
    // The verbs whose last call failed, awaiting one that succeeds.
    let mut failing: BTreeSet<String> = BTreeSet::new();
    let mut previous: Option<&CallRecord> = None;
    for call in &ours {
        let v = verb(call);
        if call.denied.is_some() {
            m.denied += 1;
        } else if !ok(call) {
            m.errors += 1;
        }
        if let Some(prev) = previous {
            if prev.argv == call.argv && prev.stdin_hash == call.stdin_hash {
                m.repeats += 1;
            }
        }
        if interface.is_help(&call.argv) {
            m.help_calls += 1;
        }
        if ok(call) {
            if let Some(done) = interface
                .undo
                .iter()
                .find(|[_, undo]| *undo == v)
                .map(|[done, _]| done)
            {
                if let Some(n) = undoable.get_mut(done) {
                    if *n > 0 {
                        *n -= 1;
                        m.undone += 1;
                    }
                }
            }
            *undoable.entry(v.clone()).or_default() += 1;
            if failing.remove(&v) {
                m.recoveries += 1;
            }
        } else if call.denied.is_none() {
            failing.insert(v.clone());
        }
        previous = Some(call);
    }
    m.wrong_turns = m.errors + m.repeats + m.undone + m.denied;
    m
}

/// The interface metrics of MCP server `server` from its records (in order), with the
/// definitions of [`DEFINITIONS`] read for tool calls: a call is a
/// `tools/call` (denied ones included), its verb is its tool, an error is a failed call
/// ([`McpRecord::failed`]), a repeat has the same tool and arguments as the call before it, and
/// a help call is a `tools/list` after the session's first (not a call), or a call of one of the
/// interface's `help` tools.
pub fn mcp_metrics(interface: &Interface, server: &str, records: &[McpRecord]) -> InterfaceMetrics {
    let ours: Vec<&McpRecord> = records.iter().filter(|r| r.server == server).collect();
    let mut m = InterfaceMetrics::default();
    let mut lists: BTreeMap<u64, u64> = BTreeMap::new();
    for r in ours.iter().filter(|r| r.method == TOOLS_LIST) {
        let seen = lists.entry(r.session).or_default();
        if *seen > 0 {
            m.help_calls += 1;
        }
        *seen += 1;
    }
    let calls: Vec<&&McpRecord> = ours.iter().filter(|r| r.is_tool_call()).collect();
    m.calls = calls.len() as u64;
    let help_tools: &[String] = interface.help.as_ref().map_or(&[], |h| h.get_ref());
    m.help_calls += calls
        .iter()
        .filter(|c| c.tool.as_ref().is_some_and(|t| help_tools.contains(t)))
        .count() as u64;
    let mut undoable: BTreeMap<String, u64> = BTreeMap::new();
    // The tools whose last call failed, awaiting one that succeeds.
    let mut failing: BTreeSet<String> = BTreeSet::new();
    let mut previous: Option<&McpRecord> = None;
    for call in calls {
        let tool = call.tool.clone().unwrap_or_default();
        if call.denied.is_some() {
            m.denied += 1;
        } else if call.failed() {
            m.errors += 1;
        }
        if previous.is_some_and(|p| p.tool == call.tool && p.arguments == call.arguments) {
            m.repeats += 1;
        }
        let ok = call.denied.is_none() && !call.failed();
        if ok {
            let undoes = interface.undo.iter().find(|[_, u]| *u == tool);
            if let Some([done, _]) = undoes {
                if let Some(n) = undoable.get_mut(done).filter(|n| **n > 0) {
                    *n -= 1;
                    m.undone += 1;
                }
            }
            *undoable.entry(tool.clone()).or_default() += 1;
            if failing.remove(&tool) {
                m.recoveries += 1;
            }
        } else if call.denied.is_none() {
            failing.insert(tool);
        }
        previous = Some(call);
    }
    m.wrong_turns = m.errors + m.repeats + m.undone + m.denied;
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interface() -> Interface {
        toml::from_str("command = \"chat\"\nundo = [[\"send\", \"unsend\"]]").unwrap()
    }

    fn call(argv: &[&str], exit: i32) -> CallRecord {
        CallRecord {
            seq: 0,
            command: argv[0].into(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            argv_hex: Default::default(),
            argv_cut: None,
            cwd: String::new(),
            stdin_bytes: 0,
            stdin_hash: "h".into(),
            stdin_head: String::new(),
            stdin_terminal: false,
            exit: Some(exit),
            denied: None,
            stdout_bytes: 0,
            stdout_head: String::new(),
            stderr_bytes: 0,
            stderr_head: String::new(),
            start: 0.0,
            end: Some(0.0),
        }
    }

    fn denied(argv: &[&str]) -> CallRecord {
        CallRecord {
            denied: Some("denied".into()),
            exit: None,
            ..call(argv, 0)
        }
    }

    #[test]
    fn a_clean_session_has_no_wrong_turns() {
        let m = interface_metrics(
            &interface(),
            &[call(&["chat", "read"], 0), call(&["chat", "send", "x"], 0)],
        );
        assert_eq!(
            m,
            InterfaceMetrics {
                calls: 2,
                ..InterfaceMetrics::default()
            }
        );
    }

    // Direction tests: each wrong-turn component rises when its behaviour is added.
    #[test]
    fn errors_rise_with_failing_calls() {
        let base = interface_metrics(&interface(), &[call(&["chat", "edit", "7"], 0)]);
        let more = interface_metrics(
            &interface(),
            &[
                call(&["chat", "edit", "7"], 2),
                call(&["chat", "edit", "7"], 0),
            ],
        );
        assert!(more.errors > base.errors && more.wrong_turns > base.wrong_turns);
    }

    #[test]
    fn repeats_rise_with_identical_consecutive_calls() {
        let m = interface_metrics(
            &interface(),
            &[
                call(&["chat", "read"], 0),
                call(&["chat", "read"], 0),
                call(&["chat", "read", "x"], 0),
            ],
        );
        assert_eq!(m.repeats, 1);
        assert_eq!(m.wrong_turns, 1);
    }

    #[test]
    fn undone_counts_reversals_of_successful_calls_only() {
        let m = interface_metrics(
            &interface(),
            &[
                call(&["chat", "send", "a"], 0),
                call(&["chat", "unsend", "1"], 0),
            ],
        );
        assert_eq!(m.undone, 1);
        let none = interface_metrics(
            &interface(),
            &[
                call(&["chat", "send", "a"], 1),
                call(&["chat", "unsend", "1"], 0),
            ],
        );
        assert_eq!(none.undone, 0);
    }

    #[test]
    fn each_successful_call_is_undone_at_most_once() {
        let m = interface_metrics(
            &interface(),
            &[
                call(&["chat", "send", "a"], 0),
                call(&["chat", "unsend", "1"], 0),
                call(&["chat", "unsend", "1"], 0),
                call(&["chat", "unsend", "2"], 0),
            ],
        );
        assert_eq!((m.undone, m.repeats, m.wrong_turns), (1, 1, 2));
        let two = interface_metrics(
            &interface(),
            &[
                call(&["chat", "send", "a"], 0),
                call(&["chat", "send", "b"], 0),
                call(&["chat", "unsend", "1"], 0),
                call(&["chat", "unsend", "2"], 0),
            ],
        );
        assert_eq!(two.undone, 2);
        // A failed undo reverses nothing.
        let failed = interface_metrics(
            &interface(),
            &[
                call(&["chat", "send", "a"], 0),
                call(&["chat", "unsend", "1"], 1),
            ],
        );
        assert_eq!((failed.undone, failed.errors), (0, 1));
    }

    #[test]
    fn a_call_with_other_stdin_is_no_repeat() {
        let mut other = call(&["chat", "send", "x"], 0);
        other.stdin_hash = "other".into();
        let m = interface_metrics(&interface(), &[call(&["chat", "send", "x"], 0), other]);
        assert_eq!((m.repeats, m.wrong_turns), (0, 0));
    }

    #[test]
    fn denied_calls_are_wrong_turns_but_not_errors() {
        let m = interface_metrics(&interface(), &[denied(&["chat", "send"])]);
        assert_eq!((m.denied, m.errors, m.wrong_turns), (1, 0, 1));
    }

    #[test]
    fn fail_fail_succeed_is_one_recovery() {
        let m = interface_metrics(
            &interface(),
            &[
                call(&["chat", "edit", "7"], 2),
                call(&["chat", "edit", "#7"], 2),
                call(&["chat", "edit", "m-7"], 0),
                call(&["chat", "edit", "m-8"], 0),
            ],
        );
        assert_eq!(m.recoveries, 1);
        let none = interface_metrics(&interface(), &[call(&["chat", "edit", "m-7"], 0)]);
        assert!(m.recoveries > none.recoveries);
    }

    #[test]
    fn help_calls_count_flags_and_the_help_verb() {
        let m = interface_metrics(
            &interface(),
            &[
                call(&["chat", "help", "edit"], 0),
                call(&["chat", "edit", "--help"], 0),
                call(&["chat", "read", "-h"], 0),
                call(&["chat", "read"], 0),
            ],
        );
        assert_eq!(m.help_calls, 3);
    }

    fn sqlite() -> Interface {
        toml::from_str(
            "command = \"sqlite3\"\nverb = \"first-operand\"\nhelp = [\"-help\", \"--help\", \".help\"]\nhelp_exit = [1]",
        )
        .unwrap()
    }

    #[test]
    fn an_interface_s_own_help_arguments_count_and_the_defaults_then_do_not() {
        let calls = [
            call(&["sqlite3", "-help"], 0),
            call(&["sqlite3", "shop.db", ".help"], 0),
            call(&["sqlite3", "--help"], 1),
            call(&["sqlite3", "-h"], 1),
            call(&["sqlite3", "help"], 1),
        ];
        let which = |i: &Interface| -> Vec<u64> {
            calls
                .iter()
                .map(|c| interface_metrics(i, std::slice::from_ref(c)).help_calls)
                .collect()
        };
        assert_eq!(which(&sqlite()), [1, 1, 1, 0, 0]);
        let defaults: Interface = toml::from_str("command = \"sqlite3\"").unwrap();
        assert_eq!(which(&defaults), [0, 0, 1, 1, 1]);
        assert_eq!(interface_metrics(&sqlite(), &calls).help_calls, 3);
    }

    // Direction: help's own exit status is no error; the same status on any other call is.
    #[test]
    fn errors_do_not_rise_with_help_s_own_exit_status_and_do_with_any_other() {
        let help = interface_metrics(&sqlite(), &[call(&["sqlite3", "--help"], 1)]);
        assert_eq!((help.errors, help.wrong_turns, help.help_calls), (0, 0, 1));
        let other_status = interface_metrics(&sqlite(), &[call(&["sqlite3", "--help"], 2)]);
        assert_eq!((other_status.errors, other_status.wrong_turns), (1, 1));
        let not_help = interface_metrics(&sqlite(), &[call(&["sqlite3", "shop.db", "x"], 1)]);
        assert_eq!(not_help.errors, 1);
        assert!(other_status.errors > help.errors && not_help.errors > help.errors);
        // Without `help_exit`, a help call that exits 1 is an error.
        let strict: Interface =
            toml::from_str("command = \"sqlite3\"\nhelp = [\"--help\"]").unwrap();
        assert_eq!(
            interface_metrics(&strict, &[call(&["sqlite3", "--help"], 1)]).errors,
            1
        );
    }

    // Direction: a failed call then help's own exit is no recovery of the failed verb.
    #[test]
    fn the_first_operand_rule_skips_leading_options_for_recoveries() {
        let m = interface_metrics(
            &sqlite(),
            &[
                call(&["sqlite3", "-readonly", "shop.db", "bad"], 1),
                call(&["sqlite3", "shop.db", "good"], 0),
            ],
        );
        assert_eq!(m.recoveries, 1, "both calls have the verb shop.db");
        let by_arg: Interface = toml::from_str("command = \"sqlite3\"").unwrap();
        let m = interface_metrics(
            &by_arg,
            &[
                call(&["sqlite3", "-readonly", "shop.db", "bad"], 1),
                call(&["sqlite3", "shop.db", "good"], 0),
            ],
        );
        assert_eq!(m.recoveries, 0, "verbs -readonly and shop.db differ");
    }

    #[test]
    fn other_commands_are_not_counted() {
        let m = interface_metrics(&interface(), &[call(&["git", "status"], 1)]);
        assert_eq!(m, InterfaceMetrics::default());
    }

    #[test]
    fn the_definitions_are_the_ones_docs_metrics_md_gives() {
        let doc = include_str!("../../../docs/metrics.md");
        for (name, definition) in DEFINITIONS {
            let row = format!("| `{name}` | {definition} |");
            assert!(doc.contains(&row), "docs/metrics.md has no row {row}");
        }
    }
}
