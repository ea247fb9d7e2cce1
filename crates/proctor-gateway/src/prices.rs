//! Model prices and the cost of a request's usage.

use serde::{Deserialize, Serialize};

use crate::usage::Usage;

/// A model's price in US dollars per million tokens of each category (the `[prices]` table of
/// the configuration, or a trial's grant).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Per million uncached input tokens.
    pub input: f64,
    /// Per million output tokens (reasoning tokens included).
    pub output: f64,
    /// Per million input tokens read from the prompt cache; the `input` price when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read: Option<f64>,
    /// Per million input tokens written to the prompt cache; the `input` price when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
}

impl Price {
    /// The cost in US dollars of `usage` at this price.
    pub fn cost_usd(&self, usage: &Usage) -> f64 {
        let per = |tokens: u64, price: f64| tokens as f64 * price / 1_000_000.0;
        per(usage.input, self.input)
            + per(usage.output, self.output)
            + per(usage.cache_read, self.cache_read.unwrap_or(self.input))
            + per(usage.cache_write, self.cache_write.unwrap_or(self.input))
    }

    /// Whether every figure is a finite number, zero or more.
    pub fn is_valid(&self) -> bool {
        [
            Some(self.input),
            Some(self.output),
            self.cache_read,
            self.cache_write,
        ]
        .into_iter()
        .flatten()
        .all(|p| p.is_finite() && p >= 0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_sums_each_category_at_its_price() {
        let price = Price {
            input: 3.0,
            output: 15.0,
            cache_read: Some(0.3),
            cache_write: None,
        };
        let usage = Usage {
            input: 1_000_000,
            output: 100_000,
            cache_read: 2_000_000,
            cache_write: 10_000,
            reasoning: 50_000,
        };
        let cost = price.cost_usd(&usage);
        assert!((cost - (3.0 + 1.5 + 0.6 + 0.03)).abs() < 1e-9, "{cost}");
        assert!(price.is_valid());
        assert!(!Price {
            input: -1.0,
            ..price
        }
        .is_valid());
        assert!(!Price {
            output: f64::NAN,
            ..price
        }
        .is_valid());
    }
}
