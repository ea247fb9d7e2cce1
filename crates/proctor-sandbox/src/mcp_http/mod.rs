//! The bridge from the MCP relay's stdio to a server of MCP's streamable HTTP transport
//! (`proctor __mcp-http URL`): each JSON-RPC message read on stdin (one per line, as the relay
//! passes them, already parsed and logged) is `POST`ed to the server's URL; each message of the
//! answer (a JSON body, or every event of a `text/event-stream` body, as it comes) is written
//! to stdout as one line. The server's `Mcp-Session-Id` and the protocol version it agreed to
//! are carried on every later request; when stdin ends the session is closed with `DELETE`.
//!
//! With `--sse` it speaks MCP's older HTTP+SSE transport instead ([`legacy_sse`]).
//!
//! The bridge runs as the relay's server program ([`crate::mcp`]), in the network of the
//! service that serves the URL, which no process of the agent's can reach: every message the
//! agent exchanges with the server passes the relay, and is logged, on its way.

use std::io::{BufRead, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::header::{ACCEPT, CONTENT_TYPE, HOST};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};

mod events;
mod legacy_sse;

use events::SseLines;

/// The JSON-RPC error code the bridge answers a request with when the server gave no answer
/// (an HTTP error, a broken connection).
pub const BRIDGE_ERROR: i64 = -32603;

/// The session as the server set it up.
#[derive(Debug, Default)]
struct Session {
    id: Option<String>,
    protocol: Option<String>,
}

/// The bridge's shared parts: where the server is, its session, and stdout.
struct Bridge {
    url: crate::http::Url,
    addr: SocketAddr,
    session: Mutex<Session>,
    out: Mutex<std::io::Stdout>,
}

/// `proctor __mcp-http [--sse] URL`: bridges stdin and stdout to the server at `URL` (of the
/// streamable HTTP transport, or with `--sse` of the older HTTP+SSE one) until stdin ends.
/// Returns the exit status (2 for bad arguments, 1 when it cannot start).
pub fn bridge_main(args: &[String]) -> i32 {
    let (legacy, url) = match args {
        [flag, url] if flag == "--sse" => (true, url),
        [url] => (false, url),
        _ => {
            eprintln!("usage: proctor __mcp-http [--sse] http://127.0.0.1:PORT/PATH");
            return 2;
        }
    };
    let parsed = match crate::http::Url::parse(url) {
        Ok(u) => u,
        Err(why) => {
            eprintln!("proctor __mcp-http: {why}");
            return 2;
        }
    };
    let addr = match (parsed.host.as_str(), parsed.port).to_socket_addrs() {
        Ok(mut a) => match a.next() {
            Some(a) => a,
            None => {
                eprintln!("proctor __mcp-http: no address for {}", parsed.host);
                return 1;
            }
        },
        Err(e) => {
            eprintln!("proctor __mcp-http: cannot resolve {}: {e}", parsed.host);
            return 1;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("proctor __mcp-http: cannot start its runtime: {e}");
            return 1;
        }
    };
    let bridge = Arc::new(Bridge {
        url: parsed,
        addr,
        session: Mutex::new(Session::default()),
        out: Mutex::new(std::io::stdout()),
    });
    let local = tokio::task::LocalSet::new();
    match legacy {
        true => local.block_on(&runtime, legacy_sse::run(bridge)),
        false => local.block_on(&runtime, run(bridge)),
    }
    0
}

/// The messages of stdin, one per line, read on a thread of its own.
fn stdin_lines() -> tokio::sync::mpsc::UnboundedReceiver<Value> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Value>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if tx.send(message).is_err() {
                break;
            }
        }
    });
    rx
}

/// Sends each message of stdin on its way as it comes; when stdin ends, waits for the answers
/// still coming, then closes the session.
async fn run(bridge: Arc<Bridge>) {
    let mut rx = stdin_lines();
    let mut in_flight = tokio::task::JoinSet::new();
    while let Some(message) = rx.recv().await {
        if message["method"] == "initialize" {
            // The session starts with its answer: nothing else goes before it.
            send(&bridge, message).await;
        } else {
            let bridge = Arc::clone(&bridge);
            in_flight.spawn_local(async move { send(&bridge, message).await });
        }
    }
    while in_flight.join_next().await.is_some() {}
    close(&bridge).await;
}

/// POSTs one message and writes every message of the answer to stdout; a request that gets no
/// answer is answered by the bridge with a JSON-RPC error.
async fn send(bridge: &Bridge, message: Value) {
    let body = message.to_string();
    let is_init = message["method"] == "initialize";
    match post(bridge, body, is_init).await {
        Ok(0) => refuse(
            bridge,
            &message,
            "the server answered the request with no message",
        ),
        Ok(_) => {}
        Err(why) => refuse(bridge, &message, &why),
    }
}

