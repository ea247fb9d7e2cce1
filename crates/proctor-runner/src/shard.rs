//! Scale-out: a run's trials split into shards that workers on other machines run (`proctor
//! worker RUN --shard I/K`), and the claims that keep two workers from running the same trial.
//!
//! Everything here lives in the run's folder on a file system every node sees, under
//! [`EXECUTOR_DIR`]:
//!
//! ```text
//! runs/RUN_ID/executor/
//!   batch-N.json           one submission's shards: which trial ids each array task runs
//!   batch-N/shard-I.json   what array task I of submission N did (started, ended, its node)
//!   claims/TRIAL_ID        made atomically (hard link of a complete file) by the worker about
//!                          to run the trial; names the job, array task, node and pid
//!   logs/                  the workers' stdout and stderr, as the scheduler writes them
//! ```
//!
//! Workers write trial folders, claims and shard files only: never `index.sqlite` (SQLite is
//! unsafe over NFS) and never `run.json` (its submitter owns it).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use proctor_store::Placement;
use proctor_suite::plan::PlannedTrial;
use proctor_suite::Suite;
use serde::{Deserialize, Serialize};

/// The folder, inside a run's folder, of everything an executor other than the local one keeps.
pub const EXECUTOR_DIR: &str = "executor";
/// The folder of claims, inside [`EXECUTOR_DIR`].
pub const CLAIMS_DIR: &str = "claims";
/// The folder of the workers' logs, inside [`EXECUTOR_DIR`].
pub const LOGS_DIR: &str = "logs";

/// What shares layers between trials: the image their task runs in (or the host's root) and
/// their hidden mutation (the mutated fixture is a cached layer). Trials with the same key reuse
/// each other's unpacked image and fixture layer on a node.
pub fn layer_key(suite: &Suite, trial: &PlannedTrial) -> String {
    let image = suite
        .task(&trial.task)
        .and_then(|t| suite.environment(t))
        .map_or_else(|| "host".to_string(), |e| e.image);
    let mutation = trial.mutation.as_ref().map_or("-", |m| m.name.as_str());
    format!("{image}\u{0}{mutation}")
}

/// Splits `trials` into at most `max_shards` shards of nearly equal size (they differ by one at
/// most), keeping trials that share layers together: the trials are ordered by `key` (then by
/// their order in the plan) and cut into consecutive runs, so a key's trials fall in as few
/// shards as balance allows. Returns trial ids; no shard is empty.
pub fn shard(
    trials: &[&PlannedTrial],
    max_shards: usize,
    key: impl Fn(&PlannedTrial) -> String,
) -> Vec<Vec<String>> {
    let mut ordered: Vec<(String, usize, &PlannedTrial)> = trials
        .iter()
        .enumerate()
        .map(|(i, t)| (key(t), i, *t))
        .collect();
    ordered.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    let n = ordered.len();
    let k = max_shards.max(1).min(n);
    let mut shards = Vec::with_capacity(k);
    let mut rest = ordered.into_iter();
    for i in 0..k {
        let size = n / k + usize::from(i < n % k);
        shards.push(
            rest.by_ref()
                .take(size)
                .map(|(_, _, t)| t.id.clone())
                .collect(),
        );
    }
    shards
}

/// One submission's shards, kept as `executor/batch-N.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch {
    /// 1 for the run's first submission, then one more for each `--resume`.
    pub number: u32,
    /// Each array task's trial ids, by task index.
    pub shards: Vec<Vec<String>>,
}

impl Batch {
    /// The path of batch `number` of the run whose folder is `run_dir`.
    pub fn path(run_dir: &Path, number: u32) -> PathBuf {
        run_dir
            .join(EXECUTOR_DIR)
            .join(format!("batch-{number}.json"))
    }

    /// The number the next batch of the run gets: one more than the greatest written.
    pub fn next_number(run_dir: &Path) -> io::Result<u32> {
        let dir = run_dir.join(EXECUTOR_DIR);
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(1),
            Err(e) => return Err(e),
        };
        let mut last = 0;
        for entry in entries {
            let name = entry?.file_name();
            let n = name
                .to_str()
                .and_then(|n| n.strip_prefix("batch-"))
                .and_then(|n| n.strip_suffix(".json"))
                .and_then(|n| n.parse::<u32>().ok());
            last = last.max(n.unwrap_or(0));
        }
        Ok(last + 1)
    }

    /// Writes the batch atomically (it must not exist yet).
    pub fn write(&self, run_dir: &Path) -> io::Result<()> {
        let path = Batch::path(run_dir, self.number);
        fs::create_dir_all(run_dir.join(EXECUTOR_DIR).join(LOGS_DIR))?;
        if path.exists() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists", path.display()),
            ));
        }
        proctor_store::atomic_write_json(&path, self).map_err(io::Error::other)
    }

    /// Reads batch `number` of the run.
    pub fn read(run_dir: &Path, number: u32) -> io::Result<Batch> {
        let path = Batch::path(run_dir, number);
        let bytes = fs::read(&path).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot read {}: {e}", path.display()))
        })?;
        serde_json::from_slice(&bytes).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        })
    }
}

