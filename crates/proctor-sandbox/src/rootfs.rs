//! Building the sandbox's root file system (in the trial init T) and the agent's narrower view of
//! it (in the agent init A).
//!
//! T's root: a skeleton (a fresh tmpfs, or a [`RootSkeleton`] laid out once for the run's trials
//! of one shape and bound read-only) holding read-only recursive binds of the host's top-level
//! entries, a fresh `/proc`, a minimal `/dev`, private tmpfs `/tmp`, `/run` and `/home`, the
//! private HOME, the workspace, the extra binds and the service directories. Paths to hide from
//! the agent that live below the private directories are bound read-only too, so services can
//! still read them.
//! A's view, in its own mount namespace: the service directories unmounted and covered, every
//! hidden path covered by an empty read-only tmpfs, and a `/proc` of the agent's PID namespace.

use std::ffi::{CStr, OsStr, OsString};
use std::fs;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Component, Path, PathBuf};

use crate::disk::{OnDisk, Part, TrialDisk};
use crate::handback::HandBack;
use crate::ids::{IdMapKind, IdMapping};
use crate::report::{FullStop, Isolation, Namespace, WorkspaceKind};
use crate::spec::{Network, RootSkeleton, SandboxSpec, Workspace, SERVICE_DIR_ROOT, SIDECAR_ROOT};
use crate::sys::{self, MOUNT_ATTR_NODEV, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY};
use crate::view::{self, SYSTEM_TOP};

/// Where the host's root is reachable while the new root is built (inside the base tmpfs).
const OLD: &str = "/oldroot";
/// Where the new root is assembled (inside the base tmpfs).
const NEW: &str = "/newroot";

/// Top-level host entries that are never bound: replaced by private mounts (`proc`, `tmp`,
/// `sys`) or by directories of the new root's own tmpfs (`dev`, `run`, `home`), read-only like
/// the rest of it.
const PRIVATE_TOP: &[&str] = &["proc", "dev", "tmp", "run", "home", "sys"];

/// The private top-level directories that get a file system of their own (the others are plain
/// directories of the new root's tmpfs, where mount points must be made before it turns
/// read-only).
const OWN_MOUNT_TOP: &[&str] = &["proc", "tmp", "sys"];

/// An empty file and an empty folder of `/dev`'s read-only skeleton, bound over what is hidden:
/// a bind of an entry of a read-only mount is read-only from its first system call, so a hidden
/// path costs one mount (no file system of its own, no remount).
const EMPTY_FILE: &str = ".proctor-empty";
/// See [`EMPTY_FILE`].
const EMPTY_DIR: &str = ".proctor-empty.d";

/// The device nodes bound from the host into `/dev`.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

type R<T> = Result<T, String>;

fn ctx(what: impl FnOnce() -> String) -> impl FnOnce(std::io::Error) -> String {
    move |e| format!("{}: {e}", what())
}

/// `NEW` + an absolute inside path.
fn in_new(p: &Path) -> PathBuf {
    Path::new(NEW).join(p.strip_prefix("/").unwrap_or(p))
}

/// `OLD` + an absolute host path.
fn in_old(p: &Path) -> PathBuf {
    under(Path::new(OLD), p)
}

/// `base` + an absolute path.
pub(crate) fn under(base: &Path, p: &Path) -> PathBuf {
    base.join(p.strip_prefix("/").unwrap_or(p))
}

/// `mkdir -p` that costs one system call in the usual cases (created, or already there).
pub(crate) fn mkdir_p(p: &Path) -> R<()> {
    match fs::DirBuilder::new().mode(0o755).create(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(_) => fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(p)
            .map_err(ctx(|| {
                format!("cannot create the mount point {}", p.display())
            })),
    }
}

/// Creates an empty regular file as a mount point (one `mknod`), and its parents if needed.
pub(crate) fn touch(p: &Path) -> R<()> {
    let c = sys::cstring(p).map_err(|e| e.to_string())?;
    let mknod = || {
        // SAFETY: valid C string.
        let r = unsafe { libc::mknod(c.as_ptr(), libc::S_IFREG | 0o644, 0) };
        if r == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    };
    match mknod() {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(parent) = p.parent() {
                mkdir_p(parent)?;
            }
            match mknod() {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
                _ => Ok(()),
            }
            .map_err(ctx(|| {
                format!("cannot create the mount point {}", p.display())
            }))
        }
        Err(e) => Err(format!(
            "cannot create the mount point {}: {e}",
            p.display()
        )),
    }
}

pub(crate) fn tmpfs(target: &Path, flags: libc::c_ulong, data: &str) -> R<()> {
    sys::mount(
        Some(OsStr::new("tmpfs")),
        target,
        Some("tmpfs"),
        flags,
        Some(data),
    )
    .map_err(ctx(|| format!("mount tmpfs on {}", target.display())))
}

/// Binds `src` on `dst` (creating `dst` as a directory or a file to match), recursively.
pub(crate) fn bind(src: &Path, dst: &Path, read_only: bool, extra: u64) -> R<()> {
    let meta = fs::metadata(src).map_err(ctx(|| format!("cannot bind {}", src.display())))?;
    if meta.is_dir() {
        mkdir_p(dst)?;
    } else {
        touch(dst)?;
    }
    sys::mount(
        Some(src.as_os_str()),
        dst,
        None,
        libc::MS_BIND | libc::MS_REC,
        None,
    )
    .map_err(ctx(|| {
        format!("bind {} on {}", src.display(), dst.display())
    }))?;
    let set = if read_only { MOUNT_ATTR_RDONLY } else { 0 } | extra;
    if set != 0 {
        sys::mount_setattr_recursive(dst, set)
            .map_err(ctx(|| format!("make {} read-only", dst.display())))?;
    }
    Ok(())
}

/// The first component of an absolute path, if it is a normal one.
fn top(p: &Path) -> Option<&OsStr> {
    p.components().find_map(|c| match c {
        Component::Normal(n) => Some(n),
        _ => None,
    })
}

/// Whether a host path lies under a directory the sandbox replaces with a private mount (so it
/// is not visible inside through the top-level binds).
fn under_private(p: &Path) -> bool {
    top(p).is_some_and(|t| PRIVATE_TOP.iter().any(|x| OsStr::new(x) == t))
}

/// What T holds once its root is built.
pub(crate) struct TrialRoot {
    /// The isolation the trial got, for its record.
    pub(crate) isolation: Isolation,
    /// The trial's disk, when its writes are bounded.
    pub(crate) disk: Option<TrialDisk>,
    /// What goes back to an unprivileged caller at the end.
    pub(crate) handback: HandBack,
    /// T's own `/proc`, where the end's moves and give-backs work from.
    pub(crate) own_proc: sys::OwnProc,
}

