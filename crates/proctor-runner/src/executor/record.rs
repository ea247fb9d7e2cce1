//! What `run.json` records of a run whose trials run elsewhere (`extra.executor`): the
//! executor, the options it was submitted with (a resume submits as the run did, unless told
//! otherwise) and every submission, which `status`, `collect` and a resume read.

use std::path::{Path, PathBuf};

use proctor_store::RunHandle;
use serde::{Deserialize, Serialize};

use crate::error::{Context, RunError};

/// The key of [`ExecutorRecord`] in `run.json`'s `extra`.
pub const EXECUTOR_KEY: &str = "executor";

/// The options of a run submitted to a scheduler (`run --executor slurm|external`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchOptions {
    /// The Slurm partition (default: the cluster's default partition).
    pub partition: Option<String>,
    /// The Slurm account to charge.
    pub account: Option<String>,
    /// Each array task's time limit, in any form sbatch takes.
    pub time: Option<String>,
    /// Array tasks running at once.
    pub array_throttle: Option<u32>,
    /// Shards at most (default: one per 4 trials).
    pub shards: Option<usize>,
    /// More sbatch options for every job.
    pub slurm_args: Vec<String>,
    /// Return once submitted; a dependent job collects the run.
    pub detach: bool,
    /// The proctor binary the nodes run (default: this one).
    pub proctor_bin: Option<PathBuf>,
    /// Trials each worker runs at once, when asked.
    pub jobs: Option<usize>,
}

impl BatchOptions {
    /// The options in force: those given, and for a resume, the run's own where not given.
    pub fn effective(&self, earlier: Option<&ExecutorRecord>) -> BatchOptions {
        let mut opts = self.clone();
        if let Some(r) = earlier {
            opts.partition = opts.partition.or_else(|| r.partition.clone());
            opts.account = opts.account.or_else(|| r.account.clone());
            opts.time = opts.time.or_else(|| r.time.clone());
            opts.array_throttle = opts.array_throttle.or(r.array_throttle);
            if opts.slurm_args.is_empty() {
                opts.slurm_args = r.slurm_args.clone();
            }
            if opts.proctor_bin.is_none() {
                opts.proctor_bin = Some(r.proctor_bin.clone()).filter(|p| p.is_file());
            }
        }
        opts
    }
}

/// What `run.json` records of a run submitted to a scheduler (`extra.executor`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExecutorRecord {
    /// `slurm` or `external`.
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

/// One submission (for Slurm, one `sbatch --array`) of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    /// When it was submitted (UTC).
    pub submitted_at: String,
    /// The node the store probe ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_node: Option<String>,
}

impl ExecutorRecord {
    /// The record in a run's `extra`, when the run was submitted to a scheduler.
    pub fn of(meta: &proctor_store::RunMeta) -> Option<ExecutorRecord> {
        let value = meta.extra.get(EXECUTOR_KEY)?.clone();
        serde_json::from_value::<ExecutorRecord>(value)
            .ok()
            .filter(|r| !r.kind.is_empty())
    }

    /// Writes the record into the run's `run.json`.
    pub fn save(&self, run: &RunHandle) -> Result<(), RunError> {
        let value = serde_json::to_value(self).map_err(RunError::failed)?;
        run.update_meta(|m| {
            if !m.extra.is_object() {
                m.extra = serde_json::json!({});
            }
            m.extra[EXECUTOR_KEY] = value;
        })
        .context("cannot record the Slurm job in run.json")
    }

    /// Records the options this submission runs with (a resume keeps its earlier `jobs` unless
    /// given, and its submissions).
    pub fn set_options(&mut self, kind: &str, version: String, opts: &BatchOptions, bin: &Path) {
        self.kind = kind.into();
        self.slurm_version = version;
        self.partition = opts.partition.clone();
        self.account = opts.account.clone();
        self.time = opts.time.clone();
        self.array_throttle = opts.array_throttle;
        self.slurm_args = opts.slurm_args.clone();
        self.proctor_bin = bin.to_path_buf();
        self.jobs = opts.jobs.or(self.jobs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slurm_record_round_trips_through_run_json_extra() {
        let record = ExecutorRecord {
            kind: "slurm".into(),
            slurm_version: "slurm-wlm 22.05.8".into(),
            partition: Some("debug".into()),
            proctor_bin: "/shared/proctor".into(),
            submissions: vec![Submission {
                batch: 1,
                job_id: "12".into(),
                tasks: 3,
                trials: 12,
                ..Default::default()
            }],
            ..Default::default()
        };
        let meta = proctor_store::RunMeta {
            extra: serde_json::json!({"plan": {}, EXECUTOR_KEY: record.clone()}),
            ..Default::default()
        };
        assert_eq!(ExecutorRecord::of(&meta), Some(record));
        let local = proctor_store::RunMeta {
            extra: serde_json::json!({"plan": {}}),
            ..Default::default()
        };
        assert_eq!(ExecutorRecord::of(&local), None);
    }
}
