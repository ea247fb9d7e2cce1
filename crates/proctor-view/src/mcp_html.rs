//! A trial's MCP calls: each request proctor relayed between the agent's MCP client and a
//! suite's MCP server, with how it was answered, its latency, and the answer.

use maud::{html, Markup};
use proctor_score::mcp::McpRecord;

use crate::html::table;

/// The MCP log as a table; `None` when the trial made no MCP request.
pub fn mcp_calls(records: &[McpRecord]) -> Option<Markup> {
    if records.is_empty() {
        return None;
    }
    let rows = html! {
        @for m in records {
            tr {
                td { (m.seq) }
                td { (m.server) }
                td { code { (m.method) @if let Some(t) = &m.tool { " " (t) } } }
                td { @if let Some(a) = &m.arguments { pre { (a.to_string()) } } }
                td { (answered(m)) }
                td { @if let Some(l) = m.latency_ms { (format!("{l:.1} ms")) } }
                td { @if let Some(c) = &m.content { pre { (c.to_string()) } } }
            }
        }
    };
    Some(table(
        "mcp-calls",
        &[
            "#",
            "Server",
            "Request",
            "Arguments",
            "Answer",
            "Latency",
            "Content",
        ],
        rows,
    ))
}

/// How a request was answered: denied by proctor, a JSON-RPC error, an `isError` result, no
/// answer, or ok.
fn answered(m: &McpRecord) -> String {
    match (&m.denied, &m.error) {
        (Some(why), _) => format!("denied: {why}"),
        (None, Some(e)) => format!("error {}: {}", e.code, e.message),
        (None, None) if m.is_error => "isError".to_string(),
        (None, None) if !m.answered => "unanswered".to_string(),
        (None, None) => "ok".to_string(),
    }
}
