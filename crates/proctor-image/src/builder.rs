//! The program that builds an image from a Dockerfile: the first of buildah, podman and docker
//! on `PATH`, run with its storage under proctor's cache and with proctor's `[registries]`
//! settings (insecure registries and mirrors) written as its `registries.conf`.

use std::collections::BTreeSet;
use std::ffi::{CString, OsString};
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::config::RegistryConfig;
use crate::error::{ImageError, IoContext, Result};
use crate::reference::DOCKER_HUB;

/// A builder program proctor knows how to drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuilderKind {
    /// Buildah: daemonless; its storage is kept under the cache (`vfs` driver, `chroot`
    /// isolation), so it needs no daemon and leaves nothing in `/var/lib`.
    Buildah,
    /// Podman: driven as buildah is (its own storage under the cache).
    Podman,
    /// Docker: the daemon builds; proctor's `[registries]` do not reach it (configure the
    /// daemon's own mirrors), and `docker save` must write an OCI archive (Docker 25 or newer).
    Docker,
}

impl BuilderKind {
    /// The order builders are looked for in.
    pub const ALL: [BuilderKind; 3] = [
        BuilderKind::Buildah,
        BuilderKind::Podman,
        BuilderKind::Docker,
    ];

    /// The program's name.
    pub fn name(self) -> &'static str {
        match self {
            BuilderKind::Buildah => "buildah",
            BuilderKind::Podman => "podman",
            BuilderKind::Docker => "docker",
        }
    }
}

/// A builder found on `PATH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Builder {
    /// Which one.
    pub kind: BuilderKind,
    /// Its executable.
    pub program: PathBuf,
}

impl Builder {
    /// The first of buildah, podman and docker on `PATH`; [`ImageError::NoBuilder`] when there
    /// is none.
    pub fn find() -> Result<Builder> {
        Builder::find_in(&std::env::var_os("PATH").unwrap_or_default())
    }

    /// The first of buildah, podman and docker in the folders of `path` (as `PATH` lists them).
    pub fn find_in(path: &std::ffi::OsStr) -> Result<Builder> {
        for kind in BuilderKind::ALL {
            for dir in std::env::split_paths(path) {
                let program = dir.join(kind.name());
                if is_executable(&program) {
                    return Ok(Builder { kind, program });
                }
            }
        }
        Err(ImageError::NoBuilder {
            path: path.to_string_lossy().into_owned(),
        })
    }
}

/// Whether `path` is an executable regular file.
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Where a build works: the builder's storage (kept between builds, so a base image is pulled
/// once), its run folder and its temporary folder.
#[derive(Debug, Clone)]
pub(crate) struct Workspace {
    /// `build/storage`: buildah's and podman's image store.
    pub storage: PathBuf,
    /// `build/run`: their run root.
    pub run: PathBuf,
    /// `build/var-lib`: seen by a root buildah as `/var/lib` (its blob-info cache goes there).
    pub var_lib: PathBuf,
    /// A temporary folder for this build (`TMPDIR`, the generated configuration files).
    pub tmp: PathBuf,
}

/// One build: what to build and where its output and log go.
pub(crate) struct Job<'a> {
    /// The build context.
    pub context: &'a Path,
    /// The Dockerfile.
    pub dockerfile: &'a Path,
    /// The name the image is tagged with in the builder's store (removed after).
    pub tag: &'a str,
    /// Where the OCI archive is written.
    pub archive: &'a Path,
    /// The build log (every command and its output).
    pub log: &'a Path,
    /// When the build must have finished, and the limit that says so; `None`: no limit.
    pub deadline: Option<(Instant, Duration)>,
}

