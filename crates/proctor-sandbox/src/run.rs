//! The parent side of a sandbox run: start the init, follow its control messages, keep a
//! watchdog, and assemble the report.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::SandboxError;
use crate::init::{INIT_ARG, TERMINAL_ARG};
use crate::msg::Msg;
use crate::report::{Exit, Isolation, SandboxReport, ServiceReport};
use crate::spec::SandboxSpec;
use crate::{host, sys, zygote};

/// Time allowed for building the sandbox and for the final report, beyond the spec's own
/// timeouts, before the watchdog kills the trial.
const MARGIN: Duration = Duration::from_secs(30);

/// How long the watchdog waits after each [`Msg::Moving`] of T's.
pub(crate) const MOVING_MARGIN: Duration = Duration::from_secs(30);

/// The most the watchdog waits for T's moves after the agent stopped, however often T says it
/// is still at work.
pub(crate) const MOVING_MAX: Duration = Duration::from_secs(600);

/// Runs `spec.command` in a fresh sandbox built from `spec`, stops every process of it, and
/// reports what happened. Blocks until no process of the trial exists anymore.
///
/// With `spec.namespaces`, the sandbox init comes from `spec.init_exe` (it must call
/// [`crate::enter_if_requested`] first thing in `main`): the first run with a given `init_exe`
/// executes it once as a zygote, from a helper thread that lives as long as the process, and
/// every run has that zygote clone its trial init (see the `zygote` module). If the process
/// dies, every trial dies with it (parent-death signals). After a clean end, the trial init's
/// own exit (the namespaces' teardown) finishes after this returns; every other process of the
/// trial is gone by then.
/// A failed service probe or guard, or an agent command that cannot be executed, is not an
/// error: the report says so in `not_started`.
pub fn run(spec: &SandboxSpec) -> Result<SandboxReport, SandboxError> {
    run_with(spec, None, &mut |_| None)
}

/// [`run`], for a conversation (see [`crate::turns`]): after each turn of the agent but the
/// last that [`SandboxSpec::max_turns`] allows, `next` is told how it ended and gives the next
/// turn's command, or `None` to end the conversation. The report lists every turn in
/// [`SandboxReport::turns`].
pub fn run_conversation(
    spec: &SandboxSpec,
    next: &mut crate::turns::NextTurnFn<'_>,
) -> Result<SandboxReport, SandboxError> {
    run_with(spec, None, next)
}

/// [`run`], with the agent on a terminal instead of pipes: `terminal` (the slave side of a
/// pseudo-terminal whose master the caller reads and writes) becomes the agent's standard input,
/// output and error and, in a session of its own, its controlling terminal. So the terminal's
/// line discipline turns a typed Ctrl-C into SIGINT for the agent's foreground job, never for
/// the caller or the sandbox. `spec.stdout` and `spec.stderr` receive nothing, and
/// `spec.limits.output_bytes` bounds nothing: what the agent prints is on the master side, for
/// the caller to keep within its bound. This is how a person sits a trial (`proctor sit`).
///
/// The caller should close its own copy of `terminal` only after this returns; the master side
/// does not see the slave closed while the caller holds it, so it learns the end from this
/// return, not from end of file.
pub fn run_on_terminal(
    spec: &SandboxSpec,
    terminal: BorrowedFd<'_>,
) -> Result<SandboxReport, SandboxError> {
    // SAFETY: isatty only reads the descriptor's kind.
    if unsafe { libc::isatty(terminal.as_raw_fd()) } != 1 {
        return Err(SandboxError::InvalidSpec(
            "run_on_terminal needs a terminal (the slave side of a pseudo-terminal)".to_owned(),
        ));
    }
    run_with(spec, Some(terminal), &mut |_| None)
}

