//! A run's trials as the exchange formats take them (docs/export.md): the evidence of each
//! trial's ATIF trajectory, read from its folder (the transcript, the model gateway's or the
//! mock model's wire log, the answer), written one file per trial; and the JUnit XML report of
//! a scoring of the run, or of a comparison's promotion gates. The formats themselves are
//! `proctor_report::export`'s; this module reads the store.

use std::io::Read;
use std::path::Path;

use proctor_mock_model::wire_log::{WireKind, WireLine};
use proctor_report::export::atif::{self, Exchange, TrialEvidence, Usage, WireApi};
use proctor_report::export::junit;
use proctor_store::{RunHandle, RunMeta, Scoring, ScoringChoice};
use proctor_suite::Suite;
use serde_json::Value;

use crate::error::{Context, RunError};
use crate::report_row::verdict_of;
use crate::results::{for_each_scored_record, read_scored_rows};
use crate::TrialRecord;
use proctor_store::DamagedTrial;

/// What writing a run's ATIF trajectories did.
#[derive(Debug, Default)]
pub struct AtifExport {
    /// Trajectory files written.
    pub written: u64,
    /// What could not be read of some trial (its wire log), each a note.
    pub notes: Vec<String>,
    /// Trials not exported because their record is damaged.
    pub damaged: Vec<DamagedTrial>,
}

/// The scoring `choice` picks for `run`; an unknown rescore number is a usage error naming the
/// rescores the run has.
pub fn pick_scoring(run: &RunHandle, choice: ScoringChoice) -> Result<Scoring, RunError> {
    proctor_store::pick_scoring(run.dir(), choice)
        .context("cannot list the run's scorings")?
        .map_err(|why| {
            RunError::usage(
                format!("run {}: {why}", run.id()),
                "--scoring takes `latest` (the default), `original` or a rescore's number",
            )
        })
}

/// Writes one ATIF trajectory per finished trial of `scoring` of `run` into `dir` (created
/// when missing); fails when some trajectory could not be written, and (a usage error) when
/// no trial is finished.
pub fn write_atif(run: &RunHandle, dir: &Path, scoring: &Scoring) -> Result<AtifExport, RunError> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let meta = run.meta();
    let mut out = AtifExport::default();
    let mut failed: Vec<String> = Vec::new();
    let label = scoring.label();
    out.damaged = for_each_scored_record(run, scoring, |record| {
        let id = record.plan.id.clone();
        let trial_dir = match run.trial_dir(&id) {
            Ok(d) => d,
            Err(e) => {
                failed.push(format!("trial {id}: {e}"));
                return Ok(());
            }
        };
        let (mut evidence, trial_notes) = evidence(run.id().as_str(), &meta, &record, &trial_dir);
        evidence.scoring = Some(label.clone());
        out.notes.extend(trial_notes);
        let t = atif::trajectory(&evidence);
        let file = dir.join(format!("{id}.json"));
        match atif::to_json(&t) {
            Ok(text) => match proctor_store::atomic_write(&file, text.as_bytes()) {
                Ok(()) => out.written += 1,
                Err(e) => failed.push(format!("cannot write {}: {e}", file.display())),
            },
            Err(e) => failed.push(format!("trial {id}: {e}")),
        }
        Ok(())
    })
    .context("cannot read the run's trials")?;
    if !failed.is_empty() {
        return Err(RunError::message(format!(
            "cannot export every trajectory: {}",
            failed.join("; ")
        )));
    }
    Ok(out)
}

/// Writes the JUnit XML report of a run's finished trials to `file`, from the run's latest
/// scoring (its own, for a run that was never rescored); returns the test cases written.
pub fn write_junit(run: &RunHandle, suite: &Suite, file: &Path) -> Result<usize, RunError> {
    let scoring = pick_scoring(run, ScoringChoice::Latest)?;
    write_junit_scored(run, suite, file, &scoring)
}

