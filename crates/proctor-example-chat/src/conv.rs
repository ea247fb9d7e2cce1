//! Conversation names: a channel (`launch`, `#launch`) or a person (`@dana`, `dana`).

/// A conversation as a person named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConvRef {
    /// `#name`: certainly a channel.
    Channel(String),
    /// `@handle`: certainly a person (the direct-message conversation with them).
    Person(String),
    /// A bare name: a channel if one has that name, else a person.
    Either(String),
}

impl ConvRef {
    /// The bare name, without `#` or `@`.
    pub fn name(&self) -> &str {
        match self {
            ConvRef::Channel(n) | ConvRef::Person(n) | ConvRef::Either(n) => n,
        }
    }

    /// How the name travels in a URL path segment (`#` percent-encoded).
    pub fn to_path_segment(&self) -> String {
        match self {
            ConvRef::Channel(n) => format!("%23{n}"),
            ConvRef::Person(n) => format!("@{n}"),
            ConvRef::Either(n) => n.clone(),
        }
    }
}

/// Explains how to name a conversation; used in every conversation error.
pub const CONV_HINT: &str = "name a channel (launch, or '#launch' in quotes: in a shell an \
unquoted # starts a comment) or a person (@dana or dana); `chat channels` and `chat people` list them";

/// Parse a conversation name. Names are ASCII letters, digits, `-`, `_` and `.`, case-insensitive.
pub fn parse_conversation(s: &str) -> Result<ConvRef, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err(format!("missing conversation: {CONV_HINT}"));
    }
    let (kind, name) = if let Some(n) = t.strip_prefix('#') {
        ('#', n)
    } else if let Some(n) = t.strip_prefix('@') {
        ('@', n)
    } else {
        (' ', t)
    };
    let valid = !name.is_empty()
        && name.len() <= 40
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    if !valid {
        return Err(format!("'{t}' is not a conversation name: {CONV_HINT}"));
    }
    let name = name.to_ascii_lowercase();
    Ok(match kind {
        '#' => ConvRef::Channel(name),
        '@' => ConvRef::Person(name),
        _ => ConvRef::Either(name),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        assert_eq!(
            parse_conversation("#launch"),
            Ok(ConvRef::Channel("launch".into()))
        );
        assert_eq!(
            parse_conversation("@Dana"),
            Ok(ConvRef::Person("dana".into()))
        );
        assert_eq!(
            parse_conversation(" launch "),
            Ok(ConvRef::Either("launch".into()))
        );
        assert!(parse_conversation("#").is_err());
        assert!(parse_conversation("a b").is_err());
        assert!(parse_conversation("../x").is_err());
        assert!(parse_conversation("").unwrap_err().contains("unquoted #"));
    }

    #[test]
    fn path_segments_round_trip_through_percent_decoding() {
        for s in ["#launch", "@dana", "dana"] {
            let c = parse_conversation(s).unwrap();
            let seg = crate::http::percent_decode(&c.to_path_segment());
            assert_eq!(parse_conversation(&seg), Ok(c));
        }
    }
}
