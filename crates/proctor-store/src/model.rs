//! The records the store keeps: a run's metadata (`run.json`) and a trial's summary (the part of
//! `trial.json` that the index holds).

use crate::error::StoreError;
use crate::RunId;
use jiff::Timestamp;
use proctor_records::format::{run_format, trial_format, unversioned};
use proctor_records::run::{Isolation, RunMode, RunSections};
use proctor_records::{FormatVersion, Limit, OutcomeKind, OutcomeTally};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// The version of the `run.json` and `trial.json` layouts this crate writes, as every proctor
/// has written it (the major version); the `major.minor` version the files carry beside it is
/// their `format_version` ([`proctor_records::RUN_FORMAT`], [`proctor_records::TRIAL_FORMAT`]).
pub const FILE_SCHEMA_VERSION: u32 = 1;

/// Where a run stands.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Started and not yet ended (or ended by a crash nobody recorded).
    #[default]
    Running,
    /// Every planned trial was executed.
    Finished,
    /// Stopped before every planned trial ran (Ctrl-C, a fatal error); `run --resume` finishes it.
    Interrupted,
}

impl RunStatus {
    /// The spelling used in `run.json`, the index and the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Finished => "finished",
            RunStatus::Interrupted => "interrupted",
        }
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of parsing a [`RunStatus`] from text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a run status (running, finished or interrupted)")]
pub struct ParseRunStatusError(pub String);

impl FromStr for RunStatus {
    type Err = ParseRunStatusError;

    fn from_str(s: &str) -> Result<RunStatus, ParseRunStatusError> {
        match s {
            "running" => Ok(RunStatus::Running),
            "finished" => Ok(RunStatus::Finished),
            "interrupted" => Ok(RunStatus::Interrupted),
            other => Err(ParseRunStatusError(other.to_string())),
        }
    }
}

/// The machine a run executed on, recorded so numbers from different hosts are not mixed blindly.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostInfo {
    /// The host name.
    pub hostname: String,
    /// The kernel release (`uname -r`).
    pub kernel: String,
    /// Logical CPUs available to proctor.
    pub cpus: u32,
}

impl HostInfo {
    /// Reads the host name, kernel release and CPU count of this machine; fields that cannot be
    /// read are left empty (or 0) rather than failing the run.
    pub fn detect() -> HostInfo {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_string())
                .unwrap_or_default()
        };
        let cpus = std::thread::available_parallelism()
            .map(|n| u32::try_from(n.get()).unwrap_or(u32::MAX))
            .unwrap_or(0);
        HostInfo {
            hostname: read("/proc/sys/kernel/hostname"),
            kernel: read("/proc/sys/kernel/osrelease"),
            cpus,
        }
    }
}

/// What `run.json` says about a run: what was run, against which suite content, where, and how
/// far it got. The runner fills it; the store adds the id.
///
/// Written at run start and rewritten (atomically) whenever the status changes.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunMeta {
    /// The suite's id.
    pub suite_id: String,
    /// Where the suite was read from.
    pub suite_path: PathBuf,
    /// BLAKE3 over the whole suite directory; `run --resume` refuses when it changed.
    pub suite_hash: String,
    /// BLAKE3 over the fixture.
    pub fixture_hash: String,
    /// What the run was: `dev` or `release` (its plan's trial mode), `oracle` or `sitting`.
    pub trial_mode: RunMode,
    /// Trials per (task, variant) cell.
    pub trials_per_cell: u32,
    /// The variants run, in plan order.
    pub variants: Vec<String>,
    /// The tasks run, in plan order.
    pub tasks: Vec<String>,
    /// How many trials the plan holds.
    pub planned_trials: u64,
    /// The isolation the run actually had (`overlay`, `copy`, `copy-no-namespaces`), never a
    /// claim.
    pub isolation: Isolation,
    /// Agent CLI versions, by variant.
    #[serde(default)]
    pub agent_versions: BTreeMap<String, String>,
    /// The machine.
    pub host: HostInfo,
    /// The proctor version that ran it.
    pub proctor_version: String,
    /// When the run started, written as RFC 3339 UTC to the millisecond; [`crate::Store::create_run`]
    /// sets it to now when it is `None` (it is always set in a `run.json`).
    #[serde(default, with = "proctor_records::time::millis_opt")]
    #[schemars(with = "Option<String>")]
    pub started_at: Option<Timestamp>,
    /// When the run stopped, once it did (RFC 3339 UTC to the millisecond).
    #[serde(with = "proctor_records::time::millis_opt")]
    #[schemars(with = "Option<String>")]
    pub finished_at: Option<Timestamp>,
    /// Where the run stands.
    pub status: RunStatus,
    /// Why proctor stopped the run before every planned trial ran, when it was not the user
    /// (e.g. the store's file system filled up); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// The run's sections (its plan options, its images, its Slurm jobs); `null` when it has
    /// none.
    #[serde(default)]
    pub extra: Option<RunSections>,
}

