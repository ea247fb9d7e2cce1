//! The local content-addressed image cache: verified blobs, unpacked images, and what each
//! reference resolved to.

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::RegistryConfig;
use crate::digest::Digest;
use crate::error::{ImageError, IoContext, Result};
use crate::fsutil::{atomic_write, sync_file_system, tree_size, unique_name, FileLock, TempPath};
use crate::image_config::ImageConfig;
use crate::layout::{ArchiveSource, LayoutSource};
use crate::manifest::Platform;
use crate::reference::ImageRef;
use crate::registry::RegistrySource;
use crate::source::{is_over_limit, resolve, too_long, BlobSink, Resolved, Source};
use crate::unpack::{check_layer_media_type, remove_tree, UnpackStats, Unpacker};

/// Folder of verified blobs, by digest.
pub(crate) const BLOBS: &str = "blobs/sha256";
/// Folder of unpacked images, by manifest digest.
pub(crate) const IMAGES: &str = "images";
/// Folder of reference records.
const REFS: &str = "refs";
/// Folder of lock files.
pub(crate) const LOCKS: &str = "locks";
/// Folder of work in progress (and of what a crash left behind).
pub(crate) const TMP: &str = "tmp";
/// The lock every pull holds shared and prune holds exclusive.
pub(crate) const CACHE_LOCK: &str = "cache.lock";

/// An image unpacked in the cache, ready to be used as a read-only root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Image {
    /// The reference it was pulled by, in canonical form.
    pub reference: String,
    /// The digest of its manifest (`sha256:…`): for a multi-platform image, that of this
    /// host's platform, not that of the index.
    pub digest: String,
    /// The unpacked root file system (`images/<hex>/rootfs`). Never modify it: it is shared.
    pub rootfs: PathBuf,
    /// What its config says about running it.
    pub config: ImageConfig,
    /// What unpacking made and skipped.
    pub unpack: UnpackStats,
}

/// An image in the cache, as [`ImageCache::list`] sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedImage {
    /// The digest of its manifest (`sha256:…`).
    pub digest: String,
    /// The references (canonical form) last seen resolving to it.
    pub references: Vec<String>,
    /// Bytes of regular file content in its root file system.
    pub size_bytes: u64,
    /// When it was unpacked, RFC 3339 UTC (`2026-11-30T14:02:31Z`); empty if unknown.
    pub unpacked_at: String,
}

/// `images/<hex>/image.json`: what the unpacked image is made of.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ImageRecord {
    pub(crate) digest: String,
    pub(crate) config_digest: String,
    pub(crate) layers: Vec<String>,
    unpacked_at: String,
    size_bytes: u64,
    #[serde(default)]
    unpack: UnpackStats,
}

/// `refs/<escaped reference>.json`: what a reference resolved to, and when.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RefRecord {
    pub(crate) reference: String,
    pub(crate) digest: String,
    resolved_at: String,
}

/// A local cache of images, safe to share between threads and processes.
///
/// ```text
/// DIR/                                  (the caller chooses; ImageCache::default_dir() suggests one)
///   builds/<key hex>/, build/           images built from Dockerfiles (see ImageCache::build)
///   blobs/sha256/<hex>                  manifests, configs and layers, verified before being moved in
///   images/<manifest hex>/rootfs/       the unpacked root file system (read-only by convention)
///   images/<manifest hex>/config.json   the image config, as fetched
///   images/<manifest hex>/image.json    config digest, layers, unpack time, size, unpack counts
///   refs/<escaped reference>.json       {reference, digest, resolved_at}: the last resolution
///   locks/                              flock files: cache.lock, blob-<hex>.lock, image-<hex>.lock
///   tmp/                                work in progress; what a crash leaves here is never used
/// ```
///
/// An image folder appears in `images/` only by an atomic `rename` of a complete one, so a
/// crash never leaves a half-unpacked image that is later taken as whole. Pulls of the same
/// image by several processes wait for each other on the image's lock and unpack it once.
#[derive(Debug, Clone)]
pub struct ImageCache {
    dir: PathBuf,
}

