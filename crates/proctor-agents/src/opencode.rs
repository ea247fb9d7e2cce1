//! opencode (`opencode`, npm `opencode-ai`), tested with 1.18.33.
//!
//! **Launch.** `opencode run --format json --model proctor/MODEL -- PROMPT` with the whole
//! configuration inline in `OPENCODE_CONFIG_CONTENT`: one provider `proctor` through the bundled
//! AI SDK package (`@ai-sdk/anthropic` with `baseURL = ENDPOINT/v1`, so it sends
//! `POST /v1/messages`; models named `gpt-*`, `o1*`, `o3*`, `o4*` use `@ai-sdk/openai-compatible`,
//! Chat Completions), its key read from `PROCTOR_MODEL_API_KEY` through `{env:...}` (so the
//! recorded environment holds no key), `model` and `small_model` both on it, autoupdate and
//! sharing off, and the `permission` map. `OPENCODE_DISABLE_MODELS_FETCH`,
//! `OPENCODE_DISABLE_AUTOUPDATE`, `OPENCODE_DISABLE_LSP_DOWNLOAD`,
//! `OPENCODE_DISABLE_DEFAULT_PLUGINS`, `OPENCODE_DISABLE_SHARE` and
//! `OPENCODE_DISABLE_CLAUDE_CODE` keep it off the network and away from other agents' files; its
//! config and data live under the private `$HOME`. It also sends a title request without tools,
//! which proctor's mock answers as a side request.
//!
//! **Permissions.** `permission.bash` maps `"*"` to `deny` and `"NAME"` / `"NAME *"` to `allow`
//! for each allow-listed command; `edit` is `allow`, `webfetch` is `deny`.
//!
//! **MCP servers.** The suite's servers are the `mcp` map of that configuration (each a `local`
//! command, proctor's MCP shim); opencode offers their tools as `SERVER_TOOL`, with no per-tool
//! allow-list: proctor refuses a tool outside `allow_tools` itself.
//!
//! **Transcript** (`--format json`, JSON lines): `step_start`, `text` (`part.text`),
//! `tool_use` (`part.tool`, `part.callID`, `part.state`: `status` `completed` | `error`,
//! `input`, `output`, `error`, `metadata.exit`), `step_finish` (`part.tokens`: `input` uncached,
//! `output`, `reasoning`, `cache.read`, `cache.write`; `part.cost`), `error`. A call refused by
//! the permission map ends in `status: "error"` with "The user has specified a rule which
//! prevents you from using this specific tool call".
//!
//! **Next turn** of a conversation: `opencode run --session ID ...` (the `sessionID` it
//! reported).

use std::path::Path;

use serde_json::{json, Value};

use crate::cli::{self, CliAgent, CliCommand, CliSpec};
use crate::{
    AgentError, AgentOutput, DeniedCall, LaunchContext, NextTurn, ReportedUsage, SessionContext,
    ToolCall, MODEL_API_KEY_ENV,
};

/// What the preflight checks.
pub const SPEC: CliSpec = CliSpec {
    agent: "opencode",
    executable: "opencode",
    tested_version: "1.18.33",
    help: &["run", "--help"],
    required: &["--format", "json", "--model"],
    shell_permissions: crate::ShellPermissions::RefusesOutsideAllowList,
    resume: Some(cli::ResumeSpec {
        help: &[],
        required: &["--session"],
    }),
};

/// The model named when the variant names none.
pub const DEFAULT_MODEL: &str = "mock-model";

/// The opencode adapter.
#[derive(Debug, Clone, Default)]
pub struct Opencode;

impl Opencode {
    /// The adapter.
    pub fn new() -> Opencode {
        Opencode
    }
}

/// Whether a model name is served on the Chat Completions wire rather than Anthropic Messages.
pub fn is_openai_model(model: &str) -> bool {
    model.starts_with("gpt-") || ["o1", "o3", "o4"].iter().any(|p| model.starts_with(p))
}

