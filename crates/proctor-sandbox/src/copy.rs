//! Copies of what an agent made that are faithful and harmless, shared by every place that
//! writes out of an agent's tree (the trial's disk moving its changes to the host, the capture
//! into the store, the rescore's rebuild, the checks' copies):
//!
//! - a file's data is copied extent by extent (`SEEK_DATA`/`SEEK_HOLE`), so a sparse file keeps
//!   its holes and costs only the bytes it holds ([`copy_data`]), optionally up to a bound;
//! - a file with several names is copied once, and its other names become hard links to that
//!   copy ([`Links`]);
//! - no copy carries a set-user-ID, set-group-ID or sticky bit ([`harmless_mode`]): the real
//!   mode is data, kept by the caller (in the change record, or in [`MODE_XATTR`]);
//! - a whole tree is copied by open folders ([`copy_tree`]): nothing is written through a link
//!   or outside the destination, whatever the source or the destination holds, and no depth
//!   costs stack or descriptors.

use std::collections::HashMap;
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt};

/// The set-user-ID, set-group-ID and sticky bits: never set on a copy of an agent's entry.
pub const SPECIAL_BITS: u32 = 0o7000;

/// The extended attribute that keeps an entry's real mode (decimal) where its copy's mode had
/// [`SPECIAL_BITS`] cleared: set by the trial's disk on the host's upper layer, read by the diff.
pub const MODE_XATTR: &std::ffi::CStr = c"user.proctor.mode";

/// Makes an overlay whiteout at `path` (a character device 0/0): in a lower layer, it hides
/// what the layers below have there. Unprivileged users may make one (Linux 5.8 and later).
pub fn make_whiteout(path: &std::path::Path) -> io::Result<()> {
    use nix::sys::stat::{mknod, Mode, SFlag};
    mknod(path, SFlag::S_IFCHR, Mode::empty(), 0).map_err(io::Error::from)
}

/// `mode`'s permission bits without [`SPECIAL_BITS`]: the mode a copy of an agent's entry gets.
pub fn harmless_mode(mode: u32) -> u32 {
    mode & 0o777
}

/// How [`copy_data`] copies.
#[derive(Debug, Clone, Copy, Default)]
pub struct CopyOptions {
    /// The most bytes of data to write; past it the copy holds the file's head (its content up
    /// to where the bound was reached) and [`Copied::complete`] is false. `None`: no bound.
    pub max_data: Option<u64>,
    /// Compute the BLAKE3 of the whole content (holes read as zeros), also past `max_data`.
    pub hash: bool,
    /// Give each copied range of the source's memory back (a tmpfs file) as it is copied.
    pub punch_source: bool,
}

/// What [`copy_data`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copied {
    /// The source's length, holes included.
    pub size: u64,
    /// Bytes of data written into the copy (holes are not written).
    pub data_written: u64,
    /// Whether the copy holds the whole content.
    pub complete: bool,
    /// BLAKE3 of the whole content, lowercase hex, when [`CopyOptions::hash`] asked for it.
    pub hash: Option<String>,
}

/// Copies the content of `input` into the empty file `output`, data extent by data extent: a
/// hole of the source stays a hole of the copy. Reads by offset, so neither file's position
/// matters.
pub fn copy_data(input: &File, output: &File, opts: CopyOptions) -> io::Result<Copied> {
    let size = input.metadata()?.len();
    let mut hasher = opts.hash.then(blake3::Hasher::new);
    // A small file needs no large buffer (a tree of many small files is copied quickly).
    let mut buf = vec![0u8; size.clamp(4096, 1 << 20) as usize];
    let mut written = 0u64;
    // Where the copy's content ends: the source's length, or where the bound cut it.
    let mut kept_len = size;
    let mut complete = true;
    let mut off = 0u64;
    'extents: while off < size {
        let start = seek(input, off, libc::SEEK_DATA)?.unwrap_or(size).min(size);
        let end = if start < size {
            seek(input, start, libc::SEEK_HOLE)?
                .unwrap_or(size)
                .min(size)
        } else {
            size
        };
        if let Some(h) = hasher.as_mut() {
            hash_zeros(h, start - off);
        }
        let mut at = start;
        while at < end {
            let want = buf.len().min((end - at) as usize);
            let n = match input.read_at(&mut buf[..want], at) {
                Ok(0) => break 'extents, // the file shrank under us
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            let chunk = &buf[..n];
            if let Some(h) = hasher.as_mut() {
                h.update(chunk);
            }
            if complete {
                let room = opts
                    .max_data
                    .map_or(n as u64, |m| m.saturating_sub(written))
                    .min(n as u64) as usize;
                output.write_all_at(&chunk[..room], at)?;
                written += room as u64;
                if room < n {
                    complete = false;
                    kept_len = at + room as u64;
                }
            }
            if opts.punch_source {
                punch(input, at, n as u64);
            }
            at += n as u64;
            if !complete && hasher.is_none() && !opts.punch_source {
                break 'extents;
            }
        }
        off = end;
    }
    output.set_len(kept_len)?;
    Ok(Copied {
        size,
        data_written: written,
        complete,
        hash: hasher.map(|h| h.finalize().to_hex().to_string()),
    })
}

