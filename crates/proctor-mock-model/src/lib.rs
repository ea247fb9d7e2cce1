//! A scripted model server, so real agent CLIs run end to end with no network and no key.
//!
//! [`MockModel::start`] binds an address and serves, on HTTP/1.1 (over TLS when
//! [`MockOptions::tls`] is given, see [`tls`]):
//!
//! | request | API | module |
//! |---|---|---|
//! | `POST /v1/messages` (any query, e.g. `?beta=true`) | Anthropic Messages, SSE or JSON | [`anthropic`] |
//! | `POST /v1/messages/count_tokens` | Anthropic token count (an estimate) | [`anthropic`] |
//! | `POST /v1/responses` | OpenAI Responses, SSE or JSON | [`responses`] |
//! | `POST /v1/chat/completions` | OpenAI Chat Completions, SSE or JSON | [`chat`] |
//! | `POST /v1beta/models/M:streamGenerateContent`, `:generateContent`, `:countTokens` | Gemini | [`gemini`] |
//! | `GET /v1/models`, `GET /v1/models/ID`, `GET /v1beta/models` | model listings (one model) | |
//! | `GET`/`HEAD` `/`, `/health`, `/healthz` | health: `ok` | |
//! | `GET /__mock` | guard: `proctor-mock-model` | |
//!
//! Paths are also accepted without the `/v1` prefix. A request that offers no tools (aider) gets
//! a turn's `role = "shell"` calls written after its text as fenced `bash` blocks. Every model request is either a *main*
//! request, which takes the script's next [`script::Turn`], or a *side* request (a quota probe, a
//! title or classifier request, a request offering no tools under `main_requests = "tools"`),
//! answered with a short text, or with a JSON instance of the schema it asked for, reporting zero
//! usage and consuming no turn (see [`script`] for the rules). A main request whose body is
//! byte-identical to the previous main request is a client retry: it gets the same turn again.
//! Once the script is exhausted, main requests get the text `mock-model: the script has no turn
//! left`.
//!
//! A [`FaultKind`] injected on a route ([`MockOptions::faults`]) answers that route's model
//! requests with the fault instead of a turn.
//!
//! To stand in for a real provider (upstream of proctor's model gateway), the mock can require an
//! API key ([`MockOptions::require_key`]): every API request (model requests, token counts and
//! model listings; not health and guard requests) must then carry exactly that key where its API
//! puts it (see [`auth`]). One that does not is answered HTTP 401 in its API's error shape (the
//! body the `credential_loss` fault sends), consumes no turn, and is logged with
//! `"kind": "auth_rejected"`.
//!
//! Every exchange is written as one JSON line to the log file, when one is given
//! ([`MockOptions::log`]): `{"seq", "at_ms", "method", "path", "query", "headers", "api",
//! "kind": "main" | "side" | "meta" | "unknown" | "fault" | "auth_rejected", "turn", "replay",
//! "side_reason", "stream", "request", "status", "response", "usage", "error", "fault"}`, plus
//! `"route"` (`anthropic`, `responses`, `chat` or `gemini`) on API requests and, when a key is
//! required, `"key": "ok" | "missing" | "wrong"` on the requests checked — secrets in headers and
//! queries are redacted, and the required key is replaced by `[redacted]` wherever else it would
//! appear; an SSE response is logged as its list of events.

pub mod anthropic;
pub mod auth;
pub mod chat;
pub mod gemini;
pub mod http;
pub mod responses;
pub mod script;
pub mod sse;
pub mod tls;
pub mod tools;
pub mod wire;
pub mod wire_log;

use std::collections::hash_map::DefaultHasher;
use std::fs::File;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;

use serde::Serialize;
use serde_json::{json, Value};

pub use script::{Call, MainRequests, Role, Script, ScriptError, Turn, Usage};
pub use tls::TlsFiles;

use auth::{KeyCheck, KeyPlace};
use http::{Request, Response};
use tools::ToolSpec;
use wire::{Reply, ReplyCall, Side};
use wire_log::{WireKind, WireLine};

/// The text of a main request once the script has no turn left.
pub const EXHAUSTED_TEXT: &str = "mock-model: the script has no turn left";
/// The text answering a side request that asked for no structure.
pub const SIDE_TEXT: &str = "OK";
/// The body of `GET /__mock`, for a service guard.
pub const GUARD_TEXT: &str = "proctor-mock-model";

