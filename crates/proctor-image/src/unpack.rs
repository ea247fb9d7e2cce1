//! Unpacking layers, bottom first, into one root folder, with the OCI's whiteouts.
//!
//! - `.wh.NAME` deletes `NAME` of the lower layers; `.wh..wh..opq` empties its folder of the
//!   lower layers' content (wherever in the layer it comes). Other `.wh..wh.*` entries (AUFS
//!   bookkeeping) are ignored.
//! - Regular files, folders, symbolic links and hard links (to a file already in the image) are
//!   made; character and block devices and FIFOs are skipped and counted (tar cannot hold
//!   sockets).
//! - Ownership is **not** applied: the unpacking user owns everything. Permission bits and the
//!   sticky bit are kept; setuid and setgid are dropped. Modification times of files and
//!   folders are kept. Extended attributes (file capabilities among them) are dropped.
//! - No entry is ever written outside the root: a path with a `..` component is refused, and
//!   the folders of a path are looked up inside the root, an absolute symbolic link being taken
//!   relative to the root (as in a `chroot`). A path that would leave the root through a symbolic
//!   link is refused too. Both are [`ImageError::BadLayer`].
//! - Folders stay writable while layers are unpacked; their own modes are set at the end, so a
//!   read-only folder may be left behind: removing an image restores write permission first
//!   ([`remove_tree`]).

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::ffi::{OsStr, OsString};
use std::fs::{self, File, FileTimes, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::{ImageError, IoContext, Result};
use crate::zstd::ZstdReader;

/// Layer media types of uncompressed tars.
const TAR_TYPES: [&str; 3] = [
    "application/vnd.oci.image.layer.v1.tar",
    "application/vnd.oci.image.layer.nondistributable.v1.tar",
    "application/vnd.docker.image.rootfs.diff.tar",
];
/// Layer media types of gzip-compressed tars.
const GZIP_TYPES: [&str; 4] = [
    "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
    "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
];
/// Layer media types of zstd-compressed tars.
const ZSTD_TYPES: [&str; 2] = [
    "application/vnd.oci.image.layer.v1.tar+zstd",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
];

/// Symbolic links followed while looking up one path, at most (as Linux's `ELOOP`).
const MAX_SYMLINK_HOPS: u32 = 40;

/// Checks that a layer's media type is one that can be unpacked.
pub(crate) fn check_layer_media_type(media_type: &str, layer: &str) -> Result<()> {
    let known = media_type.is_empty()
        || TAR_TYPES.contains(&media_type)
        || GZIP_TYPES.contains(&media_type)
        || ZSTD_TYPES.contains(&media_type);
    if known {
        Ok(())
    } else {
        Err(ImageError::UnsupportedMediaType {
            media_type: media_type.to_string(),
            what: format!("layer {layer}"),
            supported: "layers that are tar, tar+gzip or tar+zstd".to_string(),
        })
    }
}

/// What unpacking an image did: the entries made and the entries skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct UnpackStats {
    /// Regular files written (each layer's copy counted).
    pub files: u64,
    /// Folder entries.
    pub directories: u64,
    /// Symbolic links made.
    pub symlinks: u64,
    /// Hard links made.
    pub hard_links: u64,
    /// Whiteouts applied (`.wh.NAME` and opaque markers).
    pub whiteouts: u64,
    /// Character and block device entries skipped.
    pub skipped_devices: u64,
    /// FIFO entries skipped.
    pub skipped_fifos: u64,
    /// Entries of other kinds skipped (unknown tar entry types).
    pub skipped_other: u64,
    /// Bytes of regular file content written.
    pub bytes: u64,
}

/// A folder's mode and modification time, set when every layer is unpacked.
#[derive(Debug, Clone, Copy)]
struct DirMeta {
    mode: u32,
    mtime: Option<u64>,
}

/// Unpacks layers, bottom first, into `root`; [`Unpacker::finish`] sets the folders' modes.
pub(crate) struct Unpacker {
    root: PathBuf,
    dirs: BTreeMap<PathBuf, DirMeta>,
    stats: UnpackStats,
}

/// The layer being unpacked: its digest (for errors) and the paths it wrote (with their
/// folders), which its whiteouts do not delete.
struct Layer<'a> {
    digest: &'a str,
    written: HashSet<PathBuf>,
}

