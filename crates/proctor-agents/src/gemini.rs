//! Gemini CLI (`gemini`, npm `@google/gemini-cli`), tested with 0.61.0.
//!
//! **Launch.** `gemini --prompt PROMPT --output-format stream-json --approval-mode auto_edit
//! --policy AGENT_DIR/policy.toml --skip-trust [--model MODEL]` with `GEMINI_API_KEY` (a dummy),
//! `GOOGLE_GEMINI_BASE_URL` (the endpoint, no `/v1`; HTTP is accepted for loopback addresses),
//! `GEMINI_CLI_TRUST_WORKSPACE=true`, and from the wrapper `GEMINI_CLI_HOME=$HOME` holding a
//! fresh `.gemini/settings.json` (`security.auth.selectedType = "gemini-api-key"`, usage
//! statistics and auto-update off). It then speaks the Gemini API:
//! `POST /v1beta/models/MODEL:streamGenerateContent?alt=sse` for the conversation, with side
//! requests (`:generateContent` with a JSON schema for model routing, next-speaker checks) that
//! proctor's mock answers without consuming a turn. Its shell tool is `run_shell_command`.
//!
//! **MCP servers.** The suite's servers are `mcpServers` of that `settings.json` (each proctor's
//! MCP shim, `includeTools` its `allow_tools`, `trust = true`: a headless run cannot confirm a
//! call); the CLI offers their tools as `mcp_SERVER_TOOL`.
//!
//! **Permissions.** The policy engine: one rule per allow-listed command,
//! `toolName = "run_shell_command"`, `commandPrefix = "NAME"`, `decision = "allow"`,
//! `allowRedirection = true`; `auto_edit` approves file edits; any other shell command is refused
//! (`tool_result` with `error.type = "policy_violation"`, "Tool execution denied by policy.";
//! in `default` mode the refusal reads "requires user confirmation, which is not supported in
//! non-interactive mode").
//!
//! **Transcript** (`stream-json`, JSON lines): `init` (`session_id`, `model`), `message`
//! (`role`, `content`, `delta: true` chunks), `tool_use` (`tool_name`, `tool_id`, `parameters`),
//! `tool_result` (`tool_id`, `status`, `output`, `error.message`), `error`, and `result`
//! (`status`, `stats`: `input_tokens` including cached, `input` uncached, `cached`,
//! `output_tokens`, `models`).
//!
//! **Next turn** of a conversation: the same command with `--resume ID` (the `init` event's
//! `session_id`; Gemini takes an id as well as `latest` or an index).

use std::collections::HashMap;

use std::path::Path;

use serde_json::Value;

use crate::cli::{self, CliAgent, CliCommand, CliSpec, Wrapper};
use crate::{
    AgentError, AgentOutput, DeniedCall, LaunchContext, NextTurn, ReportedUsage, SessionContext,
    ToolCall,
};

/// What the preflight checks.
pub const SPEC: CliSpec = CliSpec {
    agent: "gemini",
    executable: "gemini",
    tested_version: "0.61.0",
    help: &["--help"],
    required: &[
        "--prompt",
        "--output-format",
        "stream-json",
        "--approval-mode",
        "auto_edit",
        "--policy",
        "--skip-trust",
        "--model",
    ],
    shell_permissions: crate::ShellPermissions::RefusesOutsideAllowList,
    resume: Some(cli::ResumeSpec {
        help: &[],
        required: &["--resume"],
    }),
};

/// The settings written into the private `GEMINI_CLI_HOME`.
pub const SETTINGS: &str = r#"{
  "security": { "auth": { "selectedType": "gemini-api-key" } },
  "privacy": { "usageStatisticsEnabled": false },
  "general": { "enableAutoUpdate": false, "enableAutoUpdateNotification": false }
}
"#;

