//! Interface calls, run by the trial itself where no agent process reaches.
//!
//! The agent runs an allowed command through its shim (`proctor __shim NAME ...`). With
//! namespaces the shim is a thin client: it connects to [`SOCKET_INSIDE`], which the trial init
//! T listens on, sends the command's name, arguments and environment and passes its stdin,
//! stdout, stderr and working folder as descriptors (`SCM_RIGHTS`), then waits for the exit
//! status and exits with it ([`call`]).
//!
//! T forks one process per call, C (at most [`CALLS_IN_FLIGHT`] at once; a connection past them
//! is closed unanswered, so its call does not run). C is outside the agent's PID namespace and,
//! like T, not dumpable, so no agent process can signal, trace or read it. C looks the name up
//! in the trial's own allow-list (the program the shim names is never used), reports the
//! call's start to the host's calls log through a socket only T's processes can reach (its
//! folder is held open by T since before the root was built; it is not in the agent's view),
//! runs the real program itself in a PID namespace of its own, in the agent's view of the files,
//! with the agent's capabilities, copies its stdio through while counting bytes, hashing stdin
//! and keeping a bounded head of each stream, waits for it, reports the end with its real exit
//! status, and answers the shim. A request the agent makes directly to the socket is a call
//! like any other: the program really runs, and the record says what ran.
//!
//! A terminal on stdin (a person's sitting) is handed to the program as it is, not copied; the
//! record says so. Signals the shim gets (a person's Ctrl-C, a `timeout`) are passed on to the
//! program; a shim that goes away takes the program with it (SIGKILL).

use std::collections::BTreeMap;
use std::ffi::{CString, OsStr, OsString};
use std::io::{BufRead, BufReader, IsTerminal, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::sys;

/// Where the shims reach the trial's call runner inside the sandbox.
pub const SOCKET_INSIDE: &str = "/run/proctor/calls.sock";

/// Calls a trial runs at once; a connection past them is closed unanswered (its call does
/// not run).
pub const CALLS_IN_FLIGHT: usize = 64;

/// The longest request a shim may send (its command line and environment; the kernel's own
/// bound on both together is a quarter of the stack limit, 2 MiB by default).
pub const REQUEST_MAX: usize = 8 << 20;

/// Bytes of stdin, stdout and stderr kept in each call record.
pub const HEAD_BYTES: usize = 2048;

/// Bytes of one argument kept in a call record.
pub const ARG_HEAD_BYTES: usize = 4096;

/// Bytes of all arguments together kept in a call record.
pub const ARGV_HEAD_BYTES: usize = 16 * 1024;

/// Arguments kept in a call record.
pub const ARGS_KEPT: usize = 256;

/// How long a connection may take to send its request before it is dropped.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest answer line read from the calls log.
const REPLY_MAX: u64 = 64 * 1024;

/// The first field of every request: the protocol's version.
const VERSION: &[u8] = b"proctor-call-1";

/// What the trial init needs to run the trial's interface calls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallsSpec {
    /// Host path where the trial init makes the socket the shims connect to; the caller binds
    /// it into the sandbox at [`SOCKET_INSIDE`] (a placeholder file may stand there before).
    pub listen: PathBuf,
    /// Host path of the calls log's socket (the caller's server, which writes the log). Never
    /// in the agent's view.
    pub log: PathBuf,
    /// The allowed commands: the only programs a call may run.
    pub allowed: Vec<AllowedProgram>,
    /// The `PATH` a call's program gets, whatever the caller's was (the trial's own, as the
    /// agent was started with it); `None` keeps the caller's.
    #[serde(default)]
    pub path: Option<String>,
}

/// One allowed command and the program that runs for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllowedProgram {
    /// The command's name, as the agent calls it.
    pub name: String,
    /// The real program, as a path inside the sandbox.
    pub program: PathBuf,
    /// For an MCP server (`name` is `mcp:NAME`): the server to start and relay for each
    /// session, `program` unused ([`crate::mcp`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<crate::mcp::McpProgram>,
}

/// The whole of a command line whose record keeps only its head (the calls log's `argv_cut`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArgvCut {
    /// Arguments in the whole command line, `argv[0]` included.
    pub argc: usize,
    /// Bytes of every argument together (without separators).
    pub bytes: u64,
    /// BLAKE3, in hex, of every argument's exact bytes, each followed by a NUL byte.
    pub blake3: String,
}

/// `bytes` in lower-case hex, two digits a byte.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The command line as a call record keeps it: `name` then each argument whole while the
/// bounds allow ([`ARG_HEAD_BYTES`] each, [`ARGV_HEAD_BYTES`] and [`ARGS_KEPT`] in all), cut
/// at a byte (UTF-8: a character) boundary past them, the rest left out; an argument that is
/// not UTF-8 as lossy text with its kept bytes in hex; and, when anything was left out, what
/// the whole held.
pub fn bounded_argv(
    name: &str,
    rest: &[OsString],
) -> (Vec<String>, BTreeMap<usize, String>, Option<ArgvCut>) {
    let mut argv = vec![name.to_string()];
    let mut argv_hex = BTreeMap::new();
    let mut room = ARGV_HEAD_BYTES.saturating_sub(name.len());
    let mut cut = false;
    for (i, a) in rest.iter().enumerate() {
        let bytes = a.as_bytes();
        if argv.len() >= ARGS_KEPT || (room == 0 && !bytes.is_empty()) {
            cut = true;
            break;
        }
        let keep = bytes.len().min(ARG_HEAD_BYTES).min(room);
        let head = match std::str::from_utf8(bytes) {
            Ok(text) => {
                let mut end = keep;
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                text[..end].to_string()
            }
            Err(_) => {
                argv_hex.insert(i + 1, hex(&bytes[..keep]));
                String::from_utf8_lossy(&bytes[..keep]).into_owned()
            }
        };
        cut |= keep < bytes.len();
        room -= keep;
        argv.push(head);
    }
    let argv_cut = cut.then(|| {
        let mut hasher = blake3::Hasher::new();
        let mut total = name.len() as u64;
        hasher.update(name.as_bytes());
        hasher.update(&[0]);
        for a in rest {
            total += a.len() as u64;
            hasher.update(a.as_bytes());
            hasher.update(&[0]);
        }
        ArgvCut {
            argc: rest.len() + 1,
            bytes: total,
            blake3: hasher.finalize().to_hex().to_string(),
        }
    });
    (argv, argv_hex, argv_cut)
}

