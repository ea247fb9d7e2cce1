//! The sandbox zygote: `init_exe` is executed once per process (not once per trial), and every
//! sandbox init S is forked from it.
//!
//! Executing a large binary costs milliseconds (mapping it, the dynamic loader's relocations,
//! the runtime's start-up), and the caller cannot simply fork: it is multi-threaded, and only a
//! single-threaded process may enter a new user namespace. So the first [`crate::run`] with a
//! given `init_exe` starts `init_exe __sandbox-zygote PARENT_PID` once, from a helper thread that
//! lives as long as the process (the zygote's parent-death signal is tied to that thread), and
//! each run sends the zygote one request: a datagram on a `SOCK_SEQPACKET` socket carrying the
//! spec's memfd and the run's own control socket. The zygote, single-threaded and small, clones
//! the trial init T for it straight into the new namespaces (no intermediate S as with a direct
//! start, so one process less to fork and to tear down) and goes back to waiting; T speaks the
//! same control protocol. T's parent-death signal is tied to the zygote, whose own is tied to the
//! helper thread: if the calling process dies, every sandbox goes with it.
//!
//! The zygote keeps two trial inits cloned ahead of the next requests (as many as commonly come
//! close together), each of which meanwhile has its ids mapped and makes its own network
//! namespace with the loopback up (the costliest of its first steps, and the same for every
//! trial not on the host's network). Those inits read the request socket themselves: a request
//! on a network of its own wakes one of them alone, which tells the zygote once its trial's root
//! is built, and the zygote then clones the next (not sooner: making a network namespace
//! contends with the root's mounts for the kernel's locks). So that work runs while other
//! trials do, instead of between one trial's request and its start, and no process stands
//! between the request and the trial's start. Nothing is reused: each trial init takes one
//! request, and each network namespace serves one trial. A request on the host's network is
//! handed back to the zygote, which clones a trial init for it; when one cloned ahead dies
//! (killed from outside), the zygote reads the next request itself and clones a trial init for
//! it.
//!
//! Set `PROCTOR_SANDBOX_NO_ZYGOTE=1` to execute `init_exe` for every run instead (for comparison).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::Duration;

use crate::start::Start;
use crate::sys;

/// argv[1] that selects the zygote.
pub(crate) const ZYGOTE_ARG: &str = "__sandbox-zygote";

/// What the zygote sends once it is ready for requests.
const READY: &[u8] = b"proctor-sandbox-zygote ready";
/// The request datagram's bytes for a trial on a network of its own (its descriptors: the spec
/// memfd and the control socket, and the agent's terminal when it runs on one).
const REQUEST: &[u8] = b"run";
/// The same for a trial on the host's network, which no trial init cloned ahead can take.
const REQUEST_HOST_NETWORK: &[u8] = b"run on the host's network";
/// From a trial init cloned ahead to the zygote: it took a request, and its root is built.
const TAKEN: &[u8] = b"taken";
/// From a trial init cloned ahead to the zygote: the caller closed the request socket.
const CLOSED: &[u8] = b"closed";

/// How long a new zygote may take to answer.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Whether runs go through a zygote (the default) or execute `init_exe` each time.
pub(crate) fn enabled() -> bool {
    std::env::var_os("PROCTOR_SANDBOX_NO_ZYGOTE").is_none_or(|v| v.is_empty() || v == "0")
}

/// A running zygote: our end of its request socket.
pub(crate) struct Zygote {
    sock: OwnedFd,
}

/// Why a zygote could not be had.
pub(crate) enum StartError {
    /// The binary could not be executed at all.
    Spawn(io::Error),
    /// It ran, but did not answer as a zygote (not a sandbox init, or it died).
    NoAnswer(String),
}

type Reply = Result<Arc<Zygote>, StartError>;

struct SpawnRequest {
    exe: PathBuf,
    reply: mpsc::Sender<Reply>,
}

