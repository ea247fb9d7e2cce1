//! A trial sees only what it is given: its root shows the host's system folders, the
//! installation prefixes of its `PATH`, and nothing else of the host.
//!
//! The scripted agent lists every top-level entry of its root and everything that lies under
//! those that are not system folders, and tries the host's other folders a hostile agent would
//! read: another suite's holdout beside this one, the git repository around the running suite,
//! `/root`, `/srv`, `/opt`, `/var`, `/mnt`, and `/etc/shadow` (readable by a trial of a proctor run
//! as root were it not covered). What it lists is compared with the table in docs/design.md, so
//! the documented list and the real one cannot drift apart. Its honest arm is the same trial's
//! own work: Python (from wherever `PATH` finds it) runs the probe, and a check runs Python too.
//! As root and as uid 65534.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::lab::{users, As, Lab};

/// The probe: prints one JSON object.
const PROBE: &str = r#"
import json, os, sys
system = set(sys.argv[1].split(","))
tries = sys.argv[2:]
top = sorted(os.listdir("/"))
under = {}
for t in top:
    if t in system or t in ("proc", "sys", "dev", "workspace"):
        continue
    seen = []
    stack = ["/" + t]
    while stack and len(seen) < 200:
        d = stack.pop()
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for n in names:
            p = os.path.join(d, n)
            seen.append(p)
            if os.path.isdir(p) and not os.path.islink(p) and p.count("/") < 4:
                stack.append(p)
    under[t] = seen
got = {}
for p in tries:
    try:
        if os.path.isdir(p):
            got[p] = "listed " + ",".join(sorted(os.listdir(p))[:5])
        else:
            with open(p, "rb") as f:
                data = f.read(64)
            got[p] = "read %d bytes" % len(data)
    except OSError as e:
        got[p] = "refused %d" % e.errno
print(json.dumps({"top": top, "under": under, "tries": got}))
"#;

/// The top-level names docs/design.md's table of a trial's root lists (`/usr`, `/tmp`, ...).
fn documented_top() -> BTreeSet<String> {
    let design = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/design.md");
    let text = std::fs::read_to_string(&design).unwrap();
    let table = text
        .split("<!-- trial-root:begin -->")
        .nth(1)
        .and_then(|t| t.split("<!-- trial-root:end -->").next())
        .expect("docs/design.md marks the table of a trial's root");
    let mut names = BTreeSet::new();
    for line in table.lines().filter(|l| l.starts_with("| `/")) {
        let first_cell = line.split('|').nth(1).unwrap_or_default();
        for path in first_cell.split('`').skip(1).step_by(2) {
            if let Some(top) = path.trim_start_matches('/').split('/').next() {
                if !top.is_empty() {
                    names.insert(top.to_owned());
                }
            }
        }
    }
    names
}

#[test]
fn a_trial_reads_nothing_of_the_host_but_its_system_folders_and_its_path() {
    let documented = documented_top();
    for name in ["usr", "etc", "tmp", "home", "run", "workspace", "proc"] {
        assert!(documented.contains(name), "{name} in {documented:?}");
    }
    for who in users() {
        if !host_view_as(who, &documented) {
            return;
        }
    }
}

/// A trial run as `who` probes the host (another suite's answers beside this one, the suite,
/// the repository, the host's other folders): it sees only documented entries and the way to
/// its recorded reach. False when the trial could not be graded (no real isolation here).
fn host_view_as(who: As, documented: &BTreeSet<String>) -> bool {
    let lab = Lab::new(&format!("host-view-{who:?}"));
    // Another suite's answers, beside this one on the host.
    let other = lab.root.join("other-suite/holdout/t/secret_test.py");
    std::fs::create_dir_all(other.parent().unwrap()).unwrap();
    std::fs::write(&other, "assert answer == 42\n").unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.git");
    let repo = repo.canonicalize().unwrap_or(repo);
    lab.write("fixture/probe.py", PROBE);
    let system = [
        "bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc",
    ]
    .join(",");
    let tries = [
        other.display().to_string(),
        lab.suite().display().to_string(),
        repo.display().to_string(),
        "/root".into(),
        "/srv".into(),
        "/opt".into(),
        "/var".into(),
        "/mnt".into(),
        "/work".into(),
        "/etc/shadow".into(),
        "/etc/passwd".into(),
    ];
    let step = format!("python3 probe.py {system} {}", tries.join(" "));
    lab.one_task(
        "",
        "{ check = \"python3 -c 'import json; print(1)'\" }",
        &[&step],
        true,
    );
    let Some(record) = lab.run_graded(who, false, &[]) else {
        return false;
    };
    assert_eq!(
        record["outcome"], "completed",
        "{who:?}: the honest arm (Python in the trial and in its check) works\n{record:#}"
    );
    let answer = record["end_state"]["answer"].as_str().unwrap_or_default();
    let seen: serde_json::Value = serde_json::from_str(answer.trim())
        .unwrap_or_else(|e| panic!("{who:?}: the probe's answer is JSON ({e}): {answer}"));
    let view = &record["isolation"]["host_view"];
    let reach: Vec<PathBuf> = view["reach"]
        .as_array()
        .unwrap_or_else(|| panic!("{who:?}: the record names the reach: {record:#}"))
        .iter()
        .map(|p| PathBuf::from(p.as_str().unwrap()))
        .collect();
    let reach_tops: BTreeSet<String> = reach
        .iter()
        .filter_map(|p| p.components().nth(1))
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();

    assert_every_top_entry_documented_or_reached(who, &seen, documented, &reach_tops);
    assert_under_a_reached_top_only_the_way_to_the_reach(who, &seen, &reach, &reach_tops);
    assert_the_hosts_other_folders_refused(who, &seen, &reach);
    true
}

