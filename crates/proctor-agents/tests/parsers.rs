//! Each adapter's parser on real output recorded from its CLI against proctor's mock model
//! (`tests/recordings/`, written by `PROCTOR_RECORD=1 cargo test --test e2e`). These run
//! everywhere, CLIs installed or not.

use std::path::Path;

use proctor_agents::{
    aider::Aider, claude_code::ClaudeCode, codex::Codex, copilot::Copilot, gemini::Gemini,
    opencode::Opencode, Adapter, AgentOutput, ReportedUsage,
};

fn read(adapter: &dyn Adapter, name: &str) -> AgentOutput {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/recordings");
    let stdout = std::fs::read(dir.join(format!("{name}.stdout"))).unwrap();
    let stderr = std::fs::read(dir.join(format!("{name}.stderr"))).unwrap_or_default();
    adapter.read(&stdout, &stderr)
}

fn usage(input: u64, output: u64, read: Option<u64>, write: Option<u64>) -> ReportedUsage {
    ReportedUsage {
        input: Some(input),
        output: Some(output),
        cache_read: read,
        cache_write: write,
        requests: None,
    }
}

fn assert_hello(out: &AgentOutput, tool: &str, command: &str) {
    assert_eq!(out.answer, "done");
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    assert!(out.denied.is_empty(), "{:?}", out.denied);
    assert_eq!(out.tool_calls.len(), 1, "{:?}", out.tool_calls);
    let c = &out.tool_calls[0];
    assert_eq!(c.tool, tool);
    assert_eq!(c.command.as_deref(), Some(command));
    assert!(!out.transcript.is_empty());
}

fn assert_denied(out: &AgentOutput, tool: &str) {
    assert_eq!(out.answer, "I could not run it.");
    assert!(out.tool_calls.is_empty(), "{:?}", out.tool_calls);
    assert_eq!(out.denied.len(), 1, "{:?}", out.denied);
    let d = &out.denied[0];
    assert_eq!(d.tool, tool);
    assert_eq!(
        d.command.as_deref(),
        Some("python3 -c \"open('denied.txt','w').write('x')\"")
    );
    assert!(!d.reason.is_empty());
}

#[test]
fn claude_code_hello() {
    let out = read(&ClaudeCode::new(), "claude-code-hello");
    assert_hello(&out, "Bash", "echo hi > hello.txt");
    assert_eq!(out.tool_calls[0].ok, Some(true));
    assert_eq!(out.usage, Some(usage(320, 35, Some(2100), Some(50))));
    assert!(out.cost_usd.is_some_and(|c| c > 0.0));
    assert!(out.session_id.is_some());
}

#[test]
fn claude_code_denied() {
    let out = read(&ClaudeCode::new(), "claude-code-denied");
    assert_denied(&out, "Bash");
    assert!(
        out.denied[0].reason.contains("denied"),
        "{}",
        out.denied[0].reason
    );
}

#[test]
fn codex_hello() {
    let out = read(&Codex::new(), "codex-hello");
    assert_hello(&out, "exec_command", "/bin/bash -lc 'echo hi > hello.txt'");
    assert_eq!(out.tool_calls[0].exit_code, Some(0));
    assert_eq!(out.usage, Some(usage(370, 35, Some(2100), Some(0))));
    assert_eq!(out.cost_usd, None);
}

#[test]
fn codex_forbidden_by_rule() {
    // Recorded with `prefix_rule(pattern=["ls"], decision="forbidden")`: the refusal is only on
    // stderr.
    let out = read(&Codex::new(), "codex-forbidden");
    assert_eq!(out.answer, "done");
    assert!(out.tool_calls.is_empty());
    assert_eq!(out.denied.len(), 1);
    assert_eq!(
        out.denied[0].command.as_deref(),
        Some("/bin/bash -lc 'ls -la'")
    );
    assert!(out.denied[0].reason.contains("policy forbids"));
}

#[test]
fn copilot_hello() {
    let out = read(&Copilot::new(), "copilot-hello");
    assert_hello(&out, "bash", "echo hi > hello.txt");
    assert_eq!(out.tool_calls[0].exit_code, Some(0));
    assert_eq!(
        out.usage,
        Some(ReportedUsage {
            requests: Some(2),
            ..usage(320, 35, Some(2100), Some(50))
        })
    );
}

#[test]
fn copilot_denied() {
    let out = read(&Copilot::new(), "copilot-denied");
    assert_denied(&out, "bash");
}

#[test]
fn gemini_hello() {
    let out = read(&Gemini::new(), "gemini-hello");
    assert_hello(&out, "run_shell_command", "echo hi > hello.txt");
    assert_eq!(out.usage, Some(usage(370, 35, Some(2100), None)));
}

#[test]
fn gemini_denied() {
    let out = read(&Gemini::new(), "gemini-denied");
    assert_denied(&out, "run_shell_command");
    assert_eq!(out.denied[0].reason, "Tool execution denied by policy.");
}

#[test]
fn opencode_hello() {
    let out = read(&Opencode::new(), "opencode-hello");
    assert_hello(&out, "bash", "echo hi > hello.txt");
    assert_eq!(out.tool_calls[0].exit_code, Some(0));
    assert_eq!(
        out.usage,
        Some(ReportedUsage {
            requests: Some(2),
            ..usage(320, 35, Some(2100), Some(50))
        })
    );
    // opencode prices an unknown model at 0: unknown, not free.
    assert_eq!(out.cost_usd, None);
}

#[test]
fn opencode_denied() {
    let out = read(&Opencode::new(), "opencode-denied");
    assert_denied(&out, "bash");
}

#[test]
fn aider_hello() {
    let out = read(&Aider::new(), "aider-hello");
    assert_hello(&out, "shell", "echo hi > hello.txt");
    assert_eq!(
        out.usage,
        Some(ReportedUsage {
            requests: Some(1),
            ..usage(1120, 30, None, None)
        })
    );
}

#[test]
fn empty_output_reports_stderr_as_an_error() {
    let out = Gemini::new().read(b"", b"Invalid auth method selected.\n");
    assert_eq!(out.answer, "");
    assert_eq!(out.errors, ["gemini: Invalid auth method selected."]);
    let out = ClaudeCode::new().read(b"", b"boom\n");
    assert_eq!(out.errors, ["claude-code: boom"]);
}

/// A conversation's next turn resumes the session the last turn reported: every parser but
/// aider's (aider has none: its chat history is the session) reads it.
#[test]
fn each_parser_reads_the_session_id_a_next_turn_resumes() {
    let adapters: Vec<(Box<dyn Adapter>, &str)> = vec![
        (Box::new(ClaudeCode::new()), "claude-code-hello"),
        (Box::new(Codex::new()), "codex-hello"),
        (Box::new(Copilot::new()), "copilot-hello"),
        (Box::new(Gemini::new()), "gemini-hello"),
        (Box::new(Opencode::new()), "opencode-hello"),
    ];
    for (adapter, name) in &adapters {
        let id = read(adapter.as_ref(), name).session_id;
        assert!(id.is_some_and(|s| s.len() >= 8), "{name}");
    }
    assert_eq!(read(&Aider::new(), "aider-hello").session_id, None);
}
