//! The providers that need no configuration.

use std::collections::BTreeMap;

use super::Provider;
use crate::api::Api;

/// Requests in flight to one provider when its table does not say.
pub const DEFAULT_MAX_CONCURRENCY: usize = 16;

/// `anthropic`, `openai`, `google` and `openrouter`, by name.
pub(super) fn providers() -> BTreeMap<String, Provider> {
    [
        (
            "anthropic",
            Api::AnthropicMessages,
            "https://api.anthropic.com",
            "ANTHROPIC_API_KEY",
        ),
        (
            "openai",
            Api::OpenaiResponses,
            "https://api.openai.com/v1",
            "OPENAI_API_KEY",
        ),
        (
            "google",
            Api::Gemini,
            "https://generativelanguage.googleapis.com",
            "GEMINI_API_KEY",
        ),
        (
            "openrouter",
            Api::OpenaiChat,
            "https://openrouter.ai/api/v1",
            "OPENROUTER_API_KEY",
        ),
    ]
    .into_iter()
    .map(|(name, api, base_url, key_env)| {
        (
            name.to_string(),
            Provider {
                name: name.to_string(),
                api,
                base_url: base_url.to_string(),
                key_env: Some(key_env.to_string()),
                max_concurrency: DEFAULT_MAX_CONCURRENCY,
                ca_file: None,
                builtin: true,
            },
        )
    })
    .collect()
}
