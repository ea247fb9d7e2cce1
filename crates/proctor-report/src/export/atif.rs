//! A trial as an ATIF trajectory (Agent Trajectory Interchange Format, Harbor's RFC 0001,
//! written as ATIF-v1.8; the field-by-field mapping is in docs/export.md).
//!
//! The trajectory is built only from what proctor recorded, never from what the model or the
//! agent said about itself:
//!
//! - step 1 is the task's prompt as the agent received it (`source = "user"`);
//! - with a wire ledger (the mock model's `wire.jsonl`, or the model gateway's `model.jsonl`
//!   with its bodies), one agent step per main model request: the response's text, reasoning
//!   and tool calls as they went over the wire, each tool call's observation as the agent sent
//!   it back to the model in a later request, and the request's usage as the step's metrics.
//!   Side requests (quota probes, titles) are folded into the next step (`llm_call_count`
//!   counts them), so the steps' metrics add up to the wire ledger;
//! - a scripted agent: one step per scripted shell step, with its command, output and exit
//!   (`llm_call_count = 0`), then its answer;
//! - anything else (a person's sitting, a `command` agent, a CLI whose wire log is missing):
//!   one step per interface call of the calls log, then the answer;
//! - every interface call of the calls log is attached to the tool call that made it
//!   (`extra.interface_calls` of its observation), by order and command name; one no tool call
//!   names is listed in the trajectory's `extra.unattributed_interface_calls`;
//! - the final metrics are the wire ledger's, or the agent's own report where no wire exists
//!   (then `extra.token_source = "agent-reported"`);
//! - the trial's outcome, reason, task success and integrity findings are in the trajectory's
//!   `extra`.

use std::collections::BTreeMap;

use proctor_score::{CallRecord, Finding, Outcome, OutcomeKind};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The ATIF version written.
pub const ATIF_VERSION: &str = "ATIF-v1.8";

// ---------------------------------------------------------------------------------------------
// The ATIF document (the fields of Harbor's `harbor.models.trajectories`).
// ---------------------------------------------------------------------------------------------

/// An ATIF trajectory: one agent's run of one task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trajectory {
    /// `ATIF-v1.8`.
    pub schema_version: String,
    /// The run the trajectory belongs to: `RUN_ID/TRIAL_ID`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// This trajectory's own id: the trial id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trajectory_id: Option<String>,
    /// The agent.
    pub agent: Agent,
    /// The steps, `step_id` 1, 2, ...
    pub steps: Vec<Step>,
    /// How the trajectory was made, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    /// Totals over the trajectory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub final_metrics: Option<FinalMetrics>,
    /// The trial's grading.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<TrajectoryExtra>,
}

/// The agent system.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Agent {
    /// The agent kind (`claude-code`, `script`, `human`, ...).
    pub name: String,
    /// Its version: the CLI's as proctor found it installed, proctor's own for a scripted
    /// agent, `unknown` otherwise.
    pub version: String,
    /// The model, when the variant or the wire names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_name: Option<String>,
    /// The variant, and the person of a sitting.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<AgentExtra>,
}

/// proctor's additions to [`Agent`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentExtra {
    /// The variant (the arm) the trial ran.
    pub variant: String,
    /// The person who sat the task (`proctor sit --as NAME`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub person: Option<String>,
}

/// Who a step comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The harness.
    System,
    /// The person giving the task (its prompt).
    User,
    /// The agent.
    Agent,
}

/// One step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// 1-based, in order.
    pub step_id: u64,
    /// When it happened (RFC 3339), where a record gives the time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// Who it comes from.
    pub source: Source,
    /// The model of this turn, when the wire names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_name: Option<String>,
    /// The message: the prompt, a turn's text, or the answer.
    pub message: String,
    /// The turn's reasoning as it went over the wire.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// The tool calls of the turn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// What the tool calls gave back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observation: Option<Observation>,
    /// The turn's token usage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Metrics>,
    /// Model requests the step stands for (0: no model, a scripted or a person's step).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llm_call_count: Option<u64>,
    /// Where the step was read from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<StepExtra>,
}

/// proctor's additions to [`Step`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepExtra {
    /// The record the step was made from: `wire`, `script`, `calls`, `prompt` or `answer`.
    pub from: String,
    /// The wire ledger's request numbers the step stands for (main first, then side requests).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wire_requests: Vec<u64>,
    /// The main request was a client's retry of the previous one (the same turn again).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replay: bool,
    /// The HTTP status the agent got, when it was not a success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
}

/// A tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// The id the wire gave it (or `step-N` for a scripted step, `call-SEQ` for an interface
    /// call).
    pub tool_call_id: String,
    /// The tool's name.
    pub function_name: String,
    /// Its arguments, as sent.
    pub arguments: Map<String, Value>,
}

/// What the environment gave back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Observation {
    /// One result per tool call that has one.
    pub results: Vec<ObservationResult>,
}

/// One tool call's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObservationResult {
    /// The tool call it answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_call_id: Option<String>,
    /// Its output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Where it was read from, its exit, and the interface calls it made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<ResultExtra>,
}

/// proctor's additions to [`ObservationResult`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResultExtra {
    /// `wire` (as the agent sent it back to the model), `script` (the scripted step's output)
    /// or `calls` (the calls log's head of the output).
    pub from: String,
    /// The exit status, when recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<i32>,
    /// The agent marked the result an error (on the wire).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    /// The stderr recorded, when apart from the content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
    /// The interface calls (calls log) the tool call made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interface_calls: Vec<InterfaceCall>,
}

/// An interface call as the calls log holds it (a shim recorded it, outside the sandbox).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InterfaceCall {
    /// Its sequence number in the calls log.
    pub seq: u64,
    /// Its argv.
    pub argv: Vec<String>,
    /// Its exit status; `None` when it never finished.
    pub exit: Option<i32>,
    /// `denied` when the allow-list (or the CLI's permission layer) refused it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denied: Option<String>,
    /// Bytes it wrote to stdout.
    pub stdout_bytes: u64,
    /// Bytes it wrote to stderr.
    pub stderr_bytes: u64,
}

impl InterfaceCall {
    fn of(c: &CallRecord) -> InterfaceCall {
        InterfaceCall {
            seq: c.seq,
            argv: c.argv.clone(),
            exit: c.exit,
            denied: c.denied.clone(),
            stdout_bytes: c.stdout_bytes,
            stderr_bytes: c.stderr_bytes,
        }
    }
}

/// Token usage of a step. `prompt_tokens` includes cached tokens, as ATIF defines it:
/// uncached input + cache reads + cache writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metrics {
    /// Input tokens, cached ones included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
    /// Output tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion_tokens: Option<u64>,
    /// Cache reads (part of `prompt_tokens`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    /// Money, where the gateway priced the request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// proctor's categories.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<TokenExtra>,
}

