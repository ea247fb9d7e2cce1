//! Stage 2, launch: the agent's adapter (and, for real CLIs, its preflight, once per variant),
//! the model endpoint, the adapter's launch (argv, environment, files), the agent's whole
//! environment, the services, and the sandbox spec that runs them all. Nothing runs yet.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use proctor_agents::{adapter_for, Adapter, Launch, LaunchContext, SessionContext};
use proctor_sandbox::SandboxSpec;
use proctor_suite::model::AgentKind;
use proctor_suite::script::Script;

use crate::record::{redact_env, LaunchRecord};
use crate::trial::context::{RunContext, Trial};
use crate::trial::env::{agent_env, host_path, AgentEnvParts};
use crate::trial::error::{Stage, TrialError};
use crate::trial::prepare::Prepared;
use crate::trial::sandboxing;
use crate::trial::services::{agents_dir_bind, program_binds, services, ModelEndpoint};

/// What the launch stage made.
pub struct Launched {
    /// The agent's adapter: it reads the agent's output after the run.
    pub adapter: Box<dyn Adapter>,
    /// The model endpoint, for variants with a `model_script`.
    pub model: Option<ModelEndpoint>,
    /// Everything the sandbox runs: the agent, its environment, the services, the binds.
    pub spec: SandboxSpec,
    /// The launch as recorded (secrets redacted).
    pub record: LaunchRecord,
    /// The trial's control group, when the memory and process limits are enforced by one.
    pub cgroup: Option<crate::cgroup::TrialCgroup>,
    /// The final answer when it was given after the full stop rather than printed (a person's,
    /// asked for when they left the shell): the capture takes it instead of the adapter's.
    pub given_answer: Option<String>,
    /// For a task with a simulated user who may answer: how the agent's later turns start.
    pub turns: Option<crate::trial::conversation::TurnPlan>,
    /// For a task in steps: its steps, and how the agent is started for each.
    pub steps: Option<crate::trial::steps::StepsPlan>,
}

/// Launches nothing yet: builds the adapter, the environment, the services and the sandbox
/// spec. A real CLI that fails its preflight, or an adapter that refuses the launch, is an
/// agent-start failure.
pub fn launch(
    ctx: &RunContext,
    trial: &Trial,
    prepared: &Prepared,
) -> Result<Launched, TrialError> {
    let paths = &prepared.paths;
    let adapter = checked_adapter(ctx, trial)?;
    let real_agent = trial.real_agent();
    let model = ModelEndpoint::pick(ctx, trial, paths)?;
    let prompt = ctx.suite.prompt(trial.task, trial.variant);
    let (mut launch, first) = start_session(
        adapter.as_ref(),
        (trial, &ctx.suite.file.mcp_servers),
        prepared,
        model.as_ref(),
        &prompt,
    )?;
    add_command_gateway_env(trial, model.as_ref(), &mut launch);
    let agents_dir = real_agent.then(installed_agents).flatten();
    let image = ctx.image(&trial.planned.task);
    let env = trial_env(ctx, trial, paths, &launch, agents_dir.as_deref());
    let served = trial_services(
        ctx,
        trial,
        paths,
        (model.as_ref(), &env, agents_dir.as_deref()),
        &mut launch.argv,
    )?;
    let command = agent_command(real_agent, paths, &launch.argv);
    let (turns, steps) = later_turns(ctx, trial, paths, first, (&launch, &env))?;
    let mut binds = sandbox_binds(
        ctx,
        prepared,
        image.is_some(),
        agents_dir.as_deref(),
        model.as_ref(),
        &served.services,
        served.carried,
    );
    let (limits, cgroup, limits_record) = trial_limits(ctx, trial);
    let given = Given {
        prompt,
        command: &command,
        env: &env,
        image,
    };
    let record = without_token(
        launch_record(ctx, trial, prepared, given, limits_record),
        model.as_ref(),
    );
    binds.extend(sandboxing::shown_read_only(&trial.settings.binds));
    let calls = call_runner(prepared, &env, served.mcp_programs)?;
    let mut spec = SandboxSpec {
        max_turns: turns.as_ref().map_or(1, |t| t.user.turns()),
        init_exe: ctx.proctor_exe.clone(),
        namespaces: paths.namespaces,
        workspace: prepared.sandbox_workspace(),
        workspace_inside: paths.workspace_inside(),
        hide: ctx.hide.clone(),
        binds,
        network: sandboxing::sandbox_network(trial.settings.network),
        allowed_hosts: sandboxing::internet_only(
            trial.settings.network,
            &trial.settings.allowed_hosts,
        ),
        env,
        home_inside: paths.home(),
        services: served.services,
        command,
        stdout: paths.stdout(),
        stderr: paths.stderr(),
        wall_timeout: trial.settings.wall_timeout,
        grace: ctx.grace,
        root_image: image.map(|img| root_image(img, trial, paths)),
        skeleton: None,
        view: None,
        limits,
        calls,
    };
    steps.as_ref().map_or(Ok(()), |plan| {
        crate::trial::steps_plan::apply(plan, &mut spec)
    })?;
    spec.skeleton = ctx.skeletons.for_spec(&spec);
    Ok(Launched {
        adapter,
        model,
        spec,
        record,
        cgroup,
        given_answer: None,
        turns,
        steps,
    })
}