impl Builder {
    /// Builds `job`, writing its OCI archive; the error carries the end of the log.
    pub(crate) fn build(
        &self,
        job: &Job<'_>,
        ws: &Workspace,
        registries: &RegistryConfig,
    ) -> Result<()> {
        for dir in [
            &ws.storage,
            &ws.run,
            &ws.var_lib.join("containers"),
            &ws.tmp,
        ] {
            fs::create_dir_all(dir).ctx("making", dir)?;
        }
        let mut log = File::create(job.log).ctx("creating", job.log)?;
        let files = BuildFiles::write(job, ws, registries)?;
        let result = self.steps(job, ws, &files).iter().try_for_each(|args| {
            let at = StepAt {
                ws,
                registries,
                conf: &files.conf,
                log_path: job.log,
                deadline: job.deadline,
            };
            self.step(args, at, &mut log)
        });
        // The tagged image is not needed once archived (base images stay, for the next build).
        let remove = match self.kind {
            BuilderKind::Docker => vec![os("rmi"), os(job.tag)],
            _ => store_args(ws)
                .into_iter()
                .chain([os("rmi"), os(job.tag)])
                .collect(),
        };
        let at = StepAt {
            ws,
            registries,
            conf: &files.conf,
            log_path: job.log,
            deadline: None,
        };
        let _ = self.step(&remove, at, &mut log);
        result
    }

    /// The builder's commands for `job`: build, then write the OCI archive.
    fn steps(&self, job: &Job<'_>, ws: &Workspace, files: &BuildFiles) -> Vec<Vec<OsString>> {
        let dockerfile = files.dockerfile.as_os_str();
        let context = job.context.as_os_str();
        let policy = files.policy.as_os_str();
        let archive = format!("oci-archive:{}", job.archive.display());
        match self.kind {
            BuilderKind::Buildah | BuilderKind::Podman => {
                let build = match self.kind {
                    BuilderKind::Buildah => "bud",
                    _ => "build",
                };
                let with = |args: &[&std::ffi::OsStr]| -> Vec<OsString> {
                    store_args(ws)
                        .into_iter()
                        .chain(args.iter().map(|a| a.to_os_string()))
                        .collect()
                };
                vec![
                    with(&[
                        build.as_ref(),
                        "--isolation".as_ref(),
                        "chroot".as_ref(),
                        "--signature-policy".as_ref(),
                        policy,
                        "-f".as_ref(),
                        dockerfile,
                        "-t".as_ref(),
                        job.tag.as_ref(),
                        context,
                    ]),
                    with(&[
                        "push".as_ref(),
                        "--signature-policy".as_ref(),
                        policy,
                        job.tag.as_ref(),
                        archive.as_ref(),
                    ]),
                ]
            }
            BuilderKind::Docker => vec![
                vec![
                    os("build"),
                    os("-f"),
                    dockerfile.into(),
                    os("-t"),
                    os(job.tag),
                    context.into(),
                ],
                vec![os("save"), os("-o"), job.archive.into(), os(job.tag)],
            ],
        }
    }

    /// Runs the builder with `args`, its output appended to `log`; past `at.deadline` it is
    /// killed (its whole process group) and the step fails with [`ImageError::BuildTimedOut`].
    fn step(&self, args: &[OsString], at: StepAt<'_>, log: &mut File) -> Result<()> {
        let StepAt {
            ws,
            registries,
            conf,
            log_path,
            deadline,
        } = at;
        let shown: Vec<String> = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        writeln!(log, "$ {} {}", self.program.display(), shown.join(" "))
            .ctx("writing", log_path)?;
        log.flush().ctx("writing", log_path)?;
        let out = log.try_clone().ctx("writing", log_path)?;
        let err = log.try_clone().ctx("writing", log_path)?;
        let mut command = Command::new(&self.program);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .env("TMPDIR", &ws.tmp)
            .env("CONTAINERS_REGISTRIES_CONF", conf)
            .env("BUILDAH_ISOLATION", "chroot");
        if let Some(auth) = &registries.docker_config {
            command.env("REGISTRY_AUTH_FILE", auth);
        }
        if self.kind != BuilderKind::Docker {
            hide_var_lib(&mut command, &ws.var_lib);
        }
        // Its own process group, so that a build past its time limit is stopped whole.
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let cannot_run = |e: std::io::Error| ImageError::BuildFailed {
            builder: self.kind.name().to_string(),
            log: log_path.to_path_buf(),
            tail: format!("cannot run {}: {e}", self.program.display()),
        };
        let child = command.spawn().map_err(cannot_run)?;
        let Some(status) = wait_until(child, deadline.map(|d| d.0)).map_err(cannot_run)? else {
            let seconds = deadline.map_or(0, |d| d.1.as_secs());
            writeln!(
                log,
                "({} stopped: the build's time limit of {seconds} s ran out)",
                self.kind.name()
            )
            .ctx("writing", log_path)?;
            return Err(ImageError::BuildTimedOut {
                builder: self.kind.name().to_string(),
                seconds,
                log: log_path.to_path_buf(),
            });
        };
        if status.success() {
            return Ok(());
        }
        writeln!(log, "({} exited with {status})", self.kind.name()).ctx("writing", log_path)?;
        Err(ImageError::BuildFailed {
            builder: self.kind.name().to_string(),
            log: log_path.to_path_buf(),
            tail: log_tail(log_path),
        })
    }
}