/// The inline configuration for a session.
pub fn config(base: &str, model: &str, allow: &[String]) -> Value {
    let mut bash = serde_json::Map::new();
    bash.insert("*".into(), json!("deny"));
    for a in allow {
        bash.insert(a.clone(), json!("allow"));
        bash.insert(format!("{a} *"), json!("allow"));
    }
    let npm = if is_openai_model(model) {
        "@ai-sdk/openai-compatible"
    } else {
        "@ai-sdk/anthropic"
    };
    json!({
        "$schema": "https://opencode.ai/config.json",
        "model": format!("proctor/{model}"),
        "small_model": format!("proctor/{model}"),
        "autoupdate": false,
        "share": "disabled",
        "provider": {
            "proctor": {
                "npm": npm,
                "name": "proctor",
                "options": { "baseURL": format!("{base}/v1"), "apiKey": "{env:PROCTOR_MODEL_API_KEY}" },
                "models": { model: { "name": model } },
            }
        },
        "permission": { "bash": bash, "edit": "allow", "webfetch": "deny" },
    })
}

/// The `mcp` map of a session's configuration: each of the suite's MCP servers as a local
/// (stdio) command, proctor's MCP shim. opencode has no per-tool allow-list to give it: a tool
/// outside `allow_tools` is refused by proctor itself, as an MCP error, and recorded denied.
pub fn mcp_config(servers: &[crate::McpServerAccess]) -> Value {
    servers
        .iter()
        .map(|s| {
            let entry = json!({
                "type": "local",
                "command": [s.command.display().to_string()],
                "enabled": true,
            });
            (s.name.clone(), entry)
        })
        .collect::<serde_json::Map<String, Value>>()
        .into()
}

impl CliAgent for Opencode {
    fn spec(&self) -> &'static CliSpec {
        &SPEC
    }

    fn command(
        &self,
        ctx: &LaunchContext,
        session: &SessionContext,
        base: String,
        _exe: &Path,
    ) -> CliCommand {
        let model = ctx.model.clone().unwrap_or_else(|| DEFAULT_MODEL.into());
        let args = vec![
            "run".to_string(),
            "--format".into(),
            "json".into(),
            "--model".into(),
            format!("proctor/{model}"),
            "--".into(),
            ctx.prompt.clone(),
        ];
        let mut config = config(&base, &model, &session.allow);
        if !session.mcp.is_empty() {
            config["mcp"] = mcp_config(&session.mcp);
        }
        let mut env = vec![("OPENCODE_CONFIG_CONTENT".to_string(), config.to_string())];
        env.push((MODEL_API_KEY_ENV.into(), cli::api_key(session, "sk-")));
        for k in [
            "OPENCODE_DISABLE_MODELS_FETCH",
            "OPENCODE_DISABLE_AUTOUPDATE",
            "OPENCODE_DISABLE_LSP_DOWNLOAD",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS",
            "OPENCODE_DISABLE_SHARE",
            "OPENCODE_DISABLE_CLAUDE_CODE",
        ] {
            env.push((k.into(), "1".into()));
        }
        CliCommand {
            args,
            env,
            ..CliCommand::default()
        }
    }

    /// `run --session ID`.
    fn resume(
        &self,
        ctx: &LaunchContext,
        session: &SessionContext,
        base: String,
        exe: &Path,
        next: &NextTurn,
    ) -> Result<CliCommand, AgentError> {
        let id = cli::resumed_id(SPEC.agent, next)?;
        let mut c = self.command(ctx, session, base, exe);
        c.args.splice(1..1, ["--session".to_string(), id]);
        Ok(c)
    }

    fn parse(&self, stdout: &str, stderr: &str) -> AgentOutput {
        parse(stdout, stderr)
    }
}

