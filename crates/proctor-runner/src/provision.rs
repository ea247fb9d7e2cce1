//! The OCI images a run's tasks name (docs/environments.md), pulled and unpacked before any
//! trial, or built from a task's `build` folder when the image cannot be pulled (or always when
//! asked: `--build`), recorded in the run, and checked unmoved when the run resumes or is
//! rescored. For a run a task whose image cannot be had is a usage error (exit 2, naming the
//! task and the image); [`each_task`] gives every task's image or reason, so that `validate
//! --oracle` fails only those tasks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use proctor_image::{ImageCache, ImageRef, RegistryConfig};
use proctor_suite::plan::Plan;
use proctor_suite::{Suite, TaskEnvironment};

use crate::error::{Context, RunError};
use crate::image::TrialImage;
use crate::record::ImageRecord;

/// Where a command finds the images of tasks that run in one (`--image-cache`, `--config`).
#[derive(Debug, Clone, Copy)]
pub struct Images<'a> {
    /// The image cache (`--image-cache`).
    pub cache: Option<&'a Path>,
    /// The configuration file (`--config`), for registries.
    pub config: Option<&'a Path>,
}

/// The image cache's folder: `dir` (made absolute: the sandbox takes only absolute layers), or
/// the default one (not opened).
pub fn cache_dir(dir: Option<&Path>) -> Result<PathBuf, RunError> {
    match dir {
        Some(d) => std::path::absolute(d).map_err(|e| {
            RunError::usage(
                format!("cannot use the image cache {}: {e}", d.display()),
                "pass --image-cache DIR with a folder you can write",
            )
        }),
        None => ImageCache::default_dir().ok_or_else(|| {
            RunError::usage(
                "no home folder for the image cache",
                "pass --image-cache DIR",
            )
        }),
    }
}

/// The image cache at `dir`, or the default one.
pub fn cache(dir: Option<&Path>) -> Result<ImageCache, RunError> {
    let dir = cache_dir(dir)?;
    ImageCache::open(&dir).map_err(|e| {
        RunError::usage(
            format!("cannot open the image cache {}: {e}", dir.display()),
            "pass --image-cache DIR with a writable folder",
        )
    })
}

/// How registries are reached: the configuration's `[registries]`.
pub fn registry_config(config: Option<&Path>) -> Result<RegistryConfig, RunError> {
    let config = crate::access::load_config(config)?;
    let mut out = RegistryConfig::default();
    for (host, r) in config.registries {
        if r.insecure {
            out.insecure.insert(host.clone());
        }
        if !r.mirrors.is_empty() {
            out.mirrors.insert(host, r.mirrors);
        }
    }
    Ok(out)
}

/// Pulls one task environment's image and makes it a trial image.
fn pull(
    cache: &ImageCache,
    registries: &RegistryConfig,
    suite_root: &Path,
    env: &TaskEnvironment,
) -> Result<TrialImage, String> {
    let reference = ImageRef::parse(&env.image)
        .map_err(|e| e.to_string())?
        .resolve_against(suite_root);
    let image = cache
        .pull_with(&reference, registries, &mut || {
            eprintln!("image {}: pulling and unpacking", env.image);
        })
        .map_err(|e| e.to_string())?;
    Ok(trial_image(env, image, None))
}

