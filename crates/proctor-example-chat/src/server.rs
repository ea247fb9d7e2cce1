//! Routing for `chat-mock`, and its serve loop with atomic state persistence.
//!
//! Endpoints (JSON unless noted):
//!
//! | method and path | does |
//! |---|---|
//! | `GET /health` | `ok` (text) |
//! | `GET /__mock` | identifies the mock (`chat-mock`), for proctor's guard |
//! | `GET /__mock/state` | the full state, as in `state.json` |
//! | `GET /me`, `GET /channels`, `GET /people` | the account, channels, people |
//! | `GET /conversations/{name}/messages?since=S` | read (`name`: `launch`, `%23launch`, `@dana`, `dana`) |
//! | `POST /messages` `{"to", "text"}` | send |
//! | `PATCH /messages/{id}` `{"text"}` | edit |
//! | `DELETE /messages/{id}` | unsend |
//! | `GET /drafts`, `POST /drafts` `{"to", "text"}` | list, save a draft |
//! | `DELETE /drafts/{id}`, `POST /drafts/{id}/send` | discard, send a draft |
//!
//! The `X-Chat-Actor: user` header marks a request made by a person rather than the agent.

use crate::conv::parse_conversation;
use crate::http::{
    percent_decode, query_param, split_target, Request, MAX_BODY_BYTES, MAX_HEADER_BYTES,
};
use crate::ids::{parse_draft_id, parse_message_id};
use crate::store::{Actor, ApiError, Ctx, Store};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body, Bytes, Incoming};
use hyper::header::{HeaderValue, CONNECTION, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{json, Value};
use std::convert::Infallible;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the guard looks for in `GET /__mock`.
pub const MOCK_MARKER: &str = "chat-mock";

/// How long a connection may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a connection may take to send its request body.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// A response before it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The `Content-Type`.
    pub content_type: &'static str,
    /// The body.
    pub body: String,
}

fn ok_json(status: u16, v: Value) -> Response {
    Response {
        status,
        content_type: "application/json",
        body: v.to_string(),
    }
}

fn error(status: u16, message: impl Into<String>) -> Response {
    ok_json(status, json!({ "error": message.into() }))
}

impl From<ApiError> for Response {
    fn from(e: ApiError) -> Response {
        error(e.status, e.message)
    }
}

fn body_json(body: &[u8]) -> Result<Value, Response> {
    serde_json::from_slice::<Value>(body)
        .map_err(|e| error(400, format!("the request body is not JSON: {e}")))
}

fn field<'a>(v: &'a Value, key: &str) -> Result<&'a str, Response> {
    v.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| error(400, format!("the request body needs a string \"{key}\"")))
}

fn conv_of(s: &str) -> Result<crate::conv::ConvRef, Response> {
    parse_conversation(s).map_err(|e| error(400, e))
}

/// Route one request against the store.
pub fn route(store: &mut Store, method: &str, target: &str, body: &[u8], ctx: &Ctx) -> Response {
    match route_inner(store, method, target, body, ctx) {
        Ok(r) | Err(r) => r,
    }
}

