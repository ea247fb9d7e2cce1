//! Helpers shared by the import tests: writing task folders, running generated scripts, and
//! validating the generated suite with proctor's own reader.

#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use proctor_suite::Suite;

/// Writes `text` to `root/rel`, creating folders.
pub fn write(root: &Path, rel: &str, text: &str) -> PathBuf {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(&path, text).expect("write");
    path
}

/// Writes an executable script.
pub fn write_exec(root: &Path, rel: &str, text: &str) -> PathBuf {
    let path = write(root, rel, text);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

/// Copies a folder tree.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// Runs `sh -c command` in `dir`, as proctor runs a check (and a scripted agent's step).
pub fn sh(dir: &Path, command: &str) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(dir)
        .output()
        .expect("sh runs")
}

/// A fresh end state for task `id`: the workspace files given, with the holdout laid over it,
/// as proctor lays it for a check.
pub fn check_workspace(suite: &Path, id: &str, files: &[(&str, &str)]) -> tempfile::TempDir {
    let ws = tempfile::tempdir().expect("tempdir");
    for (rel, text) in files {
        write(ws.path(), rel, text);
    }
    copy_tree(&suite.join("holdout").join(id), ws.path());
    ws
}

/// The `run` of every step of a scripted-agent file.
pub fn oracle_steps(suite: &Path, id: &str) -> Vec<String> {
    let text = std::fs::read_to_string(suite.join("agents/oracle").join(format!("{id}.toml")))
        .expect("oracle file");
    let table: toml::Table = toml::from_str(&text).expect("oracle parses");
    table
        .get("steps")
        .and_then(|s| s.as_array())
        .map(|steps| {
            steps
                .iter()
                .map(|s| s["run"].as_str().expect("run").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Runs the oracle of task `id` step by step in `workspace`, as the scripted agent does (each
/// step with `sh -c` in the workspace), asserting each step succeeds; then removes the folder
/// the oracle lays the solution in.
pub fn run_oracle(suite: &Path, id: &str, workspace: &Path) {
    for step in oracle_steps(suite, id) {
        let r = sh(workspace, &step);
        assert!(r.status.success(), "step {step:?}: {r:?}");
    }
    let _ = std::fs::remove_dir_all("/tmp/proctor-solution");
}

/// Asserts that proctor's own reader parses the suite and its validator finds no problem at all.
pub fn assert_valid(suite: &Path) {
    let parsed = Suite::parse(suite)
        .unwrap_or_else(|p| panic!("the generated suite does not parse: {p} ({:?})", p.help));
    let problems: Vec<String> =
        proctor_suite::validate::problems_with(&parsed, &Default::default())
            .iter()
            .map(|p| format!("{p} ({:?})", p.help))
            .collect();
    assert!(problems.is_empty(), "problems: {problems:#?}");
}

/// Every warning of `report` as `TASK_ID: MESSAGE`, in order.
pub fn warning_lines(report: &proctor_import::ImportReport) -> Vec<String> {
    report
        .warnings
        .iter()
        .map(|w| format!("{}: {}", w.task, w.message))
        .collect()
}
