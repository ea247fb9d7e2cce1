//! Trials whose root is an OCI image (docs/environments.md): the image each task runs in,
//! resolved once before any trial, and the host runtime that lets proctor's own programs (the
//! shims, the model relay and mock) run inside any image: the dynamic loader and the libraries
//! this very process has loaded, bound read-only under `/run/proctor/lib`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use proctor_sandbox::Bind;

/// Where the host runtime's files appear inside a trial.
pub const LIB_INSIDE: &str = "/run/proctor/lib";

/// The image a task's trials run in, unpacked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrialImage {
    /// The reference as the suite wrote it.
    pub reference: String,
    /// The manifest digest it resolved to (`sha256:...`).
    pub digest: String,
    /// The unpacked root file system (read-only, shared by every trial).
    pub rootfs: PathBuf,
    /// Where the fixture is laid and the agent starts, inside the image.
    pub workdir: PathBuf,
    /// The image's environment, then the suite's `env` over it.
    pub env: Vec<(String, String)>,
    /// How it was had when it was not pulled (built from the task's `build` folder, and why);
    /// recorded with each trial.
    pub note: Option<String>,
}

impl TrialImage {
    /// The image's `PATH`, or the usual one when it sets none.
    pub fn path(&self) -> String {
        self.env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| {
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into()
            })
    }

    /// Whether a program named `name` is on the image's `PATH`.
    pub fn finds(&self, name: &str) -> bool {
        std::env::split_paths(&self.path()).any(|dir| {
            let rel = dir.strip_prefix("/").unwrap_or(&dir);
            std::fs::symlink_metadata(self.rootfs.join(rel).join(name)).is_ok()
        })
    }

    /// The host folder holding what the image has at its working directory, if anything: the
    /// lowest layer of the trial's workspace.
    pub fn workdir_layer(&self) -> Option<PathBuf> {
        let rel = self.workdir.strip_prefix("/").unwrap_or(&self.workdir);
        let dir = self.rootfs.join(rel);
        // A symlink could point anywhere on the host: only a real folder of the image is taken.
        std::fs::symlink_metadata(&dir)
            .is_ok_and(|m| m.is_dir())
            .then_some(dir)
    }
}

/// The dynamic loader and shared libraries of the running proctor, so that proctor can be run
/// inside an image that lacks them (or has other versions): `LOADER --library-path LIBDIR
/// PROCTOR ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRuntime {
    /// The loader's file name (`ld-linux-x86-64.so.2`).
    loader: String,
    /// Every shared object mapped into this process (the loader included), by host path.
    libs: Vec<PathBuf>,
}

impl HostRuntime {
    /// The runtime of this process, read from `/proc/self/maps`; `None` for a static binary.
    pub fn of_this_process() -> std::io::Result<Option<HostRuntime>> {
        let maps = std::fs::read_to_string("/proc/self/maps")?;
        Ok(Self::from_maps(&maps))
    }

    /// The runtime named by a `/proc/PID/maps` text.
    pub fn from_maps(maps: &str) -> Option<HostRuntime> {
        let libs: BTreeSet<PathBuf> = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .filter(|p| p.starts_with('/') && p.contains(".so"))
            .map(PathBuf::from)
            .collect();
        let loader = libs
            .iter()
            .filter_map(|p| p.file_name()?.to_str())
            .find(|n| {
                n.starts_with("ld-linux") || n.starts_with("ld64") || n.starts_with("ld-musl")
            })?
            .to_string();
        Some(HostRuntime {
            loader,
            libs: libs.into_iter().collect(),
        })
    }

    /// Read-only binds of every library under [`LIB_INSIDE`], by file name.
    pub fn binds(&self) -> Vec<Bind> {
        self.libs
            .iter()
            .filter_map(|lib| {
                let name = lib.file_name()?;
                Some(Bind {
                    host: lib.clone(),
                    inside: Path::new(LIB_INSIDE).join(name),
                    read_only: true,
                })
            })
            .collect()
    }

