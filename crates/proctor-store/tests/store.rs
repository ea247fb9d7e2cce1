//! The store over a real directory and a real SQLite file.

mod common;

use common::{meta, summary};
use proctor_store::{
    atomic_write_json, RunId, RunMeta, RunRecord, RunStatus, Store, StoreError, TrialFile,
    INDEX_FILE, INDEX_SCHEMA_VERSION, RUNS_DIR, RUN_FILE, TRIALS_DIR, TRIAL_FILE,
};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

/// Lays a run folder by hand, with a chosen id and start time.
fn lay_run(root: &Path, id: &str, started_at: &str) -> RunId {
    let id: RunId = id.parse().expect("id");
    let dir = root.join(RUNS_DIR).join(id.as_str());
    fs::create_dir_all(dir.join(TRIALS_DIR)).expect("mkdir");
    let record = RunRecord {
        schema_version: 1,
        format_version: proctor_records::RUN_FORMAT,
        id: id.clone(),
        meta: RunMeta {
            started_at: Some(started_at.parse().expect("an RFC 3339 instant")),
            ..meta()
        },
    };
    atomic_write_json(dir.join(RUN_FILE), &record).expect("run.json");
    id
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&fs::read(path).expect("read")).expect("json")
}

#[test]
fn open_creates_the_layout_and_a_versioned_wal_index() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("nested").join(".proctor");
    let store = Store::open(&root).expect("open");
    assert!(root.join(RUNS_DIR).is_dir());
    assert!(root.join(INDEX_FILE).is_file());
    assert!(store.list_runs().expect("list").is_empty());
    assert!(store.index_is_sound().expect("check"));

    let conn = rusqlite::Connection::open(root.join(INDEX_FILE)).expect("sqlite");
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .expect("user_version");
    assert_eq!(version, INDEX_SCHEMA_VERSION);
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .expect("journal_mode");
    assert_eq!(mode, "wal");

    // Opening again keeps what is there.
    drop(store);
    let again = Store::open(&root).expect("reopen");
    assert!(again.list_runs().expect("list").is_empty());
}

#[test]
fn create_run_writes_run_json_and_indexes_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("open");
    let mut m = meta();
    m.extra = Some(common::sections(4, "t"));
    let run = store.create_run(&m).expect("create");

    assert_eq!(run.dir(), store.run_dir(run.id()));
    assert!(run.dir().join(TRIALS_DIR).is_dir());
    let on_disk = read_json(&run.dir().join(RUN_FILE));
    assert_eq!(on_disk["id"], run.id().as_str());
    assert_eq!(on_disk["schema_version"], 1);
    assert_eq!(on_disk["status"], "running");
    assert_eq!(on_disk["suite_hash"], "b3:suite");
    assert_eq!(on_disk["extra"]["plan"]["trials"], 4);
    assert_eq!(on_disk["finished_at"], Value::Null);
    let started = on_disk["started_at"].as_str().expect("started_at");
    assert!(started.ends_with('Z') && started.len() == 24, "{started}");

    let listed = store.list_runs().expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(&listed[0].id, run.id());
    assert_eq!(listed[0].meta, run.meta());
    assert_eq!(listed[0].trials_finished, 0);
    assert_eq!(store.run_meta(run.id()).expect("meta"), run.meta());

    let other = store.create_run(&m).expect("second run");
    assert_ne!(other.id(), run.id());
    assert_eq!(store.list_runs().expect("list").len(), 2);
}

