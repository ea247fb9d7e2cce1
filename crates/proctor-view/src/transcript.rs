//! A trial's transcripts served in slices: the agent's own record (a CLI's output stream, the
//! scripted agent's `transcript.jsonl`, a command agent's stderr) and the model's side (the
//! gateway's `model.jsonl`, or the mock model's `services/__model/wire.jsonl`), one entry per
//! line of the file, read lazily: a slice seeks to a checkpoint of the file's line index and reads
//! only its lines, and no line is kept past [`MAX_LINE_BYTES`], so a 50 MB transcript is never
//! read whole into memory.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use proctor_gateway::RequestRecord;
use proctor_mock_model::wire_log::WireLine;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Lines between two checkpoints of a file's line index.
const STRIDE: u64 = 256;
/// Bytes of one line kept; the rest of a longer line is skipped, and counted.
pub const MAX_LINE_BYTES: usize = 1024 * 1024;
/// Bytes of lines one slice keeps in all: a slice of long lines stops early (its `lines` are
/// fewer than asked), and the next slice goes on from there.
pub const MAX_SLICE_BYTES: usize = 16 * 1024 * 1024;
/// Characters of a line's summary.
const SUMMARY_CHARS: usize = 400;
/// Characters of a line's raw text returned with it.
const RAW_CHARS: usize = 4000;
/// The most lines one slice may ask for.
pub const MAX_SLICE: u64 = 1000;
/// The files whose line index is kept, most recently used last.
const CACHED_FILES: usize = 8;

/// One transcript of a trial: which side, and the file it is read from.
#[derive(Debug, Clone, Serialize)]
pub struct Source {
    /// `agent` or `model`.
    pub name: &'static str,
    /// The file, relative to the trial's folder.
    pub file: String,
    /// Its size in bytes.
    pub bytes: u64,
}

/// The transcripts a trial has, by the agent's kind (`agent`, its record's `launch.agent`): the
/// agent's side first, then the model's when it was recorded.
pub fn sources(agent: &str, trial_dir: &Path) -> Vec<Source> {
    let agent_file = match agent {
        "script" => "transcript.jsonl",
        "command" => "agent.stderr",
        _ => "agent.stdout",
    };
    let mut out = Vec::new();
    let mut add = |name: &'static str, file: &str| -> bool {
        match std::fs::metadata(trial_dir.join(file)) {
            Ok(m) if m.is_file() => {
                out.push(Source {
                    name,
                    file: file.to_string(),
                    bytes: m.len(),
                });
                true
            }
            _ => false,
        }
    };
    add("agent", agent_file);
    if !add("model", "model.jsonl") {
        add("model", "services/__model/wire.jsonl");
    }
    out
}

/// One line of a transcript.
#[derive(Debug, Clone, Serialize)]
pub struct Line {
    /// Its number in the file, from 1.
    pub n: u64,
    /// What kind of entry it is (a JSON line's `type`, `role` or request), or empty for text.
    pub kind: String,
    /// What it says, on one line, clipped.
    pub text: String,
    /// The line as written (clipped to a few thousand characters).
    pub raw: String,
    /// The line's length in bytes.
    pub bytes: u64,
}

/// A slice of a transcript.
#[derive(Debug, Clone, Serialize)]
pub struct Slice {
    /// Which transcript.
    pub source: Source,
    /// The number of the first line asked for, from 0.
    pub from: u64,
    /// Lines in the whole file.
    pub total: u64,
    /// The lines of the slice.
    pub lines: Vec<Line>,
}

/// Where every [`STRIDE`]-th line of a file starts, as of one size and modification time.
#[derive(Debug)]
struct LineIndex {
    path: PathBuf,
    len: u64,
    modified: Option<SystemTime>,
    total: u64,
    checkpoints: Vec<u64>,
}

