//! Images built from a Dockerfile into the cache, keyed by what they are built from: the
//! Dockerfile, every file of the build context, and the manifest digest each `FROM` image
//! resolves to now (so a base tag moved to another image builds again). A second build of the
//! same inputs is a cache hit and runs no builder. A build may be given a time limit (Harbor's
//! `build_timeout_sec`): a builder still running then is killed and the build fails saying so.
//!
//! ```text
//! DIR/builds/<key hex>/image.tar    the built image, as an OCI archive (unpacked into images/)
//! DIR/builds/<key hex>/build.log    every builder command and its output
//! DIR/builds/<key hex>/registries.conf  the registries.conf the builder read
//! DIR/builds/<key hex>/build.json   key, digest, builder, Dockerfile, context, FROM images, time
//! DIR/build/                        the builder's own store (base images kept between builds)
//! ```

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::builder::{Builder, Job, Workspace};
use crate::cache::{Image, ImageCache, CACHE_LOCK};
use crate::config::RegistryConfig;
use crate::digest::Hasher;
use crate::dockerfile::{base_only, from_images, BaseImage};
use crate::error::{ImageError, IoContext, Result};
use crate::fsutil::{atomic_write, unique_name, TempPath};
use crate::reference::ImageRef;

/// Folder of build results, by key.
pub(crate) const BUILDS: &str = "builds";
/// Folder of the builder's store and run root.
const BUILD_STORE: &str = "build";

/// What to build: a context folder and its Dockerfile, as `docker build -f DOCKERFILE CONTEXT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildSpec {
    /// The build context (the files `COPY` and `ADD` read).
    pub context: PathBuf,
    /// The Dockerfile; `None` is `CONTEXT/Dockerfile`.
    pub dockerfile: Option<PathBuf>,
    /// The longest the builder may take (Harbor's `build_timeout_sec`); `None`: no limit.
    pub timeout: Option<Duration>,
}

impl BuildSpec {
    /// The Dockerfile this spec builds.
    pub fn dockerfile_path(&self) -> PathBuf {
        self.dockerfile
            .clone()
            .unwrap_or_else(|| self.context.join("Dockerfile"))
    }
}

/// A built image in the cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuildRecord {
    /// The build's key: `sha256:` of the Dockerfile and the build context.
    pub key: String,
    /// The built image's manifest digest.
    pub digest: String,
    /// The builder that built it (`buildah`, `podman`, `docker`).
    pub builder: String,
    /// The Dockerfile, as given.
    pub dockerfile: PathBuf,
    /// The build context, as given.
    pub context: PathBuf,
    /// The images its `FROM` lines name, as written.
    pub from: Vec<String>,
    /// Each `FROM` image as it resolved when the build was keyed (name as written, manifest
    /// digest): part of the key, so a moved tag builds again. Empty in records written before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from_digests: Vec<BaseRef>,
    /// The base image as the builder resolved it, under its own name and digest (from the
    /// built manifest's `org.opencontainers.image.base.*` annotations, when the builder writes
    /// them; buildah does), also when it was fetched through a mirror.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<BaseRef>,
    /// When it was built, RFC 3339 UTC.
    pub built_at: String,
    /// How long the builder took, in seconds.
    pub seconds: f64,
    /// The OCI archive of the image.
    pub archive: PathBuf,
    /// The build log.
    pub log: PathBuf,
}

/// A base image: its name and manifest digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaseRef {
    /// Its name, in full (`docker.io/library/busybox:latest`).
    pub name: String,
    /// Its manifest digest.
    pub digest: String,
}

/// What [`ImageCache::build`] gave.
#[derive(Debug, Clone)]
pub enum Built {
    /// The Dockerfile is only `FROM` with `WORKDIR`/`ENV`: nothing was built, the base image
    /// was pulled; run it in `base.workdir` with `base.env`.
    Base {
        /// What the Dockerfile says.
        base: BaseImage,
        /// The base image, pulled.
        image: Image,
    },
    /// The image was built now, or found built with the same key (`cache_hit`: no builder ran).
    Image {
        /// The build, as recorded in the cache.
        record: Box<BuildRecord>,
        /// The image, unpacked.
        image: Image,
        /// Whether the cache already had it.
        cache_hit: bool,
    },
}

