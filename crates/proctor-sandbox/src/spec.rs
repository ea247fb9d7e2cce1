//! What to run and how to isolate it: the [`SandboxSpec`] and its parts.

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::SandboxError;

/// Where each service's state directory appears inside the sandbox: `SERVICE_DIR_ROOT/NAME`,
/// exported to the service as `$PROCTOR_SERVICE_DIR`. The agent never sees it.
pub const SERVICE_DIR_ROOT: &str = "/run/proctor/services";

/// Everything [`crate::run`] needs to run one process tree in a fresh sandbox. It is serialised to
/// JSON and handed to the sandbox init, so every field must survive a round trip.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSpec {
    /// The binary executed as the sandbox zygote or init (`init_exe __sandbox...`); its `main`
    /// must call [`crate::enter_if_requested`] first. In proctor this is
    /// `std::env::current_exe()`.
    pub init_exe: PathBuf,
    /// `true`: new user, mount, PID, IPC, UTS (and network) namespaces. `false`: the fallback with
    /// no namespaces at all, a plain process group on the host, recorded as such in the report.
    pub namespaces: bool,
    /// The agent's workspace: an overlay over read-only lowers, or a plain bind of a copy.
    pub workspace: Workspace,
    /// Where the agent sees the workspace, e.g. `/workspace`; its working directory. Ignored
    /// without namespaces (the agent's working directory is then the host directory itself).
    pub workspace_inside: PathBuf,
    /// Host paths made invisible to the agent (an empty read-only tmpfs over each, or `/dev/null`
    /// over a file): the suite directory, the store. Services still see them, read-only.
    pub hide: Vec<PathBuf>,
    /// Extra mounts visible to the agent and the services (shim directory, a socket, ...).
    pub binds: Vec<Bind>,
    /// The trial's network.
    pub network: Network,
    /// With [`Network::Internet`]: the names the trial may reach (`HOST`, or `*.HOST` for the
    /// names below it); empty: any public address.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// The complete environment of the agent; nothing else is inherited.
    pub env: Vec<(String, String)>,
    /// The agent's private `HOME` inside the sandbox, on a fresh tmpfs, e.g. `/home/agent`.
    pub home_inside: PathBuf,
    /// Services started inside the trial's namespaces before the agent, in order.
    pub services: Vec<ServiceSpec>,
    /// The agent's argv; a bare program name is looked up on the `PATH` of [`Self::env`].
    pub command: Vec<String>,
    /// Host file that receives the agent's stdout (created or truncated).
    pub stdout: PathBuf,
    /// Host file that receives the agent's stderr (created or truncated; may equal `stdout`).
    pub stderr: PathBuf,
    /// How long the agent may run before it is stopped.
    pub wall_timeout: Duration,
    /// Between SIGTERM and SIGKILL, for the agent at its timeout and for the services at the end.
    pub grace: Duration,
    /// An image whose file system is the root instead of the host's (with the same private
    /// `/proc`, `/dev`, `/tmp`, `/run` and `/home`). `None`: the host's own file system,
    /// read-only.
    #[serde(default)]
    pub root_image: Option<RootImage>,
    /// A skeleton of the root laid out beforehand for trials shaped like this one (see
    /// [`RootSkeleton::lay_out`]), bound instead of making one on a fresh tmpfs: the same root,
    /// for fewer system calls per trial. `None`: the trial init makes its own. Ignored with a
    /// `root_image`.
    #[serde(default)]
    pub skeleton: Option<RootSkeleton>,
    /// What bounds the trial's resources; the default bounds nothing.
    #[serde(default)]
    pub limits: SandboxLimits,
    /// What of the host the root shows, once worked out for this spec's `PATH` (see
    /// [`crate::view`]); set by the sandbox itself, `None` for a caller.
    #[serde(default)]
    pub view: Option<proctor_records::isolation::HostView>,
    /// The trial's interface calls, run by the trial init outside the agent's reach (see
    /// [`crate::calls`]); `None`: the trial has no call runner. Ignored without namespaces.
    #[serde(default)]
    pub calls: Option<crate::calls::CallsSpec>,
    /// The most turns the agent may take (see [`crate::turns`]): above 1, the sandbox asks the
    /// caller after each turn whether another follows. 0 and 1 both mean one turn.
    #[serde(default)]
    pub max_turns: u32,
}

