//! The calls log: every call of an allowed interface command, recorded by proctor outside the
//! sandbox.
//!
//! The server owns a Unix socket. With namespaces only the trial's call runner reaches it
//! ([`proctor_sandbox::calls`]: the trial init's process that ran the program, outside the
//! agent's reach); the socket is neither in the agent's view nor in its environment. Without
//! namespaces the shim itself connects, and so can any process of the agent: the trial's
//! record says so. The server, not the client, assigns sequence numbers and timestamps, and
//! only the server writes `calls.jsonl`, which lives in the store where the agent cannot see
//! it, so the agent can neither edit nor truncate earlier lines.
//!
//! Protocol, one JSON object per line: the client sends [`CallStart`], the server answers
//! `{"seq": N}`, the client runs the command and sends [`CallEnd`]. A connection that closes
//! without an end (the call was killed with the trial) is recorded with `exit: null`.
//!
//! Bounds, whatever a trial sends: at most [`MAX_OPEN`] connections of a trial are served at
//! once (one thread each; a further one is closed unanswered, its call not run), each line is
//! read up to [`MAX_LINE`] bytes, and a thread that ended is joined at the next connection.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use proctor_sandbox::mcp::{Exchange, McpLine};
use proctor_score::mcp::{McpRecord, RpcError};
use proctor_score::{ArgvCut, CallRecord};
use serde::{Deserialize, Serialize};

/// What a shim sends when a call starts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CallStart {
    /// The command name.
    pub command: String,
    /// Full argv, each argument that is not UTF-8 lossily decoded.
    pub argv: Vec<String>,
    /// The exact bytes (hex) of each argument that is not UTF-8, by its index in `argv`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub argv_hex: BTreeMap<usize, String>,
    /// What the whole command line held, when `argv` keeps only its head.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argv_cut: Option<ArgvCut>,
    /// Working directory.
    pub cwd: String,
}

/// What a shim sends when the call ends.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CallEnd {
    /// Exit status (128 + signal when killed by one).
    pub exit: i32,
    /// Bytes read from stdin.
    pub stdin_bytes: u64,
    /// BLAKE3 of stdin.
    pub stdin_hash: String,
    /// First bytes of stdin.
    #[serde(default)]
    pub stdin_head: String,
    /// Whether stdin was a terminal, handed to the command uncopied.
    #[serde(default)]
    pub stdin_terminal: bool,
    /// Bytes written to stdout.
    pub stdout_bytes: u64,
    /// First bytes of stdout.
    pub stdout_head: String,
    /// Bytes written to stderr.
    pub stderr_bytes: u64,
    /// First bytes of stderr.
    pub stderr_head: String,
}

/// The server's answer to a call's start: its number, or why it may not run.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct SeqReply {
    /// The call's number (0 when it is refused).
    pub seq: u64,
    /// Why the call may not run (the log is full); absent when it may.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// The MCP log's file name, beside the calls log: one [`McpRecord`] a line.
pub const MCP_LOG: &str = "mcp.jsonl";

/// Calls a trial's log records; past it (or [`MAX_LOG_BYTES`]) further calls are refused, not
/// run unrecorded.
pub const MAX_CALLS: u64 = 20_000;

/// Bytes of records a trial's calls log holds; past it further calls are refused.
pub const MAX_LOG_BYTES: u64 = 64 << 20;

/// The longest line the server reads from a client (a shim's lines are far shorter: its argv is
/// bounded); a longer one ends the connection unanswered, so the call does not run.
pub const MAX_LINE: u64 = 256 * 1024;

/// Connections of one trial served at once (the trial's call runner makes at most
/// [`proctor_sandbox::calls::CALLS_IN_FLIGHT`]); a further one is closed unanswered.
pub const MAX_OPEN: usize = 128;