/// Reads `opencode run --format json` output.
pub fn parse(stdout: &str, stderr: &str) -> AgentOutput {
    let mut out = AgentOutput::default();
    let mut usage = ReportedUsage::default();
    let mut cost = 0.0;
    let mut steps = 0u64;
    let mut current = String::new();
    for (v, len) in cli::json_lines(stdout) {
        if out.session_id.is_none() {
            out.session_id = cli::str_of(&v, "sessionID").map(String::from);
        }
        let part = v.get("part").cloned().unwrap_or(Value::Null);
        match cli::str_of(&v, "type") {
            Some("text") => {
                let t = cli::str_of(&part, "text").unwrap_or_default();
                if !t.is_empty() {
                    if !current.is_empty() {
                        current.push('\n');
                    }
                    current.push_str(t);
                }
            }
            Some("tool_use") => {
                current.clear();
                let state = part.get("state").cloned().unwrap_or(Value::Null);
                let input = state.get("input").cloned().unwrap_or(Value::Null);
                let tool = cli::str_of(&part, "tool").unwrap_or_default().to_string();
                let id = cli::str_of(&part, "callID").map(String::from);
                let command = input
                    .get("command")
                    .and_then(Value::as_str)
                    .map(String::from);
                let status = cli::str_of(&state, "status");
                let error = cli::str_of(&state, "error").unwrap_or_default();
                if status == Some("error")
                    && (error.contains("prevents you from using this specific tool call")
                        || error.contains("rejected permission"))
                {
                    out.denied.push(DeniedCall {
                        id,
                        tool,
                        command,
                        input,
                        reason: error.to_string(),
                    });
                } else {
                    out.tool_calls.push(ToolCall {
                        id,
                        tool,
                        command,
                        input,
                        ok: status.map(|s| s == "completed"),
                        exit_code: state
                            .pointer("/metadata/exit")
                            .and_then(Value::as_i64)
                            .map(|c| c as i32),
                        output: cli::str_of(&state, "output")
                            .or(Some(error).filter(|e| !e.is_empty()))
                            .map(cli::head),
                    });
                }
            }
            Some("step_finish") => {
                steps += 1;
                if let Some(t) = part.get("tokens") {
                    usage.add(&ReportedUsage {
                        input: cli::u64_of(t, "input"),
                        output: cli::u64_of(t, "output"),
                        cache_read: t.pointer("/cache/read").and_then(Value::as_u64),
                        cache_write: t.pointer("/cache/write").and_then(Value::as_u64),
                        requests: None,
                    });
                }
                cost += part.get("cost").and_then(Value::as_f64).unwrap_or(0.0);
            }
            Some("error") => {
                let msg = v
                    .pointer("/error/data/message")
                    .or_else(|| v.pointer("/error/message"))
                    .and_then(Value::as_str)
                    .map(String::from)
                    .unwrap_or_else(|| v.get("error").map(Value::to_string).unwrap_or_default());
                out.errors.push(format!("opencode: {msg}"));
            }
            _ => {}
        }
        out.keep_event(v, len);
    }
    out.answer = current;
    if steps > 0 {
        usage.requests = Some(steps);
        out.usage = Some(usage);
        // A model without a price in opencode's catalogue costs "0": that is unknown, not free.
        out.cost_usd = Some(cost).filter(|c| *c > 0.0);
    }
    if out.transcript.is_empty() && !stderr.trim().is_empty() {
        out.errors
            .push(format!("opencode: {}", cli::head(stderr.trim())));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mcp_server_is_a_local_command_of_the_inline_configuration() {
        let servers = [crate::McpServerAccess {
            name: "notes".into(),
            command: "/run/proctor/shims/proctor-mcp-notes".into(),
            allow_tools: None,
        }];
        assert_eq!(
            mcp_config(&servers),
            json!({"notes": {"type": "local", "command": ["/run/proctor/shims/proctor-mcp-notes"], "enabled": true}})
        );
    }
}
