//! The run's model gateway (docs/models.md): which variants reach a real model through it, the
//! check of their providers, APIs and keys before any trial, the gateway started for the run,
//! and each trial's seat in it (a token, a grant of one model with the trial's limits and
//! prices, and the ledger read back when the trial ends).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use proctor_agents::{MODEL_API_KEY_ENV, MODEL_BASE_URL_ENV, MODEL_ENV};
use proctor_gateway::{
    Api, Config, FaultKind, Gateway, GatewayError, GatewayHandle, GatewayOptions, InjectedFault,
    KeyError, LimitKind, Limits, ModelRef, ModelRefError, Price, ProviderKeys, TrialGrant,
    TrialLedger, TrialToken,
};
use proctor_score::ErrorKind;
use proctor_suite::model::{AgentKind, Task, Variant};
use proctor_suite::plan::Plan;
use proctor_suite::Suite;

use crate::model::{Ledgers, Usage};

/// Where the gateway's socket appears inside a trial's namespaces.
pub const SOCKET_INSIDE: &str = "/run/proctor/model.sock";
/// The service name of a trial's relay to the gateway.
pub const RELAY_SERVICE: &str = "__model_relay";

/// Why the run cannot reach its models. Each stops the run before any trial (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum ModelSetupError {
    /// A real agent CLI has neither a model nor scripted turns.
    #[error("variant `{variant}` ({agent}) names no model: set `model = \"PROVIDER/MODEL\"` (e.g. \"anthropic/claude-sonnet-4-5\"), pass `--model PROVIDER/MODEL`, or give it a `model_script`")]
    NoModel {
        /// The variant.
        variant: String,
        /// Its agent.
        agent: String,
    },
    /// The model is not a usable `PROVIDER/MODEL` reference.
    #[error("variant `{variant}`: {source}")]
    BadModel {
        /// The variant.
        variant: String,
        /// What is wrong with the reference.
        #[source]
        source: ModelRefError,
    },
    /// The agent CLI speaks a wire API the provider does not serve.
    #[error("variant `{variant}`: {agent} speaks {agent_api}, but provider `{provider}` serves {provider_api}: pick a model of a provider that serves {agent_api} (or configure one in [providers])")]
    ApiMismatch {
        /// The variant.
        variant: String,
        /// Its agent.
        agent: String,
        /// The API the agent speaks.
        agent_api: Api,
        /// The provider.
        provider: String,
        /// The API the provider serves.
        provider_api: Api,
    },
    /// A model-played user's model is not a usable `PROVIDER/MODEL` reference.
    #[error("task `{task}`: its user's {source}")]
    BadUserModel {
        /// The task.
        task: String,
        /// What is wrong with the reference.
        #[source]
        source: ModelRefError,
    },
    /// A provider's key is not in the environment.
    #[error(transparent)]
    Keys(#[from] KeyError),
    /// The gateway could not start.
    #[error("cannot start the model gateway: {0}")]
    Gateway(#[from] GatewayError),
    /// The gateway's socket folder could not be made.
    #[error("cannot make the model gateway's socket folder: {0}")]
    SocketDir(#[source] std::io::Error),
}

/// The wire API an agent CLI speaks with `model` (the provider's model id); `None` for agents
/// that speak any (a `command`) or none (a `script`).
pub fn agent_api(agent: AgentKind, model: &str) -> Option<Api> {
    match agent {
        AgentKind::ClaudeCode | AgentKind::Copilot => Some(Api::AnthropicMessages),
        AgentKind::Codex => Some(Api::OpenaiResponses),
        AgentKind::Gemini => Some(Api::Gemini),
        AgentKind::Aider => Some(Api::OpenaiChat),
        AgentKind::Opencode => Some(if proctor_agents::opencode::is_openai_model(model) {
            Api::OpenaiChat
        } else {
            Api::AnthropicMessages
        }),
        AgentKind::Command | AgentKind::Acp | AgentKind::Script | AgentKind::Human => None,
    }
}

/// Whether a variant reaches its model through the gateway (see [`variant_model`]).
pub fn uses_gateway(variant: &Variant) -> bool {
    let named_ref = variant.model.as_deref().is_some_and(|m| m.contains('/'));
    let any_program = matches!(variant.agent, AgentKind::Command | AgentKind::Acp);
    variant.takes_a_model() && (!any_program || named_ref)
}

/// The model a variant reaches through the gateway, if it does: every real agent CLI without a
/// `model_script` (which must then name `PROVIDER/MODEL`), and a `command` or `acp` agent whose
/// model has a `/` (a model without one is only a name for its `{model}`).
pub fn variant_model(
    variant: &Variant,
    config: &Config,
) -> Result<Option<ModelRef>, ModelSetupError> {
    if !uses_gateway(variant) {
        return Ok(None);
    }
    let id = variant.id.get_ref().clone();
    let model = match (&variant.agent, &variant.model) {
        (_, Some(m)) => m,
        (agent, None) => {
            return Err(ModelSetupError::NoModel {
                variant: id,
                agent: agent.as_str().into(),
            })
        }
    };
    let model = config
        .model(model)
        .map_err(|source| ModelSetupError::BadModel {
            variant: id.clone(),
            source,
        })?;
    if let (Some(agent_api), Some(provider)) = (
        agent_api(variant.agent, &model.model),
        config.provider(&model.provider),
    ) {
        if !provider.api.serves(agent_api) {
            return Err(ModelSetupError::ApiMismatch {
                variant: id,
                agent: variant.agent.as_str().into(),
                agent_api,
                provider: provider.name.clone(),
                provider_api: provider.api,
            });
        }
    }
    Ok(Some(model))
}

/// The variants of the planned trials, each once.
pub fn planned_variants<'s>(suite: &'s Suite, plan: &Plan) -> Vec<&'s Variant> {
    let planned: BTreeSet<&str> = plan.trials.iter().map(|t| t.variant.as_str()).collect();
    suite
        .file
        .variants
        .iter()
        .filter(|v| planned.contains(v.id.get_ref().as_str()))
        .collect()
}

