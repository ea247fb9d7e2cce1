//! The `verify:fileLine(PATH, /REGEX/)` citation that ties a claim in Markdown to a line of
//! evidence: finding citations in a Markdown file, parsing each, and writing one (for `cite`).
//!
//! Grammar, on one line: the marker `verify:fileLine(`, then PATH (everything up to the first
//! `,` that is followed by optional spaces and `/`, trimmed), then `/REGEX/` (a `/` inside the
//! regex is written `\/`, and any backslash escapes the next character), then optional spaces
//! and `)`. Citations inside code blocks (fenced or indented) are examples, not claims, and are
//! not read; inline code, HTML comments and plain text are.

use std::ops::Range;

use pulldown_cmark::{Event, Parser, Tag};
use regex::Regex;

/// What starts a citation.
pub const MARKER: &str = "verify:fileLine(";

/// A citation as written, parsed and with its regex compiled.
#[derive(Debug, Clone)]
pub struct Citation {
    /// 1-based line of the marker.
    pub line: usize,
    /// 1-based column of the marker, in characters.
    pub column: usize,
    /// PATH as written (trimmed).
    pub path: String,
    /// The regex as written between the slashes (`\/` kept as written).
    pub pattern: String,
    /// The compiled regex.
    pub regex: Regex,
}

/// A citation that cannot be read: where, what is wrong and what to write instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    /// 1-based line.
    pub line: usize,
    /// 1-based column of the problem, in characters.
    pub column: usize,
    /// Byte range of the problem in the whole file.
    pub span: Range<usize>,
    /// What is wrong, in one sentence.
    pub message: String,
    /// What to write instead.
    pub help: String,
}

/// Every citation of a Markdown text, in order, outside its code blocks.
pub fn scan(text: &str) -> Vec<Result<Citation, Malformed>> {
    let code = code_blocks(text);
    let mut found = Vec::new();
    let mut line_start = 0;
    for (index, line) in text.split_inclusive('\n').enumerate() {
        let content = line.trim_end_matches(['\n', '\r']);
        for (at, _) in content.match_indices(MARKER) {
            let offset = line_start + at;
            if code.iter().any(|r| r.contains(&offset)) {
                continue;
            }
            let place = Place {
                line: index + 1,
                line_start,
                text: content,
            };
            found.push(parse_at(&place, at));
        }
        line_start += line.len();
    }
    found
}

/// The byte ranges of the code blocks (fenced and indented) of a Markdown text.
fn code_blocks(text: &str) -> Vec<Range<usize>> {
    Parser::new(text)
        .into_offset_iter()
        .filter_map(|(event, range)| match event {
            Event::Start(Tag::CodeBlock(_)) => Some(range),
            _ => None,
        })
        .collect()
}

/// One line of the file being scanned.
struct Place<'a> {
    line: usize,
    line_start: usize,
    text: &'a str,
}

impl Place<'_> {
    /// A malformed citation at byte `at..end` of this line.
    fn malformed(&self, at: usize, end: usize, message: String, help: &str) -> Malformed {
        Malformed {
            line: self.line,
            column: self.text[..at].chars().count() + 1,
            span: self.line_start + at..self.line_start + end.max(at),
            message,
            help: help.to_string(),
        }
    }
}

const EXAMPLE: &str = "write `verify:fileLine(PATH, /REGEX/)` on one line, e.g. \
                       `verify:fileLine(results.md, /^\\| oracle \\| assess \\|/)`";

