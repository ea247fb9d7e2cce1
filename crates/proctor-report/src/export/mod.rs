//! Exports of a run in formats other tools read (docs/export.md): JUnit XML for CI systems
//! ([`junit`]) and ATIF trajectories for agent-trajectory tools ([`atif`]).
//!
//! Like the rest of this crate, every function here is pure: the caller reads the store and
//! writes the files.

pub mod atif;
pub mod junit;

use thiserror::Error;

/// Why an export could not be made.
#[derive(Debug, Error)]
pub enum ExportError {
    /// There is nothing to export.
    #[error("the run has no finished trials to export")]
    Empty,
    /// Writing the document failed (in memory: only a bug makes this happen).
    #[error("cannot write the document: {0}")]
    Write(#[from] std::io::Error),
    /// The document could not be serialized.
    #[error("cannot serialize the document: {0}")]
    Json(#[from] serde_json::Error),
}

/// `text` with every character XML 1.0 cannot carry (C0 controls other than tab, newline and
/// carriage return; U+FFFE and U+FFFF) written as a visible escape, `\u{1b}`: agent text is
/// hostile, and a consumer must still be able to parse the document. The XML writer escapes
/// the rest (`<`, `>`, `&`, quotes).
pub fn xml_safe(text: &str) -> std::borrow::Cow<'_, str> {
    fn allowed(c: char) -> bool {
        matches!(c, '\t' | '\n' | '\r')
            || ('\u{20}'..='\u{D7FF}').contains(&c)
            || ('\u{E000}'..='\u{FFFD}').contains(&c)
            || c >= '\u{10000}'
    }
    if text.chars().all(allowed) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if allowed(c) {
            out.push(c);
        } else {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn characters_xml_cannot_carry_are_escaped_visibly_and_the_rest_kept() {
        assert_eq!(xml_safe("plain <&> text\n\t"), "plain <&> text\n\t");
        assert_eq!(xml_safe("a\u{1b}[31mb\0c"), "a\\u{1b}[31mb\\u{0}c");
        assert_eq!(xml_safe("x\u{FFFE}y"), "x\\u{fffe}y");
        assert_eq!(xml_safe("ünï 😀"), "ünï 😀");
    }
}
