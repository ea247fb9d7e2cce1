//! After the agent has stopped, the suite's `[diff]` converters: a binary file (a database) is
//! printed as text by the converter its path matches (`"*.db" = ["sqlite3", "{}", ".dump"]`),
//! each run in a sandbox of its own over a workspace holding that one file, with no network.
//! A changed file's start and end are converted and their unified text diff kept (in the record,
//! and whole under the trial's `text/PATH.diff`); the end text of every converted file is kept
//! under `text/PATH.after`, and `file_contains` reads the file through it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use proctor_score::endstate::{ChangeKind, FileChange};
use proctor_score::Files;
use proctor_suite::assertion::Assertion;
use proctor_suite::model::Task;
use proctor_suite::Suite;

use crate::record::TextDiffRecord;
use crate::trial::checks::{run_check, CheckCommand, CheckEnv, EndTree};

/// The folder of a trial's folder that holds its converted texts.
pub const TEXT_DIR: &str = "text";

/// Bytes of a text diff the record keeps (the whole is in `text/PATH.diff`).
pub const DIFF_HEAD_BYTES: usize = 64 * 1024;

/// The converted end texts of a trial, by path (`None`: the conversion failed).
#[derive(Debug, Default)]
pub struct Texts(BTreeMap<String, Option<Vec<u8>>>);

/// The end state's files, a converted file read as its text.
pub struct ThroughConverters<'a> {
    files: &'a dyn Files,
    texts: &'a Texts,
}

impl Texts {
    /// `files`, with each converted path read as its text.
    pub fn over<'a>(&'a self, files: &'a dyn Files) -> ThroughConverters<'a> {
        ThroughConverters { files, texts: self }
    }

    /// The texts a trial kept (`text/PATH.after` for each record without an error).
    pub fn kept(trial_dir: &Path, records: &[TextDiffRecord]) -> Texts {
        Texts(
            records
                .iter()
                .map(|r| {
                    let text = match &r.error {
                        Some(_) => None,
                        None => std::fs::read(after_file(trial_dir, &r.path)).ok(),
                    };
                    (r.path.clone(), text)
                })
                .collect(),
        )
    }
}

impl Files for ThroughConverters<'_> {
    fn read(&self, path: &str) -> Option<Vec<u8>> {
        match self.texts.0.get(path) {
            Some(text) => text.clone(),
            None => self.files.read(path),
        }
    }

    fn partial(&self, path: &str) -> Option<String> {
        match self.texts.0.get(path) {
            Some(_) => None,
            None => self.files.partial(path),
        }
    }
}

/// What converting needs: the sandbox, the end and start files, where to work and keep.
pub struct Converting<'a> {
    /// The sandbox the converters run in (no network, no holdout).
    pub env: CheckEnv,
    /// The end state's files.
    pub end: &'a dyn Files,
    /// The start state's files.
    pub start: &'a dyn Files,
    /// A scratch folder.
    pub work: PathBuf,
    /// The trial's folder, where the texts are kept.
    pub trial_dir: PathBuf,
    /// How long each conversion may run.
    pub timeout: std::time::Duration,
}

/// Converts every changed file and every file a `file_contains` reads that a `[diff]` glob
/// matches: the records (in path order) and the end texts.
pub fn convert_all(
    suite: &Suite,
    task: &Task,
    changes: &[FileChange],
    c: &Converting<'_>,
) -> (Vec<TextDiffRecord>, Texts) {
    let mut paths: BTreeMap<String, bool> = BTreeMap::new();
    for ch in changes
        .iter()
        .filter(|ch| converts(ch) && ch.path_hex.is_none())
    {
        paths.insert(ch.path.clone(), true);
    }
    for path in file_contains_paths(task) {
        paths.entry(path).or_insert(false);
    }
    let mut records = Vec::new();
    let mut texts = Texts::default();
    for (n, (path, changed)) in paths.into_iter().enumerate() {
        let Some((_, argv)) = suite.file.converter(&path) else {
            continue;
        };
        let dir = c.work.join(TEXT_DIR).join(n.to_string());
        let after = c
            .end
            .read(&path)
            .map(|bytes| convert(&c.env, argv, &path, &bytes, &dir.join("after"), c.timeout));
        let before = changed.then(|| {
            c.start
                .read(&path)
                .map(|bytes| convert(&c.env, argv, &path, &bytes, &dir.join("before"), c.timeout))
        });
        let error = [after.as_ref(), before.as_ref().and_then(Option::as_ref)]
            .into_iter()
            .flatten()
            .find_map(|r| r.as_ref().err().cloned());
        let mut record = TextDiffRecord {
            path: path.clone(),
            converter: argv.to_vec(),
            diff: None,
            diff_bytes: 0,
            error,
        };
        if record.error.is_none() {
            let end_text = after.and_then(Result::ok);
            if let Some(text) = &end_text {
                let _ = write_kept(&after_file(&c.trial_dir, &path), text.as_bytes());
            }
            if changed {
                let start_text = before.flatten().and_then(Result::ok);
                let diff = unified(
                    &path,
                    start_text.as_deref().unwrap_or_default(),
                    end_text.as_deref().unwrap_or_default(),
                );
                let _ = write_kept(&diff_file(&c.trial_dir, &path), diff.as_bytes());
                record.diff_bytes = diff.len() as u64;
                record.diff = Some(head(&diff, DIFF_HEAD_BYTES));
            }
            texts
                .0
                .insert(path.clone(), end_text.map(String::into_bytes));
        } else {
            texts.0.insert(path.clone(), None);
        }
        records.push(record);
    }
    (records, texts)
}

