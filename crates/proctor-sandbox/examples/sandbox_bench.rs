//! Micro-benchmark of the sandbox stage alone (used by `bench/run`; prints JSON on stdout).
//!
//! ```text
//! sandbox_bench run  --fixture DIR --scratch DIR [--iters N] [--init-exe EXE] [--command ARGV...]
//! sandbox_bench diff --fixture DIR --scratch DIR [--iters N] [--changes N] [--walk-iters N]
//! ```
//!
//! `run` times `proctor_sandbox::run` of a no-op command (`true`) over an overlay of `--fixture`,
//! with the same shape of spec as a proctor trial (four binds, two hidden paths, no network), one
//! sandbox at a time: wall time per run, and the CPU time of the sandbox's processes.
//!
//! `diff` lets an agent change `--changes` files of the fixture (modify, add, delete, chmod) in a
//! real sandbox once, then times `diff::overlay_changes` on that upper layer `--iters` times; and,
//! for comparison, makes the same changes in a plain copy and times `diff::manifest_changes`
//! (a walk of the whole copy against a manifest of the start) `--walk-iters` times.
//!
//! With `--init-exe`, another binary (e.g. `proctor`, whose `main` enters the sandbox init too) is
//! re-executed as the init; by default this example itself is.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use proctor_sandbox::{diff, Bind, RootSkeleton, SandboxSpec, Workspace};

fn main() {
    proctor_sandbox::enter_if_requested();
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_default();
    let mut fixture = None;
    let mut scratch = None;
    let mut iters = 100usize;
    let mut changes = 5usize;
    let mut walk_iters = 5usize;
    let mut init_exe = std::env::current_exe().expect("current_exe");
    let mut command: Vec<String> = vec!["true".into()];
    while let Some(a) = args.next() {
        let mut val = || {
            args.next()
                .unwrap_or_else(|| die(&format!("{a} needs a value")))
        };
        match a.as_str() {
            "--fixture" => fixture = Some(PathBuf::from(val())),
            "--scratch" => scratch = Some(PathBuf::from(val())),
            "--iters" => iters = val().parse().unwrap_or_else(|_| die("--iters N")),
            "--changes" => changes = val().parse().unwrap_or_else(|_| die("--changes N")),
            "--walk-iters" => walk_iters = val().parse().unwrap_or_else(|_| die("--walk-iters N")),
            "--init-exe" => init_exe = PathBuf::from(val()),
            "--command" => {
                command = args.by_ref().collect();
                break;
            }
            _ => die(&format!("unknown argument {a}")),
        }
    }
    let fixture = fixture.unwrap_or_else(|| die("--fixture DIR is required"));
    let scratch = scratch.unwrap_or_else(|| die("--scratch DIR is required"));
    std::fs::create_dir_all(&scratch).expect("create the scratch directory");
    let abs = |p: PathBuf| {
        std::fs::canonicalize(&p).unwrap_or_else(|e| die(&format!("{}: {e}", p.display())))
    };
    let (fixture, scratch, init_exe) = (abs(fixture), abs(scratch), abs(init_exe));
    match mode.as_str() {
        "run" => bench_run(&fixture, &scratch, iters, &init_exe, command),
        "diff" => bench_diff(&fixture, &scratch, iters, walk_iters, changes, &init_exe),
        _ => die("usage: sandbox_bench run|diff --fixture DIR --scratch DIR [--iters N]"),
    }
}

fn die(msg: &str) -> ! {
    eprintln!("sandbox_bench: {msg}");
    std::process::exit(2);
}

