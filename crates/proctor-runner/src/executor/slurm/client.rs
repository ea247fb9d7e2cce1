//! Slurm's client commands (`sbatch`, `squeue`, `sinfo`, `scontrol`, `scancel`) as the Slurm
//! executor uses them: each failure is an error that names what to fix.

use std::collections::BTreeMap;
use std::process::Command;

use crate::error::{Failure, RunError};
use crate::executor::record::BatchOptions;

/// `sbatch`, `squeue`, `sinfo`, `scontrol` and `scancel`, with the options every job of a run
/// shares.
pub struct Client {
    partition: Option<String>,
    account: Option<String>,
    time: Option<String>,
    extra: Vec<String>,
}

impl Client {
    /// The options of `args` every job gets.
    pub fn new(args: &BatchOptions) -> Client {
        Client {
            partition: args.partition.clone(),
            account: args.account.clone(),
            time: args.time.clone(),
            extra: args.slurm_args.clone(),
        }
    }

    /// The sbatch options every job of the run gets.
    pub fn common(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(p) = &self.partition {
            out.push(format!("--partition={p}"));
        }
        if let Some(a) = &self.account {
            out.push(format!("--account={a}"));
        }
        if let Some(t) = &self.time {
            out.push(format!("--time={t}"));
        }
        out.extend(self.extra.iter().cloned());
        out
    }
}

/// Runs a Slurm client command; a missing command is a usage error naming what to install.
pub fn tool(name: &str, args: &[String]) -> Result<std::process::Output, RunError> {
    match Command::new(name).args(args).output() {
        Ok(out) => Ok(out),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(RunError::usage(
            format!("`{name}` was not found on PATH: --executor slurm needs Slurm's client commands"),
            "run proctor on a machine that submits to your cluster (a login node; on Debian: apt-get install slurm-client), or use --executor local",
        )),
        Err(e) => Err(Failure::new(format!("cannot run {name}"), e).into()),
    }
}

/// A Slurm command's output as trimmed text (invalid UTF-8 replaced).
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).trim().to_string()
}

/// `sbatch --version`, which also shows that sbatch is there.
pub fn slurm_version() -> Result<String, RunError> {
    let out = tool("sbatch", &["--version".to_string()])?;
    if !out.status.success() {
        return Err(RunError::usage(
            format!("`sbatch --version` failed: {}", text(&out.stderr)),
            "check your Slurm installation (`sinfo` should answer)",
        ));
    }
    Ok(text(&out.stdout))
}

/// Checks that the partition asked for exists (or that the cluster has a default one).
pub fn check_partition(partition: Option<&str>) -> Result<(), RunError> {
    let out = tool("sinfo", &["-h".into(), "-o".into(), "%P".into()])?;
    if !out.status.success() {
        return Err(RunError::usage(
            format!("Slurm does not answer: sinfo: {}", text(&out.stderr)),
            "check that slurmctld runs and this machine may reach it (`sinfo`)",
        ));
    }
    let listed = text(&out.stdout);
    let names: Vec<&str> = listed.lines().map(str::trim).collect();
    let plain: Vec<&str> = names.iter().map(|n| n.trim_end_matches('*')).collect();
    match partition {
        Some(p) if !plain.contains(&p) => Err(RunError::usage(
            format!("Slurm has no partition `{p}`"),
            format!(
                "pass one of this cluster's partitions with --partition: {}",
                plain.join(", ")
            ),
        )),
        None if !names.iter().any(|n| n.ends_with('*')) => Err(RunError::usage(
            "this Slurm cluster has no default partition",
            format!("name one with --partition: {}", plain.join(", ")),
        )),
        _ => Ok(()),
    }
}

/// Asks Slurm whether it would take a job with these options, submitting nothing.
pub fn test_only(slurm: &Client, extra: &[String]) -> Result<(), RunError> {
    let mut args = vec!["--test-only".to_string()];
    args.extend(slurm.common());
    args.extend(extra.iter().cloned());
    args.extend(["--wrap".to_string(), "true".to_string()]);
    let out = tool("sbatch", &args)?;
    if !out.status.success() {
        return Err(rejected(&out.stderr));
    }
    Ok(())
}

/// A job the scheduler refused, with its words.
pub fn rejected(stderr: &[u8]) -> RunError {
    RunError::usage(
        format!("Slurm rejected the job: {}", text(stderr)),
        "fix the option it names (--partition, --account, --time, --array-throttle or a --slurm-arg); nothing was submitted",
    )
}

