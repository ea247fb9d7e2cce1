//! `results.json` and `results.md`: a run's committed evidence. The JSON holds every trial's full
//! record (plan entry, hashes, launch, calls, answer, assertions with evidence, outcome with
//! reason, rubric, metrics) beside the aggregate report; the Markdown holds the tables a person
//! reads, every rate with its n.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use proctor_report::{Aggregator, Exporter, Markdown, RunReport, TrialRow};
use proctor_store::{AtomicFile, RunHandle, Scoring, StoreError, TrialSummary};
use proctor_suite::Suite;
use serde::{Deserialize, Serialize};

use crate::record::TrialRecord;
use crate::report_row::{placed, row_of};
use crate::scored_trials::{list, read_listed, Counting, Places};
use crate::spool::{spool_err, SpoolEntry, SpooledRecords};

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

/// Calls `f` with each finished trial record of a run, one at a time (in no particular order,
/// each `trial.json` read once), so that nothing holds every record of a large run at once.
/// Returns the trials whose `trial.json` exists but cannot be read (empty or torn), which are
/// not finished and which the caller reports.
pub fn for_each_record(
    run: &RunHandle,
    mut f: impl FnMut(TrialRecord) -> Result<(), ResultsError>,
) -> Result<Vec<proctor_store::DamagedTrial>, ResultsError> {
    run.for_each_trial(|file: proctor_store::TrialFile<TrialRecord>| f(file.record))
}

/// Writes a run's `results.json` and `results.md` from every finished trial and returns the
/// report; `None` when no trial is finished. A damaged `trial.json` is not a finished trial: the
/// results hold the finished ones.
pub fn write_run_results(
    run: &RunHandle,
    suite: &Suite,
    suite_hash: &str,
) -> Result<Option<RunReport>, ResultsError> {
    write_run_results_with(run, suite, suite_hash, None)
}