/// Writes the JUnit XML report of `scoring` of a run to `file`, with the promotion gates its
/// report keeps (a finished release run's) as a last test suite; returns the trial test cases
/// written.
pub fn write_junit_scored(
    run: &RunHandle,
    suite: &Suite,
    file: &Path,
    scoring: &Scoring,
) -> Result<usize, RunError> {
    let rows = read_scored_rows(run, suite, scoring).context("cannot read the run's trials")?;
    let label = scoring.label();
    let gates = crate::results::read_gates(run, scoring);
    let xml = junit::junit_scored(
        run.id().as_str(),
        suite.id(),
        Some(&label),
        &rows,
        gates.as_ref(),
    )
    .map_err(|e| match e {
        proctor_report::export::ExportError::Empty => RunError::usage(
            format!("run {} has no finished trials to report", run.id()),
            "finish it first (`proctor run SUITE --resume RUN`)",
        ),
        other => RunError::failed(other),
    })?;
    proctor_store::atomic_write(file, xml.as_bytes())
        .with_context(|| format!("cannot write {}", file.display()))?;
    Ok(rows.len())
}

/// Writes the promotion gates as a JUnit XML report to `file`.
pub fn write_gates_junit(report: &proctor_report::GateReport, file: &Path) -> Result<(), RunError> {
    let xml = junit::gates(report).map_err(RunError::failed)?;
    proctor_store::atomic_write(file, xml.as_bytes())
        .with_context(|| format!("cannot write {}", file.display()))
}

fn usage_of(u: &crate::model::Usage) -> Usage {
    Usage {
        input: u.input,
        output: u.output,
        cache_read: u.cache_read,
        cache_write: u.cache_write,
        requests: u.requests,
    }
}

/// What the trajectory of `record` is made from, read from its folder; with notes on what could
/// not be read.
pub fn evidence(
    run_id: &str,
    meta: &RunMeta,
    record: &TrialRecord,
    trial_dir: &Path,
) -> (TrialEvidence, Vec<String>) {
    let mut notes = Vec::new();
    let verdict = verdict_of(record);
    let transcript = json_lines(&trial_dir.join("transcript.jsonl"));
    let (wire, wire_faults) = match wire(trial_dir) {
        Ok(w) => w,
        Err(e) => {
            notes.push(format!("trial {}: {e}", record.plan.id));
            (None, Vec::new())
        }
    };
    let answer = std::fs::read(trial_dir.join("answer.txt"))
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_else(|_| record.end_state.answer.clone());
    let agent_kind = match &record.sitting {
        Some(_) => "human".to_string(),
        None if record.launch.agent.is_empty() => "unknown".to_string(),
        None => record.launch.agent.clone(),
    };
    let e = TrialEvidence {
        proctor_version: env!("CARGO_PKG_VERSION").to_string(),
        run_id: run_id.to_string(),
        suite_id: meta.suite_id.clone(),
        trial_id: record.plan.id.clone(),
        task: record.plan.task.clone(),
        variant: record.plan.variant.clone(),
        trial_index: record.plan.index,
        agent_kind,
        agent_version: meta
            .agent_versions
            .get(&record.plan.variant)
            .map(|v| version_of(v, &record.launch.agent)),
        model: record.launch.model.clone(),
        person: record.sitting.as_ref().map(|s| s.person.clone()),
        prompt: record.launch.prompt.clone(),
        answer,
        outcome: verdict.outcome.clone(),
        reason: verdict.reason.clone(),
        task_success: verdict.task_success,
        scoring: None,
        findings: verdict.integrity.findings.clone(),
        limit_reached: record.limit_reached,
        wall_seconds: record.end_state.agent.wall_seconds,
        calls: record.end_state.calls.clone(),
        transcript,
        wire,
        wire_faults,
        wire_usage: record.ledgers.wire.as_ref().map(usage_of),
        agent_reported_usage: record.ledgers.agent_reported.as_ref().map(usage_of),
        cost_usd: record.ledgers.cost_usd,
        agent_reported_cost_usd: record.ledgers.agent_reported_cost_usd,
    };
    (e, notes)
}

/// The version in run.json's `agent_versions` entry (`claude-code 2.1.328 (tested with
/// 2.1.328)`): the word after the agent's kind, else the entry as written.
fn version_of(entry: &str, kind: &str) -> String {
    let mut words = entry.split_whitespace();
    match (words.next(), words.next()) {
        (Some(k), Some(v)) if k == kind => v.to_string(),
        _ => entry.to_string(),
    }
}

