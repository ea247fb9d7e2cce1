//! The services of a trial, as part of its launch: the model endpoint (`__model`, for variants
//! with a `model_script`) first, then the suite's `[[services]]`, each with its private state
//! folder, ready probe and guard; and the binds that make their programs visible inside.

use std::path::{Path, PathBuf};
use std::time::Duration;

use proctor_sandbox::{Bind, CommandProbe, HttpGuard, HttpProbe, ServiceRoot, ServiceSpec};
use proctor_suite::model::Service;

use crate::gateway::Seat;
use crate::trial::context::{RunContext, Trial};
use crate::trial::env::service_env;
use crate::trial::error::{Stage, TrialError};
use crate::trial::paths::TrialPaths;

/// The model endpoint of a trial, on its own loopback: `proctor mock-model` serving a variant's
/// `model_script`, or a relay to the run's model gateway.
#[derive(Debug)]
pub enum ModelEndpoint {
    /// Scripted turns.
    Mock {
        /// The model script.
        script: PathBuf,
        /// The port it listens on.
        port: u16,
    },
    /// A real model through the run's gateway.
    Gateway {
        /// The port the relay listens on.
        port: u16,
        /// The trial's seat in the gateway: its token and granted model.
        seat: Seat,
    },
}

impl ModelEndpoint {
    /// The endpoint a trial gets: the mock for a variant with a `model_script`, a gateway seat
    /// for a variant whose model the run's gateway serves, else `None`. A free port is picked.
    pub fn pick(
        ctx: &RunContext,
        trial: &Trial,
        paths: &TrialPaths,
    ) -> Result<Option<ModelEndpoint>, TrialError> {
        let port = || {
            crate::model::free_port().map_err(|e| {
                TrialError::harness(
                    Stage::Launch,
                    format!("cannot pick a port for the model: {e}"),
                )
            })
        };
        if let Some(script) =
            crate::model::script_path(ctx.suite, trial.variant, &trial.planned.task)
        {
            return Ok(Some(ModelEndpoint::Mock {
                script,
                port: port()?,
            }));
        }
        let Some(gw) = &ctx.gateway else {
            return Ok(None);
        };
        let Some(model) = gw.model_of(trial.variant.id.get_ref()) else {
            return Ok(None);
        };
        let limits = &trial.settings.limits;
        let seat = gw
            .seat(ctx.suite, trial.task, model, limits, &paths.trial_dir)
            .map_err(|e| TrialError::harness(Stage::Launch, e))?;
        Ok(Some(ModelEndpoint::Gateway {
            port: port()?,
            seat,
        }))
    }

    /// The port the agent reaches the model at.
    pub fn port(&self) -> u16 {
        match self {
            ModelEndpoint::Mock { port, .. } | ModelEndpoint::Gateway { port, .. } => *port,
        }
    }

    /// The base URL the agent reaches the model at (an origin, without `/v1`).
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port())
    }

    /// The key the agent presents: the trial's gateway token; `None` for the mock (adapters
    /// then use a dummy).
    pub fn api_key(&self) -> Option<String> {
        match self {
            ModelEndpoint::Mock { .. } => None,
            ModelEndpoint::Gateway { seat, .. } => Some(seat.token().to_string()),
        }
    }

    /// The model id the agent asks for: the granted one through the gateway.
    pub fn model_id(&self) -> Option<&str> {
        match self {
            ModelEndpoint::Mock { .. } => None,
            ModelEndpoint::Gateway { seat, .. } => Some(&seat.model.model),
        }
    }

    /// The service's name and folder name.
    pub fn service_name(&self) -> &'static str {
        match self {
            ModelEndpoint::Mock { .. } => crate::model::MODEL_SERVICE,
            ModelEndpoint::Gateway { .. } => crate::gateway::RELAY_SERVICE,
        }
    }
}

