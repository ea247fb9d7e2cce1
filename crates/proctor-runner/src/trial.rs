//! One trial, step by step (docs/design.md, "A trial, step by step"): lay out the workspace, start
//! the calls log, run the agent (and services) in a sandbox until it has fully stopped, capture
//! the end state into the store, run the checks over it with holdouts laid in, and score.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proctor_agents::{adapter_for, LaunchContext, SessionContext};
use proctor_sandbox::diff::{self, Manifest};
use proctor_sandbox::{
    Bind, HttpGuard, HttpProbe, SandboxReport, SandboxSpec, ServiceSpec, Workspace,
};
use proctor_score::endstate::{AgentEnd, ChangeKind, CheckRun, EndState, FileChange, ServiceEnd};
use proctor_score::Files;
use proctor_store::RunHandle;
use proctor_suite::model::AgentKind;
use proctor_suite::model::{Network, Task};
use proctor_suite::plan::{Plan, PlannedTrial};
use proctor_suite::Suite;

use crate::allow::{resolve, Allowed};
use crate::calls::{read_log, CallsLog};
use crate::layers::{copy_tree, LayerCache};
use crate::record::{redact_env, Hashes, LaunchRecord, TrialRecord, RECORD_VERSION};

/// Where the workspace appears inside the sandbox.
pub const WORKSPACE_INSIDE: &str = "/workspace";
/// The agent's private HOME inside the sandbox.
pub const HOME_INSIDE: &str = "/home/agent";
const RUN_INSIDE: &str = "/run/proctor";

/// How trials are isolated in this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Isolation {
    /// Overlay workspace (else a copy diffed against a manifest).
    pub overlay: bool,
    /// User, mount, PID, IPC, UTS and network namespaces (else none at all).
    pub namespaces: bool,
}

impl Isolation {
    /// The label recorded in run.json and trial records.
    pub fn label(self) -> &'static str {
        match (self.overlay, self.namespaces) {
            (true, _) => "overlay",
            (false, true) => "copy",
            (false, false) => "copy-no-namespaces",
        }
    }
}

/// What every trial of a run shares.
pub struct RunContext<'a> {
    /// The suite.
    pub suite: &'a Suite,
    /// The plan.
    pub plan: &'a Plan,
    /// The run in the store.
    pub run: &'a RunHandle,
    /// Hidden from every agent: the store's folder.
    pub store_root: PathBuf,
    /// The host paths hidden from every agent and check ([`hidden_paths`]).
    pub hide: Vec<PathBuf>,
    /// Prepared lower layers.
    pub layers: LayerCache,
    /// The isolation of this run.
    pub isolation: Isolation,
    /// The proctor binary (the sandbox init, the shim and the script agent).
    pub proctor_exe: PathBuf,
    /// Folders searched for allowed commands and service programs.
    pub search_path: Vec<PathBuf>,
    /// Scratch space for trials' overlay layers, removed after capture.
    pub work_root: PathBuf,
    /// Folder for calls-log sockets (short paths: Unix sockets have a 108-byte limit).
    pub socket_root: PathBuf,
    /// Grace between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// Copy mode: the manifest of each prepared start state, built once.
    pub manifests: Mutex<BTreeMap<String, Arc<Manifest>>>,
    /// Numbers sockets uniquely.
    pub sockets: AtomicU64,
    /// Each real agent's preflight (installed version and flags), checked once per variant.
    pub preflights: Mutex<BTreeMap<String, Result<Option<proctor_agents::AgentInfo>, String>>>,
}

impl RunContext<'_> {
    /// The variant's preflight, run on its first trial and remembered: `Err` names what is
    /// missing (the CLI, a flag), and every trial of the variant is then `errored` with it.
    pub fn preflight(
        &self,
        variant: &proctor_suite::model::Variant,
        adapter: &dyn proctor_agents::Adapter,
    ) -> Result<(), String> {
        let id = variant.id.get_ref().clone();
        let mut map = self
            .preflights
            .lock()
            .map_err(|_| "the preflight cache is poisoned".to_string())?;
        let entry = map
            .entry(id)
            .or_insert_with(|| adapter.preflight().map_err(|e| e.to_string()));
        entry.as_ref().map(|_| ()).map_err(Clone::clone)
    }
}

/// The end-state workspace's files: changed files from the capture, the rest from the lowers.
pub struct EndStateFiles {
    changes_dir: PathBuf,
    changed: BTreeMap<String, ChangeKind>,
    lowers: Vec<PathBuf>,
}

impl EndStateFiles {
    /// Reads through `changes_dir` (files the agent added or changed) over `lowers`.
    pub fn new(
        changes_dir: PathBuf,
        changes: &[FileChange],
        lowers: Vec<PathBuf>,
    ) -> EndStateFiles {
        EndStateFiles {
            changes_dir,
            changed: changes.iter().map(|c| (c.path.clone(), c.kind)).collect(),
            lowers,
        }
    }
}

impl Files for EndStateFiles {
    fn read(&self, path: &str) -> Option<Vec<u8>> {
        if path.split('/').any(|c| c == "..") {
            return None;
        }
        match self.changed.get(path) {
            Some(ChangeKind::Deleted) => None,
            Some(_) => std::fs::read(self.changes_dir.join(path)).ok(),
            None => self
                .lowers
                .iter()
                .find_map(|l| std::fs::read(l.join(path)).ok()),
        }
    }
}

struct Harness {
    notes: Vec<String>,
}