/// [`write_run_results`], with the `records` this process already spooled as it stored them
/// (used when [`SpooledRecords::usable`]): only the other finished trials are read back.
pub fn write_run_results_with(
    run: &RunHandle,
    suite: &Suite,
    suite_hash: &str,
    records: Option<SpooledRecords>,
) -> Result<Option<RunReport>, ResultsError> {
    let mut records = match records.filter(SpooledRecords::usable) {
        Some(r) => r,
        None => SpooledRecords::new(run.dir())?,
    };
    let spooled = std::mem::take(&mut records.added);
    let mut writer =
        ResultsWriter::with_records(records, run.id().as_str(), suite, suite_hash, false)
            .for_run(run);
    run.for_each_trial_but(
        |id| spooled.contains(id),
        |file: proctor_store::TrialFile<TrialRecord>| writer.add(&file.record),
    )?;
    match writer.finish("results") {
        Ok(report) => Ok(Some(report)),
        Err(ResultsError::Empty) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The report rows of every finished trial of a run, in plan order (task, variant, index).
pub fn read_rows(run: &RunHandle, suite: &Suite) -> Result<Vec<TrialRow>, ResultsError> {
    let mut rows = Vec::new();
    // Damaged trials are not finished: they have no row (the commands that read rows report
    // them).
    for_each_record(run, |record| {
        rows.push(row_of(&record, run.id().as_str(), suite));
        Ok(())
    })?;
    rows.sort_by(|a, b| plan_order(a).cmp(&plan_order(b)));
    Ok(rows)
}

/// The trial records of `scoring` of a run, one at a time: each finished trial's own record for
/// the run's own scoring, the records a rescore wrote for a rescore (streamed from its
/// `results.rescored-*.json`, never all held at once). Returns the trials whose `trial.json`
/// cannot be read (for the run's own scoring; a rescore's file holds only what it rescored).
pub fn for_each_scored_record(
    run: &RunHandle,
    scoring: &proctor_store::Scoring,
    f: impl FnMut(TrialRecord) -> Result<(), ResultsError>,
) -> Result<Vec<proctor_store::DamagedTrial>, ResultsError> {
    for_each_scored_record_by(run, scoring, f).map(|(damaged, _)| damaged)
}

/// Trials asked for one by one at most: more are read in one pass over the results file.
const ONE_BY_ONE: usize = 16;

/// Every trial of `scoring` (a rescore) of `run`: its summary, and its record for the trials
/// `keep` accepts. From the rescore's list when it has one to trust (each kept record read from
/// its place, when few are kept), else from its results file in one pass.
pub fn rescored_trials(
    run: &RunHandle,
    scoring: &Scoring,
    keep: &dyn Fn(&str) -> bool,
) -> Result<Vec<(TrialSummary, Option<TrialRecord>)>, ResultsError> {
    if let Some(listed) = list(run.dir(), scoring) {
        let kept = listed.iter().filter(|t| keep(&t.summary.trial_id)).count();
        if kept <= ONE_BY_ONE {
            if let Some(read) = read_listed(run.dir(), scoring, listed, keep) {
                return Ok(read);
            }
        }
    }
    let mut out = Vec::new();
    for_each_scored_record(run, scoring, |r| {
        let summary = crate::engine::summary_of(&r);
        let kept = keep(&r.plan.id).then_some(r);
        out.push((summary, kept));
        Ok(())
    })?;
    Ok(out)
}

/// The summaries of a rescore's trials by trial id, from its list or its records.
pub fn rescored_summaries(
    run: &RunHandle,
    scoring: &Scoring,
) -> Result<BTreeMap<String, TrialSummary>, ResultsError> {
    Ok(rescored_trials(run, scoring, &|_| false)?
        .into_iter()
        .map(|(s, _)| (s.trial_id.clone(), s))
        .collect())
}

/// The record a rescore holds for `trial`, if it holds one.
pub fn rescored_record(
    run: &RunHandle,
    scoring: &Scoring,
    trial: &str,
) -> Result<Option<TrialRecord>, ResultsError> {
    Ok(rescored_trials(run, scoring, &|t| t == trial)?
        .into_iter()
        .find_map(|(_, r)| r))
}
/// [`for_each_scored_record`], and for a rescore the hash of the suite it scored by (its
/// results' `suite_hash`).
fn for_each_scored_record_by(
    run: &RunHandle,
    scoring: &proctor_store::Scoring,
    mut f: impl FnMut(TrialRecord) -> Result<(), ResultsError>,
) -> Result<(Vec<proctor_store::DamagedTrial>, Option<String>), ResultsError> {
    if !scoring.is_rescore() {
        return for_each_record(run, f).map(|damaged| (damaged, None));
    }
    let path = run.dir().join(&scoring.file);
    let file = File::open(&path).map_err(|source| StoreError::Io {
        op: "read",
        path: path.clone(),
        source,
    })?;
    let mut failed = None;
    let mut suite_hash = None;
    let mut de = serde_json::Deserializer::from_reader(std::io::BufReader::new(file));
    let read = serde::de::DeserializeSeed::deserialize(
        stream::Document {
            f: &mut f,
            failed: &mut failed,
            suite_hash: &mut suite_hash,
        },
        &mut de,
    );
    if let Some(e) = failed {
        return Err(e);
    }
    read.map_err(|source| StoreError::Json { path, source })?;
    Ok((Vec::new(), suite_hash))
}

/// A results document read with each of its `trials` handed on as it is parsed.
mod stream {
    use std::fmt;

    use serde::de::{DeserializeSeed, Error, IgnoredAny, MapAccess, SeqAccess, Visitor};

    use super::{ResultsError, TrialRecord};

    /// The document: every member skipped but `trials` and `suite_hash`.
    pub(super) struct Document<'a, F> {
        /// Called with each record.
        pub(super) f: &'a mut F,
        /// Where `f`'s error is put when it stops the reading.
        pub(super) failed: &'a mut Option<ResultsError>,
        /// Where the document's `suite_hash` is put.
        pub(super) suite_hash: &'a mut Option<String>,
    }

    impl<'de, F: FnMut(TrialRecord) -> Result<(), ResultsError>> DeserializeSeed<'de>
        for Document<'_, F>
    {
        type Value = ();

        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_map(self)
        }
    }

    impl<'de, F: FnMut(TrialRecord) -> Result<(), ResultsError>> Visitor<'de> for Document<'_, F> {
        type Value = ();

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a results document")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let Document {
                f,
                failed,
                suite_hash,
            } = self;
            while let Some(key) = map.next_key::<String>()? {
                if key == "suite_hash" {
                    *suite_hash = Some(map.next_value::<String>()?);
                } else if key == "trials" {
                    map.next_value_seed(Trials {
                        f: &mut *f,
                        failed: &mut *failed,
                    })?;
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(())
        }
    }

    /// The `trials` list.
    struct Trials<'a, F> {
        f: &'a mut F,
        failed: &'a mut Option<ResultsError>,
    }

    impl<'de, F: FnMut(TrialRecord) -> Result<(), ResultsError>> DeserializeSeed<'de>
        for Trials<'_, F>
    {
        type Value = ();

        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_seq(self)
        }
    }

    impl<'de, F: FnMut(TrialRecord) -> Result<(), ResultsError>> Visitor<'de> for Trials<'_, F> {
        type Value = ();

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of trial records")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while let Some(record) = seq.next_element::<TrialRecord>()? {
                if let Err(e) = (self.f)(record) {
                    *self.failed = Some(e);
                    return Err(A::Error::custom("stopped by its reader"));
                }
            }
            Ok(())
        }
    }
}

