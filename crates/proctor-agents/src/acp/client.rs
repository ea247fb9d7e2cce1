//! `proctor __acp-client FILE`: the ACP client, run inside the trial's sandbox as the agent's
//! main process.
//!
//! It starts the agent's command (stdin and stdout piped for the protocol, stderr the trial's),
//! `initialize`s it (no file-system or terminal capability: the agent uses its own tools, which
//! run inside the same sandbox), opens a session (`session/new` with the workspace as `cwd`,
//! or, for a conversation's next turn, `session/load` of the session the last turn reported,
//! when the agent advertises `loadSession`), sets the mode named by `PROCTOR_ACP_MODE` if the
//! variant's `env` gives one (`session/set_mode`), and sends the prompt (`session/prompt`).
//! Until the prompt's answer it prints every `session/update` as a transcript line on stdout
//! (message chunks joined into one `agent_message` or `agent_thought` line, a new one at each
//! new `messageId`), and answers every
//! `session/request_permission` from the allow-list ([`super::permission`]), printing a
//! `permission` line. It ends with a `stop` line (the stop reason) and an `answer` line: the
//! text of the agent's last message (after its last tool call and, where the agent numbers its
//! messages, of the last `messageId`), and the session id. Updates the agent replays while a
//! session loads belong to earlier turns: they are counted in the `acp.session` line, not
//! printed.

use std::io::{BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::permission;
use super::rpc::{Connection, Incoming, RpcError, AUTH_REQUIRED, METHOD_NOT_FOUND};
use super::AcpPlan;

/// The variable naming the session mode to set after the session opens (`session/set_mode`).
pub const MODE_ENV: &str = "PROCTOR_ACP_MODE";
/// The ACP protocol version proctor speaks.
pub const PROTOCOL_VERSION: u64 = 1;
/// How long the agent may take to exit once its input is closed.
const EXIT_GRACE: Duration = Duration::from_secs(5);

/// Why the client stopped before the answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The plan file cannot be read.
    #[error("cannot read the ACP plan {path}: {message}")]
    Plan {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The agent's command cannot be started.
    #[error("cannot start the ACP agent `{program}`: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The protocol failed.
    #[error(transparent)]
    Rpc(#[from] RpcError),
    /// The agent needs authentication proctor cannot give.
    #[error("the ACP agent requires authentication first (its methods: {methods}); give it a key the way its own documentation says, in the variant's `env`")]
    AuthRequired {
        /// The methods it advertised.
        methods: String,
    },
    /// A next turn was asked of an agent that cannot load a session.
    #[error(
        "the ACP agent does not advertise `loadSession`, so it cannot go on with a conversation"
    )]
    NoLoadSession,
    /// The agent answered outside the protocol.
    #[error("the ACP agent's answer to `{method}` lacks {what}")]
    Protocol {
        /// The method.
        method: &'static str,
        /// What was missing.
        what: &'static str,
    },
}

/// The body of `proctor __acp-client FILE`: runs the plan, printing the transcript on stdout;
/// the exit status is 0 once the prompt was answered, 1 otherwise (an `error` line says why).
pub fn run_main(file: &str) -> i32 {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let result = read_plan(file).and_then(|plan| run(&plan, &mut out));
    match result {
        Ok(()) => 0,
        Err(e) => {
            write_event(
                &mut out,
                &json!({ "type": "error", "message": e.to_string() }),
            );
            1
        }
    }
}

fn read_plan(file: &str) -> Result<AcpPlan, ClientError> {
    let bad = |message: String| ClientError::Plan {
        path: file.to_string(),
        message,
    };
    let text = std::fs::read(file).map_err(|e| bad(e.to_string()))?;
    serde_json::from_slice(&text).map_err(|e| bad(e.to_string()))
}

/// Writes one transcript line. The transcript is the trial's captured stdout: if it cannot be
/// written there is nobody left to tell, so a failed write is dropped.
fn write_event(out: &mut dyn Write, event: &Value) {
    let _ = writeln!(out, "{event}");
    let _ = out.flush();
}

/// Kills the agent if the client stops before it exited.
struct AgentProcess(Child);