/// The settings for a session: [`SETTINGS`], with the suite's MCP servers as `mcpServers`
/// (each a stdio command, proctor's MCP shim; `includeTools` its `allow_tools`; `trust`, so
/// its tool calls need no confirmation, which a headless run cannot give).
pub fn settings(servers: &[crate::McpServerAccess]) -> String {
    let mut settings: Value = serde_json::from_str(SETTINGS).unwrap_or(Value::Null);
    if !servers.is_empty() {
        let entries: serde_json::Map<String, Value> = servers
            .iter()
            .map(|s| {
                let mut entry = serde_json::json!({
                    "command": s.command.display().to_string(),
                    "args": [],
                    "trust": true,
                });
                if let Some(tools) = &s.allow_tools {
                    entry["includeTools"] = serde_json::json!(tools);
                }
                (s.name.clone(), entry)
            })
            .collect();
        settings["mcpServers"] = Value::Object(entries);
    }
    serde_json::to_string_pretty(&settings).unwrap_or_else(|_| SETTINGS.to_string())
}

/// The Gemini CLI adapter.
#[derive(Debug, Clone, Default)]
pub struct Gemini;

impl Gemini {
    /// The adapter.
    pub fn new() -> Gemini {
        Gemini
    }
}

/// The policy file expressing the allow-list.
pub fn policy(allow: &[String]) -> String {
    let mut s = String::from("# Written by proctor: the trial's allow-listed commands.\n");
    for a in allow {
        s.push_str(&format!(
            "\n[[rule]]\ntoolName = \"run_shell_command\"\ncommandPrefix = {}\ndecision = \"allow\"\npriority = 100\nallowRedirection = true\n",
            Value::String(a.clone())
        ));
    }
    s
}

impl CliAgent for Gemini {
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
        let dir = ctx.agent_dir.display().to_string();
        let mut args = vec![
            "--prompt".to_string(),
            ctx.prompt.clone(),
            "--output-format".into(),
            "stream-json".into(),
            "--approval-mode".into(),
            "auto_edit".into(),
            "--policy".into(),
            format!("{dir}/policy.toml"),
            "--skip-trust".into(),
        ];
        if let Some(model) = &ctx.model {
            args.extend(["--model".into(), model.clone()]);
        }
        let env = vec![
            ("GOOGLE_GEMINI_BASE_URL".into(), base),
            ("GEMINI_API_KEY".into(), cli::api_key(session, "")),
            ("GEMINI_CLI_TRUST_WORKSPACE".into(), "true".into()),
        ];
        let wrapper = Wrapper {
            setup: vec![
                "mkdir -p \"$HOME/.gemini\"".into(),
                format!(
                    "cp {} \"$HOME/.gemini/settings.json\"",
                    cli::sh_quote(&format!("{dir}/settings.json"))
                ),
                "export GEMINI_CLI_HOME=\"$HOME\"".into(),
            ],
            ..Wrapper::default()
        };
        let files = vec![
            (
                "settings.json".to_string(),
                settings(&session.mcp).into_bytes(),
            ),
            (
                "policy.toml".to_string(),
                policy(&session.allow).into_bytes(),
            ),
        ];
        CliCommand {
            args,
            env,
            wrapper,
            files,
        }
    }

    /// `--resume ID` (a session id is accepted as well as `latest` or an index).
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
        c.args.splice(0..0, ["--resume".to_string(), id]);
        Ok(c)
    }

    fn parse(&self, stdout: &str, stderr: &str) -> AgentOutput {
        parse(stdout, stderr)
    }
}

/// Whether a failed tool result is the policy engine's refusal.
fn is_denial(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("requires user confirmation")
        || m.contains("denied by policy")
        || m.contains("blocked by policy")
        || m.contains("policy engine")
}

