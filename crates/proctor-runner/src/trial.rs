//! One trial, stage by stage (docs/design.md, "Trial pipeline stages"). Each stage is a function
//! in its own file with a typed result, and any stage that cannot go on returns a
//! [`TrialError`], which becomes an `errored` record:
//!
//! 1. [`prepare`] (`trial/prepare.rs`): folders, layers, workspace, allow-list, shims, calls log;
//! 2. [`launch`] (`trial/launch.rs`, `trial/services.rs`, `trial/env.rs`): adapter, preflight,
//!    model endpoint, environment, services, sandbox spec;
//! 3. [`execute`] (`trial/execute.rs`): the sandbox run to the full stop;
//! 4. [`capture`] (`trial/capture.rs`): end state, ledgers, harness notes;
//! 5. [`checks`] (`trial/checks.rs`): the checks with holdouts, in fresh sandboxes; then
//!    [`visual`] (`trial/visual.rs`): the `visual` looks, in headless Chromium in a sandbox;
//! 6. [`grade`] (`trial/grade.rs`): the verdict.
//!
//! [`paths::TrialPaths`] names every path of the trial, in its host and in-sandbox forms.
//!
//! Who sits in the agent's seat during stage 3 is an [`Attendance`]: an agent, unattended
//! ([`run_trial`]), or a person at a terminal (`proctor sit`, through [`run_trial_attended`]).
//! Every other stage is the same for both.

pub mod capture;
pub mod checks;
pub mod context;
pub mod conversation;
pub mod denials;
pub mod env;
pub mod error;
pub mod execute;
pub mod grade;
pub mod launch;
pub mod mcp;
pub mod paths;
pub mod prepare;
pub mod sandboxing;
pub mod services;
pub mod setup;
pub mod steps;
pub mod steps_plan;
#[cfg(test)]
pub(crate) mod testkit;
pub mod textdiff;
pub mod user_model;
pub mod user_wire;
pub mod visual;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use proctor_records::timings::{Phase, Timings};
use proctor_suite::plan::PlannedTrial;
use proctor_suite::Settings;

pub use checks::{run_check, task_checks, CheckEnv, EndTree};
pub use context::{hidden_paths, Isolation, RunContext, Trial};
pub use error::{Stage, TrialError};
pub use grade::EndStateFiles;
pub use paths::{TrialPaths, HOME_INSIDE, WORKSPACE_INSIDE};

use crate::record::{Hashes, TrialRecord, RECORD_VERSION};

/// Who is in the agent's seat while the sandbox runs (stage 3, execute).
pub trait Attendance {
    /// Adjusts the settings the trial runs with, before anything of it is made (a sitting has
    /// no wall timeout unless one is asked for).
    fn settle(&mut self, settings: &mut Settings) {
        let _ = settings;
    }

    /// Runs the launched sandbox to the full stop and closes the calls log (as
    /// [`execute::execute`] does); may set [`launch::Launched::given_answer`].
    fn execute(
        &mut self,
        launched: &mut launch::Launched,
        calls_log: &mut crate::calls::CallsLog,
        paths: &TrialPaths,
    ) -> Result<execute::Executed, TrialError>;
}

/// An agent runs on its own, its output on pipes: every trial of `proctor run`.
pub struct Unattended;

impl Attendance for Unattended {
    fn execute(
        &mut self,
        launched: &mut launch::Launched,
        calls_log: &mut crate::calls::CallsLog,
        paths: &TrialPaths,
    ) -> Result<execute::Executed, TrialError> {
        execute::execute_launched(launched, calls_log, paths)
    }
}

/// Runs one trial to a record; a stage that cannot go on makes an `errored` record, never a
/// panic.
pub fn run_trial(ctx: &RunContext, planned: &PlannedTrial) -> TrialRecord {
    run_trial_attended(ctx, planned, &mut Unattended)
}

