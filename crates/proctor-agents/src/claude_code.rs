//! Claude Code (`claude`, npm `@anthropic-ai/claude-code`), tested with 2.1.328.
//!
//! **Launch.** `claude --print --output-format stream-json --verbose --session-id UUID
//! --permission-mode acceptEdits --permission-prompts none --strict-mcp-config
//! [--model MODEL] [--mcp-config FILE] [--allowedTools Bash(chat:*),mcp__notes__add_note,...]
//! -- PROMPT`, with `ANTHROPIC_BASE_URL` (the endpoint,
//! no `/v1`: it sends `POST /v1/messages?beta=true`, streaming), `ANTHROPIC_API_KEY` (a dummy),
//! `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`, `DISABLE_AUTOUPDATER=1` and, from the wrapper,
//! `CLAUDE_CONFIG_DIR=$HOME/.claude` (fresh: no user settings, plugins, skills or MCP servers;
//! `--strict-mcp-config` also ignores a project's `.mcp.json`). A suite's MCP servers are the
//! only ones: `--mcp-config` names a file in the agent folder listing each as a stdio command
//! (proctor's MCP shim, whose sessions proctor relays and logs), and each tool `allow_tools`
//! permits is allowed as `mcp__SERVER__TOOL` (every tool of a server without it: `mcp__SERVER`).
//! `ENABLE_TOOL_SEARCH=false` then offers the servers' tools to the model from the first turn
//! (with tool search, it would see them only after searching for them).
//!
//! **Permissions.** `acceptEdits` lets file edits in the workspace through (the Edit and Write
//! tools, and shell commands Claude Code classes as file-system edits: `echo x > f`, `touch`,
//! `mkdir`) and read-only commands (`ls`, `cat`); every other shell command needs an allow rule,
//! one `Bash(NAME:*)` per allow-listed command; `--permission-prompts none` denies whatever would
//! prompt. (`dontAsk` was tried: it refused `echo hi > hello.txt` even with `Bash(echo:*)`.)
//!
//! **Transcript** (stream-json, one JSON object a line): `system/init` (session id, tools),
//! `assistant` messages whose `content` has `text` and `tool_use` blocks, `user` messages with
//! `tool_result` blocks (`is_error`), `system/permission_denied` (`tool_name`, `tool_use_id`,
//! `message`) for each refused call, and a closing `result`: `result` (the answer), `is_error`,
//! `usage` (`input_tokens` uncached, `output_tokens`, `cache_read_input_tokens`,
//! `cache_creation_input_tokens`), `total_cost_usd`, `num_turns`, `permission_denials`
//! (`tool_name`, `tool_use_id`, `tool_input`).
//!
//! **Next turn** of a conversation: the same command with `--resume ID` (the session id of
//! `system/init`) in place of `--session-id UUID`.

use std::path::Path;

use serde_json::Value;

use crate::cli::{self, CliAgent, CliCommand, CliSpec, Wrapper};
use crate::{
    AgentError, AgentOutput, DeniedCall, LaunchContext, NextTurn, ReportedUsage, SessionContext,
    ToolCall,
};

/// What the preflight checks.
pub const SPEC: CliSpec = CliSpec {
    agent: "claude-code",
    executable: "claude",
    tested_version: "2.1.328",
    help: &["--help"],
    required: &[
        "--print",
        "--output-format",
        "stream-json",
        "--verbose",
        "--session-id",
        "--permission-mode",
        "acceptEdits",
        "--permission-prompts",
        "--allowedTools",
        "--strict-mcp-config",
        "--mcp-config",
        "--model",
    ],
    shell_permissions: crate::ShellPermissions::RefusesOutsideAllowList,
    resume: Some(cli::ResumeSpec {
        help: &[],
        required: &["--resume"],
    }),
};

/// The Claude Code adapter.
#[derive(Debug, Clone, Default)]
pub struct ClaudeCode;

