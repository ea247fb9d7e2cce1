//! The viewer of a store, as `proctor view` serves it and `proctor export --html` renders one
//! page of it: the store, and what the viewer shows beyond it (a trial's diff, a comparison, a
//! rescore's records) exactly as `show` and `compare` print it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use proctor_runner::evidence;
use proctor_runner::record::TrialRecord;
use proctor_store::{RunId, Store};
use proctor_view::{Sources, Viewer};

use crate::exit::{Error, Status};

/// What the viewer shows beyond the store, exactly as `show` and `compare` print it.
struct CliSources;

impl CliSources {
    /// A trial's record and folder.
    fn trial(store: &Store, id: &RunId, trial: &str) -> Option<(TrialRecord, PathBuf)> {
        let file = store.read_trial::<TrialRecord>(id, trial).ok()?;
        let dir = store
            .open_run(id)
            .and_then(|run| run.trial_dir(trial))
            .ok()?;
        Some((file.record, dir))
    }
}

impl Sources for CliSources {
    fn diff(&self, store: &Store, id: &RunId, trial: &str) -> Vec<String> {
        let Some((r, dir)) = Self::trial(store, id, trial) else {
            return Vec::new();
        };
        let mut start = || proctor_runner::stored_suite::start_state(store, id, &r);
        evidence::diffs(
            &r.end_state.changes,
            &dir.join("changes").join("files"),
            &mut start,
        )
    }

    fn compare(
        &self,
        store: &Store,
        a: &str,
        b: &str,
    ) -> Result<proctor_view::ArmsComparison, String> {
        let (comparison, gates, scorings) = proctor_runner::comparison::two_arms(store, a, b)?;
        Ok(proctor_view::ArmsComparison {
            comparison,
            gates,
            scorings,
        })
    }

    fn rescored(
        &self,
        store: &Store,
        id: &RunId,
        scoring: &proctor_store::Scoring,
        keep: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<(proctor_store::TrialSummary, Option<TrialRecord>)>, String> {
        let run = store.open_run(id).map_err(|e| e.to_string())?;
        proctor_runner::results::rescored_trials(&run, scoring, keep).map_err(|e| e.to_string())
    }
}

/// The viewer of the store at `store_dir`, which must exist: a mistyped path is refused, never
/// created.
pub fn viewer(store_dir: &Path) -> Result<Viewer, Error> {
    let store = proctor_runner::overview::open_store(store_dir)?;
    Ok(Viewer::new(store, Arc::new(CliSources)))
}

/// `proctor export RUN --html FILE [--scoring S]`.
pub fn export_html(
    store_dir: &Path,
    run: &str,
    html: &Path,
    scoring: proctor_store::ScoringChoice,
) -> Result<Status, Error> {
    let v = viewer(store_dir)?;
    let choice = match scoring {
        proctor_store::ScoringChoice::Latest => "latest".to_string(),
        proctor_store::ScoringChoice::Original => "original".to_string(),
        proctor_store::ScoringChoice::Rescore(n) => n.to_string(),
    };
    let export = proctor_view::export_html(&v, run, &choice).map_err(|e| match e {
        proctor_view::ViewError::NotFound(m) => {
            Error::usage(m, "`proctor list` shows the runs in this store")
        }
        other => Error::Other(anyhow::Error::new(other)),
    })?;
    let page = export.html;
    proctor_store::atomic_write(html, page.as_bytes())
        .with_context(|| format!("cannot write {}", html.display()))?;
    for d in &export.damaged {
        eprintln!(
            "warning: trial {} was not exported: {} (`proctor show {run} {}` says more)",
            d.trial_id, d.reason, d.trial_id
        );
    }
    eprintln!("wrote {} ({} KB)", html.display(), page.len() / 1024);
    Ok(Status::Success)
}
