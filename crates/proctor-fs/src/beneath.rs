//! Host-side writes into a tree an agent made, that never leave it: every path is resolved
//! beneath a folder of proctor's own, one component at a time from an open descriptor
//! (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`), so neither a
//! symbolic link nor a `..` nor a folder swapped for a link can take a write outside, and a path
//! longer than `PATH_MAX` is no obstacle. Whatever an agent left where proctor lays a folder (a
//! file, a link) is replaced, never written through.
//!
//! Trees are walked by open folders too ([`walk`]): without recursion (a tree 10,000 levels deep
//! costs no stack), with two descriptors open whatever the depth (a folder's parent is reached
//! again through `..`, and checked to be the folder it came from).

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};

use crate::at::{cstring, dir_flags, open_dir_at, RESOLVE};

/// A folder of proctor's own (a trial's scratch, a check's copy, a rescore's rebuild), held
/// open: every path given to it is resolved beneath it, through no link.
#[derive(Debug)]
pub struct Beneath {
    root: OwnedFd,
    path: PathBuf,
    /// The folders along the last long path resolved ([`crate::deep::Cursor`]): a tree past
    /// `PATH_MAX` written or read in path order costs a lookup or two per path.
    cursor: std::sync::Mutex<crate::deep::Cursor>,
}

impl Beneath {
    /// Opens the existing folder `root` (a path proctor chose: its last component is not
    /// followed if it is a link).
    pub fn open(root: &Path) -> io::Result<Beneath> {
        let fd = rustix::fs::open(root, dir_flags(), Mode::empty())?;
        Ok(Beneath {
            root: fd,
            path: root.to_path_buf(),
            cursor: std::sync::Mutex::default(),
        })
    }

    /// Creates the folder `root` (and its missing parents, proctor's own), then opens it.
    pub fn create(root: &Path) -> io::Result<Beneath> {
        std::fs::create_dir_all(root)?;
        Beneath::open(root)
    }

    /// The folder, open.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.root.as_fd()
    }

    /// The folder's path (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The existing folder `rel` beneath this one, open; an error if any component of `rel` is a
    /// link, is not a folder, or leads out (`..`, an absolute path).
    pub fn dir(&self, rel: &Path) -> io::Result<OwnedFd> {
        // Checked as bytes: the names are made only where they are used, one by one.
        let bytes = rel.as_os_str().as_bytes();
        if !crate::rel::stays_beneath(bytes) {
            return Err(out_of_folder(rel));
        }
        if !crate::rel::has_name(bytes) {
            return rustix::fs::openat(&self.root, c".", dir_flags(), Mode::empty())
                .map_err(Into::into);
        }
        // One call for a short path; a longer one (past PATH_MAX too) from the folders along
        // the last long path resolved.
        if rel.as_os_str().len() < crate::deep::SHORT {
            match rustix::fs::openat2(&self.root, rel, dir_flags(), Mode::empty(), RESOLVE) {
                Err(
                    rustix::io::Errno::NAMETOOLONG
                    | rustix::io::Errno::NOSYS
                    | rustix::io::Errno::PERM,
                ) => {}
                other => return other.map_err(Into::into),
            }
        }
        match self.cursor.lock() {
            Ok(mut cursor) => cursor.dir(self.fd(), rel),
            Err(_) => {
                let mut cur = rustix::fs::openat(&self.root, c".", dir_flags(), Mode::empty())?;
                for name in components(rel)? {
                    cur = open_dir_at(cur.as_fd(), &name)?;
                }
                Ok(cur)
            }
        }
    }

    /// The folder `rel` beneath this one, open, each missing folder on the way made with
    /// `mode`; whatever else is in the way (a file, a link, a FIFO) is replaced by a folder.
    pub fn make_dirs(&self, rel: &Path, mode: u32) -> io::Result<OwnedFd> {
        let names = components(rel)?;
        let mut cur = rustix::fs::openat(&self.root, c".", dir_flags(), Mode::empty())?;
        for name in &names {
            cur = make_dir_at(cur.as_fd(), name, mode)?;
        }
        Ok(cur)
    }

    /// The folder that holds `rel` (made as [`Beneath::make_dirs`] makes it), open, and the
    /// last component of `rel`.
    pub fn parent(&self, rel: &Path, mode: u32) -> io::Result<(OwnedFd, CString)> {
        let (parent, name) = split_last(rel, "an empty path has no parent")?;
        // Most often the folder is there already: one lookup of the whole path (through no
        // link), else made one component at a time.
        if let Ok(fd) = self.dir(parent) {
            return Ok((fd, name));
        }
        let mut cur = rustix::fs::openat(&self.root, c".", dir_flags(), Mode::empty())?;
        for n in components(parent)? {
            cur = make_dir_at(cur.as_fd(), &n, mode)?;
        }
        Ok((cur, name))
    }
}