/// `sbatch --parsable ARGS`: the job id.
pub fn sbatch(args: &[String]) -> Result<String, RunError> {
    let mut all = vec!["--parsable".to_string()];
    all.extend(args.iter().cloned());
    let out = tool("sbatch", &all)?;
    if !out.status.success() {
        return Err(rejected(&out.stderr));
    }
    let id = text(&out.stdout);
    let id = id.lines().last().unwrap_or_default();
    let id = id.split(';').next().unwrap_or_default().trim().to_string();
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit()) {
        return Err(RunError::message(format!(
            "sbatch answered `{id}`, not a job id"
        )));
    }
    Ok(id)
}

/// Cancels a Slurm job, best effort: a job already gone (or no `scancel`) is left as it is.
pub fn scancel(job: &str) {
    let _ = Command::new("scancel").arg(job).output();
}

/// The job's tasks that Slurm still has and that have not ended (pending, held, requeued,
/// running, completing ...), by array task index: their state. Empty once every task has ended.
///
/// Every state is asked for (`-t all`): by default squeue leaves out some passing states (a
/// task being requeued), and a follower that saw no task then would take the job for ended.
pub fn queued_tasks(job: &str) -> Result<BTreeMap<String, String>, RunError> {
    let mut tasks = job_states(job)?;
    tasks.retain(|_, state| !ended(state));
    Ok(tasks)
}

/// Whether a job state (squeue's `%T`) is final.
pub fn ended(state: &str) -> bool {
    matches!(
        state,
        "COMPLETED"
            | "FAILED"
            | "CANCELLED"
            | "TIMEOUT"
            | "NODE_FAIL"
            | "PREEMPTED"
            | "BOOT_FAIL"
            | "DEADLINE"
            | "OUT_OF_MEMORY"
            | "SPECIAL_EXIT"
            | "REVOKED"
    )
}

/// Whether a job state (squeue's `%T`) is waiting to run.
pub fn waiting(state: &str) -> bool {
    state == "PENDING" || state.starts_with("REQUEUE") || state.ends_with("_HOLD")
}

/// Every task of the job that Slurm still knows, ended or not, by array task index.
pub fn job_states(job: &str) -> Result<BTreeMap<String, String>, RunError> {
    let args: Vec<String> = ["-h", "-r", "-t", "all", "-j", job, "-o", "%K|%T"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let out = tool("squeue", &args)?;
    if !out.status.success() {
        let err = text(&out.stderr);
        // A job that left the controller's memory is not queued.
        if err.contains("Invalid job id") {
            return Ok(BTreeMap::new());
        }
        return Err(RunError::message(format!("squeue -j {job}: {err}")));
    }
    let mut tasks = BTreeMap::new();
    for line in text(&out.stdout).lines() {
        if let Some((task, state)) = line.split_once('|') {
            tasks.insert(task.trim().to_string(), state.trim().to_string());
        }
    }
    Ok(tasks)
}

/// `, STATE exit CODE on NODE` of a finished job, as `scontrol` still knows it.
pub fn job_end(job: &str) -> String {
    let Ok(out) = Command::new("scontrol")
        .args(["show", "job", "-o", job])
        .output()
    else {
        return String::new();
    };
    let line = text(&out.stdout);
    let field = |key: &str| {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(key))
            .map(str::to_string)
    };
    match (field("JobState="), field("ExitCode="), field("NodeList=")) {
        (Some(s), Some(c), Some(n)) => format!(", {s} with exit code {c} on {n}"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_states_are_read_as_waiting_running_or_ended() {
        for s in [
            "PENDING",
            "REQUEUED",
            "REQUEUE_HOLD",
            "REQUEUE_FED",
            "RESV_DEL_HOLD",
        ] {
            assert!(waiting(s) && !ended(s), "{s}");
        }
        for s in [
            "RUNNING",
            "COMPLETING",
            "CONFIGURING",
            "SUSPENDED",
            "SIGNALING",
        ] {
            assert!(!waiting(s) && !ended(s), "{s}");
        }
        for s in [
            "COMPLETED",
            "FAILED",
            "CANCELLED",
            "TIMEOUT",
            "NODE_FAIL",
            "OUT_OF_MEMORY",
        ] {
            assert!(ended(s) && !waiting(s), "{s}");
        }
    }
}
