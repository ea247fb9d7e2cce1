//! A trial's way out to the internet ([`Network::Internet`](crate::Network::Internet)): the
//! trial's network namespace gets an interface whose other end is a user-mode network stack
//! on the host ([`slirp`]), every connection and datagram of which proctor decides
//! ([`seccomp`]) by the [`policy`]: public addresses only, never the host's loopback, the host's
//! own addresses or other trials (they are behind stacks of their own, with no port forwarded),
//! and under `allowed_hosts` only the addresses the trial's resolver ([`dns`]) gave for an
//! allowed name. What was refused is recorded by proctor, outside the trial's reach.

pub(crate) mod dns;
mod policy;
mod seccomp;
mod slirp;

use std::net::{IpAddr, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use proctor_records::isolation::{
    Egress as EgressRecord, EgressKind, EgressRefusal, EGRESS_REFUSED_MAX,
};

use policy::Policy;
use seccomp::Destination;

pub(crate) use dns::{RESOLVER_ADDR, RESOLV_CONF};

/// What the trial init hands over for its way out: its network and user namespaces and the
/// resolver's socket, bound inside the trial.
pub(crate) struct Request {
    /// `/proc/self/ns/net` of the trial init.
    pub(crate) netns: OwnedFd,
    /// `/proc/self/ns/user` of the trial init (the network namespace's owner).
    pub(crate) userns: OwnedFd,
    /// A UDP socket bound to [`RESOLVER_ADDR`]:53 in the trial's namespace.
    pub(crate) resolver: OwnedFd,
}

/// A running way out; [`Egress::finish`] stops it and gives its record.
pub(crate) struct Egress {
    stack: slirp::Stack,
    shared: Arc<Mutex<Shared>>,
    threads: Vec<JoinHandle<()>>,
    /// Dropped to stop the resolver.
    stop: Option<OwnedFd>,
}

/// What the supervisor and the resolver share.
struct Shared {
    policy: Policy,
    record: EgressRecord,
}

impl Shared {
    fn refuse(
        &mut self,
        kind: EgressKind,
        host: Option<String>,
        address: Option<String>,
        reason: &str,
    ) {
        if self.record.refused.len() < EGRESS_REFUSED_MAX {
            self.record.refused.push(EgressRefusal {
                kind,
                host,
                address,
                reason: reason.to_owned(),
            });
        } else {
            self.record.refused_more += 1;
        }
    }
}

/// Whether this machine can give a trial the internet network; why not, if it cannot.
pub fn available() -> Result<(), String> {
    slirp::find().ok_or_else(|| {
        format!(
            "network \"internet\" needs {} (Debian package slirp4netns), and it is not on PATH",
            slirp::PROGRAM
        )
    })?;
    tun_usable()
}

/// The tun device the stack opens: any user may, where it is mode 0666 (as Debian's udev makes
/// it); root may always (its trials map it to their own root).
fn tun_usable() -> Result<(), String> {
    const TUN: &std::ffi::CStr = c"/dev/net/tun";
    // SAFETY: access(2) and geteuid(2) only read their arguments.
    let ok =
        unsafe { libc::geteuid() == 0 || libc::access(TUN.as_ptr(), libc::R_OK | libc::W_OK) == 0 };
    if ok {
        return Ok(());
    }
    // SAFETY: as above.
    let uid = unsafe { libc::geteuid() };
    Err(format!(
        "network \"internet\" needs /dev/net/tun readable and writable by uid {uid}, and it is not here (Debian's udev makes it mode 0666; as root: chmod 0666 /dev/net/tun)"
    ))
}

/// Starts the way out for `req`, under `allowed_hosts`; returns once the trial's interface is up.
pub(crate) fn start(req: Request, allowed_hosts: &[String]) -> Result<Egress, String> {
    let shared = Arc::new(Mutex::new(Shared {
        policy: Policy::new(allowed_hosts, host_addresses()),
        record: EgressRecord {
            stack: slirp::PROGRAM.to_owned(),
            allowed_hosts: allowed_hosts.to_vec(),
            ..EgressRecord::default()
        },
    }));
    available()?;
    let stack = slirp::start(&req.netns, &req.userns)?;
    let listener = stack
        .listener
        .try_clone()
        .map_err(|e| format!("dup the egress filter: {e}"))?;
    let (stop_r, stop_w) = crate::sys::pipe().map_err(|e| format!("make a pipe: {e}"))?;
    let mut threads = Vec::new();
    let s = Arc::clone(&shared);
    threads.push(spawn("proctor-egress", move || supervise(listener, &s)));
    let resolver = UdpSocket::from(req.resolver);
    let s = Arc::clone(&shared);
    threads.push(spawn("proctor-resolver", move || {
        serve_dns(&resolver, &stop_r, &s)
    }));
    let mut egress = Egress {
        stack,
        shared,
        threads,
        stop: Some(stop_w),
    };
    egress
        .stack
        .wait_ready()
        .inspect_err(|_| egress.stop_all())?;
    Ok(egress)
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(f)
        .unwrap_or_else(|_| std::thread::spawn(|| {}))
}

impl Egress {
    /// Stops the stack, the supervisor and the resolver; gives what they did.
    pub(crate) fn finish(mut self) -> EgressRecord {
        self.stop_all();
        let shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        shared.record.clone()
    }

    fn stop_all(&mut self) {
        self.stop = None;
        self.stack.stop();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Egress {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// The supervisor: decides each call the filter stops until the stack is gone.
fn supervise(listener: OwnedFd, shared: &Mutex<Shared>) {
    loop {
        // The listener hangs up when the stack is gone.
        if !readable(listener.as_fd()) {
            return;
        }
        let stopped = match seccomp::receive(listener.as_fd()) {
            Ok(s) => s,
            // The caller died between poll and receive, or was interrupted.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::EINTR)) => continue,
            Err(_) => return,
        };
        let refuse = decide(&stopped, listener.as_fd(), shared);
        let _ = stopped.respond(listener.as_fd(), refuse);
    }
}

/// The errno a stopped call is refused with, or `None` to let it go on.
fn decide(
    stopped: &seccomp::Stopped,
    listener: BorrowedFd<'_>,
    shared: &Mutex<Shared>,
) -> Option<i32> {
    let errno = if stopped.is_connect() {
        libc::ECONNREFUSED
    } else {
        libc::EACCES
    };
    let mut s = shared.lock().unwrap_or_else(PoisonError::into_inner);
    match stopped.destination(listener) {
        Destination::None => None,
        Destination::Unreadable => {
            s.refuse(
                EgressKind::Connect,
                None,
                None,
                "a destination proctor could not read",
            );
            Some(errno)
        }
        Destination::Inet(to) => match s.policy.address(to.ip()) {
            Ok(()) => {
                s.record.allowed += 1;
                None
            }
            Err(why) => {
                let host = s.policy.name_of(to.ip()).map(str::to_owned);
                s.refuse(EgressKind::Connect, host, Some(to.to_string()), why);
                Some(errno)
            }
        },
    }
}

/// The resolver: answers the trial's queries until `stop` closes.
fn serve_dns(socket: &UdpSocket, stop: &OwnedFd, shared: &Mutex<Shared>) {
    let mut buf = [0u8; 1500];
    loop {
        match wait_either(socket.as_fd(), stop.as_fd()) {
            Some(true) => {}
            Some(false) | None => return,
        }
        let Ok((n, peer)) = socket.recv_from(&mut buf) else {
            continue;
        };
        if let Some(reply) = reply_to(&buf[..n], shared) {
            let _ = socket.send_to(&reply, peer);
        }
    }
}

/// The answer to one query.
fn reply_to(q: &[u8], shared: &Mutex<Shared>) -> Option<Vec<u8>> {
    let question = match dns::parse_query(q) {
        Ok(question) => question,
        Err(rcode) => return dns::error_answer(q, rcode),
    };
    let allowed = shared
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .policy
        .name_allowed(&question.name);
    // Resolve without the lock: the host's resolver may take a while.
    let reachable = |a: IpAddr| policy::not_public(a).is_none();
    let decision = dns::resolve(&question, allowed, reachable);
    let mut s = shared.lock().unwrap_or_else(PoisonError::into_inner);
    let addrs = match &decision {
        dns::Decision::Answer(addrs) => {
            s.record.lookups += 1;
            let addrs: Vec<_> = addrs
                .iter()
                .copied()
                .filter(|a| s.policy.reachable(IpAddr::V4(*a)).is_ok())
                .collect();
            for a in &addrs {
                s.policy.give(IpAddr::V4(*a), &question.name);
            }
            addrs
        }
        dns::Decision::Refuse(why) => {
            s.refuse(EgressKind::Lookup, Some(question.name.clone()), None, why);
            Vec::new()
        }
        dns::Decision::Fail => Vec::new(),
    };
    Some(dns::answer(q, &question, dns::rcode_for(&decision), &addrs))
}

/// Waits until `fd` is readable; `false` once it hung up or failed.
fn readable(fd: BorrowedFd<'_>) -> bool {
    use rustix::event::{poll, PollFd, PollFlags};
    loop {
        let mut fds = [PollFd::new(&fd, PollFlags::IN)];
        match poll(&mut fds, None) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return false,
        }
        let got = fds[0].revents();
        return got.contains(PollFlags::IN) && !got.intersects(PollFlags::HUP | PollFlags::ERR);
    }
}

/// Waits until `a` is readable (`Some(true)`) or `b` is readable or hung up (`Some(false)`);
/// `None` on an error.
fn wait_either(a: BorrowedFd<'_>, b: BorrowedFd<'_>) -> Option<bool> {
    use rustix::event::{poll, PollFd, PollFlags};
    loop {
        let mut fds = [
            PollFd::new(&a, PollFlags::IN),
            PollFd::new(&b, PollFlags::IN),
        ];
        match poll(&mut fds, None) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return None,
        }
        if !fds[1].revents().is_empty() {
            return Some(false);
        }
        if fds[0].revents().contains(PollFlags::IN) {
            return Some(true);
        }
        if !fds[0].revents().is_empty() {
            return None;
        }
    }
}

/// The host's own addresses, on every interface.
fn host_addresses() -> Vec<IpAddr> {
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    addrs
        .filter_map(|a| a.address)
        .filter_map(|a| {
            a.as_sockaddr_in()
                .map(|v4| IpAddr::V4(v4.ip()))
                .or_else(|| a.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip())))
        })
        .collect()
}
