//! Finding a secret quoted inside a larger file: windows of normalised lines.
//!
//! A quote changes how a text is laid out, not what it says: it is indented (a Markdown code
//! block), prefixed (`> ` in a Markdown quote or an e-mail, `# ` or `// ` when pasted into a
//! comment, `+`/`-` in a diff), wrapped in a code fence, or surrounded by other text. So each
//! line of the secret and of the file is normalised: leading quote, comment and
//! diff markers (`>`, `#`, `//`, `/*`, `*`, `;`, `%`, `+`, `-`) and every white-space character
//! are dropped, and the rest hashed. Case is kept: quoting never changes it, and folding it would
//! only make unrelated lines collide. A line with fewer than [`MIN_LINE_CHARS`] characters left,
//! or no letter or digit (`}`, `fi`, `"""`, a code fence, `----`), is *trivial* and skipped on
//! both sides, so a fence or a blank line between two quoted lines breaks nothing.
//!
//! The remaining (*meaningful*) lines of a secret are cut into windows of [`WINDOW_LINES`]
//! consecutive lines (a secret with fewer meaningful lines is one window of all of them), each
//! of at least [`MIN_WINDOW_CHARS`] characters. A file holds a quote of the secret where one of
//! those windows appears as consecutive meaningful lines of the file. A quote is reported only
//! when the secret's lines it covers hold at least [`MIN_SUBSTANCE_CHARS`] characters of
//! *substance*: lines of the secret that are not comments (a shared license header), imports,
//! `#include`s or `package` lines (a shared import block), which a fixture may well share with
//! a check it did not leak.
//!
//! Lines end at LF; a CR before it, or alone, is white space.
//!
//! Cost: the lines of a file are found with `memchr`; of each, only the first 8 characters after
//! its markers are read (its *signature*) and looked up in a 2^16-bit filter of the secrets'
//! line signatures; a line that passes is normalised and hashed whole (8 bytes at a time) and
//! looked up in the set of the secrets' line hashes. Windows are hashed only across lines that
//! all belong to some secret.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// How many consecutive meaningful lines make a window.
pub const WINDOW_LINES: usize = 4;

/// Fewest characters (white space and leading markers dropped) a line needs to be meaningful.
pub const MIN_LINE_CHARS: usize = 4;

/// Fewest characters a window of a secret needs to be looked for.
pub const MIN_WINDOW_CHARS: usize = 32;

/// Fewest characters of substance (lines of the secret that are not comments or imports) a
/// quote must cover to be reported.
pub const MIN_SUBSTANCE_CHARS: usize = 32;

/// The size of [`Windows`]' filter of line signatures, in 64-bit words (2^16 bits).
const FILTER_WORDS: usize = 1024;

/// How far into a file a NUL byte marks it as binary: binary files are not searched.
pub(crate) const BINARY_PROBE: usize = 4096;

/// A [`Hasher`] for keys that are already hashes: it keeps the last `u64` written.
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = mix(self.0, u64::from(*b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Maps and sets keyed by precomputed hashes.
type KeyBuild = BuildHasherDefault<KeyHasher>;

/// One step of the line and window hash (FxHash's multiply, with a final-quality rotation).
fn mix(h: u64, word: u64) -> u64 {
    (h.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95)
}

/// One meaningful line of a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Line {
    /// The hash of the normalised line.
    pub hash: u64,
    /// Its number in the text, from 1.
    pub number: u32,
    /// How many characters it has after normalising.
    pub chars: u32,
}

/// The class of a byte for [`line_hash`]: white space (CR of a CRLF, and LF, included).
const SPACE: u8 = 1;
/// The class of a letter or digit (any byte of a multi-byte UTF-8 character counts as one).
const ALNUM: u8 = 2;

/// Each byte's class: [`SPACE`], [`ALNUM`] or 0.
static CLASS: [u8; 256] = classes();

/// Builds [`CLASS`].
const fn classes() -> [u8; 256] {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = if matches!(c, b' ' | b'\t' | b'\r' | b'\n' | 0x0b | 0x0c) {
            SPACE
        } else if c.is_ascii_alphanumeric() || c >= 0x80 {
            ALNUM
        } else {
            0
        };
        b += 1;
    }
    t
}

/// Whether `b` is a one-byte marker dropped at the start of a line.
fn is_marker(b: u8) -> bool {
    matches!(b, b'>' | b'#' | b'*' | b';' | b'%' | b'+' | b'-')
}