/// Reads Gemini CLI's stream-json output.
pub fn parse(stdout: &str, stderr: &str) -> AgentOutput {
    let mut out = AgentOutput::default();
    let mut started: HashMap<String, (String, Value)> = HashMap::new();
    // The answer is the assistant text after the last tool activity.
    let mut current = String::new();
    for (v, len) in cli::json_lines(stdout) {
        match cli::str_of(&v, "type") {
            Some("init") => out.session_id = cli::str_of(&v, "session_id").map(String::from),
            Some("message") if cli::str_of(&v, "role") == Some("assistant") => {
                let content = cli::str_of(&v, "content").unwrap_or_default();
                if v.get("delta").and_then(Value::as_bool) == Some(true) {
                    current.push_str(content);
                } else {
                    current = content.to_string();
                }
            }
            Some("tool_use") => {
                current.clear();
                let id = cli::str_of(&v, "tool_id").unwrap_or_default().to_string();
                started.insert(
                    id,
                    (
                        cli::str_of(&v, "tool_name").unwrap_or_default().to_string(),
                        v.get("parameters").cloned().unwrap_or(Value::Null),
                    ),
                );
            }
            Some("tool_result") => {
                current.clear();
                let id = cli::str_of(&v, "tool_id").unwrap_or_default().to_string();
                let (tool, input) = started.remove(&id).unwrap_or_default();
                let command = input
                    .get("command")
                    .and_then(Value::as_str)
                    .map(String::from);
                let ok = cli::str_of(&v, "status") == Some("success");
                let message = v
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let policy =
                    v.pointer("/error/type").and_then(Value::as_str) == Some("policy_violation");
                if !ok && (policy || is_denial(&message)) {
                    out.denied.push(DeniedCall {
                        id: Some(id),
                        tool,
                        command,
                        input,
                        reason: message,
                    });
                } else {
                    out.tool_calls.push(ToolCall {
                        id: Some(id),
                        tool,
                        command,
                        input,
                        ok: Some(ok),
                        exit_code: None,
                        output: cli::str_of(&v, "output").map(cli::head),
                    });
                }
            }
            Some("error") => {
                let msg = cli::str_of(&v, "message").unwrap_or("error");
                out.errors.push(format!("gemini: {msg}"));
            }
            Some("result") => {
                if let Some(status) = cli::str_of(&v, "status").filter(|s| *s != "success") {
                    let msg = v
                        .pointer("/error/message")
                        .and_then(Value::as_str)
                        .unwrap_or(status);
                    out.errors.push(format!("gemini: {msg}"));
                }
                if let Some(stats) = v.get("stats") {
                    let total = cli::u64_of(stats, "input_tokens").unwrap_or(0);
                    let cached = cli::u64_of(stats, "cached").unwrap_or(0);
                    out.usage = Some(ReportedUsage {
                        input: cli::u64_of(stats, "input").or(Some(total.saturating_sub(cached))),
                        output: cli::u64_of(stats, "output_tokens"),
                        cache_read: Some(cached),
                        cache_write: None,
                        requests: None,
                    });
                }
            }
            _ => {}
        }
        out.keep_event(v, len);
    }
    out.answer = current;
    if out.transcript.is_empty() && !stderr.trim().is_empty() {
        out.errors
            .push(format!("gemini: {}", cli::head(stderr.trim())));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_settings_give_each_mcp_server_as_its_shim_trusted_with_its_allowed_tools() {
        let servers = [crate::McpServerAccess {
            name: "notes".into(),
            command: "/run/proctor/shims/proctor-mcp-notes".into(),
            allow_tools: Some(vec!["add_note".into()]),
        }];
        let s: Value = serde_json::from_str(&settings(&servers)).unwrap();
        let notes = &s["mcpServers"]["notes"];
        assert_eq!(notes["command"], "/run/proctor/shims/proctor-mcp-notes");
        assert_eq!(notes["trust"], true);
        assert_eq!(notes["includeTools"], serde_json::json!(["add_note"]));
        assert_eq!(s["security"]["auth"]["selectedType"], "gemini-api-key");
        let none: Value = serde_json::from_str(&settings(&[])).unwrap();
        assert!(none.get("mcpServers").is_none());
    }
}
