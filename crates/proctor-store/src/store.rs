//! The store: run folders (the truth) and the index over them (a cache).

use crate::atomic::{
    atomic_write_json, atomic_write_unsynced, is_temp_name, sync_dir, to_json_bytes,
};
use crate::error::{io_err, Result, StoreError};
use crate::index::{Index, Opened, ScannedRun};
use crate::lock::{self, LockHolder, RunLock};
use crate::model::{
    validate_trial_id, DamagedRun, DamagedTrial, Placement, RunListing, RunMeta, RunRecord,
    RunStatus, TrialFile, TrialFileRef, TrialHead, TrialSummary, FILE_SCHEMA_VERSION,
};
use crate::query::{CellCount, TrialFilter, TrialsPage};
use crate::time::utc_now;
use crate::RunId;
use proctor_records::time::now_millis;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// The index file's name inside the store.
pub const INDEX_FILE: &str = "index.sqlite";
/// The folder holding one folder per run.
pub const RUNS_DIR: &str = "runs";
/// A run's metadata file.
pub const RUN_FILE: &str = "run.json";
/// The folder holding one folder per trial inside a run.
pub const TRIALS_DIR: &str = "trials";
/// A trial's record; its presence (and parsing) is what makes the trial finished.
pub const TRIAL_FILE: &str = "trial.json";
/// The store directory used when `--store` is not given.
pub const DEFAULT_STORE_DIR: &str = ".proctor";

/// How many runs [`StoreError::NoRunMatches`] lists.
const RECENT_IN_ERRORS: usize = 5;

/// A store of runs: `DIR/index.sqlite` and `DIR/runs/RUN_ID/...`.
///
/// Cheap to clone and safe to share between threads: every clone uses the same index
/// connection. Several processes may open the same store at once.
#[derive(Debug, Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    root: PathBuf,
    runs: PathBuf,
    /// `None` on a compute node ([`Store::open_on_node`]).
    index: Option<Index>,
    /// The store cannot be written: the index is read-only (or in memory), nothing is written.
    read_only: bool,
    /// On a compute node: where its trials run, stamped into each `trial.json`.
    node: Option<Placement>,
}

/// What [`Store::reindex`] found in the folders.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReindexReport {
    /// Runs indexed.
    pub runs: u64,
    /// Finished trials indexed.
    pub trials: u64,
    /// Run folders left out because their `run.json` cannot be read, each named with why.
    pub skipped_runs: Vec<DamagedRun>,
    /// Trials whose `trial.json` exists but cannot be read, by run: not counted as finished.
    pub damaged_trials: Vec<(RunId, DamagedTrial)>,
    /// Where [`Store::rebuild_index`] moved an unreadable index before rebuilding it, if it did.
    pub moved_aside: Option<PathBuf>,
    /// Runs whose `run.json` names another id than their folder: indexed under the folder's
    /// name (each folder is one run), each named with the id its file records.
    pub mismatched_runs: Vec<MismatchedRun>,
}

/// A run folder whose `run.json` records another run id than the folder's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MismatchedRun {
    /// The folder's name: the id the run is indexed under.
    pub id: RunId,
    /// The id its `run.json` records.
    pub recorded: RunId,
}

impl Store {
    /// Opens the store at `dir`, creating the directory, `runs/` and the index as needed. The
    /// store keeps `dir` as an absolute path, so every path it hands out is absolute.
    ///
    /// When the index is new (or was left by an older schema) while run folders exist, it is
    /// rebuilt from them at once, so deleting `index.sqlite` is always safe.
    ///
    /// An index SQLite cannot read fails with [`StoreError::IndexDamaged`]; [`Store::rebuild_index`]
    /// repairs it. A store that cannot be written (a read-only file system, or no write
    /// permission) is opened read-only: its index is read without writing anything, or, when it
    /// is missing, damaged or of another schema, built in memory from the folders; every method
    /// that writes then fails with [`StoreError::ReadOnly`] (or the file system's own error).
    pub fn open(dir: impl AsRef<Path>) -> Result<Store> {
        Store::open_with(dir.as_ref(), true)
    }

    fn open_with(given: &Path, reindex_new: bool) -> Result<Store> {
        if is_existing_dir(given) && !is_writable(given) {
            return Store::open_read_only(given);
        }
        let runs = given.join(RUNS_DIR);
        fs::create_dir_all(&runs).map_err(io_err("create directory", &runs))?;
        // Every path the store hands out is absolute, whatever the caller's working directory:
        // sandboxes mount trial folders and rescore lays saved changes as overlay layers.
        let root = fs::canonicalize(given).map_err(io_err("resolve", given))?;
        let runs = root.join(RUNS_DIR);
        let (index, opened) = Index::open(&root.join(INDEX_FILE))?;
        let store = Store {
            inner: Arc::new(Inner {
                root,
                runs,
                index: Some(index),
                read_only: false,
                node: None,
            }),
        };
        if reindex_new && matches!(opened, Opened::Created) && !store.run_ids()?.is_empty() {
            store.reindex()?;
        }
        Ok(store)
    }