/// Parses the citation whose marker starts at byte `at` of the line.
fn parse_at(place: &Place, at: usize) -> Result<Citation, Malformed> {
    let text = place.text;
    let path_start = at + MARKER.len();
    let Some((comma, slash)) = path_end(text, path_start) else {
        return Err(place.malformed(
            at,
            text.len(),
            "this citation has no `, /REGEX/)` after its PATH".to_string(),
            EXAMPLE,
        ));
    };
    let path = text[path_start..comma].trim();
    if path.is_empty() {
        return Err(place.malformed(
            path_start,
            comma,
            "this citation's PATH is empty".to_string(),
            "name the file whose lines are checked, relative to this file's folder or to the \
             repository root",
        ));
    }
    let regex_start = slash + 1;
    let Some(regex_end) = closing_slash(text, regex_start) else {
        return Err(place.malformed(
            slash,
            text.len(),
            "this citation's regex is not closed: no `/` ends it on this line".to_string(),
            "end the regex with `/` and the citation with `)`; write a `/` inside the regex as `\\/`",
        ));
    };
    close_paren(place, regex_end + 1)?;
    let pattern = &text[regex_start..regex_end];
    let regex = compile(place, pattern, regex_start, regex_end)?;
    Ok(Citation {
        line: place.line,
        column: text[..at].chars().count() + 1,
        path: path.to_string(),
        pattern: pattern.to_string(),
        regex,
    })
}

/// The byte index of the `,` that ends PATH and of the `/` that opens the regex.
fn path_end(text: &str, from: usize) -> Option<(usize, usize)> {
    text[from..].match_indices(',').find_map(|(i, _)| {
        let comma = from + i;
        let rest = &text[comma + 1..];
        let spaces = rest.len() - rest.trim_start().len();
        rest[spaces..]
            .starts_with('/')
            .then_some((comma, comma + 1 + spaces))
    })
}

/// The byte index of the `/` that ends a regex starting at `from`: the first one not escaped
/// by a backslash.
fn closing_slash(text: &str, from: usize) -> Option<usize> {
    let mut chars = text[from..].char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                chars.next()?;
            }
            '/' => return Some(from + i),
            _ => {}
        }
    }
    None
}

/// Checks that only spaces and `)` follow the regex's closing `/` at byte `from`.
fn close_paren(place: &Place, from: usize) -> Result<(), Malformed> {
    let rest = &place.text[from..];
    let spaces = rest.len() - rest.trim_start().len();
    let at = from + spaces;
    match place.text[at..].chars().next() {
        Some(')') => Ok(()),
        Some(c) if c.is_ascii_alphabetic() => Err(place.malformed(
            at,
            at + 1,
            format!("`{c}` after the regex: this citation takes no regex flags"),
            "write flags inside the regex, e.g. `/(?i)completed/`, then close with `)`",
        )),
        Some(c) => Err(place.malformed(
            at,
            at + c.len_utf8(),
            format!("expected `)` after the regex, found `{c}`"),
            "a `/` inside the regex must be written `\\/`; close the citation with `)`",
        )),
        None => Err(place.malformed(
            at,
            at,
            "this citation is not closed: expected `)` after the regex".to_string(),
            "close the citation with `)` on the same line",
        )),
    }
}

/// Compiles the regex at bytes `start..end`, refusing one that matches an empty line: it would
/// hold for any file that has a line, so it checks nothing.
fn compile(place: &Place, pattern: &str, start: usize, end: usize) -> Result<Regex, Malformed> {
    let regex = Regex::new(pattern).map_err(|e| {
        place.malformed(
            start,
            end,
            format!(
                "this citation's regex does not compile: {}",
                regex_reason(&e)
            ),
            "fix the regex (Rust `regex` syntax: https://docs.rs/regex/#syntax); write a `/` \
             inside it as `\\/`",
        )
    })?;
    if regex.is_match("") {
        return Err(place.malformed(
            start,
            end,
            format!("the regex /{pattern}/ matches an empty line, so it checks nothing"),
            "name text the cited line must contain, e.g. /^\\| oracle \\| assess \\| 3 \\|/",
        ));
    }
    Ok(regex)
}

/// The one-line reason of a regex error (the crate's message spans several lines).
fn regex_reason(e: &regex::Error) -> String {
    let text = e.to_string();
    text.lines()
        .rev()
        .find_map(|l| l.strip_prefix("error: "))
        .unwrap_or(text.lines().last().unwrap_or("invalid regex"))
        .trim()
        .to_string()
}

