//! The record of one trial as kept in `trial.json`: what was planned, how it was isolated,
//! exactly how the agent was launched, the captured end state, and the verdict.
//!
//! The record is typed end to end, and written exactly as it always was: the outcome as its
//! label, the isolation, settings and services with their keys sorted, each harness note as a
//! sentence. Reading it back ([`StoredRecord`]) is the one place a label becomes an
//! [`Outcome`] again.

use proctor_records::timings::Timings;
use proctor_records::Limit;
use std::collections::BTreeMap;
use std::fmt;

use proctor_sandbox::{Isolation, ServiceReport};
use proctor_score::{EndState, ErrorKind, Outcome, TrialVerdict};
use proctor_suite::plan::PlannedTrial;
use proctor_suite::Settings;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Version of the trial record's layout.
pub const RECORD_VERSION: u32 = 1;

/// The JSON Schema of `trial.json`: the store's summary, this record, and where it ran.
pub fn trial_json_schema() -> serde_json::Value {
    schemars::schema_for!(proctor_store::TrialFile<TrialRecord>).to_value()
}

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
    pub ledgers: crate::model::Ledgers,
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

/// A file converted to text by the suite's `[diff]` converter, after the agent stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TextDiffRecord {
    /// The workspace path.
    pub path: String,
    /// The converter's argv, as the suite gives it (`{}` for the path).
    pub converter: Vec<String>,
    /// The unified diff of the converted start and end (its first 64 KiB; the whole in the
    /// trial's `text/PATH.diff`); absent for a file that did not change, converted only for
    /// `file_contains`, or when a conversion failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// The whole diff's size in bytes.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub diff_bytes: u64,
    /// Why a conversion failed; `file_contains` then finds no text in the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The task's `setup` commands as they ran, in the trial's sandbox, before the agent started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SetupRecord {
    /// The commands, in order, each run with `sh -c` in the workspace.
    pub commands: Vec<String>,
    /// The 1-based index of the command that failed (the trial is then `errored (setup)`);
    /// absent when every command succeeded, or when the setup ended otherwise (timed out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<usize>,
    /// The exit status of the setup: 0, or the failed command's.
    pub exit: Option<i32>,
    /// The signal that killed it, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Whether it was stopped at the trial's wall timeout.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
    /// How long it ran, in milliseconds.
    pub milliseconds: u64,
    /// Bytes the commands wrote to stdout (all of it in the trial's `setup/stdout`).
    pub stdout_bytes: u64,
    /// The first bytes of stdout (2048), lossily decoded.
    pub stdout_head: String,
    /// Bytes the commands wrote to stderr (all of it in the trial's `setup/stderr`).
    pub stderr_bytes: u64,
    /// The first bytes of stderr (2048), lossily decoded.
    pub stderr_head: String,
    /// What the setup changed in the workspace: part of the start state, never the agent's
    /// changes (kept in the trial's `setup/changes/`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<proctor_score::FileChange>,
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
    pub ledgers: crate::model::Ledgers,
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

/// Who made a harness note.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoteStage {
    /// A stage of the trial's own run (its capture, mostly): the note is an operational fault
    /// of the trial.
    Run,
    /// A later `proctor rescore` that could not score the trial again: the trial keeps its
    /// verdict, and the note says why.
    Rescore,
}

/// Something the agent made that the capture could not keep, and why (the agent's doing, so
/// never a harness fault).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CaptureNote {
    /// The workspace path it concerns (relative; cut to [`CAPTURE_NOTE_PATH_MAX`] bytes with
    /// `…` when longer), or `.` for the whole workspace.
    pub path: String,
    /// Why it could not be kept.
    pub cause: String,
}

/// The most bytes of a path a [`CaptureNote`] keeps.
pub const CAPTURE_NOTE_PATH_MAX: usize = 240;

impl CaptureNote {
    /// A note on `path` (cut when long) for `cause`.
    pub fn new(path: &str, cause: impl Into<String>) -> CaptureNote {
        let mut path = path.to_string();
        if path.len() > CAPTURE_NOTE_PATH_MAX {
            let mut cut = CAPTURE_NOTE_PATH_MAX;
            while !path.is_char_boundary(cut) {
                cut -= 1;
            }
            let total = path.len();
            path.truncate(cut);
            path.push_str(&format!("… ({total} bytes)"));
        }
        CaptureNote {
            path,
            cause: cause.into(),
        }
    }
}

