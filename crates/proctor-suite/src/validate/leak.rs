//! The leak audit: no file the agent is given may hold what grades it.
//!
//! The *secrets* of a suite are the files the agent must never see, and the solution an oracle
//! carries:
//!
//! - every file under `holdout/TASK_ID/` (a holdout file);
//! - every file under `answers/` (an answer sheet);
//! - every file under `agents/oracle/` (the oracle's scripts `TASK_ID.toml` and any file kept
//!   beside them, such as an imported task's `agents/oracle/files/TASK_ID/solve.sh`), and the
//!   body of every here-document (`cat > lib.py <<'EOF' ... EOF`) in the `run` steps of those
//!   scripts: what a scripted oracle writes is spelled out in its steps, since it cannot read the
//!   suite. Files an oracle makes by other means (`sed -i`, a program that computes them) cannot
//!   be known without running it and are not compared.
//!
//! A fixture file whose content equals a secret's is a [`ProblemKind::Leak`] error naming both.
//! Contents are compared after [`normalise`]: CRLF and lone CR become LF, white space at the end
//! of each line and blank lines at the end are dropped. A secret shorter than [`MIN_LEAK_BYTES`]
//! after that (an empty `__init__.py`, a lone newline, `pass`) is not compared: such contents are
//! common boilerplate, not an answer.
//!
//! A fixture file that *quotes* a secret inside other text (a README quoting the hidden check,
//! an answer sheet pasted into a changelog) is a [`ProblemKind::Leak`] error too, naming the
//! lines that hold the quote and how much of the secret they hold: see [`windows`] for how
//! lines are normalised and matched, and what is not reported (shared comments and imports). A
//! holdout file `holdout/TASK/PATH` quoted by the fixture's own `PATH`, which it is laid over,
//! is not: a hidden test file that extends the public one shares its public part.
//!
//! The same [`Secrets`] finds copies and quotes of an imported task's tests and solution in its
//! image's build context (`proctor import`).
//!
//! The audit reads only what could match: the secrets (a small set) are normalised and hashed
//! first, whole and by windows of lines. A fixture file is opened only when it could be a copy
//! (some secret's normalised length `N` has `N <= size <= 2 N + 64`: normalising only removes
//! bytes; the bound allows CRLF line endings and some trailing white space on every line) or
//! could hold a quote (at least [`windows::MIN_WINDOW_CHARS`] bytes); its first 4 KiB
//! are read first, and the rest only when they are text (no NUL byte: binary files hold no
//! quote) or could begin a copy. `.git` folders are not compared file by file (their objects
//! are compressed): [`super::history`] audits them, for copies only.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::problem::{Problem, ProblemKind};

pub mod windows;

use crate::script::read_script;
use crate::suite::Suite;
pub use windows::Quote;
use windows::{Windows, MIN_LINE_CHARS, MIN_WINDOW_CHARS, WINDOW_LINES};

/// The shortest normalised content compared: shorter files are boilerplate, not answers.
pub const MIN_LEAK_BYTES: usize = 32;

/// How much of a fixture file is read to compare its beginning with the secrets'.
const HEAD_BYTES: usize = 4096;

/// How many bytes a fixture file may exceed twice a secret's normalised length by and still be
/// read (CRLF line endings and trailing white space make a copy longer than the secret).
const SIZE_SLACK: u64 = 64;

/// `bytes` with CRLF and lone CR turned into LF, white space (spaces, tabs, form feeds, vertical
/// tabs) dropped at the end of every line, and blank lines dropped at the end. The text's own
/// last newline is dropped too, so `"a\n"`, `"a"` and `"a \r\n\r\n"` normalise alike.
pub fn normalise(bytes: &[u8]) -> Vec<u8> {
    let (mut out, _) = normalise_until(bytes, None);
    while out.last() == Some(&b'\n') {
        out.pop();
    }
    out
}

