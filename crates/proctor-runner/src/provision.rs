//! The OCI images a run's tasks name (docs/environments.md), pulled and unpacked before any
//! trial (a failure is a usage error, exit 2, naming the task and the image), recorded in the
//! run, and checked unmoved when the run resumes or is rescored.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use proctor_image::{ImageCache, ImageRef, RegistryConfig};
use proctor_suite::plan::Plan;
use proctor_suite::{Suite, TaskEnvironment};

use crate::error::{Context, RunError};
use crate::image::{SidecarImage, TrialImage};
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
    // An image's `WorkingDir` of `/` (Docker's default, written out) cannot be the workspace:
    // the whole image would be its lowest layer. It is taken as no working folder at all.
    let image_dir = image
        .config
        .working_dir
        .clone()
        .filter(|w| w.starts_with('/') && !w.trim_end_matches('/').is_empty());
    let workdir = env
        .workdir
        .clone()
        .or(image_dir)
        .unwrap_or_else(|| "/workspace".into());
    let mut vars = image.config.env.clone();
    vars.extend(env.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    Ok(TrialImage {
        reference: env.image.clone(),
        digest: image.digest,
        rootfs: image.rootfs,
        workdir: PathBuf::from(workdir),
        env: vars,
        sidecars: BTreeMap::new(),
    })
}

/// Pulls (or takes from `pulled`, by reference) the image of each sidecar service of `task`.
fn sidecars(
    cache: &ImageCache,
    registries: &RegistryConfig,
    suite: &Suite,
    task: &proctor_suite::model::Task,
    pulled: &mut BTreeMap<String, SidecarImage>,
) -> Result<BTreeMap<String, SidecarImage>, RunError> {
    let mut out = BTreeMap::new();
    for service in suite.services(task) {
        let Some(reference) = service.image.as_ref().map(|i| i.get_ref()) else {
            continue;
        };
        if !pulled.contains_key(reference) {
            let image = pull_sidecar(cache, registries, &suite.root, reference).map_err(|e| {
                RunError::usage(
                    format!(
                        "task `{}`: service `{}`: image `{reference}`: {e}",
                        task.id.get_ref(),
                        service.name.get_ref()
                    ),
                    "check the reference (docs/environments.md); `proctor images pull IMAGE` tries it alone",
                )
            })?;
            pulled.insert(reference.clone(), image);
        }
        if let Some(image) = pulled.get(reference) {
            out.insert(service.name.get_ref().clone(), image.clone());
        }
    }
    Ok(out)
}

/// Pulls one sidecar's image.
fn pull_sidecar(
    cache: &ImageCache,
    registries: &RegistryConfig,
    suite_root: &Path,
    reference: &str,
) -> Result<SidecarImage, String> {
    let parsed = ImageRef::parse(reference)
        .map_err(|e| e.to_string())?
        .resolve_against(suite_root);
    let image = cache
        .pull_with(&parsed, registries, &mut || {
            eprintln!("image {reference}: pulling and unpacking");
        })
        .map_err(|e| e.to_string())?;
    Ok(SidecarImage {
        reference: reference.to_string(),
        digest: image.digest,
        rootfs: image.rootfs,
        working_dir: image.config.working_dir.clone(),
        env: image.config.env.clone(),
        entrypoint: image.config.entrypoint.clone(),
        cmd: image.config.cmd.clone(),
    })
}

/// The image of every planned task that names one, pulled and unpacked; empty when none does
/// (nothing is read then, not even the configuration).
pub fn for_run(
    suite: &Suite,
    plan: &Plan,
    config: Option<&Path>,
    cache_dir: Option<&Path>,
) -> Result<BTreeMap<String, Arc<TrialImage>>, RunError> {
    let tasks: Vec<&str> = plan.trials.iter().map(|t| t.task.as_str()).collect();
    for_tasks(suite, &tasks, config, cache_dir)
}

/// The image of each of `tasks` that names one, pulled and unpacked (see [`for_run`]).
pub fn for_tasks(
    suite: &Suite,
    tasks: &[&str],
    config: Option<&Path>,
    cache_dir: Option<&Path>,
) -> Result<BTreeMap<String, Arc<TrialImage>>, RunError> {
    let mut wanted: BTreeMap<String, TaskEnvironment> = BTreeMap::new();
    for t in tasks {
        if let Some(task) = suite.task(t) {
            if let Some(env) = suite.environment(task) {
                wanted.insert(t.to_string(), env);
            }
        }
    }
    if wanted.is_empty() {
        return Ok(BTreeMap::new());
    }
    let cache = cache(cache_dir)?;
    let registries = registry_config(config)?;
    let mut pulled: BTreeMap<TaskEnvironment, Arc<TrialImage>> = BTreeMap::new();
    let mut sidecar_images: BTreeMap<String, SidecarImage> = BTreeMap::new();
    let mut out = BTreeMap::new();
    for (task, env) in wanted {
        let image = match pulled.get(&env) {
            Some(i) => Arc::clone(i),
            None => {
                let image = pull(&cache, &registries, &suite.root, &env).map_err(|e| {
                    RunError::usage(
                        format!("task `{task}`: image `{}`: {e}", env.image),
                        "check the reference (docs/environments.md); `proctor images pull IMAGE` tries it alone",
                    )
                })?;
                let image = Arc::new(image);
                pulled.insert(env, Arc::clone(&image));
                image
            }
        };
        let own = match suite.task(&task) {
            Some(t) => sidecars(&cache, &registries, suite, t, &mut sidecar_images)?,
            None => BTreeMap::new(),
        };
        let image = if own.is_empty() {
            image
        } else {
            let mut with = (*image).clone();
            with.sidecars = own;
            Arc::new(with)
        };
        out.insert(task, image);
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
    let now_listed = listed(images);
    for (task, was) in &started {
        if let Some(now) = now_listed.get(task).filter(|now| now.digest != was.digest) {
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

/// The images of `images` as `run.json` lists them: each task's under its id, and each of
/// its sidecars' under `TASK/SERVICE`.
fn listed(images: &BTreeMap<String, Arc<TrialImage>>) -> BTreeMap<String, ImageRecord> {
    let mut out = BTreeMap::new();
    for (task, img) in images {
        out.insert(
            task.clone(),
            ImageRecord {
                reference: img.reference.clone(),
                digest: img.digest.clone(),
            },
        );
        for (name, sidecar) in &img.sidecars {
            out.insert(
                format!("{task}/{name}"),
                ImageRecord {
                    reference: sidecar.reference.clone(),
                    digest: sidecar.digest.clone(),
                },
            );
        }
    }
    out
}

/// Records in `run.json` the image each task runs in (reference and resolved digest), and
/// each of its sidecars'.
pub fn record_in_run(
    run: &proctor_store::RunHandle,
    images: &BTreeMap<String, Arc<TrialImage>>,
) -> Result<(), RunError> {
    if images.is_empty() {
        return Ok(());
    }
    let listed = listed(images);
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
        for image in suite.services(task).iter().filter_map(|s| s.image.as_ref()) {
            if !out.iter().any(|(_, r)| r == image.get_ref()) {
                out.push((suite.root.clone(), image.get_ref().clone()));
            }
        }
    }
    out
}
