//! The end state of a workspace: what the agent added, changed, re-moded or deleted.
//!
//! - Overlay mode: [`overlay_changes`] reads only the upper layer (O(changed files)), comparing
//!   each entry with the same path in the lower layers. It walks a lower directory only where the
//!   agent deleted it (to list what was deleted) or made it opaque.
//! - Copy mode: [`Manifest::build`] records the starting copy, [`manifest_changes`] compares the
//!   end state with it.
//!
//! Both take the "laid-in" files: files the caller copied into the workspace before the agent
//! started (a variant's `SKILL.md`). Their baseline is the laid-in content, so laying them in is
//! not a change, but an agent that edits or deletes one did change something.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::{CStr, OsString};
use std::fs::{self, Metadata};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::sys;

/// What kind of file system entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

/// What happened to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// Did not exist at the start.
    Added,
    /// Content changed: a file's bytes, a symlink's target, or the entry's kind.
    Modified,
    /// Same content, different permission bits.
    ModeChanged,
    /// Existed at the start, gone at the end.
    Deleted,
}

/// One change in the workspace, relative to its start.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Change {
    /// Path relative to the workspace root.
    pub path: PathBuf,
    /// What happened.
    pub kind: ChangeKind,
    /// The entry's kind at the end (at the start, for a deletion).
    pub entry: EntryKind,
    /// Permission bits at the start (`None` when added).
    pub mode_before: Option<u32>,
    /// Permission bits at the end (`None` when deleted).
    pub mode_after: Option<u32>,
}

/// A file the caller laid into the workspace before the agent started, with the BLAKE3 hash
/// (hex) of the content it laid in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaidIn {
    /// Path relative to the workspace root.
    pub path: PathBuf,
    /// BLAKE3 of the laid-in content, lowercase hex.
    pub blake3: String,
}

/// Why a diff could not be computed.
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    /// Reading a file or directory failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path being read.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// A laid-in path is absolute or escapes the workspace.
    #[error("laid-in path {0} must be relative and stay inside the workspace")]
    BadLaidIn(PathBuf),
}

/// An entry of the end state that the diff could not read (a folder it could not list, an
/// entry it could not open; a path of any length is read, by open folders): it is reported as added, without looking below it, and named here with
/// the cause, so that what the agent made never vanishes from its end state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unread {
    /// Path relative to the workspace root.
    pub path: PathBuf,
    /// The system's error.
    pub cause: String,
}

/// The changes of a workspace, with what could not be read of it, and the entries whose
/// permissions were opened up (for this user to read them) until the value is dropped.
#[derive(Debug, Default)]
pub struct Diff {
    /// The changes, sorted by path; every unread entry is among them (as added, unless it was
    /// seen to be something else first).
    pub changes: Vec<Change>,
    /// What could not be read, in the order met.
    pub unread: Vec<Unread>,
    /// Entries of the end state given read access for the capture; their modes are put back
    /// when this is dropped.
    pub reopened: Reopened,
}

/// Entries whose modes were widened so that this user can read them (an agent's folder of mode
/// 000): each is given its own mode back, deepest first, when this is dropped (by its path
/// below its tree's root, of any length).
#[derive(Debug, Default)]
pub struct Reopened(Vec<(PathBuf, PathBuf, u32)>);

impl Reopened {
    /// Gives `full` (`rel` below `root`, now of mode `mode`) the access bits `add` for its
    /// owner, to be put back.
    fn open(
        &mut self,
        (root, rel, full): (&Path, &Path, &Path),
        mode: u32,
        add: u32,
    ) -> Result<(), DiffError> {
        use std::os::unix::fs::PermissionsExt;
        if mode & add == add {
            return Ok(());
        }
        fs::set_permissions(full, fs::Permissions::from_mode(mode | add)).map_err(io_err(rel))?;
        self.0.push((root.to_owned(), rel.to_owned(), mode));
        Ok(())
    }
}

impl Drop for Reopened {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt;
        let mut deep: Option<proctor_fs::Deep> = None;
        for (root, rel, mode) in self.0.drain(..).rev() {
            if deep.as_ref().is_none_or(|d| d.root() != root) {
                deep = proctor_fs::Deep::open(&root).ok();
            }
            if let Some(path) = deep.as_mut().and_then(|d| d.reach(&rel).ok()) {
                let _ = fs::set_permissions(&*path, fs::Permissions::from_mode(mode));
            }
        }
    }
}

/// The system's error behind a diff error, without the (possibly very long) path.
fn cause(e: &DiffError) -> String {
    match e {
        DiffError::Io { source, .. } => source.to_string(),
        other => other.to_string(),
    }
}

/// What a walk met that it could not read, and what it opened up.
#[derive(Default)]
struct Noted {
    unread: Vec<Unread>,
    reopened: Reopened,
    /// The paths of the walk's changes so far: its first `reported.1` changes, indexed as the
    /// walk meets what it cannot read (an agent can leave hundreds of thousands of both, so
    /// no change list is scanned per entry).
    reported: (HashSet<PathBuf>, usize),
}

