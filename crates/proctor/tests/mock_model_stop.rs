//! `proctor mock-model` stopped by SIGTERM, as a trial's end stops it, in the middle of writing
//! an exchange to its wire log: the line is finished first, and the process then ends by the
//! signal. (A fatal signal cuts a write short; the log's last line was once torn that way at a
//! trial's end, and the trial read as a harness error.)
//!
//! The log is a FIFO the test drains only after the signal, so the mock is held inside the
//! write of one line (a pipe takes 64 KiB; the line is 1 MB) when SIGTERM arrives.

use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::Duration;

/// One Anthropic Messages request whose prompt is `bytes` long; the answer is not awaited.
fn post(addr: &str, bytes: usize) -> TcpStream {
    let body = format!(
        r#"{{"model":"m","max_tokens":8,"messages":[{{"role":"user","content":"{}"}}]}}"#,
        "x".repeat(bytes)
    );
    let mut s = TcpStream::connect(addr).unwrap();
    let head = format!(
        "POST /v1/messages HTTP/1.1\r\nhost: {addr}\r\nx-api-key: k\r\nanthropic-version: 2023-06-01\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body.as_bytes()).unwrap();
    s
}

#[test]
fn a_mock_model_stopped_while_logging_a_line_finishes_it_and_ends_by_the_signal() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(&script, "[[turns]]\ntext = \"ok\"\n").unwrap();
    let fifo = dir.path().join("wire.jsonl");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    // Read and write: opening it does not wait for the mock, and the mock's open does not wait.
    let mut log = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .unwrap();
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("proctor"))
        .args(["mock-model", "--script"])
        .arg(&script)
        .args(["--listen", "127.0.0.1:0", "--log"])
        .arg(&fifo)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut url = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    let addr = url.trim().trim_start_matches("http://").to_string();
    let _client = post(&addr, 1 << 20);
    // The exchange is answered and its line of over 1 MB is being written: the pipe holds
    // 64 KiB of it, and the write waits for the rest to be read.
    std::thread::sleep(Duration::from_millis(800));
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    std::thread::sleep(Duration::from_millis(200));

    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        while !line.ends_with(b"\n") {
            match log.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => line.extend_from_slice(&buf[..n]),
            }
        }
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| {
            panic!("the wire log's line was cut: no end of line came after SIGTERM")
        });
    let record: serde_json::Value = serde_json::from_slice(&line)
        .unwrap_or_else(|e| panic!("the logged line ({} bytes) is not whole: {e}", line.len()));
    assert_eq!(record["path"], "/v1/messages", "{}", record["path"]);
    assert!(line.len() > 1 << 20, "{} bytes", line.len());
    let status = child.wait().unwrap();
    assert_eq!(
        status.signal(),
        Some(15),
        "the mock ends by the signal: {status:?}"
    );
}