/// Every service of the trial, in start order: the model endpoint, then the suite's services
/// (which get `agent_env`'s `PATH` and `LANG`); and, inside an image, the binds they need (the
/// suite's folder, which the agent's view hides as on the host, and host programs).
pub fn services(
    ctx: &RunContext,
    trial: &Trial,
    paths: &TrialPaths,
    model: Option<&ModelEndpoint>,
    agent_env: &[(String, String)],
) -> Result<(Vec<ServiceSpec>, Vec<Bind>), TrialError> {
    let image = ctx.image(&trial.planned.task).map(|img| img.as_ref());
    let suite_root = ctx
        .suite
        .root
        .canonicalize()
        .unwrap_or_else(|_| ctx.suite.root.clone());
    let mut binds = Vec::new();
    let mut services = Vec::new();
    if let Some(model) = model {
        let name = model.service_name();
        let dir = paths.services().join(name);
        std::fs::create_dir_all(&dir).map_err(|e| {
            TrialError::harness(
                Stage::Launch,
                format!("cannot create the model's folder: {e}"),
            )
        })?;
        let log = paths.service_log(name);
        let mut spec = match model {
            ModelEndpoint::Mock { script, port } => crate::model::service(
                crate::model::MockModel {
                    proctor: &ctx.proctor_exe,
                    script: &script.canonicalize().unwrap_or_else(|_| script.clone()),
                    port: *port,
                    seed: trial.planned.seed,
                },
                trial.task,
                &suite_root,
                dir,
                log,
            ),
            ModelEndpoint::Gateway { port, seat } => relay_service(
                &paths.proctor.inside,
                &gateway_socket_inside(paths, seat),
                *port,
                dir,
                log,
            ),
        };
        // Inside an image, proctor runs through the host's loader and libraries.
        if ctx.image(&trial.planned.task).is_some() {
            let mut argv = ctx.proctor_command(&trial.planned.task, &paths.proctor.inside);
            argv.extend(spec.argv.drain(1..));
            spec.argv = argv;
        }
        services.push(spec);
    }
    let mut sidecars = Vec::new();
    for s in ctx.suite.services(trial.task) {
        let (spec, carried) = match s.is_sidecar() {
            true => sidecar_service(s, image, paths).map(|spec| (spec, Vec::new())),
            false => suite_service(ctx, s, image, paths, agent_env),
        }
        .map_err(|e| TrialError::harness(Stage::Launch, e))?;
        if spec.root.is_some() {
            sidecars.push(spec.name.clone());
        }
        services.push(spec);
        binds.extend(carried);
    }
    if !sidecars.is_empty() {
        binds.push(hosts_bind(paths, &sidecars)?);
    }
    if image.is_some() && paths.namespaces && !services.is_empty() {
        binds.push(Bind {
            host: suite_root.clone(),
            inside: suite_root,
            read_only: true,
        });
    }
    Ok((services, binds))
}

/// Where the trial's own gateway socket is seen from inside the trial: bound at a fixed path
/// `/run/proctor`, or without namespaces the host path itself.
pub fn gateway_socket_inside(paths: &TrialPaths, seat: &Seat) -> PathBuf {
    if paths.namespaces {
        PathBuf::from(crate::gateway::SOCKET_INSIDE)
    } else {
        seat.socket().to_path_buf()
    }
}

/// The relay to the run's gateway: `proctor __model-relay ADDR SOCKET`, ready when the gateway answers its
/// health path through it.
fn relay_service(
    proctor: &Path,
    socket: &Path,
    port: u16,
    dir_host: PathBuf,
    log: PathBuf,
) -> ServiceSpec {
    ServiceSpec {
        name: crate::gateway::RELAY_SERVICE.into(),
        argv: vec![
            proctor.display().to_string(),
            "__model-relay".into(),
            format!("127.0.0.1:{port}"),
            socket.display().to_string(),
        ],
        cwd: PathBuf::from("/"),
        env: vec![("PATH".into(), crate::trial::env::DEFAULT_PATH.into())],
        dir_host,
        log,
        ready: Some(HttpProbe {
            url: format!(
                "http://127.0.0.1:{port}{}",
                proctor_gateway::gateway::HEALTH_PATH
            ),
            timeout: Duration::from_secs(10),
        }),
        guard: None,
        state: None,
        root: None,
        health: None,
        own_network: false,
    }
}