impl ImageCache {
    /// The usual cache folder: `$XDG_CACHE_HOME/proctor/images`, else
    /// `~/.cache/proctor/images`; `None` without a home folder.
    pub fn default_dir() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|h| !h.is_empty())
                    .map(|home| PathBuf::from(home).join(".cache"))
            })?;
        Some(base.join("proctor/images"))
    }

    /// Opens (making it if needed) the cache in `dir`.
    pub fn open(dir: impl Into<PathBuf>) -> Result<ImageCache> {
        let dir = dir.into();
        for sub in [BLOBS, IMAGES, REFS, LOCKS, TMP] {
            let path = dir.join(sub);
            fs::create_dir_all(&path).ctx("making", path)?;
        }
        Ok(ImageCache { dir })
    }

    /// The cache's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Makes `reference` available as an unpacked root file system and gives it.
    ///
    /// Resolves the reference (a registry is asked each time, except for a digest-pinned
    /// reference already pulled), picks this host's platform in an index, fetches and
    /// verifies each blob not yet cached, and unpacks the image unless it already is.
    pub fn pull(&self, reference: &ImageRef, registry: &RegistryConfig) -> Result<Image> {
        self.pull_with(reference, registry, &mut || {})
    }

    /// [`ImageCache::pull`], calling `fetching` once just before blobs are fetched and the
    /// image unpacked; never when the cache already has the image unpacked (a cache hit).
    pub fn pull_with(
        &self,
        reference: &ImageRef,
        registry: &RegistryConfig,
        fetching: &mut dyn FnMut(),
    ) -> Result<Image> {
        let canonical = reference.to_string();
        self.clean_tmp_if_idle()?;
        let _shared = self.lock(CACHE_LOCK, false)?;
        if reference.is_pinned() {
            if let Some(record) = self.read_ref(&canonical) {
                if let Some(image) = self.load(&canonical, &record.digest)? {
                    return Ok(image);
                }
            }
        }
        let mut source = open_source(reference, registry)?;
        let resolved = resolve(source.as_mut(), &canonical)?;
        let digest = resolved.digest.to_string();
        if let Some(image) = self.load(&canonical, &digest)? {
            self.write_ref(&canonical, &digest)?;
            return Ok(image);
        }
        let _image_lock = self.lock(&format!("image-{}.lock", resolved.digest.hex()), true)?;
        if self.load(&canonical, &digest)?.is_none() {
            fetching();
            self.unpack(source.as_mut(), &resolved, &canonical)?;
        }
        self.write_ref(&canonical, &digest)?;
        self.load(&canonical, &digest)?.ok_or_else(|| {
            ImageError::io(
                "finding the image just unpacked in",
                self.image_dir(&resolved.digest),
                io::Error::from(io::ErrorKind::NotFound),
            )
        })
    }

    /// The manifest digest (`sha256:…`) `reference` resolves to now, for this host's platform,
    /// without fetching layers or unpacking: for checking that a tag still names the image a
    /// run used.
    pub fn resolve_digest(
        &self,
        reference: &ImageRef,
        registry: &RegistryConfig,
    ) -> Result<String> {
        let mut source = open_source(reference, registry)?;
        Ok(resolve(source.as_mut(), &reference.to_string())?
            .digest
            .to_string())
    }

    /// The unpacked image with manifest `digest`, if the cache has it (no network).
    pub fn get(&self, digest: &str) -> Result<Option<Image>> {
        let reference = self
            .read_refs()
            .into_iter()
            .find(|r| r.digest == digest)
            .map(|r| r.reference)
            .unwrap_or_else(|| digest.to_string());
        self.load(&reference, digest)
    }

    /// Every unpacked image, by digest.
    pub fn list(&self) -> Result<Vec<CachedImage>> {
        let refs = self.read_refs();
        let mut images = Vec::new();
        for hex in self.image_hexes()? {
            let digest = format!("sha256:{hex}");
            let record = self.read_record(&hex);
            let mut references: Vec<String> = refs
                .iter()
                .filter(|r| r.digest == digest)
                .map(|r| r.reference.clone())
                .collect();
            references.sort();
            images.push(CachedImage {
                digest,
                references,
                size_bytes: record.as_ref().map(|r| r.size_bytes).unwrap_or(0),
                unpacked_at: record.map(|r| r.unpacked_at).unwrap_or_default(),
            });
        }
        Ok(images)
    }

    /// Empties `tmp/` of what interrupted pulls left, if no pull or prune is running.
    fn clean_tmp_if_idle(&self) -> Result<()> {
        let lock = self.dir.join(LOCKS).join(CACHE_LOCK);
        if let Some(_exclusive) = FileLock::try_exclusive(&lock)? {
            self.clean_tmp()?;
        }
        Ok(())
    }

    /// Empties `tmp/` (the caller holds the cache lock exclusively).
    pub(crate) fn clean_tmp(&self) -> Result<()> {
        let tmp = self.dir.join(TMP);
        for entry in fs::read_dir(&tmp).ctx("reading", &tmp)? {
            remove_tree(&entry.ctx("reading", &tmp)?.path())?;
        }
        Ok(())
    }

    /// Fetches what is missing of `resolved` and unpacks it into `images/<hex>`.
    fn unpack(&self, source: &mut dyn Source, resolved: &Resolved, reference: &str) -> Result<()> {
        let manifest = &resolved.manifest;
        let what = format!("the manifest of {reference}");
        self.store_bytes(&resolved.digest, &resolved.bytes)?;
        let config_digest = manifest.config.digest(&what)?;
        let config_path = self.ensure_blob(source, &config_digest, manifest.config.size)?;
        let config_bytes = fs::read(&config_path).ctx("reading", &config_path)?;
        let (config, platform) = ImageConfig::parse_with_platform(&config_bytes)?;
        let host = Platform::host();
        if !platform.matches(&host) {
            return Err(ImageError::WrongPlatform {
                reference: reference.to_string(),
                os: host.os,
                arch: host.architecture,
                available: vec![platform.label()],
            });
        }
        drop(config);
        for layer in &manifest.layers {
            check_layer_media_type(&layer.media_type, &layer.digest)?;
        }
        let mut blobs = Vec::new();
        for layer in &manifest.layers {
            let digest = layer.digest(&what)?;
            blobs.push(self.ensure_blob(source, &digest, layer.size)?);
        }

        let work = TempPath::new(
            self.dir
                .join(TMP)
                .join(unique_name(&format!("image-{}", resolved.digest.hex()))),
        );
        let rootfs = work.path().join("rootfs");
        fs::create_dir_all(&rootfs).ctx("making", &rootfs)?;
        fs::set_permissions(&rootfs, fs::Permissions::from_mode(0o755))
            .ctx("setting the mode of", &rootfs)?;
        let mut unpacker = Unpacker::new(rootfs.clone());
        for (layer, blob) in manifest.layers.iter().zip(&blobs) {
            unpacker.layer(&layer.digest, &layer.media_type, blob)?;
        }
        let stats = unpacker.finish()?;
        let config_json = work.path().join("config.json");
        fs::write(&config_json, &config_bytes).ctx("writing", &config_json)?;
        let record = ImageRecord {
            digest: resolved.digest.to_string(),
            config_digest: config_digest.to_string(),
            layers: manifest.layers.iter().map(|l| l.digest.clone()).collect(),
            unpacked_at: now_utc(),
            size_bytes: tree_size(&rootfs),
            unpack: stats,
        };
        let record_json = work.path().join("image.json");
        fs::write(&record_json, to_json(&record)).ctx("writing", &record_json)?;
        sync_file_system(work.path())?;
        let target = self.image_dir(&resolved.digest);
        fs::rename(work.path(), &target).ctx("moving into place", &target)?;
        work.keep();
        Ok(())
    }

    /// The verified blob `digest`, fetched from `source` unless already cached.
    fn ensure_blob(&self, source: &mut dyn Source, digest: &Digest, size: u64) -> Result<PathBuf> {
        let path = self.blob_path(digest);
        if path.is_file() {
            return Ok(path);
        }
        let _lock = self.lock(&format!("blob-{}.lock", digest.hex()), true)?;
        if path.is_file() {
            return Ok(path);
        }
        let temp = TempPath::new(
            self.dir
                .join(TMP)
                .join(unique_name(&format!("blob-{}", digest.hex()))),
        );
        let file = File::create(temp.path()).ctx("creating", temp.path())?;
        let limit = (size > 0).then_some(size);
        let mut sink = BlobSink::new(file, temp.path().to_path_buf(), limit);
        if let Err(e) = source.blob(digest, &mut sink) {
            return Err(match e {
                ImageError::Io { source, .. } if is_over_limit(&source) => too_long(digest, size),
                other => other,
            });
        }
        let (actual, written, file) = sink.finish();
        if actual != *digest {
            return Err(ImageError::DigestMismatch {
                what: format!("blob {digest}"),
                expected: digest.to_string(),
                actual: actual.to_string(),
            });
        }
        if limit.is_some_and(|size| written != size) {
            return Err(ImageError::DigestMismatch {
                what: format!("blob {digest} (declared {size} bytes, {written} received)"),
                expected: digest.to_string(),
                actual: actual.to_string(),
            });
        }
        file.sync_all().ctx("syncing", temp.path())?;
        drop(file);
        fs::rename(temp.path(), &path).ctx("moving into place", &path)?;
        temp.keep();
        Ok(path)
    }

    /// Stores bytes already verified to have `digest` (a manifest) as a blob.
    fn store_bytes(&self, digest: &Digest, bytes: &[u8]) -> Result<()> {
        let path = self.blob_path(digest);
        if path.is_file() {
            return Ok(());
        }
        atomic_write(&self.dir.join(TMP), &path, bytes)
    }

    /// The image `digest` as pulled by `reference`, if it is unpacked.
    fn load(&self, reference: &str, digest: &str) -> Result<Option<Image>> {
        let Ok(parsed) = Digest::parse(digest) else {
            return Ok(None);
        };
        let dir = self.image_dir(&parsed);
        if !dir.is_dir() {
            return Ok(None);
        }
        let config_path = dir.join("config.json");
        let config_bytes = match fs::read(&config_path) {
            Ok(bytes) => bytes,
            // Removed by a prune since the check above.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(ImageError::io("reading", config_path, e)),
        };
        let config = ImageConfig::parse(&config_bytes)?;
        let unpack = self
            .read_record(parsed.hex())
            .map(|r| r.unpack)
            .unwrap_or_default();
        Ok(Some(Image {
            reference: reference.to_string(),
            digest: parsed.to_string(),
            rootfs: dir.join("rootfs"),
            config,
            unpack,
        }))
    }

    fn image_dir(&self, digest: &Digest) -> PathBuf {
        self.dir.join(IMAGES).join(digest.hex())
    }

    fn blob_path(&self, digest: &Digest) -> PathBuf {
        self.dir.join(BLOBS).join(digest.hex())
    }

    /// Takes the lock file `locks/NAME` (waits for it).
    pub(crate) fn lock(&self, name: &str, exclusive: bool) -> Result<FileLock> {
        Ok(FileLock::acquire(
            &self.dir.join(LOCKS).join(name),
            exclusive,
        )?)
    }

    /// The hex digests of the unpacked images.
    pub(crate) fn image_hexes(&self) -> Result<Vec<String>> {
        let images = self.dir.join(IMAGES);
        let mut hexes = Vec::new();
        for entry in fs::read_dir(&images).ctx("reading", &images)? {
            let name = entry.ctx("reading", &images)?.file_name();
            if let Some(digest) = name.to_str().and_then(Digest::from_hex) {
                hexes.push(digest.hex().to_string());
            }
        }
        hexes.sort();
        Ok(hexes)
    }

    pub(crate) fn read_record(&self, hex: &str) -> Option<ImageRecord> {
        let bytes = fs::read(self.dir.join(IMAGES).join(hex).join("image.json")).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    pub(crate) fn ref_path(&self, reference: &str) -> PathBuf {
        self.dir.join(REFS).join(ref_file_name(reference))
    }

    fn read_ref(&self, reference: &str) -> Option<RefRecord> {
        let bytes = fs::read(self.ref_path(reference)).ok()?;
        serde_json::from_slice::<RefRecord>(&bytes)
            .ok()
            .filter(|r| r.reference == reference)
    }

    pub(crate) fn read_refs(&self) -> Vec<RefRecord> {
        let Ok(entries) = fs::read_dir(self.dir.join(REFS)) else {
            return Vec::new();
        };
        entries
            .filter_map(|e| e.ok())
            .filter_map(|e| fs::read(e.path()).ok())
            .filter_map(|bytes| serde_json::from_slice(&bytes).ok())
            .collect()
    }

    fn write_ref(&self, reference: &str, digest: &str) -> Result<()> {
        let record = RefRecord {
            reference: reference.to_string(),
            digest: digest.to_string(),
            resolved_at: now_utc(),
        };
        atomic_write(
            &self.dir.join(TMP),
            &self.ref_path(reference),
            &to_json(&record),
        )
    }
}

