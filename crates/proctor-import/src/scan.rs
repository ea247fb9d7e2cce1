//! What the import reads from a task's test files: the metrics its verifier writes to
//! `reward.json`, and whether it downloads anything while it runs.
//!
//! The metric names are read conservatively: a key counts only when the object it belongs to is
//! demonstrably what is written to `reward.json`, and its value can be a number. The writes
//! recognised are
//!
//! - shell: `echo '{"a": 0}' > /logs/verifier/reward.json` (also `printf`, `tee`, and a variable
//!   holding the path), and `cat > /logs/verifier/reward.json <<EOF` with the object in the
//!   heredoc;
//! - Python: `json.dump(X, f)` / `f.write(json.dumps(X))` inside `with open(P, "w") as f:`, and
//!   `P.write_text(json.dumps(X))` or `json.dump(X, open(P, "w"))` on one line, where `P` names
//!   `reward.json` (literally, or through a variable assigned a path that does) and `X` is a dict
//!   literal, or a variable assigned exactly one dict literal (and nothing else) in the same
//!   function before the write.
//!
//! Anything else (a dict built by another function, a variable assigned twice) gives no names:
//! the import then makes no rubric and says so, rather than guess from objects that merely sit
//! near a mention of `reward.json` (answer keys, debug output).

use std::collections::BTreeSet;

use regex::Regex;

use crate::files::FileEntry;

/// What the test files say about the verifier.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct TestScan {
    /// Some test file mentions `reward.json`.
    pub writes_reward_json: bool,
    /// The keys, other than `reward` itself, of the objects the test files demonstrably write to
    /// `reward.json` with a value that can be a number, in order of first appearance.
    pub metrics: Vec<String>,
    /// Commands in the test files that fetch from the network (`apt-get install`, `curl`, ...),
    /// each once. Comments are not read.
    pub downloads: Vec<String>,
}

/// Commands that fetch from the network. `curl` and `wget` count only when they look run (an
/// option, a URL or a variable follows, or they are an argument list's first item), not when a
/// message or a package name merely mentions them.
const DOWNLOAD: &str = r#"\b(apt-get install|apt install|apk add|pip3? install|uv (?:add|pip install|sync)|uvx|npm (?:install|ci)|git clone|go install|cargo install)\b|\b(curl|wget)\s+(?:-|[a-z]+://|["']?\$|["'][a-z]+://)|["'](curl|wget)["']\s*,"#;

/// Reads the text files among `files`.
pub(crate) fn scan(files: &[FileEntry]) -> TestScan {
    let mut out = TestScan::default();
    let Ok(download) = Regex::new(DOWNLOAD) else {
        return out;
    };
    let mut metrics = BTreeSet::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file.src) else {
            continue;
        };
        for line in text.lines() {
            let code = strip_comment(line);
            if let Some(c) = download.captures(code) {
                let cmd = (1..=3)
                    .find_map(|i| c.get(i))
                    .map_or_else(String::new, |m| m.as_str().to_string());
                if !cmd.is_empty() && !out.downloads.contains(&cmd) {
                    out.downloads.push(cmd);
                }
            }
        }
        if text.contains("reward.json") {
            out.writes_reward_json = true;
            for name in reward_json_keys(&text) {
                if name != "reward" && metrics.insert(name.clone()) {
                    out.metrics.push(name);
                }
            }
        }
    }
    out
}

/// `line` without a shell or Python comment: from a `#` that starts the line or follows
/// whitespace, outside quotes, to the end.
fn strip_comment(line: &str) -> &str {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut prev_space = true;
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' && quote != Some('\'') {
            escaped = true;
        } else if let Some(q) = quote {
            if c == q {
                quote = None;
            }
        } else if c == '"' || c == '\'' {
            quote = Some(c);
        } else if c == '#' && prev_space {
            return &line[..i];
        }
        prev_space = c.is_whitespace();
    }
    line
}

/// Whether `word` occurs in `s` as a whole identifier.
fn has_word(s: &str, word: &str) -> bool {
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    s.match_indices(word).any(|(i, _)| {
        !s[..i].chars().next_back().is_some_and(is_word)
            && !s[i + word.len()..].chars().next().is_some_and(is_word)
    })
}

