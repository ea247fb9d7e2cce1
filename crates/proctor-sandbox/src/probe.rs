//! What isolation this machine really offers, found by trying it in a throw-away child.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::sys;

/// The isolation features available to this process, each `Ok` or the reason it is missing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    /// New user, mount, PID, network, IPC and UTS namespaces with the uid mapped to 0, and a
    /// fresh `/proc` in the new PID namespace.
    pub user_namespaces: Result<(), String>,
    /// An overlay mount with `userxattr` inside such namespaces, including a deletion (whiteout).
    pub overlay: Result<(), String>,
}

impl Capabilities {
    /// Whether `SandboxSpec { namespaces: true, workspace: Overlay, .. }` can work here.
    pub fn overlay_sandbox(&self) -> bool {
        self.user_namespaces.is_ok() && self.overlay.is_ok()
    }
}

/// Tries user namespaces and overlayfs for real (in a forked child, with a scratch directory
/// under the system temp directory). The result is computed once per process.
pub fn probe() -> Capabilities {
    static CACHE: OnceLock<Capabilities> = OnceLock::new();
    CACHE
        .get_or_init(|| probe_in(&std::env::temp_dir()))
        .clone()
}

/// Like [`probe`], uncached, with the overlay's scratch layers under `dir` (use the file system
/// that will hold the trials' upper layers).
///
/// The answer comes as soon as the child has tried every step: the child then unmounts and
/// removes its scratch folder itself and exits, and a thread reaps it, so the caller does not
/// wait for the kernel to tear down the namespaces the child made (tens to hundreds of
/// milliseconds on a busy machine, one RCU grace period after another).
pub fn probe_in(dir: &Path) -> Capabilities {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let scratch = dir.join(format!(
        ".proctor-probe-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    probe_with_scratch(&scratch)
}

fn probe_with_scratch(scratch: &Path) -> Capabilities {
    let not_tried = |why: &str| Err(format!("not tried: {why}"));
    let layout = (|| -> std::io::Result<Layout> {
        let l = Layout::new(scratch);
        for d in [&l.lower, &l.upper, &l.work, &l.merged, &l.proc_] {
            std::fs::create_dir_all(d)?;
        }
        std::fs::write(l.lower.join("f"), b"x")?;
        Ok(l)
    })();
    let layout = match layout {
        Ok(l) => l,
        Err(e) => {
            let _ = crate::remove_tree(scratch);
            let why = format!(
                "cannot create the scratch directory {}: {e}",
                scratch.display()
            );
            return Capabilities {
                user_namespaces: not_tried(&why),
                overlay: not_tried(&why),
            };
        }
    };
    match layout.run_child() {
        Ok(()) => Capabilities {
            user_namespaces: Ok(()),
            overlay: Ok(()),
        },
        Err((step, msg)) if step >= OVERLAY_STEP => Capabilities {
            user_namespaces: Ok(()),
            overlay: Err(msg),
        },
        Err((_, msg)) => Capabilities {
            user_namespaces: Err(msg),
            overlay: not_tried("user namespaces are unavailable"),
        },
    }
}

struct Layout {
    scratch: PathBuf,
    lower: PathBuf,
    upper: PathBuf,
    work: PathBuf,
    merged: PathBuf,
    proc_: PathBuf,
}

const OVERLAY_STEP: i32 = 7;
const STEPS: [&str; 9] = [
    "",
    "unshare(user, mount, pid, net, ipc, uts)",
    "write /proc/self/setgroups",
    "write /proc/self/uid_map",
    "write /proc/self/gid_map",
    "make / private",
    "mount a fresh /proc in the new PID namespace",
    "mount overlay with userxattr",
    "delete a lower file through the overlay (whiteout)",
];

impl Layout {
    fn new(scratch: &Path) -> Layout {
        Layout {
            scratch: scratch.to_path_buf(),
            lower: scratch.join("lower"),
            upper: scratch.join("upper"),
            work: scratch.join("work"),
            merged: scratch.join("merged"),
            proc_: scratch.join("proc"),
        }
    }

    /// Forks a child that tries every step; `Err((step, message))` for the first that failed.
    fn run_child(&self) -> Result<(), (i32, String)> {
        let c = |s: &dyn AsRef<std::ffi::OsStr>| sys::cstring(s).map_err(|e| (0, e.to_string()));
        // SAFETY: getuid/getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let esc = |p: &Path| {
            p.to_string_lossy()
                .chars()
                .flat_map(|ch| {
                    let e = matches!(ch, ',' | ':' | '\\');
                    e.then_some('\\').into_iter().chain([ch])
                })
                .collect::<String>()
        };
        let data = format!(
            "lowerdir={},upperdir={},workdir={},userxattr",
            esc(&self.lower),
            esc(&self.upper),
            esc(&self.work)
        );
        // Everything the child needs is prepared here: after fork it only makes system calls.
        let prepared = Prepared {
            setgroups: c(&"/proc/self/setgroups")?,
            uid_map: c(&"/proc/self/uid_map")?,
            gid_map: c(&"/proc/self/gid_map")?,
            uid_line: format!("0 {uid} 1\n").into_bytes(),
            gid_line: format!("0 {gid} 1\n").into_bytes(),
            root: c(&"/")?,
            proc_dir: c(&self.proc_)?,
            proc_name: c(&"proc")?,
            overlay: c(&"overlay")?,
            merged: c(&self.merged)?,
            data: c(&data)?,
            victim: c(&self.merged.join("f"))?,
            unmount: [c(&self.proc_)?, c(&self.merged)?],
            files: [c(&self.lower.join("f"))?, c(&self.upper.join("f"))?],
            dirs: [
                c(&self.work.join("work"))?,
                c(&self.lower)?,
                c(&self.upper)?,
                c(&self.work)?,
                c(&self.merged)?,
                c(&self.proc_)?,
                c(&self.scratch)?,
            ],
        };
        let (r, w) = sys::pipe().map_err(|e| (0, format!("pipe: {e}")))?;
        let pid = sys::fork().map_err(|e| (0, format!("fork: {e}")))?;
        if pid == 0 {
            let (step, errno) = prepared.child();
            let bytes = [step.to_ne_bytes(), errno.to_ne_bytes()].concat();
            let _ = sys::write_all(w.as_fd(), &bytes);
            drop(w);
            prepared.clean_up();
            sys::exit_now(if step == 0 { 0 } else { 1 });
        }
        drop(w);
        let mut buf = [0u8; 8];
        let mut got = 0;
        while got < 8 {
            // SAFETY: reading into a valid buffer.
            let n = unsafe { libc::read(r.as_raw_fd(), buf[got..].as_mut_ptr().cast(), 8 - got) };
            if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            if n <= 0 {
                break;
            }
            got += n as usize;
        }
        if got < 8 {
            let _ = sys::wait4(pid, 0);
            let _ = crate::remove_tree(&self.scratch);
            return Err((0, "the probe child died without an answer".to_owned()));
        }
        reap_later(pid);
        let step = i32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]);
        let errno = i32::from_ne_bytes([buf[4], buf[5], buf[6], buf[7]]);
        if step == 0 {
            return Ok(());
        }
        let what = STEPS.get(step as usize).copied().unwrap_or("unknown step");
        Err((step, format!("{what}: {}", sys::errno_text(errno))))
    }
}

