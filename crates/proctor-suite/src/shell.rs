//! Shell words: the one quoting rule proctor uses wherever it writes a command line for `sh`
//! (launch wrappers, imported oracles, Slurm scripts) or shows one to a person (call listings),
//! so argument boundaries survive: `kv put 'a b'` is two arguments after `put`, not three.

/// `s` as one word for a POSIX shell: unchanged when it is made only of characters no shell
/// treats specially (ASCII letters, digits and `-_./=:@%+,`), else in single quotes, each `'`
/// written `'\''`. The empty word is `''`.
pub fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `words` as one command line for a POSIX shell: each word [`quote`]d, joined by spaces.
pub fn join<S: AsRef<str>>(words: &[S]) -> String {
    words
        .iter()
        .map(|w| quote(w.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_words_that_need_it_are_quoted() {
        assert_eq!(quote("abc"), "abc");
        assert_eq!(quote("a/b.sh"), "a/b.sh");
        assert_eq!(quote("a b'c"), r"'a b'\''c'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("$HOME"), "'$HOME'");
        assert_eq!(join(&["kv", "put", "a b", ""]), "kv put 'a b' ''");
    }

    #[test]
    fn sh_reads_a_joined_line_back_as_the_same_words() {
        let words = ["printf", "%s|", "a b", "it's", "", "x\ny", "*", "$(id)"];
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(join(&words))
            .output()
            .expect("sh runs");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "a b|it's||x\ny|*|$(id)|"
        );
    }
}
