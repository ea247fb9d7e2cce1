//! A small blocking HTTP/1.1 server: one thread per connection, keep-alive, `Content-Length` and
//! chunked request bodies, `Expect: 100-continue`. Responses always carry `Content-Length` (SSE
//! bodies are scripted, so they are complete before the first byte is sent).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Largest request head accepted.
const MAX_HEAD: usize = 64 * 1024;
/// Largest request body accepted.
const MAX_BODY: usize = 64 * 1024 * 1024;
/// How often an idle connection checks whether the server stopped.
const POLL: Duration = Duration::from_millis(250);
/// An idle keep-alive connection is closed after this long.
const IDLE: Duration = Duration::from_secs(300);

/// One parsed request.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The query string, without `?` (empty when none).
    pub query: String,
    /// Headers in arrival order, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl Request {
    /// The first header of this (lower-case) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One response.
#[derive(Debug, Clone)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The `Content-Type`.
    pub content_type: String,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// A JSON response.
    pub fn json(status: u16, value: &serde_json::Value) -> Response {
        Response {
            status,
            content_type: "application/json".into(),
            body: value.to_string().into_bytes(),
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Payload Too Large",
        500 => "Internal Server Error",
        _ => "Status",
    }
}

/// Serves connections from `listener` until `stop` is set; each request goes to `handler`.
pub fn serve<H>(listener: TcpListener, stop: Arc<AtomicBool>, handler: Arc<H>)
where
    H: Fn(Request) -> Response + Send + Sync + 'static,
{
    for conn in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = conn else { continue };
        let stop = stop.clone();
        let handler = handler.clone();
        std::thread::spawn(move || {
            let _ = connection(stream, &stop, &*handler);
        });
    }
}

fn connection<H>(stream: TcpStream, stop: &AtomicBool, handler: &H) -> io::Result<()>
where
    H: Fn(Request) -> Response,
{
    stream.set_read_timeout(Some(POLL))?;
    let _ = stream.set_nodelay(true);
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
        let Some(head) = read_head(&mut reader, stop)? else {
            return Ok(());
        };
        let mut req = match parse_head(&head) {
            Ok(r) => r,
            Err(msg) => {
                let resp = Response::json(400, &serde_json::json!({ "error": msg }));
                write_response(&mut writer, &resp, false, false)?;
                return Ok(());
            }
        };
        if req
            .header("expect")
            .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
        {
            writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        }
        match read_body(&mut reader, &req, stop) {
            Ok(b) => req.body = b,
            Err(e) => {
                let resp = Response::json(413, &serde_json::json!({ "error": e.to_string() }));
                write_response(&mut writer, &resp, false, false)?;
                return Ok(());
            }
        }
        let close = req
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
        let head_only = req.method == "HEAD";
        let resp = handler(req);
        write_response(&mut writer, &resp, close, head_only)?;
        if close {
            return Ok(());
        }
    }
}

/// Reads up to the blank line ending a request head; `None` at a clean end of the connection.
fn read_head<R: BufRead>(reader: &mut R, stop: &AtomicBool) -> io::Result<Option<Vec<u8>>> {
    let mut head = Vec::new();
    let mut idle = Duration::ZERO;
    loop {
        let mut line = Vec::new();
        match read_line(reader, &mut line) {
            Ok(0) if head.is_empty() && line.is_empty() => return Ok(None),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(_) => {}
            Err(e) if is_timeout(&e) => {
                if stop.load(Ordering::SeqCst) {
                    return Ok(None);
                }
                // A partial line read before the timeout is kept in `line`.
                head.extend_from_slice(&line);
                idle += POLL;
                if head.is_empty() && idle >= IDLE {
                    return Ok(None);
                }
                continue;
            }
            Err(e) => return Err(e),
        }
        idle = Duration::ZERO;
        if head.is_empty() && (line == b"\r\n" || line == b"\n") {
            continue; // stray CRLF between requests
        }
        head.extend_from_slice(&line);
        if head.ends_with(b"\r\n\r\n") || head.ends_with(b"\n\n") {
            return Ok(Some(head));
        }
        if head.len() > MAX_HEAD {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "head too large"));
        }
    }
}

