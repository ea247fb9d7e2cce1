//! Property tests of the mutation patches: [`Patch::parse`] and [`Patch::apply`]. Over arbitrary
//! text and structured mutations of the seed corpus (`tests/corpus/patches/`, applied to
//! `tests/corpus/patches/fixture/`), neither panics and every parse error names a line the
//! patch has; and a diff made from any edit of a file applies to that file to give exactly the
//! edited file.

mod mutate;

use std::path::PathBuf;

use proctor_suite::patch::{ApplyError, Patch, PatchParseError};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

/// The fixture the seed patches are written against.
fn fixture() -> PathBuf {
    mutate::corpus_dir("patches").join("fixture")
}

/// Reads a file of the seed fixture, as the layer cache reads the suite's fixture.
fn read_fixture(path: &str) -> Option<Vec<u8>> {
    std::fs::read(fixture().join(path)).ok()
}

/// The error names a line of `text` (line 1 for an empty text).
fn located(text: &str, e: &PatchParseError) -> Result<(), TestCaseError> {
    let lines = text.split_inclusive('\n').count().max(1);
    prop_assert!(
        e.line >= 1 && e.line <= lines,
        "line {} of {lines}: {}",
        e.line,
        e.message
    );
    prop_assert!(!e.message.trim().is_empty());
    Ok(())
}

/// Parses `bytes` (as the suite reads a patch: UTF-8 text, else it is no patch) and applies
/// what parses to the seed fixture; checks that a parse error is located.
fn parse_and_apply(bytes: &[u8]) -> Result<(), TestCaseError> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Ok(());
    };
    match Patch::parse(text) {
        Ok(patch) => {
            prop_assert!(!patch.files.is_empty());
            if let Err(e) = patch.apply(read_fixture) {
                prop_assert!(!e.to_string().is_empty());
            }
        }
        Err(e) => located(text, &e)?,
    }
    Ok(())
}

#[test]
fn the_seeds_parse_and_apply_as_named() {
    for (name, bytes) in mutate::seeds("patches", "valid-") {
        let text = String::from_utf8(bytes).expect("UTF-8");
        let patch = Patch::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let out = patch
            .apply(read_fixture)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!out.is_empty(), "{name}");
    }
    let two = Patch::parse(
        &String::from_utf8(mutate::seeds("patches", "valid-two-hunks")[0].1.clone())
            .expect("UTF-8"),
    )
    .expect("parses")
    .apply(read_fixture)
    .expect("applies");
    assert_eq!(
        two["src/lines.txt"].as_deref(),
        Some(&b"one\ntwo\nTHREE\nthree and a half\nfour\nfive\nsix\nseven\nEIGHT\n"[..])
    );
    for (name, bytes) in mutate::seeds("patches", "malformed-") {
        let text = String::from_utf8(bytes).expect("UTF-8");
        match Patch::parse(&text) {
            Err(e) => located(&text, &e).unwrap_or_else(|f| panic!("{name}: {f}")),
            Ok(p) => assert!(
                matches!(p.apply(read_fixture), Err(ApplyError::HunkMismatch { .. })),
                "{name} parsed and applied"
            ),
        }
    }
}

/// One file's lines, each ending with a newline; few distinct lines, so that hunks' lines
/// repeat elsewhere in the file.
fn lines() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec("[ab]{0,2}|é|x y", 0..24)
        .prop_map(|v| v.into_iter().map(|l| format!("{l}\n")).collect())
}

/// An edit of a file: at line `start`, remove `remove` lines and insert `insert`, shown with
/// `context` lines of context on each side.
#[derive(Debug, Clone)]
struct LineEdit {
    start: usize,
    remove: usize,
    insert: Vec<String>,
    context: usize,
}

fn line_edit() -> impl Strategy<Value = LineEdit> {
    (
        any::<usize>(),
        0usize..5,
        prop::collection::vec("[abz]{0,2}", 0..4),
        0usize..4,
    )
        .prop_map(|(start, remove, insert, context)| LineEdit {
            start,
            remove,
            insert: insert.into_iter().map(|l| format!("{l}\n")).collect(),
            context,
        })
}