/// Runs one trial to a record; harness problems become an `errored` record, never a panic.
pub fn run_trial(ctx: &RunContext, planned: &PlannedTrial) -> TrialRecord {
    let t0 = Instant::now();
    let mut timings = BTreeMap::new();
    let mut harness = Harness { notes: Vec::new() };
    let (Some(task), Some(variant)) = (
        ctx.suite.task(&planned.task),
        ctx.suite.variant(&planned.variant),
    ) else {
        return errored(
            ctx,
            planned,
            "the plan names a task or variant the suite does not have".into(),
            timings,
        );
    };
    let settings = ctx.suite.settings(task, variant);
    let trial_dir = match ctx.run.start_trial_dir(&planned.id) {
        Ok(d) => d,
        Err(e) => {
            return errored(
                ctx,
                planned,
                format!("cannot create the trial folder: {e}"),
                timings,
            )
        }
    };
    let work = ctx.work_root.join(&planned.id);
    let _ = proctor_sandbox::remove_tree(&work);
    if let Err(e) = std::fs::create_dir_all(&work) {
        return errored(
            ctx,
            planned,
            format!("cannot create the trial's scratch folder: {e}"),
            timings,
        );
    }

    // 1. Workspace layers.
    let (lowers, laid_in) =
        match ctx
            .layers
            .start_state(ctx.suite, variant, planned, &ctx.plan.fixture_hash)
        {
            Ok(l) => (l.dirs, l.laid_in),
            Err(e) => return errored(ctx, planned, format!("cannot prepare {e}"), timings),
        };
    let (workspace, copy_dir, manifest) = match prepare_workspace(ctx, &work, &lowers) {
        Ok(w) => w,
        Err(e) => {
            return errored(
                ctx,
                planned,
                format!("cannot prepare the workspace: {e}"),
                timings,
            )
        }
    };

    // 2. Shims and the calls log.
    let mut allowed = Vec::new();
    for entry in &settings.allow {
        match resolve(entry, &ctx.suite.root, &ctx.search_path) {
            Ok(a) => allowed.push(a),
            Err(e) => return errored(ctx, planned, format!("allowed command {e}"), timings),
        }
    }
    let ns = ctx.isolation.namespaces;
    let inside = |host: &Path, inner: &str| -> PathBuf {
        if ns {
            PathBuf::from(inner)
        } else {
            host.to_path_buf()
        }
    };
    let shims_host = work.join("shims");
    let agent_host = work.join("agent");
    let socket_host = ctx.socket_root.join(format!(
        "{}.sock",
        ctx.sockets.fetch_add(1, Ordering::SeqCst)
    ));
    let proctor_inside = inside(&ctx.proctor_exe, &format!("{RUN_INSIDE}/bin/proctor"));
    let socket_inside = inside(&socket_host, &format!("{RUN_INSIDE}/calls.sock"));
    let shims_inside = inside(&shims_host, &format!("{RUN_INSIDE}/shims"));
    let agent_inside = inside(&agent_host, &format!("{RUN_INSIDE}/agent"));
    let workspace_inside = match &copy_dir {
        Some(dir) if !ns => dir.clone(),
        _ => PathBuf::from(WORKSPACE_INSIDE),
    };
    let mut binds = Vec::new();
    if let Err(e) = write_shims(&shims_host, &allowed, &proctor_inside, ns, &mut binds) {
        return errored(
            ctx,
            planned,
            format!("cannot write the shims: {e}"),
            timings,
        );
    }
    let calls_path = trial_dir.join("calls.jsonl");
    let _ = std::fs::remove_file(&calls_path);
    let calls_log = match CallsLog::start(&socket_host, &calls_path, t0) {
        Ok(c) => c,
        Err(e) => {
            return errored(
                ctx,
                planned,
                format!(
                    "cannot start the calls log at {}: {e}",
                    socket_host.display()
                ),
                timings,
            )
        }
    };

    // 3. The agent's launch.
    let script = match variant.agent {
        // A script variant without a script is the null agent, which does nothing; only proctor
        // makes one (for `validate --oracle`), since `validate` rejects it in a suite.
        proctor_suite::model::AgentKind::Script if variant.script.is_none() => {
            Some(proctor_suite::script::Script::default())
        }
        proctor_suite::model::AgentKind::Script => match ctx.suite.script(variant, &planned.task) {
            Ok(s) => Some(s),
            Err(p) => {
                return errored(
                    ctx,
                    planned,
                    format!("cannot read the script: {p}"),
                    timings,
                )
            }
        },
        _ => None,
    };
    let adapter = match adapter_for(variant, script) {
        Ok(a) => a,
        Err(e) => return errored(ctx, planned, e.to_string(), timings),
    };
    let prompt = ctx.suite.prompt(task, variant);
    let launch_ctx = LaunchContext {
        prompt: prompt.clone(),
        workspace: workspace_inside.clone(),
        model: variant.model.clone(),
        proctor: proctor_inside.clone(),
        agent_dir: agent_inside.clone(),
    };
    // Real agent CLIs: checked once per variant, and given a model endpoint inside the trial.
    let real_agent = !matches!(variant.agent, AgentKind::Script | AgentKind::Command);
    if real_agent {
        if let Err(why) = ctx.preflight(variant, adapter.as_ref()) {
            return not_started(ctx, planned, why, timings);
        }
    }
    let model_script = crate::model::script_path(ctx.suite, variant, &planned.task);
    let model_port = match &model_script {
        Some(_) => match crate::model::free_port() {
            Ok(p) => Some(p),
            Err(e) => {
                return errored(
                    ctx,
                    planned,
                    format!("cannot pick a port for the model: {e}"),
                    timings,
                )
            }
        },
        None => None,
    };
    let session = SessionContext {
        model_base_url: model_port.map(|p| format!("http://127.0.0.1:{p}")),
        allow: allowed.iter().map(|a| a.name.clone()).collect(),
        api_key: None,
    };
    let launch = match adapter.launch_session(&launch_ctx, &session) {
        Ok(l) => l,
        Err(e) => return not_started(ctx, planned, e.to_string(), timings),
    };
    if let Err(e) = std::fs::create_dir_all(&agent_host).and_then(|_| {
        launch
            .files
            .iter()
            .try_for_each(|(name, bytes)| std::fs::write(agent_host.join(name), bytes))
    }) {
        return errored(
            ctx,
            planned,
            format!("cannot write the agent's files: {e}"),
            timings,
        );
    }
    let home = if ns {
        PathBuf::from(HOME_INSIDE)
    } else {
        work.join("home")
    };
    if !ns {
        let _ = std::fs::create_dir_all(&home);
        let _ = std::fs::create_dir_all(work.join("tmp"));
    }
    let mut env = base_env(&shims_inside, &home);
    if !ns {
        env.retain(|(k, _)| k != "TMPDIR");
        env.push(("TMPDIR".into(), work.join("tmp").display().to_string()));
    }
    env.push((
        "PROCTOR_CALLS_SOCKET".into(),
        socket_inside.display().to_string(),
    ));
    for s in &ctx.suite.file.services {
        env.extend(s.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    env.extend(variant.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env.extend(launch.env.iter().cloned());
    if ns {
        binds.push(Bind {
            host: ctx.proctor_exe.clone(),
            inside: proctor_inside.clone(),
            read_only: true,
        });
        binds.push(Bind {
            host: socket_host.clone(),
            inside: socket_inside.clone(),
            read_only: false,
        });
        binds.push(Bind {
            host: shims_host.clone(),
            inside: shims_inside.clone(),
            read_only: true,
        });
        binds.push(Bind {
            host: agent_host.clone(),
            inside: agent_inside.clone(),
            read_only: true,
        });
    }

    // 4. Services (the model endpoint first, so every suite service can rely on it).
    let services_host = work.join("services");
    let mut services = Vec::new();
    if let (Some(script), Some(port)) = (&model_script, model_port) {
        let dir = services_host.join(crate::model::MODEL_SERVICE);
        if let Err(e) = std::fs::create_dir_all(&dir) {
            return errored(
                ctx,
                planned,
                format!("cannot create the model's folder: {e}"),
                timings,
            );
        }
        let log = services_host.join(format!("{}.log", crate::model::MODEL_SERVICE));
        services.push(crate::model::service(
            &ctx.proctor_exe,
            script,
            port,
            task,
            &ctx.suite.root,
            dir,
            log,
        ));
    }
    if real_agent {
        if let Some(agents) = proctor_agents::cli::agents_dir().filter(|d| d.is_dir()) {
            env.push(("PROCTOR_AGENTS_DIR".into(), agents.display().to_string()));
            if ns {
                binds.push(Bind {
                    host: agents.clone(),
                    inside: agents,
                    read_only: true,
                });
            }
        }
    }
    for s in &ctx.suite.file.services {
        match service_spec(ctx, s, &services_host, &env) {
            Ok(spec) => services.push(spec),
            Err(e) => return errored(ctx, planned, e, timings),
        }
    }

    let command = if real_agent {
        login_path_wrapper(&shims_inside, &launch.argv)
    } else {
        launch.argv.clone()
    };
    // Service programs (and proctor itself, which serves the model) that live under a folder the
    // sandbox makes private (/tmp, /run, /home) would be invisible inside: bind each read-only at
    // its own path.
    if ns {
        for s in &services {
            if let Some(prog) = s.argv.first().map(PathBuf::from) {
                let private = ["/tmp", "/run", "/home"]
                    .iter()
                    .any(|d| prog.starts_with(d));
                if private && prog.is_absolute() && !binds.iter().any(|b| b.inside == prog) {
                    binds.push(Bind {
                        host: prog.clone(),
                        inside: prog,
                        read_only: true,
                    });
                }
            }
        }
    }
    let launch_record = LaunchRecord {
        agent: variant.agent.as_str().into(),
        model: variant.model.clone(),
        prompt,
        argv: command.clone(),
        env: redact_env(&env),
        allow: allowed.clone(),
    };
    let spec = SandboxSpec {
        init_exe: ctx.proctor_exe.clone(),
        namespaces: ns,
        workspace: workspace.clone(),
        workspace_inside: workspace_inside.clone(),
        hide: ctx.hide.clone(),
        binds,
        network: sandbox_network(settings.network),
        env,
        home_inside: home,
        services,
        command: command.clone(),
        stdout: work.join("agent.stdout"),
        stderr: work.join("agent.stderr"),
        wall_timeout: settings.wall_timeout,
        grace: ctx.grace,
    };
    timings.insert("setup".into(), ms(t0.elapsed()));

    // 5-6. Run until full stop.
    let t_agent = Instant::now();
    let report = proctor_sandbox::run(&spec);
    calls_log.finish();
    timings.insert("agent".into(), ms(t_agent.elapsed()));
    let mut report = match report {
        Ok(r) => r,
        Err(e) => {
            let _ = proctor_sandbox::remove_tree(&work);
            return errored(ctx, planned, format!("the sandbox failed: {e}"), timings);
        }
    };
    // A service (the model endpoint too) that did not come up: its output is kept as evidence
    // and its last lines go in the reason, which otherwise says only how it ended.
    if let (Some(why), Some(name)) = (report.not_started.clone(), failed_service(&report)) {
        let kept = format!("services/{name}.log");
        let evidence = match keep_service_log(
            &services_host.join(format!("{name}.log")),
            &trial_dir.join(&kept),
        ) {
            Ok(Some(tail)) => format!("; its output ends: {tail} (all of it in {kept})"),
            Ok(None) => "; it printed nothing".to_string(),
            Err(e) => format!("; its output could not be kept: {e}"),
        };
        report.not_started = Some(format!("{why}{evidence}"));
    }

    // 8. Capture, before anything is scored.
    let t_capture = Instant::now();
    let stdout = std::fs::read(&spec.stdout).unwrap_or_default();
    let stderr = std::fs::read(&spec.stderr).unwrap_or_default();
    let output = adapter.read(&stdout, &stderr);
    let mut end = EndState {
        answer: output.answer.clone(),
        ..EndState::default()
    };
    let store_notes = write_agent_output(&trial_dir, &output, &stdout, &stderr);
    harness.notes.extend(store_notes);
    let changes = match (&workspace, &copy_dir, &manifest) {
        (Workspace::Overlay { upper, .. }, _, _) => diff::overlay_changes(upper, &lowers, &[]),
        (_, Some(dir), Some(m)) => diff::manifest_changes(m, dir, &[]),
        _ => Ok(Vec::new()),
    };
    let end_root = match (&workspace, &copy_dir) {
        (Workspace::Overlay { upper, .. }, _) => upper.clone(),
        (_, Some(dir)) => dir.clone(),
        _ => work.clone(),
    };
    match changes {
        Ok(changes) => match capture_changes(&end_root, &changes, &trial_dir.join("changes")) {
            Ok(list) => end.changes = list,
            Err(e) => harness
                .notes
                .push(format!("cannot capture the workspace changes: {e}")),
        },
        Err(e) => harness
            .notes
            .push(format!("cannot read the workspace changes: {e}")),
    }
    match read_log(&calls_path) {
        Ok((calls, bad)) => {
            end.calls = calls;
            if bad > 0 {
                harness.notes.push(format!(
                    "{bad} malformed line(s) in calls.jsonl were skipped"
                ));
            }
        }
        Err(e) => harness.notes.push(format!("cannot read calls.jsonl: {e}")),
    }
    for s in &ctx.suite.file.services {
        let name = s.name.get_ref();
        let from = services_host.join(name);
        let to = trial_dir.join("services").join(name);
        let _ = std::fs::remove_dir_all(&to);
        if let Err(e) = copy_tree(&from, &to) {
            harness
                .notes
                .push(format!("cannot copy the state of service `{name}`: {e}"));
        }
        let state = s.state.as_ref().map(|f| to.join(f.get_ref()));
        let mut service = service_end(state.as_deref());
        match read_events(&to.join("events.jsonl")) {
            Ok(events) => service.events = events,
            Err(e) => harness.notes.push(format!("service `{name}`: {e}")),
        }
        end.services.insert(name.clone(), service);
    }
    end.agent = agent_end(&report);
    // What the agent CLI's own permission layer refused: logged as `denied` calls.
    let mut next_seq = end.calls.iter().map(|c| c.seq).max().unwrap_or(0);
    for d in &output.denied {
        next_seq += 1;
        end.calls
            .push(denied_call(next_seq, d, &allowed, end.agent.wall_seconds));
    }
    if model_script.is_some() {
        let name = crate::model::MODEL_SERVICE;
        let to = trial_dir.join("services").join(name);
        let _ = std::fs::remove_dir_all(&to);
        if let Err(e) = copy_tree(&services_host.join(name), &to) {
            harness
                .notes
                .push(format!("cannot copy the model's wire log: {e}"));
        }
    }
    let mut ledgers = crate::model::Ledgers::default();
    let mut model_faults = Vec::new();
    if model_script.is_some() {
        let wire_log = trial_dir
            .join("services")
            .join(crate::model::MODEL_SERVICE)
            .join("wire.jsonl");
        match crate::model::read_wire(&wire_log) {
            Ok(wire) => {
                model_faults = wire.faults;
                ledgers.wire = Some(wire.usage);
            }
            Err(e) if report.not_started.is_none() => harness.notes.push(e),
            Err(_) => {}
        }
    }
    if let Some(u) = &output.usage {
        ledgers.agent_reported = Some(crate::model::Usage {
            source: "agent-reported".into(),
            input: u.input,
            output: u.output,
            cache_read: u.cache_read,
            cache_write: u.cache_write,
            requests: u.requests,
        });
    }
    ledgers.agent_reported_cost_usd = output.cost_usd;
    if real_agent {
        let usage = ledgers
            .wire
            .clone()
            .or_else(|| ledgers.agent_reported.clone())
            .unwrap_or_default();
        match crate::model::cost(ctx.suite, variant.model.as_deref(), &usage) {
            Ok(usd) => ledgers.cost_usd = Some(usd),
            Err(missing) => ledgers.cost_missing = missing,
        }
    }
    timings.insert("capture".into(), ms(t_capture.elapsed()));

    // 7. Checks over the end state with holdouts laid in, in fresh sandboxes.
    let t_checks = Instant::now();
    let holdout = ctx.suite.holdout_dir(&planned.task);
    let hashes = Hashes {
        suite: ctx.plan.suite_hash.clone(),
        fixture: ctx.plan.fixture_hash.clone(),
        mutation: planned.mutation.clone(),
        holdout: holdout.as_deref().map(hash_files).unwrap_or_default(),
        variant_files: laid_in,
    };
    if report.not_started.is_none() {
        for (n, check) in task_checks(task).into_iter().enumerate() {
            let timeout = check
                .1
                .map(Duration::from_secs)
                .unwrap_or(settings.validation_timeout);
            let run = run_check(
                &CheckEnv::of(ctx),
                &work,
                n,
                &check.0,
                timeout,
                holdout.as_deref(),
                &end_root,
                &workspace,
                &lowers,
            );
            let checks_dir = trial_dir.join("checks");
            let _ = std::fs::create_dir_all(&checks_dir);
            let _ = proctor_store::atomic_write_json_unsynced(
                checks_dir.join(format!("{n}.json")),
                &run,
            );
            let _ = proctor_store::atomic_write_unsynced(
                checks_dir.join(format!("{n}.stdout")),
                run.stdout.as_bytes(),
            );
            end.checks.insert(check.0.clone(), run);
        }
    }
    timings.insert("checks".into(), ms(t_checks.elapsed()));

    // Score: a pure function of the captured end state.
    let files = EndStateFiles::new(
        trial_dir.join("changes").join("files"),
        &end.changes,
        lowers.clone(),
    );
    let mut faults = proctor_score::Faults {
        faults: model_faults,
    };
    faults.faults.extend(
        harness
            .notes
            .iter()
            .map(|n| (proctor_score::ErrorKind::Harness, n.clone())),
    );
    let verdict = proctor_score::score(task, &end, &files, &faults, settings.undo_window);
    let _ = proctor_sandbox::remove_tree(&work);
    timings.insert("total".into(), ms(t0.elapsed()));
    TrialRecord {
        record_version: RECORD_VERSION,
        plan: planned.clone(),
        hashes,
        isolation: serde_json::to_value(&report.isolation).unwrap_or_default(),
        launch: launch_record,
        settings: serde_json::to_value(&settings).unwrap_or_default(),
        timings_ms: timings,
        end_state: end,
        outcome: verdict.outcome.label().to_string(),
        reason: verdict.reason.clone(),
        verdict: Some(verdict),
        ledgers,
        services: serde_json::to_value(&report.services).unwrap_or_default(),
        harness_notes: harness.notes,
    }
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

fn errored(
    ctx: &RunContext,
    planned: &PlannedTrial,
    reason: String,
    mut timings: BTreeMap<String, f64>,
) -> TrialRecord {
    timings.entry("total".into()).or_insert(0.0);
    TrialRecord {
        record_version: RECORD_VERSION,
        plan: planned.clone(),
        hashes: Hashes {
            suite: ctx.plan.suite_hash.clone(),
            fixture: ctx.plan.fixture_hash.clone(),
            mutation: planned.mutation.clone(),
            ..Hashes::default()
        },
        isolation: serde_json::Value::Null,
        launch: LaunchRecord::default(),
        settings: serde_json::Value::Null,
        timings_ms: timings,
        end_state: EndState {
            agent: AgentEnd {
                started: false,
                not_started: Some(reason.clone()),
                ..AgentEnd::default()
            },
            ..EndState::default()
        },
        verdict: None,
        ledgers: crate::model::Ledgers::default(),
        outcome: "errored".into(),
        reason: format!("harness: {reason}"),
        services: serde_json::Value::Null,
        harness_notes: vec![reason],
    }
}

fn prepare_workspace(
    ctx: &RunContext,
    work: &Path,
    lowers: &[PathBuf],
) -> std::io::Result<(Workspace, Option<PathBuf>, Option<Arc<Manifest>>)> {
    if ctx.isolation.overlay {
        let upper = work.join("upper");
        let ovwork = work.join("ovwork");
        std::fs::create_dir_all(&upper)?;
        std::fs::create_dir_all(&ovwork)?;
        return Ok((
            Workspace::Overlay {
                lowers: lowers.to_vec(),
                upper,
                work: ovwork,
            },
            None,
            None,
        ));
    }
    let dir = work.join("ws");
    // Lowest layer first, so upper layers overwrite.
    for layer in lowers.iter().rev() {
        copy_tree(layer, &dir)?;
    }
    let key = lowers
        .iter()
        .map(|l| l.display().to_string())
        .collect::<Vec<_>>()
        .join("|");
    let manifest = {
        let cached = ctx.manifests.lock().ok().and_then(|m| m.get(&key).cloned());
        match cached {
            Some(m) => m,
            None => {
                let m = Arc::new(Manifest::build(&dir).map_err(std::io::Error::other)?);
                if let Ok(mut map) = ctx.manifests.lock() {
                    map.insert(key, m.clone());
                }
                m
            }
        }
    };
    Ok((
        Workspace::Bind { dir: dir.clone() },
        Some(dir),
        Some(manifest),
    ))
}

fn write_shims(
    dir: &Path,
    allowed: &[Allowed],
    proctor: &Path,
    ns: bool,
    binds: &mut Vec<Bind>,
) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)?;
    for a in allowed {
        let real = if ns {
            let inside = PathBuf::from(format!("{RUN_INSIDE}/allow/{}", a.name));
            binds.push(Bind {
                host: a.real.clone(),
                inside: inside.clone(),
                read_only: true,
            });
            inside
        } else {
            a.real.clone()
        };
        let script = format!(
            "#!/bin/sh\n# proctor shim: logs this call, then runs the real `{name}`.\nexec '{proctor}' __shim '{name}' '{real}' \"$@\"\n",
            name = a.name,
            proctor = proctor.display(),
            real = real.display()
        );
        let path = dir.join(&a.name);
        std::fs::write(&path, script)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}

fn base_env(shims: &Path, home: &Path) -> Vec<(String, String)> {
    let host_path = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    vec![
        ("PATH".into(), format!("{}:{host_path}", shims.display())),
        ("HOME".into(), home.display().to_string()),
        ("TMPDIR".into(), "/tmp".into()),
        ("LANG".into(), "C.UTF-8".into()),
        ("TERM".into(), "dumb".into()),
        ("NO_COLOR".into(), "1".into()),
        ("USER".into(), "agent".into()),
        ("PYTHONDONTWRITEBYTECODE".into(), "1".into()),
    ]
}

/// The host paths hidden from every agent and check of a run: the suite and the store (a
/// folder inside another hidden folder is hidden with it). Computed once per run.
pub fn hidden_paths(suite_root: &Path, store_root: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = [suite_root, store_root]
        .iter()
        .map(|p| p.canonicalize().unwrap_or_else(|_| p.to_path_buf()))
        .collect();
    v.sort();
    v.dedup();
    let all = v.clone();
    v.retain(|p| !all.iter().any(|q| q != p && p.starts_with(q)));
    v
}

fn sandbox_network(n: Network) -> proctor_sandbox::Network {
    match n {
        Network::None => proctor_sandbox::Network::None,
        Network::Loopback => proctor_sandbox::Network::Loopback,
        Network::Host => proctor_sandbox::Network::Host,
    }
}

fn service_spec(
    ctx: &RunContext,
    s: &proctor_suite::model::Service,
    services_host: &Path,
    agent_env: &[(String, String)],
) -> Result<ServiceSpec, String> {
    let name = s.name.get_ref().clone();
    let mut argv = s.command.get_ref().clone();
    let Some(prog) = argv.first().cloned() else {
        return Err(format!("service `{name}` has an empty command"));
    };
    let real = if prog.contains('/') {
        ctx.suite.root.join(&prog)
    } else {
        crate::allow::which(&prog, &ctx.search_path).ok_or_else(|| {
            format!("service `{name}`: `{prog}` was not found on PATH or beside proctor")
        })?
    };
    argv[0] = real.display().to_string();
    let dir_host = services_host.join(&name);
    std::fs::create_dir_all(&dir_host).map_err(|e| format!("service `{name}`: {e}"))?;
    let mut env: Vec<(String, String)> = agent_env
        .iter()
        .filter(|(k, _)| k == "PATH" || k == "LANG")
        .cloned()
        .collect();
    env.extend(s.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    Ok(ServiceSpec {
        name: name.clone(),
        argv,
        cwd: ctx
            .suite
            .root
            .canonicalize()
            .unwrap_or_else(|_| ctx.suite.root.clone()),
        env,
        dir_host: dir_host.clone(),
        log: services_host.join(format!("{name}.log")),
        ready: s.ready.as_ref().map(|r| HttpProbe {
            url: r.http.get_ref().clone(),
            timeout: Duration::from_secs(r.timeout_seconds),
        }),
        guard: s
            .guard
            .as_ref()
            .map(|g| HttpGuard::new(g.http.get_ref().clone(), g.expect.clone())),
    })
}

/// Reads a service's `events.jsonl`; a missing file is no events, a malformed line an error.
fn read_events(path: &Path) -> Result<Vec<proctor_score::ServiceEvent>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot read events.jsonl: {e}")),
    };
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| format!("events.jsonl line {}: {e}", i + 1))
        })
        .collect()
}