/// A citation of `path`, as it should be written: `verify:fileLine(PATH, /REGEX/)`.
pub fn format(path: &str, pattern: &str) -> String {
    format!("{MARKER}{path}, /{pattern}/)")
}

/// `text` as a Markdown inline code span, whatever backticks it contains.
pub fn code_span(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    if longest == 0 {
        format!("{fence}{text}{fence}")
    } else {
        format!("{fence} {text} {fence}")
    }
}

/// A regex matching `literal` exactly, written for a citation: the regex metacharacters and
/// `/` are escaped with a backslash, nothing else (so that cited rows stay readable).
pub fn escape(literal: &str) -> String {
    let mut out = String::with_capacity(literal.len());
    for c in literal.chars() {
        if "\\.+*?()|[]{}^$/".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Result<Citation, Malformed> {
        let mut all = scan(text);
        assert_eq!(all.len(), 1, "expected one citation in {text:?}");
        all.remove(0)
    }

    fn malformed(text: &str) -> Malformed {
        one(text).expect_err("expected a malformed citation")
    }

    #[test]
    fn reads_path_and_regex() {
        let c =
            one("sends pass 2/2 `verify:fileLine(runs/x/results.md, /^\\| text \\|/)`\n").unwrap();
        assert_eq!(c.path, "runs/x/results.md");
        assert_eq!(c.pattern, "^\\| text \\|");
        assert_eq!((c.line, c.column), (1, 17));
        assert!(c.regex.is_match("| text | send |"));
    }

    #[test]
    fn spaces_around_parts_are_allowed() {
        let c = one("verify:fileLine(  a b.md ,   /x/  )").unwrap();
        assert_eq!(c.path, "a b.md");
        assert_eq!(c.pattern, "x");
    }

    #[test]
    fn escaped_slashes_stay_in_the_regex_and_match_a_slash() {
        let c = one("verify:fileLine(r.md, /3\\/3 \\(100%\\)/)").unwrap();
        assert_eq!(c.pattern, "3\\/3 \\(100%\\)");
        assert!(c.regex.is_match("| 3/3 (100%) |"));
        assert!(!c.regex.is_match("| 2/3 (67%) |"));
    }

    #[test]
    fn an_escaped_backslash_does_not_escape_the_closing_slash() {
        let c = one("verify:fileLine(r.md, /a\\\\/)").unwrap();
        assert_eq!(c.pattern, "a\\\\");
        assert!(c.regex.is_match("a\\"));
    }

    #[test]
    fn a_comma_in_the_path_is_part_of_it() {
        let c = one("verify:fileLine(a,b.md, /x/)").unwrap();
        assert_eq!(c.path, "a,b.md");
    }

    #[test]
    fn several_citations_on_one_line_are_each_read_with_their_column() {
        let all = scan("x verify:fileLine(a.md, /a/) and é verify:fileLine(b.md, /b/)\n");
        let all: Vec<_> = all.into_iter().map(Result::unwrap).collect();
        assert_eq!(all.len(), 2);
        assert_eq!((all[0].path.as_str(), all[0].column), ("a.md", 3));
        assert_eq!((all[1].path.as_str(), all[1].column), ("b.md", 36));
    }

    #[test]
    fn lines_are_counted_and_crlf_is_accepted() {
        let all = scan("a\r\nb\r\nverify:fileLine(a.md, /a/)\r\n");
        assert_eq!(all[0].as_ref().unwrap().line, 3);
        assert_eq!(all[0].as_ref().unwrap().pattern, "a");
    }

    #[test]
    fn code_blocks_are_skipped_inline_code_and_comments_are_not() {
        let text = "\
```text
verify:fileLine(example.md, /x/)
```

~~~
verify:fileLine(example.md, /y/)
~~~

    verify:fileLine(indented.md, /z/)

`verify:fileLine(inline.md, /a/)`
<!-- verify:fileLine(comment.md, /b/) -->
- in a list verify:fileLine(list.md, /c/)
";
        let paths: Vec<_> = scan(text).into_iter().map(|c| c.unwrap().path).collect();
        assert_eq!(paths, ["inline.md", "comment.md", "list.md"]);
    }

    #[test]
    fn a_citation_without_regex_is_malformed_at_its_marker() {
        let m = malformed("see verify:fileLine(a.md) here");
        assert_eq!((m.line, m.column), (1, 5));
        assert!(m.message.contains("no `, /REGEX/)`"), "{}", m.message);
        assert!(m.help.contains("verify:fileLine(PATH, /REGEX/)"));
    }

    #[test]
    fn an_empty_path_is_malformed() {
        let m = malformed("verify:fileLine( , /a/)");
        assert!(m.message.contains("PATH is empty"), "{}", m.message);
        assert_eq!(m.column, 17);
    }

    #[test]
    fn an_unclosed_regex_is_malformed_at_its_slash() {
        let m = malformed("x verify:fileLine(a.md, /abc)");
        assert!(m.message.contains("not closed"), "{}", m.message);
        assert_eq!(m.column, 25);
        assert!(m.help.contains("\\/"));
    }

    #[test]
    fn an_unescaped_slash_in_the_regex_is_malformed_with_a_hint() {
        let m = malformed("verify:fileLine(a.md, /3/3/)");
        assert_eq!(m.message, "expected `)` after the regex, found `3`");
        assert_eq!(m.column, 26);
        assert!(m.help.contains("`\\/`"));
    }

    #[test]
    fn flags_after_the_regex_are_malformed_with_the_inline_form() {
        let m = malformed("verify:fileLine(a.md, /abc/i)");
        assert!(m.message.contains("no regex flags"), "{}", m.message);
        assert!(m.help.contains("(?i)"));
    }

    #[test]
    fn a_missing_closing_paren_is_malformed() {
        let m = malformed("verify:fileLine(a.md, /abc/");
        assert!(m.message.contains("not closed"), "{}", m.message);
        assert_eq!(m.column, 28);
    }

    #[test]
    fn a_regex_that_does_not_compile_is_malformed_with_the_reason() {
        let m = malformed("line one\nverify:fileLine(a.md, /(abc/)");
        assert_eq!((m.line, m.column), (2, 24));
        assert_eq!(
            m.message,
            "this citation's regex does not compile: unclosed group"
        );
        assert_eq!(m.span, 9 + 23..9 + 27);
    }

    #[test]
    fn a_regex_matching_an_empty_line_is_refused() {
        let m = malformed("verify:fileLine(a.md, /x*/)");
        assert!(m.message.contains("matches an empty line"), "{}", m.message);
    }

    #[test]
    fn a_mention_without_parenthesis_is_not_a_citation() {
        assert!(scan("a `verify:fileLine` citation names a file").is_empty());
    }

    #[test]
    fn escaped_literals_match_themselves_only_and_parse_back() {
        let literals = [
            "| oracle | (all tasks) | 3/3 (100%) |",
            "a.b*c+d?e^f$g{1}[x]\\h/i",
            "spec-test #1 & ~",
        ];
        for lit in literals {
            let pattern = format!("^{}$", escape(lit));
            let text = format(&format!("r{}.md", lit.len()), &pattern);
            let c = one(&text).unwrap();
            assert_eq!(c.pattern, pattern);
            assert!(c.regex.is_match(lit), "{pattern} should match {lit}");
            assert!(!c.regex.is_match(&format!("{lit}x")));
        }
    }

    #[test]
    fn code_spans_use_a_fence_longer_than_any_backtick_run() {
        assert_eq!(code_span("a"), "`a`");
        assert_eq!(code_span("a`b``c"), "``` a`b``c ```");
    }
}
