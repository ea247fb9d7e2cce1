//! Thin, checked wrappers over the Linux system calls the sandbox needs.
//!
//! Everything here is a direct system call: the functions are safe to call in a forked child of a
//! single-threaded process. Functions marked "fork-safe" allocate nothing and may also be called
//! in the child of a multi-threaded process, between `fork` and `exec`/`_exit`.

use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

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
    let source = source.map(cstring).transpose()?;
    let target = cstring(target)?;
    let fstype = fstype.map(cstring).transpose()?;
    let data = data.map(cstring).transpose()?;
    // SAFETY: every pointer is either null or a valid NUL-terminated string that outlives the call.
    check(unsafe {
        libc::mount(
            source.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            target.as_ptr(),
            fstype.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            flags,
            data.as_ref()
                .map_or(std::ptr::null(), |s| s.as_ptr().cast::<libc::c_void>()),
        )
    })?;
    Ok(())
}

/// `umount2(target, MNT_DETACH)`.
pub(crate) fn umount_detach(target: &Path) -> io::Result<()> {
    let target = cstring(target)?;
    // SAFETY: valid C string.
    check(unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) })?;
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
    // SAFETY: valid C string and a properly sized, initialised struct.
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
    let new_root = cstring(new_root)?;
    let put_old = cstring(put_old)?;
    // SAFETY: valid C strings.
    check_long(unsafe {
        libc::syscall(libc::SYS_pivot_root, new_root.as_ptr(), put_old.as_ptr())
    })?;
    Ok(())
}

/// `unshare(2)`.
pub(crate) fn unshare(flags: libc::c_int) -> io::Result<()> {
    // SAFETY: plain system call.
    check(unsafe { libc::unshare(flags) })?;
    Ok(())
}

/// `fork(2)`: `Ok(0)` in the child, the child's pid in the parent.
///
/// Only call this from a single-threaded process, or follow the fork-safety rules in the child.
pub(crate) fn fork() -> io::Result<libc::pid_t> {
    // SAFETY: the callers are single-threaded (the sandbox init) or only use fork-safe calls in
    // the child (probe).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(pid)
    }
}

/// Names the calling thread (what `ps`, `top` and profilers show; at most 15 bytes are kept).
pub(crate) fn set_name(name: &std::ffi::CStr) {
    // SAFETY: PR_SET_NAME reads a NUL-terminated string that outlives the call.
    unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) };
}

/// `_exit(2)`: leaves the process at once, running no destructors or `atexit` handlers.
pub(crate) fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and is async-signal-safe.
    unsafe { libc::_exit(code) }
}

/// `prctl(PR_SET_PDEATHSIG, sig)`: fork-safe.
pub(crate) fn set_parent_death_signal(sig: libc::c_int) -> io::Result<()> {
    // SAFETY: plain system call.
    check(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong, 0, 0, 0) })?;
    Ok(())
}

/// `pidfd_open(2)`.
pub(crate) fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: plain system call.
    let fd = check_long(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) })?;
    // SAFETY: the kernel just returned this new descriptor to us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `pidfd_send_signal(2)`.
pub(crate) fn pidfd_send_signal(pidfd: &OwnedFd, sig: libc::c_int) -> io::Result<()> {
    // SAFETY: plain system call on a descriptor we own.
    check_long(unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    })?;
    Ok(())
}