/// `image`, had for `env`, as a trial image: in `env`'s working folder, else the one a
/// Dockerfile that built nothing set (`base`), else the image's own, else `/workspace`; with
/// the image's variables, then `base`'s, then `env`'s.
fn trial_image(
    env: &TaskEnvironment,
    image: proctor_image::Image,
    base: Option<proctor_image::BaseImage>,
) -> TrialImage {
    // An image's `WorkingDir` of `/` (Docker's default, written out) cannot be the workspace:
    // the whole image would be its lowest layer. It is taken as no working folder at all.
    let image_dir = image
        .config
        .working_dir
        .clone()
        .filter(|w| w.starts_with('/') && !w.trim_end_matches('/').is_empty());
    let (base_dir, base_env) = base.map_or((None, Vec::new()), |b| (b.workdir, b.env));
    let workdir = env
        .workdir
        .clone()
        .or(base_dir)
        .or(image_dir)
        .unwrap_or_else(|| "/workspace".into());
    let mut vars = image.config.env.clone();
    vars.extend(base_env);
    vars.extend(env.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    TrialImage {
        reference: env.image.clone(),
        digest: image.digest,
        rootfs: image.rootfs,
        workdir: PathBuf::from(workdir),
        env: vars,
        note: None,
    }
}

/// How a task environment's image is had.
#[derive(Debug, Clone, Copy)]
struct Having<'a> {
    cache: &'a ImageCache,
    registries: &'a RegistryConfig,
    suite_root: &'a Path,
    /// Build from `build` even when the image could be pulled (`--build`).
    force_build: bool,
}

/// One task environment's image: pulled; or, when it has a `build` folder, built from it when
/// the pull fails or a build is forced, the trial image's note saying so. Gives the image and
/// whether it was built; the error says every way that was tried.
fn obtain(how: Having<'_>, env: &TaskEnvironment) -> Result<(TrialImage, bool), String> {
    let Some(dir) = &env.build else {
        return pull(how.cache, how.registries, how.suite_root, env).map(|i| (i, false));
    };
    let why = if how.force_build {
        "--build asked for it".to_string()
    } else {
        match pull(how.cache, how.registries, how.suite_root, env) {
            Ok(image) => return Ok((image, false)),
            Err(e) => format!("the image could not be pulled: {e}"),
        }
    };
    let shown = dir
        .strip_prefix(how.suite_root)
        .unwrap_or(dir)
        .join("Dockerfile");
    let spec = proctor_image::BuildSpec {
        context: dir.clone(),
        dockerfile: None,
        timeout: env.build_timeout_sec.map(std::time::Duration::from_secs),
    };
    let built = how
        .cache
        .build(&spec, how.registries, &mut |builder, log| {
            eprintln!(
                "image {}: building {} with {} ({why}; log: {})",
                env.image,
                shown.display(),
                builder.kind.name(),
                log.display()
            )
        })
        .map_err(|e| format!("{why}; building it from {} failed: {e}", shown.display()))?;
    let mut image = match built {
        proctor_image::Built::Base { base, image } => trial_image(env, image, Some(base)),
        proctor_image::Built::Image { image, .. } => trial_image(env, image, None),
    };
    image.note = Some(format!("built from {} ({why})", shown.display()));
    Ok((image, true))
}

/// The image of every planned task that names one, pulled and unpacked (built from its
/// `build` folder when it cannot be pulled, or always with `force_build`); empty when none does
/// (nothing is read then, not even the configuration). The first task whose image cannot be
/// had is a usage error naming the task and the image.
pub fn for_run(
    suite: &Suite,
    plan: &Plan,
    config: Option<&Path>,
    cache_dir: Option<&Path>,
    force_build: bool,
) -> Result<BTreeMap<String, Arc<TrialImage>>, RunError> {
    let tasks: Vec<&str> = plan.trials.iter().map(|t| t.task.as_str()).collect();
    let images = Images {
        cache: cache_dir,
        config,
    };
    every_one(each_task(suite, &tasks, images, force_build)?)
}

/// The image of each of `tasks` that names one, pulled and unpacked (see [`for_run`]); the
/// first task whose image cannot be had is a usage error naming the task and the image.
pub fn for_tasks(
    suite: &Suite,
    tasks: &[&str],
    config: Option<&Path>,
    cache_dir: Option<&Path>,
) -> Result<BTreeMap<String, Arc<TrialImage>>, RunError> {
    let images = Images {
        cache: cache_dir,
        config,
    };
    every_one(each_task(suite, tasks, images, false)?)
}

