//! A stored run rescored, as `proctor rescore RUN` asks: the rules located (the run's own copy
//! of its suite, the folder it was read from, or another folder), the fixture checked
//! unchanged, the images checked unmoved, and the saved end states graded again into
//! `results.rescored-TIMESTAMP.{json,md}` beside the run's own results
//! ([`crate::rescore::rescore`] grades each trial).

use std::path::{Path, PathBuf};
use std::time::Duration;

use proctor_store::Store;
use proctor_suite::Suite;

use crate::error::{Context, RunError};
use crate::provision::Images;
use crate::rescore::{rescore, CheckSetup, Rescored};
use crate::results;
use crate::stored_suite::{self, open_suite, SuiteFrom};
use crate::trial::CheckEnv;
use crate::{decide_isolation, IsolationChoice};

/// Where a rescore takes its rules from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RulesFrom {
    /// The copy of its suite the run keeps (the suite folder, for a run that keeps none).
    Run,
    /// The suite folder the run was read from, as it is now.
    RunFolder,
    /// This suite folder.
    Folder(PathBuf),
}

/// What a rescore did.
pub struct Rescoring {
    /// Each trial's new verdict, what changed, what could not be rescored or read.
    pub rescored: Rescored,
    /// Where the rules came from.
    pub from: SuiteFrom,
    /// The results files' stem (`results.rescored-TIMESTAMP`), in `dir`.
    pub stem: String,
    /// The run.
    pub id: proctor_store::RunId,
    /// The run's folder.
    pub dir: PathBuf,
    /// Whether the results were written (not when no trial could be read).
    pub written: bool,
    /// Seconds it took.
    pub seconds: f64,
}

