//! A run's trials listed a page at a time, filtered in the index; counts per cell; and the
//! `limit_reached` the index keeps, also for trials written before the summary held it.

mod common;

use common::{meta, summary};
use proctor_records::Limit;
use proctor_store::{
    CellCount, RunStatus, Store, TrialFilter, INDEX_FILE, RUNS_DIR, TRIALS_DIR, TRIAL_FILE,
};
use serde_json::json;
use std::fs;

/// A run of two tasks × two variants × three trials; in task `a`, trial 1 differs between the
/// variants (completed under `v1`, wrong under `v2`).
fn store_with_trials() -> (tempfile::TempDir, Store, proctor_store::RunId) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("open");
    let run = store.create_run(&meta()).expect("create");
    for task in ["a", "b"] {
        for variant in ["v1", "v2"] {
            for i in 0..3 {
                let outcome = if task == "a" && variant == "v2" && i == 1 {
                    "wrong"
                } else {
                    "completed"
                };
                run.finish_trial(&summary(task, variant, i, outcome), &json!({}))
                    .expect("finish");
            }
        }
    }
    run.set_status(RunStatus::Finished).expect("status");
    let id = run.id().clone();
    (dir, store, id)
}

#[test]
fn a_page_of_trials_is_filtered_and_counted_in_the_index() {
    let (_dir, store, id) = store_with_trials();
    let all = TrialFilter::default();
    let page = store.trials_page(&id, &all, 0, 5).expect("page");
    assert_eq!((page.total, page.offset, page.trials.len()), (12, 0, 5));
    assert_eq!(page.trials[0].trial_id, "a.v1.0");
    let last = store.trials_page(&id, &all, 10, 5).expect("page");
    let ids: Vec<_> = last.trials.iter().map(|t| t.trial_id.as_str()).collect();
    assert_eq!(ids, ["b.v2.1", "b.v2.2"]);
    assert_eq!(last.offset, 10);

    let wrong = TrialFilter {
        outcome: Some(proctor_records::OutcomeKind::Wrong),
        ..TrialFilter::default()
    };
    let page = store.trials_page(&id, &wrong, 0, 100).expect("page");
    assert_eq!(page.total, 1);
    assert_eq!(page.trials[0].trial_id, "a.v2.1");

    let differs = TrialFilter {
        differs: true,
        ..TrialFilter::default()
    };
    let page = store.trials_page(&id, &differs, 0, 100).expect("page");
    let ids: Vec<_> = page.trials.iter().map(|t| t.trial_id.as_str()).collect();
    assert_eq!(ids, ["a.v1.1", "a.v2.1"]);

    let task_variant = TrialFilter {
        task: Some("b".into()),
        variant: Some("v1".into()),
        differs: false,
        outcome: Some(proctor_records::OutcomeKind::Completed),
    };
    assert_eq!(
        store
            .trials_page(&id, &task_variant, 0, 100)
            .expect("page")
            .total,
        3
    );

    let counts = store.cell_counts(&id).expect("counts");
    assert_eq!(counts.len(), 5);
    assert!(counts.contains(&CellCount {
        task: "a".into(),
        variant: "v2".into(),
        outcome: proctor_records::OutcomeKind::Wrong,
        n: 1
    }));
    assert_eq!(counts.iter().map(|c| c.n).sum::<u64>(), 12);
}

#[test]
fn the_index_keeps_limit_reached_and_finds_it_in_old_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("open");
    let run = store.create_run(&meta()).expect("create");
    let mut stopped = summary("t", "v", 0, "wrong");
    stopped.limit_reached = Some(Limit::Tokens);
    run.finish_trial(&stopped, &json!({"limit_reached": "tokens"}))
        .expect("finish");
    run.finish_trial(&summary("t", "v", 1, "completed"), &json!({}))
        .expect("finish");
    let id = run.id().clone();
    let page = store
        .trials_page(&id, &TrialFilter::default(), 0, 10)
        .expect("page");
    let limits: Vec<_> = page
        .trials
        .iter()
        .map(|t| t.limit_reached.map(Limit::as_str))
        .collect();
    assert_eq!(limits, [Some("tokens"), None]);
    drop((run, store));

    // A trial written before the summary held `limit_reached` has it only in its record, and an
    // index of the previous schema (version 2: no such column) is rebuilt on open.
    let trial = dir
        .path()
        .join(RUNS_DIR)
        .join(id.as_str())
        .join(TRIALS_DIR)
        .join("t.v.2");
    fs::create_dir_all(&trial).expect("mkdir");
    let mut old = serde_json::to_value(summary("t", "v", 2, "wrong")).expect("json");
    old.as_object_mut().expect("object").remove("limit_reached");
    fs::write(
        trial.join(TRIAL_FILE),
        serde_json::to_vec(&json!({
            "schema_version": 1,
            "summary": old,
            "record": {"outcome": "wrong", "limit_reached": "requests", "ledgers": {}}
        }))
        .expect("json"),
    )
    .expect("write");
    {
        let conn = rusqlite::Connection::open(dir.path().join(INDEX_FILE)).expect("sqlite");
        conn.execute_batch(
            "ALTER TABLE trials DROP COLUMN limit_reached; PRAGMA user_version = 2;",
        )
        .expect("downgrade");
    }
    let store = Store::open(dir.path()).expect("reopen");
    let page = store
        .trials_page(&id, &TrialFilter::default(), 0, 10)
        .expect("page");
    let limits: Vec<_> = page
        .trials
        .iter()
        .map(|t| (t.trial_id.as_str(), t.limit_reached.map(Limit::as_str)))
        .collect();
    assert_eq!(
        limits,
        [
            ("t.v.0", Some("tokens")),
            ("t.v.1", None),
            ("t.v.2", Some("requests"))
        ]
    );
}