/// proctor's token categories, kept beside ATIF's sums.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenExtra {
    /// `wire` or `agent-reported`.
    pub token_source: String,
    /// Uncached input tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Cache writes (part of `prompt_tokens`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// Model requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
}

/// Totals over the trajectory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FinalMetrics {
    /// Input tokens, cached ones included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_prompt_tokens: Option<u64>,
    /// Output tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_completion_tokens: Option<u64>,
    /// Cache reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_cached_tokens: Option<u64>,
    /// Money, when every price was known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_cost_usd: Option<f64>,
    /// The number of steps.
    pub total_steps: u64,
    /// proctor's categories, and where the totals come from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<TokenExtra>,
}

/// The trial's grading, in the trajectory's `extra`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrajectoryExtra {
    /// `proctor VERSION`.
    pub exported_by: String,
    /// The run.
    pub run_id: String,
    /// The suite.
    pub suite_id: String,
    /// The task.
    pub task: String,
    /// The variant.
    pub variant: String,
    /// The trial's index in its cell.
    pub trial_index: u32,
    /// One of the eight outcomes, written as its label.
    pub outcome: OutcomeKind,
    /// Why.
    pub reason: String,
    /// Whether the trial met its task's `expect`.
    pub task_success: bool,
    /// Which scoring the outcome comes from: `original` (the run's own) or `rescore N (DATE
    /// UTC)`; absent in trajectories exported before exports said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scoring: Option<String>,
    /// The error kind of an `errored` trial.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<String>,
    /// The integrity audit's findings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub integrity_findings: Vec<Finding>,
    /// The final answer as proctor read it.
    pub answer: String,
    /// Wall seconds the agent ran.
    pub wall_seconds: f64,
    /// The per-trial limit reached, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_reached: Option<proctor_records::Limit>,
    /// The money the agent CLI itself reported (its list-price estimate).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_reported_cost_usd: Option<f64>,
    /// Faults the wire recorded (injected or met), in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub model_faults: Vec<String>,
    /// Interface calls no tool call of the trajectory names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unattributed_interface_calls: Vec<InterfaceCall>,
}

// ---------------------------------------------------------------------------------------------
// What the trajectory is made from.
// ---------------------------------------------------------------------------------------------

/// Tokens and requests from one source; a category not known is `None`, never 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Uncached input tokens.
    pub input: Option<u64>,
    /// Output tokens.
    pub output: Option<u64>,
    /// Cache reads.
    pub cache_read: Option<u64>,
    /// Cache writes.
    pub cache_write: Option<u64>,
    /// Model requests.
    pub requests: Option<u64>,
}

/// The wire API an exchange was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireApi {
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI Responses.
    Responses,
    /// OpenAI Chat Completions.
    Chat,
    /// Google Gemini.
    Gemini,
    /// Not known: the exchange's usage counts, its content is not read.
    Unknown,
}

impl WireApi {
    /// The API of a record's name: the mock model's route (`anthropic`, `responses`, `chat`,
    /// `gemini`) or the gateway's API (`anthropic-messages`, `openai-responses`,
    /// `openai-chat`, `gemini`).
    pub fn from_name(name: &str) -> WireApi {
        match name {
            "anthropic" | "anthropic-messages" => WireApi::Anthropic,
            "responses" | "openai-responses" => WireApi::Responses,
            "chat" | "openai-chat" => WireApi::Chat,
            "gemini" => WireApi::Gemini,
            _ => WireApi::Unknown,
        }
    }
}

/// One model request and its response, as the wire ledger recorded them.
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    /// Its number in the ledger.
    pub seq: u64,
    /// When it was received (RFC 3339), when the ledger says.
    pub time: Option<String>,
    /// The API.
    pub api: WireApi,
    /// A side request (a quota probe, a title): not a turn of its own.
    pub side: bool,
    /// A client's retry of the previous main request.
    pub replay: bool,
    /// The model, when known.
    pub model: Option<String>,
    /// The HTTP status the agent got.
    pub status: Option<u16>,
    /// The request body (`null` when not kept).
    pub request: Value,
    /// The response: its JSON body, or each server-sent event's data in order.
    pub response: Vec<Value>,
    /// Its usage, when the response carried any.
    pub usage: Option<Usage>,
    /// Its cost, when priced.
    pub cost_usd: Option<f64>,
}

/// Everything the trajectory of one trial is made from, as the caller read it from the store.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialEvidence {
    /// The proctor version exporting.
    pub proctor_version: String,
    /// The run.
    pub run_id: String,
    /// The suite.
    pub suite_id: String,
    /// The trial id (`TASK.VARIANT.INDEX`).
    pub trial_id: String,
    /// The task.
    pub task: String,
    /// The variant.
    pub variant: String,
    /// The trial's index in its cell.
    pub trial_index: u32,
    /// The agent kind as launched (`claude-code`, `script`, `human`, ...).
    pub agent_kind: String,
    /// The agent's version, when recorded.
    pub agent_version: Option<String>,
    /// The model the variant names.
    pub model: Option<String>,
    /// The person of a sitting.
    pub person: Option<String>,
    /// The prompt as the agent received it.
    pub prompt: String,
    /// The final answer.
    pub answer: String,
    /// The outcome.
    pub outcome: Outcome,
    /// Why.
    pub reason: String,
    /// Whether the trial met its task's `expect`.
    pub task_success: bool,
    /// Which scoring the outcome, reason and task success come from (`original` or `rescore N
    /// (DATE UTC)`).
    pub scoring: Option<String>,
    /// The integrity audit's findings.
    pub findings: Vec<Finding>,
    /// The per-trial limit reached.
    pub limit_reached: Option<proctor_records::Limit>,
    /// Wall seconds the agent ran.
    pub wall_seconds: f64,
    /// The calls log.
    pub calls: Vec<CallRecord>,
    /// The agent's transcript (`transcript.jsonl`), one value per event.
    pub transcript: Vec<Value>,
    /// The wire ledger's exchanges, in order; `None` when the trial had no wire ledger (or it
    /// could not be read).
    pub wire: Option<Vec<Exchange>>,
    /// Faults the wire recorded, in words.
    pub wire_faults: Vec<String>,
    /// The wire ledger's totals.
    pub wire_usage: Option<Usage>,
    /// What the agent reported.
    pub agent_reported_usage: Option<Usage>,
    /// Money, when every price was known.
    pub cost_usd: Option<f64>,
    /// What the agent CLI reported spending.
    pub agent_reported_cost_usd: Option<f64>,
}

// ---------------------------------------------------------------------------------------------
// Building the trajectory.
// ---------------------------------------------------------------------------------------------