/// How the agent's later turns start, for a task whose simulated user may answer (more than
/// one turn): made from the first turn's launch, before the image's launcher or the login
/// wrapper changed its command line.
fn turn_plan(
    ctx: &RunContext,
    trial: &Trial,
    paths: &crate::trial::paths::TrialPaths,
    first: (LaunchContext, SessionContext),
    (launch, env): (&Launch, &[(String, String)]),
) -> Result<Option<crate::trial::conversation::TurnPlan>, TrialError> {
    let Some(user) = trial.task.user.as_ref().filter(|u| u.turns() > 1) else {
        return Ok(None);
    };
    let model_user = crate::trial::user_model::UserModel::start(ctx, trial, user, &paths.trial_dir)
        .map_err(|e| TrialError::harness(Stage::Launch, format!("the user's model: {e}")))?;
    Ok(Some(crate::trial::conversation::TurnPlan {
        user: user.clone(),
        model_user: model_user.map(std::sync::Mutex::new),
        relaunch: relaunch(trial, paths, first, launch, env),
        output: [paths.stdout(), paths.stderr()],
    }))
}

/// The agent's command line: a real CLI's wrapped so that login shells keep the shims first on
/// `PATH`.
fn agent_command(
    real_agent: bool,
    paths: &crate::trial::paths::TrialPaths,
    argv: &[String],
) -> Vec<String> {
    if real_agent {
        crate::trial::env::login_path_wrapper(&paths.shims.inside, argv)
    } else {
        argv.to_vec()
    }
}

/// The folder the agent CLIs are installed in, when there is one.
fn installed_agents() -> Option<PathBuf> {
    proctor_agents::cli::agents_dir().filter(|d| d.is_dir())
}

/// The variant's adapter, checked before anything is started: a real CLI's preflight, and a
/// shell in the task's image where the CLI's shell tool needs one.
fn checked_adapter(ctx: &RunContext, trial: &Trial) -> Result<Box<dyn Adapter>, TrialError> {
    let adapter = adapter(ctx, trial)?;
    if trial.real_agent() {
        ctx.preflight(trial.variant, adapter.as_ref())
            .map_err(TrialError::agent_start)?;
    }
    image_has_the_shell(ctx, trial)?;
    Ok(adapter)
}

/// What follows the agent's first turn, when anything does: a conversation with the task's
/// simulated user, or the task's steps.
fn later_turns(
    ctx: &RunContext,
    trial: &Trial,
    paths: &crate::trial::paths::TrialPaths,
    first: (LaunchContext, SessionContext),
    (launch, env): (&Launch, &[(String, String)]),
) -> Result<
    (
        Option<crate::trial::conversation::TurnPlan>,
        Option<crate::trial::steps::StepsPlan>,
    ),
    TrialError,
