//! The fallback without namespaces: the agent and the services run on the host as the caller, each
//! in its own process group; the stop kills the groups. The report says exactly that.

use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::SandboxError;
use crate::report::{FullStop, Isolation, SandboxReport, ServiceReport, WorkspaceKind};
use crate::services;
use crate::spec::{Network, SandboxSpec, ServiceSpec, Workspace};
use crate::sys;

fn create(path: &Path) -> Result<File, SandboxError> {
    File::create(path).map_err(|e| SandboxError::io(format!("cannot open {}", path.display()), e))
}

/// A service started on the host: its process group's leader.
struct HostService {
    pid: libc::pid_t,
    pidfd: Option<std::os::fd::OwnedFd>,
}

/// Runs `spec` on the host, without namespaces: the services, then the agent, each in its own
/// process group (the agent on `terminal`, in a session of its own, when given); then stops the
/// services.
pub(crate) fn run(
    spec: &SandboxSpec,
    terminal: Option<BorrowedFd<'_>>,
    next: &mut crate::turns::NextTurnFn<'_>,
) -> Result<SandboxReport, SandboxError> {
    let start = Instant::now();
    let dir = match &spec.workspace {
        Workspace::Bind { dir } => dir,
        Workspace::Copy { start, dir } => {
            crate::copy::copy_tree(start, dir)
                .map_err(|e| SandboxError::io("copy the workspace's start state", e))?;
            dir
        }
        Workspace::Overlay { .. } => {
            return Err(SandboxError::InvalidSpec(
                "an overlay workspace needs namespaces".to_owned(),
            ))
        }
    };
    let stdout = create(&spec.stdout)?;
    let stderr = if spec.stderr == spec.stdout {
        stdout
            .try_clone()
            .map_err(|e| SandboxError::io("dup stdout", e))?
    } else {
        create(&spec.stderr)?
    };

    let mut services = start_services(spec)?;
    let mut agent = AgentRun::default();
    let mut turns = Vec::new();
    if services.not_started.is_none() {
        let run = match terminal {
            Some(tty) => run_agent(
                spec,
                dir,
                AgentStdio::terminal(tty)?,
                start + spec.wall_timeout,
            )?,
            None => run_turns(spec, dir, [&stdout, &stderr], next, &mut turns)?,
        };
        match run {
            Ok(run) => agent = run,
            Err(why) => services.not_started = Some(why),
        }
    }
    stop_services(spec, &services.running, &mut services.reports);

    Ok(SandboxReport {
        exit_code: agent.exit_code,
        signal: agent.signal,
        timed_out: agent.timed_out,
        wall: agent.wall,
        agent_cpu: agent.agent_cpu,
        services: services.reports,
        not_started: services.not_started,
        isolation: host_isolation(),
        total: start.elapsed(),
        bounds: Default::default(),
        turns: if spec.max_turns > 1 {
            turns
        } else {
            Vec::new()
        },
    })
}

/// The agent's turns on the host: one, or a conversation's (see [`crate::turns`]), all within
/// the spec's wall timeout; gives the last turn's end with every turn's time and CPU summed,
/// and fills `turns`. `Err` with the reason when the first turn's command cannot be executed.
fn run_turns(
    spec: &SandboxSpec,
    dir: &Path,
    [stdout, stderr]: [&File; 2],
    next: &mut crate::turns::NextTurnFn<'_>,
    turns: &mut Vec<crate::report::TurnReport>,
) -> Result<Result<AgentRun, String>, SandboxError> {
    let t0 = Instant::now();
    let deadline = t0 + spec.wall_timeout;
    let clone = |f: &File| {
        f.try_clone()
            .map_err(|e| SandboxError::io("dup the output", e))
    };
    let end_of = |f: &File| {
        use std::io::Seek;
        let mut f = f;
        f.stream_position().unwrap_or(0)
    };
    let mut turn_spec = std::borrow::Cow::Borrowed(spec);
    let mut turn_deadline = deadline;
    let mut total = AgentRun::default();
    for turn in 1..=spec.max_turns.max(1) as usize {
        let stdio = AgentStdio::Files {
            stdout: clone(stdout)?,
            stderr: clone(stderr)?,
        };
        let started = t0.elapsed();
        let (run, exec_failed) = match run_agent(&turn_spec, dir, stdio, turn_deadline)? {
            Ok(run) => (run, None),
            Err(why) if turn == 1 => return Ok(Err(why)),
            Err(why) => (AgentRun::default(), Some(why)),
        };
        total.add(&run);
        let exit = exec_failed.is_none().then_some(crate::report::Exit {
            code: run.exit_code,
            signal: run.signal,
        });
        let end = crate::turns::TurnEnd {
            turn,
            exit,
            exec_failed: exec_failed.clone(),
            timed_out: run.timed_out,
            stdout_end: end_of(stdout),
            stderr_end: end_of(stderr),
        };
        turns.push(crate::report::TurnReport {
            exit,
            exec_failed,
            timed_out: run.timed_out,
            started,
            wall: run.wall,
            stdout_end: end.stdout_end,
            stderr_end: end.stderr_end,
        });
        let out_of_time = run.timed_out && turn_deadline >= deadline;
        let can_go_on = !out_of_time && turn < spec.max_turns as usize && Instant::now() < deadline;
        let Some(cmd) = can_go_on.then(|| next(&end)).flatten() else {
            break;
        };
        let (s, d) = crate::turns::next_turn(spec, cmd, deadline);
        turn_spec = std::borrow::Cow::Owned(s);
        turn_deadline = d;
    }
    Ok(Ok(total))
}

