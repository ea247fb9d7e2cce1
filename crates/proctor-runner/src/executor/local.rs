//! The local executor: the run's trials run in this process, `jobs` at a time, Ctrl-C stopping
//! the running ones (finished trials are kept, for a resume).

use std::path::PathBuf;
use std::time::Duration;

use super::{Execution, Executor, Observer};
use crate::error::{Context, RunError};
use crate::executor::Resources;
use crate::{EngineOptions, Session};

/// Runs the trials here.
#[derive(Debug, Clone, Default)]
pub struct Local {
    /// Trials at once (default: the number of cores).
    pub jobs: Option<usize>,
    /// Where per-trial scratch goes (default: chosen by [`crate::scratch::Scratch`]).
    pub scratch: Option<PathBuf>,
}

impl Executor for Local {
    fn name(&self) -> &'static str {
        "local"
    }

    fn runs_here(&self) -> bool {
        true
    }

    fn execute(
        &mut self,
        session: &Session,
        resources: Resources,
        observer: &mut dyn Observer,
    ) -> Result<Execution, RunError> {
        let jobs = self
            .jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
        // The handler runs on a thread of its own, where the observer is not: its one line goes
        // to stderr directly.
        let interrupted = crate::engine::install_interrupt_handler(|| {
            eprintln!(
                "\ninterrupted: stopping running trials; finished trials are kept (resume with --resume)"
            );
        })
        .context("cannot install the Ctrl-C handler")?;
        let plan = session.plan();
        observer.begin(
            &format!(
                "run {} · suite {} · {} trial(s) · {} job(s) · isolation {}",
                session.run().id(),
                plan.suite_id,
                plan.trials.len(),
                jobs,
                session.isolation().label()
            ),
            plan.trials.len(),
            session.finished_before(),
        );
        let options = EngineOptions {
            jobs,
            grace: Duration::from_secs(2),
            scratch: self.scratch.clone(),
            gateway: resources.gateway,
            images: resources.images,
            browser: resources.browser,
        };
        let summary = session
            .execute(&options, &interrupted, &mut |e| observer.event(e))
            .context("the run failed")?;
        observer.end();
        Ok(Execution::Finished(summary))
    }
}