/// [`run_trial`], with `attendance` in the agent's seat.
pub fn run_trial_attended(
    ctx: &RunContext,
    planned: &PlannedTrial,
    attendance: &mut dyn Attendance,
) -> TrialRecord {
    let mut clock = Clock::start();
    match stages(ctx, planned, &mut clock, attendance) {
        Ok(record) => record,
        Err(e) => e.into_record(ctx.plan, planned, clock.timings),
    }
}

/// The stages in order; timings are taken between them.
fn stages(
    ctx: &RunContext,
    planned: &PlannedTrial,
    clock: &mut Clock,
    attendance: &mut dyn Attendance,
) -> Result<TrialRecord, TrialError> {
    let mut trial = Trial::resolve(ctx.suite, planned)?;
    attendance.settle(&mut trial.settings);
    let mut prepared = prepare::prepare(ctx, &trial, clock.t0)?;
    let mut launched = launch::launch(ctx, &trial, &prepared)?;
    clock.lap(Phase::Setup);
    let setup = setup::setup(&trial, &mut prepared, &mut launched)?;
    if setup.is_some() {
        clock.lap(Phase::SetupCommands);
    }
    let executed = attendance.execute(&mut launched, &mut prepared.calls_log, &prepared.paths);
    clock.lap(Phase::Agent);
    let executed = executed?;
    let mut captured = capture::capture(ctx, &trial, &prepared, &mut launched, &executed);
    if let Some(why) = &captured.store_full {
        ctx.store_is_full(why.clone());
    }
    clock.lap(Phase::Capture);
    let holdout = ctx.suite.holdout_dir(&planned.task);
    let (check_files, holdout_hashes) = checks::read_holdout(holdout.as_deref());
    let check_files = checks::placed_at(check_files, trial.task.holdout_at());
    let hashes = Hashes {
        suite: ctx.plan.suite_hash.clone(),
        fixture: ctx.plan.fixture_hash.clone(),
        mutation: planned.mutation.clone(),
        holdout: holdout_hashes,
        variant_files: prepared.laid_in.clone(),
    };
    let mut end = captured.end;
    if executed.report.not_started.is_none() {
        let watch = checks::Watch::of(&end.changes, &end.root_changes)
            .with_kinds(std::mem::take(&mut captured.not_files));
        end.checks = checks::check_trial(ctx, &trial, &prepared, holdout.as_deref(), watch);
        end.visuals = visual::visual_trial(ctx, &trial, &prepared, holdout.as_deref());
    }
    clock.lap(Phase::Checks);
    let files = EndStateFiles::new(
        prepared.paths.trial_dir.join("changes").join("files"),
        &end.changes,
        prepared.lowers.clone(),
    );
    let (text_diffs, texts) = text_diffs(ctx, &trial, &prepared, &end, &files, clock);
    let faults = grade::faults(&captured.model_faults, &captured.notes);
    let verdict = grade::grade(
        trial.task,
        trial.settings.undo_window,
        &end,
        &texts.over(&files),
        &faults,
        &check_files,
        ctx.image(&planned.task).map(|i| &**i),
    );
    drop(prepared);
    // Graded on every change and the whole of every service's state and events; stored with
    // bounded lists (the whole is in changes.json and the services' own files).
    let mut limit_reached = captured.limit_reached;
    end.bound_observations();
    let services_cut = end.bound_services();
    if end.bound_changes() | end.bound_root_changes() | services_cut {
        limit_reached.get_or_insert(proctor_records::Limit::Entries);
    }
    clock.total();
    Ok(TrialRecord {
        record_version: RECORD_VERSION,
        plan: planned.clone(),
        hashes,
        isolation: Some(executed.report.isolation),
        launch: launched.record,
        settings: Some(trial.settings),
        timings_ms: clock.timings,
        end_state: end,
        outcome: verdict.outcome.clone(),
        reason: verdict.reason.clone(),
        verdict: Some(verdict),
        ledgers: captured.ledgers,
        limit_reached,
        services: Some(executed.report.services),
        capture_notes: captured.capture_notes,
        harness_notes: captured.notes,
        sitting: None,
        setup,
        text_diffs,
    })
}

