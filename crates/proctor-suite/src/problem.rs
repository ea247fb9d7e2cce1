//! Problems found in a suite, each one a diagnostic a person can act on: which file, where in
//! it, what was found and what to write instead.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use miette::{Diagnostic, LabeledSpan, NamedSource, SourceCode};

/// A source file that problems point into.
#[derive(Debug, Clone)]
pub struct SourceFile {
    path: PathBuf,
    named: Arc<NamedSource<String>>,
}

impl SourceFile {
    /// Wraps the text of `path` for diagnostics.
    pub fn new(path: &Path, text: String) -> SourceFile {
        SourceFile {
            path: path.to_path_buf(),
            named: Arc::new(NamedSource::new(path.display().to_string(), text)),
        }
    }

    /// The file's path as the user named it.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's text.
    pub fn text(&self) -> &str {
        self.named.inner()
    }

    /// 1-based line and column of a byte offset.
    pub fn line_column(&self, offset: usize) -> (usize, usize) {
        let text = self.text();
        let offset = offset.min(text.len());
        let before = &text[..offset];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = text[line_start..offset].chars().count() + 1;
        (line, column)
    }
}

/// Where in a file a problem is.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Location {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// Byte range in the file.
    #[serde(skip)]
    pub span: Range<usize>,
}

/// The kind of a problem, stable for tests and for tools reading `--format json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProblemKind {
    /// TOML that does not parse.
    Syntax,
    /// A key no table of this kind has.
    UnknownKey,
    /// A value of the wrong type or outside its enum.
    InvalidValue,
    /// A required key is absent.
    MissingKey,
    /// `schema_version` is not the one this reader supports.
    SchemaVersion,
    /// A regex or glob that does not compile.
    BadPattern,
    /// A path that leaves the suite, that does not exist, or that would hand the agent a hidden
    /// part of the suite (`holdout/`, `answers/`, `mutations/`, scripted agents, `suite.toml`).
    BadPath,
    /// A symlink, device, FIFO or socket inside the suite.
    ForbiddenFile,
    /// A mutation that is not a patch or does not apply.
    BadMutation,
    /// Two items share an id.
    DuplicateId,
    /// A reference to a task, variant or service that does not exist.
    UnknownReference,
    /// A suite that parses but cannot work as written.
    Inconsistent,
    /// A file the agent is given (in the fixture, or in its `.git` object store) whose content
    /// is that of a holdout file, an answer sheet or an oracle's solution file.
    Leak,
    /// A fixture `.git` that carries history, or objects its `HEAD` does not reach: a warning,
    /// since an agent can read older versions and other branches, stashes and dangling objects.
    GitHistory,
}

impl ProblemKind {
    /// The diagnostic code shown to users.
    pub fn code(self) -> &'static str {
        match self {
            ProblemKind::Syntax => "suite::syntax",
            ProblemKind::UnknownKey => "suite::unknown-key",
            ProblemKind::InvalidValue => "suite::invalid-value",
            ProblemKind::MissingKey => "suite::missing-key",
            ProblemKind::SchemaVersion => "suite::schema-version",
            ProblemKind::BadPattern => "suite::bad-pattern",
            ProblemKind::BadPath => "suite::bad-path",
            ProblemKind::ForbiddenFile => "suite::forbidden-file",
            ProblemKind::BadMutation => "suite::bad-mutation",
            ProblemKind::DuplicateId => "suite::duplicate-id",
            ProblemKind::UnknownReference => "suite::unknown-reference",
            ProblemKind::Inconsistent => "suite::inconsistent",
            ProblemKind::Leak => "suite::leak",
            ProblemKind::GitHistory => "suite::git-history",
        }
    }
}

/// How much a problem matters: an error makes the suite invalid; a warning is shown and the
/// suite stays valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    /// The suite cannot be used until this is fixed.
    #[default]
    Error,
    /// Worth a person's look; nothing is refused.
    Warning,
}

/// One thing wrong with a suite.
#[derive(Debug, Clone)]
pub struct Problem {
    /// What kind of mistake this is.
    pub kind: ProblemKind,
    /// Whether it makes the suite invalid.
    pub severity: Severity,
    /// What was found, in one sentence.
    pub message: String,
    /// The file the problem is in.
    pub file: PathBuf,
    /// Where in the file, when the file is text that was parsed.
    pub location: Option<Location>,
    /// What to write instead.
    pub help: Option<String>,
    label: Option<String>,
    related: Vec<(Range<usize>, String)>,
    source: Option<SourceFile>,
}

