//! Where a run keeps its per-trial scratch: the overlay's upper and work folders, the shims, the
//! agent's private folders and the calls sockets. None of it is evidence (what counts is copied
//! into the store before the trial is committed), so it may live in memory.
//!
//! Creating a trial's dozen folders and sockets on a disk file system costs milliseconds (ext4's
//! inode allocator was the largest single cost in the runner's profile); on tmpfs it costs
//! microseconds. A run therefore uses `/dev/shm` when it is a tmpfs with room to spare, and the
//! store's `work/` folder otherwise, or wherever `--scratch` says.

use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The memory-backed file system tried first.
const SHM: &str = "/dev/shm";
/// Free space `/dev/shm` must have beyond what the run's trials may write into it at once.
const SHM_MIN_FREE: u64 = 1 << 30;
/// The longest path a Unix socket may have (`sun_path` holds 108 bytes with its NUL).
const SOCKET_PATH_MAX: usize = 107;
/// `statfs`'s magic number for tmpfs.
const TMPFS_MAGIC: i64 = 0x0102_1994;

/// What backs a run's scratch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScratchKind {
    /// tmpfs: memory.
    Memory,
    /// A disk file system.
    Disk,
}

impl ScratchKind {
    /// The word used in messages.
    pub fn as_str(self) -> &'static str {
        match self {
            ScratchKind::Memory => "memory (tmpfs)",
            ScratchKind::Disk => "disk",
        }
    }
}

/// A run's scratch folders, created and owned by this process's user.
#[derive(Debug, Clone)]
pub struct Scratch {
    /// The per-trial folders go under here (one per trial, removed when it ends).
    pub work: PathBuf,
    /// The trials' calls sockets go here (a short path: socket paths are limited to 107 bytes).
    pub sockets: PathBuf,
    /// What backs `work`.
    pub kind: ScratchKind,
}

impl Scratch {
    /// Creates the scratch of run `run_id`: under `requested` when given, else in `/dev/shm`
    /// when it is a tmpfs with `may_write` bytes (what the run's trials may write at once: the
    /// largest `disk_mb` times the jobs) and 1 GiB to spare free, and the run isolates with an
    /// overlay (a copy-isolated trial copies the whole fixture, which belongs on disk), else
    /// under the store's `work/` folder.
    pub fn create(
        store_root: &Path,
        run_id: &str,
        requested: Option<&Path>,
        overlay: bool,
        may_write: u64,
    ) -> io::Result<Scratch> {
        let (base, kind) = match requested {
            Some(dir) => (dir.to_path_buf(), kind_of(dir)),
            None => match shm_base(may_write).filter(|_| overlay) {
                Some(base) => (base, ScratchKind::Memory),
                None => (store_root.join("work"), kind_of(store_root)),
            },
        };
        // Named after this process too: a run killed before it could clean up (SIGKILL, a
        // crash) leaves its folder behind, and in /dev/shm that is memory; the next run removes
        // every folder whose process is gone.
        remove_abandoned(&base);
        let work = base.join(format!("{run_id}.{}", std::process::id()));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&work)?;
        let sockets = work.join("s");
        let sockets =
            if sockets.as_os_str().len() + "/18446744073709551615.sock".len() <= SOCKET_PATH_MAX {
                sockets
            } else {
                std::env::temp_dir().join(format!("proctor-{}-{run_id}", std::process::id()))
            };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&sockets)?;
        Ok(Scratch {
            work,
            sockets,
            kind,
        })
    }

    /// Removes every scratch folder of the run.
    pub fn remove(&self) {
        let _ = proctor_sandbox::remove_tree(&self.work);
        let _ = proctor_sandbox::remove_tree(&self.sockets);
    }
}

/// Bytes a run's trials may write into its scratch at once: the suite's largest `disk_mb` (over
/// its tasks and variants), once per job (each trial's changes are moved there at its end).
pub fn may_write(suite: &proctor_suite::Suite, jobs: usize) -> u64 {
    let largest = suite
        .file
        .tasks
        .iter()
        .flat_map(|t| suite.file.variants.iter().map(move |v| (t, v)))
        .map(|(t, v)| suite.settings(t, v).limits.disk_mb())
        .max()
        .unwrap_or(proctor_suite::model::DEFAULT_DISK_MB);
    largest.saturating_mul(1 << 20).saturating_mul(jobs as u64)
}

/// Removes the scratch folders under `base` whose process no longer exists: only folders named
/// exactly `RUN_ID.PID` (a valid run id), so nothing else in a `--scratch` folder is touched.
fn remove_abandoned(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.rsplit_once('.'))
            .filter(|(run, _)| run.parse::<proctor_store::RunId>().is_ok())
            .and_then(|(_, pid)| pid.parse::<libc::pid_t>().ok())
            .filter(|&pid| pid > 0)
        else {
            continue;
        };
        if process_is_gone(pid) {
            let _ = proctor_sandbox::remove_tree(&entry.path());
        }
    }
}

/// Whether no process has `pid` in proctor's PID namespace (signal 0 finds it or not), so that
/// what is named after that process may be removed. Not for a PID of another namespace.
pub(crate) fn process_is_gone(pid: libc::pid_t) -> bool {
    pid > 0
        && rustix::process::Pid::from_raw(pid).is_some_and(|pid| {
            matches!(
                rustix::process::test_kill_process(pid),
                Err(rustix::io::Errno::SRCH)
            )
        })
}