/// The bounds a trial runs under, enforced inside its namespaces (a process outside sees only
/// the result).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxLimits {
    /// Bytes the trial may write: one tmpfs of this size, made inside the trial's user
    /// namespace, holds the workspace's upper layer, an image root's upper layer, `/tmp`,
    /// `HOME` and `/dev/shm`; a write past it fails with ENOSPC. At the end the workspace's
    /// changes are moved to the host's upper folder, where they are read as usual. `None`: each
    /// of them is a file system of its own, bounded by nothing but the host.
    pub disk_bytes: Option<u64>,
    /// Bytes kept of the agent's stdout, and of its stderr, each: past it the first and last
    /// halves are kept with a line marking the cut between them. `None`: all of it.
    pub output_bytes: Option<u64>,
    /// Control-group folders (one per hierarchy) the trial joins before anything of it runs,
    /// so that every process of the trial is counted and held by their limits.
    pub cgroups: Vec<PathBuf>,
}

/// The skeleton of a host root, laid out on the host once for many trials by
/// [`RootSkeleton::lay_out`]: what a trial's root shows before anything is mounted on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RootSkeleton {
    /// The host folder holding it; never written by a trial (bound read-only).
    pub dir: PathBuf,
    /// The host's top-level entries bound over their mount points in it, by name.
    pub bound: Vec<PathBuf>,
    /// The host's device nodes bound into `/dev`, by name.
    pub devices: Vec<String>,
}

/// A root made of an unpacked image: an overlay whose only lower layer is the image and whose
/// upper layer is the trial's own, so the agent may write anywhere (install a package into
/// `/usr`) while the image, shared by every trial, is never changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RootImage {
    /// The unpacked image (a host folder), never written.
    pub rootfs: PathBuf,
    /// The trial's upper layer of the root: an empty folder; every write outside the workspace,
    /// `HOME` and `/tmp` lands here and goes with the trial's scratch.
    pub upper: PathBuf,
    /// overlayfs' work folder (an empty folder on the same file system as `upper`).
    pub work: PathBuf,
    /// Read-only layers between the image and `upper`, top first: what a trial's agent changed
    /// outside the workspace, laid under a check's root when its task's checks see the agent's
    /// root (`check_root = "agent"`). Empty for a trial.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<PathBuf>,
    /// Whether the agent's changes to the root are carried out of the trial's disk into
    /// `upper` when the trial ends (as the workspace's are), for its checks to see them.
    /// Without it they go with the trial's disk.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_upper: bool,
}

/// The workspace the agent works in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Workspace {
    /// An overlay mount: `lowers` (top first) stay untouched; every change lands in `upper`.
    /// `upper` and `work` must be empty directories on the same file system.
    Overlay {
        /// Read-only lower layers, the top one first.
        lowers: Vec<PathBuf>,
        /// The trial's own upper layer: after the run it holds exactly the agent's changes.
        upper: PathBuf,
        /// overlayfs' work directory (same file system as `upper`).
        work: PathBuf,
    },
    /// A read-write bind of a directory the caller prepared, as it is (a check's copy of the
    /// end state, which the check's watch observes where it lies).
    Bind {
        /// The host directory.
        dir: PathBuf,
    },
    /// A copy of `start` (copy mode: the caller diffs `dir` against the start state's manifest
    /// afterwards). With a bounded disk (`disk_bytes`), the sandbox copies `start` onto the
    /// trial's disk before it bounds the disk (the copy is not counted against the bound), that
    /// is the workspace while the trial runs, and it is moved into `dir` at the end, special
    /// bits cleared and kept in [`crate::copy::MODE_XATTR`]; without one, the sandbox copies
    /// `start` into `dir` and binds that.
    Copy {
        /// The start state, which nothing writes (the caller's, shared by trials).
        start: PathBuf,
        /// An empty host directory: the end state.
        dir: PathBuf,
    },
}

/// An extra mount from the host into the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bind {
    /// The host path: a directory, a file or a unix socket.
    pub host: PathBuf,
    /// Where it appears inside (absolute). Its parent must exist or be creatable on a private
    /// tmpfs (`/tmp`, `/run`, `/home` or a new top-level directory).
    pub inside: PathBuf,
    /// Mount it read-only.
    pub read_only: bool,
}