/// Why the server cannot start.
#[derive(Debug, thiserror::Error)]
pub enum MockError {
    /// The address cannot be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The log file cannot be created.
    #[error("cannot create the log {path}: {source}")]
    Log {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The serving thread cannot be started.
    #[error("cannot start the server thread: {0}")]
    Thread(std::io::Error),
    /// The environment variable meant to hold the required API key does not hold a usable one.
    #[error("the API key variable ${var} {reason}")]
    KeyEnv {
        /// The variable's name.
        var: String,
        /// What is wrong with it (never its content).
        reason: &'static str,
    },
    /// The required API key cannot be used.
    #[error("the required API key {reason}")]
    Key {
        /// What is wrong with it (never its content).
        reason: &'static str,
    },
    /// A TLS certificate or key file cannot be read.
    #[error("cannot read the TLS file {path}: {reason}")]
    TlsFile {
        /// The file.
        path: String,
        /// The cause.
        reason: String,
    },
    /// The TLS certificate and key do not make a server configuration (a key that does not
    /// match the certificate, an unsupported key type).
    #[error("cannot serve TLS with the certificate {cert} and the key {key}: {reason}")]
    Tls {
        /// The certificate file.
        cert: String,
        /// The key file.
        key: String,
        /// The cause.
        reason: String,
    },
}

/// Options beyond the script.
#[derive(Clone, Default)]
pub struct MockOptions {
    /// Where to append the exchange log (JSON lines); none when `None`.
    pub log: Option<PathBuf>,
    /// Typed faults injected on model routes instead of a model answer.
    pub faults: Vec<RouteFault>,
    /// The API key every API request must carry (see [`auth`]); none required when `None`. A
    /// secret: `Debug` shows only whether one is set, and the log never holds it. It must be
    /// non-empty visible ASCII (see [`auth::validate_key`]).
    pub require_key: Option<String>,
    /// Serve HTTPS with this certificate and key; plain HTTP when `None`.
    pub tls: Option<TlsFiles>,
}

impl std::fmt::Debug for MockOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockOptions")
            .field("log", &self.log)
            .field("faults", &self.faults)
            .field(
                "require_key",
                &self.require_key.as_ref().map(|_| "[redacted]"),
            )
            .field("tls", &self.tls)
            .finish()
    }
}

/// A fault the mock injects on a model route, so an operational failure can be tested: the
/// trial must come out `errored` with this reason, never as the agent's failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// The credentials are rejected: HTTP 401 with an authentication error.
    CredentialLoss,
    /// The provider rate-limits: HTTP 429 with a rate-limit error.
    RateLimit,
    /// The provider never answers: the request is held open until the client gives up.
    Timeout,
    /// The provider fails: HTTP 500 with its API's server error. Offered by `proctor mock-model
    /// --fault` for gateway tests; suites do not name it.
    ServerError,
}

impl FaultKind {
    /// The spelling used in suites and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::CredentialLoss => "credential_loss",
            FaultKind::RateLimit => "rate_limit",
            FaultKind::Timeout => "timeout",
            FaultKind::ServerError => "server_error",
        }
    }

    /// Parses `credential_loss`, `rate_limit`, `timeout` or `server_error`.
    pub fn parse(s: &str) -> Option<FaultKind> {
        match s {
            "credential_loss" => Some(FaultKind::CredentialLoss),
            "rate_limit" => Some(FaultKind::RateLimit),
            "timeout" => Some(FaultKind::Timeout),
            "server_error" => Some(FaultKind::ServerError),
            _ => None,
        }
    }
}

/// Every fault kind's spelling, for messages.
pub const FAULT_KINDS: &[&str] = &["credential_loss", "rate_limit", "timeout", "server_error"];

/// A fault on one route: `anthropic` (Messages), `responses`, `chat`, `gemini`, or `*` for all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteFault {
    /// The route name, or `*`.
    pub route: String,
    /// What to inject.
    pub kind: FaultKind,
}

/// The route names faults can name.
pub const ROUTES: &[&str] = &["anthropic", "responses", "chat", "gemini", "*"];

/// What the server has served so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Every HTTP request.
    pub requests: u64,
    /// Main model requests (including replays and requests after the script ran out).
    pub main_requests: u64,
    /// Side model requests.
    pub side_requests: u64,
    /// Script turns handed out (each counted once).
    pub turns_served: u64,
    /// Main requests answered with a repeated turn (client retries).
    pub replays: u64,
    /// Main requests that came after the last turn.
    pub exhausted: u64,
    /// API requests refused for a missing or wrong key (when one is required).
    pub auth_rejected: u64,
    /// Usage reported on the wire, summed over every main response.
    pub usage: Usage,
}

