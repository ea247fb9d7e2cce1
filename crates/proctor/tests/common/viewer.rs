//! A `proctor view` process for the tests that read the viewer: started on a free loopback
//! port over a store, asked over plain HTTP/1.1.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A `proctor view` process, killed when dropped.
pub struct Server {
    child: Child,
    /// Where it listens, `http://127.0.0.1:PORT/`.
    pub url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `proctor view` over `store`, on a free port.
pub fn serve(store: &Path) -> Server {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("proctor"))
        .args(["view", "--listen", "127.0.0.1:0", "--store"])
        .arg(store)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{url:?}");
    Server { child, url }
}

/// GET `path` from the server: (status, body).
pub fn get(server: &Server, path: &str) -> (u16, String) {
    get_from(&server.url, path)
}

/// GET `path` from the HTTP server at `url` (`http://HOST:PORT/`): (status, body).
pub fn get_from(url: &str, path: &str) -> (u16, String) {
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    (status, body)
}

/// The body of a chunked response, whole.
fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    loop {
        let (size, rest) = s.split_once("\r\n").unwrap();
        let n = usize::from_str_radix(size.trim(), 16).unwrap();
        if n == 0 {
            return out;
        }
        out.push_str(&rest[..n]);
        s = &rest[n + 2..];
    }
}
