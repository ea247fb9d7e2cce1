//! Integrity audit benchmark: what the audit adds to grading one trial, on the 10,000-file /
//! 40 MB fixture of docs/performance.md, and how it grows with the number of changed files.
//!
//! `cargo bench -p proctor-runner --bench audit` (release build). For 0 (a no-op trial), 5, 50
//! and 500 changed files (Python sources, one a module named like the standard library's) it
//! times, over the same end state read from disk: grading without the audit (`proctor_score::score` with no findings, the
//! baseline), and grading as a trial does (`grade::grade`: reading the holdout, the audit, then
//! `score`). Each figure is a median of `PROCTOR_BENCH_REPS` (default 200) runs, with the ratio
//! to the baseline and the difference in microseconds.
//!
//! Then what watching the checks adds (docs/outcomes.md, "What the audit reads"), per trial and
//! per check run, for the same end states: grading with the static audit alone against grading
//! with the observed audit too (each of the task's two checks seen to load every changed file);
//! and the watch of one check run (the `fanotify` marks on the changed files before it, the
//! events drained after it; the check's reads of every changed file in between are not timed).
//! Last, the watch of one check run over 500 changed files spread over 1, 10, 100 and 500
//! folders. `PROCTOR_BENCH_ONLY=watch` runs that table alone (no 40 MB fixture laid out), for
//! comparing two builds of the watch side by side.
//! It prints figures and asserts nothing: timing is never a test.

use std::path::Path;
use std::time::{Duration, Instant};

use proctor_runner::trial::checks::{check_files, EndTree, Observer, Watch};
use proctor_runner::trial::grade::{self, EndStateFiles};
use proctor_score::endstate::CheckRun;
use proctor_score::endstate::{Access, CheckObservation, ObservedFile};
use proctor_score::endstate::{AgentEnd, ChangeKind, EndState, FileChange};
use proctor_score::{Audit, Faults};
use proctor_suite::model::Task;

const TASK: &str = r#"
id = "fix"
prompt = "p"
[success]
all = [{ check = "python3 check_fix.py" }, { check = "python3 -m pytest -q tests" }, { files_unchanged = ["docs/**"] }]
"#;

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// What every case of the benchmark shares: the repetitions, the scratch folder, the
/// 10,000-file fixture, the holdout and the task.
struct Bench {
    reps: usize,
    dir: tempfile::TempDir,
    fixture: std::path::PathBuf,
    holdout: std::path::PathBuf,
    body: String,
    task: Task,
}

/// One case: `n` changed files, their changes, the folder holding them and the end state.
struct Case {
    n: usize,
    changes: Vec<FileChange>,
    changes_dir: std::path::PathBuf,
    end: EndState,
}

fn main() {
    if std::env::var("PROCTOR_BENCH_ONLY").as_deref() == Ok("watch") {
        let dir = tempfile::tempdir().unwrap();
        watch_by_folders(dir.path(), reps());
        return;
    }
    let bench = Bench::lay_out();
    let reps = bench.reps;
    println!("integrity audit, 10,000-file fixture, {reps} reps, medians\n");
    println!(
        "| changed files | grading without the audit | grading with it | ratio | audit adds |"
    );
    println!("|---:|---:|---:|---:|---:|");
    let mut cases = Vec::new();
    for n in [0usize, 5, 50, 500] {
        let case = bench.case(n);
        bench.time_the_audit(&case);
        cases.push(case);
    }

    println!("\nwatching the checks, same end states, {reps} reps, medians\n");
    println!("| changed files | grading, static audit | grading, static + observed | observed audit adds per check run | watch of one check run |");
    println!("|---:|---:|---:|---:|---:|");
    for case in &cases {
        bench.time_the_watch(case);
    }
    watch_by_folders(bench.dir.path(), reps);
}

