//! Sidecar services: a service with a root of its own (an image), as a pod's containers have.
//!
//! The trial init T binds each sidecar's unpacked image read-only at
//! [`SandboxSpec::sidecar_image_inside`] (never shown to the agent). The sidecar's process,
//! forked by T, then unshares a mount namespace of its own, lays a writable in-memory layer over
//! the image, gives it `/proc`, `/dev`, `/sys` and the trial's `/etc/hosts` (and
//! `/etc/resolv.conf`), and pivots into it before it executes: it shares the trial's network and
//! PID namespaces and its control group (it is stopped and reaped with the trial), but sees
//! nothing of the trial's root or the agent's workspace. Its healthcheck runs in that same
//! mount namespace (entered through the sidecar's pidfd).

use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::exec::{Enter, ExecPlan};
use crate::report::ProbeOutcome;
use crate::rootfs::{self, under};
use crate::spec::{CommandProbe, SandboxSpec, SIDECAR_ROOT};
use crate::sys;

type R<T> = Result<T, String>;

/// The files of the trial's root a sidecar's root shows too (read-only), when T has them: the
/// names every container of the pod resolves, and the resolver.
const SHARED_FILES: &[&str] = &["/etc/hosts", "/etc/resolv.conf"];

/// In T, before it pivots: binds each sidecar's image (seen under `old`) read-only at its
/// place in the new root (`new`).
pub(crate) fn bind_images(spec: &SandboxSpec, old: &Path, new: &Path) -> R<()> {
    for s in &spec.services {
        let Some(root) = &s.root else { continue };
        let inside = SandboxSpec::sidecar_image_inside(&s.name);
        rootfs::bind(
            &under(old, &root.rootfs),
            &under(new, &inside),
            true,
            sys::MOUNT_ATTR_NOSUID,
        )?;
    }
    Ok(())
}

/// In the agent's own mount namespace: takes every sidecar image out of it and covers the
/// sidecars' folder, so the agent neither sees nor names them.
pub(crate) fn hide_from_agent(spec: &SandboxSpec) -> R<()> {
    let mut any = false;
    for s in spec.services.iter().filter(|s| s.root.is_some()) {
        any = true;
        let image = SandboxSpec::sidecar_image_inside(&s.name);
        sys::umount_detach(&image)
            .map_err(|e| format!("unmount {} from the agent's view: {e}", image.display()))?;
    }
    if any {
        rootfs::tmpfs(
            Path::new(SIDECAR_ROOT),
            libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            "mode=0555,size=4k",
        )?;
    }
    Ok(())
}

/// In the sidecar's forked process, before it executes: a mount namespace of its own whose
/// root is its image under a fresh writable layer, with `/proc`, `/dev`, `/sys` and the
/// trial's shared files. Only T's own children call this (they hold T's capabilities in the
/// trial's user namespace until they execute).
pub(crate) fn enter_own_root(name: &str) -> R<()> {
    sys::unshare(libc::CLONE_NEWNS).map_err(|e| format!("unshare a mount namespace: {e}"))?;
    let image = SandboxSpec::sidecar_image_inside(name);
    let stage = SandboxSpec::sidecar_stage_inside(name);
    rootfs::tmpfs(&stage, libc::MS_NOSUID | libc::MS_NODEV, "mode=0755")?;
    let (upper, work, merged) = (
        stage.join("upper"),
        stage.join("work"),
        stage.join("merged"),
    );
    for d in [&upper, &work, &merged] {
        rootfs::mkdir_p(d)?;
    }
    rootfs::mount_overlay(&merged, &[image], &upper, &work)?;
    mount_proc(&merged.join("proc"))?;
    rootfs::bind(Path::new("/dev"), &merged.join("dev"), false, 0)?;
    rootfs::bind(Path::new("/sys"), &merged.join("sys"), true, 0)?;
    for file in SHARED_FILES {
        let from = Path::new(file);
        if std::fs::metadata(from).is_ok_and(|m| m.is_file()) {
            rootfs::bind(
                from,
                &under(&merged, from),
                true,
                sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV,
            )?;
        }
    }
    rootfs::pivot_into_new_root(&merged)
}

