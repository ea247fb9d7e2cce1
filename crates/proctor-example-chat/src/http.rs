//! Just enough HTTP/1.1 for a loopback JSON API: one request per connection, `Content-Length`
//! bodies, `Connection: close`. Used by both the server and the CLI.

use std::io::{self, BufRead, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

const MAX_HEADER_BYTES: usize = 64 * 1024;
const MAX_BODY_BYTES: usize = 1024 * 1024;

/// A parsed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

fn bad(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

/// Read one request. `Ok(None)` when the peer closed before sending anything.
pub fn read_request<R: BufRead>(r: &mut R) -> io::Result<Option<Request>> {
    let mut line = String::new();
    let mut total = 0usize;
    if r.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    total += line.len();
    let mut parts = line.split_whitespace();
    let (method, target, version) = match (parts.next(), parts.next(), parts.next()) {
        (Some(m), Some(t), Some(v)) => (m.to_string(), t.to_string(), v),
        _ => return Err(bad("malformed request line")),
    };
    if !version.starts_with("HTTP/1.") {
        return Err(bad("unsupported HTTP version"));
    }
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if r.read_line(&mut h)? == 0 {
            return Err(bad("connection closed inside headers"));
        }
        total += h.len();
        if total > MAX_HEADER_BYTES {
            return Err(bad("headers too large"));
        }
        let h = h.trim_end_matches(['\r', '\n']);
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':').ok_or_else(|| bad("malformed header"))?;
        headers.push((k.trim().to_string(), v.trim().to_string()));
    }
    let len = match headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
    {
        Some((_, v)) => v.parse::<usize>().map_err(|_| bad("bad content-length"))?,
        None => 0,
    };
    if len > MAX_BODY_BYTES {
        return Err(bad("body too large"));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    Ok(Some(Request {
        method,
        target,
        headers,
        body,
    }))
}

/// The reason phrase for the statuses the mock uses.
pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        _ => "Internal Server Error",
    }
}

/// Write a complete response and flush it.
pub fn write_response<W: Write>(
    w: &mut W,
    status: u16,
    content_type: &str,
    body: &str,
) -> io::Result<()> {
    write!(
        w,
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        reason(status),
        body.len()
    )?;
    w.flush()
}

/// Split a request target into its path and query.
pub fn split_target(target: &str) -> (&str, &str) {
    match target.split_once('?') {
        Some((p, q)) => (p, q),
        None => (target, ""),
    }
}

/// The first value of `key` in a query string, percent-decoded.
pub fn query_param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (percent_decode(k) == key).then(|| percent_decode(v))
    })
}

/// Decode `%XX` escapes and `+` (as space). Invalid escapes are kept literally.
pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => match (hex(b[i + 1]), hex(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h * 16 + l);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// Percent-encode everything but unreserved characters.
pub fn percent_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'@') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Where the chat API lives: `http://host:port[/prefix]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseUrl {
    pub host: String,
    pub port: u16,
    pub prefix: String,
}

impl BaseUrl {
    /// Parse `http://host[:port][/prefix]`. Only plain http: the API is a loopback mock.
    pub fn parse(s: &str) -> Result<BaseUrl, String> {
        let rest = s
            .trim()
            .strip_prefix("http://")
            .ok_or_else(|| format!("'{s}' is not an http:// URL"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if authority.is_empty() {
            return Err(format!("'{s}' has no host"));
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) => (
                h,
                p.parse::<u16>()
                    .map_err(|_| format!("'{s}' has a bad port"))?,
            ),
            None => (authority, 80),
        };
        Ok(BaseUrl {
            host: host.to_string(),
            port,
            prefix: path.trim_end_matches('/').to_string(),
        })
    }
}

/// What went wrong talking to the API.
#[derive(Debug)]
pub enum ClientError {
    /// Could not connect, or the connection broke.
    Unreachable(String),
    /// The server answered something that is not HTTP.
    BadResponse(String),
}

