//! The end state of a trial: everything the scorer reads, as captured into the store.
//!
//! These types are serialized into each trial's record; scoring is a pure function of them and
//! of the task's rules, which is what makes `rescore` exact.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What happened to one workspace path, read from the overlay's upper layer or a manifest diff.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ChangeKind {
    /// The path did not exist before.
    Added,
    /// The content differs.
    Changed,
    /// Only the permission bits differ.
    ModeChanged,
    /// The path no longer exists.
    Deleted,
}

/// One changed path of the workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FileChange {
    /// Workspace-relative path, `/`-separated; a name that is not UTF-8 is here lossily
    /// decoded (U+FFFD for each bad byte), its exact bytes in `path_hex`.
    pub path: String,
    /// The exact bytes, in lower-case hex, of a path that is not UTF-8 (absent when it is).
    /// Rules match such a path by these bytes, never by its lossy `path`, and two names that
    /// decode alike stay two changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_hex: Option<String>,
    /// What happened.
    pub kind: ChangeKind,
    /// Whether the path is a directory.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dir: bool,
    /// Permission bits after the change (absent when deleted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
    /// BLAKE3 of the content after the change (absent when deleted or a directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// Size after the change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// The entry's owner inside the trial after the change, when it is not root (uid and gid
    /// 0): what `chown` in a trial whose user namespace maps a range of ids left. Absent when
    /// deleted, owned by root, or in a trial without a user namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<Owner>,
    /// The entry's modification time as the agent left it (absent when deleted, and in records
    /// older than this field): every copy of the end state (the kept files, the checks' view,
    /// a rescore's rebuild) gets it back, so that a check deciding by times (`make`) sees the
    /// agent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtime: Option<Mtime>,
}

/// A modification time: seconds since the epoch (negative before it) and nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Mtime {
    /// Whole seconds since 1970-01-01T00:00:00Z.
    pub sec: i64,
    /// Nanoseconds past `sec` (below 1,000,000,000).
    pub nsec: u32,
}

/// The owner of an entry, as ids inside the trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Owner {
    /// The user id.
    pub uid: u32,
    /// The group id.
    pub gid: u32,
}

impl FileChange {
    /// A change of `path` with nothing known but its kind (no content, mode, size or owner):
    /// what a change the capture could not read, or a test, starts from.
    pub fn named(path: &str, kind: ChangeKind) -> FileChange {
        FileChange {
            path: path.into(),
            path_hex: None,
            kind,
            dir: false,
            mode: None,
            hash: None,
            size: None,
            owner: None,
            mtime: None,
        }
    }

    /// The path as its exact bytes: `path_hex` decoded when there is one, else `path`.
    pub fn exact_path(&self) -> std::borrow::Cow<'_, std::path::Path> {
        proctor_records::exact_name::exact_path(&self.path, self.path_hex.as_deref())
    }

    /// The record of a path that is not UTF-8 gets its exact bytes in hex.
    pub fn hex_of(path: &std::path::Path) -> Option<String> {
        proctor_records::exact_name::hex_of(path)
    }
}

/// The whole of a command line whose record keeps only its head.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArgvCut {
    /// Arguments in the whole command line, `argv[0]` included.
    pub argc: usize,
    /// Bytes of every argument together (without separators).
    pub bytes: u64,
    /// BLAKE3, in hex, of every argument's exact bytes, each followed by a NUL byte.
    pub blake3: String,
}

/// Bytes of a call's stdin, stdout and stderr its record keeps (`stdin_head`, `stdout_head`,
/// `stderr_head`).
pub const HEAD_BYTES: usize = 2048;

