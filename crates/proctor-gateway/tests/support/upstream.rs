//! A real scripted upstream HTTP server on 127.0.0.1 (plain or TLS): it records every request
//! it sees and answers each with what the test's script says, including SSE streams sent piece
//! by piece and held open on a gate.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::sync::{mpsc, Notify};

/// A request the upstream received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Seen {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// Whether `needle` occurs anywhere in what was received.
    pub fn contains(&self, needle: &str) -> bool {
        let hay = format!(
            "{} {} {:?} {:?} {}",
            self.method,
            self.path,
            self.query,
            self.headers,
            String::from_utf8_lossy(&self.body)
        );
        hay.contains(needle)
    }
}

/// A gate a stream waits on before sending its rest.
pub type Gate = Arc<Notify>;

/// What the upstream answers.
#[derive(Clone)]
pub enum Reply {
    /// A whole body.
    Json {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// An event stream: each string is sent as its own frame; after the first, the stream
    /// waits for `gate` (if any) before the rest.
    Sse {
        events: Vec<String>,
        gate: Option<Gate>,
        pause: Duration,
    },
    /// Answers only after `delay`.
    Slow { delay: Duration, reply: Box<Reply> },
    /// An event stream that breaks off (the connection is cut) after these frames.
    Broken { events: Vec<String> },
}

impl Reply {
    /// `200` with a JSON body.
    pub fn ok(body: impl Into<String>) -> Reply {
        Reply::status(200, body)
    }

    /// A status with a JSON body.
    pub fn status(status: u16, body: impl Into<String>) -> Reply {
        Reply::Json {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.into(),
        }
    }

    /// Adds a header to a whole body.
    pub fn with_header(mut self, name: &str, value: &str) -> Reply {
        if let Reply::Json { headers, .. } = &mut self {
            headers.push((name.into(), value.into()));
        }
        self
    }

    /// An event stream of these frames.
    pub fn sse(events: &[&str]) -> Reply {
        Reply::Sse {
            events: events.iter().map(|e| e.to_string()).collect(),
            gate: None,
            pause: Duration::ZERO,
        }
    }
}

/// How the upstream answers request number `n` (0-based).
pub type Script = Arc<dyn Fn(&Seen, usize) -> Reply + Send + Sync>;

/// A running upstream.
pub struct Upstream {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    _rt: tokio::runtime::Runtime,
}

impl Upstream {
    /// A plain HTTP upstream.
    pub fn start(script: impl Fn(&Seen, usize) -> Reply + Send + Sync + 'static) -> Upstream {
        Upstream::launch(Arc::new(script), None)
    }

    /// A TLS upstream with this server configuration.
    pub fn start_tls(
        script: impl Fn(&Seen, usize) -> Reply + Send + Sync + 'static,
        tls: rustls::ServerConfig,
    ) -> Upstream {
        Upstream::launch(
            Arc::new(script),
            Some(tokio_rustls::TlsAcceptor::from(Arc::new(tls))),
        )
    }

    fn launch(script: Script, tls: Option<tokio_rustls::TlsAcceptor>) -> Upstream {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let count = Arc::new(AtomicUsize::new(0));
        let seen2 = Arc::clone(&seen);
        rt.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                stream.set_nodelay(true).ok();
                let (script, seen, count, tls) = (
                    Arc::clone(&script),
                    Arc::clone(&seen2),
                    Arc::clone(&count),
                    tls.clone(),
                );
                tokio::spawn(async move {
                    let service = service_fn(move |req| {
                        answer(
                            req,
                            Arc::clone(&script),
                            Arc::clone(&seen),
                            Arc::clone(&count),
                        )
                    });
                    match tls {
                        Some(acceptor) => {
                            if let Ok(s) = acceptor.accept(stream).await {
                                let _ = http1::Builder::new()
                                    .serve_connection(TokioIo::new(s), service)
                                    .await;
                            }
                        }
                        None => {
                            let _ = http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                        }
                    }
                });
            }
        });
        Upstream {
            addr,
            seen,
            _rt: rt,
        }
    }

    /// Every request seen so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

async fn answer(
    req: Request<Incoming>,
    script: Script,
    seen: Arc<Mutex<Vec<Seen>>>,
    count: Arc<AtomicUsize>,
) -> Result<Response<ReplyBody>, Infallible> {
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let request = Seen {
        method: parts.method.to_string(),
        path: parts.uri.path().to_string(),
        query: parts.uri.query().map(str::to_string),
        headers: parts
            .headers
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: body.to_vec(),
    };
    let n = count.fetch_add(1, Ordering::SeqCst);
    let mut reply = script(&request, n);
    seen.lock().unwrap().push(request);
    while let Reply::Slow {
        delay,
        reply: inner,
    } = reply
    {
        tokio::time::sleep(delay).await;
        reply = *inner;
    }
    Ok(match reply {
        Reply::Json {
            status,
            headers,
            body,
        } => {
            let mut resp = Response::new(ReplyBody::Whole(Some(Bytes::from(body))));
            *resp.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
            for (k, v) in headers {
                resp.headers_mut().append(
                    hyper::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                    v.parse().unwrap(),
                );
            }
            resp
        }
        Reply::Sse {
            events,
            gate,
            pause,
        } => sse_response(events, gate, pause, false),
        Reply::Broken { events } => sse_response(events, None, Duration::ZERO, true),
        Reply::Slow { .. } => unreachable!("unwrapped above"),
    })
}

/// An event stream sent frame by frame from a task (waiting on `gate` after the first), then
/// ended cleanly or, when `broken`, with an error that cuts the connection.
fn sse_response(
    events: Vec<String>,
    gate: Option<Gate>,
    pause: Duration,
    broken: bool,
) -> Response<ReplyBody> {
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        for (i, e) in events.into_iter().enumerate() {
            if i == 1 {
                if let Some(g) = &gate {
                    g.notified().await;
                }
            }
            if i > 0 && !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
            if tx.send(Ok(Bytes::from(e))).await.is_err() {
                return;
            }
        }
        if broken {
            // Let what was sent reach the wire before the cut.
            tokio::time::sleep(Duration::from_millis(50)).await;
            let _ = tx.send(Err(std::io::Error::other("cut"))).await;
        }
    });
    let mut resp = Response::new(ReplyBody::Stream(rx));
    resp.headers_mut()
        .insert("content-type", "text/event-stream".parse().unwrap());
    resp.headers_mut()
        .insert("request-id", "req_upstream_1".parse().unwrap());
    resp
}

/// The upstream's response body.
pub enum ReplyBody {
    Whole(Option<Bytes>),
    Stream(mpsc::Receiver<std::io::Result<Bytes>>),
}

impl Body for ReplyBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match self.get_mut() {
            ReplyBody::Whole(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            ReplyBody::Stream(rx) => rx.poll_recv(cx).map(|o| o.map(|r| r.map(Frame::data))),
        }
    }
}