fn route_inner(
    store: &mut Store,
    method: &str,
    target: &str,
    body: &[u8],
    ctx: &Ctx,
) -> Result<Response, Response> {
    let (path, query) = split_target(target);
    let segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(percent_decode)
        .collect();
    let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
    Ok(match (method, segs.as_slice()) {
        ("GET", ["health"]) => Response {
            status: 200,
            content_type: "text/plain",
            body: "ok".into(),
        },
        ("GET", ["__mock"]) => ok_json(
            200,
            json!({"server": MOCK_MARKER, "version": env!("CARGO_PKG_VERSION")}),
        ),
        ("GET", ["__mock", "state"]) => ok_json(200, store.state_json()),
        ("GET", ["me"]) => ok_json(200, json!(store.me)),
        ("GET", ["people"]) => {
            let people: Vec<Value> = store
                .people
                .iter()
                .map(|p| {
                    json!({"handle": p.handle, "name": p.name, "role": p.role,
                                 "messages": store.conversation(&format!("@{}", p.handle)).len()})
                })
                .collect();
            ok_json(200, json!(people))
        }
        ("GET", ["channels"]) => {
            let chans: Vec<Value> = store
                .channels
                .iter()
                .map(|c| {
                    json!({"name": c.name, "topic": c.topic,
                                 "messages": store.conversation(&format!("#{}", c.name)).len()})
                })
                .collect();
            ok_json(200, json!(chans))
        }
        ("GET", ["conversations", name, "messages"]) => {
            let c = conv_of(name)?;
            let since = query_param(query, "since");
            let mut out = json!(store.read(&c, since.as_deref(), ctx)?);
            out["me"] = json!(store.me.handle);
            ok_json(200, out)
        }
        ("POST", ["messages"]) => {
            let v = body_json(body)?;
            let to = conv_of(field(&v, "to")?)?;
            ok_json(201, json!(store.send(&to, field(&v, "text")?, ctx)?))
        }
        ("PATCH", ["messages", id]) => {
            let id = parse_message_id(id).map_err(|e| error(400, e.explain("edit")))?;
            let v = body_json(body)?;
            ok_json(200, json!(store.edit(&id, field(&v, "text")?, ctx)?))
        }
        ("DELETE", ["messages", id]) => {
            let id = parse_message_id(id).map_err(|e| error(400, e.explain("unsend")))?;
            ok_json(200, json!(store.unsend(&id, ctx)?))
        }
        ("GET", ["drafts"]) => ok_json(200, json!(store.drafts)),
        ("POST", ["drafts"]) => {
            let v = body_json(body)?;
            let to = conv_of(field(&v, "to")?)?;
            ok_json(201, json!(store.draft(&to, field(&v, "text")?, ctx)?))
        }
        ("DELETE", ["drafts", id]) => {
            let id = parse_draft_id(id).map_err(|e| error(400, e))?;
            ok_json(200, json!(store.discard(&id, ctx)?))
        }
        ("POST", ["drafts", id, "send"]) => {
            let id = parse_draft_id(id).map_err(|e| error(400, e))?;
            ok_json(201, json!(store.send_draft(&id, ctx)?))
        }
        (
            _,
            ["health" | "__mock" | "me" | "people" | "channels" | "drafts" | "messages"
            | "conversations", ..],
        ) => error(405, format!("{method} is not supported on {path}")),
        _ => error(404, format!("no such endpoint: {method} {path}")),
    })
}

/// Where state and events go (`$PROCTOR_SERVICE_DIR`), and how much has been written.
#[derive(Debug)]
pub struct Persist {
    dir: Option<PathBuf>,
    flushed_events: usize,
    written_version: Option<u64>,
}

impl Persist {
    /// Writes into `dir`, or nowhere when `None`.
    pub fn new(dir: Option<PathBuf>) -> Persist {
        Persist {
            dir,
            flushed_events: 0,
            written_version: None,
        }
    }

    /// Write `state.json` (temp file + rename) if the state changed, and append new events.
    pub fn flush(&mut self, store: &Store) -> io::Result<()> {
        let Some(dir) = &self.dir else { return Ok(()) };
        if self.written_version != Some(store.version) {
            let text =
                serde_json::to_string_pretty(&store.state_json()).map_err(io::Error::other)? + "\n";
            write_atomic(&dir.join("state.json"), text.as_bytes())?;
            self.written_version = Some(store.version);
        }
        let events_path = dir.join("events.jsonl");
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(events_path)?;
        if self.flushed_events < store.events.len() {
            let mut buf = String::new();
            for e in &store.events[self.flushed_events..] {
                buf.push_str(&serde_json::to_string(e).map_err(io::Error::other)?);
                buf.push('\n');
            }
            f.write_all(buf.as_bytes())?;
            f.sync_data()?;
            self.flushed_events = store.events.len();
        }
        Ok(())
    }
}

/// Write a file atomically: a temporary file in the same directory, synced, then renamed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("state");
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)
}

/// The shared server state.
pub struct Shared {
    /// The chat state.
    pub store: Store,
    /// Where the state is written.
    pub persist: Persist,
    /// When the mock started (event times are seconds since then).
    pub started: Instant,
}