#[test]
fn finish_trial_writes_trial_json_and_the_index_row() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("open");
    let run = store.create_run(&meta()).expect("create");

    let captured = run.trial_dir("fix-bug.control.0").expect("trial dir");
    fs::write(captured.join("answer.txt"), "done\n").expect("answer");
    let s0 = summary("fix-bug", "control", 0, "completed");
    let record = json!({"calls": [{"seq": 1, "argv": ["mail", "send"]}], "answer": "done"});
    run.finish_trial(&s0, &record).expect("finish");

    let file: TrialFile<Value> = store
        .read_trial(run.id(), "fix-bug.control.0")
        .expect("read");
    assert_eq!(file.schema_version, 1);
    assert_eq!(file.summary, s0);
    assert_eq!(file.record, record);
    assert_eq!(store.trials(run.id()).expect("trials"), vec![s0.clone()]);

    // Finishing the same trial again replaces it, in the folder and in the index.
    let mut s0b = s0.clone();
    s0b.outcome = proctor_records::OutcomeKind::Ungradeable;
    s0b.reason = Some("check crashed".into());
    run.finish_trial(&s0b, &json!(null)).expect("refinish");
    assert_eq!(store.trials(run.id()).expect("trials"), vec![s0b]);

    for (i, outcome) in ["wrong", "completed"].iter().enumerate() {
        let s = summary("fix-bug", "method", i as u32, outcome);
        run.finish_trial(&s, &json!({})).expect("finish");
    }
    let listed = &store.list_runs().expect("list")[0];
    assert_eq!(listed.trials_finished, 3);
    let counts: Vec<(&str, u64)> = listed
        .outcomes
        .iter()
        .map(|(k, v)| (k.label(), v))
        .collect();
    assert_eq!(
        counts,
        vec![("completed", 1), ("ungradeable", 1), ("wrong", 1)]
    );
    let order: Vec<String> = store
        .trials(run.id())
        .expect("trials")
        .into_iter()
        .map(|t| t.trial_id)
        .collect();
    assert_eq!(
        order,
        vec!["fix-bug.control.0", "fix-bug.method.0", "fix-bug.method.1"]
    );

    // No reason, no record.
    let mut silent = summary("fix-bug", "control", 5, "ungradeable");
    silent.reason = None;
    let err = run
        .finish_trial(&silent, &json!({}))
        .expect_err("no reason");
    assert!(matches!(err, StoreError::MissingReason { .. }), "{err}");
    silent.reason = Some("  ".into());
    assert!(run.finish_trial(&silent, &json!({})).is_err());
    assert!(!run
        .finished_trials()
        .expect("scan")
        .contains("fix-bug.control.5"));

    let missing = store.read_trial::<Value>(run.id(), "fix-bug.control.9");
    assert!(matches!(missing, Err(StoreError::TrialNotFound { .. })));
}

#[test]
fn starting_a_trial_clears_what_an_unfinished_attempt_left_and_never_a_finished_trial() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("open");
    let run = store.create_run(&meta()).expect("create");

    // An attempt that died before trial.json: its evidence must not pass for the next one's.
    let first = run.start_trial_dir("t.v.0").expect("start");
    fs::write(first.join("agent.stderr"), "from the dead attempt\n").expect("stderr");
    fs::create_dir_all(first.join("changes/files")).expect("changes");
    fs::write(first.join(TRIAL_FILE), "{\"schema_ver").expect("torn trial.json");
    let again = run.start_trial_dir("t.v.0").expect("restart");
    assert_eq!(again, first);
    assert_eq!(fs::read_dir(&again).expect("read").count(), 0, "emptied");

    // A finished trial is never cleared.
    fs::write(again.join("answer.txt"), "done").expect("answer");
    run.finish_trial(&summary("t", "v", 0, "completed"), &json!({}))
        .expect("finish");
    let err = run.start_trial_dir("t.v.0").expect_err("finished");
    assert!(err.to_string().contains("finished"), "{err}");
    assert!(again.join("answer.txt").is_file());
    assert_eq!(
        run.finished_trials().expect("finished"),
        BTreeSet::from(["t.v.0".to_string()])
    );
}

#[test]
fn finish_trials_commits_a_batch_or_nothing_of_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("open");
    let run = store.create_run(&meta()).expect("create");
    let a = summary("t", "v", 0, "completed");
    let b = summary("t", "v", 1, "completed");
    let mut bad = summary("t", "v", 2, "ungradeable");
    bad.reason = None;
    let record = json!({"answer": "done"});

    // One trial the store must refuse: none of the batch is written.
    let err = run
        .finish_trials(&[(&a, &record), (&bad, &record)])
        .expect_err("refused");
    assert!(matches!(err, StoreError::MissingReason { .. }), "{err}");
    assert!(run.finished_trials().expect("finished").is_empty());

    run.finish_trials(&[(&a, &record), (&b, &record)])
        .expect("commit");
    assert_eq!(
        run.finished_trials().expect("finished"),
        BTreeSet::from(["t.v.0".to_string(), "t.v.1".to_string()])
    );
    assert_eq!(store.trials(run.id()).expect("index").len(), 2);
}