/// The zygotes by `init_exe`, and the sender to the helper thread that starts them.
struct Registry {
    zygotes: HashMap<PathBuf, Arc<Zygote>>,
    spawner: mpsc::Sender<SpawnRequest>,
}

fn registry() -> &'static Mutex<Registry> {
    static REG: OnceLock<Mutex<Registry>> = OnceLock::new();
    REG.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        // The helper thread never ends: the zygotes' parent-death signal is tied to it.
        std::thread::Builder::new()
            .name("proctor-sandbox-zygote".into())
            .spawn(move || spawner(rx))
            .expect("start the sandbox zygote thread");
        Mutex::new(Registry {
            zygotes: HashMap::new(),
            spawner: tx,
        })
    })
}

/// The helper thread: starts zygotes on request and reaps those that ended.
fn spawner(rx: mpsc::Receiver<SpawnRequest>) {
    let mut children: Vec<Child> = Vec::new();
    while let Ok(req) = rx.recv() {
        children.retain_mut(|c| !matches!(c.try_wait(), Ok(Some(_))));
        let reply = match start(&req.exe) {
            Ok((zygote, child)) => {
                children.push(child);
                Ok(Arc::new(zygote))
            }
            Err(e) => Err(e),
        };
        let _ = req.reply.send(reply);
    }
    // Unreachable in practice (the registry keeps a sender); keep the zygotes alive regardless.
    loop {
        std::thread::park();
    }
}

/// Starts `exe __sandbox-zygote PID` and waits for its greeting.
fn start(exe: &Path) -> Result<(Zygote, Child), StartError> {
    let (ours, theirs) = sys::socketpair_seqpacket().map_err(StartError::Spawn)?;
    let mut cmd = Command::new(exe);
    cmd.arg(ZYGOTE_ARG)
        .arg(std::process::id().to_string())
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::from(theirs))
        .process_group(0);
    if let Some(v) = std::env::var_os(crate::ids::SINGLE_ID_ENV) {
        cmd.env(crate::ids::SINGLE_ID_ENV, v);
    }
    if let Some(v) = std::env::var_os(crate::huge_text::DISABLE_ENV) {
        cmd.env(crate::huge_text::DISABLE_ENV, v);
    }
    if let Some(v) = std::env::var_os(crate::SANDBOX_DEBUG_ENV) {
        cmd.env(crate::SANDBOX_DEBUG_ENV, v)
            .stderr(Stdio::inherit());
    } else {
        cmd.stderr(Stdio::null());
    }
    let mut child = cmd.spawn().map_err(StartError::Spawn)?;
    drop(cmd);
    let answer = (|| -> Result<(), String> {
        if !sys::wait_readable(ours.as_fd(), Some(START_TIMEOUT)).map_err(|e| e.to_string())? {
            return Err(format!("it did not answer within {START_TIMEOUT:?}"));
        }
        let mut buf = [0u8; 64];
        let mut fds = Vec::new();
        let n =
            sys::recv_with_fds(ours.as_raw_fd(), &mut buf, &mut fds).map_err(|e| e.to_string())?;
        if &buf[..n] == READY {
            Ok(())
        } else {
            Err("it did not answer as a sandbox init (does its main call \
                 proctor_sandbox::enter_if_requested first?)"
                .to_owned())
        }
    })();
    match answer {
        Ok(()) => Ok((Zygote { sock: ours }, child)),
        Err(e) => {
            let _ = child.kill();
            let status = child.wait().map(|s| format!(", {s}")).unwrap_or_default();
            Err(StartError::NoAnswer(format!("{e}{status}")))
        }
    }
}

