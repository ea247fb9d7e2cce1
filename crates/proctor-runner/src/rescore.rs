//! `rescore`: a run's saved end states scored again with the suite's current rules, without
//! running any agent. The checks and the grading are the trial's own stages
//! ([`crate::trial::checks`], [`crate::trial::grade`]); the checks run in fresh sandboxes over the
//! end state rebuilt from fixture + mutation + variant files + the captured changes, with the
//! current holdouts laid in. The faults the model endpoint injected are read again from the
//! trial's wire log, so a trial errored by a fault stays errored with the same kind.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use proctor_score::endstate::ChangeKind;
use proctor_score::{ErrorKind, Outcome};
use proctor_store::RunHandle;
use proctor_suite::Suite;

use crate::image::TrialImage;

use proctor_sandbox::copy::{harmless_mode, Links};

use crate::layers::{copy_tree, LayerCache};
use crate::model::wire_log;
use crate::record::{HarnessNote, TrialRecord};
use crate::results::{for_each_record, ResultsError};
use crate::trial::capture::{
    self, NotFiles, SpecialEntry, SpecialKind, ROOT_CHANGES, SPECIAL_ENTRIES,
};
use crate::trial::checks::{run_checks, task_checks, CheckEnv, EndTree};
use crate::trial::grade::{self, EndStateFiles};
use crate::trial::prepare::ScratchDir;
use crate::trial::setup::SETUP_DIR;

/// One trial whose verdict changed.
#[derive(Debug, Clone)]
pub struct Changed {
    /// The trial.
    pub trial: String,
    /// The outcome before.
    pub before: Outcome,
    /// The outcome now.
    pub after: Outcome,
    /// Why, now.
    pub reason: String,
}

/// What a rescore did.
#[derive(Debug, Default)]
pub struct Rescored {
    /// How many trials were scored again.
    pub trials: usize,
    /// The trials whose outcome changed.
    pub changed: Vec<Changed>,
    /// The trials whose `trial.json` exists but cannot be read (empty or torn): not rescored.
    pub damaged: Vec<proctor_store::DamagedTrial>,
    /// The trials that were read but could not be scored again (their end state cannot be
    /// rebuilt, the suite lost their task): each keeps its old verdict, with a note saying why.
    pub unrescored: Vec<Unrescored>,
}

/// A trial a rescore could not score again, and why.
#[derive(Debug, Clone)]
pub struct Unrescored {
    /// The trial.
    pub trial: String,
    /// Why it could not be rescored.
    pub why: String,
}

/// Where and how a rescore runs the checks.
pub struct CheckSetup<'a> {
    /// The checks' sandbox (`image` is set per trial from `images`).
    pub env: &'a CheckEnv,
    /// The image each task runs in (tasks without one are checked on the host's root).
    pub images: &'a BTreeMap<String, Arc<TrialImage>>,
    /// Overlay workspaces (else copies).
    pub overlay: bool,
    /// The fixture's hash, which the start states are rebuilt from.
    pub fixture_hash: &'a str,
}

/// Scores every finished trial of `run` again, handing each new record to `emit` as soon as it
/// is made (records are read and scored one at a time, never all held at once); returns what
/// changed, and the trials whose `trial.json` could not be read. Stops at the first record that cannot be read or that `emit` refuses.
pub fn rescore(
    suite: &Suite,
    run: &RunHandle,
    store_root: &Path,
    setup: CheckSetup<'_>,
    emit: &mut dyn FnMut(&TrialRecord) -> Result<(), ResultsError>,
) -> Result<Rescored, ResultsError> {
    let rescorer = Rescorer {
        suite,
        run,
        layers: LayerCache::new(store_root.join("cache")),
        work_root: store_root
            .join("work")
            .join(format!("rescore-{}", run.id())),
        env: setup.env,
        images: setup.images,
        overlay: setup.overlay,
        fixture_hash: setup.fixture_hash,
    };
    let mut done = Rescored::default();
    let outcome = for_each_record(run, |mut record| {
        let before = record.outcome.clone();
        if let Some(why) = rescorer.rescore_one(&mut record) {
            done.unrescored.push(Unrescored {
                trial: record.plan.id.clone(),
                why,
            });
        }
        if record.outcome != before {
            done.changed.push(Changed {
                trial: record.plan.id.clone(),
                before,
                after: record.outcome.clone(),
                reason: record.reason.clone(),
            });
        }
        emit(&record)?;
        done.trials += 1;
        Ok(())
    });
    let _ = proctor_sandbox::remove_tree(&rescorer.work_root);
    done.damaged = outcome?;
    Ok(done)
}