    /// The command line that runs `program` (a host-built executable, as seen inside) through
    /// the bound loader and libraries.
    pub fn command(&self, program: &Path) -> Vec<String> {
        vec![
            format!("{LIB_INSIDE}/{}", self.loader),
            "--library-path".into(),
            LIB_INSIDE.into(),
            program.display().to_string(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
5581a0000000-5581a0100000 r--p 00000000 fd:01 123 /opt/proctor/bin/proctor
7f00a0000000-7f00a0020000 r--p 00000000 fd:01 456 /usr/lib/x86_64-linux-gnu/libc.so.6
7f00a0020000-7f00a0040000 r-xp 00020000 fd:01 456 /usr/lib/x86_64-linux-gnu/libc.so.6
7f00a0100000-7f00a0110000 r--p 00000000 fd:01 457 /usr/lib/x86_64-linux-gnu/libgcc_s.so.1
7f00a0200000-7f00a0210000 r--p 00000000 fd:01 458 /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
";

    #[test]
    fn the_runtime_is_the_loader_and_every_mapped_library_once() {
        let rt = HostRuntime::from_maps(MAPS).unwrap();
        let inside: Vec<String> = rt
            .binds()
            .iter()
            .map(|b| b.inside.display().to_string())
            .collect();
        assert_eq!(
            inside,
            [
                "/run/proctor/lib/ld-linux-x86-64.so.2",
                "/run/proctor/lib/libc.so.6",
                "/run/proctor/lib/libgcc_s.so.1"
            ]
        );
        assert!(rt.binds().iter().all(|b| b.read_only));
        assert_eq!(
            rt.command(Path::new("/run/proctor/bin/proctor")),
            [
                "/run/proctor/lib/ld-linux-x86-64.so.2",
                "--library-path",
                "/run/proctor/lib",
                "/run/proctor/bin/proctor"
            ]
        );
        assert!(HostRuntime::from_maps("7f 00 r--p 0 0 0 /opt/static\n").is_none());
    }

    #[test]
    fn the_runtime_of_this_test_process_runs_a_program() {
        // The test binary itself is dynamically linked: run `true`'s equivalent through its own
        // loader with the library path, as a trial in an image would run proctor.
        let rt = HostRuntime::of_this_process().unwrap().unwrap();
        let loader = rt
            .libs
            .iter()
            .find(|l| l.file_name().is_some_and(|n| n == rt.loader.as_str()))
            .unwrap()
            .clone();
        let dir = tempfile::tempdir().unwrap();
        for b in rt.binds() {
            std::os::unix::fs::symlink(&b.host, dir.path().join(b.inside.file_name().unwrap()))
                .unwrap();
        }
        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new(&loader)
            .arg("--library-path")
            .arg(dir.path())
            .arg(&exe)
            .arg("--list")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    fn an_images_path_and_workdir_layer() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("app/src")).unwrap();
        let mut img = TrialImage {
            reference: "oci:img".into(),
            digest: "sha256:00".into(),
            rootfs: dir.path().to_path_buf(),
            workdir: PathBuf::from("/app"),
            env: vec![("PATH".into(), "/opt/bin:/bin".into())],
            note: None,
        };
        assert_eq!(img.path(), "/opt/bin:/bin");
        std::fs::create_dir_all(dir.path().join("bin")).unwrap();
        std::fs::write(dir.path().join("bin/tool"), "").unwrap();
        assert!(img.finds("tool"));
        assert!(!img.finds("python3"), "only the image's PATH is looked at");
        assert_eq!(img.workdir_layer(), Some(dir.path().join("app")));
        img.workdir = PathBuf::from("/workspace");
        assert_eq!(img.workdir_layer(), None, "nothing there in the image");
        img.env.clear();
        assert!(img.path().contains("/usr/bin"));
    }
}
