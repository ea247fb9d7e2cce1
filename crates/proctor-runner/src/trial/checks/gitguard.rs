//! A check never executes git configuration the agent wrote.
//!
//! git runs programs its configuration names (`core.fsmonitor`, hooks, `filter.*.clean` and
//! `smudge`, `diff.*.textconv`, `diff.external`, `core.pager`, an `include.path` that pulls in
//! any of them), and reads that configuration from the repository's own folder: files the
//! agent could write. So in a check's view of the workspace, in every git folder (`.git`, and
//! the git folders of submodules and worktrees kept in it, `.git/modules/...` and
//! `.git/worktrees/...`), what git reads as configuration or runs (`config`,
//! `config.worktree`, `commondir`, `hooks/`, `info/`) is as the start state has it (the
//! fixture's), or absent when the start state has none, whatever the agent did there; and a
//! `.git` that the agent made a file or a link (a pointer to a git folder elsewhere) is the
//! start state's, or absent. Everything else the agent did (its working-tree changes, its
//! index, its commits) stays visible to git, so an honest check still sees it. The check's
//! environment adds the rest ([`crate::trial::env::check_env`]: no system or global git
//! configuration, no implicit bare repository, no fsmonitor and no hooks at all).
//!
//! Over layers, the guard is one more read-only layer above the agent's changes, holding only
//! the guarded entries (the start state's copy, an opaque folder, or a whiteout); over a copy,
//! the copy itself is mended. Either way it costs the guarded entries the agent touched, never
//! the workspace's size.

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Component, Path, PathBuf};

/// What git reads, in one of its folders, as configuration or as programs to run.
const GUARDED: [&str; 5] = ["config", "config.worktree", "commondir", "hooks", "info"];

/// The opaque mark of an overlay folder whose lower layers' entries do not show through it.
const OPAQUE_XATTR: &str = "user.overlay.opaque";

/// Whether the workspace path `rel` is guarded: a `.git` entry (checked for its kind by the
/// caller), or one of [`GUARDED`] directly in a git folder: `.git/NAME`, or
/// `.git/modules/.../NAME` and `.git/worktrees/WT/NAME` (a submodule's or a worktree's own git
/// folder, where git reads them too). The rule as it reads on a whole path; the walk of
/// [`guarded_entries`] applies it as it goes, and a test holds the two to the same answers.
#[cfg(test)]
fn guarded(rel: &Path) -> bool {
    let parts: Vec<&OsStr> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n),
            _ => None,
        })
        .collect();
    let Some(git) = parts.iter().rposition(|p| *p == ".git") else {
        return false;
    };
    let inside = &parts[git + 1..];
    match inside {
        [name, ..] if GUARDED.iter().any(|g| OsStr::new(g) == *name) => true,
        [first, rest @ ..] if *first == "modules" || *first == "worktrees" => rest
            .iter()
            .skip(1)
            .any(|p| GUARDED.iter().any(|g| OsStr::new(g) == *p)),
        _ => false,
    }
}

/// Whether `rel` is a `.git` entry.
fn is_git(rel: &Path) -> bool {
    rel.file_name() == Some(OsStr::new(".git"))
}

fn is_whiteout(m: &fs::Metadata) -> bool {
    m.file_type().is_char_device() && m.rdev() == 0
}

fn is_opaque(path: &Path) -> bool {
    let mut buf = [0u8; 4];
    matches!(rustix::fs::lgetxattr(path, OPAQUE_XATTR, &mut buf), Ok(1) if buf[0] == b'y')
        || matches!(rustix::fs::lgetxattr(path, "trusted.overlay.opaque", &mut buf), Ok(1) if buf[0] == b'y')
}

