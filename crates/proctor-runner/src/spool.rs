//! The records of a run's results, spooled: each trial's record as JSON in an unnamed file of the
//! run folder, with only its place in plan order kept in memory, until the results are written
//! ([`crate::results::ResultsWriter`]). Each record is spooled as it will stand in
//! `results.json` (pretty, indented as an element of its `trials`), followed by its report row,
//! so that the results are written by copying bytes rather than reading every record back.

use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use proctor_store::StoreError;

use crate::record::TrialRecord;

/// The records a [`crate::results::ResultsWriter`] was given, spooled: what can be gathered
/// before the suite and the run's end are at hand (a run's commits add each trial as it is
/// stored, so that the results at the end need not read every trial back). In memory: each
/// record's place in plan order and its trial id.
pub struct SpooledRecords {
    pub(crate) dir: PathBuf,
    pub(crate) spool: Spool,
    /// Task and variant ids, each kept once; entries refer to them by position.
    pub(crate) tasks: Vec<String>,
    pub(crate) variants: Vec<String>,
    pub(crate) entries: Vec<(PlanKey, SpoolEntry)>,
    /// The ids of the trials added.
    pub(crate) added: std::collections::HashSet<String>,
    /// Set when a record could not be added: these records are then not used.
    failed: bool,
}

impl SpooledRecords {
    /// An empty spool in the run folder `dir`.
    pub fn new(dir: &Path) -> Result<SpooledRecords, StoreError> {
        Ok(SpooledRecords {
            dir: dir.to_path_buf(),
            spool: Spool::create(dir)?,
            tasks: Vec::new(),
            variants: Vec::new(),
            entries: Vec::new(),
            added: std::collections::HashSet::new(),
            failed: false,
        })
    }

    /// Adds the record of a trial the store has just committed (its `trial.json`, written
    /// whole, held no NaN or ±Infinity: [`proctor_store::RunHandle::finish_trials`] refuses
    /// those); a failure is kept, and makes [`SpooledRecords::usable`] false.
    pub(crate) fn add_committed(&mut self, record: &TrialRecord) -> Result<(), StoreError> {
        let added = self.append(record);
        self.failed |= added.is_err();
        added
    }

    /// Adds one trial's record, refusing one that holds NaN or ±Infinity (nothing of it kept).
    pub(crate) fn add_checked(&mut self, record: &TrialRecord) -> Result<(), StoreError> {
        proctor_store::ensure_finite(&self.dir.join("results.json"), record)?;
        self.append(record)
    }

    fn append(&mut self, record: &TrialRecord) -> Result<(), StoreError> {
        let json_err = |source| StoreError::Json {
            path: self.dir.join("(results spool)"),
            source,
        };
        let pretty = serde_json::to_vec_pretty(record).map_err(json_err)?;
        let row = serde_json::to_vec(&crate::report_row::row_seed(record)).map_err(json_err)?;
        let entry = self.spool.append(&as_trials_element(&pretty), &row)?;
        let plan = &record.plan;
        let key = (
            intern(&mut self.tasks, &plan.task),
            intern(&mut self.variants, &plan.variant),
            plan.index,
        );
        self.entries.push((key, entry));
        self.added.insert(plan.id.clone());
        Ok(())
    }

    /// Whether every record given was added.
    pub fn usable(&self) -> bool {
        !self.failed
    }
}

/// Where a trial sits in plan order: positions in `tasks` and `variants`, and its index.
pub(crate) type PlanKey = (u32, u32, u32);

/// The position of `id` in `ids`, added at the end when new.
fn intern(ids: &mut Vec<String>, id: &str) -> u32 {
    let at = ids.iter().position(|x| x == id).unwrap_or_else(|| {
        ids.push(id.to_string());
        ids.len() - 1
    });
    u32::try_from(at).unwrap_or(u32::MAX)
}

/// How far `results.json` indents an element of its `trials`: two levels of two spaces.
const TRIALS_ELEMENT_INDENT: &[u8] = b"    ";

