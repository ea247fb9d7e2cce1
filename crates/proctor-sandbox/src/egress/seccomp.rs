//! The egress filter: the network stack's process runs under a seccomp filter that stops every
//! `connect`, `sendto`, `sendmsg` and `sendmmsg` it makes until proctor, reading the destination
//! from its memory, lets the call go on or refuses it. The stack is proctor's child and handles
//! the trial's packets in one thread, so the destination read is the one the call uses.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

/// The calls that carry a destination, stopped for a decision.
const WATCHED: [libc::c_long; 4] = [
    libc::SYS_connect,
    libc::SYS_sendto,
    libc::SYS_sendmsg,
    libc::SYS_sendmmsg,
];

/// The most messages of one `sendmmsg` read (the stack sends one at a time).
const MMSG_MAX: u64 = 64;

/// The filter's program: any other architecture is killed; the watched calls notify; the rest
/// is allowed.
pub(crate) fn program() -> Vec<libc::sock_filter> {
    let stmt = |code: u32, k: u32| libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let jeq = |k: u32, jt: u8, jf: u8| libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    };
    let load = |offset: u32| stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, offset);
    let n = WATCHED.len() as u8;
    let mut p = vec![
        load(4), // seccomp_data.arch
        jeq(AUDIT_ARCH, 1, 0),
        stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_KILL_PROCESS),
        load(0), // seccomp_data.nr
    ];
    for (i, nr) in WATCHED.iter().enumerate() {
        // Jump to the notify at the end when equal; fall through to the next test otherwise.
        p.push(jeq(*nr as u32, n - i as u8, 0));
    }
    p.push(stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW));
    p.push(stmt(
        libc::BPF_RET | libc::BPF_K,
        libc::SECCOMP_RET_USER_NOTIF,
    ));
    p
}

/// In the child, before it executes the stack: no new privileges, then the filter; gives the
/// listener's descriptor number. Async-signal-safe: system calls only, on memory made before the
/// fork.
///
/// # Safety
/// Call only in a freshly forked child (`pre_exec`).
pub(crate) unsafe fn install(prog: &[libc::sock_filter]) -> io::Result<RawFd> {
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    let fd = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &fprog as *const libc::sock_fprog,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd as RawFd)
}

/// A stopped call's destination, as the supervisor read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Destination {
    /// No internet destination (a connected socket's send, a local or netlink socket): let go.
    None,
    /// An internet address and port.
    Inet(SocketAddr),
    /// The destination could not be read: refused.
    Unreadable,
}

/// One stopped call.
pub(crate) struct Stopped {
    id: u64,
    pid: u32,
    nr: i32,
    args: [u64; 6],
}

/// Receives the next stopped call on `listener` (blocking).
pub(crate) fn receive(listener: BorrowedFd<'_>) -> io::Result<Stopped> {
    // SAFETY: a zeroed seccomp_notif is valid input (the kernel requires it zeroed).
    let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: the ioctl writes one seccomp_notif into `n`.
    let rc = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV as _,
            &mut n,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Stopped {
        id: n.id,
        pid: n.pid,
        nr: n.data.nr,
        args: n.data.args,
    })
}

impl Stopped {
    /// Where the call sends to, read from the caller's memory; checked still valid afterwards.
    pub(crate) fn destination(&self, listener: BorrowedFd<'_>) -> Destination {
        let d = self.read_destination();
        if !still_valid(listener, self.id) {
            return Destination::Unreadable;
        }
        d
    }

    fn read_destination(&self) -> Destination {
        let nr = i64::from(self.nr);
        let [_, a1, a2, _, a4, a5] = self.args;
        if nr == libc::SYS_connect {
            self.sockaddr(a1, a2)
        } else if nr == libc::SYS_sendto {
            self.sockaddr(a4, a5)
        } else if nr == libc::SYS_sendmsg {
            self.msghdr_name(a1)
        } else if nr == libc::SYS_sendmmsg {
            let count = a2.min(MMSG_MAX);
            let size = std::mem::size_of::<libc::mmsghdr>() as u64;
            let mut first = Destination::None;
            for i in 0..count {
                match self.msghdr_name(a1 + i * size) {
                    Destination::None => {}
                    Destination::Unreadable => return Destination::Unreadable,
                    d @ Destination::Inet(_) => {
                        if first == Destination::None {
                            first = d;
                        } else if first != d {
                            // One decision per call: messages to several places are refused.
                            return Destination::Unreadable;
                        }
                    }
                }
            }
            if a2 > MMSG_MAX {
                return Destination::Unreadable;
            }
            first
        } else {
            Destination::None
        }
    }

    fn msghdr_name(&self, at: u64) -> Destination {
        let mut h = [0u8; std::mem::size_of::<libc::msghdr>()];
        if self.read(at, &mut h).is_err() {
            return Destination::Unreadable;
        }
        // SAFETY: msghdr is plain old data, and `h` holds exactly one.
        let h: libc::msghdr = unsafe { std::ptr::read_unaligned(h.as_ptr().cast()) };
        self.sockaddr(h.msg_name as u64, u64::from(h.msg_namelen))
    }