/// The first `n` bytes of [`normalise`]`(bytes)`, normalising no further than needed: a byte is
/// final once a byte that is neither white space nor a line end follows it. `None` when the
/// whole text normalises to fewer than `n` bytes.
fn normalised_prefix(bytes: &[u8], n: usize) -> Option<Vec<u8>> {
    let (mut out, stopped) = normalise_until(bytes, Some(n));
    if stopped {
        out.truncate(n);
        return Some(out);
    }
    // The text ended first: what is left is its end, normalised whole.
    while out.last() == Some(&b'\n') {
        out.pop();
    }
    (out.len() >= n).then(|| {
        out.truncate(n);
        out
    })
}

/// Line ends turned into LF and white space dropped at the end of every line, over the whole of
/// `bytes`, or (with `stop`) until more than `stop` bytes are final (then `true`); the trailing
/// newlines are left for the caller.
fn normalise_until(bytes: &[u8], stop: Option<usize>) -> (Vec<u8>, bool) {
    let mut out = Vec::with_capacity(stop.map_or(bytes.len(), |n| n + 16));
    let mut line_start = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\r' | b'\n' => {
                trim_line_end(&mut out, line_start);
                out.push(b'\n');
                line_start = out.len();
                if bytes[i] == b'\r' && bytes.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
            }
            b => {
                out.push(b);
                if stop.is_some_and(|n| out.len() > n) && !is_blank(b) {
                    return (out, true);
                }
            }
        }
        i += 1;
    }
    trim_line_end(&mut out, line_start);
    (out, false)
}

/// White space that [`normalise`] drops at the end of a line.
fn is_blank(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\x0b' | b'\x0c')
}

/// Drops the white space at the end of `out` that lies after `line_start`.
fn trim_line_end(out: &mut Vec<u8>, line_start: usize) {
    while out.len() > line_start && out.last().is_some_and(|b| is_blank(*b)) {
        out.pop();
    }
}

/// One secret of a suite: what it is and where, as a person reads it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Secret {
    /// What the file is, e.g. "holdout file `holdout/fix/check_fix.py`".
    pub description: String,
    /// For a holdout file, the path (relative to the workspace, with `/`) it is laid over: a
    /// fixture file at that path may share part of it (a hidden test file that extends the
    /// public one) without leaking it. Exact copies are reported all the same.
    pub lays_over: Option<String>,
}

/// What a file holds of the secrets.
#[derive(Debug, Default)]
pub struct Found<'a> {
    /// The secrets whose content the whole file has.
    pub copy_of: Option<&'a [Secret]>,
    /// Each secret quoted inside the file (by distinct content); none when it is a copy.
    pub quotes: Vec<(Quote, &'a [Secret])>,
}

/// A set of secrets, ready to compare files with: whole (after [`normalise`]) and by windows
/// of lines ([`windows`]). `proctor validate` builds one from a suite (`Secrets::of`), `proctor
/// import` from a task's tests and solution.
#[derive(Debug, Default)]
pub struct Secrets {
    /// The secrets, by distinct normalised content.
    bodies: Vec<Vec<Secret>>,
    /// Where each normalised content's hash is in `bodies`.
    by_hash: HashMap<blake3::Hash, usize>,
    /// Normalised lengths, sorted and without repeats.
    lengths: Vec<u64>,
    /// The first [`MIN_LEAK_BYTES`] normalised bytes of each secret: a file whose own differ
    /// is not normalised whole nor hashed.
    prefixes: HashSet<Vec<u8>>,
    /// The windows of lines of each content, numbered as `bodies`.
    windows: Windows,
}

