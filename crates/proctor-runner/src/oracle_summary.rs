//! The per-dataset summary of an oracle check (`proctor validate --oracle`), as a benchmark's
//! adapters show parity: how many of the oracle's trials pass, how many of the null agent's
//! fail, the tasks whose check cannot fail (the null agent passes), the images pulled, built
//! and failed, and the errors by kind. Written as text after the table, and as JSON
//! (`--json FILE`, schema `schemas/oracle-summary.schema.json`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::oracle::{OracleReport, OracleVerdict};
use crate::provision::ImageCounts;

/// The layout version of the summary's JSON.
pub const SUMMARY_VERSION: u32 = 1;

/// An oracle check's summary over a whole suite (a dataset).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OracleSummary {
    /// [`SUMMARY_VERSION`].
    pub schema_version: u32,
    /// The suite's id.
    pub suite: String,
    /// The oracle run in the store that holds the trials' evidence.
    pub run: String,
    /// Whether that run was an earlier one, resumed (`--resume`).
    pub resumed: bool,
    /// Rows checked: one per task, or one per task and hidden mutation when it has any.
    pub rows: u64,
    /// Rows whose oracle met the task's expected behaviour.
    pub oracle_passes: u64,
    /// Rows whose null agent did not (graded, and failed, as it must).
    pub null_fails: u64,
    /// Tasks whose null agent passes: their check cannot fail.
    pub null_passes: Vec<String>,
    /// Tasks whose oracle does not pass (graded, and failed).
    pub oracle_fails: Vec<String>,
    /// Tasks with a trial that was not graded (errored or ungradeable).
    pub not_graded: Vec<String>,
    /// Tasks whose image could not be had, with why: no trial of theirs ran.
    pub no_image: BTreeMap<String, String>,
    /// How the suite's distinct images were had.
    pub images: ImageCounts,
    /// Rows with an errored trial, by the error's kind (`environment` for an image that could
    /// not be had, `harness`, `setup`, ...); a row counts once for each kind it had.
    pub errors: BTreeMap<String, u64>,
    /// Whether every row's rules passed the oracle and failed the null agent.
    pub ok: bool,
}

impl OracleSummary {
    /// The summary of `report`, a check of suite `suite` whose images were had as `images`
    /// counts, and whose tasks in `no_image` had none (with why).
    pub fn of(
        suite: &str,
        report: &OracleReport,
        images: ImageCounts,
        no_image: &BTreeMap<String, String>,
    ) -> OracleSummary {
        let rows = &report.rows;
        let tasks_where = |verdicts: &[OracleVerdict]| {
            let mut out: Vec<String> = rows
                .iter()
                .filter(|r| verdicts.contains(&r.verdict))
                .map(|r| r.task.clone())
                .collect();
            out.dedup();
            out
        };
        let mut errors: BTreeMap<String, u64> = BTreeMap::new();
        for kind in rows.iter().flat_map(|r| &r.errors) {
            *errors.entry(kind.clone()).or_default() += 1;
        }
        OracleSummary {
            schema_version: SUMMARY_VERSION,
            suite: suite.to_string(),
            run: report.run.as_str().to_string(),
            resumed: report.resumed,
            rows: rows.len() as u64,
            oracle_passes: rows.iter().filter(|r| r.oracle_passed).count() as u64,
            null_fails: rows.iter().filter(|r| r.null_failed).count() as u64,
            null_passes: tasks_where(&[OracleVerdict::NullPasses]),
            oracle_fails: tasks_where(&[OracleVerdict::OracleFails]),
            not_graded: tasks_where(&[OracleVerdict::NotGraded]),
            no_image: no_image.clone(),
            images,
            errors,
            ok: report.failures() == 0,
        }
    }

    /// The summary as lines a person reads.
    pub fn text(&self) -> String {
        let names = |list: &[String]| {
            if list.is_empty() {
                "none".to_string()
            } else {
                list.join(", ")
            }
        };
        let errors = if self.errors.is_empty() {
            "none".to_string()
        } else {
            let by_kind: Vec<String> = self
                .errors
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            by_kind.join(", ")
        };
        let mut out = format!(
            "summary of suite `{}` (run {}{}):\n\
             \x20 oracle passes          {}/{}\n\
             \x20 null agent fails       {}/{}\n\
             \x20 null agent passes (a check that cannot fail): {}\n\
             \x20 oracle fails: {}\n\
             \x20 not graded: {}\n\
             \x20 images                 {} pulled, {} built, {} failed\n\
             \x20 errors by kind         {errors}\n",
            self.suite,
            self.run,
            if self.resumed { ", resumed" } else { "" },
            self.oracle_passes,
            self.rows,
            self.null_fails,
            self.rows,
            names(&self.null_passes),
            names(&self.oracle_fails),
            names(&self.not_graded),
            self.images.pulled,
            self.images.built,
            self.images.failed,
        );
        for (task, why) in &self.no_image {
            let first = why.lines().next().unwrap_or_default();
            out.push_str(&format!("  no image for `{task}`: {first}\n"));
        }
        out
    }
}

/// The JSON Schema of the summary's JSON, as `schemas/oracle-summary.schema.json` holds it.
pub fn json_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(OracleSummary)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oracle::OracleRow;
    use proctor_score::OutcomeKind;

    fn row(task: &str, verdict: OracleVerdict, passed: (bool, bool), errors: &[&str]) -> OracleRow {
        OracleRow {
            task: task.into(),
            mutation: None,
            oracle: OutcomeKind::Completed,
            null: OutcomeKind::Abandoned,
            verdict,
            oracle_passed: passed.0,
            null_failed: passed.1,
            errors: errors.iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn the_summary_counts_rows_and_names_the_tasks_that_cannot_fail() {
        let report = OracleReport {
            run: proctor_store::RunId::generate(),
            run_dir: "/tmp/x".into(),
            rows: vec![
                row("a", OracleVerdict::Ok, (true, true), &[]),
                row("b", OracleVerdict::NullPasses, (true, false), &[]),
                row("c", OracleVerdict::OracleFails, (false, true), &[]),
                row("d", OracleVerdict::NotGraded, (false, false), &["harness"]),
                row(
                    "e",
                    OracleVerdict::NoImage,
                    (false, false),
                    &["environment"],
                ),
            ],
            unexpected: Vec::new(),
            resumed: false,
        };
        let no_image = BTreeMap::from([("e".to_string(), "unreachable".to_string())]);
        let counts = ImageCounts {
            pulled: 3,
            built: 1,
            failed: 1,
        };
        let s = OracleSummary::of("ds", &report, counts, &no_image);
        assert_eq!((s.rows, s.oracle_passes, s.null_fails), (5, 2, 2));
        assert_eq!(s.null_passes, ["b"]);
        assert_eq!(s.oracle_fails, ["c"]);
        assert_eq!(s.not_graded, ["d"]);
        assert_eq!(
            s.errors,
            BTreeMap::from([("environment".into(), 1), ("harness".into(), 1)])
        );
        assert!(!s.ok);
        let text = s.text();
        assert!(text.contains("oracle passes          2/5"), "{text}");
        assert!(text.contains("null agent fails       2/5"), "{text}");
        assert!(text.contains("cannot fail): b\n"), "{text}");
        assert!(text.contains("3 pulled, 1 built, 1 failed"), "{text}");
        assert!(
            text.contains("errors by kind         environment 1, harness 1"),
            "{text}"
        );
        assert!(text.contains("no image for `e`: unreachable"), "{text}");
    }
}
