//! Per-trial cost of the sandbox: the median wall time of `run` with a no-op agent (`/bin/true`)
//! for an overlay workspace and for a bind (copy-mode) workspace.
//!
//! ```text
//! cargo run --release -p proctor-sandbox --example run_overhead -- [ITERATIONS] [FIXTURE_FILES] [host]
//! ```
//!
//! The fixture (default 10,000 files of 4 KiB, ~40 MB) is generated once; overlay setup does not
//! depend on its size. Each overlay iteration gets fresh, empty upper and work directories (made
//! outside the timed region). The copy for bind mode is made once and not timed.

use std::path::Path;
use std::time::{Duration, Instant};

use proctor_sandbox::{enter_if_requested, run, SandboxSpec, Workspace};

/// User + system CPU time of every child process reaped so far (the sandbox init and, through
/// it, every process of the trials).
fn children_cpu() -> Duration {
    // SAFETY: getrusage fills a plain struct.
    let u = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut u);
        u
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(u.ru_utime) + tv(u.ru_stime)
}

fn stats(mut v: Vec<Duration>) -> String {
    v.sort();
    let pct = |p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize];
    format!(
        "median {:>7.2} ms   p10 {:>7.2} ms   p90 {:>7.2} ms   min {:>7.2} ms",
        pct(0.5).as_secs_f64() * 1e3,
        pct(0.1).as_secs_f64() * 1e3,
        pct(0.9).as_secs_f64() * 1e3,
        v[0].as_secs_f64() * 1e3
    )
}

fn make_fixture(dir: &Path, files: usize) -> std::io::Result<()> {
    let block = vec![b'x'; 4096];
    for i in 0..files {
        let sub = dir.join(format!("d{:03}", i / 100));
        if i % 100 == 0 {
            std::fs::create_dir_all(&sub)?;
        }
        std::fs::write(sub.join(format!("f{i:05}.txt")), &block)?;
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    enter_if_requested();
    let mut args = std::env::args().skip(1);
    let iterations: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(200);
    let files: usize = args
        .next()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(10_000);
    // "host" measures the same runs without a network namespace.
    let network = match args.next().as_deref() {
        Some("host") => proctor_sandbox::Network::Host,
        _ => proctor_sandbox::Network::None,
    };
    let exe = std::env::current_exe()?;
    let scratch = tempfile::tempdir()?;
    let fixture = scratch.path().join("fixture");
    std::fs::create_dir_all(&fixture)?;
    make_fixture(&fixture, files)?;
    let out = scratch.path().join("out.txt");
    let caps = proctor_sandbox::probe();
    println!(
        "network: {network:?}; fixture: {files} files; user namespaces: {:?}; overlay: {:?}",
        caps.user_namespaces, caps.overlay
    );

    // Overlay.
    let cpu0 = children_cpu();
    let mut overlay = Vec::with_capacity(iterations);
    for i in 0..iterations + 5 {
        let t = scratch.path().join(format!("t{i}"));
        let (upper, work) = (t.join("upper"), t.join("work"));
        std::fs::create_dir_all(&upper)?;
        std::fs::create_dir_all(&work)?;
        let mut spec = SandboxSpec::new(
            &exe,
            Workspace::Overlay {
                lowers: vec![fixture.clone()],
                upper,
                work,
            },
            vec!["/bin/true".into()],
            &out,
            &out,
        );
        spec.wall_timeout = Duration::from_secs(30);
        spec.network = network;
        let start = Instant::now();
        let r = run(&spec)?;
        let took = start.elapsed();
        assert_eq!(r.exit_code, Some(0), "{r:?}");
        if i >= 5 {
            overlay.push(took);
        }
        proctor_sandbox::remove_tree(&t)?;
    }
    let cpu1 = children_cpu();
    println!(
        "overlay  run(/bin/true) x{iterations}: {}   cpu/run {:.2} ms",
        stats(overlay),
        (cpu1 - cpu0).as_secs_f64() * 1e3 / (iterations + 5) as f64
    );

    // End-state diff of 5 changes against this fixture, read from the upper layer.
    {
        let t = scratch.path().join("diff");
        let (upper, work) = (t.join("upper"), t.join("work"));
        std::fs::create_dir_all(&upper)?;
        std::fs::create_dir_all(&work)?;
        let script = "echo new > added.txt; echo x >> d000/f00000.txt; rm d001/f00100.txt; \
                      chmod 600 d002/f00200.txt; mkdir -p newdir";
        let spec = SandboxSpec::new(
            &exe,
            Workspace::Overlay {
                lowers: vec![fixture.clone()],
                upper: upper.clone(),
                work,
            },
            vec!["sh".into(), "-c".into(), script.into()],
            &out,
            &out,
        );
        run(&spec)?;
        let mut times = Vec::new();
        let mut n = 0;
        for _ in 0..iterations {
            let start = Instant::now();
            n = proctor_sandbox::diff::overlay_changes(
                &upper,
                std::slice::from_ref(&fixture),
                &[],
            )?
            .len();
            times.push(start.elapsed());
        }
        println!(
            "overlay_changes ({n} changes)  x{iterations}: {}",
            stats(times)
        );
        proctor_sandbox::remove_tree(&t)?;
    }

    // Bind of a copy.
    let mut bind = Vec::with_capacity(iterations);
    for i in 0..iterations + 5 {
        let mut spec = SandboxSpec::new(
            &exe,
            Workspace::Bind {
                dir: fixture.clone(),
            },
            vec!["/bin/true".into()],
            &out,
            &out,
        );
        spec.wall_timeout = Duration::from_secs(30);
        spec.network = network;
        let start = Instant::now();
        let r = run(&spec)?;
        let took = start.elapsed();
        assert_eq!(r.exit_code, Some(0), "{r:?}");
        if i >= 5 {
            bind.push(took);
        }
    }
    let cpu2 = children_cpu();
    println!(
        "bind     run(/bin/true) x{iterations}: {}   cpu/run {:.2} ms",
        stats(bind),
        (cpu2 - cpu1).as_secs_f64() * 1e3 / (iterations + 5) as f64
    );

    // No namespaces, for reference.
    let mut host = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let mut spec = SandboxSpec::new(
            &exe,
            Workspace::Bind {
                dir: fixture.clone(),
            },
            vec!["/bin/true".into()],
            &out,
            &out,
        );
        spec.namespaces = false;
        let start = Instant::now();
        run(&spec)?;
        host.push(start.elapsed());
    }
    let cpu3 = children_cpu();
    println!(
        "no-ns    run(/bin/true) x{iterations}: {}   cpu/run {:.2} ms",
        stats(host),
        (cpu3 - cpu2).as_secs_f64() * 1e3 / iterations as f64
    );
    Ok(())
}