impl Layer<'_> {
    fn bad(&self, entry: &str, problem: impl Into<String>) -> ImageError {
        ImageError::BadLayer {
            layer: self.digest.to_string(),
            entry: entry.to_string(),
            problem: problem.into(),
        }
    }

    /// Records that this layer wrote `rel`, and so touched each of its folders.
    fn wrote(&mut self, rel: &Path) {
        let mut path = Some(rel);
        while let Some(p) = path.filter(|p| !p.as_os_str().is_empty()) {
            if !self.written.insert(p.to_path_buf()) {
                break;
            }
            path = p.parent();
        }
    }
}

impl Unpacker {
    /// An unpacker into `root`, which must exist.
    pub(crate) fn new(root: PathBuf) -> Unpacker {
        Unpacker {
            root,
            dirs: BTreeMap::new(),
            stats: UnpackStats::default(),
        }
    }

    /// Unpacks one layer blob (`media_type` is checked, the compression is detected).
    pub(crate) fn layer(&mut self, digest: &str, media_type: &str, blob: &Path) -> Result<()> {
        check_layer_media_type(media_type, digest)?;
        let file = File::open(blob).ctx("opening", blob)?;
        let mut reader = BufReader::with_capacity(1 << 16, file);
        let head = reader.fill_buf().ctx("reading", blob)?;
        let stream: Box<dyn Read> = if head.starts_with(&[0x1f, 0x8b]) {
            Box::new(flate2::bufread::MultiGzDecoder::new(reader))
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Box::new(ZstdReader::new(reader))
        } else {
            Box::new(reader)
        };
        let mut layer = Layer {
            digest,
            written: HashSet::new(),
        };
        let mut archive = tar::Archive::new(stream);
        let entries = archive
            .entries()
            .map_err(|e| layer.bad("(start of the layer)", e.to_string()))?;
        for entry in entries {
            let mut entry = entry.map_err(|e| layer.bad("(reading the layer)", e.to_string()))?;
            self.entry(&mut entry, &mut layer)?;
        }
        Ok(())
    }

    /// Sets every folder's mode and time, deepest first, and gives what was unpacked.
    pub(crate) fn finish(self) -> Result<UnpackStats> {
        for (rel, meta) in self.dirs.iter().rev() {
            let abs = self.root.join(rel);
            match fs::symlink_metadata(&abs) {
                Ok(m) if m.is_dir() => {}
                _ => continue,
            }
            if let Some(mtime) = meta.mtime {
                let dir = File::open(&abs).ctx("opening", &abs)?;
                dir.set_times(
                    FileTimes::new().set_modified(UNIX_EPOCH + Duration::from_secs(mtime)),
                )
                .ctx("setting the time of", &abs)?;
            }
            fs::set_permissions(&abs, fs::Permissions::from_mode(meta.mode))
                .ctx("setting the mode of", &abs)?;
        }
        Ok(self.stats)
    }

    /// Unpacks one entry of `layer` into the root.
    fn entry<R: Read>(
        &mut self,
        entry: &mut tar::Entry<'_, R>,
        layer: &mut Layer<'_>,
    ) -> Result<()> {
        let raw = entry
            .path()
            .map_err(|e| layer.bad("(unreadable path)", e.to_string()))?
            .into_owned();
        let name = raw.display().to_string();
        let kind = entry.header().entry_type();
        if self.skipped(kind) {
            return Ok(());
        }
        let components = normalize(&raw).map_err(|problem| layer.bad(&name, problem))?;
        let Some((file_name, parents)) = components.split_last() else {
            // The root folder itself: its mode stays that of the image's root folder.
            return Ok(());
        };
        let mode = entry
            .header()
            .mode()
            .map_err(|e| layer.bad(&name, e.to_string()))?
            & 0o1777;
        let mtime = entry.header().mtime().ok();

        if let Some(whited) = file_name.as_bytes().strip_prefix(b".wh.") {
            return self.whiteout(whited, parents, layer, &name);
        }

        let parent = self
            .resolve_dir(parents, true, layer, &name)?
            .ok_or_else(|| layer.bad(&name, "its folder could not be made"))?;
        let rel = parent.join(file_name);
        let abs = self.root.join(&rel);
        match kind {
            tar::EntryType::Directory => self.directory(&rel, DirMeta { mode, mtime })?,
            tar::EntryType::Regular | tar::EntryType::Continuous | tar::EntryType::GNUSparse => {
                self.remove(&rel)?;
                let written = write_file(entry, &abs, mode, mtime, layer, &name)?;
                self.stats.files += 1;
                self.stats.bytes += written;
            }
            tar::EntryType::Symlink => {
                let target = link_name(entry, layer, &name)?;
                self.remove(&rel)?;
                std::os::unix::fs::symlink(&target, &abs).ctx("making the symbolic link", &abs)?;
                self.stats.symlinks += 1;
            }
            tar::EntryType::Link => {
                let target = link_name(entry, layer, &name)?;
                self.hard_link(&target, &rel, layer, &name)?;
            }
            _ => {
                self.stats.skipped_other += 1;
                return Ok(());
            }
        }
        layer.wrote(&rel);
        Ok(())
    }

