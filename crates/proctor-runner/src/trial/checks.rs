//! Stage 5, checks: each distinct `check` command of the task runs in a fresh sandbox with the
//! task's `check_network` (by default none: its own loopback only), over the end state with `holdout/TASK_ID/` laid over it, in a throwaway layer: the
//! checks never write into the captured end state. A trial's checks and a rescore's are the same
//! code over an [`EndTree`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use std::sync::Arc;

use proctor_records::Limit;
use proctor_sandbox::{SandboxLimits, SandboxSpec, Workspace};
use proctor_score::endstate::{CheckLimits, CheckRun};
use proctor_suite::model::Task;

use crate::cgroup::{RunCgroups, TrialCgroup};

mod gitguard;
mod observe;

pub use observe::{installed_module, Observer, Watch};

use crate::layers::copy_tree;
use crate::trial::context::{RunContext, Trial};
use crate::trial::env::{check_env, host_path};
use crate::trial::paths::{HOME_INSIDE, WORKSPACE_INSIDE};
use crate::trial::prepare::{Prepared, TrialWorkspace};

/// The end state a check reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndTree {
    /// Layers: the agent's changes (an overlay's upper layer, or the captured changed files)
    /// over read-only lowers, top first. Checks get an overlay of their own over them.
    Overlay {
        /// The agent's changes.
        top: PathBuf,
        /// The start state's layers below them, top first.
        lowers: Vec<PathBuf>,
    },
    /// A whole copy of the end state. Checks get a copy of their own.
    Copy {
        /// The copy.
        dir: PathBuf,
    },
}

impl EndTree {
    /// The end state of the trial `prepared` made, once its agent has stopped: its overlay's
    /// upper layer over the start state's layers, or its copy.
    pub fn of(prepared: &Prepared) -> EndTree {
        match &prepared.workspace {
            TrialWorkspace::Overlay { upper, .. } => EndTree::Overlay {
                top: upper.clone(),
                lowers: prepared.lowers.clone(),
            },
            TrialWorkspace::Copy { dir, .. } => EndTree::Copy { dir: dir.clone() },
        }
    }
}

/// One check command of a task, with its timeout resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckCommand {
    /// The shell command, as written in the suite.
    pub command: String,
    /// How long it may run.
    pub timeout: Duration,
}

/// What running a check needs from its run: the sandbox init, the isolation, what to hide.
#[derive(Debug, Clone)]
pub struct CheckEnv {
    /// The sandbox init binary.
    pub proctor_exe: PathBuf,
    /// Whether namespaces are available.
    pub namespaces: bool,
    /// Host paths hidden from the check.
    pub hide: Vec<PathBuf>,
    /// Between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// The image the task runs in: checks run in it too, in its working directory.
    pub image: Option<std::sync::Arc<crate::image::TrialImage>>,
    /// What the checks' network namespace reaches: the task's `check_network`.
    pub network: proctor_sandbox::Network,
    /// On the internet network, the names it reaches (the task's `allowed_hosts`).
    pub allowed_hosts: Vec<String>,
    /// Where the checks see the holdout (the task's `holdout_at`, e.g. `/tests`): a writable
    /// copy of it is bound there, and nothing of it is laid in the workspace. `None` (or no
    /// namespaces, where nothing can be bound): laid over the workspace.
    pub holdout_at: Option<PathBuf>,
    /// In an image whose checks see the agent's root (`check_root = "agent"`): the layer of
    /// what the agent changed outside the workspace, laid over the image under each check's
    /// own root layer. `None`: the image as it was.
    pub agent_root: Option<PathBuf>,
    /// Host paths the task's trials are shown read-only at their own place (its `binds`).
    pub binds: Vec<PathBuf>,
    /// The task's limits (its agent's): a check runs the agent's code, under the agent's
    /// memory, process, disk and output limits.
    pub limits: proctor_suite::model::Limits,
    /// The run's control groups, which hold a check to its memory and process limits as they
    /// hold a trial, or why they cannot.
    pub cgroups: Result<Arc<RunCgroups>, String>,
    /// The start state's layers, top first: a check sees the workspace's git configuration as
    /// they have it (see [`crate::trial::gitguard`]), never as the agent left it.
    pub start: Vec<PathBuf>,
    /// What the agent changed, which each check's observation watches (see
    /// [`observe`]); `None`: nothing is watched (a visual look, a text diff).
    pub watch: Option<Arc<Watch>>,
}

