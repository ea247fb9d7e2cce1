//! End-to-end tests of the sandbox: real processes, real namespaces, real overlay mounts.
//!
//! They need unprivileged user namespaces and overlayfs with `userxattr` (Linux 5.11+). They pass
//! as root and as an unprivileged user (e.g. uid 65534 with a readable target directory).

use std::collections::BTreeMap;
use std::fs;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use proctor_sandbox::diff::{self, ChangeKind, LaidIn, Manifest};
use proctor_sandbox::{
    probe, run, Bind, FullStop, HttpGuard, HttpProbe, Namespace, Network, RootImage, RootSkeleton,
    SandboxReport, SandboxSpec, ServiceSpec, Workspace, WorkspaceKind,
};

fn init_exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_proctor-sandbox-testinit"))
}

fn require_support() {
    let caps = probe();
    assert!(
        caps.overlay_sandbox(),
        "these tests need user namespaces and overlayfs with userxattr: {caps:?}"
    );
}

/// A scratch directory for one trial: a fixture (the lower), upper, work, outputs.
struct Trial {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Drop for Trial {
    fn drop(&mut self) {
        // overlayfs leaves work/work with mode 000: give it back before the TempDir goes.
        if let Err(e) = proctor_sandbox::remove_tree(&self.root) {
            eprintln!("cannot remove {}: {e}", self.root.display());
        }
    }
}

impl Trial {
    fn new() -> Trial {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().to_owned();
        for d in ["lower", "upper", "work", "out"] {
            fs::create_dir_all(root.join(d)).expect("mkdir");
        }
        Trial { _tmp: tmp, root }
    }

    fn lower(&self) -> PathBuf {
        self.root.join("lower")
    }

    fn upper(&self) -> PathBuf {
        self.root.join("upper")
    }

    fn out(&self, name: &str) -> PathBuf {
        self.root.join("out").join(name)
    }

    /// A spec running `sh -c script` over an overlay of the fixture.
    fn spec(&self, script: &str) -> SandboxSpec {
        let mut s = SandboxSpec::new(
            init_exe(),
            Workspace::Overlay {
                lowers: vec![self.lower()],
                upper: self.upper(),
                work: self.root.join("work"),
            },
            vec!["sh".into(), "-c".into(), script.into()],
            self.out("stdout"),
            self.out("stderr"),
            Duration::from_secs(30),
        );
        s.grace = Duration::from_millis(500);
        s
    }

    fn stdout(&self) -> String {
        fs::read_to_string(self.out("stdout")).unwrap_or_default()
    }

    fn stderr(&self) -> String {
        fs::read_to_string(self.out("stderr")).unwrap_or_default()
    }

    fn run(&self, spec: &SandboxSpec) -> SandboxReport {
        match run(spec) {
            Ok(r) => r,
            Err(e) => panic!("run failed: {e}\nstderr: {}", self.stderr()),
        }
    }
}

fn write(p: &Path, s: &str) {
    fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    fs::write(p, s).expect("write");
}

/// Host processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in fs::read_dir("/proc").expect("/proc").flatten() {
        let name = e.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Ok(cmd) = fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(marker) {
                found.push(format!("{}: {cmd}", name.to_string_lossy()));
            }
        }
    }
    found
}

/// A host directory the test can write to that the sandbox shows read-only (not below the
/// private `/tmp`, `/run` or `/home`): `/var/tmp` where writable, else the target directory.
fn visible_scratch() -> PathBuf {
    let var_tmp = PathBuf::from("/var/tmp");
    let probe = var_tmp.join(unique("proctor-probe"));
    if fs::write(&probe, "x").is_ok() {
        let _ = fs::remove_file(&probe);
        return var_tmp;
    }
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
}

fn unique(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{tag}-{}-{nanos}", std::process::id())
}

#[test]
fn overlay_records_exactly_the_agents_changes_and_leaves_the_lower_alone() {
    overlay_records_exactly_the_agents_changes(None);
}

#[test]
fn on_a_bounded_disk_the_agents_changes_are_recorded_exactly_as_well() {
    overlay_records_exactly_the_agents_changes(Some(64 << 20));
}

/// The agent's changes read from the upper layer, with the upper layer on the host or (`disk`)
/// on the trial's own bounded tmpfs and moved out at the end.
fn overlay_records_exactly_the_agents_changes(disk: Option<u64>) {
    require_support();
    let t = Trial::new();
    let lower = t.lower();
    write(&lower.join("keep.txt"), "keep");
    write(&lower.join("edit.txt"), "old");
    write(&lower.join("gone.txt"), "bye");
    write(&lower.join("mode.sh"), "echo");
    fs::set_permissions(lower.join("mode.sh"), fs::Permissions::from_mode(0o644)).expect("chmod");
    write(&lower.join("tree/a.txt"), "a");
    write(&lower.join("tree/deep/b.txt"), "b");
    write(&lower.join("redo/old.txt"), "o");
    write(&lower.join("same.txt"), "same\n");
    let before = Manifest::build(&lower).expect("manifest");

    // A variant file laid in before the agent starts (not the agent's change) and one the agent
    // then edits (its change).
    write(&t.upper().join("SKILL.md"), "method");
    write(&t.upper().join("docs/GUIDE.md"), "guide");
    let laid = [
        LaidIn {
            path: "SKILL.md".into(),
            blake3: diff::hash_file(&t.upper().join("SKILL.md")).expect("hash"),
        },
        LaidIn {
            path: "docs/GUIDE.md".into(),
            blake3: diff::hash_file(&t.upper().join("docs/GUIDE.md")).expect("hash"),
        },
    ];

    let spec = t.spec(
        "set -e; echo new > added.txt; echo changed > edit.txt; rm gone.txt; chmod 755 mode.sh; \
         rm -rf tree; rm -rf redo; mkdir redo; echo n > redo/new.txt; mkdir -p newdir/sub; \
         ln -s keep.txt link; echo same > same.txt; echo more >> docs/GUIDE.md; cat keep.txt SKILL.md; pwd",
    );
    let mut spec = spec;
    spec.limits.disk_bytes = disk;
    let r = t.run(&spec);
    assert!(!r.bounds.disk_full);
    assert_eq!(r.exit_code, Some(0), "stderr: {}", t.stderr());
    assert_eq!(t.stdout(), "keepmethod/workspace\n");
    assert_eq!(r.isolation.workspace, WorkspaceKind::Overlay);

    let changes =
        diff::overlay_changes(&t.upper(), std::slice::from_ref(&lower), &laid).expect("diff");
    let got: Vec<(String, ChangeKind)> = changes
        .iter()
        .map(|c| (c.path.to_string_lossy().into_owned(), c.kind))
        .collect();
    let want: Vec<(String, ChangeKind)> = [
        ("added.txt", ChangeKind::Added),
        ("docs/GUIDE.md", ChangeKind::Modified),
        ("edit.txt", ChangeKind::Modified),
        ("gone.txt", ChangeKind::Deleted),
        ("link", ChangeKind::Added),
        ("mode.sh", ChangeKind::ModeChanged),
        ("newdir", ChangeKind::Added),
        ("newdir/sub", ChangeKind::Added),
        ("redo/new.txt", ChangeKind::Added),
        ("redo/old.txt", ChangeKind::Deleted),
        ("tree", ChangeKind::Deleted),
        ("tree/a.txt", ChangeKind::Deleted),
        ("tree/deep", ChangeKind::Deleted),
        ("tree/deep/b.txt", ChangeKind::Deleted),
    ]
    .iter()
    .map(|(p, k)| (p.to_string(), *k))
    .collect();
    assert_eq!(got, want, "{changes:#?}");
    let mode = changes
        .iter()
        .find(|c| c.path == Path::new("mode.sh"))
        .expect("mode.sh");
    assert_eq!(
        (mode.mode_before, mode.mode_after),
        (Some(0o644), Some(0o755))
    );

    // The lower layer is untouched.
    assert_eq!(Manifest::build(&lower).expect("manifest"), before);
}