impl Problem {
    /// A problem about a whole file (or directory), with no position inside it.
    pub fn in_file(kind: ProblemKind, file: &Path, message: impl Into<String>) -> Problem {
        Problem {
            kind,
            severity: Severity::Error,
            message: message.into(),
            file: file.to_path_buf(),
            location: None,
            help: None,
            label: None,
            related: Vec::new(),
            source: None,
        }
    }

    /// A problem at a byte span of a parsed file.
    pub fn at(
        kind: ProblemKind,
        source: &SourceFile,
        span: Range<usize>,
        message: impl Into<String>,
    ) -> Problem {
        let (line, column) = source.line_column(span.start);
        Problem {
            kind,
            severity: Severity::Error,
            message: message.into(),
            file: source.path().to_path_buf(),
            location: Some(Location { line, column, span }),
            help: None,
            label: None,
            related: Vec::new(),
            source: Some(source.clone()),
        }
    }

    /// Makes the problem a warning: shown, but the suite stays valid.
    pub fn as_warning(mut self) -> Problem {
        self.severity = Severity::Warning;
        self
    }

    /// Adds what to write instead.
    pub fn with_help(mut self, help: impl Into<String>) -> Problem {
        self.help = Some(help.into());
        self
    }

    /// Adds the text shown under the offending source.
    pub fn with_label(mut self, label: impl Into<String>) -> Problem {
        self.label = Some(label.into());
        self
    }

    /// Adds a second place in the same file that explains the problem (e.g. the list a value
    /// is missing from), shown with its own label. Ignored for problems without a location.
    pub fn with_related(mut self, span: Range<usize>, label: impl Into<String>) -> Problem {
        if self.location.is_some() {
            self.related.push((span, label.into()));
        }
        self
    }

    /// The secondary places of [`Problem::with_related`], in the order they were added.
    pub fn related(&self) -> &[(Range<usize>, String)] {
        &self.related
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.location {
            Some(loc) => write!(
                f,
                "{}:{}:{}: {}",
                self.file.display(),
                loc.line,
                loc.column,
                self.message
            ),
            None => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

impl std::error::Error for Problem {}

impl Diagnostic for Problem {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(self.kind.code()))
    }

    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        })
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        self.source
            .as_ref()
            .map(|s| s.named.as_ref() as &dyn SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let loc = self.location.as_ref()?;
        let len = loc.span.end.saturating_sub(loc.span.start);
        let label = self.label.clone().unwrap_or_else(|| "here".to_string());
        let primary = LabeledSpan::new_primary_with_span(Some(label), (loc.span.start, len));
        let related = self.related.iter().map(|(span, label)| {
            LabeledSpan::new(
                Some(label.clone()),
                span.start,
                span.end.saturating_sub(span.start),
            )
        });
        Some(Box::new(std::iter::once(primary).chain(related)))
    }
}

/// The nearest of `candidates` to `found`, if one is close enough to be a likely typo.
pub fn nearest<'a>(found: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(found, c), c))
        .filter(|(score, _)| *score >= 0.75)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_are_one_based_and_count_characters() {
        let src = SourceFile::new(Path::new("s.toml"), "a = 1\nbé = 2\n".to_string());
        assert_eq!(src.line_column(0), (1, 1));
        assert_eq!(src.line_column(6), (2, 1));
        // 'é' is two bytes: the '=' at byte 10 is the 4th character of line 2 ("bé =").
        assert_eq!(src.line_column(10), (2, 4));
    }

    #[test]
    fn nearest_finds_typos_and_ignores_strangers() {
        let keys = ["wall_timeout_seconds", "network", "allow"];
        assert_eq!(
            nearest("wall_timeout_secs", keys.iter().copied()),
            Some("wall_timeout_seconds")
        );
        assert_eq!(nearest("networks", keys.iter().copied()), Some("network"));
        assert_eq!(nearest("zzz", keys.iter().copied()), None);
    }
}
