//! Per-trial resource limits through the real binary, with hostile agents: one that allocates
//! more memory than its limit, one that forks past its process limit, one that fills its disk
//! (with bytes, or with entries), one that prints without end. Each trial is graded from its end
//! state like any other, and its record says which limit it reached and how each limit was
//! enforced.

mod common;

use common::lab::{users, As, Lab};
use serde_json::Value;

/// Runs the lab's suite and returns the one trial's record.
fn run_one(lab: &Lab) -> Value {
    let out = lab.run(As::Me, &[]);
    assert!(
        out.code == 0 || out.code == 1,
        "run failed ({}): {}\n{}",
        out.code,
        out.stdout,
        out.stderr
    );
    lab.record("t.agent.0")
}

fn limits_of(record: &Value) -> &Value {
    &record["launch"]["limits"]
}

/// Whether the record says `key` was enforced; when not, the reason is printed and must exist.
fn enforced(record: &Value, key: &str) -> bool {
    let l = limits_of(record);
    if let Some(why) = l["not_enforced"][key].as_str() {
        assert!(!why.is_empty(), "{l:#}");
        common::skip(&format!("{key} is not enforced on this machine: {why}"));
        return false;
    }
    assert!(l["enforced_by"][key].is_string(), "{l:#}");
    true
}

#[test]
fn a_trial_within_its_limits_records_them_and_reaches_none() {
    let lab = Lab::new("limits-none");
    lab.one_task(
        "",
        "{ file_added = \"out.txt\" }",
        &["echo hi > out.txt"],
        false,
    );
    let record = run_one(&lab);
    assert_eq!(record["outcome"], "completed", "{record:#}");
    assert!(record["limit_reached"].is_null(), "{record:#}");
    let l = limits_of(&record);
    assert_eq!(l["memory_mb"], 4096, "the defaults are in force: {l:#}");
    assert_eq!(l["processes"], 4096);
    assert_eq!(l["disk_mb"], 4096);
    assert_eq!(l["output_mb"], 64);
    assert!(enforced(&record, "disk_mb") && enforced(&record, "output_mb"));
}

#[test]
fn an_agent_that_fills_its_disk_gets_enospc_and_is_graded_from_what_it_wrote() {
    let lab = Lab::new("limits-disk");
    lab.one_task(
        "limits = { disk_mb = 8 }",
        "{ file_added = \"before.txt\" }",
        &[
            "echo kept > before.txt",
            "head -c 20000000 /dev/zero > big.bin; echo \"dd exit $?\" > /tmp/status; true",
        ],
        false,
    );
    let record = run_one(&lab);
    assert_eq!(record["limit_reached"], "disk", "{record:#}");
    assert_eq!(
        record["outcome"], "completed",
        "graded from the end state: {record:#}"
    );
    let big = record["end_state"]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["path"] == "big.bin")
        .expect("the partial file is recorded")
        .clone();
    assert!(big["size"].as_u64().unwrap() < 8 << 20, "{big:#}");
}

