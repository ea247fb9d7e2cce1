//! A trial's list of changes as `proctor show` prints it: a heading with the count, one line a
//! change (its kind, its path escaped for the terminal), and where the rest are when the record
//! left some out.

use std::fmt::Write as _;

use proctor_score::FileChange;

use super::escape_line;

/// Which list of changes: the workspace's, or the root's outside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangesOf {
    /// The workspace (paths relative to it; the rest in `changes/changes.json`).
    Workspace,
    /// The image's root outside the workspace, which the checks saw (paths shown from `/`; the
    /// rest in `root/changes.json`).
    Root,
}

/// The section of `changes` (and `omitted` more) for `show`, starting with a blank line; none
/// for the root's when it has no changes (its checks did not see the agent's root).
pub fn changes_section(of: ChangesOf, changes: &[FileChange], omitted: u64) -> String {
    if of == ChangesOf::Root && changes.is_empty() && omitted == 0 {
        return String::new();
    }
    let (heading, prefix, file) = match of {
        ChangesOf::Workspace => ("changes", "", "changes/changes.json"),
        ChangesOf::Root => (
            "changes outside the workspace, seen by the checks",
            "/",
            "root/changes.json",
        ),
    };
    let mut out = format!("\n{heading} ({})\n", changes.len() as u64 + omitted);
    for c in changes {
        let kind = format!("{:?}", c.kind).to_lowercase();
        let _ = writeln!(out, "  {kind:<13} {prefix}{}", escape_line(&c.path));
    }
    if omitted > 0 {
        let _ = writeln!(out, "  … and {omitted} more, listed in the trial's {file}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proctor_score::ChangeKind;

    fn change(path: &str, kind: ChangeKind) -> FileChange {
        FileChange::named(path, kind)
    }

    #[test]
    fn each_list_names_its_place_and_where_the_rest_are() {
        let changes = [
            change("etc/app.conf", ChangeKind::Added),
            change("a\x1b[2Jb", ChangeKind::Deleted),
        ];
        assert_eq!(
            changes_section(ChangesOf::Workspace, &changes, 0),
            "\nchanges (2)\n  added         etc/app.conf\n  deleted       a\\u{1b}[2Jb\n"
        );
        assert_eq!(
            changes_section(ChangesOf::Root, &changes[..1], 3),
            "\nchanges outside the workspace, seen by the checks (4)\n  added         /etc/app.conf\n  … and 3 more, listed in the trial's root/changes.json\n"
        );
        assert_eq!(changes_section(ChangesOf::Root, &[], 0), "");
        assert_eq!(
            changes_section(ChangesOf::Workspace, &[], 0),
            "\nchanges (0)\n"
        );
    }
}