impl RunMeta {
    /// The run's sections, made (empty) when it has none yet: for the writers of a section.
    pub fn sections_mut(&mut self) -> &mut RunSections {
        self.extra.get_or_insert_with(RunSections::default)
    }
}

/// `run.json` as it lies on disk: its versions, the id, and the metadata's fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunRecord {
    /// The layout's major version, 1 (`FILE_SCHEMA_VERSION`), as every proctor has written it.
    pub schema_version: u32,
    /// The `major.minor` format of this file (`proctor_records::RUN_FORMAT` when written);
    /// `1.0` when absent, as in files written before it was recorded. A `run.json` of another
    /// major version is refused by name.
    #[serde(default = "unversioned", deserialize_with = "run_format")]
    pub format_version: FormatVersion,
    /// The run's id (the same as its folder name).
    pub id: RunId,
    /// Everything else.
    #[serde(flatten)]
    pub meta: RunMeta,
}

/// One run as `proctor list` shows it: its metadata and how many trials finished, by outcome,
/// according to the index.
#[derive(Debug, Clone, PartialEq)]
pub struct RunListing {
    /// The run's id.
    pub id: RunId,
    /// Its metadata.
    pub meta: RunMeta,
    /// Trials finished (rows in the index).
    pub trials_finished: u64,
    /// Finished trials by outcome.
    pub outcomes: OutcomeTally,
    /// Trials whose `trial.json` exists but cannot be read, as the last reindex found them.
    pub damaged: Vec<DamagedTrial>,
}

/// A trial whose `trial.json` exists but is empty or does not parse (torn by a power loss, or
/// damaged since): it is not counted as finished, and it is reported instead of skipped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DamagedTrial {
    /// The trial's id (its folder name).
    pub trial_id: String,
    /// What is wrong with its `trial.json`, in a sentence.
    pub reason: String,
}

/// A run folder whose `run.json` exists but cannot be read: it is left out of the index and
/// reported by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DamagedRun {
    /// The run's id (its folder name).
    pub id: RunId,
    /// What is wrong with its `run.json`, in a sentence.
    pub reason: String,
}

/// What the index keeps of one finished trial: enough for `list`, `show` and `compare` over the
/// whole corpus without opening any trial folder.
///
/// It is also stored inside `trial.json` (as `summary`), which is how `reindex` rebuilds the
/// index from the folders alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TrialSummary {
    /// The trial's id, also its folder name (`TASK.VARIANT.INDEX`).
    pub trial_id: String,
    /// The task id.
    pub task: String,
    /// The variant id.
    pub variant: String,
    /// 0-based index within (task, variant).
    pub trial_index: u32,
    /// Which of the eight outcomes (written as its label: `completed`, `wrong`, ...).
    pub outcome: OutcomeKind,
    /// Why (required for `ungradeable`, useful for `errored`).
    pub reason: Option<String>,
    /// Wall-clock seconds from sandbox setup to full stop.
    pub wall_seconds: f64,
    /// Interface calls made, when the trial had an interface.
    pub calls: Option<u64>,
    /// Wrong turns (errors + repeats + undone + denied).
    pub wrong_turns: Option<u64>,
    /// Model input tokens, when known.
    pub input_tokens: Option<u64>,
    /// Model output tokens, when known.
    pub output_tokens: Option<u64>,
    /// Estimated cost in US dollars, when every price was known.
    pub cost_usd: Option<f64>,
    /// The per-trial limit that stopped the trial (`tokens`, `cost_usd`, `requests`, or a
    /// resource such as `memory`), if one was reached. Trials written before the summary held
    /// it have it in their record, where [`crate::Store::reindex`] finds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_reached: Option<Limit>,
    /// The integrity audit's flags beside the outcome (test tampering, an early exit), each as
    /// `kind: path why`, for the run's progress lines; the full findings are in the record.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
}

/// `trial.json` as it lies on disk: the summary the index keeps, and the runner's full record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TrialFile<R> {
    /// The layout's major version, 1 (`FILE_SCHEMA_VERSION`), as every proctor has written it.
    pub schema_version: u32,
    /// The `major.minor` format of this file (`proctor_records::TRIAL_FORMAT` when written);
    /// `1.0` when absent, as in files written before it was recorded. A `trial.json` of
    /// another major version is refused by name.
    #[serde(default = "unversioned", deserialize_with = "trial_format")]
    pub format_version: FormatVersion,
    /// What the index holds of this trial.
    pub summary: TrialSummary,
    /// Everything else about the trial, as the runner serialized it.
    pub record: R,
    /// Where the trial ran when an executor other than the local one ran it, as
    /// [`crate::Store::open_on_node`] was given it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor: Option<Placement>,
}

