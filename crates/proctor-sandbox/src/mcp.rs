//! The MCP relay: an MCP server's stdio session, relayed and logged by the trial's call runner.
//!
//! The agent's MCP client runs proctor's MCP shim (`proctor __mcp NAME`), which hands its stdin
//! and stdout to the trial init over the calls socket like any call ([`crate::calls`]). The
//! call's process C, outside the agent's reach, starts the real server (the spec's argv, in
//! the trial init's view of the files, where the server's own folder is and the agent's
//! eyes are not) and copies newline-delimited JSON-RPC between the two, reading each message:
//! every request the client makes and the answer the server gives are reported, as one record,
//! to the calls log on the connection that recorded the session's start (a socket no agent
//! process can reach), with the request's latency. A `tools/call` of a tool outside the
//! server's `allow_tools` is answered by C itself with a JSON-RPC error; it never reaches the
//! server and is recorded as denied. Each message of the agent's is passed on as proctor parsed
//! it (written again from the parse), so the server cannot read a line otherwise than the
//! record does; a line that is not a JSON-RPC object (not JSON, a batch, past the bound) is
//! answered with a JSON-RPC error and goes no further.

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The name a shim sends for MCP server `NAME`: `mcp:NAME` (no command has a `:` in its name).
pub fn call_name(server: &str) -> String {
    format!("mcp:{server}")
}

/// The JSON-RPC error code proctor answers a denied tool call with (the code MCP gives an
/// unknown tool: to the agent the tool is not there).
pub const DENIED_CODE: i64 = -32602;

/// Bytes of a request's arguments, or of an answer's content, kept in a record; past it, a
/// string of the head (`cut`).
pub const VALUE_BYTES: usize = 16 * 1024;

/// The longest message read as JSON-RPC; a longer line passes through unread.
pub const LINE_MAX: usize = 8 << 20;

/// What the call runner needs to run one MCP server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpProgram {
    /// The server's argv; the program is an absolute path in the trial init's view.
    pub argv: Vec<String>,
    /// The server's whole environment.
    pub env: Vec<(String, String)>,
    /// Its working folder, in the trial init's view.
    pub cwd: PathBuf,
    /// The tools the agent may call; `None`: every tool.
    #[serde(default)]
    pub allow_tools: Option<Vec<String>>,
    /// The service whose own network each session joins before the server starts (a
    /// streamable-HTTP server's, reached by proctor's bridge: [`crate::mcp_http`]); `None`:
    /// the trial's network.
    #[serde(default)]
    pub network: Option<String>,
}

/// One request and its answer, as reported to the calls log (its `McpLine`); the log adds the
/// number, the session and the times.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Exchange {
    /// The server's name.
    pub server: String,
    /// The JSON-RPC method.
    pub method: String,
    /// The tool of a `tools/call`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The call's arguments, or another request's params.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// The result's content, or another request's whole result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Value>,
    /// The result's `isError`.
    #[serde(default)]
    pub is_error: bool,
    /// The JSON-RPC error: `{"code": N, "message": "..."}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
    /// Why proctor refused it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denied: Option<String>,
    /// The tool was not in the session's last `tools/list` answer.
    #[serde(default)]
    pub unknown_tool: bool,
    /// `arguments` or `content` keep only a head.
    #[serde(default)]
    pub cut: bool,
    /// The request got an answer.
    pub answered: bool,
    /// Milliseconds from request to answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<f64>,
}

/// A line of the calls log's protocol carrying one [`Exchange`].
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpLine {
    /// The exchange.
    pub mcp: Exchange,
}

/// A request on its way: what was asked and when.
struct Pending {
    exchange: Exchange,
    at: Instant,
}

