//! Between launch and execute, the task's `setup` commands: they build the start state in the
//! trial's own sandbox (its services up, its network, limits and image), before the agent
//! starts. What they change becomes the start state the agent's changes are read against: the
//! start state's layers are laid into one folder (`setup-base` in the scratch), the commands run
//! in it, and the agent's workspace is made over it alone. The setup's own changes are kept in
//! the trial's `setup/changes/` (so a rescore can rebuild the same start state) and listed in the
//! record, with the commands' output; a command that fails makes the trial `errored (setup)`,
//! naming the command, its exit status and the head of its output.
//!
//! The agent cannot make setup's work count as its own (it is below the agent's workspace, not
//! among its changes), nor hide its own changes inside setup's (they are read against the
//! state setup left). Setup's calls of allowed commands do not go through the shims, so they are
//! never the agent's calls; events its services log during setup are moved out of the agent's
//! record, into `setup/services/`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use proctor_sandbox::diff::{manifest_changes, Manifest};
use proctor_sandbox::Workspace;
use proctor_score::endstate::HEAD_BYTES;

use crate::layers::copy_tree;
use crate::record::SetupRecord;
use crate::trial::context::{StartCopy, Trial};
use crate::trial::error::{Stage, TrialError};
use crate::trial::launch::Launched;
use crate::trial::prepare::{Prepared, TrialWorkspace};

/// The folder in a trial's folder that holds what its setup left: `changes/`, `stdout`,
/// `stderr`, `services/`.
pub const SETUP_DIR: &str = "setup";

/// What the setup driver prints on stderr before it exits with a failed command's status.
const FAILED_MARK: &str = "proctor-setup: command ";

/// Lines of a failed setup's output quoted in the trial's reason, and characters of each.
const REASON_LINES: usize = 5;
const REASON_WIDTH: usize = 200;

/// Runs the trial's `setup` commands, if it has any, and makes what they leave the start state
/// of the agent's workspace (`prepared` and `launched.spec` are changed to it). Returns the
/// setup's record; `None` when the task has no setup.
pub fn setup(
    trial: &Trial,
    prepared: &mut Prepared,
    launched: &mut Launched,
) -> Result<Option<SetupRecord>, TrialError> {
    let commands = trial.settings.setup.clone();
    if commands.is_empty() {
        return Ok(None);
    }
    let fail = |what: String| TrialError::harness(Stage::Launch, what);
    let paths = &prepared.paths;
    let base = paths.work.join("setup-base");
    for layer in prepared.lowers.iter().rev() {
        copy_tree(layer, &base)
            .map_err(|e| fail(format!("cannot lay out the start state for setup: {e}")))?;
    }
    std::fs::create_dir_all(&base)
        .map_err(|e| fail(format!("cannot lay out the start state for setup: {e}")))?;
    let before = Manifest::build(&base)
        .map_err(|e| fail(format!("cannot read the start state before setup: {e}")))?;
    let (stdout, stderr) = (
        paths.work.join("setup.stdout"),
        paths.work.join("setup.stderr"),
    );
    let spec = setup_spec(launched, paths, &base, &commands, (&stdout, &stderr));
    let started = std::time::Instant::now();
    let report = proctor_sandbox::run(&spec).map_err(|e| {
        TrialError::harness(Stage::Launch, format!("the setup's sandbox failed: {e}"))
    })?;
    let elapsed = started.elapsed();
    let kept = paths.trial_dir.join(SETUP_DIR);
    std::fs::create_dir_all(&kept)
        .map_err(|e| fail(format!("cannot keep the setup's output: {e}")))?;
    let (out_head, out_bytes) = keep_output(&stdout, &kept.join("stdout"));
    let (err_head, err_bytes) = keep_output(&stderr, &kept.join("stderr"));
    keep_service_events(&spec.services, &kept.join("services"))
        .map_err(|e| fail(format!("cannot move the setup's service events aside: {e}")))?;
    let mut record = SetupRecord {
        commands: commands.clone(),
        failed: None,
        exit: report.exit_code,
        signal: report.signal,
        timed_out: report.timed_out,
        milliseconds: elapsed.as_millis() as u64,
        stdout_bytes: out_bytes,
        stdout_head: out_head,
        stderr_bytes: err_bytes,
        stderr_head: err_head,
        changes: Vec::new(),
    };
    if let Some(why) = &report.not_started {
        return Err(TrialError::setup(
            format!("the setup could not start: {why}"),
            record,
        ));
    }
    if report.timed_out || report.exit_code != Some(0) {
        let failed = failed_command(&record.stderr_head, commands.len());
        record.failed = failed;
        let reason = failure_reason(&record, &commands, trial.settings.wall_timeout.as_secs());
        return Err(TrialError::setup(reason, record));
    }
    let changes = manifest_changes(&before, &base, &[])
        .map_err(|e| fail(format!("cannot read what setup changed: {e}")))?;
    let mut notes = Vec::new();
    record.changes = crate::trial::capture::capture_changes(
        &base,
        changes,
        &kept.join("changes"),
        &HashSet::new(),
        None,
        report.isolation.ids.as_ref(),
        &mut notes,
    )
    .map_err(|e| fail(format!("cannot keep what setup changed: {e}")))?
    .changes;
    if let Some(n) = notes.first() {
        return Err(fail(format!(
            "cannot keep what setup changed at {}: {}",
            n.path, n.cause
        )));
    }
    start_from(prepared, base).map_err(|e| {
        fail(format!(
            "cannot make the workspace over setup's start state: {e}"
        ))
    })?;
    launched.spec.workspace = prepared.sandbox_workspace();
    Ok(Some(record))
}

