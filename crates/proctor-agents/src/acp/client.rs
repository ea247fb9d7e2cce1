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

use super::recorder::{write_event, Recorder};
use super::rpc::{Connection, RpcError, AUTH_REQUIRED};
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
