//! The one error type of this crate: every way a pull, a look-up or a prune can fail.

use std::io;
use std::path::PathBuf;

/// A `Result` whose error is [`ImageError`].
pub type Result<T, E = ImageError> = std::result::Result<T, E>;

/// Why an image could not be resolved, fetched, unpacked, listed or pruned.
///
/// Each variant's message says what went wrong and, where there is one, what to do about it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    /// The image reference string is not valid.
    #[error("invalid image reference `{input}`: {problem}; write {hint}")]
    BadReference {
        /// The string as given.
        input: String,
        /// What is wrong with it.
        problem: String,
        /// What to write instead.
        hint: String,
    },

    /// The registry, layout or archive has no such manifest, tag or blob.
    #[error("{what} not found in {location}")]
    NotFound {
        /// What was looked for, e.g. "manifest `3.99`" or "blob sha256:...".
        what: String,
        /// Where it was looked for: a registry and repository, a layout folder, an archive.
        location: String,
    },

    /// The registry refused access (401 or 403), even after authenticating where it asked to.
    #[error(
        "registry {registry} refused access to {repository}: {detail} (the repository may not \
         exist, or needs credentials: `docker login {registry}` writes them to the docker config)"
    )]
    Unauthorized {
        /// The registry host.
        registry: String,
        /// The repository.
        repository: String,
        /// What the registry said.
        detail: String,
    },

    /// No connection could be made, or it broke, or it timed out.
    #[error("registry {registry} is unreachable: {cause}")]
    Unreachable {
        /// The registry host (or mirror) that was tried.
        registry: String,
        /// The underlying failure.
        cause: String,
    },

    /// The registry answered with a status this client does not expect.
    #[error("registry {registry} answered {status} to {request}: {detail}")]
    Registry {
        /// The registry host.
        registry: String,
        /// The HTTP status code.
        status: u16,
        /// The request, e.g. "GET /v2/library/python/manifests/3.12".
        request: String,
        /// The registry's error message, if it gave one.
        detail: String,
    },

    /// A manifest or blob does not have the digest (or size) it was asked for by.
    #[error("{what}: expected digest {expected}, got {actual}")]
    DigestMismatch {
        /// What was checked.
        what: String,
        /// The digest it was referenced by.
        expected: String,
        /// The digest of what was received (or why none could be computed).
        actual: String,
    },

    /// The image (or every image of an index) is built for another OS or architecture.
    #[error(
        "{reference} has no image for this host's platform {os}/{arch}; it has: {}",
        if available.is_empty() { "no platform information".to_string() } else { available.join(", ") }
    )]
    WrongPlatform {
        /// The image reference.
        reference: String,
        /// The OS this host needs (`linux`).
        os: String,
        /// The architecture this host needs (`amd64`, `arm64`, ...).
        arch: String,
        /// The platforms the image offers, as `os/arch`.
        available: Vec<String>,
    },

    /// A layer has an entry that cannot be unpacked safely or is malformed.
    #[error("bad layer {layer}: entry `{entry}`: {problem}")]
    BadLayer {
        /// The layer's digest.
        layer: String,
        /// The tar entry's path as written in the layer.
        entry: String,
        /// What is wrong with it.
        problem: String,
    },

    /// A manifest, index or layer has a media type this crate does not read.
    #[error("unsupported media type `{media_type}` for {what}; proctor reads {supported}")]
    UnsupportedMediaType {
        /// The media type found.
        media_type: String,
        /// What had it (a manifest, a layer digest, ...).
        what: String,
        /// The media types that are read in its place.
        supported: String,
    },

    /// A manifest, index, image config or layout file is not what the OCI specs describe.
    #[error("malformed {what}: {problem}")]
    BadManifest {
        /// Which document.
        what: String,
        /// What is wrong with it.
        problem: String,
    },

    /// The docker config (credentials) could not be read.
    #[error("docker config {path}: {problem}")]
    BadCredentials {
        /// The docker config file.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },

    /// No image builder is installed.
    #[error(
        "no image builder found: proctor builds images with buildah, podman or docker, and none \
         of them is on PATH ({path}); install one (Debian: `apt-get install buildah`, which \
         needs no daemon)"
    )]
    NoBuilder {
        /// The `PATH` that was searched.
        path: String,
    },

    /// The builder failed; its log is kept.
    #[error("{builder} could not build the image (its log: {}):\n{tail}", log.display())]
    BuildFailed {
        /// The builder's name (`buildah`, `podman`, `docker`).
        builder: String,
        /// The build log.
        log: PathBuf,
        /// The last lines of the log.
        tail: String,
    },

    /// The builder was still running when the build's time limit (Harbor's
    /// `build_timeout_sec`) ran out; it was killed, and its log is kept.
    #[error("{builder} did not finish the build within its time limit of {seconds} s (build_timeout_sec), so it was stopped (its log: {})", log.display())]
    BuildTimedOut {
        /// The builder's name.
        builder: String,
        /// The limit, in seconds.
        seconds: u64,
        /// The build log.
        log: PathBuf,
    },

    /// What to build cannot be read: no Dockerfile, or a context that is not a folder.
    #[error("cannot build {path}: {problem}")]
    BadBuild {
        /// The context or Dockerfile.
        path: PathBuf,
        /// What is wrong, and what to pass instead.
        problem: String,
    },

    /// A file system operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done, e.g. "creating" or "reading".
        action: &'static str,
        /// On which path.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

impl From<proctor_fs::FsError> for ImageError {
    /// The shared helpers' error, worded as the cache words its own ("locking", "renaming
    /// into", ...).
    fn from(e: proctor_fs::FsError) -> ImageError {
        let action = match e.op {
            "open the lock file" => "opening the lock file",
            "lock" => "locking",
            "create" => "creating",
            "write" => "writing",
            "sync" | "sync directory" => "syncing",
            "rename into place" => "renaming into",
            other => other,
        };
        ImageError::io(action, e.path, e.source)
    }
}

impl ImageError {
    /// An [`ImageError::Io`] for `action` on `path`.
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        ImageError::Io {
            action,
            path: path.into(),
            source,
        }
    }

    /// A [`ImageError::BadManifest`].
    pub(crate) fn bad_manifest(what: impl Into<String>, problem: impl Into<String>) -> Self {
        ImageError::BadManifest {
            what: what.into(),
            problem: problem.into(),
        }
    }
}

/// Adds a path and an action to an `io::Result`.
pub(crate) trait IoContext<T> {
    /// Turns an `io::Error` into [`ImageError::Io`].
    fn ctx(self, action: &'static str, path: impl Into<PathBuf>) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn ctx(self, action: &'static str, path: impl Into<PathBuf>) -> Result<T> {
        self.map_err(|e| ImageError::io(action, path, e))
    }
}
