//! The mock model's HTTP/1.1 server, on hyper 1 and tokio: keep-alive, `Content-Length` and
//! chunked request bodies, `Expect: 100-continue` (hyper answers `100 Continue` when the body is
//! first read, so a body that is too large by its `Content-Length` is refused before it is sent).
//! Responses always carry `Content-Length` (SSE bodies are scripted, so they are complete before
//! the first byte is sent).
//!
//! [`serve_with`] given a rustls configuration (see [`crate::tls`]) serves HTTPS instead: each
//! connection's TLS handshake runs in the connection's own task, so a slow or broken client holds
//! up no other, and a handshake that fails or takes longer than 30 s ends only its connection.
//!
//! Each [`serve`] call runs its own current-thread runtime on the calling thread (a server starts
//! inside every trial, so it must start in well under a millisecond); handlers run on that
//! runtime's blocking pool, since one may be held open for long (an injected timeout).

use std::convert::Infallible;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Bytes, Incoming};
use hyper::header::{HeaderValue, CACHE_CONTROL, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, StatusCode, Version};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio_rustls::TlsAcceptor;

/// Largest request head accepted (request line and headers); a larger one is answered 431.
const MAX_HEAD: usize = 64 * 1024;
/// Most request headers accepted; far above what any client sends.
const MAX_HEADERS: usize = 1024;
/// Largest request body accepted; a larger one is answered 413.
const MAX_BODY: usize = 64 * 1024 * 1024;
/// How often the accept loop checks whether the server stopped (a stop also wakes it by
/// connecting).
const POLL: Duration = Duration::from_millis(250);
/// An idle keep-alive connection (or one whose request head takes longer) is closed after this.
const IDLE: Duration = Duration::from_secs(300);
/// A TLS handshake that takes longer than this ends its connection.
const HANDSHAKE: Duration = Duration::from_secs(30);

/// One parsed request.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The query string, without `?` (empty when none).
    pub query: String,
    /// Headers in arrival order (the values of a repeated name together), names lower-cased.
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

/// Serves plain HTTP connections from `listener` until `stop` is set; each request goes to
/// `handler`. Blocks the calling thread (and runs on a thread of its own when called from async
/// code). Setting `stop` ends the accept loop within 250 ms (at once when a connection then
/// arrives) and closes every connection; a handler still running finishes on its own.
pub fn serve<H>(listener: TcpListener, stop: Arc<AtomicBool>, handler: Arc<H>)
where
    H: Fn(Request) -> Response + Send + Sync + 'static,
{
    serve_with(listener, stop, handler, None);
}

/// [`serve`], over TLS with this configuration when `tls` is given (HTTPS), else plain.
pub fn serve_with<H>(
    listener: TcpListener,
    stop: Arc<AtomicBool>,
    handler: Arc<H>,
    tls: Option<Arc<rustls::ServerConfig>>,
) where
    H: Fn(Request) -> Response + Send + Sync + 'static,
{
    let tls = tls.map(TlsAcceptor::from);
    let run = move || {
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .thread_name("mock-model-handler")
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                eprintln!("proctor mock-model: cannot start the HTTP runtime: {e}");
                return;
            }
        };
        runtime.block_on(accept_loop(listener, stop, handler, tls));
        // Connections end with their tasks; a handler held open (an injected timeout) is not
        // waited for.
        runtime.shutdown_background();
    };
    if tokio::runtime::Handle::try_current().is_ok() {
        // Called from async code: a runtime cannot block inside another on the same thread.
        std::thread::scope(|s| {
            let _ = s.spawn(run).join();
        });
    } else {
        run();
    }
}