/// What rescoring each trial of a run shares.
struct Rescorer<'a> {
    suite: &'a Suite,
    run: &'a RunHandle,
    layers: LayerCache,
    work_root: PathBuf,
    env: &'a CheckEnv,
    images: &'a BTreeMap<String, Arc<TrialImage>>,
    overlay: bool,
    fixture_hash: &'a str,
}

impl Rescorer<'_> {
    /// Scores one record again in place; a record that cannot be rescored keeps its verdict and
    /// gets a note saying why, which is returned.
    fn rescore_one(&self, record: &mut TrialRecord) -> Option<String> {
        // A trial the harness failed before scoring has no end state to score.
        record.verdict.as_ref()?;
        let why = self.try_rescore(record).err()?;
        record.harness_notes.push(HarnessNote::rescore(why.clone()));
        Some(why)
    }

    fn try_rescore(&self, record: &mut TrialRecord) -> Result<(), String> {
        let suite = self.suite;
        // A person's sitting (`human:NAME`) is no variant of the suite's.
        let sitting = crate::sit::variant_of_id(&record.plan.variant);
        let (Some(task), Some(variant)) = (
            suite.task(&record.plan.task),
            suite.variant(&record.plan.variant).or(sitting.as_ref()),
        ) else {
            return Err("the suite no longer has this trial's task or variant".into());
        };
        let trial_dir = self
            .run
            .dir()
            .join(proctor_store::TRIALS_DIR)
            .join(&record.plan.id);
        let changes_dir = trial_dir.join("changes").join("files");
        let special = special_entries(&trial_dir.join("changes"))?;
        let image = self.images.get(&record.plan.task);
        let mut lowers = self
            .layers
            .start_state(suite, variant, &record.plan, self.fixture_hash)
            .map_err(|e| format!("cannot rebuild the start state: {e}"))?
            .dirs;
        // In an image, the workspace's lowest layer is what the image has at its workdir.
        lowers.extend(image.and_then(|img| img.workdir_layer()));
        // A trial whose `setup` built its start state is graded against what setup left (kept
        // in its `setup/changes/`), laid out in one folder as the trial had it.
        let _setup_base = match &record.setup {
            Some(setup) => {
                let (scratch, base) =
                    self.setup_base(&lowers, &trial_dir, &record.plan.id, setup)?;
                lowers = vec![base];
                Some(scratch)
            }
            None => None,
        };
        let settings = suite.settings(task, variant);
        let mut env = CheckEnv {
            image: image.cloned(),
            network: crate::trial::sandboxing::sandbox_network(settings.check_network),
            allowed_hosts: crate::trial::sandboxing::internet_only(
                settings.check_network,
                &settings.allowed_hosts,
            ),
            holdout_at: task.holdout_at().map(Path::to_path_buf),
            binds: suite.binds(task).into_iter().map(PathBuf::from).collect(),
            limits: settings.limits,
            start: lowers.clone(),
            ..self.env.clone()
        };
        let agent_root =
            settings.check_root == proctor_suite::model::CheckRoot::Agent && image.is_some();
        let checks = task_checks(task, settings.validation_timeout);
        let mut end = whole_end_state(suite, record, &trial_dir)?;
        // The checks are watched again, over the same changes as the trial's were; the
        // rebuilt trees hold a regular file for each change kept as one.
        let root_special = match end.root_changes.is_empty() {
            true => BTreeMap::new(),
            false => special_entries(&trial_dir.join(ROOT_CHANGES))?,
        };
        let watch = crate::trial::checks::Watch::of(&end.changes, &end.root_changes)
            .with_kinds([not_files(&special), not_files(&root_special)]);
        env.watch = Some(std::sync::Arc::new(watch));
        if !checks.is_empty() && end.agent.started {
            let work = self.work_root.join(&record.plan.id);
            let _ = proctor_sandbox::remove_tree(&work);
            let kept = Kept {
                files: &changes_dir,
                changes: &end.changes,
                special: &special,
            };
            let tree = end_tree(self.overlay, &lowers, &kept, &work);
            if let Some(image) = image.filter(|_| agent_root) {
                let kept = Kept {
                    files: &trial_dir.join(ROOT_CHANGES).join("files"),
                    changes: &end.root_changes,
                    special: &root_special,
                };
                env.agent_root = Some(root_layer(&kept, image, &work)?);
            }
            let runs = tree.map(|tree| {
                let holdout = suite.holdout_dir(&record.plan.task);
                run_checks(&env, &checks, &tree, holdout.as_deref(), &work)
            });
            let _ = proctor_sandbox::remove_tree(&work);
            for run in runs? {
                end.checks.insert(run.command.clone(), run);
            }
        }
        self.regrade(
            record,
            task,
            settings.undo_window,
            end,
            (changes_dir, lowers),
            image,
        );
        Ok(())
    }

    /// Grades the rebuilt end state (`kept`: the kept files and the start state's layers) and
    /// puts the verdict and the bounded end state into the record.
    fn regrade(
        &self,
        record: &mut TrialRecord,
        task: &proctor_suite::model::Task,
        undo_window: std::time::Duration,
        mut end: proctor_score::endstate::EndState,
        kept: (PathBuf, Vec<PathBuf>),
        image: Option<&Arc<TrialImage>>,
    ) {
        let trial_dir = self
            .run
            .dir()
            .join(proctor_store::TRIALS_DIR)
            .join(&record.plan.id);
        let files = EndStateFiles::new(kept.0, &end.changes, kept.1);
        let faults = grade::faults(&model_faults(&trial_dir), &record.harness_notes);
        let holdout = crate::trial::checks::placed_at(
            crate::trial::checks::check_files(self.suite.holdout_dir(&record.plan.task).as_deref()),
            task.holdout_at(),
        );
        // A file the trial read through a `[diff]` converter is read through the text it kept.
        let texts = crate::trial::textdiff::Texts::kept(&trial_dir, &record.text_diffs);
        let verdict = grade::grade(
            task,
            undo_window,
            &end,
            &texts.over(&files),
            &faults,
            &holdout,
            image.map(|i| &**i),
        );
        record.outcome = verdict.outcome.clone();
        record.reason = verdict.reason.clone();
        record.verdict = Some(verdict);
        end.bound_changes();
        end.bound_root_changes();
        end.bound_services();
        end.bound_observations();
        record.end_state = end;
    }
}

