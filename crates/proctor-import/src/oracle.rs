//! `agents/oracle/TASK_ID.toml`: the scripted agent that runs the task's reference solution.
//!
//! The scripted agent runs its steps with `sh -c` in the workspace and cannot read the suite
//! folder, so the solution's files are written out by the steps themselves (heredocs; base64
//! for binary files) into `/tmp/proctor-solution`, which every trial has private and writable,
//! and the entry script is run from the workspace, as Harbor runs `solve.sh` from the image's
//! working directory. Nothing is added to the workspace.

use crate::files::FileEntry;
use crate::model::{Format, OraclePlan};
use crate::text::{base64_lines, heredoc_marker, rewrite_abs_path, shell_quote, toml_string};

/// Where the oracle lays the solution's files.
pub(crate) const SOLUTION_DIR: &str = "/tmp/proctor-solution";

/// The oracle file's text, or the error reading a solution file.
pub(crate) fn script(
    format: Format,
    task_id: &str,
    plan: &OraclePlan,
) -> Result<String, (std::path::PathBuf, std::io::Error)> {
    let mut s = format!(
        "# Oracle for the task `{task_id}`, written by `proctor import {}`; see docs/import.md.\n",
        format.command()
    );
    let Some(entry) = &plan.entry else {
        s.push_str("# The task has no runnable reference solution");
        if let Some(why) = &plan.missing {
            s.push_str(&format!(" ({why})"));
        }
        s.push_str(
            ".\n# This oracle does nothing, so `proctor validate --oracle` reports the task until\n# [[steps]] that solve it are written here.\n",
        );
        return Ok(s);
    };
    s.push_str(&format!(
        "# It writes the task's solution files (a copy of the originals is in\n# agents/oracle/files/{task_id}/) into {SOLUTION_DIR} and runs {entry} from the\n# workspace.\n"
    ));
    if let Some(dir) = plan.expected_dir {
        s.push_str(&format!(
            "# The solution's references to {dir} are rewritten to {SOLUTION_DIR}.\n"
        ));
    }
    s.push('\n');
    steps(&mut s, plan, entry, "steps")?;
    Ok(s)
}

/// The oracle of a task in steps: one `[[turns]]` entry per step, each writing that step's
/// solution files and running its entry script (a step without one does nothing).
pub(crate) fn turns_script(
    format: Format,
    task_id: &str,
    plans: &[(&str, &OraclePlan)],
) -> Result<String, (std::path::PathBuf, std::io::Error)> {
    let mut s = format!(
        "# Oracle for the task in steps `{task_id}`, written by `proctor import {}`; see docs/import.md.\n# Each turn writes its step's solution files into {SOLUTION_DIR} and runs its entry script.\n\n",
        format.command()
    );
    for (name, plan) in plans {
        s.push_str(&format!("# step `{name}`\n[[turns]]\n\n"));
        if let Some(entry) = &plan.entry {
            steps(&mut s, plan, entry, "turns.steps")?;
        }
    }
    Ok(s)
}

/// The `[[TABLE]]` entries that lay `plan`'s files and run its `entry`.
fn steps(
    s: &mut String,
    plan: &OraclePlan,
    entry: &str,
    table: &str,
) -> Result<(), (std::path::PathBuf, std::io::Error)> {
    step(
        s,
        table,
        &format!("rm -rf {SOLUTION_DIR} && mkdir -p {SOLUTION_DIR}"),
    );
    for file in &plan.files {
        let bytes = std::fs::read(&file.src).map_err(|e| (file.src.clone(), e))?;
        step(s, table, &write_file(file, &bytes, plan.expected_dir));
    }
    let mut run = String::new();
    for (k, v) in &plan.env {
        run.push_str(&format!("{k}={} ", shell_quote(v)));
    }
    run.push_str(&format!("bash {SOLUTION_DIR}/{}", shell_quote(entry)));
    step(s, table, &run);
    Ok(())
}

