//! The one text table proctor prints: the reports' tables (Markdown and plain text) and every
//! listing of the command line are rendered by it, so their columns line up the same way.

use super::escape::escape_line;

/// A table of text cells with a header row.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Table {
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
    pub fn row<I: IntoIterator<Item = S>, S: Into<String>>(&mut self, cells: I) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    /// Plain text: each column padded to its widest cell, columns two spaces apart, no trailing
    /// spaces, one line per row after the header line, each ending in a newline. No colour and no
    /// rule: this is how the command line prints its listings.
    pub fn text(&self) -> String {
        self.plain(false)
    }

    /// Like [`Table::text`], with a rule of dashes under the headers, as the terminal reports
    /// print their tables.
    pub fn ruled(&self) -> String {
        self.plain(true)
    }

    fn plain(&self, rule: bool) -> String {
        let escaped = self.escaped();
        let (headers, rows) = (&escaped.headers, &escaped.rows);
        let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
        for r in rows {
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
        let mut out = line(headers);
        if rule {
            out.push_str(&line(
                &widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>(),
            ));
        }
        for r in rows {
            out.push_str(&line(r));
        }
        out
    }

    /// The table with every cell as one line of safe text ([`escape_line`]): a cell is often
    /// the agent's (a name, a reason, an answer), and a control in it would reach the terminal.
    fn escaped(&self) -> Table {
        let esc = |c: &String| escape_line(c).into_owned();
        Table {
            headers: self.headers.iter().map(esc).collect(),
            rows: self
                .rows
                .iter()
                .map(|r| r.iter().map(esc).collect())
                .collect(),
        }
    }

    /// GitHub-flavoured Markdown: a header line, the separator, a line per row; `|` in a cell is
    /// escaped, a newline becomes a space and any other control character is shown escaped
    /// ([`escape_line`]).
    pub fn markdown(&self) -> String {
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
        let mut out = line(&self.headers);
        out.push_str(&format!("|{}\n", "---|".repeat(self.headers.len())));
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }
}

fn md_cell(s: &str) -> String {
    escape_line(&s.replace('|', "\\|").replace('\n', " ")).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pads_columns_to_the_widest_cell() {
        let mut t = Table::new(&["a", "bb"]);
        t.row(["long", "x"]);
        assert_eq!(t.text(), "a     bb\nlong  x\n");
        assert_eq!(t.ruled(), "a     bb\n----  --\nlong  x\n");
    }

    #[test]
    fn trailing_empty_cells_leave_no_trailing_spaces() {
        let mut t = Table::new(&["a", "b", "c"]);
        t.row(["x", "", ""]);
        t.row(["", "y", ""]);
        assert_eq!(t.text(), "a  b  c\nx\n   y\n");
    }

    #[test]
    fn widths_count_characters_not_bytes() {
        let mut t = Table::new(&["name", "n"]);
        t.row(["café…", "1"]);
        assert_eq!(t.text(), "name   n\ncafé…  1\n");
    }

    #[test]
    fn controls_in_cells_are_shown_escaped_and_columns_count_them() {
        let mut t = Table::new(&["name", "n"]);
        t.row(["a\x1b[31mb", "1"]);
        t.row(["x", "2\t3"]);
        assert_eq!(
            t.text(),
            "name          n\na\\u{1b}[31mb  1\nx             2\\u{9}3\n"
        );
        assert_eq!(
            t.markdown(),
            "| name | n |\n|---|---|\n| a\\u{1b}[31mb | 1 |\n| x | 2\\u{9}3 |\n"
        );
    }

    #[test]
    fn markdown_escapes_pipes_and_newlines() {
        let mut t = Table::new(&["a", "b"]);
        t.row(["x|y", "two\nlines"]);
        assert_eq!(
            t.markdown(),
            "| a | b |\n|---|---|\n| x\\|y | two lines |\n"
        );
    }
}
