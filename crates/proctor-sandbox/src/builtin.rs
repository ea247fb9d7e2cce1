//! Programs built into the sandbox's own executable, started without executing anything.
//!
//! The sandbox init is a clone of the executable that runs the sandbox (`init_exe`). When the
//! agent's command is that same executable with a registered builtin's name as its first
//! argument (`proctor __script-agent FILE`), executing it would load the whole program again only
//! to run a function this process already has, and forking a child for it would add a process
//! to start, run and reap per trial. The agent init A (PID 1 of the agent's PID namespace) runs
//! the function itself instead, after giving itself exactly what `execve` would have: a new
//! session, default signals, the standard descriptors, the working directory and the command's
//! environment, and nothing else (A holds no capabilities by then). The result is the same
//! program, started sooner. Differences visible from inside: the agent is PID 1 of its
//! namespace (a signal reaches it from inside the namespace only through a handler; its orphans
//! are reaped when it ends), and its `/proc/PID/cmdline` is the init's, not the command's.

use std::ffi::CString;
use std::os::fd::RawFd;
use std::os::unix::fs::MetadataExt;
use std::sync::OnceLock;

use crate::sys;

/// A builtin program: called with the arguments after its name; returns the exit status.
pub type Builtin = fn(&[String]) -> i32;

static BUILTINS: OnceLock<&'static [(&'static str, Builtin)]> = OnceLock::new();

/// Registers the builtin programs of this executable (once; later calls are ignored). Call it in
/// `main` before [`crate::enter_if_requested`], and dispatch `argv[1]` to the same table, so a
/// builtin behaves the same whether it was executed or started in-process.
pub fn register_builtins(table: &'static [(&'static str, Builtin)]) {
    let _ = BUILTINS.set(table);
}

/// The registered builtin called `name`.
pub fn builtin(name: &str) -> Option<Builtin> {
    BUILTINS
        .get()?
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, f)| *f)
}

/// When `argv` runs this very executable with a builtin's name as `argv[1]`: the builtin and its
/// arguments. `argv[0]` must name (in this process's view) the file `/proc/self/exe` is.
pub(crate) fn as_builtin(argv: &[String]) -> Option<(Builtin, Vec<String>)> {
    let f = builtin(argv.get(1)?)?;
    let program = std::fs::metadata(argv.first()?).ok()?;
    let me = std::fs::metadata("/proc/self/exe").ok()?;
    (program.dev() == me.dev() && program.ino() == me.ino()).then(|| (f, argv[2..].to_vec()))
}

/// What a builtin gets in place of an `execve`: its arguments, environment, working directory
/// and standard descriptors.
pub(crate) struct Start<'a> {
    /// The arguments after the builtin's name.
    pub(crate) args: Vec<String>,
    /// The whole environment.
    pub(crate) env: &'a [(String, String)],
    /// The working directory.
    pub(crate) cwd: &'a std::path::Path,
    /// stdin, stdout and stderr.
    pub(crate) stdio: [RawFd; 3],
}

/// The start, checked and turned into C strings before anything changes.
struct Prepared {
    cwd: CString,
    env: Vec<(CString, CString)>,
}

fn prepare(start: &Start<'_>) -> Result<Prepared, String> {
    if !start.cwd.is_dir() {
        return Err(format!(
            "cannot enter its working directory {}",
            start.cwd.display()
        ));
    }
    let cwd = sys::cstring(start.cwd).map_err(|e| e.to_string())?;
    let env = start
        .env
        .iter()
        .map(|(k, v)| Ok((sys::cstring(k)?, sys::cstring(v)?)))
        .collect::<std::io::Result<_>>()
        .map_err(|e| e.to_string())?;
    Ok(Prepared { cwd, env })
}

