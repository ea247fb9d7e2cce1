//! Agents: how each kind is launched inside a trial's sandbox and how its output is read.
//!
//! An [`Adapter`] turns a trial's prompt into a command line, environment and files, and turns
//! what the agent printed into an answer and a transcript. The runner knows nothing about any
//! particular agent; real agent CLIs plug in here beside the scripted and command agents.
//!
//! Real agent CLIs (Claude Code, Codex, Copilot, Gemini CLI, opencode, aider) each have a module.
//! For them the runner also passes a [`SessionContext`] (the model endpoint, the allow-list and
//! the dummy key) to [`Adapter::launch_session`], and calls [`Adapter::preflight`] once before any
//! trial: it finds the installed CLI (see [`cli::find_executable`]), reads its version and checks
//! that every flag the adapter uses is in its help, so a missing CLI or flag becomes an `errored`
//! trial whose reason names it. Each adapter's parser reads the CLI's own transcript into
//! [`AgentOutput`]: the answer, tool calls, permission denials, agent-reported usage and cost.

pub mod acp;
pub mod aider;
pub mod claude_code;
pub mod cli;
pub mod codex;
pub mod command;
pub mod copilot;
pub mod gemini;
pub mod human;
pub mod mcp_client;
pub mod opencode;
pub mod script;

use std::path::PathBuf;

use proctor_suite::model::{AgentKind, Variant};
use proctor_suite::script::Script;
use serde::{Deserialize, Serialize};

/// What an adapter knows about the trial it launches.
#[derive(Debug, Clone)]
pub struct LaunchContext {
    /// The full prompt, after the variant's transforms and the offline-user clause.
    pub prompt: String,
    /// The workspace as the agent sees it (its working directory).
    pub workspace: PathBuf,
    /// The model named by the variant.
    pub model: Option<String>,
    /// The proctor binary as seen inside the sandbox.
    pub proctor: PathBuf,
    /// A private folder for this agent's launch files, as seen inside the sandbox.
    pub agent_dir: PathBuf,
}

/// How to start the agent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Launch {
    /// The command line.
    pub argv: Vec<String>,
    /// Environment added to the trial's base environment.
    pub env: Vec<(String, String)>,
    /// Files written into the agent folder before the start: name, content.
    pub files: Vec<(String, Vec<u8>)>,
}

/// The variable giving an agent the model endpoint's base URL (no `/v1`).
pub const MODEL_BASE_URL_ENV: &str = "PROCTOR_MODEL_BASE_URL";
/// The variable giving an agent the key for the model endpoint.
pub const MODEL_API_KEY_ENV: &str = "PROCTOR_MODEL_API_KEY";
/// The variable giving an agent the model to ask for.
pub const MODEL_ENV: &str = "PROCTOR_MODEL";
/// The variable giving a command or human agent the task's prompt.
pub use proctor_suite::model::PROMPT_ENV;

/// What a real agent CLI needs beyond [`LaunchContext`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionContext {
    /// The model endpoint as the agent reaches it, an origin without `/v1`
    /// (`http://127.0.0.1:7171`): proctor's mock model, or the trial's relay to the model gateway. Adapters add `/v1`
    /// where their CLI wants it.
    pub model_base_url: Option<String>,
    /// The allow-listed interface commands, by name (`chat`), expressed in the CLI's own
    /// permission syntax where it has one.
    pub allow: Vec<String>,
    /// The API key handed to the CLI; `None` makes the adapter use a long random dummy key
    /// (a short key is masked by some CLIs wherever its text appears in their output).
    pub api_key: Option<String>,
    /// The suite's MCP servers, as the agent's MCP client reaches them: exactly these, and no
    /// server of the host's or the project's configuration.
    pub mcp: Vec<McpServerAccess>,
}

/// One MCP server an agent CLI is configured with for a trial.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpServerAccess {
    /// The server's name in the suite (Claude Code names its tools `mcp__NAME__TOOL`).
    pub name: String,
    /// The stdio command that reaches it: proctor's MCP shim, as seen inside the sandbox.
    pub command: PathBuf,
    /// The tools the agent may call; `None`: every tool the server lists.
    pub allow_tools: Option<Vec<String>>,
}

