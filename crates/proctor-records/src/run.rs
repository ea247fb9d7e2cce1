//! What `run.json` records of how a run was made, typed: its trial mode, the isolation it had,
//! and its sections (`extra` on disk): the plan options `--resume` needs, the images its tasks
//! ran in, and the Slurm jobs that ran it. Each is written as it always was (the same keys and
//! spellings), so every `run.json` written before reads.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What a run was, as `run.json`'s `trial_mode` says: a run planned in one of the suite's trial
/// modes, `validate --oracle`'s check, or a person's sitting.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum RunMode {
    /// Planned with the suite's `development_trials`.
    #[default]
    Dev,
    /// Planned with the suite's `release_trials`.
    Release,
    /// `validate --oracle`: every task with its oracle and with the null agent.
    Oracle,
    /// `proctor sit`: one person at one task.
    Sitting,
}

impl RunMode {
    /// The spelling in `run.json`: `dev`, `release`, `oracle` or `sitting`.
    pub fn as_str(self) -> &'static str {
        match self {
            RunMode::Dev => "dev",
            RunMode::Release => "release",
            RunMode::Oracle => "oracle",
            RunMode::Sitting => "sitting",
        }
    }
}

impl From<TrialMode> for RunMode {
    fn from(mode: TrialMode) -> RunMode {
        match mode {
            TrialMode::Dev => RunMode::Dev,
            TrialMode::Release => RunMode::Release,
        }
    }
}

impl fmt::Display for RunMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The trial mode a run's plan was made in.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum TrialMode {
    /// The suite's `development_trials`.
    #[default]
    Dev,
    /// The suite's `release_trials`; promotion gates apply at the end.
    Release,
}

impl TrialMode {
    /// The spelling in `run.json` and on the command line: `dev` or `release`.
    pub fn as_str(self) -> &'static str {
        match self {
            TrialMode::Dev => "dev",
            TrialMode::Release => "release",
        }
    }
}

impl fmt::Display for TrialMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The isolation a run's trials actually had, never a claim.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Isolation {
    /// An overlay workspace in user, mount, PID, network, IPC and UTS namespaces.
    Overlay,
    /// A copy of the fixture diffed against a manifest, in namespaces.
    #[default]
    Copy,
    /// A copy of the fixture, with no namespaces at all.
    CopyNoNamespaces,
}

impl Isolation {
    /// The label in `run.json` and trial records: `overlay`, `copy` or `copy-no-namespaces`.
    pub fn label(self) -> &'static str {
        match self {
            Isolation::Overlay => "overlay",
            Isolation::Copy => "copy",
            Isolation::CopyNoNamespaces => "copy-no-namespaces",
        }
    }
}

impl fmt::Display for Isolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// `run.json`'s sections (its `extra` object): each present only when the run has it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunSections {
    /// The Slurm jobs that ran the run, when it was submitted to Slurm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor: Option<SlurmSection>,
    /// Each task's image (reference and resolved digest), by task, when tasks ran in images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<BTreeMap<String, ImageRecord>>,
    /// What `--resume` needs to rebuild the run's plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanSection>,
    /// Who sat which task, when the run is a sitting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sitting: Option<SittingSection>,
}

/// A sitting's person and task (`extra.sitting`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SittingSection {
    /// The person who sat.
    pub person: String,
    /// The task they sat.
    pub task: String,
}

/// The error of a run whose `run.json` has no `plan` section.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("run.json has no `extra.plan` section")]
pub struct NoPlanSection;

impl RunSections {
    /// The plan section, or why there is none.
    pub fn plan(sections: Option<&RunSections>) -> Result<&PlanSection, NoPlanSection> {
        sections.and_then(|s| s.plan.as_ref()).ok_or(NoPlanSection)
    }
}

/// What `--resume` needs to rebuild a run's plan (`extra.plan`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanSection {
    /// Trials per (task, variant).
    pub trials: u32,
    /// The trial mode the plan was made in.
    pub trial_mode: TrialMode,
    /// The variants asked for (empty: every variant).
    pub variants: Vec<String>,
    /// The tasks asked for (empty: every task).
    pub tasks: Vec<String>,
    /// The isolation the run was started with.
    pub isolation: Isolation,
    /// The models of `--model` the suite's variants were run on (empty: their own).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
}