/// The key of a build: `sha256:` of the Dockerfile's path (relative to the context when inside
/// it) and bytes, of every entry of the context in path order (its path, kind, permission
/// bits, and a file's bytes or a link's target), and of `bases`: each `FROM` image with the
/// manifest digest it resolves to. Owners and times are left out, so a copy of the same files
/// has the same key.
pub fn build_key(spec: &BuildSpec, bases: &[BaseRef]) -> Result<String> {
    let dockerfile = spec.dockerfile_path();
    let mut hasher = Hasher::new();
    hasher.update(b"proctor-build-2\0");
    for base in bases {
        field(&mut hasher, base.name.as_bytes());
        field(&mut hasher, base.digest.as_bytes());
    }
    let shown = dockerfile
        .strip_prefix(&spec.context)
        .unwrap_or(&dockerfile)
        .to_string_lossy()
        .into_owned();
    let bytes = fs::read(&dockerfile).ctx("reading the Dockerfile", &dockerfile)?;
    field(&mut hasher, shown.as_bytes());
    field(&mut hasher, &bytes);
    hash_tree(&mut hasher, &spec.context, Path::new(""))?;
    Ok(hasher.finish().to_string())
}

/// Adds `bytes` to `hasher`, length first (so no two sequences of fields hash alike).
fn field(hasher: &mut Hasher, bytes: &[u8]) {
    hasher.update(&(bytes.len() as u64).to_le_bytes());
    hasher.update(bytes);
}

/// Adds the entries under `root/rel` to `hasher`, sorted by name.
fn hash_tree(hasher: &mut Hasher, root: &Path, rel: &Path) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    let dir = root.join(rel);
    let mut names: Vec<_> = fs::read_dir(&dir)
        .ctx("reading the build context", &dir)?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<std::io::Result<_>>()
        .ctx("reading the build context", &dir)?;
    names.sort();
    for name in names {
        let path = dir.join(&name);
        let child = rel.join(&name);
        let meta = fs::symlink_metadata(&path).ctx("reading", &path)?;
        field(hasher, child.as_os_str().as_bytes());
        field(hasher, &meta.permissions().mode().to_le_bytes());
        if meta.file_type().is_symlink() {
            let target = fs::read_link(&path).ctx("reading", &path)?;
            field(hasher, b"link");
            field(hasher, target.as_os_str().as_bytes());
        } else if meta.is_dir() {
            field(hasher, b"dir");
            hash_tree(hasher, root, &child)?;
        } else if meta.is_file() {
            field(hasher, b"file");
            let mut file = fs::File::open(&path).ctx("reading", &path)?;
            let mut content = Hasher::new();
            std::io::copy(&mut file, &mut HashWriter(&mut content)).ctx("reading", &path)?;
            field(hasher, content.finish().to_string().as_bytes());
        } else {
            field(hasher, b"other");
        }
    }
    Ok(())
}

