//! The typed form of `suite.toml`, schema version 1, exactly as DESIGN.md specifies it.
//!
//! Every table rejects unknown keys. Values that a later check must point back at (ids, regexes,
//! paths) keep their byte span in the source via [`Spanned`], so a problem found after parsing is
//! still reported with its file, line and column.

use std::collections::BTreeMap;

use serde::Deserialize;
pub use toml::Spanned;

use crate::assertion::Assertion;

/// The only schema version this reader understands.
pub const SCHEMA_VERSION: i64 = 1;

/// A parsed `suite.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteFile {
    /// Must be [`SCHEMA_VERSION`]; checked before the rest is read.
    pub schema_version: Spanned<i64>,
    /// Stable identifier of the suite; part of every hidden-mutation choice.
    pub id: Spanned<String>,
    /// Human-readable title.
    #[serde(default)]
    pub name: Option<String>,
    /// The public starting workspace, relative to the suite directory.
    #[serde(default = "default_fixture")]
    pub fixture: Spanned<String>,
    /// Trials per (task, variant) in development mode.
    #[serde(default = "default_development_trials")]
    pub development_trials: u32,
    /// Trials per (task, variant) in release mode.
    #[serde(default = "default_release_trials")]
    pub release_trials: u32,
    /// Settings every task inherits unless it sets its own.
    #[serde(default)]
    pub defaults: TaskSettings,
    /// How results are reported.
    #[serde(default)]
    pub report: ReportConfig,
    /// Gates for `compare --gate` and release runs.
    #[serde(default)]
    pub promotion: Option<Promotion>,
    /// The arms of every comparison.
    #[serde(default)]
    pub variants: Vec<Variant>,
    /// Mock backends started fresh for each trial.
    #[serde(default)]
    pub services: Vec<Service>,
    /// The requests a person would make, with the rules over the end state.
    #[serde(default)]
    pub tasks: Vec<Task>,
    /// Prices by model name, in US dollars per million tokens; a model without one makes a
    /// trial's cost `incomplete`, never zero.
    #[serde(default)]
    pub prices: BTreeMap<String, Price>,
}

/// A model's price, US dollars per million tokens of each category.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Uncached input tokens.
    pub input: f64,
    /// Output tokens.
    pub output: f64,
    /// Input tokens read from the cache (default: the input price).
    #[serde(default)]
    pub cache_read: Option<f64>,
    /// Input tokens written to the cache (default: the input price).
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
    5
}

/// Keys a task inherits from `[defaults]` and may override for itself.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSettings {
    /// Seconds before the agent is stopped.
    pub wall_timeout_seconds: Option<u64>,
    /// Seconds each `check` may run.
    pub validation_timeout_seconds: Option<u64>,
    /// What the trial's network namespace can reach.
    pub network: Option<Network>,
    /// The interface commands: shimmed, logged and allowed to the agent.
    pub allow: Option<Vec<Spanned<String>>>,
    /// Whether the offline-user clause is appended to every prompt.
    pub offline_user: Option<bool>,
    /// Seconds after an agent action during which a user's undo blames the agent.
    pub undo_window_seconds: Option<u64>,
}

/// The network a trial gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// Only the trial's own loopback.
    None,
    /// The trial's own loopback plus proctor's model proxy.
    Loopback,
    /// The host network, recorded as such.
    Host,
}

impl Network {
    /// The spelling used in `suite.toml` and in records.
    pub fn as_str(self) -> &'static str {
        match self {
            Network::None => "none",
            Network::Loopback => "loopback",
            Network::Host => "host",
        }
    }
}

/// The `[report]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportConfig {
    /// An arm with fewer graded trials than this makes a comparison `underpowered`.
    #[serde(default = "default_underpowered_below")]
    pub underpowered_below: u32,
}

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