impl ServiceSpec {
    /// Whether this is a folder with no process (an empty argv): the place of an MCP server's
    /// state, which the call runner starts per session; made, hidden from the agent and kept
    /// as a service's folder is, but nothing is started, probed or reported for it.
    pub fn folder_only(&self) -> bool {
        self.argv.is_empty()
    }
}

/// The trial's network (the same kind the trial record keeps).
pub use proctor_records::isolation::Network;

/// A service (mock backend) started inside the trial's namespaces before the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceSpec {
    /// Unique name; letters, digits, `.`, `_` and `-` only.
    pub name: String,
    /// The command; a bare program name is looked up on the `PATH` of [`Self::env`]. Empty: a
    /// folder only ([`ServiceSpec::folder_only`]).
    pub argv: Vec<String>,
    /// Working directory, as seen inside the sandbox. Host paths outside `/tmp`, `/run` and
    /// `/home` are visible read-only under the same name, and so are the `hide` paths (hidden from
    /// the agent only). Without namespaces this is a host path.
    pub cwd: PathBuf,
    /// The service's complete environment (plus `PROCTOR_SERVICE_DIR`).
    pub env: Vec<(String, String)>,
    /// Host directory for the service's state and logs, mounted read-write at
    /// `SERVICE_DIR_ROOT/NAME` inside and unmounted from the agent's view.
    pub dir_host: PathBuf,
    /// Host file that receives the service's stdout and stderr (created or truncated).
    pub log: PathBuf,
    /// Wait until this URL answers with a 2xx status before going on.
    pub ready: Option<HttpProbe>,
    /// After `ready`, refuse the service unless this URL's body contains the expected text.
    pub guard: Option<HttpGuard>,
    /// Its state file, relative to its folder: once every service is ready, and before the
    /// agent starts, the trial init copies it to [`STATE_AT_START`] beside it, so the end state
    /// can be compared with the state the agent found.
    #[serde(default)]
    pub state: Option<PathBuf>,
    /// A root of its own (a sidecar container): the service runs in its own mount namespace
    /// over this image, in the trial's network (and PID) namespace, never seeing the trial's
    /// root or the agent's workspace. `None`: it runs in the trial's root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<ServiceRoot>,
    /// A command run inside the service's own root (or the trial's) until it exits 0, before
    /// the next service or the agent starts: a compose `healthcheck`. Its output goes to the
    /// service's log. One that never passes refuses the trial, as a failed `ready` does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<CommandProbe>,
    /// A network namespace of its own, with only its loopback: no other process of the trial
    /// (the agent's least of all) can connect to it. Its `ready` and `guard` probes are made
    /// from inside it, and the sessions of an MCP server whose `url` it serves join it
    /// ([`crate::mcp::McpProgram::network`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub own_network: bool,
}

/// The root of a sidecar service: an unpacked image, under a writable layer of its own (in
/// memory, gone with the trial).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceRoot {
    /// The unpacked image (a host folder), never written.
    pub rootfs: PathBuf,
}

/// A health probe by command: `argv` run (in the service's root, with its environment and
/// working folder) until it exits 0, for at most `timeout` in all, pausing up to `interval`
/// between tries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandProbe {
    /// The command; a bare program name is looked up on the service's `PATH`.
    pub argv: Vec<String>,
    /// How long to keep trying, counted from the service's start.
    pub timeout: Duration,
    /// The longest pause between two tries (the first pauses are shorter).
    pub interval: Duration,
}

/// Where the trial init shows each sidecar's image and stages its root (never to the agent):
/// `SIDECAR_ROOT/NAME/image` and `SIDECAR_ROOT/NAME/root`.
pub const SIDECAR_ROOT: &str = "/run/proctor/sidecars";

/// The name, in a service's folder, of the copy of its state file made just before the agent
/// started ([`ServiceSpec::state`]).
pub const STATE_AT_START: &str = ".proctor-state-at-start";

/// A readiness probe: `GET url` until it answers 2xx, for at most `timeout`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpProbe {
    /// `http://HOST:PORT/PATH` (plain HTTP only).
    pub url: String,
    /// How long to keep trying.
    pub timeout: Duration,
}

