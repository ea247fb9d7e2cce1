//! Reading one Harbor task folder: `task.toml`, `instruction.md`, `environment/`, `tests/`,
//! `solution/`.

use std::collections::BTreeMap;
use std::path::Path;

use toml::Value;

use crate::fields::{unknown_field, unknown_toml_keys, HARBOR_TASK_TOML};
use crate::files;
use crate::harbor_values::{literal_env, seconds};
use crate::image::{self, Build, DockerBuild, ImageSource};
use crate::model::SidecarPlan;
use crate::model::{Net, Networks, OraclePlan, Read, Resources, TaskPlan, Verdict, VerifierPlan};
use crate::scan;
use crate::settings;

/// Harbor's verifier timeout when `[verifier] timeout_sec` is absent.
const HARBOR_VERIFIER_TIMEOUT: u64 = 600;

/// Reads the Harbor task in `dir` as task `id`.
pub(crate) fn read(dir: &Path, id: &str) -> Read {
    let mut warnings = Vec::new();
    let outcome = plan(dir, id, &mut warnings).map(Box::new);
    Read { outcome, warnings }
}

/// The plan for the Harbor task in `dir`, or why it is skipped; what is not carried over
/// exactly is reported in `w`. Every part is read even when an earlier one skips the task, so
/// that a skipped task's other warnings (no solution, fetching tests) are reported too; the
/// first reason is the task's, the others are warnings.
fn plan(dir: &Path, id: &str, w: &mut Vec<String>) -> Result<TaskPlan, String> {
    let table = load_task_toml(dir, w)?;
    let empty = toml::Table::new();
    let s = Sections::of(&table, &empty);
    let unsupported = refuse_unsupported(s.environment);
    let steps = table
        .contains_key("steps")
        .then(|| crate::harbor_steps::read(dir, &table, w))
        .transpose();
    let prompt = match &steps {
        Ok(Some(st)) => Ok(st.steps[0].prompt.clone()),
        _ => read_prompt(dir),
    };
    let image = task_image(dir, s.environment);
    let sidecars = task_sidecars(dir, w);
    let mcp_servers = mcp_servers(s.environment).and_then(|m| match &sidecars {
        Ok(c) => served_by_sidecars(&m, c).map(|()| m),
        Err(_) => Ok(m),
    });
    let workdir = s
        .environment
        .get("workdir")
        .and_then(Value::as_str)
        .map(str::to_string);
    let env = literal_env(s.environment.get("env"), "environment", w);
    let resources = resources(s.environment, w);
    report_unsupported(&table, &s, w);
    let network = networks(&s, w);
    let (wall_timeout, validation_timeout) = timeouts(&s, w);
    let checks_offline = network.as_ref().map_or(true, |n| n.checks == Net::None);
    let verifier = match &steps {
        Ok(Some(_)) => Ok(steps_verifier()),
        _ => verifier_plan(dir, s.verifier, checks_offline, w),
    };
    let agent_offline = network.as_ref().map_or(true, |n| n.agent == Net::None);
    let oracle = oracle_plan(dir, s.solution, agent_offline, w);
    let mut comments = about(&s);
    let (prompt, image, network, verifier, sidecars, steps, mcp_servers) = match (
        unsupported,
        prompt,
        image,
        network,
        verifier,
        sidecars,
        steps,
        mcp_servers,
    ) {
        (Ok(()), Ok(p), Ok(i), Ok(n), Ok(v), Ok(c), Ok(st), Ok(m)) => (p, i, n, v, c, st, m),
        (u, p, i, n, v, c, st, m) => {
            let u = u.err().or(st.err());
            return Err(crate::model::skip_reason(
                [u, p.err(), i.err(), n.err(), v.err(), c.err(), m.err()],
                w,
            ));
        }
    };
    let fallback_build = fallback_build(dir, &image);
    if let (Some(b), ImageSource::Reference(r)) = (&fallback_build, &image) {
        comments.push(format!(
            "image {r} is prebuilt; {} is kept as environments/{id}/, and the image is built from it when {r} cannot be pulled (or with --build)",
            b.shown_dockerfile
        ));
    }
    Ok(TaskPlan {
        source: dir.to_path_buf(),
        id: id.to_string(),
        prompt,
        image,
        fallback_build,
        build_timeout: Some(build_timeout(s.environment, w)),
        workdir,
        env,
        wall_timeout,
        validation_timeout,
        network,
        difficulty: s
            .metadata
            .get("difficulty")
            .and_then(Value::as_str)
            .map(str::to_string),
        resources,
        comments,
        metadata: crate::metadata::harbor(s.task, s.metadata),
        descriptions: Vec::new(),
        verifier,
        oracle,
        sidecars,
        steps,
        mcp_servers,
    })
}