/// The sandbox of the setup commands: the trial's own, over `base` (bound, not overlaid), with
/// the driver of `commands` as its command, its output in `out`, and no shims on `PATH` (setup
/// is not the agent: its commands are not interface calls). What setup changes outside the
/// workspace goes with its sandbox: the start state is the workspace it leaves.
fn setup_spec(
    launched: &Launched,
    paths: &crate::trial::paths::TrialPaths,
    base: &Path,
    commands: &[String],
    (stdout, stderr): (&Path, &Path),
) -> proctor_sandbox::SandboxSpec {
    let mut spec = launched.spec.clone();
    spec.workspace = Workspace::Bind {
        dir: base.to_path_buf(),
    };
    if !paths.namespaces {
        spec.workspace_inside = base.to_path_buf();
    }
    spec.command = driver(commands);
    spec.stdout = stdout.to_path_buf();
    spec.stderr = stderr.to_path_buf();
    if let Some(root) = spec.root_image.as_mut() {
        root.keep_upper = false;
    }
    let shims = paths.shims.inside.display().to_string();
    for (name, value) in spec.env.iter_mut() {
        if name == "PATH" {
            *value = without_dir(value, &shims);
        }
    }
    spec
}

/// The agent's workspace over `base` alone: an overlay's lowers, or the start state's copy that
/// its sandbox copies (with its own manifest).
fn start_from(prepared: &mut Prepared, base: PathBuf) -> std::io::Result<()> {
    if let TrialWorkspace::Copy { start, .. } = &mut prepared.workspace {
        let manifest = Manifest::build(&base).map_err(std::io::Error::other)?;
        *start = Arc::new(StartCopy {
            dir: base.clone(),
            manifest,
        });
    }
    prepared.lowers = vec![base];
    Ok(())
}

/// The command line that runs `commands` in order, each with `sh -c`, and stops at the first
/// that fails, saying which on stderr and exiting with its status.
pub fn driver(commands: &[String]) -> Vec<String> {
    let script = format!(
        "n=0; for c in \"$@\"; do n=$((n+1)); /bin/sh -c \"$c\"; s=$?; if [ $s -ne 0 ]; then echo \"{FAILED_MARK}$n exited $s\" >&2; exit $s; fi; done"
    );
    let mut argv = vec![
        "/bin/sh".to_string(),
        "-c".to_string(),
        script,
        "proctor-setup".to_string(),
    ];
    argv.extend(commands.iter().cloned());
    argv
}

/// `path` (a `:`-separated list) without `dir`.
fn without_dir(path: &str, dir: &str) -> String {
    path.split(':')
        .filter(|d| *d != dir)
        .collect::<Vec<_>>()
        .join(":")
}

/// Copies a setup output into the trial's folder; returns its head (the first [`HEAD_BYTES`],
/// lossily decoded) and its size. A missing output is empty.
fn keep_output(from: &Path, to: &Path) -> (String, u64) {
    let bytes = std::fs::read(from).unwrap_or_default();
    if !bytes.is_empty() {
        let _ = std::fs::write(to, &bytes);
    }
    let head = &bytes[..bytes.len().min(HEAD_BYTES)];
    (
        String::from_utf8_lossy(head).into_owned(),
        bytes.len() as u64,
    )
}