/// `lseek(fd, off, whence)` for `SEEK_DATA`/`SEEK_HOLE`: `None` when there is no data past
/// `off` (ENXIO). A file system that cannot tell holes holds data everywhere.
fn seek(file: &File, off: u64, whence: libc::c_int) -> io::Result<Option<u64>> {
    let at = i64::try_from(off).map_err(io::Error::other)?;
    // SAFETY: a valid descriptor; lseek only moves the file's position.
    let r = unsafe { libc::lseek(file.as_raw_fd(), at, whence) };
    if r >= 0 {
        return Ok(Some(r as u64));
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ENXIO) => Ok(None),
        Some(libc::EINVAL) if whence == libc::SEEK_DATA => Ok(Some(off)),
        Some(libc::EINVAL) => Ok(None),
        _ => Err(e),
    }
}

/// Feeds `len` zero bytes (a hole) to `h`.
fn hash_zeros(h: &mut blake3::Hasher, mut len: u64) {
    static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];
    while len > 0 {
        let n = len.min(ZEROS.len() as u64) as usize;
        h.update(&ZEROS[..n]);
        len -= n as u64;
    }
}

/// Gives back a range of a tmpfs file's memory; a file system that cannot is left as it is.
fn punch(file: &File, offset: u64, len: u64) {
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return;
    };
    // SAFETY: a valid descriptor; fallocate only changes the file's allocation.
    unsafe {
        libc::fallocate(
            file.as_raw_fd(),
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            offset,
            len,
        );
    }
}

/// What was made of files with several names, by (device, inode): the first name met is
/// copied, and each later name of the same file is linked to that copy instead, so a file is
/// stored once however many names it has. `T` is what a caller keeps of the copy (its path,
/// with its hash and size).
#[derive(Debug)]
pub struct Links<T>(HashMap<(u64, u64), T>);

impl<T> Default for Links<T> {
    fn default() -> Self {
        Links(HashMap::new())
    }
}

impl<T> Links<T> {
    /// What was kept of the copy of the file `meta` describes, if another of its names was
    /// copied already.
    pub fn copied(&self, meta: &Metadata) -> Option<&T> {
        if meta.nlink() < 2 {
            return None;
        }
        self.0.get(&(meta.dev(), meta.ino()))
    }

    /// Remembers `kept` as the copy of the file `meta` describes (only a file with several
    /// names needs remembering).
    pub fn remember(&mut self, meta: &Metadata, kept: T) {
        if meta.nlink() >= 2 {
            self.0.insert((meta.dev(), meta.ino()), kept);
        }
    }

    /// [`Links::copied`] for a file of status `st`.
    pub fn copied_stat(&self, st: &rustix::fs::Stat) -> Option<&T> {
        if st.st_nlink < 2 {
            return None;
        }
        self.0.get(&(st.st_dev, st.st_ino))
    }

    /// [`Links::remember`] for a file of status `st`.
    pub fn remember_stat(&mut self, st: &rustix::fs::Stat, kept: T) {
        if st.st_nlink >= 2 {
            self.0.insert((st.st_dev, st.st_ino), kept);
        }
    }
}

/// Copies the tree `from` into the folder `to` (made if missing), over what `to` holds: folders
/// are merged, and any other entry of `from` replaces what is at its name (a folder over a file
/// or a link replaces it too). Files keep their holes and are linked again where they had
/// several names; symlinks are copied as links (never followed), FIFOs made again; sockets and
/// devices are left out; no copy has a special bit ([`harmless_mode`]). Every entry copied
/// keeps its modification time (a folder's given once it is filled): a copy of an end state
/// is the agent's, times and all (`make` decides by them).
///
/// Both trees are walked by open folders ([`proctor_fs::beneath::walk`]): nothing in `from`
/// or `to` (a link where a folder is expected, a name of the agent's choosing) makes a write
/// land outside `to`, and a tree of any depth is copied without recursion.
pub fn copy_tree(from: &std::path::Path, to: &std::path::Path) -> io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    let dest = proctor_fs::Beneath::create(to)?;
    let src = rustix::fs::open(
        from,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut into = CopyInto {
        dest: &dest,
        cur: dest.dir(std::path::Path::new(""))?,
        rel: std::path::PathBuf::new(),
        up: Vec::new(),
        links: Links::default(),
    };
    proctor_fs::beneath::walk(src, &mut into)
}

