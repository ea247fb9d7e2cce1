//! Errors the gateway itself answers with, each in the shape of the API the agent speaks:
//! Anthropic `{"type":"error","error":{"type","message"}}`, OpenAI
//! `{"error":{"message","type","param","code"}}`, Gemini `{"error":{"code","message","status"}}`.

use bytes::Bytes;
use http::StatusCode;
use serde_json::json;

use crate::api::Api;
use crate::ledger::{FaultKind, LimitKind};

/// Why the gateway answers a request itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No token, or one that belongs to no running trial.
    UnknownToken,
    /// A path the gateway does not serve, or one the trial's provider does not speak.
    NotFound,
    /// Not a `POST`.
    MethodNotAllowed,
    /// The request body could not be read.
    BadRequest,
    /// The request body is larger than the gateway takes.
    TooLarge,
    /// The gateway had no room for the request's body in time (its byte budgets are full):
    /// answered as the provider answers when overloaded, which clients retry.
    Overloaded,
    /// A trial limit is reached. Anthropic: 400 `invalid_request_error` (like an exhausted
    /// credit balance, which its clients do not retry); OpenAI: 429 `insufficient_quota`;
    /// Gemini: 429 `RESOURCE_EXHAUSTED`.
    Limit(LimitKind),
    /// The upstream did not answer in time.
    Timeout,
    /// The upstream could not be reached.
    Unreachable,
    /// An injected fault, answered as the provider would.
    Injected(FaultKind),
}

impl Refusal {
    /// The HTTP status for an agent speaking `api`.
    pub fn status(self, api: Api) -> StatusCode {
        match self {
            Refusal::UnknownToken => StatusCode::UNAUTHORIZED,
            Refusal::NotFound => StatusCode::NOT_FOUND,
            Refusal::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Refusal::BadRequest => StatusCode::BAD_REQUEST,
            Refusal::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            // Anthropic's own "overloaded" status.
            Refusal::Overloaded if api == Api::AnthropicMessages => {
                StatusCode::from_u16(529).unwrap_or(StatusCode::SERVICE_UNAVAILABLE)
            }
            Refusal::Overloaded => StatusCode::SERVICE_UNAVAILABLE,
            Refusal::Limit(_) if api == Api::AnthropicMessages => StatusCode::BAD_REQUEST,
            Refusal::Limit(_) => StatusCode::TOO_MANY_REQUESTS,
            Refusal::Timeout => StatusCode::GATEWAY_TIMEOUT,
            Refusal::Unreachable => StatusCode::BAD_GATEWAY,
            Refusal::Injected(FaultKind::RateLimit) => StatusCode::TOO_MANY_REQUESTS,
            Refusal::Injected(FaultKind::CredentialLoss) => StatusCode::UNAUTHORIZED,
            Refusal::Injected(FaultKind::Timeout) => StatusCode::GATEWAY_TIMEOUT,
            Refusal::Injected(FaultKind::ProviderError) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn anthropic_type(self) -> &'static str {
        match self {
            Refusal::UnknownToken => "authentication_error",
            Refusal::NotFound => "not_found_error",
            Refusal::MethodNotAllowed | Refusal::BadRequest | Refusal::Limit(_) => {
                "invalid_request_error"
            }
            Refusal::TooLarge => "request_too_large",
            Refusal::Overloaded => "overloaded_error",
            Refusal::Timeout => "timeout_error",
            Refusal::Unreachable => "api_error",
            Refusal::Injected(FaultKind::RateLimit) => "rate_limit_error",
            Refusal::Injected(FaultKind::CredentialLoss) => "authentication_error",
            Refusal::Injected(FaultKind::Timeout) => "timeout_error",
            Refusal::Injected(FaultKind::ProviderError) => "api_error",
        }
    }

    fn openai_type_code(self) -> (&'static str, Option<&'static str>) {
        match self {
            Refusal::UnknownToken => ("invalid_request_error", Some("invalid_api_key")),
            Refusal::NotFound => ("invalid_request_error", Some("unknown_url")),
            Refusal::MethodNotAllowed => ("invalid_request_error", Some("method_not_allowed")),
            Refusal::BadRequest => ("invalid_request_error", None),
            Refusal::TooLarge => ("invalid_request_error", Some("request_too_large")),
            Refusal::Overloaded => ("server_error", Some("overloaded")),
            Refusal::Limit(_) => ("insufficient_quota", Some("insufficient_quota")),
            Refusal::Timeout => ("server_error", Some("timeout")),
            Refusal::Unreachable => ("server_error", Some("upstream_unreachable")),
            Refusal::Injected(FaultKind::RateLimit) => ("requests", Some("rate_limit_exceeded")),
            Refusal::Injected(FaultKind::CredentialLoss) => {
                ("invalid_request_error", Some("invalid_api_key"))
            }
            Refusal::Injected(FaultKind::Timeout) => ("server_error", Some("timeout")),
            Refusal::Injected(FaultKind::ProviderError) => ("server_error", None),
        }
    }

    fn gemini_status(self) -> &'static str {
        match self {
            Refusal::UnknownToken => "UNAUTHENTICATED",
            Refusal::NotFound => "NOT_FOUND",
            Refusal::MethodNotAllowed | Refusal::BadRequest | Refusal::TooLarge => {
                "INVALID_ARGUMENT"
            }
            Refusal::Limit(_) => "RESOURCE_EXHAUSTED",
            Refusal::Timeout => "DEADLINE_EXCEEDED",
            Refusal::Unreachable | Refusal::Overloaded => "UNAVAILABLE",
            Refusal::Injected(FaultKind::RateLimit) => "RESOURCE_EXHAUSTED",
            Refusal::Injected(FaultKind::CredentialLoss) => "UNAUTHENTICATED",
            Refusal::Injected(FaultKind::Timeout) => "DEADLINE_EXCEEDED",
            Refusal::Injected(FaultKind::ProviderError) => "INTERNAL",
        }
    }