/// `kill(2)`; a process that is already gone is not an error.
pub(crate) fn kill(pid: libc::pid_t, sig: libc::c_int) {
    // SAFETY: plain system call; errors (ESRCH) are deliberately ignored.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// Waits until `fd` is readable or `timeout` passes (`None` waits forever). Returns whether it
/// became readable. For a pidfd, readable means the process has exited.
pub(crate) fn wait_readable(fd: RawFd, timeout: Option<Duration>) -> io::Result<bool> {
    let deadline = timeout.map(|t| Instant::now() + t);
    loop {
        let ms: libc::c_int = match deadline {
            None => -1,
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                // Round up so that we never spin on a sub-millisecond remainder.
                let ms = left.as_micros().div_ceil(1000);
                ms.min(i32::MAX as u128) as libc::c_int
            }
        };
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
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
        // SAFETY: valid out-pointers.
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
    let mut fds = [0 as RawFd; 2];
    // SAFETY: valid out-array of two ints.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: the kernel just returned these new descriptors.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A `socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC)`.
pub(crate) fn socketpair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: valid out-array of two ints.
    check(unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    })?;
    // SAFETY: the kernel just returned these new descriptors.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A sealed-size anonymous file (`memfd_create`, close-on-exec) holding `data`, positioned at 0.
pub(crate) fn memfd_with(name: &CStr, data: &[u8]) -> io::Result<OwnedFd> {
    // SAFETY: valid C string.
    let fd = check(unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) })?;
    // SAFETY: the kernel just returned this new descriptor.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    write_all(fd.as_raw_fd(), data)?;
    // SAFETY: plain system call.
    if unsafe { libc::lseek(fd.as_raw_fd(), 0, libc::SEEK_SET) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// Writes all of `data` to `fd`, retrying on `EINTR` and short writes.
pub(crate) fn write_all(fd: RawFd, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        // SAFETY: valid buffer.
        let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        data = &data[n as usize..];
    }
    Ok(())
}

/// `send(MSG_NOSIGNAL)` of all of `data` on a socket, optionally passing one descriptor with the
/// first byte (`SCM_RIGHTS`). A reader that went away is an error, never a `SIGPIPE`.
pub(crate) fn send_all(fd: RawFd, mut data: &[u8], pass: Option<RawFd>) -> io::Result<()> {
    let mut pass = pass;
    while !data.is_empty() {
        let mut iov = libc::iovec {
            iov_base: data.as_ptr() as *mut libc::c_void,
            iov_len: data.len(),
        };
        // Room for one descriptor, aligned for cmsghdr.
        let mut cbuf = [0u64; 8];
        // SAFETY: msghdr is plain old data.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        if let Some(pfd) = pass {
            // SAFETY: CMSG_SPACE is a pure computation.
            let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
            msg.msg_control = cbuf.as_mut_ptr().cast();
            msg.msg_controllen = space;
            // SAFETY: msg_control points at a buffer of at least `space` bytes.
            unsafe {
                let cmsg = libc::CMSG_FIRSTHDR(&msg);
                (*cmsg).cmsg_level = libc::SOL_SOCKET;
                (*cmsg).cmsg_type = libc::SCM_RIGHTS;
                (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize;
                std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), pfd);
            }
        }
        // SAFETY: msg points at valid iovec and control buffers.
        let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        pass = None;
        data = &data[n as usize..];
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
    loop {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut cbuf = [0u64; 16];
        // SAFETY: msghdr is plain old data.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&cbuf);
        // SAFETY: msg points at valid buffers.
        let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        // SAFETY: walking the control messages the kernel filled in, within msg_controllen.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(cmsg);
                    let header = libc::CMSG_LEN(0) as usize;
                    let count = ((*cmsg).cmsg_len as usize).saturating_sub(header)
                        / std::mem::size_of::<RawFd>();
                    for i in 0..count {
                        let raw = std::ptr::read_unaligned(data.cast::<RawFd>().add(i));
                        fds.push(OwnedFd::from_raw_fd(raw));
                    }
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
        }
        return Ok(n as usize);
    }
}

/// Writes a whole small file (used for `/proc/self/uid_map` and friends).
pub(crate) fn write_file(path: &Path, contents: &[u8]) -> io::Result<()> {
    let c = cstring(path)?;
    // SAFETY: valid C string.
    let fd = check(unsafe { libc::open(c.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) })?;
    // SAFETY: we own the descriptor just opened.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    write_all(fd.as_raw_fd(), contents)
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
    // SAFETY: plain prctl/capset system calls with valid arguments.
    unsafe {
        check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_READ, cap, 0, 0, 0) < 0 {
                break;
            }
            if keep & (1u64 << cap) == 0 {
                check(libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0))?;
            }
        }
        // Ambient capabilities may not exist on very old kernels; nothing to clear there.
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        );
        #[repr(C)]
        struct Header {
            version: u32,
            pid: libc::c_int,
        }
        #[repr(C)]
        #[derive(Clone, Copy)]
        struct Data {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        let header = Header {
            version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
            pid: 0,
        };
        let (low, high) = (keep as u32, (keep >> 32) as u32);
        let data = [
            Data {
                effective: low,
                permitted: low,
                inheritable: 0,
            },
            Data {
                effective: high,
                permitted: high,
                inheritable: 0,
            },
        ];
        check_long(libc::syscall(
            libc::SYS_capset,
            &header as *const Header,
            data.as_ptr(),
        ))?;
    }
    Ok(())
}

