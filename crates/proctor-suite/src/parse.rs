//! TOML text to typed values, with errors turned into located [`Problem`]s that say what to
//! write instead.

use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::assertion::ASSERTION_KINDS;
use crate::model::SCHEMA_VERSION;
use crate::problem::{nearest, Problem, ProblemKind, SourceFile};

/// Parses `source` as `T`, turning the first error into a located problem with a hint.
pub fn parse_toml<T: DeserializeOwned>(source: &SourceFile) -> Result<T, Problem> {
    toml::from_str(source.text()).map_err(|e| {
        // Text that is good TOML but refused by the typed reading (a value out of range, say)
        // is not a syntax error, whatever words the refusal uses.
        let well_formed = toml::from_str::<toml::Table>(source.text()).is_ok();
        toml_problem(source, &e, well_formed)
    })
}

/// Parses `source` as `T`, like [`parse_toml`], but when the text is good TOML refused by the
/// typed reading, finds every problem of it rather than the first: the top-level table or
/// array element (with its subtables) that holds a problem is set aside, its bytes blanked so
/// that every other keeps its line and column, and the rest is read again, until it reads or a
/// problem lies outside any table section (a top-level key).
pub fn parse_toml_all<T: DeserializeOwned>(source: &SourceFile) -> Result<T, Vec<Problem>> {
    let first = match toml::from_str::<T>(source.text()) {
        Ok(value) => return Ok(value),
        Err(e) => e,
    };
    let well_formed = toml::from_str::<toml::Table>(source.text()).is_ok();
    let mut problems = vec![toml_problem(source, &first, well_formed)];
    if !well_formed {
        // A syntax error: what follows it cannot be read soundly.
        return Err(problems);
    }
    let units = crate::sections::units(source.text());
    let mut set_aside = vec![false; units.len()];
    let mut text = source.text().to_string();
    let mut at = first.span();
    while let Some(i) = at.and_then(|span| unit_at(&units, span.start)) {
        if std::mem::replace(&mut set_aside[i], true) {
            break;
        }
        crate::sections::blank(&mut text, &units[i]);
        let Err(e) = toml::from_str::<T>(&text) else {
            break;
        };
        if toml::from_str::<toml::Table>(&text).is_err() {
            // Setting the unit aside broke the TOML: what is refused now is not the author's.
            break;
        }
        problems.push(toml_problem(source, &e, true));
        at = e.span();
    }
    Err(problems)
}

/// The unit (of [`crate::sections::units`]) one of whose sections holds the byte `offset`.
fn unit_at(units: &[Vec<std::ops::Range<usize>>], offset: usize) -> Option<usize> {
    units
        .iter()
        .position(|u| u.iter().any(|r| r.contains(&offset)))
}

/// Reads a suite file (`what` names it in messages) as text: a file that cannot be read, that
/// is not a regular file (a FIFO, a device, a socket or a directory), or that is not UTF-8 (the
/// offset, line and column of the first bad byte named), is a problem.
///
/// The file is opened with `O_NONBLOCK` and checked with `fstat` before a byte is read, so a
/// FIFO planted under a suite file's name is refused at once instead of waiting for a writer.
pub fn read_text(path: &std::path::Path, what: &str) -> Result<String, Problem> {
    let bytes = read_regular(path).map_err(|e| match e {
        Unreadable::NotRegular(kind) => Problem::in_file(
            ProblemKind::BadPath,
            path,
            format!("{what} is {kind}, not a regular file"),
        )
        .with_help(format!(
            "replace it with a regular file (remove it, then write {what} as text)"
        )),
        Unreadable::Io(e) => Problem::in_file(
            ProblemKind::BadPath,
            path,
            format!("cannot read {what}: {e}"),
        ),
    })?;
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let good = String::from_utf8_lossy(&e.as_bytes()[..at]).into_owned();
        let line = good.matches('\n').count() + 1;
        let column = good.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        Problem::in_file(
            ProblemKind::InvalidValue,
            path,
            format!(
                "{what} is not UTF-8: the byte at offset {at} (line {line}, column {column}) does not begin a UTF-8 character"
            ),
        )
        .with_help("save the file as UTF-8 (in most editors: \"Save with encoding\" → UTF-8)")
    })
}