/// A running calls-log server for one trial.
pub struct CallsLog {
    socket: PathBuf,
    shared: Arc<Shared>,
    /// The socket and its accept thread, until the trial's calls are finished.
    listener: Option<Listener>,
    /// Where the socket goes back for the run's next trial, when it came from there.
    pool: Option<Arc<Listeners>>,
}

impl CallsLog {
    /// The instant calls are timed from (a call's `start` is seconds after it).
    pub fn t0(&self) -> Instant {
        self.shared.t0
    }
}

struct Shared {
    /// The log, opened at the first call: a trial without calls writes no file.
    out: Mutex<LazyLog>,
    /// The MCP log (`mcp.jsonl` beside the calls log), opened at the first MCP record.
    mcp_out: Mutex<LazyLog>,
    next_mcp_seq: AtomicU64,
    next_seq: AtomicU64,
    /// Bytes of records written so far.
    written: AtomicU64,
    /// Calls refused because the log was full.
    refused: AtomicU64,
    /// MCP exchanges that happened (relayed to the server and answered) but that the full log
    /// could not record.
    mcp_unlogged: AtomicU64,
    /// Calls recorded at most, and bytes of records.
    bounds: (u64, u64),
    /// Connections being served.
    open: std::sync::atomic::AtomicUsize,
    t0: Instant,
}

impl Shared {
    fn new(log: &Path, t0: Instant, bounds: (u64, u64)) -> Arc<Shared> {
        Arc::new(Shared {
            out: Mutex::new(LazyLog {
                path: log.to_path_buf(),
                file: None,
            }),
            mcp_out: Mutex::new(LazyLog {
                path: log.with_file_name(MCP_LOG),
                file: None,
            }),
            next_mcp_seq: AtomicU64::new(1),
            next_seq: AtomicU64::new(1),
            written: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            mcp_unlogged: AtomicU64::new(0),
            bounds,
            open: std::sync::atomic::AtomicUsize::new(0),
            t0,
        })
    }
}

/// The run's calls-log sockets, each with its accept thread, kept for one trial after another.
///
/// A trial takes one no trial holds (or a new one) and gives it back once every process of it
/// is gone and its calls are recorded, so a run makes as many as it runs trials at once, not
/// one socket and thread per trial. Between trials a socket serves no one: a connection is
/// closed unanswered.
pub struct Listeners {
    root: PathBuf,
    made: AtomicU64,
    idle: Mutex<Vec<Listener>>,
}

impl Listeners {
    /// No socket yet; each is made in `root` when first needed.
    pub fn new(root: PathBuf) -> Arc<Listeners> {
        Arc::new(Listeners {
            root,
            made: AtomicU64::new(0),
            idle: Mutex::new(Vec::new()),
        })
    }

    /// A calls log for one trial, appending to `log` and timing calls from `t0`, on an idle
    /// socket of the run or a new one ([`CallsLog::socket`] says which).
    pub fn start(self: &Arc<Self>, log: &Path, t0: Instant) -> std::io::Result<CallsLog> {
        let idle = self.idle.lock().ok().and_then(|mut v| v.pop());
        let listener = match idle {
            Some(l) => l,
            None => {
                let n = self.made.fetch_add(1, Ordering::SeqCst);
                Listener::bind(&self.root.join(format!("{n}.sock")))?
            }
        };
        Ok(CallsLog::on(
            listener,
            Shared::new(log, t0, (MAX_CALLS, MAX_LOG_BYTES)),
            Some(self.clone()),
        ))
    }
}

/// One socket and the thread that accepts its connections, each served for the trial that
/// holds the socket then.
struct Listener {
    socket: PathBuf,
    /// The trial served: its log and counters; `None` between trials.
    current: Arc<Mutex<Option<Arc<Shared>>>>,
    /// The threads serving the current trial's connections.
    workers: Arc<Mutex<Vec<JoinHandle<()>>>>,
    stop: Arc<AtomicBool>,
    /// The listening socket, kept to wake the accept thread (`shutdown(2)`) at the end.
    wake: UnixListener,
    accept: Option<JoinHandle<()>>,
}