/// Reaps the probe child from a thread of its own (or here, if no thread can be had).
fn reap_later(pid: libc::pid_t) {
    let reaper = std::thread::Builder::new()
        .name("probe-reaper".into())
        .spawn(move || sys::wait4(pid, 0));
    if reaper.is_err() {
        let _ = sys::wait4(pid, 0);
    }
}

struct Prepared {
    setgroups: CString,
    uid_map: CString,
    gid_map: CString,
    uid_line: Vec<u8>,
    gid_line: Vec<u8>,
    root: CString,
    proc_dir: CString,
    proc_name: CString,
    overlay: CString,
    merged: CString,
    data: CString,
    victim: CString,
    /// What the child mounted: the new PID namespace's `/proc`, and the overlay.
    unmount: [CString; 2],
    /// The scratch folder's files: the lower file, and the whiteout its deletion left.
    files: [CString; 2],
    /// The scratch folder's folders, innermost first, and the scratch folder itself.
    dirs: [CString; 7],
}

impl Prepared {
    /// In the forked child, once it has answered: takes down what it mounted and removes the
    /// scratch folder (all of it is the caller's, which the child is or is root over). Whatever
    /// a failed step never made is simply not there.
    fn clean_up(&self) {
        // SAFETY: system calls with prepared, valid C strings.
        unsafe {
            for m in &self.unmount {
                libc::umount2(m.as_ptr(), libc::MNT_DETACH);
            }
            for f in &self.files {
                libc::unlink(f.as_ptr());
            }
            // The overlay's work folder keeps the temporary entry of the deletion's whiteout
            // under a name of its own: emptied entry by entry, with no allocation (we are a
            // forked child).
            let work = libc::open(
                self.dirs[0].as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            );
            if work >= 0 {
                let mut buf = [0u8; 4096];
                loop {
                    let n = libc::syscall(libc::SYS_getdents64, work, buf.as_mut_ptr(), buf.len());
                    if n <= 0 {
                        break;
                    }
                    let mut at = 0usize;
                    while at + 19 < n as usize {
                        // struct linux_dirent64: d_ino u64, d_off i64, d_reclen u16, d_type u8, d_name.
                        let reclen = u16::from_ne_bytes([buf[at + 16], buf[at + 17]]) as usize;
                        if reclen == 0 {
                            break;
                        }
                        let name = buf.as_ptr().add(at + 19).cast::<libc::c_char>();
                        let dots = *name == b'.' as libc::c_char
                            && (*name.add(1) == 0
                                || (*name.add(1) == b'.' as libc::c_char && *name.add(2) == 0));
                        if !dots {
                            libc::unlinkat(work, name, 0);
                            libc::unlinkat(work, name, libc::AT_REMOVEDIR);
                        }
                        at += reclen;
                    }
                }
                libc::close(work);
            }
            for d in &self.dirs {
                libc::rmdir(d.as_ptr());
            }
        }
    }

