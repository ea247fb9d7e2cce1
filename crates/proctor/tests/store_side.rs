//! The suite and store side of capture and store safety (issue 25), through the real binary: a
//! FIFO planted as `suite.toml` is refused at once (every command under a timeout, so a hang
//! fails the test instead of hanging CI); the bounds on trials per (task, variant) and on
//! planned trials; a torn `trial.json` costs that trial only (`export --html` exports the rest
//! and names it, `show RUN TRIAL` says it is damaged, exit 3); run folders whose `run.json`
//! names another id are never merged by `reindex`; read-only commands refuse a store path that
//! does not exist and create nothing; `--jobs 0` is refused; `validate --config` and
//! `--image-cache` are taken and used.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::lab::{As, Lab, RunOut};
use common::{unwrapped, TestSuite, MINIMAL};

/// How long a command that must not block may take before the test calls it a hang.
const HANG: Duration = Duration::from_secs(20);

/// `proctor ARGS` in `dir`, killed after [`HANG`]: `None` when it had to be killed.
fn bounded(dir: &Path, args: &[&str]) -> Option<RunOut> {
    let out = assert_cmd::Command::cargo_bin("proctor")
        .unwrap()
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .timeout(HANG)
        .output()
        .unwrap();
    Some(RunOut {
        code: out.status.code()?,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// Snapshots `text` with what changes from run to run replaced: the lab's folder, run ids,
/// times.
fn snapshot(root: &Path, name: &str, text: &str) {
    let text = text.replace(root.to_str().unwrap(), "[DIR]");
    insta::with_settings!({filters => vec![
        (r"\d{8}-\d{6}-[0-9a-f]{4}", "[RUN]"),
        (r"\(\d+ KB\)", "([N] KB)"),
        (r"\(\d+ bytes\)", "([N] bytes)"),
        (r"at line \d+ column \d+", "at line [L] column [C]"),
        // Where half a record ends (in a string, an object, ...) depends on its timings.
        (r"EOF while parsing an? \w+", "EOF while parsing [VALUE]"),
    ]}, {
        insta::assert_snapshot!(name, text);
    });
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

#[test]
fn a_fifo_named_suite_toml_is_refused_at_once_by_validate_run_and_suites() {
    let suite = TestSuite::minimal();
    let toml = suite.path().join("suite.toml");
    std::fs::remove_file(&toml).unwrap();
    mkfifo(&toml);
    let dir = suite.path().to_str().unwrap();
    for args in [
        vec!["validate", dir],
        vec!["run", dir, "--dry-run"],
        vec!["validate", dir, "--format", "json"],
    ] {
        let out = bounded(suite.path(), &args)
            .unwrap_or_else(|| panic!("`proctor {}` hung on a FIFO suite.toml", args.join(" ")));
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        let all = format!("{}{}", out.stdout, out.stderr);
        assert!(
            all.contains("suite.toml is a FIFO (named pipe), not a regular file"),
            "{args:?}: {all}"
        );
    }
    let out = bounded(suite.path(), &["validate", dir]).unwrap();
    snapshot(suite.path(), "fifo_suite_toml", &out.stderr);
    // `suites` lists only folders whose suite.toml is a regular file; it must not block either.
    let parent = suite.path().parent().unwrap().to_str().unwrap();
    let out = bounded(suite.path(), &["suites", parent]).expect("`proctor suites` hung on a FIFO");
    assert_eq!(out.code, 0, "{}", out.stderr);

    // A FIFO in place of a scripted agent's file: refused (by the check of the suite's files)
    // without blocking.
    let suite = TestSuite::minimal();
    let script = suite.path().join("agents/oracle/hello.toml");
    std::fs::remove_file(&script).unwrap();
    mkfifo(&script);
    let out = bounded(suite.path(), &["validate", suite.path().to_str().unwrap()])
        .expect("validate hung on a FIFO script");
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("hello.toml: a FIFO inside the suite"),
        "{}",
        out.stderr
    );
}

#[test]
fn trials_per_cell_past_the_bound_are_refused_at_validate_with_the_place_and_what_to_write() {
    let suite = TestSuite::with_toml(&MINIMAL.replace(
        "id = \"mini\"\n",
        "id = \"mini\"\ndevelopment_trials = 4294967295\n",
    ));
    let out = bounded(suite.path(), &["validate", suite.path().to_str().unwrap()]).unwrap();
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("suite.toml:3:22"), "{}", out.stderr);
    snapshot(suite.path(), "trials_per_cell_bound", &out.stderr);
    // `run --dry-run` validates first: refused, never planned.
    let out = bounded(
        suite.path(),
        &["run", suite.path().to_str().unwrap(), "--dry-run"],
    )
    .expect("run --dry-run did not stop");
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        unwrapped(&out.stderr)
            .contains("`development_trials = 4294967295` is more than the 100000"),
        "{}",
        out.stderr
    );

    // The bound itself is accepted.
    let suite = TestSuite::with_toml(&MINIMAL.replace(
        "id = \"mini\"\n",
        "id = \"mini\"\nrelease_trials = 100000\n",
    ));
    let out = suite.validate();
    assert_eq!(out.code, 0, "{}", out.stderr);
}

/// [`MINIMAL`] with `tasks` copies of its task (`hello`, `hello1`, ...), each with its oracle.
fn many_tasks(tasks: usize, head: &str) -> TestSuite {
    let (top, task) = MINIMAL.split_once("[[tasks]]").unwrap();
    let mut toml = top.replace("id = \"mini\"\n", &format!("id = \"mini\"\n{head}"));
    for i in 0..tasks {
        let id = if i == 0 {
            "hello".to_string()
        } else {
            format!("hello{i}")
        };
        toml.push_str("[[tasks]]");
        toml.push_str(&task.replace("id = \"hello\"", &format!("id = \"{id}\"")));
    }
    let suite = TestSuite::with_toml(&toml);
    for i in 1..tasks {
        suite.write(
            &format!("agents/oracle/hello{i}.toml"),
            "answer = \"done\"\n\n[[steps]]\nrun = \"echo hi > hello.txt\"\n",
        );
    }
    suite
}

#[test]
fn planned_trials_past_the_bound_are_refused_at_validate_and_before_planning() {
    // 11 tasks × 1 variant × 100000 trials = 1.1 million: each count is in bounds, the total is not.
    let suite = many_tasks(11, "development_trials = 100000\n");
    let out = bounded(suite.path(), &["validate", suite.path().to_str().unwrap()]).unwrap();
    assert_eq!(out.code, 2, "{}", out.stderr);
    snapshot(suite.path(), "planned_trials_bound", &out.stderr);

    // A valid suite asked for too much with --trials: refused before anything is allocated.
    let suite = many_tasks(11, "");
    let dir = suite.path().to_str().unwrap();
    assert_eq!(suite.validate().code, 0);
    let out = bounded(
        suite.path(),
        &["run", dir, "--dry-run", "--trials", "100000"],
    )
    .expect("run --dry-run --trials 100000 did not stop");
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "100000 trials per (task, variant) × 11 (task, variant) pairs = 1100000 trials, more than the 1000000 a run may plan"
        ),
        "{}",
        out.stderr
    );
    // Past the per-cell bound, --trials is refused by the argument parser itself.
    for n in ["4000000000", "100001", "0"] {
        let out = bounded(suite.path(), &["run", dir, "--dry-run", "--trials", n])
            .expect("run --trials did not stop");
        assert_eq!(out.code, 2, "--trials {n}: {}", out.stderr);
        assert!(
            out.stderr.contains(&format!(
                "invalid value '{n}' for '--trials <N>': {n} is not in 1..=100000"
            )),
            "{}",
            out.stderr
        );
    }
    // Within both bounds the plan is made.
    let out = bounded(suite.path(), &["run", dir, "--dry-run", "--trials", "2"]).unwrap();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("hello10.oracle.1"), "{}", out.stdout);
}