/// Builds T's root and pivots into it. Runs in T: new user, mount, PID (T is its PID 1), IPC, UTS
/// and maybe network namespaces.
pub(crate) fn build_trial_root(
    spec: &SandboxSpec,
    ids: &IdMapping,
    join_cgroup: fn(&Path) -> std::io::Result<()>,
) -> R<TrialRoot> {
    enter_base_tmpfs()?;
    let handback = hand_back_of(spec, ids)?;
    let disk = mount_trial_disk(spec)?;
    // T joins the trial's control groups before anything of the trial runs, so that every
    // process of it is counted, and after the disk holds what it was given (in copy mode the
    // whole start state), so that its memory is not counted as the trial's.
    for dir in &spec.limits.cgroups {
        join_cgroup(&in_old(dir)).map_err(ctx(|| {
            format!("join the trial's control group {}", dir.display())
        }))?;
    }
    let new = Path::new(NEW);
    let skeleton = spec.skeleton.as_ref().filter(|_| spec.root_image.is_none());
    let host_top = lay_root(spec, new, skeleton, disk.as_ref())?;
    if skeleton.is_none() {
        make_mount_points(spec, new, Path::new(OLD), &host_top)?;
    }
    let extra = extra_binds(spec, new)?;
    let dev = new.join("dev");
    let devices = dev_points(spec, &dev, skeleton)?;
    let attrs = if spec.root_image.is_some() {
        MOUNT_ATTR_NOSUID
    } else {
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID
    };
    sys::mount_setattr_recursive(new, attrs)
        .map_err(ctx(|| "make the host's directories read-only".to_owned()))?;
    mount_sys(spec, new)?;
    mount_trial_proc(new)?;
    let disk_part = |part| disk.as_ref().map(|d| d.at(part));
    build_dev(&dev, &devices, disk.as_ref())?;
    writable(&new.join("tmp"), disk_part(Part::Tmp), "mode=1777")?;
    let home = in_new(&spec.home_inside);
    mkdir_p(&home)?;
    writable(&home, disk_part(Part::Home), "mode=0755")?;
    let workspace = mount_workspace(spec, disk.as_ref())?;
    bind_extra(spec, &extra)?;
    pivot_into_new_root(new)?;
    // T's own `/proc`, before the agent's may cover it.
    let own_proc = sys::OwnProc::open().map_err(ctx(|| "open /proc".to_owned()))?;

    // The skeleton (/dev, /run, /home included) is read-only since before the binds: the only
    // writable places are the workspace, HOME, /tmp, /dev/shm and the service directories
    // (which the agent does not see).
    // Without services, T's view is the agent's view: hide now, and the agent needs no mount
    // namespace of its own.
    if spec.services.is_empty() {
        let hider = Hider::new();
        for h in &spec.hide {
            hider.hide(h)?;
        }
    }
    Ok(TrialRoot {
        isolation: trial_isolation(spec, workspace, ids),
        disk,
        handback,
        own_proc,
    })
}

/// The trial's disk, when its writes are bounded: one tmpfs of `disk_bytes` holding the
/// workspace's upper layer (or, in copy mode, the whole copy; a bound folder stays on the
/// host's disk), an image root's kept upper layer, `/tmp`, `HOME` and `/dev/shm`.
fn mount_trial_disk(spec: &SandboxSpec) -> R<Option<TrialDisk>> {
    let Some(bytes) = spec.limits.disk_bytes else {
        return Ok(None);
    };
    let workspace = match &spec.workspace {
        Workspace::Overlay { upper, .. } => Some(OnDisk::Upper(in_old(upper))),
        Workspace::Copy { start, dir } => Some(OnDisk::Copy {
            start: in_old(start),
            dir: in_old(dir),
        }),
        Workspace::Bind { .. } => None,
    };
    let root_upper = spec
        .root_image
        .as_ref()
        .filter(|image| image.keep_upper)
        .map(|image| in_old(&image.upper));
    TrialDisk::mount(bytes, workspace.as_ref(), root_upper.as_deref()).map(Some)
}

/// Lays the new root's base on `new`. The host's root: a skeleton (the run's, laid out once, or
/// a fresh tmpfs made here) with the host's top-level entries bound, all read-only later. An
/// image's: an overlay over it with the trial's own upper layer, writable everywhere (its mount
/// points are made in the upper layer). Returns the host's top-level names where the mount
/// points are still to be made on a fresh tmpfs.
fn lay_root(
    spec: &SandboxSpec,
    new: &Path,
    skeleton: Option<&RootSkeleton>,
    disk: Option<&TrialDisk>,
) -> R<Vec<OsString>> {
    match (&spec.root_image, skeleton) {
        (None, Some(skeleton)) => {
            enter_skeleton(new, skeleton)?;
            Ok(Vec::new())
        }
        (None, None) => {
            tmpfs(new, libc::MS_NOSUID | libc::MS_NODEV, "mode=0755")?;
            let entries = host_top_entries(Path::new(OLD))?;
            make_top_points(new, &entries)?;
            bind_top(
                new,
                Path::new(OLD),
                entries.iter().filter_map(TopEntry::bound),
            )?;
            Ok(entries.iter().map(|e| e.name().to_owned()).collect())
        }
        (Some(image), _) => {
            let (upper, work) = match disk {
                Some(d) => (d.at(Part::RootUpper), d.at(Part::RootWork)),
                None => (in_old(&image.upper), in_old(&image.work)),
            };
            let lowers: Vec<PathBuf> = image
                .layers
                .iter()
                .chain(std::iter::once(&image.rootfs))
                .map(|l| in_old(l))
                .collect();
            mount_overlay(new, &lowers, &upper, &work)?;
            Ok(Vec::new())
        }
    }
}

/// `/dev`'s mount points and links (the skeleton's, or made here), and the host devices to bind
/// there. An image's own /dev (links and folders a debootstrap or umoci root carries) is
/// replaced, never merged with: a tmpfs of its own, read-only once its skeleton is made.
fn dev_points(spec: &SandboxSpec, dev: &Path, skeleton: Option<&RootSkeleton>) -> R<Vec<String>> {
    if let Some(skeleton) = skeleton {
        return Ok(skeleton.devices.clone());
    }
    if spec.root_image.is_none() {
        return make_dev_skeleton(dev, Path::new(OLD));
    }
    mkdir_p(dev)?;
    tmpfs(dev, libc::MS_NOSUID | libc::MS_NOEXEC, "mode=0755")?;
    let devices = make_dev_skeleton(dev, Path::new(OLD))?;
    sys::mount_setattr_recursive(dev, MOUNT_ATTR_RDONLY)
        .map_err(ctx(|| "make /dev read-only".to_owned()))?;
    Ok(devices)
}

/// The host folders the trial writes that must be given back to an unprivileged caller whose
/// range of ids came from `newuidmap` (see [`crate::handback`]); none for root or one id.
fn hand_back_of(spec: &SandboxSpec, ids: &IdMapping) -> R<HandBack> {
    let mut h = HandBack::default();
    let caller_is_root = ids.uid_map.first().is_some_and(|e| e[1] == 0);
    if ids.kind != IdMapKind::Range || caller_is_root {
        return Ok(h);
    }
    match &spec.workspace {
        Workspace::Overlay { upper, .. } => h.hold(&in_old(upper), true)?,
        Workspace::Bind { dir } | Workspace::Copy { dir, .. } => h.hold(&in_old(dir), true)?,
    }
    if let Some(image) = &spec.root_image {
        // Off the trial's disk, or carried out of it for the checks (whose capture reads the
        // owners, as the workspace's).
        if image.keep_upper || spec.limits.disk_bytes.is_none() {
            h.hold(&in_old(&image.upper), image.keep_upper)?;
        }
    }
    Ok(h)
}

