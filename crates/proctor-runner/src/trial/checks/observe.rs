//! What a check loads of the agent's changes, seen rather than predicted.
//!
//! For every check run, the regular files the agent added or changed (in the workspace, and in
//! the trial's root where the checks see it) are watched by a `fanotify` group held by the
//! runner, outside the check's sandbox: the kernel queues an event on the runner's descriptor
//! whenever any process opens, reads or executes one, through the check's overlay or not (the
//! agent's layer is a lower layer the overlay reads the real file of). Where the check sees the
//! agent's layer read-only (an overlay, and the root), its names are fixed, so one mark on each
//! folder holding a changed file watches every entry in it, and its events name the folder (by
//! its file handle) and the entry, counted for the agent's names only: no system call per
//! changed file, the folder's entries read once. Where the check works in a copy it may
//! rename, each file is marked itself and its events name the file, wherever it is moved.
//! The code under test cannot undo a queued event, and such marks need no privilege
//! (`FAN_REPORT_DFID_NAME`, `FAN_REPORT_FID`). A followed link makes no `fanotify` event, so
//! each link the agent made is also put in the check's own upper layer (the same link, its
//! modification time kept, its access time 0): a path walk that follows it (or a `readlink`)
//! moves its access time, read once the check is over. Python bytecode the
//! agent left in `__pycache__` is hidden from the check outright ([`hide_bytecode`]): a cache
//! Python rebuilds from the source the agent wrote, so hiding it is honest, and no bytecode of
//! the agent's stands in for its source (`-I` and `-E` checks included, which ignore
//! `PYTHONPYCACHEPREFIX`).

use proctor_fs::beneath::Beneath;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::CStr;
use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The maps an event is looked up in, once per event: hashed fast (`foldhash`, seeded at random
/// per process) rather than with SipHash; their keys are file handles and the names of the
/// agent's changed files, bounded by the changes a check run watches.
type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

use proctor_score::endstate::{
    Access, ChangeKind, CheckObservation, FileChange, ObservedFile, ObservedLink,
};

use super::EndTree;
use crate::trial::capture::NotFiles;

/// What the agent changed, which a check's observation watches: workspace-relative paths and
/// root-relative paths of every entry it added or changed (not deleted, not folders).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Watch {
    /// In the workspace.
    pub workspace: Vec<String>,
    /// In the trial's root (`check_root = "agent"`).
    pub root: Vec<String>,
    /// Which of the workspace's entries, then of the root's, are links and which are
    /// neither links nor regular files, where the capture told: the watch then reads no
    /// folder to tell them apart. `None`: the folders holding them are read.
    pub kinds: Option<[NotFiles; 2]>,
}

impl Watch {
    /// The entries of `changes` and `root_changes` a check's observation watches.
    pub fn of(changes: &[FileChange], root_changes: &[FileChange]) -> Watch {
        let kept = |c: &[FileChange]| {
            c.iter()
                .filter(|c| !c.dir && c.kind != ChangeKind::Deleted)
                .map(|c| c.path.clone())
                .collect()
        };
        Watch {
            workspace: kept(changes),
            root: kept(root_changes),
            kinds: None,
        }
    }

    /// This watch, told which of its entries are not regular files (the workspace's, then the
    /// root's), as the capture of the same trees found them.
    pub fn with_kinds(self, kinds: [NotFiles; 2]) -> Watch {
        Watch {
            kinds: Some(kinds),
            ..self
        }
    }
}

/// The most marks one check run holds (a folder's, or in a copy a file's); past it entries are
/// not watched, and the record says so.
const WATCH_MAX: usize = 8192;

/// Whether a workspace path is bytecode Python caches in `__pycache__`.
fn cached_bytecode(rel: &str) -> bool {
    rel.ends_with(".pyc") && rel.split('/').any(|c| c == "__pycache__")
}