impl Rescorer<'_> {
    /// The start state a trial's setup left: `lowers` laid out with setup's kept changes over
    /// them, in a scratch folder removed with the returned guard.
    fn setup_base(
        &self,
        lowers: &[PathBuf],
        trial_dir: &Path,
        id: &str,
        setup: &crate::record::SetupRecord,
    ) -> Result<(ScratchDir, PathBuf), String> {
        let dir = self.work_root.join(format!("{id}.setup-base"));
        let scratch = ScratchDir::create(&dir)
            .map_err(|e| format!("cannot make the setup's start state: {e}"))?;
        let changes = trial_dir.join(SETUP_DIR).join("changes");
        let special = special_entries(&changes)?;
        let kept = Kept {
            files: &changes.join("files"),
            changes: &setup.changes,
            special: &special,
        };
        rebuild(lowers, &kept, &dir)
            .map_err(|e| format!("cannot rebuild the start state setup left: {e}"))?;
        Ok((scratch, dir))
    }
}

/// What a trial's capture kept of its end state: the change record, the files under
/// `changes/files/`, and the symlinks, FIFOs and sockets of `changes/special.json`.
struct Kept<'a> {
    files: &'a Path,
    changes: &'a [proctor_score::FileChange],
    special: &'a BTreeMap<String, SpecialEntry>,
}

/// A trial's end state to score again: its record's without the check results, with what the
/// record left out (changes past its bound, the root's, bounded services) read back from the
/// trial's own files, so that grading sees all of it again.
fn whole_end_state(
    suite: &Suite,
    record: &TrialRecord,
    trial_dir: &Path,
) -> Result<proctor_score::EndState, String> {
    let mut end = record.end_state.clone();
    end.checks.clear();
    if end.changes_omitted > 0 {
        end.changes = all_changes(&trial_dir.join("changes"))?;
        end.changes_omitted = 0;
    }
    if end.root_changes_omitted > 0 {
        end.root_changes = all_changes(&trial_dir.join(ROOT_CHANGES))?;
        end.root_changes_omitted = 0;
    }
    for (name, service) in end.services.iter_mut().filter(|(_, s)| s.is_bounded()) {
        *service = kept_service(suite, name, &trial_dir.join("services").join(name))?;
    }
    Ok(end)
}

/// A service's whole end state from the files its trial kept in `dir` (`services/NAME/`).
fn kept_service(
    suite: &Suite,
    name: &str,
    dir: &Path,
) -> Result<proctor_score::endstate::ServiceEnd, String> {
    let state_file = suite
        .file
        .services
        .iter()
        .find(|s| s.name.get_ref() == name)
        .ok_or_else(|| format!("the suite no longer has the service `{name}`"))?
        .state
        .as_ref()
        .map(|f| f.get_ref().clone());
    let state = state_file.as_ref().map(|f| dir.join(f));
    let mut service = capture::service_end(state.as_deref());
    service.state_file = state_file;
    service.events = capture::read_events(&dir.join("events.jsonl"))
        .map_err(|e| format!("service `{name}`: {e}"))?;
    Ok(service)
}

