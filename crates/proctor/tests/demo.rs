//! The README's first command: `proctor demo`, run from the source folder as a newcomer runs
//! it (`cargo build --release && ./target/release/proctor demo`, here with the test build of the
//! same binary and the example's tools beside it): both bundled suites run end to end, every
//! oracle variant completes every task, every trap-falling variant fails every one, and it
//! exits 0.

mod common;

#[test]
fn the_demo_runs_both_bundled_suites_and_tells_the_oracle_from_the_traps() {
    let bin = assert_cmd::cargo::cargo_bin("proctor");
    let bin_dir = bin.parent().unwrap().canonicalize().unwrap();
    for tool in ["chat", "chat-mock"] {
        assert!(
            bin_dir.join(tool).is_file(),
            "{} is not built: `cargo build -p proctor-example-chat` builds the example's tools",
            bin_dir.join(tool).display()
        );
    }
    let store = tempfile::Builder::new()
        .prefix("demo-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let out = std::process::Command::new(&bin)
        .args(["demo", "--store"])
        .arg(store.path())
        .current_dir(common::repo_root())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}\n{stdout}");
    for suite in ["== examples/traps ==", "== examples/chat-ax =="] {
        assert!(stderr.contains(suite), "{suite} did not run:\n{stderr}");
    }
    assert!(
        !stderr.contains("skipping examples/chat-ax"),
        "the chat tools beside proctor are found: {stderr}"
    );
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|r| r.len() >= 4 && r[0] != "TASK")
        .collect();
    assert_eq!(
        rows.len(),
        16,
        "3 traps tasks and 5 chat-ax tasks, two variants each:\n{stdout}"
    );
    for r in &rows {
        let expected = if r[1] == "oracle" { "2/2" } else { "0/2" };
        assert_eq!(r[2], expected, "{r:?}\n{stdout}");
    }
    assert!(
        stderr
            .contains("The oracle variants complete every task; the trap-falling variants do not."),
        "{stderr}"
    );
    let runs = std::fs::read_dir(store.path().join("runs"))
        .unwrap()
        .count();
    assert_eq!(runs, 2, "each suite is a run of its own in the store");
}
