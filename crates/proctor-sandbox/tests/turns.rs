//! Conversations: the agent run again, turn after turn, in one sandbox (real namespaces, real
//! overlay, real processes; and the same without namespaces).

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use proctor_sandbox::turns::{NextCommand, TurnEnd};
use proctor_sandbox::{probe, run_conversation, SandboxReport, SandboxSpec, Workspace};

/// A trial's scratch: fixture, upper, work, outputs.
struct Scratch {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = proctor_sandbox::remove_tree(&self.root);
    }
}

impl Scratch {
    fn new() -> Scratch {
        let caps = probe();
        assert!(
            caps.overlay_sandbox(),
            "these tests need user namespaces and overlayfs with userxattr: {caps:?}"
        );
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().to_owned();
        for d in ["lower", "upper", "work", "out", "copy"] {
            fs::create_dir_all(root.join(d)).expect("mkdir");
        }
        Scratch { _tmp: tmp, root }
    }

    /// A conversation of at most `max_turns` whose first turn is `sh -c script`.
    fn spec(&self, script: &str, max_turns: u32) -> SandboxSpec {
        let mut s = SandboxSpec::new(
            PathBuf::from(env!("CARGO_BIN_EXE_proctor-sandbox-testinit")),
            Workspace::Overlay {
                lowers: vec![self.root.join("lower")],
                upper: self.root.join("upper"),
                work: self.root.join("work"),
            },
            sh(script),
            self.root.join("out/stdout"),
            self.root.join("out/stderr"),
            Duration::from_secs(30),
        );
        s.grace = Duration::from_millis(300);
        s.max_turns = max_turns;
        s
    }

    /// The same, without namespaces, in a plain folder.
    fn host_spec(&self, script: &str, max_turns: u32) -> SandboxSpec {
        let mut s = self.spec(script, max_turns);
        s.namespaces = false;
        s.workspace = Workspace::Bind {
            dir: self.root.join("copy"),
        };
        s
    }

    fn stdout(&self) -> String {
        fs::read_to_string(self.root.join("out/stdout")).unwrap_or_default()
    }
}

fn sh(script: &str) -> Vec<String> {
    vec!["sh".into(), "-c".into(), script.into()]
}

/// A next turn running `script` with `VAR=value` in the environment of `spec`.
fn next(spec: &SandboxSpec, script: &str, var: (&str, &str)) -> NextCommand {
    let mut env = spec.env.clone();
    env.push((var.0.into(), var.1.into()));
    NextCommand {
        command: sh(script),
        env,
        timeout: None,
    }
}

/// Runs `spec`, answering each turn's end from `replies` in order (then ending), and gives the
/// report and the ends it was told of.
fn converse(spec: &SandboxSpec, replies: Vec<NextCommand>) -> (SandboxReport, Vec<TurnEnd>) {
    let mut replies = replies.into_iter();
    let mut ends = Vec::new();
    let report = run_conversation(spec, &mut |end| {
        ends.push(end.clone());
        replies.next()
    })
    .expect("the conversation runs");
    (report, ends)
}

#[test]
fn each_turn_runs_in_the_same_workspace_with_a_fresh_process_tree_and_its_own_output() {
    let s = Scratch::new();
    let spec = s.spec(
        "echo one; echo made > note.txt; m=turn-one-; sh -c 'sleep 300; :' \"${m}marker\" & sleep 0.3; \
         grep -l 'turn-one-[m]arker' /proc/[0-9]*/cmdline 2>/dev/null | wc -l",
        3,
    );
    let second = next(
        &spec,
        "cat note.txt; echo \"reply=$REPLY\"; \
         grep -l 'turn-one-[m]arker' /proc/[0-9]*/cmdline 2>/dev/null | wc -l; exit 3",
        ("REPLY", "production"),
    );
    let (report, ends) = converse(&spec, vec![second]);

    assert_eq!(ends.len(), 2, "told after turn 1 and turn 2: {ends:?}");
    assert_eq!(ends[0].turn, 1);
    assert_eq!(ends[0].exit.as_ref().and_then(|e| e.code), Some(0));
    let out = s.stdout();
    let first = &out[..ends[0].stdout_end as usize];
    assert_eq!(
        first, "one\n1\n",
        "turn 1's output ends where it said, and its background process ran"
    );
    assert_eq!(
        &out[ends[0].stdout_end as usize..],
        "made\nreply=production\n0\n",
        "turn 2 sees turn 1's file and its own environment, and none of turn 1's processes"
    );
    assert_eq!(report.turns.len(), 2);
    assert_eq!(report.turns[1].exit.as_ref().and_then(|e| e.code), Some(3));
    assert_eq!(
        report.exit_code,
        Some(3),
        "the report ends as the last turn"
    );
    assert!(report.turns[1].started > Duration::ZERO);
    assert!(report.not_started.is_none());
    assert_eq!(
        fs::read_to_string(s.root.join("upper/note.txt")).unwrap(),
        "made\n",
        "the workspace's changes of every turn are captured at the end"
    );
}

