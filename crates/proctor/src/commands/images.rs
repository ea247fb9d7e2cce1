//! OCI images as the command line sees them (docs/environments.md): every image a run's tasks
//! name, pulled and unpacked before any trial (a failure is a usage error, exit 2, naming the
//! task and the image), and `proctor images pull | list | prune`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use proctor_image::{BuildSpec, Built, ImageCache, ImageRef, RegistryConfig};
use proctor_runner::image::TrialImage;
use proctor_runner::record::ImageRecord;
use proctor_suite::plan::Plan;
use proctor_suite::{Suite, TaskEnvironment};

use crate::cli::ImagesAction;
use crate::exit::{Error, Status};

/// The image cache's folder: `dir` (made absolute: the sandbox takes only absolute layers), or
/// the default one (not opened).
pub fn cache_dir(dir: Option<&Path>) -> Result<PathBuf, Error> {
    match dir {
        Some(d) => std::path::absolute(d).map_err(|e| {
            Error::usage(
                format!("cannot use the image cache {}: {e}", d.display()),
                "pass --image-cache DIR with a folder you can write",
            )
        }),
        None => ImageCache::default_dir().ok_or_else(|| {
            Error::usage(
                "no home folder for the image cache",
                "pass --image-cache DIR",
            )
        }),
    }
}

/// The image cache at `dir`, or the default one.
fn cache(dir: Option<&Path>) -> Result<ImageCache, Error> {
    let dir = cache_dir(dir)?;
    ImageCache::open(&dir).map_err(|e| {
        Error::usage(
            format!("cannot open the image cache {}: {e}", dir.display()),
            "pass --image-cache DIR with a writable folder",
        )
    })
}

/// How registries are reached: the configuration's `[registries]`.
pub fn registry_config(config: Option<&Path>) -> Result<RegistryConfig, Error> {
    let config = crate::commands::models::load_config(config)?;
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
    })
}

/// The image of every planned task that names one, pulled and unpacked; empty when none does
/// (nothing is read then, not even the configuration).
pub fn for_run(
    suite: &Suite,
    plan: &Plan,
    config: Option<&Path>,
    cache_dir: Option<&Path>,
) -> Result<BTreeMap<String, Arc<TrialImage>>, Error> {
    let tasks: Vec<&str> = plan.trials.iter().map(|t| t.task.as_str()).collect();
    for_tasks(suite, &tasks, config, cache_dir)
}

/// The image of each of `tasks` that names one, pulled and unpacked (see [`for_run`]).
pub fn for_tasks(
    suite: &Suite,
    tasks: &[&str],
    config: Option<&Path>,
    cache_dir: Option<&Path>,
) -> Result<BTreeMap<String, Arc<TrialImage>>, Error> {
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
    let mut out = BTreeMap::new();
    for (task, env) in wanted {
        let image = match pulled.get(&env) {
            Some(i) => Arc::clone(i),
            None => {
                let image = pull(&cache, &registries, &suite.root, &env).map_err(|e| {
                    Error::usage(
                        format!("task `{task}`: image `{}`: {e}", env.image),
                        "check the reference (docs/environments.md); `proctor images pull IMAGE` tries it alone",
                    )
                })?;
                let image = Arc::new(image);
                pulled.insert(env, Arc::clone(&image));
                image
            }
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
) -> Result<(), Error> {
    check_unmoved(run, images, "resuming would mix two images")
}

/// Refuses (exit 2) when a task's image now resolves to another digest than the one `run`
/// started with or its trials ran in; `doing` says what that would spoil.
pub fn check_unmoved(
    run: &proctor_store::RunHandle,
    images: &BTreeMap<String, Arc<TrialImage>>,
    doing: &str,
) -> Result<(), Error> {
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
    proctor_runner::results::for_each_record(run, |record| {
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
    .map_err(|e| Error::Other(anyhow::Error::new(e).context("cannot read the run's trials")))?;
    match moved {
        Some(message) => Err(Error::usage(
            message,
            "start a new run, or pin the image by digest (REPO@sha256:...) so it cannot move",
        )),
        None => Ok(()),
    }
}

/// Records in `run.json` the image each task runs in (reference and resolved digest), as its
/// `images` section.
pub fn record_in_run(
    run: &proctor_store::RunHandle,
    images: &BTreeMap<String, Arc<TrialImage>>,
) -> Result<(), Error> {
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
                },
            )
        })
        .collect();
    run.update_meta(|meta| meta.sections_mut().images = Some(listed))
        .map_err(|e| {
            Error::Other(anyhow::Error::new(e).context("cannot record the images in run.json"))
        })
}