#[test]
fn jobs_zero_is_refused() {
    let suite = TestSuite::minimal();
    let dir = suite.path().to_str().unwrap();
    for args in [
        vec!["run", dir, "--dry-run", "--jobs", "0"],
        vec!["run", dir, "--dry-run", "-j", "0"],
        vec![
            "worker",
            "20261201-000000-aaaa",
            "--shard",
            "0/1",
            "--jobs",
            "0",
        ],
    ] {
        let out = bounded(suite.path(), &args).unwrap();
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(
            out.stderr
                .contains("for '--jobs <N>': must be at least 1 (the trials run at once)"),
            "{args:?}: {}",
            out.stderr
        );
    }
    let out = bounded(suite.path(), &["run", dir, "--dry-run", "--jobs", "1"]).unwrap();
    assert_eq!(out.code, 0, "{}", out.stderr);
}

#[test]
fn read_only_commands_refuse_a_store_that_does_not_exist_and_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("mistyped-store");
    let store = missing.to_str().unwrap();
    let html = dir.path().join("run.html");
    for args in [
        vec!["view", "--store", store, "--listen", "127.0.0.1:0"],
        vec!["list", "--store", store],
        vec!["show", "latest", "--store", store],
        vec!["compare", "latest", "--variants", "a,b", "--store", store],
        vec![
            "export",
            "latest",
            "--html",
            html.to_str().unwrap(),
            "--store",
            store,
        ],
    ] {
        let out = bounded(dir.path(), &args).unwrap_or_else(|| panic!("{args:?} did not stop"));
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.contains(&format!("error: no store at {store}")),
            "{args:?}: {}",
            out.stderr
        );
        assert!(!missing.exists(), "{args:?} created {store}");
        assert!(!html.exists(), "{args:?} wrote {}", html.display());
    }
}

