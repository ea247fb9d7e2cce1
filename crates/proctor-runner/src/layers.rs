//! The read-only lower layers of a trial's workspace: the fixture, the hidden mutation's layer
//! and the variant's files, each prepared once and reused by every trial that needs it.
//!
//! A mutation layer holds only the files the patch adds or changes, so preparing it costs
//! O(patch), not O(fixture). A patch that deletes files gets a full copy of the fixture with
//! the patch applied instead (a plain directory cannot express a deletion to overlayfs).
//! Layers are built in a temporary folder and renamed into place, so concurrent runs and
//! interrupted preparations never see a half-built layer; a build that fails removes its
//! temporary folder. Each layer's content is recorded in a manifest beside it
//! ([`manifest`]), written last; before a layer is first used by a [`LayerCache`], it is
//! checked against that manifest, and built again when anything differs.

mod manifest;

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use proctor_suite::patch::Patch;
use proctor_suite::plan::ChosenMutation;
use proctor_suite::tree::bytes_hash;

use manifest::Manifest;

/// Where prepared layers live (inside the store).
#[derive(Debug, Clone)]
pub struct LayerCache {
    dir: PathBuf,
    /// Layers this cache (and its clones) checked against their manifest already: each is
    /// checked once, not once per trial.
    verified: Arc<Mutex<BTreeSet<PathBuf>>>,
}

/// The lowers of one trial's workspace, top first, and what each one is.
#[derive(Debug, Clone, Default)]
pub struct Lowers {
    /// Layer directories, top first.
    pub dirs: Vec<PathBuf>,
    /// Files laid in for the variant (workspace path -> BLAKE3); not the agent's changes.
    pub laid_in: BTreeMap<String, String>,
}

impl LayerCache {
    /// A cache in `dir` (created on first use).
    pub fn new(dir: PathBuf) -> LayerCache {
        LayerCache {
            dir,
            verified: Arc::default(),
        }
    }

    /// The base layers for (fixture, mutation): the mutation layer (if any) above the fixture, or
    /// one fully patched copy when the patch deletes files.
    pub fn base(
        &self,
        fixture: &Path,
        fixture_hash: &str,
        mutation: Option<&Path>,
    ) -> io::Result<Vec<PathBuf>> {
        let Some(patch_path) = mutation else {
            return Ok(vec![fixture.to_path_buf()]);
        };
        let text = std::fs::read_to_string(patch_path)?;
        let key = format!(
            "{}-{}",
            &fixture_hash[..16],
            &bytes_hash(text.as_bytes())[..16]
        );
        let patch = Patch::parse(&text)
            .map_err(|e| io::Error::other(format!("{}: {e}", patch_path.display())))?;
        let result = patch
            .apply(|rel| std::fs::read(fixture.join(rel)).ok())
            .map_err(|e| io::Error::other(format!("{}: {e}", patch_path.display())))?;
        let deletes = result.values().any(Option::is_none);
        if deletes {
            let dir = self.dir.join("mutated").join(&key);
            self.build_once(&dir, |tmp| {
                copy_tree(fixture, tmp)?;
                write_result(tmp, fixture, &result)
            })?;
            Ok(vec![dir])
        } else {
            let dir = self.dir.join("mutation").join(&key);
            self.build_once(&dir, |tmp| write_result(tmp, fixture, &result))?;
            Ok(vec![dir, fixture.to_path_buf()])
        }
    }

    /// A layer holding a variant's files (workspace path -> file in the suite).
    pub fn variant_files(
        &self,
        files: &BTreeMap<String, PathBuf>,
    ) -> io::Result<Option<(PathBuf, BTreeMap<String, String>)>> {
        if files.is_empty() {
            return Ok(None);
        }
        let mut hashes = BTreeMap::new();
        let mut key = blake3::Hasher::new();
        let mut contents = BTreeMap::new();
        for (dest, src) in files {
            let bytes = std::fs::read(src)?;
            let h = bytes_hash(&bytes);
            key.update(dest.as_bytes());
            key.update(h.as_bytes());
            hashes.insert(dest.clone(), h);
            contents.insert(dest.clone(), bytes);
        }
        let dir = self.dir.join("files").join(&key.finalize().to_hex()[..32]);
        self.build_once(&dir, |tmp| {
            for (dest, bytes) in &contents {
                let path = tmp.join(dest);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::write(path, bytes)?;
            }
            Ok(())
        })?;
        Ok(Some((dir, hashes)))
    }

    /// The lowers of a trial's start state, top first (the variant's files, then the mutation
    /// layer, then the fixture), and the BLAKE3 of each laid-in variant file by workspace path.
    pub fn start_state(
        &self,
        suite: &proctor_suite::Suite,
        variant: &proctor_suite::model::Variant,
        trial: &proctor_suite::plan::PlannedTrial,
        fixture_hash: &str,
    ) -> io::Result<Lowers> {
        let mutation = trial
            .mutation
            .as_ref()
            .and_then(ChosenMutation::patch_name)
            .map(|name| suite.root.join("mutations").join(&trial.task).join(name));
        let base = self
            .base(&suite.fixture_dir(), fixture_hash, mutation.as_deref())
            .map_err(|e| io::Error::other(format!("the fixture layer: {e}")))?;
        let files: BTreeMap<String, PathBuf> = variant
            .files
            .iter()
            .map(|(d, s)| (d.clone(), suite.root.join(s.get_ref())))
            .collect();
        let (mut dirs, laid_in) = match self
            .variant_files(&files)
            .map_err(|e| io::Error::other(format!("the variant's files: {e}")))?
        {
            Some((dir, hashes)) => (vec![dir], hashes),
            None => (Vec::new(), BTreeMap::new()),
        };
        dirs.extend(base);
        Ok(Lowers { dirs, laid_in })
    }

