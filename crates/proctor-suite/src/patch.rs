//! Unified diffs: the format of hidden mutations.
//!
//! A mutation must apply *cleanly*: every hunk's context and removed lines must be found exactly
//! (at the stated line or shifted, as `patch` allows, but never with fuzz). Creating a file
//! and deleting one are supported as each tool writes them: `git diff`'s `--- /dev/null` /
//! `+++ /dev/null` (and its `new file mode` / `deleted file mode` sections without hunks, for an
//! empty file), and `diff -ruN`'s side dated at the Unix epoch (`1970-01-01 00:00:00.000000000
//! +0000`, in any time zone) with an empty range (`-0,0` or `+0,0`). `git diff`'s renames
//! (`rename from`/`rename to`) move a file; its copies are refused. Git binary patches
//! (`git diff --binary`) apply only to the exact content they were made from
//! ([`crate::binpatch`]). Paths lose their `a/` and `b/` prefixes, or, when both sides name a
//! path and only their first folder differs (`diff -ruN fixture mutated`), that folder.

use std::collections::BTreeMap;

use crate::binpatch::{BinaryData, BinaryPatch};

/// A parsed unified diff touching one or more files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    /// The files it changes, in order.
    pub files: Vec<FilePatch>,
}

/// The changes to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePatch {
    /// Path before the change, `None` when the file is created.
    pub old_path: Option<String>,
    /// Path after the change, `None` when the file is deleted.
    pub new_path: Option<String>,
    /// The hunks, in file order (none for a binary patch).
    pub hunks: Vec<Hunk>,
    /// A git binary patch of the file, instead of hunks.
    pub binary: Option<BinaryPatch>,
}

impl FilePatch {
    /// The path this patch reads or writes.
    pub fn path(&self) -> &str {
        self.new_path
            .as_deref()
            .or(self.old_path.as_deref())
            .unwrap_or_default()
    }
}

/// One `@@ -a,b +c,d @@` hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// 1-based first line in the old file (0 for an empty old side).
    pub old_start: usize,
    /// 1-based first line in the new file (0 for an empty new side).
    pub new_start: usize,
    /// Lines the hunk expects to find (context and removed), each with its line ending.
    pub old_lines: Vec<String>,
    /// Lines the hunk leaves (context and added), each with its line ending.
    pub new_lines: Vec<String>,
}

impl Hunk {
    /// `-0,0`: nothing before, as when the file is created.
    fn old_empty(&self) -> bool {
        self.old_start == 0 && self.old_lines.is_empty()
    }

    /// `+0,0`: nothing after, as when the file is deleted.
    fn new_empty(&self) -> bool {
        self.new_start == 0 && self.new_lines.is_empty()
    }
}

/// Why a text is not a usable unified diff.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct PatchParseError {
    /// 1-based line in the patch file: always a line the file has (line 1 for an empty file).
    pub line: usize,
    /// What was wrong.
    pub message: String,
}

/// Why a patch does not apply to a tree.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// The patch changes or deletes a file the tree does not have.
    #[error("`{0}` does not exist in the fixture")]
    Missing(String),
    /// The patch creates a file the tree already has.
    #[error("`{0}` already exists in the fixture, but the patch creates it")]
    AlreadyExists(String),
    /// A `deleted file mode` section without hunks (an empty file's deletion) names a file
    /// that has content.
    #[error("`{0}` is not empty in the fixture, but the patch deletes it as an empty file")]
    NotEmpty(String),
    /// A hunk's lines were not found.
    #[error("hunk {hunk} of `{path}` (at line {line}) does not match the fixture")]
    HunkMismatch {
        /// The file.
        path: String,
        /// 1-based hunk number in that file.
        hunk: usize,
        /// The line the hunk names.
        line: usize,
    },
    /// The file is not UTF-8 text.
    #[error("`{0}` is not UTF-8 text")]
    NotText(String),
    /// A path that escapes the tree.
    #[error("`{0}` escapes the fixture")]
    Escapes(String),
    /// A binary patch made from other content than the tree has, or whose result is not the
    /// content it names.
    #[error("the binary patch of `{path}` does not match the fixture: {why}")]
    Binary {
        /// The file.
        path: String,
        /// What did not match.
        why: String,
    },
}

