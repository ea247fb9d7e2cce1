//! The person's terminal during a sitting (`proctor sit`): a pseudo-terminal whose slave side
//! the sandbox's shell gets as its controlling terminal, the person's own terminal in raw mode
//! while the shell runs (restored on every way out: return, error, panic), and the relay of
//! bytes and window size between the two.
//!
//! In raw mode the person's terminal turns no key into a signal: Ctrl-C arrives as a byte,
//! which the relay writes to the pseudo-terminal, whose line discipline makes it SIGINT for the
//! shell's foreground job. proctor never sees it.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::pty::Winsize;
use nix::sys::termios::{cfmakeraw, tcgetattr, tcsetattr, SetArg, Termios};
use proctor_sandbox::Capped;

/// Whether `fd` is a terminal.
pub fn is_terminal(fd: BorrowedFd<'_>) -> bool {
    nix::unistd::isatty(fd.as_raw_fd()).unwrap_or(false)
}

/// The window size of the terminal `fd`, if it is one.
pub fn window_size(fd: BorrowedFd<'_>) -> Option<Winsize> {
    let mut ws = Winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ fills a winsize; the descriptor is borrowed for the call.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCGWINSZ, &mut ws) };
    (r == 0 && ws.ws_row > 0 && ws.ws_col > 0).then_some(ws)
}

/// Gives the terminal `fd` (a pseudo-terminal's master) the window size `ws`; its foreground
/// job gets SIGWINCH from the kernel.
fn set_window_size(fd: BorrowedFd<'_>, ws: &Winsize) {
    // SAFETY: TIOCSWINSZ reads a winsize; the descriptor is borrowed for the call.
    unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCSWINSZ, ws) };
}

/// A pseudo-terminal: the master side proctor reads and writes, the slave side the shell gets.
pub struct Pty {
    /// The side proctor relays.
    pub master: OwnedFd,
    /// The side the shell runs on.
    pub slave: OwnedFd,
}

/// Opens a pseudo-terminal of window size `ws`. Both sides are close-on-exec: nothing started
/// later (the sandbox's zygote above all) may keep the slave open, or the master would never see
/// its end.
pub fn open_pty(ws: Option<&Winsize>) -> io::Result<Pty> {
    let pty = nix::pty::openpty(ws, None).map_err(io::Error::from)?;
    for fd in [&pty.master, &pty.slave] {
        nix::fcntl::fcntl(
            fd.as_raw_fd(),
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        )
        .map_err(io::Error::from)?;
    }
    Ok(Pty {
        master: pty.master,
        slave: pty.slave,
    })
}

/// The person's terminal in raw mode; its settings are restored when this is dropped.
pub struct RawMode {
    fd: RawFd,
    saved: Termios,
}

impl RawMode {
    /// Puts the terminal on standard input in raw mode.
    pub fn enter() -> io::Result<RawMode> {
        let stdin = io::stdin();
        let saved = tcgetattr(stdin.as_fd()).map_err(io::Error::from)?;
        let mut raw = saved.clone();
        cfmakeraw(&mut raw);
        tcsetattr(stdin.as_fd(), SetArg::TCSADRAIN, &raw).map_err(io::Error::from)?;
        Ok(RawMode {
            fd: stdin.as_raw_fd(),
            saved,
        })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        // SAFETY: the standard input stays open for the life of the process.
        let fd = unsafe { BorrowedFd::borrow_raw(self.fd) };
        let _ = tcsetattr(fd, SetArg::TCSADRAIN, &self.saved);
    }
}

/// What the relay saw of the shell's terminal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shown {
    /// Bytes the terminal showed.
    pub bytes: u64,
    /// Bytes of them the kept transcript left out (its bound).
    pub cut: u64,
}

/// The relay between the person's terminal (stdin, stdout) and a pseudo-terminal's master, on a
/// thread of its own, with the window size kept in step.
pub struct Relay {
    stop: File,
    thread: JoinHandle<io::Result<Shown>>,
}

impl Relay {
    /// Starts relaying: what the person types goes to `master`, what `master` shows goes to
    /// stdout and into `transcript`.
    pub fn start(master: OwnedFd, transcript: Capped) -> io::Result<Relay> {
        let (stop_r, stop_w) = std::io::pipe()?;
        let (winch_r, winch_w) = std::io::pipe()?;
        signal_hook::low_level::pipe::register(signal_hook::consts::SIGWINCH, winch_w)?;
        let thread = std::thread::Builder::new()
            .name("sit-relay".into())
            .spawn(move || {
                relay(
                    &master,
                    transcript,
                    OwnedFd::from(stop_r),
                    OwnedFd::from(winch_r),
                )
            })?;
        Ok(Relay {
            stop: File::from(OwnedFd::from(stop_w)),
            thread,
        })
    }