#[test]
fn trial_ids_that_are_not_plain_folder_names_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("open");
    let run = store.create_run(&meta()).expect("create");
    for bad in ["", "..", "../escape", "a/b", ".hidden", "a\\b", "nul\0"] {
        let err = run.trial_dir(bad).expect_err(bad);
        assert!(
            matches!(err, StoreError::InvalidTrialId { .. }),
            "{bad}: {err}"
        );
    }
    assert!(run.trial_dir("task.variant.0").is_ok());
}

#[test]
fn set_status_rewrites_run_json_and_the_index() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("open");
    let run = store.create_run(&meta()).expect("create");

    run.set_status(RunStatus::Interrupted).expect("interrupt");
    let on_disk = read_json(&run.dir().join(RUN_FILE));
    assert_eq!(on_disk["status"], "interrupted");
    assert!(on_disk["finished_at"].is_string());
    assert_eq!(
        store.run_meta(run.id()).expect("meta").status,
        RunStatus::Interrupted
    );

    // Resume: reopen from the folder, run again, finish.
    let resumed = store.open_run(run.id()).expect("open_run");
    assert_eq!(resumed.meta(), run.meta());
    resumed.set_status(RunStatus::Running).expect("running");
    assert_eq!(resumed.meta().finished_at, None);
    resumed
        .update_meta(|m| m.extra = Some(common::sections(1, "resumed")))
        .expect("extra");
    resumed.set_status(RunStatus::Finished).expect("finish");
    let listed = &store.list_runs().expect("list")[0];
    assert_eq!(listed.meta.status, RunStatus::Finished);
    assert_eq!(listed.meta.extra, Some(common::sections(1, "resumed")));
    assert_eq!(read_json(&run.dir().join(RUN_FILE))["status"], "finished");
    let names: Vec<_> = fs::read_dir(run.dir())
        .expect("ls")
        .map(|e| e.expect("e").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.starts_with('.')),
        "no temp files left: {names:?}"
    );
}

#[test]
fn finished_trials_come_from_the_folders_even_when_the_index_is_behind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("open");
    let run = store.create_run(&meta()).expect("create");
    for i in 0..3 {
        run.finish_trial(&summary("t", "v", i, "completed"), &json!({}))
            .expect("finish");
    }
    // A trial whose trial.json landed but whose index row did not (killed in between).
    let s3 = summary("t", "v", 3, "wrong");
    let d3 = run.trial_dir(&s3.trial_id).expect("dir");
    atomic_write_json(
        d3.join(TRIAL_FILE),
        &json!({"schema_version": 1, "summary": s3, "record": {}}),
    )
    .expect("trial.json");

    let finished = run.finished_trials().expect("scan");
    let expected: BTreeSet<String> = (0..4).map(|i| format!("t.v.{i}")).collect();
    assert_eq!(finished, expected);
    assert_eq!(store.trials(run.id()).expect("trials").len(), 3);

    let report = store.reindex().expect("reindex");
    assert_eq!((report.runs, report.trials), (1, 4));
    assert_eq!(store.trials(run.id()).expect("trials").len(), 4);
    assert_eq!(store.trials(run.id()).expect("trials")[3], s3);
}