impl Patch {
    /// Parses a unified diff (plain or `git diff` output).
    pub fn parse(text: &str) -> Result<Patch, PatchParseError> {
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        let mut files = Vec::new();
        let mut i = 0;
        while i < lines.len() {
            let line = lines[i];
            if line.starts_with("diff --git ") {
                if let Some((file, next)) = parse_git_binary(&lines, i)? {
                    files.push(file);
                    i = next;
                    continue;
                }
                if let Some((file, next)) = parse_git_empty(&lines, i)? {
                    files.extend(file);
                    i = next;
                    continue;
                }
            }
            if line.starts_with("Binary files ") {
                return Err(PatchParseError {
                    line: i + 1,
                    message: "a binary file's change without its content (`Binary files ... differ`): make the patch with `git diff --binary`".into(),
                });
            }
            if !line.starts_with("--- ") {
                i += 1;
                continue;
            }
            let (old, old_stamp) = header_path(&line[4..]);
            let header_line = i + 1;
            let plus = lines.get(i + 1).copied().unwrap_or_default();
            if !plus.starts_with("+++ ") {
                return Err(PatchParseError {
                    // The line that should have been `+++`, or the `---` line when it is last.
                    line: if i + 1 < lines.len() {
                        i + 2
                    } else {
                        header_line
                    },
                    message: "expected a `+++ b/PATH` line after the `--- a/PATH` line".into(),
                });
            }
            let (new, new_stamp) = header_path(&plus[4..]);
            i += 2;
            let mut hunks = Vec::new();
            while i < lines.len() && lines[i].starts_with("@@") {
                let (hunk, next) = parse_hunk(&lines, i)?;
                hunks.push(hunk);
                i = next;
            }
            if hunks.is_empty() {
                return Err(PatchParseError {
                    line: header_line,
                    message: "a file header with no `@@ ... @@` hunk after it".into(),
                });
            }
            // `diff -N` names an absent file by its real path dated at the epoch, with an empty
            // range on that side.
            let (old, new) = strip_folder(old, new);
            let old = old.filter(|_| !(is_epoch(old_stamp) && hunks.iter().all(Hunk::old_empty)));
            let new = new.filter(|_| !(is_epoch(new_stamp) && hunks.iter().all(Hunk::new_empty)));
            files.push(FilePatch {
                old_path: old,
                new_path: new,
                hunks,
                binary: None,
            });
        }
        if files.is_empty() {
            return Err(PatchParseError {
                line: 1,
                message: "no `--- a/PATH` / `+++ b/PATH` file header: this is not a unified diff"
                    .into(),
            });
        }
        Ok(Patch { files })
    }

    /// Applies the patch to files read through `read`, returning each touched path's new
    /// content (`None` = deleted). Nothing is written.
    pub fn apply(
        &self,
        read: impl Fn(&str) -> Option<Vec<u8>>,
    ) -> Result<BTreeMap<String, Option<Vec<u8>>>, ApplyError> {
        let mut out: BTreeMap<String, Option<Vec<u8>>> = BTreeMap::new();
        for file in &self.files {
            let path = file.path().to_string();
            // A rename (git's `rename from`/`rename to`) reads one path and writes another.
            let from = file.old_path.clone().unwrap_or_else(|| path.clone());
            for p in [&path, &from] {
                if p.starts_with('/') || p.split('/').any(|c| c == "..") {
                    return Err(ApplyError::Escapes(p.clone()));
                }
            }
            let now = |p: &str, out: &BTreeMap<String, Option<Vec<u8>>>| match out.get(p) {
                Some(c) => c.clone(),
                None => read(p),
            };
            let current = now(&from, &out);
            let renamed = from != path;
            if renamed && now(&path, &out).is_some() {
                return Err(ApplyError::AlreadyExists(path));
            }
            if renamed {
                out.insert(from.clone(), None);
            }
            if let Some(binary) = &file.binary {
                let content = apply_binary(&path, file, binary, current)?;
                out.insert(path, content);
                continue;
            }
            let old_text = match (&file.old_path, current) {
                (None, Some(_)) => return Err(ApplyError::AlreadyExists(path)),
                (None, None) => String::new(),
                (Some(_), None) => return Err(ApplyError::Missing(from)),
                (Some(_), Some(bytes)) => {
                    String::from_utf8(bytes).map_err(|_| ApplyError::NotText(from.clone()))?
                }
            };
            if file.new_path.is_none() && file.hunks.is_empty() && !old_text.is_empty() {
                // A `deleted file mode` section without hunks deletes an empty file only.
                return Err(ApplyError::NotEmpty(path));
            }
            let mut lines: Vec<String> = old_text.split_inclusive('\n').map(String::from).collect();
            let mut shift: isize = 0;
            for (n, hunk) in file.hunks.iter().enumerate() {
                // `-K,0` (nothing to find) inserts after line K; otherwise the hunk starts at
                // line K. Huge line numbers saturate rather than overflow.
                let base = if hunk.old_lines.is_empty() {
                    hunk.old_start
                } else {
                    hunk.old_start.max(1) - 1
                };
                let wanted = isize::try_from(base)
                    .unwrap_or(isize::MAX)
                    .saturating_add(shift)
                    .max(0)
                    .unsigned_abs();
                let at = find_hunk(&lines, &hunk.old_lines, wanted).ok_or_else(|| {
                    ApplyError::HunkMismatch {
                        path: path.clone(),
                        hunk: n + 1,
                        line: hunk.old_start,
                    }
                })?;
                lines.splice(
                    at..at + hunk.old_lines.len(),
                    hunk.new_lines.iter().cloned(),
                );
                shift = shift.saturating_add(
                    isize::try_from(hunk.new_lines.len()).unwrap_or(isize::MAX)
                        - isize::try_from(hunk.old_lines.len()).unwrap_or(isize::MAX),
                );
            }
            let content = if file.new_path.is_none() {
                None
            } else {
                Some(lines.concat().into_bytes())
            };
            out.insert(path, content);
        }
        Ok(out)
    }
}