/// The images `provisioned` had, when it had every task's; else a usage error naming the first
/// task whose image could not be had.
fn every_one(provisioned: Provisioned) -> Result<BTreeMap<String, Arc<TrialImage>>, RunError> {
    match provisioned.failed.into_iter().next() {
        Some((task, failure)) => Err(RunError::usage(
            format!("task `{task}`: image `{}`: {}", failure.image, failure.reason),
            "check the reference (docs/environments.md); `proctor images pull IMAGE` tries it alone",
        )),
        None => Ok(provisioned.images),
    }
}

/// What [`each_task`] had: the image of every task that could have one, why each other task
/// could not, and how many images were had each way.
#[derive(Debug, Clone, Default)]
pub struct Provisioned {
    /// Each task's image, by task id.
    pub images: BTreeMap<String, Arc<TrialImage>>,
    /// Each task whose image could not be had, by task id.
    pub failed: BTreeMap<String, ImageFailure>,
    /// How many distinct images were pulled and how many failed.
    pub counts: ImageCounts,
}

/// A task's image that could not be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageFailure {
    /// The image reference as the suite wrote it.
    pub image: String,
    /// Why: the registry's, the cache's or the reference's own error.
    pub reason: String,
}

/// How a command's distinct images were had.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct ImageCounts {
    /// Images pulled from a registry or read from an archive or layout (found in the cache
    /// included).
    pub pulled: u64,
    /// Images built from a Dockerfile.
    pub built: u64,
    /// Images that could not be had (their tasks do not run).
    pub failed: u64,
}

/// The image of each of `tasks` that names one, pulled and unpacked, each distinct image once
/// (built from the task's `build` folder when it cannot be pulled, or always with
/// `force_build`); a task whose image cannot be had is named in [`Provisioned::failed`] with the reason, and
/// the others still get theirs. Only the cache and the configuration failing is an error.
pub fn each_task(
    suite: &Suite,
    tasks: &[&str],
    images: Images<'_>,
    force_build: bool,
) -> Result<Provisioned, RunError> {
    let mut wanted: BTreeMap<String, TaskEnvironment> = BTreeMap::new();
    for t in tasks {
        if let Some(task) = suite.task(t) {
            if let Some(env) = suite.environment(task) {
                wanted.insert(t.to_string(), env);
            }
        }
    }
    let mut out = Provisioned::default();
    if wanted.is_empty() {
        return Ok(out);
    }
    let cache = cache(images.cache)?;
    let registries = registry_config(images.config)?;
    let how = Having {
        cache: &cache,
        registries: &registries,
        suite_root: &suite.root,
        force_build,
    };
    let mut had: BTreeMap<TaskEnvironment, Result<Arc<TrialImage>, String>> = BTreeMap::new();
    // Images counted, by reference and build folder (tasks may share one under other settings).
    let mut counted: std::collections::BTreeSet<(String, Option<PathBuf>)> = Default::default();
    for (task, env) in wanted {
        let image = match had.get(&env) {
            Some(i) => i.clone(),
            None => {
                let image = obtain(how, &env);
                if counted.insert((env.image.clone(), env.build.clone())) {
                    match &image {
                        Ok((_, true)) => out.counts.built += 1,
                        Ok((_, false)) => out.counts.pulled += 1,
                        Err(_) => out.counts.failed += 1,
                    }
                }
                let image = image.map(|(i, _)| Arc::new(i));
                had.insert(env.clone(), image.clone());
                image
            }
        };
        match image {
            Ok(image) => {
                out.images.insert(task, image);
            }
            Err(reason) => {
                out.failed.insert(
                    task,
                    ImageFailure {
                        image: env.image.clone(),
                        reason,
                    },
                );
            }
        }
    }
    Ok(out)
}

/// Refuses to resume a run whose finished trials ran in another image than a task's reference
/// resolves to now (a tag moved): the run would mix two images.
pub fn check_resume(
    run: &proctor_store::RunHandle,
    images: &BTreeMap<String, Arc<TrialImage>>,
) -> Result<(), RunError> {
    check_unmoved(run, images, "resuming would mix two images")
}

