//! MCP calls: the records of an MCP session's messages, logged by proctor between the agent's
//! MCP client and the server, and the refusal among them that makes declining honest. The
//! `mcp_calls` assertion over them is [`crate::evaluate::mcp_calls`]; an MCP server's interface
//! metrics are [`crate::metrics::mcp_metrics`].

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The method of a tool call.
pub const TOOLS_CALL: &str = "tools/call";

/// The method that lists a server's tools.
pub const TOOLS_LIST: &str = "tools/list";

/// A JSON-RPC error a server (or proctor, for a denied call) answered with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RpcError {
    /// The JSON-RPC error code, e.g. `-32602` (invalid params).
    pub code: i64,
    /// The error's message.
    pub message: String,
}

/// One request of an MCP session and its answer, as proctor relayed them (`mcp.jsonl`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpRecord {
    /// The record's number in the trial's MCP log, from 1, in the order answers came.
    pub seq: u64,
    /// The MCP server.
    pub server: String,
    /// The number, in the calls log, of the session this request was made in (the server's
    /// process, started for the session).
    pub session: u64,
    /// The JSON-RPC method: `initialize`, `tools/list`, `tools/call`, `resources/read`,
    /// `prompts/get`, ...
    pub method: String,
    /// The tool called (`tools/call` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The call's arguments (`tools/call`), or the request's params (other methods).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// The result's `content` (`tools/call`), or the whole result (other methods); past its
    /// bound a string of its head (`cut`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Value>,
    /// The result's `isError`: the tool ran and reports a failure.
    #[serde(default)]
    pub is_error: bool,
    /// The JSON-RPC error answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RpcError>,
    /// Why proctor refused the call (a tool outside `allow_tools`); it never reached the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denied: Option<String>,
    /// The tool was not among those the server's last `tools/list` answer of the session gave
    /// (false when the session listed none).
    #[serde(default)]
    pub unknown_tool: bool,
    /// Whether `arguments` or `content` keep only a head of what passed.
    #[serde(default)]
    pub cut: bool,
    /// Whether the request got an answer before the session ended.
    pub answered: bool,
    /// Milliseconds from the request passing proctor to its answer passing back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<f64>,
    /// Seconds from the trial's start to the request.
    pub start: f64,
    /// Seconds from the trial's start to the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<f64>,
}

impl McpRecord {
    /// Whether the request failed: a JSON-RPC error, an `isError` result, a tool the server
    /// did not list, or no answer. A denied call is counted apart, not as failed.
    pub fn failed(&self) -> bool {
        self.denied.is_none()
            && (self.error.is_some() || self.is_error || self.unknown_tool || !self.answered)
    }

    /// Whether this is a `tools/call`.
    pub fn is_tool_call(&self) -> bool {
        self.method == TOOLS_CALL
    }

    /// The call's arguments as compact JSON (`{}` when none), as `args_match` reads them.
    pub fn arguments_text(&self) -> String {
        self.arguments
            .as_ref()
            .map_or_else(|| "{}".to_string(), Value::to_string)
    }
}

