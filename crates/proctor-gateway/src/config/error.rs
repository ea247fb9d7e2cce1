//! Errors in reading a configuration file, with the place of a bad value.

use std::path::PathBuf;

/// Why the configuration could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read (absent, unreadable, not UTF-8).
    #[error("cannot read the configuration file {} (from {origin}): {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Where its name came from: `--config`, `$PROCTOR_CONFIG` or the default location.
        origin: &'static str,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML, has an unknown key, or a value out of range.
    #[error("{}:{line}:{column}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line of the offending value.
        line: usize,
        /// 1-based column (in characters) of the offending value.
        column: usize,
        /// What is wrong.
        message: String,
    },
}

impl ConfigError {
    /// An [`ConfigError::Invalid`] at byte `offset` of `text`.
    pub(super) fn at(path: &std::path::Path, text: &str, offset: usize, message: String) -> Self {
        let (line, column) = line_col(text, offset);
        ConfigError::Invalid {
            path: path.to_path_buf(),
            line,
            column,
            message,
        }
    }
}

/// The 1-based line and character column of byte `offset` in `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

#[cfg(test)]
mod tests {
    use super::line_col;

    #[test]
    fn offsets_become_lines_and_columns() {
        let text = "a = 1\nbé = 2\n";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 6), (2, 1));
        assert_eq!(line_col(text, 9), (2, 3));
        assert_eq!(line_col(text, 999), (3, 1));
    }
}
