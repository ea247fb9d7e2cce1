//! HTTP for the loopback JSON API, on hyper 1 and tokio: the request the server hands to its
//! router, the CLI's client ([`call`]), and the URL and query helpers both use. The server's
//! connection handling is in [`crate::server::serve`].

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::header::{ACCEPT, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, HOST};
use hyper_util::rt::TokioIo;

/// Largest request head the server accepts (request line and headers); a larger one is
/// answered 431.
pub(crate) const MAX_HEADER_BYTES: usize = 64 * 1024;
/// Largest request body the server accepts; a larger one is answered 400.
pub(crate) const MAX_BODY_BYTES: usize = 1024 * 1024;
/// How long the client waits for a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the client waits for the whole response once connected.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);

/// A request as the server's router sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path and query, as sent (`/conversations/%23launch/messages?since=3`).
    pub target: String,
    /// The headers, in arrival order (the values of a repeated name together).
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
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
    /// The host name or address.
    pub host: String,
    /// The port (80 when the URL names none).
    pub port: u16,
    /// The path prefix every request path is appended to, without a trailing `/` (often empty).
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

/// Sends one request (`Connection: close`) and returns (status, body). The server's `Host` is
/// `base`'s; `body`, when given, is sent as JSON. Times out after 5 s connecting and 30 s waiting
/// for the whole response.
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
    let req = build_request(base, method, path, body, extra_headers)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| ClientError::Unreachable(format!("cannot start the HTTP runtime: {e}")))?;
    runtime.block_on(exchange(addr, req))
}

/// The request `call` sends.
fn build_request(
    base: &BaseUrl,
    method: &str,
    path: &str,
    body: Option<&str>,
    extra_headers: &[(&str, &str)],
) -> Result<hyper::Request<Full<Bytes>>, ClientError> {
    let body = body.unwrap_or("");
    let mut req = hyper::Request::builder()
        .method(method)
        .uri(format!("{}{path}", base.prefix))
        .header(HOST, format!("{}:{}", base.host, base.port))
        .header(ACCEPT, "application/json")
        .header(CONNECTION, "close")
        .header(CONTENT_LENGTH, body.len());
    if !body.is_empty() {
        req = req.header(CONTENT_TYPE, "application/json");
    }
    for (k, v) in extra_headers {
        req = req.header(*k, *v);
    }
    req.body(Full::new(Bytes::copy_from_slice(body.as_bytes())))
        .map_err(|e| ClientError::Unreachable(format!("cannot build the request: {e}")))
}

/// Connects, sends `req` and reads the whole response.
async fn exchange(
    addr: SocketAddr,
    req: hyper::Request<Full<Bytes>>,
) -> Result<(u16, String), ClientError> {
    let unreachable = |e: &dyn std::fmt::Display| ClientError::Unreachable(e.to_string());
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(addr))
        .await
        .map_err(|_| unreachable(&"connection timed out"))?
        .map_err(|e| unreachable(&e))?;
    let _ = stream.set_nodelay(true);
    let response = async {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(client_error)?;
        // The connection is driven alongside the exchange; it ends when the server closes.
        let conn = tokio::spawn(conn);
        let resp = match sender.send_request(req).await {
            Ok(r) => r,
            // The connection ended first: its error says why, else the server closed it without
            // an answer (or after talking first, which the client drops as noise).
            Err(e) if e.is_canceled() || e.is_closed() => {
                return Err(match conn.await {
                    Ok(Err(conn_error)) => client_error(conn_error),
                    _ => ClientError::BadResponse(
                        "the connection closed without an HTTP answer".into(),
                    ),
                })
            }
            Err(e) => return Err(client_error(e)),
        };
        let status = resp.status().as_u16();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(client_error)?
            .to_bytes();
        Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
    };
    tokio::time::timeout(RESPONSE_TIMEOUT, response)
        .await
        .map_err(|_| unreachable(&"no response within 30s"))?
}

/// A malformed or cut-short response is `BadResponse`; a broken connection is `Unreachable`.
fn client_error(e: hyper::Error) -> ClientError {
    if e.is_parse() || e.is_parse_status() || e.is_incomplete_message() {
        ClientError::BadResponse(e.to_string())
    } else {
        ClientError::Unreachable(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_the_request_it_sends() {
        let base = BaseUrl::parse("http://127.0.0.1:7070/api").unwrap();
        let req = build_request(
            &base,
            "POST",
            "/messages",
            Some("{}"),
            &[("X-Chat-Actor", "user")],
        )
        .unwrap();
        assert_eq!(req.method(), "POST");
        assert_eq!(req.uri(), "/api/messages");
        let h = req.headers();
        assert_eq!(h[HOST], "127.0.0.1:7070");
        assert_eq!(h[CONNECTION], "close");
        assert_eq!(h[CONTENT_LENGTH], "2");
        assert_eq!(h[CONTENT_TYPE], "application/json");
        assert_eq!(h["x-chat-actor"], "user");
        let get = build_request(&base, "GET", "/me", None, &[]).unwrap();
        assert!(get.headers().get(CONTENT_TYPE).is_none());
        assert!(build_request(&base, "GET", "/me", None, &[("X-Chat-Actor", "a\nb")]).is_err());
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