/// Gives this process what `execve` would have: its own session, default signal handling and
/// an empty signal mask, the standard descriptors, the working directory and the environment
/// only.
fn enter(start: &Start<'_>, prepared: &Prepared) -> Result<(), String> {
    sys::reset_signals();
    // SAFETY: the caller is single-threaded, so it may call anything; every pointer is to a C
    // string that outlives the call.
    unsafe {
        libc::setsid();
        for (from, to) in start.stdio.into_iter().zip(0..) {
            if libc::dup2(from, to) < 0 {
                return Err(format!(
                    "cannot set up its standard descriptor {to}: {}",
                    std::io::Error::last_os_error()
                ));
            }
        }
        if libc::chdir(prepared.cwd.as_ptr()) < 0 {
            return Err(format!(
                "cannot enter its working directory {}: {}",
                start.cwd.display(),
                std::io::Error::last_os_error()
            ));
        }
        libc::clearenv();
        for (k, v) in &prepared.env {
            libc::setenv(k.as_ptr(), v.as_ptr(), 1);
        }
    }
    Ok(())
}

/// What the agent init sends when a builtin it runs itself ends by its timeout's SIGTERM: the
/// control socket and the report's bytes, made before the builtin starts (the signal handler
/// only writes them).
static ON_TERM: OnceLock<(RawFd, Vec<u8>)> = OnceLock::new();

/// The agent init's SIGTERM while it runs a builtin itself: every other process of its PID
/// namespace gets SIGTERM, the report made beforehand goes to the control socket, and the
/// process ends, taking what is left of the namespace with it. Only async-signal-safe calls.
extern "C" fn on_term(_: libc::c_int) {
    // SAFETY: kill, send and _exit are async-signal-safe; the report's bytes were written before
    // the handler was installed and are never changed.
    unsafe {
        libc::kill(-1, libc::SIGTERM);
        if let Some((fd, report)) = ON_TERM.get() {
            let _ = libc::send(
                *fd,
                report.as_ptr().cast(),
                report.len(),
                libc::MSG_NOSIGNAL,
            );
        }
        libc::_exit(0);
    }
}

/// Runs `f` in this process, the agent init A (PID 1 of the agent's own PID namespace), set up
/// as if executed (see [`enter`]): the builtin is the agent, one process fewer to fork, run and
/// reap per trial. The caller must be single-threaded and hold no capabilities.
///
/// What differs from an agent A starts: a SIGTERM from outside (the timeout) reaches PID 1 only
/// through a handler, so that handler passes the signal on to every other process of the
/// namespace (as A does for an agent it started), sends `on_term_report` (the report of an end
/// by SIGTERM) on the control socket `ctl`, and ends the process; and the agent's orphans are
/// reaped only when it ends (when the kernel ends the whole namespace with it).
///
/// Returns the builtin's exit status.
pub(crate) fn run_as_init(
    f: Builtin,
    start: Start<'_>,
    ctl: RawFd,
    on_term_report: Vec<u8>,
) -> Result<i32, String> {
    let prepared = prepare(&start)?;
    if ON_TERM.set((ctl, on_term_report)).is_err() {
        return Err("a builtin already ran in this agent init".to_owned());
    }
    enter(&start, &prepared)?;
    let handler = nix::sys::signal::SigHandler::Handler(on_term);
    let action = nix::sys::signal::SigAction::new(
        handler,
        nix::sys::signal::SaFlags::SA_RESTART,
        nix::sys::signal::SigSet::all(),
    );
    // SAFETY: the handler only makes async-signal-safe calls.
    unsafe { nix::sys::signal::sigaction(nix::sys::signal::Signal::SIGTERM, &action) }
        .map_err(|e| format!("install the SIGTERM handler: {e}"))?;
    let code = f(&start.args);
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(args: &[String]) -> i32 {
        args.len() as i32
    }

    #[test]
    fn only_this_executable_with_a_registered_name_is_a_builtin() {
        register_builtins(&[("__answer", answer)]);
        let me = std::env::current_exe().unwrap().display().to_string();
        let argv = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();

        let (f, args) = as_builtin(&argv(&[&me, "__answer", "a", "b"])).expect("a builtin");
        assert_eq!(args, ["a", "b"]);
        assert_eq!(f(&args), 2);
        // Another program, even with the builtin's name as its first argument, is executed.
        assert!(as_builtin(&argv(&["/bin/sh", "__answer"])).is_none());
        // This program with an unknown name is executed too (and reports its own error).
        assert!(as_builtin(&argv(&[&me, "__unknown"])).is_none());
        assert!(as_builtin(&argv(&[&me])).is_none());
    }
}
