//! What a check loads of the agent's changes, seen rather than predicted.
//!
//! For every check run, each regular file the agent added or changed (in the workspace, and in
//! the trial's root where the checks see it) gets a `fanotify` inode mark held by the runner,
//! outside the check's sandbox: the kernel queues an event on the runner's descriptor whenever
//! any process opens, reads or executes that inode, through the check's overlay or not (the
//! agent's layer is a lower layer the overlay reads the real inode of). The code under test
//! cannot undo a queued event, and inode marks need no privilege (`FAN_REPORT_FID`: each event
//! names a file handle, matched here to the path it was taken for). A followed link makes no
//! `fanotify` event, so each link the agent made is also put in the check's own upper layer
//! (the same link, its modification time kept, its access time 0): a path walk that follows it
//! (or a `readlink`) moves its access time, read once the check is over. Python bytecode the
//! agent left in `__pycache__` is hidden from the check outright ([`hide_bytecode`]): a cache
//! Python rebuilds from the source the agent wrote, so hiding it is honest, and no bytecode of
//! the agent's stands in for its source (`-I` and `-E` checks included, which ignore
//! `PYTHONPYCACHEPREFIX`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use proctor_score::audit::observed::{
    Access, CheckObservation, ObservedFile, ObservedLink, OBSERVED_LISTED,
};
use proctor_score::endstate::{ChangeKind, FileChange};

use super::EndTree;

/// What the agent changed, which a check's observation watches: workspace-relative paths and
/// root-relative paths of every entry it added or changed (not deleted, not folders).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Watch {
    /// In the workspace.
    pub workspace: Vec<String>,
    /// In the trial's root (`check_root = "agent"`).
    pub root: Vec<String>,
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
        }
    }
}

