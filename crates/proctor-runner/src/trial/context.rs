//! What every trial of a run shares ([`RunContext`]), and the one trial being run ([`Trial`]):
//! its task, variant and resolved settings.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proctor_sandbox::diff::Manifest;
use proctor_store::RunHandle;
use proctor_suite::model::{AgentKind, Task, Variant};
use proctor_suite::plan::{Plan, PlannedTrial};
use proctor_suite::{Settings, Suite};

use crate::host_program::HostProgram;
use crate::layers::LayerCache;
use crate::trial::error::{Stage, TrialError};

/// How trials are isolated in this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Isolation {
    /// Overlay workspace (else a copy diffed against a manifest).
    pub overlay: bool,
    /// User, mount, PID, IPC, UTS and network namespaces (else none at all).
    pub namespaces: bool,
}

/// Copy mode's start state, made once for the trials that start from it; its folder is removed
/// when the last of them is done with it.
#[derive(Debug)]
pub struct StartCopy {
    /// The copy: no trial writes it (each sandbox copies it into its own workspace).
    pub dir: PathBuf,
    /// Its manifest, which each trial's end state is compared with.
    pub manifest: Manifest,
}

impl Drop for StartCopy {
    fn drop(&mut self) {
        let _ = proctor_sandbox::remove_tree(&self.dir);
    }
}

/// The start copies a run keeps for its next trials: at most [`StartCopies::KEPT`], the least
/// recently asked for given up first (a trial that holds one keeps it until it is done).
#[derive(Debug, Default)]
pub struct StartCopies {
    /// By start state (its layers): the copy, and when it was last asked for.
    pub(crate) kept: BTreeMap<String, (Arc<StartCopy>, u64)>,
    /// How many times a copy was asked for: the clock of `kept`'s last asks.
    pub(crate) asked: u64,
    /// How many copies were made: each one's folder is named by its number.
    pub(crate) made: u64,
}

impl StartCopies {
    /// How many start copies a run keeps (the scratch holds at most this many, and those of
    /// trials running).
    pub const KEPT: usize = 8;
}

impl Isolation {
    /// The isolation as run.json and trial records record it.
    pub fn recorded(self) -> proctor_records::run::Isolation {
        use proctor_records::run::Isolation as Recorded;
        match (self.overlay, self.namespaces) {
            (true, _) => Recorded::Overlay,
            (false, true) => Recorded::Copy,
            (false, false) => Recorded::CopyNoNamespaces,
        }
    }

    /// The label recorded in run.json and trial records.
    pub fn label(self) -> &'static str {
        self.recorded().label()
    }
}

/// Host programs resolved for images, by (host executable, image root): each once per run.
pub type HostPrograms = BTreeMap<(PathBuf, PathBuf), Result<Arc<HostProgram>, String>>;

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
    /// The run's calls-log sockets, in a folder of short paths (Unix sockets have a 108-byte
    /// limit), each reused by one trial after another.
    pub calls: Arc<crate::calls::Listeners>,
    /// The root skeletons the run's trials bind, one per shape of root, laid out in `work_root`.
    pub skeletons: crate::skeletons::Skeletons,
    /// Grace between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// Copy mode: each start state's copy (in `work_root`, read by every trial's sandbox, which
    /// copies it into the trial's workspace) and its manifest, made once.
    pub start_copies: Mutex<StartCopies>,
    /// Each script variant's script for a task, read once (by variant and task).
    pub scripts: Mutex<BTreeMap<(String, String), proctor_suite::script::Script>>,
    /// Each real agent's preflight (installed version and flags), checked once per variant.
    pub preflights: Mutex<BTreeMap<String, Result<Option<proctor_agents::AgentInfo>, String>>>,
    /// The run's model gateway, when some trial reaches a real model through it.
    pub gateway: Option<Arc<crate::gateway::RunGateway>>,
    /// The image each task runs in, by task id (tasks without one run on the host's root).
    pub images: BTreeMap<String, Arc<crate::image::TrialImage>>,
    /// proctor's own loader and libraries, for running it inside images.
    pub runtime: Option<Arc<crate::image::HostRuntime>>,
    /// Host programs made runnable inside images, by host executable and image, resolved once.
    pub host_programs: Mutex<HostPrograms>,
    /// The run's control groups, or why the trials' memory and process limits cannot be held
    /// by any.
    pub cgroups: Result<Arc<crate::cgroup::RunCgroups>, String>,
    /// Where the `visual` checks find their browser.
    pub browser: proctor_browser::BrowserSource,
    /// The first write into the store that failed because its file system is full (see
    /// [`RunContext::store_is_full`]); `None` while every write fits.
    pub store_full: Mutex<Option<String>>,
}

impl RunContext<'_> {
    /// Remembers that a write into the store failed because its file system is full, `why`
    /// saying which (the first one is kept): the trial that met it has incomplete evidence, and
    /// the run must stop.
    pub fn store_is_full(&self, why: String) {
        if let Ok(mut slot) = self.store_full.lock() {
            slot.get_or_insert(why);
        }
    }

    /// Why the store is full, once a write into it failed for that reason.
    pub fn store_full(&self) -> Option<String> {
        self.store_full.lock().ok().and_then(|slot| slot.clone())
    }
}

impl RunContext<'_> {
    /// The image `task` runs in, if any.
    pub fn image(&self, task: &str) -> Option<&Arc<crate::image::TrialImage>> {
        self.images.get(task)
    }

    /// The command line that runs proctor (as seen inside a trial of `task`): the binary
    /// itself, or, inside an image, through the host's loader and libraries.
    pub fn proctor_command(&self, task: &str, inside: &Path) -> Vec<String> {
        match (self.image(task), &self.runtime) {
            (Some(_), Some(rt)) => rt.command(inside),
            _ => vec![inside.display().to_string()],
        }
    }
}