struct State {
    faults: Vec<RouteFault>,
    require_key: Option<String>,
    script: Script,
    started: Instant,
    seq: AtomicU64,
    inner: Mutex<Inner>,
    log: Mutex<Option<File>>,
}

#[derive(Default)]
struct Inner {
    next_turn: usize,
    last_main: Option<(u64, usize)>,
    stats: Stats,
}

impl State {
    fn inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The scripted model server.
#[derive(Debug)]
pub struct MockModel;

/// A running server; dropping it stops it.
#[derive(Debug)]
pub struct MockHandle {
    addr: SocketAddr,
    https: bool,
    state: Arc<StateRef>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// Keeps `State` out of the public `Debug` output.
struct StateRef(State);

impl std::fmt::Debug for StateRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("State")
    }
}

impl MockModel {
    /// Starts serving `script` on `addr` (use port 0 for any free port), without a log.
    pub fn start(script: Script, addr: impl ToSocketAddrs) -> Result<MockHandle, MockError> {
        MockModel::start_with(script, addr, MockOptions::default())
    }

    /// Starts serving `script` on `addr` with these options.
    pub fn start_with(
        script: Script,
        addr: impl ToSocketAddrs,
        options: MockOptions,
    ) -> Result<MockHandle, MockError> {
        if let Some(key) = &options.require_key {
            auth::validate_key(key).map_err(|reason| MockError::Key { reason })?;
        }
        let tls = options.tls.as_ref().map(tls::server_config).transpose()?;
        let https = tls.is_some();
        let addrs: Vec<SocketAddr> = addr
            .to_socket_addrs()
            .map_err(|source| MockError::Bind {
                addr: "?".into(),
                source,
            })?
            .collect();
        let shown = addrs
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        let listener = TcpListener::bind(&addrs[..]).map_err(|source| MockError::Bind {
            addr: shown.clone(),
            source,
        })?;
        let bound = listener.local_addr().map_err(|source| MockError::Bind {
            addr: shown,
            source,
        })?;
        let log = match &options.log {
            Some(path) => Some(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|source| MockError::Log {
                        path: path.display().to_string(),
                        source,
                    })?,
            ),
            None => None,
        };
        let state = Arc::new(StateRef(State {
            faults: options.faults.clone(),
            require_key: options.require_key.clone(),
            script,
            started: Instant::now(),
            seq: AtomicU64::new(0),
            inner: Mutex::new(Inner::default()),
            log: Mutex::new(log),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let handler_state = state.clone();
        let handler = Arc::new(move |req: Request| handle(&handler_state.0, req));
        let thread_stop = stop.clone();
        let thread = std::thread::Builder::new()
            .name("mock-model".into())
            .spawn(move || http::serve_with(listener, thread_stop, handler, tls))
            .map_err(MockError::Thread)?;
        Ok(MockHandle {
            addr: bound,
            https,
            state,
            stop,
            thread: Some(thread),
        })
    }
}

/// Closes a server's wire log from another thread: the line being written, if any, is
/// finished first, and no exchange after it is logged. For a process that ends on a signal
/// without cutting a line (a fatal signal cuts a write short).
#[derive(Debug, Clone)]
pub struct LogCloser(Arc<StateRef>);

impl LogCloser {
    /// Waits for the line being written, if any, then closes the log.
    pub fn close(&self) {
        let mut log = self.0 .0.log.lock().unwrap_or_else(|p| p.into_inner());
        *log = None;
    }
}

impl MockHandle {
    /// What closes the wire log from another thread.
    pub fn log_closer(&self) -> LogCloser {
        LogCloser(self.state.clone())
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://HOST:PORT` (`https://` when serving TLS), without `/v1` (what
    /// `ANTHROPIC_BASE_URL` wants; OpenAI-style clients want `base_url() + "/v1"`).
    pub fn base_url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// What was served so far.
    pub fn stats(&self) -> Stats {
        self.state.0.inner().stats
    }

    /// Blocks until the server stops (for `proctor mock-model`).
    pub fn wait(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// Stops serving and waits for the accept loop to end.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for MockHandle {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.shutdown();
        }
    }
}

/// Which wire API a request speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    Anthropic,
    Responses,
    Chat,
    Gemini { stream: bool, sse: bool },
}

impl Api {
    fn name(self) -> &'static str {
        match self {
            Api::Anthropic => "anthropic-messages",
            Api::Responses => "openai-responses",
            Api::Chat => "openai-chat",
            Api::Gemini { .. } => "gemini",
        }
    }
}

