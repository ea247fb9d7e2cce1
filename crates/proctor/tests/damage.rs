//! A damaged store, through the real binary: a store made by running a bundled example (or a
//! lab suite), then damaged for real (garbage in `index.sqlite`, a truncated `run.json` or
//! `trial.json`, the store bind-mounted read-only, a tmpfs store that fills up, a tampered layer
//! in the cache), and every command's answer checked. The mount cases need root (as in CI); where
//! `mount(2)` is refused with EPERM they print why and return.

mod common;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use common::lab::{As, Lab, RunOut};
use serde_json::Value;

/// Runs the bundled `traps` example's `assess` task once per variant (2 trials) into the lab's
/// store; returns the new run's id.
fn traps_run(lab: &Lab) -> String {
    let before = run_ids(lab);
    let suite = common::repo_root().join("examples/traps");
    let store = lab.store();
    let out = lab.proctor(
        As::Me,
        &[
            "run",
            suite.to_str().unwrap(),
            "--store",
            store.to_str().unwrap(),
            "--task",
            "assess",
            "--trials",
            "1",
        ],
    );
    // The trapped variant fails the task by design.
    assert_eq!(out.code, 1, "{}", out.stderr);
    let after = run_ids(lab);
    let new: Vec<&String> = after.iter().filter(|id| !before.contains(id)).collect();
    assert_eq!(new.len(), 1, "{after:?}");
    new[0].clone()
}

fn run_ids(lab: &Lab) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(lab.store().join("runs"))
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids
}

/// `proctor COMMAND --store STORE ARGS...`.
fn cmd(lab: &Lab, command: &str, args: &[&str]) -> RunOut {
    let store = lab.store();
    let mut all = vec![command, "--store", store.to_str().unwrap()];
    all.extend_from_slice(args);
    lab.proctor(As::Me, &all)
}

fn truncate_to_half(path: &Path) {
    let bytes = std::fs::read(path).unwrap();
    std::fs::write(path, &bytes[..bytes.len() / 2]).unwrap();
}

/// A mount made by a test, undone when dropped (also when the test fails).
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let c = CString::new(self.0.as_os_str().as_bytes()).unwrap();
        // SAFETY: umount2(2) on a NUL-terminated path that lives for the call.
        unsafe {
            libc::umount2(c.as_ptr(), libc::MNT_DETACH);
        }
    }
}

/// `mount(2)`; `Err` with the reason to print when the kernel says EPERM (not root, or in a
/// container without the capability), a panic on any other failure.
fn mount(
    source: &str,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> Result<(), String> {
    let source = CString::new(source).unwrap();
    let target_c = CString::new(target.as_os_str().as_bytes()).unwrap();
    let fstype = fstype.map(|f| CString::new(f).unwrap());
    let data = data.map(|d| CString::new(d).unwrap());
    // SAFETY: mount(2) with NUL-terminated strings (or null) that live for the call.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target_c.as_ptr(),
            fstype.as_ref().map_or(std::ptr::null(), |f| f.as_ptr()),
            flags,
            data.as_ref()
                .map_or(std::ptr::null(), |d| d.as_ptr().cast()),
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EPERM) {
        return Err(format!("mount {} refused: {e}", target.display()));
    }
    panic!("mount {}: {e}", target.display());
}

/// Makes `dir` a read-only view of itself: `mount --bind DIR DIR`, then
/// `mount -o remount,bind,ro DIR`.
fn bind_read_only(dir: &Path) -> Result<Mounted, String> {
    let src = dir.to_str().unwrap();
    mount(src, dir, None, libc::MS_BIND, None)?;
    let mounted = Mounted(dir.to_path_buf());
    mount(
        src,
        dir,
        None,
        libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY,
        None,
    )?;
    // The view really is read-only, even for root.
    let probe = std::fs::write(dir.join("probe"), "x").unwrap_err();
    assert_eq!(probe.raw_os_error(), Some(libc::EROFS), "{probe}");
    Ok(mounted)
}

