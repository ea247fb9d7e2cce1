//! Stage 4, capture: after the full stop and before anything is scored, the evidence goes into
//! the trial's folder: the agent's output as its adapter reads it, the workspace's changes, the
//! calls log, each service's folder and events, the CLI's denials as `denied` calls, and the
//! model's wire log with the ledgers and injected faults it shows. What cannot be captured is a
//! harness note, never a panic.

use proctor_records::Limit;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use proctor_agents::{AgentOutput, DeniedCall};
use proctor_sandbox::copy::{self, CopyOptions, Links};
use proctor_sandbox::diff;
use proctor_sandbox::IdMapping;
use proctor_score::endstate::{
    AgentEnd, ChangeKind, EndState, FileChange, Mtime, Owner, ServiceEnd,
};
use proctor_score::{CallRecord, ErrorKind, ServiceEvent};
use proctor_suite::model::Service;

use crate::allow::Allowed;
use crate::calls::read_log;
use crate::gateway::read_ledger;
use crate::layers::copy_tree;
use crate::model::{Ledgers, Usage, MODEL_SERVICE};
use crate::record::{CaptureNote, HarnessNote};
use crate::trial::context::{RunContext, Trial};
use crate::trial::conversation;
use crate::trial::execute::Executed;
use crate::trial::launch::Launched;
use crate::trial::prepare::{Prepared, TrialWorkspace};
use crate::trial::services::ModelEndpoint;

/// What the capture stage kept.
#[derive(Debug, Clone, Default)]
pub struct Captured {
    /// The end state (without check results: the checks stage adds them).
    pub end: EndState,
    /// The changed entries that are neither folders nor regular files: the workspace's, then
    /// the root's.
    pub not_files: [NotFiles; 2],
    /// The cost ledgers.
    pub ledgers: Ledgers,
    /// The model's faults (injected by the mock, or the gateway's failed requests), typed, in
    /// the order seen.
    pub model_faults: Vec<(ErrorKind, String)>,
    /// The gateway limit the trial reached, if any.
    pub limit_reached: Option<Limit>,
    /// What could not be captured, in the order met.
    pub notes: Vec<HarnessNote>,
    /// What the agent made that the capture could not keep, with the cause: the agent's
    /// doing, graded from what was kept (each path is among the changes, as added).
    pub capture_notes: Vec<CaptureNote>,
    /// The first write into the store that failed because its file system is full: the trial's
    /// evidence is incomplete, so it is not a record to keep (the run stops instead).
    pub store_full: Option<String>,
}

/// What the capture could not do, in the order met, noting apart a write that failed because
/// the store's file system is full.
#[derive(Debug, Default)]
pub struct Notes {
    notes: Vec<String>,
    full: Option<String>,
}

impl Notes {
    /// Adds a note.
    fn push(&mut self, note: String) {
        self.notes.push(note);
    }

    /// Adds a note for a write that failed with `e`: `what: e`, remembered as the store being
    /// full when it is.
    fn failed(&mut self, what: &str, e: &std::io::Error) {
        let note = format!("{what}: {e}");
        if proctor_store::is_out_of_space(e) && self.full.is_none() {
            self.full = Some(note.clone());
        }
        self.notes.push(note);
    }

    /// Whether nothing went wrong.
    pub fn is_empty(&self) -> bool {
        self.notes.is_empty()
    }
}

/// Captures the end state of a trial that has fully stopped.
pub fn capture(
    ctx: &RunContext,
    trial: &Trial,
    prepared: &Prepared,
    launched: &mut Launched,
    executed: &Executed,
) -> Captured {
    let paths = &prepared.paths;
    let (mut output, mut notes, conversation_answers) = agent_output(launched, executed, paths);
    output.transcript = Vec::new();
    let (answer, answer_cut) = bounded_answer(std::mem::take(&mut output.answer));
    let mut capture_notes = Vec::new();
    let disk_bound = trial.settings.limits.disk_mb().saturating_mul(1 << 20);
    let workspace = workspace_changes(
        prepared,
        executed,
        disk_bound,
        &mut notes,
        &mut capture_notes,
    );
    let root = root_changes(
        launched,
        ctx.image(&trial.planned.task).map(|i| &**i),
        (&paths.trial_dir, executed),
        disk_bound,
        &mut notes,
        &mut capture_notes,
    );
    let bound_reached = workspace.bound_reached || root.bound_reached;
    let not_files = [workspace.not_files, root.not_files];
    let (changes, root_changes) = (workspace.changes, root.changes);
    let mut end = EndState {
        answer,
        changes,
        calls: calls(&paths.calls_log(), &mut notes),
        mcp_calls: mcp_calls(&paths.calls_log(), &mut notes),
        mcp_unlogged: prepared.calls_log.mcp_unlogged(),
        services: service_ends(
            &services_with_state(ctx),
            &paths.services(),
            &paths.trial_dir,
            &mut notes,
        ),
        agent: agent_end(executed),
        root_changes,
        steps: executed.steps.clone(),
        ..EndState::default()
    };
    let (conversation, user_fault) =
        conversation_end(launched, executed, conversation_answers, &end.calls);
    end.conversation = conversation;
    let (wire, mut model_faults, reading) = model_end(launched, paths, executed, &mut notes);
    model_faults.extend(user_fault);
    add_reported_denials(&mut end, &output, launched, prepared);
    let mut limit_reached = None;
    let mut ledgers = ledgers(ctx, trial, wire, &output);
    if let Some(r) = &reading {
        model_faults.extend(r.fault.clone());
        limit_reached = r.limit_reached.map(gateway_limit);
        ledgers = crate::gateway::ledgers(r, ledgers);
    }
    let resource = resource_limit_reached(ctx, launched, executed, answer_cut);
    let (limit_reached, resource) = limit_reached_of(
        limit_reached,
        resource,
        bound_reached,
        prepared.calls_log.refused() > 0,
    );
    if let Some(why) = &executed.init_lost {
        init_lost(why, resource, &mut end, &mut capture_notes, &mut notes);
    }
    Captured {
        end,
        not_files,
        ledgers,
        model_faults,
        limit_reached,
        notes: notes.notes.into_iter().map(HarnessNote::run).collect(),
        capture_notes,
        store_full: notes.full,
    }
}

/// The services whose end state a trial keeps: the suite's, and each MCP server's that runs as
/// a service (a streamable-HTTP server's state is its service's).
fn services_with_state(ctx: &RunContext) -> Vec<Service> {
    ctx.suite
        .file
        .services
        .iter()
        .cloned()
        .chain(
            ctx.suite
                .file
                .mcp_servers
                .iter()
                .filter(|m| m.url.is_none())
                .map(|m| m.as_service()),
        )
        .collect()
}

/// Adds to `end` the calls the agent's transcript reports denied, confirmed against what the
/// model asked; the model's wire log is read only when the transcript reports a denial.
fn add_reported_denials(
    end: &mut EndState,
    output: &AgentOutput,
    launched: &Launched,
    prepared: &Prepared,
) {
    let asked = (!output.denied.is_empty())
        .then(|| crate::export::wire(&prepared.paths.trial_dir).ok())
        .flatten()
        .and_then(|(wire, _)| wire)
        .map(|wire| proctor_report::export::atif::asked(&wire));
    add_denied_calls(
        end,
        &output.denied,
        launched.adapter.shell_permissions(),
        &prepared.allowed,
        asked.as_ref(),
    );
}

/// What the agent said and did, read from its raw output with its adapter (a conversation's
/// turns each from its own part, then merged), with the notes of writing the output and the
/// transcript into the trial's folder, and each agent turn's answer in a conversation. The raw
/// output (bounded by `output_mb`) and the parsed transcript are written out and let go at
/// once: they are the largest things a trial makes proctor hold.
fn agent_output(
    launched: &mut Launched,
    executed: &Executed,
    paths: &crate::trial::paths::TrialPaths,
) -> (AgentOutput, Notes, Vec<String>) {
    let stdout = std::fs::read(paths.stdout()).unwrap_or_default();
    let stderr = std::fs::read(paths.stderr()).unwrap_or_default();
    let mut answers = Vec::new();
    let mut output = match &executed.spoken {
        Some(spoken) if !executed.report.turns.is_empty() => {
            let all = conversation::read_turns(
                launched.adapter.as_ref(),
                &stdout,
                &stderr,
                &executed.report.turns,
            );
            let turns = conversation::agent_outputs(all, &spoken.said);
            answers = turns.iter().map(|t| t.answer.clone()).collect();
            conversation::merge(turns, &spoken.said)
        }
        _ => launched.adapter.read(&stdout, &stderr),
    };
    if let Some(answer) = launched.given_answer.take() {
        output.answer = answer;
    }
    let notes = write_agent_output(&paths.trial_dir, &output, &stdout, &stderr);
    (output, notes, answers)
}

