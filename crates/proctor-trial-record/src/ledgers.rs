//! The cost ledgers of a trial: tokens, requests and money, by source, never summed into one
//! score.

use serde::{Deserialize, Serialize};

/// Tokens and requests of one trial, by category, from one source.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Usage {
    /// Where the numbers come from: `wire` (read by proctor from the model traffic) or
    /// `agent-reported` (what the CLI said).
    pub source: String,
    /// Uncached input tokens.
    pub input: Option<u64>,
    /// Output tokens.
    pub output: Option<u64>,
    /// Input tokens read from the prompt cache.
    pub cache_read: Option<u64>,
    /// Input tokens written to the prompt cache.
    pub cache_write: Option<u64>,
    /// Model requests.
    pub requests: Option<u64>,
}

/// The cost ledgers of a trial: kept apart, never summed into one score.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Ledgers {
    /// Usage read from the wire.
    pub wire: Option<Usage>,
    /// Usage the agent CLI reported.
    pub agent_reported: Option<Usage>,
    /// Money, when every price was known: US dollars.
    pub cost_usd: Option<f64>,
    /// The models without a price (`` `anthropic/claude-haiku-4-5` ``), when the cost is
    /// incomplete.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cost_missing: Vec<String>,
    /// The cost the CLI itself reported (its list-price estimate), for comparison.
    pub agent_reported_cost_usd: Option<f64>,
}