/// The trajectory of one trial.
pub fn trajectory(e: &TrialEvidence) -> Trajectory {
    let mut prompt = agent_step(e.prompt.clone(), "prompt");
    prompt.source = Source::User;
    let mut steps = vec![prompt];
    let wire = e.wire.as_ref().filter(|w| !w.is_empty());
    let script = e.agent_kind == "script";
    let (mut made, how) = agent_steps(e, wire);
    if !script {
        place_user_turns(&mut made, wire, &e.transcript);
    }
    steps.extend(made);
    let unattributed = if wire.is_some() || script {
        attach_calls(&mut steps, &e.calls)
    } else {
        Vec::new()
    };
    for (i, s) in steps.iter_mut().enumerate() {
        s.step_id = i as u64 + 1;
    }
    let (final_metrics, token_note) = final_metrics(e, &steps);
    let agent_version = e.agent_version.clone().unwrap_or_else(|| {
        if script {
            e.proctor_version.clone()
        } else {
            "unknown".into()
        }
    });
    let model_name = e
        .model
        .clone()
        .or_else(|| wire.and_then(|w| w.iter().filter(|x| !x.side).find_map(|x| x.model.clone())));
    Trajectory {
        schema_version: ATIF_VERSION.into(),
        session_id: Some(format!("{}/{}", e.run_id, e.trial_id)),
        trajectory_id: Some(e.trial_id.clone()),
        agent: Agent {
            name: e.agent_kind.clone(),
            version: agent_version,
            model_name,
            extra: Some(AgentExtra {
                variant: e.variant.clone(),
                person: e.person.clone(),
            }),
        },
        notes: Some(format!(
            "Exported by proctor {} from its records of trial {} (run {}): {how}; tool calls joined with the calls log by order and command name; {token_note}. Outcome, reason and integrity findings are in extra.",
            e.proctor_version, e.trial_id, e.run_id
        )),
        steps,
        final_metrics: Some(final_metrics),
        extra: Some(trajectory_extra(e, unattributed)),
    }
}

/// The agent's steps from the best record the trial has (the wire, the script's transcript,
/// the calls log), and how they were made, in words.
fn agent_steps(e: &TrialEvidence, wire: Option<&Vec<Exchange>>) -> (Vec<Step>, &'static str) {
    if let Some(wire) = wire {
        (
            wire_steps(wire),
            "one agent step per main model request of the wire ledger",
        )
    } else if e.agent_kind == "script" {
        (
            script_steps(&e.transcript, &e.answer),
            "one agent step per scripted step, then the answer",
        )
    } else {
        (
            call_steps(&e.calls, &e.answer, e.agent_kind == "human"),
            "one agent step per interface call of the calls log, then the answer",
        )
    }
}

/// The grading and the trial's facts, as the trajectory's `extra`.
fn trajectory_extra(e: &TrialEvidence, unattributed: Vec<InterfaceCall>) -> TrajectoryExtra {
    let error_kind = match &e.outcome {
        Outcome::Errored { kind } => Some(kind.as_str().to_string()),
        _ => None,
    };
    TrajectoryExtra {
        exported_by: format!("proctor {}", e.proctor_version),
        run_id: e.run_id.clone(),
        suite_id: e.suite_id.clone(),
        task: e.task.clone(),
        variant: e.variant.clone(),
        trial_index: e.trial_index,
        outcome: e.outcome.kind(),
        reason: e.reason.clone(),
        task_success: e.task_success,
        scoring: e.scoring.clone(),
        error_kind,
        integrity_findings: e.findings.clone(),
        answer: e.answer.clone(),
        wall_seconds: if e.wall_seconds.is_finite() {
            e.wall_seconds
        } else {
            0.0
        },
        limit_reached: e.limit_reached,
        agent_reported_cost_usd: e.agent_reported_cost_usd.filter(|c| c.is_finite()),
        model_faults: e.wire_faults.clone(),
        unattributed_interface_calls: unattributed,
    }
}

/// The trajectory as pretty JSON.
pub fn to_json(t: &Trajectory) -> Result<String, super::ExportError> {
    let mut s = serde_json::to_string_pretty(t)?;
    s.push('\n');
    Ok(s)
}

fn sum(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    }
}

impl Usage {
    fn add(&mut self, o: &Usage) {
        self.input = sum(self.input, o.input);
        self.output = sum(self.output, o.output);
        self.cache_read = sum(self.cache_read, o.cache_read);
        self.cache_write = sum(self.cache_write, o.cache_write);
        self.requests = sum(self.requests, o.requests);
    }

    /// ATIF's prompt tokens: every input token, cached ones included.
    fn prompt(&self) -> Option<u64> {
        if self.input.is_none() && self.cache_read.is_none() && self.cache_write.is_none() {
            return None;
        }
        Some(self.input.unwrap_or(0) + self.cache_read.unwrap_or(0) + self.cache_write.unwrap_or(0))
    }

    fn extra(&self, source: &str) -> TokenExtra {
        TokenExtra {
            token_source: source.into(),
            input_tokens: self.input,
            cache_write_tokens: self.cache_write,
            requests: self.requests,
        }
    }
}

fn final_metrics(e: &TrialEvidence, steps: &[Step]) -> (FinalMetrics, String) {
    let (usage, source) = match (&e.wire_usage, &e.agent_reported_usage) {
        (Some(w), _) => (Some(*w), "wire"),
        (None, Some(a)) => (Some(*a), "agent-reported"),
        (None, None) => (None, "none"),
    };
    let note = match source {
        "wire" => "token metrics from the wire ledger".to_string(),
        "agent-reported" => {
            "no wire ledger: the final token totals are what the agent reported (extra.token_source = agent-reported), and steps carry none".to_string()
        }
        _ => "no token usage was recorded".to_string(),
    };
    let m = FinalMetrics {
        total_prompt_tokens: usage.and_then(|u| u.prompt()),
        total_completion_tokens: usage.and_then(|u| u.output),
        total_cached_tokens: usage.and_then(|u| u.cache_read),
        total_cost_usd: e.cost_usd.filter(|c| c.is_finite()),
        total_steps: steps.len() as u64,
        extra: usage.map(|u| u.extra(source)),
    };
    (m, note)
}

/// A step of the agent made from the record `from`, with nothing but its message yet.
fn agent_step(message: String, from: &str) -> Step {
    Step {
        step_id: 0,
        timestamp: None,
        source: Source::Agent,
        model_name: None,
        message,
        reasoning_content: None,
        tool_calls: None,
        observation: None,
        metrics: None,
        llm_call_count: None,
        extra: Some(StepExtra {
            from: from.into(),
            ..StepExtra::default()
        }),
    }
}

