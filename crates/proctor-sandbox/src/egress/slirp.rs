//! The user-mode network stack: `slirp4netns` attached to the trial's network namespace, under
//! the egress filter ([`super::seccomp`]).
//!
//! Why slirp4netns: it is the stack rootless Podman has used for years, it attaches to a
//! namespace given by path (so the trial never exposes its pid), it can refuse the host's
//! loopback on its own (`--disable-host-loopback`), and it handles the trial's packets in one
//! thread, which the filter relies on. Debian 12's `pasta` changes to `nobody` when started as
//! root and then cannot map its ids.

use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::sys;

/// The program, looked up on `PATH`.
pub(crate) const PROGRAM: &str = "slirp4netns";

/// How long the stack may take to configure the trial's interface.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the descriptors land in the stack's process.
const NETNS_FD: RawFd = 3;
const USERNS_FD: RawFd = 4;
const READY_FD: RawFd = 5;
const EXIT_FD: RawFd = 6;

/// A running stack.
pub(crate) struct Stack {
    child: Child,
    /// Closed to tell the stack to exit.
    exit: Option<OwnedFd>,
    /// The filter's listener.
    pub(crate) listener: OwnedFd,
    /// The stack's "ready" pipe and its stderr, until it is ready.
    ready: Option<(OwnedFd, OwnedFd)>,
}

/// The stack's path on `PATH`, if it is installed.
pub(crate) fn find() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin")])
        .map(|d| d.join(PROGRAM))
        .find(|p| p.is_file())
}

/// Starts the stack on the namespace `netns` (owned by `userns`), with the egress filter;
/// returns once the trial's interface is configured.
pub(crate) fn start(netns: &OwnedFd, userns: &OwnedFd) -> Result<Stack, String> {
    let program = find().ok_or_else(|| {
        format!("network \"internet\" needs {PROGRAM} (Debian package slirp4netns), and it is not on PATH")
    })?;
    let (ready_r, ready_w) = sys::pipe().map_err(|e| format!("make a pipe: {e}"))?;
    let (exit_r, exit_w) = sys::pipe().map_err(|e| format!("make a pipe: {e}"))?;
    let (hand_r, hand_w) = sys::pipe().map_err(|e| format!("make a pipe: {e}"))?;
    let (go_r, go_w) = sys::pipe().map_err(|e| format!("make a pipe: {e}"))?;
    let stderr =
        sys::memfd_with(c"proctor-slirp-stderr", b"").map_err(|e| format!("make a memfd: {e}"))?;
    let stderr_read = stderr.try_clone().map_err(|e| format!("dup: {e}"))?;
    let prog = super::seccomp::program();
    let sources = [
        netns.as_raw_fd(),
        userns.as_raw_fd(),
        ready_w.as_raw_fd(),
        exit_r.as_raw_fd(),
    ];
    let (hand_w_raw, go_r_raw) = (hand_w.as_raw_fd(), go_r.as_raw_fd());
    let mut cmd = Command::new(&program);
    cmd.args([
        "--configure",
        "--mtu=65520",
        "--disable-host-loopback",
        "--disable-dns",
        "--netns-type=path",
    ])
    .arg(format!("--userns-path=/proc/self/fd/{USERNS_FD}"))
    .arg(format!("--ready-fd={READY_FD}"))
    .arg(format!("--exit-fd={EXIT_FD}"))
    .arg(format!("/proc/self/fd/{NETNS_FD}"))
    .arg("tap0")
    .env_clear()
    .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::from(std::fs::File::from(stderr)));
    // SAFETY: the closure makes system calls only, on memory made before the fork.
    unsafe {
        cmd.pre_exec(move || {
            place_fds(&sources)?;
            let listener = super::seccomp::install(&prog)?;
            // Tell the parent where the listener is, wait until it has taken it, close ours.
            let msg = [libc::getpid(), listener];
            if libc::write(hand_w_raw, msg.as_ptr().cast(), 8) != 8 {
                return Err(io::Error::last_os_error());
            }
            let mut b = 0u8;
            if libc::read(go_r_raw, (&mut b as *mut u8).cast(), 1) != 1 || b != b'1' {
                return Err(io::Error::other("the parent did not take the filter"));
            }
            libc::close(listener);
            Ok(())
        });
    }
    let handshake = std::thread::spawn(move || take_listener(hand_r, go_w));
    let spawned = cmd.spawn();
    drop((hand_w, go_r, ready_w, exit_r));
    let listener = handshake
        .join()
        .map_err(|_| "the filter handshake panicked".to_owned())?;
    let mut child = spawned.map_err(|e| format!("start {}: {e}", program.display()))?;
    let listener = match listener {
        Ok(l) => l,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("take the egress filter of {PROGRAM}: {e}"));
        }
    };
    Ok(Stack {
        child,
        exit: Some(exit_w),
        listener,
        ready: Some((ready_r, stderr_read)),
    })
}

/// In the child: moves `sources` to [`NETNS_FD`].. in order, kept across exec.
fn place_fds(sources: &[RawFd; 4]) -> io::Result<()> {
    // First out of the way (the sources may sit on the targets), then into place.
    let mut high = [0; 4];
    for (h, s) in high.iter_mut().zip(sources) {
        // SAFETY: F_DUPFD_CLOEXEC on a descriptor we hold.
        *h = unsafe { libc::fcntl(*s, libc::F_DUPFD_CLOEXEC, 64) };
        if *h < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    for (i, h) in high.iter().enumerate() {
        // SAFETY: dup2 onto a small number; dup2 clears close-on-exec on the copy.
        if unsafe { libc::dup2(*h, NETNS_FD + i as RawFd) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// In the parent, while the child is being spawned: takes the child's listener.
fn take_listener(hand_r: OwnedFd, go_w: OwnedFd) -> io::Result<OwnedFd> {
    let mut msg = [0u8; 8];
    std::fs::File::from(hand_r).read_exact(&mut msg)?;
    let pid = i32::from_ne_bytes([msg[0], msg[1], msg[2], msg[3]]);
    let fd = i32::from_ne_bytes([msg[4], msg[5], msg[6], msg[7]]);
    let listener = super::seccomp::take_fd(pid, fd)?;
    std::io::Write::write_all(&mut std::fs::File::from(go_w), b"1")?;
    Ok(listener)
}

impl Stack {
    /// Waits for the stack's "ready" (the trial's interface configured), or fails with what it
    /// said. The filter stops the stack's own calls until they are answered: the supervisor
    /// must be serving [`Stack::listener`] already.
    pub(crate) fn wait_ready(&mut self) -> Result<(), String> {
        let Some((ready, stderr)) = self.ready.take() else {
            return Ok(());
        };
        let ready_now = sys::wait_readable(ready.as_fd(), Some(READY_TIMEOUT)).unwrap_or(false);
        if !ready_now {
            return Err(self.failed("did not configure the trial's interface in 10 s", stderr));
        }
        let mut b = [0u8; 1];
        match std::fs::File::from(ready).read(&mut b) {
            Ok(1) if b[0] == b'1' => Ok(()),
            _ => Err(self.failed("stopped before it was ready", stderr)),
        }
    }

    fn failed(&mut self, what: &str, stderr: OwnedFd) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut text = String::new();
        let mut f = std::fs::File::from(stderr);
        let _ = std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(0));
        let _ = f.take(2000).read_to_string(&mut text);
        format!("{PROGRAM} {what}: {}", text.trim())
    }

    /// Stops the stack and reaps it.
    pub(crate) fn stop(&mut self) {
        self.exit = None;
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