fn service_end(state: Option<&Path>) -> ServiceEnd {
    let Some(path) = state else {
        return ServiceEnd {
            events: Vec::new(),
            state: None,
            state_error: Some("the suite names no state file for this service".into()),
        };
    };
    match std::fs::read(path) {
        Err(e) => ServiceEnd {
            events: Vec::new(),
            state: None,
            state_error: Some(format!(
                "the service wrote no {}: {e}",
                path.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            )),
        },
        Ok(bytes) => match serde_json::from_slice(&bytes) {
            Ok(v) => ServiceEnd {
                events: Vec::new(),
                state: Some(v),
                state_error: None,
            },
            Err(e) => ServiceEnd {
                events: Vec::new(),
                state: None,
                state_error: Some(format!("the state file is not JSON: {e}")),
            },
        },
    }
}

/// Lines of a failed service's output quoted in the trial's reason.
const SERVICE_TAIL_LINES: usize = 5;
/// Characters of each quoted line.
const SERVICE_TAIL_WIDTH: usize = 200;
/// Bytes at the end of a service's output read for the quote.
const SERVICE_TAIL_BYTES: u64 = 64 * 1024;

/// The service that kept the agent from starting: the first that was started but failed its
/// readiness probe or its guard.
fn failed_service(report: &SandboxReport) -> Option<&str> {
    let failed =
        |p: &Option<proctor_sandbox::ProbeOutcome>| p.as_ref().is_some_and(|o| !o.passed());
    report
        .services
        .iter()
        .find(|s| s.started && (failed(&s.ready) || failed(&s.guard)))
        .map(|s| s.name.as_str())
}