impl Listener {
    fn bind(socket: &Path) -> std::io::Result<Listener> {
        let _ = std::fs::remove_file(socket);
        let listener = UnixListener::bind(socket)?;
        let wake = listener.try_clone()?;
        let current: Arc<Mutex<Option<Arc<Shared>>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let workers: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let accept = {
            let (current, stop, workers) = (current.clone(), stop.clone(), workers.clone());
            std::thread::Builder::new()
                .name("calls-log".into())
                .spawn(move || {
                    for conn in listener.incoming() {
                        if stop.load(Ordering::SeqCst) {
                            break;
                        }
                        let Ok(conn) = conn else { continue };
                        // Held while the connection's thread is started and listed, so that
                        // ending the trial waits for it.
                        let current = current.lock().unwrap_or_else(|p| p.into_inner());
                        let Some(shared) = current.as_ref().cloned() else {
                            continue;
                        };
                        // Threads that ended are joined (their stacks freed) as they are found.
                        if let Ok(mut w) = workers.lock() {
                            let (done, running): (Vec<_>, Vec<_>) =
                                w.drain(..).partition(|h| h.is_finished());
                            *w = running;
                            for h in done {
                                let _ = h.join();
                            }
                        }
                        // Past the bound the connection is closed unanswered: no thread, no
                        // buffer, and the call it would log does not run.
                        if shared.open.fetch_add(1, Ordering::SeqCst) >= MAX_OPEN {
                            shared.open.fetch_sub(1, Ordering::SeqCst);
                            continue;
                        }
                        let opened = shared.clone();
                        match std::thread::Builder::new().name("calls-conn".into()).spawn(
                            move || {
                                serve(conn, &shared);
                                shared.open.fetch_sub(1, Ordering::SeqCst);
                            },
                        ) {
                            Ok(h) => {
                                if let Ok(mut w) = workers.lock() {
                                    w.push(h);
                                }
                            }
                            Err(_) => {
                                opened.open.fetch_sub(1, Ordering::SeqCst);
                            }
                        }
                    }
                })?
        };
        Ok(Listener {
            socket: socket.to_path_buf(),
            current,
            workers,
            stop,
            wake,
            accept: Some(accept),
        })
    }

    /// Serves `shared`'s trial from now on.
    fn serve_trial(&self, shared: Arc<Shared>) {
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some(shared);
    }

    /// Stops serving the trial (a later connection is closed unanswered) and waits for its
    /// open calls to be recorded.
    fn end_trial(&self) {
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = None;
        let handles: Vec<_> = self
            .workers
            .lock()
            .map(|mut w| w.drain(..).collect())
            .unwrap_or_default();
        for h in handles {
            let _ = h.join();
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop even when the socket's file is gone (the run's scratch removed).
        let _ = nix::sys::socket::shutdown(self.wake.as_raw_fd(), nix::sys::socket::Shutdown::Both);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
        self.end_trial();
        let _ = std::fs::remove_file(&self.socket);
    }
}

impl CallsLog {
    /// Listens on `socket` and appends records to `log`. `t0` is the trial's start. The socket
    /// is closed and removed at [`CallsLog::finish`] (a run's trials use [`Listeners`]).
    pub fn start(socket: &Path, log: &Path, t0: Instant) -> std::io::Result<CallsLog> {
        Self::start_bounded(socket, log, t0, (MAX_CALLS, MAX_LOG_BYTES))
    }

    /// [`CallsLog::start`] with other bounds: `(calls, bytes of records)`.
    pub fn start_bounded(
        socket: &Path,
        log: &Path,
        t0: Instant,
        bounds: (u64, u64),
    ) -> std::io::Result<CallsLog> {
        let listener = Listener::bind(socket)?;
        Ok(CallsLog::on(listener, Shared::new(log, t0, bounds), None))
    }

