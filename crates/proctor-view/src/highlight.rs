//! A small syntax highlighter for the diff's text files: comments, strings, numbers and
//! keywords of the common languages, chosen by the file's extension; anything else is shown as
//! plain text. Each token is a `<span>` with a class (`hl-c`, `hl-s`, `hl-n`, `hl-k`), so the
//! page's styles colour it, and text stays readable without them.

use crate::html::esc;

/// How a language writes comments and strings, and its keywords.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lang {
    /// What starts a comment to the end of the line.
    line_comment: &'static [&'static str],
    /// What opens and closes a block comment.
    block_comment: Option<(&'static str, &'static str)>,
    /// The characters that quote a string.
    quotes: &'static [char],
    /// The keywords.
    keywords: &'static [&'static str],
}

const C_LIKE: &[&str] = &[
    "as",
    "async",
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "crate",
    "default",
    "defer",
    "do",
    "else",
    "enum",
    "export",
    "extends",
    "extern",
    "false",
    "final",
    "finally",
    "fn",
    "for",
    "func",
    "function",
    "go",
    "if",
    "impl",
    "implements",
    "import",
    "in",
    "interface",
    "let",
    "loop",
    "match",
    "mod",
    "module",
    "mut",
    "new",
    "nil",
    "null",
    "package",
    "private",
    "protected",
    "pub",
    "public",
    "return",
    "self",
    "static",
    "struct",
    "super",
    "switch",
    "this",
    "throw",
    "throws",
    "trait",
    "true",
    "try",
    "type",
    "typeof",
    "use",
    "var",
    "void",
    "where",
    "while",
    "yield",
];
const SCRIPT: &[&str] = &[
    "and", "as", "assert", "async", "await", "break", "case", "class", "continue", "def", "del",
    "do", "done", "elif", "else", "end", "esac", "except", "export", "False", "false", "fi",
    "finally", "for", "from", "function", "global", "if", "import", "in", "is", "lambda", "local",
    "module", "None", "nil", "not", "or", "pass", "raise", "require", "return", "then", "True",
    "true", "try", "unless", "until", "while", "with", "yield",
];
const SQL: &[&str] = &[
    "and", "as", "by", "create", "delete", "from", "group", "insert", "into", "join", "left",
    "limit", "not", "null", "on", "or", "order", "select", "set", "table", "update", "values",
    "where",
];
const DATA: &[&str] = &["true", "false", "null"];

/// The language of a file, by its name's extension; `None`: shown as plain text.
pub fn lang_of(path: &str) -> Option<Lang> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    let c = |keywords| Lang {
        line_comment: &["//"],
        block_comment: Some(("/*", "*/")),
        quotes: &['"', '\'', '`'],
        keywords,
    };
    let hash = |keywords| Lang {
        line_comment: &["#"],
        block_comment: None,
        quotes: &['"', '\''],
        keywords,
    };
    match (name, ext.as_deref()) {
        ("Makefile" | "Dockerfile" | "Containerfile", _) => Some(hash(SCRIPT)),
        (
            _,
            Some(
                "rs" | "c" | "h" | "cc" | "cpp" | "hpp" | "go" | "java" | "js" | "mjs" | "cjs"
                | "ts" | "tsx" | "jsx" | "cs" | "kt" | "swift" | "scala" | "php" | "css",
            ),
        ) => Some(c(C_LIKE)),
        (_, Some("py" | "sh" | "bash" | "zsh" | "rb" | "pl" | "r" | "mk")) => Some(hash(SCRIPT)),
        (_, Some("toml" | "yaml" | "yml" | "ini" | "cfg" | "conf" | "env")) => Some(hash(DATA)),
        (_, Some("json" | "jsonl")) => Some(Lang {
            line_comment: &[],
            block_comment: None,
            quotes: &['"'],
            keywords: DATA,
        }),
        (_, Some("sql")) => Some(Lang {
            line_comment: &["--"],
            block_comment: Some(("/*", "*/")),
            quotes: &['\''],
            keywords: SQL,
        }),
        _ => None,
    }
}

/// Highlighting state carried from one line to the next: inside a block comment or not.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct State {
    in_block: bool,
}