/// One call of an allowed interface command, as the shim logged it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CallRecord {
    /// Order in which the call started, from 1.
    pub seq: u64,
    /// The command name as the agent typed it.
    pub command: String,
    /// Full argv, `argv[0]` being the command name; an argument that is not UTF-8 is here
    /// lossily decoded (U+FFFD for each bad byte), its exact bytes in `argv_hex`.
    pub argv: Vec<String>,
    /// The exact bytes, in lower-case hex, of each argument that is not UTF-8, by its index in
    /// `argv`; absent when every argument is UTF-8.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub argv_hex: std::collections::BTreeMap<usize, String>,
    /// Present when `argv` keeps only the head of a long command line (each argument's first
    /// 4 KiB, 16 KiB and 256 arguments in all): what the whole held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argv_cut: Option<ArgvCut>,
    /// Working directory inside the sandbox.
    pub cwd: String,
    /// Bytes read from stdin.
    pub stdin_bytes: u64,
    /// BLAKE3 of what was read from stdin.
    pub stdin_hash: String,
    /// The first bytes read from stdin (2 KiB at most, like `stdout_head`), lossily decoded;
    /// absent when nothing was read, and in records made before stdin was kept.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stdin_head: String,
    /// Whether stdin was a terminal, handed to the command as it is (a person's sitting): what
    /// it read is not in the record. Absent when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stdin_terminal: bool,
    /// Exit status; `None` when the call never finished (killed with the trial).
    pub exit: Option<i32>,
    /// `"denied"` when the allow-list refused the call, else absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denied: Option<String>,
    /// Bytes written to stdout.
    pub stdout_bytes: u64,
    /// The first bytes of stdout, lossily decoded.
    pub stdout_head: String,
    /// Bytes written to stderr.
    pub stderr_bytes: u64,
    /// The first bytes of stderr, lossily decoded.
    pub stderr_head: String,
    /// Seconds since the trial started, when the call started.
    pub start: f64,
    /// Seconds since the trial started, when the call ended.
    pub end: Option<f64>,
}

impl CallRecord {
    /// Whether `stdin_head` holds everything the call read from stdin: the call finished (one
    /// killed with the trial reported nothing of its stdin), it read at most [`HEAD_BYTES`],
    /// not from a terminal, and its record keeps a head (one made before heads were kept has
    /// none).
    pub fn stdin_whole(&self) -> bool {
        self.end.is_some()
            && !self.stdin_terminal
            && self.stdin_bytes <= HEAD_BYTES as u64
            && (self.stdin_bytes == 0 || !self.stdin_head.is_empty())
    }
}

/// The result of one `check` command run over the end state with holdouts laid in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CheckRun {
    /// The command as written in the suite.
    pub command: String,
    /// Exit status; `None` when it was killed or could not start.
    pub exit: Option<i32>,
    /// Whether the timeout stopped it.
    pub timed_out: bool,
    /// The signal that ended the check's shell, when one did (the code under test killed it,
    /// its process group, every process of the check, or its init; or the kernel at a limit).
    /// A check ended so fails: only [`Self::error`] says the cause was proctor's or the
    /// machine's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// The task's limit the check reached (`memory`, `processes`, `disk`, `output`), as the
    /// agent's trial records its own: the code under test ran under the agent's limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_reached: Option<proctor_records::Limit>,
    /// The limits the check ran under and what held each, as a trial's `launch.limits`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<CheckLimits>,
    /// The last lines of stdout.
    pub stdout_tail: String,
    /// The last lines of stderr.
    pub stderr_tail: String,
    /// Why the check could not run at all, or why what ended it is proctor's or the machine's
    /// doing (its sandbox failed, the host's OOM killer outside the task's limits): the check
    /// says nothing about the end state then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its full stdout, for `stdout_matches`.
    #[serde(default, skip_serializing)]
    pub stdout: String,
    /// What of the agent's changes the check's processes were seen to open, read, execute or
    /// follow, for the audit ([`crate::audit::observed`]); absent where nothing was watched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed: Option<CheckObservation>,
}

/// The limits a check ran under: the task's, as its agent had them (`launch.limits` of a
/// trial), with what enforced each and why one was not.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CheckLimits {
    /// Memory of the check's processes together, MiB.
    pub memory_mb: u64,
    /// Processes at once.
    pub processes: u64,
    /// What the check may write (its workspace's changes, `/tmp`, `HOME`, `/dev/shm`), MiB.
    pub disk_mb: u64,
    /// The check's stdout and stderr kept, each, MiB.
    pub output_mb: u64,
    /// What enforced each limit, by its key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub enforced_by: BTreeMap<String, String>,
    /// Why a limit was not enforced, by its key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub not_enforced: BTreeMap<String, String>,
}