/// The whole change list of a trial's `changes/changes.json`.
fn all_changes(changes: &Path) -> Result<Vec<proctor_score::FileChange>, String> {
    let path = changes.join("changes.json");
    // Parsed as it is read: a list of 100 MB of paths (a tree 10,000 levels deep) is not also
    // held as text.
    let file =
        std::fs::File::open(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_reader(std::io::BufReader::with_capacity(1 << 16, file))
        .map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// The entries of `special` as the watch of the checks tells them apart from regular files.
fn not_files(special: &BTreeMap<String, SpecialEntry>) -> NotFiles {
    let mut not_files = NotFiles::default();
    for (path, entry) in special {
        match entry.kind {
            SpecialKind::Symlink => not_files.links.insert(path.clone()),
            SpecialKind::Fifo | SpecialKind::Socket => not_files.others.insert(path.clone()),
        };
    }
    not_files
}

/// The entries of a trial's `changes/special.json` by path (none when it has none).
fn special_entries(changes: &Path) -> Result<BTreeMap<String, SpecialEntry>, String> {
    let path = changes.join(SPECIAL_ENTRIES);
    let text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let list: Vec<SpecialEntry> = serde_json::from_slice(&text)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(list.into_iter().map(|e| (e.path.clone(), e)).collect())
}

/// The end state as the checks read it: the captured changes over the start state. A plain
/// layer cannot express a deletion, a symlink or a FIFO, so a trial with one of those (or any
/// trial, in copy mode) gets a rebuilt copy in `work`.
fn end_tree(
    overlay: bool,
    lowers: &[PathBuf],
    kept: &Kept<'_>,
    work: &Path,
) -> Result<EndTree, String> {
    let deletes = kept.changes.iter().any(|c| c.kind == ChangeKind::Deleted);
    if !overlay || deletes || !kept.special.is_empty() {
        let rebuilt = work.join("rebuilt");
        rebuild(lowers, kept, &rebuilt)
            .map_err(|e| format!("cannot rebuild the end state: {e}"))?;
        return Ok(if overlay {
            EndTree::Overlay {
                top: rebuilt,
                lowers: Vec::new(),
            }
        } else {
            EndTree::Copy { dir: rebuilt }
        });
    }
    let top = if kept.files.is_dir() {
        kept.files.to_path_buf()
    } else {
        // No file content changed, so no `changes/files/` was kept: an empty top layer.
        let empty = work.join("no-changes");
        std::fs::create_dir_all(&empty).map_err(|e| format!("cannot make an empty layer: {e}"))?;
        empty
    };
    Ok(EndTree::Overlay {
        top,
        lowers: lowers.to_vec(),
    })
}

/// The folder of `dest` that holds `rel`, open, and the last name of `rel`: the folders on the
/// way are made where missing (as `over` has each: its mode, and its owner where this user may
/// give it; else of mode 0755), and whatever else is in the way is replaced by a folder; all
/// resolved beneath `dest` through no link ([`proctor_fs::Beneath`]).
fn make_parents(
    dest: &proctor_fs::Beneath,
    rel: &Path,
    over: Option<&Path>,
) -> std::io::Result<(std::os::fd::OwnedFd, std::ffi::CString)> {
    use proctor_fs::at::cstring;
    use proctor_fs::beneath::{make_dir_at, stat_at};
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let Some(over) = over else {
        return dest.parent(rel, 0o755);
    };
    let mut cur = dest.dir(Path::new(""))?;
    let mut below = over.to_path_buf();
    let mut parts: Vec<&std::ffi::OsStr> = rel.iter().collect();
    let Some(last) = parts.pop() else {
        return Err(std::io::Error::other("an empty path has no parent"));
    };
    for part in parts {
        below.push(part);
        let name = cstring(part)?;
        let made = stat_at(cur.as_fd(), &name)?.is_none();
        let next = make_dir_at(cur.as_fd(), &name, 0o755)?;
        if made {
            if let Some(m) = std::fs::symlink_metadata(&below)
                .ok()
                .filter(|m| m.is_dir())
            {
                rustix::fs::fchmod(&next, rustix::fs::Mode::from_raw_mode(m.mode() & 0o7777))?;
                // Only root may give a folder to another owner; otherwise it stays this user's.
                let _ = rustix::fs::fchown(
                    &next,
                    Some(rustix::fs::Uid::from_raw(m.uid())),
                    Some(rustix::fs::Gid::from_raw(m.gid())),
                );
            }
        }
        cur = next;
    }
    Ok((cur, cstring(last)?))
}

/// The layer of what a trial's agent changed outside the workspace, rebuilt in `work` from
/// what its capture `kept` in `root/`: its files, folders, symlinks, FIFOs and sockets, and a
/// whiteout for each entry of the image it deleted, so that over the image it is the agent's
/// root. Owners are not rebuilt (the layer's entries are the rescorer's).
fn root_layer(kept: &Kept, image: &TrialImage, work: &Path) -> Result<PathBuf, String> {
    let layer = work.join("agent-root");
    std::fs::create_dir_all(&layer)
        .and_then(|()| rebuild_layer(&[], kept, &layer, Some(&image.rootfs)))
        .map_err(|e| format!("cannot rebuild what the agent changed outside the workspace: {e}"))?;
    Ok(layer)
}

/// The faults the model endpoint injected, from the wire log kept in the trial's folder (none
/// when there is no readable log: a trial without a model, or one whose log could not be read,
/// which its capture already noted).
fn model_faults(trial_dir: &Path) -> Vec<(ErrorKind, String)> {
    let log = wire_log(trial_dir);
    if !log.is_file() {
        return Vec::new();
    }
    crate::model::read_wire(&log)
        .map(|w| w.faults)
        .unwrap_or_default()
}

/// The end state as a whole tree in `to`: the lowers (lowest first), then the changes: files
/// from `changes/files/` (holes kept, a file kept under several names linked again, no
/// set-user-ID, set-group-ID or sticky bit), symlinks, FIFOs and sockets from their
/// [`SpecialEntry`]. A change whose entry was kept in neither (an entry the capture could not
/// read, a record older than `special.json`) cannot be rebuilt: an error naming it.
fn rebuild(lowers: &[PathBuf], kept: &Kept<'_>, to: &Path) -> std::io::Result<()> {
    rebuild_layer(lowers, kept, to, None)
}

/// [`rebuild`]; with `over` (the tree the result is a layer over, e.g. an image), each deletion
/// is a whiteout and each folder made on the way to a change is made as `over` has it (mode,
/// and owner where this user may give one), so that the layer does not change what it merges.
fn rebuild_layer(
    lowers: &[PathBuf],
    kept: &Kept<'_>,
    to: &Path,
    over: Option<&Path>,
) -> std::io::Result<()> {
    use proctor_fs::beneath::make_dir_at;
    use rustix::fs::Mode;
    use std::os::fd::AsFd;
    for layer in lowers.iter().rev() {
        copy_tree(layer, to)?;
    }
    // Every write below resolves beneath `to` through no link: a symlink the agent left (and
    // the rebuild made again) is never written through by a later change below its name.
    let dest = proctor_fs::Beneath::create(to)?;
    let kept_files = proctor_fs::Beneath::open(kept.files);
    let mut links: Links<PathBuf> = Links::default();
    let mut whiteouts: Vec<PathBuf> = Vec::new();
    let mut dir_times: Vec<(PathBuf, proctor_score::Mtime)> = Vec::new();
    for c in kept.changes {
        let rel = c.exact_path().into_owned();
        if c.kind == ChangeKind::Deleted {
            rebuild_deletion(&dest, &rel, over, &mut whiteouts)?;
            continue;
        }
        let (parent, name) = make_parents(&dest, &rel, over)?;
        let mode = c.mode.unwrap_or(0o644);
        if c.dir {
            let dir = make_dir_at(parent.as_fd(), &name, 0o700)?;
            rustix::fs::fchmod(&dir, Mode::from_raw_mode(harmless_mode(mode) | 0o700))?;
            if let Some(t) = c.mtime {
                dir_times.push((rel, t));
            }
        } else if let Some(special) = kept.special.get(&c.path) {
            rebuild_special(&parent, &name, special, mode)?;
            if let Some(t) = c.mtime {
                proctor_fs::times::set_mtime_at(parent.as_fd(), &name, (t.sec, t.nsec))?;
            }
        } else {
            let target = Target {
                dest: &dest,
                parent: &parent,
                name: &name,
            };
            rebuild_file(c, &rel, kept_files.as_ref().ok(), target, &mut links)?;
        }
    }
    // The folders' times last, deepest first: making what they hold changed them.
    for (rel, t) in dir_times.iter().rev() {
        let dir = dest.dir(rel)?;
        proctor_fs::times::set_mtime(dir.as_fd(), (t.sec, t.nsec))?;
    }
    Ok(())
}

/// A deletion in a rebuilt tree: the entry removed, and over `over` a whiteout made in its place
/// (once below a deleted folder's whiteout: nothing more is needed there, or possible).
fn rebuild_deletion(
    dest: &proctor_fs::Beneath,
    rel: &Path,
    over: Option<&Path>,
    whiteouts: &mut Vec<PathBuf>,
) -> std::io::Result<()> {
    use rustix::fs::{FileType, Mode};
    use std::os::fd::AsFd;
    if let Ok((parent, name)) = rel
        .parent()
        .map_or(dest.dir(Path::new("")), |p| dest.dir(p))
        .and_then(|fd| {
            Ok((
                fd,
                proctor_fs::at::cstring(rel.file_name().unwrap_or_default())?,
            ))
        })
    {
        proctor_fs::beneath::clear_at(parent.as_fd(), &name)?;
    }
    if over.is_some() && !whiteouts.iter().any(|w| rel.starts_with(w)) {
        let (parent, name) = make_parents(dest, rel, over)?;
        rustix::fs::mknodat(&parent, &name, FileType::CharacterDevice, Mode::empty(), 0)?;
        whiteouts.push(rel.to_path_buf());
    }
    Ok(())
}

/// A symlink, FIFO or socket made again as `name` in the open folder `parent`, from its kept
/// [`SpecialEntry`].
fn rebuild_special(
    parent: &std::os::fd::OwnedFd,
    name: &std::ffi::CStr,
    s: &SpecialEntry,
    mode: u32,
) -> std::io::Result<()> {
    use rustix::fs::{FileType, Mode};
    use std::os::fd::AsFd;
    use std::os::unix::ffi::OsStrExt;
    let here = parent.as_fd();
    proctor_fs::beneath::clear_at(here, name)?;
    match s.kind {
        SpecialKind::Symlink => {
            let target = std::ffi::OsStr::from_bytes(s.target.as_deref().unwrap_or_default());
            rustix::fs::symlinkat(target, here, name)?;
        }
        SpecialKind::Fifo => rustix::fs::mknodat(
            here,
            name,
            FileType::Fifo,
            Mode::from_raw_mode(harmless_mode(mode)),
            0,
        )?,
        // A socket has no content: an unbound one is made again, as in the trial (bound
        // through the open folder, so no link on the way is followed).
        SpecialKind::Socket => {
            use std::os::fd::AsRawFd;
            let at = PathBuf::from(format!("/proc/self/fd/{}", parent.as_raw_fd()))
                .join(std::ffi::OsStr::from_bytes(name.to_bytes()));
            std::os::unix::net::UnixListener::bind(&at)?;
        }
    }
    Ok(())
}

/// Where a rebuilt file goes: the rebuilt tree, and the open folder and name in it.
struct Target<'a> {
    dest: &'a proctor_fs::Beneath,
    parent: &'a std::os::fd::OwnedFd,
    name: &'a std::ffi::CStr,
}

/// A changed file made again at `at` from its kept copy (read beneath the capture's folder
/// `kept_files`, its path may be past PATH_MAX); a later name of a file already made is linked
/// to it again.
fn rebuild_file(
    c: &proctor_score::FileChange,
    rel: &Path,
    kept_files: Option<&proctor_fs::Beneath>,
    at: Target<'_>,
    links: &mut Links<PathBuf>,
) -> std::io::Result<()> {
    use rustix::fs::{AtFlags, Mode, OFlags};
    use std::os::fd::AsFd;
    let input = kept_files.and_then(|files| files.open_file(rel).ok());
    let meta = match input.as_ref().map(std::fs::File::metadata) {
        Some(Ok(m)) if m.is_file() => m,
        _ => {
            return Err(std::io::Error::other(format!(
                "{}: the capture kept no content for this {} (a symlink, FIFO or entry it could not read)",
                c.path,
                if c.kind == ChangeKind::ModeChanged { "re-moded entry" } else { "entry" }
            )))
        }
    };
    let here = at.parent.as_fd();
    proctor_fs::beneath::clear_at(here, at.name)?;
    if let Some(first) = links.copied(&meta) {
        let (fparent, fname) = at.dest.parent(first, 0o755)?;
        rustix::fs::linkat(&fparent, &fname, here, at.name, AtFlags::empty())?;
        return Ok(());
    }
    let Some(input) = input else {
        return Ok(());
    };
    // Readable and writable by this user, like the kept copy (the checks copy it again).
    let output = std::fs::File::from(rustix::fs::openat(
        here,
        at.name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?);
    proctor_sandbox::copy::copy_data(
        &input,
        &output,
        proctor_sandbox::copy::CopyOptions::default(),
    )?;
    let mode = c.mode.unwrap_or(0o644);
    rustix::fs::fchmod(&output, Mode::from_raw_mode(harmless_mode(mode | 0o600)))?;
    // The agent's time, else the kept copy's (which has it, in a capture that kept it).
    let mtime = match c.mtime {
        Some(t) => (t.sec, t.nsec),
        None => proctor_fs::times::mtime_of(&rustix::fs::fstat(&input)?),
    };
    proctor_fs::times::set_mtime(output.as_fd(), mtime)?;
    links.remember(&meta, rel.to_path_buf());
    Ok(())
}

#[cfg(test)]
mod tests {
    use proctor_score::FileChange;

    use super::*;

    fn change(path: &str, kind: ChangeKind) -> FileChange {
        FileChange::named(path, kind)
    }

    /// A start state (`fixture/`: a.txt, b.txt) and captured changes (a.txt changed, b.txt
    /// deleted, c.txt added).
    fn layers(dir: &Path) -> (Vec<PathBuf>, PathBuf, Vec<FileChange>) {
        let fixture = dir.join("fixture");
        std::fs::create_dir_all(&fixture).unwrap();
        std::fs::write(fixture.join("a.txt"), "a0").unwrap();
        std::fs::write(fixture.join("b.txt"), "b0").unwrap();
        let files = dir.join("changes/files");
        std::fs::create_dir_all(&files).unwrap();
        std::fs::write(files.join("a.txt"), "a1").unwrap();
        std::fs::write(files.join("c.txt"), "c1").unwrap();
        let changes = vec![
            change("a.txt", ChangeKind::Changed),
            change("b.txt", ChangeKind::Deleted),
            change("c.txt", ChangeKind::Added),
        ];
        (vec![fixture], files, changes)
    }

    /// The agent replaced the folder `d` by a link to a folder of the host: the capture records
    /// `d` as a link and `d/x` as deleted. Rebuilding makes the link again, and the deletion
    /// below it removes nothing through it.
    #[test]
    fn a_rebuild_never_writes_through_a_link_the_agent_left() {
        let dir = tempfile::tempdir().unwrap();
        let fixture = dir.path().join("fixture");
        std::fs::create_dir_all(fixture.join("d")).unwrap();
        std::fs::write(fixture.join("d/x"), "x0").unwrap();
        let outside = dir.path().join("host");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("x"), "the host's").unwrap();
        std::fs::write(outside.join("y"), "the host's").unwrap();
        let files = dir.path().join("changes/files");
        std::fs::create_dir_all(&files).unwrap();
        std::fs::write(files.join("y"), "agent").unwrap();
        let mut link = change("d", ChangeKind::Changed);
        link.dir = false;
        let changes = vec![
            link,
            change("d/x", ChangeKind::Deleted),
            // A (forged) record of a file below the link: laid in a folder of the rebuild's own.
            change("d/y", ChangeKind::Added),
        ];
        std::fs::create_dir_all(files.join("d")).unwrap();
        std::fs::write(files.join("d/y"), "agent").unwrap();
        let mut special = BTreeMap::new();
        special.insert(
            "d".to_string(),
            SpecialEntry {
                path: "d".into(),
                kind: SpecialKind::Symlink,
                target: Some(outside.display().to_string().into_bytes()),
            },
        );
        let k = Kept {
            files: &files,
            changes: &changes,
            special: &special,
        };
        let to = dir.path().join("rebuilt");
        rebuild(std::slice::from_ref(&fixture), &k, &to).unwrap();
        assert_eq!(std::fs::read(outside.join("x")).unwrap(), b"the host's");
        assert_eq!(std::fs::read(outside.join("y")).unwrap(), b"the host's");
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 2);
        assert_eq!(std::fs::read(to.join("d/y")).unwrap(), b"agent");
    }

    #[test]
    fn with_overlays_the_captured_changes_are_the_top_layer_over_the_start_state() {
        let dir = tempfile::tempdir().unwrap();
        let (lowers, files, changes) = layers(dir.path());
        let kept: Vec<FileChange> = changes
            .into_iter()
            .filter(|c| c.kind != ChangeKind::Deleted)
            .collect();
        let none = BTreeMap::new();
        let k = Kept {
            files: &files,
            changes: &kept,
            special: &none,
        };
        let tree = end_tree(true, &lowers, &k, &dir.path().join("w")).unwrap();
        assert_eq!(tree, EndTree::Overlay { top: files, lowers });
    }

    #[test]
    fn changes_without_content_get_an_empty_top_layer() {
        let dir = tempfile::tempdir().unwrap();
        let (lowers, _, _) = layers(dir.path());
        let work = dir.path().join("w");
        let none = BTreeMap::new();
        let files = dir.path().join("none");
        let k = Kept {
            files: &files,
            changes: &[],
            special: &none,
        };
        let tree = end_tree(true, &lowers, &k, &work).unwrap();
        let EndTree::Overlay { top, .. } = tree else {
            panic!("{tree:?}")
        };
        assert_eq!(top, work.join("no-changes"));
        assert!(top.is_dir());
    }

    #[test]
    fn a_deletion_or_copy_mode_rebuilds_the_whole_end_state() {
        let dir = tempfile::tempdir().unwrap();
        let (lowers, files, changes) = layers(dir.path());
        for overlay in [true, false] {
            let work = dir.path().join(format!("w-{overlay}"));
            let none = BTreeMap::new();
            let k = Kept {
                files: &files,
                changes: &changes,
                special: &none,
            };
            let tree = end_tree(overlay, &lowers, &k, &work).unwrap();
            let rebuilt = work.join("rebuilt");
            let expected = if overlay {
                EndTree::Overlay {
                    top: rebuilt.clone(),
                    lowers: Vec::new(),
                }
            } else {
                EndTree::Copy {
                    dir: rebuilt.clone(),
                }
            };
            assert_eq!(tree, expected);
            let read = |f: &str| std::fs::read_to_string(rebuilt.join(f)).ok();
            assert_eq!(read("a.txt").as_deref(), Some("a1"));
            assert_eq!(read("b.txt"), None, "deleted");
            assert_eq!(read("c.txt").as_deref(), Some("c1"));
        }
    }

    #[test]
    fn a_symlink_a_fifo_and_hard_links_are_rebuilt_without_special_bits() {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let dir = tempfile::tempdir().unwrap();
        let (lowers, files, mut changes) = layers(dir.path());
        std::fs::write(files.join("tool"), "#!/bin/sh\n").unwrap();
        std::fs::hard_link(files.join("tool"), files.join("tool2")).unwrap();
        for (path, mode) in [("tool", 0o104755), ("tool2", 0o104755)] {
            let mut c = change(path, ChangeKind::Added);
            c.mode = Some(mode);
            changes.push(c);
        }
        changes.push(change("link", ChangeKind::Added));
        changes.push(change("pipe", ChangeKind::Added));
        let special: BTreeMap<String, SpecialEntry> = [
            SpecialEntry {
                path: "link".into(),
                kind: SpecialKind::Symlink,
                target: Some(b"a.txt".to_vec()),
            },
            SpecialEntry {
                path: "pipe".into(),
                kind: SpecialKind::Fifo,
                target: None,
            },
        ]
        .into_iter()
        .map(|e| (e.path.clone(), e))
        .collect();
        let k = Kept {
            files: &files,
            changes: &changes,
            special: &special,
        };
        let work = dir.path().join("w");
        let tree = end_tree(true, &lowers, &k, &work).unwrap();
        let rebuilt = work.join("rebuilt");
        assert_eq!(
            tree,
            EndTree::Overlay {
                top: rebuilt.clone(),
                lowers: Vec::new()
            },
            "a symlink needs a rebuild"
        );
        assert_eq!(
            std::fs::read_link(rebuilt.join("link")).unwrap(),
            Path::new("a.txt")
        );
        assert_eq!(std::fs::read_to_string(rebuilt.join("link")).unwrap(), "a1");
        assert!(std::fs::symlink_metadata(rebuilt.join("pipe"))
            .unwrap()
            .file_type()
            .is_fifo());
        let tool = std::fs::metadata(rebuilt.join("tool")).unwrap();
        assert_eq!(tool.mode() & 0o7777, 0o755, "no set-user-ID bit");
        assert_eq!(
            tool.ino(),
            std::fs::metadata(rebuilt.join("tool2")).unwrap().ino()
        );
        assert!(!rebuilt.join("b.txt").exists());

        // An entry kept in neither place cannot be rebuilt, and the error names it.
        let none = BTreeMap::new();
        let k = Kept {
            files: &files,
            changes: &changes,
            special: &none,
        };
        let e = end_tree(true, &lowers, &k, &dir.path().join("w2")).unwrap_err();
        assert!(e.contains("link: the capture kept no content"), "{e}");
    }

    #[test]
    fn injected_faults_are_read_again_from_the_wire_log() {
        let dir = tempfile::tempdir().unwrap();
        assert!(model_faults(dir.path()).is_empty(), "no model, no faults");
        let log = wire_log(dir.path());
        std::fs::create_dir_all(log.parent().unwrap()).unwrap();
        let line = |kind, fault| proctor_mock_model::wire_log::WireLine {
            seq: 1,
            at_ms: 0,
            method: "POST".into(),
            path: "/v1/messages".into(),
            query: String::new(),
            headers: Default::default(),
            api: Some("anthropic-messages".into()),
            kind,
            turn: None,
            replay: false,
            side_reason: None,
            stream: false,
            request: serde_json::Value::Null,
            status: 429,
            response: serde_json::Value::Null,
            usage: None,
            error: None,
            fault,
            route: None,
            key: None,
        };
        use proctor_mock_model::{wire_log::WireKind, FaultKind};
        let lines = [
            line(WireKind::Main, None),
            line(WireKind::Fault, Some(FaultKind::RateLimit)),
        ]
        .map(|l| serde_json::to_string(&l).unwrap() + "\n");
        std::fs::write(&log, lines.concat()).unwrap();
        let faults = model_faults(dir.path());
        assert_eq!(faults.len(), 1);
        assert_eq!(faults[0].0, ErrorKind::RateLimit);
        assert!(faults[0].1.contains("/v1/messages"), "{}", faults[0].1);
        // An unreadable log was noted when the trial ran; it adds no fault here.
        std::fs::write(&log, "not json\n").unwrap();
        assert!(model_faults(dir.path()).is_empty());
    }
}
