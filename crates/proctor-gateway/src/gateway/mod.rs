//! The gateway server: one per run, on the host, with its own tokio runtime on background
//! threads. Trials reach it through per-trial endpoints (relays to its Unix socket) with a
//! per-trial token; it swaps the token for the real key, streams answers back, reads usage from
//! the wire, retries upstream faults, and enforces each trial's limits.

mod api_error;
mod body;
mod budget;
mod exchange;
mod forward;
mod headers;
mod intake;
mod limiter;
mod respond;
mod retry;
mod rewrite;
mod scrub;
mod server;
mod token;
mod trials;
mod upstream;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::api::Api;
use crate::config::{Config, Provider, RetrySettings, Timeouts};
use crate::evidence::{EvidenceDir, Redactor};
use crate::keys::{ProviderKeys, SecretKey};
use crate::ledger::{FaultKind, Limits, TrialLedger};
use crate::model_ref::ModelRef;
use crate::prices::Price;

pub use intake::HEALTH_PATH;
pub use token::TrialToken;

use limiter::AdaptiveLimiter;
use server::Listener;
use trials::{Trial, Trials};
use upstream::UpstreamClient;

/// Pending connections the TCP listener queues (many agents may connect at once).
const LISTEN_BACKLOG: u32 = 1024;

/// How the gateway runs (the configuration file says how it talks to providers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayOptions {
    /// The Unix socket to listen on (a stale socket file there is replaced).
    pub unix_socket: Option<PathBuf>,
    /// A TCP loopback address to listen on as well (port 0 picks one), for tests and direct use.
    pub tcp: Option<SocketAddr>,
    /// Threads of the gateway's runtime.
    pub worker_threads: usize,
    /// Put the granted model in place of the one the agent asked for (`model` in the body, the
    /// path for Gemini); the record keeps what it asked for.
    pub rewrite_model: bool,
    /// Turn on `stream_options.include_usage` in streamed Chat Completions requests, so their
    /// usage is on the wire.
    pub ask_stream_usage: bool,
    /// The largest request body taken, in bytes.
    pub max_request_bytes: usize,
    /// How long `finish_trial` waits for a trial's requests still under way.
    pub finish_grace: Duration,
    /// Successes in a row after which a provider's adaptive concurrency limit rises by one.
    pub increase_after: u32,
    /// Bytes of request bodies the gateway holds at once, across every trial (at least
    /// `max_request_bytes`); a request waits for room before its body is read.
    pub budget_bytes: usize,
    /// Bytes of request bodies one trial holds at once (at least `max_request_bytes`).
    pub trial_budget_bytes: usize,
    /// How long a request waits for room in the budgets before it is refused as overloaded.
    pub budget_wait: Duration,
    /// Connections served at once on a trial's own socket; more wait to be accepted.
    pub trial_connections: usize,
    /// Connections served at once on the gateway's shared listeners; more wait to be accepted.
    pub connections: usize,
}

impl Default for GatewayOptions {
    fn default() -> Self {
        GatewayOptions {
            unix_socket: None,
            tcp: None,
            worker_threads: 2,
            rewrite_model: true,
            ask_stream_usage: true,
            max_request_bytes: 64 << 20,
            finish_grace: Duration::from_secs(10),
            increase_after: 10,
            budget_bytes: 96 << 20,
            trial_budget_bytes: 64 << 20,
            budget_wait: Duration::from_secs(600),
            trial_connections: 64,
            connections: 1024,
        }
    }
}

/// What a trial may use: one provider and model, its limits and the prices for its cost.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialGrant {
    /// The provider's name.
    pub provider: String,
    /// The model id at that provider.
    pub model: String,
    /// The trial's limits.
    pub limits: Limits,
    /// Prices by model id (as sent upstream); a model without one makes the cost incomplete.
    pub prices: BTreeMap<String, Price>,
    /// Where to write `model.jsonl` and `model/NNNN.*.gz`; nothing is written when `None`.
    pub evidence_dir: Option<PathBuf>,
    /// Faults to answer with instead of the provider, by wire API (a task's `route_faults`).
    pub faults: Vec<InjectedFault>,
}

/// A fault the gateway answers a trial's requests with, without contacting the provider, as the
/// provider would after every retry: the request is filed with the fault and the trial ends
/// `errored` with its kind. For testing that operational failures are told apart from the
/// agent's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InjectedFault {
    /// Requests written in this API; `None` for every API.
    pub api: Option<Api>,
    /// The fault.
    pub kind: FaultKind,
}