/// `line` without its leading white space and quote, comment and diff markers.
fn content(line: &[u8]) -> &[u8] {
    let mut i = 0;
    while i < line.len() {
        let b = line[i];
        if CLASS[b as usize] == SPACE || is_marker(b) {
            i += 1;
        } else if b == b'/' && matches!(line.get(i + 1), Some(b'/' | b'*')) {
            i += 2;
        } else {
            break;
        }
    }
    line.get(i..).unwrap_or_default()
}

/// The hash and length of a line's [`content`] with its white space dropped (hashed 8 bytes
/// to a word); `None` when the line is trivial.
fn line_hash(content: &[u8]) -> Option<(u64, u32)> {
    let (mut h, mut word, mut in_word, mut chars, mut class) = (0u64, 0u64, 0u32, 0u32, 0u8);
    for &b in content {
        let c = CLASS[b as usize];
        if c == SPACE {
            continue;
        }
        chars += 1;
        class |= c;
        word = word << 8 | u64::from(b);
        in_word += 1;
        if in_word == 8 {
            h = mix(h, word);
            word = 0;
            in_word = 0;
        }
    }
    (class & ALNUM != 0 && chars as usize >= MIN_LINE_CHARS)
        .then(|| (mix(mix(h, word), u64::from(chars)), chars))
}

/// The first 8 bytes of a line's [`content`] that are not white space, packed in a word; how
/// many there are (at most 8); and whether one is a letter or digit. Cheaper than
/// [`line_hash`], it rules most lines of a file out before they are hashed.
fn signature(content: &[u8]) -> (u64, u32, bool) {
    let (mut word, mut n, mut class) = (0u64, 0u32, 0u8);
    for &b in content {
        let c = CLASS[b as usize];
        if c == SPACE {
            continue;
        }
        word = word << 8 | u64::from(b);
        n += 1;
        class |= c;
        if n == 8 {
            break;
        }
    }
    (word, n, class & ALNUM != 0)
}

/// The bit of a [`signature`] in [`Windows`]' filter of 2^16 bits.
fn signature_bit(word: u64, n: u32) -> usize {
    (mix(u64::from(n), word) >> 48) as usize
}

/// Calls `each` with every line of `bytes` (ending at LF; a CR before it is white space) and
/// its number, from 1.
fn for_each_raw_line(bytes: &[u8], mut each: impl FnMut(&[u8], u32)) {
    use std::io::BufRead;
    let mut rest = bytes;
    let mut number: u32 = 0;
    while !rest.is_empty() {
        let start = rest;
        // Reading a slice cannot fail; `skip_until` finds the LF with `memchr`.
        let len = rest.skip_until(b'\n').unwrap_or(start.len());
        number = number.saturating_add(1);
        each(start.get(..len).unwrap_or(start), number);
        if len == 0 {
            break;
        }
    }
}

/// Calls `each` with every meaningful line of `bytes` (see the module's documentation).
pub(crate) fn for_each_line(bytes: &[u8], mut each: impl FnMut(Line)) {
    for_each_raw_line(bytes, |line, number| {
        if let Some((hash, chars)) = line_hash(content(line)) {
            each(Line {
                hash,
                number,
                chars,
            });
        }
    });
}

/// The meaningful lines of `bytes`, in order.
pub(crate) fn lines(bytes: &[u8]) -> Vec<Line> {
    let mut out = Vec::new();
    for_each_line(bytes, |l| out.push(l));
    out
}

/// Whether `bytes` looks binary (a NUL byte near its start): such files are not searched.
pub(crate) fn is_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(BINARY_PROBE)].contains(&0)
}

/// Whether a raw line of a secret is substance: not a comment, an import or a shebang, which
/// files often share without one leaking the other.
fn is_substance(raw: &str) -> bool {
    let t = raw.trim_start();
    const BOILERPLATE: [&str; 14] = [
        "#",
        "//",
        "/*",
        "*",
        "--",
        ";",
        "%",
        "<!--",
        "import ",
        "use ",
        "using ",
        "package ",
        "extern crate ",
        "require",
    ];
    if BOILERPLATE.iter().any(|p| t.starts_with(p)) {
        return false;
    }
    !(t.starts_with("from ") && t.contains(" import "))
}

/// A secret's meaningful lines, each with whether it is substance.
#[derive(Debug, Default)]
struct SecretLines {
    lines: Vec<Line>,
    substance: Vec<bool>,
}

impl SecretLines {
    fn of(bytes: &[u8]) -> SecretLines {
        let lines = lines(bytes);
        let raw: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
        let substance = lines
            .iter()
            .map(|l| {
                let text = raw.get(l.number as usize - 1).copied().unwrap_or_default();
                is_substance(&String::from_utf8_lossy(text))
            })
            .collect();
        SecretLines { lines, substance }
    }
}