#[test]
fn hidden_paths_are_invisible_to_the_agent_but_readable_by_services() {
    require_support();
    let t = Trial::new();
    let marker = unique("SECRETMARKER");
    // One hidden directory below a read-only host top-level directory, one below /tmp.
    let visible_parent = visible_scratch().join(unique("hide"));
    let hidden_a = visible_parent.join("suite");
    write(
        &hidden_a.join("answers").join(format!("{marker}.md")),
        "the answer",
    );
    let hidden_b = t.root.join("store");
    write(&hidden_b.join(format!("{marker}.json")), "{}");
    let svc_dir = t.root.join("svc");
    fs::create_dir_all(&svc_dir).expect("mkdir");

    let mut spec = t.spec(&format!(
        "ls -A {a}; ls -A {b}; cat {a}/answers/{m}.md; find / -name '{m}*' 2>/dev/null; \
         ls /proc/*/root{a}/answers 2>/dev/null; ls -A /run/proctor; echo end",
        a = hidden_a.display(),
        b = hidden_b.display(),
        m = marker
    ));
    spec.hide = vec![hidden_a.clone(), hidden_b.clone()];
    spec.services = vec![ServiceSpec {
        name: "reader".into(),
        argv: vec![
            "sh".into(),
            "-c".into(),
            format!(
                "cat answers/{marker}.md > \"$PROCTOR_SERVICE_DIR/seen\"; echo \"$PROCTOR_SERVICE_DIR\" >> \"$PROCTOR_SERVICE_DIR/seen\"; exec sleep 60"
            ),
        ],
        cwd: hidden_a.clone(),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        dir_host: svc_dir.clone(),
        log: t.out("reader.log"),
        ready: None,
        guard: None,
        state: None,
        root: None,
        health: None,
        own_network: false,
    }];
    let r = t.run(&spec);
    let out = t.stdout();
    assert!(
        !out.contains(&marker),
        "the agent saw the hidden files:\n{out}"
    );
    assert!(out.trim_end().ends_with("end"), "{out}");
    assert!(t.stderr().contains("No such file"), "{}", t.stderr());
    assert_eq!(r.isolation.hidden, vec![hidden_a.clone(), hidden_b.clone()]);
    // The service saw what the agent could not, and wrote its state where the scorer reads it.
    assert_eq!(
        fs::read_to_string(svc_dir.join("seen")).expect("service state"),
        "the answer/run/proctor/services/reader\n"
    );
    // The service was stopped by SIGTERM at the end.
    assert_eq!(
        r.services[0].exit.and_then(|e| e.signal),
        Some(libc_sigterm())
    );
    let _ = fs::remove_dir_all(&visible_parent);
}

fn libc_sigterm() -> i32 {
    15
}

#[test]
fn detached_processes_die_with_the_agent() {
    require_support();
    let t = Trial::new();
    let marker = unique("DETACHMARKER");
    let spec = t.spec(&format!(
        "setsid sh -c 'sleep 1; echo x > /workspace/late; : {marker}' >/dev/null 2>&1 & \
         (nohup sh -c 'sleep 1; echo y > /workspace/late2; : {marker}' >/dev/null 2>&1 &) ; \
         echo started"
    ));
    let r = t.run(&spec);
    assert_eq!(r.exit_code, Some(0));
    assert_eq!(t.stdout(), "started\n");
    assert!(r.wall < Duration::from_millis(900), "{:?}", r.wall);
    assert_eq!(processes_with(&marker), Vec::<String>::new());
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!t.upper().join("late").exists());
    assert!(!t.upper().join("late2").exists());
    assert_eq!(processes_with(&marker), Vec::<String>::new());
}

#[test]
fn a_sleeping_agent_is_stopped_at_its_timeout() {
    require_support();
    let t = Trial::new();
    let mut spec = t.spec("sleep 30");
    spec.wall_timeout = Duration::from_secs(1);
    spec.grace = Duration::from_millis(500);
    let started = Instant::now();
    let r = t.run(&spec);
    let took = started.elapsed();
    assert!(r.timed_out);
    // The agent's tree was gone within timeout + grace (it obeyed SIGTERM, so well before the
    // grace ran out); the whole call, setup included, within a generous margin of that.
    assert!(r.wall >= Duration::from_secs(1), "{:?}", r.wall);
    assert!(r.wall < Duration::from_millis(1500), "{:?}", r.wall);
    assert!(took < Duration::from_millis(3000), "{took:?}");
    // sh got SIGTERM (forwarded by the agent's init) within the grace period.
    assert_eq!(r.signal, Some(15), "{r:?}");
}