/// A two-variant suite (the `oracle` passes, `null` does nothing) in `lab`, run once per
/// variant into the lab's store; returns the run's id.
fn two_trial_run(lab: &Lab) -> String {
    lab.write(
        "suite.toml",
        "schema_version = 1\nid = \"lab\"\n\n[defaults]\nwall_timeout_seconds = 30\n\n[[variants]]\nid = \"oracle\"\nagent = \"script\"\nscript = \"agents/oracle\"\n\n[[variants]]\nid = \"null\"\nagent = \"script\"\nscript = \"agents/null\"\n\n[[tasks]]\nid = \"t\"\nprompt = \"Create hello.txt containing hi.\"\n\n[tasks.success]\nall = [{ file_contains = { path = \"hello.txt\", pattern = \"hi\" } }]\n",
    );
    lab.write("fixture/README.md", "a fixture\n");
    lab.write(
        "agents/oracle/t.toml",
        "answer = \"done\"\n\n[[steps]]\nrun = \"echo hi > hello.txt\"\n",
    );
    lab.write("agents/null/t.toml", "answer = \"done\"\n");
    let out = lab.run(As::Me, &["--trials", "1"]);
    // The null variant fails the task by design.
    assert_eq!(out.code, 1, "{}", out.stderr);
    lab.run_id()
}

fn truncate_to_half(path: &Path) {
    let bytes = std::fs::read(path).unwrap();
    std::fs::write(path, &bytes[..bytes.len() / 2]).unwrap();
}