    /// Opens a store that cannot be written: the index file read-only when it is sound, else an
    /// index in memory filled from the folders.
    fn open_read_only(given: &Path) -> Result<Store> {
        let root = fs::canonicalize(given).map_err(io_err("resolve", given))?;
        let runs = root.join(RUNS_DIR);
        let path = root.join(INDEX_FILE);
        let (index, fill) = match Index::open_read_only(&path) {
            Ok(index) => (index, false),
            Err(e @ StoreError::IndexTooNew { .. }) => return Err(e),
            Err(_) => (Index::in_memory(&path)?, true),
        };
        let store = Store {
            inner: Arc::new(Inner {
                root,
                runs,
                index: Some(index),
                read_only: true,
                node: None,
            }),
        };
        if fill {
            store.fill_index()?;
        }
        Ok(store)
    }

    /// Opens the store for `proctor reindex` and rebuilds its index from the run folders. An
    /// index SQLite cannot read (see [`StoreError::IndexDamaged`]), or whose integrity check
    /// fails, is first moved aside to `index.sqlite.damaged-TIMESTAMP` (with its `-wal` file)
    /// and replaced by a new one; the report says where it went.
    ///
    /// A read-only store fails with [`StoreError::ReadOnly`].
    pub fn rebuild_index(dir: impl AsRef<Path>) -> Result<(Store, ReindexReport)> {
        let dir = dir.as_ref();
        let mut moved = None;
        let store = match Store::open_with(dir, false) {
            Ok(store) if store.is_read_only() => {
                return Err(StoreError::ReadOnly {
                    root: store.root().to_path_buf(),
                    what: "rebuild its index",
                })
            }
            Ok(store) if store.index_is_sound().unwrap_or(false) => store,
            Ok(store) => {
                let root = store.root().to_path_buf();
                drop(store);
                moved = Some(move_index_aside(&root)?);
                Store::open_with(&root, false)?
            }
            Err(StoreError::IndexDamaged { .. }) => {
                moved = Some(move_index_aside(dir)?);
                Store::open_with(dir, false)?
            }
            Err(e) => return Err(e),
        };
        let mut report = store.reindex()?;
        report.moved_aside = moved;
        Ok((store, report))
    }

    /// Whether the store was opened read-only (it cannot be written): nothing will be written.
    pub fn is_read_only(&self) -> bool {
        self.inner.read_only
    }

    fn refuse_if_read_only(&self, what: &'static str) -> Result<()> {
        if self.inner.read_only {
            return Err(StoreError::ReadOnly {
                root: self.inner.root.clone(),
                what,
            });
        }
        Ok(())
    }

    /// Opens the store at `dir` (which must exist) from a compute node of a cluster that shares
    /// it over a network file system, for a worker that runs trials of a run submitted
    /// elsewhere. Such a store never opens `index.sqlite` (SQLite is unsafe over NFS: the index
    /// is brought up to date by the process that collects the run, see [`Store::reindex_run`])
    /// and never rewrites `run.json` (its submitter owns it: [`RunHandle::update_meta`] changes
    /// the handle's copy only). Trial folders are written as usual, each `trial.json` stamped
    /// with `executor` (where it ran).
    pub fn open_on_node(dir: impl AsRef<Path>, executor: Placement) -> Result<Store> {
        let given = dir.as_ref();
        let root = fs::canonicalize(given).map_err(io_err("resolve", given))?;
        let runs = root.join(RUNS_DIR);
        if !runs.is_dir() {
            return Err(io_err("open", &runs)(io::Error::new(
                io::ErrorKind::NotFound,
                "not a store (no runs/ folder)",
            )));
        }
        Ok(Store {
            inner: Arc::new(Inner {
                root,
                runs,
                index: None,
                read_only: false,
                node: Some(executor),
            }),
        })
    }

    /// Whether this store was opened on a compute node ([`Store::open_on_node`]).
    pub fn is_on_node(&self) -> bool {
        self.inner.node.is_some()
    }

    /// The index, or [`StoreError::NoIndex`] on a compute node.
    fn index(&self) -> Result<&Index> {
        self.inner
            .index
            .as_ref()
            .ok_or_else(|| StoreError::NoIndex {
                store: self.inner.root.clone(),
            })
    }

    /// Applies `write` to the index, when this process keeps one (not on a compute node).
    fn index_write(&self, write: impl FnOnce(&Index) -> Result<()>) -> Result<()> {
        match &self.inner.index {
            Some(index) => write(index),
            None => Ok(()),
        }
    }

    /// The store's root directory.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// The folder of a run (whether or not it exists).
    pub fn run_dir(&self, id: &RunId) -> PathBuf {
        self.inner.runs.join(id.as_str())
    }

    /// Starts a new run: picks a fresh id, creates its folder, takes the run's lock (held until
    /// the handle is dropped, see [`Store::resume_run`]), creates `trials/`, writes `run.json`
    /// atomically and adds it to the index.
    ///
    /// A `meta.started_at` of `None` is set to now.
    pub fn create_run(&self, meta: &RunMeta) -> Result<RunHandle> {
        self.refuse_if_read_only("create a run")?;
        let mut meta = meta.clone();
        if meta.started_at.is_none() {
            meta.started_at = Some(now_millis());
        }
        let (id, dir) = self.new_run_dir()?;
        let lock = RunLock::acquire(&dir, &id)?;
        let trials = dir.join(TRIALS_DIR);
        fs::create_dir(&trials).map_err(io_err("create directory", &trials))?;
        let handle = RunHandle {
            store: self.clone(),
            id,
            dir,
            meta: Mutex::new(meta),
            _lock: Some(lock),
        };
        handle.write_run_file(&handle.lock_meta())?;
        sync_dir(&self.inner.runs)?;
        Ok(handle)
    }

