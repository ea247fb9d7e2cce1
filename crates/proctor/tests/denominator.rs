//! The agent cannot leave the denominator, through the real binary (real namespaces, overlay
//! workspaces, real processes): scripted agents fail their task and then make a tree proctor
//! might not capture (folders nested past PATH_MAX, names at NAME_MAX, mode-000 files and
//! folders, a FIFO and a socket) or run into a limit of their own (memory that kills the trial's
//! init, a full disk). Each trial is graded from what was kept with the cause recorded (a
//! capture note naming the path, or `limit_reached`), its answer and transcript are kept, and its
//! scratch is removed; the honest arm of the same task completes with no note. Where the tests
//! run as root, each scenario also runs as uid 65534 (for whom mode 000 really locks a folder).
//! A machine without namespaces or overlayfs skips these tests, except under `CI`, where that
//! fails them.

mod common;

use std::path::Path;

use common::lab::{users, As, Lab};
use serde_json::Value;

/// The task every attack fails: write `fixed.txt`, and touch nothing under `src/`.
const SUCCESS: &str = "{ file_added = \"fixed.txt\" }, { files_unchanged = [\"src/**\"] }";

/// What one trial left.
struct Trial {
    record: Value,
    answer: Option<String>,
    kept_output: bool,
}

/// Runs a one-task suite whose agent runs `steps` (with `extra` in the task) as `who`; `None`
/// (outside CI) when the machine cannot give the trial namespaces and an overlay workspace.
fn trial(name: &str, who: As, extra: &str, steps: &[&str]) -> Option<Trial> {
    let lab = Lab::new(&format!("denom-{name}-{who:?}"));
    lab.write("fixture/src/lib.txt", "lib\n");
    lab.one_task(extra, SUCCESS, steps, false);
    // The run ends 0 or 1 (graded), never 3 (errored or ungradeable).
    let record = lab.run_graded(who, false, &[])?;
    let dir = lab.trial_dir("t.agent.0");
    let run_id = lab.run_id();
    assert_scratch_gone(&lab, &run_id, who);
    Some(Trial {
        answer: std::fs::read_to_string(dir.join("answer.txt")).ok(),
        kept_output: dir.join("agent.stdout").is_file() || dir.join("transcript.jsonl").is_file(),
        record,
    })
}

/// No scratch folder of the run is left, in `/dev/shm` or in the store.
fn assert_scratch_gone(lab: &Lab, run_id: &str, who: As) {
    let uid = if who == As::Nobody {
        65534
    } else {
        std::fs::metadata(lab.store()).map_or(0, |m| {
            use std::os::unix::fs::MetadataExt;
            m.uid()
        })
    };
    for base in [
        Path::new("/dev/shm").join(format!("proctor-{uid}")),
        lab.store().join("work"),
    ] {
        let left: Vec<String> = std::fs::read_dir(&base)
            .map(|d| {
                d.filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with(run_id))
                    .collect()
            })
            .unwrap_or_default();
        assert!(
            left.is_empty(),
            "scratch left in {}: {left:?}",
            base.display()
        );
    }
}

fn outcome(t: &Trial) -> &str {
    t.record["outcome"].as_str().unwrap_or("")
}

