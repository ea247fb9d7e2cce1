//! The record of one trial as kept in `trial.json`: what was planned, how it was isolated,
//! exactly how the agent was launched, the captured end state, and the verdict.
//!
//! The record is typed end to end, and written exactly as it always was: the outcome as its
//! label, the isolation, settings and services with their keys sorted, each harness note as a
//! sentence. Reading it back ([`StoredRecord`]) is the one place a label becomes an
//! [`Outcome`] again.

use std::collections::BTreeMap;

use proctor_records::isolation::{Isolation, ServiceReport};
use proctor_records::timings::Timings;
use proctor_records::Limit;
use proctor_score::{EndState, ErrorKind, Outcome, TrialVerdict};
use proctor_suite::plan::PlannedTrial;
use proctor_suite::Settings;
use serde::{Deserialize, Serialize, Serializer};

use crate::{CaptureNote, HarnessNote, LaunchRecord, SetupRecord, SittingRecord, TextDiffRecord};

/// Version of the trial record's layout.
pub const RECORD_VERSION: u32 = 1;

/// Everything recorded about one trial.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(from = "StoredRecord")]
pub struct TrialRecord {
    /// [`RECORD_VERSION`].
    pub record_version: u32,
    /// The plan entry.
    pub plan: PlannedTrial,
    /// What the trial ran against.
    pub hashes: Hashes,
    /// How the trial was isolated: what was really in effect; absent when the harness failed
    /// before the sandbox ran.
    #[serde(serialize_with = "sorted")]
    #[schemars(with = "serde_json::Value")]
    pub isolation: Option<Isolation>,
    /// How the agent was launched.
    pub launch: LaunchRecord,
    /// The settings the trial ran with; absent when the harness failed before the sandbox ran.
    #[serde(serialize_with = "sorted")]
    #[schemars(with = "serde_json::Value")]
    pub settings: Option<Settings>,
    /// Timings of each phase, in milliseconds.
    #[schemars(with = "BTreeMap<String, f64>")]
    pub timings_ms: Timings,
    /// The captured end state.
    pub end_state: EndState,
    /// The outcome, written as its label.
    #[serde(serialize_with = "label")]
    #[schemars(with = "String")]
    pub outcome: Outcome,
    /// Why this outcome.
    pub reason: String,
    /// Everything scoring decided, with evidence; absent when the harness failed before the
    /// agent could run.
    pub verdict: Option<TrialVerdict>,
    /// Tokens, requests and money, by source; never summed into one score.
    pub ledgers: crate::Ledgers,
    /// The per-trial limit that stopped the trial's model requests (`tokens`, `cost_usd`,
    /// `requests`), if one was reached; the trial is graded from its end state as usual.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub limit_reached: Option<Limit>,
    /// Services: readiness, guard and exit, as the sandbox reported them; absent when the
    /// harness failed before the sandbox ran.
    #[serde(serialize_with = "sorted")]
    #[schemars(with = "serde_json::Value")]
    pub services: Option<Vec<ServiceReport>>,
    /// What the capture could not keep of what the agent made (a path past PATH_MAX, an entry
    /// it could not read or carry out, the workspace lost with an init its own limit killed),
    /// each with its cause. Not a harness problem: the trial is graded from what was kept, and
    /// each entry named here is in the end state's changes as added, with no content.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capture_notes: Vec<CaptureNote>,
    /// Problems of the harness (not the agent) met during the trial.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<String>")]
    pub harness_notes: Vec<HarnessNote>,
    /// A person's sitting (`proctor sit`): who sat, where the answer came from, their notes;
    /// absent for an agent's trial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sitting: Option<SittingRecord>,
    /// The task's `setup` commands as they ran before the agent started; absent for a task
    /// without setup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<SetupRecord>,
    /// Files the suite's `[diff]` converters printed as text: changed ones with their text
    /// diff, and those a `file_contains` reads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub text_diffs: Vec<TextDiffRecord>,
}

