//! Printing text that may hold what an agent wrote (answers, file names, argv, outputs,
//! reasons) to the terminal: [`outln!`] and [`out!`] for stdout, [`errln!`] for stderr, each
//! like its `std` counterpart, with every control character but newline and tab shown in its
//! visible `\u{…}` form ([`proctor_report::escape_text`]), so no escape sequence of the agent's
//! reaches the person's terminal. JSON output is printed with `println!`: serde escapes controls.

/// Writes `text` to stdout, its controls escaped.
pub fn write_out(text: &str) {
    print!("{}", proctor_report::escape_text(text));
}

/// Writes `text` to stderr, its controls escaped.
pub fn write_err(text: &str) {
    eprint!("{}", proctor_report::escape_text(text));
}

/// `println!` for text that may hold the agent's: controls escaped.
macro_rules! outln {
    () => {
        $crate::out::write_out("\n")
    };
    ($($arg:tt)*) => {
        $crate::out::write_out(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` for text that may hold the agent's: controls escaped.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::write_out(&format!($($arg)*))
    };
}

/// `eprintln!` for text that may hold the agent's: controls escaped.
macro_rules! errln {
    () => {
        $crate::out::write_err("\n")
    };
    ($($arg:tt)*) => {
        $crate::out::write_err(&format!("{}\n", format_args!($($arg)*)))
    };
}
