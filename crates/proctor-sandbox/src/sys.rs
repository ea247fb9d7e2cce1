//! Thin, checked wrappers over the Linux system calls the sandbox needs.
//!
//! Everything here is a direct system call: the functions are safe to call in a forked child of a
//! single-threaded process. Functions marked "fork-safe" allocate nothing and may also be called
//! in the child of a multi-threaded process, between `fork` and `exec`/`_exit`.
//!
//! The calls go through the safe wrappers of `nix` and `rustix`; `unsafe` is left only where
//! neither has one (`fork`, `clone`, `wait4` with its resource usage, `mount_setattr`,
//! `close_range`, `_exit`, the loopback `ioctl`, resetting every signal's disposition, taking ownership of
//! descriptors received over a socket), each with its SAFETY comment.

use std::ffi::{CStr, CString, OsStr};
use std::fs::File;
use std::io::{self, IoSlice, IoSliceMut, Seek, SeekFrom, Write};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{SigSet, SigmaskHow, Signal};
use nix::sys::socket::{
    AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType,
};

use crate::report::Exit;

/// Turns a `-1` return into the current `errno`.
pub(crate) fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn check_long(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// A path or string as a C string; a NUL byte inside is an `InvalidInput` error.
pub(crate) fn cstring(s: impl AsRef<OsStr>) -> io::Result<CString> {
    CString::new(s.as_ref().as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{:?} contains a NUL byte", s.as_ref()),
        )
    })
}