/// Refuses (exit 2) when a task's image now resolves to another digest than the one `run`
/// started with or its trials ran in; `doing` says what that would spoil.
pub fn check_unmoved(
    run: &proctor_store::RunHandle,
    images: &BTreeMap<String, Arc<TrialImage>>,
    doing: &str,
) -> Result<(), RunError> {
    if images.is_empty() {
        return Ok(());
    }
    let mut moved: Option<String> = None;
    // The images the run started with (run.json), then those its trials ran in.
    let started: BTreeMap<String, ImageRecord> =
        run.meta().extra.and_then(|e| e.images).unwrap_or_default();
    for (task, was) in &started {
        if let Some(now) = images.get(task).filter(|now| now.digest != was.digest) {
            moved.get_or_insert(format!(
                "task `{task}`: image `{}` now resolves to {}, but the run started with {}; {doing}",
                now.reference, now.digest, was.digest
            ));
        }
    }
    crate::results::for_each_record(run, |record| {
        if let (Some(was), Some(now)) = (&record.launch.image, images.get(&record.plan.task)) {
            if was.digest != now.digest && moved.is_none() {
                moved = Some(format!(
                    "task `{}`: image `{}` now resolves to {}, but the run's trials ran in {}; {doing}",
                    record.plan.task, now.reference, now.digest, was.digest
                ));
            }
        }
        Ok(())
    })
    .context("cannot read the run's trials")?;
    match moved {
        Some(message) => Err(RunError::usage(
            message,
            "start a new run, or pin the image by digest (REPO@sha256:...) so it cannot move",
        )),
        None => Ok(()),
    }
}

/// Records in `run.json` the image each task runs in (reference and resolved digest).
pub fn record_in_run(
    run: &proctor_store::RunHandle,
    images: &BTreeMap<String, Arc<TrialImage>>,
) -> Result<(), RunError> {
    if images.is_empty() {
        return Ok(());
    }
    let listed: BTreeMap<String, ImageRecord> = images
        .iter()
        .map(|(task, img)| {
            (
                task.clone(),
                ImageRecord {
                    reference: img.reference.clone(),
                    digest: img.digest.clone(),
                    note: img.note.clone(),
                },
            )
        })
        .collect();
    run.update_meta(|meta| meta.sections_mut().images = Some(listed))
        .context("cannot record the images in run.json")
}

/// Builds the image of `spec` (`proctor images build`); `on_start` hears the builder and the
/// log before a build starts. A missing builder, a failed build and anything else are usage
/// errors that say what to do.
pub fn build_image(
    cache: &ImageCache,
    registries: &RegistryConfig,
    spec: &proctor_image::BuildSpec,
    on_start: &mut dyn FnMut(&proctor_image::Builder, &Path),
) -> Result<proctor_image::Built, RunError> {
    let shown = spec.dockerfile_path();
    cache
        .build(spec, registries, on_start)
        .map_err(|e| {
            match e {
        proctor_image::ImageError::NoBuilder { .. } => RunError::usage(
            e.to_string(),
            "install buildah (or podman, or docker) and build again",
        ),
        failed @ proctor_image::ImageError::BuildFailed { .. } => RunError::usage(
            format!("{}: {failed}", shown.display()),
            "fix the Dockerfile (the log says where the build stopped) and build again",
        ),
        other => RunError::usage(
            format!("{}: {other}", shown.display()),
            "see docs/environments.md (registries and mirrors: [registries] in the configuration)",
        ),
    }
        })
}

/// Every image reference a suite names, with the folder its paths are relative to.
pub fn suite_images(suite: &Suite) -> Vec<(PathBuf, String)> {
    let mut out: Vec<(PathBuf, String)> = Vec::new();
    for task in &suite.file.tasks {
        if let Some(env) = suite.environment(task) {
            if !out.iter().any(|(_, r)| r == &env.image) {
                out.push((suite.root.clone(), env.image));
            }
        }
    }
    out
}