impl ClaudeCode {
    /// The adapter.
    pub fn new() -> ClaudeCode {
        ClaudeCode
    }
}

/// `Bash(NAME:*)` for each allow-listed command.
pub fn allow_rules(allow: &[String]) -> Vec<String> {
    allow.iter().map(|a| format!("Bash({a}:*)")).collect()
}

/// The file in the agent folder that configures the trial's MCP servers (`--mcp-config`).
pub const MCP_CONFIG: &str = "mcp.json";

/// The `--mcp-config` of a trial: each server as a stdio command, proctor's MCP shim.
pub fn mcp_config(servers: &[crate::McpServerAccess]) -> Vec<u8> {
    let servers: serde_json::Map<String, Value> = servers
        .iter()
        .map(|s| {
            let entry = serde_json::json!({
                "type": "stdio",
                "command": s.command.display().to_string(),
                "args": [],
            });
            (s.name.clone(), entry)
        })
        .collect();
    serde_json::to_vec_pretty(&serde_json::json!({ "mcpServers": servers })).unwrap_or_default()
}

/// The permission rule of each tool the agent may call: `mcp__SERVER__TOOL`, or `mcp__SERVER`
/// for every tool of a server without `allow_tools`.
pub fn mcp_rules(servers: &[crate::McpServerAccess]) -> Vec<String> {
    servers
        .iter()
        .flat_map(|s| match &s.allow_tools {
            Some(tools) => tools
                .iter()
                .map(|t| format!("mcp__{}__{t}", s.name))
                .collect(),
            None => vec![format!("mcp__{}", s.name)],
        })
        .collect()
}

impl CliAgent for ClaudeCode {
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
        command_with(ctx, session, base, ["--session-id".into(), cli::uuid_v4()])
    }

    fn resume(
        &self,
        ctx: &LaunchContext,
        session: &SessionContext,
        base: String,
        _exe: &Path,
        next: &NextTurn,
    ) -> Result<CliCommand, AgentError> {
        let id = cli::resumed_id(SPEC.agent, next)?;
        Ok(command_with(ctx, session, base, ["--resume".into(), id]))
    }

    fn parse(&self, stdout: &str, stderr: &str) -> AgentOutput {
        parse(stdout, stderr)
    }
}

/// The command line and environment, with `session_flag` naming the session: a new one
/// (`--session-id UUID`) or the one resumed (`--resume ID`).
fn command_with(
    ctx: &LaunchContext,
    session: &SessionContext,
    base: String,
    session_flag: [String; 2],
) -> CliCommand {
    let mut args = vec![
        "--print".to_string(),
        "--output-format".into(),
        "stream-json".into(),
        "--verbose".into(),
    ];
    args.extend(session_flag);
    args.extend([
        "--permission-mode".into(),
        "acceptEdits".into(),
        "--permission-prompts".into(),
        "none".into(),
        "--strict-mcp-config".into(),
    ]);
    if let Some(model) = &ctx.model {
        args.extend(["--model".into(), model.clone()]);
    }
    let mut files = Vec::new();
    if !session.mcp.is_empty() {
        let config = ctx.agent_dir.join(MCP_CONFIG);
        args.extend(["--mcp-config".into(), config.display().to_string()]);
        files.push((MCP_CONFIG.to_string(), mcp_config(&session.mcp)));
    }
    let mut rules = allow_rules(&session.allow);
    rules.extend(mcp_rules(&session.mcp));
    if !rules.is_empty() {
        args.extend(["--allowedTools".into(), rules.join(",")]);
    }
    // The prompt last, after `--`, so a prompt starting with `-` is not read as a flag.
    args.extend(["--".into(), ctx.prompt.clone()]);
    let mut env = vec![
        ("ANTHROPIC_BASE_URL".into(), base),
        ("ANTHROPIC_API_KEY".into(), cli::api_key(session, "sk-ant-")),
        (
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(),
            "1".into(),
        ),
        ("DISABLE_AUTOUPDATER".into(), "1".into()),
    ];
    // With tool search, MCP tools reach the model only after it searches for them; the
    // suite's servers are what is evaluated, so their tools are offered from the start.
    if !session.mcp.is_empty() {
        env.push(("ENABLE_TOOL_SEARCH".into(), "false".into()));
    }
    let wrapper = Wrapper {
        setup: vec![
            "mkdir -p \"$HOME/.claude\"".into(),
            "export CLAUDE_CONFIG_DIR=\"$HOME/.claude\"".into(),
        ],
        ..Wrapper::default()
    };
    CliCommand {
        args,
        env,
        wrapper,
        files,
    }
}

