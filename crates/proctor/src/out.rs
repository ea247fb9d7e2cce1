//! Printing text that may hold what an agent wrote (answers, file names, argv, outputs,
//! reasons) to the terminal.
//!
//! - [`outln!`] and [`errln!`] print one line of proctor's, like `println!`/`eprintln!`: the
//!   newlines the line starts with (blank lines before a section) are kept, and after them every
//!   control character but tab is shown in its visible `\u{…}` form
//!   ([`proctor_report::escape_text_line`]), a newline included. So no escape sequence of the
//!   agent's reaches the person's terminal, and nothing the agent named (a file called
//!   `x\n  changed  notes.txt`) can start a line that passes for one of proctor's.
//! - [`out_block!`] and [`err_block!`] print a block of several lines, built by code that
//!   escaped each agent's part as a line itself (a table, the answer indented): newlines and
//!   tabs are kept, every other control is escaped ([`proctor_report::escape_text`]).
//!
//! JSON output is printed with `println!`: serde escapes controls.

/// `text` as printed by [`outln!`]: its leading newlines kept, the rest one line.
fn line_of(text: &str) -> (&str, std::borrow::Cow<'_, str>) {
    let rest = text.trim_start_matches('\n');
    let (blank, _) = text.split_at(text.len() - rest.len());
    (blank, proctor_report::escape_text_line(rest))
}

/// Writes `text` and a newline to stdout as one line (see [`outln!`]).
pub fn write_out_line(text: &str) {
    let (blank, line) = line_of(text);
    println!("{blank}{line}");
}

/// Writes `text` and a newline to stderr as one line (see [`errln!`]).
pub fn write_err_line(text: &str) {
    let (blank, line) = line_of(text);
    eprintln!("{blank}{line}");
}

/// Writes the block `text` to stdout, its controls but newline and tab escaped.
pub fn write_out_block(text: &str) {
    print!("{}", proctor_report::escape_text(text));
}

/// Writes the block `text` to stderr, its controls but newline and tab escaped.
pub fn write_err_block(text: &str) {
    eprint!("{}", proctor_report::escape_text(text));
}

/// `println!` for one line that may hold the agent's text: every control in it escaped,
/// newlines included (but those it starts with).
macro_rules! outln {
    () => {
        $crate::out::write_out_line("")
    };
    ($($arg:tt)*) => {
        $crate::out::write_out_line(&format!($($arg)*))
    };
}

/// `eprintln!` for one line that may hold the agent's text: every control in it escaped,
/// newlines included (but those it starts with).
macro_rules! errln {
    () => {
        $crate::out::write_err_line("")
    };
    ($($arg:tt)*) => {
        $crate::out::write_err_line(&format!($($arg)*))
    };
}

/// `print!` for a block of lines whose agent's parts were escaped line by line where it was
/// built: its newlines and tabs kept, every other control escaped.
macro_rules! out_block {
    ($($arg:tt)*) => {
        $crate::out::write_out_block(&format!($($arg)*))
    };
}

/// `eprint!` for a block of lines whose agent's parts were escaped line by line where it was
/// built: its newlines and tabs kept, every other control escaped.
macro_rules! err_block {
    ($($arg:tt)*) => {
        $crate::out::write_err_block(&format!($($arg)*))
    };
}

#[cfg(test)]
mod tests {
    use super::line_of;

    #[test]
    fn a_line_keeps_the_blank_lines_it_starts_with_and_nothing_else_of_its_newlines() {
        let (blank, line) = line_of("\n\ndiff of x\n  changed  notes.txt\t(1 byte)");
        assert_eq!(blank, "\n\n");
        assert_eq!(line, "diff of x\\u{a}  changed  notes.txt\t(1 byte)");
        assert_eq!(line_of(""), ("", "".into()));
        assert_eq!(line_of("\n"), ("\n", "".into()));
    }
}