#[test]
fn an_agent_ignoring_sigterm_is_killed_after_the_grace() {
    require_support();
    let t = Trial::new();
    let marker = unique("STUBBORN");
    let mut spec = t.spec(&format!(
        "trap '' TERM; while :; do sleep 0.05; done; : {marker}"
    ));
    spec.wall_timeout = Duration::from_millis(500);
    spec.grace = Duration::from_millis(300);
    let started = Instant::now();
    let r = t.run(&spec);
    assert!(r.timed_out);
    assert_eq!(r.signal, Some(9), "{r:?}");
    // SIGKILL came at timeout + grace (800 ms), not later.
    assert!(r.wall >= Duration::from_millis(800), "{:?}", r.wall);
    assert!(r.wall < Duration::from_millis(1300), "{:?}", r.wall);
    assert!(
        started.elapsed() < Duration::from_millis(3000),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(processes_with(&marker), Vec::<String>::new());
}

/// A service on 127.0.0.1:7070 with a readiness probe and a guard, and an agent that talks to it.
fn http_service(t: &Trial, guard_expect: &str) -> ServiceSpec {
    let dir = t.root.join("svc-web");
    fs::create_dir_all(&dir).expect("mkdir");
    write(&dir.join("index.html"), "hello from the mock");
    ServiceSpec {
        name: "web".into(),
        argv: vec![
            "python3".into(),
            "-m".into(),
            "http.server".into(),
            "7070".into(),
            "--bind".into(),
            "127.0.0.1".into(),
        ],
        cwd: PathBuf::from("/run/proctor/services/web"),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        dir_host: dir,
        log: t.out("web.log"),
        ready: Some(HttpProbe {
            url: "http://127.0.0.1:7070/".into(),
            timeout: Duration::from_secs(10),
        }),
        guard: Some(HttpGuard::new(
            "http://127.0.0.1:7070/index.html",
            guard_expect,
        )),
        state: None,
        root: None,
        health: None,
        own_network: false,
    }
}

const FETCH: &str = "python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:7070/index.html').read().decode())\"";

#[test]
fn two_sandboxes_serve_the_same_port_at_once() {
    require_support();
    let trials: Vec<Trial> = (0..2).map(|_| Trial::new()).collect();
    let reports: Vec<SandboxReport> = std::thread::scope(|s| {
        let handles: Vec<_> = trials
            .iter()
            .map(|t| {
                s.spawn(move || {
                    let mut spec = t.spec(&format!("{FETCH}; sleep 0.5; {FETCH}"));
                    spec.services = vec![http_service(t, "from the mock")];
                    t.run(&spec)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect()
    });
    for (t, r) in trials.iter().zip(&reports) {
        assert_eq!(
            r.not_started,
            None,
            "{r:?}\n{}",
            fs::read_to_string(t.out("web.log")).unwrap_or_default()
        );
        assert_eq!(r.exit_code, Some(0), "stderr: {}", t.stderr());
        assert_eq!(t.stdout(), "hello from the mock\nhello from the mock\n");
        let svc = &r.services[0];
        assert!(svc.started && svc.ready.as_ref().is_some_and(|p| p.passed()));
        assert!(svc.guard.as_ref().is_some_and(|p| p.passed()));
        assert!(r.isolation.namespaces.contains(&Namespace::Net));
        // The agent could not see the service's state directory.
        assert!(!t.stderr().contains("index.html"));
    }
}

#[test]
fn a_failing_guard_leaves_the_agent_unstarted() {
    require_support();
    let t = Trial::new();
    let mut spec = t.spec("echo ran > /workspace/agent-ran; echo ran");
    spec.services = vec![http_service(&t, "chat-mock")];
    let r = t.run(&spec);
    assert_eq!(
        r.not_started.as_deref(),
        Some("guard of web refused: body did not contain 'chat-mock' (HTTP 200)")
    );
    assert_eq!((r.exit_code, r.signal), (None, None));
    assert_eq!(t.stdout(), "");
    assert!(!t.upper().join("agent-ran").exists());
    let svc = &r.services[0];
    assert!(svc.ready.as_ref().is_some_and(|p| p.passed()));
    assert!(svc.guard.as_ref().is_some_and(|p| !p.passed()));
    assert!(svc.exit.is_some(), "the service was stopped and reaped");
}

#[test]
fn a_service_that_never_gets_ready_is_reported() {
    require_support();
    let t = Trial::new();
    let mut spec = t.spec("echo ran");
    let mut svc = http_service(&t, "x");
    svc.argv = vec!["sh".into(), "-c".into(), "exit 3".into()];
    spec.services = vec![svc];
    let r = t.run(&spec);
    let reason = r.not_started.expect("not started");
    assert!(
        reason.contains("service web was not ready") && reason.contains("exit code 3"),
        "{reason}"
    );
    assert_eq!(t.stdout(), "");
}

#[test]
fn stubborn_services_and_their_children_are_killed_at_the_end() {
    require_support();
    let t = Trial::new();
    let marker = unique("SVCMARKER");
    let dir = t.root.join("svc");
    fs::create_dir_all(&dir).expect("mkdir");
    // The agent waits until the service ignores SIGTERM (the trial's /tmp is shared by both),
    // so the stop really meets a stubborn service rather than racing its `trap`.
    let mut spec = t.spec("while [ ! -e /tmp/trap-set ]; do sleep 0.01; done; echo agent done");
    spec.grace = Duration::from_millis(300);
    spec.services = vec![ServiceSpec {
        name: "stubborn".into(),
        argv: vec![
            "sh".into(),
            "-c".into(),
            format!(
                "trap '' TERM; setsid sh -c 'sleep 60; : {marker}' & touch /tmp/trap-set; while :; do sleep 0.05; done"
            ),
        ],
        cwd: PathBuf::from("/"),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        dir_host: dir,
        log: t.out("stubborn.log"),
        ready: None,
        guard: None,
        state: None,
        root: None,
        health: None,
        own_network: false,
    }];
    let started = Instant::now();
    let r = t.run(&spec);
    assert_eq!(t.stdout(), "agent done\n");
    assert_eq!(r.services[0].exit.and_then(|e| e.signal), Some(9), "{r:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(processes_with(&marker), Vec::<String>::new());
}

#[test]
fn without_a_network_the_host_loopback_is_unreachable() {
    require_support();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let script = format!(
        "python3 -c \"import socket\ntry:\n socket.create_connection(('127.0.0.1', {port}), timeout=2); print('connected')\nexcept OSError as e: print('failed', e)\"; \
         cat /proc/net/dev | grep -c ':' ; hostname"
    );
    let t = Trial::new();
    let r = t.run(&t.spec(&script));
    assert_eq!(r.exit_code, Some(0), "{}", t.stderr());
    let out = t.stdout();
    assert!(out.starts_with("failed"), "{out}");
    // Only `lo` in the trial's network namespace, and the trial's own hostname.
    assert!(out.ends_with("1\nproctor\n"), "{out}");

    // The same probe with the host network reaches the listener.
    let t = Trial::new();
    let mut spec = t.spec(&script);
    spec.network = Network::Host;
    let r = t.run(&spec);
    assert_eq!(r.exit_code, Some(0), "{}", t.stderr());
    assert!(t.stdout().starts_with("connected"), "{}", t.stdout());
    assert!(!r.isolation.namespaces.contains(&Namespace::Net));
    drop(listener);
}

#[test]
fn the_agent_can_write_only_its_workspace_home_and_tmp() {
    require_support();
    let t = Trial::new();
    let host_probe = visible_scratch().join(unique("escape"));
    let script = format!(
        "for p in /usr/x /etc/x /x /var/x /run/x /home/x /dev/x /proc/x /sys/x {host} \
                  /workspace/ok $HOME/ok /tmp/ok /dev/shm/ok; do \
           if (echo data > $p) 2>/dev/null; then echo \"$p ok\"; else echo \"$p no\"; fi; done; \
         mount -t tmpfs tmpfs /mnt 2>/dev/null && echo mounted; \
         mount -o remount,rw /usr 2>/dev/null && echo remounted; \
         umount /workspace 2>/dev/null && echo unmounted; \
         echo uid=$(id -u) home=$HOME",
        host = host_probe.display()
    );
    let r = t.run(&t.spec(&script));
    assert_eq!(r.exit_code, Some(0), "{}", t.stderr());
    let out = t.stdout();
    let verdicts: BTreeMap<&str, &str> = out
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(p, _)| p.starts_with('/'))
        .collect();
    for (p, v) in &verdicts {
        let writable = ["/workspace/ok", "/home/agent/ok", "/tmp/ok", "/dev/shm/ok"].contains(p);
        assert_eq!(*v, if writable { "ok" } else { "no" }, "{p}: {out}");
    }
    assert_eq!(verdicts.len(), 14, "{out}");
    assert!(
        !out.contains("mounted") && !out.contains("remounted"),
        "{out}"
    );
    assert!(out.ends_with("uid=0 home=/home/agent\n"), "{out}");
    assert!(!host_probe.exists());
    assert!(r.isolation.read_only_host && r.isolation.private_home_and_tmp);
    assert_eq!(r.isolation.full_stop, FullStop::PidNamespace);
    assert_eq!(
        fs::read_to_string(t.upper().join("ok")).expect("workspace write"),
        "data\n"
    );
}

/// What a trial's agent sees of the root's skeleton: every entry of `/`, `/dev`, `/run` (two
/// levels) and `/home` with its type, mode, owner and link target; every mount point with its
/// options (the root's own options apart: they come from the file system that holds the
/// skeleton).
const ROOT_VIEW: &str = "for p in /* /.[!.]* /dev/* /run/* /run/*/* /run/*/*/* /home/*; do \
       if [ -e \"$p\" ] || [ -L \"$p\" ]; then \
         echo \"$p $(stat -c '%F %a %u:%g' \"$p\") $(readlink \"$p\")\"; fi; done; \
     awk '$5 != \"/\" {print \"mount\", $5, $6}' /proc/self/mountinfo | sort; \
     awk '$5 == \"/\" {print \"root\", $6}' /proc/self/mountinfo";

/// A spec with one of each kind of mount point a skeleton holds: a folder bind and a file bind
/// at new top-level places, one under `/run`, and the host's network (the resolver's place).
fn shaped_spec(t: &Trial, script: &str) -> SandboxSpec {
    let tool = t.root.join("tool");
    write(&tool.join("bin/run"), "#!/bin/sh\n");
    write(&t.root.join("token"), "secret\n");
    let mut spec = t.spec(script);
    spec.binds = vec![
        Bind {
            host: tool,
            inside: PathBuf::from("/opt-tool/here"),
            read_only: true,
        },
        Bind {
            host: t.root.join("token"),
            inside: PathBuf::from("/run/proctor/token"),
            read_only: true,
        },
        Bind {
            host: t.root.join("token"),
            inside: PathBuf::from("/token"),
            read_only: true,
        },
    ];
    spec.network = Network::Host;
    spec
}

#[test]
fn a_laid_out_skeleton_gives_the_trial_the_same_root_as_the_one_its_init_makes() {
    require_support();
    let (own, laid) = (Trial::new(), Trial::new());
    let own_spec = shaped_spec(&own, ROOT_VIEW);
    let mut laid_spec = shaped_spec(&laid, ROOT_VIEW);
    let skeleton = RootSkeleton::lay_out(&laid.root.join("skeleton"), &laid_spec)
        .expect("lay out the skeleton");
    laid_spec.skeleton = Some(skeleton);
    let (own_report, laid_report) = (own.run(&own_spec), laid.run(&laid_spec));
    assert_eq!(own_report.exit_code, Some(0), "{}", own.stderr());
    assert_eq!(laid_report.exit_code, Some(0), "{}", laid.stderr());
    let (own_view, laid_view) = (own.stdout(), laid.stdout());
    // Each view has the mount points of the shape, and the root read-only.
    for want in [
        "/opt-tool directory 755 0:0",
        "/token regular file 644 0:0",
        "/run/proctor/token regular file 644 0:0",
        "/dev/null character special file",
        "/dev/fd symbolic link 777 0:0 /proc/self/fd",
        "mount /opt-tool/here ro,",
        "mount /token ro,",
    ] {
        assert!(own_view.contains(want), "{want:?} not in:\n{own_view}");
    }
    let root_options = |view: &str| -> Vec<String> {
        let line = view.lines().find(|l| l.starts_with("root ")).unwrap_or("");
        line[5..].split(',').map(str::to_owned).collect()
    };
    for view in [&own_view, &laid_view] {
        // The host's tree the root was built from is gone before the agent's first command.
        assert_eq!(
            view.lines().filter(|l| l.starts_with("root ")).count(),
            1,
            "{view}"
        );
        assert!(!view.contains(" /oldroot"), "{view}");
        let options = root_options(view);
        for flag in ["ro", "nosuid", "nodev"] {
            assert!(options.iter().any(|o| o == flag), "{flag}: {options:?}");
        }
    }
    let without_root = |view: &str| -> String {
        view.lines()
            .filter(|l| !l.starts_with("root "))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    assert_eq!(without_root(&laid_view), without_root(&own_view));
}

#[test]
fn an_agent_cannot_change_the_skeleton_that_other_trials_bind() {
    require_support();
    let t = Trial::new();
    let attack = "for p in /planted /dev/planted /run/planted /home/planted /opt-tool/planted; do \
                    if (echo x > $p) 2>/dev/null || mkdir $p 2>/dev/null; \
                    then echo \"$p planted\"; else echo \"$p refused\"; fi; done; \
                  chmod 777 / 2>/dev/null && echo chmod-done; \
                  ln -s /workspace /planted-link 2>/dev/null && echo linked; \
                  rm -f /token 2>/dev/null && echo removed; \
                  mount -o remount,rw / 2>/dev/null && echo remounted; \
                  umount /dev/null 2>/dev/null && echo unmounted; \
                  unshare -rm sh -c 'umount /token && echo unshared-unmount' 2>/dev/null; \
                  unshare -rm sh -c \
                    'mount -o remount,rw,bind / && touch /planted && echo unshared-write' 2>/dev/null; \
                  echo end";
    let mut spec = shaped_spec(&t, attack);
    let dir = t.root.join("skeleton");
    spec.skeleton = Some(RootSkeleton::lay_out(&dir, &spec).expect("lay out the skeleton"));
    let listing = |dir: &Path| -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in fs::read_dir(&d).expect("read the skeleton") {
                let e = e.expect("entry");
                let m = fs::symlink_metadata(e.path()).expect("stat");
                out.push(format!(
                    "{} {:o}",
                    e.path().display(),
                    m.permissions().mode()
                ));
                if m.is_dir() {
                    stack.push(e.path());
                }
            }
        }
        out.sort();
        out
    };
    let before = listing(&dir);
    assert!(before.len() > 20, "{before:?}");
    let r = t.run(&spec);
    assert_eq!(r.exit_code, Some(0), "{}", t.stderr());
    let out = t.stdout();
    assert_eq!(
        out.lines().filter(|l| l.ends_with(" refused")).count(),
        5,
        "every write into the skeleton is refused:\n{out}"
    );
    for done in [
        "planted\n",
        "chmod-done",
        "linked",
        "removed",
        "remounted",
        "unmounted",
    ] {
        assert!(!out.contains(done), "{done}:\n{out}");
    }
    assert!(!out.contains("unshared"), "{out}");
    assert!(out.ends_with("end\n"), "{out}");
    assert_eq!(listing(&dir), before, "the skeleton changed");
    // The honest arm: the same writes where the agent may write succeed.
    let t2 = Trial::new();
    let mut spec2 = shaped_spec(
        &t2,
        "echo x > /workspace/planted && mkdir /tmp/planted && echo wrote",
    );
    spec2.skeleton = spec.skeleton.clone();
    let r2 = t2.run(&spec2);
    assert_eq!(r2.exit_code, Some(0), "{}", t2.stderr());
    assert_eq!(t2.stdout(), "wrote\n");
    assert_eq!(listing(&dir), before, "the skeleton changed");
}

#[test]
fn a_bounded_disk_is_shared_by_the_workspace_tmp_home_and_shm_and_fills_with_enospc() {
    require_support();
    let t = Trial::new();
    write(&t.lower().join("keep.txt"), "keep");
    // 8 MiB for everything the agent writes: 3 MiB in /tmp, 3 in HOME, then the workspace can
    // take at most the rest, and /dev/shm nothing more.
    let mut spec = t.spec(
        "head -c 3145728 /dev/zero > /tmp/a && head -c 3145728 /dev/zero > $HOME/b && echo two-ok;          if head -c 4194304 /dev/zero > /workspace/big 2>/dev/null; then echo big-ok; else echo big-enospc; fi;          if echo x > /dev/shm/c 2>/dev/null; then echo shm-ok; else echo shm-enospc; fi;          echo kept > /workspace/small 2>/dev/null; df -k /tmp | tail -1",
    );
    spec.limits.disk_bytes = Some(8 << 20);
    let r = t.run(&spec);
    let out = t.stdout();
    assert_eq!(r.exit_code, Some(0), "{out} {}", t.stderr());
    assert!(out.starts_with("two-ok\nbig-enospc\nshm-enospc\n"), "{out}");
    assert!(r.bounds.disk_full, "the disk was full at the end: {out}");
    // What the agent managed to write is in the host's upper layer, as without a bound.
    let big = fs::metadata(t.upper().join("big")).expect("the partial file is recorded");
    assert!(big.len() < 4 << 20 && big.len() > 1 << 20, "{}", big.len());
    assert_eq!(
        fs::read_to_string(t.lower().join("keep.txt")).expect("lower"),
        "keep"
    );
}

#[test]
fn the_disks_move_keeps_holes_and_links_and_no_special_bit_but_the_diff_sees_the_real_mode() {
    use std::os::unix::fs::MetadataExt;
    require_support();
    let t = Trial::new();
    write(&t.lower().join("data.txt"), "the data\n");
    let mut spec = t.spec(
        "set -e; cp /bin/sh suid; chmod 4755 suid; chmod g+s suid; ln data.txt backup.txt; \
         truncate -s 1G sparse.bin; printf end >> sparse.bin; mkdir sticky; chmod 1777 sticky",
    );
    spec.limits.disk_bytes = Some(8 << 20);
    let r = t.run(&spec);
    assert_eq!(r.exit_code, Some(0), "{}", t.stderr());
    let up = t.upper();
    let suid = fs::metadata(up.join("suid")).expect("suid");
    assert_eq!(suid.mode() & 0o7777, 0o755, "no special bit on the host");
    assert_eq!(
        fs::metadata(up.join("sticky")).expect("sticky").mode() & 0o7777,
        0o777
    );
    let (data, backup) = (
        fs::metadata(up.join("data.txt")).expect("data.txt"),
        fs::metadata(up.join("backup.txt")).expect("backup.txt"),
    );
    assert_eq!(data.ino(), backup.ino(), "still one file with two names");
    assert_eq!(
        fs::read(up.join("backup.txt")).expect("read"),
        b"the data\n"
    );
    let sparse = fs::metadata(up.join("sparse.bin")).expect("sparse");
    assert_eq!(sparse.len(), (1 << 30) + 3);
    assert!(
        sparse.blocks() * 512 <= 1 << 20,
        "{} blocks",
        sparse.blocks()
    );
    let changes = diff::overlay_changes(&up, &[t.lower()], &[]).expect("diff");
    let mode = |p: &str| {
        changes
            .iter()
            .find(|c| c.path == Path::new(p))
            .and_then(|c| c.mode_after)
            .map(|m| m & 0o7777)
    };
    assert_eq!(mode("suid"), Some(0o6755), "{changes:?}");
    assert_eq!(mode("sticky"), Some(0o1777), "{changes:?}");
}

#[test]
fn the_agents_output_is_kept_within_its_bound_head_and_tail() {
    require_support();
    let t = Trial::new();
    // 1 MiB of numbered lines on stdout, a little on stderr, a bound of 64 KiB each.
    let mut spec = t.spec("seq 1 150000; echo oops >&2; echo last");
    spec.limits.output_bytes = Some(64 << 10);
    let r = t.run(&spec);
    assert_eq!(r.exit_code, Some(0), "{}", t.stderr());
    let out = fs::read(t.out("stdout")).expect("stdout");
    assert!(out.len() < (64 << 10) + 200, "kept {} bytes", out.len());
    let text = String::from_utf8(out).expect("utf-8");
    assert!(text.starts_with("1\n2\n3\n"), "the head is kept");
    assert!(text.ends_with("149999\n150000\nlast\n"), "the tail is kept");
    assert!(
        text.contains("bytes of the agent's stdout cut here"),
        "the cut is marked"
    );
    let total = (1..=150000u64)
        .map(|n| n.to_string().len() as u64 + 1)
        .sum::<u64>()
        + 5;
    assert_eq!(r.bounds.stdout_cut, total - (64 << 10));
    assert_eq!(t.stderr(), "oops\n");
    assert_eq!(r.bounds.stderr_cut, 0);
}

#[test]
fn an_agent_that_outlives_its_timeout_still_has_its_output_bounded_and_kept() {
    require_support();
    let t = Trial::new();
    let mut spec = t.spec("echo started; trap '' TERM; yes | head -c 200000; sleep 60");
    spec.limits.output_bytes = Some(1000);
    spec.wall_timeout = Duration::from_millis(800);
    spec.grace = Duration::from_millis(200);
    let r = t.run(&spec);
    assert!(r.timed_out);
    let text = t.stdout();
    assert!(text.starts_with("started\ny\ny\n"), "{text}");
    assert!(text.ends_with("y\ny\n"), "{text}");
    assert_eq!(r.bounds.stdout_cut, 200_008 - 1000);
}

#[test]
fn exit_status_cpu_and_process_view_are_reported() {
    require_support();
    let t = Trial::new();
    let r = t.run(&t.spec(
        "python3 -c 'import time\nt=time.process_time()\nwhile time.process_time()-t<0.3: pass' & \
         wait; ls /proc | grep -c '^[0-9]'; exit 7",
    ));
    assert_eq!(r.exit_code, Some(7));
    // The agent's PID namespace holds only its init, sh and ls/grep: nothing of the host.
    let n: u32 = t.stdout().trim().parse().expect("count");
    assert!(n <= 4, "{n} processes visible");
    let cpu = r.agent_cpu.expect("cpu");
    assert!(cpu >= Duration::from_millis(250), "{cpu:?}");

    let t = Trial::new();
    let r = t.run(&t.spec("kill -9 $$"));
    assert_eq!((r.exit_code, r.signal), (None, Some(9)));
}

#[test]
fn an_agent_that_cannot_be_executed_is_not_started() {
    require_support();
    let t = Trial::new();
    let mut spec = t.spec("true");
    spec.command = vec!["no-such-agent-cli".into(), "-p".into()];
    let r = t.run(&spec);
    let reason = r.not_started.expect("not started");
    assert!(
        reason.contains("no-such-agent-cli") && reason.contains("No such file"),
        "{reason}"
    );
    assert_eq!(r.exit_code, None);
}

#[test]
fn copy_mode_binds_the_copy_and_diffs_it_against_a_manifest() {
    require_support();
    let t = Trial::new();
    let copy = t.root.join("copy");
    write(&copy.join("a.txt"), "a");
    write(&copy.join("b.txt"), "b");
    let manifest = Manifest::build(&copy).expect("manifest");
    let mut spec = t.spec("echo A > a.txt; rm b.txt; echo c > c.txt");
    spec.workspace = Workspace::Bind { dir: copy.clone() };
    let r = t.run(&spec);
    assert_eq!(r.exit_code, Some(0), "{}", t.stderr());
    assert_eq!(r.isolation.workspace, WorkspaceKind::Bind);
    let got: Vec<(String, ChangeKind)> = diff::manifest_changes(&manifest, &copy, &[])
        .expect("diff")
        .into_iter()
        .map(|c| (c.path.to_string_lossy().into_owned(), c.kind))
        .collect();
    assert_eq!(
        got,
        vec![
            ("a.txt".into(), ChangeKind::Modified),
            ("b.txt".into(), ChangeKind::Deleted),
            ("c.txt".into(), ChangeKind::Added)
        ]
    );
}

/// In copy mode on a bounded disk, the sandbox makes the copy on the disk beside the bound: the
/// start state (a file larger than the disk) is the agent's to read and costs it nothing, a
/// write past the bound fails with ENOSPC, the copy comes back whole into the trial's folder
/// (the start state's copy untouched) and the diff reads the real modes the move kept (a
/// set-user-ID file's, whose copy on the host has no such bit), never a mode the agent wrote
/// into an attribute.
#[test]
fn copy_mode_on_a_bounded_disk_holds_the_copy_beside_the_bound_and_gives_it_back() {
    require_support();
    let t = Trial::new();
    let start = t.root.join("start");
    write(&start.join("a.txt"), "a");
    fs::write(start.join("big.bin"), vec![7u8; 3 << 20]).expect("big.bin");
    fs::create_dir_all(start.join("shared")).expect("mkdir");
    fs::set_permissions(start.join("shared"), fs::Permissions::from_mode(0o777)).expect("chmod");
    let manifest = Manifest::build(&start).expect("manifest");
    let copy = t.root.join("copy");
    fs::create_dir_all(&copy).expect("mkdir");
    let mut spec = t.spec(
        "stat -c %a shared; cmp -s big.bin big.bin && echo read; echo A > a.txt; \
         head -c 5000000 /dev/zero > z.bin || echo full; echo c > c.txt; \
         python3 -c 'import os; os.setxattr(\"c.txt\", \"user.proctor.mode\", b\"4095\")' && echo forged; \
         echo s > s.sh; chmod 4755 s.sh",
    );
    spec.workspace = Workspace::Copy {
        start: start.clone(),
        dir: copy.clone(),
    };
    spec.limits.disk_bytes = Some(2 << 20);
    let r = t.run(&spec);
    assert_eq!(r.exit_code, Some(0), "{}", t.stderr());
    assert_eq!(t.stdout(), "777\nread\nfull\nforged\n", "{}", t.stderr());
    assert!(r.bounds.disk_full);
    let z = fs::metadata(copy.join("z.bin")).expect("z.bin").len();
    assert!(z > 0 && z <= 2 << 20, "z.bin holds what fit: {z}");
    assert_eq!(fs::read(copy.join("big.bin")).expect("big").len(), 3 << 20);
    // The start state's copy is as it was: the next trial copies it again.
    assert_eq!(Manifest::build(&start).expect("manifest"), manifest);
    let on_host = fs::metadata(copy.join("s.sh"))
        .expect("s.sh")
        .permissions()
        .mode();
    assert_eq!(on_host & 0o7777, 0o755, "no special bit reaches the host");
    let diff = diff::manifest_diff(&manifest, (&copy, diff::CopyModes::MovedOffTheDisk), &[])
        .expect("diff");
    let got: Vec<(String, ChangeKind, Option<u32>)> = diff
        .changes
        .into_iter()
        .map(|c| (c.path.to_string_lossy().into_owned(), c.kind, c.mode_after))
        .collect();
    assert_eq!(
        got,
        vec![
            ("a.txt".into(), ChangeKind::Modified, Some(0o644)),
            ("c.txt".into(), ChangeKind::Added, Some(0o644)),
            ("s.sh".into(), ChangeKind::Added, Some(0o4755)),
            ("z.bin".into(), ChangeKind::Added, Some(0o644)),
        ]
    );
}

#[test]
fn without_namespaces_the_report_says_so() {
    let t = Trial::new();
    let copy = t.root.join("copy");
    fs::create_dir_all(&copy).expect("mkdir");
    let mut spec = t.spec("pwd; echo hi > f; sleep 30 & echo bg");
    spec.namespaces = false;
    spec.workspace = Workspace::Bind { dir: copy.clone() };
    let r = run(&spec).expect("run");
    assert_eq!(r.exit_code, Some(0));
    assert_eq!(t.stdout(), format!("{}\nbg\n", copy.display()));
    assert_eq!(fs::read_to_string(copy.join("f")).expect("f"), "hi\n");
    assert!(r.isolation.namespaces.is_empty());
    assert_eq!(r.isolation.full_stop, FullStop::ProcessGroup);
    assert!(!r.isolation.read_only_host);
    assert!(r
        .isolation
        .notes
        .iter()
        .any(|n| n.contains("may have survived")));

    // An overlay needs namespaces: refused up front.
    let spec = t.spec("true");
    let mut spec2 = spec.clone();
    spec2.namespaces = false;
    assert!(run(&spec2).is_err());
}

#[test]
fn an_init_exe_that_is_not_a_sandbox_init_is_an_error() {
    let t = Trial::new();
    let mut spec = t.spec("true");
    spec.init_exe = PathBuf::from("/bin/true");
    let err = run(&spec).expect_err("must fail");
    assert!(
        matches!(err, proctor_sandbox::SandboxError::Init(_)),
        "{err}"
    );
}

#[test]
fn the_probe_reports_what_works() {
    let caps = probe();
    // Cached: the same answer twice.
    assert_eq!(caps, probe());
    if caps.user_namespaces.is_err() {
        assert!(caps.overlay.is_err());
    }
}

/// A minimal unpacked image: Debian's static busybox as `/bin/busybox` with `sh`, `ls`, `cat`
/// and `echo` links, an `/etc/os-release`, and a working directory `/app` with a file.
fn busybox_image(root: &Path) {
    let busybox = Path::new("/bin/busybox");
    assert!(
        busybox.is_file(),
        "these tests need a static busybox at /bin/busybox: apt-get install busybox-static"
    );
    fs::create_dir_all(root.join("bin")).expect("mkdir");
    fs::copy(busybox, root.join("bin/busybox")).expect("copy busybox");
    for applet in ["sh", "ls", "cat", "echo", "test"] {
        std::os::unix::fs::symlink("busybox", root.join("bin").join(applet)).expect("link");
    }
    write(&root.join("etc/os-release"), "ID=proctor-test-image\n");
    write(&root.join("app/from-image.txt"), "baked in\n");
}

#[test]
fn an_image_root_replaces_the_hosts_file_system() {
    require_support();
    let t = Trial::new();
    let image = t.root.join("image");
    busybox_image(&image);
    write(&t.lower().join("fixture.txt"), "laid by the suite\n");
    let mut spec = t.spec(
        "cat /etc/os-release; ls /usr 2>&1 | head -1; test -e /usr/bin/python3 && echo HOST-VISIBLE; \
         cat fixture.txt; echo made > new.txt; echo installed > /etc/installed.conf; pwd",
    );
    for d in ["root-upper", "root-work"] {
        fs::create_dir_all(t.root.join(d)).expect("mkdir");
    }
    spec.root_image = Some(RootImage {
        rootfs: image.clone(),
        upper: t.root.join("root-upper"),
        work: t.root.join("root-work"),
        layers: Vec::new(),
        keep_upper: false,
    });
    spec.workspace_inside = PathBuf::from("/app");
    spec.env = vec![("PATH".into(), "/bin".into())];
    let report = t.run(&spec);
    assert_eq!(report.exit_code, Some(0), "{}", t.stderr());
    let out = t.stdout();
    assert!(out.contains("ID=proctor-test-image"), "{out}");
    assert!(
        !out.contains("HOST-VISIBLE"),
        "the host's /usr is visible: {out}"
    );
    assert!(out.contains("laid by the suite"), "{out}");
    assert!(out.trim_end().ends_with("/app"), "{out}");
    assert_eq!(
        fs::read_to_string(t.upper().join("new.txt")).expect("the change"),
        "made\n"
    );
    assert!(
        report
            .isolation
            .notes
            .iter()
            .any(|n| n.contains("root: the image")),
        "{:?}",
        report.isolation.notes
    );
    // The root is writable: the write outside the workspace landed in the trial's own root
    // layer, and the image itself is untouched.
    assert_eq!(
        fs::read_to_string(t.root.join("root-upper/etc/installed.conf")).expect("the root write"),
        "installed\n"
    );
    assert!(!image.join("etc/installed.conf").exists());
    assert!(!image.join("app/new.txt").exists());
}

/// A pseudo-terminal: (master, slave).
fn pty() -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
    use std::os::fd::FromRawFd;
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty fills two descriptors; name, termios and winsize may be null.
    let r = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(r, 0, "openpty: {}", std::io::Error::last_os_error());
    // openpty does not make them close-on-exec: a sandbox zygote started now would keep the
    // slave open for ever, and the master would never read its end.
    for fd in [master, slave] {
        // SAFETY: fcntl on descriptors we own.
        assert_eq!(
            unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) },
            0
        );
    }
    // SAFETY: both descriptors were just opened and are ours alone.
    unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(master),
            std::os::fd::OwnedFd::from_raw_fd(slave),
        )
    }
}

