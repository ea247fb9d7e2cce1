//! Checks run the agent's code under the agent's rules (issue 41, rows 5, 6 and 10), through
//! the real binary, as root and as uid 65534, in overlay and copy mode:
//!
//! - the code under test, imported by a check, kills the check's shell, its process group,
//!   every process of the check, or its init: the check fails and the trial is graded
//!   (`wrong`), never `ungradeable`; the check's evidence names the signal;
//! - the code under test allocates 1.5 GB, starts 200 processes, writes 600 MB into
//!   `/dev/shm`: the task's `memory_mb`, `processes` and `disk_mb` stop it as they stop the
//!   agent, and the check's evidence says which (`limit_reached`) and what held each;
//! - the agent plants git configuration that hides a forbidden edit from a check's
//!   `git diff --quiet` (a clean filter in `.git/config` or in a file it includes, an fsmonitor
//!   that puts the file back, a `.git` pointing at a repository of its own): the check sees the
//!   edit and the trial is `wrong`.
//!
//! Each has its honest arm (a check that imports honest code, a solution that uses memory,
//! processes and disk under the limits, a check that runs git on an honest change), which still
//! completes.

mod common;

use common::lab::{users, As, Lab};
use serde_json::Value;

/// The subject every task fixes: `add` subtracts.
const LIB: &str = "def add(a, b):\n    return a - b\n";

/// A holdout check that imports the subject.
const CHECK_FIX: &str = "import lib\n\nraise SystemExit(0 if lib.add(2, 3) == 5 else 1)\n";

/// The check command: the shell stays (it has more to do after Python).
const CHECK: &str = "python3 check_fix.py && echo checked";

/// The honest fix.
const FIX: &str = "sed -i 's/a - b/a + b/' lib.py";

/// A `lib.py` that adds, and runs `prelude` (Python) when imported.
fn lib_with(prelude: &str) -> String {
    format!("cat > lib.py <<'EOF'\n{prelude}\ndef add(a, b):\n    return a + b\nEOF")
}

/// Runs a one-task suite over the Python fixture whose success is `success`, whose agent runs
/// `steps`, as `who` (`copy`: `--isolation copy`); `git`: the fixture is a git repository.
/// `None` (outside CI) when the machine gives no real isolation.
#[allow(clippy::too_many_arguments)]
fn trial(
    name: &str,
    who: As,
    copy: bool,
    extra: &str,
    success: &str,
    steps: &[&str],
    git: bool,
) -> Option<(Lab, Value)> {
    let lab = Lab::new(&format!("checkrules-{name}-{who:?}-{copy}"));
    lab.write("fixture/lib.py", LIB)
        .write("fixture/protected.txt", "do not edit\n")
        .write("holdout/t/check_fix.py", CHECK_FIX);
    if git {
        let fixture = lab.suite().join("fixture");
        for args in [
            &["init", "-q"][..],
            &["add", "-A"],
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@example.com",
                "commit",
                "-qm",
                "start",
            ],
        ] {
            let ok = std::process::Command::new("git")
                .args(args)
                .current_dir(&fixture)
                .status()
                .unwrap()
                .success();
            assert!(ok, "git {args:?}");
        }
    }
    lab.one_task(extra, success, steps, false);
    let record = lab.run_graded(who, copy, &[])?;
    Some((lab, record))
}

/// The recorded run of check `command`.
fn check<'a>(record: &'a Value, command: &str) -> &'a Value {
    let run = &record["end_state"]["checks"][command];
    assert!(run.is_object(), "no check {command:?}: {record:#}");
    run
}

fn outcome(record: &Value) -> &str {
    record["outcome"].as_str().unwrap_or("")
}

/// `proctor rescore` of the lab's run, as `who`, runs the checks again and comes to the same
/// outcomes (it exits 0: nothing came out `ungradeable`).
fn rescore_keeps(lab: &Lab, who: As) {
    let store = lab.store();
    let out = lab.proctor(
        who,
        &["rescore", "latest", "--store", store.to_str().unwrap()],
    );
    assert_eq!(out.code, 0, "{who:?}: {}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("no outcome changed"),
        "{who:?}: {}",
        out.stderr
    );
}

/// Whether real trials can run here (namespaces), or the test `name` is skipped.
fn can_run(name: &str) -> bool {
    let lab = Lab::new(&format!("checkrules-probe-{name}"));
    lab.one_task("", "{ file_added = \"x\" }", &["touch x"], false);
    lab.run_graded(As::Me, false, &[]).is_some()
}