/// The models the planned trials reach through the gateway, by variant id; empty when no
/// trial needs it.
pub fn planned_models(
    suite: &Suite,
    plan: &Plan,
    config: &Config,
) -> Result<BTreeMap<String, ModelRef>, ModelSetupError> {
    let mut out = BTreeMap::new();
    for v in planned_variants(suite, plan) {
        if let Some(m) = variant_model(v, config)? {
            out.insert(v.id.get_ref().clone(), m);
        }
    }
    Ok(out)
}

/// The models that play the users of the planned tasks through the gateway, by task id: a
/// `[tasks.user] model` without a `model_script` (which serves it offline).
pub fn planned_user_models(
    suite: &Suite,
    plan: &Plan,
    config: &Config,
) -> Result<BTreeMap<String, ModelRef>, ModelSetupError> {
    let planned: BTreeSet<&str> = plan.trials.iter().map(|t| t.task.as_str()).collect();
    let mut out = BTreeMap::new();
    for task in &suite.file.tasks {
        let id = task.id.get_ref();
        let Some(model) = task
            .user
            .as_ref()
            .filter(|u| u.model_script.is_none())
            .and_then(|u| u.model.as_ref())
        else {
            continue;
        };
        if !planned.contains(id.as_str()) {
            continue;
        }
        let model =
            config
                .model(model.get_ref())
                .map_err(|source| ModelSetupError::BadUserModel {
                    task: id.clone(),
                    source,
                })?;
        out.insert(id.clone(), model);
    }
    Ok(out)
}

/// The keys of the providers `models` use, from the environment: an unset variable is an error
/// that names it.
pub fn keys_for<'m>(
    config: &Config,
    models: impl IntoIterator<Item = &'m ModelRef>,
) -> Result<ProviderKeys, KeyError> {
    let providers: BTreeSet<&str> = models.into_iter().map(|m| m.provider.as_str()).collect();
    ProviderKeys::from_env(config, providers)
}

/// The gateway of one run: started before the first trial, stopped when dropped.
#[derive(Debug)]
pub struct RunGateway {
    handle: GatewayHandle,
    config: Config,
    models: BTreeMap<String, ModelRef>,
    /// The models that play the tasks' users, by task id.
    user_models: BTreeMap<String, ModelRef>,
    socket: PathBuf,
    /// The number of the next trial's own socket in the socket folder.
    next_seat: std::sync::atomic::AtomicU64,
    _socket_dir: tempfile::TempDir,
}

