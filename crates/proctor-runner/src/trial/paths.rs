//! Every path of one trial, each in its host form and in the form the agent sees inside the
//! sandbox, and the binds that join the two. Without namespaces the agent runs on the host, so
//! both forms are the host path.

use std::path::{Path, PathBuf};

use proctor_sandbox::Bind;

use crate::allow::Allowed;

/// Where the workspace appears inside the sandbox.
pub const WORKSPACE_INSIDE: &str = "/workspace";
/// The agent's private HOME inside the sandbox.
pub const HOME_INSIDE: &str = "/home/agent";
/// proctor's own folder inside the sandbox: its binary, the shims, the calls socket, the
/// adapter's launch files and the real allowed programs.
pub const RUN_INSIDE: &str = "/run/proctor";

/// One path as the host sees it and as the sandbox shows it to the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The host path.
    pub host: PathBuf,
    /// The same thing inside the sandbox (the host path when there are no namespaces).
    pub inside: PathBuf,
}

/// The calls log's file in a trial's folder.
pub const CALLS_LOG: &str = "calls.jsonl";

/// Every path of one trial: its evidence folder, its scratch folder and what lives there, and
/// how each appears inside the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrialPaths {
    /// Whether the trial runs in namespaces; without them every inside form is the host path.
    pub namespaces: bool,
    /// The trial's folder in the store: its evidence.
    pub trial_dir: PathBuf,
    /// The trial's scratch folder, removed when the trial ends: never evidence.
    pub work: PathBuf,
    /// The proctor binary (the sandbox init, the shims' logger, the scripted agent).
    pub proctor: Place,
    /// The socket the shims reach (kept outside `work`: Unix socket paths are short). With
    /// namespaces, the trial's own call runner, made by the trial init at the host path (next
    /// to the calls log's socket) and bound at `/run/proctor/calls.sock`; without, the calls
    /// log's socket itself.
    pub socket: Place,
    /// The calls log's socket (the server that writes `calls.jsonl`): with namespaces only the
    /// trial's call runner reaches it, never the agent.
    pub log_socket: PathBuf,
    /// The shims, one per allowed command.
    pub shims: Place,
    /// The adapter's launch files.
    pub agent: Place,
    /// Where the workspace is inside the sandbox: `/workspace`, or an image's working directory.
    pub workspace_dir: PathBuf,
}

impl TrialPaths {
    /// The paths of a trial whose evidence goes in `trial_dir`, whose scratch is `work` and
    /// whose calls-log socket is `socket` (with namespaces the trial's call runner listens
    /// beside it, at the same name with the extension `call`).
    pub fn new(
        namespaces: bool,
        proctor_exe: &Path,
        trial_dir: PathBuf,
        work: PathBuf,
        socket: PathBuf,
    ) -> TrialPaths {
        let place = |host: PathBuf, inner: &str| Place {
            inside: if namespaces {
                PathBuf::from(format!("{RUN_INSIDE}/{inner}"))
            } else {
                host.clone()
            },
            host,
        };
        TrialPaths {
            namespaces,
            proctor: place(proctor_exe.to_path_buf(), "bin/proctor"),
            socket: if namespaces {
                place(socket.with_extension("call"), "calls.sock")
            } else {
                place(socket.clone(), "calls.sock")
            },
            log_socket: socket,
            shims: place(work.join("shims"), "shims"),
            agent: place(work.join("agent"), "agent"),
            workspace_dir: PathBuf::from(WORKSPACE_INSIDE),
            trial_dir,
            work,
        }
    }

    /// The same paths with the workspace at `dir` inside the sandbox (an image's working
    /// directory).
    pub fn in_workdir(mut self, dir: &Path) -> TrialPaths {
        self.workspace_dir = dir.to_path_buf();
        self
    }

    /// The workspace as the agent sees it, its working directory: `/workspace`, or without
    /// namespaces the copy itself.
    pub fn workspace_inside(&self) -> PathBuf {
        if self.namespaces {
            self.workspace_dir.clone()
        } else {
            self.copy()
        }
    }

    /// The agent's HOME as it sees it: a fresh tmpfs at `/home/agent`, or without namespaces a
    /// folder in the scratch.
    pub fn home(&self) -> PathBuf {
        if self.namespaces {
            PathBuf::from(HOME_INSIDE)
        } else {
            self.work.join("home")
        }
    }

    /// The agent's TMPDIR when it is not the sandbox's private `/tmp`: without namespaces, a
    /// folder in the scratch.
    pub fn tmp(&self) -> Option<PathBuf> {
        (!self.namespaces).then(|| self.work.join("tmp"))
    }

    /// The overlay's upper layer: after the run it holds exactly the agent's changes.
    pub fn upper(&self) -> PathBuf {
        self.work.join("upper")
    }

    /// The overlay's work folder.
    pub fn overlay_work(&self) -> PathBuf {
        self.work.join("ovwork")
    }

    /// In an image: the trial's own upper layer of the root (writes outside the workspace).
    pub fn root_upper(&self) -> PathBuf {
        self.work.join("root-upper")
    }

    /// In an image: the root overlay's work folder.
    pub fn root_work(&self) -> PathBuf {
        self.work.join("root-work")
    }

    /// Copy mode: the copy of the start state the agent works in.
    pub fn copy(&self) -> PathBuf {
        self.work.join("ws")
    }

    /// The services' folders (each service's private state folder is `services()/NAME`).
    pub fn services(&self) -> PathBuf {
        self.work.join("services")
    }

    /// Where a service's output goes while the trial runs.
    pub fn service_log(&self, name: &str) -> PathBuf {
        self.services().join(format!("{name}.log"))
    }

