//! Small text helpers: TOML and shell quoting, base64, absolute-path rewriting.

use regex::Regex;

/// `s` as a TOML string. Multi-line text becomes a `'''` literal block when it can be one
/// (so prompts stay readable), anything else an escaped basic string.
pub(crate) fn toml_string(s: &str) -> String {
    let literal_ok = !s.contains("'''")
        && !s.ends_with('\'')
        && s.chars().all(|c| c == '\n' || c == '\t' || !c.is_control());
    if s.contains('\n') && literal_ok && !s.contains('\r') {
        return format!("'''\n{s}'''");
    }
    basic_string(s)
}

/// `s` as a one-line TOML basic string, every special character escaped.
pub(crate) fn basic_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `s` as a TOML key: bare when it may be, quoted otherwise.
pub(crate) fn toml_key(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        s.to_string()
    } else {
        basic_string(s)
    }
}

/// `s` quoted for a POSIX shell (proctor's one quoting rule, [`proctor_suite::shell::quote`]).
pub(crate) use proctor_suite::shell::quote as shell_quote;

/// Standard base64 with padding, in lines of 76 characters.
pub(crate) fn base64_lines(bytes: &[u8]) -> String {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
    // Base64 is ASCII: every 76 bytes are 76 characters.
    encoded
        .as_bytes()
        .chunks(76)
        .map(|line| String::from_utf8_lossy(line))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Replaces the absolute path `from` (a whole path component sequence such as `/solution`, not
/// part of a longer path like `/app/solution` or `/solutions`) by `to` everywhere in `text`.
pub(crate) fn rewrite_abs_path(text: &str, from: &str, to: &str) -> String {
    let pattern = format!(r"(^|[^A-Za-z0-9_.~/$-]){}\b", regex::escape(from));
    match Regex::new(&pattern) {
        Ok(re) => re
            .replace_all(text, |c: &regex::Captures<'_>| {
                format!("{}{to}", c.get(1).map_or("", |m| m.as_str()))
            })
            .into_owned(),
        Err(_) => text.to_string(),
    }
}

/// A heredoc terminator that appears as no line of `text`.
pub(crate) fn heredoc_marker(text: &str) -> String {
    let mut marker = "PROCTOR_EOF".to_string();
    let mut n = 1;
    while text.lines().any(|l| l == marker) {
        n += 1;
        marker = format!("PROCTOR_EOF_{n}");
    }
    marker
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_strings_round_trip() {
        for s in [
            "plain",
            "two\nlines\n",
            "ends with quote'",
            "has ''' inside\n",
            "tab\tand \"quotes\" and \\ backslash",
            "control \u{1} char\n",
            "crlf\r\nline",
        ] {
            let doc = format!("v = {}\n", toml_string(s));
            let parsed: toml::Table = toml::from_str(&doc).expect(&doc);
            assert_eq!(parsed["v"].as_str(), Some(s), "{doc}");
        }
        let doc = format!("{} = 1\n", toml_key("a b"));
        let parsed: toml::Table = toml::from_str(&doc).expect(&doc);
        assert!(parsed.contains_key("a b"));
    }

    #[test]
    fn base64_matches_known_values() {
        assert_eq!(base64_lines(b""), "");
        assert_eq!(base64_lines(b"f"), "Zg==");
        assert_eq!(base64_lines(b"fo"), "Zm8=");
        assert_eq!(base64_lines(b"foo"), "Zm9v");
        assert_eq!(base64_lines(b"foobar"), "Zm9vYmFy");
        let long = base64_lines(&[0u8; 120]);
        assert!(long.lines().all(|l| l.len() <= 76));
        assert_eq!(long.replace('\n', "").len(), 160);
    }

    #[test]
    fn rewrite_touches_whole_absolute_paths_only() {
        let text = "bash /solution/a.sh; cd /solution\nls /app/solution /solutions x/solution \"/solution\"";
        assert_eq!(
            rewrite_abs_path(text, "/solution", "/tmp/s"),
            "bash /tmp/s/a.sh; cd /tmp/s\nls /app/solution /solutions x/solution \"/tmp/s\""
        );
    }

    #[test]
    fn shell_quote_quotes_what_needs_it() {
        assert_eq!(shell_quote("a/b.sh"), "a/b.sh");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote("a b"), "'a b'");
    }

    #[test]
    fn heredoc_marker_avoids_lines_of_the_text() {
        assert_eq!(heredoc_marker("x\n"), "PROCTOR_EOF");
        assert_eq!(heredoc_marker("PROCTOR_EOF\n"), "PROCTOR_EOF_2");
    }
}