/// Rescores run `run` of the store at `store_dir` with the rules `rules` names; the checks of a
/// task that runs in an image run in it again, which must be the image its trials ran in.
/// `note` hears what the user should know before the work starts.
pub fn rescore_run(
    store_dir: &Path,
    run: &str,
    rules: RulesFrom,
    images: Images<'_>,
    note: &mut dyn FnMut(&str),
) -> Result<Rescoring, RunError> {
    let store = writable_store(store_dir)?;
    let store_root = store.root().to_path_buf();
    let id = store.resolve_run(run).map_err(|e| {
        RunError::usage(e.to_string(), "`proctor list` shows the runs in this store")
    })?;
    let handle = store.open_run(&id).context("cannot open the run")?;
    let meta = handle.meta();
    let from = rules_from(&handle, rules, note)?;
    let suite_path = from.dir().canonicalize().with_context(|| {
        format!(
            "cannot find {} (run {id} was read from {})",
            from.describe(),
            meta.suite_path.display()
        )
    })?;
    let suite = open_suite(&suite_path)?;
    let current_hash =
        proctor_suite::tree::suite_hash(&suite.root).context("cannot hash the suite")?;
    let fixture_hash = unchanged_fixture(&suite, &meta.fixture_hash, id.as_str())?;
    let tasks: Vec<&str> = meta.tasks.iter().map(String::as_str).collect();
    let task_images = crate::provision::for_tasks(&suite, &tasks, images.config, images.cache)?;
    crate::provision::check_unmoved(
        &handle,
        &task_images,
        "rescoring would grade its end states in another image",
    )?;
    let (isolation, _) =
        decide_isolation(IsolationChoice::Auto, &store_root).map_err(RunError::failed)?;
    let env = check_env(&suite, &store_root, isolation.namespaces)?;
    let started = std::time::Instant::now();
    let stem = format!(
        "{}{}",
        proctor_store::RESCORED_STEM,
        proctor_store::utc_now().replace([':', '.'], "-")
    );
    let mut writer =
        results::ResultsWriter::new(handle.dir(), id.as_str(), &suite, &current_hash, true)
            .context("cannot start the rescored results")?
            .for_run(&handle);
    let env = CheckEnv {
        cgroups: if isolation.namespaces {
            crate::cgroup::RunCgroups::create().map(std::sync::Arc::new)
        } else {
            Err("the checks run without namespaces".into())
        },
        ..env
    };
    let rescored = rescore(
        &suite,
        &handle,
        &store_root,
        CheckSetup {
            env: &env,
            images: &task_images,
            overlay: isolation.overlay,
            fixture_hash: &fixture_hash,
        },
        &mut |record| writer.add(record),
    );
    if let Ok(groups) = &env.cgroups {
        groups.remove();
    }
    let rescored = rescored.context("cannot rescore the run's trials")?;
    // The rules this rescore scored by, kept beside its results as the run keeps its own suite:
    // what a comparison sets against another arm's rules, part by part.
    let rules_dir = handle
        .dir()
        .join(format!("{stem}{}", proctor_store::RESCORED_SUITE_SUFFIX));
    proctor_store::keep_suite(&store_root, &rules_dir, &suite.root)
        .context("cannot keep the suite the run is rescored with")?;
    let written = match writer.finish(&stem) {
        Ok(_) => true,
        // Every trial.json was unreadable: nothing to write.
        Err(results::ResultsError::Empty) if !rescored.damaged.is_empty() => false,
        Err(e) => return Err(e).context("cannot write the rescored results"),
    };
    if !written {
        let _ = proctor_sandbox::remove_tree(&rules_dir);
    }
    Ok(Rescoring {
        rescored,
        from,
        stem,
        dir: handle.dir().to_path_buf(),
        id,
        written,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The store at `store_dir`, to write a rescore's results beside a run's: a read-only store is
/// refused before any work.
fn writable_store(store_dir: &Path) -> Result<Store, RunError> {
    let store = Store::open(store_dir)
        .with_context(|| format!("cannot open the store at {}", store_dir.display()))?;
    if store.is_read_only() {
        return Err(RunError::failed(proctor_store::StoreError::ReadOnly {
            root: store.root().to_path_buf(),
            what: "rescore a run (its results are written beside the run's)",
        }));
    }
    Ok(store)
}

/// The fixture's hash, when it is still the one run `id` recorded (`recorded`): its saved
/// changes rebuild the end state only over the same starting workspace.
fn unchanged_fixture(suite: &Suite, recorded: &str, id: &str) -> Result<String, RunError> {
    let fixture_hash =
        proctor_suite::tree::tree_hash(&suite.fixture_dir()).context("cannot hash the fixture")?;
    if fixture_hash != recorded {
        return Err(RunError::usage(
            format!("the suite's fixture changed since run {id} (hash {}…, now {}…): its saved changes no longer rebuild the end state", recorded.get(..12).unwrap_or_default(), fixture_hash.get(..12).unwrap_or_default()),
            "restore the fixture as it was; rules may change, the starting workspace may not",
        ));
    }
    Ok(fixture_hash)
}

/// What every rescored check shares; what is its task's own (network, image, holdout, binds,
/// limits, start state) is set per trial, and the control groups once nothing can return
/// before they are removed.
fn check_env(suite: &Suite, store_root: &Path, namespaces: bool) -> Result<CheckEnv, RunError> {
    Ok(CheckEnv {
        proctor_exe: std::env::current_exe().context("cannot find proctor's own executable")?,
        namespaces,
        hide: crate::trial::hidden_paths(&suite.root, store_root),
        grace: Duration::from_secs(2),
        image: None,
        network: proctor_sandbox::Network::None,
        allowed_hosts: Vec::new(),
        holdout_at: None,
        // Rebuilt per trial from what it kept, where its task's checks see the agent's root.
        agent_root: None,
        binds: Vec::new(),
        limits: Default::default(),
        cgroups: Err("not made yet".into()),
        start: Vec::new(),
        // Set per trial from its changes.
        watch: None,
    })
}

/// Where the rules come from: the run's kept suite (the folder, with a note, for a run that
/// keeps none), the folder it was read from, or the folder given.
fn rules_from(
    handle: &proctor_store::RunHandle,
    rules: RulesFrom,
    note: &mut dyn FnMut(&str),
) -> Result<SuiteFrom, RunError> {
    let id = handle.id();
    let meta = handle.meta();
    Ok(match rules {
        RulesFrom::Run => {
            let from = stored_suite::locate(handle)?;
            if let SuiteFrom::Folder(p) = &from {
                note(&format!(
                    "note: run {id} keeps no copy of its suite (it was made before runs kept one): rescoring with the suite at {}",
                    p.display()
                ));
            }
            from
        }
        RulesFrom::RunFolder => SuiteFrom::Folder(meta.suite_path.clone()),
        RulesFrom::Folder(dir) => SuiteFrom::Folder(dir),
    })
}