/// One suite service: its program found (a path in the suite, or a name on the search path;
/// inside an image, a name on the image's `PATH`, else a host program carried in), its folder
/// created, its probes; and the binds a carried host program needs.
pub(crate) fn suite_service(
    ctx: &RunContext,
    s: &Service,
    image: Option<&crate::image::TrialImage>,
    paths: &TrialPaths,
    agent_env: &[(String, String)],
) -> Result<(ServiceSpec, Vec<Bind>), String> {
    let name = s.name.get_ref().clone();
    let mut argv = s.command.get_ref().clone();
    let Some(prog) = argv.first().cloned() else {
        return Err(format!("service `{name}` has an empty command"));
    };
    let mut carried = Vec::new();
    // The suite's canonical path: inside an image, the suite is bound there.
    let root = ctx
        .suite
        .root
        .canonicalize()
        .unwrap_or_else(|_| ctx.suite.root.clone());
    if prog.contains('/') {
        argv[0] = root.join(&prog).display().to_string();
    } else if image.is_some_and(|img| img.finds(&prog)) {
        // Left bare: the sandbox finds it on the image's PATH.
    } else {
        let real = crate::allow::which(&prog, &ctx.search_path).ok_or_else(|| {
            format!("service `{name}`: `{prog}` was not found on PATH or beside proctor")
        })?;
        match image {
            Some(img) if paths.namespaces => {
                let program = ctx.host_program(&real, &[], img).map_err(|e| {
                    format!("service `{name}`: `{prog}` is not in the image, and the host's {e}")
                })?;
                argv.splice(0..1, program.argv.iter().cloned());
                carried = program.binds.clone();
            }
            _ => argv[0] = real.display().to_string(),
        }
    }
    let dir_host = paths.services().join(&name);
    std::fs::create_dir_all(&dir_host).map_err(|e| format!("service `{name}`: {e}"))?;
    let (ready, guard, health) = probes(s);
    let spec = ServiceSpec {
        argv,
        cwd: root,
        env: service_env(agent_env, &s.env),
        dir_host,
        log: paths.service_log(&name),
        ready,
        guard,
        state: s.state.as_ref().map(|f| PathBuf::from(f.get_ref())),
        root: None,
        health,
        own_network: ctx
            .suite
            .file
            .mcp_servers
            .iter()
            .any(|m| m.served_by(&name)),
        name,
    };
    Ok((spec, carried))
}

/// A service's probes: its `ready` URL, its `guard` and its `healthcheck` command.
fn probes(s: &Service) -> (Option<HttpProbe>, Option<HttpGuard>, Option<CommandProbe>) {
    let ready = s.ready.as_ref().map(|r| HttpProbe {
        url: r.http.get_ref().clone(),
        timeout: Duration::from_secs(r.timeout_seconds),
    });
    let guard = s
        .guard
        .as_ref()
        .map(|g| HttpGuard::new(g.http.get_ref().clone(), g.expect.clone()));
    let health = s.healthcheck.as_ref().map(|h| CommandProbe {
        argv: h.command.get_ref().clone(),
        timeout: Duration::from_secs(h.timeout_seconds),
        interval: Duration::from_secs(h.interval_seconds),
    });
    (ready, guard, health)
}

