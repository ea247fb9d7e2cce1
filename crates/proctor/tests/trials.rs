//! Trials through the real binary, with real namespaces and real processes: what the store
//! records is exactly what happened, what grades the agent stays out of its reach, and a trial's
//! processes never outlive it. Where the tests run as root, each scenario also runs as uid 65534.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use common::lab::{copy_dir, users, As, Lab};
use serde_json::Value;

fn changes(record: &Value) -> BTreeSet<(String, String)> {
    record["end_state"]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap().to_string(),
                c["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A listing of a tree (path, mode, content hash) made with the same shell command inside the
/// sandbox and on the host.
const LISTING: &str = "find . -path ./__pycache__ -prune -o -type f -print | LC_ALL=C sort | while read f; do printf '%s %s ' \"$f\" \"$(stat -c %a \"$f\")\"; sha256sum < \"$f\" | cut -c1-16; done";

#[test]
fn recorded_changes_are_exact_and_rebuild_the_end_state() {
    for who in users() {
        let lab = Lab::new(&format!("changes-{who:?}"));
        lab.write("fixture/keep.txt", "same\n")
            .write("fixture/edit.txt", "before\n")
            .write("fixture/gone.txt", "bye\n")
            .write("fixture/sub/tool.sh", "echo tool\n");
        lab.one_task(
            "",
            "{ files_unchanged = false }",
            &[
                "echo new > added.txt",
                "echo after > edit.txt",
                "rm gone.txt",
                "chmod 755 sub/tool.sh",
                "mkdir -p deep/er && echo x > deep/er/file.txt",
                LISTING,
            ],
            true,
        );
        let out = lab.run(who, &["--trials", "1"]);
        assert_eq!(out.code, 0, "{who:?}\n{}", out.stderr);
        let record = lab.record("t.agent.0");
        let got = changes(&record);
        let want: BTreeSet<(String, String)> = [
            ("added.txt", "added"),
            ("edit.txt", "changed"),
            ("gone.txt", "deleted"),
            ("sub/tool.sh", "mode-changed"),
            ("deep", "added"),
            ("deep/er", "added"),
            ("deep/er/file.txt", "added"),
        ]
        .iter()
        .map(|(p, k)| (p.to_string(), k.to_string()))
        .collect();
        assert_eq!(got, want, "{who:?}");

        // Rebuild: fixture + changes/ reproduces the agent's workspace byte for byte.
        let rebuilt = lab.root.join("rebuilt");
        copy_dir(&lab.suite().join("fixture"), &rebuilt);
        let trial = lab.trial_dir("t.agent.0");
        for c in record["end_state"]["changes"].as_array().unwrap() {
            let path = c["path"].as_str().unwrap();
            match c["kind"].as_str().unwrap() {
                "deleted" => std::fs::remove_file(rebuilt.join(path)).unwrap(),
                _ if c["dir"] == true => std::fs::create_dir_all(rebuilt.join(path)).unwrap(),
                _ => {
                    let dest = rebuilt.join(path);
                    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
                    std::fs::copy(trial.join("changes/files").join(path), &dest).unwrap();
                }
            }
        }
        let listing = std::process::Command::new("sh")
            .arg("-c")
            .arg(LISTING)
            .current_dir(&rebuilt)
            .output()
            .unwrap();
        let answer = std::fs::read_to_string(trial.join("answer.txt")).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&listing.stdout).trim_end(),
            answer.trim_end(),
            "{who:?}"
        );
        // The fixture itself was never touched.
        assert_eq!(
            std::fs::read_to_string(lab.suite().join("fixture/edit.txt")).unwrap(),
            "before\n"
        );
        assert!(lab.suite().join("fixture/gone.txt").exists());
    }
}

#[test]
fn holdouts_and_answer_sheets_are_invisible_to_the_agent_but_checks_see_holdouts() {
    for who in users() {
        let lab = Lab::new(&format!("hidden-{who:?}"));
        // Tokens unique to this test run: other suites on the machine are not hidden, only this
        // one. The probe spells them in two pieces so its own script does not contain them.
        let n = format!("{}{}", std::process::id(), who as u8);
        let holdout_token = format!("HOLDOUT-TOKEN-{n}");
        let answer_token = format!("ANSWER-TOKEN-{n}");
        let secret = format!("holdout-secret-{n}.txt");
        lab.write("fixture/README.md", "work here\n")
            .write(
                &format!("holdout/t/{secret}"),
                &format!("{holdout_token}\n"),
            )
            .write("answers/t.md", &format!("{answer_token}\n"));
        let suite = lab.suite().display().to_string();
        let store = lab.store().display().to_string();
        let probe = format!(
            "{{ find / \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o -name '*secret-'\"{n}\"'*' -print; \
             grep -rs -e HOLDOUT-TOKEN-\"{n}\" -e ANSWER-TOKEN-\"{n}\" {root} /tmp /home /run 2>/dev/null; \
             ls -la {suite} {suite}/holdout {suite}/answers {store} 2>&1; ls ../ ../..; \
             for p in /proc/[0-9]*/root; do cat $p{suite}/answers/t.md $p{suite}/holdout/t/{secret} 2>/dev/null; done; \
             cat {suite}/../suite/answers/t.md 2>&1; }} 2>&1 | head -c 20000",
            root = lab.root.display()
        );
        let check = format!("{{ check = \"grep -q {holdout_token} {secret}\" }}");
        lab.one_task("", &check, &[&probe], true);
        let out = lab.run(who, &["--trials", "1"]);
        let answer =
            std::fs::read_to_string(lab.trial_dir("t.agent.0").join("answer.txt")).unwrap();
        assert!(
            !answer.contains(&holdout_token),
            "{who:?}: the agent found the holdout:\n{answer}"
        );
        assert!(
            !answer.contains(&answer_token),
            "{who:?}: the agent found the answer sheet:\n{answer}"
        );
        assert!(
            !answer.contains(&secret),
            "{who:?}: the agent found the holdout file:\n{answer}"
        );
        // The probe really looked: it listed the workspace's parent folders.
        assert!(
            answer.contains("No such file or directory") || answer.contains("cannot access"),
            "{who:?}: {answer}"
        );
        // The check, run after the agent stopped, does see the holdout.
        assert_eq!(
            out.code, 0,
            "{who:?}: the check did not see the holdout\n{}",
            out.stderr
        );
        let record = lab.record("t.agent.0");
        assert_eq!(record["outcome"], "completed", "{who:?}: {record:#}");
    }
}

fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().filter_map(Result::ok) {
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(marker) {
                found.push(cmd);
            }
        }
    }
    found
}

#[test]
fn the_scripted_agent_gets_exactly_the_trials_environment_and_none_of_proctors() {
    // The scripted agent is started in-process by the sandbox (a fork, not an exec): it must
    // still see only the environment the trial declares, never proctor's own.
    for who in users() {
        let lab = Lab::new(&format!("env-{who:?}"));
        lab.write("fixture/README.md", "x\n");
        lab.one_task("", "{ answer_matches = \"HOME=\" }", &["env | sort"], true);
        let suite = lab.suite().display().to_string();
        let store = lab.store().display().to_string();
        let out = lab.proctor_env(
            who,
            &["run", &suite, "--store", &store, "--trials", "1"],
            &[("PROCTOR_TEST_LEAK", "from-proctor")],
        );
        assert_eq!(out.code, 0, "{who:?}: {}", out.stderr);
        let env = std::fs::read_to_string(lab.trial_dir("t.agent.0").join("answer.txt")).unwrap();
        let keys: BTreeSet<&str> = env.lines().filter_map(|l| l.split('=').next()).collect();
        let allowed = [
            "PATH",
            "HOME",
            "TMPDIR",
            "LANG",
            "TERM",
            "NO_COLOR",
            "USER",
            "PYTHONDONTWRITEBYTECODE",
            // The trial's own index and seed (issue 47, item 5).
            "PROCTOR_TRIAL_INDEX",
            "PROCTOR_TRIAL_SEED",
            // Not PROCTOR_CALLS_SOCKET: with namespaces no socket of the calls log is in the
            // agent's reach (issue 41, row 4).
            // set by sh itself
            "PWD",
            "SHLVL",
            "_",
            "OLDPWD",
        ];
        let extra: Vec<&&str> = keys.iter().filter(|k| !allowed.contains(k)).collect();
        assert!(
            extra.is_empty(),
            "{who:?}: unexpected variables {extra:?} in\n{env}"
        );
        assert!(
            !env.contains("from-proctor"),
            "{who:?}: proctor's environment leaked:\n{env}"
        );
        assert!(env.contains("HOME=/home/agent\n"), "{who:?}: {env}");
        assert!(env.contains("PWD=/workspace\n"), "{who:?}: {env}");
        assert!(env.contains("PATH=/run/proctor/shims:"), "{who:?}: {env}");
        assert!(env.contains("PROCTOR_TRIAL_INDEX=0\n"), "{who:?}: {env}");
        let seed = lab.record("t.agent.0")["plan"]["seed"].as_u64().unwrap();
        assert!(
            env.contains(&format!("PROCTOR_TRIAL_SEED={seed}\n")),
            "{who:?}: {env}"
        );
    }
}

#[test]
fn detached_processes_die_with_the_trial_and_their_writes_never_land() {
    for who in users() {
        let lab = Lab::new(&format!("detached-{who:?}"));
        lab.write("fixture/README.md", "x\n");
        let marker = format!("1.{}7", std::process::id());
        lab.one_task(
            "",
            "{ files_unchanged = true }",
            &[
                &format!("setsid sh -c 'sleep {marker}; echo late > late-setsid.txt' >/dev/null 2>&1 < /dev/null &"),
                &format!("nohup sh -c 'sleep {marker}; echo late > late-nohup.txt' >/dev/null 2>&1 &"),
                &format!("( ( sleep {marker}; echo late > late-double.txt ) & ) >/dev/null 2>&1"),
            ],
            false,
        );
        let out = lab.run(who, &["--trials", "1"]);
        assert!(
            processes_with(&format!("sleep {marker}")).is_empty(),
            "{who:?}: a process of the trial survived it"
        );
        std::thread::sleep(Duration::from_millis(1800));
        assert!(
            processes_with(&format!("sleep {marker}")).is_empty(),
            "{who:?}: a process of the trial survived it"
        );
        assert_eq!(out.code, 0, "{who:?}\n{}", out.stderr);
        let record = lab.record("t.agent.0");
        assert!(
            changes(&record).is_empty(),
            "{who:?}: {:?}",
            changes(&record)
        );
    }
}

#[test]
fn an_agent_past_its_timeout_is_stopped_within_timeout_plus_grace() {
    for who in users() {
        let lab = Lab::new(&format!("timeout-{who:?}"));
        lab.write("fixture/README.md", "x\n");
        lab.one_task(
            "wall_timeout_seconds = 2",
            "{ files_unchanged = true }",
            &["sleep 30"],
            false,
        );
        let started = Instant::now();
        let _ = lab.run(who, &["--trials", "1"]);
        let elapsed = started.elapsed();
        let record = lab.record("t.agent.0");
        assert_eq!(
            record["end_state"]["agent"]["timed_out"], true,
            "{who:?}: {record:#}"
        );
        let wall = record["end_state"]["agent"]["wall_seconds"]
            .as_f64()
            .unwrap();
        assert!(
            (2.0..5.0).contains(&wall),
            "{who:?}: stopped after {wall} s"
        );
        assert!(
            elapsed < Duration::from_secs(20),
            "{who:?}: the whole run took {elapsed:?}"
        );
    }
}

