//! The shim: what an agent actually runs when it calls an allowed interface command.
//!
//! `proctor __shim NAME REAL [ARGS...]` runs the allowed command NAME with ARGS and exits with
//! its status. How depends on where the trial runs:
//!
//! - **With namespaces** (every sandboxed trial) the shim is a thin client of the trial's own
//!   call runner ([`proctor_sandbox::calls`]): it hands over the name, the arguments, its
//!   environment, its stdio and working folder, and waits. The trial init, outside the agent's
//!   reach, runs the program the trial's allow-list names for NAME (REAL is ignored), copies
//!   its stdio through, and alone reports the call to the calls log. No agent process can reach
//!   the calls log's socket, so nothing the agent sends, by the shim or otherwise, becomes a
//!   record of a call that did not run, or of a status the program did not exit with.
//! - **Without namespaces** (`$PROCTOR_CALLS_SOCKET` set: the fallback where the agent runs on
//!   the host) the shim reports the call's start to the calls log, runs REAL itself while
//!   copying its stdin, stdout and stderr through (counting bytes, hashing stdin, keeping a
//!   bounded head of each of the three), then reports the end. Any process of the agent can
//!   reach that socket: the trial's record says the calls log is not protected.
//!
//! Arguments are bytes, as the kernel gives them: an argument that is not UTF-8 reaches the
//! command unchanged and is logged as lossy text plus its exact bytes in hex (`argv_hex`).
//!
//! A terminal on stdin (a person's sitting, `proctor sit`) is handed to the command as it is,
//! not copied: the command can prompt and read the person's keys, and nothing the person types
//! ahead for their shell is swallowed. Such a call records no stdin (`stdin_bytes` 0,
//! `stdin_terminal` true); what was typed is on the sitting's terminal transcript.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use crate::calls::{CallEnd, CallStart, SeqReply};
use proctor_sandbox::calls::{pump, Tap};
use proctor_score::ArgvCut;

/// Bytes of stdin, stdout and stderr kept in each call record.
pub const HEAD_BYTES: usize = proctor_score::endstate::HEAD_BYTES;

// The trial's call runner keeps the same heads as the records promise.
const _: () = assert!(HEAD_BYTES == proctor_sandbox::calls::HEAD_BYTES);

/// Bytes of one argument kept in a call record.
pub const ARG_HEAD_BYTES: usize = proctor_sandbox::calls::ARG_HEAD_BYTES;

/// Bytes of all arguments together kept in a call record.
pub const ARGV_HEAD_BYTES: usize = proctor_sandbox::calls::ARGV_HEAD_BYTES;

/// Arguments kept in a call record.
pub const ARGS_KEPT: usize = proctor_sandbox::calls::ARGS_KEPT;