/// The conversation's record (each turn's answer bounded as the final answer is), with the
/// model-played user's ledger in it; and that model's failure as the fault that makes the trial
/// `errored` (the user could not be played: not the agent's doing).
fn conversation_end(
    launched: &mut Launched,
    executed: &Executed,
    answers: Vec<String>,
    calls: &[proctor_score::CallRecord],
) -> (
    Option<proctor_score::Conversation>,
    Option<(ErrorKind, String)>,
) {
    let mut conversation = executed.spoken.as_ref().map(|spoken| {
        let answers = answers.into_iter().map(|a| bounded_answer(a).0).collect();
        conversation::record(spoken, &executed.report.turns, answers, calls)
    });
    let Some(model) = launched.turns.as_mut().and_then(|t| t.model_user.take()) else {
        return (conversation, None);
    };
    let ledger = model
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .finish();
    let fault = ledger
        .error
        .clone()
        .map(|why| (ErrorKind::ProviderError, why));
    if let Some(c) = conversation.as_mut() {
        c.user_model = Some(ledger);
    }
    (conversation, fault)
}

/// What the trial's model endpoint kept: the mock's wire usage and injected faults (its wire
/// log copied into the trial's folder), or the gateway's ledger, read.
fn model_end(
    launched: &mut Launched,
    paths: &crate::trial::paths::TrialPaths,
    executed: &Executed,
    notes: &mut Notes,
) -> (
    Option<Usage>,
    Vec<(ErrorKind, String)>,
    Option<crate::gateway::LedgerReading>,
) {
    match &mut launched.model {
        Some(ModelEndpoint::Mock { .. }) => {
            let to = paths.trial_dir.join("services").join(MODEL_SERVICE);
            let _ = proctor_sandbox::remove_tree(&to);
            if let Err(e) = copy_tree(&paths.services().join(MODEL_SERVICE), &to) {
                notes.failed("cannot copy the model's wire log", &e);
            }
            match crate::model::read_wire(&crate::model::wire_log(&paths.trial_dir)) {
                Ok(w) => (Some(w.usage), w.faults, None),
                Err(e) => {
                    if executed.report.not_started.is_none() {
                        notes.push(e);
                    }
                    (None, Vec::new(), None)
                }
            }
        }
        Some(ModelEndpoint::Gateway { seat, .. }) => match seat.finish() {
            Some(ledger) => {
                for e in &ledger.evidence_errors {
                    notes.push(format!("model evidence: {e}"));
                }
                (None, Vec::new(), Some(read_ledger(&ledger)))
            }
            None => {
                notes.push("the model gateway kept no ledger for this trial".into());
                (None, Vec::new(), None)
            }
        },
        None => (None, Vec::new(), None),
    }
}

/// The limit a trial reached, from the model's (`model`), the sandbox's resources (`resource`),
/// the captured changes reaching the disk bound (`disk_bound`) and the calls log refusing calls
/// (`calls_full`); and the resource limit alone (for a lost init). A resource limit other than
/// `output` comes first, then the model's, then `output`, then `calls`. Every one of them is
/// the agent's doing: the trial stays graded.
fn limit_reached_of(
    model: Option<Limit>,
    resource: Option<Limit>,
    disk_bound: bool,
    calls_full: bool,
) -> (Option<Limit>, Option<Limit>) {
    // The captured changes reaching the disk bound is the disk limit too.
    let resource = resource
        .filter(|r| *r != Limit::Output)
        .or(disk_bound.then_some(Limit::Disk))
        .or(resource);
    let mut limit = model;
    if resource.is_some_and(|r| r != Limit::Output) || limit.is_none() {
        limit = resource.or(limit);
    }
    // Calls refused at the calls log's bound: a note would make the trial errored (harness)
    // and take it out of n, so it is a limit like a full disk.
    if calls_full {
        limit.get_or_insert(Limit::Calls);
    }
    (limit, resource)
}

/// The gateway's limit as records name it.
fn gateway_limit(kind: proctor_gateway::LimitKind) -> Limit {
    match kind {
        proctor_gateway::LimitKind::Tokens => Limit::Tokens,
        proctor_gateway::LimitKind::CostUsd => Limit::CostUsd,
        proctor_gateway::LimitKind::Requests => Limit::Requests,
    }
}

/// The trial's init was killed after the agent ran (`why`), taking the workspace's changes
/// with it. When a limit of the trial's own (`memory`, `processes`, `disk`) was reached, that
/// is the agent's doing: the trial is graded from what was kept, and the lost workspace is a
/// capture note and a change (the workspace root, `.`, added with no content), so that no rule
/// about the workspace can pass on changes nobody could see. Otherwise it is a harness fault.
fn init_lost(
    why: &str,
    resource: Option<Limit>,
    end: &mut EndState,
    capture_notes: &mut Vec<CaptureNote>,
    notes: &mut Notes,
) {
    match resource.filter(|r| *r != Limit::Output) {
        Some(limit) => {
            capture_notes.push(CaptureNote::new(
                ".",
                format!(
                    "the workspace's changes were lost: the trial's init was killed at its {limit} limit ({why})"
                ),
            ));
            end.changes.push(FileChange {
                dir: true,
                ..FileChange::named(".", ChangeKind::Added)
            });
        }
        None => notes.push(format!(
            "the sandbox failed: the sandbox init ended without a report: {why}"
        )),
    }
}

/// The most bytes of an answer a record keeps (and grades): past it, its first and last halves
/// with a line marking the cut, and the trial's `limit_reached` is `output`. A command agent's
/// answer is its whole stdout; `answer.txt` keeps all of what was captured.
pub const MAX_ANSWER_BYTES: usize = 1 << 20;

/// `answer`, cut to [`MAX_ANSWER_BYTES`] when it is longer; and whether it was.
fn bounded_answer(answer: String) -> (String, bool) {
    if answer.len() <= MAX_ANSWER_BYTES {
        return (answer, false);
    }
    let half = MAX_ANSWER_BYTES / 2;
    let mut head_end = half;
    while !answer.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let mut tail_start = answer.len() - half;
    while !answer.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    let cut = tail_start - head_end;
    let kept = format!(
        "{}\n[proctor: {cut} of its {} bytes cut here: a record keeps the first and last {} KiB of an answer; answer.txt keeps it whole]\n{}",
        &answer[..head_end],
        answer.len(),
        half >> 10,
        &answer[tail_start..]
    );
    (kept, true)
}

/// The resource limit the trial reached, if any: memory or processes (the control group's
/// counters), then disk (the trial's tmpfs was full), then output (the agent's output, or the
/// answer kept in the record, was cut).
/// Releases the trial's control group.
fn resource_limit_reached(
    ctx: &RunContext,
    launched: &mut Launched,
    executed: &Executed,
    answer_cut: bool,
) -> Option<Limit> {
    let cgroup = launched.cgroup.take();
    let from_cgroup = cgroup.as_ref().and_then(|c| c.reached());
    if let (Some(cg), Ok(run)) = (cgroup, &ctx.cgroups) {
        run.release(cg);
    }
    let b = &executed.report.bounds;
    from_cgroup
        .map(|r| r.limit())
        .or(b.disk_full.then_some(Limit::Disk))
        .or((b.stdout_cut > 0 || b.stderr_cut > 0 || answer_cut).then_some(Limit::Output))
}

