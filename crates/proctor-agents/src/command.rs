//! The `command` agent: any program, from an argv template with `{prompt}`, `{workspace}` and
//! `{model}`; its stdout is the answer.

use crate::{Adapter, AgentError, AgentOutput, Launch, LaunchContext};

/// Bytes of each output stream the transcript shows.
const TRANSCRIPT_OUTPUT: usize = 1 << 20;

/// Runs a command template.
#[derive(Debug, Clone)]
pub struct CommandAdapter {
    template: Vec<String>,
}

impl CommandAdapter {
    /// An adapter for this argv template.
    pub fn new(template: Vec<String>) -> CommandAdapter {
        CommandAdapter { template }
    }
}

/// Fills `{prompt}`, `{workspace}` and `{model}` in one template argument.
pub fn fill(arg: &str, ctx: &LaunchContext) -> String {
    arg.replace("{prompt}", &ctx.prompt)
        .replace("{workspace}", &ctx.workspace.display().to_string())
        .replace("{model}", ctx.model.as_deref().unwrap_or(""))
}

impl Adapter for CommandAdapter {
    fn launch(&self, ctx: &LaunchContext) -> Result<Launch, AgentError> {
        Ok(Launch {
            argv: self.template.iter().map(|a| fill(a, ctx)).collect(),
            env: vec![(crate::PROMPT_ENV.into(), ctx.prompt.clone())],
            files: Vec::new(),
        })
    }

    /// A new invocation of the same command line, with the user's reply as `{prompt}` and
    /// `PROCTOR_PROMPT`, and the turn in `PROCTOR_TURN`: what the agent keeps between turns it
    /// keeps in its workspace or `HOME`, which carry over.
    fn continue_session(
        &self,
        ctx: &LaunchContext,
        _session: &crate::SessionContext,
        next: &crate::NextTurn,
    ) -> Result<Launch, AgentError> {
        let mut launch = self.launch(ctx)?;
        launch.env.push((TURN_ENV.into(), next.turn.to_string()));
        Ok(launch)
    }

    fn read(&self, stdout: &[u8], stderr: &[u8]) -> AgentOutput {
        let answer = String::from_utf8_lossy(stdout).trim_end().to_string();
        // The transcript shows the output up to a bound; the whole of it is the answer and the
        // raw `agent.stdout`.
        let transcript = vec![serde_json::json!({
            "type": "output",
            "stdout": crate::cli::head_of(&answer, TRANSCRIPT_OUTPUT),
            "stderr": crate::cli::head_of(&String::from_utf8_lossy(stderr), TRANSCRIPT_OUTPUT),
        })];
        AgentOutput {
            answer,
            transcript,
            ..AgentOutput::default()
        }
    }
}

/// The variable telling a command agent which turn of a conversation it is in (from 2; absent
/// in the first).
pub const TURN_ENV: &str = "PROCTOR_TURN";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_every_placeholder() {
        let ctx = LaunchContext {
            prompt: "do it".into(),
            workspace: "/workspace".into(),
            model: Some("m1".into()),
            proctor: "/run/proctor/bin/proctor".into(),
            agent_dir: "/run/proctor/agent".into(),
        };
        let a = CommandAdapter::new(vec![
            "agent".into(),
            "-p={prompt}".into(),
            "{workspace}".into(),
            "--model".into(),
            "{model}".into(),
        ]);
        let l = a.launch(&ctx).unwrap();
        assert_eq!(l.argv, ["agent", "-p=do it", "/workspace", "--model", "m1"]);
        assert_eq!(a.read(b"the answer\n", b"").answer, "the answer");
    }
}
