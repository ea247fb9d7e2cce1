//! The `proctor` command line: parses arguments, runs one command, and turns its result into an
//! exit status. Data goes to stdout; progress and diagnostics go to stderr.

mod cli;
mod commands;
mod exit;
mod render;
mod table;

use clap::Parser;

fn main() -> std::process::ExitCode {
    // Entry points proctor runs inside a trial's sandbox; kept outside clap to start fast.
    proctor_sandbox::enter_if_requested();
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("__shim") => return exit_with(proctor_runner::shim::main(&args[2..])),
        Some("__script-agent") => {
            let file = args.get(2).map(String::as_str).unwrap_or_default();
            return exit_with(proctor_agents::script::run_main(file));
        }
        _ => {}
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
