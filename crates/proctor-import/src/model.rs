//! One imported task, as read from either format, before anything is written.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::files::FileEntry;
use crate::image::ImageSource;

/// The task format being imported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// Harbor: `task.toml`, `instruction.md`, `tests/test.sh`, `solution/solve.sh`.
    Harbor,
    /// Terminal-Bench before Harbor: `task.yaml`, `run-tests.sh`, `solution.sh`.
    TerminalBench,
}

impl Format {
    /// The format's name for people.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Format::Harbor => "Harbor",
            Format::TerminalBench => "Terminal-Bench",
        }
    }

    /// The file whose presence makes a folder a task of this format.
    pub(crate) fn marker(self) -> &'static str {
        match self {
            Format::Harbor => "task.toml",
            Format::TerminalBench => "task.yaml",
        }
    }

    /// The `proctor import` subcommand, for the generated comments.
    pub(crate) fn command(self) -> &'static str {
        match self {
            Format::Harbor => "harbor",
            Format::TerminalBench => "terminal-bench",
        }
    }
}

/// A task that can be imported, with everything the suite needs from it.
#[derive(Debug, Clone)]
pub(crate) struct TaskPlan {
    /// The task folder it was read from.
    pub source: PathBuf,
    /// Its id in the suite.
    pub id: String,
    /// The instruction, verbatim.
    pub prompt: String,
    /// The image (`[tasks.environment] image`).
    pub image: ImageSource,
    /// The Dockerfile a registry `image` is built from when it cannot be pulled (or with
    /// `--build`): its context is copied to `environments/TASK_ID/` (`[tasks.environment]
    /// build`).
    pub fallback_build: Option<crate::image::DockerBuild>,
    /// The longest a build of the task's image may take, in seconds (Harbor's
    /// `build_timeout_sec`).
    pub build_timeout: Option<u64>,
    /// The working directory inside the image, when the task states it (else the image's own).
    pub workdir: Option<String>,
    /// Environment variables of the environment (literal values only).
    pub env: BTreeMap<String, String>,
    /// `wall_timeout_seconds`.
    pub wall_timeout: Option<u64>,
    /// `validation_timeout_seconds`.
    pub validation_timeout: Option<u64>,
    /// The agent phase's and the checks phase's networks, as the task's format gives them.
    pub network: Networks,
    /// `difficulty`.
    pub difficulty: Option<String>,
    /// The resources the task asks for (`cpus`, `memory_mb`, `storage_mb`).
    pub resources: Resources,
    /// Lines written as comments above the task (author, category, tags).
    pub comments: Vec<String>,
    /// What the task says about itself that `suite.toml` has no key for, written to
    /// `import.toml` under `[tasks.TASK_ID]`.
    pub metadata: toml::Table,
    /// Every entry of a Terminal-Bench task's `descriptions`, `(key, text)`, written to
    /// `descriptions/TASK_ID/KEY.md` (the prompt is one of them, or `instruction`).
    pub descriptions: Vec<(String, String)>,
    /// How the end state is checked.
    pub verifier: VerifierPlan,
    /// The reference solution, for the oracle.
    pub oracle: OraclePlan,
    /// The sidecar containers of the task (its compose file's services beside the main one).
    pub sidecars: Vec<SidecarPlan>,
    /// A Harbor multi-step task's steps: the task is imported in steps, each with its own
    /// check, and has no verifier of its own.
    pub steps: Option<StepsImport>,
    /// The task's MCP servers (Harbor's `[[environment.mcp_servers]]`).
    pub mcp_servers: Vec<McpPlan>,
}

/// An MCP server a task gives its agent: `[[mcp_servers]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct McpPlan {
    /// Its name.
    pub name: String,
    /// How it is reached.
    pub transport: McpTransport,
}

