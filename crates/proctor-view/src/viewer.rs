//! What the viewer reads: a store, and the [`Sources`] of what the store alone cannot show
//! (the CLI supplies them).

use std::sync::Arc;

use proctor_store::{RunId, Store};
use proctor_trial_record::TrialRecord;

/// What the viewer shows that needs more than the store: the suite a run read (a trial's diff
/// rebuilds its start state) and the comparison of two arms.
/// The CLI supplies them, so that the viewer shows exactly what `show` and `compare` print.
pub trait Sources: Send + Sync {
    /// A trial's workspace diff against its start state, as lines.
    fn diff(&self, store: &Store, run: &RunId, trial: &str) -> Vec<String>;
    /// The matched comparison of arm `a` with arm `b` (each `RUN/VARIANT`), with the promotion
    /// gates over the arms' runs (or why they cannot be applied) and the scoring each run was
    /// read in; `Err` says why the comparison cannot be made.
    fn compare(&self, store: &Store, a: &str, b: &str) -> Result<ArmsComparison, String>;
    /// Every trial of a rescore of `run` (`scoring` names its file): each record's index
    /// summary, with the record for the trials `keep` accepts (the records are read one at a
    /// time; only those are held); `Err` says why the rescore cannot be read.
    fn rescored(
        &self,
        store: &Store,
        run: &RunId,
        scoring: &proctor_store::Scoring,
        keep: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<(proctor_store::TrialSummary, Option<TrialRecord>)>, String>;
}

/// What [`Sources::compare`] gives: the comparison of two arms, as `proctor compare --gate
/// --format json` prints it.
#[derive(Debug, Clone)]
pub struct ArmsComparison {
    /// The matched comparison.
    pub comparison: proctor_report::Comparison,
    /// The promotion gates over the arms' runs, or why they cannot be applied.
    pub gates: Result<proctor_report::GateReport, String>,
    /// The scoring each run was read in (the latest), with its run.
    pub scorings: Vec<(RunId, proctor_store::Scoring)>,
}

/// What the viewer reads: a store, and the [`Sources`] of what the store alone cannot show.
#[derive(Clone)]
pub struct Viewer {
    store: Store,
    sources: Arc<dyn Sources>,
    transcripts: Arc<crate::transcript::LineIndexes>,
}

impl Viewer {
    /// A viewer of `store`.
    pub fn new(store: Store, sources: Arc<dyn Sources>) -> Viewer {
        Viewer {
            store,
            sources,
            transcripts: Arc::default(),
        }
    }

    /// The store it reads.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The sources of diffs, transcripts and comparisons.
    pub fn sources(&self) -> &dyn Sources {
        self.sources.as_ref()
    }

    /// The index of each transcript's lines, kept between requests.
    pub(crate) fn transcripts(&self) -> &crate::transcript::LineIndexes {
        &self.transcripts
    }
}