#[test]
fn concurrent_trials_each_have_their_own_loopback_and_cannot_reach_the_host() {
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = host.local_addr().unwrap().port();
    for who in users() {
        let lab = Lab::new(&format!("network-{who:?}"));
        lab.write("fixture/README.md", "x\n");
        let bind = "python3 -c \"import socket,time; s=socket.socket(); s.bind(('127.0.0.1',7070)); s.listen(); time.sleep(1.0); print('bound 7070')\"";
        let reach = format!(
            "python3 -c \"import socket; s=socket.socket(); s.settimeout(2)\ntry:\n    s.connect(('127.0.0.1',{port})); print('reached host')\nexcept Exception as e:\n    print('cannot reach host:', type(e).__name__)\""
        );
        lab.one_task(
            "",
            "{ answer_matches = 'bound 7070' }",
            &[&format!("{reach} > reach.txt"), bind],
            true,
        );
        let out = lab.run(who, &["--trials", "2", "--jobs", "2"]);
        assert_eq!(
            out.code, 0,
            "{who:?}: both trials should bind 7070\n{}",
            out.stderr
        );
        for id in ["t.agent.0", "t.agent.1"] {
            let reach =
                std::fs::read_to_string(lab.trial_dir(id).join("changes/files/reach.txt")).unwrap();
            assert!(
                reach.starts_with("cannot reach host"),
                "{who:?} {id}: {reach}"
            );
        }
    }
}

/// Serves `fetched` to every HTTP request on a loopback port of the host, for as long as the
/// test runs; gives the port.
fn serve_fetched() -> u16 {
    use std::io::{Read, Write};
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut conn in server.incoming().filter_map(Result::ok) {
            let mut buf = [0u8; 1024];
            let _ = conn.read(&mut buf);
            let _ = conn.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 8\r\n\r\nfetched\n");
        }
    });
    port
}

/// Per-phase network: a check that fetches from a server on the host's loopback passes only
/// when its task's `check_network` is `host`; `loopback` (the check's own loopback) and `none`
/// (the default) fail it, whatever the agent's `network` was. The agent phase keeps its own
/// network: with `network = "none"` the agent cannot reach the server its checks reach, and
/// with `network = "host"` it can while its checks (by default) cannot. Each trial records both.
#[test]
fn checks_get_the_network_their_task_gives_them_apart_from_the_agent() {
    let port = serve_fetched();
    let fetch = format!(
        "python3 -c 'import urllib.request as u; print(u.urlopen(\"http://127.0.0.1:{port}/\", timeout=3).read().decode())'"
    );
    let task = |id: &str, settings: &str| {
        format!(
            "[[tasks]]\nid = \"{id}\"\nprompt = \"Fetch.\"\n{settings}\n[tasks.success]\nall = [{{ check = {{ command = '''{fetch}''', stdout_matches = \"fetched\" }} }}]\n\n"
        )
    };
    let suite = format!(
        "schema_version = 1\nid = \"lab\"\n\n[defaults]\nwall_timeout_seconds = 30\nvalidation_timeout_seconds = 20\n\n[[variants]]\nid = \"agent\"\nagent = \"script\"\nscript = \"agents/agent.toml\"\n\n{}{}{}{}",
        task("check-host", "check_network = \"host\""),
        task("check-loopback", "check_network = \"loopback\""),
        task("check-default", ""),
        task("agent-host", "network = \"host\""),
    );
    for who in users() {
        let lab = Lab::new(&format!("check-network-{who:?}"));
        lab.write("fixture/README.md", "x\n");
        lab.write("suite.toml", &suite);
        lab.write(
            "agents/agent.toml",
            &format!(
                "answer = \"done\"\n\n[[steps]]\nrun = '''({fetch} || echo unreached) > reach.txt 2>/dev/null'''\n"
            ),
        );
        let v = lab.proctor(who, &["validate", lab.suite().to_str().unwrap()]);
        assert_eq!(v.code, 0, "{who:?}: {}", v.stderr);
        let out = lab.run(who, &["--trials", "1"]);
        assert_eq!(out.code, 1, "{who:?}: some trials fail\n{}", out.stderr);
        for (task, network, check_network, outcome, agent_reached) in [
            ("check-host", "none", "host", "completed", false),
            ("check-loopback", "none", "loopback", "wrong", false),
            ("check-default", "none", "none", "wrong", false),
            ("agent-host", "host", "none", "wrong", true),
        ] {
            let id = format!("{task}.agent.0");
            let record = lab.record(&id);
            if !common::lab::real_isolation(&record, false) {
                return;
            }
            assert_eq!(record["settings"]["network"], network, "{who:?} {id}");
            assert_eq!(
                record["settings"]["check_network"], check_network,
                "{who:?} {id}"
            );
            assert_eq!(
                record["outcome"], outcome,
                "{who:?} {id}: {}\n{:#}",
                record["reason"], record["end_state"]["checks"]
            );
            let reach = std::fs::read_to_string(lab.trial_dir(&id).join("changes/files/reach.txt"))
                .unwrap();
            assert_eq!(
                reach == "fetched\n\n",
                agent_reached,
                "{who:?} {id}: {reach:?}"
            );
        }
        // A rescore runs the checks again, each with its task's check_network: nothing changes
        // (were the checks run offline, check-host would turn wrong).
        let store = lab.store();
        let out = lab.proctor(
            who,
            &["rescore", "latest", "--store", store.to_str().unwrap()],
        );
        assert!(
            out.stderr.contains("no outcome changed"),
            "{who:?}: {}{}",
            out.stdout,
            out.stderr
        );
    }
}