/// Writes the agent's transcript, answer and raw output into the trial's folder; a file that
/// would be empty is not written. Gives a note for each that could not be written.
fn write_agent_output(
    trial_dir: &Path,
    output: &AgentOutput,
    stdout: &[u8],
    stderr: &[u8],
) -> Notes {
    let mut notes = Notes::default();
    let mut transcript = String::new();
    for v in &output.transcript {
        transcript.push_str(&v.to_string());
        transcript.push('\n');
    }
    if output.events_dropped > 0 {
        let cut = serde_json::json!({
            "type": "proctor_cut",
            "events_dropped": output.events_dropped,
            "why": "the transcript reached its bound; agent.stdout keeps the agent's output",
        });
        transcript.push_str(&cut.to_string());
        transcript.push('\n');
    }
    // When the answer is the agent's (large) stdout, a `command` agent's, its bytes are kept
    // once: in `answer.txt`, with `agent.stdout.tail` holding the whitespace the answer left off.
    let tail = answer_tail(&output.answer, stdout);
    let stdout = if tail.is_some() { &[][..] } else { stdout };
    // A file that would be empty is not written: its absence means "nothing" (one inode less
    // per trial on the store's disk, where inode allocation is the costliest step). A file
    // with the same bytes as one written before it (a scripted agent's stdout is its
    // transcript) is a second name for that one: a hard link, no second inode or copy.
    let mut written: Vec<(&[u8], PathBuf)> = Vec::new();
    for (name, bytes) in [
        ("transcript.jsonl", transcript.as_bytes()),
        ("answer.txt", output.answer.as_bytes()),
        ("agent.stdout", stdout),
        (STDOUT_TAIL, tail.unwrap_or_default()),
        ("agent.stderr", stderr),
    ] {
        if bytes.is_empty() {
            continue;
        }
        let path = trial_dir.join(name);
        let twin = written.iter().find(|(b, _)| *b == bytes);
        if twin.is_some_and(|(_, first)| std::fs::hard_link(first, &path).is_ok()) {
            continue;
        }
        // Written in place, not through a temporary file and a rename: the folder was emptied
        // for this trial, and nothing in it counts before its trial.json (a trial cut short here
        // is not finished, and its folder is emptied again when it runs).
        let new_file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, bytes));
        match new_file {
            Ok(()) => written.push((bytes, path)),
            Err(e) => notes.failed(&format!("cannot write {name}"), &std::io::Error::other(e)),
        }
    }
    notes
}

/// Where a trial whose answer is its stdout keeps what followed the answer in it (trailing
/// whitespace); `agent.stdout` is then not written: it is `answer.txt` followed by this file.
pub const STDOUT_TAIL: &str = "agent.stdout.tail";

/// The most bytes of trailing whitespace kept apart for a stdout stored once; past it both
/// files are written, as they are for any other agent.
const MAX_STDOUT_TAIL: usize = 4096;

/// The size from which a stdout that is the answer is stored once. A smaller one is also kept
/// whole as `agent.stdout` (at most this much twice), where readers and scripts find it.
pub const STORE_ONCE_FROM: usize = 4 << 20;

/// When `stdout` is at least [`STORE_ONCE_FROM`] bytes and is `answer` followed only by (at
/// most [`MAX_STDOUT_TAIL`] bytes of) whitespace, that rest; else `None`.
fn answer_tail<'a>(answer: &str, stdout: &'a [u8]) -> Option<&'a [u8]> {
    if stdout.len() < STORE_ONCE_FROM || answer.is_empty() {
        return None;
    }
    let rest = stdout.strip_prefix(answer.as_bytes())?;
    let blank = std::str::from_utf8(rest).is_ok_and(|r| r.trim_end().is_empty());
    (blank && rest.len() <= MAX_STDOUT_TAIL).then_some(rest)
}

/// The agent's stdout as the trial's folder keeps it: `agent.stdout`, or, for a trial whose
/// answer is its stdout, `answer.txt` followed by [`STDOUT_TAIL`]. Empty when there is none.
pub fn read_agent_stdout(trial_dir: &Path) -> Vec<u8> {
    if let Ok(bytes) = std::fs::read(trial_dir.join("agent.stdout")) {
        return bytes;
    }
    match std::fs::read(trial_dir.join(STDOUT_TAIL)) {
        Ok(tail) => {
            let mut bytes = std::fs::read(trial_dir.join("answer.txt")).unwrap_or_default();
            bytes.extend_from_slice(&tail);
            bytes
        }
        Err(_) => Vec::new(),
    }
}

/// The workspace's changes, read from the overlay's upper layer (or against the copy's
/// manifest), each added or changed file copied into the trial's `changes/`. What the agent
/// made that cannot be kept (left on the trial's disk by the sandbox, unreadable, a path too
/// long to read or to store) is a change all the same, added with no content, and a capture
/// note says what and why; the rest is kept. The bytes kept count against `disk_bound`; also
/// returns whether a file was cut at it.
fn workspace_changes(
    prepared: &Prepared,
    executed: &Executed,
    disk_bound: u64,
    notes: &mut Notes,
    capture_notes: &mut Vec<CaptureNote>,
) -> KeptChanges {
    let (diff, root) = match &prepared.workspace {
        TrialWorkspace::Overlay { upper, .. } => {
            (diff::overlay_diff(upper, &prepared.lowers, &[]), upper)
        }
        TrialWorkspace::Copy { dir, start } => {
            // With namespaces the copy was on the trial's disk, and was moved off it.
            let modes = match prepared.paths.namespaces {
                true => diff::CopyModes::MovedOffTheDisk,
                false => diff::CopyModes::Own,
            };
            (diff::manifest_diff(&start.manifest, (dir, modes), &[]), dir)
        }
    };
    let bounds = &executed.report.bounds;
    let layer = Layer {
        place: Place::Workspace,
        root,
        to: prepared.paths.trial_dir.join("changes"),
        left_out: (&bounds.left_out, bounds.left_out_more),
    };
    layer.keep(diff, disk_bound, executed, notes, capture_notes)
}

/// The folder of a trial that keeps what its agent changed outside the workspace (as
/// `changes/` keeps the workspace's), where its checks see the agent's root.
pub const ROOT_CHANGES: &str = "root";

/// In an image whose checks see the agent's root (`check_root = "agent"`): what the agent
/// changed outside the workspace, read from the root's upper layer (carried out of the
/// trial's disk) against the image and kept in the trial's `root/` as the workspace's changes
/// are in `changes/`. The folders and empty files the sandbox made in that layer to mount the
/// workspace, HOME, `/tmp` and its binds on are its own, not the agent's, and are left out.
/// Nothing (and no `root/`) otherwise.
fn root_changes(
    launched: &Launched,
    image: Option<&crate::image::TrialImage>,
    (trial_dir, executed): (&Path, &Executed),
    disk_bound: u64,
    notes: &mut Notes,
    capture_notes: &mut Vec<CaptureNote>,
) -> KeptChanges {
    let (Some(root_image), Some(image)) = (&launched.spec.root_image, image) else {
        return KeptChanges::default();
    };
    if !root_image.keep_upper {
        return KeptChanges::default();
    }
    let upper = &root_image.upper;
    let diff = diff::overlay_diff(upper, std::slice::from_ref(&image.rootfs), &[]).map(|mut d| {
        let points = proctor_sandbox::mount_points(&launched.spec);
        d.changes.retain(|c| !is_mount_point(upper, c, &points));
        d
    });
    let bounds = &executed.report.bounds;
    let layer = Layer {
        place: Place::Root,
        root: upper,
        to: trial_dir.join(ROOT_CHANGES),
        left_out: (&bounds.root_left_out, bounds.root_left_out_more),
    };
    layer.keep(diff, disk_bound, executed, notes, capture_notes)
}

/// Whether a change of the root's upper layer is only a mount point the sandbox made: an added
/// folder on the way to (or at) one of `points`, or an added empty file at one.
fn is_mount_point(upper: &Path, c: &diff::Change, points: &[PathBuf]) -> bool {
    if c.kind != diff::ChangeKind::Added {
        return false;
    }
    let inside = Path::new("/").join(&c.path);
    match c.entry {
        diff::EntryKind::Dir => points.iter().any(|p| p.starts_with(&inside)),
        diff::EntryKind::File => {
            points.contains(&inside)
                && std::fs::symlink_metadata(upper.join(&c.path)).is_ok_and(|m| m.len() == 0)
        }
        _ => false,
    }
}

/// Which layer of the agent's changes a [`Layer`] keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// The workspace (paths relative to it).
    Workspace,
    /// The image's root outside the workspace (paths relative to `/`).
    Root,
}