/// Brings the loopback interface of the current network namespace up.
pub(crate) fn loopback_up() -> io::Result<()> {
    // SAFETY: socket/ioctl on a zeroed ifreq with a valid name.
    unsafe {
        let sock = check(libc::socket(
            libc::AF_INET,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            0,
        ))?;
        let sock = OwnedFd::from_raw_fd(sock);
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
    // SAFETY: valid buffer and length.
    check(unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) })?;
    Ok(())
}

/// `lgetxattr(2)` of a small value; `Ok(None)` when the attribute is absent or unsupported.
pub(crate) fn lgetxattr(path: &Path, name: &CStr) -> io::Result<Option<Vec<u8>>> {
    let c = cstring(path)?;
    let mut buf = [0u8; 256];
    // SAFETY: valid C strings and buffer.
    let n = unsafe {
        libc::lgetxattr(
            c.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        let err = io::Error::last_os_error();
        return match err.raw_os_error() {
            Some(libc::ENODATA) | Some(libc::ENOTSUP) | Some(libc::ERANGE) => Ok(None),
            _ => Err(err),
        };
    }
    Ok(Some(buf[..n as usize].to_vec()))
}

/// Blocks `signals` in the calling thread and returns the set for [`wait_signal`].
pub(crate) fn block_signals(signals: &[libc::c_int]) -> io::Result<libc::sigset_t> {
    // SAFETY: sigset manipulation on a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &s in signals {
            libc::sigaddset(&mut set, s);
        }
        let r = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
        Ok(set)
    }
}

/// `sigwaitinfo` on a set of blocked signals; returns the signal number.
pub(crate) fn wait_signal(set: &libc::sigset_t) -> io::Result<libc::c_int> {
    loop {
        // SAFETY: valid set; a null info pointer is allowed.
        let r = unsafe { libc::sigwaitinfo(set, std::ptr::null_mut()) };
        if r < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        return Ok(r);
    }
}

/// Resets the signal mask and every catchable signal's disposition to the default; used in a
/// forked child right before `execve`.
pub(crate) fn reset_signals() {
    // SAFETY: sigset/sigaction manipulation in the calling thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::pthread_sigmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
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
    // SAFETY: siginfo_t is plain old data; zeroed is valid.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    let r = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // SAFETY: si_pid/si_status are valid to read for SIGCHLD-type siginfo filled by waitid.
    let (got, status) = unsafe { (info.si_pid(), info.si_status()) };
    if r < 0 || got == 0 {
        return None;
    }
    Some(if info.si_code == libc::CLD_EXITED {
        Exit {
            code: Some(status),
            signal: None,
        }
    } else {
        Exit {
            code: None,
            signal: Some(status),
        }
    })
}

/// Marks every descriptor from 3 up close-on-exec (`close_range(3, ~0, CLOSE_RANGE_CLOEXEC)`), so
/// that no descriptor inherited from the caller leaks into the programs started later. Fork-safe.
pub(crate) fn cloexec_from_3() -> io::Result<()> {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: plain system call.
    let r = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, CLOSE_RANGE_CLOEXEC) };
    if r == 0 {
        return Ok(());
    }
    // Kernels before 5.11: every possible descriptor, without allocating.
    // SAFETY: rlimit is plain old data; getrlimit/fcntl are plain system calls.
    let max = unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            lim.rlim_cur.min(1 << 16) as RawFd
        } else {
            1024
        }
    };
    for fd in 3..max {
        // SAFETY: plain system call; EBADF for unused numbers is fine.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    Ok(())
}

