//! Model references: `PROVIDER/MODEL`, as a variant names its model.

use std::fmt;
use std::str::FromStr;

/// A model named through its provider, `PROVIDER/MODEL`. The provider is everything before the
/// first `/`; the model id is the rest and may itself contain `/`
/// (`openrouter/anthropic/claude-sonnet-4.5` is model `anthropic/claude-sonnet-4.5` of provider
/// `openrouter`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ModelRef {
    /// The provider's name, a key of the configuration's providers.
    pub provider: String,
    /// The model id as the provider knows it.
    pub model: String,
}

/// Why a model reference could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelRefError {
    /// No `/` separates a provider from a model.
    #[error("model `{0}` names no provider: write it as PROVIDER/MODEL, e.g. anthropic/claude-sonnet-4-5")]
    NoProvider(String),
    /// The provider or the model part is empty, or has white space.
    #[error(
        "model `{0}` is not of the form PROVIDER/MODEL (both parts non-empty, without spaces)"
    )]
    Malformed(String),
    /// The provider is neither built in nor configured.
    #[error("model `{reference}` names an unknown provider `{provider}` (known: {known})")]
    UnknownProvider {
        /// The reference as written.
        reference: String,
        /// Its provider part.
        provider: String,
        /// The providers that are known, comma-separated.
        known: String,
    },
}

impl FromStr for ModelRef {
    type Err = ModelRefError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (provider, model) = s
            .split_once('/')
            .ok_or_else(|| ModelRefError::NoProvider(s.to_string()))?;
        let bad = |part: &str| part.is_empty() || part.chars().any(char::is_whitespace);
        if bad(provider) || bad(model) {
            return Err(ModelRefError::Malformed(s.to_string()));
        }
        Ok(ModelRef {
            provider: provider.to_string(),
            model: model.to_string(),
        })
    }
}

impl fmt::Display for ModelRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.provider, self.model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_at_the_first_slash() {
        let r: ModelRef = "openrouter/anthropic/claude-sonnet-4.5".parse().unwrap();
        assert_eq!(r.provider, "openrouter");
        assert_eq!(r.model, "anthropic/claude-sonnet-4.5");
        assert_eq!(r.to_string(), "openrouter/anthropic/claude-sonnet-4.5");
        let r: ModelRef = "anthropic/claude-sonnet-4-5".parse().unwrap();
        assert_eq!(
            (r.provider.as_str(), r.model.as_str()),
            ("anthropic", "claude-sonnet-4-5")
        );
    }

    #[test]
    fn rejects_references_without_both_parts() {
        assert_eq!(
            "claude".parse::<ModelRef>(),
            Err(ModelRefError::NoProvider("claude".into()))
        );
        for bad in ["/m", "p/", "p /m", "p/m x", ""] {
            assert!(bad.parse::<ModelRef>().is_err(), "{bad:?}");
        }
    }
}
