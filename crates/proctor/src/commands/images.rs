//! `proctor images pull | build | list | prune`: the image cache as the command line shows it.
//! Pulling a run's images is [`proctor_runner::provision`]'s.

use std::path::{Path, PathBuf};

use proctor_image::{BuildSpec, Built, ImageCache, ImageRef, RegistryConfig};
use proctor_runner::provision::{build_image, cache, registry_config, suite_images};
use proctor_suite::Suite;

use crate::cli::ImagesAction;
use crate::exit::{Error, Status};

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
        timeout: None,
    };
    let shown = spec.dockerfile_path();
    let built = build_image(cache, registries, &spec, &mut |builder, log| {
        eprintln!(
            "building {} with {} (log: {})",
            shown.display(),
            builder.program.display(),
            log.display()
        );
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
                    "cache hit: built before from the same Dockerfile, context and FROM images (key {}), no build; log: {}",
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
