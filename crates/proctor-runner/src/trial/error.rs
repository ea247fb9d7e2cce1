//! How a trial ends when a stage cannot go on: one [`TrialError`], typed by what failed, turned
//! into an `errored` record. Such a record is never evidence about the agent.

use std::fmt;

use proctor_records::timings::Timings;
use proctor_score::endstate::{AgentEnd, EndState};
use proctor_score::{ErrorKind, Outcome};
use proctor_suite::plan::{Plan, PlannedTrial};

use crate::record::{HarnessNote, Hashes, LaunchRecord, SetupRecord, TrialRecord, RECORD_VERSION};

/// The stages of a trial, in the order they run (docs/design.md, "Trial pipeline stages").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// Folders, workspace layers, the allow-list, shims, the calls log (`trial/prepare.rs`).
    Prepare,
    /// The adapter, its preflight, the model endpoint, the environment, the services and the
    /// sandbox spec (`trial/launch.rs`).
    Launch,
    /// The sandbox run, to the full stop (`trial/execute.rs`).
    Execute,
    /// The end state, the ledgers and the harness notes (`trial/capture.rs`).
    Capture,
    /// The checks over the end state with holdouts (`trial/checks.rs`).
    Checks,
    /// The verdict (`trial/grade.rs`).
    Grade,
}

impl Stage {
    /// The stage's name, as in docs/design.md.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Prepare => "prepare",
            Stage::Launch => "launch",
            Stage::Execute => "execute",
            Stage::Capture => "capture",
            Stage::Checks => "checks",
            Stage::Grade => "grade",
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a trial could not go on: the agent could not start, or proctor itself failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrialError {
    /// The agent could not start: its CLI is missing, lacks a flag, or refused the launch.
    #[error("{reason}")]
    AgentStart {
        /// What is missing or wrong, in a sentence.
        reason: String,
    },
    /// The task's environment could not be provided (its image is no longer unpacked).
    #[error("{reason}")]
    Environment {
        /// What is missing, in a sentence.
        reason: String,
    },
    /// A `setup` command failed (or the setup could not start): the start state could not be
    /// built, which is the suite's doing, not the agent's.
    #[error("{reason}")]
    Setup {
        /// Which command, how it ended, the head of its output.
        reason: String,
        /// The setup as it ran.
        record: Box<SetupRecord>,
    },
    /// proctor failed: a folder it could not make, a file it could not write, a sandbox it could
    /// not build.
    #[error("{reason}")]
    Harness {
        /// The stage that failed.
        stage: Stage,
        /// What failed, in a sentence.
        reason: String,
    },
}

impl TrialError {
    /// A failure of proctor itself in `stage`.
    pub fn harness(stage: Stage, reason: impl Into<String>) -> TrialError {
        TrialError::Harness {
            stage,
            reason: reason.into(),
        }
    }

    /// The agent could not start.
    pub fn agent_start(reason: impl Into<String>) -> TrialError {
        TrialError::AgentStart {
            reason: reason.into(),
        }
    }

    /// The task's environment could not be provided.
    pub fn environment(reason: impl Into<String>) -> TrialError {
        TrialError::Environment {
            reason: reason.into(),
        }
    }

    /// A failed setup, with its record.
    pub fn setup(reason: impl Into<String>, record: SetupRecord) -> TrialError {
        TrialError::Setup {
            reason: reason.into(),
            record: Box::new(record),
        }
    }

    /// What kind of `errored` this makes the trial.
    pub fn kind(&self) -> ErrorKind {
        match self {
            TrialError::AgentStart { .. } => ErrorKind::AgentStart,
            TrialError::Environment { .. } => ErrorKind::Environment,
            TrialError::Harness { .. } => ErrorKind::Harness,
            TrialError::Setup { .. } => ErrorKind::Setup,
        }
    }

    /// The stage that failed (an agent that cannot start fails its launch; a missing
    /// environment, the preparation).
    pub fn stage(&self) -> Stage {
        match self {
            TrialError::AgentStart { .. } => Stage::Launch,
            TrialError::Environment { .. } => Stage::Prepare,
            TrialError::Harness { stage, .. } => *stage,
            TrialError::Setup { .. } => Stage::Launch,
        }
    }

    /// What failed, in a sentence.
    pub fn reason(&self) -> &str {
        match self {
            TrialError::AgentStart { reason }
            | TrialError::Environment { reason }
            | TrialError::Harness { reason, .. }
            | TrialError::Setup { reason, .. } => reason,
        }
    }

    /// The `errored` record of the planned trial: no end state but why the agent never started,
    /// the timings so far (`total` 0 when the trial never got that far), and, for a failure of
    /// proctor, the reason as a harness note.
    pub fn into_record(self, plan: &Plan, planned: &PlannedTrial, timings: Timings) -> TrialRecord {
        let kind = self.kind();
        let reason = self.reason().to_string();
        let setup = match self {
            TrialError::Setup { record, .. } => Some(*record),
            _ => None,
        };
        let harness_notes = match kind {
            ErrorKind::Harness => vec![HarnessNote::run(reason.clone())],
            _ => Vec::new(),
        };
        TrialRecord {
            record_version: RECORD_VERSION,
            plan: planned.clone(),
            hashes: Hashes {
                suite: plan.suite_hash.clone(),
                fixture: plan.fixture_hash.clone(),
                mutation: planned.mutation.clone(),
                ..Hashes::default()
            },
            isolation: None,
            launch: LaunchRecord::default(),
            settings: None,
            timings_ms: timings,
            end_state: EndState {
                agent: AgentEnd {
                    started: false,
                    not_started: Some(reason.clone()),
                    not_started_kind: Some(kind),
                    ..AgentEnd::default()
                },
                ..EndState::default()
            },
            verdict: None,
            ledgers: crate::model::Ledgers::default(),
            limit_reached: None,
            outcome: Outcome::Errored { kind },
            reason: format!("{}: {reason}", kind.as_str()),
            sitting: None,
            setup,
            text_diffs: Vec::new(),
            services: None,
            capture_notes: Vec::new(),
            harness_notes,
        }
    }
}

#[cfg(test)]
mod tests {
    use proctor_suite::plan::TrialMode;