/// Makes every mount private, then pivots into a base tmpfs on /tmp that becomes a temporary
/// root holding the host at /oldroot and the new root at /newroot, so host paths stay reachable
/// (even those under /tmp) while the new root is built.
fn enter_base_tmpfs() -> R<()> {
    // Nothing we mount may propagate anywhere.
    sys::mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )
    .map_err(ctx(|| "make / private".to_owned()))?;
    tmpfs(
        Path::new("/tmp"),
        libc::MS_NOSUID | libc::MS_NODEV,
        "mode=0755",
    )?;
    for d in ["/tmp/oldroot", "/tmp/newroot"] {
        mkdir_p(Path::new(d))?;
    }
    std::env::set_current_dir("/tmp").map_err(ctx(|| "chdir /tmp".to_owned()))?;
    sys::pivot_root(Path::new("."), Path::new("oldroot"))
        .map_err(ctx(|| "pivot_root into the base tmpfs".to_owned()))?;
    std::env::set_current_dir("/").map_err(ctx(|| "chdir /".to_owned()))?;
    Ok(())
}

/// One top-level entry of the host's root, as the new root shows it.
enum TopEntry {
    /// A directory, bound recursively over an empty directory of the same name.
    Dir(OsString),
    /// A file, bound over an empty file of the same name.
    File(OsString),
    /// A symbolic link, copied (`None`: unreadable, left out).
    Link(OsString, Option<PathBuf>),
    /// Anything else (a socket, a device node): left out.
    Other(OsString),
}

impl TopEntry {
    /// The entry's name when it is bound (a directory or a file).
    fn bound(&self) -> Option<&OsStr> {
        match self {
            TopEntry::Dir(n) | TopEntry::File(n) => Some(n),
            TopEntry::Link(..) | TopEntry::Other(_) => None,
        }
    }

    /// The entry's name.
    fn name(&self) -> &OsStr {
        match self {
            TopEntry::Dir(n) | TopEntry::File(n) | TopEntry::Link(n, _) | TopEntry::Other(n) => n,
        }
    }
}

/// The top-level entries of `source` (the host's root) that a trial's root shows: the system's
/// folders ([`SYSTEM_TOP`]), or links to them.
fn host_top_entries(source: &Path) -> R<Vec<TopEntry>> {
    let mut out = Vec::new();
    let entries =
        fs::read_dir(source).map_err(ctx(|| format!("read the root {}", source.display())))?;
    for entry in entries {
        let entry = entry.map_err(ctx(|| format!("read the root {}", source.display())))?;
        let name = entry.file_name();
        if !SYSTEM_TOP.iter().any(|x| OsStr::new(x) == name) {
            continue;
        }
        let Ok(ft) = entry.file_type() else {
            continue;
        };
        out.push(if ft.is_symlink() {
            let target = fs::read_link(source.join(&name)).ok();
            TopEntry::Link(name, target)
        } else if ft.is_dir() {
            TopEntry::Dir(name)
        } else if ft.is_file() {
            TopEntry::File(name)
        } else {
            TopEntry::Other(name)
        });
    }
    Ok(out)
}

/// Makes the mount points of the bound `entries` in `new` and copies their links.
fn make_top_points(new: &Path, entries: &[TopEntry]) -> R<()> {
    for entry in entries {
        match entry {
            TopEntry::Dir(name) => mkdir_p(&new.join(name))?,
            TopEntry::File(name) => touch(&new.join(name))?,
            TopEntry::Link(name, Some(target)) => {
                let dst = new.join(name);
                std::os::unix::fs::symlink(target, &dst)
                    .map_err(ctx(|| format!("symlink {}", dst.display())))?;
            }
            TopEntry::Link(_, None) | TopEntry::Other(_) => {}
        }
    }
    Ok(())
}

/// Binds the entries `names` of `source` (the host's root) on their mount points in `new`,
/// recursively; they are made read-only all at once later. An entry gone from the host since it
/// was listed leaves its mount point empty.
fn bind_top<'a>(new: &Path, source: &Path, names: impl Iterator<Item = &'a OsStr>) -> R<()> {
    for name in names {
        let (src, dst) = (source.join(name), new.join(name));
        match sys::mount(
            Some(src.as_os_str()),
            &dst,
            None,
            libc::MS_BIND | libc::MS_REC,
            None,
        ) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !src.exists() => {}
            other => other.map_err(ctx(|| {
                format!("bind {} on {}", src.display(), dst.display())
            }))?,
        }
    }
    Ok(())
}

/// Binds the run's skeleton (a host folder, laid out by [`RootSkeleton::lay_out`]) on `new`, and
/// the host's top-level entries on their mount points in it.
fn enter_skeleton(new: &Path, skeleton: &RootSkeleton) -> R<()> {
    let dir = in_old(&skeleton.dir);
    sys::mount(Some(dir.as_os_str()), new, None, libc::MS_BIND, None).map_err(ctx(|| {
        format!("bind the root's skeleton {}", skeleton.dir.display())
    }))?;
    // As the tmpfs it stands for: no set-id programs, no devices (of its own).
    sys::mount_setattr_recursive(new, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)
        .map_err(ctx(|| "seal the root's skeleton".to_owned()))?;
    bind_top(
        new,
        Path::new(OLD),
        skeleton.bound.iter().map(|n| n.as_os_str()),
    )
}

impl RootSkeleton {
    /// Lays out in `dir` (a new folder on the host, which must not exist yet) the skeleton of the
    /// root of a trial shaped like `spec`: everything the trial init would otherwise make on a
    /// fresh tmpfs before the root turns read-only (the mount points of the host's top-level
    /// entries, copies of its top-level links, the private top-level folders, `/dev`'s mount
    /// points and links, the mount points of the workspace, `HOME`, the binds, the services'
    /// folders and the resolver), made once instead of once per trial. Every trial of that shape
    /// binds it read-only as its root; none can change it. For a host root only: a spec with a
    /// `root_image` does not use it.
    pub fn lay_out(dir: &Path, spec: &SandboxSpec) -> Result<RootSkeleton, crate::SandboxError> {
        let host = Path::new("/");
        let spec = &view::with_view(spec);
        let lay = || -> R<RootSkeleton> {
            fs::DirBuilder::new()
                .mode(0o755)
                .create(dir)
                .map_err(ctx(|| format!("create {}", dir.display())))?;
            let entries = host_top_entries(host)?;
            make_top_points(dir, &entries)?;
            let names: Vec<OsString> = entries.iter().map(|e| e.name().to_owned()).collect();
            make_mount_points(spec, dir, host, &names)?;
            let devices = make_dev_skeleton(&dir.join("dev"), host)?;
            // The modes the tmpfs would give, whatever this process's umask.
            set_modes(dir)?;
            Ok(RootSkeleton {
                dir: dir.to_path_buf(),
                bound: entries
                    .iter()
                    .filter_map(TopEntry::bound)
                    .map(PathBuf::from)
                    .collect(),
                devices,
            })
        };
        lay().map_err(|e| crate::SandboxError::Setup(format!("lay out the root's skeleton: {e}")))
    }
}

