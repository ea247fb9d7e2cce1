//! Stage 6, grade: the verdict, a pure function of the captured evidence (`proctor-score`).
//! Operational faults come first: those the model endpoint injected, then proctor's own notes
//! from the trial's run. A trial's grading and a rescore's are the same code.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use proctor_score::endstate::{ChangeKind, EndState, FileChange};
use proctor_score::{CheckFiles, ErrorKind, Faults, Files, TrialVerdict};
use proctor_suite::model::Task;

use crate::record::{HarnessNote, NoteStage};

/// The end-state workspace's files: changed files from the capture, the rest from the lowers.
pub struct EndStateFiles {
    changes_dir: PathBuf,
    /// What happened to each changed path, by the BLAKE3 of the path (not a copy of it: a tree
    /// 10,000 levels deep has 100 MB of paths).
    changed: HashMap<[u8; 32], ChangeKind>,
    lowers: Vec<PathBuf>,
    /// The kept files, then each lower, read by open folders (a path of any length).
    trees: Vec<std::sync::Mutex<Option<proctor_fs::Deep>>>,
}

impl EndStateFiles {
    /// Reads through `changes_dir` (files the agent added or changed) over `lowers`.
    pub fn new(
        changes_dir: PathBuf,
        changes: &[FileChange],
        lowers: Vec<PathBuf>,
    ) -> EndStateFiles {
        EndStateFiles {
            // A suite names paths in UTF-8: a name that is not UTF-8 is never read through its
            // lossy text (which another, real name may spell).
            changed: changes
                .iter()
                .filter(|c| c.path_hex.is_none())
                .map(|c| (path_key(&c.path), c.kind))
                .collect(),
            trees: (0..=lowers.len())
                .map(|_| std::sync::Mutex::new(None))
                .collect(),
            changes_dir,
            lowers,
        }
    }

    /// A path the system takes for `rel` in tree `i` (0: the kept files; then the lowers),
    /// whatever its length; `None` where it cannot be reached.
    fn at(&self, i: usize, rel: &str) -> Option<proctor_fs::Reached> {
        let root = if i == 0 {
            &self.changes_dir
        } else {
            self.lowers.get(i - 1)?
        };
        let mut tree = self.trees.get(i)?.lock().ok()?;
        if tree.is_none() {
            *tree = proctor_fs::Deep::open(root).ok();
        }
        tree.as_mut()?.reach(std::path::Path::new(rel)).ok()
    }
}

/// Bytes of a file's data an assertion or the audit reads at most: past it a file is read by a
/// window from its start, and the evidence says so.
pub const READ_MAX: usize = 16 << 20;

impl EndStateFiles {
    /// What of `path` is read, bounded: its data (holes skipped) up to [`READ_MAX`].
    fn read_end(&self, path: &str) -> Option<proctor_fs::BoundedRead> {
        if path.split('/').any(|c| c == "..") {
            return None;
        }
        let read = |i: usize| {
            let p = self.at(i, path)?;
            proctor_fs::read_bounded(&p, READ_MAX)
                .ok()
                .filter(|_| p.is_file())
        };
        match self.changed.get(&path_key(path)) {
            Some(ChangeKind::Deleted) => None,
            Some(_) => read(0),
            None => (1..=self.lowers.len()).find_map(read),
        }
    }
}

/// The key of a path in [`EndStateFiles`]'s changes.
fn path_key(path: &str) -> [u8; 32] {
    *blake3::hash(path.as_bytes()).as_bytes()
}

impl Files for EndStateFiles {
    fn read(&self, path: &str) -> Option<Vec<u8>> {
        self.read_end(path).map(|r| r.bytes)
    }

    fn partial(&self, path: &str) -> Option<String> {
        // Most files are whole: known from their size and blocks, without reading them again.
        let whole = |p: proctor_fs::Reached| {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(&*p)
                .is_ok_and(|m| m.len() <= READ_MAX as u64 && m.blocks() * 512 >= m.len())
        };
        let located = match self.changed.get(&path_key(path)) {
            Some(ChangeKind::Deleted) => return None,
            Some(_) => self.at(0, path),
            None => (1..=self.lowers.len())
                .filter_map(|i| self.at(i, path))
                .find(|p| p.is_file()),
        };
        if located.is_none_or(whole) {
            return None;
        }
        self.read_end(path).and_then(|r| r.note())
    }
}