/// [`read_rows`] of `scoring` of a run ([`for_each_scored_record`]); for a rescore, each row's
/// `suite_hash` is the suite the rescore scored by.
pub fn read_scored_rows(
    run: &RunHandle,
    suite: &Suite,
    scoring: &proctor_store::Scoring,
) -> Result<Vec<TrialRow>, ResultsError> {
    let mut rows = Vec::new();
    let (_, scored_by) = for_each_scored_record_by(run, scoring, |record| {
        rows.push(row_of(&record, run.id().as_str(), suite));
        Ok(())
    })?;
    // A rescore's rows name the suite that scored them, not the one the agent ran against
    // (which each record's `hashes.suite` keeps).
    if let Some(hash) = scored_by {
        for row in &mut rows {
            row.suite_hash.clone_from(&hash);
        }
    }
    rows.sort_by(|a, b| plan_order(a).cmp(&plan_order(b)));
    Ok(rows)
}

/// The promotion gates the report of `scoring` of a run keeps (`gates` of its
/// `results.report.json`, or a rescore's): a finished release run's; `None` for every other run
/// and for a report that cannot be read.
pub fn read_gates(
    run: &RunHandle,
    scoring: &proctor_store::Scoring,
) -> Option<proctor_report::GateReport> {
    /// The one member read.
    #[derive(Deserialize)]
    struct Gates {
        #[serde(default)]
        gates: Option<proctor_report::GateReport>,
    }
    let path = run.dir().join(format!("{}.report.json", scoring.stem()));
    let file = File::open(path).ok()?;
    let doc: Gates = serde_json::from_reader(std::io::BufReader::new(file)).ok()?;
    doc.gates
}

/// The key trials are reported in: task, variant, index.
fn plan_order(row: &TrialRow) -> (&str, &str, u32) {
    (&row.task, &row.variant, row.trial_index)
}

/// Writes `STEM.json` and `STEM.md` for records given one at a time, in any order.
///
/// Memory does not grow with the records: each is checked and spooled to a temporary file in the
/// run folder, as it will stand in `results.json` and with its report row, and only its plan key
/// is kept. [`ResultsWriter::finish`] reads the rows back in plan order into an [`Aggregator`]
/// (which keeps counts, sums, and per trial a summary line and the values medians are taken
/// over), then copies the records' JSON into `results.json`, which has exactly the layout of
/// [`ResultsDocument`] (a rescore, which lists where each trial lands, reads each record back
/// and streams it there instead).
pub struct ResultsWriter<'s> {
    run_id: String,
    suite: &'s Suite,
    suite_hash: String,
    rescored: bool,
    records: SpooledRecords,
    /// The planned trials of a release run: with every one of them added, the suite's
    /// promotion gates are applied and kept in the report ([`ResultsWriter::release_gates`]).
    release_planned: Option<u64>,
}