/// [`run`] or [`run_on_terminal`].
fn run_with(
    spec: &SandboxSpec,
    terminal: Option<BorrowedFd<'_>>,
    next: &mut crate::turns::NextTurnFn<'_>,
) -> Result<SandboxReport, SandboxError> {
    spec.validate()?;
    if !spec.namespaces {
        return host::run(spec, terminal, next);
    }
    let start = Instant::now();
    let spec = with_hidden_resolved(spec);
    let json = serde_json::to_vec(&spec)
        .map_err(|e| SandboxError::InvalidSpec(format!("cannot encode the spec: {e}")))?;
    let memfd = sys::memfd_with(c"proctor-sandbox-spec", &json)
        .map_err(|e| SandboxError::io("create the spec memfd", e))?;
    let (ours, theirs) =
        sys::socketpair().map_err(|e| SandboxError::io("create the control socket", e))?;
    let marks = Marks {
        debug: std::env::var_os(crate::SANDBOX_DEBUG_ENV).is_some(),
        start,
    };
    marks.mark("spawning the init");
    let mut child = start_init(&spec, memfd, theirs, terminal)?;
    marks.mark("init spawned");

    let mut c = Collector {
        conversation: spec.max_turns > 1,
        ..Default::default()
    };
    let watchdog = follow_control(&spec, ours.as_fd(), start, child.is_none(), &mut c, next);

    marks.mark("control socket closed");
    // From a zygote, T itself reaped every other process of the trial before it said `Done`:
    // after a clean end its exit (which tears the namespaces down, a millisecond or two) is left
    // to finish on its own, and the zygote reaps it. Otherwise make sure the trial is gone.
    let clean_end = c.done && watchdog.is_none() && c.error.is_none();
    if clean_end && child.is_none() {
        marks.mark("trial done");
        return finish(c, start);
    }
    let forced = watchdog.is_some() || c.error.is_some();
    let status = stop_and_reap(&mut c, &mut child, forced)?;
    drop(ours);
    marks.mark("init reaped");

    if let Some(w) = watchdog {
        return Err(SandboxError::Watchdog(w));
    }
    if let Some(e) = c.error {
        return Err(SandboxError::Setup(e));
    }
    if !c.done {
        let why = format!("it {status} during {}", c.phase());
        if c.agent_started && c.isolation.is_some() {
            let report = Box::new(finish(c, start)?);
            return Err(SandboxError::InitLost { why, report });
        }
        return Err(SandboxError::Init(why));
    }
    finish(c, start)
}

/// Phase timings of one run on stderr, when `PROCTOR_SANDBOX_DEBUG` is set.
struct Marks {
    debug: bool,
    start: Instant,
}

impl Marks {
    /// Prints that the run reached `what`, with the time since its start.
    fn mark(&self, what: &str) {
        if self.debug {
            eprintln!(
                "[run {:>8.3} ms, at {:.3}] {what}",
                self.start.elapsed().as_secs_f64() * 1e3,
                sys::monotonic_ms()
            );
        }
    }
}

/// A copy of `spec` with its view of the host made explicit ([`crate::view::with_view`]) and the
/// symlinks of its hidden paths resolved: they are compared with mount points inside.
fn with_hidden_resolved(spec: &SandboxSpec) -> SandboxSpec {
    let mut spec = spec.clone();
    for h in &mut spec.hide {
        if let Ok(c) = std::fs::canonicalize(&*h) {
            *h = c;
        }
    }
    // After: what the view covers is canonical already (found by a walk that follows no link),
    // and resolving its dozen paths again would cost every trial some hundred system calls.
    crate::view::with_view(&spec)
}