impl Secrets {
    /// Reads the secrets of `suite` (see the module's documentation). Files that cannot be read
    /// are left out: other checks report them.
    pub(crate) fn of(suite: &Suite) -> Secrets {
        let mut secrets = Secrets::default();
        let root = &suite.root;
        for (folder, what) in [("holdout", "holdout file"), ("answers", "answer sheet")] {
            for (rel, path) in files_under(root, folder) {
                if let Ok(bytes) = std::fs::read(&path) {
                    // holdout/TASK/REL is laid over REL.
                    let lays_over = (folder == "holdout")
                        .then(|| rel.splitn(3, '/').nth(2).map(str::to_string))
                        .flatten();
                    secrets.add(
                        &bytes,
                        Secret {
                            description: format!("{what} `{rel}`"),
                            lays_over,
                        },
                    );
                }
            }
        }
        let secret = |description: String| Secret {
            description,
            lays_over: None,
        };
        for (rel, path) in files_under(root, "agents/oracle") {
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            let is_script = path.extension().is_some_and(|e| e == "toml")
                && path.parent() == Some(root.join("agents/oracle").as_path());
            if is_script {
                secrets.add(&bytes, secret(format!("oracle script `{rel}`")));
                if let Ok(script) = read_script(&path) {
                    for (n, step) in script.steps.iter().enumerate() {
                        for body in heredoc_bodies(&step.run) {
                            secrets.add(
                                body.as_bytes(),
                                secret(format!(
                                    "the file written by step {} of oracle script `{rel}` (a here-document)",
                                    n + 1
                                )),
                            );
                        }
                    }
                }
            } else {
                secrets.add(&bytes, secret(format!("oracle solution file `{rel}`")));
            }
        }
        secrets
    }

    /// Adds a secret with content `content`; one shorter than [`MIN_LEAK_BYTES`] after
    /// [`normalise`] is left out (boilerplate, not an answer).
    pub fn add(&mut self, content: &[u8], secret: Secret) {
        let norm = normalise(content);
        if norm.len() < MIN_LEAK_BYTES {
            return;
        }
        let hash = blake3::hash(&norm);
        let body = match self.by_hash.get(&hash) {
            Some(&at) => at,
            None => {
                let at = self.bodies.len();
                self.bodies.push(Vec::new());
                self.by_hash.insert(hash, at);
                if let Err(i) = self.lengths.binary_search(&(norm.len() as u64)) {
                    self.lengths.insert(i, norm.len() as u64);
                }
                self.prefixes.insert(norm[..MIN_LEAK_BYTES].to_vec());
                self.windows.add(at, &norm);
                at
            }
        };
        let list = &mut self.bodies[body];
        if !list.contains(&secret) {
            list.push(secret);
        }
    }

    /// Whether the set has no secret long enough to compare.
    pub fn is_empty(&self) -> bool {
        self.bodies.is_empty()
    }

    /// Whether a file of `size` bytes could normalise to a secret's content.
    pub fn could_match(&self, size: u64) -> bool {
        let low = size.saturating_sub(SIZE_SLACK).div_ceil(2);
        let at = self.lengths.partition_point(|n| *n < low);
        self.lengths.get(at).is_some_and(|n| *n <= size)
    }

    /// Whether a file of `size` bytes is worth searching for quotes.
    fn could_quote(&self, size: u64) -> bool {
        !self.windows.is_empty() && size >= MIN_WINDOW_CHARS as u64
    }

    /// The content of the file at `path` (of `size` bytes) when it could be a copy of a secret
    /// or hold a quote of one; `None` when it cannot, or it cannot be read. Its first
    /// [`HEAD_BYTES`] are read first: a file is read whole only when they could begin a secret,
    /// or are text (no NUL byte) and the file is long enough to hold a quote.
    fn read_candidate(&self, path: &Path, size: u64) -> Option<Vec<u8>> {
        use std::io::Read;
        let copy = self.could_match(size);
        let quote = self.could_quote(size);
        if !copy && !quote {
            return None;
        }
        let mut file = std::fs::File::open(path).ok()?;
        let mut head = Vec::with_capacity(HEAD_BYTES.min(size as usize));
        (&mut file)
            .take(HEAD_BYTES as u64)
            .read_to_end(&mut head)
            .ok()?;
        let whole = (head.len() as u64) < HEAD_BYTES as u64;
        let copy = copy
            && match normalised_prefix(&head, MIN_LEAK_BYTES) {
                Some(p) => self.prefixes.contains(&p),
                None => !whole,
            };
        let text = quote && !windows::is_binary(&head);
        if !copy && !text {
            return None;
        }
        if !whole {
            head.reserve(size.saturating_sub(head.len() as u64) as usize);
            file.read_to_end(&mut head).ok()?;
        }
        Some(head)
    }