/// The first tool call proctor refused (outside `allow_tools`) that no later call of the same
/// server's same tool got past, described: a limit the suite placed, after which declining is
/// honest. `None` when there is none.
pub fn unrecovered_denial(records: &[McpRecord]) -> Option<String> {
    records.iter().enumerate().find_map(|(i, r)| {
        if !(r.is_tool_call() && r.denied.is_some()) {
            return None;
        }
        let recovered = records[i + 1..].iter().any(|d| {
            d.is_tool_call()
                && d.server == r.server
                && d.tool == r.tool
                && d.denied.is_none()
                && !d.failed()
        });
        (!recovered).then(|| {
            format!(
                "the tool `{}` of MCP server `{}` was refused (allow_tools) and never succeeded",
                r.tool.as_deref().unwrap_or_default(),
                r.server
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluate::{mcp_calls, Verdict};
    use crate::metrics::{mcp_metrics, InterfaceMetrics};
    use proctor_suite::assertion::McpCalls;
    use proctor_suite::model::Interface;
    use serde_json::json;

    fn call(seq: u64, tool: &str, args: Value) -> McpRecord {
        McpRecord {
            seq,
            server: "notes".into(),
            session: 1,
            method: TOOLS_CALL.into(),
            tool: Some(tool.into()),
            arguments: Some(args),
            content: None,
            is_error: false,
            error: None,
            denied: None,
            unknown_tool: false,
            cut: false,
            answered: true,
            latency_ms: Some(1.0),
            start: 0.0,
            end: Some(0.0),
        }
    }

    fn interface() -> Interface {
        toml::from_str("mcp = \"notes\"\nundo = [[\"add_note\", \"delete_note\"]]").unwrap()
    }

    #[test]
    fn a_refused_tool_never_got_past_is_a_rejection() {
        let mut denied = call(1, "wipe_notes", json!({}));
        denied.denied = Some("not in allow_tools".into());
        let why = unrecovered_denial(std::slice::from_ref(&denied)).unwrap();
        assert!(why.contains("`wipe_notes` of MCP server `notes`"), "{why}");
        assert_eq!(unrecovered_denial(&[call(1, "add_note", json!({}))]), None);
    }

    #[test]
    fn a_call_of_a_declared_help_tool_is_a_help_call() {
        let with_help: Interface = toml::from_str("mcp = \"notes\"\nhelp = [\"how_to\"]").unwrap();
        let records = [call(1, "how_to", json!({})), call(2, "add_note", json!({}))];
        let m = mcp_metrics(&with_help, "notes", &records);
        assert_eq!((m.calls, m.help_calls), (2, 1));
        assert_eq!(mcp_metrics(&interface(), "notes", &records).help_calls, 0);
    }

    #[test]
    fn failures_denials_repeats_and_undos_are_wrong_turns_and_a_second_list_is_help() {
        let mut unknown = call(2, "nope", json!({}));
        unknown.error = Some(RpcError {
            code: -32602,
            message: "Unknown tool".into(),
        });
        let mut bad = call(3, "add_note", json!({"title": 3}));
        bad.is_error = true;
        let mut denied = call(4, "wipe", json!({}));
        denied.denied = Some("not in allow_tools".into());
        let list = |seq| McpRecord {
            method: TOOLS_LIST.into(),
            tool: None,
            ..call(seq, "", Value::Null)
        };
        let records = vec![
            list(1),
            unknown,
            bad,
            denied,
            call(5, "add_note", json!({"title": "Milk"})),
            call(6, "add_note", json!({"title": "Milk"})),
            call(7, "delete_note", json!({"id": 1})),
            list(8),
        ];
        let m = mcp_metrics(&interface(), "notes", &records);
        assert_eq!(m.calls, 6);
        assert_eq!((m.errors, m.denied, m.repeats, m.undone), (2, 1, 1, 1));
        assert_eq!(m.wrong_turns, 5);
        assert_eq!(m.recoveries, 1, "add_note failed, then succeeded");
        assert_eq!(m.help_calls, 1);
        assert_eq!(
            mcp_metrics(&interface(), "other", &records),
            InterfaceMetrics::default()
        );
    }

    #[test]
    fn only_a_list_after_its_sessions_first_is_a_help_call() {
        let list = |seq, session| McpRecord {
            method: TOOLS_LIST.into(),
            tool: None,
            session,
            ..call(seq, "", Value::Null)
        };
        let help = |records: &[McpRecord]| mcp_metrics(&interface(), "notes", records).help_calls;
        assert_eq!(help(&[list(1, 1)]), 0, "a session's first list is no help");
        assert_eq!(
            help(&[list(1, 1), list(2, 2)]),
            0,
            "each session lists once"
        );
        assert_eq!(help(&[list(1, 1), list(2, 1), list(3, 1)]), 2);
        assert_eq!(help(&[list(1, 1), list(2, 2), list(3, 1)]), 1);
    }

    #[test]
    fn a_repeat_is_the_same_tool_with_the_same_arguments() {
        let repeats = |records: &[McpRecord]| mcp_metrics(&interface(), "notes", records).repeats;
        let milk = json!({"title": "Milk"});
        let same = [
            call(1, "add_note", milk.clone()),
            call(2, "add_note", milk.clone()),
        ];
        assert_eq!(repeats(&same), 1);
        let other_args = [
            call(1, "add_note", milk.clone()),
            call(2, "add_note", json!({"title": "Eggs"})),
        ];
        assert_eq!(repeats(&other_args), 0);
        let other_tool = [
            call(1, "add_note", milk.clone()),
            call(2, "find_note", milk),
        ];
        assert_eq!(repeats(&other_tool), 0);
    }

    #[test]
    fn only_the_declared_undo_of_a_done_call_undoes_it_and_only_once() {
        let undone = |records: &[McpRecord]| mcp_metrics(&interface(), "notes", records).undone;
        let add = |seq| call(seq, "add_note", json!({"title": seq}));
        let delete = |seq| call(seq, "delete_note", json!({"id": seq}));
        assert_eq!(undone(&[add(1), delete(2)]), 1);
        assert_eq!(
            undone(&[add(1), call(2, "find_note", json!({}))]),
            0,
            "another tool undoes nothing"
        );
        assert_eq!(undone(&[delete(1)]), 0, "nothing done to undo");
        assert_eq!(
            undone(&[add(1), delete(2), delete(3)]),
            1,
            "one add is undone once"
        );
        assert_eq!(undone(&[add(1), add(2), delete(3), delete(4)]), 2);
    }

    #[test]
    fn mcp_calls_counts_matching_calls_and_reads_failures_apart() {
        let mut failed = call(2, "add_note", json!({"title": 3}));
        failed.is_error = true;
        let records = vec![call(1, "add_note", json!({"title": "Milk"})), failed];
        let rule = |text: &str| -> McpCalls { toml::from_str(text).unwrap() };
        let ok = mcp_calls(&records, 0,
            &rule("server = \"notes\"\ntool = \"add_note\"\nmin = 1\nmax = 1\nerror = false\nargs_match = \"Milk\""),
            false,
        );
        assert_eq!(ok.verdict, Verdict::Holds);
        assert_eq!(ok.evidence["seqs"], json!([1]));
        let two = mcp_calls(&records, 0, &rule("server = \"notes\"\nmin = 2"), false);
        assert_eq!(two.verdict, Verdict::Holds);
        let errors = mcp_calls(
            &records,
            0,
            &rule("server = \"notes\"\nerror = true\nmax = 0"),
            false,
        );
        assert_eq!(errors.verdict, Verdict::Fails);
        assert_eq!(errors.evidence["seqs"], json!([2]));
    }

    #[test]
    fn mcp_calls_counts_only_this_servers_tool_calls_that_got_through() {
        let mut other = call(2, "add_note", json!({}));
        other.server = "other".into();
        let mut denied = call(3, "add_note", json!({}));
        denied.denied = Some("not in allow_tools".into());
        let list = McpRecord {
            method: TOOLS_LIST.into(),
            tool: None,
            ..call(4, "", Value::Null)
        };
        let records = vec![call(1, "add_note", json!({})), other, denied, list];
        let rule = |text: &str| -> McpCalls { toml::from_str(text).unwrap() };
        let ok = mcp_calls(
            &records,
            0,
            &rule("server = \"notes\"\nerror = false"),
            false,
        );
        assert_eq!(ok.evidence["seqs"], json!([1]), "{}", ok.evidence);
        let any = mcp_calls(&records, 0, &rule("server = \"notes\""), false);
        assert_eq!(any.evidence["seqs"], json!([1]), "{}", any.evidence);
        // Under `not`, the forbidden count is the one inside both bounds.
        let forbidden = |text: &str| mcp_calls(&records, 0, &rule(text), true).verdict;
        assert_eq!(forbidden("server = \"notes\"\nmin = 2"), Verdict::Fails);
        assert_eq!(
            forbidden("server = \"notes\"\nmin = 1\nmax = 3"),
            Verdict::Holds
        );
        assert_eq!(forbidden("server = \"notes\"\nmax = 0"), Verdict::Fails);
        // A call whose arguments were kept only in part, and do not match, is named.
        let mut cut = call(5, "add_note", json!({"title": "Mi"}));
        cut.cut = true;
        let matching = rule("server = \"notes\"\nargs_match = \"Milk\"");
        let unseen = mcp_calls(&[cut], 0, &matching, false);
        assert_eq!(unseen.evidence["arguments_unseen"], json!([5]));
        let seen = mcp_calls(&records, 0, &matching, false);
        assert!(
            seen.evidence.get("arguments_unseen").is_none(),
            "{}",
            seen.evidence
        );
    }

    /// Exchanges past the full calls log are read against the agent: each may have been the
    /// call a `max` or a `not` forbids, and none counts toward a `min`.
    #[test]
    fn unlogged_exchanges_count_against_the_agent_either_way() {
        use crate::evaluate::mcp_calls as with;
        let records = vec![call(1, "add_note", json!({}))];
        let rule = |text: &str| -> McpCalls { toml::from_str(text).unwrap() };
        let verdict = |text: &str, unlogged: u64, forbidden: bool| {
            with(&records, unlogged, &rule(text), forbidden).verdict
        };
        // Required: `min` counts what was logged, `max` what may have been made.
        assert_eq!(
            verdict("server = \"notes\"\nmin = 1", 3, false),
            Verdict::Holds
        );
        assert_eq!(
            verdict("server = \"notes\"\nmin = 2", 3, false),
            Verdict::Fails
        );
        assert_eq!(
            verdict("server = \"notes\"\nmax = 1", 0, false),
            Verdict::Holds
        );
        assert_eq!(
            verdict("server = \"notes\"\nmax = 1", 1, false),
            Verdict::Fails
        );
        // Under `not`: the inner rule holds (so the `not` fails) if any count it may be meets it.
        let delete = "server = \"notes\"\ntool = \"delete_note\"\nmin = 1";
        assert_eq!(verdict(delete, 0, true), Verdict::Fails);
        assert_eq!(verdict(delete, 1, true), Verdict::Holds);
        let e = with(&records, 4, &rule(delete), true).evidence;
        assert_eq!((&e["count"], &e["unlogged"]), (&json!(0), &json!(4)), "{e}");
        assert!(with(&records, 0, &rule(delete), true)
            .evidence
            .get("unlogged")
            .is_none());
    }
}