/// Every top-level entry the probe `seen` is documented, or holds a prefix of the recorded
/// reach.
fn assert_every_top_entry_documented_or_reached(
    who: As,
    seen: &serde_json::Value,
    documented: &BTreeSet<String>,
    reach_tops: &BTreeSet<String>,
) {
    for top in seen["top"].as_array().unwrap() {
        let top = top.as_str().unwrap();
        assert!(
            documented.contains(top) || reach_tops.contains(top),
            "{who:?}: /{top} is in the trial's root but neither documented nor reached: {seen:#}"
        );
    }
}

/// Under a reached top-level folder there is only the way to the reached prefixes.
fn assert_under_a_reached_top_only_the_way_to_the_reach(
    who: As,
    seen: &serde_json::Value,
    reach: &[PathBuf],
    reach_tops: &BTreeSet<String>,
) {
    for (top, paths) in seen["under"].as_object().unwrap() {
        if !reach_tops.contains(top) {
            continue;
        }
        for p in paths.as_array().unwrap() {
            let p = Path::new(p.as_str().unwrap());
            assert!(
                reach.iter().any(|r| r.starts_with(p) || p.starts_with(r)),
                "{who:?}: {} is shown but is on no way to {reach:?}",
                p.display()
            );
        }
    }
}

/// The host's other folders: absent, or nothing of them; `/etc/passwd` readable, the shadow
/// file not.
fn assert_the_hosts_other_folders_refused(who: As, seen: &serde_json::Value, reach: &[PathBuf]) {
    let tries = &seen["tries"];
    for (path, got) in tries.as_object().unwrap() {
        let got = got.as_str().unwrap();
        let shown_by_reach = reach.iter().any(|r| r.starts_with(path));
        match path.as_str() {
            "/etc/passwd" => assert!(got.starts_with("read "), "{who:?}: {got}"),
            "/etc/shadow" => assert!(
                got == "read 0 bytes" || got.starts_with("refused"),
                "{who:?}: the shadow file was readable: {got}"
            ),
            "/root" if shown_by_reach => {
                let listed = got.trim_start_matches("listed ");
                for name in listed.split(',').filter(|n| !n.is_empty()) {
                    assert!(
                        reach
                            .iter()
                            .any(|r| r.starts_with(Path::new("/root").join(name))),
                        "{who:?}: /root/{name} is shown: {got}"
                    );
                }
            }
            _ => assert!(
                got.starts_with("refused"),
                "{who:?}: {path} is reachable from the trial: {got}"
            ),
        }
    }
}

/// Whether the agent's write through the bind reached the host.
fn tools_planted(lab: &Lab) -> bool {
    lab.root.join("tools/planted").exists()
}

#[test]
fn a_task_that_needs_more_of_the_host_binds_it_and_gets_only_that() {
    for who in users() {
        let lab = Lab::new(&format!("host-binds-{who:?}"));
        let tools = lab.root.join("tools");
        std::fs::create_dir_all(&tools).unwrap();
        std::fs::write(tools.join("table.txt"), "forty-two\n").unwrap();
        let beside = lab.root.join("beside.txt");
        std::fs::write(&beside, "not bound\n").unwrap();
        let (tools, beside) = (tools.display(), beside.display());
        lab.one_task(
            &format!("binds = [\"{tools}\"]"),
            &format!(
                "{{ check = \"grep -q forty-two {tools}/table.txt && ! test -e {beside}\" }}"
            ),
            &[&format!(
                "cat {tools}/table.txt; cat {beside} 2>/dev/null || echo beside-absent; touch {tools}/planted 2>/dev/null || echo touch-refused"
            )],
            true,
        );
        let Some(record) = lab.run_graded(who, false, &[]) else {
            return;
        };
        let answer = record["end_state"]["answer"].as_str().unwrap_or_default();
        assert!(
            answer.contains("forty-two"),
            "{who:?}: the bound folder is shown: {answer}"
        );
        assert!(
            !answer.contains("not bound") && answer.contains("beside-absent"),
            "{who:?}: a file beside the bound folder is shown: {answer}"
        );
        assert!(
            answer.contains("touch-refused") && !tools_planted(&lab),
            "{who:?}: the bound folder is read-only: {answer}"
        );
        assert_eq!(
            record["outcome"], "completed",
            "{who:?}: the check sees the bound folder too\n{record:#}"
        );

        // A bind that is not an absolute host path is refused before any trial, where it is.
        lab.write(
            "suite.toml",
            &std::fs::read_to_string(lab.suite().join("suite.toml"))
                .unwrap()
                .replace(&format!("binds = [\"{tools}\"]"), "binds = [\"tools\"]"),
        );
        let out = lab.proctor(who, &["validate", lab.suite().to_str().unwrap()]);
        assert_eq!(out.code, 2, "{who:?}: {out:?}");
        assert!(
            out.stderr.contains("`binds` entry")
                && out.stderr.contains("absolute")
                && out.stderr.contains("suite.toml:15:10"),
            "{who:?}: {}",
            out.stderr
        );
    }
}