/// A trial record as `trial.json` holds it: the outcome as a label. [`TrialRecord`] is read
/// through it.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
pub struct StoredRecord {
    /// [`RECORD_VERSION`].
    pub record_version: u32,
    /// The plan entry.
    pub plan: PlannedTrial,
    /// What the trial ran against.
    pub hashes: Hashes,
    /// How the trial was isolated: what was really in effect; absent when the harness failed
    /// before the sandbox ran.
    #[schemars(with = "serde_json::Value")]
    pub isolation: Option<Isolation>,
    /// How the agent was launched.
    pub launch: LaunchRecord,
    /// The settings the trial ran with; absent when the harness failed before the sandbox ran.
    #[schemars(with = "serde_json::Value")]
    pub settings: Option<Settings>,
    /// Timings of each phase, in milliseconds.
    #[schemars(with = "BTreeMap<String, f64>")]
    pub timings_ms: Timings,
    /// The captured end state.
    pub end_state: EndState,
    /// The outcome label.
    pub outcome: String,
    /// Why this outcome.
    pub reason: String,
    /// Everything scoring decided, with evidence; absent when the harness failed before the
    /// agent could run.
    pub verdict: Option<TrialVerdict>,
    /// Tokens, requests and money, by source; never summed into one score.
    #[serde(default)]
    pub ledgers: crate::Ledgers,
    /// The per-trial limit that stopped the trial's model requests (`tokens`, `cost_usd`,
    /// `requests`), if one was reached; the trial is graded from its end state as usual.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub limit_reached: Option<Limit>,
    /// Services: readiness, guard and exit, as the sandbox reported them; absent when the
    /// harness failed before the sandbox ran.
    #[schemars(with = "serde_json::Value")]
    pub services: Option<Vec<ServiceReport>>,
    /// What the capture could not keep of what the agent made (a path past PATH_MAX, an entry
    /// it could not read or carry out, the workspace lost with an init its own limit killed),
    /// each with its cause. Not a harness problem: the trial is graded from what was kept, and
    /// each entry named here is in the end state's changes as added, with no content.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capture_notes: Vec<CaptureNote>,
    /// Problems of the harness (not the agent) met during the trial.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<String>")]
    pub harness_notes: Vec<HarnessNote>,
    /// A person's sitting, for a trial `proctor sit` made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sitting: Option<SittingRecord>,
    /// The task's `setup` commands as they ran, for a task with setup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<SetupRecord>,
    /// Files the suite's `[diff]` converters printed as text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub text_diffs: Vec<TextDiffRecord>,
}

impl From<StoredRecord> for TrialRecord {
    fn from(r: StoredRecord) -> TrialRecord {
        let outcome = stored_outcome(&r);
        TrialRecord {
            record_version: r.record_version,
            plan: r.plan,
            hashes: r.hashes,
            isolation: r.isolation,
            launch: r.launch,
            settings: r.settings,
            timings_ms: r.timings_ms,
            end_state: r.end_state,
            outcome,
            reason: r.reason,
            verdict: r.verdict,
            ledgers: r.ledgers,
            limit_reached: r.limit_reached,
            services: r.services,
            capture_notes: r.capture_notes,
            harness_notes: r.harness_notes,
            sitting: r.sitting,
            setup: r.setup,
            text_diffs: r.text_diffs,
        }
    }
}

/// The outcome of a stored record: its verdict's; without a verdict the harness failed before
/// scoring, so it is `errored`, of the kind recorded with the agent's end (a record made before
/// that was recorded names its kind first in its reason, `agent-start: ...` or
/// `harness: ...`).
fn stored_outcome(r: &StoredRecord) -> Outcome {
    if let Some(v) = &r.verdict {
        return v.outcome.clone();
    }
    let kind = r.end_state.agent.not_started_kind.unwrap_or(
        if r.reason.starts_with(ErrorKind::AgentStart.as_str()) {
            ErrorKind::AgentStart
        } else {
            ErrorKind::Harness
        },
    );
    Outcome::Errored { kind }
}

/// Writes a value the way these record sections always were written: through a JSON value,
/// so every object's keys are sorted (`null` for a value JSON cannot hold).
fn sorted<T: Serialize, S: Serializer>(value: &T, s: S) -> Result<S::Ok, S::Error> {
    serde_json::to_value(value).unwrap_or_default().serialize(s)
}

/// Writes an outcome as its label.
fn label<S: Serializer>(outcome: &Outcome, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(outcome.label())
}

