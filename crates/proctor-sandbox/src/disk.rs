//! The trial's disk: one tmpfs of the trial's `disk_bytes`, mounted by T inside the trial's user
//! namespace (no privilege on the host needed), that holds every place the trial may write: the
//! workspace's upper layer, an image root's upper layer, `/tmp`, `HOME` and `/dev/shm`. A write
//! past its size fails with ENOSPC, like a full disk.
//!
//! The tmpfs lives only as long as the trial's mount namespace. What the parent laid into the
//! host's upper folder before the start (a variant's files) is moved onto it first. In copy mode
//! the workspace is a whole copy of the start state, made on the disk before the disk is
//! bounded: the disk holds the copy plus `disk_bytes` and their entries, so the start state
//! never counts against the agent, and what the agent writes is bounded as in overlay mode. At
//! the end, once every process of the trial is gone, T moves the workspace's upper layer (or
//! the whole copy) into the host's folder (where the parent reads the changes from), entry by
//! entry with its
//! overlay attributes (whiteouts, opaque directories), freeing each file's memory as it is
//! copied. The move is faithful and harmless ([`crate::copy`]): a sparse file keeps its holes,
//! a file with several names is moved once and linked, and no entry keeps a set-user-ID,
//! set-group-ID or sticky bit (its real mode is kept in [`crate::copy::MODE_XATTR`]).

use std::fs::{self, OpenOptions};
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::copy::{self, CopyOptions, Links};
use crate::report::{LeftOut, LEFT_OUT_MAX};
use crate::sys;

/// How often T says it is still at work while it moves a layer off the disk.
const BEAT: std::time::Duration = std::time::Duration::from_secs(2);

/// Where the disk is mounted in T's temporary root while the new root is built.
const MOUNT_POINT: &str = "/disk";

/// The disk's bytes per entry (file, folder, link, whiteout) it can hold: one per 16 KiB, as
/// `mkfs.ext4` makes a file system by default. Every entry the agent makes is a change proctor
/// holds in memory while it grades the trial, so the count is bounded like the bytes.
const BYTES_PER_ENTRY: u64 = 16 << 10;

/// The fewest entries a disk holds, however small.
const MIN_ENTRIES: u64 = 16_384;

/// How many entries a trial's disk of `bytes` holds (a write past it fails with ENOSPC, as on
/// a full disk): 262,144 for the default 4 GiB.
pub(crate) fn entries_for(bytes: u64) -> u64 {
    (bytes / BYTES_PER_ENTRY).max(MIN_ENTRIES)
}

/// A part of the trial's disk: a folder on it with the mode it is made with.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Part {
    /// The workspace overlay's upper layer.
    WorkspaceUpper,
    /// The workspace overlay's work folder.
    WorkspaceWork,
    /// An image root's upper layer.
    RootUpper,
    /// An image root's work folder.
    RootWork,
    /// `/tmp`.
    Tmp,
    /// `HOME`.
    Home,
    /// `/dev/shm`.
    Shm,
}

impl Part {
    const ALL: [Part; 7] = [
        Part::WorkspaceUpper,
        Part::WorkspaceWork,
        Part::RootUpper,
        Part::RootWork,
        Part::Tmp,
        Part::Home,
        Part::Shm,
    ];

    fn name(self) -> &'static str {
        match self {
            Part::WorkspaceUpper => "ws-upper",
            Part::WorkspaceWork => "ws-work",
            Part::RootUpper => "root-upper",
            Part::RootWork => "root-work",
            Part::Tmp => "tmp",
            Part::Home => "home",
            Part::Shm => "shm",
        }
    }

    fn mode(self) -> u32 {
        match self {
            Part::Tmp | Part::Shm => 0o1777,
            _ => 0o755,
        }
    }
}

