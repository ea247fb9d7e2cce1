//! A run as the user asks for it ([`RunRequest`]) and its set-up ([`RunRequest::open`]): the
//! suite opened and checked, the plan made, every model it reaches checked (a provider that
//! serves the agent's API, a key in the environment), its images pulled, the run started (its
//! isolation decided by asking the machine) or resumed, then the model gateway started. Which
//! of these happen here and which on the nodes is the [`Executor`]'s to say.
//!
//! Nothing is printed: what the set-up has to say goes to an [`Observer`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use proctor_store::Store;
use proctor_suite::plan::Plan;
use proctor_suite::{PlanOptions, Suite};

use crate::error::{Context, RunError};
use crate::executor::{Executor, Observer, Resources};
use crate::image::TrialImage;
use crate::opening::{open_checked, open_for_run};
use crate::session::plan_trials;
use crate::{access, provision, IsolationChoice, Session};

/// What `proctor run` asks for, its arguments parsed.
#[derive(Debug, Clone, Default)]
pub struct RunRequest {
    /// The suite folder, as given (problems name it so).
    pub suite: PathBuf,
    /// The store folder.
    pub store: PathBuf,
    /// Trials, mode, variants, tasks and models of the plan.
    pub options: PlanOptions,
    /// The isolation asked for.
    pub isolation: IsolationChoice,
    /// The run to resume (an id, a unique prefix or `latest`), if any.
    pub resume: Option<String>,
    /// The configuration file of model providers (`--config`).
    pub config: Option<PathBuf>,
    /// The image cache (`--image-cache`).
    pub image_cache: Option<PathBuf>,
    /// Build every image that has a `build` folder, even one that can be pulled (`--build`).
    pub build_images: bool,
}

/// A run ready to execute: its session and what its trials share.
pub struct Prepared {
    /// The started or resumed run.
    pub session: Session,
    /// The gateway, images and browser (empty when the trials run elsewhere).
    pub resources: Resources,
}

impl RunRequest {
    /// The plan alone (`--dry-run`): nothing is created, checked or pulled.
    pub fn plan(&self) -> Result<Plan, RunError> {
        let mut suite = open_for_run(&self.suite, &self.options.tasks)?;
        suite.apply_models(&self.options.models);
        Ok(plan_trials(&suite, &self.options)?)
    }

    /// Sets the run up for `executor`: checks what it needs before anything is created, then
    /// starts the run (or resumes the one asked for) and, when its trials run here, pulls the
    /// images and starts the gateway.
    pub fn open(
        &self,
        executor: &mut dyn Executor,
        observer: &mut dyn Observer,
    ) -> Result<Prepared, RunError> {
        executor.available()?;
        let (suite, store) =
            open_suite_and_store(&self.suite, &self.options.tasks, &self.store, observer)?;
        executor.prepare(self.resume.as_deref(), &store)?;
        let here = executor.runs_here();
        let (session, access, images) = match &self.resume {
            None => self.start(suite, &store, &*executor)?,
            Some(prefix) => {
                let session = Session::resume(suite, &store, prefix)?;
                let access =
                    access::check(session.suite(), session.plan(), self.config.as_deref())?;
                let images = self.images(here, session.suite(), session.plan())?;
                provision::check_resume(session.run(), &images)?;
                executor.resumed(&session, observer)?;
                (session, access, images)
            }
        };
        for n in session.notes() {
            observer.note(&format!(
                "note: {n}; trials are recorded with isolation = \"{}\"",
                session.isolation().label()
            ));
        }
        if session.resumed() {
            observer.note(&format!("resuming run {}", session.run().id()));
        }
        let resources = if here {
            Resources {
                gateway: access.map(access::start).transpose()?,
                images,
                browser: access::browser_for(session.suite(), self.config.as_deref())?,
            }
        } else {
            Resources::default()
        };
        Ok(Prepared { session, resources })
    }

    /// Starts a new run: its models checked and (when the trials run here) its images pulled
    /// before the run is created.
    fn start(
        &self,
        suite: Suite,
        store: &Store,
        executor: &dyn Executor,
    ) -> Result<(Session, Option<access::Access>, Images), RunError> {
        let mut planned = suite.clone();
        planned.apply_models(&self.options.models);
        let plan = plan_trials(&planned, &self.options)?;
        let access = access::check(&planned, &plan, self.config.as_deref())?;
        let images = self.images(executor.runs_here(), &planned, &plan)?;
        let probe_dir = executor
            .probe_dir()
            .unwrap_or_else(|| store.root().to_path_buf());
        let session =
            Session::start_probing_in(suite, store, &self.options, self.isolation, &probe_dir)?;
        provision::record_in_run(session.run(), &images)?;
        Ok((session, access, images))
    }

    /// The planned tasks' images, pulled, when the trials run here.
    fn images(&self, here: bool, suite: &Suite, plan: &Plan) -> Result<Images, RunError> {
        if !here {
            return Ok(Images::new());
        }
        provision::for_run(
            suite,
            plan,
            self.config.as_deref(),
            self.image_cache.as_deref(),
            self.build_images,
        )
    }
}

/// Each task's image, by task id.
type Images = BTreeMap<String, Arc<TrialImage>>;

/// The run's suite, checked first where the user pointed (so that problems name the suite as
/// it was given; its warnings go to `observer`) and then opened by its absolute path
/// (sandboxes mount its layers by absolute path), and the store.
pub fn open_suite_and_store(
    suite: &Path,
    tasks: &[String],
    store: &Path,
    observer: &mut dyn Observer,
) -> Result<(Suite, Store), RunError> {
    for w in open_checked(suite, tasks, true)?.1 {
        observer.warning(&w);
    }
    let suite_dir = suite
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", suite.display()))?;
    let suite = open_for_run(&suite_dir, tasks)?;
    let store = Store::open(store)
        .with_context(|| format!("cannot open the store at {}", store.display()))?;
    Ok((suite, store))
}