async fn accept_loop<H>(
    listener: TcpListener,
    stop: Arc<AtomicBool>,
    handler: Arc<H>,
    tls: Option<TlsAcceptor>,
) where
    H: Fn(Request) -> Response + Send + Sync + 'static,
{
    let listener = match listener
        .set_nonblocking(true)
        .and_then(|()| tokio::net::TcpListener::from_std(listener))
    {
        Ok(l) => l,
        Err(e) => {
            eprintln!("proctor mock-model: cannot listen: {e}");
            return;
        }
    };
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(IDLE)
        .max_header_size(MAX_HEAD)
        .max_headers(MAX_HEADERS)
        .title_case_headers(true);
    while !stop.load(Ordering::SeqCst) {
        let (stream, _) = match tokio::time::timeout(POLL, listener.accept()).await {
            Err(_elapsed) => continue,
            // Out of descriptors and the like: wait a moment rather than spin.
            Ok(Err(_)) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            Ok(Ok(conn)) => conn,
        };
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let _ = stream.set_nodelay(true);
        let handler = handler.clone();
        let service = service_fn(move |req| respond(req, handler.clone()));
        match &tls {
            None => {
                let conn = builder.serve_connection(TokioIo::new(stream), service);
                tokio::spawn(async move {
                    // A broken or timed-out connection ends only itself.
                    let _ = conn.await;
                });
            }
            Some(acceptor) => {
                let accept = acceptor.accept(stream);
                let builder = builder.clone();
                tokio::spawn(async move {
                    // A failed or stalled handshake ends only its connection.
                    let Ok(Ok(stream)) = tokio::time::timeout(HANDSHAKE, accept).await else {
                        return;
                    };
                    let _ = builder
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        }
    }
}

async fn respond<H>(
    req: hyper::Request<Incoming>,
    handler: Arc<H>,
) -> Result<hyper::Response<Full<Bytes>>, Infallible>
where
    H: Fn(Request) -> Response + Send + Sync + 'static,
{
    let (parts, body) = req.into_parts();
    let close = wants_close(parts.version, &parts.headers);
    let head_only = parts.method == Method::HEAD;
    let mut request = Request {
        method: parts.method.as_str().to_owned(),
        path: parts.uri.path().to_owned(),
        query: parts.uri.query().unwrap_or("").to_owned(),
        headers: parts
            .headers
            .iter()
            .map(|(k, v)| {
                let v = String::from_utf8_lossy(v.as_bytes());
                (k.as_str().to_owned(), v.trim().to_owned())
            })
            .collect(),
        body: Vec::new(),
    };
    match read_body(body).await {
        Ok(b) => request.body = b,
        Err(msg) => {
            // The rest of the body is not read: the connection cannot go on.
            let resp = Response::json(413, &serde_json::json!({ "error": msg }));
            return Ok(encode(resp, true, head_only));
        }
    }
    let resp = match tokio::task::spawn_blocking(move || handler(request)).await {
        Ok(r) => r,
        Err(e) => Response::json(
            500,
            &serde_json::json!({ "error": format!("the mock model's handler failed: {e}") }),
        ),
    };
    Ok(encode(resp, close, head_only))
}

/// Whether the client asked to close after this exchange (`Connection: close`, or HTTP/1.0
/// without `Connection: keep-alive`).
fn wants_close(version: Version, headers: &hyper::HeaderMap) -> bool {
    let has = |token: &str| {
        headers.get_all(CONNECTION).iter().any(|v| {
            v.to_str()
                .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
        })
    };
    has("close") || (version == Version::HTTP_10 && !has("keep-alive"))
}

/// Reads the whole (de-chunked) body, refusing one over [`MAX_BODY`] before reading it when its
/// length is declared.
async fn read_body(mut body: Incoming) -> Result<Vec<u8>, String> {
    let declared = body.size_hint().lower();
    if declared > MAX_BODY as u64 {
        return Err("body too large".into());
    }
    let mut out = Vec::with_capacity(declared as usize);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| e.to_string())?;
        if let Ok(data) = frame.into_data() {
            if out.len() + data.len() > MAX_BODY {
                return Err("body too large".into());
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(out)
}

/// The hyper response for `resp`; one that cannot be encoded (a bad status or content type)
/// becomes a 500.
fn encode(resp: Response, close: bool, head_only: bool) -> hyper::Response<Full<Bytes>> {
    let len = resp.body.len();
    let mut builder = hyper::Response::builder()
        .status(resp.status)
        .header(CONTENT_TYPE, resp.content_type)
        .header(CONTENT_LENGTH, len)
        .header(CACHE_CONTROL, "no-cache");
    builder = if close {
        builder.header(CONNECTION, "close")
    } else {
        builder
            .header(CONNECTION, "keep-alive")
            .header("keep-alive", "timeout=300")
    };
    let body = if head_only {
        Bytes::new()
    } else {
        Bytes::from(resp.body)
    };
    match builder.body(Full::new(body)) {
        Ok(r) => r,
        Err(e) => {
            let text = format!(r#"{{"error":"the mock model built a bad response: {e}"}}"#);
            let mut r = hyper::Response::new(Full::new(Bytes::from(text)));
            *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            r.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            r.headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("close"));
            r
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_follows_connection_and_version() {
        let mut h = hyper::HeaderMap::new();
        assert!(!wants_close(Version::HTTP_11, &h));
        assert!(wants_close(Version::HTTP_10, &h));
        h.insert(CONNECTION, HeaderValue::from_static("Keep-Alive"));
        assert!(!wants_close(Version::HTTP_10, &h));
        h.insert(CONNECTION, HeaderValue::from_static("TE, close"));
        assert!(wants_close(Version::HTTP_11, &h));
    }

    #[test]
    fn a_bad_response_becomes_a_500() {
        let bad = Response {
            status: 42,
            content_type: "text/plain".into(),
            body: b"x".to_vec(),
        };
        assert_eq!(encode(bad, false, false).status(), 500);
        let head = Response {
            status: 200,
            content_type: "text/plain".into(),
            body: b"ok".to_vec(),
        };
        let r = encode(head, false, true);
        assert_eq!(r.headers()[CONTENT_LENGTH], "2");
        assert_eq!(r.body().size_hint().exact(), Some(0));
    }
}
