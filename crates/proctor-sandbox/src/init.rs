//! The sandbox init: the code of the trial's own processes.
//!
//! Started by the zygote (see `zygote`), the trial init T is cloned straight into its new
//! namespaces and there are two processes, T and A. Started directly (`init_exe __sandbox
//! PARENT_PID`, with `PROCTOR_SANDBOX_NO_ZYGOTE=1`), there are three, all single-threaded:
//! - **S** (the executed binary) reads the spec, opens the host files, clones T into new user,
//!   mount, PID, IPC, UTS and network namespaces, maps T's ids from outside (see `ids`), passes
//!   T's pidfd to the parent, and waits for T.
//! - **T** is PID 1 of the trial's PID namespace. It builds the root, starts the services, runs
//!   the agent under A, enforces the wall timeout, stops the services, kills and reaps whatever
//!   is left, and reports `Done`. When T exits the kernel kills every process left in the trial.
//! - **A** is PID 1 of the agent's own nested PID namespace, in its own mount namespace with the
//!   agent's narrower view. It runs the agent command and reports how its main process ended;
//!   when A exits, the kernel kills every leftover process of the agent.
//! - **C**, one per interface call while the agent runs: forked by T in T's own PID namespace
//!   (out of the agent's sight), not dumpable like T. It runs the allowed program the shim asked
//!   for and alone reports the call to the calls log (see [`crate::calls`]).

use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::exec::{Enter, ExecPlan};
use crate::msg::Msg;
use crate::output::{Capped, Pumps};
use crate::report::{BoundsReport, Exit, ProbeOutcome, ServiceReport};
use crate::rootfs;
use crate::services::{self, HealthRun};
use crate::spec::{Network, SandboxSpec, ServiceSpec};
use crate::start::{Start, Warmed};
use crate::sys;
use crate::trace::trace;

/// argv[1] that selects the sandbox init.
pub(crate) const INIT_ARG: &str = "__sandbox";

/// argv[3] of a directly started init whose agent runs on the terminal passed as its stderr.
pub(crate) const TERMINAL_ARG: &str = "terminal";

/// The control socket back to the parent, and the lines held for its next write.
pub(crate) struct Ctl(RawFd, std::cell::RefCell<Vec<u8>>);

impl Ctl {
    fn new(fd: RawFd) -> Ctl {
        Ctl(fd, std::cell::RefCell::new(Vec::new()))
    }

    /// Sends one message (after any held); a parent that went away is ignored (PDEATHSIG will
    /// follow).
    pub(crate) fn send(&self, msg: &Msg) {
        self.send_lines(&msg.line());
    }

    /// Holds one message that nothing waits for, to go with the next one sent: one write, and
    /// one wake of the parent, fewer. Only before the agent init is forked (which must not
    /// inherit it).
    fn hold(&self, msg: &Msg) {
        self.1.borrow_mut().extend(msg.line());
    }

    /// Sends lines made by [`Msg::line`], one or more, after any held, in one write.
    fn send_lines(&self, lines: &[u8]) {
        let mut held = self.1.borrow_mut();
        if held.is_empty() {
            let _ = sys::send_all(self.0, lines, None);
        } else {
            held.extend_from_slice(lines);
            let _ = sys::send_all(self.0, &held, None);
            held.clear();
        }
    }

    fn send_with_fd(&self, msg: &Msg, fd: RawFd) {
        debug_assert!(
            self.1.borrow().is_empty(),
            "a held line goes before a descriptor"
        );
        let _ = sys::send_all(self.0, &msg.line(), Some(fd));
    }

    fn error(&self, message: impl Into<String>) {
        let mut message = message.into();
        truncate(&mut message, 2000);
        self.send(&Msg::Error { message });
    }
}

fn truncate(s: &mut String, max: usize) {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
}

/// If this process was started as the sandbox init (or the zygote), run it and exit; otherwise
/// return.
///
/// Protocol: `init_exe __sandbox PARENT_PID`, the spec (JSON) on stdin, the control socket on
/// stdout. Passing both as standard descriptors lets the parent start us with `posix_spawn`.
/// `init_exe __sandbox PARENT_PID terminal` also has the agent's terminal on stderr.
/// Or `init_exe __sandbox-zygote PARENT_PID`, the zygote's request socket on stdout: see
/// [`crate::zygote`].
pub(crate) fn enter_if_requested() {
    let mut args = std::env::args_os().skip(1);
    let Some(first) = args.next() else {
        return;
    };
    let zygote = crate::zygote::is_zygote_arg(&first);
    if !zygote && first != OsStr::new(INIT_ARG) {
        return;
    }
    let parent = args
        .next()
        .and_then(|s| s.to_str().and_then(|s| s.parse::<libc::pid_t>().ok()));
    let on_terminal = args.next().is_some_and(|a| a == OsStr::new(TERMINAL_ARG));
    let Some(parent) = parent else {
        eprintln!("usage: {INIT_ARG} PARENT_PID <SPEC.json >&CONTROL_SOCKET (internal to proctor-sandbox)");
        sys::exit_now(2);
    };
    if zygote {
        crate::zygote::serve(parent, zygote_trial_entry);
    }
    // Die with the parent; if it is already gone, stop now.
    // SAFETY: getppid cannot fail.
    if sys::set_parent_death_signal(libc::SIGKILL).is_err() || unsafe { libc::getppid() } != parent
    {
        sys::exit_now(2);
    }
    let fds = match sys::take_std_fds() {
        Ok(fds) => fds,
        Err(_) => sys::exit_now(2),
    };
    let terminal = match on_terminal.then(sys::take_terminal_from_stderr).transpose() {
        Ok(t) => t,
        Err(_) => sys::exit_now(2),
    };
    init_main(fds.ctl, fds.spec, terminal);
}

