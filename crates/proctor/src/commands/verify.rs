//! `proctor verify FILE...`: checks every `verify:fileLine(PATH, /REGEX/)` citation of the
//! Markdown files given (folders are walked for `*.md`), so that a claim written from evidence
//! fails CI on the day the evidence no longer says it.
//!
//! A citation holds when some line of PATH matches REGEX. PATH is looked up beside the citing
//! file, then at the root of the git repository that holds the citing file (the nearest folder
//! above it with a `.git`). Exits 0 when every citation holds, 1 when one does not (each printed
//! as `FILE:LINE: PATH has no line matching /REGEX/` or `FILE:LINE: PATH does not exist`), and 2
//! when one is malformed (a diagnostic at FILE:LINE:COLUMN with what to write instead).

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::Context;
use miette::{Diagnostic, LabeledSpan, NamedSource, SourceCode};

use crate::citation::{self, Citation, Malformed};
use crate::cli::Format;
use crate::exit::{Error, Status};

/// What checking one citation found.
#[derive(Debug)]
enum Verdict {
    /// This 1-based line of the cited file matches.
    Holds { matched_line: usize, file: PathBuf },
    /// The cited file exists and no line of it matches.
    NoMatch { file: PathBuf },
    /// No file at PATH, beside the citing file nor at the repository root (None outside git).
    Missing {
        looked: Vec<PathBuf>,
        root: Option<PathBuf>,
    },
    /// PATH names a folder or another file that is not a regular file.
    NotAFile { file: PathBuf },
    /// PATH could not be read.
    Unreadable { file: PathBuf, reason: String },
}

impl Verdict {
    fn holds(&self) -> bool {
        matches!(self, Verdict::Holds { .. })
    }

    /// The stable name of the verdict, for `--format json`.
    fn name(&self) -> &'static str {
        match self {
            Verdict::Holds { .. } => "holds",
            Verdict::NoMatch { .. } => "no-match",
            Verdict::Missing { .. } => "missing",
            Verdict::NotAFile { .. } => "not-a-file",
            Verdict::Unreadable { .. } => "unreadable",
        }
    }
}

/// One citation found in one Markdown file, checked or malformed.
enum Finding {
    Checked {
        file: PathBuf,
        citation: Citation,
        verdict: Verdict,
    },
    Malformed {
        file: PathBuf,
        text: String,
        malformed: Malformed,
    },
}

/// `proctor verify FILE...`.
pub fn run(inputs: &[PathBuf], format: Format) -> Result<Status, Error> {
    let files = markdown_files(inputs)?;
    let mut cited = CitedFiles::default();
    let mut findings = Vec::new();
    for file in &files {
        findings.extend(check_file(file, &mut cited)?);
    }
    match format {
        Format::Text => print_text(&findings, files.len()),
        Format::Json => print_json(&findings, files.len())?,
    }
    Ok(status(&findings))
}

/// 2 when a citation is malformed, else 1 when one does not hold, else 0.
fn status(findings: &[Finding]) -> Status {
    let malformed = findings
        .iter()
        .any(|f| matches!(f, Finding::Malformed { .. }));
    let fails = findings.iter().any(|f| match f {
        Finding::Checked { verdict, .. } => !verdict.holds(),
        Finding::Malformed { .. } => false,
    });
    if malformed {
        Status::Invalid
    } else if fails {
        Status::NotSucceeded
    } else {
        Status::Success
    }
}

/// The files to read: each file given, and the `*.md` files under each folder given (walked
/// as git would see it: hidden files and what `.gitignore` ignores are skipped), in order,
/// each once.
fn markdown_files(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, Error> {
    let mut files = Vec::new();
    for input in inputs {
        if input.is_dir() {
            files.extend(walk(input)?);
        } else if input.exists() {
            files.push(input.clone());
        } else {
            return Err(Error::usage(
                format!("{} does not exist", input.display()),
                "pass Markdown files, or folders to check every `*.md` file under them",
            ));
        }
    }
    let mut seen = std::collections::HashSet::new();
    files.retain(|f| seen.insert(f.clone()));
    Ok(files)
}

/// The `*.md` files under `dir`, sorted.
fn walk(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let mut files = Vec::new();
    for entry in ignore::WalkBuilder::new(dir).build() {
        let entry = entry.with_context(|| format!("cannot walk {}", dir.display()))?;
        let is_file = entry.file_type().is_some_and(|t| t.is_file());
        let is_md = entry
            .path()
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("md"));
        if is_file && is_md {
            files.push(entry.into_path());
        }
    }
    files.sort();
    Ok(files)
}

