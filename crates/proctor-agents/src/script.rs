//! The `script` agent: proctor's own scripted agent, for oracles, null agents, tests and dry runs.
//!
//! It runs inside the same sandbox a real agent gets, as `proctor __script-agent FILE`: each step
//! runs with `sh -c` in the workspace (so interface calls go through the same shims; an `mcp`
//! step is a tool call through the MCP server's shim, [`crate::mcp_client`]), and it
//! prints its transcript as JSON lines on stdout, ending with the answer.

use std::io::Write;
use std::process::{Command, Stdio};

use proctor_suite::script::{Script, Step};
use serde::{Deserialize, Serialize};

use crate::{Adapter, AgentError, AgentOutput, Launch, LaunchContext};

/// Bytes of each step's stdout and stderr kept in the transcript.
const STEP_OUTPUT_LIMIT: usize = 64 * 1024;

/// The script as handed to `proctor __script-agent`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScriptPlan {
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// The fixed answer, if any.
    pub answer: Option<String>,
    /// The step whose stdout is the answer (1-based), if any.
    pub answer_from_step: Option<usize>,
    /// The exit status to end with.
    pub exit_code: i32,
    /// The prompt, kept in the transcript for the reader.
    pub prompt: String,
}

/// Launches a scripted agent.
#[derive(Debug, Clone)]
pub struct ScriptAdapter {
    script: Script,
}

impl ScriptAdapter {
    /// An adapter running this script.
    pub fn new(script: Script) -> ScriptAdapter {
        ScriptAdapter { script }
    }
}

impl ScriptAdapter {
    /// The launch of the script's turn `n` (from 1), in a file of its own; `None` past its last.
    fn launch_turn(&self, ctx: &LaunchContext, n: usize) -> Result<Option<Launch>, AgentError> {
        let Some(turn) = self.script.turn(n) else {
            return Ok(None);
        };
        let plan = ScriptPlan {
            steps: turn.steps,
            answer: turn.answer,
            answer_from_step: turn.answer_from_step.as_ref().map(|s| *s.get_ref()),
            exit_code: turn.exit_code,
            prompt: ctx.prompt.clone(),
        };
        let bytes = serde_json::to_vec(&plan).map_err(|e| AgentError::Misconfigured {
            variant: String::new(),
            message: e.to_string(),
        })?;
        let file = if n == 1 {
            "script.json".to_string()
        } else {
            format!("script-turn-{n}.json")
        };
        Ok(Some(Launch {
            argv: vec![
                ctx.proctor.display().to_string(),
                "__script-agent".into(),
                ctx.agent_dir.join(&file).display().to_string(),
            ],
            env: Vec::new(),
            files: vec![(file, bytes)],
        }))
    }
}

impl Adapter for ScriptAdapter {
    fn launch(&self, ctx: &LaunchContext) -> Result<Launch, AgentError> {
        Ok(self.launch_turn(ctx, 1)?.unwrap_or_default())
    }

    /// The script's next `[[turns]]` entry; a script with no more turns cannot go on.
    fn continue_session(
        &self,
        ctx: &LaunchContext,
        _session: &crate::SessionContext,
        next: &crate::NextTurn,
    ) -> Result<Launch, AgentError> {
        self.launch_turn(ctx, next.turn)?
            .ok_or(AgentError::NoConversation)
    }

    fn read(&self, stdout: &[u8], _stderr: &[u8]) -> AgentOutput {
        let mut out = AgentOutput::default();
        for line in String::from_utf8_lossy(stdout).lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if v["type"] == "answer" {
                out.answer = v["text"].as_str().unwrap_or_default().to_string();
            }
            out.keep_event(v, line.len());
        }
        out
    }
}

/// Runs one step as `sh -c` would, and collects its output. A simple command (words of plain
/// characters, nothing the shell would expand, redirect or interpret, not a shell builtin) is
/// executed directly, as `sh -c` would end up doing, without the shell's own start-up.
fn run_step(run: &str) -> std::io::Result<std::process::Output> {
    if let Some(argv) = simple_command(run) {
        // A program that could not be started at all (not found, not executable, a script
        // without `#!`) is left to the shell, which reports or runs it in its own way.
        let program = on_path(argv[0]).unwrap_or_else(|| argv[0].into());
        if let Ok(out) = Command::new(program)
            .args(&argv[1..])
            .stdin(Stdio::null())
            .output()
        {
            return Ok(out);
        }
    }
    Command::new("sh")
        .arg("-c")
        .arg(run)
        .stdin(Stdio::null())
        .output()
}

/// Where `PATH` finds `program` (a name without `/`) as the shell's search would: the first
/// regular file of that name its user may execute. Found here, the program is started with one
/// `execve` instead of one per folder of `PATH` before its own (each of which costs the kernel
/// an address space made and dropped).
fn on_path(program: &str) -> Option<std::path::PathBuf> {
    on_path_in(program, &std::env::var_os("PATH")?)
}

/// [`on_path`] with `path` for `PATH`.
fn on_path_in(program: &str, path: &std::ffi::OsStr) -> Option<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    if program.contains('/') {
        return None;
    }
    path.as_bytes()
        .split(|&b| b == b':')
        .map(|dir| {
            // An empty entry is the current folder, as for the shell.
            let dir = if dir.is_empty() { b".".as_slice() } else { dir };
            std::path::Path::new(std::ffi::OsStr::from_bytes(dir)).join(program)
        })
        .find(|candidate| {
            std::fs::metadata(candidate).is_ok_and(|m| m.is_file())
                && rustix::fs::access(candidate.as_path(), rustix::fs::Access::EXEC_OK).is_ok()
        })
}

