//! The content manifest of a prepared layer: every entry under the layer's folder with its kind,
//! permission bits and (for files) BLAKE3, kept beside the folder as `KEY.manifest`.
//!
//! A layer is a cache that every later trial trusts as its start state, so it is checked against
//! its manifest before it is used: a file changed, added or removed since the layer was built
//! (by hand, by a disk error, by another tool) makes the check fail, and the layer is built
//! again. The manifest is written atomically and last, after the layer is in place, so a layer
//! without one (a build cut short, or a cache made before manifests existed) is never trusted.

use std::collections::BTreeMap;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The manifest layout this module writes.
const VERSION: u32 = 1;

/// What a layer's folder holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Manifest {
    /// [`VERSION`].
    version: u32,
    /// Every entry, by path relative to the layer's folder (`/`-separated).
    entries: BTreeMap<String, Entry>,
}

/// One entry of a layer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum Entry {
    /// A regular file.
    File {
        /// BLAKE3 of its content, hex.
        blake3: String,
        /// Its permission bits.
        mode: u32,
    },
    /// A folder.
    Dir {
        /// Its permission bits.
        mode: u32,
    },
    /// Anything else (a symlink, a device): layers are built without any, so one found is a
    /// change.
    Other,
}

/// Where the manifest of the layer in `dir` is kept: beside it, never inside (the folder is a
/// lower layer of the agent's workspace, which must hold the fixture's files only).
pub(crate) fn path_of(dir: &Path) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(".manifest");
    dir.with_file_name(name)
}

impl Manifest {
    /// Reads every entry under `dir` and hashes every file.
    pub(crate) fn scan(dir: &Path) -> io::Result<Manifest> {
        let mut entries = BTreeMap::new();
        for entry in walkdir::WalkDir::new(dir).min_depth(1) {
            let entry = entry.map_err(io::Error::other)?;
            let rel = entry
                .path()
                .strip_prefix(dir)
                .map_err(io::Error::other)?
                .to_string_lossy()
                // On Linux `/` is the only separator: a backslash is a byte of the name.
                .into_owned();
            let meta = std::fs::symlink_metadata(entry.path())?;
            let mode = meta.permissions().mode() & 0o7777;
            let kind = if meta.is_file() {
                let bytes = std::fs::read(entry.path())?;
                Entry::File {
                    blake3: blake3::hash(&bytes).to_hex().to_string(),
                    mode,
                }
            } else if meta.is_dir() {
                Entry::Dir { mode }
            } else {
                Entry::Other
            };
            entries.insert(rel, kind);
        }
        Ok(Manifest {
            version: VERSION,
            entries,
        })
    }

    /// Reads the manifest kept for the layer in `dir`; `None` when there is none, or it does
    /// not parse (either way the layer cannot be trusted).
    pub(crate) fn read_for(dir: &Path) -> Option<Manifest> {
        let bytes = std::fs::read(path_of(dir)).ok()?;
        serde_json::from_slice::<Manifest>(&bytes)
            .ok()
            .filter(|m| m.version == VERSION)
    }

    /// Writes this manifest for the layer in `dir`, atomically.
    pub(crate) fn write_for(&self, dir: &Path) -> io::Result<()> {
        proctor_store::atomic_write_json(path_of(dir), self).map_err(io::Error::other)
    }

    /// Whether the layer in `dir` holds exactly what its kept manifest says (no manifest: no).
    pub(crate) fn matches(dir: &Path) -> io::Result<bool> {
        let Some(kept) = Manifest::read_for(dir) else {
            return Ok(false);
        };
        Ok(Manifest::scan(dir)? == kept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_change_to_a_layer_breaks_the_match() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("layer");
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/a.txt"), "a\n").unwrap();
        assert!(!Manifest::matches(&dir).unwrap(), "no manifest, no trust");
        Manifest::scan(&dir).unwrap().write_for(&dir).unwrap();
        assert!(path_of(&dir).is_file());
        assert_eq!(path_of(&dir), root.path().join("layer.manifest"));
        assert!(Manifest::matches(&dir).unwrap());

        std::fs::write(dir.join("sub/a.txt"), "b\n").unwrap();
        assert!(!Manifest::matches(&dir).unwrap(), "changed content");
        std::fs::write(dir.join("sub/a.txt"), "a\n").unwrap();
        assert!(Manifest::matches(&dir).unwrap(), "restored");

        std::fs::write(dir.join("extra"), "").unwrap();
        assert!(!Manifest::matches(&dir).unwrap(), "an added file");
        std::fs::remove_file(dir.join("extra")).unwrap();

        std::fs::set_permissions(
            dir.join("sub/a.txt"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        assert!(!Manifest::matches(&dir).unwrap(), "changed mode");

        std::fs::write(path_of(&dir), "{").unwrap();
        assert!(!Manifest::matches(&dir).unwrap(), "a torn manifest");
    }
}