/// What the calls log gets when a call starts (its `CallStart`).
#[derive(Serialize)]
struct StartLine<'a> {
    command: &'a str,
    argv: Vec<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    argv_hex: BTreeMap<usize, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    argv_cut: Option<ArgvCut>,
    cwd: String,
}

/// What the calls log gets when a call ends (its `CallEnd`).
#[derive(Serialize, Default)]
struct EndLine {
    exit: i32,
    stdin_bytes: u64,
    stdin_hash: String,
    stdin_head: String,
    stdin_terminal: bool,
    stdout_bytes: u64,
    stdout_head: String,
    stderr_bytes: u64,
    stderr_head: String,
}

/// The calls log's answer to a call's start.
#[derive(Deserialize, Default)]
struct SeqReply {
    #[serde(default)]
    refused: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// The shim's side.

/// Runs the allowed command `name` with `args` through the trial's call runner at `socket`,
/// as the shim does with namespaces: gives the exit status to exit with (125 when the call
/// could not be made: it did not run).
pub fn call(socket: &Path, name: &OsStr, args: &[OsString]) -> i32 {
    let shown = name.to_string_lossy();
    match call_inner(socket, name, args) {
        Ok(code) => code,
        Err(why) => {
            eprintln!("proctor: {why}; `{shown}` was not run");
            125
        }
    }
}

fn call_inner(socket: &Path, name: &OsStr, args: &[OsString]) -> Result<i32, String> {
    let conn = UnixStream::connect(socket).map_err(|e| {
        format!(
            "cannot reach the trial's call runner at {}: {e}",
            socket.display()
        )
    })?;
    let terminal = std::io::stdin().is_terminal();
    let mut payload = Vec::new();
    let mut field = |b: &[u8]| {
        payload.extend_from_slice(b);
        payload.push(0);
    };
    field(VERSION);
    field(if terminal { b"t" } else { b"-" });
    field(name.as_bytes());
    field(args.len().to_string().as_bytes());
    for a in args {
        field(a.as_bytes());
    }
    for (k, v) in std::env::vars_os() {
        let mut kv = k.into_vec();
        kv.push(b'=');
        kv.extend_from_slice(v.as_bytes());
        field(&kv);
    }
    if payload.len() > REQUEST_MAX {
        return Err("the command line and environment are too long".into());
    }
    let cwd = std::fs::File::open(".")
        .map(OwnedFd::from)
        .map_err(|e| format!("cannot open the working folder: {e}"))?;
    let mut message = (payload.len() as u32).to_le_bytes().to_vec();
    message.extend_from_slice(&payload);
    sys::send_all_fds(conn.as_raw_fd(), &message, &[0, 1, 2, cwd.as_raw_fd()])
        .map_err(|e| format!("cannot send the call: {e}"))?;
    drop(cwd);
    forward_signals(&conn);
    let mut reply = [0u8; 4];
    match (&conn).read_exact(&mut reply) {
        Ok(()) => Ok(i32::from_le_bytes(reply)),
        Err(_) => Err("the trial's call runner did not answer (too many calls at once?)".into()),
    }
}

/// Passes the signals a person or a wrapper sends the shim on to the program, through `conn`.
fn forward_signals(conn: &UnixStream) {
    let signals = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];
    let Ok(set) = sys::block_signals(&signals) else {
        return;
    };
    let Ok(mut out) = conn.try_clone() else {
        return;
    };
    let _ = std::thread::Builder::new()
        .name("shim-signals".into())
        .spawn(move || {
            while let Ok(sig) = sys::wait_signal(&set) {
                if out.write_all(&sig.to_le_bytes()).is_err() {
                    break;
                }
            }
        });
}

// ---------------------------------------------------------------------------------------------
// The trial init's side.

/// The trial init's end of the calls: its listening socket, the folder of the calls log's
/// socket, the allow-list, and the calls running.
pub(crate) struct CallServer {
    listener: UnixListener,
    log_dir: OwnedFd,
    log_name: PathBuf,
    allowed: Vec<AllowedProgram>,
    path: Option<String>,
    view: AgentView,
    running: Vec<libc::pid_t>,
    /// Whether the trial init's children are born in its own PID namespace again (after it
    /// made the agent's, its children's namespace was the agent's).
    in_trial_ns: bool,
    /// The services of a network of their own, by name, each with a pidfd the trial init
    /// holds: an MCP server's session joins its service's network by it.
    networks: Vec<(String, RawFd)>,
}

/// Which mount namespace a call's program runs in.
enum AgentView {
    /// The trial init's own: the agent shares it.
    Same,
    /// The agent's own, still to be received from the agent init on this socket.
    Pending(OwnedFd),
    /// The agent's own.
    Got(OwnedFd),
    /// The agent init never sent it: calls cannot run in the agent's view.
    Lost,
}

impl CallServer {
    /// Listens at `spec.listen` and holds the calls log's folder open. Called before the
    /// trial's root is built, while host paths still resolve.
    pub(crate) fn open(spec: &CallsSpec) -> Result<CallServer, String> {
        let _ = std::fs::remove_file(&spec.listen);
        let listener = UnixListener::bind(&spec.listen)
            .map_err(|e| format!("listen for calls at {}: {e}", spec.listen.display()))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("make the calls socket non-blocking: {e}"))?;
        let (Some(dir), Some(name)) = (spec.log.parent(), spec.log.file_name()) else {
            return Err(format!("no calls log socket at {}", spec.log.display()));
        };
        let log_dir = rustix::fs::open(
            dir,
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map_err(|e| format!("open the calls log's folder {}: {e}", dir.display()))?;
        Ok(CallServer {
            listener,
            log_dir,
            log_name: PathBuf::from(name),
            allowed: spec.allowed.clone(),
            path: spec.path.clone(),
            view: AgentView::Same,
            running: Vec::new(),
            in_trial_ns: false,
            networks: Vec::new(),
        })
    }