/// A guard: `GET url` once; the body must contain `expect`, or the agent never starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpGuard {
    /// `http://HOST:PORT/PATH` (plain HTTP only).
    pub url: String,
    /// A substring the response body must contain.
    pub expect: String,
    /// Time allowed for the request.
    #[serde(default = "default_guard_timeout")]
    pub timeout: Duration,
}

/// The longest timeout a spec may hold (30 days), a defensive bound that keeps every deadline
/// computation far from overflow: the sandbox sets no timeout of its own, it runs with the one
/// it is given.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(30 * 24 * 3600);

fn default_guard_timeout() -> Duration {
    Duration::from_secs(5)
}

impl HttpGuard {
    /// A guard with the default 5 s request timeout.
    pub fn new(url: impl Into<String>, expect: impl Into<String>) -> Self {
        HttpGuard {
            url: url.into(),
            expect: expect.into(),
            timeout: default_guard_timeout(),
        }
    }
}

impl SandboxSpec {
    /// A spec with the usual defaults: namespaces on, workspace at `/workspace`, no network,
    /// `HOME=/home/agent`, a minimal environment (`PATH`, `HOME`, `LANG`), no services and 2 s
    /// grace, stopping the agent at `wall_timeout` (the caller's, such as a suite's resolved
    /// setting). Adjust the public fields as needed.
    pub fn new(
        init_exe: impl Into<PathBuf>,
        workspace: Workspace,
        command: Vec<String>,
        stdout: impl Into<PathBuf>,
        stderr: impl Into<PathBuf>,
        wall_timeout: Duration,
    ) -> Self {
        SandboxSpec {
            init_exe: init_exe.into(),
            namespaces: true,
            workspace,
            workspace_inside: PathBuf::from("/workspace"),
            hide: Vec::new(),
            binds: Vec::new(),
            network: Network::None,
            allowed_hosts: Vec::new(),
            max_turns: 1,
            env: vec![
                (
                    "PATH".to_owned(),
                    "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin".to_owned(),
                ),
                ("HOME".to_owned(), "/home/agent".to_owned()),
                ("LANG".to_owned(), "C.UTF-8".to_owned()),
            ],
            home_inside: PathBuf::from("/home/agent"),
            services: Vec::new(),
            command,
            stdout: stdout.into(),
            stderr: stderr.into(),
            wall_timeout,
            grace: Duration::from_secs(2),
            root_image: None,
            skeleton: None,
            limits: SandboxLimits::default(),
            view: None,
            calls: None,
        }
    }

    /// Where service `name`'s state directory is mounted inside the sandbox.
    pub fn service_dir_inside(name: &str) -> PathBuf {
        Path::new(SERVICE_DIR_ROOT).join(name)
    }

    /// Where sidecar `name`'s image is shown to the trial init (read-only, never to the agent).
    pub fn sidecar_image_inside(name: &str) -> PathBuf {
        Path::new(SIDECAR_ROOT).join(name).join("image")
    }

    /// Where sidecar `name`'s root is staged, in its own mount namespace.
    pub fn sidecar_stage_inside(name: &str) -> PathBuf {
        Path::new(SIDECAR_ROOT).join(name).join("root")
    }

    /// [`SandboxSpec::validate`]'s checks of the services: names, commands, roots, probes.
    fn validate_services(&self) -> Result<(), SandboxError> {
        let bad = |m: String| Err(SandboxError::InvalidSpec(m));
        let mut names = HashSet::new();
        for s in &self.services {
            if s.name.is_empty()
                || s.name == "."
                || s.name == ".."
                || !s
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
            {
                return bad(format!(
                    "service name {:?} must be letters, digits, '.', '_' or '-'",
                    s.name
                ));
            }
            if !names.insert(s.name.as_str()) {
                return bad(format!("service {:?} is defined twice", s.name));
            }
            if s.folder_only() && (s.ready.is_some() || s.guard.is_some() || s.health.is_some()) {
                return bad(format!(
                    "service {:?} has an empty command, but probes to run",
                    s.name
                ));
            }
            check_absolute("service dir", &s.dir_host)?;
            if let Some(root) = &s.root {
                check_absolute("service root", &root.rootfs)?;
                if !self.namespaces {
                    return bad(format!(
                        "service {:?} has a root of its own, which needs namespaces",
                        s.name
                    ));
                }
            }
            if s.health.as_ref().is_some_and(|h| h.argv.is_empty()) {
                return bad(format!("service {:?} has an empty healthcheck", s.name));
            }
            for (k, v) in &s.env {
                check_env(k, v)?;
            }
            if let Some(r) = &s.ready {
                crate::http::Url::parse(&r.url)
                    .map_err(|e| SandboxError::InvalidSpec(format!("service {:?}: {e}", s.name)))?;
            }
            if let Some(g) = &s.guard {
                crate::http::Url::parse(&g.url)
                    .map_err(|e| SandboxError::InvalidSpec(format!("service {:?}: {e}", s.name)))?;
            }
        }
        Ok(())
    }