    /// Creates a folder for a new run id, retrying if another run took the id first.
    fn new_run_dir(&self) -> Result<(RunId, PathBuf)> {
        for _ in 0..64 {
            let id = RunId::generate();
            let dir = self.run_dir(&id);
            match fs::create_dir(&dir) {
                Ok(()) => return Ok((id, dir)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io_err("create directory", &dir)(e)),
            }
        }
        Err(StoreError::Io {
            op: "create a run directory in",
            path: self.inner.runs.clone(),
            source: io::Error::new(
                io::ErrorKind::AlreadyExists,
                "64 fresh run ids were all taken",
            ),
        })
    }

    /// Reopens an existing run without taking its lock, reading its `run.json`, and makes sure
    /// the index has its row: for reading its trials or writing beside them (`compare`,
    /// `rescore`). A process that runs the run's trials must use [`Store::resume_run`] instead.
    pub fn open_run(&self, id: &RunId) -> Result<RunHandle> {
        let record = self.read_run_record(id)?;
        if !self.inner.read_only {
            self.index_write(|ix| ix.upsert_run(&record))?;
        }
        Ok(RunHandle {
            store: self.clone(),
            id: id.clone(),
            dir: self.run_dir(id),
            meta: Mutex::new(record.meta),
            _lock: None,
        })
    }

    /// Reopens an existing run to run its unfinished trials (`run --resume`): takes the run's
    /// exclusive lock, held until the handle is dropped or the process ends, then reads its
    /// `run.json` and makes sure the index has its row.
    ///
    /// Fails with [`StoreError::RunLocked`], naming the holder's pid and host, while another
    /// process (or another handle of this one) has the run open with [`Store::create_run`] or
    /// `resume_run`: two processes running the same trials would overwrite each other's
    /// evidence.
    pub fn resume_run(&self, id: &RunId) -> Result<RunHandle> {
        self.refuse_if_read_only("resume a run")?;
        // Read first, so that a missing run is reported as such rather than as a lock failure.
        self.read_run_record(id)?;
        let dir = self.run_dir(id);
        let lock = RunLock::acquire(&dir, id)?;
        // Read again under the lock: the previous holder may have rewritten it meanwhile.
        let record = self.read_run_record(id)?;
        self.index_write(|ix| ix.upsert_run(&record))?;
        Ok(RunHandle {
            store: self.clone(),
            id: id.clone(),
            dir,
            meta: Mutex::new(record.meta),
            _lock: Some(lock),
        })
    }

    /// Who is writing the run now: the holder of its lock, or `None` when no live process has
    /// it open (it ended, or was killed). Probing never blocks the holder.
    pub fn run_holder(&self, id: &RunId) -> Result<Option<LockHolder>> {
        lock::holder(&self.run_dir(id))
    }

    /// The status to show for a run whose `run.json` says `recorded`: a run recorded as
    /// `running` that no live process holds was killed before it could record its end, and is
    /// [`RunStatus::Interrupted`] (`run --resume` finishes it). Every other status is as
    /// recorded, as is a run whose lock cannot be probed. Nothing is written.
    pub fn observed_status(&self, id: &RunId, recorded: RunStatus) -> RunStatus {
        match recorded {
            RunStatus::Running => match self.run_holder(id) {
                Ok(None) => RunStatus::Interrupted,
                Ok(Some(_)) | Err(_) => RunStatus::Running,
            },
            other => other,
        }
    }

    /// The run's `run.json`, under the run's id: its folder's name, whatever the file says.
    fn read_run_record(&self, id: &RunId) -> Result<RunRecord> {
        let mut record = self.read_run_file(id)?;
        record.id = id.clone();
        Ok(record)
    }