#[test]
fn a_torn_trial_json_is_skipped_and_named_by_export_and_show_says_it_is_damaged() {
    let lab = Lab::new("store-side-torn");
    let run = two_trial_run(&lab);
    let store = lab.store();
    let store = store.to_str().unwrap();
    truncate_to_half(&lab.trial_dir("t.null.0").join("trial.json"));

    let html = lab.root.join("run.html");
    let out = lab.proctor(
        As::Me,
        &[
            "export",
            &run,
            "--html",
            html.to_str().unwrap(),
            "--store",
            store,
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("warning: trial t.null.0 was not exported: trial.json does not parse ("),
        "{}",
        out.stderr
    );
    let page = std::fs::read_to_string(&html).unwrap();
    // The sound trial is exported with its evidence; the torn one is named in its place.
    assert!(page.contains("id=\"trial-t.oracle.0\""), "oracle missing");
    assert!(
        page.contains("hello.txt"),
        "the oracle's evidence is missing"
    );
    assert!(
        page.contains("id=\"trial-t.null.0\"")
            && page.contains("damaged: trial.json does not parse"),
        "the torn trial is not named in the page"
    );
    snapshot(&lab.root, "export_torn_trial", &out.stderr);

    let out = lab.proctor(As::Me, &["show", &run, "t.null.0", "--store", store]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    snapshot(&lab.root, "show_torn_trial", &out.stderr);
    // The sound trial is still shown.
    let out = lab.proctor(As::Me, &["show", &run, "t.oracle.0", "--store", store]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("outcome    completed"),
        "{}",
        out.stdout
    );

    // An empty trial.json is damaged too, with its own reason.
    std::fs::write(lab.trial_dir("t.null.0").join("trial.json"), "").unwrap();
    let out = lab.proctor(As::Me, &["show", &run, "t.null.0", "--store", store]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("is damaged: trial.json is empty (0 bytes)"),
        "{}",
        out.stderr
    );
}

#[test]
fn reindex_keeps_two_runs_whose_run_json_ids_collide_and_names_the_mismatch() {
    let lab = Lab::new("store-side-collide");
    let run = two_trial_run(&lab);
    let runs = lab.store().join("runs");
    // A copy of the run under another folder name: its run.json still names the first run.
    let copy = format!("{}-ffff", &run[..15]);
    assert_ne!(copy, run);
    common::lab::copy_dir(&runs.join(&run), &runs.join(&copy));
    for e in std::fs::read_dir(runs.join(&copy)).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "lock") {
            std::fs::remove_file(p).unwrap();
        }
    }
    let store = lab.store();
    let store = store.to_str().unwrap();

    let out = lab.proctor(As::Me, &["reindex", "--store", store]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "warning: run folder {copy} holds a run.json whose id is {run}: indexed as run {copy}"
        )),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("reindexed 2 run(s), 4 trial(s)"),
        "{}",
        out.stderr
    );

    let out = lab.proctor(As::Me, &["list", "--store", store, "--format", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let rows: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let mut listed: Vec<(&str, u64)> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["run"].as_str().unwrap(), r["finished"].as_u64().unwrap()))
        .collect();
    listed.sort();
    let mut want = vec![(run.as_str(), 2), (copy.as_str(), 2)];
    want.sort();
    assert_eq!(listed, want, "{rows:#}");
    // Each is shown under its own folder's name.
    for id in [&run, &copy] {
        let out = lab.proctor(As::Me, &["show", id, "--store", store]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let all = format!("{}{}", out.stdout, out.stderr);
        assert!(all.contains(&format!("run {id} · suite lab")), "{all}");
    }
}

/// Writes an OCI image layout at `dir`: one layer holding `etc/os-release`.
const MAKE_TINY_IMAGE: &str = r##"
import gzip, hashlib, io, json, os, sys, tarfile
out = sys.argv[1]
def blob(data):
    d = hashlib.sha256(data).hexdigest()
    os.makedirs(f"{out}/blobs/sha256", exist_ok=True)
    open(f"{out}/blobs/sha256/{d}", "wb").write(data)
    return {"digest": "sha256:" + d, "size": len(data)}
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w:gz") as t:
    data = b"ID=proctor-tiny\n"
    ti = tarfile.TarInfo("etc/os-release"); ti.size = len(data); ti.mode = 0o644
    t.addfile(ti, io.BytesIO(data))
layer = blob(buf.getvalue())
diff_id = "sha256:" + hashlib.sha256(gzip.decompress(buf.getvalue())).hexdigest()
config = blob(json.dumps({"architecture": "amd64", "os": "linux", "config": {"Env": ["PATH=/bin"]},
    "rootfs": {"type": "layers", "diff_ids": [diff_id]}}).encode())
