//! Provider API keys, read from the environment before any trial runs, and kept out of every
//! message and record.

use std::collections::BTreeMap;
use std::fmt;

use crate::config::Config;

/// A real provider API key. It prints as `<redacted>` and is only ever written into upstream
/// request headers.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretKey(String);

impl SecretKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        SecretKey(key.into())
    }

    /// The key itself, for the upstream request and for redaction.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey(<redacted>)")
    }
}

/// The keys of the providers a run uses: `None` for a provider that needs no key.
#[derive(Debug, Clone, Default)]
pub struct ProviderKeys {
    keys: BTreeMap<String, Option<SecretKey>>,
}

/// A provider whose key variable is not set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingKey {
    /// The provider.
    pub provider: String,
    /// The environment variable that should hold its key.
    pub variable: String,
}

/// Why the keys could not be resolved. The run stops before any trial (exit 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Key variables that are unset or empty.
    #[error("{}", missing_message(.0))]
    Missing(Vec<MissingKey>),
    /// A provider that is neither built in nor configured.
    #[error("unknown provider `{provider}` (known: {known})")]
    UnknownProvider {
        /// The name asked for.
        provider: String,
        /// The known providers, comma-separated.
        known: String,
    },
}

fn missing_message(missing: &[MissingKey]) -> String {
    let list: Vec<String> = missing
        .iter()
        .map(|m| format!("{} (provider `{}`)", m.variable, m.provider))
        .collect();
    format!("no API key in the environment: set {}", list.join(", "))
}

impl ProviderKeys {
    /// Reads the keys of `providers` from the process environment.
    pub fn from_env<'a>(
        config: &Config,
        providers: impl IntoIterator<Item = &'a str>,
    ) -> Result<ProviderKeys, KeyError> {
        ProviderKeys::resolve(config, providers, |name| std::env::var(name).ok())
    }

    /// Reads the keys of `providers` with `lookup` (an environment); every provider whose
    /// variable is unset or empty is named in one [`KeyError::Missing`].
    pub fn resolve<'a>(
        config: &Config,
        providers: impl IntoIterator<Item = &'a str>,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<ProviderKeys, KeyError> {
        let mut keys = BTreeMap::new();
        let mut missing = Vec::new();
        for name in providers {
            let provider = config
                .provider(name)
                .ok_or_else(|| KeyError::UnknownProvider {
                    provider: name.to_string(),
                    known: config
                        .providers
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", "),
                })?;
            let key = match &provider.key_env {
                None => None,
                Some(var) => match lookup(var).filter(|v| !v.is_empty()) {
                    Some(v) => Some(SecretKey(v)),
                    None => {
                        missing.push(MissingKey {
                            provider: name.to_string(),
                            variable: var.clone(),
                        });
                        continue;
                    }
                },
            };
            keys.insert(name.to_string(), key);
        }
        if missing.is_empty() {
            Ok(ProviderKeys { keys })
        } else {
            Err(KeyError::Missing(missing))
        }
    }

    /// Adds one provider's key directly (tests, embedders that hold keys themselves).
    pub fn insert(&mut self, provider: impl Into<String>, key: Option<SecretKey>) {
        self.keys.insert(provider.into(), key);
    }

    /// Whether the provider's key was resolved (or it needs none).
    pub fn contains(&self, provider: &str) -> bool {
        self.keys.contains_key(provider)
    }

    /// The provider's key: `None` if it was not resolved, `Some(None)` if it needs none.
    pub(crate) fn get(&self, provider: &str) -> Option<Option<&SecretKey>> {
        self.keys.get(provider).map(Option::as_ref)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn a_missing_key_names_its_variable() {
        let config = Config::builtin();
        let err = ProviderKeys::resolve(
            &config,
            ["anthropic", "openai"],
            env(&[("OPENAI_API_KEY", "")]),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "no API key in the environment: set ANTHROPIC_API_KEY (provider `anthropic`), OPENAI_API_KEY (provider `openai`)"
        );
    }

    #[test]
    fn keys_resolve_and_never_print() {
        let config = Config::builtin();
        let keys = ProviderKeys::resolve(
            &config,
            ["anthropic"],
            env(&[("ANTHROPIC_API_KEY", "sk-real")]),
        )
        .unwrap();
        assert_eq!(keys.get("anthropic").unwrap().unwrap().expose(), "sk-real");
        assert!(!format!("{keys:?}").contains("sk-real"));
        assert!(keys.get("openai").is_none());
    }

    #[test]
    fn unknown_providers_are_refused() {
        let err = ProviderKeys::resolve(&Config::builtin(), ["nope"], env(&[])).unwrap_err();
        assert!(matches!(err, KeyError::UnknownProvider { .. }), "{err}");
    }
}