/// The zygote for `exe`, started if needed.
fn get(exe: &Path) -> Reply {
    let spawner = {
        let reg = registry().lock().unwrap_or_else(|p| p.into_inner());
        if let Some(z) = reg.zygotes.get(exe) {
            return Ok(z.clone());
        }
        reg.spawner.clone()
    };
    let (tx, rx) = mpsc::channel();
    let dead = || StartError::NoAnswer("the zygote thread is gone".to_owned());
    spawner
        .send(SpawnRequest {
            exe: exe.to_path_buf(),
            reply: tx,
        })
        .map_err(|_| dead())?;
    let z = rx.recv().map_err(|_| dead())??;
    let mut reg = registry().lock().unwrap_or_else(|p| p.into_inner());
    // Another thread may have started one meanwhile: use the first, let ours end (its socket
    // closes when the last reference goes, and it exits).
    Ok(reg.zygotes.entry(exe.to_path_buf()).or_insert(z).clone())
}

fn forget(exe: &Path, z: &Arc<Zygote>) {
    let mut reg = registry().lock().unwrap_or_else(|p| p.into_inner());
    if reg.zygotes.get(exe).is_some_and(|cur| Arc::ptr_eq(cur, z)) {
        reg.zygotes.remove(exe);
    }
}

/// Has the zygote for `exe` start a trial init that reads its spec from `spec` and talks on
/// `ctl` (and gives its agent `terminal`, when there is one). A zygote that went away is
/// replaced once.
pub(crate) fn fork_init(
    exe: &Path,
    spec: &OwnedFd,
    ctl: &OwnedFd,
    terminal: Option<BorrowedFd<'_>>,
    host_network: bool,
) -> Result<(), StartError> {
    let mut fds = vec![spec.as_raw_fd(), ctl.as_raw_fd()];
    fds.extend(terminal.map(|t| t.as_raw_fd()));
    let request = if host_network {
        REQUEST_HOST_NETWORK
    } else {
        REQUEST
    };
    let mut retried = false;
    loop {
        let z = get(exe)?;
        match sys::send_with_fds(z.sock.as_raw_fd(), request, &fds) {
            Ok(()) => return Ok(()),
            Err(e) => {
                forget(exe, &z);
                if retried {
                    return Err(StartError::NoAnswer(format!(
                        "cannot reach the sandbox zygote: {e}"
                    )));
                }
                retried = true;
            }
        }
    }
}

// ------------------------------------------------------------------------------------------
// The zygote process itself.

/// The trial init's entry point: control socket, spec bytes, how it began (for a trial init
/// cloned for its request, the pipe on which the zygote sends the id map once it is written, see
/// [`crate::ids`]), and the agent's terminal when it runs on one.
pub(crate) type TrialEntry = fn(RawFd, Vec<u8>, Start, Option<RawFd>) -> !;

/// The clone flags of every trial init. The network namespace, the costly one to create, is
/// left to T: that work then runs in parallel for concurrent trials instead of one after the
/// other here.
const TRIAL_FLAGS: libc::c_int = libc::CLONE_NEWUSER
    | libc::CLONE_NEWNS
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS;

/// A trial init cloned ahead of its request (see [`serve`]): the zygote's end of the socket on
/// which it says it took a request ([`TAKEN`]), hands one back ([`REQUEST_HOST_NETWORK`]) or
/// saw the caller close ([`CLOSED`]).
struct Warm {
    sock: OwnedFd,
}