#[test]
fn reindex_rebuilds_from_folders_and_drops_vanished_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("open");
    let a = store.create_run(&meta()).expect("a");
    let b = store.create_run(&meta()).expect("b");
    a.finish_trial(&summary("t", "v", 0, "completed"), &json!({}))
        .expect("finish");
    b.finish_trial(&summary("t", "v", 0, "wrong"), &json!({}))
        .expect("finish");
    let before = store.list_runs().expect("list");

    fs::remove_dir_all(b.dir()).expect("rm b");
    let report = store.reindex().expect("reindex");
    assert_eq!((report.runs, report.trials), (1, 1));
    let after = store.list_runs().expect("list");
    assert_eq!(after.len(), 1);
    assert_eq!(
        after[0],
        before.iter().find(|r| &r.id == a.id()).expect("a").clone()
    );
    assert!(store.trials(b.id()).expect("trials").is_empty());
}

#[test]
fn a_deleted_or_stale_index_is_rebuilt_on_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (id, listed) = {
        let store = Store::open(dir.path()).expect("open");
        let run = store.create_run(&meta()).expect("create");
        run.finish_trial(&summary("t", "v", 0, "completed"), &json!({}))
            .expect("finish");
        run.set_status(RunStatus::Finished).expect("status");
        (run.id().clone(), store.list_runs().expect("list"))
    };
    for suffix in ["", "-wal", "-shm"] {
        let _ = fs::remove_file(dir.path().join(format!("{INDEX_FILE}{suffix}")));
    }
    let store = Store::open(dir.path()).expect("reopen");
    assert_eq!(store.list_runs().expect("list"), listed);
    assert_eq!(store.trials(&id).expect("trials").len(), 1);
    drop(store);

    // An index of an older schema version is a stale cache: rebuilt, not an error.
    {
        let conn = rusqlite::Connection::open(dir.path().join(INDEX_FILE)).expect("sqlite");
        conn.execute_batch("PRAGMA user_version = 0; DELETE FROM trials;")
            .expect("downgrade");
    }
    let store = Store::open(dir.path()).expect("reopen");
    assert_eq!(store.trials(&id).expect("trials").len(), 1);
    drop(store);

    // One from a newer proctor is refused with a clear message.
    {
        let conn = rusqlite::Connection::open(dir.path().join(INDEX_FILE)).expect("sqlite");
        conn.execute_batch("PRAGMA user_version = 99;")
            .expect("upgrade");
    }
    let err = Store::open(dir.path()).expect_err("too new");
    assert!(
        matches!(err, StoreError::IndexTooNew { found: 99, .. }),
        "{err}"
    );
}

#[test]
fn run_meta_falls_back_to_run_json_when_the_index_lacks_the_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("open");
    let id = lay_run(
        dir.path(),
        "20260101-000000-abcd",
        "2026-01-01T00:00:00.000Z",
    );
    assert!(store.list_runs().expect("list").is_empty());
    assert_eq!(store.run_meta(&id).expect("meta").suite_id, "demo");
    let unknown: RunId = "20260101-000000-0000".parse().expect("id");
    assert!(matches!(
        store.run_meta(&unknown),
        Err(StoreError::RunNotFound { .. })
    ));
}

#[test]
fn prefix_resolution() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("open");

    let err = store.resolve_run("latest").expect_err("empty store");
    assert!(matches!(err, StoreError::NoRuns { .. }), "{err}");

    let [a, b, c] = lay_three_runs_and_junk(dir.path());
    assert_unique_prefixes_resolve(&store, [&a, &b, &c]);
    assert_ambiguous_and_unmatched_prefixes_list_runs(&store, [&a, &b, &c]);
    assert_eq!(store.resolve_run("latest").expect("latest"), c);
    assert_latest_goes_by_started_at(&store, dir.path());
    assert_created_runs_resolve_by_their_shortest_unique_prefix(&store);
}

/// Three runs in `root`'s `runs/` (two on 2026-01-01 sharing `20260101-000000-aa`, one on
/// 2026-01-02), beside things that are not runs (a stray folder, a run folder without
/// `run.json`).
fn lay_three_runs_and_junk(root: &Path) -> [RunId; 3] {
    let a = lay_run(root, "20260101-000000-aaaa", "2026-01-01T00:00:00.100Z");
    let b = lay_run(root, "20260101-000000-aabb", "2026-01-01T00:00:00.200Z");
    let c = lay_run(root, "20260102-120000-0001", "2026-01-02T12:00:00.000Z");
    // Things in runs/ that are not runs are ignored.
    fs::create_dir_all(root.join(RUNS_DIR).join("junk")).expect("junk");
    fs::create_dir_all(root.join(RUNS_DIR).join("20260103-000000-ffff")).expect("no run.json");

    [a, b, c]
}

