//! The read-only lower layers of a trial's workspace: the fixture, the hidden mutation's layer
//! and the variant's files, each prepared once and reused by every trial that needs it.
//!
//! A mutation layer holds only the files the patch adds or changes, so preparing it costs
//! O(patch), not O(fixture). A patch that deletes files gets a full copy of the fixture with
//! the patch applied instead (a plain directory cannot express a deletion to overlayfs).
//! Layers are built in a temporary folder and renamed into place, so concurrent runs and
//! interrupted preparations never see a half-built layer.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use proctor_suite::patch::Patch;
use proctor_suite::tree::bytes_hash;

/// Where prepared layers live (inside the store).
#[derive(Debug, Clone)]
pub struct LayerCache {
    dir: PathBuf,
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
        LayerCache { dir }
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
            .map(|m| suite.root.join("mutations").join(&trial.task).join(&m.name));
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

    fn build_once(
        &self,
        dir: &Path,
        build: impl FnOnce(&Path) -> io::Result<()>,
    ) -> io::Result<()> {
        if dir.is_dir() {
            return Ok(());
        }
        let parent = dir
            .parent()
            .ok_or_else(|| io::Error::other("layer without a parent"))?;
        std::fs::create_dir_all(parent)?;
        let tmp = tempfile_dir(parent)?;
        build(&tmp)?;
        match std::fs::rename(&tmp, dir) {
            Ok(()) => Ok(()),
            // Another worker built it first: theirs is identical.
            Err(_) if dir.is_dir() => {
                let _ = std::fs::remove_dir_all(&tmp);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

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

/// Copies a directory tree: files, folders and permission bits (no symlinks: suites have none).
pub fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in walkdir::WalkDir::new(from).min_depth(1) {
        let entry = entry.map_err(io::Error::other)?;
        let rel = entry.path().strip_prefix(from).map_err(io::Error::other)?;
        let dest = to.join(rel);
        let ft = entry.file_type();
        if ft.is_dir() {
            std::fs::create_dir_all(&dest)?;
            std::fs::set_permissions(
                &dest,
                entry.metadata().map_err(io::Error::other)?.permissions(),
            )?;
        } else if ft.is_file() {
            std::fs::copy(entry.path(), &dest)?;
        }
    }
    Ok(())
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