/// A `/proc` of the trial's PID namespace at `target`; where the kernel refuses a new one, a
/// bind of T's.
fn mount_proc(target: &Path) -> R<()> {
    rootfs::mkdir_p(target)?;
    let fresh = sys::mount(
        Some(OsStr::new("proc")),
        target,
        Some("proc"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        None,
    );
    match fresh {
        Ok(()) => Ok(()),
        Err(_) => rootfs::bind(Path::new("/proc"), target, false, 0),
    }
}

/// What a healthcheck is run with: the service's environment, working folder and log.
pub(crate) struct HealthRun<'a> {
    /// The service's environment.
    pub env: &'a [(String, String)],
    /// Its working folder (inside its root).
    pub cwd: &'a Path,
    /// `/dev/null`, the healthcheck's standard input.
    pub devnull: RawFd,
    /// The service's log, where the healthcheck's output goes.
    pub log: RawFd,
}

/// Runs `probe` in the mount namespace of the service (`pid`, `pidfd`) until it exits 0, the
/// service exits, or `probe.timeout` (counted from `started_at`) passes.
pub(crate) fn wait_healthy(
    probe: &CommandProbe,
    run: &HealthRun<'_>,
    pid: libc::pid_t,
    pidfd: &OwnedFd,
    started_at: Instant,
) -> ProbeOutcome {
    let deadline = started_at + probe.timeout;
    let mut pause = Duration::from_millis(20);
    let mut tries = 0u32;
    let mut last;
    loop {
        if let Some(e) = sys::peek_exit(pid) {
            return ProbeOutcome::Failed {
                reason: format!(
                    "it exited ({}) before its healthcheck passed",
                    crate::services::describe_exit(&e)
                ),
            };
        }
        tries += 1;
        match try_once(probe, run, pidfd, deadline) {
            Ok(()) => {
                return ProbeOutcome::Passed {
                    elapsed: started_at.elapsed(),
                }
            }
            Err(e) => last = e,
        }
        if Instant::now() + pause >= deadline {
            return ProbeOutcome::Failed {
                reason: format!(
                    "its healthcheck {:?} did not pass within {:.1?} ({tries} tries; the last: {last})",
                    probe.argv, probe.timeout
                ),
            };
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(probe.interval.max(Duration::from_millis(20)));
    }
}

/// One try of the healthcheck: `Ok` when it exits 0 before `deadline`.
fn try_once(
    probe: &CommandProbe,
    run: &HealthRun<'_>,
    pidfd: &OwnedFd,
    deadline: Instant,
) -> R<()> {
    let pid = ExecPlan::new(&probe.argv, run.env, run.cwd, run.devnull, run.log, run.log)?
        .entering(Enter::MountsOf(pidfd.as_raw_fd()))
        .spawn()?;
    let fd = sys::pidfd_open(pid).map_err(|e| {
        sys::kill(pid, libc::SIGKILL);
        let _ = sys::wait4(pid, 0);
        format!("pidfd_open: {e}")
    })?;
    let left = deadline.saturating_duration_since(Instant::now());
    let ended = sys::wait_readable(fd.as_fd(), Some(left)).unwrap_or(false);
    if !ended {
        // Its own session: the whole of it goes.
        sys::kill(-pid, libc::SIGKILL);
        sys::kill(pid, libc::SIGKILL);
    }
    let exit = match sys::wait4(pid, 0) {
        Ok(Some((_, status, _))) => sys::decode_status(status),
        _ => return Err("it could not be waited for".into()),
    };
    match (ended, exit.code) {
        (false, _) => Err("it was still running at the deadline".into()),
        (true, Some(0)) => Ok(()),
        (true, _) => Err(format!(
            "it ended with {}",
            crate::services::describe_exit(&exit)
        )),
    }
}