/// The operational faults of a trial: the model endpoint's injected faults (from its wire
/// log), then each harness note of the trial's own run as a `harness` fault (a rescore's notes
/// are not faults of the trial).
pub fn faults(model: &[(ErrorKind, String)], notes: &[HarnessNote]) -> Faults {
    let mut faults = Faults {
        faults: model.to_vec(),
    };
    faults.faults.extend(
        notes
            .iter()
            .filter(|n| n.stage == NoteStage::Run)
            .map(|n| (ErrorKind::Harness, n.message.clone())),
    );
    faults
}

/// The verdict over the captured evidence, after the integrity audit of the end state against
/// the checks and their own files (`holdout`), and of what the agent changed outside the
/// workspace against the task's `image` where its checks see those changes.
pub fn grade(
    task: &Task,
    undo_window: Duration,
    end: &EndState,
    files: &dyn Files,
    faults: &Faults,
    holdout: &CheckFiles,
    image: Option<&crate::image::TrialImage>,
) -> TrialVerdict {
    let mut integrity = proctor_score::audit::audit(task, &end.changes, files, holdout);
    if let Some(image) = image.filter(|_| !end.root_changes.is_empty()) {
        let holdout_at = task.holdout_at().and_then(|p| p.to_str());
        let image_has = |rel: &str| std::fs::symlink_metadata(image.rootfs.join(rel)).is_ok();
        integrity
            .findings
            .extend(proctor_score::audit::root::audit_root(
                task,
                &end.root_changes,
                holdout_at,
                &image_has,
            ));
    }
    // What the checks were seen to load, judged; a finding the static pass made stays once.
    proctor_score::audit::observed::merge(
        &mut integrity.findings,
        observed_audit(task, end, files, holdout, image),
    );
    proctor_score::score(task, end, files, faults, undo_window, integrity)
}

/// The audit of what each check was seen to load ([`proctor_score::audit::observed`]), over
/// the check's root: the task's image, or the host's.
fn observed_audit(
    task: &Task,
    end: &EndState,
    files: &dyn Files,
    holdout: &CheckFiles,
    image: Option<&crate::image::TrialImage>,
) -> proctor_score::audit::observed::Observed {
    if end.checks.values().all(|c| c.observed.is_none()) {
        return Default::default();
    }
    let root = image.map_or_else(|| PathBuf::from("/"), |i| i.rootfs.clone());
    let path = image.map_or_else(crate::trial::env::host_path, |i| i.path());
    let installed = |m: &str| crate::trial::checks::installed_module(&root, &path, m);
    let image_has =
        |rel: &str| image.is_some_and(|i| std::fs::symlink_metadata(i.rootfs.join(rel)).is_ok());
    let path_dirs: Vec<String> = path
        .split(':')
        .filter(|d| d.starts_with('/'))
        .map(|d| d.trim_start_matches('/').trim_end_matches('/').to_string())
        .collect();
    let inside = image.map_or_else(
        || crate::trial::paths::WORKSPACE_INSIDE.to_string(),
        |i| i.workdir.to_string_lossy().into_owned(),
    );
    let place = proctor_score::audit::observed::CheckPlace {
        workspace_inside: &inside,
        holdout_at: task.holdout_at().and_then(|p| p.to_str()),
        installed: &installed,
        image_has: &image_has,
        path_dirs: &path_dirs,
    };
    proctor_score::audit::observed::audit_observed(
        task,
        &end.changes,
        &end.root_changes,
        files,
        holdout,
        &end.checks,
        &place,
    )
}

#[cfg(test)]
mod tests {
    use proctor_score::endstate::AgentEnd;
    use proctor_score::Outcome;

    use super::*;

    fn change(path: &str, kind: ChangeKind) -> FileChange {
        FileChange::named(path, kind)
    }