/// A spec shaped like a proctor trial's.
fn trial_spec(init_exe: &Path, fixture: &Path, dir: &Path, command: Vec<String>) -> SandboxSpec {
    for d in [
        "upper", "work", "out", "shims", "agent", "hidden-a", "hidden-b",
    ] {
        std::fs::create_dir_all(dir.join(d)).expect("mkdir");
    }
    let sock = dir.join("calls.sock");
    let _ = std::fs::remove_file(&sock);
    let listener = std::os::unix::net::UnixListener::bind(&sock).expect("bind a unix socket");
    drop(listener);
    let mut s = SandboxSpec::new(
        init_exe,
        Workspace::Overlay {
            lowers: vec![fixture.to_path_buf()],
            upper: dir.join("upper"),
            work: dir.join("work"),
        },
        command,
        dir.join("out/stdout"),
        dir.join("out/stderr"),
        Duration::from_secs(60),
    );
    s.binds = vec![
        Bind {
            host: init_exe.to_path_buf(),
            inside: "/run/proctor/bin/proctor".into(),
            read_only: true,
        },
        Bind {
            host: sock,
            inside: "/run/proctor/calls.sock".into(),
            read_only: false,
        },
        Bind {
            host: dir.join("shims"),
            inside: "/run/proctor/shims".into(),
            read_only: true,
        },
        Bind {
            host: dir.join("agent"),
            inside: "/run/proctor/agent".into(),
            read_only: true,
        },
    ];
    s.hide = vec![dir.join("hidden-a"), dir.join("hidden-b")];
    s.grace = Duration::from_millis(500);
    s
}

/// CPU time used by the whole machine so far (all CPUs, from `/proc/stat`): the sandbox's
/// processes are not our children to account for (the zygote reaps them), and part of the work
/// (a network namespace's cleanup) runs in kernel threads anyway. Noisy on a busy machine.
fn machine_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let line = stat.lines().next().unwrap_or_default();
    // cpu user nice system idle iowait irq softirq steal ...
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let busy: u64 = v
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, x)| x)
        .sum();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_micros(busy * 1_000_000 / hz)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        return f64::NAN;
    }
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn bench_run(fixture: &Path, scratch: &Path, iters: usize, init_exe: &Path, command: Vec<String>) {
    let mut walls = Vec::new();
    let mut agent = Vec::new();
    let mut setups = Vec::new();
    let mut cleanups = Vec::new();
    // As a run does: the root's skeleton laid out once, bound by every trial.
    let skeleton_dir = scratch.join("skeleton");
    let _ = proctor_sandbox::remove_tree(&skeleton_dir);
    let skeleton = RootSkeleton::lay_out(
        &skeleton_dir,
        &trial_spec(init_exe, fixture, &scratch.join("shape"), command.clone()),
    )
    .unwrap_or_else(|e| die(&format!("lay out the root's skeleton: {e}")));
    let cpu0 = machine_cpu();
    for i in 0..iters.max(1) + 3 {
        let dir = scratch.join(format!("r{i}"));
        let t = Instant::now();
        let mut spec = trial_spec(init_exe, fixture, &dir, command.clone());
        spec.skeleton = Some(skeleton.clone());
        let setup = t.elapsed();
        let t = Instant::now();
        let report = proctor_sandbox::run(&spec).unwrap_or_else(|e| die(&format!("run: {e}")));
        let wall = t.elapsed();
        if report.exit_code != Some(0) {
            die(&format!("the command failed: {report:?}"));
        }
        let t = Instant::now();
        proctor_sandbox::remove_tree(&dir).expect("remove the trial directory");
        let cleanup = t.elapsed();
        if i >= 3 {
            // The first runs warm the caches.
            setups.push(setup.as_secs_f64() * 1e3);
            cleanups.push(cleanup.as_secs_f64() * 1e3);
            walls.push(wall.as_secs_f64() * 1e3);
            agent.push(report.wall.as_secs_f64() * 1e3);
        }
    }
    let cpu = (machine_cpu() - cpu0).as_secs_f64() * 1e3 / (iters.max(1) + 3) as f64;
    println!(
        "{{\"runs\": {}, \"wall_ms_median\": {:.3}, \"setup_ms_median\": {:.3}, \"cleanup_ms_median\": {:.3}, \"agent_wall_ms_median\": {:.3}, \"machine_cpu_ms_mean\": {:.3}}}",
        walls.len(),
        median(&mut walls),
        median(&mut setups),
        median(&mut cleanups),
        median(&mut agent),
        cpu
    );
}

fn bench_diff(
    fixture: &Path,
    scratch: &Path,
    iters: usize,
    walk_iters: usize,
    changes: usize,
    init_exe: &Path,
) {
    let script = changing_script(fixture, changes);
    let (mut times, found) = time_overlay_diff(fixture, scratch, iters, init_exe, &script);
    let (mut walks, walk_found) = time_copy_walk(fixture, scratch, walk_iters, &script);
    println!(
        "{{\"runs\": {}, \"changes\": {found}, \"diff_ms_median\": {:.4}, \"walk_runs\": {}, \"walk_changes\": {walk_found}, \"walk_diff_ms_median\": {:.3}}}",
        times.len(),
        median(&mut times),
        walks.len(),
        median(&mut walks)
    );
}

