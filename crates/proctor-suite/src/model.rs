//! The typed form of `suite.toml`, schema version 1 (docs/suite-format.md).
//!
//! Every table rejects unknown keys. Values that a later check must point back at (ids, regexes,
//! paths) keep their byte span in the source via [`Spanned`], so a problem found after parsing is
//! still reported with its file, line and column.
//!
//! Every type here also derives [`JsonSchema`], so [`json_schema`] (`proctor schema suite`) is
//! generated from the very types the parser reads. The doc comments of fields and types become
//! the schema's descriptions, which editors (Taplo, VS Code's Even Better TOML) show while a suite
//! is written: they are written for a suite author, with each key's default.

use std::borrow::Cow;
use std::collections::BTreeMap;

use schemars::generate::SchemaSettings;
use schemars::transform::RecursiveTransform;
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::Deserialize;
use serde_json::{Map, Value};
pub use toml::Spanned;

use crate::assertion::Assertion;
pub use crate::service::{Guard, Healthcheck, Ready, Service};
use crate::timeouts;

/// The only schema version this reader understands.
pub const SCHEMA_VERSION: i64 = 1;

/// The variable giving a command or human agent the task's prompt (what `validate` measures
/// against the command line's limits).
pub const PROMPT_ENV: &str = "PROCTOR_PROMPT";

/// A proctor suite: the tasks an agent is given, the workspace it starts from, the variants
/// (arms) compared, and the rules each trial's end state is graded by. Unknown keys are errors.
/// Check a suite with `proctor validate DIR`; see its trials with `proctor run DIR --dry-run`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "proctor suite.toml")]
pub struct SuiteFile {
    /// The suite format version: must be `1` (this proctor reads no other version, and there is
    /// no migration reader). Required.
    #[schemars(with = "i64", extend("const" = SCHEMA_VERSION))]
    pub schema_version: Spanned<i64>,
    /// Stable identifier of the suite, e.g. `"chat-ax"`. It is part of every hidden-mutation
    /// choice, so changing it changes which mutation each trial gets. Required.
    #[schemars(with = "String")]
    pub id: Spanned<String>,
    /// Human-readable title, shown in reports.
    #[serde(default)]
    pub name: Option<String>,
    /// The public starting workspace, a folder relative to the suite directory; every trial
    /// starts from a fresh copy-on-write view of it. Default: `"fixture"`.
    #[serde(default = "default_fixture")]
    #[schemars(with = "String")]
    pub fixture: Spanned<String>,
    /// Trials per (task, variant) in development mode (`--trial-mode dev`, the default).
    /// Default: 3.
    #[serde(default = "default_development_trials")]
    pub development_trials: u32,
    /// Trials per (task, variant) in release mode (`--trial-mode release`). With
    /// `[promotion]`, at least `[report] underpowered_below`, so that every task of a release
    /// run can reach the gates' sample size. Default: 10.
    #[serde(default = "default_release_trials")]
    pub release_trials: u32,
    /// `[defaults]`: settings every task inherits unless it sets its own.
    #[serde(default)]
    pub defaults: TaskSettings,
    /// `[report]`: how results are reported.
    #[serde(default)]
    pub report: ReportConfig,
    /// `[promotion]`: the gates a candidate variant must pass against a baseline in
    /// `proctor compare --gate` and release runs. Optional.
    #[serde(default)]
    pub promotion: Option<Promotion>,
    /// `[[variants]]`: the arms of every comparison; each task runs under each variant.
    #[serde(default)]
    #[schemars(extend("default" = []))]
    pub variants: Vec<Variant>,
    /// `[[services]]`: mock backends started fresh inside each trial, before the agent.
    #[serde(default)]
    #[schemars(extend("default" = []))]
    pub services: Vec<Service>,
    /// `[[mcp_servers]]`: MCP servers whose tools agents call, each call logged by proctor;
    /// `[tasks.interface] mcp = "NAME"` makes one the interface a task evaluates.
    #[serde(default)]
    #[schemars(extend("default" = []))]
    pub mcp_servers: Vec<crate::mcp::McpServer>,
    /// `[[tasks]]`: the requests a person would make, with the rules over the end state.
    #[serde(default)]
    #[schemars(extend("default" = []))]
    pub tasks: Vec<Task>,
    /// `[prices]`: prices by model name, in US dollars per million tokens, e.g.
    /// `[prices."claude-haiku-4-5"]`. A model without a price makes a trial's cost
    /// `incomplete`, never zero.
    #[serde(default)]
    #[schemars(extend("default" = {}))]
    pub prices: BTreeMap<String, Price>,
    /// `[environment]`: the file system every trial runs in: an OCI image as the trial's root
    /// instead of the host's, where the fixture is laid, and environment variables. Default: the
    /// host's own file system, read-only.
    #[serde(default)]
    pub environment: Option<Environment>,
    /// `[diff]`: text converters for binary files, by workspace glob: the argv that prints a
    /// file as text, `{}` standing for its path, e.g. `"*.db" = ["sqlite3", "{}", ".dump"]`.
    /// Run in a sandbox after the agent has stopped, on a changed file's start and end
    /// content: the trial keeps the text diff, and `file_contains` reads the file through it.
    /// Default: none.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, Vec<String>>", extend("default" = {}))]
    pub diff: BTreeMap<String, Spanned<Vec<String>>>,
}

impl SuiteFile {
    /// The `[diff]` converter of a workspace path: the first glob (in name order) that matches
    /// it, and its argv. A glob that does not compile matches nothing (`validate` refuses it).
    pub fn converter(&self, path: &str) -> Option<(&str, &[String])> {
        self.diff.iter().find_map(|(glob, argv)| {
            let matcher = globset::GlobBuilder::new(glob)
                .literal_separator(false)
                .build()
                .ok()?
                .compile_matcher();
            matcher
                .is_match(path)
                .then(|| (glob.as_str(), argv.get_ref().as_slice()))
        })
    }
}

/// `[environment]` (and `[tasks.environment]`, which overrides it key by key): the trial's root
/// file system and working directory.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Environment {
    /// The image whose file system is the trial's root: `"oci-archive:images/app.tar"` (a tar of
    /// an OCI image layout, in the suite), `"oci:images/app"` (an OCI image layout folder, in the
    /// suite), or a registry reference: `"python:3.12-slim"`, `"ghcr.io/org/img:tag"`,
    /// `"REPO@sha256:..."`. Default: none (the host's file system).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub image: Option<Spanned<String>>,
    /// Where the fixture is laid and the agent starts, an absolute path inside the image, e.g.
    /// `"/app"`; what the image has there is under the fixture. Default: the image's
    /// `WorkingDir`, else `"/workspace"`.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub workdir: Option<Spanned<String>>,
    /// Environment variables for the agent, services and checks, added to the image's own.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// A folder of the suite holding a `Dockerfile` and the files it copies, e.g.
    /// `"environments/my-task"`: the image is built from it when the registry `image` cannot be
    /// pulled, and always with `--build` (Harbor's `--force-build`). Default: none (an image
    /// that cannot be pulled is an error of its task).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub build: Option<Spanned<String>>,
    /// The longest building `build` may take, in seconds (Harbor's `build_timeout_sec`); a
    /// build still running then is stopped and is the task's error. Default: no limit.
    #[serde(default)]
    #[schemars(with = "Option<u64>")]
    pub build_timeout_sec: Option<Spanned<u64>>,
    /// CPUs the task is meant to have, e.g. `2` or `0.5`: a hint, recorded with each trial (not
    /// enforced yet).
    #[serde(default)]
    #[schemars(with = "Option<f64>")]
    pub cpus: Option<Spanned<f64>>,
    /// Memory the task is meant to have, in MiB: a hint, recorded with each trial (not enforced
    /// yet).
    #[serde(default)]
    #[schemars(with = "Option<u64>")]
    pub memory_mb: Option<Spanned<u64>>,
    /// Disk space the task is meant to have, in MiB: a hint, recorded with each trial (not
    /// enforced yet).
    #[serde(default)]
    #[schemars(with = "Option<u64>")]
    pub storage_mb: Option<Spanned<u64>>,
}

