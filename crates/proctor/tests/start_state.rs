//! Start state built by `setup` commands, through the real binary with Debian's `sqlite3`:
//! setup runs in the trial's sandbox before the agent, its changes are the start state (never
//! the agent's changes), its calls of allowed commands are not the agent's calls, a failing
//! command makes the trial `errored (setup)` saying which, and `validate --oracle` runs it too.
//! Each rule meets the scripted agent that tries to get around it. Also: a git binary patch of
//! the database as a hidden mutation.

mod common;

use common::lab::{As, Lab};
use serde_json::Value;

/// Runs sqlite3 on a database in the suite.
fn sqlite(lab: &Lab, db: &str, sql: &str) {
    let ok = std::process::Command::new("sqlite3")
        .arg(lab.suite().join(db))
        .arg(sql)
        .status()
        .unwrap()
        .success();
    assert!(ok, "sqlite3 {sql}");
}

/// The setup every test here starts from: seed the database from a file, make a file, delete
/// one, and read the database (an allowed command's call that must not be the agent's).
const SETUP: &str = r#"setup = ["sqlite3 shop.db < seed.sql", "echo by-setup > made.txt", "rm old.txt", "sqlite3 shop.db 'SELECT count(*) FROM orders'"]"#;

/// A one-task sqlite3 lab: `fixture/` holds shop.db (one order, a pen), seed.sql (a second
/// order, a lamp) and old.txt; the task has `setup` and the interface `sqlite3`.
fn shop_lab(name: &str, setup: &str, success: &str, steps: &[&str]) -> Lab {
    let lab = Lab::new(name);
    sqlite(
        &lab,
        "fixture/shop.db",
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT); INSERT INTO orders (item) VALUES ('pen');",
    );
    lab.write(
        "fixture/seed.sql",
        "INSERT INTO orders (item) VALUES ('lamp');\n",
    );
    lab.write("fixture/old.txt", "old\n");
    lab.one_task(
        &format!("{setup}\nallow = [\"sqlite3\"]\n[tasks.interface]\ncommand = \"sqlite3\""),
        success,
        steps,
        false,
    );
    lab
}

