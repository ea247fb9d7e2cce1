//! The `acp` agent: any agent that speaks the Agent Client Protocol (ACP) over stdio, with
//! proctor as its client.
//!
//! **Launch.** `proctor __acp-client AGENT_DIR/acp.json` is the agent's main process inside the
//! sandbox ([`client`]); the plan file names the variant's `command` (its program found like a
//! real CLI's: `$PROCTOR_AGENTS_DIR/bin`, then `PATH`; `{workspace}` and `{model}` filled in),
//! the workspace, the prompt, the allow-list and, for a conversation's next turn, the session
//! to load. The agent gets the model endpoint in the variables every kind of client reads:
//! `PROCTOR_MODEL_BASE_URL`, `PROCTOR_MODEL_API_KEY`, `PROCTOR_MODEL`, `ANTHROPIC_BASE_URL` /
//! `ANTHROPIC_API_KEY`, `OPENAI_BASE_URL` (with `/v1`) / `OPENAI_API_KEY` and
//! `GOOGLE_GEMINI_BASE_URL` / `GEMINI_API_KEY`; anything agent-specific goes in the variant's
//! `env`, whose values (like `command`'s words) may use `{model_base_url}` (the endpoint's
//! origin, known only when the trial starts), `{workspace}` and `{model}`.
//!
//! **Permissions.** Every `session/request_permission` is answered from the allow-list
//! ([`permission`]): a plain call of an allow-listed command is granted once; anything else is
//! denied and read as a denied call.
//!
//! **Conversations.** A next turn is a new client process that loads the session the last turn
//! reported (`session/load`), which needs an agent advertising `loadSession`: for one that does
//! not, the parser reports no session, and [`Adapter::continue_session`] says it cannot go on.
//!
//! **Why not the `agent-client-protocol` crate.** It is an async framework (futures, its own
//! connection and role machinery) for building agents and clients alike; this client needs five
//! methods, one blocking loop and no runtime, so it speaks the JSON-RPC itself ([`rpc`]).

pub mod client;
pub mod permission;
mod recorder;
pub mod rpc;
pub mod transcript;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::{
    cli, Adapter, AgentError, AgentOutput, Launch, LaunchContext, NextTurn, SessionContext,
    ShellPermissions, MODEL_API_KEY_ENV, MODEL_BASE_URL_ENV, MODEL_ENV,
};

/// The agent kind's name, in errors.
pub const AGENT: &str = "acp";
/// The plan's file name in the agent folder.
pub const PLAN_FILE: &str = "acp.json";

/// What `proctor __acp-client` runs: one turn of a conversation with an ACP agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcpPlan {
    /// The agent's argv.
    pub command: Vec<String>,
    /// The session's working directory: the workspace.
    pub cwd: PathBuf,
    /// The prompt of this turn (the task's, or the user's reply).
    pub prompt: String,
    /// The allow-listed commands, by name.
    pub allow: Vec<String>,
    /// The session to load and go on with; `None` for a new session.
    pub resume: Option<String>,
}

/// Launches an ACP agent through proctor's client.
#[derive(Debug, Clone)]
pub struct AcpAdapter {
    command: Vec<String>,
    env: BTreeMap<String, String>,
}

/// Fills `{model_base_url}`, `{workspace}` and `{model}` in one word of the command or value of
/// the environment (an unknown endpoint or model fills in as nothing).
pub fn fill(text: &str, ctx: &LaunchContext, session: &SessionContext) -> String {
    let base = session
        .model_base_url
        .as_deref()
        .map(|u| u.trim_end_matches('/'))
        .unwrap_or("");
    text.replace("{model_base_url}", base)
        .replace("{workspace}", &ctx.workspace.display().to_string())
        .replace("{model}", ctx.model.as_deref().unwrap_or(""))
}

impl AcpAdapter {
    /// An adapter for the agent `command` starts, with the variant's `env` (whose placeholders
    /// it fills in at launch).
    pub fn new(command: Vec<String>, env: BTreeMap<String, String>) -> AcpAdapter {
        AcpAdapter { command, env }
    }

