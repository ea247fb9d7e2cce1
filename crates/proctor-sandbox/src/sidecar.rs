//! Sidecar services: a service with a root of its own (an image), as a pod's containers have.
//!
//! The trial init T binds each sidecar's unpacked image read-only at
//! [`SandboxSpec::sidecar_image_inside`] (never shown to the agent). The sidecar's process,
//! forked by T, then unshares a mount namespace of its own, lays a writable in-memory layer over
//! the image, gives it `/proc`, `/dev`, `/sys` and the trial's `/etc/hosts` (and
//! `/etc/resolv.conf`), and pivots into it before it executes: it shares the trial's network and
//! PID namespaces and its control group (it is stopped and reaped with the trial), but sees
//! nothing of the trial's root or the agent's workspace. Its healthcheck runs in that same
//! mount namespace (entered through the sidecar's pidfd; [`crate::services::wait_healthy`]).
//! The binds of the images in T's root and their removal from the agent's view are part of
//! those roots ([`crate::rootfs`]); this module makes the sidecar's own root.

use std::ffi::OsStr;
use std::path::Path;

use crate::rootfs::{self, under};
use crate::spec::SandboxSpec;
use crate::sys;

type R<T> = Result<T, String>;

/// The files of the trial's root a sidecar's root shows too (read-only), when T has them: the
/// names every container of the pod resolves, and the resolver.
const SHARED_FILES: &[&str] = &["/etc/hosts", "/etc/resolv.conf"];

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
