//! The workspace diff on a trial's page: one block per changed file (what happened to it and its
//! sizes), its lines marked added, removed or context, text files highlighted by language, binary
//! files by their sizes only. It reads the lines `proctor show` prints (a file's header indented
//! by two spaces, its diff by four).

use maud::{html, Markup, PreEscaped};

use crate::highlight;

/// One changed file as the diff's lines give it.
struct File<'a> {
    /// `added`, `changed`, `deleted`, `mode`, or the whole header when it cannot be read.
    kind: &'a str,
    /// The file's path.
    path: &'a str,
    /// What the header says in parentheses (its sizes), if anything.
    about: &'a str,
    /// The lines of its diff, without their indent.
    lines: Vec<&'a str>,
}

/// A header line (`added    PATH  (12 bytes)`) read as kind, path and what is in parentheses.
fn header(h: &str) -> (&str, &str, &str) {
    let Some((kind, rest)) = h.split_once(' ') else {
        return (h, "", "");
    };
    let rest = rest.trim_start();
    match rest.rsplit_once("  (") {
        Some((path, about)) => (kind, path, about.strip_suffix(')').unwrap_or(about)),
        None => (kind, rest, ""),
    }
}

/// `n` bytes for a person: `512 B`, `1.5 KiB`, `3.2 MiB`.
pub fn size(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut x = n as f64 / 1024.0;
    let mut unit = 0;
    while x >= 1024.0 && unit + 1 < UNITS.len() {
        x /= 1024.0;
        unit += 1;
    }
    format!("{x:.1} {}", UNITS[unit])
}

/// The header's parenthesised note with every `N bytes` (and `A -> B bytes`) written for a
/// person, the exact count kept in a title.
fn sizes(about: &str) -> Markup {
    let words: Vec<&str> = about.split(' ').collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let n = words[i].parse::<u64>().ok();
        match (n, words.get(i + 1), words.get(i + 2), words.get(i + 3)) {
            (Some(a), Some(&"->"), Some(b), Some(&"bytes")) if b.parse::<u64>().is_ok() => {
                let b = b.parse::<u64>().unwrap_or(0);
                out.push(html! {
                    span title={ (a) " bytes → " (b) " bytes" } { (size(a)) " → " (size(b)) }
                });
                i += 4;
            }
            (Some(a), Some(&"bytes"), _, _) => {
                out.push(html! { span title={ (a) " bytes" } { (size(a)) } });
                i += 2;
            }
            _ => {
                out.push(html! { (words[i]) });
                i += 1;
            }
        }
    }
    html! {
        @for (i, w) in out.into_iter().enumerate() {
            @if i > 0 { " " }
            (w)
        }
    }
}

/// The diff's lines as files, and the notes that follow them.
fn files(lines: &[String]) -> (Vec<File<'_>>, Vec<&str>) {
    let mut files: Vec<File<'_>> = Vec::new();
    let mut notes = Vec::new();
    for l in lines {
        if let Some(body) = l.strip_prefix("    ") {
            if let Some(f) = files.last_mut() {
                f.lines.push(body);
                continue;
            }
        }
        let h = l.trim_start();
        if h.starts_with('…') || h.starts_with("note:") {
            notes.push(h);
            continue;
        }
        let (kind, path, about) = header(h);
        files.push(File {
            kind,
            path,
            about,
            lines: Vec::new(),
        });
    }
    (files, notes)
}

/// The diff section.
pub fn section(lines: &[String]) -> Markup {
    if lines.is_empty() {
        return html! { p { "No file changed." } };
    }
    let (files, notes) = files(lines);
    html! {
        @for f in &files {
            section class="diff-file" {
                p class="file" {
                    b { (f.kind) } " " code { (f.path) } " "
                    @if !f.about.is_empty() { "(" (sizes(f.about)) ")" }
                }
                @if f.lines == ["(binary)"] {
                    p class="note" { "A binary file: its sizes are above; no diff is shown." }
                } @else if !f.lines.is_empty() {
                    (body(f))
                }
            }
        }
        @for n in notes {
            p class="note" { (n) }
        }
    }
}

/// A binary file's text diff through the suite's `[diff]` converter (the trial record's
/// `text_diffs`): its path, the converter, and the diff's lines marked as a text file's are;
/// or why the file could not be converted.
pub fn text_section(
    path: &str,
    converter: &str,
    diff: Option<&str>,
    error: Option<&str>,
) -> Markup {
    html! {
        section class="diff-file text-diff" {
            p class="file" { b { "as text" } " " code { (path) } " (" code { (converter) } ")" }
            @match (error, diff) {
                (Some(e), _) => p class="note" { "Not converted: " (e) },
                (None, Some(d)) => (body(&File {
                    kind: "as text",
                    path,
                    about: "",
                    lines: d
                        .lines()
                        .filter(|l| !l.starts_with("--- ") && !l.starts_with("+++ "))
                        .collect(),
                })),
                (None, None) => {},
            }
        }
    }
}

/// A file's diff lines, marked and highlighted.
fn body(f: &File<'_>) -> Markup {
    let lang = highlight::lang_of(f.path);
    let mut state = highlight::State::default();
    let lines: Vec<(&str, &str, Markup)> = f
        .lines
        .iter()
        .map(|l| {
            let (class, mark, code) = match l.chars().next() {
                Some('+') => ("add", "+", &l[1..]),
                Some('-') => ("del", "-", &l[1..]),
                Some(' ') => ("ctx", " ", &l[1..]),
                Some('@') => ("hunk", "", *l),
                _ => ("note", "", *l),
            };
            let code = match (&lang, class) {
                // The highlighter's spans: it escapes every token of the line it classes.
                (Some(lang), "add" | "del" | "ctx") => {
                    PreEscaped(highlight::line(lang, code, &mut state))
                }
                _ => html! { (code) },
            };
            (class, mark, code)
        })
        .collect();
    html! {
        pre class="diff" {
            @for (class, mark, code) in lines {
                span class=(class) { (mark) (code) } "\n"
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_split_sized_and_highlighted() {
        let lines: Vec<String> = [
            "  changed  src/a.py  (10 -> 2048 bytes)",
            "    @@ -1 +1 @@",
            "    -x = 1",
            "    +x = 'two'  # now",
            "  added    logo.png  (3145728 bytes)",
            "    (binary)",
            "  note: the suite changed since the run",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let html = section(&lines).into_string();
        assert!(html.contains("<b>changed</b> <code>src/a.py</code> (<span title=\"10 bytes → 2048 bytes\">10 B → 2.0 KiB</span>)"), "{html}");
        assert!(html.contains("<span class=\"add\">+x = <span class=\"hl-s\">&#39;two&#39;</span>  <span class=\"hl-c\"># now</span></span>"), "{html}");
        assert!(
            html.contains("<span class=\"hunk\">@@ -1 +1 @@</span>"),
            "{html}"
        );
        assert!(
            html.contains("<code>logo.png</code> (<span title=\"3145728 bytes\">3.0 MiB</span>)"),
            "{html}"
        );
        assert!(html.contains("A binary file"), "{html}");
        assert!(
            html.contains("<p class=\"note\">note: the suite changed since the run</p>"),
            "{html}"
        );
    }
}