/// The hash of the window made of `lines`.
fn window_hash(lines: &[Line]) -> u64 {
    lines.iter().fold(lines.len() as u64, |h, l| mix(h, l.hash))
}

/// Part of a secret found in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quote {
    /// Which secret (the number given to `Windows::add`).
    pub secret: usize,
    /// The first and last line of the file that hold the quote (from 1).
    pub lines: (u32, u32),
    /// How many of the secret's meaningful lines the file holds.
    pub quoted: usize,
    /// How many meaningful lines the secret has.
    pub total: usize,
}

/// The windows of a set of secrets, ready to search files for.
#[derive(Debug, Default)]
pub(crate) struct Windows {
    /// Each secret's meaningful lines, by the number given to [`Windows::add`].
    secrets: HashMap<usize, SecretLines>,
    /// The hash of every meaningful line of a secret.
    line_set: HashSet<u64, KeyBuild>,
    /// Where each window begins: (secret, index of its first line).
    windows: HashMap<u64, Vec<(usize, usize)>, KeyBuild>,
    /// The window sizes in use, ascending.
    sizes: Vec<usize>,
    /// The [`signature_bit`] of every meaningful line of a secret, 2^16 bits.
    filter: Vec<u64>,
}

impl Windows {
    /// Adds the secret numbered `secret` with content `bytes`. A binary secret, or one whose
    /// windows are all too short, is left out.
    pub(crate) fn add(&mut self, secret: usize, bytes: &[u8]) {
        if is_binary(bytes) {
            return;
        }
        let sl = SecretLines::of(bytes);
        let size = sl.lines.len().min(WINDOW_LINES);
        if size == 0 {
            return;
        }
        let mut any = false;
        for start in 0..=sl.lines.len() - size {
            let w = &sl.lines[start..start + size];
            if w.iter().map(|l| l.chars as usize).sum::<usize>() < MIN_WINDOW_CHARS {
                continue;
            }
            any = true;
            self.windows
                .entry(window_hash(w))
                .or_default()
                .push((secret, start));
        }
        if !any {
            return;
        }
        self.line_set.extend(sl.lines.iter().map(|l| l.hash));
        if self.filter.is_empty() {
            self.filter = vec![0; FILTER_WORDS];
        }
        for_each_raw_line(bytes, |line, _| {
            let c = content(line);
            if line_hash(c).is_some() {
                let (word, n, _) = signature(c);
                let bit = signature_bit(word, n);
                self.filter[bit / 64] |= 1 << (bit % 64);
            }
        });
        if let Err(at) = self.sizes.binary_search(&size) {
            self.sizes.insert(at, size);
        }
        self.secrets.insert(secret, sl);
    }

    /// Whether no secret can be searched for.
    pub(crate) fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// The quotes of the secrets in `bytes`, by secret, each reported only when it covers
    /// enough substance (see the module's documentation). Binary content holds none.
    pub(crate) fn quotes(&self, bytes: &[u8]) -> Vec<Quote> {
        if self.is_empty() || is_binary(bytes) {
            return Vec::new();
        }
        // The meaningful lines of `bytes` that belong to a secret; `None` where one that does
        // not breaks the run.
        let mut kept: Vec<Option<Line>> = Vec::new();
        for_each_raw_line(bytes, |line, number| {
            let c = content(line);
            let (word, n, alnum) = signature(c);
            if (n as usize) < MIN_LINE_CHARS {
                return; // trivial
            }
            let bit = signature_bit(word, n);
            let in_filter = self.filter[bit / 64] & (1 << (bit % 64)) != 0;
            let meaningful = if in_filter {
                match line_hash(c) {
                    Some((hash, chars)) if self.line_set.contains(&hash) => {
                        kept.push(Some(Line {
                            hash,
                            number,
                            chars,
                        }));
                        return;
                    }
                    found => found.is_some(),
                }
            } else {
                alnum || line_hash(c).is_some()
            };
            if meaningful && kept.last().is_some_and(Option::is_some) {
                kept.push(None);
            }
        });
        // Per secret: which of its lines are covered, and the lines of `bytes` that hold them.
        let mut found: HashMap<usize, (Vec<bool>, u32, u32)> = HashMap::new();
        let mut run: Vec<Line> = Vec::new();
        kept.push(None);
        for entry in kept {
            if let Some(l) = entry {
                run.push(l);
                continue;
            }
            self.search_run(&run, &mut found);
            run.clear();
        }
        let mut out: Vec<Quote> = found
            .into_iter()
            .filter_map(|(secret, (covered, first, last))| {
                let sl = self.secrets.get(&secret)?;
                let substance: usize = sl
                    .lines
                    .iter()
                    .zip(&sl.substance)
                    .zip(&covered)
                    .filter(|((_, s), c)| **s && **c)
                    .map(|((l, _), _)| l.chars as usize)
                    .sum();
                (substance >= MIN_SUBSTANCE_CHARS).then(|| Quote {
                    secret,
                    lines: (first, last),
                    quoted: covered.iter().filter(|c| **c).count(),
                    total: covered.len(),
                })
            })
            .collect();
        out.sort_by_key(|q| q.secret);
        out
    }