impl TrialGrant {
    /// The fault injected on requests written in `api`, if any.
    pub(crate) fn injected(&self, api: Api) -> Option<FaultKind> {
        self.faults
            .iter()
            .find(|f| f.api.is_none_or(|a| a == api))
            .map(|f| f.kind)
    }
}

impl TrialGrant {
    /// A grant of `model` with no limits, no prices and no evidence folder.
    pub fn new(model: &ModelRef) -> Self {
        TrialGrant {
            provider: model.provider.clone(),
            model: model.model.clone(),
            limits: Limits::default(),
            prices: BTreeMap::new(),
            evidence_dir: None,
            faults: Vec::new(),
        }
    }
}

/// Why the gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// Neither a Unix socket nor a TCP address was given.
    #[error("the gateway needs a Unix socket or a TCP address to listen on")]
    NoListener,
    /// The TCP address is not a loopback address.
    #[error("the gateway listens on loopback addresses only, not {0}")]
    NotLoopback(SocketAddr),
    /// A socket could not be bound.
    #[error("cannot listen on {what}: {source}")]
    Listen {
        /// The socket.
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The runtime could not be built.
    #[error("cannot start the gateway's runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// A provider's `ca_file` could not be used.
    #[error("provider `{provider}`: cannot use ca_file {}: {message}", path.display())]
    CaFile {
        /// The provider.
        provider: String,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// TLS could not be set up for a provider.
    #[error("provider `{provider}`: cannot set up TLS: {message}")]
    Tls {
        /// The provider.
        provider: String,
        /// What is wrong.
        message: String,
    },
}

/// Why a trial could not be registered.
#[derive(Debug, thiserror::Error)]
pub enum GrantError {
    /// The provider's key was not resolved when the gateway started (or it is unknown).
    #[error("provider `{0}` is not available in this gateway (its key was not resolved at start)")]
    UnknownProvider(String),
    /// The evidence folder could not be created.
    #[error("cannot create the evidence folder {}: {source}", path.display())]
    Evidence {
        /// The folder.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// No random token could be made.
    #[error("cannot make a trial token: {0}")]
    Token(String),
    /// The trial's own socket could not be made.
    #[error("cannot make the trial's own gateway socket: {0}")]
    Listen(String),
}

/// Why a trial could not be finished.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FinishError {
    /// The token belongs to no registered trial (or it was finished already).
    #[error("no running trial has that token")]
    UnknownToken,
}

/// A provider as the running gateway uses it.
#[derive(Debug)]
pub(crate) struct ProviderRuntime {
    pub provider: Provider,
    pub key: Option<SecretKey>,
    pub client: UpstreamClient,
    pub limiter: Arc<AdaptiveLimiter>,
}

/// What every connection shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub trials: Trials,
    /// The gateway's budget of request-body bytes held at once.
    pub budgets: budget::Budgets,
    pub retries: RetrySettings,
    pub timeouts: Timeouts,
    pub options: GatewayOptions,
}

/// Starts gateways.
#[derive(Debug)]
pub struct Gateway;

