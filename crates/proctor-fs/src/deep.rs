//! Paths of any length beneath a folder, resolved by open folders: a tree an agent made may be
//! 10,000 levels deep (a path of 20 KB, five times `PATH_MAX`), and proctor still reads it,
//! keeps it, rebuilds it and shows it.
//!
//! A [`Cursor`] resolves a relative path from a folder held open, `RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS` (never above the folder, never through a link), in pieces the system
//! takes whole (under 3,000 bytes each), and remembers the folders it opened along the last path
//! it resolved: one every 3,000 bytes or so, and the last. A walk in path order (each path below
//! or beside the one before) then costs a lookup or two per path whatever its depth, with at
//! most one descriptor per 3,000 bytes of path open (a handful at 20 KB), and no recursion.
//!
//! [`Deep`] gives, for a path of any length, a path the system takes: the plain one when it is
//! short, else `/proc/self/fd/N/NAME` ([`Deep::with_fds`]) through the open folder that holds it, so that code that
//! reads by path (metadata, links, extended attributes, listing, opening) reads past
//! `PATH_MAX` unchanged.

use std::ffi::OsStr;
use std::io;
use std::ops::Deref;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};

use crate::at::{dir_flags, RESOLVE};

/// The longest piece of a path resolved in one call (under `PATH_MAX`, with room to spare).
const PIECE: usize = 3000;

/// A path longer than this is reached through an open folder ([`Deep::reach`]), and resolved
/// from the folders a [`Cursor`] holds rather than whole. Far under `PATH_MAX`: the kernel
/// resolves a whole path one component at a time from the top, so the first 2,000 levels of a
/// tree read in path order by whole paths would cost 2,000,000 lookups; from an open folder,
/// one or two per path.
pub const SHORT: usize = 1024;

/// The folders a [`Cursor`] holds open along the last path it resolved.
#[derive(Debug, Default)]
pub struct Cursor {
    /// The last folder resolved, relative to the base (its bytes).
    at: Vec<u8>,
    /// Open folders along `at`: (bytes of `at` they stand for, the folder), shallowest first,
    /// one every [`PIECE`] bytes or so and the last.
    marks: Vec<(usize, OwnedFd)>,
}

impl Cursor {
    /// A cursor that holds nothing yet.
    pub fn new() -> Cursor {
        Cursor::default()
    }

    /// The folder `rel` beneath the open folder `base` (the same folder at every call), open:
    /// an error if a component is a link, is not a folder, or leads out.
    pub fn dir(&mut self, base: BorrowedFd<'_>, rel: &Path) -> io::Result<OwnedFd> {
        let want = crate::rel::normal(rel.as_os_str().as_bytes()).ok_or_else(out_of_folder)?;
        match self.resolve(base, &want) {
            Ok(fd) => {
                // A folder removed since it was remembered has no links left: resolve afresh.
                if rustix::fs::fstat(&fd)?.st_nlink > 0 {
                    return Ok(fd);
                }
                self.at.clear();
                self.marks.clear();
                self.resolve(base, &want)
            }
            Err(e) => {
                self.at.clear();
                self.marks.clear();
                Err(e)
            }
        }
    }

