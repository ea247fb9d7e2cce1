//! No host-side write follows a path the agent made, and no tree the agent made brings proctor
//! down (issue 41, rows 1-3), through the real binary in real sandboxes, as root and as uid
//! 65534, in copy mode (where the holdout is copied over a copy of the end state) and in overlay
//! mode:
//!
//! - row 1: the agent links `tests` (where the holdout has a folder `tests/`) to a folder of the
//!   host: the hidden check is laid inside the check's own copy, the host folder is untouched
//!   (its entries, their content and modes), and the trial is graded;
//! - row 2: a file, or a relative link, where the holdout has a folder: the holdout replaces it
//!   in the check's view, the trial is graded, and the end state as captured keeps what the
//!   agent left there;
//! - row 3: a folder tree 1,500 levels deep (under PATH_MAX) and one 10,000 levels deep (a
//!   20 KB path, past it) are captured whole, with no note: the file at the bottom is among the
//!   stored changes with its content, the trial is graded by a check that reads that file,
//!   `show RUN TRIAL` shows it, `export --html` works, `rescore` (whose rebuild must hold the
//!   file for the check to pass again) changes no outcome, and the trial's scratch is removed
//!   (given back whole to an unprivileged caller whose trial mapped a range of ids).
//!
//! Each hostile agent has an honest arm of the same task (a legitimate symlink, a normal
//! holdout folder, a shallow tree) that completes. A machine without namespaces (or overlayfs)
//! skips, except under `CI`, where that fails.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use common::lab::{users, As, Lab};
use serde_json::Value;

/// The holdout's check: it reads the fixture through the agent's (legitimate) link and says it
/// ran; `tests/` is a folder of the holdout.
const CHECK: &str = "#!/bin/sh\necho hidden-check-ran\ntest \"$(cat alias.txt)\" = 'the data'\n";

/// What one trial left.
struct Trial {
    lab: Lab,
    record: Value,
    who: As,
}

impl Trial {
    fn outcome(&self) -> &str {
        self.record["outcome"].as_str().unwrap_or("")
    }

    fn change(&self, path: &str) -> &Value {
        self.record["end_state"]["changes"]
            .as_array()
            .and_then(|a| a.iter().find(|c| c["path"] == path))
            .unwrap_or_else(|| panic!("no change {path}: {:#}", self.record))
    }

    fn assert_graded(&self, want: &str) {
        assert_eq!(self.outcome(), want, "{:?}: {:#}", self.who, self.record);
        assert!(
            self.record["harness_notes"].is_null(),
            "{:?}: {:#}",
            self.who,
            self.record
        );
    }

    /// `proctor rescore RUN` of the trial's run: it exits 0 and changes no outcome.
    fn assert_rescored(&self) {
        let store = self.lab.store();
        let suite = self.lab.suite();
        let out = self.lab.proctor(
            self.who,
            &[
                "rescore",
                &self.lab.run_id(),
                "--suite",
                suite.to_str().unwrap(),
                "--store",
                store.to_str().unwrap(),
            ],
        );
        assert_eq!(out.code, 0, "{:?}: {}", self.who, out.stderr);
        assert!(
            out.stderr.contains("no outcome changed"),
            "{:?}: {}",
            self.who,
            out.stderr
        );
    }
}

/// Runs a one-task suite (fixture `data.txt`; holdout `tests/check.sh` when `holdout`) whose
/// agent runs `steps` as `who`, in copy mode when `copy`; `None` (outside CI) when the machine
/// cannot isolate the trial.
fn trial(
    name: &str,
    who: As,
    copy: bool,
    holdout: bool,
    success: &str,
    steps: &[&str],
) -> Option<Trial> {
    let lab = Lab::new(&format!("trustpaths-{name}-{who:?}-{copy}"));
    lab.write("fixture/data.txt", "the data\n");
    if holdout {
        lab.write_exec("holdout/t/tests/check.sh", CHECK);
    }
    lab.one_task("", success, steps, false);
    let record = lab.run_graded(who, copy, &[])?;
    Some(Trial { lab, record, who })
}