/// Hides the bytecode the agent left in `__pycache__` folders from a check: over layers, a
/// layer of whiteouts in `guard` (returned when there is one); over a copy, the files removed
/// from the copy `ws`.
pub(super) fn hide_bytecode(
    watch: Option<&Watch>,
    layers: &[PathBuf],
    guard: &Path,
    ws: Option<&Path>,
) -> io::Result<Option<PathBuf>> {
    let Some(watch) = watch else { return Ok(None) };
    let mut any = false;
    for rel in watch.workspace.iter().filter(|r| cached_bytecode(r)) {
        if let Some(ws) = ws {
            match fs::remove_file(ws.join(rel)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            continue;
        }
        let at = guard.join(rel);
        fs::create_dir_all(guard)?;
        if let Some(parent) = Path::new(rel).parent() {
            mirror_dirs(layers, parent, guard)?;
        }
        proctor_sandbox::copy::make_whiteout(&at)?;
        any = true;
    }
    Ok(any.then(|| guard.to_path_buf()))
}

/// Makes the folders of `rel` (a workspace-relative folder) under `to`, each with the mode,
/// owner and times of the topmost of `layers` that has it: a folder of a layer above the
/// agent's shows in the check's view with its own attributes, so they must be the end state's.
fn mirror_dirs(layers: &[PathBuf], rel: &Path, to: &Path) -> io::Result<()> {
    let mut at = PathBuf::new();
    for part in rel.components() {
        at.push(part);
        let dst = to.join(&at);
        if dst.is_dir() {
            continue;
        }
        fs::create_dir(&dst)?;
        if let Some(m) = layers
            .iter()
            .find_map(|l| fs::symlink_metadata(l.join(&at)).ok())
            .filter(fs::Metadata::is_dir)
        {
            fs::set_permissions(&dst, std::os::unix::fs::PermissionsExt::from_mode(m.mode()))?;
            let _ = std::os::unix::fs::lchown(&dst, Some(m.uid()), Some(m.gid()));
            super::set_times(&dst, &m)?;
        }
    }
    Ok(())
}

/// The watch over one check run: the `fanotify` group with its marks, and the links put in
/// the check's view.
pub struct Observer {
    /// The group; `None` where it could not be made (the record says why).
    fan: Option<OwnedFd>,
    /// Each marked folder, keyed as its events name it ([`Handle`]): its index in `folders`.
    folder_keys: Map<Vec<u8>, usize>,
    /// The marked folders, each with the agent's files in it that are watched by name.
    folders: Vec<WatchedFolder>,
    /// Each file marked itself (a copy's), keyed as its events name it ([`Handle`]).
    files: Map<Vec<u8>, WatchedFile>,
    /// Marks held: folders, and the files of a copy.
    marked: usize,
    /// Whether any file is marked itself (its events are then looked up by the file).
    file_marks: bool,
    /// File systems' ids by mount id, found once.
    fsids: HashMap<i32, [u8; 8]>,
    /// Each link: its path, its target, and where its watched copy is.
    links: Vec<(String, String, PathBuf)>,
    /// What could not be watched.
    incomplete: Vec<String>,
    /// Entries past the first [`WATCH_MAX`] marks.
    unwatched: u64,
}

/// A folder marked for its entries: the agent's files in it, watched by their names.
struct WatchedFolder {
    /// Its path in its tree (empty for the tree's top).
    path: String,
    /// Whether the tree is the trial's root.
    root: bool,
    /// Each watched name: its index in `entries`.
    names: Map<Box<[u8]>, usize>,
    /// Each watched entry's name, and the events seen for it.
    entries: Vec<(String, u64)>,
}

/// A file marked itself: its path, whether it is the root's, and the events seen for it.
struct WatchedFile {
    path: String,
    root: bool,
    mask: u64,
}

/// Where one tree's changes are watched.
struct TreeAt<'a> {
    /// The folder holding the agent's files as the check reads them.
    files: PathBuf,
    /// Whether the check can change names in `files` (a copy), so that a name is no proof of
    /// which file it is: each file is then marked itself, not its folder.
    writable: bool,
    /// The folder the agent's links are laid in, with the layers that make up the check's
    /// view of it (none for a copy, where the links are already in place).
    links: Option<(PathBuf, Vec<PathBuf>)>,
    /// The layers above the agent's, whose paths are not the agent's.
    above: &'a [PathBuf],
    /// Whether this is the trial's root.
    root: bool,
}

impl Observer {
    /// Starts watching what the check in the scratch folder `dir` will load of `watch` over
    /// `tree` (the check's workspace already made there), and of the root's changes in
    /// `agent_root`. `above`: the layers the check sees above the agent's (the holdout's
    /// copy is one), whose paths are not the agent's.
    pub fn start(
        watch: &Watch,
        tree: &EndTree,
        above: &[PathBuf],
        agent_root: Option<&Path>,
        dir: &Path,
    ) -> Observer {
        let mut o = Observer {
            fan: None,
            folder_keys: Map::default(),
            folders: Vec::new(),
            files: Map::default(),
            marked: 0,
            file_marks: false,
            fsids: HashMap::new(),
            links: Vec::new(),
            incomplete: Vec::new(),
            unwatched: 0,
        };
        // A file marked itself (a copy's) is named by its own file handle in its events;
        // otherwise the folder's handle and the entry's name are all an event needs.
        let file_marks = matches!(tree, EndTree::Copy { .. });
        match fan_init(file_marks) {
            Ok(fd) => o.fan = Some(fd),
            Err(e) => o
                .incomplete
                .push(format!("no fanotify group ({e}): files are not watched")),
        }
        let workspace = match tree {
            EndTree::Overlay { top, lowers } => TreeAt {
                files: top.clone(),
                writable: false,
                links: Some((
                    dir.join("upper"),
                    std::iter::once(top.clone())
                        .chain(lowers.iter().cloned())
                        .collect(),
                )),
                above,
                root: false,
            },
            EndTree::Copy { .. } => TreeAt {
                files: dir.join("ws"),
                writable: true,
                links: Some((dir.join("ws"), Vec::new())),
                above,
                root: false,
            },
        };
        let [ws_kinds, root_kinds] = match &watch.kinds {
            Some([w, r]) => [Some(w), Some(r)],
            None => [None, None],
        };
        o.watch_tree(&workspace, &watch.workspace, ws_kinds);
        if let Some(root) = agent_root {
            let at = TreeAt {
                files: root.to_path_buf(),
                writable: false,
                links: None,
                above: &[],
                root: true,
            };
            o.watch_tree(&at, &watch.root, root_kinds);
        }
        o
    }

    /// Watches the entries `rels` of one tree, a mark on each folder that holds any; `kinds`
    /// says which are not regular files, where it is known.
    fn watch_tree(&mut self, at: &TreeAt, rels: &[String], kinds: Option<&NotFiles>) {
        let mut by_folder: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for rel in rels {
            let (folder, name) = rel.rsplit_once('/').unwrap_or(("", rel));
            by_folder.entry(folder).or_default().push(name);
        }
        // Each folder is opened beneath the tree's top (and each layer's above it), never
        // through a link: one open of the top, then one short lookup per folder.
        let tops = Beneath::open(&at.files).map(|top| {
            let above: Vec<Beneath> = at
                .above
                .iter()
                .filter_map(|l| Beneath::open(l).ok())
                .collect();
            (top, above)
        });
        let (top, above) = match tops {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(e) => {
                self.incomplete
                    .push(format!("the tree is not watched: {e}"));
                return;
            }
        };
        // The last folder opened as a parent of marked folders (siblings come together).
        let mut parent: Option<(&str, OwnedFd)> = None;
        for (folder, names) in by_folder {
            if self.marked >= WATCH_MAX {
                self.unwatched += names.len() as u64;
                continue;
            }
            // Names the check sees from a layer above the agent's are not the agent's.
            let watched = agents_names(&above, folder, names).and_then(|names| match kinds {
                _ if names.is_empty() => Ok(()),
                Some(kinds) if self.fan.is_some() && !at.writable => {
                    self.watch_folder_told(at, &top, &mut parent, (folder, &names), kinds)
                }
                _ => self.watch_folder(at, &top, (folder, &names), kinds),
            });
            if let Err(e) = watched {
                let shown = if folder.is_empty() { "." } else { folder };
                self.incomplete
                    .push(format!("the folder `{shown}` is not watched: {e}"));
            }
        }
    }

