//! What a hostile agent prints or names reaches the person and the store harmlessly, end to end
//! through the real binary in real sandboxes, as this user and as uid 65534:
//! - terminal escapes in its answer and a file name are shown escaped (`\u{1b}`) by `run`,
//!   `show RUN`, `show RUN TRIAL`, `compare` and `results.md`, and kept exact in JSON;
//! - a newline in a file's name never starts a line of the report: the lines it would forge (a
//!   progress line, a diff's header) are shown as the one line of the name they are;
//! - a call of an allowed tool with an argument that is not UTF-8 runs with the exact bytes and
//!   is logged with them;
//! - a `command` agent's large stdout, which is its answer, is stored once;
//! - a service's 73 MB state and 20,000 events are graded whole, kept as the service's files and
//!   left out of the trial record (counted), with proctor's memory bounded.

mod common;

use std::os::unix::fs::MetadataExt;

use common::lab::{change_paths, users, As, Lab, RunOut};

/// The answer: OSC 52 (write the clipboard), BEL, and "clear the screen".
const ANSWER: &str = "hello \x1b]52;c;aGk=\x07 \x1b[2J";
/// How `show` prints it.
const ANSWER_SHOWN: &str = "hello \\u{1b}]52;c;aGk=\\u{7} \\u{1b}[2J";
/// The file the agent names with an escape, as `show` prints it.
const NAME_SHOWN: &str = "name\\u{1b}[31mred";

fn assert_harmless(what: &str, text: &str) {
    for c in text.chars() {
        let control = matches!(c, '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}');
        assert!(!control, "{what} holds the raw control {c:?}:\n{text}");
    }
}

fn assert_harmless_out(what: &str, out: &RunOut) {
    assert_harmless(&format!("{what} (stdout)"), &out.stdout);
    assert_harmless(&format!("{what} (stderr)"), &out.stderr);
}

/// A test file the agent plants, named with an escape, as `run` and `show` print it in the
/// integrity audit's flag.
const PLANTED_SHOWN: &str = "tests/test_x\\u{1b}[31mred.py";

/// A suite whose agent names files with an escape (one of them a planted test, which the
/// integrity audit flags by name on the progress line), and answers with escapes; the task wants
/// a file that is never made, so the trial is `wrong`.
fn escaping_lab(who: As) -> Lab {
    let lab = Lab::new(&format!("hostile-escapes-{who:?}"));
    lab.one_task(
        "",
        "{ file_added = \"never.txt\" }, { check = \"python3 -m pytest -q\" }",
        &[
            r#"printf x > "$(printf 'name\033[31mred')""#,
            r#"mkdir tests; echo 'def test_ok(): pass' > "tests/test_$(printf 'x\033[31mred').py""#,
            r"printf 'hello \033]52;c;aGk=\007 \033[2J'",
        ],
        true,
    );
    lab
}