/// S, from the start: the control socket, the spec's bytes and the agent's terminal (if it runs
/// on one) in hand. Never returns.
fn init_main(ctl_fd: RawFd, spec: Vec<u8>, terminal: Option<RawFd>) -> ! {
    // Nothing this process inherited (the control socket included) may reach the programs it
    // starts.
    if sys::cloexec_from_3().is_err() {
        sys::exit_now(2);
    }
    let ctl = Ctl::new(ctl_fd);
    // Found before any fork, as the zygote does: a child never initializes it.
    sys::last_capability();
    trace("init started");
    // A panic anywhere below (in S, or in the forked T or A) must end that process here: it must
    // never unwind into the host binary's `main`.
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        sandbox_main(&ctl, &spec, terminal)
    }));
    let code = match result {
        Ok(Ok(code)) => code,
        Ok(Err(e)) => {
            ctl.error(e);
            1
        }
        Err(_) => {
            ctl.error("the sandbox init panicked (a bug in proctor-sandbox)");
            101
        }
    };
    sys::exit_now(code);
}

/// Host files the trial writes to, opened by S before the root changes, and the agent's
/// terminal when it runs on one.
struct Files {
    devnull: File,
    stdout: File,
    stderr: File,
    logs: Vec<File>,
    terminal: Option<File>,
    /// The trial's interface calls: served by T while the agent runs (see [`crate::calls`]).
    calls: std::cell::RefCell<Option<crate::calls::CallServer>>,
}

fn open_out(path: &Path) -> Result<File, String> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o644)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))
}

impl Files {
    /// Opens the files; `terminal` (a descriptor this process owns) is kept for the agent.
    fn open(spec: &SandboxSpec, terminal: Option<RawFd>) -> Result<Files, String> {
        // SAFETY: the caller hands over a descriptor it owns and uses no more.
        let terminal =
            terminal.map(|fd| unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) });
        let stdout = open_out(&spec.stdout)?;
        let stderr = if spec.stderr == spec.stdout {
            stdout.try_clone().map_err(|e| format!("dup stdout: {e}"))?
        } else {
            open_out(&spec.stderr)?
        };
        let logs = spec
            .services
            .iter()
            .map(|s| open_out(&s.log))
            .collect::<Result<_, _>>()?;
        let devnull = File::open("/dev/null").map_err(|e| format!("open /dev/null: {e}"))?;
        // Made while host paths still resolve: the socket the shims reach (bound into the
        // sandbox by the caller) and the folder of the calls log's own socket.
        let calls = match (&spec.calls, spec.namespaces) {
            (Some(c), true) => Some(crate::calls::CallServer::open(c)?),
            _ => None,
        };
        Ok(Files {
            devnull,
            stdout,
            stderr,
            logs,
            terminal,
            calls: std::cell::RefCell::new(calls),
        })
    }
}

/// S: clone T into its namespaces, map its ids, wait.
fn sandbox_main(ctl: &Ctl, data: &[u8], terminal: Option<RawFd>) -> Result<i32, String> {
    // The parent waits for S's exit (after T's, which tears the namespaces down) through this
    // pidfd.
    // SAFETY: getpid cannot fail.
    let me = sys::pidfd_open(unsafe { libc::getpid() })
        .map_err(|e| format!("pidfd_open of the sandbox init: {e}"))?;
    ctl.send_with_fd(&Msg::Init, me.as_raw_fd());
    drop(me);
    let spec: SandboxSpec =
        serde_json::from_slice(data).map_err(|e| format!("parse the sandbox spec: {e}"))?;
    let files = Files::open(&spec, terminal)?;
    trace("spec read, files open");

    let mut flags = libc::CLONE_NEWUSER
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS;
    if spec.network != Network::Host {
        flags |= libc::CLONE_NEWNET;
    }
    // T waits on this pipe until S has mapped its ids from outside its user namespace.
    let (go_r, go_w) = sys::pipe().map_err(|e| format!("make the id map's pipe: {e}"))?;
    let t = sys::clone_process(flags).map_err(|e| format!("clone the trial init: {e}"))?;
    if t == 0 {
        drop(go_w);
        let code = match crate::ids::receive(go_r)
            .and_then(|ids| trial_main(ctl, &spec, &files, &ids, false, None))
        {
            Ok(()) => 0,
            Err(e) => {
                ctl.error(e);
                1
            }
        };
        sys::exit_now(code);
    }
    drop(go_r);
    crate::ids::send(go_w, crate::ids::Plan::for_this_process().apply(t));
    trace("namespaces made, ids mapped");
    match sys::pidfd_open(t) {
        Ok(pidfd) => ctl.send_with_fd(&Msg::Started { trial_pid: t }, pidfd.as_raw_fd()),
        Err(e) => {
            sys::kill(t, libc::SIGKILL);
            let _ = sys::wait4(t, 0);
            return Err(format!("pidfd_open of the trial init: {e}"));
        }
    }
    let (_, status, _) = sys::wait4(t, 0)
        .map_err(|e| format!("wait for the trial init: {e}"))?
        .ok_or("wait for the trial init returned nothing")?;
    trace("trial init reaped");
    let exit = sys::decode_status(status);
    match (exit.code, exit.signal) {
        (Some(0), _) => Ok(0),
        (Some(_), _) => Ok(1), // T reported its own error
        (_, Some(sig)) => Err(format!("the trial init was killed by signal {sig}")),
        _ => Err("the trial init ended strangely".to_owned()),
    }
}