/// The session's shared state: requests waiting for answers, the tools the server listed,
/// and the two writers (the agent's stdout, the calls log).
struct Session {
    server: String,
    allow_tools: Option<Vec<String>>,
    pending: Mutex<HashMap<String, Pending>>,
    listed: Mutex<Option<BTreeSet<String>>>,
    to_agent: Mutex<std::fs::File>,
    log: Mutex<UnixStream>,
}

impl Session {
    fn report(&self, exchange: Exchange) {
        let Ok(text) = serde_json::to_string(&McpLine { mcp: exchange }) else {
            return;
        };
        if let Ok(mut log) = self.log.lock() {
            let _ = writeln!(log, "{text}");
        }
    }

    fn to_agent(&self, line: &[u8]) -> bool {
        match self.to_agent.lock() {
            Ok(mut out) => out.write_all(line).and_then(|_| out.flush()).is_ok(),
            Err(_) => false,
        }
    }
}

/// `value` as kept in a record: whole within [`VALUE_BYTES`] as JSON, else a string of its
/// head; and whether it was cut.
fn bounded(value: Value) -> (Value, bool) {
    let text = value.to_string();
    if text.len() <= VALUE_BYTES {
        return (value, false);
    }
    let mut end = VALUE_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (Value::String(text[..end].to_string()), true)
}

/// The request's id as a key (its JSON text: `1` and `"1"` are different ids).
fn id_key(id: &Value) -> String {
    id.to_string()
}

/// Relays the session between the agent (`from_agent`, `to_agent`) and the server (`to_server`,
/// `from_server`) until the server's output ends; requests left unanswered are then reported
/// as such. Gives the bytes that came from the agent and from the server.
pub(crate) fn relay(
    spec: &McpProgram,
    server: &str,
    from_agent: std::fs::File,
    to_agent: std::fs::File,
    to_server: OwnedFd,
    from_server: OwnedFd,
    log: UnixStream,
) -> (u64, u64) {
    let session = Arc::new(Session {
        server: server.to_string(),
        allow_tools: spec.allow_tools.clone(),
        pending: Mutex::new(HashMap::new()),
        listed: Mutex::new(None),
        to_agent: Mutex::new(to_agent),
        log: Mutex::new(log),
    });
    let (in_done, in_bytes) = std::sync::mpsc::channel::<u64>();
    {
        let session = session.clone();
        // Never joined for long: an agent may keep its end open after the server is gone.
        let _ = std::thread::Builder::new()
            .name("mcp-in".into())
            .spawn(move || {
                let n = agent_to_server(&session, from_agent, std::fs::File::from(to_server));
                let _ = in_done.send(n);
            });
    }
    let out = server_to_agent(&session, std::fs::File::from(from_server));
    let inn = in_bytes
        .recv_timeout(std::time::Duration::from_millis(100))
        .unwrap_or(0);
    let left: Vec<Pending> = session
        .pending
        .lock()
        .map(|mut p| p.drain().map(|(_, v)| v).collect())
        .unwrap_or_default();
    for p in left {
        session.report(p.exchange);
    }
    (inn, out)
}

/// Reads one line of at most [`LINE_MAX`] bytes into `buf` (the rest of a longer line is
/// read on; `buf` then holds its head and the result is `Some(false)`); `None` at the end.
fn read_line(r: &mut impl BufRead, buf: &mut Vec<u8>) -> Option<bool> {
    buf.clear();
    let n = r
        .by_ref()
        .take(LINE_MAX as u64)
        .read_until(b'\n', buf)
        .ok()?;
    if n == 0 {
        return None;
    }
    Some(buf.ends_with(b"\n") || n < LINE_MAX)
}