/// The text diffs of the changed files the suite's `[diff]` converters read (none when it has
/// none, or the agent never started), and the texts the grading reads them through.
fn text_diffs(
    ctx: &RunContext,
    trial: &Trial,
    prepared: &prepare::Prepared,
    end: &proctor_score::EndState,
    files: &EndStateFiles,
    clock: &mut Clock,
) -> (Vec<crate::record::TextDiffRecord>, textdiff::Texts) {
    if ctx.suite.file.diff.is_empty() || !end.agent.started {
        return (Vec::new(), textdiff::Texts::default());
    }
    let start_files = EndStateFiles::new(PathBuf::new(), &[], prepared.lowers.clone());
    let converting = textdiff::Converting {
        env: CheckEnv {
            holdout_at: None,
            ..CheckEnv::for_task(ctx, trial.task, proctor_suite::model::Network::None)
        },
        end: files,
        start: &start_files,
        work: prepared.paths.work.clone(),
        trial_dir: prepared.paths.trial_dir.clone(),
        timeout: trial.settings.validation_timeout,
    };
    let converted = textdiff::convert_all(ctx.suite, trial.task, &end.changes, &converting);
    clock.lap(Phase::TextDiffs);
    converted
}

/// A trial's phase timings, in milliseconds: each lap from the end of the previous one.
struct Clock {
    t0: Instant,
    last: Instant,
    timings: Timings,
}

impl Clock {
    fn start() -> Clock {
        let now = Instant::now();
        Clock {
            t0: now,
            last: now,
            timings: Timings::default(),
        }
    }

    /// Records the time since the last lap as `phase`'s.
    fn lap(&mut self, phase: Phase) {
        let now = Instant::now();
        self.timings.set(phase, ms(now - self.last));
        self.last = now;
    }

    /// Records the time since the start as `total`.
    fn total(&mut self) {
        self.timings.total = ms(self.t0.elapsed());
    }
}

/// Milliseconds, to the microsecond.
fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

#[cfg(test)]
mod tests {
    use proctor_score::endstate::ChangeKind;
    use proctor_score::{ErrorKind, Outcome};

    use super::*;
    use crate::trial::testkit::{planned, suite, Lab};