/// Copies a service's output (stdout and stderr, interleaved as written) from `log` to `to`
/// and returns its last lines, quoted; `None` when it printed nothing (then nothing is kept).
fn keep_service_log(log: &Path, to: &Path) -> std::io::Result<Option<String>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = match std::fs::File::open(log) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(None);
    }
    file.seek(SeekFrom::Start(len.saturating_sub(SERVICE_TAIL_BYTES)))?;
    let mut end = Vec::new();
    file.read_to_end(&mut end)?;
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::copy(log, to)?;
    let tail = last_lines(&end, SERVICE_TAIL_LINES, SERVICE_TAIL_WIDTH);
    Ok((!tail.is_empty()).then_some(tail))
}

/// The last `lines` non-blank lines of `bytes`, each cut to `width` characters (marked `…`),
/// joined by ` ⏎ ` so that they stay on one line of a table.
fn last_lines(bytes: &[u8], lines: usize, width: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut picked: Vec<String> = text
        .lines()
        .map(|l| l.trim_end())
        .filter(|l| !l.trim().is_empty())
        .rev()
        .take(lines)
        .map(|l| {
            if l.chars().count() > width {
                let cut: String = l.chars().take(width).collect();
                format!("{cut}…")
            } else {
                l.to_string()
            }
        })
        .collect();
    picked.reverse();
    picked.join(" ⏎ ")
}