    /// The status and JSON body for an agent speaking `api`.
    pub fn body(self, api: Api, message: &str) -> (StatusCode, Bytes) {
        let status = self.status(api);
        let value = match api {
            Api::AnthropicMessages => json!({
                "type": "error",
                "error": { "type": self.anthropic_type(), "message": message },
            }),
            Api::OpenaiResponses | Api::OpenaiChat => {
                let (kind, code) = self.openai_type_code();
                json!({
                    "error": { "message": message, "type": kind, "param": null, "code": code },
                })
            }
            Api::Gemini => json!({
                "error": {
                    "code": status.as_u16(),
                    "message": message,
                    "status": self.gemini_status(),
                },
            }),
        };
        (status, Bytes::from(value.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn parse(api: Api, r: Refusal) -> (u16, Value) {
        let (status, body) = r.body(api, "nope");
        (status.as_u16(), serde_json::from_slice(&body).unwrap())
    }

    #[test]
    fn errors_take_each_api_shape() {
        let (s, v) = parse(Api::AnthropicMessages, Refusal::UnknownToken);
        assert_eq!(s, 401);
        assert_eq!(v["type"], "error");
        assert_eq!(v["error"]["type"], "authentication_error");
        assert_eq!(v["error"]["message"], "nope");
        let (s, v) = parse(Api::OpenaiChat, Refusal::Limit(LimitKind::Tokens));
        assert_eq!(s, 429);
        assert_eq!(v["error"]["code"], "insufficient_quota");
        assert!(v["error"]["param"].is_null());
        let (s, v) = parse(Api::Gemini, Refusal::Timeout);
        assert_eq!(s, 504);
        assert_eq!(v["error"]["code"], 504);
        assert_eq!(v["error"]["status"], "DEADLINE_EXCEEDED");
        let (s, v) = parse(
            Api::OpenaiResponses,
            Refusal::Injected(FaultKind::RateLimit),
        );
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (429, Some("rate_limit_exceeded"))
        );
        let (s, v) = parse(
            Api::AnthropicMessages,
            Refusal::Injected(FaultKind::CredentialLoss),
        );
        assert_eq!(
            (s, v["error"]["type"].as_str()),
            (401, Some("authentication_error"))
        );
        let (s, v) = parse(Api::AnthropicMessages, Refusal::Limit(LimitKind::CostUsd));
        assert_eq!(
            (s, v["error"]["type"].as_str()),
            (400, Some("invalid_request_error"))
        );
    }
}
