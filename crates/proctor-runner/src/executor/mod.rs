//! Where a run's trials execute: an [`Executor`] takes a started (or resumed) run and runs its
//! unfinished trials, here ([`local::Local`]), as a Slurm job array ([`slurm::Slurm`]), or by
//! handing one `proctor worker` command per shard to another scheduler ([`external::External`],
//! whose other half, [`external::run_shard`], is what each worker runs). The command line picks
//! one by name ([`by_name`], from the names and help of [`EXECUTORS`]), sets the run up with
//! [`crate::request::RunRequest::open`] and calls [`Executor::execute`]; it knows no
//! executor's insides.
//!
//! # Writing another executor (Kubernetes, say)
//!
//! Add it to [`EXECUTORS`] and [`by_name`] (the command line's `--executor` then takes it, with
//! its help; nothing in the command line changes). An implementation must:
//!
//! - say in [`Executor::available`] and [`Executor::prepare`] everything that would make it
//!   fail half way (its client commands, its options, whether its nodes see the store), before
//!   the run is created; nothing may be submitted there;
//! - say whether the trials run in this process ([`Executor::runs_here`]: when not, images are
//!   pulled and the model gateway started by each worker, [`external::run_shard`]) and where
//!   the isolation is probed ([`Executor::probe_dir`]: where the trials' upper layers go);
//! - on a resume ([`Executor::resumed`]), refuse while an earlier submission of the run is still
//!   alive, and release the claims of workers that ended without finishing
//!   ([`crate::shard::release_unfinished`]);
//! - in [`Executor::execute`], write the unfinished trials as a batch of shards
//!   ([`crate::shard::Batch`]) and have each shard run by `proctor worker RUN --batch N --shard
//!   I/K` on a machine that sees the store, record its submission in the run
//!   ([`record::ExecutorRecord`], so that `status`, `collect` and a resume know it), and either
//!   follow the run from the store until every worker ended (showing the trials the store shows
//!   finished as [`Event`]s, cancelling on Ctrl-C) or return at once
//!   ([`Execution::Detached`]);
//! - never write the index or `run.json` from the nodes (workers open the store with
//!   [`proctor_store::Store::open_on_node`]); the submitter brings the index up to date
//!   ([`proctor_store::Store::reindex_run`]) before the run is concluded.

pub mod batch;
pub mod collect;
pub mod external;
pub mod local;
pub mod record;
pub mod slurm;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use proctor_store::Store;
use proctor_suite::Problem;

use crate::error::RunError;
use crate::gateway::RunGateway;
use crate::image::TrialImage;
use crate::{Event, ExecutionSummary, Session};

/// What a run's trials share beyond the session when they run in this process: the model
/// gateway, the unpacked images and the browser.
#[derive(Default)]
pub struct Resources {
    /// The run's model gateway, when some trial reaches a real model.
    pub gateway: Option<Arc<RunGateway>>,
    /// Each task's image, by task id.
    pub images: BTreeMap<String, Arc<TrialImage>>,
    /// Where `visual` checks find their browser.
    pub browser: Option<proctor_browser::BrowserSource>,
}

/// Every executor `run --executor` takes: its name, and what it does (its `--help` line).
pub const EXECUTORS: &[(&str, &str)] = &[
    ("local", "In this process, `--jobs` at a time"),
    (
        "slurm",
        "As one Slurm job array whose tasks each run `proctor worker RUN --shard I/K`",
    ),
    (
        "external",
        "Write the run and its shards (`--shards K`) and print the K `proctor worker` commands, \
         for another scheduler to run (Kubernetes, xargs or parallel over ssh: docs/scale.md); \
         `proctor collect RUN` then writes the results",
    ),
];

/// What the executors take from `proctor run`'s arguments.
#[derive(Debug, Clone, Default)]
pub struct ExecutorOptions {
    /// Trials at once (here, or in each worker).
    pub jobs: Option<usize>,
    /// Where per-trial scratch goes, for trials run here.
    pub scratch: Option<PathBuf>,
    /// The options of the executors that submit shards (the `jobs` above included).
    pub batch: record::BatchOptions,
}

/// The executor named `name` (one of [`EXECUTORS`]), with `options`; `None` for another name.
pub fn by_name(name: &str, options: ExecutorOptions) -> Option<Box<dyn Executor>> {
    let batch = record::BatchOptions {
        jobs: options.jobs,
        ..options.batch
    };
    match name {
        "local" => Some(Box::new(local::Local {
            jobs: options.jobs,
            scratch: options.scratch,
        })),
        "slurm" => Some(Box::new(slurm::Slurm::new(batch))),
        "external" => Some(Box::new(external::External::new(batch))),
        _ => None,
    }
}

