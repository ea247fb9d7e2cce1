//! Property tests of the suite parser (`suite.toml` text to [`SuiteFile`]): over arbitrary bytes,
//! arbitrary TOML-like text and structured mutations of the seed corpus
//! (`tests/corpus/suites/`), the parser never panics, every error points at a place inside the
//! input, and every text that parses round-trips (written out again as TOML, it parses to the
//! same suite).

mod mutate;

use std::path::Path;

use proctor_suite::model::SuiteFile;
use proctor_suite::parse::{check_schema_version, parse_toml, read_text};
use proctor_suite::problem::SourceFile;
use proctor_suite::Problem;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

/// What `Suite::parse` does with the text of a suite.toml, without the folder around it.
fn parse(text: &str) -> Result<SuiteFile, Box<Problem>> {
    let source = SourceFile::new(Path::new("suite.toml"), text.to_string());
    check_schema_version(&source)?;
    Ok(parse_toml(&source)?)
}

/// Parses `bytes` as a suite file would be read: invalid UTF-8 through [`read_text`] (from a
/// real file), the rest through [`parse`]; checks that any error is located inside the input.
/// Returns the suite when it parses.
fn parse_bytes(bytes: &[u8]) -> Result<Option<SuiteFile>, TestCaseError> {
    match std::str::from_utf8(bytes) {
        Ok(text) => match parse(text) {
            Ok(file) => Ok(Some(file)),
            Err(p) => {
                located(text, &p)?;
                Ok(None)
            }
        },
        Err(e) => {
            let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
            let path = dir.path().join("suite.toml");
            std::fs::write(&path, bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let p = match read_text(&path, "suite.toml") {
                Ok(_) => return Err(TestCaseError::fail("invalid UTF-8 was read as text")),
                Err(p) => p,
            };
            let at = e.valid_up_to();
            prop_assert!(at < bytes.len());
            prop_assert!(
                p.message
                    .contains(&format!("the byte at offset {at} (line ")),
                "{}",
                p.message
            );
            Ok(None)
        }
    }
}

/// The error points inside `text`: a span on character boundaries within it, whose line and
/// column are the span's; or, for the one message without a span, a line of the text.
fn located(text: &str, p: &Problem) -> Result<(), TestCaseError> {
    let lines = text.split('\n').count();
    match &p.location {
        Some(loc) => {
            prop_assert!(loc.span.start <= loc.span.end, "{:?}", loc);
            prop_assert!(loc.span.end <= text.len(), "{:?} past {}", loc, text.len());
            prop_assert!(text.is_char_boundary(loc.span.start), "{:?}", loc);
            prop_assert!(loc.line >= 1 && loc.line <= lines, "{:?} of {lines}", loc);
            prop_assert!(loc.column >= 1, "{:?}", loc);
            let source = SourceFile::new(Path::new("suite.toml"), text.to_string());
            prop_assert_eq!((loc.line, loc.column), source.line_column(loc.span.start));
        }
        None => {
            let line = p
                .message
                .strip_prefix("line ")
                .and_then(|m| m.split(',').next())
                .and_then(|n| n.parse::<usize>().ok());
            prop_assert!(
                line.is_some_and(|l| l >= 1 && l <= lines),
                "an error without a place: {}",
                p.message
            );
        }
    }
    prop_assert!(!p.message.trim().is_empty());
    Ok(())
}

/// The suite with every source position removed, to compare two parses of different texts.
fn without_spans(file: &SuiteFile) -> String {
    let spans = regex::Regex::new(r"span: \d+\.\.\d+, ").expect("a regex");
    spans.replace_all(&format!("{file:?}"), "").into_owned()
}

/// `table` written out again as TOML in another layout: one line per top-level key, keys
/// sorted, every table inline, strings re-escaped, numbers re-spelled.
///
/// (Not `toml::to_string`, which writes an array of tables as `[[tasks.success.all]]` headers:
/// the `toml` crate cannot deserialize `Spanned` values from that form, which is a limit of the
/// crate, not of the suite format.)
fn inline_layout(table: &toml::Table) -> String {
    let mut out = String::new();
    for (key, value) in table {
        let bare = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        let key = if bare {
            key.clone()
        } else {
            toml::Value::String(key.clone()).to_string()
        };
        out.push_str(&format!("{key} = {value}\n"));
    }
    out
}

/// A text that parses also parses after being written out again as TOML in another layout
/// ([`inline_layout`]), to the same suite.
fn round_trips(text: &str, file: &SuiteFile) -> Result<(), TestCaseError> {
    let table: toml::Table = toml::from_str(text)
        .map_err(|e| TestCaseError::fail(format!("parsed as a suite, not as TOML: {e}")))?;
    let again = inline_layout(&table);
    match parse(&again) {
        Ok(second) => prop_assert_eq!(without_spans(file), without_spans(&second)),
        Err(p) => {
            return Err(TestCaseError::fail(format!(
                "written out again, it no longer parses: {p}\n{again}"
            )))
        }
    }
    Ok(())
}

#[test]
fn every_valid_seed_parses_and_round_trips_and_every_malformed_one_is_located() {
    for (name, bytes) in mutate::seeds("suites", "valid-") {
        let text = std::str::from_utf8(&bytes).expect("a valid seed is UTF-8");
        let file = parse(text).unwrap_or_else(|p| panic!("{name}: {p}"));
        round_trips(text, &file).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    for (name, bytes) in mutate::seeds("suites", "malformed-") {
        let parsed = parse_bytes(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(parsed.is_none(), "{name} parsed");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(mutate::cases()))]

    /// Any bytes at all: no panic, and an error (UTF-8 or TOML) names a place in them.
    #[test]
    fn arbitrary_bytes_never_panic_and_errors_are_located(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        if let Some(file) = parse_bytes(&bytes)? {
            round_trips(std::str::from_utf8(&bytes).expect("parsed"), &file)?;
        }
    }

    /// Text made of TOML's own characters, which reaches far deeper into the parser than
    /// random bytes do.
    #[test]
    fn toml_like_text_never_panics_and_errors_are_located(
        text in "(schema_version = 1\n|id = \"s\"\n|\\[\\[tasks\\]\\]\n|\\[\\[variants\\]\\]\n|\\[defaults\\]\n|[a-z_]{1,8} = |\"[a-z]{0,4}\"|[0-9]{1,3}|[\\[\\]{},.=#\n '\"]|true|\\PC){0,60}"
    ) {
        if let Some(file) = parse_bytes(text.as_bytes())? {
            round_trips(&text, &file)?;
        }
    }

    /// A seed (valid or malformed) with a few careless edits: no panic, errors located, and
    /// whatever still parses round-trips.
    #[test]
    fn mutated_seeds_never_panic_errors_are_located_and_what_parses_round_trips(
        seed in any::<prop::sample::Index>(),
        edits in prop::collection::vec(mutate::edit(), 1..5),
    ) {
        let seeds = mutate::seeds("suites", "");
        let (_, bytes) = &seeds[seed.index(seeds.len())];
        let mutated = mutate::apply(bytes, &edits);
        if let Some(file) = parse_bytes(&mutated)? {
            round_trips(std::str::from_utf8(&mutated).expect("parsed"), &file)?;
        }
    }
}
