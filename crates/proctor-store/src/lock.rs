//! The lock that lets one process at a time write a run.
//!
//! A run's folder holds a lock file, [`LOCK_FILE`], that the process writing the run keeps
//! locked (`flock(LOCK_EX)`, through std's `File::try_lock`) for as long as it has the run open: from
//! [`crate::Store::create_run`] or [`crate::Store::resume_run`] until the [`crate::RunHandle`]
//! is dropped or the process ends (the kernel releases the lock of a killed process). The file
//! names its holder (pid and host) so that a refused `--resume` can say who runs the run.
//!
//! Readers never take the lock; [`holder`] only asks whether someone has it, which is how a run
//! whose `run.json` says `running` is told apart from one whose process died.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{io_err, Result, StoreError};
use crate::model::HostInfo;
use crate::RunId;

/// The lock file's name inside a run's folder.
pub const LOCK_FILE: &str = "run.lock";

/// How long a refused lock is tried again while its file names no live holder (a holder that
/// has just taken the lock and not yet written its name, or a reader's momentary probe).
const SETTLE: Duration = Duration::from_millis(300);

/// The process that holds a run's lock, as the lock file names it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LockHolder {
    /// The holder's process id, when the file names one.
    pub pid: Option<u32>,
    /// The holder's host name, when the file names one.
    pub host: Option<String>,
}

impl LockHolder {
    /// This process on this host.
    fn me() -> LockHolder {
        LockHolder {
            pid: Some(std::process::id()),
            host: Some(HostInfo::detect().hostname).filter(|h| !h.is_empty()),
        }
    }

    /// Whether the file names a process that is known to be gone: one on this host whose pid
    /// no longer exists, or no process at all. Such a name is stale (or not yet written).
    fn is_stale(&self) -> bool {
        let Some(pid) = self.pid else {
            return true;
        };
        let here = HostInfo::detect().hostname;
        if self.host.as_deref().is_some_and(|h| h != here) {
            return false;
        }
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return false;
        };
        // SAFETY: kill(2) with signal 0 sends nothing; it only checks that the process exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0
            || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        !alive
    }
}

impl std::fmt::Display for LockHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.pid {
            Some(pid) => write!(f, "pid {pid}")?,
            None => f.write_str("pid unknown")?,
        }
        match &self.host {
            Some(host) => write!(f, " on host {host}"),
            None => f.write_str(" on an unknown host"),
        }
    }
}

/// A run's exclusive lock, held while this value lives (and released by the kernel when the
/// process ends, however it ends).
#[derive(Debug)]
pub(crate) struct RunLock {
    /// The locked file; closing it releases the lock. It is opened close-on-exec, so programs
    /// the run starts never inherit the lock.
    _file: File,
}

impl RunLock {
    /// Takes the lock of the run `id` whose folder is `dir`, and writes this process's pid and
    /// host into the lock file. Fails with [`StoreError::RunLocked`] when another process (or
    /// another handle of this one) holds it.
    pub(crate) fn acquire(dir: &Path, id: &RunId) -> Result<RunLock> {
        let path = dir.join(LOCK_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .open(&path)
            .map_err(io_err("open", &path))?;
        let deadline = Instant::now() + SETTLE;
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(TryLockError::WouldBlock) => {
                    let holder = read_holder(&mut file);
                    // A handle of this very process that was just dropped can still be held for
                    // an instant by a child forked before it was closed (between its fork and
                    // its exec, which closes the descriptor): try again, as for a stale name.
                    let settling = holder.is_stale() || holder == LockHolder::me();
                    if settling && Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(10));
                        continue;
                    }
                    return Err(StoreError::RunLocked {
                        id: id.clone(),
                        holder,
                    });
                }
                Err(TryLockError::Error(e)) => return Err(io_err("lock", &path)(e)),
            }
        }
        let text = serde_json::to_vec(&LockHolder::me()).map_err(|source| StoreError::Json {
            path: path.clone(),
            source,
        })?;
        file.set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)))
            .and_then(|_| file.write_all(&text))
            .and_then(|()| file.write_all(b"\n"))
            .map_err(io_err("write", &path))?;
        Ok(RunLock { _file: file })
    }
}

/// Who holds the lock of the run whose folder is `dir`: `None` when nobody does (the run is
/// not being written by any live process, or has no lock file at all, as runs made before the
/// lock existed).
///
/// It probes with a shared lock that it releases at once, so it never blocks the holder; a
/// `--resume` that tries the lock in that same instant tries again (see [`RunLock::acquire`]).
pub(crate) fn holder(dir: &Path) -> Result<Option<LockHolder>> {
    let path = dir.join(LOCK_FILE);
    let mut file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err("open", &path)(e)),
    };
    match file.try_lock_shared() {
        // Nobody holds it; closing the file releases the probe.
        Ok(()) => Ok(None),
        Err(TryLockError::WouldBlock) => {
            let deadline = Instant::now() + SETTLE;
            let mut named = read_holder(&mut file);
            // A holder that has just taken the lock writes its name right after.
            while named.pid.is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
                named = read_holder(&mut file);
            }
            Ok(Some(named))
        }
        Err(TryLockError::Error(e)) => Err(io_err("lock", &path)(e)),
    }
}

/// The holder the lock file names; an empty or unreadable file names nobody.
fn read_holder(file: &mut File) -> LockHolder {
    let mut text = String::new();
    let read = file
        .seek(SeekFrom::Start(0))
        .and_then(|_| file.read_to_string(&mut text));
    match read {
        Ok(_) => serde_json::from_str(text.trim()).unwrap_or_default(),
        Err(_) => LockHolder::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> RunId {
        "20261129-221503-7f3a".parse().expect("a run id")
    }

    #[test]
    fn a_second_lock_is_refused_naming_the_holder_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(holder(dir.path()).expect("probe"), None, "no lock file yet");
        let first = RunLock::acquire(dir.path(), &id()).expect("the first lock");
        let me = LockHolder::me();
        let Err(StoreError::RunLocked {
            id: locked,
            holder: named,
        }) = RunLock::acquire(dir.path(), &id())
        else {
            panic!("a second lock on a locked run was granted");
        };
        assert_eq!(locked, id());
        assert_eq!(named, me);
        let message = StoreError::RunLocked {
            id: id(),
            holder: named,
        }
        .to_string();
        assert!(
            message.contains(&format!("pid {}", std::process::id())),
            "{message}"
        );
        if let Some(host) = &me.host {
            assert!(message.contains(&format!("on host {host}")), "{message}");
        }
        assert_eq!(holder(dir.path()).expect("probe"), Some(me.clone()));
        drop(first);
        assert_eq!(holder(dir.path()).expect("probe"), None, "released on drop");
        let again = RunLock::acquire(dir.path(), &id()).expect("the lock after the first is gone");
        assert_eq!(holder(dir.path()).expect("probe"), Some(me));
        drop(again);
    }

    #[test]
    fn a_stale_name_in_the_file_is_replaced_by_the_new_holder() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join(LOCK_FILE),
            "{\"pid\":4000000,\"host\":\"elsewhere\"}\n",
        )
        .expect("write");
        assert_eq!(
            holder(dir.path()).expect("probe"),
            None,
            "a name in an unlocked file is no holder"
        );
        let _lock = RunLock::acquire(dir.path(), &id()).expect("the lock");
        assert_eq!(holder(dir.path()).expect("probe"), Some(LockHolder::me()));
    }
}