impl Place {
    /// The path a capture note names for a path of this layer.
    fn note_path(self, rel: &str) -> String {
        match self {
            Place::Workspace => rel.to_string(),
            Place::Root => format!("/{rel}"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Place::Workspace => "workspace",
            Place::Root => "root",
        }
    }
}

/// A layer of the agent's changes to keep: where it is read, where it is kept, and what the
/// sandbox could not carry out of the trial's disk (listed, and a count of the rest).
struct Layer<'a> {
    place: Place,
    root: &'a Path,
    to: PathBuf,
    left_out: (&'a [proctor_sandbox::LeftOut], u64),
}

impl Layer<'_> {
    /// Keeps the changes of `diff` (see [`workspace_changes`]).
    fn keep(
        &self,
        diff: Result<diff::Diff, diff::DiffError>,
        disk_bound: u64,
        executed: &Executed,
        notes: &mut Notes,
        capture_notes: &mut Vec<CaptureNote>,
    ) -> KeptChanges {
        let place = self.place;
        let mut diff = match diff {
            Ok(d) => d,
            Err(e) => {
                notes.push(format!("cannot read the {} changes: {e}", place.name()));
                return KeptChanges::default();
            }
        };
        let mut layer_notes = Vec::new();
        let (left_out, left_out_more) = self.left_out;
        for l in left_out {
            layer_notes.push(CaptureNote::new(
                &l.path.to_string_lossy(),
                format!("not carried out of the trial's disk: {}", l.cause),
            ));
            if !diff.changes.iter().any(|c| c.path == l.path) {
                diff.changes.push(diff::Change {
                    path: l.path.clone(),
                    kind: diff::ChangeKind::Added,
                    entry: diff::EntryKind::Other,
                    mode_before: None,
                    mode_after: None,
                });
            }
        }
        if left_out_more > 0 {
            layer_notes.push(CaptureNote::new(
                ".",
                format!("{left_out_more} more entries were not carried out of the trial's disk"),
            ));
        }
        let mut unread: std::collections::HashSet<PathBuf> = std::collections::HashSet::new();
        for u in &diff.unread {
            layer_notes.push(CaptureNote::new(
                &u.path.to_string_lossy(),
                format!("could not be read: {}", u.cause),
            ));
            unread.insert(u.path.clone());
        }
        unread.extend(left_out.iter().map(|l| l.path.clone()));
        diff.changes
            .sort_by(|a, b| proctor_fs::rel::cmp_paths(&a.path, &b.path));
        let kept = capture_changes(
            self.root,
            std::mem::take(&mut diff.changes),
            &self.to,
            &unread,
            Some(disk_bound),
            executed.report.isolation.ids.as_ref(),
            &mut layer_notes,
        );
        capture_notes.extend(layer_notes.into_iter().map(|n| CaptureNote {
            path: if n.path == "." && place == Place::Root {
                "/".into()
            } else {
                place.note_path(&n.path)
            },
            cause: n.cause,
        }));
        kept.unwrap_or_else(|e| {
            notes.failed(&format!("cannot capture the {} changes", place.name()), &e);
            KeptChanges::default()
        })
    }
}

/// What [`capture_changes`] kept.
#[derive(Debug, Default)]
pub struct KeptChanges {
    /// The change record, as written to `changes.json`.
    pub changes: Vec<FileChange>,
    /// Whether a file's content was cut at the bound: it is kept as its head, with its whole
    /// size and hash in the record.
    pub bound_reached: bool,
    /// The changed entries that are neither folders nor regular files, as the diff found them.
    pub not_files: NotFiles,
}

/// The changed entries of one tree that are neither folders nor regular files, by their paths
/// in the change record: what the watch of the checks tells apart without reading a folder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NotFiles {
    /// Symbolic links.
    pub links: std::collections::BTreeSet<String>,
    /// FIFOs, sockets, devices, and entries whose kind is not known (left out of the trial's
    /// disk).
    pub others: std::collections::BTreeSet<String>,
}

/// The file in a trial's `changes/` that lists the entries kept without content:
/// [`SpecialEntry`]s, so that a rescore can rebuild them.
pub const SPECIAL_ENTRIES: &str = "special.json";

/// An entry of the end state that no file under `changes/files/` holds: a symlink (with its
/// target's exact bytes), a FIFO or a socket. Listed in `changes/special.json`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SpecialEntry {
    /// The path, as in the change record.
    pub path: String,
    /// What it is.
    pub kind: SpecialKind,
    /// A symlink's target, byte for byte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Vec<u8>>,
}

/// The kind of a [`SpecialEntry`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpecialKind {
    /// A symbolic link.
    Symlink,
    /// A named pipe.
    Fifo,
    /// A socket (made again unbound).
    Socket,
}

/// Copies every added or changed file into `to/files/` and records the list in
/// `to/changes.json` (and its symlinks, FIFOs and sockets in `to/special.json`), so the end
/// state can be rebuilt from fixture + mutation + changes. A trial that changed nothing gets no
/// `to/` at all, and one that changed no file's content no `to/files/`. A file in `unread`, or
/// one whose content cannot be read or kept (a path too long for the store), is listed with no
/// content and noted in `capture_notes`; only a failure of the store itself (writing
/// `changes.json`, a full disk) is an error.
///
/// What is kept is harmless and faithful: no kept file has a set-user-ID, set-group-ID or
/// sticky bit (the record keeps the real mode); a sparse file keeps its holes; a file with
/// several names is kept once, its other names hard links to it. The bytes of data kept count
/// against `max_bytes`: a file past it is kept as its head, with its whole size and hash in the
/// record and a capture note.
pub fn capture_changes(
    root: &Path,
    changes: Vec<diff::Change>,
    to: &Path,
    unread: &std::collections::HashSet<PathBuf>,
    max_bytes: Option<u64>,
    ids: Option<&IdMapping>,
    capture_notes: &mut Vec<CaptureNote>,
) -> std::io::Result<KeptChanges> {
    let _ = proctor_sandbox::remove_tree(to);
    if changes.is_empty() {
        return Ok(KeptChanges::default());
    }
    std::fs::create_dir_all(to)?;
    let mut kept = KeptChanges::default();
    // One record per change, made once: grown by doubling, a list of a million changes would
    // hold half as many again at its last growth.
    kept.changes.reserve_exact(changes.len());
    let mut special = Vec::new();
    let mut links: Links<(PathBuf, String, u64)> = Links::default();
    let mut left = max_bytes;
    // Where file contents are kept: every write resolved beneath it, through no link.
    let mut files: Option<std::io::Result<proctor_fs::Beneath>> = None;
    // The folders' times (by their place in the list), given back once all they hold is kept.
    let mut dir_times: Vec<(usize, Mtime)> = Vec::new();
    // The end state read by open folders: a path past PATH_MAX is read like any other.
    let mut deep = proctor_fs::Deep::open(root)?;
    for c in changes {
        let mut rec = change_record(&c);
        // (Most often nothing is unread: no path of 20 KB is hashed to learn it.)
        let live =
            rec.kind != ChangeKind::Deleted && (unread.is_empty() || !unread.contains(&c.path));
        match c.entry {
            diff::EntryKind::Symlink => kept.not_files.links.insert(rec.path.clone()),
            diff::EntryKind::Other => kept.not_files.others.insert(rec.path.clone()),
            diff::EntryKind::File | diff::EntryKind::Dir => false,
        };
        // The entry, by a path the system takes whatever its length.
        let src = if live {
            deep.reach(&c.path).map_err(|e| e.to_string())
        } else {
            Err(String::new())
        };
        if let Ok(src) = &src {
            rec.owner = ids.and_then(|ids| owner_inside(src, ids));
            rec.mtime = mtime_of(src);
            if let (true, Some(t)) = (c.entry == diff::EntryKind::Dir, rec.mtime) {
                dir_times.push((kept.changes.len(), t));
            }
        }
        if let (true, Err(e)) = (live, &src) {
            capture_notes.push(CaptureNote::new(
                &rec.path,
                format!("it could not be reached: {e}"),
            ));
        } else if let (diff::EntryKind::File, Ok(src)) = (c.entry, &src) {
            let kept_file = files
                .get_or_insert_with(|| proctor_fs::Beneath::create(&to.join("files")))
                .as_ref()
                // (The system's error again, so that a full store is told apart.)
                .map_err(|e| {
                    e.raw_os_error().map_or_else(
                        || std::io::Error::new(e.kind(), e.to_string()),
                        std::io::Error::from_raw_os_error,
                    )
                })
                .and_then(|files| {
                    keep_file(
                        src,
                        (files, &c.path),
                        (c.mode_after, rec.mtime),
                        &mut left,
                        &mut links,
                    )
                });
            record_kept_file(kept_file, &mut rec, &mut kept.bound_reached, capture_notes)?;
        } else if let (diff::EntryKind::Symlink | diff::EntryKind::Other, Ok(src)) = (c.entry, &src)
        {
            if let Some(entry) = special_entry(src, &rec.path) {
                special.push(entry);
            }
        }
        kept.changes.push(rec);
    }
    if let Some(Ok(files)) = &files {
        keep_dir_times(files, &kept.changes, &dir_times);
    }
    if !special.is_empty() {
        proctor_store::atomic_write_json_unsynced(to.join(SPECIAL_ENTRIES), &special)
            .map_err(std::io::Error::other)?;
    }
    write_json_streamed(&to.join("changes.json"), &kept.changes)?;
    Ok(kept)
}

