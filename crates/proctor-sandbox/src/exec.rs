//! Starting a program from the (single-threaded) sandbox init: fork, set up the child, `execve`,
//! and learn whether the `execve` itself failed.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
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
    /// Whether stdin is a terminal the program takes as its controlling terminal.
    controlling_terminal: bool,
    /// Human name of the program, for messages.
    display: String,
    /// Where the child goes before it executes.
    enter: Enter,
    /// Whether the child gets a network namespace of its own.
    own_network: bool,
}

/// Where a child goes before it executes (see [`crate::sidecar`]).
pub(crate) enum Enter {
    /// Nowhere: the caller's mount namespace and root.
    Stay,
    /// A mount namespace of its own whose root is sidecar NAME's image.
    OwnRoot(String),
    /// The mount namespace (and root) of the process whose pidfd this is.
    MountsOf(RawFd),
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
            controlling_terminal: false,
            display: program.clone(),
            enter: Enter::Stay,
            own_network: false,
        })
    }

    /// The plan with the child in a network namespace of its own, its loopback up, before it
    /// executes. Only [`ExecPlan::spawn`] does this.
    pub(crate) fn with_own_network(mut self) -> ExecPlan {
        self.own_network = true;
        self
    }

    /// The plan with its standard input, a terminal, made the program's controlling terminal
    /// (in the new session [`ExecPlan::spawn`] gives it), so that the terminal's line
    /// discipline signals the program's foreground job. Only [`ExecPlan::spawn`] does this.
    pub(crate) fn with_controlling_terminal(mut self) -> ExecPlan {
        self.controlling_terminal = true;
        self
    }

    /// The plan with the child going to `enter` before it executes. Only [`ExecPlan::spawn`]
    /// does this.
    pub(crate) fn entering(mut self, enter: Enter) -> ExecPlan {
        self.enter = enter;
        self
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
            let _ = sys::write_all(err_w.as_fd(), &bytes);
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
            5 => "cannot take its terminal as its controlling terminal".to_owned(),
            6 => return Err("cannot enter its own root (its log says why)".to_owned()),
            7 => "cannot enter the service's mount namespace".to_owned(),
            8 => "cannot make its own network namespace".to_owned(),
            _ => format!("cannot execute {:?}", self.display),
        };
        Err(format!("{what}: {}", sys::errno_text(errno)))
    }

    /// Starts the plan with `posix_spawn` (a vfork: no copy of our address space). The caller
    /// must already hold no capabilities: the child inherits exactly the caller's credentials.
    pub(crate) fn spawn_unprivileged(&self) -> Result<libc::pid_t, String> {
        // Like execvp, but on the target environment's PATH and without the caller's privileges
        // (we hold none), so `access` answers exactly as execve would.
        let mut best = libc::ENOENT;
        let mut program = None;
        for c in &self.candidates {
            // SAFETY: valid C string.
            if unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0 {
                program = Some(c);
                break;
            }
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EACCES) {
                best = libc::EACCES;
            }
        }
        let program = program.ok_or_else(|| {
            let searched = if self.candidates.len() > 1 {
                " (searched the PATH)"
            } else {
                ""
            };
            format!(
                "cannot execute {:?}: {}{searched}",
                self.display,
                sys::errno_text(best)
            )
        })?;
        // Report a missing working directory as such (posix_spawn would only say ENOENT).
        let cwd = Path::new(std::ffi::OsStr::from_bytes(self.cwd.as_bytes()));
        if !cwd.is_dir() {
            return Err(format!(
                "cannot enter its working directory {}",
                cwd.display()
            ));
        }
        let mut argv: Vec<*mut libc::c_char> =
            self.argv.iter().map(|a| a.as_ptr().cast_mut()).collect();
        argv.push(std::ptr::null_mut());
        let mut envp: Vec<*mut libc::c_char> =
            self.envp.iter().map(|a| a.as_ptr().cast_mut()).collect();
        envp.push(std::ptr::null_mut());
        // SAFETY: the attribute and file-action objects are initialised before use and destroyed
        // after; every pointer passed outlives the call.
        unsafe {
            let mut fa: libc::posix_spawn_file_actions_t = std::mem::zeroed();
            let mut attr: libc::posix_spawnattr_t = std::mem::zeroed();
            libc::posix_spawn_file_actions_init(&mut fa);
            libc::posix_spawnattr_init(&mut attr);
            let mut r = 0;
            for (from, to) in [(self.stdin, 0), (self.stdout, 1), (self.stderr, 2)] {
                if r == 0 {
                    r = libc::posix_spawn_file_actions_adddup2(&mut fa, from, to);
                }
            }
            if r == 0 {
                r = libc::posix_spawn_file_actions_addchdir_np(&mut fa, self.cwd.as_ptr());
            }
            let mut none: libc::sigset_t = std::mem::zeroed();
            let mut all: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::sigfillset(&mut all);
            if r == 0 {
                r = libc::posix_spawnattr_setsigmask(&mut attr, &none);
            }
            if r == 0 {
                r = libc::posix_spawnattr_setsigdefault(&mut attr, &all);
            }
            if r == 0 {
                let flags = libc::POSIX_SPAWN_SETSID
                    | libc::POSIX_SPAWN_SETSIGMASK as libc::c_short
                    | libc::POSIX_SPAWN_SETSIGDEF as libc::c_short;
                r = libc::posix_spawnattr_setflags(&mut attr, flags);
            }
            let mut pid: libc::pid_t = 0;
            if r == 0 {
                r = libc::posix_spawn(
                    &mut pid,
                    program.as_ptr(),
                    &fa,
                    &attr,
                    argv.as_ptr(),
                    envp.as_ptr(),
                );
            }
            libc::posix_spawn_file_actions_destroy(&mut fa);
            libc::posix_spawnattr_destroy(&mut attr);
            if r != 0 {
                return Err(format!(
                    "cannot execute {:?}: {}",
                    self.display,
                    sys::errno_text(r)
                ));
            }
            Ok(pid)
        }
    }

    /// In the forked child, before the working folder is entered: goes where [`Self::enter`]
    /// says. `Some((step, errno))` on failure; a sidecar's root says why on its log (stderr).
    fn enter_before_exec(&self) -> Option<(i32, i32)> {
        match &self.enter {
            Enter::Stay => None,
            Enter::OwnRoot(name) => crate::sidecar::enter_own_root(name).err().map(|why| {
                let line = format!("proctor: the sidecar's root could not be made: {why}\n");
                let _ = sys::write_all(std::io::stderr().as_fd(), line.as_bytes());
                (6, 0)
            }),
            // SAFETY: setns on a pidfd the caller holds open for the call.
            Enter::MountsOf(fd) => {
                (unsafe { libc::setns(*fd, libc::CLONE_NEWNS) } != 0).then(|| {
                    (
                        7,
                        std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
                    )
                })
            }
        }
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
            if self.controlling_terminal && libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return (5, errno());
            }
        }
        if let Some(failed) = self.enter_before_exec() {
            return failed;
        }
        if self.own_network {
            // SAFETY: a plain system call; the child is single-threaded.
            if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                return (8, errno());
            }
            if let Err(e) = sys::loopback_up() {
                return (8, e.raw_os_error().unwrap_or(0));
            }
        }
        // SAFETY: a plain system call on a string that outlives it.
        unsafe {
            if libc::chdir(self.cwd.as_ptr()) < 0 {
                return (2, errno());
            }
        }
        if let Err(e) = sys::drop_capabilities_but(sys::AGENT_CAPABILITIES) {
            return (3, e.raw_os_error().unwrap_or(0));
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
