//! One name at a time beneath an open folder: the resolution every lookup uses (never above the
//! folder, never through a link), how a folder is opened, and opening one folder by its name.
//! What [`crate::beneath`] and [`crate::deep`] are both built on.

use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use rustix::fs::{Mode, OFlags, ResolveFlags};

/// How every lookup beneath a folder resolves: never above it, never through a link.
pub const RESOLVE: ResolveFlags = ResolveFlags::BENEATH
    .union(ResolveFlags::NO_SYMLINKS)
    .union(ResolveFlags::NO_MAGICLINKS);

/// How a folder is opened to be read or written into.
pub fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// A name as a C string.
pub fn cstring(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

/// The folder `name` in `dir`, open, if it is a folder (not a link to one). Where the kernel has
/// no `openat2` (before Linux 5.6, or a seccomp filter that refuses it), `openat` with
/// `O_NOFOLLOW` of the single name is as safe: `name` is one component, never `..`.
pub fn open_dir_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<OwnedFd> {
    let bytes = name.to_bytes();
    if bytes.is_empty() || bytes == b"." || bytes == b".." || bytes.contains(&b'/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not one name", name.to_string_lossy()),
        ));
    }
    match rustix::fs::openat2(dir, name, dir_flags(), Mode::empty(), RESOLVE) {
        Err(rustix::io::Errno::NOSYS | rustix::io::Errno::PERM) => {
            rustix::fs::openat(dir, name, dir_flags(), Mode::empty()).map_err(Into::into)
        }
        other => other.map_err(Into::into),
    }
}
