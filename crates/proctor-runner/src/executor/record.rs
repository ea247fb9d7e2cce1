//! What `run.json` records of a run whose trials run elsewhere (`extra.executor`): the
//! executor, the options it was submitted with (a resume submits as the run did, unless told
//! otherwise) and every submission, which `status`, `collect` and a resume read.

use std::path::{Path, PathBuf};

use proctor_store::RunHandle;

use crate::error::{Context, RunError};

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

/// What `run.json` records of a run submitted to a scheduler (`extra.executor`), and one
/// submission of it: run sections, so their types live in `proctor-records`.
pub use proctor_records::run::{SlurmSection as ExecutorRecord, Submission};

/// A run's executor record, read from and written to `run.json`.
pub trait ExecutorRecordExt: Sized {
    /// The record in a run's sections, when the run was submitted to a scheduler.
    fn of(meta: &proctor_store::RunMeta) -> Option<Self>;
    /// Writes the record into the run's `run.json`.
    fn save(&self, run: &RunHandle) -> Result<(), RunError>;
    /// Records the options this submission runs with (a resume keeps its earlier `jobs` unless
    /// given, and its submissions).
    fn set_options(&mut self, kind: &str, version: String, opts: &BatchOptions, bin: &Path);
}

impl ExecutorRecordExt for ExecutorRecord {
    fn of(meta: &proctor_store::RunMeta) -> Option<ExecutorRecord> {
        let record = meta.extra.as_ref()?.executor.clone()?;
        (!record.kind.is_empty()).then_some(record)
    }

    fn save(&self, run: &RunHandle) -> Result<(), RunError> {
        run.update_meta(|m| m.sections_mut().executor = Some(self.clone()))
            .context("cannot record the Slurm job in run.json")
    }

    fn set_options(&mut self, kind: &str, version: String, opts: &BatchOptions, bin: &Path) {
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
        let plan = proctor_records::run::PlanSection {
            trials: 1,
            trial_mode: proctor_records::run::TrialMode::Dev,
            variants: Vec::new(),
            tasks: Vec::new(),
            isolation: proctor_records::run::Isolation::Copy,
            models: Vec::new(),
        };
        let meta = proctor_store::RunMeta {
            extra: Some(proctor_records::run::RunSections {
                plan: Some(plan.clone()),
                executor: Some(record.clone()),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(ExecutorRecord::of(&meta), Some(record));
        let local = proctor_store::RunMeta {
            extra: Some(proctor_records::run::RunSections {
                plan: Some(plan),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(ExecutorRecord::of(&local), None);
    }
}