manifest = blob(json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": dict(config, mediaType="application/vnd.oci.image.config.v1+json"),
    "layers": [dict(layer, mediaType="application/vnd.oci.image.layer.v1.tar+gzip")]}).encode())
json.dump({"schemaVersion": 2, "manifests": [dict(manifest, mediaType="application/vnd.oci.image.manifest.v1+json")]},
          open(f"{out}/index.json", "w"))
open(f"{out}/oci-layout", "w").write('{"imageLayoutVersion": "1.0.0"}')
"##;

#[test]
fn validate_takes_config_and_image_cache_as_run_does() {
    let lab = Lab::new("store-side-validate-flags");
    let home = lab.root.join("home");
    std::fs::create_dir_all(&home).unwrap();
    lab.write("fixture/README.md", "a fixture\n");
    lab.write(
        "agents/oracle/t.toml",
        "answer = \"done\"\n\n[[steps]]\nrun = \"echo hi > hello.txt\"\n",
    );
    lab.write(
        "suite.toml",
        "schema_version = 1\nid = \"lab\"\n\n[environment]\nimage = \"oci:images/tiny\"\n\n[[variants]]\nid = \"oracle\"\nagent = \"script\"\nscript = \"agents/oracle\"\n\n[[variants]]\nid = \"real\"\nagent = \"claude-code\"\nmodel = \"mine/some-model\"\n\n[[tasks]]\nid = \"t\"\nprompt = \"Create hello.txt containing hi.\"\n\n[tasks.success]\nall = [{ file_contains = { path = \"hello.txt\", pattern = \"hi\" } }]\n",
    );
    let status = Command::new("python3")
        .arg("-c")
        .arg(MAKE_TINY_IMAGE)
        .arg(lab.suite().join("images/tiny"))
        .status()
        .unwrap();
    assert!(status.success());
    let config = lab.root.join("config.toml");
    std::fs::write(
        &config,
        "[providers.mine]\napi = \"anthropic-messages\"\nbase_url = \"http://127.0.0.1:9\"\nkey_env = \"PROCTOR_TEST_MINE_KEY\"\n",
    )
    .unwrap();
    let cache = lab.root.join("cache");
    let suite = lab.suite();
    let suite = suite.to_str().unwrap();
    let env = [("HOME", home.to_str().unwrap()), ("PROCTOR_CONFIG", "")];

    // Without --config the provider `mine` is unknown (the default configuration has none).
    let out = lab.proctor_env(As::Me, &["validate", suite], &env);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("names an unknown provider `mine`"),
        "{}",
        out.stderr
    );
    // With it, the variant is checked against that configuration and passes; with
    // --image-cache the task's image is unpacked into that cache, as `run` does.
    let out = lab.proctor_env(
        As::Me,
        &[
            "validate",
            suite,
            "--config",
            config.to_str().unwrap(),
            "--image-cache",
            cache.to_str().unwrap(),
        ],
        &env,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("valid suite `lab`"), "{}", out.stdout);
    assert!(
        out.stderr
            .contains("set PROCTOR_TEST_MINE_KEY (provider `mine`)"),
        "the key warning reads the given configuration: {}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("task `t`: image oci:images/tiny unpacked (sha256:"),
        "{}",
        out.stderr
    );
    let cached = walkdir::WalkDir::new(&cache)
        .into_iter()
        .filter_map(Result::ok)
        .any(|e| e.file_name() == "os-release");
    assert!(
        cached,
        "the image was not unpacked into {}",
        cache.display()
    );

    // An --image-cache that cannot be a cache is refused by name.
    let not_a_dir = lab.root.join("a-file");
    std::fs::write(&not_a_dir, "x").unwrap();
    let out = lab.proctor_env(
        As::Me,
        &[
            "validate",
            suite,
            "--config",
            config.to_str().unwrap(),
            "--image-cache",
            not_a_dir.to_str().unwrap(),
        ],
        &env,
    );
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("cannot open the image cache"),
        "{}",
        out.stderr
    );
}