    use super::*;
    use crate::record::NoteStage;

    fn plan() -> Plan {
        Plan {
            suite_id: "s".into(),
            suite_hash: "suitehash".into(),
            fixture_hash: "fixturehash".into(),
            trial_mode: TrialMode::Dev,
            trials_per_cell: 1,
            trials: Vec::new(),
        }
    }

    fn planned() -> PlannedTrial {
        crate::trial::testkit::planned("t", "v")
    }

    #[test]
    fn each_error_knows_its_kind_and_stage() {
        let e = TrialError::agent_start("`claude` is not installed");
        assert_eq!(
            (e.kind(), e.stage()),
            (ErrorKind::AgentStart, Stage::Launch)
        );
        let e = TrialError::harness(Stage::Execute, "the sandbox failed: boom");
        assert_eq!((e.kind(), e.stage()), (ErrorKind::Harness, Stage::Execute));
        assert_eq!(e.reason(), "the sandbox failed: boom");
        assert_eq!(e.to_string(), "the sandbox failed: boom");
        assert_eq!(Stage::Checks.to_string(), "checks");
    }

    #[test]
    fn an_agent_that_cannot_start_is_an_agent_start_record_without_notes() {
        let r = TrialError::agent_start("`claude` is not installed").into_record(
            &plan(),
            &planned(),
            Timings::default(),
        );
        assert_eq!(
            r.outcome,
            Outcome::Errored {
                kind: ErrorKind::AgentStart
            }
        );
        assert_eq!(r.reason, "agent-start: `claude` is not installed");
        assert!(r.harness_notes.is_empty());
        assert!(r.verdict.is_none());
        let agent = &r.end_state.agent;
        assert!(!agent.started);
        assert_eq!(
            agent.not_started.as_deref(),
            Some("`claude` is not installed")
        );
        assert_eq!(agent.not_started_kind, Some(ErrorKind::AgentStart));
        assert_eq!(r.hashes.suite, "suitehash");
        assert_eq!(r.hashes.fixture, "fixturehash");
        assert_eq!(r.plan, planned());
    }

    #[test]
    fn a_harness_failure_is_a_harness_record_with_its_reason_as_a_note() {
        let r = TrialError::harness(Stage::Prepare, "cannot write the shims: full").into_record(
            &plan(),
            &planned(),
            Timings::default(),
        );
        assert_eq!(
            r.outcome,
            Outcome::Errored {
                kind: ErrorKind::Harness
            }
        );
        assert_eq!(r.reason, "harness: cannot write the shims: full");
        assert_eq!(r.harness_notes.len(), 1);
        assert_eq!(r.harness_notes[0].stage, NoteStage::Run);
        assert_eq!(r.harness_notes[0].message, "cannot write the shims: full");
        assert!(r.isolation.is_none() && r.settings.is_none() && r.services.is_none());
    }

    #[test]
    fn an_errored_record_keeps_the_timings_so_far_with_a_total() {
        let none =
            TrialError::agent_start("x").into_record(&plan(), &planned(), Timings::default());
        assert_eq!(
            serde_json::to_value(none.timings_ms).expect("json"),
            serde_json::json!({"total": 0.0})
        );
        let so_far = Timings {
            setup: Some(3.5),
            agent: Some(9.0),
            ..Timings::default()
        };
        let r = TrialError::harness(Stage::Execute, "x").into_record(&plan(), &planned(), so_far);
        assert_eq!(r.timings_ms.setup, Some(3.5));
        assert_eq!(r.timings_ms.agent, Some(9.0));
        assert_eq!(r.timings_ms.total, 0.0);
    }

    #[test]
    fn an_errored_record_is_written_as_before_and_reads_back_with_its_kind() {
        let r =
            TrialError::agent_start("no flag").into_record(&plan(), &planned(), Timings::default());
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["outcome"], "errored");
        assert!(v["isolation"].is_null() && v["settings"].is_null() && v["services"].is_null());
        assert!(v.get("harness_notes").is_none(), "no notes, no key: {v:#}");
        assert_eq!(v["end_state"]["agent"]["not_started_kind"], "agent-start");
        let back: TrialRecord = serde_json::from_value(v).unwrap();
        assert_eq!(back.outcome, r.outcome);
        let r = TrialError::harness(Stage::Launch, "no port").into_record(
            &plan(),
            &planned(),
            Timings::default(),
        );
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["harness_notes"], serde_json::json!(["no port"]));
        let back: TrialRecord = serde_json::from_value(v).unwrap();
        assert_eq!(back.outcome, r.outcome);
        assert_eq!(back.harness_notes, r.harness_notes);
    }
}
