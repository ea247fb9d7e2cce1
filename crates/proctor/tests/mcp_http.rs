//! MCP's streamable HTTP transport: an MCP server that is a suite service (`[[mcp_servers]]
//! url` + `service`). The service runs in a network of its own; the agent's MCP client reaches
//! it only through proctor's stdio shim and the call runner's bridge, which joins that network
//! per session, so every message is logged and `allow_tools` holds; an agent process that
//! connects to the service's port directly reaches nothing. The server answers tool calls as
//! an event stream and requires the session id it gave. Through the real binary, as root and
//! as uid 65534.

mod common;

use std::path::Path;

use common::lab::{real_isolation, users, Lab};
use serde_json::{json, Value};

/// The notes server of the worked example over streamable HTTP on port 8765 of its own
/// loopback (`examples/mcp-notes/servers/notes_http.py`): `initialize` gives a session id every
/// later request must carry; `tools/call` is answered as a `text/event-stream`, the rest as
/// JSON; notifications get 202. Each request's method and session are appended to
/// `$PROCTOR_SERVICE_DIR/sessions.txt`.
fn http_server() -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/mcp-notes/servers/notes_http.py");
    std::fs::read_to_string(p).unwrap()
}

/// The notes server over MCP's older HTTP+SSE transport on port 8765: `GET /sse` opens the
/// session's event stream, whose first event names `/messages?session_id=N`; each message
/// posted there is answered 202, its answer sent as a `message` event on the stream.
const SSE_SERVER: &str = r#"
import json, os, queue, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import notes

STREAMS, LOCK = {}, threading.Lock()

class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/health":
            self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers()
            return self.wfile.write(b"ok")
        if self.path != "/sse":
            self.send_response(404); self.end_headers(); return
        with LOCK:
            sid = str(len(STREAMS) + 1)
            STREAMS[sid] = queue.Queue()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(("event: endpoint\ndata: /messages?session_id=%s\n\n" % sid).encode())
        self.wfile.flush()
        try:
            while True:
                reply = STREAMS[sid].get()
                self.wfile.write(("event: message\ndata: %s\n\n" % json.dumps(reply)).encode())
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_POST(self):
        sid = self.path.partition("session_id=")[2]
        msg = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if sid not in STREAMS:
            self.send_response(404); self.send_header("Content-Length", "0"); self.end_headers(); return
        self.send_response(202); self.send_header("Content-Length", "0"); self.end_headers()
        if "id" not in msg:
            return
        reply = {"jsonrpc": "2.0", "id": msg["id"]}
        try:
            reply["result"] = notes.answer(msg)
        except LookupError as e:
            reply["error"] = {"code": -32602, "message": str(e)}
        except NotImplementedError as e:
            reply["error"] = {"code": -32601, "message": "Method not found: %s" % e}
        STREAMS[sid].put(reply)

ThreadingHTTPServer(("127.0.0.1", 8765), Handler).serve_forever()
"#;

/// A suite over the HTTP notes server: the careful agent lists, adds a note and tries the tool
/// outside `allow_tools`; the bypasser connects to the service's port itself and tries to wipe
/// the notes there.
fn lab(name: &str) -> Lab {
    lab_over(name, &http_server(), "url = \"http://127.0.0.1:8765/mcp\"")
}

