//! Agents: how each kind is launched inside a trial's sandbox and how its output is read.
//!
//! An [`Adapter`] turns a trial's prompt into a command line, environment and files, and turns
//! what the agent printed into an answer and a transcript. The runner knows nothing about any
//! particular agent; real agent CLIs plug in here beside the scripted and command agents.

pub mod command;
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

/// What the agent said and did, read from its output.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentOutput {
    /// The final answer.
    pub answer: String,
    /// The transcript, one JSON value per event.
    pub transcript: Vec<serde_json::Value>,
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
}

/// One kind of agent.
pub trait Adapter: Send + Sync {
    /// How to start the agent for one trial.
    fn launch(&self, ctx: &LaunchContext) -> Result<Launch, AgentError>;
    /// Reads the agent's stdout and stderr after it stopped.
    fn read(&self, stdout: &[u8], stderr: &[u8]) -> AgentOutput;
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
        other => Err(AgentError::Unsupported(other.as_str())),
    }
}
