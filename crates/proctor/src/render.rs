//! How errors and diagnostics are shown: readable without colour, `NO_COLOR` respected, and
//! deterministic when stderr is not a terminal (as in tests).

use std::io::IsTerminal;

use miette::{GraphicalReportHandler, GraphicalTheme};
use proctor_suite::Problem;

use crate::exit::Error;

/// Whether stderr may use colour.
pub fn color_enabled() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stderr().is_terminal()
}

fn handler() -> GraphicalReportHandler {
    let theme = if color_enabled() {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    GraphicalReportHandler::new_themed(theme)
        .with_width(100)
        .with_links(false)
}

/// Renders one problem as a diagnostic with its source line.
pub fn problem(p: &Problem) -> String {
    diagnostic(p)
}

/// Renders any diagnostic with its source line (a plain line when it cannot be drawn).
pub fn diagnostic(d: &dyn miette::Diagnostic) -> String {
    let mut out = String::new();
    if handler().render_report(&mut out, d).is_err() {
        out = format!("{d}\n");
    }
    out
}

/// Prints an error and its causes to stderr, control characters escaped (a message may quote a
/// stored trial's text). A message of several lines (a list of what failed) is printed a line
/// at a time, each further line indented under the first.
pub fn error(err: &Error) {
    match err {
        Error::InvalidSuite { suite, problems } => {
            for p in problems {
                eprint!("{}", problem(p));
            }
            errln!(
                "error: {suite} is not a valid suite: {} problem{} found",
                problems.len(),
                if problems.len() == 1 { "" } else { "s" }
            );
        }
        Error::Usage { message, hint } => {
            lines_of("error: ", message);
            if let Some(h) = hint {
                lines_of("  help: ", h);
            }
        }
        Error::Stopped { message, hint } => {
            lines_of("error: ", message);
            lines_of("  help: ", hint);
        }
        Error::Other(e) => {
            lines_of("error: ", &e.to_string());
            for cause in e.chain().skip(1) {
                lines_of("  caused by: ", &cause.to_string());
            }
            if let Some(h) = err.hint() {
                lines_of("  help: ", &h);
            }
        }
    }
}

/// `text` on stderr after `label`, its further lines indented to the label's width: each line
/// printed by [`errln!`], so its controls are escaped.
fn lines_of(label: &str, text: &str) {
    let indent = " ".repeat(label.chars().count());
    for (i, line) in text.lines().enumerate() {
        errln!("{}{line}", if i == 0 { label } else { &indent });
    }
    if text.is_empty() {
        errln!("{label}");
    }
}