    fn on(listener: Listener, shared: Arc<Shared>, pool: Option<Arc<Listeners>>) -> CallsLog {
        listener.serve_trial(shared.clone());
        CallsLog {
            socket: listener.socket.clone(),
            shared,
            listener: Some(listener),
            pool,
        }
    }

    /// The socket shims connect to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Calls refused because the log was full ([`MAX_CALLS`], [`MAX_LOG_BYTES`]).
    pub fn refused(&self) -> u64 {
        self.shared.refused.load(Ordering::SeqCst)
    }

    /// MCP exchanges of sessions already running when the log filled: they reached the server,
    /// and no record says what they were, so the rules that count MCP calls count them against
    /// the agent ([`proctor_score::EndState::mcp_unlogged`]).
    pub fn mcp_unlogged(&self) -> u64 {
        self.shared.mcp_unlogged.load(Ordering::SeqCst)
    }

    /// Stops serving the trial and waits for open calls to be recorded. Call after every process
    /// of the trial is dead, so every connection has closed; the socket then goes back to the
    /// run for its next trial (or, on its own, is closed and removed).
    pub fn finish(&mut self) {
        let Some(listener) = self.listener.take() else {
            return;
        };
        listener.end_trial();
        if let Some(pool) = &self.pool {
            if let Ok(mut idle) = pool.idle.lock() {
                idle.push(listener);
            }
        }
    }
}

impl Drop for CallsLog {
    /// A trial dropped unfinished (cut short by an error) does not give its socket back: it is
    /// closed and removed, and waits for its open calls first.
    fn drop(&mut self) {
        drop(self.listener.take());
    }
}

fn serve(conn: UnixStream, shared: &Shared) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(24 * 3600)));
    let Ok(write_half) = conn.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(conn);
    let Some(line) = bounded_line(&mut reader) else {
        return;
    };
    let Ok(start) = serde_json::from_str::<CallStart>(&line) else {
        return;
    };
    let start_at = shared.t0.elapsed().as_secs_f64();
    let mut w = write_half;
    let (max_calls, max_bytes) = shared.bounds;
    // A number is taken only while there is room, so concurrent calls cannot pass the bound.
    let seq = if shared.written.load(Ordering::SeqCst) < max_bytes {
        shared
            .next_seq
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n <= max_calls).then_some(n + 1)
            })
            .ok()
    } else {
        None
    };
    let Some(seq) = seq else {
        shared.refused.fetch_add(1, Ordering::SeqCst);
        let reply = SeqReply {
            seq: 0,
            refused: Some(format!(
                "this trial's calls log is full ({max_calls} calls or {} MiB of records); no \
                 further interface call runs",
                max_bytes >> 20
            )),
        };
        let _ = writeln!(w, "{}", serde_json::to_string(&reply).unwrap_or_default());
        return;
    };
    let reply = serde_json::to_string(&SeqReply { seq, refused: None }).unwrap_or_default();
    let _ = writeln!(w, "{reply}");
    let end = session_end(&mut reader, shared, seq);
    let end_at = shared.t0.elapsed().as_secs_f64();
    let record = match end {
        Some(e) => CallRecord {
            seq,
            command: start.command,
            argv: start.argv,
            argv_hex: start.argv_hex,
            argv_cut: start.argv_cut,
            cwd: start.cwd,
            stdin_bytes: e.stdin_bytes,
            stdin_hash: e.stdin_hash,
            stdin_head: e.stdin_head,
            stdin_terminal: e.stdin_terminal,
            exit: Some(e.exit),
            denied: None,
            stdout_bytes: e.stdout_bytes,
            stdout_head: e.stdout_head,
            stderr_bytes: e.stderr_bytes,
            stderr_head: e.stderr_head,
            start: start_at,
            end: Some(end_at),
        },
        None => CallRecord {
            seq,
            command: start.command,
            argv: start.argv,
            argv_hex: start.argv_hex,
            argv_cut: start.argv_cut,
            cwd: start.cwd,
            stdin_bytes: 0,
            stdin_hash: String::new(),
            stdin_head: String::new(),
            stdin_terminal: false,
            exit: None,
            denied: None,
            stdout_bytes: 0,
            stdout_head: String::new(),
            stderr_bytes: 0,
            stderr_head: String::new(),
            start: start_at,
            end: None,
        },
    };
    if let Ok(text) = serde_json::to_string(&record) {
        if let Ok(mut out) = shared.out.lock() {
            shared
                .written
                .fetch_add(text.len() as u64 + 1, Ordering::SeqCst);
            out.append(&text);
        }
    }
}