/// Runs the zygote (in `init_exe __sandbox-zygote PARENT_PID`, its request socket on stdout);
/// never returns. Each request clones a trial init into new namespaces, which runs `trial`.
pub(crate) fn serve(parent: libc::pid_t, trial: TrialEntry) -> ! {
    let (sock, lifeline) = start_up(parent);
    // Before the first fork: every trial init forked after it finds the code mapped.
    if crate::huge_text::enabled() {
        let remapped = crate::huge_text::remap();
        crate::trace::trace(&format!(
            "zygote code on huge pages: {} MiB{}",
            remapped.bytes >> 20,
            remapped
                .skipped
                .iter()
                .map(|s| format!("; {s}"))
                .collect::<String>()
        ));
    }
    // How each trial's ids are mapped: decided once. So is how many capabilities there are to
    // drop in each agent's process.
    let ids = crate::ids::Plan::for_this_process();
    sys::last_capability();
    if sys::send_with_fds(sock, READY, &[]).is_err() {
        sys::exit_now(2);
    }
    crate::trace::trace("zygote ready");
    // Trial inits are kept cloned ahead (two: as many as requests that commonly come close
    // together), their ids mapped and their networks made while other trials run. They read the
    // request socket themselves, so that a request on a network of its own wakes one of them
    // and nothing else; each tells us once it has taken one and built its trial's root (we then
    // clone the next), hands back one on the host's network, and says when the caller has
    // closed.
    let clones = Cloner {
        sock,
        lifeline: &lifeline,
        ids: &ids,
        trial,
    };
    let mut warm: Vec<Warm> = Vec::new();
    // After one died without a word, the next request is served here before more are cloned
    // (one that cannot live does not cost a clone per turn of this loop).
    let mut clone_ahead = true;
    let mut buf = [0u8; 64];
    loop {
        while clone_ahead && warm.len() < AHEAD {
            match clones.ahead(&warm) {
                Some(w) => warm.push(w),
                None => break,
            }
        }
        if !warm.is_empty() {
            let Some(i) = first_readable(&warm) else {
                continue;
            };
            let mut fds = Vec::new();
            let word = sys::recv_with_fds(warm[i].sock.as_raw_fd(), &mut buf, &mut fds);
            match word.as_ref().map(|&n| &buf[..n]) {
                Ok(TAKEN) => {
                    warm.remove(i);
                }
                Ok(CLOSED) => sys::exit_now(0),
                Ok(REQUEST_HOST_NETWORK) => clones.for_request(&warm, fds),
                _ => {
                    warm.remove(i);
                    clone_ahead = false;
                }
            }
            continue;
        }
        let mut fds = Vec::new();
        let n = match sys::recv_with_fds(sock, &mut buf, &mut fds) {
            Ok(n) => n,
            Err(_) => sys::exit_now(1),
        };
        if n == 0 {
            // The caller closed its end: it is gone or done.
            sys::exit_now(0);
        }
        if matches!(&buf[..n], REQUEST | REQUEST_HOST_NETWORK) {
            clones.for_request(&warm, fds);
            clone_ahead = true;
        }
    }
}

/// How many trial inits the zygote keeps cloned ahead.
const AHEAD: usize = 2;

/// The first of `warm` with a word for the zygote, waiting as long as it takes; `None` when the
/// wait was interrupted.
fn first_readable(warm: &[Warm]) -> Option<usize> {
    use rustix::event::{PollFd, PollFlags};
    let mut fds: Vec<PollFd<'_>> = warm
        .iter()
        .map(|w| PollFd::new(&w.sock, PollFlags::IN))
        .collect();
    rustix::event::poll(&mut fds, None).ok()?;
    fds.iter().position(|f| !f.revents().is_empty())
}

/// What the zygote clones trial inits with: its request socket, the lifeline, how ids are
/// mapped and the trial's entry point.
struct Cloner<'a> {
    sock: RawFd,
    lifeline: &'a (OwnedFd, OwnedFd),
    ids: &'a crate::ids::Plan,
    trial: TrialEntry,
}

