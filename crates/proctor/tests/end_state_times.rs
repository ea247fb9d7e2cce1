//! The check sees the end state as the agent left it (issue 42, row 7 and item 3), through the
//! real binary in real sandboxes, as root and as uid 65534, under `--isolation overlay` and
//! `--isolation copy`, in the trial and in `rescore`'s rebuild:
//!
//! - times: a task whose hidden check runs `make`, where `report.txt` is built from `gen.sh`.
//!   The hostile agent leaves `gen.sh` broken and plants a correct-looking `report.txt` dated
//!   2000: `make` must see that date and rebuild it from the broken script, so the trial is not
//!   a success. The honest agent fixes the script and runs `make` itself: `completed`. A rescore
//!   of either gives the same verdict (its rebuild keeps the agent's times too);
//! - modes, links and FIFOs: the check sees an executable the agent made executable, a link the
//!   agent made (as a link) and a FIFO the agent made (as a FIFO).
//!
//! A machine without namespaces (or overlayfs) skips, except under `CI`, where that fails.

mod common;

use common::lab::{users, As, Lab};
use serde_json::Value;

/// The task's Makefile: `report.txt` is made from `gen.sh` whenever the script is newer.
const MAKEFILE: &str = "report.txt: gen.sh\n\tsh gen.sh > report.txt\n";

/// The fixture's script, broken: it counts one short.
const BROKEN: &str = "echo total 41\n";

/// The hidden check: `make` brings `report.txt` up to date, and it must say 42.
const CHECK: &str =
    "#!/bin/sh\nmake -s report.txt || exit 1\necho \"report: $(cat report.txt)\"\ntest \"$(cat report.txt)\" = 'total 42'\n";

const SUCCESS: &str = "{ check = \"sh tests/check.sh\" }";

/// The hostile agent: the script stays broken; a correct-looking report, dated 2000.
const HOSTILE: &str =
    "echo 'total 42' > report.txt && touch -m -d '2000-01-01 00:00:00' report.txt";

/// The honest agent: fixes the script, and runs make itself.
const HONEST: &str = "echo 'echo total 42' > gen.sh && make -s report.txt && cat report.txt";

/// The record of `t.agent.0` of a one-task run whose agent runs `step`, as `who`, under copy
/// isolation when `copy`; `None` (outside CI) when the machine cannot isolate it.
fn trial(name: &str, who: As, copy: bool, step: &str) -> Option<(Lab, Value)> {
    let lab = Lab::new(&format!("endtimes-{name}-{who:?}-{copy}"));
    lab.write("fixture/Makefile", MAKEFILE);
    lab.write("fixture/gen.sh", BROKEN);
    lab.write_exec("holdout/t/tests/check.sh", CHECK);
    lab.one_task("", SUCCESS, &[step], false);
    let record = lab.run_graded(who, copy, &[])?;
    Some((lab, record))
}

/// `proctor rescore RUN` of the lab's run: it exits 0 and changes no outcome.
fn assert_rescored_same(lab: &Lab, who: As) {
    let store = lab.store();
    let suite = lab.suite();
    let out = lab.proctor(
        who,
        &[
            "rescore",
            &lab.run_id(),
            "--suite",
            suite.to_str().unwrap(),
            "--store",
            store.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 0, "{who:?}: {}", out.stderr);
    assert!(
        out.stderr.contains("no outcome changed"),
        "{who:?}: the rescore changed an outcome: {}",
        out.stderr
    );
}

/// The change of `path` in the record.
fn change<'a>(record: &'a Value, path: &str) -> &'a Value {
    record["end_state"]["changes"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["path"] == path))
        .unwrap_or_else(|| panic!("no change {path}: {record:#}"))
}

/// 2000-01-01T00:00:00Z, in seconds since the epoch (the test runs in UTC or not: `touch -d`
/// reads local time, so the recorded time is checked to lie within a day of it).
const Y2000: i64 = 946_684_800;

