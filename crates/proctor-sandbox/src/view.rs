//! What of the host a trial's root shows: the system's program and library folders, the
//! installation prefixes of the folders on the trial's `PATH`, and nothing else of the host.
//!
//! A trial's root starts from nothing and adds what it needs (as bubblewrap and Flatpak do), not
//! from the host's tree less a few hidden places: any folder an operator keeps on the machine
//! (`/root`, `/home`, `/srv`, `/opt`, `/work`, `/var`, `/mnt`, another suite, a repository, the
//! store) is absent unless the spec binds it. What is shown:
//!
//! - [`SYSTEM_TOP`]: the host's top-level program, library and configuration folders (and the
//!   links among them, as on a merged-`/usr` system), read-only;
//! - the *reach*: for each absolute folder on the trial's `PATH` outside those, its installation
//!   prefix (the folder itself, or its parent when it is named `bin`, `sbin` or `shims`, where an
//!   installation keeps its libraries beside: `/root/.pyenv/shims` shows `/root/.pyenv`),
//!   read-only at its own path;
//! - the spec's own binds (the workspace, the shims, an agent CLI's installation, a suite's
//!   `binds`), `/dev`, `/proc`, and private `/tmp`, `/run`, `/home` and `HOME`.
//!
//! Of what is shown, the entries that the host's other users may not read (`/etc/shadow`, a
//! private key under `/etc/ssl/private`, a `credentials.toml` at the top of a prefix) are
//! *covered*: an empty file or folder in their place, as for the suite and the store. Without
//! this, a trial of a proctor run as root reads them, since its root is the caller.
//!
//! The view is worked out once per process for each `PATH` (a walk of `/etc` and the top two
//! levels of each prefix) and recorded in every trial ([`proctor_records::isolation::HostView`]).

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

pub use proctor_records::isolation::HostView;

use crate::spec::{Bind, SandboxSpec};

/// The host's top-level entries a trial's root shows (those the host has): its programs,
/// libraries and system configuration.
pub const SYSTEM_TOP: &[&str] = &[
    "bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc",
];

/// Folders on `PATH` named like this are an installation's program folder: its prefix (the
/// parent) is shown, where the installation keeps what its programs load.
const PROGRAM_FOLDERS: &[&str] = &["bin", "sbin", "shims"];

/// Top-level folders whose contents a trial never gets from the host (they are private to it or
/// made by the kernel), so a `PATH` entry there reaches nothing of the host.
const NEVER_REACHED: &[&str] = &["proc", "sys", "dev", "tmp", "run"];

/// How deep under `/etc` unreadable entries are looked for.
const ETC_DEPTH: usize = 8;

/// How deep under each prefix of the reach unreadable entries are looked for.
const PREFIX_DEPTH: usize = 2;

/// Entries looked at under one folder at most (a prefix the size of a language's installation
/// is walked only near its top).
const WALK_BUDGET: usize = 20_000;

/// The view of the host for a trial whose `PATH` is `path`: worked out on first use, then shared.
pub fn host_view(path: &str) -> Arc<HostView> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<HostView>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(view) = cache.get(path) {
        return view.clone();
    }
    let view = Arc::new(work_out(path, Path::new("/")));
    cache.insert(path.to_owned(), view.clone());
    view
}

/// The `PATH` of a spec's environment (the last one wins, as in the sandbox).
pub fn spec_path(spec: &SandboxSpec) -> &str {
    spec.env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map_or("", |(_, v)| v.as_str())
}

/// `spec` with its view of the host made explicit: each prefix of the reach as a read-only bind
/// at its own path (unless a bind is there already) and each covered entry among the hidden
/// paths. For a host root with namespaces only; any other spec is returned as it is. Idempotent.
pub fn with_view(spec: &SandboxSpec) -> SandboxSpec {
    let mut spec = spec.clone();
    if !spec.namespaces || spec.root_image.is_some() {
        return spec;
    }
    let view = host_view(spec_path(&spec));
    for prefix in &view.reach {
        if !spec.binds.iter().any(|b| &b.inside == prefix) {
            spec.binds.push(Bind {
                host: prefix.clone(),
                inside: prefix.clone(),
                read_only: true,
            });
        }
    }
    for covered in &view.covered {
        if !spec.hide.contains(covered) {
            spec.hide.push(covered.clone());
        }
    }
    spec.view = Some((*view).clone());
    spec
}

/// Whether the host path `p` (canonical) is shown by a host root at its own path: under a
/// [`SYSTEM_TOP`] folder or a read-only bind of a host folder at its own place.
pub(crate) fn shown(spec: &SandboxSpec, p: &Path) -> bool {
    let system = p
        .components()
        .nth(1)
        .is_some_and(|c| SYSTEM_TOP.iter().any(|s| c.as_os_str() == *s));
    system
        || spec
            .binds
            .iter()
            .any(|b| b.host == b.inside && p.starts_with(&b.host))
}