    /// Marks the folder `folder` of a tree for its entries `names`: the files among them are
    /// watched by name, the links laid in the check's view. Which are files and which links
    /// is read from the folder, unless `kinds` tells.
    fn watch_folder(
        &mut self,
        at: &TreeAt,
        top: &Beneath,
        (folder, names): (&str, &[&str]),
        kinds: Option<&NotFiles>,
    ) -> io::Result<()> {
        use rustix::fs::FileType;
        let path = at.files.join(folder);
        let Some(fd) = open_folder(top, folder)? else {
            // A folder gone is no entry to watch (a deleted tree's parts).
            return Ok(());
        };
        let wanted: Map<&[u8], &str> = names.iter().map(|n| (n.as_bytes(), *n)).collect();
        // Where names are fixed, one mark on the folder watches every entry in it by name.
        let by_name = match self.fan.is_some() && !at.writable {
            true => match self.mark_folder(fd.as_fd(), None, folder, at.root)? {
                Some(i) => Some(i),
                None => return Ok(()),
            },
            false => None,
        };
        if let Some(kinds) = kinds {
            return self.watch_told(at, (Some(&fd), folder), names.iter(), by_name, kinds);
        }
        // The folder's entries are read until every wanted name is found.
        let mut left = wanted.len();
        each_entry(&fd, |c, kind| {
            let name = c.to_bytes();
            let Some(&name_str) = wanted.get(name) else {
                return Ok(true);
            };
            left -= 1;
            let rel = || {
                if folder.is_empty() {
                    name_str.to_string()
                } else {
                    format!("{folder}/{name_str}")
                }
            };
            let kind = match kind {
                FileType::Unknown => {
                    FileType::from_raw_mode(fs::symlink_metadata(path.join(name_str))?.mode())
                }
                k => k,
            };
            match kind {
                FileType::RegularFile => {
                    if let Some(i) = by_name {
                        let folder = &mut self.folders[i];
                        folder.names.insert(name.into(), folder.entries.len());
                        folder.entries.push((name_str.to_string(), 0));
                    } else if self.marked >= WATCH_MAX {
                        self.unwatched += 1;
                    } else if self.fan.is_some() {
                        self.mark_file(&fd, c, rel(), at.root)?;
                    }
                }
                FileType::Symlink => self.watch_link(at, &path.join(name_str), rel())?,
                _ => {}
            }
            Ok(left > 0)
        })
    }

    /// [`Observer::watch_folder`] where names are fixed and `kinds` tells which entries are
    /// files: the folder is marked by its name in its parent, which is opened (beneath the
    /// tree's top, through no link) once for all its marked folders and kept in `parent`; the
    /// folder itself is neither opened nor read.
    fn watch_folder_told<'f>(
        &mut self,
        at: &TreeAt,
        top: &Beneath,
        parent: &mut Option<(&'f str, OwnedFd)>,
        (folder, names): (&'f str, &[&str]),
        kinds: &NotFiles,
    ) -> io::Result<()> {
        let marked = match folder.rsplit_once('/') {
            None if folder.is_empty() => self.mark_folder(top.fd(), None, folder, at.root)?,
            split => {
                let (up, name) = split.unwrap_or(("", folder));
                let open = matches!(parent, Some((p, _)) if *p == up);
                if !open && !up.is_empty() {
                    *parent = open_folder(top, up)?.map(|fd| (up, fd));
                }
                let dir = match up.is_empty() {
                    true => Some(top.fd()),
                    false => parent.as_ref().map(|(_, fd)| fd.as_fd()),
                };
                match (dir, std::ffi::CString::new(name)) {
                    (Some(dir), Ok(name)) => self.mark_folder(dir, Some(&name), folder, at.root)?,
                    _ => None,
                }
            }
        };
        // A folder gone (or a link, or a file, in its place) is no entry to watch.
        let Some(i) = marked else { return Ok(()) };
        self.watch_told(at, (None, folder), names.iter(), Some(i), kinds)
    }

    /// Watches the entries `names` of the folder `folder` of its tree (open as `fd` where its
    /// files are marked themselves), whose kinds `kinds` tells: the regular files by name in
    /// the folder `by_name` marked (or each marked itself), the links laid in the check's
    /// view. An entry no longer there is none to watch.
    fn watch_told<'n>(
        &mut self,
        at: &TreeAt,
        (fd, folder): (Option<&OwnedFd>, &str),
        names: impl Iterator<Item = &'n &'n str>,
        by_name: Option<usize>,
        kinds: &NotFiles,
    ) -> io::Result<()> {
        let mut rel = String::with_capacity(folder.len() + 64);
        for &name in names {
            rel.clear();
            if !folder.is_empty() {
                rel.push_str(folder);
                rel.push('/');
            }
            rel.push_str(name);
            if kinds.links.contains(&rel) {
                match self.watch_link(at, &at.files.join(&rel), rel.clone()) {
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    other => other?,
                }
            } else if kinds.others.contains(&rel) {
            } else if let Some(i) = by_name {
                let folder = &mut self.folders[i];
                folder
                    .names
                    .insert(name.as_bytes().into(), folder.entries.len());
                folder.entries.push((name.to_string(), 0));
            } else if self.marked >= WATCH_MAX {
                self.unwatched += 1;
            } else if let (Some(fd), true) = (fd, self.fan.is_some()) {
                let Ok(c) = std::ffi::CString::new(name) else {
                    continue;
                };
                self.mark_file(fd, &c, rel.clone(), at.root)?;
            }
        }
        Ok(())
    }

