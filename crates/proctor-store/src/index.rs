//! `index.sqlite`: a cache of every run and finished trial, for queries over the whole corpus.
//!
//! The run folders are the truth; this file can be deleted at any time and rebuilt by
//! [`crate::Store::reindex`]. One connection per [`crate::Store`], behind a mutex, serves every
//! thread of the process; WAL mode and a generous busy timeout let several proctor processes
//! share one store.
//!
//! An index that SQLite cannot read (not a database, corrupt pages, missing tables) is reported
//! as [`StoreError::IndexDamaged`], never used. A store that cannot be written opens its index
//! read-only ([`Index::open_read_only`]), or, when that file is missing or unusable, builds the
//! index in memory ([`Index::in_memory`]).

use crate::error::{Result, StoreError};
use crate::model::{DamagedRun, DamagedTrial, RunListing, RunMeta, RunRecord, TrialSummary};
use crate::RunId;
use proctor_records::time::format_millis;
use proctor_records::{Limit, OutcomeKind, OutcomeTally};
use rusqlite::{params, Connection, OpenFlags, OptionalExtension, TransactionBehavior};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// The schema version this crate writes, kept in `PRAGMA user_version`.
///
/// Version 3 added `trials.limit_reached` and the indexes that list a run's trials a page at a
/// time (by outcome, in table order) and count them per cell; an index of an older version is rebuilt from the
/// folders when a writable store is opened (read-only, it is built in memory instead).
pub const INDEX_SCHEMA_VERSION: i64 = 3;

/// How long a writer waits for another process's lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(60);

const SCHEMA: &str = "
CREATE TABLE runs (
    id             TEXT PRIMARY KEY NOT NULL,
    suite_id       TEXT NOT NULL,
    suite_hash     TEXT NOT NULL,
    status         TEXT NOT NULL,
    started_at     TEXT NOT NULL,
    finished_at    TEXT,
    planned_trials INTEGER NOT NULL,
    record_json    TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE trials (
    run_id        TEXT NOT NULL,
    trial_id      TEXT NOT NULL,
    task          TEXT NOT NULL,
    variant       TEXT NOT NULL,
    trial_index   INTEGER NOT NULL,
    outcome       TEXT NOT NULL,
    reason        TEXT,
    wall_seconds  REAL NOT NULL,
    calls         INTEGER,
    wrong_turns   INTEGER,
    input_tokens  INTEGER,
    output_tokens INTEGER,
    cost_usd      REAL,
    limit_reached TEXT,
    PRIMARY KEY (run_id, trial_id)
) WITHOUT ROWID;
CREATE INDEX trials_by_outcome ON trials (run_id, outcome, task, variant, trial_index, trial_id);
CREATE INDEX trials_by_cell ON trials (run_id, task, variant, trial_index, trial_id);
CREATE INDEX trials_by_cell_outcome ON trials (run_id, task, variant, outcome);
CREATE TABLE damaged (
    run_id   TEXT NOT NULL,
    trial_id TEXT NOT NULL,
    reason   TEXT NOT NULL,
    PRIMARY KEY (run_id, trial_id)
) WITHOUT ROWID;
";

/// The columns of `trials` that make a [`TrialSummary`], in the order [`summary_row`] reads.
pub(crate) const SUMMARY_COLUMNS: &str = "trial_id, task, variant, trial_index, outcome, reason, \
     wall_seconds, calls, wrong_turns, input_tokens, output_tokens, cost_usd, limit_reached";

/// The order trials are listed in: by task, variant and trial index.
pub(crate) const TRIAL_ORDER: &str = "task, variant, trial_index, trial_id";

/// A row of [`SUMMARY_COLUMNS`] as a summary.
pub(crate) fn summary_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<TrialSummary> {
    Ok(TrialSummary {
        trial_id: r.get(0)?,
        task: r.get(1)?,
        variant: r.get(2)?,
        trial_index: r.get(3)?,
        outcome: outcome_at(r, 4)?,
        reason: r.get(5)?,
        wall_seconds: r.get(6)?,
        calls: r.get(7)?,
        wrong_turns: r.get(8)?,
        input_tokens: r.get(9)?,
        output_tokens: r.get(10)?,
        cost_usd: r.get(11)?,
        limit_reached: limit_at(r, 12)?,
        flags: Vec::new(),
    })
}

/// The outcome in column `i` of a row: its label, read back as the outcome it names. A label
/// that is no outcome (an index written by something else) is a conversion error, never a
/// guess.
pub(crate) fn outcome_at(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<OutcomeKind> {
    let label: String = r.get(i)?;
    label
        .parse()
        .map_err(|e: proctor_records::ParseOutcomeError| {
            rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e))
        })
}

