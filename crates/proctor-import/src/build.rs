//! Tasks whose image is a Dockerfile, built at import: the image goes into proctor's image
//! cache (keyed by the Dockerfile and its build context, so tasks that share them are built
//! once and an import run again builds nothing) and into the suite as `images/TASK_ID.tar`. A
//! Dockerfile that is only `FROM` with `WORKDIR`/`ENV` is not built: the task runs its base
//! image, in that working folder with those variables. A build that fails skips its task with
//! the builder's error.

use std::path::PathBuf;
use std::sync::Arc;

use proctor_image::{BuildSpec, Built, ImageCache, ImageError, RegistryConfig};

use crate::image::{build_instructions, resolve, DockerBuild, ImageSource};
use crate::model::TaskPlan;

/// How an import builds the images of tasks that have only a Dockerfile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildImages {
    /// The image cache the builds go into (and are found in: a cache hit runs no builder).
    pub cache_dir: PathBuf,
    /// How registries are reached for the Dockerfiles' `FROM` images (insecure registries,
    /// mirrors, credentials), as for a pull.
    pub registries: RegistryConfig,
    /// Told, one line at a time, what each build does as it happens (a dataset's builds can
    /// take hours); `None`: nothing is said until the report.
    pub progress: Option<Progress>,
}

/// A receiver of progress lines (`building TASK ...`, `built TASK in 12.3 s`).
#[derive(Clone)]
pub struct Progress(pub Arc<dyn Fn(&str) + Send + Sync>);

impl Progress {
    /// Says `line`.
    fn say(&self, line: &str) {
        (self.0)(line)
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Progress(..)")
    }
}

/// Two receivers are equal when they are the same one.
impl PartialEq for Progress {
    fn eq(&self, other: &Progress) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Progress {}

/// What the import's builds did, for its report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuildStats {
    /// Images built by a builder.
    pub built: usize,
    /// Milliseconds the builders took, in all.
    pub build_millis: u64,
    /// Tasks whose image was found already built (same Dockerfile and context): no builder ran.
    pub cache_hits: usize,
    /// Tasks whose Dockerfile is only `FROM` with `WORKDIR`/`ENV`: they run the base image.
    pub base_only: usize,
    /// Builds that failed (their tasks are skipped).
    pub failed: usize,
    /// Tasks whose prebuilt registry image has its Dockerfile kept in the suite, to build the
    /// image from when it cannot be pulled (or with `--build`).
    pub fallbacks: usize,
}

impl BuildStats {
    /// Whether any task's image was a Dockerfile.
    pub fn any(&self) -> bool {
        self.built + self.cache_hits + self.base_only + self.failed + self.fallbacks > 0
    }
}

/// Makes `plan`'s Dockerfile image one the suite can name: a Dockerfile that is only `FROM`
/// with `WORKDIR`/`ENV` is its base image (with or without `options`); any other is built with
/// `options` (with no `options`, the commands that build it are the skip reason). The error is
/// the skip reason. A plan whose image is no Dockerfile is left as it is.
pub(crate) fn resolve_plan(
    plan: &mut TaskPlan,
    options: Option<&BuildImages>,
    stats: &mut BuildStats,
) -> Result<(), String> {
    if plan.fallback_build.is_some() {
        stats.fallbacks += 1;
    }
    let ImageSource::Dockerfile(build) = &plan.image else {
        return Ok(());
    };
    let build = build.clone();
    let text = std::fs::read_to_string(&build.dockerfile)
        .map_err(|e| format!("cannot read {}: {e}", build.shown_dockerfile))?;
    // A Dockerfile that needs no builder is honoured without one, also under `--no-build`.
    if let Some(base) = proctor_image::base_only(&text) {
        return use_base(plan, &build, base, stats);
    }
    let Some(options) = options else {
        return Err(build_instructions(
            &plan.id,
            &build.what,
            &build.shown_context,
        ));
    };
    let built = build_image(&plan.id, &build, plan.build_timeout, options)?;
    record_build(plan, &build, built, stats)
}