    /// The run's `run.json` as written (its `id` may differ from the folder's name when the
    /// folder was copied or renamed by hand).
    fn read_run_file(&self, id: &RunId) -> Result<RunRecord> {
        let path = self.run_dir(id).join(RUN_FILE);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(StoreError::RunNotFound {
                    id: id.clone(),
                    store: self.inner.root.clone(),
                })
            }
            Err(e) => return Err(io_err("read", &path)(e)),
        };
        serde_json::from_slice(&bytes).map_err(|source| StoreError::Json { path, source })
    }

    /// Every run in the store, read from the folders (not the index): folders named like a run
    /// id that hold a `run.json`, oldest first.
    pub fn run_ids(&self) -> Result<Vec<RunId>> {
        let runs = &self.inner.runs;
        let mut ids = Vec::new();
        let entries = match fs::read_dir(runs) {
            Ok(entries) => entries,
            // A read-only store that never held a run has no `runs/`.
            Err(e) if e.kind() == io::ErrorKind::NotFound && self.inner.read_only => {
                return Ok(ids)
            }
            Err(e) => return Err(io_err("read directory", runs)(e)),
        };
        for entry in entries {
            let entry = entry.map_err(io_err("read directory", runs))?;
            let Some(id) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<RunId>().ok())
            else {
                continue;
            };
            if entry.path().join(RUN_FILE).is_file() {
                ids.push(id);
            }
        }
        ids.sort();
        Ok(ids)
    }

    /// Turns what a user typed into a run id: the literal `latest`, a full id, or any prefix of
    /// exactly one run's id. Resolution reads the folders, so it works even when the index is
    /// behind.
    ///
    /// Errors: [`StoreError::NoRuns`] for an empty store, [`StoreError::NoRunMatches`] (with the
    /// latest few runs) and [`StoreError::AmbiguousRun`] (with every match).
    pub fn resolve_run(&self, prefix: &str) -> Result<RunId> {
        let prefix = prefix.trim();
        let ids = self.run_ids()?;
        if ids.is_empty() {
            return Err(StoreError::NoRuns {
                store: self.inner.root.clone(),
            });
        }
        if prefix == "latest" {
            return self.latest_of(ids);
        }
        let matches: Vec<RunId> = if prefix.is_empty() {
            Vec::new()
        } else {
            ids.iter()
                .filter(|id| id.as_str().starts_with(prefix))
                .cloned()
                .collect()
        };
        match matches.as_slice() {
            [only] => Ok(only.clone()),
            [] => Err(StoreError::NoRunMatches {
                prefix: prefix.to_string(),
                recent: ids.iter().rev().take(RECENT_IN_ERRORS).cloned().collect(),
            }),
            _ => Err(StoreError::AmbiguousRun {
                prefix: prefix.to_string(),
                matches,
            }),
        }
    }

    /// The newest run: the greatest id, and among runs started in that same second, the one
    /// whose `run.json` has the latest `started_at` (milliseconds).
    fn latest_of(&self, ids: Vec<RunId>) -> Result<RunId> {
        let Some(last) = ids.last().cloned() else {
            return Err(StoreError::NoRuns {
                store: self.inner.root.clone(),
            });
        };
        let second = &last.as_str()[..15];
        let same_second: Vec<RunId> = ids
            .into_iter()
            .filter(|id| id.as_str().starts_with(second))
            .collect();
        if same_second.len() == 1 {
            return Ok(last);
        }
        let mut best: Option<(Option<jiff::Timestamp>, RunId)> = None;
        for id in same_second {
            let started = self.read_run_record(&id)?.meta.started_at;
            let key = (started, id);
            if best.as_ref().is_none_or(|b| key > *b) {
                best = Some(key);
            }
        }
        Ok(best.map(|(_, id)| id).unwrap_or(last))
    }

    /// Every run the index knows, oldest first, with finished-trial counts by outcome.
    pub fn list_runs(&self) -> Result<Vec<RunListing>> {
        self.index()?.list_runs()
    }

    /// A run's metadata, from the index, or from its `run.json` when the index does not have it.
    pub fn run_meta(&self, id: &RunId) -> Result<RunMeta> {
        let indexed = match &self.inner.index {
            Some(index) => index.run_meta(id)?,
            None => None,
        };
        match indexed {
            Some(meta) => Ok(meta),
            None => Ok(self.read_run_record(id)?.meta),
        }
    }

    /// The runs whose `run.json` the last reindex could not read (they are not in the index).
    pub fn damaged_runs(&self) -> Result<Vec<DamagedRun>> {
        self.index()?.damaged_runs()
    }

    /// The trials of a run whose `trial.json` the last reindex found unreadable, by trial id.
    pub fn damaged_trials(&self, run: &RunId) -> Result<Vec<DamagedTrial>> {
        self.index()?.damaged_of(run)
    }

    /// Every finished trial of a run that the index holds, by task, variant and trial index.
    pub fn trials(&self, run: &RunId) -> Result<Vec<TrialSummary>> {
        self.index()?.trials(run)
    }

    /// The trials of a run that pass `filter`, `limit` of them after the first `offset` (by
    /// task, variant and trial index), and how many pass in all: only the page is read into
    /// memory, however many trials the run has.
    pub fn trials_page(
        &self,
        run: &RunId,
        filter: &TrialFilter,
        offset: u64,
        limit: u64,
    ) -> Result<TrialsPage> {
        self.index()?.trials_page(run, filter, offset, limit)
    }

    /// How many finished trials of a run each (task, variant, outcome) has, from the index.
    pub fn cell_counts(&self, run: &RunId) -> Result<Vec<CellCount>> {
        self.index()?.cell_counts(run)
    }

    /// Reads a finished trial's `trial.json` in full, with the runner's record as `R` (use
    /// `serde_json::Value` to read it untyped).
    pub fn read_trial<R: DeserializeOwned>(
        &self,
        run: &RunId,
        trial_id: &str,
    ) -> Result<TrialFile<R>> {
        validate_trial_id(trial_id)?;
        let path = self
            .run_dir(run)
            .join(TRIALS_DIR)
            .join(trial_id)
            .join(TRIAL_FILE);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(StoreError::TrialNotFound {
                    run: run.clone(),
                    trial: trial_id.to_string(),
                })
            }
            Err(e) => return Err(io_err("read", &path)(e)),
        };
        serde_json::from_slice(&bytes).map_err(|source| {
            match serde_json::from_slice::<TrialHead>(&bytes) {
                // Torn, empty or without a summary: the trial is damaged, not of another shape.
                Err(e) => StoreError::TrialDamaged {
                    run: run.clone(),
                    trial: trial_id.to_string(),
                    reason: damage(trial_id.to_string(), &bytes, &e).reason,
                    path,
                },
                Ok(_) => StoreError::Json { path, source },
            }
        })
    }

    /// Rebuilds `index.sqlite` from the run folders, which are the truth: every run with a
    /// readable `run.json`, and in it every trial whose `trial.json` parses.
    ///
    /// The folders are read first and the index is then replaced in one transaction, so other
    /// readers see the old index or the new one. Nothing damaged is dropped silently: a run
    /// folder whose `run.json` exists but does not parse is left out and named in
    /// [`ReindexReport::skipped_runs`], and a `trial.json` that exists but does not parse is
    /// named in [`ReindexReport::damaged_trials`]; the index keeps both, for `list` to report.
    /// An error reading a folder (permissions, I/O) still fails the whole reindex.
    pub fn reindex(&self) -> Result<ReindexReport> {
        self.refuse_if_read_only("rebuild its index")?;
        self.fill_index()
    }

    /// Reads every run folder and replaces the index's content with what they hold.
    fn fill_index(&self) -> Result<ReindexReport> {
        let mut all = Vec::new();
        let mut report = ReindexReport::default();
        for id in self.run_ids()? {
            let mut record = match self.read_run_file(&id) {
                Ok(record) => record,
                Err(e @ StoreError::Json { .. }) => {
                    report.skipped_runs.push(DamagedRun {
                        id,
                        reason: e.to_string(),
                    });
                    continue;
                }
                Err(e) => return Err(e),
            };
            // The folder's name is the run's id: a copied or renamed folder is its own run,
            // never merged into the one its run.json names.
            if record.id != id {
                report.mismatched_runs.push(MismatchedRun {
                    id: id.clone(),
                    recorded: record.id.clone(),
                });
                record.id = id.clone();
            }
            let (trials, damaged) = scan_trials(&self.run_dir(&id).join(TRIALS_DIR))?;
            report.runs += 1;
            report.trials += trials.len() as u64;
            report
                .damaged_trials
                .extend(damaged.iter().map(|d| (id.clone(), d.clone())));
            all.push(ScannedRun {
                record,
                trials,
                damaged,
            });
        }
        self.index()?.replace_all(&all, &report.skipped_runs)?;
        Ok(report)
    }

    /// Brings the index up to date with one run's folder: its `run.json` and every finished
    /// trial (what workers on compute nodes wrote without touching the index). Returns the
    /// number of finished trials. A torn `trial.json` is not indexed (the trial is unfinished);
    /// a full `reindex` names it.
    pub fn reindex_run(&self, id: &RunId) -> Result<u64> {
        let index = self.index()?;
        let record = self.read_run_record(id)?;
        let (trials, _damaged) = scan_trials(&self.run_dir(id).join(TRIALS_DIR))?;
        index.upsert_run(&record)?;
        for t in &trials {
            index.upsert_trial(id, t)?;
        }
        Ok(trials.len() as u64)
    }

    /// Runs SQLite's integrity check on the index; `true` when it is sound.
    pub fn index_is_sound(&self) -> Result<bool> {
        self.index()?.integrity_ok()
    }
}