/// The image a trial ran in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ImageRecord {
    /// The reference as the suite wrote it.
    pub reference: String,
    /// The manifest digest it resolved to (`sha256:...`).
    pub digest: String,
    /// How it was had when it was not pulled: `built from environments/t/Dockerfile (the image
    /// could not be pulled: ...)`; absent for a pulled image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What `run.json` records of a Slurm run (`extra.executor`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SlurmSection {
    /// `slurm`.
    pub kind: String,
    /// `sbatch --version`, e.g. `slurm-wlm 22.05.8`.
    pub slurm_version: String,
    /// The partition asked for (none: the cluster's default).
    pub partition: Option<String>,
    /// The account asked for.
    pub account: Option<String>,
    /// Each task's time limit.
    pub time: Option<String>,
    /// Array tasks at once.
    pub array_throttle: Option<u32>,
    /// Extra sbatch options.
    #[serde(default)]
    pub slurm_args: Vec<String>,
    /// The proctor binary the nodes run.
    pub proctor_bin: PathBuf,
    /// Trials each worker runs at once, when asked.
    pub jobs: Option<usize>,
    /// Every submission, oldest first (the first, then one per `--resume`).
    #[serde(default)]
    pub submissions: Vec<Submission>,
}

/// One `sbatch --array` of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Submission {
    /// The batch file its tasks read (`executor/batch-N.json`).
    pub batch: u32,
    /// The array job's id.
    pub job_id: String,
    /// Array tasks (shards).
    pub tasks: usize,
    /// Trials it was given.
    pub trials: usize,
    /// The dependent job that collects the run (`--detach`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collect_job: Option<String>,
    /// When it was submitted (RFC 3339 UTC to the millisecond).
    #[serde(with = "crate::time::millis")]
    #[schemars(with = "String")]
    pub submitted_at: jiff::Timestamp,
    /// The node the store probe ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_node: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_and_isolations_are_written_as_before() {
        for (mode, text) in [(TrialMode::Dev, "dev"), (TrialMode::Release, "release")] {
            assert_eq!(serde_json::to_value(mode).unwrap(), text);
            assert_eq!(mode.to_string(), text);
            assert_eq!(RunMode::from(mode).as_str(), text);
        }
        for mode in [RunMode::Oracle, RunMode::Sitting] {
            assert_eq!(serde_json::to_value(mode).unwrap(), mode.as_str());
        }
        for iso in [
            Isolation::Overlay,
            Isolation::Copy,
            Isolation::CopyNoNamespaces,
        ] {
            assert_eq!(serde_json::to_value(iso).unwrap(), iso.label());
        }
        assert!(serde_json::from_str::<Isolation>("\"overlay+namespaces\"").is_err());
    }

    #[test]
    fn sections_read_the_extra_that_main_wrote() {
        let extra = serde_json::json!({
            "plan": {"isolation": "overlay", "tasks": [], "trial_mode": "dev", "trials": 1, "variants": []},
            "images": {"t": {"reference": "alpine:3", "digest": "sha256:ab"}},
            "executor": {"kind": "slurm", "slurm_version": "slurm-wlm 22.05.8", "partition": null,
                "account": null, "time": null, "array_throttle": null, "slurm_args": [],
                "proctor_bin": "/p", "jobs": null, "submissions": []},
            "sitting": {"person": "ana", "task": "t"}
        });
        let sections: RunSections = serde_json::from_value(extra.clone()).unwrap();
        let plan = RunSections::plan(Some(&sections)).unwrap();
        assert_eq!(plan.isolation, Isolation::Overlay);
        assert_eq!(sections.executor.as_ref().unwrap().kind, "slurm");
        // Written back, the same JSON (the keys sort as a JSON object's do).
        assert_eq!(serde_json::to_value(&sections).unwrap(), extra);
        assert_eq!(RunSections::plan(None), Err(NoPlanSection));
        assert_eq!(
            RunSections::plan(Some(&RunSections::default())),
            Err(NoPlanSection)
        );
    }
}