/// T, cloned by the zygote straight into new user, mount, PID (it is PID 1), IPC and UTS
/// namespaces, with the control socket and the spec's bytes in hand; `start` says whether the
/// zygote cloned it for this request (then `go` is the pipe on which the zygote sends the id
/// map once it has written it) or ahead of it, and `terminal` is the agent's terminal when it
/// runs on one. Unless the network is the host's, T enters a new network namespace itself
/// (owned by its user namespace, as if cloned into it), or has already. Never returns.
///
/// Nothing stands between T and the parent here: T sends its own pidfd, and before `Done` it has
/// reaped every process of the trial, so the parent may return at `Done` while T's exit tears the
/// namespaces down.
pub(crate) fn zygote_trial_entry(
    ctl_fd: RawFd,
    data: Vec<u8>,
    start: Start,
    terminal: Option<RawFd>,
) -> ! {
    if sys::cloexec_from_3().is_err() {
        sys::exit_now(2);
    }
    let ctl = Ctl::new(ctl_fd);
    sys::set_name(c"proctor-trial");
    trace("trial init started");
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: getpid cannot fail (it is 1 here).
        let me = sys::pidfd_open(unsafe { libc::getpid() })
            .map_err(|e| format!("pidfd_open of the trial init: {e}"))?;
        ctl.send_with_fd(&Msg::Started { trial_pid: 1 }, me.as_raw_fd());
        drop(me);
        let (ids, network_up, zygote) = match start {
            Start::Cold { go } => (crate::ids::receive(go)?, false, None),
            Start::Warm(Warmed {
                ids,
                network,
                zygote,
            }) => {
                let ids = ids?;
                network?;
                (ids, true, zygote)
            }
        };
        let spec: SandboxSpec =
            serde_json::from_slice(&data).map_err(|e| format!("parse the sandbox spec: {e}"))?;
        match (spec.network != Network::Host, network_up) {
            (true, false) => sys::unshare(libc::CLONE_NEWNET)
                .map_err(|e| format!("unshare the network namespace: {e}"))?,
            (false, true) => {
                return Err(
                    "a trial on the host's network was given a trial init with a \
                            network of its own (a bug in proctor-sandbox)"
                        .to_owned(),
                )
            }
            _ => {}
        }
        let files = Files::open(&spec, terminal)?;
        trace("spec read, files open");
        trial_main(&ctl, &spec, &files, &ids, network_up, zygote)
    }));
    let code = match result {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            ctl.error(e);
            1
        }
        Err(_) => {
            ctl.error("the trial init panicked (a bug in proctor-sandbox)");
            101
        }
    };
    sys::exit_now(code);
}

/// On the internet network: sends the parent the trial's network and user namespaces and the
/// resolver's socket, bound at [`crate::egress::RESOLVER_ADDR`]:53 in the trial's namespace, for
/// it to attach the way out ([`Msg::Network`]).
fn hand_over_network(ctl: &Ctl) -> Result<(), String> {
    let open = |p: &str| std::fs::File::open(p).map_err(|e| format!("open {p}: {e}"));
    let net = open("/proc/self/ns/net")?;
    let user = open("/proc/self/ns/user")?;
    let resolver = std::net::UdpSocket::bind((crate::egress::RESOLVER_ADDR, 53))
        .map_err(|e| format!("bind the trial's resolver socket: {e}"))?;
    sys::send_all_fds(
        ctl.0,
        &Msg::Network.line(),
        &[net.as_raw_fd(), user.as_raw_fd(), resolver.as_raw_fd()],
    )
    .map_err(|e| format!("hand the network to proctor: {e}"))
}

/// Waits for the parent's word that the way out is up (one byte, `1`).
fn await_network(ctl: &Ctl) -> Result<(), String> {
    let mut b = [0u8; 1];
    loop {
        match nix::unistd::read(ctl.0, &mut b) {
            Ok(1) if b[0] == b'1' => return Ok(()),
            Err(nix::errno::Errno::EINTR) => continue,
            _ => return Err("the way out to the internet did not start".to_owned()),
        }
    }
}

/// Kills every process left in the trial (T is PID 1: `kill(-1)` reaches all of them) and reaps
/// them all, so that when T says `Done` no other process of the trial exists.
fn reap_all() {
    sys::kill(-1, libc::SIGKILL);
    while let Ok(Some(_)) = sys::wait4(-1, 0) {}
}

/// A service process T started.
struct Running {
    name: String,
    pid: libc::pid_t,
    pidfd: std::os::fd::OwnedFd,
}

/// T: PID 1 of the trial; `loopback_up` when its network's loopback is up already, `zygote`
/// the zygote's socket to tell once the root is built (a T cloned ahead of its request).
fn trial_main(
    ctl: &Ctl,
    spec: &SandboxSpec,
    files: &Files,
    ids: &crate::ids::IdMapping,
    loopback_up: bool,
    zygote: Option<OwnedFd>,
) -> Result<(), String> {
    let root = enter_trial(ctl, spec, ids, loopback_up, zygote)?;
    let Some(running) = start_services(ctl, spec, files)? else {
        return Ok(());
    };
    trace("services ready");
    if let Some(calls) = files.calls.borrow_mut().as_mut() {
        calls.service_networks(
            running
                .iter()
                .filter(|r| {
                    spec.services
                        .iter()
                        .any(|s| s.name == r.name && s.own_network)
                })
                .map(|r| (r.name.clone(), r.pidfd.as_raw_fd()))
                .collect(),
        );
    }
    keep_states_at_start(spec);
    let agent = run_turns(ctl, spec, files);
    trace("agent stopped");
    stop_services(ctl, running, spec.grace);
    let (stdout_cut, stderr_cut) = agent?;
    reap_all();
    trace("services stopped");
    finish_trial(ctl, root, stdout_cut, stderr_cut)
}

/// What T keeps of its root for the trial's end: the disk, what goes back to the caller and
/// T's own `/proc`.
struct RootLeft {
    disk: Option<crate::disk::TrialDisk>,
    handback: crate::handback::HandBack,
    own_proc: sys::OwnProc,
}