/// Where a worker of an executor other than the local one runs: stamped into every trial it
/// writes and into its claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Placement {
    /// A task of a Slurm job array.
    Slurm {
        /// The array job's id (`SLURM_ARRAY_JOB_ID`).
        job: String,
        /// The array task's index (`SLURM_ARRAY_TASK_ID`).
        array_task: Option<u64>,
        /// The array task's own job id (`SLURM_JOB_ID`).
        #[serde(default)]
        task_job_id: Option<String>,
        /// The node it runs on.
        node: String,
        /// How many times Slurm requeued it (`SLURM_RESTART_COUNT`).
        #[serde(default)]
        restart: u64,
    },
    /// A worker started by hand (`proctor worker --shard I/K`).
    Worker {
        /// Its shard.
        shard: usize,
        /// The machine it runs on.
        node: String,
    },
    /// The job that writes a run's results on a node once its workers are done (`collect
    /// --on-node`): it runs no trial.
    Collect {
        /// The node it runs on.
        node: String,
    },
}

impl Placement {
    /// The node or machine it runs on.
    pub fn node(&self) -> &str {
        match self {
            Placement::Slurm { node, .. }
            | Placement::Worker { node, .. }
            | Placement::Collect { node } => node,
        }
    }

    /// Whether `earlier` is an attempt of this very Slurm array task that Slurm since
    /// requeued (same job and array task, another restart count): its claims are this one's.
    pub fn requeued_from(&self, earlier: &Placement) -> bool {
        match (self, earlier) {
            (
                Placement::Slurm {
                    job,
                    array_task,
                    restart,
                    ..
                },
                Placement::Slurm {
                    job: j,
                    array_task: a,
                    restart: r,
                    ..
                },
            ) => job == j && array_task == a && restart != r,
            _ => false,
        }
    }
}

/// The borrowed form of [`TrialFile`] used for writing.
#[derive(Serialize)]
pub(crate) struct TrialFileRef<'a, R: ?Sized> {
    pub schema_version: u32,
    pub format_version: FormatVersion,
    pub summary: &'a TrialSummary,
    pub record: &'a R,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executor: Option<&'a Placement>,
}

/// The head of `trial.json`: the summary, with the record skipped (but still checked to be JSON)
/// except for its `limit_reached`.
#[derive(Deserialize)]
pub(crate) struct TrialHead {
    // Read only to refuse a trial.json of another major version.
    #[serde(default = "unversioned", deserialize_with = "trial_format")]
    #[allow(dead_code)]
    format_version: FormatVersion,
    summary: TrialSummary,
    record: RecordHead,
}

impl TrialHead {
    /// The summary of the trial in folder `name`, with the record's `limit_reached` when the
    /// summary was written before it held one.
    pub fn into_summary(self, name: String) -> TrialSummary {
        let mut summary = self.summary;
        summary.trial_id = name;
        if summary.limit_reached.is_none() {
            summary.limit_reached = self.record.limit_reached;
        }
        summary
    }
}

/// What the index reads of a trial's record: its `limit_reached`, when the record is an object
/// with a string there; any other JSON value is skipped.
#[derive(Default)]
struct RecordHead {
    limit_reached: Option<Limit>,
}

impl<'de> Deserialize<'de> for RecordHead {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RecordHead, D::Error> {
        d.deserialize_any(RecordHeadVisitor)
    }
}

struct RecordHeadVisitor;

impl<'de> serde::de::Visitor<'de> for RecordHeadVisitor {
    type Value = RecordHead;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a trial record")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<RecordHead, A::Error> {
        let mut head = RecordHead::default();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == "limit_reached" {
                head.limit_reached = match map.next_value::<Option<serde_json::Value>>()? {
                    Some(serde_json::Value::String(s)) => {
                        Some(s.parse().map_err(serde::de::Error::custom)?)
                    }
                    _ => None,
                };
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(head)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<RecordHead, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(RecordHead::default())
    }

    fn visit_bool<E>(self, _: bool) -> Result<RecordHead, E> {
        Ok(RecordHead::default())
    }
    fn visit_i64<E>(self, _: i64) -> Result<RecordHead, E> {
        Ok(RecordHead::default())
    }
    fn visit_u64<E>(self, _: u64) -> Result<RecordHead, E> {
        Ok(RecordHead::default())
    }
    fn visit_f64<E>(self, _: f64) -> Result<RecordHead, E> {
        Ok(RecordHead::default())
    }
    fn visit_str<E>(self, _: &str) -> Result<RecordHead, E> {
        Ok(RecordHead::default())
    }
    fn visit_unit<E>(self) -> Result<RecordHead, E> {
        Ok(RecordHead::default())
    }
}

/// Checks that a trial id can name a folder inside the run.
pub(crate) fn validate_trial_id(id: &str) -> Result<(), StoreError> {
    let why = if id.is_empty() {
        Some("it is empty")
    } else if id.len() > 200 {
        Some("it is longer than 200 bytes")
    } else if id.starts_with('.') {
        Some("it starts with a dot")
    } else if id.contains(['/', '\\', '\0']) {
        Some("it contains a path separator or NUL")
    } else {
        None
    };
    match why {
        Some(why) => Err(StoreError::InvalidTrialId {
            id: id.to_string(),
            why,
        }),
        None => Ok(()),
    }
}

/// The JSON Schema of `run.json` ([`RunRecord`]).
pub fn run_json_schema() -> serde_json::Value {
    schemars::schema_for!(RunRecord).to_value()
}