/// The services started on the host, in order, up to the first that failed.
struct HostServices {
    /// A report for each service tried.
    reports: Vec<ServiceReport>,
    /// The services that started, in order.
    running: Vec<HostService>,
    /// Why the agent must not start: a service that failed to start, or was not ready, or whose
    /// guard refused.
    not_started: Option<String>,
}

/// Starts the services in order, each in its own process group, and waits for each to be ready
/// and pass its guard; stops at the first that fails.
fn start_services(spec: &SandboxSpec) -> Result<HostServices, SandboxError> {
    let mut started = HostServices {
        reports: Vec::new(),
        running: Vec::new(),
        not_started: None,
    };
    for svc in spec.services.iter().filter(|s| !s.folder_only()) {
        let (report, refusal) = start_service(svc, &mut started.running)?;
        started.reports.push(report);
        if refusal.is_some() {
            started.not_started = refusal;
            break;
        }
    }
    Ok(started)
}

/// Starts one service (pushing it onto `running` when it started) and checks that it is ready
/// and passes its guard. Gives its report and, when it failed, why.
fn start_service(
    svc: &ServiceSpec,
    running: &mut Vec<HostService>,
) -> Result<(ServiceReport, Option<String>), SandboxError> {
    let log = create(&svc.log)?;
    let log2 = log
        .try_clone()
        .map_err(|e| SandboxError::io("dup a service log", e))?;
    let mut report = ServiceReport {
        name: svc.name.clone(),
        started: false,
        ready: None,
        guard: None,
        exit: None,
    };
    let started_at = Instant::now();
    let mut cmd = Command::new(&svc.argv[0]);
    cmd.args(&svc.argv[1..])
        .env_clear()
        .envs(svc.env.iter().map(|(k, v)| (k, v)))
        .env(crate::SERVICE_DIR_ENV, &svc.dir_host)
        .current_dir(&svc.cwd)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2)
        .process_group(0);
    // SAFETY: the closure only makes a fork-safe system call.
    unsafe { cmd.pre_exec(sys::cloexec_from_3) };
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let why = format!("service {} could not start: {e}", svc.name);
            return Ok((report, Some(why)));
        }
    };
    report.started = true;
    let pid = child.id() as libc::pid_t;
    running.push(HostService {
        pid,
        pidfd: sys::pidfd_open(pid).ok(),
    });
    let mut refusal = None;
    if let Some(probe) = &svc.ready {
        let o = services::wait_ready(pid, &probe.url, probe.timeout, started_at);
        refusal = services::ready_refusal(&svc.name, &o);
        report.ready = Some(o);
    }
    if let (None, Some(guard)) = (&refusal, &svc.guard) {
        let o = services::check_guard(guard, started_at);
        refusal = services::guard_refusal(&svc.name, &o);
        report.guard = Some(o);
    }
    Ok((report, refusal))
}

/// What the agent's run on the host gave.
#[derive(Default)]
struct AgentRun {
    exit_code: Option<i32>,
    signal: Option<i32>,
    timed_out: bool,
    wall: Duration,
    agent_cpu: Option<Duration>,
}

impl AgentRun {
    /// Takes in the next turn: its end is the whole's, its time and CPU are added.
    fn add(&mut self, turn: &AgentRun) {
        self.exit_code = turn.exit_code;
        self.signal = turn.signal;
        self.timed_out |= turn.timed_out;
        self.wall += turn.wall;
        self.agent_cpu = match (self.agent_cpu, turn.agent_cpu) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
    }
}

/// Where the agent's standard descriptors go.
enum AgentStdio {
    /// No input; output into the spec's files.
    Files {
        /// The agent's stdout.
        stdout: File,
        /// The agent's stderr.
        stderr: File,
    },
    /// A terminal for all three (each its own duplicate), made the agent's controlling terminal.
    Terminal([std::os::fd::OwnedFd; 3]),
}

