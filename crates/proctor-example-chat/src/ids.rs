//! Message and draft ids.
//!
//! Message ids are global and look like `m-00014`. `chat read` numbers messages by their position
//! inside one conversation (`#7`); a position alone cannot name a message, which is why `edit`
//! and `unsend` reject it with an explanation instead of guessing.

use std::fmt;

/// Where a reader finds message ids; repeated in every id error so an agent can recover.
pub const MESSAGE_ID_HINT: &str =
    "message ids look like m-00012; `chat read <conversation> --ids` shows them";

/// Why a string is not a message id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdError {
    /// Nothing was given (often: an unquoted `#7` that the shell treated as a comment).
    Missing,
    /// A position as printed by `chat read` (`#7` or `7`).
    Position(String),
    /// Anything else.
    Malformed(String),
}

impl IdError {
    /// The full explanation for `verb` (`edit`, `unsend`), accurate enough to recover from.
    pub fn explain(&self, verb: &str) -> String {
        match self {
            IdError::Missing => format!(
                "missing message id. Usage: chat {verb} <message-id>{}. ({MESSAGE_ID_HINT}. \
                 In a shell an unquoted # starts a comment, so `chat {verb} #7` passes no id at all.)",
                if verb == "edit" { " --text TEXT" } else { "" }
            ),
            IdError::Position(p) => format!(
                "'{p}' is a position, not a message id. The #N numbers `chat read` prints count \
                 messages within one conversation, so they cannot name a message on their own. \
                 `chat {verb}` needs the message id: {MESSAGE_ID_HINT}."
            ),
            IdError::Malformed(s) => format!("'{s}' is not a message id ({MESSAGE_ID_HINT})"),
        }
    }
}

impl fmt::Display for IdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.explain("edit"))
    }
}

/// The id of the `n`th message (1-based): `m-00014`.
pub fn message_id(n: u32) -> String {
    format!("m-{n:05}")
}

/// The number inside a canonical or lenient message id (`m-00014`, `m-14`, `M-14`).
pub fn message_number(id: &str) -> Option<u32> {
    let rest = id.strip_prefix("m-").or_else(|| id.strip_prefix("M-"))?;
    if rest.is_empty() || rest.len() > 9 || !rest.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    rest.parse().ok().filter(|n| *n > 0)
}

/// Parse what a person typed as a message id into the canonical form.
pub fn parse_message_id(s: &str) -> Result<String, IdError> {
    let t = s.trim();
    if t.is_empty() {
        return Err(IdError::Missing);
    }
    let digits = t.strip_prefix('#').unwrap_or(t);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(IdError::Position(t.to_string()));
    }
    match message_number(t) {
        Some(n) => Ok(message_id(n)),
        None => Err(IdError::Malformed(t.to_string())),
    }
}

/// The id of the `n`th draft (1-based): `d-001`.
pub fn draft_id(n: u32) -> String {
    format!("d-{n:03}")
}

/// Parse a draft id (`d-001`, `d-1`) into the canonical form.
pub fn parse_draft_id(s: &str) -> Result<String, String> {
    let t = s.trim();
    let rest = t.strip_prefix("d-").or_else(|| t.strip_prefix("D-"));
    match rest {
        Some(r) if !r.is_empty() && r.len() <= 9 && r.bytes().all(|b| b.is_ascii_digit()) => {
            match r.parse::<u32>() {
                Ok(n) if n > 0 => Ok(draft_id(n)),
                _ => Err(format!(
                    "'{t}' is not a draft id (draft ids look like d-001; `chat drafts` lists them)"
                )),
            }
        }
        _ if t.is_empty() => {
            Err("missing draft id (draft ids look like d-001; `chat drafts` lists them)".into())
        }
        _ => Err(format!(
            "'{t}' is not a draft id (draft ids look like d-001; `chat drafts` lists them)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_and_lenient_ids_parse() {
        assert_eq!(parse_message_id("m-00014"), Ok("m-00014".into()));
        assert_eq!(parse_message_id(" m-14 "), Ok("m-00014".into()));
        assert_eq!(parse_message_id("M-7"), Ok("m-00007".into()));
        assert_eq!(message_id(123456), "m-123456");
        assert_eq!(message_number("m-00014"), Some(14));
        assert_eq!(message_number("m-0"), None);
    }

    #[test]
    fn positions_are_rejected_with_the_way_out() {
        for p in ["7", "#7"] {
            let e = parse_message_id(p).unwrap_err();
            assert_eq!(e, IdError::Position(p.into()));
            let text = e.explain("edit");
            assert!(text.contains("position"), "{text}");
            assert!(text.contains("--ids"), "{text}");
            assert!(text.contains("m-00012"), "{text}");
        }
    }

    #[test]
    fn missing_id_mentions_the_shell_comment() {
        let text = parse_message_id("").unwrap_err().explain("edit");
        assert!(text.contains("unquoted #"), "{text}");
        assert!(text.contains("--text"), "{text}");
        assert!(!IdError::Missing.explain("unsend").contains("--text"));
    }

    #[test]
    fn garbage_is_malformed() {
        assert!(matches!(
            parse_message_id("abc"),
            Err(IdError::Malformed(_))
        ));
        assert!(matches!(parse_message_id("m-"), Err(IdError::Malformed(_))));
        assert!(matches!(
            parse_message_id("m-12x"),
            Err(IdError::Malformed(_))
        ));
    }

    #[test]
    fn draft_ids() {
        assert_eq!(parse_draft_id("d-1"), Ok("d-001".into()));
        assert_eq!(parse_draft_id("d-001"), Ok("d-001".into()));
        assert!(parse_draft_id("d-0").is_err());
        assert!(parse_draft_id("1").unwrap_err().contains("d-001"));
        assert!(parse_draft_id("").unwrap_err().starts_with("missing"));
    }
}
