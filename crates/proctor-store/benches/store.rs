//! Store benchmark: fills a real store with 10,000 finished trials and prints medians of the
//! queries behind `proctor list` / `show`, of `reindex`, and of `finish_trial` itself.
//!
//! `cargo bench -p proctor-store` (release build). Environment:
//! `PROCTOR_BENCH_TRIALS` (default 10000), `PROCTOR_BENCH_DIR` (default the system temp dir),
//! `PROCTOR_BENCH_JOBS` (writer threads, default 4).
//!
//! Performance target (docs/performance.md): list/show/compare over a 10,000-trial store ≤ 200 ms.
//! This prints figures; it asserts nothing, because timing is never a test.

use proctor_store::{HostInfo, RunHandle, RunMeta, Store, TrialSummary};
use serde_json::json;
use std::time::{Duration, Instant};

const OUTCOMES: [&str; 6] = [
    "completed",
    "completed",
    "wrong",
    "refused-honestly",
    "abandoned",
    "errored",
];

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn meta(trials: usize) -> RunMeta {
    RunMeta {
        suite_id: "bench".into(),
        suite_path: "suites/bench".into(),
        suite_hash: "b3:0123456789abcdef".into(),
        fixture_hash: "b3:fedcba9876543210".into(),
        trial_mode: proctor_records::run::RunMode::Release,
        trials_per_cell: 10,
        variants: vec!["control".into(), "method".into()],
        tasks: (0..20).map(|t| format!("task-{t:02}")).collect(),
        planned_trials: trials as u64,
        isolation: proctor_records::run::Isolation::Overlay,
        host: HostInfo::detect(),
        proctor_version: "0.1.0".into(),
        ..RunMeta::default()
    }
}

fn summary(n: usize) -> TrialSummary {
    let task = format!("task-{:02}", n % 20);
    let variant = if n % 2 == 1 { "method" } else { "control" };
    let index = (n / 40) as u32;
    let outcome: proctor_records::OutcomeKind = OUTCOMES[n % OUTCOMES.len()]
        .parse()
        .expect("an outcome label");
    TrialSummary {
        trial_id: format!("{task}.{variant}.{index}.{n}"),
        task,
        variant: variant.into(),
        trial_index: index,
        outcome,
        reason: outcome.is_errored().then(|| "provider returned 529".into()),
        wall_seconds: 3.5 + (n % 17) as f64,
        calls: Some((n % 13) as u64),
        wrong_turns: Some((n % 3) as u64),
        input_tokens: Some(12_000 + n as u64),
        output_tokens: Some(800),
        cost_usd: None,
        limit_reached: None,
        flags: Vec::new(),
    }
}

/// A trial record of about 2 KB, like a small real one.
fn record(n: usize) -> serde_json::Value {
    json!({
        "command": ["agent", "--print", "--model", "m"],
        "calls": (0..12).map(|k| json!({
            "seq": k, "argv": ["mail", "send", format!("--to=user{k}@example.org")],
            "exit": 0, "stdout_bytes": 120, "started": 1.0 + k as f64, "ended": 1.2 + k as f64,
        })).collect::<Vec<_>>(),
        "assertions": [{"rule": "file_contains", "ok": true, "evidence": "found on line 3"}],
        "answer": format!("Done with trial {n}."),
    })
}

/// Finishes trials `range` of a run from `jobs` threads; returns every call's latency.
fn fill(run: &RunHandle, range: std::ops::Range<usize>, jobs: usize) -> Vec<Duration> {
    let chunks: Vec<Vec<usize>> = (0..jobs)
        .map(|j| range.clone().filter(|n| n % jobs == j).collect())
        .collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                s.spawn(move || {
                    let mut lat = Vec::with_capacity(chunk.len());
                    for n in chunk {
                        let sum = summary(n);
                        let rec = record(n);
                        let t = Instant::now();
                        if let Err(e) = run.finish_trial(&sum, &rec) {
                            eprintln!("finish_trial failed: {e}");
                            std::process::exit(1);
                        }
                        lat.push(t.elapsed());
                    }
                    lat
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    })
}

fn quantile(mut v: Vec<Duration>, q: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort();
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:8.2} ms", d.as_secs_f64() * 1e3)
}

/// Runs `f` `samples` times and prints the median (and max).
fn time<T>(label: &str, samples: usize, mut f: impl FnMut() -> T) -> T {
    let mut out = None;
    let mut lat = Vec::with_capacity(samples);
    for _ in 0..samples {
        let t = Instant::now();
        out = Some(std::hint::black_box(f()));
        lat.push(t.elapsed());
    }
    let max = lat.iter().copied().max().unwrap_or_default();
    println!(
        "  {label:<34} median {}   max {}   ({samples} samples)",
        ms(quantile(lat, 0.5)),
        ms(max)
    );
    match out {
        Some(v) => v,
        None => f(),
    }
}

fn check<T, E: std::fmt::Display>(r: Result<T, E>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => {
            eprintln!("bench failed: {e}");
            std::process::exit(1);
        }
    }
}

fn scenario(base: &std::path::Path, name: &str, runs: usize, per_run: usize, jobs: usize) {
    println!(
        "\n{name}: {runs} run(s) x {per_run} trials = {} trials, {jobs} writer threads",
        runs * per_run
    );
    let root = base.join(name);
    let store = check(Store::open(&root));
    let mut handles = Vec::new();
    let mut lat = Vec::new();
    let t = Instant::now();
    for r in 0..runs {
        let run = check(store.create_run(&meta(per_run)));
        lat.extend(fill(&run, r * per_run..(r + 1) * per_run, jobs));
        handles.push(run);
    }
    let total = t.elapsed();
    println!(
        "  finish_trial (trial.json + index)  median {}   p90 {}   total {:.1} s, {:.0} trials/s",
        ms(quantile(lat.clone(), 0.5)),
        ms(quantile(lat, 0.9)),
        total.as_secs_f64(),
        (runs * per_run) as f64 / total.as_secs_f64()
    );
    drop(store);

    let store = time("Store::open (existing)", 11, || check(Store::open(&root)));
    let biggest = handles[handles.len() - 1].id().clone();
    let listed = time("list_runs", 21, || check(store.list_runs()));
    let trials = time("trials(run)", 21, || check(store.trials(&biggest)));
    time("run_meta(run)", 21, || check(store.run_meta(&biggest)));
    time("resolve_run(prefix)", 21, || {
        check(store.resolve_run(&biggest.as_str()[..17]))
    });
    time("resolve_run(latest)", 21, || {
        check(store.resolve_run("latest"))
    });
    let finished = time("finished_trials (scan folders)", 5, || {
        check(handles[handles.len() - 1].finished_trials())
    });
    let report = time("reindex", 5, || check(store.reindex()));
    let in_index: u64 = listed.iter().map(|r| r.trials_finished).sum();
    println!(
        "  (checked: {} runs listed, {in_index} trials indexed, {} in the largest run, {} on its disk, reindex saw {} runs / {} trials)",
        listed.len(),
        trials.len(),
        finished.len(),
        report.runs,
        report.trials
    );
}

fn main() {
    let n = env_usize("PROCTOR_BENCH_TRIALS", 10_000);
    let jobs = env_usize("PROCTOR_BENCH_JOBS", 4).max(1);
    let base = std::env::var_os("PROCTOR_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = check(tempfile::tempdir_in(&base));
    println!("proctor-store bench in {}", dir.path().display());
    scenario(dir.path(), "one-big-run", 1, n, jobs);
    scenario(dir.path(), "many-runs", 100, (n / 100).max(1), jobs);
}
