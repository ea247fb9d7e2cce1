//! Control groups that hold each trial to its `memory_mb` and `processes` limits.
//!
//! A run makes one folder of its own (`proctor-PID-NS`) under proctor's control group, in the
//! unified (v2) hierarchy when it offers the `memory` and `pids` controllers, else in the v1
//! `memory` and `pids` hierarchies; each trial gets a child folder there with its limits (a slot
//! an earlier trial of the run left empty, or a new one), and the trial's first process joins it
//! before anything of the trial runs (see `proctor_sandbox::SandboxLimits::cgroups`). That needs write access to proctor's control
//! group: root, or a subtree delegated to the user. Where there is none, the run goes on and each
//! trial records the limits as not enforced, with the reason.

use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The hierarchies a run's control groups live in.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Layout {
    /// The unified hierarchy: one folder holds both controllers.
    V2 { run: PathBuf },
    /// The v1 `memory` and `pids` hierarchies: a folder in each.
    V1 { memory: PathBuf, pids: PathBuf },
}

/// A run's control groups: where its trials' folders go.
///
/// A trial's group is a slot reused by the next trial once every process of it is gone (making
/// and removing a group costs the kernel a folder of control files each time): the limits are
/// written again for each trial, and a trial is judged by what the group's counters gained
/// while it ran, never by what an earlier trial left in them.
#[derive(Debug)]
pub struct RunCgroups {
    layout: Layout,
    /// Slots whose processes are all gone, ready for the next trial.
    free: Mutex<Vec<Slot>>,
    /// Slots a process of an ended trial was still leaving: free again once empty.
    draining: Mutex<Vec<Slot>>,
    /// The number of the next slot made.
    made: AtomicU64,
}

/// A slot: the folders of one trial's group (one per hierarchy: v1's memory folder first), and
/// the limits last written into them.
#[derive(Debug)]
struct Slot {
    dirs: Vec<PathBuf>,
    /// (memory bytes, processes) as last written; nothing inside a trial can change them (the
    /// trial sees no control-group file system).
    limits: Option<(u64, u64)>,
    /// The control files read for every trial, each opened once for the slot's life.
    files: SlotFiles,
}

impl Slot {
    fn new(dirs: Vec<PathBuf>) -> Slot {
        Slot {
            dirs,
            limits: None,
            files: SlotFiles::default(),
        }
    }
}

/// The control files a slot's every trial reads (and, for v1's peaks, resets), kept open: each
/// read is one `pread` from the start, for which the kernel writes the file's content anew
/// (true of these, each one value or a few counters written by its show function).
#[derive(Debug, Default)]
struct SlotFiles {
    /// v1: `memory.max_usage_in_bytes`, `memory.memsw.max_usage_in_bytes`.
    peaks: [Kept; 2],
    /// v1: `memory.oom_control`; v2: `memory.events`.
    memory_events: Kept,
    /// `pids.events`.
    pids_events: Kept,
    /// `pids.current`: the slot's processes, counted live. (Not `cgroup.procs`, whose v1 list
    /// an open file keeps from its first read.)
    pids_current: Kept,
}

/// One control file, opened on its first use that can and kept.
#[derive(Debug, Default)]
struct Kept(OnceLock<File>);

impl Kept {
    /// The file's content now; `None` where it cannot be opened or read.
    fn read(&self, path: impl FnOnce() -> PathBuf) -> Option<String> {
        let file = self.opened(path)?;
        let mut out = Vec::with_capacity(256);
        let mut buf = [0u8; 512];
        loop {
            let n = file.read_at(&mut buf, out.len() as u64).ok()?;
            if n == 0 {
                return String::from_utf8(out).ok();
            }
            out.extend_from_slice(&buf[..n]);
        }
    }

    /// Writes `value` at the file's start.
    fn write(&self, path: impl FnOnce() -> PathBuf, value: &[u8]) {
        if let Some(file) = self.opened(path) {
            let _ = file.write_at(value, 0);
        }
    }

    fn opened(&self, path: impl FnOnce() -> PathBuf) -> Option<&File> {
        if let Some(file) = self.0.get() {
            return Some(file);
        }
        let path = path();
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .or_else(|_| File::open(&path))
            .ok()?;
        Some(self.0.get_or_init(|| file))
    }
}

