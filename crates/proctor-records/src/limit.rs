//! The per-trial limit that stopped a trial, as its record, its summary and the index keep it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A limit a trial reached. Every one of them is the agent's doing: the trial stays graded.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// The gateway's token limit.
    Tokens,
    /// The gateway's cost limit, in US dollars.
    CostUsd,
    /// The gateway's request limit.
    Requests,
    /// The memory limit: the kernel killed a process of the trial for it.
    Memory,
    /// The process limit: a fork or clone was refused.
    Processes,
    /// The trial's disk (its tmpfs, or the captured changes' bound) was full.
    Disk,
    /// The agent's output, or the answer kept in the record, was cut.
    Output,
    /// The calls log refused calls past its bound.
    Calls,
    /// The changes, or a service's state or events, were more entries than a record keeps.
    Entries,
}

impl Limit {
    /// Every limit.
    pub const ALL: [Limit; 9] = [
        Limit::Tokens,
        Limit::CostUsd,
        Limit::Requests,
        Limit::Memory,
        Limit::Processes,
        Limit::Disk,
        Limit::Output,
        Limit::Calls,
        Limit::Entries,
    ];

    /// The word in records: `tokens`, `cost_usd`, `requests`, `memory`, `processes`, `disk`,
    /// `output`, `calls` or `entries`.
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::Tokens => "tokens",
            Limit::CostUsd => "cost_usd",
            Limit::Requests => "requests",
            Limit::Memory => "memory",
            Limit::Processes => "processes",
            Limit::Disk => "disk",
            Limit::Output => "output",
            Limit::Calls => "calls",
            Limit::Entries => "entries",
        }
    }
}

impl Limit {
    /// What reaching the limit did to the trial, in a sentence for `show`.
    pub fn meaning(self) -> &'static str {
        match self {
            Limit::Memory => "the kernel killed a process of the trial at its memory limit",
            Limit::Processes => "a process past the trial's process limit was refused",
            Limit::Disk => "the trial's disk was full: writes past it failed with ENOSPC",
            Limit::Output => "the agent's output was cut to its head and tail",
            Limit::Tokens | Limit::CostUsd | Limit::Requests => {
                "the model gateway refused later requests"
            }
            Limit::Calls => "the calls log refused later interface calls past its bound",
            Limit::Entries => {
                "the record lists the first of its changes or service events; all were graded, and the trial's files keep the rest"
            }
        }
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of reading a [`Limit`] from a word that names none.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not a limit (tokens, cost_usd, requests, memory, processes, disk, output, calls or entries)"
)]
pub struct ParseLimitError(pub String);

impl FromStr for Limit {
    type Err = ParseLimitError;

    fn from_str(s: &str) -> Result<Limit, ParseLimitError> {
        Limit::ALL
            .into_iter()
            .find(|l| l.as_str() == s)
            .ok_or_else(|| ParseLimitError(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_limit_is_written_as_its_word() {
        for l in Limit::ALL {
            assert_eq!(serde_json::to_value(l).unwrap(), l.as_str());
            assert_eq!(l.as_str().parse(), Ok(l));
        }
        assert!("wall".parse::<Limit>().is_err());
    }
}