/// Starts the trial init through the zygote (one execution of `init_exe` per process), or by
/// executing `init_exe`; gives the child in the second case. `terminal` goes along for the
/// agent.
fn start_init(
    spec: &SandboxSpec,
    memfd: OwnedFd,
    theirs: OwnedFd,
    terminal: Option<BorrowedFd<'_>>,
) -> Result<Option<std::process::Child>, SandboxError> {
    if zygote::enabled() {
        let host_network = spec.network == crate::spec::Network::Host;
        zygote::fork_init(&spec.init_exe, &memfd, &theirs, terminal, host_network).map_err(
            |e| match e {
                zygote::StartError::Spawn(source) => SandboxError::Spawn {
                    exe: spec.init_exe.clone(),
                    source,
                },
                zygote::StartError::NoAnswer(why) => SandboxError::Init(format!(
                    "{} did not start as the sandbox zygote: {why}",
                    spec.init_exe.display()
                )),
            },
        )?;
        drop((memfd, theirs));
        Ok(None)
    } else {
        Ok(Some(spawn_init(spec, memfd, theirs, terminal)?))
    }
}

/// The time allowed for building the sandbox and starting its services.
fn setup_budget(spec: &SandboxSpec) -> Duration {
    spec.services
        .iter()
        .map(|s| {
            s.ready.as_ref().map_or(Duration::ZERO, |r| r.timeout)
                + s.guard.as_ref().map_or(Duration::ZERO, |g| g.timeout)
        })
        .sum::<Duration>()
        + MARGIN
}

/// Reads the control messages on `fd` into `c` until the socket closes, reading fails, T is done
/// (when it came from the zygote) or the watchdog's deadline passes; gives the watchdog's
/// complaint in the last case.
fn follow_control(
    spec: &SandboxSpec,
    fd: BorrowedFd<'_>,
    start: Instant,
    from_zygote: bool,
    c: &mut Collector,
    next: &mut crate::turns::NextTurnFn<'_>,
) -> Option<String> {
    let mut deadline = start + setup_budget(spec);
    let mut pending: Vec<u8> = Vec::new();
    // On the stack: a trial's control messages are short, and a longer one comes in pieces.
    let mut buf = [0u8; 16 * 1024];
    loop {
        let now = Instant::now();
        if now >= deadline {
            return Some(format!(
                "no report within {:.1?} of {}",
                now - start,
                c.phase()
            ));
        }
        match sys::wait_readable(fd, Some(deadline - now)) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) => {
                c.error
                    .get_or_insert(format!("poll the control socket: {e}"));
                return None;
            }
        }
        let mut fds = Vec::new();
        let n = match sys::recv_with_fds(fd.as_raw_fd(), &mut buf, &mut fds) {
            Ok(n) => n,
            Err(e) => {
                c.error
                    .get_or_insert(format!("read the control socket: {e}"));
                return None;
            }
        };
        // Descriptors come with the first byte of the message they belong to.
        c.fds.extend(fds);
        if n == 0 {
            return None;
        }
        pending.extend_from_slice(&buf[..n]);
        while let Some(pos) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=pos).collect();
            match apply_line(spec, &line, c) {
                Some(Deadline::Now(d)) => deadline = d,
                Some(Deadline::NotBefore(d)) => deadline = deadline.max(d),
                None => {}
            }
        }
        if let Some(end) = c.awaiting_reply.take() {
            let reply = match next(&end) {
                Some(next) => crate::turns::Reply::Next { next },
                None => crate::turns::Reply::End,
            };
            // The caller's time deciding is not the trial's: the next turn's start resets it.
            deadline = Instant::now() + MARGIN;
            if let Err(e) = sys::send_all(fd.as_raw_fd(), &reply.line(), None) {
                c.error
                    .get_or_insert(format!("tell the trial its next turn: {e}"));
                return None;
            }
        }
        if let Some(req) = c.network.take() {
            if let Err(e) = start_egress(spec, req, fd, c) {
                c.error.get_or_insert(e);
                return None;
            }
        }
        if c.done && from_zygote {
            // T has said its last word, with every other process of the trial reaped.
            return None;
        }
    }
}

/// Starts the trial's way out to the internet for what T handed over, and tells T it is up.
fn start_egress(
    spec: &SandboxSpec,
    req: crate::egress::Request,
    ctl: BorrowedFd<'_>,
    c: &mut Collector,
) -> Result<(), String> {
    let egress = crate::egress::start(req, &spec.allowed_hosts)?;
    c.egress = Some(egress);
    sys::send_all(ctl.as_raw_fd(), b"1", None)
        .map_err(|e| format!("tell the trial its network is up: {e}"))
}

