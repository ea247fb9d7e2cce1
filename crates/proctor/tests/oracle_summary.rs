//! `proctor validate --oracle` over a whole suite, through the real binary, with the test's
//! busybox image in a real Debian `docker-registry` on loopback: one task whose image cannot
//! be pulled is named with the reason and gets no trial while every other task is still
//! validated; the suite's summary counts the oracle's passes and the null agent's failures,
//! names the task whose check cannot fail, counts the images pulled and failed and the errors
//! by kind, and is written as JSON too. A check killed part way (SIGKILL) resumes with
//! `--resume`: the trials it finished are kept as they were, only the others run.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::lab::{As, Lab};
use common::registry::{Registry, MAKE_IMAGE};

/// Pushes the test's busybox image to `registry` as `proctor/bb:v1`, and writes a
/// configuration that reaches the registry over plain HTTP; gives the configuration's path.
fn pushed_image(lab: &Lab, registry: &Registry) -> PathBuf {
    assert!(
        Path::new("/bin/busybox").is_file(),
        "these tests need a static busybox at /bin/busybox: apt-get install busybox-static"
    );
    let layout = lab.root.join("bb-layout");
    let status = Command::new("python3")
        .arg("-c")
        .arg(MAKE_IMAGE)
        .arg(&layout)
        .status()
        .unwrap();
    assert!(status.success());
    registry.push(&layout, ("proctor/bb", "v1"));
    let config = lab.root.join("config.toml");
    std::fs::write(
        &config,
        format!("[registries.\"{}\"]\ninsecure = true\n", registry.addr),
    )
    .unwrap();
    config
}

/// A task of the suite: its id, its own `[tasks.environment]` lines (else the suite's), its
/// success condition and its oracle's shell line.
struct Task<'a> {
    id: &'a str,
    environment: Option<String>,
    success: &'a str,
    solve: &'a str,
}

/// Writes a suite of `tasks` whose image is `image` (a task may name its own), each with its
/// oracle script in `agents/oracle/`.
fn write_suite(lab: &Lab, image: &str, tasks: &[Task<'_>]) {
    let mut toml = format!(
        "schema_version = 1\nid = \"dataset\"\n\n[environment]\nimage = \"{image}\"\n\n[defaults]\nwall_timeout_seconds = 60\n\n[[variants]]\nid = \"oracle\"\nagent = \"script\"\nscript = \"agents/oracle\"\n"
    );
    for t in tasks {
        toml.push_str(&format!(
            "\n[[tasks]]\nid = \"{}\"\nprompt = \"Do {}.\"\n",
            t.id, t.id
        ));
        if let Some(own) = &t.environment {
            toml.push_str(&format!("[tasks.environment]\n{own}\n"));
        }
        toml.push_str(&format!("[tasks.success]\nall = [{}]\n", t.success));
        lab.write(
            &format!("agents/oracle/{}.toml", t.id),
            &format!("answer = \"done\"\n\n[[steps]]\nrun = '''{}'''\n", t.solve),
        );
    }
    lab.write("suite.toml", &toml);
}

/// `proctor validate SUITE --oracle --image-cache LAB/cache --config CONFIG ARGS...`.
fn validate_oracle(lab: &Lab, config: &Path, args: &[&str]) -> common::lab::RunOut {
    let suite = lab.suite();
    let cache = lab.root.join("image-cache");
    let mut all = vec![
        "validate",
        suite.to_str().unwrap(),
        "--oracle",
        "--image-cache",
        cache.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    lab.proctor(As::Me, &all)
}

/// The table row of `task` (`TASK MUTATION ORACLE NULL VERDICT...`), as words.
fn row<'a>(stdout: &'a str, task: &str) -> Vec<&'a str> {
    stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some(task))
        .unwrap_or_else(|| panic!("no row for {task}:\n{stdout}"))
        .split_whitespace()
        .collect()
}

#[test]
fn an_unreachable_image_fails_its_task_only_and_the_summary_counts_the_suite() {
    let registry = Registry::start();
    let lab = Lab::new("oracle-summary");
    let config = pushed_image(&lab, &registry);
    let image = format!("{}/proctor/bb:v1", registry.addr);
    write_dataset_suite(&lab, &image, &registry.addr);
    let json = lab.root.join("summary.json");
    let out = validate_oracle(
        &lab,
        &config,
        &["--jobs", "2", "--json", json.to_str().unwrap()],
    );
    // The suite fails (a task cannot run, a check cannot fail) but every other task ran.
    assert_eq!(out.code, 2, "{}\n{}", out.stdout, out.stderr);
    let e = &out.stderr;
    assert!(
        e.contains(&format!(
            "task `gone`: image `{}/proctor/missing:v1` cannot be had, so the task does not run: ",
            registry.addr
        )),
        "{e}"
    );
    assert_each_tasks_row(&out.stdout);
    assert_summary_for_a_person(e);
    assert_summary_as_json(&json, e);
    assert_plain_validate_names_each_unpullable_image(&lab, &config, &image, &registry.addr);
}