> {
    let turns = turn_plan(ctx, trial, paths, first.clone(), (launch, env))?;
    let relaunch = relaunch(trial, paths, first, launch, env);
    let steps = crate::trial::steps_plan::plan(ctx, trial, paths, relaunch)?;
    Ok((turns, steps))
}

/// How the agent is started again after its first turn (see
/// [`crate::trial::conversation::Relaunch`]), made from the first turn's launch before the
/// image's launcher or the login wrapper changed its command line.
fn relaunch(
    trial: &Trial,
    paths: &crate::trial::paths::TrialPaths,
    first: (LaunchContext, SessionContext),
    launch: &Launch,
    env: &[(String, String)],
) -> crate::trial::conversation::Relaunch {
    let launcher = proctor_agents::cli::wrapped_executable(&launch.argv)
        .map(|slot| launch.argv[slot].clone())
        .filter(|exe| exe.ends_with(&format!("/{CLI_LAUNCHER}")));
    crate::trial::conversation::Relaunch {
        launch: first.0,
        session: first.1,
        first_env: launch.env.clone(),
        base_env: env.to_vec(),
        agent_dir: paths.agent.host.clone(),
        login_wrap: trial.real_agent().then(|| paths.shims.inside.clone()),
        launcher,
    }
}

/// The trial's services (the suite's and the task's, the model endpoint, each MCP server's
/// folder), what must be bound for them and for a real CLI carried into the task's image
/// (whose launcher then takes the executable's place in `argv`), and the MCP servers' programs
/// for the call runner.
fn trial_services(
    ctx: &RunContext,
    trial: &Trial,
    paths: &crate::trial::paths::TrialPaths,
    (model, env, agents_dir): (Option<&ModelEndpoint>, &[(String, String)], Option<&Path>),
    argv: &mut [String],
) -> Result<TrialServices, TrialError> {
    let (mut services, mut carried) = services(ctx, trial, paths, model, env)?;
    let mcp = crate::trial::mcp::servers(ctx, trial, paths, env)?;
    services.extend(mcp.folders);
    carried.extend(mcp.binds);
    let image = ctx.image(&trial.planned.task);
    if let (Some(img), true) = (image, trial.real_agent() && paths.namespaces) {
        carried.extend(carry_cli(ctx, paths, img, agents_dir, argv)?);
    }
    Ok(TrialServices {
        services,
        carried,
        mcp_programs: mcp.programs,
    })
}

/// What [`trial_services`] makes.
struct TrialServices {
    /// The services the trial init starts, in order.
    services: Vec<proctor_sandbox::ServiceSpec>,
    /// What must be bound for them and for a real CLI carried into an image.
    carried: Vec<proctor_sandbox::Bind>,
    /// The MCP servers' programs, for the call runner.
    mcp_programs: Vec<proctor_sandbox::AllowedProgram>,
}

/// What the agent is given, as [`launch`] made it: kept in its launch record.
struct Given<'a> {
    prompt: String,
    command: &'a [String],
    env: &'a [(String, String)],
    image: Option<&'a std::sync::Arc<crate::image::TrialImage>>,
}

/// What the trial record keeps of how the agent was launched (before the model token is taken
/// out of it).
fn launch_record(
    ctx: &RunContext,
    trial: &Trial,
    prepared: &Prepared,
    given: Given<'_>,
    limits_record: crate::record::LimitsRecord,
) -> LaunchRecord {
    let Given {
        prompt,
        command,
        env,
        image,
    } = given;
    LaunchRecord {
        agent: trial.variant.agent.as_str().into(),
        model: trial.variant.model.clone(),
        prompt,
        argv: command.to_vec(),
        env: redact_env(env),
        allow: prepared.allowed.clone(),
        image: image.map(|img| crate::record::ImageRecord {
            reference: img.reference.clone(),
            digest: img.digest.clone(),
            note: img.note.clone(),
        }),
        resources: crate::record::ResourcesRecord::of(ctx.suite.resources(trial.task)),
        limits: Some(limits_record),
    }
}