/// The agent's messages to the server: requests noted (or, for a denied tool, answered here),
/// everything else passed on. Gives the bytes read.
fn agent_to_server(session: &Session, from: std::fs::File, mut to: std::fs::File) -> u64 {
    let mut reader = BufReader::new(from);
    let mut line = Vec::new();
    let mut total = 0u64;
    while let Some(whole) = read_line(&mut reader, &mut line) {
        total += line.len() as u64;
        if !whole {
            // Past the bound: the rest of the line is read and dropped, never passed on.
            let mut rest = Vec::new();
            while read_line(&mut reader, &mut rest) == Some(false) {
                total += rest.len() as u64;
            }
            total += rest.len() as u64;
            session.to_agent(
                refusal(&Value::Null, -32700, "a message past proctor's bound").as_bytes(),
            );
            continue;
        }
        let message = match checked(&line) {
            Ok(Some(m)) => m,
            Ok(None) => continue,
            Err(answer) => {
                session.to_agent(answer.as_bytes());
                continue;
            }
        };
        if let Some(answer) = request(session, &message) {
            session.to_agent(answer.as_bytes());
            continue;
        }
        // What the server reads is what proctor read: the message as parsed, written again, so
        // that no reading of the raw line can differ from the record's.
        let text = format!("{message}\n");
        if to
            .write_all(text.as_bytes())
            .and_then(|_| to.flush())
            .is_err()
        {
            break;
        }
    }
    total
}

/// A line of the agent's as a message to pass on: `Ok(None)` for a blank line; `Err` with the
/// answer for one that is not a JSON-RPC object (not JSON, or a batch, which MCP no longer has
/// and proctor does not relay), which goes no further.
fn checked(line: &[u8]) -> Result<Option<Value>, String> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    match serde_json::from_slice::<Value>(line) {
        Ok(m @ Value::Object(_)) => Ok(Some(m)),
        Ok(Value::Array(_)) => Err(refusal(
            &Value::Null,
            -32600,
            "proctor does not relay batched JSON-RPC messages; send each message on its own line",
        )),
        Ok(_) => Err(refusal(&Value::Null, -32600, "not a JSON-RPC message")),
        Err(e) => Err(refusal(&Value::Null, -32700, &format!("parse error: {e}"))),
    }
}

/// A JSON-RPC error answer to request `id`, as a line.
fn refusal(id: &Value, code: i64, message: &str) -> String {
    let answer =
        json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } });
    format!("{answer}\n")
}