impl Beneath {
    /// The existing entry `rel` beneath this folder, opened for reading, if it is a file (not a
    /// link); no component of `rel` is followed if it is a link.
    pub fn open_file(&self, rel: &Path) -> io::Result<std::fs::File> {
        let (parent, name) = split_last(rel, "an empty path names no file")?;
        let dir = self.dir(parent)?;
        let fd = rustix::fs::openat(
            &dir,
            &name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(std::fs::File::from(fd))
    }
}

/// `rel` (beneath the folder) as its parent and its last name; `empty` when it names nothing.
fn split_last<'a>(rel: &'a Path, empty: &str) -> io::Result<(&'a Path, CString)> {
    if !crate::rel::stays_beneath(rel.as_os_str().as_bytes()) {
        return Err(out_of_folder(rel));
    }
    match (rel.parent(), rel.file_name()) {
        (Some(parent), Some(name)) => Ok((parent, cstring(name)?)),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            empty.to_owned(),
        )),
    }
}

fn out_of_folder(rel: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{} does not stay beneath its folder", rel.display()),
    )
}

/// The components of a relative path, each a single name (no `..`, `.`, or root).
fn components(rel: &Path) -> io::Result<Vec<CString>> {
    rel.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .map(|c| match c {
            Component::Normal(n) => cstring(n),
            _ => Err(out_of_folder(rel)),
        })
        .collect()
}

/// The folder `name` in `dir`, open: the one there, or a new one of `mode` in place of
/// whatever else is there (removed, never followed).
pub fn make_dir_at(dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> io::Result<OwnedFd> {
    match stat_at(dir, name)? {
        Some(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {}
        Some(_) => {
            clear_at(dir, name)?;
            mkdir_at(dir, name, mode)?;
        }
        None => mkdir_at(dir, name, mode)?,
    }
    open_dir_at(dir, name)
}

fn mkdir_at(dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> io::Result<()> {
    match rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(mode)) {
        Ok(()) | Err(rustix::io::Errno::EXIST) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The entry `name` of `dir`, not followed; `None` when there is none.
pub fn stat_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<Option<Stat>> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(st)),
        Err(rustix::io::Errno::NOENT) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Removes whatever is at `name` in `dir` (a folder with all it holds); nothing there is fine.
pub fn clear_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    match stat_at(dir, name)? {
        None => Ok(()),
        Some(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {
            remove_tree_at(dir, name)
        }
        Some(_) => match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(e) => Err(e.into()),
        },
    }
}

/// Removes the folder `name` of `dir` and everything below it, by open folders (no path is
/// longer than one name, no recursion, two descriptors open), giving this user access back to
/// each folder it may not enter or empty (an agent's folder of mode 000) first.
pub fn remove_tree_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    struct Remove;
    impl Visit for Remove {
        fn entry(&mut self, dir: BorrowedFd<'_>, name: &CStr, st: &Stat) -> io::Result<Step> {
            if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
                // An empty folder goes in one call; only one that holds something is entered.
                if remove_empty_dir(dir, name) {
                    return Ok(Step::Skip);
                }
                if st.st_mode & 0o700 != 0o700 {
                    let _ = rustix::fs::chmodat(dir, name, Mode::RWXU, AtFlags::empty());
                }
                return Ok(Step::Descend);
            }
            match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
                Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(Step::Skip),
                Err(e) => Err(e.into()),
            }
        }
        fn leave(&mut self, parent: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
            rustix::fs::unlinkat(parent, name, AtFlags::REMOVEDIR).map_err(Into::into)
        }
    }
    if remove_empty_dir(dir, name) {
        return Ok(());
    }
    if let Some(st) = stat_at(dir, name)? {
        if st.st_mode & 0o700 != 0o700 {
            let _ = rustix::fs::chmodat(dir, name, Mode::RWXU, AtFlags::empty());
        }
    }
    let top = open_dir_at(dir, name)?;
    walk(top, &mut Remove)?;
    match rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR) {
        Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Whether the folder `name` of `dir` was empty and is now removed (never followed: `rmdir`
/// of a name removes no link's target); `false` for anything else, which the caller walks.
fn remove_empty_dir(dir: BorrowedFd<'_>, name: &CStr) -> bool {
    rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR).is_ok()
}

/// Removes `path` (a folder with all it holds, or any other entry; its last component is not
/// followed); nothing there is fine. The walk is [`remove_tree_at`]'s: any depth, any mode.
pub fn remove_tree(path: &Path) -> io::Result<()> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} names no entry to remove", path.display()),
        ));
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let pfd = match rustix::fs::open(
        parent,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    clear_at(pfd.as_fd(), &cstring(name)?)
}

/// What a [`walk`] does next with a folder entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Go into it (a folder) now: its entries are visited, then [`Visit::leave`] is called.
    Descend,
    /// Go on with the next entry.
    Skip,
}