/// Everything logged about one exchange besides the request and response themselves.
#[derive(Default)]
struct Note {
    api: Option<&'static str>,
    kind: WireKind,
    turn: Option<usize>,
    replay: bool,
    side_reason: Option<String>,
    stream: bool,
    usage: Option<Usage>,
    error: Option<String>,
    fault: Option<FaultKind>,
    route: Option<&'static str>,
    key: Option<KeyCheck>,
}

fn handle(state: &State, req: Request) -> Response {
    let seq = state.seq.fetch_add(1, Ordering::SeqCst) + 1;
    state.inner().stats.requests += 1;
    let mut note = Note::default();
    let resp = route(state, &req, seq, &mut note);
    log_exchange(state, seq, &req, &resp, &note);
    resp
}

fn strip_v1(path: &str) -> &str {
    let p = path.trim_end_matches('/');
    p.strip_prefix("/v1")
        .filter(|r| r.is_empty() || r.starts_with('/'))
        .unwrap_or(p)
}

fn text(status: u16, body: &str) -> Response {
    Response {
        status,
        content_type: "text/plain; charset=utf-8".into(),
        body: body.as_bytes().to_vec(),
    }
}

fn route(state: &State, req: &Request, seq: u64, note: &mut Note) -> Response {
    let method = req.method.as_str();
    let path = strip_v1(&req.path);
    let model = state.script.model.clone();
    match (method, path) {
        ("GET" | "HEAD", "" | "/health" | "/healthz") => return text(200, "ok"),
        ("GET" | "HEAD", "/__mock") => return text(200, GUARD_TEXT),
        ("GET", "/models") => {
            if let Err(resp) = authorize(state, req, listing_api(req), note) {
                return resp;
            }
            return Response::json(
                200,
                &json!({
                    "object": "list",
                    "data": [model_object(&model)],
                    "has_more": false, "first_id": model, "last_id": model,
                }),
            );
        }
        ("POST", "/messages/count_tokens") => {
            note.api = Some("anthropic-count-tokens");
            if let Err(resp) = authorize(state, req, Api::Anthropic, note) {
                return resp;
            }
            return Response::json(200, &json!({ "input_tokens": estimate(&req.body) }));
        }
        ("POST", "/messages") => return model_request(state, req, Api::Anthropic, seq, note),
        ("POST", "/responses") => return model_request(state, req, Api::Responses, seq, note),
        ("POST", "/chat/completions") => return model_request(state, req, Api::Chat, seq, note),
        _ => {}
    }
    if method == "GET" {
        if let Some(id) = path.strip_prefix("/models/") {
            if let Err(resp) = authorize(state, req, listing_api(req), note) {
                return resp;
            }
            return Response::json(200, &model_object(id));
        }
        let gemini = Api::Gemini {
            stream: false,
            sse: false,
        };
        if path == "/v1beta/models" {
            if let Err(resp) = authorize(state, req, gemini, note) {
                return resp;
            }
            return Response::json(200, &json!({ "models": [gemini_model(&model)] }));
        }
        if let Some(id) = path.strip_prefix("/v1beta/models/") {
            if let Err(resp) = authorize(state, req, gemini, note) {
                return resp;
            }
            return Response::json(200, &gemini_model(id));
        }
    }
    if method == "POST" {
        if let Some((_, action)) = path
            .strip_prefix("/v1beta/models/")
            .and_then(|rest| rest.rsplit_once(':'))
        {
            let sse = req.query.split('&').any(|kv| kv == "alt=sse");
            match action {
                "countTokens" => {
                    note.api = Some("gemini-count-tokens");
                    let api = Api::Gemini { stream: false, sse };
                    if let Err(resp) = authorize(state, req, api, note) {
                        return resp;
                    }
                    return Response::json(200, &json!({ "totalTokens": estimate(&req.body) }));
                }
                "generateContent" => {
                    let api = Api::Gemini { stream: false, sse };
                    return model_request(state, req, api, seq, note);
                }
                "streamGenerateContent" => {
                    let api = Api::Gemini { stream: true, sse };
                    return model_request(state, req, api, seq, note);
                }
                _ => {}
            }
        }
    }
    note.kind = WireKind::Unknown;
    note.error = Some(format!("no route for {method} {}", req.path));
    Response::json(
        404,
        &json!({ "error": { "type": "not_found_error", "message": format!("proctor mock-model has no route for {method} {}", req.path) } }),
    )
}