    /// Marks the folder `folder` of its tree for every entry in it: the entry `name` of the
    /// open folder `dir` (not followed), or `dir` itself with no name. Gives its index in
    /// `folders`; `None` if there is no folder by that name (nothing, or something else).
    fn mark_folder(
        &mut self,
        dir: BorrowedFd,
        name: Option<&CStr>,
        folder: &str,
        root: bool,
    ) -> io::Result<Option<usize>> {
        // Nothing by that name, or not a folder (a link too: opened with `O_NOFOLLOW` and
        // `O_DIRECTORY`, or marked with `FAN_MARK_ONLYDIR`, it is ENOTDIR).
        let gone = |e: &io::Error| matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR));
        let (h, mount) = match handle_at(dir, name.unwrap_or(c"")) {
            Err(e) if gone(&e) => return Ok(None),
            other => other.map_err(no_handle)?,
        };
        let fsid = match (self.fsids.get(&mount), name) {
            (Some(f), _) => *f,
            (None, None) => self.fsid(mount, dir)?,
            // The folder's own file system, found from the folder.
            (None, Some(name)) => match open_dir_at(dir, name) {
                Err(e) if gone(&e) => return Ok(None),
                other => self.fsid(mount, other?.as_fd())?,
            },
        };
        let key = Handle::key(&fsid, &h);
        if let Some(fan) = &self.fan {
            match fan_mark_at(fan, dir, name, true) {
                Err(e) if gone(&e) => return Ok(None),
                other => other?,
            }
        }
        self.marked += 1;
        Ok(Some(*self.folder_keys.entry(key).or_insert_with(|| {
            self.folders.push(WatchedFolder {
                path: folder.to_string(),
                root,
                names: Map::default(),
                entries: Vec::new(),
            });
            self.folders.len() - 1
        })))
    }

    /// Marks the file `name` of the open folder `fd` itself (a copy's file, followed wherever
    /// it is moved), its path being `path`; a file no longer there (bytecode hidden from the
    /// check) is none to mark.
    fn mark_file(&mut self, fd: &OwnedFd, name: &CStr, path: String, root: bool) -> io::Result<()> {
        let (h, mount) = match handle_at(fd.as_fd(), name) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
            other => other.map_err(no_handle)?,
        };
        let key = Handle::key(&self.fsid(mount, fd.as_fd())?, &h);
        if let Some(fan) = &self.fan {
            fan_mark_at(fan, fd.as_fd(), Some(name), false)?;
        }
        let file = WatchedFile {
            path,
            root,
            mask: 0,
        };
        self.files.insert(key, file);
        self.file_marks = true;
        self.marked += 1;
        Ok(())
    }

    /// Lays the agent's link `src` (its path `rel`) in the check's view, to be read after the
    /// check; a link that cannot be laid is recorded as not watched.
    fn watch_link(&mut self, at: &TreeAt, src: &Path, rel: String) -> io::Result<()> {
        let Some((links_at, layers)) = &at.links else {
            return Ok(());
        };
        let m = fs::symlink_metadata(src)?;
        let to = links_at.join(&rel);
        match lay_link(src, &to, &rel, layers, links_at, at.writable, &m) {
            Ok(target) => self.links.push((rel, target, to)),
            Err(e) => self
                .incomplete
                .push(format!("the link `{rel}` is not watched: {e}")),
        }
        Ok(())
    }

    /// The id of the file system of mount `mount`, as `fanotify` reports it (`statfs`'s
    /// `f_fsid`), found once per mount from `fd`, a folder on it.
    fn fsid(&mut self, mount: i32, fd: BorrowedFd) -> io::Result<[u8; 8]> {
        if let Some(f) = self.fsids.get(&mount) {
            return Ok(*f);
        }
        let st = rustix::fs::fstatfs(fd)?;
        // SAFETY: `fsid_t` is two plain C ints, eight bytes with no padding.
        let bytes: [u8; 8] = unsafe { std::mem::transmute(st.f_fsid) };
        self.fsids.insert(mount, bytes);
        Ok(bytes)
    }

    /// Ends the watch once the check is over: all it loaded of the watched files, and every
    /// link (the audit judges the whole; the record lists 512 of each,
    /// [`CheckObservation::bound`]).
    pub fn finish(self) -> CheckObservation {
        let mut incomplete = self.incomplete;
        // Each watched file's events, their masks merged.
        let (mut folders, mut files) = (self.folders, self.files);
        if let Some(fan) = &self.fan {
            let drained = drain(fan, self.file_marks, |object, name, mask| match name {
                Some(name) => {
                    if let Some(f) = self.folder_keys.get(object).map(|&i| &mut folders[i]) {
                        if let Some(&e) = f.names.get(name) {
                            f.entries[e].1 |= mask;
                        }
                    }
                }
                None => {
                    if let Some(f) = files.get_mut(object) {
                        f.mask |= mask;
                    }
                }
            });
            if let Err(e) = drained {
                incomplete.push(e);
            }
        }
        let by_folder = folders.into_iter().flat_map(|f| {
            let (folder, root) = (f.path, f.root);
            f.entries
                .into_iter()
                .filter(|(_, mask)| loaded(*mask))
                .map(move |(name, mask)| {
                    let path = if folder.is_empty() {
                        name
                    } else {
                        let mut path = String::with_capacity(folder.len() + 1 + name.len());
                        path.push_str(&folder);
                        path.push('/');
                        path.push_str(&name);
                        path
                    };
                    (path, root, mask)
                })
        });
        let by_file = files.into_values().map(|f| (f.path, f.root, f.mask));
        let mut seen: Vec<(String, bool, Vec<Access>)> = by_folder
            .chain(by_file)
            .filter(|(_, _, mask)| loaded(*mask))
            .map(|(path, root, mask)| {
                let how = ACCESSES
                    .iter()
                    .filter(|(bit, _)| mask & bit != 0)
                    .map(|(_, a)| *a)
                    .collect();
                (path, root, how)
            })
            .collect();
        seen.sort_unstable_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        let mut out = CheckObservation::default();
        for (path, root, how) in seen {
            out.files.push(ObservedFile { path, root, how });
        }
        for (path, target, at) in self.links {
            // Gone, replaced or its access time moved: followed (or undone, which is as much).
            let untouched = fs::symlink_metadata(&at)
                .is_ok_and(|m| m.file_type().is_symlink() && m.atime() == 0 && m.atime_nsec() == 0);
            out.links.push(ObservedLink {
                path,
                target,
                followed: !untouched,
            });
        }
        if self.unwatched > 0 {
            incomplete.push(format!(
                "{} changed entries past the first {WATCH_MAX} marks are not watched",
                self.unwatched
            ));
        }
        if let Some(fan) = self.fan {
            close_later(fan);
        }
        out.incomplete = (!incomplete.is_empty()).then(|| {
            let mut text = incomplete[..incomplete.len().min(4)].join("; ");
            if incomplete.len() > 4 {
                text += &format!("; and {} more", incomplete.len() - 4);
            }
            text
        });
        out
    }
}

