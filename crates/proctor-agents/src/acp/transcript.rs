//! Reads what `proctor __acp-client` printed into an [`AgentOutput`]: the answer and session id,
//! the tool calls (each `tool_call` completed by its `tool_call_update`s), the permission
//! requests refused (denied calls, taken out of the tool calls) and the client's errors. The
//! session id is the one a next turn goes on with, so it is given only when the agent can load
//! a session (`acp.agent`'s `load_session`); the transcript keeps it either way.

use serde_json::Value;

use crate::cli;
use crate::{AgentOutput, DeniedCall, ToolCall};

use super::permission::shell_command;

/// Reads the client's stdout (and, when it printed nothing, the agent's stderr as the error).
pub fn parse(stdout: &str, stderr: &str) -> AgentOutput {
    let mut out = AgentOutput::default();
    let mut can_load = true;
    for (v, len) in cli::json_lines(stdout) {
        match cli::str_of(&v, "type") {
            Some("acp.agent") => {
                can_load = v.get("load_session").and_then(Value::as_bool) == Some(true);
            }
            Some("tool_call") => on_tool_call(&mut out, &v),
            Some("tool_call_update") => on_tool_call_update(&mut out, &v),
            Some("permission") if v.get("granted").and_then(Value::as_bool) == Some(false) => {
                on_denied(&mut out, &v)
            }
            Some("answer") => {
                out.answer = cli::str_of(&v, "text").unwrap_or_default().to_string();
                out.session_id = cli::str_of(&v, "session_id").map(String::from);
            }
            Some("acp.session") if out.session_id.is_none() => {
                out.session_id = cli::str_of(&v, "session_id").map(String::from);
            }
            Some("error") => out.errors.push(format!(
                "acp: {}",
                cli::str_of(&v, "message").unwrap_or("error")
            )),
            _ => {}
        }
        out.keep_event(v, len);
    }
    if !can_load {
        out.session_id = None;
    }
    if out.transcript.is_empty() && !stderr.trim().is_empty() {
        out.errors
            .push(format!("acp: {}", cli::head(stderr.trim())));
    }
    out
}

/// The text of a tool call's `content` (its `content` blocks' text), if any.
fn content_text(v: &Value) -> Option<String> {
    let parts: Vec<&str> = v
        .get("content")?
        .as_array()?
        .iter()
        .filter_map(|c| c.pointer("/content/text").and_then(Value::as_str))
        .collect();
    (!parts.is_empty()).then(|| cli::head(&parts.join("\n")))
}

/// What a tool call's status says of its success.
fn status_ok(v: &Value) -> Option<bool> {
    match cli::str_of(v, "status") {
        Some("completed") => Some(true),
        Some("failed") => Some(false),
        _ => None,
    }
}

fn on_tool_call(out: &mut AgentOutput, v: &Value) {
    let id = cli::str_of(v, "toolCallId").map(String::from);
    if id.is_some() && out.denied.iter().any(|d| d.id == id) {
        return;
    }
    out.tool_calls.push(ToolCall {
        id,
        tool: cli::str_of(v, "title")
            .or_else(|| cli::str_of(v, "kind"))
            .unwrap_or("tool")
            .to_string(),
        command: shell_command(v),
        input: v.get("rawInput").cloned().unwrap_or(Value::Null),
        ok: status_ok(v),
        exit_code: None,
        output: content_text(v),
    });
}

fn on_tool_call_update(out: &mut AgentOutput, v: &Value) {
    let id = cli::str_of(v, "toolCallId");
    let Some(call) = out
        .tool_calls
        .iter_mut()
        .find(|c| id.is_some() && c.id.as_deref() == id)
    else {
        return;
    };
    if let Some(ok) = status_ok(v) {
        call.ok = Some(ok);
    }
    if let Some(raw) = v.get("rawInput").filter(|r| !r.is_null()) {
        call.input = raw.clone();
        call.command = shell_command(v).or(call.command.take());
    }
    if let Some(text) = content_text(v) {
        call.output = Some(text);
    }
    if let Some(code) = v
        .pointer("/rawOutput/exit_code")
        .or_else(|| v.pointer("/rawOutput/exitCode"))
        .and_then(Value::as_i64)
    {
        call.exit_code = i32::try_from(code).ok();
    }
}