/// Runs `argv` (`{}` replaced by `path`) in a sandbox over a workspace holding only `content` at
/// `path`: its stdout, or why it failed.
pub fn convert(
    env: &CheckEnv,
    argv: &[String],
    path: &str,
    content: &[u8],
    dir: &Path,
    timeout: std::time::Duration,
) -> Result<String, String> {
    let tree = dir.join("tree");
    write_kept(&tree.join(path), content).map_err(|e| format!("cannot lay the file out: {e}"))?;
    let arg = path_arg(path);
    let command = argv
        .iter()
        .map(|a| proctor_suite::shell::quote(&a.replace("{}", &arg)))
        .collect::<Vec<_>>()
        .join(" ");
    let run = run_check(
        env,
        &CheckCommand {
            command: command.clone(),
            timeout,
        },
        &EndTree::Copy { dir: tree },
        None,
        &dir.join("run"),
    );
    match (run.error, run.timed_out, run.exit) {
        (Some(e), _, _) => Err(format!("`{command}` could not run: {e}")),
        (None, true, _) => Err(format!(
            "`{command}` did not finish in {} s",
            timeout.as_secs()
        )),
        (None, false, Some(0)) => Ok(run.stdout),
        (None, false, exit) => Err(format!(
            "`{command}` exited {}: {}",
            exit.map_or("without a status".into(), |e| e.to_string()),
            run.stderr_tail.trim()
        )),
    }
}

/// A path as the converter's argument: one that starts with `-` (an agent's `-init.db`) is
/// given as `./PATH`, so that no converter reads it as an option.
fn path_arg(path: &str) -> String {
    if path.starts_with('-') {
        format!("./{path}")
    } else {
        path.to_string()
    }
}

/// A unified diff of two texts, with `a/PATH` and `b/PATH` headers; empty when they are equal.
pub fn unified(path: &str, before: &str, after: &str) -> String {
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string()
}

/// Every path a `file_contains` of the task reads, under `not` too.
fn file_contains_paths(task: &Task) -> Vec<String> {
    fn walk(a: &Assertion, out: &mut Vec<String>) {
        match a {
            Assertion::FileContains(fc) => out.push(fc.path.get_ref().clone()),
            Assertion::Not(inner) => walk(inner.get_ref(), out),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for a in task.every_assertion() {
        walk(a, &mut out);
    }
    out
}

/// Where a trial keeps a converted end text.
pub fn after_file(trial_dir: &Path, path: &str) -> PathBuf {
    trial_dir.join(TEXT_DIR).join(format!("{path}.after"))
}

/// Where a trial keeps a whole text diff.
pub fn diff_file(trial_dir: &Path, path: &str) -> PathBuf {
    trial_dir.join(TEXT_DIR).join(format!("{path}.diff"))
}

fn write_kept(to: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(to, bytes)
}

/// The first `max` bytes of `text`, cut at a character boundary.
fn head(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

/// Whether a change is one a converter is run for: a file's content, not a folder.
pub fn converts(change: &FileChange) -> bool {
    !change.dir && change.kind != ChangeKind::ModeChanged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unified_diff_names_the_path_and_is_empty_for_equal_texts() {
        let d = unified("shop.db", "A;\nB;\n", "A;\nB;\nC;\n");
        assert!(d.starts_with("--- a/shop.db\n+++ b/shop.db\n@@"), "{d}");
        assert!(d.contains("\n+C;\n"), "{d}");
        assert_eq!(unified("x", "same\n", "same\n"), "");
    }

    #[test]
    fn a_path_is_never_an_option_to_the_converter() {
        assert_eq!(path_arg("-init.db"), "./-init.db");
        assert_eq!(path_arg("data/-x.db"), "data/-x.db");
        assert_eq!(path_arg("shop.db"), "shop.db");
    }

    #[test]
    fn a_head_is_cut_at_a_character_boundary() {
        assert_eq!(head("éé", 3), "é");
        assert_eq!(head("ab", 10), "ab");
    }
}