/// What every step of one build shares: where it works, the registries, the configuration
/// file the builder reads, the log's path and the build's deadline.
#[derive(Clone, Copy)]
struct StepAt<'a> {
    ws: &'a Workspace,
    registries: &'a RegistryConfig,
    conf: &'a Path,
    log_path: &'a Path,
    deadline: Option<(Instant, Duration)>,
}

/// Waits for `child` to exit; `Ok(None)` when `deadline` came first, after killing the child's
/// whole process group (it leads one) and reaping it.
fn wait_until(
    mut child: std::process::Child,
    deadline: Option<Instant>,
) -> std::io::Result<Option<ExitStatus>> {
    let Some(deadline) = deadline else {
        return child.wait().map(Some);
    };
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if Instant::now() >= deadline {
            let group = child.id() as libc::pid_t;
            // SAFETY: kill has no memory preconditions; the group is the child's own.
            unsafe {
                libc::kill(-group, libc::SIGKILL);
            }
            child.wait()?;
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An `OsString` of `s`.
fn os(s: &str) -> OsString {
    OsString::from(s)
}

/// The last lines of the log at `path` that say what went wrong (at most 12).
fn log_tail(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("$ "))
        .collect();
    let start = lines.len().saturating_sub(12);
    lines[start..].join("\n")
}

/// As root, runs the builder in a mount namespace of its own where `var_lib` is `/var/lib`:
/// buildah and podman keep a blob-info cache in `/var/lib/containers/cache` as root and have no
/// setting to move it. Not root (or no namespace to be had): left as it is.
fn hide_var_lib(command: &mut Command, var_lib: &Path) {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::process::CommandExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return;
    }
    let (Ok(source), Ok(target), Ok(root)) = (
        CString::new(var_lib.as_os_str().as_bytes()),
        CString::new("/var/lib"),
        CString::new("/"),
    ) else {
        return;
    };
    // SAFETY: the closure runs in the forked child before exec and calls only async-signal-safe
    // system calls (unshare, mount) on C strings made before the fork. A failure leaves the
    // child in the host's mount namespace, as without this.
    unsafe {
        command.pre_exec(move || {
            if libc::unshare(libc::CLONE_NEWNS) == 0 {
                let private = libc::mount(
                    std::ptr::null(),
                    root.as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                );
                if private == 0 {
                    libc::mount(
                        source.as_ptr(),
                        target.as_ptr(),
                        std::ptr::null(),
                        libc::MS_BIND,
                        std::ptr::null(),
                    );
                }
            }
            Ok(())
        });
    }
}