/// Reads a call's lines up to its end: each MCP exchange of a session (the call's program is
/// an MCP server) is recorded as it comes, numbered and timed here; the end, when it comes.
fn session_end(
    reader: &mut BufReader<UnixStream>,
    shared: &Shared,
    session: u64,
) -> Option<CallEnd> {
    loop {
        let line = bounded_line(reader)?;
        match serde_json::from_str::<McpLine>(&line) {
            Ok(m) => record_mcp(shared, session, m.mcp),
            Err(_) => return serde_json::from_str::<CallEnd>(&line).ok(),
        }
    }
}

/// Appends one MCP exchange to the MCP log, while the log has room. A full log cannot record
/// it, and the exchange has already happened: it is counted as unlogged, and the rules that
/// count MCP calls count it against the agent (flooding the log cannot hide a call).
fn record_mcp(shared: &Shared, session: u64, e: Exchange) {
    let (max_calls, max_bytes) = shared.bounds;
    let unlogged = || {
        shared.refused.fetch_add(1, Ordering::SeqCst);
        shared.mcp_unlogged.fetch_add(1, Ordering::SeqCst);
    };
    if shared.written.load(Ordering::SeqCst) >= max_bytes {
        unlogged();
        return;
    }
    let Ok(seq) = shared
        .next_mcp_seq
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
            (n <= max_calls).then_some(n + 1)
        })
    else {
        unlogged();
        return;
    };
    let end = shared.t0.elapsed().as_secs_f64();
    let latency = e.latency_ms.filter(|l| l.is_finite() && *l >= 0.0);
    let error = e.error.map(|v| RpcError {
        code: v
            .get("code")
            .and_then(serde_json::Value::as_i64)
            .unwrap_or(0),
        message: v
            .get("message")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_string(),
    });
    let record = McpRecord {
        seq,
        server: e.server,
        session,
        method: e.method,
        tool: e.tool,
        arguments: e.arguments,
        content: e.content,
        is_error: e.is_error,
        error,
        denied: e.denied,
        unknown_tool: e.unknown_tool,
        cut: e.cut,
        answered: e.answered,
        latency_ms: latency,
        start: latency.map_or(end, |l| (end - l / 1000.0).max(0.0)),
        end: e.answered.then_some(end),
    };
    if let Ok(text) = serde_json::to_string(&record) {
        if let Ok(mut out) = shared.mcp_out.lock() {
            shared
                .written
                .fetch_add(text.len() as u64 + 1, Ordering::SeqCst);
            out.append(&text);
        }
    }
}

/// Reads an MCP log, sorted by number; malformed lines are skipped and counted.
pub fn read_mcp_log(path: &Path) -> std::io::Result<(Vec<McpRecord>, usize)> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(e) => return Err(e),
    };
    let mut bad = 0;
    let mut records: Vec<McpRecord> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| match serde_json::from_str(l) {
            Ok(c) => Some(c),
            Err(_) => {
                bad += 1;
                None
            }
        })
        .collect();
    records.sort_by_key(|c| c.seq);
    Ok((records, bad))
}

/// One line, at most [`MAX_LINE`] bytes; `None` at the end, on an error, or for a line that
/// does not end within the bound.
fn bounded_line(reader: &mut BufReader<UnixStream>) -> Option<String> {
    use std::io::Read;
    let mut line = String::new();
    match reader.by_ref().take(MAX_LINE).read_line(&mut line) {
        Ok(n) if n > 0 && line.ends_with('\n') => Some(line),
        _ => None,
    }
}

