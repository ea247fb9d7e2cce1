//! MCP's older HTTP+SSE transport (protocol version 2024-11-05; Harbor's default `sse`): the
//! bridge opens the server's event stream with `GET URL`; the stream's first `endpoint` event
//! names where each message is `POST`ed; every answer comes back as a `message` event on the
//! stream, and is written to stdout as it comes.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{ACCEPT, CONTENT_TYPE, HOST};
use serde_json::Value;

use super::events::SseLines;
use super::{connect, refuse, stdin_lines, write_message, Bridge};

/// How long the server has to name its endpoint once its stream is open.
const ENDPOINT_WAIT: Duration = Duration::from_secs(30);

/// Opens the stream, then sends each message of stdin to the endpoint it named, as it comes;
/// a server that gives no endpoint has every request answered with the bridge's error.
pub(super) async fn run(bridge: Arc<Bridge>) {
    let mut rx = stdin_lines();
    let endpoint = open(&bridge).await;
    let mut in_flight = tokio::task::JoinSet::new();
    while let Some(message) = rx.recv().await {
        match &endpoint {
            Ok(path) => {
                let (bridge, path) = (Arc::clone(&bridge), path.clone());
                in_flight.spawn_local(async move { post(&bridge, &path, message).await });
            }
            Err(why) => refuse(&bridge, &message, why),
        }
    }
    while in_flight.join_next().await.is_some() {}
}

/// Opens the event stream and waits for its endpoint (a path); the stream is then read on
/// its own task.
async fn open(bridge: &Arc<Bridge>) -> Result<String, String> {
    let mut sender = connect(bridge).await?;
    let request = hyper::Request::get(bridge.url.path.as_str())
        .header(HOST, bridge.host())
        .header(ACCEPT, "text/event-stream")
        .body(Full::new(Bytes::new()))
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        return Err(format!(
            "the MCP server answered the GET of its event stream with HTTP {}",
            response.status()
        ));
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::task::spawn_local(read_stream(Arc::clone(bridge), response.into_body(), tx));
    match tokio::time::timeout(ENDPOINT_WAIT, rx).await {
        Ok(Ok(path)) => Ok(path),
        Ok(Err(_)) => {
            Err("the MCP server's event stream ended before it named its endpoint".into())
        }
        Err(_) => Err(format!(
            "the MCP server named no endpoint within {ENDPOINT_WAIT:?}"
        )),
    }
}

/// Reads the stream to its end: the `endpoint` event's path is sent on `endpoint`, every
/// other event's message is written to stdout.
async fn read_stream(
    bridge: Arc<Bridge>,
    mut body: Incoming,
    endpoint: tokio::sync::oneshot::Sender<String>,
) {
    let mut endpoint = Some(endpoint);
    let mut events = SseLines::default();
    while let Some(Ok(frame)) = body.frame().await {
        let Some(data) = frame.data_ref() else {
            continue;
        };
        for (event, data) in events.feed(data) {
            match (event.as_str(), endpoint.take()) {
                ("endpoint", Some(tx)) => {
                    let _ = tx.send(endpoint_path(&data));
                }
                (_, unused) => {
                    endpoint = unused;
                    write_message(&bridge, &data, false);
                }
            }
        }
    }
}

/// The path of an `endpoint` event's URI (absolute, or a path on the server).
fn endpoint_path(data: &str) -> String {
    let data = data.trim();
    match data.strip_prefix("http://") {
        Some(rest) => rest
            .find('/')
            .map_or("/".to_string(), |i| rest[i..].to_string()),
        None if data.starts_with('/') => data.to_string(),
        None => format!("/{data}"),
    }
}

/// POSTs one message to the endpoint; its answer comes on the stream. One the server refuses
/// is answered by the bridge.
async fn post(bridge: &Bridge, path: &str, message: Value) {
    let sent = async {
        let mut sender = connect(bridge).await?;
        let request = hyper::Request::post(path)
            .header(HOST, bridge.host())
            .header(CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(message.to_string())))
            .map_err(|e| e.to_string())?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status();
        let _ = response.into_body().collect().await;
        match status.is_success() {
            true => Ok(()),
            false => Err(format!("the MCP server answered HTTP {status}")),
        }
    }
    .await;
    if let Err(why) = sent {
        refuse(bridge, &message, &why);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_is_taken_as_a_path_on_the_server() {
        assert_eq!(
            endpoint_path("/messages/?session_id=ab"),
            "/messages/?session_id=ab"
        );
        assert_eq!(
            endpoint_path("http://127.0.0.1:8000/messages?s=1"),
            "/messages?s=1"
        );
        assert_eq!(endpoint_path("messages?s=1"), "/messages?s=1");
    }
}