/// The most inode marks one check run holds; past it files are not watched, and the record
/// says so.
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
    /// Each marked inode's file handle (with its file system's id), to the path and whether
    /// it is the root's.
    handles: HashMap<Vec<u8>, (String, bool)>,
    /// File systems' ids by device, found once.
    fsids: HashMap<u64, [u8; 8]>,
    /// Each link: its path, its target, and where its watched copy is.
    links: Vec<(String, String, PathBuf)>,
    /// What could not be watched.
    incomplete: Vec<String>,
    /// Entries past [`WATCH_MAX`].
    unwatched: u64,
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
            handles: HashMap::new(),
            fsids: HashMap::new(),
            links: Vec::new(),
            incomplete: Vec::new(),
            unwatched: 0,
        };
        match fan_init() {
            Ok(fd) => o.fan = Some(fd),
            Err(e) => o
                .incomplete
                .push(format!("no fanotify group ({e}): files are not watched")),
        }
        let (files_at, links_at, layers): (PathBuf, PathBuf, Vec<PathBuf>) = match tree {
            EndTree::Overlay { top, lowers } => (
                top.clone(),
                dir.join("upper"),
                std::iter::once(top.clone())
                    .chain(lowers.iter().cloned())
                    .collect(),
            ),
            EndTree::Copy { .. } => (dir.join("ws"), dir.join("ws"), Vec::new()),
        };
        let copy = matches!(tree, EndTree::Copy { .. });
        for rel in &watch.workspace {
            if above
                .iter()
                .any(|l| fs::symlink_metadata(l.join(rel)).is_ok())
            {
                continue;
            }
            let src = files_at.join(rel);
            let Ok(m) = fs::symlink_metadata(&src) else {
                continue;
            };
            if o.handles.len() + o.links.len() >= WATCH_MAX {
                o.unwatched += 1;
                continue;
            }
            if m.is_file() {
                o.mark(&src, rel, false, &m);
            } else if m.file_type().is_symlink() {
                let at = links_at.join(rel);
                match o.lay_link(&src, &at, rel, &layers, &links_at, copy, &m) {
                    Ok(target) => o.links.push((rel.clone(), target, at)),
                    Err(e) => o
                        .incomplete
                        .push(format!("the link `{rel}` is not watched: {e}")),
                }
            }
        }
        if let Some(root) = agent_root {
            for rel in &watch.root {
                let src = root.join(rel);
                let Ok(m) = fs::symlink_metadata(&src) else {
                    continue;
                };
                if m.is_file() {
                    if o.handles.len() >= WATCH_MAX {
                        o.unwatched += 1;
                        continue;
                    }
                    o.mark(&src, rel, true, &m);
                }
            }
        }
        o
    }

    /// Marks the file `src`, the agent's `rel`.
    fn mark(&mut self, src: &Path, rel: &str, root: bool, m: &fs::Metadata) {
        let Some(fan) = &self.fan else { return };
        let fsid = match self.fsids.get(&m.dev()) {
            Some(f) => *f,
            None => match fsid(src) {
                Ok(f) => *self.fsids.entry(m.dev()).or_insert(f),
                Err(e) => {
                    self.incomplete
                        .push(format!("`{rel}` is not watched: statfs: {e}"));
                    return;
                }
            },
        };
        let key = match handle(src) {
            Ok(h) => [&fsid[..], &h[..]].concat(),
            Err(e) => {
                self.incomplete.push(format!(
                    "`{rel}` is not watched: its file system gives no file handle ({e})"
                ));
                return;
            }
        };
        if let Err(e) = fan_mark(fan, src) {
            self.incomplete.push(format!("`{rel}` is not watched: {e}"));
            return;
        }
        self.handles.insert(key, (rel.to_string(), root));
    }

    /// Puts the agent's link `src` at `at` in the check's view (in its own upper layer, or in
    /// its copy), its access time 0; gives its target.
    #[allow(clippy::too_many_arguments)]
    fn lay_link(
        &self,
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

    /// Ends the watch once the check is over: what it loaded, bounded.
    pub fn finish(self) -> CheckObservation {
        let mut seen: BTreeMap<(String, bool), BTreeSet<Access>> = BTreeMap::new();
        let mut incomplete = self.incomplete;
        if let Some(fan) = &self.fan {
            if let Err(e) = drain(fan, |key, access| {
                if let Some((rel, root)) = self.handles.get(key) {
                    seen.entry((rel.clone(), *root)).or_default().insert(access);
                }
            }) {
                incomplete.push(e);
            }
        }
        let mut out = CheckObservation::default();
        for ((path, root), how) in seen {
            if out.files.len() >= OBSERVED_LISTED {
                out.omitted += 1;
                continue;
            }
            out.files.push(ObservedFile {
                path,
                root,
                how: how.into_iter().collect(),
            });
        }
        for (path, target, at) in self.links {
            if out.links.len() >= OBSERVED_LISTED {
                out.omitted += 1;
                continue;
            }
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
                "{} changed entries past the first {WATCH_MAX} are not watched",
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

/// A `fanotify` group that reports file handles (what an unprivileged user may make), not
/// blocking.
///
/// A user may hold 128 groups at once (`fs.fanotify.max_user_groups`); groups of earlier check
/// runs still closing ([`close_later`]) count, so a refusal for that is tried again for up to
/// a second.
fn fan_init() -> io::Result<OwnedFd> {
    let mut tries = 0;
    loop {
        // SAFETY: plain flags; the kernel returns a new descriptor or -1.
        let fd = unsafe {
            libc::fanotify_init(
                libc::FAN_CLASS_NOTIF
                    | libc::FAN_REPORT_FID
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

/// Marks the inode at `path` for opens, reads and executions.
fn fan_mark(fan: &OwnedFd, path: &Path) -> io::Result<()> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::other("a path with a NUL byte"))?;
    // SAFETY: a valid descriptor and C string.
    let r = unsafe {
        libc::fanotify_mark(
            fan.as_raw_fd(),
            libc::FAN_MARK_ADD | libc::FAN_MARK_DONT_FOLLOW,
            libc::FAN_OPEN | libc::FAN_ACCESS | libc::FAN_OPEN_EXEC,
            libc::AT_FDCWD,
            c.as_ptr(),
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The id of the file system holding `path`, as `fanotify` reports it (`statfs`'s `f_fsid`).
fn fsid(path: &Path) -> io::Result<[u8; 8]> {
    let st = rustix::fs::statfs(path).map_err(io::Error::from)?;
    // SAFETY: `fsid_t` is two plain C ints, eight bytes with no padding.
    let bytes: [u8; 8] = unsafe { std::mem::transmute(st.f_fsid) };
    Ok(bytes)
}

/// The bytes of the file handle of `path` (its type, then its handle), as `fanotify` reports
/// it.
fn handle(path: &Path) -> io::Result<Vec<u8>> {
    const MAX: usize = 128;
    #[repr(C)]
    struct FileHandle {
        bytes: u32,
        kind: i32,
        data: [u8; MAX],
    }
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::other("a path with a NUL byte"))?;
    let mut h = FileHandle {
        bytes: MAX as u32,
        kind: 0,
        data: [0; MAX],
    };
    let mut mount_id: libc::c_int = 0;
    // SAFETY: a valid C string, a handle buffer of the size it says, and an int.
    let r = unsafe {
        libc::syscall(
            libc::SYS_name_to_handle_at,
            libc::AT_FDCWD,
            c.as_ptr(),
            &mut h as *mut FileHandle,
            &mut mount_id as *mut libc::c_int,
            // Links are not followed unless `AT_SYMLINK_FOLLOW` says.
            0,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = (h.bytes as usize).min(MAX);
    Ok([&h.kind.to_ne_bytes()[..], &h.data[..n]].concat())
}

/// Reads every queued event of `fan`, giving each its key (file system id, handle type and
/// handle, as [`Observer::handles`] holds them) and what was done; an error says what may be
/// missing.
fn drain(fan: &OwnedFd, mut each: impl FnMut(&[u8], Access)) -> Result<(), String> {
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
            // Merged events carry every bit that happened.
            let accesses: Vec<Access> = [
                (libc::FAN_OPEN, Access::Opened),
                (libc::FAN_ACCESS, Access::Read),
                (libc::FAN_OPEN_EXEC, Access::Executed),
            ]
            .into_iter()
            .filter(|(bit, _)| m.mask & bit != 0)
            .map(|(_, a)| a)
            .collect();
            // Info records: a header (type u8, pad u8, len u16), then for a file id the file
            // system's id (8 bytes) and a `file_handle` (bytes u32, type i32, handle).
            let mut info = at + m.metadata_len as usize;
            while info + 4 <= at + len {
                let kind = buf[info];
                let ilen = u16::from_ne_bytes([buf[info + 2], buf[info + 3]]) as usize;
                if ilen < 4 || info + ilen > at + len {
                    break;
                }
                if kind == libc::FAN_EVENT_INFO_TYPE_FID && ilen >= 4 + 8 + 8 {
                    let fsid = &buf[info + 4..info + 12];
                    let hb = u32::from_ne_bytes([
                        buf[info + 12],
                        buf[info + 13],
                        buf[info + 14],
                        buf[info + 15],
                    ]) as usize;
                    // The handle's type (4 bytes) and its `hb` bytes, as [`handle`] keys it.
                    let start = info + 16;
                    let end = (start + 4 + hb).min(info + ilen);
                    let key = [fsid, &buf[start..end]].concat();
                    for a in &accesses {
                        each(&key, *a);
                    }
                }
                info += ilen;
            }
            at += len;
        }
    }
    if overflow {
        return Err("the kernel's event queue overflowed: some loads may be missing".into());
    }
    Ok(())
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

    #[test]
    fn a_read_of_a_marked_file_is_seen_and_one_of_an_unmarked_file_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().join("top");
        fs::create_dir_all(&top).unwrap();
        fs::write(top.join("a.txt"), "a").unwrap();
        fs::write(top.join("b.txt"), "b").unwrap();
        std::os::unix::fs::symlink("a.txt", top.join("l")).unwrap();
        let watch = Watch {
            workspace: vec!["a.txt".into(), "b.txt".into(), "l".into()],
            root: vec![],
        };
        let tree = EndTree::Copy { dir: top.clone() };
        let scratch = dir.path().join("c");
        super::super::copy_tree(&top, &scratch.join("ws")).unwrap();
        let o = Observer::start(&watch, &tree, &[], None, &scratch);
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
}