impl Bench {
    /// The fixture (10,000 files of 4 KiB in 100 folders: ~40 MB), the holdout of two checks,
    /// and the repetitions `PROCTOR_BENCH_REPS` asks for (default 200).
    fn lay_out() -> Bench {
        let reps = reps();
        let dir = tempfile::tempdir().unwrap();
        let fixture = dir.path().join("fixture");
        let body = "x = 1\n".repeat(680);
        for i in 0..10_000 {
            write(
                &fixture.join(format!("pkg{:02}/mod{i:05}.py", i % 100)),
                &body,
            );
        }
        let holdout = dir.path().join("holdout");
        write(
            &holdout.join("check_fix.py"),
            "import json, subprocess, sys\nimport pkg00.mod00000\nprint('CHECK-OK')\n",
        );
        write(
            &holdout.join("tests/test_hidden.py"),
            "import pkg00\n\ndef test_x():\n    assert True\n",
        );
        let task: Task = toml::from_str(TASK).unwrap();
        Bench {
            reps,
            dir,
            fixture,
            holdout,
            body,
            task,
        }
    }

    /// `n` changed Python sources (the first a module named like the standard library's
    /// `json`), written to a folder of their own, and the end state listing them.
    fn case(&self, n: usize) -> Case {
        let body = &self.body;
        let changes_dir = self.dir.path().join(format!("changes-{n}"));
        let mut changes = Vec::new();
        for i in 0..n {
            let path = if i == 0 {
                "json.py".to_string()
            } else {
                format!("pkg{:02}/mod{i:05}.py", i % 100)
            };
            let text = format!("{body}def f{i}():\n    return {i}\n");
            write(&changes_dir.join(&path), &text);
            changes.push(FileChange {
                path,
                path_hex: None,
                kind: if i == 0 {
                    ChangeKind::Added
                } else {
                    ChangeKind::Changed
                },
                dir: false,
                mode: Some(0o644),
                hash: None,
                size: Some(text.len() as u64),
                owner: None,
                mtime: None,
            });
        }
        let end = EndState {
            answer: "done".into(),
            changes: changes.clone(),
            agent: AgentEnd {
                started: true,
                exit_code: Some(0),
                ..AgentEnd::default()
            },
            ..EndState::default()
        };
        Case {
            n,
            changes,
            changes_dir,
            end,
        }
    }

    /// Prints the row of `case`: grading without the audit against grading as a trial does.
    fn time_the_audit(&self, case: &Case) {
        let (task, reps) = (&self.task, self.reps);
        let Case {
            n,
            changes,
            changes_dir,
            end,
        } = case;
        let files = EndStateFiles::new(changes_dir.clone(), changes, vec![self.fixture.clone()]);
        let faults = Faults::default();
        let window = Duration::from_secs(60);
        let (mut without, mut with) = (Vec::new(), Vec::new());
        let mut findings = 0;
        for _ in 0..reps {
            // Alternate, so that both see the same machine.
            let t = Instant::now();
            let v = proctor_score::score(task, end, &files, &faults, window, Audit::default());
            without.push(t.elapsed());
            std::hint::black_box(v);
            let t = Instant::now();
            let held = check_files(Some(&self.holdout));
            let v = grade::grade(task, window, end, &files, &faults, &held, None);
            with.push(t.elapsed());
            findings = v.integrity.findings.len();
        }
        let (a, b) = (median(without), median(with));
        println!(
            "| {n} | {:.1} µs | {:.1} µs | {:.2}× | {:.1} µs ({findings} finding(s)) |",
            a.as_secs_f64() * 1e6,
            b.as_secs_f64() * 1e6,
            b.as_secs_f64() / a.as_secs_f64(),
            (b.as_secs_f64() - a.as_secs_f64()) * 1e6,
        );
    }