/// An `io::Write` into a [`Hasher`].
struct HashWriter<'a>(&'a mut Hasher);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl ImageCache {
    /// Builds `spec` into the cache, or finds it built, and gives the image.
    ///
    /// A Dockerfile that is only `FROM` with `WORKDIR`/`ENV` is not built: its base image is
    /// pulled ([`Built::Base`]). Otherwise, when a build with the same [`build_key`] is in the
    /// cache, that is the image and no builder runs; else the first builder on `PATH`
    /// ([`Builder::find`]) builds it with `registries` (insecure registries and mirrors apply
    /// to its `FROM` images), its OCI archive is kept in `builds/<key>/` with the log, and it
    /// is unpacked like a pulled image. `building` is called just before a builder runs.
    pub fn build(
        &self,
        spec: &BuildSpec,
        registries: &RegistryConfig,
        building: &mut dyn FnMut(&Builder, &Path),
    ) -> Result<Built> {
        let (dockerfile, text) = read_dockerfile(spec)?;
        if let Some(base) = base_only(&text) {
            let reference: ImageRef = base.from.parse()?;
            let image = self.pull(&reference, registries)?;
            return Ok(Built::Base { base, image });
        }
        let bases = match self.base_digests(&text, registries) {
            Ok(bases) => bases,
            // Without the bases no build can be found or made: with no builder either, that is
            // the error to fix first.
            Err(e) => {
                Builder::find()?;
                return Err(e);
            }
        };
        let key = build_key(spec, &bases)?;
        let hex = key.trim_start_matches("sha256:").to_string();
        let dir = fs::canonicalize(self.dir())
            .ctx("finding", self.dir())?
            .join(BUILDS)
            .join(&hex);
        let _lock = self.lock(&format!("build-{hex}.lock"), true)?;
        if let Some(built) = self.cached_build(&dir, registries)? {
            return Ok(built);
        }
        let builder = Builder::find()?;
        let at = BuildAt {
            dockerfile: &dockerfile,
            hex: &hex,
            dir: &dir,
        };
        let ran = self.run_builder(&builder, spec, at, registries, building)?;
        let final_archive = ran.archive;
        let image = self.pull(&ImageRef::OciArchive(final_archive.clone()), registries)?;
        let record = BuildRecord {
            key,
            digest: image.digest.clone(),
            builder: builder.kind.name().to_string(),
            dockerfile: ran.dockerfile,
            context: ran.context,
            from: from_images(&text),
            from_digests: bases,
            base: self.base_of(&image.digest),
            built_at: jiff::Timestamp::now()
                .strftime("%Y-%m-%dT%H:%M:%SZ")
                .to_string(),
            seconds: ran.seconds,
            archive: final_archive,
            log: ran.log,
        };
        let mut json = serde_json::to_vec_pretty(&record).unwrap_or_default();
        json.push(b'\n');
        atomic_write(&ran.work, &dir.join("build.json"), &json)?;
        Ok(Built::Image {
            record: Box::new(record),
            image,
            cache_hit: false,
        })
    }

    /// Each image the `FROM` lines of `text` name, with the manifest digest it resolves to now
    /// (through `registries`' mirrors); a name with a variable (`$BASE`) cannot be resolved
    /// before the build and is left out. A base that cannot be resolved is the build's error.
    fn base_digests(&self, text: &str, registries: &RegistryConfig) -> Result<Vec<BaseRef>> {
        let mut out = Vec::new();
        for name in from_images(text) {
            if name.contains('$') {
                continue;
            }
            let full = crate::dockerfile::docker_hub_name(&name);
            let reference: ImageRef = full.parse()?;
            let digest = self.resolve_digest(&reference, registries)?;
            out.push(BaseRef { name, digest });
        }
        Ok(out)
    }

    /// The image built before into `dir`, when its record is there and its archive still
    /// unpacks to the recorded digest.
    fn cached_build(&self, dir: &Path, registries: &RegistryConfig) -> Result<Option<Built>> {
        let Some(record) = self.build_record(dir) else {
            return Ok(None);
        };
        let reference = ImageRef::OciArchive(record.archive.clone());
        let image = self.pull(&reference, registries)?;
        Ok((image.digest == record.digest).then(|| Built::Image {
            record: Box::new(record),
            image,
            cache_hit: true,
        }))
    }