/// Tasks `sum`, `again` (the same image under its own settings), `weak` (a check that cannot
/// fail) and `gone` (an image the registry at `registry` does not have), over `image`.
fn write_dataset_suite(lab: &Lab, image: &str, registry: &str) {
    let answer = "{ file_contains = { path = \"answer.txt\", pattern = \"^42$\" } }";
    write_suite(
        lab,
        image,
        &[
            Task {
                id: "sum",
                environment: None,
                success: answer,
                solve: "echo 42 > answer.txt",
            },
            // The same image under its own settings: still one image.
            Task {
                id: "again",
                environment: Some(format!("image = \"{image}\"\nenv = {{ MODE = \"again\" }}")),
                success: answer,
                solve: "echo 42 > answer.txt",
            },
            // A check that cannot fail: the null agent passes it too.
            Task {
                id: "weak",
                environment: None,
                success: "{ check = \"true\" }",
                solve: "true",
            },
            // An image the registry does not have.
            Task {
                id: "gone",
                environment: Some(format!("image = \"{}/proctor/missing:v1\"", registry)),
                success: answer,
                solve: "echo 42 > answer.txt",
            },
        ],
    );
}

/// Each task's row: the oracle completes where the image can be had, the null agent passes
/// `weak`, `gone` is errored.
fn assert_each_tasks_row(stdout: &str) {
    assert_eq!(
        row(stdout, "sum"),
        ["sum", "-", "completed", "abandoned", "ok"]
    );
    assert_eq!(
        row(stdout, "again"),
        ["again", "-", "completed", "abandoned", "ok"]
    );
    assert_eq!(
        row(stdout, "weak")[..5],
        ["weak", "-", "completed", "completed", "FAIL:"]
    );
    assert!(
        stdout.contains("FAIL: its image could not be had"),
        "{stdout}"
    );
    assert_eq!(
        row(stdout, "gone")[..4],
        ["gone", "-", "errored", "errored"]
    );
}

/// The summary, for a person (`e`, the standard error): passes, fails, images counted once,
/// errors by kind, the task without an image.
fn assert_summary_for_a_person(e: &str) {
    assert!(e.contains("summary of suite `dataset` (run "), "{e}");
    assert!(e.contains("  oracle passes          3/4\n"), "{e}");
    assert!(e.contains("  null agent fails       2/4\n"), "{e}");
    assert!(
        e.contains("  null agent passes (a check that cannot fail): weak\n"),
        "{e}"
    );
    // sum, again and weak share one image (again under other settings): counted once; gone's
    // failed.
    assert!(
        e.contains("  images                 1 pulled, 0 built, 1 failed\n"),
        "{e}"
    );
    assert!(
        e.contains("  errors by kind         environment 1\n"),
        "{e}"
    );
    assert!(e.contains("  no image for `gone`: image `"), "{e}");
}

/// The summary as JSON (`json`), with the same counts and the run that holds the evidence,
/// which the standard error `e` names.
fn assert_summary_as_json(json: &Path, e: &str) {
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    assert_eq!(summary["schema_version"], 1);
    assert_eq!(summary["suite"], "dataset");
    assert_eq!(
        (
            &summary["rows"],
            &summary["oracle_passes"],
            &summary["null_fails"]
        ),
        (&4.into(), &3.into(), &2.into())
    );
    assert_eq!(summary["null_passes"], serde_json::json!(["weak"]));
    assert_eq!(
        summary["images"],
        serde_json::json!({"pulled": 1, "built": 0, "failed": 1})
    );
    assert_eq!(summary["errors"], serde_json::json!({"environment": 1}));
    assert!(summary["no_image"]["gone"]
        .as_str()
        .unwrap()
        .contains("proctor/missing:v1"));
    assert_eq!(summary["ok"], false);
    assert_eq!(summary["resumed"], false);
    let run = summary["run"].as_str().unwrap();
    assert!(e.contains(run), "{e}");
}

/// `validate --image-cache` without --oracle has every image too, and names each task whose
/// image cannot be had (exit 2).
fn assert_plain_validate_names_each_unpullable_image(
    lab: &Lab,
    config: &Path,
    image: &str,
    registry: &str,
) {
    let cache = lab.root.join("image-cache");
    let plain = lab.proctor(
        As::Me,
        &[
            "validate",
            lab.suite().to_str().unwrap(),
            "--image-cache",
            cache.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ],
    );
    assert_eq!(plain.code, 2, "{}", plain.stderr);
    assert!(
        plain
            .stderr
            .contains(&format!("task `sum`: image {image} unpacked (sha256:")),
        "{}",
        plain.stderr
    );
    assert!(
        plain
            .stderr
            .contains("1 task(s) whose image cannot be had:"),
        "{}",
        plain.stderr
    );
    assert!(
        plain.stderr.contains(&format!(
            "task `gone`: image `{}/proctor/missing:v1`: ",
            registry
        )),
        "{}",
        plain.stderr
    );
}