/// A `[[TABLE]]` entry running `run`.
fn step(out: &mut String, table: &str, run: &str) {
    out.push_str(&format!("[[{table}]]\nrun = "));
    out.push_str(&toml_string(run));
    out.push_str("\n\n");
}

/// The shell text that writes `file` (with `bytes`) under the solution folder.
fn write_file(file: &FileEntry, bytes: &[u8], expected_dir: Option<&str>) -> String {
    let target = format!("{SOLUTION_DIR}/{}", file.rel);
    let quoted = shell_quote(&target);
    let mut s = String::new();
    if let Some((parent, _)) = file.rel.rsplit_once('/') {
        s.push_str(&format!(
            "mkdir -p {}\n",
            shell_quote(&format!("{SOLUTION_DIR}/{parent}"))
        ));
    }
    match std::str::from_utf8(bytes) {
        Ok(text) if !text.contains('\r') => {
            let text = match expected_dir {
                Some(dir) => rewrite_abs_path(text, dir, SOLUTION_DIR),
                None => text.to_string(),
            };
            let marker = heredoc_marker(&text);
            s.push_str(&format!("cat > {quoted} <<'{marker}'\n{text}"));
            if !text.ends_with('\n') && !text.is_empty() {
                s.push('\n');
            }
            s.push_str(&format!("{marker}\n"));
        }
        _ => {
            s.push_str(&format!(
                "base64 -d > {quoted} <<'PROCTOR_EOF'\n{}\nPROCTOR_EOF\n",
                base64_lines(bytes)
            ));
        }
    }
    if file.executable {
        s.push_str(&format!("chmod +x {quoted}\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn oracle_writes_files_and_runs_the_entry() {
        let dir = tempfile::tempdir().expect("tempdir");
        let solve = dir.path().join("solve.sh");
        std::fs::write(&solve, "#!/bin/bash\nbash /solution/helper.sh\n").expect("write");
        let bin = dir.path().join("data.bin");
        std::fs::write(&bin, [0xffu8, 0, 1]).expect("write");
        let plan = OraclePlan {
            files: vec![
                FileEntry {
                    src: bin,
                    rel: "sub/data.bin".into(),
                    executable: false,
                },
                FileEntry {
                    src: solve,
                    rel: "solve.sh".into(),
                    executable: true,
                },
            ],
            entry: Some("solve.sh".into()),
            expected_dir: Some("/solution"),
            env: BTreeMap::from([("MODE".to_string(), "fast run".to_string())]),
            missing: None,
        };
        let text = script(Format::Harbor, "t", &plan).expect("script");
        let parsed: toml::Table = toml::from_str(&text).expect(&text);
        let steps = parsed["steps"].as_array().expect("steps");
        let runs: Vec<&str> = steps
            .iter()
            .map(|s| s["run"].as_str().expect("run"))
            .collect();
        assert_eq!(
            runs[0],
            "rm -rf /tmp/proctor-solution && mkdir -p /tmp/proctor-solution"
        );
        assert!(runs[1].starts_with("mkdir -p /tmp/proctor-solution/sub\nbase64 -d > /tmp/proctor-solution/sub/data.bin <<'PROCTOR_EOF'\n/wAB\n"));
        assert!(
            runs[2].contains("bash /tmp/proctor-solution/helper.sh\n"),
            "{}",
            runs[2]
        );
        assert!(runs[2].ends_with("chmod +x /tmp/proctor-solution/solve.sh\n"));
        assert_eq!(
            runs[3],
            "MODE='fast run' bash /tmp/proctor-solution/solve.sh"
        );
    }

    #[test]
    fn missing_solution_is_a_null_oracle_that_says_why() {
        let plan = OraclePlan {
            files: Vec::new(),
            entry: None,
            expected_dir: None,
            env: BTreeMap::new(),
            missing: Some("no solution/solve.sh".into()),
        };
        let text = script(Format::Harbor, "t", &plan).expect("script");
        let parsed: toml::Table = toml::from_str(&text).expect(&text);
        assert!(parsed.is_empty());
        assert!(text.contains("no solution/solve.sh"));
    }
}
