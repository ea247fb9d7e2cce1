//! `proctor run SUITE`: plan the trials, execute them (here, on Slurm, or as shards for another
//! scheduler) into the store (or, with --dry-run, print the plan), and print a summary with
//! every count's n.
//!
//! Setting the run up is [`proctor_runner::RunRequest`]'s and executing it an
//! [`proctor_runner::Executor`]'s; this command parses the arguments, picks the executor, and
//! renders what comes back.

use proctor_report::Table;
use proctor_runner::executor::record::{BatchOptions, Submission};
use proctor_runner::executor::{self, ExecutorOptions};
use proctor_runner::{Execution, Executor, RunRequest};
use proctor_store::RunId;
use proctor_suite::plan::Plan;
use proctor_suite::PlanOptions;

use crate::cli::{Format, RunArgs};
use crate::exit::{Error, Status};
use crate::summary::{conclude, Reporter};

/// Runs (or plans) the suite.
pub fn run(args: RunArgs) -> Result<Status, Error> {
    let request = request_of(&args);
    if args.dry_run {
        print_plan(&request.plan()?, args.format)?;
        return Ok(Status::Success);
    }
    if args.executor != "local" && args.junit.is_some() {
        return Err(Error::usage(
            "--junit is written by a local run only",
            "after the cluster's run is collected, write it with `proctor export RUN --junit FILE`",
        ));
    }
    let mut executor = executor_of(&args)?;
    let mut shown = Reporter::default();
    let prepared = request.open(executor.as_mut(), &mut shown)?;
    let session = &prepared.session;
    let flags = match executor.name() {
        "local" => String::new(),
        name => format!(" --executor {name}"),
    };
    let status = match executor.execute(session, prepared.resources, &mut shown)? {
        Execution::Finished(summary) => {
            conclude(session, &summary, &args.suite, args.format, &flags)
        }
        Execution::Detached(submission) => {
            print_detached(args.format, session.run().id(), &submission);
            return Ok(Status::Success);
        }
        Execution::Planned {
            commands,
            batch,
            trials,
        } => {
            for c in &commands {
                println!("{c}");
            }
            let id = session.run().id();
            eprintln!(
                "run {id} planned as {} shard(s) of {trials} trial(s) (batch {batch}); run each command above where the store is seen (docs/scale.md), then `proctor collect {id}`",
                commands.len(),
            );
            return Ok(Status::Success);
        }
    };
    // The JUnit report of what finished, whatever the run's status (an unfinished run too).
    crate::summary::junit_after_run(session.run(), session.suite(), args.junit.as_ref())?;
    status
}

/// The request `args` make.
pub(crate) fn request_of(args: &RunArgs) -> RunRequest {
    RunRequest {
        suite: args.suite.clone(),
        store: args.store.clone(),
        options: PlanOptions {
            trials: args.trials,
            mode: args.trial_mode.into(),
            variants: args.variants.clone(),
            tasks: args.tasks.clone(),
            models: args.models.clone(),
        },
        isolation: args.isolation.into(),
        resume: args.resume.clone(),
        config: args.config.clone(),
        image_cache: args.image_cache.clone(),
        build_images: args.build,
    }
}

/// The executor `--executor` names (clap took only the runner's names), with its options.
fn executor_of(args: &RunArgs) -> Result<Box<dyn Executor>, Error> {
    let s = &args.slurm;
    let options = ExecutorOptions {
        jobs: args.jobs,
        scratch: args.scratch.clone(),
        batch: BatchOptions {
            partition: s.partition.clone(),
            account: s.account.clone(),
            time: s.time.clone(),
            array_throttle: s.array_throttle,
            shards: s.shards,
            slurm_args: s.slurm_args.clone(),
            detach: s.detach,
            proctor_bin: s.proctor_bin.clone(),
            jobs: args.jobs,
        },
    };
    executor::by_name(&args.executor, options).ok_or_else(|| {
        Error::usage(
            format!("no executor `{}`", args.executor),
            "`proctor run --help` lists the executors",
        )
    })
}

/// What a detached run prints: its id and job on stdout, how to follow it on stderr.
fn print_detached(format: Format, id: &RunId, submission: &Submission) {
    match format {
        Format::Json => println!(
            "{}",
            serde_json::json!({"run": id.as_str(), "job": submission.job_id, "collect_job": submission.collect_job, "tasks": submission.tasks, "trials": submission.trials})
        ),
        Format::Text => println!("{id} {}", submission.job_id),
    }
    eprintln!(
        "submitted run {id} as Slurm job {} ({} task(s), {} trial(s)); `proctor status {id}` shows its progress; job {} writes the results when it ends",
        submission.job_id,
        submission.tasks,
        submission.trials,
        submission.collect_job.as_deref().unwrap_or("-"),
    );
}

fn print_plan(plan: &Plan, format: Format) -> Result<(), Error> {
    match format {
        Format::Json => {
            let doc = serde_json::to_string_pretty(plan).map_err(anyhow::Error::new)?;
            println!("{doc}");
        }
        Format::Text => {
            errln!(
                "suite {} ({} mode, {} trial(s) per task and variant)",
                plan.suite_id,
                plan.trial_mode.as_str(),
                plan.trials_per_cell
            );
            errln!("  suite hash   {}", plan.suite_hash);
            errln!("  fixture hash {}", plan.fixture_hash);
            let mut table = Table::new(&["TRIAL", "TASK", "VARIANT", "INDEX", "SEED", "MUTATION"]);
            for t in &plan.trials {
                table.row([
                    t.id.clone(),
                    t.task.clone(),
                    t.variant.clone(),
                    t.index.to_string(),
                    t.seed.map_or("-".to_string(), |s| s.to_string()),
                    t.mutation
                        .as_ref()
                        .map_or("-".to_string(), |m| m.name.clone()),
                ]);
            }
            out_block!("{}", table.text());
            errln!(
                "{} trial(s) planned; nothing executed (--dry-run)",
                plan.trials.len()
            );
        }
    }
    Ok(())
}
