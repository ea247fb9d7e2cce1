//! Ids proctor accepts: letters, digits, `-` and `_`, at most 64 characters.

use std::collections::BTreeSet;

/// The longest id proctor accepts.
const MAX_LEN: usize = 64;

/// `name` with every character proctor does not accept in an id replaced by `-`, cut to 64
/// characters; `fallback` when nothing is left.
pub(crate) fn sanitize(name: &str, fallback: &str) -> String {
    let mut id: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .take(MAX_LEN)
        .collect();
    while id.ends_with('-') && id.len() > 1 {
        id.pop();
    }
    if id.is_empty() || id.chars().all(|c| c == '-') {
        fallback.to_string()
    } else {
        id
    }
}

/// Hands out ids unique within one suite.
#[derive(Debug, Default)]
pub(crate) struct Ids {
    taken: BTreeSet<String>,
}

impl Ids {
    /// `base` if it is still free, else `base-2`, `base-3`, ... (cut so it stays within 64
    /// characters).
    pub(crate) fn unique(&mut self, base: &str) -> String {
        if self.taken.insert(base.to_string()) {
            return base.to_string();
        }
        let mut n = 2usize;
        loop {
            let suffix = format!("-{n}");
            let keep = MAX_LEN.saturating_sub(suffix.len()).min(base.len());
            let candidate = format!("{}{suffix}", &base[..keep]);
            if self.taken.insert(candidate.clone()) {
                return candidate;
            }
            n += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_replaces_what_ids_may_not_hold() {
        assert_eq!(sanitize("hello-world", "x"), "hello-world");
        assert_eq!(sanitize("swe.bench task#1", "x"), "swe-bench-task-1");
        assert_eq!(sanitize("...", "x"), "x");
        assert_eq!(sanitize(&"a".repeat(80), "x").len(), 64);
    }

    #[test]
    fn unique_suffixes_repeats() {
        let mut ids = Ids::default();
        assert_eq!(ids.unique("a"), "a");
        assert_eq!(ids.unique("a"), "a-2");
        assert_eq!(ids.unique("a"), "a-3");
        let long = "b".repeat(64);
        assert_eq!(ids.unique(&long), long);
        let second = ids.unique(&long);
        assert_eq!(second.len(), 64);
        assert!(second.ends_with("-2"));
    }
}