/// A binary patch's new content for `path` (`None`: deleted), from its current content: the
/// old content must be the blob the patch names, and so must the result.
fn apply_binary(
    path: &str,
    file: &FilePatch,
    binary: &BinaryPatch,
    current: Option<Vec<u8>>,
) -> Result<Option<Vec<u8>>, ApplyError> {
    use crate::binpatch::{apply_delta, is_null, names};
    let wrong = |why: String| ApplyError::Binary {
        path: path.to_string(),
        why,
    };
    let old = match (&file.old_path, current) {
        (None, Some(_)) => return Err(ApplyError::AlreadyExists(path.to_string())),
        (None, None) => Vec::new(),
        (Some(_), None) => return Err(ApplyError::Missing(path.to_string())),
        (Some(_), Some(bytes)) => {
            if !names(&binary.old_id, &bytes) {
                return Err(wrong(format!(
                    "it was made from blob {}, and the fixture's file is blob {}",
                    binary.old_id,
                    &crate::binpatch::blob_id(&bytes)[..binary.old_id.len().clamp(7, 40)]
                )));
            }
            bytes
        }
    };
    if file.new_path.is_none() {
        return Ok(None);
    }
    let new = match &binary.data {
        BinaryData::Literal(bytes) => bytes.clone(),
        BinaryData::Delta(delta) => apply_delta(&old, delta).map_err(|e| wrong(e.to_string()))?,
    };
    if !is_null(&binary.new_id) && !names(&binary.new_id, &new) {
        return Err(wrong(format!(
            "its result is not blob {}, which it names",
            binary.new_id
        )));
    }
    Ok(Some(new))
}