impl RunGateway {
    /// Starts the gateway for `models` (by variant id) and `user_models` (by task id) with
    /// `keys`, listening on a Unix socket in a fresh private folder under the system's temporary
    /// folder (a short path: Unix socket paths are limited to 108 bytes).
    pub fn start(
        config: Config,
        keys: &ProviderKeys,
        models: BTreeMap<String, ModelRef>,
        user_models: BTreeMap<String, ModelRef>,
    ) -> Result<RunGateway, ModelSetupError> {
        let dir = tempfile::Builder::new()
            .prefix("proctor-gw-")
            .tempdir()
            .map_err(ModelSetupError::SocketDir)?;
        let socket = dir.path().join("model.sock");
        let options = GatewayOptions {
            unix_socket: Some(socket.clone()),
            ..GatewayOptions::default()
        };
        let handle = Gateway::start(&config, keys, options)?;
        Ok(RunGateway {
            handle,
            config,
            models,
            user_models,
            socket,
            next_seat: std::sync::atomic::AtomicU64::new(0),
            _socket_dir: dir,
        })
    }

    /// The gateway's Unix socket on the host.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The model a variant reaches through this gateway, if any.
    pub fn model_of(&self, variant: &str) -> Option<&ModelRef> {
        self.models.get(variant)
    }

    /// The model that plays task `task`'s user through this gateway, if any.
    pub fn user_model_of(&self, task: &str) -> Option<&ModelRef> {
        self.user_models.get(task)
    }

    /// The API the provider of `model` speaks.
    pub fn provider_api(&self, model: &ModelRef) -> Option<Api> {
        self.config.provider(&model.provider).map(|p| p.api)
    }

    /// The prices a trial of `model` is charged at, by model id: the configuration's, with
    /// the suite's `[prices]` (keyed `PROVIDER/MODEL` or by the model id) over them.
    pub fn prices(&self, suite: &Suite, model: &ModelRef) -> BTreeMap<String, Price> {
        let mut prices = self.config.prices_for(&model.provider);
        for (key, p) in &suite.file.prices {
            let id = match key.split_once('/') {
                Some((provider, id)) if provider == model.provider => id,
                Some(_) => continue,
                None => key.as_str(),
            };
            prices.insert(
                id.to_string(),
                Price {
                    input: p.input,
                    output: p.output,
                    cache_read: p.cache_read,
                    cache_write: p.cache_write,
                },
            );
        }
        prices
    }

    /// Registers a trial of `task` on `model` with `limits`, writing its model evidence into
    /// `evidence_dir`, and gives its seat. The task's `route_faults` are injected by the gateway.
    /// The seat has a socket of its own in the gateway's folder, the only one its sandbox is
    /// given: its token works on it and nowhere else.
    pub fn seat(
        self: &Arc<Self>,
        suite: &Suite,
        task: &Task,
        model: &ModelRef,
        limits: &proctor_suite::model::Limits,
        evidence_dir: &Path,
    ) -> Result<Seat, String> {
        let grant = TrialGrant {
            provider: model.provider.clone(),
            model: model.model.clone(),
            limits: Limits {
                tokens: limits.tokens,
                cost_usd: limits.cost_usd,
                requests: limits.requests,
            },
            prices: self.prices(suite, model),
            evidence_dir: Some(evidence_dir.to_path_buf()),
            faults: injected_faults(task),
        };
        self.seat_for(grant, model)
    }

    /// A seat for a model-played user of `model`: no limits and no faults of the agent's, its
    /// model evidence written into `evidence_dir`, its ledger its own.
    pub fn user_seat(
        self: &Arc<Self>,
        suite: &Suite,
        model: &ModelRef,
        evidence_dir: &Path,
    ) -> Result<Seat, String> {
        let grant = TrialGrant {
            prices: self.prices(suite, model),
            evidence_dir: Some(evidence_dir.to_path_buf()),
            ..TrialGrant::new(model)
        };
        self.seat_for(grant, model)
    }

    /// Registers `grant` on a socket of its own and gives the seat.
    fn seat_for(self: &Arc<Self>, grant: TrialGrant, model: &ModelRef) -> Result<Seat, String> {
        let n = self
            .next_seat
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let socket = self.socket.with_file_name(format!("t{n}.sock"));
        let token = self
            .handle
            .register_trial_at(grant, &socket)
            .map_err(|e| e.to_string())?;
        Ok(Seat {
            gateway: Arc::clone(self),
            token: Some(token),
            model: model.clone(),
            socket,
        })
    }
}