/// One trial's control group(s), with its limits set.
#[derive(Debug)]
pub struct TrialCgroup {
    /// The folders the trial joins (one per hierarchy).
    slot: Slot,
    v2: bool,
    /// The counters as they stood when the trial got the group.
    start: Counters,
}

/// The counters that say a limit was reached: cumulative over a group's life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counters {
    /// Processes of the group the kernel killed for memory, by any OOM killer: the group's
    /// own at its limit, or the machine's when the host ran out.
    oom_kill: u64,
    /// Times the group's memory reached its own limit (v2: `memory.events` `oom`); v1 keeps
    /// no such count (its `failcnt` stays 0 on recent kernels), so there it is 1 when the
    /// group's peak (`max_usage_in_bytes`, reset when a trial gets the group) reached the
    /// limit, else 0.
    at_limit: u64,
    /// Forks and clones refused at the process limit.
    pids_max: u64,
}

/// Which of a trial's limits the kernel enforced and stopped it at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reached {
    /// The memory limit: the kernel killed a process of the trial for it.
    Memory,
    /// The process limit: a fork or clone was refused.
    Processes,
}

impl Reached {
    /// The limit recorded as `limit_reached`.
    pub fn limit(self) -> proctor_records::Limit {
        match self {
            Reached::Memory => proctor_records::Limit::Memory,
            Reached::Processes => proctor_records::Limit::Processes,
        }
    }
}

impl RunCgroups {
    /// Makes the run's folder, or says why control groups cannot hold this run's trials.
    pub fn create() -> Result<RunCgroups, String> {
        let own = std::fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
        let mounts = std::fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
        let pid_ns = own_pid_namespace();
        let name = run_folder_name(std::process::id(), pid_ns);
        let v2_error = match v2_base(&own, &mounts) {
            Some(base) => {
                sweep_left_behind(&base, pid_ns);
                match make_v2(&base, &name) {
                    Ok(run) => return Ok(RunCgroups::with(Layout::V2 { run })),
                    Err(e) => Some(e),
                }
            }
            None => None,
        };
        let (Some(memory), Some(pids)) = (
            v1_base(&own, &mounts, "memory"),
            v1_base(&own, &mounts, "pids"),
        ) else {
            return Err(v2_error.unwrap_or_else(|| {
                "this machine offers neither cgroup v2 with the memory and pids controllers nor the v1 memory and pids hierarchies".to_string()
            }));
        };
        let make = |base: &Path| -> Result<PathBuf, String> {
            sweep_left_behind(base, pid_ns);
            let dir = base.join(&name);
            mkdir(&dir)?;
            Ok(dir)
        };
        Ok(RunCgroups::with(Layout::V1 {
            memory: make(&memory)?,
            pids: make(&pids)?,
        }))
    }

    fn with(layout: Layout) -> RunCgroups {
        RunCgroups {
            layout,
            free: Mutex::new(Vec::new()),
            draining: Mutex::new(Vec::new()),
            made: AtomicU64::new(0),
        }
    }

    /// A control group for one trial, with its limits: a free slot, or a new one.
    pub fn trial(&self, memory_bytes: u64, processes: u64) -> Result<TrialCgroup, String> {
        self.collect_drained();
        let v2 = matches!(self.layout, Layout::V2 { .. });
        let limits = (memory_bytes, processes);
        loop {
            let free = lock(&self.free).pop();
            let Some(slot) = free else { break };
            // A slot holding these limits already keeps them; one that no longer takes them
            // (v1 refuses a memory limit below what the group still holds) is given up for a
            // new one.
            if slot.limits == Some(limits) || set_limits(&slot.dirs, v2, limits).is_ok() {
                return Ok(TrialCgroup::new(slot, v2, limits));
            }
            remove_dirs(&slot.dirs);
        }
        let slot = self.make_slot()?;
        if let Err(e) = set_limits(&slot.dirs, v2, limits) {
            remove_dirs(&slot.dirs);
            return Err(e);
        }
        Ok(TrialCgroup::new(slot, v2, limits))
    }

    /// Gives a trial's control group back once its processes are gone (or later, if they are
    /// still leaving).
    pub fn release(&self, cg: TrialCgroup) {
        if cg.slot.is_empty() {
            lock(&self.free).push(cg.slot);
        } else {
            lock(&self.draining).push(cg.slot);
        }
    }