/// Whether the events `mask` of a file load it.
fn loaded(mask: u64) -> bool {
    ACCESSES.iter().any(|(bit, _)| mask & bit != 0)
}

/// The events that load a file, and what each says was done.
const ACCESSES: [(u64, Access); 3] = [
    (libc::FAN_OPEN, Access::Opened),
    (libc::FAN_ACCESS, Access::Read),
    (libc::FAN_OPEN_EXEC, Access::Executed),
];

/// How `fanotify` names an object in an event: its file system's id (8 bytes), then its
/// `file_handle` (the handle's length as a `u32`, its type as an `i32`, its bytes), as one
/// run of bytes in the event's info record, so that an event is looked up without a copy.
struct Handle;

impl Handle {
    /// The key of the object with file system id `fsid` and file handle `handle` (its type,
    /// then its bytes, as [`handle_at`] gives it).
    fn key(fsid: &[u8], handle: &[u8]) -> Vec<u8> {
        let bytes = (handle.len().saturating_sub(4) as u32).to_ne_bytes();
        [fsid, &bytes[..], handle].concat()
    }
}

/// Puts the agent's link `src` (its path `rel`) at `at` in the check's view (in its own upper
/// layer `base` over `layers`, or in its copy), its access time 0; gives its target.
fn lay_link(
    src: &Path,
    at: &Path,
    rel: &str,
    layers: &[PathBuf],
    base: &Path,
    copy: bool,
    m: &fs::Metadata,
) -> io::Result<String> {
    let target = fs::read_link(src)?;
    if !copy {
        if let Some(parent) = Path::new(rel).parent() {
            mirror_dirs(layers, parent, base)?;
        }
        std::os::unix::fs::symlink(&target, at)?;
        let _ = std::os::unix::fs::lchown(at, Some(m.uid()), Some(m.gid()));
    }
    unread(at, m)?;
    Ok(target.to_string_lossy().into_owned())
}

/// Of `names` in the folder `folder`, those the check sees as the agent's: not also in that
/// folder of a layer of `above` (a layer the check sees above the agent's, whose entries it
/// sees in their place).
fn agents_names<'n>(
    above: &[Beneath],
    folder: &str,
    mut names: Vec<&'n str>,
) -> io::Result<Vec<&'n str>> {
    let mut shadowed = BTreeSet::new();
    for layer in above {
        if let Some(d) = open_folder(layer, folder)? {
            each_entry(&d, |name, _| {
                shadowed.insert(name.to_bytes().to_vec());
                Ok(true)
            })?;
        }
    }
    names.retain(|n| !shadowed.contains(n.as_bytes()));
    Ok(names)
}

/// The folder `folder` beneath `top` opened for reading its entries, no link followed on the
/// way; `None` if there is none (or a link or a file is in its place).
fn open_folder(top: &Beneath, folder: &str) -> io::Result<Option<OwnedFd>> {
    match top.dir(Path::new(folder)) {
        Ok(fd) => Ok(Some(fd)),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP)
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Gives `each` the name and type of every entry of `dir`, a folder just opened, until it
/// says to stop (`false`).
fn each_entry(
    dir: &OwnedFd,
    mut each: impl FnMut(&CStr, rustix::fs::FileType) -> io::Result<bool>,
) -> io::Result<()> {
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 16 * 1024];
    let mut entries = rustix::fs::RawDir::new(dir, &mut buf);
    while let Some(e) = entries.next() {
        let e = e?;
        let name = e.file_name();
        if name != c"." && name != c".." && !each(name, e.file_type())? {
            break;
        }
    }
    Ok(())
}

