//! Queries over one run's trials in the index that stay flat in the run's size: a filtered page
//! of trials (the filter and the page applied by SQLite, so only the page's rows are read into
//! memory) and the count of trials per task, variant and outcome.

use crate::error::Result;
use crate::index::{summary_row, Index, SUMMARY_COLUMNS, TRIAL_ORDER};
use crate::model::TrialSummary;
use crate::RunId;
use proctor_records::OutcomeKind;
use serde::Serialize;

/// Which of a run's finished trials to list; every condition set must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrialFilter {
    /// Only trials with this outcome.
    pub outcome: Option<OutcomeKind>,
    /// Only trials of this task.
    pub task: Option<String>,
    /// Only trials of this variant.
    pub variant: Option<String>,
    /// Only trials whose outcome differs between variants: a (task, trial index) whose
    /// finished trials do not all have the same outcome.
    pub differs: bool,
}

/// One page of a run's trials that pass a [`TrialFilter`].
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TrialsPage {
    /// How many trials pass the filter in all.
    pub total: u64,
    /// How many of them come before this page.
    pub offset: u64,
    /// The page's trials, by task, variant and trial index.
    pub trials: Vec<TrialSummary>,
}

/// How many finished trials of one task and variant have one outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CellCount {
    /// The task id.
    pub task: String,
    /// The variant id.
    pub variant: String,
    /// The outcome.
    pub outcome: OutcomeKind,
    /// How many trials.
    pub n: u64,
}

/// The trials whose (task, trial index) has more than one outcome among the run's variants.
const DIFFERS: &str = "(task, trial_index) IN (SELECT task, trial_index FROM trials
     WHERE run_id = ?1 GROUP BY task, trial_index HAVING COUNT(DISTINCT outcome) > 1)";

/// The `WHERE` clause of `filter` (the run is `?1`) and its other parameters, in order.
fn where_clause(filter: &TrialFilter) -> (String, Vec<String>) {
    let mut sql = String::from("run_id = ?1");
    let mut params = Vec::new();
    let outcome = filter.outcome.map(|o| o.label().to_string());
    for (column, value) in [
        ("outcome", &outcome),
        ("task", &filter.task),
        ("variant", &filter.variant),
    ] {
        if let Some(v) = value {
            params.push(v.clone());
            sql.push_str(&format!(" AND {column} = ?{}", params.len() + 1));
        }
    }
    if filter.differs {
        sql.push_str(" AND ");
        sql.push_str(DIFFERS);
    }
    (sql, params)
}

impl Index {
    /// The trials of `run` that pass `filter`, `limit` of them after the first `offset`, and how
    /// many pass in all.
    pub(crate) fn trials_page(
        &self,
        run: &RunId,
        filter: &TrialFilter,
        offset: u64,
        limit: u64,
    ) -> Result<TrialsPage> {
        let conn = self.lock();
        let e = self.err();
        let (clause, params) = where_clause(filter);
        let run = run.as_str();
        let mut args: Vec<&dyn rusqlite::ToSql> = vec![&run];
        args.extend(params.iter().map(|p| p as &dyn rusqlite::ToSql));
        let total: u64 = conn
            .prepare_cached(&format!("SELECT COUNT(*) FROM trials WHERE {clause}"))
            .and_then(|mut s| s.query_row(args.as_slice(), |r| r.get(0)))
            .map_err(&e)?;
        let (limit, offset) = (i64::try_from(limit), i64::try_from(offset));
        let (limit, offset) = (limit.unwrap_or(i64::MAX), offset.unwrap_or(i64::MAX));
        args.push(&limit);
        args.push(&offset);
        let n = args.len();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {SUMMARY_COLUMNS} FROM trials WHERE {clause} ORDER BY {TRIAL_ORDER}
                 LIMIT ?{} OFFSET ?{n}",
                n - 1
            ))
            .map_err(&e)?;
        let trials = stmt
            .query_map(args.as_slice(), summary_row)
            .map_err(&e)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(&e)?;
        Ok(TrialsPage {
            total,
            offset: u64::try_from(offset).unwrap_or(0),
            trials,
        })
    }

    /// How many finished trials of `run` each (task, variant, outcome) has, by task, variant
    /// and outcome.
    pub(crate) fn cell_counts(&self, run: &RunId) -> Result<Vec<CellCount>> {
        let conn = self.lock();
        let e = self.err();
        let mut stmt = conn
            .prepare_cached(
                "SELECT task, variant, outcome, COUNT(*) FROM trials WHERE run_id = ?1
                 GROUP BY task, variant, outcome ORDER BY task, variant, outcome",
            )
            .map_err(&e)?;
        let rows = stmt
            .query_map([run.as_str()], |r| {
                Ok(CellCount {
                    task: r.get(0)?,
                    variant: r.get(1)?,
                    outcome: crate::index::outcome_at(r, 2)?,
                    n: r.get(3)?,
                })
            })
            .map_err(&e)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(&e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_where_clause_numbers_its_parameters_after_the_run() {
        let f = TrialFilter {
            outcome: Some(OutcomeKind::Wrong),
            variant: Some("v".into()),
            ..TrialFilter::default()
        };
        let (sql, params) = where_clause(&f);
        assert_eq!(sql, "run_id = ?1 AND outcome = ?2 AND variant = ?3");
        assert_eq!(params, ["wrong", "v"]);
        let (sql, params) = where_clause(&TrialFilter {
            differs: true,
            ..TrialFilter::default()
        });
        assert!(sql.starts_with("run_id = ?1 AND (task, trial_index) IN"));
        assert!(params.is_empty());
    }
}
