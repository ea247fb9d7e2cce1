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

mod builtin;
pub mod calls;
pub mod copy;
pub mod diff;
mod disk;
mod egress;
mod error;
mod exec;
mod handback;
mod host;
mod http;
mod huge_text;
mod ids;
mod init;
pub mod mcp;
pub mod mcp_http;
mod msg;
mod output;
mod probe;
mod report;
mod rootfs;
mod run;
mod services;
mod sidecar;
mod spec;
mod start;
mod sys;
mod trace;
pub mod turns;
pub mod view;
mod zygote;

pub use builtin::{builtin, register_builtins, Builtin};
pub use calls::{AllowedProgram, CallsSpec};
pub use egress::available as internet_available;

/// The variable that tells a service its own state folder (inside the sandbox, and on the host
/// for a service run beside it).
pub const SERVICE_DIR_ENV: &str = "PROCTOR_SERVICE_DIR";
/// The variable that, when set, makes the sandbox trace its steps and timings on stderr.
pub const SANDBOX_DEBUG_ENV: &str = "PROCTOR_SANDBOX_DEBUG";
pub use error::SandboxError;
pub use handback::{recorded_owner, OWNER_XATTR};
pub use ids::{IdMapKind, IdMapping, DEFAULT_BASE as DEFAULT_ID_BASE, RANGE as ID_RANGE};
pub use output::Capped;
pub use probe::{probe, probe_in, Capabilities};
pub use report::{
    BoundsReport, Exit, FullStop, Isolation, LeftOut, Namespace, ProbeOutcome, SandboxReport,
    ServiceReport, TurnReport, WorkspaceKind, LEFT_OUT_MAX,
};
pub use rootfs::mount_points;
pub use run::{run, run_conversation, run_on_terminal};
pub use spec::{
    Bind, CommandProbe, HttpGuard, HttpProbe, Network, RootImage, RootSkeleton, SandboxLimits,
    SandboxSpec, ServiceRoot, ServiceSpec, Workspace, MAX_TIMEOUT, SERVICE_DIR_ROOT, SIDECAR_ROOT,
    STATE_AT_START,
};

/// Call first thing in `main()` of any binary used as [`SandboxSpec::init_exe`]: if `argv[1]` is
/// `__sandbox`, this process is a sandbox init; it runs the sandbox and exits the process.
/// Otherwise it returns at once and `main` goes on. Must run before any thread is started.
pub fn enter_if_requested() {
    init::enter_if_requested();
}

/// Removes a directory tree that overlayfs or an agent worked in, e.g. an overlay `work`
/// directory or a trial's scratch after the run. overlayfs leaves `work/work` with mode 000, and
/// an agent may leave folders of mode 000 or nested past PATH_MAX, which an unprivileged owner
/// cannot delete without first giving itself access back: this does that, walking by open
/// folders without recursion ([`proctor_fs::beneath::remove_tree`]: never by long paths, at any
/// depth with two descriptors open), so no tree the agent made can keep its scratch alive.
pub fn remove_tree(path: &std::path::Path) -> std::io::Result<()> {
    proctor_fs::beneath::remove_tree(path)
}