impl Noted {
    /// Notes that `rel` could not be read for `e`, reporting it as added unless a change was
    /// already reported for it.
    fn unread(&mut self, rel: &Path, is_dir: bool, e: &DiffError, out: &mut Vec<Change>) {
        let (reported, indexed) = &mut self.reported;
        for c in out.get(*indexed..).unwrap_or_default() {
            reported.insert(c.path.clone());
        }
        *indexed = out.len();
        if !reported.contains(rel) {
            out.push(Change {
                path: rel.to_owned(),
                kind: ChangeKind::Added,
                entry: if is_dir {
                    EntryKind::Dir
                } else {
                    EntryKind::Other
                },
                mode_before: None,
                mode_after: None,
            });
        }
        self.unread.push(Unread {
            path: rel.to_owned(),
            cause: cause(e),
        });
    }
}

/// A strict result from a [`Diff`]: its changes, or its first unread entry as an error.
fn strict(d: Diff) -> Result<Vec<Change>, DiffError> {
    match d.unread.first() {
        Some(u) => Err(DiffError::Io {
            path: u.path.clone(),
            source: io::Error::other(u.cause.clone()),
        }),
        None => Ok(d.changes.clone()),
    }
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> DiffError + '_ {
    move |source| DiffError::Io {
        path: path.to_owned(),
        source,
    }
}

/// BLAKE3 of a file's content, lowercase hex.
pub fn hash_file(path: &Path) -> Result<String, DiffError> {
    let mut h = blake3::Hasher::new();
    let mut f = fs::File::open(path).map_err(io_err(path))?;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = f.read(&mut buf).map_err(io_err(path))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().to_hex().to_string())
}

fn kind_of(m: &Metadata) -> EntryKind {
    let ft = m.file_type();
    if ft.is_file() {
        EntryKind::File
    } else if ft.is_dir() {
        EntryKind::Dir
    } else if ft.is_symlink() {
        EntryKind::Symlink
    } else {
        EntryKind::Other
    }
}

fn mode_of(m: &Metadata) -> u32 {
    m.mode() & 0o7777
}

/// The real mode of an upper-layer entry: the one the trial's disk kept in
/// [`crate::copy::MODE_XATTR`] when it cleared the entry's special bits, else its own.
fn upper_mode_of(path: &Path, m: &Metadata) -> u32 {
    match sys::lgetxattr(path, crate::copy::MODE_XATTR) {
        Ok(Some(v)) => std::str::from_utf8(&v)
            .ok()
            .and_then(|t| t.parse::<u32>().ok())
            .map_or_else(|| mode_of(m), |mode| mode & 0o7777),
        _ => mode_of(m),
    }
}

fn is_whiteout(m: &Metadata) -> bool {
    m.file_type().is_char_device() && m.rdev() == 0
}

fn xattr_is(path: &Path, name: &CStr, value: &[u8]) -> bool {
    matches!(sys::lgetxattr(path, name), Ok(Some(v)) if v == value)
}

/// An opaque directory (`overlay.opaque = "y"`, user or trusted namespace).
fn is_opaque(path: &Path) -> bool {
    xattr_is(path, c"user.overlay.opaque", b"y") || xattr_is(path, c"trusted.overlay.opaque", b"y")
}

/// A metacopy upper file: only metadata was copied up; the data is still the lower's.
fn is_metacopy(path: &Path) -> bool {
    matches!(sys::lgetxattr(path, c"user.overlay.metacopy"), Ok(Some(_)))
        || matches!(
            sys::lgetxattr(path, c"trusted.overlay.metacopy"),
            Ok(Some(_))
        )
}

/// Whether a lookup failed because what it looked for is not there (a missing entry, or one
/// on the way that is not a folder, or is a link).
fn is_missing(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound
        || matches!(e.raw_os_error(), Some(libc::ENOTDIR | libc::ELOOP))
}

fn lstat(path: &Path) -> Result<Option<Metadata>, DiffError> {
    match fs::symlink_metadata(path) {
        Ok(m) => Ok(Some(m)),
        Err(e)
            if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENOTDIR) =>
        {
            Ok(None)
        }
        Err(e) => Err(DiffError::Io {
            path: path.to_owned(),
            source: e,
        }),
    }
}

/// Byte-for-byte equality of two files of the same size.
fn same_content(a: &Path, b: &Path) -> Result<bool, DiffError> {
    let mut fa = fs::File::open(a).map_err(io_err(a))?;
    let mut fb = fs::File::open(b).map_err(io_err(b))?;
    let mut ba = vec![0u8; 64 * 1024];
    let mut bb = vec![0u8; 64 * 1024];
    loop {
        let na = read_full(&mut fa, &mut ba).map_err(io_err(a))?;
        let nb = read_full(&mut fb, &mut bb).map_err(io_err(b))?;
        if na != nb || ba[..na] != bb[..nb] {
            return Ok(false);
        }
        if na == 0 {
            return Ok(true);
        }
    }
}