/// A task's `route_faults` as the gateway injects them: route `anthropic`, `responses`, `chat`,
/// `gemini` or `*` (every API); fault `credential_loss`, `rate_limit` or `timeout`.
pub fn injected_faults(task: &Task) -> Vec<InjectedFault> {
    task.route_faults
        .iter()
        .filter_map(|(route, kind)| {
            let api = match route.as_str() {
                "anthropic" => Some(Api::AnthropicMessages),
                "responses" => Some(Api::OpenaiResponses),
                "chat" => Some(Api::OpenaiChat),
                "gemini" => Some(Api::Gemini),
                _ => None,
            };
            let kind = match kind.get_ref().as_str() {
                "credential_loss" => FaultKind::CredentialLoss,
                "rate_limit" => FaultKind::RateLimit,
                "timeout" => FaultKind::Timeout,
                _ => return None,
            };
            Some(InjectedFault { api, kind })
        })
        .collect()
}

/// A trial's place in the gateway: its token opens the gateway until [`Seat::finish`] (or the
/// seat is dropped, on any path that does not reach capture).
#[derive(Debug)]
pub struct Seat {
    gateway: Arc<RunGateway>,
    token: Option<TrialToken>,
    /// The model granted.
    pub model: ModelRef,
    /// The trial's own socket of the gateway, on the host.
    socket: PathBuf,
}

impl Seat {
    /// The trial's own socket of the gateway on the host: the only one its sandbox is given.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The token the agent presents as its API key.
    pub fn token(&self) -> &str {
        self.token.as_ref().map_or("", TrialToken::as_str)
    }

    /// The API of the granted model's provider.
    pub fn api(&self) -> Option<Api> {
        self.gateway.provider_api(&self.model)
    }

    /// Ends the trial in the gateway and gives its ledger.
    pub fn finish(&mut self) -> Option<TrialLedger> {
        let token = self.token.take()?;
        self.gateway.handle.finish_trial(&token).ok()
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// `proctor __model-relay ADDR SOCKET`: relays the trial's loopback `ADDR` to the gateway's
/// Unix socket until killed. Returns the exit status (2 for bad arguments, 1 when it cannot
/// start).
pub fn relay_main(args: &[String]) -> i32 {
    let (Some(addr), Some(socket)) = (args.first(), args.get(1)) else {
        eprintln!("usage: proctor __model-relay 127.0.0.1:PORT SOCKET");
        return 2;
    };
    let Ok(addr) = addr.parse() else {
        eprintln!("proctor __model-relay: `{addr}` is not an address (127.0.0.1:PORT)");
        return 2;
    };
    match proctor_gateway::serve_relay(addr, Path::new(socket), |bound| {
        eprintln!("proctor model relay: {bound} -> {socket}");
    }) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("proctor model relay: {e}");
            1
        }
    }
}

/// The error kind of a gateway fault.
pub fn error_kind(fault: FaultKind) -> ErrorKind {
    match fault {
        FaultKind::RateLimit => ErrorKind::RateLimit,
        FaultKind::CredentialLoss => ErrorKind::CredentialLoss,
        FaultKind::ProviderError => ErrorKind::ProviderError,
        FaultKind::Timeout => ErrorKind::Timeout,
    }
}

/// What a trial's ledger says, for its record: the wire usage, the money, the limit reached and
/// the fault that makes it `errored`.
#[derive(Debug, Clone, Default)]
pub struct LedgerReading {
    /// The wire usage (`source = "wire"`).
    pub usage: Usage,
    /// The cost in US dollars, when every request was priced.
    pub cost_usd: Option<f64>,
    /// Why the cost is incomplete.
    pub cost_missing: Vec<String>,
    /// The limit reached, if any.
    pub limit_reached: Option<LimitKind>,
    /// The fault that failed a request for good, with what the gateway said.
    pub fault: Option<(ErrorKind, String)>,
}