#[test]
fn a_conversation_stops_at_its_most_turns_and_one_clock_bounds_them_all() {
    let s = Scratch::new();
    let spec = s.spec("echo 1", 3);
    let again = |n: &str| next(&spec, &format!("echo {n}"), ("N", n));
    let (report, ends) = converse(&spec, vec![again("2"), again("3"), again("4")]);
    assert_eq!(report.turns.len(), 3, "max_turns = 3");
    assert_eq!(ends.len(), 2, "after the last turn allowed nobody is asked");
    assert_eq!(s.stdout(), "1\n2\n3\n");

    let s = Scratch::new();
    let mut spec = s.spec("sleep 0.5; echo first", 5);
    spec.wall_timeout = Duration::from_secs(2);
    let slow = next(&spec, "sleep 30", ("X", "1"));
    let never = next(&spec, "echo never", ("X", "2"));
    let (report, ends) = converse(&spec, vec![slow, never]);
    assert_eq!(report.turns.len(), 2);
    assert!(report.turns[1].timed_out, "{:?}", report.turns);
    assert!(report.timed_out);
    assert_eq!(
        ends.len(),
        1,
        "a turn stopped at the timeout ends the conversation"
    );
    assert!(!s.stdout().contains("never"));
}

#[test]
fn a_turn_with_a_timeout_of_its_own_is_stopped_at_it_and_the_conversation_goes_on() {
    let s = Scratch::new();
    let spec = s.spec("echo first", 3);
    let mut slow = next(&spec, "echo slow; sleep 30", ("X", "1"));
    slow.timeout = Some(Duration::from_millis(500));
    let after = next(&spec, "echo after", ("X", "2"));
    let (report, ends) = converse(&spec, vec![slow, after]);
    assert_eq!(report.turns.len(), 3, "{:?}", report.turns);
    assert!(report.turns[1].timed_out && !report.turns[2].timed_out);
    assert!(report.turns[1].wall < Duration::from_secs(10));
    assert_eq!(ends.len(), 2);
    assert_eq!(s.stdout(), "first\nslow\nafter\n");
}

#[test]
fn a_later_turn_that_cannot_start_is_that_turns_failure_not_an_agent_that_never_ran() {
    let s = Scratch::new();
    let spec = s.spec("echo asked", 2);
    let broken = NextCommand {
        command: vec!["/no/such/program".into()],
        env: spec.env.clone(),
        timeout: None,
    };
    let (report, _) = converse(&spec, vec![broken]);
    assert!(report.not_started.is_none(), "{:?}", report.not_started);
    assert_eq!(report.turns.len(), 2);
    assert!(
        report.turns[1].exec_failed.is_some(),
        "the second turn says why it did not run: {:?}",
        report.turns[1]
    );
}

#[test]
fn without_namespaces_a_conversation_runs_the_same_way() {
    let s = Scratch::new();
    let spec = s.host_spec("echo one; echo made > note.txt", 2);
    let second = next(&spec, "cat note.txt; echo \"$REPLY\"", ("REPLY", "yes"));
    let (report, ends) = converse(&spec, vec![second]);
    assert_eq!(report.turns.len(), 2);
    assert_eq!(ends[0].stdout_end, 4);
    assert_eq!(s.stdout(), "one\nmade\nyes\n");

    let one_turn = s.host_spec("true", 1);
    let (report, ends) = converse(&one_turn, vec![]);
    assert!(
        ends.is_empty() && report.turns.is_empty(),
        "one turn is no conversation"
    );
}