/// The task's `[[environment.mcp_servers]]`, as Harbor's `MCPServerConfig` has them (`name`;
/// `transport`, default `"sse"`; `url` for `sse` and `streamable-http`; `command` and `args`
/// for `stdio`): each stdio server carried with its argv, each streamable-HTTP server with its
/// URL, its transport and the container that serves it.
fn mcp_servers(env: &toml::Table) -> Result<Vec<crate::model::McpPlan>, String> {
    let Some(list) = env.get("mcp_servers") else {
        return Ok(Vec::new());
    };
    let list = list
        .as_array()
        .ok_or("[environment] mcp_servers is not a list of tables")?;
    let mut out = Vec::new();
    for (i, server) in list.iter().enumerate() {
        let t = server
            .as_table()
            .ok_or(format!("[environment] mcp_servers[{i}] is not a table"))?;
        let name = t
            .get("name")
            .and_then(Value::as_str)
            .ok_or(format!("[environment] mcp_servers[{i}] has no `name`"))?;
        if !proctor_suite::mcp::valid_name(name) {
            return Err(format!(
                "[environment] mcp_servers: `{name}` is not a name proctor's MCP servers can have (letters, digits, `_`, `-`)"
            ));
        }
        let transport = t.get("transport").and_then(Value::as_str).unwrap_or("sse");
        if transport != "stdio" {
            let url = t.get("url").and_then(Value::as_str).unwrap_or("no url");
            if !matches!(transport, "streamable-http" | "sse") {
                return Err(format!(
                    "[environment] mcp_servers: `{name}` is reached over {transport} ({url}), which proctor does not relay (stdio, sse and streamable-http are carried)"
                ));
            }
            out.push(crate::model::McpPlan {
                name: name.to_string(),
                transport: http_transport(name, url, transport == "sse")?,
            });
            continue;
        }
        let command = t.get("command").and_then(Value::as_str).ok_or(format!(
            "[environment] mcp_servers: stdio server `{name}` has no `command`"
        ))?;
        let mut argv = vec![command.to_string()];
        for a in t
            .get("args")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            argv.push(
                a.as_str()
                    .ok_or(format!(
                        "[environment] mcp_servers: an argument of `{name}` is not a string"
                    ))?
                    .to_string(),
            );
        }
        out.push(crate::model::McpPlan {
            name: name.to_string(),
            transport: crate::model::McpTransport::Stdio(argv),
        });
    }
    Ok(out)
}

/// A streamable-HTTP server at `url` (`http://HOST:PORT/PATH`): served by the task's
/// container `HOST`, reached on the trial's loopback, where the task's containers all listen.
fn http_transport(
    name: &str,
    url: &str,
    legacy_sse: bool,
) -> Result<crate::model::McpTransport, String> {
    let bad = || {
        format!("[environment] mcp_servers: `{name}` has url {url:?}, not http://HOST:PORT/PATH")
    };
    let rest = url.strip_prefix("http://").ok_or_else(bad)?;
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (host, port) = authority.rsplit_once(':').ok_or_else(bad)?;
    port.parse::<u16>().map_err(|_| bad())?;
    Ok(crate::model::McpTransport::Http {
        url: format!("http://127.0.0.1:{port}/{path}"),
        service: host.to_string(),
        legacy_sse,
    })
}

/// Each streamable-HTTP server's container is one of the task's sidecars (a server elsewhere
/// is not in the task, and the task without it is not the task).
fn served_by_sidecars(
    servers: &[crate::model::McpPlan],
    sidecars: &[SidecarPlan],
) -> Result<(), String> {
    for s in servers {
        if let crate::model::McpTransport::Http { service, .. } = &s.transport {
            if !sidecars.iter().any(|c| &c.name == service) {
                return Err(format!(
                    "[environment] mcp_servers: `{}` is served by `{service}`, which is none of the task's containers (proctor relays only servers the task runs)",
                    s.name
                ));
            }
        }
    }
    Ok(())
}

/// The verifier of a task in steps: each step's check is its own (see
/// [`crate::harbor_steps`]); the task has no verifier of its own.
fn steps_verifier() -> VerifierPlan {
    VerifierPlan {
        verdict: Verdict::Reward,
        files: Vec::new(),
        entry: "test.sh".to_string(),
        env: BTreeMap::new(),
        metrics: Vec::new(),
        separate: false,
    }
}

/// The tables of `task.toml` the import reads.
struct Sections<'a> {
    metadata: &'a toml::Table,
    verifier: &'a toml::Table,
    agent: &'a toml::Table,
    environment: &'a toml::Table,
    solution: &'a toml::Table,
    task: &'a toml::Table,
}

impl<'a> Sections<'a> {
    /// The sections of `table`, with `empty` standing in for each one it does not have.
    fn of(table: &'a toml::Table, empty: &'a toml::Table) -> Sections<'a> {
        let section = |name: &str| table.get(name).and_then(Value::as_table).unwrap_or(empty);
        Sections {
            metadata: section("metadata"),
            verifier: section("verifier"),
            agent: section("agent"),
            environment: section("environment"),
            solution: section("solution"),
            task: section("task"),
        }
    }
}