/// The record of one change of the diff, before anything of its content is read.
fn change_record(c: &diff::Change) -> FileChange {
    let kind = match c.kind {
        diff::ChangeKind::Added => ChangeKind::Added,
        diff::ChangeKind::Modified => ChangeKind::Changed,
        diff::ChangeKind::ModeChanged => ChangeKind::ModeChanged,
        diff::ChangeKind::Deleted => ChangeKind::Deleted,
    };
    FileChange {
        // On Linux `/` is the only separator: a backslash is a byte of the name, kept.
        path: c.path.to_string_lossy().into_owned(),
        // A name that is not UTF-8 keeps its exact bytes too.
        path_hex: FileChange::hex_of(&c.path),
        kind,
        dir: c.entry == diff::EntryKind::Dir,
        mode: c.mode_after,
        hash: None,
        size: None,
        owner: None,
        mtime: None,
    }
}

/// Puts what keeping a file's content gave into its record: its hash and size, and a capture
/// note where the disk bound cut it (`bound_reached` set) or it could not be kept. A full store
/// is the one error given back: the trial's evidence would be incomplete.
fn record_kept_file(
    kept_file: std::io::Result<KeptFile>,
    rec: &mut FileChange,
    bound_reached: &mut bool,
    capture_notes: &mut Vec<CaptureNote>,
) -> std::io::Result<()> {
    match kept_file {
        Ok(k) => {
            if !k.complete {
                *bound_reached = true;
                capture_notes.push(CaptureNote::new(
                    &rec.path,
                    format!(
                        "kept as its first {} bytes of {}: the captured changes reached the trial's disk bound (disk_mb)",
                        k.kept_bytes, k.size
                    ),
                ));
            }
            rec.hash = Some(k.hash);
            rec.size = Some(k.size);
        }
        Err(e) if proctor_store::is_out_of_space(&e) => return Err(e),
        Err(e) => capture_notes.push(CaptureNote::new(
            &rec.path,
            format!("its content could not be kept: {e}"),
        )),
    }
    Ok(())
}

/// Writes `value` as the store's pretty JSON (with a final newline) to `path`, atomically,
/// serialized straight into the file: a change list of 100 MB of paths (a tree 10,000 levels
/// deep) is not held a second time as text. (A change list holds no floating-point number,
/// the one thing the store's own writer checks beyond this.)
fn write_json_streamed<T: serde::Serialize + ?Sized>(
    path: &Path,
    value: &T,
) -> std::io::Result<()> {
    use std::io::Write;
    let file = proctor_fs::AtomicFile::create(path).map_err(std::io::Error::other)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 16, file);
    serde_json::to_writer_pretty(&mut out, value)?;
    out.write_all(b"\n")?;
    out.into_inner()
        .map_err(|e| e.into_error())?
        .commit_unsynced()
        .map_err(std::io::Error::other)
}

/// The modification time of the end-state entry at `src` (not followed); `None` when it
/// cannot be read.
fn mtime_of(src: &Path) -> Option<Mtime> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(src).ok()?;
    Some(Mtime {
        sec: m.mtime(),
        nsec: u32::try_from(m.mtime_nsec()).unwrap_or(0),
    })
}

/// Gives each kept folder (of `files`; `dir_times` names them by their place in `changes`)
/// the time its folder in the end state had, deepest first (a folder kept only to hold a
/// change is left as it is).
fn keep_dir_times(
    files: &proctor_fs::Beneath,
    changes: &[FileChange],
    dir_times: &[(usize, Mtime)],
) {
    for (i, t) in dir_times.iter().rev() {
        let Some(c) = changes.get(*i) else { continue };
        if let Ok(fd) = files.dir(&c.exact_path()) {
            let _ = proctor_fs::times::set_mtime(std::os::fd::AsFd::as_fd(&fd), (t.sec, t.nsec));
        }
    }
}

/// The owner of the end-state entry at `src` (not followed), as ids inside the trial whose
/// user namespace mapped `ids`: the one the sandbox recorded where it gave the entry back to
/// an unprivileged caller, else its owner read through the map. `None` for root (0:0), for an
/// id the map does not hold, or what cannot be read.
fn owner_inside(src: &Path, ids: &IdMapping) -> Option<Owner> {
    use std::os::unix::fs::MetadataExt;
    let owner = match proctor_sandbox::recorded_owner(src) {
        Some((uid, gid)) => Owner { uid, gid },
        None => {
            let m = std::fs::symlink_metadata(src).ok()?;
            Owner {
                uid: ids.uid_inside(m.uid())?,
                gid: ids.gid_inside(m.gid())?,
            }
        }
    };
    (owner.uid != 0 || owner.gid != 0).then_some(owner)
}

/// The symlink, FIFO or socket at `src` as a [`SpecialEntry`] named `path`; `None` for
/// anything else (a device node is never kept) or what cannot be read.
fn special_entry(src: &Path, path: &str) -> Option<SpecialEntry> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::FileTypeExt;
    let ft = std::fs::symlink_metadata(src).ok()?.file_type();
    let (kind, target) = if ft.is_symlink() {
        let t = std::fs::read_link(src).ok()?;
        (
            SpecialKind::Symlink,
            Some(t.as_os_str().as_bytes().to_vec()),
        )
    } else if ft.is_fifo() {
        (SpecialKind::Fifo, None)
    } else if ft.is_socket() {
        (SpecialKind::Socket, None)
    } else {
        return None;
    };
    Some(SpecialEntry {
        path: path.to_string(),
        kind,
        target,
    })
}

/// What [`keep_file`] kept of one file.
struct KeptFile {
    hash: String,
    size: u64,
    kept_bytes: u64,
    complete: bool,
}

