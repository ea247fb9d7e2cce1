//! The copy of its suite a run keeps, so that the run can be read, compared, exported and
//! rescored from the run alone after its suite folder changed or was deleted.
//!
//! ```text
//! STORE/files/HH/HASH[.x]      content-addressed file storage (BLAKE3 of the content; `.x` for
//!                              an executable), shared by every run of the store
//! STORE/runs/RUN_ID/suite/     the suite as the run read it: each file a hard link to its
//!                              content in files/ (a copy where links cannot be made)
//! STORE/runs/RUN_ID/suite.json every entry of suite/ with its kind and hash, written last
//! ```
//!
//! A kept suite is checked whenever it is read ([`read_kept_suite`]): every file's content
//! must hash to what `suite.json` says, and nothing may have been added or removed; otherwise
//! the read fails with [`StoreError::KeptSuiteDamaged`] naming the file. A run made before runs
//! kept their suite has no `suite.json`: reading it gives `None`.

use std::borrow::Cow;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use proctor_records::exact_name::{exact_path, hex_of};

use serde::{Deserialize, Serialize};

use crate::error::{io_err, Result, StoreError};

/// The folder of a run that holds its kept suite.
pub const KEPT_SUITE_DIR: &str = "suite";
/// The file of a run that lists its kept suite with hashes.
pub const KEPT_SUITE_FILE: &str = "suite.json";
/// The store's content-addressed file storage.
pub const FILES_DIR: &str = "files";

/// Names skipped at the top of a suite folder when keeping it (as the suite hash skips them).
const SKIPPED_AT_ROOT: &[&str] = &[".git", ".proctor"];

/// `suite.json`: every entry of a run's kept suite.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeptSuite {
    /// The layout of this file (1).
    pub schema_version: u32,
    /// Where the suite was read from.
    pub source: PathBuf,
    /// Every entry, sorted by path.
    pub entries: Vec<KeptEntry>,
}

/// One entry of a kept suite.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeptEntry {
    /// The path relative to the suite's top, `/`-separated; a name that is not UTF-8 is here
    /// lossily decoded (U+FFFD for each bad byte), its exact bytes in `path_hex`.
    pub path: String,
    /// The exact bytes, in lower-case hex, of a path that is not UTF-8 (absent when it is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_hex: Option<String>,
    /// `dir`, `file`, `exec` (an executable file) or `symlink`.
    pub kind: String,
    /// BLAKE3 (hex) of a file's content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blake3: Option<String>,
    /// Where a symbolic link points (lossily decoded when it is not UTF-8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The exact bytes, in lower-case hex, of a link target that is not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_hex: Option<String>,
}

impl KeptEntry {
    /// An entry of kind `kind` at `rel` (relative to the suite's top), its name recorded
    /// exactly.
    fn at(rel: &Path, kind: &str) -> KeptEntry {
        KeptEntry {
            path: rel.to_string_lossy().into_owned(),
            path_hex: hex_of(rel),
            kind: kind.into(),
            blake3: None,
            target: None,
            target_hex: None,
        }
    }

    /// The entry's path relative to the suite's top, as its exact bytes.
    pub fn exact_path(&self) -> Cow<'_, Path> {
        exact_path(&self.path, self.path_hex.as_deref())
    }

    /// A symbolic link's target, as its exact bytes.
    pub fn exact_target(&self) -> Option<Cow<'_, Path>> {
        let target = self.target.as_deref()?;
        Some(exact_path(target, self.target_hex.as_deref()))
    }
}