impl SessionContext {
    /// The session described by proctor's environment: `PROCTOR_MODEL_BASE_URL` and
    /// `PROCTOR_MODEL_API_KEY`, with no allow-list. [`Adapter::launch`] of a real agent uses it.
    pub fn from_env() -> SessionContext {
        let get = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        SessionContext {
            model_base_url: get(MODEL_BASE_URL_ENV),
            allow: Vec::new(),
            api_key: get(MODEL_API_KEY_ENV),
            mcp: Vec::new(),
        }
    }
}

/// One tool call the agent made, as its CLI reported it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call's id in the CLI's transcript, if it has one.
    #[serde(default)]
    pub id: Option<String>,
    /// The tool's name (`Bash`, `exec_command`, `bash`, `run_shell_command`, `shell`).
    pub tool: String,
    /// The command line, for shell tools.
    #[serde(default)]
    pub command: Option<String>,
    /// The arguments as given.
    #[serde(default)]
    pub input: serde_json::Value,
    /// Whether the CLI reported success; `None` when it did not say.
    #[serde(default)]
    pub ok: Option<bool>,
    /// The exit status of a shell command, when reported.
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// The head of the tool's output as reported (bounded).
    #[serde(default)]
    pub output: Option<String>,
}

/// What an agent CLI's own permission layer does with a shell command, as proctor configures it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShellPermissions {
    /// It runs every command (Codex: its rules cannot say "deny the rest"; agents without a
    /// permission layer): a `denied` call in its transcript cannot be real.
    RunsEverything,
    /// It refuses a command that is not a plain call of an allow-listed program.
    RefusesOutsideAllowList,
    /// It refuses every shell command (aider answers no to each it proposes).
    RefusesEvery,
}

/// A call the CLI's own permission layer refused; the runner logs it as a `denied` call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeniedCall {
    /// The call's id in the CLI's transcript, if it has one.
    #[serde(default)]
    pub id: Option<String>,
    /// The tool's name.
    pub tool: String,
    /// The command line, for shell tools.
    #[serde(default)]
    pub command: Option<String>,
    /// The arguments as given.
    #[serde(default)]
    pub input: serde_json::Value,
    /// The CLI's reason, as it said it.
    pub reason: String,
}

/// Token usage as the agent CLI reported it (`source = "agent-reported"`), in the Anthropic
/// categories: `input` excludes cache reads and writes. A category the CLI does not report is
/// `None`, never 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportedUsage {
    /// Uncached input tokens.
    pub input: Option<u64>,
    /// Output tokens.
    pub output: Option<u64>,
    /// Input tokens read from the prompt cache.
    pub cache_read: Option<u64>,
    /// Input tokens written to the prompt cache.
    pub cache_write: Option<u64>,
    /// Model requests, when the CLI counts them.
    pub requests: Option<u64>,
}

impl ReportedUsage {
    /// Adds another report, category by category (a category known on either side is known).
    pub fn add(&mut self, other: &ReportedUsage) {
        fn sum(a: Option<u64>, b: Option<u64>) -> Option<u64> {
            match (a, b) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
            }
        }
        self.input = sum(self.input, other.input);
        self.output = sum(self.output, other.output);
        self.cache_read = sum(self.cache_read, other.cache_read);
        self.cache_write = sum(self.cache_write, other.cache_write);
        self.requests = sum(self.requests, other.requests);
    }
}

/// What the agent said and did, read from its output.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentOutput {
    /// The final answer.
    pub answer: String,
    /// The transcript, one JSON value per event.
    pub transcript: Vec<serde_json::Value>,
    /// Tool calls the CLI reported, in order (denied ones are in `denied` instead).
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    /// Calls the CLI's permission layer refused.
    #[serde(default)]
    pub denied: Vec<DeniedCall>,
    /// Usage the CLI reported, if it reports any.
    #[serde(default)]
    pub usage: Option<ReportedUsage>,
    /// Money the CLI reported spending, in US dollars, if it reports it (a mock model makes
    /// this the CLI's list-price estimate, not a charge).
    #[serde(default)]
    pub cost_usd: Option<f64>,
    /// Errors the CLI reported (provider, auth, rate limit, crash), for the runner to classify.
    #[serde(default)]
    pub errors: Vec<String>,
    /// The CLI's session id, if it reports one.
    #[serde(default)]
    pub session_id: Option<String>,
    /// Transcript events left out because the transcript had reached its bound
    /// ([`MAX_TRANSCRIPT_EVENTS`], [`MAX_TRANSCRIPT_BYTES`]); the agent's raw output keeps them.
    #[serde(default)]
    pub events_dropped: u64,
    /// Bytes of the transcript's events as the agent wrote them (not serialized).
    #[serde(skip)]
    pub transcript_bytes: usize,
}

