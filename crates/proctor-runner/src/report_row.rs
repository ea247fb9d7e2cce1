//! The report's row of a trial: what the aggregate tables read of a record (its verdict, its
//! cost, its tokens), kept apart from the record's full JSON so that the results spool can hold
//! both as each trial is committed.

use proctor_report::{Cost, TrialRow};
use proctor_score::TrialVerdict;
use proctor_suite::Suite;

use crate::record::TrialRecord;

/// The verdict a record is reported with: its own, or, when the harness failed before scoring,
/// its `errored` outcome (of its kind: `agent-start` or `harness`) with no evidence.
pub fn verdict_of(record: &TrialRecord) -> TrialVerdict {
    record.verdict.clone().unwrap_or_else(|| TrialVerdict {
        outcome: record.outcome.clone(),
        reason: record.reason.clone(),
        task_success: false,
        success: None,
        rubric: None,
        metrics: None,
        reversed: false,
        answer_reads_as: None,
        integrity: Default::default(),
    })
}

/// The report's row for a record.
pub fn row_of(record: &TrialRecord, run_id: &str, suite: &Suite) -> TrialRow {
    placed(row_seed(record), run_id, suite)
}

/// A row given what only the run and the suite know: the run's id, the suite's id and what
/// the task expects.
pub(crate) fn placed(mut row: TrialRow, run_id: &str, suite: &Suite) -> TrialRow {
    run_id.clone_into(&mut row.run_id);
    suite.id().clone_into(&mut row.suite_id);
    row.expect = suite.task(&row.task).map(|t| t.expect).unwrap_or_default();
    row
}

/// The report's row for a record, from the record alone: without the run's id, the suite's id
/// and what the task expects (empty and the default; [`row_of`] has them).
pub(crate) fn row_seed(record: &TrialRecord) -> TrialRow {
    TrialRow {
        limit_reached: record.limit_reached,
        run_id: String::new(),
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
        suite_id: String::new(),
        suite_hash: record.hashes.suite.clone(),
        expect: Default::default(),
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