fn tool_result_text(block: &Value) -> Option<String> {
    match block.get("content") {
        Some(Value::String(s)) => Some(cli::head(s)),
        Some(Value::Array(parts)) => Some(cli::head(
            &parts
                .iter()
                .filter_map(|p| cli::str_of(p, "text"))
                .collect::<Vec<_>>()
                .join("\n"),
        )),
        _ => None,
    }
}

/// Reads Claude Code's stream-json output.
pub fn parse(stdout: &str, stderr: &str) -> AgentOutput {
    let mut out = AgentOutput::default();
    let mut last_text = String::new();
    let mut result_text: Option<String> = None;
    for (v, len) in cli::json_lines(stdout) {
        match (cli::str_of(&v, "type"), cli::str_of(&v, "subtype")) {
            (Some("system"), Some("init")) => {
                out.session_id = cli::str_of(&v, "session_id").map(String::from);
            }
            (Some("system"), Some("permission_denied")) => on_permission_denied(&mut out, &v),
            (Some("assistant"), _) => {
                let text = on_assistant(&mut out, &v);
                if !text.is_empty() {
                    last_text = text;
                }
            }
            (Some("user"), _) => on_user(&mut out, &v),
            (Some("result"), _) => result_text = on_result(&mut out, &v),
            _ => {}
        }
        out.keep_event(v, len);
    }
    out.answer = result_text.unwrap_or(last_text);
    if out.transcript.is_empty() && !stderr.trim().is_empty() {
        out.errors
            .push(format!("claude-code: {}", cli::head(stderr.trim())));
    }
    out
}