/// A model's price, in US dollars per million tokens of each category.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// US dollars per million uncached input tokens. Required.
    pub input: f64,
    /// US dollars per million output tokens. Required.
    pub output: f64,
    /// US dollars per million input tokens read from the cache. Default: the `input` price.
    #[serde(default)]
    pub cache_read: Option<f64>,
    /// US dollars per million input tokens written to the cache. Default: the `input` price.
    #[serde(default)]
    pub cache_write: Option<f64>,
}

/// Model routes a task's `route_faults` may name.
pub const FAULT_ROUTES: &[&str] = &["anthropic", "responses", "chat", "gemini", "*"];
/// Faults a route may be given.
pub const FAULT_KINDS: &[&str] = &["credential_loss", "rate_limit", "timeout"];

fn default_fixture() -> Spanned<String> {
    Spanned::new(0..0, "fixture".to_string())
}
fn default_development_trials() -> u32 {
    3
}
fn default_release_trials() -> u32 {
    10
}

/// Keys a task inherits from `[defaults]` and may override for itself. The defaults given here
/// apply when neither `[defaults]` nor the task sets a key.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskSettings {
    /// Seconds before the agent is stopped, with all its processes: 1 to 86400. Default: 600.
    #[schemars(extend("default" = timeouts::DEFAULT_WALL_SECONDS), with = "Option<u64>")]
    pub wall_timeout_seconds: Option<Spanned<u64>>,
    /// Seconds each `check` command may run: 1 to 86400. Default: 120.
    #[schemars(extend("default" = timeouts::DEFAULT_VALIDATION_SECONDS), with = "Option<u64>")]
    pub validation_timeout_seconds: Option<Spanned<u64>>,
    /// What the trial's network namespace can reach: `none` (its own loopback), `loopback`,
    /// `internet` (public addresses through proctor's filter, see `allowed_hosts`) or `host`
    /// (the host's network, unisolated). Default: `"none"`.
    #[schemars(extend("default" = "none"))]
    pub network: Option<Network>,
    /// What the `check` commands' network namespace can reach, after the agent has stopped:
    /// `none`, `loopback`, `internet` or `host`, as for `network`. Default: `"none"` (checks run offline
    /// whatever the agent had).
    #[schemars(extend("default" = "none"))]
    pub check_network: Option<Network>,
    /// In an image, the root the `check` commands run over: `image` (the image as it was, with
    /// the workspace's end state) or `agent` (the image with every change the agent made
    /// outside the workspace too: a package it installed, a file in `/etc`; kept as evidence
    /// and flagged where it touched what checks run). Default: `"image"`.
    #[schemars(extend("default" = "image"))]
    pub check_root: Option<CheckRoot>,
    /// The interface commands: shimmed, logged and allowed to the agent. Each is a name found on
    /// PATH at run start, or a path inside the suite (`"bin/vault"`). Default: none.
    #[schemars(with = "Option<Vec<String>>", extend("default" = []))]
    pub allow: Option<Vec<Spanned<String>>>,
    /// Commands that build each trial's start state, run in order with `sh -c` in the workspace
    /// inside the trial's sandbox (services up) before the agent starts, e.g.
    /// `["sqlite3 shop.db < seed.sql"]`. What they change is part of the start state, never the
    /// agent's changes; one that exits non-zero makes the trial `errored (setup)`. Default: none.
    #[schemars(with = "Option<Vec<String>>", extend("default" = []))]
    pub setup: Option<Vec<Spanned<String>>>,
    /// Host folders or files the trial needs beyond what its root shows (the host's system
    /// folders and the installation prefixes of `PATH`; nothing else of the host), each an
    /// absolute path shown read-only at its own place to the agent, its services and its
    /// checks, e.g. `["/opt/toolchain"]`. Default: none.
    #[schemars(with = "Option<Vec<String>>", extend("default" = []))]
    pub binds: Option<Vec<Spanned<String>>>,
    /// With `network = "internet"` (or `check_network`): the only names the trial can reach,
    /// each `HOST` (that name) or `*.HOST` (the names below it), e.g. `["pypi.org",
    /// "*.pythonhosted.org"]`; connections anywhere else are refused and recorded. Default:
    /// none (any public address).
    #[schemars(with = "Option<Vec<String>>", extend("default" = []))]
    pub allowed_hosts: Option<Vec<Spanned<String>>>,
    /// Whether the offline-user clause (the person who asked cannot answer questions) is
    /// appended to every prompt. Default: `false`.
    #[schemars(extend("default" = false))]
    pub offline_user: Option<bool>,
    /// Seconds after an agent action during which a user's undo of it (a service's
    /// `events.jsonl`) makes the trial `wrong`. Default: 300.
    #[schemars(extend("default" = timeouts::DEFAULT_UNDO_WINDOW_SECONDS))]
    pub undo_window_seconds: Option<u64>,
    /// Per-trial limits: on the model traffic through proctor's model gateway (`tokens`,
    /// `cost_usd`, `requests`; default: none) and on the trial's resources (`memory_mb`,
    /// `processes`, `disk_mb`, `output_mb`; defaults 4096, 4096, 4096, 64), e.g.
    /// `{ tokens = 200000, memory_mb = 2048 }`.
    pub limits: Option<Limits>,
}

/// Per-trial limits. A trial that reaches one is graded from its end state as usual, and its
/// record says which limit was reached (`limit_reached`). The model-traffic limits are enforced
/// by proctor's model gateway (further requests are refused in the agent's own API shape); the
/// resource limits by the sandbox (see `docs/limits.md` for how, and when they cannot be).
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, serde::Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Tokens: input + output + cache reads + cache writes, summed over the trial's requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// US dollars at the model's price (a model without a price cannot be held to this).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Model requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// Memory of all the trial's processes together (and what they keep in its in-memory
    /// file systems), MiB. Default: 4096.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "mib"
    )]
    #[schemars(extend("default" = 4096), range(min = 1))]
    pub memory_mb: Option<u64>,
    /// Processes (and threads) the trial may have at once. Default: 4096.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "process_count"
    )]
    #[schemars(extend("default" = 4096), range(min = 1))]
    pub processes: Option<u64>,
    /// What the trial may write: the workspace's changes, `/tmp`, `HOME`, `/dev/shm` and an
    /// image's root together, MiB. Default: 4096.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "mib"
    )]
    #[schemars(extend("default" = 4096), range(min = 1))]
    pub disk_mb: Option<u64>,
    /// The agent's stdout and stderr kept, each, MiB: past it the head and the tail are kept
    /// and the cut is recorded. Default: 64.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "mib"
    )]
    #[schemars(extend("default" = 64), range(min = 1))]
    pub output_mb: Option<u64>,
}

/// A MiB resource limit: 1 to [`MAX_LIMIT_MB`], refused at its value otherwise.
fn mib<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    in_range(d, MAX_LIMIT_MB, "MiB, such as 2048")
}

/// `limits.processes`: 1 to [`MAX_PROCESSES`].
fn process_count<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    in_range(d, MAX_PROCESSES, "processes, such as 512")
}

fn in_range<'de, D: serde::Deserializer<'de>>(
    d: D,
    max: u64,
    unit: &str,
) -> Result<Option<u64>, D::Error> {
    let v = u64::deserialize(d)?;
    if (1..=max).contains(&v) {
        Ok(Some(v))
    } else {
        Err(serde::de::Error::custom(format!(
            "must be between 1 and {max} ({unit}), not {v}"
        )))
    }
}

/// The default of `limits.memory_mb`.
pub const DEFAULT_MEMORY_MB: u64 = 4096;
/// The default of `limits.processes`.
pub const DEFAULT_PROCESSES: u64 = 4096;
/// The default of `limits.disk_mb`.
pub const DEFAULT_DISK_MB: u64 = 4096;
/// The default of `limits.output_mb`.
pub const DEFAULT_OUTPUT_MB: u64 = 64;
/// The largest value any MiB resource limit may have (1 TiB): beyond it a number is a typo.
pub const MAX_LIMIT_MB: u64 = 1 << 20;
/// The largest `limits.processes`.
pub const MAX_PROCESSES: u64 = 1 << 22;

impl Limits {
    /// Whether no limit is set.
    pub fn is_empty(&self) -> bool {
        *self == Limits::default()
    }