    /// The agent's argv with its placeholders filled in and its program found.
    fn argv(
        &self,
        ctx: &LaunchContext,
        session: &SessionContext,
    ) -> Result<Vec<String>, AgentError> {
        let mut argv: Vec<String> = self.command.iter().map(|a| fill(a, ctx, session)).collect();
        let Some(program) = argv.first_mut() else {
            return Err(AgentError::Misconfigured {
                variant: String::new(),
                message: "`agent = \"acp\"` needs a non-empty `command`".into(),
            });
        };
        if !program.contains('/') {
            *program = program_path(program)?.display().to_string();
        }
        Ok(argv)
    }

    /// The launch of one turn: `resume` names the session to go on with.
    fn turn(
        &self,
        ctx: &LaunchContext,
        session: &SessionContext,
        resume: Option<String>,
    ) -> Result<Launch, AgentError> {
        let plan = AcpPlan {
            command: self.argv(ctx, session)?,
            cwd: ctx.workspace.clone(),
            prompt: ctx.prompt.clone(),
            allow: session.allow.clone(),
            resume,
        };
        let bytes = serde_json::to_vec_pretty(&plan).map_err(|e| AgentError::Misconfigured {
            variant: String::new(),
            message: e.to_string(),
        })?;
        let mut env = model_env(ctx, session);
        // The variant's own values that name a placeholder, filled in (the launch's
        // environment goes over the variant's).
        env.extend(
            self.env
                .iter()
                .filter(|(_, v)| fill(v, ctx, session) != **v)
                .map(|(k, v)| (k.clone(), fill(v, ctx, session))),
        );
        Ok(Launch {
            argv: vec![
                ctx.proctor.display().to_string(),
                "__acp-client".into(),
                ctx.agent_dir.join(PLAN_FILE).display().to_string(),
            ],
            env,
            files: vec![(PLAN_FILE.into(), bytes)],
        })
    }
}

/// The installed program `name`, found like a real CLI's.
fn program_path(name: &str) -> Result<PathBuf, AgentError> {
    cli::find_executable(name).map_err(|looked| AgentError::Preflight {
        agent: AGENT,
        message: format!(
            "`{name}` is not installed (looked in {looked}); run agents/install.sh, or give its path in `command`"
        ),
    })
}

/// The model endpoint in the variables ACP agents read (none without an endpoint).
pub fn model_env(ctx: &LaunchContext, session: &SessionContext) -> Vec<(String, String)> {
    let mut env = Vec::new();
    if let Some(base) = session
        .model_base_url
        .as_deref()
        .map(|u| u.trim_end_matches('/'))
        .filter(|u| !u.is_empty())
    {
        let key = cli::api_key(session, "sk-");
        for (k, v) in [
            (MODEL_BASE_URL_ENV, base.to_string()),
            (MODEL_API_KEY_ENV, key.clone()),
            ("ANTHROPIC_BASE_URL", base.to_string()),
            ("ANTHROPIC_API_KEY", key.clone()),
            ("OPENAI_BASE_URL", format!("{base}/v1")),
            ("OPENAI_API_KEY", key.clone()),
            ("GOOGLE_GEMINI_BASE_URL", base.to_string()),
            ("GEMINI_API_KEY", key),
        ] {
            env.push((k.to_string(), v));
        }
    }
    if let Some(model) = &ctx.model {
        env.push((MODEL_ENV.to_string(), model.clone()));
    }
    env
}

impl Adapter for AcpAdapter {
    fn launch(&self, ctx: &LaunchContext) -> Result<Launch, AgentError> {
        self.turn(ctx, &SessionContext::from_env(), None)
    }

    fn launch_session(
        &self,
        ctx: &LaunchContext,
        session: &SessionContext,
    ) -> Result<Launch, AgentError> {
        self.turn(ctx, session, None)
    }