/// For each id of `ids`, its rank in sorted order.
fn ranks(ids: &[String]) -> Vec<u32> {
    let mut order: Vec<usize> = (0..ids.len()).collect();
    order.sort_by(|&a, &b| ids[a].cmp(&ids[b]));
    let mut rank = vec![0; ids.len()];
    for (r, i) in order.into_iter().enumerate() {
        rank[i] = u32::try_from(r).unwrap_or(u32::MAX);
    }
    rank
}

impl<'s> ResultsWriter<'s> {
    /// Starts the results of run `run_id` in the run folder `dir`; `suite_hash` is the hash of
    /// the suite whose rules scored the records, `rescored` whether that was `proctor rescore`.
    pub fn new(
        dir: &Path,
        run_id: &str,
        suite: &'s Suite,
        suite_hash: &str,
        rescored: bool,
    ) -> Result<Self, ResultsError> {
        Ok(Self::with_records(
            SpooledRecords::new(dir)?,
            run_id,
            suite,
            suite_hash,
            rescored,
        ))
    }

    /// [`ResultsWriter::new`], holding the `records` already spooled (in their run folder).
    pub fn with_records(
        records: SpooledRecords,
        run_id: &str,
        suite: &'s Suite,
        suite_hash: &str,
        rescored: bool,
    ) -> Self {
        ResultsWriter {
            run_id: run_id.to_string(),
            suite,
            suite_hash: suite_hash.to_string(),
            rescored,
            records,
            release_planned: None,
        }
    }

    /// [`ResultsWriter::release_gates`] when `run` is a release run (its `run.json` says so),
    /// with its planned trials; unchanged for every other run.
    pub fn for_run(self, run: &RunHandle) -> Self {
        let meta = run.meta();
        if meta.trial_mode == proctor_records::run::RunMode::Release {
            self.release_gates(meta.planned_trials)
        } else {
            self
        }
    }

    /// Makes these the results of a release run of `planned` trials: when every one of them is
    /// added and the suite has `[promotion]`, [`ResultsWriter::finish`] applies the gates to
    /// the trials and keeps them in the report (`gates`), for `results.json`, `results.md`,
    /// `show`, the viewer and the JUnit report. Gates that cannot be applied (the baseline or
    /// candidate did not run) are left out; the run's conclusion reports why.
    pub fn release_gates(mut self, planned: u64) -> Self {
        self.release_planned = Some(planned);
        self
    }

    /// Adds one trial's record. A record holding NaN or ±Infinity is refused and nothing of it is
    /// kept.
    pub fn add(&mut self, record: &TrialRecord) -> Result<(), ResultsError> {
        Ok(self.records.add_checked(record)?)
    }

    /// Aggregates and writes `STEM.json` then `STEM.md`, both atomically. Fails with
    /// [`ResultsError::Empty`] when no record was added (and writes nothing).
    pub fn finish(self, stem: &str) -> Result<RunReport, ResultsError> {
        let ResultsWriter {
            run_id,
            suite,
            suite_hash,
            rescored,
            records,
            release_planned,
        } = self;
        let SpooledRecords {
            dir,
            spool,
            tasks,
            variants,
            mut entries,
            ..
        } = records;
        let gating = suite
            .file
            .promotion
            .as_ref()
            .filter(|_| release_planned.is_some_and(|p| entries.len() as u64 >= p));
        if entries.is_empty() {
            return Err(ResultsError::Empty);
        }
        let (task_rank, variant_rank) = (ranks(&tasks), ranks(&variants));
        entries
            .sort_by_key(|((t, v, i), _)| (task_rank[*t as usize], variant_rank[*v as usize], *i));
        let spooled: Vec<SpoolEntry> = entries.into_iter().map(|(_, e)| e).collect();
        let mut reader = spool.into_reader()?;
        let place = |row| {
            let mut row = placed(row, &run_id, suite);
            if rescored {
                // The report's `suite_hashes` name the rules that scored the trials.
                row.suite_hash.clone_from(&suite_hash);
            }
            row
        };
        let report = aggregate(
            (&dir, &mut reader),
            &spooled,
            place,
            gating.map(|g| (g, suite)),
        )?;
        let json_path = dir.join(format!("{stem}.json"));
        proctor_store::ensure_finite(&json_path, &report)?;
        let generated_at = proctor_store::utc_now();
        let head = DocumentHead {
            schema_version: RESULTS_VERSION,
            run_id: &run_id,
            suite_id: suite.id(),
            suite_hash: &suite_hash,
            generated_at: &generated_at,
            rescored,
            report: &report,
        };
        write_json((&dir, stem), &head, reader, &spooled)?;
        let mut md = Markdown.run_report(&report);
        md.push_str(&format!(
            "\n---\nRun `{}`, suite `{}` (hash `{}`){}; generated {} by proctor. Every trial's evidence is in `{stem}.json` and `trials/`.\n",
            run_id,
            suite.id(),
            suite_hash,
            if rescored { ", rescored with the suite's current rules" } else { "" },
            generated_at
        ));
        proctor_store::atomic_write(dir.join(format!("{stem}.md")), md.as_bytes())?;
        write_report_alone(&dir.join(format!("{stem}.report.json")), &report)?;
        Ok(report)
    }
}

