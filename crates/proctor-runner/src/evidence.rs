//! What `proctor show RUN TRIAL` prints beyond the record's summary: the agent's transcript
//! (every step or tool call, not only interface calls), the token and cost ledgers, and the
//! changed files as diffs against the trial's start state. Every section is bounded.
//!
//! The start state is rebuilt from the suite the run recorded in `run.json` (fixture, hidden
//! mutation, the variant's laid-in files), and used only where its hashes still match the
//! trial's: a suite that changed since gives no diff rather than a wrong one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::model::{Ledgers, Usage};
use crate::TrialRecord;
use proctor_report::Table;
use proctor_score::endstate::{ChangeKind, FileChange, VisualRun};
use proctor_suite::tree::{bytes_hash, tree_hash};
use proctor_suite::Suite;

/// Lines shown of one file's diff or content.
pub const LINES_PER_FILE: usize = 200;
/// Lines of diffs shown for a whole trial; files past it are only named.
pub const LINES_TOTAL: usize = 2000;
/// Lines shown of one step's stdout or stderr, or of one tool call's output.
const OUTPUT_LINES: usize = 5;
/// Characters shown of one line.
const WIDTH: usize = 200;

/// `A, B, C, … and N more`: at most `max` names, then how many were left out.
pub fn some_of(names: &[String], max: usize) -> String {
    let shown = names
        .iter()
        .take(max)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > max {
        format!("{shown}, … and {} more", names.len() - max)
    } else {
        shown
    }
}

/// One line cut to [`WIDTH`] characters, marked `…` when cut.
fn clip(line: &str) -> String {
    if line.chars().count() > WIDTH {
        let cut: String = line.chars().take(WIDTH).collect();
        format!("{cut}…")
    } else {
        line.to_string()
    }
}

/// `text` as at most `max` clipped lines, the first after `label`, the rest aligned under it,
/// then a note of how many lines were left out.
fn labelled(indent: &str, label: &str, text: &str, max: usize) -> Vec<String> {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    if lines.is_empty() {
        return Vec::new();
    }
    let pad = " ".repeat(label.chars().count());
    let mut out: Vec<String> = lines
        .iter()
        .take(max)
        .enumerate()
        .map(|(i, l)| {
            let head = if i == 0 { label } else { pad.as_str() };
            format!("{indent}{head}{}", clip(l))
        })
        .collect();
    if lines.len() > max {
        out.push(format!("{indent}{pad}… {} more line(s)", lines.len() - max));
    }
    out
}

/// A command for one line: its first line, and how many more it has.
fn one_line(cmd: &str) -> String {
    let mut lines = cmd.trim().lines();
    let first = clip(lines.next().unwrap_or_default());
    match lines.count() {
        0 => first,
        n => format!("{first}  (+{n} line(s))"),
    }
}

/// The transcript section: what the agent (of kind `agent`) did, step by step.
pub fn transcript(agent: &str, started: bool, trial_dir: &Path) -> Vec<String> {
    if !started {
        return vec!["transcript: none (the agent never started)".to_string()];
    }
    match agent {
        "script" => script_transcript(trial_dir),
        "command" => command_transcript(trial_dir),
        "human" => terminal_transcript(trial_dir),
        cli => cli_transcript(cli, trial_dir),
    }
}

fn read_jsonl(path: &Path) -> Option<Vec<serde_json::Value>> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect(),
    )
}

/// The lines of a sitting's terminal shown by `show`: its last ones.
const TERMINAL_LINES: usize = 40;

/// A person's sitting: the last lines their terminal showed (as plain text).
fn terminal_transcript(trial_dir: &Path) -> Vec<String> {
    let Some(events) = read_jsonl(&trial_dir.join("transcript.jsonl")) else {
        return vec!["terminal: nothing shown (no transcript.jsonl)".to_string()];
    };
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "terminal")
        .filter_map(|e| e["text"].as_str())
        .collect();
    let lines: Vec<&str> = text.lines().collect();
    let skip = lines.len().saturating_sub(TERMINAL_LINES);
    let mut out = vec![format!(
        "terminal ({} line(s){}; as shown, in agent.stdout)",
        lines.len(),
        if skip > 0 {
            format!(", the last {TERMINAL_LINES}")
        } else {
            String::new()
        }
    )];
    out.extend(lines[skip..].iter().map(|l| format!("  {l}")));
    out
}