/// A `diff --git` section at `at` that is a binary patch: the file's patch and the line after
/// it; `None` when the section is a text diff (its `---`/`+++` lines are read as usual).
/// `Binary files ... differ` (a diff made without `--binary`) cannot be applied: an error
/// saying how to make one that can.
fn parse_git_binary(
    lines: &[&str],
    at: usize,
) -> Result<Option<(FilePatch, usize)>, PatchParseError> {
    use crate::binpatch::is_null;
    let header = lines[at].trim_end_matches(['\n', '\r']);
    let mut i = at + 1;
    let (mut old_id, mut new_id) = (String::new(), String::new());
    let (mut created, mut deleted) = (false, false);
    while let Some(line) = lines.get(i) {
        let line = line.trim_end_matches(['\n', '\r']);
        if line.starts_with("diff --git ") || line.starts_with("--- ") {
            return Ok(None);
        }
        if line.starts_with("Binary files ") {
            return Err(PatchParseError {
                line: i + 1,
                message: "a binary file's change without its content (`Binary files ... differ`): make the patch with `git diff --binary`".into(),
            });
        }
        if let Some(ids) = line.strip_prefix("index ") {
            let ids = ids.split(' ').next().unwrap_or_default();
            if let Some((a, b)) = ids.split_once("..") {
                (old_id, new_id) = (a.to_string(), b.to_string());
            }
        }
        created |= line.starts_with("new file mode");
        deleted |= line.starts_with("deleted file mode");
        if line == "GIT binary patch" {
            break;
        }
        i += 1;
    }
    if i >= lines.len() {
        return Ok(None);
    }
    let path = git_header_path(header).ok_or_else(|| PatchParseError {
        line: at + 1,
        message: "a `diff --git a/PATH b/PATH` line whose paths cannot be read".into(),
    })?;
    if old_id.is_empty() {
        return Err(PatchParseError {
            line: i + 1,
            message:
                "a binary patch without its `index OLD..NEW` line: make it with `git diff --binary`"
                    .into(),
        });
    }
    // The forward hunk: `literal N` or `delta N`, base85 lines, a blank line.
    let (data, after) = binary_hunk(lines, i + 1)?;
    let i = skip_reverse_hunk(lines, after);
    let created = created || is_null(&old_id);
    let deleted = deleted || is_null(&new_id);
    Ok(Some((
        FilePatch {
            old_path: (!created).then(|| path.clone()),
            new_path: (!deleted).then(|| path.clone()),
            hunks: Vec::new(),
            binary: Some(BinaryPatch {
                old_id,
                new_id,
                data,
            }),
        },
        i,
    )))
}

/// A `diff --git` section at `at` that has no `---`/`+++` lines and no binary patch: creating
/// (`new file mode`) or deleting (`deleted file mode`) an empty file, or renaming a file as it
/// is (`rename from`/`rename to`), which is the file's patch, or a change of mode only, which
/// is no change of content (`None` in the result); `None` when the section has `---`/`+++`
/// lines (read as usual: a renamed file's `--- a/OLD` / `+++ b/NEW`). A copy is an error: make
/// the patch with `git diff --no-renames`, which writes a new file instead.
#[allow(clippy::type_complexity)]
fn parse_git_empty(
    lines: &[&str],
    at: usize,
) -> Result<Option<(Option<FilePatch>, usize)>, PatchParseError> {
    let mut i = at + 1;
    let (mut created, mut deleted) = (false, false);
    let (mut renamed_from, mut renamed_to) = (None, None);
    while let Some(line) = lines.get(i) {
        let line = line.trim_end_matches(['\n', '\r']);
        if line.starts_with("--- ") {
            return Ok(None);
        }
        if line.starts_with("diff --git ") {
            break;
        }
        if line.starts_with("copy from ") || line.starts_with("copy to ") {
            return Err(PatchParseError {
                line: i + 1,
                message: format!(
                    "a copy (`{line}`): make the patch with `git diff --no-renames`, which writes the copy as a new file"
                ),
            });
        }
        if let Some(p) = line.strip_prefix("rename from ") {
            renamed_from = Some(p.to_string());
        }
        if let Some(p) = line.strip_prefix("rename to ") {
            renamed_to = Some(p.to_string());
        }
        let extended = [
            "old mode ",
            "new mode ",
            "new file mode ",
            "deleted file mode ",
            "index ",
            "similarity index ",
            "dissimilarity index ",
            "rename from ",
            "rename to ",
        ];
        if !extended.iter().any(|e| line.starts_with(e)) {
            break;
        }
        created |= line.starts_with("new file mode ");
        deleted |= line.starts_with("deleted file mode ");
        i += 1;
    }
    if let (Some(from), Some(to)) = (renamed_from, renamed_to) {
        let file = FilePatch {
            old_path: Some(from),
            new_path: Some(to),
            hunks: Vec::new(),
            binary: None,
        };
        return Ok(Some((Some(file), i)));
    }
    let header = lines[at].trim_end_matches(['\n', '\r']);
    let path = || {
        git_header_path(header).ok_or_else(|| PatchParseError {
            line: at + 1,
            message: "a `diff --git a/PATH b/PATH` line whose paths cannot be read".into(),
        })
    };
    let file = match (created, deleted) {
        (true, false) => Some(FilePatch {
            old_path: None,
            new_path: Some(path()?),
            hunks: Vec::new(),
            binary: None,
        }),
        (false, true) => Some(FilePatch {
            old_path: Some(path()?),
            new_path: None,
            hunks: Vec::new(),
            binary: None,
        }),
        _ => None,
    };
    Ok(Some((file, i)))
}