/// The report of the spooled rows, read back in plan order (`spooled`), each made whole by
/// `place`; with a release run's promotion gates applied when `gating` (which pairs trials
/// across variants, so it keeps every row).
fn aggregate(
    (dir, reader): (&Path, &mut File),
    spooled: &[SpoolEntry],
    place: impl Fn(TrialRow) -> TrialRow,
    gating: Option<(&proctor_suite::model::Promotion, &Suite)>,
) -> Result<RunReport, ResultsError> {
    let mut aggregator = Aggregator::default();
    let mut buf = Vec::new();
    let mut rows = Vec::new();
    for entry in spooled {
        let row = entry
            .read_row(reader, &mut buf)
            .map_err(|e| spool_err(dir, "read back", e))?;
        let row = place(row);
        aggregator.add(&row)?;
        if gating.is_some() {
            rows.push(row);
        }
    }
    let mut report = aggregator.finish()?;
    if let Some((promotion, suite)) = gating {
        report.gates = proctor_report::gate(&rows, promotion, &suite.file.report).ok();
    }
    Ok(report)
}

/// Writes `STEM.json` in the run folder `dir`: `head`, then the spooled records in the order of
/// `spooled`. A rescore's (`head.rescored`) also lists where each trial lands in it, for readers
/// that need its outcomes or one record.
fn write_json(
    (dir, stem): (&Path, &str),
    head: &DocumentHead,
    mut reader: File,
    spooled: &[SpoolEntry],
) -> Result<(), ResultsError> {
    let json_path = dir.join(format!("{stem}.json"));
    if !head.rescored {
        return assemble_document(&json_path, head, (dir, &mut reader), spooled);
    }
    // A rescore notes where each trial lands, from the trial's record.
    let places = Places::default();
    let doc = StreamedDocument {
        head: *head,
        trials: SpooledTrials {
            spool: RefCell::new(reader),
            entries: spooled,
            places: Some(&places),
        },
    };
    stream_document(&json_path, &doc, Some(&places))?;
    let size = std::fs::metadata(&json_path)
        .map_err(|source| StoreError::Io {
            op: "read",
            path: json_path.clone(),
            source,
        })?
        .len();
    places.write(dir, stem, &format!("{stem}.json"), size)?;
    Ok(())
}

/// Writes the report alone at `path`, for readers that want the rates without every trial
/// (the viewer): without the report's own per-trial list, so its size does not grow with the
/// run; from the typed report it borrows, with no copy of it (and of its every trial) as a JSON
/// value.
fn write_report_alone(path: &Path, report: &RunReport) -> Result<(), ResultsError> {
    let json = serde_json::to_vec(&report.without_trials()).map_err(|source| StoreError::Json {
        path: path.to_path_buf(),
        source,
    })?;
    proctor_store::atomic_write(path, &json)?;
    Ok(())
}

/// Streams `doc` into `path`, atomically; with `places`, noting where each trial lands in it.
fn stream_document(
    path: &Path,
    doc: &StreamedDocument,
    places: Option<&Places>,
) -> Result<(), ResultsError> {
    let file = AtomicFile::create(path)?;
    let mut out = BufWriter::with_capacity(1 << 16, file);
    let json_err = |source| StoreError::Json {
        path: path.to_path_buf(),
        source,
    };
    let written = places.map(|p| p.written.clone()).unwrap_or_default();
    let mut ser = serde_json::Serializer::pretty(Counting::new(&mut out, written));
    doc.serialize(&mut ser).map_err(json_err)?;
    out.write_all(b"\n")
        .map_err(|e| json_err(serde_json::Error::io(e)))?;
    let file = out
        .into_inner()
        .map_err(|e| json_err(serde_json::Error::io(e.into_error())))?;
    file.commit()?;
    Ok(())
}