/// The source `reference` is read from.
fn open_source(reference: &ImageRef, registry: &RegistryConfig) -> Result<Box<dyn Source>> {
    Ok(match reference {
        ImageRef::Registry(r) => Box::new(RegistrySource::new(r, registry)?),
        ImageRef::OciLayout(path) => Box::new(LayoutSource::new(path)),
        ImageRef::OciArchive(path) => Box::new(ArchiveSource::new(path)),
    })
}

/// `refs/` file name of a reference: the reference with everything but letters, digits and
/// `._-@` percent-escaped (a hash if that is too long for a file name).
fn ref_file_name(reference: &str) -> String {
    let mut name = String::new();
    for b in reference.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'@') {
            name.push(b as char);
        } else {
            name.push_str(&format!("%{b:02X}"));
        }
    }
    if name.len() > 200 || name.starts_with('.') {
        name = format!("sha256-{}", Digest::of(reference.as_bytes()).hex());
    }
    name.push_str(".json");
    name
}

/// Now, as `2026-11-30T14:02:31Z`.
fn now_utc() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Pretty JSON of a record (serialising these plain structs cannot fail).
fn to_json<T: Serialize>(value: &T) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(value).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

/// Treats a missing file as already removed.
pub(crate) fn ignore_missing(e: io::Error) -> io::Result<()> {
    if e.kind() == io::ErrorKind::NotFound {
        Ok(())
    } else {
        Err(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ref_file_names_are_escaped_and_bounded() {
        assert_eq!(
            ref_file_name("docker.io/library/python:3.12-slim"),
            "docker.io%2Flibrary%2Fpython%3A3.12-slim.json"
        );
        let long = format!("oci-archive:/{}", "a".repeat(300));
        let name = ref_file_name(&long);
        assert!(name.starts_with("sha256-") && name.len() < 100, "{name}");
    }

    #[test]
    fn now_is_rfc3339_seconds() {
        let now = now_utc();
        assert_eq!(now.len(), 20, "{now}");
        assert!(now.ends_with('Z'));
    }
}