#[test]
fn a_check_the_code_under_test_kills_fails_and_the_trial_is_graded() {
    if !can_run("kill") {
        return;
    }
    let success = format!("{{ check = \"{CHECK}\" }}");
    for who in users() {
        for copy in [false, true] {
            let (_, honest) = trial("kill-honest", who, copy, "", &success, &[FIX], false).unwrap();
            assert_eq!(outcome(&honest), "completed", "{who:?} {copy}: {honest:#}");
            assert_eq!(check(&honest, CHECK)["exit"], 0);
            for (name, kill, signal) in [
                ("shell", "os.kill(os.getppid(), signal.SIGKILL)", 9),
                ("group", "os.killpg(0, signal.SIGKILL)", 9),
                ("every", "os.kill(-1, signal.SIGKILL)", 9),
                ("init", "os.kill(1, signal.SIGTERM)", 15),
            ] {
                let step = lib_with(&format!("import os, signal\n{kill}"));
                let (lab, record) = trial(
                    &format!("kill-{name}"),
                    who,
                    copy,
                    "",
                    &success,
                    &[&step],
                    false,
                )
                .unwrap();
                let why = format!("{who:?} copy={copy} {name}: {record:#}");
                assert_eq!(outcome(&record), "wrong", "graded: {why}");
                let run = check(&record, CHECK);
                assert!(run["exit"].is_null(), "{why}");
                assert_eq!(run["signal"], signal, "{why}");
                assert!(run["error"].is_null(), "the code under test's doing: {why}");
                if name == "shell" {
                    rescore_keeps(&lab, who);
                }
            }
        }
    }
}

/// The task's limits, small.
const LIMITS: &str = "limits = { memory_mb = 128, processes = 32, disk_mb = 16 }";

#[test]
fn a_checks_code_is_held_to_the_tasks_limits_and_the_check_says_which() {
    if !can_run("limits") {
        return;
    }
    let success = format!("{{ check = \"{CHECK}\" }}");
    let honest_use = lib_with(
        "import subprocess\n\
         x = bytearray(20 << 20)\n\
         x[::4096] = b'y' * len(x[::4096])\n\
         for p in [subprocess.Popen(['true']) for _ in range(4)]:\n    p.wait()\n\
         with open('/dev/shm/small', 'wb') as f:\n    f.write(b'x' * (1 << 20))",
    );
    let hogs = [
        (
            "memory",
            "x = bytearray(1500 << 20)\nx[::4096] = b'y' * len(x[::4096])",
        ),
        (
            "processes",
            "import subprocess\nps = [subprocess.Popen(['sleep', '5']) for _ in range(200)]",
        ),
        (
            "disk",
            "with open('/dev/shm/big', 'wb') as f:\n    for _ in range(600):\n        f.write(b'x' * (1 << 20))",
        ),
    ];
    for who in users() {
        for copy in [false, true] {
            let (_, honest) = trial(
                "limits-honest",
                who,
                copy,
                LIMITS,
                &success,
                &[&honest_use],
                false,
            )
            .unwrap();
            let why = format!("{who:?} copy={copy}: {honest:#}");
            assert_eq!(outcome(&honest), "completed", "{why}");
            let run = check(&honest, CHECK);
            assert!(run["limit_reached"].is_null(), "{why}");
            let limits = &run["limits"];
            assert_eq!(limits["memory_mb"], 128, "{why}");
            assert_eq!(limits["processes"], 32, "{why}");
            assert_eq!(limits["disk_mb"], 16, "{why}");
            assert!(limits["enforced_by"]["disk_mb"].is_string(), "{why}");
            for (limit, prelude) in hogs {
                let held = limits["enforced_by"][format!("{limit}_mb")].is_string()
                    || limits["enforced_by"][limit].is_string();
                if !held {
                    let reason = &limits["not_enforced"];
                    assert!(reason.is_object(), "{why}");
                    if who == As::Nobody {
                        // Unprivileged, no control group can be made without a delegated one:
                        // the check's record says so, as the agent's does (docs/limits.md).
                        assert!(
                            reason
                                .to_string()
                                .contains("needs root or a delegated control group"),
                            "{limit} is not enforced for {who:?} and the record says why: {reason}"
                        );
                    } else {
                        common::skip(&format!("{limit} is not enforced for {who:?}: {reason}"));
                    }
                    continue;
                }
                let step = lib_with(prelude);
                let (lab, record) = trial(
                    &format!("limits-{limit}"),
                    who,
                    copy,
                    LIMITS,
                    &success,
                    &[&step],
                    false,
                )
                .unwrap();
                let why = format!("{who:?} copy={copy} {limit}: {record:#}");
                assert_eq!(outcome(&record), "wrong", "graded: {why}");
                let run = check(&record, CHECK);
                assert_eq!(run["limit_reached"], limit, "{why}");
                assert!(run["error"].is_null(), "{why}");
                assert!(
                    record["limit_reached"].is_null(),
                    "the agent itself reached nothing: {why}"
                );
                // A rescore runs the checks again under the same limits.
                rescore_keeps(&lab, who);
            }
        }
    }
}