/// The content blocks of an `assistant` or `user` message.
fn content_blocks(v: &Value) -> Vec<Value> {
    v.pointer("/message/content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// A `system/permission_denied` line: the refused call moves from the tool calls to the denied
/// ones.
fn on_permission_denied(out: &mut AgentOutput, v: &Value) {
    let id = cli::str_of(v, "tool_use_id").map(String::from);
    let input = id
        .as_ref()
        .and_then(|id| out.tool_calls.iter().find(|c| c.id.as_ref() == Some(id)))
        .map(|c| c.input.clone())
        .unwrap_or(Value::Null);
    out.tool_calls
        .retain(|c| id.is_none() || c.id.as_ref() != id.as_ref());
    out.denied.push(DeniedCall {
        id,
        tool: cli::str_of(v, "tool_name").unwrap_or_default().into(),
        command: input
            .get("command")
            .and_then(Value::as_str)
            .map(String::from),
        input,
        reason: cli::str_of(v, "message").unwrap_or_default().into(),
    });
}

/// An `assistant` message: records its tool calls; gives its text.
fn on_assistant(out: &mut AgentOutput, v: &Value) -> String {
    let mut text = String::new();
    for b in &content_blocks(v) {
        match cli::str_of(b, "type") {
            Some("text") => text.push_str(cli::str_of(b, "text").unwrap_or_default()),
            Some("tool_use") => {
                let input = b.get("input").cloned().unwrap_or(Value::Null);
                out.tool_calls.push(ToolCall {
                    id: cli::str_of(b, "id").map(String::from),
                    tool: cli::str_of(b, "name").unwrap_or_default().into(),
                    command: input
                        .get("command")
                        .and_then(Value::as_str)
                        .map(String::from),
                    input,
                    ..ToolCall::default()
                });
            }
            _ => {}
        }
    }
    text
}

/// A `user` message: its `tool_result` blocks complete the tool calls they answer.
fn on_user(out: &mut AgentOutput, v: &Value) {
    let blocks = content_blocks(v);
    for b in blocks
        .iter()
        .filter(|b| cli::str_of(b, "type") == Some("tool_result"))
    {
        let id = cli::str_of(b, "tool_use_id");
        if let Some(call) = out
            .tool_calls
            .iter_mut()
            .find(|c| c.id.as_deref() == id && id.is_some())
        {
            call.ok = Some(!b.get("is_error").and_then(Value::as_bool).unwrap_or(false));
            call.output = tool_result_text(b);
        }
    }
}

/// The closing `result`: an error, the usage, the cost, the session and the permission denials
/// not reported before; gives the answer.
fn on_result(out: &mut AgentOutput, v: &Value) -> Option<String> {
    let result_text = cli::str_of(v, "result").map(String::from);
    if v.get("is_error").and_then(Value::as_bool) == Some(true) {
        let what = result_text
            .clone()
            .or_else(|| cli::str_of(v, "subtype").map(String::from))
            .unwrap_or_else(|| "error".into());
        out.errors.push(format!("claude-code result: {what}"));
    }
    if let Some(u) = v.get("usage") {
        out.usage = Some(ReportedUsage {
            input: cli::u64_of(u, "input_tokens"),
            output: cli::u64_of(u, "output_tokens"),
            cache_read: cli::u64_of(u, "cache_read_input_tokens"),
            cache_write: cli::u64_of(u, "cache_creation_input_tokens"),
            requests: None,
        });
    }
    out.cost_usd = v.get("total_cost_usd").and_then(Value::as_f64);
    if out.session_id.is_none() {
        out.session_id = cli::str_of(v, "session_id").map(String::from);
    }
    for d in v
        .get("permission_denials")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let id = cli::str_of(d, "tool_use_id").map(String::from);
        if id.is_some() && out.denied.iter().any(|x| x.id == id) {
            continue;
        }
        out.tool_calls
            .retain(|c| id.is_none() || c.id.as_ref() != id.as_ref());
        let input = d.get("tool_input").cloned().unwrap_or(Value::Null);
        out.denied.push(DeniedCall {
            id,
            tool: cli::str_of(d, "tool_name").unwrap_or_default().into(),
            command: input
                .get("command")
                .and_then(Value::as_str)
                .map(String::from),
            input,
            reason: "listed in permission_denials".into(),
        });
    }
    result_text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::McpServerAccess;

    #[test]
    fn the_mcp_config_lists_each_server_as_its_shim_and_permits_its_allowed_tools() {
        let servers = [
            McpServerAccess {
                name: "notes".into(),
                command: "/run/proctor/shims/proctor-mcp-notes".into(),
                allow_tools: Some(vec!["add_note".into(), "list_notes".into()]),
            },
            McpServerAccess {
                name: "files".into(),
                command: "/run/proctor/shims/proctor-mcp-files".into(),
                allow_tools: None,
            },
        ];
        let config: Value = serde_json::from_slice(&mcp_config(&servers)).unwrap();
        assert_eq!(
            config["mcpServers"]["notes"],
            serde_json::json!({"type": "stdio", "command": "/run/proctor/shims/proctor-mcp-notes", "args": []})
        );
        assert_eq!(config["mcpServers"].as_object().unwrap().len(), 2);
        assert_eq!(
            mcp_rules(&servers),
            [
                "mcp__notes__add_note",
                "mcp__notes__list_notes",
                "mcp__files"
            ]
        );
    }
}