/// The guarded entries of the tree `top` (an overlay layer, or a whole tree), by relative
/// path: each guarded entry, and each `.git` that is not a folder. Their insides are not
/// walked.
pub fn guarded_entries(top: &Path) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    if fs::symlink_metadata(top).is_err() {
        // No tree, nothing of the agent's to guard (the sandbox says so when it mounts it).
        return Ok(out);
    }
    // By open folders ([`proctor_fs::beneath::walk`]): a tree of any depth, past PATH_MAX too.
    // Whether an entry is guarded is known from its name and from where it lies in the git
    // folders on its way (kept as the walk goes down and up), never by reading its whole path
    // again: a tree 10,000 levels deep is walked in linear time. The same rule as [`guarded`].
    struct Guarded<'a> {
        rel: PathBuf,
        /// The `.git` folders on the way to `rel`, shallowest first.
        gits: Vec<GitFolder>,
        out: &'a mut Vec<PathBuf>,
    }
    struct GitFolder {
        /// How many folders of `rel` lie inside it.
        inside: usize,
        /// Whether the first of them is `modules` or `worktrees`.
        nested: bool,
    }
    impl Guarded<'_> {
        /// Whether `name`, in the folder `rel`, is guarded (its ancestors are not: a guarded
        /// entry is never walked into).
        fn guards(&self, name: &OsStr) -> bool {
            let is_guarded_name = || GUARDED.iter().any(|g| OsStr::new(g) == name);
            match self.gits.last() {
                None => false,
                Some(GitFolder { inside: 0, .. }) => is_guarded_name(),
                Some(GitFolder {
                    inside,
                    nested: true,
                }) => *inside >= 2 && is_guarded_name(),
                Some(_) => false,
            }
        }
    }
    impl proctor_fs::beneath::Visit for Guarded<'_> {
        fn entry(
            &mut self,
            _: std::os::fd::BorrowedFd<'_>,
            name: &std::ffi::CStr,
            st: &rustix::fs::Stat,
        ) -> io::Result<proctor_fs::beneath::Step> {
            use std::os::unix::ffi::OsStrExt;
            let name = OsStr::from_bytes(name.to_bytes());
            let dir = rustix::fs::FileType::from_raw_mode(st.st_mode).is_dir();
            if (name == ".git" && !dir) || self.guards(name) {
                self.out.push(self.rel.join(name));
                return Ok(proctor_fs::beneath::Step::Skip);
            }
            if dir {
                self.rel.push(name);
                if let Some(g) = self.gits.last_mut() {
                    g.inside += 1;
                    if g.inside == 1 {
                        g.nested = name == "modules" || name == "worktrees";
                    }
                }
                if name == ".git" {
                    self.gits.push(GitFolder {
                        inside: 0,
                        nested: false,
                    });
                }
            }
            Ok(proctor_fs::beneath::Step::Descend)
        }
        fn leave(
            &mut self,
            _: std::os::fd::BorrowedFd<'_>,
            name: &std::ffi::CStr,
        ) -> io::Result<()> {
            self.rel.pop();
            if name.to_bytes() == b".git" && self.gits.last().is_some_and(|g| g.inside == 0) {
                self.gits.pop();
            }
            if let Some(g) = self.gits.last_mut() {
                g.inside -= 1;
            }
            Ok(())
        }
    }
    let top = rustix::fs::open(
        top,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    proctor_fs::beneath::walk(
        top,
        &mut Guarded {
            rel: PathBuf::new(),
            gits: Vec::new(),
            out: &mut out,
        },
    )?;
    Ok(out)
}

/// Where the start state (overlay `layers`, top first) has `rel`, if it has it: the entry in
/// the highest layer that holds it, unless a whiteout, a non-folder or an opaque folder above
/// hides it there.
pub fn in_layers(layers: &[PathBuf], rel: &Path) -> Option<PathBuf> {
    let parts: Vec<Component> = rel.components().collect();
    for layer in layers {
        let mut at = layer.clone();
        let mut opaque = false;
        for (i, part) in parts.iter().enumerate() {
            at.push(part);
            let Ok(m) = fs::symlink_metadata(&at) else {
                break;
            };
            if is_whiteout(&m) {
                return None;
            }
            if i + 1 == parts.len() {
                return Some(at);
            }
            if !m.is_dir() {
                return None;
            }
            opaque |= is_opaque(&at);
        }
        if opaque {
            return None;
        }
    }
    None
}

