//! Accepting connections on the gateway's Unix socket and TCP loopback address, each served as
//! HTTP/1.1 by hyper.

use std::sync::Arc;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use super::{intake, Shared};

/// A listening socket.
#[derive(Debug)]
pub(crate) enum Listener {
    /// A Unix socket.
    Unix(UnixListener),
    /// A TCP socket on a loopback address.
    Tcp(TcpListener),
}

/// Accepts connections until `stop` turns true, serving at most `limit` at once (the next
/// waits in the socket's queue until one ends). `id` names a trial's own listener (its token
/// works only there); `None` is a listener of the whole gateway.
pub(crate) async fn accept_loop(
    listener: Listener,
    id: Option<u64>,
    limit: usize,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    let places = Arc::new(Semaphore::new(limit));
    loop {
        let place = tokio::select! {
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    return;
                }
                continue;
            }
            place = Arc::clone(&places).acquire_owned() => match place {
                Ok(place) => place,
                Err(_) => return,
            },
        };
        tokio::select! {
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    return;
                }
            }
            accepted = accept(&listener) => match accepted {
                Ok(conn) => {
                    tokio::spawn(serve_conn(conn, id, Arc::clone(&shared), place));
                }
                // Out of descriptors and the like: wait a moment rather than spin.
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
            },
        }
    }
}

/// One accepted connection, either kind.
enum Conn {
    Unix(tokio::net::UnixStream),
    Tcp(tokio::net::TcpStream),
}

async fn accept(listener: &Listener) -> std::io::Result<Conn> {
    match listener {
        Listener::Unix(l) => l.accept().await.map(|(s, _)| Conn::Unix(s)),
        Listener::Tcp(l) => {
            let (s, _) = l.accept().await?;
            s.set_nodelay(true)?;
            Ok(Conn::Tcp(s))
        }
    }
}

async fn serve_conn(
    conn: Conn,
    id: Option<u64>,
    shared: Arc<Shared>,
    _place: OwnedSemaphorePermit,
) {
    match conn {
        Conn::Unix(s) => serve_io(s, id, shared).await,
        Conn::Tcp(s) => serve_io(s, id, shared).await,
    }
}

async fn serve_io<S>(stream: S, id: Option<u64>, shared: Arc<Shared>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |req| intake::handle(Arc::clone(&shared), id, req));
    // A connection error (the agent went away mid-request) ends only that connection; the
    // exchange under way records it.
    let _ = http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .await;
}