impl LineIndex {
    /// Reads `path` once, in blocks, counting its lines.
    fn build(path: &Path, len: u64, modified: Option<SystemTime>) -> std::io::Result<LineIndex> {
        let mut reader = BufReader::with_capacity(256 * 1024, File::open(path)?);
        let mut checkpoints = vec![0];
        let (mut total, mut at, mut in_line) = (0u64, 0u64, false);
        loop {
            let buf = reader.fill_buf()?;
            if buf.is_empty() {
                break;
            }
            let n = buf.len();
            let mut start = 0;
            while let Some(i) = memchr::memchr(b'\n', &buf[start..]) {
                total += 1;
                let next = at + (start + i + 1) as u64;
                if total.is_multiple_of(STRIDE) {
                    checkpoints.push(next);
                }
                start += i + 1;
            }
            in_line = start < n;
            at += n as u64;
            reader.consume(n);
        }
        if in_line {
            total += 1;
        }
        // A checkpoint at the very end starts no line.
        if checkpoints.len() as u64 > total.div_ceil(STRIDE).max(1) {
            checkpoints.pop();
        }
        Ok(LineIndex {
            path: path.to_path_buf(),
            len,
            modified,
            total,
            checkpoints,
        })
    }
}

/// The line indexes of the files read last, so that scrolling a long transcript reads only the
/// lines shown, not the file again.
#[derive(Debug, Default)]
pub struct LineIndexes {
    files: Mutex<VecDeque<Arc<LineIndex>>>,
}

impl LineIndexes {
    /// The index of `path` as it is now: kept if its size and modification time are the same,
    /// else read again.
    fn of(&self, path: &Path) -> std::io::Result<Arc<LineIndex>> {
        let meta = std::fs::metadata(path)?;
        let (len, modified) = (meta.len(), meta.modified().ok());
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = files.iter().position(|f| f.path == path) {
            let kept = files
                .remove(i)
                .filter(|f| f.len == len && f.modified == modified);
            if let Some(f) = kept {
                files.push_back(f.clone());
                return Ok(f);
            }
        }
        drop(files);
        let index = Arc::new(LineIndex::build(path, len, modified)?);
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        files.push_back(index.clone());
        while files.len() > CACHED_FILES {
            files.pop_front();
        }
        Ok(index)
    }

    /// Lines `from..from + count` (from 0) of `source`, a file in `trial_dir`.
    pub fn slice(
        &self,
        trial_dir: &Path,
        source: Source,
        from: u64,
        count: u64,
    ) -> std::io::Result<Slice> {
        let path = trial_dir.join(&source.file);
        let index = self.of(&path)?;
        let count = count.min(MAX_SLICE);
        let mut lines = Vec::new();
        if from < index.total && count > 0 {
            let checkpoint = usize::try_from(from / STRIDE).unwrap_or(usize::MAX);
            let start = index.checkpoints.get(checkpoint).copied().unwrap_or(0);
            let mut reader = BufReader::with_capacity(64 * 1024, File::open(&path)?);
            reader.seek(SeekFrom::Start(start))?;
            let mut n = from / STRIDE * STRIDE;
            let mut buf = Vec::new();
            let mut kept = 0usize;
            while n < from + count && kept < MAX_SLICE_BYTES {
                let Some(bytes) = read_line_bounded(&mut reader, &mut buf)? else {
                    break;
                };
                if n >= from {
                    kept += buf.len();
                    lines.push(render(n + 1, &buf, bytes));
                }
                n += 1;
            }
        }
        Ok(Slice {
            source,
            from,
            total: index.total,
            lines,
        })
    }
}

/// The first `count` lines of `source`, a file in `trial_dir`, read without indexing the file
/// (what a page shows before its script asks for more); and whether the file has more.
pub fn head(trial_dir: &Path, source: &Source, count: u64) -> std::io::Result<(Vec<Line>, bool)> {
    let mut reader = BufReader::with_capacity(64 * 1024, File::open(trial_dir.join(&source.file))?);
    let mut buf = Vec::new();
    let mut lines = Vec::new();
    while let Some(bytes) = read_line_bounded(&mut reader, &mut buf)? {
        if lines.len() as u64 == count {
            return Ok((lines, true));
        }
        lines.push(render(lines.len() as u64 + 1, &buf, bytes));
    }
    Ok((lines, false))
}