/// The indentation of `line`, in characters.
fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// The keys written to `reward.json` by the file `text`, as the module documentation describes.
fn reward_json_keys(text: &str) -> Vec<String> {
    let (Ok(assign), Ok(redirect), Ok(heredoc), Ok(with_as), Ok(dump)) = (
        Regex::new(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*(?::[^=]*)?=([^=].*)$"),
        Regex::new(r#"(?:>>?|\btee\s+(?:-a\s+)?)\s*["']?([^\s"';|&<>()]+)"#),
        Regex::new(r#"<<-?\s*["']?([A-Za-z_][A-Za-z0-9_]*)["']?"#),
        Regex::new(r"^\s*with\s+(.+)\s+as\s+([A-Za-z_][A-Za-z0-9_]*)\s*:\s*$"),
        Regex::new(r"json\.dumps?\(\s*"),
    ) else {
        return Vec::new();
    };
    let mut offsets = Vec::new();
    let mut at = 0;
    let lines: Vec<&str> = text
        .split_inclusive('\n')
        .map(|l| {
            offsets.push(at);
            at += l.len();
            l.trim_end_matches(['\n', '\r'])
        })
        .collect();
    // Variables (shell or Python) holding a path to reward.json.
    let names: Vec<String> = lines
        .iter()
        .filter_map(|l| assign.captures(strip_comment(l)))
        .filter(|c| c[2].contains("reward.json"))
        .map(|c| c[1].to_string())
        .collect();
    let refers = |s: &str| s.contains("reward.json") || names.iter().any(|n| has_word(s, n));
    let mut keys = Vec::new();
    for (i, raw) in lines.iter().enumerate() {
        let line = strip_comment(raw);
        if !refers(line) {
            continue;
        }
        // Shell: a redirection (or tee) into reward.json.
        if let Some(found) = shell_keys(&lines, i, line, &redirect, &heredoc, &names) {
            keys.extend(found);
            continue;
        }
        // Python: json.dump(X, ...) on a line naming reward.json.
        if let Some(m) = dump.find(line) {
            keys.extend(python_arg_keys(text, &lines, &offsets, i, m.end()).unwrap_or_default());
            continue;
        }
        // Python: with open(reward.json) as f: ... json.dump(X, f) ...
        if let Some(c) = with_as.captures(line) {
            if refers(&c[1]) {
                keys.extend(with_block_keys(text, &lines, &offsets, i, &c[2], &dump));
            }
        }
    }
    keys
}

/// The keys of the object a shell line `i` writes into reward.json (by a redirection or `tee`,
/// the object on the line or in its heredoc), or `None` when the line writes nothing there.
fn shell_keys(
    lines: &[&str],
    i: usize,
    line: &str,
    redirect: &Regex,
    heredoc: &Regex,
    names: &[String],
) -> Option<Vec<String>> {
    let m = redirect
        .captures_iter(line)
        .find(|c| {
            let t = &c[1];
            t.contains("reward.json") || (t.contains('$') && names.iter().any(|n| has_word(t, n)))
        })
        .and_then(|c| c.get(0))?;
    let text = match heredoc.captures(line).map(|c| c[1].to_string()) {
        Some(marker) => lines[i + 1..]
            .iter()
            .take_while(|l| l.trim() != marker)
            .copied()
            .collect::<Vec<_>>()
            .join("\n"),
        None => line[..m.start()].replace("\\\"", "\""),
    };
    Some(
        text.find('{')
            .and_then(|start| object_keys(&text[start..]))
            .unwrap_or_default(),
    )
}

/// The keys dumped inside a Python `with open(reward.json) as VAR:` block opened at line `i`:
/// the first argument of each `json.dump(X, VAR)` in the block.
fn with_block_keys(
    text: &str,
    lines: &[&str],
    offsets: &[usize],
    i: usize,
    var: &str,
    dump: &Regex,
) -> Vec<String> {
    let base = indent(lines[i]);
    let mut keys = Vec::new();
    for (j, inner) in lines.iter().enumerate().skip(i + 1) {
        if !inner.trim().is_empty() && indent(inner) <= base {
            break;
        }
        let inner = strip_comment(inner);
        if has_word(inner, var) {
            if let Some(m) = dump.find(inner) {
                keys.extend(python_arg_keys(text, lines, offsets, j, m.end()).unwrap_or_default());
            }
        }
    }
    keys
}

/// The keys of the first argument of a `json.dump(` call: a dict literal at byte `col` of line
/// `i`, or a variable assigned exactly one dict literal, and nothing else, in the same function
/// before line `i`.
fn python_arg_keys(
    text: &str,
    lines: &[&str],
    offsets: &[usize],
    i: usize,
    col: usize,
) -> Option<Vec<String>> {
    let rest = &text[offsets[i] + col..];
    if rest.starts_with('{') {
        return object_keys(rest);
    }
    let name: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    // The enclosing function: the nearest `def` above that is indented less than the write.
    let here = indent(lines[i]);
    let def = (0..i)
        .rev()
        .find(|&j| lines[j].trim_start().starts_with("def ") && indent(lines[j]) < here);
    if let Some(d) = def {
        // A parameter is whatever the caller passed.
        if has_word(lines[d], &name) {
            return None;
        }
    }
    let assignment = Regex::new(&format!(
        r"^\s*(?:[A-Za-z_][A-Za-z0-9_]*\s*,\s*)*{}\s*(?:,\s*[A-Za-z_][A-Za-z0-9_.]*\s*)*(?::[^=]*)?(?:[-+*/|&]|//)?=([^=].*|)$",
        regex::escape(&name)
    ))
    .ok()?;
    let from = def.map_or(0, |d| d + 1);
    let mut found = (from..i).filter(|&j| assignment.is_match(lines[j]));
    let (Some(j), None) = (found.next(), found.next()) else {
        return None;
    };
    let line = lines[j];
    let eq = line.find('=')?;
    let value = line[eq + 1..].trim_start();
    if !value.starts_with('{') || line[..eq].contains(',') {
        return None;
    }
    let start = offsets[j] + line.len() - value.len();
    object_keys(&text[start..])
}

/// The keys of the object literal (JSON, or a Python dict) at the start of `text`, whose values
/// can be numbers; `None` when the object is not closed.
fn object_keys(text: &str) -> Option<Vec<String>> {
    let entries = top_level_entries(text)?;
    let mut keys = Vec::new();
    for entry in entries {
        let entry = entry.trim();
        let Some(q) = entry.chars().next().filter(|c| *c == '"' || *c == '\'') else {
            continue;
        };
        let Some(end) = entry[1..].find(q) else {
            continue;
        };
        let key = &entry[1..=end];
        let Some(value) = entry[end + 2..].trim_start().strip_prefix(':') else {
            continue;
        };
        let valid_key = !key.is_empty()
            && key.len() <= 64
            && key.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
        if valid_key && numeric_value(value.trim()) && !keys.iter().any(|k| k == key) {
            keys.push(key.to_string());
        }
    }
    Some(keys)
}

/// The entries of the object at the start of `text` (which starts with `{`), split at its own
/// commas; `None` when it is not closed.
fn top_level_entries(text: &str) -> Option<Vec<&str>> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut entries = Vec::new();
    let mut start = 1;
    for (i, c) in text.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        if let Some(q) = quote {
            if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '"' | '\'' => quote = Some(c),
            '{' | '[' | '(' => depth += 1,
            '}' | ']' | ')' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    entries.push(&text[start..i]);
                    return Some(entries);
                }
            }
            ',' if depth == 1 => {
                entries.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    None
}

/// Whether an object's value, as written, can be a number: a number, a shell variable or
/// `printf` placeholder, or a Python expression that is not a string, list, dict, boolean or
/// comparison.
fn numeric_value(v: &str) -> bool {
    let patterns = [
        r"^-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$",
        r"^\$\{?[A-Za-z_][A-Za-z0-9_]*(:-[0-9.]*)?\}?$",
        r"^%[-+ 0#]*[0-9]*(\.[0-9]+)?[dfgeis]$",
        r"^\$\(\(.*\)\)$",
    ];
    if patterns
        .iter()
        .any(|p| Regex::new(p).is_ok_and(|re| re.is_match(v)))
    {
        return true;
    }
    let first = v.chars().next();
    if v.starts_with("$(")
        || first.is_some_and(|c| "\"'[{%$".contains(c))
        || ["f\"", "f'", "b\"", "b'", "r\"", "r'"]
            .iter()
            .any(|p| v.starts_with(p))
    {
        return false;
    }
    let word: String = v
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    if [
        "True",
        "False",
        "None",
        "true",
        "false",
        "null",
        "not",
        "str",
        "repr",
        "bool",
        "list",
        "dict",
        "set",
        "tuple",
        "sorted",
        "all",
        "any",
        "isinstance",
    ]
    .contains(&word.as_str())
    {
        return false;
    }
    if ["round", "float", "int", "len", "sum", "abs", "min", "max"].contains(&word.as_str())
        && v[word.len()..].starts_with('(')
    {
        return true;
    }
    let bare = without_strings(v);
    let conditional = bare.contains(" if ") && bare.contains(" else ");
    let doubtful = [
        "[", "{", "==", "!=", "<", ">", " and ", " or ", " not ", " is ", " in ",
    ]
    .iter()
    .any(|op| bare.contains(op));
    (conditional || !doubtful)
        && first.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '(' || c == '-')
}

/// `v` with the insides of its string literals removed.
fn without_strings(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in v.chars() {
        match quote {
            Some(_) if escaped => escaped = false,
            Some(_) if c == '\\' => escaped = true,
            Some(q) if c == q => {
                quote = None;
                out.push(c);
            }
            Some(_) => {}
            None => {
                if c == '"' || c == '\'' {
                    quote = Some(c);
                }
                out.push(c);
            }
        }
    }
    out
}
/// The warning for tests that fetch or install while the check runs, if they do, for a
/// verifier phase with no network (`shown_as` names the test files).
pub(crate) fn download_warning(scanned: &TestScan, shown_as: &str) -> Option<String> {
    (!scanned.downloads.is_empty()).then(|| {
        format!(
            "{shown_as} download while verifying ({}), but the verifier phase has no network (check_network = \"none\"), so the check fails unless the image already holds what they fetch",
            scanned.downloads.join(", ")
        )
    })
}

/// The warning for a solution that fetches or installs while it runs in an agent phase with no
/// network (`offline`), if it does. With the network there is nothing to say: the trial's root in
/// the task's image is writable, so what it installs lands as in Harbor's container.
pub(crate) fn solution_warning(
    files: &[FileEntry],
    shown_as: &str,
    offline: bool,
) -> Option<String> {
    if !offline {
        return None;
    }
    let downloads = scan(files).downloads;
    (!downloads.is_empty()).then(|| {
        format!(
            "{shown_as} fetches or installs while it runs ({}), but the agent phase has no network (network = \"none\"), so the oracle fails unless the image already holds what it fetches",
            downloads.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(dir: &std::path::Path, name: &str, text: &str) -> FileEntry {
        let src = dir.join(name);
        std::fs::write(&src, text).expect("write");
        FileEntry {
            src,
            rel: name.into(),
            executable: false,
        }
    }

    fn scan_one(name: &str, text: &str) -> TestScan {
        let dir = tempfile::tempdir().expect("tempdir");
        scan(&[entry(dir.path(), name, text)])
    }

    #[test]
    fn a_solution_that_fetches_is_reported_only_where_its_phase_is_offline() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = [entry(
            dir.path(),
            "solve.sh",
            "#!/bin/bash\napt-get install -y jq\n",
        )];
        assert_eq!(solution_warning(&files, "solution/", false), None);
        let offline = solution_warning(&files, "solution/", true).expect("reported");
        assert!(
            offline.starts_with("solution/ fetches or installs while it runs (apt-get install), but the agent phase has no network"),
            "{offline}"
        );
    }

    #[test]
    fn metrics_come_from_objects_written_to_reward_json() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = vec![
            entry(
                dir.path(),
                "test.sh",
                "#!/bin/bash\n# curl is not used here\napt-get install -y curl\necho '{\"reward\": 0.0, \"accuracy\": 0.0, \"speed\": 0.0}' > /logs/verifier/reward.json\n",
            ),
            entry(
                dir.path(),
                "grade.py",
                "CONFIG = {\"unrelated\": 1}\nwith open('/logs/verifier/reward.json', 'w') as f:\n    json.dump({\"accuracy\": acc, \"recall\": r, \"label\": \"x\"}, f)\n",
            ),
        ];
        let scan = scan(&files);
        assert!(scan.writes_reward_json);
        assert_eq!(scan.metrics, vec!["accuracy", "speed", "recall"]);
        assert_eq!(scan.downloads, vec!["apt-get install"]);
    }

    #[test]
    fn printf_escaped_echo_and_a_path_variable_are_read() {
        let s = scan_one(
            "test.sh",
            "printf '{\"reward\": %s, \"accuracy\": %s, \"speed\": %.2f}\\n' \"$a\" \"$a\" \"$s\" > /logs/verifier/reward.json\n",
        );
        assert_eq!(s.metrics, vec!["accuracy", "speed"]);
        let s = scan_one(
            "test.sh",
            "OUT=/logs/verifier/reward.json\necho \"{\\\"reward\\\": $R, \\\"f1\\\": $F1, \\\"status\\\": \\\"$S\\\"}\" > \"$OUT\"\n",
        );
        assert_eq!(s.metrics, vec!["f1"]);
    }

    /// InfraBench's shape: a heredoc; the nested `checks` object holds booleans, which Harbor
    /// ignores, so only the top-level numbers count.
    #[test]
    fn a_heredoc_into_reward_json_is_read() {
        let s = scan_one(
            "test.sh",
            r#"cat > /logs/verifier/reward.json <<JSON
{
  "reward": $REWARD,
  "score": $score,
  "max_score": 100,
  "checks": {
    "node1_removed_from_ring": $( $ring_clean && echo true || echo false),
    "quorum_read_node0": $([ "${ROW_COUNT_N0:-0}" -ge 5 ] 2>/dev/null && echo true || echo false)
  }
}
JSON
"#,
        );
        assert_eq!(s.metrics, vec!["score", "max_score"]);
    }

    /// multimedia-terminal-bench's debate-attribution: gold data near the REWARD_JSON constant,
    /// and a reward dict that comes back from another function. No name can be shown to be
    /// written, so none is read (they were `id` and `speaker`, the answer key).
    #[test]
    fn answer_keys_near_the_path_are_not_metrics() {
        let s = scan_one(
            "verifier.py",
            r#"import json
from pathlib import Path

PRIMARY_OUTPUT = Path("/app/submission/attribution.json")
REWARD_TXT = Path("/logs/verifier/reward.txt")
REWARD_JSON = Path("/logs/verifier/reward.json")
DEBUG_PATH = Path("/logs/verifier/details.json")

# Gold attribution (utterance id, speaker).
GOLD = [
    {"id": 1, "speaker": "A"},
    {"id": 2, "speaker": "B"},
]


def verify():
    debug = {"gold": GOLD, "pass_threshold": PASS_THRESHOLD}
    reward = matched / len(GOLD)
    success = 1 if reward >= PASS_THRESHOLD else 0
    return (
        {
            "success": success,
            "reward": round(reward, 4),
            "matched": matched,
        },
        debug,
    )


def main():
    reward, debug = verify()
    REWARD_TXT.parent.mkdir(parents=True, exist_ok=True)
    REWARD_TXT.write_text(str(reward["success"]))
    REWARD_JSON.write_text(json.dumps(reward, indent=2))
    DEBUG_PATH.write_text(json.dumps(debug, indent=2, default=str, ensure_ascii=False))
"#,
        );
        assert!(s.writes_reward_json);
        assert!(s.metrics.is_empty(), "{:?}", s.metrics);
    }

    /// ornament-classification-detection: the dict literal named `reward` is built in
    /// `verify()`, but what `main()` writes is the value it returns.
    #[test]
    fn a_variable_assigned_elsewhere_is_not_resolved() {
        let s = scan_one(
            "verifier.py",
            r#"REWARD_JSON = Path("/logs/verifier/reward.json")

GOLD_ERRORS = [
    {"note_idx": 0, "expected_ornament": "trill", "played_ornament": "mordent"},
    {"note_idx": 2, "expected_ornament": "turn", "played_ornament": "mordent"},
]

def verify():
    reward = {
        "reward": round(f1, 4),
        "success": success,
        "tp": tp,
    }
    return reward, debug


def main():
    reward, debug = verify()
    REWARD_JSON.write_text(json.dumps(reward, indent=2))
"#,
        );
        assert!(s.metrics.is_empty(), "{:?}", s.metrics);
    }

    /// semantic-image-retrieval: the dict written is assigned once in the same function; the
    /// `errors` list only goes to stdout.
    #[test]
    fn a_dict_assigned_once_in_the_writing_function_is_read() {
        let s = scan_one(
            "verifier.py",
            r#"def finish(reward_int: int, per_query_score: float, details: dict) -> None:
    VERIFIER_DIR.mkdir(parents=True, exist_ok=True)
    rj = {
        "success": reward_int,
        "mean_score": round(per_query_score, 4),
        "q1_score": round(details.get("per_query", {}).get("q1", 0.0), 4),
        "integrity_ok": 1 if details.get("integrity_ok") else 0,
        "note": "text",
        "passed": ok == 1,
    }
    (VERIFIER_DIR / "reward.txt").write_text(str(reward_int))
    (VERIFIER_DIR / "reward.json").write_text(json.dumps(rj, indent=2))
    print(json.dumps({**rj, "errors": details.get("errors", [])}, indent=2))
"#,
        );
        assert_eq!(
            s.metrics,
            vec!["success", "mean_score", "q1_score", "integrity_ok"]
        );
    }

    #[test]
    fn a_parameter_is_not_resolved() {
        let s = scan_one(
            "verifier.py",
            "def write(rj):\n    rj = {\"a\": 1}\n    Path(\"/logs/verifier/reward.json\").write_text(json.dumps(rj))\n",
        );
        assert!(s.metrics.is_empty(), "{:?}", s.metrics);
    }

    #[test]
    fn plain_reward_txt_tests_have_no_metrics() {
        let s = scan_one(
            "test.sh",
            "pytest /tests/test_outputs.py -rA && echo 1 > /logs/verifier/reward.txt\n",
        );
        assert_eq!(s, TestScan::default());
    }

    /// terminal-bench-env's R_package_dependency_missing_medium: `curl` in a comment and in a
    /// message, and in package names, fetches nothing.
    #[test]
    fn comments_and_messages_are_not_downloads() {
        let s = scan_one(
            "test_outputs.py",
            r#"    # jsonlite typically requires libcurl4-openssl-dev or similar curl development libraries
    common_curl_packages = [
        'libcurl4-openssl-dev',
    ]
    assert package_name in common_curl_packages, \
        f"Package '{package_name}' is not a recognized curl development library. Expected one of: {common_curl_packages}"
ls /tmp  # then apt-get install nothing
command -v curl >/dev/null || echo "curl is missing" >&2
"#,
        );
        assert!(s.downloads.is_empty(), "{:?}", s.downloads);
        let s = scan_one(
            "test.sh",
            "curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh\nwget \"$URL\"\nsubprocess.run([\"curl\", url])\n",
        );
        assert_eq!(s.downloads, vec!["curl", "wget"]);
    }

    #[test]
    fn comments_are_cut_outside_quotes_only() {
        assert_eq!(strip_comment("echo hi # curl x"), "echo hi ");
        assert_eq!(strip_comment("# all comment"), "");
        assert_eq!(
            strip_comment("echo '# not' \"#no\" a#b"),
            "echo '# not' \"#no\" a#b"
        );
    }
}