/// Unique prefixes, long and short, and the full id (trimmed) resolve to their run.
fn assert_unique_prefixes_resolve(store: &Store, [a, b, c]: [&RunId; 3]) {
    assert_eq!(store.resolve_run("20260102").expect("unique"), *c);
    assert_eq!(
        store.resolve_run("20260101-000000-aaa").expect("unique"),
        *a
    );
    assert_eq!(store.resolve_run(b.as_str()).expect("full id"), *b);
    assert_eq!(
        store.resolve_run(" 20260101-000000-aab ").expect("trimmed"),
        *b
    );
}

/// An ambiguous prefix lists every match; one that matches nothing lists the latest runs,
/// newest first; an empty prefix, a stray folder and a folder without `run.json` are no run.
fn assert_ambiguous_and_unmatched_prefixes_list_runs(store: &Store, [a, b, c]: [&RunId; 3]) {
    // Ambiguous: every match is listed.
    match store.resolve_run("20260101") {
        Err(StoreError::AmbiguousRun { prefix, matches }) => {
            assert_eq!(prefix, "20260101");
            assert_eq!(matches, vec![a.clone(), b.clone()]);
        }
        other => panic!("expected ambiguous, got {other:?}"),
    }
    let msg = store
        .resolve_run("2026")
        .expect_err("ambiguous")
        .to_string();
    assert!(
        msg.contains(a.as_str()) && msg.contains(b.as_str()) && msg.contains(c.as_str()),
        "{msg}"
    );

    // None: the latest runs are listed, newest first.
    match store.resolve_run("2025") {
        Err(StoreError::NoRunMatches { prefix, recent }) => {
            assert_eq!(prefix, "2025");
            assert_eq!(recent, vec![c.clone(), b.clone(), a.clone()]);
        }
        other => panic!("expected no match, got {other:?}"),
    }
    assert!(store.resolve_run("").is_err());
    assert!(store.resolve_run("junk").is_err());
    assert!(
        store.resolve_run("20260103").is_err(),
        "a folder without run.json is no run"
    );
}

/// Two runs in the same second: `latest` goes by started_at, not by the random digits.
fn assert_latest_goes_by_started_at(store: &Store, root: &Path) {
    let d = lay_run(root, "20260105-000000-ffff", "2026-01-05T00:00:00.100Z");
    let e = lay_run(root, "20260105-000000-0000", "2026-01-05T00:00:00.900Z");
    assert_eq!(store.resolve_run("latest").expect("latest"), e);
    assert_ne!(d, e);
}

/// Runs created through the API resolve by the shortest prefix unique among them.
fn assert_created_runs_resolve_by_their_shortest_unique_prefix(store: &Store) {
    let made: Vec<RunId> = (0..3)
        .map(|_| store.create_run(&meta()).expect("create").id().clone())
        .collect();
    let all = store.run_ids().expect("ids");
    for id in &made {
        let shortest = (1..=id.as_str().len())
            .map(|n| &id.as_str()[..n])
            .find(|p| all.iter().filter(|x| x.as_str().starts_with(p)).count() == 1)
            .expect("some prefix is unique");
        assert_eq!(&store.resolve_run(shortest).expect("resolve"), id);
    }
    let all = store.run_ids().expect("ids");
    let newest = all.iter().max().expect("max");
    let latest = store.resolve_run("latest").expect("latest");
    assert_eq!(&latest.as_str()[..15], &newest.as_str()[..15]);
}

#[test]
fn run_ids_made_at_a_time_carry_it() {
    let id = RunId::at(UNIX_EPOCH + Duration::from_secs(1_795_990_503), 0x7f3a);
    assert_eq!(id.to_string(), "20261129-221503-7f3a");
}

