//! A task's image: a registry reference, an OCI archive or layout that is copied into the
//! suite (proctor reads local images only from inside the suite), or a Dockerfile, which the
//! import builds ([`crate::build`]) or, when told not to build, skips with the commands that
//! build it.

use std::path::{Path, PathBuf};

/// The name of an OCI archive, saved in a task folder, that the import uses as the task's
/// image when the task names none.
pub(crate) const SIDECAR_ARCHIVE: &str = "proctor-image.tar";

/// Where a task's image comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ImageSource {
    /// A registry reference, written as it is (`alexgshaw/hello-world:20251031`).
    Reference(String),
    /// An OCI archive file, copied to `images/TASK_ID.tar` in the suite.
    Archive(PathBuf),
    /// An OCI image layout folder, copied to `images/TASK_ID/` in the suite.
    Layout(PathBuf),
    /// A Dockerfile to build: the import turns it into one of the others before anything is
    /// written ([`crate::build::resolve`]).
    Dockerfile(DockerBuild),
}

/// A task's image that is built from a Dockerfile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DockerBuild {
    /// The build context.
    pub context: PathBuf,
    /// The Dockerfile.
    pub dockerfile: PathBuf,
    /// What the task has, for messages (`environment/Dockerfile, and task.toml names no
    /// [environment] docker_image`).
    pub what: String,
    /// The build context relative to the task folder, for messages.
    pub shown_context: String,
    /// The Dockerfile relative to the task folder, for messages.
    pub shown_dockerfile: String,
}

impl ImageSource {
    /// The `image` value in the suite for task `id`.
    pub(crate) fn reference(&self, id: &str) -> String {
        match self {
            ImageSource::Reference(r) => r.clone(),
            ImageSource::Archive(_) => format!("oci-archive:{}", Self::suite_path(self, id)),
            ImageSource::Layout(_) => format!("oci:{}", Self::suite_path(self, id)),
            ImageSource::Dockerfile(_) => image_name(id),
        }
    }

    /// Where a local image is copied in the suite.
    pub(crate) fn suite_path(&self, id: &str) -> String {
        match self {
            ImageSource::Archive(_) => format!("images/{id}.tar"),
            _ => format!("images/{id}"),
        }
    }
}

/// The image a task names (`declared`: `docker_image`, a compose service's `image`), resolved
/// against the task folder `dir`; `oci-archive:PATH` and `oci:PATH` name files relative to the
/// task folder. Without a declared image, an archive saved as [`SIDECAR_ARCHIVE`] in the task
/// folder. `None` when there is neither; an error when a named local image does not exist.
pub(crate) fn resolve(dir: &Path, declared: Option<&str>) -> Option<Result<ImageSource, String>> {
    let local = |prefix: &str, path: &str, want_dir: bool| {
        let p = dir.join(path);
        let ok = if want_dir { p.is_dir() } else { p.is_file() };
        if ok {
            Ok(if want_dir {
                ImageSource::Layout(p)
            } else {
                ImageSource::Archive(p)
            })
        } else {
            Err(format!(
                "its image `{prefix}{path}` names {}, which does not exist",
                p.display()
            ))
        }
    };
    match declared.map(str::trim).filter(|d| !d.is_empty()) {
        Some(d) => Some(if let Some(path) = d.strip_prefix("oci-archive:") {
            local("oci-archive:", path, false)
        } else if let Some(path) = d.strip_prefix("oci:") {
            local("oci:", path, true)
        } else {
            check_reference(d).map(|()| ImageSource::Reference(d.to_string()))
        }),
        None => {
            let sidecar = dir.join(SIDECAR_ARCHIVE);
            sidecar
                .is_file()
                .then_some(Ok(ImageSource::Archive(sidecar)))
        }
    }
}

/// A registry reference, `[REGISTRY[:PORT]/]NAME[:TAG][@DIGEST]` (optionally after
/// `docker://`), as Docker's reference grammar defines it: path components in lowercase, a tag
/// of at most 128 characters, a digest `ALGORITHM:HEX`.
const REFERENCE: &str = r"^(?:docker://)?(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::[0-9]+)?/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[A-Fa-f0-9]{32,})?$";

/// Checks that `reference` is a registry reference proctor can pull; the error is the skip
/// reason.
fn check_reference(reference: &str) -> Result<(), String> {
    let valid = regex::Regex::new(REFERENCE).is_ok_and(|re| re.is_match(reference));
    if valid {
        Ok(())
    } else {
        Err(format!(
            "its image `{reference}` is not a valid image reference ([REGISTRY/]NAME[:TAG][@DIGEST] in lowercase, e.g. ubuntu:24.04 or ghcr.io/org/name:tag, or oci-archive:PATH); fix the task's image and import it again"
        ))
    }
}

