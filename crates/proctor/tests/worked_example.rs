//! The worked example of docs/README.md ("Writing a suite for your own CLI"), run as written: every
//! `$ proctor ...` command the section shows is run, from a folder holding a copy of
//! `examples/sqlite-shop` where the docs have it, with Debian's real `sqlite3`; every line the
//! section shows of a command's output must be in what the command printed, but for the lines
//! that name a run id or a time (they differ on each run) and `...` (an elision).

mod common;

use std::path::Path;
use std::process::Command;

/// The section's commands, each with the lines the docs show of its output.
fn documented() -> Vec<(String, Vec<String>)> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/README.md"))
            .unwrap();
    let start = readme
        .find("## Writing a suite for your own CLI")
        .expect("docs/README.md has the worked example");
    let section = &readme[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let mut in_block = false;
    for line in section.lines() {
        if line.starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if !in_block {
            continue;
        }
        if let Some(cmd) = line.strip_prefix("$ ") {
            out.push((cmd.to_string(), Vec::new()));
        } else if let Some((_, lines)) = out.last_mut() {
            lines.push(line.to_string());
        }
    }
    assert!(
        out.len() >= 3,
        "the worked example shows its commands: {out:?}"
    );
    out
}

/// Whether a documented line differs from run to run (a run id, a time) or elides.
fn varies(line: &str) -> bool {
    let run_id = regex::Regex::new(r"\d{8}-\d{6}-[0-9a-f]{4}").unwrap();
    let time = regex::Regex::new(r"\b\d+(\.\d+)?\s?(s|ms)\b").unwrap();
    line.trim() == "..." || line.trim().is_empty() || run_id.is_match(line) || time.is_match(line)
}

#[test]
fn the_sqlite3_worked_example_runs_as_the_docs_show_it() {
    if !common::have_sqlite3() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/sqlite-shop");
    let copy = dir.path().join("examples/sqlite-shop");
    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
    let status = Command::new("cp")
        .arg("-a")
        .arg(&example)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(status.success());
    for (cmd, shown) in documented() {
        let words: Vec<&str> = cmd.split_whitespace().collect();
        assert_eq!(words[0], "proctor", "{cmd}");
        let out = Command::new(assert_cmd::cargo::cargo_bin("proctor"))
            .args(&words[1..])
            .current_dir(dir.path())
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        let printed = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let printed: Vec<&str> = printed.lines().map(str::trim_end).collect();
        for line in shown.iter().filter(|l| !varies(l)) {
            assert!(
                printed.contains(&line.trim_end()),
                "`{cmd}` did not print the line the docs show:\n{line}\nIt printed:\n{}",
                printed.join("\n")
            );
        }
    }
}