/// `mount(2)`.
pub(crate) fn mount(
    source: Option<&OsStr>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> io::Result<()> {
    let flags = nix::mount::MsFlags::from_bits_retain(flags);
    nix::mount::mount(source, target, fstype, flags, data)?;
    Ok(())
}

/// A path that reaches what `fd` refers to, from T's own `/proc` as the working directory (see
/// [`OwnProc`]).
pub(crate) fn fd_path(fd: &impl AsRawFd) -> PathBuf {
    Path::new(OWN_FDS).join(fd.as_raw_fd().to_string())
}

/// Where [`fd_path`]'s paths name T's descriptors, from T's own `/proc` as the working folder.
pub(crate) const OWN_FDS: &str = "self/fd";

/// A handle on the trial init's own `/proc` (of the trial's PID namespace), taken while it is
/// in view. Without services the agent's `/proc` is mounted over it; T then works from this
/// handle ([`OwnProc::enter`] and [`fd_path`]) instead of unmounting the agent's, which would
/// make T wait for an RCU grace period.
pub(crate) struct OwnProc(OwnedFd);

impl OwnProc {
    /// Opens `/proc` as it is in view now.
    pub(crate) fn open() -> io::Result<OwnProc> {
        use nix::fcntl::OFlag;
        let fd = nix::fcntl::open(
            "/proc",
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )?;
        // SAFETY: the kernel just returned this new descriptor, owned by nothing else.
        Ok(OwnProc(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Makes it the working directory, where [`fd_path`]'s paths start.
    pub(crate) fn enter(&self) -> io::Result<()> {
        nix::unistd::fchdir(self.0.as_raw_fd())?;
        Ok(())
    }
}

/// `umount2(target, MNT_DETACH)`.
pub(crate) fn umount_detach(target: &Path) -> io::Result<()> {
    nix::mount::umount2(target, nix::mount::MntFlags::MNT_DETACH)?;
    Ok(())
}

/// `MOUNT_ATTR_RDONLY` for [`mount_setattr`].
pub(crate) const MOUNT_ATTR_RDONLY: u64 = 0x0000_0001;
/// `MOUNT_ATTR_NOSUID` for [`mount_setattr`].
pub(crate) const MOUNT_ATTR_NOSUID: u64 = 0x0000_0002;
/// `MOUNT_ATTR_NODEV` for [`mount_setattr`].
pub(crate) const MOUNT_ATTR_NODEV: u64 = 0x0000_0004;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `mount_setattr(2)` with `AT_RECURSIVE`: sets `set` on the mount at `target` and every mount
/// below it (Linux 5.12+).
pub(crate) fn mount_setattr_recursive(target: &Path, set: u64) -> io::Result<()> {
    let target = cstring(target)?;
    let attr = MountAttr {
        attr_set: set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: neither nix nor rustix wraps mount_setattr; a valid C string and a properly sized,
    // initialised struct that outlive the call.
    check_long(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            target.as_ptr(),
            libc::AT_RECURSIVE as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })?;
    Ok(())
}

/// `pivot_root(2)`.
pub(crate) fn pivot_root(new_root: &Path, put_old: &Path) -> io::Result<()> {
    nix::unistd::pivot_root(new_root, put_old)?;
    Ok(())
}

/// `unshare(2)`.
pub(crate) fn unshare(flags: libc::c_int) -> io::Result<()> {
    nix::sched::unshare(nix::sched::CloneFlags::from_bits_retain(flags))?;
    Ok(())
}

/// `fork(2)`: `Ok(0)` in the child, the child's pid in the parent.
///
/// Only call this from a single-threaded process, or follow the fork-safety rules in the child.
pub(crate) fn fork() -> io::Result<libc::pid_t> {
    // SAFETY: no safe fork exists (nix's is unsafe for the same reason): the callers are
    // single-threaded (the sandbox init) or only use fork-safe calls in the child (probe).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(pid)
    }
}

/// Names the calling thread (what `ps`, `top` and profilers show; at most 15 bytes are kept).
pub(crate) fn set_name(name: &std::ffi::CStr) {
    let _ = nix::sys::prctl::set_name(name);
}

/// `_exit(2)`: leaves the process at once, running no destructors or `atexit` handlers.
pub(crate) fn exit_now(code: i32) -> ! {
    // SAFETY: neither nix 0.29 nor rustix wraps _exit; it never returns and is
    // async-signal-safe.
    unsafe { libc::_exit(code) }
}

/// `prctl(PR_SET_PDEATHSIG, sig)`: fork-safe.
pub(crate) fn set_parent_death_signal(sig: libc::c_int) -> io::Result<()> {
    nix::sys::prctl::set_pdeathsig(Signal::try_from(sig)?)?;
    Ok(())
}

/// `prctl(PR_SET_DUMPABLE, 0)`: no process without `CAP_SYS_PTRACE` where this process's
/// memory was made (the host's user namespace) may trace it, take its descriptors
/// (`pidfd_getfd`) or read its `/proc/PID/fd`, `mem`, `environ` or `root`, whatever its uid.
/// Kept across `fork`, reset by `execve`. Fork-safe.
pub(crate) fn set_not_dumpable() -> io::Result<()> {
    nix::sys::prctl::set_dumpable(false)?;
    Ok(())
}

/// Closes every descriptor from 3 up but those in `keep` (at most 8). Fork-safe (no
/// allocation).
pub(crate) fn close_all_but(keep: &[RawFd]) -> io::Result<()> {
    let mut kept = [RawFd::MAX; 8];
    if keep.len() > kept.len() {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    kept[..keep.len()].copy_from_slice(keep);
    kept[..keep.len()].sort_unstable();
    let mut from: u32 = 3;
    for &fd in kept[..keep.len()]
        .iter()
        .chain(std::iter::once(&RawFd::MAX))
    {
        let Ok(fd) = u32::try_from(fd) else { continue };
        if fd > from {
            close_range(from, fd - 1, false)?;
        }
        from = from.max(fd.saturating_add(1));
    }
    Ok(())
}

/// `close_range(first, last)`: closes the descriptors `first..=last`, or with `cloexec` marks
/// them close-on-exec. On kernels without it (closing: before 5.9; marking: before 5.11), one
/// `close` or `fcntl` each, up to the descriptor limit, without allocating. Fork-safe.
fn close_range(first: u32, last: u32, cloexec: bool) -> io::Result<()> {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    let flags = if cloexec { CLOSE_RANGE_CLOEXEC } else { 0 };
    // SAFETY: neither nix nor rustix wraps close_range; a plain system call with no pointers.
    let r = unsafe { libc::syscall(libc::SYS_close_range, first, last, flags) };
    if r == 0 {
        return Ok(());
    }
    // Marking falls back on any refusal (5.9 and 5.10 refuse the flag with EINVAL); closing
    // only where there is no such call.
    let err = io::Error::last_os_error();
    if !cloexec && err.raw_os_error() != Some(libc::ENOSYS) {
        return Err(err);
    }
    let max = match nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE) {
        Ok((soft, _)) => soft.min(1 << 16) as u32,
        Err(_) => 1024,
    };
    for fd in first..=last.min(max.saturating_sub(1)) {
        // EBADF for unused numbers is fine.
        if cloexec {
            let mark = nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC);
            let _ = nix::fcntl::fcntl(fd as RawFd, mark);
        } else {
            // SAFETY: closing a number this process does not use otherwise.
            unsafe { libc::close(fd as RawFd) };
        }
    }
    Ok(())
}

/// A pid as `rustix` takes it; 0 and negative pids are `EINVAL`.
fn rustix_pid(pid: libc::pid_t) -> io::Result<rustix::process::Pid> {
    rustix::process::Pid::from_raw(pid).ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))
}