/// A run being written: its folder, its trials, its `run.json`.
///
/// Share it between worker threads by reference (or in an `Arc`): every method takes `&self`.
/// A handle from [`Store::create_run`] or [`Store::resume_run`] holds the run's lock until it is
/// dropped.
#[derive(Debug)]
pub struct RunHandle {
    store: Store,
    id: RunId,
    dir: PathBuf,
    meta: Mutex<RunMeta>,
    /// The run's lock, when this handle runs the run's trials; released on drop.
    _lock: Option<RunLock>,
}

impl RunHandle {
    /// The run's id.
    pub fn id(&self) -> &RunId {
        &self.id
    }

    /// The run's folder (`STORE/runs/RUN_ID`), where `results.json` and `results.md` go.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The store this run belongs to.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// A copy of the run's current metadata.
    pub fn meta(&self) -> RunMeta {
        self.lock_meta().clone()
    }

    fn lock_meta(&self) -> MutexGuard<'_, RunMeta> {
        self.meta.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The folder of one trial, created if needed; the runner captures the end state into it
    /// before calling [`RunHandle::finish_trial`].
    pub fn trial_dir(&self, trial_id: &str) -> Result<PathBuf> {
        validate_trial_id(trial_id)?;
        let dir = self.dir.join(TRIALS_DIR).join(trial_id);
        fs::create_dir_all(&dir).map_err(io_err("create directory", &dir))?;
        Ok(dir)
    }

