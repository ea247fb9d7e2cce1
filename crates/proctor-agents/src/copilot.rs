//! GitHub Copilot CLI (`copilot`, npm `@github/copilot`), tested with 1.0.102.
//!
//! **Launch.** `copilot --usage-output-file $HOME/.proctor/copilot-usage.json -p PROMPT
//! --output-format json -s --no-ask-user --no-auto-update --disable-builtin-mcps [--model MODEL]
//! --allow-tool write [--allow-tool shell(chat) ...]` in BYOK mode, no GitHub login:
//! `COPILOT_PROVIDER_BASE_URL` (the endpoint, no `/v1`), `COPILOT_PROVIDER_TYPE=anthropic` (it
//! then sends `POST /v1/messages`, streaming), `COPILOT_MODEL`, `COPILOT_PROVIDER_API_KEY` (a
//! long random dummy: Copilot masks every occurrence of the key's text in its output),
//! `COPILOT_OFFLINE=true` (no GitHub auth, telemetry, web tools or update checks) and, from the
//! wrapper, `COPILOT_HOME=$HOME/.copilot`. Copilot unpacks ~235 MB into
//! `$XDG_CACHE_HOME/copilot/pkg` on first run; the wrapper links that folder to the copy
//! `agents/install.sh` unpacked once (it is only read), so a trial does not unpack it again.
//!
//! **MCP servers.** `--additional-mcp-config @AGENT_DIR/copilot-mcp.json` lists the suite's
//! servers (each a `local` command, proctor's MCP shim); `--allow-tool 'SERVER(TOOL)'` permits
//! each tool of `allow_tools` (`SERVER`: every tool of a server without it). Copilot offers the
//! tools as `SERVER-TOOL`; its own MCP configuration under the fresh `COPILOT_HOME` is empty.
//!
//! **Permissions.** `--allow-tool 'shell(NAME)'` per allow-listed command, and `--allow-tool
//! write` for file writes (without it `echo hi > hello.txt` is refused even with
//! `shell(echo)`: the redirection is a write). Anything else is denied because nobody can answer
//! a prompt (`--no-ask-user`, prompt mode).
//!
//! **Transcript** (`--output-format json`, JSON lines): `assistant.message` (`content`,
//! `toolRequests`), `tool.execution_start` (`toolCallId`, `toolName`, `arguments`),
//! `tool.execution_complete` (`success`, `error.code` — `"denied"` for a refused call —
//! `result.content`, `shellExecution.exitCode`), `result` (`exitCode`, `usage.premiumRequests`).
//! Token usage is not in stdout; it comes from `--usage-output-file`, which the wrapper prints
//! after the run: `modelMetrics.MODEL.usage` (`inputTokens` including cache, `outputTokens`,
//! `cacheReadTokens`, `cacheWriteTokens`) and `requests.count`.
//!
//! **Next turn** of a conversation: the same command with `--resume=ID` (the `sessionId` it
//! reported).

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
    agent: "copilot",
    executable: "copilot",
    tested_version: "1.0.102",
    help: &["--help"],
    required: &[
        "--prompt",
        "--output-format",
        "--silent",
        "--no-ask-user",
        "--no-auto-update",
        "--disable-builtin-mcps",
        "--additional-mcp-config",
        "--allow-tool",
        "--usage-output-file",
        "--model",
    ],
    shell_permissions: crate::ShellPermissions::RefusesOutsideAllowList,
    resume: Some(cli::ResumeSpec {
        help: &[],
        required: &["--resume"],
    }),
};

/// The model named when the variant names none.
pub const DEFAULT_MODEL: &str = "claude-sonnet-4.5";
/// The wrapper's name for the usage file.
const USAGE: &str = "copilot-usage";

/// The Copilot adapter.
#[derive(Debug, Clone, Default)]
pub struct Copilot;

impl Copilot {
    /// The adapter.
    pub fn new() -> Copilot {
        Copilot
    }
}

/// `--allow-tool` values for an allow-list: `write`, then `shell(NAME)` per command.
pub fn allow_tools(allow: &[String]) -> Vec<String> {
    let mut v = vec!["write".to_string()];
    v.extend(allow.iter().map(|a| format!("shell({a})")));
    v
}