fn agent_end(report: &SandboxReport) -> AgentEnd {
    AgentEnd {
        started: report.not_started.is_none(),
        not_started: report.not_started.clone(),
        exit_code: report.exit_code,
        signal: report.signal,
        timed_out: report.timed_out,
        wall_seconds: report.wall.as_secs_f64(),
        cpu_seconds: report.agent_cpu.map(|d| d.as_secs_f64()),
    }
}

fn write_agent_output(
    trial_dir: &Path,
    output: &proctor_agents::AgentOutput,
    stdout: &[u8],
    stderr: &[u8],
) -> Vec<String> {
    let mut notes = Vec::new();
    let mut transcript = String::new();
    for v in &output.transcript {
        transcript.push_str(&v.to_string());
        transcript.push('\n');
    }
    // A file that would be empty is not written: its absence means "nothing" (one inode less
    // per trial on the store's disk, where inode allocation is the costliest step).
    for (name, bytes) in [
        ("transcript.jsonl", transcript.as_bytes()),
        ("answer.txt", output.answer.as_bytes()),
        ("agent.stdout", stdout),
        ("agent.stderr", stderr),
    ] {
        if bytes.is_empty() {
            continue;
        }
        if let Err(e) = proctor_store::atomic_write_unsynced(trial_dir.join(name), bytes) {
            notes.push(format!("cannot write {name}: {e}"));
        }
    }
    notes
}