/// The trial's root when it runs in an image: the image under the trial's own writable layer,
/// kept for the checks where they see the agent's root.
fn root_image(
    img: &crate::image::TrialImage,
    trial: &Trial,
    paths: &crate::trial::paths::TrialPaths,
) -> proctor_sandbox::RootImage {
    proctor_sandbox::RootImage {
        rootfs: img.rootfs.clone(),
        upper: paths.root_upper(),
        work: paths.root_work(),
        layers: Vec::new(),
        keep_upper: trial.settings.check_root == proctor_suite::model::CheckRoot::Agent,
    }
}

/// The agent's environment: the image's `PATH` (or the host's) and variables, the services',
/// the variant's and the launch's, and where the agents' install folder is.
fn trial_env(
    ctx: &RunContext,
    trial: &Trial,
    paths: &crate::trial::paths::TrialPaths,
    launch: &Launch,
    agents_dir: Option<&Path>,
) -> Vec<(String, String)> {
    // A sidecar's variables are its own; the other services' are the agent's too.
    let suite_env: Vec<_> = ctx
        .suite
        .file
        .services
        .iter()
        .chain(&trial.task.services)
        .filter(|s| !s.is_sidecar())
        .map(|s| &s.env)
        .collect();
    let image = ctx.image(&trial.planned.task);
    let path = image.map_or_else(host_path, |img| img.path());
    agent_env(
        paths,
        AgentEnvParts {
            host_path: &path,
            image: image.map_or(&[][..], |img| &img.env[..]),
            services: &suite_env,
            variant: &trial.variant.env,
            launch: &launch.env,
            agents_dir,
            trial: (trial.planned.index, trial.planned.seed),
        },
    )
}

/// A CLI whose shell tool runs every command through a shell cannot work in an image that has
/// none: the environment's fault, found before the agent starts.
fn image_has_the_shell(ctx: &RunContext, trial: &Trial) -> Result<(), TrialError> {
    let (Some(img), Some(shell)) = (
        ctx.image(&trial.planned.task),
        shell_needed(trial.variant.agent),
    ) else {
        return Ok(());
    };
    if img.finds(shell) {
        return Ok(());
    }
    Err(TrialError::environment(format!(
        "the task's image {} has no `{shell}` on its PATH, and {}'s shell tool runs every command through it: the agent could not have run one (add {shell} to the image)",
        img.reference,
        trial.variant.agent.as_str()
    )))
}

/// The launch record without the trial's model token anywhere in it.
fn without_token(record: LaunchRecord, model: Option<&ModelEndpoint>) -> LaunchRecord {
    match model.and_then(ModelEndpoint::api_key) {
        Some(token) => record.without(&token),
        None => record,
    }
}

/// A command agent that reaches a model through the gateway gets the endpoint, its token and
/// the model in its environment (a CLI adapter sets its own).
fn add_command_gateway_env(trial: &Trial, model: Option<&ModelEndpoint>, launch: &mut Launch) {
    if let (AgentKind::Command, Some(m @ ModelEndpoint::Gateway { seat, .. })) =
        (trial.variant.agent, model)
    {
        launch.env.extend(crate::gateway::command_env(
            &m.base_url(),
            seat.token(),
            &seat.model.model,
            seat.api(),
        ));
    }
}