impl CliAgent for Copilot {
    fn spec(&self) -> &'static CliSpec {
        &SPEC
    }

    fn command(
        &self,
        ctx: &LaunchContext,
        session: &SessionContext,
        base: String,
        exe: &Path,
    ) -> CliCommand {
        let model = ctx.model.clone().unwrap_or_else(|| DEFAULT_MODEL.into());
        let mut args = vec![
            "--prompt".to_string(),
            ctx.prompt.clone(),
            "--output-format".into(),
            "json".into(),
            "--silent".into(),
            "--no-ask-user".into(),
            "--no-auto-update".into(),
            "--disable-builtin-mcps".into(),
            "--model".into(),
            model.clone(),
        ];
        for t in allow_tools(&session.allow) {
            args.push(format!("--allow-tool={t}"));
        }
        let mut files = Vec::new();
        if !session.mcp.is_empty() {
            let config = ctx.agent_dir.join(MCP_CONFIG);
            args.push(format!("--additional-mcp-config=@{}", config.display()));
            files.push((MCP_CONFIG.to_string(), mcp_config(&session.mcp)));
            for t in mcp_permissions(&session.mcp) {
                args.push(format!("--allow-tool={t}"));
            }
        }
        let env = vec![
            ("COPILOT_PROVIDER_BASE_URL".into(), base),
            ("COPILOT_PROVIDER_TYPE".into(), "anthropic".into()),
            ("COPILOT_MODEL".into(), model),
            (
                "COPILOT_PROVIDER_API_KEY".into(),
                cli::api_key(session, "sk-"),
            ),
            ("COPILOT_OFFLINE".into(), "true".into()),
        ];
        let mut setup = vec![
            "mkdir -p \"$HOME/.copilot\" \"$HOME/.proctor\"".into(),
            "export COPILOT_HOME=\"$HOME/.copilot\"".into(),
        ];
        if let Some(pkg) = unpacked_package(exe) {
            setup.push("mkdir -p \"$HOME/.cache/copilot\"".into());
            setup.push(format!(
                "ln -s {} \"$HOME/.cache/copilot/pkg\"",
                cli::sh_quote(&pkg.display().to_string())
            ));
            setup.push("export XDG_CACHE_HOME=\"$HOME/.cache\"".into());
        }
        let wrapper = Wrapper {
            setup,
            extra_args: vec![
                "--usage-output-file".into(),
                "\"$HOME/.proctor/copilot-usage.json\"".into(),
            ],
            captures: vec![(USAGE.into(), "\"$HOME/.proctor/copilot-usage.json\"".into())],
        };
        CliCommand {
            args,
            env,
            wrapper,
            files,
        }
    }

    /// `--resume=ID`, in prompt mode.
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
        c.args.splice(0..0, [format!("--resume={id}")]);
        Ok(c)
    }

    fn parse(&self, stdout: &str, stderr: &str) -> AgentOutput {
        parse(stdout, stderr)
    }
}

/// The file in the agent folder that gives Copilot the trial's MCP servers
/// (`--additional-mcp-config @FILE`).
pub const MCP_CONFIG: &str = "copilot-mcp.json";

/// The suite's MCP servers as Copilot's MCP configuration: each a local (stdio) command,
/// proctor's MCP shim, offering every tool (proctor refuses one outside `allow_tools`).
pub fn mcp_config(servers: &[crate::McpServerAccess]) -> Vec<u8> {
    let servers: serde_json::Map<String, Value> = servers
        .iter()
        .map(|s| {
            let entry = serde_json::json!({
                "type": "local",
                "command": s.command.display().to_string(),
                "args": [],
                "tools": ["*"],
            });
            (s.name.clone(), entry)
        })
        .collect();
    serde_json::to_vec_pretty(&serde_json::json!({ "mcpServers": servers })).unwrap_or_default()
}

/// The `--allow-tool` permission of each MCP tool the agent may call: `SERVER(TOOL)`, or
/// `SERVER` for every tool of a server without `allow_tools`.
pub fn mcp_permissions(servers: &[crate::McpServerAccess]) -> Vec<String> {
    servers
        .iter()
        .flat_map(|s| match &s.allow_tools {
            Some(tools) => tools.iter().map(|t| format!("{}({t})", s.name)).collect(),
            None => vec![s.name.clone()],
        })
        .collect()
}

/// The package `agents/install.sh` unpacked once (`copilot-VERSION/xdg-cache/copilot/pkg`),
/// found beside the installed executable; each trial's private cache links to it, read-only,
/// instead of unpacking ~235 MB again.
pub fn unpacked_package(exe: &std::path::Path) -> Option<std::path::PathBuf> {
    let real = exe.canonicalize().ok()?;
    real.ancestors()
        .map(|a| a.join("xdg-cache/copilot/pkg"))
        .find(|p| p.is_dir())
}