/// T's first steps: out of reach of the trial's processes, in the trial's control groups,
/// its network up (the way out handed over while the root is built), its root built and its
/// isolation sent.
fn enter_trial(
    ctl: &Ctl,
    spec: &SandboxSpec,
    ids: &crate::ids::IdMapping,
    loopback_up: bool,
    zygote: Option<OwnedFd>,
) -> Result<RootLeft, String> {
    sys::set_parent_death_signal(libc::SIGKILL).map_err(|e| format!("PR_SET_PDEATHSIG: {e}"))?;
    // T and the agent init A (forked from it) never execute anything and hold what the trial
    // must never have: the control socket, the host files of its output, folders of the host's
    // mount tree (from which `..` walks the host's file systems). A is PID 1 of the agent's
    // namespace with the agent's uid: without this, any agent process could take those with
    // `pidfd_getfd`, trace A, or read its `/proc/1/fd`. Not dumpable, neither can be reached by
    // a process without `CAP_SYS_PTRACE` in the host's user namespace.
    sys::set_not_dumpable().map_err(|e| format!("PR_SET_DUMPABLE: {e}"))?;
    trace("trial init running");
    if spec.network != Network::Host && !loopback_up {
        sys::loopback_up().map_err(|e| format!("bring up lo: {e}"))?;
    }
    // The way out starts on the host while the root is built.
    if spec.network == Network::Internet {
        hand_over_network(ctl)?;
    }
    let rootfs::TrialRoot {
        isolation,
        disk,
        handback,
        own_proc,
    } = rootfs::build_trial_root(spec, ids, join_cgroup)?;
    trace("root built");
    // Only now does the zygote clone the next trial init ahead: its network's making would
    // contend with this root's mounts for the kernel's locks.
    if let Some(z) = zygote {
        crate::zygote::tell_root_built(z);
    }
    sys::set_hostname("proctor").map_err(|e| format!("sethostname: {e}"))?;
    if spec.network == Network::Internet {
        await_network(ctl)?;
    }
    let isolation = Msg::Isolation {
        isolation: Box::new(isolation),
    };
    // Without a service to start, the agent's start follows at once: the isolation goes with it
    // (or with why it did not come). Otherwise the parent's watchdog is told the root is built.
    if spec.services.iter().all(|s| s.folder_only()) {
        ctl.hold(&isolation);
    } else {
        ctl.send(&isolation);
    }
    trace("network up");
    Ok(RootLeft {
        disk,
        handback,
        own_proc,
    })
}

/// Starts every service of the trial that runs a process, each reported as it starts. `None`
/// when one is refused: the refusal sent, the services stopped, every process reaped and
/// `Done` sent.
fn start_services(
    ctl: &Ctl,
    spec: &SandboxSpec,
    files: &Files,
) -> Result<Option<Vec<Running>>, String> {
    // Services of a network of their own are probed from inside it: T goes there and back.
    let home_network = match spec.services.iter().any(|s| s.own_network) {
        true => Some(sys::own_network().map_err(|e| format!("open the trial's network: {e}"))?),
        false => None,
    };
    let mut running = Vec::new();
    for (svc, log) in spec.services.iter().zip(&files.logs) {
        if svc.folder_only() {
            continue;
        }
        let (report, proc_, refusal) =
            start_service(svc, files.devnull.as_raw_fd(), log, home_network.as_ref());
        ctl.send(&Msg::Service { report });
        if let Some(p) = proc_ {
            running.push(p);
        }
        if let Some(reason) = refusal {
            refused(ctl, spec, running, reason);
            return Ok(None);
        }
    }
    Ok(Some(running))
}

/// A service refused to start (`reason`): says so, stops the `running` ones, reaps every
/// process and says `Done`.
fn refused(ctl: &Ctl, spec: &SandboxSpec, running: Vec<Running>, mut reason: String) {
    truncate(&mut reason, 2000);
    ctl.send(&Msg::NotStarted { reason });
    stop_services(ctl, running, spec.grace);
    reap_all();
    ctl.send(&Msg::Done);
}

/// T's last steps, every process of the trial gone: the disk's changes moved to the host,
/// what the agent gave to other ids given back, the bounds reached sent, then `Done`.
fn finish_trial(ctl: &Ctl, root: RootLeft, stdout_cut: u64, stderr_cut: u64) -> Result<(), String> {
    let RootLeft {
        disk,
        handback,
        own_proc,
    } = root;
    if disk.is_some() || !handback.is_empty() {
        // Without services the agent's `/proc` (of its PID namespace, now empty) covers T's:
        // the moves below work from T's own, through the handle taken before.
        own_proc
            .enter()
            .map_err(|e| format!("enter the trial's /proc: {e}"))?;
    }
    let (disk_full, left_out, root_left_out) = match &disk {
        Some(d) => d.finish(&mut || ctl.send(&Msg::Moving))?,
        None => (false, Default::default(), Default::default()),
    };
    // After the disk's changes are on the host: what the agent gave to other ids is given
    // back to the caller (only where newuidmap mapped a range for an unprivileged caller).
    handback.finish();
    // The two last words in one write: the caller wakes once for both.
    let mut last = Msg::Bounds {
        bounds: BoundsReport {
            disk_full,
            stdout_cut,
            stderr_cut,
            left_out: left_out.listed,
            left_out_more: left_out.more,
            root_left_out: root_left_out.listed,
            root_left_out_more: root_left_out.more,
        },
    }
    .line();
    last.extend(Msg::Done.line());
    ctl.send_lines(&last);
    Ok(())
}