/// The API a model listing (`GET /v1/models`, shared by Anthropic and OpenAI clients) answers
/// as: Anthropic when the request carries `x-api-key` or `anthropic-version`, else OpenAI.
fn listing_api(req: &Request) -> Api {
    if req.header("x-api-key").is_some() || req.header("anthropic-version").is_some() {
        Api::Anthropic
    } else {
        Api::Responses
    }
}

/// Where a request of `api` carries its key.
fn key_place(api: Api, req: &Request) -> KeyPlace {
    match api {
        Api::Anthropic if req.method == "GET" => KeyPlace::AnthropicOrBearer,
        Api::Anthropic => KeyPlace::Anthropic,
        Api::Responses if req.method == "GET" => KeyPlace::AnthropicOrBearer,
        Api::Responses | Api::Chat => KeyPlace::Bearer,
        Api::Gemini { .. } => KeyPlace::Gemini,
    }
}

/// Checks the request's key when one is required: `Err` with the 401 to send when it is missing
/// or wrong (the exchange is then logged as `auth_rejected`).
fn authorize(state: &State, req: &Request, api: Api, note: &mut Note) -> Result<(), Response> {
    note.route = Some(route_name(api));
    let Some(key) = &state.require_key else {
        return Ok(());
    };
    let verdict = auth::check(req, key_place(api, req), key);
    note.key = Some(verdict);
    let why = match verdict {
        KeyCheck::Ok => return Ok(()),
        KeyCheck::Missing => "the request carries no API key",
        KeyCheck::Wrong => "the request's API key is not the one required",
    };
    note.kind = WireKind::AuthRejected;
    note.error = Some(format!("{why} (key {})", verdict.as_str()));
    state.inner().stats.auth_rejected += 1;
    Err(unauthorized(api, why))
}

/// HTTP 401 in `api`'s error shape, saying `why` (the `credential_loss` fault's answer).
fn unauthorized(api: Api, why: &str) -> Response {
    let body = match api {
        Api::Anthropic => anthropic::error(
            "authentication_error",
            &format!("invalid x-api-key (proctor mock-model: {why})"),
        ),
        Api::Responses | Api::Chat => responses::error(
            "invalid_api_key",
            &format!("Incorrect API key provided (proctor mock-model: {why})"),
        ),
        Api::Gemini { .. } => gemini::error(
            401,
            "UNAUTHENTICATED",
            &format!("API key not valid (proctor mock-model: {why})"),
        ),
    };
    Response::json(401, &body)
}

fn model_object(id: &str) -> Value {
    json!({
        "id": id, "object": "model", "type": "model", "created": 0, "created_at": "1970-01-01T00:00:00Z",
        "owned_by": "proctor", "display_name": id,
    })
}

fn gemini_model(id: &str) -> Value {
    let id = id.trim_start_matches("models/");
    json!({
        "name": format!("models/{id}"), "displayName": id, "version": "mock",
        "inputTokenLimit": 1_000_000, "outputTokenLimit": 65_536,
        "supportedGenerationMethods": ["generateContent", "streamGenerateContent", "countTokens"],
    })
}

/// A token estimate for count requests: a quarter of the body's bytes.
fn estimate(body: &[u8]) -> u64 {
    (body.len() as u64 / 4).max(1)
}

fn api_error(api: Api, status: u16, message: &str) -> Response {
    let body = match api {
        Api::Anthropic => anthropic::error("invalid_request_error", message),
        Api::Responses | Api::Chat => responses::error("invalid_request_error", message),
        Api::Gemini { .. } => gemini::error(status, "INVALID_ARGUMENT", message),
    };
    Response::json(status, &body)
}

fn body_hash(body: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    body.hash(&mut h);
    h.finish()
}

fn route_name(api: Api) -> &'static str {
    match api {
        Api::Anthropic => "anthropic",
        Api::Responses => "responses",
        Api::Chat => "chat",
        Api::Gemini { .. } => "gemini",
    }
}