/// A folder of the host, outside every trial, as an operator keeps one: a world-writable
/// sticky folder holding a private file named like the holdout's check.
fn host_folder(root: &Path) -> PathBuf {
    let dir = root.join("host-folder");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("check.sh"), "the operator's own\n").unwrap();
    std::fs::set_permissions(dir.join("check.sh"), std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    dir
}

/// Every entry of the host folder with its mode and content, and the folder's own mode.
fn snapshot(dir: &Path) -> (u32, Vec<(String, u32, Vec<u8>)>) {
    let mode = std::fs::symlink_metadata(dir).unwrap().permissions().mode() & 0o7777;
    let mut entries: Vec<(String, u32, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let m = std::fs::symlink_metadata(e.path()).unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                m.permissions().mode() & 0o7777,
                std::fs::read(e.path()).unwrap_or_default(),
            )
        })
        .collect();
    entries.sort();
    (mode, entries)
}

const SUCCESS_CHECK: &str = "{ check = \"sh tests/check.sh\" }";

#[test]
fn row1_a_link_to_a_host_folder_where_the_holdout_has_a_folder_is_never_written_through() {
    for who in users() {
        for copy in [true, false] {
            // The honest arm: a legitimate symlink in the workspace, which the check reads.
            let Some(t) = trial(
                "row1-honest",
                who,
                copy,
                true,
                SUCCESS_CHECK,
                &["ln -s data.txt alias.txt"],
            ) else {
                return;
            };
            t.assert_graded("completed");
            assert_eq!(t.change("alias.txt")["kind"], "added");
            t.assert_rescored();

            // The hostile arm: the same, and `tests` linked to a folder of the host.
            let lab = Lab::new(&format!("trustpaths-row1-hostile-{who:?}-{copy}"));
            let victim = host_folder(&lab.root);
            lab.write("fixture/data.txt", "the data\n");
            lab.write_exec("holdout/t/tests/check.sh", CHECK);
            let step = format!(
                "ln -s data.txt alias.txt && ln -s {} tests",
                victim.display()
            );
            lab.one_task("", SUCCESS_CHECK, &[&step], false);
            // (uid 65534 gets the lab, the host folder with it: proctor runs as the folder's
            // owner, and still must not write into it.)
            let before = snapshot(&victim);
            let Some(record) = lab.run_graded(who, copy, &[]) else {
                return;
            };
            let t = Trial { lab, record, who };
            let after = snapshot(&victim);
            assert_eq!(before.0, 0o1777);
            assert_eq!(
                (before.0, &before.1),
                (after.0, &after.1),
                "{who:?} copy={copy}: the host folder was written through the agent's link"
            );
            assert_eq!(after.1.len(), 1, "{after:?}");
            assert_eq!(after.1[0].2, b"the operator's own\n");
            // The check ran with the holdout laid inside the trial, over the link.
            t.assert_graded("completed");
            let checks = t.record["end_state"]["checks"].to_string();
            assert!(checks.contains("hidden-check-ran"), "{checks}");
            // The end state as captured keeps the agent's link.
            assert_eq!(t.change("tests")["kind"], "added", "{:#}", t.record);
            let special =
                std::fs::read_to_string(t.lab.trial_dir("t.agent.0").join("changes/special.json"))
                    .unwrap();
            assert!(special.contains("\"tests\""), "{special}");
            // The rescore lays the holdout again, inside its own rebuild.
            t.assert_rescored();
            assert_eq!(snapshot(&victim), before, "{who:?} copy={copy}: rescore");
        }
    }
}