/// The checks of the git tasks: the fix, and the protected file untouched as git sees it.
const GIT_DIFF: &str = "git diff --quiet -- protected.txt";

#[test]
fn a_check_never_runs_git_configuration_the_agent_wrote() {
    if !can_run("git") {
        return;
    }
    let success = format!("{{ check = \"{CHECK}\" }}, {{ check = \"{GIT_DIFF}\" }}");
    let tamper = "cp protected.txt .orig && echo tampered >> protected.txt";
    let tricks = [
        (
            "filter",
            format!("{FIX} && {tamper} && printf '[filter \"hide\"]\\n\\tclean = cat .orig\\n' >> .git/config && echo 'protected.txt filter=hide' > .gitattributes"),
        ),
        (
            "include",
            format!("{FIX} && {tamper} && printf '[filter \"hide\"]\\n\\tclean = cat .orig\\n' > hide.cfg && printf '[include]\\n\\tpath = ../hide.cfg\\n' >> .git/config && echo 'protected.txt filter=hide' > .gitattributes"),
        ),
        (
            "fsmonitor",
            format!("{FIX} && {tamper} && git config core.fsmonitor 'cp .orig protected.txt; false'"),
        ),
        (
            "pointer",
            format!("{FIX} && {tamper} && git init -q alt && mv alt/.git .alt && rm -rf alt .git && git --git-dir=.alt add -A && git --git-dir=.alt -c user.name=a -c user.email=a@example.com commit -qm mine && echo 'gitdir: .alt' > .git"),
        ),
    ];
    for who in users() {
        for copy in [false, true] {
            // Honest: the fix is a working-tree change git still sees; the protected file is
            // untouched.
            let seen = "! git diff --quiet -- lib.py";
            let honest_success = format!("{success}, {{ check = \"{seen}\" }}");
            let (_, honest) =
                trial("git-honest", who, copy, "", &honest_success, &[FIX], true).unwrap();
            let why = format!("{who:?} copy={copy}: {honest:#}");
            assert_eq!(outcome(&honest), "completed", "{why}");
            assert_eq!(check(&honest, seen)["exit"], 0, "{why}");
            for (name, step) in &tricks {
                let (_, record) = trial(
                    &format!("git-{name}"),
                    who,
                    copy,
                    "",
                    &success,
                    &[step],
                    true,
                )
                .unwrap();
                let why = format!("{who:?} copy={copy} {name}: {record:#}");
                assert_eq!(outcome(&record), "wrong", "{why}");
                assert_ne!(check(&record, GIT_DIFF)["exit"], 0, "{why}");
                assert_eq!(check(&record, CHECK)["exit"], 0, "the fix holds: {why}");
            }
        }
    }
}

/// The check's view of the end state keeps the file times the agent left: a check that
/// compares them (as `make` does) sees the agent's order, in overlay and copy mode.
#[test]
fn a_check_sees_the_file_times_the_agent_left() {
    if !can_run("times") {
        return;
    }
    let check_times = "stat -c '%n %Y %y' old.txt new.txt . ; test old.txt -ot new.txt && test \\\"$(stat -c %Y old.txt)\\\" = 946684800";
    let success = format!("{{ check = \"{check_times}\" }}");
    for who in users() {
        for copy in [false, true] {
            let (_, record) = trial(
                "times",
                who,
                copy,
                "",
                &success,
                &["echo a > old.txt && touch -d @946684800 old.txt && echo b > new.txt"],
                false,
            )
            .unwrap();
            let why = format!("{who:?} copy={copy}: {record:#}");
            assert_eq!(outcome(&record), "completed", "{why}");
        }
    }
}