/// What the sandbox init received on its standard descriptors.
pub(crate) struct InitFds {
    /// The control socket (moved off stdout, close-on-exec).
    pub ctl: RawFd,
    /// The spec, read from stdin.
    pub spec: Vec<u8>,
}

/// Moves the control socket off stdout, reads the spec from stdin, and points both at
/// `/dev/null`, so nothing else can write into the control channel by accident.
pub(crate) fn take_std_fds() -> io::Result<InitFds> {
    // SAFETY: plain system calls on the standard descriptors.
    let ctl = check(unsafe { libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3) })?;
    let mut spec = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        // SAFETY: reading into a valid buffer.
        let n = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        if n == 0 {
            break;
        }
        spec.extend_from_slice(&buf[..n as usize]);
    }
    // SAFETY: valid C string; dup2 onto the standard descriptors.
    unsafe {
        let null = check(libc::open(
            c"/dev/null".as_ptr(),
            libc::O_RDWR | libc::O_CLOEXEC,
        ))?;
        check(libc::dup2(null, 0))?;
        check(libc::dup2(null, 1))?;
        libc::close(null);
    }
    Ok(InitFds { ctl, spec })
}

/// Moves the terminal passed on stderr to a close-on-exec descriptor of its own and points
/// stderr at `/dev/null`; gives the terminal's descriptor.
pub(crate) fn take_terminal_from_stderr() -> io::Result<RawFd> {
    // SAFETY: plain system calls on the standard descriptors and a valid C string.
    unsafe {
        let tty = check(libc::fcntl(2, libc::F_DUPFD_CLOEXEC, 3))?;
        let null = check(libc::open(
            c"/dev/null".as_ptr(),
            libc::O_RDWR | libc::O_CLOEXEC,
        ))?;
        check(libc::dup2(null, 2))?;
        libc::close(null);
        Ok(tty)
    }
}

/// `CLOCK_MONOTONIC` in milliseconds: comparable across processes (for the debug timings).
pub(crate) fn monotonic_ms() -> f64 {
    // SAFETY: clock_gettime fills a plain struct.
    let ts = unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
        ts
    };
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
}

/// A `socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC)`: datagrams that keep their bounds.
pub(crate) fn socketpair_seqpacket() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: valid out-array of two ints.
    check(unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    })?;
    // SAFETY: the kernel just returned these new descriptors.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
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
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // Room for four descriptors, aligned for cmsghdr.
    let mut cbuf = [0u64; 8];
    // SAFETY: msghdr is plain old data.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !pass.is_empty() {
        let bytes = std::mem::size_of_val(pass) as u32;
        // SAFETY: CMSG_SPACE is a pure computation.
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = unsafe { libc::CMSG_SPACE(bytes) } as usize;
        // SAFETY: msg_control points at a buffer of at least CMSG_SPACE(bytes) bytes.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(bytes) as usize;
            let dst = libc::CMSG_DATA(cmsg).cast::<RawFd>();
            for (i, &p) in pass.iter().enumerate() {
                std::ptr::write_unaligned(dst.add(i), p);
            }
        }
    }
    loop {
        // SAFETY: msg points at valid iovec and control buffers.
        let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        return Ok(());
    }
}

/// Reads a whole file from offset 0 with `pread` (the descriptor's offset is left alone).
pub(crate) fn read_all_at(fd: RawFd) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        // SAFETY: reading into a valid buffer.
        let n = unsafe {
            libc::pread(
                fd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                out.len() as libc::off_t,
            )
        };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        if n == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&buf[..n as usize]);
    }
}

/// `clone(flags | SIGCHLD)` without a new stack: like `fork`, into the new namespaces `flags`
/// names (`CLONE_NEWUSER`, `CLONE_NEWPID`, ...). `Ok(0)` in the child.
///
/// Only for a single-threaded caller, and the child must not rely on the C library's cached
/// thread id (pthread mutexes of the error-checking or recursive kind): it is the parent's.
pub(crate) fn clone_process(flags: libc::c_int) -> io::Result<libc::pid_t> {
    // SAFETY: a fork-like clone (no CLONE_VM, no new stack) in a single-threaded process; the
    // child continues on its own copy of the address space.
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
