//! proctor's sandbox stage: run one process tree (an agent, with its services) in a fresh,
//! isolated sandbox, stop it completely, and read what it changed.
//!
//! [`run`] starts the sandbox init from [`SandboxSpec::init_exe`]: executed once per process as a
//! small "zygote" that clones one trial init per run (set `PROCTOR_SANDBOX_NO_ZYGOTE=1` to execute
//! `init_exe` for every run instead). That init is in new
//! user, mount, PID, IPC, UTS and (unless [`Network::Host`]) network namespaces, builds a root
//! where the host is read-only and only the workspace, a private `HOME`, `/tmp` and `/dev/shm` are
//! writable, hides the suite and the store, starts the services (readiness probe, guard), runs
//! the agent in a nested PID namespace of its own, and tears everything down: when [`run`]
//! returns, no process of the trial exists anymore. Without namespaces (`namespaces: false`) the
//! agent runs in a plain process group, and the report says so.
//!
//! [`diff`] reads the end state: the overlay's upper layer (O(changed files)) or, in copy mode, a
//! comparison against a [`diff::Manifest`].
//!
//! Every binary used as `init_exe` must call [`enter_if_requested`] first thing in `main`.
//!
//! Linux only (user namespaces, overlayfs with `userxattr`, `mount_setattr`, pidfds: 5.12+; the
//! overlay uses `lowerdir+` on 6.8+ and falls back to classic mount options before). Set
//! `PROCTOR_SANDBOX_DEBUG=1` to have the sandbox init print its phase timings to stderr.
#![warn(missing_docs)]

mod builtin;
pub mod diff;
mod disk;
mod error;
mod exec;
mod host;
mod http;
mod init;
mod msg;
mod output;
mod probe;
mod report;
mod rootfs;
mod run;
mod services;
mod spec;
mod sys;
mod zygote;

pub use builtin::{builtin, register_builtins, Builtin};
pub use error::SandboxError;
pub use output::Capped;
pub use probe::{probe, probe_in, Capabilities};
pub use report::{
    BoundsReport, Exit, FullStop, Isolation, Namespace, ProbeOutcome, SandboxReport, ServiceReport,
    WorkspaceKind,
};
pub use run::{run, run_on_terminal};
pub use spec::{
    Bind, HttpGuard, HttpProbe, Network, RootImage, SandboxLimits, SandboxSpec, ServiceSpec,
    Workspace, SERVICE_DIR_ROOT,
};

/// Call first thing in `main()` of any binary used as [`SandboxSpec::init_exe`]: if `argv[1]` is
/// `__sandbox`, this process is a sandbox init; it runs the sandbox and exits the process.
/// Otherwise it returns at once and `main` goes on. Must run before any thread is started.
pub fn enter_if_requested() {
    init::enter_if_requested();
}

/// Removes a directory tree that overlayfs worked in, e.g. an overlay `work` directory after the
/// run. overlayfs leaves `work/work` with mode 000 (and sometimes a stale whiteout in it), which
/// an unprivileged owner cannot delete without first giving itself access back; this does that.
pub fn remove_tree(path: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fn open_up(dir: &std::path::Path) -> std::io::Result<()> {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                open_up(&entry.path())?;
            }
        }
        Ok(())
    }
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        Ok(m) if m.is_dir() => {
            // Most trees come down at once; only one with a folder we cannot enter (the overlay's
            // mode-000 `work/work`, left after a crash) needs opening up first.
            match std::fs::remove_dir_all(path) {
                Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                    open_up(path)?;
                    std::fs::remove_dir_all(path)
                }
                other => other,
            }
        }
        Ok(_) => std::fs::remove_file(path),
    }
}