/// Gives every folder under `dir` (itself included) mode 0755 and every file 0644, as the trial
/// init's own skeleton has them.
fn set_modes(dir: &Path) -> R<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        fs::set_permissions(&d, fs::Permissions::from_mode(0o755))
            .map_err(ctx(|| format!("chmod {}", d.display())))?;
        for entry in fs::read_dir(&d).map_err(ctx(|| format!("read {}", d.display())))? {
            let entry = entry.map_err(ctx(|| format!("read {}", d.display())))?;
            let ft = entry
                .file_type()
                .map_err(ctx(|| format!("read {}", d.display())))?;
            if ft.is_dir() {
                stack.push(entry.path());
            } else if ft.is_file() {
                fs::set_permissions(entry.path(), fs::Permissions::from_mode(0o644))
                    .map_err(ctx(|| format!("chmod {}", entry.path().display())))?;
            }
        }
    }
    Ok(())
}

/// Which inside paths lie on the new root's own tmpfs: under neither a host top-level bind nor a
/// private top-level directory with a file system of its own.
struct RootTmpfs<'a> {
    /// Where the new root is being made.
    new: &'a Path,
    host_top: &'a [OsString],
}

impl RootTmpfs<'_> {
    /// Whether the inside path `p` lies on the new root's own tmpfs.
    fn holds(&self, p: &Path) -> bool {
        top(p).is_some_and(|t| {
            !self.host_top.iter().any(|h| h == t)
                && !OWN_MOUNT_TOP.iter().any(|x| OsStr::new(x) == t)
        })
    }

    /// Makes the mount point of a directory mount at `inside`, where it lies on the root tmpfs.
    fn dir_point(&self, inside: &Path) -> R<()> {
        if self.holds(inside) {
            mkdir_p(&under(self.new, inside))?;
        }
        Ok(())
    }

    /// Makes the mount point of a bind of `host` (a host path, as seen where it is made) at
    /// `inside`, where it lies on the root tmpfs: a directory or a file, to match.
    fn bind_point(&self, inside: &Path, host: &Path) -> R<()> {
        if self.holds(inside) {
            let point = under(self.new, inside);
            if fs::metadata(host).is_ok_and(|m| m.is_dir()) {
                mkdir_p(&point)
            } else {
                touch(&point)
            }
        } else {
            Ok(())
        }
    }
}

/// The binds made after the root turns read-only besides the spec's own binds and services.
struct ExtraBinds {
    /// Hidden paths under the private directories, bound read-only for the services.
    hidden: Vec<PathBuf>,
    /// The resolver file to bind into the private `/run`, with the host's network.
    resolver: Option<PathBuf>,
    /// The host's resolver file (as seen under `OLD`) to bind on an image's empty or missing
    /// `/etc/resolv.conf`, with the host's network.
    image_resolver: Option<PathBuf>,
    /// With the internet network: the trial's own resolver file (on the base tmpfs), bound over
    /// the root's `/etc/resolv.conf` (or, on a host root, the file it links to in `/run`).
    internet_resolver: Option<(PathBuf, PathBuf)>,
}

/// Makes the mount points that live directly on the new root's own tmpfs (a new top-level
/// directory, or below /dev, /run or /home): they must exist before it turns read-only together
/// with the host binds (one tmpfs for the whole skeleton, rather than one per directory).
fn make_mount_points(spec: &SandboxSpec, new: &Path, host: &Path, host_top: &[OsString]) -> R<()> {
    for d in PRIVATE_TOP {
        mkdir_p(&new.join(d))?;
    }
    let root = RootTmpfs { new, host_top };
    for p in [&spec.workspace_inside, &spec.home_inside] {
        root.dir_point(p)?;
    }
    for b in &spec.binds {
        root.bind_point(&b.inside, &under(host, &b.host))?;
    }
    for s in &spec.services {
        root.dir_point(&SandboxSpec::service_dir_inside(&s.name))?;
    }
    for s in spec.services.iter().filter(|s| s.root.is_some()) {
        root.dir_point(&SandboxSpec::sidecar_image_inside(&s.name))?;
        root.dir_point(&SandboxSpec::sidecar_stage_inside(&s.name))?;
    }
    for h in hidden_for_services(spec, host) {
        root.bind_point(&h, &under(host, &h))?;
    }
    if let Some(r) = host_resolver_target(spec, host) {
        root.bind_point(&r, &under(host, &r))?;
    }
    Ok(())
}

/// The resolver file to bind into the private `/run` of a host root with the host's network
/// (see [`resolver_target`]); host paths are seen under `host`.
fn host_resolver_target(spec: &SandboxSpec, host: &Path) -> Option<PathBuf> {
    (matches!(spec.network, Network::Host | Network::Internet) && spec.root_image.is_none())
        .then(|| resolver_target(host))
        .flatten()
}

/// The binds [`bind_extra`] makes besides the spec's own, whose mount points
/// [`make_mount_points`] made (and, in an image with the host's network, the resolver's, made
/// here in the image's upper layer).
fn extra_binds(spec: &SandboxSpec, new: &Path) -> R<ExtraBinds> {
    let old = Path::new(OLD);
    let image_resolver = if spec.network == Network::Host && spec.root_image.is_some() {
        image_resolver(new)?
    } else {
        None
    };
    let resolver = host_resolver_target(spec, old);
    let internet_resolver = if spec.network == Network::Internet {
        internet_resolver(new, spec.root_image.is_some(), resolver.as_deref())?
    } else {
        None
    };
    Ok(ExtraBinds {
        hidden: hidden_for_services(spec, old),
        resolver: resolver.filter(|_| spec.network == Network::Host),
        image_resolver,
        internet_resolver,
    })
}

/// With the internet network: writes the trial's resolver file on the base tmpfs and gives it
/// with where it goes in the new root: over the root's `/etc/resolv.conf`, or over the file in
/// `/run` a host's `/etc/resolv.conf` links to (`link_target`, its mount point made already). An
/// image without the file gets one in its upper layer (a mount point: the sandbox's, not the
/// agent's); an image whose file is a link keeps its choice (`None`).
fn internet_resolver(
    new: &Path,
    image: bool,
    link_target: Option<&Path>,
) -> R<Option<(PathBuf, PathBuf)>> {
    let target = match link_target {
        Some(t) => in_new(t),
        None => new.join("etc/resolv.conf"),
    };
    match fs::symlink_metadata(&target) {
        Ok(m) if m.file_type().is_symlink() => return Ok(None),
        Ok(_) => {}
        Err(_) if image => {
            if fs::symlink_metadata(new.join("etc")).is_err() {
                mkdir_p(&new.join("etc"))?;
            }
            touch(&target)?;
        }
        Err(_) => return Ok(None),
    }
    let file = PathBuf::from("/proctor-resolv.conf");
    fs::write(&file, crate::egress::RESOLV_CONF)
        .map_err(ctx(|| "write the trial's resolver file".to_owned()))?;
    Ok(Some((file, target)))
}