    fn continue_session(
        &self,
        ctx: &LaunchContext,
        session: &SessionContext,
        next: &NextTurn,
    ) -> Result<Launch, AgentError> {
        // The parser reports a session only when the agent can load it.
        let id = next
            .session_id
            .clone()
            .filter(|s| !s.is_empty())
            .ok_or(AgentError::CannotGoOn {
                agent: AGENT,
                why: "the ACP agent reported no session it can load (it does not advertise `loadSession`, or its turn ended before a session opened)",
            })?;
        self.turn(ctx, session, Some(id))
    }

    fn read(&self, stdout: &[u8], stderr: &[u8]) -> AgentOutput {
        transcript::parse(
            &String::from_utf8_lossy(stdout),
            &String::from_utf8_lossy(stderr),
        )
    }

    fn shell_permissions(&self) -> ShellPermissions {
        ShellPermissions::RefusesOutsideAllowList
    }

    /// The agent's program must be found (its version is the agent's own business: ACP
    /// reports it in `initialize`, which the transcript keeps).
    fn preflight(&self) -> Result<Option<crate::AgentInfo>, AgentError> {
        match self.command.first() {
            Some(p) if !p.contains('/') => program_path(p).map(|_| None),
            Some(_) => Ok(None),
            None => Err(AgentError::Preflight {
                agent: AGENT,
                message: "`command` is empty".into(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_is_the_client_with_its_plan_and_the_endpoint() {
        let ctx = LaunchContext {
            prompt: "do it".into(),
            workspace: "/workspace".into(),
            model: Some("m1".into()),
            proctor: "/run/proctor/bin/proctor".into(),
            agent_dir: "/run/proctor/agent".into(),
        };
        let session = SessionContext {
            model_base_url: Some("http://127.0.0.1:9/".into()),
            allow: vec!["echo".into()],
            api_key: Some("k".into()),
            mcp: Vec::new(),
        };
        let env = BTreeMap::from([
            (
                "CONFIG".to_string(),
                "{\"url\":\"{model_base_url}/v1\"}".to_string(),
            ),
            ("PLAIN".to_string(), "x".to_string()),
        ]);
        let a = AcpAdapter::new(
            vec![
                "/bin/agent".into(),
                "--cwd={workspace}".into(),
                "{model}".into(),
            ],
            env,
        );
        let l = a.launch_session(&ctx, &session).unwrap();
        assert_eq!(
            l.argv,
            [
                "/run/proctor/bin/proctor",
                "__acp-client",
                "/run/proctor/agent/acp.json"
            ]
        );
        let plan: AcpPlan = serde_json::from_slice(&l.files[0].1).unwrap();
        assert_eq!(plan.command, ["/bin/agent", "--cwd=/workspace", "m1"]);
        assert_eq!(
            (plan.prompt.as_str(), plan.resume.as_deref()),
            ("do it", None)
        );
        assert!(l
            .env
            .contains(&("OPENAI_BASE_URL".into(), "http://127.0.0.1:9/v1".into())));
        assert!(l.env.contains(&("ANTHROPIC_API_KEY".into(), "k".into())));
        assert!(l.env.contains(&(
            "CONFIG".into(),
            "{\"url\":\"http://127.0.0.1:9/v1\"}".into()
        )));
        assert!(
            !l.env.iter().any(|(k, _)| k == "PLAIN"),
            "the runner gives it as it is"
        );
        assert!(l.env.contains(&(
            "CONFIG".into(),
            "{\"url\":\"http://127.0.0.1:9/v1\"}".into()
        )));
        assert!(
            !l.env.iter().any(|(k, _)| k == "PLAIN"),
            "the runner gives it as it is"
        );
        let next = NextTurn {
            turn: 2,
            session_id: Some("s1".into()),
        };
        let l = a.continue_session(&ctx, &session, &next).unwrap();
        let plan: AcpPlan = serde_json::from_slice(&l.files[0].1).unwrap();
        assert_eq!(plan.resume.as_deref(), Some("s1"));
        let none = NextTurn {
            turn: 2,
            session_id: None,
        };
        let e = a.continue_session(&ctx, &session, &none).unwrap_err();
        assert!(matches!(e, AgentError::CannotGoOn { .. }), "{e}");
        assert!(e.to_string().contains("loadSession"), "{e}");
    }
}