/// Send one request and return (status, body).
pub fn call(
    base: &BaseUrl,
    method: &str,
    path: &str,
    body: Option<&str>,
    extra_headers: &[(&str, &str)],
) -> Result<(u16, String), ClientError> {
    let addr = (base.host.as_str(), base.port)
        .to_socket_addrs()
        .map_err(|e| ClientError::Unreachable(e.to_string()))?
        .next()
        .ok_or_else(|| ClientError::Unreachable(format!("{} resolves to no address", base.host)))?;
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| ClientError::Unreachable(e.to_string()))?;
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let body = body.unwrap_or("");
    let mut req = format!(
        "{method} {}{path} HTTP/1.1\r\nHost: {}:{}\r\nAccept: application/json\r\nConnection: close\r\nContent-Length: {}\r\n",
        base.prefix,
        base.host,
        base.port,
        body.len()
    );
    if !body.is_empty() {
        req.push_str("Content-Type: application/json\r\n");
    }
    for (k, v) in extra_headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    stream
        .write_all(req.as_bytes())
        .map_err(|e| ClientError::Unreachable(e.to_string()))?;
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .map_err(|e| ClientError::Unreachable(e.to_string()))?;
    parse_response(&raw)
}

/// Split a raw response into (status, body).
pub fn parse_response(raw: &[u8]) -> Result<(u16, String), ClientError> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| ClientError::BadResponse("no end of headers".into()))?;
    let status_line = head.lines().next().unwrap_or("");
    let mut parts = status_line.split_whitespace();
    let (Some(v), Some(code)) = (parts.next(), parts.next()) else {
        return Err(ClientError::BadResponse(format!(
            "bad status line '{status_line}'"
        )));
    };
    if !v.starts_with("HTTP/1.") {
        return Err(ClientError::BadResponse(format!(
            "bad status line '{status_line}'"
        )));
    }
    let status = code
        .parse::<u16>()
        .map_err(|_| ClientError::BadResponse(format!("bad status line '{status_line}'")))?;
    Ok((status, body.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufReader;

    #[test]
    fn reads_a_request_with_body() {
        let raw = b"POST /messages?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nX-Chat-Actor: user\r\n\r\nabcdEXTRA";
        let req = read_request(&mut BufReader::new(&raw[..]))
            .unwrap()
            .unwrap();
        assert_eq!(req.method, "POST");
        assert_eq!(req.target, "/messages?x=1");
        assert_eq!(req.body, b"abcd");
        assert_eq!(req.header("x-chat-actor"), Some("user"));
        assert_eq!(read_request(&mut BufReader::new(&b""[..])).unwrap(), None);
        assert!(read_request(&mut BufReader::new(&b"GARBAGE\r\n\r\n"[..])).is_err());
    }

    #[test]
    fn writes_and_parses_a_response() {
        let mut out = Vec::new();
        write_response(&mut out, 404, "application/json", "{\"error\":\"x\"}").unwrap();
        let (status, body) = parse_response(&out).unwrap();
        assert_eq!((status, body.as_str()), (404, "{\"error\":\"x\"}"));
    }

    #[test]
    fn percent_coding() {
        assert_eq!(percent_decode("%23launch"), "#launch");
        assert_eq!(percent_decode("a+b%2"), "a b%2");
        assert_eq!(percent_decode("%zz"), "%zz");
        assert_eq!(percent_encode("#launch m-1"), "%23launch%20m-1");
        assert_eq!(
            query_param("a=1&since=%237", "since").as_deref(),
            Some("#7")
        );
        assert_eq!(query_param("a=1", "since"), None);
    }

    #[test]
    fn base_urls() {
        assert_eq!(
            BaseUrl::parse("http://127.0.0.1:7070").unwrap(),
            BaseUrl {
                host: "127.0.0.1".into(),
                port: 7070,
                prefix: String::new()
            }
        );
        assert_eq!(BaseUrl::parse("http://h/api/").unwrap().prefix, "/api");
        assert!(BaseUrl::parse("https://h").is_err());
        assert!(BaseUrl::parse("http://h:x").is_err());
    }
}