/// The limit in column `i` of a row (NULL: none), read back as the limit it names; a word that
/// names no limit is a conversion error.
fn limit_at(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Option<Limit>> {
    let word: Option<String> = r.get(i)?;
    word.map(|w| w.parse())
        .transpose()
        .map_err(|e: proctor_records::limit::ParseLimitError| {
            rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e))
        })
}

/// The `trial_id` of a row of `damaged` that is about the run's own `run.json`.
const RUN_ITSELF: &str = "";

/// A query that fails unless every table of the schema is there.
const PROBE: &str =
    "SELECT (SELECT COUNT(*) FROM runs WHERE 0) + (SELECT COUNT(*) FROM trials WHERE 0) \
                     + (SELECT COUNT(*) FROM damaged WHERE 0)";

const DROP: &str = "
DROP TABLE IF EXISTS damaged;
DROP INDEX IF EXISTS trials_by_cell_outcome;
DROP INDEX IF EXISTS trials_by_cell;
DROP INDEX IF EXISTS trials_by_outcome;
DROP TABLE IF EXISTS trials;
DROP TABLE IF EXISTS runs;
";

const UPSERT_RUN: &str = "
INSERT INTO runs (id, suite_id, suite_hash, status, started_at, finished_at, planned_trials, record_json)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
ON CONFLICT (id) DO UPDATE SET
    suite_id = excluded.suite_id, suite_hash = excluded.suite_hash, status = excluded.status,
    started_at = excluded.started_at, finished_at = excluded.finished_at,
    planned_trials = excluded.planned_trials, record_json = excluded.record_json";

const UPSERT_TRIAL: &str = "
INSERT INTO trials (run_id, trial_id, task, variant, trial_index, outcome, reason, wall_seconds,
                    calls, wrong_turns, input_tokens, output_tokens, cost_usd, limit_reached)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
ON CONFLICT (run_id, trial_id) DO UPDATE SET
    task = excluded.task, variant = excluded.variant, trial_index = excluded.trial_index,
    outcome = excluded.outcome, reason = excluded.reason, wall_seconds = excluded.wall_seconds,
    calls = excluded.calls, wrong_turns = excluded.wrong_turns,
    input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens,
    cost_usd = excluded.cost_usd, limit_reached = excluded.limit_reached";

/// The SQLite index of one store.
#[derive(Debug)]
pub(crate) struct Index {
    path: PathBuf,
    conn: Mutex<Connection>,
}

/// What [`Index::open`] found.
pub(crate) enum Opened {
    /// The schema was there already.
    Existing,
    /// The schema was (re)created empty: the caller should reindex from the folders.
    Created,
}

impl Index {
    /// Opens (creating if needed) the index at `path`, in WAL mode, with the current schema.
    pub(crate) fn open(path: &Path) -> Result<(Index, Opened)> {
        let e = sql_err(path);
        let conn = Connection::open(path).map_err(&e)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(&e)?;
        // Changing the journal mode needs a moment with no other writer; the busy timeout covers
        // the race of two processes opening a new store together.
        // Some file systems cannot do WAL; SQLite then keeps its rollback journal, and the index
        // still works with coarser locking, so the mode it answers with is not checked.
        let _mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(&e)?;
        // The index is a cache of files that are themselves fsynced: losing its last commits to a
        // power cut costs a `reindex`, never evidence.
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(&e)?;
        // A small page cache (SQLite's default is 2 MiB): a long run appends rows, and a large
        // cache would keep them all in memory; the index's reads are short range scans.
        conn.pragma_update(None, "cache_size", -256).map_err(&e)?;
        let mut index = Index {
            path: path.to_path_buf(),
            conn: Mutex::new(conn),
        };
        let opened = index.ensure_schema()?;
        Ok((index, opened))
    }