/// A shell script that changes `changes` files of the fixture in varied ways (appends,
/// deletions, mode changes, new files).
fn changing_script(fixture: &Path, changes: usize) -> String {
    let mut files = Vec::new();
    for e in walkdir::WalkDir::new(fixture).sort_by_file_name() {
        let e = e.expect("walk the fixture");
        if e.file_type().is_file() {
            files.push(
                e.path()
                    .strip_prefix(fixture)
                    .expect("prefix")
                    .to_path_buf(),
            );
        }
        if files.len() >= changes.max(1) * 37 {
            break;
        }
    }
    let mut script = String::from("set -e\n");
    for (i, f) in files.iter().step_by(37).take(changes).enumerate() {
        let f = f.display();
        script.push_str(&match i % 4 {
            0 => format!("echo changed >> '{f}'\n"),
            1 => format!("rm '{f}'\n"),
            2 => format!("chmod 600 '{f}'\n"),
            _ => format!("echo new > '{f}.new'\n"),
        });
    }
    script
}

/// Runs `script` as a trial's agent over the fixture, then times the overlay diff of what it
/// changed `iters` times (after 3 warm-ups): the times in ms and the changes found.
fn time_overlay_diff(
    fixture: &Path,
    scratch: &Path,
    iters: usize,
    init_exe: &Path,
    script: &str,
) -> (Vec<f64>, usize) {
    let dir = scratch.join("diff");
    let _ = proctor_sandbox::remove_tree(&dir);
    let spec = trial_spec(
        init_exe,
        fixture,
        &dir,
        vec!["sh".into(), "-c".into(), script.to_string()],
    );
    let report = proctor_sandbox::run(&spec).unwrap_or_else(|e| die(&format!("run: {e}")));
    if report.exit_code != Some(0) {
        die(&format!("the changing agent failed: {report:?}"));
    }
    let upper = dir.join("upper");
    let lowers = vec![fixture.to_path_buf()];
    let mut times = Vec::new();
    let mut found = 0;
    for i in 0..iters.max(1) + 3 {
        let t = Instant::now();
        let c = diff::overlay_changes(&upper, &lowers, &[])
            .unwrap_or_else(|e| die(&format!("diff: {e}")));
        let el = t.elapsed();
        found = c.len();
        if i >= 3 {
            times.push(el.as_secs_f64() * 1e3);
        }
    }
    proctor_sandbox::remove_tree(&dir).expect("remove the trial directory");

    (times, found)
}

/// What a copy-based harness does instead: walk the whole copy and compare it with a manifest
/// of the start (the same changes, made by the same script, in a plain copy), `walk_iters`
/// times (after 1 warm-up): the times in ms and the changes found.
fn time_copy_walk(
    fixture: &Path,
    scratch: &Path,
    walk_iters: usize,
    script: &str,
) -> (Vec<f64>, usize) {
    let copy = scratch.join("diff-copy");
    let _ = proctor_sandbox::remove_tree(&copy);
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(fixture)
        .arg(&copy)
        .status()
        .expect("cp");
    assert!(status.success(), "cp -r failed");
    let manifest = diff::Manifest::build(&copy).unwrap_or_else(|e| die(&format!("manifest: {e}")));
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(&copy)
        .status()
        .expect("sh");
    assert!(status.success(), "the changing script failed in the copy");
    let mut walks = Vec::new();
    let mut walk_found = 0;
    for i in 0..walk_iters.max(1) + 1 {
        let t = Instant::now();
        let c = diff::manifest_changes(&manifest, &copy, &[])
            .unwrap_or_else(|e| die(&format!("manifest diff: {e}")));
        let el = t.elapsed();
        walk_found = c.len();
        if i >= 1 {
            walks.push(el.as_secs_f64() * 1e3);
        }
    }
    proctor_sandbox::remove_tree(&copy).expect("remove the copy");
    (walks, walk_found)
}
