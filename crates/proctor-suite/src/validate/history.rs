//! The audit of a fixture's `.git` folders: what an agent can read in version control.
//!
//! Agents read git history (mini-swe-agent found 21% of SWE-bench Pro runs doing so), so for
//! every `.git` folder in the fixture, at any depth, proctor asks the `git` on `PATH`:
//!
//! - whether its object store holds a blob whose content is a secret's (a holdout file, an
//!   answer sheet, an oracle's solution file, compared as [`super::leak`] compares files): an
//!   error ([`ProblemKind::Leak`]) naming the object and the secret, reachable or not;
//! - whether it holds what `HEAD` does not reach: refs (branches, tags, `refs/stash`, notes)
//!   whose commits are not ancestors of `HEAD`, and objects reachable from no ref (reflog-only
//!   commits such as an amended one, dangling blobs): a warning ([`ProblemKind::GitHistory`])
//!   naming them, since proctor cannot tell a planted answer from leftover work;
//! - whether it carries history at all: a warning with the number of commits `HEAD` reaches,
//!   since any older version may hold an answer.
//!
//! Without `git` on `PATH` the folder is not audited, and a warning says so. `git` runs with the
//! system and global configuration ignored, on the `.git` folder alone (no work tree, so no hook
//! or file-system monitor runs).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use super::leak::{leak_problem, Secrets};
use crate::problem::{Problem, ProblemKind};

/// How many refs or objects a warning names before it says how many more there are.
const NAMED: usize = 5;

/// Variables that would make `git` read another repository, index or object store than the
/// folder audited.
const GIT_ENV: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
];

/// `git` on the `.git` folder `dir`, configured as the module's documentation says.
fn git(dir: &Path) -> Command {
    let mut c = Command::new("git");
    for var in GIT_ENV {
        c.env_remove(var);
    }
    c.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_TERMINAL_PROMPT", "0")
        .arg("-c")
        .arg("safe.directory=*")
        .arg("--git-dir")
        .arg(dir)
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    c
}

/// The stdout of `git ARGS` on `dir` and whether it exited 0; `None` when `git` cannot start.
fn run(dir: &Path, args: &[&str]) -> Option<(bool, String)> {
    let out = git(dir).args(args).output().ok()?;
    Some((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    ))
}

/// Every finding about the `.git` folder `dir` of a fixture.
pub(super) fn audit(dir: &Path, secrets: &Secrets) -> Vec<Problem> {
    let Some((true, _)) = run(dir, &["--version"]) else {
        return vec![Problem::in_file(
            ProblemKind::GitHistory,
            dir,
            "this fixture repository was not audited: no `git` program is on PATH",
        )
        .with_help("install git and validate again: proctor asks git which objects the folder holds and what its HEAD reaches")
        .as_warning()];
    };
    let mut out = blob_leaks(dir, secrets);
    let head = run(dir, &["rev-parse", "--verify", "-q", "HEAD^{commit}"])
        .filter(|(ok, _)| *ok)
        .map(|(_, s)| s.trim().to_string());
    let mut unreached = unreached_refs(dir, head.is_some());
    unreached.extend(unreachable_objects(dir));
    if !unreached.is_empty() {
        out.push(
            Problem::in_file(
                ProblemKind::GitHistory,
                dir,
                format!(
                    "this fixture repository holds what its HEAD does not reach, which the agent can read: {}",
                    unreached.join("; ")
                ),
            )
            .with_help("if none of it holds an answer this is harmless; otherwise delete the refs (`git branch -D`, `git tag -d`, `git stash clear`), then drop what no ref reaches: `git reflog expire --expire=now --all && git gc --prune=now`; or ship the fixture without .git")
            .as_warning(),
        );
    }
    if let Some(head) = &head {
        let count = run(dir, &["rev-list", "--count", head])
            .filter(|(ok, _)| *ok)
            .map_or_else(|| "some".to_string(), |(_, s)| s.trim().to_string());
        out.push(
            Problem::in_file(
                ProblemKind::GitHistory,
                dir,
                format!(
                    "this fixture repository carries history: {count} commit(s) reachable from HEAD ({}), each of which the agent can read (`git log -p`, `git show HEAD:PATH`)",
                    short(head)
                ),
            )
            .with_help("make sure no older version holds what a task grades; to give the agent none, ship the fixture without .git, or as one fresh commit (`rm -rf .git && git init && git add -A && git commit -m fixture`)")
            .as_warning(),
        );
    }
    out
}