    /// The listening socket, to poll.
    pub(crate) fn raw_fd(&self) -> RawFd {
        self.listener.as_raw_fd()
    }

    /// The services of a network of their own (name, a pidfd the trial init keeps open for
    /// the trial's life), which MCP sessions may join.
    pub(crate) fn service_networks(&mut self, networks: Vec<(String, RawFd)>) {
        self.networks = networks;
    }

    /// Calls run in the agent's own mount namespace, which the agent init sends on `from`.
    pub(crate) fn in_agent_view(&mut self, from: OwnedFd) {
        self.view = AgentView::Pending(from);
    }

    /// A new agent init is about to start (a conversation's next turn): the trial init has
    /// made a new PID namespace for it, so its next call's process must be put back in the
    /// trial's own again, and the agent's view is the new agent init's (or the trial init's).
    pub(crate) fn new_agent(&mut self) {
        self.in_trial_ns = false;
        self.view = AgentView::Same;
    }

    /// Takes every waiting connection: each gets its own process, C, which runs the call;
    /// past [`CALLS_IN_FLIGHT`] running calls a connection is closed unanswered. Calls that
    /// ended are reaped first.
    pub(crate) fn accept(&mut self) {
        loop {
            let conn = match self.listener.accept() {
                Ok((conn, _)) => conn,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            };
            self.reap();
            if self.running.len() >= CALLS_IN_FLIGHT {
                continue;
            }
            let mnt = match self.agent_view() {
                Ok(mnt) => mnt,
                Err(()) => continue,
            };
            if !self.back_in_trial_ns() {
                continue;
            }
            match sys::fork() {
                Ok(0) => {
                    sys::set_name(c"proctor-call");
                    let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        let _ = sys::set_parent_death_signal(libc::SIGKILL);
                        let path = self.path.as_deref();
                        run_call(
                            conn,
                            (&self.log_dir, &self.log_name),
                            &self.allowed,
                            path,
                            (mnt, &self.networks),
                        )
                    }))
                    .unwrap_or(101);
                    sys::exit_now(code);
                }
                Ok(pid) => self.running.push(pid),
                Err(_) => {}
            }
        }
    }

    /// Makes the trial init's next children be born in its own PID namespace, not the agent's
    /// (which it made for the agent init): a call's process must be out of the agent's sight.
    /// `false` when that cannot be: then no call runs.
    fn back_in_trial_ns(&mut self) -> bool {
        if !self.in_trial_ns {
            self.in_trial_ns = children_in_own_pid_ns().is_ok();
        }
        self.in_trial_ns
    }

    /// Reaps the calls that ended.
    fn reap(&mut self) {
        self.running
            .retain(|&pid| matches!(sys::wait4(pid, libc::WNOHANG), Ok(None)));
    }

    /// The agent's mount namespace to run calls in (`None`: the trial init's, which the agent
    /// shares), received the first time it is needed; `Err` when it never came.
    fn agent_view(&mut self) -> Result<Option<RawFd>, ()> {
        if let AgentView::Pending(from) = &self.view {
            let mut fds = Vec::new();
            let mut buf = [0u8; 8];
            let got = sys::recv_with_fds(from.as_raw_fd(), &mut buf, &mut fds);
            self.view = match (got, fds.pop()) {
                (Ok(_), Some(fd)) => AgentView::Got(fd),
                _ => AgentView::Lost,
            };
        }
        match &self.view {
            AgentView::Same => Ok(None),
            AgentView::Got(fd) => Ok(Some(fd.as_raw_fd())),
            AgentView::Pending(_) | AgentView::Lost => Err(()),
        }
    }
}

/// Makes the calling process's next children be born in its own PID namespace again (after an
/// `unshare(CLONE_NEWPID)`, which also forbids it to start threads).
fn children_in_own_pid_ns() -> std::io::Result<()> {
    // SAFETY: getpid cannot fail.
    let me = sys::pidfd_open(unsafe { libc::getpid() })?;
    // SAFETY: setns with a pidfd of this very process: its active PID namespace becomes its
    // children's again.
    if unsafe { libc::setns(me.as_raw_fd(), libc::CLONE_NEWPID) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The agent init's part: sends its mount namespace (the agent's view) to the trial init.
pub(crate) fn send_agent_view(to: RawFd) -> Result<(), String> {
    let ns = std::fs::File::open("/proc/self/ns/mnt")
        .map_err(|e| format!("open the agent's mount namespace: {e}"))?;
    sys::send_with_fds(to, b"m", &[ns.as_raw_fd()])
        .map_err(|e| format!("send the agent's mount namespace: {e}"))
}

/// A call's request, as the shim sent it.
struct Request {
    terminal: bool,
    name: OsString,
    args: Vec<OsString>,
    env: Vec<OsString>,
    /// stdin, stdout, stderr, working folder.
    fds: [OwnedFd; 4],
}

/// Reads one request: a length, then NUL-terminated fields, with four descriptors.
fn read_request(conn: &UnixStream) -> Result<Request, String> {
    let _ = conn.set_read_timeout(Some(REQUEST_TIMEOUT));
    let mut fds = Vec::new();
    let mut head = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        let n = sys::recv_with_fds(conn.as_raw_fd(), &mut head[got..], &mut fds)
            .map_err(|e| format!("read the call: {e}"))?;
        if n == 0 {
            return Err("the call ended before its request".into());
        }
        got += n;
    }
    let len = u32::from_le_bytes(head) as usize;
    if len > REQUEST_MAX {
        return Err(format!(
            "a request of {len} bytes is past the bound ({REQUEST_MAX})"
        ));
    }
    let mut payload = vec![0u8; len];
    (&*conn)
        .read_exact(&mut payload)
        .map_err(|e| format!("read the call: {e}"))?;
    let _ = conn.set_read_timeout(None);
    let fds: [OwnedFd; 4] = fds
        .try_into()
        .map_err(|_| "a call passes exactly four descriptors".to_string())?;
    let mut fields = payload
        .strip_suffix(&[0])
        .ok_or("a malformed request")?
        .split(|b| *b == 0)
        .map(|f| OsStr::from_bytes(f).to_os_string());
    let mut next = || fields.next().ok_or("a malformed request".to_string());
    if next()?.as_bytes() != VERSION {
        return Err("a request of another protocol".into());
    }
    let terminal = next()?.as_bytes() == b"t";
    let name = next()?;
    let argc: usize = next()?
        .to_str()
        .and_then(|s| s.parse().ok())
        .ok_or("a malformed request")?;
    let args = (0..argc).map(|_| next()).collect::<Result<Vec<_>, _>>()?;
    let env = fields.collect();
    Ok(Request {
        terminal,
        name,
        args,
        env,
        fds,
    })
}