/// Where a run's trials execute (see the module's documentation for what an implementation
/// must do).
pub trait Executor {
    /// The name `run --executor` takes (`local`, `slurm`, `external`); a resume is suggested
    /// with it.
    fn name(&self) -> &'static str;

    /// Checks that this machine can use the executor at all (its client commands), before the
    /// suite is read.
    fn available(&mut self) -> Result<(), RunError> {
        Ok(())
    }

    /// Checks, before the run is created, everything that would make the execution fail half
    /// way (the options, whether the nodes see the store). Nothing is created or submitted.
    /// `resume` is the run `proctor run --resume` names, if any.
    fn prepare(&mut self, resume: Option<&str>, store: &Store) -> Result<(), RunError> {
        let _ = (resume, store);
        Ok(())
    }

    /// Whether the trials run in this process: then the run's images are pulled and its model
    /// gateway started here; else each worker does that on its node.
    fn runs_here(&self) -> bool;

    /// Where the isolation is probed (where the trials' upper layers will be); `None`: the
    /// store.
    fn probe_dir(&self) -> Option<PathBuf> {
        None
    }

    /// Called when the run is a resume, before its trials run again: refuses while an earlier
    /// submission is alive and releases the claims of workers that ended before finishing.
    fn resumed(&mut self, session: &Session, observer: &mut dyn Observer) -> Result<(), RunError> {
        let _ = (session, observer);
        Ok(())
    }

    /// Runs the session's unfinished trials (or hands them to a scheduler).
    fn execute(
        &mut self,
        session: &Session,
        resources: Resources,
        observer: &mut dyn Observer,
    ) -> Result<Execution, RunError>;
}

/// How an execution handed back the run.
#[derive(Debug)]
pub enum Execution {
    /// Its trials ran (every one, or until interrupted): the run is to be concluded.
    Finished(ExecutionSummary),
    /// The trials were submitted and this process does not wait: the scheduler runs them and a
    /// dependent job collects the run.
    Detached(record::Submission),
    /// The shards are written; each of these commands runs one (`--executor external`).
    Planned {
        /// One `proctor worker` command line per shard, shell-quoted.
        commands: Vec<String>,
        /// The batch's number.
        batch: u32,
        /// Trials in the batch.
        trials: usize,
    },
}

/// What an execution has to say while it runs, for the command line to show.
pub trait Observer: Send {
    /// A line for the person running proctor (a note, a scheduler's state).
    fn note(&mut self, line: &str);
    /// A warning about the suite.
    fn warning(&mut self, problem: &Problem);
    /// The trials start: `header` describes the execution; `total` trials, `done` of them
    /// finished before.
    fn begin(&mut self, header: &str, total: usize, done: usize);
    /// A trial's event.
    fn event(&mut self, event: Event);
    /// The execution ended.
    fn end(&mut self);
}

/// The summary of an execution that ran elsewhere: `before` trials were finished when it
/// started and `now` are.
pub fn summary_of(session: &Session, before: usize, now: usize) -> ExecutionSummary {
    ExecutionSummary {
        planned: session.plan().trials.len(),
        already_finished: before,
        finished_now: now.saturating_sub(before),
        outcomes: Default::default(),
        interrupted: false,
        isolation: session.isolation().label().to_string(),
        stopped: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_executor_is_built_by_its_name_and_no_other_name_is() {
        for (name, help) in EXECUTORS {
            let built = by_name(name, ExecutorOptions::default());
            assert_eq!(built.map(|e| e.name()), Some(*name), "{name}");
            assert!(!help.is_empty(), "{name} has no help");
        }
        assert!(by_name("kubernetes", ExecutorOptions::default()).is_none());
        assert!(by_name("", ExecutorOptions::default()).is_none());
    }

    #[test]
    fn only_the_local_executor_runs_trials_here() {
        for (name, _) in EXECUTORS {
            let Some(e) = by_name(name, ExecutorOptions::default()) else {
                panic!("{name} is listed but not built");
            };
            assert_eq!(e.runs_here(), *name == "local", "{name}");
            // Trials run elsewhere probe the isolation where their upper layers go, never in
            // the (shared) store.
            assert_eq!(e.probe_dir().is_none(), *name == "local", "{name}");
        }
    }
}