/// Reads one line into `buf` (without its newline), keeping at most [`MAX_LINE_BYTES`] of it;
/// gives the line's whole length, or `None` at the end of the file.
fn read_line_bounded(reader: &mut impl BufRead, buf: &mut Vec<u8>) -> std::io::Result<Option<u64>> {
    buf.clear();
    let mut len = 0u64;
    let mut any = false;
    loop {
        let block = reader.fill_buf()?;
        if block.is_empty() {
            return Ok(any.then_some(len));
        }
        any = true;
        let (part, done) = match memchr::memchr(b'\n', block) {
            Some(i) => (&block[..i], Some(i + 1)),
            None => (block, None),
        };
        let room = MAX_LINE_BYTES.saturating_sub(buf.len());
        buf.extend_from_slice(&part[..part.len().min(room)]);
        len += part.len() as u64;
        let used = done.unwrap_or(block.len());
        reader.consume(used);
        if done.is_some() {
            return Ok(Some(len));
        }
    }
}

/// One line as an entry: a JSON line's kind and what it says; a text line as it is.
fn render(n: u64, bytes: &[u8], len: u64) -> Line {
    let text = String::from_utf8_lossy(bytes);
    let raw = clip(&text, RAW_CHARS, len);
    let parsed = (len as usize == bytes.len())
        .then(|| serde_json::from_slice::<Value>(bytes).ok())
        .flatten();
    let (kind, text) = match parsed.and_then(Entry::of) {
        Some(Entry::Request(r)) => ("request".into(), one_line(request_summary(&r))),
        Some(Entry::Exchange(w)) => (wire_kind(&w), wire_summary(&w)),
        Some(Entry::Other(v)) => (kind_of(&v), summary_of(&v)),
        None => (String::new(), clip(text.trim_end(), SUMMARY_CHARS, len)),
    };
    Line {
        n,
        kind,
        text,
        raw,
        bytes: len,
    }
}

/// A JSON line of a transcript, read as the record its writer wrote when it is one.
enum Entry {
    /// A request of the model gateway's `model.jsonl`.
    Request(Box<RequestRecord>),
    /// An exchange of the mock model's `wire.jsonl`.
    Exchange(Box<WireLine>),
    /// Another JSON object: an agent's own event.
    Other(Value),
}

impl Entry {
    /// The record `v` is, by its writers' own types.
    fn of(v: Value) -> Option<Entry> {
        if !v.is_object() {
            return None;
        }
        if let Ok(r) = RequestRecord::deserialize(&v) {
            return Some(Entry::Request(Box::new(r)));
        }
        if let Ok(w) = WireLine::deserialize(&v) {
            return Some(Entry::Exchange(Box::new(w)));
        }
        Some(Entry::Other(v))
    }
}

/// `s` cut to `max` characters, with a note of the line's whole size when cut.
fn clip(s: &str, max: usize, len: u64) -> String {
    if s.chars().count() <= max && len as usize == s.len() {
        return s.to_string();
    }
    let cut: String = s.chars().take(max).collect();
    format!("{cut}… ({len} bytes in all)")
}

/// The kind of an agent's JSON entry: its `type` (with a `subtype`, or the `type` of its
/// `item` or `part`), or its `role`.
fn kind_of(v: &Value) -> String {
    let s = |k: &str| v.get(k).and_then(Value::as_str);
    let inner = ["item", "part", "event"].iter().find_map(|k| {
        v.get(*k)
            .and_then(|i| i.get("type"))
            .and_then(Value::as_str)
    });
    match (s("type"), s("subtype").or(inner), s("role")) {
        (Some(t), Some(sub), _) => format!("{t}/{sub}"),
        (Some(t), None, _) => t.to_string(),
        (None, _, Some(role)) => role.to_string(),
        _ => String::new(),
    }
}

/// What an agent's JSON entry says, on one line: the text it holds (messages, commands,
/// outputs), else the entry itself.
fn summary_of(v: &Value) -> String {
    let mut parts = Vec::new();
    texts(v, &mut parts, 0);
    if parts.is_empty() {
        one_line(v.to_string())
    } else {
        one_line(parts.join(" · "))
    }
}