impl Drop for AgentProcess {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

impl AgentProcess {
    /// Waits up to [`EXIT_GRACE`] for the agent to exit after its input closed.
    fn finish(mut self) {
        let start = Instant::now();
        while matches!(self.0.try_wait(), Ok(None)) && start.elapsed() < EXIT_GRACE {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Runs one turn of the plan against the agent, writing the transcript to `out`.
pub fn run(plan: &AcpPlan, out: &mut dyn Write) -> Result<(), ClientError> {
    let program = plan.command.first().cloned().unwrap_or_default();
    let mut child = Command::new(&program)
        .args(plan.command.iter().skip(1))
        .current_dir(&plan.cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|source| ClientError::Spawn {
            program: program.clone(),
            source,
        })?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(ClientError::Spawn {
            program,
            source: std::io::Error::other("its stdio was not piped"),
        });
    };
    let agent = AgentProcess(child);
    let mut conn = Connection::new(BufReader::new(stdout), stdin);
    let mut rec = Recorder::new(out, &plan.allow);
    let session_id = converse(plan, &mut conn, &mut rec)?;
    rec.finish(&session_id);
    drop(conn.into_writer());
    agent.finish();
    Ok(())
}

type Conn = Connection<BufReader<std::process::ChildStdout>, std::process::ChildStdin>;

/// `initialize`, the session, the mode and the prompt; gives the session id.
fn converse(plan: &AcpPlan, conn: &mut Conn, rec: &mut Recorder) -> Result<String, ClientError> {
    let init = conn.call(
        "initialize",
        json!({
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": { "fs": { "readTextFile": false, "writeTextFile": false }, "terminal": false },
            "clientInfo": { "name": "proctor", "version": env!("CARGO_PKG_VERSION") },
        }),
        &mut |c, m| rec.handle(c, m),
    )?;
    let can_load = init
        .pointer("/agentCapabilities/loadSession")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    rec.event(&json!({
        "type": "acp.agent",
        "agent": init.get("agentInfo"),
        "protocol_version": init.get("protocolVersion"),
        "load_session": can_load,
        "auth_methods": init.get("authMethods"),
    }));
    let session_id = open_session(plan, conn, rec, &init, can_load)?;
    if let Some(mode) = std::env::var(MODE_ENV).ok().filter(|m| !m.is_empty()) {
        conn.call(
            "session/set_mode",
            json!({ "sessionId": session_id, "modeId": mode }),
            &mut |c, m| rec.handle(c, m),
        )?;
        rec.event(&json!({ "type": "acp.mode", "mode": mode }));
    }
    let result = conn.call(
        "session/prompt",
        json!({ "sessionId": session_id, "prompt": [{ "type": "text", "text": plan.prompt }] }),
        &mut |c, m| rec.handle(c, m),
    )?;
    rec.flush();
    // The usage some agents report with the answer is kept as they said it (ACP does not yet
    // say whether its input count includes cached tokens, so it is not read as a ledger).
    rec.event(&json!({
        "type": "stop",
        "stop_reason": result.get("stopReason"),
        "usage": result.get("usage"),
    }));
    Ok(session_id)
}

/// A new session, or the one a next turn goes on with; gives its id.
fn open_session(
    plan: &AcpPlan,
    conn: &mut Conn,
    rec: &mut Recorder,
    init: &Value,
    can_load: bool,
) -> Result<String, ClientError> {
    let auth = |e: RpcError| match e {
        RpcError::Failed {
            code: AUTH_REQUIRED,
            ..
        } => ClientError::AuthRequired {
            methods: init
                .get("authMethods")
                .map(Value::to_string)
                .unwrap_or_else(|| "none".into()),
        },
        e => ClientError::Rpc(e),
    };
    let cwd = plan.cwd.display().to_string();
    if let Some(id) = &plan.resume {
        if !can_load {
            return Err(ClientError::NoLoadSession);
        }
        rec.replaying = true;
        conn.call(
            "session/load",
            json!({ "sessionId": id, "cwd": cwd, "mcpServers": [] }),
            &mut |c, m| rec.handle(c, m),
        )
        .map_err(auth)?;
        rec.replaying = false;
        let replayed = rec.replayed;
        rec.event(&json!({ "type": "acp.session", "session_id": id, "loaded": true, "replayed": replayed }));
        return Ok(id.clone());
    }
    let result = conn
        .call(
            "session/new",
            json!({ "cwd": cwd, "mcpServers": [] }),
            &mut |c, m| rec.handle(c, m),
        )
        .map_err(auth)?;
    let id = result
        .get("sessionId")
        .and_then(Value::as_str)
        .ok_or(ClientError::Protocol {
            method: "session/new",
            what: "a `sessionId`",
        })?
        .to_string();
    rec.event(&json!({ "type": "acp.session", "session_id": id, "loaded": false, "modes": result.get("modes") }));
    Ok(id)
}

/// What the client prints while the agent works, and the answer it keeps.
struct Recorder<'a> {
    out: &'a mut dyn Write,
    allow: &'a [String],
    /// The agent message being streamed, not printed yet.
    message: String,
    /// The agent thought being streamed, not printed yet.
    thought: String,
    /// The text of the agent's last message (after its last tool call).
    answer: String,
    /// The `messageId` of the message being streamed, when the agent gives one (a chunk with
    /// another id starts another message).
    message_id: Option<String>,
    /// A tool call came after the answer's text: the next text starts a new answer.
    answer_done: bool,
    /// A session is loading: updates are replays of earlier turns.
    replaying: bool,
    /// Updates replayed while the session loaded.
    replayed: u64,
}

impl<'a> Recorder<'a> {
    fn new(out: &'a mut dyn Write, allow: &'a [String]) -> Recorder<'a> {
        Recorder {
            out,
            allow,
            message: String::new(),
            thought: String::new(),
            answer: String::new(),
            message_id: None,
            answer_done: false,
            replaying: false,
            replayed: 0,
        }
    }