/// The request, its answer's messages written out as they come; how many were written.
async fn post(bridge: &Bridge, body: String, is_init: bool) -> Result<usize, String> {
    let mut sender = connect(bridge).await?;
    let mut request = hyper::Request::post(bridge.url.path.as_str())
        .header(HOST, bridge.host())
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "application/json, text/event-stream");
    request = with_session(bridge, request);
    let request = request
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    if is_init {
        keep_session(bridge, response.headers());
    }
    let sse = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("text/event-stream"));
    let mut body = response.into_body();
    if !status.is_success() {
        let bytes = body
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes[..bytes.len().min(300)]).to_string();
        return Err(format!("the MCP server answered HTTP {status}: {text}"));
    }
    let mut events = SseLines::default();
    let mut whole = Vec::new();
    let mut written = 0;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("reading the MCP server's answer: {e}"))?;
        let Some(data) = frame.data_ref() else {
            continue;
        };
        if sse {
            for (_, message) in events.feed(data) {
                written += usize::from(write_message(bridge, &message, is_init));
            }
        } else {
            whole.extend_from_slice(data);
        }
    }
    if !sse && !whole.is_empty() {
        let text = String::from_utf8_lossy(&whole);
        written += usize::from(write_message(bridge, text.trim(), is_init));
    }
    Ok(written)
}

/// The request with the session's id and protocol version, once the server gave them.
fn with_session(
    bridge: &Bridge,
    mut request: hyper::http::request::Builder,
) -> hyper::http::request::Builder {
    let session = bridge
        .session
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(id) = &session.id {
        request = request.header("mcp-session-id", id.as_str());
    }
    if let Some(version) = &session.protocol {
        request = request.header("mcp-protocol-version", version.as_str());
    }
    request
}

/// Keeps the session id the server gave with its answer to `initialize`.
fn keep_session(bridge: &Bridge, headers: &hyper::HeaderMap) {
    if let Some(id) = headers.get("mcp-session-id").and_then(|v| v.to_str().ok()) {
        let mut session = bridge
            .session
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        session.id = Some(id.to_string());
    }
}

/// Writes one message of the server's (one JSON value) as a line; from the answer to
/// `initialize`, keeps the protocol version agreed. `false` for what is not JSON.
fn write_message(bridge: &Bridge, text: &str, is_init: bool) -> bool {
    let Ok(value) = serde_json::from_str::<Value>(text) else {
        return false;
    };
    if is_init {
        if let Some(v) = value["result"]["protocolVersion"].as_str() {
            let mut session = bridge
                .session
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            session.protocol = Some(v.to_string());
        }
    }
    write_line(bridge, &value);
    true
}

/// One line of JSON to stdout, whole.
fn write_line(bridge: &Bridge, value: &Value) {
    let mut out = bridge
        .out
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let _ = writeln!(out, "{value}");
    let _ = out.flush();
}

/// The bridge's answer to request `id` that got none from the server.
fn error_reply(id: &Value, why: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": BRIDGE_ERROR, "message": why}})
}

/// Answers `message`, when it is a request, with the bridge's error saying `why` the server
/// gave no answer (a notification gets none).
fn refuse(bridge: &Bridge, message: &Value, why: &str) {
    if let (Some(id), Some(_)) = (message.get("id"), message.get("method")) {
        write_line(bridge, &error_reply(id, why));
    }
}

/// A fresh HTTP/1.1 connection to the server, its driver running on this thread's tasks.
async fn connect(bridge: &Bridge) -> Result<Sender, String> {
    let stream = tokio::net::TcpStream::connect(bridge.addr)
        .await
        .map_err(|e| format!("cannot connect to the MCP server at {}: {e}", bridge.addr))?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::task::spawn_local(connection);
    Ok(sender)
}

/// The sending half of a connection to the server.
type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

impl Bridge {
    /// The `Host` header of every request.
    fn host(&self) -> String {
        format!("{}:{}", self.url.host, self.url.port)
    }
}

/// Ends the session with the server (`DELETE`), when it has one; a server that refuses is
/// left to end it itself.
async fn close(bridge: &Bridge) {
    let Some(id) = bridge
        .session
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .id
        .clone()
    else {
        return;
    };
    let Ok(mut sender) = connect(bridge).await else {
        return;
    };
    if let Ok(request) = hyper::Request::delete(bridge.url.path.as_str())
        .header(HOST, bridge.host())
        .header("mcp-session-id", id)
        .body(Full::new(Bytes::new()))
    {
        let _ = tokio::time::timeout(
            std::time::Duration::from_secs(2),
            sender.send_request(request),
        )
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_with_no_answer_gets_the_bridge_s_error_with_its_id() {
        let e = error_reply(&json!(7), "HTTP 500");
        assert_eq!(e["id"], 7);
        assert_eq!(e["error"]["code"], BRIDGE_ERROR);
        assert_eq!(e["error"]["message"], "HTTP 500");
    }
}