/// Moves T, still its trial's only process and single-threaded, into the control group `dir`;
/// every process of the trial is then born there.
///
/// In a v1 hierarchy T moves its one thread through `tasks`: for the calling thread alone the
/// kernel skips the global lock that moving a whole process through `cgroup.procs` takes, whose
/// first step may wait for an RCU grace period (measured through `cgroup.procs`: 1.4 ms of each
/// trial's wall time asleep on average, 3.9 ms at the 90th percentile). For a single-threaded
/// process the two moves are the same. A v2 group has no `tasks`: T moves through
/// `cgroup.procs`.
fn join_cgroup(dir: &Path) -> std::io::Result<()> {
    match sys::write_file(&dir.join("tasks"), b"0") {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            sys::write_file(&dir.join("cgroup.procs"), b"0")
        }
        other => other,
    }
}

/// A, running the builtin `f` itself as the agent (see [`crate::builtin::run_as_init`]), and
/// reporting how it ended as it does for an agent it started.
fn run_builtin(
    ctl: &Ctl,
    spec: &SandboxSpec,
    f: crate::builtin::Builtin,
    args: Vec<String>,
    stdio: [RawFd; 3],
) -> Result<(), String> {
    let start = crate::builtin::Start {
        args,
        env: &spec.env,
        cwd: &spec.workspace_inside,
        stdio,
    };
    // As a forked builtin would end by the timeout's SIGTERM.
    let killed = Msg::AgentExit {
        exit: Exit {
            code: None,
            signal: Some(libc::SIGTERM),
        },
    }
    .line();
    trace("agent command executed");
    match crate::builtin::run_as_init(f, start, ctl.0, killed) {
        Ok(code) => {
            trace("agent command exited");
            // What a parent reads of `exit(code)`.
            ctl.send(&Msg::AgentExit {
                exit: Exit {
                    code: Some(code & 0xff),
                    signal: None,
                },
            });
        }
        Err(mut reason) => {
            truncate(&mut reason, 2000);
            ctl.send(&Msg::AgentExecFailed { reason });
        }
    }
    Ok(())
}

/// Starts one service and runs its probes: (report, process if started, refusal reason).
fn start_service(
    svc: &ServiceSpec,
    devnull: RawFd,
    log: &File,
    home_network: Option<&std::os::fd::OwnedFd>,
) -> (ServiceReport, Option<Running>, Option<String>) {
    let mut report = ServiceReport {
        name: svc.name.clone(),
        started: false,
        ready: None,
        guard: None,
        exit: None,
    };
    let mut env = svc.env.clone();
    env.retain(|(k, _)| k != crate::SERVICE_DIR_ENV);
    // A sidecar's root does not show the services' folders.
    if svc.root.is_none() {
        env.push((
            crate::SERVICE_DIR_ENV.to_owned(),
            SandboxSpec::service_dir_inside(&svc.name)
                .to_string_lossy()
                .into_owned(),
        ));
    }
    let enter = match &svc.root {
        Some(_) => Enter::OwnRoot(svc.name.clone()),
        None => Enter::Stay,
    };
    let started_at = Instant::now();
    let pid = ExecPlan::new(
        &svc.argv,
        &env,
        &svc.cwd,
        devnull,
        log.as_raw_fd(),
        log.as_raw_fd(),
    )
    .map(|plan| match svc.own_network {
        true => plan.with_own_network(),
        false => plan,
    })
    .and_then(|plan| plan.entering(enter).spawn());
    let pid = match pid {
        Ok(pid) => pid,
        Err(e) => {
            let reason = format!("service {} could not start: {e}", svc.name);
            return (report, None, Some(reason));
        }
    };
    report.started = true;
    let pidfd = match sys::pidfd_open(pid) {
        Ok(fd) => fd,
        Err(e) => {
            sys::kill(pid, libc::SIGKILL);
            let reason = format!("service {}: pidfd_open: {e}", svc.name);
            return (report, None, Some(reason));
        }
    };
    let run = Running {
        name: svc.name.clone(),
        pid,
        pidfd,
    };
    let inside = match (svc.own_network, home_network) {
        (true, Some(home)) => match sys::join_network(run.pidfd.as_fd()) {
            Ok(()) => Some(home),
            Err(e) => {
                let reason = format!("service {}: cannot reach its network: {e}", svc.name);
                return (report, Some(run), Some(reason));
            }
        },
        _ => None,
    };
    let (report, refusal) = probe_service(svc, &run, report, (&env, devnull, log), started_at);
    if let Some(home) = inside {
        if let Err(e) = sys::join_network(home.as_fd()) {
            let reason = format!(
                "service {}: cannot come back from its network: {e}",
                svc.name
            );
            return (report, Some(run), Some(reason));
        }
    }
    (report, Some(run), refusal)
}

/// The probes of a started service (`ready`, `healthcheck`, `guard`, in that order, each only
/// after the one before passed), made from the caller's network; the refusal of the first
/// that failed.
fn probe_service(
    svc: &ServiceSpec,
    run: &Running,
    mut report: ServiceReport,
    (env, devnull, log): (&[(String, String)], RawFd, &File),
    started_at: Instant,
) -> (ServiceReport, Option<String>) {
    if let Some(probe) = &svc.ready {
        let outcome = services::wait_ready(run.pid, &probe.url, probe.timeout, started_at);
        let failed = services::ready_refusal(&svc.name, &outcome);
        report.ready = Some(outcome);
        if failed.is_some() {
            return (report, failed);
        }
    }
    if let Some(probe) = &svc.health {
        let run_with = HealthRun {
            env,
            cwd: &svc.cwd,
            devnull,
            log: log.as_raw_fd(),
        };
        let outcome = services::wait_healthy(probe, &run_with, run.pid, &run.pidfd, started_at);
        let failed = match &outcome {
            ProbeOutcome::Failed { reason } => {
                Some(format!("service {} was not healthy: {reason}", svc.name))
            }
            ProbeOutcome::Passed { .. } => None,
        };
        report.ready = Some(outcome);
        if failed.is_some() {
            return (report, failed);
        }
    }
    if let Some(guard) = &svc.guard {
        let outcome = services::check_guard(guard, started_at);
        let failed = services::guard_refusal(&svc.name, &outcome);
        report.guard = Some(outcome);
        if failed.is_some() {
            return (report, failed);
        }
    }
    (report, None)
}

