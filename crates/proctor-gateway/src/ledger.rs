//! What the gateway records of a trial: one line per request (`model.jsonl`), and the trial's
//! wire ledger (usage, cost, the limit reached, faults).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::api::Api;
use crate::usage::Usage;

/// Why a request finally failed; a trial with one is `errored` with this kind, never failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// The provider kept answering 429.
    RateLimit,
    /// The provider refused the key (401 or 403).
    CredentialLoss,
    /// The provider failed: 5xx, unreachable, a malformed response or a broken stream.
    ProviderError,
    /// The provider did not answer (or stopped sending) in time.
    Timeout,
}

impl FaultKind {
    /// The kind's name in records (`rate-limit`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::RateLimit => "rate-limit",
            FaultKind::CredentialLoss => "credential-loss",
            FaultKind::ProviderError => "provider-error",
            FaultKind::Timeout => "timeout",
        }
    }

    /// The fault an upstream HTTP status means, if any (other 4xx are the request's own
    /// problem and pass through).
    pub fn from_status(status: u16) -> Option<FaultKind> {
        match status {
            429 => Some(FaultKind::RateLimit),
            401 | 403 => Some(FaultKind::CredentialLoss),
            500..=599 => Some(FaultKind::ProviderError),
            _ => None,
        }
    }
}

impl std::fmt::Display for FaultKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A per-trial limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    /// Tokens: input + output + cache reads + cache writes.
    Tokens,
    /// Cost in US dollars (known prices only).
    CostUsd,
    /// Requests forwarded upstream.
    Requests,
}

impl LimitKind {
    /// The limit's name in records (`tokens`, `cost_usd`, `requests`).
    pub fn as_str(self) -> &'static str {
        match self {
            LimitKind::Tokens => "tokens",
            LimitKind::CostUsd => "cost_usd",
            LimitKind::Requests => "requests",
        }
    }
}

/// A trial's limits, `limits = { tokens = N, cost_usd = X, requests = N }`. Once one is reached
/// the gateway refuses the trial's further requests; requests already under way finish.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Most tokens (input + output + cache reads + cache writes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// Most US dollars; only priced usage counts toward it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Most requests forwarded upstream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
}

/// One try of a request upstream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    /// The upstream's status, when it answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The fault this try met, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<FaultKind>,
    /// What went wrong, when the upstream did not answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How long the gateway waited before the next try, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff_ms: Option<u64>,
}

/// How a request's exchange ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ending {
    /// The whole response reached the agent.
    Complete,
    /// The gateway answered itself (refusal, unknown route, limit) without going upstream.
    Refused,
    /// The agent went away before the response ended.
    ClientClosed,
    /// The upstream's response body broke off.
    UpstreamBroke,
    /// The upstream stopped sending for longer than the idle timeout.
    IdleTimeout,
}

/// One request of a trial, as a line of `model.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// 1-based number of the request in its trial (names its body files).
    pub seq: u64,
    /// When the gateway received it (RFC 3339, UTC).
    pub time: String,
    /// The provider it went to.
    pub provider: String,
    /// The wire API it was written in.
    pub api: Api,
    /// The upstream path, relative to the provider's base URL.
    pub endpoint: String,
    /// The model sent upstream, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The model the agent asked for, when the gateway rewrote it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_model: Option<String>,
    /// Whether the response was an event stream.
    pub stream: bool,
    /// The status the agent got.
    pub status: u16,
    /// From receipt to the response's end, in milliseconds.
    pub latency_ms: f64,
    /// From receipt to the first byte of the response body, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttfb_ms: Option<f64>,
    /// Time spent waiting for the provider's concurrency limit, in milliseconds.
    pub queued_ms: f64,
    /// Usage read from the wire; `None` when the response carried none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Its cost at the model's price; `None` when unpriced or without usage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Tries after the first.
    pub retries: u32,
    /// Every try, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<Attempt>,
    /// Why the request finally failed, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<FaultKind>,
    /// The failure or refusal, in words (credentials removed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The limit that made the gateway refuse it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<LimitKind>,
    /// How the exchange ended.
    pub ending: Ending,
    /// The provider's request id (`request-id`, `x-request-id`), when it sent one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream_request_id: Option<String>,
    /// The kept request body, relative to the evidence folder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_body: Option<String>,
    /// The kept response body, relative to the evidence folder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_body: Option<String>,
}

/// The money side of a trial's ledger.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CostLedger {
    /// The trial's cost in US dollars; `None` when incomplete (never a zero that hides an
    /// unpriced model).
    pub usd: Option<f64>,
    /// The cost of the priced requests only.
    pub priced_usd: f64,
    /// Some request with usage had no price.
    pub incomplete: bool,
    /// The models that had no price.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unpriced_models: Vec<String>,
}

/// Everything the gateway recorded of one trial (usage `source = "wire"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialLedger {
    /// The granted provider.
    pub provider: String,
    /// The granted model.
    pub model: String,
    /// Every request, in order of `seq`.
    pub requests: Vec<RequestRecord>,
    /// Usage summed over the requests, read from the wire.
    pub usage: Usage,
    /// Requests forwarded upstream.
    pub requests_forwarded: u64,
    /// Requests the gateway refused (limits, unserved routes, bad bodies).
    pub requests_refused: u64,
    /// Successful generation requests whose response carried no usage (the token ledger is
    /// then incomplete).
    pub requests_without_usage: u64,
    /// The cost.
    pub cost: CostLedger,
    /// The first limit reached, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_reached: Option<LimitKind>,
    /// The fault of the first request that finally failed: the trial is `errored` with it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<FaultKind>,
    /// Every fault kind seen, in the order first seen.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<FaultKind>,
    /// Requests still under way when the trial was finished (their lines are missing).
    pub unfinished_requests: u64,
    /// Where `model.jsonl` and `model/NNNN.*.gz` were written, if anywhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence_dir: Option<PathBuf>,
    /// Evidence that could not be written (I/O errors), in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence_errors: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_have_their_record_names() {
        assert_eq!(
            serde_json::to_string(&FaultKind::RateLimit).unwrap(),
            "\"rate-limit\""
        );
        assert_eq!(
            serde_json::to_string(&FaultKind::CredentialLoss).unwrap(),
            "\"credential-loss\""
        );
        assert_eq!(
            serde_json::to_string(&LimitKind::CostUsd).unwrap(),
            "\"cost_usd\""
        );
        assert_eq!(LimitKind::Tokens.as_str(), "tokens");
        assert_eq!(FaultKind::from_status(429), Some(FaultKind::RateLimit));
        assert_eq!(FaultKind::from_status(403), Some(FaultKind::CredentialLoss));
        assert_eq!(FaultKind::from_status(529), Some(FaultKind::ProviderError));
        assert_eq!(FaultKind::from_status(400), None);
    }

    #[test]
    fn limits_read_from_toml() {
        let l: Limits = toml::from_str("tokens = 1000\ncost_usd = 0.5").unwrap();
        assert_eq!(
            l,
            Limits {
                tokens: Some(1000),
                cost_usd: Some(0.5),
                requests: None
            }
        );
        assert!(toml::from_str::<Limits>("token = 1").is_err());
    }
}