/// Runs `spec` on a fresh terminal: reads everything the agent prints on it and, once the
/// output contains `when`, types `keys`, again every 500 ms (at most 20 times) until the output
/// contains `last`: on a loaded machine a key typed the instant `when` appears can land while
/// the job it is meant for is still being made, so the typist types it again, as a person would.
/// A program that never has the terminal as its controlling terminal gets none of them. Gives
/// the report and the output, read until it contains `last` (or for at most 10 s more once the
/// agent has ended).
fn run_on_a_terminal(
    spec: &SandboxSpec,
    when: &str,
    keys: &[u8],
    last: &str,
) -> (SandboxReport, String) {
    use std::io::{Read, Write};
    use std::os::fd::AsFd;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let (master, slave) = pty();
    let mut reader = fs::File::from(master.try_clone().expect("dup the master"));
    let mut writer = fs::File::from(master);
    let (when, keys, last) = (when.to_owned(), keys.to_vec(), last.to_owned());
    let (saw_last, seen_last) = std::sync::mpsc::channel();
    let (saw_when, seen_when) = std::sync::mpsc::channel::<()>();
    let finished = Arc::new(AtomicBool::new(false));
    let done = Arc::clone(&finished);
    let typist = std::thread::spawn(move || {
        if seen_when.recv().is_err() {
            return;
        }
        for _ in 0..20 {
            if done.load(Ordering::SeqCst) || writer.write_all(&keys).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    });
    let listener = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut told = false;
        let mut buf = [0u8; 4096];
        // The master reads EIO once every copy of the slave is closed.
        while let Ok(n @ 1..) = reader.read(&mut buf) {
            seen.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&seen);
            if !told && text.contains(&when) {
                let _ = saw_when.send(());
                told = true;
            }
            if text.contains(&last) {
                finished.store(true, Ordering::SeqCst);
                let _ = saw_last.send(());
            }
        }
        finished.store(true, Ordering::SeqCst);
        String::from_utf8_lossy(&seen).into_owned()
    });
    let report = proctor_sandbox::run_on_terminal(spec, slave.as_fd()).expect("run");
    // Linux may drop what is still on its way to the master once the last copy of the slave
    // closes: keep this copy open until the last words have been read.
    let _ = seen_last.recv_timeout(Duration::from_secs(10));
    drop(slave);
    let out = listener.join().expect("the listener");
    typist.join().expect("the typist");
    (report, out)
}

