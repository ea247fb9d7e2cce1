//! aider (`aider`, PyPI `aider-chat`, installed in a venv), tested with 0.86.2.
//!
//! **Launch.** `aider --chat-history-file $HOME/.proctor/aider.chat.md --input-history-file
//! $HOME/.proctor/aider.input.history --analytics-log $HOME/.proctor/aider.analytics.jsonl
//! --model openai/MODEL --message PROMPT --edit-format diff --no-git --no-auto-commits --no-dirty-commits
//! --no-gitignore --map-tokens 0 --no-stream --no-pretty --no-fancy-input --no-analytics
//! --no-check-update --no-show-release-notes --no-show-model-warnings --no-detect-urls` with
//! `OPENAI_API_BASE=ENDPOINT/v1` and `OPENAI_API_KEY` (a dummy): aider (through litellm) sends
//! `POST /v1/chat/completions` with no tools. The history files go to the private `$HOME`, not the
//! workspace, and nothing is committed or added to `.gitignore`. `--no-git` keeps aider's root at
//! the workspace: with git on, aider works from the enclosing repository's root, and a workspace
//! inside another repository would have its commands run outside it.
//!
//! **Shell commands and permissions.** aider has no tools: the model suggests shell commands in
//! fenced blocks and aider asks "Run shell command?". `--yes-always` answers *no* to that
//! question (it requires an explicit yes), so it is not used: the wrapper closes stdin, and every
//! question takes its default, which is yes. aider has no allow-list syntax; the trial's shims
//! and sandbox are the only limit.
//!
//! **Transcript.** aider's console output is wrapped and decorated, so the parser reads the chat
//! history file, which the wrapper prints after the run: `#### ` lines are the user's, `> `
//! lines aider's own notes (`> Running CMD`, `> Tokens: ...`), other lines the model's replies.
//! The answer is the last reply with its fenced shell blocks taken out (they are the tool calls);
//! usage is summed from the analytics log's `message_send` events (`prompt_tokens`,
//! `completion_tokens`, `cost`). aider reports only the prompt total, so `input` includes any
//! cached tokens and the cache categories are unknown (`None`).
//!
//! **Next turn** of a conversation: the same command with `--restore-chat-history` (aider has
//! no session id: the chat-history file in the private HOME is the session), and an analytics
//! log of the turn's own.

use std::path::Path;

use serde_json::Value;

use crate::cli::{self, CliAgent, CliCommand, CliSpec, Wrapper};
use crate::{
    AgentError, AgentOutput, DeniedCall, LaunchContext, NextTurn, ReportedUsage, SessionContext,
    ToolCall,
};

/// What the preflight checks.
pub const SPEC: CliSpec = CliSpec {
    agent: "aider",
    executable: "aider",
    tested_version: "0.86.2",
    help: &["--help"],
    required: &[
        "--message",
        "--model",
        "--edit-format",
        "--no-git",
        "--no-auto-commits",
        "--no-dirty-commits",
        "--no-gitignore",
        "--map-tokens",
        "--no-stream",
        "--no-pretty",
        "--no-fancy-input",
        "--no-analytics",
        "--analytics-log",
        "--chat-history-file",
        "--input-history-file",
        "--no-check-update",
        "--no-show-release-notes",
        "--no-show-model-warnings",
        "--no-detect-urls",
    ],
    shell_permissions: crate::ShellPermissions::RefusesEvery,
    resume: Some(cli::ResumeSpec {
        help: &[],
        required: &["--restore-chat-history"],
    }),
};

/// The model named when the variant names none.
pub const DEFAULT_MODEL: &str = "mock-model";
const HISTORY: &str = "aider-chat";
const ANALYTICS: &str = "aider-analytics";

/// The aider adapter.
#[derive(Debug, Clone, Default)]
pub struct Aider;

impl Aider {
    /// The adapter.
    pub fn new() -> Aider {
        Aider
    }
}