    #[test]
    fn end_state_files_read_changes_over_the_lowers_top_first() {
        let dir = tempfile::tempdir().unwrap();
        let write = |rel: &str, text: &str| {
            let p = dir.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        write("changes/a.txt", "changed");
        write("top/a.txt", "top a");
        write("top/b.txt", "top b");
        write("bottom/b.txt", "bottom b");
        write("bottom/c.txt", "bottom c");
        write("bottom/gone.txt", "was here");
        let files = EndStateFiles::new(
            dir.path().join("changes"),
            &[
                change("a.txt", ChangeKind::Changed),
                change("gone.txt", ChangeKind::Deleted),
            ],
            vec![dir.path().join("top"), dir.path().join("bottom")],
        );
        assert_eq!(files.read("a.txt").unwrap(), b"changed");
        assert_eq!(files.read("b.txt").unwrap(), b"top b");
        assert_eq!(files.read("c.txt").unwrap(), b"bottom c");
        assert_eq!(files.read("gone.txt"), None);
        assert_eq!(files.read("missing.txt"), None);
        assert_eq!(
            files.read("../bottom/c.txt"),
            None,
            "no way out of the tree"
        );
    }

    #[test]
    fn model_faults_come_first_and_only_the_runs_notes_are_faults() {
        let model = vec![(
            ErrorKind::RateLimit,
            "the model route answered 429".to_string(),
        )];
        let notes = vec![
            HarnessNote::rescore("cannot rebuild the start state"),
            HarnessNote::run("cannot read calls.jsonl: gone"),
        ];
        let f = faults(&model, &notes);
        assert_eq!(
            f.faults,
            vec![
                (
                    ErrorKind::RateLimit,
                    "the model route answered 429".to_string()
                ),
                (
                    ErrorKind::Harness,
                    "cannot read calls.jsonl: gone".to_string()
                ),
            ]
        );
        assert!(faults(&[], &[HarnessNote::rescore("x")]).faults.is_empty());
    }

    fn not_started(why: &str, kind: Option<ErrorKind>) -> EndState {
        EndState {
            agent: AgentEnd {
                started: false,
                not_started: Some(why.into()),
                not_started_kind: kind,
                ..AgentEnd::default()
            },
            ..EndState::default()
        }
    }

    #[test]
    fn a_not_started_trial_is_errored_with_the_kind_its_stage_recorded() {
        let (_dir, suite) = crate::trial::testkit::suite();
        let task = suite.task("t").unwrap();
        let files = proctor_score::endstate::MemoryFiles::default();
        let grade_of = |end: &EndState| {
            grade(
                task,
                Duration::from_secs(60),
                end,
                &files,
                &Faults::default(),
                &CheckFiles::default(),
                None,
            )
            .outcome
        };
        // The words say nothing of a guard, the stage knew: a service failed.
        let end = not_started(
            "service api exited (exit code 2)",
            Some(ErrorKind::ServiceGuard),
        );
        assert_eq!(
            grade_of(&end),
            Outcome::Errored {
                kind: ErrorKind::ServiceGuard
            }
        );
        // The words mention a guard, the stage knew: the agent could not be executed.
        let end = not_started("cannot exec guard-wrapper", Some(ErrorKind::AgentStart));
        assert_eq!(
            grade_of(&end),
            Outcome::Errored {
                kind: ErrorKind::AgentStart
            }
        );
        // A record made before the kind was recorded is still read by its words.
        let end = not_started("guard of api refused: no", None);
        assert_eq!(
            grade_of(&end),
            Outcome::Errored {
                kind: ErrorKind::ServiceGuard
            }
        );
    }

    #[test]
    fn a_fault_makes_the_trial_errored_whatever_the_agent_did() {
        let (_dir, suite) = crate::trial::testkit::suite();
        let task = suite.task("t").unwrap();
        let end = EndState {
            agent: AgentEnd {
                started: true,
                exit_code: Some(0),
                ..AgentEnd::default()
            },
            ..EndState::default()
        };
        let files = proctor_score::endstate::MemoryFiles::default();
        let f = faults(&[(ErrorKind::Timeout, "the model timed out".into())], &[]);
        let v = grade(
            task,
            Duration::from_secs(60),
            &end,
            &files,
            &f,
            &CheckFiles::default(),
            None,
        );
        assert_eq!(
            v.outcome,
            Outcome::Errored {
                kind: ErrorKind::Timeout
            }
        );
        assert_eq!(v.reason, "timeout: the model timed out");
    }
}