/// Writes `head` then the spooled records, in the order of `entries`, into `path`, atomically,
/// byte for byte as [`stream_document`] writes them, by copying each record's JSON as the
/// spool holds it (see [`crate::spool`]) instead of reading it back and writing it again.
fn assemble_document(
    path: &Path,
    head: &DocumentHead,
    (dir, spool): (&Path, &mut File),
    entries: &[SpoolEntry],
) -> Result<(), ResultsError> {
    let write_err = |source| StoreError::Io {
        op: "write",
        path: path.to_path_buf(),
        source,
    };
    let head = serde_json::to_vec_pretty(head).map_err(|source| StoreError::Json {
        path: path.to_path_buf(),
        source,
    })?;
    // The head is an object, whose pretty JSON ends with a line break and its closing brace:
    // the trials go before them.
    let open = head
        .strip_suffix(b"\n}")
        .ok_or_else(|| write_err(std::io::Error::other("the results' head is not an object")))?;
    let file = AtomicFile::create(path)?;
    let mut out = BufWriter::with_capacity(1 << 16, file);
    let mut buf = Vec::new();
    out.write_all(open)
        .and_then(|()| out.write_all(b",\n  \"trials\": ["))
        .map_err(write_err)?;
    for (i, entry) in entries.iter().enumerate() {
        entry
            .read_bytes(spool, &mut buf)
            .map_err(|e| spool_err(dir, "read back", e))?;
        out.write_all(if i == 0 { b"\n    " } else { b",\n    " })
            .and_then(|()| out.write_all(&buf))
            .map_err(write_err)?;
    }
    let end: &[u8] = if entries.is_empty() {
        b"]\n}\n"
    } else {
        b"\n  ]\n}\n"
    };
    out.write_all(end).map_err(write_err)?;
    let file = out.into_inner().map_err(|e| write_err(e.into_error()))?;
    file.commit()?;
    Ok(())
}

/// [`ResultsDocument`]'s layout without its trials.
#[derive(Clone, Copy, Serialize)]
struct DocumentHead<'a> {
    schema_version: u32,
    run_id: &'a str,
    suite_id: &'a str,
    suite_hash: &'a str,
    generated_at: &'a str,
    rescored: bool,
    report: &'a RunReport,
}

/// [`ResultsDocument`]'s layout, with the trials streamed from the spool.
struct StreamedDocument<'a> {
    head: DocumentHead<'a>,
    trials: SpooledTrials<'a>,
}

impl Serialize for StreamedDocument<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let h = &self.head;
        let mut doc = serializer.serialize_struct("ResultsDocument", 8)?;
        doc.serialize_field("schema_version", &h.schema_version)?;
        doc.serialize_field("run_id", h.run_id)?;
        doc.serialize_field("suite_id", h.suite_id)?;
        doc.serialize_field("suite_hash", h.suite_hash)?;
        doc.serialize_field("generated_at", h.generated_at)?;
        doc.serialize_field("rescored", &h.rescored)?;
        doc.serialize_field("report", h.report)?;
        doc.serialize_field("trials", &self.trials)?;
        doc.end()
    }
}

/// The spooled records, read back one at a time as they are serialized.
struct SpooledTrials<'a> {
    spool: RefCell<File>,
    entries: &'a [SpoolEntry],
    /// Where each record lands in the file, taken for a rescore's list of its trials.
    places: Option<&'a Places>,
}

impl Serialize for SpooledTrials<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeSeq};
        let mut seq = serializer.serialize_seq(Some(self.entries.len()))?;
        let mut spool = self.spool.borrow_mut();
        let mut buf = Vec::new();
        for entry in self.entries {
            let record = entry.read(&mut spool, &mut buf).map_err(|e| {
                S::Error::custom(format!("cannot read the results spool back: {e}"))
            })?;
            let at = self.places.map(|p| p.written.get());
            seq.serialize_element(&record)?;
            if let (Some(places), Some(at)) = (self.places, at) {
                places.push(&record, at);
            }
        }
        seq.end()
    }
}