/// The task's `task.toml`, with the fields Harbor does not define reported.
fn load_task_toml(dir: &Path, w: &mut Vec<String>) -> Result<toml::Table, String> {
    let text = std::fs::read_to_string(dir.join("task.toml"))
        .map_err(|e| format!("cannot read task.toml: {e}"))?;
    let table: toml::Table = toml::from_str(&text)
        .map_err(|e| format!("task.toml does not parse: {}", e.message().trim()))?;
    for key in unknown_toml_keys(&table, HARBOR_TASK_TOML) {
        w.push(unknown_field("task.toml", &key));
    }
    Ok(table)
}

/// Refuses the kinds of task proctor cannot run: a Windows image.
fn refuse_unsupported(env: &toml::Table) -> Result<(), String> {
    if env.get("os").and_then(Value::as_str) == Some("windows") {
        return Err(
            "it is a Windows task ([environment] os = \"windows\"); proctor runs Linux images"
                .into(),
        );
    }
    Ok(())
}

/// The task's prompt: `instruction.md`, which must not be empty.
fn read_prompt(dir: &Path) -> Result<String, String> {
    let prompt = std::fs::read_to_string(dir.join("instruction.md"))
        .map_err(|e| format!("cannot read instruction.md: {e}"))?;
    if prompt.trim().is_empty() {
        return Err("instruction.md is empty".into());
    }
    Ok(prompt)
}

/// The sidecar containers of the task in `dir`. Harbor runs a task in Docker Compose mode only
/// for `environment/docker-compose.yaml`: the agent's container is its `main` service, and every
/// other service is a sidecar. A `docker-compose.yml`, or a file that is not a compose file (no
/// `services` mapping of containers), is the task's data.
fn task_sidecars(dir: &Path, w: &mut Vec<String>) -> Result<Vec<SidecarPlan>, String> {
    const FILE: &str = "environment/docker-compose.yaml";
    let path = dir.join(FILE);
    if !path.is_file() {
        return Ok(Vec::new());
    }
    let compose = match crate::compose::read(&path) {
        Ok(Some(c)) => c,
        Ok(None) => {
            w.push(format!("{FILE} defines no service (no `services` mapping of containers): it is the task's data"));
            return Ok(Vec::new());
        }
        Err(e) => return Err(format!("{FILE} does not parse: {e}")),
    };
    let names: Vec<&str> = compose.services.iter().map(|(n, _)| n.as_str()).collect();
    if let [only] = names[..] {
        w.push(format!("{FILE} defines one service (`{only}`): the task runs in its one image, and the compose file's other settings are not read"));
        return Ok(Vec::new());
    }
    if !names.contains(&MAIN_SERVICE) {
        return Err(format!(
            "its {FILE} starts {} containers ({}) and none is `{MAIN_SERVICE}`, the agent's container as Harbor names it",
            names.len(),
            names.join(", ")
        ));
    }
    let at = crate::compose::ComposeAt {
        task: dir,
        folder: "environment",
    };
    let sidecars = crate::compose::sidecars(&compose, MAIN_SERVICE, &at, w)?;
    w.push(format!(
        "{FILE}: {} sidecar container(s) ({}) run beside the agent's, reached by name; the `{MAIN_SERVICE}` service's own compose settings are not read, and the tests run after the sidecars have stopped",
        sidecars.len(),
        sidecars.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ")
    ));
    Ok(sidecars)
}

/// The compose service Harbor runs the agent in.
const MAIN_SERVICE: &str = "main";

/// The one image the task's main container runs, from its `[environment]` table `env`.
fn task_image(dir: &Path, env: &toml::Table) -> Result<ImageSource, String> {
    let env_dir = dir.join("environment");
    let build = env_dir.join("Dockerfile").is_file().then_some(Build {
        what: "environment/Dockerfile, and task.toml names no [environment] docker_image",
        context: "environment",
        dockerfile: "environment/Dockerfile",
    });
    image::for_task(
        dir,
        env.get("docker_image").and_then(Value::as_str),
        build,
        "it has no image: task.toml names no [environment] docker_image and there is no environment/Dockerfile",
    )
}

/// Harbor's default `build_timeout_sec`: ten minutes.
const HARBOR_BUILD_TIMEOUT: u64 = 600;

/// The task's `[environment] build_timeout_sec` in whole seconds (at least 1), else Harbor's
/// default; a value that is not a positive number is reported and the default used.
fn build_timeout(env: &toml::Table, w: &mut Vec<String>) -> u64 {
    let Some(v) = env.get("build_timeout_sec") else {
        return HARBOR_BUILD_TIMEOUT;
    };
    match seconds(v) {
        Some(s) => s,
        None => {
            w.push(format!(
                "[environment] build_timeout_sec = {v} is not a positive number of seconds; Harbor's default ({HARBOR_BUILD_TIMEOUT}) was used"
            ));
            HARBOR_BUILD_TIMEOUT
        }
    }
}