    fn event(&mut self, event: &Value) {
        write_event(self.out, event);
    }

    /// Prints the streamed message and thought, if any.
    fn flush(&mut self) {
        for (kind, text) in [
            ("agent_thought", std::mem::take(&mut self.thought)),
            ("agent_message", std::mem::take(&mut self.message)),
        ] {
            if !text.is_empty() {
                self.event(&json!({ "type": kind, "text": text }));
            }
        }
    }

    /// One message from the agent while a request waits.
    fn handle<R: std::io::BufRead, W: Write>(
        &mut self,
        conn: &mut Connection<R, W>,
        message: Incoming,
    ) -> Result<(), RpcError> {
        match message {
            Incoming::Notification { method, params } if method == "session/update" => {
                self.update(params.get("update").cloned().unwrap_or(Value::Null));
                Ok(())
            }
            Incoming::Notification { .. } => Ok(()),
            Incoming::Request { id, method, params } if method == "session/request_permission" => {
                self.flush();
                let d = permission::decide(&params, self.allow);
                self.event(&json!({
                    "type": "permission",
                    "tool_call": params.get("toolCall"),
                    "granted": d.granted,
                    "option_id": d.option_id,
                    "command": d.command,
                    "reason": d.reason,
                }));
                conn.respond(&id, d.response())
            }
            Incoming::Request { id, method, .. } => conn.respond_error(
                &id,
                METHOD_NOT_FOUND,
                &format!("proctor's ACP client does not offer `{method}`"),
            ),
        }
    }

    /// One `session/update`.
    fn update(&mut self, update: Value) {
        if self.replaying {
            self.replayed += 1;
            return;
        }
        let kind = update
            .get("sessionUpdate")
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_string();
        let text = update
            .pointer("/content/text")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match kind.as_str() {
            "agent_message_chunk" => {
                let id = update
                    .get("messageId")
                    .and_then(Value::as_str)
                    .map(String::from);
                let another = id != self.message_id;
                if !self.thought.is_empty() || another {
                    self.flush();
                }
                if self.answer_done || another {
                    self.answer.clear();
                    self.answer_done = false;
                }
                self.message_id = id;
                self.message.push_str(text);
                self.answer.push_str(text);
            }
            "agent_thought_chunk" => {
                if !self.message.is_empty() {
                    self.flush();
                }
                self.thought.push_str(text);
            }
            _ => {
                self.flush();
                if kind == "tool_call" {
                    self.answer_done = true;
                }
                let mut event = update;
                if let Some(o) = event.as_object_mut() {
                    o.remove("sessionUpdate");
                    o.insert("type".into(), Value::String(kind));
                }
                self.event(&event);
            }
        }
    }

    /// The closing `answer` line.
    fn finish(&mut self, session_id: &str) {
        self.flush();
        let answer = self.answer.trim().to_string();
        self.event(&json!({ "type": "answer", "text": answer, "session_id": session_id }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(text: &str, id: Option<&str>) -> Value {
        let mut v = json!({ "sessionUpdate": "agent_message_chunk", "content": { "type": "text", "text": text } });
        if let Some(id) = id {
            v["messageId"] = json!(id);
        }
        v
    }

    #[test]
    fn the_answer_is_the_last_message_after_the_last_tool_call() {
        let mut out = Vec::new();
        let allow: Vec<String> = Vec::new();
        let mut rec = Recorder::new(&mut out, &allow);
        rec.update(chunk("Warning: no metadata. ", None));
        rec.update(chunk("Let me ", Some("m1")));
        rec.update(chunk("look.", Some("m1")));
        rec.update(json!({ "sessionUpdate": "tool_call", "toolCallId": "t", "title": "ls" }));
        rec.update(chunk("Note. ", Some("m2")));
        rec.update(chunk("Done", Some("m3")));
        rec.update(chunk(".", Some("m3")));
        rec.finish("s");
        let lines: Vec<Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let messages: Vec<&str> = lines
            .iter()
            .filter(|l| l["type"] == "agent_message")
            .map(|l| l["text"].as_str().unwrap())
            .collect();
        assert_eq!(
            messages,
            ["Warning: no metadata. ", "Let me look.", "Note. ", "Done."]
        );
        assert_eq!(lines[2]["type"], "tool_call");
        let answer = lines.last().unwrap();
        assert_eq!(
            (answer["text"].as_str(), answer["session_id"].as_str()),
            (Some("Done."), Some("s"))
        );
    }
}