impl Gateway {
    /// Starts a gateway for the providers whose keys are in `keys`, listening where `options`
    /// says. It runs on its own runtime's threads until [`GatewayHandle::shutdown`] (or drop).
    pub fn start(
        config: &Config,
        keys: &ProviderKeys,
        options: GatewayOptions,
    ) -> Result<GatewayHandle, GatewayError> {
        if options.unix_socket.is_none() && options.tcp.is_none() {
            return Err(GatewayError::NoListener);
        }
        if let Some(addr) = options.tcp {
            if !addr.ip().is_loopback() {
                return Err(GatewayError::NotLoopback(addr));
            }
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(options.worker_threads.max(1))
            .thread_name("proctor-gateway")
            .enable_all()
            .build()
            .map_err(GatewayError::Runtime)?;
        let rt_handle = runtime.handle().clone();
        let _entered = rt_handle.enter();

        let providers = provider_runtimes(config, keys, options.increase_after)?;

        let mut listeners = Vec::new();
        let mut unix_path = None;
        if let Some(path) = &options.unix_socket {
            listeners.push(Listener::Unix(bind_unix(path)?));
            unix_path = Some(path.clone());
        }
        let mut tcp_addr = None;
        if let Some(addr) = options.tcp {
            let (listener, bound) = bind_tcp(addr)?;
            tcp_addr = Some(bound);
            listeners.push(Listener::Tcp(listener));
        }

        let budgets = budget::Budgets {
            global: budget::semaphore(options.budget_bytes, options.max_request_bytes),
            wait: options.budget_wait,
        };
        let connections = options.connections.max(1);
        let shared = Arc::new(Shared {
            trials: Trials::default(),
            budgets,
            retries: config.retries,
            timeouts: config.timeouts,
            options,
        });
        let (stop, stopped) = watch::channel(false);
        for listener in listeners {
            runtime.spawn(server::accept_loop(
                listener,
                None,
                connections,
                Arc::clone(&shared),
                stopped.clone(),
            ));
        }
        Ok(GatewayHandle {
            runtime: Some(runtime),
            shared,
            providers,
            stop,
            unix_path,
            tcp_addr,
            trial_listeners: std::sync::Mutex::new(HashMap::new()),
            next_listener: std::sync::atomic::AtomicU64::new(1),
        })
    }
}

/// The running form of each provider whose key is in `keys`: its client (trusting the system's
/// roots when one of them is reached over HTTPS), key and adaptive concurrency limit.
fn provider_runtimes(
    config: &Config,
    keys: &ProviderKeys,
    increase_after: u32,
) -> Result<HashMap<String, Arc<ProviderRuntime>>, GatewayError> {
    let used: Vec<&Provider> = config
        .providers
        .values()
        .filter(|p| keys.contains(&p.name))
        .collect();
    let system = if used.iter().any(|p| p.base_url.starts_with("https:")) {
        upstream::system_roots()
    } else {
        Vec::new()
    };
    let mut providers = HashMap::new();
    for p in used {
        let runtime = ProviderRuntime {
            provider: p.clone(),
            key: keys.get(&p.name).flatten().cloned(),
            client: upstream::client(p, &system, &config.timeouts)?,
            limiter: AdaptiveLimiter::new(p.max_concurrency, increase_after),
        };
        providers.insert(p.name.clone(), Arc::new(runtime));
    }
    Ok(providers)
}

/// Listens on the TCP address `addr` (port 0 picks one); gives the listener and its address.
fn bind_tcp(addr: SocketAddr) -> Result<(tokio::net::TcpListener, SocketAddr), GatewayError> {
    let listen_err = |source| GatewayError::Listen {
        what: addr.to_string(),
        source,
    };
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()
    } else {
        tokio::net::TcpSocket::new_v6()
    }
    .map_err(listen_err)?;
    socket.set_reuseaddr(true).map_err(listen_err)?;
    socket.bind(addr).map_err(listen_err)?;
    let listener = socket.listen(LISTEN_BACKLOG).map_err(listen_err)?;
    let bound = listener.local_addr().map_err(listen_err)?;
    Ok((listener, bound))
}

/// Binds a Unix socket at `path`, replacing a stale socket file (never another kind of file).
fn bind_unix(path: &Path) -> Result<tokio::net::UnixListener, GatewayError> {
    use std::os::unix::fs::FileTypeExt;
    let listen_err = |source| GatewayError::Listen {
        what: path.display().to_string(),
        source,
    };
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if meta.file_type().is_socket() {
            std::fs::remove_file(path).map_err(listen_err)?;
        }
    }
    tokio::net::UnixListener::bind(path).map_err(listen_err)
}

/// A running gateway. Dropping it shuts the gateway down.
#[derive(Debug)]
pub struct GatewayHandle {
    runtime: Option<tokio::runtime::Runtime>,
    shared: Arc<Shared>,
    providers: HashMap<String, Arc<ProviderRuntime>>,
    stop: watch::Sender<bool>,
    unix_path: Option<PathBuf>,
    tcp_addr: Option<SocketAddr>,
    /// Each bound trial's own listener, by token: what stops it, and its socket's path.
    trial_listeners: std::sync::Mutex<HashMap<String, (watch::Sender<bool>, PathBuf)>>,
    next_listener: std::sync::atomic::AtomicU64,
}

impl GatewayHandle {
    /// The Unix socket it listens on.
    pub fn unix_socket(&self) -> Option<&Path> {
        self.unix_path.as_deref()
    }

