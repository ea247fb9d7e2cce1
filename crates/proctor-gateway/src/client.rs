//! A blocking HTTP/1.1 client for proctor's own requests to a model from the host, such as a
//! model-played user's (never an agent's): one `POST` of a JSON body to the gateway's Unix
//! socket of a seat, or to a loopback TCP address (a scripted mock model), read whole within a
//! time limit and a size bound.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::header::{CONTENT_TYPE, HOST};
use hyper_util::rt::TokioIo;

/// Where a request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A Unix socket: a seat's own socket of the gateway.
    Unix(PathBuf),
    /// A TCP address on loopback.
    Tcp(SocketAddr),
}

/// A response: its status and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The HTTP status code.
    pub status: u16,
    /// The body, at most [`MAX_REPLY`] bytes.
    pub body: Vec<u8>,
}

/// The largest response body read.
pub const MAX_REPLY: usize = 8 << 20;

/// Why a request got no response.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The runtime for the exchange could not start.
    #[error("cannot start the HTTP client's runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// The endpoint could not be reached.
    #[error("cannot connect to {endpoint}: {source}")]
    Connect {
        /// The endpoint, shown.
        endpoint: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The exchange failed.
    #[error("the exchange failed: {0}")]
    Exchange(String),
    /// No complete response came in time.
    #[error("no response within {0:?}")]
    Timeout(Duration),
}

/// `POST path` with a JSON `body` and `headers` to `endpoint`, the response read whole within
/// `timeout`.
pub fn post_json(
    endpoint: &Endpoint,
    path: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
    timeout: Duration,
) -> Result<Reply, ClientError> {
    let run = || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(ClientError::Runtime)?;
        runtime.block_on(async {
            tokio::time::timeout(timeout, exchange(endpoint, path, headers, body))
                .await
                .map_err(|_| ClientError::Timeout(timeout))?
        })
    };
    if tokio::runtime::Handle::try_current().is_ok() {
        // A runtime cannot block inside another on the same thread: this one gets its own.
        return std::thread::scope(|s| s.spawn(run).join())
            .unwrap_or_else(|_| Err(ClientError::Exchange("the client thread panicked".into())));
    }
    run()
}

/// Connects, sends the request and reads the response.
async fn exchange(
    endpoint: &Endpoint,
    path: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> Result<Reply, ClientError> {
    let connect = |source| ClientError::Connect {
        endpoint: match endpoint {
            Endpoint::Unix(p) => p.display().to_string(),
            Endpoint::Tcp(a) => a.to_string(),
        },
        source,
    };
    let mut request = hyper::Request::post(path)
        .header(HOST, "localhost")
        .header(CONTENT_TYPE, "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| ClientError::Exchange(e.to_string()))?;
    let response = match endpoint {
        Endpoint::Unix(p) => {
            let stream = tokio::net::UnixStream::connect(p).await.map_err(connect)?;
            send(TokioIo::new(stream), request).await?
        }
        Endpoint::Tcp(a) => {
            let stream = tokio::net::TcpStream::connect(a).await.map_err(connect)?;
            send(TokioIo::new(stream), request).await?
        }
    };
    let status = response.status().as_u16();
    let body = Limited::new(response.into_body(), MAX_REPLY)
        .collect()
        .await
        .map_err(|e| ClientError::Exchange(format!("reading the response: {e}")))?
        .to_bytes()
        .to_vec();
    Ok(Reply { status, body })
}

/// One request on a fresh HTTP/1.1 connection over `io`.
async fn send<T>(
    io: TokioIo<T>,
    request: hyper::Request<Full<Bytes>>,
) -> Result<hyper::Response<hyper::body::Incoming>, ClientError>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let fail = |e: hyper::Error| ClientError::Exchange(e.to_string());
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(fail)?;
    tokio::spawn(connection);
    sender.send_request(request).await.map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn a_post_reaches_a_loopback_server_and_its_whole_reply_is_read() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = vec![0u8; 4096];
            let n = s.read(&mut buf).unwrap();
            let text = String::from_utf8_lossy(&buf[..n]).to_string();
            s.write_all(b"HTTP/1.1 201 Created\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
                .unwrap();
            text
        });
        let reply = post_json(
            &Endpoint::Tcp(addr),
            "/v1/messages",
            &[("x-api-key", "k")],
            b"{}".to_vec(),
            Duration::from_secs(5),
        )
        .unwrap();
        let seen = server.join().unwrap();
        assert_eq!(reply.status, 201);
        assert_eq!(reply.body, b"abcde");
        assert!(seen.starts_with("POST /v1/messages HTTP/1.1"), "{seen}");
        assert!(seen.contains("x-api-key: k"), "{seen}");
    }

    #[test]
    fn a_server_that_never_answers_is_a_timeout() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let err = post_json(
            &Endpoint::Tcp(addr),
            "/",
            &[],
            Vec::new(),
            Duration::from_millis(200),
        )
        .unwrap_err();
        assert!(matches!(err, ClientError::Timeout(_)), "{err}");
        drop(listener);
    }
}
