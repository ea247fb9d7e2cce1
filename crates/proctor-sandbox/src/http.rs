//! A minimal HTTP/1.0 GET for service readiness probes and guards, on hyper 1 and tokio.
//!
//! It runs in the trial init, which must stay single-threaded (it forks the agent next): each
//! [`get`] runs on a current-thread runtime of its own that starts no thread (the name is
//! resolved with std before, the exchange is driven on the calling thread) and is gone when
//! `get` returns.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::header::{ACCEPT, CONNECTION, HOST, USER_AGENT};
use hyper::Version;
use hyper_util::rt::TokioIo;

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
    let addrs: Vec<SocketAddr> = (url.host.as_str(), url.port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {}: {e}", url.host))?
        .collect();
    let run = || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| format!("cannot start the HTTP runtime: {e}"))?;
        runtime.block_on(async {
            let deadline = tokio::time::Instant::from_std(deadline);
            tokio::time::timeout_at(deadline, exchange(url, addrs))
                .await
                .map_err(|_| format!("GET {}: no answer within {timeout:.1?}", url.path))?
        })
    };
    if tokio::runtime::Handle::try_current().is_ok() {
        // Called from async code (never in the trial init): a runtime can neither block nor be
        // dropped inside another on the same thread, so this one gets a thread of its own.
        return std::thread::scope(|s| s.spawn(run).join())
            .unwrap_or_else(|_| Err(format!("GET {}: the probe thread panicked", url.path)));
    }
    run()
}

/// Connects to the first address that answers, sends the request and reads the response.
async fn exchange(url: &Url, addrs: Vec<SocketAddr>) -> Result<Response, String> {
    let mut last = format!("no address for {}", url.host);
    let mut stream = None;
    for a in addrs {
        match tokio::net::TcpStream::connect(a).await {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = format!("connect to {a}: {e}"),
        }
    }
    let stream = stream.ok_or(last)?;
    let fail = |e: hyper::Error| {
        if e.is_parse() || e.is_parse_status() {
            format!("GET {}: not an HTTP response ({e})", url.path)
        } else {
            format!("GET {}: {e}", url.path)
        }
    };
    let host = if url.host.contains(':') {
        format!("[{}]:{}", url.host, url.port)
    } else {
        format!("{}:{}", url.host, url.port)
    };
    let req = hyper::Request::get(url.path.as_str())
        .version(Version::HTTP_10)
        .header(HOST, host)
        .header(USER_AGENT, "proctor-sandbox")
        .header(ACCEPT, "*/*")
        .header(CONNECTION, "close")
        .body(Empty::<Bytes>::new())
        .map_err(|e| format!("GET {}: {e}", url.path))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(fail)?;
    // A task on this thread's runtime, not a thread.
    let conn = tokio::spawn(conn);
    let resp = match sender.send_request(req).await {
        Ok(r) => r,
        // The connection ended first: its error says why (a service that talks before it is
        // asked, say), else it closed without an answer.
        Err(e) if e.is_canceled() || e.is_closed() => {
            return Err(match conn.await {
                Ok(Err(e)) => fail(e),
                _ => format!("GET {}: the connection closed without an answer", url.path),
            })
        }
        Err(e) => return Err(fail(e)),
    };
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let mut data = Vec::new();
    while data.len() < MAX_BODY {
        match body.frame().await {
            None => break,
            Some(frame) => {
                if let Ok(chunk) = frame.map_err(fail)?.into_data() {
                    data.extend_from_slice(&chunk);
                }
            }
        }
    }
    data.truncate(MAX_BODY);
    Ok(Response { status, body: data })
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

    /// Serves one connection with `answer`, after reading the request; returns the URL.
    fn one_shot(answer: Vec<u8>) -> (Url, std::thread::JoinHandle<String>) {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let t = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut req = Vec::new();
            let mut buf = [0u8; 1024];
            while !req.ends_with(b"\r\n\r\n") {
                let n = s.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                req.extend_from_slice(&buf[..n]);
            }
            let _ = s.write_all(&answer);
            String::from_utf8(req).unwrap()
        });
        let url = Url::parse(&format!("http://127.0.0.1:{port}/__mock")).unwrap();
        (url, t)
    }

    #[test]
    fn gets_over_a_socket() {
        let (url, t) = one_shot(b"HTTP/1.0 200 OK\r\nA: b\r\n\r\nchat-mock v1".to_vec());
        let r = get(&url, Duration::from_secs(10)).unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"chat-mock v1"[..]));
        let req = t.join().unwrap();
        assert!(req.starts_with("GET /__mock HTTP/1.0\r\n"), "{req}");
        assert!(req.contains("user-agent: proctor-sandbox\r\n"), "{req}");
        assert!(req.contains("connection: close\r\n"), "{req}");

        let (url, t) =
            one_shot(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nwait".to_vec());
        let r = get(&url, Duration::from_secs(10)).unwrap();
        assert_eq!((r.status, r.body.as_slice()), (503, &b"wait"[..]));
        t.join().unwrap();
    }

    #[test]
    fn works_from_inside_an_async_runtime() {
        let (url, t) = one_shot(b"HTTP/1.0 204 No Content\r\n\r\n".to_vec());
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let r = rt
            .block_on(async { get(&url, Duration::from_secs(10)) })
            .unwrap();
        assert_eq!(r.status, 204);
        t.join().unwrap();
    }

    #[test]
    fn names_what_is_not_http_and_what_does_not_answer() {
        let (url, t) = one_shot(b"SSH-2.0-OpenSSH_9.6\r\n\r\n".to_vec());
        let e = get(&url, Duration::from_secs(10)).unwrap_err();
        assert!(e.contains("not an HTTP response"), "{e}");
        t.join().unwrap();

        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = Url::parse(&format!("http://{}/", l.local_addr().unwrap())).unwrap();
        let e = get(&url, Duration::from_millis(200)).unwrap_err();
        assert!(e.contains("no answer within"), "{e}");
        drop(l);
        // A port held by a socket bound but not listening: a connection is refused, and no
        // other test can take the port meanwhile (a freed port could be, and answer).
        use nix::sys::socket::{bind, getsockname, socket, AddressFamily, SockFlag, SockType};
        use nix::sys::socket::{SockaddrIn, SockaddrLike};
        let held = socket(
            AddressFamily::Inet,
            SockType::Stream,
            SockFlag::SOCK_CLOEXEC,
            None,
        )
        .unwrap();
        bind(
            std::os::fd::AsRawFd::as_raw_fd(&held),
            &SockaddrIn::new(127, 0, 0, 1, 0),
        )
        .unwrap();
        let at: SockaddrIn = getsockname(std::os::fd::AsRawFd::as_raw_fd(&held)).unwrap();
        assert_eq!(at.family(), Some(AddressFamily::Inet));
        let url = Url::parse(&format!("http://127.0.0.1:{}/", at.port())).unwrap();
        let e = get(&url, Duration::from_secs(1)).unwrap_err();
        assert!(e.starts_with("connect to 127.0.0.1:"), "{e}");
    }

    #[test]
    fn reads_at_most_a_mebibyte() {
        let mut answer = b"HTTP/1.0 200 OK\r\n\r\n".to_vec();
        answer.resize(answer.len() + MAX_BODY + 4096, b'x');
        let (url, t) = one_shot(answer);
        let r = get(&url, Duration::from_secs(10)).unwrap();
        assert_eq!(r.body.len(), MAX_BODY);
        t.join().unwrap();
    }
}
