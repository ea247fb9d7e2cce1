//! Pruning the whole image cache: the unpacked images a caller no longer keeps, the blobs and
//! builds no remaining image uses, and what interrupted work left.

use std::collections::BTreeSet;
use std::fs;

use serde::Serialize;

use crate::build::{prune_builds, BUILDS};
use crate::cache::{
    ignore_missing, CachedImage, ImageCache, BLOBS, CACHE_LOCK, IMAGES, LOCKS, TMP,
};
use crate::error::{IoContext, Result};
use crate::fsutil::unique_name;
use crate::unpack::remove_tree;

/// What [`ImageCache::prune`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PruneReport {
    /// Digests of the unpacked images removed.
    pub removed_images: Vec<String>,
    /// How many blobs were removed (those no remaining image uses).
    pub removed_blobs: u64,
    /// Bytes freed (image file content and blob sizes).
    pub freed_bytes: u64,
    /// How many builds were removed (`builds/<key>/`: those of removed images, and failed ones
    /// with only a log), with the builder's store of base images (`build/`).
    pub removed_builds: u64,
}

impl ImageCache {
    /// Removes every unpacked image `keep` refuses (with its reference records), then every
    /// blob no remaining image uses, and what interrupted pulls left in `tmp/`. Waits for
    /// running pulls to finish first, and holds new ones back while it works. Read-only folders
    /// in an image are made writable to be removed.
    pub fn prune(&self, keep: impl Fn(&CachedImage) -> bool) -> Result<PruneReport> {
        let _exclusive = self.lock(CACHE_LOCK, true)?;
        let mut report = PruneReport::default();
        for image in self.list()? {
            if keep(&image) {
                continue;
            }
            let hex = image.digest.trim_start_matches("sha256:").to_string();
            let from = self.dir().join(IMAGES).join(&hex);
            let trash = self
                .dir()
                .join(TMP)
                .join(unique_name(&format!("trash-{hex}")));
            fs::rename(&from, &trash).ctx("moving out of the cache", &from)?;
            remove_tree(&trash)?;
            for record in self.read_refs() {
                if record.digest == image.digest {
                    let path = self.ref_path(&record.reference);
                    fs::remove_file(&path)
                        .or_else(ignore_missing)
                        .ctx("removing", path)?;
                }
            }
            report.freed_bytes += image.size_bytes;
            report.removed_images.push(image.digest);
        }

        // Blobs that a remaining image uses; if one's record is unreadable, keep every blob.
        let mut used = BTreeSet::new();
        let mut all_known = true;
        for hex in self.image_hexes()? {
            match self.read_record(&hex) {
                Some(record) => {
                    used.insert(format!("sha256:{hex}"));
                    used.insert(record.config_digest);
                    used.extend(record.layers);
                }
                None => all_known = false,
            }
        }
        if all_known {
            let blobs = self.dir().join(BLOBS);
            for entry in fs::read_dir(&blobs).ctx("reading", &blobs)? {
                let entry = entry.ctx("reading", &blobs)?;
                let name = entry.file_name().to_string_lossy().into_owned();
                if used.contains(&format!("sha256:{name}")) {
                    continue;
                }
                let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
                fs::remove_file(entry.path())
                    .or_else(ignore_missing)
                    .ctx("removing", entry.path())?;
                report.removed_blobs += 1;
                report.freed_bytes += size;
            }
        }

        // Builds of images no longer here (and failed ones), and the builder's store: base
        // images it pulled, fetched again by the next build that needs them.
        let remaining: BTreeSet<String> = self
            .image_hexes()?
            .into_iter()
            .map(|hex| format!("sha256:{hex}"))
            .collect();
        report.removed_builds = prune_builds(self, &remaining)?;

        // Left-overs of interrupted work, and lock files of what is gone (no pull runs now).
        self.clean_tmp()?;
        let locks = self.dir().join(LOCKS);
        for entry in fs::read_dir(&locks).ctx("reading", &locks)? {
            let entry = entry.ctx("reading", &locks)?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let stale = match name.strip_suffix(".lock") {
                Some(rest) => match (rest.strip_prefix("blob-"), rest.strip_prefix("image-")) {
                    (Some(hex), _) => !self.dir().join(BLOBS).join(hex).exists(),
                    (_, Some(hex)) => !self.dir().join(IMAGES).join(hex).exists(),
                    _ => rest
                        .strip_prefix("build-")
                        .is_some_and(|hex| !self.dir().join(BUILDS).join(hex).exists()),
                },
                None => false,
            };
            if stale {
                fs::remove_file(entry.path())
                    .or_else(ignore_missing)
                    .ctx("removing", entry.path())?;
            }
        }
        Ok(report)
    }
}