/// The refs of the repository in `dir` that HEAD does not reach (every ref when it has no
/// HEAD), each as the warning names it.
fn unreached_refs(dir: &Path, has_head: bool) -> Vec<String> {
    let mut unreached: Vec<String> = Vec::new();
    // Refs whose tips are not HEAD or its ancestors (`--merged` leaves out refs to trees and
    // blobs, which HEAD's history cannot hold either).
    let refs = |extra: Option<&str>| -> Vec<String> {
        let mut args = vec!["for-each-ref", "--format=%(refname)"];
        args.extend(extra);
        run(dir, &args)
            .filter(|(ok, _)| *ok)
            .map(|(_, s)| s.lines().map(str::to_string).collect())
            .unwrap_or_default()
    };
    let merged = if has_head {
        refs(Some("--merged=HEAD"))
    } else {
        Vec::new()
    };
    for name in refs(None) {
        if !merged.contains(&name) {
            unreached.push(format!("ref `{name}`"));
        }
    }
    unreached
}

/// The objects of the repository in `dir` that no ref reaches, counted by kind (commits, tags,
/// trees, blobs) with the first few ids, each kind as the warning names it.
fn unreachable_objects(dir: &Path) -> Vec<String> {
    let mut unreached: Vec<String> = Vec::new();
    if let Some((_, fsck)) = run(
        dir,
        &[
            "fsck",
            "--unreachable",
            "--no-reflogs",
            "--connectivity-only",
            "--no-progress",
        ],
    ) {
        let mut by_kind: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for line in fsck.lines() {
            let mut words = line.split_whitespace();
            if let (Some("unreachable"), Some(kind), Some(oid)) =
                (words.next(), words.next(), words.next())
            {
                by_kind.entry(kind).or_default().push(oid);
            }
        }
        let rank = |kind: &str| {
            ["commit", "tag", "tree", "blob"]
                .iter()
                .position(|k| *k == kind)
        };
        let mut by_kind: Vec<(&str, Vec<&str>)> = by_kind.into_iter().collect();
        by_kind.sort_by_key(|(kind, _)| rank(kind).unwrap_or(usize::MAX));
        for (kind, oids) in by_kind {
            let mut shown_oids: Vec<String> = oids
                .iter()
                .take(NAMED)
                .map(|o| short(o).to_string())
                .collect();
            if oids.len() > NAMED {
                shown_oids.push(format!("{} more", oids.len() - NAMED));
            }
            unreached.push(format!(
                "{} unreachable {kind}{} ({})",
                oids.len(),
                if oids.len() == 1 { "" } else { "s" },
                shown_oids.join(", ")
            ));
        }
    }
    unreached
}

/// The first 12 characters of an object id.
fn short(oid: &str) -> &str {
    oid.get(..12).unwrap_or(oid)
}

/// An error for each blob of the object store (loose or packed, reachable or not) whose content
/// is a secret's. Only blobs whose size could match are read.
fn blob_leaks(dir: &Path, secrets: &Secrets) -> Vec<Problem> {
    if secrets.is_empty() {
        return Vec::new();
    }
    let Some((true, listing)) = run(
        dir,
        &[
            "cat-file",
            "--batch-all-objects",
            "--unordered",
            "--batch-check=%(objectname) %(objecttype) %(objectsize)",
        ],
    ) else {
        return Vec::new();
    };
    let candidates: Vec<&str> = listing
        .lines()
        .filter_map(|line| {
            let mut w = line.split(' ');
            let (oid, kind, size) = (w.next()?, w.next()?, w.next()?.parse::<u64>().ok()?);
            (kind == "blob" && secrets.could_match(size)).then_some(oid)
        })
        .collect();
    if candidates.is_empty() {
        return Vec::new();
    }
    let Ok(mut child) = git(dir)
        .args(["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
    else {
        return Vec::new();
    };
    // The ids are written from a thread so that a large output cannot block the input.
    let input: String = candidates.iter().map(|o| format!("{o}\n")).collect();
    let stdin = child.stdin.take();
    let writer = std::thread::spawn(move || {
        if let Some(mut stdin) = stdin {
            let _ = stdin.write_all(input.as_bytes());
        }
    });
    let mut output = Vec::new();
    if let Some(mut stdout) = child.stdout.take() {
        let _ = stdout.read_to_end(&mut output);
    }
    let _ = writer.join();
    let _ = child.wait();
    let mut out = Vec::new();
    let mut rest = output.as_slice();
    // Each object is `OID TYPE SIZE\n`, its content, then `\n`.
    while let Some(nl) = rest.iter().position(|b| *b == b'\n') {
        let header = String::from_utf8_lossy(&rest[..nl]).into_owned();
        rest = &rest[nl + 1..];
        let mut w = header.split(' ');
        let (Some(oid), Some(_), Some(Ok(size))) =
            (w.next(), w.next(), w.next().map(str::parse::<usize>))
        else {
            continue;
        };
        let Some(content) = rest.get(..size) else {
            break;
        };
        if let Some(found) = secrets.matching(content) {
            out.push(
                leak_problem(dir, &format!("object {oid} of this repository"), found).with_help(
                    format!("the agent can read every object of the store (`git cat-file -p {}`): remove the file from every commit that has it, or ship the fixture without .git; then `git reflog expire --expire=now --all && git gc --prune=now`", short(oid)),
                ),
            );
        }
        rest = rest.get(size + 1..).unwrap_or_default();
    }
    out
}