#[test]
fn worker_threads_finish_trials_of_one_run_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("open");
    let run = store.create_run(&meta()).expect("create");
    std::thread::scope(|s| {
        for w in 0..8u32 {
            let run = &run;
            s.spawn(move || {
                for i in 0..40u32 {
                    let sum = summary(&format!("task{w}"), "v", i, "completed");
                    run.finish_trial(&sum, &json!({"worker": w, "i": i}))
                        .expect("finish");
                }
            });
        }
    });
    assert_eq!(run.finished_trials().expect("scan").len(), 320);
    assert_eq!(store.trials(run.id()).expect("trials").len(), 320);
    assert!(store.index_is_sound().expect("integrity"));
}

#[test]
fn two_stores_on_one_directory_share_it_safely() {
    // Two connections to one index, as two processes would have.
    let dir = tempfile::tempdir().expect("tempdir");
    let first = Store::open(dir.path()).expect("open");
    let second = Store::open(dir.path()).expect("open again");
    let run = first.create_run(&meta()).expect("create");
    let same = second.open_run(run.id()).expect("open_run");
    std::thread::scope(|s| {
        for (k, handle) in [&run, &same].into_iter().enumerate() {
            s.spawn(move || {
                for i in 0..100u32 {
                    let sum = summary(&format!("p{k}"), "v", i, "completed");
                    handle.finish_trial(&sum, &json!({})).expect("finish");
                }
            });
        }
        s.spawn(|| {
            for _ in 0..20 {
                second.list_runs().expect("list while writing");
            }
        });
    });
    assert_eq!(first.trials(run.id()).expect("trials").len(), 200);
    assert_eq!(second.trials(run.id()).expect("trials").len(), 200);
}

#[test]
fn a_run_being_written_is_locked_against_a_resume_until_its_handle_is_dropped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("open");
    let other = Store::open(dir.path()).expect("open again");
    let run = store.create_run(&meta()).expect("create");
    let id = run.id().clone();

    // A second lock attempt, through another store on the same folder, names the holder.
    let refused = other.resume_run(&id);
    let Err(e @ StoreError::RunLocked { .. }) = refused else {
        panic!("resumed a run another handle holds");
    };
    let message = e.to_string();
    let pid = std::process::id();
    assert!(
        message.starts_with(&format!("run {id} is still running (pid {pid} on host ")),
        "{message}"
    );
    let host = proctor_store::HostInfo::detect().hostname;
    assert!(message.contains(&host), "{message}");
    assert!(other.run_holder(&id).expect("probe").is_some());
    assert_eq!(
        other.observed_status(&id, RunStatus::Running),
        RunStatus::Running
    );
    // A reader that does not run trials still opens it.
    assert!(other.open_run(&id).is_ok());

    // Two different runs on one store are written at once.
    let second = other
        .create_run(&meta())
        .expect("a second run beside the first");
    assert_ne!(second.id(), &id);

    // Once the handle is gone (as when its process is killed), the run resumes, and a run
    // still recorded as running is shown as interrupted.
    drop(run);
    assert_eq!(other.run_holder(&id).expect("probe"), None);
    assert_eq!(
        other.observed_status(&id, RunStatus::Running),
        RunStatus::Interrupted
    );
    assert_eq!(
        other.observed_status(&id, RunStatus::Finished),
        RunStatus::Finished
    );
    let resumed = other
        .resume_run(&id)
        .expect("the resume after the first is gone");
    assert!(matches!(
        store.resume_run(&id),
        Err(StoreError::RunLocked { .. })
    ));
    resumed.set_status(RunStatus::Finished).expect("finish");
    drop(resumed);
    assert!(store.resume_run(&id).is_ok());
}