/// The scripted agent's transcript: a `step` event per step, with its exit and output.
fn script_transcript(trial_dir: &Path) -> Vec<String> {
    let Some(events) = read_jsonl(&trial_dir.join("transcript.jsonl")) else {
        return vec!["transcript: none recorded (no transcript.jsonl)".to_string()];
    };
    let steps: Vec<&serde_json::Value> = events.iter().filter(|e| e["type"] == "step").collect();
    let mut out = vec![format!("transcript ({} step(s))", steps.len())];
    for s in steps {
        let exit = s["exit"]
            .as_i64()
            .map_or("no exit".to_string(), |c| format!("exit {c}"));
        out.push(format!(
            "  step {:<3} {:<9} {}",
            s["step"].as_u64().unwrap_or(0),
            exit,
            one_line(s["run"].as_str().unwrap_or_default())
        ));
        let indent = " ".repeat(21);
        for stream in ["stdout", "stderr"] {
            let text = s[stream].as_str().unwrap_or_default();
            out.extend(labelled(
                &indent,
                &format!("{stream}  "),
                text,
                OUTPUT_LINES,
            ));
        }
    }
    out
}

/// A command agent records no steps, only its output; its stderr is the only trace beyond the
/// answer.
fn command_transcript(trial_dir: &Path) -> Vec<String> {
    let mut out =
        vec!["transcript: a command agent records no steps (its stdout is the answer)".to_string()];
    let stderr = std::fs::read(trial_dir.join("agent.stderr")).unwrap_or_default();
    out.extend(labelled(
        "  ",
        "stderr  ",
        &String::from_utf8_lossy(&stderr),
        OUTPUT_LINES * 2,
    ));
    out
}

/// A real CLI's transcript, read again from its saved output with its adapter's parser: every
/// tool call it made (shell commands and others), the calls its permission layer refused, and
/// the errors it reported.
fn cli_transcript(agent: &str, trial_dir: &Path) -> Vec<String> {
    let stdout = crate::trial::capture::read_agent_stdout(trial_dir);
    let stderr = std::fs::read(trial_dir.join("agent.stderr")).unwrap_or_default();
    let variant: Result<proctor_suite::model::Variant, _> =
        // (an `acp` variant needs a `command` to be read, though reading never runs it)
        toml::from_str(&format!(
            "id = \"shown\"\nagent = {agent:?}\ncommand = [\"shown\"]\n"
        ));
    let adapter = variant
        .ok()
        .and_then(|v| proctor_agents::adapter_for(&v, None).ok());
    let Some(adapter) = adapter else {
        return vec![format!(
            "transcript: this proctor cannot read a `{agent}` transcript (see transcript.jsonl)"
        )];
    };
    let output = adapter.read(&stdout, &stderr);
    let mut out = vec![format!(
        "transcript ({agent}: {} event(s), {} tool call(s), {} refused)",
        output.transcript.len(),
        output.tool_calls.len(),
        output.denied.len()
    )];
    let indent = " ".repeat(18);
    for (i, c) in output.tool_calls.iter().enumerate() {
        let status = match (c.exit_code, c.ok) {
            (Some(code), _) => format!("exit {code}"),
            (None, Some(true)) => "ok".to_string(),
            (None, Some(false)) => "failed".to_string(),
            (None, None) => "-".to_string(),
        };
        let what = match &c.command {
            Some(cmd) => one_line(cmd),
            None => clip(&c.input.to_string()),
        };
        out.push(format!("  #{:<4} {:<9} {}: {what}", i + 1, status, c.tool));
        if let Some(o) = &c.output {
            out.extend(labelled(&indent, "output  ", o, OUTPUT_LINES));
        }
    }
    for d in &output.denied {
        let what = match &d.command {
            Some(cmd) => one_line(cmd),
            None => clip(&d.input.to_string()),
        };
        out.push(format!(
            "  refused         {}: {what}  ({})",
            d.tool, d.reason
        ));
    }
    for e in &output.errors {
        out.push(format!("  error           {}", clip(e)));
    }
    out
}

/// Elements of a look listed by `show`.
const VISUAL_ELEMENTS_SHOWN: usize = 5;

