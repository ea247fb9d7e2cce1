//! A small document model (headings, paragraphs, lists, tables) that the Markdown and Terminal
//! exporters render from the same content, so the two never disagree on a number.

use super::escape::escape_text;
pub(crate) use super::table::Table;

/// A block of a document.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Block {
    /// A heading; level 1 is the title.
    Heading(u8, String),
    /// A paragraph.
    Para(String),
    /// A bulleted list.
    List(Vec<String>),
    /// A table.
    Table(Table),
}

/// Renders blocks as GitHub-flavoured Markdown, control characters shown escaped.
pub(crate) fn markdown(blocks: &[Block]) -> String {
    let mut out = String::new();
    for b in blocks {
        match b {
            Block::Heading(level, text) => {
                out.push_str(&"#".repeat(usize::from(*level)));
                out.push(' ');
                out.push_str(text);
                out.push('\n');
            }
            Block::Para(text) => {
                out.push_str(text);
                out.push('\n');
            }
            Block::List(items) => {
                for i in items {
                    out.push_str("- ");
                    out.push_str(i);
                    out.push('\n');
                }
            }
            Block::Table(t) => out.push_str(&t.markdown()),
        }
        out.push('\n');
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    escape_text(&out).into_owned()
}

/// Renders blocks as plain text: aligned columns, no colour, no box-drawing characters, control
/// characters shown escaped.
pub(crate) fn plain(blocks: &[Block]) -> String {
    let mut out = String::new();
    for b in blocks {
        match b {
            Block::Heading(level, text) => {
                let text = text.replace('`', "");
                let rule = if *level == 1 { "=" } else { "-" };
                out.push_str(&text);
                out.push('\n');
                out.push_str(&rule.repeat(text.chars().count()));
                out.push('\n');
            }
            Block::Para(text) => {
                out.push_str(&text.replace('`', ""));
                out.push('\n');
            }
            Block::List(items) => {
                for i in items {
                    out.push_str("  * ");
                    out.push_str(&i.replace('`', ""));
                    out.push('\n');
                }
            }
            Block::Table(t) => {
                let strip = |s: &String| s.replace('`', "");
                let stripped = Table {
                    headers: t.headers.iter().map(strip).collect(),
                    rows: t
                        .rows
                        .iter()
                        .map(|r| r.iter().map(strip).collect())
                        .collect(),
                };
                out.push_str(&stripped.ruled());
            }
        }
        out.push('\n');
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    escape_text(&out).into_owned()
}