    /// In the forked child; fork-safe system calls only. Returns (failed step or 0, errno).
    fn child(&self) -> (i32, i32) {
        let errno = || std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        let write = |path: &CString, data: &[u8]| -> bool {
            // SAFETY: valid C string and buffer.
            unsafe {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return false;
                }
                let ok = libc::write(fd, data.as_ptr().cast(), data.len()) == data.len() as isize;
                libc::close(fd);
                ok
            }
        };
        // SAFETY: system calls with prepared, valid arguments.
        unsafe {
            let flags = libc::CLONE_NEWUSER
                | libc::CLONE_NEWNS
                | libc::CLONE_NEWPID
                | libc::CLONE_NEWNET
                | libc::CLONE_NEWIPC
                | libc::CLONE_NEWUTS;
            if libc::unshare(flags) < 0 {
                return (1, errno());
            }
            if !write(&self.setgroups, b"deny") {
                return (2, errno());
            }
            if !write(&self.uid_map, &self.uid_line) {
                return (3, errno());
            }
            if !write(&self.gid_map, &self.gid_line) {
                return (4, errno());
            }
            let null = std::ptr::null();
            if libc::mount(
                null,
                self.root.as_ptr(),
                null,
                libc::MS_REC | libc::MS_PRIVATE,
                null.cast(),
            ) < 0
            {
                return (5, errno());
            }
            // The first child is PID 1 of the new PID namespace: it mounts that namespace's /proc.
            let pid = libc::fork();
            if pid < 0 {
                return (6, errno());
            }
            if pid == 0 {
                let r = libc::mount(
                    self.proc_name.as_ptr(),
                    self.proc_dir.as_ptr(),
                    self.proc_name.as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    null.cast(),
                );
                libc::_exit(if r < 0 { errno().clamp(1, 255) } else { 0 });
            }
            let mut status = 0;
            while libc::waitpid(pid, &mut status, 0) < 0 {
                if errno() != libc::EINTR {
                    return (6, errno());
                }
            }
            if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
                let code = if libc::WIFEXITED(status) {
                    libc::WEXITSTATUS(status)
                } else {
                    libc::EIO
                };
                return (6, code);
            }
            if libc::mount(
                self.overlay.as_ptr(),
                self.merged.as_ptr(),
                self.overlay.as_ptr(),
                0,
                self.data.as_ptr().cast(),
            ) < 0
            {
                return (7, errno());
            }
            if libc::unlink(self.victim.as_ptr()) < 0 {
                return (8, errno());
            }
        }
        (0, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn the_probe_answers_and_its_child_removes_its_scratch_folder() {
        let dir = tempfile::tempdir().unwrap();
        let caps = probe_in(dir.path());
        assert!(caps.overlay_sandbox(), "{caps:?}");
        // The child cleans up after answering, on its own time.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
            if left.is_empty() {
                break;
            }
            assert!(Instant::now() < deadline, "left behind: {left:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
