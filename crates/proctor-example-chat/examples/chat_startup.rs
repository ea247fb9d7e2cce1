//! Measures how fast `chat-mock` is up and answers, and what one `chat` call costs (both run in
//! every chat-ax trial): `cargo build --release -p proctor-example-chat --bins --examples &&
//! target/release/examples/chat_startup [ROUNDS]`.
//!
//! Prints, over ROUNDS (default 50), the median and 95th percentile of: spawning `chat-mock`
//! until its first `GET /health` is answered; and one `chat whoami` process against it. Then
//! 1000 in-process `GET /health` requests, one connection each.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(50);
    // target/<profile>/examples/startup -> target/<profile>/
    let exe = std::env::current_exe().expect("current exe");
    let bin_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target dir")
        .to_path_buf();
    let fixtures =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/chat-ax/services/fixtures.json");
    let (mut up, mut call) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t0 = Instant::now();
        let (mut child, addr) = spawn_mock(&bin_dir, &fixtures);
        let body = get(&addr, "/health");
        assert_eq!(body, "ok");
        up.push(t0.elapsed());
        let t1 = Instant::now();
        let out = Command::new(bin_dir.join("chat"))
            .arg("whoami")
            .env("CHAT_API", format!("http://{addr}"))
            .output()
            .expect("run chat");
        assert!(out.status.success(), "{out:?}");
        call.push(t1.elapsed());
        let _ = child.kill();
        let _ = child.wait();
    }
    report("chat-mock up", &mut up);
    report("chat whoami", &mut call);

    let (mut child, addr) = spawn_mock(&bin_dir, &fixtures);
    let n = 1000;
    let t0 = Instant::now();
    for _ in 0..n {
        assert_eq!(get(&addr, "/health"), "ok");
    }
    let all = t0.elapsed();
    println!(
        "one-shot: {n} requests in {:.1} ms ({:.1} µs each)",
        ms(all),
        all.as_secs_f64() * 1e6 / n as f64
    );
    let _ = child.kill();
    let _ = child.wait();
}

fn spawn_mock(bin_dir: &Path, fixtures: &PathBuf) -> (std::process::Child, String) {
    let mut child = Command::new(bin_dir.join("chat-mock"))
        .arg("--fixtures")
        .arg(fixtures)
        .args(["--listen", "127.0.0.1:0"])
        .env_remove("PROCTOR_SERVICE_DIR")
        .stdout(Stdio::piped())
        .spawn()
        .expect("start chat-mock");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("first line");
    let addr = line
        .trim()
        .strip_prefix("chat-mock listening on http://")
        .expect("address")
        .to_owned();
    (child, addr)
}

fn get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .expect("write");
    let mut raw = String::new();
    s.read_to_string(&mut raw).expect("read");
    raw.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn report(what: &str, v: &mut [Duration]) {
    v.sort();
    let p = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    println!(
        "{what:<14} median {:.3} ms  p95 {:.3} ms  (n={})",
        ms(p(0.5)),
        ms(p(0.95)),
        v.len()
    );
}