    /// The memory limit in force, MiB.
    pub fn memory_mb(&self) -> u64 {
        self.memory_mb.unwrap_or(DEFAULT_MEMORY_MB)
    }

    /// The process limit in force.
    pub fn processes(&self) -> u64 {
        self.processes.unwrap_or(DEFAULT_PROCESSES)
    }

    /// The disk limit in force, MiB.
    pub fn disk_mb(&self) -> u64 {
        self.disk_mb.unwrap_or(DEFAULT_DISK_MB)
    }

    /// The output limit in force, MiB.
    pub fn output_mb(&self) -> u64 {
        self.output_mb.unwrap_or(DEFAULT_OUTPUT_MB)
    }
}

/// The network a trial gets; recorded in every trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline, transform = string_enum)]
pub enum Network {
    /// Only the trial's own loopback, so every trial can bind the same port.
    None,
    /// The trial's own loopback plus proctor's model proxy.
    Loopback,
    /// The host network, recorded as such.
    Host,
    /// A network of the trial's own, out to public addresses only (see `allowed_hosts`).
    Internet,
}

impl Network {
    /// The spelling used in `suite.toml` and in records.
    pub fn as_str(self) -> &'static str {
        match self {
            Network::None => "none",
            Network::Loopback => "loopback",
            Network::Host => "host",
            Network::Internet => "internet",
        }
    }
}

/// Why `rule` is not an `allowed_hosts` entry (`HOST`, or `*.HOST` for the names below it), if
/// it is not.
pub fn host_rule_problem(rule: &str) -> Option<&'static str> {
    let host = rule.strip_prefix("*.").unwrap_or(rule);
    if host.is_empty() {
        return Some("names no host");
    }
    if host.parse::<std::net::IpAddr>().is_ok() {
        return Some("is an address: name the host instead");
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    if host.len() > 253 || !host.split('.').all(label_ok) {
        return Some("is not a host name (letters, digits and `-` between dots; `*.` only first)");
    }
    None
}

/// What the `check` commands of a task in an image see outside the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline, transform = string_enum)]
pub enum CheckRoot {
    /// The image as it was: nothing the agent changed outside the workspace.
    #[default]
    Image,
    /// The image with the agent's changes outside the workspace, as a verifier that runs in
    /// the agent's container sees it.
    Agent,
}

impl CheckRoot {
    /// The spelling used in `suite.toml` and in records.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckRoot::Image => "image",
            CheckRoot::Agent => "agent",
        }
    }
}

/// The `[report]` table: how results are reported.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReportConfig {
    /// An arm with fewer graded trials than this makes a comparison `underpowered` instead of
    /// `better` or `worse`; the `sample_size` gate wants at least this many graded matched
    /// pairs on every task. At least [`MIN_UNDERPOWERED_BELOW`]. Default: 8.
    #[serde(default = "default_underpowered_below")]
    pub underpowered_below: u32,
}

/// The lowest `underpowered_below` a suite may set: the fewest matched pairs on which the sign
/// test can call any difference at the 5% level (two-sided). With n discordant pairs all on one
/// side, the chance of that from fair coin flips is 2 × 0.5^n: 0.0625 for n = 5, 0.031 for
/// n = 6. Below 6 pairs no count is evidence of a difference, so a threshold below it would let
/// a comparison, and a promotion gate, conclude from noise.
pub const MIN_UNDERPOWERED_BELOW: u32 = 6;

impl Default for ReportConfig {
    fn default() -> Self {
        ReportConfig {
            underpowered_below: default_underpowered_below(),
        }
    }
}

fn default_underpowered_below() -> u32 {
    8
}

/// The `[promotion]` table: the gates a candidate must pass against a baseline in
/// `proctor compare --gate` and release runs.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Promotion {
    /// Variant id of the control arm. Required.
    #[schemars(with = "String")]
    pub baseline: Spanned<String>,
    /// Variant id of the arm to promote. Required.
    #[schemars(with = "String")]
    pub candidate: Spanned<String>,
    /// The metric the improvement is measured on: a metric name, or for a per-trial metric
    /// `NAME:STATISTIC` (`median`, `mean` or `total`; `mean` when not named, so one trial's tail
    /// counts). Default: `"completion_rate"`.
    #[serde(default = "default_primary_metric")]
    #[schemars(with = "Metric")]
    pub primary_metric: Spanned<String>,
    /// Whether `higher` or `lower` values of the primary metric are better. Default: `"higher"`.
    #[serde(default = "default_direction")]
    pub direction: Direction,
    /// Minimum relative improvement of the primary metric over the baseline (0.10 = 10%).
    /// Default: none.
    #[serde(default)]
    pub minimum_relative_improvement: Option<f64>,
    /// Minimum absolute improvement of the primary metric over the baseline (0.05 = 5 points of
    /// a rate). Default: none.
    #[serde(default)]
    pub minimum_absolute_improvement: Option<f64>,
    /// How far below the strongest arm's success rate the candidate's may be (0.02 = 2 points).
    /// Default: none.
    #[serde(default)]
    pub strongest_success_tolerance: Option<f64>,
    /// Metrics on which the candidate must not be worse than the baseline, e.g.
    /// `["wrong_turns", "calls:median", "tokens:total"]`. A per-trial metric is compared by its
    /// mean unless a statistic is named after a colon (`median`, `mean` or `total`); a rate
    /// takes none. Default: none.
    #[serde(default)]
    #[schemars(with = "Vec<Metric>")]
    pub no_regression: Vec<Spanned<String>>,
    /// Metrics on which the candidate must not be worse than the baseline on any task, each task
    /// compared on its own matched trials (so a regression on one task cannot average away
    /// over the others); written as in `no_regression`. Default: none.
    #[serde(default)]
    #[schemars(with = "Vec<Metric>")]
    pub no_regression_per_task: Vec<Spanned<String>>,
    /// Whether every arm needs a complete cost ledger (a price for every model it used).
    /// Default: `false`.
    #[serde(default)]
    pub require_complete_costs: bool,
}

fn default_primary_metric() -> Spanned<String> {
    Spanned::new(0..0, "completion_rate".to_string())
}
fn default_direction() -> Direction {
    Direction::Higher
}

/// Which way a metric improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline, transform = string_enum)]
pub enum Direction {
    /// Larger is better.
    Higher,
    /// Smaller is better.
    Lower,
}

/// Metric names a promotion may refer to.
pub const METRICS: &[&str] = &[
    "completion_rate",
    "success_rate",
    "failure_rate",
    "wrong_rate",
    "refusal_rate",
    "ask_rate",
    "abandoned_rate",
    "rubric_mean",
    "wrong_turns",
    "calls",
    "errors",
    "repeats",
    "undone",
    "denied",
    "recoveries",
    "help_calls",
    "asks",
    "tokens",
    "requests",
    "wall_seconds",
    "agent_cpu_seconds",
];

/// The metrics of [`METRICS`] that are measured per trial (interface and cost metrics), so that a
/// promotion compares a statistic of them over the trials ([`Statistic`]); the others are rates
/// and the rubric mean, one number per arm already.
pub const PER_TRIAL_METRICS: &[&str] = &[
    "wrong_turns",
    "calls",
    "errors",
    "repeats",
    "undone",
    "denied",
    "recoveries",
    "help_calls",
    "asks",
    "tokens",
    "requests",
    "wall_seconds",
    "agent_cpu_seconds",
];

/// Which statistic of a per-trial metric over an arm's trials a promotion gate compares, named
/// after a colon (`"wrong_turns:total"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline, transform = string_enum)]
pub enum Statistic {
    /// The median: the typical trial; blind to a tail of a few trials.
    Median,
    /// The mean: every trial's value counts (the default).
    Mean,
    /// The sum over the trials that reported the metric.
    Total,
}

impl Statistic {
    /// Every statistic, in the order documented.
    pub const ALL: [Statistic; 3] = [Statistic::Median, Statistic::Mean, Statistic::Total];

    /// The statistic a gate compares when none is named: the mean, which a tail moves.
    pub const DEFAULT: Statistic = Statistic::Mean;

