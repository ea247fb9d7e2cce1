//! Finding the browser: the one the configuration names, or the first Chromium on the search
//! path. Not finding one is a reason a visual check cannot be graded, said as `no browser: ...`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The program names tried on the search path, in order.
pub const BROWSER_NAMES: &[&str] = &[
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
    "chrome",
];

/// Where the browser comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BrowserSource {
    /// `[browser] path` in the configuration file (given as the file's path).
    Configured {
        /// The path set.
        path: PathBuf,
        /// The configuration file that set it.
        config: PathBuf,
    },
    /// The first of [`BROWSER_NAMES`] on the search path.
    SearchPath(Vec<PathBuf>),
}

/// The browser's executable, or the reason there is none (the text after `no browser: `).
pub fn find_browser(source: &BrowserSource) -> Result<PathBuf, String> {
    match source {
        BrowserSource::Configured { path, config } => {
            if executable(path) {
                Ok(path.clone())
            } else {
                Err(format!(
                    "{} (set as [browser] path in {}) is not an executable file",
                    path.display(),
                    config.display()
                ))
            }
        }
        BrowserSource::SearchPath(dirs) => BROWSER_NAMES
            .iter()
            .flat_map(|name| dirs.iter().map(move |d| d.join(name)))
            .find(|p| executable(p))
            .ok_or_else(|| {
                format!(
                    "none of {} is on PATH; install Chromium (Debian: apt-get install chromium) or set [browser] path in proctor's config file",
                    BROWSER_NAMES.join(", ")
                )
            }),
    }
}

/// Whether `p` is a file someone may execute.
fn executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exe(dir: &Path, name: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    #[test]
    fn the_first_name_on_the_search_path_wins_and_plain_files_do_not_count() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        std::fs::write(a.path().join("chromium"), "not executable").unwrap();
        let want = exe(b.path(), "chromium");
        exe(a.path(), "google-chrome");
        let found = find_browser(&BrowserSource::SearchPath(vec![
            a.path().to_path_buf(),
            b.path().to_path_buf(),
        ]));
        assert_eq!(found, Ok(want));
    }

    #[test]
    fn no_browser_anywhere_says_what_was_looked_for() {
        let a = tempfile::tempdir().unwrap();
        let why =
            find_browser(&BrowserSource::SearchPath(vec![a.path().to_path_buf()])).unwrap_err();
        assert!(
            why.starts_with("none of chromium, chromium-browser"),
            "{why}"
        );
    }

    #[test]
    fn a_configured_browser_must_exist() {
        let why = find_browser(&BrowserSource::Configured {
            path: PathBuf::from("/nowhere/chrome"),
            config: PathBuf::from("/etc/proctor.toml"),
        })
        .unwrap_err();
        assert_eq!(
            why,
            "/nowhere/chrome (set as [browser] path in /etc/proctor.toml) is not an executable file"
        );
    }
}