    fn resolve(&mut self, base: BorrowedFd<'_>, want: &[u8]) -> io::Result<OwnedFd> {
        if want.is_empty() {
            return dup(base);
        }
        // How much of the remembered path is a whole-component prefix of `want`.
        let common = if want.starts_with(&self.at) {
            self.at.len()
        } else if self.at.starts_with(want) {
            want.len()
        } else {
            self.at.iter().zip(want).take_while(|(a, b)| a == b).count()
        };
        let boundary = |m: usize| {
            m == 0
                || (m <= common
                    && (m == want.len() || want[m] == b'/')
                    && (m == self.at.len() || self.at[m] == b'/'))
        };
        // A folder a few levels above the last one: up through `..` from it.
        if want.len() < self.at.len() && boundary(want.len()) {
            let levels = self.at[want.len()..].iter().filter(|&&b| b == b'/').count();
            if let (true, Some((_, last))) = (levels <= 64, self.marks.last()) {
                let mut cur = dup(last.as_fd())?;
                for _ in 0..levels {
                    cur = rustix::fs::openat(&cur, c"..", dir_flags(), Mode::empty())?;
                }
                while self.marks.last().is_some_and(|(m, _)| *m >= want.len()) {
                    self.marks.pop();
                }
                let fd = dup(cur.as_fd())?;
                self.push_mark(want.len(), cur);
                self.at.truncate(want.len());
                return Ok(fd);
            }
        }
        while self.marks.last().is_some_and(|(m, _)| !boundary(*m)) {
            self.marks.pop();
        }
        let mut done = self.marks.last().map_or(0, |(m, _)| *m);
        self.at.truncate(done);
        while done < want.len() {
            let start = if done == 0 { 0 } else { done + 1 };
            // The next piece: whole components, at most PIECE bytes (one longer name alone).
            let mut end = start;
            for (i, &b) in want[start..].iter().enumerate() {
                let at = start + i;
                if b == b'/' {
                    if at - start > PIECE && end > start {
                        break;
                    }
                    end = at;
                }
            }
            if want.len() - start <= PIECE || end == start {
                end = if end == start {
                    want[start..]
                        .iter()
                        .position(|&b| b == b'/')
                        .map_or(want.len(), |p| start + p)
                } else if want.len() - start <= PIECE {
                    want.len()
                } else {
                    end
                };
            }
            let piece = Path::new(OsStr::from_bytes(&want[start..end]));
            let from = match self.marks.last() {
                Some((_, fd)) => fd.as_fd(),
                None => base,
            };
            let fd = open_beneath(from, piece)?;
            self.push_mark(end, fd);
            done = end;
        }
        self.at.clear();
        self.at.extend_from_slice(want);
        match self.marks.last() {
            Some((_, fd)) => dup(fd.as_fd()),
            None => dup(base),
        }
    }
}

impl Cursor {
    /// Remembers `fd` as the folder at `len` bytes of the path, the last: marks are kept about
    /// [`PIECE`] apart (the last one is replaced while it is close to the one before it).
    fn push_mark(&mut self, len: usize, fd: OwnedFd) {
        let n = self.marks.len();
        if n >= 2 && self.marks[n - 1].0 - self.marks[n - 2].0 < PIECE {
            self.marks.pop();
        }
        self.marks.push((len, fd));
    }
}

/// `piece` (several components, under `PATH_MAX`) beneath `from`, open as a folder, through no
/// link and never above `from`; one component at a time where the kernel has no `openat2`.
fn open_beneath(from: BorrowedFd<'_>, piece: &Path) -> io::Result<OwnedFd> {
    match rustix::fs::openat2(from, piece, dir_flags(), Mode::empty(), RESOLVE) {
        Err(rustix::io::Errno::NOSYS | rustix::io::Errno::PERM) => {
            let mut cur = dup(from)?;
            for name in piece.iter() {
                cur = crate::at::open_dir_at(cur.as_fd(), &crate::at::cstring(name)?)?;
            }
            Ok(cur)
        }
        other => other.map_err(Into::into),
    }
}

fn dup(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    fd.try_clone_to_owned()
}

fn out_of_folder() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "a path that does not stay beneath its folder",
    )
}

/// A tree read by paths of any length: see the module's documentation.
#[derive(Debug)]
pub struct Deep {
    root: PathBuf,
    base: OwnedFd,
    cursor: Cursor,
    /// Where this process's descriptors are named (`/proc/self/fd`).
    fds: PathBuf,
}

/// A path [`Deep::reach`] gave: usable with any call that takes a path while it lives (it holds
/// the folder its name is in open).
#[derive(Debug)]
pub struct Reached {
    path: PathBuf,
    _dir: Option<OwnedFd>,
}

impl Deref for Reached {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for Reached {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl Deep {
    /// The folder `root` (followed if it is a link: it is proctor's own), held open.
    pub fn open(root: &Path) -> io::Result<Deep> {
        let base = rustix::fs::open(
            root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Deep {
            root: root.to_path_buf(),
            base,
            cursor: Cursor::new(),
            fds: PathBuf::from("/proc/self/fd"),
        })
    }