/// Usage from the `--usage-output-file` JSON, summed over models.
pub fn usage_file(text: &str) -> Option<ReportedUsage> {
    let v: Value = serde_json::from_str(text).ok()?;
    let models = v.get("modelMetrics")?.as_object()?;
    let mut total = ReportedUsage::default();
    for m in models.values() {
        let u = m.get("usage").cloned().unwrap_or(Value::Null);
        let input = cli::u64_of(&u, "inputTokens").unwrap_or(0);
        let read = cli::u64_of(&u, "cacheReadTokens").unwrap_or(0);
        let write = cli::u64_of(&u, "cacheWriteTokens").unwrap_or(0);
        total.add(&ReportedUsage {
            input: Some(input.saturating_sub(read + write)),
            output: cli::u64_of(&u, "outputTokens"),
            cache_read: Some(read),
            cache_write: Some(write),
            requests: m.pointer("/requests/count").and_then(Value::as_u64),
        });
    }
    Some(total)
}

/// Reads Copilot's JSON-lines output (and the usage file the wrapper appended).
pub fn parse(stdout: &str, stderr: &str) -> AgentOutput {
    let (rest, captures) = cli::split_captures(stdout);
    let mut out = AgentOutput::default();
    let mut started: HashMap<String, (String, Value)> = HashMap::new();
    for (v, len) in cli::json_lines(&rest) {
        let data = v.get("data").cloned().unwrap_or(Value::Null);
        match cli::str_of(&v, "type") {
            Some("assistant.message") => {
                let content = cli::str_of(&data, "content").unwrap_or_default();
                if !content.is_empty() {
                    out.answer = content.to_string();
                }
            }
            Some("tool.execution_start") => {
                let id = cli::str_of(&data, "toolCallId")
                    .unwrap_or_default()
                    .to_string();
                let tool = cli::str_of(&data, "toolName")
                    .unwrap_or_default()
                    .to_string();
                let args = data.get("arguments").cloned().unwrap_or(Value::Null);
                started.insert(id, (tool, args));
            }
            Some("tool.execution_complete") => {
                let id = cli::str_of(&data, "toolCallId")
                    .unwrap_or_default()
                    .to_string();
                let (tool, input) = started.remove(&id).unwrap_or_default();
                let command = input
                    .get("command")
                    .and_then(Value::as_str)
                    .map(String::from);
                let success = data.get("success").and_then(Value::as_bool);
                let error_code = data.pointer("/error/code").and_then(Value::as_str);
                if success == Some(false) && error_code == Some("denied") {
                    out.denied.push(DeniedCall {
                        id: Some(id),
                        tool,
                        command,
                        input,
                        reason: data
                            .pointer("/error/message")
                            .and_then(Value::as_str)
                            .unwrap_or("denied")
                            .into(),
                    });
                } else {
                    let output = data
                        .pointer("/result/content")
                        .and_then(Value::as_str)
                        .or_else(|| data.pointer("/error/message").and_then(Value::as_str))
                        .map(cli::head);
                    out.tool_calls.push(ToolCall {
                        id: Some(id),
                        tool,
                        command,
                        input,
                        ok: success,
                        exit_code: data
                            .pointer("/shellExecution/exitCode")
                            .and_then(Value::as_i64)
                            .map(|c| c as i32),
                        output,
                    });
                }
            }
            Some("result") => {
                out.session_id = cli::str_of(&v, "sessionId").map(String::from);
                if let Some(code) = v.get("exitCode").and_then(Value::as_i64) {
                    if code != 0 {
                        out.errors.push(format!("copilot: exit code {code}"));
                    }
                }
            }
            Some("session.error") | Some("error") => {
                let msg = cli::str_of(&data, "message")
                    .or_else(|| cli::str_of(&v, "message"))
                    .unwrap_or("error");
                out.errors.push(format!("copilot: {msg}"));
            }
            _ => {}
        }
        out.keep_event(v, len);
    }
    if let Some(text) = captures.get(USAGE) {
        out.usage = usage_file(text);
        if let Ok(v) = serde_json::from_str::<Value>(text) {
            out.transcript
                .push(serde_json::json!({ "type": "proctor.usage_file", "data": v }));
        }
    }
    if out.transcript.is_empty() && !stderr.trim().is_empty() {
        out.errors
            .push(format!("copilot: {}", cli::head(stderr.trim())));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mcp_servers_are_local_commands_and_their_allowed_tools_permitted() {
        let servers = [crate::McpServerAccess {
            name: "notes".into(),
            command: "/run/proctor/shims/proctor-mcp-notes".into(),
            allow_tools: Some(vec!["add_note".into(), "list_notes".into()]),
        }];
        let config: Value = serde_json::from_slice(&mcp_config(&servers)).unwrap();
        assert_eq!(
            config["mcpServers"]["notes"]["command"],
            "/run/proctor/shims/proctor-mcp-notes"
        );
        assert_eq!(config["mcpServers"]["notes"]["type"], "local");
        assert_eq!(
            mcp_permissions(&servers),
            ["notes(add_note)", "notes(list_notes)"]
        );
    }
}