/// The trial's resource limits: what the sandbox enforces, the control group that holds the
/// memory and process limits (where one can be made), and the record saying which limit is
/// enforced and why not where one is not.
fn trial_limits(
    ctx: &RunContext,
    trial: &Trial,
) -> (
    proctor_sandbox::SandboxLimits,
    Option<crate::cgroup::TrialCgroup>,
    crate::record::LimitsRecord,
) {
    const MIB: u64 = 1 << 20;
    let l = &trial.settings.limits;
    let mut record = crate::record::LimitsRecord {
        memory_mb: l.memory_mb(),
        processes: l.processes(),
        disk_mb: l.disk_mb(),
        output_mb: l.output_mb(),
        enforced_by: BTreeMap::new(),
        not_enforced: BTreeMap::new(),
    };
    if !ctx.isolation.namespaces {
        let why = "the trial runs without namespaces (a plain process group on the host)";
        for key in ["memory_mb", "processes", "disk_mb", "output_mb"] {
            record.not_enforced.insert(key.into(), why.into());
        }
        // Never pretended: without namespaces the shim logs its own calls, through a socket
        // any process of the agent can reach.
        record.not_enforced.insert(
            CALLS_LOG_KEY.into(),
            "the trial runs without namespaces: the shim logs each call itself, through a \
             socket any process of the agent can reach, so the calls log holds what the agent's \
             processes sent, not only calls that ran"
                .into(),
        );
        return (Default::default(), None, record);
    }
    let disk_by = if ctx.isolation.overlay {
        "the trial's own tmpfs"
    } else {
        "the trial's own tmpfs, which holds the workspace's copy as well (not counted)"
    };
    let (limits, cgroup) = sandboxing::held_limits(
        &ctx.cgroups,
        l,
        disk_by,
        l.output_mb() * MIB,
        (&mut record.enforced_by, &mut record.not_enforced),
    );
    (limits, cgroup, record)
}

/// The key of the launch record's `limits.not_enforced` that says the calls log is not
/// protected (a trial without namespaces).
pub const CALLS_LOG_KEY: &str = "calls_log";

/// With namespaces, the trial's call runner: the trial init listens where the shims' socket is
/// bound (a placeholder stands there until it does, for the binds to be laid out), runs each
/// call of the allow-list itself (on the agent's `PATH` of `env`), and alone reaches the calls
/// log. `None` without namespaces.
fn call_runner(
    prepared: &Prepared,
    env: &[(String, String)],
    mcp: Vec<proctor_sandbox::AllowedProgram>,
) -> Result<Option<proctor_sandbox::CallsSpec>, TrialError> {
    let paths = &prepared.paths;
    if !paths.namespaces {
        return Ok(None);
    }
    let _ = std::fs::remove_file(&paths.socket.host);
    std::fs::write(&paths.socket.host, b"").map_err(|e| {
        TrialError::environment(format!(
            "cannot make the calls socket's place {}: {e}",
            paths.socket.host.display()
        ))
    })?;
    Ok(Some(proctor_sandbox::CallsSpec {
        listen: paths.socket.host.clone(),
        log: paths.log_socket.clone(),
        allowed: prepared
            .allowed
            .iter()
            .map(|a| proctor_sandbox::AllowedProgram {
                name: a.name.clone(),
                program: paths.allowed_inside(a),
                mcp: None,
            })
            .chain(mcp)
            .collect(),
        // The agent's PATH as it started: a call's program finds its own commands where the
        // trial put them, not where the caller pointed.
        path: env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone()),
    }))
}

/// Everything the sandbox binds for a trial: the trial's own places and allowed commands,
/// inside an image proctor's runtime and what `carried` host programs need (each place once),
/// the agents' install folder, the gateway's socket, and service programs under private folders.
fn sandbox_binds(
    ctx: &RunContext,
    prepared: &Prepared,
    in_image: bool,
    agents_dir: Option<&Path>,
    model: Option<&ModelEndpoint>,
    services: &[proctor_sandbox::ServiceSpec],
    carried: Vec<proctor_sandbox::Bind>,
) -> Vec<proctor_sandbox::Bind> {
    let paths = &prepared.paths;
    let mut binds = paths.binds(&prepared.allowed);
    if let (true, Some(rt), true) = (in_image, &ctx.runtime, paths.namespaces) {
        binds.extend(rt.binds());
    }
    for b in carried {
        if !binds.iter().any(|have| have.inside == b.inside) {
            binds.push(b);
        }
    }
    if paths.namespaces {
        binds.extend(agents_dir.map(agents_dir_bind));
        if let Some(ModelEndpoint::Gateway { seat, .. }) = model {
            binds.push(proctor_sandbox::Bind {
                host: seat.socket().to_path_buf(),
                inside: PathBuf::from(crate::gateway::SOCKET_INSIDE),
                read_only: false,
            });
        }
        let programs = program_binds(services, &binds);
        binds.extend(programs);
    }
    binds
}