/// What of the workspace the disk holds while the trial runs, and the host's folder it goes to at
/// the end.
pub(crate) enum OnDisk {
    /// The overlay's upper layer (as seen in T's temporary root): what the parent laid in.
    Upper(PathBuf),
    /// Copy mode's workspace: the start state's copy to copy onto the disk, and the empty
    /// folder the workspace goes to at the end.
    Copy {
        /// The start state (the caller's, never written).
        start: PathBuf,
        /// The end state's folder.
        dir: PathBuf,
    },
}

/// How much more a disk that receives a copy may hold until it is bounded (a bound set after the
/// copy is on it: tmpfs cannot bound a disk mounted unbounded).
const UNTIL_BOUNDED: (u64, u64) = (1 << 40, 1 << 30);

/// The mounted disk: a handle on its root that outlives the temporary root it was mounted in.
pub(crate) struct TrialDisk {
    root: OwnedFd,
    /// The host's folder of the workspace (its upper layer, or the copy), where it goes at the end.
    host_upper: Option<OwnedFd>,
    /// The host's upper folder of an image root whose changes are carried out for the checks.
    host_root_upper: Option<OwnedFd>,
}

impl TrialDisk {
    /// Mounts a tmpfs of `bytes` and makes its parts. Runs in T's temporary root, where the host
    /// is still reachable: `workspace` and `host_root_upper` (as seen there) are held open for
    /// the moves at the end. A copy (`OnDisk::Copy`) is made on it first, and the disk then
    /// bounded to what it holds plus `bytes` (and as many more entries as `bytes` allows).
    pub(crate) fn mount(
        bytes: u64,
        workspace: Option<&OnDisk>,
        host_root_upper: Option<&Path>,
    ) -> Result<TrialDisk, String> {
        let at = Path::new(MOUNT_POINT);
        fs::create_dir_all(at).map_err(|e| format!("mkdir {MOUNT_POINT}: {e}"))?;
        let copy = matches!(workspace, Some(OnDisk::Copy { .. }));
        let (size, entries) = match copy {
            true => (
                bytes.saturating_add(UNTIL_BOUNDED.0),
                entries_for(bytes).saturating_add(UNTIL_BOUNDED.1),
            ),
            false => (bytes, entries_for(bytes)),
        };
        sys::mount(
            Some(std::ffi::OsStr::new("tmpfs")),
            at,
            Some("tmpfs"),
            libc::MS_NOSUID | libc::MS_NODEV,
            Some(&format!("size={size},nr_inodes={entries},mode=0755")),
        )
        .map_err(|e| format!("mount the trial's disk (a tmpfs of {bytes} bytes): {e}"))?;
        for part in Part::ALL {
            let dir = at.join(part.name());
            fs::create_dir(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
            fs::set_permissions(&dir, fs::Permissions::from_mode(part.mode()))
                .map_err(|e| format!("chmod {}: {e}", dir.display()))?;
        }
        let root = open_path(at).map_err(|e| format!("open {MOUNT_POINT}: {e}"))?;
        let upper = at.join(Part::WorkspaceUpper.name());
        let host_upper = match workspace {
            Some(OnDisk::Upper(p)) => {
                // What the parent laid into the upper layer before the start (a variant's
                // files) moves onto the disk, where the overlay will have it.
                move_all(p, &upper)
                    .and_then(|()| clear(p))
                    .map_err(|e| format!("move {} onto the trial's disk: {e}", p.display()))?;
                Some(open_path(p).map_err(|e| format!("open {}: {e}", p.display()))?)
            }
            Some(OnDisk::Copy { start, dir }) => {
                copy::copy_tree(start, &upper)
                    .map_err(|e| format!("copy {} onto the trial's disk: {e}", start.display()))?;
                Some(open_path(dir).map_err(|e| format!("open {}: {e}", dir.display()))?)
            }
            None => None,
        };
        if copy {
            bound(at, bytes)?;
        }
        let host_root_upper = host_root_upper
            .map(|p| open_path(p).map_err(|e| format!("open {}: {e}", p.display())))
            .transpose()?;
        Ok(TrialDisk {
            root,
            host_upper,
            host_root_upper,
        })
    }

    /// Where `part` is while the new root is built.
    pub(crate) fn at(&self, part: Part) -> PathBuf {
        Path::new(MOUNT_POINT).join(part.name())
    }

    /// Once every process of the trial is gone (after the pivot, in T's own `/proc`: see
    /// [`sys::OwnProc`]): whether the disk is full, after which the workspace's changes are moved to the
    /// host's upper folder (and the root's to its own, when they are kept). An entry the agent
    /// made that cannot be moved (a name the host's file system refuses; a path of any length
    /// is moved, by open folders) is left out with its cause, and the rest is moved: what the agent made never fails the
    /// trial's end. Returns the workspace's left-outs, then the root's.
    /// `beat` is called every few seconds while the moves go on (T tells the watchdog it is
    /// still at work).
    pub(crate) fn finish(
        &self,
        beat: &mut dyn FnMut(),
    ) -> Result<(bool, LeftOuts, LeftOuts), String> {
        let root = sys::fd_path(&self.root);
        let full = is_full(&root).map_err(|e| format!("statfs the trial's disk: {e}"))?;
        let mut left = LeftOuts::default();
        if let Some(host) = &self.host_upper {
            move_tree(
                (
                    &root.join(Part::WorkspaceUpper.name()),
                    &sys::fd_path(host),
                    Path::new(sys::OWN_FDS),
                ),
                Path::new(""),
                &mut left,
                (&mut Links::default(), &mut Beat::every(BEAT, &mut *beat)),
            )
            .map_err(|e| format!("move the workspace's changes out of the trial's disk: {e}"))?;
        }
        let mut root_left = LeftOuts::default();
        if let Some(host) = &self.host_root_upper {
            move_tree(
                (
                    &root.join(Part::RootUpper.name()),
                    &sys::fd_path(host),
                    Path::new(sys::OWN_FDS),
                ),
                Path::new(""),
                &mut root_left,
                (&mut Links::default(), &mut Beat::every(BEAT, &mut *beat)),
            )
            .map_err(|e| format!("move the root's changes out of the trial's disk: {e}"))?;
        }
        Ok((full, left, root_left))
    }
}

/// What could not be moved out of the trial's disk: the first [`LEFT_OUT_MAX`] entries with
/// their causes, and a count of the rest.
#[derive(Debug, Default)]
pub(crate) struct LeftOuts {
    /// The entries listed.
    pub(crate) listed: Vec<LeftOut>,
    /// How many more there were.
    pub(crate) more: u64,
}

impl LeftOuts {
    fn push(&mut self, path: PathBuf, e: &io::Error) {
        if self.listed.len() < LEFT_OUT_MAX {
            self.listed.push(LeftOut {
                path,
                cause: e.to_string(),
            });
        } else {
            self.more += 1;
        }
    }
}

/// `open(O_PATH | O_DIRECTORY)`.
fn open_path(p: &Path) -> io::Result<OwnedFd> {
    let c = sys::cstring(p)?;
    // SAFETY: a valid C string; the flags need no further arguments.
    let fd = sys::check(unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: the kernel just returned this new descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Bounds the disk at `at` to what it holds now plus `bytes`, and its entries to those it holds
/// plus [`entries_for`]`(bytes)`.
fn bound(at: &Path, bytes: u64) -> Result<(), String> {
    let s = statvfs(at).map_err(|e| format!("statfs the trial's disk: {e}"))?;
    let used = (s.f_blocks - s.f_bfree).saturating_mul(s.f_frsize);
    let used_entries = s.f_files - s.f_ffree;
    let (size, entries) = (
        used.saturating_add(bytes),
        used_entries.saturating_add(entries_for(bytes)),
    );
    sys::mount(
        None,
        at,
        None,
        libc::MS_REMOUNT | libc::MS_NOSUID | libc::MS_NODEV,
        Some(&format!("size={size},nr_inodes={entries}")),
    )
    .map_err(|e| format!("bound the trial's disk to {size} bytes and {entries} entries: {e}"))
}

fn statvfs(p: &Path) -> io::Result<rustix::fs::StatVfs> {
    rustix::fs::statvfs(p).map_err(io::Error::from)
}

/// Whether the disk at `p` is full: no byte or no entry left.
fn is_full(p: &Path) -> io::Result<bool> {
    let s = statvfs(p)?;
    Ok(s.f_bfree == 0 || s.f_ffree == 0)
}

/// Moves the overlay upper layer `from` into the empty folder `to`: folders (with their opaque
/// marks), files, symlinks, fifos, sockets and whiteouts, each with its mode. Each file's
/// memory in `from` is given back as it is copied. `rel` is where `from` is in the layer; an
/// entry below it that cannot be moved is noted in `left` (with everything below it) and the
/// rest is moved; only a failure to list `from` itself is an error. Without recursion: a tree of
/// any depth costs no stack (each folder gets its mode and owner once all it holds is moved,
/// deepest first).
fn move_tree(
    (from, to, fds): (&Path, &Path, &Path),
    rel: &Path,
    left: &mut LeftOuts,
    (links, beat): (&mut Links<PathBuf>, &mut Beat<'_>),
) -> io::Result<()> {
    // Both trees by open folders: a path past PATH_MAX is moved like any other.
    let mut src = proctor_fs::Deep::open(from)?.with_fds(fds);
    let mut dst = proctor_fs::Deep::open(to)?.with_fds(fds);
    let mut pending: Vec<PathBuf> = Vec::new();
    let mut folders: Vec<(PathBuf, fs::Metadata)> = Vec::new();
    let mut step = |inner: &Path,
                    (pending, folders): (&mut Vec<PathBuf>, &mut Vec<(PathBuf, fs::Metadata)>),
                    left: &mut LeftOuts,
                    beat: &mut Beat<'_>|
     -> io::Result<()> {
        let mut names: Vec<std::ffi::OsString> = fs::read_dir(&*src.reach(inner)?)?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<io::Result<_>>()?;
        names.sort();
        for name in names {
            let cinner = inner.join(&name);
            let moved = src.reach(&cinner).and_then(|s| {
                let d = dst.reach(&cinner)?;
                move_entry(&s, &d, &cinner, (&mut dst, links))
            });
            match moved {
                Ok(Some(meta)) => {
                    folders.push((cinner.clone(), meta));
                    pending.push(cinner);
                }
                Ok(None) => {}
                Err(e) => left.push(rel.join(&cinner), &e),
            }
            // Within a folder too: one folder may hold every entry the disk allows.
            beat.maybe();
        }
        Ok(())
    };
    step(Path::new(""), (&mut pending, &mut folders), left, beat)?;
    while let Some(dir) = pending.pop() {
        if let Err(e) = step(&dir, (&mut pending, &mut folders), left, beat) {
            left.push(rel.join(&dir), &e);
        }
    }
    // Each folder's mode, owner and times once all it holds is moved, deepest first.
    for (inner, meta) in folders.iter().rev() {
        if let Err(e) = dst.reach(inner).and_then(|d| finish_entry(&d, meta)) {
            left.push(rel.join(inner), &e);
        }
        beat.maybe();
    }
    Ok(())
}

/// T's word, every so often while a move goes on ([`BEAT`]), that it is still at work.
struct Beat<'a> {
    every: std::time::Duration,
    last: std::time::Instant,
    beat: &'a mut dyn FnMut(),
}

impl<'a> Beat<'a> {
    fn every(every: std::time::Duration, beat: &'a mut dyn FnMut()) -> Beat<'a> {
        Beat {
            every,
            last: std::time::Instant::now(),
            beat,
        }
    }

    /// Calls the beat when `every` has passed since the last.
    fn maybe(&mut self) {
        if self.last.elapsed() >= self.every {
            (self.beat)();
            self.last = std::time::Instant::now();
        }
    }
}

/// [`move_tree`] of proctor's own files (laid in before the start), where any entry that cannot
/// be moved is an error.
fn move_all(from: &Path, to: &Path) -> io::Result<()> {
    let mut left = LeftOuts::default();
    let fds = Path::new("/proc/self/fd");
    move_tree(
        (from, to, fds),
        Path::new(""),
        &mut left,
        (&mut Links::default(), &mut Beat::every(BEAT, &mut || {})),
    )?;
    match left.listed.into_iter().next() {
        Some(l) => Err(io::Error::other(format!(
            "{}: {}",
            l.path.display(),
            l.cause
        ))),
        None => Ok(()),
    }
}

/// Moves one entry of an upper layer; a folder is only made (with its opaque mark), and its
/// metadata returned: the caller moves what it holds, then gives it its mode and owner
/// ([`finish_entry`]). A later name of a file already moved becomes a hard link to its copy.
fn move_entry(
    src: &Path,
    dst: &Path,
    inner: &Path,
    (tree, links): (&mut proctor_fs::Deep, &mut Links<PathBuf>),
) -> io::Result<Option<fs::Metadata>> {
    let meta = fs::symlink_metadata(src)?;
    let ft = meta.file_type();
    let mode = meta.mode() & 0o7777;
    let harmless = copy::harmless_mode(mode);
    if ft.is_dir() {
        fs::create_dir(dst)?;
        copy_xattrs(src, dst)?;
        return Ok(Some(meta));
    } else if ft.is_symlink() {
        std::os::unix::fs::symlink(fs::read_link(src)?, dst)?;
        keep_owner(dst, &meta)?;
        return keep_times(dst, &meta).map(|()| None);
    } else if ft.is_file() {
        if let Some(first) = links.copied(&meta) {
            let first = tree.reach(first)?;
            return fs::hard_link(&*first, dst).map(|()| None);
        }
        move_file(src, dst, harmless)?;
        links.remember(&meta, inner.to_path_buf());
    } else if ft.is_char_device() && meta.rdev() == 0 {
        // A whiteout: the agent deleted what a lower layer has here.
        return copy::make_whiteout(dst).map(|()| None);
    } else if ft.is_fifo() {
        mknod(dst, libc::S_IFIFO | harmless, 0)?;
    } else if ft.is_socket() {
        // A socket has no content, but it is a change: it is made again, unbound.
        mknod(dst, libc::S_IFSOCK | harmless, 0)?;
    } else {
        // A device node the agent could not have made (no capability): never carried over.
        return Err(io::Error::other(
            "a device node is not carried out of the trial",
        ));
    }
    finish_entry(dst, &meta).map(|()| None)
}

/// Gives the moved entry `dst` its source's mode (harmless: the real one is kept in
/// [`copy::MODE_XATTR`] where it differs) and owner.
fn finish_entry(dst: &Path, meta: &fs::Metadata) -> io::Result<()> {
    let ft = meta.file_type();
    let mode = meta.mode() & 0o7777;
    let harmless = copy::harmless_mode(mode);
    if ft.is_dir() {
        fs::set_permissions(dst, fs::Permissions::from_mode(harmless))?;
    }
    // After the mode: a change of owner would clear set-id bits the mode still had to record.
    keep_owner(dst, meta)?;
    // (User attributes exist only on files and folders: a FIFO or socket just loses the bits,
    // as does an entry on a host file system without user attributes.)
    if harmless != mode && (ft.is_file() || ft.is_dir()) {
        match keep_mode(dst, mode) {
            Err(e) if e.raw_os_error() == Some(libc::ENOTSUP) => {}
            other => other?,
        }
    }
    // Last, a folder's after everything moved into it: the end state keeps the times the agent
    // left (the checks see them; `make` and the like decide by them).
    keep_times(dst, meta)
}

/// Gives the moved entry `dst` its source's access and modification times (a link's own).
fn keep_times(dst: &Path, meta: &fs::Metadata) -> io::Result<()> {
    let c = sys::cstring(dst)?;
    let times = [
        libc::timespec {
            tv_sec: meta.atime(),
            tv_nsec: meta.atime_nsec(),
        },
        libc::timespec {
            tv_sec: meta.mtime(),
            tv_nsec: meta.mtime_nsec(),
        },
    ];
    // SAFETY: a valid C string and two timespecs.
    sys::check(unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            c.as_ptr(),
            times.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })
    .map(|_| ())
}

/// Gives the moved entry `dst` the owner of its source (as ids of the trial's user namespace,
/// whose map makes them the subordinate ids outside): the end state records owners. The
/// moved entries are T's own (root's) otherwise.
fn keep_owner(dst: &Path, meta: &fs::Metadata) -> io::Result<()> {
    if meta.uid() == 0 && meta.gid() == 0 {
        return Ok(());
    }
    let c = sys::cstring(dst)?;
    // SAFETY: a valid C string.
    sys::check(unsafe { libc::lchown(c.as_ptr(), meta.uid(), meta.gid()) }).map(|_| ())
}

/// Keeps the real `mode` of the moved entry `dst` (whose own mode lost its special bits) in
/// [`copy::MODE_XATTR`], where the diff reads it.
fn keep_mode(dst: &Path, mode: u32) -> io::Result<()> {
    let c = sys::cstring(dst)?;
    let value = mode.to_string();
    // SAFETY: valid C strings and a value of the given length.
    sys::check(unsafe {
        libc::lsetxattr(
            c.as_ptr(),
            copy::MODE_XATTR.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    })
    .map(|_| ())
}

/// Removes everything in the folder `dir`, leaving it empty.
fn clear(dir: &Path) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        proctor_fs::beneath::remove_tree(&path)?;
    }
    Ok(())
}

/// Copies a file's data (holes stay holes) and the harmless `mode`, punching each copied range
/// out of the source so that the trial's memory is not held twice.
fn move_file(src: &Path, dst: &Path, mode: u32) -> io::Result<()> {
    let input = OpenOptions::new().read(true).write(true).open(src)?;
    let output = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(dst)?;
    copy::copy_data(
        &input,
        &output,
        CopyOptions {
            punch_source: true,
            ..CopyOptions::default()
        },
    )?;
    output.set_permissions(fs::Permissions::from_mode(mode))
}

fn mknod(p: &Path, mode: u32, dev: libc::dev_t) -> io::Result<()> {
    let c = sys::cstring(p)?;
    // SAFETY: a valid C string.
    sys::check(unsafe { libc::mknod(c.as_ptr(), mode, dev) }).map(|_| ())
}

/// The overlay attributes an upper folder may carry that say what it means: opaque (it hides
/// the lower folder's entries). The others (`uuid`, `origin`, `impure`) are overlayfs's own
/// bookkeeping and mean nothing once the layer is read as a record.
const MEANINGFUL_XATTRS: [&[u8]; 1] = [b"user.overlay.opaque"];

/// Copies the meaningful overlay attributes of the folder `src` onto `dst`.
fn copy_xattrs(src: &Path, dst: &Path) -> io::Result<()> {
    let (s, d) = (sys::cstring(src)?, sys::cstring(dst)?);
    let names = list_xattrs(&s)?;
    for name in names
        .split(|&b| b == 0)
        .filter(|n| MEANINGFUL_XATTRS.contains(n))
    {
        let name = std::ffi::CString::new(name).map_err(io::Error::other)?;
        let mut value = vec![0u8; 4096];
        // SAFETY: valid C strings and a buffer of the given length.
        let n = unsafe {
            libc::lgetxattr(
                s.as_ptr(),
                name.as_ptr(),
                value.as_mut_ptr().cast(),
                value.len(),
            )
        };
        if n < 0 {
            continue;
        }
        // SAFETY: valid C strings and a value of `n` bytes.
        sys::check(unsafe {
            libc::lsetxattr(
                d.as_ptr(),
                name.as_ptr(),
                value.as_ptr().cast(),
                n as usize,
                0,
            )
        })
        .map_err(|e| io::Error::new(e.kind(), format!("set {}: {e}", name.to_string_lossy())))?;
    }
    Ok(())
}

/// The NUL-separated attribute names of a path; none where the file system keeps none.
fn list_xattrs(path: &std::ffi::CStr) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; 4096];
    // SAFETY: a valid C string and a buffer of the given length.
    let n = unsafe { libc::llistxattr(path.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        let err = io::Error::last_os_error();
        return match err.raw_os_error() {
            Some(libc::ENOTSUP) => Ok(Vec::new()),
            _ => Err(err),
        };
    }
    buf.truncate(n as usize);
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    /// A layer 2,500 levels deep (a 5 KB path, past PATH_MAX) is moved whole, down to the file
    /// at its bottom, with its times.
    #[test]
    fn a_layer_past_path_max_is_moved_whole() {
        let t = tempfile::tempdir().unwrap();
        let (from, to) = (t.path().join("from"), t.path().join("to"));
        fs::create_dir_all(&from).unwrap();
        fs::create_dir_all(&to).unwrap();
        let b = proctor_fs::Beneath::open(&from).unwrap();
        let mut cur = b.dir(Path::new("")).unwrap();
        for _ in 0..2500 {
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
        proctor_fs::times::set_mtime(f.as_fd(), (946_684_800, 0)).unwrap();
        drop((cur, f));
        let mut left = LeftOuts::default();
        let fds = Path::new("/proc/self/fd");
        move_tree(
            (&from, &to, fds),
            Path::new(""),
            &mut left,
            (&mut Links::default(), &mut Beat::every(BEAT, &mut || {})),
        )
        .unwrap();
        assert!(left.listed.is_empty(), "{:?}", left.listed.first());
        let bottom = PathBuf::from(format!("{}bottom.txt", "d/".repeat(2500)));
        let mut deep = proctor_fs::Deep::open(&to).unwrap();
        let at = deep.reach(&bottom).unwrap();
        assert_eq!(fs::read(&*at).unwrap(), b"deep");
        assert_eq!(fs::metadata(&*at).unwrap().mtime(), 946_684_800);
    }

    /// T says it is still at work while it moves the entries of one folder, not only between
    /// folders: one folder may hold every entry the disk allows (262,144 by default), whose
    /// move takes longer than the watchdog waits after T's last word.
    #[test]
    fn a_move_beats_within_one_folder() {
        let t = tempfile::tempdir().unwrap();
        let (from, to) = (t.path().join("from"), t.path().join("to"));
        fs::create_dir_all(from.join("many")).unwrap();
        fs::create_dir_all(&to).unwrap();
        for i in 0..300 {
            fs::write(from.join("many").join(i.to_string()), "").unwrap();
        }
        let mut beats = 0;
        let mut count = || beats += 1;
        let mut left = LeftOuts::default();
        move_tree(
            (&from, &to, Path::new("/proc/self/fd")),
            Path::new(""),
            &mut left,
            (
                &mut Links::default(),
                &mut Beat::every(std::time::Duration::ZERO, &mut count),
            ),
        )
        .unwrap();
        assert!(left.listed.is_empty(), "{:?}", left.listed.first());
        assert_eq!(fs::read_dir(to.join("many")).unwrap().count(), 300);
        // One beat after each entry moved (301) and each folder finished (1).
        assert_eq!(beats, 302);
    }
}
