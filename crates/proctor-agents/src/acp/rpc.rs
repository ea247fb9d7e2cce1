//! JSON-RPC 2.0 over an ACP agent's stdio: one message a line (ACP's stdio transport).
//!
//! proctor is the client: it sends requests and waits for their responses, and meanwhile takes
//! the agent's notifications (`session/update`) and requests (`session/request_permission`) as
//! they come, handing each to the caller.

use std::io::{BufRead, Write};

use serde_json::{json, Value};

/// Why a conversation with the agent failed.
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    /// Writing to or reading from the agent failed.
    #[error("talking to the ACP agent failed: {0}")]
    Io(#[from] std::io::Error),
    /// The agent closed its output before answering.
    #[error("the ACP agent closed its output before answering `{0}`")]
    Closed(String),
    /// The agent answered a request with an error.
    #[error("the ACP agent answered `{method}` with error {code}: {message}")]
    Failed {
        /// The method asked.
        method: String,
        /// The JSON-RPC error code.
        code: i64,
        /// The agent's message.
        message: String,
    },
}

/// The JSON-RPC code an agent answers with when it needs authentication first.
pub const AUTH_REQUIRED: i64 = -32000;
/// The JSON-RPC code for a method the receiver does not have.
pub const METHOD_NOT_FOUND: i64 = -32601;

/// A message from the agent that is not the response awaited.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request the client must answer.
    Request {
        /// Its id, echoed in the answer.
        id: Value,
        /// The method.
        method: String,
        /// Its parameters.
        params: Value,
    },
    /// A notification.
    Notification {
        /// The method.
        method: String,
        /// Its parameters.
        params: Value,
    },
}

/// One JSON-RPC connection: what is written to the agent and what is read from it.
pub struct Connection<R: BufRead, W: Write> {
    reader: R,
    writer: W,
    next_id: u64,
}

impl<R: BufRead, W: Write> Connection<R, W> {
    /// A connection reading the agent's output from `reader` and writing to its input.
    pub fn new(reader: R, writer: W) -> Connection<R, W> {
        Connection {
            reader,
            writer,
            next_id: 1,
        }
    }

    fn send(&mut self, message: &Value) -> Result<(), RpcError> {
        let mut line = message.to_string();
        line.push('\n');
        self.writer.write_all(line.as_bytes())?;
        self.writer.flush()?;
        Ok(())
    }

    /// Answers the agent's request `id` with `result`.
    pub fn respond(&mut self, id: &Value, result: Value) -> Result<(), RpcError> {
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "result": result }))
    }

    /// Answers the agent's request `id` with an error.
    pub fn respond_error(&mut self, id: &Value, code: i64, message: &str) -> Result<(), RpcError> {
        self.send(
            &json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } }),
        )
    }

    /// Sends a request and waits for its response, handing every other message to `on_other`
    /// (which may answer a request through the connection it is given).
    pub fn call(
        &mut self,
        method: &str,
        params: Value,
        on_other: &mut dyn FnMut(&mut Self, Incoming) -> Result<(), RpcError>,
    ) -> Result<Value, RpcError> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))?;
        loop {
            let Some(message) = self.read_message()? else {
                return Err(RpcError::Closed(method.to_string()));
            };
            if let Some(m) = message.get("method").and_then(Value::as_str) {
                let params = message.get("params").cloned().unwrap_or(Value::Null);
                let incoming = match message.get("id") {
                    Some(rid) => Incoming::Request {
                        id: rid.clone(),
                        method: m.to_string(),
                        params,
                    },
                    None => Incoming::Notification {
                        method: m.to_string(),
                        params,
                    },
                };
                on_other(self, incoming)?;
                continue;
            }
            if message.get("id").and_then(Value::as_u64) != Some(id) {
                continue;
            }
            if let Some(e) = message.get("error") {
                return Err(RpcError::Failed {
                    method: method.to_string(),
                    code: e.get("code").and_then(Value::as_i64).unwrap_or(0),
                    message: e
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                });
            }
            return Ok(message.get("result").cloned().unwrap_or(Value::Null));
        }
    }

    /// The next JSON message from the agent (lines that are not JSON objects are skipped);
    /// `None` at the end of its output.
    fn read_message(&mut self) -> Result<Option<Value>, RpcError> {
        let mut line = String::new();
        loop {
            line.clear();
            if self.reader.read_line(&mut line)? == 0 {
                return Ok(None);
            }
            if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(line.trim()) {
                return Ok(Some(v));
            }
        }
    }

    /// The writer, to close it (dropping it closes the agent's input).
    pub fn into_writer(self) -> W {
        self.writer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_hands_over_other_messages_and_returns_its_result() {
        let agent = concat!(
            "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"n\":1}}\n",
            "not json\n",
            "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"session/request_permission\",\"params\":{}}\n",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"ok\":true}}\n",
        );
        let mut written = Vec::new();
        let mut seen = Vec::new();
        let mut c = Connection::new(agent.as_bytes(), &mut written);
        let r = c
            .call("initialize", json!({}), &mut |conn, m| {
                if let Incoming::Request { id, .. } = &m {
                    conn.respond(id, json!({"answered": true}))?;
                }
                seen.push(m);
                Ok(())
            })
            .unwrap();
        assert_eq!(r, json!({"ok": true}));
        assert_eq!(seen.len(), 2);
        let text = String::from_utf8(written).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["method"], "initialize");
        assert_eq!(lines[1]["id"], 7);
        assert_eq!(lines[1]["result"]["answered"], true);
    }

    #[test]
    fn an_error_or_a_closed_output_is_an_error() {
        let agent = "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32000,\"message\":\"Authentication required\"}}\n";
        let mut c = Connection::new(agent.as_bytes(), Vec::new());
        let e = c
            .call("session/new", json!({}), &mut |_, _| Ok(()))
            .unwrap_err();
        assert!(
            matches!(
                e,
                RpcError::Failed {
                    code: AUTH_REQUIRED,
                    ..
                }
            ),
            "{e}"
        );
        let mut c = Connection::new(&b""[..], Vec::new());
        let e = c
            .call("session/new", json!({}), &mut |_, _| Ok(()))
            .unwrap_err();
        assert!(e.to_string().contains("closed its output"), "{e}");
    }
}
