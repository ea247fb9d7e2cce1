//! Real processes writing a store: one SIGKILLed mid-run, two writing at once.
//!
//! The child is this test binary itself, started on the `child_process_writer` test with an
//! environment variable saying what to write; run normally, that test does nothing.

mod common;

use proctor_store::{RunId, RunMeta, Store, TrialFile, RUN_FILE, TRIALS_DIR, TRIAL_FILE};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "PROCTOR_STORE_TEST_CHILD";

/// A record big enough that a kill often lands in the middle of writing it.
fn record(worker: u64, i: u64) -> Value {
    let len = 16 * 1024 + (i % 7) as usize * 4096;
    json!({
        "worker": worker,
        "i": i,
        "payload_len": len,
        "payload": "x".repeat(len),
        "calls": (0..50).map(|k| json!({"seq": k, "argv": ["tool", "op", k.to_string()]})).collect::<Vec<_>>(),
    })
}

/// The child's work: finish trials from several threads (forever, or `count` each), and keep
/// rewriting run.json from another thread.
#[test]
fn child_process_writer() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let spec: Value = serde_json::from_str(&spec).expect("child spec");
    let store = Store::open(spec["store"].as_str().expect("store")).expect("open store");
    let id: RunId = spec["run"].as_str().expect("run").parse().expect("run id");
    let run = store.open_run(&id).expect("open run");
    let prefix = spec["prefix"].as_str().expect("prefix").to_string();
    let threads = spec["threads"].as_u64().expect("threads");
    let count = spec["count"].as_u64();
    std::thread::scope(|s| {
        for w in 0..threads {
            let (run, prefix) = (&run, &prefix);
            s.spawn(move || {
                let mut i = 0u64;
                while count.is_none_or(|c| i < c) {
                    let sum = common::summary(&format!("{prefix}w{w}"), "v", i as u32, "completed");
                    let dir = run.trial_dir(&sum.trial_id).expect("trial dir");
                    fs::write(dir.join("answer.txt"), format!("answer {i}\n")).expect("answer");
                    run.finish_trial(&sum, &record(w, i)).expect("finish trial");
                    i += 1;
                }
            });
        }
        if count.is_none() {
            s.spawn(|| {
                for n in 0u64.. {
                    let ticks = u32::try_from(n).expect("ticks");
                    run.update_meta(|m| m.extra = Some(common::sections(ticks, &"y".repeat(8192))))
                        .expect("rewrite run.json");
                }
            });
        }
    });
}

fn spawn_child(store: &Path, run: &RunId, prefix: &str, threads: u64, count: Option<u64>) -> Child {
    let spec = json!({
        "store": store, "run": run.as_str(), "prefix": prefix, "threads": threads, "count": count,
    });
    Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "child_process_writer",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, spec.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn child")
}

/// Trial folders that hold a trial.json, and checks that every such file is whole.
fn trial_files_on_disk(run_dir: &Path) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    for entry in fs::read_dir(run_dir.join(TRIALS_DIR)).expect("ls trials") {
        let entry = entry.expect("entry");
        let path = entry.path().join(TRIAL_FILE);
        if !path.exists() {
            continue;
        }
        let bytes = fs::read(&path).expect("read trial.json");
        let file: TrialFile<Value> = serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()));
        let len = file.record["payload_len"].as_u64().expect("payload_len") as usize;
        assert_eq!(
            file.record["payload"].as_str().map(str::len),
            Some(len),
            "{} is whole",
            path.display()
        );
        assert!(
            entry.path().join("answer.txt").is_file(),
            "answer written before trial.json"
        );
        ids.insert(entry.file_name().to_string_lossy().into_owned());
    }
    ids
}

#[test]
fn sigkill_mid_run_leaves_every_finished_trial_readable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("open");
    let run = store.create_run(&common::meta()).expect("create");
    let mut child = spawn_child(dir.path(), run.id(), "k", 3, None);

    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            let out = child.wait_with_output().expect("output");
            panic!(
                "child exited early ({status}): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let done = run.finished_trials().expect("scan while writing").len();
        if done >= 150 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "child made no progress ({done} trials)"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().expect("SIGKILL"); // Child::kill is SIGKILL on Unix.
    let status = child.wait().expect("wait");
    assert!(!status.success(), "killed, not exited: {status}");

    // Every trial.json on disk is whole, and exactly those trials count as finished.
    let on_disk = trial_files_on_disk(run.dir());
    assert!(on_disk.len() >= 150);
    let finished = run.finished_trials().expect("finished");
    assert_eq!(finished, on_disk);
    let unfinished = fs::read_dir(run.dir().join(TRIALS_DIR))
        .expect("ls trials")
        .filter(|e| {
            let p = e.as_ref().expect("entry").path();
            !p.join(TRIAL_FILE).exists()
        })
        .count();
    eprintln!(
        "killed with {} trials finished and {unfinished} begun but unfinished",
        finished.len()
    );

    // run.json, rewritten in a loop when the kill came, is whole.
    let run_json: Value =
        serde_json::from_slice(&fs::read(run.dir().join(RUN_FILE)).expect("read run.json"))
            .expect("run.json parses");
    assert!(run_json["extra"]["plan"]["trials"].is_u64());

    // The index is sound and behind by at most one trial per writer thread, never ahead.
    let reopened = Store::open(dir.path()).expect("reopen after kill");
    assert!(reopened.index_is_sound().expect("integrity"));
    let indexed: BTreeSet<String> = reopened
        .trials(run.id())
        .expect("trials")
        .into_iter()
        .map(|t| t.trial_id)
        .collect();
    assert!(indexed.is_subset(&finished), "index ahead of the folders");
    assert!(finished.len() - indexed.len() <= 3);

    // reindex makes the index equal to the folders.
    let report = reopened.reindex().expect("reindex");
    assert_eq!(report.trials as usize, finished.len());
    let indexed: BTreeSet<String> = reopened
        .trials(run.id())
        .expect("trials")
        .into_iter()
        .map(|t| t.trial_id)
        .collect();
    assert_eq!(indexed, finished);
    let meta: RunMeta = reopened.run_meta(run.id()).expect("meta");
    let ticks = meta.extra.and_then(|e| e.plan).map(|p| p.trials);
    assert_eq!(
        ticks.map(serde_json::Value::from),
        run_json["extra"]["plan"].get("trials").cloned()
    );

    // The store stays writable: a resume finishes the rest over the leftovers.
    let resumed = reopened.open_run(run.id()).expect("open_run");
    let s = common::summary("kw0", "v", 0, "wrong");
    resumed.finish_trial(&s, &record(0, 0)).expect("refinish");
    assert_eq!(
        reopened.trials(run.id()).expect("trials").len(),
        finished.len()
    );
}

#[test]
fn two_processes_write_one_store_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("open");
    let run = store.create_run(&common::meta()).expect("create");
    let per_thread = 60;
    let children: Vec<Child> = ["a", "b"]
        .iter()
        .map(|p| spawn_child(dir.path(), run.id(), p, 2, Some(per_thread)))
        .collect();
    for child in children {
        let out = child.wait_with_output().expect("wait");
        assert!(
            out.status.success(),
            "child failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let expected = (2 * 2 * per_thread) as usize;
    assert_eq!(run.finished_trials().expect("finished").len(), expected);
    assert_eq!(store.trials(run.id()).expect("trials").len(), expected);
    assert!(store.index_is_sound().expect("integrity"));
}