#[test]
fn reindex_skips_a_run_whose_run_json_is_torn_and_names_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("open");
    let good = store.create_run(&meta()).expect("good");
    good.finish_trial(&summary("t", "v", 0, "completed"), &json!({}))
        .expect("finish");
    let torn = store.create_run(&meta()).expect("torn");
    let path = torn.dir().join(RUN_FILE);
    let bytes = fs::read(&path).expect("read");
    fs::write(&path, &bytes[..bytes.len() / 2]).expect("truncate");

    let report = store
        .reindex()
        .expect("one torn run.json does not stop the reindex");
    assert_eq!((report.runs, report.trials), (1, 1));
    assert_eq!(report.skipped_runs.len(), 1, "{report:?}");
    assert_eq!(&report.skipped_runs[0].id, torn.id());
    assert!(
        report.skipped_runs[0].reason.contains(RUN_FILE),
        "{:?}",
        report.skipped_runs
    );
    let listed: Vec<RunId> = store
        .list_runs()
        .expect("list")
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(listed, [good.id().clone()]);
    assert_eq!(store.damaged_runs().expect("damaged"), report.skipped_runs);
    // Once the run is written again it is no longer damaged.
    torn.set_status(RunStatus::Finished).expect("rewrite");
    assert!(store.damaged_runs().expect("damaged").is_empty());
}

#[test]
fn an_unreadable_index_is_refused_by_name_and_rebuild_index_moves_it_aside() {
    let dir = tempfile::tempdir().expect("tempdir");
    let id = {
        let store = Store::open(dir.path()).expect("open");
        let run = store.create_run(&meta()).expect("create");
        run.finish_trial(&summary("t", "v", 0, "completed"), &json!({}))
            .expect("finish");
        run.id().clone()
    };
    for suffix in ["-wal", "-shm"] {
        let _ = fs::remove_file(dir.path().join(format!("{INDEX_FILE}{suffix}")));
    }
    let garbage: Vec<u8> = (0..8192u32).map(|i| (i * 7 + 13) as u8).collect();
    fs::write(dir.path().join(INDEX_FILE), &garbage).expect("garbage");
    let err = Store::open(dir.path()).expect_err("a garbage index");
    assert!(matches!(err, StoreError::IndexDamaged { .. }), "{err}");
    assert!(err.to_string().contains("is unreadable"), "{err}");

    let (store, report) = Store::rebuild_index(dir.path()).expect("rebuild");
    let aside = report.moved_aside.clone().expect("moved aside");
    assert_eq!(fs::read(&aside).expect("kept"), garbage, "kept as it was");
    assert!(aside
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("index.sqlite.damaged-")));
    assert_eq!((report.runs, report.trials), (1, 1));
    assert_eq!(store.trials(&id).expect("trials").len(), 1);
    drop(store);
    // A sound index is rebuilt in place, nothing moved.
    let (_, report) = Store::rebuild_index(dir.path()).expect("rebuild");
    assert_eq!(report.moved_aside, None);

    // An index whose tables are gone is as unreadable as garbage.
    {
        let conn = rusqlite::Connection::open(dir.path().join(INDEX_FILE)).expect("sqlite");
        conn.execute_batch("DROP TABLE trials;").expect("drop");
    }
    let err = Store::open(dir.path()).expect_err("a damaged schema");
    assert!(matches!(err, StoreError::IndexDamaged { .. }), "{err}");
}

#[test]
fn a_store_opened_on_a_node_writes_trial_files_only_stamped_with_where_they_ran() {
    let dir = tempfile::tempdir().expect("tempdir");
    let submitter = Store::open(dir.path()).expect("open");
    let id = submitter.create_run(&meta()).expect("create").id().clone();
    // The node's view of the store: no index is opened, nor created when missing.
    fs::remove_file(dir.path().join(INDEX_FILE)).expect("remove the index");
    for f in ["index.sqlite-wal", "index.sqlite-shm"] {
        let _ = fs::remove_file(dir.path().join(f));
    }
    // As trial.json has held it: the record reads it back typed.
    let placement: proctor_store::Placement = serde_json::from_value(json!({
        "kind": "slurm", "job": "17", "array_task": 2, "node": "n1"
    }))
    .expect("a placement");
    assert_eq!(placement.node(), "n1");
    let node = Store::open_on_node(dir.path(), placement.clone()).expect("open on node");
    assert!(node.is_on_node());
    let run = node.open_run(&id).expect("the run");
    let before = fs::read(run.dir().join(RUN_FILE)).expect("run.json");
    run.finish_trial(&summary("t", "v", 0, "completed"), &json!({"k": 1}))
        .expect("finish");
    run.update_meta(|m| m.suite_id = "changed".into())
        .expect("update");
    assert_eq!(run.meta().suite_id, "changed", "the handle's copy changes");
    assert_eq!(
        fs::read(run.dir().join(RUN_FILE)).expect("run.json"),
        before,
        "run.json is the submitter's"
    );
    assert!(
        !dir.path().join(INDEX_FILE).exists(),
        "no SQLite file is written from a node"
    );
    assert!(matches!(node.list_runs(), Err(StoreError::NoIndex { .. })));
    let file: TrialFile<Value> = node.read_trial(&id, "t.v.0").expect("the trial");
    assert_eq!(file.executor, Some(placement));
    // Back where it was submitted, the index catches up with what the node wrote.
    let submitter = Store::open(dir.path()).expect("reopen");
    assert_eq!(submitter.reindex_run(&id).expect("reindex the run"), 1);
    assert_eq!(submitter.trials(&id).expect("trials").len(), 1);
}