    /// Removes the run's folders (waiting a little for trials still leaving).
    pub fn remove(&self) {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            self.collect_drained();
            if lock(&self.draining).is_empty() || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        for slot in lock(&self.free)
            .drain(..)
            .chain(lock(&self.draining).drain(..))
        {
            remove_dirs(&slot.dirs);
        }
        let dirs = match &self.layout {
            Layout::V2 { run } => vec![run.clone()],
            Layout::V1 { memory, pids } => vec![memory.clone(), pids.clone()],
        };
        for d in dirs {
            // A trial whose launch failed after its group was made never gave it back.
            remove_run_dir(&d);
        }
    }

    /// Which hierarchy holds the trials, for records: `cgroup v2` or `cgroup v1`.
    pub fn kind(&self) -> &'static str {
        match self.layout {
            Layout::V2 { .. } => "cgroup v2",
            Layout::V1 { .. } => "cgroup v1",
        }
    }

    /// Makes a new slot: a folder in each hierarchy, no limits written yet.
    fn make_slot(&self) -> Result<Slot, String> {
        let name = format!("slot-{}", self.made.fetch_add(1, Ordering::Relaxed));
        let dirs = match &self.layout {
            Layout::V2 { run } => vec![run.join(&name)],
            Layout::V1 { memory, pids } => vec![memory.join(&name), pids.join(&name)],
        };
        for (i, d) in dirs.iter().enumerate() {
            if let Err(e) = mkdir(d) {
                remove_dirs(&dirs[..i]);
                return Err(e);
            }
        }
        Ok(Slot::new(dirs))
    }

    /// Moves the draining slots whose last process has gone to the free ones.
    fn collect_drained(&self) {
        let mut draining = lock(&self.draining);
        if draining.is_empty() {
            return;
        }
        let (empty, busy): (Vec<_>, Vec<_>) = draining.drain(..).partition(Slot::is_empty);
        *draining = busy;
        drop(draining);
        lock(&self.free).extend(empty);
    }
}

impl TrialCgroup {
    /// Hands `slot`, which holds `limits` now, to a trial, its counters read as they start.
    fn new(mut slot: Slot, v2: bool, limits: (u64, u64)) -> TrialCgroup {
        slot.limits = Some(limits);
        if let (false, Some((memory, _))) = (v2, controllers(&slot.dirs)) {
            // v1's peak, which says whether the group met its limit, is the trial's own from
            // here (writing resets it to the usage now).
            for (kept, file) in slot.files.peaks.iter().zip(V1_PEAKS) {
                kept.write(|| memory.join(file), b"0");
            }
        }
        let start = slot.counters(v2, limits.0);
        TrialCgroup { slot, v2, start }
    }

    /// The group's counters now.
    fn now(&self) -> Counters {
        let memory = self.slot.limits.map_or(u64::MAX, |l| l.0);
        self.slot.counters(self.v2, memory)
    }

    /// The folders the trial's first process joins.
    pub fn dirs(&self) -> Vec<PathBuf> {
        self.slot.dirs.clone()
    }

    /// The limit the kernel stopped the trial at, if any (memory first): what the counters
    /// gained since the trial got the group. Memory is reached when the group met its own limit
    /// (and, on v2, when it ran out there); a process the machine's OOM killer took while the
    /// group stayed under its limit is [`TrialCgroup::host_oom`], not this.
    pub fn reached(&self) -> Option<Reached> {
        let now = self.now();
        let (gained_kill, gained_limit) = (
            now.oom_kill > self.start.oom_kill,
            now.at_limit > self.start.at_limit,
        );
        // v2 counts an OOM at the group's limit by itself; v1 only with a kill.
        let memory = if self.v2 {
            gained_limit
        } else {
            gained_kill && gained_limit
        };
        if memory {
            Some(Reached::Memory)
        } else if now.pids_max > self.start.pids_max {
            Some(Reached::Processes)
        } else {
            None
        }
    }

    /// Whether an OOM killer took a process of the group while it stayed under its own memory
    /// limit: the machine ran out (a cause outside the trial's limits), not the trial.
    pub fn host_oom(&self) -> bool {
        let now = self.now();
        now.oom_kill > self.start.oom_kill && now.at_limit == self.start.at_limit
    }
}