fn read_full(f: &mut fs::File, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match f.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Laid-in files by path, and the directories that hold them (which may have been created only
/// to hold them, so their appearance is not a change either).
struct Laid {
    files: HashMap<PathBuf, String>,
    dirs: HashSet<PathBuf>,
}

impl Laid {
    fn new(laid_in: &[LaidIn]) -> Result<Laid, DiffError> {
        let mut files = HashMap::new();
        let mut dirs = HashSet::new();
        for l in laid_in {
            let ok = !l.path.as_os_str().is_empty()
                && l.path
                    .components()
                    .all(|c| matches!(c, std::path::Component::Normal(_)));
            if !ok {
                return Err(DiffError::BadLaidIn(l.path.clone()));
            }
            files.insert(l.path.clone(), l.blake3.to_ascii_lowercase());
            let mut p = l.path.parent();
            while let Some(d) = p {
                if d.as_os_str().is_empty() {
                    break;
                }
                dirs.insert(d.to_owned());
                p = d.parent();
            }
        }
        Ok(Laid { files, dirs })
    }

    /// The change (if any) for laid-in path `rel`, whose end-state entry is `end` at `full`.
    fn compare(
        &self,
        rel: &Path,
        hash: &str,
        full: &Path,
        end: Option<&Metadata>,
    ) -> Result<Option<Change>, DiffError> {
        let Some(m) = end else {
            return Ok(Some(Change {
                path: rel.to_owned(),
                kind: ChangeKind::Deleted,
                entry: EntryKind::File,
                mode_before: None,
                mode_after: None,
            }));
        };
        if m.is_file() && hash_file(full)? == hash {
            return Ok(None);
        }
        Ok(Some(Change {
            path: rel.to_owned(),
            kind: ChangeKind::Modified,
            entry: kind_of(m),
            mode_before: None,
            mode_after: Some(mode_of(m)),
        }))
    }
}

fn finish(mut out: Vec<Change>) -> Vec<Change> {
    // In `Path`'s order, compared by blocks of bytes: a tree 10,000 levels deep makes paths of
    // 20 KB that share all but their ends.
    out.sort_by(|a, b| proctor_fs::rel::cmp_paths(&a.path, &b.path).then(a.kind.cmp(&b.kind)));
    // Byte equality (the paths are made by joining names): `Path`'s own compares component by
    // component from the end, which costs a whole path's depth for `d/d/.../d` beside
    // `d/d/.../d/d`, in a tree of 10,000 levels on every entry.
    out.dedup_by(|a, b| a.path.as_os_str() == b.path.as_os_str());
    out
}

// ---------------------------------------------------------------------------------------------
// Overlay mode
// ---------------------------------------------------------------------------------------------

/// The changes an agent made through an overlay, read from its `upper` layer and compared with
/// the `lowers` (top first). Reads O(changed entries); a lower directory is listed only where it
/// was deleted or made opaque.
///
/// Whiteouts (character device 0:0) are deletions; an opaque directory (`overlay.opaque = "y"`
/// in the `user.` or `trusted.` xattr namespace) deleted everything of the lower directory it
/// does not itself contain. A file copied up but left with the same bytes and mode is no change.
/// Directories are reported when added, deleted or re-moded, never merely for holding changes.
///
/// Any entry it cannot read is an error: [`overlay_diff`] reads past them.
pub fn overlay_changes(
    upper: &Path,
    lowers: &[PathBuf],
    laid_in: &[LaidIn],
) -> Result<Vec<Change>, DiffError> {
    strict(overlay_diff(upper, lowers, laid_in)?)
}

/// [`overlay_changes`] over an upper layer an agent made, read by open folders (a path of any
/// length, past PATH_MAX too, is read): an entry that cannot be read (a folder it cannot list)
/// is reported as added and noted as unread, and the
/// rest is read; entries this user may not read (mode 000) are opened up until the returned
/// [`Diff`] is dropped. Only an upper layer that cannot be listed at all is an error.
pub fn overlay_diff(
    upper: &Path,
    lowers: &[PathBuf],
    laid_in: &[LaidIn],
) -> Result<Diff, DiffError> {
    let laid = Laid::new(laid_in)?;
    let ov = Overlay::new(upper, lowers)?;
    let mut out = Vec::new();
    let mut noted = Noted::default();
    ov.walk_upper(Path::new(""), &laid, &mut out, &mut noted)?;
    // Laid-in files with no upper entry: deleted (no lower had them, so no whiteout was needed),
    // or hidden by a whiteout/opaque directory above them.
    for (rel, hash) in &laid.files {
        if lstat(&upper.join(rel))?.is_some() {
            continue; // compared during the walk
        }
        let end = ov.merged_lower(rel)?;
        let full = end
            .as_ref()
            .map(|(p, _)| p.to_path_buf())
            .unwrap_or_default();
        if let Some(c) = laid.compare(rel, hash, &full, end.as_ref().map(|(_, m)| m))? {
            out.push(c);
        }
    }
    Ok(Diff {
        changes: finish(out),
        unread: noted.unread,
        reopened: noted.reopened,
    })
}

/// The layers of an overlay, each read by paths of any length ([`proctor_fs::Deep`]).
struct Overlay<'a> {
    upper: &'a Path,
    lowers: &'a [PathBuf],
    up: RefCell<proctor_fs::Deep>,
    low: Vec<RefCell<Option<proctor_fs::Deep>>>,
}

impl<'a> Overlay<'a> {
    fn new(upper: &'a Path, lowers: &'a [PathBuf]) -> Result<Overlay<'a>, DiffError> {
        Ok(Overlay {
            upper,
            lowers,
            up: RefCell::new(proctor_fs::Deep::open(upper).map_err(io_err(upper))?),
            // (A lower layer that cannot be opened has nothing: as a missing path.)
            low: lowers
                .iter()
                .map(|l| RefCell::new(proctor_fs::Deep::open(l).ok()))
                .collect(),
        })
    }

    /// A path the system takes for `rel` in the upper layer, whatever its length.
    fn upper_at(&self, rel: &Path) -> Result<proctor_fs::Reached, DiffError> {
        self.up.borrow_mut().reach(rel).map_err(io_err(rel))
    }

    /// A path for `rel` in lower layer `i`; `None` where a folder on the way is missing (or is
    /// not a folder).
    fn lower_at(&self, i: usize, rel: &Path) -> Result<Option<proctor_fs::Reached>, DiffError> {
        let mut low = self.low[i].borrow_mut();
        let Some(deep) = low.as_mut() else {
            return Ok(None);
        };
        match deep.reach(rel) {
            Ok(p) => Ok(Some(p)),
            Err(e) if is_missing(&e) => Ok(None),
            Err(e) => Err(DiffError::Io {
                path: rel.to_owned(),
                source: e,
            }),
        }
    }

    /// The entry `rel` of the upper layer, not followed; `None` when there is none.
    fn upper_lstat(&self, rel: &Path) -> Result<Option<Metadata>, DiffError> {
        match self.up.borrow_mut().reach(rel) {
            Ok(p) => lstat(&p),
            Err(e) if is_missing(&e) => Ok(None),
            Err(e) => Err(DiffError::Io {
                path: rel.to_owned(),
                source: e,
            }),
        }
    }

    /// The entry at `rel` in the merged lower layers (ignoring the upper), if any.
    fn lower(&self, rel: &Path) -> Result<Option<(proctor_fs::Reached, Metadata)>, DiffError> {
        for (i, layer) in self.lowers.iter().enumerate() {
            let Some(full) = self.lower_at(i, rel)? else {
                if i + 1 < self.lowers.len() && blocks_below(layer, rel)? {
                    return Ok(None);
                }
                continue;
            };
            match lstat(&full)? {
                Some(m) if is_whiteout(&m) => return Ok(None),
                Some(m) => return Ok(Some((full, m))),
                None => {
                    if i + 1 < self.lowers.len() && blocks_below(layer, rel)? {
                        return Ok(None);
                    }
                }
            }
        }
        Ok(None)
    }

    /// The entry visible at `rel` in the end state when the upper holds nothing at `rel` itself:
    /// the lower one unless an upper ancestor is a whiteout, a non-directory or opaque.
    fn merged_lower(
        &self,
        rel: &Path,
    ) -> Result<Option<(proctor_fs::Reached, Metadata)>, DiffError> {
        if blocks_below(self.upper, rel)? {
            return Ok(None);
        }
        self.lower(rel)
    }

    /// The merged listing of lower directory `rel`: each name's status.
    fn lower_children(&self, rel: &Path) -> Result<BTreeMap<OsString, Metadata>, DiffError> {
        let mut seen: BTreeMap<OsString, Metadata> = BTreeMap::new();
        let mut hidden: HashSet<OsString> = HashSet::new();
        for (i, layer) in self.lowers.iter().enumerate() {
            let Some(dir) = self.lower_at(i, rel)? else {
                if i + 1 < self.lowers.len() && blocks_below(layer, rel)? {
                    break;
                }
                continue;
            };
            match lstat(&dir)? {
                Some(m) if m.is_dir() => {}
                Some(_) => break,
                None => {
                    if i + 1 < self.lowers.len() && blocks_below(layer, rel)? {
                        break;
                    }
                    continue;
                }
            }
            for entry in fs::read_dir(&dir).map_err(io_err(&dir))? {
                let entry = entry.map_err(io_err(&dir))?;
                let name = entry.file_name();
                if seen.contains_key(&name) || hidden.contains(&name) {
                    continue;
                }
                let full = entry.path();
                let Some(m) = lstat(&full)? else { continue };
                if is_whiteout(&m) {
                    hidden.insert(name);
                } else {
                    seen.insert(name, m);
                }
            }
            if is_opaque(&dir) {
                break;
            }
        }
        Ok(seen)
    }

    /// Reports `rel` (and, for a directory, everything below it) as deleted. Without
    /// recursion: a lower tree of any depth costs no stack.
    fn deleted(&self, rel: &Path, m: &Metadata, out: &mut Vec<Change>) -> Result<(), DiffError> {
        let mut pending: Vec<(PathBuf, Metadata)> = vec![(rel.to_path_buf(), m.clone())];
        while let Some((rel, m)) = pending.pop() {
            out.push(Change {
                path: rel.clone(),
                kind: ChangeKind::Deleted,
                entry: kind_of(&m),
                mode_before: Some(mode_of(&m)),
                mode_after: None,
            });
            if m.is_dir() {
                for (name, cm) in self.lower_children(&rel)? {
                    pending.push((rel.join(name), cm));
                }
            }
        }
        Ok(())
    }

    /// Walks the upper folder `top` and every folder below it, without recursion (a tree of
    /// any depth costs no stack, a path of any length is read): an entry that cannot be read (a
    /// folder that cannot be listed) is noted and the walk goes on. Below a folder that has no lower
    /// counterpart, no lower is looked up (none can have anything there).
    fn walk_upper(
        &self,
        top: &Path,
        laid: &Laid,
        out: &mut Vec<Change>,
        noted: &mut Noted,
    ) -> Result<(), DiffError> {
        let mut pending: Vec<(PathBuf, bool)> = vec![(top.to_path_buf(), true)];
        let mut first = true;
        while let Some((rel, lowers_below)) = pending.pop() {
            let listed = self
                .upper_at(&rel)
                .and_then(|dir| fs::read_dir(&*dir).map(|d| (d, dir)).map_err(io_err(&rel)))
                .and_then(|(entries, _dir)| {
                    entries
                        .map(|e| {
                            e.map(|e| {
                                let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
                                (e.file_name(), is_dir)
                            })
                        })
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(io_err(&rel))
                });
            let mut names = match listed {
                Ok(names) => names,
                Err(e) if first => return Err(e),
                Err(e) => {
                    noted.unread(&rel, true, &e, out);
                    continue;
                }
            };
            first = false;
            names.sort();
            // Reversed onto the stack, so that folders are walked in name order.
            for (name, is_dir) in names.into_iter().rev() {
                let crel = rel.join(&name);
                match self.visit(&crel, lowers_below, laid, out, noted) {
                    Ok(Some(below)) => pending.push((crel, below)),
                    Ok(None) => {}
                    Err(e) => noted.unread(&crel, is_dir, &e, out),
                }
            }
        }
        Ok(())
    }

    /// Compares the upper entry `crel` with the lowers (`lowers_here`: whether the lowers may
    /// have anything at `crel`); for a folder to walk, whether the lowers may have anything
    /// below it.
    fn visit(
        &self,
        crel: &Path,
        lowers_here: bool,
        laid: &Laid,
        out: &mut Vec<Change>,
        noted: &mut Noted,
    ) -> Result<Option<bool>, DiffError> {
        let crel = crel.to_path_buf();
        let full = self.upper_at(&crel)?;
        let Some(m) = lstat(&full)? else {
            return Ok(None);
        };
        let at = (self.upper, crel.as_path(), &*full);
        if m.is_file() {
            noted.reopened.open(at, mode_of(&m), 0o400)?;
        } else if m.is_dir() {
            noted.reopened.open(at, mode_of(&m), 0o700)?;
        }
        if is_whiteout(&m) {
            if laid.files.contains_key(&crel) {
                out.push(Change {
                    path: crel.clone(),
                    kind: ChangeKind::Deleted,
                    entry: EntryKind::File,
                    mode_before: None,
                    mode_after: None,
                });
            }
            if let Some((_, lm)) = self.lower(&crel)? {
                self.deleted(&crel, &lm, out)?;
            }
            return Ok(None);
        }
        if let Some(hash) = laid.files.get(&crel) {
            if let Some(c) = laid.compare(&crel, hash, &full, Some(&m))? {
                out.push(c);
            }
            return Ok(m.is_dir().then_some(true));
        }
        let lower = if lowers_here || laid.dirs.contains(&crel) {
            self.lower(&crel)?
        } else {
            None
        };
        let kind = kind_of(&m);
        let mode = upper_mode_of(&full, &m);
        let change = |k: ChangeKind, before: Option<u32>| Change {
            path: crel.clone(),
            kind: k,
            entry: kind,
            mode_before: before,
            mode_after: Some(mode),
        };
        match &lower {
            None => {
                if !(kind == EntryKind::Dir && laid.dirs.contains(&crel)) {
                    out.push(change(ChangeKind::Added, None));
                }
            }
            Some((lpath, lm)) => {
                self.compare_with_lower(&crel, (&full, &m), (lpath, lm), out)?;
            }
        }
        // Laid-in files may lie below a folder no lower has (their folders are the caller's).
        let below = lower.as_ref().is_some_and(|(_, lm)| lm.is_dir()) || laid.dirs.contains(&crel);
        Ok(m.is_dir().then_some(below))
    }

    /// The change (if any) of the upper entry `crel` (at `full`, `m`) over the lower one it
    /// covers (at `lpath`, `lm`): replaced by another kind of entry (and all below a replaced
    /// folder deleted), new content, a new mode, or an opaque folder's lower entries deleted.
    fn compare_with_lower(
        &self,
        crel: &Path,
        (full, m): (&Path, &fs::Metadata),
        (lpath, lm): (&Path, &fs::Metadata),
        out: &mut Vec<Change>,
    ) -> Result<(), DiffError> {
        let kind = kind_of(m);
        let mode = upper_mode_of(full, m);
        let change = |k: ChangeKind, before: Option<u32>| Change {
            path: crel.to_path_buf(),
            kind: k,
            entry: kind,
            mode_before: before,
            mode_after: Some(mode),
        };
        let lmode = mode_of(lm);
        if kind_of(lm) != kind {
            out.push(change(ChangeKind::Modified, Some(lmode)));
            if lm.is_dir() {
                // Everything below the replaced directory is gone.
                for (cname, cm) in self.lower_children(crel)? {
                    self.deleted(&crel.join(cname), &cm, out)?;
                }
            }
        } else {
            let content_same = match kind {
                EntryKind::File => {
                    is_metacopy(full) || (m.len() == lm.len() && same_content(full, lpath)?)
                }
                EntryKind::Symlink => {
                    fs::read_link(full).map_err(io_err(full))?
                        == fs::read_link(lpath).map_err(io_err(lpath))?
                }
                EntryKind::Dir => true,
                EntryKind::Other => m.rdev() == lm.rdev(),
            };
            if !content_same {
                out.push(change(ChangeKind::Modified, Some(lmode)));
            } else if kind != EntryKind::Symlink && mode != lmode {
                out.push(change(ChangeKind::ModeChanged, Some(lmode)));
            }
            if kind == EntryKind::Dir && is_opaque(full) {
                // The agent removed the directory and made a new one: whatever of the
                // lower directory the upper does not hold is deleted.
                for (cname, cm) in self.lower_children(crel)? {
                    let c = crel.join(&cname);
                    if self.upper_lstat(&c)?.is_none() {
                        self.deleted(&c, &cm, out)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Whether something in `layer` above `rel` (a whiteout, a non-directory, an opaque directory)
/// hides `rel` in the layers below.
fn blocks_below(layer: &Path, rel: &Path) -> Result<bool, DiffError> {
    let mut cur = layer.to_path_buf();
    let comps: Vec<_> = rel.components().collect();
    for c in comps.iter().take(comps.len().saturating_sub(1)) {
        cur.push(c);
        match lstat(&cur)? {
            None => return Ok(false),
            Some(m) if is_whiteout(&m) || !m.is_dir() => return Ok(true),
            Some(_) => {
                if is_opaque(&cur) {
                    return Ok(true);
                }
            }
        }
    }
    Ok(false)
}

// ---------------------------------------------------------------------------------------------
// Copy mode
// ---------------------------------------------------------------------------------------------

/// One entry of a [`Manifest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestEntry {
    /// File, directory, symlink or other.
    pub kind: EntryKind,
    /// Permission bits.
    pub mode: u32,
    /// Size in bytes (files).
    pub size: u64,
    /// BLAKE3 of the content, lowercase hex (files only).
    pub blake3: Option<String>,
    /// The link target (symlinks only).
    pub target: Option<PathBuf>,
}

/// The state of a directory tree: path (relative) → mode, size, content hash. Built on the copy
/// before the agent starts, compared with the end state by [`manifest_changes`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Every entry below the root (the root itself excluded).
    pub entries: BTreeMap<PathBuf, ManifestEntry>,
}

fn manifest_entry(full: &Path, m: &Metadata) -> Result<ManifestEntry, DiffError> {
    let kind = kind_of(m);
    Ok(ManifestEntry {
        kind,
        mode: mode_of(m),
        size: if kind == EntryKind::File { m.len() } else { 0 },
        blake3: if kind == EntryKind::File {
            Some(hash_file(full)?)
        } else {
            None
        },
        target: if kind == EntryKind::Symlink {
            Some(fs::read_link(full).map_err(io_err(full))?)
        } else {
            None
        },
    })
}

fn walk(dir: &Path) -> impl Iterator<Item = Result<(PathBuf, PathBuf, Metadata), DiffError>> + '_ {
    walkdir::WalkDir::new(dir)
        .min_depth(1)
        .follow_links(false)
        .sort_by_file_name()
        .into_iter()
        .map(move |e| {
            let e = e.map_err(|e| {
                let path = e.path().unwrap_or(dir).to_owned();
                DiffError::Io {
                    path,
                    source: e.into(),
                }
            })?;
            let full = e.path().to_owned();
            let rel = full.strip_prefix(dir).unwrap_or(&full).to_owned();
            let m = fs::symlink_metadata(&full).map_err(io_err(&full))?;
            Ok((rel, full, m))
        })
}

impl Manifest {
    /// Records every entry below `dir`, hashing every regular file.
    pub fn build(dir: &Path) -> Result<Manifest, DiffError> {
        let mut entries = BTreeMap::new();
        for item in walk(dir) {
            let (rel, full, m) = item?;
            entries.insert(rel, manifest_entry(&full, &m)?);
        }
        Ok(Manifest { entries })
    }
}

/// Where the entries of a copy hold their real modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyModes {
    /// In their own modes: a copy written in place.
    Own,
    /// As the trial's disk left them when it moved the copy out: without set-user-ID,
    /// set-group-ID or sticky bits, a cleared mode kept in [`crate::copy::MODE_XATTR`] (which
    /// the move sets and never carries over from what the agent wrote).
    MovedOffTheDisk,
}

/// The changes in `dir` since `manifest` was built (copy mode). Reads the whole tree and hashes
/// every file whose size did not change. Any entry it cannot read is an error:
/// [`manifest_diff`] reads past them.
pub fn manifest_changes(
    manifest: &Manifest,
    dir: &Path,
    laid_in: &[LaidIn],
) -> Result<Vec<Change>, DiffError> {
    strict(manifest_diff(manifest, (dir, CopyModes::Own), laid_in)?)
}

/// [`manifest_changes`] over a tree an agent made: an entry that cannot be read is reported as
/// added and noted as unread (nothing below it is reported deleted), and the rest is read.
pub fn manifest_diff(
    manifest: &Manifest,
    (dir, modes): (&Path, CopyModes),
    laid_in: &[LaidIn],
) -> Result<Diff, DiffError> {
    let laid = Laid::new(laid_in)?;
    let mut out = Vec::new();
    let mut noted = Noted::default();
    let mut seen: HashSet<PathBuf> = HashSet::new();
    // By open folders, without recursion: a tree of any depth (a path past PATH_MAX) is read
    // whole.
    let mut deep = proctor_fs::Deep::open(dir).map_err(io_err(dir))?;
    let mut pending: Vec<PathBuf> = vec![PathBuf::new()];
    while let Some(rel) = pending.pop() {
        let listed = deep
            .reach(&rel)
            .and_then(|d| fs::read_dir(&*d))
            .and_then(|entries| {
                entries
                    .map(|e| e.map(|e| e.file_name()))
                    .collect::<io::Result<Vec<OsString>>>()
            });
        let mut names = match listed {
            Ok(names) => names,
            Err(e) if rel.as_os_str().is_empty() => {
                return Err(DiffError::Io {
                    path: dir.to_owned(),
                    source: e,
                })
            }
            Err(e) => {
                noted.unread(&rel, true, &io_err(&rel)(e), &mut out);
                continue;
            }
        };
        names.sort();
        for name in names.into_iter().rev() {
            let crel = rel.join(&name);
            seen.insert(crel.clone());
            let full = match deep.reach(&crel) {
                Ok(f) => f,
                Err(e) => {
                    noted.unread(&crel, false, &io_err(&crel)(e), &mut out);
                    continue;
                }
            };
            let is_dir = fs::symlink_metadata(&*full).is_ok_and(|m| m.is_dir());
            match manifest_entry_change(manifest, &laid, (&crel, &full, modes), &mut out) {
                Ok(()) if is_dir => pending.push(crel),
                Ok(()) => {}
                Err(e) => noted.unread(&crel, is_dir, &e, &mut out),
            }
        }
    }
    let unread: HashSet<&Path> = noted.unread.iter().map(|u| u.path.as_path()).collect();
    let under_unread =
        |rel: &Path| !unread.is_empty() && rel.ancestors().any(|a| unread.contains(a));
    for (rel, b) in &manifest.entries {
        if !seen.contains(rel) && !laid.files.contains_key(rel) && !under_unread(rel) {
            out.push(Change {
                path: rel.clone(),
                kind: ChangeKind::Deleted,
                entry: b.kind,
                mode_before: Some(b.mode),
                mode_after: None,
            });
        }
    }
    for (rel, hash) in &laid.files {
        if !seen.contains(rel) {
            if let Some(c) = laid.compare(rel, hash, Path::new(""), None)? {
                out.push(c);
            }
        }
    }
    Ok(Diff {
        changes: finish(out),
        unread: noted.unread,
        reopened: noted.reopened,
    })
}

/// The change (if any) of the end-state entry `rel` at `full`, against the manifest.
fn manifest_entry_change(
    manifest: &Manifest,
    laid: &Laid,
    (rel, full, modes): (&Path, &Path, CopyModes),
    out: &mut Vec<Change>,
) -> Result<(), DiffError> {
    let m = fs::symlink_metadata(full).map_err(io_err(full))?;
    if let Some(hash) = laid.files.get(rel) {
        if let Some(c) = laid.compare(rel, hash, full, Some(&m))? {
            out.push(c);
        }
        return Ok(());
    }
    let kind = kind_of(&m);
    let mode = match modes {
        CopyModes::Own => mode_of(&m),
        CopyModes::MovedOffTheDisk => upper_mode_of(full, &m),
    };
    let change = |k: ChangeKind, before: Option<u32>| Change {
        path: rel.to_owned(),
        kind: k,
        entry: kind,
        mode_before: before,
        mode_after: Some(mode),
    };
    match manifest.entries.get(rel) {
        None => {
            if !(kind == EntryKind::Dir && laid.dirs.contains(rel)) {
                out.push(change(ChangeKind::Added, None));
            }
        }
        Some(b) if b.kind != kind => out.push(change(ChangeKind::Modified, Some(b.mode))),
        Some(b) => {
            let content_same = match kind {
                EntryKind::File => {
                    b.size == m.len() && b.blake3.as_deref() == Some(hash_file(full)?.as_str())
                }
                EntryKind::Symlink => {
                    b.target.as_deref()
                        == Some(fs::read_link(full).map_err(io_err(full))?.as_path())
                }
                EntryKind::Dir | EntryKind::Other => true,
            };
            if !content_same {
                out.push(change(ChangeKind::Modified, Some(b.mode)));
            } else if kind != EntryKind::Symlink && b.mode != mode {
                out.push(change(ChangeKind::ModeChanged, Some(b.mode)));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn write(p: &Path, s: &str) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, s).unwrap();
    }

    fn summary(c: &[Change]) -> Vec<(String, ChangeKind)> {
        c.iter()
            .map(|c| (c.path.to_string_lossy().into_owned(), c.kind))
            .collect()
    }

    #[test]
    fn manifest_sees_add_change_chmod_delete_and_laid_in() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        write(&d.join("a.txt"), "a");
        write(&d.join("b.txt"), "b");
        write(&d.join("c.txt"), "c");
        write(&d.join("sub/d.txt"), "d");
        std::os::unix::fs::symlink("a.txt", d.join("link")).unwrap();
        let m = Manifest::build(d).unwrap();
        // Laid in after the manifest: not the agent's change.
        write(&d.join("agents/SKILL.md"), "skill");
        write(&d.join("NOTES.md"), "notes");
        let laid = [
            LaidIn {
                path: "agents/SKILL.md".into(),
                blake3: hash_file(&d.join("agents/SKILL.md")).unwrap(),
            },
            LaidIn {
                path: "NOTES.md".into(),
                blake3: hash_file(&d.join("NOTES.md")).unwrap(),
            },
        ];
        assert!(manifest_changes(&m, d, &laid).unwrap().is_empty());

        write(&d.join("a.txt"), "A");
        fs::set_permissions(d.join("b.txt"), fs::Permissions::from_mode(0o755)).unwrap();
        fs::remove_file(d.join("c.txt")).unwrap();
        fs::remove_dir_all(d.join("sub")).unwrap();
        write(&d.join("new.txt"), "n");
        fs::remove_file(d.join("link")).unwrap();
        std::os::unix::fs::symlink("b.txt", d.join("link")).unwrap();
        write(&d.join("NOTES.md"), "edited by the agent");
        let got = summary(&manifest_changes(&m, d, &laid).unwrap());
        assert_eq!(
            got,
            vec![
                ("NOTES.md".into(), ChangeKind::Modified),
                ("a.txt".into(), ChangeKind::Modified),
                ("b.txt".into(), ChangeKind::ModeChanged),
                ("c.txt".into(), ChangeKind::Deleted),
                ("link".into(), ChangeKind::Modified),
                ("new.txt".into(), ChangeKind::Added),
                ("sub".into(), ChangeKind::Deleted),
                ("sub/d.txt".into(), ChangeKind::Deleted),
            ]
        );
        fs::remove_file(d.join("agents/SKILL.md")).unwrap();
        let got = summary(&manifest_changes(&m, d, &laid).unwrap());
        assert!(got.contains(&("agents/SKILL.md".into(), ChangeKind::Deleted)));
    }

    /// An upper layer written by hand the way overlayfs writes it (whiteouts need mknod, which an
    /// unprivileged user has only inside a user namespace: the real overlay is covered by the
    /// integration tests).
    #[test]
    fn overlay_upper_without_whiteouts() {
        let t = tempfile::tempdir().unwrap();
        let lower = t.path().join("lower");
        let upper = t.path().join("upper");
        write(&lower.join("same.txt"), "same");
        write(&lower.join("edit.txt"), "old");
        write(&lower.join("mode.txt"), "m");
        write(&lower.join("dir/inner.txt"), "i");
        fs::create_dir_all(&upper).unwrap();
        // Copied up without a change.
        write(&upper.join("same.txt"), "same");
        write(&upper.join("edit.txt"), "new");
        write(&upper.join("mode.txt"), "m");
        fs::set_permissions(upper.join("mode.txt"), fs::Permissions::from_mode(0o600)).unwrap();
        fs::set_permissions(lower.join("mode.txt"), fs::Permissions::from_mode(0o644)).unwrap();
        write(&upper.join("dir/added.txt"), "a");
        write(&upper.join("fresh/x.txt"), "x");
        let got = summary(&overlay_changes(&upper, std::slice::from_ref(&lower), &[]).unwrap());
        assert_eq!(
            got,
            vec![
                ("dir/added.txt".into(), ChangeKind::Added),
                ("edit.txt".into(), ChangeKind::Modified),
                ("fresh".into(), ChangeKind::Added),
                ("fresh/x.txt".into(), ChangeKind::Added),
                ("mode.txt".into(), ChangeKind::ModeChanged),
            ]
        );
    }

    /// A tree 3,000 levels deep (a 6 KB path, past PATH_MAX) is diffed whole on a small stack,
    /// in an upper layer and against a manifest, down to the file at its bottom.
    #[test]
    fn a_tree_past_path_max_is_diffed_whole_without_recursion() {
        use std::os::fd::AsFd;
        let t = tempfile::tempdir().unwrap();
        let lower = t.path().join("lower");
        let upper = t.path().join("upper");
        write(&lower.join("a.txt"), "a");
        fs::create_dir_all(&upper).unwrap();
        let b = proctor_fs::Beneath::open(&upper).unwrap();
        let mut cur = b.dir(Path::new("")).unwrap();
        for _ in 0..3000 {
            cur = proctor_fs::beneath::make_dir_at(cur.as_fd(), c"d", 0o755).unwrap();
        }
        let f = rustix::fs::openat(
            &cur,
            c"bottom.txt",
            rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CREATE,
            rustix::fs::Mode::from_raw_mode(0o644),
        )
        .unwrap();
        rustix::io::write(&f, b"deep").unwrap();
        drop((cur, f));
        let bottom = PathBuf::from(format!("{}bottom.txt", "d/".repeat(3000)));
        let (u, l) = (upper.clone(), lower.clone());
        let d = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || overlay_diff(&u, std::slice::from_ref(&l), &[]).unwrap())
            .unwrap()
            .join()
            .unwrap();
        assert!(d.unread.is_empty(), "{:?}", d.unread.first());
        assert_eq!(d.changes.len(), 3001);
        assert!(d.changes.iter().all(|c| c.kind == ChangeKind::Added));
        let last = d.changes.iter().find(|c| c.path == bottom).unwrap();
        assert_eq!(last.entry, EntryKind::File);
        // The same tree as a copy's end state, against the manifest of its start.
        let m = Manifest::build(&lower).unwrap();
        let copy = t.path().join("copy");
        crate::copy::copy_tree(&lower, &copy).unwrap();
        crate::copy::copy_tree(&upper, &copy).unwrap();
        let d = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || manifest_diff(&m, (&copy, CopyModes::Own), &[]).unwrap())
            .unwrap()
            .join()
            .unwrap();
        assert!(d.unread.is_empty(), "{:?}", d.unread.first());
        assert_eq!(d.changes.len(), 3001);
        assert!(d.changes.iter().any(|c| c.path == bottom));
    }

    #[test]
    fn laid_in_paths_must_stay_inside() {
        let t = tempfile::tempdir().unwrap();
        let bad = [LaidIn {
            path: "../x".into(),
            blake3: String::new(),
        }];
        assert!(matches!(
            overlay_changes(t.path(), &[], &bad),
            Err(DiffError::BadLaidIn(_))
        ));
    }
}
