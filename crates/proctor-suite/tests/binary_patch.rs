//! Git binary patches as mutations, made by the real `git diff --binary` of a real sqlite3
//! database: they apply to the exact content they were made from, giving the exact new content,
//! and to nothing else.

use std::path::Path;
use std::process::Command;

use proctor_suite::patch::{ApplyError, Patch};

fn run(dir: &Path, argv: &[&str]) -> Vec<u8> {
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    assert!(
        out.status.success(),
        "{argv:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn have(tool: &str) -> bool {
    let found = Command::new(tool).arg("--version").output().is_ok()
        || Command::new(tool).arg("-version").output().is_ok();
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "under CI every real part must run: {tool} is not installed"
        );
        eprintln!("SKIPPED: {tool} is not installed");
    }
    found
}

#[test]
fn a_git_binary_patch_of_a_database_applies_exactly_and_only_to_its_own_base() {
    if !have("git") || !have("sqlite3") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    let git = |args: &[&str]| {
        let mut argv = vec!["git", "-c", "user.email=t@t", "-c", "user.name=t"];
        argv.extend_from_slice(args);
        run(repo, &argv)
    };
    git(&["init", "-q"]);
    run(repo, &["sqlite3", "shop.db", "CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT); INSERT INTO orders (item) VALUES ('pen');"]);
    std::fs::write(repo.join("gone.bin"), [0u8, 1, 2, 255, 0, 7]).unwrap();
    git(&["add", "."]);
    git(&["commit", "-qm", "start"]);
    let before = |p: &str| std::fs::read(repo.join(p)).ok();
    let (db_before, gone_before) = (before("shop.db").unwrap(), before("gone.bin").unwrap());
    // A change to the database (git writes a delta), a new binary file (a literal) and a
    // deleted one.
    run(
        repo,
        &[
            "sqlite3",
            "shop.db",
            "INSERT INTO orders (item) VALUES ('notebook');",
        ],
    );
    std::fs::write(repo.join("new.bin"), [9u8, 0, 0, 0, 200, 13, 10]).unwrap();
    std::fs::remove_file(repo.join("gone.bin")).unwrap();
    git(&["add", "-A"]);
    let text = String::from_utf8(git(&["diff", "--cached", "--binary"])).unwrap();
    assert!(text.contains("GIT binary patch"), "{text}");
    let patch = Patch::parse(&text).unwrap();
    let db_after = std::fs::read(repo.join("shop.db")).unwrap();
    let start = |p: &str| match p {
        "shop.db" => Some(db_before.clone()),
        "gone.bin" => Some(gone_before.clone()),
        _ => None,
    };
    let out = patch.apply(start).unwrap();
    assert_eq!(out["shop.db"].as_deref(), Some(&db_after[..]));
    assert_eq!(
        out["new.bin"].as_deref(),
        Some(&[9u8, 0, 0, 0, 200, 13, 10][..])
    );
    assert_eq!(out["gone.bin"], None);

    // Another base (the database one row further on) is refused, not patched into garbage.
    let other = |p: &str| match p {
        "shop.db" => Some(db_after.clone()),
        "gone.bin" => Some(gone_before.clone()),
        _ => None,
    };
    match patch.apply(other) {
        Err(ApplyError::Binary { path, why }) => {
            assert_eq!(path, "shop.db");
            assert!(why.contains("was made from blob"), "{why}");
        }
        other => panic!("applied to another base: {other:?}"),
    }
}

#[test]
fn a_diff_that_only_says_binary_files_differ_is_refused_with_how_to_make_one() {
    for text in [
        "diff --git a/shop.db b/shop.db\nindex 1111111..2222222 100644\nBinary files a/shop.db and b/shop.db differ\n",
        "Binary files a/shop.db and b/shop.db differ\n",
    ] {
        let e = Patch::parse(text).unwrap_err();
        assert!(e.message.contains("git diff --binary"), "{e}");
    }
}