#[test]
fn row2_a_file_or_a_relative_link_where_the_holdout_has_a_folder_is_graded() {
    for who in users() {
        for copy in [true, false] {
            // The honest arm: a normal holdout folder, nothing of the agent's in its way.
            let Some(t) = trial(
                "row2-honest",
                who,
                copy,
                true,
                SUCCESS_CHECK,
                &["ln -s data.txt alias.txt && echo fixed > fixed.txt"],
            ) else {
                return;
            };
            t.assert_graded("completed");
            t.assert_rescored();
            for (arm, step, kept_file) in [
                ("file", "echo mine > tests", true),
                ("rellink", "mkdir elsewhere && ln -s elsewhere tests", false),
                ("uplink", "ln -s ../../../../../../.. tests", false),
            ] {
                let step = format!("ln -s data.txt alias.txt && {step}");
                let Some(t) = trial(
                    &format!("row2-{arm}"),
                    who,
                    copy,
                    true,
                    SUCCESS_CHECK,
                    &[&step],
                ) else {
                    return;
                };
                // Graded: the holdout replaced what the agent put there, in the check's view.
                t.assert_graded("completed");
                // The agent's end state as captured is what the agent left.
                let c = t.change("tests");
                assert_eq!(c["kind"], "added", "{who:?} copy={copy} {arm}: {c:#}");
                assert!(!c["dir"].as_bool().unwrap_or(false), "{c:#}");
                if kept_file {
                    let kept = t.lab.trial_dir("t.agent.0").join("changes/files/tests");
                    assert_eq!(std::fs::read(&kept).unwrap(), b"mine\n", "{arm}");
                }
                t.assert_rescored();
            }
        }
    }
}

/// An agent step that makes a folder tree `levels` deep (one-letter names) with a file at its
/// bottom, by one process that goes down with `chdir` (as an agent can, past PATH_MAX). Each
/// folder is given to uid 1000 where the trial's root can (a range of ids is mapped): outside,
/// a subordinate id owns it, and proctor must give the whole tree back to an unprivileged
/// caller, past PATH_MAX too, or it could not remove the trial's scratch.
fn deep_tree(levels: usize) -> String {
    format!(
        "python3 -c \"import os\nfor _ in range({levels}):\n    os.mkdir('d')\n    try: os.chown('d', 1000, 1000)\n    except OSError: pass\n    os.chdir('d')\nopen('bottom.txt', 'w').write('deep')\""
    )
}

/// Row 3's success: the fixture's data, and a check that finds the file at the bottom of the
/// agent's tree and reads it (`find` goes down by open folders, past PATH_MAX too): the check
/// passes only where the end state it sees holds that file with its content.
const SUCCESS_DEEP: &str = "{ file_contains = { path = \"data.txt\", pattern = \"the data\" } }, { check = \"find . -name bottom.txt -execdir cat {} + | grep -qxE 'deep|shallow'\" }";

/// The stored changes (the trial's `changes/changes.json`, which lists them all), the change of
/// `path` among them, and the content its kept copy holds (read by open folders, at any depth).
fn stored(t: &Trial, path: &str) -> (Value, Value, Vec<u8>) {
    let changes = t.lab.trial_dir("t.agent.0").join("changes");
    let list: Value =
        serde_json::from_slice(&std::fs::read(changes.join("changes.json")).unwrap()).unwrap();
    let change = list
        .as_array()
        .and_then(|a| a.iter().find(|c| c["path"] == path))
        .unwrap_or_else(|| panic!("{:?}: {path:.40}... is not among the stored changes", t.who))
        .clone();
    let mut files = proctor_fs::Deep::open(&changes.join("files")).unwrap();
    let content = std::fs::read(&*files.reach(Path::new(path)).unwrap()).unwrap();
    (list, change, content)
}