/// Keeps the suite folder `suite` in the run folder `run_dir` of the store at `store_root`:
/// every file (but a `.git` or `.proctor` at the top, and the store itself when it lies in the
/// suite) stored once by content in the store's `files/`, linked into `run_dir/suite/`, and
/// listed in `run_dir/suite.json`, written last. Returns the folder of the copy.
///
/// The stored files and the links are written without waiting for the disk, then made durable
/// together (one `syncfs`) before `suite.json`, the commit point, is written: not one `fsync`
/// per file of the suite.
pub fn keep_suite(store_root: &Path, run_dir: &Path, suite: &Path) -> Result<PathBuf> {
    let into = run_dir.join(KEPT_SUITE_DIR);
    std::fs::create_dir_all(&into).map_err(io_err("create directory", &into))?;
    let store_abs = store_root.canonicalize().ok();
    let mut entries = Vec::new();
    let walker = walkdir::WalkDir::new(suite)
        .min_depth(1)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| {
            let skipped = e.depth() == 1
                && e.file_name()
                    .to_str()
                    .is_some_and(|n| SKIPPED_AT_ROOT.contains(&n));
            let is_store = e.file_type().is_dir()
                && store_abs
                    .as_deref()
                    .is_some_and(|s| e.path().canonicalize().ok().as_deref() == Some(s));
            !skipped && !is_store
        });
    for entry in walker {
        let entry = entry.map_err(|e| StoreError::Io {
            op: "read",
            path: suite.to_path_buf(),
            source: std::io::Error::other(e),
        })?;
        let rel = entry
            .path()
            .strip_prefix(suite)
            .map_err(|e| StoreError::Io {
                op: "read",
                path: entry.path().to_path_buf(),
                source: std::io::Error::other(e),
            })?;
        // The exact name, not its lossy text: two names that decode alike are two files.
        let to = into.join(rel);
        let meta = entry
            .path()
            .symlink_metadata()
            .map_err(io_err("read", entry.path()))?;
        let ft = meta.file_type();
        if ft.is_dir() {
            std::fs::create_dir_all(&to).map_err(io_err("create directory", &to))?;
            entries.push(KeptEntry::at(rel, "dir"));
        } else if ft.is_symlink() {
            let target = std::fs::read_link(entry.path()).map_err(io_err("read", entry.path()))?;
            std::os::unix::fs::symlink(&target, &to).map_err(io_err("create", &to))?;
            entries.push(KeptEntry {
                target: Some(target.to_string_lossy().into_owned()),
                target_hex: hex_of(&target),
                ..KeptEntry::at(rel, "symlink")
            });
        } else if ft.is_file() {
            let exec = meta.permissions().mode() & 0o111 != 0;
            // Hashed and stored as streams: a large fixture is never held in memory.
            let hash = hash_file(entry.path()).map_err(io_err("read", entry.path()))?;
            let stored = store_file(store_root, &hash, exec, entry.path())?;
            if std::fs::hard_link(&stored, &to).is_err() {
                // Another file system, or links refused: a copy holds the same content.
                std::fs::copy(&stored, &to).map_err(io_err("copy", &to))?;
            }
            entries.push(KeptEntry {
                blake3: Some(hash),
                ..KeptEntry::at(rel, if exec { "exec" } else { "file" })
            });
        }
        // Sockets, fifos and devices are not suite content: not kept.
    }
    crate::store::sync_filesystem(store_root)?;
    let list = KeptSuite {
        schema_version: 1,
        source: suite.to_path_buf(),
        entries,
    };
    crate::atomic_write_json(run_dir.join(KEPT_SUITE_FILE), &list)?;
    Ok(into)
}

/// The BLAKE3 (hex) of the file at `path`, read as a stream.
fn hash_file(path: &Path) -> std::io::Result<String> {
    let mut hasher = blake3::Hasher::new();
    hasher.update_reader(std::fs::File::open(path)?)?;
    Ok(hasher.finalize().to_hex().to_string())
}

/// Stores the file at `from` (whose BLAKE3 is `hash`) in the store's content-addressed files,
/// read-only, unless it is there already; returns its path.
fn store_file(store_root: &Path, hash: &str, exec: bool, from: &Path) -> Result<PathBuf> {
    let dir = store_root
        .join(FILES_DIR)
        .join(hash.get(..2).unwrap_or("00"));
    let path = dir.join(if exec {
        format!("{hash}.x")
    } else {
        hash.to_string()
    });
    if hash_file(&path).is_ok_and(|existing| existing == hash) {
        return Ok(path);
    }
    // Absent, or damaged: written (again) with the right content.
    std::fs::create_dir_all(&dir).map_err(io_err("create directory", &dir))?;
    let mut f = crate::AtomicFile::create(&path)?;
    let mut source = std::fs::File::open(from).map_err(io_err("read", from))?;
    std::io::copy(&mut source, &mut f).map_err(io_err("write", &path))?;
    // Made durable with the rest of the kept suite, before its list is written.
    f.commit_unsynced()?;
    let mode = if exec { 0o555 } else { 0o444 };
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
        .map_err(io_err("set permissions of", &path))?;
    Ok(path)
}

