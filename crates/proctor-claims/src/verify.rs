//! Checking every `verify:fileLine(PATH, /REGEX/)` citation of Markdown files (`proctor
//! verify`; folders are walked for `*.md`), so that a claim written from evidence fails CI on
//! the day the evidence no longer says it.
//!
//! A citation holds when some line of PATH matches REGEX. PATH is looked up beside the citing
//! file, then at the root of the git repository that holds the citing file (the nearest folder
//! above it with a `.git`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::citation::{self, Citation, Malformed};
use crate::error::ClaimsError;

/// What checking one citation found.
#[derive(Debug)]
pub enum Verdict {
    /// This 1-based line of the cited file matches.
    Holds {
        /// The line.
        matched_line: usize,
        /// The cited file, resolved.
        file: PathBuf,
    },
    /// The cited file exists and no line of it matches.
    NoMatch {
        /// The cited file, resolved.
        file: PathBuf,
    },
    /// No file at PATH, beside the citing file nor at the repository root (None outside git).
    Missing {
        /// The places looked at.
        looked: Vec<PathBuf>,
        /// The repository root, when the citing file is in one.
        root: Option<PathBuf>,
    },
    /// PATH names a folder or another file that is not a regular file.
    NotAFile {
        /// What PATH resolved to.
        file: PathBuf,
    },
    /// PATH could not be read.
    Unreadable {
        /// The cited file, resolved.
        file: PathBuf,
        /// Why it could not be read.
        reason: String,
    },
}

impl Verdict {
    /// Whether the citation holds.
    pub fn holds(&self) -> bool {
        matches!(self, Verdict::Holds { .. })
    }

    /// The stable name of the verdict, for `--format json`.
    pub fn name(&self) -> &'static str {
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
pub enum Finding {
    /// A citation read and checked.
    Checked {
        /// The citing file.
        file: PathBuf,
        /// The citation.
        citation: Citation,
        /// What checking it found.
        verdict: Verdict,
    },
    /// A citation that cannot be read.
    Malformed {
        /// The citing file.
        file: PathBuf,
        /// The citing file's text (for the diagnostic).
        text: String,
        /// What is wrong with it.
        malformed: Malformed,
    },
}

/// What checking a set of Markdown files found.
pub struct Checked {
    /// Every citation, in file order.
    pub findings: Vec<Finding>,
    /// Markdown files read.
    pub files: usize,
}

/// How a set of citations stands, worst first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// A citation is malformed.
    Malformed,
    /// A citation does not hold.
    Fails,
    /// Every citation holds.
    Holds,
}

/// Checks every citation of the Markdown files `inputs` name (folders walked for `*.md`).
pub fn check(inputs: &[PathBuf]) -> Result<Checked, ClaimsError> {
    let files = markdown_files(inputs)?;
    let mut cited = CitedFiles::default();
    let mut findings = Vec::new();
    for file in &files {
        findings.extend(check_file(file, &mut cited)?);
    }
    Ok(Checked {
        findings,
        files: files.len(),
    })
}

impl Checked {
    /// Malformed when a citation is malformed, else fails when one does not hold, else holds.
    pub fn standing(&self) -> Standing {
        let malformed = self
            .findings
            .iter()
            .any(|f| matches!(f, Finding::Malformed { .. }));
        let fails = self.findings.iter().any(|f| match f {
            Finding::Checked { verdict, .. } => !verdict.holds(),
            Finding::Malformed { .. } => false,
        });
        if malformed {
            Standing::Malformed
        } else if fails {
            Standing::Fails
        } else {
            Standing::Holds
        }
    }
}

/// The files to read: each file given, and the `*.md` files under each folder given (walked
/// as git would see it: hidden files and what `.gitignore` ignores are skipped), in order,
/// each once.
fn markdown_files(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, ClaimsError> {
    let mut files = Vec::new();
    for input in inputs {
        if input.is_dir() {
            files.extend(walk(input)?);
        } else if input.exists() {
            files.push(input.clone());
        } else {
            return Err(ClaimsError::usage(
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
fn walk(dir: &Path) -> Result<Vec<PathBuf>, ClaimsError> {
    let mut files = Vec::new();
    for entry in ignore::WalkBuilder::new(dir).build() {
        let entry =
            entry.map_err(|e| ClaimsError::io(format!("cannot walk {}", dir.display()), e))?;
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
fn check_file(file: &Path, cited: &mut CitedFiles) -> Result<Vec<Finding>, ClaimsError> {
    let bytes = std::fs::read(file).map_err(|e| {
        ClaimsError::usage(
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

/// The lines printed for a citation that does not hold: the first is `FILE:LINE: ...`.
pub fn failure_text(file: &Path, c: &Citation, verdict: &Verdict) -> String {
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

impl Finding {
    /// The finding as JSON, for `--format json`.
    pub fn json(&self) -> serde_json::Value {
        finding_json(self)
    }
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