/// The forward hunk of a binary patch starting at line `i` (`literal SIZE` or `delta SIZE`,
/// base85 lines, up to a blank line): its inflated data and the index of the blank line.
fn binary_hunk(lines: &[&str], mut i: usize) -> Result<(BinaryData, usize), PatchParseError> {
    use crate::binpatch::{decode_line, inflate};
    let bad = |line: usize, message: String| PatchParseError { line, message };
    let kind_line = lines.get(i).map(|l| l.trim_end()).unwrap_or_default();
    let (kind, size) = kind_line.split_once(' ').ok_or_else(|| {
        bad(
            i + 1,
            "expected `literal SIZE` or `delta SIZE` after `GIT binary patch`".into(),
        )
    })?;
    let size: usize = size
        .parse()
        .map_err(|_| bad(i + 1, format!("`{kind_line}`: the size is not a number")))?;
    if kind != "literal" && kind != "delta" {
        return Err(bad(
            i + 1,
            "expected `literal SIZE` or `delta SIZE` after `GIT binary patch`".into(),
        ));
    }
    let hunk_line = i + 1;
    i += 1;
    let mut deflated = Vec::new();
    while let Some(line) = lines.get(i) {
        let line = line.trim_end_matches(['\n', '\r']);
        if line.is_empty() {
            break;
        }
        deflated.extend(decode_line(line).map_err(|e| bad(i + 1, e.to_string()))?);
        i += 1;
    }
    let data = inflate(&deflated, size).map_err(|e| bad(hunk_line, e.to_string()))?;
    let data = if kind == "literal" {
        BinaryData::Literal(data)
    } else {
        BinaryData::Delta(data)
    };
    Ok((data, i))
}

/// Past the blank line at `i` ending the forward hunk, and the reverse hunk (`literal`/`delta`,
/// its lines, a blank line) that follows it, which is not applied: the line after them.
fn skip_reverse_hunk(lines: &[&str], mut i: usize) -> usize {
    i += 1;
    if lines
        .get(i)
        .is_some_and(|l| l.starts_with("literal ") || l.starts_with("delta "))
    {
        i += 1;
        while lines.get(i).is_some_and(|l| !l.trim_end().is_empty()) {
            i += 1;
        }
        i += 1;
    }
    i
}

/// The path of a `diff --git a/PATH b/PATH` line (the same path on both sides: renames are not
/// mutations).
fn git_header_path(header: &str) -> Option<String> {
    let rest = header.strip_prefix("diff --git a/")?;
    let half = rest.len().checked_sub(3)? / 2;
    let (a, b) = (rest.get(..half)?, rest.get(half..)?);
    (b.strip_prefix(" b/")? == a).then(|| a.to_string())
}

/// The path of a `---`/`+++` line as written (`None` for `/dev/null`), and the timestamp after
/// its tab (empty when there is none).
fn header_path(raw: &str) -> (Option<String>, &str) {
    // "a/src/x.py\t2026-01-01 ..." -> "a/src/x.py"
    let raw = raw.trim_end_matches(['\n', '\r']);
    let (path, stamp) = raw.split_once('\t').unwrap_or((raw, ""));
    let path = path.trim();
    ((path != "/dev/null").then(|| path.to_string()), stamp)
}

/// Both paths of a file header without their `a/` and `b/` prefixes (each side its own), or,
/// when neither has one and both name a path that only their first folder differs in
/// (`--- fixture/x` / `+++ mutated/x` from `diff -ruN fixture mutated`), without that folder.
fn strip_folder(old: Option<String>, new: Option<String>) -> (Option<String>, Option<String>) {
    let prefixed = |p: &Option<String>, pre: &str| p.as_deref().is_some_and(|p| p.starts_with(pre));
    if prefixed(&old, "a/") || prefixed(&new, "b/") {
        let strip = |p: Option<String>| {
            p.map(
                |p| match p.strip_prefix("a/").or_else(|| p.strip_prefix("b/")) {
                    Some(rest) => rest.to_string(),
                    None => p,
                },
            )
        };
        return (strip(old), strip(new));
    }
    let rest = |p: &str| p.split_once('/').map(|(_, r)| r.to_string());
    match (&old, &new) {
        (Some(o), Some(n)) if o != n => match (rest(o), rest(n)) {
            (Some(a), Some(b)) if a == b && !a.is_empty() => (Some(a), Some(b)),
            _ => (old, new),
        },
        _ => (old, new),
    }
}