/// Answers a model request of `api`: an injected fault, a side request's short answer, or the
/// script's next turn, rendered in the API's wire format.
fn model_request(state: &State, req: &Request, api: Api, seq: u64, note: &mut Note) -> Response {
    note.api = Some(api.name());
    if let Err(resp) = authorize(state, req, api, note) {
        return resp;
    }
    if let Some(f) = state
        .faults
        .iter()
        .find(|f| f.route == "*" || f.route == route_name(api))
    {
        return fault_response(state, req, api, seq, note, f.kind);
    }
    let body: Value = match serde_json::from_slice(&req.body) {
        Ok(v) => v,
        Err(e) => {
            note.kind = WireKind::Unknown;
            note.error = Some(format!("the body is not JSON: {e}"));
            let enc = req.header("content-encoding").unwrap_or("identity");
            return api_error(
                api,
                400,
                &format!("proctor mock-model: the request body is not JSON (content-encoding {enc}): {e}"),
            );
        }
    };
    let (tools, side, stream) = request_shape(api, &body);
    note.stream = stream;
    let side = side.or_else(|| {
        (state.script.main_requests == MainRequests::Tools && tools.is_empty())
            .then(|| Side::text("offers no tools"))
    });
    let mut reply = Reply {
        seq,
        model: reply_model(state, req, api, &body),
        text: None,
        calls: Vec::new(),
        usage: Usage::default(),
    };
    match side {
        Some(side) => side_reply(state, &side, &mut reply, note),
        None => main_reply(state, req, &tools, &mut reply, note),
    }
    render(api, &reply, &body, stream)
}

/// The answer to a model request on a route with an injected fault.
fn fault_response(
    state: &State,
    req: &Request,
    api: Api,
    seq: u64,
    note: &mut Note,
    kind: FaultKind,
) -> Response {
    note.kind = WireKind::Fault;
    note.fault = Some(kind);
    match kind {
        FaultKind::CredentialLoss => unauthorized(api, "injected credential_loss"),
        FaultKind::RateLimit => {
            let body = match api {
                Api::Anthropic => anthropic::error(
                    "rate_limit_error",
                    "rate limited (proctor mock-model: injected rate_limit)",
                ),
                Api::Responses | Api::Chat => responses::error(
                    "rate_limit_exceeded",
                    "Rate limit reached (proctor mock-model: injected rate_limit)",
                ),
                Api::Gemini { .. } => gemini::error(
                    429,
                    "RESOURCE_EXHAUSTED",
                    "Quota exceeded (proctor mock-model: injected rate_limit)",
                ),
            };
            Response::json(429, &body)
        }
        FaultKind::ServerError => {
            let body = match api {
                Api::Anthropic => anthropic::error(
                    "api_error",
                    "Internal server error (proctor mock-model: injected server_error)",
                ),
                Api::Responses | Api::Chat => responses::error(
                    "server_error",
                    "The server had an error while processing your request (proctor mock-model: injected server_error)",
                ),
                Api::Gemini { .. } => gemini::error(
                    500,
                    "INTERNAL",
                    "An internal error has occurred (proctor mock-model: injected server_error)",
                ),
            };
            Response::json(500, &body)
        }
        FaultKind::Timeout => {
            let resp = Response::json(
                504,
                &json!({ "error": { "type": "timeout", "message": "proctor mock-model: injected timeout (the request was held open)" } }),
            );
            // Log it now: the client (or the trial's end) gives up long before we answer.
            log_exchange(state, seq, req, &resp, note);
            std::thread::sleep(std::time::Duration::from_secs(3600));
            resp
        }
    }
}

/// The tools a request offers, whether it is a side request by its API's rules, and whether it
/// asks for a stream.
fn request_shape(api: Api, body: &Value) -> (Vec<ToolSpec>, Option<Side>, bool) {
    match api {
        Api::Anthropic => (
            anthropic::tools(body),
            anthropic::side(body),
            anthropic::streaming(body),
        ),
        Api::Responses => (
            responses::tools(body),
            responses::side(body),
            responses::streaming(body),
        ),
        Api::Chat => (chat::tools(body), chat::side(body), chat::streaming(body)),
        Api::Gemini { stream, .. } => (gemini::tools(body), gemini::side(body), stream),
    }
}