/// Keeps one changed file in the capture: its data (holes stay holes, at most `left` bytes of
/// it, which it lowers), with its mode cleared of special bits but always readable and
/// writable by the store's own user (the record keeps the real mode: a mode-000 file must not
/// lock the store). A later name of a file kept already is a hard link to the first, at no
/// cost. It is kept at `rel` beneath `files`, resolved through no link. Returns its BLAKE3
/// (hex) and size, whole even when cut.
fn keep_file(
    src: &Path,
    (files, rel): (&proctor_fs::Beneath, &Path),
    (mode, mtime): (Option<u32>, Option<Mtime>),
    left: &mut Option<u64>,
    links: &mut Links<(PathBuf, String, u64)>,
) -> std::io::Result<KeptFile> {
    use rustix::fs::{AtFlags, Mode, OFlags};
    use std::os::unix::fs::OpenOptionsExt;
    let (parent, name) = files.parent(rel, 0o755)?;
    let input = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(src)?;
    let meta = input.metadata()?;
    proctor_fs::beneath::clear_at(std::os::fd::AsFd::as_fd(&parent), &name)?;
    if let Some((first, hash, size)) = links.copied(&meta) {
        let (fparent, fname) = files.parent(first, 0o755)?;
        rustix::fs::linkat(&fparent, &fname, &parent, &name, AtFlags::empty())?;
        return Ok(KeptFile {
            hash: hash.clone(),
            size: *size,
            kept_bytes: 0,
            complete: true,
        });
    }
    let output = std::fs::File::from(rustix::fs::openat(
        &parent,
        &name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?);
    let copied = copy::copy_data(
        &input,
        &output,
        CopyOptions {
            max_data: *left,
            hash: true,
            punch_source: false,
        },
    )?;
    if let Some(l) = left.as_mut() {
        *l = l.saturating_sub(copied.data_written);
    }
    let perm = copy::harmless_mode(mode.unwrap_or(0o644)) | 0o600;
    rustix::fs::fchmod(&output, Mode::from_raw_mode(perm))?;
    if let Some(t) = mtime {
        proctor_fs::times::set_mtime(std::os::fd::AsFd::as_fd(&output), (t.sec, t.nsec))?;
    }
    let hash = copied.hash.unwrap_or_default();
    if copied.complete {
        links.remember(&meta, (rel.to_path_buf(), hash.clone(), copied.size));
    }
    Ok(KeptFile {
        hash,
        size: copied.size,
        kept_bytes: copied.data_written,
        complete: copied.complete,
    })
}

/// The MCP sessions' records from the MCP log beside the calls log.
fn mcp_calls(calls_log: &Path, notes: &mut Notes) -> Vec<proctor_score::mcp::McpRecord> {
    match crate::calls::read_mcp_log(&calls_log.with_file_name(crate::calls::MCP_LOG)) {
        Ok((records, bad)) => {
            if bad > 0 {
                notes.push(format!("{bad} malformed line(s) in mcp.jsonl were skipped"));
            }
            records
        }
        Err(e) => {
            notes.push(format!("cannot read mcp.jsonl: {e}"));
            Vec::new()
        }
    }
}

/// The interface calls from the calls log.
fn calls(log: &Path, notes: &mut Notes) -> Vec<CallRecord> {
    match read_log(log) {
        Ok((calls, bad)) => {
            if bad > 0 {
                notes.push(format!(
                    "{bad} malformed line(s) in calls.jsonl were skipped"
                ));
            }
            calls
        }
        Err(e) => {
            notes.push(format!("cannot read calls.jsonl: {e}"));
            Vec::new()
        }
    }
}

/// Each suite service's folder copied from `from/NAME` into `trial_dir/services/NAME`, and its
/// end state (state file, events) read from the copy.
fn service_ends(
    services: &[Service],
    from: &Path,
    trial_dir: &Path,
    notes: &mut Notes,
) -> BTreeMap<String, ServiceEnd> {
    let mut out = BTreeMap::new();
    for s in services {
        let name = s.name.get_ref();
        let to = trial_dir.join("services").join(name);
        let _ = proctor_sandbox::remove_tree(&to);
        if let Err(e) = copy_tree(&from.join(name), &to) {
            notes.failed(&format!("cannot copy the state of service `{name}`"), &e);
        }
        let state = s.state.as_ref().map(|f| to.join(f.get_ref()));
        let mut service = service_end(state.as_deref());
        service.state_file = s.state.as_ref().map(|f| f.get_ref().clone());
        if let Some(end) = &state {
            service.state_changed =
                state_changed(&service, end, &to.join(proctor_sandbox::STATE_AT_START));
        }
        match read_events(&to.join("events.jsonl")) {
            Ok(events) => service.events = events,
            Err(e) => notes.push(format!("service `{name}`: {e}")),
        }
        out.insert(name.clone(), service);
    }
    out
}

/// The largest state file compared as JSON when its bytes differ from the copy made at the
/// start: a larger one (whose end state grading already holds parsed) is not parsed twice.
const STATE_COMPARED_MAX: u64 = 16 << 20;

/// Whether a service's end state (`end`, its file; `service.state`, parsed) differs from the
/// copy of it made before the agent started (`at_start`): the same bytes are the same state,
/// else both are compared as JSON. `None` when that cannot be told: either is missing or not
/// JSON, or they differ in bytes and one is larger than [`STATE_COMPARED_MAX`].
fn state_changed(service: &ServiceEnd, end: &Path, at_start: &Path) -> Option<bool> {
    let end_state = service.state.as_ref()?;
    let (mut a, mut b) = (open_no_follow(at_start).ok()?, open_no_follow(end).ok()?);
    if same_bytes(&mut a, &mut b).ok()? {
        return Some(false);
    }
    let sizes = (a.metadata().ok()?.len(), b.metadata().ok()?.len());
    if sizes.0 > STATE_COMPARED_MAX || sizes.1 > STATE_COMPARED_MAX {
        return None;
    }
    let a = open_no_follow(at_start).ok()?;
    let start: serde_json::Value = serde_json::from_reader(std::io::BufReader::new(a)).ok()?;
    Some(&start != end_state)
}

/// Whether two open files hold the same bytes, read in step.
fn same_bytes(a: &mut std::fs::File, b: &mut std::fs::File) -> std::io::Result<bool> {
    use std::io::Read;
    if a.metadata()?.len() != b.metadata()?.len() {
        return Ok(false);
    }
    let (mut x, mut y) = (vec![0u8; 64 << 10], vec![0u8; 64 << 10]);
    loop {
        let n = a.read(&mut x)?;
        if n == 0 {
            return Ok(true);
        }
        b.read_exact(&mut y[..n])?;
        if x[..n] != y[..n] {
            return Ok(false);
        }
    }
}

/// Reads a service's `events.jsonl` line by line (never whole); a missing file is no events, a
/// malformed line an error.
pub fn read_events(path: &Path) -> Result<Vec<ServiceEvent>, String> {
    use std::io::BufRead;
    let file = match open_no_follow(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot read events.jsonl: {e}")),
    };
    let mut events = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| format!("cannot read events.jsonl: {e}"))?;
        if line.trim().is_empty() {
            continue;
        }
        let event =
            serde_json::from_str(&line).map_err(|e| format!("events.jsonl line {}: {e}", i + 1))?;
        events.push(event);
    }
    Ok(events)
}

