//! The wire APIs the gateway speaks, and how a request path maps to one of them.

use serde::{Deserialize, Serialize};

/// A model provider's wire API: what a provider speaks upstream, and what a request to the
/// gateway is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Api {
    /// Anthropic Messages (`POST /v1/messages`), key in `x-api-key`.
    AnthropicMessages,
    /// OpenAI Responses (`POST /v1/responses`); a provider of this kind also serves Chat
    /// Completions under the same base URL. Key in `authorization: Bearer`.
    OpenaiResponses,
    /// OpenAI Chat Completions (`POST /v1/chat/completions`), key in `authorization: Bearer`.
    OpenaiChat,
    /// Google Gemini (`POST /v1beta/models/{model}:generateContent` and
    /// `:streamGenerateContent`), key in `x-goog-api-key`.
    Gemini,
}

impl Api {
    /// The name used in configuration files and records (`anthropic-messages`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Api::AnthropicMessages => "anthropic-messages",
            Api::OpenaiResponses => "openai-responses",
            Api::OpenaiChat => "openai-chat",
            Api::Gemini => "gemini",
        }
    }

    /// Whether a provider speaking `self` serves requests written in `wire`. An
    /// `openai-responses` provider serves both OpenAI APIs; every other kind serves only its own.
    pub fn serves(self, wire: Api) -> bool {
        match self {
            Api::OpenaiResponses => matches!(wire, Api::OpenaiResponses | Api::OpenaiChat),
            other => other == wire,
        }
    }
}

impl std::fmt::Display for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a request to the gateway goes: its wire API and the path to put after the provider's
/// base URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Route {
    /// The API the request is written in.
    pub api: Api,
    /// The upstream path relative to the provider's `base_url` (for Gemini it holds the model,
    /// see [`Route::gemini`]).
    pub suffix: String,
    /// Gemini only: the API version segment, the model in the path and the method.
    pub gemini: Option<GeminiPath>,
    /// Whether responses on this route carry token usage (generation, not token counting).
    pub generates: bool,
}

/// The parts of a Gemini model path `/{version}/models/{model}:{method}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GeminiPath {
    /// `v1beta`, `v1` or `v1alpha`.
    pub version: String,
    /// The model id in the path.
    pub model: String,
    /// `generateContent`, `streamGenerateContent`, `countTokens`, ...
    pub method: String,
}

impl GeminiPath {
    /// The upstream path for `model` (the path's own model or a rewritten one).
    pub fn path_for(&self, model: &str) -> String {
        format!("/{}/models/{}:{}", self.version, model, self.method)
    }

    /// Whether the method streams (`streamGenerateContent`).
    pub fn streams(&self) -> bool {
        self.method == "streamGenerateContent"
    }
}

impl Route {
    /// Maps a request path (without query) to a route, or `None` for a path the gateway does not
    /// serve. OpenAI paths are accepted with or without the `/v1` prefix.
    pub fn from_path(path: &str) -> Option<Route> {
        let simple = |api, suffix: &str, generates| {
            Some(Route {
                api,
                suffix: suffix.to_string(),
                gemini: None,
                generates,
            })
        };
        match path {
            "/v1/messages" => return simple(Api::AnthropicMessages, "/v1/messages", true),
            "/v1/messages/count_tokens" => {
                return simple(Api::AnthropicMessages, "/v1/messages/count_tokens", false)
            }
            "/v1/responses" | "/responses" => {
                return simple(Api::OpenaiResponses, "/responses", true)
            }
            "/v1/chat/completions" | "/chat/completions" => {
                return simple(Api::OpenaiChat, "/chat/completions", true)
            }
            _ => {}
        }
        let rest = path.strip_prefix('/')?;
        let (version, rest) = rest.split_once('/')?;
        if !matches!(version, "v1beta" | "v1" | "v1alpha") {
            return None;
        }
        let rest = rest.strip_prefix("models/")?;
        let (model, method) = rest.split_once(':')?;
        if !is_model_id(model) || !GEMINI_METHODS.contains(&method) {
            return None;
        }
        let gemini = GeminiPath {
            version: version.to_string(),
            model: model.to_string(),
            method: method.to_string(),
        };
        let generates = matches!(method, "generateContent" | "streamGenerateContent");
        Some(Route {
            api: Api::Gemini,
            suffix: gemini.path_for(model),
            gemini: Some(gemini),
            generates,
        })
    }
}