/// A trial's disk holds a bounded count of entries (16,384 for `disk_mb = 16`, one per 16 KiB):
/// an agent that makes files past that gets ENOSPC like a full disk and is graded from what it
/// made, so the count of changes proctor holds while it grades is bounded by the task's
/// `disk_mb`; an agent that stays under the count reaches no limit. In overlay mode and in copy
/// mode alike, where the copy (a start state of 17,000 files and 20 MB, more than the disk's
/// own bound) is held on the disk beside what the agent may write, never counted against it.
/// As this user and as uid 65534.
#[test]
fn an_agent_that_makes_entries_past_its_disk_gets_enospc_and_is_graded() {
    let make = |n: u32| {
        format!(
            "python3 -c 'import os\nos.mkdir(\"many\")\nfor i in range({n}):\n    try: open(\"many/%d\" % i, \"w\").close()\n    except OSError as e: print(e.strerror); break'"
        )
    };
    let arms = [(20_000, true), (9_000, false)];
    for (who, copy, (n, full)) in users().into_iter().flat_map(|who| {
        [false, true]
            .into_iter()
            .flat_map(move |copy| arms.map(|arm| (who, copy, arm)))
    }) {
        let lab = Lab::new(&format!("limits-entries-{n}-{who:?}-{copy}"));
        // The copy's start state: more entries and bytes than the disk's own bound.
        let sees_start = match copy {
            true => "test $(ls start | wc -l) -eq 17000 && test $(stat -c %s big.bin) -eq 20000000",
            false => "true",
        };
        lab.one_task(
            "limits = { disk_mb = 16 }",
            "{ file_added = \"before.txt\" }",
            &["echo kept > before.txt", sees_start, &make(n)],
            true,
        );
        if copy {
            let start = lab.suite().join("fixture/start");
            std::fs::create_dir_all(&start).unwrap();
            for i in 0..17_000 {
                std::fs::write(start.join(i.to_string()), "").unwrap();
            }
            std::fs::write(lab.suite().join("fixture/big.bin"), vec![7u8; 20_000_000]).unwrap();
        }
        let extra: &[&str] = if copy { &["--isolation", "copy"] } else { &[] };
        let out = lab.run(who, extra);
        assert!(out.code == 0 || out.code == 1, "{who:?}: {}", out.stderr);
        let record = lab.record("t.agent.0");
        if !common::lab::real_isolation(&record, copy) || !enforced(&record, "disk_mb") {
            return;
        }
        let why = format!("{who:?} copy={copy} {n}");
        assert_eq!(record["outcome"], "completed", "{why}: graded: {record:#}");
        let changes = record["end_state"]["changes"].as_array().unwrap().len() as u64
            + record["end_state"]["changes_omitted"].as_u64().unwrap_or(0);
        if full {
            assert_eq!(record["limit_reached"], "disk", "{why}: {record:#}");
            assert_eq!(record["end_state"]["answer"], "No space left on device");
            assert!(
                (16_000..=16_384).contains(&changes),
                "{why}: {changes} changes"
            );
        } else {
            assert!(record["limit_reached"].is_null(), "{why}: {record:#}");
            assert_eq!(changes, 9_002, "{why}: before.txt, many/ and its files");
        }
        // The start state came back whole: not one of its entries is a change.
        let listed = record["end_state"]["changes"].to_string();
        assert!(
            !listed.contains("start/") && !listed.contains("big.bin"),
            "{why}"
        );
    }
}

#[test]
fn an_agent_that_prints_without_end_keeps_the_head_and_tail_of_its_output() {
    let lab = Lab::new("limits-output");
    lab.write(
        "suite.toml",
        "schema_version = 1\nid = \"lab\"\n\n[defaults]\nwall_timeout_seconds = 30\nlimits = { output_mb = 1 }\n\n[[variants]]\nid = \"agent\"\nagent = \"command\"\ncommand = [\"sh\", \"-c\", \"echo first; yes '{}' | head -c 30000000; echo last\"]\n\n[[tasks]]\nid = \"t\"\nprompt = \"Talk.\"\n\n[tasks.success]\nall = [{ answer_matches = \"last\" }]\n",
    );
    let record = run_one(&lab);
    assert_eq!(record["limit_reached"], "output", "{record:#}");
    assert_eq!(
        record["outcome"], "completed",
        "the tail holds the answer's end"
    );
    let kept = std::fs::read(lab.trial_dir("t.agent.0").join("agent.stdout")).unwrap();
    assert!(kept.len() <= (1 << 20) + 200, "kept {} bytes", kept.len());
    let text = String::from_utf8_lossy(&kept);
    assert!(text.starts_with("first\n{}\n"), "the head is kept");
    assert!(text.ends_with("{}\nlast\n"), "the tail is kept");
    assert!(
        text.contains("bytes of the agent's stdout cut here"),
        "the cut is marked"
    );
}

#[test]
fn an_agent_that_allocates_past_its_memory_limit_is_stopped_there() {
    let lab = Lab::new("limits-memory");
    lab.one_task(
        "limits = { memory_mb = 64 }",
        "{ file_added = \"before.txt\" }",
        &[
            "echo kept > before.txt",
            "python3 -c 'x = bytearray(400 << 20); x[::4096] = b\"y\" * len(x[::4096]); print(len(x))' > after.txt; true",
        ],
        false,
    );
    let record = run_one(&lab);
    if !enforced(&record, "memory_mb") {
        assert!(record["limit_reached"].is_null(), "{record:#}");
        return;
    }
    assert_eq!(record["limit_reached"], "memory", "{record:#}");
    assert_eq!(
        record["outcome"], "completed",
        "graded from the end state: {record:#}"
    );
    let after = std::fs::read_to_string(lab.trial_dir("t.agent.0").join("changes/files/after.txt"))
        .unwrap_or_default();
    assert_eq!(after, "", "the allocation never finished");
}

#[test]
fn an_agent_that_forks_past_its_process_limit_is_refused_more() {
    let lab = Lab::new("limits-processes");
    lab.one_task(
        "limits = { processes = 16 }",
        "{ file_added = \"count.txt\" }",
        &[
            "echo started > count.txt",
            "for i in $(seq 1 40); do sleep 3 & done; true",
        ],
        false,
    );
    let record = run_one(&lab);
    if !enforced(&record, "processes") {
        assert!(record["limit_reached"].is_null(), "{record:#}");
        return;
    }
    assert_eq!(record["limit_reached"], "processes", "{record:#}");
    assert_eq!(
        record["outcome"], "completed",
        "graded from the end state: {record:#}"
    );
}

