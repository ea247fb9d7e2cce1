//! proctor's model gateway: one host-side HTTP proxy per run through which every trial's agent
//! reaches its model provider.
//!
//! - [`config`]: the user's providers (built-ins `anthropic`, `openai`, `google`, `openrouter`
//!   merged with `[providers.NAME]` tables), retries, timeouts and prices, read from
//!   `--config FILE`, `$PROCTOR_CONFIG` or `~/.config/proctor/config.toml`.
//! - [`keys`]: the real API keys, read from the environment before any trial.
//! - [`usage`]: token usage read from response bodies and SSE streams of each API.
//! - [`gateway`]: the server. [`Gateway::start`] gives a [`GatewayHandle`];
//!   [`GatewayHandle::register_trial`] gives a per-trial [`TrialToken`] the agent uses as its
//!   key; [`GatewayHandle::finish_trial`] gives the trial's [`TrialLedger`].
//!
//! - [`client`]: proctor's own requests to a model from the host (a model-played user's).
//! - [`relay`]: a trial's endpoint, inside its namespaces, joined to the gateway's socket.
//!
//! The real key is only ever written into upstream request headers: it is removed from every
//! recorded body, line and message, and agents never see it.

pub mod api;
pub mod client;
pub mod config;
pub mod evidence;
pub mod gateway;
pub mod keys;
pub mod ledger;
pub mod model_ref;
pub mod prices;
pub mod relay;
mod timefmt;
pub mod usage;

pub use api::Api;
pub use config::{
    Config, ConfigError, ConfigLocation, Provider, Registry, RetrySettings, Timeouts,
};
pub use gateway::{
    FinishError, Gateway, GatewayError, GatewayHandle, GatewayOptions, GrantError, InjectedFault,
    TrialGrant, TrialToken,
};
pub use keys::{KeyError, ProviderKeys, SecretKey};
pub use ledger::{FaultKind, LimitKind, Limits, RequestRecord, TrialLedger};
pub use model_ref::{ModelRef, ModelRefError};
pub use prices::Price;
pub use relay::{serve_relay, RelayError};
pub use usage::{Usage, UsageParser, UsageReading};