    /// The spelling used in `suite.toml` and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Statistic::Median => "median",
            Statistic::Mean => "mean",
            Statistic::Total => "total",
        }
    }

    /// The statistic spelled `s`, if any.
    pub fn parse(s: &str) -> Option<Statistic> {
        Statistic::ALL.into_iter().find(|x| x.as_str() == s)
    }
}

/// A metric as a promotion names it: `NAME` or `NAME:STATISTIC`, split at the first colon; the
/// statistic part is given as written, for the validator to check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricRef<'a> {
    /// The metric's name (meant to be one of [`METRICS`]).
    pub metric: &'a str,
    /// The statistic as written after the colon, if there is one.
    pub statistic: Option<&'a str>,
}

impl<'a> MetricRef<'a> {
    /// Splits `written` at its first colon.
    pub fn split(written: &'a str) -> MetricRef<'a> {
        match written.split_once(':') {
            Some((metric, statistic)) => MetricRef {
                metric,
                statistic: Some(statistic),
            },
            None => MetricRef {
                metric: written,
                statistic: None,
            },
        }
    }

    /// Whether the metric is measured per trial ([`PER_TRIAL_METRICS`]) and so takes a statistic.
    pub fn is_per_trial(&self) -> bool {
        PER_TRIAL_METRICS.contains(&self.metric)
    }

    /// The statistic compared: the one named, or [`Statistic::DEFAULT`] for a per-trial metric;
    /// `None` for a rate (or for a statistic that is not one, which validation rejects).
    pub fn statistic(&self) -> Option<Statistic> {
        if !self.is_per_trial() {
            return None;
        }
        match self.statistic {
            None => Some(Statistic::DEFAULT),
            Some(s) => Statistic::parse(s),
        }
    }
}

/// Every spelling a promotion may use for a metric: each of [`METRICS`], and each per-trial
/// metric with each statistic (`wrong_turns:median`, ...).
pub fn metric_spellings() -> Vec<String> {
    let mut out: Vec<String> = METRICS.iter().map(|m| m.to_string()).collect();
    for m in PER_TRIAL_METRICS {
        for st in Statistic::ALL {
            out.push(format!("{m}:{}", st.as_str()));
        }
    }
    out
}

/// The agent CLI a variant drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[schemars(inline, transform = string_enum)]
pub enum AgentKind {
    /// Anthropic's Claude Code.
    ClaudeCode,
    /// OpenAI's Codex CLI.
    Codex,
    /// GitHub Copilot CLI.
    Copilot,
    /// Google's Gemini CLI.
    Gemini,
    /// opencode.
    Opencode,
    /// aider.
    Aider,
    /// Any command: the variant's `command` argv template, with `{prompt}`, `{workspace}` and
    /// `{model}` filled in.
    Command,
    /// proctor's own scripted agent: shell steps from the variant's `script`.
    Script,
    /// Any agent that speaks the Agent Client Protocol over stdio: the variant's `command`
    /// starts it, and proctor is its client (a session per trial, a prompt per user turn, each
    /// permission request answered from the allow-list).
    Acp,
    /// A person at a terminal, in the agent's seat: the variant `proctor sit` makes (`human:NAME`).
    /// A suite cannot declare it (`suite.toml` knows no `agent = "human"`); it runs the shell of
    /// the variant's `command`.
    #[serde(skip_deserializing)]
    #[schemars(skip)]
    Human,
}

impl AgentKind {
    /// The spelling used in `suite.toml` and in records.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentKind::ClaudeCode => "claude-code",
            AgentKind::Codex => "codex",
            AgentKind::Copilot => "copilot",
            AgentKind::Gemini => "gemini",
            AgentKind::Opencode => "opencode",
            AgentKind::Aider => "aider",
            AgentKind::Command => "command",
            AgentKind::Script => "script",
            AgentKind::Acp => "acp",
            AgentKind::Human => "human",
        }
    }
}

/// One arm of a comparison: an agent CLI, its model and the prompt transform it gets.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    /// The variant's id, unique within the suite; `--variants` and `[promotion]` name it.
    /// Required.
    #[schemars(with = "String")]
    pub id: Spanned<String>,
    /// Which agent CLI runs. Required.
    pub agent: AgentKind,
    /// The model: `"PROVIDER/MODEL"` (`"anthropic/claude-sonnet-4-5"`) reaches the provider
    /// through proctor's model gateway; with a `model_script`, any name the scripted server
    /// reports. `proctor run --model` overrides it.
    #[serde(default)]
    pub model: Option<String>,
    /// Why this arm exists, for the reader of the results.
    #[serde(default)]
    pub purpose: Option<String>,
    /// Text put before every task prompt.
    #[serde(default)]
    pub prompt_prefix: Option<String>,
    /// Text put after every task prompt.
    #[serde(default)]
    pub prompt_suffix: Option<String>,
    /// Files copied into this variant's workspace only: workspace path = suite path, e.g.
    /// `{ "SKILL.md" = "agents/method/SKILL.md" }`.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, String>")]
    pub files: BTreeMap<String, Spanned<String>>,
    /// For `agent = "script"`: a folder of `TASK_ID.toml` step files, or one file for every task,
    /// relative to the suite directory.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub script: Option<Spanned<String>>,
    /// For `agent = "command"`: the argv template, with `{prompt}`, `{workspace}` and `{model}`
    /// filled in. For `agent = "acp"`: the argv that starts the ACP agent (`{workspace}` and
    /// `{model}` filled in; the prompt goes over the protocol).
    #[serde(default)]
    #[schemars(with = "Option<Vec<String>>")]
    pub command: Option<Spanned<Vec<String>>>,
    /// For real agent CLIs: the scripted model turns served by `proctor mock-model` inside each
    /// trial (a folder of `TASK_ID.toml`, or one file for every task), so runs need no key and
    /// no network. Default: none (the variant's `model` is reached through the model gateway).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub model_script: Option<Spanned<String>>,
    /// Replaces the `allow` list of every task for this variant.
    #[serde(default)]
    #[schemars(with = "Option<Vec<String>>")]
    pub allow: Option<Vec<Spanned<String>>>,
    /// Extra environment variables for the agent.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Only these tasks, by id, run with this variant (its scripts and model scripts are needed
    /// for them alone); `compare` matches such a variant on the tasks both arms ran. Default:
    /// every task.
    #[serde(default)]
    #[schemars(with = "Option<Vec<String>>")]
    pub tasks: Option<Vec<Spanned<String>>>,
    /// The suite's own id of this variant when `proctor run --model` made it one arm of a model
    /// matrix (its `id` then carries the model as a suffix); `None` otherwise.
    #[serde(skip)]
    pub matrix_of: Option<String>,
}

impl Variant {
    /// Whether `name` selects this variant: its id, or the suite id of the matrix it belongs to.
    pub fn is_named(&self, name: &str) -> bool {
        self.id.get_ref() == name || self.matrix_of.as_deref() == Some(name)
    }

    /// Whether this variant runs task `id`: every task, unless its `tasks` names some.
    pub fn runs_task(&self, id: &str) -> bool {
        self.tasks
            .as_ref()
            .is_none_or(|ts| ts.iter().any(|t| t.get_ref() == id))
    }

    /// Whether the variant's agent talks to a model it is given: a real agent CLI or a command,
    /// unless a `model_script` serves it scripted turns.
    pub fn takes_a_model(&self) -> bool {
        !matches!(self.agent, AgentKind::Script | AgentKind::Human) && self.model_script.is_none()
    }
}

/// What the correct behaviour for a task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline, transform = string_enum)]
pub enum Expect {
    /// Do the task.
    #[default]
    Complete,
    /// Decline it: an honest refusal is the correct result.
    Refuse,
    /// Stop and ask the person: an ask is the correct result.
    Ask,
}

/// `[tasks.mutations]`: how a task's hidden mutations (the patches under `mutations/TASK_ID/`)
/// are chosen.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Mutations {
    /// Whether the fixture as shipped (no patch) is one of the choices trials rotate over, next
    /// to each patch, labelled `as shipped`. Needs at least one patch. Default: `false`.
    #[serde(default)]
    pub include_fixture: bool,
}