/// The hashes identifying what a trial ran against.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Hashes {
    /// BLAKE3 of the suite directory.
    pub suite: String,
    /// BLAKE3 of the fixture tree.
    pub fixture: String,
    /// The hidden mutation's file name and hash, when there is one.
    pub mutation: Option<proctor_suite::plan::ChosenMutation>,
    /// BLAKE3 of each holdout file, by path under `holdout/TASK_ID/`.
    pub holdout: BTreeMap<String, String>,
    /// BLAKE3 of each file laid in for the variant, by workspace path.
    pub variant_files: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use proctor_suite::plan::PlannedTrial;

    use super::*;

    fn record(outcome: Outcome, verdict: Option<TrialVerdict>) -> TrialRecord {
        TrialRecord {
            record_version: RECORD_VERSION,
            plan: PlannedTrial {
                id: "t.v.0".into(),
                task: "t".into(),
                variant: "v".into(),
                index: 0,
                mutation: None,
                seed: None,
            },
            hashes: Hashes::default(),
            isolation: None,
            launch: LaunchRecord::default(),
            settings: None,
            timings_ms: Timings::default(),
            end_state: EndState::default(),
            outcome,
            reason: "why".into(),
            verdict,
            ledgers: crate::Ledgers::default(),
            limit_reached: None,
            services: None,
            capture_notes: Vec::new(),
            harness_notes: Vec::new(),
            sitting: None,
            setup: None,
            text_diffs: Vec::new(),
        }
    }

    fn verdict(outcome: Outcome) -> TrialVerdict {
        TrialVerdict {
            outcome,
            reason: "why".into(),
            task_success: false,
            success: None,
            rubric: None,
            metrics: None,
            reversed: true,
            answer_reads_as: None,
            integrity: Default::default(),
        }
    }

    #[test]
    fn the_outcome_is_written_as_its_label_and_read_back_whole_from_the_verdict() {
        let wrong = Outcome::Wrong { reversed: true };
        let r = record(wrong.clone(), Some(verdict(wrong.clone())));
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["outcome"], "wrong");
        assert_eq!(v["verdict"]["outcome"]["reversed"], true);
        let back: TrialRecord = serde_json::from_value(v).unwrap();
        assert_eq!(back.outcome, wrong);
        let ungradeable = Outcome::Ungradeable {
            reason: "a check timed out".into(),
        };
        let r = record(ungradeable.clone(), Some(verdict(ungradeable.clone())));
        let back: TrialRecord = serde_json::from_value(serde_json::to_value(&r).unwrap()).unwrap();
        assert_eq!(back.outcome, ungradeable);
    }

    #[test]
    fn an_old_errored_record_without_a_kind_reads_its_kind_from_its_reason() {
        let mut v = serde_json::to_value(record(
            Outcome::Errored {
                kind: ErrorKind::Harness,
            },
            None,
        ))
        .unwrap();
        v["reason"] = "agent-start: `claude` is not installed".into();
        let back: TrialRecord = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(
            back.outcome,
            Outcome::Errored {
                kind: ErrorKind::AgentStart
            }
        );
        v["reason"] = "harness: cannot write the shims".into();
        let back: TrialRecord = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(
            back.outcome,
            Outcome::Errored {
                kind: ErrorKind::Harness
            }
        );
        // A recorded kind wins over the words.
        v["end_state"]["agent"]["not_started_kind"] = "agent-start".into();
        let back: TrialRecord = serde_json::from_value(v).unwrap();
        assert_eq!(
            back.outcome,
            Outcome::Errored {
                kind: ErrorKind::AgentStart
            }
        );
    }

    #[test]
    fn settings_are_written_with_sorted_keys_as_they_always_were() {
        let settings = Settings {
            wall_timeout: Duration::from_secs(300),
            validation_timeout: Duration::from_millis(1500),
            network: proctor_suite::model::Network::None,
            check_network: proctor_suite::model::Network::Host,
            check_root: Default::default(),
            allow: vec!["chat".into()],
            offline_user: true,
            undo_window: Duration::from_secs(60),
            limits: Default::default(),
            setup: Vec::new(),
            binds: Vec::new(),
            allowed_hosts: Vec::new(),
        };
        let mut r = record(Outcome::Completed, Some(verdict(Outcome::Completed)));
        r.settings = Some(settings.clone());
        let text = serde_json::to_string(&r).unwrap();
        // What the record held before it was typed: the settings as a JSON value.
        let before = serde_json::to_string(&serde_json::to_value(&settings).unwrap()).unwrap();
        assert!(text.contains(&format!(r#""settings":{before}"#)), "{text}");
        assert!(
            before.starts_with(r#"{"allow":["chat"],"check_network":"host","network":"none","offline_user":true,"undo_window":{"nanos":0,"secs":60}"#),
            "{before}"
        );
        let back: TrialRecord = serde_json::from_str(&text).unwrap();
        assert_eq!(back.settings, Some(settings.clone()));
        // A record written before `check_network` existed reads as checks with no network,
        // which is what they had.
        let old = text.replace(r#""check_network":"host","#, "");
        assert_ne!(old, text);
        let back: TrialRecord = serde_json::from_str(&old).unwrap();
        let settings = back.settings.unwrap();
        assert_eq!(settings.check_network, proctor_suite::model::Network::None);
    }
}