/// The words of `run` when the shell would execute it as they are: plain characters only
/// (no quote, expansion, glob, redirection, separator or comment), no variable assignment in
/// front, and not a builtin of the shell (whose behaviour can differ from the program of the
/// same name) but `true` and `false` without arguments.
fn simple_command(run: &str) -> Option<Vec<&str>> {
    const BUILTINS: &[&str] = &[
        ".", ":", "alias", "bg", "break", "cd", "command", "continue", "echo", "eval", "exec",
        "exit", "export", "fc", "fg", "getopts", "hash", "jobs", "kill", "local", "printf", "pwd",
        "read", "readonly", "return", "set", "shift", "test", "times", "trap", "type", "ulimit",
        "umask", "unalias", "unset", "wait",
    ];
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./,:+@%=".contains(c);
    if !run.chars().all(|c| plain(c) || c == ' ' || c == '\t') {
        return None;
    }
    let words: Vec<&str> = run.split([' ', '\t']).filter(|w| !w.is_empty()).collect();
    let first = *words.first()?;
    let no_args_builtin = matches!(first, "true" | "false") && words.len() == 1;
    if first.contains('=')
        || (BUILTINS.contains(&first) || matches!(first, "true" | "false")) && !no_args_builtin
    {
        return None;
    }
    Some(words)
}

fn clip(bytes: &[u8]) -> String {
    let end = bytes.len().min(STEP_OUTPUT_LIMIT);
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// The body of `proctor __script-agent FILE`: runs the steps, prints the transcript, and returns
/// the script's exit status.
pub fn run_main(path: &str) -> i32 {
    let plan: ScriptPlan = match std::fs::read(path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(p) => p,
        Err(e) => {
            eprintln!("proctor script agent: cannot read {path}: {e}");
            return 125;
        }
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let emit = |out: &mut dyn Write, v: serde_json::Value| {
        let _ = writeln!(out, "{v}");
        let _ = out.flush();
    };
    emit(
        &mut out,
        serde_json::json!({ "type": "prompt", "text": plan.prompt }),
    );
    let mut outputs = Vec::new();
    for (i, step) in plan.steps.iter().enumerate() {
        if let Some(call) = &step.mcp {
            let o = crate::mcp_client::call_tool(call);
            emit(
                &mut out,
                serde_json::json!({
                    "type": "step", "step": i + 1, "mcp": call, "exit": o.exit,
                    "stdout": clip(o.stdout.as_bytes()), "stderr": clip(o.stderr.as_bytes()),
                }),
            );
            outputs.push(o.stdout.into_bytes());
            continue;
        }
        let result = run_step(&step.run);
        let (exit, so, se) = match result {
            Ok(o) => (o.status.code(), o.stdout, o.stderr),
            Err(e) => (None, Vec::new(), e.to_string().into_bytes()),
        };
        emit(
            &mut out,
            serde_json::json!({
                "type": "step", "step": i + 1, "run": step.run, "exit": exit,
                "stdout": clip(&so), "stderr": clip(&se),
            }),
        );
        outputs.push(so);
    }
    let answer = match (plan.answer_from_step, &plan.answer) {
        (Some(n), _) => outputs
            .get(n.saturating_sub(1))
            .map(|o| String::from_utf8_lossy(o).trim_end().to_string())
            .unwrap_or_default(),
        (None, Some(a)) => a.clone(),
        (None, None) => String::new(),
    };
    emit(
        &mut out,
        serde_json::json!({ "type": "answer", "text": answer }),
    );
    plan.exit_code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_is_found_on_path_as_the_shell_finds_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        for d in [&a, &b] {
            std::fs::create_dir_all(d).unwrap();
        }
        // Skipped: a folder of the name, then a file no one may execute.
        std::fs::create_dir_all(a.join("tool")).unwrap();
        std::fs::write(b.join("tool"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(b.join("tool"), std::fs::Permissions::from_mode(0o644)).unwrap();
        let c = dir.path().join("c");
        std::fs::create_dir_all(&c).unwrap();
        std::fs::write(c.join("tool"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(c.join("tool"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = std::env::join_paths([&a, &b, &c]).unwrap();
        assert_eq!(on_path_in("tool", &path), Some(c.join("tool")));
        assert_eq!(on_path_in("absent", &path), None);
        assert_eq!(
            on_path_in("./tool", &path),
            None,
            "a name with a slash is not searched"
        );
    }

    #[test]
    fn only_what_the_shell_would_execute_as_it_is_skips_the_shell() {
        assert_eq!(simple_command("true"), Some(vec!["true"]));
        assert_eq!(
            simple_command("python3  solve.py --out=a.txt"),
            Some(vec!["python3", "solve.py", "--out=a.txt"])
        );
        for shell in [
            "",
            "echo hi",
            "true --help",
            "cd /tmp",
            "exit 3",
            "X=1 env",
            "ls *.py",
            "cat a > b",
            "a; b",
            "a && b",
            "echo $HOME",
            "ls ~",
            "printf 'x'",
            "run # comment",
            "a\nb",
            "cmd `x`",
        ] {
            assert_eq!(simple_command(shell), None, "{shell:?} needs the shell");
        }
    }

    #[test]
    fn a_step_gives_the_same_status_and_output_either_way() {
        for (direct, shell) in [("true", "exec true"), ("false", "exec false")] {
            let a = run_step(direct).unwrap();
            let b = run_step(shell).unwrap();
            assert_eq!(a.status.code(), b.status.code(), "{direct}");
        }
        let listed = run_step("ls -d /").unwrap();
        assert_eq!(listed.stdout, b"/\n");
        // Not found: the shell's own message and status, as before.
        let missing = run_step("no-such-program-here").unwrap();
        assert_eq!(missing.status.code(), Some(127));
        assert!(String::from_utf8_lossy(&missing.stderr).contains("not found"));
    }
}