    /// The secrets whose normalised content `bytes` has, if any.
    pub fn matching(&self, bytes: &[u8]) -> Option<&[Secret]> {
        if !normalised_prefix(bytes, MIN_LEAK_BYTES).is_some_and(|p| self.prefixes.contains(&p)) {
            return None;
        }
        let norm = normalise(bytes);
        if self.lengths.binary_search(&(norm.len() as u64)).is_err() {
            return None;
        }
        let at = *self.by_hash.get(&blake3::hash(&norm))?;
        Some(self.bodies[at].as_slice())
    }

    /// What the file at `path`, of `size` bytes, holds of the secrets: a copy of some, quotes
    /// of others. Only what could match is read (see `Secrets::read_candidate`).
    pub fn examine(&self, path: &Path, size: u64) -> Found<'_> {
        let Some(bytes) = self.read_candidate(path, size) else {
            return Found::default();
        };
        self.examine_bytes(&bytes)
    }

    /// [`Secrets::examine`] of content already read. A copy of a secret is not searched for
    /// quotes: it is reported whole (and a secret that holds another, such as an oracle script
    /// and the file its here-document writes, would be reported twice).
    pub fn examine_bytes(&self, bytes: &[u8]) -> Found<'_> {
        if let Some(copy_of) = self.matching(bytes) {
            return Found {
                copy_of: Some(copy_of),
                quotes: Vec::new(),
            };
        }
        let quotes = self
            .windows
            .quotes(bytes)
            .into_iter()
            .filter_map(|q| {
                let found = self.bodies.get(q.secret)?.as_slice();
                Some((q, found))
            })
            .collect();
        Found {
            copy_of: None,
            quotes,
        }
    }
}

/// Every regular file under `root/folder`, sorted, as (the path relative to `root` with `/`,
/// the path on disk). Nothing when the folder does not exist.
fn files_under(root: &Path, folder: &str) -> Vec<(String, PathBuf)> {
    let dir = root.join(folder);
    if !dir.is_dir() {
        return Vec::new();
    }
    walkdir::WalkDir::new(&dir)
        .sort_by_file_name()
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| {
            let rel = e.path().strip_prefix(root).ok()?.to_str()?.to_string();
            Some((rel, e.path().to_path_buf()))
        })
        .collect()
}

/// The bodies of the here-documents of a shell command line (`<<EOF`, `<<'EOF'`, `<<"EOF"`,
/// `<<-EOF` with its leading tabs removed), each with its lines ended by a newline. A body
/// whose terminator never comes runs to the end of the text, as `sh` reads it.
pub(crate) fn heredoc_bodies(run: &str) -> Vec<String> {
    let lines: Vec<&str> = run.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let markers = heredoc_markers(lines[i]);
        i += 1;
        for (marker, strip_tabs) in markers {
            let mut body = String::new();
            while i < lines.len() {
                let line = if strip_tabs {
                    lines[i].trim_start_matches('\t')
                } else {
                    lines[i]
                };
                i += 1;
                if line == marker {
                    break;
                }
                body.push_str(line);
                body.push('\n');
            }
            out.push(body);
        }
    }
    out
}