/// The task's `environment/Dockerfile` when its image is a prebuilt registry reference: what
/// the image is built from when it cannot be pulled, as Harbor builds it with `--force-build`.
fn fallback_build(dir: &Path, image: &ImageSource) -> Option<DockerBuild> {
    let dockerfile = dir.join("environment/Dockerfile");
    (matches!(image, ImageSource::Reference(_)) && dockerfile.is_file()).then(|| DockerBuild {
        context: dir.join("environment"),
        dockerfile,
        what: "environment/Dockerfile".into(),
        shown_context: "environment".into(),
        shown_dockerfile: "environment/Dockerfile".into(),
    })
}

/// The resources the `[environment]` table `env` asks for: `cpus`, and memory and storage in
/// MiB from `memory_mb` / `storage_mb` (plain numbers of MiB) or the older `memory` /
/// `storage` (sizes such as `"2G"`). A value that is not a positive number or size is reported
/// and left out.
fn resources(env: &toml::Table, w: &mut Vec<String>) -> Resources {
    let cpus = env.get("cpus").and_then(|v| {
        let c = match v {
            Value::Integer(i) => Some(*i as f64).filter(|c| *c > 0.0),
            Value::Float(f) => Some(*f).filter(|c| c.is_finite() && *c > 0.0),
            Value::String(s) => settings::cpus(s),
            _ => None,
        };
        if c.is_none() {
            w.push(format!(
                "[environment] cpus = {v} is not a positive number, not imported"
            ));
        }
        c
    });
    Resources {
        cpus,
        memory_mb: size(env, "memory_mb", "memory", w),
        storage_mb: size(env, "storage_mb", "storage", w),
    }
}

/// A size in MiB from the key `mb_key` (a number of MiB) or else `size_key` (a size string such
/// as `"2G"`) of `env`; a value that cannot be read is reported.
fn size(env: &toml::Table, mb_key: &str, size_key: &str, w: &mut Vec<String>) -> Option<u64> {
    let read = |key: &str, v: &Value, plain_is_mb: bool| {
        let mb = match v {
            Value::Integer(i) => (*i > 0).then_some(*i as u64),
            Value::Float(f) => settings::size_mb(&f.to_string(), plain_is_mb),
            Value::String(s) => settings::size_mb(s, plain_is_mb),
            _ => None,
        };
        (key.to_string(), v.to_string(), mb)
    };
    let mut found = Vec::new();
    if let Some(v) = env.get(mb_key) {
        found.push(read(mb_key, v, true));
    }
    if let Some(v) = env.get(size_key) {
        // Harbor's `memory` / `storage` strings are sizes; a bare number there means MiB too.
        found.push(read(size_key, v, true));
    }
    for (key, v, mb) in &found {
        if mb.is_none() {
            w.push(format!(
                "[environment] {key} = {v} is not a positive size (a number of MiB, or a size such as \"2G\"), not imported"
            ));
        }
    }
    let sizes: Vec<u64> = found.iter().filter_map(|(_, _, mb)| *mb).collect();
    if let [first, second] = sizes[..] {
        if first != second {
            w.push(format!(
                "[environment] {mb_key} ({first} MiB) and {size_key} ({second} MiB) disagree; {mb_key} was used"
            ));
        }
    }
    sizes.first().copied()
}

/// Reports the settings proctor has no counterpart for: accelerators, skills,
/// health checks, artifacts and users.
fn report_unsupported(table: &toml::Table, s: &Sections<'_>, w: &mut Vec<String>) {
    let env = s.environment;
    if env.get("gpus").and_then(Value::as_integer).unwrap_or(0) > 0
        || env.contains_key("gpu_types")
        || env.contains_key("tpu")
    {
        w.push("[environment] asks for GPUs or TPUs, which proctor does not provide".to_string());
    }
    for key in ["skills_dir", "healthcheck"] {
        let set = match env.get(key) {
            Some(Value::Array(a)) => !a.is_empty(),
            Some(_) => true,
            None => false,
        };
        if set {
            w.push(format!(
                "[environment] {key} has no proctor counterpart, not imported"
            ));
        }
    }
    if table
        .get("artifacts")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
    {
        w.push(
            "artifacts: proctor keeps the whole end state of the workspace, not named artifacts; not imported"
                .to_string(),
        );
    }
    for (name, t) in [("agent", s.agent), ("verifier", s.verifier)] {
        if let Some(user) = t.get("user") {
            w.push(format!(
                "[{name}] user = {user}: proctor runs the agent and the checks as the sandbox's own user; not imported"
            ));
        }
    }
}

/// A Harbor network mode (`public`, `no-network`, `allowlist`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Public,
    NoNetwork,
    Allowlist,
}