/// What each `visual` look saw: the URL, the elements matched (text and whether rendered), the
/// kept screenshot (its path under `trial_dir`) and how it differs from its reference.
pub fn visuals(runs: &BTreeMap<String, VisualRun>, trial_dir: &Path) -> Vec<String> {
    if runs.is_empty() {
        return Vec::new();
    }
    let mut out = vec!["visual checks (headless Chromium, after the agent stopped)".to_string()];
    for (look, run) in runs {
        out.push(format!("  {look}"));
        if let Some(why) = &run.error {
            out.push(format!("    not looked at: {why}"));
            continue;
        }
        out.push(format!("    opened {}", run.url));
        if let Some(why) = &run.load_error {
            out.push(format!("    {why}"));
            continue;
        }
        if let Some(n) = run.count {
            out.push(format!("    {n} element(s) match"));
        }
        for e in run.elements.iter().take(VISUAL_ELEMENTS_SHOWN) {
            let shown = if e.visible {
                "rendered"
            } else {
                "not rendered"
            };
            out.push(format!("      {:?} ({shown})", e.text));
        }
        if run.elements.len() > VISUAL_ELEMENTS_SHOWN {
            out.push(format!(
                "      … and {} more",
                run.elements.len() - VISUAL_ELEMENTS_SHOWN
            ));
        }
        if let Some(shot) = &run.screenshot {
            out.push(format!("    screenshot {}", trial_dir.join(shot).display()));
        }
        if let Some(d) = &run.diff {
            let total = u64::from(d.size.0.max(d.reference_size.0))
                * u64::from(d.size.1.max(d.reference_size.1));
            out.push(format!(
                "    differs from {} in {} of {total} pixels ({:.2}%); sizes {}x{} and {}x{}",
                d.reference,
                d.differing,
                d.share * 100.0,
                d.size.0,
                d.size.1,
                d.reference_size.0,
                d.reference_size.1
            ));
        }
    }
    out
}

/// The ledgers section: tokens by source, and money, never summed into one figure.
pub fn ledgers(l: &Ledgers) -> Vec<String> {
    let sources: Vec<&Usage> = [&l.wire, &l.agent_reported].into_iter().flatten().collect();
    let money = l.cost_usd.is_some() || l.agent_reported_cost_usd.is_some();
    if sources.is_empty() && !money && l.cost_missing.is_empty() {
        return vec!["tokens     none recorded (no model was metered)".to_string()];
    }
    let mut out = vec!["tokens".to_string()];
    if !sources.is_empty() {
        let n = |x: Option<u64>| x.map_or("-".to_string(), |v| v.to_string());
        let mut t = Table::new(&[
            "SOURCE",
            "INPUT",
            "OUTPUT",
            "CACHE READ",
            "CACHE WRITE",
            "REQUESTS",
        ]);
        for u in sources {
            t.row([
                u.source.clone(),
                n(u.input),
                n(u.output),
                n(u.cache_read),
                n(u.cache_write),
                n(u.requests),
            ]);
        }
        out.extend(t.text().lines().map(|l| format!("  {l}")));
    }
    let mut cost = Vec::new();
    match l.cost_usd {
        Some(usd) => cost.push(format!("${usd:.4} at the run's prices")),
        None if !l.cost_missing.is_empty() => cost.push(format!(
            "unknown (no price for {})",
            l.cost_missing.join(", ")
        )),
        None => {}
    }
    if let Some(usd) = l.agent_reported_cost_usd {
        cost.push(format!("the agent reported ${usd:.4}"));
    }
    if !cost.is_empty() {
        out.push(format!("cost       {}", cost.join(" · ")));
    }
    out
}

/// What a changed file was before the agent ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Original {
    /// Its bytes, as far as a diff reads them.
    Bytes(Shown),
    /// It did not exist.
    Absent,
    /// Not known (the note of [`StartState`] says why).
    Unknown,
}

/// A trial's start state as far as it can be rebuilt from the suite the run read: the fixture,
/// the hidden mutation's patch applied to it, and the variant's laid-in files, each used only
/// when its hash matches the one the trial recorded.
#[derive(Debug, Default)]
pub struct StartState {
    fixture: Option<PathBuf>,
    patched: BTreeMap<String, Option<Vec<u8>>>,
    laid_in: BTreeMap<String, Vec<u8>>,
    unknown: BTreeSet<String>,
    /// Why some originals are unknown, when they are.
    pub note: Option<String>,
}

