//! Programs built into the sandbox's own executable, started without executing anything.
//!
//! The sandbox init is a clone of the executable that runs the sandbox (`init_exe`). When the
//! agent's command is that same executable with a registered builtin's name as its first
//! argument (`proctor __script-agent FILE`), executing it would load the whole program again only
//! to run a function this process already has. The init forks instead and calls the function in
//! the child, after giving it exactly what `execve` would have: a new session, default signals,
//! the standard descriptors, the working directory and the command's environment, and nothing
//! else (the init holds no capabilities by then). The result is the same program, started about
//! half a millisecond sooner. One difference is visible from inside: the child's
//! `/proc/PID/cmdline` is the init's, not the command's.

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

/// Forks a child that runs `f(args)` as if executed: own session, default signal handling and
/// an empty signal mask, `stdin`/`stdout`/`stderr` on 0/1/2, working directory `cwd`, and the
/// environment `env` only. The caller must be single-threaded and hold no capabilities.
pub(crate) fn spawn(
    f: Builtin,
    args: Vec<String>,
    env: &[(String, String)],
    cwd: &std::path::Path,
    stdio: [RawFd; 3],
) -> Result<libc::pid_t, String> {
    if !cwd.is_dir() {
        return Err(format!(
            "cannot enter its working directory {}",
            cwd.display()
        ));
    }
    let cwd = sys::cstring(cwd).map_err(|e| e.to_string())?;
    let env: Vec<(CString, CString)> = env
        .iter()
        .map(|(k, v)| Ok((sys::cstring(k)?, sys::cstring(v)?)))
        .collect::<std::io::Result<_>>()
        .map_err(|e| e.to_string())?;
    let pid = sys::fork().map_err(|e| format!("fork: {e}"))?;
    if pid != 0 {
        return Ok(pid);
    }
    sys::set_name(c"proctor-builtin");
    sys::reset_signals();
    // SAFETY: the parent is single-threaded, so the child may call anything; every pointer is to
    // a C string that outlives the call.
    unsafe {
        libc::setsid();
        for (from, to) in stdio.into_iter().zip(0..) {
            if libc::dup2(from, to) < 0 {
                sys::exit_now(127);
            }
        }
        if libc::chdir(cwd.as_ptr()) < 0 {
            sys::exit_now(127);
        }
        libc::clearenv();
        for (k, v) in &env {
            libc::setenv(k.as_ptr(), v.as_ptr(), 1);
        }
    }
    let code = f(&args);
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    sys::exit_now(code)
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