    /// Whether an entry of type `kind` makes nothing in the root (tar's own extension headers,
    /// devices, FIFOs); skipped devices and FIFOs are counted.
    fn skipped(&mut self, kind: tar::EntryType) -> bool {
        match kind {
            tar::EntryType::XGlobalHeader
            | tar::EntryType::XHeader
            | tar::EntryType::GNULongName
            | tar::EntryType::GNULongLink => true,
            tar::EntryType::Char | tar::EntryType::Block => {
                self.stats.skipped_devices += 1;
                true
            }
            tar::EntryType::Fifo => {
                self.stats.skipped_fifos += 1;
                true
            }
            _ => false,
        }
    }

    /// Applies the whiteout entry `name`, `.wh.` followed by `whited`, in the folder at
    /// `parents`: deletes what the lower layers have there.
    fn whiteout(
        &mut self,
        whited: &[u8],
        parents: &[OsString],
        layer: &Layer<'_>,
        name: &str,
    ) -> Result<()> {
        let Some(parent) = self.resolve_dir(parents, false, layer, name)? else {
            return Ok(()); // nothing below to delete
        };
        if whited == b".wh..opq" {
            self.opaque(&parent, layer)?;
            self.stats.whiteouts += 1;
        } else if !whited.starts_with(b".wh.") && !whited.is_empty() {
            let target = parent.join(OsStr::from_bytes(whited));
            if !layer.written.contains(&target) {
                self.remove(&target)?;
            }
            self.stats.whiteouts += 1;
        }
        Ok(())
    }