/// One line of `lang` as HTML, escaped, its tokens in classed spans; `state` carries a block
/// comment over to the next line.
pub fn line(lang: &Lang, text: &str, state: &mut State) -> String {
    let mut out = String::with_capacity(text.len() + 32);
    let mut rest = text;
    while !rest.is_empty() {
        if state.in_block {
            let close = lang.block_comment.map_or("", |b| b.1);
            match rest.find(close).filter(|_| !close.is_empty()) {
                Some(i) => {
                    span(&mut out, "hl-c", &rest[..i + close.len()]);
                    rest = &rest[i + close.len()..];
                    state.in_block = false;
                }
                None => {
                    span(&mut out, "hl-c", rest);
                    rest = "";
                }
            }
            continue;
        }
        if lang.line_comment.iter().any(|c| rest.starts_with(c)) {
            span(&mut out, "hl-c", rest);
            break;
        }
        if let Some((open, _)) = lang.block_comment.filter(|(o, _)| rest.starts_with(o)) {
            span(&mut out, "hl-c", open);
            rest = &rest[open.len()..];
            state.in_block = true;
            continue;
        }
        let Some(c) = rest.chars().next() else { break };
        let taken = if lang.quotes.contains(&c) {
            let end = string_end(rest, c);
            span(&mut out, "hl-s", &rest[..end]);
            end
        } else if c.is_ascii_digit() {
            let end = word_end(rest, true);
            span(&mut out, "hl-n", &rest[..end]);
            end
        } else if c.is_alphabetic() || c == '_' {
            let end = word_end(rest, false);
            let word = &rest[..end];
            if lang.keywords.contains(&word) {
                span(&mut out, "hl-k", word);
            } else {
                out.push_str(&esc(word));
            }
            end
        } else {
            out.push_str(&esc(&rest[..c.len_utf8()]));
            c.len_utf8()
        };
        rest = &rest[taken..];
    }
    out
}

fn span(out: &mut String, class: &str, text: &str) {
    out.push_str("<span class=\"");
    out.push_str(class);
    out.push_str("\">");
    out.push_str(&esc(text));
    out.push_str("</span>");
}

/// Where a string opened by `quote` at the start of `s` ends (after its closing quote, or at the
/// end of the line); a backslash escapes the next character.
fn string_end(s: &str, quote: char) -> usize {
    let mut escaped = false;
    for (i, c) in s.char_indices().skip(1) {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == quote {
            return i + c.len_utf8();
        }
    }
    s.len()
}

/// Where the word (letters, digits and `_`; and `.` in a `number`) at the start of `s` ends.
fn word_end(s: &str, number: bool) -> usize {
    s.char_indices()
        .find(|&(_, c)| !(c.is_alphanumeric() || c == '_' || (number && c == '.')))
        .map_or(s.len(), |(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_classed_and_text_is_escaped() {
        let rust = lang_of("src/main.rs").unwrap();
        let mut st = State::default();
        assert_eq!(
            line(&rust, "let x = \"a<b\"; // 1 < 2", &mut st),
            "<span class=\"hl-k\">let</span> x = <span class=\"hl-s\">&quot;a&lt;b&quot;</span>; <span class=\"hl-c\">// 1 &lt; 2</span>"
        );
        assert_eq!(
            line(&rust, "f(42) /* open", &mut st),
            "f(<span class=\"hl-n\">42</span>) <span class=\"hl-c\">/*</span><span class=\"hl-c\"> open</span>"
        );
        assert_eq!(
            line(&rust, "still */ fn", &mut st),
            "<span class=\"hl-c\">still */</span> <span class=\"hl-k\">fn</span>"
        );
        let py = lang_of("check_spec.py").unwrap();
        assert_eq!(
            line(&py, "def f(): return 'it\\'s'  # done", &mut State::default()),
            "<span class=\"hl-k\">def</span> f(): <span class=\"hl-k\">return</span> <span class=\"hl-s\">&#39;it\\&#39;s&#39;</span>  <span class=\"hl-c\"># done</span>"
        );
        assert!(lang_of("notes.txt").is_none());
        assert!(lang_of("Makefile").is_some());
    }
}
