//! `run --executor slurm` against a real one-node Slurm, started by `ci/slurm-up` (which
//! `.ci/run` calls too). Where Slurm cannot start (not root, no apt), each test says why and
//! skips; under CI (`CI` set) that is a failure instead.
//!
//! Every job here runs the real `proctor` binary of this build on the same machine, so the
//! store in a temporary folder is "shared"; a node-local store is made by hiding a tmpfs in a
//! private mount namespace, where the submitter sees it and slurmd does not.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command as Std;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{repo_root, TestSuite, MINIMAL};
use serde_json::Value;

/// The one-node cluster, for one test at a time: its two CPUs shared by tests running at once
/// made the requeue test's timing fail now and then. `None` (with the reason printed) when
/// Slurm cannot start outside CI.
fn cluster() -> Option<std::sync::MutexGuard<'static, ()>> {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    if !slurm() {
        return None;
    }
    Some(ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner()))
}

/// Starts the one-node cluster once per test binary; `false` (with the reason printed) when
/// it cannot start outside CI.
fn slurm() -> bool {
    static UP: OnceLock<Result<(), String>> = OnceLock::new();
    let up = UP.get_or_init(|| {
        let script = repo_root().join("ci/slurm-up");
        match Std::new("bash").arg(&script).output() {
            Ok(out) if out.status.success() => Ok(()),
            Ok(out) => Err(format!(
                "ci/slurm-up failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )),
            Err(e) => Err(format!("cannot run ci/slurm-up: {e}")),
        }
    });
    match up {
        Ok(()) => true,
        Err(why) if std::env::var_os("CI").is_none() => {
            eprintln!("SKIPPED: no Slurm here: {why}");
            false
        }
        Err(why) => panic!("Slurm must run under CI: {why}"),
    }
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn proctor_in(env: &[(&str, &str)], args: &[&str]) -> Out {
    let mut cmd = Std::new(assert_cmd::cargo::cargo_bin("proctor"));
    cmd.args(args)
        .env("NO_COLOR", "1")
        .env("PROCTOR_SLURM_POLL_MS", "300");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("proctor runs");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn proctor(args: &[&str]) -> Out {
    proctor_in(&[], args)
}

fn s(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(
        &std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .expect("JSON")
}

fn only_run(store: &Path) -> PathBuf {
    let runs: Vec<PathBuf> = std::fs::read_dir(store.join("runs"))
        .expect("runs/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.join("run.json").is_file())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs.into_iter().next().expect("a run")
}

/// Trial id → trial.json, for every finished trial of the run.
fn trials(run: &Path) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(run.join("trials")).expect("trials/") {
        let e = e.expect("entry");
        let file = e.path().join("trial.json");
        if file.is_file() {
            out.insert(
                e.file_name().to_string_lossy().into_owned(),
                read_json(&file),
            );
        }
    }
    out
}

fn outcomes(run: &Path) -> BTreeMap<String, String> {
    trials(run)
        .into_iter()
        .map(|(id, t)| {
            (
                id,
                t["summary"]["outcome"].as_str().unwrap_or("?").to_string(),
            )
        })
        .collect()
}

/// Waits until `done` holds, or panics after `limit` naming `what`.
fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn queued(job: &str) -> bool {
    let out = Std::new("squeue")
        .args(["-h", "-r", "-j", job, "-o", "%K"])
        .output()
        .expect("squeue");
    !String::from_utf8_lossy(&out.stdout).trim().is_empty()
}

fn job_of(run: &Path, n: usize) -> String {
    read_json(&run.join("run.json"))["extra"]["executor"]["submissions"][n]["job_id"]
        .as_str()
        .expect("a job id")
        .to_string()
}

/// The minimal suite, each oracle trial taking `seconds` first.
fn slow_suite(seconds: u32) -> TestSuite {
    let suite = TestSuite::with_toml(MINIMAL);
    suite.write(
        "agents/oracle/hello.toml",
        &format!(
            "answer = \"done\"\n\n[[steps]]\nrun = \"sleep {seconds}; echo hi > hello.txt\"\n"
        ),
    );
    suite
}

#[test]
fn a_slurm_run_gives_the_verdicts_of_a_local_run_and_records_every_trial_once() {
    let Some(_cluster) = cluster() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let suite = repo_root().join("examples/traps");
    let local = tmp.path().join("local");
    let cluster = tmp.path().join("cluster");
    let l = proctor(&["run", s(&suite), "--trials", "1", "--store", s(&local)]);
    let c = proctor(&[
        "run",
        s(&suite),
        "--trials",
        "1",
        "--store",
        s(&cluster),
        "--executor",
        "slurm",
        "--shards",
        "3",
        "--array-throttle",
        "2",
    ]);
    assert_eq!(
        c.code, l.code,
        "same exit status\nlocal: {}\nslurm: {}",
        l.stderr, c.stderr
    );
    assert_eq!(c.stdout, l.stdout, "the same summary table");
    assert!(
        c.stderr.contains("[6/6]"),
        "the same progress lines: {}",
        c.stderr
    );
    assert!(
        c.stderr.contains("0 failed, 3 done task(s)"),
        "{}",
        c.stderr
    );
    let (lrun, crun) = (only_run(&local), only_run(&cluster));
    assert_eq!(
        outcomes(&crun),
        outcomes(&lrun),
        "the same verdicts, trial by trial"
    );

    // run.json: the executor, the job, the Slurm version.
    let meta = read_json(&crun.join("run.json"));
    let exec = &meta["extra"]["executor"];
    assert_eq!(exec["kind"], "slurm");
    assert!(
        exec["slurm_version"]
            .as_str()
            .is_some_and(|v| v.contains("22.") || v.starts_with("slurm")),
        "{exec}"
    );
    assert_eq!(exec["array_throttle"], 2);
    assert_eq!(meta["status"], "finished");
    let job = job_of(&crun, 0);
    // Each trial once: one trial.json per planned trial, each from one array task of the job,
    // with its node; one claim each; every shard done.
    let all = trials(&crun);
    assert_eq!(all.len(), 6);
    let mut per_task: BTreeMap<u64, usize> = BTreeMap::new();
    for (id, t) in &all {
        let e = &t["executor"];
        assert_eq!(e["kind"], "slurm", "{id}: {e}");
        assert_eq!(e["job"], job.as_str(), "{id}: {e}");
        assert!(
            e["node"].as_str().is_some_and(|n| !n.is_empty()),
            "{id}: {e}"
        );
        *per_task
            .entry(e["array_task"].as_u64().expect("an array task"))
            .or_default() += 1;
    }
    assert_eq!(
        per_task,
        BTreeMap::from([(0, 2), (1, 2), (2, 2)]),
        "3 shards of 2"
    );
    let claims = std::fs::read_dir(crun.join("executor/claims"))
        .expect("claims")
        .count();
    assert_eq!(claims, 6);
    // The index, written by the submitting process only, has every trial.
    let list = proctor(&["list", "--store", s(&cluster), "--format", "json"]);
    let listed: Value = serde_json::from_str(&list.stdout).expect("list JSON");
    assert_eq!(listed[0]["finished"], 6, "{listed}");
    assert_eq!(listed[0]["status"], "finished");
    assert!(crun.join("results.json").is_file() && crun.join("results.md").is_file());
}

#[test]
fn scancel_mid_run_then_resume_finishes_it_with_nothing_lost_or_run_twice() {
    let Some(_cluster) = cluster() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let suite = slow_suite(2);
    let store = tmp.path().join("store");
    let started = proctor(&[
        "run",
        s(suite.path()),
        "--trials",
        "6",
        "--store",
        s(&store),
        "--executor",
        "slurm",
        "--shards",
        "2",
        "--array-throttle",
        "1",
        "--detach",
    ]);
    assert_eq!(started.code, 0, "{}", started.stderr);
    let run = only_run(&store);
    let job = job_of(&run, 0);
    assert!(started.stdout.contains(&job), "{}", started.stdout);
    cancel_once_the_next_trial_is_claimed(&run, &job);
    let before = trials(&run);
    assert!(
        !before.is_empty() && before.len() < 6,
        "{} finished",
        before.len()
    );
    // No half-recorded trial: every trial folder either has a whole trial.json or is unfinished.
    for (id, t) in &before {
        assert_eq!(t["summary"]["outcome"], "completed", "{id}");
    }
    assert_status_counts_the_cancelled_run(&store, before.len());
    assert_resume_runs_only_the_rest(suite.path(), &store, &run, &job, &before);
}

/// Cancels the run's job (`job`) once a trial is finished and the next has started (its claim
/// is made), and waits for it to leave the queue.
fn cancel_once_the_next_trial_is_claimed(run: &Path, job: &str) {
    wait_for("a finished trial", Duration::from_secs(120), || {
        !trials(run).is_empty()
    });
    std::thread::sleep(Duration::from_millis(700));
    assert!(Std::new("scancel")
        .arg(job)
        .status()
        .expect("scancel")
        .success());
    wait_for(
        "the job to leave the queue",
        Duration::from_secs(60),
        || !queued(job),
    );
}

/// `status` counts the `finished` trials of the cancelled run, none pending or running, and
/// the cancelled task failed.
fn assert_status_counts_the_cancelled_run(store: &Path, finished: usize) {
    let status = proctor(&["status", "latest", "--store", s(store)]);
    assert_eq!(status.code, 0, "{}", status.stderr);
    assert!(
        status
            .stdout
            .contains(&format!("trials: {}/6 finished", finished)),
        "{}",
        status.stdout
    );
    assert!(
        status.stdout.contains("0 pending, 0 running"),
        "{}",
        status.stdout
    );
    assert!(
        !status.stdout.contains(" 0 failed"),
        "the cancelled task is failed: {}",
        status.stdout
    );
}

/// The run resumed under a second job finishes every trial: nothing lost, nothing finished
/// `before` the cancel run again.
fn assert_resume_runs_only_the_rest(
    suite: &Path,
    store: &Path,
    run: &Path,
    job: &str,
    before: &BTreeMap<String, Value>,
) {
    let resumed = proctor(&[
        "run",
        s(suite),
        "--resume",
        "latest",
        "--store",
        s(store),
        "--executor",
        "slurm",
    ]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert!(
        resumed.stderr.contains("resuming run"),
        "{}",
        resumed.stderr
    );
    let after = trials(run);
    assert_eq!(after.len(), 6, "nothing lost");
    let second = job_of(run, 1);
    assert_ne!(second, job);
    for (id, t) in &after {
        assert_eq!(t["summary"]["outcome"], "completed", "{id}");
        match before.get(id) {
            // Finished before the cancel: not run again (the same file, from the first job).
            Some(old) => assert_eq!(t, old, "{id} was run twice"),
            None => assert_eq!(t["executor"]["job"], second.as_str(), "{id}"),
        }
    }
    let meta = read_json(&run.join("run.json"));
    assert_eq!(meta["status"], "finished");
    assert_eq!(
        meta["extra"]["executor"]["submissions"][1]["trials"],
        6 - before.len() as u64
    );
}

#[test]
fn a_detached_run_shows_its_status_and_collects_on_its_own() {
    let Some(_cluster) = cluster() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let suite = slow_suite(1);
    let store = tmp.path().join("store");
    let out = proctor(&[
        "run",
        s(suite.path()),
        "--trials",
        "3",
        "--store",
        s(&store),
        "--executor",
        "slurm",
        "--detach",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let run = only_run(&store);
    let id = run
        .file_name()
        .expect("a name")
        .to_string_lossy()
        .into_owned();
    let job = job_of(&run, 0);
    assert_eq!(
        out.stdout.trim(),
        format!("{id} {job}"),
        "the run id and the job id"
    );
    let status = proctor(&["status", &id, "--store", s(&store)]);
    assert_eq!(status.code, 0, "{}", status.stderr);
    assert!(
        status.stdout.contains("executor slurm"),
        "{}",
        status.stdout
    );
    assert!(
        status.stdout.contains(&format!("slurm job {job}:")),
        "{}",
        status.stdout
    );
    // No process holds a detached run: list asks Slurm, and the job is still on.
    let list = proctor(&["list", "--store", s(&store), "--format", "json"]);
    let listed: Value = serde_json::from_str(&list.stdout).expect("list JSON");
    assert_eq!(listed[0]["status"], "running", "{listed}");
    // The dependent job writes the results when the array ends, with nobody waiting.
    wait_for(
        "results.json from the collect job",
        Duration::from_secs(120),
        || run.join("results.json").is_file(),
    );
    let collect_job = read_json(&run.join("run.json"))["extra"]["executor"]["submissions"][0]
        ["collect_job"]
        .as_str()
        .expect("a collect job")
        .to_string();
    wait_for("the collect job to end", Duration::from_secs(60), || {
        !queued(&collect_job)
    });
    let results = read_json(&run.join("results.json"));
    assert_eq!(
        results["trials"].as_array().map(Vec::len),
        Some(3),
        "{results}"
    );
    let status = proctor(&["status", &id, "--store", s(&store)]);
    assert!(
        status.stdout.contains("trials: 3/3 finished (completed 3)"),
        "{}",
        status.stdout
    );
    // collect where it was submitted: the index and run.json catch up; exit status as a run's.
    let collected = proctor(&["collect", &id, "--store", s(&store)]);
    assert_eq!(collected.code, 0, "{}", collected.stderr);
    assert!(
        collected.stdout.contains("3/3 (100%)"),
        "{}",
        collected.stdout
    );
    let list = proctor(&["list", "--store", s(&store), "--format", "json"]);
    let listed: Value = serde_json::from_str(&list.stdout).expect("list JSON");
    assert_eq!(listed[0]["finished"], 3, "{listed}");
    assert_eq!(listed[0]["status"], "finished");
}

#[test]
fn bad_input_is_refused_before_anything_is_submitted() {
    let Some(_cluster) = cluster() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let suite = TestSuite::minimal();
    let store = tmp.path().join("store");
    let run = |extra: &[&str], env: &[(&str, &str)]| {
        let mut args = vec![
            "run",
            s(suite.path()),
            "--store",
            s(&store),
            "--executor",
            "slurm",
        ];
        args.extend_from_slice(extra);
        proctor_in(env, &args)
    };
    let no_partition = run(&["--partition", "nope"], &[]);
    assert_eq!(no_partition.code, 2);
    assert!(
        no_partition
            .stderr
            .contains("Slurm has no partition `nope`"),
        "{}",
        no_partition.stderr
    );
    assert!(
        no_partition.stderr.contains("debug"),
        "names the partitions: {}",
        no_partition.stderr
    );

    let rejected = run(&["--time", "bogus"], &[]);
    assert_eq!(rejected.code, 2);
    assert!(
        rejected.stderr.contains("Slurm rejected the job"),
        "{}",
        rejected.stderr
    );
    assert!(
        rejected.stderr.contains("nothing was submitted"),
        "{}",
        rejected.stderr
    );

    let empty = tmp.path().join("empty-path");
    std::fs::create_dir_all(&empty).expect("mkdir");
    let no_sbatch = run(&[], &[("PATH", s(&empty))]);
    assert_eq!(no_sbatch.code, 2);
    assert!(
        no_sbatch.stderr.contains("`sbatch` was not found on PATH"),
        "{}",
        no_sbatch.stderr
    );

    // A store only this process sees: a tmpfs in a private mount namespace.
    let hidden = tmp.path().join("node-local");
    std::fs::create_dir_all(&hidden).expect("mkdir");
    let bin = assert_cmd::cargo::cargo_bin("proctor");
    let local_store = hidden.join("store");
    let script = format!(
        "mount -t tmpfs none {h} && PROCTOR_SLURM_POLL_MS=300 {bin} run {suite} --store {st} --executor slurm; code=$?; ls {st}/runs | wc -l; exit $code",
        h = s(&hidden),
        bin = s(&bin),
        suite = s(suite.path()),
        st = s(&local_store),
    );
    let out = Std::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .output()
        .expect("unshare");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if String::from_utf8_lossy(&out.stdout).trim().is_empty() && stderr.contains("unshare") {
        common::skip(&format!(
            "the node-local store case: no mount namespace here: {stderr}"
        ));
    } else {
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("is not on a file system the Slurm nodes see"),
            "{stderr}"
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "0",
            "no run was created"
        );
    }
    // Nothing of any of these reached the store.
    let runs = std::fs::read_dir(store.join("runs"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(runs, 0);
}

#[test]
fn workers_racing_over_one_shard_run_each_trial_once_and_collect_writes_the_results() {
    // No Slurm here: `--executor external` writes the run and its shard, and three workers
    // started at once (as xargs or another scheduler would) race for the same trials.
    let tmp = tempfile::tempdir().expect("tempdir");
    let suite = slow_suite(0);
    let store = tmp.path().join("store");
    let planned = proctor(&[
        "run",
        s(suite.path()),
        "--trials",
        "6",
        "--store",
        s(&store),
        "--executor",
        "external",
        "--shards",
        "1",
    ]);
    assert_eq!(planned.code, 0, "{}", planned.stderr);
    let run = only_run(&store);
    let id = run
        .file_name()
        .expect("a name")
        .to_string_lossy()
        .into_owned();
    let commands: Vec<&str> = planned.stdout.lines().collect();
    assert_eq!(commands.len(), 1, "{}", planned.stdout);
    assert!(
        commands[0].contains(&format!("worker {id} --store")),
        "{}",
        commands[0]
    );
    assert!(commands[0].ends_with("--shard 0/1"), "{}", commands[0]);
    let workers: Vec<_> = (0..3)
        .map(|_| {
            Std::new(assert_cmd::cargo::cargo_bin("proctor"))
                .args(["worker", &id, "--store", s(&store), "--shard", "0/1"])
                .env("NO_COLOR", "1")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("a worker")
        })
        .collect();
    let mut ran: BTreeMap<String, usize> = BTreeMap::new();
    for w in workers {
        let out = w.wait_with_output().expect("the worker ends");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        for line in err.lines().filter(|l| l.starts_with('[')) {
            let trial = line.split_whitespace().nth(1).expect("a trial id");
            *ran.entry(trial.to_string()).or_default() += 1;
        }
    }
    assert_eq!(ran.len(), 6, "{ran:?}");
    assert!(ran.values().all(|&n| n == 1), "a trial ran twice: {ran:?}");
    let all = trials(&run);
    assert_eq!(all.len(), 6);
    assert!(all.values().all(|t| t["executor"]["kind"] == "worker"));
    // Nothing indexed from the workers; collect brings the index and results up to date.
    let list = proctor(&["list", "--store", s(&store), "--format", "json"]);
    let listed: Value = serde_json::from_str(&list.stdout).expect("list JSON");
    assert_eq!(
        listed[0]["finished"], 0,
        "workers never write SQLite: {listed}"
    );
    let status = proctor(&["status", &id, "--store", s(&store)]);
    assert!(
        status.stdout.contains("executor external"),
        "{}",
        status.stdout
    );
    assert!(
        status.stdout.contains("1 shard(s): 1 done"),
        "{}",
        status.stdout
    );
    let collected = proctor(&["collect", &id, "--store", s(&store)]);
    assert_eq!(collected.code, 0, "{}", collected.stderr);
    let list = proctor(&["list", "--store", s(&store), "--format", "json"]);
    let listed: Value = serde_json::from_str(&list.stdout).expect("list JSON");
    assert_eq!(listed[0]["finished"], 6, "{listed}");
    assert_eq!(listed[0]["status"], "finished");
    assert!(run.join("results.json").is_file());
}

#[test]
fn a_requeued_array_task_takes_over_its_own_claims_and_finishes_its_shard() {
    let Some(_cluster) = cluster() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let suite = slow_suite(2);
    let store = tmp.path().join("store");
    let child = Std::new(assert_cmd::cargo::cargo_bin("proctor"))
        .args([
            "run",
            s(suite.path()),
            "--trials",
            "4",
            "--store",
            s(&store),
            "--executor",
            "slurm",
            "--shards",
            "1",
        ])
        .env("PROCTOR_SLURM_POLL_MS", "300")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("proctor run");
    wait_for("the run's run.json", Duration::from_secs(60), || {
        std::fs::read_dir(store.join("runs"))
            .is_ok_and(|d| d.flatten().any(|e| e.path().join("run.json").is_file()))
    });
    let run = only_run(&store);
    wait_for("a finished trial", Duration::from_secs(120), || {
        !trials(&run).is_empty()
    });
    let job = job_of(&run, 0);
    // As Slurm does after a node failure: the task is killed and queued again.
    let requeue = Std::new("scontrol")
        .args(["requeue", &format!("{job}_0")])
        .output()
        .expect("scontrol");
    assert!(
        requeue.status.success(),
        "{}",
        String::from_utf8_lossy(&requeue.stderr)
    );
    // Slurm holds a requeued task back (Reason=BeginTime, two minutes here): let it go now.
    let task = format!("{job}_0");
    wait_for(
        "the requeued task to be pending",
        Duration::from_secs(30),
        || {
            let out = Std::new("squeue")
                .args(["-h", "-r", "-j", &job, "-o", "%T"])
                .output()
                .expect("squeue");
            String::from_utf8_lossy(&out.stdout).trim() == "PENDING"
        },
    );
    // Not at once: slurmd compares a new credential's time with the revoked one's in whole
    // seconds, and a task started again within the second of its requeue is killed as "Job
    // credential revoked" (Slurm's own two-minute hold exists for this).
    let _ = Std::new("scontrol")
        .args(["update", &format!("JobId={task}"), "StartTime=now+2"])
        .status();
    let done = child.wait_with_output().expect("the run ends");
    let err = String::from_utf8_lossy(&done.stderr);
    let log = std::fs::read_to_string(run.join(format!("executor/logs/{job}_0.out")))
        .unwrap_or_else(|e| format!("(no log: {e})"));
    assert_eq!(done.status.code(), Some(0), "{err}\nthe task's log:\n{log}");
    let all = trials(&run);
    assert_eq!(all.len(), 4, "{err}");
    let restarts: Vec<u64> = all
        .values()
        .map(|t| t["executor"]["restart"].as_u64().expect("a restart count"))
        .collect();
    assert!(
        restarts.contains(&0) && restarts.contains(&1),
        "{restarts:?}"
    );
    let log = std::fs::read_to_string(run.join(format!("executor/logs/{job}_0.out"))).expect("log");
    assert_eq!(
        log.matches("worker: run").count(),
        2,
        "both attempts' logs are kept: {log}"
    );
}