    /// The TCP address it listens on (with the port chosen, if 0 was asked).
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        self.tcp_addr
    }

    /// Registers a trial and gives the token its agent will present instead of a key.
    pub fn register_trial(&self, grant: TrialGrant) -> Result<TrialToken, GrantError> {
        self.register(grant, None)
    }

    /// Registers a trial whose token works on the listener `bound_to` (`None`: the gateway's
    /// own listeners).
    fn register(&self, grant: TrialGrant, bound_to: Option<u64>) -> Result<TrialToken, GrantError> {
        let provider = self
            .providers
            .get(&grant.provider)
            .ok_or_else(|| GrantError::UnknownProvider(grant.provider.clone()))?;
        let evidence = match &grant.evidence_dir {
            Some(dir) => Some(
                EvidenceDir::create(dir).map_err(|source| GrantError::Evidence {
                    path: dir.clone(),
                    source,
                })?,
            ),
            None => None,
        };
        let token = TrialToken::generate().map_err(GrantError::Token)?;
        let secrets = [
            provider.key.as_ref().map(SecretKey::expose),
            Some(token.as_str()),
        ];
        let redactor = Redactor::new(secrets.into_iter().flatten());
        let options = &self.shared.options;
        let budget = budget::semaphore(options.trial_budget_bytes, options.max_request_bytes);
        let mut trial = Trial::new(grant, Arc::clone(provider), redactor, evidence, budget);
        trial.bound_to = bound_to;
        if let Some(key) = &provider.key {
            trial.needles = scrub::Needles::of(key.expose());
        }
        self.shared
            .trials
            .insert(token.as_str().to_string(), Arc::new(trial));
        Ok(token)
    }

    /// [`GatewayHandle::register_trial`], with the trial bound to a Unix socket of its own at
    /// `socket`: its token works on that socket and on no other listener of the gateway, and no
    /// other trial's token works there. A trial's sandbox is given its own socket only, so a
    /// token read by another trial (on a shared host network, say) is refused.
    pub fn register_trial_at(
        &self,
        grant: TrialGrant,
        socket: &Path,
    ) -> Result<TrialToken, GrantError> {
        let Some(rt) = &self.runtime else {
            return Err(GrantError::Listen("the gateway is stopped".into()));
        };
        let listener = {
            let _entered = rt.enter();
            bind_unix(socket).map_err(|e| GrantError::Listen(e.to_string()))?
        };
        let id = self
            .next_listener
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let token = self.register(grant, Some(id))?;
        let (stop, stopped) = watch::channel(false);
        rt.spawn(server::accept_loop(
            Listener::Unix(listener),
            Some(id),
            self.shared.options.trial_connections.max(1),
            Arc::clone(&self.shared),
            stopped,
        ));
        self.trial_listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(token.as_str().to_string(), (stop, socket.to_path_buf()));
        Ok(token)
    }

    /// Ends a trial: its token stops working (and its own socket, if it has one, is closed and
    /// removed), requests under way get up to [`GatewayOptions::finish_grace`] to end, and its
    /// ledger is given.
    pub fn finish_trial(&self, token: &TrialToken) -> Result<TrialLedger, FinishError> {
        let trial = self
            .shared
            .trials
            .remove(token.as_str())
            .ok_or(FinishError::UnknownToken)?;
        let own = self
            .trial_listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(token.as_str());
        if let Some((stop, path)) = own {
            let _ = stop.send(true);
            let _ = std::fs::remove_file(path);
        }
        Ok(trial.finish(self.shared.options.finish_grace))
    }

    /// A provider's adaptive concurrency limit now (it falls on 429 and climbs back).
    pub fn provider_concurrency(&self, provider: &str) -> Option<usize> {
        self.providers.get(provider).map(|p| p.limiter.limit())
    }

    /// Stops listening, ends every connection, and removes the Unix socket.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        let _ = self.stop.send(true);
        if let Some(rt) = self.runtime.take() {
            if tokio::runtime::Handle::try_current().is_ok() {
                rt.shutdown_background();
            } else {
                rt.shutdown_timeout(Duration::from_secs(2));
            }
        }
        if let Some(path) = self.unix_path.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Drop for GatewayHandle {
    fn drop(&mut self) {
        self.stop_now();
    }
}
