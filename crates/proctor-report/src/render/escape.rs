//! Agent-controlled text made safe for a terminal (and for Markdown read in one): every control
//! character is shown visibly instead of being sent to the terminal, which would obey it (an
//! OSC 52 sequence writes the user's clipboard, `ESC [2J` clears the screen, `CR` overwrites a
//! line).
//!
//! The visible form is Rust's `\u{…}` notation with the code point in lower-case hex: ESC is
//! shown as `\u{1b}`, BEL as `\u{7}`, DEL as `\u{7f}`, the C1 control CSI as `\u{9b}`. The
//! controls are C0 (U+0000–U+001F), DEL (U+007F) and C1 (U+0080–U+009F); every other character,
//! ordinary Unicode text included, is left as it is. The exact text stays in the JSON outputs
//! and the store.

use std::borrow::Cow;

/// Whether `c` is a control a terminal may act on: C0, DEL or C1.
fn is_control(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}')
}

fn escape_where(s: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(|c| is_control(c) && !keep(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_control(c) && !keep(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `s` as one line for a terminal: every control character, newline and tab included, in its
/// visible `\u{…}` form. For table cells, names, argv and other one-line values.
pub fn escape_line(s: &str) -> Cow<'_, str> {
    escape_where(s, |_| false)
}

/// `s` as a block of lines for a terminal: like [`escape_line`], but newlines and tabs are
/// kept (they move the cursor only forward, within what is shown). For answers, outputs and
/// whole rendered documents.
pub fn escape_text(s: &str) -> Cow<'_, str> {
    escape_where(s, |c| c == '\n' || c == '\t')
}

/// `s` as one line of a block of text: like [`escape_text`], but a newline is shown in its
/// visible form too (only tabs are kept). For each line of a list of lines and each line proctor
/// prints, where a part may be the agent's (a diff's header naming a file, a reason quoting
/// one): a newline the agent put in a name can never start a line of its own, so it can never
/// pass for a line of proctor's.
pub fn escape_text_line(s: &str) -> Cow<'_, str> {
    escape_where(s, |c| c == '\t')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_c0_control_del_and_c1_control_is_escaped() {
        for cp in (0u32..=0x1f).chain(0x7f..=0x9f) {
            let c = char::from_u32(cp).expect("a code point");
            let s = format!("a{c}b");
            let want = format!("a\\u{{{cp:x}}}b");
            assert_eq!(escape_line(&s), want, "U+{cp:04X}");
            if c != '\n' && c != '\t' {
                assert_eq!(escape_text(&s), want, "U+{cp:04X}");
            }
        }
    }

    #[test]
    fn a_block_keeps_its_newlines_and_tabs() {
        assert_eq!(escape_text("one\n\ttwo\r\n"), "one\n\ttwo\\u{d}\n");
        assert_eq!(escape_line("one\n\ttwo"), "one\\u{a}\\u{9}two");
    }

    #[test]
    fn a_line_of_text_keeps_its_tabs_and_shows_its_newlines() {
        assert_eq!(escape_text_line("a\tb\nc\r"), "a\tb\\u{a}c\\u{d}");
        assert!(matches!(escape_text_line("a\tb"), Cow::Borrowed(_)));
    }

    #[test]
    fn terminal_sequences_lose_their_escape() {
        let s = "hello \x1b]52;c;aGk=\x07 \x1b[2J";
        let e = escape_text(s);
        assert_eq!(e, "hello \\u{1b}]52;c;aGk=\\u{7} \\u{1b}[2J");
        assert!(!e.contains('\x1b') && !e.contains('\x07'));
        assert_eq!(escape_line("name\x1b[31mred"), "name\\u{1b}[31mred");
    }

    #[test]
    fn ordinary_text_is_untouched_and_borrowed() {
        for s in [
            "",
            "plain ascii ~!@#$%^&*()_+{}|:\"<>?`-=[]\\;',./",
            "café naïve Ωμέγα 日本語 emoji 🦀 \u{a0}nbsp \u{a1}¡ \u{ff}ÿ \u{2028}",
            "\\u{1b} written out by hand",
        ] {
            assert!(matches!(escape_line(s), Cow::Borrowed(_)), "{s:?}");
            assert_eq!(escape_line(s), s);
            assert_eq!(escape_text(s), s);
        }
    }
}