    #[test]
    fn without_namespaces_a_command_agent_goes_through_every_stage() {
        let (_dir, suite) = suite();
        let lab = Lab::new(&suite);
        let ctx = lab.context(&suite);
        let r = run_trial(&ctx, &planned("t", "cmd"));
        assert_eq!(r.outcome, Outcome::Completed, "{}", r.reason);
        assert_eq!(r.end_state.answer, "finished");
        let changes: Vec<(&str, ChangeKind)> = r
            .end_state
            .changes
            .iter()
            .map(|c| (c.path.as_str(), c.kind))
            .collect();
        assert_eq!(changes, [("done.txt", ChangeKind::Added)]);
        // Every check ran once, over the end state; the cap's did not hold.
        let checks: Vec<(&str, Option<i32>)> = r
            .end_state
            .checks
            .values()
            .map(|c| (c.command.as_str(), c.exit))
            .collect();
        assert_eq!(
            checks,
            [
                ("grep -q ok done.txt", Some(0)),
                ("test -f bad.txt", Some(1)),
                ("test -f done.txt", Some(0)),
            ]
        );
        let timings = serde_json::to_value(r.timings_ms).expect("json");
        let keys: Vec<&str> = timings
            .as_object()
            .expect("an object")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["agent", "capture", "checks", "setup", "total"]);
        assert_eq!(r.hashes.fixture, "fixturehash");
        assert_eq!(r.launch.argv[0], "/bin/sh");
        assert!(r.harness_notes.is_empty(), "{:?}", r.harness_notes);
        assert!(r.isolation.is_some() && r.services.is_some());
        assert_eq!(
            r.settings.as_ref().unwrap().wall_timeout,
            Duration::from_secs(7)
        );
        // The evidence is in the trial's folder; the scratch is gone.
        let trial_dir = lab
            .run
            .dir()
            .join(proctor_store::TRIALS_DIR)
            .join("t.cmd.0");
        assert_eq!(
            std::fs::read_to_string(trial_dir.join("changes/files/done.txt")).unwrap(),
            "ok\n"
        );
        assert!(trial_dir.join("checks/0.json").is_file());
        assert!(trial_dir.join("checks/2.stdout").is_file());
        assert_eq!(
            std::fs::read_to_string(trial_dir.join("answer.txt")).unwrap(),
            "finished"
        );
        assert!(!ctx.work_root.join("t.cmd.0").exists());
    }

    #[test]
    fn a_stage_that_cannot_go_on_makes_an_errored_record_and_leaves_no_scratch() {
        let (_dir, suite) = suite();
        let lab = Lab::new(&suite);
        let ctx = lab.context(&suite);
        let r = run_trial(&ctx, &planned("t", "lost"));
        assert_eq!(
            r.outcome,
            Outcome::Errored {
                kind: ErrorKind::Harness
            }
        );
        assert!(
            r.reason
                .starts_with("harness: allowed command `no-such-program-anywhere` was not found"),
            "{}",
            r.reason
        );
        assert_eq!(r.timings_ms.total, 0.0);
        assert!(!ctx.work_root.join("t.lost.0").exists());
        // A plan entry the suite does not have is the same kind of record.
        let r = run_trial(&ctx, &planned("t", "gone"));
        assert!(r.reason.contains("does not have"), "{}", r.reason);
    }

    #[test]
    fn without_namespaces_setup_builds_the_start_state_the_agent_is_read_against() {
        let text = crate::trial::testkit::SUITE.replace(
            "wall_timeout_seconds = 7\n",
            "wall_timeout_seconds = 7\nsetup = [\"echo ok > done.txt\", \"rm README.md\"]\n",
        );
        let (_dir, suite) = crate::trial::testkit::suite_from(&text);
        let lab = Lab::new(&suite);
        let ctx = lab.context(&suite);
        // The agent writes what setup already wrote: no change of its own.
        let r = run_trial(&ctx, &planned("t", "cmd"));
        assert_eq!(r.outcome, Outcome::Completed, "{}", r.reason);
        assert!(r.end_state.changes.is_empty(), "{:?}", r.end_state.changes);
        let setup = r.setup.expect("a setup record");
        let changes: Vec<(&str, ChangeKind)> = setup
            .changes
            .iter()
            .map(|c| (c.path.as_str(), c.kind))
            .collect();
        assert_eq!(
            changes,
            [
                ("README.md", ChangeKind::Deleted),
                ("done.txt", ChangeKind::Added)
            ]
        );
        assert_eq!((setup.exit, setup.failed), (Some(0), None));
        assert!(r.timings_ms.setup_commands.is_some());
        // A failing command ends the trial before the agent, as `errored (setup)`.
        let text = crate::trial::testkit::SUITE.replace(
            "wall_timeout_seconds = 7\n",
            "wall_timeout_seconds = 7\nsetup = [\"echo oops >&2; exit 4\"]\n",
        );
        let (_dir, suite) = crate::trial::testkit::suite_from(&text);
        let lab = Lab::new(&suite);
        let ctx = lab.context(&suite);
        let r = run_trial(&ctx, &planned("t", "cmd"));
        assert_eq!(
            r.outcome,
            Outcome::Errored {
                kind: ErrorKind::Setup
            }
        );
        assert_eq!(
            r.reason,
            "setup: setup command 1 of 1 (`echo oops >&2; exit 4`) exited 4; its output begins: oops (all of it in setup/stdout and setup/stderr)"
        );
        assert_eq!(r.setup.and_then(|s| s.failed), Some(1));
    }

    #[test]
    fn timings_are_laps_in_milliseconds() {
        assert_eq!(ms(Duration::from_micros(1500)), 1.5);
        let mut clock = Clock::start();
        clock.lap(Phase::Setup);
        clock.lap(Phase::Agent);
        clock.total();
        let t = &clock.timings;
        let (setup, agent) = (t.setup.expect("setup"), t.agent.expect("agent"));
        assert!(t.total >= setup + agent - 0.002, "{t:?}");
    }
}
