//! Stage 1, prepare: the trial's folders, its start state's layers and its workspace (an overlay
//! with an upper layer of its own, or a copy with the start state's manifest), the allow-list
//! resolved to real programs, a shim per allowed command, and the calls log listening on its
//! socket.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use proctor_sandbox::diff::Manifest;
use proctor_sandbox::Workspace;

use crate::allow::{resolve, Allowed};
use crate::calls::CallsLog;
use crate::layers::copy_tree;
use crate::trial::context::{RunContext, StartCopies, StartCopy, Trial};
use crate::trial::error::{Stage, TrialError};
use crate::trial::paths::TrialPaths;

/// The trial's scratch folder: created empty, removed when dropped (it is never evidence).
#[derive(Debug)]
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    /// Empties (or creates) `path` for a trial.
    pub fn create(path: &Path) -> std::io::Result<ScratchDir> {
        // Made at once when new (the common case); else emptied first.
        if std::fs::create_dir(path).is_err() {
            let _ = proctor_sandbox::remove_tree(path);
            std::fs::create_dir_all(path)?;
        }
        Ok(ScratchDir(path.to_path_buf()))
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = proctor_sandbox::remove_tree(&self.0);
    }
}

/// The workspace the agent works in.
#[derive(Debug, Clone)]
pub enum TrialWorkspace {
    /// An overlay of the start state's lowers with the trial's own, empty, upper layer.
    Overlay {
        /// The upper layer: after the run it holds exactly the agent's changes.
        upper: PathBuf,
        /// overlayfs' work folder.
        work: PathBuf,
    },
    /// A copy of the start state (the sandbox makes it), diffed afterwards against the start
    /// state's manifest.
    Copy {
        /// The copy: empty until the sandbox fills it, the end state after.
        dir: PathBuf,
        /// The start state's copy and manifest, made once per start state.
        start: Arc<StartCopy>,
    },
}

/// What the prepare stage made.
pub struct Prepared {
    /// Every path of the trial.
    pub paths: TrialPaths,
    /// The start state's layers, top first.
    pub lowers: Vec<PathBuf>,
    /// The BLAKE3 of each file laid in for the variant, by workspace path.
    pub laid_in: BTreeMap<String, String>,
    /// The workspace.
    pub workspace: TrialWorkspace,
    /// The allowed commands and their real programs.
    pub allowed: Vec<Allowed>,
    /// The calls log, listening until the trial has fully stopped.
    pub calls_log: CallsLog,
    /// The scratch folder, removed with this value.
    pub scratch: ScratchDir,
}

impl Prepared {
    /// The workspace as the sandbox mounts it.
    pub fn sandbox_workspace(&self) -> Workspace {
        match &self.workspace {
            TrialWorkspace::Overlay { upper, work } => Workspace::Overlay {
                lowers: self.lowers.clone(),
                upper: upper.clone(),
                work: work.clone(),
            },
            TrialWorkspace::Copy { dir, start } => Workspace::Copy {
                start: start.dir.clone(),
                dir: dir.clone(),
            },
        }
    }
}