/// The file after the edit, and the one-hunk unified diff that makes it (`-K,0` when the hunk
/// finds nothing: an insertion after line K).
fn diff(path: &str, old: &[String], e: &LineEdit) -> (Vec<String>, String) {
    let s = e.start % (old.len() + 1);
    let r = e.remove.min(old.len() - s);
    let mut insert = e.insert.clone();
    if r == 0 && insert.is_empty() {
        insert.push("new\n".to_string());
    }
    let b0 = s.saturating_sub(e.context);
    let a1 = (s + r + e.context).min(old.len());
    let mut new = old[..s].to_vec();
    new.extend(insert.iter().cloned());
    new.extend(old[s + r..].iter().cloned());
    let old_len = a1 - b0;
    let new_len = old_len - r + insert.len();
    let start = |len: usize| if len == 0 { b0 } else { b0 + 1 };
    let mut text = format!(
        "--- a/{path}\n+++ b/{path}\n@@ -{},{old_len} +{},{new_len} @@\n",
        start(old_len),
        start(new_len)
    );
    for l in &old[b0..s] {
        text.push_str(&format!(" {l}"));
    }
    for l in &old[s..s + r] {
        text.push_str(&format!("-{l}"));
    }
    for l in &insert {
        text.push_str(&format!("+{l}"));
    }
    for l in &old[s + r..a1] {
        text.push_str(&format!(" {l}"));
    }
    (new, text)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(mutate::cases()))]

    /// The diff of any edit applies to the file and gives exactly the edited file, also after
    /// a second file's diff in the same patch.
    #[test]
    fn the_diff_of_any_edit_applies_and_gives_the_edited_file(
        a in lines(), ea in line_edit(), b in lines(), eb in line_edit(),
    ) {
        let (new_a, diff_a) = diff("src/a.txt", &a, &ea);
        let (new_b, diff_b) = diff("b.txt", &b, &eb);
        let text = format!("{diff_a}{diff_b}");
        let patch = Patch::parse(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        let out = patch
            .apply(|p| match p {
                "src/a.txt" => Some(a.concat().into_bytes()),
                "b.txt" => Some(b.concat().into_bytes()),
                _ => None,
            })
            .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        let (want_a, want_b) = (new_a.concat().into_bytes(), new_b.concat().into_bytes());
        prop_assert_eq!(out["src/a.txt"].as_deref(), Some(&want_a[..]), "{}", text);
        prop_assert_eq!(out["b.txt"].as_deref(), Some(&want_b[..]), "{}", text);
    }

    /// Text made of a diff's own pieces and any characters: no panic, errors located.
    #[test]
    fn diff_like_text_never_panics_and_errors_are_located(
        text in "(--- a/src/config\\.py\n|\\+\\+\\+ b/src/config\\.py\n|--- /dev/null\n|\\+\\+\\+ /dev/null\n|@@ -[0-9]{1,2}(,[0-9]{1,2})? \\+[0-9]{1,2}(,[0-9]{1,2})? @@\n|[ +-][a-z =0-9]{0,10}\n|\\\\ No newline at end of file\n|\n|\\PC{1,3})*"
    ) {
        parse_and_apply(text.as_bytes())?;
    }

    /// Any bytes: no panic.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        parse_and_apply(&bytes)?;
    }

    /// A seed with a few careless edits: no panic, errors located.
    #[test]
    fn mutated_seeds_never_panic_and_errors_are_located(
        seed in any::<prop::sample::Index>(),
        edits in prop::collection::vec(mutate::edit(), 1..5),
    ) {
        let seeds = mutate::seeds("patches", "");
        let (_, bytes) = &seeds[seed.index(seeds.len())];
        parse_and_apply(&mutate::apply(bytes, &edits))?;
    }
}