/// Copies every added or changed file into `to/files/` and records the list in
/// `to/changes.json`, so the end state can be rebuilt from fixture + mutation + changes. A trial
/// that changed nothing gets no `to/` at all, and one that changed no file's content no
/// `to/files/`.
fn capture_changes(
    root: &Path,
    changes: &[diff::Change],
    to: &Path,
) -> std::io::Result<Vec<FileChange>> {
    let _ = std::fs::remove_dir_all(to);
    if changes.is_empty() {
        return Ok(Vec::new());
    }
    std::fs::create_dir_all(to)?;
    let mut out = Vec::new();
    for c in changes {
        let rel = c.path.to_string_lossy().replace('\\', "/");
        let kind = match c.kind {
            diff::ChangeKind::Added => ChangeKind::Added,
            diff::ChangeKind::Modified => ChangeKind::Changed,
            diff::ChangeKind::ModeChanged => ChangeKind::ModeChanged,
            diff::ChangeKind::Deleted => ChangeKind::Deleted,
        };
        let is_dir = c.entry == diff::EntryKind::Dir;
        let mut rec = FileChange {
            path: rel.clone(),
            kind,
            dir: is_dir,
            mode: c.mode_after,
            hash: None,
            size: None,
        };
        if kind != ChangeKind::Deleted && c.entry == diff::EntryKind::File {
            let src = root.join(&c.path);
            let dest = to.join("files").join(&c.path);
            if let Some(parent) = dest.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let bytes = std::fs::read(&src)?;
            rec.hash = Some(blake3::hash(&bytes).to_hex().to_string());
            rec.size = Some(bytes.len() as u64);
            std::fs::write(&dest, &bytes)?;
            if let Some(mode) = c.mode_after {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(mode & 0o7777))?;
            }
        }
        out.push(rec);
    }
    proctor_store::atomic_write_json_unsynced(to.join("changes.json"), &out)
        .map_err(std::io::Error::other)?;
    Ok(out)
}

