//! A trial's MCP servers: each one's folder (a service's, hidden from the agent, where its
//! state is kept), the program the trial's call runner starts for each session with the
//! `allow_tools` it enforces, and the stdio shim (`proctor-mcp-NAME`) an agent's MCP client
//! runs to reach it.

use std::path::Path;

use proctor_sandbox::mcp::{call_name, McpProgram};
use proctor_sandbox::{AllowedProgram, Bind, SandboxSpec, ServiceSpec};
use proctor_suite::mcp::SHIM_PREFIX;

use crate::trial::context::{RunContext, Trial};
use crate::trial::error::{Stage, TrialError};
use crate::trial::paths::TrialPaths;
use crate::trial::services::{program_binds, suite_service};

/// What a trial's MCP servers add to its sandbox.
#[derive(Default)]
pub struct McpSetup {
    /// Each server's folder, as a service with no process ([`ServiceSpec::folder_only`]).
    pub folders: Vec<ServiceSpec>,
    /// Each server as the call runner runs it (`mcp:NAME`).
    pub programs: Vec<AllowedProgram>,
    /// What the servers' programs need bound to be seen inside.
    pub binds: Vec<Bind>,
}

/// The trial's MCP servers (the suite's `[[mcp_servers]]`): their programs found as a
/// service's are, their folders made, with `agent_env`'s `PATH` and `LANG` and their own `env`.
pub fn servers(
    ctx: &RunContext,
    trial: &Trial,
    paths: &TrialPaths,
    agent_env: &[(String, String)],
) -> Result<McpSetup, TrialError> {
    if !paths.namespaces && !ctx.suite.file.mcp_servers.is_empty() {
        // Without namespaces there is no call runner out of the agent's reach to relay and log
        // a session: no MCP server is started, and the trial is not the agent's to fail.
        return Err(TrialError::environment(
            "this suite's MCP servers need a sandbox with namespaces (their sessions are relayed and logged by the trial's call runner), which this machine does not give",
        ));
    }
    let image = ctx.image(&trial.planned.task).map(|img| img.as_ref());
    let mut setup = McpSetup::default();
    for server in &ctx.suite.file.mcp_servers {
        if let Some(url) = &server.url {
            let network = server
                .service
                .as_ref()
                .filter(|s| has_own_network(ctx, trial, s.get_ref()))
                .map(|s| s.get_ref().clone());
            // Inside an image, proctor runs through the host's loader and libraries.
            let proctor = ctx.proctor_command(&trial.planned.task, &paths.proctor.inside);
            setup
                .programs
                .push(bridge(server, url.get_ref(), network, proctor, agent_env));
            continue;
        }
        let (mut spec, carried) = suite_service(ctx, &server.as_service(), image, paths, agent_env)
            .map_err(|e| TrialError::harness(Stage::Launch, format!("MCP server {e}")))?;
        setup.binds.extend(carried);
        setup
            .binds
            .extend(program_binds(std::slice::from_ref(&spec), &setup.binds));
        let mut env = spec.env.clone();
        env.retain(|(k, _)| k != proctor_sandbox::SERVICE_DIR_ENV);
        env.push((
            proctor_sandbox::SERVICE_DIR_ENV.to_string(),
            SandboxSpec::service_dir_inside(&spec.name)
                .display()
                .to_string(),
        ));
        setup.programs.push(AllowedProgram {
            name: call_name(&spec.name),
            program: spec.argv[0].clone().into(),
            mcp: Some(McpProgram {
                argv: std::mem::take(&mut spec.argv),
                env,
                cwd: spec.cwd.clone(),
                allow_tools: server.allowed_tools(),
                network: None,
            }),
        });
        setup.folders.push(spec);
    }
    Ok(setup)
}

/// A streamable-HTTP server as the call runner runs it: proctor's bridge to `url` (`argv`,
/// the command that runs proctor, then `__mcp-http URL`), started per session in `network`, the own network of the
/// service that serves it, which nothing else of the trial can reach (`None`: a sidecar's,
/// in the trial's network).
fn bridge(
    server: &proctor_suite::mcp::McpServer,
    url: &str,
    network: Option<String>,
    mut argv: Vec<String>,
    agent_env: &[(String, String)],
) -> AllowedProgram {
    let program = argv.first().cloned().unwrap_or_default();
    argv.push("__mcp-http".to_string());
    if server.legacy_sse() {
        argv.push("--sse".to_string());
    }
    argv.push(url.to_string());
    let env = agent_env
        .iter()
        .filter(|(k, _)| k == "PATH" || k == "LANG")
        .cloned()
        .collect();
    AllowedProgram {
        name: call_name(server.name.get_ref()),
        program: program.into(),
        mcp: Some(McpProgram {
            argv,
            env,
            cwd: "/".into(),
            allow_tools: server.allowed_tools(),
            network,
        }),
    }
}

/// Whether the trial's service `name` runs in a network of its own (one without an image;
/// a sidecar shares the trial's, where the bridge reaches it as the agent's container would).
fn has_own_network(ctx: &RunContext, trial: &Trial, name: &str) -> bool {
    ctx.suite
        .file
        .services
        .iter()
        .chain(&trial.task.services)
        .any(|s| s.name.get_ref() == name && s.image.is_none())
}

/// The suite's MCP servers as an agent CLI is configured with them: each one's shim in the
/// shims folder (`shims`, as seen inside) and its `allow_tools`.
pub fn client_access(
    servers: &[proctor_suite::mcp::McpServer],
    shims: &Path,
) -> Vec<proctor_agents::McpServerAccess> {
    servers
        .iter()
        .map(|s| proctor_agents::McpServerAccess {
            name: s.name.get_ref().clone(),
            command: shims.join(format!("{SHIM_PREFIX}{}", s.name.get_ref())),
            allow_tools: s.allowed_tools(),
        })
        .collect()
}

/// The stdio shim of MCP server `name`: the command an agent's MCP client runs.
pub fn shim_script(name: &str, proctor: &[String]) -> String {
    let proctor: Vec<String> = proctor.iter().map(|a| format!("'{a}'")).collect();
    format!(
        "#!/bin/sh\n# proctor MCP shim: a session with MCP server `{name}`, every message logged.\nexec {} __mcp '{name}'\n",
        proctor.join(" ")
    )
}

/// Writes one shim per MCP server of the suite into the shims folder `dir`.
pub fn write_shims(dir: &Path, proctor: &[String], ctx: &RunContext) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for server in &ctx.suite.file.mcp_servers {
        let name = server.name.get_ref();
        let path = dir.join(format!("{SHIM_PREFIX}{name}"));
        std::fs::write(&path, shim_script(name, proctor))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_mcp_shim_runs_proctors_mcp_client_end_for_its_server() {
        let s = shim_script("notes", &["/run/proctor/bin/proctor".to_string()]);
        assert!(s.starts_with("#!/bin/sh\n"), "{s}");
        assert!(
            s.ends_with("exec '/run/proctor/bin/proctor' __mcp 'notes'\n"),
            "{s}"
        );
    }
}
