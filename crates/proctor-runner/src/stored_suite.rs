//! The suite a stored run is read with: the copy the run keeps (checked against its hashes),
//! or, for a run made before runs kept their suite, the folder it was read from.

use std::path::{Path, PathBuf};

use proctor_store::RunHandle;
use proctor_suite::Suite;

use crate::error::{Context, RunError};

/// Where a command took a run's suite from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SuiteFrom {
    /// The copy the run keeps in the store.
    Kept(PathBuf),
    /// A suite folder: the one the run was read from (a run that keeps no copy) or one given.
    Folder(PathBuf),
}

impl SuiteFrom {
    /// The folder the suite is opened from.
    pub fn dir(&self) -> &Path {
        match self {
            SuiteFrom::Kept(p) | SuiteFrom::Folder(p) => p,
        }
    }

    /// How the suite is named to the user.
    pub fn describe(&self) -> String {
        match self {
            SuiteFrom::Kept(_) => "the run's own copy of its suite".to_string(),
            SuiteFrom::Folder(p) => format!("the suite at {}", p.display()),
        }
    }
}

/// Where `run`'s suite is: its kept copy when it has one (every file checked against the
/// hashes the run recorded; a damaged copy is an error naming the file), else the folder the
/// run was read from.
pub fn locate(run: &RunHandle) -> Result<SuiteFrom, RunError> {
    match proctor_store::read_kept_suite(run.dir(), run.id().as_str()) {
        Ok(Some(dir)) => Ok(SuiteFrom::Kept(dir)),
        Ok(None) => Ok(SuiteFrom::Folder(run.meta().suite_path)),
        Err(e @ proctor_store::StoreError::KeptSuiteDamaged { .. }) => Err(RunError::usage(
            e.to_string(),
            format!(
                "the copy is what the run graded with and must not be edited; `proctor rescore {} --suite DIR` rescores it against a suite folder instead",
                run.id()
            ),
        )),
        Err(e) => Err(e).context("cannot read the run's copy of its suite"),
    }
}

/// The suite `run` is read with ([`locate`]), opened; for a run that keeps no copy, a suite
/// folder that is no longer valid fails with each of its problems (file:line:col).
pub fn open(run: &RunHandle) -> Result<(Suite, SuiteFrom), RunError> {
    let from = locate(run)?;
    let suite = open_suite(from.dir())?;
    Ok((suite, from))
}

/// The start state of trial record `r` of run `id`, rebuilt from the run's kept suite (or, for
/// a run that keeps none, the folder it was read from), for its diff.
pub fn start_state(
    store: &proctor_store::Store,
    id: &proctor_store::RunId,
    r: &crate::TrialRecord,
) -> crate::evidence::StartState {
    use crate::evidence::StartState;
    let run = match store.open_run(id) {
        Ok(run) => run,
        Err(e) => return StartState::unknown(format!("cannot open the run: {e}")),
    };
    match locate(&run) {
        Ok(from) => StartState::of(from.dir(), r),
        Err(e) => StartState::unknown(e.one_line()),
    }
}

/// Opens a suite, or fails with every problem it has.
pub fn open_suite(dir: &Path) -> Result<Suite, RunError> {
    Suite::open(dir).map_err(|problems| RunError::InvalidSuite {
        suite: dir.display().to_string(),
        problems,
    })
}