fn hash_files(dir: &Path) -> BTreeMap<String, String> {
    walkdir::WalkDir::new(dir)
        .sort_by_file_name()
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| {
            let rel = e
                .path()
                .strip_prefix(dir)
                .ok()?
                .to_string_lossy()
                .into_owned();
            let bytes = std::fs::read(e.path()).ok()?;
            Some((rel, blake3::hash(&bytes).to_hex().to_string()))
        })
        .collect()
}

/// Every distinct check command of a task (success, rubric and caps), with its own timeout.
pub fn task_checks(task: &Task) -> Vec<(String, Option<u64>)> {
    let mut out: Vec<(String, Option<u64>)> = Vec::new();
    let mut add = |a: &proctor_suite::Assertion| {
        for c in a.checks() {
            if !out.iter().any(|(cmd, _)| cmd == &c.command) {
                out.push((c.command.clone(), c.timeout_seconds));
            }
        }
    };
    for a in task.success.get_ref().assertions() {
        add(a.get_ref());
    }
    for criterion in &task.rubric {
        for level in &criterion.levels {
            for a in &level.get_ref().all {
                add(a.get_ref());
            }
        }
    }
    for cap in &task.caps {
        for a in &cap.any {
            add(a.get_ref());
        }
    }
    out
}

/// Bytes of a check's output kept as its tail.
const TAIL_BYTES: usize = 4096;

fn tail(bytes: &[u8]) -> String {
    let start = bytes.len().saturating_sub(TAIL_BYTES);
    String::from_utf8_lossy(&bytes[start..]).into_owned()
}

/// What running a check needs from its run: the sandbox init, the isolation, what to hide.
pub struct CheckEnv {
    /// The sandbox init binary.
    pub proctor_exe: PathBuf,
    /// Whether namespaces are available.
    pub namespaces: bool,
    /// Host paths hidden from the check.
    pub hide: Vec<PathBuf>,
    /// Between SIGTERM and SIGKILL.
    pub grace: Duration,
}

impl CheckEnv {
    /// The check environment of a run.
    pub fn of(ctx: &RunContext) -> CheckEnv {
        CheckEnv {
            proctor_exe: ctx.proctor_exe.clone(),
            namespaces: ctx.isolation.namespaces,
            hide: ctx.hide.clone(),
            grace: ctx.grace,
        }
    }
}

/// Runs one check in a fresh sandbox without network over `end_root` (the agent's upper layer
/// or copied workspace) with `holdout` laid over it; `workspace` says which kind `end_root` is.
#[allow(clippy::too_many_arguments)]
pub fn run_check(
    ctx: &CheckEnv,
    work: &Path,
    n: usize,
    command: &str,
    timeout: Duration,
    holdout: Option<&Path>,
    end_root: &Path,
    workspace: &Workspace,
    lowers: &[PathBuf],
) -> CheckRun {
    let dir = work.join("checks").join(n.to_string());
    let failed = |e: String| CheckRun {
        command: command.into(),
        exit: None,
        timed_out: false,
        stdout_tail: String::new(),
        stderr_tail: String::new(),
        error: Some(e),
        stdout: String::new(),
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return failed(e.to_string());
    }
    let (ws, inside) = match workspace {
        Workspace::Overlay { .. } => {
            let mut layers: Vec<PathBuf> = holdout.map(Path::to_path_buf).into_iter().collect();
            layers.push(end_root.to_path_buf());
            layers.extend(lowers.iter().cloned());
            let upper = dir.join("upper");
            let ovwork = dir.join("ovwork");
            if let Err(e) =
                std::fs::create_dir_all(&upper).and_then(|_| std::fs::create_dir_all(&ovwork))
            {
                return failed(e.to_string());
            }
            (
                Workspace::Overlay {
                    lowers: layers,
                    upper,
                    work: ovwork,
                },
                PathBuf::from(WORKSPACE_INSIDE),
            )
        }
        Workspace::Bind { .. } => {
            let copy = dir.join("ws");
            let r = copy_tree(end_root, &copy)
                .and_then(|_| holdout.map_or(Ok(()), |h| copy_tree(h, &copy)));
            if let Err(e) = r {
                return failed(e.to_string());
            }
            let inside = if ctx.namespaces {
                PathBuf::from(WORKSPACE_INSIDE)
            } else {
                copy.clone()
            };
            (Workspace::Bind { dir: copy }, inside)
        }
    };
    let home = if ctx.namespaces {
        PathBuf::from(HOME_INSIDE)
    } else {
        dir.clone()
    };
    let host_path = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    let spec = SandboxSpec {
        init_exe: ctx.proctor_exe.clone(),
        namespaces: ctx.namespaces,
        workspace: ws,
        workspace_inside: inside,
        hide: ctx.hide.clone(),
        binds: Vec::new(),
        network: proctor_sandbox::Network::None,
        env: vec![
            ("PATH".into(), host_path),
            ("HOME".into(), home.display().to_string()),
            ("LANG".into(), "C.UTF-8".into()),
            ("PYTHONDONTWRITEBYTECODE".into(), "1".into()),
        ],
        home_inside: home,
        services: Vec::new(),
        command: vec!["sh".into(), "-c".into(), command.into()],
        stdout: dir.join("stdout"),
        stderr: dir.join("stderr"),
        wall_timeout: timeout,
        grace: ctx.grace,
    };
    match proctor_sandbox::run(&spec) {
        Err(e) => failed(format!("the check's sandbox failed: {e}")),
        Ok(report) => {
            let so = std::fs::read(&spec.stdout).unwrap_or_default();
            let se = std::fs::read(&spec.stderr).unwrap_or_default();
            CheckRun {
                command: command.into(),
                exit: report.exit_code,
                timed_out: report.timed_out,
                stdout_tail: tail(&so),
                stderr_tail: tail(&se),
                error: report.not_started,
                stdout: String::from_utf8_lossy(&so).into_owned(),
            }
        }
    }
}