/// Reads a trial's ledger.
pub fn read_ledger(ledger: &TrialLedger) -> LedgerReading {
    let u = &ledger.usage;
    let usage = Usage {
        source: "wire".into(),
        input: Some(u.input),
        output: Some(u.output),
        cache_read: Some(u.cache_read),
        cache_write: Some(u.cache_write),
        requests: Some(ledger.requests_forwarded),
    };
    let cost_missing = ledger
        .cost
        .unpriced_models
        .iter()
        .map(|m| format!("`{}/{m}`", ledger.provider))
        .collect();
    let fault = ledger.fault.map(|f| {
        let failed = ledger.requests.iter().find(|r| r.fault == Some(f));
        let detail = failed
            .map(|r| {
                let what = r
                    .error
                    .clone()
                    .unwrap_or_else(|| format!("HTTP {}", r.status));
                format!(
                    "request {} to {} failed after {} retr{}: {what}",
                    r.seq,
                    ledger.provider,
                    r.retries,
                    if r.retries == 1 { "y" } else { "ies" }
                )
            })
            .unwrap_or_else(|| format!("a request to {} failed", ledger.provider));
        (error_kind(f), detail)
    });
    LedgerReading {
        usage,
        cost_usd: ledger.cost.usd,
        cost_missing,
        limit_reached: ledger.limit_reached,
        fault,
    }
}

/// The ledgers of a trial whose model traffic went through the gateway.
pub fn ledgers(reading: &LedgerReading, agent: Ledgers) -> Ledgers {
    Ledgers {
        wire: Some(reading.usage.clone()),
        cost_usd: reading.cost_usd,
        cost_missing: reading.cost_missing.clone(),
        ..agent
    }
}