    /// Checks the spec for mistakes that would otherwise surface as confusing mount errors.
    pub fn validate(&self) -> Result<(), SandboxError> {
        let bad = |m: String| Err(SandboxError::InvalidSpec(m));
        if self.command.is_empty() {
            return bad("the agent command is empty".into());
        }
        if self.wall_timeout.is_zero() {
            return bad("wall_timeout must be greater than zero".into());
        }
        let too_long = |d: &Duration| *d > MAX_TIMEOUT;
        if too_long(&self.wall_timeout)
            || too_long(&self.grace)
            || self.services.iter().any(|s| {
                s.ready.as_ref().is_some_and(|r| too_long(&r.timeout))
                    || s.guard.as_ref().is_some_and(|g| too_long(&g.timeout))
                    || s.health
                        .as_ref()
                        .is_some_and(|h| too_long(&h.timeout) || too_long(&h.interval))
            })
        {
            return bad(format!(
                "timeouts must not exceed {} s",
                MAX_TIMEOUT.as_secs()
            ));
        }
        if let Some(skeleton) = &self.skeleton {
            check_absolute("root skeleton", &skeleton.dir)?;
        }
        if !self.allowed_hosts.is_empty() && self.network != Network::Internet {
            return bad("allowed_hosts needs the internet network".into());
        }
        for (what, p) in [
            ("workspace_inside", &self.workspace_inside),
            ("home_inside", &self.home_inside),
        ] {
            check_inside_path(what, p)?;
        }
        match &self.workspace {
            Workspace::Overlay {
                lowers,
                upper,
                work,
            } => {
                if !self.namespaces {
                    return bad("an overlay workspace needs namespaces; without them use Workspace::Bind with a copy".into());
                }
                if lowers.is_empty() {
                    return bad("an overlay workspace needs at least one lower layer".into());
                }
                for p in lowers.iter().chain([upper, work]) {
                    check_absolute("overlay layer", p)?;
                }
            }
            Workspace::Bind { dir } => check_absolute("workspace dir", dir)?,
            Workspace::Copy { start, dir } => {
                check_absolute("workspace start", start)?;
                check_absolute("workspace dir", dir)?;
            }
        }
        for h in &self.hide {
            check_absolute("hidden path", h)?;
            if h == Path::new("/") {
                return bad("cannot hide /".into());
            }
        }
        for b in &self.binds {
            check_absolute("bind source", &b.host)?;
            check_inside_path("bind target", &b.inside)?;
        }
        for (k, v) in &self.env {
            check_env(k, v)?;
        }
        self.validate_services()?;
        Ok(())
    }
}

fn check_absolute(what: &str, p: &Path) -> Result<(), SandboxError> {
    if !p.is_absolute() {
        return Err(SandboxError::InvalidSpec(format!(
            "{what} {} must be an absolute path",
            p.display()
        )));
    }
    Ok(())
}

fn check_inside_path(what: &str, p: &Path) -> Result<(), SandboxError> {
    check_absolute(what, p)?;
    if p == Path::new("/") || p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(SandboxError::InvalidSpec(format!(
            "{what} {} must be an absolute path below / without '..'",
            p.display()
        )));
    }
    Ok(())
}

fn check_env(k: &str, v: &str) -> Result<(), SandboxError> {
    if k.is_empty() || k.contains('=') || k.contains('\0') || v.contains('\0') {
        return Err(SandboxError::InvalidSpec(format!(
            "invalid environment variable {k:?}"
        )));
    }
    Ok(())
}
