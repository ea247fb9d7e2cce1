//! The run's root skeletons: for each shape of trial root, the folders, empty files and links a
//! trial's root shows before anything is mounted on it, laid out once in the run's scratch and
//! bound read-only by every trial of that shape (see [`proctor_sandbox::RootSkeleton`]), instead
//! of some sixty system calls per trial making the same on a fresh tmpfs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use proctor_sandbox::{RootSkeleton, SandboxSpec};

/// The skeletons of one run, laid out on first use.
pub struct Skeletons {
    /// Where they go (a folder of the run's scratch, made on first use).
    dir: PathBuf,
    /// Each shape met so far, with its skeleton (`None`: it could not be laid out).
    made: Mutex<HashMap<Shape, Option<RootSkeleton>>>,
}

/// What a trial's root skeleton depends on: the inside places of its mount points (with whether
/// each bind's source is a folder, which makes its mount point a folder or a file), whether the
/// paths hidden from the agent get mount points (only with services), a network that binds a
/// resolver file (the host's or the internet's, which may be bound into `/run`), and the `PATH`, whose installation prefixes the
/// root shows (see [`proctor_sandbox::view`]).
#[derive(Debug, PartialEq, Eq, Hash)]
struct Shape {
    workspace: PathBuf,
    home: PathBuf,
    binds: Vec<(PathBuf, bool)>,
    services: Vec<String>,
    hidden: Vec<PathBuf>,
    resolver: bool,
    path: String,
}

impl Shape {
    fn of(spec: &SandboxSpec) -> Shape {
        Shape {
            workspace: spec.workspace_inside.clone(),
            home: spec.home_inside.clone(),
            binds: spec
                .binds
                .iter()
                .map(|b| (b.inside.clone(), b.host.is_dir()))
                .collect(),
            services: spec.services.iter().map(|s| s.name.clone()).collect(),
            hidden: if spec.services.is_empty() {
                Vec::new()
            } else {
                spec.hide.clone()
            },
            resolver: matches!(
                spec.network,
                proctor_sandbox::Network::Host | proctor_sandbox::Network::Internet
            ),
            path: proctor_sandbox::view::spec_path(spec).to_owned(),
        }
    }
}

impl Skeletons {
    /// The skeletons of a run whose scratch is `work_root`.
    pub fn new(work_root: &Path) -> Skeletons {
        Skeletons {
            // Not a trial's folder: a trial's id never starts with a dot.
            dir: work_root.join(".skeletons"),
            made: Mutex::new(HashMap::new()),
        }
    }

    /// The skeleton for trials shaped like `spec`, laid out the first time the shape is met.
    /// `None` for a spec that takes none (no namespaces, or an image's root), and for a shape
    /// whose skeleton could not be laid out: the trial init then makes the same root itself.
    pub fn for_spec(&self, spec: &SandboxSpec) -> Option<RootSkeleton> {
        if !spec.namespaces || spec.root_image.is_some() {
            return None;
        }
        let shape = Shape::of(spec);
        let mut made = self.made.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(skeleton) = made.get(&shape) {
            return skeleton.clone();
        }
        let dir = self.dir.join(made.len().to_string());
        let skeleton = std::fs::create_dir_all(&self.dir)
            .ok()
            .and_then(|()| RootSkeleton::lay_out(&dir, spec).ok());
        if skeleton.is_none() {
            let _ = proctor_sandbox::remove_tree(&dir);
        }
        made.insert(shape, skeleton.clone());
        skeleton
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proctor_sandbox::{Bind, Workspace};
    use std::time::Duration;

    fn spec(dir: &Path) -> SandboxSpec {
        SandboxSpec::new(
            "/nonexistent/proctor",
            Workspace::Bind {
                dir: dir.to_path_buf(),
            },
            vec!["true".into()],
            dir.join("stdout"),
            dir.join("stderr"),
            Duration::from_secs(1),
        )
    }

    fn bind(host: &Path, inside: &str) -> Bind {
        Bind {
            host: host.to_path_buf(),
            inside: PathBuf::from(inside),
            read_only: true,
        }
    }

    #[test]
    fn one_skeleton_per_shape_is_laid_out_on_first_use() {
        let tmp = tempfile::tempdir().unwrap();
        let (a_file, a_dir) = (tmp.path().join("a-file"), tmp.path().join("a-dir"));
        std::fs::write(&a_file, "x").unwrap();
        std::fs::create_dir(&a_dir).unwrap();
        let skeletons = Skeletons::new(&tmp.path().join("work"));
        let mut first = spec(tmp.path());
        first.binds = vec![bind(&a_file, "/run/proctor/thing")];
        let one = skeletons.for_spec(&first).expect("laid out");
        assert!(one.dir.join("run/proctor/thing").is_file());
        // Another trial of the same shape (a different host file, same place) shares it.
        let other_file = tmp.path().join("other-file");
        std::fs::write(&other_file, "y").unwrap();
        let mut second = spec(tmp.path());
        second.binds = vec![bind(&other_file, "/run/proctor/thing")];
        assert_eq!(skeletons.for_spec(&second), Some(one.clone()));
        // A folder at that place is another shape: its mount point is a folder.
        let mut third = spec(tmp.path());
        third.binds = vec![bind(&a_dir, "/run/proctor/thing")];
        let two = skeletons.for_spec(&third).expect("laid out");
        assert_ne!(two.dir, one.dir);
        assert!(two.dir.join("run/proctor/thing").is_dir());
        let laid = std::fs::read_dir(tmp.path().join("work/.skeletons"))
            .unwrap()
            .count();
        assert_eq!(laid, 2);
    }

    #[test]
    fn specs_that_take_no_skeleton_get_none_and_a_failed_lay_out_is_not_retried() {
        let tmp = tempfile::tempdir().unwrap();
        let skeletons = Skeletons::new(&tmp.path().join("work"));
        let mut hostless = spec(tmp.path());
        hostless.namespaces = false;
        assert_eq!(skeletons.for_spec(&hostless), None);
        let mut imaged = spec(tmp.path());
        imaged.root_image = Some(proctor_sandbox::RootImage {
            rootfs: tmp.path().to_path_buf(),
            upper: tmp.path().join("u"),
            work: tmp.path().join("w"),
            layers: Vec::new(),
            keep_upper: false,
        });
        assert_eq!(skeletons.for_spec(&imaged), None);
        assert!(!tmp.path().join("work").exists(), "nothing laid out");
        // Where the scratch cannot hold one (a file where its folder goes): none, and the trials
        // make their own roots.
        let blocked = tmp.path().join("blocked");
        std::fs::write(&blocked, "").unwrap();
        let skeletons = Skeletons::new(&blocked);
        assert_eq!(skeletons.for_spec(&spec(tmp.path())), None);
        assert_eq!(skeletons.for_spec(&spec(tmp.path())), None);
        assert_eq!(skeletons.made.lock().unwrap().len(), 1);
    }
}