    /// The folder of a trial about to run, emptied of whatever an earlier attempt that never
    /// finished left in it (evidence that is empty is not written, so a stale file would
    /// otherwise pass for this attempt's). Refuses a finished trial's folder.
    pub fn start_trial_dir(&self, trial_id: &str) -> Result<PathBuf> {
        validate_trial_id(trial_id)?;
        let dir = self.dir.join(TRIALS_DIR).join(trial_id);
        // Most trials start in a folder of their own that is new: made at once, nothing in it.
        // One that exists (an earlier attempt's) or cannot be made so goes the long way.
        if fs::create_dir(&dir).is_ok() {
            return Ok(dir);
        }
        if self.is_finished(&dir) {
            return Err(StoreError::Io {
                op: "start",
                path: dir,
                source: io::Error::new(io::ErrorKind::AlreadyExists, "the trial is finished"),
            });
        }
        match proctor_fs::beneath::remove_tree(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err("clear", &dir)(e)),
        }
        fs::create_dir_all(&dir).map_err(io_err("create directory", &dir))?;
        Ok(dir)
    }

    /// Removes the folder of a trial that is not finished (what a trial cut short left in it),
    /// giving its space back; a finished trial's folder is refused and left alone, and a
    /// missing folder is no error.
    pub fn discard_unfinished_trial(&self, trial_id: &str) -> Result<()> {
        validate_trial_id(trial_id)?;
        let dir = self.dir.join(TRIALS_DIR).join(trial_id);
        if self.is_finished(&dir) {
            return Err(StoreError::Io {
                op: "discard",
                path: dir,
                source: io::Error::new(io::ErrorKind::AlreadyExists, "the trial is finished"),
            });
        }
        match proctor_fs::beneath::remove_tree(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err("remove", &dir)(e)),
        }
    }

    /// Deletes every temporary file an atomic write left anywhere in the run's folder (see
    /// [`crate::is_temp_name`]); returns how many. Only for the process that holds the run (a
    /// handle from [`Store::create_run`] or [`Store::resume_run`]): another writer's temporary
    /// files would be in use.
    pub fn remove_temporaries(&self) -> Result<usize> {
        if self._lock.is_none() {
            return Ok(0);
        }
        let mut removed = 0;
        let mut dirs = vec![self.dir.clone()];
        while let Some(dir) = dirs.pop() {
            let entries = match fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_err("read directory", &dir)(e)),
            };
            for entry in entries {
                let entry = entry.map_err(io_err("read directory", &dir))?;
                let path = entry.path();
                let temp = entry.file_name().to_str().is_some_and(is_temp_name);
                match entry.file_type() {
                    Ok(t) if t.is_dir() && !temp => dirs.push(path),
                    Ok(t) if t.is_dir() => {
                        proctor_fs::beneath::remove_tree(&path).map_err(io_err("remove", &path))?;
                        removed += 1;
                    }
                    Ok(_) if temp => {
                        fs::remove_file(&path).map_err(io_err("remove", &path))?;
                        removed += 1;
                    }
                    Ok(_) => {}
                    Err(e) => return Err(io_err("read directory", &dir)(e)),
                }
            }
        }
        Ok(removed)
    }

    /// Whether the trial folder `dir` holds a `trial.json` that parses.
    fn is_finished(&self, dir: &Path) -> bool {
        fs::read(dir.join(TRIAL_FILE))
            .ok()
            .is_some_and(|b| serde_json::from_slice::<TrialHead>(&b).is_ok())
    }

    /// Marks a trial finished: makes the files already in its folder durable (one `syncfs` of
    /// their file system, instead of an fsync per file), then writes `trial.json` (the summary
    /// and the runner's full record) atomically, as the trial's last file, and upserts its row in
    /// the index. [`RunHandle::finish_trials`] does the same for several trials with one `syncfs`.
    ///
    /// Call it only after every other file of the trial is written: a trial is finished exactly
    /// when its `trial.json` exists and parses. Writing the same trial again replaces it.
    ///
    /// `trial.json` itself is renamed into place without waiting for the disk. A killed process
    /// loses nothing (the kernel has the file); a power loss right after this returns may lose
    /// `trial.json` or leave it unparsable, and then the trial counts as unfinished and
    /// `run --resume` runs it again ([`RunHandle::start_trial_dir`] clears what it left). It
    /// can never leave a `trial.json` naming evidence that is not on disk.
    ///
    /// Refused, with nothing written: an `ungradeable` outcome without a reason (no reason, no
    /// record), and any NaN or Infinity in the summary or the record.
    pub fn finish_trial<R: Serialize + ?Sized>(
        &self,
        summary: &TrialSummary,
        record: &R,
    ) -> Result<()> {
        self.finish_trials(&[(summary, record)])
    }

    /// [`RunHandle::finish_trial`] for several trials at once, with one `syncfs` for all their
    /// evidence: a group commit. Every trial is checked before anything is written, so a refused
    /// one (see `finish_trial`) leaves all of them unfinished.
    pub fn finish_trials<R: Serialize + ?Sized>(
        &self,
        trials: &[(&TrialSummary, &R)],
    ) -> Result<()> {
        let mut files = Vec::with_capacity(trials.len());
        for (summary, record) in trials {
            if summary.outcome.is_ungradeable()
                && summary
                    .reason
                    .as_deref()
                    .is_none_or(|r| r.trim().is_empty())
            {
                return Err(StoreError::MissingReason {
                    trial: summary.trial_id.clone(),
                });
            }
            let dir = self.trial_dir(&summary.trial_id)?;
            let file = TrialFileRef {
                schema_version: FILE_SCHEMA_VERSION,
                format_version: proctor_records::TRIAL_FORMAT,
                summary,
                record,
                executor: self.store.inner.node.as_ref(),
            };
            let path = dir.join(TRIAL_FILE);
            let bytes = to_json_bytes(&path, &file)?;
            files.push((path, bytes));
        }
        let Some((first, _)) = files.first() else {
            return Ok(());
        };
        sync_filesystem(first.parent().unwrap_or(&self.dir))?;
        // Every trial whose trial.json is written is indexed, in one transaction, even when a
        // later one fails to write.
        let mut written = Vec::with_capacity(files.len());
        let mut failed = None;
        for ((path, bytes), (summary, _)) in files.iter().zip(trials) {
            match atomic_write_unsynced(path, bytes) {
                Ok(()) => written.push(*summary),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        self.store
            .index_write(|ix| ix.upsert_trials(&self.id, &written))?;
        failed.map_or(Ok(()), Err)
    }

    /// The ids of the trials that are finished on disk (`trial.json` present and parsing),
    /// whatever the index says: what `run --resume` skips.
    pub fn finished_trials(&self) -> Result<BTreeSet<String>> {
        let mut ids = BTreeSet::new();
        each_trial(&self.dir.join(TRIALS_DIR), |id, _| {
            ids.insert(id);
        })?;
        Ok(ids)
    }

    /// Calls `f` with every finished trial's file, reading each `trial.json` once, in no
    /// particular order, one at a time (so memory does not grow with the run), and returns the
    /// trials whose `trial.json` exists but is empty or does not parse: they are not finished
    /// (as in [`RunHandle::finished_trials`]), and the caller reports them. A trial that is
    /// finished but whose record is not an `R` is an error.
    pub fn for_each_trial<R: DeserializeOwned, E: From<StoreError>>(
        &self,
        f: impl FnMut(TrialFile<R>) -> std::result::Result<(), E>,
    ) -> std::result::Result<Vec<DamagedTrial>, E> {
        self.for_each_trial_but(|_| false, f)
    }

    /// [`RunHandle::for_each_trial`], without reading the trials whose id `skip` accepts.
    pub fn for_each_trial_but<R: DeserializeOwned, E: From<StoreError>>(
        &self,
        skip: impl Fn(&str) -> bool,
        mut f: impl FnMut(TrialFile<R>) -> std::result::Result<(), E>,
    ) -> std::result::Result<Vec<DamagedTrial>, E> {
        let mut damaged = Vec::new();
        each_trial_file(&self.dir.join(TRIALS_DIR), &skip, |id, path, bytes| {
            match serde_json::from_slice::<TrialFile<R>>(&bytes) {
                Ok(file) => f(file),
                Err(source) => match serde_json::from_slice::<TrialHead>(&bytes) {
                    // Not finished (torn, empty or without a summary): reported, not read.
                    Err(e) => {
                        damaged.push(damage(id, &bytes, &e));
                        Ok(())
                    }
                    Ok(_) => Err(StoreError::Json { path, source }.into()),
                },
            }
        })?;
        damaged.sort_by(|a, b| a.trial_id.cmp(&b.trial_id));
        Ok(damaged)
    }

    /// Sets the run's status and rewrites `run.json` atomically (and the index row).
    /// `finished` and `interrupted` stamp `finished_at` with now; `running` (a resume) clears it.
    /// Any earlier [`RunMeta::stop_reason`] is cleared.
    pub fn set_status(&self, status: RunStatus) -> Result<()> {
        self.update_meta(|m| {
            m.status = status;
            m.stop_reason = None;
            m.finished_at = match status {
                RunStatus::Running => None,
                RunStatus::Finished | RunStatus::Interrupted => Some(now_millis()),
            };
        })
    }

    /// Marks the run `interrupted` because proctor had to stop it, saying why (e.g. the store's
    /// file system is full), and rewrites `run.json` like [`RunHandle::set_status`].
    pub fn set_stopped(&self, reason: &str) -> Result<()> {
        self.update_meta(|m| {
            m.status = RunStatus::Interrupted;
            m.stop_reason = Some(reason.to_string());
            m.finished_at = Some(now_millis());
        })
    }

    /// Changes the run's metadata (e.g. `extra`) and rewrites `run.json` atomically (and the
    /// index row). Concurrent updates from threads of this process are applied one at a time.
    /// On a compute node ([`Store::open_on_node`]) only this handle's copy changes.
    pub fn update_meta(&self, change: impl FnOnce(&mut RunMeta)) -> Result<()> {
        let mut meta = self.lock_meta();
        let mut next = meta.clone();
        change(&mut next);
        self.write_run_file(&next)?;
        *meta = next;
        Ok(())
    }

    fn write_run_file(&self, meta: &RunMeta) -> Result<()> {
        let record = RunRecord {
            schema_version: FILE_SCHEMA_VERSION,
            format_version: proctor_records::RUN_FORMAT,
            id: self.id.clone(),
            meta: meta.clone(),
        };
        if self.store.is_on_node() {
            // The submitter owns run.json; a worker's changes stay in its handle.
            return Ok(());
        }
        atomic_write_json(self.dir.join(RUN_FILE), &record)?;
        self.store.index_write(|ix| ix.upsert_run(&record))
    }
}

/// Reads the summaries of every finished trial under a run's `trials/` folder, in folder-name
/// order, and the trials whose `trial.json` exists but does not parse; a trial folder without a
/// `trial.json` is unfinished and skipped. The folder's name is the trial id.
fn scan_trials(trials: &Path) -> Result<(Vec<TrialSummary>, Vec<DamagedTrial>)> {
    let mut out = Vec::new();
    let mut damaged = Vec::new();
    each_trial_file(trials, &|_| false, |name, _, bytes| {
        match serde_json::from_slice::<TrialHead>(&bytes) {
            Ok(head) => out.push(head.into_summary(name)),
            Err(e) => damaged.push(damage(name, &bytes, &e)),
        }
        Ok::<(), StoreError>(())
    })?;
    out.sort_by(|a, b| a.trial_id.cmp(&b.trial_id));
    damaged.sort_by(|a, b| a.trial_id.cmp(&b.trial_id));
    Ok((out, damaged))
}

/// What is wrong with a `trial.json` that does not parse as a finished trial.
fn damage(trial_id: String, bytes: &[u8], e: &serde_json::Error) -> DamagedTrial {
    let reason = if bytes.iter().all(u8::is_ascii_whitespace) {
        format!("{TRIAL_FILE} is empty ({} bytes)", bytes.len())
    } else {
        format!("{TRIAL_FILE} does not parse ({} bytes): {e}", bytes.len())
    };
    DamagedTrial { trial_id, reason }
}

/// Whether `path` is a directory that exists.
fn is_existing_dir(path: &Path) -> bool {
    path.is_dir()
}

/// Whether this process may create files in the directory `dir` (`access(2)` with `W_OK`: false
/// on a read-only file system, even for root).
fn is_writable(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: access(2) on a NUL-terminated path that lives for the call.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// Moves the index file (and its `-wal` file) of the store at `root` aside, to
/// `index.sqlite.damaged-TIMESTAMP`, and deletes its `-shm` file (SQLite's shared-memory
/// index of the WAL, rebuilt with the new file); returns where the index went.
fn move_index_aside(root: &Path) -> Result<PathBuf> {
    let index = root.join(INDEX_FILE);
    let stamp = utc_now().replace([':', '.'], "-");
    let aside = root.join(format!("{INDEX_FILE}.damaged-{stamp}"));
    fs::rename(&index, &aside).map_err(io_err("move aside", &index))?;
    let wal = root.join(format!("{INDEX_FILE}-wal"));
    if wal.exists() {
        let to = root.join(format!("{INDEX_FILE}.damaged-{stamp}-wal"));
        fs::rename(&wal, &to).map_err(io_err("move aside", &wal))?;
    }
    match fs::remove_file(root.join(format!("{INDEX_FILE}-shm"))) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err("remove", root.join(format!("{INDEX_FILE}-shm")))(e)),
    }
    Ok(aside)
}