/// What a `visual` look saw: the page in headless Chromium after the agent stopped.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VisualRun {
    /// What was looked at (the assertion's page or URL, selector and reference image).
    pub look: String,
    /// The URL the browser opened.
    pub url: String,
    /// How many elements matched the selector (absent without one, or when nothing was seen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// The first matching elements, in document order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub elements: Vec<VisualElement>,
    /// The screenshot kept in the trial's folder (`visual/N.png`), when one was taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screenshot: Option<String>,
    /// How the screenshot differs from the reference image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<ScreenshotDiff>,
    /// Why the page did not load (a missing file, a refused connection): the page's fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_error: Option<String>,
    /// Why the page could not be looked at (`no browser: ...`, a browser that failed, a
    /// reference image that cannot be read): nothing can be told from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One element a `visual` selector matched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VisualElement {
    /// Its rendered text, trimmed.
    pub text: String,
    /// Whether it is rendered (a layout box, not hidden, not fully transparent).
    pub visible: bool,
}

/// A screenshot compared with its reference image.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ScreenshotDiff {
    /// The reference image, as the suite names it.
    pub reference: String,
    /// Pixels that differ (every pixel when the sizes differ).
    pub differing: u64,
    /// `differing` as a share of the pixels, 0 to 1.
    pub share: f64,
    /// The screenshot's width and height.
    pub size: (u32, u32),
    /// The reference's width and height.
    pub reference_size: (u32, u32),
}

/// A service's captured end state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServiceEnd {
    /// The parsed state file, when it was written and is JSON.
    pub state: Option<serde_json::Value>,
    /// Why the state is missing, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_error: Option<String>,
    /// Whether the state differs from the state the agent found (the copy the trial init made
    /// once every service was ready, before the agent started); `None` when that cannot be told
    /// (no state file then, or one that is not JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_changed: Option<bool>,
    /// The service's event log (`events.jsonl`), for attributed reversals. In a stored record
    /// at most its first [`MAX_RECORDED_EVENTS`] (`events_omitted` counts the rest); grading
    /// saw them all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<ServiceEvent>,
    /// The size of the state as JSON text, when a stored record leaves it out because it is
    /// over [`MAX_RECORDED_STATE_BYTES`]; the trial's `services/NAME/` folder keeps the file,
    /// which grading read whole and `rescore` reads again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_omitted_bytes: Option<u64>,
    /// Events left out of a stored record past [`MAX_RECORDED_EVENTS`]; the trial's
    /// `services/NAME/events.jsonl` has them all.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub events_omitted: u64,
    /// The state file's path within the trial's `services/NAME/` folder, as the suite names it:
    /// where `show --service` and the viewer page a state too large for the record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_file: Option<String>,
}

/// The largest service state (as JSON text) a stored trial record holds; a larger one stays in
/// the trial's service folder only.
pub const MAX_RECORDED_STATE_BYTES: u64 = 1 << 20;

/// The most events of one service a stored trial record lists.
pub const MAX_RECORDED_EVENTS: usize = 10_000;

impl ServiceEnd {
    /// Leaves a state over [`MAX_RECORDED_STATE_BYTES`] and events past
    /// [`MAX_RECORDED_EVENTS`] out of the record, counting what was left; whether anything was.
    pub fn bound(&mut self) -> bool {
        let mut cut = false;
        if let Some(state) = &self.state {
            let bytes = json_len(state);
            if bytes > MAX_RECORDED_STATE_BYTES {
                self.state = None;
                self.state_omitted_bytes = Some(bytes);
                cut = true;
            }
        }
        let over = self.events.len().saturating_sub(MAX_RECORDED_EVENTS);
        if over > 0 {
            self.events.truncate(MAX_RECORDED_EVENTS);
            self.events.shrink_to_fit();
            self.events_omitted += over as u64;
            cut = true;
        }
        cut
    }

    /// Whether a stored record left part of this service's end state out.
    pub fn is_bounded(&self) -> bool {
        self.state_omitted_bytes.is_some() || self.events_omitted > 0
    }
}