/// The `trial.json` files of the store's runs, by trial id.
fn finished_trials(store: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(store)
        .into_iter()
        .filter_map(Result::ok)
    {
        if entry.file_name() == "trial.json" {
            let id = entry
                .path()
                .parent()
                .and_then(Path::file_name)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            out.push((id, std::fs::read(entry.path()).unwrap()));
        }
    }
    out.sort();
    out
}

#[test]
fn a_check_killed_part_way_resumes_running_only_what_it_had_not_finished() {
    let registry = Registry::start();
    let lab = Lab::new("oracle-resume");
    let config = pushed_image(&lab, &registry);
    let image = format!("{}/proctor/bb:v1", registry.addr);
    write_quick_and_slow_suite(&lab, &image);
    let store = lab.root.join("oracle-store");
    let cache = lab.root.join("image-cache");
    let suite = lab.suite();
    let args = [
        "validate",
        suite.to_str().unwrap(),
        "--oracle",
        "--image-cache",
        cache.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "--store",
        store.to_str().unwrap(),
        "--jobs",
        "1",
    ];
    let before = killed_once_the_quick_task_is_done(&lab, &args, &store);
    assert_resume_runs_only_what_was_not_finished(&lab, &args, &store, &before);
}

/// Tasks `quick` and `slow` (slow enough to be killed in), over `image`.
fn write_quick_and_slow_suite(lab: &Lab, image: &str) {
    let answer = "{ file_contains = { path = \"answer.txt\", pattern = \"^42$\" } }";
    write_suite(
        lab,
        image,
        &[
            Task {
                id: "quick",
                environment: None,
                success: answer,
                solve: "echo 42 > answer.txt",
            },
            // Slow enough to be killed in.
            Task {
                id: "slow",
                environment: None,
                success: answer,
                solve: "sleep 20; echo 42 > answer.txt",
            },
        ],
    );
}

/// Runs `proctor ARGS` (an oracle check into `store`) and kills it once the quick task's two
/// trials are finished (the slow one under way); while it runs, its run cannot be taken up by
/// another process. Gives the trials finished before the kill.
fn killed_once_the_quick_task_is_done(
    lab: &Lab,
    args: &[&str],
    store: &Path,
) -> Vec<(String, Vec<u8>)> {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("proctor"))
        .args(args)
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed once the quick task's two trials are finished (the slow one is under way).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let before = loop {
        let done = finished_trials(store);
        if done
            .iter()
            .filter(|(id, _)| id.starts_with("quick."))
            .count()
            == 2
        {
            break done;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the check ended before it could be killed"
        );
        assert!(std::time::Instant::now() < deadline, "no trial finished");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    // While it runs, its run cannot be taken up by another process.
    let mut racing = args.to_vec();
    racing.push("--resume");
    let refused = lab.proctor(As::Me, &racing);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("cannot resume the oracle run "),
        "{}",
        refused.stderr
    );
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !before.iter().any(|(id, _)| id.starts_with("slow.__oracle")),
        "the slow oracle finished before the kill: {:?}",
        before.iter().map(|(id, _)| id).collect::<Vec<_>>()
    );

    before
}

/// The check resumed (`ARGS --resume`) keeps every trial finished `before` the kill as it was,
/// runs the rest, and keeps one run in `store`: the one resumed.
fn assert_resume_runs_only_what_was_not_finished(
    lab: &Lab,
    args: &[&str],
    store: &Path,
    before: &[(String, Vec<u8>)],
) {
    let json = lab.root.join("summary.json");
    let mut resumed_args = args.to_vec();
    resumed_args.extend(["--resume", "--json", json.to_str().unwrap()]);
    let out = lab.proctor(As::Me, &resumed_args);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains(", resumed):"), "{}", out.stderr);
    let after = finished_trials(store);
    // Every trial finished before the kill is kept as it was: it did not run again.
    for (id, bytes) in before {
        let now = after.iter().find(|(i, _)| i == id).map(|(_, b)| b);
        assert_eq!(now, Some(bytes), "{id} changed on resume");
    }
    let ids: Vec<&str> = after.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "quick.__null.0",
            "quick.__oracle.0",
            "slow.__null.0",
            "slow.__oracle.0"
        ]
    );
    // One run in the store: the one resumed.
    let runs: Vec<_> = std::fs::read_dir(store.join("runs"))
        .unwrap()
        .filter_map(Result::ok)
        .collect();
    assert_eq!(runs.len(), 1);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(summary["resumed"], true);
    assert_eq!(
        summary["run"],
        runs[0].file_name().to_string_lossy().as_ref()
    );
    assert_eq!(
        (
            &summary["rows"],
            &summary["oracle_passes"],
            &summary["null_fails"]
        ),
        (&2.into(), &2.into(), &2.into())
    );
    assert_eq!(summary["ok"], true);
}
