//! Starts `chat-mock` on a free port with the bundled chat-ax fixtures and drives `chat` through
//! a read, a send, a failed then successful edit, a draft, and waiting for a reply, checking the
//! state the mock writes.

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

struct Mock {
    child: Child,
    api: String,
    dir: PathBuf,
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/chat-ax/services/fixtures.json")
}

fn start(name: &str) -> Mock {
    let dir = std::env::temp_dir().join(format!("chat-e2e-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_chat-mock"))
        .args(["--fixtures"])
        .arg(fixtures())
        .args(["--listen", "127.0.0.1:0"])
        .env("PROCTOR_SERVICE_DIR", &dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start chat-mock");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let api = line
        .trim()
        .strip_prefix("chat-mock listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
        .to_string();
    Mock { child, api, dir }
}

impl Mock {
    fn chat(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_chat"))
            .args(args)
            .env("CHAT_API", &self.api)
            .env_remove("CHAT_ACTOR")
            .output()
            .expect("run chat")
    }

    fn ok(&self, args: &[&str]) -> String {
        let o = self.chat(args);
        assert!(
            o.status.success(),
            "chat {args:?} failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    }

    fn state(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.dir.join("state.json")).unwrap())
            .unwrap()
    }

    fn events(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.join("events.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

#[test]
fn read_send_failed_then_successful_edit() {
    let m = start("edit");
    assert_eq!(m.state()["version"], 0, "state.json is written at start");

    // A read.
    let out = m.ok(&["read", "launch"]);
    assert!(out.contains("#5  Nov 26 09:15  dana: Final call"), "{out}");
    let review = out
        .lines()
        .find(|l| l.contains("Launch review"))
        .expect("review line")
        .to_string();
    assert!(review.starts_with("#7  "), "{review}");
    assert!(review.contains("sam (you)"), "{review}");

    // A send.
    let out = m.ok(&[
        "send",
        "--to",
        "#launch",
        "--text",
        "Staging freeze starts Thursday 18:00.",
    ]);
    assert_eq!(out, "Sent to #launch as #9 (m-00016).\n");

    // The obvious first try: the position `chat read` printed. It fails, says why, changes nothing.
    let o = m.chat(&[
        "edit",
        "7",
        "--text",
        "Launch review is Friday Dec 5 at 15:00 in Room B.",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("chat edit: '7' is a position, not a message id"),
        "{err}"
    );
    assert!(err.contains("chat read <conversation> --ids"), "{err}");
    // Someone else's message is refused by the API.
    let o = m.chat(&["edit", "m-00015", "--text", "x"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("written by dana"));
    assert!(m.state()["edits"].as_array().unwrap().is_empty());

    // Recovery: the ids, then the edit.
    let out = m.ok(&["read", "launch", "--ids"]);
    let id = out
        .lines()
        .find(|l| l.contains("Launch review"))
        .and_then(|l| l.split_whitespace().nth(1))
        .expect("id column")
        .to_string();
    assert_eq!(id, "m-00014");
    let out = m.ok(&[
        "edit",
        &id,
        "--text",
        "Launch review is Friday Dec 5 at 15:00 in Room B.",
    ]);
    assert!(out.starts_with("Edited m-00014 in #launch:"), "{out}");

    let st = m.state();
    assert_eq!(st["messages"][13]["id"], "m-00014");
    assert_eq!(
        st["messages"][13]["text"],
        "Launch review is Friday Dec 5 at 15:00 in Room B."
    );
    assert_eq!(st["messages"][13]["edited"], true);
    assert_eq!(
        st["edits"][0]["before"],
        "Launch review is Thursday Dec 4 at 15:00 in Room B. Bring your checklist items."
    );
    assert_eq!(st["sent"][0]["to"], "#launch");
    assert_eq!(st["sent"].as_array().unwrap().len(), 1);
    assert_eq!(st["reads"]["#launch"], 2);
    let ops: Vec<String> = m
        .events()
        .iter()
        .map(|e| {
            format!(
                "{}:{}",
                e["actor"].as_str().unwrap(),
                e["op"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(ops, ["agent:send", "agent:edit"]);
    assert!(m
        .ok(&["read", "launch", "--since", "6"])
        .contains("Friday Dec 5 at 15:00 in Room B. (edited)"));
}

#[test]
fn draft_is_not_sent_and_a_reply_arrives_on_the_second_read() {
    let m = start("wait");
    m.ok(&[
        "draft",
        "--to",
        "@mei",
        "--text",
        "Yes, I can cover Friday.",
    ]);
    let st = m.state();
    assert_eq!(st["drafts"][0]["to"], "@mei");
    assert!(st["sent"].as_array().unwrap().is_empty());

    m.ok(&[
        "send",
        "--to",
        "priya",
        "--text",
        "Did the migration finish?",
    ]);
    let first = m.ok(&["read", "@priya"]);
    assert!(!first.contains("02:40"), "{first}");
    assert_eq!(m.state()["pending_replies"]["priya"], 1);
    let second = m.ok(&["read", "@priya", "--since", "2"]);
    assert!(
        second.contains("priya: Yes, it finished at 02:40"),
        "{second}"
    );
    let st = m.state();
    assert_eq!(st["replies"][0]["from"], "priya");
    assert_eq!(st["sent"][0]["to"], "@priya");
    let last = m.events().pop().unwrap();
    assert_eq!(
        (last["actor"].as_str(), last["op"].as_str()),
        (Some("user"), Some("reply"))
    );
}

#[test]
fn waiting_polls_until_the_reply() {
    let m = start("poll");
    m.ok(&[
        "send",
        "--to",
        "@priya",
        "--text",
        "Did the migration finish?",
    ]);
    let out = m.ok(&["read", "@priya", "--wait", "10"]);
    assert!(out.contains("Yes, it finished at 02:40"), "{out}");
    assert!(!out.contains("Kicking off"), "only new messages: {out}");
}

#[test]
fn guard_and_unreachable() {
    let m = start("guard");
    let o = Command::new(env!("CARGO_BIN_EXE_chat"))
        .args(["channels"])
        .env("CHAT_API", "http://127.0.0.1:9")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot reach the chat API"));
    // Usage errors never reach the API.
    assert_eq!(m.chat(&["send", "--to", "launch"]).status.code(), Some(2));
    assert_eq!(m.state()["version"], 0);
    assert!(m.ok(&["help"]).contains("--ids"));
}