    /// The agent's stdout.
    pub fn stdout(&self) -> PathBuf {
        self.work.join("agent.stdout")
    }

    /// The agent's stderr.
    pub fn stderr(&self) -> PathBuf {
        self.work.join("agent.stderr")
    }

    /// The calls log, written only by proctor's log server.
    pub fn calls_log(&self) -> PathBuf {
        self.trial_dir.join(CALLS_LOG)
    }

    /// Where the real program behind an allowed command is reached from its shim.
    pub fn allowed_inside(&self, allowed: &Allowed) -> PathBuf {
        if self.namespaces {
            PathBuf::from(format!("{RUN_INSIDE}/allow/{}", allowed.name))
        } else {
            allowed.real.clone()
        }
    }

    /// The binds that make these paths visible inside the sandbox: the real allowed programs,
    /// then proctor, the calls socket, the shims and the launch files. None without namespaces.
    pub fn binds(&self, allowed: &[Allowed]) -> Vec<Bind> {
        if !self.namespaces {
            return Vec::new();
        }
        let mut binds: Vec<Bind> = allowed
            .iter()
            .map(|a| Bind {
                host: a.real.clone(),
                inside: self.allowed_inside(a),
                read_only: true,
            })
            .collect();
        for (place, read_only) in [
            (&self.proctor, true),
            (&self.socket, false),
            (&self.shims, true),
            (&self.agent, true),
        ] {
            binds.push(Bind {
                host: place.host.clone(),
                inside: place.inside.clone(),
                read_only,
            });
        }
        binds
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(namespaces: bool) -> TrialPaths {
        TrialPaths::new(
            namespaces,
            Path::new("/opt/proctor"),
            PathBuf::from("/store/runs/r/trials/t.v.0"),
            PathBuf::from("/scratch/t.v.0"),
            PathBuf::from("/sockets/7.sock"),
        )
    }

    fn allowed() -> Vec<Allowed> {
        vec![Allowed {
            name: "chat".into(),
            real: PathBuf::from("/usr/bin/chat"),
        }]
    }

    #[test]
    fn with_namespaces_the_agent_sees_fixed_paths_under_run_proctor() {
        let p = paths(true);
        assert_eq!(p.proctor.inside, Path::new("/run/proctor/bin/proctor"));
        assert_eq!(p.proctor.host, Path::new("/opt/proctor"));
        assert_eq!(p.socket.inside, Path::new("/run/proctor/calls.sock"));
        // The shims reach the trial's call runner; the calls log's own socket is not bound.
        assert_eq!(p.socket.host, Path::new("/sockets/7.call"));
        assert_eq!(p.log_socket, Path::new("/sockets/7.sock"));
        assert_eq!(p.shims.inside, Path::new("/run/proctor/shims"));
        assert_eq!(p.shims.host, Path::new("/scratch/t.v.0/shims"));
        assert_eq!(p.agent.inside, Path::new("/run/proctor/agent"));
        assert_eq!(p.workspace_inside(), Path::new("/workspace"));
        assert_eq!(p.home(), Path::new("/home/agent"));
        assert_eq!(p.tmp(), None);
        assert_eq!(
            p.allowed_inside(&allowed()[0]),
            Path::new("/run/proctor/allow/chat")
        );
    }

    #[test]
    fn without_namespaces_every_path_is_the_host_path() {
        let p = paths(false);
        for place in [&p.proctor, &p.socket, &p.shims, &p.agent] {
            assert_eq!(place.inside, place.host);
        }
        assert_eq!(p.workspace_inside(), Path::new("/scratch/t.v.0/ws"));
        assert_eq!(p.home(), Path::new("/scratch/t.v.0/home"));
        assert_eq!(p.tmp(), Some(PathBuf::from("/scratch/t.v.0/tmp")));
        assert_eq!(p.allowed_inside(&allowed()[0]), Path::new("/usr/bin/chat"));
        assert!(p.binds(&allowed()).is_empty());
    }

    #[test]
    fn the_binds_are_the_allowed_programs_then_proctors_own_paths() {
        let binds = paths(true).binds(&allowed());
        let seen: Vec<(&str, &str, bool)> = binds
            .iter()
            .map(|b| {
                (
                    b.host.to_str().unwrap(),
                    b.inside.to_str().unwrap(),
                    b.read_only,
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("/usr/bin/chat", "/run/proctor/allow/chat", true),
                ("/opt/proctor", "/run/proctor/bin/proctor", true),
                ("/sockets/7.call", "/run/proctor/calls.sock", false),
                ("/scratch/t.v.0/shims", "/run/proctor/shims", true),
                ("/scratch/t.v.0/agent", "/run/proctor/agent", true),
            ]
        );
    }

    #[test]
    fn scratch_and_evidence_paths_are_where_the_store_expects_them() {
        let p = paths(true);
        assert_eq!(
            p.calls_log(),
            Path::new("/store/runs/r/trials/t.v.0/calls.jsonl")
        );
        assert_eq!(p.upper(), Path::new("/scratch/t.v.0/upper"));
        assert_eq!(p.overlay_work(), Path::new("/scratch/t.v.0/ovwork"));
        assert_eq!(p.copy(), Path::new("/scratch/t.v.0/ws"));
        assert_eq!(
            p.service_log("api"),
            Path::new("/scratch/t.v.0/services/api.log")
        );
        assert_eq!(p.stdout(), Path::new("/scratch/t.v.0/agent.stdout"));
        assert_eq!(p.stderr(), Path::new("/scratch/t.v.0/agent.stderr"));
    }
}
