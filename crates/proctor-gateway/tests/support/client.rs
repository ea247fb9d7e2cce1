//! An agent's side in tests: real HTTP/1.1 requests to the gateway over TCP or its Unix
//! socket, whole or read piece by piece.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::Request;
use hyper_util::rt::TokioIo;

/// Where the gateway is.
#[derive(Debug, Clone)]
pub enum Target {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

/// A whole response.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: hyper::HeaderMap,
    pub body: Vec<u8>,
}

impl Resp {
    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A response whose body is read as it arrives.
pub struct Streaming {
    pub status: u16,
    body: Incoming,
}

/// A blocking client with its own runtime.
pub struct Client {
    rt: tokio::runtime::Runtime,
    target: Target,
}

impl Client {
    /// A client of the gateway at `target`.
    pub fn new(target: Target) -> Client {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        Client { rt, target }
    }

    /// Sends a request and gives the response head, its body unread.
    pub fn open(&self, path: &str, headers: &[(&str, &str)], body: &str) -> Streaming {
        let target = self.target.clone();
        let mut req = Request::post(path).header("host", "gateway");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req.body(Full::new(Bytes::from(body.to_string()))).unwrap();
        self.rt.block_on(async move {
            let resp = match target {
                Target::Tcp(addr) => {
                    let s = tokio::net::TcpStream::connect(addr).await.unwrap();
                    s.set_nodelay(true).unwrap();
                    send(s, req).await
                }
                Target::Unix(path) => {
                    let s = tokio::net::UnixStream::connect(path).await.unwrap();
                    send(s, req).await
                }
            };
            Streaming {
                status: resp.status().as_u16(),
                body: resp.into_body(),
            }
        })
    }

    /// Sends a request and reads the whole response.
    pub fn post(&self, path: &str, headers: &[(&str, &str)], body: &str) -> Resp {
        let target = self.target.clone();
        let mut req = Request::post(path).header("host", "gateway");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req.body(Full::new(Bytes::from(body.to_string()))).unwrap();
        self.rt.block_on(async move {
            let resp = match target {
                Target::Tcp(addr) => {
                    send(tokio::net::TcpStream::connect(addr).await.unwrap(), req).await
                }
                Target::Unix(path) => {
                    send(tokio::net::UnixStream::connect(path).await.unwrap(), req).await
                }
            };
            let status = resp.status().as_u16();
            let headers = resp.headers().clone();
            let body = tokio::time::timeout(Duration::from_secs(30), resp.into_body().collect())
                .await
                .expect("the body within 30 s")
                .expect("a whole body")
                .to_bytes()
                .to_vec();
            Resp {
                status,
                headers,
                body,
            }
        })
    }

    /// Reads from `stream` until `needle` has arrived (or `wait` passes); gives what was read.
    pub fn read_until(
        &self,
        stream: &mut Streaming,
        needle: &str,
        wait: Duration,
    ) -> Option<String> {
        self.rt.block_on(async {
            let mut got = Vec::new();
            let deadline = tokio::time::Instant::now() + wait;
            loop {
                if String::from_utf8_lossy(&got).contains(needle) {
                    return Some(String::from_utf8_lossy(&got).into_owned());
                }
                match tokio::time::timeout_at(deadline, stream.body.frame()).await {
                    Ok(Some(Ok(frame))) => {
                        if let Some(d) = frame.data_ref() {
                            got.extend_from_slice(d);
                        }
                    }
                    _ => return None,
                }
            }
        })
    }

    /// Reads the rest of `stream`, or how it failed.
    pub fn try_read_rest(&self, stream: Streaming) -> Result<String, String> {
        self.rt.block_on(async {
            match tokio::time::timeout(Duration::from_secs(30), stream.body.collect()).await {
                Ok(Ok(b)) => Ok(String::from_utf8_lossy(&b.to_bytes()).into_owned()),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err("no end within 30 s".into()),
            }
        })
    }

    /// Reads the rest of `stream`.
    pub fn read_rest(&self, stream: Streaming) -> String {
        self.rt.block_on(async {
            let b = tokio::time::timeout(Duration::from_secs(30), stream.body.collect())
                .await
                .expect("the rest within 30 s")
                .expect("a whole body")
                .to_bytes();
            String::from_utf8_lossy(&b).into_owned()
        })
    }
}

async fn send<S>(stream: S, req: Request<Full<Bytes>>) -> hyper::Response<Incoming>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    sender.send_request(req).await.unwrap()
}