/// The model a reply reports: the one the request names (in the path for Gemini), else the
/// script's.
fn reply_model(state: &State, req: &Request, api: Api, body: &Value) -> String {
    match api {
        Api::Gemini { .. } => strip_v1(&req.path)
            .strip_prefix("/v1beta/models/")
            .and_then(|r| r.rsplit_once(':'))
            .map(|(m, _)| m.to_string()),
        _ => body.get("model").and_then(Value::as_str).map(String::from),
    }
    .unwrap_or_else(|| state.script.model.clone())
}

/// Answers a side request: a short text, or an instance of the schema it asked for.
fn side_reply(state: &State, side: &Side, reply: &mut Reply, note: &mut Note) {
    note.kind = WireKind::Side;
    note.side_reason = Some(side.reason.clone());
    reply.text = Some(match &side.schema {
        Some(schema) => tools::instance(schema, 0).to_string(),
        None => SIDE_TEXT.into(),
    });
    state.inner().stats.side_requests += 1;
}

/// Answers a main request with the script's next turn (the same turn again for a retry), or
/// with [`EXHAUSTED_TEXT`].
fn main_reply(
    state: &State,
    req: &Request,
    tools: &[ToolSpec],
    reply: &mut Reply,
    note: &mut Note,
) {
    note.kind = WireKind::Main;
    let index = main_turn_index(state, body_hash(&req.body), note);
    match state.script.turns.get(index) {
        None => {
            state.inner().stats.exhausted += 1;
            note.error = Some("the script has no turn left".into());
            reply.text = Some(EXHAUSTED_TEXT.into());
        }
        Some(turn) => {
            note.turn = Some(index + 1);
            play_turn(turn, index, tools, reply, note);
            state.inner().stats.usage.add(&reply.usage);
            note.usage = Some(reply.usage);
        }
    }
}

/// The index of the turn a main request with this body hash gets: the previous one again for a
/// byte-identical retry, else the next.
fn main_turn_index(state: &State, hash: u64, note: &mut Note) -> usize {
    let mut inner = state.inner();
    inner.stats.main_requests += 1;
    match inner.last_main {
        Some((h, i)) if h == hash => {
            note.replay = true;
            inner.stats.replays += 1;
            i
        }
        _ => {
            let i = inner.next_turn;
            inner.next_turn += 1;
            inner.last_main = Some((hash, i));
            if i < state.script.turns.len() {
                inner.stats.turns_served += 1;
            }
            i
        }
    }
}

/// Fills `reply` with turn `index` (0-based): its text and usage and its calls resolved against
/// the request's tools. A call that cannot be made replaces the calls with an error text.
fn play_turn(turn: &Turn, index: usize, tools: &[ToolSpec], reply: &mut Reply, note: &mut Note) {
    reply.text = turn.text.clone();
    reply.usage = turn.usage;
    if tools.is_empty() {
        // A request that offers no tools (aider) gets its shell calls as fenced
        // shell blocks after the text: that is how such agents receive commands.
        let blocks = fenced_commands(&turn.calls);
        if !blocks.is_empty() {
            let mut text = reply.text.take().unwrap_or_default();
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            text.push_str(&blocks);
            reply.text = Some(text);
        }
    }
    let calls = turn
        .calls
        .iter()
        .filter(|c| !(tools.is_empty() && c.command.is_some() && c.name.is_none()));
    for (i, call) in calls.enumerate() {
        match tools::resolve(call, tools) {
            Ok(c) => reply.calls.push(ReplyCall {
                seq: reply.seq,
                index: i,
                call: c,
            }),
            Err(e) => {
                let msg = format!(
                    "mock-model: turn {} call {} cannot be made: {e}",
                    index + 1,
                    i + 1
                );
                note.error = Some(msg.clone());
                reply.calls.clear();
                reply.text = Some(msg);
                break;
            }
        }
    }
}