/// Serves until the process is killed, on a current-thread tokio runtime with hyper: one request
/// per connection (`Connection: close`), `Content-Length` or chunked bodies up to 1 MiB (a larger
/// one is answered 400), heads up to 64 KiB (a larger one is answered 431). Requests are handled
/// one at a time under the state's lock, on the runtime's blocking pool. `Err` only when the
/// runtime or the listener cannot be set up.
pub fn serve(listener: TcpListener, shared: Arc<Mutex<Shared>>) -> io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    runtime.block_on(async move {
        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let mut builder = http1::Builder::new();
        builder
            .keep_alive(false)
            .timer(TokioTimer::new())
            .header_read_timeout(HEAD_TIMEOUT)
            .max_header_size(MAX_HEADER_BYTES)
            .title_case_headers(true);
        loop {
            let stream = match listener.accept().await {
                Ok((s, _)) => s,
                // Out of descriptors and the like: wait a moment rather than spin.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let shared = Arc::clone(&shared);
            let service = service_fn(move |req| respond(req, Arc::clone(&shared)));
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            tokio::spawn(async move {
                if let Err(e) = conn.await {
                    if !quiet(&e) {
                        eprintln!("chat-mock: connection error: {e}");
                    }
                }
            });
        }
    })
}

/// Whether a connection error is just the peer going away.
fn quiet(e: &hyper::Error) -> bool {
    let gone = std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<io::Error>())
        .is_some_and(|io| {
            matches!(
                io.kind(),
                io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
            )
        });
    gone || e.is_incomplete_message() || e.is_canceled()
}

async fn respond(
    req: hyper::Request<Incoming>,
    shared: Arc<Mutex<Shared>>,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let (parts, body) = req.into_parts();
    // Refused by its declared length, before it is read (or asked for by `100 Continue`).
    if body.size_hint().lower() > MAX_BODY_BYTES as u64 {
        return Ok(encode(error(400, "bad request: body too large")));
    }
    let body = match tokio::time::timeout(
        BODY_TIMEOUT,
        Limited::new(body, MAX_BODY_BYTES).collect(),
    )
    .await
    {
        Ok(Ok(b)) => b.to_bytes().to_vec(),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            return Ok(encode(error(400, "bad request: body too large")));
        }
        Ok(Err(e)) => return Ok(encode(error(400, format!("bad request: {e}")))),
        Err(_) => return Ok(encode(error(400, "bad request: the body timed out"))),
    };
    let req = Request {
        method: parts.method.as_str().to_owned(),
        target: parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path().to_owned(), |pq| pq.as_str().to_owned()),
        headers: parts
            .headers
            .iter()
            .map(|(k, v)| {
                let v = String::from_utf8_lossy(v.as_bytes());
                (k.as_str().to_owned(), v.trim().to_owned())
            })
            .collect(),
        body,
    };
    let resp = tokio::task::spawn_blocking(move || handle(&req, &shared))
        .await
        .unwrap_or_else(|e| error(500, format!("the mock failed: {e}")));
    Ok(encode(resp))
}

/// The wire response: `Content-Type`, `Content-Length` (hyper's) and `Connection: close`.
fn encode(resp: Response) -> hyper::Response<Full<Bytes>> {
    let mut r = hyper::Response::new(Full::new(Bytes::from(resp.body)));
    *r.status_mut() = hyper::StatusCode::from_u16(resp.status)
        .unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(v) = HeaderValue::from_str(resp.content_type) {
        r.headers_mut().insert(CONTENT_TYPE, v);
    }
    r.headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    r
}