    /// Looks for every window in `run`, consecutive meaningful lines of a file that all belong
    /// to some secret, and marks what it finds in `found`.
    fn search_run(&self, run: &[Line], found: &mut HashMap<usize, (Vec<bool>, u32, u32)>) {
        for &size in &self.sizes {
            if size > run.len() {
                break;
            }
            for start in 0..=run.len() - size {
                let w = &run[start..start + size];
                let Some(places) = self.windows.get(&window_hash(w)) else {
                    continue;
                };
                for &(secret, at) in places {
                    let Some(sl) = self.secrets.get(&secret) else {
                        continue;
                    };
                    let same = sl.lines[at..at + size]
                        .iter()
                        .zip(w)
                        .all(|(a, b)| a.hash == b.hash);
                    if !same {
                        continue;
                    }
                    let entry = found
                        .entry(secret)
                        .or_insert_with(|| (vec![false; sl.lines.len()], u32::MAX, 0));
                    for c in &mut entry.0[at..at + size] {
                        *c = true;
                    }
                    entry.1 = entry.1.min(w[0].number);
                    entry.2 = entry.2.max(w[size - 1].number);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hashes(text: &str) -> Vec<u64> {
        lines(text.as_bytes()).iter().map(|l| l.hash).collect()
    }

    const CHECK: &str = "import pathlib\n\ndef test_greeting():\n    text = pathlib.Path('hello.txt').read_text()\n    assert text.strip() == 'Hello, world'\n    assert len(text.splitlines()) == 1\n\ndef test_no_extra_files():\n    assert sorted(p.name for p in pathlib.Path('.').iterdir()) == ['hello.txt']\n";

    #[test]
    fn normalising_drops_indentation_white_space_and_quote_comment_and_diff_markers() {
        let plain = hashes("assert text.strip() == 'Hello, world'\n");
        assert_eq!(plain.len(), 1);
        for shape in [
            "    assert text.strip() == 'Hello, world'",
            "> assert text.strip() == 'Hello, world'",
            "> >   assert text.strip() == 'Hello, world'",
            "# assert text.strip() == 'Hello, world'",
            "// assert text.strip() == 'Hello, world'",
            " * assert text.strip() == 'Hello, world'",
            "+    assert text.strip() == 'Hello, world'",
            "-\tassert text.strip() == 'Hello, world'\r",
            "assert text.strip()=='Hello, world'   ",
            "assert  text.strip()  ==  'Hello,  world'",
        ] {
            assert_eq!(hashes(shape), plain, "{shape:?}");
        }
        // Case and inner characters are content.
        assert_ne!(hashes("ASSERT text.strip() == 'Hello, world'"), plain);
        assert_ne!(hashes("assert text.strip() == 'Hello, World'"), plain);
    }

    #[test]
    fn trivial_lines_are_skipped_and_line_numbers_kept() {
        let got = lines(b"}\n\n```\n)\n  fi\n\"\"\"\n----\nreturn x + y\r\nabc\r\x7b\n\nok = 1\n");
        let numbers: Vec<u32> = got.iter().map(|l| l.number).collect();
        // `return x + y` (line 8, CRLF), `abc\r{` (line 9: a lone CR is white space, and `abc`
        // alone would be too short), `ok = 1` (line 11).
        assert_eq!(numbers, [8, 9, 11]);
        assert_eq!(got[0].chars, 9);
        assert!(lines(b"").is_empty());
        assert!(lines(b"\n\n\n").is_empty());
    }

    #[test]
    fn substance_leaves_out_comments_and_imports() {
        for boiler in [
            "# Copyright 2024 Example",
            "   // SPDX-License-Identifier: MIT",
            " * Licensed under the Apache License",
            "import os",
            "from pathlib import Path",
            "use std::fs;",
            "#include <stdio.h>",
            "package main",
        ] {
            assert!(!is_substance(boiler), "{boiler}");
        }
        for code in [
            "def test_greeting():",
            "    assert x == 1",
            "from_file = read()",
            "Write `hi` into hello.txt.",
        ] {
            assert!(is_substance(code), "{code}");
        }
    }

    fn windows_of(secrets: &[&str]) -> Windows {
        let mut w = Windows::default();
        for (n, s) in secrets.iter().enumerate() {
            w.add(n, s.as_bytes());
        }
        w
    }

    #[test]
    fn a_secret_quoted_in_a_longer_text_is_found_with_its_lines() {
        let w = windows_of(&[CHECK]);
        let quoted: String = CHECK.lines().map(|l| format!("> {l}\n")).collect();
        let doc = format!("# Notes\n\nThe check reads:\n\n{quoted}\nThat is all.\n");
        let q = w.quotes(doc.as_bytes());
        // The quote runs from line 5 (`> import pathlib`) to line 13.
        assert_eq!(
            q,
            [Quote {
                secret: 0,
                lines: (5, 13),
                quoted: 7,
                total: 7
            }]
        );
        // Half of it, in a code fence, still counts: 4 consecutive lines are a window.
        let half: String = CHECK.lines().skip(2).take(5).collect::<Vec<_>>().join("\n");
        let q = w.quotes(format!("Intro\n```python\n{half}\n```\n").as_bytes());
        assert_eq!(q.len(), 1, "{q:?}");
        assert_eq!((q[0].quoted, q[0].total, q[0].lines), (4, 7, (3, 6)));
    }

    #[test]
    fn fewer_lines_than_a_window_or_a_line_between_them_is_no_quote() {
        let w = windows_of(&[CHECK]);
        let three: String = CHECK.lines().skip(2).take(3).collect::<Vec<_>>().join("\n");
        assert!(w.quotes(three.as_bytes()).is_empty());
        let mut broken: Vec<&str> = CHECK.lines().collect();
        broken.insert(4, "print('an unrelated line')");
        broken.insert(7, "print('another one')");
        assert!(w.quotes(broken.join("\n").as_bytes()).is_empty());
    }

    #[test]
    fn lines_without_a_letter_or_digit_between_quoted_lines_break_nothing() {
        let w = windows_of(&[CHECK]);
        let spaced: String = CHECK
            .lines()
            .map(|l| format!("{l}\n========\n  ) ) ) )\n"))
            .collect();
        let q = w.quotes(spaced.as_bytes());
        assert_eq!((q.len(), q[0].quoted), (1, 7), "{q:?}");
        // A line with a letter past its first 8 characters is meaningful: it breaks the run.
        let broken: String = CHECK
            .lines()
            .map(|l| format!("{l}\n======== x\n"))
            .collect();
        assert!(w.quotes(broken.as_bytes()).is_empty());
    }

    #[test]
    fn a_short_secret_is_found_only_whole() {
        let secret = "Write `hi` into hello.txt;\nthe check reads it back and compares.\n";
        let w = windows_of(&[secret]);
        let q = w.quotes(format!("# Changelog\n\n- 1.0\n{secret}- 1.1\n").as_bytes());
        assert_eq!(q.len(), 1);
        assert_eq!((q[0].quoted, q[0].total, q[0].lines), (2, 2, (4, 5)));
        assert!(w
            .quotes(b"Write `hi` into hello.txt;\nsomething else entirely\n")
            .is_empty());
        // Too short to be looked for at all.
        assert!(windows_of(&["fix it\nnow ok\n"]).is_empty());
    }

    #[test]
    fn shared_comments_and_imports_are_no_quote() {
        let header = "# Copyright 2024 Example Corp.\n# Licensed under the Apache License, Version 2.0\n# you may not use this file except in compliance\n# with the License. See LICENSE for details.\n";
        let check = format!("{header}import os\nimport sys\nimport json\nimport subprocess\n\ndef test_hidden():\n    assert os.path.exists('out.json')\n");
        let fixture = format!("{header}import os\nimport sys\nimport json\nimport subprocess\n\ndef main():\n    print('hello')\n");
        let w = windows_of(&[&check]);
        assert!(w.quotes(fixture.as_bytes()).is_empty());
        // The same header followed by the check's own lines is a quote.
        let q = w.quotes(format!("README\n\n{check}").as_bytes());
        assert_eq!(q.len(), 1);
        assert_eq!(q[0].quoted, q[0].total);
    }

    #[test]
    fn binary_content_is_not_searched() {
        let w = windows_of(&[CHECK]);
        let mut bytes = CHECK.as_bytes().to_vec();
        bytes.insert(0, 0);
        assert!(w.quotes(&bytes).is_empty());
        assert!(windows_of(&[std::str::from_utf8(&bytes).unwrap()]).is_empty());
    }
}