/// The here-document markers opened on one line, in order, each with whether it is `<<-`.
fn heredoc_markers(line: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("<<") {
        rest = &rest[at + 2..];
        if let Some(after) = rest.strip_prefix('<') {
            // `<<<` is a here-string, not a here-document.
            rest = after.trim_start_matches('<');
            continue;
        }
        let strip_tabs = rest.starts_with('-');
        let word = rest.trim_start_matches('-').trim_start_matches([' ', '\t']);
        let (marker, len) = match word.chars().next() {
            Some(q @ ('\'' | '"')) => match word[1..].find(q) {
                Some(end) => (word[1..1 + end].to_string(), end + 2),
                None => break,
            },
            _ => {
                let end = word
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '\\'))
                    .unwrap_or(word.len());
                (word[..end].replace('\\', ""), end)
            }
        };
        if marker.is_empty() {
            continue;
        }
        out.push((marker, strip_tabs));
        rest = &word[len..];
    }
    out
}

/// A fixture's files that leak a secret, and the `.git` folders found in it (for
/// [`super::history`]).
pub(super) struct FixtureAudit {
    /// One error per fixture file whose content is a secret's.
    pub problems: Vec<Problem>,
    /// The `.git` folders in the fixture, at any depth.
    pub git_dirs: Vec<PathBuf>,
}

/// Walks the fixture once, setting `.git` folders aside whole; then the files are examined
/// ([`examine_all`]): those that could hold a secret are read and compared.
pub(super) fn audit_fixture(suite: &Suite, secrets: &Secrets) -> FixtureAudit {
    let fixture = suite.fixture_dir();
    let mut audit = FixtureAudit {
        problems: Vec::new(),
        git_dirs: Vec::new(),
    };
    let mut files = Vec::new();
    let mut walker = walkdir::WalkDir::new(&fixture)
        .min_depth(1)
        .sort_by_file_name()
        .into_iter();
    while let Some(entry) = walker.next() {
        let Ok(entry) = entry else {
            continue;
        };
        let ft = entry.file_type();
        if entry.file_name() == ".git" {
            if ft.is_dir() {
                audit.git_dirs.push(entry.path().to_path_buf());
                walker.skip_current_dir();
            }
            continue;
        }
        if ft.is_file() && !secrets.is_empty() {
            files.push(entry.into_path());
        }
    }
    audit.problems = examine_all(&fixture, secrets, &files);
    audit
}

/// How many files a worker of [`examine_all`] takes at a time.
const CHUNK: usize = 64;

/// The leak errors of `files` (of the fixture folder `fixture`), in their order. The files are
/// examined by up to 4 threads (as many as the machine runs at once) when there are more than
/// a few chunks of them: each file is read and searched on its own.
fn examine_all(fixture: &Path, secrets: &Secrets, files: &[PathBuf]) -> Vec<Problem> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4)
        .min(files.len().div_ceil(4 * CHUNK).max(1));
    let next = AtomicUsize::new(0);
    let work = || {
        let mut out: Vec<(usize, Vec<Problem>)> = Vec::new();
        loop {
            let start = next.fetch_add(CHUNK, Ordering::Relaxed);
            if start >= files.len() {
                return out;
            }
            for (i, path) in files.iter().enumerate().skip(start).take(CHUNK) {
                let problems = file_problems(fixture, secrets, path);
                if !problems.is_empty() {
                    out.push((i, problems));
                }
            }
        }
    };
    let mut found: Vec<(usize, Vec<Problem>)> = if threads == 1 {
        work()
    } else {
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads).map(|_| scope.spawn(work)).collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        })
    };
    found.sort_by_key(|(i, _)| *i);
    found.into_iter().flat_map(|(_, p)| p).collect()
}

/// The leak errors of one fixture file: a copy of a secret, or quotes of some.
fn file_problems(fixture: &Path, secrets: &Secrets, path: &Path) -> Vec<Problem> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Vec::new();
    };
    let found = secrets.examine(path, meta.len());
    let mut out = Vec::new();
    if let Some(copy_of) = found.copy_of {
        out.push(leak_problem(path, "this fixture file", copy_of));
    }
    let rel = path
        .strip_prefix(fixture)
        .ok()
        .and_then(Path::to_str)
        .unwrap_or_default();
    for (quote, names) in found.quotes {
        // A holdout file laid over this very file may share its public part.
        if names.iter().any(|s| s.lays_over.as_deref() == Some(rel)) {
            continue;
        }
        out.push(quote_problem(path, "this fixture file", &quote, names));
    }
    out
}