/// The folder of a slot that holds the memory controller's files, and the one that holds the
/// pids controller's: v2's one folder for both, v1's memory folder then its pids folder.
fn controllers(dirs: &[PathBuf]) -> Option<(&Path, &Path)> {
    match dirs {
        [both] => Some((both, both)),
        [memory, pids] => Some((memory, pids)),
        _ => None,
    }
}

/// Writes a trial's (memory bytes, processes) limits into a slot's folders.
fn set_limits(
    dirs: &[PathBuf],
    v2: bool,
    (memory_bytes, processes): (u64, u64),
) -> Result<(), String> {
    let (mem, pids) = (memory_bytes.to_string(), processes.to_string());
    let (memory, pid_dir) =
        controllers(dirs).ok_or_else(|| format!("a slot of {} folders", dirs.len()))?;
    if v2 {
        write(&memory.join("memory.max"), &mem)?;
        // Swap would let a trial hold more than its limit; absent without swap support.
        let _ = fs::write(memory.join("memory.swap.max"), "0");
    } else {
        // Memory plus swap, where the kernel counts it, held to the same limit. It may never
        // be below the memory limit, so it is raised before and lowered after.
        let memsw = memory.join("memory.memsw.limit_in_bytes");
        let _ = fs::write(&memsw, "-1");
        write(&memory.join("memory.limit_in_bytes"), &mem)?;
        let _ = fs::write(&memsw, &mem);
    }
    write(&pid_dir.join("pids.max"), &pids)
}

/// v1's peak files, reset when a trial gets the slot.
const V1_PEAKS: [&str; 2] = [
    "memory.max_usage_in_bytes",
    "memory.memsw.max_usage_in_bytes",
];

impl Slot {
    /// The slot's counters now, its memory limit being `memory_limit` bytes: each read from
    /// the one file that holds it.
    fn counters(&self, v2: bool, memory_limit: u64) -> Counters {
        let Some((memory, pids)) = controllers(&self.dirs) else {
            return Counters::default();
        };
        let count = |text: Option<String>, keys: &[&str]| -> u64 {
            text.map(|text| {
                text.lines()
                    .filter_map(|l| l.split_once(' '))
                    .filter(|(k, _)| keys.contains(k))
                    .filter_map(|(_, v)| v.trim().parse::<u64>().ok())
                    .sum()
            })
            .unwrap_or(0)
        };
        let number =
            |text: Option<String>| -> u64 { text.and_then(|t| t.trim().parse().ok()).unwrap_or(0) };
        let files = &self.files;
        let (oom_kill, at_limit) = if v2 {
            let events = files.memory_events.read(|| memory.join("memory.events"));
            (
                count(events.clone(), &["oom_kill"]),
                count(events, &["oom"]),
            )
        } else {
            // The peak within a page or so of the limit: the group met it.
            let [peak, peak_memsw] = &files.peaks;
            let peak = number(peak.read(|| memory.join(V1_PEAKS[0])))
                .max(number(peak_memsw.read(|| memory.join(V1_PEAKS[1]))));
            let oom_control = files
                .memory_events
                .read(|| memory.join("memory.oom_control"));
            (
                count(oom_control, &["oom_kill"]),
                u64::from(peak.saturating_add(V1_PEAK_SLACK) >= memory_limit),
            )
        };
        let pids_events = files.pids_events.read(|| pids.join("pids.events"));
        Counters {
            oom_kill,
            at_limit,
            pids_max: count(pids_events, &["max"]),
        }
    }

    /// Whether no process is left in the slot: none counted by its pids controller, which
    /// every process of a trial is in (T joins each of the slot's folders before it forks, and
    /// a process leaves the count once reaped).
    fn is_empty(&self) -> bool {
        let Some((_, pids)) = controllers(&self.dirs) else {
            return false;
        };
        self.files
            .pids_current
            .read(|| pids.join("pids.current"))
            .is_some_and(|n| n.trim() == "0")
    }
}

/// How far below its limit a v1 group's peak may stop and still count as having met it: the
/// kernel charges in pages and may stop a charge a few short of the limit.
const V1_PEAK_SLACK: u64 = 1 << 20;

