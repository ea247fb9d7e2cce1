//! The record of one trial as kept in `trial.json`: what was planned, how it was isolated,
//! exactly how the agent was launched, the captured end state, and the verdict.

use std::collections::BTreeMap;

use proctor_score::{EndState, TrialVerdict};
use proctor_suite::plan::PlannedTrial;
use serde::{Deserialize, Serialize};

/// Version of the trial record's layout.
pub const RECORD_VERSION: u32 = 1;

/// Everything recorded about one trial.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TrialRecord {
    /// [`RECORD_VERSION`].
    pub record_version: u32,
    /// The plan entry.
    pub plan: PlannedTrial,
    /// What the trial ran against.
    pub hashes: Hashes,
    /// How the trial was isolated: what was really in effect.
    pub isolation: serde_json::Value,
    /// How the agent was launched.
    pub launch: LaunchRecord,
    /// The settings the trial ran with.
    pub settings: serde_json::Value,
    /// Timings of each phase, in milliseconds.
    pub timings_ms: BTreeMap<String, f64>,
    /// The captured end state.
    pub end_state: EndState,
    /// The outcome label.
    pub outcome: String,
    /// Why this outcome.
    pub reason: String,
    /// Everything scoring decided, with evidence; absent when the harness failed before the
    /// agent could run.
    pub verdict: Option<TrialVerdict>,
    /// Tokens, requests and money, by source; never summed into one score.
    #[serde(default)]
    pub ledgers: crate::model::Ledgers,
    /// Services: readiness, guard and exit, as the sandbox reported them.
    pub services: serde_json::Value,
    /// Problems of the harness (not the agent) met during the trial.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub harness_notes: Vec<String>,
}

/// The hashes identifying what a trial ran against.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Hashes {
    /// BLAKE3 of the suite directory.
    pub suite: String,
    /// BLAKE3 of the fixture tree.
    pub fixture: String,
    /// The hidden mutation's file name and hash, when there is one.
    pub mutation: Option<proctor_suite::plan::ChosenMutation>,
    /// BLAKE3 of each holdout file, by path under `holdout/TASK_ID/`.
    pub holdout: BTreeMap<String, String>,
    /// BLAKE3 of each file laid in for the variant, by workspace path.
    pub variant_files: BTreeMap<String, String>,
}

/// The exact launch of the agent, secrets redacted.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LaunchRecord {
    /// The agent kind.
    pub agent: String,
    /// The model, when the variant names one.
    pub model: Option<String>,
    /// The prompt the agent received.
    pub prompt: String,
    /// The command line.
    pub argv: Vec<String>,
    /// The environment, with secret-looking values redacted.
    pub env: BTreeMap<String, String>,
    /// The allowed interface commands and the real programs behind them.
    pub allow: Vec<crate::allow::Allowed>,
}

/// Whether an environment variable's value must not be written down.
pub fn is_secret(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    ["KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH"]
        .iter()
        .any(|s| n.contains(s))
}

/// The environment as recorded: secrets replaced by `[redacted]`.
pub fn redact_env(env: &[(String, String)]) -> BTreeMap<String, String> {
    env.iter()
        .map(|(k, v)| {
            let v = if is_secret(k) {
                "[redacted]".to_string()
            } else {
                v.clone()
            };
            (k.clone(), v)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_and_the_rest_kept() {
        let env = vec![
            ("ANTHROPIC_API_KEY".to_string(), "sk-123".to_string()),
            ("GITHUB_TOKEN".to_string(), "ghp".to_string()),
            ("PATH".to_string(), "/bin".to_string()),
        ];
        let r = redact_env(&env);
        assert_eq!(r["ANTHROPIC_API_KEY"], "[redacted]");
        assert_eq!(r["GITHUB_TOKEN"], "[redacted]");
        assert_eq!(r["PATH"], "/bin");
    }
}