/// Notes a request of the agent's; for a `tools/call` of a tool outside `allow_tools`, reports
/// it denied and gives the error to answer the agent with (the request then goes no further).
fn request(session: &Session, msg: &Value) -> Option<String> {
    let method = msg.get("method")?.as_str()?;
    let id = msg.get("id").filter(|id| !id.is_null())?;
    let params = msg.get("params").cloned();
    let mut exchange = Exchange {
        server: session.server.clone(),
        method: method.to_string(),
        ..Exchange::default()
    };
    let arguments = if method == "tools/call" {
        let tool = params
            .as_ref()
            .and_then(|p| p.get("name"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        exchange.unknown_tool = session
            .listed
            .lock()
            .ok()
            .and_then(|l| l.as_ref().map(|l| !l.contains(&tool)))
            .unwrap_or(false);
        exchange.tool = Some(tool);
        params.and_then(|p| p.get("arguments").cloned())
    } else {
        params
    };
    if let Some(a) = arguments {
        let (a, cut) = bounded(a);
        exchange.arguments = Some(a);
        exchange.cut |= cut;
    }
    if let (Some(tool), Some(allowed)) = (&exchange.tool, &session.allow_tools) {
        if !allowed.contains(tool) {
            let why = format!(
                "proctor: the tool `{tool}` of MCP server `{}` is not allowed in this trial (allow_tools)",
                session.server
            );
            exchange.denied = Some(why.clone());
            exchange.answered = true;
            exchange.latency_ms = Some(0.0);
            exchange.unknown_tool = false;
            exchange.error = Some(json!({ "code": DENIED_CODE, "message": why }));
            session.report(exchange);
            return Some(refusal(id, DENIED_CODE, &why));
        }
    }
    if let Ok(mut pending) = session.pending.lock() {
        pending.insert(
            id_key(id),
            Pending {
                exchange,
                at: Instant::now(),
            },
        );
    }
    None
}

/// The server's messages to the agent: each answer to a noted request completes its record,
/// every message is passed on. Gives the bytes read.
fn server_to_agent(session: &Session, from: std::fs::File) -> u64 {
    let mut reader = BufReader::new(from);
    let mut line = Vec::new();
    let mut total = 0u64;
    while let Some(whole) = read_line(&mut reader, &mut line) {
        total += line.len() as u64;
        let parsed = whole
            .then(|| serde_json::from_slice::<Value>(&line).ok())
            .flatten();
        // The agent reads what was recorded: the message as parsed, written again.
        let passed = match parsed {
            Some(msg) => {
                let text = format!("{msg}\n").into_bytes();
                answer(session, msg);
                text
            }
            None => line.clone(),
        };
        if !session.to_agent(&passed) {
            // The agent is gone; the server's output is still read to its end, so that the
            // server is never blocked writing.
            continue;
        }
    }
    total
}

/// Completes the record of the request `msg` answers, if it answers one.
fn answer(session: &Session, msg: Value) {
    if msg.get("method").is_some() {
        return;
    }
    let Some(id) = msg.get("id") else { return };
    let Some(p) = session
        .pending
        .lock()
        .ok()
        .and_then(|mut pending| pending.remove(&id_key(id)))
    else {
        return;
    };
    let mut exchange = p.exchange;
    exchange.answered = true;
    exchange.latency_ms = Some(p.at.elapsed().as_secs_f64() * 1000.0);
    if let Some(err) = msg.get("error") {
        exchange.error = Some(json!({
            "code": err.get("code").and_then(Value::as_i64).unwrap_or(0),
            "message": err.get("message").and_then(Value::as_str).unwrap_or_default(),
        }));
    }
    if let Some(result) = msg.get("result") {
        if exchange.method == "tools/list" {
            let names = result.get("tools").and_then(Value::as_array).map(|tools| {
                tools
                    .iter()
                    .filter_map(|t| t.get("name")?.as_str().map(str::to_string))
                    .collect::<BTreeSet<_>>()
            });
            if let (Some(names), Ok(mut listed)) = (names, session.listed.lock()) {
                *listed = Some(names);
            }
        }
        let content = if exchange.method == "tools/call" {
            exchange.is_error = result
                .get("isError")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            result.get("content").cloned()
        } else {
            Some(result.clone())
        };
        if let Some(c) = content {
            let (c, cut) = bounded(c);
            exchange.content = Some(c);
            exchange.cut |= cut;
        }
    }
    session.report(exchange);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_json_rpc_object_is_passed_on_and_a_batch_or_garbage_is_answered_here() {
        let ok = checked(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).unwrap();
        assert_eq!(ok.unwrap()["method"], "tools/list");
        assert_eq!(checked(b"  \n").unwrap(), None);
        let batch = checked(
            br#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"wipe"}}]"#,
        )
        .unwrap_err();
        assert!(
            batch.contains("batched") && batch.contains("-32600"),
            "{batch}"
        );
        let garbage = checked(b"{'id': 1, method: tools/call}").unwrap_err();
        assert!(garbage.contains("-32700"), "{garbage}");
        assert!(checked(b"42")
            .unwrap_err()
            .contains("not a JSON-RPC message"));
    }

    #[test]
    fn a_large_value_keeps_its_head_and_says_it_was_cut() {
        let (small, cut) = bounded(json!({"title": "Milk"}));
        assert_eq!((small, cut), (json!({"title": "Milk"}), false));
        let (big, cut) = bounded(json!({ "text": "é".repeat(VALUE_BYTES) }));
        assert!(cut);
        assert!(big.as_str().unwrap().len() <= VALUE_BYTES);
        assert!(big.as_str().unwrap().starts_with("{\"text\":\"é"));
    }
}