/// The folder `name` of the open folder `dir`, open for reading, not followed if a link.
fn open_dir_at(dir: BorrowedFd, name: &CStr) -> io::Result<OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(rustix::fs::openat(dir, name, flags, Mode::empty())?)
}

/// Says a file system gives no file handles.
fn no_handle(e: io::Error) -> io::Error {
    io::Error::other(format!("its file system gives no file handle ({e})"))
}

/// Closes a `fanotify` group on a thread of its own: the kernel frees a group's marks after a
/// grace period that closing waits for (milliseconds), which no check run needs to wait on,
/// and closes made apart wait their grace periods together. Its events are read already.
fn close_later(fan: OwnedFd) {
    // Where no thread can be made, the close waits here.
    let _ = std::thread::Builder::new()
        .name("fanotify-close".into())
        .spawn(move || drop(fan));
}

/// Gives the link `at` access time 0 and the modification time `m` has, so that a path walk
/// that follows it moves the first (`relatime` updates an access time older than a day).
fn unread(at: &Path, m: &fs::Metadata) -> io::Result<()> {
    use rustix::fs::{utimensat, AtFlags, Timespec, Timestamps, CWD};
    let times = Timestamps {
        last_access: Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        last_modification: Timespec {
            tv_sec: m.mtime(),
            tv_nsec: m.mtime_nsec(),
        },
    };
    utimensat(CWD, at, &times, AtFlags::SYMLINK_NOFOLLOW).map_err(io::Error::from)
}

