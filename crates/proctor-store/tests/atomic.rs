//! Atomic writes and the no-NaN rule, on real files.

mod common;

use proctor_store::{
    atomic_write, atomic_write_json, is_temp_name, AtomicFile, Store, StoreError, TrialSummary,
    TRIALS_DIR, TRIAL_FILE,
};
use serde::Serialize;
use std::fs;
use std::io::Write;
use std::path::Path;

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn atomic_write_replaces_content_and_leaves_no_temp() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("results.md");
    atomic_write(&path, b"first").expect("write");
    atomic_write(&path, b"second, longer").expect("rewrite");
    assert_eq!(fs::read(&path).expect("read"), b"second, longer");
    assert_eq!(names_in(dir.path()), vec!["results.md"]);
}

#[test]
fn crash_before_rename_leaves_the_old_file_intact() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("run.json");
    atomic_write(&path, b"{\"old\": true}\n").expect("write");

    // The writer "dies" after writing the temporary file and before renaming it: no destructor,
    // no rename.
    let mut f = AtomicFile::create(&path).expect("create");
    f.write_all(b"{\"new\": tr").expect("write temp");
    let temp = f.temp_path().to_path_buf();
    std::mem::forget(f);

    assert_eq!(fs::read(&path).expect("read"), b"{\"old\": true}\n");
    assert!(temp.exists(), "the dead writer's temp file stays behind");
    let temp_name = temp
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    assert!(is_temp_name(&temp_name), "{temp_name}");
    assert!(!is_temp_name("run.json") && !is_temp_name(".hidden"));

    // The next writer is not disturbed by the leftover.
    atomic_write(&path, b"{\"next\": 1}\n").expect("rewrite");
    assert_eq!(fs::read(&path).expect("read"), b"{\"next\": 1}\n");
}

#[test]
fn dropping_an_uncommitted_file_removes_the_temp_and_keeps_the_target() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("answer.txt");
    atomic_write(&path, b"kept").expect("write");
    {
        let mut f = AtomicFile::create(&path).expect("create");
        f.write_all(b"abandoned").expect("write temp");
    }
    assert_eq!(fs::read(&path).expect("read"), b"kept");
    assert_eq!(names_in(dir.path()), vec!["answer.txt"]);
}

#[test]
fn a_streamed_atomic_file_appears_whole_on_commit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("calls.jsonl");
    let mut f = AtomicFile::create(&path).expect("create");
    for i in 0..1000 {
        writeln!(f, "{{\"seq\": {i}}}").expect("line");
    }
    assert!(!path.exists(), "nothing under the real name before commit");
    f.commit().expect("commit");
    assert_eq!(
        fs::read_to_string(&path).expect("read").lines().count(),
        1000
    );
}

#[derive(Serialize)]
struct Rates {
    name: &'static str,
    rates: Vec<f64>,
}

#[test]
fn serde_json_alone_would_write_null_for_nan() {
    // The reason the store checks: serde_json silently turns non-finite floats into null.
    assert_eq!(
        serde_json::to_string(&f64::NAN).ok().as_deref(),
        Some("null")
    );
    assert_eq!(
        serde_json::to_string(&f64::INFINITY).ok().as_deref(),
        Some("null")
    );
}

#[test]
fn json_with_nan_or_infinity_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("results.json");

    let err = atomic_write_json(
        &path,
        &Rates {
            name: "x",
            rates: vec![0.5, f64::NAN],
        },
    )
    .expect_err("NaN must be refused");
    match &err {
        StoreError::NonFinite { at, .. } => assert_eq!(at, "$.rates[1]"),
        other => panic!("unexpected error {other}"),
    }
    assert!(err.to_string().contains("results.json"), "{err}");
    assert!(!path.exists());

    atomic_write_json(
        &path,
        &Rates {
            name: "ok",
            rates: vec![0.25],
        },
    )
    .expect("finite values are written");
    let before = fs::read(&path).expect("read");

    let inf = serde_json::json!({"lift": {"relative": 1.0}});
    atomic_write_json(&path, &inf).expect("json! value with finite numbers");
    let after_ok = fs::read(&path).expect("read");
    assert_ne!(before, after_ok);

    let err = atomic_write_json(
        &path,
        &Rates {
            name: "bad",
            rates: vec![f64::NEG_INFINITY],
        },
    )
    .expect_err("-Infinity must be refused");
    assert!(matches!(err, StoreError::NonFinite { .. }));
    assert_eq!(fs::read(&path).expect("read"), after_ok, "old file intact");
    assert_eq!(names_in(dir.path()), vec!["results.json"]);
    assert!(fs::read_to_string(&path).expect("read").ends_with("}\n"));
}

