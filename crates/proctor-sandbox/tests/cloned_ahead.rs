//! The trial init the zygote clones ahead of the next request: every trial still gets a network
//! namespace of its own, never one another trial used; a trial on the host's network never gets
//! one; and a trial init cloned ahead that is killed before its request costs no trial.
//!
//! A test binary of its own: it finds the zygote's children, which no other test may have.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use proctor_sandbox::{probe, run, Network, SandboxSpec, Workspace};

/// The agent prints its network namespace, the number of interfaces it sees and the packets its
/// loopback has received, then sends its loopback five (and prints the count again, which shows
/// they are counted): a trial given the same network
/// namespace after it would find them counted. (A namespace's number is no proof of that: the
/// kernel gives a freed one's to the next.)
const SCRIPT: &str = "readlink /proc/self/ns/net; grep -c : /proc/net/dev; \
     cat /sys/class/net/lo/statistics/rx_packets; \
     python3 -c \"import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); \
     [s.sendto(b'x', ('127.0.0.1', 9)) for _ in range(5)]\"; \
     cat /sys/class/net/lo/statistics/rx_packets";

fn spec(root: &Path) -> SandboxSpec {
    for d in ["lower", "upper", "work", "out"] {
        let _ = fs::remove_dir_all(root.join(d));
        fs::create_dir_all(root.join(d)).expect("mkdir");
    }
    SandboxSpec::new(
        PathBuf::from(env!("CARGO_BIN_EXE_proctor-sandbox-testinit")),
        Workspace::Overlay {
            lowers: vec![root.join("lower")],
            upper: root.join("upper"),
            work: root.join("work"),
        },
        vec!["sh".into(), "-c".into(), SCRIPT.into()],
        root.join("out/stdout"),
        root.join("out/stderr"),
        Duration::from_secs(30),
    )
}

/// Runs `spec` and gives the agent's network namespace, how many interfaces it saw and how many
/// packets its loopback had received.
fn network_of(root: &Path, spec: &SandboxSpec) -> (String, u32, u64) {
    let report = match run(spec) {
        Ok(r) => r,
        Err(e) => panic!(
            "run failed: {e}\nstderr: {}",
            fs::read_to_string(root.join("out/stderr")).unwrap_or_default()
        ),
    };
    assert_eq!(report.exit_code, Some(0));
    let out = fs::read_to_string(root.join("out/stdout")).expect("stdout");
    let mut lines = out.lines();
    let ns = lines.next().expect("namespace line").to_owned();
    let interfaces = lines.next().expect("count line").parse().expect("a count");
    let received = lines
        .next()
        .expect("packets line")
        .parse()
        .expect("a count");
    let after: u64 = lines
        .next()
        .expect("packets line")
        .parse()
        .expect("a count");
    assert!(
        after >= received + 5,
        "{received} then {after}: the probe counts nothing"
    );
    (ns, interfaces, received)
}

/// The pids of this process's children named `proctor-zygote`.
fn zygotes() -> Vec<u32> {
    children_of(std::process::id())
        .into_iter()
        .filter(|&p| comm(p).as_deref() == Some("proctor-zygote"))
        .collect()
}

/// The children of `pid` still alive (zombies left out), from every process's `stat`.
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(child) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // After the command's closing parenthesis: state, then the parent's pid.
        let mut fields = stat
            .rsplit_once(')')
            .map(|(_, f)| f)
            .unwrap_or("")
            .split_whitespace();
        let (state, parent) = (fields.next(), fields.next());
        if parent.and_then(|p| p.parse::<u32>().ok()) == Some(pid) && state != Some("Z") {
            out.push(child);
        }
    }
    out.sort_unstable();
    out
}

fn comm(pid: u32) -> Option<String> {
    fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|c| c.trim().to_owned())
}

/// The zygote's children, waiting at most `wait` for them to be exactly `want` in number.
fn trial_inits(zygote: u32, want: usize, wait: Duration) -> Vec<u32> {
    let deadline = Instant::now() + wait;
    loop {
        let alive = children_of(zygote);
        if alive.len() == want || Instant::now() >= deadline {
            return alive;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn every_trial_gets_a_network_of_its_own_and_a_killed_init_cloned_ahead_costs_no_trial() {
    assert!(
        probe().overlay_sandbox(),
        "these tests need user namespaces and overlayfs"
    );
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    let ours = fs::read_link("/proc/self/ns/net")
        .expect("our network namespace")
        .to_string_lossy()
        .into_owned();

    // Trials on networks of their own, one after the other: each has a namespace of its own,
    // with its loopback alone in it and nothing received on it yet.
    let fresh = |label: &str| {
        let (ns, interfaces, received) = network_of(root, &spec(root));
        assert_ne!(ns, ours, "{label}");
        assert_eq!(interfaces, 1, "{label}: only lo");
        assert_eq!(received, 0, "{label}: another trial's network");
    };
    for i in 0..4 {
        fresh(&format!("trial {i}"));
    }

    // One zygote, which has cloned the next trials' inits already: two wait, and nothing else
    // of it runs.
    let zygotes = zygotes();
    assert_eq!(zygotes.len(), 1, "{zygotes:?}");
    let zygote = zygotes[0];
    let ahead = trial_inits(zygote, 2, Duration::from_secs(10));
    assert_eq!(ahead.len(), 2, "the zygote's children: {ahead:?}");
    for &p in &ahead {
        assert_eq!(comm(p).as_deref(), Some("proctor-trial"));
    }

    // A trial on the host's network takes neither: it is on ours, and the ones cloned ahead
    // are still there for the next trials.
    let mut host = spec(root);
    host.network = Network::Host;
    let (ns, _, _) = network_of(root, &host);
    assert_eq!(ns, ours);
    let still = trial_inits(zygote, 2, Duration::from_secs(10));
    assert_eq!(
        still, ahead,
        "the ones cloned ahead are still the ones waiting"
    );

    // Killed before their requests: the next trial gets one cloned for it, and the ones after
    // that are cloned ahead again.
    for &p in &ahead {
        // SAFETY: sending a signal to a process of ours.
        assert_eq!(unsafe { libc::kill(p as libc::pid_t, libc::SIGKILL) }, 0);
    }
    assert!(trial_inits(zygote, 0, Duration::from_secs(10)).is_empty());
    fresh("the trial after the kill");
    fresh("the next one");
    let again = trial_inits(zygote, 2, Duration::from_secs(10));
    assert_eq!(again.len(), 2, "{again:?}");
    assert!(
        again.iter().all(|p| !ahead.contains(p)),
        "{again:?} {ahead:?}"
    );
}