/// How a task whose image is not ready builds it.
pub(crate) struct Build<'a> {
    /// What the image is built from.
    pub what: &'a str,
    /// The build context, relative to the task folder.
    pub context: &'a str,
    /// The Dockerfile, relative to the task folder.
    pub dockerfile: &'a str,
}

/// Task `id`'s image, as [`resolve`] finds it; else the Dockerfile it is built from (`build`);
/// else why the task is skipped (`missing`).
pub(crate) fn for_task(
    dir: &Path,
    declared: Option<&str>,
    build: Option<Build<'_>>,
    missing: &str,
) -> Result<ImageSource, String> {
    match (resolve(dir, declared), build) {
        (Some(resolved), _) => resolved,
        (None, Some(build)) => Ok(ImageSource::Dockerfile(DockerBuild {
            context: dir.join(build.context),
            dockerfile: dir.join(build.dockerfile),
            what: build.what.to_string(),
            shown_context: build.context.to_string(),
            shown_dockerfile: build.dockerfile.to_string(),
        })),
        (None, None) => Err(missing.to_string()),
    }
}

/// A name for the image built from task `id`'s Dockerfile (image names are lowercase).
pub(crate) fn image_name(id: &str) -> String {
    format!(
        "proctor-import-{}",
        id.to_ascii_lowercase().replace('_', "-")
    )
}

/// The skip reason for a task whose image exists only as a Dockerfile, when the import was told
/// not to build (`--no-build`): the commands that build it and save it as an OCI archive in the
/// task folder, where the next import finds it.
///
/// `what` says what the task has (`environment/Dockerfile, and task.toml names no
/// [environment] docker_image`); `context` is the build context relative to the task folder.
pub(crate) fn build_instructions(id: &str, what: &str, context: &str) -> String {
    let name = image_name(id);
    format!(
        "its image is built from {what}, and the import was told not to build images (--no-build); it never guesses one.\n\
         Build the image and save it as an OCI archive named {SIDECAR_ARCHIVE} in the task folder, with Docker:\n\
         \x20 docker build -t {name} {context} && skopeo copy docker-daemon:{name}:latest oci-archive:{SIDECAR_ARCHIVE}\n\
         \x20 (Docker 25 or newer writes an OCI archive itself: docker save {name} -o {SIDECAR_ARCHIVE})\n\
         or without a Docker daemon:\n\
         \x20 buildah bud -t {name} {context} && buildah push {name} oci-archive:{SIDECAR_ARCHIVE}\n\
         then import the task again: the archive is copied into the suite as images/{id}.tar and the task gets\n\
         \x20 [tasks.environment] image = \"oci-archive:images/{id}.tar\""
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_names_are_lowercase() {
        assert_eq!(image_name("Fix_It"), "proctor-import-fix-it");
    }

    #[test]
    fn resolve_reads_references_local_images_and_the_sidecar() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        assert_eq!(resolve(d, None), None);
        assert_eq!(
            resolve(d, Some("alexgshaw/x:1")),
            Some(Ok(ImageSource::Reference("alexgshaw/x:1".into())))
        );
        assert!(matches!(
            resolve(d, Some("oci-archive:img.tar")),
            Some(Err(_))
        ));
        std::fs::write(d.join("img.tar"), b"x").expect("write");
        assert_eq!(
            resolve(d, Some("oci-archive:img.tar")),
            Some(Ok(ImageSource::Archive(d.join("img.tar"))))
        );
        std::fs::write(d.join(SIDECAR_ARCHIVE), b"x").expect("write");
        assert_eq!(
            resolve(d, None),
            Some(Ok(ImageSource::Archive(d.join(SIDECAR_ARCHIVE))))
        );
        for bad in [
            "--platform=linux/amd64",
            "Ubuntu:24.04",
            "a b",
            "x:",
            "x@sha256:12",
        ] {
            let r = resolve(d, Some(bad));
            assert!(
                matches!(&r, Some(Err(e)) if e.contains("is not a valid image reference")),
                "{bad}: {r:?}"
            );
        }
        for good in [
            "ubuntu",
            "localhost:5000/team/app_x:v1.2-rc",
            "docker://ghcr.io/laude-institute/t-bench/python-3-13:20250620",
            "swebench/sweb.eval.x86_64.django_1776_django-16256:latest",
        ] {
            assert_eq!(
                resolve(d, Some(good)),
                Some(Ok(ImageSource::Reference(good.into()))),
                "{good}"
            );
        }
        let archive = ImageSource::Archive(d.join("img.tar"));
        assert_eq!(archive.reference("t"), "oci-archive:images/t.tar");
        assert_eq!(ImageSource::Layout(d.into()).reference("t"), "oci:images/t");
    }
}