impl std::fmt::Display for CaptureNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.cause)
    }
}

/// A problem of the harness (not the agent) met with a trial. Written as a sentence, as it
/// always was: a rescore's note starts with `rescore: `, a run's is the message alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HarnessNote {
    /// Who made it.
    pub stage: NoteStage,
    /// What went wrong, in a sentence.
    pub message: String,
}

/// How a rescore's note starts when written.
const RESCORE_PREFIX: &str = "rescore: ";

impl HarnessNote {
    /// A note of the trial's own run.
    pub fn run(message: impl Into<String>) -> HarnessNote {
        HarnessNote {
            stage: NoteStage::Run,
            message: message.into(),
        }
    }

    /// A note of a rescore.
    pub fn rescore(message: impl Into<String>) -> HarnessNote {
        HarnessNote {
            stage: NoteStage::Rescore,
            message: message.into(),
        }
    }

    /// Reads a note as written.
    pub fn parse(text: &str) -> HarnessNote {
        match text.strip_prefix(RESCORE_PREFIX) {
            Some(message) => HarnessNote::rescore(message),
            None => HarnessNote::run(text),
        }
    }
}

impl fmt::Display for HarnessNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.stage {
            NoteStage::Run => f.write_str(&self.message),
            NoteStage::Rescore => write!(f, "{RESCORE_PREFIX}{}", self.message),
        }
    }
}

impl Serialize for HarnessNote {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for HarnessNote {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<HarnessNote, D::Error> {
        String::deserialize(d).map(|text| HarnessNote::parse(&text))
    }
}

/// A person's sitting of a trial (`proctor sit`): the person sat in the agent's seat (variant
/// `human:NAME`, agent `human`), with the same sandbox, workspace, services and shims, on a
/// terminal; the trial is graded like any other.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SittingRecord {
    /// The person, as `--as` named them.
    pub person: String,
    /// How the final answer was given.
    pub answer_from: AnswerFrom,
    /// The person's prose notes (`--notes FILE`, or typed at the end), kept as written; `None`
    /// when they wrote none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    /// The wall timeout `--timeout` asked for, in seconds; `None`: the sitting had none.
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    /// Bytes the terminal showed the person during the sitting.
    pub terminal_bytes: u64,
    /// Bytes of those the transcript (`agent.stdout`) left out: past the trial's `output_mb`,
    /// its first and last halves are kept, the cut marked.
    #[serde(default)]
    pub terminal_cut: u64,
}

/// Where a sitting's final answer came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum AnswerFrom {
    /// Typed when asked, after the person left the shell and the trial had fully stopped.
    Asked,
    /// Given beforehand with `--answer`.
    Flag,
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

/// The exact launch of the agent, secrets redacted.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LaunchRecord {
    /// The agent kind.
    pub agent: String,
    /// The model, when the variant names one.
    pub model: Option<String>,
    /// The prompt the agent received.
    pub prompt: String,
    /// The command line.
    pub argv: Vec<String>,
    /// The environment, with secret-looking values redacted.
    pub env: BTreeMap<String, String>,
    /// The allowed interface commands and the real programs behind them.
    pub allow: Vec<crate::allow::Allowed>,
    /// The image the trial's root was, if not the host's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageRecord>,
    /// The resources the task's environment asks for, and whether they were enforced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourcesRecord>,
    /// The trial's resource limits and how each was enforced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<LimitsRecord>,
}

/// A trial's resource limits as they were in force, and how each was enforced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LimitsRecord {
    /// Memory of the trial's processes together, MiB.
    pub memory_mb: u64,
    /// Processes at once.
    pub processes: u64,
    /// What the trial may write, MiB.
    pub disk_mb: u64,
    /// The agent's stdout and stderr kept, each, MiB.
    pub output_mb: u64,
    /// What enforced each limit, by its key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub enforced_by: BTreeMap<String, String>,
    /// Why a limit was not enforced, by its key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub not_enforced: BTreeMap<String, String>,
}