fn runs(lab: &Lab) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(lab.store().join("runs"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    ids.sort();
    ids
}

#[test]
fn terminal_escapes_of_the_agent_never_reach_the_terminal() {
    for who in users() {
        let lab = escaping_lab(who);
        let run = lab.run(who, &[]);
        assert_eq!(run.code, 1, "{run:?}");
        assert_harmless_out("run", &run);
        assert!(run.stderr.contains("t.agent.0"), "{run:?}");
        assert!(run.stderr.contains(PLANTED_SHOWN), "{run:?}");

        let store = lab.store();
        let store = store.to_str().unwrap();
        let id = lab.run_id();
        // The exact text is in the record (JSON escapes it).
        let record = lab.record("t.agent.0");
        assert_eq!(record["end_state"]["answer"], ANSWER);
        let names = change_paths(&record);
        assert!(names.contains(&"name\x1b[31mred"), "{names:?}");

        let show_run = lab.proctor(who, &["show", &id, "--store", store]);
        assert_eq!(show_run.code, 0, "{show_run:?}");
        assert_harmless_out("show RUN", &show_run);
        assert!(show_run.stdout.contains("t.agent.0"), "{show_run:?}");

        let show = lab.proctor(who, &["show", &id, "t.agent.0", "--store", store]);
        assert_eq!(show.code, 0, "{show:?}");
        assert_harmless_out("show RUN TRIAL", &show);
        assert!(
            show.stdout.contains(&format!("answer\n  {ANSWER_SHOWN}\n")),
            "{}",
            show.stdout
        );
        assert!(
            show.stdout
                .contains(&format!("added         {NAME_SHOWN}\n")),
            "{}",
            show.stdout
        );
        assert!(show.stdout.contains(PLANTED_SHOWN), "{}", show.stdout);

        // JSON keeps the exact text.
        let json = lab.proctor(
            who,
            &[
                "show",
                &id,
                "t.agent.0",
                "--store",
                store,
                "--format",
                "json",
            ],
        );
        assert_eq!(json.code, 0, "{json:?}");
        let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
        assert_eq!(v["end_state"]["answer"], ANSWER);

        let md = std::fs::read_to_string(lab.run_dir().join("results.md")).unwrap();
        assert_harmless("results.md", &md);
        assert!(md.contains("t.agent.0") || md.contains("| t |"), "{md}");

        // A second run to compare with.
        let again = lab.run(who, &[]);
        assert_eq!(again.code, 1, "{again:?}");
        assert_harmless_out("run again", &again);
        let ids = runs(&lab);
        assert_eq!(ids.len(), 2, "{ids:?}");
        let compare = lab.proctor(who, &["compare", &ids[0], &ids[1], "--store", store]);
        assert_harmless_out("compare", &compare);
        assert!(compare.stdout.contains("agent"), "{compare:?}");
    }
}

/// A folder and a file whose names hold newlines and what would follow them: together, the path
/// `x⏎[ 9/9] t.agent.9 … completed⏎  changed  notes.txt (3 -> 4 bytes)⏎    +DONE`, lines that
/// would pass for a progress line and a diff of proctor's if printed as they are.
const FORGING_STEP: &str = r#"d="$(printf 'x\n[ 9')"; mkdir -p "$d" && touch "$d/$(printf '9] t.agent.9                        completed          0.01s\n  changed  notes.txt  (3 -> 4 bytes)\n    +DONE')""#;

/// The lines the forging names would make, each as it would start a line of the output.
const FORGED_STARTS: &[&str] = &["[ 9/9]", "  changed  notes.txt", "    +DONE"];

/// Asserts that no line of `text` starts as one of the forged lines would.
fn assert_no_forged_line(what: &str, text: &str) {
    for line in text.lines() {
        for forged in FORGED_STARTS {
            assert!(
                !line.starts_with(forged),
                "{what} has a line the agent forged ({line:?}):\n{text}"
            );
        }
    }
}

#[test]
fn a_name_holding_newlines_cannot_forge_a_line_of_the_report() {
    for who in users() {
        // The hostile arm: the names are shown, each on the one line it belongs to.
        let lab = Lab::new(&format!("hostile-newlines-{who:?}"));
        lab.one_task("", "{ file_added = \"never.txt\" }", &[FORGING_STEP], true);
        let run = lab.run(who, &[]);
        assert_eq!(run.code, 1, "{run:?}");
        assert_no_forged_line("run (stderr)", &run.stderr);
        assert_harmless_out("run", &run);
        let id = lab.run_id();
        let record = lab.record("t.agent.0");
        assert_eq!(record["outcome"], "wrong", "{record}");
        let names = change_paths(&record);
        assert!(
            names.iter().any(|n| n.ends_with("\n    +DONE")),
            "the record keeps the exact name: {names:?}"
        );
        for args in [vec![id.as_str()], vec![id.as_str(), "t.agent.0"]] {
            let out = lab.show(who, &args);
            assert_eq!(out.code, 0, "{out:?}");
            assert_no_forged_line(&format!("show {}", args.join(" ")), &out.stdout);
            assert_no_forged_line(&format!("show {}", args.join(" ")), &out.stderr);
        }
        let show = lab.show(who, &[&id, "t.agent.0"]);
        let reason = show
            .stdout
            .lines()
            .find(|l| l.starts_with("reason "))
            .unwrap_or_default();
        assert!(reason.contains("x\\u{a}[ 9"), "{}", show.stdout);
        let diff_header = format!(
            "  added    x\\u{{a}}[ 9/9] t.agent.9{}completed          0.01s\\u{{a}}  changed  notes.txt  (3 -> 4 bytes)\\u{{a}}    +DONE  (0 bytes)",
            " ".repeat(24)
        );
        assert!(
            show.stdout.lines().any(|l| l == diff_header),
            "{diff_header:?} in:\n{}",
            show.stdout
        );
        // The viewer shows the one file added, and no section for a `notes.txt`.
        let server = common::viewer::serve(&lab.store());
        let (status, page) = common::viewer::get(&server, &format!("/runs/{id}/trials/t.agent.0"));
        assert_eq!(status, 200, "{page}");
        assert!(!page.contains("<code>notes.txt</code>"), "{page}");
        assert_eq!(page.matches("class=\"diff-file\"").count(), 1, "{page}");
        assert!(page.contains("t.agent.9"), "{page}");

        // The honest arm: a change of several lines is still shown a line at a time.
        let honest = Lab::new(&format!("honest-newlines-{who:?}"));
        honest.one_task(
            "",
            "{ file_added = \"notes.txt\" }",
            &["printf 'one\\ntwo\\n' > notes.txt"],
            false,
        );
        let run = honest.run(who, &[]);
        assert_eq!(run.code, 0, "{run:?}");
        let show = honest.show(who, &[&honest.run_id(), "t.agent.0"]);
        assert_eq!(show.code, 0, "{show:?}");
        let lines: Vec<&str> = show.stdout.lines().collect();
        let at = lines
            .iter()
            .position(|l| *l == "  added    notes.txt  (8 bytes)")
            .unwrap_or_else(|| panic!("no diff header in:\n{}", show.stdout));
        assert_eq!(
            lines.get(at + 2..at + 4),
            Some(&["    +one", "    +two"][..]),
            "{}",
            show.stdout
        );
    }
}

/// The interface command: writes the hex of its first argument's bytes into the workspace.
const HEX_TOOL: &str = "#!/bin/sh\nprintf '%s' \"$1\" | od -An -tx1 > got.hex\n";

#[test]
fn a_non_utf8_argument_runs_exactly_and_is_logged_with_its_bytes() {
    for who in users() {
        let lab = Lab::new(&format!("hostile-argv-{who:?}"));
        lab.write_exec("bin/tool", HEX_TOOL);
        lab.one_task(
            "allow = [\"bin/tool\"]\n\n[tasks.interface]\ncommand = \"tool\"\n",
            "{ file_added = \"got.hex\" }",
            &[r#"tool "$(printf 'a\377b')" plain; echo "exit $?""#],
            true,
        );
        let run = lab.run(who, &[]);
        assert_eq!(run.code, 0, "{run:?}");
        let trial = lab.trial_dir("t.agent.0");
        let got = std::fs::read_to_string(trial.join("changes/files/got.hex")).unwrap();
        assert_eq!(
            got.split_whitespace().collect::<Vec<_>>(),
            ["61", "ff", "62"],
            "the tool got other bytes"
        );
        let record = lab.record("t.agent.0");
        assert_eq!(record["end_state"]["answer"], "exit 0", "{record:#}");

        let log = std::fs::read_to_string(trial.join("calls.jsonl")).unwrap();
        let calls: Vec<serde_json::Value> = log
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(calls.len(), 1, "{log}");
        let call = &calls[0];
        assert_eq!(call["exit"], 0, "{call}");
        assert_eq!(
            call["argv"],
            serde_json::json!(["tool", "a\u{fffd}b", "plain"])
        );
        assert_eq!(call["argv_hex"], serde_json::json!({ "1": "61ff62" }));
        let recorded = &record["end_state"]["calls"][0];
        assert_eq!(recorded["argv_hex"], call["argv_hex"], "{recorded}");
        assert_eq!(recorded["exit"], 0);
    }
}

/// Bytes the trial's folder takes on disk (allocated blocks), its files counted once per inode.
fn disk_bytes(dir: &std::path::Path) -> u64 {
    let mut seen = std::collections::HashSet::new();
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file() && seen.insert(m.ino()))
        .map(|m| m.blocks() * 512)
        .sum()
}

#[test]
fn a_command_agents_large_stdout_is_stored_once() {
    const BYTES: u64 = 20_000_000;
    for who in users() {
        let lab = Lab::new(&format!("hostile-once-{who:?}"));
        lab.write(
            "suite.toml",
            &format!(
                "schema_version = 1\nid = \"lab\"\n\n[defaults]\nwall_timeout_seconds = 60\n\n[[variants]]\nid = \"cmd\"\nagent = \"command\"\ncommand = [\"sh\", \"-c\", \"head -c {BYTES} /dev/zero | tr '\\\\0' a; echo\"]\n\n[[tasks]]\nid = \"t\"\nprompt = \"Say a lot.\"\n\n[tasks.success]\nall = [{{ answer_matches = \"^aaaa\" }}]\n"
            ),
        );
        let run = lab.run(who, &[]);
        assert_eq!(run.code, 0, "{run:?}");
        let trial = lab.trial_dir("t.cmd.0");
        let answer = std::fs::metadata(trial.join("answer.txt")).unwrap();
        assert_eq!(answer.len(), BYTES, "answer.txt keeps the whole answer");
        assert!(
            !trial.join("agent.stdout").exists(),
            "the stdout is the answer"
        );
        assert_eq!(
            std::fs::read(trial.join("agent.stdout.tail")).unwrap(),
            b"\n",
            "what the answer left off of the stdout"
        );
        let on_disk = disk_bytes(&trial);
        // Once (20 MB) plus the bounded heads of the record and the transcript (1 MiB each),
        // never twice.
        assert!(
            on_disk < BYTES + 4 * 1024 * 1024,
            "{on_disk} bytes on disk for a {BYTES}-byte stdout"
        );
        assert!(on_disk >= BYTES, "{on_disk}");

        let store = lab.store();
        let show = lab.proctor(
            who,
            &[
                "show",
                &lab.run_id(),
                "t.cmd.0",
                "--store",
                store.to_str().unwrap(),
            ],
        );
        assert_eq!(show.code, 0, "{show:?}");
        assert!(
            show.stdout.contains("answer\n  aaaaaaaaaaaaaaaa"),
            "{}",
            &show.stdout[..2000.min(show.stdout.len())]
        );
        assert_eq!(
            lab.record("t.cmd.0")["outcome"],
            "completed",
            "the answer is graded whole"
        );
    }
}

/// A tool that writes how many bytes of arguments it was given, one line per call, to
/// `sizes.txt`.
const SIZE_TOOL: &str =
    "#!/bin/sh\nn=0\nfor a in \"$@\"; do n=$((n + ${#a})); done\necho $n >> sizes.txt\n";

#[test]
fn three_hundred_calls_of_a_megabyte_of_arguments_keep_bounded_records() {
    for who in users() {
        let lab = Lab::new(&format!("hostile-bigargv-{who:?}"));
        lab.write_exec("bin/tool", SIZE_TOOL);
        // 300 calls, each with 10 arguments of 100,000 bytes (one argument may not pass 128 KiB).
        let step = r#"a=$(head -c 100000 /dev/zero | tr '\0' x); i=0; while [ $i -lt 300 ]; do tool "$a" "$a" "$a" "$a" "$a" "$a" "$a" "$a" "$a" "$a$i" || exit 9; i=$((i + 1)); done"#;
        lab.one_task(
            "allow = [\"bin/tool\"]\n\n[tasks.interface]\ncommand = \"tool\"\n",
            "{ file_added = \"sizes.txt\" }",
            &[step],
            false,
        );
        // 300 calls of a megabyte each take a while on a busy machine: more than the lab's
        // usual 30 s.
        let toml = std::fs::read_to_string(lab.suite().join("suite.toml")).unwrap();
        lab.write(
            "suite.toml",
            &toml.replace("wall_timeout_seconds = 30", "wall_timeout_seconds = 300"),
        );
        let store = lab.store();
        let suite = lab.suite();
        let args = [
            "run",
            suite.to_str().unwrap(),
            "--store",
            store.to_str().unwrap(),
            "--trials",
            "1",
        ];
        let (run, peak_kib) = lab.proctor_peak_rss(who, &args, &[]);
        assert_eq!(run.code, 0, "{run:?}");
        let trial = lab.trial_dir("t.agent.0");
        // Every call ran with its whole arguments.
        let sizes = std::fs::read_to_string(trial.join("changes/files/sizes.txt")).unwrap();
        let sizes: Vec<&str> = sizes.lines().collect();
        assert_eq!(sizes.len(), 300);
        assert_eq!(sizes[0], "1000001");
        assert_eq!(sizes[299], "1000003");
        // Each record keeps a bounded head and what the whole held.
        let log = std::fs::read_to_string(trial.join("calls.jsonl")).unwrap();
        let calls: Vec<serde_json::Value> = log
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(calls.len(), 300);
        let last = &calls[299];
        let kept: usize = last["argv"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().len())
            .sum();
        assert!(kept <= 16 * 1024, "{kept} bytes of argv kept");
        assert_eq!(last["argv_cut"]["argc"], 11, "{}", last["argv_cut"]);
        assert_eq!(last["argv_cut"]["bytes"], 4 + 1_000_003);
        let mut h = blake3::Hasher::new();
        h.update(b"tool\0");
        let a = "x".repeat(100_000);
        for _ in 0..9 {
            h.update(a.as_bytes());
            h.update(b"\0");
        }
        h.update(format!("{a}299\0").as_bytes());
        assert_eq!(last["argv_cut"]["blake3"], h.finalize().to_hex().as_str());
        let record = lab.record("t.agent.0");
        assert_eq!(record["outcome"], "completed", "{}", record["reason"]);
        assert_eq!(record["end_state"]["calls"].as_array().unwrap().len(), 300);
        let sizes_mb = |p: std::path::PathBuf| std::fs::metadata(p).unwrap().len() / 1_000_000;
        assert!(
            sizes_mb(trial.join("calls.jsonl")) < 10,
            "calls.jsonl too large"
        );
        assert!(
            sizes_mb(trial.join("trial.json")) < 10,
            "trial.json too large"
        );
        let peak_mib = peak_kib / 1024;
        eprintln!(
            "{who:?}: peak RSS {peak_mib} MiB; calls.jsonl {} bytes",
            log.len()
        );
        assert!(peak_mib < 300, "proctor reached {peak_mib} MiB");
    }
}

/// An agent that floods the calls log with 20,000 real calls, made straight through the
/// trial's call socket (its request protocol, 16 at a time: faster than 20,000 shims), hoping a
/// later call goes unrecorded, then makes the call it wants hidden. (Records it writes itself
/// never reach the log: tests/calls_witness.rs.)
const FLOOD_CALLS: &str = r#"
import os, socket, struct, threading
fields = [b"proctor-call-1", b"-", b"tool", b"1", b"get"]
payload = b"".join(f + b"\0" for f in fields)
msg = struct.pack("<I", len(payload)) + payload
null = os.open("/dev/null", os.O_RDWR)
cwd = os.open(".", os.O_RDONLY)
lock = threading.Lock()
left = [20000]
def worker():
    while True:
        with lock:
            if left[0] == 0:
                return
            left[0] -= 1
        s = socket.socket(socket.AF_UNIX)
        s.connect("/run/proctor/calls.sock")
        socket.send_fds(s, [msg], [null, null, null, cwd])
        s.recv(4)
        s.close()
threads = [threading.Thread(target=worker) for _ in range(16)]
for t in threads:
    t.start()
for t in threads:
    t.join()
"#;

#[test]
fn a_flood_of_calls_cannot_hide_a_later_call_it_is_refused_and_the_trial_stays_graded() {
    let lab = Lab::new("hostile-callflood");
    lab.write_exec(
        "bin/tool",
        "#!/bin/sh\n[ \"$1\" = drop ] && echo gone > dropped.txt\nexit 0\n",
    );
    lab.write("fixture/flood.py", FLOOD_CALLS);
    lab.one_task(
        "allow = [\"bin/tool\"]\n\n[tasks.interface]\ncommand = \"tool\"\n",
        "{ calls = { verb = \"drop\", max = 0 } }",
        &["python3 flood.py", "tool drop; echo \"exit $?\""],
        true,
    );
    // 20,000 real calls take longer than the lab's usual 30 s.
    let toml = std::fs::read_to_string(lab.suite().join("suite.toml")).unwrap();
    lab.write(
        "suite.toml",
        &toml.replace("wall_timeout_seconds = 30", "wall_timeout_seconds = 300"),
    );
    let run = lab.run(As::Me, &["--trials", "1"]);
    let record = lab.record("t.agent.0");
    assert_eq!(record["limit_reached"], "calls", "{record:#}");
    // The call past the bound did not run: nothing happened unrecorded.
    assert_eq!(record["end_state"]["answer"], "exit 125", "{record:#}");
    let trial = lab.trial_dir("t.agent.0");
    assert!(
        !trial.join("changes/files/dropped.txt").exists(),
        "the refused call ran"
    );
    // Graded, not errored: flooding does not take the trial out of n.
    assert_eq!(record["outcome"], "completed", "{run:?}");
    let calls = record["end_state"]["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 20_000);
    assert!(calls.iter().all(|c| c["argv"][1] != "drop"));

    // The honest arm of the same task: a few calls, no drop, no limit, completed.
    let honest = Lab::new("hostile-callflood-honest");
    honest.write_exec(
        "bin/tool",
        "#!/bin/sh\n[ \"$1\" = drop ] && echo gone > dropped.txt\nexit 0\n",
    );
    honest.one_task(
        "allow = [\"bin/tool\"]\n\n[tasks.interface]\ncommand = \"tool\"\n",
        "{ calls = { verb = \"drop\", max = 0 } }",
        &["tool get; tool get; echo \"exit $?\""],
        true,
    );
    let run = honest.run(As::Me, &["--trials", "1"]);
    let record = honest.record("t.agent.0");
    assert_eq!(record["outcome"], "completed", "{run:?}");
    assert!(record["limit_reached"].is_null(), "{record:#}");
    assert_eq!(record["end_state"]["calls"].as_array().unwrap().len(), 2);
}

/// A service that, on start, writes a 73 MB state (140,000 messages) and 20,000 events, then
/// answers its ready probe on 127.0.0.1:7071.
const BIG_STATE_SERVICE: &str = r#"import http.server, json, os
d = os.environ["PROCTOR_SERVICE_DIR"]
with open(os.path.join(d, "state.json"), "w") as f:
    f.write('{"sent": [')
    for i in range(140000):
        if i:
            f.write(",")
        json.dump({"id": i, "to": "dana", "text": "x" * 480}, f)
    f.write('], "last": "ok"}')
with open(os.path.join(d, "events.jsonl"), "w") as f:
    for i in range(20000):
        f.write(json.dumps({"at": i / 1000, "actor": "agent", "op": "send", "id": "e%d" % i}) + "\n")
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", 7071), H).serve_forever()
"#;

#[test]
fn a_large_service_state_is_graded_whole_kept_as_its_file_and_left_out_of_the_record() {
    for who in users() {
        let lab = big_state_lab(who);
        let store = lab.store();
        let suite = lab.suite();
        let args = [
            "run",
            suite.to_str().unwrap(),
            "--store",
            store.to_str().unwrap(),
            "--trials",
            "1",
        ];
        let (run, peak_kib) = lab.proctor_peak_rss(who, &args, &[]);
        assert_eq!(run.code, 0, "{run:?}");
        let peak_mib = peak_kib / 1024;
        assert_graded_whole_and_left_out_of_the_record(&lab);
        let trial = lab.trial_dir("t.agent.0");
        let trial_json = std::fs::metadata(trial.join("trial.json")).unwrap().len();
        eprintln!("{who:?}: peak RSS {peak_mib} MiB; trial.json {trial_json} bytes");
        assert!(peak_mib < 300, "proctor reached {peak_mib} MiB");
        assert_rescore_reads_the_kept_files_whole(&lab, who);
        assert_show_pages_the_kept_state(&lab, who);
        assert_text_pages_escaped_with_the_next_offset(&lab, who);
    }
}

/// A lab whose service `svc` (run as `who`) keeps a state of over 70 MB and 20,000 events, and
/// whose task grades the whole state.
fn big_state_lab(who: As) -> Lab {
    let lab = Lab::new(&format!("hostile-bigstate-{who:?}"));
    lab.write("fixture/README.md", "x\n");
    lab.write("services/big.py", BIG_STATE_SERVICE);
    lab.write(
        "suite.toml",
        "schema_version = 1\nid = \"lab\"\n\n[defaults]\nwall_timeout_seconds = 60\n\n[[services]]\nname = \"svc\"\ncommand = [\"python3\", \"services/big.py\"]\nready = { http = \"http://127.0.0.1:7071/\", timeout_seconds = 30 }\nstate = \"state.json\"\n\n[[variants]]\nid = \"agent\"\nagent = \"script\"\nscript = \"agents/agent\"\n\n[[tasks]]\nid = \"t\"\nprompt = \"Do the thing.\"\n\n[tasks.success]\nall = [\n  { state = { service = \"svc\", pointer = \"/last\", equals = \"ok\" } },\n  { state = { service = \"svc\", pointer = \"/sent/139999/to\", equals = \"dana\" } },\n  { state = { service = \"svc\", pointer = \"/sent\", exists = true } },\n]\n",
    );
    lab.write("agents/agent/t.toml", "answer = \"done\"\n");
    lab
}

/// Graded on the whole state: the last message is read, and the pointer at the whole list is
/// evidence as a head and a length; the record leaves the state and the events past 10,000
/// out, and says so; trial.json and results.json stay small.
fn assert_graded_whole_and_left_out_of_the_record(lab: &Lab) {
    let trial = lab.trial_dir("t.agent.0");
    let record = lab.record("t.agent.0");
    assert_eq!(record["outcome"], "completed", "{}", record["reason"]);
    let evidence = &record["verdict"]["success"]["assertions"][2]["evidence"];
    assert!(
        evidence["actual_bytes"].as_u64().unwrap() > 70_000_000,
        "{evidence}"
    );
    assert!(evidence["actual_head"].as_str().unwrap().len() <= 4096);
    // The record leaves the state and the events past 10,000 out, and says so.
    let svc = &record["end_state"]["services"]["svc"];
    assert!(svc["state"].is_null(), "the state is in the record");
    let state_len = std::fs::metadata(trial.join("services/svc/state.json"))
        .unwrap()
        .len();
    assert!(state_len > 70_000_000, "{state_len}");
    assert!(svc["state_omitted_bytes"].as_u64().unwrap() > 70_000_000);
    assert_eq!(svc["events"].as_array().unwrap().len(), 10_000);
    assert_eq!(svc["events_omitted"], 10_000);
    assert_eq!(record["limit_reached"], "entries");
    let trial_json = std::fs::metadata(trial.join("trial.json")).unwrap().len();
    assert!(trial_json < 5_000_000, "trial.json is {trial_json} bytes");
    let results = std::fs::metadata(lab.run_dir().join("results.json"))
        .unwrap()
        .len();
    assert!(results < 5_000_000, "results.json is {results} bytes");
}

/// rescore reads the kept files whole again and reaches the same verdict.
fn assert_rescore_reads_the_kept_files_whole(lab: &Lab, who: As) {
    let store = lab.store();
    let suite = lab.suite();
    let rescore = lab.proctor(
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
    assert_eq!(rescore.code, 0, "{rescore:?}");
    assert!(rescore.stderr.contains("no outcome changed"), "{rescore:?}");
    let again = lab.record("t.agent.0");
    assert_eq!(again["outcome"], "completed", "{}", again["reason"]);
    assert_eq!(
        again["end_state"]["services"]["svc"]["events_omitted"],
        10_000
    );
    assert!(again["end_state"]["services"]["svc"]["state"].is_null());
}

/// `show` says what the record left out and how to page it; the pages, put back together, are
/// the kept file byte for byte, each page in bounded memory.
fn assert_show_pages_the_kept_state(lab: &Lab, who: As) {
    let store = lab.store();
    let trial = lab.trial_dir("t.agent.0");
    let show = lab.proctor(
        who,
        &[
            "show",
            &lab.run_id(),
            "t.agent.0",
            "--store",
            store.to_str().unwrap(),
        ],
    );
    assert_eq!(show.code, 0, "{show:?}");
    let hint = format!(
        "proctor show {} t.agent.0 --service svc/state.json",
        lab.run_id()
    );
    assert!(show.stdout.contains(&hint), "{}", show.stdout);
    assert!(
        show.stdout
            .contains("events 20000 (10000 in the record, every one graded)"),
        "{}",
        show.stdout
    );
    let kept = std::fs::read(trial.join("services/svc/state.json")).unwrap();
    let mut joined = Vec::with_capacity(kept.len());
    let mut offset = 0u64;
    let mut largest_peak = 0;
    loop {
        let offset_arg = offset.to_string();
        let args = [
            "show",
            &lab.run_id(),
            "t.agent.0",
            "--store",
            store.to_str().unwrap(),
            "--service",
            "svc/state.json",
            "--offset",
            &offset_arg,
            "--bytes",
            "1048576",
            "--format",
            "json",
        ];
        let (page, peak) = lab.proctor_peak_rss(who, &args, &[]);
        largest_peak = largest_peak.max(peak);
        assert_eq!(page.code, 0, "{page:?}");
        let page: serde_json::Value = serde_json::from_str(&page.stdout).unwrap();
        assert_eq!(page["total_bytes"], kept.len() as u64);
        joined.extend_from_slice(page["text"].as_str().unwrap().as_bytes());
        match page["next_offset"].as_u64() {
            Some(next) => offset = next,
            None => break,
        }
    }
    assert!(joined == kept, "the pages are not the kept state");
    eprintln!(
        "{who:?}: paging the state peaked at {} MiB",
        largest_peak / 1024
    );
    assert!(
        largest_peak / 1024 < 100,
        "a page took {} MiB",
        largest_peak / 1024
    );
}

/// Text pages are escaped for the terminal and say where the next one starts.
fn assert_text_pages_escaped_with_the_next_offset(lab: &Lab, who: As) {
    let store = lab.store();
    let page = lab.proctor(
        who,
        &[
            "show",
            &lab.run_id(),
            "t.agent.0",
            "--store",
            store.to_str().unwrap(),
            "--service",
            "svc/events.jsonl",
            "--bytes",
            "4096",
        ],
    );
    assert_eq!(page.code, 0, "{page:?}");
    assert!(
        page.stdout.ends_with('\n') && page.stdout.len() <= 4096,
        "{}",
        page.stdout
    );
    assert!(
        page.stderr.contains(&format!(
            "next page: proctor show {} t.agent.0 --service svc/events.jsonl --offset {}",
            lab.run_id(),
            page.stdout.len()
        )),
        "{page:?}"
    );
}