#[test]
fn reindex_keeps_each_run_folder_as_its_own_run_whatever_its_run_json_says() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let first = lay_run(root, "20261201-100000-aaaa", "2026-12-01T10:00:00.000Z");
    // Five copies of the first run's folder under other names: each run.json names `first`.
    let mut copies = Vec::new();
    for i in 0..5 {
        let id: RunId = format!("20261201-10000{i}-bbb{i}").parse().expect("id");
        let to = root.join(RUNS_DIR).join(id.as_str());
        fs::create_dir_all(to.join(TRIALS_DIR)).expect("mkdir");
        fs::copy(
            root.join(RUNS_DIR).join(first.as_str()).join(RUN_FILE),
            to.join(RUN_FILE),
        )
        .expect("copy");
        copies.push(id);
    }
    let store = Store::open(root).expect("open");
    let report = store.reindex().expect("reindex");
    assert_eq!(report.runs, 6);
    let mut mismatched: Vec<(String, String)> = report
        .mismatched_runs
        .iter()
        .map(|m| (m.id.to_string(), m.recorded.to_string()))
        .collect();
    mismatched.sort();
    let want: Vec<(String, String)> = copies
        .iter()
        .map(|c| (c.to_string(), first.to_string()))
        .collect();
    assert_eq!(mismatched, want);
    let listed: BTreeSet<String> = store
        .list_runs()
        .expect("list")
        .into_iter()
        .map(|r| r.id.to_string())
        .collect();
    let mut all: BTreeSet<String> = copies.iter().map(RunId::to_string).collect();
    all.insert(first.to_string());
    assert_eq!(listed, all, "no run merged into another");
}

#[test]
fn a_torn_trial_json_reads_as_damaged_with_why() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("open");
    let run = store.create_run(&meta()).expect("create");
    run.trial_dir("t.v.0").expect("trial dir");
    let s0 = summary("t", "v", 0, "completed");
    run.finish_trial(&s0, &json!({"answer": "done"}))
        .expect("finish");
    let path = run.dir().join(TRIALS_DIR).join("t.v.0").join(TRIAL_FILE);
    let bytes = fs::read(&path).expect("read");
    fs::write(&path, &bytes[..bytes.len() / 2]).expect("tear");
    match store.read_trial::<Value>(run.id(), "t.v.0") {
        Err(StoreError::TrialDamaged {
            trial,
            reason,
            path: at,
            ..
        }) => {
            assert_eq!(trial, "t.v.0");
            assert!(
                reason.starts_with("trial.json does not parse ("),
                "{reason}"
            );
            assert_eq!(at, path);
        }
        other => panic!("expected TrialDamaged, got {other:?}"),
    }
    fs::write(&path, "").expect("empty");
    match store.read_trial::<Value>(run.id(), "t.v.0") {
        Err(StoreError::TrialDamaged { reason, .. }) => {
            assert_eq!(reason, "trial.json is empty (0 bytes)");
        }
        other => panic!("expected TrialDamaged, got {other:?}"),
    }
}
