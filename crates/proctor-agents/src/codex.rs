//! Codex CLI (`codex`, npm `@openai/codex`), tested with 0.169.0.
//!
//! **Launch.** `codex exec --json --skip-git-repo-check -C WORKSPACE [-m MODEL] -- PROMPT`
//! with `CODEX_HOME=$HOME/.codex` (set by the wrapper, which copies `config.toml` and
//! `rules/default.rules` there from the agent folder) and the key in `PROCTOR_MODEL_API_KEY`.
//! Without `--ephemeral`, so Codex keeps its session file (in the private HOME) for a
//! conversation's next turn: `codex exec resume --json --skip-git-repo-check [-m MODEL] -- ID
//! REPLY`, in the workspace (`exec resume` has no `--cd`).
//! `config.toml` declares a custom provider: `base_url = ENDPOINT/v1`, `wire_api = "responses"`,
//! `env_key = "PROCTOR_MODEL_API_KEY"`; Codex then sends `POST /v1/responses` (streaming) and
//! offers its shell as `exec_command` with `{"cmd"}` — for models it has no metadata for, such as
//! `mock-model`. Its default model (used when the variant names none) runs in "code mode", where
//! the shell is reached only through a JavaScript `exec` tool that needs Codex's separate
//! `codex-code-mode-host`, which the npm package lacks: on this install that model cannot run a
//! command at all ("tool exec invoked with incompatible payload").
//!
//! **MCP servers.** The suite's servers are `[mcp_servers.NAME]` tables of that `config.toml`
//! (`command` = proctor's MCP shim, `enabled_tools` = the server's `allow_tools`); the fresh
//! `CODEX_HOME` holds no other.
//!
//! **Permissions.** `approval_policy = "never"` and `sandbox_mode = "danger-full-access"`: the
//! trial's sandbox is the boundary (read-only host, private HOME and /tmp, the suite's network).
//! Codex's own sandbox (bubblewrap) cannot start inside it, since the nested user namespace's
//! uid map is refused ("bwrap: setting up uid map: Operation not permitted"), so under
//! `workspace-write` every command outside the allow-list failed. Codex's allow-list syntax is
//! its execpolicy rules: one `prefix_rule(pattern=["NAME"], decision="allow")` per allow-listed
//! command. It cannot say "deny everything else": a command outside the list runs too.
//!
//! **Transcript** (`--json`, JSON lines): `thread.started` (`thread_id`), `turn.started`,
//! `item.started` / `item.completed` with `item.type` `command_execution` (`command`,
//! `aggregated_output`, `exit_code`, `status`), `agent_message` (`text`), `reasoning`,
//! `file_change`, `error` (`message`), then `turn.completed` (`usage`: `input_tokens` including
//! cached, `cached_input_tokens`, `cache_write_input_tokens`, `output_tokens`) or `turn.failed`
//! (`error.message`). A command refused by an execpolicy rule never reaches stdout: Codex logs
//! it on stderr as ``exec_command failed: CreateProcess { message: "Rejected(\"`CMD` rejected:
//! policy forbids commands starting with `X`\")" }``, which is read as a denied call.

use std::path::Path;

use serde_json::Value;

use crate::cli::{self, CliAgent, CliCommand, CliSpec, Wrapper};
use crate::{
    AgentError, AgentOutput, DeniedCall, LaunchContext, NextTurn, ReportedUsage, SessionContext,
    ToolCall, MODEL_API_KEY_ENV,
};

/// What the preflight checks.
pub const SPEC: CliSpec = CliSpec {
    agent: "codex",
    executable: "codex",
    tested_version: "0.169.0",
    help: &["exec", "--help"],
    required: &["--json", "--skip-git-repo-check", "--cd", "--model"],
    shell_permissions: crate::ShellPermissions::RunsEverything,
    resume: Some(cli::ResumeSpec {
        help: &["exec", "resume", "--help"],
        required: &["--json", "--skip-git-repo-check", "--model"],
    }),
};

/// The Codex adapter.
#[derive(Debug, Clone, Default)]
pub struct Codex;

impl Codex {
    /// The adapter.
    pub fn new() -> Codex {
        Codex
    }
}

fn toml_string(s: &str) -> String {
    serde_json::Value::String(s.into()).to_string()
}

/// The `config.toml` for a session.
pub fn config_toml(base: &str, model: Option<&str>) -> String {
    let mut s = String::from("# Written by proctor for one trial.\n");
    if let Some(m) = model {
        s.push_str(&format!("model = {}\n", toml_string(m)));
    }
    s.push_str(&format!(
        "model_provider = \"proctor\"\napproval_policy = \"never\"\nsandbox_mode = \"danger-full-access\"\n\n\
         [model_providers.proctor]\nname = \"proctor\"\nbase_url = {}\nwire_api = \"responses\"\nenv_key = \"PROCTOR_MODEL_API_KEY\"\n",
        toml_string(&format!("{base}/v1"))
    ));
    s
}