/// What a [`walk`] calls: for each entry of each folder it enters (by name, in byte order),
/// and when it leaves a folder it went into.
pub trait Visit {
    /// The entry `name` of the open folder `dir`, of status `st` (not followed). A folder is
    /// entered when this returns [`Step::Descend`].
    fn entry(&mut self, dir: BorrowedFd<'_>, name: &CStr, st: &Stat) -> io::Result<Step>;
    /// The folder `name` of `parent` has been walked.
    fn leave(&mut self, parent: BorrowedFd<'_>, name: &CStr) -> io::Result<()>;
}

/// Walks the folder `top` depth first, by open folders: no recursion, no path longer than one
/// name, and two descriptors open at any depth (a folder's parent is opened again through
/// `..`, and must be the very folder the walk came from, or the walk stops with an error). An
/// entry gone before it was visited is passed over.
pub fn walk(top: OwnedFd, v: &mut impl Visit) -> io::Result<()> {
    struct Level {
        rest: std::vec::IntoIter<CString>,
        name: CString,
        parent: (u64, u64),
    }
    let mut cur = top;
    let mut rest = list(cur.as_fd())?.into_iter();
    let mut stack: Vec<Level> = Vec::new();
    loop {
        if let Some(name) = rest.next() {
            let Some(st) = stat_at(cur.as_fd(), &name)? else {
                continue;
            };
            if v.entry(cur.as_fd(), &name, &st)? != Step::Descend
                || FileType::from_raw_mode(st.st_mode) != FileType::Directory
            {
                continue;
            }
            let child = open_dir_at(cur.as_fd(), &name)?;
            if ident(&rustix::fs::fstat(&child)?) != ident(&st) {
                return Err(moved(&name));
            }
            let parent = ident(&rustix::fs::fstat(&cur)?);
            let inner = list(child.as_fd())?.into_iter();
            stack.push(Level {
                rest: std::mem::replace(&mut rest, inner),
                name,
                parent,
            });
            cur = child;
            continue;
        }
        let Some(level) = stack.pop() else {
            return Ok(());
        };
        let parent = rustix::fs::openat(&cur, c"..", dir_flags(), Mode::empty())?;
        if ident(&rustix::fs::fstat(&parent)?) != level.parent {
            return Err(moved(&level.name));
        }
        cur = parent;
        rest = level.rest;
        v.leave(cur.as_fd(), &level.name)?;
    }
}

/// A folder's (device, inode).
pub fn ident(st: &Stat) -> (u64, u64) {
    (st.st_dev, st.st_ino)
}

fn moved(name: &CStr) -> io::Error {
    io::Error::other(format!(
        "the folder {} was moved while it was walked",
        name.to_string_lossy()
    ))
}

/// The names in the open folder `dir`, in byte order, without `.` and `..`.
pub fn list(dir: BorrowedFd<'_>) -> io::Result<Vec<CString>> {
    let mut names = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        names.push(name.to_owned());
    }
    names.sort();
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn nothing_is_made_through_a_link_or_above_the_folder() {
        let t = tempfile::tempdir().unwrap();
        let outside = t.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        let root = t.path().join("root");
        std::fs::create_dir_all(&root).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("tests")).unwrap();
        std::os::unix::fs::symlink("../outside", root.join("rel")).unwrap();
        let b = Beneath::open(&root).unwrap();
        assert!(b.dir(Path::new("tests")).is_err());
        assert!(b.dir(Path::new("../outside")).is_err());
        assert!(b.make_dirs(Path::new("/etc"), 0o755).is_err());
        // The link is replaced by a folder of the trial's own.
        let _ = b.make_dirs(Path::new("tests/deep"), 0o755).unwrap();
        let _ = b.make_dirs(Path::new("rel/x"), 0o755).unwrap();
        assert!(root.join("tests/deep").is_dir());
        assert!(!std::fs::symlink_metadata(root.join("tests"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        // A file in the way is replaced too.
        std::fs::write(root.join("file"), "x").unwrap();
        let (_, name) = b.parent(Path::new("file/inner"), 0o755).unwrap();
        assert_eq!(name.as_bytes(), b"inner");
        assert!(root.join("file").is_dir());
    }

    #[test]
    fn a_tree_deeper_than_path_max_is_walked_and_removed_whatever_its_modes() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("deep");
        std::fs::create_dir(&root).unwrap();
        let b = Beneath::open(&root).unwrap();
        // 3,000 levels of 2 bytes each: 6 KB, past PATH_MAX.
        let mut cur = b.dir(Path::new("")).unwrap();
        for _ in 0..3000 {
            cur = make_dir_at(cur.as_fd(), c"d", 0o755).unwrap();
        }
        std::fs::write(root.join("d/d/f"), "x").unwrap();
        rustix::fs::fchmod(&cur, Mode::empty()).unwrap();
        drop(cur);
        struct Count(usize, usize);
        impl Visit for Count {
            fn entry(&mut self, _: BorrowedFd<'_>, _: &CStr, _: &Stat) -> io::Result<Step> {
                self.0 += 1;
                Ok(Step::Descend)
            }
            fn leave(&mut self, _: BorrowedFd<'_>, _: &CStr) -> io::Result<()> {
                self.1 += 1;
                Ok(())
            }
        }
        let mut c = Count(0, 0);
        // The deepest folder (mode 000) can be entered only by root: walk to above it.
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        let _ = walk(b.dir(Path::new("")).unwrap(), &mut c);
        assert!(c.0 >= 3000, "{}", c.0);
        remove_tree(&root).unwrap();
        assert!(!root.exists());
    }
}
