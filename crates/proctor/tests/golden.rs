//! Golden results: the bundled examples, run like `proctor demo` runs them (`--trials 2`; for
//! chat-ax its scripted variants `oracle` and `naive`), must write the same `results.json` and
//! `results.md` as the committed files under `tests/golden/`, byte for byte, once what varies
//! between runs is normalised.
//!
//! What varies, and only that, is normalised, each by where it is (its JSON key path, or its
//! Markdown line and column), never by a pattern over the whole text:
//!
//! - `results.json`: the run id (`run_id`, `report.run_ids[]`, `report.trials[].run_id`),
//!   `generated_at`, each trial's `timings_ms` values, the agent's `wall_seconds` and
//!   `cpu_seconds`, each call's `start` and `end`, each service event's `at`, each service
//!   probe's `elapsed`, each change's `mtime` (the time the agent wrote it), the medians of `wall_seconds` and `agent_cpu_seconds` (in `medians`,
//!   and their median, mean and total in `summaries`) and the total of
//!   `costs.agent_cpu_seconds` (derived from those times), the duration Python's unittest prints
//!   (`Ran N tests in 0.001s`) in captured output heads and tails, the host's `PATH` in
//!   `launch.env.PATH`, the trial's id map (`isolation.ids`, which depends on the machine's
//!   subordinate ids), what the trial's root showed of the host (`isolation.host_view`, which
//!   depends on the machine's folders and `PATH`); and, in every string, the absolute folders of this machine (the store,
//!   the folder holding the built binaries, the repository) by their exact values.
//! - `results.md`: the run id (by its exact value, read from the JSON), the generation time (the
//!   footer's `generated TIME by proctor`), and the numbers in the columns `wall s` and
//!   `agent cpu s` (the `(n=..)` is kept).
//!
//! Key order, numbers, outcomes, reasons, evidence: everything else must match exactly. (File
//! modes are evidence too: the goldens assume a checkout whose files git wrote as 0644.)
//!
//! `PROCTOR_UPDATE_GOLDEN=1 cargo test -p proctor --test golden` rewrites the golden files (only
//! ever from code whose output is known to be right).

mod common;

use std::path::{Path, PathBuf};