/// `/dev/shm/proctor-UID`, when `/dev/shm` is a tmpfs with room for `may_write` bytes and more,
/// and that folder is (or can be made) this user's own and private.
pub fn shm_base(may_write: u64) -> Option<PathBuf> {
    let shm = Path::new(SHM);
    if kind_of(shm) != ScratchKind::Memory
        || free_bytes(shm)? < may_write.saturating_add(SHM_MIN_FREE)
    {
        return None;
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    let base = shm.join(format!("proctor-{uid}"));
    match std::fs::DirBuilder::new().mode(0o700).create(&base) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(_) => return None,
    }
    // Another user could have made it first in the shared, sticky /dev/shm: use it only if it is
    // a real folder of ours that nobody else can enter.
    let meta = std::fs::symlink_metadata(&base).ok()?;
    (meta.is_dir() && meta.uid() == uid && meta.mode() & 0o077 == 0).then_some(base)
}

/// Whether `path` (or its nearest existing ancestor) is on a tmpfs.
// statfs's field types differ between architectures; the casts are no-ops only on some.
#[allow(clippy::unnecessary_cast)]
fn kind_of(path: &Path) -> ScratchKind {
    match statfs(path) {
        Some(s) if s.f_type as i64 == TMPFS_MAGIC => ScratchKind::Memory,
        _ => ScratchKind::Disk,
    }
}

#[allow(clippy::unnecessary_cast)]
fn free_bytes(path: &Path) -> Option<u64> {
    let s = statfs(path)?;
    Some((s.f_bavail as u64).saturating_mul(s.f_bsize as u64))
}

fn statfs(path: &Path) -> Option<libc::statfs> {
    use std::os::unix::ffi::OsStrExt;
    let existing = path.ancestors().find(|p| p.exists())?;
    let c = std::ffi::CString::new(existing.as_os_str().as_bytes()).ok()?;
    let mut out = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: `c` is a NUL-terminated path and `out` points to writable memory of the right size.
    let rc = unsafe { libc::statfs(c.as_ptr(), out.as_mut_ptr()) };
    // SAFETY: statfs returned 0, so it filled `out`.
    (rc == 0).then(|| unsafe { out.assume_init() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_requested_folder_is_used_and_removed() {
        let store = tempfile::tempdir().unwrap();
        let mine = tempfile::tempdir().unwrap();
        let s = Scratch::create(store.path(), "run-1", Some(mine.path()), true, 0).unwrap();
        assert_eq!(
            s.work,
            mine.path().join(format!("run-1.{}", std::process::id()))
        );
        assert!(s.work.is_dir() && s.sockets.is_dir());
        assert_eq!(
            std::fs::metadata(&s.work).unwrap().mode() & 0o777,
            0o700,
            "scratch is private"
        );
        s.remove();
        assert!(!s.work.exists() && !s.sockets.exists());
    }

    #[test]
    fn copy_isolation_keeps_scratch_on_the_store_disk() {
        let store = tempfile::tempdir().unwrap();
        let s = Scratch::create(store.path(), "run-2", None, false, 0).unwrap();
        assert_eq!(
            s.work,
            store
                .path()
                .join("work")
                .join(format!("run-2.{}", std::process::id()))
        );
        s.remove();
    }

    #[test]
    fn overlay_runs_use_dev_shm_when_it_is_a_roomy_tmpfs() {
        let store = tempfile::tempdir().unwrap();
        let s = Scratch::create(store.path(), "run-3", None, true, 0).unwrap();
        let shm_usable = kind_of(Path::new(SHM)) == ScratchKind::Memory
            && free_bytes(Path::new(SHM)).unwrap_or(0) >= SHM_MIN_FREE;
        if shm_usable {
            assert!(s.work.starts_with(SHM), "{}", s.work.display());
            assert_eq!(s.kind, ScratchKind::Memory);
        } else {
            assert!(s.work.starts_with(store.path()));
        }
        s.remove();
    }

    #[test]
    fn a_run_that_may_write_more_than_dev_shm_holds_keeps_its_scratch_on_the_store_disk() {
        let store = tempfile::tempdir().unwrap();
        // More than any /dev/shm has free.
        let s = Scratch::create(store.path(), "run-5", None, true, u64::MAX / 2).unwrap();
        assert!(s.work.starts_with(store.path()), "{}", s.work.display());
        s.remove();
    }

    #[test]
    fn a_killed_runs_scratch_is_removed_by_the_next_run_and_a_live_ones_is_kept() {
        let base = tempfile::tempdir().unwrap();
        // A process that has exited (and been reaped): its pid names nobody now.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let abandoned = base.path().join(format!("20261130-061604-1138.{dead}"));
        std::fs::create_dir_all(abandoned.join("t.v.0/upper")).unwrap();
        let live = base
            .path()
            .join(format!("20261130-061604-99aa.{}", std::process::id()));
        std::fs::create_dir_all(&live).unwrap();
        let unrelated = base.path().join("not-a-scratch-folder");
        std::fs::create_dir_all(&unrelated).unwrap();
        // Named like PID but not after a run id: someone else's, left alone.
        let lookalike = base.path().join(format!("project.{dead}"));
        std::fs::create_dir_all(&lookalike).unwrap();

        let s = Scratch::create(base.path(), "new-run", Some(base.path()), true, 0).unwrap();
        assert!(!abandoned.exists(), "the dead run's scratch is removed");
        assert!(live.exists(), "a live process's scratch is kept");
        assert!(
            unrelated.exists(),
            "a folder not named RUN_ID.PID is left alone"
        );
        assert!(
            lookalike.exists(),
            "a folder not named after a run id is left alone"
        );
        s.remove();
    }

    #[test]
    fn a_long_scratch_path_puts_sockets_in_the_temp_dir() {
        let store = tempfile::tempdir().unwrap();
        let deep = store.path().join("x".repeat(120));
        let s = Scratch::create(store.path(), "run-4", Some(&deep), true, 0).unwrap();
        assert!(s.sockets.starts_with(std::env::temp_dir()));
        s.remove();
    }
}
