//! OCI images for proctor: turns an image reference into an unpacked, read-only root file system
//! in a local content-addressed cache, with no daemon and no root. The sandbox uses it as the
//! lowest read-only layer of a trial's overlay root.
//!
//! ```no_run
//! use proctor_image::{ImageCache, ImageRef, RegistryConfig};
//!
//! # fn main() -> Result<(), proctor_image::ImageError> {
//! let cache = ImageCache::open(ImageCache::default_dir().expect("a home folder"))?;
//! let reference: ImageRef = "python:3.12-slim".parse()?;
//! let image = cache.pull(&reference, &RegistryConfig::default())?;
//! println!("{} is {} at {}", image.reference, image.digest, image.rootfs.display());
//! # Ok(())
//! # }
//! ```
//!
//! - **Where images come from** ([`ImageRef`]): a registry over the OCI distribution API
//!   (Docker Hub, GHCR, a local `docker-registry`, ...; token and basic authentication with the
//!   docker config's credentials, mirrors, plain HTTP only for registries declared insecure in
//!   [`RegistryConfig`]); an OCI image layout folder (`oci:PATH`); or a tar of one
//!   (`oci-archive:PATH`).
//! - **What is read**: OCI and Docker v2 schema 2 manifests and indexes (this host's
//!   `linux/<arch>` is chosen, the variant ignored); layers as tar, tar+gzip or tar+zstd.
//!   Every blob is verified by its digest, and so is every manifest reached by a digest.
//! - **How it is unpacked**: see [`UnpackStats`] and the unpack rules in the crate's `unpack`
//!   module: whiteouts and opaque folders are honoured; devices and FIFOs are skipped and
//!   counted; **ownership is not applied** (the unpacking user owns every file) but permission
//!   bits are kept, without setuid and setgid; no entry can be written outside the root.
//! - **Builds** ([`ImageCache::build`]): a Dockerfile and its context, built by the first of
//!   buildah, podman and docker on `PATH` with the same registry settings (mirrors included) as
//!   a pull, kept as an OCI archive under `builds/<key>/` (key: the Dockerfile, the context's
//!   files and the digest each `FROM` image resolves to) with its log, and unpacked like a
//!   pulled image; a second build of the same inputs runs no builder, a moved base tag builds
//!   again, and a build past its time limit ([`BuildSpec::timeout`]) is stopped. A Dockerfile that is only `FROM` + `WORKDIR`/`ENV` is its
//!   base image ([`base_only`]).
//! - **The cache** ([`ImageCache`]): `blobs/`, `images/<manifest hex>/rootfs`, `refs/`; safe for
//!   concurrent pulls from several processes (flock + atomic rename).
//!
//! Everything is blocking; the registry client runs its own current-thread tokio runtime, so
//! call it from a plain thread, not from inside an async task.

mod auth;
mod build;
mod builder;
mod cache;
mod config;
mod digest;
mod dockerfile;
mod error;
mod fsutil;
mod image_config;
mod layout;
mod manifest;
mod prune;
mod reference;
mod registry;
mod source;
mod unpack;
mod zstd;

pub use build::{build_key, BaseRef, BuildRecord, BuildSpec, Built};
pub use builder::{Builder, BuilderKind};
pub use cache::{CachedImage, Image, ImageCache};
pub use config::RegistryConfig;
pub use dockerfile::{base_only, from_images, BaseImage};
pub use error::{ImageError, Result};
pub use image_config::ImageConfig;
pub use prune::PruneReport;
pub use reference::{ImageRef, RegistryRef, DOCKER_HUB};
pub use unpack::UnpackStats;