/// The JSON lines of a file, each line that parses; none when the file is missing.
fn json_lines(path: &Path) -> Vec<Value> {
    let Ok(bytes) = std::fs::read(path) else {
        return Vec::new();
    };
    String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The wire ledger's exchanges and faults: the model gateway's `model.jsonl` (with its bodies
/// in `model/`), else the mock model's `services/__model/wire.jsonl`; `None` when the trial has
/// neither.
pub(crate) type Wire = (Option<Vec<Exchange>>, Vec<String>);

pub(crate) fn wire(trial_dir: &Path) -> Result<Wire, String> {
    let gateway = trial_dir.join("model.jsonl");
    if gateway.is_file() {
        return gateway_wire(trial_dir, &gateway);
    }
    let mock = crate::model::wire_log(trial_dir);
    if mock.is_file() {
        return mock_wire(&mock);
    }
    Ok((None, Vec::new()))
}

fn mock_wire(path: &Path) -> Result<Wire, String> {
    let mut out = Vec::new();
    let mut faults = Vec::new();
    for line in wire_lines(path) {
        if let Some(sentence) = line.fault_sentence() {
            faults.push(sentence);
            continue;
        }
        if !line.kind.is_generation() {
            continue;
        }
        let model = line.request["model"].as_str().map(str::to_string);
        out.push(Exchange {
            seq: line.seq,
            time: None,
            api: WireApi::from_name(
                line.route
                    .as_deref()
                    .or(line.api.as_deref())
                    .unwrap_or_default(),
            ),
            side: line.kind == WireKind::Side,
            replay: line.replay,
            model,
            status: Some(line.status),
            response: line.response_bodies(),
            usage: line.usage.map(|u| Usage {
                input: Some(u.input),
                output: Some(u.output),
                cache_read: Some(u.cache_read),
                cache_write: Some(u.cache_write),
                requests: Some(1),
            }),
            request: line.request,
            cost_usd: None,
        });
    }
    Ok((Some(out), faults))
}

/// The lines of the mock model's wire log, each line that reads as one; none when the file is
/// missing.
fn wire_lines(path: &Path) -> Vec<WireLine> {
    let Ok(bytes) = std::fs::read(path) else {
        return Vec::new();
    };
    String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// A kept body of the gateway's evidence (`model/NNNN.*.gz`), decompressed.
fn body(trial_dir: &Path, rel: Option<&str>) -> Option<String> {
    let rel = rel?;
    let bytes = std::fs::read(trial_dir.join(rel)).ok()?;
    let mut text = String::new();
    if rel.ends_with(".gz") {
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_string(&mut text)
            .ok()?;
    } else {
        text = String::from_utf8_lossy(&bytes).into_owned();
    }
    Some(text)
}

fn gateway_wire(trial_dir: &Path, path: &Path) -> Result<Wire, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("cannot read model.jsonl: {e}"))?;
    let mut records = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let r: proctor_gateway::RequestRecord =
            serde_json::from_str(line).map_err(|e| format!("model.jsonl line {}: {e}", i + 1))?;
        records.push(r);
    }
    let mut faults = Vec::new();
    let mut out = Vec::new();
    let mut with_tools = Vec::new();
    for r in &records {
        if let (Some(f), Some(e)) = (&r.fault, &r.error) {
            faults.push(format!(
                "{}: {e}",
                serde_json::to_string(f)
                    .unwrap_or_default()
                    .trim_matches('"')
            ));
        }
        let request = body(trial_dir, r.request_body.as_deref())
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .unwrap_or(Value::Null);
        let response = match body(trial_dir, r.response_body.as_deref()) {
            Some(t) if r.stream => atif::sse_data(&t),
            Some(t) => serde_json::from_str::<Value>(&t)
                .map(|v| vec![v])
                .unwrap_or_default(),
            None => Vec::new(),
        };
        let offers_tools = ["tools", "functionDeclarations"].iter().any(|k| {
            request
                .get(k)
                .is_some_and(|t| t.as_array().is_some_and(|a| !a.is_empty()))
        });
        with_tools.push(offers_tools);
        out.push(Exchange {
            seq: r.seq,
            time: Some(r.time.clone()),
            api: WireApi::from_name(r.api.as_str()),
            side: false,
            replay: false,
            model: r.model.clone(),
            status: Some(r.status),
            request,
            response,
            usage: r.usage.as_ref().map(|u| Usage {
                input: Some(u.input),
                output: Some(u.output),
                cache_read: Some(u.cache_read),
                cache_write: Some(u.cache_write),
                requests: Some(1),
            }),
            cost_usd: r.cost_usd,
        });
    }
    // A request offering no tools is a side request when others do (a title, a quota probe),
    // as the mock model counts them.
    if with_tools.iter().any(|t| *t) {
        for (x, t) in out.iter_mut().zip(with_tools) {
            x.side = !t;
        }
    }
    Ok((Some(out), faults))
}