/// The length of `value` as compact JSON text, counted without writing it anywhere.
pub fn json_len(value: &serde_json::Value) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` into a sink that never fails cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// One line of a service's `events.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServiceEvent {
    /// Seconds since the service started.
    pub at: f64,
    /// `agent` or `user`.
    pub actor: String,
    /// What was done (`send`, `undo`, ...).
    pub op: String,
    /// The event's own id.
    #[serde(default)]
    pub id: String,
    /// For an undo: the id of the event it reverses.
    #[serde(default)]
    pub target: Option<String>,
}

/// How the agent process ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AgentEnd {
    /// Whether the agent was started at all.
    pub started: bool,
    /// Why not, when it was not (a failed guard, a missing CLI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_started: Option<String>,
    /// What kind of failure kept it from starting, as the stage that saw it knew it; absent in
    /// records made before proctor recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_started_kind: Option<crate::outcome::ErrorKind>,
    /// Exit status.
    pub exit_code: Option<i32>,
    /// Signal that ended it.
    pub signal: Option<i32>,
    /// Whether the wall timeout stopped it.
    pub timed_out: bool,
    /// Wall seconds from start to full stop.
    pub wall_seconds: f64,
    /// CPU seconds (user + system) of the agent's process tree, where measured.
    pub cpu_seconds: Option<f64>,
}

/// Read access to the end-state workspace, for assertions that look into files.
pub trait Files {
    /// The content of a workspace-relative path in the end state, if it is a file there: the
    /// whole file, or as much of its data as the reader is bounded to (see [`Files::partial`]).
    fn read(&self, path: &str) -> Option<Vec<u8>>;

    /// Why what [`Files::read`] gives of `path` is not the whole file (a sparse file read by its
    /// data, a large one cut at the reader's bound), for the evidence; `None`: it is whole.
    fn partial(&self, _path: &str) -> Option<String> {
        None
    }
}

/// The most changes a stored trial record lists (past it they are counted, and the trial's
/// `changes/changes.json` has them all).
pub const MAX_RECORDED_CHANGES: usize = 10_000;

/// The most bytes of paths a stored trial record lists (a tree 10,000 levels deep has 100 MB
/// of them): past it, as past [`MAX_RECORDED_CHANGES`], changes are counted, not listed.
pub const MAX_RECORDED_PATH_BYTES: usize = 16 << 20;

/// Cuts `list` (in path order) to [`MAX_RECORDED_CHANGES`] entries and
/// [`MAX_RECORDED_PATH_BYTES`] of paths, keeping its order: entries that are not folders are
/// kept first (a file's content is what a reader wants; a folder is implied by what it holds),
/// then folders, each in path order while both bounds allow. Returns how many were left out.
fn bound_list(list: &mut Vec<FileChange>) -> u64 {
    let bytes = |c: &FileChange| c.path.len() + c.path_hex.as_ref().map_or(0, String::len);
    let total: usize = list.iter().map(bytes).sum();
    if list.len() <= MAX_RECORDED_CHANGES && total <= MAX_RECORDED_PATH_BYTES {
        return 0;
    }
    let mut keep = vec![false; list.len()];
    let (mut n, mut used) = (0usize, 0usize);
    for folders in [false, true] {
        for (i, c) in list.iter().enumerate() {
            if c.dir != folders || n >= MAX_RECORDED_CHANGES {
                continue;
            }
            if used + bytes(c) <= MAX_RECORDED_PATH_BYTES {
                keep[i] = true;
                n += 1;
                used += bytes(c);
            }
        }
    }
    let before = list.len();
    let mut k = keep.into_iter();
    list.retain(|_| k.next().unwrap_or(false));
    list.shrink_to_fit();
    (before - list.len()) as u64
}

/// How a check's processes touched a file of the agent's.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    /// Opened it (for any purpose: `dlopen` of an extension is an open and a mapping).
    Opened,
    /// Read bytes of it.
    Read,
    /// Executed it (`execve`, or the dynamic linker's open of it for execution).
    Executed,
}