/// Runs `suite` (a folder under `examples/`) into a fresh store and checks its results.
fn golden(suite: &str, variants: &[&str]) {
    let bin = assert_cmd::cargo::cargo_bin("proctor");
    let bin_dir = bin.parent().unwrap().canonicalize().unwrap();
    for tool in ["chat", "chat-mock"] {
        assert!(
            bin_dir.join(tool).is_file(),
            "{} is not built: `cargo build -p proctor-example-chat` builds the example's tools",
            bin_dir.join(tool).display()
        );
    }
    let repo = common::repo_root();
    let store = tempfile::Builder::new()
        .prefix(&format!("golden-{suite}-"))
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let store_dir = store.path().canonicalize().unwrap();
    let mut args = vec![
        "run".to_string(),
        repo.join("examples").join(suite).display().to_string(),
        "--trials".into(),
        "2".into(),
        "--store".into(),
        store_dir.display().to_string(),
        "--isolation".into(),
        "overlay".into(),
    ];
    for v in variants {
        args.extend(["--variant".to_string(), v.to_string()]);
    }
    let out = std::process::Command::new(&bin)
        .args(&args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Some trials of every example fail on purpose: exit 1, never 3 (errored) or 2 (usage).
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let runs: Vec<PathBuf> = std::fs::read_dir(store_dir.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let run_dir = &runs[0];
    let json = std::fs::read_to_string(run_dir.join("results.json")).unwrap();
    let md = std::fs::read_to_string(run_dir.join("results.md")).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    let run_id = doc["run_id"].as_str().unwrap().to_string();
    let host_path = std::env::var("PATH").unwrap_or_default();
    let roots = Roots {
        // Longest first: the store and the binaries may lie inside the repository.
        folders: vec![
            (store_dir.display().to_string(), "<store>"),
            (bin_dir.display().to_string(), "<bin>"),
            (repo.display().to_string(), "<repo>"),
        ],
        host_path,
    };
    let json = normalise_json(&host_view(&id_map(&limits_enforcement(&json))), &roots);
    let md = normalise_md(&md, &run_id);
    compare(&format!("{suite}.results.json"), &json);
    compare(&format!("{suite}.results.md"), &md);
}

#[test]
fn traps_results_match_the_golden_files() {
    golden("traps", &[]);
}

#[test]
fn chat_ax_results_match_the_golden_files() {
    golden("chat-ax", &["oracle", "naive"]);
}

/// Compares `actual` with the golden file `name` (or rewrites it when asked to).
fn compare(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("PROCTOR_UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    if expected == actual {
        return;
    }
    let kept = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.actual"));
    std::fs::write(&kept, actual).unwrap();
    let diff = similar::TextDiff::from_lines(expected.as_str(), actual)
        .unified_diff()
        .context_radius(3)
        .header("golden", "actual")
        .to_string();
    let shown: String = diff.lines().take(120).collect::<Vec<_>>().join("\n");
    panic!(
        "{name} differs from its golden file (the whole normalised output is in {}):\n{shown}",
        kept.display()
    );
}

/// The machine's folders and `PATH`, replaced by placeholders.
struct Roots {
    folders: Vec<(String, &'static str)>,
    host_path: String,
}

/// One step of a JSON key path: an object key, or any array element (`[]`).
type KeyPath = Vec<String>;

/// Whether `path` ends with `suffix`, where `*` in `suffix` matches any one step.
fn ends_with(path: &[String], suffix: &[&str]) -> bool {
    path.len() >= suffix.len()
        && path[path.len() - suffix.len()..]
            .iter()
            .zip(suffix)
            .all(|(p, s)| *s == "*" || p == s)
}

/// The placeholder for a number (or string) at `path` that varies between runs, if it does.
fn varying(path: &[String]) -> Option<&'static str> {
    let p: Vec<&str> = path.iter().map(String::as_str).collect();
    match p.as_slice() {
        ["run_id"] | ["report", "run_ids", "[]"] | ["report", "trials", "[]", "run_id"] => {
            return Some("<run-id>")
        }
        ["generated_at"] => return Some("<timestamp>"),
        ["trials", "[]", "end_state", "changes" | "root_changes", "[]", "mtime", "sec" | "nsec"] => {
            return Some("<mtime>")
        }
        ["trials", "[]", "timings_ms", _] => return Some("<ms>"),
        ["trials", "[]", "end_state", "agent", "wall_seconds" | "cpu_seconds"]
        | ["trials", "[]", "end_state", "calls", "[]", "start" | "end"]
        | ["trials", "[]", "end_state", "services", _, "events", "[]", "at"] => {
            return Some("<seconds>")
        }
        ["trials", "[]", "services", "[]", "ready" | "guard", "elapsed", _] => {
            return Some("<duration>")
        }
        _ => {}
    }
    if ends_with(path, &["medians", "wall_seconds", "median"])
        || ends_with(path, &["medians", "agent_cpu_seconds", "median"])
        || ends_with(path, &["costs", "agent_cpu_seconds", "total"])
        || ["wall_seconds", "agent_cpu_seconds"].iter().any(|m| {
            ["median", "mean", "total"]
                .iter()
                .any(|st| ends_with(path, &["summaries", m, st]))
        })
    {
        return Some("<seconds>");
    }
    None
}

/// Whether the string at `path` is captured program output (which may hold unittest's timing).
fn is_output(path: &[String]) -> bool {
    ends_with(path, &["calls", "[]", "stdout_head"])
        || ends_with(path, &["calls", "[]", "stderr_head"])
        || ends_with(path, &["checks", "*", "stdout"])
        || ends_with(path, &["checks", "*", "stdout_tail"])
        || ends_with(path, &["checks", "*", "stderr_tail"])
}

/// `Ran 4 tests in 0.001s` → `Ran 4 tests in <t>s` (in JSON-escaped text).
fn unittest_time(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find(" tests in ").or_else(|| rest.find(" test in ")) {
        let head = if rest[i..].starts_with(" tests in ") {
            " tests in ".len()
        } else {
            " test in ".len()
        };
        let after = &rest[i + head..];
        let digits = after
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(after.len());
        out.push_str(&rest[..i + head]);
        if digits > 0 && after[digits..].starts_with('s') {
            out.push_str("<t>");
        } else {
            out.push_str(&after[..digits]);
        }
        rest = &after[digits..];
    }
    out.push_str(rest);
    out
}

/// A JSON string's contents as they appear in JSON text.
fn escaped(s: &str) -> String {
    let q = serde_json::to_string(s).unwrap();
    q[1..q.len() - 1].to_string()
}

/// Rewrites the scalars of `text` that vary between runs, leaving every other byte as it is.
fn normalise_json(text: &str, roots: &Roots) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    // The open containers: `Some(key)` for an object (its current key), `None` for an array.
    let mut stack: Vec<Option<String>> = Vec::new();
    let mut expect_key = false;
    let mut i = 0;
    let path_of = |stack: &[Option<String>]| -> KeyPath {
        stack
            .iter()
            .map(|s| s.clone().unwrap_or_else(|| "[]".into()))
            .collect()
    };
    while i < b.len() {
        let c = b[i];
        match c {
            b'{' => {
                stack.push(Some(String::new()));
                expect_key = true;
                out.push('{');
                i += 1;
            }
            b'[' => {
                stack.push(None);
                expect_key = false;
                out.push('[');
                i += 1;
            }
            b'}' | b']' => {
                stack.pop();
                out.push(c as char);
                i += 1;
            }
            b',' => {
                expect_key = matches!(stack.last(), Some(Some(_)));
                out.push(',');
                i += 1;
            }
            b':' => {
                out.push(':');
                i += 1;
            }
            b'"' => {
                let end = string_end(b, i);
                let raw = &text[i..end];
                if expect_key {
                    let key: String = serde_json::from_str(raw).unwrap();
                    if let Some(Some(k)) = stack.last_mut() {
                        *k = key;
                    }
                    expect_key = false;
                    out.push_str(raw);
                } else {
                    let path = path_of(&stack);
                    out.push_str(&normalise_string(raw, &path, roots));
                }
                i = end;
            }
            c if c.is_ascii_whitespace() => {
                out.push(c as char);
                i += 1;
            }
            _ => {
                // A number, `true`, `false` or `null`.
                let end = (i..b.len())
                    .find(|&j| matches!(b[j], b',' | b'}' | b']') || b[j].is_ascii_whitespace())
                    .unwrap_or(b.len());
                let raw = &text[i..end];
                let path = path_of(&stack);
                match varying(&path) {
                    Some(placeholder) if raw != "null" => {
                        out.push('"');
                        out.push_str(placeholder);
                        out.push('"');
                    }
                    _ => out.push_str(raw),
                }
                i = end;
            }
        }
    }
    out
}

/// How a trial's limits were enforced depends on the machine (a control group v1 or v2, or
/// none without root): each record's `enforced_by` and `not_enforced` become one placeholder.
fn limits_enforcement(text: &str) -> String {
    let block = regex::Regex::new(r#""(?:enforced_by|not_enforced)": \{[^{}]*\}"#).unwrap();
    let one = r#""enforcement": "<varies by machine>""#;
    let text = block.replace_all(text, one);
    let twice = regex::Regex::new(&format!(r#"{one},\s*{one}"#)).unwrap();
    twice.replace_all(&text, one).into_owned()
}

/// How a trial's user namespace mapped ids depends on the machine (root or not, its
/// `/etc/subuid`, the `uidmap` helpers): each record's `isolation.ids` becomes one placeholder.
fn id_map(text: &str) -> String {
    let block = regex::Regex::new(r#""ids": \{[^{}]*\}"#).unwrap();
    block
        .replace_all(text, r#""ids": "<varies by machine>""#)
        .into_owned()
}

/// What a trial's root showed of the host depends on the machine (its system folders, what of
/// `/etc` its other users may not read, the `PATH`): each record's `isolation.host_view` becomes
/// one placeholder.
fn host_view(text: &str) -> String {
    let block = regex::Regex::new(r#""host_view": \{[^{}]*\}"#).unwrap();
    block
        .replace_all(text, r#""host_view": "<varies by machine>""#)
        .into_owned()
}

/// The index just past the JSON string starting at `start`.
fn string_end(b: &[u8], start: usize) -> usize {
    let mut j = start + 1;
    while b[j] != b'"' {
        j += if b[j] == b'\\' { 2 } else { 1 };
    }
    j + 1
}

/// A string value (raw JSON text, quotes included), normalised for its `path`.
fn normalise_string(raw: &str, path: &[String], roots: &Roots) -> String {
    if let Some(placeholder) = varying(path) {
        return format!("\"{placeholder}\"");
    }
    let mut s = raw.to_string();
    if ends_with(path, &["launch", "env", "PATH"]) && !roots.host_path.is_empty() {
        s = s.replace(&escaped(&roots.host_path), "<host PATH>");
    }
    if is_output(path) {
        s = unittest_time(&s);
    }
    for (folder, placeholder) in &roots.folders {
        s = s.replace(&escaped(folder), placeholder);
    }
    s
}

/// Normalises `results.md`: the run id, the generation time, and the time columns.
fn normalise_md(text: &str, run_id: &str) -> String {
    const TIME_COLUMNS: [&str; 2] = ["wall s", "agent cpu s"];
    let mut out = String::new();
    // The columns of the table being read that hold times.
    let mut time_cols: Vec<usize> = Vec::new();
    let mut in_table = false;
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches('\n');
        let is_row = body.starts_with('|') && body.ends_with('|');
        if !is_row {
            in_table = false;
            time_cols.clear();
            let mut l = body.replace(&format!("`{run_id}`"), "`<run-id>`");
            if let Some(at) = l.find("; generated ") {
                let from = at + "; generated ".len();
                if let Some(len) = l[from..].find(" by proctor") {
                    l.replace_range(from..from + len, "<timestamp>");
                }
            }
            out.push_str(&l);
            out.push_str(&line[body.len()..]);
            continue;
        }
        let cells: Vec<&str> = body[1..body.len() - 1].split('|').collect();
        if !in_table {
            in_table = true;
            time_cols = cells
                .iter()
                .enumerate()
                .filter(|(_, c)| TIME_COLUMNS.contains(&c.trim()))
                .map(|(i, _)| i)
                .collect();
            out.push_str(line);
            continue;
        }
        let cells: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if !time_cols.contains(&i) || c.trim().starts_with('-') {
                    return c.to_string();
                }
                // ` 0.05 (n=2) ` → ` <s> (n=2) `; ` 0.19 ` → ` <s> `.
                let t = c.trim();
                let n = t.find(" (n=").map_or("", |k| &t[k..]);
                format!(" <s>{n} ")
            })
            .collect();
        out.push('|');
        out.push_str(&cells.join("|"));
        out.push('|');
        out.push_str(&line[body.len()..]);
    }
    out
}
