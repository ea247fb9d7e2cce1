//! The mock model's wire log (`wire.jsonl`): one [`WireLine`] per exchange, written by the
//! server and read, typed, by the runner (usage and injected faults), the trajectory export and
//! the viewer's transcript.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::auth::KeyCheck;
use crate::{FaultKind, Usage};

/// What the mock made of a request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireKind {
    /// A request that is not a generation (health, model lists, token counts).
    #[default]
    Meta,
    /// A route the mock does not serve, or a body it cannot read.
    Unknown,
    /// A request refused for its API key.
    AuthRejected,
    /// A request answered with an injected fault.
    Fault,
    /// A side request (a title, a summary): answered without using a turn of the script.
    Side,
    /// A main request: answered with the script's next turn.
    Main,
}

impl WireKind {
    /// The spelling in the log.
    pub fn as_str(self) -> &'static str {
        match self {
            WireKind::Meta => "meta",
            WireKind::Unknown => "unknown",
            WireKind::AuthRejected => "auth_rejected",
            WireKind::Fault => "fault",
            WireKind::Side => "side",
            WireKind::Main => "main",
        }
    }

    /// Whether the exchange asked the model for a generation (main or side).
    pub fn is_generation(self) -> bool {
        matches!(self, WireKind::Main | WireKind::Side)
    }
}

/// One exchange of the mock model, as a line of `wire.jsonl`: the request as it came (secret
/// headers and the required key redacted), the response as sent (an event stream as its events),
/// and what the mock made of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireLine {
    /// 1-based number of the exchange.
    pub seq: u64,
    /// Milliseconds from the server's start.
    pub at_ms: u64,
    /// The HTTP method.
    pub method: String,
    /// The request path.
    pub path: String,
    /// The query string (a `key=` parameter redacted).
    pub query: String,
    /// The request's headers (secret ones redacted).
    pub headers: BTreeMap<String, String>,
    /// The wire API the request was read as, when it was one.
    pub api: Option<String>,
    /// What the mock made of it.
    pub kind: WireKind,
    /// The script's turn that answered a main request.
    pub turn: Option<usize>,
    /// Whether the answer repeated the previous one (a retried request).
    pub replay: bool,
    /// Why a request was taken for a side request.
    pub side_reason: Option<String>,
    /// Whether the response was an event stream.
    pub stream: bool,
    /// The request body: its JSON, its text when it is not JSON, `null` when empty.
    pub request: Value,
    /// The status sent.
    pub status: u16,
    /// The response body: its JSON, its text, or `{"sse": [{"event", "data"}, ...]}`.
    pub response: Value,
    /// The usage the response reported.
    pub usage: Option<Usage>,
    /// What went wrong, in words.
    pub error: Option<String>,
    /// The fault injected, on a `fault` exchange.
    pub fault: Option<FaultKind>,
    /// The model route the request was on (`anthropic`, `responses`, `chat`, `gemini`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    /// The verdict on the request's API key, when the mock requires one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<KeyCheck>,
}

impl WireLine {
    /// The response's bodies: each event's data of an event stream, else the body itself (none
    /// when it was empty).
    pub fn response_bodies(&self) -> Vec<Value> {
        match &self.response {
            Value::Object(o) if o.contains_key("sse") => o["sse"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|e| e["data"].clone())
                .collect(),
            Value::Null => Vec::new(),
            other => vec![other.clone()],
        }
    }

    /// The sentence naming an injected fault, on a `fault` exchange.
    pub fn fault_sentence(&self) -> Option<String> {
        let fault = self.fault.filter(|_| self.kind == WireKind::Fault)?;
        Some(format!(
            "the model route {} answered with an injected {} fault",
            self.path,
            fault.as_str()
        ))
    }
}

/// Reads the wire log's lines from `text`: a line that is not a [`WireLine`] is an error naming
/// its number.
pub fn parse_lines(text: &str) -> Result<Vec<WireLine>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| serde_json::from_str(l).map_err(|e| format!("wire log line {}: {e}", i + 1)))
        .collect()
}
