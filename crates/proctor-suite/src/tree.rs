//! Content hashes of directory trees: the fixture's tree hash and the suite's content hash.
//!
//! Both are BLAKE3 over a walk sorted by path, covering each entry's relative path, kind,
//! executable bit and content, so the same tree hashes the same on any machine.

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use walkdir::WalkDir;

/// Names skipped at the top of a suite when hashing it: proctor's own store and version control.
const SKIPPED_AT_ROOT: &[&str] = &[".git", ".proctor"];

/// BLAKE3 (hex) of a directory tree.
pub fn tree_hash(root: &Path) -> io::Result<String> {
    hash_walk(root, &[])
}

/// BLAKE3 (hex) of everything in a suite directory, except a `.git` or `.proctor` at its top.
pub fn suite_hash(root: &Path) -> io::Result<String> {
    hash_walk(root, SKIPPED_AT_ROOT)
}

/// BLAKE3 (hex) of a byte string.
pub fn bytes_hash(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

fn hash_walk(root: &Path, skipped_at_root: &[&str]) -> io::Result<String> {
    let mut hasher = blake3::Hasher::new();
    let walker = WalkDir::new(root)
        .min_depth(1)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| {
            !(e.depth() == 1
                && e.file_name()
                    .to_str()
                    .is_some_and(|n| skipped_at_root.contains(&n)))
        });
    for entry in walker {
        let entry = entry.map_err(io::Error::other)?;
        // Exact bytes, not lossy text: names that decode alike are different trees.
        let rel = entry.path().strip_prefix(root).map_err(io::Error::other)?;
        let meta = entry.path().symlink_metadata()?;
        let ft = meta.file_type();
        hasher.update(rel.as_os_str().as_bytes());
        hasher.update(b"\0");
        if ft.is_dir() {
            hasher.update(b"d\0");
        } else if ft.is_symlink() {
            hasher.update(b"l\0");
            let target = std::fs::read_link(entry.path())?;
            hasher.update(target.as_os_str().as_bytes());
            hasher.update(b"\0");
        } else if ft.is_file() {
            let exec = meta.permissions().mode() & 0o111 != 0;
            hasher.update(if exec { b"x\0" } else { b"f\0" });
            // Read as a stream: a large fixture file is never held in memory.
            let mut content = blake3::Hasher::new();
            content.update_reader(std::fs::File::open(entry.path())?)?;
            hasher.update(content.finalize().as_bytes());
        } else {
            hasher.update(b"o\0");
        }
    }
    Ok(hasher.finalize().to_hex().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_stable_and_sensitive_to_content_names_and_mode() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/a.txt"), "one").unwrap();
        let first = tree_hash(dir.path()).unwrap();
        assert_eq!(first, tree_hash(dir.path()).unwrap());

        std::fs::write(dir.path().join("sub/a.txt"), "two").unwrap();
        let changed = tree_hash(dir.path()).unwrap();
        assert_ne!(first, changed);

        let mut perm = std::fs::metadata(dir.path().join("sub/a.txt"))
            .unwrap()
            .permissions();
        perm.set_mode(0o755);
        std::fs::set_permissions(dir.path().join("sub/a.txt"), perm).unwrap();
        assert_ne!(changed, tree_hash(dir.path()).unwrap());
    }

    #[test]
    fn names_that_decode_alike_hash_apart() {
        let name = |b: &[u8]| std::ffi::OsStr::from_bytes(b).to_os_string();
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(a.path().join(name(b"x\xff")), "same").unwrap();
        std::fs::write(b.path().join(name(b"x\xfe")), "same").unwrap();
        assert_ne!(tree_hash(a.path()).unwrap(), tree_hash(b.path()).unwrap());
        // Two trees with the same UTF-8 name hash alike.
        let (c, d) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(c.path().join("é.txt"), "same").unwrap();
        std::fs::write(d.path().join("é.txt"), "same").unwrap();
        assert_eq!(tree_hash(c.path()).unwrap(), tree_hash(d.path()).unwrap());
    }

    #[test]
    fn suite_hash_ignores_the_store_at_the_top() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("suite.toml"), "x").unwrap();
        let before = suite_hash(dir.path()).unwrap();
        std::fs::create_dir(dir.path().join(".proctor")).unwrap();
        std::fs::write(dir.path().join(".proctor/index"), "y").unwrap();
        assert_eq!(before, suite_hash(dir.path()).unwrap());
    }
}
