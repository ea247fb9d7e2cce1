//! proctor's evidence store: where every run's evidence is kept.
//!
//! ```text
//! STORE/                       (default .proctor, or --store DIR)
//!   index.sqlite               runs, trials and outcomes: a cache for list/show/compare
//!   files/HH/HASH              content-addressed files (a run's kept suite links to them)
//!   runs/RUN_ID/
//!     run.json                 written at run start, rewritten when the status changes
//!     suite/ suite.json        the suite as the run read it, every file hashed (see [`keep_suite`])
//!     results.rescored-*.json  each `proctor rescore` (see [`pick_scoring`]), with its
//!                              `.md`, `.report.json` and `.trials.jsonl` (its trials' list)
//!     run.lock                 flock-ed by the process writing the run; names its pid and host
//!     results.json results.md  written by later stages with [`atomic_write`]
//!     trials/TRIAL_ID/
//!       trial.json             written LAST: its presence is what makes a trial finished
//!       calls.jsonl transcript.jsonl answer.txt changes/ services/ checks/ ...
//!                              (evidence that would be empty is not written: absent = none)
//! ```
//!
//! Two rules hold everything together:
//!
//! - **Every file is written atomically** (temporary file, fsync, rename, fsync of the directory),
//!   so a run killed at any moment leaves every finished trial readable and no half-written file
//!   under a real name. JSON never holds NaN or Infinity: such a value is refused, not nulled.
//! - **The folders are the truth and the index is a cache.** [`RunHandle::finished_trials`] reads
//!   the folders, so `run --resume` is right even when the index is behind, and
//!   [`Store::reindex`] rebuilds `index.sqlite` from the folders at any time.
//!
//! This is the store stage of proctor's one-way data flow (suite → sandbox → agents → capture →
//! score → store → report): it knows nothing about how a trial ran or was scored, only how to keep
//! it.

mod atomic;
mod error;
mod finite;
mod index;
mod kept;
mod lock;
mod model;
pub mod page;
mod query;
mod run_id;
mod scoring;
mod store;
mod time;

pub use atomic::{
    atomic_write, atomic_write_json, atomic_write_json_unsynced, atomic_write_unsynced,
    ensure_finite, is_temp_name, to_json_bytes, AtomicFile,
};
pub use error::{is_out_of_space, Result, StoreError};
pub use index::INDEX_SCHEMA_VERSION;
pub use kept::{
    keep_suite, kept_suite_list, read_kept_suite, KeptEntry, KeptSuite, FILES_DIR, KEPT_SUITE_DIR,
    KEPT_SUITE_FILE,
};
pub use lock::{LockHolder, LOCK_FILE};
pub use model::{
    run_json_schema, DamagedRun, DamagedTrial, HostInfo, ParseRunStatusError, RunListing, RunMeta,
    RunRecord, RunStatus, TrialFile, TrialSummary, FILE_SCHEMA_VERSION,
};
pub use query::{CellCount, TrialFilter, TrialsPage};
pub use run_id::{ParseRunIdError, RunId};
pub use scoring::{
    pick_scoring, ParseScoringError, Scoring, ScoringChoice, RESCORED_STEM, RESCORED_SUITE_SUFFIX,
};
pub use store::{
    MismatchedRun, ReindexReport, RunHandle, Store, DEFAULT_STORE_DIR, INDEX_FILE, RUNS_DIR,
    RUN_FILE, TRIALS_DIR, TRIAL_FILE,
};
pub use time::utc_now;