/// A Dockerfile that is only `FROM` with `WORKDIR`/`ENV`: the task runs the base image as the
/// Dockerfile sets it up, its own settings winning.
fn use_base(
    plan: &mut TaskPlan,
    build: &DockerBuild,
    base: proctor_image::BaseImage,
    stats: &mut BuildStats,
) -> Result<(), String> {
    let image = match resolve(&plan.source, Some(&base.from)) {
        Some(Ok(image @ ImageSource::Reference(_))) => image,
        Some(Err(e)) => return Err(e),
        _ => {
            return Err(format!(
                "{} is FROM `{}`, which is not a registry image",
                build.shown_dockerfile, base.from
            ))
        }
    };
    plan.comments.push(format!(
        "{} is only FROM with WORKDIR/ENV, so nothing is built: the task runs {}",
        build.shown_dockerfile, base.from
    ));
    plan.image = image;
    if plan.workdir.is_none() {
        plan.workdir = base.workdir;
    }
    for (k, v) in base.env {
        plan.env.entry(k).or_insert(v);
    }
    stats.base_only += 1;
    Ok(())
}

/// Builds task `id`'s image in the cache `options` names (or finds it built) within `timeout`
/// seconds (Harbor's `build_timeout_sec`), saying each step on the progress; `Err` is a skip
/// reason when the cache cannot be opened.
fn build_image(
    id: &str,
    build: &DockerBuild,
    timeout: Option<u64>,
    options: &BuildImages,
) -> Result<proctor_image::Result<Built>, String> {
    let cache = ImageCache::open(&options.cache_dir).map_err(|e| {
        format!(
            "its image is built from {}, and the image cache cannot be opened: {e}",
            build.shown_dockerfile
        )
    })?;
    let spec = BuildSpec {
        context: build.context.clone(),
        dockerfile: Some(build.dockerfile.clone()),
        timeout: timeout.map(std::time::Duration::from_secs),
    };
    let say = |line: String| {
        if let Some(p) = &options.progress {
            p.say(&line);
        }
    };
    let built = cache.build(&spec, &options.registries, &mut |builder, log| {
        say(format!(
            "{id}: building {} with {} (log: {})",
            build.shown_dockerfile,
            builder.kind.name(),
            log.display()
        ))
    });
    match &built {
        Ok(Built::Image {
            record,
            cache_hit: false,
            ..
        }) => say(format!("{id}: built in {:.1} s", record.seconds)),
        Ok(Built::Image { record, .. }) => say(format!(
            "{id}: built before (cache hit, key {})",
            record.key
        )),
        Err(e) => say(format!(
            "{id}: the build failed: {}",
            e.to_string().lines().next().unwrap_or_default()
        )),
        Ok(Built::Base { .. }) => {}
    }
    Ok(built)
}

/// Makes the built image the plan's and counts it; a failed build is the skip reason.
fn record_build(
    plan: &mut TaskPlan,
    build: &DockerBuild,
    built: proctor_image::Result<Built>,
    stats: &mut BuildStats,
) -> Result<(), String> {
    match built {
        Ok(Built::Image {
            record, cache_hit, ..
        }) => {
            if cache_hit {
                stats.cache_hits += 1;
            } else {
                stats.built += 1;
                stats.build_millis += (record.seconds * 1000.0).round() as u64;
            }
            plan.comments.push(format!(
                "image built from {} by {} (build key {}{})",
                build.shown_dockerfile,
                record.builder,
                record.key,
                match &record.base {
                    Some(b) => format!("; FROM {}@{}", b.name, b.digest),
                    None => String::new(),
                }
            ));
            plan.image = ImageSource::Archive(record.archive);
            Ok(())
        }
        Ok(Built::Base { .. }) => {
            // base_only said otherwise a moment ago: the Dockerfile changed under the import.
            Err(format!(
                "{} changed while it was imported; import the task again",
                build.shown_dockerfile
            ))
        }
        Err(e) => {
            stats.failed += 1;
            Err(failure(build, &e))
        }
    }
}

/// The skip reason of a build that failed: a first line that tasks failing alike share (the
/// builder's last error line), then the log and its last lines.
fn failure(build: &DockerBuild, error: &ImageError) -> String {
    match error {
        ImageError::BuildFailed { builder, log, tail } => {
            let last = tail
                .lines()
                .rev()
                .find(|l| !l.starts_with('(') && !l.trim().is_empty())
                .unwrap_or("no output");
            let mut out = format!(
                "its image could not be built from {} by {builder}: {last}\nlog: {}",
                build.shown_dockerfile,
                log.display()
            );
            for line in tail.lines() {
                out.push_str("\n  ");
                out.push_str(line);
            }
            out
        }
        other => format!(
            "its image could not be built from {}: {other}",
            build.shown_dockerfile
        ),
    }
}
