//! `proctor rescore RUN`: the saved end states scored again, with the rules of the run's own
//! copy of its suite (the default), of the suite folder it was read from (`--suite-from
//! folder`) or of another suite folder (`--suite DIR`); writes
//! `results.rescored-TIMESTAMP.{json,md}` beside the run's own results and lists every trial
//! whose outcome changed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use proctor_report::Table;
use proctor_runner::rescore::{rescore, Changed, CheckSetup};
use proctor_runner::results;
use proctor_runner::trial::CheckEnv;
use proctor_runner::{decide_isolation, IsolationChoice};
use proctor_store::Store;

use crate::commands::open_suite;
use crate::exit::{Error, Status};
use proctor_runner::stored_suite::{self as run_suite, SuiteFrom};

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

/// Where a rescore finds the images of tasks that run in one.
pub struct Images<'a> {
    /// The image cache (`--image-cache`).
    pub cache: Option<&'a Path>,
    /// The configuration file (`--config`), for registries.
    pub config: Option<&'a Path>,
}

/// Rescores a run; the checks of a task that runs in an image run in it again, which must be
/// the image its trials ran in. Exits `Unfinished` (3) when any trial's outcome became errored
/// or ungradeable (its end state could not be graded again), or when a trial's `trial.json` is
/// there but cannot be read (each is named on stderr).
pub fn run(
    store_dir: &Path,
    run: &str,
    rules: RulesFrom,
    images: Images<'_>,
) -> Result<Status, Error> {
    let store = Store::open(store_dir)
        .with_context(|| format!("cannot open the store at {}", store_dir.display()))?;
    let store_root = store.root().to_path_buf();
    if store.is_read_only() {
        // Rescoring writes its results beside the run's: refuse before any work.
        return Err(anyhow::Error::new(proctor_store::StoreError::ReadOnly {
            root: store_root,
            what: "rescore a run (its results are written beside the run's)",
        })
        .into());
    }
    let id = store
        .resolve_run(run)
        .map_err(|e| Error::usage(e.to_string(), "`proctor list` shows the runs in this store"))?;
    let handle = store.open_run(&id).context("cannot open the run")?;
    let meta = handle.meta();
    let from = match rules {
        RulesFrom::Run => {
            let from = run_suite::locate(&handle)?;
            if let SuiteFrom::Folder(p) = &from {
                eprintln!(
                    "note: run {id} keeps no copy of its suite (it was made before runs kept one): rescoring with the suite at {}",
                    p.display()
                );
            }
            from
        }
        RulesFrom::RunFolder => SuiteFrom::Folder(meta.suite_path.clone()),
        RulesFrom::Folder(dir) => SuiteFrom::Folder(dir),
    };
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
    let fixture_hash =
        proctor_suite::tree::tree_hash(&suite.fixture_dir()).context("cannot hash the fixture")?;
    if fixture_hash != meta.fixture_hash {
        return Err(Error::usage(
            format!("the suite's fixture changed since run {id} (hash {}…, now {}…): its saved changes no longer rebuild the end state", meta.fixture_hash.get(..12).unwrap_or_default(), fixture_hash.get(..12).unwrap_or_default()),
            "restore the fixture as it was; rules may change, the starting workspace may not",
        ));
    }
    let tasks: Vec<&str> = meta.tasks.iter().map(String::as_str).collect();
    let task_images =
        proctor_runner::provision::for_tasks(&suite, &tasks, images.config, images.cache)?;
    proctor_runner::provision::check_unmoved(
        &handle,
        &task_images,
        "rescoring would grade its end states in another image",
    )?;
    let (isolation, _) =
        decide_isolation(IsolationChoice::Auto, &store_root).map_err(|e| Error::Other(e.into()))?;
    let env = CheckEnv {
        proctor_exe: std::env::current_exe().context("cannot find proctor's own executable")?,
        namespaces: isolation.namespaces,
        hide: proctor_runner::trial::hidden_paths(&suite.root, &store_root),
        grace: Duration::from_secs(2),
        image: None,
        // Each trial's checks get its task's `check_network` (set per trial).
        network: proctor_sandbox::Network::None,
        holdout_at: None,
    };
    let started = std::time::Instant::now();
    let stem = format!(
        "{}{}",
        proctor_store::RESCORED_STEM,
        proctor_store::utc_now().replace([':', '.'], "-")
    );
    let mut writer =
        results::ResultsWriter::new(handle.dir(), id.as_str(), &suite, &current_hash, true)
            .context("cannot start the rescored results")?;
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
    )
    .context("cannot rescore the run's trials")?;
    for d in &rescored.damaged {
        eprintln!(
            "warning: trial {} was not rescored: {} (`proctor run SUITE --resume {id}` runs it again)",
            d.trial_id, d.reason
        );
    }
    match writer.finish(&stem) {
        Ok(_) => {}
        // Every trial.json was unreadable: nothing to write, and each was named above.
        Err(results::ResultsError::Empty) if !rescored.damaged.is_empty() => {
            eprintln!(
                "no trial of run {id} could be read; nothing was rescored and nothing written"
            );
            return Ok(Status::Unfinished);
        }
        Err(e) => {
            return Err(anyhow::Error::new(e)
                .context("cannot write the rescored results")
                .into())
        }
    }
    eprintln!(
        "rescored {} trial(s) of run {id} in {:.2}s with the rules of {}",
        rescored.trials,
        started.elapsed().as_secs_f64(),
        from.describe()
    );
    for u in &rescored.unrescored {
        eprintln!(
            "warning: trial {} was not rescored and keeps its old verdict: {}",
            u.trial, u.why
        );
    }
    print_changed(&rescored.changed, rescored.unrescored.len());
    eprintln!(
        "wrote {}",
        handle.dir().join(format!("{stem}.json")).display()
    );
    if !rescored.unrescored.is_empty() {
        eprintln!(
            "{} trial(s) could not be rescored (listed above)",
            rescored.unrescored.len()
        );
        return Ok(Status::Unfinished);
    }
    if !rescored.damaged.is_empty() {
        eprintln!(
            "{} trial(s) have an unreadable trial.json (listed above)",
            rescored.damaged.len()
        );
        return Ok(Status::Unfinished);
    }
    Ok(status(&rescored.changed))
}

/// Every trial whose outcome changed, with the new reason; "no outcome changed" only when
/// every trial was rescored (`unrescored` of them were not).
fn print_changed(changed: &[Changed], unrescored: usize) {
    if changed.is_empty() {
        if unrescored == 0 {
            eprintln!("no outcome changed");
        } else {
            eprintln!("no outcome of the trials rescored changed");
        }
        return;
    }
    let mut t = Table::new(&["TRIAL", "BEFORE", "AFTER", "REASON"]);
    for c in changed {
        t.row([
            c.trial.clone(),
            c.before.to_string(),
            c.after.to_string(),
            c.reason.clone(),
        ]);
    }
    print!("{}", t.text());
    eprintln!("{} outcome(s) changed", changed.len());
}

/// Success, unless a trial whose end state graded before no longer does: the rescore could not
/// grade it.
fn status(changed: &[Changed]) -> Status {
    let ungraded = changed.iter().filter(|c| !c.after.is_graded()).count();
    if ungraded == 0 {
        return Status::Success;
    }
    eprintln!("{ungraded} trial(s) became errored or ungradeable (listed above with the reason)");
    Status::Unfinished
}