/// The `[mcp_servers.NAME]` tables of a session's `config.toml`: each of the suite's MCP
/// servers as a stdio command (proctor's MCP shim), with its `allow_tools` as `enabled_tools`
/// (Codex then offers the model no other tool of it, as `mcp__SERVER__TOOL`).
pub fn mcp_config_toml(servers: &[crate::McpServerAccess]) -> String {
    let mut s = String::new();
    for server in servers {
        s.push_str(&format!(
            "\n[mcp_servers.{}]\ncommand = {}\nargs = []\n",
            toml_string(&server.name),
            toml_string(&server.command.display().to_string())
        ));
        if let Some(tools) = &server.allow_tools {
            let tools: Vec<String> = tools.iter().map(|t| toml_string(t)).collect();
            s.push_str(&format!("enabled_tools = [{}]\n", tools.join(", ")));
        }
    }
    s
}

/// The execpolicy rules expressing the allow-list.
pub fn rules(allow: &[String]) -> String {
    let mut s = String::from("# Written by proctor: the trial's allow-listed commands.\n");
    for a in allow {
        s.push_str(&format!(
            "prefix_rule(pattern=[{}], decision=\"allow\")\n",
            toml_string(a)
        ));
    }
    s
}

impl CliAgent for Codex {
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
        let mut args = vec![
            "exec".to_string(),
            "--json".into(),
            "--skip-git-repo-check".into(),
            "--cd".into(),
            ctx.workspace.display().to_string(),
        ];
        if let Some(model) = &ctx.model {
            args.extend(["--model".into(), model.clone()]);
        }
        args.extend(["--".into(), ctx.prompt.clone()]);
        with_config(ctx, session, &base, args)
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
        // `exec resume` has no `--cd`: the agent starts in the workspace, where the session is.
        let mut args = vec![
            "exec".to_string(),
            "resume".into(),
            "--json".into(),
            "--skip-git-repo-check".into(),
        ];
        if let Some(model) = &ctx.model {
            args.extend(["--model".into(), model.clone()]);
        }
        args.extend(["--".into(), id, ctx.prompt.clone()]);
        Ok(with_config(ctx, session, &base, args))
    }

    fn parse(&self, stdout: &str, stderr: &str) -> AgentOutput {
        parse(stdout, stderr)
    }
}

/// The command with its environment, the wrapper that puts `config.toml` and the rules in
/// `CODEX_HOME`, and those files.
fn with_config(
    ctx: &LaunchContext,
    session: &SessionContext,
    base: &str,
    args: Vec<String>,
) -> CliCommand {
    let env = vec![(MODEL_API_KEY_ENV.into(), cli::api_key(session, "sk-"))];
    let dir = ctx.agent_dir.display().to_string();
    let wrapper = Wrapper {
        setup: vec![
            "mkdir -p \"$HOME/.codex/rules\"".into(),
            format!(
                "cp {} \"$HOME/.codex/config.toml\"",
                cli::sh_quote(&format!("{dir}/config.toml"))
            ),
            format!(
                "cp {} \"$HOME/.codex/rules/default.rules\"",
                cli::sh_quote(&format!("{dir}/default.rules"))
            ),
            "export CODEX_HOME=\"$HOME/.codex\"".into(),
        ],
        ..Wrapper::default()
    };
    let files = vec![
        (
            "config.toml".to_string(),
            (config_toml(base, ctx.model.as_deref()) + &mcp_config_toml(&session.mcp)).into_bytes(),
        ),
        (
            "default.rules".to_string(),
            rules(&session.allow).into_bytes(),
        ),
    ];
    CliCommand {
        args,
        env,
        wrapper,
        files,
    }
}

/// A denial Codex logged on stderr: the command and the reason.
fn stderr_denial(line: &str) -> Option<(String, String)> {
    let at = line.find("Rejected(")?;
    let rest = &line[at..];
    let reason_at = rest.find("rejected:")?;
    let first = rest.find('`')?;
    let second = first + 1 + rest[first + 1..].find('`')?;
    let command = rest[first + 1..second].to_string();
    let reason = rest[reason_at..]
        .trim_end_matches(['}', ')', '"', '\\', ' '])
        .replace("\\\"", "\"")
        .to_string();
    Some((command, reason))
}