/// C: runs one call (see the module doc); gives C's exit status.
fn run_call(
    conn: UnixStream,
    (log_dir, log_name): (&OwnedFd, &Path),
    allowed: &[AllowedProgram],
    path: Option<&str>,
    (mnt, networks): (Option<RawFd>, &[(String, RawFd)]),
) -> i32 {
    let mut req = match read_request(&conn) {
        Ok(r) => r,
        Err(_) => return 1,
    };
    req.env = program_env(std::mem::take(&mut req.env), path);
    let name = req.name.to_string_lossy().into_owned();
    let stderr = req.fds[2].try_clone().map(std::fs::File::from);
    let say = |text: &str| {
        if let Ok(mut e) = stderr.as_ref().map(|f| f.try_clone()) {
            if let Ok(e) = e.as_mut() {
                let _ = writeln!(e, "{text}");
            }
        }
    };
    let answer = |code: i32| {
        let _ = (&conn).write_all(&code.to_le_bytes());
    };
    let Some(program) = allowed
        .iter()
        .find(|a| a.name.as_bytes() == req.name.as_bytes())
    else {
        say(&format!(
            "proctor: `{name}` is not an allowed command of this trial; it was not run"
        ));
        answer(125);
        return 0;
    };
    let launch = match &program.mcp {
        Some(mcp) => join_service_network(mcp, networks).and_then(|()| Launch::mcp(mcp)),
        None => Launch::program(&req, &name, &program.program, mnt),
    };
    let ran = launch.and_then(|l| run_program(&req, &name, l, log_dir, log_name, &conn));
    match ran {
        Ok(code) => answer(code),
        Err(why) => {
            say(&format!("proctor: {why}; `{name}` was not run"));
            answer(125);
        }
    }
    0
}

/// Puts this call's process (and so the MCP server it starts) in the network of the service
/// the server's spec names, if it names one: the only way into that network.
fn join_service_network(
    mcp: &crate::mcp::McpProgram,
    networks: &[(String, RawFd)],
) -> Result<(), String> {
    let Some(service) = &mcp.network else {
        return Ok(());
    };
    let (_, fd) = networks
        .iter()
        .find(|(name, _)| name == service)
        .ok_or_else(|| format!("service {service} is not running in a network of its own"))?;
    // SAFETY: the trial init holds the pidfd open for the trial's life; this process is its
    // fork and has not closed it.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(*fd) };
    sys::join_network(fd).map_err(|e| format!("join service {service}'s network: {e}"))
}

/// The environment a call's program gets: the caller's, without what would run the caller's
/// own code inside the program or pick its commands (the dynamic loader's `LD_*`, bash's
/// exported functions `BASH_FUNC_*` and start-up files `BASH_ENV` and `ENV`), with `path` as
/// its `PATH` when given. What the program does is then the program's doing, on the caller's
/// arguments, stdin, files and other variables.
fn program_env(env: Vec<OsString>, path: Option<&str>) -> Vec<OsString> {
    let mut kept: Vec<OsString> = env
        .into_iter()
        .filter(|kv| {
            let key = kv
                .as_bytes()
                .split(|b| *b == b'=')
                .next()
                .unwrap_or_default();
            !(key.starts_with(b"LD_")
                || key.starts_with(b"BASH_FUNC_")
                || key == b"BASH_ENV"
                || key == b"ENV"
                || (path.is_some() && key == b"PATH"))
        })
        .collect();
    if let Some(p) = path {
        kept.push(OsString::from(format!("PATH={p}")));
    }
    kept
}

/// What the program's process reports before it executes: its working folder, or why it
/// could not be set up.
enum Status {
    Cwd(String),
    Failed(String),
}

/// Reads one status message (`C`/`E`, a length, the text); `None` at the end (the program
/// was executed).
fn read_status(r: &mut impl Read) -> Option<Status> {
    let mut head = [0u8; 5];
    r.read_exact(&mut head).ok()?;
    let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
    let mut text = vec![0u8; len.min(1 << 16)];
    r.read_exact(&mut text).ok()?;
    let text = String::from_utf8_lossy(&text).into_owned();
    Some(if head[0] == b'C' {
        Status::Cwd(text)
    } else {
        Status::Failed(text)
    })
}

/// What a call runs: the program, its argv and environment, the view and working folder it
/// runs in, and, for an MCP server, the session to relay.
struct Launch<'a> {
    program: CString,
    argv: Vec<CString>,
    envp: Vec<CString>,
    mnt: Option<RawFd>,
    /// The working folder: opened here for an MCP server, else the shim's.
    cwd: Option<OwnedFd>,
    /// What the calls log records as the call's arguments.
    logged: Vec<OsString>,
    mcp: Option<&'a crate::mcp::McpProgram>,
}

