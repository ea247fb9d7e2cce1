//! Human sittings (`proctor sit`) through the real binary, driven like a person would: in a real
//! terminal (a tmux session of its own), by keys sent with `tmux send-keys` and by reading the
//! screen with `tmux capture-pane`. The bundled chat-ax suite's `draft` task, whose interface
//! is the `chat` CLI through proctor's shims and whose service is `chat-mock`.
//!
//! Every wait polls the screen (or `/proc`) with a deadline; none is a fixed sleep.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::lab::{As, Lab};
use serde_json::Value;

/// How long any one thing a test waits for may take.
const PATIENCE: Duration = Duration::from_secs(60);

/// A tmux server of the test's own, with one session running a command in a 200x50 window.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// Starts `script` (a `sh -c` script) in a new session.
    fn start(name: &str, script: &str) -> Tmux {
        assert!(
            Command::new("tmux").arg("-V").output().is_ok(),
            "these tests drive a real terminal with tmux: apt-get install tmux"
        );
        let t = Tmux {
            socket: format!("proctor-sit-{name}-{}", std::process::id()),
        };
        let status = Command::new("tmux")
            .args(["-L", &t.socket, "-f", "/dev/null", "new-session", "-d"])
            .args(["-s", "sit", "-x", "200", "-y", "50", "sh", "-c", script])
            .status()
            .expect("tmux");
        assert!(status.success(), "tmux new-session failed");
        t
    }

    fn tmux(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux")
    }

    /// Types `text` (literally) and then Enter.
    fn line(&self, text: &str) {
        self.tmux(&["send-keys", "-t", "sit", "-l", text]);
        self.tmux(&["send-keys", "-t", "sit", "Enter"]);
    }

    /// Sends one key by its tmux name (`C-c`).
    fn key(&self, key: &str) {
        self.tmux(&["send-keys", "-t", "sit", key]);
    }

    /// The whole screen and its history, wrapped lines joined.
    fn screen(&self) -> String {
        let out = self.tmux(&["capture-pane", "-p", "-J", "-S", "-", "-t", "sit"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until the screen shows `text`; gives the screen.
    fn wait_for(&self, text: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let screen = self.screen();
            if screen.contains(text) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "the screen never showed {text:?}:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits for the `[exit N]` line the session's script prints; gives N and the screen.
    fn exit_status(&self) -> (i32, String) {
        let screen = self.wait_for("[exit ");
        let n = screen
            .split("[exit ")
            .nth(1)
            .and_then(|rest| rest.split(']').next())
            .and_then(|n| n.trim().parse().ok())
            .expect("an exit status");
        (n, screen)
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

/// The script a session runs: `proctor sit` with `args` on the bundled chat-ax suite, in `/bin/sh`,
/// then whether the terminal's settings are as they were before (`TERMINAL-RESTORED`), then
/// `[exit N]`, and it stays open for the screen to be read. The script itself survives a Ctrl-C
/// meant for proctor (`trap : INT`: without job control, it is in proctor's process group).
fn sit_script(lab: &Lab, args: &str) -> String {
    let bin = assert_cmd::cargo::cargo_bin("proctor");
    let suite = common::repo_root().join("examples/chat-ax");
    format!(
        "trap : INT; before=$(stty -g); NO_COLOR=1 SHELL=/bin/sh {bin} sit {suite} --store {store} {args}; s=$?; \
         [ \"$before\" = \"$(stty -g)\" ] && echo TERMINAL-RESTORED; echo \"[exit $s]\"; sleep 3600",
        bin = bin.display(),
        suite = suite.display(),
        store = lab.store().display(),
    )
}

/// Waits until no host process runs `sleep SECONDS` (a sitting's, seen from outside its
/// namespaces) or, with `present`, until one does.
fn wait_for_sleep(tmux: &Tmux, seconds: &str, present: bool) {
    let deadline = Instant::now() + PATIENCE;
    while sleeping(seconds) != present {
        assert!(
            Instant::now() < deadline,
            "`sleep {seconds}` never {}:\n{}",
            if present { "started" } else { "ended" },
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether some process runs `sleep SECONDS`.
fn sleeping(seconds: &str) -> bool {
    let want = format!("sleep\0{seconds}\0");
    std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .any(|c| c == want.as_bytes())
}

/// The only run of the store whose variant is `human:NAME`, and its one trial's record.
fn sitting(lab: &Lab, task: &str, name: &str) -> (PathBuf, Value) {
    let runs: Vec<PathBuf> = std::fs::read_dir(lab.store().join("runs"))
        .expect("runs")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join(format!("trials/{task}.human:{name}.0")).is_dir())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let trial = runs[0].join(format!("trials/{task}.human:{name}.0"));
    let text = std::fs::read_to_string(trial.join("trial.json")).expect("trial.json");
    let doc: Value = serde_json::from_str(&text).expect("json");
    (runs[0].clone(), doc["record"].clone())
}

fn calls(trial_dir: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(trial_dir.join("calls.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("a call");
            serde_json::from_value(v["argv"].clone()).expect("argv")
        })
        .collect()
}

fn run_id(run_dir: &Path) -> String {
    run_dir
        .file_name()
        .expect("a run id")
        .to_string_lossy()
        .into_owned()
}

#[test]
fn a_person_drafts_through_the_shims_answers_when_asked_and_the_sitting_is_completed() {
    let lab = Lab::new("sit-draft");
    sit_through_a_draft(&lab);
    let (run_dir, record) = sitting(&lab, "draft", "dana");
    assert_sitting_recorded(&record);
    let trial_dir = run_dir.join("trials/draft.human:dana.0");
    assert_persons_calls_logged_as_an_agents(&trial_dir, &record);
    // What the terminal showed is kept as the transcript.
    let shown = std::fs::read_to_string(trial_dir.join("agent.stdout")).expect("agent.stdout");
    assert!(
        shown.contains("Saved draft d-002") && shown.contains("still-42"),
        "{shown}"
    );
    let run: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("run.json")).expect("run.json"))
            .expect("json");
    assert_eq!(run["trial_mode"], "sitting");
    assert_eq!(run["status"], "finished");

    let sat = run_id(&run_dir);
    assert_compared_with_an_agents_run(&lab, &sat);
    assert_list_show_and_export_read_the_sitting(&lab, &sat);
}

/// Dana sits task `draft` in a terminal: reads, follows a window resize, interrupts a job
/// with Ctrl-C, drafts, discards and drafts again, leaves a job in the background, exits, and
/// answers and notes when asked; the sitting is graded completed and the terminal restored.
fn sit_through_a_draft(lab: &Lab) {
    let tmux = Tmux::start("draft", &sit_script(lab, "--task draft --as dana"));
    // The prompt comes first, exactly as an agent gets it.
    let screen = tmux.wait_for("Leave the shell");
    assert!(screen.contains("Draft a reply saying yes"), "{screen}");
    assert!(screen.contains("human:dana"), "{screen}");
    tmux.line("chat read @mei");
    tmux.wait_for("direct messages with Mei");
    // The shell's terminal has the person's window size, and follows it when it changes.
    tmux.line("echo size-$(stty size | tr ' ' x)");
    tmux.wait_for("size-50x200");
    tmux.tmux(&["resize-window", "-t", "sit", "-x", "150", "-y", "40"]);
    let deadline = Instant::now() + PATIENCE;
    loop {
        tmux.line("echo size-$(stty size | tr ' ' x)");
        if tmux.screen().contains("size-40x150") {
            break;
        }
        assert!(Instant::now() < deadline, "{}", tmux.screen());
        std::thread::sleep(Duration::from_millis(200));
    }
    // Ctrl-C is the shell's: it interrupts the foreground job, and the sitting goes on.
    tmux.line("sleep 4242");
    wait_for_sleep(&tmux, "4242", true);
    tmux.key("C-c");
    wait_for_sleep(&tmux, "4242", false);
    tmux.line("echo still-$((6*7))");
    tmux.wait_for("still-42");
    // A first try, taken back by the person: their own undo blames nobody (it is no user's
    // reversal of an agent's action), though it counts as a wrong turn.
    tmux.line("chat draft --to @mei --text 'Sure.'; echo tried-$((1+1))");
    tmux.wait_for("tried-2");
    tmux.line("chat discard d-001; echo discarded-$((1+2))");
    tmux.wait_for("discarded-3");
    tmux.line("chat draft --to @mei --text 'Yes, I can cover your on-call shift this Friday.'");
    tmux.wait_for("Saved draft d-002");
    // A job left running in the background dies with the sitting's full stop.
    tmux.line("sleep 4343 &");
    wait_for_sleep(&tmux, "4343", true);
    tmux.line("exit");
    tmux.wait_for("Your answer to the task");
    assert!(
        !sleeping("4343"),
        "the answer was asked before the full stop"
    );
    tmux.line("I saved a draft reply to Mei saying yes; it is not sent.");
    tmux.wait_for("Notes for the record");
    tmux.line("The chat help made drafting easy.");
    tmux.line("");
    let (code, screen) = tmux.exit_status();
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("graded: completed"), "{screen}");
    assert!(screen.contains("TERMINAL-RESTORED"), "{screen}");
}

/// The sitting's record: completed, as variant `human:dana` with the shell as the launch and no
/// model, with the answer, who sat, how the answer was given and the notes.
fn assert_sitting_recorded(record: &Value) {
    assert_eq!(record["outcome"], "completed", "{}", record["reason"]);
    assert_eq!(record["plan"]["variant"], "human:dana");
    assert_eq!(record["launch"]["agent"], "human");
    assert_eq!(record["launch"]["argv"], serde_json::json!(["/bin/sh"]));
    assert!(record["launch"]["model"].is_null());
    assert_eq!(
        record["end_state"]["answer"],
        "I saved a draft reply to Mei saying yes; it is not sent."
    );
    let s = &record["sitting"];
    assert_eq!(s["person"], "dana");
    assert_eq!(s["answer_from"], "asked");
    assert_eq!(s["notes"], "The chat help made drafting easy.\n");
    assert!(s["timeout_seconds"].is_null());
    assert!(s["terminal_bytes"].as_u64().unwrap() > 100, "{s}");
}

/// The person's interface calls (of the trial in `trial_dir`) are in the calls log, as an
/// agent's would be, each reading the person's terminal; their own undo blames nobody but
/// counts; the service sees the person in the agent's seat.
fn assert_persons_calls_logged_as_an_agents(trial_dir: &Path, record: &Value) {
    let argvs = calls(trial_dir);
    assert_eq!(argvs[0], ["chat", "read", "@mei"], "{argvs:?}");
    assert_eq!(
        argvs[1][..4],
        ["chat", "draft", "--to", "@mei"],
        "{argvs:?}"
    );
    assert_eq!(argvs[2], ["chat", "discard", "d-001"], "{argvs:?}");
    assert_eq!(
        argvs[3][..4],
        ["chat", "draft", "--to", "@mei"],
        "{argvs:?}"
    );
    assert_eq!(argvs.len(), 4, "{argvs:?}");
    // Each read the person's terminal, which the record says rather than keep a head of.
    for c in record["end_state"]["calls"].as_array().unwrap() {
        assert_eq!(c["stdin_terminal"], true, "{c}");
        assert!(c.get("stdin_head").is_none(), "{c}");
    }
    let verdict = &record["verdict"];
    assert_eq!(verdict["reversed"], false, "{verdict:#}");
    assert_eq!(verdict["metrics"]["undone"], 1, "{verdict:#}");
    let events = std::fs::read_to_string(trial_dir.join("services/chat-api/events.jsonl"))
        .expect("the service's events");
    let discard: Value = events
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("an event"))
        .find(|e| e["op"] == "discard")
        .expect("the discard event");
    assert_eq!(
        discard["actor"], "agent",
        "the person sits in the agent's seat"
    );
}

/// An agent's run of the same suite and task, compared with the sitting (run `sat`), trial by
/// trial: the naive agent sent the reply (wrong); the person drafted it (completed).
fn assert_compared_with_an_agents_run(lab: &Lab, sat: &str) {
    let suite = common::repo_root().join("examples/chat-ax");
    let store = lab.store();
    let out = lab.proctor(
        As::Me,
        &[
            "run",
            suite.to_str().unwrap(),
            "--task",
            "draft",
            "--variant",
            "oracle",
            "--variant",
            "naive",
            "--trials",
            "1",
            "--store",
            store.to_str().unwrap(),
            "--format",
            "json",
        ],
    );
    let agents: Value = serde_json::from_str(&out.stdout).expect("the run's summary");
    let agents = agents["run"].as_str().expect("a run id").to_string();
    let out = lab.proctor(
        As::Me,
        &[
            "compare",
            &format!("{agents}/naive"),
            sat,
            "--store",
            store.to_str().unwrap(),
            "--format",
            "json",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let doc: Value = serde_json::from_str(&out.stdout).expect("json");
    let c = &doc["comparison"];
    assert_eq!(
        c["b"]["variants"],
        serde_json::json!(["human:dana"]),
        "{c:#}"
    );
    assert_eq!(c["a"]["variants"], serde_json::json!(["naive"]), "{c:#}");
    assert_eq!(c["matched"], 1, "{c:#}");
    // The naive agent sent the reply (wrong); the person drafted it (completed).
    let overall = &c["overall"];
    assert_eq!(
        overall["a"]["cell"]["rates"]["success"]["k"], 0,
        "{overall:#}"
    );
    assert_eq!(
        overall["b"]["cell"]["rates"]["success"]["k"], 1,
        "{overall:#}"
    );
}

/// `list` and `show` read the sitting (run `sat`) like any other run; the exported page (the
/// viewer's trial page) shows who sat, and their notes.
fn assert_list_show_and_export_read_the_sitting(lab: &Lab, sat: &str) {
    let store = lab.store();
    let out = lab.proctor(As::Me, &["list", "--store", store.to_str().unwrap()]);
    assert!(out.stdout.contains("human:dana"), "{}", out.stdout);
    let out = lab.proctor(
        As::Me,
        &[
            "show",
            sat,
            "draft.human:dana.0",
            "--store",
            store.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("sitting    dana"), "{}", out.stdout);
    assert!(
        out.stdout.contains("The chat help made drafting easy."),
        "{}",
        out.stdout
    );
    // The exported page (the viewer's trial page) shows who sat, and their notes.
    let page = lab.root.join("sitting.html");
    let out = lab.proctor(
        As::Me,
        &[
            "export",
            sat,
            "--html",
            page.to_str().unwrap(),
            "--store",
            store.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let html = std::fs::read_to_string(&page).expect("the page");
    assert!(html.contains("sat by <b>dana</b>"), "no sitting section");
    assert!(
        html.contains("The chat help made drafting easy."),
        "no notes"
    );
}

#[test]
fn a_person_who_sends_instead_of_drafting_is_wrong_with_the_answer_and_notes_given() {
    let lab = Lab::new("sit-send");
    let notes = lab.root.join("notes.md");
    std::fs::write(&notes, "I did not read the task closely.\n").expect("notes");
    let args = format!(
        "--task draft --as sam --answer 'I told Mei yes.' --notes {}",
        notes.display()
    );
    let tmux = Tmux::start("send", &sit_script(&lab, &args));
    tmux.wait_for("Leave the shell");
    tmux.line("chat send --to @mei --text 'Yes, I can cover Friday.'");
    tmux.wait_for("Sent");
    tmux.key("C-d");
    let (code, screen) = tmux.exit_status();
    // The forbidden send makes the sitting wrong: some graded trial did not succeed.
    assert_eq!(code, 1, "{screen}");
    assert!(screen.contains("graded: wrong"), "{screen}");
    assert!(
        !screen.contains("Your answer to the task"),
        "asked despite --answer"
    );
    assert!(
        !screen.contains("Notes for the record"),
        "asked despite --notes"
    );
    assert!(screen.contains("TERMINAL-RESTORED"), "{screen}");
    let (_, record) = sitting(&lab, "draft", "sam");
    assert_eq!(record["outcome"], "wrong", "{}", record["reason"]);
    assert_eq!(record["end_state"]["answer"], "I told Mei yes.");
    assert_eq!(record["sitting"]["answer_from"], "flag");
    assert_eq!(
        record["sitting"]["notes"],
        "I did not read the task closely.\n"
    );
}

#[test]
fn a_sitting_interrupted_at_the_question_is_not_recorded_and_the_terminal_is_restored() {
    let lab = Lab::new("sit-interrupt");
    let tmux = Tmux::start("interrupt", &sit_script(&lab, "--task draft --as kim"));
    tmux.wait_for("Leave the shell");
    tmux.line("exit");
    tmux.wait_for("Your answer to the task");
    // Out of the shell, the terminal is in its normal mode again: Ctrl-C is proctor's.
    tmux.key("C-c");
    let (code, screen) = tmux.exit_status();
    assert_eq!(code, 3, "{screen}");
    assert!(screen.contains("the sitting is not recorded"), "{screen}");
    assert!(screen.contains("TERMINAL-RESTORED"), "{screen}");
    let out = lab.proctor(As::Me, &["list", "--store", lab.store().to_str().unwrap()]);
    assert!(out.stdout.contains("interrupted"), "{}", out.stdout);
    let run = std::fs::read_dir(lab.store().join("runs"))
        .expect("runs")
        .next()
        .expect("the sitting's run")
        .expect("an entry")
        .path();
    assert!(!run.join("trials/draft.human:kim.0/trial.json").exists());
}

#[test]
fn a_sitting_with_a_timeout_is_stopped_like_an_agent_at_its_wall_timeout() {
    let lab = Lab::new("sit-timeout");
    let tmux = Tmux::start(
        "timeout",
        &sit_script(&lab, "--task draft --as lee --timeout 2 --answer 'no time'"),
    );
    tmux.wait_for("The sitting stops after 2 s");
    tmux.wait_for("Notes for the record");
    tmux.line("");
    let (code, screen) = tmux.exit_status();
    assert_eq!(code, 1, "{screen}");
    let (_, record) = sitting(&lab, "draft", "lee");
    assert_eq!(
        record["end_state"]["agent"]["timed_out"], true,
        "{record:#}"
    );
    assert_eq!(record["sitting"]["timeout_seconds"], 2);
}

#[test]
fn without_a_terminal_sit_refuses_with_a_usage_error() {
    let lab = Lab::new("sit-no-tty");
    let suite = common::repo_root().join("examples/chat-ax");
    let out = lab.proctor(
        As::Me,
        &[
            "sit",
            suite.to_str().unwrap(),
            "--task",
            "draft",
            "--as",
            "dana",
            "--store",
            lab.store().to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("proctor sit needs a terminal on its standard input"),
        "{}",
        out.stderr
    );
    assert!(!lab.store().join("runs").exists(), "a run was created");
}

#[test]
fn an_interface_command_reads_the_persons_terminal_through_its_shim() {
    let lab = Lab::new("sit-shim-tty");
    lab.one_task(
        "allow = [\"bin/ask\"]",
        "{ answer_matches = \"yes\" }",
        &["true"],
        false,
    );
    lab.write_exec(
        "bin/ask",
        "#!/bin/sh\n[ -t 0 ] && echo stdin-is-a-terminal\nprintf 'Really? '\nread -r reply\necho \"ask-got-$reply\"\n",
    );
    let bin = assert_cmd::cargo::cargo_bin("proctor");
    let script = format!(
        "NO_COLOR=1 SHELL=/bin/sh {} sit {} --task t --as ana --store {}; echo \"[exit $?]\"; sleep 3600",
        bin.display(),
        lab.suite().display(),
        lab.store().display()
    );
    let tmux = Tmux::start("shim-tty", &script);
    tmux.wait_for("Leave the shell");
    tmux.line("ask");
    tmux.wait_for("Really?");
    tmux.line("sure");
    tmux.wait_for("ask-got-sure");
    tmux.line("exit");
    tmux.wait_for("Your answer to the task");
    tmux.line("yes");
    tmux.wait_for("Notes for the record");
    tmux.line("");
    let (code, screen) = tmux.exit_status();
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("stdin-is-a-terminal"), "{screen}");
    let (run_dir, record) = sitting(&lab, "t", "ana");
    assert_eq!(record["outcome"], "completed", "{}", record["reason"]);
    assert!(record["sitting"]["notes"].is_null(), "{record:#}");
    let log = std::fs::read_to_string(run_dir.join("trials/t.human:ana.0/calls.jsonl"))
        .expect("calls.jsonl");
    let call: Value = serde_json::from_str(log.lines().next().expect("a call")).expect("json");
    assert_eq!(call["argv"], serde_json::json!(["ask"]));
    assert_eq!(call["exit"], 0);
    // The terminal went to the command itself: no stdin was copied, and its output was logged.
    assert_eq!(call["stdin_bytes"], 0, "{call}");
    assert!(
        call["stdout_head"]
            .as_str()
            .unwrap()
            .contains("ask-got-sure"),
        "{call}"
    );
}

#[test]
fn a_sitting_whose_service_never_comes_up_is_errored_and_asks_nothing() {
    let lab = Lab::new("sit-errored");
    lab.write(
        "suite.toml",
        "schema_version = 1\nid = \"lab\"\n\n[[variants]]\nid = \"agent\"\nagent = \"script\"\nscript = \"agents/agent\"\n\n[[services]]\nname = \"api\"\ncommand = [\"sh\", \"-c\", \"exit 1\"]\nready = { http = \"http://127.0.0.1:7999/health\", timeout_seconds = 1 }\n\n[[tasks]]\nid = \"t\"\nprompt = \"Do the thing.\"\n\n[tasks.success]\nall = [{ answer_matches = \"yes\" }]\n",
    );
    lab.write("agents/agent/t.toml", "answer = \"yes\"\n");
    let bin = assert_cmd::cargo::cargo_bin("proctor");
    let script = format!(
        "NO_COLOR=1 SHELL=/bin/sh {} sit {} --task t --as bo --store {}; echo \"[exit $?]\"; sleep 3600",
        bin.display(),
        lab.suite().display(),
        lab.store().display()
    );
    let tmux = Tmux::start("errored", &script);
    let (code, screen) = tmux.exit_status();
    assert_eq!(code, 3, "{screen}");
    assert!(!screen.contains("Your answer to the task"), "{screen}");
    let (_, record) = sitting(&lab, "t", "bo");
    assert_eq!(record["outcome"], "errored", "{record:#}");
    assert!(
        record["reason"]
            .as_str()
            .unwrap()
            .starts_with("service-guard"),
        "{}",
        record["reason"]
    );
    assert_eq!(record["end_state"]["answer"], "");
}

/// The pid of the `proctor sit` process whose arguments hold `marker`.
fn proctor_sit_pid(marker: &str) -> Option<i32> {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(Result::ok)
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            let args: Vec<String> = cmd
                .split(|&b| b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            (args.get(1).map(String::as_str) == Some("sit")
                && args.iter().any(|a| a.contains(marker)))
            .then_some(pid)
        })
        .next()
}

#[test]
fn sigterm_during_the_shell_stops_the_trial_restores_the_terminal_and_records_nothing() {
    let lab = Lab::new("sit-sigterm");
    let tmux = Tmux::start("sigterm", &sit_script(&lab, "--task draft --as max"));
    tmux.wait_for("Leave the shell");
    tmux.line("sleep 4646 &");
    wait_for_sleep(&tmux, "4646", true);
    let store = lab.store().display().to_string();
    let pid = proctor_sit_pid(&store).expect("the proctor sit process");
    // SAFETY: kill(2) on a pid just read from /proc.
    assert_eq!(unsafe { libc_kill(pid, 15) }, 0);
    let (code, screen) = tmux.exit_status();
    assert_eq!(code, 3, "{screen}");
    assert!(screen.contains("the sitting is not recorded"), "{screen}");
    assert!(screen.contains("TERMINAL-RESTORED"), "{screen}");
    assert!(!sleeping("4646"), "a process of the sitting outlived it");
    let out = lab.proctor(As::Me, &["list", "--store", &store]);
    assert!(out.stdout.contains("interrupted"), "{}", out.stdout);
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}
