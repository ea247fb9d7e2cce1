//! `rescore`: a run's saved end states scored again with the suite's current rules, without
//! running any agent. Checks are re-run in fresh sandboxes over the end state rebuilt from
//! fixture + mutation + variant files + the captured changes, with the holdouts laid in.

use std::path::{Path, PathBuf};
use std::time::Duration;

use proctor_sandbox::Workspace;
use proctor_score::endstate::ChangeKind;
use proctor_store::RunHandle;
use proctor_suite::Suite;

use crate::layers::{copy_tree, LayerCache};
use crate::record::TrialRecord;
use crate::results::{for_each_record, ResultsError};
use crate::trial::{run_check, task_checks, CheckEnv, EndStateFiles};

/// One trial whose verdict changed.
#[derive(Debug, Clone)]
pub struct Changed {
    /// The trial.
    pub trial: String,
    /// The outcome before.
    pub before: String,
    /// The outcome now.
    pub after: String,
    /// Why, now.
    pub reason: String,
}

/// What a rescore did.
#[derive(Debug, Default)]
pub struct Rescored {
    /// How many trials were scored again.
    pub trials: usize,
    /// The trials whose outcome changed.
    pub changed: Vec<Changed>,
}

/// Scores every finished trial of `run` again, handing each new record to `emit` as soon as it
/// is made (records are read and scored one at a time, never all held at once); returns what
/// changed. Stops at the first record that cannot be read or that `emit` refuses.
#[allow(clippy::too_many_arguments)]
pub fn rescore(
    suite: &Suite,
    run: &RunHandle,
    store_root: &Path,
    env: &CheckEnv,
    overlay: bool,
    fixture_hash: &str,
    emit: &mut dyn FnMut(&TrialRecord) -> Result<(), ResultsError>,
) -> Result<Rescored, ResultsError> {
    let layers = LayerCache::new(store_root.join("cache"));
    let work_root = store_root
        .join("work")
        .join(format!("rescore-{}", run.id()));
    let mut done = Rescored::default();
    let outcome = for_each_record(run, |mut record| {
        let before = record.outcome.clone();
        rescore_one(
            suite,
            run,
            &mut record,
            &layers,
            &work_root,
            env,
            overlay,
            fixture_hash,
        );
        if record.outcome != before {
            done.changed.push(Changed {
                trial: record.plan.id.clone(),
                before,
                after: record.outcome.clone(),
                reason: record.reason.clone(),
            });
        }
        emit(&record)?;
        done.trials += 1;
        Ok(())
    });
    let _ = proctor_sandbox::remove_tree(&work_root);
    outcome.map(|()| done)
}

#[allow(clippy::too_many_arguments)]
fn rescore_one(
    suite: &Suite,
    run: &RunHandle,
    record: &mut TrialRecord,
    layers: &LayerCache,
    work_root: &Path,
    env: &CheckEnv,
    overlay: bool,
    fixture_hash: &str,
) {
    // A trial the harness failed before scoring has no end state to score.
    if record.verdict.is_none() {
        return;
    }
    let (Some(task), Some(variant)) = (
        suite.task(&record.plan.task),
        suite.variant(&record.plan.variant),
    ) else {
        record
            .harness_notes
            .push("rescore: the suite no longer has this trial's task or variant".into());
        return;
    };
    let trial_dir = run
        .dir()
        .join(proctor_store::TRIALS_DIR)
        .join(&record.plan.id);
    let changes_dir = trial_dir.join("changes").join("files");
    let lowers = match layers.start_state(suite, variant, &record.plan, fixture_hash) {
        Ok(l) => l.dirs,
        Err(e) => {
            record
                .harness_notes
                .push(format!("rescore: cannot rebuild the start state: {e}"));
            return;
        }
    };
    let settings = suite.settings(task, variant);
    let checks = task_checks(task);
    let mut end = record.end_state.clone();
    end.checks.clear();
    if !checks.is_empty() && end.agent.started {
        let work = work_root.join(&record.plan.id);
        let _ = proctor_sandbox::remove_tree(&work);
        let holdout = suite.holdout_dir(&record.plan.task);
        // The end state as layers: the captured changes over the start state. Deletions cannot
        // be expressed by a plain layer, so a trial that deleted files gets a rebuilt copy.
        let deletes = !overlay || end.changes.iter().any(|c| c.kind == ChangeKind::Deleted);
        let (end_root, below) = if deletes {
            let rebuilt = work.join("rebuilt");
            match rebuild(&lowers, &changes_dir, &end.changes, &rebuilt) {
                Ok(()) => (rebuilt, Vec::new()),
                Err(e) => {
                    record
                        .harness_notes
                        .push(format!("rescore: cannot rebuild the end state: {e}"));
                    return;
                }
            }
        } else if changes_dir.is_dir() {
            (changes_dir.clone(), lowers.clone())
        } else {
            // No file content changed, so no `changes/files/` was kept: an empty top layer.
            let empty = work.join("no-changes");
            if let Err(e) = std::fs::create_dir_all(&empty) {
                record
                    .harness_notes
                    .push(format!("rescore: cannot make an empty layer: {e}"));
                return;
            }
            (empty, lowers.clone())
        };
        // Only the kind matters to run_check: overlay layers, or a copy of a full tree.
        let workspace = if overlay {
            Workspace::Overlay {
                lowers: Vec::new(),
                upper: PathBuf::new(),
                work: PathBuf::new(),
            }
        } else {
            Workspace::Bind {
                dir: end_root.clone(),
            }
        };
        for (n, (command, timeout)) in checks.iter().enumerate() {
            let timeout = timeout
                .map(Duration::from_secs)
                .unwrap_or(settings.validation_timeout);
            let result = run_check(
                env,
                &work,
                n,
                command,
                timeout,
                holdout.as_deref(),
                &end_root,
                &workspace,
                &below,
            );
            end.checks.insert(command.clone(), result);
        }
        let _ = proctor_sandbox::remove_tree(&work);
    }
    let files = EndStateFiles::new(changes_dir, &end.changes, lowers);
    let faults = proctor_score::Faults {
        faults: record
            .harness_notes
            .iter()
            .filter(|n| !n.starts_with("rescore:"))
            .map(|n| (proctor_score::ErrorKind::Harness, n.clone()))
            .collect(),
    };
    let verdict = proctor_score::score(task, &end, &files, &faults, settings.undo_window);
    record.outcome = verdict.outcome.label().to_string();
    record.reason = verdict.reason.clone();
    record.verdict = Some(verdict);
    record.end_state = end;
}

fn rebuild(
    lowers: &[PathBuf],
    changes_dir: &Path,
    changes: &[proctor_score::FileChange],
    to: &Path,
) -> std::io::Result<()> {
    for layer in lowers.iter().rev() {
        copy_tree(layer, to)?;
    }
    for c in changes {
        let path = to.join(&c.path);
        match c.kind {
            ChangeKind::Deleted if c.dir => {
                let _ = std::fs::remove_dir_all(&path);
            }
            ChangeKind::Deleted => {
                let _ = std::fs::remove_file(&path);
            }
            _ if c.dir => std::fs::create_dir_all(&path)?,
            _ => {
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::copy(changes_dir.join(&c.path), &path)?;
            }
        }
    }
    Ok(())
}