/// Routes one request under the state's lock and persists what changed.
fn handle(req: &Request, shared: &Mutex<Shared>) -> Response {
    let mut guard = shared.lock().unwrap_or_else(|p| p.into_inner());
    let sh = &mut *guard;
    let actor = match req.header("x-chat-actor").map(Actor::parse) {
        None => Ok(Actor::Agent),
        Some(r) => r,
    };
    match actor {
        Err(e) => error(400, e),
        Ok(actor) => {
            let ctx = Ctx {
                actor,
                at: sh.started.elapsed().as_secs_f64(),
            };
            let r = route(&mut sh.store, &req.method, &req.target, &req.body, &ctx);
            if let Err(e) = sh.persist.flush(&sh.store) {
                eprintln!("chat-mock: cannot write state: {e}");
                error(500, format!("the mock could not write its state: {e}"))
            } else {
                r
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Fixtures;

    fn store() -> Store {
        Store::new(
            Fixtures::from_json(
                r##"{"me": {"handle": "sam", "name": "Sam"}, "now": "2026-11-28T09:00",
                    "people": [{"handle": "dana", "name": "Dana"}],
                    "channels": [{"name": "launch", "topic": "Launch"}],
                    "messages": [{"conv": "#launch", "from": "sam", "at": "2026-11-27T10:00", "text": "Thursday"}]}"##,
            )
            .unwrap(),
        )
    }

    const CTX: Ctx = Ctx {
        actor: Actor::Agent,
        at: 0.5,
    };

    fn body(r: &Response) -> Value {
        serde_json::from_str(&r.body).unwrap()
    }

    #[test]
    fn health_and_guard() {
        let mut s = store();
        assert_eq!(route(&mut s, "GET", "/health", b"", &CTX).body, "ok");
        assert!(route(&mut s, "GET", "/__mock", b"", &CTX)
            .body
            .contains(MOCK_MARKER));
        assert_eq!(route(&mut s, "GET", "/nope", b"", &CTX).status, 404);
        assert_eq!(route(&mut s, "PUT", "/messages", b"", &CTX).status, 405);
    }

    #[test]
    fn read_send_edit_over_routes() {
        let mut s = store();
        let r = route(
            &mut s,
            "GET",
            "/conversations/%23launch/messages",
            b"",
            &CTX,
        );
        assert_eq!(body(&r)["messages"][0]["pos"], 1);
        assert_eq!(body(&r)["messages"][0]["id"], "m-00001");
        let r = route(
            &mut s,
            "POST",
            "/messages",
            br##"{"to": "launch", "text": "hi"}"##,
            &CTX,
        );
        assert_eq!((r.status, body(&r)["id"].as_str()), (201, Some("m-00002")));
        let r = route(
            &mut s,
            "PATCH",
            "/messages/1",
            br##"{"text": "Friday"}"##,
            &CTX,
        );
        assert_eq!(r.status, 400);
        assert!(body(&r)["error"].as_str().unwrap().contains("position"));
        let r = route(
            &mut s,
            "PATCH",
            "/messages/m-00001",
            br##"{"text": "Friday"}"##,
            &CTX,
        );
        assert_eq!(r.status, 200);
        assert_eq!(s.state_json()["messages"][0]["text"], "Friday");
        assert_eq!(route(&mut s, "POST", "/messages", b"{", &CTX).status, 400);
        assert_eq!(
            route(&mut s, "POST", "/messages", br##"{"to": "launch"}"##, &CTX).status,
            400
        );
    }

    #[test]
    fn drafts_over_routes() {
        let mut s = store();
        let r = route(
            &mut s,
            "POST",
            "/drafts",
            br##"{"to": "@dana", "text": "yes"}"##,
            &CTX,
        );
        assert_eq!(body(&r)["id"], "d-001");
        assert_eq!(
            body(&route(&mut s, "GET", "/drafts", b"", &CTX))[0]["to"],
            "@dana"
        );
        assert_eq!(
            route(&mut s, "POST", "/drafts/d-1/send", b"", &CTX).status,
            201
        );
        assert_eq!(
            route(&mut s, "DELETE", "/drafts/d-001", b"", &CTX).status,
            409
        );
    }

    #[test]
    fn persist_writes_state_and_appends_events() {
        let dir = std::env::temp_dir().join(format!("chat-mock-persist-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let mut s = store();
        let mut p = Persist::new(Some(dir.clone()));
        p.flush(&s).unwrap();
        assert!(dir.join("state.json").exists());
        assert_eq!(fs::read_to_string(dir.join("events.jsonl")).unwrap(), "");
        route(
            &mut s,
            "POST",
            "/messages",
            br##"{"to": "launch", "text": "hi"}"##,
            &CTX,
        );
        p.flush(&s).unwrap();
        p.flush(&s).unwrap();
        let ev = fs::read_to_string(dir.join("events.jsonl")).unwrap();
        assert_eq!(ev.lines().count(), 1);
        let e: Value = serde_json::from_str(ev.lines().next().unwrap()).unwrap();
        assert_eq!(
            (e["actor"].as_str(), e["op"].as_str(), e["target"].as_str()),
            (Some("agent"), Some("send"), Some("m-00002"))
        );
        let st: Value =
            serde_json::from_str(&fs::read_to_string(dir.join("state.json")).unwrap()).unwrap();
        assert_eq!(st["sent"][0]["to"], "#launch");
        let leftovers: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name())
            .collect();
        assert_eq!(leftovers.len(), 2, "no temp files left: {leftovers:?}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