    fn sockaddr(&self, at: u64, len: u64) -> Destination {
        if at == 0 {
            return Destination::None;
        }
        let mut buf = [0u8; 28];
        let len = (len as usize).min(buf.len());
        if len < 2 || self.read(at, &mut buf[..len]).is_err() {
            return if len < 2 {
                Destination::None
            } else {
                Destination::Unreadable
            };
        }
        parse_sockaddr(&buf[..len])
    }

    fn read(&self, at: u64, out: &mut [u8]) -> io::Result<()> {
        let local = libc::iovec {
            iov_base: out.as_mut_ptr().cast(),
            iov_len: out.len(),
        };
        let remote = libc::iovec {
            iov_base: at as *mut libc::c_void,
            iov_len: out.len(),
        };
        // SAFETY: reads another process's memory into `out`, whose length both iovecs give.
        let n =
            unsafe { libc::process_vm_readv(self.pid as libc::pid_t, &local, 1, &remote, 1, 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n as usize != out.len() {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        Ok(())
    }

    /// Lets the call go on, or refuses it with `errno`.
    pub(crate) fn respond(&self, listener: BorrowedFd<'_>, refuse: Option<i32>) -> io::Result<()> {
        let resp = libc::seccomp_notif_resp {
            id: self.id,
            val: 0,
            error: refuse.map_or(0, |e| -e),
            flags: if refuse.is_some() {
                0
            } else {
                libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32
            },
        };
        // SAFETY: the ioctl reads one seccomp_notif_resp.
        let rc = unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SEND as _,
                &resp,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Whether this is a `connect` (refused with ECONNREFUSED, so the trial sees a reset).
    pub(crate) fn is_connect(&self) -> bool {
        i64::from(self.nr) == libc::SYS_connect
    }
}

/// Whether the stopped call `id` is still waiting (its caller alive, the same call).
fn still_valid(listener: BorrowedFd<'_>, id: u64) -> bool {
    // SAFETY: the ioctl reads one u64.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID as _,
            &id,
        ) == 0
    }
}

/// An internet socket address from its bytes; any other family is no internet destination.
pub(crate) fn parse_sockaddr(b: &[u8]) -> Destination {
    let family = u16::from_ne_bytes([b[0], b[1]]);
    match i32::from(family) {
        libc::AF_INET if b.len() >= 8 => {
            let port = u16::from_be_bytes([b[2], b[3]]);
            let ip = Ipv4Addr::new(b[4], b[5], b[6], b[7]);
            Destination::Inet(SocketAddr::new(IpAddr::V4(ip), port))
        }
        libc::AF_INET6 if b.len() >= 24 => {
            let port = u16::from_be_bytes([b[2], b[3]]);
            let mut a = [0u8; 16];
            a.copy_from_slice(&b[8..24]);
            Destination::Inet(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(a)), port))
        }
        libc::AF_INET | libc::AF_INET6 => Destination::Unreadable,
        _ => Destination::None,
    }
}

/// Takes descriptor `fd` of process `pid` into this one (`pidfd_getfd`).
pub(crate) fn take_fd(pid: libc::pid_t, fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: plain system calls; the descriptors they give are ours to own.
    unsafe {
        let pidfd = libc::syscall(libc::SYS_pidfd_open, pid, 0);
        if pidfd < 0 {
            return Err(io::Error::last_os_error());
        }
        let pidfd = OwnedFd::from_raw_fd(pidfd as RawFd);
        let got = libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0);
        if got < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(OwnedFd::from_raw_fd(got as RawFd))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_notifies_exactly_the_watched_calls() {
        let p = program();
        // Simulate the program over a seccomp_data for each call of interest.
        let run = |arch: u32, nr: u32| -> u32 {
            let mut pc = 0usize;
            let mut acc = 0u32;
            loop {
                let i = p[pc];
                let class = u32::from(i.code) & 0x07;
                match class {
                    0x00 => acc = if i.k == 4 { arch } else { nr },
                    0x05 => {
                        pc += if acc == i.k { i.jt } else { i.jf } as usize;
                    }
                    0x06 => return i.k,
                    _ => panic!("unexpected instruction"),
                }
                pc += 1;
            }
        };
        for nr in WATCHED {
            assert_eq!(run(AUDIT_ARCH, nr as u32), libc::SECCOMP_RET_USER_NOTIF);
        }
        for nr in [
            libc::SYS_read,
            libc::SYS_socket,
            libc::SYS_execve,
            libc::SYS_write,
        ] {
            assert_eq!(run(AUDIT_ARCH, nr as u32), libc::SECCOMP_RET_ALLOW);
        }
        assert_eq!(
            run(0x4000_0003, libc::SYS_connect as u32),
            libc::SECCOMP_RET_KILL_PROCESS
        );
    }

    #[test]
    fn socket_addresses_are_read_by_family() {
        let mut v4 = [0u8; 16];
        v4[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        v4[2..4].copy_from_slice(&443u16.to_be_bytes());
        v4[4..8].copy_from_slice(&[151, 101, 0, 223]);
        assert_eq!(
            parse_sockaddr(&v4),
            Destination::Inet("151.101.0.223:443".parse().unwrap())
        );
        let mut un = [0u8; 16];
        un[..2].copy_from_slice(&(libc::AF_UNIX as u16).to_ne_bytes());
        assert_eq!(parse_sockaddr(&un), Destination::None);
        let mut short = [0u8; 4];
        short[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        assert_eq!(parse_sockaddr(&short), Destination::Unreadable);
    }
}