/// `proctor show RUN t.agent.0` of the trial's run: it exits 0.
fn assert_shown(t: &Trial) -> String {
    let store = t.lab.store();
    let out = t.lab.proctor(
        t.who,
        &[
            "show",
            &t.lab.run_id(),
            "t.agent.0",
            "--store",
            store.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 0, "{:?}: {}", t.who, out.stderr);
    out.stdout
}

/// Nothing of the trial is left in the store's scratch.
fn assert_scratch_removed(t: &Trial) {
    let work = t.lab.store().join("work");
    let left: Vec<_> = walkdir::WalkDir::new(&work)
        .min_depth(1)
        .max_depth(3)
        .into_iter()
        .filter_map(Result::ok)
        .map(|e| e.path().to_path_buf())
        .filter(|p| p.to_string_lossy().contains("t.agent.0"))
        .collect();
    assert!(
        left.is_empty(),
        "{:?}: left in the scratch: {left:?}",
        t.who
    );
}

#[test]
fn row3_a_folder_tree_ten_thousand_levels_deep_is_captured_graded_shown_and_rescored() {
    for who in users() {
        for copy in [false, true] {
            // The honest arm: a shallow tree.
            let Some(t) = trial(
                "row3-honest",
                who,
                copy,
                false,
                SUCCESS_DEEP,
                &["mkdir -p d/e/f && echo shallow > d/e/f/bottom.txt"],
            ) else {
                return;
            };
            t.assert_graded("completed");
            assert!(t.record["capture_notes"].is_null(), "{:#}", t.record);
            assert_eq!(t.change("d/e/f/bottom.txt")["kind"], "added");
            assert_shown(&t);
            t.assert_rescored();
            assert_scratch_removed(&t);

            // 1,500 levels (a path of 3 KB, under PATH_MAX): captured whole.
            let Some(t) = trial(
                "row3-1500",
                who,
                copy,
                false,
                SUCCESS_DEEP,
                &[&deep_tree(1500)],
            ) else {
                return;
            };
            t.assert_graded("completed");
            assert!(
                t.record["capture_notes"].is_null(),
                "{who:?} copy={copy}: {}",
                t.record["capture_notes"]
            );
            let bottom = format!("{}bottom.txt", "d/".repeat(1500));
            assert_eq!(t.change(&bottom)["kind"], "added");
            assert_shown(&t);
            t.assert_rescored();
            assert_scratch_removed(&t);

            // 10,000 levels (20 KB, past PATH_MAX): captured whole too.
            let Some(t) = trial(
                "row3-10000",
                who,
                copy,
                false,
                SUCCESS_DEEP,
                &[&deep_tree(10_000)],
            ) else {
                return;
            };
            t.assert_graded("completed");
            assert!(
                t.record["capture_notes"].is_null(),
                "{who:?} copy={copy}: {}",
                t.record["capture_notes"]
            );
            let bottom = format!("{}bottom.txt", "d/".repeat(10_000));
            assert!(bottom.len() > 20_000);
            let (list, change, content) = stored(&t, &bottom);
            assert_eq!(change["kind"], "added", "{who:?} copy={copy}");
            assert_eq!(change["size"], 4);
            assert_eq!(
                change["hash"].as_str(),
                Some(blake3::hash(b"deep").to_hex().as_str())
            );
            assert_eq!(content, b"deep", "{who:?} copy={copy}");
            // Every folder on the way is stored, the deepest too.
            let deepest = format!("{}d", "d/".repeat(9_999));
            assert_eq!(list.as_array().map(Vec::len), Some(10_001));
            assert!(list
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["path"] == deepest.as_str() && c["dir"] == true));
            drop(list);
            // The record lists the file (files before folders, within its bounds).
            assert_eq!(t.change(&bottom)["kind"], "added");
            let shown = assert_shown(&t);
            assert!(shown.contains("completed"), "{shown:.2000}");
            assert!(
                shown.contains("bottom.txt  (4 bytes)"),
                "{who:?} copy={copy}: the deepest file is not shown"
            );
            // The viewer's pages, written out as the export does.
            let (out, page) = t.lab.export_html(&t.lab.run_id(), "export.html");
            assert_eq!(out.code, 0, "{}", out.stderr);
            assert!(page.is_file());
            t.assert_rescored();
            assert_scratch_removed(&t);
        }
    }
}