/// A file opened for reading, never through a symlink.
fn open_no_follow(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// A service's end state from its state file (`None`: the suite names none).
pub fn service_end(state: Option<&Path>) -> ServiceEnd {
    let failed = |why: String| ServiceEnd {
        state_error: Some(why),
        ..ServiceEnd::default()
    };
    let Some(path) = state else {
        return failed("the suite names no state file for this service".into());
    };
    match open_no_follow(path) {
        Err(e) => failed(format!(
            "the service wrote no {}: {e}",
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        )),
        // Parsed from a buffered reader: a large state is never held twice (bytes and value).
        Ok(file) => match serde_json::from_reader(std::io::BufReader::new(file)) {
            Ok(v) => ServiceEnd {
                state: Some(v),
                ..ServiceEnd::default()
            },
            Err(e) => failed(format!("the state file is not JSON: {e}")),
        },
    }
}

/// How the agent ended, from the sandbox's report.
pub fn agent_end(executed: &Executed) -> AgentEnd {
    let report = &executed.report;
    // In a task in steps the last turn may be a check's: the agent ended as its last turn did.
    let last_agent_turn = executed
        .steps
        .as_ref()
        .and(executed.spoken.as_ref())
        .and_then(|s| s.said.last())
        .and_then(|s| report.turns.get(s.turn.checked_sub(1)?));
    let (exit_code, signal, timed_out) = match last_agent_turn {
        Some(t) => (
            t.exit.and_then(|e| e.code),
            t.exit.and_then(|e| e.signal),
            t.timed_out,
        ),
        None => (report.exit_code, report.signal, report.timed_out),
    };
    AgentEnd {
        started: report.not_started.is_none(),
        not_started: report.not_started.clone(),
        exit_code,
        signal,
        timed_out,
        wall_seconds: report.wall.as_secs_f64(),
        cpu_seconds: report.agent_cpu.map(|d| d.as_secs_f64()),
        not_started_kind: executed.not_started_kind,
    }
}

/// What the agent CLI's own permission layer refused, logged as `denied` calls after the
/// calls log's own.
/// The CLI's denials as `denied` calls, those proctor can confirm only
/// ([`crate::trial::denials`], from what the model `asked` for); the rest are kept as the CLI's
/// unconfirmed report.
fn add_denied_calls(
    end: &mut EndState,
    denied: &[DeniedCall],
    permissions: proctor_agents::ShellPermissions,
    allowed: &[Allowed],
    asked: Option<&crate::trial::denials::Asked>,
) {
    let (confirmed, unconfirmed) =
        crate::trial::denials::confirm(denied, permissions, allowed, asked);
    let mut next_seq = end.calls.iter().map(|c| c.seq).max().unwrap_or(0);
    for d in confirmed {
        next_seq += 1;
        end.calls
            .push(denied_call(next_seq, d, allowed, end.agent.wall_seconds));
    }
    end.unconfirmed_denials = unconfirmed;
}

/// A call the agent CLI's permission layer refused, as a calls-log record.
pub fn denied_call(seq: u64, d: &DeniedCall, allowed: &[Allowed], at: f64) -> CallRecord {
    let argv: Vec<String> = d
        .command
        .as_deref()
        .map(|c| c.split_whitespace().map(String::from).collect())
        .filter(|v: &Vec<String>| !v.is_empty())
        .unwrap_or_else(|| vec![d.tool.clone()]);
    // Attribute it to the interface command it names, when it names one.
    let command = allowed
        .iter()
        .find(|a| argv.first() == Some(&a.name))
        .map_or_else(|| d.tool.clone(), |a| a.name.clone());
    CallRecord {
        seq,
        command,
        argv,
        argv_hex: Default::default(),
        argv_cut: None,
        cwd: String::new(),
        stdin_bytes: 0,
        stdin_hash: String::new(),
        stdin_head: String::new(),
        stdin_terminal: false,
        exit: None,
        denied: Some(format!("denied by the agent CLI: {}", d.reason)),
        stdout_bytes: 0,
        stdout_head: String::new(),
        stderr_bytes: 0,
        stderr_head: String::new(),
        start: at,
        end: None,
    }
}

/// The cost ledgers: usage from the wire and as the agent reported it, kept apart; money for
/// real agents at the suite's prices.
fn ledgers(ctx: &RunContext, trial: &Trial, wire: Option<Usage>, output: &AgentOutput) -> Ledgers {
    let mut ledgers = Ledgers {
        wire,
        agent_reported: output.usage.as_ref().map(|u| Usage {
            source: "agent-reported".into(),
            input: u.input,
            output: u.output,
            cache_read: u.cache_read,
            cache_write: u.cache_write,
            requests: u.requests,
        }),
        agent_reported_cost_usd: output.cost_usd,
        ..Ledgers::default()
    };
    if trial.real_agent() {
        let usage = ledgers
            .wire
            .clone()
            .or_else(|| ledgers.agent_reported.clone())
            .unwrap_or_default();
        match crate::model::cost(ctx.suite, trial.variant.model.as_deref(), &usage) {
            Ok(usd) => ledgers.cost_usd = Some(usd),
            Err(missing) => ledgers.cost_missing = missing,
        }
    }
    ledgers
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::time::Duration;

    use proctor_sandbox::{FullStop, Isolation, SandboxReport, WorkspaceKind};

    use super::*;

    fn change(path: &str, kind: diff::ChangeKind, mode: Option<u32>) -> diff::Change {
        diff::Change {
            path: PathBuf::from(path),
            kind,
            entry: diff::EntryKind::File,
            mode_before: None,
            mode_after: mode,
        }
    }

    #[test]
    fn changed_files_are_kept_with_their_hash_size_and_mode() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("upper");
        std::fs::create_dir_all(root.join("bin")).unwrap();
        std::fs::write(root.join("bin/run.sh"), "#!/bin/sh\n").unwrap();
        std::fs::write(root.join("notes.txt"), "hello").unwrap();
        let to = dir.path().join("trial/changes");
        let list = capture_changes(
            &root,
            vec![
                change("bin/run.sh", diff::ChangeKind::Added, Some(0o100755)),
                change("notes.txt", diff::ChangeKind::Modified, Some(0o100644)),
                change("old.txt", diff::ChangeKind::Deleted, None),
            ],
            &to,
            &Default::default(),
            None,
            None,
            &mut Vec::new(),
        )
        .unwrap()
        .changes;
        assert_eq!(list.len(), 3);
        assert_eq!(list[0].kind, ChangeKind::Added);
        assert_eq!(list[1].kind, ChangeKind::Changed);
        assert_eq!(list[1].size, Some(5));
        assert_eq!(
            list[1].hash.as_deref(),
            Some(blake3::hash(b"hello").to_hex().as_str())
        );
        assert_eq!(
            (list[2].kind, list[2].hash.as_deref()),
            (ChangeKind::Deleted, None)
        );
        let kept = to.join("files/bin/run.sh");
        assert_eq!(std::fs::read(&kept).unwrap(), b"#!/bin/sh\n");
        assert_eq!(
            std::fs::metadata(&kept).unwrap().permissions().mode() & 0o7777,
            0o755
        );
        assert!(!to.join("files/old.txt").exists());
        let listed: Vec<FileChange> =
            serde_json::from_str(&std::fs::read_to_string(to.join("changes.json")).unwrap())
                .unwrap();
        assert_eq!(listed, list);
    }

    #[test]
    fn kept_files_lose_special_bits_share_links_and_stop_at_the_bound() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("upper");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("a.bin"), vec![7u8; 3000]).unwrap();
        std::fs::hard_link(root.join("a.bin"), root.join("b.bin")).unwrap();
        std::fs::write(root.join("c.bin"), vec![9u8; 3000]).unwrap();
        std::fs::write(root.join("suid"), "x").unwrap();
        let to = dir.path().join("trial/changes");
        let mut notes = Vec::new();
        let kept = capture_changes(
            &root,
            vec![
                change("a.bin", diff::ChangeKind::Added, Some(0o644)),
                change("b.bin", diff::ChangeKind::Added, Some(0o644)),
                change("c.bin", diff::ChangeKind::Added, Some(0o644)),
                change("suid", diff::ChangeKind::Added, Some(0o6755)),
            ],
            &to,
            &Default::default(),
            Some(4000),
            None,
            &mut notes,
        )
        .unwrap();
        let files = to.join("files");
        // The second name is a link: it costs nothing, so c.bin is the one cut.
        assert_eq!(
            std::fs::metadata(files.join("a.bin")).unwrap().ino(),
            std::fs::metadata(files.join("b.bin")).unwrap().ino()
        );
        assert_eq!(std::fs::read(files.join("b.bin")).unwrap(), vec![7u8; 3000]);
        assert!(kept.bound_reached);
        assert_eq!(std::fs::read(files.join("c.bin")).unwrap(), vec![9u8; 1000]);
        let c = &kept.changes[2];
        assert_eq!(c.size, Some(3000), "the whole size is recorded");
        assert_eq!(
            c.hash.as_deref(),
            Some(blake3::hash(&[9u8; 3000]).to_hex().as_str())
        );
        assert!(notes.iter().any(|n| n.path == "c.bin"), "{notes:?}");
        assert_eq!(
            kept.changes[3].mode,
            Some(0o6755),
            "the record keeps the real mode"
        );
        assert_eq!(
            std::fs::metadata(files.join("suid")).unwrap().mode() & 0o7777,
            0o755
        );
    }

    #[test]
    fn a_trial_that_changed_nothing_keeps_no_changes_folder() {
        let dir = tempfile::tempdir().unwrap();
        let to = dir.path().join("changes");
        std::fs::create_dir_all(to.join("files")).unwrap();
        assert!(capture_changes(
            dir.path(),
            Vec::new(),
            &to,
            &Default::default(),
            None,
            None,
            &mut Vec::new()
        )
        .unwrap()
        .changes
        .is_empty());
        assert!(!to.exists(), "a stale folder is removed too");
    }

    #[test]
    fn a_services_state_file_is_read_or_its_absence_explained() {
        let dir = tempfile::tempdir().unwrap();
        let none = service_end(None);
        assert!(none.state.is_none());
        assert!(none.state_error.unwrap().contains("names no state file"));
        let missing = service_end(Some(&dir.path().join("state.json")));
        assert!(missing
            .state_error
            .unwrap()
            .starts_with("the service wrote no state.json"));
        std::fs::write(dir.path().join("bad.json"), "{").unwrap();
        let bad = service_end(Some(&dir.path().join("bad.json")));
        assert!(bad
            .state_error
            .unwrap()
            .starts_with("the state file is not JSON"));
        std::fs::write(dir.path().join("good.json"), r#"{"sent": 1}"#).unwrap();
        let good = service_end(Some(&dir.path().join("good.json")));
        assert_eq!(good.state, Some(serde_json::json!({"sent": 1})));
        assert_eq!(good.state_error, None);
    }

    #[test]
    fn service_events_are_read_line_by_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        assert!(read_events(&path).unwrap().is_empty(), "no file, no events");
        std::fs::write(
            &path,
            "{\"at\": 0.5, \"actor\": \"agent\", \"op\": \"send\", \"id\": \"e-1\"}\n\n",
        )
        .unwrap();
        let events = read_events(&path).unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!((events[0].op.as_str(), events[0].at), ("send", 0.5));
        std::fs::write(
            &path,
            "{\"at\": 0.5, \"actor\": \"agent\", \"op\": \"send\"}\nnot json\n",
        )
        .unwrap();
        let e = read_events(&path).unwrap_err();
        assert!(e.starts_with("events.jsonl line 2:"), "{e}");
    }

    #[test]
    fn a_denied_call_is_attributed_to_the_interface_command_it_names() {
        let allowed = [Allowed {
            name: "chat".into(),
            real: PathBuf::from("/usr/bin/chat"),
        }];
        let denied = DeniedCall {
            tool: "Bash".into(),
            command: Some("chat send --to @mei".into()),
            reason: "not allowed".into(),
            ..DeniedCall::default()
        };
        let c = denied_call(4, &denied, &allowed, 1.5);
        assert_eq!(c.seq, 4);
        assert_eq!(c.command, "chat");
        assert_eq!(c.argv, ["chat", "send", "--to", "@mei"]);
        assert_eq!(
            c.denied.as_deref(),
            Some("denied by the agent CLI: not allowed")
        );
        assert_eq!((c.start, c.exit), (1.5, None));
        // A tool call without a command line is named after its tool.
        let tool_only = DeniedCall {
            tool: "WebFetch".into(),
            reason: "no".into(),
            ..DeniedCall::default()
        };
        let c = denied_call(5, &tool_only, &allowed, 0.0);
        assert_eq!(
            (c.command.as_str(), c.argv.as_slice()),
            ("WebFetch", &["WebFetch".to_string()][..])
        );
    }

    #[test]
    fn denied_calls_are_numbered_after_the_logged_ones() {
        let mut end = EndState::default();
        end.calls.push(denied_call(
            7,
            &DeniedCall {
                tool: "x".into(),
                ..DeniedCall::default()
            },
            &[],
            0.0,
        ));
        let denied = vec![
            DeniedCall {
                tool: "a".into(),
                ..DeniedCall::default()
            },
            DeniedCall {
                tool: "b".into(),
                ..DeniedCall::default()
            },
        ];
        let asked = (
            ["a", "b"]
                .iter()
                .map(|t| proctor_report::export::atif::AskedCall {
                    id: format!("id-{t}"),
                    tool: (*t).into(),
                    input: Default::default(),
                })
                .collect(),
            String::new(),
        );
        add_denied_calls(
            &mut end,
            &denied,
            proctor_agents::ShellPermissions::RefusesEvery,
            &[],
            Some(&asked),
        );
        let seqs: Vec<u64> = end.calls.iter().map(|c| c.seq).collect();
        assert_eq!(seqs, [7, 8, 9]);
    }

    #[test]
    fn agent_output_files_that_would_be_empty_are_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let output = AgentOutput {
            answer: "done".into(),
            transcript: vec![serde_json::json!({"step": 1})],
            ..AgentOutput::default()
        };
        let notes = write_agent_output(dir.path(), &output, b"out", b"");
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("answer.txt")).unwrap(),
            "done"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("transcript.jsonl")).unwrap(),
            "{\"step\":1}\n"
        );
        assert!(dir.path().join("agent.stdout").exists());
        assert!(!dir.path().join("agent.stderr").exists());
    }

    #[test]
    fn a_stdout_that_is_the_transcript_is_a_second_name_for_it() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let line = serde_json::json!({ "type": "answer", "text": "done" });
        let output = AgentOutput {
            answer: "done".into(),
            transcript: vec![line.clone()],
            ..AgentOutput::default()
        };
        let stdout = format!("{line}\n");
        let notes = write_agent_output(dir.path(), &output, stdout.as_bytes(), b"");
        assert!(notes.is_empty(), "{notes:?}");
        let meta = |name: &str| std::fs::metadata(dir.path().join(name)).unwrap();
        assert_eq!(meta("agent.stdout").ino(), meta("transcript.jsonl").ino());
        assert_eq!(read_agent_stdout(dir.path()), stdout.as_bytes());
        assert_eq!(
            std::fs::read(dir.path().join("answer.txt")).unwrap(),
            b"done"
        );
        assert_ne!(meta("answer.txt").ino(), meta("agent.stdout").ino());
        // Different bytes: two files.
        let other = tempfile::tempdir().unwrap();
        write_agent_output(other.path(), &output, b"something else\n", b"");
        let meta = |name: &str| std::fs::metadata(other.path().join(name)).unwrap();
        assert_ne!(meta("agent.stdout").ino(), meta("transcript.jsonl").ino());
        assert_eq!(read_agent_stdout(other.path()), b"something else\n");
    }

    #[test]
    fn a_large_stdout_that_is_the_answer_is_stored_once_and_read_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let answer = format!("the answer\n{}", "a".repeat(STORE_ONCE_FROM));
        let stdout = format!("{answer}\n \n");
        let output = AgentOutput {
            answer: answer.clone(),
            ..AgentOutput::default()
        };
        let notes = write_agent_output(dir.path(), &output, stdout.as_bytes(), b"");
        assert!(notes.is_empty(), "{notes:?}");
        assert!(!dir.path().join("agent.stdout").exists());
        assert_eq!(
            std::fs::read(dir.path().join("answer.txt")).unwrap(),
            answer.as_bytes()
        );
        assert_eq!(read_agent_stdout(dir.path()), stdout.as_bytes());
        // A small one is kept as both, as before.
        let small = tempfile::tempdir().unwrap();
        let output = AgentOutput {
            answer: "finished".into(),
            ..AgentOutput::default()
        };
        write_agent_output(small.path(), &output, b"finished\n", b"");
        assert_eq!(
            std::fs::read(small.path().join("agent.stdout")).unwrap(),
            b"finished\n"
        );
        assert_eq!(read_agent_stdout(small.path()), b"finished\n");
        assert!(!small.path().join(STDOUT_TAIL).exists());
        let big = "a".repeat(STORE_ONCE_FROM);
        assert_eq!(answer_tail("", big.as_bytes()), None);
        assert_eq!(answer_tail(&big, big.as_bytes()), Some(&b""[..]));
        assert_eq!(
            answer_tail("a", big.as_bytes()),
            None,
            "not whitespace after it"
        );
        assert_eq!(answer_tail("a", b"a\n"), None, "small");
    }

    #[test]
    fn a_long_answer_keeps_its_head_and_tail_and_says_so() {
        assert_eq!(bounded_answer("done".into()), ("done".to_string(), false));
        let long = format!("start{}end", "é".repeat(MAX_ANSWER_BYTES));
        let (kept, cut) = bounded_answer(long.clone());
        assert!(cut);
        assert!(
            kept.starts_with("start") && kept.ends_with("éend"),
            "head and tail kept"
        );
        assert!(kept.len() <= MAX_ANSWER_BYTES + 200, "{}", kept.len());
        assert!(kept.contains(&format!("of its {} bytes cut here", long.len())));
    }

    #[test]
    fn the_agents_end_carries_the_kind_of_a_failed_start() {
        let executed = Executed {
            report: SandboxReport {
                exit_code: None,
                signal: None,
                timed_out: false,
                wall: Duration::from_millis(1500),
                agent_cpu: Some(Duration::from_millis(250)),
                services: Vec::new(),
                not_started: Some("guard of api refused".into()),
                isolation: Isolation {
                    namespaces: Vec::new(),
                    workspace: WorkspaceKind::Bind,
                    network: proctor_sandbox::Network::None,
                    read_only_host: false,
                    private_home_and_tmp: false,
                    hidden: Vec::new(),
                    full_stop: FullStop::ProcessGroup,
                    notes: Vec::new(),
                    ids: None,
                    host_view: None,
                    egress: None,
                },
                total: Duration::ZERO,
                bounds: Default::default(),
                turns: Vec::new(),
            },
            not_started_kind: Some(ErrorKind::ServiceGuard),
            init_lost: None,
            spoken: None,
            steps: None,
        };
        let end = agent_end(&executed);
        assert!(!end.started);
        assert_eq!(end.not_started.as_deref(), Some("guard of api refused"));
        assert_eq!(end.not_started_kind, Some(ErrorKind::ServiceGuard));
        assert_eq!(end.wall_seconds, 1.5);
        assert_eq!(end.cpu_seconds, Some(0.25));
    }
}