    /// Opens the index at `path` without ever writing to it or beside it (no journal, no WAL
    /// files): for a store on a read-only file system, or one this user may not write. Fails
    /// unless the file holds an index of the current schema.
    pub(crate) fn open_read_only(path: &Path) -> Result<Index> {
        let e = sql_err(path);
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        // `mode=ro` reads a WAL index whose `-shm` file exists or can be made; on a read-only
        // file system it cannot be made, and `immutable=1` (nobody can change the file there)
        // reads it without one.
        let mut last = None;
        for query in ["mode=ro", "immutable=1"] {
            let uri = format!("{}?{query}", file_uri(path));
            let conn = match Connection::open_with_flags(&uri, flags) {
                Ok(c) => c,
                Err(err) => {
                    last = Some(e(err));
                    continue;
                }
            };
            match check_read_only(&conn, path) {
                Ok(()) => {
                    return Ok(Index {
                        path: path.to_path_buf(),
                        conn: Mutex::new(conn),
                    })
                }
                Err(err) => last = Some(err),
            }
        }
        Err(last.unwrap_or_else(|| StoreError::IndexDamaged {
            path: path.to_path_buf(),
            source: rusqlite::Error::InvalidPath(path.to_path_buf()),
        }))
    }

    /// An empty index of the current schema that lives in memory only, named after `path` in
    /// errors: what a read-only store uses when its `index.sqlite` is missing or unusable (the
    /// store fills it from the folders).
    pub(crate) fn in_memory(path: &Path) -> Result<Index> {
        let e = sql_err(path);
        let conn = Connection::open_in_memory().map_err(&e)?;
        let mut index = Index {
            path: path.to_path_buf(),
            conn: Mutex::new(conn),
        };
        index.ensure_schema()?;
        Ok(index)
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves SQLite itself consistent (an open transaction is
        // rolled back when its guard drops), so a poisoned mutex is still usable.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn err(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        sql_err(&self.path)
    }

    fn ensure_schema(&mut self) -> Result<Opened> {
        let path = self.path.clone();
        let e = sql_err(&path);
        let conn = self.conn.get_mut().unwrap_or_else(|p| p.into_inner());
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&e)?;
        let found: i64 = tx
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(&e)?;
        let opened = if found == INDEX_SCHEMA_VERSION {
            // The version says so, but the tables must be there too.
            tx.query_row(PROBE, [], |_| Ok(()))
                .map_err(|source| StoreError::IndexDamaged {
                    path: path.clone(),
                    source,
                })?;
            Opened::Existing
        } else if found > INDEX_SCHEMA_VERSION {
            return Err(StoreError::IndexTooNew {
                path: path.clone(),
                found,
                supported: INDEX_SCHEMA_VERSION,
            });
        } else {
            // Empty, or an older cache: rebuild it.
            tx.execute_batch(DROP).map_err(&e)?;
            tx.execute_batch(SCHEMA).map_err(&e)?;
            tx.pragma_update(None, "user_version", INDEX_SCHEMA_VERSION)
                .map_err(&e)?;
            Opened::Created
        };
        tx.commit().map_err(&e)?;
        Ok(opened)
    }

    /// Inserts or replaces one run's row.
    pub(crate) fn upsert_run(&self, record: &RunRecord) -> Result<()> {
        let conn = self.lock();
        upsert_run(&conn, record).map_err(self.err())
    }

    /// Inserts or replaces one finished trial's row.
    pub(crate) fn upsert_trial(&self, run: &RunId, t: &TrialSummary) -> Result<()> {
        let conn = self.lock();
        upsert_trial(&conn, run, t).map_err(self.err())
    }

