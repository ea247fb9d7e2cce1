//! The preflight check against stand-in CLIs: a missing flag and a missing CLI each give an
//! error that names what is missing. (One test function: it changes this process's environment.)

use std::os::unix::fs::PermissionsExt;

use proctor_agents::{
    aider::Aider, claude_code::ClaudeCode, codex::Codex, copilot::Copilot, gemini::Gemini,
    opencode::Opencode, Adapter, AgentError,
};

/// Every flag the Claude Code adapter passes: its launch's and its resume's.
fn claude_flags() -> Vec<&'static str> {
    let spec = &proctor_agents::claude_code::SPEC;
    spec.required
        .iter()
        .chain(spec.resume.iter().flat_map(|r| r.required))
        .copied()
        .collect()
}

fn fake_cli(dir: &std::path::Path, name: &str, version: &str, help: &str) {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = format!(
        "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = --version ] && {{ echo '{version}'; exit 0; }}; done\nprintf '%s\\n' '{help}'\n"
    );
    let path = bin.join(name);
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn preflight_names_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let empty = tempfile::tempdir().unwrap();
    // Only the stand-ins are found: the install folder is ours and PATH holds nothing else.
    std::env::set_var("PROCTOR_AGENTS_DIR", dir.path());
    std::env::set_var("PATH", empty.path());

    every_missing_cli_is_not_installed();
    a_missing_flag_is_named(dir.path());
    the_flags_check_is_remembered_per_executable_file(dir.path());

    // A version that cannot be read is a clear error too.
    fake_cli(
        dir.path(),
        "gemini",
        "unknown",
        &claude_flags().join("\n  "),
    );
    let m = Gemini::new().preflight().unwrap_err().to_string();
    assert!(m.contains("cannot read a version"), "{m}");

    a_launch_without_a_model_endpoint_says_how_to_give_one();
}

/// Every flag of the Claude Code adapter but `missing`, one a line, as a CLI's help lists them.
fn claude_help_without(missing: &str) -> String {
    claude_flags()
        .iter()
        .filter(|f| **f != missing)
        .copied()
        .collect::<Vec<_>>()
        .join("\n  ")
}

/// Every adapter reports a missing CLI as NotInstalled, naming the executable.
fn every_missing_cli_is_not_installed() {
    let adapters: Vec<(Box<dyn Adapter>, &str)> = vec![
        (Box::new(ClaudeCode::new()), "claude"),
        (Box::new(Codex::new()), "codex"),
        (Box::new(Copilot::new()), "copilot"),
        (Box::new(Gemini::new()), "gemini"),
        (Box::new(Opencode::new()), "opencode"),
        (Box::new(Aider::new()), "aider"),
    ];
    for (a, exe) in &adapters {
        match a.preflight() {
            Err(e @ AgentError::NotInstalled { .. }) => {
                let m = e.to_string();
                assert!(m.contains(&format!("`{exe}`")), "{m}");
                assert!(m.contains("agents/install.sh"), "{m}");
            }
            other => panic!("{exe}: {other:?}"),
        }
    }
}

/// A CLI (in the install folder `dir`) whose help lacks one flag the adapter passes: the error
/// names the flag, its launch's or its resume's; with every flag present it passes and reports
/// the version.
fn a_missing_flag_is_named(dir: &std::path::Path) {
    fake_cli(
        dir,
        "claude",
        "2.0.1 (Claude Code)",
        &claude_help_without("--permission-prompts"),
    );
    let e = ClaudeCode::new().preflight().unwrap_err();
    let m = e.to_string();
    assert!(matches!(e, AgentError::Preflight { .. }), "{m}");
    assert!(m.contains("`--permission-prompts`"), "{m}");
    assert!(m.contains("2.0.1"), "{m}");

    // The flag of its resume mechanism (a conversation's next turn) is checked too.
    fake_cli(
        dir,
        "claude",
        "2.1.328 (Claude Code)",
        &claude_help_without("--resume"),
    );
    let m = ClaudeCode::new().preflight().unwrap_err().to_string();
    assert!(m.contains("`--resume`"), "{m}");

    // With every flag present it passes and reports the version.
    let help = claude_flags().join("\n  ");
    fake_cli(dir, "claude", "2.1.328 (Claude Code)", &help);
    let info = ClaudeCode::new().preflight().unwrap().unwrap();
    assert_eq!(info.version, "2.1.328");
    assert_eq!(info.tested_version, "2.1.328");
}

/// The flags check is remembered per executable file: a second preflight of the same file
/// reads no help; a changed file (a reinstall, an edit) is checked again, and fails if it must.
fn the_flags_check_is_remembered_per_executable_file(dir: &std::path::Path) {
    let calls = dir.join("help-calls");
    let counting = |help: &str| {
        let script = format!(
            "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = --version ] && {{ echo '2.1.328 (Claude Code)'; exit 0; }}; done\necho help >> '{}'\nprintf '%s\\n' '{help}'\n",
            calls.display()
        );
        let path = dir.join("bin/claude");
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    let help_calls = || {
        std::fs::read_to_string(&calls)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    };
    let full = claude_flags().join("\n  ");
    counting(&full);
    assert!(ClaudeCode::new().preflight().is_ok());
    assert_eq!(help_calls(), 1);
    assert!(dir.join("preflight/claude-code.json").is_file());
    let info = ClaudeCode::new().preflight().unwrap().unwrap();
    assert_eq!(info.version, "2.1.328", "the version is read every time");
    assert_eq!(
        help_calls(),
        1,
        "the same file's flags are not checked again"
    );
    counting(&claude_help_without("--strict-mcp-config"));
    let m = ClaudeCode::new().preflight().unwrap_err().to_string();
    assert!(m.contains("`--strict-mcp-config`"), "{m}");
    assert_eq!(help_calls(), 2, "a changed file is checked again");
}

/// A launch without a model endpoint says how to give one.
fn a_launch_without_a_model_endpoint_says_how_to_give_one() {
    let ctx = proctor_agents::LaunchContext {
        prompt: "p".into(),
        workspace: "/w".into(),
        model: None,
        proctor: "/p".into(),
        agent_dir: "/a".into(),
    };
    std::env::remove_var("PROCTOR_MODEL_BASE_URL");
    let m = ClaudeCode::new().launch(&ctx).unwrap_err().to_string();
    assert!(m.contains("no model endpoint"), "{m}");
}