/// Removes a run's folder and its slots (those that can be: a group with a process left
/// stays, and so does the run's folder above it).
fn remove_run_dir(dir: &Path) {
    for child in fs::read_dir(dir).into_iter().flatten().flatten() {
        if child.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = fs::remove_dir(child.path());
        }
    }
    let _ = fs::remove_dir(dir);
}

/// The inode of proctor's PID namespace, which names it.
fn own_pid_namespace() -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    fs::metadata("/proc/self/ns/pid").ok().map(|m| m.ino())
}

/// The name of a run's folder: `proctor-PID-NS`, NS being the inode of the run's PID namespace
/// (`proctor-PID` where it cannot be read), so that a PID is only ever looked up in its own
/// namespace.
fn run_folder_name(pid: u32, pid_ns: Option<u64>) -> String {
    match pid_ns {
        Some(ns) => format!("proctor-{pid}-{ns}"),
        None => format!("proctor-{pid}"),
    }
}

/// Removes from `base` the folders of runs that are gone: a run killed outright (SIGKILL, the
/// machine's OOM killer, a crash) never removes its own, and each left behind would hold a
/// control group of the kernel's for good (the memory controller has 65,535 ids in all).
/// A folder `proctor-PID-NS` of this PID namespace (`pid_ns`) is a gone run's when no process
/// has that PID; its groups are removed only where no process is left in them (the kernel
/// refuses the others). A folder of another PID namespace, or of a version of proctor that
/// named folders `proctor-PID`, is left alone: there a PID says nothing.
fn sweep_left_behind(base: &Path, pid_ns: Option<u64>) {
    let Some(pid_ns) = pid_ns else {
        return;
    };
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some((pid, ns)) = name
            .to_str()
            .and_then(|n| n.strip_prefix("proctor-"))
            .and_then(|n| n.split_once('-'))
            .and_then(|(pid, ns)| Some((pid.parse::<i32>().ok()?, ns.parse::<u64>().ok()?)))
        else {
            continue;
        };
        if ns == pid_ns && crate::scratch::process_is_gone(pid) {
            remove_run_dir(&entry.path());
        }
    }
}

/// Removes a slot's folders (those that can be: a group with a process left stays).
fn remove_dirs(dirs: &[PathBuf]) {
    for d in dirs {
        let _ = fs::remove_dir(d);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// proctor's own folder in the unified hierarchy, when it offers both controllers.
fn v2_base(own: &str, mounts: &str) -> Option<PathBuf> {
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let mount = mount_point(mounts, |fstype, _| fstype == "cgroup2")?;
    let base = mount.join(path.trim_start_matches('/'));
    let controllers = fs::read_to_string(base.join("cgroup.controllers")).ok()?;
    let has = |c: &str| controllers.split_whitespace().any(|x| x == c);
    (has("memory") && has("pids")).then_some(base)
}

/// Makes `base/name` with both controllers for its children. Where `base` is not the root it
/// holds processes (proctor among them) and may not hand controllers down; proctor then moves
/// itself into a leaf `base/proctor-main` first, when it is the only process there.
fn make_v2(base: &Path, name: &str) -> Result<PathBuf, String> {
    let enable = |dir: &Path| fs::write(dir.join("cgroup.subtree_control"), "+memory +pids");
    if enable(base).is_err() {
        let procs = fs::read_to_string(base.join("cgroup.procs")).unwrap_or_default();
        let me = std::process::id().to_string();
        if procs.split_whitespace().any(|p| p != me) {
            return Err(format!(
                "the control group {} holds other processes, so proctor cannot hand the memory and pids controllers down from it; run proctor in a control group of its own with them delegated",
                base.display()
            ));
        }
        let leaf = base.join("proctor-main");
        if !leaf.is_dir() {
            mkdir(&leaf)?;
        }
        write(&leaf.join("cgroup.procs"), &me)?;
        enable(base).map_err(|e| {
            format!(
                "cannot enable the memory and pids controllers in {}: {e}",
                base.display()
            )
        })?;
    }
    let run = base.join(name);
    mkdir(&run)?;
    enable(&run).map_err(|e| {
        format!(
            "cannot enable the memory and pids controllers in {}: {e}",
            run.display()
        )
    })?;
    Ok(run)
}

/// proctor's own folder in the v1 hierarchy of `controller`.
fn v1_base(own: &str, mounts: &str, controller: &str) -> Option<PathBuf> {
    let path = own.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, list, path) = (parts.next()?, parts.next()?, parts.next()?);
        list.split(',').any(|c| c == controller).then_some(path)
    })?;
    let mount = mount_point(mounts, |fstype, options| {
        fstype == "cgroup" && options.split(',').any(|o| o == controller)
    })?;
    let base = mount.join(path.trim_start_matches('/'));
    base.is_dir().then_some(base)
}

