//! The shim: what an agent actually runs when it calls an allowed interface command.
//!
//! `proctor __shim NAME REAL [ARGS...]` reports the call's start to the calls log, runs the real
//! command with the same arguments while copying its stdin, stdout and stderr through (counting
//! bytes, hashing stdin, keeping a bounded head of each output), then reports the end and exits
//! with the command's status.
//!
//! Arguments are bytes, as the kernel gives them: an argument that is not UTF-8 reaches the
//! command unchanged and is logged as lossy text plus its exact bytes in hex (`argv_hex`).
//!
//! A terminal on stdin (a person's sitting, `proctor sit`) is handed to the command as it is,
//! not copied: the command can prompt and read the person's keys, and nothing the person types
//! ahead for their shell is swallowed. Such a call records no stdin (`stdin_bytes` 0); what was
//! typed is on the sitting's terminal transcript.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, IsTerminal, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use crate::calls::{CallEnd, CallStart};

/// Bytes of stdout and stderr kept in each call record.
pub const HEAD_BYTES: usize = 2048;

/// The environment variable naming the calls-log socket.
pub const SOCKET_ENV: &str = "PROCTOR_CALLS_SOCKET";

#[derive(Default)]
struct Tap {
    bytes: u64,
    head: Vec<u8>,
    hasher: Option<blake3::Hasher>,
}

impl Tap {
    fn hashing() -> Tap {
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
}

fn pump(mut from: impl Read, mut to: impl Write, tap: Arc<Mutex<Tap>>) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if let Ok(mut t) = tap.lock() {
                    t.take(&buf[..n]);
                }
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
                let _ = to.flush();
            }
        }
    }
}

/// Runs the shim with text arguments; returns the exit status to exit with. See [`main_os`],
/// which `proctor __shim` calls, for arguments that may not be UTF-8.
pub fn main(args: &[String]) -> i32 {
    let args: Vec<OsString> = args.iter().map(OsString::from).collect();
    main_os(&args)
}

/// Runs the shim with the arguments as the kernel gave them (any bytes); returns the exit
/// status to exit with. The command runs with exactly these bytes; the calls log gets each
/// argument as text, lossily decoded, and the exact bytes of those that are not UTF-8.
pub fn main_os(args: &[OsString]) -> i32 {
    let (Some(name), Some(real)) = (
        args.first().map(|n| n.to_string_lossy().into_owned()),
        args.get(1),
    ) else {
        eprintln!("proctor shim: usage: proctor __shim NAME REAL [ARGS...]");
        return 125;
    };
    let name = name.as_str();
    let real = Path::new(real);
    let rest = &args[2..];
    let mut log = match announce(name, rest) {
        Ok(log) => log,
        Err(status) => return status,
    };
    let stdin = if std::io::stdin().is_terminal() {
        Stdio::inherit()
    } else {
        Stdio::piped()
    };
    let child = Command::new(real)
        .arg0(name)
        .args(rest)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let end = match child {
        Ok(child) => relay(child),
        Err(e) => {
            eprintln!("{name}: cannot run {}: {e}", real.display());
            CallEnd {
                exit: 127,
                stderr_head: format!("cannot run: {e}"),
                ..CallEnd::default()
            }
        }
    };
    let _ = serde_json::to_string(&end).map(|s| writeln!(log, "{s}"));
    end.exit
}

/// Reports the call's start to the calls log and waits for its number; gives the connection
/// to report its end on, or, when the log cannot be reached, the status to exit with (the
/// command is then not run: an unlogged call must not happen).
fn announce(name: &str, rest: &[OsString]) -> Result<UnixStream, i32> {
    let socket = std::env::var(SOCKET_ENV).unwrap_or_else(|_| "/run/proctor/calls.sock".into());
    let conn = UnixStream::connect(&socket).map_err(|e| {
        eprintln!(
            "proctor shim: cannot reach the calls log at {socket}: {e}; `{name}` was not run"
        );
        125
    })?;
    let mut argv = vec![name.to_string()];
    let mut argv_hex = BTreeMap::new();
    for (i, a) in rest.iter().enumerate() {
        let text = a.to_string_lossy();
        if a.to_str().is_none() {
            argv_hex.insert(i + 1, hex(a.as_bytes()));
        }
        argv.push(text.into_owned());
    }
    let start = CallStart {
        command: name.to_string(),
        argv,
        argv_hex,
        cwd: std::env::current_dir()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
    };
    let mut writer = conn.try_clone().map_err(|e| {
        eprintln!("proctor shim: {e}");
        125
    })?;
    let sent = serde_json::to_string(&start)
        .map_err(std::io::Error::other)
        .and_then(|s| writeln!(writer, "{s}"));
    let mut reply = String::new();
    if sent.is_err() || BufReader::new(&conn).read_line(&mut reply).unwrap_or(0) == 0 {
        eprintln!("proctor shim: the calls log did not answer; `{name}` was not run");
        return Err(125);
    }
    Ok(writer)
}

/// Runs the real command to its end, copying its stdin, stdout and stderr through taps; gives
/// the call's end as the calls log records it.
fn relay(mut child: Child) -> CallEnd {
    let stdin_tap = Arc::new(Mutex::new(Tap::hashing()));
    let out_tap = Arc::new(Mutex::new(Tap::default()));
    let err_tap = Arc::new(Mutex::new(Tap::default()));
    let (stdin_done, stdin_finished) = std::sync::mpsc::channel::<()>();
    match child.stdin.take() {
        Some(child_in) => {
            let tap = stdin_tap.clone();
            // Never joined for long: an agent may keep our stdin open forever.
            let _ = std::thread::Builder::new().spawn(move || {
                pump(std::io::stdin(), child_in, tap);
                let _ = stdin_done.send(());
            });
        }
        // A terminal went to the command itself: nothing to wait for.
        None => drop(stdin_done),
    }
    let out_thread = child.stdout.take().map(|o| {
        let tap = out_tap.clone();
        std::thread::spawn(move || pump(o, std::io::stdout(), tap))
    });
    let err_thread = child.stderr.take().map(|e| {
        let tap = err_tap.clone();
        std::thread::spawn(move || pump(e, std::io::stderr(), tap))
    });
    let status = child.wait();
    for t in [out_thread, err_thread].into_iter().flatten() {
        let _ = t.join();
    }
    // Give a piped stdin a moment to reach its end, so its size and hash are whole; an stdin
    // that stays open (a terminal, the agent's own pipe) is recorded as far as it was read.
    let _ = stdin_finished.recv_timeout(std::time::Duration::from_millis(100));
    let exit = match status {
        Ok(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)),
        Err(_) => 125,
    };
    let (stdin_bytes, _, stdin_hash) = snapshot(&stdin_tap);
    let (stdout_bytes, stdout_head, _) = snapshot(&out_tap);
    let (stderr_bytes, stderr_head, _) = snapshot(&err_tap);
    CallEnd {
        exit,
        stdin_bytes,
        stdin_hash,
        stdout_bytes,
        stdout_head,
        stderr_bytes,
        stderr_head,
    }
}

/// `bytes` in lower-case hex, two digits a byte.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A tap's byte count, head and hash (empty when it does not hash).
fn snapshot(tap: &Arc<Mutex<Tap>>) -> (u64, String, String) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_two_lower_case_digits_a_byte() {
        assert_eq!(hex(b"a\xffb\x00"), "61ff6200");
        assert_eq!(hex(b""), "");
    }
}