fn args_of(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(m) => m,
        Value::String(s) => match serde_json::from_str::<Value>(&s) {
            Ok(Value::Object(m)) => m,
            _ if s.trim().is_empty() => Map::new(),
            _ => Map::from_iter([("raw".to_string(), Value::String(s))]),
        },
        Value::Null => Map::new(),
        other => Map::from_iter([("value".to_string(), other)]),
    }
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .map(|i| match i {
                Value::String(s) => s.clone(),
                Value::Object(o) => o
                    .get("text")
                    .or_else(|| o.get("output"))
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| i.to_string()),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

// ----- The wire ------------------------------------------------------------------------------

/// What one response said, read from the wire.
#[derive(Debug, Default)]
struct Turn {
    text: String,
    reasoning: String,
    calls: Vec<(String, String, Map<String, Value>)>,
}

fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn anthropic_turn(response: &[Value]) -> Turn {
    #[derive(Default)]
    struct Block {
        kind: String,
        text: String,
        id: String,
        name: String,
        input: Option<Value>,
        json: String,
    }
    let mut blocks: BTreeMap<u64, Block> = BTreeMap::new();
    let mut next = 0u64;
    let mut from_content = |content: &Value, blocks: &mut BTreeMap<u64, Block>| {
        for b in content.as_array().into_iter().flatten() {
            blocks.insert(
                next,
                Block {
                    kind: str_at(b, "type").unwrap_or_default().into(),
                    text: str_at(b, "text")
                        .or_else(|| str_at(b, "thinking"))
                        .unwrap_or_default()
                        .into(),
                    id: str_at(b, "id").unwrap_or_default().into(),
                    name: str_at(b, "name").unwrap_or_default().into(),
                    input: b.get("input").cloned(),
                    json: String::new(),
                },
            );
            next += 1;
        }
    };
    for ev in response {
        match str_at(ev, "type") {
            Some("content_block_start") => {
                let i = ev.get("index").and_then(Value::as_u64).unwrap_or(0);
                let b = &ev["content_block"];
                blocks.insert(
                    i,
                    Block {
                        kind: str_at(b, "type").unwrap_or_default().into(),
                        text: str_at(b, "text")
                            .or_else(|| str_at(b, "thinking"))
                            .unwrap_or_default()
                            .into(),
                        id: str_at(b, "id").unwrap_or_default().into(),
                        name: str_at(b, "name").unwrap_or_default().into(),
                        input: b
                            .get("input")
                            .cloned()
                            .filter(|i| !matches!(i, Value::Object(m) if m.is_empty())),
                        json: String::new(),
                    },
                );
            }
            Some("content_block_delta") => {
                let i = ev.get("index").and_then(Value::as_u64).unwrap_or(0);
                let d = &ev["delta"];
                let b = blocks.entry(i).or_default();
                if let Some(t) = str_at(d, "text").or_else(|| str_at(d, "thinking")) {
                    b.text.push_str(t);
                }
                if let Some(j) = str_at(d, "partial_json") {
                    b.json.push_str(j);
                }
            }
            Some("message") => from_content(&ev["content"], &mut blocks),
            _ if ev.get("content").is_some_and(Value::is_array) => {
                from_content(&ev["content"], &mut blocks)
            }
            _ => {}
        }
    }
    let mut turn = Turn::default();
    for b in blocks.into_values() {
        match b.kind.as_str() {
            "text" => push_text(&mut turn.text, &b.text),
            "thinking" => push_text(&mut turn.reasoning, &b.text),
            "tool_use" | "server_tool_use" => {
                let input = if b.json.trim().is_empty() {
                    b.input.unwrap_or(Value::Null)
                } else {
                    Value::String(b.json)
                };
                turn.calls.push((b.id, b.name, args_of(input)));
            }
            _ => {}
        }
    }
    turn
}

fn push_text(to: &mut String, text: &str) {
    if text.is_empty() {
        return;
    }
    if !to.is_empty() {
        to.push('\n');
    }
    to.push_str(text);
}

fn responses_turn(response: &[Value]) -> Turn {
    let completed = response.iter().find_map(|ev| {
        (str_at(ev, "type") == Some("response.completed")).then(|| ev["response"]["output"].clone())
    });
    let items: Vec<Value> = match completed {
        Some(Value::Array(items)) => items,
        _ => {
            let done: Vec<Value> = response
                .iter()
                .filter(|ev| str_at(ev, "type") == Some("response.output_item.done"))
                .map(|ev| ev["item"].clone())
                .collect();
            if done.is_empty() {
                response
                    .iter()
                    .filter_map(|v| v.get("output").and_then(Value::as_array))
                    .flatten()
                    .cloned()
                    .collect()
            } else {
                done
            }
        }
    };
    let mut turn = Turn::default();
    for item in &items {
        match str_at(item, "type") {
            Some("message") => {
                for c in item["content"].as_array().into_iter().flatten() {
                    if let Some(t) = str_at(c, "text") {
                        push_text(&mut turn.text, t);
                    }
                }
            }
            Some("reasoning") => {
                for c in item["summary"].as_array().into_iter().flatten() {
                    if let Some(t) = str_at(c, "text") {
                        push_text(&mut turn.reasoning, t);
                    }
                }
            }
            Some("function_call") | Some("custom_tool_call") => {
                let id = str_at(item, "call_id")
                    .or_else(|| str_at(item, "id"))
                    .unwrap_or_default();
                let args = item
                    .get("arguments")
                    .or_else(|| item.get("input"))
                    .cloned()
                    .unwrap_or(Value::Null);
                turn.calls.push((
                    id.into(),
                    str_at(item, "name").unwrap_or_default().into(),
                    args_of(args),
                ));
            }
            Some("local_shell_call") => {
                let id = str_at(item, "call_id").unwrap_or_default();
                turn.calls.push((
                    id.into(),
                    "local_shell".into(),
                    args_of(item["action"].clone()),
                ));
            }
            _ => {}
        }
    }
    turn
}

fn chat_turn(response: &[Value]) -> Turn {
    let mut turn = Turn::default();
    // index -> (id, name, arguments)
    let mut calls: BTreeMap<u64, (String, String, String)> = BTreeMap::new();
    for chunk in response {
        for choice in chunk["choices"].as_array().into_iter().flatten() {
            let part = if choice.get("delta").is_some() {
                &choice["delta"]
            } else {
                &choice["message"]
            };
            if let Some(t) = str_at(part, "content") {
                turn.text.push_str(t);
            }
            if let Some(t) = str_at(part, "reasoning_content") {
                turn.reasoning.push_str(t);
            }
            for (k, tc) in part["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                let i = tc.get("index").and_then(Value::as_u64).unwrap_or(k as u64);
                let entry = calls.entry(i).or_default();
                if let Some(id) = str_at(tc, "id") {
                    entry.0 = id.into();
                }
                if let Some(n) = str_at(&tc["function"], "name") {
                    entry.1.push_str(n);
                }
                if let Some(a) = str_at(&tc["function"], "arguments") {
                    entry.2.push_str(a);
                }
            }
        }
    }
    for (_, (id, name, args)) in calls {
        turn.calls.push((id, name, args_of(Value::String(args))));
    }
    turn
}

fn gemini_turn(response: &[Value], seq: u64) -> Turn {
    let mut turn = Turn::default();
    for chunk in response {
        for cand in chunk["candidates"].as_array().into_iter().flatten() {
            for part in cand["content"]["parts"].as_array().into_iter().flatten() {
                if let Some(t) = str_at(part, "text") {
                    if part.get("thought").and_then(Value::as_bool) == Some(true) {
                        turn.reasoning.push_str(t);
                    } else {
                        turn.text.push_str(t);
                    }
                }
                if let Some(fc) = part.get("functionCall") {
                    let id = str_at(fc, "id")
                        .map(str::to_string)
                        .unwrap_or_else(|| format!("wire-{seq}-{}", turn.calls.len() + 1));
                    turn.calls.push((
                        id,
                        str_at(fc, "name").unwrap_or_default().into(),
                        args_of(fc.get("args").cloned().unwrap_or(Value::Null)),
                    ));
                }
            }
        }
    }
    turn
}

fn turn_of(x: &Exchange) -> Turn {
    let mut turn = match x.api {
        WireApi::Anthropic => anthropic_turn(&x.response),
        WireApi::Responses => responses_turn(&x.response),
        WireApi::Chat => chat_turn(&x.response),
        WireApi::Gemini => gemini_turn(&x.response, x.seq),
        WireApi::Unknown => Turn::default(),
    };
    for (k, call) in turn.calls.iter_mut().enumerate() {
        if call.0.is_empty() {
            call.0 = format!("wire-{}-{}", x.seq, k + 1);
        }
    }
    turn
}

/// A call the model asked its agent to make, as the model's response on the wire says.
#[derive(Debug, Clone, PartialEq)]
pub struct AskedCall {
    /// The call's id (the model's, or `wire-SEQ-K` when the API gives none).
    pub id: String,
    /// The tool's name.
    pub tool: String,
    /// Its arguments.
    pub input: Map<String, Value>,
}

/// What the model asked for over a whole wire: every tool call of its main responses, and the
/// text of those responses (an agent without tool calls, such as aider, proposes commands in
/// text). The wire is recorded by the gateway or the mock model, outside the agent's reach,
/// so this is what the model really asked for, whatever the agent's transcript says.
pub fn asked(wire: &[Exchange]) -> (Vec<AskedCall>, String) {
    let mut calls = Vec::new();
    let mut text = String::new();
    for x in wire.iter().filter(|x| !x.side) {
        let turn = turn_of(x);
        push_text(&mut text, &turn.text);
        calls.extend(
            turn.calls
                .into_iter()
                .map(|(id, tool, input)| AskedCall { id, tool, input }),
        );
    }
    (calls, text)
}

/// A tool result the agent sent back to the model: its content and whether it said error.
type ToolResult = (String, bool);

/// The tool results a request carries: by call id, and (Gemini, whose results name no id)
/// in order.
fn results_of(x: &Exchange) -> (BTreeMap<String, ToolResult>, Vec<ToolResult>) {
    let mut by_id = BTreeMap::new();
    let mut in_order = Vec::new();
    let r = &x.request;
    match x.api {
        WireApi::Anthropic => {
            for m in r["messages"].as_array().into_iter().flatten() {
                for b in m["content"].as_array().into_iter().flatten() {
                    if str_at(b, "type") == Some("tool_result") {
                        if let Some(id) = str_at(b, "tool_use_id") {
                            let err = b.get("is_error").and_then(Value::as_bool) == Some(true);
                            by_id.insert(id.to_string(), (text_of(&b["content"]), err));
                        }
                    }
                }
            }
        }
        WireApi::Responses => {
            for item in r["input"].as_array().into_iter().flatten() {
                let kind = str_at(item, "type").unwrap_or_default();
                if kind.ends_with("_call_output") {
                    if let Some(id) = str_at(item, "call_id") {
                        by_id.insert(id.to_string(), (text_of(&item["output"]), false));
                    }
                }
            }
        }
        WireApi::Chat => {
            for m in r["messages"].as_array().into_iter().flatten() {
                if str_at(m, "role") == Some("tool") {
                    if let Some(id) = str_at(m, "tool_call_id") {
                        by_id.insert(id.to_string(), (text_of(&m["content"]), false));
                    }
                }
            }
        }
        WireApi::Gemini => {
            // Only the newest turn's results: the last content holding function responses.
            let contents = r["contents"].as_array().cloned().unwrap_or_default();
            if let Some(last) = contents.iter().rev().find(|c| {
                c["parts"]
                    .as_array()
                    .is_some_and(|p| p.iter().any(|p| p.get("functionResponse").is_some()))
            }) {
                for p in last["parts"].as_array().into_iter().flatten() {
                    if let Some(fr) = p.get("functionResponse") {
                        let content = text_of(&fr["response"]["output"]);
                        let content = if content.is_empty() {
                            fr["response"].to_string()
                        } else {
                            content
                        };
                        match str_at(fr, "id") {
                            Some(id) => {
                                by_id.insert(id.to_string(), (content, false));
                            }
                            None => in_order.push((content, false)),
                        }
                    }
                }
            }
        }
        WireApi::Unknown => {}
    }
    (by_id, in_order)
}

fn usage_metrics(u: &Usage, cost: Option<f64>) -> Metrics {
    Metrics {
        prompt_tokens: u.prompt(),
        completion_tokens: u.output,
        cached_tokens: u.cache_read,
        cost_usd: cost.filter(|c| c.is_finite()),
        extra: Some(u.extra("wire")),
    }
}

fn wire_steps(wire: &[Exchange]) -> Vec<Step> {
    let main: Vec<&Exchange> = wire.iter().filter(|x| !x.side).collect();
    let sides = sides_by_step(wire, main.len());
    let results: Vec<_> = main.iter().map(|x| results_of(x)).collect();
    let mut steps = Vec::new();
    for (i, x) in main.iter().enumerate() {
        let turn = turn_of(x);
        let mut step = agent_step(turn.text, "wire");
        step.timestamp = x.time.clone();
        step.model_name = x.model.clone();
        if !turn.reasoning.is_empty() {
            step.reasoning_content = Some(turn.reasoning);
        }
        let mut usage = x.usage.unwrap_or_default();
        usage.requests = Some(1);
        let mut cost = x.cost_usd;
        let mut seqs = vec![x.seq];
        fold_sides(
            &mut usage,
            &mut cost,
            &mut seqs,
            sides.get(&i).into_iter().flatten().copied(),
        );
        step.llm_call_count = Some(seqs.len() as u64);
        step.metrics = Some(usage_metrics(&usage, cost));
        if let Some(extra) = &mut step.extra {
            extra.wire_requests = seqs;
            extra.replay = x.replay;
            extra.status = x.status.filter(|s| !(200..300).contains(s));
        }
        if !turn.calls.is_empty() {
            let (calls, obs) = tool_calls(x, turn.calls, &results[i + 1..]);
            step.tool_calls = Some(calls);
            if !obs.is_empty() {
                step.observation = Some(Observation { results: obs });
            }
        }
        steps.push(step);
    }
    if main.is_empty() {
        // Only side requests: one step holds their usage.
        let mut usage = Usage::default();
        let mut seqs = Vec::new();
        fold_sides(&mut usage, &mut None, &mut seqs, wire);
        let mut step = agent_step(String::new(), "wire");
        step.llm_call_count = Some(seqs.len() as u64);
        step.metrics = Some(usage_metrics(&usage, None));
        if let Some(extra) = &mut step.extra {
            extra.wire_requests = seqs;
        }
        steps.push(step);
    }
    steps
}

/// Side requests by the main step they are folded into: the next main one (the last one when
/// none follows).
fn sides_by_step(wire: &[Exchange], mains: usize) -> BTreeMap<usize, Vec<&Exchange>> {
    let mut sides: BTreeMap<usize, Vec<&Exchange>> = BTreeMap::new();
    // `k` counts the main requests seen: the index of the next one.
    let mut k = 0usize;
    for x in wire {
        if x.side {
            sides
                .entry(k.min(mains.saturating_sub(1)))
                .or_default()
                .push(x);
        } else {
            k += 1;
        }
    }
    sides
}

/// Adds `sides`' usage, requests, cost and numbers to a step's.
fn fold_sides<'a>(
    usage: &mut Usage,
    cost: &mut Option<f64>,
    seqs: &mut Vec<u64>,
    sides: impl IntoIterator<Item = &'a Exchange>,
) {
    for s in sides {
        if let Some(u) = &s.usage {
            usage.add(u);
        }
        usage.requests = sum(usage.requests, Some(1));
        *cost = match (*cost, s.cost_usd) {
            (Some(a), Some(b)) => Some(a + b),
            (a, None) => a,
            (None, b) => b,
        };
        seqs.push(s.seq);
    }
}