    /// Runs `builder` on `spec` (as `at` says) in a staging folder of the cache's `tmp/`; the
    /// log is kept in `at.dir` whether it built or not, the archive moved there when it built.
    /// Gives what the record needs.
    fn run_builder(
        &self,
        builder: &Builder,
        spec: &BuildSpec,
        at: BuildAt,
        registries: &RegistryConfig,
        building: &mut dyn FnMut(&Builder, &Path),
    ) -> Result<BuilderRun> {
        let BuildAt {
            dockerfile,
            hex,
            dir,
        } = at;
        // The builder is given absolute paths only (a relative TMPDIR breaks buildah's RUN).
        let absolute = |p: &Path| fs::canonicalize(p).ctx("finding", p);
        let root = absolute(self.dir())?;
        let context = absolute(&spec.context)?;
        let dockerfile_abs = absolute(dockerfile)?;
        // Held while the build works in tmp/, so that no pull empties tmp/ under it.
        let _shared = self.lock(CACHE_LOCK, false)?;
        let work = root.join("tmp");
        let staging = TempPath::new(work.join(unique_name(&format!("build-{hex}"))));
        fs::create_dir_all(staging.path()).ctx("making", staging.path())?;
        let store = root.join(BUILD_STORE);
        let ws = Workspace {
            storage: store.join("storage"),
            run: store.join("run"),
            var_lib: store.join("var-lib"),
            tmp: staging.path().join("tmp"),
        };
        let log = staging.path().join("build.log");
        let archive = staging.path().join("image.tar");
        let tag = format!("localhost/proctor-build-{}", &hex[..16]);
        let final_log = dir.join("build.log");
        building(builder, &final_log);
        let started = Instant::now();
        let built = builder.build(
            &Job {
                context: &context,
                dockerfile: &dockerfile_abs,
                tag: &tag,
                archive: &archive,
                log: &log,
                deadline: spec.timeout.map(|t| (started + t, t)),
            },
            &ws,
            registries,
        );
        let seconds = started.elapsed().as_secs_f64();
        // The log is kept, built or not.
        fs::create_dir_all(dir).ctx("making", dir)?;
        let _ = fs::remove_file(dir.join("build.json"));
        fs::rename(&log, &final_log).ctx("keeping the build log at", &final_log)?;
        // The registries.conf the builder read, kept with the log (it names the mirrors tried).
        let _ = fs::copy(ws.tmp.join("registries.conf"), dir.join("registries.conf"));
        match built {
            Err(ImageError::BuildFailed { builder, tail, .. }) => {
                return Err(ImageError::BuildFailed {
                    builder,
                    log: final_log,
                    tail,
                })
            }
            Err(ImageError::BuildTimedOut {
                builder, seconds, ..
            }) => {
                return Err(ImageError::BuildTimedOut {
                    builder,
                    seconds,
                    log: final_log,
                })
            }
            _ => {}
        }
        built?;
        // Moved out of the staging folder before that goes.
        let final_archive = dir.join("image.tar");
        fs::rename(&archive, &final_archive).ctx("moving the image into", &final_archive)?;
        Ok(BuilderRun {
            archive: final_archive,
            log: final_log,
            context,
            dockerfile: dockerfile_abs,
            seconds,
            work,
        })
    }

    /// The base image the manifest `digest` (a blob of the cache) names in its annotations.
    fn base_of(&self, digest: &str) -> Option<BaseRef> {
        let hex = digest.strip_prefix("sha256:")?;
        let bytes = fs::read(self.dir().join("blobs/sha256").join(hex)).ok()?;
        let manifest: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
        let annotations = manifest.get("annotations")?;
        let text = |key: &str| annotations.get(key)?.as_str().map(str::to_string);
        Some(BaseRef {
            name: text("org.opencontainers.image.base.name")?,
            digest: text("org.opencontainers.image.base.digest")?,
        })
    }

    /// The record of the build in `dir`, if it finished and its archive is still there.
    fn build_record(&self, dir: &Path) -> Option<BuildRecord> {
        let bytes = fs::read(dir.join("build.json")).ok()?;
        let record: BuildRecord = serde_json::from_slice(&bytes).ok()?;
        record.archive.is_file().then_some(record)
    }
}

