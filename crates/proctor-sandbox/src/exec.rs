//! Starting a program from the (single-threaded) sandbox init: fork, set up the child, `execve`,
//! and learn whether the `execve` itself failed.

use std::ffi::CString;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};

use crate::sys;

/// Everything needed to start one program.
pub(crate) struct ExecPlan {
    /// Full paths to try, in order (the `PATH` lookup is done here, with the target environment).
    candidates: Vec<CString>,
    argv: Vec<CString>,
    envp: Vec<CString>,
    cwd: CString,
    stdin: RawFd,
    stdout: RawFd,
    stderr: RawFd,
    /// Human name of the program, for messages.
    display: String,
}

const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

impl ExecPlan {
    /// A plan to run `argv` with exactly `env`, in `cwd`, with the given standard descriptors.
    /// The child gets its own session, default signal handling and no capabilities.
    pub(crate) fn new(
        argv: &[String],
        env: &[(String, String)],
        cwd: &Path,
        stdin: RawFd,
        stdout: RawFd,
        stderr: RawFd,
    ) -> Result<ExecPlan, String> {
        let program = argv.first().ok_or("empty command")?;
        let path = env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map_or(DEFAULT_PATH, |(_, v)| v.as_str());
        let candidates: Vec<PathBuf> = if program.contains('/') {
            vec![PathBuf::from(program)]
        } else {
            path.split(':')
                .map(|d| if d.is_empty() { "." } else { d })
                .map(|d| Path::new(d).join(program))
                .collect()
        };
        let c = |s: &dyn AsRef<std::ffi::OsStr>| sys::cstring(s).map_err(|e| e.to_string());
        Ok(ExecPlan {
            candidates: candidates.iter().map(|p| c(p)).collect::<Result<_, _>>()?,
            argv: argv.iter().map(|a| c(a)).collect::<Result<_, _>>()?,
            envp: env
                .iter()
                .map(|(k, v)| c(&format!("{k}={v}")))
                .collect::<Result<_, _>>()?,
            cwd: c(&cwd)?,
            stdin,
            stdout,
            stderr,
            display: program.clone(),
        })
    }

    /// Forks and executes the plan. Returns the child's pid once `execve` has succeeded, or why
    /// the program could not be started (the failed child is reaped).
    pub(crate) fn spawn(&self) -> Result<libc::pid_t, String> {
        let (err_r, err_w) = sys::pipe().map_err(|e| format!("pipe: {e}"))?;
        let mut argv: Vec<*const libc::c_char> = self.argv.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        let mut envp: Vec<*const libc::c_char> = self.envp.iter().map(|a| a.as_ptr()).collect();
        envp.push(std::ptr::null());
        let pid = sys::fork().map_err(|e| format!("fork: {e}"))?;
        if pid == 0 {
            let (step, errno) = self.child(&argv, &envp);
            let word = [step, errno];
            let bytes: Vec<u8> = word.iter().flat_map(|w| w.to_ne_bytes()).collect();
            let _ = sys::write_all(err_w.as_raw_fd(), &bytes);
            sys::exit_now(127);
        }
        drop(err_w);
        let mut buf = [0u8; 8];
        let mut got = 0;
        while got < buf.len() {
            // SAFETY: reading into a valid buffer from a descriptor we own.
            let n = unsafe {
                libc::read(
                    err_r.as_raw_fd(),
                    buf[got..].as_mut_ptr().cast(),
                    buf.len() - got,
                )
            };
            if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            if n <= 0 {
                break;
            }
            got += n as usize;
        }
        if got == 0 {
            return Ok(pid);
        }
        let _ = sys::wait4(pid, 0);
        let step = i32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]);
        let errno = i32::from_ne_bytes([buf[4], buf[5], buf[6], buf[7]]);
        let what = match step {
            1 => "cannot set up its standard input/output".to_owned(),
            2 => format!("cannot enter its working directory {:?}", self.cwd),
            3 => "cannot drop capabilities".to_owned(),
            _ => format!("cannot execute {:?}", self.display),
        };
        Err(format!("{what}: {}", sys::errno_text(errno)))
    }

    /// In the forked child: returns only on failure, with (step, errno).
    fn child(&self, argv: &[*const libc::c_char], envp: &[*const libc::c_char]) -> (i32, i32) {
        let errno = || std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        sys::reset_signals();
        // SAFETY: plain system calls on descriptors and strings that outlive the calls.
        unsafe {
            libc::setsid();
            for (from, to) in [(self.stdin, 0), (self.stdout, 1), (self.stderr, 2)] {
                if libc::dup2(from, to) < 0 {
                    return (1, errno());
                }
            }
            if libc::chdir(self.cwd.as_ptr()) < 0 {
                return (2, errno());
            }
        }
        if sys::drop_all_capabilities().is_err() {
            return (3, errno());
        }
        // Like execvpe: remember the most telling error (EACCES beats ENOENT).
        let mut best = libc::ENOENT;
        for cand in &self.candidates {
            // SAFETY: NUL-terminated arrays of valid C strings.
            unsafe { libc::execve(cand.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
            let e = errno();
            match e {
                libc::ENOENT | libc::ENOTDIR => {}
                libc::EACCES => best = libc::EACCES,
                other => return (4, other),
            }
        }
        (4, best)
    }
}