/// The error for something the agent is given (`file`, named `shown`) that holds `secrets`.
pub(super) fn leak_problem(file: &Path, shown: &str, secrets: &[Secret]) -> Problem {
    let names: Vec<&str> = secrets.iter().map(|s| s.description.as_str()).collect();
    Problem::in_file(
        ProblemKind::Leak,
        file,
        format!(
            "{shown} has the content of {}, which the agent must never see",
            names.join(" and of ")
        ),
    )
    .with_help(format!(
        "remove the copy from what the agent is given (checks get holdout files laid over the end state by themselves; to keep a public file from being edited, assert `{{ files_unchanged = [\"PATH\"] }}` instead of re-laying it from holdout/). Contents are compared after normalising line endings and trailing white space; contents under {MIN_LEAK_BYTES} bytes are not compared"
    ))
}

/// `first`-`last` as a person reads a range of lines ("line 4", "lines 4-9").
fn line_range((first, last): (u32, u32)) -> String {
    if first == last {
        format!("line {first}")
    } else {
        format!("lines {first}-{last}")
    }
}

/// What a quote of a secret in a file says of it: where, and how much of the secret.
pub fn describe_quote(quote: &Quote, secrets: &[Secret]) -> String {
    let names: Vec<&str> = secrets.iter().map(|s| s.description.as_str()).collect();
    format!(
        "quotes {} at {} ({} of its {} meaningful lines)",
        names.join(" and "),
        line_range(quote.lines),
        quote.quoted,
        quote.total
    )
}

