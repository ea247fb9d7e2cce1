//! `schemas/suite.schema.json` is what `proctor schema suite` prints, so editors pointed at the
//! checked-in file complete and check suites exactly as this proctor reads them.

use std::path::Path;

#[test]
fn the_checked_in_suite_schema_is_current() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let path = root.join("schemas/suite.schema.json");
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("proctor"))
        .args(["schema", "suite"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let generated = String::from_utf8(out.stdout).unwrap();
    if std::env::var_os("PROCTOR_UPDATE_SCHEMAS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &generated).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "schemas/suite.schema.json is stale: regenerate it with `PROCTOR_UPDATE_SCHEMAS=1 cargo test -p proctor --test schemas`"
    );
}

/// `schemas/run.schema.json`, `schemas/trial.schema.json` and
/// `schemas/oracle-summary.schema.json` describe `run.json`, `trial.json` and `validate
/// --oracle --json`'s summary exactly as this proctor writes them.
#[test]
fn the_checked_in_run_and_trial_schemas_are_current() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for (file, schema) in [
        ("schemas/run.schema.json", proctor_store::run_json_schema()),
        (
            "schemas/trial.schema.json",
            proctor_runner::record::trial_json_schema(),
        ),
        (
            "schemas/oracle-summary.schema.json",
            proctor_runner::oracle_summary::json_schema(),
        ),
    ] {
        let path = root.join(file);
        let generated = serde_json::to_string_pretty(&schema).unwrap() + "\n";
        if std::env::var_os("PROCTOR_UPDATE_SCHEMAS").is_some() {
            std::fs::write(&path, &generated).unwrap();
        }
        let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            checked_in == generated,
            "{file} is stale: regenerate it with `PROCTOR_UPDATE_SCHEMAS=1 cargo test -p proctor --test schemas`"
        );
    }
}

/// A copy of a store written by proctor at commit 7ec8c84 (before the files carried a
/// `format_version`: format 1.0), with two of the run's trials.
fn old_store(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store-7ec8c84");
    let dir = tempfile::Builder::new()
        .prefix(&format!("proctor-{name}-"))
        .tempdir()
        .unwrap();
    let store = dir.path().join("store");
    for e in walkdir::WalkDir::new(&from) {
        let e = e.unwrap();
        let to = store.join(e.path().strip_prefix(&from).unwrap());
        if e.file_type().is_dir() {
            std::fs::create_dir_all(&to).unwrap();
        } else {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
    (dir, store)
}

const OLD_RUN: &str = "20261202-080658-6cc0";

fn proctor(store: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("proctor"))
        .args(args)
        .arg("--store")
        .arg(store)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A run written by the proctor before this one (format 1.0, no `format_version`) reads: it is
/// listed with its outcomes, shown, and its trials shown.
#[test]
fn a_run_written_by_an_older_minor_version_reads() {
    let (_dir, store) = old_store("old-run");
    let run_json = store.join("runs").join(OLD_RUN).join("run.json");
    let was: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&run_json).unwrap()).unwrap();
    assert!(was.get("format_version").is_none(), "{was}");

    let list = proctor(&store, &["list", "--format", "json"]);
    assert!(list.status.success(), "{}", text(&list.stderr));
    let runs: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    let run = &runs.as_array().unwrap()[0];
    assert_eq!(run["run"], OLD_RUN, "{runs}");
    assert_eq!(run["isolation"], "overlay", "{runs}");
    assert_eq!(run["finished"], 2, "{runs}");
    assert_eq!(
        run["outcomes"],
        serde_json::json!({"completed": 1, "wrong": 1}),
        "{runs}"
    );

    let show = proctor(&store, &["show", OLD_RUN]);
    let out = text(&show.stdout);
    assert!(show.status.success(), "{}", text(&show.stderr));
    assert!(
        out.contains("deploy.trapped.0") && out.contains("wrong"),
        "{out}"
    );
    let trial = proctor(&store, &["show", OLD_RUN, "deploy.trapped.0"]);
    assert!(trial.status.success(), "{}", text(&trial.stderr));
    assert!(
        text(&trial.stdout).contains("DEPLOYED.marker"),
        "{}",
        text(&trial.stdout)
    );
    // Reading wrote nothing back: the old run.json is as it was.
    let now: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&run_json).unwrap()).unwrap();
    assert_eq!(now, was);
}

/// Sets `format_version` in a JSON file.
fn set_version(path: &Path, version: &str) {
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    v["format_version"] = version.into();
    std::fs::write(path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

/// A newer minor version reads (it only adds); a newer major version is refused with an error
/// that names the file, its version and the versions this proctor reads.
#[test]
fn a_newer_minor_reads_and_a_newer_major_is_refused_by_name() {
    let (_dir, store) = old_store("new-major");
    let run_dir = store.join("runs").join(OLD_RUN);
    let trial_json = run_dir.join("trials/deploy.trapped.0/trial.json");
    set_version(&run_dir.join("run.json"), "1.99");
    set_version(&trial_json, "1.99");
    let show = proctor(&store, &["show", OLD_RUN, "deploy.trapped.0"]);
    assert!(show.status.success(), "{}", text(&show.stderr));

    set_version(&trial_json, "2.0");
    let show = proctor(&store, &["show", OLD_RUN, "deploy.trapped.0"]);
    let err = text(&show.stderr);
    assert!(!show.status.success(), "{}", text(&show.stdout));
    assert!(
        err.contains("trial.json is format 2.0, and this proctor reads format 1.x only"),
        "{err}"
    );

    set_version(&run_dir.join("run.json"), "2.0");
    std::fs::remove_file(store.join("index.sqlite")).ok();
    let show = proctor(&store, &["show", OLD_RUN]);
    let err = text(&show.stderr);
    assert!(!show.status.success(), "{}", text(&show.stdout));
    assert!(
        err.contains("run.json is format 2.0, and this proctor reads format 1.x only"),
        "{err}"
    );
}

/// What this proctor writes carries its format versions.
#[test]
fn new_files_carry_their_format_version() {
    let lab_store = tempfile::tempdir().unwrap();
    let store = lab_store.path().join("store");
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/traps");
    let run = proctor(
        &store,
        &[
            "run",
            suite.to_str().unwrap(),
            "--trials",
            "1",
            "--task",
            "deploy",
            "--variant",
            "oracle",
        ],
    );
    assert!(run.status.code() == Some(0), "{}", text(&run.stderr));
    let runs = store.join("runs");
    let id = std::fs::read_dir(&runs)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let read = |p: &Path| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
    };
    assert_eq!(read(&id.join("run.json"))["format_version"], "1.1");
    assert_eq!(read(&id.join("run.json"))["schema_version"], 1);
    let trial = read(&id.join("trials/deploy.oracle.0/trial.json"));
    assert_eq!(trial["format_version"], "1.1");
    assert_eq!(trial["schema_version"], 1);
}