/// `pidfd_open(2)`.
pub(crate) fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    let flags = rustix::process::PidfdFlags::empty();
    Ok(rustix::process::pidfd_open(rustix_pid(pid)?, flags)?)
}

/// Joins the network namespace of `fd`: a pidfd (that process's) or a namespace file.
pub(crate) fn join_network(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: setns on a descriptor the caller holds open for the call.
    if unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A descriptor of the calling thread's network namespace, to come back to after
/// [`join_network`].
pub(crate) fn own_network() -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        "/proc/thread-self/ns/net",
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?)
}

/// `pidfd_send_signal(2)`.
pub(crate) fn pidfd_send_signal(pidfd: &OwnedFd, sig: libc::c_int) -> io::Result<()> {
    let sig = rustix::process::Signal::from_named_raw(sig)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
    rustix::process::pidfd_send_signal(pidfd, sig)?;
    Ok(())
}

/// `kill(2)`; a process that is already gone is not an error.
pub(crate) fn kill(pid: libc::pid_t, sig: libc::c_int) {
    // Errors (ESRCH) are deliberately ignored.
    if let Ok(sig) = Signal::try_from(sig) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
    }
}

/// Waits until `fd` is readable or `timeout` passes (`None` waits forever). Returns whether it
/// became readable. For a pidfd, readable means the process has exited.
pub(crate) fn wait_readable(fd: BorrowedFd<'_>, timeout: Option<Duration>) -> io::Result<bool> {
    use rustix::event::{PollFd, PollFlags, Timespec};
    let deadline = timeout.map(|t| Instant::now() + t);
    loop {
        let wait = deadline.map(|d| {
            let left = d.saturating_duration_since(Instant::now());
            // Round up so that we never spin on a sub-millisecond remainder.
            let ms = left.as_micros().div_ceil(1000).min(i32::MAX as u128) as i64;
            Timespec {
                tv_sec: ms / 1000,
                tv_nsec: (ms % 1000) * 1_000_000,
            }
        });
        let mut fds = [PollFd::from_borrowed_fd(fd, PollFlags::IN)];
        let n = match rustix::event::poll(&mut fds, wait.as_ref()) {
            Ok(n) => n,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        };
        if n > 0 {
            return Ok(true);
        }
        if let Some(d) = deadline {
            if Instant::now() >= d {
                return Ok(false);
            }
        }
    }
}

/// `wait4(2)`, retried on `EINTR`. `Ok(None)` when `WNOHANG` was given and the child still runs.
pub(crate) fn wait4(
    pid: libc::pid_t,
    flags: libc::c_int,
) -> io::Result<Option<(libc::pid_t, libc::c_int, libc::rusage)>> {
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: rusage is plain old data; zeroed is a valid value.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: neither nix nor rustix has a wait4 that gives the resource usage; valid
        // out-pointers.
        let r = unsafe { libc::wait4(pid, &mut status, flags, &mut usage) };
        if r < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        if r == 0 {
            return Ok(None);
        }
        return Ok(Some((r, status, usage)));
    }
}

/// Decodes a wait status into an exit code or a signal.
pub(crate) fn decode_status(status: libc::c_int) -> Exit {
    if libc::WIFEXITED(status) {
        Exit {
            code: Some(libc::WEXITSTATUS(status)),
            signal: None,
        }
    } else if libc::WIFSIGNALED(status) {
        Exit {
            code: None,
            signal: Some(libc::WTERMSIG(status)),
        }
    } else {
        Exit {
            code: None,
            signal: None,
        }
    }
}