#[test]
fn the_calls_log_records_every_call_and_the_agent_cannot_rewrite_it() {
    for who in users() {
        let lab = Lab::new(&format!("calls-{who:?}"));
        lab.write("fixture/README.md", "x\n");
        lab.write_exec("bin/tool", "#!/bin/sh\necho \"tool $*\"\n[ \"$1\" = fail ] && { echo broken >&2; exit 3; }\nexit 0\n");
        lab.one_task(
            "allow = [\"bin/tool\"]\n[tasks.interface]\ncommand = \"tool\"",
            "{ calls = { verb = \"ok\", min = 2 } }",
            &[
                "tool ok one",
                "tool fail two || true",
                "echo hello | tool ok three",
                "for f in $(find / -name 'calls.jsonl' -not -path '/proc/*' 2>/dev/null); do : > $f; echo '{\"seq\":99}' >> $f; done; ls -la /run/proctor",
            ],
            true,
        );
        let out = lab.run(who, &["--trials", "1"]);
        assert_eq!(out.code, 0, "{who:?}\n{}", out.stderr);
        let log = std::fs::read_to_string(lab.trial_dir("t.agent.0").join("calls.jsonl")).unwrap();
        let calls: Vec<Value> = log
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(calls.len(), 3, "{who:?}: {log}");
        let exits: Vec<i64> = calls.iter().map(|c| c["exit"].as_i64().unwrap()).collect();
        assert_eq!(exits, [0, 3, 0], "{who:?}");
        assert_eq!(calls[0]["argv"], serde_json::json!(["tool", "ok", "one"]));
        assert_eq!(calls[1]["stderr_head"], "broken\n");
        assert_eq!(calls[2]["stdin_bytes"], 6);
        assert_eq!(calls[0]["stdout_head"], "tool ok one\n");
        let seqs: Vec<i64> = calls.iter().map(|c| c["seq"].as_i64().unwrap()).collect();
        assert_eq!(seqs, [1, 2, 3]);
    }
}

#[test]
fn a_failing_guard_errors_the_trial_and_the_agent_never_starts() {
    for who in users() {
        let lab = Lab::new(&format!("guard-{who:?}"));
        lab.write("fixture/README.md", "x\n");
        lab.write_exec(
            "services/impostor.py",
            "#!/usr/bin/env python3\nimport http.server\nclass H(http.server.BaseHTTPRequestHandler):\n    def do_GET(self):\n        self.send_response(200); self.end_headers(); self.wfile.write(b'a real production server')\n    def log_message(self, *a): pass\nhttp.server.HTTPServer(('127.0.0.1', 7071), H).serve_forever()\n",
        );
        lab.one_task(
            "",
            "{ files_unchanged = true }",
            &["echo started > started.txt"],
            false,
        );
        let toml = std::fs::read_to_string(lab.suite().join("suite.toml")).unwrap();
        lab.write(
            "suite.toml",
            &toml.replace(
                "[[tasks]]",
                "[[services]]\nname = \"api\"\ncommand = [\"services/impostor.py\"]\nready = { http = \"http://127.0.0.1:7071/health\", timeout_seconds = 5 }\nguard = { http = \"http://127.0.0.1:7071/__mock\", expect = \"chat-mock\" }\n\n[[tasks]]",
            ),
        );
        let out = lab.run(who, &["--trials", "1"]);
        assert_eq!(
            out.code, 3,
            "{who:?}: an errored trial leaves the run unfinished\n{}",
            out.stderr
        );
        let record = lab.record("t.agent.0");
        assert_eq!(record["outcome"], "errored", "{who:?}");
        assert!(
            record["reason"].as_str().unwrap().contains("guard"),
            "{who:?}: {}",
            record["reason"]
        );
        assert_eq!(record["end_state"]["agent"]["started"], false);
        assert!(changes(&record).is_empty(), "{who:?}: the agent ran");
    }
}