/// Makes `/dev`'s skeleton on the root tmpfs: mount points for the host's device nodes, the shm
/// and pts directories, the links. Returns the devices the host has.
fn make_dev_skeleton(dev: &Path, host: &Path) -> R<Vec<String>> {
    let mut devices = Vec::new();
    for name in DEVICES {
        // A host without this device (tty in some containers): leave it out.
        if fs::symlink_metadata(host.join("dev").join(name)).is_ok() {
            touch(&dev.join(name))?;
            devices.push((*name).to_owned());
        }
    }
    for d in ["shm", "pts", EMPTY_DIR] {
        mkdir_p(&dev.join(d))?;
    }
    touch(&dev.join(EMPTY_FILE))?;
    for (name, target) in [
        ("ptmx", "pts/ptmx"),
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(target, dev.join(name))
            .map_err(ctx(|| format!("symlink /dev/{name}")))?;
    }
    Ok(devices)
}

/// /sys: a fresh sysfs shows the trial's own network namespace (only `lo`); where the kernel
/// refuses one (shared network, or a host /sys with hidden parts), the host's, read-only.
fn mount_sys(spec: &SandboxSpec, new: &Path) -> R<()> {
    let sys_dir = new.join("sys");
    let fresh_sys = spec.network != Network::Host
        && sys::mount(
            Some(OsStr::new("sysfs")),
            &sys_dir,
            Some("sysfs"),
            libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            None,
        )
        .is_ok();
    let sys_src = Path::new(OLD).join("sys");
    if !fresh_sys && sys_src.is_dir() {
        bind(
            &sys_src,
            &sys_dir,
            true,
            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        )?;
    }
    Ok(())
}

