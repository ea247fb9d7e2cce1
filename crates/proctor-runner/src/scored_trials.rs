//! The list of a rescore's trials, kept beside its results: each trial's summary (what the index
//! holds for the run's own outcomes) and where its record is in the results file.
//!
//! ```text
//! RUN/results.rescored-STAMP.json          the rescore's results, every record in full
//! RUN/results.rescored-STAMP.trials.jsonl  {file, size}, then one {summary, at, len} a trial
//!                                          (not `.json`: a reader of an older version, which
//!                                          takes every results.rescored-*.json for a
//!                                          rescore, leaves it alone)
//! ```
//!
//! A reader that needs a rescore's outcomes (`show`, the viewer's run page and pictures:
//! [`crate::results::rescored_trials`]) reads
//! the list instead of every record, and one trial's record is read from its place in the
//! results file. The list is derived data, written after the results file it describes: a list
//! that is missing, unreadable, names another file or another size, or points at a place that
//! does not hold the trial's record is not used, and the reader reads the results file itself,
//! as it did before lists existed.

use std::cell::Cell;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::rc::Rc;

use proctor_store::{Scoring, TrialSummary};
use serde::{Deserialize, Serialize};

use crate::record::TrialRecord;

/// The suffix of a rescore's list of trials, after the results file's stem.
pub const TRIALS_SUFFIX: &str = ".trials.jsonl";

/// A rescore's list of trials: its first line, then one [`ScoredTrial`] a line.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListHead {
    /// The results file the places are in.
    file: String,
    /// Its size in bytes when the list was written.
    size: u64,
}

/// One trial of a rescore.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ScoredTrial {
    /// Its summary in the rescore.
    pub(crate) summary: TrialSummary,
    /// Where its record begins in the results file (possibly at the separator before it).
    at: u64,
    /// How many bytes from there hold it.
    len: u64,
}

/// A writer that counts what goes through it, so the places of the records can be taken while
/// they are serialized.
pub(crate) struct Counting<W> {
    inner: W,
    written: Rc<Cell<u64>>,
}

impl<W: Write> Counting<W> {
    /// Counts into `written` what is written to `inner`.
    pub(crate) fn new(inner: W, written: Rc<Cell<u64>>) -> Counting<W> {
        Counting { inner, written }
    }
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written.set(self.written.get() + n as u64);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// The places of the records as they are serialized, and their summaries.
#[derive(Default)]
pub(crate) struct Places {
    pub(crate) written: Rc<Cell<u64>>,
    trials: std::cell::RefCell<Vec<ScoredTrial>>,
}

impl Places {
    /// Records that `record` was serialized from byte `at` to where the count is now.
    pub(crate) fn push(&self, record: &TrialRecord, at: u64) {
        self.trials.borrow_mut().push(ScoredTrial {
            summary: crate::engine::summary_of(record),
            at,
            len: self.written.get() - at,
        });
    }

    /// Writes the list of the results file `file` (in `dir`, of `size` bytes) as
    /// `STEM.trials.jsonl`.
    pub(crate) fn write(
        self,
        dir: &Path,
        stem: &str,
        file: &str,
        size: u64,
    ) -> Result<(), proctor_store::StoreError> {
        let path = dir.join(format!("{stem}{TRIALS_SUFFIX}"));
        let head = ListHead {
            file: file.to_string(),
            size,
        };
        let json_err = |source| proctor_store::StoreError::Json {
            path: path.clone(),
            source,
        };
        let mut text = serde_json::to_vec(&head).map_err(json_err)?;
        for t in self.trials.into_inner() {
            text.push(b'\n');
            text.extend(serde_json::to_vec(&t).map_err(json_err)?);
        }
        text.push(b'\n');
        proctor_store::atomic_write(&path, &text)
    }
}

/// The list of `scoring` in the run folder `run_dir`, when there is one that describes its
/// results file as it is.
pub(crate) fn list(run_dir: &Path, scoring: &Scoring) -> Option<Vec<ScoredTrial>> {
    let text =
        std::fs::read_to_string(run_dir.join(format!("{}{TRIALS_SUFFIX}", scoring.stem()))).ok()?;
    let mut lines = text.lines();
    let head: ListHead = serde_json::from_str(lines.next()?).ok()?;
    let size = std::fs::metadata(run_dir.join(&scoring.file)).ok()?.len();
    if head.file != scoring.file || head.size != size {
        return None;
    }
    lines
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .ok()
}

/// The record at `t`'s place in the results file `file`; `None` when the place does not hold
/// that trial's record.
fn record_at(file: &mut File, t: &ScoredTrial) -> Option<TrialRecord> {
    file.seek(SeekFrom::Start(t.at)).ok()?;
    let mut bytes = vec![0; usize::try_from(t.len).ok()?];
    file.read_exact(&mut bytes).ok()?;
    let start = bytes
        .iter()
        .position(|b| !matches!(b, b',' | b' ' | b'\n' | b'\r' | b'\t'))?;
    let record: TrialRecord = serde_json::from_slice(&bytes[start..]).ok()?;
    (record.plan.id == t.summary.trial_id).then_some(record)
}

/// Every listed trial with its record read from its place for those `keep` accepts; `None`
/// when a place does not hold its trial's record.
pub(crate) fn read_listed(
    run_dir: &Path,
    scoring: &Scoring,
    listed: Vec<ScoredTrial>,
    keep: &dyn Fn(&str) -> bool,
) -> Option<Vec<(TrialSummary, Option<TrialRecord>)>> {
    let mut file = File::open(run_dir.join(&scoring.file)).ok()?;
    listed
        .into_iter()
        .map(|t| {
            let record = if keep(&t.summary.trial_id) {
                Some(record_at(&mut file, &t)?)
            } else {
                None
            };
            Some((t.summary, record))
        })
        .collect()
}