/// Prepares the trial: folders, workspace, allow-list, shims, calls log. `t0` is the trial's
/// start, from which the calls log times every call.
pub fn prepare(ctx: &RunContext, trial: &Trial, t0: Instant) -> Result<Prepared, TrialError> {
    let fail = |what: String| TrialError::harness(Stage::Prepare, what);
    let planned = trial.planned;
    let trial_dir = ctx
        .run
        .start_trial_dir(&planned.id)
        .map_err(|e| fail(format!("cannot create the trial folder: {e}")))?;
    let work = ctx.work_root.join(&planned.id);
    let scratch = ScratchDir::create(&work)
        .map_err(|e| fail(format!("cannot create the trial's scratch folder: {e}")))?;
    // The calls log first: its socket (one the run's last trial gave back, or a new one) is
    // what the trial binds. It is timed from `t0` and writes nothing until the first call,
    // into the trial's folder, which `start_trial_dir` has just emptied.
    let calls_path = trial_dir.join(crate::trial::paths::CALLS_LOG);
    let calls_log = ctx
        .calls
        .start(&calls_path, t0)
        .map_err(|e| fail(format!("cannot start the calls log: {e}")))?;
    let socket = calls_log.socket().to_path_buf();
    let image = ctx.image(&planned.task);
    let mut paths = TrialPaths::new(
        ctx.isolation.namespaces,
        &ctx.proctor_exe,
        trial_dir,
        work,
        socket,
    );
    if let Some(img) = image {
        // The run unpacked it before any trial; an image pruned from the cache since then
        // cannot be provided, which is not the agent's doing.
        if !img.rootfs.is_dir() {
            return Err(TrialError::environment(format!(
                "the task's image `{}` ({}) is no longer unpacked at {} (was the image cache pruned during the run?)",
                img.reference,
                img.digest,
                img.rootfs.display()
            )));
        }
        paths = paths.in_workdir(&img.workdir);
        for d in [paths.root_upper(), paths.root_work()] {
            std::fs::create_dir_all(&d).map_err(|e| {
                fail(format!(
                    "cannot create the root's layer {}: {e}",
                    d.display()
                ))
            })?;
        }
    }
    let mut start = ctx
        .layers
        .start_state(ctx.suite, trial.variant, planned, &ctx.plan.fixture_hash)
        .map_err(|e| fail(format!("cannot prepare {e}")))?;
    // What the image has at its working directory lies under the fixture.
    start.dirs.extend(image.and_then(|img| img.workdir_layer()));
    let workspace = workspace(ctx, &paths, &start.dirs)
        .map_err(|e| fail(format!("cannot prepare the workspace: {e}")))?;
    // Inside an image, bare names are found on the image's own PATH.
    let image_path: Option<Vec<PathBuf>> = image.map(|img| {
        img.path()
            .split(':')
            .map(|d| img.rootfs.join(d.trim_start_matches('/')))
            .collect()
    });
    let search_path = image_path.as_ref().unwrap_or(&ctx.search_path);
    let allowed = trial
        .settings
        .allow
        .iter()
        .map(|entry| resolve(entry, &ctx.suite.root, search_path))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| fail(format!("allowed command {e}")))?;
    let proctor = ctx.proctor_command(&planned.task, &paths.proctor.inside);
    write_shims(&paths, &proctor, &allowed)
        .and_then(|_| crate::trial::mcp::write_shims(&paths.shims.host, &proctor, ctx))
        .map_err(|e| fail(format!("cannot write the shims: {e}")))?;
    Ok(Prepared {
        paths,
        lowers: start.dirs,
        laid_in: start.laid_in,
        workspace,
        allowed,
        calls_log,
        scratch,
    })
}

/// The workspace over `lowers`: an overlay with an empty upper layer, or an empty folder for the
/// copy the sandbox makes of the start state's copy (made once per start state, lowest layer
/// first so upper layers overwrite, with its manifest, and shared by the run's trials).
fn workspace(
    ctx: &RunContext,
    paths: &TrialPaths,
    lowers: &[PathBuf],
) -> std::io::Result<TrialWorkspace> {
    if ctx.isolation.overlay {
        // The upper layer's folder receives the agent's changes at the end. overlayfs' work
        // folder is on the trial's disk, with the layer it serves (every trial has a disk), so
        // the one named here is never made.
        let (upper, work) = (paths.upper(), paths.overlay_work());
        std::fs::create_dir_all(&upper)?;
        return Ok(TrialWorkspace::Overlay { upper, work });
    }
    let dir = paths.copy();
    std::fs::create_dir_all(&dir)?;
    let start = start_copy(ctx, lowers)?;
    Ok(TrialWorkspace::Copy { dir, start })
}

/// The copy of the start state over `lowers`, made the first time it is asked for (under the
/// lock: a trial that asks meanwhile waits for it rather than making its own), and kept for
/// the next trials (see [`StartCopies`]).
fn start_copy(ctx: &RunContext, lowers: &[PathBuf]) -> std::io::Result<Arc<StartCopy>> {
    let key = lowers
        .iter()
        .map(|l| l.display().to_string())
        .collect::<Vec<_>>()
        .join("|");
    let mut copies = ctx
        .start_copies
        .lock()
        .map_err(|_| std::io::Error::other("a trial panicked while making a start copy"))?;
    copies.asked += 1;
    let now = copies.asked;
    if let Some((copy, asked)) = copies.kept.get_mut(&key) {
        *asked = now;
        return Ok(copy.clone());
    }
    // Not a trial's folder: a trial's id never starts with a dot.
    let dir = ctx
        .work_root
        .join(".start-copies")
        .join(copies.made.to_string());
    copies.made += 1;
    let _ = proctor_sandbox::remove_tree(&dir);
    let made = lowers
        .iter()
        .rev()
        .try_for_each(|layer| copy_tree(layer, &dir))
        .and_then(|()| Manifest::build(&dir).map_err(std::io::Error::other));
    let manifest = match made {
        Ok(m) => m,
        Err(e) => {
            let _ = proctor_sandbox::remove_tree(&dir);
            return Err(e);
        }
    };
    let copy = Arc::new(StartCopy { dir, manifest });
    copies.kept.insert(key, (copy.clone(), now));
    while copies.kept.len() > StartCopies::KEPT {
        let oldest = copies
            .kept
            .iter()
            .min_by_key(|(_, (_, asked))| *asked)
            .map(|(k, _)| k.clone());
        if let Some(k) = oldest {
            copies.kept.remove(&k);
        }
    }
    Ok(copy)
}