    /// Makes the folder at `rel` (in place of anything else there), to be given `meta` when
    /// every layer is unpacked.
    fn directory(&mut self, rel: &Path, meta: DirMeta) -> Result<()> {
        let abs = self.root.join(rel);
        match fs::symlink_metadata(&abs) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                self.remove(rel)?;
                make_dir(&abs)?;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => make_dir(&abs)?,
            Err(e) => return Err(ImageError::io("inspecting", abs, e)),
        }
        self.dirs.insert(rel.to_path_buf(), meta);
        self.stats.directories += 1;
        Ok(())
    }

    /// Makes the hard link entry `name` at `rel`, to `target`, a file already in the image.
    fn hard_link(
        &mut self,
        target: &Path,
        rel: &Path,
        layer: &Layer<'_>,
        name: &str,
    ) -> Result<()> {
        let target_rel = self.hard_link_target(target, layer, name)?;
        if target_rel == rel {
            return Err(layer.bad(name, "a hard link to itself"));
        }
        let target_abs = self.root.join(&target_rel);
        let abs = self.root.join(rel);
        self.remove(rel)?;
        fs::hard_link(&target_abs, &abs).ctx("making the hard link", &abs)?;
        self.stats.hard_links += 1;
        Ok(())
    }

    /// Where the hard link entry `name` points, relative to the root: `target` must be a file
    /// (not a folder) already in the image.
    fn hard_link_target(
        &mut self,
        target: &Path,
        layer: &Layer<'_>,
        name: &str,
    ) -> Result<PathBuf> {
        let target_components = normalize(target).map_err(|problem| {
            layer.bad(
                name,
                format!("hard link target `{}`: {problem}", target.display()),
            )
        })?;
        let target_rel = self.resolve_existing(&target_components, layer, name)?;
        match fs::symlink_metadata(self.root.join(&target_rel)) {
            Ok(m) if m.is_dir() => Err(layer.bad(
                name,
                format!("hard link target `{}` is a folder", target.display()),
            )),
            Ok(_) => Ok(target_rel),
            Err(_) => Err(layer.bad(
                name,
                format!(
                    "hard link target `{}` is not in the image",
                    target.display()
                ),
            )),
        }
    }

    /// The folder at `components` inside the root, following symbolic links inside the root,
    /// as a path relative to the root. Missing folders are made when `create`, else `None`.
    fn resolve_dir(
        &mut self,
        components: &[OsString],
        create: bool,
        layer: &Layer<'_>,
        entry: &str,
    ) -> Result<Option<PathBuf>> {
        let mut resolved: Vec<OsString> = Vec::new();
        let mut pending: VecDeque<OsString> = components.iter().cloned().collect();
        let mut hops = 0;
        while let Some(component) = pending.pop_front() {
            if component == "." || component.is_empty() {
                continue;
            }
            if component == ".." {
                if resolved.pop().is_none() {
                    return Err(layer.bad(
                        entry,
                        "its path leaves the image's root through a symbolic link",
                    ));
                }
                continue;
            }
            let rel: PathBuf = resolved.iter().chain(Some(&component)).collect();
            let abs = self.root.join(&rel);
            match fs::symlink_metadata(&abs) {
                Ok(m) if m.file_type().is_symlink() => {
                    hops += 1;
                    if hops > MAX_SYMLINK_HOPS {
                        return Err(layer.bad(entry, "too many levels of symbolic links"));
                    }
                    let target = fs::read_link(&abs).ctx("reading the symbolic link", &abs)?;
                    if target.is_absolute() {
                        resolved.clear();
                    }
                    for part in target.components().rev() {
                        match part {
                            Component::Normal(s) => pending.push_front(s.to_os_string()),
                            Component::ParentDir => pending.push_front("..".into()),
                            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
                        }
                    }
                }
                Ok(m) if m.is_dir() => resolved.push(component),
                Ok(_) => {
                    return Err(layer.bad(
                        entry,
                        format!("`{}` is in its path but is not a folder", rel.display()),
                    ))
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    if !create {
                        return Ok(None);
                    }
                    make_dir(&abs)?;
                    self.dirs.insert(
                        rel,
                        DirMeta {
                            mode: 0o755,
                            mtime: None,
                        },
                    );
                    resolved.push(component);
                }
                Err(e) => return Err(ImageError::io("inspecting", abs, e)),
            }
        }
        Ok(Some(resolved.iter().collect()))
    }

    /// The path of an existing entry (its folders resolved inside the root, itself not
    /// followed), relative to the root.
    fn resolve_existing(
        &mut self,
        components: &[OsString],
        layer: &Layer<'_>,
        entry: &str,
    ) -> Result<PathBuf> {
        let missing = || layer.bad(entry, "its hard link target is not in the image");
        let (last, parents) = components.split_last().ok_or_else(missing)?;
        let parent = self
            .resolve_dir(parents, false, layer, entry)?
            .ok_or_else(missing)?;
        Ok(parent.join(last))
    }

    /// Deletes the lower layers' content of folder `dir`: everything in it this layer did not
    /// write.
    fn opaque(&mut self, dir: &Path, layer: &Layer<'_>) -> Result<()> {
        let abs = self.root.join(dir);
        let mut children = Vec::new();
        for child in fs::read_dir(&abs).ctx("reading", &abs)? {
            children.push(child.ctx("reading", &abs)?.file_name());
        }
        for name in children {
            let rel = dir.join(&name);
            if layer.written.contains(&rel) {
                let is_dir = fs::symlink_metadata(self.root.join(&rel))
                    .map(|m| m.is_dir())
                    .unwrap_or(false);
                if is_dir {
                    self.opaque(&rel, layer)?;
                }
            } else {
                self.remove(&rel)?;
            }
        }
        Ok(())
    }

    /// Removes whatever is at `rel` (a folder with its content; a link itself, not its target).
    fn remove(&mut self, rel: &Path) -> Result<()> {
        let abs = self.root.join(rel);
        match fs::symlink_metadata(&abs) {
            Ok(m) if m.is_dir() => {
                fs::remove_dir_all(&abs).ctx("removing", &abs)?;
                let gone: Vec<PathBuf> = self
                    .dirs
                    .range(rel.to_path_buf()..)
                    .take_while(|(k, _)| k.starts_with(rel))
                    .map(|(k, _)| k.clone())
                    .collect();
                for key in gone {
                    self.dirs.remove(&key);
                }
                Ok(())
            }
            Ok(_) => fs::remove_file(&abs).ctx("removing", &abs),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(ImageError::io("inspecting", abs, e)),
        }
    }
}

/// The normal components of an entry path (a leading `/` and `.` dropped); `..` is refused.
fn normalize(path: &Path) -> Result<Vec<OsString>, String> {
    let mut out = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(s) => out.push(s.to_os_string()),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                return Err("its path has a `..` component (it could leave the root)".into())
            }
        }
    }
    Ok(out)
}