fn read_line<R: BufRead>(reader: &mut R, line: &mut Vec<u8>) -> io::Result<usize> {
    reader.read_until(b'\n', line)
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

fn parse_head(head: &[u8]) -> Result<Request, String> {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.lines();
    let first = lines.next().ok_or("empty request")?;
    let mut parts = first.split_whitespace();
    let method = parts.next().ok_or("no method")?.to_string();
    let target = parts.next().ok_or("no request target")?;
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_string(), q.to_string()),
        None => (target.to_string(), String::new()),
    };
    let mut headers = Vec::new();
    for line in lines {
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    Ok(Request {
        method,
        path,
        query,
        headers,
        body: Vec::new(),
    })
}

/// Reads exactly `buf.len()` bytes, waiting through read timeouts unless the server stops.
fn read_full<R: Read>(reader: &mut R, buf: &mut [u8], stop: &AtomicBool) -> io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        match reader.read(&mut buf[got..]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if is_timeout(&e) => {
                if stop.load(Ordering::SeqCst) {
                    return Err(e);
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn read_line_patient<R: BufRead>(reader: &mut R, stop: &AtomicBool) -> io::Result<Vec<u8>> {
    let mut line = Vec::new();
    loop {
        match read_line(reader, &mut line) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(_) if line.ends_with(b"\n") => return Ok(line),
            Ok(_) => {}
            Err(e) if is_timeout(&e) && !stop.load(Ordering::SeqCst) => {}
            Err(e) => return Err(e),
        }
        if line.len() > MAX_HEAD {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "line too long"));
        }
    }
}

fn read_body<R: BufRead>(reader: &mut R, req: &Request, stop: &AtomicBool) -> io::Result<Vec<u8>> {
    let chunked = req
        .header("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    if chunked {
        let mut body = Vec::new();
        loop {
            let line = read_line_patient(reader, stop)?;
            let size_text = String::from_utf8_lossy(&line);
            let size_text = size_text.trim().split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size_text, 16)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad chunk size"))?;
            if size == 0 {
                // Trailers, up to the blank line.
                loop {
                    let l = read_line_patient(reader, stop)?;
                    if l == b"\r\n" || l == b"\n" {
                        return Ok(body);
                    }
                }
            }
            if body.len() + size > MAX_BODY {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "body too large"));
            }
            let start = body.len();
            body.resize(start + size, 0);
            read_full(reader, &mut body[start..], stop)?;
            let _ = read_line_patient(reader, stop)?;
        }
    }
    let len: usize = req
        .header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    if len > MAX_BODY {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "body too large"));
    }
    let mut body = vec![0; len];
    read_full(reader, &mut body, stop)?;
    Ok(body)
}

fn write_response<W: Write>(
    w: &mut W,
    resp: &Response,
    close: bool,
    head_only: bool,
) -> io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-cache\r\n",
        resp.status,
        reason(resp.status),
        resp.content_type,
        resp.body.len()
    );
    head.push_str(if close {
        "Connection: close\r\n"
    } else {
        "Connection: keep-alive\r\nKeep-Alive: timeout=300\r\n"
    });
    head.push_str("\r\n");
    w.write_all(head.as_bytes())?;
    if !head_only {
        w.write_all(&resp.body)?;
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_chunked_bodies() {
        let req = Request {
            headers: vec![("transfer-encoding".into(), "chunked".into())],
            ..Request::default()
        };
        let stop = AtomicBool::new(false);
        let mut r = BufReader::new(&b"4\r\nWiki\r\n5;x=y\r\npedia\r\n0\r\n\r\n"[..]);
        assert_eq!(read_body(&mut r, &req, &stop).unwrap(), b"Wikipedia");
    }

    #[test]
    fn parses_heads() {
        let r =
            parse_head(b"POST /v1/messages?beta=true HTTP/1.1\r\nX-Api-Key: k\r\n\r\n").unwrap();
        assert_eq!(r.method, "POST");
        assert_eq!(r.path, "/v1/messages");
        assert_eq!(r.query, "beta=true");
        assert_eq!(r.header("x-api-key"), Some("k"));
    }
}