/// Removes (the caller holds the cache lock exclusively) every build whose image is not in
/// `remaining` (manifest digests) or that never finished, and the builder's store; gives how
/// many builds were removed.
pub(crate) fn prune_builds(
    cache: &ImageCache,
    remaining: &std::collections::BTreeSet<String>,
) -> Result<u64> {
    let builds = cache.dir().join(BUILDS);
    let mut removed = 0;
    if let Ok(entries) = fs::read_dir(&builds) {
        for entry in entries {
            let dir = entry.ctx("reading", &builds)?.path();
            let keep = cache
                .build_record(&dir)
                .is_some_and(|r| remaining.contains(&r.digest));
            if !keep {
                crate::unpack::remove_tree(&dir)?;
                removed += 1;
            }
        }
    }
    let store = cache.dir().join(BUILD_STORE);
    if store.exists() {
        crate::unpack::remove_tree(&store)?;
    }
    Ok(removed)
}

/// Where one build is made: its Dockerfile, its key in hex, and its folder in the cache.
#[derive(Clone, Copy)]
struct BuildAt<'a> {
    dockerfile: &'a Path,
    hex: &'a str,
    dir: &'a Path,
}

/// What a builder's run left: the archive (`image.tar` in the build's folder), the log, and the absolute
/// paths it was given.
struct BuilderRun {
    archive: PathBuf,
    log: PathBuf,
    context: PathBuf,
    dockerfile: PathBuf,
    seconds: f64,
    /// The cache's `tmp/`, where the record is written from.
    work: PathBuf,
}

/// The Dockerfile of `spec` and its text; a context that is no folder or a Dockerfile that
/// cannot be read is a [`ImageError::BadBuild`] that says what to pass.
fn read_dockerfile(spec: &BuildSpec) -> Result<(PathBuf, String)> {
    let dockerfile = spec.dockerfile_path();
    if !spec.context.is_dir() {
        return Err(ImageError::BadBuild {
            path: spec.context.clone(),
            problem: "the build context is not a folder; pass the folder that holds the Dockerfile and the files it copies".into(),
        });
    }
    let text = fs::read_to_string(&dockerfile).map_err(|e| ImageError::BadBuild {
        path: dockerfile.clone(),
        problem: format!("cannot read the Dockerfile ({e}); put one there or pass -f FILE"),
    })?;
    Ok((dockerfile, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_follows_the_dockerfile_and_every_context_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ctx = dir.path();
        fs::write(ctx.join("Dockerfile"), "FROM busybox\nCOPY . /app\n").expect("write");
        fs::create_dir(ctx.join("sub")).expect("mkdir");
        fs::write(ctx.join("sub/a.txt"), "a").expect("write");
        let spec = BuildSpec {
            context: ctx.to_path_buf(),
            dockerfile: None,
            timeout: None,
        };
        let key = |bases: &[BaseRef]| build_key(&spec, bases).expect("key");
        let first = key(&[]);
        assert!(first.starts_with("sha256:"), "{first}");
        assert_eq!(key(&[]), first);
        // The same files on a base whose tag moved to another image: another key.
        let base = |digest: &str| BaseRef {
            name: "busybox".into(),
            digest: digest.into(),
        };
        let on_one = key(&[base("sha256:01")]);
        assert_ne!(on_one, first);
        assert_eq!(key(&[base("sha256:01")]), on_one);
        assert_ne!(key(&[base("sha256:02")]), on_one);
        fs::write(ctx.join("sub/a.txt"), "b").expect("write");
        let changed = key(&[]);
        assert_ne!(changed, first);
        fs::rename(ctx.join("sub/a.txt"), ctx.join("sub/c.txt")).expect("rename");
        assert_ne!(key(&[]), changed);
        std::os::unix::fs::symlink("c.txt", ctx.join("sub/l")).expect("symlink");
        let linked = key(&[]);
        fs::write(ctx.join("Dockerfile"), "FROM busybox\nCOPY . /srv\n").expect("write");
        assert_ne!(key(&[]), linked);
    }
}