/// Calls `found(id, summary)` for every finished trial in the `trials/` folder (one whose
/// `trial.json` exists and parses), in no particular order, holding one file at a time.
fn each_trial(trials: &Path, mut found: impl FnMut(String, TrialSummary)) -> Result<()> {
    each_trial_file(trials, &|_| false, |name, _, bytes| {
        if let Ok(head) = serde_json::from_slice::<TrialHead>(&bytes) {
            found(name.clone(), head.into_summary(name));
        }
        Ok::<(), StoreError>(())
    })
}

/// Calls `found(id, path, bytes)` with the `trial.json` of every trial folder that has one, in
/// no particular order, reading one file at a time; `found` decides what parses.
fn each_trial_file<E: From<StoreError>>(
    trials: &Path,
    skip: &dyn Fn(&str) -> bool,
    mut found: impl FnMut(String, PathBuf, Vec<u8>) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    let entries = match fs::read_dir(trials) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err("read directory", trials)(e).into()),
    };
    for entry in entries {
        let entry = entry.map_err(io_err("read directory", trials))?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if is_temp_name(&name) || validate_trial_id(&name).is_err() || skip(&name) {
            continue;
        }
        let path = entry.path().join(TRIAL_FILE);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                continue
            }
            Err(e) => return Err(io_err("read", &path)(e).into()),
        };
        found(name, path, bytes)?;
    }
    Ok(())
}

/// Flushes every file of the file system holding `dir` to disk (`syncfs(2)`).
pub(crate) fn sync_filesystem(dir: &Path) -> Result<()> {
    use std::os::fd::AsRawFd;
    let f = fs::File::open(dir).map_err(io_err("open", dir))?;
    // SAFETY: syncfs(2) on a descriptor owned by `f` for the duration of the call.
    if unsafe { libc::syncfs(f.as_raw_fd()) } != 0 {
        return Err(io_err("sync", dir)(io::Error::last_os_error()));
    }
    Ok(())
}