/// A call the agent CLI's permission layer refused, as a calls-log record.
fn denied_call(
    seq: u64,
    d: &proctor_agents::DeniedCall,
    allowed: &[Allowed],
    at: f64,
) -> proctor_score::CallRecord {
    let argv: Vec<String> = d
        .command
        .as_deref()
        .map(|c| c.split_whitespace().map(String::from).collect())
        .filter(|v: &Vec<String>| !v.is_empty())
        .unwrap_or_else(|| vec![d.tool.clone()]);
    // Attribute it to the interface command it names, when it names one.
    let command = allowed
        .iter()
        .find(|a| argv.first() == Some(&a.name))
        .map_or_else(|| d.tool.clone(), |a| a.name.clone());
    proctor_score::CallRecord {
        seq,
        command,
        argv,
        cwd: String::new(),
        stdin_bytes: 0,
        stdin_hash: String::new(),
        exit: None,
        denied: Some(format!("denied by the agent CLI: {}", d.reason)),
        stdout_bytes: 0,
        stdout_head: String::new(),
        stderr_bytes: 0,
        stderr_head: String::new(),
        start: at,
        end: None,
    }
}

/// A trial whose agent could not start (missing CLI, missing flag, bad launch): `errored`,
/// typed as an agent-start failure, never evidence about the agent.
fn not_started(
    ctx: &RunContext,
    planned: &PlannedTrial,
    why: String,
    timings: BTreeMap<String, f64>,
) -> TrialRecord {
    let mut r = errored(ctx, planned, why.clone(), timings);
    r.reason = format!("agent-start: {why}");
    r.harness_notes.clear();
    r.end_state.agent.not_started = Some(why);
    r
}

/// Wraps a real agent's command so that login shells keep the shims first on PATH.
///
/// Some CLIs run their shell tool as a login shell (Codex: `bash -lc`), and a login shell's
/// /etc/profile resets PATH, which would bypass the shims and make interface calls invisible.
/// The agent's HOME is private, so its `.profile` and `.bash_profile` put the shims back first.
fn login_path_wrapper(shims: &Path, argv: &[String]) -> Vec<String> {
    let script = format!(
        "line='export PATH=\"{shims}:$PATH\"'; printf '%s\\n' \"$line\" >> \"$HOME/.profile\"; printf '%s\\n' \"$line\" >> \"$HOME/.bash_profile\"; exec \"$@\"",
        shims = shims.display()
    );
    let mut v = vec![
        "/bin/sh".to_string(),
        "-c".to_string(),
        script,
        "proctor-agent".to_string(),
    ];
    v.extend(argv.iter().cloned());
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_lines_keeps_the_last_non_blank_lines_cut_to_width() {
        assert_eq!(last_lines(b"", 5, 10), "");
        assert_eq!(last_lines(b"boom\n", 5, 10), "boom");
        let many = b"one\ntwo\n\nthree\nfour\r\nfive\nsix\n  \n";
        assert_eq!(
            last_lines(many, 5, 10),
            "two \u{23ce} three \u{23ce} four \u{23ce} five \u{23ce} six"
        );
        assert_eq!(
            last_lines("h\u{e9}llo w\u{f6}rld".as_bytes(), 1, 5),
            "h\u{e9}llo\u{2026}"
        );
        // Not UTF-8: still readable.
        assert_eq!(last_lines(b"bad \xff byte", 1, 20), "bad \u{fffd} byte");
    }

    #[test]
    fn a_failed_services_output_is_kept_and_quoted() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("svc.log");
        let to = dir.path().join("trial/services/svc.log");
        assert_eq!(keep_service_log(&log, &to).unwrap(), None);
        std::fs::write(&log, "").unwrap();
        assert_eq!(keep_service_log(&log, &to).unwrap(), None);
        assert!(!to.exists());
        let long = format!("{}\nboom\n", "x".repeat(200_000));
        std::fs::write(&log, &long).unwrap();
        let tail = keep_service_log(&log, &to).unwrap().unwrap();
        assert!(tail.ends_with("boom"), "{tail}");
        assert!(
            tail.chars().count() <= 2 * (SERVICE_TAIL_WIDTH + 1) + 3,
            "{tail}"
        );
        assert_eq!(std::fs::read_to_string(&to).unwrap(), long);
    }
}
