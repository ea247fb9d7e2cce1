//! `results.json` and `results.md`: a run's committed evidence. The JSON holds every trial's full
//! record (plan entry, hashes, launch, calls, answer, assertions with evidence, outcome with
//! reason, rubric, metrics) beside the aggregate report; the Markdown holds the tables a person
//! reads, every rate with its n.

use std::path::Path;

use proctor_report::{aggregate, Cost, Exporter, Markdown, RunReport, TrialRow};
use proctor_score::{ErrorKind, Outcome, TrialVerdict};
use proctor_store::RunHandle;
use proctor_suite::Suite;
use serde::{Deserialize, Serialize};

use crate::record::TrialRecord;

/// Version of the results document's layout.
pub const RESULTS_VERSION: u32 = 1;

/// The whole of `results.json`.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ResultsDocument {
    /// [`RESULTS_VERSION`].
    pub schema_version: u32,
    /// The run.
    pub run_id: String,
    /// The suite's id.
    pub suite_id: String,
    /// BLAKE3 of the suite the rules were read from.
    pub suite_hash: String,
    /// When this document was made (UTC).
    pub generated_at: String,
    /// Whether the verdicts come from `proctor rescore` rather than the run itself.
    pub rescored: bool,
    /// The aggregate tables.
    pub report: RunReport,
    /// Every trial, in plan order.
    pub trials: Vec<TrialRecord>,
}

/// The JSON Schema of `results.json`.
pub fn json_schema() -> serde_json::Value {
    schemars::schema_for!(ResultsDocument).to_value()
}

/// The verdict a record is reported with: its own, or an `errored` one when the harness failed
/// before scoring.
pub fn verdict_of(record: &TrialRecord) -> TrialVerdict {
    record.verdict.clone().unwrap_or_else(|| TrialVerdict {
        outcome: Outcome::Errored {
            kind: ErrorKind::Harness,
        },
        reason: record.reason.clone(),
        task_success: false,
        success: None,
        rubric: None,
        metrics: None,
        reversed: false,
        answer_reads_as: None,
    })
}

/// The report's row for a record.
pub fn row_of(record: &TrialRecord, run_id: &str, suite: &Suite) -> TrialRow {
    TrialRow {
        run_id: run_id.to_string(),
        trial_id: record.plan.id.clone(),
        task: record.plan.task.clone(),
        variant: record.plan.variant.clone(),
        trial_index: record.plan.index,
        mutation: record
            .plan
            .mutation
            .as_ref()
            .map(|m| proctor_report::Mutation {
                name: m.name.clone(),
                hash: m.hash.clone(),
            }),
        fixture_hash: record.hashes.fixture.clone(),
        suite_id: suite.id().to_string(),
        suite_hash: record.hashes.suite.clone(),
        expect: suite
            .task(&record.plan.task)
            .map(|t| t.expect)
            .unwrap_or_default(),
        verdict: verdict_of(record),
        wall_seconds: record.end_state.agent.wall_seconds,
        agent_cpu_seconds: record.end_state.agent.cpu_seconds,
        tokens: tokens_of(record),
        requests: record
            .ledgers
            .wire
            .as_ref()
            .or(record.ledgers.agent_reported.as_ref())
            .and_then(|u| u.requests),
        cost: if let Some(usd) = record.ledgers.cost_usd {
            Cost::Known { usd }
        } else if !record.ledgers.cost_missing.is_empty() {
            Cost::Incomplete {
                missing: record.ledgers.cost_missing.clone(),
            }
        } else {
            Cost::NotApplicable
        },
    }
}

/// Token usage for the report: read from the wire where proctor saw the traffic, else what
/// the agent reported.
fn tokens_of(record: &TrialRecord) -> Option<proctor_report::Tokens> {
    let u = record
        .ledgers
        .wire
        .as_ref()
        .or(record.ledgers.agent_reported.as_ref())?;
    Some(proctor_report::Tokens {
        input: u.input,
        output: u.output,
        cache_read: u.cache_read,
        cache_write: u.cache_write,
    })
}

/// Why the results could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    /// The run has no finished trials.
    #[error("the run has no finished trials to report")]
    Empty,
    /// Aggregation refused the rows.
    #[error("cannot aggregate the trials: {0}")]
    Aggregate(#[from] proctor_report::AggregateError),
    /// Reading or writing the store failed.
    #[error(transparent)]
    Store(#[from] proctor_store::StoreError),
}

/// Reads every finished trial record of a run, in plan order (task, variant, index).
pub fn read_records(run: &RunHandle) -> Result<Vec<TrialRecord>, ResultsError> {
    let mut records = Vec::new();
    for id in run.finished_trials()? {
        let file = run.store().read_trial::<TrialRecord>(run.id(), &id)?;
        records.push(file.record);
    }
    records.sort_by(|a, b| {
        (&a.plan.task, &a.plan.variant, a.plan.index).cmp(&(
            &b.plan.task,
            &b.plan.variant,
            b.plan.index,
        ))
    });
    Ok(records)
}

/// Builds the results document of `records`.
pub fn document(
    run_id: &str,
    suite: &Suite,
    suite_hash: &str,
    records: Vec<TrialRecord>,
    rescored: bool,
) -> Result<ResultsDocument, ResultsError> {
    if records.is_empty() {
        return Err(ResultsError::Empty);
    }
    let rows: Vec<TrialRow> = records.iter().map(|r| row_of(r, run_id, suite)).collect();
    let report = aggregate(&rows)?;
    Ok(ResultsDocument {
        schema_version: RESULTS_VERSION,
        run_id: run_id.to_string(),
        suite_id: suite.id().to_string(),
        suite_hash: suite_hash.to_string(),
        generated_at: proctor_store::utc_now(),
        rescored,
        report,
        trials: records,
    })
}

/// Writes `STEM.json` and `STEM.md` into the run folder.
pub fn write(dir: &Path, stem: &str, doc: &ResultsDocument) -> Result<(), ResultsError> {
    proctor_store::atomic_write_json(dir.join(format!("{stem}.json")), doc)?;
    let mut md = Markdown.run_report(&doc.report);
    md.push_str(&format!(
        "\n---\nRun `{}`, suite `{}` (hash `{}`){}; generated {} by proctor. Every trial's evidence is in `{stem}.json` and `trials/`.\n",
        doc.run_id,
        doc.suite_id,
        doc.suite_hash,
        if doc.rescored { ", rescored with the suite's current rules" } else { "" },
        doc.generated_at
    ));
    proctor_store::atomic_write(dir.join(format!("{stem}.md")), md.as_bytes())?;
    Ok(())
}