impl Cloner<'_> {
    /// Clones a trial init for one request (its descriptors: the spec, the control socket and
    /// the agent's terminal when it runs on one); a request without them is dropped. `warm`,
    /// the trial inits cloned ahead, keep waiting.
    fn for_request(&self, warm: &[Warm], fds: Vec<OwnedFd>) {
        let Some(request) = Request::of(fds) else {
            return;
        };
        // T waits on this pipe until its ids are mapped (by us, from outside its namespace).
        let (go_r, go_w) = match sys::pipe() {
            Ok(p) => p,
            Err(e) => {
                refuse(
                    &request.ctl,
                    &format!("the sandbox zygote cannot make a pipe: {e}"),
                );
                return;
            }
        };
        match sys::clone_process(TRIAL_FLAGS) {
            Ok(0) => {
                drop(go_w);
                let mut ours = vec![self.sock];
                ours.extend(warm.iter().map(|w| w.sock.as_raw_fd()));
                leave_zygote(&ours, self.lifeline);
                request.run(Start::Cold { go: go_r }, self.trial)
            }
            Ok(pid) => {
                drop(go_r);
                crate::ids::send(go_w, self.ids.apply(pid));
            }
            Err(e) => refuse(
                &request.ctl,
                &format!("the sandbox zygote cannot start a trial init: {e}"),
            ),
        }
        // Our copies of this request's descriptors close here.
    }

    /// Clones a trial init ahead of its request (`others`: those cloned ahead already, whose
    /// sockets it closes); `None` if it cannot be (the next request then gets one cloned for it,
    /// which reports why).
    fn ahead(&self, others: &[Warm]) -> Option<Warm> {
        let (zygote_end, init_end) = sys::socketpair_seqpacket().ok()?;
        let (go_r, go_w) = sys::pipe().ok()?;
        match sys::clone_process(TRIAL_FLAGS) {
            Ok(0) => {
                drop((go_w, zygote_end));
                let theirs: Vec<RawFd> = others.iter().map(|w| w.sock.as_raw_fd()).collect();
                become_warm_init(
                    self.sock,
                    self.lifeline,
                    &theirs,
                    init_end,
                    go_r,
                    self.trial,
                )
            }
            Ok(pid) => {
                drop((go_r, init_end));
                crate::ids::send(go_w, self.ids.apply(pid));
                Some(Warm { sock: zygote_end })
            }
            Err(_) => None,
        }
    }
}

/// The zygote's start: it dies with `parent`, takes its request socket, closes every other
/// descriptor and leaves its trial inits to the kernel to reap; gives the socket and the
/// lifeline, a pipe whose write end only the zygote holds (a new trial init sees it closed if
/// the zygote died before the init's parent-death signal was in place).
fn start_up(parent: libc::pid_t) -> (RawFd, (OwnedFd, OwnedFd)) {
    // SAFETY: getppid cannot fail.
    if sys::set_parent_death_signal(libc::SIGKILL).is_err() || unsafe { libc::getppid() } != parent
    {
        sys::exit_now(2);
    }
    let sock = match sys::take_std_fds() {
        Ok(fds) => fds.ctl,
        Err(_) => sys::exit_now(2),
    };
    sys::set_name(c"proctor-zygote");
    if sys::cloexec_from_3().is_err() {
        sys::exit_now(2);
    }
    // The trial inits are reaped by the kernel: the caller follows them through their pidfds.
    // SAFETY: setting a signal disposition.
    unsafe { libc::signal(libc::SIGCHLD, libc::SIG_IGN) };
    match sys::pipe() {
        Ok(lifeline) => (sock, lifeline),
        Err(_) => sys::exit_now(2),
    }
}

/// One request's descriptors, as the trial init T takes them.
struct Request {
    spec: OwnedFd,
    ctl: OwnedFd,
    terminal: Option<OwnedFd>,
}

impl Request {
    /// The request carried by `fds` (the spec, the control socket, and the agent's terminal
    /// when it runs on one); `None` for any other number of descriptors.
    fn of(mut fds: Vec<OwnedFd>) -> Option<Request> {
        if !(2..=3).contains(&fds.len()) {
            return None;
        }
        let terminal = (fds.len() == 3).then(|| fds.pop()).flatten();
        let ctl = fds.pop()?;
        let spec = fds.pop()?;
        Some(Request {
            spec,
            ctl,
            terminal,
        })
    }

    /// In T, out of the zygote: reads the spec and runs `trial`, begun as `start` says.
    fn run(self, start: Start, trial: TrialEntry) -> ! {
        let data = match sys::read_all_at(self.spec.as_fd()) {
            Ok(d) => d,
            Err(_) => sys::exit_now(2),
        };
        drop(self.spec);
        let ctl = std::os::fd::IntoRawFd::into_raw_fd(self.ctl);
        let terminal = self.terminal.map(std::os::fd::IntoRawFd::into_raw_fd);
        trial(ctl, data, start, terminal)
    }
}