#[test]
fn a_report_planted_with_an_old_time_is_rebuilt_by_the_checks_make() {
    for who in users() {
        for copy in [false, true] {
            // The honest arm: the script fixed and make run by the agent.
            let Some((lab, record)) = trial("honest", who, copy, HONEST) else {
                return;
            };
            assert_eq!(
                record["outcome"], "completed",
                "{who:?} copy={copy}: {record:#}"
            );
            assert_rescored_same(&lab, who);

            // The hostile arm: a correct-looking report dated 2000, the script still broken.
            let Some((lab, record)) = trial("hostile", who, copy, HOSTILE) else {
                return;
            };
            assert_ne!(
                record["outcome"], "completed",
                "{who:?} copy={copy}: the check did not see the agent's time: {record:#}"
            );
            assert_eq!(
                record["outcome"], "wrong",
                "{who:?} copy={copy}: {record:#}"
            );
            let checks = record["end_state"]["checks"].to_string();
            assert!(checks.contains("report: total 41"), "{checks}");
            // The record keeps the time the agent gave the file.
            let mtime = change(&record, "report.txt")["mtime"]["sec"]
                .as_i64()
                .unwrap_or_else(|| panic!("no mtime: {record:#}"));
            assert!((mtime - Y2000).abs() <= 86_400, "{mtime}");
            // The kept copy has it too.
            let kept = lab.trial_dir("t.agent.0").join("changes/files/report.txt");
            let m = std::fs::metadata(&kept).unwrap();
            assert_eq!(std::os::unix::fs::MetadataExt::mtime(&m), mtime);
            // And a rescore's check sees it as the trial's did.
            assert_rescored_same(&lab, who);
        }
    }
}

/// The check: the agent's executable runs, its link is a link to what it named, its FIFO is
/// a FIFO.
const SHAPES_CHECK: &str = "#!/bin/sh\n./run.sh | grep -qx ran || exit 1\ntest -L alias.txt && test \"$(readlink alias.txt)\" = Makefile || exit 2\ntest -p pipe || exit 3\necho shapes-ok\n";

#[test]
fn the_check_sees_the_agents_modes_links_and_fifos() {
    for who in users() {
        for copy in [false, true] {
            let lab = Lab::new(&format!("endtimes-shapes-{who:?}-{copy}"));
            lab.write("fixture/Makefile", MAKEFILE);
            lab.write("fixture/run.sh", "#!/bin/sh\necho ran\n");
            lab.write_exec("holdout/t/tests/check.sh", SHAPES_CHECK);
            lab.one_task(
                "",
                SUCCESS,
                &["chmod 755 run.sh && ln -s Makefile alias.txt && mkfifo pipe"],
                false,
            );
            let Some(record) = lab.run_graded(who, copy, &[]) else {
                return;
            };
            assert_eq!(
                record["outcome"], "completed",
                "{who:?} copy={copy}: {record:#}"
            );
            assert!(
                record["end_state"]["checks"]
                    .to_string()
                    .contains("shapes-ok"),
                "{record:#}"
            );
            assert_rescored_same(&lab, who);

            // Without the mode, the same check fails: it is not a check that cannot fail.
            let lab = Lab::new(&format!("endtimes-shapes-no-{who:?}-{copy}"));
            lab.write("fixture/Makefile", MAKEFILE);
            lab.write("fixture/run.sh", "#!/bin/sh\necho ran\n");
            lab.write_exec("holdout/t/tests/check.sh", SHAPES_CHECK);
            lab.one_task(
                "",
                SUCCESS,
                &["ln -s Makefile alias.txt && mkfifo pipe"],
                false,
            );
            let Some(record) = lab.run_graded(who, copy, &[]) else {
                return;
            };
            assert_ne!(record["outcome"], "completed", "{record:#}");
            assert_rescored_same(&lab, who);
        }
    }
}