/// A refused permission request: a denied call, and no longer a tool call.
fn on_denied(out: &mut AgentOutput, v: &Value) {
    let tc = v.get("tool_call").cloned().unwrap_or(Value::Null);
    let id = cli::str_of(&tc, "toolCallId").map(String::from);
    let known = id
        .as_ref()
        .and_then(|id| out.tool_calls.iter().find(|c| c.id.as_ref() == Some(id)))
        .cloned();
    out.tool_calls
        .retain(|c| id.is_none() || c.id.as_ref() != id.as_ref());
    let input = tc
        .get("rawInput")
        .cloned()
        .filter(|r| !r.is_null())
        .or_else(|| known.as_ref().map(|k| k.input.clone()))
        .unwrap_or(Value::Null);
    out.denied.push(DeniedCall {
        id,
        tool: cli::str_of(&tc, "title")
            .map(String::from)
            .or_else(|| known.as_ref().map(|k| k.tool.clone()))
            .unwrap_or_else(|| "tool".into()),
        command: cli::str_of(v, "command")
            .map(String::from)
            .or_else(|| known.and_then(|k| k.command)),
        input,
        reason: cli::str_of(v, "reason").unwrap_or_default().to_string(),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_denials_and_the_answer_are_read() {
        let stdout = r#"{"type":"acp.agent","agent":{"name":"t"},"load_session":true}
{"type":"acp.session","session_id":"s1","loaded":false}
{"type":"plan","entries":[{"content":"do it","priority":"high","status":"pending"}]}
{"type":"tool_call","toolCallId":"a","title":"Run","kind":"execute","status":"pending","rawInput":{"command":"echo hi > hello.txt"}}
{"type":"permission","tool_call":{"toolCallId":"a"},"granted":true,"option_id":"yes","command":"echo hi > hello.txt","reason":"ok"}
{"type":"tool_call_update","toolCallId":"a","status":"completed","content":[{"type":"content","content":{"type":"text","text":"ok"}}],"rawOutput":{"exit_code":0}}
{"type":"tool_call","toolCallId":"b","title":"Run","kind":"execute","status":"pending","rawInput":{"command":"python3 x.py"}}
{"type":"permission","tool_call":{"toolCallId":"b","rawInput":{"command":"python3 x.py"}},"granted":false,"option_id":"no","command":"python3 x.py","reason":"`python3 x.py` is not a plain call of an allow-listed command"}
{"type":"tool_call_update","toolCallId":"b","status":"failed"}
{"type":"agent_message","text":"done"}
{"type":"stop","stop_reason":"end_turn"}
{"type":"answer","text":"done","session_id":"s1"}
"#;
        let out = parse(stdout, "");
        assert_eq!(out.answer, "done");
        assert_eq!(out.session_id.as_deref(), Some("s1"));
        assert_eq!(out.tool_calls.len(), 1);
        let c = &out.tool_calls[0];
        assert_eq!(c.command.as_deref(), Some("echo hi > hello.txt"));
        assert_eq!((c.ok, c.exit_code), (Some(true), Some(0)));
        assert_eq!(c.output.as_deref(), Some("ok"));
        assert_eq!(out.denied.len(), 1);
        assert_eq!(out.denied[0].command.as_deref(), Some("python3 x.py"));
        assert!(out.denied[0].reason.contains("not a plain call"));
        assert!(out.errors.is_empty());
    }

    #[test]
    fn an_agent_that_cannot_load_a_session_reports_none_to_go_on_with() {
        let stdout = "{\"type\":\"acp.agent\",\"load_session\":false}\n{\"type\":\"answer\",\"text\":\"Which?\",\"session_id\":\"s1\"}\n";
        let out = parse(stdout, "");
        assert_eq!(out.answer, "Which?");
        assert_eq!(out.session_id, None);
        assert_eq!(out.transcript.len(), 2, "the transcript keeps it");
    }

    #[test]
    fn an_error_line_or_a_silent_client_is_an_error() {
        let out = parse("{\"type\":\"error\",\"message\":\"cannot start\"}\n", "");
        assert_eq!(out.errors, ["acp: cannot start"]);
        let out = parse("", "boom");
        assert_eq!(out.errors, ["acp: boom"]);
    }
}