/// Every citation of one Markdown file, each checked.
fn check_file(file: &Path, cited: &mut CitedFiles) -> Result<Vec<Finding>, Error> {
    let bytes = std::fs::read(file).map_err(|e| {
        Error::usage(
            format!("cannot read {}: {e}", file.display()),
            "pass Markdown files you can read",
        )
    })?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let findings = citation::scan(&text)
        .into_iter()
        .map(|c| match c {
            Ok(citation) => Finding::Checked {
                file: file.to_path_buf(),
                verdict: cited.check(file, &citation),
                citation,
            },
            Err(malformed) => Finding::Malformed {
                file: file.to_path_buf(),
                text: text.clone(),
                malformed,
            },
        })
        .collect();
    Ok(findings)
}

/// The cited files read so far (a results.md is often cited many times), by resolved path.
#[derive(Default)]
struct CitedFiles {
    texts: HashMap<PathBuf, Result<String, String>>,
}

impl CitedFiles {
    /// Checks one citation of `citing`.
    fn check(&mut self, citing: &Path, citation: &Citation) -> Verdict {
        let file = match locate(citing, &citation.path) {
            Ok(file) => file,
            Err((looked, root)) => return Verdict::Missing { looked, root },
        };
        if !file.is_file() {
            return Verdict::NotAFile { file };
        }
        let text = self.texts.entry(file.clone()).or_insert_with(|| {
            std::fs::read(&file)
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .map_err(|e| e.to_string())
        });
        match text {
            Err(reason) => Verdict::Unreadable {
                reason: reason.clone(),
                file,
            },
            Ok(text) => match text.lines().position(|l| citation.regex.is_match(l)) {
                Some(i) => Verdict::Holds {
                    matched_line: i + 1,
                    file,
                },
                None => Verdict::NoMatch { file },
            },
        }
    }
}

/// Where PATH cited by `citing` is: beside it, else at the root of its git repository. The
/// error lists the places looked at, and the repository root when there is one.
fn locate(citing: &Path, path: &str) -> Result<PathBuf, (Vec<PathBuf>, Option<PathBuf>)> {
    let folder = match citing.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let beside = folder.join(path);
    if beside.exists() {
        return Ok(beside);
    }
    let mut looked = vec![beside];
    let root = repository_root(&folder);
    if let Some(root) = &root {
        let at_root = root.join(path);
        if at_root.exists() {
            return Ok(at_root);
        }
        if !looked.contains(&at_root) {
            looked.push(at_root);
        }
    }
    Err((looked, root))
}

/// The root of the git repository holding `folder`: the nearest folder at or above it that
/// has a `.git` (a folder, or the file of a worktree or submodule). None outside git. As git
/// does, the search does not reach a folder named in `GIT_CEILING_DIRECTORIES` (`:`-separated)
/// or any folder above it.
pub fn repository_root(folder: &Path) -> Option<PathBuf> {
    let folder = folder.canonicalize().ok()?;
    let ceilings: Vec<PathBuf> = std::env::var_os("GIT_CEILING_DIRECTORIES")
        .map(|v| {
            std::env::split_paths(&v)
                .filter(|p| p.is_absolute())
                .map(|p| p.canonicalize().unwrap_or(p))
                .collect()
        })
        .unwrap_or_default();
    folder
        .ancestors()
        .take_while(|d| !ceilings.iter().any(|c| c == d))
        .find(|d| d.join(".git").exists())
        .map(Path::to_path_buf)
}

/// Text output: each malformed citation as a diagnostic and each failing one as one line, on
/// stderr; the count on stdout.
fn print_text(findings: &[Finding], files: usize) {
    let (mut holds, mut fails, mut malformed) = (0, 0, 0);
    for f in findings {
        match f {
            Finding::Malformed {
                file,
                text,
                malformed: m,
            } => {
                malformed += 1;
                eprint!("{}", crate::render::diagnostic(&Report::new(file, text, m)));
            }
            Finding::Checked {
                file,
                citation,
                verdict,
            } => {
                if verdict.holds() {
                    holds += 1;
                } else {
                    fails += 1;
                    eprint!("{}", failure_text(file, citation, verdict));
                }
            }
        }
    }
    let total = holds + fails + malformed;
    if total == 0 {
        eprintln!("warning: no `verify:fileLine(PATH, /REGEX/)` citation found in {files} file(s)");
    }
    println!(
        "{total} citation(s) in {files} file(s): {holds} hold, {fails} fail, {malformed} malformed"
    );
}