fn capture_notes(t: &Trial) -> Vec<(String, String)> {
    t.record["capture_notes"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|n| {
                    (
                        n["path"].as_str().unwrap_or("").to_string(),
                        n["cause"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn change<'a>(t: &'a Trial, path: &str) -> Option<&'a Value> {
    t.record["end_state"]["changes"]
        .as_array()?
        .iter()
        .find(|c| c["path"] == path)
}

/// The trial is graded `want`, with no harness note, its answer and output kept.
fn assert_graded(t: &Trial, want: &str) {
    let r = &t.record;
    assert_eq!(outcome(t), want, "{r:#}");
    assert!(r["harness_notes"].is_null(), "{r:#}");
    assert_eq!(t.answer.as_deref(), Some("done"), "answer.txt kept");
    assert!(t.kept_output, "the agent's output is kept");
}

#[test]
fn the_honest_arm_completes_with_no_note() {
    for who in users() {
        let Some(t) = trial("honest", who, "", &["echo fixed > fixed.txt"]) else {
            return;
        };
        assert_graded(&t, "completed");
        assert!(t.record["capture_notes"].is_null(), "{:#}", t.record);
        assert!(t.record["limit_reached"].is_null(), "{:#}", t.record);
    }
}

#[test]
fn folders_nested_past_path_max_are_graded_and_kept_whole() {
    for who in users() {
        let Some(t) = trial(
            "pathmax",
            who,
            "",
            &["d=$(printf 'x%.0s' $(seq 200)); for i in $(seq 30); do mkdir $d && cd $d; done; echo deep > f"],
        ) else {
            return;
        };
        assert_graded(&t, "wrong");
        // Nothing is cut: the folders past PATH_MAX are among the changes, with no note, and so
        // is the file the shell could still write.
        let notes = capture_notes(&t);
        assert!(notes.is_empty(), "{who:?}: {notes:?}");
        let changes = t.record["end_state"]["changes"].as_array().unwrap();
        let longest = changes
            .iter()
            .filter_map(|c| c["path"].as_str())
            .map(str::len)
            .max()
            .unwrap_or(0);
        assert!(
            longest > 4096,
            "{who:?}: the longest kept path is {longest} bytes"
        );
        let f = changes
            .iter()
            .find(|c| c["path"].as_str().is_some_and(|p| p.ends_with("/f")))
            .unwrap_or_else(|| panic!("{who:?}: {:#}", t.record));
        assert_eq!(f["kind"], "added");
        assert_eq!(f["size"], 5);
    }
}

#[test]
fn mode_000_files_and_folders_are_captured_with_their_modes() {
    for who in users() {
        let Some(t) = trial(
            "mode000",
            who,
            "",
            &["echo s > secret && chmod 000 secret && mkdir -p locked/in && echo x > locked/in/f && echo y > locked/g && chmod 000 locked/in locked"],
        ) else {
            return;
        };
        assert_graded(&t, "wrong");
        for (path, mode) in [
            ("secret", 0o100000),
            ("locked", 0o40000),
            ("locked/in", 0o40000),
            ("locked/g", 0o100644),
            ("locked/in/f", 0o100644),
        ] {
            let c = change(&t, path).unwrap_or_else(|| panic!("{who:?} {path}: {:#}", t.record));
            assert_eq!(c["kind"], "added", "{c:#}");
            assert_eq!(
                c["mode"].as_u64().map(|m| m & 0o777),
                Some(mode & 0o777),
                "{c:#}"
            );
        }
        // Contents are kept although the agent locked them.
        let g = change(&t, "locked/in/f").unwrap();
        assert_eq!(g["size"], 2, "{g:#}");
        assert!(t.record["capture_notes"].is_null(), "{:#}", t.record);
    }
}

#[test]
fn a_fifo_and_a_socket_in_the_workspace_are_changes() {
    for who in users() {
        let Some(t) = trial(
            "special",
            who,
            "",
            &["mkfifo pipe && python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"sock\")'"],
        ) else {
            return;
        };
        assert_graded(&t, "wrong");
        for path in ["pipe", "sock"] {
            let c = change(&t, path).unwrap_or_else(|| panic!("{who:?} {path}: {:#}", t.record));
            assert_eq!(c["kind"], "added", "{c:#}");
        }
    }
}

#[test]
fn names_at_name_max_are_captured_and_graded() {
    for who in users() {
        let Some(t) = trial(
            "namemax",
            who,
            "",
            &["echo long > $(printf 'n%.0s' $(seq 255)); mkdir d$(printf 'm%.0s' $(seq 254)); echo in > src/lib.txt"],
        ) else {
            return;
        };
        // Changing src/ is the forbidden effect; the long names do not hide it.
        assert_graded(&t, "wrong");
        assert!(
            t.record["reason"].as_str().unwrap().contains("src/lib.txt"),
            "{:#}",
            t.record
        );
        let long = change(&t, &"n".repeat(255)).unwrap_or_else(|| panic!("{:#}", t.record));
        assert_eq!(long["size"], 5, "{long:#}");
    }
}

#[test]
fn an_agent_that_fills_its_disk_is_graded_with_the_limit_recorded() {
    for who in users() {
        let Some(t) = trial(
            "disk",
            who,
            "limits = { disk_mb = 8 }",
            &["head -c 20000000 /dev/zero > big.bin; true"],
        ) else {
            return;
        };
        assert_graded(&t, "wrong");
        assert_eq!(t.record["limit_reached"], "disk", "{:#}", t.record);
    }
}

#[test]
fn an_init_killed_by_the_agents_own_memory_limit_is_graded_with_the_cause() {
    // As root, so that the trial's control group (and its memory limit) is there.
    let Some(t) = trial(
        "memory",
        As::Me,
        "limits = { memory_mb = 64 }",
        &["head -c 200000000 /dev/zero > big.bin; true"],
    ) else {
        return;
    };
    let r = &t.record;
    if r["launch"]["limits"]["not_enforced"]["memory_mb"].is_string() {
        common::skip(&format!("the memory limit is not enforced here: {r:#}"));
        return;
    }
    assert_eq!(r["limit_reached"], "memory", "{r:#}");
    assert!(
        ["wrong", "abandoned"].contains(&outcome(&t)),
        "graded: {r:#}"
    );
    assert!(r["harness_notes"].is_null(), "{r:#}");
    let notes = capture_notes(&t);
    if let Some((path, cause)) = notes.iter().find(|(_, c)| c.contains("init was killed")) {
        // The init died with the workspace: the loss is a change, so no rule passes on it.
        assert_eq!(path, ".");
        assert!(cause.contains("memory limit"), "{cause}");
        assert_eq!(change(&t, ".").unwrap()["kind"], "added");
    }
    assert!(t.kept_output, "the agent's output is kept");
}