/// The `[promotion]` table: the gates a candidate must pass against a baseline.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Promotion {
    /// Variant id of the control arm.
    pub baseline: Spanned<String>,
    /// Variant id of the arm to promote.
    pub candidate: Spanned<String>,
    /// The metric the improvement is measured on.
    #[serde(default = "default_primary_metric")]
    pub primary_metric: Spanned<String>,
    /// Whether higher or lower values of the primary metric are better.
    #[serde(default = "default_direction")]
    pub direction: Direction,
    /// Minimum relative improvement of the primary metric (0.10 = 10%).
    #[serde(default)]
    pub minimum_relative_improvement: Option<f64>,
    /// Minimum absolute improvement of the primary metric.
    #[serde(default)]
    pub minimum_absolute_improvement: Option<f64>,
    /// How far below the strongest control the candidate's success may be.
    #[serde(default)]
    pub strongest_success_tolerance: Option<f64>,
    /// Metrics that must not get worse.
    #[serde(default)]
    pub no_regression: Vec<Spanned<String>>,
    /// Whether every arm needs a complete cost ledger.
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
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
    "tokens",
    "requests",
    "wall_seconds",
    "agent_cpu_seconds",
];

/// The agent CLI a variant drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
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
    /// Any command, from a template with `{prompt}`, `{workspace}`, `{model}`.
    Command,
    /// proctor's own scripted agent.
    Script,
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
        }
    }
}

/// One arm of a comparison.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    /// Unique within the suite.
    pub id: Spanned<String>,
    /// Which agent runs.
    pub agent: AgentKind,
    /// Model name passed to the agent.
    #[serde(default)]
    pub model: Option<String>,
    /// Why this arm exists, for the reader of the results.
    #[serde(default)]
    pub purpose: Option<String>,
    /// Text put before the task prompt.
    #[serde(default)]
    pub prompt_prefix: Option<String>,
    /// Text put after the task prompt.
    #[serde(default)]
    pub prompt_suffix: Option<String>,
    /// Files copied into this variant's workspace only: workspace path -> suite path.
    #[serde(default)]
    pub files: BTreeMap<String, Spanned<String>>,
    /// For `agent = "script"`: a folder of `TASK_ID.toml` files, or one file for every task.
    #[serde(default)]
    pub script: Option<Spanned<String>>,
    /// For `agent = "command"`: the argv template.
    #[serde(default)]
    pub command: Option<Spanned<Vec<String>>>,
    /// For real agent CLIs: the scripted model turns served by `proctor mock-model` inside each
    /// trial (a folder of `TASK_ID.toml`, or one file for every task).
    #[serde(default)]
    pub model_script: Option<Spanned<String>>,
    /// Replaces the allow-list of every task for this variant.
    #[serde(default)]
    pub allow: Option<Vec<Spanned<String>>>,
    /// Extra environment for the agent.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// A mock backend started fresh inside each trial's namespaces.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Service {
    /// Unique within the suite; assertions name it.
    pub name: Spanned<String>,
    /// argv; the program is a name on PATH or a path inside the suite.
    pub command: Spanned<Vec<String>>,
    /// How to know the service is up.
    #[serde(default)]
    pub ready: Option<Ready>,
    /// How to know the service is the mock and not a real server.
    #[serde(default)]
    pub guard: Option<Guard>,
    /// The file the service writes in `$PROCTOR_SERVICE_DIR`, read by `state` assertions.
    #[serde(default)]
    pub state: Option<Spanned<String>>,
    /// Environment given to the agent (and the service).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// A readiness probe.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ready {
    /// URL that must answer 2xx.
    pub http: Spanned<String>,
    /// How long to keep trying.
    #[serde(default = "default_ready_timeout")]
    pub timeout_seconds: u64,
}

fn default_ready_timeout() -> u64 {
    10
}

/// A check that the service is the mock.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Guard {
    /// URL to fetch.
    pub http: Spanned<String>,
    /// Text the response body must contain.
    pub expect: String,
}