impl StartState {
    /// A start state of which nothing is known, and why.
    pub fn unknown(why: String) -> StartState {
        StartState {
            note: Some(why),
            ..StartState::default()
        }
    }

    /// The start state of `r`, from the suite at `suite_path`.
    pub fn of(suite_path: &Path, r: &TrialRecord) -> StartState {
        let mut s = StartState::default();
        let suite = match Suite::parse(suite_path) {
            Ok(suite) => suite,
            Err(p) => {
                s.note = Some(format!(
                    "the suite the run read ({}) cannot be read now: {}",
                    suite_path.display(),
                    p.message
                ));
                return s;
            }
        };
        let fixture = suite.fixture_dir();
        match tree_hash(&fixture) {
            Ok(h) if h == r.hashes.fixture => s.fixture = Some(fixture),
            Ok(_) => {
                s.note = Some(format!(
                    "the fixture ({}) changed since the run",
                    fixture.display()
                ))
            }
            Err(e) => {
                s.note = Some(format!(
                    "cannot read the fixture ({}): {e}",
                    fixture.display()
                ))
            }
        }
        let patch = r.plan.mutation.as_ref().filter(|m| !m.as_shipped);
        if let (Some(m), Some(dir)) = (patch, s.fixture.clone()) {
            let path = suite
                .root
                .join("mutations")
                .join(&r.plan.task)
                .join(&m.name);
            let patched = std::fs::read_to_string(&path)
                .map_err(|e| e.to_string())
                .and_then(|text| {
                    if bytes_hash(text.as_bytes()) != m.hash {
                        return Err("it changed since the run".to_string());
                    }
                    let patch =
                        proctor_suite::patch::Patch::parse(&text).map_err(|e| e.to_string())?;
                    patch
                        .apply(|rel| std::fs::read(dir.join(rel)).ok())
                        .map_err(|e| e.to_string())
                });
            match patched {
                Ok(p) => s.patched = p,
                Err(e) => {
                    s.fixture = None;
                    s.note = Some(format!("the hidden mutation {}: {e}", path.display()));
                }
            }
        }
        let variant = suite.variant(&r.plan.variant);
        for (dest, hash) in &r.hashes.variant_files {
            let bytes = variant
                .and_then(|v| v.files.get(dest))
                .and_then(|src| std::fs::read(suite.root.join(src.get_ref())).ok())
                .filter(|b| &bytes_hash(b) == hash);
            match bytes {
                Some(b) => {
                    s.laid_in.insert(dest.clone(), b);
                }
                None => {
                    s.unknown.insert(dest.clone());
                    s.note.get_or_insert_with(|| {
                        format!("the variant's file for {dest} changed since the run")
                    });
                }
            }
        }
        s
    }

    /// What `path` held before the agent ran.
    pub fn original(&self, path: &str) -> Original {
        if path.split('/').any(|c| c == ".." || c.is_empty()) || self.unknown.contains(path) {
            return Original::Unknown;
        }
        if let Some(b) = self.laid_in.get(path) {
            return Original::Bytes(Shown::whole(b.clone()));
        }
        let Some(fixture) = &self.fixture else {
            return Original::Unknown;
        };
        match self.patched.get(path) {
            Some(Some(b)) => return Original::Bytes(Shown::whole(b.clone())),
            Some(None) => return Original::Absent,
            None => {}
        }
        match Shown::read(&fixture.join(path)) {
            Ok(b) => Original::Bytes(b),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Original::Absent,
            Err(_) => Original::Unknown,
        }
    }
}

/// Bytes of a file (and of its original) a diff reads at most: past it, and for a sparse file,
/// the file is shown by its size and why it is not diffed, never read whole.
pub const SHOWN_MAX: usize = 1 << 20;

/// A file as a diff shows it: its data up to [`SHOWN_MAX`], its size, and why what was read is
/// not all of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    /// Its data, bounded.
    pub bytes: Vec<u8>,
    /// Its size, holes included.
    pub size: u64,
    /// Why `bytes` is not the whole file, if it is not.
    pub partial: Option<String>,
}