/// The tool calls of request `x`'s answer, and the result of each that a later request
/// (`later`, the next one first) sent back.
fn tool_calls(
    x: &Exchange,
    calls: Vec<(String, String, Map<String, Value>)>,
    later: &[(BTreeMap<String, ToolResult>, Vec<ToolResult>)],
) -> (Vec<ToolCall>, Vec<ObservationResult>) {
    let mut made = Vec::new();
    let mut obs = Vec::new();
    let mut unkeyed = later
        .first()
        .map(|r| r.1.clone())
        .unwrap_or_default()
        .into_iter();
    for (id, name, args) in calls {
        let found = later
            .iter()
            .find_map(|(by_id, _)| by_id.get(&id).cloned())
            .or_else(|| {
                (x.api == WireApi::Gemini && id.starts_with("wire-"))
                    .then(|| unkeyed.next())
                    .flatten()
            });
        if let Some((content, is_error)) = found {
            obs.push(ObservationResult {
                source_call_id: Some(id.clone()),
                content: Some(content),
                extra: Some(ResultExtra {
                    from: "wire".into(),
                    is_error,
                    ..ResultExtra::default()
                }),
            });
        }
        made.push(ToolCall {
            tool_call_id: id,
            function_name: name,
            arguments: args,
        });
    }
    (made, obs)
}

