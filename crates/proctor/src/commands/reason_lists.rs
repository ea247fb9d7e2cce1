//! The lists in trials' reasons, printed once: `show RUN` lists every trial with its reason,
//! and a reason that names a rule's glob list (`failing: files_unchanged = ["tests/**", ...]`)
//! would repeat the whole list on every trial that failed it. Each long list becomes a short
//! name (`[list 1]`) in the reasons, and the names are printed once, under the table.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

/// A list of quoted strings as a rule prints it (Rust's `{:?}` of a list of strings):
/// `["a", "b\"c"]`.
static LIST: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r#"\["(?:[^"\\]|\\.)*"(?:, "(?:[^"\\]|\\.)*")*\]"#).ok());

/// A list shorter than this many characters stays where it is: naming it would not shorten
/// the reason.
const SHORT: usize = 24;

/// Reasons with their long lists named, and the names with their lists.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Named {
    /// The reasons, in the order given, each list replaced by its name.
    pub reasons: Vec<String>,
    /// Each name with the list it stands for, in the order first seen.
    pub lists: Vec<(String, String)>,
}

/// Names the long lists of `reasons`: the same list gets the same name wherever it appears.
pub fn name_lists<'a>(reasons: impl IntoIterator<Item = &'a str>) -> Named {
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    let mut out = Named::default();
    for reason in reasons {
        let Some(re) = LIST.as_ref() else {
            out.reasons.push(reason.to_string());
            continue;
        };
        let replaced = re.replace_all(reason, |c: &regex::Captures<'_>| {
            let list = &c[0];
            if list.chars().count() < SHORT {
                return list.to_string();
            }
            names
                .entry(list.to_string())
                .or_insert_with(|| {
                    let name = format!("[list {}]", out.lists.len() + 1);
                    out.lists.push((name.clone(), list.to_string()));
                    name
                })
                .clone()
        });
        out.reasons.push(replaced.into_owned());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_list_is_named_once_and_a_short_one_stays() {
        let globs = r#"["tests/**", "docs/**", "README.md"]"#;
        let a = format!("failing: files_unchanged = {globs}");
        let b = format!(
            "stopped at the wall timeout with the rules failing: files_unchanged = {globs}"
        );
        let c = r#"failing: files_unchanged = ["a"]"#;
        let d = r#"failing: check = "x", files_unchanged = ["other/**", "more/**", "x"]"#;
        let named = name_lists([
            a.as_str(),
            b.as_str(),
            c,
            d,
            "every success assertion holds",
        ]);
        assert_eq!(
            named.reasons,
            [
                "failing: files_unchanged = [list 1]",
                "stopped at the wall timeout with the rules failing: files_unchanged = [list 1]",
                c,
                "failing: check = \"x\", files_unchanged = [list 2]",
                "every success assertion holds",
            ]
        );
        assert_eq!(
            named.lists,
            [
                ("[list 1]".to_string(), globs.to_string()),
                (
                    "[list 2]".to_string(),
                    r#"["other/**", "more/**", "x"]"#.to_string()
                )
            ]
        );
    }

    #[test]
    fn quotes_and_brackets_inside_a_list_are_kept_whole() {
        let list = r#"["a \"quoted\" ]name", "second/**/*.py"]"#;
        let named = name_lists([format!("failing: x = {list}").as_str()]);
        assert_eq!(named.reasons, ["failing: x = [list 1]"]);
        assert_eq!(named.lists[0].1, list);
    }
}
