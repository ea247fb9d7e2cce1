//! `chat-mock`'s server and `chat`'s client over real sockets: one request per connection,
//! chunked bodies, `Expect: 100-continue`, the size limits and their error answers.

use proctor_example_chat::http::{self, BaseUrl, ClientError};
use proctor_example_chat::server::{serve, Persist, Shared};
use proctor_example_chat::store::{Fixtures, Store};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Starts a mock on a free port (it serves until the test process ends).
fn start() -> SocketAddr {
    let fixtures = Fixtures::from_json(
        r##"{"me": {"handle": "sam", "name": "Sam"}, "now": "2026-11-28T09:00",
            "people": [{"handle": "dana", "name": "Dana"}],
            "channels": [{"name": "launch", "topic": "Launch"}],
            "messages": [{"conv": "#launch", "from": "sam", "at": "2026-11-27T10:00", "text": "Thursday"}]}"##,
    )
    .unwrap();
    let shared = Arc::new(Mutex::new(Shared {
        store: Store::new(fixtures),
        persist: Persist::new(None),
        started: Instant::now(),
    }));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || serve(listener, shared));
    addr
}

/// Writes `raw`, reads until the server closes; (status, head, body).
fn exchange(addr: SocketAddr, raw: &[u8]) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(raw).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    split(&String::from_utf8_lossy(&out))
}

fn split(text: &str) -> (u16, String, String) {
    let (head, body) = text.split_once("\r\n\r\n").expect("a complete response");
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, head.to_owned(), body.to_owned())
}

#[test]
fn one_request_per_connection_with_its_headers() {
    let addr = start();
    // Two requests on one connection: only the first is answered, then the server closes.
    let (status, head, body) = exchange(
        addr,
        b"GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /me HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    assert_eq!((status, body.as_str()), (200, "ok"));
    assert!(head.contains("Content-Type: text/plain\r\n"), "{head}");
    assert!(head.contains("Content-Length: 2\r\n"), "{head}");
    assert!(head.contains("Connection: close\r\n"), "{head}");
    let (status, _, body) = exchange(addr, b"GET /nope HTTP/1.0\r\n\r\n");
    assert_eq!(status, 404);
    assert!(body.contains("no such endpoint: GET /nope"), "{body}");
}

#[test]
fn chunked_bodies_are_read() {
    let addr = start();
    let body = r##"{"to": "#launch", "text": "chunked hello"}"##;
    let (a, b) = body.split_at(12);
    let raw = format!(
        "POST /messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
        a.len(),
        b.len()
    );
    let (status, _, reply) = exchange(addr, raw.as_bytes());
    assert_eq!(status, 201, "{reply}");
    let v: Value = serde_json::from_str(&reply).unwrap();
    assert_eq!(v["text"], "chunked hello");
}

#[test]
fn expect_100_continue_then_the_body() {
    let addr = start();
    let body = r##"{"to": "@dana", "text": "later"}"##;
    let s = TcpStream::connect(addr).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    write!(
        w,
        "POST /drafts HTTP/1.1\r\nHost: x\r\nX-Chat-Actor: user\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert_eq!(line, "HTTP/1.1 100 Continue\r\n");
    line.clear();
    r.read_line(&mut line).unwrap();
    assert_eq!(line, "\r\n");
    w.write_all(body.as_bytes()).unwrap();
    let mut rest = String::new();
    r.read_to_string(&mut rest).unwrap();
    let (status, _, reply) = split(&rest);
    assert_eq!(status, 201, "{reply}");
    assert_eq!(
        serde_json::from_str::<Value>(&reply).unwrap()["to"],
        "@dana"
    );
}

#[test]
fn limits_and_malformed_requests_are_refused() {
    let addr = start();
    // Over 1 MiB by its declared length: refused without asking for the body.
    let (status, head, body) = exchange(
        addr,
        b"POST /messages HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 1048577\r\n\r\n",
    );
    assert_eq!(status, 400, "{head}");
    assert!(!head.contains("100 Continue"), "{head}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["error"],
        "bad request: body too large"
    );
    // Over 1 MiB, chunked: found while reading.
    let chunk = "x".repeat(64 * 1024);
    let mut raw =
        String::from("POST /messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    for _ in 0..17 {
        raw.push_str(&format!("{:x}\r\n{chunk}\r\n", chunk.len()));
    }
    raw.push_str("0\r\n\r\n");
    let mut s = TcpStream::connect(addr).unwrap();
    let _ = s.write_all(raw.as_bytes());
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let (status, _, body) = split(&String::from_utf8_lossy(&out));
    assert_eq!(status, 400);
    assert!(body.contains("body too large"), "{body}");
    // A head over 64 KiB, and one that is not HTTP.
    let big = format!(
        "GET /me HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(70 * 1024)
    );
    assert_eq!(exchange(addr, big.as_bytes()).0, 431);
    assert_eq!(exchange(addr, b"GARBAGE\r\n\r\n").0, 400);
    // A bad actor header is the router's 400, with a reason.
    let (status, _, body) = exchange(
        addr,
        b"GET /me HTTP/1.1\r\nHost: x\r\nX-Chat-Actor: robot\r\n\r\n",
    );
    assert_eq!(status, 400);
    assert!(body.contains("error"), "{body}");
}

#[test]
fn the_client_reads_answers_and_names_failures() {
    let addr = start();
    let base = BaseUrl::parse(&format!("http://{addr}")).unwrap();
    let (status, body) = http::call(&base, "GET", "/me", None, &[]).unwrap();
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["handle"],
        "sam"
    );
    let (status, body) = http::call(
        &base,
        "POST",
        "/messages",
        Some(r##"{"to": "launch", "text": "hi"}"##),
        &[("X-Chat-Actor", "user")],
    )
    .unwrap();
    assert_eq!(status, 201, "{body}");
    let (status, body) = http::call(&base, "PATCH", "/messages/1", Some("{}"), &[]).unwrap();
    assert_eq!(status, 400, "{body}");

    // Nothing listening.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let gone = BaseUrl::parse(&format!("http://{}", closed.local_addr().unwrap())).unwrap();
    drop(closed);
    assert!(matches!(
        http::call(&gone, "GET", "/me", None, &[]),
        Err(ClientError::Unreachable(_))
    ));
    // Something that closes without answering, and something that is not HTTP.
    let mute = TcpListener::bind("127.0.0.1:0").unwrap();
    let mute_url = BaseUrl::parse(&format!("http://{}", mute.local_addr().unwrap())).unwrap();
    std::thread::spawn(move || {
        if let Ok((mut s, _)) = mute.accept() {
            let mut sink = [0u8; 1024];
            let _ = s.read(&mut sink);
        }
    });
    let r = http::call(&mute_url, "GET", "/me", None, &[]);
    assert!(matches!(r, Err(ClientError::BadResponse(_))), "{r:?}");
    let ssh = TcpListener::bind("127.0.0.1:0").unwrap();
    let not_http = BaseUrl::parse(&format!("http://{}", ssh.local_addr().unwrap())).unwrap();
    std::thread::spawn(move || {
        if let Ok((mut s, _)) = ssh.accept() {
            let _ = s.write_all(b"SSH-2.0-OpenSSH_9.6\r\n\r\n");
            let mut sink = [0u8; 1024];
            let _ = s.read(&mut sink);
        }
    });
    let r = http::call(&not_http, "GET", "/me", None, &[]);
    assert!(matches!(r, Err(ClientError::BadResponse(_))), "{r:?}");
}