fn files_named(dir: &Path, pred: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| pred(&e.file_name().to_string_lossy()))
        .map(|e| e.path().to_path_buf())
        .collect()
}

#[test]
fn a_garbage_index_is_named_by_every_command_and_reindex_moves_it_aside() {
    let lab = Lab::new("damage-index");
    let run = traps_run(&lab);
    let index = lab.store().join("index.sqlite");
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(lab.store().join(format!("index.sqlite{suffix}")));
    }
    let garbage: Vec<u8> = (0..16384u32).map(|i| (i * 31 + 7) as u8).collect();
    std::fs::write(&index, &garbage).unwrap();

    let store = lab.store().display().to_string();
    for (command, args) in [("list", vec![]), ("show", vec!["latest"])] {
        let out = cmd(&lab, command, &args);
        assert_eq!(out.code, 5, "{command}: {}", out.stderr);
        assert!(
            out.stderr.contains("index.sqlite is unreadable"),
            "{command}: {}",
            out.stderr
        );
        assert!(
            out.stderr
                .contains(&format!("help: `proctor reindex --store {store}`")),
            "{command} says to run reindex: {}",
            out.stderr
        );
    }

    let out = cmd(&lab, "reindex", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("the index was unreadable; moved it to "),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("reindexed 1 run(s), 2 trial(s)"),
        "{}",
        out.stderr
    );
    let aside = files_named(&lab.store(), |n| n.starts_with("index.sqlite.damaged-"));
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert_eq!(std::fs::read(&aside[0]).unwrap(), garbage, "kept untouched");

    let out = cmd(&lab, "list", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let row = out
        .stdout
        .lines()
        .find(|l| l.starts_with(&run))
        .unwrap_or_else(|| panic!("{}", out.stdout));
    assert!(row.contains(" finished ") && row.contains(" 2/2 "), "{row}");
}

