//! The user's gateway configuration: providers (built-in and configured), retry and timeout
//! settings, and model prices. Providers come from the user's configuration, never from a suite.
//!
//! ```toml
//! [providers.local-vllm]
//! api = "openai-chat"            # anthropic-messages | openai-responses | openai-chat | gemini
//! base_url = "http://10.0.0.5:8000/v1"
//! key_env = "VLLM_KEY"           # optional for local servers
//! max_concurrency = 16           # requests in flight to this provider, across trials
//! ca_file = "certs/ca.pem"       # optional extra trust root, relative to this file
//!
//! [retries]
//! attempts = 5                   # tries per request, the first included
//! base_delay_ms = 500
//! max_delay_ms = 30000
//!
//! [timeouts]
//! connect_ms = 10000
//! first_byte_ms = 600000
//! idle_ms = 300000
//!
//! [browser]
//! path = "/usr/bin/chromium"     # visual checks' headless browser; default: Chromium on PATH
//!
//! [prices."anthropic/claude-sonnet-4-5"]
//! input = 3.0
//! output = 15.0
//! cache_read = 0.3
//! cache_write = 3.75
//! ```

mod builtin;
mod error;
mod location;
mod parse;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::api::Api;
use crate::model_ref::{ModelRef, ModelRefError};
use crate::prices::Price;

pub use builtin::DEFAULT_MAX_CONCURRENCY;
pub use error::ConfigError;
pub use location::{ConfigLocation, CONFIG_ENV};

/// The resolved configuration: built-in providers merged with the user's, and the settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The file this was read from; `None` for built-ins only.
    pub source: Option<PathBuf>,
    /// Every provider by name, built-in ones included.
    pub providers: BTreeMap<String, Provider>,
    /// How upstream faults are retried.
    pub retries: RetrySettings,
    /// How long the gateway waits on an upstream.
    pub timeouts: Timeouts,
    /// Prices by model reference (`PROVIDER/MODEL`).
    pub prices: BTreeMap<ModelRef, Price>,
    /// How image registries are reached, by registry (`HOST[:PORT]`, as written in image
    /// references): `[registries."localhost:5000"]`.
    pub registries: BTreeMap<String, Registry>,
    /// The headless browser of `visual` checks (`[browser] path`), resolved against the file's
    /// folder; `None`: the first Chromium on `PATH`.
    pub browser: Option<PathBuf>,
}

/// One `[registries."HOST[:PORT]"]` table: how proctor reaches an image registry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Registry {
    /// Reach it over plain HTTP instead of HTTPS (a registry on your own machine or network).
    pub insecure: bool,
    /// Mirrors (`HOST[:PORT]`) tried in order before it.
    pub mirrors: Vec<String>,
}

/// One model provider the gateway can forward to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provider {
    /// The provider's name (`anthropic`, `local-vllm`, ...).
    pub name: String,
    /// The wire API it speaks.
    pub api: Api,
    /// The URL the route's path is appended to (`https://api.openai.com/v1`).
    pub base_url: String,
    /// The environment variable holding its API key; `None` for a server that needs none.
    pub key_env: Option<String>,
    /// At most this many requests in flight to it at once, across trials.
    pub max_concurrency: usize,
    /// A PEM file of extra trust roots for its TLS connections.
    pub ca_file: Option<PathBuf>,
    /// Whether it is one of the built-in providers (possibly with user overrides).
    pub builtin: bool,
}

/// How upstream faults (429, 5xx, connection errors, timeouts) are retried: exponential backoff
/// with jitter from `base_delay_ms`, at most `max_delay_ms` per wait, honouring `retry-after`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetrySettings {
    /// Tries per request, the first included (1 means no retry).
    pub attempts: u32,
    /// The first backoff, in milliseconds; each later one doubles.
    pub base_delay_ms: u64,
    /// The longest single wait, in milliseconds (a longer `retry-after` is cut to this).
    pub max_delay_ms: u64,
}

impl Default for RetrySettings {
    fn default() -> Self {
        RetrySettings {
            attempts: 5,
            base_delay_ms: 500,
            max_delay_ms: 30_000,
        }
    }
}

/// How long the gateway waits on an upstream, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Timeouts {
    /// To open a connection (TCP and TLS).
    pub connect_ms: u64,
    /// From sending a request to its response headers.
    pub first_byte_ms: u64,
    /// Between two pieces of a response body.
    pub idle_ms: u64,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect_ms: 10_000,
            first_byte_ms: 600_000,
            idle_ms: 300_000,
        }
    }
}

impl Config {
    /// The built-in providers only, with default settings and no prices.
    pub fn builtin() -> Config {
        Config {
            source: None,
            providers: builtin::providers(),
            retries: RetrySettings::default(),
            timeouts: Timeouts::default(),
            prices: BTreeMap::new(),
            registries: BTreeMap::new(),
            browser: None,
        }
    }

    /// Reads the configuration from where `location` points; a missing default file means
    /// built-ins only, a missing explicit or `$PROCTOR_CONFIG` file is an error.
    pub fn load(location: &ConfigLocation) -> Result<Config, ConfigError> {
        location.load()
    }

    /// Parses configuration text; `path` names it in errors and anchors relative `ca_file`s.
    pub fn parse(text: &str, path: &std::path::Path) -> Result<Config, ConfigError> {
        parse::parse(text, path)
    }

    /// The provider of that name.
    pub fn provider(&self, name: &str) -> Option<&Provider> {
        self.providers.get(name)
    }

    /// Reads `PROVIDER/MODEL` and checks that the provider is known.
    pub fn model(&self, reference: &str) -> Result<ModelRef, ModelRefError> {
        let model: ModelRef = reference.parse()?;
        if !self.providers.contains_key(&model.provider) {
            return Err(ModelRefError::UnknownProvider {
                reference: reference.to_string(),
                provider: model.provider,
                known: self
                    .providers
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        Ok(model)
    }

    /// The price of one model, if configured.
    pub fn price(&self, model: &ModelRef) -> Option<Price> {
        self.prices.get(model).copied()
    }

    /// Every configured price of one provider's models, by model id (what a trial grant takes).
    pub fn prices_for(&self, provider: &str) -> BTreeMap<String, Price> {
        self.prices
            .iter()
            .filter(|(m, _)| m.provider == provider)
            .map(|(m, p)| (m.model.clone(), *p))
            .collect()
    }
}

#[cfg(test)]
mod tests;