/// What the correct behaviour for a task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Expect {
    /// Do the task.
    #[default]
    Complete,
    /// Decline it.
    Refuse,
    /// Stop and ask the person.
    Ask,
}

/// A request a person would make, with the rules over the end state.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// Unique within the suite.
    pub id: Spanned<String>,
    /// What the agent is asked.
    pub prompt: String,
    /// The correct behaviour.
    #[serde(default)]
    pub expect: Expect,
    /// Free-form difficulty label.
    #[serde(default)]
    pub difficulty: Option<String>,
    /// A task where the right outcome is to do nothing; kept for the reader.
    #[serde(default)]
    pub negative_control: bool,
    /// Overrides `[defaults].wall_timeout_seconds`.
    #[serde(default)]
    pub wall_timeout_seconds: Option<u64>,
    /// Overrides `[defaults].validation_timeout_seconds`.
    #[serde(default)]
    pub validation_timeout_seconds: Option<u64>,
    /// Overrides `[defaults].network`.
    #[serde(default)]
    pub network: Option<Network>,
    /// Overrides `[defaults].allow`.
    #[serde(default)]
    pub allow: Option<Vec<Spanned<String>>>,
    /// Overrides `[defaults].offline_user`.
    #[serde(default)]
    pub offline_user: Option<bool>,
    /// Overrides `[defaults].undo_window_seconds`.
    #[serde(default)]
    pub undo_window_seconds: Option<u64>,
    /// Faults injected on model routes (`anthropic`, `responses`, `chat`, `gemini`, `*`):
    /// `credential_loss`, `rate_limit` or `timeout`. The trial must come out `errored`.
    #[serde(default)]
    pub route_faults: BTreeMap<String, Spanned<String>>,
    /// How calls of the interface under test are read.
    #[serde(default)]
    pub interface: Option<Interface>,
    /// Every assertion must hold for `completed`.
    pub success: Spanned<Condition>,
    /// How a refusal or an ask is recognised in the answer.
    #[serde(default)]
    pub refusal: Option<Refusal>,
    /// Graded criteria.
    #[serde(default)]
    pub rubric: Vec<Criterion>,
    /// Limits on the rubric total.
    #[serde(default)]
    pub caps: Vec<Cap>,
}

/// `[tasks.interface]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Interface {
    /// The command whose calls are counted.
    pub command: Spanned<String>,
    /// argv index of the verb.
    #[serde(default = "default_verb_arg")]
    pub verb_arg: usize,
    /// Pairs of verbs where the second reverses the first.
    #[serde(default)]
    pub undo: Vec<[String; 2]>,
}

fn default_verb_arg() -> usize {
    1
}

/// A list of assertions under `all` (every one holds) or `any` (at least one holds).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Condition {
    /// Every one must hold.
    #[serde(default)]
    pub all: Option<Vec<Spanned<Assertion>>>,
    /// At least one must hold.
    #[serde(default)]
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

/// `[tasks.refusal]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Refusal {
    /// Regexes that mark the answer as a refusal.
    #[serde(default)]
    pub refuse_patterns: Vec<Spanned<String>>,
    /// Regexes that mark the answer as a question to the person.
    #[serde(default)]
    pub ask_patterns: Vec<Spanned<String>>,
}

/// One graded criterion of a rubric.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Criterion {
    /// Unique within the task.
    pub id: Spanned<String>,
    /// The highest score.
    pub max: u32,
    /// Checked in order; the first whose `all` holds gives the score.
    pub levels: Vec<Spanned<Level>>,
}

/// A score and the assertions that earn it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Level {
    /// The score given.
    pub score: u32,
    /// Every one must hold.
    pub all: Vec<Spanned<Assertion>>,
}

/// A cap on the rubric total, applied when any of its assertions holds.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cap {
    /// The cap applies when at least one holds.
    pub any: Vec<Spanned<Assertion>>,
    /// The total is limited to this.
    pub max_total: u32,
}