impl Shown {
    /// Bytes known whole.
    fn whole(bytes: Vec<u8>) -> Shown {
        Shown {
            size: bytes.len() as u64,
            bytes,
            partial: None,
        }
    }

    /// A file, read bounded.
    fn read(path: &Path) -> std::io::Result<Shown> {
        let r = proctor_fs::read_bounded(path, SHOWN_MAX)?;
        Ok(Shown {
            partial: r.note(),
            size: r.size,
            bytes: r.bytes,
        })
    }

    /// Its text, when it is whole and text.
    fn text(&self) -> Option<&str> {
        self.partial
            .is_none()
            .then(|| as_text(&self.bytes))
            .flatten()
    }

    /// What the diff shows instead of a file that is not text.
    fn not_diffed(&self) -> String {
        match &self.partial {
            Some(why) => format!("(not diffed: {why})"),
            None => "(binary)".to_string(),
        }
    }
}

/// Text is UTF-8 without NUL bytes; anything else is shown by size only.
fn as_text(bytes: &[u8]) -> Option<&str> {
    if bytes.contains(&0) {
        return None;
    }
    std::str::from_utf8(bytes).ok()
}

/// A unified diff of `old` to `new` (without its `---`/`+++` header), bounded.
fn unified(old: &str, new: &str, max: usize) -> Vec<String> {
    let diff = similar::TextDiff::from_lines(old, new);
    let text = diff.unified_diff().context_radius(3).to_string();
    bounded(text.lines().map(str::to_string).collect(), max)
}

/// At most `max` lines, then a note of how many were left out.
fn bounded(mut lines: Vec<String>, max: usize) -> Vec<String> {
    if lines.len() > max {
        let more = lines.len() - max;
        lines.truncate(max);
        lines.push(format!("… {more} more line(s) not shown"));
    }
    lines
}

/// The diff section: each changed file against its original, within [`LINES_PER_FILE`] per file
/// and [`LINES_TOTAL`] in all. `start` is asked for only when an original is needed.
pub fn diffs(
    changes: &[FileChange],
    files: &Path,
    start: &mut dyn FnMut() -> StartState,
) -> Vec<String> {
    let mut state: Option<StartState> = None;
    let mut out = Vec::new();
    let mut used = 0usize;
    let mut skipped = Vec::new();
    // The kept files by open folders: a path past PATH_MAX is shown like any other.
    let mut kept = proctor_fs::Deep::open(files).ok();
    for c in changes.iter().filter(|c| !c.dir) {
        if used >= LINES_TOTAL {
            skipped.push(c.path.clone());
            continue;
        }
        let mut original = || state.get_or_insert_with(&mut *start).original(&c.path);
        let (header, body) = one_diff(c, kept.as_mut(), &mut original);
        used += body.len() + 1;
        out.push(format!("  {header}"));
        out.extend(body.into_iter().map(|l| format!("    {l}")));
    }
    if !skipped.is_empty() {
        out.push(format!(
            "  … {} more changed file(s) not shown (over {LINES_TOTAL} lines): {}",
            skipped.len(),
            some_of(&skipped, 10)
        ));
    }
    if let Some(note) = state.and_then(|s| s.note) {
        out.push(format!(
            "  note: {note}; such files are shown without a diff"
        ));
    }
    out
}

/// One changed file's header line and the lines of its diff (or of its content).
fn one_diff(
    c: &FileChange,
    mut files: Option<&mut proctor_fs::Deep>,
    original: &mut dyn FnMut() -> Original,
) -> (String, Vec<String>) {
    let mut now = || {
        let at = files.as_mut()?.reach(Path::new(&c.path)).ok()?;
        Shown::read(&at).ok()
    };
    let mut body = Vec::new();
    let header = match c.kind {
        ChangeKind::Added => match now() {
            Some(new) => {
                match new.text() {
                    Some(t) => body = unified("", t, LINES_PER_FILE),
                    None => body.push(new.not_diffed()),
                }
                format!("added    {}  ({} bytes)", c.path, new.size)
            }
            None => format!("added    {}  (its content was not captured)", c.path),
        },
        ChangeKind::Changed => return changed_diff(&c.path, &original(), now()),
        ChangeKind::Deleted => match original() {
            Original::Bytes(o) => format!("deleted  {}  (was {} bytes)", c.path, o.size),
            _ => format!("deleted  {}", c.path),
        },
        ChangeKind::ModeChanged => format!(
            "mode     {}  (now {})",
            c.path,
            c.mode
                .map_or("-".to_string(), |m| format!("{:o}", m & 0o7777))
        ),
    };
    (header, body)
}