/// The mount table a trial can read (`/proc/self/mountinfo`, the agent's and a check's) names
/// none of the host's folders that the trial must not know: not the suite's, not the store's.
/// The overlay layers are named from inside themselves (`lowerdir+=.`), not by their host path.
#[test]
fn the_mount_table_names_neither_the_suite_nor_the_store() {
    for who in users() {
        let lab = Lab::new(&format!("host-mounts-{who:?}"));
        lab.write("fixture/data.txt", "x\n");
        lab.write("holdout/t/expected.txt", "x\n");
        lab.one_task(
            "",
            "{ check = \"cat /proc/self/mountinfo > /proc/self/fd/1; cmp data.txt expected.txt\" }",
            &["cat /proc/self/mountinfo"],
            true,
        );
        let Some(record) = lab.run_graded(who, false, &[]) else {
            return;
        };
        assert_eq!(record["outcome"], "completed", "{who:?}\n{record:#}");
        let agent = record["end_state"]["answer"].as_str().unwrap_or_default();
        let check = std::fs::read_to_string(lab.trial_dir("t.agent.0").join("checks/0.stdout"))
            .unwrap_or_default();
        for (whose, table) in [("agent", agent), ("check", &check)] {
            assert!(
                table.contains(" /workspace ") && table.contains("lowerdir+=."),
                "{who:?}: the {whose}'s mount table, with the workspace's overlay: {table}"
            );
            for host in [lab.suite(), lab.store(), lab.root.clone()] {
                let host = host.canonicalize().unwrap_or(host);
                assert!(
                    !table.contains(host.to_str().unwrap()),
                    "{who:?}: the {whose}'s mount table names {}:\n{table}",
                    host.display()
                );
            }
        }
    }
}

/// With services, T binds the suite (and the store) for them at their own paths; the agent's own
/// mount namespace takes those binds out whole, so its mount table still names neither, while
/// the service keeps reading the suite.
#[test]
fn with_services_the_agents_mount_table_names_neither_the_suite_nor_the_store() {
    for who in users() {
        let lab = Lab::new(&format!("host-mounts-svc-{who:?}"));
        lab.write("fixture/data.txt", "x\n");
        lab.write("services/word.txt", "from-the-suite\n");
        lab.write(
            "services/svc.py",
            "import os, http.server\nwith open(os.path.join(os.environ['PROCTOR_SERVICE_DIR'], 'state.txt'), 'w') as f:\n    f.write(open('services/word.txt').read())\nhttp.server.HTTPServer(('127.0.0.1', 7072), http.server.SimpleHTTPRequestHandler).serve_forever()\n",
        );
        lab.write(
            "suite.toml",
            "schema_version = 1\nid = \"lab\"\n\n[defaults]\nwall_timeout_seconds = 30\n\n[[services]]\nname = \"svc\"\ncommand = [\"python3\", \"services/svc.py\"]\nready = { http = \"http://127.0.0.1:7072/\", timeout_seconds = 30 }\n\n[[variants]]\nid = \"agent\"\nagent = \"script\"\nscript = \"agents/agent\"\n\n[[tasks]]\nid = \"t\"\nprompt = \"Do the thing.\"\n\n[tasks.success]\nall = [{ answer_matches = \"workspace\" }]\n",
        );
        lab.write(
            "agents/agent/t.toml",
            "answer_from_step = 1\n\n[[steps]]\nrun = '''cat /proc/self/mountinfo'''\n",
        );
        let Some(record) = lab.run_graded(who, false, &[]) else {
            return;
        };
        assert_eq!(record["outcome"], "completed", "{who:?}\n{record:#}");
        let state = lab.trial_dir("t.agent.0").join("services/svc/state.txt");
        assert_eq!(
            std::fs::read_to_string(&state).unwrap_or_default(),
            "from-the-suite\n",
            "{who:?}: the service read the suite"
        );
        let table = record["end_state"]["answer"].as_str().unwrap_or_default();
        for host in [lab.suite(), lab.store(), lab.root.clone()] {
            let host = host.canonicalize().unwrap_or(host);
            assert!(
                !table.contains(host.to_str().unwrap()),
                "{who:?}: the agent's mount table names {}:\n{table}",
                host.display()
            );
        }
    }
}