/// How a status message moves the watchdog's deadline.
enum Deadline {
    /// To this.
    Now(Instant),
    /// To this, if it is later (T's heartbeats never bring it closer).
    NotBefore(Instant),
}

/// Applies one status line (with its newline) to `c`; gives the watchdog's new deadline when the
/// message moves it.
fn apply_line(spec: &SandboxSpec, line: &[u8], c: &mut Collector) -> Option<Deadline> {
    match serde_json::from_slice::<Msg>(&line[..line.len() - 1]) {
        Ok(msg) => {
            let now = Instant::now();
            let deadline = match &msg {
                Msg::AgentStarted => {
                    Some(Deadline::Now(now + spec.wall_timeout + spec.grace + MARGIN))
                }
                Msg::AgentStopped { .. } | Msg::NotStarted { .. } => {
                    c.moves_until = Some(now + spec.grace + MARGIN + MOVING_MAX);
                    Some(Deadline::Now(now + spec.grace + MARGIN))
                }
                Msg::Moving => c
                    .moves_until
                    .map(|until| Deadline::NotBefore((now + MOVING_MARGIN).min(until))),
                _ => None,
            };
            c.apply(msg);
            deadline
        }
        Err(e) => {
            c.error.get_or_insert(format!(
                "unreadable status line from the sandbox init ({e}): {}",
                String::from_utf8_lossy(line).trim_end()
            ));
            None
        }
    }
}

/// Makes sure the trial is gone (killing it when `forced`) and its init reaped; gives how the
/// init ended.
fn stop_and_reap(
    c: &mut Collector,
    child: &mut Option<std::process::Child>,
    forced: bool,
) -> Result<String, SandboxError> {
    if let Some(pidfd) = &c.trial_pidfd {
        if forced {
            let _ = sys::pidfd_send_signal(pidfd, libc::SIGKILL);
        }
        // T's pidfd turns readable only after its PID namespace (the whole trial) is empty.
        wait_or_kill(pidfd);
    }
    // With a direct start, S's exit comes after T's, whose namespaces (mounts, overlay, network) are
    // torn down.
    let init_pidfd = match (c.init_pidfd.take(), &*child) {
        (Some(fd), _) => Some(fd),
        (None, Some(child)) => sys::pidfd_open(child.id() as libc::pid_t).ok(),
        (None, None) => None,
    };
    if let Some(pidfd) = &init_pidfd {
        wait_or_kill(pidfd);
    }
    match child {
        Some(child) => {
            let status = child
                .wait()
                .map_err(|e| SandboxError::io("wait for the sandbox init", e))?;
            Ok(format!("exited with {status}"))
        }
        // The zygote reaps its inits.
        None => Ok("ended".to_owned()),
    }
}

/// Waits up to 10 s for a process's pidfd to turn readable; if it does not, kills the process
/// and waits up to 10 s more.
fn wait_or_kill(pidfd: &OwnedFd) {
    if !sys::wait_readable(pidfd.as_fd(), Some(Duration::from_secs(10))).unwrap_or(false) {
        let _ = sys::pidfd_send_signal(pidfd, libc::SIGKILL);
        let _ = sys::wait_readable(pidfd.as_fd(), Some(Duration::from_secs(10)));
    }
}

/// The report of a run that ended cleanly.
fn finish(c: Collector, start: Instant) -> Result<SandboxReport, SandboxError> {
    let mut isolation = c
        .isolation
        .ok_or_else(|| SandboxError::Init("no isolation record".to_owned()))?;
    isolation.egress = c.egress.map(crate::egress::Egress::finish);
    let (timed_out, wall, agent_cpu) = c.stopped.unwrap_or((false, Duration::ZERO, None));
    let (exit_code, signal) = match (c.agent_exit, c.stopped.is_some()) {
        (Some(e), _) => (e.code, e.signal),
        // The agent's main process was still running when its namespace was torn down.
        (None, true) if c.not_started.is_none() => (None, Some(libc::SIGKILL)),
        _ => (None, None),
    };
    Ok(SandboxReport {
        exit_code,
        signal,
        timed_out,
        wall,
        agent_cpu,
        services: c.services,
        not_started: c.not_started,
        isolation,
        total: start.elapsed(),
        bounds: c.bounds,
        turns: if c.conversation { c.turns } else { Vec::new() },
    })
}