/// `proctor images ...`.
pub fn run(
    action: ImagesAction,
    cache_dir: Option<&Path>,
    config: Option<&Path>,
) -> Result<Status, Error> {
    let cache = cache(cache_dir)?;
    match action {
        ImagesAction::Pull { target } => {
            let dir = Path::new(&target);
            let references: Vec<(PathBuf, String)> = if dir.join("suite.toml").is_file() {
                let suite = Suite::parse(dir).map_err(|p| Error::InvalidSuite {
                    suite: target.clone(),
                    problems: vec![p],
                })?;
                suite_images(&suite)
            } else {
                vec![(std::env::current_dir().unwrap_or_default(), target.clone())]
            };
            let registries = registry_config(config)?;
            for (base, r) in references {
                let reference = ImageRef::parse(&r)
                    .map_err(|e| Error::usage(e.to_string(), "see docs/environments.md"))?
                    .resolve_against(&base);
                let image = cache.pull(&reference, &registries).map_err(|e| {
                    Error::usage(format!("image `{r}`: {e}"), "see docs/environments.md")
                })?;
                println!("{r}\t{}\t{}", image.digest, image.rootfs.display());
            }
            Ok(Status::Success)
        }
        ImagesAction::Build { context, file } => {
            let registries = registry_config(config)?;
            build(&cache, &registries, &context, file.as_deref())
        }
        ImagesAction::List => {
            let mut t = proctor_report::Table::new(&["DIGEST", "SIZE", "UNPACKED", "REFERENCES"]);
            for i in cache
                .list()
                .map_err(|e| Error::Other(anyhow::Error::new(e)))?
            {
                t.row([
                    i.digest.get(..19).unwrap_or(&i.digest).to_string(),
                    format!("{:.1} MB", i.size_bytes as f64 / 1e6),
                    i.unpacked_at,
                    i.references.join(", "),
                ]);
            }
            print!("{}", t.text());
            Ok(Status::Success)
        }
        ImagesAction::Prune { keep } => {
            let mut kept: Vec<String> = Vec::new();
            for dir in &keep {
                let suite = Suite::parse(dir).map_err(|p| Error::InvalidSuite {
                    suite: dir.display().to_string(),
                    problems: vec![p],
                })?;
                let registries = registry_config(config)?;
                for (base, r) in suite_images(&suite) {
                    if let Ok(reference) = ImageRef::parse(&r) {
                        let reference = reference.resolve_against(&base);
                        if let Ok(d) = cache.resolve_digest(&reference, &registries) {
                            kept.push(d);
                        }
                    }
                }
            }
            let report = cache
                .prune(|i| kept.contains(&i.digest))
                .map_err(|e| Error::Other(anyhow::Error::new(e)))?;
            eprintln!(
                "removed {} image(s), {} blob(s) and {} build(s); kept {}",
                report.removed_images.len(),
                report.removed_blobs,
                report.removed_builds,
                kept.len()
            );
            Ok(Status::Success)
        }
    }
}

/// `proctor images build DIR [-f FILE]`: the result on stdout (`REFERENCE\tDIGEST\tROOTFS`),
/// what was done (built, cache hit, or no build needed) and the log's path on stderr.
fn build(
    cache: &ImageCache,
    registries: &RegistryConfig,
    context: &Path,
    file: Option<&Path>,
) -> Result<Status, Error> {
    let spec = BuildSpec {
        context: context.to_path_buf(),
        dockerfile: file.map(Path::to_path_buf),
    };
    let shown = spec.dockerfile_path();
    let built = cache
        .build(&spec, registries, &mut |builder, log| {
            eprintln!(
                "building {} with {} (log: {})",
                shown.display(),
                builder.program.display(),
                log.display()
            );
        })
        .map_err(|e| match e {
            proctor_image::ImageError::NoBuilder { .. } => Error::usage(
                e.to_string(),
                "install buildah (or podman, or docker) and build again",
            ),
            failed @ proctor_image::ImageError::BuildFailed { .. } => Error::usage(
                format!("{}: {failed}", shown.display()),
                "fix the Dockerfile (the log says where the build stopped) and build again",
            ),
            other => Error::usage(
                format!("{}: {other}", shown.display()),
                "see docs/environments.md (registries and mirrors: [registries] in the configuration)",
            ),
        })?;
    match built {
        Built::Base { base, image } => {
            eprintln!(
                "{} is only FROM with WORKDIR/ENV: nothing to build, its image is {}",
                shown.display(),
                base.from
            );
            if let Some(w) = &base.workdir {
                eprintln!("  workdir = {w:?}");
            }
            for (k, v) in &base.env {
                eprintln!("  env {k} = {v:?}");
            }
            println!(
                "{}\t{}\t{}",
                base.from,
                image.digest,
                image.rootfs.display()
            );
        }
        Built::Image {
            record,
            image,
            cache_hit,
        } => {
            if cache_hit {
                eprintln!(
                    "cache hit: built before from the same Dockerfile and context (key {}), no build; log: {}",
                    record.key,
                    record.log.display()
                );
            } else {
                eprintln!(
                    "built with {} in {:.1} s (key {}); log: {}",
                    record.builder,
                    record.seconds,
                    record.key,
                    record.log.display()
                );
                if let Some(base) = &record.base {
                    eprintln!("  FROM {} ({})", base.name, base.digest);
                }
            }
            println!(
                "oci-archive:{}\t{}\t{}",
                record.archive.display(),
                image.digest,
                image.rootfs.display()
            );
        }
    }
    Ok(Status::Success)
}

/// Every image reference a suite names, with the folder its paths are relative to.
fn suite_images(suite: &Suite) -> Vec<(PathBuf, String)> {
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
