//! A task's steps resolved for one trial ([`plan`]): each step's files in the suite, its
//! timeouts, and the folders bound into the trial for its preparation and its check; and what
//! they change of the trial's sandbox ([`apply`]).

use proctor_suite::model::AgentKind;

use crate::trial::context::{RunContext, Trial};
use crate::trial::conversation::Relaunch;
use crate::trial::error::{Stage, TrialError};
use crate::trial::paths::TrialPaths;
use crate::trial::steps::{StepDirs, StepPlan, StepsPlan};

/// The suite folder of a task's step files: `steps/TASK_ID/`.
pub const STEPS_DIR: &str = "steps";

/// The steps of `trial`'s task, resolved; `None` for a task with none. A task in steps needs
/// namespaces: its checks find their tests at `/tests`.
pub fn plan(
    ctx: &RunContext,
    trial: &Trial,
    paths: &TrialPaths,
    relaunch: Relaunch,
) -> Result<Option<StepsPlan>, TrialError> {
    let task = trial.task;
    if task.steps.is_empty() {
        return Ok(None);
    }
    if !paths.namespaces {
        return Err(TrialError::harness(
            Stage::Launch,
            "a task in steps needs namespaces (each step's check finds its tests at /tests): run it without --isolation none",
        ));
    }
    let files = ctx.suite.root.join(STEPS_DIR).join(task.id.get_ref());
    let settings = &trial.settings;
    let steps = task
        .steps
        .iter()
        .map(|s| {
            let own = files.join(s.name.get_ref());
            StepPlan {
                name: s.name.get_ref().clone(),
                prompt: s.prompt.clone(),
                check: s
                    .check
                    .clone()
                    .unwrap_or_else(|| "bash /tests/test.sh".to_string()),
                min_reward: s.min_reward,
                timeout: s
                    .timeout_seconds
                    .map_or(settings.wall_timeout, std::time::Duration::from_secs),
                check_timeout: s
                    .check_timeout_seconds
                    .map_or(settings.validation_timeout, std::time::Duration::from_secs),
                check_env: s
                    .check_env
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                healthcheck: s.healthcheck.as_ref().map(|h| {
                    (
                        h.command.clone(),
                        h.interval_seconds.unwrap_or(1),
                        h.retries.unwrap_or(3),
                    )
                }),
                tests: vec![files.join("tests"), own.join("tests")],
                workdir: Some(own.join("workdir")),
            }
        })
        .collect();
    let dirs = StepDirs {
        tests: paths.work.join("step-tests"),
        logs: paths.work.join("step-logs"),
        upload: paths.work.join("step-upload"),
        evidence: paths.trial_dir.join("steps"),
    };
    for d in [&dirs.tests, &dirs.logs, &dirs.upload] {
        std::fs::create_dir_all(d).map_err(|e| {
            TrialError::harness(
                Stage::Launch,
                format!("cannot make the steps' folder {}: {e}", d.display()),
            )
        })?;
    }
    Ok(Some(StepsPlan {
        steps,
        strategy: task.step_reward.unwrap_or_default(),
        relaunch,
        scripted: trial.variant.agent == AgentKind::Script,
        dirs,
        shims: paths.shims.inside.clone(),
    }))
}

/// Makes `spec` run the steps: its first turn is the first step's preparation, its turns and
/// its time are the steps', and the steps' folders are bound in.
pub fn apply(plan: &StepsPlan, spec: &mut proctor_sandbox::SandboxSpec) -> Result<(), TrialError> {
    let first = plan
        .first()
        .map_err(|why| TrialError::harness(Stage::Launch, why))?;
    spec.command = first.command;
    spec.env = first.env;
    spec.max_turns = plan.max_turns();
    spec.wall_timeout = plan.wall_timeout();
    spec.binds.extend(plan.dirs.binds());
    Ok(())
}