impl CliAgent for Aider {
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
        command_for_turn(ctx, session, &base, 1)
    }

    /// aider has no session id: its chat history file (in the private HOME) is the session,
    /// and `--restore-chat-history` reads it back.
    fn resume(
        &self,
        ctx: &LaunchContext,
        session: &SessionContext,
        base: String,
        _exe: &Path,
        next: &NextTurn,
    ) -> Result<CliCommand, AgentError> {
        let mut c = command_for_turn(ctx, session, &base, next.turn);
        c.args.push("--restore-chat-history".into());
        Ok(c)
    }

    fn parse(&self, stdout: &str, stderr: &str) -> AgentOutput {
        parse(stdout, stderr)
    }
}

/// The command for turn `turn` of a conversation: each turn has its own analytics log (so its
/// usage is its own); the chat history file is the conversation's.
fn command_for_turn(
    ctx: &LaunchContext,
    session: &SessionContext,
    base: &str,
    turn: usize,
) -> CliCommand {
    let analytics = if turn <= 1 {
        "\"$HOME/.proctor/aider.analytics.jsonl\"".to_string()
    } else {
        format!("\"$HOME/.proctor/aider.analytics.turn{turn}.jsonl\"")
    };
    let model = ctx.model.clone().unwrap_or_else(|| DEFAULT_MODEL.into());
    let model = if model.contains('/') {
        model
    } else {
        format!("openai/{model}")
    };
    let mut args = vec![
        "--model".to_string(),
        model,
        "--message".into(),
        ctx.prompt.clone(),
        "--edit-format".into(),
        "diff".into(),
    ];
    for flag in [
        "--no-git",
        "--no-auto-commits",
        "--no-dirty-commits",
        "--no-gitignore",
        "--no-stream",
        "--no-pretty",
        "--no-fancy-input",
        "--no-analytics",
        "--no-check-update",
        "--no-show-release-notes",
        "--no-show-model-warnings",
        "--no-detect-urls",
    ] {
        args.push(flag.into());
    }
    args.extend(["--map-tokens".into(), "0".into()]);
    let env = vec![
        ("OPENAI_API_BASE".into(), format!("{base}/v1")),
        ("OPENAI_API_KEY".into(), cli::api_key(session, "sk-")),
        ("LITELLM_LOCAL_MODEL_COST_MAP".into(), "True".into()),
    ];
    let wrapper = Wrapper {
        setup: vec!["mkdir -p \"$HOME/.proctor\"".into()],
        extra_args: vec![
            "--chat-history-file".into(),
            "\"$HOME/.proctor/aider.chat.md\"".into(),
            "--input-history-file".into(),
            "\"$HOME/.proctor/aider.input.history\"".into(),
            "--analytics-log".into(),
            analytics.clone(),
        ],
        captures: vec![
            (HISTORY.into(), "\"$HOME/.proctor/aider.chat.md\"".into()),
            (ANALYTICS.into(), analytics),
        ],
    };
    CliCommand {
        args,
        env,
        wrapper,
        ..CliCommand::default()
    }
}

/// Takes fenced shell blocks (```bash, ```sh, ```shell, ```console) out of a reply: the prose,
/// and the commands.
pub fn split_shell_blocks(reply: &str) -> (String, Vec<String>) {
    let mut prose = Vec::new();
    let mut commands = Vec::new();
    let mut block: Option<Vec<&str>> = None;
    for line in reply.lines() {
        let t = line.trim();
        match &mut block {
            Some(lines) => {
                if t.starts_with("```") {
                    let cmd = lines.join("\n");
                    if !cmd.trim().is_empty() {
                        commands.push(cmd);
                    }
                    block = None;
                } else {
                    lines.push(line);
                }
            }
            None => {
                let lang = t.strip_prefix("```").map(str::trim);
                if matches!(lang, Some("bash" | "sh" | "shell" | "console" | "zsh")) {
                    block = Some(Vec::new());
                } else {
                    prose.push(line);
                }
            }
        }
    }
    if let Some(lines) = block {
        prose.extend(lines);
    }
    (prose.join("\n").trim().to_string(), commands)
}

/// One piece of the chat history after the last user message.
enum Piece {
    Reply(String),
    Note(String),
}