/// Takes trial `trial_id` of the run for this worker: creates `executor/claims/TRIAL_ID`
/// holding `who`, atomically (a complete temporary file hard-linked to the name, which is
/// atomic on local file systems and on NFS alike). `Ok(true)` when this call made the claim,
/// `Ok(false)` when another worker holds it.
pub fn claim(run_dir: &Path, trial_id: &str, who: &Placement) -> io::Result<bool> {
    let dir = run_dir.join(EXECUTOR_DIR).join(CLAIMS_DIR);
    fs::create_dir_all(&dir)?;
    let name = dir.join(trial_id);
    let tmp = dir.join(format!(
        ".{trial_id}.{}.{}.tmp",
        std::process::id(),
        unique()
    ));
    let text = serde_json::to_vec(who).map_err(io::Error::other)?;
    fs::write(&tmp, text)?;
    let linked = fs::hard_link(&tmp, &name);
    // On NFS a retried LINK whose first reply was lost answers EEXIST although it succeeded:
    // the temporary file's link count tells the truth.
    let made = match linked {
        Ok(()) => true,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            use std::os::unix::fs::MetadataExt;
            fs::metadata(&tmp).map(|m| m.nlink() == 2).unwrap_or(false)
        }
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
    };
    fs::remove_file(&tmp)?;
    Ok(made)
}

/// A number unique within this process.
fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Every claim of the run: trial id → who claimed it (`None` for an unreadable claim).
pub fn claims(run_dir: &Path) -> io::Result<BTreeMap<String, Option<Placement>>> {
    let dir = run_dir.join(EXECUTOR_DIR).join(CLAIMS_DIR);
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(e),
    };
    let mut out = BTreeMap::new();
    for entry in entries {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        let who = fs::read(entry.path())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        out.insert(name, who);
    }
    Ok(out)
}

