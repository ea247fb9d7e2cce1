//! A trial's endpoint for the gateway: a relay that listens on the trial's own loopback and
//! joins each connection to the gateway's Unix socket, byte for byte. It runs inside the trial's
//! namespaces (as `proctor model-relay`, a service started before the agent), so a trial with
//! `network = "none"` reaches its model, and nothing else, through a socket file bound into it.
//!
//! The relay reads nothing and holds no secret: the trial's token travels in the agent's own
//! request headers, and the gateway checks it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream, UnixStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Connections a relay joins at once; the next waits in the listening socket's queue until one
/// ends (the gateway's socket for the trial serves as many).
pub const RELAY_CONNECTIONS: usize = 64;

/// Why the relay could not start.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// The listening address is not a loopback address.
    #[error("the relay listens on loopback addresses only, not {0}")]
    NotLoopback(SocketAddr),
    /// The runtime could not be built.
    #[error("cannot start the relay's runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The gateway's socket is not there.
    #[error("the gateway's socket {} is not reachable: {source}", path.display())]
    Socket {
        /// The socket file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// Relays connections on `listen` to the gateway socket at `socket` until the process is killed.
/// The socket is tried once before listening, so a relay that starts is one that can reach the
/// gateway. `on_ready` is called with the bound address once it accepts connections.
pub fn serve_relay(
    listen: SocketAddr,
    socket: &Path,
    on_ready: impl FnOnce(SocketAddr),
) -> Result<(), RelayError> {
    if !listen.ip().is_loopback() {
        return Err(RelayError::NotLoopback(listen));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(RelayError::Runtime)?;
    runtime.block_on(async move {
        UnixStream::connect(socket)
            .await
            .map_err(|source| RelayError::Socket {
                path: socket.to_path_buf(),
                source,
            })?;
        let listener = TcpListener::bind(listen)
            .await
            .map_err(|source| RelayError::Listen {
                addr: listen,
                source,
            })?;
        let bound = listener.local_addr().map_err(|source| RelayError::Listen {
            addr: listen,
            source,
        })?;
        on_ready(bound);
        let places = Arc::new(Semaphore::new(RELAY_CONNECTIONS));
        loop {
            let Ok(place) = Arc::clone(&places).acquire_owned().await else {
                return Ok(());
            };
            match listener.accept().await {
                Ok((conn, _)) => {
                    tokio::spawn(join(conn, socket.to_path_buf(), place));
                }
                // Out of descriptors and the like: wait a moment rather than spin.
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
            }
        }
    })
}

/// Copies bytes both ways between an agent's connection and a fresh gateway connection until
/// either side closes. A gateway that cannot be reached closes the agent's connection, which its
/// HTTP client reports as a connection error.
async fn join(mut conn: TcpStream, socket: PathBuf, _place: OwnedSemaphorePermit) {
    let _ = conn.set_nodelay(true);
    let Ok(mut gateway) = UnixStream::connect(&socket).await else {
        return;
    };
    let _ = tokio::io::copy_bidirectional(&mut conn, &mut gateway).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn a_relay_joins_a_tcp_client_to_the_unix_socket_both_ways() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("gw.sock");
        let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        // An echo server that upper-cases what it reads, on the Unix socket.
        std::thread::spawn(move || {
            // The relay's probe connection first, then the relayed one.
            for stream in listener.incoming().take(2) {
                let mut s = stream.unwrap();
                let mut buf = [0u8; 5];
                if s.read_exact(&mut buf).is_ok() {
                    s.write_all(&buf.to_ascii_uppercase()).unwrap();
                }
            }
        });
        let (tx, rx) = std::sync::mpsc::channel();
        let sock2 = sock.clone();
        std::thread::spawn(move || {
            let _ = serve_relay("127.0.0.1:0".parse().unwrap(), &sock2, |a| {
                tx.send(a).unwrap()
            });
        });
        let addr = rx.recv().unwrap();
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.write_all(b"hello").unwrap();
        let mut out = [0u8; 5];
        c.read_exact(&mut out).unwrap();
        assert_eq!(&out, b"HELLO");
    }

    #[test]
    fn a_relay_refuses_to_start_without_the_socket_or_off_loopback() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("none.sock");
        let e = serve_relay("127.0.0.1:0".parse().unwrap(), &missing, |_| {}).unwrap_err();
        assert!(matches!(e, RelayError::Socket { .. }), "{e}");
        assert!(e.to_string().contains("none.sock"), "{e}");
        let e = serve_relay("0.0.0.0:0".parse().unwrap(), &missing, |_| {}).unwrap_err();
        assert!(matches!(e, RelayError::NotLoopback(_)), "{e}");
    }
}