fn changes(record: &Value) -> Vec<(String, String)> {
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

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn setup_s_work_is_the_start_state_and_never_the_agent_s() {
    if !common::have_sqlite3() {
        return;
    }
    // The agent that claims setup's work: it only looks, then says it is done. Every rule
    // that asks for a change must fail it; the start state setup built must be what it sees.
    let lab = shop_lab(
        "setup-claims",
        SETUP,
        "{ files_unchanged = true }, { calls = { max = 1 } }, { file_contains = { path = \"made.txt\", pattern = \"by-setup\" } }, { check = \"test ! -e old.txt && test \\\"$(sqlite3 shop.db 'SELECT group_concat(item) FROM orders')\\\" = pen,lamp\" }",
        &["sqlite3 shop.db 'SELECT item FROM orders' > /dev/null"],
    );
    let Some(record) = lab.run_graded(As::Me, false, &[]) else {
        return;
    };
    assert_eq!(record["outcome"], "completed", "{}", record["reason"]);
    assert_eq!(changes(&record), pairs(&[]), "{record:#}");
    // Setup's own sqlite3 calls went round the shims: the agent made one call.
    assert_eq!(record["verdict"]["metrics"]["calls"], 1, "{record:#}");
    let setup = &record["setup"];
    assert_eq!(setup["commands"].as_array().unwrap().len(), 4);
    assert_eq!(setup["exit"], 0);
    assert!(setup.get("failed").is_none(), "{setup:#}");
    assert_eq!(setup["stdout_head"], "2\n");
    let setup_changes: Vec<(String, String)> = setup["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap().to_string(),
                c["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        setup_changes,
        pairs(&[
            ("made.txt", "added"),
            ("old.txt", "deleted"),
            ("shop.db", "changed")
        ])
    );
    let kept = lab.trial_dir("t.agent.0").join("setup");
    assert_eq!(
        std::fs::read_to_string(kept.join("changes/files/made.txt")).unwrap(),
        "by-setup\n"
    );
    assert_eq!(std::fs::read_to_string(kept.join("stdout")).unwrap(), "2\n");
    assert!(record["settings"]["setup"].is_array(), "{record:#}");
    // `show` lists the setup apart from the agent's changes.
    let store = lab.store();
    let show = lab.proctor(
        As::Me,
        &[
            "show",
            "--store",
            store.to_str().unwrap(),
            "latest",
            "t.agent.0",
        ],
    );
    assert!(
        show.stdout.contains(
            "\nsetup (4 command(s), exit 0, "
        ) && show.stdout.contains(
            "  1. sqlite3 shop.db < seed.sql\n  2. echo by-setup > made.txt\n  3. rm old.txt\n  4. sqlite3 shop.db 'SELECT count(*) FROM orders'\n  stdout (2 bytes):\n    2\n  start state changed by setup (3, not the agent's):\n    added         made.txt\n    deleted       old.txt\n    changed       shop.db\n\nchanges (0)\n"
        ),
        "{}",
        show.stdout
    );
    // A rescore grades against the same start state, rebuilt from what setup left: the check
    // that needs setup's row and deletion still holds.
    let store = lab.store();
    let out = lab.proctor(
        As::Me,
        &["rescore", "latest", "--store", store.to_str().unwrap()],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("no outcome changed"), "{}", out.stderr);

    // The same agent under rules that ask for the changes setup made: each fails.
    for rule in [
        "{ file_changed = \"shop.db\" }",
        "{ file_added = \"made.txt\" }",
        "{ file_deleted = \"old.txt\" }",
        "{ calls = { min = 2 } }",
    ] {
        let lab = shop_lab(
            "setup-claims-rule",
            SETUP,
            rule,
            &["sqlite3 shop.db 'SELECT item FROM orders' > /dev/null"],
        );
        let Some(record) = lab.run_graded(As::Me, false, &[]) else {
            return;
        };
        assert_ne!(record["outcome"], "completed", "{rule}: {record:#}");
    }
}

#[test]
fn the_agent_cannot_hide_its_changes_inside_setup_s() {
    if !common::have_sqlite3() {
        return;
    }
    // The agent that hides: it changes only what setup made, deleted or changed, hoping its
    // changes read as setup's.
    for copy in [false, true] {
        let lab = shop_lab(
            "setup-hides",
            SETUP,
            "{ files_unchanged = true }",
            &[
                "echo mine >> made.txt",
                "echo back > old.txt",
                "sqlite3 shop.db \"DELETE FROM orders WHERE item = 'lamp'\"",
            ],
        );
        let Some(record) = lab.run_graded(As::Me, copy, &[]) else {
            return;
        };
        assert_eq!(record["outcome"], "wrong", "copy {copy}: {record:#}");
        assert_eq!(
            changes(&record),
            pairs(&[
                ("made.txt", "changed"),
                ("old.txt", "added"),
                ("shop.db", "changed")
            ]),
            "copy {copy}"
        );
        // Its own content is what was kept, over setup's.
        assert_eq!(
            std::fs::read_to_string(lab.trial_dir("t.agent.0").join("changes/files/made.txt"))
                .unwrap(),
            "by-setup\nmine\n"
        );
    }
}

#[test]
fn a_failing_setup_errors_the_trial_naming_the_command_its_exit_and_its_output() {
    if !common::have_sqlite3() {
        return;
    }
    let lab = shop_lab(
        "setup-fails",
        r#"setup = ["echo first", "sqlite3 shop.db < missing.sql", "touch never.txt"]"#,
        "{ files_unchanged = true }",
        &["touch agent-ran.txt"],
    );
    let out = lab.run(As::Me, &["--trials", "1"]);
    let record = lab.record("t.agent.0");
    assert_eq!(record["outcome"], "errored", "{record:#}");
    let reason = record["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("setup: setup command 2 of 3 (`sqlite3 shop.db < missing.sql`) exited 2; its output begins: "),
        "{reason}"
    );
    assert!(reason.contains("missing.sql"), "{reason}");
    assert!(
        reason.ends_with("(all of it in setup/stdout and setup/stderr)"),
        "{reason}"
    );
    assert_eq!(record["end_state"]["agent"]["started"], false);
    assert_eq!(record["end_state"]["agent"]["not_started_kind"], "setup");
    assert_eq!(record["setup"]["failed"], 2);
    assert_eq!(record["setup"]["exit"], 2);
    assert_eq!(record["setup"]["stdout_head"], "first\n");
    assert_ne!(out.code, 0, "{}", out.stderr);
    // `show` says so.
    let store = lab.store();
    let show = lab.proctor(
        As::Me,
        &[
            "show",
            "--store",
            store.to_str().unwrap(),
            "latest",
            "t.agent.0",
        ],
    );
    assert!(
        show.stdout.contains("setup command 2 of 3")
            && show
                .stdout
                .contains("  2. sqlite3 shop.db < missing.sql  <- failed\n"),
        "{}{}",
        show.stdout,
        show.stderr
    );
}

#[test]
fn validate_oracle_runs_setup_and_a_task_can_turn_the_defaults_off() {
    if !common::have_sqlite3() {
        return;
    }
    let lab = Lab::new("setup-oracle");
    sqlite(
        &lab,
        "fixture/shop.db",
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT);",
    );
    lab.write(
        "suite.toml",
        r#"schema_version = 1
id = "shop"

[defaults]
wall_timeout_seconds = 30
allow = ["sqlite3"]
setup = ["sqlite3 shop.db \"INSERT INTO orders (item) VALUES ('lamp')\""]

[[variants]]
id = "oracle"
agent = "script"
script = "agents/oracle"

[[tasks]]
id = "cancel"
prompt = "Cancel the lamp order."

[tasks.success]
all = [{ check = "test \"$(sqlite3 shop.db 'SELECT count(*) FROM orders')\" = 0" }, { file_changed = "shop.db" }]

[[tasks]]
id = "first"
prompt = "Add the first order: a pen."
setup = []

[tasks.success]
all = [{ check = "test \"$(sqlite3 shop.db 'SELECT group_concat(item) FROM orders')\" = pen" }]
"#,
    );
    // The oracle of `cancel` deletes the order setup made: it can only pass if setup ran.
    lab.write(
        "agents/oracle/cancel.toml",
        "answer = \"done\"\n\n[[steps]]\nrun = \"\"\"sqlite3 shop.db \"DELETE FROM orders WHERE item = 'lamp'\" \"\"\"\n",
    );
    // The oracle of `first` adds one order: with the defaults' setup there would be two.
    lab.write(
        "agents/oracle/first.toml",
        "answer = \"done\"\n\n[[steps]]\nrun = \"\"\"sqlite3 shop.db \"INSERT INTO orders (item) VALUES ('pen')\" \"\"\"\n",
    );
    let suite = lab.suite();
    let out = lab.proctor(As::Me, &["validate", suite.to_str().unwrap(), "--oracle"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(
        all.contains("cancel  -         completed  abandoned   ok")
            && all.contains("first   -         completed  abandoned   ok")
            && all.contains("every task's rules pass its oracle and fail the null agent"),
        "{all}"
    );
}

#[test]
fn a_git_binary_patch_of_the_database_is_a_hidden_mutation() {
    if !common::have_sqlite3() {
        return;
    }
    let lab = shop_lab(
        "setup-binary-mutation",
        "",
        "{ check = \"test \\\"$(sqlite3 shop.db 'SELECT group_concat(item) FROM orders')\\\" = pen,desk\" }",
        &["true"],
    );
    // The mutation: the real `git diff --binary` of the fixture's database with a desk added.
    let repo = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(["-c", "user.email=t@t", "-c", "user.name=t"])
            .args(args)
            .current_dir(repo.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    git(&["init", "-q"]);
    std::fs::copy(
        lab.suite().join("fixture/shop.db"),
        repo.path().join("shop.db"),
    )
    .unwrap();
    git(&["add", "shop.db"]);
    git(&["commit", "-qm", "fixture"]);
    let ok = std::process::Command::new("sqlite3")
        .arg(repo.path().join("shop.db"))
        .arg("INSERT INTO orders (item) VALUES ('desk');")
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let patch = git(&["diff", "--binary"]);
    assert!(String::from_utf8_lossy(&patch).contains("GIT binary patch"));
    lab.write(
        "mutations/t/desk.patch",
        std::str::from_utf8(&patch).unwrap(),
    );
    let suite = lab.suite();
    let out = lab.proctor(As::Me, &["validate", suite.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let Some(record) = lab.run_graded(As::Me, false, &[]) else {
        return;
    };
    assert_eq!(record["outcome"], "completed", "{}", record["reason"]);
    assert_eq!(
        record["plan"]["mutation"]["name"], "desk.patch",
        "{:#}",
        record["plan"]
    );
}

/// A counter service on 127.0.0.1:7072: `GET /send` counts a send (kept in
/// `$PROCTOR_SERVICE_DIR/state.json`, read back when it starts again) and logs an agent event.
const COUNTER_SERVICE: &str = r#"import http.server, json, os, time
d = os.environ["PROCTOR_SERVICE_DIR"]
state = os.path.join(d, "state.json")
sent = json.load(open(state))["sent"] if os.path.exists(state) else 0
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        global sent
        if self.path == "/send":
            sent += 1
            json.dump({"sent": sent}, open(state, "w"))
            with open(os.path.join(d, "events.jsonl"), "a") as f:
                f.write(json.dumps({"at": time.time(), "actor": "agent", "op": "send", "id": "e%d" % sent}) + "\n")
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", 7072), H).serve_forever()
"#;

#[test]
fn setup_reaches_the_services_and_its_events_are_not_the_agent_s() {
    let lab = Lab::new("setup-service");
    lab.write("fixture/README.md", "x\n");
    lab.write("services/counter.py", COUNTER_SERVICE);
    let send = "python3 -c 'import urllib.request; urllib.request.urlopen(\\\"http://127.0.0.1:7072/send\\\").read()'";
    lab.write(
        "suite.toml",
        &format!(
            "schema_version = 1\nid = \"lab\"\n\n[defaults]\nwall_timeout_seconds = 60\n\n[[services]]\nname = \"svc\"\ncommand = [\"python3\", \"services/counter.py\"]\nready = {{ http = \"http://127.0.0.1:7072/\", timeout_seconds = 30 }}\nstate = \"state.json\"\n\n[[variants]]\nid = \"agent\"\nagent = \"script\"\nscript = \"agents/agent\"\n\n[[tasks]]\nid = \"t\"\nprompt = \"Send one more.\"\nsetup = [\"{send}\"]\n\n[tasks.success]\nall = [{{ state = {{ service = \"svc\", pointer = \"/sent\", equals = 2 }} }}]\n"
        ),
    );
    lab.write(
        "agents/agent/t.toml",
        "answer = \"done\"\n\n[[steps]]\nrun = '''python3 -c 'import urllib.request; urllib.request.urlopen(\"http://127.0.0.1:7072/send\").read()' '''\n",
    );
    let Some(record) = lab.run_graded(As::Me, false, &[]) else {
        return;
    };
    // The state setup made through the service is the start state: the agent's send is the
    // second; the event setup's send logged is not among the agent's.
    assert_eq!(record["outcome"], "completed", "{}", record["reason"]);
    let events = record["end_state"]["services"]["svc"]["events"]
        .as_array()
        .unwrap();
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0]["id"], "e2");
    let aside = std::fs::read_to_string(
        lab.trial_dir("t.agent.0")
            .join("setup/services/svc.events.jsonl"),
    )
    .unwrap();
    assert_eq!(aside.lines().count(), 1, "{aside}");
    assert!(aside.contains("\"e1\""), "{aside}");
}