impl AgentStdio {
    /// Three duplicates of `tty`.
    fn terminal(tty: BorrowedFd<'_>) -> Result<AgentStdio, SandboxError> {
        let dup = || {
            tty.try_clone_to_owned()
                .map_err(|e| SandboxError::io("dup the terminal", e))
        };
        Ok(AgentStdio::Terminal([dup()?, dup()?, dup()?]))
    }
}

/// Runs the agent's command in its own process group in `dir`, stopping the group at `deadline` (SIGTERM, then SIGKILL after the grace). Gives `Err` with the reason when the command
/// cannot be executed.
fn run_agent(
    spec: &SandboxSpec,
    dir: &Path,
    stdio: AgentStdio,
    deadline: Instant,
) -> Result<Result<AgentRun, String>, SandboxError> {
    let t0 = Instant::now();
    let mut cmd = Command::new(&spec.command[0]);
    cmd.args(&spec.command[1..])
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .current_dir(dir);
    match stdio {
        AgentStdio::Files { stdout, stderr } => {
            cmd.stdin(Stdio::null())
                .stdout(stdout)
                .stderr(stderr)
                .process_group(0);
            // SAFETY: the closure only makes a fork-safe system call.
            unsafe { cmd.pre_exec(sys::cloexec_from_3) };
        }
        AgentStdio::Terminal([i, o, e]) => {
            cmd.stdin(Stdio::from(i))
                .stdout(Stdio::from(o))
                .stderr(Stdio::from(e));
            // A session of its own (its process group's id is its pid, as with
            // `process_group(0)`), whose controlling terminal is its stdin.
            // SAFETY: the closure only makes fork-safe system calls.
            unsafe {
                cmd.pre_exec(|| {
                    if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    sys::cloexec_from_3()
                })
            };
        }
    }
    let child = match cmd.spawn() {
        Err(e) => return Ok(Err(format!("cannot execute {:?}: {e}", spec.command[0]))),
        Ok(child) => child,
    };
    let pid = child.id() as libc::pid_t;
    let pidfd = sys::pidfd_open(pid).map_err(|e| SandboxError::io("pidfd_open", e))?;
    let left = deadline.saturating_duration_since(Instant::now());
    let exited = sys::wait_readable(pidfd.as_fd(), Some(left))
        .map_err(|e| SandboxError::io("wait for the agent", e))?;
    let mut timed_out = false;
    if !exited {
        timed_out = true;
        sys::kill(-pid, libc::SIGTERM);
        if !sys::wait_readable(pidfd.as_fd(), Some(spec.grace)).unwrap_or(false) {
            sys::kill(-pid, libc::SIGKILL);
        }
    }
    let (_, status, usage) = sys::wait4(pid, 0)
        .map_err(|e| SandboxError::io("reap the agent", e))?
        .ok_or_else(|| SandboxError::Init("the agent could not be reaped".into()))?;
    // Whatever is left in the agent's process group goes now.
    sys::kill(-pid, libc::SIGKILL);
    let wall = t0.elapsed();
    let e = sys::decode_status(status);
    Ok(Ok(AgentRun {
        exit_code: e.code,
        signal: e.signal,
        timed_out,
        wall,
        agent_cpu: Some(sys::cpu_time(&usage)),
    }))
}

/// Stops the services: SIGTERM their groups, wait up to the grace, SIGKILL the groups; records
/// each one's exit in its report.
fn stop_services(spec: &SandboxSpec, running: &[HostService], reports: &mut [ServiceReport]) {
    for s in running {
        sys::kill(-s.pid, libc::SIGTERM);
    }
    let deadline = Instant::now() + spec.grace;
    for s in running {
        if let Some(fd) = &s.pidfd {
            let left = deadline.saturating_duration_since(Instant::now());
            let _ = sys::wait_readable(fd.as_fd(), Some(left));
        }
    }
    for (s, r) in running.iter().zip(reports.iter_mut()) {
        sys::kill(-s.pid, libc::SIGKILL);
        if let Ok(Some((_, status, _))) = sys::wait4(s.pid, 0) {
            r.exit = Some(sys::decode_status(status));
        }
    }
}

/// What a run without namespaces isolates: nothing but process groups.
fn host_isolation() -> Isolation {
    Isolation {
        namespaces: Vec::new(),
        workspace: WorkspaceKind::Bind,
        network: Network::Host,
        read_only_host: false,
        private_home_and_tmp: false,
        hidden: Vec::new(),
        full_stop: FullStop::ProcessGroup,
        notes: vec![
            "no namespaces: the agent ran on the host as the calling user, with the host's network and file system".to_owned(),
            "stop = kill the process group: a process that left it (setsid, daemon) may have survived".to_owned(),
            "hide, binds, home_inside and network were not applied; agent_cpu counts only processes the agent reaped".to_owned(),
        ],
        ids: None,
        host_view: None,
        egress: None,
    }
}