/// The most events a transcript keeps: past it, events are counted, not kept.
pub const MAX_TRANSCRIPT_EVENTS: usize = 100_000;
/// The most bytes of events (as the agent wrote them) a transcript keeps: parsed JSON takes
/// several times its text's size in memory, so this bounds what reading one trial costs.
pub const MAX_TRANSCRIPT_BYTES: usize = 16 << 20;

impl AgentOutput {
    /// Keeps one transcript event of `len` bytes as written, unless the transcript is at its
    /// bound (then it is only counted in [`AgentOutput::events_dropped`]).
    pub fn keep_event(&mut self, event: serde_json::Value, len: usize) {
        if self.transcript.len() >= MAX_TRANSCRIPT_EVENTS
            || self.transcript_bytes + len > MAX_TRANSCRIPT_BYTES
        {
            self.events_dropped += 1;
            return;
        }
        self.transcript_bytes += len;
        self.transcript.push(event);
    }
}

/// What an adapter is told when the agent goes on with a conversation
/// ([`Adapter::continue_session`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NextTurn {
    /// The turn about to start, counted from 1 (so at least 2 here).
    pub turn: usize,
    /// The session id the agent's previous turn reported ([`AgentOutput::session_id`]), if any.
    pub session_id: Option<String>,
}

/// The installed agent CLI, as found by [`Adapter::preflight`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentInfo {
    /// The agent kind (`claude-code`).
    pub agent: String,
    /// The executable run.
    pub executable: PathBuf,
    /// The version it reports (`2.1.328`).
    pub version: String,
    /// The version this adapter was tested with (and `agents/install.sh` installs).
    pub tested_version: String,
}

/// Why an agent cannot be launched.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The variant lacks what this agent kind needs.
    #[error("variant `{variant}`: {message}")]
    Misconfigured {
        /// The variant id.
        variant: String,
        /// What is missing.
        message: String,
    },
    /// This agent kind has no adapter yet.
    #[error("agent `{0}` is not supported by this proctor yet")]
    Unsupported(&'static str),
    /// The agent's CLI is not installed where proctor looks.
    #[error(
        "{agent}: `{executable}` is not installed (looked in {looked}); run agents/install.sh"
    )]
    NotInstalled {
        /// The agent kind.
        agent: &'static str,
        /// The executable's name.
        executable: &'static str,
        /// Where proctor looked.
        looked: String,
    },
    /// The installed CLI cannot be used as this adapter needs (a missing flag, a failing
    /// `--version`).
    #[error("{agent}: {message}")]
    Preflight {
        /// The agent kind.
        agent: &'static str,
        /// What is wrong, naming the flag or command.
        message: String,
    },
    /// The user answered, and this agent kind has no way to go on with its session.
    #[error(
        "this agent kind cannot go on with a conversation (it has no way to resume its session)"
    )]
    NoConversation,
    /// The user answered, and the agent's previous turn reported no session id to resume.
    #[error("{agent}: the previous turn reported no session id, so its session cannot be resumed")]
    NoSessionId {
        /// The agent kind.
        agent: &'static str,
    },
    /// The user answered, and this agent cannot go on with its session, for the reason given.
    #[error("{agent}: cannot go on with the conversation: {why}")]
    CannotGoOn {
        /// The agent kind.
        agent: &'static str,
        /// Why not.
        why: &'static str,
    },
    /// A real agent needs a model endpoint and none was given.
    #[error("{agent}: no model endpoint: give the variant a model (`PROVIDER/MODEL`) or a `model_script`, or pass an endpoint in PROCTOR_MODEL_BASE_URL")]
    NoModelEndpoint {
        /// The agent kind.
        agent: &'static str,
    },
}

