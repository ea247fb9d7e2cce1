//! A minimal MCP client over stdio, for the scripted agent's `mcp` steps: it starts the
//! server's shim (`proctor-mcp-NAME`, on the trial's `PATH`), initializes the session, makes one
//! `tools/call` and ends the session, as any MCP client would.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use proctor_suite::mcp::SHIM_PREFIX;
use proctor_suite::script::McpStep;
use serde_json::{json, Value};

/// The MCP protocol version the client asks for.
pub const PROTOCOL_VERSION: &str = "2025-06-18";

/// What one tool call gave: an exit status (0 when the call succeeded; 1 for an `isError`
/// result or a JSON-RPC error; 125 when no session could be had), the answer's text as
/// stdout, and what went wrong as stderr.
pub struct ToolCallOutput {
    /// 0, 1 or 125, as above.
    pub exit: i32,
    /// The answer: the result's text content, or the whole result as JSON.
    pub stdout: String,
    /// The JSON-RPC error, or why there was no session.
    pub stderr: String,
}

/// Makes the step's tool call in a session of its own.
pub fn call_tool(step: &McpStep) -> ToolCallOutput {
    match session(step) {
        Ok(answer) => read_answer(&answer),
        Err(why) => ToolCallOutput {
            exit: 125,
            stdout: String::new(),
            stderr: why,
        },
    }
}

/// Runs a session: `initialize`, `notifications/initialized`, the `tools/call`; gives the
/// call's answer (the whole JSON-RPC message).
fn session(step: &McpStep) -> Result<Value, String> {
    let shim = format!("{SHIM_PREFIX}{}", step.server);
    let mut child = Command::new(&shim)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot start `{shim}`: {e}"))?;
    let (Some(mut to), Some(from)) = (child.stdin.take(), child.stdout.take()) else {
        return Err("no pipes to the server".into());
    };
    let mut from = BufReader::new(from);
    let mut send = |msg: Value| writeln!(to, "{msg}").and_then(|_| to.flush());
    let result = (|| {
        send(json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": { "name": "proctor-script-agent", "version": env!("CARGO_PKG_VERSION") },
            },
        }))
        .map_err(|e| format!("cannot write to the server: {e}"))?;
        answer_to(&mut from, 1)?;
        send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
            .map_err(|e| format!("cannot write to the server: {e}"))?;
        send(json!({
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": { "name": step.tool, "arguments": step.arguments },
        }))
        .map_err(|e| format!("cannot write to the server: {e}"))?;
        answer_to(&mut from, 2)
    })();
    drop(to);
    let _ = child.wait();
    result
}

/// Reads messages until the answer to request `id`.
fn answer_to(from: &mut impl BufRead, id: u64) -> Result<Value, String> {
    let mut line = String::new();
    loop {
        line.clear();
        let n = from
            .read_line(&mut line)
            .map_err(|e| format!("cannot read the server: {e}"))?;
        if n == 0 {
            return Err(format!(
                "the session ended before the answer to request {id}"
            ));
        }
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if msg.get("id") == Some(&json!(id)) && msg.get("method").is_none() {
            return Ok(msg);
        }
    }
}

/// A `tools/call` answer as a step's output.
fn read_answer(answer: &Value) -> ToolCallOutput {
    if let Some(err) = answer.get("error") {
        return ToolCallOutput {
            exit: 1,
            stdout: String::new(),
            stderr: err.to_string(),
        };
    }
    let result = answer.get("result").cloned().unwrap_or(Value::Null);
    let texts: Vec<&str> = result
        .get("content")
        .and_then(Value::as_array)
        .map(|c| {
            c.iter()
                .filter_map(|part| part.get("text").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    let stdout = match texts.is_empty() {
        true => result.to_string(),
        false => texts.join("\n"),
    };
    let failed = result.get("isError").and_then(Value::as_bool) == Some(true);
    ToolCallOutput {
        exit: i32::from(failed),
        stdout,
        stderr: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_reads_as_its_text_and_a_failure_as_status_1() {
        let ok = read_answer(
            &json!({"id": 2, "result": {"content": [{"type": "text", "text": "added #1"}]}}),
        );
        assert_eq!((ok.exit, ok.stdout.as_str()), (0, "added #1"));
        let bad = read_answer(
            &json!({"id": 2, "result": {"content": [{"type": "text", "text": "no title"}], "isError": true}}),
        );
        assert_eq!(bad.exit, 1);
        let err =
            read_answer(&json!({"id": 2, "error": {"code": -32602, "message": "Unknown tool"}}));
        assert_eq!(err.exit, 1);
        assert!(err.stderr.contains("Unknown tool"));
    }
}