/// Moves each service's `events.jsonl` (what it logged during setup) to `to/NAME.events.jsonl`,
/// so that the agent's record holds only what happened while the agent ran.
fn keep_service_events(
    services: &[proctor_sandbox::ServiceSpec],
    to: &Path,
) -> std::io::Result<()> {
    for s in services {
        let events = s.dir_host.join("events.jsonl");
        if events.is_file() {
            std::fs::create_dir_all(to)?;
            let kept = to.join(format!("{}.events.jsonl", s.name));
            // The scratch (often a tmpfs) and the store are usually two file systems: a
            // rename that cannot cross them is a copy, then the source goes.
            if std::fs::rename(&events, &kept).is_err() {
                std::fs::copy(&events, &kept)?;
                std::fs::remove_file(&events)?;
            }
        }
    }
    Ok(())
}

/// The 1-based index of the command that failed, from the driver's last words on stderr.
fn failed_command(stderr: &str, count: usize) -> Option<usize> {
    stderr
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix(FAILED_MARK))
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .filter(|n| (1..=count).contains(n))
}

/// Why a failed setup failed, in a sentence: which command, how it ended, its output's head.
fn failure_reason(record: &SetupRecord, commands: &[String], timeout: u64) -> String {
    let which = match record.failed {
        Some(n) => format!(
            "setup command {n} of {} (`{}`)",
            commands.len(),
            commands[n - 1]
        ),
        None => format!("setup ({} commands)", commands.len()),
    };
    let how = if record.timed_out {
        format!("did not finish within the trial's {timeout} s (wall_timeout_seconds)")
    } else if let Some(sig) = record.signal {
        format!("was killed by signal {sig}")
    } else {
        format!(
            "exited {}",
            record
                .exit
                .map_or("without a status".to_string(), |e| e.to_string())
        )
    };
    let output: Vec<String> = record
        .stderr_head
        .lines()
        .chain(record.stdout_head.lines())
        .filter(|l| !l.starts_with(FAILED_MARK) && !l.trim().is_empty())
        .take(REASON_LINES)
        .map(quoted)
        .collect();
    let said = if output.is_empty() {
        "; it printed nothing".to_string()
    } else {
        format!("; its output begins: {}", output.join(" | "))
    };
    format!("{which} {how}{said} (all of it in {SETUP_DIR}/stdout and {SETUP_DIR}/stderr)")
}

/// One line of output as the reason quotes it: control characters escaped, cut at
/// [`REASON_WIDTH`] characters.
fn quoted(line: &str) -> String {
    let mut out = String::new();
    for (i, c) in line.chars().enumerate() {
        if i == REASON_WIDTH {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_driver_runs_each_command_and_names_the_first_that_fails() {
        let dir = tempfile::tempdir().unwrap();
        let argv = driver(&[
            "echo one > a".to_string(),
            "exit 3".to_string(),
            "echo never > b".to_string(),
        ]);
        let out = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(failed_command(&stderr, 3), Some(2), "{stderr}");
        assert!(dir.path().join("a").is_file() && !dir.path().join("b").exists());
        // A count the driver cannot have printed is no command.
        assert_eq!(failed_command("proctor-setup: command 9 exited 1", 3), None);
        assert_eq!(failed_command("nothing", 3), None);
    }

    #[test]
    fn the_shims_leave_the_setup_s_path() {
        assert_eq!(
            without_dir("/run/proctor/shims:/usr/bin:/bin", "/run/proctor/shims"),
            "/usr/bin:/bin"
        );
    }

    #[test]
    fn a_failure_says_which_command_how_and_what_it_printed() {
        let record = SetupRecord {
            commands: vec!["true".into(), "sqlite3 shop.db < seed.sql".into()],
            failed: Some(2),
            exit: Some(1),
            signal: None,
            timed_out: false,
            milliseconds: 100,
            stdout_bytes: 0,
            stdout_head: String::new(),
            stderr_bytes: 60,
            stderr_head: "sh: 1: cannot open seed.sql: No such file\x1b[2J\nproctor-setup: command 2 exited 1\n".into(),
            changes: Vec::new(),
        };
        let reason = failure_reason(&record, &record.commands, 30);
        assert_eq!(
            reason,
            "setup command 2 of 2 (`sqlite3 shop.db < seed.sql`) exited 1; its output begins: sh: 1: cannot open seed.sql: No such file\\u{1b}[2J (all of it in setup/stdout and setup/stderr)"
        );
    }
}