    /// Makes sure the layer `dir` exists and holds what its manifest says, building it with
    /// `build` (into a temporary folder, renamed into place, its manifest written last) when it
    /// is missing, and building it again when it differs from its manifest or has none.
    fn build_once(
        &self,
        dir: &Path,
        build: impl FnOnce(&Path) -> io::Result<()>,
    ) -> io::Result<()> {
        if self.is_verified(dir) {
            return Ok(());
        }
        let parent = dir
            .parent()
            .ok_or_else(|| io::Error::other("layer without a parent"))?;
        std::fs::create_dir_all(parent)?;
        // One checker or builder at a time in this process: a layer another worker has just
        // renamed into place is never taken for one without a manifest.
        let _lock = BUILDING.lock().unwrap_or_else(|p| p.into_inner());
        let stale = dir.is_dir();
        if stale && Manifest::matches(dir)? {
            self.mark_verified(dir);
            return Ok(());
        }
        if stale && !manifest::path_of(dir).exists() {
            // Another process may have renamed it into place an instant ago and be writing its
            // manifest now.
            std::thread::sleep(MANIFEST_SETTLE);
            if Manifest::matches(dir)? {
                self.mark_verified(dir);
                return Ok(());
            }
        }
        let tmp = tempfile_dir(parent)?;
        let built = build(&tmp).and_then(|()| Manifest::scan(&tmp));
        let manifest = match built {
            Ok(m) => m,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(e);
            }
        };
        if stale {
            // Differs from its manifest (or has none): set it aside, then drop it.
            let aside = tempfile_dir(parent)?;
            std::fs::remove_dir(&aside)?;
            if std::fs::rename(dir, &aside).is_ok() {
                let _ = std::fs::remove_dir_all(&aside);
            }
        }
        match std::fs::rename(&tmp, dir) {
            Ok(()) => {}
            // Another worker built it first: theirs is identical.
            Err(_) if dir.is_dir() => {
                let _ = std::fs::remove_dir_all(&tmp);
            }
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(e);
            }
        }
        manifest.write_for(dir)?;
        self.mark_verified(dir);
        Ok(())
    }

    fn is_verified(&self, dir: &Path) -> bool {
        self.verified.lock().is_ok_and(|v| v.contains(dir))
    }

    fn mark_verified(&self, dir: &Path) {
        if let Ok(mut v) = self.verified.lock() {
            v.insert(dir.to_path_buf());
        }
    }
}

/// Held while a layer is checked or built, so that the workers of one process never race.
static BUILDING: Mutex<()> = Mutex::new(());

/// How long a layer found without a manifest is given for another process to write it.
const MANIFEST_SETTLE: std::time::Duration = std::time::Duration::from_millis(200);