    /// Names this process's descriptors from `fds` instead of `/proc/self/fd` (a process whose
    /// `/proc` in view is not its own reaches its own from elsewhere, e.g. `self/fd` from its
    /// own `/proc` as the working folder).
    pub fn with_fds(mut self, fds: &Path) -> Deep {
        self.fds = fds.to_path_buf();
        self
    }

    /// The tree's root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A path the system takes for `rel` beneath the root (the entry itself is not resolved:
    /// a link there stays a link to whoever reads it with `lstat`): `root/rel` when it is short,
    /// else its name in the folder that holds it, open.
    pub fn reach(&mut self, rel: &Path) -> io::Result<Reached> {
        // (The length first: a path of 20 KB is not copied only to be found too long.)
        if self.root.as_os_str().len() + 1 + rel.as_os_str().len() < SHORT {
            return Ok(Reached {
                path: self.root.join(rel),
                _dir: None,
            });
        }
        let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a long path with no name",
            ));
        };
        let dir = self.cursor.dir(self.base.as_fd(), parent)?;
        Ok(Reached {
            path: self.fds.join(dir.as_raw_fd().to_string()).join(name),
            _dir: Some(dir),
        })
    }

    /// The folder `rel` beneath the root, open (through no link).
    pub fn dir(&mut self, rel: &Path) -> io::Result<OwnedFd> {
        self.cursor.dir(self.base.as_fd(), rel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chain of `levels` folders `d` beneath `root`, with a file `f` at its bottom.
    fn chain(root: &Path, levels: usize) {
        let b = crate::Beneath::open(root).unwrap();
        let mut cur = b.dir(Path::new("")).unwrap();
        for _ in 0..levels {
            cur = crate::beneath::make_dir_at(cur.as_fd(), c"d", 0o755).unwrap();
        }
        let f = rustix::fs::openat(
            &cur,
            c"f",
            OFlags::WRONLY | OFlags::CREATE,
            Mode::from_raw_mode(0o644),
        )
        .unwrap();
        rustix::io::write(&f, b"deep").unwrap();
    }

    #[test]
    fn every_level_of_a_tree_past_path_max_is_reached_in_order_and_back() {
        let t = tempfile::tempdir().unwrap();
        chain(t.path(), 2500);
        let mut deep = Deep::open(t.path()).unwrap();
        let mut rel = PathBuf::new();
        for _ in 0..2500 {
            rel.push("d");
            let p = deep.reach(&rel).unwrap();
            assert!(std::fs::symlink_metadata(&*p).unwrap().is_dir());
        }
        let bottom = rel.join("f");
        assert!(bottom.as_os_str().len() > 4096);
        assert_eq!(
            std::fs::read(&*deep.reach(&bottom).unwrap()).unwrap(),
            b"deep"
        );
        // At most a handful of folders held open.
        assert!(deep.cursor.marks.len() <= 3, "{}", deep.cursor.marks.len());
        // Back up, and across from the root again.
        for _ in 0..2500 {
            assert!(std::fs::symlink_metadata(&*deep.reach(&rel).unwrap())
                .unwrap()
                .is_dir());
            rel.pop();
        }
        let mut again = PathBuf::new();
        for _ in 0..2200 {
            again.push("d");
        }
        assert!(deep.reach(&again).unwrap().is_dir());
    }

    #[test]
    fn a_link_on_the_way_is_never_followed() {
        let t = tempfile::tempdir().unwrap();
        let outside = t.path().join("outside");
        std::fs::create_dir_all(outside.join("x")).unwrap();
        let root = t.path().join("root");
        std::fs::create_dir_all(&root).unwrap();
        chain(&root, 2000);
        let mut rel = PathBuf::new();
        for _ in 0..1999 {
            rel.push("d");
        }
        // The bottom folder swapped for a link out.
        let bottom = rel.join("d");
        let mut deep = Deep::open(&root).unwrap();
        let holder = deep.dir(&rel).unwrap();
        crate::beneath::clear_at(holder.as_fd(), c"d").unwrap();
        rustix::fs::symlinkat(&outside, &holder, c"d").unwrap();
        let mut deep = Deep::open(&root).unwrap();
        assert!(deep.dir(&bottom).is_err());
        assert!(deep.reach(&bottom.join("x").join("y")).is_err());
        assert!(deep.dir(Path::new("../outside")).is_err());
    }
}
