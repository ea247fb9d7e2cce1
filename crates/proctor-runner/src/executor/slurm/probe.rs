//! Whether the Slurm nodes see the store (and run the proctor binary): the submitter writes a
//! random token into a file in the store, a one-task job reads it and writes it back beside it
//! with its node's name (`proctor __store-probe FILE`), and the submitter reads the answer.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use proctor_suite::shell::quote;

use super::client::{job_end, queued_tasks, sbatch, scancel, Client};
use crate::error::{Context, RunError};

/// How long the store probe job may take to run before the check gives up.
const PROBE_TIMEOUT: Duration = Duration::from_secs(300);

/// Checks that the nodes see the store (and run the binary): writes a random token into a
/// file in the store, runs a one-task job that reads it and writes back beside it, and reads
/// the answer. Returns the node the probe ran on.
pub fn probe_store(slurm: &Client, store: &Path, bin: &Path) -> Result<String, RunError> {
    let token = format!(
        "{:x}{:x}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    let file = store.join(format!(".slurm-probe-{token}"));
    let seen = probe_answer_path(&file);
    std::fs::write(&file, &token)
        .with_context(|| format!("cannot write the probe file {}", file.display()))?;
    let cleanup = || {
        let _ = std::fs::remove_file(&file);
        let _ = std::fs::remove_file(&seen);
    };
    let mut args = slurm.common();
    args.extend([
        "--job-name=proctor-store-probe".to_string(),
        "--output=/dev/null".to_string(),
        "--ntasks=1".to_string(),
        "--wrap".to_string(),
        format!(
            "exec {} __store-probe {}",
            quote(&bin.display().to_string()),
            quote(&file.display().to_string())
        ),
    ]);
    let job = match sbatch(&args) {
        Ok(job) => job,
        Err(e) => {
            cleanup();
            return Err(e);
        }
    };
    let deadline = Instant::now() + probe_timeout();
    loop {
        let queued = queued_tasks(&job)?;
        if queued.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            scancel(&job);
            cleanup();
            let states: Vec<String> = queued.into_values().collect();
            return Err(RunError::usage(
                format!(
                    "the store probe job {job} did not run within {} s (state: {})",
                    probe_timeout().as_secs(),
                    states.join(", ")
                ),
                "the check needs one task to run: pick a partition with free nodes (--partition), or see `squeue -j` for why it waits",
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let answer = std::fs::read_to_string(&seen).ok();
    cleanup();
    match answer.as_deref().and_then(|a| a.split_once(' ')) {
        Some((t, node)) if t == token => Ok(node.trim().to_string()),
        _ => {
            let how = job_end(&job);
            Err(RunError::usage(
                format!(
                    "the store at {} is not on a file system the Slurm nodes see: a probe job ({job}{how}) did not read the file written here",
                    store.display()
                ),
                format!(
                    "put the store on a shared file system (NFS, Lustre, GPFS, CephFS) with --store, and proctor too (it ran {}; --proctor-bin)",
                    bin.display()
                ),
            ))
        }
    }
}

fn probe_timeout() -> Duration {
    std::env::var("PROCTOR_SLURM_PROBE_TIMEOUT")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .map_or(PROBE_TIMEOUT, Duration::from_secs)
}

fn probe_answer_path(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".seen");
    PathBuf::from(name)
}

/// `proctor __store-probe FILE`: on a node, reads the token the submitter wrote and writes it
/// back with this node's name.
pub fn store_probe(file: &Path) -> Result<(), RunError> {
    let token = std::fs::read_to_string(file).map_err(|e| {
        RunError::usage(
            format!("cannot read {} on this node: {e}", file.display()),
            "the store must be on a file system every node sees",
        )
    })?;
    let node = proctor_store::HostInfo::detect().hostname;
    proctor_store::atomic_write(
        probe_answer_path(file),
        format!("{token} {node}\n").as_bytes(),
    )
    .context("cannot write the probe's answer")
}