/// Whether a header's timestamp is the Unix epoch, which `diff -N` gives a file that is absent
/// on that side: `1970-01-01 00:00:00.000000000 +0000`, or the same instant in another zone
/// (`1969-12-31 19:00:00.000000000 -0500`); the fraction, when written, is all zeros.
fn is_epoch(stamp: &str) -> bool {
    let mut parts = stamp.split_whitespace();
    let (Some(date), Some(time), Some(zone), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let day: i64 = match date {
        "1970-01-01" => 0,
        "1969-12-31" => -1,
        _ => return false,
    };
    let (hms, fraction) = time.split_once('.').unwrap_or((time, "0"));
    if !fraction.bytes().all(|b| b == b'0') {
        return false;
    }
    let num = |s: &str| -> Option<i64> {
        (s.len() == 2 && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    let mut hms = hms.split(':');
    let (Some(h), Some(m), Some(s), None) = (
        hms.next().and_then(num),
        hms.next().and_then(num),
        hms.next().and_then(num),
        hms.next(),
    ) else {
        return false;
    };
    let (sign, digits) = match zone.split_at_checked(1) {
        Some(("+", d)) => (1, d),
        Some(("-", d)) => (-1, d),
        _ => return false,
    };
    let (Some(zh), Some(zm)) = (digits.get(..2).and_then(num), digits.get(2..).and_then(num))
    else {
        return false;
    };
    day * 86_400 + h * 3600 + m * 60 + s - sign * (zh * 3600 + zm * 60) == 0
}

fn parse_range(s: &str) -> Option<(usize, usize)> {
    let (start, len) = match s.split_once(',') {
        Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
        None => (s.parse().ok()?, 1),
    };
    Some((start, len))
}

fn parse_hunk(lines: &[&str], at: usize) -> Result<(Hunk, usize), PatchParseError> {
    let header = lines[at].trim_end();
    let bad = |message: &str| PatchParseError {
        line: at + 1,
        message: message.to_string(),
    };
    let inner = header
        .strip_prefix("@@ ")
        .and_then(|h| h.split(" @@").next())
        .ok_or_else(|| bad("a hunk header must look like `@@ -START,LEN +START,LEN @@`"))?;
    let mut parts = inner.split_whitespace();
    let old = parts
        .next()
        .and_then(|p| p.strip_prefix('-'))
        .and_then(parse_range)
        .ok_or_else(|| bad("a hunk header must look like `@@ -START,LEN +START,LEN @@`"))?;
    let new = parts
        .next()
        .and_then(|p| p.strip_prefix('+'))
        .and_then(parse_range)
        .ok_or_else(|| bad("a hunk header must look like `@@ -START,LEN +START,LEN @@`"))?;
    let (mut need_old, mut need_new) = (old.1, new.1);
    let mut hunk = Hunk {
        old_start: old.0,
        new_start: new.0,
        old_lines: Vec::new(),
        new_lines: Vec::new(),
    };
    let mut i = at + 1;
    while need_old > 0 || need_new > 0 {
        let Some(line) = lines.get(i) else {
            return Err(PatchParseError {
                line: i,
                message: format!(
                    "the hunk ends early: {need_old} old and {need_new} new lines are missing"
                ),
            });
        };
        // The tag is the first character, whatever its width (a stray `é` is no tag, and no
        // panic either).
        let (tag, body) = line.split_at(line.chars().next().map_or(0, char::len_utf8));
        // An empty line inside a hunk is a context line whose space was stripped by an editor.
        let (tag, body) = if *line == "\n" {
            (" ", "\n")
        } else {
            (tag, body)
        };
        match tag {
            " " if need_old > 0 && need_new > 0 => {
                hunk.old_lines.push(body.to_string());
                hunk.new_lines.push(body.to_string());
                need_old -= 1;
                need_new -= 1;
            }
            "-" if need_old > 0 => {
                hunk.old_lines.push(body.to_string());
                need_old -= 1;
            }
            "+" if need_new > 0 => {
                hunk.new_lines.push(body.to_string());
                need_new -= 1;
            }
            "\\" => {}
            _ => {
                return Err(PatchParseError {
                    line: i + 1,
                    message: "this line does not fit the hunk's line counts (expected a line starting with ' ', '-' or '+')".into(),
                })
            }
        }
        i += 1;
        // "\ No newline at end of file" applies to the line just read.
        if let Some(next) = lines.get(i) {
            if next.starts_with('\\') {
                let strip = |v: &mut Vec<String>| {
                    if let Some(last) = v.last_mut() {
                        if last.ends_with('\n') {
                            last.pop();
                        }
                    }
                };
                match tag {
                    "-" => strip(&mut hunk.old_lines),
                    "+" => strip(&mut hunk.new_lines),
                    _ => {
                        strip(&mut hunk.old_lines);
                        strip(&mut hunk.new_lines);
                    }
                }
                i += 1;
            }
        }
    }
    Ok((hunk, i))
}

/// Finds `needle` in `lines`, trying `wanted` first and then ever farther offsets.
fn find_hunk(lines: &[String], needle: &[String], wanted: usize) -> Option<usize> {
    if needle.is_empty() {
        return Some(wanted.min(lines.len()));
    }
    let fits = |at: usize| {
        at.checked_add(needle.len())
            .is_some_and(|end| end <= lines.len() && lines[at..end] == *needle)
    };
    let max = lines.len();
    for d in 0..=max {
        if wanted >= d && fits(wanted - d) {
            return Some(wanted - d);
        }
        if d > 0 && wanted.checked_add(d).is_some_and(fits) {
            return Some(wanted + d);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = "a\nb\nc\nd\n";

    fn read_fixture(p: &str) -> Option<Vec<u8>> {
        (p == "f.txt").then(|| FIXTURE.as_bytes().to_vec())
    }

    #[test]
    fn applies_a_change() {
        let p = Patch::parse("--- a/f.txt\n+++ b/f.txt\n@@ -2,2 +2,2 @@\n b\n-c\n+C\n").unwrap();
        let out = p.apply(read_fixture).unwrap();
        assert_eq!(out["f.txt"].as_deref(), Some(&b"a\nb\nC\nd\n"[..]));
    }

    #[test]
    fn applies_with_an_offset_but_not_with_wrong_context() {
        let shifted = Patch::parse("--- a/f.txt\n+++ b/f.txt\n@@ -1,1 +1,1 @@\n-c\n+C\n").unwrap();
        assert!(shifted.apply(read_fixture).is_ok());
        let wrong = Patch::parse("--- a/f.txt\n+++ b/f.txt\n@@ -2,1 +2,1 @@\n-x\n+C\n").unwrap();
        assert_eq!(
            wrong.apply(read_fixture),
            Err(ApplyError::HunkMismatch {
                path: "f.txt".into(),
                hunk: 1,
                line: 2
            })
        );
    }

    #[test]
    fn creates_and_deletes_files() {
        let p = Patch::parse(
            "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,1 @@\n+hi\n--- a/f.txt\n+++ /dev/null\n@@ -1,4 +0,0 @@\n-a\n-b\n-c\n-d\n",
        )
        .unwrap();
        let out = p.apply(read_fixture).unwrap();
        assert_eq!(out["new.txt"].as_deref(), Some(&b"hi\n"[..]));
        assert_eq!(out["f.txt"], None);
    }

    #[test]
    fn handles_missing_final_newline() {
        let p = Patch::parse(
            "--- a/f.txt\n+++ b/f.txt\n@@ -4,1 +4,1 @@\n-d\n+D\n\\ No newline at end of file\n",
        )
        .unwrap();
        let out = p.apply(read_fixture).unwrap();
        assert_eq!(out["f.txt"].as_deref(), Some(&b"a\nb\nc\nD"[..]));
    }

    #[test]
    fn rejects_text_that_is_not_a_diff() {
        let e = Patch::parse("just some notes\n").unwrap_err();
        assert!(e.message.contains("not a unified diff"), "{e}");
    }

    #[test]
    fn rejects_missing_files_and_escapes() {
        let p = Patch::parse("--- a/g.txt\n+++ b/g.txt\n@@ -1 +1 @@\n-a\n+b\n").unwrap();
        assert_eq!(
            p.apply(read_fixture),
            Err(ApplyError::Missing("g.txt".into()))
        );
        let p = Patch::parse("--- a/../x\n+++ b/../x\n@@ -1 +1 @@\n-a\n+b\n").unwrap();
        assert_eq!(
            p.apply(read_fixture),
            Err(ApplyError::Escapes("../x".into()))
        );
    }
}