    /// [`Index::upsert_trial`] of several trials of one run, in one transaction (one write of
    /// the log for the batch, not one per trial).
    pub(crate) fn upsert_trials(&self, run: &RunId, trials: &[&TrialSummary]) -> Result<()> {
        let mut conn = self.lock();
        let e = self.err();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&e)?;
        for t in trials {
            upsert_trial(&tx, run, t).map_err(&e)?;
        }
        tx.commit().map_err(&e)
    }

    /// The damaged trials of every run, by run id (from the last reindex).
    fn damaged_trials(conn: &Connection) -> rusqlite::Result<BTreeMap<String, Vec<DamagedTrial>>> {
        let mut out: BTreeMap<String, Vec<DamagedTrial>> = BTreeMap::new();
        let mut stmt = conn.prepare_cached(
            "SELECT run_id, trial_id, reason FROM damaged WHERE trial_id != ''
             ORDER BY run_id, trial_id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                DamagedTrial {
                    trial_id: r.get(1)?,
                    reason: r.get(2)?,
                },
            ))
        })?;
        for row in rows {
            let (run, trial) = row?;
            out.entry(run).or_default().push(trial);
        }
        Ok(out)
    }

    /// The damaged trials of one run (from the last reindex), by trial id.
    pub(crate) fn damaged_of(&self, run: &RunId) -> Result<Vec<DamagedTrial>> {
        let conn = self.lock();
        let e = self.err();
        let mut stmt = conn
            .prepare_cached(
                "SELECT trial_id, reason FROM damaged WHERE run_id = ?1 AND trial_id != ''
                 ORDER BY trial_id",
            )
            .map_err(&e)?;
        let rows = stmt
            .query_map([run.as_str()], |r| {
                Ok(DamagedTrial {
                    trial_id: r.get(0)?,
                    reason: r.get(1)?,
                })
            })
            .map_err(&e)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(&e)
    }

    /// The runs whose `run.json` the last reindex could not read, oldest first.
    pub(crate) fn damaged_runs(&self) -> Result<Vec<DamagedRun>> {
        let conn = self.lock();
        let e = self.err();
        let mut stmt = conn
            .prepare_cached(
                "SELECT run_id, reason FROM damaged WHERE trial_id = '' ORDER BY run_id",
            )
            .map_err(&e)?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .map_err(&e)?;
        let mut out = Vec::new();
        for row in rows {
            let (id, reason) = row.map_err(&e)?;
            // A row whose id is no run id was not written by this crate: ignored.
            if let Ok(id) = id.parse::<RunId>() {
                out.push(DamagedRun { id, reason });
            }
        }
        Ok(out)
    }

    /// Every run with its outcome counts, oldest first.
    pub(crate) fn list_runs(&self) -> Result<Vec<RunListing>> {
        let conn = self.lock();
        let e = self.err();
        let mut counts: BTreeMap<String, OutcomeTally> = BTreeMap::new();
        {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT run_id, outcome, COUNT(*) FROM trials GROUP BY run_id, outcome",
                )
                .map_err(&e)?;
            let rows = stmt
                .query_map([], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        outcome_at(r, 1)?,
                        r.get::<_, u64>(2)?,
                    ))
                })
                .map_err(&e)?;
            for row in rows {
                let (run, outcome, n) = row.map_err(&e)?;
                counts.entry(run).or_default().add(outcome, n);
            }
        }
        let mut damaged = Index::damaged_trials(&conn).map_err(&e)?;
        let mut stmt = conn
            .prepare_cached("SELECT id, record_json FROM runs ORDER BY id")
            .map_err(&e)?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .map_err(&e)?;
        let mut out = Vec::new();
        for row in rows {
            let (id, json) = row.map_err(&e)?;
            let record = self.parse_record(&id, &json)?;
            let outcomes = counts.remove(&id).unwrap_or_default();
            out.push(RunListing {
                id: record.id,
                meta: record.meta,
                trials_finished: outcomes.total(),
                outcomes,
                damaged: damaged.remove(&id).unwrap_or_default(),
            });
        }
        Ok(out)
    }

    /// One run's metadata, if the index has it.
    pub(crate) fn run_meta(&self, id: &RunId) -> Result<Option<RunMeta>> {
        let conn = self.lock();
        let e = self.err();
        let json: Option<String> = conn
            .prepare_cached("SELECT record_json FROM runs WHERE id = ?1")
            .and_then(|mut s| s.query_row([id.as_str()], |r| r.get(0)).optional())
            .map_err(&e)?;
        json.map(|j| self.parse_record(id.as_str(), &j).map(|r| r.meta))
            .transpose()
    }

    /// Every finished trial of a run, by task, variant and trial index.
    pub(crate) fn trials(&self, run: &RunId) -> Result<Vec<TrialSummary>> {
        let conn = self.lock();
        let e = self.err();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {SUMMARY_COLUMNS} FROM trials WHERE run_id = ?1 ORDER BY {TRIAL_ORDER}"
            ))
            .map_err(&e)?;
        let rows = stmt.query_map([run.as_str()], summary_row).map_err(&e)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(&e)
    }

    /// Replaces the whole content with the given runs (each with its finished and its damaged
    /// trials) and damaged runs, in one transaction: readers see the old index or the new one.
    pub(crate) fn replace_all(
        &self,
        runs: &[ScannedRun],
        damaged_runs: &[DamagedRun],
    ) -> Result<()> {
        let mut conn = self.lock();
        let e = sql_err(&self.path);
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&e)?;
        tx.execute_batch("DELETE FROM trials; DELETE FROM runs; DELETE FROM damaged;")
            .map_err(&e)?;
        for run in runs {
            upsert_run(&tx, &run.record).map_err(&e)?;
            for t in &run.trials {
                upsert_trial(&tx, &run.record.id, t).map_err(&e)?;
            }
            for d in &run.damaged {
                insert_damaged(&tx, run.record.id.as_str(), &d.trial_id, &d.reason).map_err(&e)?;
            }
        }
        for d in damaged_runs {
            insert_damaged(&tx, d.id.as_str(), RUN_ITSELF, &d.reason).map_err(&e)?;
        }
        tx.commit().map_err(&e)
    }

    /// Runs SQLite's own consistency check; `Ok(true)` when it answers `ok`.
    pub(crate) fn integrity_ok(&self) -> Result<bool> {
        let conn = self.lock();
        let answer: String = conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .map_err(self.err())?;
        Ok(answer == "ok")
    }

    fn parse_record(&self, id: &str, json: &str) -> Result<RunRecord> {
        serde_json::from_str(json).map_err(|source| StoreError::Json {
            path: self.path.join(format!("runs[{id}]")),
            source,
        })
    }
}

