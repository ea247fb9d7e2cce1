//! The commands a trial runs besides the agent: `allow` lists (resolved as the runner resolves
//! them) and `setup` commands, in `[defaults]`, `[[variants]]` and `[[tasks]]`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use toml::Spanned;

use super::Validator;
use crate::problem::ProblemKind;

/// Whether `p` is a file the runner can execute (its rule for allowed commands).
pub(super) fn executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The name the agent types for an `allow` entry: the entry itself, or a path's file name.
pub(super) fn allowed_name(entry: &str) -> &str {
    if entry.contains('/') {
        Path::new(entry)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(entry)
    } else {
        entry
    }
}

/// Whether an allow list lets the agent run `command`.
pub(super) fn allows(list: &[Spanned<String>], command: &str) -> bool {
    list.iter()
        .any(|e| e.get_ref() == command || allowed_name(e.get_ref()) == allowed_name(command))
}

impl Validator<'_> {
    /// `setup` commands: each a command line for `sh -c`, none empty.
    pub(super) fn setup_commands(&mut self, setup: &[Spanned<String>]) {
        for c in setup.iter().filter(|c| c.get_ref().trim().is_empty()) {
            let p = self
                .at(
                    ProblemKind::InvalidValue,
                    c.span(),
                    "an empty command in `setup`",
                )
                .with_label("empty")
                .with_help("write a command line for `sh -c`, e.g. \"sqlite3 shop.db < seed.sql\", or remove the entry");
            self.out.push(p);
        }
    }

    /// Checks each entry of `binds` is an absolute host path, without `..`, that exists here.
    pub(super) fn bind_paths(&mut self, binds: &[Spanned<String>]) {
        for b in binds {
            let path = std::path::Path::new(b.get_ref());
            let why = if !path.is_absolute() {
                Some("is not absolute")
            } else if path
                .components()
                .any(|c| c == std::path::Component::ParentDir)
            {
                Some("holds `..`")
            } else if path.parent().is_none() {
                Some("is the whole root")
            } else if std::fs::symlink_metadata(path).is_err() {
                Some("does not exist on this machine")
            } else {
                None
            };
            if let Some(why) = why {
                let p = self
                    .at(
                        ProblemKind::BadPath,
                        b.span(),
                        format!("`binds` entry `{}` {why}", b.get_ref()),
                    )
                    .with_label("not a host path to show")
                    .with_help("write the absolute path of a host folder or file the trial needs, such as \"/opt/toolchain\"");
                self.out.push(p);
            }
        }
    }

    /// Checks each entry of `allowed_hosts` is `HOST` or `*.HOST` and that a network of the
    /// task's is `internet` (`internet`: whether one is).
    pub(super) fn allowed_hosts(&mut self, hosts: &[Spanned<String>], internet: bool) {
        for h in hosts {
            if let Some(why) = crate::model::host_rule_problem(h.get_ref()) {
                let p = self
                    .at(
                        ProblemKind::InvalidValue,
                        h.span(),
                        format!("`allowed_hosts` entry `{}` {why}", h.get_ref()),
                    )
                    .with_label("not a host name")
                    .with_help("write a host name such as \"pypi.org\", or \"*.pythonhosted.org\" for the names below one");
                self.out.push(p);
            }
        }
        if let (Some(first), false) = (hosts.first(), internet) {
            let p = self
                .at(
                    ProblemKind::InvalidValue,
                    first.span(),
                    "`allowed_hosts` without the internet network".to_owned(),
                )
                .with_label("no network of this task reaches a host")
                .with_help("set `network = \"internet\"` (or `check_network`) beside it, or remove `allowed_hosts`");
            self.out.push(p);
        }
    }

    /// Checks each entry of an allow list resolves as the runner resolves it: a path inside the
    /// suite to an executable file, or a bare name found in the search path.
    /// `in_image`: the list applies to trials that run in an OCI image, where bare names are
    /// found on the image's `PATH` when the run starts, not on this machine's.
    pub(super) fn allow_list(&mut self, allow: &[Spanned<String>], in_image: bool) {
        for a in allow {
            let entry = a.get_ref();
            if entry.contains('/') {
                if self.suite_path("allow", a, true) && !executable(&self.suite.root.join(entry)) {
                    let p = self
                        .at(
                            ProblemKind::BadPath,
                            a.span(),
                            format!("`allow` entry `{entry}` is not an executable file"),
                        )
                        .with_label("not executable")
                        .with_help(format!(
                            "allowed commands are run through shims: make it executable (`chmod +x {entry}` in the suite folder)"
                        ));
                    self.out.push(p);
                }
            } else if entry.is_empty() {
                let p = self
                    .at(
                        ProblemKind::InvalidValue,
                        a.span(),
                        "an empty command name in `allow`",
                    )
                    .with_label("empty")
                    .with_help(
                        "name a command on PATH, or a path inside the suite such as \"bin/tool\"",
                    );
                self.out.push(p);
            } else if let (Some(dirs), false) = (&self.options.search_path, in_image) {
                if !dirs.iter().any(|d| executable(&d.join(entry))) {
                    let p = self
                        .at(
                            ProblemKind::UnknownReference,
                            a.span(),
                            format!("`allow` entry `{entry}` is not a path inside the suite and no program of that name is on PATH"),
                        )
                        .with_label("found nowhere")
                        .with_help(format!(
                            "install `{entry}` on PATH (or beside proctor), or put the program in the suite and allow it by path, such as \"bin/{entry}\""
                        ));
                    self.out.push(p);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_names_are_file_names_of_paths() {
        assert_eq!(allowed_name("bin/tool"), "tool");
        assert_eq!(allowed_name("chat"), "chat");
        let list = vec![Spanned::new(0..0, "bin/tool".to_string())];
        assert!(allows(&list, "tool"));
        assert!(allows(&list, "bin/tool"));
        assert!(!allows(&list, "chat"));
    }

    #[test]
    fn host_rules_are_names_or_wildcards_below_one() {
        for ok in ["pypi.org", "*.pythonhosted.org", "localhost", "a-b.example"] {
            assert_eq!(crate::model::host_rule_problem(ok), None, "{ok}");
        }
        for bad in [
            "",
            "*.",
            "1.1.1.1",
            "https://pypi.org/",
            "a..b",
            "-a.org",
            "*.*.org",
            "a_b.org",
        ] {
            assert!(crate::model::host_rule_problem(bad).is_some(), "{bad}");
        }
    }
}