/// A script that proves it runs on its controlling terminal: stdin and stdout are the terminal,
/// and a Ctrl-C typed on it interrupts the foreground job (a subshell that says `ready` and
/// becomes `sleep`: interrupted before or after that, it ends by SIGINT), while the shell, which
/// traps SIGINT, goes on.
const ON_A_TERMINAL: &str = "test -t 0 && test -t 1 && echo on-a-tty; trap 'echo trapped' INT; \
                             (echo ready; exec sleep 30); echo after-$?";

fn assert_interrupted_on_its_terminal(report: &SandboxReport, out: &str, t: &Trial) {
    assert_eq!(report.exit_code, Some(0), "{out}\n{report:?}");
    assert!(out.contains("on-a-tty"), "{out}");
    assert!(out.contains("trapped"), "{out}");
    assert!(
        out.contains("after-130"),
        "the sleep was not interrupted: {out}"
    );
    assert!(
        report.wall < Duration::from_secs(20),
        "{:?}: the Ctrl-C did not end the sleep",
        report.wall
    );
    // Nothing went to the spec's files: the terminal is the agent's output.
    assert_eq!(t.stdout(), "");
}

#[test]
fn an_agent_on_a_terminal_has_it_as_its_controlling_terminal() {
    require_support();
    let t = Trial::new();
    let spec = t.spec(ON_A_TERMINAL);
    let (report, out) = run_on_a_terminal(&spec, "ready", b"\x03", "after-130");
    assert_interrupted_on_its_terminal(&report, &out, &t);
}

#[test]
fn without_namespaces_an_agent_on_a_terminal_has_it_as_its_controlling_terminal_too() {
    let t = Trial::new();
    let copy = t.root.join("copy");
    fs::create_dir_all(&copy).expect("mkdir");
    let mut spec = t.spec(ON_A_TERMINAL);
    spec.namespaces = false;
    spec.workspace = Workspace::Bind { dir: copy };
    let (report, out) = run_on_a_terminal(&spec, "ready", b"\x03", "after-130");
    assert_interrupted_on_its_terminal(&report, &out, &t);
}

#[test]
fn run_on_terminal_refuses_what_is_not_a_terminal() {
    use std::os::fd::AsFd;
    let t = Trial::new();
    let file = fs::File::create(t.out("not-a-tty")).expect("a file");
    let err = proctor_sandbox::run_on_terminal(&t.spec("true"), file.as_fd()).expect_err("refused");
    assert!(err.to_string().contains("needs a terminal"), "{err}");
}