/// The shell calls of a turn as fenced `bash` blocks, for requests that offer no tools.
fn fenced_commands(calls: &[Call]) -> String {
    calls
        .iter()
        .filter(|c| c.name.is_none())
        .filter_map(|c| c.command.as_ref())
        .map(|cmd| format!("```bash\n{cmd}\n```"))
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn render(api: Api, reply: &Reply, body: &Value, stream: bool) -> Response {
    let sse = |s: String| Response {
        status: 200,
        content_type: "text/event-stream; charset=utf-8".into(),
        body: s.into_bytes(),
    };
    match api {
        Api::Anthropic if stream => sse(anthropic::stream(reply)),
        Api::Anthropic => Response::json(200, &anthropic::message(reply)),
        Api::Responses if stream => sse(responses::stream(reply)),
        Api::Responses => Response::json(200, &responses::response(reply)),
        Api::Chat if stream => sse(chat::stream(reply, body)),
        Api::Chat => Response::json(200, &chat::completion(reply)),
        Api::Gemini {
            stream: true,
            sse: true,
        } => sse(gemini::stream_sse(reply)),
        Api::Gemini {
            stream: true,
            sse: false,
        } => Response::json(200, &json!([gemini::chunk(reply)])),
        Api::Gemini { stream: false, .. } => Response::json(200, &gemini::chunk(reply)),
    }
}

const SECRET_HEADERS: &[&str] = &[
    "authorization",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
    "cookie",
    "proxy-authorization",
];

fn redact_query(query: &str) -> String {
    query
        .split('&')
        .map(|kv| match kv.split_once('=') {
            Some((k, _)) if k.eq_ignore_ascii_case("key") => format!("{k}=[redacted]"),
            _ => kv.to_string(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

fn body_value(bytes: &[u8]) -> Value {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(v) => v,
        Err(_) => Value::String(String::from_utf8_lossy(bytes).into_owned()),
    }
}

/// Replaces `secret` by `[redacted]` in every string of `value` (request bodies and any header a
/// client chose to put the key in).
fn scrub(value: &mut Value, secret: &str) {
    match value {
        Value::String(s) if s.contains(secret) => *s = s.replace(secret, "[redacted]"),
        Value::Array(items) => items.iter_mut().for_each(|v| scrub(v, secret)),
        Value::Object(map) => {
            if map.keys().any(|k| k.contains(secret)) {
                let old = std::mem::take(map);
                map.extend(
                    old.into_iter()
                        .map(|(k, v)| (k.replace(secret, "[redacted]"), v)),
                );
            }
            map.values_mut().for_each(|v| scrub(v, secret));
        }
        _ => {}
    }
}

fn log_exchange(state: &State, seq: u64, req: &Request, resp: &Response, note: &Note) {
    let mut guard = state.log.lock().unwrap_or_else(|p| p.into_inner());
    let Some(file) = guard.as_mut() else {
        return;
    };
    let line = wire_line(state, seq, req, resp, note);
    let Ok(mut record) = serde_json::to_value(&line) else {
        return;
    };
    if let Some(key) = &state.require_key {
        scrub(&mut record, key);
    }
    // One write per line: formatted straight into the file, a line took dozens, and a mock
    // stopped at the trial's end between two of them left a torn line (seen in the ACP tests).
    let Ok(mut bytes) = serde_json::to_vec(&record) else {
        return;
    };
    bytes.push(b'\n');
    let _ = file.write_all(&bytes);
}

/// The wire log's line for one exchange: secret headers and a `key=` query redacted.
fn wire_line(state: &State, seq: u64, req: &Request, resp: &Response, note: &Note) -> WireLine {
    let headers = req
        .headers
        .iter()
        .map(|(k, v)| {
            let v = if SECRET_HEADERS.contains(&k.as_str()) {
                "[redacted]".to_string()
            } else {
                v.clone()
            };
            (k.clone(), v)
        })
        .collect();
    let response = if resp.content_type.starts_with("text/event-stream") {
        let events: Vec<Value> = sse::parse(&String::from_utf8_lossy(&resp.body))
            .into_iter()
            .map(|e| json!({ "event": e.event, "data": e.json().unwrap_or(Value::String(e.data)) }))
            .collect();
        json!({ "sse": events })
    } else {
        body_value(&resp.body)
    };
    WireLine {
        seq,
        at_ms: state.started.elapsed().as_millis() as u64,
        method: req.method.clone(),
        path: req.path.clone(),
        query: redact_query(&req.query),
        headers,
        api: note.api.map(str::to_string),
        kind: note.kind,
        turn: note.turn,
        replay: note.replay,
        side_reason: note.side_reason.clone(),
        stream: note.stream,
        request: if req.body.is_empty() {
            Value::Null
        } else {
            body_value(&req.body)
        },
        status: resp.status,
        response,
        usage: note.usage,
        error: note.error.clone(),
        fault: note.fault,
        route: note.route.map(str::to_string),
        key: note.key,
    }
}