/// Removes the claims of trials that are not finished, so that a new submission can run them:
/// to be called only when no worker of the run is alive (their claims are then those of workers
/// killed mid-trial, by `scancel`, a node failure or a time limit). Returns the trial ids
/// released.
pub fn release_unfinished(run_dir: &Path, finished: &BTreeSet<String>) -> io::Result<Vec<String>> {
    let mut released = Vec::new();
    for id in claims(run_dir)?.into_keys() {
        if !finished.contains(&id) {
            let path = run_dir.join(EXECUTOR_DIR).join(CLAIMS_DIR).join(&id);
            match fs::remove_file(&path) {
                Ok(()) => released.push(id),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(released)
}

/// What one worker (an array task) did, kept as `executor/batch-N/shard-I.json`: written when
/// it starts (`state = "running"`) and again when it ends (`"done"`). A task that the scheduler
/// ended (killed, timed out, lost with its node) stays `"running"` here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardStatus {
    /// The batch.
    pub batch: u32,
    /// The shard (array task index).
    pub shard: usize,
    /// `running` or `done`.
    pub state: String,
    /// Where it runs: job, array task, node.
    pub placement: Placement,
    /// When it started (UTC, RFC 3339).
    pub started_at: String,
    /// When it ended, once it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// Trials of the shard it finished.
    #[serde(default)]
    pub finished: usize,
    /// Trials of the shard another worker had claimed, or that were finished already.
    #[serde(default)]
    pub skipped: usize,
    /// The agent CLI versions it used, by variant.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub agent_versions: BTreeMap<String, String>,
}

impl ShardStatus {
    /// The path of shard `shard` of batch `batch`.
    pub fn path(run_dir: &Path, batch: u32, shard: usize) -> PathBuf {
        run_dir
            .join(EXECUTOR_DIR)
            .join(format!("batch-{batch}"))
            .join(format!("shard-{shard}.json"))
    }

    /// Writes it atomically.
    pub fn write(&self, run_dir: &Path) -> io::Result<()> {
        let path = ShardStatus::path(run_dir, self.batch, self.shard);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        proctor_store::atomic_write_json(&path, self).map_err(io::Error::other)
    }

    /// Every shard status written for batch `batch`, by shard.
    pub fn read_batch(run_dir: &Path, batch: u32) -> BTreeMap<usize, ShardStatus> {
        let dir = run_dir.join(EXECUTOR_DIR).join(format!("batch-{batch}"));
        let mut out = BTreeMap::new();
        let Ok(entries) = fs::read_dir(&dir) else {
            return out;
        };
        for entry in entries.filter_map(Result::ok) {
            let status = fs::read(entry.path())
                .ok()
                .and_then(|b| serde_json::from_slice::<ShardStatus>(&b).ok());
            if let Some(s) = status {
                out.insert(s.shard, s);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trial(task: &str, variant: &str, index: u32, mutation: Option<&str>) -> PlannedTrial {
        PlannedTrial {
            id: format!("{task}.{variant}.{index}"),
            task: task.into(),
            variant: variant.into(),
            index,
            mutation: mutation.map(|m| proctor_suite::plan::ChosenMutation {
                name: m.into(),
                hash: format!("b3:{m}"),
                as_shipped: false,
            }),
            seed: None,
        }
    }

    fn key(t: &PlannedTrial) -> String {
        format!(
            "{}/{}",
            t.task,
            t.mutation.as_ref().map_or("-", |m| m.name.as_str())
        )
    }

    #[test]
    fn shards_are_balanced_cover_every_trial_once_and_keep_layers_together() {
        // Plan order interleaves the layers (a, b, a, b, ...).
        let planned: Vec<PlannedTrial> = (0..4)
            .flat_map(|i| {
                [
                    trial("a", "x", i, Some("m1")),
                    trial("b", "x", i, None),
                    trial("a", "y", i, Some("m1")),
                    trial("b", "y", i, None),
                ]
            })
            .collect();
        let refs: Vec<&PlannedTrial> = planned.iter().collect();
        let shards = shard(&refs, 2, key);
        assert_eq!(shards.len(), 2);
        assert!(shards.iter().all(|s| s.len() == 8));
        // Each shard holds one layer's trials only.
        for s in &shards {
            let tasks: BTreeSet<&str> = s.iter().map(|id| &id[..1]).collect();
            assert_eq!(tasks.len(), 1, "{s:?}");
        }
        let mut all: Vec<String> = shards.concat();
        all.sort();
        let mut want: Vec<String> = planned.iter().map(|t| t.id.clone()).collect();
        want.sort();
        assert_eq!(all, want, "every trial exactly once");
        // More shards than trials: one trial each, none empty.
        let three: Vec<&PlannedTrial> = refs[..3].to_vec();
        let many = shard(&three, 10, key);
        assert_eq!(many.len(), 3);
        assert!(many.iter().all(|s| s.len() == 1));
        // Uneven sizes differ by one at most.
        let sizes: Vec<usize> = shard(&refs, 5, key).iter().map(Vec::len).collect();
        assert_eq!(sizes, vec![4, 3, 3, 3, 3]);
        assert!(shard(&[], 4, key).is_empty());
    }

    #[test]
    fn a_trial_is_claimed_once_and_unfinished_claims_are_released() {
        let dir = tempfile::tempdir().expect("tempdir");
        let worker = |shard| Placement::Worker {
            shard,
            node: "n".into(),
        };
        let who = Placement::Slurm {
            job: "1".into(),
            array_task: Some(0),
            task_job_id: None,
            node: "n".into(),
            restart: 0,
        };
        assert!(claim(dir.path(), "t.v.0", &who).expect("claim"));
        assert!(!claim(dir.path(), "t.v.0", &worker(2)).expect("claim"));
        assert!(claim(dir.path(), "t.v.1", &who).expect("claim"));
        // Racing threads: exactly one wins each trial.
        let wins = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for n in 0..8 {
                let wins = &wins;
                let dir = dir.path();
                s.spawn(move || {
                    if claim(dir, "race.v.0", &worker(n)).expect("claim") {
                        wins.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                });
            }
        });
        assert_eq!(wins.into_inner(), 1);
        let held = claims(dir.path()).expect("claims");
        assert_eq!(held.len(), 3, "{held:?}");
        assert_eq!(
            held["t.v.0"],
            Some(who.clone()),
            "the first claim is kept whole"
        );
        let finished: BTreeSet<String> = ["t.v.0".to_string()].into();
        let released = release_unfinished(dir.path(), &finished).expect("release");
        assert_eq!(released, vec!["race.v.0".to_string(), "t.v.1".to_string()]);
        assert!(claim(dir.path(), "t.v.1", &who).expect("claim again"));
        assert!(!claim(dir.path(), "t.v.0", &who).expect("still held"));
    }

    #[test]
    fn batches_are_numbered_in_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(Batch::next_number(dir.path()).expect("next"), 1);
        let b = Batch {
            number: 1,
            shards: vec![vec!["a.v.0".into()]],
        };
        b.write(dir.path()).expect("write");
        assert!(b.write(dir.path()).is_err(), "a batch is never rewritten");
        assert_eq!(Batch::read(dir.path(), 1).expect("read"), b);
        assert_eq!(Batch::next_number(dir.path()).expect("next"), 2);
    }
}