fn tempfile_dir(parent: &Path) -> io::Result<PathBuf> {
    for n in 0..1000u32 {
        let p = parent.join(format!(".tmp-{}-{n}", std::process::id()));
        match std::fs::create_dir(&p) {
            Ok(()) => return Ok(p),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other("cannot create a temporary layer folder"))
}

fn write_result(
    dir: &Path,
    fixture: &Path,
    result: &BTreeMap<String, Option<Vec<u8>>>,
) -> io::Result<()> {
    for (rel, content) in result {
        let path = dir.join(rel);
        match content {
            Some(bytes) => {
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::write(&path, bytes)?;
                if let Ok(meta) = std::fs::metadata(fixture.join(rel)) {
                    std::fs::set_permissions(&path, meta.permissions())?;
                }
            }
            None => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    Ok(())
}

/// Copies a directory tree: folders, files, symlinks and FIFOs with their permission bits,
/// faithfully and harmlessly ([`proctor_sandbox::copy`]): no copy has a set-user-ID,
/// set-group-ID or sticky bit, a sparse file keeps its holes, and a file with several names in
/// the tree is copied once and linked. Sockets and device nodes are not copied. The copy is made
/// by open folders beneath `to` ([`proctor_sandbox::copy::copy_tree`]): what `to` already holds
/// (an agent's link or file where `from` has a folder) is replaced, never written through.
pub fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    proctor_sandbox::copy::copy_tree(from, to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutation_layer_holds_only_the_patched_file() {
        let root = tempfile::tempdir().unwrap();
        let fixture = root.path().join("fixture");
        std::fs::create_dir_all(fixture.join("src")).unwrap();
        std::fs::write(fixture.join("src/a.py"), "rate = 10\n").unwrap();
        std::fs::write(fixture.join("README.md"), "readme\n").unwrap();
        let patch = root.path().join("m.patch");
        std::fs::write(
            &patch,
            "--- a/src/a.py\n+++ b/src/a.py\n@@ -1 +1 @@\n-rate = 10\n+rate = 12\n",
        )
        .unwrap();
        let cache = LayerCache::new(root.path().join("cache"));
        let layers = cache.base(&fixture, &"0".repeat(64), Some(&patch)).unwrap();
        assert_eq!(layers.len(), 2);
        assert_eq!(
            std::fs::read_to_string(layers[0].join("src/a.py")).unwrap(),
            "rate = 12\n"
        );
        assert!(!layers[0].join("README.md").exists());
        // Prepared once: the second call reuses the same folder.
        assert_eq!(
            cache.base(&fixture, &"0".repeat(64), Some(&patch)).unwrap(),
            layers
        );
    }

    #[test]
    fn a_tampered_cached_layer_is_rebuilt_before_use() {
        let root = tempfile::tempdir().unwrap();
        let fixture = root.path().join("fixture");
        std::fs::create_dir_all(fixture.join("src")).unwrap();
        std::fs::write(fixture.join("src/a.py"), "rate = 10\n").unwrap();
        let patch = root.path().join("m.patch");
        std::fs::write(
            &patch,
            "--- a/src/a.py\n+++ b/src/a.py\n@@ -1 +1 @@\n-rate = 10\n+rate = 12\n",
        )
        .unwrap();
        let cache_dir = root.path().join("cache");
        let hash = "2".repeat(64);
        let layers = LayerCache::new(cache_dir.clone())
            .base(&fixture, &hash, Some(&patch))
            .unwrap();
        let cached = layers[0].join("src/a.py");
        assert!(
            manifest::path_of(&layers[0]).is_file(),
            "a manifest beside the layer"
        );

        // Tampered between runs: the next run's cache notices and rebuilds it.
        std::fs::write(&cached, "rate = 99\n").unwrap();
        std::fs::write(layers[0].join("planted.txt"), "x").unwrap();
        let again = LayerCache::new(cache_dir.clone())
            .base(&fixture, &hash, Some(&patch))
            .unwrap();
        assert_eq!(again, layers, "the same layer folder");
        assert_eq!(std::fs::read_to_string(&cached).unwrap(), "rate = 12\n");
        assert!(!layers[0].join("planted.txt").exists());
        let leftovers: Vec<_> = std::fs::read_dir(cache_dir.join("mutation"))
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".tmp-"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");

        // A layer without a manifest (a cache made before manifests) is rebuilt too.
        std::fs::remove_file(manifest::path_of(&layers[0])).unwrap();
        std::fs::write(&cached, "rate = 98\n").unwrap();
        LayerCache::new(cache_dir.clone())
            .base(&fixture, &hash, Some(&patch))
            .unwrap();
        assert_eq!(std::fs::read_to_string(&cached).unwrap(), "rate = 12\n");
        assert!(manifest::path_of(&layers[0]).is_file());

        // A variant's files layer is checked the same way.
        let src = root.path().join("SKILL.md");
        std::fs::write(&src, "be careful\n").unwrap();
        let files = BTreeMap::from([(String::from("SKILL.md"), src)]);
        let (dir, _) = LayerCache::new(cache_dir.clone())
            .variant_files(&files)
            .unwrap()
            .unwrap();
        std::fs::write(dir.join("SKILL.md"), "be reckless\n").unwrap();
        LayerCache::new(cache_dir).variant_files(&files).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("SKILL.md")).unwrap(),
            "be careful\n"
        );
    }

    #[test]
    fn a_failed_build_leaves_no_temporary_folder() {
        let root = tempfile::tempdir().unwrap();
        let cache = LayerCache::new(root.path().join("cache"));
        let dir = root.path().join("cache/mutation/k");
        let err = cache
            .build_once(&dir, |tmp| {
                std::fs::write(tmp.join("half"), "x")?;
                Err(io::Error::other("disk full"))
            })
            .unwrap_err();
        assert_eq!(err.to_string(), "disk full");
        let names: Vec<_> = std::fs::read_dir(root.path().join("cache/mutation"))
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect();
        assert!(names.is_empty(), "{names:?}");
    }

    #[test]
    fn a_deleting_patch_gets_a_full_copy() {
        let root = tempfile::tempdir().unwrap();
        let fixture = root.path().join("fixture");
        std::fs::create_dir_all(&fixture).unwrap();
        std::fs::write(fixture.join("a"), "x\n").unwrap();
        std::fs::write(fixture.join("b"), "y\n").unwrap();
        let patch = root.path().join("m.patch");
        std::fs::write(&patch, "--- a/a\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n").unwrap();
        let cache = LayerCache::new(root.path().join("cache"));
        let layers = cache.base(&fixture, &"1".repeat(64), Some(&patch)).unwrap();
        assert_eq!(layers.len(), 1);
        assert!(!layers[0].join("a").exists());
        assert_eq!(std::fs::read_to_string(layers[0].join("b")).unwrap(), "y\n");
    }
}