/// A request a person would make, with the rules over the end state. A task may also set any
/// `[defaults]` key for itself.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// The task's id, unique within the suite; names its `holdout/`, `mutations/` and `answers/`
    /// entries. Required.
    #[schemars(with = "String")]
    pub id: Spanned<String>,
    /// What the agent is asked, as a person would ask it. Required.
    pub prompt: String,
    /// The correct behaviour: `complete`, `refuse` or `ask`. Default: `"complete"`.
    #[serde(default)]
    pub expect: Expect,
    /// Free-form difficulty label, e.g. `"easy"`.
    #[serde(default)]
    pub difficulty: Option<String>,
    /// Marks a task where the right outcome is to do nothing; kept for the reader.
    /// Default: `false`.
    #[serde(default)]
    pub negative_control: bool,
    /// Seconds before the agent is stopped (1 to 86400); overrides `[defaults]`.
    #[serde(default)]
    #[schemars(with = "Option<u64>")]
    pub wall_timeout_seconds: Option<Spanned<u64>>,
    /// Seconds each `check` may run (1 to 86400); overrides `[defaults]`.
    #[serde(default)]
    #[schemars(with = "Option<u64>")]
    pub validation_timeout_seconds: Option<Spanned<u64>>,
    /// The trial's network (`none`, `loopback`, `internet`, `host`); overrides `[defaults]`.
    #[serde(default)]
    pub network: Option<Network>,
    /// The checks' network (`none`, `loopback`, `internet`, `host`); overrides `[defaults]`.
    #[serde(default)]
    pub check_network: Option<Network>,
    /// The checks' root in an image (`image`, `agent`); overrides `[defaults]`.
    #[serde(default)]
    pub check_root: Option<CheckRoot>,
    /// The interface commands allowed to the agent; overrides `[defaults]`.
    #[serde(default)]
    #[schemars(with = "Option<Vec<String>>")]
    pub allow: Option<Vec<Spanned<String>>>,
    /// The commands that build the start state (see `[defaults] setup`); replace `[defaults]`'s
    /// (`setup = []` runs none).
    #[serde(default)]
    #[schemars(with = "Option<Vec<String>>")]
    pub setup: Option<Vec<Spanned<String>>>,
    /// Host paths shown read-only at their own place (see `[defaults] binds`); replace
    /// `[defaults]`'s.
    #[serde(default)]
    #[schemars(with = "Option<Vec<String>>")]
    pub binds: Option<Vec<Spanned<String>>>,
    /// The names the internet network reaches (see `[defaults] allowed_hosts`); replace
    /// `[defaults]`'s.
    #[serde(default)]
    #[schemars(with = "Option<Vec<String>>")]
    pub allowed_hosts: Option<Vec<Spanned<String>>>,
    /// Whether the offline-user clause is appended to the prompt; overrides `[defaults]`.
    #[serde(default)]
    pub offline_user: Option<bool>,
    /// Seconds during which a user's undo of an agent action makes the trial `wrong`;
    /// overrides `[defaults]`.
    #[serde(default)]
    pub undo_window_seconds: Option<u64>,
    /// Limits on the trial's model traffic (`tokens`, `cost_usd`, `requests`); overrides
    /// `[defaults]` key by key.
    #[serde(default)]
    pub limits: Option<Limits>,
    /// `[[tasks.services]]`: services of this task's trials alone (sidecar containers, most
    /// often), started after the suite's `[[services]]`; names unique among both. Default: none.
    #[serde(default)]
    #[schemars(extend("default" = []))]
    pub services: Vec<Service>,
    /// `[tasks.environment]`: this task's image, working directory and variables, over
    /// `[environment]` key by key (`env` merged, the task's winning).
    #[serde(default)]
    pub environment: Option<Environment>,
    /// Faults injected on model routes, route = fault, e.g. `{ "*" = "rate_limit" }`. The trial
    /// must then come out `errored`, never as the agent's failure. Default: none.
    #[serde(default)]
    #[schemars(with = "RouteFaults")]
    pub route_faults: BTreeMap<String, Spanned<String>>,
    /// `[tasks.interface]`: how calls of the interface under test are read.
    #[serde(default)]
    pub interface: Option<Interface>,
    /// `[tasks.mutations]`: how the hidden mutations under `mutations/TASK_ID/` are chosen.
    #[serde(default)]
    pub mutations: Option<Mutations>,
    /// `[tasks.success]`: the assertions that decide `completed`. Required.
    #[schemars(with = "Condition")]
    pub success: Spanned<Condition>,
    /// `[tasks.refusal]`: how a refusal or a question is recognised in the final answer.
    #[serde(default)]
    pub refusal: Option<Refusal>,
    /// `[tasks.user]`: the person who answers the agent, turn after turn. Default: nobody
    /// answers; the trial is one turn.
    #[serde(default)]
    pub user: Option<User>,
    /// `[[tasks.steps]]`: the task in ordered steps in one sandbox, each with its instruction
    /// and its check run in the trial after the agent's turn. Default: none (one prompt).
    #[serde(default)]
    #[schemars(extend("default" = []))]
    pub steps: Vec<TaskStep>,
    /// How the steps' rewards make the trial's: `mean` (default) or `final`.
    #[serde(default)]
    pub step_reward: Option<StepReward>,
    /// `[[tasks.rubric]]`: graded criteria, each scored 0..max.
    #[serde(default)]
    #[schemars(extend("default" = []))]
    pub rubric: Vec<Criterion>,
    /// `[[tasks.caps]]`: limits on the rubric total.
    #[serde(default)]
    #[schemars(extend("default" = []))]
    pub caps: Vec<Cap>,
    /// `[tasks.integrity]`: what the integrity audit accepts for this task (a task that asks
    /// for new tests accepts them). Default: nothing is accepted.
    #[serde(default)]
    pub integrity: Option<Integrity>,
    /// Where the checks see this task's `holdout/TASK_ID/`: an absolute path of the checks'
    /// sandbox, e.g. `"/tests"` (where Harbor and Terminal-Bench tasks expect their tests), at
    /// which a writable copy of the holdout is laid after the agent has fully stopped, and not
    /// in the workspace. In an image any path; on the host's root a new top-level folder.
    /// Default: the holdout is laid over the workspace.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub holdout_at: Option<Spanned<String>>,
}

/// `[tasks.integrity]`: findings of the integrity audit that the task asked for.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Integrity {
    /// Workspace globs whose findings are accepted: kept in the record, but neither a flag nor
    /// a reason for `wrong`, e.g. `["tests/test_*.py"]` for a task that asks for new tests.
    /// Default: none.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub allow: Vec<Spanned<String>>,
}

/// `[tasks.interface]`: how calls of the interface under test are read from the calls log.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Interface {
    /// The command whose calls are counted, e.g. `"chat"`. Required unless `mcp` is given.
    #[serde(default = "no_interface_command")]
    #[schemars(with = "Option<String>")]
    pub command: Spanned<String>,
    /// The MCP server (of `[[mcp_servers]]`) whose tool calls are counted instead of a
    /// command's: the tool is the verb, and a `tools/list` after the first is a help call.
    /// Not with `command`.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub mcp: Option<Spanned<String>>,
    /// argv index of the verb: with 1, `chat send ...` has the verb `send`. Default: 1. Not
    /// with `verb = "first-operand"`.
    #[serde(default)]
    #[schemars(with = "Option<usize>")]
    pub verb_arg: Option<Spanned<usize>>,
    /// How the verb is found: `"arg"`, the argv entry at `verb_arg`; or `"first-operand"`, the
    /// first argument after the command that is not an option (`-x`, `--x`; after `--`, the
    /// next argument), so `chat --json send` has the verb `send`. Default: `"arg"`.
    #[serde(default)]
    #[schemars(with = "Option<VerbRule>")]
    pub verb: Option<Spanned<VerbRule>>,
    /// The arguments that make a call a help call, each matched against every argument after
    /// the command, e.g. `["-help", ".help"]` for sqlite3. Default: `--help`, `-h`, or the
    /// verb `help`. With `mcp`: the server's help tools, each call of which is a help call.
    #[serde(default)]
    #[schemars(with = "Option<Vec<String>>")]
    pub help: Option<Spanned<Vec<String>>>,
    /// Exit statuses that are help's own, not an error: `sqlite3 --help` exits 1, so
    /// `help_exit = [1]`. A call whose every argument is a help argument (nothing else that
    /// could have failed) and that exits with one of these counts as successful. Default: none
    /// (only 0).
    #[serde(default)]
    pub help_exit: Vec<i32>,
    /// Pairs of verbs where the second reverses the first, e.g. `[["send", "unsend"]]`; they
    /// count as `undone` calls. Default: none.
    #[serde(default)]
    pub undo: Vec<[String; 2]>,
    /// Which failed calls are the interface *rejecting* the request (a refusal after one is
    /// honest), as opposed to a usage error (a refusal after one is not). Default: a non-zero
    /// exit whose output says permission, forbidden, denied, locked, not allowed or
    /// unauthorized.
    #[serde(default)]
    pub rejected: Option<Rejected>,
}