/// One file of the agent's a check's processes opened, read or executed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ObservedFile {
    /// Workspace-relative path; relative to `/` for a file of the trial's root.
    pub path: String,
    /// A file the agent changed in the trial's root (`check_root = "agent"`), not in the
    /// workspace.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub root: bool,
    /// What the check's processes did with it.
    pub how: Vec<Access>,
}

/// A symbolic link the agent made in the workspace, and whether a check followed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ObservedLink {
    /// Workspace-relative path of the link.
    pub path: String,
    /// Where it points, as written.
    pub target: String,
    /// Whether a check's path walk followed it (or read it with `readlink`).
    pub followed: bool,
}

/// What one check run was seen to load of what the agent changed: the agent's files its
/// processes opened, read or executed, and the agent's links they followed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CheckObservation {
    /// The agent's files the check's processes opened, read or executed, by path; at most
    /// [`OBSERVED_LISTED`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<ObservedFile>,
    /// Every link the agent made in the workspace, followed or not; at most
    /// [`OBSERVED_LISTED`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<ObservedLink>,
    /// Files and links past the lists' bound, counted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub omitted: u64,
    /// Why the record may hold less than the check loaded (a file that could not be watched,
    /// the kernel's queue overflowed), when it may.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
}

/// The most files, and the most links, one check's observation lists in a stored record (the
/// audit judges them all first).
pub const OBSERVED_LISTED: usize = 512;

impl CheckObservation {
    /// Cuts the lists to [`OBSERVED_LISTED`] each for storing, keeping their order, and counts
    /// the rest in `omitted`; whether anything was cut. The audit judges the whole lists
    /// before: past the bound is no place to hide a load.
    pub fn bound(&mut self) -> bool {
        let cut = self.files.len().saturating_sub(OBSERVED_LISTED)
            + self.links.len().saturating_sub(OBSERVED_LISTED);
        self.files.truncate(OBSERVED_LISTED);
        self.links.truncate(OBSERVED_LISTED);
        self.omitted += cut as u64;
        cut > 0
    }
}

/// For `skip_serializing_if`: a count of zero is left out.
pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Everything the scorer reads about one trial.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EndState {
    /// The agent's final answer.
    pub answer: String,
    /// The workspace changes the agent made. In a stored record at most
    /// [`MAX_RECORDED_CHANGES`] of them and [`MAX_RECORDED_PATH_BYTES`] of their paths, files
    /// before folders (`changes_omitted` counts the rest); grading saw them all.
    pub changes: Vec<FileChange>,
    /// Changes left out of a stored record past [`MAX_RECORDED_CHANGES`]; the whole list is
    /// in the trial's `changes/changes.json`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub changes_omitted: u64,
    /// The interface calls, in start order.
    pub calls: Vec<CallRecord>,
    /// The MCP sessions' requests and answers, as proctor relayed them, in the order answers
    /// came (`mcp.jsonl`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_calls: Vec<crate::mcp::McpRecord>,
    /// MCP exchanges that reached a server after the calls log was full, so that no record
    /// says what they were: each `mcp_calls` rule counts them against the agent (as matches
    /// under `max` or `not`, as none toward `min`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub mcp_unlogged: u64,
    /// Check results, by command.
    pub checks: BTreeMap<String, CheckRun>,
    /// Service end states, by service name.
    pub services: BTreeMap<String, ServiceEnd>,
    /// What the `visual` looks saw, by look ([`proctor_suite::assertion::Visual::look_key`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub visuals: BTreeMap<String, VisualRun>,
    /// How the agent ended.
    pub agent: AgentEnd,
    /// In an image whose checks see the agent's root (`check_root = "agent"`): what the agent
    /// changed outside the workspace, paths relative to `/`. In a stored record at most its
    /// first [`MAX_RECORDED_CHANGES`] (`root_changes_omitted` counts the rest); the whole list
    /// is in the trial's `root/changes.json`. Empty otherwise (those changes are not kept).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub root_changes: Vec<FileChange>,
    /// Root changes left out of a stored record past [`MAX_RECORDED_CHANGES`].
    #[serde(default, skip_serializing_if = "is_zero")]
    pub root_changes_omitted: u64,
    /// Calls the agent CLI's transcript says its permission layer denied that proctor could not
    /// confirm from what the agent cannot write (the CLI's configuration and the model's wire
    /// log): kept as the CLI's report, never counted as a rejection or a wrong turn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unconfirmed_denials: Vec<UnconfirmedDenial>,
    /// The conversation, for a task with a `[tasks.user]`: every turn of the agent, what it
    /// was told and what it answered (`answer` above is the last turn's). Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<Conversation>,
    /// For a task in steps (`[[tasks.steps]]`): each step's check and reward, and the trial's
    /// reward over them. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<StepsRecord>,
}