/// How an imported MCP server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum McpTransport {
    /// Started per session with this argv (Harbor's `command`, then its `args`), in the task's
    /// image.
    Stdio(Vec<String>),
    /// Streamable HTTP, served by the task's container `service` at `url` (its host made
    /// `127.0.0.1`: the task's containers share one loopback).
    Http {
        /// The URL on the trial's loopback.
        url: String,
        /// The container (sidecar) that serves it.
        service: String,
        /// Whether it speaks the older HTTP+SSE transport (Harbor's `sse`).
        legacy_sse: bool,
    },
}

/// A Harbor task's steps, read.
#[derive(Debug, Clone)]
pub(crate) struct StepsImport {
    /// The task's `tests/` files, shared by every step.
    pub shared_tests: Vec<FileEntry>,
    /// The steps, in order.
    pub steps: Vec<StepImport>,
    /// `multi_step_reward_strategy`: `mean` or `final`.
    pub strategy: String,
}

/// One Harbor step, read.
#[derive(Debug, Clone)]
pub(crate) struct StepImport {
    /// Its name.
    pub name: String,
    /// Its `instruction.md`.
    pub prompt: String,
    /// `min_reward`.
    pub min_reward: Option<f64>,
    /// `[steps.agent] timeout_sec`, in whole seconds.
    pub timeout: Option<u64>,
    /// `[steps.verifier] timeout_sec`, in whole seconds.
    pub check_timeout: Option<u64>,
    /// `[steps.verifier.env]`, literal values.
    pub check_env: BTreeMap<String, String>,
    /// `[steps.healthcheck]`: command, interval, retries.
    pub healthcheck: Option<(String, Option<u64>, Option<u32>)>,
    /// Its `tests/` files.
    pub tests: Vec<FileEntry>,
    /// Its `workdir/` files.
    pub workdir: Vec<FileEntry>,
    /// Its `solution/`, for the oracle's turn.
    pub oracle: OraclePlan,
    /// The task's `artifacts`, then the step's own.
    pub artifacts: Vec<String>,
}

/// A phase's network in the suite: `none`, or `host` (the task's format gives the phase the
/// internet; proctor cannot give it less than the host's network).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Net {
    /// `"none"`: only the sandbox's own loopback.
    None,
    /// `"internet"`: the trial's own network, out to public addresses only.
    Internet,
}

impl Net {
    /// The value written in `suite.toml`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Net::None => "none",
            Net::Internet => "internet",
        }
    }
}

/// The networks of a task's two phases: the agent's (`network`) and the verifier's
/// (`check_network`), with where they come from, for the suite's comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Networks {
    /// The agent phase's.
    pub agent: Net,
    /// The checks phase's.
    pub checks: Net,
    /// Why: the task's settings (or its format's default) they come from.
    pub why: String,
    /// The names an internet phase reaches (Harbor's `allowed_hosts`); empty: any.
    pub allowed_hosts: Vec<String>,
}

/// The resources a task asks for, written to its `[tasks.environment]`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Resources {
    /// CPUs (`cpus`), possibly fractional.
    pub cpus: Option<f64>,
    /// Memory in MiB (`memory_mb`).
    pub memory_mb: Option<u64>,
    /// Disk space in MiB (`storage_mb`).
    pub storage_mb: Option<u64>,
}

/// How the task's own verifier decides success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Harbor: the reward the verifier writes to `/logs/verifier/reward.txt` or `reward.json`
    /// must be 1.
    Reward,
    /// Terminal-Bench's result parser named by the task (`parser_name`, default `pytest`)
    /// reads `run-tests.sh`'s output and must say the task is resolved.
    Parser(crate::parsers::Parser),
}

/// The verifier: files laid into `holdout/TASK_ID/` (seen by the checks at `/tests`) and the
/// script that runs them.
#[derive(Debug, Clone)]
pub(crate) struct VerifierPlan {
    /// How success is read from the verifier.
    pub verdict: Verdict,
    /// Files for `holdout/TASK_ID/`, by their path under it (and under `/tests`).
    pub files: Vec<FileEntry>,
    /// The script among them that runs the verifier (`test.sh`, `run-tests.sh`).
    pub entry: String,
    /// Environment variables for the verifier (literal values only).
    pub env: BTreeMap<String, String>,
    /// `reward.json` metrics that become rubric criteria.
    pub metrics: Vec<String>,
    /// The verifier runs in a container of its own, made afresh from the task's image with the
    /// agent's workspace (Harbor's `[verifier] environment_mode = "separate"`): imported as
    /// `check_root = "image"`; otherwise it runs in the agent's container (`"agent"`).
    pub separate: bool,
}

