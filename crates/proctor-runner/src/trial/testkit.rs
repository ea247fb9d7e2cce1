//! Test support: a small suite in a temporary folder, for the stages' unit tests.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use proctor_store::{HostInfo, RunHandle, RunMeta, RunStatus, Store};
use proctor_suite::plan::{Plan, PlannedTrial, TrialMode};
use proctor_suite::Suite;

use crate::layers::LayerCache;
use crate::trial::context::{hidden_paths, Isolation, RunContext};

/// A suite with one script variant `agent` and one task `t` (whose success needs a check, a
/// rubric level needs it again and another, and a cap a third), plus `extra` appended.
pub const SUITE: &str = r#"schema_version = 1
id = "kit"

[defaults]
wall_timeout_seconds = 30
validation_timeout_seconds = 40
allow = ["sh"]

[[variants]]
id = "agent"
agent = "script"
script = "agents/agent"

[[variants]]
id = "cmd"
agent = "command"
command = ["/bin/sh", "-c", "echo ok > done.txt && echo finished"]
env = { FROM_VARIANT = "1" }

[[variants]]
id = "lost"
agent = "command"
command = ["/bin/sh", "-c", "true"]
allow = ["no-such-program-anywhere"]

[[tasks]]
id = "t"
prompt = "Do the thing."
wall_timeout_seconds = 7

[tasks.success]
all = [
  { check = "test -f done.txt" },
  { file_contains = { path = "done.txt", pattern = "ok" } },
]

[[tasks.rubric]]
id = "quality"
max = 2
levels = [
  { score = 2, all = [{ check = "test -f done.txt" }, { check = { command = "grep -q ok done.txt", timeout_seconds = 5 } }] },
  { score = 1, all = [{ check = "test -f done.txt" }] },
]

[[tasks.caps]]
any = [{ check = { command = "test -f bad.txt", exit = 0 } }]
max_total = 0
"#;

/// The suite, opened, in a folder that lives as long as the returned guard.
pub fn suite() -> (tempfile::TempDir, Suite) {
    suite_from(SUITE)
}

/// [`suite`], with `text` as its suite.toml.
pub fn suite_from(text: &str) -> (tempfile::TempDir, Suite) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let write = |rel: &str, text: &str| {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(p.parent().expect("a parent")).expect("a folder");
        std::fs::write(p, text).expect("a file");
    };
    write("suite.toml", text);
    write("fixture/README.md", "a fixture\n");
    write(
        "agents/agent/t.toml",
        "answer = \"done\"\n\n[[steps]]\nrun = \"echo ok > done.txt\"\n",
    );
    let suite = Suite::open(dir.path())
        .unwrap_or_else(|problems| panic!("the test suite is invalid: {problems:?}"));
    (dir, suite)
}

/// A plan entry of the test suite.
pub fn planned(task: &str, variant: &str) -> PlannedTrial {
    PlannedTrial {
        id: format!("{task}.{variant}.0"),
        task: task.into(),
        variant: variant.into(),
        index: 0,
        mutation: None,
        seed: Some(0),
    }
}

/// A store with one run of the test suite, and scratch folders, for running trials.
pub struct Lab {
    /// Holds the store and the scratch.
    pub dir: tempfile::TempDir,
    /// The plan (the suite's hashes; trials are given one by one).
    pub plan: Plan,
    /// The run.
    pub run: RunHandle,
}

impl Lab {
    /// A store and a run for `suite`.
    pub fn new(suite: &Suite) -> Lab {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let store = Store::open(dir.path().join("store")).expect("a store");
        let plan = Plan {
            suite_id: suite.id().to_string(),
            suite_hash: "suitehash".into(),
            fixture_hash: "fixturehash".into(),
            trial_mode: TrialMode::Dev,
            trials_per_cell: 1,
            trials: Vec::new(),
        };
        let meta = RunMeta {
            suite_id: plan.suite_id.clone(),
            suite_path: suite.root.clone(),
            suite_hash: plan.suite_hash.clone(),
            fixture_hash: plan.fixture_hash.clone(),
            trial_mode: proctor_records::run::RunMode::Dev,
            trials_per_cell: 1,
            variants: Vec::new(),
            tasks: Vec::new(),
            planned_trials: 0,
            isolation: proctor_records::run::Isolation::CopyNoNamespaces,
            agent_versions: BTreeMap::new(),
            host: HostInfo::detect(),
            proctor_version: String::new(),
            started_at: None,
            finished_at: None,
            status: RunStatus::Running,
            stop_reason: None,
            extra: None,
        };
        let run = store.create_run(&meta).expect("a run");
        for sub in ["work", "sockets"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("a folder");
        }
        Lab { dir, plan, run }
    }

    /// The run's context: copy mode without namespaces, so trials run on the host.
    pub fn context<'a>(&'a self, suite: &'a Suite) -> RunContext<'a> {
        let store_root = self.dir.path().join("store");
        RunContext {
            suite,
            plan: &self.plan,
            run: &self.run,
            hide: hidden_paths(&suite.root, &store_root),
            layers: LayerCache::new(store_root.join("cache")),
            store_root,
            isolation: Isolation {
                overlay: false,
                namespaces: false,
            },
            proctor_exe: PathBuf::from("/nonexistent/proctor"),
            search_path: crate::allow::search_path(),
            work_root: self.dir.path().join("work"),
            skeletons: crate::skeletons::Skeletons::new(&self.dir.path().join("work")),
            calls: crate::calls::Listeners::new(self.dir.path().join("sockets")),
            grace: Duration::from_millis(200),
            start_copies: Mutex::default(),
            scripts: Mutex::new(BTreeMap::new()),
            preflights: Mutex::new(BTreeMap::new()),
            host_programs: Mutex::new(BTreeMap::new()),
            cgroups: Err("not made in unit tests".into()),
            store_full: Mutex::new(None),
            browser: proctor_browser::BrowserSource::SearchPath(crate::allow::search_path()),
            gateway: None,
            images: BTreeMap::new(),
            runtime: None,
        }
    }
}