/// The mount point of the first mount in `/proc/self/mountinfo` whose file-system type and
/// super options pass `want` (only mounts of a hierarchy's root).
fn mount_point(mountinfo: &str, want: impl Fn(&str, &str) -> bool) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let fields: Vec<&str> = left.split(' ').collect();
        let mut r = right.split(' ');
        let (fstype, _source, options) = (r.next()?, r.next()?, r.next()?);
        let point = fields.get(4)?;
        (fields.get(3) == Some(&"/") && want(fstype, options))
            .then(|| PathBuf::from(point.replace("\\040", " ")))
    })
}

fn mkdir(dir: &Path) -> Result<(), String> {
    match fs::create_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(format!(
            "cannot create the control group {}: {e} (proctor needs root or a delegated control group)",
            dir.display()
        )),
    }
}

fn write(file: &Path, value: &str) -> Result<(), String> {
    fs::write(file, value).map_err(|e| format!("cannot write {value} to {}: {e}", file.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
35 25 0:30 / /sys/fs/cgroup/memory rw,relatime shared:13 - cgroup cgroup rw,memory
36 25 0:31 / /sys/fs/cgroup/pids rw,relatime shared:14 - cgroup cgroup rw,pids
37 25 0:32 / /sys/fs/cgroup/unified rw,relatime shared:15 - cgroup2 cgroup2 rw
38 25 0:33 /sub /mnt/bound rw,relatime - cgroup cgroup rw,memory
";

    #[test]
    fn mount_points_are_found_by_type_and_controller_at_a_hierarchys_root() {
        assert_eq!(
            mount_point(MOUNTINFO, |t, o| t == "cgroup"
                && o.split(',').any(|x| x == "pids")),
            Some(PathBuf::from("/sys/fs/cgroup/pids"))
        );
        assert_eq!(
            mount_point(MOUNTINFO, |t, _| t == "cgroup2"),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(mount_point(MOUNTINFO, |t, _| t == "cgroup-none"), None);
    }

    /// A v1 slot's two folders, memory's and pids', in a temporary folder.
    fn v1_dirs() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let (m, p) = (dir.path().join("m"), dir.path().join("p"));
        fs::create_dir_all(&m).unwrap();
        fs::create_dir_all(&p).unwrap();
        (dir, m, p)
    }

    #[test]
    fn a_trial_group_reports_the_limit_its_counters_show() {
        let (_dir, m, p) = v1_dirs();
        let cg = TrialCgroup {
            slot: Slot {
                limits: Some((64 << 20, 16)),
                ..Slot::new(vec![m.clone(), p.clone()])
            },
            v2: false,
            start: Counters::default(),
        };
        fs::write(
            m.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
        )
        .unwrap();
        fs::write(p.join("pids.events"), "max 0\n").unwrap();
        assert_eq!(cg.reached(), None);
        fs::write(p.join("pids.events"), "max 3\n").unwrap();
        assert_eq!(cg.reached(), Some(Reached::Processes));
        fs::write(
            m.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
        )
        .unwrap();
        assert_eq!(
            cg.reached(),
            Some(Reached::Processes),
            "a kill while the group stayed under its limit is the machine's"
        );
        assert!(cg.host_oom());
        fs::write(m.join("memory.max_usage_in_bytes"), "67108864\n").unwrap();
        assert_eq!(cg.reached(), Some(Reached::Memory), "memory is named first");
        assert!(!cg.host_oom());
    }

    #[test]
    fn a_slot_is_empty_while_its_pids_controller_counts_no_process() {
        let (_dir, m, p) = v1_dirs();
        let slot = Slot::new(vec![m, p.clone()]);
        assert!(!slot.is_empty(), "no count to read: not known to be empty");
        fs::write(p.join("pids.current"), "2\n").unwrap();
        assert!(!slot.is_empty());
        // Read again through the descriptor kept since the last read.
        fs::write(p.join("pids.current"), "0\n").unwrap();
        assert!(slot.is_empty());
        fs::write(p.join("pids.current"), "1\n").unwrap();
        assert!(!slot.is_empty());
    }

    #[test]
    fn on_v2_the_groups_own_oom_is_its_limit_and_a_bare_kill_the_machines() {
        let dir = tempfile::tempdir().unwrap();
        let cg = TrialCgroup {
            slot: Slot::new(vec![dir.path().to_path_buf()]),
            v2: true,
            start: Counters::default(),
        };
        let events = |oom: u64, kill: u64| {
            fs::write(
                dir.path().join("memory.events"),
                format!("low 0\nhigh 0\nmax 4\noom {oom}\noom_kill {kill}\n"),
            )
            .unwrap()
        };
        events(0, 1);
        assert_eq!(cg.reached(), None);
        assert!(cg.host_oom());
        events(1, 1);
        assert_eq!(cg.reached(), Some(Reached::Memory));
        assert!(!cg.host_oom());
    }

    #[test]
    fn only_the_folders_of_runs_that_are_gone_are_swept() {
        let base = tempfile::tempdir().unwrap();
        let gone = {
            let mut child = std::process::Command::new("true").spawn().unwrap();
            let pid = child.id();
            child.wait().unwrap();
            pid
        };
        let me = std::process::id();
        let ns = own_pid_namespace().expect("this process's PID namespace");
        let other_ns = ns + 1;
        for name in [
            format!("proctor-{gone}-{ns}"),
            format!("proctor-{me}-{ns}"),
            // The same gone PID, in another PID namespace or named by an older proctor: there
            // the PID says nothing about that run.
            format!("proctor-{gone}-{other_ns}"),
            format!("proctor-{gone}"),
            "proctor-main".to_owned(),
            "other-1".to_owned(),
        ] {
            fs::create_dir_all(base.path().join(name).join("slot-0")).unwrap();
        }
        // A slot that still holds something (as the kernel refuses to remove a group with a
        // process in it) stays, and so does the folder above it.
        let busy = base.path().join(format!("proctor-{gone}-{ns}/slot-1"));
        fs::create_dir(&busy).unwrap();
        fs::write(busy.join("cgroup.procs"), "42\n").unwrap();

        sweep_left_behind(base.path(), Some(ns));

        let mut left: Vec<String> = walk(base.path());
        left.sort();
        let mut want = vec![
            format!("proctor-{gone}-{ns}"),
            format!("proctor-{gone}-{ns}/slot-1"),
            format!("proctor-{me}-{ns}"),
            format!("proctor-{me}-{ns}/slot-0"),
            format!("proctor-{gone}-{other_ns}"),
            format!("proctor-{gone}-{other_ns}/slot-0"),
            format!("proctor-{gone}"),
            format!("proctor-{gone}/slot-0"),
            "other-1".to_owned(),
            "other-1/slot-0".to_owned(),
            "proctor-main".to_owned(),
            "proctor-main/slot-0".to_owned(),
        ];
        want.sort();
        assert_eq!(left, want);

        fs::remove_file(busy.join("cgroup.procs")).unwrap();
        sweep_left_behind(base.path(), Some(ns));
        assert!(!base.path().join(format!("proctor-{gone}-{ns}")).exists());
        assert!(base
            .path()
            .join(format!("proctor-{me}-{ns}/slot-0"))
            .is_dir());
        assert!(base
            .path()
            .join(format!("proctor-{gone}-{other_ns}"))
            .is_dir());
        // Without its own namespace's name, proctor sweeps nothing.
        sweep_left_behind(base.path(), None);
        assert!(base.path().join(format!("proctor-{gone}")).is_dir());
    }

    /// The folders under `dir`, relative to it.
    fn walk(dir: &Path) -> Vec<String> {
        let mut out = Vec::new();
        for e in fs::read_dir(dir).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                let name = e.file_name().to_string_lossy().into_owned();
                for sub in walk(&e.path()) {
                    out.push(format!("{name}/{sub}"));
                }
                out.push(name);
            }
        }
        out
    }
}