/// The target of a link entry.
fn link_name<R: Read>(entry: &tar::Entry<'_, R>, layer: &Layer<'_>, name: &str) -> Result<PathBuf> {
    match entry.link_name() {
        Ok(Some(target)) if !target.as_os_str().is_empty() => Ok(target.into_owned()),
        Ok(_) => Err(layer.bad(name, "a link without a target")),
        Err(e) => Err(layer.bad(name, format!("unreadable link target: {e}"))),
    }
}

/// Makes one folder, writable by its owner while layers are unpacked.
fn make_dir(abs: &Path) -> Result<()> {
    fs::DirBuilder::new()
        .mode(0o755)
        .create(abs)
        .ctx("making the folder", abs)
}

/// Writes a regular file's content (it does not exist yet) with its mode and time.
fn write_file<R: Read>(
    entry: &mut tar::Entry<'_, R>,
    abs: &Path,
    mode: u32,
    mtime: Option<u64>,
    layer: &Layer<'_>,
    name: &str,
) -> Result<u64> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(abs)
        .ctx("creating", abs)?;
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    loop {
        let n = match entry.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(layer.bad(name, format!("reading its content: {e}"))),
        };
        file.write_all(&buf[..n]).ctx("writing", abs)?;
        total += n as u64;
    }
    if let Some(mtime) = mtime {
        file.set_times(FileTimes::new().set_modified(UNIX_EPOCH + Duration::from_secs(mtime)))
            .ctx("setting the time of", abs)?;
    }
    file.set_permissions(fs::Permissions::from_mode(mode))
        .ctx("setting the mode of", abs)?;
    Ok(total)
}

/// Removes a folder tree that may hold folders without write permission (an unpacked root),
/// giving each folder write permission before emptying it. A missing path is not an error.
pub(crate) fn remove_tree(path: &Path) -> Result<()> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(ImageError::io("inspecting", path, e)),
        Ok(m) if !m.is_dir() => return fs::remove_file(path).ctx("removing", path),
        Ok(_) => {}
    }
    if fs::remove_dir_all(path).is_ok() {
        return Ok(());
    }
    make_writable(path)?;
    fs::remove_dir_all(path).ctx("removing", path)
}

/// Gives `dir` and every folder under it owner read, write and search permission.
fn make_writable(dir: &Path) -> Result<()> {
    let meta = fs::symlink_metadata(dir).ctx("inspecting", dir)?;
    if !meta.is_dir() {
        return Ok(());
    }
    let mode = meta.permissions().mode();
    if mode & 0o700 != 0o700 {
        fs::set_permissions(dir, fs::Permissions::from_mode(mode | 0o700))
            .ctx("making writable", dir)?;
    }
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(ImageError::io("reading", dir, e)),
    };
    for child in entries {
        let child = child.ctx("reading", dir)?;
        if child.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            make_writable(&child.path())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_drops_root_and_dots_and_refuses_parent() {
        assert_eq!(
            normalize(Path::new("/./a/b/")).unwrap(),
            vec![OsString::from("a"), OsString::from("b")]
        );
        assert!(normalize(Path::new("")).unwrap().is_empty());
        assert!(normalize(Path::new("a/../b")).is_err());
        assert!(normalize(Path::new("../x")).is_err());
    }

    #[test]
    fn media_types() {
        assert!(check_layer_media_type("application/vnd.oci.image.layer.v1.tar+gzip", "l").is_ok());
        assert!(check_layer_media_type("application/vnd.oci.image.layer.v1.tar+zstd", "l").is_ok());
        assert!(
            check_layer_media_type("application/vnd.docker.image.rootfs.diff.tar.gzip", "l")
                .is_ok()
        );
        let e = check_layer_media_type("application/vnd.oci.image.layer.v1.tar+bzip2", "l")
            .unwrap_err();
        assert!(matches!(e, ImageError::UnsupportedMediaType { .. }));
    }

    #[test]
    fn remove_tree_handles_read_only_folders() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().join("t");
        fs::create_dir_all(top.join("a/b")).unwrap();
        fs::write(top.join("a/b/f"), "x").unwrap();
        fs::set_permissions(top.join("a/b"), fs::Permissions::from_mode(0o555)).unwrap();
        fs::set_permissions(top.join("a"), fs::Permissions::from_mode(0o000)).unwrap();
        remove_tree(&top).unwrap();
        assert!(!top.exists());
        remove_tree(&top).unwrap();
    }
}