#[test]
fn a_trial_with_a_non_finite_number_is_not_finished() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("open");
    let run = store.create_run(&common::meta()).expect("run");

    let mut s = common::summary("t", "v", 0, "completed");
    s.wall_seconds = f64::NAN;
    let err = run
        .finish_trial(&s, &serde_json::json!({}))
        .expect_err("NaN summary");
    assert!(matches!(err, StoreError::NonFinite { ref at, .. } if at == "$.summary.wall_seconds"));

    let s = common::summary("t", "v", 1, "completed");
    let err = run
        .finish_trial(
            &s,
            &Rates {
                name: "r",
                rates: vec![f64::INFINITY],
            },
        )
        .expect_err("Infinity in the record");
    assert!(matches!(err, StoreError::NonFinite { ref at, .. } if at == "$.record.rates[0]"));

    assert!(run.finished_trials().expect("scan").is_empty());
    assert!(store.trials(run.id()).expect("trials").is_empty());
}

#[test]
fn no_partial_trial_json_is_ever_seen_as_finished() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("open");
    let run = store.create_run(&common::meta()).expect("run");
    let good = common::summary("t", "v", 0, "completed");
    run.finish_trial(&good, &serde_json::json!({"calls": [1, 2, 3]}))
        .expect("finish");

    // A complete trial.json, but only as a dead writer's temp file: the trial is not finished.
    let full = fs::read(
        run.dir()
            .join(TRIALS_DIR)
            .join(&good.trial_id)
            .join(TRIAL_FILE),
    )
    .expect("read");
    let stray = run.trial_dir("t.v.1").expect("dir");
    fs::write(stray.join(".trial.json.tmp-999-0"), &full).expect("stray temp");

    // A truncated trial.json under the real name (what a non-atomic writer would leave).
    let torn = run.trial_dir("t.v.2").expect("dir");
    fs::write(torn.join(TRIAL_FILE), &full[..full.len() / 2]).expect("torn");

    // A trial folder with captured files but no trial.json yet.
    let busy = run.trial_dir("t.v.3").expect("dir");
    fs::write(busy.join("calls.jsonl"), b"{}\n").expect("calls");

    // A stray temp file at the trials level.
    fs::write(run.dir().join(TRIALS_DIR).join(".t.v.4.tmp-1-1"), b"x").expect("stray");

    let finished = run.finished_trials().expect("scan");
    assert_eq!(finished.into_iter().collect::<Vec<_>>(), vec!["t.v.0"]);

    let report = store.reindex().expect("reindex");
    assert_eq!((report.runs, report.trials), (1, 1));
    // The torn trial.json is reported by name, not skipped in silence; the others are simply
    // unfinished.
    let damaged: Vec<&str> = report
        .damaged_trials
        .iter()
        .map(|(_, d)| d.trial_id.as_str())
        .collect();
    assert_eq!(damaged, ["t.v.2"]);
    assert!(
        report.damaged_trials[0].1.reason.contains("does not parse"),
        "{:?}",
        report.damaged_trials
    );
    assert_eq!(store.damaged_trials(run.id()).expect("damaged").len(), 1);
    let listed = store.list_runs().expect("list");
    assert_eq!(
        listed[0].damaged,
        store.damaged_trials(run.id()).expect("damaged")
    );
    let mut seen = 0;
    let read = run
        .for_each_trial(|_: proctor_store::TrialFile<serde_json::Value>| {
            seen += 1;
            Ok::<(), StoreError>(())
        })
        .expect("read");
    assert_eq!((seen, read.len()), (1, 1), "{read:?}");
    assert_eq!(read[0].trial_id, "t.v.2");
    let ids: Vec<String> = store
        .trials(run.id())
        .expect("trials")
        .into_iter()
        .map(|t: TrialSummary| t.trial_id)
        .collect();
    assert_eq!(ids, vec!["t.v.0"]);
}