/// `calls.jsonl`, created when the first line is appended.
struct LazyLog {
    path: PathBuf,
    file: Option<std::fs::File>,
}

impl LazyLog {
    /// Appends one line. A log that cannot be opened or written loses the line; the reader
    /// then sees fewer calls than the agent made, never a made-up one.
    fn append(&mut self, line: &str) {
        if self.file.is_none() {
            self.file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)
                .ok();
        }
        if let Some(f) = &mut self.file {
            let _ = writeln!(f, "{line}");
        }
    }
}

/// Reads a calls log, sorted by sequence number; malformed lines are skipped and counted.
pub fn read_log(path: &Path) -> std::io::Result<(Vec<CallRecord>, usize)> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(e) => return Err(e),
    };
    let mut bad = 0;
    let mut calls: Vec<CallRecord> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| match serde_json::from_str(l) {
            Ok(c) => Some(c),
            Err(_) => {
                bad += 1;
                None
            }
        })
        .collect();
    calls.sort_by_key(|c| c.seq);
    Ok((calls, bad))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One call through the protocol, as a shim makes it: the server's reply, if any.
    fn call(socket: &Path, start: &str) -> Option<SeqReply> {
        let conn = UnixStream::connect(socket).unwrap();
        let mut w = conn.try_clone().unwrap();
        // A server that gave up on an over-long line may close before all of it is written.
        writeln!(w, "{start}").ok()?;
        let mut reply = String::new();
        BufReader::new(&conn).read_line(&mut reply).ok()?;
        let reply: SeqReply = serde_json::from_str(&reply).ok()?;
        if reply.refused.is_none() {
            writeln!(w, "{}", serde_json::to_string(&CallEnd::default()).unwrap()).unwrap();
            // The server closes the connection once the record is written.
            let _ = std::io::Read::read_to_end(&mut &conn, &mut Vec::new());
        }
        Some(reply)
    }

    #[test]
    fn past_its_bound_the_log_refuses_calls_rather_than_let_them_run_unrecorded() {
        let dir = tempfile::tempdir().unwrap();
        let (socket, log) = (
            dir.path().join("calls.sock"),
            dir.path().join("calls.jsonl"),
        );
        let mut server =
            CallsLog::start_bounded(&socket, &log, Instant::now(), (3, 1 << 20)).unwrap();
        let start = r#"{"command":"kv","argv":["kv","get","a"],"cwd":"/w"}"#;
        let seqs: Vec<u64> = (0..3).map(|_| call(&socket, start).unwrap().seq).collect();
        assert_eq!(seqs, [1, 2, 3]);
        let refused = call(&socket, start).unwrap();
        assert_eq!(refused.seq, 0);
        assert!(refused.refused.unwrap().contains("calls log is full"));
        // A start line past the line bound is not answered: that call does not run either.
        let huge = format!(
            r#"{{"command":"kv","argv":["{}"],"cwd":"/w"}}"#,
            "x".repeat(300_000)
        );
        assert!(call(&socket, &huge).is_none());
        server.finish();
        assert_eq!(server.refused(), 1);
        let (calls, bad) = read_log(&log).unwrap();
        assert_eq!((calls.len(), bad), (3, 0));
    }

    #[test]
    fn a_reused_socket_records_each_trials_calls_in_its_own_log_and_no_one_between() {
        let dir = tempfile::tempdir().unwrap();
        let pool = Listeners::new(dir.path().join("sockets"));
        std::fs::create_dir_all(dir.path().join("sockets")).unwrap();
        let start = r#"{"command":"kv","argv":["kv","get","a"],"cwd":"/w"}"#;
        let (log_a, log_b) = (dir.path().join("a.jsonl"), dir.path().join("b.jsonl"));

        let mut a = pool.start(&log_a, Instant::now()).unwrap();
        let socket = a.socket().to_path_buf();
        assert_eq!(call(&socket, start).unwrap().seq, 1);
        a.finish();
        // Between trials the socket answers no one: the call is closed unanswered, unrecorded.
        assert!(call(&socket, start).is_none());

        let mut b = pool.start(&log_b, Instant::now()).unwrap();
        assert_eq!(b.socket(), socket, "the socket the first trial gave back");
        // The second trial numbers its calls from 1, in its own log.
        assert_eq!(call(&socket, start).unwrap().seq, 1);
        assert_eq!(call(&socket, start).unwrap().seq, 2);
        // A trial that still holds a socket makes the next one take another.
        let c = pool
            .start(&dir.path().join("c.jsonl"), Instant::now())
            .unwrap();
        assert_ne!(c.socket(), socket);
        b.finish();
        drop(c);
        assert_eq!(read_log(&log_a).unwrap().0.len(), 1);
        assert_eq!(read_log(&log_b).unwrap().0.len(), 2);

        // The run's end stops every accept thread (this would hang otherwise), even with the
        // sockets' files already removed with the run's scratch.
        let weak = Arc::downgrade(&pool);
        std::fs::remove_dir_all(dir.path().join("sockets")).unwrap();
        drop((a, b, pool));
        assert!(
            weak.upgrade().is_none(),
            "the pool is gone with its sockets"
        );
    }

    /// This process's threads, from /proc.
    fn threads() -> usize {
        std::fs::read_to_string("/proc/self/status")
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("Threads:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    #[test]
    fn a_flood_of_connections_gets_at_most_max_open_threads_and_the_log_still_works() {
        // Where the agent reaches this socket (a trial without namespaces), 3,000 connections
        // that each send 255 KiB and no newline, all held open.
        let (soft, hard) =
            nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap();
        let _ = nix::sys::resource::setrlimit(
            nix::sys::resource::Resource::RLIMIT_NOFILE,
            hard.min(8192).max(soft),
            hard,
        );
        let dir = tempfile::tempdir().unwrap();
        let (socket, log) = (
            dir.path().join("calls.sock"),
            dir.path().join("calls.jsonl"),
        );
        let before = threads();
        let mut server = CallsLog::start(&socket, &log, Instant::now()).unwrap();
        let blob = vec![b'x'; 255 * 1024];
        let mut held = Vec::new();
        let mut most = 0;
        for i in 0..3000 {
            let Ok(conn) = UnixStream::connect(&socket) else {
                continue;
            };
            conn.set_nonblocking(true).unwrap();
            let _ = (&conn).write(&blob);
            held.push(conn);
            if i % 100 == 0 {
                most = most.max(threads());
            }
        }
        std::thread::sleep(Duration::from_millis(300));
        most = most.max(threads());
        assert!(
            most <= before + MAX_OPEN + 4,
            "{most} threads with {before} before"
        );
        drop(held);
        // Once the flood lets go, a call is served and recorded.
        let start = r#"{"command":"kv","argv":["kv","get","a"],"cwd":"/w"}"#;
        let mut reply = None;
        for _ in 0..50 {
            reply = call(&socket, start);
            if reply.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(reply.unwrap().seq, 1);
        server.finish();
        assert_eq!(read_log(&log).unwrap().0.len(), 1);
    }

    #[test]
    fn the_log_is_also_bounded_by_the_bytes_of_its_records() {
        let dir = tempfile::tempdir().unwrap();
        let (socket, log) = (
            dir.path().join("calls.sock"),
            dir.path().join("calls.jsonl"),
        );
        let mut server = CallsLog::start_bounded(&socket, &log, Instant::now(), (1000, 1)).unwrap();
        let start = r#"{"command":"kv","argv":["kv"],"cwd":"/w"}"#;
        assert_eq!(call(&socket, start).unwrap().seq, 1);
        assert!(call(&socket, start).unwrap().refused.is_some());
        server.finish();
        assert_eq!(read_log(&log).unwrap().0.len(), 1);
    }
}