/// Lays the guard layer for a check over the agent's changes `top`, in `guard` (an empty
/// folder made here): each guarded entry of `top` as the start state (`start`, its layers top
/// first) has it (a folder copied whole and opaque, so nothing of the agent's shows through),
/// or a whiteout where it has none. Gives whether anything was laid (when not, the layer is
/// not needed).
pub fn lay_guard(top: &Path, start: &[PathBuf], guard: &Path) -> io::Result<bool> {
    let entries = guarded_entries(top)?;
    if entries.is_empty() {
        return Ok(false);
    }
    fs::create_dir_all(guard)?;
    for rel in &entries {
        let at = guard.join(rel);
        if let Some(parent) = at.parent() {
            fs::create_dir_all(parent)?;
        }
        match in_layers(start, rel) {
            Some(src) if !(is_git(rel) && src.is_dir()) => {
                copy_entry(&src, &at)?;
                if fs::symlink_metadata(&at)?.is_dir() {
                    rustix::fs::lsetxattr(&at, OPAQUE_XATTR, b"y", rustix::fs::XattrFlags::empty())
                        .map_err(|e| {
                            io::Error::other(format!("cannot mark {} opaque: {e}", at.display()))
                        })?;
                }
            }
            // A `.git` the agent made a file or a link where the start state has a folder:
            // the repository is gone from the check's view (the agent broke it).
            _ => proctor_sandbox::copy::make_whiteout(&at)?,
        }
    }
    keep_times(top, guard)?;
    Ok(true)
}

/// Mends a whole copy of the end state `ws` in place: each guarded entry is replaced by the
/// start state's (`start`, layers top first), or removed where it has none.
pub fn mend_copy(ws: &Path, start: &[PathBuf]) -> io::Result<()> {
    for rel in guarded_entries(ws)? {
        let at = ws.join(&rel);
        proctor_sandbox::remove_tree(&at)?;
        if let Some(src) = in_layers(start, &rel).filter(|s| !(is_git(&rel) && s.is_dir())) {
            copy_entry(&src, &at)?;
        }
    }
    Ok(())
}

/// Copies the start state's entry `src` (a file, a link or a folder) to `to`, times kept.
fn copy_entry(src: &Path, to: &Path) -> io::Result<()> {
    let m = fs::symlink_metadata(src)?;
    if m.is_dir() {
        crate::layers::copy_tree(src, to)?;
        super::copy_times(src, to)
    } else if m.file_type().is_symlink() {
        std::os::unix::fs::symlink(fs::read_link(src)?, to)
    } else if m.is_file() {
        copy_file(src, to, proctor_sandbox::copy::harmless_mode(m.mode()))?;
        super::set_times(to, &m)
    } else {
        Ok(())
    }
}

/// Copies the start state's file `src` to `to` (which must not exist; never through a link)
/// with the harmless `mode`.
fn copy_file(src: &Path, to: &Path, mode: u32) -> io::Result<()> {
    use proctor_sandbox::copy::{copy_data, CopyOptions};
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let input = fs::File::open(src)?;
    let output = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(to)?;
    copy_data(&input, &output, CopyOptions::default())?;
    output.set_permissions(fs::Permissions::from_mode(mode))
}