/// A /proc of the trial's PID namespace (T is its PID 1).
fn mount_trial_proc(new: &Path) -> R<()> {
    sys::mount(
        Some(OsStr::new("proc")),
        &new.join("proc"),
        Some("proc"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        None,
    )
    .map_err(ctx(|| "mount /proc".to_owned()))
}

/// A private writable place (`/tmp`, `HOME`, `/dev/shm`) at `target`: its folder on the trial's
/// disk when there is one (`on_disk`), else a fresh tmpfs of its own with `data`.
fn writable(target: &Path, on_disk: Option<PathBuf>, data: &str) -> R<()> {
    match on_disk {
        Some(dir) => bind(&dir, target, false, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV),
        None => tmpfs(target, libc::MS_NOSUID | libc::MS_NODEV, data),
    }
}

/// The workspace: an overlay of the layers (its upper layer on the trial's disk when there is
/// one), a bind of the copy (made on the trial's disk when there is one, else in its folder),
/// or a bind of the folder as it is.
fn mount_workspace(spec: &SandboxSpec, disk: Option<&TrialDisk>) -> R<WorkspaceKind> {
    let ws = in_new(&spec.workspace_inside);
    mkdir_p(&ws)?;
    match &spec.workspace {
        Workspace::Overlay {
            lowers,
            upper,
            work,
        } => {
            let (upper, work) = match disk {
                Some(d) => (d.at(Part::WorkspaceUpper), d.at(Part::WorkspaceWork)),
                None => (in_old(upper), in_old(work)),
            };
            mount_overlay(
                &ws,
                &lowers.iter().map(|l| in_old(l)).collect::<Vec<_>>(),
                &upper,
                &work,
            )?;
            Ok(WorkspaceKind::Overlay)
        }
        Workspace::Copy { start, dir } => {
            let copy = match disk {
                Some(d) => d.at(Part::WorkspaceUpper),
                None => {
                    crate::copy::copy_tree(&in_old(start), &in_old(dir)).map_err(ctx(|| {
                        format!("copy {} into {}", start.display(), dir.display())
                    }))?;
                    in_old(dir)
                }
            };
            bind(&copy, &ws, false, MOUNT_ATTR_NOSUID)?;
            Ok(WorkspaceKind::Bind)
        }
        Workspace::Bind { dir } => {
            bind(&in_old(dir), &ws, false, MOUNT_ATTR_NOSUID)?;
            Ok(WorkspaceKind::Bind)
        }
    }
}

/// Binds, in order, the resolver file, the spec's binds, the service directories and the hidden
/// paths under the private directories (read-only for the services; the agent's view covers
/// them again).
fn bind_extra(spec: &SandboxSpec, extra: &ExtraBinds) -> R<()> {
    if let Some(host) = &extra.image_resolver {
        bind(
            host,
            &Path::new(NEW).join("etc/resolv.conf"),
            true,
            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        )?;
    }
    if let Some(r) = &extra.resolver {
        bind(
            &in_old(r),
            &in_new(r),
            true,
            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        )?;
    }
    if let Some((file, target)) = &extra.internet_resolver {
        bind(file, target, true, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)?;
    }
    for b in &spec.binds {
        bind(
            &in_old(&b.host),
            &in_new(&b.inside),
            b.read_only,
            MOUNT_ATTR_NOSUID,
        )?;
    }
    for s in &spec.services {
        let inside = SandboxSpec::service_dir_inside(&s.name);
        bind(
            &in_old(&s.dir_host),
            &in_new(&inside),
            false,
            MOUNT_ATTR_NOSUID,
        )?;
    }
    bind_sidecar_images(spec, Path::new(OLD), Path::new(NEW))?;
    for h in &extra.hidden {
        bind(
            &in_old(h),
            &in_new(h),
            true,
            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        )?;
    }
    Ok(())
}

/// In T, before it pivots: binds each sidecar's image (seen under `old`) read-only at its
/// place in the new root (`new`).
fn bind_sidecar_images(spec: &SandboxSpec, old: &Path, new: &Path) -> R<()> {
    for s in &spec.services {
        let Some(root) = &s.root else { continue };
        let inside = SandboxSpec::sidecar_image_inside(&s.name);
        bind(
            &under(old, &root.rootfs),
            &under(new, &inside),
            true,
            sys::MOUNT_ATTR_NOSUID,
        )?;
    }
    Ok(())
}

/// In the agent's own mount namespace: takes every sidecar image out of it and covers the
/// sidecars' folder, so the agent neither sees nor names them.
fn hide_sidecars_from_agent(spec: &SandboxSpec) -> R<()> {
    let mut any = false;
    for s in spec.services.iter().filter(|s| s.root.is_some()) {
        any = true;
        let image = SandboxSpec::sidecar_image_inside(&s.name);
        sys::umount_detach(&image)
            .map_err(|e| format!("unmount {} from the agent's view: {e}", image.display()))?;
    }
    if any {
        tmpfs(
            Path::new(SIDECAR_ROOT),
            libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            "mode=0555,size=4k",
        )?;
    }
    Ok(())
}

/// Into the new root; the base tmpfs and the whole host tree go away with it.
pub(crate) fn pivot_into_new_root(new: &Path) -> R<()> {
    std::env::set_current_dir(new).map_err(ctx(|| "chdir into the new root".to_owned()))?;
    sys::pivot_root(Path::new("."), Path::new("."))
        .map_err(ctx(|| "pivot_root into the new root".to_owned()))?;
    sys::umount_detach(Path::new(".")).map_err(ctx(|| "detach the old root".to_owned()))?;
    std::env::set_current_dir("/").map_err(ctx(|| "chdir /".to_owned()))?;
    Ok(())
}

/// The isolation record of a trial with namespaces.
fn trial_isolation(spec: &SandboxSpec, workspace: WorkspaceKind, ids: &IdMapping) -> Isolation {
    let mut namespaces = vec![
        Namespace::User,
        Namespace::Mount,
        Namespace::Pid,
        Namespace::Ipc,
        Namespace::Uts,
    ];
    let mut notes = Vec::new();
    match spec.network {
        Network::None => namespaces.push(Namespace::Net),
        Network::Loopback => {
            namespaces.push(Namespace::Net);
            notes.push(
                "network \"loopback\" is the trial's own loopback only (no model proxy route yet)"
                    .to_owned(),
            );
        }
        Network::Host => {
            notes.push("network \"host\": the agent shares the host's network".to_owned())
        }
        Network::Internet => {
            namespaces.push(Namespace::Net);
            notes.push(
                "network \"internet\": the trial's own network namespace, out through slirp4netns with every connection decided by proctor (public addresses only; the trial's resolver at 127.0.0.53)"
                    .to_owned(),
            );
        }
    }
    if let Some(image) = &spec.root_image {
        notes.push(format!(
            "root: the image unpacked at {} under the trial's own writable layer, not the host's file system",
            image.rootfs.display()
        ));
    }
    Isolation {
        namespaces,
        workspace,
        network: spec.network,
        read_only_host: true,
        private_home_and_tmp: true,
        // What the caller hid; what the view covers is recorded with the view.
        hidden: spec
            .hide
            .iter()
            .filter(|h| !spec.view.as_ref().is_some_and(|v| v.covered.contains(h)))
            .cloned()
            .collect(),
        full_stop: FullStop::PidNamespace,
        notes,
        ids: Some(ids.clone()),
        host_view: spec.view.clone(),
        egress: None,
    }
}

/// With the host's network, `/etc/resolv.conf` must keep working; where it is a symlink into
/// `/run` (systemd-resolved), the file it points to is bound read-only into the private `/run`.
/// Returns that file's path, if there is one to bind.
fn resolver_target(host: &Path) -> Option<PathBuf> {
    let link = host.join("etc/resolv.conf");
    let target = fs::read_link(&link).ok()?;
    let host_target = if target.is_absolute() {
        target
    } else {
        Path::new("/etc").join(target)
    };
    // Normalise `..` lexically (the host path is only used to build our own paths).
    let mut norm = PathBuf::from("/");
    for c in host_target.components() {
        match c {
            Component::ParentDir => {
                norm.pop();
            }
            Component::Normal(n) => norm.push(n),
            _ => {}
        }
    }
    (norm.starts_with("/run") && fs::metadata(under(host, &norm)).is_ok()).then_some(norm)
}

/// With the host's network in an image: the host's resolver file (under `OLD`, its symlinks
/// followed there) when the image's `/etc/resolv.conf` is missing or holds nothing but blanks
/// (Docker leaves it empty in images, to fill at run time). An image's own non-empty file, or a
/// symlink, is its choice and stays. Makes the mount point in the image's upper layer.
fn image_resolver(new: &Path) -> R<Option<PathBuf>> {
    let inside = new.join("etc/resolv.conf");
    match fs::symlink_metadata(&inside) {
        Ok(m) if m.is_file() => {
            let text = fs::read(&inside).unwrap_or_default();
            if text.iter().any(|b| !b.is_ascii_whitespace()) {
                return Ok(None);
            }
        }
        Ok(_) => return Ok(None),
        Err(_) => {}
    }
    let Some(host) = host_resolver() else {
        return Ok(None);
    };
    if fs::symlink_metadata(new.join("etc")).is_err() {
        mkdir_p(&new.join("etc"))?;
    }
    touch(&inside)?;
    Ok(Some(host))
}

/// The host's `/etc/resolv.conf` as a path under `OLD`, its symlinks (absolute ones taken from
/// the host's root) followed, if it is a regular file in the end.
fn host_resolver() -> Option<PathBuf> {
    let mut host = PathBuf::from("/etc/resolv.conf");
    for _ in 0..8 {
        let at = in_old(&host);
        let m = fs::symlink_metadata(&at).ok()?;
        if m.is_file() {
            return Some(at);
        }
        if !m.file_type().is_symlink() {
            return None;
        }
        let target = fs::read_link(&at).ok()?;
        let joined = match host.parent() {
            Some(dir) if target.is_relative() => dir.join(target),
            _ => target,
        };
        let mut norm = PathBuf::from("/");
        for c in joined.components() {
            match c {
                Component::ParentDir => {
                    norm.pop();
                }
                Component::Normal(n) => norm.push(n),
                _ => {}
            }
        }
        host = norm;
    }
    None
}

/// Every place (an inside path) where [`make_mount_points`] may make a mount point in a trial's
/// root: the private top-level folders, the workspace, HOME, the binds, the services' folders,
/// the paths hidden from them and the resolver file. In an image these land in the root's upper
/// layer, where they are the sandbox's, not the agent's. Asked on the host: the hidden paths
/// that exist there are the ones that get a mount point.
pub fn mount_points(spec: &SandboxSpec) -> Vec<PathBuf> {
    let spec = &view::with_view(spec);
    let mut points: Vec<PathBuf> = PRIVATE_TOP.iter().map(|d| Path::new("/").join(d)).collect();
    points.extend([spec.workspace_inside.clone(), spec.home_inside.clone()]);
    points.extend(spec.binds.iter().map(|b| b.inside.clone()));
    points.extend(
        spec.services
            .iter()
            .map(|s| SandboxSpec::service_dir_inside(&s.name)),
    );
    for s in spec.services.iter().filter(|s| s.root.is_some()) {
        points.push(SandboxSpec::sidecar_image_inside(&s.name));
        points.push(SandboxSpec::sidecar_stage_inside(&s.name));
    }
    points.extend(hidden_for_services(spec, Path::new("/")));
    points.push(PathBuf::from("/etc/resolv.conf"));
    points
}

/// Hidden paths that the root does not show already (under the private directories, or outside
/// what the root shows of the host: a suite's folder), which are bound read-only for the services
/// (the agent's view covers them again), those that exist as seen under `host`. Without services
/// nobody needs them: they stay out.
fn hidden_for_services(spec: &SandboxSpec, host: &Path) -> Vec<PathBuf> {
    if spec.services.is_empty() {
        return Vec::new();
    }
    spec.hide
        .iter()
        .filter(|h| {
            (under_private(h) || !view::shown(spec, h))
                && !h.starts_with("/proc")
                && fs::symlink_metadata(under(host, h)).is_ok()
        })
        .cloned()
        .collect()
}

/// Fills `/dev` (a directory of the read-only root whose mount points exist already): the host's
/// device nodes, a private `/dev/shm` and, where the kernel allows one, a private devpts.
fn build_dev(dev: &Path, devices: &[String], disk: Option<&TrialDisk>) -> R<()> {
    for name in devices {
        let src = Path::new(OLD).join("dev").join(name);
        sys::mount(
            Some(src.as_os_str()),
            &dev.join(name),
            None,
            libc::MS_BIND,
            None,
        )
        .map_err(ctx(|| format!("bind /dev/{name}")))?;
    }
    writable(&dev.join("shm"), disk.map(|d| d.at(Part::Shm)), "mode=1777")?;
    // A private devpts instance is a convenience (some tools want a pty); not essential.
    let _ = sys::mount(
        Some(OsStr::new("devpts")),
        &dev.join("pts"),
        Some("devpts"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=0620"),
    );
    Ok(())
}

/// Mounts an overlay with `userxattr` on `target`. Uses the new mount API with `lowerdir+`
/// (any characters in paths, no length limit); falls back to `mount(2)` with escaped options on
/// kernels without it.
pub(crate) fn mount_overlay(target: &Path, lowers: &[PathBuf], upper: &Path, work: &Path) -> R<()> {
    match mount_overlay_fsconfig(target, lowers, upper, work) {
        Ok(()) => Ok(()),
        Err((true, _)) => mount_overlay_legacy(target, lowers, upper, work),
        Err((false, e)) => Err(e),
    }
}

const FSOPEN_CLOEXEC: libc::c_uint = 1;
const FSCONFIG_SET_FLAG: libc::c_uint = 0;
const FSCONFIG_SET_STRING: libc::c_uint = 1;
const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
const FSMOUNT_CLOEXEC: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 4;

/// Err((fallback_possible, message)).
fn mount_overlay_fsconfig(
    target: &Path,
    lowers: &[PathBuf],
    upper: &Path,
    work: &Path,
) -> Result<(), (bool, String)> {
    // SAFETY: plain system call with a valid C string.
    let fd = unsafe { libc::syscall(libc::SYS_fsopen, c"overlay".as_ptr(), FSOPEN_CLOEXEC) };
    if fd < 0 {
        return Err((
            true,
            format!("fsopen overlay: {}", std::io::Error::last_os_error()),
        ));
    }
    // SAFETY: the kernel just returned this descriptor.
    let fs_fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    config_layers(&fs_fd, lowers, upper, work)?;
    fs_config(&fs_fd, FSCONFIG_SET_FLAG, Some(c"userxattr"), None)?;
    fs_config(&fs_fd, FSCONFIG_CMD_CREATE, None, None)?;
    attach(&fs_fd, target)
}

/// One `fsconfig` call on the overlay being made; Err((fallback_possible, message)).
fn fs_config(
    fs_fd: &OwnedFd,
    cmd: libc::c_uint,
    key: Option<&CStr>,
    value: Option<&Path>,
) -> Result<(), (bool, String)> {
    let v = value
        .map(sys::cstring)
        .transpose()
        .map_err(|e| (false, e.to_string()))?;
    // SAFETY: valid descriptor and C strings (or nulls).
    let r = unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs_fd.as_raw_fd(),
            cmd,
            key.map_or(std::ptr::null(), |k| k.as_ptr()),
            v.as_ref().map_or(std::ptr::null(), |v| v.as_ptr()),
            0,
        )
    };
    if r < 0 {
        let err = std::io::Error::last_os_error();
        let log = read_fs_log(fs_fd);
        let what = match (key, value) {
            (Some(k), Some(v)) => format!("overlay {}={}", k.to_string_lossy(), v.display()),
            (Some(k), None) => format!("overlay {}", k.to_string_lossy()),
            _ => "overlay mount".to_owned(),
        };
        // An unknown "lowerdir+" key (kernel < 6.8) means: use the legacy mount instead.
        let fallback = key == Some(c"lowerdir+") && err.raw_os_error() == Some(libc::EINVAL);
        return Err((fallback, format!("{what}: {err}{log}")));
    }
    Ok(())
}

