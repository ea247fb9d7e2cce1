//! How the agent was launched, as the trial record keeps it: its command line and environment
//! (secrets redacted), the allowed commands, the image, the resource hints and the limits.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// One allowed command, resolved.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct Allowed {
    /// The name the agent types (the file name).
    pub name: String,
    /// The real program on the host.
    pub real: PathBuf,
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
    pub allow: Vec<Allowed>,
    /// The image the trial's root was, if not the host's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageRecord>,
    /// The resources the task's environment asks for, and whether they were enforced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourcesRecord>,
    /// The trial's resource limits and how each was enforced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<LimitsRecord>,
}

/// A trial's resource limits as they were in force, and how each was enforced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LimitsRecord {
    /// Memory of the trial's processes together, MiB.
    pub memory_mb: u64,
    /// Processes at once.
    pub processes: u64,
    /// What the trial may write, MiB.
    pub disk_mb: u64,
    /// The agent's stdout and stderr kept, each, MiB.
    pub output_mb: u64,
    /// What enforced each limit, by its key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub enforced_by: BTreeMap<String, String>,
    /// Why a limit was not enforced, by its key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub not_enforced: BTreeMap<String, String>,
}

/// The resource hints of a trial's task (`cpus`, `memory_mb`, `storage_mb`) as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ResourcesRecord {
    /// CPUs asked for.
    pub cpus: Option<f64>,
    /// Memory asked for, MiB.
    pub memory_mb: Option<u64>,
    /// Disk space asked for, MiB.
    pub storage_mb: Option<u64>,
    /// Whether proctor held the trial to them.
    pub enforced: bool,
    /// Why not, when they were not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_enforced: Option<String>,
}

impl ResourcesRecord {
    /// The record of `hints`, or `None` when the task gives none. A hint is not a limit (what a
    /// trial is held to is its `limits`): each is recorded as not enforced, with that reason.
    pub fn of(hints: proctor_suite::ResourceHints) -> Option<ResourcesRecord> {
        (!hints.is_empty()).then(|| ResourcesRecord {
            cpus: hints.cpus,
            memory_mb: hints.memory_mb,
            storage_mb: hints.storage_mb,
            enforced: false,
            not_enforced: Some(
                "a resource hint is recorded, not enforced: a trial is held to its `limits` (memory_mb, processes, disk_mb, output_mb), which a hint does not set"
                    .to_string(),
            ),
        })
    }
}

/// The image a trial ran in (the same record `run.json` lists each task's image with).
pub use proctor_records::run::ImageRecord;

impl LaunchRecord {
    /// The record with every occurrence of `secret` (a trial's gateway token) in its command
    /// line and environment replaced by `[redacted]`.
    pub fn without(mut self, secret: &str) -> LaunchRecord {
        if secret.is_empty() {
            return self;
        }
        let scrub = |s: &mut String| {
            if s.contains(secret) {
                *s = s.replace(secret, "[redacted]");
            }
        };
        self.argv.iter_mut().for_each(scrub);
        self.env.values_mut().for_each(scrub);
        self
    }
}