/// The phase policy a table states: its `network_mode`, else `allowlist` when it names
/// `allowed_hosts` (as Harbor reads it); `None` when it states none. A value Harbor refuses is
/// the skip reason.
fn stated_mode(t: &toml::Table, section: &str) -> Result<Option<Mode>, String> {
    match t.get("network_mode") {
        Some(Value::String(m)) => match m.as_str() {
            "public" => Ok(Some(Mode::Public)),
            "no-network" => Ok(Some(Mode::NoNetwork)),
            "allowlist" => Ok(Some(Mode::Allowlist)),
            other => Err(format!(
                "[{section}] network_mode = \"{other}\" is not one of Harbor's network modes (public, no-network, allowlist)"
            )),
        },
        Some(v) => Err(format!(
            "[{section}] network_mode = {v} is not one of Harbor's network modes (public, no-network, allowlist)"
        )),
        None => Ok(t
            .get("allowed_hosts")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
            .then_some(Mode::Allowlist)),
    }
}

/// The networks of the agent phase and the verifier phase, as Harbor resolves them: the
/// `[environment]` baseline (its `network_mode`, else `allow_internet`, whose default is `true`),
/// overridden for a phase by `[agent]` / `[verifier]` `network_mode` (or `allowed_hosts`).
/// `public` and `allowlist` become `internet` (an allowlist's hosts its `allowed_hosts`),
/// `no-network` becomes `none`.
fn networks(s: &Sections<'_>, w: &mut Vec<String>) -> Result<Networks, String> {
    let baseline = match stated_mode(s.environment, "environment")? {
        Some(m) => (m, format!("[environment] network_mode = \"{}\"", said(m))),
        None => match s.environment.get("allow_internet") {
            None => (
                Mode::Public,
                "[environment] allow_internet is not set (Harbor's default: true)".to_string(),
            ),
            Some(Value::Boolean(true)) => {
                (Mode::Public, "[environment] allow_internet = true".into())
            }
            Some(Value::Boolean(false)) => (
                Mode::NoNetwork,
                "[environment] allow_internet = false".into(),
            ),
            Some(v) => {
                return Err(format!(
                    "[environment] allow_internet = {v} is not true or false"
                ))
            }
        },
    };
    let phase = |t: &toml::Table, section: &str| -> Result<(Mode, String, Vec<String>), String> {
        let (m, why, hosts_from) = match stated_mode(t, section)? {
            Some(m) if t.contains_key("network_mode") => {
                (m, format!("[{section}] network_mode = \"{}\"", said(m)), t)
            }
            Some(m) => (m, format!("[{section}] allowed_hosts"), t),
            None => (baseline.0, baseline.1.clone(), s.environment),
        };
        let hosts = if m == Mode::Allowlist {
            host_list(hosts_from, s.environment)
        } else {
            Vec::new()
        };
        Ok((m, why, hosts))
    };
    let (agent, agent_why, agent_hosts) = phase(s.agent, "agent")?;
    let (verifier, verifier_why, verifier_hosts) = phase(s.verifier, "verifier")?;
    let net = |m: Mode| {
        if m == Mode::NoNetwork {
            Net::None
        } else {
            Net::Internet
        }
    };
    let why = if agent_why == verifier_why {
        format!("{agent_why}, for the agent and the verifier")
    } else {
        format!("agent: {agent_why}; verifier: {verifier_why}")
    };
    // proctor's allowed_hosts are the task's, for both phases: an allowlist of one phase limits
    // the other's internet too (said), and two lists are joined.
    let mut allowed_hosts = agent_hosts.clone();
    for h in &verifier_hosts {
        if !allowed_hosts.contains(h) {
            allowed_hosts.push(h.clone());
        }
    }
    let limited_public = [(agent, "agent"), (verifier, "verifier")]
        .into_iter()
        .filter(|(m, _)| *m == Mode::Public)
        .map(|(_, p)| p)
        .collect::<Vec<_>>();
    if !allowed_hosts.is_empty() && !limited_public.is_empty() {
        w.push(format!(
            "allowed_hosts {:?} ({why}): proctor's allowed_hosts hold for both phases, so the {} phase, public in Harbor, reaches only those hosts too",
            allowed_hosts,
            limited_public.join(" and ")
        ));
    }
    if agent == Mode::Allowlist && verifier == Mode::Allowlist && agent_hosts != verifier_hosts {
        w.push(format!(
            "allowed_hosts ({why}): the agent's and the verifier's lists differ; both phases reach the hosts of either"
        ));
    }
    if (agent == Mode::Allowlist || verifier == Mode::Allowlist) && allowed_hosts.is_empty() {
        w.push(format!(
            "{why}: allowlist with no host proctor can name: the phase reaches no host"
        ));
    }
    Ok(Networks {
        agent: net(agent),
        checks: net(verifier),
        why,
        allowed_hosts,
    })
}