/// A `registries.conf` (version 2) for buildah and podman from proctor's settings: every
/// insecure registry, and every registry's mirrors (tried in order before it; Docker Hub's
/// under `docker.io`). Short names resolve on Docker Hub, as Docker's do.
pub(crate) fn registries_conf(config: &RegistryConfig) -> String {
    let hub = |r: &str| matches!(r, "docker.io" | "index.docker.io" | DOCKER_HUB);
    let canonical = |r: &str| {
        if hub(r) {
            "docker.io".to_string()
        } else {
            r.to_string()
        }
    };
    let mut registries: BTreeSet<String> = config.insecure.iter().map(|r| canonical(r)).collect();
    registries.extend(config.mirrors.keys().map(|r| canonical(r)));
    let quote = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
    let mut out = String::from(
        "# Written by proctor from its [registries] settings for this build.\n\
         unqualified-search-registries = [\"docker.io\"]\n\
         short-name-mode = \"permissive\"\n",
    );
    for registry in registries {
        let insecure = config.insecure.iter().any(|r| canonical(r) == registry);
        out.push_str(&format!(
            "\n[[registry]]\nprefix = {0}\nlocation = {0}\ninsecure = {insecure}\n",
            quote(&registry)
        ));
        let lookup = if registry == "docker.io" {
            DOCKER_HUB
        } else {
            registry.as_str()
        };
        for mirror in config.mirrors_for(lookup) {
            out.push_str(&format!(
                "\n[[registry.mirror]]\nlocation = {}\ninsecure = {}\n",
                quote(&mirror),
                config.is_insecure(&mirror)
            ));
        }
    }
    out
}

/// The files a build gives its builder, in the build's `tmp/`: the registries configuration,
/// the signature policy and the Dockerfile with its `FROM` images written in full.
struct BuildFiles {
    conf: PathBuf,
    policy: PathBuf,
    dockerfile: PathBuf,
}

impl BuildFiles {
    fn write(job: &Job<'_>, ws: &Workspace, registries: &RegistryConfig) -> Result<BuildFiles> {
        let conf = ws.tmp.join("registries.conf");
        fs::write(&conf, registries_conf(registries)).ctx("writing", &conf)?;
        let policy = ws.tmp.join("policy.json");
        fs::write(
            &policy,
            "{\"default\": [{\"type\": \"insecureAcceptAnything\"}]}\n",
        )
        .ctx("writing", &policy)?;
        // The Dockerfile the builder reads has its FROM images written in full, as Docker
        // resolves them: the system's short-name aliases (Debian's buildah sends `centos` to
        // quay.io) cannot send a short name elsewhere than a pull would.
        let text = fs::read_to_string(job.dockerfile).ctx("reading", job.dockerfile)?;
        let dockerfile = ws.tmp.join("Dockerfile");
        fs::write(&dockerfile, crate::dockerfile::qualify_from(&text))
            .ctx("writing", &dockerfile)?;
        Ok(BuildFiles {
            conf,
            policy,
            dockerfile,
        })
    }
}

/// buildah's and podman's global options: the build's own store, with the vfs driver.
fn store_args(ws: &Workspace) -> Vec<OsString> {
    vec![
        os("--root"),
        ws.storage.clone().into(),
        os("--runroot"),
        ws.run.clone().into(),
        os("--storage-driver"),
        os("vfs"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registries_conf_has_insecure_registries_and_hub_mirrors() {
        let mut config = RegistryConfig::default();
        config.insecure.insert("127.0.0.1:5000".into());
        config
            .mirrors
            .insert("docker.io".into(), vec!["http://127.0.0.1:5000/".into()]);
        let text = registries_conf(&config);
        assert_eq!(
            text,
            "# Written by proctor from its [registries] settings for this build.\n\
             unqualified-search-registries = [\"docker.io\"]\n\
             short-name-mode = \"permissive\"\n\
             \n[[registry]]\nprefix = \"127.0.0.1:5000\"\nlocation = \"127.0.0.1:5000\"\ninsecure = true\n\
             \n[[registry]]\nprefix = \"docker.io\"\nlocation = \"docker.io\"\ninsecure = false\n\
             \n[[registry.mirror]]\nlocation = \"127.0.0.1:5000\"\ninsecure = true\n"
        );
    }

    #[test]
    fn no_builder_on_path_names_the_three() {
        let empty = tempfile::tempdir().expect("tempdir");
        let found = Builder::find_in(empty.path().as_os_str());
        let message = found.expect_err("no builder").to_string();
        for name in ["buildah", "podman", "docker"] {
            assert!(message.contains(name), "{message}");
        }
    }
}