/// The task's reference solution.
#[derive(Debug, Clone)]
pub(crate) struct OraclePlan {
    /// The solution's files, by their path under the solution folder.
    pub files: Vec<FileEntry>,
    /// The script among `files` to run (`solve.sh`, `solution.sh`); `None`: the oracle does
    /// nothing.
    pub entry: Option<String>,
    /// The absolute folder the task's own scripts expect the solution in (`/solution` for
    /// Harbor), rewritten to where the oracle lays it.
    pub expected_dir: Option<&'static str>,
    /// Environment variables for the solution (literal values only).
    pub env: BTreeMap<String, String>,
    /// Why there is no runnable solution, for the oracle file's comment.
    pub missing: Option<String>,
}

impl OraclePlan {
    /// The oracle of a task with no runnable reference solution (`why`): it does nothing, which
    /// a warning added to `w` says.
    pub(crate) fn without_solution(why: &str, w: &mut Vec<String>) -> OraclePlan {
        w.push(format!(
            "{why}: its oracle does nothing, so `proctor validate --oracle` fails for it"
        ));
        OraclePlan {
            files: Vec::new(),
            entry: None,
            expected_dir: None,
            env: BTreeMap::new(),
            missing: Some(why.to_string()),
        }
    }
}

/// A sidecar container of an imported task: `[[tasks.services]]` with an `image`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SidecarPlan {
    /// The service's name, which the main container resolves.
    pub name: String,
    /// Its image: a registry reference, a local image of the task folder, or a Dockerfile
    /// (`build:`) that the import builds before anything is written.
    pub image: ImageSource,
    /// Its `command` (over the image's `Cmd`), if it sets one.
    pub command: Option<Vec<String>>,
    /// Its working folder, if it sets one.
    pub workdir: Option<String>,
    /// Its literal environment.
    pub env: BTreeMap<String, String>,
    /// Its healthcheck, if it has one.
    pub healthcheck: Option<HealthPlan>,
    /// The other sidecars it starts after.
    pub depends_on: Vec<String>,
}

impl SidecarPlan {
    /// The name its local image takes in the suite (`images/TASK--NAME.tar`): task `id`'s
    /// and its own.
    pub(crate) fn image_key(&self, id: &str) -> String {
        format!("{id}--{}", self.name)
    }
}

/// A compose `healthcheck`, as proctor runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HealthPlan {
    /// The argv (`CMD-SHELL` and a plain string through `sh -c`).
    pub argv: Vec<String>,
    /// How long until Docker would call it unhealthy: `start_period` + `retries` ×
    /// (`interval` + `timeout`), with Docker's defaults (0 s, 3, 30 s, 30 s).
    pub timeout_seconds: u64,
    /// The longest pause between tries: 1 s (proctor tries more often than Docker's
    /// `interval`, so a service is seen healthy sooner, never later).
    pub interval_seconds: u64,
}

/// A task read from its folder: imported, or skipped with the reason. Warnings are collected
/// either way.
#[derive(Debug)]
pub(crate) struct Read {
    /// The plan, or why the task is skipped.
    pub outcome: Result<Box<TaskPlan>, String>,
    /// What was not carried over exactly.
    pub warnings: Vec<String>,
}

/// The skip reason among a task's `reasons` (the first found); each other one is added to `w`,
/// so that no reason is hidden behind the first.
pub(crate) fn skip_reason<const N: usize>(
    reasons: [Option<String>; N],
    w: &mut Vec<String>,
) -> String {
    let mut found = reasons.into_iter().flatten();
    let first = found.next().unwrap_or_default();
    for other in found {
        w.push(format!("also a reason to skip it: {other}"));
    }
    first
}
