//! Handing the host's folders back to an unprivileged caller: where `newuidmap` mapped a range
//! of subordinate ids, what the agent gave to uid 1000 inside is owned by a subordinate id
//! outside, which the caller can neither read, re-mode nor remove. Once every process of the
//! trial is gone, T (root of the trial's namespace, so able to) walks the host folders the
//! trial wrote, the workspace's upper layer or copy and an image root's upper layer, and gives
//! every entry back to uid and gid 0 inside (the caller outside). In the workspace it first
//! keeps what was lost: the owner (inside ids) in [`OWNER_XATTR`], and a mode with set-id bits
//! (which `chown` clears) in [`crate::copy::MODE_XATTR`], where the capture and the diff read
//! them. A symbolic link can hold no user attribute: its owner is given back unrecorded.
//!
//! As root, none of this is needed (the caller reads and removes anything), and nothing is
//! walked.

use std::ffi::CStr;
use std::fs;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::sys;

/// The extended attribute that keeps an entry's owner inside the trial (`UID:GID`, decimal)
/// where it was given back to the caller: set on the host's workspace layer, read by the
/// capture.
pub const OWNER_XATTR: &CStr = c"user.proctor.owner";

/// The host folders to give back, held open from before the pivot.
#[derive(Default)]
pub(crate) struct HandBack {
    /// (folder, whether owners and modes are recorded: the workspace's).
    dirs: Vec<(OwnedFd, bool)>,
}

impl HandBack {
    /// Holds `dir` (a path in T's temporary root, where the host is reachable) to be given
    /// back; `record`: keep owners and modes (the workspace).
    pub(crate) fn hold(&mut self, dir: &Path, record: bool) -> Result<(), String> {
        let c = sys::cstring(dir).map_err(|e| e.to_string())?;
        // SAFETY: a valid C string; the flags need no further arguments.
        let fd = sys::check(unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        })
        .map_err(|e| format!("open {}: {e}", dir.display()))?;
        // SAFETY: the kernel just returned this new descriptor.
        self.dirs
            .push((unsafe { OwnedFd::from_raw_fd(fd) }, record));
        Ok(())
    }

    /// Whether there is anything to give back.
    pub(crate) fn is_empty(&self) -> bool {
        self.dirs.is_empty()
    }

    /// Gives every held folder back (in T's own `/proc`: see [`sys::OwnProc`]). An entry that cannot be given
    /// back is left as it is: the capture notes what it cannot read.
    pub(crate) fn finish(&self) {
        for (fd, record) in &self.dirs {
            give_back_tree(&sys::fd_path(fd), *record);
        }
    }
}

/// Gives back every entry below `dir`, walking by open folders
/// ([`proctor_fs::beneath::walk`]): no recursion, and no path longer than one name below a
/// folder's descriptor, so a tree of any depth (past PATH_MAX too) is given back whole.
fn give_back_tree(dir: &Path, record: bool) {
    use proctor_fs::beneath::{walk, Step, Visit};
    use std::os::unix::ffi::OsStrExt;
    struct GiveBack(bool);
    impl Visit for GiveBack {
        fn entry(
            &mut self,
            dir: std::os::fd::BorrowedFd<'_>,
            name: &CStr,
            _: &rustix::fs::Stat,
        ) -> std::io::Result<Step> {
            let path = sys::fd_path(&dir).join(std::ffi::OsStr::from_bytes(name.to_bytes()));
            if let Ok(meta) = fs::symlink_metadata(&path) {
                let _ = give_back(&path, &meta, self.0);
            }
            Ok(Step::Descend)
        }
        fn leave(&mut self, _: std::os::fd::BorrowedFd<'_>, _: &CStr) -> std::io::Result<()> {
            Ok(())
        }
    }
    let Ok(top) = rustix::fs::open(
        dir,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    ) else {
        return;
    };
    let _ = walk(top, &mut GiveBack(record));
}

/// Gives one entry back to uid and gid 0 inside, first recording what is lost.
fn give_back(path: &Path, meta: &fs::Metadata, record: bool) -> std::io::Result<()> {
    if meta.uid() == 0 && meta.gid() == 0 {
        return Ok(());
    }
    let c = sys::cstring(path)?;
    let attrs = !meta.file_type().is_symlink() && (meta.is_file() || meta.is_dir());
    if record && attrs {
        let owner = format!("{}:{}", meta.uid(), meta.gid());
        set_xattr(&c, OWNER_XATTR, owner.as_bytes())?;
        let mode = meta.mode() & 0o7777;
        if mode & crate::copy::SPECIAL_BITS != 0
            && sys::lgetxattr(path, crate::copy::MODE_XATTR)?.is_none()
        {
            set_xattr(&c, crate::copy::MODE_XATTR, mode.to_string().as_bytes())?;
        }
    }
    // (`chown` clears a file's set-id bits: its real mode was kept above.)
    // SAFETY: a valid C string.
    sys::check(unsafe { libc::lchown(c.as_ptr(), 0, 0) }).map(|_| ())
}

fn set_xattr(path: &CStr, name: &CStr, value: &[u8]) -> std::io::Result<()> {
    // SAFETY: valid C strings and a value of the given length.
    sys::check(unsafe {
        libc::lsetxattr(
            path.as_ptr(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    })
    .map(|_| ())
}

/// The owner (inside ids) a hand-back recorded on `path`, if one did.
pub fn recorded_owner(path: &Path) -> Option<(u32, u32)> {
    let bytes = sys::lgetxattr(path, OWNER_XATTR).ok()??;
    let text = std::str::from_utf8(&bytes).ok()?;
    let (u, g) = text.split_once(':')?;
    Some((u.parse().ok()?, g.parse().ok()?))
}
