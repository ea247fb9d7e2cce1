//! `proctor verify FILE...`: checks every `verify:fileLine(PATH, /REGEX/)` citation of the
//! Markdown files given ([`proctor_claims::verify`]). Exits 0 when every citation holds, 1 when
//! one does not (each printed as `FILE:LINE: PATH has no line matching /REGEX/` or `FILE:LINE:
//! PATH does not exist`), and 2 when one is malformed (a diagnostic at FILE:LINE:COLUMN with
//! what to write instead).

use std::fmt;
use std::path::{Path, PathBuf};

use miette::{Diagnostic, LabeledSpan, NamedSource, SourceCode};
use proctor_claims::citation::Malformed;
use proctor_claims::verify::{self, failure_text, Finding, Standing};

use crate::cli::Format;
use crate::exit::{Error, Status};

/// `proctor verify FILE...`.
pub fn run(inputs: &[PathBuf], format: Format) -> Result<Status, Error> {
    let checked = verify::check(inputs)?;
    match format {
        Format::Text => print_text(&checked.findings, checked.files),
        Format::Json => print_json(&checked.findings, checked.files)?,
    }
    Ok(match checked.standing() {
        Standing::Malformed => Status::Invalid,
        Standing::Fails => Status::NotSucceeded,
        Standing::Holds => Status::Success,
    })
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

/// `--format json`: one document on stdout.
fn print_json(findings: &[Finding], files: usize) -> Result<(), Error> {
    let list: Vec<serde_json::Value> = findings.iter().map(Finding::json).collect();
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