/// A record's pretty JSON (`serde_json`'s, at the top level) as it stands as an element of
/// `results.json`'s `trials`: every line after the first indented two levels more. Exact,
/// because JSON strings never hold a raw line break: every one is the formatter's.
fn as_trials_element(pretty: &[u8]) -> Vec<u8> {
    let lines = pretty.iter().filter(|&&b| b == b'\n').count();
    let mut out = Vec::with_capacity(pretty.len() + lines * TRIALS_ELEMENT_INDENT.len());
    for (i, line) in pretty.split(|&b| b == b'\n').enumerate() {
        if i > 0 {
            out.push(b'\n');
            out.extend_from_slice(TRIALS_ELEMENT_INDENT);
        }
        out.extend_from_slice(line);
    }
    out
}

/// Where one record's JSON, then its report row's, are in the spool.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SpoolEntry {
    offset: u64,
    len: usize,
    row_len: usize,
}

impl SpoolEntry {
    /// Reads the record back from `spool`, using `buf` for its bytes.
    pub(crate) fn read(&self, spool: &mut File, buf: &mut Vec<u8>) -> std::io::Result<TrialRecord> {
        self.read_bytes(spool, buf)?;
        serde_json::from_slice(buf).map_err(std::io::Error::other)
    }

    /// Reads the record's JSON back from `spool` into `buf`, as it stands in `results.json`.
    pub(crate) fn read_bytes(&self, spool: &mut File, buf: &mut Vec<u8>) -> std::io::Result<()> {
        buf.resize(self.len, 0);
        spool.seek(SeekFrom::Start(self.offset))?;
        spool.read_exact(buf)
    }

    /// Reads the record's report row back from `spool`, using `buf` for its bytes: as
    /// [`crate::report_row::row_seed`] made it, without what the run and suite say.
    pub(crate) fn read_row(
        &self,
        spool: &mut File,
        buf: &mut Vec<u8>,
    ) -> std::io::Result<proctor_report::TrialRow> {
        buf.resize(self.row_len, 0);
        spool.seek(SeekFrom::Start(self.offset + self.len as u64))?;
        spool.read_exact(buf)?;
        serde_json::from_slice(buf).map_err(std::io::Error::other)
    }
}

/// A temporary file of records' JSON, back to back: an unnamed file in the run folder
/// (`O_TMPFILE`), so nothing is left behind however the process ends.
pub(crate) struct Spool {
    /// The run folder, for messages.
    dir: PathBuf,
    out: BufWriter<File>,
    len: u64,
}

impl Spool {
    pub(crate) fn create(dir: &Path) -> Result<Spool, StoreError> {
        let file = tempfile::tempfile_in(dir).map_err(|e| spool_err(dir, "create", e))?;
        Ok(Spool {
            dir: dir.to_path_buf(),
            out: BufWriter::with_capacity(1 << 16, file),
            len: 0,
        })
    }

    /// Appends a record's JSON, then its row's.
    pub(crate) fn append(&mut self, record: &[u8], row: &[u8]) -> Result<SpoolEntry, StoreError> {
        self.out
            .write_all(record)
            .and_then(|()| self.out.write_all(row))
            .map_err(|e| spool_err(&self.dir, "write", e))?;
        let entry = SpoolEntry {
            offset: self.len,
            len: record.len(),
            row_len: row.len(),
        };
        self.len += (record.len() + row.len()) as u64;
        Ok(entry)
    }

    /// Everything appended, flushed, as a file to read back (each read seeks first).
    pub(crate) fn into_reader(self) -> Result<File, StoreError> {
        let dir = self.dir;
        self.out
            .into_inner()
            .map_err(|e| spool_err(&dir, "write", e.into_error()))
    }
}

/// A spool failure, named after the run folder the spool lives in.
pub(crate) fn spool_err(dir: &Path, op: &'static str, source: std::io::Error) -> StoreError {
    StoreError::Io {
        op,
        path: dir.join("(results spool)"),
        source,
    }
}