/// The folders of the guard layer keep the times the agent's changes (`top`) give them, so the
/// check's view of a folder's times is as the agent left it.
fn keep_times(top: &Path, guard: &Path) -> io::Result<()> {
    let mut dirs: Vec<PathBuf> = walkdir::WalkDir::new(guard)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_dir())
        .map(|e| e.into_path())
        .collect();
    // Deepest first: setting a folder's times after its children's.
    dirs.reverse();
    for dir in dirs {
        let Ok(rel) = dir.strip_prefix(guard) else {
            continue;
        };
        if let Ok(m) = fs::symlink_metadata(top.join(rel)) {
            if m.is_dir() && !is_opaque(&dir) {
                super::set_times(&dir, &m)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_git_reads_as_configuration_is_guarded_and_nothing_else() {
        for p in [
            ".git/config",
            ".git/hooks",
            ".git/hooks/pre-commit",
            ".git/info",
            ".git/commondir",
            ".git/config.worktree",
            "sub/.git/config",
            ".git/modules/lib/config",
            ".git/modules/a/b/hooks",
            ".git/worktrees/wt/config.worktree",
        ] {
            assert!(guarded(Path::new(p)), "{p}");
        }
        for p in [
            ".git",
            ".git/HEAD",
            ".git/index",
            ".git/refs/heads/config",
            ".git/objects/ab/cdef",
            ".git/modules/config",
            "config",
            "src/hooks/x.py",
            ".gitconfig",
        ] {
            assert!(!guarded(Path::new(p)), "{p}");
        }
    }

    #[test]
    fn the_walk_finds_what_the_rule_guards_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path();
        let deep_inside = format!(".git/objects/{}hooks/x", "d/".repeat(300));
        let files = [
            ".git/config",
            ".git/hooks/pre-commit",
            ".git/info/exclude",
            ".git/commondir",
            ".git/config.worktree",
            ".git/HEAD",
            ".git/index",
            ".git/refs/heads/config",
            ".git/objects/ab/cdef",
            ".git/modules/config",
            ".git/modules/lib/config",
            ".git/modules/lib/objects/hooks",
            ".git/modules/a/b/hooks/x",
            ".git/modules/m/.git/config",
            ".git/worktrees/wt/config.worktree",
            ".git/worktrees/wt/HEAD",
            "sub/.git/config",
            "sub/.git/refs/x",
            "config",
            "src/hooks/x.py",
            ".gitconfig",
            "nested/.git",
            "after/.git/info",
            &deep_inside,
        ];
        for f in files {
            let path = top.join(f);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, "x").unwrap();
        }
        // What the rule selects on whole paths: each guarded entry (or `.git` that is not a
        // folder) none of whose folders above is selected already.
        let mut want: Vec<PathBuf> = Vec::new();
        for e in walkdir::WalkDir::new(top).min_depth(1).sort_by_file_name() {
            let e = e.unwrap();
            let rel = e.path().strip_prefix(top).unwrap().to_path_buf();
            let selected = guarded(&rel) || (is_git(&rel) && !e.file_type().is_dir());
            if selected && !want.iter().any(|w| rel.starts_with(w)) {
                want.push(rel);
            }
        }
        let mut got = guarded_entries(top).unwrap();
        got.sort();
        want.sort();
        assert_eq!(got, want);
        assert!(want.contains(&PathBuf::from(".git/modules/m/.git/config")));
        assert!(want.contains(&PathBuf::from("nested/.git")));
        assert!(!want.iter().any(|w| w.starts_with(".git/objects")));
    }

    #[test]
    fn over_layers_the_agents_git_configuration_gives_way_to_the_start_states() {
        let dir = tempfile::tempdir().unwrap();
        let (start, top, guard) = (
            dir.path().join("start"),
            dir.path().join("top"),
            dir.path().join("guard"),
        );
        fs::create_dir_all(start.join(".git/hooks")).unwrap();
        fs::write(start.join(".git/config"), "[core]\n\tbare = false\n").unwrap();
        fs::write(start.join(".git/hooks/sample"), "#!/bin/sh\n").unwrap();
        fs::create_dir_all(top.join(".git/hooks")).unwrap();
        fs::write(top.join(".git/config"), "[core]\n\tfsmonitor = ./evil\n").unwrap();
        fs::write(top.join(".git/hooks/pre-commit"), "evil\n").unwrap();
        fs::write(top.join(".git/info"), "planted\n").unwrap();
        fs::write(top.join(".git/index"), "the agent's index\n").unwrap();
        fs::write(top.join("work.txt"), "the agent's work\n").unwrap();
        assert!(lay_guard(&top, std::slice::from_ref(&start), &guard).unwrap());
        assert_eq!(
            fs::read_to_string(guard.join(".git/config")).unwrap(),
            "[core]\n\tbare = false\n"
        );
        assert!(guard.join(".git/hooks/sample").is_file());
        assert!(!guard.join(".git/hooks/pre-commit").exists());
        assert!(is_opaque(&guard.join(".git/hooks")));
        let info = fs::symlink_metadata(guard.join(".git/info")).unwrap();
        assert!(is_whiteout(&info), "the start state has no info: hidden");
        assert!(!guard.join(".git/index").exists() && !guard.join("work.txt").exists());
    }

    #[test]
    fn a_copy_is_mended_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let (start, ws) = (dir.path().join("start"), dir.path().join("ws"));
        fs::create_dir_all(start.join(".git")).unwrap();
        fs::write(start.join(".git/config"), "fixture\n").unwrap();
        fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        fs::create_dir_all(ws.join("nested")).unwrap();
        fs::write(ws.join(".git/config"), "agent\n").unwrap();
        fs::write(ws.join(".git/hooks/post-checkout"), "agent\n").unwrap();
        fs::write(ws.join("nested/.git"), "gitdir: ../elsewhere\n").unwrap();
        mend_copy(&ws, &[start]).unwrap();
        assert_eq!(
            fs::read_to_string(ws.join(".git/config")).unwrap(),
            "fixture\n"
        );
        assert!(!ws.join(".git/hooks").exists());
        assert!(!ws.join("nested/.git").exists());
    }
}
