//! `proctor worker RUN --shard I/K`: runs one shard of a run submitted to a cluster, on
//! whatever node the scheduler chose ([`proctor_runner::executor::external::run_shard`]).

use proctor_runner::executor::external::{run_shard, WorkerRequest};

use crate::cli::WorkerArgs;
use crate::exit::{Error, Status};
use crate::summary::Reporter;

/// `proctor worker`: unfinished when the worker was stopped before its shard's end.
pub fn run(args: &WorkerArgs) -> Result<Status, Error> {
    let request = WorkerRequest {
        run: args.run.clone(),
        shard: args.shard.clone(),
        batch: args.batch,
        store: args.store.clone(),
        jobs: args.jobs,
        scratch: args.scratch.clone(),
        config: args.config.clone(),
        image_cache: args.image_cache.clone(),
    };
    let interrupted = run_shard(&request, &mut Reporter::default())?;
    Ok(if interrupted {
        Status::Unfinished
    } else {
        Status::Success
    })
}