/// Gives the overlay its layers. Each is named from inside it ("."): the kernel resolves the
/// name when it is given and shows it, as given, in the mount table a trial can read, so the
/// host paths of the fixture, the store, the image cache and the scratch never appear there.
fn config_layers(
    fs_fd: &OwnedFd,
    lowers: &[PathBuf],
    upper: &Path,
    work: &Path,
) -> Result<(), (bool, String)> {
    let back =
        std::fs::File::open(".").map_err(|e| (false, format!("open the working folder: {e}")))?;
    let layer = |key: &CStr, dir: &Path| {
        std::env::set_current_dir(dir)
            .map_err(|e| (false, format!("enter the layer {}: {e}", dir.display())))?;
        fs_config(fs_fd, FSCONFIG_SET_STRING, Some(key), Some(Path::new(".")))
            .map_err(|(fallback, e)| (fallback, format!("{e} (the layer {})", dir.display())))
    };
    let layered = lowers
        .iter()
        .try_for_each(|l| layer(c"lowerdir+", l))
        .and_then(|()| layer(c"upperdir", upper))
        .and_then(|()| layer(c"workdir", work));
    // SAFETY: a valid descriptor of a folder.
    let returned = unsafe { libc::fchdir(back.as_raw_fd()) };
    layered?;
    if returned != 0 {
        return Err((
            false,
            format!(
                "return to the working folder: {}",
                std::io::Error::last_os_error()
            ),
        ));
    }
    Ok(())
}

/// Makes the configured overlay a mount and attaches it at `target`.
fn attach(fs_fd: &OwnedFd, target: &Path) -> Result<(), (bool, String)> {
    let attrs = (MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV) as libc::c_uint;
    // SAFETY: valid descriptor.
    let m = unsafe { libc::syscall(libc::SYS_fsmount, fs_fd.as_raw_fd(), FSMOUNT_CLOEXEC, attrs) };
    if m < 0 {
        return Err((
            false,
            format!("fsmount overlay: {}", std::io::Error::last_os_error()),
        ));
    }
    // SAFETY: the kernel just returned this descriptor.
    let mnt = unsafe { OwnedFd::from_raw_fd(m as i32) };
    let t = sys::cstring(target).map_err(|e| (false, e.to_string()))?;
    // SAFETY: valid descriptors and C strings.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            mnt.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    if r < 0 {
        return Err((
            false,
            format!(
                "attach the overlay at {}: {}",
                target.display(),
                std::io::Error::last_os_error()
            ),
        ));
    }
    Ok(())
}