/// One kind of agent.
pub trait Adapter: Send + Sync {
    /// How to start the agent for one trial.
    fn launch(&self, ctx: &LaunchContext) -> Result<Launch, AgentError>;
    /// Reads the agent's stdout and stderr after it stopped.
    fn read(&self, stdout: &[u8], stderr: &[u8]) -> AgentOutput;
    /// How to start the agent with a model endpoint, an allow-list and a key. Agents that use
    /// no model ignore `session`.
    fn launch_session(
        &self,
        ctx: &LaunchContext,
        session: &SessionContext,
    ) -> Result<Launch, AgentError> {
        let _ = session;
        self.launch(ctx)
    }
    /// How to start the agent again, in the same sandbox, to go on with its conversation:
    /// `ctx.prompt` is the user's reply and `next` says which turn this is and what the last
    /// turn's output named (the CLI's session id). Each adapter continues its own session by its
    /// CLI's own mechanism; the default says this agent kind cannot hold a conversation.
    fn continue_session(
        &self,
        ctx: &LaunchContext,
        session: &SessionContext,
        next: &NextTurn,
    ) -> Result<Launch, AgentError> {
        let _ = (ctx, session, next);
        Err(AgentError::NoConversation)
    }
    /// What proctor configures this CLI's own permission layer to do with a shell command: only
    /// a CLI that refuses some can have a real `denied` call in its transcript.
    fn shell_permissions(&self) -> ShellPermissions {
        ShellPermissions::RunsEverything
    }
    /// Checks, once before any trial, that the agent can run here: its CLI is installed, its
    /// version is readable and every flag this adapter passes is in its help. `Ok(None)` for
    /// agents with nothing to check.
    fn preflight(&self) -> Result<Option<AgentInfo>, AgentError> {
        Ok(None)
    }
}

/// The adapter for a variant; `script` is the parsed script for script variants.
pub fn adapter_for(
    variant: &Variant,
    script: Option<Script>,
) -> Result<Box<dyn Adapter>, AgentError> {
    match variant.agent {
        AgentKind::Script => {
            let script = script.ok_or_else(|| AgentError::Misconfigured {
                variant: variant.id.get_ref().clone(),
                message: "a script variant needs its script".into(),
            })?;
            Ok(Box::new(script::ScriptAdapter::new(script)))
        }
        AgentKind::Command => {
            let template = variant
                .command
                .as_ref()
                .map(|c| c.get_ref().clone())
                .ok_or_else(|| AgentError::Misconfigured {
                    variant: variant.id.get_ref().clone(),
                    message: "`agent = \"command\"` needs `command`".into(),
                })?;
            Ok(Box::new(command::CommandAdapter::new(template)))
        }
        AgentKind::Acp => {
            let command = variant
                .command
                .as_ref()
                .map(|c| c.get_ref().clone())
                .filter(|c| !c.is_empty())
                .ok_or_else(|| AgentError::Misconfigured {
                    variant: variant.id.get_ref().clone(),
                    message: "`agent = \"acp\"` needs `command`".into(),
                })?;
            Ok(Box::new(acp::AcpAdapter::new(command, variant.env.clone())))
        }
        AgentKind::ClaudeCode => Ok(Box::new(claude_code::ClaudeCode::new())),
        AgentKind::Codex => Ok(Box::new(codex::Codex::new())),
        AgentKind::Copilot => Ok(Box::new(copilot::Copilot::new())),
        AgentKind::Gemini => Ok(Box::new(gemini::Gemini::new())),
        AgentKind::Opencode => Ok(Box::new(opencode::Opencode::new())),
        AgentKind::Aider => Ok(Box::new(aider::Aider::new())),
        AgentKind::Human => {
            let shell = variant
                .command
                .as_ref()
                .map(|c| c.get_ref().clone())
                .filter(|c| !c.is_empty())
                .ok_or_else(|| AgentError::Misconfigured {
                    variant: variant.id.get_ref().clone(),
                    message: "a person's variant needs the shell to start as its `command`".into(),
                })?;
            Ok(Box::new(human::HumanAdapter::new(shell)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transcript_keeps_events_up_to_its_bound_and_counts_the_rest() {
        let mut out = AgentOutput::default();
        for _ in 0..MAX_TRANSCRIPT_EVENTS + 5 {
            out.keep_event(serde_json::json!({}), 2);
        }
        assert_eq!(out.transcript.len(), MAX_TRANSCRIPT_EVENTS);
        assert_eq!(out.events_dropped, 5);

        let mut out = AgentOutput::default();
        let big = MAX_TRANSCRIPT_BYTES / 3 + 1;
        for _ in 0..4 {
            out.keep_event(serde_json::json!({"big": true}), big);
        }
        assert_eq!(
            out.transcript.len(),
            2,
            "a third event would pass the byte bound"
        );
        assert_eq!(out.events_dropped, 2);
    }
}