/// The environment a `command` agent gets for the gateway: proctor's own variables, and those
/// of the official SDK of the provider's API, so an agent written with one works unchanged.
pub fn command_env(
    base: &str,
    token: &str,
    model: &str,
    api: Option<Api>,
) -> Vec<(String, String)> {
    let mut env = vec![
        (MODEL_BASE_URL_ENV.to_string(), base.to_string()),
        (MODEL_API_KEY_ENV.to_string(), token.to_string()),
        (MODEL_ENV.to_string(), model.to_string()),
    ];
    match api {
        Some(Api::AnthropicMessages) => {
            env.push(("ANTHROPIC_BASE_URL".into(), base.into()));
            env.push(("ANTHROPIC_API_KEY".into(), token.into()));
        }
        Some(Api::OpenaiResponses | Api::OpenaiChat) => {
            env.push(("OPENAI_BASE_URL".into(), format!("{base}/v1")));
            env.push(("OPENAI_API_KEY".into(), token.into()));
        }
        Some(Api::Gemini) => {
            env.push(("GOOGLE_GEMINI_BASE_URL".into(), base.into()));
            env.push(("GEMINI_API_KEY".into(), token.into()));
        }
        None => {}
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    fn variant(agent: &str, model: Option<&str>, script: bool) -> Variant {
        let mut text = format!("id = \"v\"\nagent = \"{agent}\"\n");
        if let Some(m) = model {
            text.push_str(&format!("model = \"{m}\"\n"));
        }
        if script {
            text.push_str("model_script = \"m.toml\"\n");
        }
        if agent == "command" {
            text.push_str("command = [\"true\"]\n");
        }
        toml::from_str(&text).unwrap()
    }

    #[test]
    fn which_variants_go_through_the_gateway() {
        let c = Config::builtin();
        let m = |a, m, s| variant_model(&variant(a, m, s), &c);
        let r = m("claude-code", Some("anthropic/claude-sonnet-4-5"), false)
            .unwrap()
            .unwrap();
        assert_eq!(
            (r.provider.as_str(), r.model.as_str()),
            ("anthropic", "claude-sonnet-4-5")
        );
        // Scripted turns, a command with a plain model name or none: no gateway.
        assert!(m("claude-code", Some("claude-haiku-4-5"), true)
            .unwrap()
            .is_none());
        assert!(m("command", Some("m1"), false).unwrap().is_none());
        assert!(m("command", None, false).unwrap().is_none());
        assert!(m("command", Some("openai/gpt-5"), false).unwrap().is_some());
        // A real CLI must name PROVIDER/MODEL.
        let e = m("codex", None, false).unwrap_err();
        assert!(e.to_string().contains("names no model"), "{e}");
        let e = m("codex", Some("gpt-5"), false).unwrap_err();
        assert!(e.to_string().contains("PROVIDER/MODEL"), "{e}");
        let e = m("codex", Some("nowhere/gpt-5"), false).unwrap_err();
        assert!(e.to_string().contains("unknown provider `nowhere`"), "{e}");
    }

    #[test]
    fn a_cli_whose_api_the_provider_does_not_serve_is_named_with_both() {
        let c = Config::builtin();
        let e =
            variant_model(&variant("claude-code", Some("openai/gpt-5"), false), &c).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("claude-code speaks anthropic-messages"),
            "{text}"
        );
        assert!(
            text.contains("provider `openai` serves openai-responses"),
            "{text}"
        );
        // OpenAI serves Chat Completions too: aider on openai is fine; codex on openrouter
        // (Chat Completions only) is not.
        assert!(variant_model(&variant("aider", Some("openai/gpt-5"), false), &c).is_ok());
        assert!(variant_model(
            &variant("codex", Some("openrouter/openai/gpt-5"), false),
            &c
        )
        .is_err());
    }

    #[test]
    fn a_command_agent_gets_the_sdk_variables_of_its_providers_api() {
        let get = |env: &[(String, String)], k: &str| {
            env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
        };
        let env = command_env("http://127.0.0.1:9", "tok", "gpt-5", Some(Api::OpenaiChat));
        assert_eq!(
            get(&env, "OPENAI_BASE_URL").as_deref(),
            Some("http://127.0.0.1:9/v1")
        );
        assert_eq!(get(&env, "OPENAI_API_KEY").as_deref(), Some("tok"));
        assert_eq!(
            get(&env, "PROCTOR_MODEL_BASE_URL").as_deref(),
            Some("http://127.0.0.1:9")
        );
        assert_eq!(get(&env, "PROCTOR_MODEL").as_deref(), Some("gpt-5"));
        assert!(get(&env, "ANTHROPIC_API_KEY").is_none());
        let env = command_env("http://h", "tok", "c", Some(Api::AnthropicMessages));
        assert_eq!(get(&env, "ANTHROPIC_BASE_URL").as_deref(), Some("http://h"));
        assert!(get(&env, "OPENAI_API_KEY").is_none());
    }

    #[test]
    fn route_faults_become_injected_faults_by_api() {
        let task: Task = toml::from_str(
            "id = \"t\"\nprompt = \"p\"\nroute_faults = { anthropic = \"rate_limit\", \"*\" = \"timeout\", chat = \"credential_loss\" }\n[success]\nall = []\n",
        )
        .unwrap();
        let mut got = injected_faults(&task);
        got.sort_by_key(|f| format!("{:?}", f.api));
        assert_eq!(
            got,
            [
                InjectedFault {
                    api: None,
                    kind: FaultKind::Timeout
                },
                InjectedFault {
                    api: Some(Api::AnthropicMessages),
                    kind: FaultKind::RateLimit
                },
                InjectedFault {
                    api: Some(Api::OpenaiChat),
                    kind: FaultKind::CredentialLoss
                },
            ]
        );
    }

    #[test]
    fn suite_prices_go_over_the_configurations_by_model_id() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("suite.toml"),
            "schema_version = 1\nid = \"s\"\n[prices.\"anthropic/a\"]\ninput = 1.0\noutput = 2.0\n[prices.b]\ninput = 3.0\noutput = 4.0\n[prices.\"openai/c\"]\ninput = 5.0\noutput = 6.0\n",
        )
        .unwrap();
        let suite = Suite::parse(dir.path()).unwrap();
        let config = Config::parse(
            "[prices.\"anthropic/a\"]\ninput = 9.0\noutput = 9.0\n[prices.\"anthropic/d\"]\ninput = 7.0\noutput = 8.0\n",
            Path::new("config.toml"),
        )
        .unwrap();
        let gw = RunGateway::start(
            config,
            &ProviderKeys::default(),
            BTreeMap::new(),
            BTreeMap::new(),
        )
        .unwrap();
        let p = gw.prices(&suite, &"anthropic/a".parse().unwrap());
        assert_eq!(p["a"].input, 1.0, "the suite's price wins");
        assert_eq!(p["b"].output, 4.0);
        assert_eq!(p["d"].input, 7.0, "the configuration's stays");
        assert!(
            !p.contains_key("c"),
            "another provider's price is not taken"
        );
    }
}