/// A `fanotify` group that reports folders' file handles and entries' names (what an
/// unprivileged user may make), and with `file_marks` files' own handles, not blocking.
///
/// A user may hold 128 groups at once (`fs.fanotify.max_user_groups`); groups of earlier check
/// runs still closing ([`close_later`]) count, so a refusal for that is tried again for up to
/// a second.
fn fan_init(file_marks: bool) -> io::Result<OwnedFd> {
    let mut tries = 0;
    // Each event names the folder (by its handle) and the entry; with `file_marks`, the file
    // too (by its own handle).
    let fid = if file_marks { libc::FAN_REPORT_FID } else { 0 };
    loop {
        // SAFETY: plain flags; the kernel returns a new descriptor or -1.
        let fd = unsafe {
            libc::fanotify_init(
                libc::FAN_CLASS_NOTIF
                    | libc::FAN_REPORT_DFID_NAME
                    | fid
                    | libc::FAN_CLOEXEC
                    | libc::FAN_NONBLOCK,
                (libc::O_RDONLY | libc::O_LARGEFILE) as u32,
            )
        };
        if fd >= 0 {
            // SAFETY: the kernel just returned this new descriptor.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EMFILE) || tries >= 200 {
            return Err(e);
        }
        tries += 1;
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Marks for opens, reads and executions the entry `name` of the open folder `dir` (not
/// followed), or with no name `dir` itself; with `folder`, every entry of the folder so
/// marked (which must be a folder).
fn fan_mark_at(
    fan: &OwnedFd,
    dir: BorrowedFd,
    name: Option<&CStr>,
    folder: bool,
) -> io::Result<()> {
    let loads = libc::FAN_OPEN | libc::FAN_ACCESS | libc::FAN_OPEN_EXEC;
    let (mut flags, mut mask) = (libc::FAN_MARK_DONT_FOLLOW, loads);
    if folder {
        flags |= libc::FAN_MARK_ONLYDIR;
        mask |= libc::FAN_EVENT_ON_CHILD;
    }
    let path = name.map_or(std::ptr::null(), CStr::as_ptr);
    // SAFETY: two valid descriptors and a C string or null (which marks `dir` itself).
    let r = unsafe {
        libc::fanotify_mark(
            fan.as_raw_fd(),
            libc::FAN_MARK_ADD | flags,
            mask,
            dir.as_raw_fd(),
            path,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The bytes of the file handle (its type, then its handle) of the entry `name` of the open
/// folder `dir`, or of `dir` itself for an empty name, as `fanotify` reports it; and the id
/// of the mount it is on.
fn handle_at(dir: BorrowedFd, name: &CStr) -> io::Result<(Vec<u8>, i32)> {
    const MAX: usize = 128;
    #[repr(C)]
    struct FileHandle {
        bytes: u32,
        kind: i32,
        data: [u8; MAX],
    }
    let mut h = FileHandle {
        bytes: MAX as u32,
        kind: 0,
        data: [0; MAX],
    };
    let mut mount_id: libc::c_int = 0;
    // Links are not followed unless `AT_SYMLINK_FOLLOW` says.
    let flags = if name.is_empty() {
        libc::AT_EMPTY_PATH
    } else {
        0
    };
    // SAFETY: a valid descriptor and C string, a handle buffer of the size it says, and an
    // int.
    let r = unsafe {
        libc::syscall(
            libc::SYS_name_to_handle_at,
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut h as *mut FileHandle,
            &mut mount_id as *mut libc::c_int,
            flags,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = (h.bytes as usize).min(MAX);
    Ok(([&h.kind.to_ne_bytes()[..], &h.data[..n]].concat(), mount_id))
}

/// Reads every queued event of `fan`, giving each object it names with the event's mask: the
/// folder it was reached by ([`Handle`]) with the entry's name, and with `file_keys` the file
/// itself with no name; an error says what may be missing.
fn drain(
    fan: &OwnedFd,
    file_keys: bool,
    mut each: impl FnMut(&[u8], Option<&[u8]>, u64),
) -> Result<(), String> {
    let mut buf = vec![0u8; 64 * 1024];
    let meta = std::mem::size_of::<libc::fanotify_event_metadata>();
    let mut overflow = false;
    loop {
        // SAFETY: a valid descriptor and a writable buffer of its length.
        let n = unsafe { libc::read(fan.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::WouldBlock {
                break;
            }
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(format!("reading the fanotify events: {e}"));
        }
        let n = n as usize;
        if n == 0 {
            break;
        }
        let mut at = 0;
        while at + meta <= n {
            // SAFETY: at least one metadata's bytes are in the buffer; read unaligned.
            let m: libc::fanotify_event_metadata =
                unsafe { std::ptr::read_unaligned(buf[at..].as_ptr().cast()) };
            let len = m.event_len as usize;
            if len < meta || at + len > n {
                break;
            }
            if m.mask & libc::FAN_Q_OVERFLOW != 0 {
                overflow = true;
            }
            let end = at + len;
            let mut info = at + m.metadata_len as usize;
            while info + 4 <= end {
                let ilen = u16::from_ne_bytes([buf[info + 2], buf[info + 3]]) as usize;
                if ilen < 4 || info + ilen > end {
                    break;
                }
                // A file's own record names it only where files are marked themselves.
                let wanted = file_keys || buf[info] != libc::FAN_EVENT_INFO_TYPE_FID;
                if let Some((object, name)) = wanted
                    .then(|| info_object(&buf[info..info + ilen]))
                    .flatten()
                {
                    each(object, name, m.mask);
                }
                info += ilen;
            }
            at = end;
        }
    }
    if overflow {
        return Err("the kernel's event queue overflowed: some loads may be missing".into());
    }
    Ok(())
}

/// The object an info record names: after its header (type u8, pad u8, len u16), the file
/// system's id and the `file_handle` ([`Handle`]); for a folder-and-name record, also the
/// entry's name, which follows ended by a NUL.
fn info_object(info: &[u8]) -> Option<(&[u8], Option<&[u8]>)> {
    let named = match *info.first()? {
        libc::FAN_EVENT_INFO_TYPE_FID => false,
        libc::FAN_EVENT_INFO_TYPE_DFID_NAME => true,
        _ => return None,
    };
    let hb = u32::from_ne_bytes(info.get(12..16)?.try_into().ok()?) as usize;
    let object = info.get(4..20 + hb)?;
    let name = match named {
        false => None,
        true => {
            let rest = info.get(20 + hb..)?;
            Some(&rest[..rest.iter().position(|&b| b == 0)?])
        }
    };
    Some((object, name))
}

/// Whether a Python module named `module` is installed in the check's root `root` (`/`, or
/// an image's root folder), whose `PATH` is `path`: in the standard library or the site
/// packages of a Python under `/usr`, `/usr/local` or the prefix of a `PATH` folder (a
/// pyenv's versions too), the workspace never counted. The names are read once per root.
pub fn installed_module(root: &Path, path: &str, module: &str) -> bool {
    use std::sync::{Mutex, OnceLock};
    type Names = HashMap<(PathBuf, String), std::sync::Arc<BTreeSet<String>>>;
    static SEEN: OnceLock<Mutex<Names>> = OnceLock::new();
    let key = (root.to_path_buf(), path.to_string());
    let names = {
        let mut seen = SEEN
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        seen.entry(key)
            .or_insert_with(|| std::sync::Arc::new(python_names(root, path)))
            .clone()
    };
    names.contains(module)
}

/// Every top-level module name of the Pythons of `root` (see [`installed_module`]).
fn python_names(root: &Path, path: &str) -> BTreeSet<String> {
    let mut prefixes: Vec<PathBuf> = vec![root.join("usr"), root.join("usr/local")];
    for dir in path.split(':').filter(|d| d.starts_with('/')) {
        let inside = root.join(dir.trim_start_matches('/'));
        if let Some(prefix) = inside.parent() {
            prefixes.push(prefix.to_path_buf());
            // pyenv: `~/.pyenv/shims` runs one of `~/.pyenv/versions/*`.
            if let Ok(versions) = fs::read_dir(prefix.join("versions")) {
                prefixes.extend(versions.filter_map(Result::ok).map(|e| e.path()));
            }
        }
    }
    let mut names = BTreeSet::new();
    for prefix in prefixes {
        let Ok(libs) = fs::read_dir(prefix.join("lib")) else {
            continue;
        };
        for lib in libs.filter_map(Result::ok) {
            if !lib.file_name().to_string_lossy().starts_with("python3") {
                continue;
            }
            for sub in ["", "site-packages", "dist-packages", "lib-dynload"] {
                let Ok(entries) = fs::read_dir(lib.path().join(sub)) else {
                    continue;
                };
                for e in entries.filter_map(Result::ok) {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let stem = name.split('.').next().unwrap_or_default();
                    let module = e.file_type().is_ok_and(|t| t.is_dir()) && !name.contains('.')
                        || [".py", ".pyc", ".so"].iter().any(|x| name.ends_with(x));
                    if module && !stem.is_empty() {
                        names.insert(stem.to_string());
                    }
                }
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bytecode_in_pycache_is_hidden() {
        assert!(cached_bytecode("__pycache__/lib.cpython-311.pyc"));
        assert!(cached_bytecode("src/__pycache__/lib.cpython-311.opt-1.pyc"));
        assert!(!cached_bytecode("lib.pyc"));
        assert!(!cached_bytecode("__pycache__/notes.txt"));
    }

    /// `workspace` watched twice: with no kinds told (its folders read), and told that
    /// `links` are its links.
    fn told_and_not(workspace: &[&str], links: &[&str]) -> [Watch; 2] {
        let watch = Watch {
            workspace: workspace.iter().map(|w| w.to_string()).collect(),
            ..Watch::default()
        };
        let kinds = NotFiles {
            links: links.iter().map(|l| l.to_string()).collect(),
            ..NotFiles::default()
        };
        [
            watch.clone(),
            watch.with_kinds([kinds, NotFiles::default()]),
        ]
    }

    #[test]
    fn a_read_of_a_marked_file_is_seen_and_one_of_an_unmarked_file_is_not() {
        for watch in told_and_not(&["a.txt", "b.txt", "l"], &["l"]) {
            a_read_is_seen(&watch);
        }
    }

    fn a_read_is_seen(watch: &Watch) {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().join("top");
        fs::create_dir_all(&top).unwrap();
        fs::write(top.join("a.txt"), "a").unwrap();
        fs::write(top.join("b.txt"), "b").unwrap();
        std::os::unix::fs::symlink("a.txt", top.join("l")).unwrap();
        let tree = EndTree::Copy { dir: top.clone() };
        let scratch = dir.path().join("c");
        super::super::copy_tree(&top, &scratch.join("ws")).unwrap();
        let o = Observer::start(watch, &tree, &[], None, &scratch);
        assert!(o.incomplete.is_empty(), "{:?}", o.incomplete);
        assert_eq!(fs::read_to_string(scratch.join("ws/l")).unwrap(), "a");
        let seen = o.finish();
        let files: Vec<(&str, &[Access])> = seen
            .files
            .iter()
            .map(|f| (f.path.as_str(), &f.how[..]))
            .collect();
        assert_eq!(
            files,
            [("a.txt", &[Access::Opened, Access::Read][..])],
            "{seen:?}"
        );
        assert_eq!(seen.links.len(), 1);
        assert!(seen.links[0].followed, "{seen:?}");
        assert_eq!(seen.links[0].target, "a.txt");
    }

    #[test]
    fn in_a_copy_the_agents_file_is_followed_not_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().join("top");
        fs::create_dir_all(top.join("sub")).unwrap();
        for f in ["sub/replaced.txt", "sub/moved.txt"] {
            fs::write(top.join(f), "agent").unwrap();
        }
        let watch = Watch {
            workspace: vec!["sub/replaced.txt".into(), "sub/moved.txt".into()],
            ..Watch::default()
        };
        let tree = EndTree::Copy { dir: top.clone() };
        let scratch = dir.path().join("c");
        super::super::copy_tree(&top, &scratch.join("ws")).unwrap();
        let o = Observer::start(&watch, &tree, &[], None, &scratch);
        // A copy's files are marked themselves, not its folders.
        assert_eq!(o.marked, 2);
        assert!(o.file_marks);
        let ws = scratch.join("ws/sub");
        // The check's own file under the agent's name is not the agent's ...
        fs::remove_file(ws.join("replaced.txt")).unwrap();
        fs::write(ws.join("replaced.txt"), "the check's own").unwrap();
        fs::read(ws.join("replaced.txt")).unwrap();
        // ... and the agent's file under another name still is.
        fs::rename(ws.join("moved.txt"), scratch.join("elsewhere.txt")).unwrap();
        fs::read(scratch.join("elsewhere.txt")).unwrap();
        let seen = o.finish();
        let paths: Vec<&str> = seen.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["sub/moved.txt"], "{seen:?}");
        assert_eq!(seen.incomplete, None);
    }

    #[test]
    fn one_mark_per_folder_watches_every_file_in_it() {
        let rels: Vec<String> = (0..40)
            .map(|i| match i % 3 {
                0 => format!("a/f{i}"),
                1 => format!("a/b/f{i}"),
                _ => format!("a/b/c/f{i}"),
            })
            .collect();
        // The agent's link `a/b/l`, and `0` a link to `a` in place of the folder it had (the
        // first folder marked, before any file system's id is known).
        let mut watched: Vec<&str> = rels.iter().map(String::as_str).collect();
        watched.extend(["a/b/l", "0/f0"]);
        for watch in told_and_not(&watched, &["a/b/l", "0"]) {
            one_mark_per_folder(&watch, &rels);
        }
    }

    fn one_mark_per_folder(watch: &Watch, rels: &[String]) {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().join("top");
        fs::create_dir_all(top.join("a/b/c")).unwrap();
        for rel in rels {
            fs::write(top.join(rel), "x").unwrap();
        }
        fs::write(top.join("a/unchanged"), "x").unwrap();
        std::os::unix::fs::symlink("f1", top.join("a/b/l")).unwrap();
        std::os::unix::fs::symlink("a", top.join("0")).unwrap();
        // The agent's layer, read-only to the check: its folders are marked.
        let tree = EndTree::Overlay {
            top: top.clone(),
            lowers: vec![],
        };
        let scratch = dir.path().join("c");
        fs::create_dir_all(scratch.join("upper")).unwrap();
        let o = Observer::start(watch, &tree, &[], None, &scratch);
        // `a`, `a/b` and `a/b/c`; not `0`, a link.
        assert_eq!(o.marked, 3, "{:?}", watch.kinds);
        assert!(o.incomplete.is_empty(), "{:?}", o.incomplete);
        for rel in rels.iter().chain(["a/unchanged".to_string()].iter()) {
            fs::read(top.join(rel)).unwrap();
        }
        // The agent's link is laid in the check's view (where a `readlink` would count as
        // following it), untouched until followed.
        let laid = fs::symlink_metadata(scratch.join("upper/a/b/l")).unwrap();
        assert!(laid.file_type().is_symlink());
        let seen = o.finish();
        let mut paths: Vec<String> = seen.files.iter().map(|f| f.path.clone()).collect();
        paths.sort();
        let mut rels = rels.to_vec();
        rels.sort();
        assert_eq!(paths, rels);
        let links: Vec<(&str, bool)> = seen
            .links
            .iter()
            .map(|l| (l.path.as_str(), l.followed))
            .collect();
        assert_eq!(links, [("a/b/l", false)], "{seen:?}");
    }
}