    /// Stops relaying (after the shell's end: whatever the master still holds is shown first)
    /// and gives what the terminal showed.
    pub fn finish(mut self) -> io::Result<Shown> {
        let _ = self.stop.write_all(b"x");
        self.thread
            .join()
            .map_err(|_| io::Error::other("the terminal relay panicked"))?
    }
}

/// The relay's loop: poll stdin, the master, the stop pipe and the SIGWINCH pipe.
fn relay(
    master: &OwnedFd,
    mut transcript: Capped,
    stop: OwnedFd,
    winch: OwnedFd,
) -> io::Result<Shown> {
    let stdin = io::stdin();
    let mut shown = Shown::default();
    let mut buf = vec![0u8; 16 * 1024];
    // Whether stdin (the person) and the master (the shell) may still have something to say.
    let (mut typing, mut showing) = (true, true);
    loop {
        let mut fds = vec![
            PollFd::new(stop.as_fd(), PollFlags::POLLIN),
            PollFd::new(winch.as_fd(), PollFlags::POLLIN),
        ];
        if showing {
            fds.push(PollFd::new(master.as_fd(), PollFlags::POLLIN));
        }
        if typing {
            fds.push(PollFd::new(stdin.as_fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, PollTimeout::NONE) {
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
            Ok(_) => {}
        }
        let ready: Vec<bool> = fds
            .iter()
            .map(|f| f.any().unwrap_or(false) || f.revents().is_some_and(|r| !r.is_empty()))
            .collect();
        drop(fds);
        if ready[1] {
            let _ = nix::unistd::read(winch.as_raw_fd(), &mut buf);
            if let Some(ws) = window_size(stdin.as_fd()) {
                set_window_size(master.as_fd(), &ws);
            }
        }
        // Where each was polled, when it was.
        let (master_at, stdin_at) = (2, if showing { 3 } else { 2 });
        if typing && ready.get(stdin_at).copied().unwrap_or(false) {
            typing = type_in(stdin.as_fd(), master, &mut buf);
        }
        if showing && ready[master_at] {
            showing = show(master, &mut buf, &mut transcript, &mut shown)?;
        }
        if ready[0] {
            // The shell's end: show what the master still holds, without waiting for more.
            while showing && readable_now(master.as_fd()) {
                showing = show(master, &mut buf, &mut transcript, &mut shown)?;
            }
            shown.cut = transcript.finish()?;
            return Ok(shown);
        }
    }
}

/// Whether `fd` has something to read at once.
fn readable_now(fd: BorrowedFd<'_>) -> bool {
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
}

/// Copies one read of the master to stdout and the transcript; `false` once the master has
/// nothing more to say (every copy of the slave is closed).
fn show(
    master: &OwnedFd,
    buf: &mut [u8],
    transcript: &mut Capped,
    shown: &mut Shown,
) -> io::Result<bool> {
    match nix::unistd::read(master.as_raw_fd(), buf) {
        Ok(0) | Err(nix::errno::Errno::EIO) => Ok(false),
        Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => Ok(true),
        Err(e) => Err(e.into()),
        Ok(n) => {
            let mut out = io::stdout().lock();
            // The person's screen going away does not end the sitting; the transcript keeps it.
            let _ = out.write_all(&buf[..n]).and_then(|()| out.flush());
            transcript.push(&buf[..n])?;
            shown.bytes += n as u64;
            Ok(true)
        }
    }
}

/// Copies one read of stdin to the master; `false` once stdin has ended.
fn type_in(stdin: BorrowedFd<'_>, master: &OwnedFd, buf: &mut [u8]) -> bool {
    match nix::unistd::read(stdin.as_raw_fd(), buf) {
        Ok(0) => false,
        Ok(n) => {
            let mut rest = &buf[..n];
            while !rest.is_empty() {
                match nix::unistd::write(master.as_fd(), rest) {
                    Ok(w) => rest = &rest[w..],
                    Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => {}
                    // The shell is gone: what is typed now goes nowhere.
                    Err(_) => break,
                }
            }
            true
        }
        Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => true,
        Err(_) => false,
    }
}

/// Reads one line the person types (in the terminal's normal mode) without the trailing newline;
/// `None` when `interrupted` is set first (Ctrl-C, a hangup) or stdin ends before any byte.
pub fn read_line(interrupted: &AtomicBool) -> Option<String> {
    let stdin = io::stdin();
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        if interrupted.load(Ordering::SeqCst) {
            return None;
        }
        let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(100u16)) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return None,
            Ok(_) => {}
        }
        match nix::unistd::read(stdin.as_raw_fd(), &mut byte) {
            Ok(0) if line.is_empty() => return None,
            Ok(0) => break,
            Ok(_) if byte[0] == b'\n' => break,
            Ok(_) => line.push(byte[0]),
            Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => {}
            Err(_) => return None,
        }
    }
    Some(
        String::from_utf8_lossy(&line)
            .trim_end_matches('\r')
            .to_string(),
    )
}