/// One run as read from its folder for [`Index::replace_all`].
pub(crate) struct ScannedRun {
    /// Its `run.json`.
    pub record: RunRecord,
    /// Its finished trials.
    pub trials: Vec<TrialSummary>,
    /// Its trials whose `trial.json` cannot be read.
    pub damaged: Vec<DamagedTrial>,
}

/// Turns a SQLite error into the store's: [`StoreError::IndexDamaged`] when SQLite says the file
/// is no database or is corrupt, else [`StoreError::Index`].
fn sql_err(path: &Path) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |source| {
        let damaged = matches!(
            source.sqlite_error_code(),
            Some(rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt)
        );
        let path = path.to_path_buf();
        if damaged {
            StoreError::IndexDamaged { path, source }
        } else {
            StoreError::Index { path, source }
        }
    }
}

/// Checks that a connection opened read-only reads an index of the current schema.
fn check_read_only(conn: &Connection, path: &Path) -> Result<()> {
    let e = sql_err(path);
    let found: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(&e)?;
    if found > INDEX_SCHEMA_VERSION {
        return Err(StoreError::IndexTooNew {
            path: path.to_path_buf(),
            found,
            supported: INDEX_SCHEMA_VERSION,
        });
    }
    if found < INDEX_SCHEMA_VERSION {
        // An older cache cannot be upgraded without writing.
        return Err(StoreError::IndexDamaged {
            path: path.to_path_buf(),
            source: rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_READONLY),
                Some(format!(
                    "schema version {found}, not {INDEX_SCHEMA_VERSION}, and read-only"
                )),
            ),
        });
    }
    conn.query_row(PROBE, [], |_| Ok(()))
        .map_err(|source| StoreError::IndexDamaged {
            path: path.to_path_buf(),
            source,
        })
}

/// `path` as an SQLite `file:` URI (its bytes percent-encoded where a URI needs it).
fn file_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            uri.push(char::from(b));
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri
}

fn insert_damaged(conn: &Connection, run: &str, trial: &str, reason: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT OR REPLACE INTO damaged (run_id, trial_id, reason) VALUES (?1, ?2, ?3)",
    )?
    .execute(params![run, trial, reason])?;
    Ok(())
}

fn upsert_run(conn: &Connection, record: &RunRecord) -> rusqlite::Result<()> {
    let json = serde_json::to_string(record)
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    // A run written again has a readable run.json.
    conn.prepare_cached("DELETE FROM damaged WHERE run_id = ?1 AND trial_id = ''")?
        .execute(params![record.id.as_str()])?;
    let m = &record.meta;
    conn.prepare_cached(UPSERT_RUN)?.execute(params![
        record.id.as_str(),
        m.suite_id,
        m.suite_hash,
        m.status.as_str(),
        m.started_at.map(format_millis).unwrap_or_default(),
        m.finished_at.map(format_millis),
        m.planned_trials,
        json,
    ])?;
    Ok(())
}

fn upsert_trial(conn: &Connection, run: &RunId, t: &TrialSummary) -> rusqlite::Result<()> {
    // A trial written again is no longer damaged.
    conn.prepare_cached("DELETE FROM damaged WHERE run_id = ?1 AND trial_id = ?2")?
        .execute(params![run.as_str(), t.trial_id])?;
    conn.prepare_cached(UPSERT_TRIAL)?.execute(params![
        run.as_str(),
        t.trial_id,
        t.task,
        t.variant,
        t.trial_index,
        t.outcome.label(),
        t.reason,
        t.wall_seconds,
        t.calls,
        t.wrong_turns,
        t.input_tokens,
        t.output_tokens,
        t.cost_usd,
        t.limit_reached.map(Limit::as_str),
    ])?;
    Ok(())
}