/// A changed file: its sizes, and its diff against the original, or its content when the
/// original is not available.
fn changed_diff(path: &str, old: &Original, new: Option<Shown>) -> (String, Vec<String>) {
    let sizes = match (old, &new) {
        (Original::Bytes(o), Some(n)) => format!("{} -> {} bytes", o.size, n.size),
        (_, Some(n)) => format!("now {} bytes", n.size),
        (_, None) => "its content was not captured".to_string(),
    };
    let mut body = Vec::new();
    match (old, &new) {
        (Original::Bytes(o), Some(n)) => match (o.text(), n.text()) {
            (Some(o), Some(n)) => body = unified(o, n, LINES_PER_FILE),
            _ if n.partial.is_some() => body.push(n.not_diffed()),
            _ => body.push(o.not_diffed()),
        },
        (_, Some(n)) => {
            body.push("(original not available, see the note below; its content now:)".to_string());
            match n.text() {
                Some(t) => body.extend(unified("", t, LINES_PER_FILE)),
                None => body.push(n.not_diffed()),
            }
        }
        (_, None) => {}
    }
    (format!("changed  {path}  ({sizes})"), body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("t{i}")).collect()
    }

    #[test]
    fn some_of_lists_up_to_max_then_how_many_more() {
        assert_eq!(some_of(&names(0), 10), "");
        assert_eq!(some_of(&names(3), 10), "t0, t1, t2");
        assert_eq!(some_of(&names(10), 10), names(10).join(", "));
        assert_eq!(
            some_of(&names(13), 10),
            format!("{}, … and 3 more", names(10).join(", "))
        );
    }

    #[test]
    fn text_is_utf8_without_nul() {
        assert_eq!(as_text(b"hi\n"), Some("hi\n"));
        assert_eq!(as_text(b"a\0b"), None);
        assert_eq!(as_text(&[0xff, 0xfe]), None);
    }

    #[test]
    fn a_unified_diff_shows_the_change_with_context_and_is_bounded() {
        let d = unified("a\nb\nc\n", "a\nB\nc\n", 200);
        assert_eq!(d, ["@@ -1,3 +1,3 @@", " a", "-b", "+B", " c"]);
        let long: String = (0..500).map(|i| format!("{i}\n")).collect();
        let d = unified("", &long, 200);
        assert_eq!(d.len(), 201);
        assert_eq!(d[200], "… 301 more line(s) not shown");
    }

    #[test]
    fn labelled_output_is_clipped_and_bounded() {
        let text = format!("{}\n2\n3\n4\n5\n6\n7\n", "x".repeat(300));
        let out = labelled("  ", "out  ", &text, 5);
        assert_eq!(out.len(), 6);
        assert!(out[0].starts_with("  out  xxx") && out[0].ends_with('…'));
        assert_eq!(out[1], "       2");
        assert_eq!(out[5], "       … 2 more line(s)");
        assert!(labelled("", "x", "\n", 5).is_empty());
    }

    #[test]
    fn ledgers_keep_sources_apart_and_say_when_there_are_none() {
        assert_eq!(
            ledgers(&Ledgers::default()),
            ["tokens     none recorded (no model was metered)"]
        );
        let l = Ledgers {
            wire: Some(Usage {
                source: "wire".into(),
                input: Some(100),
                output: Some(20),
                cache_read: Some(0),
                cache_write: None,
                requests: Some(3),
            }),
            cost_missing: vec!["`m`".into()],
            agent_reported_cost_usd: Some(0.5),
            ..Ledgers::default()
        };
        let text = ledgers(&l).join("\n");
        assert!(text.contains("wire    100"), "{text}");
        assert!(
            text.contains("cost       unknown (no price for `m`) · the agent reported $0.5000"),
            "{text}"
        );
    }
}