/// The list (`suite.json`) of the suite kept in the folder `dir` (a run folder, or a rescore's
/// `STEM.suite`), unchecked: what each path of the suite held, to set two suites side by side.
/// `None` when `dir` keeps no suite.
pub fn kept_suite_list(dir: &Path) -> Result<Option<KeptSuite>> {
    let list_path = dir.join(KEPT_SUITE_FILE);
    let text = match std::fs::read(&list_path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err("read", &list_path)(e)),
    };
    serde_json::from_slice(&text)
        .map(Some)
        .map_err(|source| StoreError::Json {
            path: list_path,
            source,
        })
}

/// The kept suite of the run folder `run_dir` (of run `run`), checked against its list: its
/// folder, or `None` for a run that kept none (made before runs kept their suite). Fails with
/// [`StoreError::KeptSuiteDamaged`] when a file's content, kind or link target differs from the
/// list, or an entry was added or removed.
pub fn read_kept_suite(run_dir: &Path, run: &str) -> Result<Option<PathBuf>> {
    let list_path = run_dir.join(KEPT_SUITE_FILE);
    let text = match std::fs::read(&list_path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err("read", &list_path)(e)),
    };
    let damaged = |path: &str, reason: String| StoreError::KeptSuiteDamaged {
        run: run.to_string(),
        path: path.to_string(),
        reason,
    };
    let list: KeptSuite = serde_json::from_slice(&text)
        .map_err(|e| damaged(KEPT_SUITE_FILE, format!("does not parse: {e}")))?;
    let root = run_dir.join(KEPT_SUITE_DIR);
    // Keyed by exact names: two names that decode alike are two entries.
    let mut listed: std::collections::BTreeMap<Cow<'_, Path>, &KeptEntry> =
        list.entries.iter().map(|e| (e.exact_path(), e)).collect();
    for entry in walkdir::WalkDir::new(&root).min_depth(1) {
        let entry = entry.map_err(|e| damaged(".", format!("cannot be read: {e}")))?;
        let exact = entry
            .path()
            .strip_prefix(&root)
            .map_err(|e| damaged(".", e.to_string()))?;
        let rel = exact.to_string_lossy().into_owned();
        let Some(want) = listed.remove(exact) else {
            return Err(damaged(
                &rel,
                format!(
                    "was added after the run kept its suite ({KEPT_SUITE_FILE} does not list it)"
                ),
            ));
        };
        let meta = entry
            .path()
            .symlink_metadata()
            .map_err(|e| damaged(&rel, format!("cannot be read: {e}")))?;
        let ft = meta.file_type();
        let kind = if ft.is_dir() {
            "dir"
        } else if ft.is_symlink() {
            "symlink"
        } else if ft.is_file() && meta.permissions().mode() & 0o111 != 0 {
            "exec"
        } else if ft.is_file() {
            "file"
        } else {
            "other"
        };
        if kind != want.kind {
            return Err(damaged(
                &rel,
                format!("is a {kind} where the run kept a {}", want.kind),
            ));
        }
        if ft.is_symlink() {
            let target = std::fs::read_link(entry.path())
                .map_err(|e| damaged(&rel, format!("cannot be read: {e}")))?;
            if Some(target.as_path()) != want.exact_target().as_deref() {
                return Err(damaged(
                    &rel,
                    "points elsewhere than when it was kept".into(),
                ));
            }
        } else if ft.is_file() {
            let hash = hash_file(entry.path())
                .map_err(|e| damaged(&rel, format!("cannot be read: {e}")))?;
            if Some(hash.as_str()) != want.blake3.as_deref() {
                return Err(damaged(
                    &rel,
                    format!(
                        "its content changed after the run kept it (BLAKE3 {}…, kept {}…)",
                        hash.get(..12).unwrap_or_default(),
                        want.blake3
                            .as_deref()
                            .and_then(|h| h.get(..12))
                            .unwrap_or("-")
                    ),
                ));
            }
        }
    }
    if let Some(missing) = listed.keys().next() {
        return Err(damaged(
            &missing.to_string_lossy(),
            "was removed after the run kept its suite".into(),
        ));
    }
    Ok(Some(root))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn suite() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("checks")).unwrap();
        std::fs::write(dir.path().join("suite.toml"), "id = \"s\"\n").unwrap();
        std::fs::write(dir.path().join("checks/c.sh"), "true\n").unwrap();
        std::fs::set_permissions(
            dir.path().join("checks/c.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::fs::create_dir_all(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join(".git/HEAD"), "x").unwrap();
        dir
    }

    #[test]
    fn a_kept_suite_reads_back_and_outlives_its_folder() {
        let s = suite();
        let store = tempfile::tempdir().unwrap();
        let run = store.path().join("runs/r");
        std::fs::create_dir_all(&run).unwrap();
        let kept = keep_suite(store.path(), &run, s.path()).unwrap();
        drop(s);
        assert_eq!(read_kept_suite(&run, "r").unwrap(), Some(kept.clone()));
        assert_eq!(
            std::fs::read_to_string(kept.join("suite.toml")).unwrap(),
            "id = \"s\"\n"
        );
        assert!(!kept.join(".git").exists(), ".git is not kept");
        let mode = std::fs::metadata(kept.join("checks/c.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_ne!(mode & 0o111, 0, "the executable bit is kept");
    }

    #[test]
    fn a_changed_added_or_removed_file_is_named_when_read() {
        let s = suite();
        let store = tempfile::tempdir().unwrap();
        let run = store.path().join("runs/r");
        std::fs::create_dir_all(&run).unwrap();
        let kept = keep_suite(store.path(), &run, s.path()).unwrap();

        let file = kept.join("suite.toml");
        std::fs::remove_file(&file).unwrap();
        std::fs::write(&file, "id = \"other\"\n").unwrap();
        let e = read_kept_suite(&run, "r").unwrap_err().to_string();
        assert!(e.contains("suite.toml: its content changed"), "{e}");
        std::fs::remove_file(&file).unwrap();
        let e = read_kept_suite(&run, "r").unwrap_err().to_string();
        assert!(e.contains("suite.toml: was removed"), "{e}");
        std::fs::write(&file, "id = \"s\"\n").unwrap();
        assert!(read_kept_suite(&run, "r").is_ok());
        std::fs::write(kept.join("extra.sh"), "x").unwrap();
        let e = read_kept_suite(&run, "r").unwrap_err().to_string();
        assert!(e.contains("extra.sh: was added"), "{e}");
    }

    #[test]
    fn names_that_are_not_utf8_are_kept_under_their_exact_bytes() {
        use std::os::unix::ffi::OsStrExt;
        let name = |b: &[u8]| std::ffi::OsStr::from_bytes(b).to_os_string();
        let s = suite();
        let fixture = s.path().join("fixture");
        std::fs::create_dir_all(&fixture).unwrap();
        // Two names that decode alike (each bad byte is U+FFFD), and a link to one of them.
        std::fs::write(fixture.join(name(b"a\xff.txt")), "one\n").unwrap();
        std::fs::write(fixture.join(name(b"a\xfe.txt")), "two\n").unwrap();
        std::os::unix::fs::symlink(name(b"a\xfe.txt"), fixture.join("link")).unwrap();
        let store = tempfile::tempdir().unwrap();
        let run = store.path().join("runs/r");
        std::fs::create_dir_all(&run).unwrap();
        let kept = keep_suite(store.path(), &run, s.path()).unwrap();
        let read = |b: &[u8]| std::fs::read_to_string(kept.join("fixture").join(name(b))).unwrap();
        assert_eq!(read(b"a\xff.txt"), "one\n");
        assert_eq!(read(b"a\xfe.txt"), "two\n");
        assert_eq!(
            std::fs::read_link(kept.join("fixture/link")).unwrap(),
            Path::new(&name(b"a\xfe.txt"))
        );
        let list = kept_suite_list(&run).unwrap().unwrap();
        let hexes: Vec<_> = list
            .entries
            .iter()
            .filter_map(|e| e.path_hex.clone())
            .collect();
        assert_eq!(
            hexes,
            [
                "666978747572652f61fe2e747874",
                "666978747572652f61ff2e747874"
            ]
        );
        let link = list
            .entries
            .iter()
            .find(|e| e.path == "fixture/link")
            .unwrap();
        assert_eq!(link.target_hex.as_deref(), Some("61fe2e747874"));
        assert_eq!(read_kept_suite(&run, "r").unwrap(), Some(kept.clone()));
        // Either file changed is named: they are checked one by one.
        std::fs::remove_file(kept.join("fixture").join(name(b"a\xfe.txt"))).unwrap();
        let e = read_kept_suite(&run, "r").unwrap_err().to_string();
        assert!(e.contains("fixture/a\u{FFFD}.txt: was removed"), "{e}");
    }

    #[test]
    fn a_run_without_a_kept_suite_reads_as_none() {
        let run = tempfile::tempdir().unwrap();
        assert_eq!(read_kept_suite(run.path(), "r").unwrap(), None);
    }
}