/// The error for something the agent is given (`file`, named `shown`) that quotes `secrets`
/// inside other text.
pub(super) fn quote_problem(
    file: &Path,
    shown: &str,
    quote: &Quote,
    secrets: &[Secret],
) -> Problem {
    Problem::in_file(
        ProblemKind::Leak,
        file,
        format!(
            "{shown} {}, which the agent must never see",
            describe_quote(quote, secrets)
        ),
    )
    .with_help(format!(
        "remove the quoted lines from what the agent is given (describe what the task checks in words, not with its code or answer). A quote is {WINDOW_LINES} consecutive meaningful lines of a secret (all of a shorter one) with at least {MIN_WINDOW_CHARS} characters, compared with indentation, white space and leading quote, comment and diff markers (`>`, `#`, `//`, `*`, `;`, `%`, `+`, `-`) ignored; lines under {MIN_LINE_CHARS} characters or with no letter or digit are skipped, and a quote of only the secret's comments and imports is not reported"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalising_ignores_line_endings_and_trailing_white_space() {
        let lf = normalise(b"def f():\n    return 1\n");
        assert_eq!(lf, b"def f():\n    return 1");
        assert_eq!(normalise(b"def f():  \r\n    return 1\t\r\n\r\n\n"), lf);
        assert_eq!(normalise(b"def f():\r    return 1"), lf);
        // Leading white space and inner blank lines are content.
        assert_ne!(normalise(b"def f():\n  return 1\n"), lf);
        assert_eq!(normalise(b"a\n\n b\n"), b"a\n\n b");
        assert!(normalise(b"\n").is_empty());
        assert!(normalise(b"  \r\n\t\n").is_empty());
    }

    #[test]
    fn a_normalised_prefix_is_the_prefix_of_the_normalised_text() {
        for text in [
            &b"def f():  \r\n\r\n    return 1\t\r\n\r\n\n"[..],
            b"a     \n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\nb",
            b"0123456789012345678901234567890123456789",
            b"0123456789\r\n0123456789\r\n0123456789\r\n   ",
            b"short\n",
        ] {
            for n in [1, 8, 31, 32, 33] {
                let full = normalise(text);
                let want = (full.len() >= n).then(|| full[..n].to_vec());
                assert_eq!(normalised_prefix(text, n), want, "{text:?} {n}");
            }
        }
    }

    #[test]
    fn size_bounds_admit_copies_with_crlf_and_refuse_files_far_too_small_or_large() {
        let secrets = Secrets {
            lengths: vec![100, 5000],
            ..Secrets::default()
        };
        assert!(!secrets.could_match(99));
        assert!(secrets.could_match(100));
        assert!(secrets.could_match(264));
        assert!(!secrets.could_match(265));
        assert!(!secrets.could_match(4999));
        assert!(secrets.could_match(5000));
        assert!(secrets.could_match(10_064));
        assert!(!secrets.could_match(10_065));
    }

    fn secret(description: &str) -> Secret {
        Secret {
            description: description.to_string(),
            lays_over: None,
        }
    }

    #[test]
    fn a_copy_is_reported_whole_and_a_quote_with_every_secret_it_holds() {
        let body = "def greet(name):\n    cleaned = name.strip() or 'world'\n    return f'Hello, {cleaned}!'\n\nprint(greet('you'))\n";
        let script = format!(
            "answer = \"done\"\n\n[[steps]]\nrun = '''\ncat > greet.py <<'EOF'\n{body}EOF\n'''\n"
        );
        let mut secrets = Secrets::default();
        secrets.add(script.as_bytes(), secret("script"));
        secrets.add(body.as_bytes(), secret("body"));
        secrets.add(body.as_bytes(), secret("the same body"));
        assert_eq!(secrets.bodies.len(), 2);
        // A copy of the body: the body, and not a quote of the script that holds it.
        let found = secrets.examine_bytes(body.replace('\n', "\r\n").as_bytes());
        let names: Vec<&str> = found
            .copy_of
            .unwrap_or_default()
            .iter()
            .map(|s| s.description.as_str())
            .collect();
        assert_eq!(names, ["body", "the same body"]);
        assert!(found.quotes.is_empty());
        // Quoted in a README: both the script and the body, with where and how much.
        let readme = format!("# Greeting\n\nLike this:\n\n```\n{body}```\n");
        let found = secrets.examine_bytes(readme.as_bytes());
        assert!(found.copy_of.is_none());
        let got: Vec<(String, &str)> = found
            .quotes
            .iter()
            .map(|(q, s)| (describe_quote(q, s), s[0].description.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "quotes script at lines 6-10 (4 of its 8 meaningful lines)".to_string(),
                    "script"
                ),
                (
                    "quotes body and the same body at lines 6-10 (4 of its 4 meaningful lines)"
                        .to_string(),
                    "body"
                ),
            ]
        );
        assert!(secrets.examine_bytes(b"nothing of it\n").quotes.is_empty());
    }

    #[test]
    fn heredoc_bodies_are_read_as_sh_reads_them() {
        let run = "mkdir -p a && cat > a/lib.py <<'EOF'\ndef f():\n    return 1\nEOF\necho done";
        assert_eq!(heredoc_bodies(run), ["def f():\n    return 1\n"]);
        assert_eq!(heredoc_bodies("cat <<-END\n\tx\n\tEND\n"), ["x\n"]);
        assert_eq!(heredoc_bodies("cat << \"E O\"\ny\nE O\n"), ["y\n"]);
        assert_eq!(
            heredoc_bodies("paste <<A /dev/stdin <<B\n1\nA\n2\nB\n"),
            ["1\n", "2\n"]
        );
        assert!(heredoc_bodies("cat <<< 'not a heredoc'\nx\n").is_empty());
        assert_eq!(heredoc_bodies("cat <<EOF\nx\ny"), ["x\ny\n"]);
        assert!(heredoc_bodies("echo hi > hello.txt").is_empty());
    }
}