/// Copies each service's state file, as it is once every service is ready, to
/// [`crate::STATE_AT_START`] in its folder: the state the agent found. A state file that is not
/// there yet (or not a regular file, never followed through a link) is not copied, and the
/// capture then cannot say whether the agent changed it.
fn keep_states_at_start(spec: &SandboxSpec) {
    for svc in &spec.services {
        let Some(state) = &svc.state else { continue };
        let dir = SandboxSpec::service_dir_inside(&svc.name);
        let from = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(dir.join(state));
        let Ok(mut from) = from else { continue };
        if !from.metadata().is_ok_and(|m| m.is_file()) {
            continue;
        }
        let to = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(dir.join(crate::STATE_AT_START));
        if let Ok(mut to) = to {
            let _ = std::io::copy(&mut from, &mut to);
        }
    }
}

/// SIGTERM every service (its whole session), wait up to `grace`, SIGKILL everything left in the
/// trial, and report each service's exit.
fn stop_services(ctl: &Ctl, running: Vec<Running>, grace: Duration) {
    let mut exits: Vec<Option<Exit>> = Vec::with_capacity(running.len());
    for r in &running {
        // A service that already ended is a zombie; its status is collected below.
        sys::kill(-r.pid, libc::SIGTERM);
        sys::kill(r.pid, libc::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    for r in &running {
        let left = deadline.saturating_duration_since(Instant::now());
        let _ = sys::wait_readable(r.pidfd.as_fd(), Some(left));
    }
    // T is PID 1 of the trial: -1 reaches every other process in it (the agent is already gone).
    sys::kill(-1, libc::SIGKILL);
    for r in &running {
        let exit = match sys::wait4(r.pid, 0) {
            Ok(Some((_, status, _))) => Some(sys::decode_status(status)),
            _ => None,
        };
        exits.push(exit);
    }
    for (r, exit) in running.iter().zip(exits) {
        if let Some(exit) = exit {
            ctl.send(&Msg::ServiceExit {
                name: r.name.clone(),
                exit,
            });
        }
    }
}

/// Runs the agent's turns: one, or in a conversation as many as the caller asks for (see
/// [`crate::turns`]), each in a PID namespace of its own, all within the spec's wall timeout.
/// Returns the bytes cut from the agent's stdout and stderr by the output bound.
fn run_turns(ctl: &Ctl, spec: &SandboxSpec, files: &Files) -> Result<(u64, u64), String> {
    let deadline = Instant::now() + spec.wall_timeout;
    if spec.max_turns <= 1 {
        return run_agent(ctl, spec, files, deadline).map(|t| t.cut);
    }
    // T's own PID namespace: each turn's namespace is made from it, not nested in the last.
    let own = sys::pidfd_open(1).map_err(|e| format!("pidfd_open of the trial init: {e}"))?;
    let mut turn_spec = std::borrow::Cow::Borrowed(spec);
    let mut turn_deadline = deadline;
    let mut cut = (0, 0);
    for turn in 1..=spec.max_turns {
        if turn > 1 {
            nix::sched::setns(&own, nix::sched::CloneFlags::CLONE_NEWPID)
                .map_err(|e| format!("return to the trial's PID namespace: {e}"))?;
        }
        let ended = run_agent(ctl, &turn_spec, files, turn_deadline)?;
        cut = (cut.0 + ended.cut.0, cut.1 + ended.cut.1);
        // A turn stopped at its own timeout ends the conversation only when the conversation's
        // time ran out with it.
        let out_of_time = ended.timed_out && turn_deadline >= deadline;
        let can_go_on = !out_of_time && turn < spec.max_turns && Instant::now() < deadline;
        let end_of = |f: &File| {
            use std::io::Seek;
            let mut f = f;
            f.stream_position().unwrap_or(0)
        };
        ctl.send(&Msg::TurnEnded {
            stdout_end: end_of(&files.stdout),
            stderr_end: end_of(&files.stderr),
            can_go_on,
        });
        if !can_go_on {
            break;
        }
        match crate::turns::read_reply(ctl.0)? {
            crate::turns::Reply::End => break,
            crate::turns::Reply::Next { next } => {
                let (s, d) = crate::turns::next_turn(spec, next, deadline);
                turn_spec = std::borrow::Cow::Owned(s);
                turn_deadline = d;
            }
        }
    }
    Ok(cut)
}

/// How one turn of the agent ended, for [`run_turns`].
struct AgentRun {
    /// Bytes cut from the agent's stdout and stderr by the output bound.
    cut: (u64, u64),
    /// The turn was stopped at the deadline.
    timed_out: bool,
}

/// Runs the agent under A in a nested PID namespace until it exits or `deadline` passes;
/// reports.
///
/// The nested namespace is not only for the services: it keeps T (PID 1 of the trial, same uid
/// as the agent) out of the agent's sight, so the agent cannot `prlimit` or renice the process
/// that enforces its timeout and reports its end, and so turn its own failure into a harness
/// error.
fn run_agent(
    ctl: &Ctl,
    spec: &SandboxSpec,
    files: &Files,
    deadline: Instant,
) -> Result<AgentRun, String> {
    sys::unshare(libc::CLONE_NEWPID)
        .map_err(|e| format!("unshare the agent's PID namespace: {e}"))?;
    let AgentStdio {
        mut pumps,
        out,
        stdin,
    } = agent_stdio(spec, files)?;
    // With services the agent has a mount namespace of its own: its init sends it here, and
    // calls run in it.
    let mut calls = files.calls.borrow_mut();
    if let Some(server) = calls.as_mut() {
        server.new_agent();
    }
    let view = match (calls.as_ref(), spec.services.is_empty()) {
        (Some(_), false) => Some(
            sys::socketpair_seqpacket()
                .map_err(|e| format!("make the agent view's socket: {e}"))?,
        ),
        _ => None,
    };
    ctl.send(&Msg::AgentStarted);
    let t0 = Instant::now();
    let a = sys::fork().map_err(|e| format!("fork the agent init: {e}"))?;
    if a == 0 {
        agent_main(
            ctl,
            spec,
            files,
            [stdin, out.0.as_raw_fd(), out.1.as_raw_fd()],
            view.as_ref().map(|(_, tx)| tx.as_raw_fd()),
        );
    }
    // The agent holds the write ends now; ours would keep the pipes from ever ending.
    drop(out);
    if let (Some(server), Some((rx, tx))) = (calls.as_mut(), view) {
        drop(tx);
        server.in_agent_view(rx);
    }
    let pidfd = sys::pidfd_open(a).map_err(|e| {
        sys::kill(a, libc::SIGKILL);
        format!("pidfd_open of the agent init: {e}")
    })?;
    let mut wait = |timeout: Duration| {
        let deadline = Instant::now() + timeout;
        match (pumps.as_mut(), calls.as_mut()) {
            (Some(p), Some(server)) => {
                let fd = server.raw_fd();
                let mut serve = || server.accept();
                p.until_exit(pidfd.as_raw_fd(), Some(deadline), Some((fd, &mut serve)))
            }
            (Some(p), None) => p.until_exit(pidfd.as_raw_fd(), Some(deadline), None),
            (None, Some(server)) => serve_until_exit(&pidfd, deadline, server),
            (None, None) => sys::wait_readable(pidfd.as_fd(), Some(timeout)),
        }
    };
    let mut timed_out = false;
    let exited = wait(deadline.saturating_duration_since(Instant::now()))
        .map_err(|e| format!("wait for the agent: {e}"))?;
    if !exited {
        timed_out = true;
        // A forwards SIGTERM to every process of the agent.
        sys::kill(a, libc::SIGTERM);
        let gone = wait(spec.grace).unwrap_or(false);
        if !gone {
            sys::kill(a, libc::SIGKILL);
        }
    }
    let (_, _, usage) = sys::wait4(a, 0)
        .map_err(|e| format!("reap the agent init: {e}"))?
        .ok_or("reap the agent init: nothing")?;
    let wall = t0.elapsed();
    let cut = match pumps {
        Some(p) => p
            .finish()
            .map_err(|e| format!("write the agent's output: {e}"))?,
        None => Vec::new(),
    };
    ctl.send(&Msg::AgentStopped {
        timed_out,
        wall_us: wall.as_micros() as u64,
        cpu_us: Some(sys::cpu_time(&usage).as_micros() as u64),
    });
    Ok(AgentRun {
        cut: (
            cut.first().copied().unwrap_or(0),
            cut.get(1).copied().unwrap_or(0),
        ),
        timed_out,
    })
}

/// The agent's standard descriptors: on a terminal, the terminal (what the agent prints is read
/// on its other side, by the caller); otherwise `/dev/null` for input and the output files or
/// the pipes to their bounded sinks (given, to be pumped).
fn agent_stdio(spec: &SandboxSpec, files: &Files) -> Result<AgentStdio, String> {
    let Some(tty) = &files.terminal else {
        let (pumps, out) = output_pipes(spec, files)?;
        return Ok(AgentStdio {
            pumps,
            out,
            stdin: files.devnull.as_raw_fd(),
        });
    };
    let dup = || {
        tty.try_clone()
            .map(OwnedFd::from)
            .map_err(|e| format!("dup the agent's terminal: {e}"))
    };
    Ok(AgentStdio {
        pumps: None,
        out: (dup()?, dup()?),
        stdin: tty.as_raw_fd(),
    })
}

/// The agent's standard descriptors, as [`agent_stdio`] makes them.
struct AgentStdio {
    /// What pumps the agent's output into its bounded sinks, when it is bounded.
    pumps: Option<Pumps>,
    /// Where the agent writes its stdout and stderr.
    out: (OwnedFd, OwnedFd),
    /// The agent's stdin.
    stdin: RawFd,
}

/// Waits until the agent init ends (`true`) or `deadline` passes (`false`), serving the
/// trial's interface calls meanwhile.
fn serve_until_exit(
    pidfd: &OwnedFd,
    deadline: Instant,
    server: &mut crate::calls::CallServer,
) -> std::io::Result<bool> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(false);
        }
        let ms = left.as_micros().div_ceil(1000).min(i32::MAX as u128) as libc::c_int;
        let mut fds = [
            libc::pollfd {
                fd: pidfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: server.raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: a valid array of pollfds of the given length.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if n < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        if fds[1].revents != 0 {
            server.accept();
        }
        if fds[0].revents != 0 {
            return Ok(true);
        }
    }
}

/// The descriptors the agent writes its stdout and stderr to: with an output bound, pipes T
/// reads into bounded sinks (returned), else the host files themselves (duplicated).
fn output_pipes(
    spec: &SandboxSpec,
    files: &Files,
) -> Result<(Option<Pumps>, (OwnedFd, OwnedFd)), String> {
    let dup = |f: &File| -> Result<OwnedFd, String> {
        f.try_clone()
            .map(OwnedFd::from)
            .map_err(|e| format!("dup the agent's output: {e}"))
    };
    let Some(cap) = spec.limits.output_bytes else {
        return Ok((None, (dup(&files.stdout)?, dup(&files.stderr)?)));
    };
    let sink = |name, f: &File| -> Result<Capped, String> {
        let file = f
            .try_clone()
            .map_err(|e| format!("dup the agent's {name}: {e}"))?;
        Ok(Capped::new(name, file, cap))
    };
    let pipe = || sys::pipe().map_err(|e| format!("make the agent's output pipe: {e}"));
    let (out_r, out_w) = pipe()?;
    let mut streams = vec![(out_r, sink("stdout", &files.stdout)?)];
    let err_w = if spec.stderr == spec.stdout {
        out_w
            .try_clone()
            .map_err(|e| format!("dup the agent's output pipe: {e}"))?
    } else {
        let (err_r, err_w) = pipe()?;
        streams.push((err_r, sink("stderr", &files.stderr)?));
        err_w
    };
    Ok((Some(Pumps::new(streams)), (out_w, err_w)))
}

/// A: PID 1 of the agent's PID namespace; `stdio` are the agent's stdin, stdout and stderr.
/// Never returns.
fn agent_main(
    ctl: &Ctl,
    spec: &SandboxSpec,
    files: &Files,
    stdio: [RawFd; 3],
    view: Option<RawFd>,
) -> ! {
    sys::set_name(c"proctor-agent-1");
    if let Err(e) = agent_inner(ctl, spec, files, stdio, view) {
        ctl.error(e);
    }
    // Everything else in this PID namespace dies with us.
    sys::exit_now(0);
}

fn agent_inner(
    ctl: &Ctl,
    spec: &SandboxSpec,
    files: &Files,
    stdio: [RawFd; 3],
    view: Option<RawFd>,
) -> Result<(), String> {
    trace("agent init running");
    rootfs::build_agent_view(spec)?;
    // The trial init runs interface calls in the agent's view: it gets it from here (closed
    // with the rest below).
    if let Some(to) = view {
        crate::calls::send_agent_view(to)?;
    }
    // What A keeps of T's descriptors: the control socket and the agent's standard ones; the
    // rest (the trial's disk, the host's folders, T's own `/proc`, the output files) are T's.
    sys::close_all_but(&[ctl.0, stdio[0], stdio[1], stdio[2]])
        .map_err(|e| format!("close the trial init's descriptors: {e}"))?;
    trace("agent view built");
    // Everything privileged is done: from here on this process holds only the capabilities of
    // a root that owns its ids (chown, setuid, ...), never one to mount or unmount, and neither
    // does anything it starts.
    let drop_capabilities = || {
        sys::drop_capabilities_but(sys::AGENT_CAPABILITIES)
            .map_err(|e| format!("drop capabilities: {e}"))
    };
    // The executable's own builtin (the scripted agent) is neither executed nor forked: this
    // process runs it, and is the agent.
    if let Some((f, args)) = crate::builtin::as_builtin(&spec.command) {
        drop_capabilities()?;
        return run_builtin(ctl, spec, f, args, stdio);
    }
    let set = sys::block_signals(&[
        libc::SIGCHLD,
        libc::SIGTERM,
        libc::SIGINT,
        libc::SIGHUP,
        libc::SIGQUIT,
    ])
    .map_err(|e| format!("block signals: {e}"))?;
    let plan = ExecPlan::new(
        &spec.command,
        &spec.env,
        &spec.workspace_inside,
        stdio[0],
        stdio[1],
        stdio[2],
    )?;
    let started = if files.terminal.is_some() {
        // A program on a terminal takes it as its controlling terminal, which posix_spawn
        // cannot do: it is forked, and drops its capabilities itself before it executes.
        let started = plan.with_controlling_terminal().spawn();
        drop_capabilities()?;
        started
    } else {
        drop_capabilities()?;
        plan.spawn_unprivileged()
    };
    let child = match started {
        Ok(pid) => {
            trace("agent command executed");
            pid
        }
        Err(mut reason) => {
            truncate(&mut reason, 2000);
            ctl.send(&Msg::AgentExecFailed { reason });
            return Ok(());
        }
    };
    await_main(ctl, child, &set)
}

/// A's wait for the agent's main process `child`, passing a signal it is sent on to every
/// process of the agent; reports how the main process ended.
fn await_main(ctl: &Ctl, child: libc::pid_t, set: &nix::sys::signal::SigSet) -> Result<(), String> {
    // A signal a process of the trial sent to this init (a check's code under test that ends
    // PID 1): the main process counts as ended by it, whichever the race between its own exit
    // and the SIGTERM passed on to it.
    let mut struck: Option<libc::c_int> = None;
    loop {
        // Reap everything that ended: the agent's main process, or orphans re-parented to us.
        loop {
            match sys::wait4(-1, libc::WNOHANG) {
                Ok(Some((pid, status, _))) if pid == child => {
                    trace("agent command exited");
                    let mut exit = sys::decode_status(status);
                    if let (Some(sig), None) = (struck, exit.signal) {
                        exit = Exit {
                            code: None,
                            signal: Some(sig),
                        };
                    }
                    ctl.send(&Msg::AgentExit { exit });
                    return Ok(());
                }
                Ok(Some(_)) => continue,
                _ => break,
            }
        }
        let (sig, from) = sys::wait_signal_from(set).map_err(|e| format!("sigwaitinfo: {e}"))?;
        if sig != libc::SIGCHLD {
            // From T at the timeout (sender 0: outside this namespace), or from a process of
            // the trial: pass it on to every process of the agent.
            if from != 0 {
                struck.get_or_insert(sig);
            }
            sys::kill(-1, libc::SIGTERM);
        }
    }
}
