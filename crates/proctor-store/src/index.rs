//! `index.sqlite`: a cache of every run and finished trial, for queries over the whole corpus.
//!
//! The run folders are the truth; this file can be deleted at any time and rebuilt by
//! [`crate::Store::reindex`]. One connection per [`crate::Store`], behind a mutex, serves every
//! thread of the process; WAL mode and a generous busy timeout let several proctor processes
//! share one store.

use crate::error::{Result, StoreError};
use crate::model::{RunListing, RunMeta, RunRecord, TrialSummary};
use crate::RunId;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// The schema version this crate writes, kept in `PRAGMA user_version`.
pub const INDEX_SCHEMA_VERSION: i64 = 1;

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
    PRIMARY KEY (run_id, trial_id)
) WITHOUT ROWID;
CREATE INDEX trials_by_outcome ON trials (run_id, outcome);
CREATE INDEX trials_by_cell ON trials (run_id, task, variant, trial_index, trial_id);
";

const DROP: &str = "
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
                    calls, wrong_turns, input_tokens, output_tokens, cost_usd)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
ON CONFLICT (run_id, trial_id) DO UPDATE SET
    task = excluded.task, variant = excluded.variant, trial_index = excluded.trial_index,
    outcome = excluded.outcome, reason = excluded.reason, wall_seconds = excluded.wall_seconds,
    calls = excluded.calls, wrong_turns = excluded.wrong_turns,
    input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens,
    cost_usd = excluded.cost_usd";

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

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves SQLite itself consistent (an open transaction is
        // rolled back when its guard drops), so a poisoned mutex is still usable.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn err(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
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

    /// Every run with its outcome counts, oldest first.
    pub(crate) fn list_runs(&self) -> Result<Vec<RunListing>> {
        let conn = self.lock();
        let e = self.err();
        let mut counts: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
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
                        r.get::<_, String>(1)?,
                        r.get::<_, u64>(2)?,
                    ))
                })
                .map_err(&e)?;
            for row in rows {
                let (run, outcome, n) = row.map_err(&e)?;
                counts.entry(run).or_default().insert(outcome, n);
            }
        }
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
                trials_finished: outcomes.values().sum(),
                outcomes,
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
            .prepare_cached(
                "SELECT trial_id, task, variant, trial_index, outcome, reason, wall_seconds,
                        calls, wrong_turns, input_tokens, output_tokens, cost_usd
                 FROM trials WHERE run_id = ?1
                 ORDER BY task, variant, trial_index, trial_id",
            )
            .map_err(&e)?;
        let rows = stmt
            .query_map([run.as_str()], |r| {
                Ok(TrialSummary {
                    trial_id: r.get(0)?,
                    task: r.get(1)?,
                    variant: r.get(2)?,
                    trial_index: r.get(3)?,
                    outcome: r.get(4)?,
                    reason: r.get(5)?,
                    wall_seconds: r.get(6)?,
                    calls: r.get(7)?,
                    wrong_turns: r.get(8)?,
                    input_tokens: r.get(9)?,
                    output_tokens: r.get(10)?,
                    cost_usd: r.get(11)?,
                })
            })
            .map_err(&e)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(&e)
    }

    /// Replaces the whole content with the given runs and trials, in one transaction: readers
    /// see the old index or the new one.
    pub(crate) fn replace_all(&self, runs: &[(RunRecord, Vec<TrialSummary>)]) -> Result<()> {
        let mut conn = self.lock();
        let e = sql_err(&self.path);
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&e)?;
        tx.execute_batch("DELETE FROM trials; DELETE FROM runs;")
            .map_err(&e)?;
        for (record, trials) in runs {
            upsert_run(&tx, record).map_err(&e)?;
            for t in trials {
                upsert_trial(&tx, &record.id, t).map_err(&e)?;
            }
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

fn sql_err(path: &Path) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |source| StoreError::Index {
        path: path.to_path_buf(),
        source,
    }
}

fn upsert_run(conn: &Connection, record: &RunRecord) -> rusqlite::Result<()> {
    let json = serde_json::to_string(record)
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    let m = &record.meta;
    conn.prepare_cached(UPSERT_RUN)?.execute(params![
        record.id.as_str(),
        m.suite_id,
        m.suite_hash,
        m.status.as_str(),
        m.started_at,
        m.finished_at,
        m.planned_trials,
        json,
    ])?;
    Ok(())
}

fn upsert_trial(conn: &Connection, run: &RunId, t: &TrialSummary) -> rusqlite::Result<()> {
    conn.prepare_cached(UPSERT_TRIAL)?.execute(params![
        run.as_str(),
        t.trial_id,
        t.task,
        t.variant,
        t.trial_index,
        t.outcome,
        t.reason,
        t.wall_seconds,
        t.calls,
        t.wrong_turns,
        t.input_tokens,
        t.output_tokens,
        t.cost_usd,
    ])?;
    Ok(())
}