/// `text` on one line (runs of white space as one space), clipped.
fn one_line(text: String) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    clip(&one_line, SUMMARY_CHARS, one_line.len() as u64)
}

/// The fields that hold what an entry says.
const TEXT_KEYS: [&str; 12] = [
    "text", "content", "command", "cmd", "run", "output", "stdout", "stderr", "result", "message",
    "error", "name",
];

/// Collects the strings under [`TEXT_KEYS`] (and in arrays and objects below them), depth first.
fn texts(v: &Value, out: &mut Vec<String>, depth: usize) {
    if depth > 8 || out.len() > 16 {
        return;
    }
    match v {
        Value::Object(map) => {
            for (k, x) in map {
                match x {
                    Value::String(s) if TEXT_KEYS.contains(&k.as_str()) && !s.is_empty() => {
                        out.push(s.clone())
                    }
                    Value::Object(_) | Value::Array(_) => texts(x, out, depth + 1),
                    _ => {}
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|x| texts(x, out, depth + 1)),
        _ => {}
    }
}

/// The kind of a mock model's exchange: what the mock made of it, its method and path.
fn wire_kind(w: &WireLine) -> String {
    format!("{} {} {}", w.kind.as_str(), w.method, w.path)
}

/// A mock model's exchange: its number, status and tokens, then what the model answered (the
/// request repeats the whole conversation so far).
fn wire_summary(w: &WireLine) -> String {
    let mut head = format!("#{} → {}", w.seq, w.status);
    if let Some(u) = &w.usage {
        head.push_str(&format!(", {} in / {} out tokens", u.input, u.output));
    }
    let mut parts = vec![head];
    texts(&w.response, &mut parts, 0);
    one_line(parts.join(" · "))
}

/// How a record's value is spelled in its file (`rate-limit`, `cost_usd`, `complete`).
fn spelling(value: &impl Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// A model request of `model.jsonl`: its number, model, status, time, tokens and cost.
fn request_summary(r: &RequestRecord) -> String {
    let mut out = format!(
        "#{} {} {} → {}, {:.0} ms",
        r.seq,
        r.api.as_str(),
        r.model.as_deref().unwrap_or_default(),
        r.status,
        r.latency_ms
    );
    if let Some(u) = &r.usage {
        out.push_str(&format!(", {} in / {} out tokens", u.input, u.output));
    }
    if let Some(c) = r.cost_usd {
        out.push_str(&format!(", ${c:.4}"));
    }
    if let Some(f) = &r.fault {
        out.push_str(&format!(", fault {}", spelling(f)));
    }
    if let Some(l) = &r.limit {
        out.push_str(&format!(", limit {}", spelling(l)));
    }
    out.push_str(&format!(", ending {}", spelling(&r.ending)));
    for body in [&r.request_body, &r.response_body].into_iter().flatten() {
        out.push_str(&format!(", {body}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn source(file: &str) -> Source {
        Source {
            name: "agent",
            file: file.into(),
            bytes: 0,
        }
    }

    #[test]
    fn slices_read_only_their_lines_and_long_lines_are_cut() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = File::create(dir.path().join("t.jsonl")).unwrap();
        for i in 0..1000 {
            writeln!(f, "{{\"type\":\"step\",\"run\":\"echo {i}\"}}").unwrap();
        }
        writeln!(f, "{}", "x".repeat(MAX_LINE_BYTES + 10)).unwrap();
        write!(f, "last line, no newline").unwrap();
        drop(f);
        let ix = LineIndexes::default();
        let s = ix.slice(dir.path(), source("t.jsonl"), 510, 3).unwrap();
        assert_eq!(s.total, 1002);
        let got: Vec<_> = s
            .lines
            .iter()
            .map(|l| (l.n, l.kind.as_str(), l.text.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (511, "step", "echo 510"),
                (512, "step", "echo 511"),
                (513, "step", "echo 512")
            ]
        );
        let s = ix.slice(dir.path(), source("t.jsonl"), 1000, 10).unwrap();
        assert_eq!(s.lines.len(), 2);
        assert_eq!(s.lines[0].bytes, (MAX_LINE_BYTES + 10) as u64);
        assert!(s.lines[0]
            .raw
            .ends_with(&format!("({} bytes in all)", MAX_LINE_BYTES + 10)));
        assert_eq!(s.lines[1].text, "last line, no newline");
        assert!(ix
            .slice(dir.path(), source("t.jsonl"), 5000, 10)
            .unwrap()
            .lines
            .is_empty());
        // A file that grew is indexed again.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join("t.jsonl"))
            .unwrap();
        writeln!(f).unwrap();
        writeln!(f, "one more").unwrap();
        drop(f);
        assert_eq!(
            ix.slice(dir.path(), source("t.jsonl"), 0, 1).unwrap().total,
            1003
        );
    }

    /// The line `json` as the transcript shows it: its kind and its summary.
    fn shown(json: &str) -> (String, String) {
        let l = render(1, json.as_bytes(), json.len() as u64);
        (l.kind, l.text)
    }

    #[test]
    fn entries_say_what_they_hold() {
        let v: Value = serde_json::json!({"type": "assistant", "message": {"content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "name": "Bash", "input": {"command": "ls  -la\n/tmp"}}]}});
        assert_eq!(kind_of(&v), "assistant");
        assert_eq!(summary_of(&v), "Let me look. · ls -la /tmp · Bash");
        let e: Value =
            serde_json::json!({"type": "item.completed", "item": {"type": "command_execution"}});
        assert_eq!(kind_of(&e), "item.completed/command_execution");
    }

    #[test]
    fn a_gateway_request_is_read_as_the_gateways_record() {
        let r = serde_json::json!({"seq": 2, "time": "2026-01-01T00:00:00Z", "provider": "p",
            "api": "anthropic-messages", "endpoint": "/v1/messages", "model": "m",
            "stream": false, "status": 429, "latency_ms": 812.4, "queued_ms": 0.0,
            "usage": {"input": 10, "output": 3, "cache_read": 0, "cache_write": 0,
            "reasoning": 0}, "cost_usd": 0.00123, "retries": 0, "fault": "rate-limit",
            "ending": "complete", "request_body": "model/0002.req.json.gz"});
        let (kind, text) = shown(&r.to_string());
        assert_eq!(kind, "request");
        assert_eq!(
            text,
            "#2 anthropic-messages m → 429, 812 ms, 10 in / 3 out tokens, $0.0012, fault rate-limit, ending complete, model/0002.req.json.gz"
        );
        // A line of another shape with the same keys is an agent's entry, not a request.
        let (kind, _) = shown(r#"{"seq": 2, "endpoint": "/v1/messages", "type": "note"}"#);
        assert_eq!(kind, "note");
    }

    #[test]
    fn a_mock_exchange_is_read_as_the_mocks_record() {
        use proctor_mock_model::wire_log::WireKind;
        let w = WireLine {
            seq: 3,
            at_ms: 5,
            method: "POST".into(),
            path: "/v1/messages".into(),
            query: String::new(),
            headers: Default::default(),
            api: Some("anthropic-messages".into()),
            kind: WireKind::Main,
            turn: Some(0),
            replay: false,
            side_reason: None,
            stream: true,
            request: serde_json::json!({"messages": [{"content": "the whole conversation"}]}),
            status: 200,
            response: serde_json::json!({"sse": [{"data": {"delta": {"text": "Posting it now."}}}]}),
            usage: Some(proctor_mock_model::Usage {
                input: 100,
                output: 20,
                ..Default::default()
            }),
            error: None,
            fault: None,
            route: Some("anthropic".into()),
            key: None,
        };
        let (kind, text) = shown(&serde_json::to_string(&w).unwrap());
        assert_eq!(kind, "main POST /v1/messages");
        assert_eq!(text, "#3 → 200, 100 in / 20 out tokens · Posting it now.");
    }
}