/// Works the view out, the host seen under `host` (`/` but in tests).
fn work_out(path: &str, host: &Path) -> HostView {
    let system: Vec<PathBuf> = SYSTEM_TOP
        .iter()
        .map(|t| Path::new("/").join(t))
        .filter(|t| fs::symlink_metadata(under(host, t)).is_ok())
        .collect();
    let mut reach: Vec<PathBuf> = Vec::new();
    for entry in path.split(':').filter(|e| e.starts_with('/')) {
        let Some(prefix) = prefix_of(entry, host) else {
            continue;
        };
        if !reach.iter().any(|r| prefix.starts_with(r)) {
            reach.retain(|r| !r.starts_with(&prefix));
            reach.push(prefix);
        }
    }
    let mut covered = Vec::new();
    if system.iter().any(|s| s == Path::new("/etc")) {
        unreadable(host, Path::new("/etc"), ETC_DEPTH, &mut covered);
    }
    for prefix in &reach {
        unreadable(host, prefix, PREFIX_DEPTH, &mut covered);
    }
    HostView {
        system,
        reach,
        covered,
    }
}

/// The installation prefix a `PATH` entry reaches, canonical, or `None` when it shows nothing
/// more than the root already does (it is missing, under a system folder, under a private one,
/// or the root itself).
fn prefix_of(entry: &str, host: &Path) -> Option<PathBuf> {
    let real = fs::canonicalize(under(host, Path::new(entry))).ok()?;
    let real = Path::new("/").join(real.strip_prefix(host).ok()?);
    if !under(host, &real).is_dir() {
        return None;
    }
    let prefix = match real.file_name() {
        Some(name) if PROGRAM_FOLDERS.iter().any(|p| name == *p) => real.parent()?.to_path_buf(),
        _ => real,
    };
    let top = prefix.components().nth(1)?.as_os_str().to_owned();
    let hidden_anyway = NEVER_REACHED.iter().any(|n| top == *n);
    let system = SYSTEM_TOP.iter().any(|s| top == *s);
    (!hidden_anyway && !system).then_some(prefix)
}

/// Adds to `out` the entries under `dir` (seen under `host`), at most `depth` levels down, that
/// the host's other users cannot read (a folder they cannot read or enter, a file they cannot
/// read), without looking inside those. Links are not followed.
fn unreadable(host: &Path, dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let mut budget = WALK_BUDGET;
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    while let Some((d, level)) = stack.pop() {
        let Ok(entries) = fs::read_dir(under(host, &d)) else {
            continue;
        };
        for entry in entries.flatten() {
            if budget == 0 {
                return;
            }
            budget -= 1;
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            let mode = meta.permissions().mode();
            let inside = d.join(entry.file_name());
            if meta.is_dir() {
                if mode & 0o005 != 0o005 {
                    out.push(inside);
                } else if level + 1 < depth {
                    stack.push((inside, level + 1));
                }
            } else if meta.is_file() && mode & 0o004 == 0 {
                out.push(inside);
            }
        }
    }
}

/// `base` + an absolute path.
fn under(base: &Path, p: &Path) -> PathBuf {
    base.join(p.strip_prefix("/").unwrap_or(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn host() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().expect("a temporary folder");
        for d in [
            "usr/bin",
            "usr/local/bin",
            "etc/ssl/private",
            "etc/ssh",
            "root/.pyenv/shims",
            "root/.pyenv/versions",
            "root/.cargo/bin",
            "opt/tool",
            "srv/secrets",
            "tmp/x/bin",
        ] {
            fs::create_dir_all(tmp.path().join(d)).expect("mkdir");
        }
        symlink("usr/bin", tmp.path().join("bin")).expect("link");
        fs::write(tmp.path().join("etc/passwd"), "root:x:0:0").expect("write");
        fs::write(tmp.path().join("etc/shadow"), "root:$6$").expect("write");
        fs::write(tmp.path().join("root/.cargo/credentials.toml"), "token").expect("write");
        fs::write(tmp.path().join("etc/ssl/private/key.pem"), "key").expect("write");
        let mode = |p: &str, m: u32| {
            fs::set_permissions(tmp.path().join(p), fs::Permissions::from_mode(m)).expect("chmod")
        };
        mode("etc/shadow", 0o640);
        mode("etc/ssl/private", 0o700);
        mode("root/.cargo/credentials.toml", 0o600);
        tmp
    }

    #[test]
    fn the_reach_is_each_path_folders_installation_prefix_outside_the_system_folders() {
        let host = host();
        let view = work_out(
            "/root/.pyenv/shims:/root/.cargo/bin:/opt/tool:/usr/local/bin:/bin:/tmp/x/bin:/gone:rel",
            host.path(),
        );
        assert_eq!(
            view.reach,
            [
                PathBuf::from("/root/.pyenv"),
                PathBuf::from("/root/.cargo"),
                PathBuf::from("/opt/tool")
            ]
        );
        assert!(view.system.contains(&PathBuf::from("/usr")));
        assert!(view.system.contains(&PathBuf::from("/bin")));
        assert!(
            !view.system.contains(&PathBuf::from("/lib")),
            "not on this host"
        );
    }

    #[test]
    fn what_others_cannot_read_under_etc_and_the_prefixes_is_covered_and_nothing_else() {
        let host = host();
        let mut view = work_out("/root/.cargo/bin", host.path());
        view.covered.sort();
        assert_eq!(
            view.covered,
            [
                PathBuf::from("/etc/shadow"),
                PathBuf::from("/etc/ssl/private"),
                PathBuf::from("/root/.cargo/credentials.toml"),
            ]
        );
    }

    #[test]
    fn a_prefix_inside_another_is_kept_once() {
        let host = host();
        let view = work_out("/root/.pyenv/versions:/root/.pyenv/shims", host.path());
        assert_eq!(view.reach, [PathBuf::from("/root/.pyenv")]);
    }
}
