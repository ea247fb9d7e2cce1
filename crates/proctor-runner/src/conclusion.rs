//! How a run ends once its trials ran (here or on a cluster): the run closed (finished,
//! interrupted, or stopped by proctor), its results written, a release run's promotion gates
//! applied, and its trials tallied into the run's verdict (success, not every trial succeeded,
//! or unfinished). The command line shows each and turns the verdict into the exit status.

use proctor_report::{GateReport, RunReport};
use proctor_suite::TrialMode;

use crate::error::{Context, RunError};
use crate::results::ResultsError;
use crate::{ExecutionSummary, Session};

/// A run closed, with its results.
pub struct Conclusion {
    /// Whether every planned trial is finished.
    pub all_done: bool,
    /// The run's report (`results.json`); `None` when nothing ran or it could not be written.
    pub report: Option<RunReport>,
    /// Why `results.json` was not written, when it failed: every trial is already in the store
    /// and `proctor rescore` can write them again, so this is a warning.
    pub results_error: Option<ResultsError>,
}

impl Conclusion {
    /// Records how the run ended and writes its results.
    pub fn close(session: &Session, summary: &ExecutionSummary) -> Result<Conclusion, RunError> {
        let all_done = session.close(summary)?;
        let (report, results_error) = match session.write_results() {
            Ok(report) => (report, None),
            Err(e) => (None, Some(e)),
        };
        Ok(Conclusion {
            all_done,
            report,
            results_error,
        })
    }

    /// A finished release run's promotion gates: those its results keep, else (the results
    /// could not be written, or the gates could not be applied) applied to the trials here, so
    /// that an error says why; `None` for other runs and suites without gates.
    pub fn release_gates(&self, session: &Session) -> Result<Option<GateReport>, RunError> {
        if !self.all_done || session.plan().trial_mode != TrialMode::Release {
            return Ok(None);
        }
        if let Some(g) = self.report.as_ref().and_then(|r| r.gates.as_ref()) {
            return Ok(Some(g.clone()));
        }
        let rows = crate::results::read_rows(session.run(), session.suite())
            .context("cannot read the run's trials")?;
        let Some(promotion) = &session.suite().file.promotion else {
            return Ok(None);
        };
        proctor_report::gate(&rows, promotion, &session.suite().file.report)
            .map(Some)
            .map_err(|e| {
                RunError::usage(
                    format!("cannot apply the promotion gates: {e}"),
                    "a release run must include the baseline and candidate variants",
                )
            })
    }

    /// The run's trials tallied: from its report, else (nothing ran, or `results.json` could not
    /// be written) from the records.
    pub fn tally(&self, session: &Session) -> Result<Tally, RunError> {
        match &self.report {
            Some(r) => Ok(Tally::of(&r.overall)),
            None => Tally::from_records(session.run()),
        }
    }
}

/// What a finished run's verdict is decided from.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    /// Graded trials (every trial but errored and ungradeable ones).
    pub graded: u64,
    /// Graded trials that met their task's `expect`.
    pub succeeded: u64,
    /// Errored plus ungradeable trials.
    pub unfinished: u64,
}

/// A finished run's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Every graded trial met its task's `expect`.
    Success,
    /// Some graded trial did not.
    NotSucceeded,
    /// Some trial errored or was ungradeable.
    Unfinished,
}

impl Tally {
    /// The tally of a report's cell.
    pub fn of(cell: &proctor_report::Cell) -> Tally {
        Tally {
            graded: cell.n,
            succeeded: cell.rates.success.k,
            unfinished: cell.errored + cell.ungradeable,
        }
    }

    /// The tally of a run's trial records.
    pub fn from_records(run: &proctor_store::RunHandle) -> Result<Tally, RunError> {
        let mut tally = Tally::default();
        crate::results::for_each_record(run, |record| {
            match record
                .verdict
                .as_ref()
                .map(|v| (&v.outcome, v.task_success))
            {
                Some((o, success)) if o.is_graded() => {
                    tally.graded += 1;
                    tally.succeeded += u64::from(success);
                }
                _ => tally.unfinished += 1,
            }
            Ok(())
        })
        .context("cannot read the run's trials")?;
        Ok(tally)
    }

    /// Unfinished when any trial errored or was ungradeable; success when every graded trial
    /// met its task's `expect` (a correct refusal or ask counts); else not every trial succeeded.
    pub fn verdict(self) -> Verdict {
        if self.unfinished > 0 {
            Verdict::Unfinished
        } else if self.succeeded == self.graded {
            Verdict::Success
        } else {
            Verdict::NotSucceeded
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_status_follows_success_not_completion() {
        let t = |graded, succeeded, unfinished| {
            Tally {
                graded,
                succeeded,
                unfinished,
            }
            .verdict()
        };
        // Every graded trial met its expect (correct refusals among them): success.
        assert_eq!(t(4, 4, 0), Verdict::Success);
        assert_eq!(t(4, 3, 0), Verdict::NotSucceeded);
        assert_eq!(t(4, 4, 1), Verdict::Unfinished);
        assert_eq!(t(0, 0, 2), Verdict::Unfinished);
    }
}