/// The resource hints of a trial's task (`cpus`, `memory_mb`, `storage_mb`) as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ResourcesRecord {
    /// CPUs asked for.
    pub cpus: Option<f64>,
    /// Memory asked for, MiB.
    pub memory_mb: Option<u64>,
    /// Disk space asked for, MiB.
    pub storage_mb: Option<u64>,
    /// Whether proctor held the trial to them.
    pub enforced: bool,
    /// Why not, when they were not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_enforced: Option<String>,
}

impl ResourcesRecord {
    /// The record of `hints`, or `None` when the task gives none. A hint is not a limit (what a
    /// trial is held to is its `limits`): each is recorded as not enforced, with that reason.
    pub fn of(hints: proctor_suite::ResourceHints) -> Option<ResourcesRecord> {
        (!hints.is_empty()).then(|| ResourcesRecord {
            cpus: hints.cpus,
            memory_mb: hints.memory_mb,
            storage_mb: hints.storage_mb,
            enforced: false,
            not_enforced: Some(
                "a resource hint is recorded, not enforced: a trial is held to its `limits` (memory_mb, processes, disk_mb, output_mb), which a hint does not set"
                    .to_string(),
            ),
        })
    }
}

/// The image a trial ran in (the same record `run.json` lists each task's image with).
pub use proctor_records::run::ImageRecord;

impl LaunchRecord {
    /// The record with every occurrence of `secret` (a trial's gateway token) in its command
    /// line and environment replaced by `[redacted]`.
    pub fn without(mut self, secret: &str) -> LaunchRecord {
        if secret.is_empty() {
            return self;
        }
        let scrub = |s: &mut String| {
            if s.contains(secret) {
                *s = s.replace(secret, "[redacted]");
            }
        };
        self.argv.iter_mut().for_each(scrub);
        self.env.values_mut().for_each(scrub);
        self
    }
}

/// Whether an environment variable's value must not be written down.
pub fn is_secret(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    ["KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH"]
        .iter()
        .any(|s| n.contains(s))
}

/// The environment as recorded: secrets replaced by `[redacted]`.
pub fn redact_env(env: &[(String, String)]) -> BTreeMap<String, String> {
    env.iter()
        .map(|(k, v)| {
            let v = if is_secret(k) {
                "[redacted]".to_string()
            } else {
                v.clone()
            };
            (k.clone(), v)
        })
        .collect()
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
            ledgers: crate::model::Ledgers::default(),
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
    fn harness_notes_are_written_as_the_sentences_they_always_were() {
        let notes = vec![
            HarnessNote::run("cannot read calls.jsonl: gone"),
            HarnessNote::rescore("cannot rebuild the start state: gone"),
        ];
        let json = serde_json::to_string(&notes).unwrap();
        assert_eq!(
            json,
            r#"["cannot read calls.jsonl: gone","rescore: cannot rebuild the start state: gone"]"#
        );
        let back: Vec<HarnessNote> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, notes);
        assert_eq!(back[1].stage, NoteStage::Rescore);
        assert_eq!(back[1].message, "cannot rebuild the start state: gone");
        assert_eq!(
            notes[1].to_string(),
            "rescore: cannot rebuild the start state: gone"
        );
    }

    #[test]
    fn a_note_that_merely_mentions_rescore_is_a_run_note() {
        let n = HarnessNote::parse("service `rescore`: events.jsonl line 2: bad");
        assert_eq!(n.stage, NoteStage::Run);
        assert_eq!(
            n,
            HarnessNote::run("service `rescore`: events.jsonl line 2: bad")
        );
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

    #[test]
    fn secrets_are_redacted_and_the_rest_kept() {
        let env = vec![
            ("ANTHROPIC_API_KEY".to_string(), "sk-123".to_string()),
            ("GITHUB_TOKEN".to_string(), "ghp".to_string()),
            ("PATH".to_string(), "/bin".to_string()),
        ];
        let r = redact_env(&env);
        assert_eq!(r["ANTHROPIC_API_KEY"], "[redacted]");
        assert_eq!(r["GITHUB_TOKEN"], "[redacted]");
        assert_eq!(r["PATH"], "/bin");
    }
}