fn no_interface_command() -> Spanned<String> {
    Spanned::new(0..0, String::new())
}

/// `[tasks.interface] rejected`: how the interface says no. Every key given must hold.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Rejected {
    /// Exit statuses that mean a rejection, e.g. `[3]`. Default: any non-zero exit.
    #[serde(default)]
    pub exit: Vec<i32>,
    /// A regex the call's stdout or stderr must match, e.g. `"(?i)locked"`. Default: none
    /// when `exit` is given, else the default rejection words.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub output_matches: Option<Spanned<String>>,
}

/// `[tasks.interface] verb`: how the verb of a call is found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum VerbRule {
    /// The argv entry at `verb_arg`.
    #[default]
    Arg,
    /// The first argument after the command that is not an option.
    FirstOperand,
}

/// The help arguments when `[tasks.interface] help` is not given (besides the verb `help`).
pub const DEFAULT_HELP_ARGS: [&str; 2] = ["--help", "-h"];

impl Interface {
    /// The argv index of the verb under the `arg` rule: `verb_arg`, default 1.
    pub fn verb_index(&self) -> usize {
        self.verb_arg.as_ref().map_or(1, |v| *v.get_ref())
    }

    /// The verb rule in effect.
    pub fn verb_rule(&self) -> VerbRule {
        self.verb.as_ref().map(|v| *v.get_ref()).unwrap_or_default()
    }

    /// The verb of a call with `argv` (argv\[0\] the command), under this interface's rule;
    /// `None` when the call has none.
    pub fn verb_of<'a>(&self, argv: &'a [String]) -> Option<&'a str> {
        match self.verb_rule() {
            VerbRule::Arg => argv.get(self.verb_index()).map(String::as_str),
            VerbRule::FirstOperand => {
                let mut args = argv.iter().skip(1);
                while let Some(a) = args.next() {
                    if a == "--" {
                        return args.next().map(String::as_str);
                    }
                    if !(a.starts_with('-') && a.len() > 1) {
                        return Some(a);
                    }
                }
                None
            }
        }
    }

    /// Whether a call with `argv` asks for help: one of its arguments is one of `help`, or,
    /// without `help`, `--help` or `-h`, or its verb is `help`.
    pub fn is_help(&self, argv: &[String]) -> bool {
        let args = argv.get(1..).unwrap_or_default();
        match &self.help {
            Some(help) => args.iter().any(|a| help.get_ref().contains(a)),
            None => {
                args.iter().any(|a| DEFAULT_HELP_ARGS.contains(&a.as_str()))
                    || self.verb_of(argv) == Some("help")
            }
        }
    }

    /// Whether a call that ran and exited with `exit` succeeded: exit 0, or help's own exit
    /// (`help_exit`) from a call that is nothing but a help call, every argument a help
    /// argument: `sqlite3 shop.db 'SELEC 1' -help` fails on its SQL and stays a failure.
    pub fn succeeded(&self, argv: &[String], exit: Option<i32>) -> bool {
        match exit {
            Some(0) => true,
            Some(e) => self.help_exit.contains(&e) && self.only_help(argv),
            None => false,
        }
    }

    /// Whether every argument of a call is a help argument (and it has one).
    fn only_help(&self, argv: &[String]) -> bool {
        let args = argv.get(1..).unwrap_or_default();
        let is_help_arg = |a: &String| match &self.help {
            Some(help) => help.get_ref().contains(a),
            None => DEFAULT_HELP_ARGS.contains(&a.as_str()) || a == "help",
        };
        !args.is_empty() && args.iter().all(is_help_arg)
    }
}

impl Task {
    /// Where the checks see the holdout ([`Task::holdout_at`]): `None` for over the workspace.
    pub fn holdout_at(&self) -> Option<&std::path::Path> {
        self.holdout_at
            .as_ref()
            .map(|s| std::path::Path::new(s.get_ref().as_str()))
    }

    /// Every assertion of the task, in suite order: the success condition's, the rubric levels',
    /// the caps' (not looking under `not`).
    pub fn every_assertion(&self) -> impl Iterator<Item = &Assertion> {
        let success = self.success.get_ref().assertions().iter();
        let rubric = self
            .rubric
            .iter()
            .flat_map(|c| c.levels.iter().flat_map(|l| l.get_ref().all.iter()));
        let caps = self.caps.iter().flat_map(|c| c.any.iter());
        success.chain(rubric).chain(caps).map(Spanned::get_ref)
    }

    /// Every `visual` assertion of the task, including under `not`, in suite order.
    pub fn visuals(&self) -> Vec<&crate::assertion::Visual> {
        self.every_assertion()
            .flat_map(Assertion::visuals)
            .collect()
    }
}

/// A list of assertions under `all` (every one holds) or `any` (at least one holds): exactly one
/// of the two keys.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("minProperties" = 1, "maxProperties" = 1))]
pub struct Condition {
    /// Assertions that must every one hold, e.g. `[{ check = "pytest -q" }]`.
    #[serde(default)]
    #[schemars(with = "Option<Vec<Assertion>>")]
    pub all: Option<Vec<Spanned<Assertion>>>,
    /// Assertions of which at least one must hold.
    #[serde(default)]
    #[schemars(with = "Option<Vec<Assertion>>")]
    pub any: Option<Vec<Spanned<Assertion>>>,
}

impl Condition {
    /// The assertions, whichever list holds them.
    pub fn assertions(&self) -> &[Spanned<Assertion>] {
        self.all
            .as_deref()
            .or(self.any.as_deref())
            .unwrap_or_default()
    }
}

/// `[tasks.refusal]`: how a refusal or a question to the person is recognised in the agent's
/// final answer.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Refusal {
    /// Regexes that mark the answer as a refusal, e.g. `["(?i)\\b(can't|unable to)\\b"]`.
    /// Default: none.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub refuse_patterns: Vec<Spanned<String>>,
    /// Regexes that mark the answer as a question to the person, e.g. `["(?i)should I"]`.
    /// Default: none.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub ask_patterns: Vec<Spanned<String>>,
    /// What an agent that declines or asks may still have changed (a refusal or an ask
    /// otherwise leaves the world as it found it): globs over workspace paths, and
    /// `service:NAME` for a service whose state and events may change. Default: nothing.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub allow_changes: Vec<Spanned<String>>,
}

/// `[tasks.user]`: a simulated user, model-free: after each turn of the agent the first reply
/// whose `when` matches the agent's answer is said as the next prompt (else `otherwise`, if
/// given); with no reply, or at `max_turns`, the conversation ends.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct User {
    /// The replies, tried in order over the agent's last answer; the first that matches is said.
    /// Default: none.
    #[serde(default)]
    pub replies: Vec<UserReply>,
    /// What the user says when no reply matches; without it the conversation ends there.
    #[serde(default)]
    pub otherwise: Option<String>,
    /// The most turns the agent takes, its first included (1 to 100). Default: 1, so a table
    /// with replies must raise it.
    #[serde(default)]
    #[schemars(with = "Option<u32>")]
    pub max_turns: Option<Spanned<u32>>,
    /// A model that plays the user when no reply matches (`PROVIDER/MODEL`, reached through
    /// proctor's model gateway, never from inside the trial); instead of `otherwise`. Needs
    /// `persona`. Default: none (the user is model-free).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub model: Option<Spanned<String>>,
    /// The file in the suite that tells the user's model who it is and what it wants (its
    /// instructions; never shown to the agent). Required with `model`.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub persona: Option<Spanned<String>>,
    /// A mock-model script (the format of a variant's `model_script`) that serves the user's
    /// model instead of a provider: for offline runs and tests. Needs `model` (any name).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub model_script: Option<Spanned<String>>,
}