/// The Gemini methods the gateway forwards: generation, streamed generation and token counting
/// (what the Gemini CLI and the built-in providers send). Any other method, or anything after
/// one (`generateContent/../../admin`), is refused, never forwarded with the real key.
const GEMINI_METHODS: [&str; 3] = ["generateContent", "streamGenerateContent", "countTokens"];

/// Whether `model` can be a model id in a path: letters, digits, `.`, `-` and `_`, not a dot
/// segment. `/`, `%` (an encoded separator or dot), `:` and everything else are refused.
fn is_model_id(model: &str) -> bool {
    !model.is_empty()
        && model != "."
        && model != ".."
        && !model.starts_with('.')
        && model
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_names_round_trip_through_serde() {
        for api in [
            Api::AnthropicMessages,
            Api::OpenaiResponses,
            Api::OpenaiChat,
            Api::Gemini,
        ] {
            let json = serde_json::to_string(&api).unwrap();
            assert_eq!(json, format!("\"{}\"", api.as_str()));
            assert_eq!(serde_json::from_str::<Api>(&json).unwrap(), api);
        }
    }

    #[test]
    fn responses_providers_also_serve_chat() {
        assert!(Api::OpenaiResponses.serves(Api::OpenaiChat));
        assert!(!Api::OpenaiChat.serves(Api::OpenaiResponses));
        assert!(!Api::Gemini.serves(Api::AnthropicMessages));
        assert!(Api::AnthropicMessages.serves(Api::AnthropicMessages));
    }

    #[test]
    fn paths_map_to_routes() {
        let r = Route::from_path("/v1/messages").unwrap();
        assert_eq!(
            (r.api, r.suffix.as_str(), r.generates),
            (Api::AnthropicMessages, "/v1/messages", true)
        );
        let r = Route::from_path("/v1/messages/count_tokens").unwrap();
        assert!(!r.generates);
        assert_eq!(Route::from_path("/responses").unwrap().suffix, "/responses");
        assert_eq!(
            Route::from_path("/v1/responses").unwrap().api,
            Api::OpenaiResponses
        );
        assert_eq!(
            Route::from_path("/v1/chat/completions").unwrap().suffix,
            "/chat/completions"
        );
        let r = Route::from_path("/v1beta/models/gemini-2.5-pro:streamGenerateContent").unwrap();
        assert_eq!(r.api, Api::Gemini);
        let g = r.gemini.unwrap();
        assert!(g.streams());
        assert_eq!(g.model, "gemini-2.5-pro");
        assert_eq!(g.path_for("x"), "/v1beta/models/x:streamGenerateContent");
        assert!(
            !Route::from_path("/v1beta/models/m:countTokens")
                .unwrap()
                .generates
        );
        for bad in [
            "/",
            "/v1/models",
            "/v2/models/m:generateContent",
            "/v1beta/models/:x",
            "/v1/complete",
            // Anything but the API's own methods, and any separator or dot segment in the model
            // or after the method, plain or percent-encoded.
            "/v1beta/models/gem:generateContent/../../admin",
            "/v1beta/models/gem:generateContent/",
            "/v1beta/models/gem:deleteEverything",
            "/v1beta/models/..:generateContent",
            "/v1beta/models/gem%2F..%2Fadmin:generateContent",
            "/v1beta/models/%2E%2E:generateContent",
            "/v1beta/models/gem:generateContent%2F..%2Fadmin",
            "/v1beta/models/a/b:generateContent",
            "/v1beta/models/a:b:generateContent",
        ] {
            assert!(Route::from_path(bad).is_none(), "{bad}");
        }
    }
}