#[cfg(test)]
mod tests {
    use proctor_score::{ErrorKind, Outcome};
    use proctor_suite::plan::{Plan, PlannedTrial, TrialMode};

    use super::*;
    use crate::report_row::{row_seed, verdict_of};
    use crate::trial::{Stage, TrialError};

    fn errored(e: TrialError) -> TrialRecord {
        let plan = Plan {
            suite_id: "s".into(),
            suite_hash: String::new(),
            fixture_hash: String::new(),
            trial_mode: TrialMode::Dev,
            trials_per_cell: 1,
            trials: Vec::new(),
        };
        let planned = PlannedTrial {
            id: "t.v.0".into(),
            task: "t".into(),
            variant: "v".into(),
            index: 0,
            mutation: None,
            seed: None,
        };
        e.into_record(
            &plan,
            &planned,
            proctor_records::timings::Timings::default(),
        )
    }

    #[test]
    fn results_assembled_from_the_spool_are_byte_for_byte_those_written_from_the_records() {
        let dir = tempfile::tempdir().unwrap();
        let mut spooled = SpooledRecords::new(dir.path()).unwrap();
        let mut aggregator = Aggregator::default();
        let reasons = [
            "`claude` is not installed",
            "two lines:\nthe second, with \"quotes\", a tab\t and é",
            "",
        ];
        for (i, reason) in reasons.iter().enumerate() {
            let mut record = errored(TrialError::agent_start(*reason));
            record.plan.index = i as u32;
            record.plan.id = format!("t.v.{i}");
            spooled.add_checked(&record).unwrap();
            let mut row = row_seed(&record);
            row.run_id = "r".into();
            row.suite_id = "s".into();
            aggregator.add(&row).unwrap();
        }
        let report = aggregator.finish().unwrap();
        let head = DocumentHead {
            schema_version: RESULTS_VERSION,
            run_id: "r",
            suite_id: "s",
            suite_hash: "h",
            generated_at: "2026-12-07T00:00:00.000Z",
            rescored: false,
            report: &report,
        };
        let SpooledRecords { spool, entries, .. } = spooled;
        let entries: Vec<SpoolEntry> = entries.into_iter().map(|(_, e)| e).collect();
        let mut reader = spool.into_reader().unwrap();
        let (assembled, streamed) = (dir.path().join("a.json"), dir.path().join("s.json"));
        assemble_document(&assembled, &head, (dir.path(), &mut reader), &entries).unwrap();
        let doc = StreamedDocument {
            head,
            trials: SpooledTrials {
                spool: RefCell::new(reader),
                entries: &entries,
                places: None,
            },
        };
        stream_document(&streamed, &doc, None).unwrap();
        let (assembled, streamed) = (
            std::fs::read_to_string(assembled).unwrap(),
            std::fs::read_to_string(streamed).unwrap(),
        );
        assert!(streamed.contains("\"trials\": [\n    {\n      \"record_version\""));
        assert!(streamed.contains("with \\\"quotes\\\""), "{streamed}");
        assert_eq!(assembled, streamed);
        let doc: ResultsDocument = serde_json::from_str(&assembled).unwrap();
        assert_eq!(doc.trials.len(), 3);
        assert_eq!(doc.trials[1].reason, format!("agent-start: {}", reasons[1]));
    }

    #[test]
    fn a_trial_that_failed_before_scoring_is_reported_with_its_own_kind() {
        let v = verdict_of(&errored(TrialError::agent_start(
            "`claude` is not installed",
        )));
        assert_eq!(
            v.outcome,
            Outcome::Errored {
                kind: ErrorKind::AgentStart
            }
        );
        assert_eq!(v.reason, "agent-start: `claude` is not installed");
        assert!(v.success.is_none() && !v.task_success);
        let v = verdict_of(&errored(TrialError::harness(Stage::Prepare, "no folder")));
        assert_eq!(
            v.outcome,
            Outcome::Errored {
                kind: ErrorKind::Harness
            }
        );
    }
}