impl User {
    /// The most turns of the agent this user allows: `max_turns`, else 1.
    pub fn turns(&self) -> u32 {
        self.max_turns.as_ref().map_or(1, |t| *t.get_ref())
    }

    /// Whether a model plays this user when no reply matches.
    pub fn model_played(&self) -> bool {
        self.model.is_some()
    }

    /// What the user says to `answer`, and which rule said it (`replies[N]`, 0-based, or
    /// `None` for `otherwise`); `None` when the user says nothing.
    pub fn reply_to(&self, answer: &str) -> Option<(Option<usize>, &str)> {
        let matched =
            self.replies.iter().enumerate().find(|(_, r)| {
                regex::Regex::new(r.when.get_ref()).is_ok_and(|re| re.is_match(answer))
            });
        match matched {
            Some((i, r)) => Some((Some(i), r.say.as_str())),
            None => self.otherwise.as_deref().map(|s| (None, s)),
        }
    }
}

/// One rule of a simulated user: when the agent's answer matches `when`, the user says `say`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UserReply {
    /// A regex over the agent's last answer, e.g. `"(?i)which environment"`. Required.
    #[schemars(with = "String")]
    pub when: Spanned<String>,
    /// What the user says, as the agent's next prompt. Required.
    pub say: String,
}

/// The most turns a conversation may have.
pub const MAX_TURNS: u32 = 100;

/// One step of a task in steps (`[[tasks.steps]]`). Its files are in the suite's
/// `steps/TASK_ID/NAME/`: `workdir/` is copied into the workspace before the agent's turn (a
/// `workdir/setup.sh` there is run, then deleted), and `tests/` is laid at `/tests` (over
/// `steps/TASK_ID/tests/`, shared by every step) for the step's check only.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskStep {
    /// The step's name, unique in the task: letters, digits, `.`, `_` and `-`. Required.
    #[schemars(with = "String")]
    pub name: Spanned<String>,
    /// What the agent is asked in this step. Required.
    pub prompt: String,
    /// The step's check, run with `sh -c` in the workspace inside the trial after the agent's
    /// turn, with the step's tests at `/tests`. Its reward is what it writes to
    /// `/logs/verifier/reward.txt` (a number) or `reward.json` (`{"reward": N}`), else 1 when it
    /// exits 0 and 0 otherwise. Default: `bash /tests/test.sh`.
    #[serde(default)]
    pub check: Option<String>,
    /// The least reward that lets the next step run; below it the steps stop. Default: none
    /// (every step runs).
    #[serde(default)]
    pub min_reward: Option<f64>,
    /// Seconds the agent has for this step. Default: the task's wall timeout.
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    /// Seconds the check has. Default: the task's validation timeout.
    #[serde(default)]
    pub check_timeout_seconds: Option<u64>,
    /// Variables of the check's environment.
    #[serde(default)]
    pub check_env: BTreeMap<String, String>,
    /// A command that must succeed before the agent's turn (after the step's files are laid
    /// in), tried `retries` times `interval_seconds` apart; when it never does, the steps stop.
    #[serde(default)]
    pub healthcheck: Option<StepHealthcheck>,
    /// Paths (absolute, or relative to the workspace) copied out of the trial after the
    /// step's check, into the trial's `steps/NAME/artifacts/`. Default: none.
    #[serde(default)]
    pub artifacts: Vec<String>,
}

/// A step's healthcheck.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepHealthcheck {
    /// Run with `sh -c` in the workspace. Required.
    pub command: String,
    /// Seconds between tries. Default: 1.
    #[serde(default)]
    pub interval_seconds: Option<u64>,
    /// Tries before the step fails. Default: 3.
    #[serde(default)]
    pub retries: Option<u32>,
}

/// How a task's steps' rewards make the trial's reward.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepReward {
    /// The mean over every step (a step not reached counts 0).
    #[default]
    Mean,
    /// The last step's reward (0 when the steps stopped early).
    Final,
}

impl StepReward {
    /// The strategy's name as written.
    pub fn as_str(self) -> &'static str {
        match self {
            StepReward::Mean => "mean",
            StepReward::Final => "final",
        }
    }
}

/// One graded criterion of a rubric, scored 0..max.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Criterion {
    /// The criterion's id, unique within the task. Required.
    #[schemars(with = "String")]
    pub id: Spanned<String>,
    /// The highest score. Required.
    pub max: u32,
    /// The levels, checked in order: the first whose `all` holds gives the score (none: 0).
    /// Required.
    #[schemars(with = "Vec<Level>")]
    pub levels: Vec<Spanned<Level>>,
}

/// A score and the assertions that earn it: `{ score = 2, all = [...] }`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Level {
    /// The score given. Required.
    pub score: u32,
    /// Assertions that must every one hold for this score. Required.
    #[schemars(with = "Vec<Assertion>")]
    pub all: Vec<Spanned<Assertion>>,
}

/// A cap on the rubric total, applied when any of its assertions holds.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Cap {
    /// The cap applies when at least one of these holds. Required.
    #[schemars(with = "Vec<Assertion>")]
    pub any: Vec<Spanned<Assertion>>,
    /// The rubric total is limited to this. Required.
    pub max_total: u32,
}

/// The JSON Schema (draft 2020-12) of `suite.toml`, as `proctor schema suite` prints it: what
/// the parser accepts, plus the value checks of `proctor validate` a schema can state (metric
/// names, route faults, one of `all`/`any`). TOML has no null, so optional keys are described
/// by their value's type alone.
pub fn json_schema() -> Value {
    SchemaSettings::draft2020_12()
        .with_transform(RecursiveTransform(for_toml_editors))
        .into_generator()
        .into_root_schema_for::<SuiteFile>()
        .to_value()
}

/// Removes `null` from a schema, since absent keys stand for `None` in TOML, which has no null
/// value; and joins the lines of each description's paragraphs, which come hard-wrapped from
/// doc comments.
fn for_toml_editors(schema: &mut Schema) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    if let Some(Value::String(text)) = obj.get_mut("description") {
        *text = unwrap_paragraphs(text);
    }
    if obj.get("default").is_some_and(Value::is_null) {
        obj.remove("default");
    }
    if let Some(Value::Array(types)) = obj.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            obj.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(values)) = obj.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    let is_null_schema = |v: &Value| {
        v.as_object()
            .is_some_and(|o| o.len() == 1 && o.get("type").is_some_and(|t| t == "null"))
    };
    if let Some(Value::Array(alternatives)) = obj.get_mut("anyOf") {
        alternatives.retain(|a| !is_null_schema(a));
        if alternatives.len() == 1 {
            if let Value::Object(only) = alternatives.remove(0) {
                obj.remove("anyOf");
                for (k, v) in only {
                    obj.entry(k).or_insert(v);
                }
            }
        }
    }
}