/// How Harbor spells a network mode.
fn said(m: Mode) -> &'static str {
    match m {
        Mode::Public => "public",
        Mode::NoNetwork => "no-network",
        Mode::Allowlist => "allowlist",
    }
}

/// The hosts of an allowlist: `table`'s `allowed_hosts`, else `[environment]`'s; entries
/// proctor cannot hold as `HOST` or `*.HOST` (an address, a URL) are left out.
fn host_list(table: &toml::Table, environment: &toml::Table) -> Vec<String> {
    let list = table
        .get("allowed_hosts")
        .or_else(|| environment.get("allowed_hosts"))
        .and_then(Value::as_array);
    list.into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|h| h.trim().to_ascii_lowercase())
        .filter(|h| proctor_suite::model::host_rule_problem(h).is_none())
        .collect()
}

/// The agent's wall timeout and the verifier's timeout, in seconds.
fn timeouts(s: &Sections<'_>, w: &mut Vec<String>) -> (Option<u64>, Option<u64>) {
    let wall_timeout = s.agent.get("timeout_sec").and_then(seconds);
    if s.agent.contains_key("timeout_sec") && wall_timeout.is_none() {
        w.push("[agent] timeout_sec is not a positive number, not imported".to_string());
    }
    let validation_timeout = settings::timeout_or_default(
        s.verifier.get("timeout_sec").map(seconds),
        "[verifier] timeout_sec",
        "Harbor",
        HARBOR_VERIFIER_TIMEOUT,
        w,
    );
    (wall_timeout, validation_timeout)
}

/// The verifier: the files of `tests/`, run by `tests/test.sh`, whose reward decides success;
/// `verifier` is the `[verifier]` table; `offline`: its phase has no network.
fn verifier_plan(
    dir: &Path,
    verifier: &toml::Table,
    offline: bool,
    w: &mut Vec<String>,
) -> Result<VerifierPlan, String> {
    let tests_dir = dir.join("tests");
    if !tests_dir.join("test.sh").is_file() {
        return Err("it has no tests/test.sh, so nothing could check its end state".into());
    }
    let test_files = files::collect(&tests_dir, "tests", w);
    let scanned = scan::scan(&test_files);
    if offline {
        w.extend(scan::download_warning(&scanned, "tests/"));
    }
    if scanned.writes_reward_json && scanned.metrics.is_empty() {
        w.push(
            "tests/ write reward.json, but no metric names could be read from them: success is reward = 1 (or every metric = 1), and no rubric was made".to_string(),
        );
    }
    Ok(VerifierPlan {
        verdict: Verdict::Reward,
        files: test_files,
        entry: "test.sh".to_string(),
        env: literal_env(verifier.get("env"), "verifier", w),
        metrics: scanned.metrics,
        separate: separate_verifier(verifier)?,
    })
}

/// Whether the verifier runs in a fresh container of the task's own image (Harbor's
/// `environment_mode = "separate"`, explicit or implied by a `[verifier.environment]`). A
/// verifier environment of its own (another image) has no proctor counterpart: the skip reason.
fn separate_verifier(verifier: &toml::Table) -> Result<bool, String> {
    if verifier.get("environment").is_some() {
        return Err(
            "[verifier.environment] defines a verifier container of its own, which proctor does not build (its checks run over the task's image)".into(),
        );
    }
    match verifier.get("environment_mode") {
        None => Ok(false),
        Some(Value::String(m)) if m == "shared" => Ok(false),
        Some(Value::String(m)) if m == "separate" => Ok(true),
        Some(v) => Err(format!(
            "[verifier] environment_mode = {v} is not one of Harbor's modes (shared, separate)"
        )),
    }
}

/// The oracle: the files of `solution/`, run by `solution/solve.sh`; `solution` is the
/// `[solution]` table; `offline`: the agent phase, where the oracle runs, has no network.
fn oracle_plan(
    dir: &Path,
    solution: &toml::Table,
    offline: bool,
    w: &mut Vec<String>,
) -> OraclePlan {
    let solution_dir = dir.join("solution");
    let env = literal_env(solution.get("env"), "solution", w);
    if !solution_dir.join("solve.sh").is_file() {
        return OraclePlan::without_solution("no solution/solve.sh", w);
    }
    let files = files::collect(&solution_dir, "solution", w);
    w.extend(scan::solution_warning(&files, "solution/", offline));
    OraclePlan {
        files,
        entry: Some("solve.sh".to_string()),
        expected_dir: Some("/solution"),
        env,
        missing: None,
    }
}