impl CheckEnv {
    /// Where a check sees the workspace with namespaces: the image's working directory, or
    /// `/workspace`.
    fn workspace_inside(&self) -> PathBuf {
        self.image.as_ref().map_or_else(
            || PathBuf::from(WORKSPACE_INSIDE),
            |img| img.workdir.clone(),
        )
    }

    /// The check environment of a run.
    pub fn of(ctx: &RunContext) -> CheckEnv {
        CheckEnv {
            proctor_exe: ctx.proctor_exe.clone(),
            namespaces: ctx.isolation.namespaces,
            hide: ctx.hide.clone(),
            grace: ctx.grace,
            image: None,
            network: proctor_sandbox::Network::None,
            allowed_hosts: Vec::new(),
            holdout_at: None,
            agent_root: None,
            binds: Vec::new(),
            limits: Default::default(),
            cgroups: ctx.cgroups.clone(),
            start: Vec::new(),
            watch: None,
        }
    }

    /// The check environment of a trial of `task` whose checks get `network`: in its image, if
    /// it has one, with its holdout where the task puts it, under the task's limits.
    pub fn for_task(
        ctx: &RunContext,
        task: &Task,
        network: proctor_suite::model::Network,
    ) -> CheckEnv {
        CheckEnv {
            image: ctx.image(task.id.get_ref()).cloned(),
            network: crate::trial::sandboxing::sandbox_network(network),
            allowed_hosts: crate::trial::sandboxing::internet_only(
                network,
                &ctx.suite.allowed_hosts(task),
            ),
            holdout_at: task.holdout_at().map(Path::to_path_buf),
            binds: ctx
                .suite
                .binds(task)
                .into_iter()
                .map(PathBuf::from)
                .collect(),
            limits: task_limits(ctx.suite, task),
            ..CheckEnv::of(ctx)
        }
    }

    /// Where the holdout goes when it is not laid over the workspace.
    fn holdout_elsewhere(&self) -> Option<&Path> {
        self.holdout_at.as_deref().filter(|_| self.namespaces)
    }
}

/// The resource limits of `task`'s trials (its own, key by key over `[defaults]`), which its
/// checks run under too.
pub fn task_limits(suite: &proctor_suite::Suite, task: &Task) -> proctor_suite::model::Limits {
    let (t, d) = (
        task.limits.unwrap_or_default(),
        suite.file.defaults.limits.unwrap_or_default(),
    );
    proctor_suite::model::Limits {
        memory_mb: t.memory_mb.or(d.memory_mb),
        processes: t.processes.or(d.processes),
        disk_mb: t.disk_mb.or(d.disk_mb),
        output_mb: t.output_mb.or(d.output_mb),
        ..Default::default()
    }
}