#[test]
fn copy_isolation_is_recorded_and_diffs_the_same_changes() {
    let lab = Lab::new("copy");
    lab.write("fixture/a.txt", "a\n")
        .write("fixture/b.txt", "b\n");
    lab.one_task(
        "",
        "{ file_added = \"new.txt\" }",
        &["echo n > new.txt", "echo A > a.txt", "rm b.txt"],
        false,
    );
    let out = lab.run(As::Me, &["--trials", "1", "--isolation", "copy"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let record = lab.record("t.agent.0");
    assert_eq!(record["isolation"]["workspace"], "bind", "{record:#}");
    let run: Value =
        serde_json::from_str(&std::fs::read_to_string(lab.run_dir().join("run.json")).unwrap())
            .unwrap();
    assert_eq!(run["isolation"], "copy");
    let want: BTreeSet<(String, String)> = [
        ("new.txt", "added"),
        ("a.txt", "changed"),
        ("b.txt", "deleted"),
    ]
    .iter()
    .map(|(p, k)| (p.to_string(), k.to_string()))
    .collect();
    assert_eq!(changes(&record), want);
}

#[test]
fn sigkill_mid_run_then_resume_finishes_every_trial_once() {
    let lab = Lab::new("resume");
    lab.write("fixture/README.md", "x\n");
    lab.one_task("", "{ files_unchanged = true }", &["sleep 0.3"], false);
    let bin = assert_cmd::cargo::cargo_bin("proctor");
    let suite = lab.suite();
    let store = lab.store();
    let mut child = std::process::Command::new(&bin)
        .args([
            "run",
            suite.to_str().unwrap(),
            "--store",
            store.to_str().unwrap(),
            "--trials",
            "20",
            "--jobs",
            "2",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let finished = |lab: &Lab| -> Vec<String> {
        let Ok(runs) = std::fs::read_dir(lab.store().join("runs")) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for run in runs.filter_map(Result::ok) {
            if let Ok(trials) = std::fs::read_dir(run.path().join("trials")) {
                for t in trials.filter_map(Result::ok) {
                    if t.path().join("trial.json").exists() {
                        out.push(t.file_name().to_string_lossy().into_owned());
                    }
                }
            }
        }
        out
    };
    while finished(&lab).len() < 5 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let before = finished(&lab);
    assert!(
        before.len() >= 5 && before.len() < 20,
        "killed after {} trials",
        before.len()
    );
    let snapshot: Vec<(String, Vec<u8>)> = before
        .iter()
        .map(|t| {
            (
                t.clone(),
                std::fs::read(lab.trial_dir(t).join("trial.json")).unwrap(),
            )
        })
        .collect();
    // Every finished trial is readable.
    for (t, bytes) in &snapshot {
        serde_json::from_slice::<Value>(bytes).unwrap_or_else(|e| panic!("{t}: {e}"));
    }
    let run_id = lab
        .run_dir()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let out = lab.run(As::Me, &["--resume", &run_id[..12]]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(finished(&lab).len(), 20);
    // None ran twice: the trials finished before the kill are byte-for-byte what they were.
    for (t, bytes) in &snapshot {
        assert_eq!(
            &std::fs::read(lab.trial_dir(t).join("trial.json")).unwrap(),
            bytes,
            "{t} ran again"
        );
    }
    let ran_now = out.stderr.lines().filter(|l| l.starts_with('[')).count();
    assert_eq!(ran_now, 20 - before.len(), "{}", out.stderr);
    assert_results_hold_every_stored_record(&lab, 20);
}

/// `results.json` of the lab's run holds, in plan order, exactly the record of each of the
/// `n` trials' `trial.json`: those the last session spooled as it stored them, and those an
/// earlier session stored, read back.
fn assert_results_hold_every_stored_record(lab: &Lab, n: usize) {
    let results: Value =
        serde_json::from_slice(&std::fs::read(lab.run_dir().join("results.json")).unwrap())
            .unwrap();
    let trials = results["trials"].as_array().unwrap();
    assert_eq!(trials.len(), n);
    let mut indexes = Vec::new();
    for record in trials {
        let id = record["plan"]["id"].as_str().unwrap();
        let stored: Value =
            serde_json::from_slice(&std::fs::read(lab.trial_dir(id).join("trial.json")).unwrap())
                .unwrap();
        assert_eq!(record, &stored["record"], "{id}");
        indexes.push(record["plan"]["index"].as_u64().unwrap());
    }
    assert_eq!(indexes, (0..n as u64).collect::<Vec<_>>(), "plan order");
    assert_eq!(
        results["report"]["trials"].as_array().map(Vec::len),
        Some(n)
    );
}

#[test]
fn resume_refuses_when_the_suite_changed() {
    let lab = Lab::new("resume-changed");
    lab.write("fixture/README.md", "x\n");
    lab.one_task("", "{ files_unchanged = true }", &["true"], false);
    assert_eq!(lab.run(As::Me, &["--trials", "1"]).code, 0);
    lab.write("fixture/README.md", "changed\n");
    let run_id = lab
        .run_dir()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let out = lab.run(As::Me, &["--resume", &run_id]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("different version of the suite"),
        "{}",
        out.stderr
    );
}

#[test]
fn ctrl_c_stops_running_trials_leaves_them_unfinished_and_resume_finishes_them() {
    let lab = Lab::new("interrupt");
    lab.write("fixture/README.md", "x\n");
    let marker = format!("3.{}9", std::process::id());
    lab.one_task(
        "",
        "{ files_unchanged = true }",
        &[&format!("sleep {marker}")],
        false,
    );
    let bin = assert_cmd::cargo::cargo_bin("proctor");
    let child = std::process::Command::new(&bin)
        .args([
            "run",
            lab.suite().to_str().unwrap(),
            "--store",
            lab.store().to_str().unwrap(),
            "--trials",
            "4",
            "--jobs",
            "2",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until both workers are inside an agent, then press Ctrl-C.
    let deadline = Instant::now() + Duration::from_secs(30);
    while processes_with(&format!("sleep {marker}")).len() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        processes_with(&format!("sleep {marker}")).is_empty(),
        "a trial's process outlived Ctrl-C"
    );
    let finished = std::fs::read_dir(lab.run_dir().join("trials"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.path().join("trial.json").exists())
        .count();
    assert_eq!(
        finished, 0,
        "trials cut short by Ctrl-C must stay unfinished"
    );
    let run: Value =
        serde_json::from_str(&std::fs::read_to_string(lab.run_dir().join("run.json")).unwrap())
            .unwrap();
    assert_eq!(run["status"], "interrupted");
    let run_id = lab
        .run_dir()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let resumed = lab.run(As::Me, &["--resume", &run_id]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert_eq!(
        std::fs::read_dir(lab.run_dir().join("trials"))
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.path().join("trial.json").exists())
            .count(),
        4
    );
}

/// Starts `proctor run` of the lab's suite, one trial, in the background.
fn spawn_run(lab: &Lab) -> std::process::Child {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("proctor"))
        .args([
            "run",
            lab.suite().to_str().unwrap(),
            "--store",
            lab.store().to_str().unwrap(),
            "--trials",
            "1",
        ])
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Starts a run of one trial whose agent sleeps about 3 s (its task with `task_extra`), and
/// waits until the agent runs: the run's process, and the marker its agent's command line holds
/// (`tag` tells apart the tests that do this).
fn run_a_sleeping_trial(lab: &Lab, tag: u32, task_extra: &str) -> (std::process::Child, String) {
    lab.write("fixture/README.md", "x\n");
    let marker = format!("3.{}{tag}", std::process::id());
    lab.one_task(
        task_extra,
        "{ files_unchanged = true }",
        &[&format!("sleep {marker}")],
        false,
    );
    let child = spawn_run(lab);
    wait_for_trial(lab, &marker);
    (child, marker)
}

/// Waits until the run's folder exists and its one trial's agent runs (a process whose command
/// line holds `marker`).
fn wait_for_trial(lab: &Lab, marker: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !(lab
        .store()
        .join("runs")
        .read_dir()
        .is_ok_and(|mut d| d.next().is_some())
        && lab.trial_dir("t.agent.0").is_dir()
        && !processes_with(marker).is_empty())
    {
        assert!(Instant::now() < deadline, "the trial never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every file under `dir` with its bytes.
fn files_under(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<_> = walkdir::WalkDir::new(dir)
        .sort_by_file_name()
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            (
                e.path().strip_prefix(dir).unwrap().display().to_string(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn resuming_a_run_that_is_still_running_is_refused_and_leaves_it_intact() {
    let lab = Lab::new("resume-running");
    lab.write("fixture/README.md", "x\n");
    let marker = format!("4.{}1", std::process::id());
    lab.one_task(
        "",
        "{ files_unchanged = true }",
        &[&format!("sleep {marker}")],
        false,
    );
    let child = spawn_run(&lab);
    let pid = child.id();
    wait_for_trial(&lab, &marker);
    let trial = lab.trial_dir("t.agent.0");
    let before = files_under(&trial);

    let refused = lab.run(As::Me, &["--resume", "latest"]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    let run_id = lab
        .run_dir()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        refused.stderr.contains(&format!(
            "run {run_id} is still running (pid {pid} on host "
        )),
        "{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains("wait for that process to end"),
        "the refusal says what to do: {}",
        refused.stderr
    );
    assert!(
        !refused.stderr.contains("resuming run"),
        "{}",
        refused.stderr
    );
    // The refused resume touched nothing of the running trial, and `list` shows it running.
    assert_eq!(
        files_under(&trial),
        before,
        "the running trial's folder changed"
    );
    let store = lab.store();
    let listed = lab.proctor(As::Me, &["list", "--store", store.to_str().unwrap()]);
    assert!(
        listed
            .stdout
            .lines()
            .any(|l| l.starts_with(&run_id) && l.contains(" running ")),
        "{}",
        listed.stdout
    );

    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(lab.record("t.agent.0")["outcome"], "completed");
    let finished = files_under(&trial);

    // Once the first process has ended, the run resumes: nothing is left to do.
    let resumed = lab.run(As::Me, &["--resume", "latest"]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert!(
        resumed.stderr.contains(&format!("resuming run {run_id}")),
        "{}",
        resumed.stderr
    );
    assert_eq!(
        resumed
            .stderr
            .lines()
            .filter(|l| l.starts_with('['))
            .count(),
        0,
        "a finished trial ran again: {}",
        resumed.stderr
    );
    assert_eq!(files_under(&trial), finished, "the finished trial changed");
    let run: Value =
        serde_json::from_str(&std::fs::read_to_string(lab.run_dir().join("run.json")).unwrap())
            .unwrap();
    assert_eq!(run["status"], "finished");
}

/// The control-group folders of the run whose process is `run_pid`, as its trial's agent (a
/// process whose command line holds `marker`) sees them in `/proc/PID/cgroup`: each hierarchy's
/// `proctor-PID-NS` folder, by its path on this machine.
fn run_cgroup_dirs(marker: &str, run_pid: u32) -> Vec<std::path::PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mount_of = |controllers: &str| {
        mountinfo.lines().find_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let fields: Vec<&str> = left.split(' ').collect();
            let mut r = right.split(' ');
            let (fstype, _, options) = (r.next()?, r.next()?, r.next()?);
            let hit = if controllers.is_empty() {
                fstype == "cgroup2"
            } else {
                fstype == "cgroup"
                    && controllers
                        .split(',')
                        .all(|c| options.split(',').any(|o| o == c))
            };
            (hit && fields.get(3) == Some(&"/")).then(|| std::path::PathBuf::from(fields[4]))
        })
    };
    let folder = format!("/proctor-{run_pid}-");
    let mut dirs = BTreeSet::new();
    for e in std::fs::read_dir("/proc").unwrap().filter_map(Result::ok) {
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        if !String::from_utf8_lossy(&cmd)
            .replace('\0', " ")
            .contains(marker)
        {
            continue;
        }
        let groups = std::fs::read_to_string(e.path().join("cgroup")).unwrap_or_default();
        for line in groups.lines() {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next(), parts.next(), parts.next());
            let (Some(controllers), Some(path)) = (controllers, path) else {
                continue;
            };
            if let (Some(at), Some(mount)) = (path.find(&folder), mount_of(controllers)) {
                let end = path[at + 1..].find('/').map_or(path.len(), |i| at + 1 + i);
                dirs.insert(mount.join(&path[1..end]));
            }
        }
    }
    dirs.into_iter().collect()
}

/// A run killed outright cannot remove its control groups; the next run does, once no process
/// is left in them, and leaves the folder above them alone.
#[test]
fn the_control_groups_of_a_sigkilled_run_are_removed_by_the_next_run() {
    let lab = Lab::new("cgroups-killed");
    let (mut child, marker) =
        run_a_sleeping_trial(&lab, 3, "limits = { memory_mb = 256, processes = 64 }");
    let dirs = run_cgroup_dirs(&marker, child.id());
    child.kill().unwrap();
    child.wait().unwrap();
    if dirs.is_empty() {
        common::skip("the trial ran in no control group of its run (no cgroup access here)");
        return;
    }
    // The folders were there while the agent ran in them, and nothing of the killed run can
    // remove them now; another test's run may (the same sweep), so they are not asserted here.
    // The kernel keeps a group that holds a process: wait until the killed run's trial is gone.
    let holds_a_process = |d: &std::path::PathBuf| {
        std::fs::read_dir(d)
            .into_iter()
            .flatten()
            .flatten()
            .any(|slot| {
                std::fs::read_to_string(slot.path().join("cgroup.procs"))
                    .is_ok_and(|procs| !procs.trim().is_empty())
            })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while dirs.iter().any(holds_a_process) {
        assert!(Instant::now() < deadline, "the killed run's trial lives on");
        std::thread::sleep(Duration::from_millis(20));
    }

    let resumed = lab.run(As::Me, &["--resume", "latest"]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    for d in &dirs {
        assert!(!d.exists(), "{} is still there", d.display());
        assert!(
            d.parent().unwrap().is_dir(),
            "the folder above {} went too",
            d.display()
        );
    }
}

#[test]
fn a_sigkilled_run_is_listed_as_interrupted_and_resume_finishes_it() {
    let lab = Lab::new("resume-killed");
    let (mut child, _) = run_a_sleeping_trial(&lab, 2, "");
    child.kill().unwrap(); // SIGKILL: no chance to record how the run ended.
    child.wait().unwrap();
    let run: Value =
        serde_json::from_str(&std::fs::read_to_string(lab.run_dir().join("run.json")).unwrap())
            .unwrap();
    assert_eq!(
        run["status"], "running",
        "run.json cannot know it was killed"
    );
    let run_id = lab
        .run_dir()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();

    let store = lab.store();
    let store = store.to_str().unwrap();
    let listed = lab.proctor(As::Me, &["list", "--store", store]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let row = listed
        .stdout
        .lines()
        .find(|l| l.starts_with(&run_id))
        .unwrap_or_else(|| panic!("{}", listed.stdout));
    assert!(row.contains(" interrupted "), "{row}");
    assert!(!row.contains(" running "), "{row}");
    let json = lab.proctor(As::Me, &["list", "--store", store, "--format", "json"]);
    let rows: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(rows[0]["status"], "interrupted", "{rows:#}");
    let shown = lab.proctor(As::Me, &["show", "--store", store, &run_id]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(
        shown.stderr.contains(" · interrupted · "),
        "{}",
        shown.stderr
    );

    let resumed = lab.run(As::Me, &["--resume", "latest"]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert_eq!(lab.record("t.agent.0")["outcome"], "completed");
    let listed = lab.proctor(As::Me, &["list", "--store", store]);
    assert!(
        listed
            .stdout
            .lines()
            .any(|l| l.starts_with(&run_id) && l.contains(" finished ")),
        "{}",
        listed.stdout
    );
}

/// Whether uid 65534 can have a range of ids: the `uidmap` helpers and an entry of its own in
/// both subordinate id files.
fn nobody_has_a_range() -> bool {
    let entry = |file: &str| {
        std::fs::read_to_string(file).is_ok_and(|t| {
            t.lines()
                .any(|l| l.starts_with("nobody:") || l.starts_with("65534:"))
        })
    };
    Path::new("/usr/bin/newuidmap").exists()
        && Path::new("/usr/bin/newgidmap").exists()
        && entry("/etc/subuid")
        && entry("/etc/subgid")
}

/// Root in a trial owns a range of ids where proctor can map one: as root (written directly),
/// and as uid 65534 where `newuidmap` is installed and `/etc/subuid` and `/etc/subgid` give it a
/// range, `chown` to uid 1000 works, the record says how the ids were mapped, and the end state
/// keeps the owner, with the workspace on the host's disk or on the trial's own (`disk_mb`,
/// whose changes are moved out at the end); a folder of uid 1000 with mode 700 is captured (an
/// unprivileged proctor gets it back from the sandbox) and a set-user-ID file given to uid 1000
/// reaches the store without its bits. As an unprivileged user with no subordinate range, the
/// single mapping is recorded with its reason, `chown` fails in the agent's hands and the trial
/// is graded as usual.
#[test]
fn root_in_a_trial_chowns_where_a_range_is_mapped_and_the_single_mapping_is_recorded() {
    // CI gives uid 65534 a range (.ci/run): its newuidmap path is a real part of this test.
    if std::env::var_os("CI").is_some() && common::lab::is_root() {
        assert!(
            nobody_has_a_range(),
            "under CI: uid 65534 needs newuidmap and a range in /etc/subuid and /etc/subgid"
        );
    }
    // (who, one id asked for): the single mapping is tested as the least privileged user.
    let mut cases: Vec<(As, bool)> = users().into_iter().map(|u| (u, false)).collect();
    cases.push((*users().last().unwrap(), true));
    for (who, single) in cases {
        for disk in ["", "limits = { disk_mb = 64 }"] {
            owners_trial(who, single, disk);
        }
    }
}

/// One trial, run as `who` (with one id asked for when `single`, on a disk of its own when
/// `disk` says so), whose agent gives files to other users: the store keeps nothing but
/// proctor's own, and the owners are recorded where a range is mapped.
fn owners_trial(who: As, single: bool, disk: &str) {
    let lab = Lab::new(&format!("owners-{who:?}-{single}-{}", disk.len()));
    lab.write("fixture/README.md", "work here\n");
    lab.one_task(
        disk,
        "{ file_added = \"owner.txt\" }",
        &[
            "touch f; chown 1000:1000 f 2> chown.err; mkdir d; chown 1000:42 d; chmod 700 d; echo x > d/inner; chown 1000:1000 d/inner",
            "cp /bin/sh suid; chown 1000:1000 suid; chmod 6755 suid",
            "stat -c %u:%g f > owner.txt; cat owner.txt",
        ],
        true,
    );
    let env: &[(&str, &str)] = if single {
        &[("PROCTOR_SANDBOX_SINGLE_ID", "1")]
    } else {
        &[]
    };
    let (suite, store) = (lab.suite(), lab.store());
    let out = lab.proctor_env(
        who,
        &[
            "run",
            suite.to_str().unwrap(),
            "--store",
            store.to_str().unwrap(),
            "--trials",
            "1",
        ],
        env,
    );
    let record = lab.record("t.agent.0");
    if !common::lab::real_isolation(&record, false) {
        return;
    }
    assert!(out.code == 0 || out.code == 1, "{who:?}: {}", out.stderr);
    assert_eq!(record["outcome"], "completed", "{who:?} {disk}: {record:#}");
    let files = lab.trial_dir("t.agent.0").join("changes/files");
    assert_store_is_proctors_alone(&lab, &files, who, disk);
    let range = !single && (who == As::Me || nobody_has_a_range());
    match range {
        true => assert_owners_recorded_over_a_range(&record, &files, who, disk),
        false => assert_single_mapping_recorded(&record, who, disk),
    }
}

/// The owner recorded for the change of `path` among `changes`.
fn owner_of(changes: &[serde_json::Value], path: &str, who: As, disk: &str) -> serde_json::Value {
    changes
        .iter()
        .find(|c| c["path"] == path)
        .map(|c| c["owner"].clone())
        .unwrap_or_else(|| panic!("{who:?} {disk}: no change {path}: {changes:#?}"))
}

/// Nothing in the store belongs to anyone but proctor's own user, whatever the agent gave its
/// files to, and no set-id bit reached the store's copy (in `files`).
fn assert_store_is_proctors_alone(lab: &Lab, files: &Path, who: As, disk: &str) {
    use std::os::unix::fs::MetadataExt;
    let store_meta = std::fs::metadata(lab.store()).unwrap();
    let me = (store_meta.uid(), store_meta.gid());
    for e in walkdir::WalkDir::new(lab.store())
        .into_iter()
        .filter_map(Result::ok)
    {
        let m = e.path().symlink_metadata().unwrap();
        assert_eq!(
            (m.uid(), m.gid()),
            me,
            "{who:?} {disk}: {} in the store is not proctor's",
            e.path().display()
        );
    }
    let kept = std::fs::metadata(files.join("suid")).unwrap();
    assert_eq!(
        kept.mode() & 0o7000,
        0,
        "{who:?} {disk}: a set-id bit reached the store"
    );
}

/// A range is mapped: written as root or by newuidmap, the agent's `chown`s took, and the
/// record keeps each owner and the set-id file's real mode; a folder of uid 1000 with mode 700
/// was captured (into `files`).
fn assert_owners_recorded_over_a_range(
    record: &serde_json::Value,
    files: &Path,
    who: As,
    disk: &str,
) {
    let ids = &record["isolation"]["ids"];
    let changes = record["end_state"]["changes"].as_array().unwrap();
    let owner = |path: &str| owner_of(changes, path, who, disk);
    let suid = changes.iter().find(|c| c["path"] == "suid").unwrap();
    let answer = record["end_state"]["answer"].as_str().unwrap_or("").trim();
    assert_eq!(ids["kind"], "range", "{ids}");
    let by = if who == As::Me { "direct" } else { "newuidmap" };
    assert_eq!(ids["written_by"], by, "{ids}");
    assert_eq!(answer, "1000:1000", "{who:?} {disk}");
    assert_eq!(owner("f"), serde_json::json!({"uid": 1000, "gid": 1000}));
    assert_eq!(owner("d"), serde_json::json!({"uid": 1000, "gid": 42}));
    assert_eq!(
        owner("d/inner"),
        serde_json::json!({"uid": 1000, "gid": 1000})
    );
    assert_eq!(
        std::fs::read_to_string(files.join("d/inner")).unwrap(),
        "x\n",
        "{who:?} {disk}: a folder of uid 1000 with mode 700 was not captured"
    );
    assert_eq!(
        suid["mode"].as_u64().map(|m| m & 0o7777),
        Some(0o6755),
        "{suid}"
    );
    assert_eq!(owner("suid"), serde_json::json!({"uid": 1000, "gid": 1000}));
}

/// A single mapping: recorded with its reason, `chown` fails in the agent's hands, no owner is
/// recorded, and the owner's own set-id bits are recorded, never kept.
fn assert_single_mapping_recorded(record: &serde_json::Value, who: As, disk: &str) {
    let ids = &record["isolation"]["ids"];
    let changes = record["end_state"]["changes"].as_array().unwrap();
    let suid = changes.iter().find(|c| c["path"] == "suid").unwrap();
    let answer = record["end_state"]["answer"].as_str().unwrap_or("").trim();
    assert_eq!(ids["kind"], "single", "{ids}");
    assert!(
        ids["why_single"].as_str().is_some_and(|w| !w.is_empty()),
        "{ids}"
    );
    assert_eq!(answer, "0:0", "{who:?} {disk}");
    assert!(owner_of(changes, "f", who, disk).is_null());
    // The owner's own set-id bits: recorded, never kept.
    assert_eq!(
        suid["mode"].as_u64().map(|m| m & 0o7777),
        Some(0o6755),
        "{suid}"
    );
}
