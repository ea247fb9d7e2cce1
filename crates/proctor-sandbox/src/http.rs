//! A minimal HTTP/1.0 GET over `std::net::TcpStream`, for service readiness probes and guards.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// A parsed `http://host[:port]/path` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Url {
    pub host: String,
    pub port: u16,
    pub path: String,
}

impl Url {
    /// Parses a plain-HTTP URL; anything else is an error message.
    pub(crate) fn parse(url: &str) -> Result<Url, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("{url:?} is not an http:// URL"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(format!("{url:?} has no usable host"));
        }
        let (host, port) = if let Some(h) = authority.strip_prefix('[') {
            // [::1]:port
            let end = h
                .find(']')
                .ok_or_else(|| format!("{url:?} has an unclosed IPv6 address"))?;
            let port = match &h[end + 1..] {
                "" => 80,
                p => parse_port(url, p.strip_prefix(':').unwrap_or(p))?,
            };
            (h[..end].to_owned(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_owned(), parse_port(url, p)?),
                None => (authority.to_owned(), 80),
            }
        };
        Ok(Url {
            host,
            port,
            path: path.to_owned(),
        })
    }
}

fn parse_port(url: &str, p: &str) -> Result<u16, String> {
    p.parse()
        .map_err(|_| format!("{url:?} has an invalid port {p:?}"))
}

/// A response: status code and body.
#[derive(Debug)]
pub(crate) struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

/// The largest response body read; the rest is ignored.
const MAX_BODY: usize = 1 << 20;

/// `GET url` with HTTP/1.0 and `Connection: close`, all within `timeout`.
pub(crate) fn get(url: &Url, timeout: Duration) -> Result<Response, String> {
    let deadline = Instant::now() + timeout.max(Duration::from_millis(1));
    let left = || {
        deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1))
    };
    let addrs: Vec<_> = (url.host.as_str(), url.port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {}: {e}", url.host))?
        .collect();
    let mut last = format!("no address for {}", url.host);
    let mut stream = None;
    for a in addrs {
        match TcpStream::connect_timeout(&a, left()) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = format!("connect to {a}: {e}"),
        }
    }
    let mut stream = stream.ok_or(last)?;
    let io = |e: std::io::Error| format!("GET {}: {e}", url.path);
    stream.set_write_timeout(Some(left())).map_err(io)?;
    let host = if url.host.contains(':') {
        format!("[{}]", url.host)
    } else {
        url.host.clone()
    };
    let req = format!(
        "GET {} HTTP/1.0\r\nHost: {}:{}\r\nUser-Agent: proctor-sandbox\r\nAccept: */*\r\nConnection: close\r\n\r\n",
        url.path, host, url.port
    );
    stream.write_all(req.as_bytes()).map_err(io)?;
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        stream.set_read_timeout(Some(left())).map_err(io)?;
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                data.extend_from_slice(&buf[..n]);
                if data.len() > MAX_BODY + 65536 {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io(e)),
        }
    }
    parse_response(&data)
}

fn parse_response(data: &[u8]) -> Result<Response, String> {
    let head_end = data
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, i + 4))
        .or_else(|| {
            data.windows(2)
                .position(|w| w == b"\n\n")
                .map(|i| (i, i + 2))
        });
    let (head, body) = match head_end {
        Some((h, b)) => (&data[..h], &data[b..]),
        None => (data, &data[data.len()..]),
    };
    let head = String::from_utf8_lossy(head);
    let status_line = head.lines().next().unwrap_or("");
    let mut parts = status_line.split_whitespace();
    let proto = parts.next().unwrap_or("");
    if !proto.starts_with("HTTP/") {
        return Err(format!(
            "not an HTTP response: {:?}",
            status_line.chars().take(80).collect::<String>()
        ));
    }
    let status = parts
        .next()
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let mut body = body.to_vec();
    body.truncate(MAX_BODY);
    Ok(Response { status, body })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_urls() {
        assert_eq!(
            Url::parse("http://127.0.0.1:7070/health").unwrap(),
            Url {
                host: "127.0.0.1".into(),
                port: 7070,
                path: "/health".into()
            }
        );
        assert_eq!(Url::parse("http://localhost").unwrap().path, "/");
        assert_eq!(Url::parse("http://[::1]:81/x").unwrap().host, "::1");
        assert!(Url::parse("https://x/").is_err());
        assert!(Url::parse("http://x:abc/").is_err());
    }

    #[test]
    fn parses_responses() {
        let r = parse_response(b"HTTP/1.0 200 OK\r\nA: b\r\n\r\nchat-mock v1").unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.body, b"chat-mock v1");
        assert!(parse_response(b"SSH-2.0-OpenSSH").is_err());
    }
}