/// Every distinct check command of a task (success, rubric and caps), in first-use order, each
/// with its own timeout or `default_timeout`.
pub fn task_checks(task: &Task, default_timeout: Duration) -> Vec<CheckCommand> {
    let mut out: Vec<CheckCommand> = Vec::new();
    let mut add = |a: &proctor_suite::Assertion| {
        for c in a.checks() {
            if !out.iter().any(|k| k.command == c.command) {
                out.push(CheckCommand {
                    command: c.command.clone(),
                    timeout: c
                        .timeout_seconds
                        .map(Duration::from_secs)
                        .unwrap_or(default_timeout),
                });
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

/// The checks stage of a trial: every check of its task over its end state, with the holdout
/// laid in, each watched for what it loads of `watch` (the agent's changes); each result and whole stdout is kept in the trial's folder (`checks/N.json`,
/// `checks/N.stdout`). Gives the results by command.
pub fn check_trial(
    ctx: &RunContext,
    trial: &Trial,
    prepared: &Prepared,
    holdout: Option<&Path>,
    watch: Watch,
) -> BTreeMap<String, CheckRun> {
    let commands = task_checks(trial.task, trial.settings.validation_timeout);
    let env = CheckEnv {
        // The root's changes the sandbox carried out of the trial's disk, where they are kept.
        agent_root: (trial.settings.check_root == proctor_suite::model::CheckRoot::Agent
            && ctx.image(trial.task.id.get_ref()).is_some())
        .then(|| prepared.paths.root_upper()),
        limits: trial.settings.limits,
        start: prepared.lowers.clone(),
        watch: Some(Arc::new(watch)),
        ..CheckEnv::for_task(ctx, trial.task, trial.settings.check_network)
    };
    let runs = run_checks(
        &env,
        &commands,
        &EndTree::of(prepared),
        holdout,
        &prepared.paths.work,
    );
    let mut out = BTreeMap::new();
    for (n, run) in runs.into_iter().enumerate() {
        if let Err(e) = write_evidence(&prepared.paths.trial_dir, n, &run) {
            if e.is_out_of_space() {
                ctx.store_is_full(format!("cannot keep check {n}'s evidence: {e}"));
            }
        }
        out.insert(run.command.clone(), run);
    }
    out
}

/// Runs every check over `tree` with `holdout` laid in, each in `work/checks/N`; gives the
/// results in order.
pub fn run_checks(
    env: &CheckEnv,
    checks: &[CheckCommand],
    tree: &EndTree,
    holdout: Option<&Path>,
    work: &Path,
) -> Vec<CheckRun> {
    checks
        .iter()
        .enumerate()
        .map(|(n, check)| {
            let dir = work.join("checks").join(n.to_string());
            run_check(env, check, tree, holdout, &dir)
        })
        .collect()
}

/// Runs one check in a fresh sandbox with the environment's network, in the scratch folder `dir`.
pub fn run_check(
    env: &CheckEnv,
    check: &CheckCommand,
    tree: &EndTree,
    holdout: Option<&Path>,
    dir: &Path,
) -> CheckRun {
    let failed = |e: String| CheckRun {
        command: check.command.clone(),
        error: Some(e),
        ..Default::default()
    };
    let ws = match check_workspace(env, tree, holdout, dir) {
        Ok(ws) => ws,
        Err(e) => return failed(e.to_string()),
    };
    // What the check loads of the agent's changes is watched from here to its end.
    let above: Vec<PathBuf> = holdout
        .filter(|_| env.holdout_elsewhere().is_none())
        .map(Path::to_path_buf)
        .into_iter()
        .collect();
    let observer = env
        .watch
        .as_deref()
        .map(|w| observe::Observer::start(w, tree, &above, env.agent_root.as_deref(), dir));
    let mut spec = check_spec(env, ws, check, dir);
    let copy = matches!(spec.workspace, Workspace::Bind { .. });
    let (limits, cgroup, record) = check_limits(env, copy);
    spec.limits = limits;
    let host_kills = host_oom_kills();
    let result = proctor_sandbox::run(&spec);
    let reached = cgroup.as_ref().and_then(TrialCgroup::reached);
    // The machine's OOM killer took a process of the check while it stayed under its own
    // limit: by the group's counters where there is one, else by the host's.
    let host_oom = match &cgroup {
        Some(cg) => cg.host_oom(),
        None => host_oom_kills().zip(host_kills).is_some_and(|(n, b)| n > b),
    };
    if let (Some(cg), Ok(run)) = (cgroup, &env.cgroups) {
        run.release(cg);
    }
    let (report, lost) = match result {
        Ok(report) => (report, None),
        Err(proctor_sandbox::SandboxError::InitLost { why, report }) => (*report, Some(why)),
        Err(e) => return failed(format!("the check's sandbox failed: {e}")),
    };
    let observed = observer.map(observe::Observer::finish);
    let so = read_bounded(&spec.stdout);
    let se = read_bounded(&spec.stderr);
    let b = &report.bounds;
    let limit_reached = reached
        .map(|r| r.limit())
        .or(b.disk_full.then_some(Limit::Disk))
        .or((b.stdout_cut > 0 || b.stderr_cut > 0).then_some(Limit::Output));
    let killed = report.exit_code.is_none() && !report.timed_out;
    let error = if let Some(why) = report.not_started {
        Some(why)
    } else if killed && host_oom && reached.is_none() {
        Some(format!(
            "the machine's OOM killer ended the check while it stayed under the task's memory limit{}: the cause is outside the trial",
            lost.map(|w| format!(" (its sandbox init {w})")).unwrap_or_default()
        ))
    } else {
        // The check's init ended without its report: the code under test cannot reach it
        // (it runs in a PID namespace of its own below), so that is a limit of the check's
        // (the kernel's doing for the code under test) or proctor's own failure.
        lost.filter(|_| reached.is_none())
            .map(|why| format!("the check's sandbox init ended without a report: {why}"))
    };
    CheckRun {
        command: check.command.clone(),
        exit: report.exit_code,
        timed_out: report.timed_out,
        signal: report.signal.filter(|_| killed),
        limit_reached,
        limits: Some(record),
        stdout_tail: tail(&so),
        stderr_tail: tail(&se),
        error,
        stdout: String::from_utf8_lossy(&so).into_owned(),
        observed,
    }
}

/// A check's output file as kept: at most the check's output bound and a little (the cut's
/// mark), whatever is there.
fn read_bounded(path: &Path) -> Vec<u8> {
    use std::io::Read;
    let mut bytes = Vec::new();
    if let Ok(f) = std::fs::File::open(path) {
        let _ = f.take(CHECK_OUTPUT_BYTES + 4096).read_to_end(&mut bytes);
    }
    bytes
}

/// Processes the machine's OOM killers have killed since it started (`/proc/vmstat`
/// `oom_kill`), where the kernel says.
fn host_oom_kills() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/vmstat").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("oom_kill "))
        .and_then(|v| v.trim().parse().ok())
}

/// What bounds a check: the task's limits, as its agent had them (a control group of the run's
/// for memory and processes, a tmpfs of `disk_mb` for everything it writes, its output cut at
/// `output_mb` and at most [`CHECK_OUTPUT_BYTES`]), the group, and the record of what held each.
/// `copy`: the check's workspace is a copy on the host's disk, which the tmpfs does not hold.
pub fn check_limits(
    env: &CheckEnv,
    copy: bool,
) -> (SandboxLimits, Option<TrialCgroup>, CheckLimits) {
    const MIB: u64 = 1 << 20;
    let l = &env.limits;
    let output_bytes = (l.output_mb() * MIB).min(CHECK_OUTPUT_BYTES);
    let mut record = CheckLimits {
        memory_mb: l.memory_mb(),
        processes: l.processes(),
        disk_mb: l.disk_mb(),
        output_mb: output_bytes.div_ceil(MIB),
        ..Default::default()
    };
    if !env.namespaces {
        let why = "the check runs without namespaces (a plain process group on the host)";
        for key in ["memory_mb", "processes", "disk_mb"] {
            record.not_enforced.insert(key.into(), why.into());
        }
        record
            .enforced_by
            .insert("output_mb".into(), "proctor's bounded capture".into());
        let limits = SandboxLimits {
            output_bytes: Some(output_bytes),
            ..Default::default()
        };
        return (limits, None, record);
    }
    let disk_by = if copy {
        "the check's own tmpfs, for all but the workspace (a copy on the host's disk)"
    } else {
        "the check's own tmpfs"
    };
    let (limits, cgroup) = crate::trial::sandboxing::held_limits(
        &env.cgroups,
        l,
        disk_by,
        output_bytes,
        (&mut record.enforced_by, &mut record.not_enforced),
    );
    (limits, cgroup, record)
}

/// The check's own workspace in `dir`, and where the check sees it: an overlay of the holdout
/// over the end tree's layers, or a copy of the end tree with the holdout copied over it.
pub fn check_workspace(
    env: &CheckEnv,
    tree: &EndTree,
    holdout: Option<&Path>,
    dir: &Path,
) -> std::io::Result<(Workspace, PathBuf)> {
    std::fs::create_dir_all(dir)?;
    if env.image.is_some() {
        std::fs::create_dir_all(dir.join("root-upper"))?;
        std::fs::create_dir_all(dir.join("root-work"))?;
    }
    // A holdout the task puts elsewhere (`/tests`) is a writable copy of its own, bound there
    // by [`check_spec`]: none of it in the workspace.
    let holdout = match (holdout, env.holdout_elsewhere()) {
        (Some(h), Some(_)) => {
            copy_tree(h, &dir.join(HOLDOUT_COPY))?;
            None
        }
        (h, _) => h,
    };
    match tree {
        EndTree::Overlay { top, lowers } => {
            let mut layers: Vec<PathBuf> = holdout.map(Path::to_path_buf).into_iter().collect();
            // The agent's `__pycache__` bytecode hidden (see [`observe`]).
            let view: Vec<PathBuf> = std::iter::once(top.clone())
                .chain(lowers.iter().cloned())
                .collect();
            if let Some(g) =
                observe::hide_bytecode(env.watch.as_deref(), &view, &dir.join(PYCACHE_GUARD), None)?
            {
                layers.push(g);
            }
            // The start state's git configuration over the agent's (see [`gitguard`]).
            let guard = dir.join(GIT_GUARD);
            if gitguard::lay_guard(top, start_of(env, lowers), &guard)? {
                layers.push(guard);
            }
            layers.push(top.clone());
            layers.extend(lowers.iter().cloned());
            let (upper, work) = (dir.join("upper"), dir.join("ovwork"));
            std::fs::create_dir_all(&upper)?;
            std::fs::create_dir_all(&work)?;
            let ws = Workspace::Overlay {
                lowers: layers,
                upper,
                work,
            };
            Ok((ws, env.workspace_inside()))
        }
        EndTree::Copy { dir: end } => {
            let copy = dir.join("ws");
            copy_tree(end, &copy)?;
            gitguard::mend_copy(&copy, &env.start)?;
            observe::hide_bytecode(env.watch.as_deref(), &[], &copy, Some(&copy))?;
            if let Some(h) = holdout {
                copy_tree(h, &copy)?;
            }
            // The copy's files keep the times the agent left them with.
            copy_times(end, &copy)?;
            let inside = if env.namespaces {
                env.workspace_inside()
            } else {
                copy.clone()
            };
            Ok((Workspace::Bind { dir: copy }, inside))
        }
    }
}

/// The start state the guard restores git's configuration from: the environment's, or the
/// end tree's own lower layers (which are the start state's) when it names none.
fn start_of<'a>(env: &'a CheckEnv, lowers: &'a [PathBuf]) -> &'a [PathBuf] {
    if env.start.is_empty() {
        lowers
    } else {
        &env.start
    }
}

/// Gives `to` the access and modification times `m` holds (a link's own, never its target's).
fn set_times(to: &Path, m: &std::fs::Metadata) -> std::io::Result<()> {
    use rustix::fs::{utimensat, AtFlags, Timespec, Timestamps, CWD};
    use std::os::unix::fs::MetadataExt;
    let times = Timestamps {
        last_access: Timespec {
            tv_sec: m.atime(),
            tv_nsec: m.atime_nsec(),
        },
        last_modification: Timespec {
            tv_sec: m.mtime(),
            tv_nsec: m.mtime_nsec(),
        },
    };
    utimensat(CWD, to, &times, AtFlags::SYMLINK_NOFOLLOW).map_err(std::io::Error::from)
}

/// Gives every entry of the check's copy `to` that the end state `from` also has the times it
/// has there ([`proctor_sandbox::copy::copy_times`]: by open folders, a tree of any depth).
fn copy_times(from: &Path, to: &Path) -> std::io::Result<()> {
    proctor_sandbox::copy::copy_times(from, to)
}

/// The folder of a check's scratch that holds the layer hiding the agent's cached bytecode.
const PYCACHE_GUARD: &str = "pycache";

/// The folder of a check's scratch that holds its git guard layer.
const GIT_GUARD: &str = "gitguard";

/// The sandbox spec of one check: `sh -c COMMAND` in `workspace`, with the checks' network (by
/// default none), no services, nothing of the agent's environment.
pub fn check_spec(
    env: &CheckEnv,
    (workspace, inside): (Workspace, PathBuf),
    check: &CheckCommand,
    dir: &Path,
) -> SandboxSpec {
    let home = if env.namespaces {
        PathBuf::from(HOME_INSIDE)
    } else {
        dir.to_path_buf()
    };
    SandboxSpec {
        max_turns: 1,
        init_exe: env.proctor_exe.clone(),
        namespaces: env.namespaces,
        workspace,
        workspace_inside: inside.clone(),
        hide: env.hide.clone(),
        network: env.network,
        allowed_hosts: env.allowed_hosts.clone(),
        env: match &env.image {
            Some(img) => {
                let mut e = check_env(&home, &img.path(), &inside);
                e.extend(img.env.iter().filter(|(k, _)| k != "PATH").cloned());
                e
            }
            None => check_env(&home, &host_path(), &inside),
        },
        binds: crate::trial::sandboxing::shown_read_only(&env.binds)
            .chain(match env.holdout_elsewhere() {
                Some(at) if dir.join(HOLDOUT_COPY).is_dir() => Some(proctor_sandbox::Bind {
                    host: dir.join(HOLDOUT_COPY),
                    inside: at.to_path_buf(),
                    read_only: false,
                }),
                _ => None,
            })
            .collect(),
        home_inside: home,
        services: Vec::new(),
        command: vec!["sh".into(), "-c".into(), check.command.clone()],
        stdout: dir.join("stdout"),
        stderr: dir.join("stderr"),
        wall_timeout: check.timeout,
        grace: env.grace,
        root_image: env.image.as_ref().map(|img| proctor_sandbox::RootImage {
            rootfs: img.rootfs.clone(),
            upper: dir.join("root-upper"),
            work: dir.join("root-work"),
            layers: env.agent_root.iter().cloned().collect(),
            keep_upper: false,
        }),
        skeleton: None,
        view: None,
        // A check runs what the agent wrote: it is bounded like the agent ([`check_limits`]),
        // its output at least.
        limits: SandboxLimits {
            output_bytes: Some(CHECK_OUTPUT_BYTES),
            ..Default::default()
        },
        calls: None,
    }
}

/// The folder of a check's scratch that holds the copy of a holdout laid outside the workspace.
const HOLDOUT_COPY: &str = "holdout";

/// Bytes of a check's stdout, and of its stderr, kept (head and tail) and read back.
const CHECK_OUTPUT_BYTES: u64 = 16 << 20;

/// Bytes of a check's output kept as its tail.
const TAIL_BYTES: usize = 4096;

fn tail(bytes: &[u8]) -> String {
    let start = bytes.len().saturating_sub(TAIL_BYTES);
    String::from_utf8_lossy(&bytes[start..]).into_owned()
}

/// Writes a check's result and its whole stdout into the trial's `checks/` folder as `N.json`
/// and `N.stdout`. The check's result is in the trial's record whatever happens here; the first
/// failure is returned (a full store stops the run).
pub fn write_evidence(
    trial_dir: &Path,
    n: usize,
    run: &CheckRun,
) -> Result<(), proctor_store::StoreError> {
    let dir = trial_dir.join("checks");
    let _ = std::fs::create_dir_all(&dir);
    // The file lists what the record does: the audit judged the whole observation.
    let listed = proctor_score::endstate::OBSERVED_LISTED;
    let bounded = run
        .observed
        .as_ref()
        .filter(|seen| seen.files.len().max(seen.links.len()) > listed)
        .map(|_| {
            let mut b = run.clone();
            if let Some(seen) = &mut b.observed {
                seen.bound();
            }
            b
        });
    let run = bounded.as_ref().unwrap_or(run);
    proctor_store::atomic_write_json_unsynced(dir.join(format!("{n}.json")), run)?;
    proctor_store::atomic_write_unsynced(dir.join(format!("{n}.stdout")), run.stdout.as_bytes())
}

/// The checks' own files of a task for the integrity audit: every file under its holdout
/// folder `dir` by relative path, with its content when it is small enough to read as source.
pub fn check_files(dir: Option<&Path>) -> proctor_score::CheckFiles {
    read_holdout(dir).0
}

/// The checks' own files as the checks see them: by workspace-relative path when the holdout
/// is laid over the workspace, by absolute path under `at` (the task's `holdout_at`) when it is
/// laid there. So the audit follows a check into `/tests/...` and reads its imports, and never
/// takes a workspace file of the same relative name for one of the checks' own.
pub fn placed_at(files: proctor_score::CheckFiles, at: Option<&Path>) -> proctor_score::CheckFiles {
    let Some(at) = at else {
        return files;
    };
    proctor_score::CheckFiles {
        files: files
            .files
            .into_iter()
            .map(|(rel, bytes)| (at.join(rel).to_string_lossy().into_owned(), bytes))
            .collect(),
    }
}

/// The holdout folder `dir` read once for a trial: its files for the audit ([`check_files`])
/// and the BLAKE3 of each by relative path (recorded in the trial's hashes), a small file hashed
/// from the bytes already read.
pub fn read_holdout(dir: Option<&Path>) -> (proctor_score::CheckFiles, BTreeMap<String, String>) {
    let mut files = proctor_score::CheckFiles::default();
    let mut hashes = BTreeMap::new();
    let Some(dir) = dir else {
        return (files, hashes);
    };
    for e in walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
    {
        let Ok(rel) = e.path().strip_prefix(dir) else {
            continue;
        };
        let rel = rel.to_string_lossy().into_owned();
        let small = e
            .metadata()
            .is_ok_and(|m| m.len() <= proctor_score::audit::SOURCE_BYTES);
        let read = small.then(|| std::fs::read(e.path()).ok()).flatten();
        let hash = match &read {
            Some(bytes) => Some(blake3::hash(bytes).to_hex().to_string()),
            None => proctor_sandbox::diff::hash_file(e.path()).ok(),
        };
        if let Some(h) = hash {
            hashes.insert(rel.clone(), h);
        }
        files.files.insert(rel, read.unwrap_or_default());
    }
    (files, hashes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host_env() -> CheckEnv {
        CheckEnv {
            proctor_exe: PathBuf::from("/nonexistent/proctor"),
            namespaces: false,
            hide: Vec::new(),
            grace: Duration::from_millis(200),
            image: None,
            network: proctor_sandbox::Network::None,
            allowed_hosts: Vec::new(),
            holdout_at: None,
            agent_root: None,
            binds: Vec::new(),
            limits: Default::default(),
            cgroups: Err("not made in unit tests".into()),
            start: Vec::new(),
            watch: None,
        }
    }

    fn check(command: &str, timeout: Duration) -> CheckCommand {
        CheckCommand {
            command: command.into(),
            timeout,
        }
    }

    #[test]
    fn a_tasks_checks_are_distinct_in_first_use_order_with_their_timeouts() {
        let (_dir, suite) = crate::trial::testkit::suite();
        let task = suite.task("t").unwrap();
        let checks = task_checks(task, Duration::from_secs(40));
        assert_eq!(
            checks,
            vec![
                check("test -f done.txt", Duration::from_secs(40)),
                check("grep -q ok done.txt", Duration::from_secs(5)),
                check("test -f bad.txt", Duration::from_secs(40)),
            ]
        );
    }

    #[test]
    fn over_layers_a_check_gets_an_overlay_of_the_holdout_over_the_end_state() {
        let dir = tempfile::tempdir().unwrap();
        let tree = EndTree::Overlay {
            top: PathBuf::from("/upper"),
            lowers: vec![PathBuf::from("/variant"), PathBuf::from("/fixture")],
        };
        let scratch = dir.path().join("checks/0");
        let (ws, inside) =
            check_workspace(&host_env(), &tree, Some(Path::new("/holdout")), &scratch).unwrap();
        assert_eq!(inside, Path::new(WORKSPACE_INSIDE));
        let Workspace::Overlay {
            lowers,
            upper,
            work,
        } = ws
        else {
            panic!("not an overlay: {ws:?}");
        };
        let lowers: Vec<&str> = lowers.iter().map(|p| p.to_str().unwrap()).collect();
        assert_eq!(lowers, ["/holdout", "/upper", "/variant", "/fixture"]);
        assert!(upper.is_dir() && upper.starts_with(&scratch));
        assert!(work.is_dir() && work.starts_with(&scratch));
    }

    #[test]
    fn a_checks_spec_has_no_network_no_services_and_no_shims() {
        let env = CheckEnv {
            namespaces: true,
            ..host_env()
        };
        let ws = (
            Workspace::Bind {
                dir: PathBuf::from("/c/ws"),
            },
            PathBuf::from(WORKSPACE_INSIDE),
        );
        let spec = check_spec(
            &env,
            ws,
            &check("make test", Duration::from_secs(9)),
            Path::new("/c"),
        );
        assert_eq!(spec.network, proctor_sandbox::Network::None);
        assert!(spec.services.is_empty() && spec.binds.is_empty());
        assert_eq!(spec.command, ["sh", "-c", "make test"]);
        assert_eq!(spec.wall_timeout, Duration::from_secs(9));
        assert_eq!(spec.home_inside, Path::new(HOME_INSIDE));
        assert_eq!(spec.stdout, Path::new("/c/stdout"));
        let path = &spec.env.iter().find(|(k, _)| k == "PATH").unwrap().1;
        assert_eq!(
            *path,
            host_path(),
            "proctor's own PATH, without the agent's shims"
        );
    }

    fn end_state(dir: &Path) -> (EndTree, PathBuf) {
        let end = dir.join("end");
        std::fs::create_dir_all(&end).unwrap();
        std::fs::write(end.join("done.txt"), "ok\n").unwrap();
        let holdout = dir.join("holdout");
        std::fs::create_dir_all(&holdout).unwrap();
        std::fs::write(
            holdout.join("check.sh"),
            "grep -q ok done.txt && echo held && touch made-by-check.txt\n",
        )
        .unwrap();
        (EndTree::Copy { dir: end }, holdout)
    }

    #[test]
    fn a_check_runs_over_a_copy_of_the_end_state_with_the_holdout_laid_in() {
        let dir = tempfile::tempdir().unwrap();
        let (tree, holdout) = end_state(dir.path());
        let checks = [
            check("sh check.sh", Duration::from_secs(20)),
            check("echo no >&2; exit 3", Duration::from_secs(20)),
        ];
        let runs = run_checks(&host_env(), &checks, &tree, Some(&holdout), dir.path());
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0].command, "sh check.sh");
        assert_eq!(runs[0].exit, Some(0), "{:?}", runs[0]);
        assert_eq!(runs[0].stdout, "held\n");
        assert_eq!(runs[0].stdout_tail, "held\n");
        assert_eq!(runs[0].error, None);
        assert_eq!(runs[1].exit, Some(3));
        assert_eq!(runs[1].stderr_tail, "no\n");
        // The check wrote into its own copy, never into the end state.
        let EndTree::Copy { dir: end } = &tree else {
            unreachable!()
        };
        assert!(!end.join("made-by-check.txt").exists());
        assert!(!end.join("check.sh").exists());
        assert!(dir.path().join("checks/0/ws/made-by-check.txt").exists());
    }

    #[test]
    fn a_check_past_its_timeout_is_stopped_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let (tree, _) = end_state(dir.path());
        let run = run_check(
            &host_env(),
            &check("sleep 30", Duration::from_millis(300)),
            &tree,
            None,
            &dir.path().join("c"),
        );
        assert!(run.timed_out, "{run:?}");
        assert_eq!(run.exit, None);
    }

    #[test]
    fn a_check_whose_end_state_is_missing_cannot_run_and_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let tree = EndTree::Copy {
            dir: dir.path().join("nowhere"),
        };
        let run = run_check(
            &host_env(),
            &check("true", Duration::from_secs(5)),
            &tree,
            None,
            &dir.path().join("c"),
        );
        assert_eq!(run.exit, None);
        assert!(run.error.is_some(), "{run:?}");
    }

    #[test]
    fn a_checks_evidence_is_its_result_and_its_whole_stdout() {
        let dir = tempfile::tempdir().unwrap();
        let run = CheckRun {
            command: "echo hi".into(),
            exit: Some(0),
            stdout_tail: "hi\n".into(),
            stdout: "hi\n".into(),
            ..Default::default()
        };
        write_evidence(dir.path(), 2, &run).unwrap();
        let json: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join("checks/2.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(json["command"], "echo hi");
        assert!(
            json.get("stdout").is_none(),
            "the whole stdout is its own file"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("checks/2.stdout")).unwrap(),
            "hi\n"
        );
    }

    #[test]
    fn holdout_files_are_hashed_by_relative_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/a.py"), "a").unwrap();
        std::fs::write(dir.path().join("b.sh"), "b").unwrap();
        let hashes = read_holdout(Some(dir.path())).1;
        assert_eq!(hashes.keys().collect::<Vec<_>>(), ["b.sh", "sub/a.py"]);
        assert_eq!(hashes["b.sh"], blake3::hash(b"b").to_hex().to_string());
    }
}