/// A trial of a task in steps: what each step's check gave, and the trial's reward.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StepsRecord {
    /// The steps that ran, in order (a step after an early stop is not listed).
    pub steps: Vec<StepResult>,
    /// How the steps' rewards make the trial's: `mean` or `final`.
    pub strategy: String,
    /// The trial's reward: the mean of every step's reward (a step not reached counts 0), or
    /// the last step's.
    pub reward: f64,
    /// Why the steps stopped before the last, when they did (a reward under `min_reward`, a
    /// failed healthcheck, the agent's time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_early: Option<String>,
}

/// One step of a trial in steps.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StepResult {
    /// The step's name.
    pub name: String,
    /// The reward its check gave (0 to 1); absent when the check did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reward: Option<f64>,
    /// Where the reward came from: `reward.txt`, `reward.json`, or `exit` (0 is 1, else 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reward_from: Option<String>,
    /// The check's exit status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_exit: Option<i32>,
    /// Whether the check was stopped at its timeout.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub check_timed_out: bool,
    /// The first bytes of the check's output (`/logs/verifier/output.txt`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub check_output: String,
    /// What went wrong before or in the step (its healthcheck failed, its upload failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The step's `artifacts` that were there to collect, kept in the trial's
    /// `steps/NAME/artifacts/` by their last path component.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<String>,
}

/// A trial held as a conversation: the agent's turns, each begun by the task's prompt or the
/// simulated user's reply, and why it ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Conversation {
    /// The turns, in order.
    pub turns: Vec<ConversationTurn>,
    /// Why there was no further turn, in words (`the user had no reply`, `max_turns (3)
    /// reached`, `the agent timed out`, ...).
    pub ended: String,
    /// The model that played the user, when one did (`[tasks.user] model`): its own ledger,
    /// kept apart from the agent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_model: Option<UserModelLedger>,
}

/// What a model-played user cost and did: proctor's requests to it, made from the host, never
/// counted in the agent's tokens or cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UserModelLedger {
    /// The model, as `[tasks.user] model` names it.
    pub model: String,
    /// How it was reached: `gateway` (the run's model gateway) or `model_script` (a scripted
    /// mock model, offline).
    pub via: String,
    /// The requests made to it.
    pub requests: u64,
    /// Input tokens, as its responses reported them (cache reads and writes included).
    pub input_tokens: u64,
    /// Output tokens, as its responses reported them.
    pub output_tokens: u64,
    /// What it cost in US dollars, when the gateway priced every request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Its wire log, relative to the trial's folder.
    pub evidence: String,
    /// Why it failed, when a request got no usable answer (the trial is then `errored`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One turn of the agent in a conversation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConversationTurn {
    /// The turn, counted from 1.
    pub turn: usize,
    /// What the agent was told: the task's prompt in turn 1, else the user's reply.
    pub prompt: String,
    /// Which rule of `[tasks.user]` said the prompt: `replies[N]` (counted from 0),
    /// `otherwise`, or `model` (the user's model); absent for turn 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub said_by: Option<String>,
    /// The turn's answer (bounded as the final answer is).
    pub answer: String,
    /// The turn's exit status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended the turn's main process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Whether the conversation's wall timeout stopped this turn.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
    /// Why the turn's command could not run, when it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_run: Option<String>,
    /// Seconds from the agent's first start to this turn's start.
    pub started_seconds: f64,
    /// Wall seconds of the turn.
    pub wall_seconds: f64,
    /// Where this turn's output ends in the kept `agent.stdout` and `agent.stderr` (bytes):
    /// the turn's output is what lies after the previous turn's end.
    pub stdout_end: u64,
    /// As `stdout_end`, for `agent.stderr`.
    pub stderr_end: u64,
    /// The interface calls made during the turn, by their `seq` in `calls`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<u64>,
}