impl RunContext<'_> {
    /// The host executable `exe` made runnable inside `image`, resolved on first use and
    /// remembered; `bound` are host folders the trial binds at their own path.
    pub fn host_program(
        &self,
        exe: &Path,
        bound: &[PathBuf],
        image: &crate::image::TrialImage,
    ) -> Result<Arc<HostProgram>, String> {
        let mut map = self
            .host_programs
            .lock()
            .map_err(|_| "the host program cache is poisoned".to_string())?;
        map.entry((exe.to_path_buf(), image.rootfs.clone()))
            .or_insert_with(|| {
                HostProgram::resolve(exe, &crate::trial::env::host_path(), bound, &image.rootfs)
                    .map(Arc::new)
                    .map_err(|e| e.to_string())
            })
            .clone()
    }

    /// The variant's preflight, run on its first trial and remembered: `Err` names what is
    /// missing (the CLI, a flag), and every trial of the variant is then `errored` with it.
    pub fn preflight(
        &self,
        variant: &Variant,
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

/// The host paths hidden from every agent and check of a run: the suite, then the store (a
/// folder inside another hidden folder is hidden with it). The order is fixed, not the paths'
/// sort order, so records read the same wherever the suite and the store are. Computed once per
/// run.
pub fn hidden_paths(suite_root: &Path, store_root: &Path) -> Vec<PathBuf> {
    let all: Vec<PathBuf> = [suite_root, store_root]
        .iter()
        .map(|p| p.canonicalize().unwrap_or_else(|_| p.to_path_buf()))
        .collect();
    let mut kept: Vec<PathBuf> = Vec::new();
    for p in &all {
        let inside_another = all.iter().any(|q| q != p && p.starts_with(q));
        if !inside_another && !kept.contains(p) {
            kept.push(p.clone());
        }
    }
    kept
}

/// The trial being run: its plan entry, task, variant and resolved settings.
pub struct Trial<'a> {
    /// The plan entry.
    pub planned: &'a PlannedTrial,
    /// Its task.
    pub task: &'a Task,
    /// Its variant.
    pub variant: &'a Variant,
    /// The settings it runs with.
    pub settings: Settings,
}

impl<'a> Trial<'a> {
    /// The suite's task and variant for `planned`.
    pub fn resolve(suite: &'a Suite, planned: &'a PlannedTrial) -> Result<Trial<'a>, TrialError> {
        let (Some(task), Some(variant)) =
            (suite.task(&planned.task), suite.variant(&planned.variant))
        else {
            return Err(TrialError::harness(
                Stage::Prepare,
                "the plan names a task or variant the suite does not have",
            ));
        };
        Ok(Trial {
            planned,
            task,
            variant,
            settings: suite.settings(task, variant),
        })
    }

    /// Whether the agent is a real CLI (with a preflight and a model endpoint), not a script, a
    /// command or a person.
    pub fn real_agent(&self) -> bool {
        !matches!(
            self.variant.agent,
            AgentKind::Script | AgentKind::Command | AgentKind::Human
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn isolation_labels() {
        let label = |overlay, namespaces| {
            Isolation {
                overlay,
                namespaces,
            }
            .label()
        };
        assert_eq!(label(true, true), "overlay");
        assert_eq!(label(false, true), "copy");
        assert_eq!(label(false, false), "copy-no-namespaces");
    }

    #[test]
    fn a_trial_resolves_its_task_variant_and_settings() {
        let (_dir, suite) = crate::trial::testkit::suite();
        let planned = crate::trial::testkit::planned("t", "agent");
        let trial = Trial::resolve(&suite, &planned).unwrap();
        assert_eq!(trial.task.id.get_ref(), "t");
        assert_eq!(trial.variant.id.get_ref(), "agent");
        // The task's override wins over [defaults]; the rest comes from [defaults].
        assert_eq!(trial.settings.wall_timeout, Duration::from_secs(7));
        assert_eq!(trial.settings.validation_timeout, Duration::from_secs(40));
        assert_eq!(trial.settings.allow, ["sh"]);
        assert!(!trial.real_agent(), "a script is not a real agent CLI");
    }

    #[test]
    fn a_plan_entry_the_suite_does_not_have_is_a_harness_failure_of_prepare() {
        let (_dir, suite) = crate::trial::testkit::suite();
        for planned in [
            crate::trial::testkit::planned("gone", "agent"),
            crate::trial::testkit::planned("t", "gone"),
        ] {
            let Err(e) = Trial::resolve(&suite, &planned) else {
                panic!("{} resolved", planned.id);
            };
            assert_eq!(e.kind(), proctor_score::ErrorKind::Harness);
            assert_eq!(e.stage(), Stage::Prepare);
            assert!(e.reason().contains("does not have"), "{e}");
        }
    }

    #[test]
    fn a_folder_inside_another_hidden_folder_is_hidden_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        let suite = store.join("suite");
        std::fs::create_dir_all(&suite).unwrap();
        let store = store.canonicalize().unwrap();
        assert_eq!(hidden_paths(&suite, &store), vec![store.clone()]);
        let other = dir.path().join("other");
        std::fs::create_dir_all(&other).unwrap();
        let other = other.canonicalize().unwrap();
        assert_eq!(
            hidden_paths(&other, &store),
            vec![other.clone(), store.clone()]
        );
        // The suite comes first whatever the paths' order (records read the same wherever the
        // store lies).
        let early = dir.path().join("aaa-store");
        std::fs::create_dir_all(&early).unwrap();
        let early = early.canonicalize().unwrap();
        assert_eq!(
            hidden_paths(&other, &early),
            vec![other.clone(), early.clone()]
        );
        assert_eq!(hidden_paths(&other, &other), vec![other]);
    }
}