#[test]
fn reindex_skips_a_truncated_run_json_with_a_warning_naming_the_run() {
    let lab = Lab::new("damage-run-json");
    let torn = traps_run(&lab);
    let kept = traps_run(&lab);
    truncate_to_half(&lab.store().join("runs").join(&torn).join("run.json"));

    let out = cmd(&lab, "reindex", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains(&format!("warning: skipped run {torn}: "))
            && out.stderr.contains("run.json: EOF while parsing"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("reindexed 1 run(s), 2 trial(s)"),
        "the other run is indexed: {}",
        out.stderr
    );

    let out = cmd(&lab, "list", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.lines().any(|l| l.starts_with(&kept)),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains(&torn), "{}", out.stdout);
    assert!(
        out.stderr
            .contains(&format!("warning: run {torn} is not listed: ")),
        "list says why a run is missing: {}",
        out.stderr
    );
}

#[test]
fn a_truncated_or_empty_trial_json_is_reported_and_rescore_exits_3() {
    let lab = Lab::new("damage-trial-json");
    let run = traps_run(&lab);
    let trials = lab.store().join("runs").join(&run).join("trials");
    truncate_to_half(&trials.join("assess.oracle.0/trial.json"));

    // rescore reads the folders: the torn trial is named, the other rescored, and it exits 3.
    let out = cmd(&lab, "rescore", &[&run]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("warning: trial assess.oracle.0 was not rescored: trial.json does not parse"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("rescored 1 trial(s) of run") && out.stderr.contains("wrote "),
        "{}",
        out.stderr
    );

    std::fs::write(trials.join("assess.trapped.0/trial.json"), "").unwrap();

    let out = cmd(&lab, "reindex", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "warning: run {run} trial assess.oracle.0: trial.json does not parse"
        )),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(&format!(
            "warning: run {run} trial assess.trapped.0: trial.json is empty (0 bytes)"
        )),
        "{}",
        out.stderr
    );

    let out = cmd(&lab, "list", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let row = out
        .stdout
        .lines()
        .find(|l| l.starts_with(&run))
        .unwrap_or_else(|| panic!("{}", out.stdout));
    assert!(row.trim_end().ends_with(" 0/2"), "{row}");
    for trial in ["assess.oracle.0", "assess.trapped.0"] {
        assert!(
            out.stderr
                .contains(&format!("warning: run {run} trial {trial}: trial.json ")),
            "list names {trial}: {}",
            out.stderr
        );
    }
    let json = cmd(&lab, "list", &["--format", "json"]);
    let rows: Value = serde_json::from_str(&json.stdout).unwrap();
    let damaged: Vec<&str> = rows[0]["damaged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["trial_id"].as_str().unwrap())
        .collect();
    assert_eq!(damaged, ["assess.oracle.0", "assess.trapped.0"], "{rows:#}");

    let out = cmd(&lab, "rescore", &[&run]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("warning: trial assess.oracle.0 was not rescored: trial.json does not parse"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("warning: trial assess.trapped.0 was not rescored: trial.json is empty"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("nothing was rescored and nothing written"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_read_only_store_is_listed_and_shown_and_refuses_writes_by_name() {
    let lab = Lab::new("damage-read-only");
    let run = traps_run(&lab);
    let store = lab.store();
    let ro = match bind_read_only(&store) {
        Ok(m) => m,
        Err(why) => {
            common::skip(&why);
            return;
        }
    };
    let list = cmd(&lab, "list", &[]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    assert!(
        list.stdout
            .lines()
            .any(|l| l.starts_with(&run) && l.contains(" 2/2 ")),
        "{}",
        list.stdout
    );
    let show = cmd(&lab, "show", &["latest"]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    assert!(show.stdout.contains("assess.oracle.0"), "{}", show.stdout);
    let trial = cmd(&lab, "show", &["latest", "assess.oracle.0"]);
    assert_eq!(trial.code, 0, "{}", trial.stderr);
    assert!(
        trial.stdout.contains("outcome    completed"),
        "{}",
        trial.stdout
    );

    let reindex = cmd(&lab, "reindex", &[]);
    assert_eq!(reindex.code, 5, "{}", reindex.stderr);
    assert!(
        reindex
            .stderr
            .contains("is read-only: cannot rebuild its index"),
        "{}",
        reindex.stderr
    );
    let rescore = cmd(&lab, "rescore", &[&run]);
    assert_eq!(rescore.code, 5, "{}", rescore.stderr);
    assert!(
        rescore
            .stderr
            .contains("is read-only: cannot rescore a run"),
        "{}",
        rescore.stderr
    );
    let html = lab.root.join("run.html");
    let export = cmd(&lab, "export", &[&run, "--html", html.to_str().unwrap()]);
    assert_eq!(export.code, 0, "{}", export.stderr);
    assert!(std::fs::read_to_string(&html).unwrap().contains(&run));
    drop(ro);

    // Without its index (or with an unusable one), a read-only store is still listed: the index
    // is built in memory from the folders.
    std::fs::write(store.join("index.sqlite"), "not a database at all").unwrap();
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(store.join(format!("index.sqlite{suffix}")));
    }
    let _ro = bind_read_only(&store).unwrap_or_else(|why| panic!("{why}"));
    let list = cmd(&lab, "list", &[]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    assert!(
        list.stdout
            .lines()
            .any(|l| l.starts_with(&run) && l.contains(" 2/2 ")),
        "{}",
        list.stdout
    );
}

#[test]
fn a_full_store_stops_the_run_as_interrupted_with_the_reason_and_no_temporaries() {
    let lab = Lab::new("damage-full");
    // Each trial's agent leaves a 3 MB file, which capture copies into a 2 MB store.
    lab.one_task(
        "",
        "{ files_unchanged = false }",
        &["head -c 3000000 /dev/zero | tr '\\0' x > big.txt"],
        false,
    );
    let store = lab.store();
    let _tmpfs = match mount("tmpfs", &store, Some("tmpfs"), 0, Some("size=2m")) {
        Ok(()) => Mounted(store.clone()),
        Err(why) => {
            common::skip(&why);
            return;
        }
    };
    // Scratch outside the store: only the evidence goes into it.
    let scratch = lab.root.join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    let out = lab.run(
        As::Me,
        &[
            "--trials",
            "2",
            "--jobs",
            "1",
            "--scratch",
            scratch.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 5, "{}", out.stderr);
    assert!(
        out.stderr.contains("stopped: the store ran out of space (")
            && out.stderr.contains("No space left on device"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("--resume"), "{}", out.stderr);

    // No temporary file is left, and no trial folder holds half its evidence.
    let temps = files_named(&store, |n| n.contains(".tmp-") || n.starts_with(".tmp"));
    assert!(temps.is_empty(), "{temps:?}");
    let run_dir = lab.run_dir();
    let run_id = run_dir.file_name().unwrap().to_string_lossy().into_owned();
    for t in std::fs::read_dir(run_dir.join("trials")).unwrap() {
        let t = t.unwrap().path();
        assert!(t.join("trial.json").is_file(), "a partial trial: {t:?}");
    }
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(meta["status"], "interrupted", "{meta:#}");
    assert!(
        meta["stop_reason"]
            .as_str()
            .is_some_and(|r| r.contains("No space left on device")),
        "{meta:#}"
    );

    let list = cmd(&lab, "list", &[]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    assert!(
        list.stdout
            .lines()
            .any(|l| l.starts_with(&run_id) && l.contains(" interrupted ")),
        "{}",
        list.stdout
    );
    assert!(
        list.stderr.contains(&format!(
            "note: run {run_id} was stopped: the store ran out of space"
        )) && list.stderr.contains("No space left on device"),
        "{}",
        list.stderr
    );
    let show = cmd(&lab, "show", &[&run_id]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    assert!(
        show.stderr.contains(" · interrupted · ")
            && show.stderr.contains("stopped: the store ran out of space"),
        "{}",
        show.stderr
    );

    // With room made, the same run resumes and finishes.
    mount("tmpfs", &store, None, libc::MS_REMOUNT, Some("size=64m")).unwrap();
    let resumed = lab.run(
        As::Me,
        &["--resume", &run_id, "--scratch", scratch.to_str().unwrap()],
    );
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(meta["status"], "finished", "{meta:#}");
    assert!(meta.get("stop_reason").is_none(), "{meta:#}");
}

#[test]
fn a_tampered_layer_in_the_cache_is_rebuilt_and_the_trial_sees_the_mutation() {
    let lab = Lab::new("damage-layer");
    lab.write("fixture/rate.txt", "rate = 10\n").write(
        "mutations/t/01-rate.patch",
        "--- a/rate.txt\n+++ b/rate.txt\n@@ -1 +1 @@\n-rate = 10\n+rate = 12\n",
    );
    lab.one_task(
        "",
        "{ answer_matches = \"rate = 12\" }",
        &["cat rate.txt"],
        true,
    );
    let first = lab.run(As::Me, &["--trials", "1"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let cached = files_named(&lab.store().join("cache"), |n| n == "rate.txt");
    assert_eq!(cached.len(), 1, "{cached:?}");
    assert_eq!(std::fs::read_to_string(&cached[0]).unwrap(), "rate = 12\n");

    std::fs::write(&cached[0], "rate = 99\n").unwrap();
    let second = lab.run(As::Me, &["--trials", "1"]);
    assert_eq!(
        second.code, 0,
        "the trial saw the tampered layer: {}",
        second.stderr
    );
    assert_eq!(std::fs::read_to_string(&cached[0]).unwrap(), "rate = 12\n");
    let mut answers = Vec::new();
    for run in std::fs::read_dir(lab.store().join("runs")).unwrap() {
        let answer = run.unwrap().path().join("trials/t.agent.0/answer.txt");
        answers.push(std::fs::read_to_string(answer).unwrap());
    }
    assert_eq!(answers.len(), 2);
    assert!(
        answers.iter().all(|a| a.trim() == "rate = 12"),
        "{answers:?}"
    );
}