/// The shim of an allowed command: logs the call through proctor (`proctor`: the command line
/// that runs it), then runs the real program.
pub fn shim_script(name: &str, proctor: &[String], real: &Path) -> String {
    let proctor: Vec<String> = proctor.iter().map(|a| format!("'{a}'")).collect();
    format!(
        "#!/bin/sh\n# proctor shim: logs this call, then runs the real `{name}`.\nexec {proctor} __shim '{name}' '{real}' \"$@\"\n",
        proctor = proctor.join(" "),
        real = real.display()
    )
}

/// Writes one executable shim per allowed command into the shims folder.
fn write_shims(paths: &TrialPaths, proctor: &[String], allowed: &[Allowed]) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(&paths.shims.host)?;
    for a in allowed {
        let script = shim_script(&a.name, proctor, &paths.allowed_inside(a));
        let path = paths.shims.host.join(&a.name);
        std::fs::write(&path, script)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_shim_logs_through_proctor_then_runs_the_real_program() {
        let s = shim_script(
            "chat",
            &["/run/proctor/bin/proctor".to_string()],
            Path::new("/run/proctor/allow/chat"),
        );
        assert!(s.starts_with("#!/bin/sh\n"), "{s}");
        assert!(
            s.ends_with(
                "exec '/run/proctor/bin/proctor' __shim 'chat' '/run/proctor/allow/chat' \"$@\"\n"
            ),
            "{s}"
        );
    }

    #[test]
    fn shims_are_written_executable_one_per_allowed_command() {
        let dir = tempfile::tempdir().unwrap();
        let paths = TrialPaths::new(
            false,
            Path::new("/opt/proctor"),
            dir.path().join("trial"),
            dir.path().join("work"),
            dir.path().join("s.sock"),
        );
        let allowed = vec![
            Allowed {
                name: "chat".into(),
                real: PathBuf::from("/usr/bin/chat"),
            },
            Allowed {
                name: "git".into(),
                real: PathBuf::from("/usr/bin/git"),
            },
        ];
        write_shims(&paths, &["/opt/proctor".to_string()], &allowed).unwrap();
        for a in &allowed {
            let shim = paths.shims.host.join(&a.name);
            let mode = std::fs::metadata(&shim).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o755);
            // Without namespaces the shim runs the host program directly.
            let text = std::fs::read_to_string(&shim).unwrap();
            assert!(text.contains(&format!("'{}'", a.real.display())), "{text}");
        }
    }

    #[test]
    fn an_image_gone_from_the_cache_errors_the_trial_as_environment() {
        let (_dir, suite) = crate::trial::testkit::suite();
        let lab = crate::trial::testkit::Lab::new(&suite);
        let mut ctx = lab.context(&suite);
        let gone = tempfile::tempdir().unwrap().path().join("pruned-rootfs");
        ctx.images.insert(
            "t".into(),
            std::sync::Arc::new(crate::image::TrialImage {
                reference: "oci:images/app".into(),
                digest: "sha256:0f".into(),
                rootfs: gone.clone(),
                workdir: PathBuf::from("/app"),
                env: Vec::new(),
                sidecars: Default::default(),
                note: None,
            }),
        );
        let planned = crate::trial::testkit::planned("t", "agent");
        let trial = Trial::resolve(&suite, &planned).unwrap();
        let Err(e) = prepare(&ctx, &trial, Instant::now()) else {
            panic!("prepared a trial whose image is gone");
        };
        assert_eq!(e.kind(), proctor_score::ErrorKind::Environment);
        assert_eq!(e.kind().as_str(), "environment");
        assert!(e.reason().contains("oci:images/app"), "{e}");
        assert!(e.reason().contains(&gone.display().to_string()), "{e}");
    }

    #[test]
    fn in_copy_mode_a_trial_gets_a_copy_its_shims_and_a_listening_calls_log() {
        let (_dir, suite) = crate::trial::testkit::suite();
        let lab = crate::trial::testkit::Lab::new(&suite);
        let ctx = lab.context(&suite);
        let planned = crate::trial::testkit::planned("t", "agent");
        let trial = Trial::resolve(&suite, &planned).unwrap();
        let prepared = prepare(&ctx, &trial, Instant::now()).unwrap();
        let paths = &prepared.paths;
        assert!(paths.trial_dir.is_dir());
        let TrialWorkspace::Copy { dir, start } = &prepared.workspace else {
            panic!("not a copy");
        };
        // The trial's folder is empty until its sandbox copies the start state's copy in.
        assert_eq!(dir, &paths.copy());
        assert_eq!(std::fs::read_dir(dir).unwrap().count(), 0);
        assert_eq!(
            std::fs::read_to_string(start.dir.join("README.md")).unwrap(),
            "a fixture\n"
        );
        assert!(start.manifest.entries.contains_key(Path::new("README.md")));
        assert_eq!(
            crate::trial::checks::EndTree::of(&prepared),
            crate::trial::checks::EndTree::Copy { dir: dir.clone() }
        );
        assert_eq!(
            prepared.sandbox_workspace(),
            Workspace::Copy {
                start: start.dir.clone(),
                dir: dir.clone()
            }
        );
        let names: Vec<&str> = prepared.allowed.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["sh"]);
        assert!(paths.shims.host.join("sh").is_file());
        assert!(std::os::unix::net::UnixStream::connect(&paths.socket.host).is_ok());
        // The start state's copy and manifest are made once and shared by the run's trials.
        let other = crate::trial::testkit::planned("t", "cmd");
        let second = prepare(
            &ctx,
            &Trial::resolve(&suite, &other).unwrap(),
            Instant::now(),
        )
        .unwrap();
        let TrialWorkspace::Copy { start: s2, .. } = &second.workspace else {
            panic!("not a copy");
        };
        assert!(Arc::ptr_eq(start, s2));
        let work = paths.work.clone();
        drop(prepared);
        assert!(!work.exists(), "the scratch goes with the prepared trial");
    }

    #[test]
    fn a_run_keeps_a_bounded_number_of_start_copies_and_each_while_a_trial_holds_it() {
        let (_dir, suite) = crate::trial::testkit::suite();
        let lab = crate::trial::testkit::Lab::new(&suite);
        let ctx = lab.context(&suite);
        let layers = tempfile::tempdir().unwrap();
        let layer = |i: usize| {
            let l = layers.path().join(i.to_string());
            std::fs::create_dir_all(&l).unwrap();
            std::fs::write(l.join("f"), i.to_string()).unwrap();
            l
        };
        let held = start_copy(&ctx, &[layer(0)]).unwrap();
        assert_eq!(std::fs::read_to_string(held.dir.join("f")).unwrap(), "0");
        // Asked again: the same copy.
        assert!(Arc::ptr_eq(&held, &start_copy(&ctx, &[layer(0)]).unwrap()));
        let others: Vec<PathBuf> = (1..=StartCopies::KEPT)
            .map(|i| start_copy(&ctx, &[layer(i)]).unwrap().dir.clone())
            .collect();
        assert_eq!(
            ctx.start_copies.lock().unwrap().kept.len(),
            StartCopies::KEPT
        );
        // The least recently asked for (the first) is given up, but a trial still holds it.
        assert!(held.dir.join("f").is_file());
        let first = held.dir.clone();
        drop(held);
        assert!(!first.exists(), "removed once its last trial is done");
        assert!(others.iter().all(|d| d.join("f").is_file()));
        // Asked for again, it is made again.
        let again = start_copy(&ctx, &[layer(0)]).unwrap();
        assert_eq!(std::fs::read_to_string(again.dir.join("f")).unwrap(), "0");
        assert_ne!(again.dir, first);
    }

    #[test]
    fn a_scratch_folder_starts_empty_and_is_removed_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("t.v.0");
        std::fs::create_dir_all(work.join("left-over")).unwrap();
        let scratch = ScratchDir::create(&work).unwrap();
        assert!(work.is_dir());
        assert!(!work.join("left-over").exists());
        drop(scratch);
        assert!(!work.exists());
    }
}
