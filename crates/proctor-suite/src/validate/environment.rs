//! `[environment]` and `[tasks.environment]`: the image, its working directory and the resource
//! hints.

use toml::Spanned;

use super::Validator;
use crate::model::Environment;
use crate::problem::ProblemKind;

/// Whether `r` reads as a registry image reference: `[HOST[:PORT]/]NAME[:TAG][@sha256:HEX]` with
/// a lower-case name and no white space (the runner parses it fully).
fn valid_image_reference(r: &str) -> bool {
    let (name, digest) = match r.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (r, None),
    };
    if let Some(d) = digest {
        let hex = d.strip_prefix("sha256:").unwrap_or("");
        if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return false;
        }
    }
    !name.is_empty()
        && !name.starts_with('/')
        && !name.ends_with([':', '/'])
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-/:".contains(c))
        && name
            .split('/')
            .skip(1)
            .all(|part| part.chars().all(|c| !c.is_ascii_uppercase()))
}

impl Validator<'_> {
    /// An `[environment]` table: an archive or layout image inside the suite that exists, a
    /// registry reference of valid characters, an absolute `workdir`, positive resource hints.
    pub(super) fn environment(&mut self, env: &Environment) {
        if let Some(image) = &env.image {
            let v = image.get_ref();
            let local = v
                .strip_prefix("oci-archive:")
                .or_else(|| v.strip_prefix("oci:"));
            match local {
                Some(path) => {
                    let path = Spanned::new(image.span(), path.to_string());
                    self.suite_path("image", &path, true);
                }
                None if !valid_image_reference(v) => {
                    let p = self
                        .at(
                            ProblemKind::InvalidValue,
                            image.span(),
                            format!("`{v}` is not an image reference"),
                        )
                        .with_label("not an image")
                        .with_help("write \"oci-archive:PATH\" or \"oci:PATH\" (in the suite), or a registry reference such as \"python:3.12-slim\", \"ghcr.io/org/img:tag\" or \"REPO@sha256:<64 hex>\"");
                    self.out.push(p);
                }
                None => {}
            }
        }
        self.build_folder(env);
        if let Some(cpus) = env
            .cpus
            .as_ref()
            .filter(|c| !(c.get_ref().is_finite() && *c.get_ref() > 0.0))
        {
            let p = self
                .at(
                    ProblemKind::InvalidValue,
                    cpus.span(),
                    format!("`cpus` must be a positive number, not {}", cpus.get_ref()),
                )
                .with_label("not a positive number")
                .with_help("write a number of CPUs such as 2 or 0.5");
            self.out.push(p);
        }
        for (key, value) in [
            ("memory_mb", &env.memory_mb),
            ("storage_mb", &env.storage_mb),
        ] {
            if let Some(v) = value.as_ref().filter(|v| *v.get_ref() == 0) {
                let p = self
                    .at(
                        ProblemKind::InvalidValue,
                        v.span(),
                        format!("`{key}` must be at least 1 (MiB), not 0"),
                    )
                    .with_label("zero")
                    .with_help("write a size in MiB such as 4096, or leave the key out");
                self.out.push(p);
            }
        }
        if let Some(w) = &env.workdir {
            if !w.get_ref().starts_with('/') || w.get_ref().split('/').any(|c| c == "..") {
                let p = self
                    .at(
                        ProblemKind::InvalidValue,
                        w.span(),
                        format!(
                            "`workdir` must be an absolute folder inside the image, not `{}`",
                            w.get_ref()
                        ),
                    )
                    .with_label("not absolute")
                    .with_help("write a path such as \"/app\"");
                self.out.push(p);
            } else if w.get_ref().split('/').all(|c| c.is_empty() || c == ".") {
                let p = self
                    .at(
                        ProblemKind::InvalidValue,
                        w.span(),
                        format!(
                            "`workdir` is `{}`, the root of the file system: the workspace is laid at the working directory, which cannot be the root",
                            w.get_ref()
                        ),
                    )
                    .with_label("the root")
                    .with_help("write a folder such as \"/app\"");
                self.out.push(p);
            }
        }
    }

    /// `build`: a folder inside the suite holding a `Dockerfile`; `build_timeout_sec` at least 1.
    fn build_folder(&mut self, env: &Environment) {
        if let Some(build) = &env.build {
            let dockerfile = Spanned::new(build.span(), format!("{}/Dockerfile", build.get_ref()));
            if self.suite_path("build", build, true) {
                self.suite_path("build", &dockerfile, true);
            }
        }
        if let Some(t) = env.build_timeout_sec.as_ref().filter(|t| *t.get_ref() == 0) {
            let p = self
                .at(
                    ProblemKind::InvalidValue,
                    t.span(),
                    "`build_timeout_sec` must be at least 1, not 0",
                )
                .with_label("zero")
                .with_help("write a number of seconds such as 600, or leave the key out");
            self.out.push(p);
        }
    }
}