/// A sidecar service (one with an `image`): its image's root of its own, its argv (the
/// image's `Entrypoint`, then the service's `command` or else the image's `Cmd`), the image's
/// environment with the service's `env` over it, its working folder; nothing of the agent's.
fn sidecar_service(
    s: &Service,
    image: Option<&crate::image::TrialImage>,
    paths: &TrialPaths,
) -> Result<ServiceSpec, String> {
    let name = s.name.get_ref().clone();
    if !paths.namespaces {
        return Err(format!(
            "service `{name}` runs in an image of its own (a sidecar), which needs namespaces"
        ));
    }
    let own = image
        .and_then(|img| img.sidecars.get(&name))
        .ok_or_else(|| {
            format!("service `{name}`: its image was not pulled (the task runs in no image?)")
        })?;
    let command = s.command.get_ref();
    let mut argv = own.entrypoint.clone();
    let rest = if command.is_empty() {
        &own.cmd
    } else {
        command
    };
    argv.extend(rest.iter().cloned());
    if argv.is_empty() {
        return Err(format!(
            "service `{name}`: its image `{}` has no Entrypoint or Cmd, and the service gives no `command`",
            own.reference
        ));
    }
    let mut env = own.env.clone();
    if !env.iter().any(|(k, _)| k == "PATH") {
        env.push(("PATH".into(), crate::trial::env::DEFAULT_PATH.into()));
    }
    env.extend(s.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    let cwd = s
        .workdir
        .as_ref()
        .map(|w| w.get_ref().clone())
        .or_else(|| own.working_dir.clone().filter(|w| w.starts_with('/')))
        .unwrap_or_else(|| "/".into());
    let dir_host = paths.services().join(&name);
    std::fs::create_dir_all(&dir_host).map_err(|e| format!("service `{name}`: {e}"))?;
    let (ready, guard, health) = probes(s);
    Ok(ServiceSpec {
        argv,
        cwd: PathBuf::from(cwd),
        env,
        dir_host,
        log: paths.service_log(&name),
        ready,
        guard,
        state: None,
        root: Some(ServiceRoot {
            rootfs: own.rootfs.clone(),
        }),
        health,
        own_network: false,
        name,
    })
}

/// The trial's `/etc/hosts`, shown read-only to the main container and every sidecar: each
/// sidecar's name is `127.0.0.1`, since they all share the trial's network namespace (as a
/// pod's containers do).
fn hosts_bind(paths: &TrialPaths, sidecars: &[String]) -> Result<Bind, TrialError> {
    let file = paths.work.join("hosts");
    let text = format!(
        "127.0.0.1\tlocalhost {}\n::1\tlocalhost ip6-localhost ip6-loopback\n",
        sidecars.join(" ")
    );
    std::fs::write(&file, text).map_err(|e| {
        TrialError::harness(
            Stage::Launch,
            format!("cannot write the trial's hosts file: {e}"),
        )
    })?;
    Ok(Bind {
        host: file,
        inside: PathBuf::from("/etc/hosts"),
        read_only: true,
    })
}

/// Service programs (and proctor itself, which serves the model) that live outside the host's
/// system folders (under a folder the sandbox makes private, `/tmp`, `/run`, `/home`, or one the
/// root does not show, see [`proctor_sandbox::view`]) would be invisible inside: a read-only
/// bind of each at its own path, unless `binds` already has one there.
pub fn program_binds(services: &[ServiceSpec], binds: &[Bind]) -> Vec<Bind> {
    let mut out: Vec<Bind> = Vec::new();
    for s in services {
        let Some(prog) = s.argv.first().map(PathBuf::from) else {
            continue;
        };
        let system = prog.components().nth(1).is_some_and(|c| {
            proctor_sandbox::view::SYSTEM_TOP
                .iter()
                .any(|t| c.as_os_str() == *t)
        });
        let bound = binds
            .iter()
            .chain(&out)
            .any(|b| b.inside == prog || (b.host == b.inside && prog.starts_with(&b.inside)));
        if !system && prog.is_absolute() && !bound {
            out.push(Bind {
                host: prog.clone(),
                inside: prog,
                read_only: true,
            });
        }
    }
    out
}

/// The real agents' folder, bound read-only at its own path (real agent CLIs only).
pub fn agents_dir_bind(agents: &Path) -> Bind {
    Bind {
        host: agents.to_path_buf(),
        inside: agents.to_path_buf(),
        read_only: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, prog: &str) -> ServiceSpec {
        ServiceSpec {
            name: name.into(),
            argv: vec![prog.into(), "--flag".into()],
            cwd: PathBuf::from("/"),
            env: Vec::new(),
            dir_host: PathBuf::from("/scratch/services").join(name),
            log: PathBuf::from("/scratch/services").join(format!("{name}.log")),
            ready: None,
            guard: None,
            state: None,
            root: None,
            health: None,
            own_network: false,
        }
    }

    #[test]
    fn only_programs_outside_the_system_folders_are_bound_and_each_once() {
        let services = [
            spec("a", "/tmp/build/chat-mock"),
            spec("b", "/usr/bin/python3"),
            spec("c", "/home/me/bin/api"),
            spec("d", "/tmp/build/chat-mock"),
            spec("e", "relative/prog"),
            spec("f", "/work/target/debug/chat-mock"),
            spec("g", "/home/me/bin/other"),
        ];
        let existing = [Bind {
            host: PathBuf::from("/home/me/bin/api"),
            inside: PathBuf::from("/home/me/bin/api"),
            read_only: true,
        }];
        let binds = program_binds(&services, &existing);
        let inside: Vec<&Path> = binds.iter().map(|b| b.inside.as_path()).collect();
        assert_eq!(
            inside,
            [
                Path::new("/tmp/build/chat-mock"),
                Path::new("/work/target/debug/chat-mock"),
                Path::new("/home/me/bin/other")
            ]
        );
        assert!(binds.iter().all(|b| b.read_only && b.host == b.inside));
    }

    /// A trial image whose sidecar `web` runs an image with `entrypoint` and `cmd`.
    fn with_sidecar(entrypoint: &[&str], cmd: &[&str]) -> crate::image::TrialImage {
        let own = crate::image::SidecarImage {
            reference: "busybox".into(),
            digest: "sha256:0f".into(),
            rootfs: PathBuf::from("/cache/images/0f/rootfs"),
            working_dir: Some("/srv".into()),
            env: vec![
                ("PATH".into(), "/bin".into()),
                ("MODE".into(), "image".into()),
            ],
            entrypoint: entrypoint.iter().map(|a| a.to_string()).collect(),
            cmd: cmd.iter().map(|a| a.to_string()).collect(),
        };
        crate::image::TrialImage {
            reference: "busybox".into(),
            digest: "sha256:0e".into(),
            rootfs: PathBuf::from("/cache/images/0e/rootfs"),
            workdir: PathBuf::from("/app"),
            env: Vec::new(),
            sidecars: [("web".to_string(), own)].into(),
            note: None,
        }
    }

    fn service(toml_text: &str) -> Service {
        toml::from_str(toml_text).expect("a service")
    }

    #[test]
    fn a_sidecar_starts_as_compose_starts_it_in_its_own_root_with_its_own_variables() {
        let dir = tempfile::tempdir().unwrap();
        let paths = TrialPaths::new(
            true,
            Path::new("/usr/bin/proctor"),
            dir.path().join("trial"),
            dir.path().join("work"),
            dir.path().join("calls.sock"),
        );
        // No command: the image's Entrypoint, then its Cmd.
        let img = with_sidecar(&["/entry.sh"], &["httpd", "-f"]);
        let s = service("name = \"web\"\nimage = \"busybox\"\nenv = { MODE = \"mine\" }\n");
        let spec = sidecar_service(&s, Some(&img), &paths).unwrap();
        assert_eq!(spec.argv, ["/entry.sh", "httpd", "-f"]);
        assert_eq!(spec.cwd, Path::new("/srv"));
        assert_eq!(
            spec.root.as_ref().map(|r| r.rootfs.as_path()),
            Some(Path::new("/cache/images/0f/rootfs"))
        );
        // The service's variables over the image's, and nothing of the agent's.
        let mode: Vec<&str> = spec
            .env
            .iter()
            .filter(|(k, _)| k == "MODE")
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(mode.last(), Some(&"mine"));
        // A command replaces the Cmd, the Entrypoint stays; a workdir wins.
        let s = service("name = \"web\"\nimage = \"busybox\"\ncommand = [\"sh\", \"-c\", \"x\"]\nworkdir = \"/data\"\nhealthcheck = { command = [\"true\"], timeout_seconds = 7 }\n");
        let spec = sidecar_service(&s, Some(&img), &paths).unwrap();
        assert_eq!(spec.argv, ["/entry.sh", "sh", "-c", "x"]);
        assert_eq!(spec.cwd, Path::new("/data"));
        let health = spec.health.unwrap();
        assert_eq!(health.argv, ["true"]);
        assert_eq!(health.timeout, Duration::from_secs(7));
        // Nothing to start, no image pulled, no namespaces: each refused with the reason.
        let bare = with_sidecar(&[], &[]);
        let s = service("name = \"web\"\nimage = \"busybox\"\n");
        let e = sidecar_service(&s, Some(&bare), &paths).unwrap_err();
        assert!(e.contains("has no Entrypoint or Cmd"), "{e}");
        let e = sidecar_service(&s, None, &paths).unwrap_err();
        assert!(e.contains("its image was not pulled"), "{e}");
        let mut host = paths.clone();
        host.namespaces = false;
        let e = sidecar_service(&s, Some(&img), &host).unwrap_err();
        assert!(e.contains("needs namespaces"), "{e}");
    }

    #[test]
    fn the_model_endpoint_is_on_the_trials_loopback() {
        let m = ModelEndpoint::Mock {
            script: PathBuf::from("agents/model.toml"),
            port: 7171,
        };
        assert_eq!(m.base_url(), "http://127.0.0.1:7171");
        assert_eq!(m.api_key(), None, "the mock takes the adapter's dummy key");
        assert_eq!(m.service_name(), crate::model::MODEL_SERVICE);
    }

    #[test]
    fn the_relay_runs_proctor_on_the_trials_loopback_and_probes_the_gateways_health() {
        let s = relay_service(
            Path::new("/run/proctor/bin/proctor"),
            Path::new("/run/proctor/model.sock"),
            7272,
            PathBuf::from("/w/services/__model_relay"),
            PathBuf::from("/w/services/__model_relay.log"),
        );
        assert_eq!(
            s.argv,
            [
                "/run/proctor/bin/proctor",
                "__model-relay",
                "127.0.0.1:7272",
                "/run/proctor/model.sock"
            ]
        );
        assert_eq!(
            s.ready.unwrap().url,
            "http://127.0.0.1:7272/__proctor/health"
        );
        assert!(
            s.env.iter().all(|(k, _)| k == "PATH"),
            "no secret in its environment"
        );
    }
}
