//! Mutations as people write them: patches made by the real `diff -ruN` and `git diff` of two
//! folders, adding, changing and deleting files (empty ones too), parsed and applied to the
//! original folder give exactly the changed one.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use proctor_suite::patch::{ApplyError, Patch};

/// Runs `argv` in `dir`; exit status 1 is `diff`'s "the files differ", not a failure.
fn run(dir: &Path, argv: &[&str], env: &[(&str, &str)]) -> String {
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .envs(env.iter().copied())
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{argv:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("a text diff")
}

fn have(tool: &str) -> bool {
    let found = Command::new(tool).arg("--version").output().is_ok();
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "under CI every real part must run: {tool} is not installed"
        );
        eprintln!("SKIPPED: {tool} is not installed");
    }
    found
}

fn write(dir: &Path, files: &[(&str, &str)]) {
    for (rel, text) in files {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// Every file under `dir`, by relative path.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n == ".git") {
                    continue;
                }
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// `patch` applied to the tree `before`: the resulting tree.
fn applied(patch: &Patch, before: &BTreeMap<String, Vec<u8>>) -> BTreeMap<String, Vec<u8>> {
    let changes = patch.apply(|p| before.get(p).cloned()).unwrap();
    let mut after = before.clone();
    for (path, content) in changes {
        match content {
            Some(c) => after.insert(path, c),
            None => after.remove(&path),
        };
    }
    after
}

const BEFORE: &[(&str, &str)] = &[
    ("src/app.py", "def f():\n    return 1\n"),
    ("tests/test_app.py", "from app import f\nassert f() == 1\n"),
    ("README", "read me\n"),
    ("notes/empty.txt", ""),
];

/// Two folders: `fixture` (BEFORE) and `mutated` (a file changed, one added in a new folder,
/// one deleted), in `root`.
fn two_trees(root: &Path) {
    write(&root.join("fixture"), BEFORE);
    write(&root.join("mutated"), BEFORE);
    let m = root.join("mutated");
    std::fs::write(m.join("src/app.py"), "def f():\n    return 2\n").unwrap();
    std::fs::remove_file(m.join("tests/test_app.py")).unwrap();
    write(&m, &[("src/extra/new.py", "print('added')\n")]);
}

#[test]
fn a_diff_run_patch_adding_and_deleting_files_applies_in_any_time_zone() {
    if !have("diff") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    two_trees(root.path());
    let before = tree(&root.path().join("fixture"));
    let want = tree(&root.path().join("mutated"));
    for tz in ["UTC", "America/New_York", "Asia/Kolkata"] {
        // `diff -ruN a b`, as the author wrote it, with the `a/` `b/` prefixes.
        std::fs::create_dir_all(root.path().join("ab")).unwrap();
        let ab = root.path().join("ab");
        if !ab.join("a").exists() {
            std::os::unix::fs::symlink(root.path().join("fixture"), ab.join("a")).unwrap();
            std::os::unix::fs::symlink(root.path().join("mutated"), ab.join("b")).unwrap();
        }
        let text = run(&ab, &["diff", "-ruN", "a/", "b/"], &[("TZ", tz)]);
        assert!(text.contains("diff -ruN a/"), "{text}");
        let epoch_line = text
            .lines()
            .find(|l| l.starts_with("--- a/src/extra/new.py"))
            .unwrap_or_else(|| panic!("no header of the added file:\n{text}"));
        assert!(epoch_line.contains("19"), "{epoch_line}");
        let patch = Patch::parse(&text).unwrap_or_else(|e| panic!("{tz}: {e}\n{text}"));
        let added = patch
            .files
            .iter()
            .find(|f| f.path() == "src/extra/new.py")
            .unwrap();
        assert_eq!(added.old_path, None, "{tz}: the epoch side is absent");
        let deleted = patch
            .files
            .iter()
            .find(|f| f.path() == "tests/test_app.py")
            .unwrap();
        assert_eq!(deleted.new_path, None, "{tz}: the epoch side is absent");
        assert_eq!(applied(&patch, &before), want, "{tz}");
        // Applied a second time, the added file is already there: refused, not overwritten.
        assert_eq!(
            patch.apply(|p| want.get(p).cloned()).unwrap_err(),
            ApplyError::HunkMismatch {
                path: "src/app.py".into(),
                hunk: 1,
                line: 1
            }
        );
    }
    // `diff -ruN fixture mutated`: the two folders' own names instead of `a/` and `b/`.
    let text = run(root.path(), &["diff", "-ruN", "fixture", "mutated"], &[]);
    assert!(
        text.contains("--- fixture/src/extra/new.py\t1970-01-01"),
        "{text}"
    );
    let patch = Patch::parse(&text).unwrap();
    assert_eq!(applied(&patch, &before), want);
}

#[test]
fn a_file_really_dated_at_the_epoch_is_still_a_file() {
    // An existing file whose time is the epoch (a reproducible build's) and which the patch
    // changes: its side has lines, so it is read as there.
    let text = "--- a/f.txt\t1970-01-01 00:00:00.000000000 +0000\n+++ b/f.txt\t1970-01-01 00:00:00.000000000 +0000\n@@ -1 +1 @@\n-a\n+b\n";
    let patch = Patch::parse(text).unwrap();
    assert_eq!(patch.files[0].old_path.as_deref(), Some("f.txt"));
    assert_eq!(patch.files[0].new_path.as_deref(), Some("f.txt"));
    let out = patch.apply(|_| Some(b"a\n".to_vec())).unwrap();
    assert_eq!(out["f.txt"].as_deref(), Some(&b"b\n"[..]));
    // Another instant is no epoch, even with an empty range: the file is there, and empty.
    let text = "--- a/g.txt\t1970-01-01 00:00:01.000000000 +0000\n+++ b/g.txt\t2026-01-01 00:00:00.000000000 +0000\n@@ -0,0 +1 @@\n+x\n";
    let patch = Patch::parse(text).unwrap();
    assert_eq!(patch.files[0].old_path.as_deref(), Some("g.txt"));
}

#[test]
fn a_git_diff_adding_and_deleting_files_empty_ones_too_applies() {
    if !have("git") {
        return;
    }
    let repo = tempfile::tempdir().unwrap();
    let dir = repo.path();
    let git = |args: &[&str]| {
        let mut argv = vec!["git", "-c", "user.name=t", "-c", "user.email=t@t"];
        argv.extend(args);
        run(
            dir,
            &argv,
            &[("GIT_CONFIG_NOSYSTEM", "1"), ("HOME", "/nonexistent")],
        )
    };
    git(&["init", "-q"]);
    write(dir, BEFORE);
    git(&["add", "-A"]);
    git(&["commit", "-qm", "fixture"]);
    let before = tree(dir);
    std::fs::write(dir.join("src/app.py"), "def f():\n    return 2\n").unwrap();
    std::fs::remove_file(dir.join("tests/test_app.py")).unwrap();
    std::fs::remove_file(dir.join("notes/empty.txt")).unwrap();
    write(
        dir,
        &[
            ("src/extra/new.py", "print('added')\n"),
            ("src/empty.py", ""),
        ],
    );
    git(&["add", "-A"]);
    let want = tree(dir);
    // Without renames (git would take the empty file's deletion and creation for a rename).
    let text = git(&["diff", "--cached", "--no-renames"]);
    for header in [
        "new file mode 100644",
        "deleted file mode 100644",
        "--- /dev/null",
        "+++ /dev/null",
    ] {
        assert!(text.contains(header), "{header} missing:\n{text}");
    }
    let patch = Patch::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let empty = patch
        .files
        .iter()
        .find(|f| f.path() == "src/empty.py")
        .expect("the empty file's creation, a section with no hunk");
    assert_eq!(empty.old_path, None);
    assert!(patch
        .files
        .iter()
        .any(|f| f.path() == "notes/empty.txt" && f.new_path.is_none()));
    assert_eq!(applied(&patch, &before), want);
    // Deleting an "empty" file that has content is refused.
    let mut full = before.clone();
    full.insert("notes/empty.txt".into(), b"not empty\n".to_vec());
    assert_eq!(
        patch.apply(|p| full.get(p).cloned()).unwrap_err(),
        ApplyError::NotEmpty("notes/empty.txt".into())
    );
}

#[test]
fn a_git_diff_with_renames_applies_and_one_with_a_copy_says_how_to_make_it() {
    if !have("git") {
        return;
    }
    let repo = tempfile::tempdir().unwrap();
    let dir = repo.path();
    let git = |args: &[&str]| {
        let mut argv = vec!["git", "-c", "user.name=t", "-c", "user.email=t@t"];
        argv.extend(args);
        run(
            dir,
            &argv,
            &[("GIT_CONFIG_NOSYSTEM", "1"), ("HOME", "/nonexistent")],
        )
    };
    git(&["init", "-q"]);
    write(dir, BEFORE);
    git(&["add", "-A"]);
    git(&["commit", "-qm", "fixture"]);
    let before = tree(dir);
    // A rename as it is, and a rename with a change (similarity below 100%).
    git(&["mv", "README", "README.md"]);
    git(&["mv", "src/app.py", "src/main.py"]);
    std::fs::write(dir.join("src/main.py"), "def f():\n    return 1\n\nf()\n").unwrap();
    git(&["add", "-A"]);
    let want = tree(dir);
    let text = git(&["diff", "--cached", "-M"]);
    assert!(text.contains("rename from README"), "{text}");
    assert!(text.contains("rename to src/main.py"), "{text}");
    let patch = Patch::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(applied(&patch, &before), want);
    // The renamed-to path already there: refused.
    let mut taken = before.clone();
    taken.insert("README.md".into(), b"other\n".to_vec());
    assert_eq!(
        patch.apply(|p| taken.get(p).cloned()).unwrap_err(),
        ApplyError::AlreadyExists("README.md".into())
    );
    // The same change written without renames gives the same tree.
    let text = git(&["diff", "--cached", "--no-renames"]);
    assert!(!text.contains("rename from"), "{text}");
    assert_eq!(applied(&Patch::parse(&text).unwrap(), &before), want);
    // A copy is refused with the way out.
    git(&["reset", "-q", "--hard"]);
    std::fs::copy(dir.join("src/app.py"), dir.join("src/copy.py")).unwrap();
    git(&["add", "-A"]);
    let text = git(&["diff", "--cached", "-C", "--find-copies-harder"]);
    assert!(text.contains("copy from src/app.py"), "{text}");
    let e = Patch::parse(&text).unwrap_err();
    assert!(e.message.contains("--no-renames"), "{e}");
}