/// The kernel's messages about a failed `fsconfig`, if any.
fn read_fs_log(fd: &OwnedFd) -> String {
    let mut out = String::new();
    let mut buf = [0u8; 512];
    for _ in 0..8 {
        // SAFETY: reading into a valid buffer.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            break;
        }
        let line = String::from_utf8_lossy(&buf[..n as usize]);
        out.push_str(" (");
        out.push_str(line.trim());
        out.push(')');
    }
    out
}

fn escape_overlay(p: &Path) -> String {
    let mut s = String::new();
    for ch in p.to_string_lossy().chars() {
        if matches!(ch, ',' | ':' | '\\') {
            s.push('\\');
        }
        s.push(ch);
    }
    s
}

fn mount_overlay_legacy(target: &Path, lowers: &[PathBuf], upper: &Path, work: &Path) -> R<()> {
    let lower = lowers
        .iter()
        .map(|l| escape_overlay(l))
        .collect::<Vec<_>>()
        .join(":");
    let data = format!(
        "lowerdir={lower},upperdir={},workdir={},userxattr",
        escape_overlay(upper),
        escape_overlay(work)
    );
    if data.len() >= 4096 {
        return Err("overlay options exceed one page on a kernel without lowerdir+; use shorter layer paths".into());
    }
    sys::mount(
        Some(OsStr::new("overlay")),
        target,
        Some("overlay"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some(&data),
    )
    .map_err(ctx(|| format!("mount overlay on {}", target.display())))
}

/// Narrows T's root to the agent's view. Runs in A, PID 1 of the agent's own PID namespace:
/// with services, in a mount namespace of its own (it unshares one first) where the service
/// directories and the hidden paths are covered; without services (T hid the paths already),
/// in T's. Either way the agent gets a `/proc` of its own PID namespace.
pub(crate) fn build_agent_view(spec: &SandboxSpec) -> R<()> {
    if !spec.services.is_empty() {
        sys::unshare(libc::CLONE_NEWNS)
            .map_err(ctx(|| "unshare the agent's mount namespace".to_owned()))?;
        for s in &spec.services {
            let p = SandboxSpec::service_dir_inside(&s.name);
            sys::umount_detach(&p).map_err(ctx(|| {
                format!("unmount the service directory {}", p.display())
            }))?;
        }
        // Cover only the services' folder: the rest of /run/proctor (shims, the calls socket,
        // the agent's launch files) belongs to the agent.
        tmpfs(
            Path::new(SERVICE_DIR_ROOT),
            libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            "mode=0555,size=4k",
        )?;
        hide_sidecars_from_agent(spec)?;
        // What T bound for the services alone is taken out of this namespace whole, so the
        // agent's mount table does not name it; the rest of what is hidden is covered.
        let bound_for_services = hidden_for_services(spec, Path::new("/"));
        let hider = Hider::new();
        for h in &spec.hide {
            if bound_for_services.contains(h) {
                sys::umount_detach(h).map_err(ctx(|| {
                    format!("unmount {} from the agent's view", h.display())
                }))?;
            } else {
                hider.hide(h)?;
            }
        }
    }
    sys::mount(
        Some(OsStr::new("proc")),
        Path::new("/proc"),
        Some("proc"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        None,
    )
    .map_err(ctx(|| "mount the agent's /proc".to_owned()))?;
    Ok(())
}

/// What hides a path: the root's own empty file and folder under `/dev`, when they are there,
/// and whether their mount is read-only (a bind of them is then read-only too, since a bind
/// takes its source mount's flags). Looked at once for all the paths a trial hides.
struct Hider {
    /// `/dev`'s empty file is there, and `/dev`'s empty folder.
    empty: [bool; 2],
    /// `/dev`'s mount is read-only.
    read_only: bool,
}

impl Hider {
    fn new() -> Hider {
        let is = |name: &str, dir: bool| {
            fs::symlink_metadata(Path::new("/dev").join(name)).is_ok_and(|m| m.is_dir() == dir)
        };
        Hider {
            empty: [is(EMPTY_FILE, false), is(EMPTY_DIR, true)],
            read_only: rustix::fs::statvfs("/dev")
                .is_ok_and(|v| v.f_flag.contains(rustix::fs::StatVfsMountFlags::RDONLY)),
        }
    }

    /// Hides `h` (a canonical path of the root) behind an empty, read-only file or folder.
    fn hide(&self, h: &Path) -> R<()> {
        let meta = match fs::symlink_metadata(h) {
            Ok(m) => m,
            Err(_) => return Ok(()), // not visible in the first place
        };
        if meta.file_type().is_symlink() {
            // A mount would land on the link's target; the caller passes canonical paths.
            return Ok(());
        }
        // The root's own empty entry, on a read-only mount: one bind, read-only as its source.
        let dir = meta.is_dir();
        let empty = Path::new("/dev").join(if dir { EMPTY_DIR } else { EMPTY_FILE });
        if self.empty[usize::from(dir)]
            && sys::mount(Some(empty.as_os_str()), h, None, libc::MS_BIND, None).is_ok()
        {
            if self.read_only {
                return Ok(());
            }
            // Not read-only (a root whose /dev was left writable): made so, or undone.
            return sys::mount(
                None,
                h,
                None,
                libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY,
                None,
            )
            .map_err(ctx(|| format!("hide {}", h.display())));
        }
        if dir {
            tmpfs(
                h,
                libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                "mode=0555,size=4k",
            )
        } else {
            sys::mount(Some(OsStr::new("/dev/null")), h, None, libc::MS_BIND, None)
                .and_then(|()| {
                    sys::mount(
                        None,
                        h,
                        None,
                        libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY,
                        None,
                    )
                })
                .map_err(ctx(|| format!("hide {}", h.display())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::ServiceSpec;
    use std::time::Duration;

    #[test]
    fn mount_points_name_the_hidden_paths_that_exist_on_the_host_when_services_see_them() {
        let tmp = tempfile::tempdir_in("/tmp").expect("a folder under /tmp");
        let (hidden, gone) = (tmp.path().join("suite"), tmp.path().join("gone"));
        fs::create_dir(&hidden).expect("mkdir");
        let mut spec = SandboxSpec::new(
            "/nonexistent/init",
            Workspace::Bind {
                dir: tmp.path().to_path_buf(),
            },
            vec!["true".into()],
            tmp.path().join("stdout"),
            tmp.path().join("stderr"),
            Duration::from_secs(1),
        );
        spec.hide = vec![hidden.clone(), gone.clone()];
        // Without services the hidden paths get no mount point.
        assert!(!mount_points(&spec).contains(&hidden));
        spec.services = vec![ServiceSpec {
            name: "db".into(),
            argv: vec!["true".into()],
            cwd: tmp.path().to_path_buf(),
            env: Vec::new(),
            dir_host: tmp.path().to_path_buf(),
            log: tmp.path().join("log"),
            ready: None,
            guard: None,
            state: None,
            root: None,
            health: None,
            own_network: false,
        }];
        let points = mount_points(&spec);
        assert!(points.contains(&hidden), "{points:?}");
        assert!(!points.contains(&gone), "{points:?}");
        assert!(points.contains(&PathBuf::from("/run/proctor/services/db")));
    }
}