/// Inside an image, a real CLI runs from the host's install ([`crate::host_program`]): the
/// executable in the launch wrapper's command line is replaced by a launcher script written
/// into the agent folder. Returns the binds the CLI needs. A CLI that cannot be carried into an
/// image is an agent-start failure naming why.
fn carry_cli(
    ctx: &RunContext,
    paths: &crate::trial::paths::TrialPaths,
    image: &crate::image::TrialImage,
    agents_dir: Option<&Path>,
    argv: &mut [String],
) -> Result<Vec<proctor_sandbox::Bind>, TrialError> {
    let Some(slot) = proctor_agents::cli::wrapped_executable(argv) else {
        return Ok(Vec::new());
    };
    let exe = PathBuf::from(&argv[slot]);
    let bound: Vec<PathBuf> = agents_dir
        .and_then(|d| d.canonicalize().ok())
        .into_iter()
        .collect();
    let program = ctx.host_program(&exe, &bound, image).map_err(|e| {
        TrialError::agent_start(format!(
            "{} cannot run inside the task's image: {e}",
            exe.display()
        ))
    })?;
    let launcher = paths.agent.host.join(CLI_LAUNCHER);
    std::fs::write(&launcher, program.launcher())
        .and_then(|()| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&launcher, std::fs::Permissions::from_mode(0o755))
        })
        .map_err(|e| {
            TrialError::harness(
                Stage::Launch,
                format!("cannot write the CLI's launcher: {e}"),
            )
        })?;
    argv[slot] = paths.agent.inside.join(CLI_LAUNCHER).display().to_string();
    Ok(program.binds.clone())
}

/// The shell an agent CLI's shell tool runs every command through, where it needs one that is
/// not `sh`: in an image without it, the agent could not run a command, which is the
/// environment's failure, not the agent's.
fn shell_needed(agent: proctor_suite::model::AgentKind) -> Option<&'static str> {
    use proctor_suite::model::AgentKind;
    match agent {
        AgentKind::ClaudeCode | AgentKind::Codex | AgentKind::Copilot | AgentKind::Gemini => {
            Some("bash")
        }
        _ => None,
    }
}

/// The launcher of a real CLI inside an image, in the agent folder.
const CLI_LAUNCHER: &str = "cli";

/// The adapter's launch of the agent (an adapter that refuses it is an agent-start failure),
/// with its files written into the agent folder and, without namespaces, the agent's private
/// folders made.
fn start_session(
    adapter: &dyn Adapter,
    (trial, mcp_servers): (&Trial, &[proctor_suite::mcp::McpServer]),
    prepared: &Prepared,
    model: Option<&ModelEndpoint>,
    prompt: &str,
) -> Result<(Launch, (LaunchContext, SessionContext)), TrialError> {
    let paths = &prepared.paths;
    let launch_ctx = LaunchContext {
        prompt: prompt.to_string(),
        workspace: paths.workspace_inside(),
        model: model
            .and_then(ModelEndpoint::model_id)
            .map(str::to_string)
            .or_else(|| trial.variant.model.clone()),
        proctor: paths.proctor.inside.clone(),
        agent_dir: paths.agent.inside.clone(),
    };
    let session = SessionContext {
        model_base_url: model.map(ModelEndpoint::base_url),
        allow: prepared.allowed.iter().map(|a| a.name.clone()).collect(),
        api_key: model.and_then(ModelEndpoint::api_key),
        mcp: crate::trial::mcp::client_access(mcp_servers, &paths.shims.inside),
    };
    let launch = adapter
        .launch_session(&launch_ctx, &session)
        .map_err(|e| TrialError::agent_start(e.to_string()))?;
    write_agent_files(&paths.agent.host, &launch.files).map_err(|e| {
        TrialError::harness(
            Stage::Launch,
            format!("cannot write the agent's files: {e}"),
        )
    })?;
    if let Some(tmp) = paths.tmp() {
        let _ = std::fs::create_dir_all(paths.home());
        let _ = std::fs::create_dir_all(tmp);
    }
    Ok((launch, (launch_ctx, session)))
}