/// In a trial init cloned ahead: closes the zygote's sockets to the others cloned ahead
/// (`others`), takes the first steps any trial on a network of its own takes
/// ([`crate::start::warm_up`]), then reads requests from the zygote's request socket `sock`
/// itself. A request on a network of its own it takes and runs `trial` with, which tells the
/// zygote on `zygote` once the trial's root is built ([`tell_root_built`]); one on the host's
/// network it hands back to the zygote (with its descriptors) and reads on. When the caller
/// closes, it tells the zygote and ends.
fn become_warm_init(
    sock: RawFd,
    lifeline: &(OwnedFd, OwnedFd),
    others: &[RawFd],
    zygote: OwnedFd,
    go: OwnedFd,
    trial: TrialEntry,
) -> ! {
    leave_zygote(others, lifeline);
    sys::set_name(c"proctor-trial");
    let mut warmed = crate::start::warm_up(go);
    let mut buf = [0u8; 64];
    let request = loop {
        let mut fds = Vec::new();
        let n = match sys::recv_with_fds(sock, &mut buf, &mut fds) {
            Ok(n) => n,
            Err(_) => sys::exit_now(1),
        };
        match &buf[..n] {
            [] => {
                let _ = sys::send_with_fds(zygote.as_raw_fd(), CLOSED, &[]);
                sys::exit_now(0);
            }
            REQUEST => {
                if let Some(request) = Request::of(fds) {
                    break request;
                }
            }
            REQUEST_HOST_NETWORK => {
                let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
                let _ = sys::send_with_fds(zygote.as_raw_fd(), REQUEST_HOST_NETWORK, &raw);
            }
            _ => {}
        }
    };
    // Taken: it reads no more requests. The zygote hears of it once the root is built
    // (`tell_root_built`), or when this process ends, whichever comes first.
    // SAFETY: closing our copy of the zygote's request socket, which nothing here uses again.
    unsafe { libc::close(sock) };
    warmed.zygote = Some(zygote);
    request.run(Start::Warm(warmed), trial)
}

/// In a trial init cloned ahead that took a request, once its root is built: tells the zygote
/// (which then clones the next one ahead) and closes the socket.
pub(crate) fn tell_root_built(zygote: OwnedFd) {
    let _ = sys::send_with_fds(zygote.as_raw_fd(), TAKEN, &[]);
}

/// A trial init's first step out of the zygote: closes the zygote's own descriptors in `ours`
/// and the lifeline's write end, restores the default SIGCHLD, and ties its
/// life to the zygote's (exiting at once if the zygote is already gone).
fn leave_zygote(ours: &[RawFd], (lifeline_r, lifeline_w): &(OwnedFd, OwnedFd)) {
    // SAFETY: closing our copies of descriptors nothing else here uses; restoring the default
    // SIGCHLD.
    unsafe {
        for &fd in ours.iter().filter(|&&fd| fd >= 0) {
            libc::close(fd);
        }
        libc::close(lifeline_w.as_raw_fd());
        libc::signal(libc::SIGCHLD, libc::SIG_DFL);
    }
    if sys::set_parent_death_signal(libc::SIGKILL).is_err()
        || sys::wait_readable(lifeline_r.as_fd(), Some(Duration::ZERO)).unwrap_or(true)
    {
        sys::exit_now(2);
    }
    // SAFETY: closing our copy of the lifeline's read end.
    unsafe { libc::close(lifeline_r.as_raw_fd()) };
}

/// Tells the caller on `ctl` why its request gets no trial init.
fn refuse(ctl: &OwnedFd, message: &str) {
    let line = crate::msg::Msg::Error {
        message: message.to_owned(),
    }
    .line();
    let _ = sys::send_all(ctl.as_raw_fd(), &line, None);
}

/// Whether argv[1] selects the zygote.
pub(crate) fn is_zygote_arg(arg: &OsStr) -> bool {
    arg == OsStr::new(ZYGOTE_ARG)
}