/// [`lab`] with `server` as the service's program and `url` (and its transport) as the MCP
/// server's lines.
fn lab_over(name: &str, server: &str, url: &str) -> Lab {
    let lab = Lab::new(name);
    let notes =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/mcp-notes/servers/notes.py");
    lab.write("servers/notes.py", &std::fs::read_to_string(notes).unwrap());
    lab.write("servers/notes_http.py", server);
    lab.write(
        "suite.toml",
        &r#"schema_version = 1
id = "lab"

[defaults]
wall_timeout_seconds = 60

[[services]]
name = "notes-api"
command = ["python3", "servers/notes_http.py"]
ready = { http = "http://127.0.0.1:8765/health", timeout_seconds = 20 }
state = "state.json"

[[mcp_servers]]
name = "notes"
url = "http://127.0.0.1:8765/mcp"
service = "notes-api"
allow_tools = ["add_note", "list_notes", "delete_note"]

[[variants]]
id = "careful"
agent = "script"
script = "agents/careful"

[[variants]]
id = "bypass"
agent = "script"
script = "agents/bypass"

[[tasks]]
id = "t"
prompt = "Add a note titled Milk."

[tasks.interface]
mcp = "notes"

[tasks.success]
all = [
  { mcp_calls = { server = "notes", tool = "add_note", error = false, min = 1 } },
  { state = { service = "notes-api", pointer = "/notes/0/title", equals = "Milk" } },
]
"#
        .replace("url = \"http://127.0.0.1:8765/mcp\"", url),
    );
    lab.write(
        "agents/careful/t.toml",
        "answer = \"done\"\n\n[[steps]]\nmcp = { server = \"notes\", tool = \"list_notes\" }\n\n[[steps]]\nmcp = { server = \"notes\", tool = \"add_note\", arguments = { title = \"Milk\" } }\n\n[[steps]]\nmcp = { server = \"notes\", tool = \"wipe_notes\" }\n",
    );
    lab.write(
        "fixture/direct.py",
        "import json, urllib.request\ntry:\n    req = urllib.request.Request('http://127.0.0.1:8765/mcp', data=json.dumps({'jsonrpc': '2.0', 'id': 1, 'method': 'tools/call', 'params': {'name': 'add_note', 'arguments': {'title': 'Milk'}}}).encode(), headers={'Content-Type': 'application/json', 'Mcp-Session-Id': 's1'})\n    print('reached', urllib.request.urlopen(req, timeout=5).read())\nexcept Exception as e:\n    print('unreachable', type(e).__name__, e)\n",
    );
    lab.write(
        "agents/bypass/t.toml",
        "answer = \"done\"\n\n[[steps]]\nrun = \"python3 direct.py > bypass.txt 2>&1\"\n",
    );
    lab
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn an_http_mcp_server_is_reached_only_through_proctor_and_every_call_is_logged() {
    for who in users() {
        let lab = lab(&format!("mcp-http-{who:?}"));
        let out = lab.run(who, &["--trials", "1"]);
        let record = lab.record("t.careful.0");
        if !real_isolation(&record, false) {
            return;
        }
        assert!(out.code <= 1, "{who:?}: {}", out.stderr);
        assert_eq!(record["outcome"], "completed", "{who:?}: {record:#}");

        let log: Vec<Value> = lines(&lab.trial_dir("t.careful.0").join("mcp.jsonl"))
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let methods: Vec<&str> = log.iter().map(|r| r["method"].as_str().unwrap()).collect();
        assert_eq!(methods[0], "initialize", "{who:?}: {log:#?}");
        let add = log
            .iter()
            .find(|r| r["tool"] == "add_note")
            .expect("the tool call is logged");
        assert_eq!(
            add["content"][0]["text"], "added note #1",
            "{who:?}: {add:#}"
        );
        assert_eq!(add["arguments"], json!({"title": "Milk"}));
        let wipe = log.iter().find(|r| r["tool"] == "wipe_notes").unwrap();
        assert!(wipe["denied"].is_string(), "{who:?}: {wipe:#}");

        let service = lab.trial_dir("t.careful.0").join("services/notes-api");
        let received: Vec<String> = lines(&service.join("received.jsonl"));
        assert_eq!(
            received.len(),
            2,
            "{who:?}: list and add reached it, the wipe did not: {received:?}"
        );
        let sessions = lines(&service.join("sessions.txt"));
        assert_eq!(
            sessions.first().map(String::as_str),
            Some("initialize None"),
            "{sessions:?}"
        );
        for line in ["tools/call s1", "tools/call s2", "DELETE s1"] {
            assert!(
                sessions.iter().any(|s| s == line),
                "{who:?}: the bridge carries each session's id, and ends it: {sessions:?}"
            );
        }
        assert_eq!(record["verdict"]["metrics"]["denied"], 1, "{who:?}");

        let bypass = lab.record("t.bypass.0");
        assert_eq!(bypass["outcome"], "wrong", "{who:?}: {bypass:#}");
        let said = std::fs::read_to_string(lab.trial_dir("t.bypass.0").join("changes/bypass.txt"))
            .or_else(|_| {
                std::fs::read_to_string(
                    lab.trial_dir("t.bypass.0").join("changes/files/bypass.txt"),
                )
            })
            .unwrap_or_default();
        assert!(
            said.starts_with("unreachable"),
            "{who:?}: the agent reached the service itself: {said:?}"
        );
        assert!(
            lines(
                &lab.trial_dir("t.bypass.0")
                    .join("services/notes-api/received.jsonl")
            )
            .is_empty(),
            "{who:?}: nothing reached the server but through proctor"
        );
    }
}

#[test]
fn validate_refuses_a_url_without_its_service_or_off_loopback() {
    let lab = lab("mcp-http-validate");
    let suite = std::fs::read_to_string(lab.suite().join("suite.toml")).unwrap();
    let cases = [
        (
            "service = \"notes-api\"\n",
            "",
            "has a `url` but no `service`",
        ),
        (
            "service = \"notes-api\"\n",
            "service = \"nope\"\n",
            "`service = \"nope\"` names none of the suite's [[services]]",
        ),
        (
            "url = \"http://127.0.0.1:8765/mcp\"",
            "url = \"http://10.0.0.2:8765/mcp\"",
            "is not a URL on the service's loopback",
        ),
        (
            "allow_tools = [",
            "state = \"state.json\"\nallow_tools = [",
            "`state` beside `url`",
        ),
        (
            "service = \"notes-api\"\n",
            "service = \"notes-api\"\ntransport = \"websocket\"\n",
            "`transport = \"websocket\"` is no MCP transport proctor relays",
        ),
    ];
    for (from, to, expected) in cases {
        lab.write("suite.toml", &suite.replacen(from, to, 1));
        lab.assert_validate_refuses(expected, from);
    }
    lab.write("suite.toml", &suite);
    let out = lab.proctor(
        common::lab::As::Me,
        &["validate", lab.suite().to_str().unwrap()],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
}

#[test]
fn a_server_of_the_older_http_sse_transport_is_bridged_and_logged_alike() {
    for who in users() {
        let lab = lab_over(
            &format!("mcp-sse-{who:?}"),
            SSE_SERVER,
            "url = \"http://127.0.0.1:8765/sse\"\ntransport = \"sse\"",
        );
        let out = lab.run(who, &["--trials", "1", "--variant", "careful"]);
        let record = lab.record("t.careful.0");
        if !real_isolation(&record, false) {
            return;
        }
        assert!(out.code <= 1, "{who:?}: {}", out.stderr);
        assert_eq!(record["outcome"], "completed", "{who:?}: {record:#}");
        let log: Vec<Value> = lines(&lab.trial_dir("t.careful.0").join("mcp.jsonl"))
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let add = log
            .iter()
            .find(|r| r["tool"] == "add_note")
            .expect("the tool call is logged");
        assert_eq!(
            add["content"][0]["text"], "added note #1",
            "{who:?}: {add:#}"
        );
        assert!(log
            .iter()
            .any(|r| r["tool"] == "wipe_notes" && r["denied"].is_string()));
        let received = lines(
            &lab.trial_dir("t.careful.0")
                .join("services/notes-api/received.jsonl"),
        );
        assert_eq!(received.len(), 2, "{who:?}: {received:?}");
    }
}