/// The lines kept for the reader above the task: its description, then its metadata.
fn about(s: &Sections<'_>) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(desc) = s.task.get("description").and_then(Value::as_str) {
        lines.push(desc.lines().collect::<Vec<_>>().join(" "));
    }
    let mut about = Vec::new();
    if let Some(name) = s.task.get("name").and_then(Value::as_str) {
        about.push(format!("name: {name}"));
    }
    let authors: Vec<String> = s
        .task
        .get("authors")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(author)
        .collect();
    if !authors.is_empty() {
        about.push(format!("authors: {}", authors.join(", ")));
    }
    let keywords: Vec<&str> = s
        .task
        .get("keywords")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if !keywords.is_empty() {
        about.push(format!("keywords: {}", keywords.join(", ")));
    }
    for key in ["author_name", "author_email", "category"] {
        if let Some(v) = s.metadata.get(key).and_then(Value::as_str) {
            about.push(format!("{}: {v}", key.replace('_', " ")));
        }
    }
    if let Some(tags) = s.metadata.get("tags").and_then(Value::as_array) {
        let tags: Vec<&str> = tags.iter().filter_map(Value::as_str).collect();
        if !tags.is_empty() {
            about.push(format!("tags: {}", tags.join(", ")));
        }
    }
    for key in ["expert_time_estimate_min", "junior_time_estimate_min"] {
        if let Some(v) = s.metadata.get(key) {
            about.push(format!("{key}: {v}"));
        }
    }
    if !about.is_empty() {
        lines.push(about.join("; "));
    }
    lines
}