/// Gives every entry of the tree `to` that the tree `from` also has (as the same kind) the
/// access and modification times it has there (a link's own, never its target's), `to` itself
/// included: a copy of the end state with something laid over it (a check's holdout) keeps the
/// times the agent left, which `make` and the like decide by. Both trees by open folders: any
/// depth, any length of path.
pub fn copy_times(from: &std::path::Path, to: &std::path::Path) -> io::Result<()> {
    use proctor_fs::beneath::{walk, Step, Visit};
    use rustix::fs::{AtFlags, FileType, Mode, OFlags, Timespec, Timestamps};
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    fn stamps(m: &std::fs::Metadata) -> Timestamps {
        Timestamps {
            last_access: Timespec {
                tv_sec: m.atime(),
                tv_nsec: m.atime_nsec(),
            },
            last_modification: Timespec {
                tv_sec: m.mtime(),
                tv_nsec: m.mtime_nsec(),
            },
        }
    }
    struct Times {
        from: proctor_fs::Deep,
        rel: std::path::PathBuf,
    }
    impl Visit for Times {
        fn entry(
            &mut self,
            dir: std::os::fd::BorrowedFd<'_>,
            name: &std::ffi::CStr,
            st: &rustix::fs::Stat,
        ) -> io::Result<Step> {
            let rel = self.rel.join(std::ffi::OsStr::from_bytes(name.to_bytes()));
            let kind = FileType::from_raw_mode(st.st_mode);
            let there = self
                .from
                .reach(&rel)
                .and_then(|p| std::fs::symlink_metadata(&*p));
            if let Ok(m) = there {
                if FileType::from_raw_mode(m.mode()) == kind {
                    rustix::fs::utimensat(dir, name, &stamps(&m), AtFlags::SYMLINK_NOFOLLOW)?;
                }
            }
            if kind == FileType::Directory {
                self.rel = rel;
            }
            Ok(Step::Descend)
        }
        fn leave(
            &mut self,
            _parent: std::os::fd::BorrowedFd<'_>,
            _name: &std::ffi::CStr,
        ) -> io::Result<()> {
            self.rel.pop();
            Ok(())
        }
    }
    let top = rustix::fs::open(
        to,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut times = Times {
        from: proctor_fs::Deep::open(from)?,
        rel: std::path::PathBuf::new(),
    };
    walk(top.try_clone()?, &mut times)?;
    // The folder itself last: nothing below it changes it any more.
    if let Ok(m) = std::fs::symlink_metadata(from) {
        rustix::fs::futimens(&top, &stamps(&m))?;
    }
    Ok(())
}

/// The destination side of [`copy_tree`]: the folder being written (open), its path below the
/// destination, and for each folder entered, its parent's identity and the mode and
/// modification time it gets once it is filled.
struct CopyInto<'a> {
    dest: &'a proctor_fs::Beneath,
    cur: std::os::fd::OwnedFd,
    rel: std::path::PathBuf,
    up: Vec<((u64, u64), u32, proctor_fs::times::Time)>,
    links: Links<std::path::PathBuf>,
}