fn history_pieces(history: &str) -> Vec<Piece> {
    let lines: Vec<&str> = history.lines().collect();
    let start = lines
        .iter()
        .rposition(|l| l.starts_with("#### "))
        .map(|i| i + 1)
        .unwrap_or(0);
    let mut pieces = Vec::new();
    let mut reply: Vec<&str> = Vec::new();
    let flush = |reply: &mut Vec<&str>, pieces: &mut Vec<Piece>| {
        let text = reply.join("\n").trim().to_string();
        if !text.is_empty() {
            pieces.push(Piece::Reply(text));
        }
        reply.clear();
    };
    for line in &lines[start..] {
        if let Some(note) = line.strip_prefix("> ") {
            flush(&mut reply, &mut pieces);
            pieces.push(Piece::Note(note.trim_end().to_string()));
        } else {
            reply.push(line);
        }
    }
    flush(&mut reply, &mut pieces);
    pieces
}

/// Reads aider's output: the chat history and analytics log the wrapper appended, falling back
/// to the console text.
pub fn parse(stdout: &str, stderr: &str) -> AgentOutput {
    let (rest, captures) = cli::split_captures(stdout);
    let mut out = AgentOutput::default();
    for line in rest.lines().chain(stderr.lines()) {
        let l = line.trim();
        if l.contains("litellm.") && l.contains("Error") {
            out.errors.push(format!("aider: {l}"));
        }
    }
    if let Some(history) = captures.get(HISTORY) {
        let pieces = history_pieces(history);
        let mut last_reply = String::new();
        let mut pending: Vec<String> = Vec::new();
        for p in &pieces {
            match p {
                Piece::Reply(r) => {
                    let (prose, commands) = split_shell_blocks(r);
                    out.transcript
                        .push(serde_json::json!({ "type": "reply", "text": r }));
                    pending = commands;
                    last_reply = prose;
                }
                Piece::Note(n) => {
                    out.transcript
                        .push(serde_json::json!({ "type": "note", "text": n }));
                    if let Some(cmd) = n.strip_prefix("Running ") {
                        out.tool_calls.push(ToolCall {
                            id: None,
                            tool: "shell".into(),
                            command: Some(cmd.to_string()),
                            input: Value::Null,
                            ok: None,
                            exit_code: None,
                            output: None,
                        });
                        pending.retain(|c| c.trim() != cmd.trim());
                    } else if n.contains("Run shell command") && n.trim_end().ends_with(": n") {
                        for cmd in pending.drain(..) {
                            out.denied.push(DeniedCall {
                                id: None,
                                tool: "shell".into(),
                                command: Some(cmd),
                                input: Value::Null,
                                reason: "aider's confirmation was answered no".into(),
                            });
                        }
                    }
                }
            }
        }
        out.answer = last_reply;
    } else {
        out.answer = rest.trim().to_string();
        out.transcript
            .push(serde_json::json!({ "type": "console", "text": rest }));
    }
    if let Some(log) = captures.get(ANALYTICS) {
        let mut usage = ReportedUsage::default();
        let mut cost = 0.0;
        let mut sends = 0u64;
        for (v, _) in cli::json_lines(log) {
            if cli::str_of(&v, "event") == Some("message_send") {
                let p = v.get("properties").cloned().unwrap_or(Value::Null);
                sends += 1;
                usage.add(&ReportedUsage {
                    input: cli::u64_of(&p, "prompt_tokens"),
                    output: cli::u64_of(&p, "completion_tokens"),
                    cache_read: None,
                    cache_write: None,
                    requests: None,
                });
                cost += p.get("cost").and_then(Value::as_f64).unwrap_or(0.0);
            }
            out.transcript
                .push(serde_json::json!({ "type": "analytics", "event": v }));
        }
        if sends > 0 {
            usage.requests = Some(sends);
            out.usage = Some(usage);
            out.cost_usd = Some(cost).filter(|c| *c > 0.0);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_blocks_are_split_from_prose() {
        let (prose, cmds) =
            split_shell_blocks("done\n\n```bash\necho hi > hello.txt\n```\n\n```python\nx\n```");
        assert_eq!(prose, "done\n\n\n```python\nx\n```");
        assert_eq!(cmds, ["echo hi > hello.txt"]);
    }
}
