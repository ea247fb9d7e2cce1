//! Shared by the property tests: the seed corpus under `tests/corpus/`, and structured
//! mutations of its files (what a careless edit, a bad merge or a torn copy does to a file).

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use proptest::prelude::*;

/// Cases per property: `PROPTEST_CASES` when set, else 256 (each property runs in well under a
/// second at that size).
pub fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

/// The folder of one kind of seed (`suites`, `patches`).
pub fn corpus_dir(kind: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(kind)
}

/// Every seed file of a kind whose name starts with `prefix` (`valid-`, `malformed-`, or `""`
/// for all), by name, in name order; sub-folders are not seeds.
pub fn seeds(kind: &str, prefix: &str) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(corpus_dir(kind))
        .expect("the seed corpus")
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .map(|n| {
            let bytes = std::fs::read(corpus_dir(kind).join(&n)).expect("a seed");
            (n, bytes)
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no `{prefix}*` seeds in {kind}");
    out
}

/// One edit of a file's bytes; positions are taken modulo the file's length.
#[derive(Debug, Clone)]
pub enum Edit {
    /// Cut the file at a byte (a torn copy).
    Truncate(usize),
    /// Remove a whole line.
    DeleteLine(usize),
    /// Repeat a line right after itself.
    DuplicateLine(usize),
    /// Exchange two lines.
    SwapLines(usize, usize),
    /// Insert a text at a byte.
    Insert(usize, String),
    /// Replace one byte (may make the file invalid UTF-8).
    SetByte(usize, u8),
    /// Remove a run of bytes.
    DeleteBytes(usize, usize),
}

/// Texts worth inserting: the syntax of TOML and of diffs, and characters wider than a byte.
const SNIPPETS: &[&str] = &[
    "\n",
    "[",
    "]",
    "[[",
    "]]",
    "{",
    "}",
    "\"",
    "'''",
    "=",
    ",",
    "#",
    ".",
    "-",
    "+",
    " ",
    "@@",
    "@@ -1,2 +1,2 @@\n",
    "--- a/x\n",
    "+++ b/x\n",
    "\\ No newline at end of file\n",
    "é",
    "€",
    "😀",
    "\t",
    "\r\n",
    "0",
    "-1",
    "1e400",
    "99999999999999999999",
    "true",
    "nan",
    "inf",
    "[tasks.success]\n",
    "[[tasks]]\n",
    "id = \"x\"\n",
    "unknown = 1\n",
    "schema_version = 1\n",
    "\u{0}",
    "\u{feff}",
];

/// Any one edit.
pub fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        any::<usize>().prop_map(Edit::Truncate),
        any::<usize>().prop_map(Edit::DeleteLine),
        any::<usize>().prop_map(Edit::DuplicateLine),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::SwapLines(a, b)),
        (any::<usize>(), prop::sample::select(SNIPPETS))
            .prop_map(|(at, s)| Edit::Insert(at, s.to_string())),
        (any::<usize>(), "\\PC{1,8}").prop_map(|(at, s)| Edit::Insert(at, s)),
        (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Edit::SetByte(at, b)),
        (any::<usize>(), 1usize..16).prop_map(|(at, n)| Edit::DeleteBytes(at, n)),
    ]
}

/// Applies the edits, in order, to a copy of `bytes`.
pub fn apply(bytes: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for e in edits {
        out = apply_one(out, e);
    }
    out
}

fn apply_one(mut b: Vec<u8>, e: &Edit) -> Vec<u8> {
    let at = |n: usize, len: usize| if len == 0 { 0 } else { n % (len + 1) };
    match e {
        Edit::Truncate(n) => {
            let n = at(*n, b.len());
            b.truncate(n);
            b
        }
        Edit::Insert(n, s) => {
            let n = at(*n, b.len());
            b.splice(n..n, s.bytes());
            b
        }
        Edit::SetByte(n, v) => {
            if !b.is_empty() {
                let n = n % b.len();
                b[n] = *v;
            }
            b
        }
        Edit::DeleteBytes(n, k) => {
            let n = at(*n, b.len());
            let end = (n + k).min(b.len());
            b.drain(n..end);
            b
        }
        Edit::DeleteLine(n) | Edit::DuplicateLine(n) | Edit::SwapLines(n, _) => {
            let mut lines: Vec<Vec<u8>> = b
                .split_inclusive(|&c| c == b'\n')
                .map(<[u8]>::to_vec)
                .collect();
            if lines.is_empty() {
                return b;
            }
            let i = n % lines.len();
            match e {
                Edit::DeleteLine(_) => {
                    lines.remove(i);
                }
                Edit::DuplicateLine(_) => {
                    let line = lines[i].clone();
                    lines.insert(i + 1, line);
                }
                Edit::SwapLines(_, m) => {
                    let j = m % lines.len();
                    lines.swap(i, j);
                }
                _ => {}
            }
            lines.concat()
        }
    }
}