/// The variant's adapter; a script variant gets its task's script.
fn adapter(ctx: &RunContext, trial: &Trial) -> Result<Box<dyn Adapter>, TrialError> {
    let fail = |what: String| TrialError::harness(Stage::Launch, what);
    let script = match trial.variant.agent {
        // A script variant without a script is the null agent, which does nothing; only proctor
        // makes one (for `validate --oracle`), since `validate` rejects it in a suite.
        AgentKind::Script if trial.variant.script.is_none() => Some(Script::default()),
        AgentKind::Script => Some(script(ctx, trial).map_err(fail)?),
        _ => None,
    };
    adapter_for(trial.variant, script).map_err(|e| fail(e.to_string()))
}

/// The trial's script, read and checked once per variant and task for the whole run.
fn script(ctx: &RunContext, trial: &Trial) -> Result<Script, String> {
    let key = (
        trial.variant.id.get_ref().clone(),
        trial.planned.task.clone(),
    );
    let lock = || ctx.scripts.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(script) = lock().get(&key) {
        return Ok(script.clone());
    }
    let script = ctx
        .suite
        .script(trial.variant, &trial.planned.task)
        .map_err(|p| format!("cannot read the script: {p}"))?;
    lock().insert(key, script.clone());
    Ok(script)
}

/// Writes the adapter's launch files into the agent folder.
fn write_agent_files(dir: &Path, files: &[(String, Vec<u8>)]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    files
        .iter()
        .try_for_each(|(name, bytes)| std::fs::write(dir.join(name), bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_namespaces_the_spec_runs_the_agent_on_the_host_paths() {
        let (_dir, suite) = crate::trial::testkit::suite();
        let lab = crate::trial::testkit::Lab::new(&suite);
        let ctx = lab.context(&suite);
        let planned = crate::trial::testkit::planned("t", "cmd");
        let trial = Trial::resolve(&suite, &planned).unwrap();
        let prepared =
            crate::trial::prepare::prepare(&ctx, &trial, std::time::Instant::now()).unwrap();
        let launched = launch(&ctx, &trial, &prepared).unwrap();
        let paths = &prepared.paths;
        let spec = &launched.spec;
        assert!(!spec.namespaces);
        assert!(spec.binds.is_empty(), "nothing to bind on the host");
        assert_eq!(spec.workspace_inside, paths.copy());
        assert_eq!(spec.home_inside, paths.home());
        assert!(paths.home().is_dir() && paths.tmp().unwrap().is_dir());
        assert_eq!(spec.command[0], "/bin/sh", "a command agent is not wrapped");
        assert_eq!(spec.wall_timeout, std::time::Duration::from_secs(7));
        assert!(launched.model.is_none());
        let env = |k: &str| {
            spec.env
                .iter()
                .rev()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
        };
        let shims = paths.shims.host.display().to_string();
        assert!(env("PATH").unwrap().starts_with(&format!("{shims}:")));
        assert_eq!(env("FROM_VARIANT").as_deref(), Some("1"));
        // The record is the spec's launch, as written down.
        assert_eq!(launched.record.argv, spec.command);
        assert_eq!(launched.record.agent, "command");
        assert_eq!(launched.record.prompt, "Do the thing.");
        assert_eq!(launched.record.env["PATH"], env("PATH").unwrap());
        assert_eq!(launched.record.allow, prepared.allowed);
        // Without namespaces the shim logs its own calls through a socket the agent reaches:
        // no call runner, and the record says the calls log is not protected.
        assert!(spec.calls.is_none());
        assert_eq!(
            env(crate::shim::SOCKET_ENV).as_deref(),
            Some(paths.socket.host.to_str().unwrap())
        );
        let limits = launched.record.limits.as_ref().unwrap();
        assert!(
            limits.not_enforced[CALLS_LOG_KEY].contains("not only calls that ran"),
            "{limits:?}"
        );
    }
}