/// User plus system CPU time of a `rusage`.
pub(crate) fn cpu_time(usage: &libc::rusage) -> Duration {
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// A `pipe2(O_CLOEXEC)`: (read end, write end).
pub(crate) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?)
}

/// A `socketpair(AF_UNIX, ty | SOCK_CLOEXEC)`.
fn unix_socketpair(ty: SockType) -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(nix::sys::socket::socketpair(
        AddressFamily::Unix,
        ty,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?)
}

/// A `socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC)`.
pub(crate) fn socketpair() -> io::Result<(OwnedFd, OwnedFd)> {
    unix_socketpair(SockType::Stream)
}

/// A sealed-size anonymous file (`memfd_create`, close-on-exec) holding `data`, positioned at 0.
pub(crate) fn memfd_with(name: &CStr, data: &[u8]) -> io::Result<OwnedFd> {
    let fd = rustix::fs::memfd_create(name, rustix::fs::MemfdFlags::CLOEXEC)?;
    let mut file = File::from(fd);
    file.write_all(data)?;
    file.seek(SeekFrom::Start(0))?;
    Ok(OwnedFd::from(file))
}

/// Writes all of `data` to `fd`, retrying on `EINTR` and short writes.
pub(crate) fn write_all(fd: BorrowedFd<'_>, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        match nix::unistd::write(fd, data) {
            Ok(n) => data = &data[n..],
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// One `sendmsg(MSG_NOSIGNAL)` of `data` with `pass` attached (`SCM_RIGHTS`) when it is not
/// empty, retried on `EINTR`; gives the number of bytes sent.
fn sendmsg_with_fds(fd: RawFd, data: &[u8], pass: &[RawFd]) -> io::Result<usize> {
    let iov = [IoSlice::new(data)];
    let rights = [ControlMessage::ScmRights(pass)];
    let cmsgs: &[ControlMessage] = if pass.is_empty() { &[] } else { &rights };
    loop {
        match nix::sys::socket::sendmsg::<()>(fd, &iov, cmsgs, MsgFlags::MSG_NOSIGNAL, None) {
            Ok(n) => return Ok(n),
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// `send(MSG_NOSIGNAL)` of all of `data` on a socket, optionally passing one descriptor with the
/// first byte (`SCM_RIGHTS`). A reader that went away is an error, never a `SIGPIPE`.
pub(crate) fn send_all(fd: RawFd, mut data: &[u8], pass: Option<RawFd>) -> io::Result<()> {
    let mut pass = pass;
    while !data.is_empty() {
        let one = pass.map(|p| [p]);
        let n = sendmsg_with_fds(fd, data, one.as_ref().map_or(&[], |p| p))?;
        pass = None;
        data = &data[n..];
    }
    Ok(())
}

/// `send(MSG_NOSIGNAL)` of all of `data` on a stream socket, passing the descriptors `pass`
/// with the first bytes (`SCM_RIGHTS`).
pub(crate) fn send_all_fds(fd: RawFd, mut data: &[u8], pass: &[RawFd]) -> io::Result<()> {
    let mut pass = pass;
    while !data.is_empty() {
        let n = sendmsg_with_fds(fd, data, pass)?;
        pass = &[];
        data = &data[n..];
    }
    Ok(())
}

/// `recvmsg` into `buf`, collecting any descriptors passed with `SCM_RIGHTS` (close-on-exec).
/// Returns the number of bytes read (0 at end of stream).
pub(crate) fn recv_with_fds(
    fd: RawFd,
    buf: &mut [u8],
    fds: &mut Vec<OwnedFd>,
) -> io::Result<usize> {
    let mut space = nix::cmsg_space!([RawFd; 28]);
    loop {
        let mut iov = [IoSliceMut::new(buf)];
        let flags = MsgFlags::MSG_CMSG_CLOEXEC;
        let msg = match nix::sys::socket::recvmsg::<()>(fd, &mut iov, Some(&mut space), flags) {
            Ok(msg) => msg,
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        };
        for cmsg in msg.cmsgs()? {
            if let ControlMessageOwned::ScmRights(raw) = cmsg {
                for fd in raw {
                    // SAFETY: the kernel just installed this descriptor in our table for this
                    // message; nothing else owns it (nix hands it over as a bare number).
                    fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
                }
            }
        }
        return Ok(msg.bytes);
    }
}

/// Writes a whole small file (used for `/proc/self/uid_map` and friends).
pub(crate) fn write_file(path: &Path, contents: &[u8]) -> io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)?
        .write_all(contents)
}

/// The capabilities root inside a trial keeps (Docker's default set less `CAP_SETFCAP`): what
/// `chown`, `setgroups`, `setuid`, `useradd` and package managers need, over the ids the trial's
/// user namespace maps. Never `CAP_SYS_ADMIN` (mount, unmount: the read-only host and the
/// covers over hidden paths stay as they are), `CAP_NET_ADMIN`, `CAP_SYS_PTRACE`,
/// `CAP_SYS_RESOURCE` or `CAP_SETFCAP` (no file capabilities on what the agent leaves).
// The bits, by number (linux/capability.h): CAP_CHOWN (0), CAP_DAC_OVERRIDE (1),
// CAP_DAC_READ_SEARCH (2), CAP_FOWNER (3), CAP_FSETID (4), CAP_KILL (5), CAP_SETGID (6),
// CAP_SETUID (7), CAP_SETPCAP (8), CAP_NET_BIND_SERVICE (10), CAP_NET_RAW (13), CAP_SYS_CHROOT
// (18), CAP_MKNOD (27), CAP_AUDIT_WRITE (29)
pub(crate) const AGENT_CAPABILITIES: u64 = (1 << 0)
    | (1 << 1)
    | (1 << 2)
    | (1 << 3)
    | (1 << 4)
    | (1 << 5)
    | (1 << 6)
    | (1 << 7)
    | (1 << 8)
    | (1 << 10)
    | (1 << 13)
    | (1 << 18)
    | (1 << 27)
    | (1 << 29);

/// Drops every capability but those in `keep` (a bit per capability) for good: from the
/// bounding set, the ambient set, and the effective, permitted and inheritable sets; also sets
/// `no_new_privs`. After this, `execve` as uid 0 inside the user namespace yields `keep` at most
/// (never `CAP_SYS_ADMIN` for [`AGENT_CAPABILITIES`]), so the program cannot mount, unmount or
/// remount anything, and the read-only mounts stay read-only.
pub(crate) fn drop_capabilities_but(keep: u64) -> io::Result<()> {
    use rustix::thread::{CapabilitySet, CapabilitySets};
    rustix::thread::set_no_new_privs(true)?;
    for cap in (0..=last_capability()).filter(|cap| keep & (1u64 << cap) == 0) {
        rustix::thread::remove_capability_from_bounding_set(CapabilitySet::from_bits_retain(
            1u64 << cap,
        ))?;
    }
    // Ambient capabilities may not exist on very old kernels; nothing to clear there.
    let _ = rustix::thread::clear_ambient_capability_set();
    let keep = CapabilitySet::from_bits_retain(keep);
    rustix::thread::set_capabilities(
        None,
        CapabilitySets {
            effective: keep,
            permitted: keep,
            inheritable: CapabilitySet::empty(),
        },
    )?;
    Ok(())
}

/// The highest capability number this kernel knows: the last one whose bounding-set bit can
/// be read. Found once per process (the zygote finds it before its first fork, so that no trial
/// init or agent init asks the kernel again).
pub(crate) fn last_capability() -> u32 {
    use rustix::thread::CapabilitySet;
    static LAST: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *LAST.get_or_init(|| {
        (0..64u32)
            .take_while(|cap| {
                rustix::thread::capability_is_in_bounding_set(CapabilitySet::from_bits_retain(
                    1u64 << cap,
                ))
                .is_ok()
            })
            .last()
            .unwrap_or(0)
    })
}

/// Brings the loopback interface of the current network namespace up.
pub(crate) fn loopback_up() -> io::Result<()> {
    let sock = nix::sys::socket::socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    // SAFETY: neither nix nor rustix wraps SIOCGIFFLAGS/SIOCSIFFLAGS; ioctls on a socket we own
    // with a zeroed ifreq (plain old data) that carries a valid NUL-terminated name.
    unsafe {
        let mut req: libc::ifreq = std::mem::zeroed();
        for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
            *dst = *src as libc::c_char;
        }
        check(libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req))?;
        req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        check(libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req))?;
    }
    Ok(())
}