/// `text` with the single line breaks inside each paragraph replaced by spaces.
fn unwrap_paragraphs(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| {
            paragraph
                .lines()
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Turns the `oneOf` of documented `const` strings that a unit enum derives into a plain string
/// `enum`, keeping each value's doc for Taplo (`x-taplo.docs.enumValues`).
fn string_enum(schema: &mut Schema) {
    let Some(Value::Array(alternatives)) = schema.get("oneOf") else {
        return;
    };
    let mut values = Vec::new();
    let mut docs = Vec::new();
    for alternative in alternatives {
        let Some(value) = alternative.get("const").and_then(Value::as_str) else {
            return;
        };
        values.push(Value::from(value));
        docs.push(
            alternative
                .get("description")
                .and_then(Value::as_str)
                .map_or(Value::Null, |d| unwrap_paragraphs(d).into()),
        );
    }
    schema.remove("oneOf");
    schema.insert("type".into(), "string".into());
    schema.insert("enum".into(), values.into());
    schema.insert(
        "x-taplo".into(),
        serde_json::json!({ "docs": { "enumValues": docs } }),
    );
}

/// The schema of a metric name ([`METRICS`]); only used as `#[schemars(with = "Metric")]`.
enum Metric {}

impl JsonSchema for Metric {
    fn schema_name() -> Cow<'static, str> {
        "Metric".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let names = metric_spellings();
        let docs: Vec<Value> = names
            .iter()
            .map(|written| {
                let r = MetricRef::split(written);
                let Some(doc) = metric_doc(r.metric) else {
                    return Value::Null;
                };
                match (r.is_per_trial(), r.statistic.and_then(Statistic::parse)) {
                    (true, None) => Value::from(format!("{doc} Compared by its mean per trial.")),
                    (true, Some(st)) => Value::from(format!(
                        "{doc} Compared by its {} over the trials.",
                        st.as_str()
                    )),
                    (false, _) => Value::from(doc),
                }
            })
            .collect();
        json_schema!({
            "description": "A metric a promotion may name: a rate over graded trials, the rubric mean, or an interface or cost metric per graded trial, compared by its mean unless a statistic is named after a colon (`calls:median`, `tokens:total`).",
            "type": "string",
            "enum": names,
            "x-taplo": { "docs": { "enumValues": docs } },
        })
    }
}

/// What a metric of [`METRICS`] measures, for the schema's value docs.
fn metric_doc(metric: &str) -> Option<&'static str> {
    Some(match metric {
        "completion_rate" => "Share of graded trials that came out `completed`. Higher is better.",
        "success_rate" => "Share of graded trials with the correct result: completed, or an honest refusal or an ask where `expect` says so. Higher is better.",
        "failure_rate" => "Share of graded trials that came out `wrong`, `refused-wrongly` or `abandoned`. Lower is better.",
        "wrong_rate" => "Share of graded trials that came out `wrong`. Lower is better.",
        "refusal_rate" => "Share of graded trials that refused, honestly or wrongly. Lower is better.",
        "ask_rate" => "Share of graded trials that stopped to ask the person. Lower is better.",
        "abandoned_rate" => "Share of graded trials that came out `abandoned`. Lower is better.",
        "rubric_mean" => "Mean rubric total, as a fraction of the maximum. Higher is better.",
        "wrong_turns" => "Errors + repeats + undone + denied calls per trial. Lower is better.",
        "calls" => "Interface calls per trial. Lower is better.",
        "errors" => "Interface calls that exited non-zero, per trial. Lower is better.",
        "repeats" => "Calls identical to the call right before them, per trial. Lower is better.",
        "undone" => "Calls that reverse an earlier call by the `undo` pairs, per trial. Lower is better.",
        "denied" => "Calls the allow-list refused, per trial. Lower is better.",
        "recoveries" => "Successful calls of a verb after failed calls of it, per trial. Higher is better.",
        "help_calls" => "Calls with one of the interface's `help` arguments (default `--help`, `-h` or the verb `help`), per trial. Lower is better.",
        "asks" => "Answers that ask the person (one per turn of a conversation), per trial. Lower is better.",
        "tokens" => "Input + output tokens per trial. Lower is better.",
        "requests" => "Model requests per trial. Lower is better.",
        "wall_seconds" => "Wall-clock seconds of the agent per trial. Lower is better.",
        "agent_cpu_seconds" => "CPU seconds of the agent's process tree per trial. Lower is better.",
        _ => return None,
    })
}

/// The schema of a task's `route_faults` table ([`FAULT_ROUTES`] to [`FAULT_KINDS`]); only used
/// as `#[schemars(with = "RouteFaults")]`.
enum RouteFaults {}

impl JsonSchema for RouteFaults {
    fn schema_name() -> Cow<'static, str> {
        "RouteFaults".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let kind = generator.subschema_for::<RouteFault>();
        let mut properties = Map::new();
        for route in FAULT_ROUTES {
            let mut schema = kind.clone();
            let what = match *route {
                "anthropic" => "The Anthropic Messages API route.",
                "responses" => "The OpenAI Responses API route.",
                "chat" => "The OpenAI Chat Completions API route.",
                "gemini" => "The Gemini API route.",
                "*" => "Every model route.",
                _ => "A model route.",
            };
            schema.insert("description".into(), what.into());
            properties.insert((*route).to_string(), schema.to_value());
        }
        json_schema!({
            "type": "object",
            "properties": properties,
            "additionalProperties": false,
        })
    }
}

/// The schema of one fault ([`FAULT_KINDS`]); only used by [`RouteFaults`].
enum RouteFault {}

impl JsonSchema for RouteFault {
    fn schema_name() -> Cow<'static, str> {
        "RouteFault".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let docs: Vec<Value> = FAULT_KINDS
            .iter()
            .map(|kind| match *kind {
                "credential_loss" => "The credentials are rejected: HTTP 401 with an authentication error.".into(),
                "rate_limit" => "The provider rate-limits: HTTP 429 with a rate-limit error.".into(),
                "timeout" => "The provider never answers: the request is held open until the client gives up.".into(),
                _ => Value::Null,
            })
            .collect();
        json_schema!({
            "description": "A fault the mock model injects instead of an answer.",
            "type": "string",
            "enum": FAULT_KINDS,
            "x-taplo": { "docs": { "enumValues": docs } },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct OneAgent {
        #[allow(dead_code)]
        agent: AgentKind,
    }

    fn argv(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_first_operand_rule_skips_options_and_stops_at_a_double_dash() {
        let i: Interface = toml::from_str("command = \"chat\"\nverb = \"first-operand\"").unwrap();
        assert_eq!(
            i.verb_of(&argv(&["chat", "--json", "-v", "send", "x"])),
            Some("send")
        );
        assert_eq!(i.verb_of(&argv(&["chat", "--", "-send"])), Some("-send"));
        assert_eq!(i.verb_of(&argv(&["chat", "-", "x"])), Some("-"));
        assert_eq!(i.verb_of(&argv(&["chat", "--json"])), None);
        let by_arg: Interface = toml::from_str("command = \"chat\"\nverb_arg = 2").unwrap();
        assert_eq!(
            by_arg.verb_of(&argv(&["chat", "--json", "send"])),
            Some("send")
        );
        assert_eq!(by_arg.verb_rule(), VerbRule::Arg);
        assert!(toml::from_str::<Interface>("command = \"c\"\nverb = \"second\"").is_err());
    }

    #[test]
    fn help_s_own_exit_status_is_success_for_help_calls_only() {
        let i: Interface =
            toml::from_str("command = \"sqlite3\"\nhelp = [\"--help\"]\nhelp_exit = [1]").unwrap();
        assert!(i.succeeded(&argv(&["sqlite3", "--help"]), Some(1)));
        assert!(!i.succeeded(&argv(&["sqlite3", "--help"]), Some(2)));
        assert!(!i.succeeded(&argv(&["sqlite3", "x.db"]), Some(1)));
        assert!(!i.succeeded(&argv(&["sqlite3", "--help"]), None));
        assert!(i.succeeded(&argv(&["sqlite3", "x.db"]), Some(0)));
        // A failing call with a help argument tacked on is still a failure.
        assert!(i.is_help(&argv(&["sqlite3", "x.db", "SELEC 1", "--help"])));
        assert!(!i.succeeded(&argv(&["sqlite3", "x.db", "SELEC 1", "--help"]), Some(1)));
        assert!(!i.succeeded(&argv(&["sqlite3"]), Some(1)));
        // The command's own name is no argument: `help` only looks after it.
        assert!(!i.is_help(&argv(&["--help"])));
    }

    #[test]
    fn a_suite_cannot_declare_a_person_as_its_agent() {
        let err = toml::from_str::<OneAgent>("agent = \"human\"").expect_err("refused");
        let text = err.to_string();
        assert!(text.contains("unknown variant `human`"), "{text}");
        let expected = text.split("expected one of").nth(1).unwrap_or_default();
        assert!(
            expected.contains("`script`") && !expected.contains("human"),
            "{text}"
        );
        assert!(toml::from_str::<OneAgent>("agent = \"script\"").is_ok());
        assert_eq!(AgentKind::Human.as_str(), "human");
        let schema = serde_json::to_string(&json_schema()).expect("json");
        assert!(!schema.contains("\"human\""), "the schema offers `human`");
    }
}