/// One of `[task] authors`, for the comment: `NAME <EMAIL>` from a table `{ name, email }` (either
/// may be missing), or a plain string.
fn author(v: &Value) -> Option<String> {
    if let Some(s) = v.as_str() {
        return Some(s.to_string());
    }
    let t = v.as_table()?;
    let name = t.get("name").and_then(Value::as_str);
    let email = t.get("email").and_then(Value::as_str);
    match (name, email) {
        (Some(n), Some(e)) => Some(format!("{n} <{e}>")),
        (Some(n), None) => Some(n.to_string()),
        (None, Some(e)) => Some(format!("<{e}>")),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verifiers_environment_mode_decides_what_its_checks_see() {
        let table = |t: &str| -> toml::Table { toml::from_str(t).unwrap() };
        assert_eq!(super::separate_verifier(&table("")), Ok(false));
        assert_eq!(
            super::separate_verifier(&table("environment_mode = \"shared\"")),
            Ok(false)
        );
        assert_eq!(
            super::separate_verifier(&table("environment_mode = \"separate\"")),
            Ok(true)
        );
        let other = super::separate_verifier(&table("[environment]\ndocker_image = \"x\""));
        assert!(other.is_err_and(|e| e.contains("[verifier.environment]")));
        let bad = super::separate_verifier(&table("environment_mode = \"apart\""));
        assert!(bad.is_err_and(|e| e.contains("shared, separate")));
    }

    #[test]
    fn build_timeout_sec_is_whole_seconds_else_harbors_default() {
        let read = |t: &str| {
            let table: toml::Table = toml::from_str(t).expect("toml");
            let mut w = Vec::new();
            (build_timeout(&table, &mut w), w)
        };
        assert_eq!(read(""), (600, vec![]));
        assert_eq!(read("build_timeout_sec = 120"), (120, vec![]));
        assert_eq!(read("build_timeout_sec = 90.5"), (91, vec![]));
        let (secs, w) = read("build_timeout_sec = -3");
        assert_eq!(secs, 600);
        assert!(
            w[0].contains("build_timeout_sec = -3 is not a positive number"),
            "{w:?}"
        );
    }

    #[test]
    fn only_a_prebuilt_registry_image_keeps_its_dockerfile_to_build_from() {
        let dir = tempfile::tempdir().expect("tempdir");
        let image = ImageSource::Reference("ghcr.io/org/t:1".into());
        assert_eq!(fallback_build(dir.path(), &image), None);
        std::fs::create_dir(dir.path().join("environment")).expect("mkdir");
        std::fs::write(dir.path().join("environment/Dockerfile"), "FROM busybox\n").expect("write");
        let kept = fallback_build(dir.path(), &image).expect("kept");
        assert_eq!(kept.context, dir.path().join("environment"));
        assert_eq!(kept.shown_dockerfile, "environment/Dockerfile");
        let archive = ImageSource::Archive(dir.path().join("img.tar"));
        assert_eq!(fallback_build(dir.path(), &archive), None);
    }

    #[test]
    fn resources_are_read_from_numbers_and_sizes() {
        let table: toml::Table =
            toml::from_str("cpus = 2\nmemory = \"2G\"\nstorage = \"10G\"\n").expect("toml");
        let mut w = Vec::new();
        assert_eq!(
            resources(&table, &mut w),
            Resources {
                cpus: Some(2.0),
                memory_mb: Some(2048),
                storage_mb: Some(10240)
            }
        );
        assert!(w.is_empty(), "{w:?}");
        let table: toml::Table = toml::from_str(
            "cpus = 0.5\nmemory_mb = 4096\nmemory = \"2G\"\nstorage_mb = \"lots\"\n",
        )
        .expect("toml");
        assert_eq!(
            resources(&table, &mut w),
            Resources {
                cpus: Some(0.5),
                memory_mb: Some(4096),
                storage_mb: None
            }
        );
        assert_eq!(
            w,
            vec![
                "[environment] memory_mb (4096 MiB) and memory (2048 MiB) disagree; memory_mb was used",
                "[environment] storage_mb = \"lots\" is not a positive size (a number of MiB, or a size such as \"2G\"), not imported",
            ]
        );
    }

    /// The allowed hosts of a task.toml, as imported.
    fn hosts(toml_text: &str) -> Vec<String> {
        let table: toml::Table = toml_text.parse().unwrap();
        let empty = toml::Table::new();
        networks(&Sections::of(&table, &empty), &mut Vec::new())
            .unwrap()
            .allowed_hosts
    }

    /// The agent's and the verifier's network of a task.toml, as Harbor resolves them.
    fn phases(text: &str) -> (Result<(Net, Net), String>, Vec<String>) {
        let table: toml::Table = toml::from_str(text).expect("toml");
        let empty = toml::Table::new();
        let mut w = Vec::new();
        let n = networks(&Sections::of(&table, &empty), &mut w).map(|n| (n.agent, n.checks));
        (n, w)
    }

    #[test]
    fn each_phase_gets_its_network_as_harbor_resolves_it() {
        use Net::{Internet as Host, None};
        // Harbor's allow_internet defaults to true: both phases get the network.
        assert_eq!(phases("").0, Ok((Host, Host)));
        assert_eq!(
            phases("[environment]\nallow_internet = false\n").0,
            Ok((None, None))
        );
        // network_mode wins over allow_internet, and a phase's own overrides the baseline.
        assert_eq!(
            phases("[environment]\nallow_internet = false\nnetwork_mode = \"public\"\n").0,
            Ok((Host, Host))
        );
        assert_eq!(
            phases("[environment]\nnetwork_mode = \"no-network\"\n[verifier]\nnetwork_mode = \"public\"\n").0,
            Ok((None, Host))
        );
        assert_eq!(
            phases("[environment]\nallow_internet = false\n[agent]\nnetwork_mode = \"public\"\n").0,
            Ok((Host, None))
        );
        // allowed_hosts alone is an allowlist: the internet, limited to those hosts.
        let (n, w) = phases(
            "[environment]\nallow_internet = false\n[agent]\nallowed_hosts = [\"pypi.org\", \"*.pythonhosted.org\", \"10.0.0.1\"]\n",
        );
        assert_eq!(n, Ok((Host, None)));
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(
            hosts("[environment]\nallow_internet = false\n[agent]\nallowed_hosts = [\"pypi.org\", \"*.pythonhosted.org\", \"10.0.0.1\"]\n"),
            vec!["pypi.org", "*.pythonhosted.org"],
            "an address is not a host proctor can name"
        );
        // An allowlist of one phase limits the other's internet too, said.
        let (_, w) =
            phases("[agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"pypi.org\"]\n");
        assert!(
            w.iter().any(|w| w
                .contains("so the verifier phase, public in Harbor, reaches only those hosts too")),
            "{w:?}"
        );
        // What Harbor refuses skips the task.
        assert_eq!(
            phases("[verifier]\nnetwork_mode = \"internet\"\n").0,
            Err("[verifier] network_mode = \"internet\" is not one of Harbor's network modes (public, no-network, allowlist)".into())
        );
        assert!(phases("[environment]\nallow_internet = \"yes\"\n")
            .0
            .is_err());
    }

    #[test]
    fn seconds_round_up_and_refuse_non_numbers() {
        assert_eq!(seconds(&Value::Float(120.0)), Some(120));
        assert_eq!(seconds(&Value::Float(0.5)), Some(1));
        assert_eq!(seconds(&Value::Integer(90)), Some(90));
        assert_eq!(seconds(&Value::Integer(0)), None);
        assert_eq!(seconds(&Value::String("60".into())), None);
    }

    #[test]
    fn an_http_mcp_server_is_reached_on_the_trials_loopback_at_its_containers_port() {
        use crate::model::McpTransport;
        let t = http_transport("tools", "http://mcp-server:8000/mcp", false).unwrap();
        assert_eq!(
            t,
            McpTransport::Http {
                url: "http://127.0.0.1:8000/mcp".into(),
                service: "mcp-server".into(),
                legacy_sse: false
            }
        );
        let t = http_transport("tools", "http://search:9/sse", true).unwrap();
        assert!(
            matches!(t, McpTransport::Http { legacy_sse: true, ref url, .. } if url == "http://127.0.0.1:9/sse")
        );
        for bad in ["https://x:1/mcp", "http://x/mcp", "http://x:port/mcp"] {
            assert!(http_transport("tools", bad, false).is_err(), "{bad}");
        }
    }
}