    /// Prints the row of `case`: grading with the static audit alone against grading with
    /// the observed audit too, and the watch of one check run.
    fn time_the_watch(&self, case: &Case) {
        let (task, reps) = (&self.task, self.reps);
        let Case {
            n,
            changes,
            changes_dir,
            end,
        } = case;
        let held = check_files(Some(&self.holdout));
        let files = EndStateFiles::new(changes_dir.clone(), changes, vec![self.fixture.clone()]);
        let faults = Faults::default();
        let window = Duration::from_secs(60);
        let (plain, seen) = (
            with_checks(end, changes, false),
            with_checks(end, changes, true),
        );
        // As a trial's: the capture told which changes are regular files (all of these).
        let watch = Watch::of(changes, &[]).with_kinds(Default::default());
        let tree = EndTree::Overlay {
            top: changes_dir.clone(),
            lowers: vec![self.fixture.clone()],
        };
        let scratch = self.dir.path().join(format!("check-{n}"));
        std::fs::create_dir_all(scratch.join("upper")).unwrap();
        let (mut stat, mut obs, mut watching) = (Vec::new(), Vec::new(), Vec::new());
        let mut findings = 0;
        for _ in 0..reps {
            let t = Instant::now();
            let v = grade::grade(task, window, &plain, &files, &faults, &held, None);
            stat.push(t.elapsed());
            std::hint::black_box(v);
            let t = Instant::now();
            let v = grade::grade(task, window, &seen, &files, &faults, &held, None);
            obs.push(t.elapsed());
            findings = v.integrity.findings.len();
            // One check run's watch: marks before, the check's reads, events drained after.
            let t = Instant::now();
            let o = Observer::start(&watch, &tree, &[], None, &scratch);
            let started = t.elapsed();
            for c in changes {
                std::hint::black_box(std::fs::read(changes_dir.join(&c.path)).unwrap());
            }
            let t = Instant::now();
            let record = o.finish();
            watching.push(started + t.elapsed());
            assert_eq!(record.files.len(), *n, "{record:?}");
        }
        let (a, b, w) = (median(stat), median(obs), median(watching));
        println!(
            "| {n} | {:.1} µs | {:.1} µs ({findings} finding(s)) | {:.1} µs | {:.1} µs |",
            a.as_secs_f64() * 1e6,
            b.as_secs_f64() * 1e6,
            (b.as_secs_f64() - a.as_secs_f64()) * 1e6 / 2.0,
            w.as_secs_f64() * 1e6,
        );
    }
}

/// `end` with a run of each of the task's two checks, each seen (when `observed`) to load
/// every changed file.
fn with_checks(end: &EndState, changes: &[FileChange], observed: bool) -> EndState {
    let seen = CheckObservation {
        files: changes
            .iter()
            .map(|c| ObservedFile {
                path: c.path.clone(),
                root: false,
                how: vec![Access::Opened, Access::Read],
            })
            .collect(),
        ..Default::default()
    };
    let mut end = end.clone();
    for command in ["python3 check_fix.py", "python3 -m pytest -q tests"] {
        end.checks.insert(
            command.into(),
            CheckRun {
                command: command.into(),
                exit: Some(0),
                observed: observed.then(|| seen.clone()),
                ..Default::default()
            },
        );
    }
    end
}

/// The repetitions `PROCTOR_BENCH_REPS` asks for (default 200).
fn reps() -> usize {
    std::env::var("PROCTOR_BENCH_REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

/// The watch of one check run over 500 changed files as the folders holding them grow: one
/// mark per folder, so its cost follows the folders, not the files.
fn watch_by_folders(dir: &Path, reps: usize) {
    println!("\nthe watch of one check run, 500 changed files, by the folders holding them, {reps} reps, medians\n");
    println!("| folders | watch of one check run | marks before it | events after it |");
    println!("|---:|---:|---:|---:|");
    for folders in [1usize, 10, 100, 500] {
        let top = dir.join(format!("spread-{folders}"));
        let rels: Vec<String> = (0..500)
            .map(|i| format!("d{:03}/f{i:03}.py", i % folders))
            .collect();
        for rel in &rels {
            write(&top.join(rel), "x = 1\n");
        }
        let watch = Watch {
            workspace: rels.clone(),
            ..Watch::default()
        }
        .with_kinds(Default::default());
        let tree = EndTree::Overlay {
            top: top.clone(),
            lowers: vec![],
        };
        let scratch = dir.join(format!("spread-check-{folders}"));
        std::fs::create_dir_all(scratch.join("upper")).unwrap();
        let mut watching = Vec::new();
        let (mut marks, mut events) = (Vec::new(), Vec::new());
        for _ in 0..reps {
            let t = Instant::now();
            let o = Observer::start(&watch, &tree, &[], None, &scratch);
            let started = t.elapsed();
            for rel in &rels {
                std::hint::black_box(std::fs::read(top.join(rel)).unwrap());
            }
            let t = Instant::now();
            let record = o.finish();
            let finished = t.elapsed();
            watching.push(started + finished);
            marks.push(started);
            events.push(finished);
            assert_eq!(record.files.len(), 500, "{record:?}");
        }
        let us = |xs: Vec<Duration>| median(xs).as_secs_f64() * 1e6;
        println!(
            "| {folders} | {:.1} µs | {:.1} µs | {:.1} µs |",
            us(watching),
            us(marks),
            us(events)
        );
    }
}