/// The lines printed for a citation that does not hold: the first is `FILE:LINE: ...`.
fn failure_text(file: &Path, c: &Citation, verdict: &Verdict) -> String {
    let at = format!("{}:{}", file.display(), c.line);
    match verdict {
        Verdict::Holds { .. } => String::new(),
        Verdict::NoMatch { .. } => {
            format!("{at}: {} has no line matching /{}/\n", c.path, c.pattern)
        }
        Verdict::Missing { looked, root } => {
            let places: Vec<String> = looked.iter().map(|p| p.display().to_string()).collect();
            let note = match root {
                None => format!(
                    "looked for {} (the citing file is in no git repository, so there is no \
                     repository root to look in)",
                    places.join(" and ")
                ),
                Some(_) => format!("looked for {}", places.join(" and ")),
            };
            format!("{at}: {} does not exist\n  note: {note}\n", c.path)
        }
        Verdict::NotAFile { file: found } => {
            format!("{at}: {} is not a file ({})\n", c.path, found.display())
        }
        Verdict::Unreadable {
            file: found,
            reason,
        } => format!(
            "{at}: {} cannot be read ({}): {reason}\n",
            c.path,
            found.display()
        ),
    }
}

/// `--format json`: one document on stdout.
fn print_json(findings: &[Finding], files: usize) -> Result<(), Error> {
    let list: Vec<serde_json::Value> = findings.iter().map(finding_json).collect();
    let count = |name: &str| list.iter().filter(|v| v["status"] == name).count();
    let malformed = count("malformed");
    let holds = count("holds");
    let doc = serde_json::json!({
        "files": files,
        "citations": list.len(),
        "holds": holds,
        "fails": list.len() - holds - malformed,
        "malformed": malformed,
        "results": list,
    });
    let text = serde_json::to_string_pretty(&doc).map_err(anyhow::Error::new)?;
    println!("{text}");
    Ok(())
}

fn finding_json(f: &Finding) -> serde_json::Value {
    match f {
        Finding::Malformed {
            file, malformed: m, ..
        } => serde_json::json!({
            "file": file.display().to_string(), "line": m.line, "column": m.column,
            "status": "malformed", "message": m.message, "help": m.help,
        }),
        Finding::Checked {
            file,
            citation: c,
            verdict,
        } => {
            let mut v = serde_json::json!({
                "file": file.display().to_string(), "line": c.line, "column": c.column,
                "path": c.path, "regex": c.pattern, "status": verdict.name(),
            });
            match verdict {
                Verdict::Holds { matched_line, file } => {
                    v["resolved"] = file.display().to_string().into();
                    v["matched_line"] = (*matched_line).into();
                }
                Verdict::NoMatch { file } | Verdict::NotAFile { file } => {
                    v["resolved"] = file.display().to_string().into();
                }
                Verdict::Unreadable { file, reason } => {
                    v["resolved"] = file.display().to_string().into();
                    v["reason"] = reason.clone().into();
                }
                Verdict::Missing { looked, root } => {
                    let looked: Vec<String> =
                        looked.iter().map(|p| p.display().to_string()).collect();
                    v["looked"] = looked.into();
                    v["repository_root"] = root.as_ref().map(|r| r.display().to_string()).into();
                }
            }
            v
        }
    }
}

/// A malformed citation as a diagnostic over its file's text.
#[derive(Debug)]
struct Report<'a> {
    file: String,
    source: NamedSource<String>,
    malformed: &'a Malformed,
}

impl<'a> Report<'a> {
    fn new(file: &Path, text: &str, malformed: &'a Malformed) -> Report<'a> {
        let file = file.display().to_string();
        Report {
            source: NamedSource::new(file.clone(), text.to_string()),
            file,
            malformed,
        }
    }
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.malformed;
        write!(f, "{}:{}:{}: {}", self.file, m.line, m.column, m.message)
    }
}

impl std::error::Error for Report<'_> {}

impl Diagnostic for Report<'_> {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new("verify::malformed"))
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(&self.malformed.help))
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        Some(&self.source)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let span = &self.malformed.span;
        let label = LabeledSpan::new_primary_with_span(
            Some("here".to_string()),
            (span.start, span.end.saturating_sub(span.start)),
        );
        Some(Box::new(std::iter::once(label)))
    }
}