#[test]
fn a_limit_out_of_range_is_refused_at_its_value() {
    let lab = Lab::new("limits-range");
    lab.one_task(
        "limits = { memory_mb = 0 }",
        "{ file_added = \"x\" }",
        &["true"],
        false,
    );
    let suite = lab.suite();
    let out = lab.proctor(As::Me, &["validate", suite.to_str().unwrap()]);
    let all = format!("{}{}", out.stdout, out.stderr);
    assert_eq!(out.code, 2, "{all}");
    let flat = common::unwrapped(&all);
    assert!(
        flat.contains("suite.toml:15:24: must be between 1 and 1048576 (MiB, such as 2048), not 0"),
        "names the place and the range: {all}"
    );
    assert!(
        !all.contains("syntax"),
        "a value out of range is not a syntax error: {all}"
    );
}

/// A run reuses a trial's control group for a later trial once the earlier one's processes are
/// gone: each trial gets its own limits written again, and is judged by what the group's
/// counters gained while it ran, so a calm trial after one stopped at its memory or process
/// limit in the same group reaches none, and a hog after a calm trial with higher limits is
/// stopped at its own.
#[test]
fn a_reused_control_group_judges_each_trial_by_its_own_limits_and_counters() {
    let lab = Lab::new("limits-reuse");
    lab.write(
        "suite.toml",
        "schema_version = 1\nid = \"lab\"\n\n[defaults]\nwall_timeout_seconds = 30\n\n\
         [[variants]]\nid = \"agent\"\nagent = \"script\"\nscript = \"agents/agent\"\n\n\
         [[tasks]]\nid = \"hog\"\nprompt = \"p\"\nlimits = { memory_mb = 64 }\n\
         [tasks.success]\nall = [{ file_added = \"cg.txt\" }]\n\n\
         [[tasks]]\nid = \"forker\"\nprompt = \"p\"\nlimits = { processes = 16 }\n\
         [tasks.success]\nall = [{ file_added = \"cg.txt\" }]\n\n\
         [[tasks]]\nid = \"calm\"\nprompt = \"p\"\nlimits = { memory_mb = 256, processes = 64 }\n\
         [tasks.success]\nall = [{ file_added = \"cg.txt\" }]\n",
    );
    let steps = |extra: &str| {
        format!("answer = \"done\"\n\n[[steps]]\nrun = '''grep -E ':(memory|pids):' /proc/self/cgroup > cg.txt'''\n\n[[steps]]\nrun = '''{extra}'''\n")
    };
    lab.write(
        "agents/agent/hog.toml",
        &steps("python3 -c 'x = bytearray(400 << 20); x[::4096] = b\"y\" * len(x[::4096])'; true"),
    );
    lab.write(
        "agents/agent/forker.toml",
        &steps("for i in $(seq 1 40); do sleep 3 & done; true"),
    );
    lab.write("agents/agent/calm.toml", &steps("echo calm > calm.txt"));
    let out = lab.run(As::Me, &["--trials", "3", "--jobs", "1"]);
    assert!(
        out.code == 0 || out.code == 1,
        "{}\n{}",
        out.stdout,
        out.stderr
    );
    let mut groups = std::collections::BTreeMap::<String, Vec<String>>::new();
    for task in ["hog", "forker", "calm"] {
        for i in 0..3 {
            let id = format!("{task}.agent.{i}");
            let record = lab.record(&id);
            for key in ["memory_mb", "processes"] {
                if !enforced(&record, key) {
                    return;
                }
            }
            let want = match task {
                "hog" => Some("memory"),
                "forker" => Some("processes"),
                _ => None,
            };
            assert_eq!(record["limit_reached"].as_str(), want, "{id}: {record:#}");
            let cg = std::fs::read_to_string(lab.trial_dir(&id).join("changes/files/cg.txt"))
                .unwrap_or_else(|e| panic!("{id} wrote no cg.txt: {e}"));
            groups.entry(cg).or_default().push(id);
        }
    }
    // The groups were reused: fewer groups than trials, and a calm trial shared its group
    // with a trial that reached a limit.
    assert!(groups.len() < 9, "no group was reused: {groups:#?}");
    assert!(
        groups
            .values()
            .any(|ids| ids.iter().any(|i| i.starts_with("calm"))
                && ids.iter().any(|i| !i.starts_with("calm"))),
        "no calm trial ran in a group a limited trial used: {groups:#?}"
    );
}