/// Why [`read_regular`] read nothing.
enum Unreadable {
    /// The path is not a regular file: what it is, as "a FIFO", "a directory", ...
    NotRegular(&'static str),
    /// Opening or reading failed.
    Io(std::io::Error),
}

/// The bytes of the regular file at `path` (symbolic links followed), opened without blocking:
/// anything else is refused by its kind before it is read.
fn read_regular(path: &std::path::Path) -> Result<Vec<u8>, Unreadable> {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(Unreadable::Io)?;
    let kind = file.metadata().map_err(Unreadable::Io)?.file_type();
    if !kind.is_file() {
        let name = if kind.is_fifo() {
            "a FIFO (named pipe)"
        } else if kind.is_dir() {
            "a directory"
        } else if kind.is_socket() {
            "a socket"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device file"
        } else {
            "a special file"
        };
        return Err(Unreadable::NotRegular(name));
    }
    // O_NONBLOCK changes nothing for a regular file's reads.
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(Unreadable::Io)?;
    Ok(bytes)
}

/// Checks `schema_version` before anything else is read, so a suite written for another
/// version gets that sentence rather than a list of unknown keys.
pub fn check_schema_version(source: &SourceFile) -> Result<(), Problem> {
    #[derive(Deserialize)]
    struct VersionOnly {
        schema_version: Option<toml::Spanned<toml::Value>>,
    }
    let parsed: VersionOnly = match toml::from_str(source.text()) {
        Ok(v) => v,
        // Syntax errors are reported by the full parse.
        Err(_) => return Ok(()),
    };
    match parsed.schema_version {
        None => Err(Problem::at(
            ProblemKind::MissingKey,
            source,
            0..0,
            "`schema_version` is missing",
        )
        .with_label("expected `schema_version = 1` at the top of the file")
        .with_help("add `schema_version = 1` as the first line")),
        Some(v) if v.get_ref().as_integer() == Some(SCHEMA_VERSION) => Ok(()),
        Some(v) => Err(Problem::at(
            ProblemKind::SchemaVersion,
            source,
            v.span(),
            format!(
                "this suite is written for schema_version {}, but this proctor reads only schema_version {SCHEMA_VERSION}; there is no migration reader",
                v.get_ref()
            ),
        )
        .with_label("unsupported schema version")
        .with_help(format!(
            "rewrite the suite to the version {SCHEMA_VERSION} format (see docs/suite-format.md) and set `schema_version = {SCHEMA_VERSION}`"
        ))),
    }
}

fn toml_problem(source: &SourceFile, e: &toml::de::Error, well_formed: bool) -> Problem {
    let message = plain_types(e.message().trim());
    // The TOML parser gives some syntax errors (`key = ` with nothing after it) no words at all.
    let message = if message.is_empty() {
        "invalid TOML: a value is missing or cannot be read here".to_string()
    } else {
        message
    };
    let span = e.span().unwrap_or(0..0);
    if message.contains("recursion limit exceeded") {
        // One short line: the default report would echo the (possibly huge) line of brackets.
        let (line, column) = source.line_column(span.start);
        return Problem::in_file(
            ProblemKind::Syntax,
            source.path(),
            format!(
                "line {line}, column {column}: arrays or tables nested deeper than the TOML parser allows (its recursion limit)"
            ),
        )
        .with_help("a suite never needs such nesting: flatten the value");
    }
    if let Some(p) = array_of_tables_for_a_list(source, &span, &message) {
        return p;
    }
    let (kind, label, help) = classify(&message, well_formed);
    let mut p = Problem::at(kind, source, span, first_sentence(&message)).with_label(label);
    if let Some(h) = help {
        p = p.with_help(h);
    }
    p
}

/// A list of assertions (or another list of one-key tables) written as `[[a.b.all]]` headers:
/// the TOML reader cannot keep the places of such entries and says "expected a borrowed
/// string", which tells an author nothing. Names the header and the form to write instead.
fn array_of_tables_for_a_list(
    source: &SourceFile,
    span: &std::ops::Range<usize>,
    message: &str,
) -> Option<Problem> {
    if !message.contains("expected a borrowed string") {
        return None;
    }
    let text = source.text();
    let line_start = text[..span.start.min(text.len())]
        .rfind('\n')
        .map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next().unwrap_or_default().trim();
    let header = line.strip_prefix("[[")?.split("]]").next()?.trim();
    let key = header.rsplit('.').next().unwrap_or(header);
    Some(
        Problem::at(
            ProblemKind::InvalidValue,
            source,
            span.clone(),
            format!("`[[{header}]]` cannot be written as an array of tables here"),
        )
        .with_label("array-of-tables header")
        .with_help(format!(
            "write the list inline under its table instead: `{key} = [ {{ file_added = \"x\" }}, {{ check = \"make test\" }} ]`"
        )),
    )
}

/// Replaces Rust type names in serde's messages by words a suite author uses.
fn plain_types(message: &str) -> String {
    let mut out = message.to_string();
    for (rust, plain) in [
        ("expected u64", "expected a whole number (0 or more)"),
        ("expected u32", "expected a whole number (0 or more)"),
        ("expected usize", "expected a whole number (0 or more)"),
        ("expected i64", "expected a whole number"),
        ("expected i32", "expected a whole number"),
        ("expected f64", "expected a number"),
        ("expected a boolean", "expected `true` or `false`"),
        ("expected a sequence", "expected a list [...]"),
        ("expected a string", "expected a string \"...\""),
    ] {
        if out.ends_with(rust) {
            out = format!("{}{plain}", &out[..out.len() - rust.len()]);
        }
    }
    out
}

fn first_sentence(message: &str) -> String {
    // toml's messages end with the list of expected items; keep them: they are useful.
    message.lines().next().unwrap_or_default().to_string()
}

/// Decides what kind of mistake a toml/serde message describes, and the hint for it;
/// `well_formed` says the text itself is good TOML, so an unrecognised message is about a value.
fn classify(message: &str, well_formed: bool) -> (ProblemKind, String, Option<String>) {
    if let Some(found) = backticked_after(message, "unknown field ") {
        let expected = expected_list(message);
        if let [kind] = &expected[..] {
            if ASSERTION_KINDS.contains(&kind.as_str()) {
                return (
                    ProblemKind::UnknownKey,
                    format!("a second key beside `{kind}`"),
                    Some(format!(
                        "an assertion is a one-key table: keep `{{ {kind} = ... }}` alone, write another rule as its own table in the list (`{{ {found} = ... }}`), or a setting of `{kind}` inside its value"
                    )),
                );
            }
        }
        let help = match nearest(&found, expected.iter().map(String::as_str)) {
            Some(near) => Some(format!("did you mean `{near}`?")),
            None if !expected.is_empty() => Some(format!(
                "valid keys here: {}",
                expected
                    .iter()
                    .map(|e| format!("`{e}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            None => None,
        };
        return (ProblemKind::UnknownKey, "unknown key".into(), help);
    }
    if let Some(found) = backticked_after(message, "unknown variant ") {
        let expected = expected_list(message);
        let help = match nearest(&found, expected.iter().map(String::as_str)) {
            Some(near) => Some(format!("did you mean `{near}`?")),
            None => Some(format!(
                "write one of: {}",
                expected
                    .iter()
                    .map(|e| format!("`{e}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        };
        return (ProblemKind::InvalidValue, "not a valid choice".into(), help);
    }
    if let Some(field) = backticked_after(message, "missing field ") {
        return (
            ProblemKind::MissingKey,
            format!("`{field}` is required in this table"),
            Some(format!("add `{field} = ...` to this table")),
        );
    }
    if message.starts_with("invalid type") || message.starts_with("invalid value") {
        let expected = message
            .split_once(", expected ")
            .map(|(_, e)| e.to_string())
            .unwrap_or_default();
        let help = (!expected.is_empty()).then(|| format!("write {expected} here"));
        return (ProblemKind::InvalidValue, "wrong type".into(), help);
    }
    if message.contains("invalid length") {
        return (
            ProblemKind::InvalidValue,
            "wrong number of items".into(),
            None,
        );
    }
    if well_formed {
        // The message is the refusal's own sentence (a range, a format): it says what to write.
        return (ProblemKind::InvalidValue, "value not accepted".into(), None);
    }
    (
        ProblemKind::Syntax,
        "TOML syntax error".into(),
        Some("see https://toml.io for the syntax of keys, strings, arrays and tables".into()),
    )
}

fn backticked_after(message: &str, prefix: &str) -> Option<String> {
    let rest = message.split_once(prefix)?.1;
    let rest = rest.strip_prefix('`')?;
    let end = rest.find('`')?;
    Some(rest[..end].to_string())
}

fn expected_list(message: &str) -> Vec<String> {
    let Some((_, tail)) = message.split_once("expected ") else {
        return Vec::new();
    };
    tail.split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, s)| s.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_or_a_directory_is_refused_without_blocking_and_a_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("suite.toml");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo(3) on a NUL-terminated path that lives for the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let p = read_text(&fifo, "suite.toml").expect_err("a FIFO is refused");
        assert_eq!(p.kind, ProblemKind::BadPath);
        assert_eq!(
            p.message,
            "suite.toml is a FIFO (named pipe), not a regular file"
        );
        let p = read_text(dir.path(), "suite.toml").expect_err("a directory is refused");
        assert_eq!(p.message, "suite.toml is a directory, not a regular file");
        let file = dir.path().join("ok.toml");
        std::fs::write(&file, "id = \"x\"\n").unwrap();
        assert_eq!(read_text(&file, "suite.toml").unwrap(), "id = \"x\"\n");
    }

    #[test]
    fn unknown_field_suggests_the_nearest_key() {
        let (kind, _, help) = classify(
            "unknown field `wall_timeout_secs`, expected one of `wall_timeout_seconds`, `network`",
            true,
        );
        assert_eq!(kind, ProblemKind::UnknownKey);
        assert_eq!(
            help.as_deref(),
            Some("did you mean `wall_timeout_seconds`?")
        );
    }

    #[test]
    fn unknown_variant_lists_the_choices_when_nothing_is_near() {
        let (kind, _, help) = classify(
            "unknown variant `zzz`, expected one of `none`, `loopback`, `host`",
            true,
        );
        assert_eq!(kind, ProblemKind::InvalidValue);
        assert_eq!(
            help.as_deref(),
            Some("write one of: `none`, `loopback`, `host`")
        );
    }

    #[test]
    fn a_refusal_of_good_toml_is_about_the_value_not_the_syntax() {
        let source = SourceFile::new(
            std::path::Path::new("suite.toml"),
            "[limits]\nmemory_mb = 0\n".to_string(),
        );
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Limits {
            #[serde(deserialize_with = "refuse")]
            memory_mb: u64,
        }
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Doc {
            limits: Limits,
        }
        fn refuse<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
            let v = u64::deserialize(d)?;
            Err(serde::de::Error::custom(format!(
                "must be between 1 and 9, not {v}"
            )))
        }
        let p = parse_toml::<Doc>(&source).expect_err("refused");
        assert_eq!(p.kind, ProblemKind::InvalidValue, "{p:?}");
        assert!(!format!("{p:?}").contains("syntax"), "{p:?}");

        let broken = SourceFile::new(std::path::Path::new("suite.toml"), "[limits\n".to_string());
        let p = parse_toml::<Doc>(&broken).expect_err("refused");
        assert_eq!(p.kind, ProblemKind::Syntax, "{p:?}");
    }
}