impl proctor_fs::beneath::Visit for CopyInto<'_> {
    fn entry(
        &mut self,
        dir: std::os::fd::BorrowedFd<'_>,
        name: &std::ffi::CStr,
        st: &rustix::fs::Stat,
    ) -> io::Result<proctor_fs::beneath::Step> {
        use proctor_fs::beneath::{clear_at, ident, make_dir_at, Step};
        use proctor_fs::times::{mtime_of, set_mtime, set_mtime_at};
        use rustix::fs::{AtFlags, FileType, Mode, OFlags};
        use std::os::fd::AsFd;
        use std::os::unix::ffi::OsStrExt;
        let mode = harmless_mode(st.st_mode);
        let here = self.cur.as_fd();
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => {
                let child = make_dir_at(here, name, 0o700)?;
                // Writable while it is filled; its own mode once it is.
                rustix::fs::fchmod(&child, Mode::from_raw_mode(mode | 0o700))?;
                let parent = ident(&rustix::fs::fstat(here)?);
                self.up.push((parent, mode, mtime_of(st)));
                self.cur = child;
                self.rel.push(std::ffi::OsStr::from_bytes(name.to_bytes()));
                return Ok(Step::Descend);
            }
            FileType::RegularFile => {
                let rel = self.rel.join(std::ffi::OsStr::from_bytes(name.to_bytes()));
                if let Some(first) = self.links.copied_stat(st) {
                    let (pfd, pname) = self.dest.parent(first, 0o700)?;
                    clear_at(here, name)?;
                    rustix::fs::linkat(&pfd, &pname, here, name, AtFlags::empty())?;
                    return Ok(Step::Skip);
                }
                clear_at(here, name)?;
                let input = File::from(rustix::fs::openat(
                    dir,
                    name,
                    OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )?);
                let output = File::from(rustix::fs::openat(
                    here,
                    name,
                    OFlags::WRONLY
                        | OFlags::CREATE
                        | OFlags::EXCL
                        | OFlags::NOFOLLOW
                        | OFlags::CLOEXEC,
                    Mode::from_raw_mode(0o600),
                )?);
                copy_data(&input, &output, CopyOptions::default())?;
                rustix::fs::fchmod(&output, Mode::from_raw_mode(mode))?;
                set_mtime(output.as_fd(), mtime_of(st))?;
                self.links.remember_stat(st, rel);
            }
            FileType::Symlink => {
                let target = rustix::fs::readlinkat(dir, name, Vec::new())?;
                clear_at(here, name)?;
                rustix::fs::symlinkat(target.as_c_str(), here, name)?;
                set_mtime_at(here, name, mtime_of(st))?;
            }
            FileType::Fifo => {
                clear_at(here, name)?;
                rustix::fs::mknodat(here, name, FileType::Fifo, Mode::from_raw_mode(mode), 0)?;
                set_mtime_at(here, name, mtime_of(st))?;
            }
            _ => {}
        }
        Ok(Step::Skip)
    }

    fn leave(
        &mut self,
        _parent: std::os::fd::BorrowedFd<'_>,
        _name: &std::ffi::CStr,
    ) -> io::Result<()> {
        use rustix::fs::{Mode, OFlags};
        let Some((parent, mode, mtime)) = self.up.pop() else {
            return Err(io::Error::other("left a folder the copy did not enter"));
        };
        rustix::fs::fchmod(&self.cur, Mode::from_raw_mode(mode))?;
        proctor_fs::times::set_mtime(std::os::fd::AsFd::as_fd(&self.cur), mtime)?;
        let up = rustix::fs::openat(
            &self.cur,
            c"..",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        if proctor_fs::beneath::ident(&rustix::fs::fstat(&up)?) != parent {
            return Err(io::Error::other(format!(
                "the copy's folder {} was moved while it was written",
                self.rel.display()
            )));
        }
        self.cur = up;
        self.rel.pop();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Seek, SeekFrom, Write};
    use std::path::Path;

    fn sparse(dir: &std::path::Path) -> std::path::PathBuf {
        let p = dir.join("sparse");
        let mut f = File::create(&p).unwrap();
        f.write_all(b"head").unwrap();
        f.seek(SeekFrom::Start(64 << 20)).unwrap();
        f.write_all(b"tail").unwrap();
        p
    }

    #[test]
    fn a_sparse_file_keeps_its_holes_and_its_content_hash() {
        let t = tempfile::tempdir().unwrap();
        let src = sparse(t.path());
        let dst = t.path().join("copy");
        let c = copy_data(
            &File::open(&src).unwrap(),
            &File::create(&dst).unwrap(),
            CopyOptions {
                hash: true,
                ..CopyOptions::default()
            },
        )
        .unwrap();
        let content = std::fs::read(&src).unwrap();
        assert_eq!(std::fs::read(&dst).unwrap(), content);
        assert_eq!(c.size, (64 << 20) + 4);
        assert!(c.complete);
        assert_eq!(
            c.hash.as_deref(),
            Some(blake3::hash(&content).to_hex().as_str())
        );
        let blocks = std::fs::metadata(&dst).unwrap().blocks() * 512;
        assert!(blocks < 1 << 20, "{blocks} bytes allocated for 8 of data");
        assert!(c.data_written < 1 << 20, "{}", c.data_written);
    }

    #[test]
    fn past_its_bound_a_copy_keeps_the_head_and_hashes_the_whole() {
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("big");
        let content: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&src, &content).unwrap();
        let dst = t.path().join("copy");
        let c = copy_data(
            &File::open(&src).unwrap(),
            &File::create(&dst).unwrap(),
            CopyOptions {
                max_data: Some(1000),
                hash: true,
                punch_source: false,
            },
        )
        .unwrap();
        assert!(!c.complete);
        assert_eq!((c.size, c.data_written), (300_000, 1000));
        assert_eq!(std::fs::read(&dst).unwrap(), &content[..1000]);
        assert_eq!(
            c.hash.as_deref(),
            Some(blake3::hash(&content).to_hex().as_str())
        );
    }

    #[test]
    fn a_tree_is_copied_over_links_and_files_without_writing_through_them() {
        let t = tempfile::tempdir().unwrap();
        let from = t.path().join("holdout");
        std::fs::create_dir_all(from.join("tests/unit")).unwrap();
        std::fs::write(from.join("tests/check.sh"), "check").unwrap();
        std::fs::write(from.join("tests/unit/a.py"), "a").unwrap();
        std::fs::write(from.join("notes"), "n").unwrap();
        std::os::unix::fs::symlink("notes", from.join("alias")).unwrap();
        let outside = t.path().join("host");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("check.sh"), "the host's").unwrap();
        let to = t.path().join("ws");
        std::fs::create_dir_all(&to).unwrap();
        // What an agent left where the holdout has a folder, and a file.
        std::os::unix::fs::symlink(&outside, to.join("tests")).unwrap();
        std::os::unix::fs::symlink(outside.join("check.sh"), to.join("notes")).unwrap();
        copy_tree(&from, &to).unwrap();
        assert_eq!(
            std::fs::read(outside.join("check.sh")).unwrap(),
            b"the host's"
        );
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1);
        assert_eq!(std::fs::read(to.join("tests/check.sh")).unwrap(), b"check");
        assert_eq!(std::fs::read(to.join("tests/unit/a.py")).unwrap(), b"a");
        assert_eq!(std::fs::read(to.join("notes")).unwrap(), b"n");
        assert_eq!(
            std::fs::read_link(to.join("alias")).unwrap(),
            Path::new("notes")
        );
        // A file where the holdout has a folder is replaced too.
        let to2 = t.path().join("ws2");
        std::fs::create_dir_all(&to2).unwrap();
        std::fs::write(to2.join("tests"), "mine").unwrap();
        copy_tree(&from, &to2).unwrap();
        assert_eq!(std::fs::read(to2.join("tests/check.sh")).unwrap(), b"check");
    }

    #[test]
    fn a_tree_past_path_max_is_copied_without_recursion() {
        let t = tempfile::tempdir().unwrap();
        let from = t.path().join("deep");
        std::fs::create_dir(&from).unwrap();
        let b = proctor_fs::Beneath::open(&from).unwrap();
        let mut cur = b.dir(Path::new("")).unwrap();
        for _ in 0..3000 {
            cur = proctor_fs::beneath::make_dir_at(std::os::fd::AsFd::as_fd(&cur), c"d", 0o755)
                .unwrap();
        }
        drop(cur);
        let to = t.path().join("copy");
        // A small stack: a recursive copy would overflow it.
        let (f, d) = (from.clone(), to.clone());
        std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || copy_tree(&f, &d).unwrap())
            .unwrap()
            .join()
            .unwrap();
        let copy = proctor_fs::Beneath::open(&to).unwrap();
        let deepest = Path::new("d").join(vec!["d"; 2999].join("/"));
        assert!(copy.dir(&deepest).is_ok());
    }

    #[test]
    fn a_file_with_two_names_is_remembered_once() {
        let t = tempfile::tempdir().unwrap();
        let a = t.path().join("a");
        std::fs::write(&a, "x").unwrap();
        let solo = t.path().join("solo");
        std::fs::write(&solo, "y").unwrap();
        std::fs::hard_link(&a, t.path().join("b")).unwrap();
        let mut links = Links::default();
        let ma = std::fs::metadata(&a).unwrap();
        assert!(links.copied(&ma).is_none());
        links.remember(&ma, "kept-a");
        let mb = std::fs::metadata(t.path().join("b")).unwrap();
        assert_eq!(links.copied(&mb), Some(&"kept-a"));
        let ms = std::fs::metadata(&solo).unwrap();
        links.remember(&ms, "kept-solo");
        assert!(links.copied(&ms).is_none(), "a single name needs no memory");
        assert_eq!(harmless_mode(0o106755), 0o755);
    }
}