// ----- A scripted agent ----------------------------------------------------------------------

fn script_steps(transcript: &[Value], answer: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    // In a conversation each turn's answer is a step, and each reply of the user one of its own.
    let conversation = transcript
        .iter()
        .any(|ev| str_at(ev, "type") == Some("user"));
    for ev in transcript {
        match str_at(ev, "type") {
            Some("user") => {
                steps.push(user_step(ev));
                continue;
            }
            Some("answer") if conversation => {
                let text = str_at(ev, "text").unwrap_or_default().to_string();
                let mut said = agent_step(text, "answer");
                said.llm_call_count = Some(0);
                steps.push(said);
                continue;
            }
            Some("step") => {}
            _ => continue,
        }
        let n = ev
            .get("step")
            .and_then(Value::as_u64)
            .unwrap_or(steps.len() as u64 + 1);
        let id = format!("step-{n}");
        let run = str_at(ev, "run").unwrap_or_default().to_string();
        let stderr = str_at(ev, "stderr").unwrap_or_default();
        let mut step = agent_step(String::new(), "script");
        step.llm_call_count = Some(0);
        step.tool_calls = Some(vec![ToolCall {
            tool_call_id: id.clone(),
            function_name: "shell".into(),
            arguments: Map::from_iter([("command".to_string(), Value::String(run))]),
        }]);
        step.observation = Some(Observation {
            results: vec![ObservationResult {
                source_call_id: Some(id),
                content: Some(str_at(ev, "stdout").unwrap_or_default().to_string()),
                extra: Some(ResultExtra {
                    from: "script".into(),
                    exit: ev.get("exit").and_then(Value::as_i64).map(|x| x as i32),
                    stderr: (!stderr.is_empty()).then(|| stderr.to_string()),
                    ..ResultExtra::default()
                }),
            }],
        });
        steps.push(step);
    }
    if !conversation {
        let mut last = agent_step(answer.to_string(), "answer");
        last.llm_call_count = Some(0);
        steps.push(last);
    }
    steps
}

/// A reply of the simulated user in a conversation (a `user` event of the transcript, which
/// proctor writes between the agent's turns) as a `user` step.
fn user_step(ev: &Value) -> Step {
    let mut step = agent_step(str_at(ev, "text").unwrap_or_default().to_string(), "user");
    step.source = Source::User;
    step.llm_call_count = Some(0);
    step
}

/// Puts the simulated user's replies (the transcript's `user` events) among an agent's steps:
/// each before the first model request that carries its text (a turn's first request holds
/// the reply), after the steps already placed; without a wire ledger, or with no such request,
/// before the final answer.
fn place_user_turns(steps: &mut Vec<Step>, wire: Option<&Vec<Exchange>>, transcript: &[Value]) {
    let replies: Vec<&Value> = transcript
        .iter()
        .filter(|ev| str_at(ev, "type") == Some("user"))
        .collect();
    let main: Vec<&Exchange> = wire
        .map(|w| w.iter().filter(|x| !x.side).collect())
        .unwrap_or_default();
    let mut from = 0;
    for (inserted, ev) in replies.into_iter().enumerate() {
        let text = str_at(ev, "text").unwrap_or_default();
        let quoted = Value::String(text.to_string()).to_string();
        let quoted = &quoted[1..quoted.len() - 1];
        let found = (!text.is_empty() && main.len() + inserted == steps.len())
            .then(|| {
                main[from..]
                    .iter()
                    .position(|x| x.request.to_string().contains(quoted))
            })
            .flatten();
        let at = match found {
            Some(i) => {
                from += i + 1;
                from - 1 + inserted
            }
            None => steps.len().saturating_sub(1),
        };
        steps.insert(at.min(steps.len()), user_step(ev));
    }
}

// ----- The calls log alone -------------------------------------------------------------------