/// `sethostname(2)`.
pub(crate) fn set_hostname(name: &str) -> io::Result<()> {
    nix::unistd::sethostname(name)?;
    Ok(())
}

/// `lgetxattr(2)` of a small value; `Ok(None)` when the attribute is absent or unsupported.
pub(crate) fn lgetxattr(path: &Path, name: &CStr) -> io::Result<Option<Vec<u8>>> {
    let mut buf = [0u8; 256];
    match rustix::fs::lgetxattr(path, name, &mut buf[..]) {
        Ok(n) => Ok(Some(buf[..n].to_vec())),
        Err(e) => {
            let err = io::Error::from(e);
            match err.raw_os_error() {
                Some(libc::ENODATA) | Some(libc::ENOTSUP) | Some(libc::ERANGE) => Ok(None),
                _ => Err(err),
            }
        }
    }
}

/// Blocks `signals` in the calling thread and returns the set for [`wait_signal`].
pub(crate) fn block_signals(signals: &[libc::c_int]) -> io::Result<SigSet> {
    let mut set = SigSet::empty();
    for &s in signals {
        set.add(Signal::try_from(s)?);
    }
    set.thread_block()?;
    Ok(set)
}

/// `sigwait` on a set of blocked signals; returns the signal number.
pub(crate) fn wait_signal(set: &SigSet) -> io::Result<libc::c_int> {
    loop {
        match set.wait() {
            Ok(sig) => return Ok(sig as libc::c_int),
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// [`wait_signal`], also giving the sender's pid as the waiting process's namespace sees it: 0
/// for a signal from the kernel or from a process outside that PID namespace.
pub(crate) fn wait_signal_from(set: &SigSet) -> io::Result<(libc::c_int, libc::pid_t)> {
    loop {
        // SAFETY: a zeroed siginfo_t is valid output space; the set is a valid sigset_t.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let sig = unsafe { libc::sigwaitinfo(set.as_ref(), &mut info) };
        if sig >= 0 {
            // SAFETY: si_pid is valid for the signals waited for here (sent by kill or the kernel).
            return Ok((sig, unsafe { info.si_pid() }));
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// Resets the signal mask and every catchable signal's disposition to the default; used in a
/// forked child right before `execve`.
pub(crate) fn reset_signals() {
    let _ =
        nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None);
    // SAFETY: nix's `signal` is unsafe too and knows no real-time signals; setting SIG_DFL installs
    // no handler, so nothing can run in a bad state.
    unsafe {
        for sig in 1..libc::SIGRTMAX() {
            if sig == libc::SIGKILL || sig == libc::SIGSTOP {
                continue;
            }
            libc::signal(sig, libc::SIG_DFL);
        }
    }
}

/// The text of an `errno` value.
pub(crate) fn errno_text(errno: i32) -> String {
    io::Error::from_raw_os_error(errno).to_string()
}

/// How child `pid` ended, if it has, without reaping it (`waitid(WEXITED | WNOHANG | WNOWAIT)`).
pub(crate) fn peek_exit(pid: libc::pid_t) -> Option<Exit> {
    use rustix::process::{WaitId, WaitIdOptions};
    let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
    let status = rustix::process::waitid(WaitId::Pid(rustix_pid(pid).ok()?), options).ok()??;
    Some(match status.exit_status() {
        Some(code) => Exit {
            code: Some(code),
            signal: None,
        },
        None => Exit {
            code: None,
            signal: status.terminating_signal(),
        },
    })
}

/// Marks every descriptor from 3 up close-on-exec (`close_range(3, ~0, CLOSE_RANGE_CLOEXEC)`), so
/// that no descriptor inherited from the caller leaks into the programs started later. Fork-safe.
pub(crate) fn cloexec_from_3() -> io::Result<()> {
    close_range(3, u32::MAX, true)
}

/// What the sandbox init received on its standard descriptors.
pub(crate) struct InitFds {
    /// The control socket (moved off stdout, close-on-exec).
    pub ctl: RawFd,
    /// The spec, read from stdin.
    pub spec: Vec<u8>,
}

/// Points `fds` at `/dev/null`.
fn to_dev_null(fds: &[RawFd]) -> io::Result<()> {
    let null = File::options().read(true).write(true).open("/dev/null")?;
    for &fd in fds {
        nix::unistd::dup2(null.as_raw_fd(), fd)?;
    }
    Ok(())
}

/// Moves the control socket off stdout, reads the spec from stdin, and points both at
/// `/dev/null`, so nothing else can write into the control channel by accident.
pub(crate) fn take_std_fds() -> io::Result<InitFds> {
    let ctl = nix::fcntl::fcntl(1, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(3))?;
    let mut spec = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match nix::unistd::read(0, &mut buf) {
            Ok(0) => break,
            Ok(n) => spec.extend_from_slice(&buf[..n]),
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    to_dev_null(&[0, 1])?;
    Ok(InitFds { ctl, spec })
}

/// Moves the terminal passed on stderr to a close-on-exec descriptor of its own and points
/// stderr at `/dev/null`; gives the terminal's descriptor.
pub(crate) fn take_terminal_from_stderr() -> io::Result<RawFd> {
    let tty = nix::fcntl::fcntl(2, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(3))?;
    to_dev_null(&[2])?;
    Ok(tty)
}

/// `CLOCK_MONOTONIC` in milliseconds: comparable across processes (for the debug timings).
pub(crate) fn monotonic_ms() -> f64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
}

/// A `socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC)`: datagrams that keep their bounds.
pub(crate) fn socketpair_seqpacket() -> io::Result<(OwnedFd, OwnedFd)> {
    unix_socketpair(SockType::SeqPacket)
}

/// One `sendmsg(MSG_NOSIGNAL)` of `data` with `pass` attached (`SCM_RIGHTS`, at most 4), for a
/// `SOCK_SEQPACKET` socket: the datagram goes whole or not at all.
pub(crate) fn send_with_fds(fd: RawFd, data: &[u8], pass: &[RawFd]) -> io::Result<()> {
    if pass.len() > 4 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "too many descriptors",
        ));
    }
    sendmsg_with_fds(fd, data, pass)?;
    Ok(())
}

/// Reads a whole file from offset 0 with `pread` (the descriptor's offset is left alone).
pub(crate) fn read_all_at(fd: BorrowedFd<'_>) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match nix::sys::uio::pread(fd, &mut buf, out.len() as libc::off_t) {
            Ok(0) => return Ok(out),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// `clone(flags | SIGCHLD)` without a new stack: like `fork`, into the new namespaces `flags`
/// names (`CLONE_NEWUSER`, `CLONE_NEWPID`, ...). `Ok(0)` in the child.
///
/// Only for a single-threaded caller, and the child must not rely on the C library's cached
/// thread id (pthread mutexes of the error-checking or recursive kind): it is the parent's.
pub(crate) fn clone_process(flags: libc::c_int) -> io::Result<libc::pid_t> {
    // SAFETY: neither nix nor rustix has a safe clone (nix's takes a new stack and is unsafe); a
    // fork-like clone (no CLONE_VM, no new stack) in a single-threaded process: the child continues
    // on its own copy of the address space.
    let r = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (flags | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as libc::pid_t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_all_but_keeps_exactly_the_descriptors_named() {
        let null = File::open("/dev/null").unwrap();
        let fds: Vec<RawFd> = (0..5)
            .map(|_| std::os::fd::IntoRawFd::into_raw_fd(null.try_clone().unwrap()))
            .collect();
        let keep = [fds[1], fds[3]];
        // In a child: closing descriptors under the test harness's threads would break them.
        let pid = fork().unwrap();
        if pid == 0 {
            let open = |fd: RawFd| nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFD).is_ok();
            let ok = close_all_but(&keep).is_ok()
                && fds.iter().all(|&fd| open(fd) == keep.contains(&fd))
                && (0..3).all(open)
                && close_all_but(&[3; 9]).is_err();
            exit_now(if ok { 0 } else { 1 });
        }
        let (_, status, _) = wait4(pid, 0).unwrap().unwrap();
        assert_eq!(decode_status(status).code, Some(0));
        for fd in fds {
            // SAFETY: closing the test's own duplicates.
            unsafe { libc::close(fd) };
        }
    }
}