/// Accumulates the control messages of one run.
#[derive(Default)]
struct Collector {
    /// Descriptors received and not yet matched with their message.
    fds: std::collections::VecDeque<OwnedFd>,
    init_pidfd: Option<OwnedFd>,
    trial_pidfd: Option<OwnedFd>,
    isolation: Option<Isolation>,
    services: Vec<ServiceReport>,
    not_started: Option<String>,
    agent_started: bool,
    agent_exit: Option<Exit>,
    stopped: Option<(bool, Duration, Option<Duration>)>,
    error: Option<String>,
    bounds: crate::report::BoundsReport,
    done: bool,
    /// The latest T's [`Msg::Moving`] may move the watchdog's deadline to.
    moves_until: Option<Instant>,
    /// What T handed over for its way out, until it is started.
    network: Option<crate::egress::Request>,
    /// The trial's way out to the internet, while it runs.
    egress: Option<crate::egress::Egress>,
    /// The run may hold several turns ([`SandboxSpec::max_turns`] above 1).
    conversation: bool,
    /// In a conversation, every turn so far (the last one is running or just ended).
    turns: Vec<crate::report::TurnReport>,
    /// When the agent first started, for the turns' start offsets.
    first_start: Option<Instant>,
    /// A turn that ended and whose next the caller must decide, until it is asked.
    awaiting_reply: Option<crate::turns::TurnEnd>,
}

impl Collector {
    fn apply(&mut self, msg: Msg) {
        match msg {
            Msg::Init => self.init_pidfd = self.fds.pop_front(),
            Msg::Started { .. } => self.trial_pidfd = self.fds.pop_front(),
            Msg::Isolation { isolation } => self.isolation = Some(*isolation),
            Msg::Service { report } => self.services.push(report),
            Msg::NotStarted { reason } => {
                self.not_started.get_or_insert(reason);
            }
            Msg::AgentStarted => {
                self.agent_started = true;
                self.agent_exit = None;
                // Turns are kept in a conversation only: a one-turn run keeps none.
                if self.conversation {
                    let first = *self.first_start.get_or_insert_with(Instant::now);
                    self.turns.push(crate::report::TurnReport {
                        started: first.elapsed(),
                        ..Default::default()
                    });
                }
            }
            // A later turn of a conversation that cannot start is that turn's failure: the
            // agent did start.
            Msg::AgentExecFailed { reason } if self.turns.len() > 1 => {
                if let Some(t) = self.turns.last_mut() {
                    t.exec_failed = Some(reason);
                }
            }
            Msg::AgentExecFailed { reason } => {
                self.not_started.get_or_insert(reason);
            }
            Msg::AgentExit { exit } => {
                if let Some(t) = self.turns.last_mut() {
                    t.exit = Some(exit);
                }
                self.agent_exit = Some(exit);
            }
            Msg::TurnEnded {
                stdout_end,
                stderr_end,
                can_go_on,
            } => self.turn_ended(stdout_end, stderr_end, can_go_on),
            Msg::AgentStopped {
                timed_out,
                wall_us,
                cpu_us,
            } => {
                let wall = Duration::from_micros(wall_us);
                let cpu = cpu_us.map(Duration::from_micros);
                if let Some(t) = self.turns.last_mut() {
                    t.timed_out = timed_out;
                    t.wall = wall;
                }
                // Over a conversation: any turn's timeout, the turns' time and CPU summed.
                self.stopped = Some(match self.stopped {
                    Some((was, w, c)) if self.turns.len() > 1 => {
                        (was || timed_out, w + wall, c.zip(cpu).map(|(a, b)| a + b))
                    }
                    _ => (timed_out, wall, cpu),
                });
            }
            Msg::ServiceExit { name, exit } => {
                if let Some(s) = self.services.iter_mut().find(|s| s.name == name) {
                    s.exit = Some(exit);
                }
            }
            Msg::Error { message } => {
                self.error.get_or_insert(message);
            }
            Msg::Bounds { bounds } => self.bounds = bounds,
            Msg::Moving => {}
            Msg::Network => {
                let mut take = || self.fds.pop_front();
                match (take(), take(), take()) {
                    (Some(netns), Some(userns), Some(resolver)) => {
                        self.network = Some(crate::egress::Request {
                            netns,
                            userns,
                            resolver,
                        })
                    }
                    _ => {
                        self.error.get_or_insert(
                            "the trial handed over its network without its namespaces".to_owned(),
                        );
                    }
                }
            }
            Msg::Done => self.done = true,
        }
    }