impl<'a> Launch<'a> {
    /// The allowed program of a command call, on the request's arguments, in the agent's view.
    fn program(
        req: &Request,
        name: &str,
        program: &Path,
        mnt: Option<RawFd>,
    ) -> Result<Launch<'a>, String> {
        let (program, argv, envp) = exec_strings(req, name, program)?;
        Ok(Launch {
            program,
            argv,
            envp,
            mnt,
            cwd: None,
            logged: req.args.clone(),
            mcp: None,
        })
    }

    /// An MCP server, as its spec says, in the trial init's own view (the agent's arguments and
    /// environment are not used).
    fn mcp(spec: &'a crate::mcp::McpProgram) -> Result<Launch<'a>, String> {
        let cstr =
            |b: &[u8]| CString::new(b).map_err(|_| "a NUL byte in the server's spec".to_string());
        let argv = spec
            .argv
            .iter()
            .map(|a| cstr(a.as_bytes()))
            .collect::<Result<Vec<_>, _>>()?;
        let envp = spec
            .env
            .iter()
            .map(|(k, v)| cstr(format!("{k}={v}").as_bytes()))
            .collect::<Result<Vec<_>, _>>()?;
        let program = argv.first().cloned().ok_or("the MCP server has no argv")?;
        let cwd = rustix::fs::open(
            &spec.cwd,
            rustix::fs::OFlags::RDONLY
                | rustix::fs::OFlags::DIRECTORY
                | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map_err(|e| format!("open the server's folder {}: {e}", spec.cwd.display()))?;
        Ok(Launch {
            program,
            argv,
            envp,
            mnt: None,
            cwd: Some(cwd),
            logged: spec.argv.iter().map(OsString::from).collect(),
            mcp: Some(spec),
        })
    }
}

/// A call's program started and held before it runs: it has reported (or will report) its
/// working folder on `status_r` and waits for a byte on `go_w`.
struct Started {
    /// The program's process (PID 1 of a PID namespace of its own).
    child: libc::pid_t,
    /// Its status pipe.
    status_r: OwnedFd,
    /// Its go pipe.
    go_w: OwnedFd,
    /// Its stdin, when proctor feeds it (not a terminal handed over, and always for MCP).
    stdin_w: Option<OwnedFd>,
    /// Its stdout.
    out_r: OwnedFd,
    /// Its stderr (unused for an MCP server, whose stderr is the agent's).
    err_r: OwnedFd,
}

/// Forks the process of `launch`'s program, in a PID namespace of its own, with its pipes.
fn start_program(req: &Request, launch: &Launch) -> Result<Started, String> {
    let pipe = || sys::pipe().map_err(|e| format!("make a pipe: {e}"));
    let (status_r, status_w) = pipe()?;
    let (go_r, go_w) = pipe()?;
    // An MCP session always reads the agent's messages itself.
    let stdin_pipe = if req.terminal && launch.mcp.is_none() {
        None
    } else {
        Some(pipe()?)
    };
    let (out_r, out_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    let stdin_fd = match &stdin_pipe {
        Some((r, _)) => r.as_raw_fd(),
        None => req.fds[0].as_raw_fd(),
    };
    // An MCP server's stderr is the agent's, as a stdio server's is its client's.
    let err_fd = match launch.mcp {
        Some(_) => req.fds[2].as_raw_fd(),
        None => err_w.as_raw_fd(),
    };
    let plan = ChildPlan {
        mnt: launch.mnt,
        cwd: launch
            .cwd
            .as_ref()
            .map_or(req.fds[3].as_raw_fd(), |c| c.as_raw_fd()),
        stdio: [stdin_fd, out_w.as_raw_fd(), err_fd],
        status: status_w.as_raw_fd(),
        go: go_r.as_raw_fd(),
        program: &launch.program,
        argv: &launch.argv,
        envp: &launch.envp,
    };
    // The program is PID 1 of a namespace of its own: it sees and signals nothing of the
    // trial's (nor the agent anything of it).
    sys::unshare(libc::CLONE_NEWPID).map_err(|e| format!("unshare a PID namespace: {e}"))?;
    let child = sys::fork().map_err(|e| format!("fork: {e}"))?;
    if child == 0 {
        exec_child(&plan);
    }
    // This process starts threads below, which its own PID namespace allows.
    if let Err(e) = children_in_own_pid_ns() {
        sys::kill(child, libc::SIGKILL);
        let _ = sys::wait4(child, 0);
        return Err(format!("leave the program's PID namespace: {e}"));
    }
    drop((status_w, go_r, out_w, err_w));
    let stdin_w = stdin_pipe.map(|(r, w)| {
        drop(r);
        w
    });
    Ok(Started {
        child,
        status_r,
        go_w,
        stdin_w,
        out_r,
        err_r,
    })
}

/// Runs the program of one call and records it; gives its exit status.
fn run_program(
    req: &Request,
    name: &str,
    launch: Launch,
    log_dir: &OwnedFd,
    log_name: &Path,
    conn: &UnixStream,
) -> Result<i32, String> {
    let program = Path::new(std::ffi::OsStr::from_bytes(launch.program.as_bytes()));
    let Started {
        child,
        status_r,
        go_w,
        stdin_w,
        out_r,
        err_r,
    } = start_program(req, &launch)?;
    let mut status_r = std::fs::File::from(status_r);
    let kill = || sys::kill(child, libc::SIGKILL);
    let cwd = match read_status(&mut status_r) {
        Some(Status::Cwd(c)) => Ok(c),
        Some(Status::Failed(why)) => Err(why),
        None => Err("the program's process ended before it was set up".into()),
    };
    // The start is recorded before the program runs (and even when it cannot: as today's
    // shim recorded a program that would not start).
    let mut log = match log_start(
        log_dir,
        log_name,
        name,
        &launch.logged,
        cwd.as_deref().unwrap_or(""),
    ) {
        Ok(log) => log,
        Err(why) => {
            kill();
            let _ = sys::wait4(child, 0);
            return Err(why);
        }
    };
    // A program that never got to run: its process reaped, the call recorded as exit 127.
    let mut not_run = |why: String| {
        let _ = sys::wait4(child, 0);
        finish(
            &mut log,
            127,
            format!("cannot run: {why}"),
            req,
            name,
            program,
        )
    };
    if let Err(why) = cwd {
        kill();
        return not_run(why);
    }
    let mut go = std::fs::File::from(go_w);
    if go.write_all(b"g").is_err() {
        return not_run("its process ended".into());
    }
    drop(go);
    if let Some(Status::Failed(why)) = read_status(&mut status_r) {
        return not_run(why);
    }
    let end = match (launch.mcp, stdin_w) {
        (Some(spec), Some(stdin_w)) => {
            drop(err_r);
            relay_mcp(child, req, spec, name, stdin_w, out_r, &log, conn)
        }
        (_, stdin_w) => relay(child, req, stdin_w, out_r, err_r, conn),
    };
    let text = serde_json::to_string(&end).map_err(|e| e.to_string())?;
    let _ = writeln!(log, "{text}");
    Ok(end.exit)
}

/// The program, its argv (`name`, then the request's arguments) and its environment as C
/// strings for `execve`.
fn exec_strings(
    req: &Request,
    name: &str,
    program: &Path,
) -> Result<(CString, Vec<CString>, Vec<CString>), String> {
    let cstr = |b: &[u8]| CString::new(b).map_err(|_| "a NUL byte in the request".to_string());
    let argv = std::iter::once(name.as_bytes())
        .chain(req.args.iter().map(|a| a.as_bytes()))
        .map(cstr)
        .collect::<Result<Vec<_>, _>>()?;
    let envp = req
        .env
        .iter()
        .map(|e| cstr(e.as_bytes()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((cstr(program.as_os_str().as_bytes())?, argv, envp))
}

/// Records a call that never got to run its program (exit 127), and says why on its stderr.
fn finish(
    log: &mut UnixStream,
    exit: i32,
    why: String,
    req: &Request,
    name: &str,
    program: &Path,
) -> Result<i32, String> {
    if let Ok(mut e) = req.fds[2].try_clone().map(std::fs::File::from) {
        let _ = writeln!(e, "{name}: {} {why}", program.display());
    }
    let end = EndLine {
        exit,
        stderr_head: why,
        stdin_terminal: req.terminal,
        ..EndLine::default()
    };
    let text = serde_json::to_string(&end).map_err(|e| e.to_string())?;
    let _ = writeln!(log, "{text}");
    Ok(exit)
}

/// Connects to the calls log (through the folder held open since before the root was built)
/// and reports the call's start; gives the connection to report its end on, or why the call
/// may not run.
fn log_start(
    dir: &OwnedFd,
    socket: &Path,
    name: &str,
    args: &[OsString],
    cwd: &str,
) -> Result<UnixStream, String> {
    rustix::process::fchdir(dir).map_err(|e| format!("cannot reach the calls log: {e}"))?;
    let conn =
        UnixStream::connect(socket).map_err(|e| format!("cannot reach the calls log: {e}"))?;
    let (argv, argv_hex, argv_cut) = bounded_argv(name, args);
    let start = StartLine {
        command: name,
        argv,
        argv_hex,
        argv_cut,
        cwd: cwd.to_string(),
    };
    let text = serde_json::to_string(&start).map_err(|e| e.to_string())?;
    let mut w = &conn;
    writeln!(w, "{text}").map_err(|e| format!("cannot reach the calls log: {e}"))?;
    let mut reply = String::new();
    let n = BufReader::new(&conn)
        .take(REPLY_MAX)
        .read_line(&mut reply)
        .unwrap_or(0);
    if n == 0 {
        return Err("the calls log did not answer".into());
    }
    let reply: SeqReply = serde_json::from_str(&reply).unwrap_or_default();
    if let Some(why) = reply.refused {
        return Err(why);
    }
    Ok(conn)
}

/// What the program's process needs, made before the fork (it allocates nothing after it
/// but the few small buffers it reports with).
struct ChildPlan<'a> {
    mnt: Option<RawFd>,
    cwd: RawFd,
    stdio: [RawFd; 3],
    status: RawFd,
    go: RawFd,
    program: &'a CString,
    argv: &'a [CString],
    envp: &'a [CString],
}

/// The program's process: PID 1 of its own PID namespace. Enters the agent's view of the files
/// with a `/proc` of its own, reports its working folder, waits for the go, then forks the
/// program (executed with the agent's capabilities) and stays its init: passes signals on and
/// exits with its status (128 + the signal when a signal ended it). Never returns.
fn exec_child(plan: &ChildPlan) -> ! {
    let status = StatusPipe(plan.status);
    enter_view(plan, status);
    // SAFETY: a directory descriptor this process holds.
    if unsafe { libc::fchdir(plan.cwd) } != 0 {
        status.fail("enter its working folder", std::io::Error::last_os_error());
    }
    let cwd = std::env::current_dir()
        .map(|p| p.into_os_string().into_vec())
        .unwrap_or_default();
    status.report(b'C', &cwd);
    let mut go = [0u8; 1];
    // SAFETY: reading one byte into a valid buffer.
    if unsafe { libc::read(plan.go, go.as_mut_ptr().cast(), 1) } != 1 {
        sys::exit_now(0);
    }
    // This process stays PID 1 of the program's namespace, a small init with the program as
    // its child: a signal from outside reaches a namespace's init only where the init takes
    // it, so the init takes the usual ones and passes them on.
    let passed = [
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGCHLD,
    ];
    let set = match sys::block_signals(&passed) {
        Ok(set) => set,
        Err(e) => status.fail("block signals", e),
    };
    match sys::fork() {
        Ok(0) => exec_program(plan, status),
        Ok(program) => pass_signals_until_it_ends(program, &set),
        Err(e) => status.fail("fork", e),
    }
}

/// The status pipe of a call's process: what it reports to the call runner.
#[derive(Clone, Copy)]
struct StatusPipe(RawFd);

impl StatusPipe {
    /// Writes one message: its tag, its length and its text.
    fn report(self, tag: u8, text: &[u8]) {
        let mut msg = vec![tag];
        msg.extend_from_slice(&(text.len() as u32).to_le_bytes());
        msg.extend_from_slice(text);
        // SAFETY: the status descriptor is ours; a plain write of a valid buffer.
        let _ = sys::write_all(unsafe { std::os::fd::BorrowedFd::borrow_raw(self.0) }, &msg);
    }

    /// Reports what failed, and ends the process with 127.
    fn fail(self, what: &str, e: std::io::Error) -> ! {
        self.report(b'E', format!("{what}: {e}").as_bytes());
        sys::exit_now(127);
    }
}

/// Enters the agent's view of the files, with a `/proc` of the program's own PID namespace so
/// that `/proc/self` is itself (where that cannot be, the agent's `/proc` stays).
fn enter_view(plan: &ChildPlan, status: StatusPipe) {
    if let Some(mnt) = plan.mnt {
        // SAFETY: a descriptor of a mount namespace this process holds.
        if unsafe { libc::setns(mnt, libc::CLONE_NEWNS) } != 0 {
            status.fail("enter the agent's view", std::io::Error::last_os_error());
        }
    }
    if sys::unshare(libc::CLONE_NEWNS).is_ok() {
        let _ = sys::mount(
            None,
            Path::new("/"),
            None,
            libc::MS_REC | libc::MS_PRIVATE,
            None,
        );
        let _ = sys::mount(
            Some(OsStr::new("proc")),
            Path::new("/proc"),
            Some("proc"),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            None,
        );
    }
}

/// The init's part once the program runs: passes the signals in `set` on to it and exits with
/// its status (128 + the signal when a signal ended it).
fn pass_signals_until_it_ends(program: libc::pid_t, set: &nix::sys::signal::SigSet) -> ! {
    // The program's stdio and the status pipe are the program's alone, and this init needs no
    // privilege to pass signals on and wait.
    let _ = sys::close_all_but(&[]);
    if sys::drop_capabilities_but(sys::AGENT_CAPABILITIES).is_err() {
        sys::kill(program, libc::SIGKILL);
        sys::exit_now(125);
    }
    loop {
        let Ok(sig) = sys::wait_signal(set) else {
            sys::kill(program, libc::SIGKILL);
            sys::exit_now(125);
        };
        if sig != libc::SIGCHLD {
            sys::kill(program, sig);
            continue;
        }
        while let Ok(Some((pid, status, _))) = sys::wait4(-1, libc::WNOHANG) {
            if pid == program {
                // Its end is the call's: what is left of the namespace goes with this process.
                let e = sys::decode_status(status);
                sys::exit_now(e.code.unwrap_or_else(|| 128 + e.signal.unwrap_or(0)));
            }
        }
    }
}

/// The program's own process: its stdio in place, every other descriptor closed but the status
/// pipe (close-on-exec), default signals, the agent's capabilities; then the program.
fn exec_program(plan: &ChildPlan, status: StatusPipe) -> ! {
    // Above 2 first, so that moving one onto 0..=2 never overwrites another.
    let mut high = [0; 3];
    for (i, fd) in plan.stdio.iter().enumerate() {
        // SAFETY: duplicating a descriptor this process holds.
        high[i] = unsafe { libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, 10) };
        if high[i] < 0 {
            status.fail("set up its stdio", std::io::Error::last_os_error());
        }
    }
    for (i, fd) in high.iter().enumerate() {
        // SAFETY: moving a descriptor this process holds onto 0, 1 or 2.
        if unsafe { libc::dup2(*fd, i as RawFd) } < 0 {
            status.fail("set up its stdio", std::io::Error::last_os_error());
        }
    }
    if let Err(e) = sys::close_all_but(&[plan.status]) {
        status.fail("close descriptors", e);
    }
    sys::reset_signals();
    let _ = sys::set_parent_death_signal(libc::SIGKILL);
    if let Err(e) = sys::drop_capabilities_but(sys::AGENT_CAPABILITIES) {
        status.fail("drop capabilities", e);
    }
    let mut argv: Vec<*const libc::c_char> = plan.argv.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = plan.envp.iter().map(|a| a.as_ptr()).collect();
    envp.push(std::ptr::null());
    // SAFETY: NUL-terminated arrays of valid C strings that outlive the call.
    unsafe { libc::execve(plan.program.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
    status.fail("execute it", std::io::Error::last_os_error());
}

/// Counts, hashes and keeps the head of one stream of a call (its stdin, stdout or stderr), as
/// a call record keeps it; shared through an `Arc<Mutex<_>>` with the thread that [`pump`]s it.
#[derive(Default)]
pub struct Tap {
    bytes: u64,
    head: Vec<u8>,
    hasher: Option<blake3::Hasher>,
}

impl Tap {
    /// A tap that also hashes what passes (for stdin).
    pub fn hashing() -> Tap {
        Tap {
            hasher: Some(blake3::Hasher::new()),
            ..Tap::default()
        }
    }

    fn take(&mut self, chunk: &[u8]) {
        self.bytes += chunk.len() as u64;
        let room = HEAD_BYTES.saturating_sub(self.head.len());
        self.head.extend_from_slice(&chunk[..room.min(chunk.len())]);
        if let Some(h) = self.hasher.as_mut() {
            h.update(chunk);
        }
    }

    /// What passed so far: bytes, the head as text, the hash in hex (empty when not hashing).
    pub fn snapshot(tap: &Mutex<Tap>) -> (u64, String, String) {
        match tap.lock() {
            Ok(t) => (
                t.bytes,
                String::from_utf8_lossy(&t.head).into_owned(),
                t.hasher
                    .as_ref()
                    .map(|h| h.clone().finalize().to_hex().to_string())
                    .unwrap_or_default(),
            ),
            Err(_) => (0, String::new(), String::new()),
        }
    }
}

/// Copies `from` to `to` until either ends, through `tap`.
pub fn pump(mut from: impl Read, mut to: impl Write, tap: Arc<Mutex<Tap>>) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
            Ok(n) => {
                if let Ok(mut t) = tap.lock() {
                    t.take(&buf[..n]);
                }
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
}

/// Copies the program's stdio through taps, passes on the shim's signals, waits for the
/// program; gives the call's end.
fn relay(
    child: libc::pid_t,
    req: &Request,
    stdin_w: Option<OwnedFd>,
    out_r: OwnedFd,
    err_r: OwnedFd,
    conn: &UnixStream,
) -> EndLine {
    let file = |fd: &OwnedFd| fd.try_clone().map(std::fs::File::from);
    let stdin_tap = Arc::new(Mutex::new(Tap::hashing()));
    let out_tap = Arc::new(Mutex::new(Tap::default()));
    let err_tap = Arc::new(Mutex::new(Tap::default()));
    let (stdin_done, stdin_finished) = std::sync::mpsc::channel::<()>();
    match (stdin_w, file(&req.fds[0])) {
        (Some(w), Ok(src)) => {
            let tap = stdin_tap.clone();
            // Never joined for long: an agent may keep its stdin open forever.
            let _ = std::thread::Builder::new().spawn(move || {
                pump(src, std::fs::File::from(w), tap);
                let _ = stdin_done.send(());
            });
        }
        _ => drop(stdin_done),
    }
    let mut threads = Vec::new();
    for (r, to, tap) in [
        (out_r, file(&req.fds[1]), out_tap.clone()),
        (err_r, file(&req.fds[2]), err_tap.clone()),
    ] {
        let Ok(to) = to else { continue };
        threads.push(std::thread::spawn(move || {
            pump(std::fs::File::from(r), to, tap)
        }));
    }
    let status = wait_passing_signals(child, conn);
    for t in threads {
        let _ = t.join();
    }
    // Give a piped stdin a moment to reach its end, so its size and hash are whole; an stdin
    // that stays open is recorded as far as it was read.
    let _ = stdin_finished.recv_timeout(Duration::from_millis(100));
    let exit = match status {
        Some(s) => {
            let e = sys::decode_status(s);
            e.code.unwrap_or_else(|| 128 + e.signal.unwrap_or(0))
        }
        None => 125,
    };
    let (stdin_bytes, stdin_head, stdin_hash) = Tap::snapshot(&stdin_tap);
    let (stdout_bytes, stdout_head, _) = Tap::snapshot(&out_tap);
    let (stderr_bytes, stderr_head, _) = Tap::snapshot(&err_tap);
    EndLine {
        exit,
        stdin_bytes,
        stdin_hash,
        stdin_head,
        stdin_terminal: req.terminal,
        stdout_bytes,
        stdout_head,
        stderr_bytes,
        stderr_head,
    }
}

/// Relays an MCP session between the shim's stdio and the server ([`crate::mcp::relay`]) while
/// waiting for the server (a shim that goes away takes it with it); gives the call's end: the
/// server's exit status and the bytes each side sent.
#[allow(clippy::too_many_arguments)]
fn relay_mcp(
    child: libc::pid_t,
    req: &Request,
    spec: &crate::mcp::McpProgram,
    name: &str,
    stdin_w: OwnedFd,
    out_r: OwnedFd,
    log: &UnixStream,
    conn: &UnixStream,
) -> EndLine {
    let server = name.strip_prefix("mcp:").unwrap_or(name).to_string();
    let file = |fd: &OwnedFd| fd.try_clone().map(std::fs::File::from);
    let (Ok(from_agent), Ok(to_agent), Ok(log)) =
        (file(&req.fds[0]), file(&req.fds[1]), log.try_clone())
    else {
        sys::kill(child, libc::SIGKILL);
        let _ = sys::wait4(child, 0);
        return EndLine {
            exit: 125,
            stderr_head: "cannot relay the session".into(),
            ..EndLine::default()
        };
    };
    let spec = spec.clone();
    let relayed = std::thread::spawn(move || {
        crate::mcp::relay(&spec, &server, from_agent, to_agent, stdin_w, out_r, log)
    });
    let status = wait_passing_signals(child, conn);
    let (stdin_bytes, stdout_bytes) = relayed.join().unwrap_or((0, 0));
    let exit = match status {
        Some(s) => {
            let e = sys::decode_status(s);
            e.code.unwrap_or_else(|| 128 + e.signal.unwrap_or(0))
        }
        None => 125,
    };
    EndLine {
        exit,
        stdin_bytes,
        stdout_bytes,
        ..EndLine::default()
    }
}

/// Waits for the program, passing on each signal number the shim sends; a shim that goes away
/// takes the program with it. Gives the wait status.
fn wait_passing_signals(child: libc::pid_t, conn: &UnixStream) -> Option<libc::c_int> {
    let pidfd = sys::pidfd_open(child).ok();
    let mut conn_open = true;
    if let Some(pidfd) = &pidfd {
        let mut pending = Vec::new();
        loop {
            let mut fds = vec![libc::pollfd {
                fd: pidfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            }];
            if conn_open {
                fds.push(libc::pollfd {
                    fd: conn.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                });
            }
            // SAFETY: a valid array of pollfds of the given length.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
            if n < 0 {
                if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                break;
            }
            if fds[0].revents != 0 {
                break;
            }
            if conn_open && fds[1].revents != 0 {
                let mut buf = [0u8; 64];
                match (&*conn).read(&mut buf) {
                    Ok(0) | Err(_) => {
                        conn_open = false;
                        sys::kill(child, libc::SIGKILL);
                    }
                    Ok(n) => {
                        pending.extend_from_slice(&buf[..n]);
                        while pending.len() >= 4 {
                            let sig: Vec<u8> = pending.drain(..4).collect();
                            let sig = i32::from_le_bytes([sig[0], sig[1], sig[2], sig[3]]);
                            if (1..64).contains(&sig) {
                                sys::kill(child, sig);
                            }
                        }
                    }
                }
            }
        }
    }
    sys::wait4(child, 0).ok().flatten().map(|(_, s, _)| s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_command_line_is_kept_whole() {
        let rest: Vec<OsString> = ["put", "a", "1"].map(OsString::from).to_vec();
        let (argv, hex, cut) = bounded_argv("kv", &rest);
        assert_eq!(argv, ["kv", "put", "a", "1"]);
        assert!(hex.is_empty() && cut.is_none());
    }

    #[test]
    fn a_programs_environment_loses_what_would_run_the_callers_code() {
        let env: Vec<OsString> = [
            "HOME=/home/agent",
            "PATH=/workspace/fake:/usr/bin",
            "LD_PRELOAD=/workspace/evil.so",
            "LD_LIBRARY_PATH=/workspace",
            "BASH_FUNC_cat%%=() { exit 0; }",
            "BASH_ENV=/workspace/rc",
            "ENV=/workspace/rc",
            "ENVIRONMENT=kept",
            "KV_TOKEN=kept",
        ]
        .map(OsString::from)
        .to_vec();
        let kept = program_env(env.clone(), Some("/run/proctor/shims:/usr/bin"));
        assert_eq!(
            kept,
            [
                "HOME=/home/agent",
                "ENVIRONMENT=kept",
                "KV_TOKEN=kept",
                "PATH=/run/proctor/shims:/usr/bin"
            ]
            .map(OsString::from)
        );
        assert!(program_env(env, None).contains(&OsString::from("PATH=/workspace/fake:/usr/bin")));
    }

    #[test]
    fn hex_is_two_lower_case_digits_a_byte() {
        assert_eq!(hex(b"a\xffb\x00"), "61ff6200");
    }
}
