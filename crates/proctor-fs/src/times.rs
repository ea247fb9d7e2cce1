//! Modification times given back: every copy proctor makes of an agent's end state (the kept
//! files, a check's view, a rescore's rebuild) carries the times the agent left, which `make`
//! and the like decide by. Access times are left as they fall (reading a file changes them).

use std::ffi::CStr;
use std::io;
use std::os::fd::BorrowedFd;

use rustix::fs::{AtFlags, Stat, Timespec, Timestamps, UTIME_OMIT};

/// A modification time: seconds since the epoch, and nanoseconds past them.
pub type Time = (i64, u32);

/// The modification time of `st`: seconds since the epoch and nanoseconds.
pub fn mtime_of(st: &Stat) -> Time {
    #[allow(clippy::useless_conversion)]
    let sec = i64::from(st.st_mtime);
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let nsec = st.st_mtime_nsec as u32;
    (sec, nsec)
}

fn stamps((sec, nsec): Time) -> Timestamps {
    Timestamps {
        last_access: Timespec {
            tv_sec: 0,
            tv_nsec: UTIME_OMIT,
        },
        last_modification: Timespec {
            tv_sec: sec,
            tv_nsec: i64::from(nsec.min(999_999_999)),
        },
    }
}

/// Gives the open entry `fd` the modification time `mtime` (its access time is not changed).
pub fn set_mtime(fd: BorrowedFd<'_>, mtime: Time) -> io::Result<()> {
    rustix::fs::futimens(fd, &stamps(mtime)).map_err(Into::into)
}

/// Gives the entry `name` of the open folder `dir` (a link's own time, never its target's) the
/// modification time `mtime`.
pub fn set_mtime_at(dir: BorrowedFd<'_>, name: &CStr, mtime: Time) -> io::Result<()> {
    rustix::fs::utimensat(dir, name, &stamps(mtime), AtFlags::SYMLINK_NOFOLLOW).map_err(Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_files_and_a_links_time_is_given_back() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("f"), "x").unwrap();
        std::os::unix::fs::symlink("f", t.path().join("l")).unwrap();
        let dir = std::fs::File::open(t.path()).unwrap();
        let f = std::fs::File::open(t.path().join("f")).unwrap();
        set_mtime(f.as_fd(), (946_684_800, 5)).unwrap();
        set_mtime_at(dir.as_fd(), c"l", (1_000_000_000, 7)).unwrap();
        let st = rustix::fs::stat(t.path().join("f")).unwrap();
        assert_eq!(mtime_of(&st), (946_684_800, 5));
        let st = rustix::fs::lstat(t.path().join("l")).unwrap();
        assert_eq!(mtime_of(&st), (1_000_000_000, 7));
        // The link's target kept its own.
        let st = rustix::fs::stat(t.path().join("l")).unwrap();
        assert_eq!(mtime_of(&st), (946_684_800, 5));
    }
}