fn call_steps(calls: &[CallRecord], answer: &str, person: bool) -> Vec<Step> {
    let mut steps = Vec::new();
    for c in calls {
        let id = format!("call-{}", c.seq);
        let mut step = agent_step(String::new(), "calls");
        if person {
            step.llm_call_count = Some(0);
        }
        step.tool_calls = Some(vec![ToolCall {
            tool_call_id: id.clone(),
            function_name: c.command.clone(),
            arguments: Map::from_iter([
                (
                    "argv".to_string(),
                    Value::Array(c.argv.iter().cloned().map(Value::String).collect()),
                ),
                ("cwd".to_string(), Value::String(c.cwd.clone())),
            ]),
        }]);
        step.observation = Some(Observation {
            results: vec![ObservationResult {
                source_call_id: Some(id),
                content: Some(c.stdout_head.clone()),
                extra: Some(ResultExtra {
                    from: "calls".into(),
                    exit: c.exit,
                    stderr: (!c.stderr_head.is_empty()).then(|| c.stderr_head.clone()),
                    interface_calls: vec![InterfaceCall::of(c)],
                    ..ResultExtra::default()
                }),
            }],
        });
        steps.push(step);
    }
    let mut last = agent_step(answer.to_string(), "answer");
    if person {
        last.llm_call_count = Some(0);
    }
    steps.push(last);
    steps
}

// ----- Joining the calls log -----------------------------------------------------------------

/// How many times `text` names `command` as a word (not inside another name).
fn names(text: &str, command: &str) -> usize {
    if command.is_empty() {
        return 0;
    }
    let word = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-' | '.');
    text.match_indices(command)
        .filter(|(at, _)| {
            let before = text[..*at].chars().next_back();
            let after = text[at + command.len()..].chars().next();
            !before.is_some_and(word) && !after.is_some_and(word)
        })
        .count()
}

/// Attaches each interface call, in the calls log's order, to a tool call whose arguments name
/// its command: the first, at or after the previous call's, that names it more times than it
/// has calls of it so far (`chat read && chat send` takes two); past those, the previous
/// call's tool call when it names the command (a loop). Returns the calls no tool call names.
fn attach_calls(steps: &mut [Step], calls: &[CallRecord]) -> Vec<InterfaceCall> {
    // (step index, call index, arguments as text)
    let mut slots: Vec<(usize, usize, String)> = Vec::new();
    for (si, s) in steps.iter().enumerate() {
        for (ci, c) in s.tool_calls.iter().flatten().enumerate() {
            slots.push((si, ci, Value::Object(c.arguments.clone()).to_string()));
        }
    }
    let mut at = 0usize;
    let mut assigned: Vec<Vec<InterfaceCall>> = vec![Vec::new(); slots.len()];
    let mut unattributed = Vec::new();
    for c in calls {
        let taken = |k: usize| {
            assigned[k]
                .iter()
                .filter(|a| a.argv.first() == Some(&c.command))
                .count()
        };
        let fresh = (at..slots.len()).find(|&k| names(&slots[k].2, &c.command) > taken(k));
        let slot = fresh
            .or_else(|| (at < slots.len() && names(&slots[at].2, &c.command) > 0).then_some(at));
        match slot {
            Some(k) => {
                at = k;
                assigned[k].push(InterfaceCall::of(c));
            }
            None => unattributed.push(InterfaceCall::of(c)),
        }
    }
    for ((si, ci, _), list) in slots.into_iter().zip(assigned) {
        if list.is_empty() {
            continue;
        }
        let step = &mut steps[si];
        let id = step
            .tool_calls
            .as_ref()
            .and_then(|t| t.get(ci))
            .map(|t| t.tool_call_id.clone());
        let obs = step.observation.get_or_insert(Observation {
            results: Vec::new(),
        });
        let result = match obs.results.iter().position(|r| r.source_call_id == id) {
            Some(p) => &mut obs.results[p],
            None => {
                obs.results.push(ObservationResult {
                    source_call_id: id,
                    content: None,
                    extra: Some(ResultExtra {
                        from: "calls".into(),
                        ..ResultExtra::default()
                    }),
                });
                let last = obs.results.len() - 1;
                &mut obs.results[last]
            }
        };
        result
            .extra
            .get_or_insert_with(|| ResultExtra {
                from: "calls".into(),
                ..ResultExtra::default()
            })
            .interface_calls
            .extend(list);
    }
    unattributed
}

