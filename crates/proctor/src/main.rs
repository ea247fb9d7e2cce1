//! The `proctor` command line: parses arguments, runs one command, and turns its result into an
//! exit status. Data goes to stdout; progress and diagnostics go to stderr.

#[macro_use]
mod out;
mod cli;
mod commands;
mod exit;
mod progress;
mod render;
mod summary;
mod terminal;
mod viewer;

use clap::Parser;

/// Entry points proctor runs inside a trial's sandbox, kept outside clap to start fast. The
/// sandbox's agent init runs `__script-agent` itself when it is the agent's command; `__mcp` is an
/// agent's MCP client's end of a session with a suite's MCP server, and `__mcp-http` the call
/// runner's bridge from such a session to a streamable-HTTP server; `__model-relay`
/// is a trial's endpoint for the model gateway; `__visual` looks at pages in headless Chromium
/// for a trial's `visual` checks; `__acp-client` is an `acp` agent's main process, proctor's
/// client of the agent's protocol.
static BUILTINS: &[(&str, proctor_sandbox::Builtin)] = &[
    ("__shim", |args| proctor_runner::shim::main(args)),
    ("__mcp", |args| proctor_runner::shim::mcp_main(args)),
    ("__mcp-http", |args| {
        proctor_sandbox::mcp_http::bridge_main(args)
    }),
    ("__model-relay", |args| {
        proctor_runner::gateway::relay_main(args)
    }),
    ("__visual", |args| {
        proctor_runner::trial::visual::visual_main(args)
    }),
    ("__script-agent", |args| {
        proctor_agents::script::run_main(args.first().map(String::as_str).unwrap_or_default())
    }),
    ("__acp-client", |args| {
        proctor_agents::acp::client::run_main(args.first().map(String::as_str).unwrap_or_default())
    }),
];

fn main() -> std::process::ExitCode {
    proctor_sandbox::register_builtins(BUILTINS);
    proctor_sandbox::enter_if_requested();
    // Arguments as bytes: an agent's call of an allowed tool may pass any (`std::env::args`
    // would panic on one that is not UTF-8), and the shim must run and log it exactly.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "__shim") {
        return exit_with(proctor_runner::shim::main_os(&args[2..]));
    }
    let text: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if let Some(builtin) = text.get(1).and_then(|name| proctor_sandbox::builtin(name)) {
        return exit_with(builtin(&text[2..]));
    }
    // Like other Unix tools, end quietly when the reader of stdout goes away (`| head`).
    // SAFETY: restoring the default disposition of SIGPIPE before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = cli::Cli::parse();
    let result = commands::dispatch(cli);
    match result {
        Ok(code) => code.into(),
        Err(err) => {
            render::error(&err);
            err.exit_code().into()
        }
    }
}

fn exit_with(code: i32) -> std::process::ExitCode {
    std::process::ExitCode::from(u8::try_from(code.clamp(0, 255)).unwrap_or(255))
}