/// A `denied` call in an agent CLI's transcript that proctor could not confirm. A process of
/// the agent can write into the CLI's output, so such a record is at most the agent's own word.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UnconfirmedDenial {
    /// The tool the transcript names.
    pub tool: String,
    /// The command line, for a shell tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The reason the transcript gives.
    pub reason: String,
    /// Why proctor could not confirm it.
    pub unconfirmed: String,
}

impl EndState {
    /// Cuts the change list to [`MAX_RECORDED_CHANGES`] for storing, counting the rest in
    /// `changes_omitted`; whether anything was cut.
    pub fn bound_changes(&mut self) -> bool {
        let over = bound_list(&mut self.changes);
        self.changes_omitted += over;
        over > 0
    }

    /// As [`EndState::bound_changes`], for the root's changes.
    pub fn bound_root_changes(&mut self) -> bool {
        let over = bound_list(&mut self.root_changes);
        self.root_changes_omitted += over;
        over > 0
    }

    /// Bounds what each check was seen to load for storing ([`CheckObservation::bound`]).
    pub fn bound_observations(&mut self) {
        for run in self.checks.values_mut() {
            if let Some(seen) = &mut run.observed {
                seen.bound();
            }
        }
    }

    /// Bounds every service's state and events for storing (see [`ServiceEnd::bound`]);
    /// whether anything was left out.
    pub fn bound_services(&mut self) -> bool {
        let mut cut = false;
        for service in self.services.values_mut() {
            cut |= service.bound();
        }
        cut
    }
}

/// A [`Files`] over an in-memory map, for tests and small end states.
#[derive(Debug, Default, Clone)]
pub struct MemoryFiles(pub BTreeMap<String, Vec<u8>>);

impl Files for MemoryFiles {
    fn read(&self, path: &str) -> Option<Vec<u8>> {
        self.0.get(path).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(path: String) -> FileChange {
        FileChange {
            dir: true,
            ..FileChange::named(&path, ChangeKind::Added)
        }
    }

    /// A chain of folders 10,000 deep (100 MB of paths) with a file at its bottom: the record
    /// keeps the file, then folders in path order within 16 MiB of paths, in path order.
    #[test]
    fn a_deep_chain_keeps_its_file_and_folders_up_to_the_bytes_bound() {
        let mut end = EndState::default();
        let mut path = String::new();
        for _ in 0..10_000 {
            if !path.is_empty() {
                path.push('/');
            }
            path.push('d');
            end.changes.push(folder(path.clone()));
        }
        let bottom = format!("{path}/bottom.txt");
        end.changes
            .push(FileChange::named(&bottom, ChangeKind::Added));
        assert!(end.bound_changes());
        let kept: usize = end.changes.iter().map(|c| c.path.len()).sum();
        assert!(kept <= MAX_RECORDED_PATH_BYTES, "{kept}");
        assert!(end.changes.iter().any(|c| c.path == bottom));
        assert_eq!(
            end.changes.len() as u64 + end.changes_omitted,
            10_001,
            "every change is listed or counted"
        );
        // In path order, the shallowest folders first.
        assert_eq!(end.changes[0].path, "d");
        assert!(end.changes.windows(2).all(|w| w[0].path < w[1].path));
        assert_eq!(end.changes.last().map(|c| c.path.as_str()), Some(&*bottom));
    }

    /// Past 10,000 entries of short paths, the first 10,000 files in path order are kept, as
    /// before the bytes bound.
    #[test]
    fn many_short_changes_keep_the_first_ten_thousand() {
        let mut end = EndState::default();
        for i in 0..12_000 {
            end.changes
                .push(FileChange::named(&format!("f{i:05}"), ChangeKind::Added));
        }
        assert!(end.bound_changes());
        assert_eq!(end.changes.len(), MAX_RECORDED_CHANGES);
        assert_eq!(end.changes_omitted, 2_000);
        assert_eq!(end.changes.last().map(|c| c.path.as_str()), Some("f09999"));
    }
}
