//! A small document model (headings, paragraphs, lists, tables) that the Markdown and Terminal
//! exporters render from the same content, so the two never disagree on a number.

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

/// A table of text cells.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Table {
    /// Column headers.
    pub headers: Vec<String>,
    /// Rows; each as long as `headers`.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these headers.
    pub fn new(headers: &[&str]) -> Table {
        Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }
}

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// Renders blocks as GitHub-flavoured Markdown.
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
            Block::Table(t) => {
                let line = |cells: &[String]| {
                    format!(
                        "| {} |\n",
                        cells
                            .iter()
                            .map(|c| md_cell(c))
                            .collect::<Vec<_>>()
                            .join(" | ")
                    )
                };
                out.push_str(&line(&t.headers));
                out.push_str(&format!("|{}\n", "---|".repeat(t.headers.len())));
                for r in &t.rows {
                    out.push_str(&line(r));
                }
            }
        }
        out.push('\n');
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

/// Renders blocks as plain text: aligned columns, no colour, no box-drawing characters.
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
                let headers: Vec<String> = t.headers.iter().map(strip).collect();
                let rows: Vec<Vec<String>> = t
                    .rows
                    .iter()
                    .map(|r| r.iter().map(strip).collect())
                    .collect();
                let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
                for r in &rows {
                    for (i, c) in r.iter().enumerate() {
                        if let Some(w) = widths.get_mut(i) {
                            *w = (*w).max(c.chars().count());
                        }
                    }
                }
                let line = |cells: &[String]| {
                    let s = cells
                        .iter()
                        .enumerate()
                        .map(|(i, c)| {
                            let w = widths.get(i).copied().unwrap_or(0);
                            format!("{c}{}", " ".repeat(w.saturating_sub(c.chars().count())))
                        })
                        .collect::<Vec<_>>()
                        .join("  ");
                    format!("{}\n", s.trim_end())
                };
                out.push_str(&line(&headers));
                out.push_str(&line(
                    &widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>(),
                ));
                for r in &rows {
                    out.push_str(&line(r));
                }
            }
        }
        out.push('\n');
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}