/// The data of each event of a server-sent event stream (`data: ...` lines, joined per event),
/// as JSON where it parses; `[DONE]` and empty events are left out.
pub fn sse_data(text: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut data = String::new();
    let mut flush = |data: &mut String| {
        let d = std::mem::take(data);
        let d = d.trim();
        if d.is_empty() || d == "[DONE]" {
            return;
        }
        out.push(serde_json::from_str(d).unwrap_or_else(|_| Value::String(d.to_string())));
    };
    for line in text.lines() {
        if line.is_empty() {
            flush(&mut data);
        } else if let Some(d) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(d.strip_prefix(' ').unwrap_or(d));
        }
    }
    flush(&mut data);
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn evidence() -> TrialEvidence {
        TrialEvidence {
            proctor_version: "0.1.0".into(),
            run_id: "r".into(),
            suite_id: "s".into(),
            trial_id: "t.v.0".into(),
            task: "t".into(),
            variant: "v".into(),
            trial_index: 0,
            agent_kind: "claude-code".into(),
            agent_version: Some("2.1.328".into()),
            model: None,
            person: None,
            prompt: "Do it.".into(),
            answer: "Done.".into(),
            outcome: Outcome::Completed,
            reason: "every success assertion holds".into(),
            task_success: true,
            scoring: Some("original".into()),
            findings: Vec::new(),
            limit_reached: None,
            wall_seconds: 1.0,
            calls: Vec::new(),
            transcript: Vec::new(),
            wire: None,
            wire_faults: Vec::new(),
            wire_usage: None,
            agent_reported_usage: None,
            cost_usd: None,
            agent_reported_cost_usd: None,
        }
    }

    fn call(seq: u64, argv: &[&str]) -> CallRecord {
        CallRecord {
            seq,
            command: argv[0].into(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            argv_hex: Default::default(),
            argv_cut: None,
            cwd: "/work".into(),
            stdin_bytes: 0,
            stdin_hash: String::new(),
            stdin_head: String::new(),
            stdin_terminal: false,
            exit: Some(0),
            denied: None,
            stdout_bytes: 3,
            stdout_head: "ok\n".into(),
            stderr_bytes: 0,
            stderr_head: String::new(),
            start: 0.1,
            end: Some(0.2),
        }
    }

    fn usage(input: u64, output: u64, cache_read: u64) -> Usage {
        Usage {
            input: Some(input),
            output: Some(output),
            cache_read: Some(cache_read),
            cache_write: Some(0),
            requests: None,
        }
    }

    #[test]
    fn anthropic_turns_become_steps_with_their_tool_results_and_usage() {
        let first = Exchange {
            seq: 1,
            time: None,
            api: WireApi::Anthropic,
            side: false,
            replay: false,
            model: Some("claude-sonnet-4-5".into()),
            status: Some(200),
            request: json!({"messages": [{"role": "user", "content": "Do it."}]}),
            response: vec![
                json!({"type": "message_start", "message": {"id": "m1"}}),
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Reading."}}),
                json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}}),
                json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"command\": \"chat read"}}),
                json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": " x\"}"}}),
            ],
            usage: Some(usage(100, 20, 500)),
            cost_usd: None,
        };
        let side = Exchange {
            seq: 2,
            side: true,
            usage: Some(usage(5, 1, 0)),
            response: Vec::new(),
            request: Value::Null,
            ..first.clone()
        };
        let second = Exchange {
            seq: 3,
            request: json!({"messages": [
                {"role": "user", "content": "Do it."},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "hello <&>"}]}]}
            ]}),
            response: vec![
                json!({"type": "message", "content": [{"type": "text", "text": "Done."}]}),
            ],
            usage: Some(usage(200, 30, 500)),
            ..first.clone()
        };
        let mut e = evidence();
        e.wire = Some(vec![first, side, second]);
        e.wire_usage = Some(Usage {
            input: Some(305),
            output: Some(51),
            cache_read: Some(1000),
            cache_write: Some(0),
            requests: Some(3),
        });
        e.calls = vec![call(1, &["chat", "read", "x"]), call(2, &["other"])];
        let t = trajectory(&e);
        assert_eq!(t.steps.len(), 3);
        assert_eq!(t.steps[0].source, Source::User);
        let s = &t.steps[1];
        assert_eq!(s.message, "Reading.");
        let tc = &s.tool_calls.as_ref().unwrap()[0];
        assert_eq!(tc.tool_call_id, "toolu_1");
        assert_eq!(tc.arguments["command"], "chat read x");
        let r = &s.observation.as_ref().unwrap().results[0];
        assert_eq!(r.content.as_deref(), Some("hello <&>"));
        assert_eq!(r.extra.as_ref().unwrap().interface_calls[0].seq, 1);
        // The side request is folded into the step that follows it.
        assert_eq!(t.steps[2].llm_call_count, Some(2));
        assert_eq!(t.steps[2].message, "Done.");
        let total: u64 = t
            .steps
            .iter()
            .filter_map(|s| s.metrics.as_ref()?.prompt_tokens)
            .sum();
        let f = t.final_metrics.as_ref().unwrap();
        assert_eq!(Some(total), f.total_prompt_tokens);
        assert_eq!(f.total_prompt_tokens, Some(1305));
        assert_eq!(f.total_completion_tokens, Some(51));
        assert_eq!(f.total_cached_tokens, Some(1000));
        assert_eq!(f.total_steps, 3);
        let extra = t.extra.as_ref().unwrap();
        assert_eq!(extra.unattributed_interface_calls.len(), 1);
        assert_eq!(extra.outcome, OutcomeKind::Completed);
        let json = to_json(&t).unwrap();
        assert!(json.contains("\"schema_version\": \"ATIF-v1.8\""));
    }

    #[test]
    fn a_scripted_agent_exports_its_steps_without_model_metrics() {
        let mut e = evidence();
        e.agent_kind = "script".into();
        e.agent_version = None;
        e.transcript = vec![
            json!({"type": "prompt", "text": "Do it."}),
            json!({"type": "step", "step": 1, "run": "chat send hi && echo ok", "exit": 0, "stdout": "ok\n", "stderr": ""}),
            json!({"type": "answer", "text": "Done."}),
        ];
        e.calls = vec![call(1, &["chat", "send", "hi"])];
        e.agent_reported_usage = None;
        let t = trajectory(&e);
        assert_eq!(t.agent.version, "0.1.0");
        assert_eq!(t.steps.len(), 3);
        assert_eq!(t.steps[1].llm_call_count, Some(0));
        assert!(t.steps[1].metrics.is_none());
        let r = &t.steps[1].observation.as_ref().unwrap().results[0];
        assert_eq!(r.extra.as_ref().unwrap().exit, Some(0));
        assert_eq!(r.extra.as_ref().unwrap().interface_calls.len(), 1);
        assert_eq!(t.steps[2].message, "Done.");
    }

    #[test]
    fn without_a_wire_the_calls_are_the_steps_and_tokens_are_marked_agent_reported() {
        let mut e = evidence();
        e.agent_kind = "command".into();
        e.calls = vec![call(1, &["chat", "read"])];
        e.agent_reported_usage = Some(usage(10, 2, 0));
        let t = trajectory(&e);
        assert_eq!(t.steps.len(), 3);
        assert_eq!(
            t.steps[1].tool_calls.as_ref().unwrap()[0].function_name,
            "chat"
        );
        let f = t.final_metrics.unwrap();
        assert_eq!(f.extra.unwrap().token_source, "agent-reported");
        assert_eq!(f.total_prompt_tokens, Some(10));
    }

    #[test]
    fn responses_chat_and_gemini_turns_are_read() {
        let r = responses_turn(&[
            json!({"type": "response.completed", "response": {"output": [
                {"type": "message", "content": [{"type": "output_text", "text": "hi"}]},
                {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{\"cmd\":\"ls\"}"}
            ]}}),
        ]);
        assert_eq!(r.text, "hi");
        assert_eq!(r.calls[0].0, "c1");
        assert_eq!(r.calls[0].2["cmd"], "ls");
        let c = chat_turn(&[
            json!({"choices": [{"delta": {"content": "a", "tool_calls": [{"index": 0, "id": "x", "function": {"name": "bash", "arguments": "{\"comm"}}]}}]}),
            json!({"choices": [{"delta": {"content": "b", "tool_calls": [{"index": 0, "function": {"arguments": "and\":\"ls\"}"}}]}}]}),
        ]);
        assert_eq!(c.text, "ab");
        assert_eq!(c.calls[0].2["command"], "ls");
        let g = gemini_turn(
            &[
                json!({"candidates": [{"content": {"parts": [{"functionCall": {"name": "run_shell_command", "args": {"command": "ls"}}}]}}]}),
            ],
            4,
        );
        assert_eq!(g.calls[0].0, "wire-4-1");
    }

    #[test]
    fn sse_data_reads_events() {
        let v = sse_data("event: a\ndata: {\"x\":1}\n\ndata: [DONE]\n\n");
        assert_eq!(v, vec![json!({"x": 1})]);
    }

    #[test]
    fn names_counts_whole_words_only() {
        assert_eq!(names("{\"command\":\"chat read\"}", "chat"), 1);
        assert_eq!(names("{\"command\":\"chatter\"}", "chat"), 0);
        assert_eq!(names("chat read && chat send", "chat"), 2);
    }
}