/// The environment variable naming the calls-log socket, set only for a trial without
/// namespaces (the shim then logs the call itself); with namespaces the shim reaches the
/// trial's call runner at [`proctor_sandbox::calls::SOCKET_INSIDE`].
pub const SOCKET_ENV: &str = "PROCTOR_CALLS_SOCKET";

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
    let Some(socket) = std::env::var_os(SOCKET_ENV) else {
        return proctor_sandbox::calls::call(
            Path::new(proctor_sandbox::calls::SOCKET_INSIDE),
            &args[0],
            rest,
        );
    };
    let mut log = match announce(Path::new(&socket), name, rest) {
        Ok(log) => log,
        Err(status) => return status,
    };
    let terminal = std::io::stdin().is_terminal();
    let stdin = if terminal {
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
    let mut end = match child {
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
    end.stdin_terminal = terminal;
    let _ = serde_json::to_string(&end).map(|s| writeln!(log, "{s}"));
    end.exit
}

/// `proctor __mcp NAME`: an MCP client's stdio session with the trial's MCP server NAME. The
/// shim hands its stdin and stdout to the trial's call runner, which starts the server outside
/// the agent's reach and relays and logs every message ([`proctor_sandbox::mcp`]); it exits
/// with the server's status. Only with namespaces: a trial without them has no call runner,
/// and an MCP session there would go unlogged, so none is made (status 125).
pub fn mcp_main(args: &[String]) -> i32 {
    let [name] = args else {
        eprintln!("proctor: usage: proctor __mcp NAME");
        return 125;
    };
    if std::env::var_os(SOCKET_ENV).is_some() {
        eprintln!(
            "proctor: MCP server `{name}` needs a trial with namespaces (its sessions are relayed and logged by the trial's call runner); it was not started"
        );
        return 125;
    }
    proctor_sandbox::calls::call(
        Path::new(proctor_sandbox::calls::SOCKET_INSIDE),
        std::ffi::OsStr::new(&proctor_sandbox::mcp::call_name(name)),
        &[],
    )
}

/// Reports the call's start to the calls log and waits for its number; gives the connection
/// to report its end on, or, when the log cannot be reached, the status to exit with (the
/// command is then not run: an unlogged call must not happen).
fn announce(socket: &Path, name: &str, rest: &[OsString]) -> Result<UnixStream, i32> {
    let conn = UnixStream::connect(socket).map_err(|e| {
        eprintln!(
            "proctor shim: cannot reach the calls log at {}: {e}; `{name}` was not run",
            socket.display()
        );
        125
    })?;
    let (argv, argv_hex, argv_cut) = bounded_argv(name, rest);
    let start = CallStart {
        command: name.to_string(),
        argv,
        argv_hex,
        argv_cut,
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
    let reply: SeqReply = serde_json::from_str(&reply).unwrap_or_default();
    if let Some(why) = reply.refused {
        eprintln!("proctor: {why}; `{name}` was not run");
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
    let (stdin_bytes, stdin_head, stdin_hash) = Tap::snapshot(&stdin_tap);
    let (stdout_bytes, stdout_head, _) = Tap::snapshot(&out_tap);
    let (stderr_bytes, stderr_head, _) = Tap::snapshot(&err_tap);
    CallEnd {
        exit,
        stdin_bytes,
        stdin_hash,
        stdin_head,
        stdin_terminal: false,
        stdout_bytes,
        stdout_head,
        stderr_bytes,
        stderr_head,
    }
}

/// The command line as a call record keeps it (see [`proctor_sandbox::calls::bounded_argv`]):
/// `name` then each argument whole while the bounds allow ([`ARG_HEAD_BYTES`] each,
/// [`ARGV_HEAD_BYTES`] and [`ARGS_KEPT`] in all), the rest left out; an argument that is not
/// UTF-8 as lossy text with its kept bytes in hex; and, when anything was left out, what the
/// whole held.
pub fn bounded_argv(
    name: &str,
    rest: &[OsString],
) -> (Vec<String>, BTreeMap<usize, String>, Option<ArgvCut>) {
    let (argv, argv_hex, cut) = proctor_sandbox::calls::bounded_argv(name, rest);
    let cut = cut.map(|c| ArgvCut {
        argc: c.argc,
        bytes: c.bytes,
        blake3: c.blake3,
    });
    (argv, argv_hex, cut)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn a_short_command_line_is_kept_whole() {
        let rest: Vec<OsString> = ["put", "a", "1"].map(OsString::from).to_vec();
        let (argv, hex, cut) = bounded_argv("kv", &rest);
        assert_eq!(argv, ["kv", "put", "a", "1"]);
        assert!(hex.is_empty() && cut.is_none());
    }

    #[test]
    fn a_long_command_line_keeps_its_head_and_what_the_whole_held() {
        use std::os::unix::ffi::OsStringExt;
        // One 1 MB argument (with a multi-byte character across the cut), then 300 short ones.
        let mut big = "é".repeat(ARG_HEAD_BYTES);
        big.push_str(&"x".repeat(1_000_000));
        let mut rest = vec![OsString::from(big.clone())];
        rest.extend((0..300).map(|i| OsString::from(format!("a{i}"))));
        let (argv, _, cut) = bounded_argv("kv", &rest);
        assert_eq!(argv[1].len(), ARG_HEAD_BYTES, "cut at a character boundary");
        assert!(big.starts_with(&argv[1]));
        assert!(argv.len() <= ARGS_KEPT);
        assert!(argv.iter().map(String::len).sum::<usize>() <= ARGV_HEAD_BYTES);
        let cut = cut.expect("the record says it is cut");
        assert_eq!(cut.argc, 302);
        let total: usize = 2 + big.len() + (0..300).map(|i| format!("a{i}").len()).sum::<usize>();
        assert_eq!(cut.bytes, total as u64);
        let mut h = blake3::Hasher::new();
        for a in std::iter::once("kv".as_bytes()).chain(rest.iter().map(|a| a.as_bytes())) {
            h.update(a);
            h.update(&[0]);
        }
        assert_eq!(cut.blake3, h.finalize().to_hex().to_string());
        // A different tail, the same head: the hash tells them apart.
        let mut other = rest.clone();
        other[300] = OsString::from("changed");
        assert_ne!(bounded_argv("kv", &other).2.unwrap().blake3, cut.blake3);
        // A long argument that is not UTF-8 keeps its head's exact bytes in hex.
        let raw = OsString::from_vec([vec![0xff; 10], vec![b'y'; 10_000]].concat());
        let (argv, hex, cut) = bounded_argv("kv", &[raw]);
        assert_eq!(hex[&1].len(), 2 * ARG_HEAD_BYTES);
        assert!(hex[&1].starts_with("ffffffff"));
        assert!(argv[1].starts_with('\u{fffd}'));
        assert_eq!(cut.unwrap().bytes, 2 + 10_010);
    }

    #[test]
    fn hex_is_two_lower_case_digits_a_byte() {
        let hex = proctor_records::exact_name::hex;
        assert_eq!(hex(b"a\xffb\x00"), "61ff6200");
        assert_eq!(hex(b""), "");
    }
}