/// Reads `codex exec --json` output and the denials on its stderr.
pub fn parse(stdout: &str, stderr: &str) -> AgentOutput {
    let mut out = AgentOutput::default();
    let mut usage = ReportedUsage::default();
    let mut any_usage = false;
    for (v, len) in cli::json_lines(stdout) {
        match cli::str_of(&v, "type") {
            Some("thread.started") => {
                out.session_id = cli::str_of(&v, "thread_id").map(String::from);
            }
            Some("item.completed") => {
                let item = v.get("item").cloned().unwrap_or(Value::Null);
                match cli::str_of(&item, "type") {
                    Some("agent_message") => {
                        out.answer = cli::str_of(&item, "text").unwrap_or_default().into();
                    }
                    Some("command_execution") => {
                        let exit = item
                            .get("exit_code")
                            .and_then(Value::as_i64)
                            .map(|c| c as i32);
                        out.tool_calls.push(ToolCall {
                            id: cli::str_of(&item, "id").map(String::from),
                            tool: "exec_command".into(),
                            command: cli::str_of(&item, "command").map(String::from),
                            input: item.clone(),
                            ok: Some(
                                cli::str_of(&item, "status") == Some("completed")
                                    && exit == Some(0),
                            ),
                            exit_code: exit,
                            output: cli::str_of(&item, "aggregated_output").map(cli::head),
                        });
                    }
                    _ => {}
                }
            }
            Some("turn.completed") => {
                if let Some(u) = v.get("usage") {
                    any_usage = true;
                    let total = cli::u64_of(u, "input_tokens").unwrap_or(0);
                    let cached = cli::u64_of(u, "cached_input_tokens").unwrap_or(0);
                    let write = cli::u64_of(u, "cache_write_input_tokens").unwrap_or(0);
                    usage.add(&ReportedUsage {
                        input: Some(total.saturating_sub(cached + write)),
                        output: cli::u64_of(u, "output_tokens"),
                        cache_read: Some(cached),
                        cache_write: u.get("cache_write_input_tokens").map(|_| write),
                        requests: None,
                    });
                }
            }
            Some("turn.failed") => {
                let msg = v
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("turn failed");
                out.errors.push(format!("codex: {msg}"));
            }
            Some("error") => {
                let msg = cli::str_of(&v, "message").unwrap_or("error");
                out.errors.push(format!("codex: {msg}"));
            }
            _ => {}
        }
        out.keep_event(v, len);
    }
    if any_usage {
        out.usage = Some(usage);
    }
    for line in stderr.lines() {
        if let Some((command, reason)) = stderr_denial(line) {
            out.denied.push(DeniedCall {
                id: None,
                tool: "exec_command".into(),
                command: Some(command),
                input: Value::Null,
                reason,
            });
            out.transcript.push(serde_json::json!({
                "type": "proctor.stderr_denial",
                "line": line,
            }));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mcp_server_is_a_table_of_the_config_with_its_allowed_tools_enabled() {
        let servers = [crate::McpServerAccess {
            name: "notes".into(),
            command: "/run/proctor/shims/proctor-mcp-notes".into(),
            allow_tools: Some(vec!["add_note".into()]),
        }];
        let text = config_toml("http://127.0.0.1:7171", None) + &mcp_config_toml(&servers);
        let config: toml::Table = toml::from_str(&text).unwrap();
        let notes = &config["mcp_servers"]["notes"];
        assert_eq!(
            notes["command"].as_str(),
            Some("/run/proctor/shims/proctor-mcp-notes")
        );
        assert_eq!(notes["enabled_tools"].as_array().unwrap().len(), 1);
        assert_eq!(notes["enabled_tools"][0].as_str(), Some("add_note"));
    }

    #[test]
    fn stderr_denials_are_read() {
        let line = r#"2026-11-29T22:40:46.555284Z ERROR codex_core::tools::router: error=exec_command failed: CreateProcess { message: "Rejected(\"`/bin/bash -lc 'ls -la'` rejected: policy forbids commands starting with `ls`\")" }"#;
        let (cmd, reason) = stderr_denial(line).unwrap();
        assert_eq!(cmd, "/bin/bash -lc 'ls -la'");
        assert_eq!(
            reason,
            "rejected: policy forbids commands starting with `ls`"
        );
    }

    #[test]
    fn config_names_the_provider() {
        let c = config_toml("http://127.0.0.1:9", Some("gpt-5"));
        let v: toml::Value = toml::from_str(&c).unwrap();
        assert_eq!(v["model_provider"].as_str(), Some("proctor"));
        assert_eq!(
            v["model_providers"]["proctor"]["base_url"].as_str(),
            Some("http://127.0.0.1:9/v1")
        );
        assert_eq!(v["model"].as_str(), Some("gpt-5"));
        assert!(
            rules(&["chat".into()]).contains("prefix_rule(pattern=[\"chat\"], decision=\"allow\")")
        );
    }
}