    /// Records where the last turn's output ends and, when T waits for it, that the caller is
    /// to decide the next turn.
    fn turn_ended(&mut self, stdout_end: u64, stderr_end: u64, can_go_on: bool) {
        let turn = self.turns.len();
        let Some(t) = self.turns.last_mut() else {
            self.error
                .get_or_insert("a turn ended before any started".to_owned());
            return;
        };
        t.stdout_end = stdout_end;
        t.stderr_end = stderr_end;
        if can_go_on {
            self.awaiting_reply = Some(crate::turns::TurnEnd {
                turn,
                exit: t.exit,
                exec_failed: t.exec_failed.clone(),
                timed_out: t.timed_out,
                stdout_end,
                stderr_end,
            });
        }
    }

    fn phase(&self) -> &'static str {
        if self.done {
            "the end of the run"
        } else if self.stopped.is_some() {
            "stopping the services"
        } else if self.agent_started {
            "the agent's run"
        } else if self.isolation.is_some() {
            "starting the services"
        } else {
            "building the sandbox"
        }
    }
}

/// Executes `init_exe __sandbox PID` with the spec on stdin and the control socket on stdout;
/// with a terminal for the agent, `init_exe __sandbox PID terminal` with the terminal on stderr.
fn spawn_init(
    spec: &SandboxSpec,
    memfd: OwnedFd,
    theirs: OwnedFd,
    terminal: Option<BorrowedFd<'_>>,
) -> Result<std::process::Child, SandboxError> {
    // The spec goes in on stdin, the control socket on stdout: no descriptor juggling in the
    // child, so the standard library can use posix_spawn (much cheaper than fork for a big
    // parent). The init sets its own parent-death signal and checks this pid.
    let mut cmd = Command::new(&spec.init_exe);
    cmd.arg(INIT_ARG)
        .arg(std::process::id().to_string())
        .env_clear()
        .stdin(Stdio::from(memfd))
        .stdout(Stdio::from(theirs))
        .process_group(0);
    if let Some(v) = std::env::var_os(crate::ids::SINGLE_ID_ENV) {
        cmd.env(crate::ids::SINGLE_ID_ENV, v);
    }
    if let Some(tty) = terminal {
        let tty = tty
            .try_clone_to_owned()
            .map_err(|e| SandboxError::io("dup the terminal", e))?;
        cmd.arg(TERMINAL_ARG).stderr(Stdio::from(tty));
    } else if let Some(v) = std::env::var_os(crate::SANDBOX_DEBUG_ENV) {
        // The init prints its phase timings to stderr.
        cmd.env(crate::SANDBOX_DEBUG_ENV, v)
            .stderr(Stdio::inherit());
    } else {
        cmd.stderr(Stdio::null());
    }
    cmd.spawn().map_err(|source| SandboxError::Spawn {
        exe: spec.init_exe.clone(),
        source,
    })
}
