//! Measures how fast a mock model server is up, answers, and stops (it starts inside every
//! trial): `cargo run --release -p proctor-mock-model --example mock_startup [-- ROUNDS]`.
//!
//! Prints, over ROUNDS (default 200) fresh servers, the median and 95th percentile of: start
//! (bind, spawn, runtime) until `start` returns; start until a first `GET /health` on a new
//! connection is answered; and `stop`. Then 1000 keep-alive requests on one connection.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use proctor_mock_model::{MockModel, Script};

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    let script = || Script::parse("[[turns]]\ntext = \"hi\"\n").expect("script");
    let (mut start, mut first, mut stop) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t0 = Instant::now();
        let server = MockModel::start(script(), "127.0.0.1:0").expect("start");
        start.push(t0.elapsed());
        let mut s = TcpStream::connect(server.addr()).expect("connect");
        s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .expect("write");
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).expect("read");
        assert!(raw.ends_with(b"ok"), "{}", String::from_utf8_lossy(&raw));
        first.push(t0.elapsed());
        let t1 = Instant::now();
        server.stop();
        stop.push(t1.elapsed());
    }
    report("start returns", &mut start);
    report("first answer", &mut first);
    report("stop", &mut stop);

    let server = MockModel::start(script(), "127.0.0.1:0").expect("start");
    let s = TcpStream::connect(server.addr()).expect("connect");
    let _ = s.set_nodelay(true);
    let mut w = s.try_clone().expect("clone");
    let mut r = BufReader::new(s);
    let n = 1000;
    let t0 = Instant::now();
    for _ in 0..n {
        w.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            .expect("write");
        let mut len = 0;
        loop {
            let mut line = String::new();
            r.read_line(&mut line).expect("read");
            if let Some(v) = line
                .to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().to_owned())
            {
                len = v.parse().expect("length");
            }
            if line == "\r\n" {
                break;
            }
        }
        let mut body = vec![0; len];
        r.read_exact(&mut body).expect("body");
    }
    let all = t0.elapsed();
    println!(
        "keep-alive: {n} requests in {:.1} ms ({:.1} µs each)",
        ms(all),
        all.as_secs_f64() * 1e6 / n as f64
    );
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
