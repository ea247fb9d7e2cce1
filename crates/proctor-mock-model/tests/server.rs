//! The mock model over real HTTP: recorded requests of each agent CLI (from `tests/requests/`,
//! written by proctor-agents' end-to-end tests with `PROCTOR_RECORD=1`) are replayed and their
//! responses parsed back, event by event; and the server's side behaviours are checked.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;

use proctor_mock_model::{sse, MockHandle, MockModel, MockOptions, Script, Usage};
use serde_json::{json, Value};

const HELLO: &str = r#"
[[turns]]
calls = [{ role = "shell", command = "echo hi > hello.txt" }]
usage = { input = 120, output = 30, cache_read = 1000, cache_write = 50 }

[[turns]]
text = "done"
usage = { input = 200, output = 5, cache_read = 1100 }
"#;

const HELLO_AIDER: &str = r#"
main_requests = "all"

[[turns]]
text = "done"
calls = [{ role = "shell", command = "echo hi > hello.txt" }]
usage = { input = 120, output = 30, cache_read = 1000 }
"#;

struct Reply {
    status: u16,
    content_type: String,
    body: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
    fn events(&self) -> Vec<sse::SseEvent> {
        assert!(
            self.content_type.starts_with("text/event-stream"),
            "{}",
            self.content_type
        );
        sse::parse(&self.body)
    }
}

fn parse_reply(raw: &[u8]) -> Reply {
    parse_reply_to(raw, false)
}

fn parse_reply_to(raw: &[u8], head_only: bool) -> Reply {
    let text = String::from_utf8_lossy(raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("a complete response");
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let content_type = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Type: "))
        .unwrap_or_default()
        .to_string();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        body.len(),
        if head_only { 0 } else { len },
        "Content-Length"
    );
    Reply {
        status,
        content_type,
        body: body.to_string(),
    }
}

fn request(server: &MockHandle, method: &str, target: &str, body: &str) -> Reply {
    let mut s = TcpStream::connect(server.addr()).unwrap();
    write!(
        s,
        "{method} {target} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nx-api-key: sekrit\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        server.addr(),
        body.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    parse_reply_to(&raw, method == "HEAD")
}

fn post(server: &MockHandle, target: &str, body: &Value) -> Reply {
    request(server, "POST", target, &body.to_string())
}

struct Recorded {
    path: String,
    query: String,
    kind: String,
    turn: Option<u64>,
    request: Value,
}

fn recorded(name: &str) -> Vec<Recorded> {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/requests")
        .join(format!("{name}.jsonl"));
    std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            Recorded {
                path: v["path"].as_str().unwrap().into(),
                query: v["query"].as_str().unwrap_or_default().into(),
                kind: v["kind"].as_str().unwrap().into(),
                turn: v["turn"].as_u64(),
                request: v["request"].clone(),
            }
        })
        .collect()
}

/// Replays a recorded session; returns each reply with what was recorded about its request.
fn replay(name: &str, script: &str) -> (Vec<(Recorded, Reply)>, MockHandle) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.jsonl");
    let server = MockModel::start_with(
        Script::parse(script).unwrap(),
        "127.0.0.1:0",
        MockOptions {
            log: Some(log.clone()),
            ..MockOptions::default()
        },
    )
    .unwrap();
    let mut out = Vec::new();
    for r in recorded(name) {
        let target = if r.query.is_empty() {
            r.path.clone()
        } else {
            format!("{}?{}", r.path, r.query)
        };
        let reply = post(&server, &target, &r.request);
        assert_eq!(reply.status, 200, "{name} {target}: {}", reply.body);
        out.push((r, reply));
    }
    // The log has one line per exchange, the recorded kind and turn, and no secret.
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), out.len());
    for (line, (r, _)) in lines.iter().zip(&out) {
        assert_eq!(line["kind"], r.kind.as_str(), "{name}");
        assert_eq!(line["turn"].as_u64(), r.turn, "{name}");
        assert_eq!(line["headers"]["x-api-key"], "[redacted]");
    }
    assert!(!text.contains("sekrit"));
    (out, server)
}

fn names(events: &[sse::SseEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| e.event.clone().unwrap_or_default())
        .collect()
}

/// Checks an Anthropic Messages stream and returns its blocks (type, name or text, input).
fn anthropic_stream(reply: &Reply, usage: Usage) -> Vec<(String, String, Value)> {
    let events = reply.events();
    let n = names(&events);
    assert_eq!(n[0], "message_start");
    assert_eq!(n[1], "ping");
    assert_eq!(n[n.len() - 2], "message_delta");
    assert_eq!(n[n.len() - 1], "message_stop");
    for e in &events {
        let v = e.json().unwrap();
        assert_eq!(
            v["type"].as_str(),
            e.event.as_deref(),
            "the data's type is the event's"
        );
    }
    let delta = events[n.len() - 2].json().unwrap();
    assert_eq!(delta["usage"]["input_tokens"], usage.input);
    assert_eq!(delta["usage"]["output_tokens"], usage.output);
    assert_eq!(delta["usage"]["cache_read_input_tokens"], usage.cache_read);
    assert_eq!(
        delta["usage"]["cache_creation_input_tokens"],
        usage.cache_write
    );
    let start = events[0].json().unwrap();
    assert_eq!(start["message"]["usage"]["output_tokens"], 0);
    let mut blocks = Vec::new();
    let body = &events[2..n.len() - 2];
    assert_eq!(body.len() % 3, 0);
    for (i, chunk) in body.chunks(3).enumerate() {
        assert_eq!(
            names(chunk),
            [
                "content_block_start",
                "content_block_delta",
                "content_block_stop"
            ]
        );
        let s = chunk[0].json().unwrap();
        let d = chunk[1].json().unwrap();
        assert_eq!(s["index"], i);
        assert_eq!(d["index"], i);
        match s["content_block"]["type"].as_str().unwrap() {
            "text" => blocks.push((
                "text".into(),
                d["delta"]["text"].as_str().unwrap().into(),
                Value::Null,
            )),
            "tool_use" => {
                assert_eq!(d["delta"]["type"], "input_json_delta");
                let input: Value =
                    serde_json::from_str(d["delta"]["partial_json"].as_str().unwrap()).unwrap();
                blocks.push((
                    "tool_use".into(),
                    s["content_block"]["name"].as_str().unwrap().into(),
                    input,
                ));
            }
            other => panic!("block type {other}"),
        }
    }
    blocks
}

fn turn_usage(script: &str, turn: usize) -> Usage {
    Script::parse(script).unwrap().turns[turn - 1].usage
}

fn check_anthropic(name: &str, shell_tool: &str) {
    let (replies, server) = replay(name, HELLO);
    for (r, reply) in &replies {
        match (r.kind.as_str(), r.turn) {
            ("main", Some(1)) => {
                assert_eq!(
                    r.query,
                    if name == "claude-code-hello" {
                        "beta=true"
                    } else {
                        ""
                    }
                );
                let blocks = anthropic_stream(reply, turn_usage(HELLO, 1));
                assert_eq!(blocks.len(), 1, "{blocks:?}");
                assert_eq!(blocks[0].1, shell_tool);
                assert_eq!(blocks[0].2["command"], "echo hi > hello.txt");
                let events = reply.events();
                let delta = events[events.len() - 2].json().unwrap();
                assert_eq!(delta["delta"]["stop_reason"], "tool_use");
            }
            ("main", Some(2)) => {
                let blocks = anthropic_stream(reply, turn_usage(HELLO, 2));
                assert_eq!(blocks, [("text".into(), "done".into(), Value::Null)]);
            }
            ("side", None) => {
                let blocks = anthropic_stream(reply, Usage::default());
                assert_eq!(blocks[0].1, "OK");
            }
            other => panic!("{name}: unexpected {other:?}"),
        }
    }
    let stats = server.stats();
    assert_eq!(stats.turns_served, 2);
    assert_eq!(stats.usage, Script::parse(HELLO).unwrap().total_usage());
}

#[test]
fn claude_code_requests() {
    check_anthropic("claude-code-hello", "Bash");
}

#[test]
fn copilot_requests() {
    check_anthropic("copilot-hello", "bash");
}

#[test]
fn opencode_requests() {
    // opencode's title request offers no tools: a side request, answered without a turn.
    let recorded = recorded("opencode-hello");
    assert_eq!(recorded[0].kind, "side");
    check_anthropic("opencode-hello", "bash");
}

#[test]
fn codex_requests() {
    let (replies, server) = replay("codex-hello", HELLO);
    for (r, reply) in &replies {
        let events = reply.events();
        let n = names(&events);
        for (i, e) in events.iter().enumerate() {
            let v = e.json().unwrap();
            assert_eq!(v["type"].as_str(), e.event.as_deref());
            assert_eq!(v["sequence_number"], i);
        }
        assert_eq!(n[..2], ["response.created", "response.in_progress"]);
        assert_eq!(n.last().unwrap(), "response.completed");
        let done = events.last().unwrap().json().unwrap();
        let usage = turn_usage(HELLO, r.turn.unwrap() as usize);
        assert_eq!(
            done["response"]["usage"]["input_tokens"],
            usage.prompt_total()
        );
        assert_eq!(
            done["response"]["usage"]["input_tokens_details"]["cached_tokens"],
            usage.cache_read
        );
        assert_eq!(done["response"]["usage"]["output_tokens"], usage.output);
        let items: Vec<Value> = events
            .iter()
            .filter(|e| e.event.as_deref() == Some("response.output_item.done"))
            .map(|e| e.json().unwrap()["item"].clone())
            .collect();
        assert_eq!(done["response"]["output"], json!(items));
        match r.turn {
            Some(1) => {
                assert_eq!(
                    n[2..n.len() - 1],
                    [
                        "response.output_item.added",
                        "response.function_call_arguments.delta",
                        "response.function_call_arguments.done",
                        "response.output_item.done"
                    ]
                );
                assert_eq!(items[0]["type"], "function_call");
                assert_eq!(items[0]["name"], "exec_command");
                let args: Value =
                    serde_json::from_str(items[0]["arguments"].as_str().unwrap()).unwrap();
                assert_eq!(args, json!({"cmd": "echo hi > hello.txt"}));
            }
            Some(2) => {
                // The second request carries the first call's output.
                let input = r.request["input"].as_array().unwrap();
                assert!(input.iter().any(|i| i["type"] == "function_call_output"));
                assert_eq!(
                    n[2..n.len() - 1],
                    [
                        "response.output_item.added",
                        "response.content_part.added",
                        "response.output_text.delta",
                        "response.output_text.done",
                        "response.content_part.done",
                        "response.output_item.done"
                    ]
                );
                assert_eq!(items[0]["content"][0]["text"], "done");
            }
            other => panic!("turn {other:?}"),
        }
    }
    assert_eq!(server.stats().turns_served, 2);
}

#[test]
fn gemini_requests() {
    let (replies, server) = replay("gemini-hello", HELLO);
    for (r, reply) in &replies {
        match r.kind.as_str() {
            "side" => {
                // The model router asks for JSON by schema: it gets an instance, and no usage.
                let v = reply.json();
                let text = v["candidates"][0]["content"]["parts"][0]["text"]
                    .as_str()
                    .unwrap();
                let answer: Value = serde_json::from_str(text).unwrap();
                assert!(answer["complexity_score"].as_i64().unwrap() >= 1);
                assert!(answer["complexity_reasoning"].is_string());
                assert_eq!(v["usageMetadata"]["totalTokenCount"], 0);
            }
            "main" => {
                assert_eq!(r.query, "alt=sse");
                let events = reply.events();
                assert_eq!(events.len(), 1);
                let v = events[0].json().unwrap();
                let usage = turn_usage(HELLO, r.turn.unwrap() as usize);
                assert_eq!(v["usageMetadata"]["promptTokenCount"], usage.prompt_total());
                assert_eq!(
                    v["usageMetadata"]["cachedContentTokenCount"],
                    usage.cache_read
                );
                assert_eq!(v["usageMetadata"]["candidatesTokenCount"], usage.output);
                let part = &v["candidates"][0]["content"]["parts"][0];
                if r.turn == Some(1) {
                    assert_eq!(part["functionCall"]["name"], "run_shell_command");
                    assert_eq!(
                        part["functionCall"]["args"]["command"],
                        "echo hi > hello.txt"
                    );
                } else {
                    assert_eq!(part["text"], "done");
                }
            }
            other => panic!("{other}"),
        }
    }
    assert_eq!(server.stats().turns_served, 2);
    assert_eq!(server.stats().side_requests, 1);
}

#[test]
fn aider_requests() {
    let (replies, server) = replay("aider-hello", HELLO_AIDER);
    assert_eq!(replies.len(), 1);
    let (r, reply) = &replies[0];
    assert!(r.request.get("tools").is_none(), "aider sends no tools");
    let streaming = r.request["stream"].as_bool().unwrap_or(false);
    let content = if streaming {
        let events = reply.events();
        assert_eq!(events.last().unwrap().data, "[DONE]");
        events
            .iter()
            .filter_map(|e| e.json())
            .filter_map(|v| {
                v["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(String::from)
            })
            .collect::<String>()
    } else {
        let v = reply.json();
        assert_eq!(v["usage"]["prompt_tokens"], 1120);
        assert_eq!(v["usage"]["completion_tokens"], 30);
        assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 1000);
        assert_eq!(v["choices"][0]["finish_reason"], "stop");
        v["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(content, "done\n\n```bash\necho hi > hello.txt\n```");
    assert_eq!(server.stats().turns_served, 1);
}

#[test]
fn chat_completions_stream_with_tools() {
    let server = MockModel::start(Script::parse(HELLO).unwrap(), "127.0.0.1:0").unwrap();
    let body = json!({
        "model": "m", "stream": true, "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}],
    });
    let reply = post(&server, "/v1/chat/completions", &body);
    let events = reply.events();
    assert!(events.iter().all(|e| e.event.is_none()));
    assert_eq!(events.last().unwrap().data, "[DONE]");
    let chunks: Vec<Value> = events.iter().filter_map(|e| e.json()).collect();
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let call = &chunks[1]["choices"][0]["delta"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "bash");
    assert_eq!(call["index"], 0);
    let args = chunks[2]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
        .as_str()
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(args).unwrap(),
        json!({"command": "echo hi > hello.txt"})
    );
    assert_eq!(chunks[3]["choices"][0]["finish_reason"], "tool_calls");
    let usage = &chunks[4]["usage"];
    assert_eq!(chunks[4]["choices"], json!([]));
    assert_eq!(usage["prompt_tokens"], 1170);
    assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], 1000);
    assert_eq!(usage["completion_tokens"], 30);
    // Non-streaming, the next turn.
    let mut body2 = body.clone();
    body2["stream"] = json!(false);
    let v = post(&server, "/v1/chat/completions", &body2).json();
    assert_eq!(v["choices"][0]["message"]["content"], "done");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(v["usage"]["prompt_tokens"], 1300);
}

#[test]
fn anthropic_non_streaming() {
    let server = MockModel::start(Script::parse(HELLO).unwrap(), "127.0.0.1:0").unwrap();
    let body = json!({
        "model": "claude-x", "max_tokens": 1000, "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"name": "Bash", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}],
    });
    let v = post(&server, "/v1/messages", &body).json();
    assert_eq!(v["type"], "message");
    assert_eq!(v["model"], "claude-x");
    assert_eq!(v["stop_reason"], "tool_use");
    assert_eq!(v["content"][0]["type"], "tool_use");
    assert_eq!(v["content"][0]["input"]["command"], "echo hi > hello.txt");
    assert_eq!(v["usage"]["cache_creation_input_tokens"], 50);
    // A byte-identical request is a retry: the same turn again, not the next one.
    let again = post(&server, "/v1/messages", &body).json();
    assert_eq!(
        again["content"][0]["input"]["command"],
        "echo hi > hello.txt"
    );
    assert_eq!(server.stats().replays, 1);
    assert_eq!(server.stats().turns_served, 1);
}

#[test]
fn side_routes_and_exhaustion() {
    let server = MockModel::start(
        Script::parse("[[turns]]\ntext = \"only\"\n").unwrap(),
        "127.0.0.1:0",
    )
    .unwrap();
    assert_eq!(request(&server, "GET", "/health", "").body, "ok");
    assert_eq!(
        request(&server, "GET", "/__mock", "").body,
        "proctor-mock-model"
    );
    let head = request(&server, "HEAD", "/", "");
    assert_eq!(head.status, 200);
    assert_eq!(
        request(&server, "GET", "/v1/models", "").json()["data"][0]["id"],
        "mock-model"
    );
    let n = post(
        &server,
        "/v1/messages/count_tokens",
        &json!({"messages": []}),
    )
    .json();
    assert!(n["input_tokens"].as_u64().unwrap() >= 1);
    assert_eq!(
        request(&server, "GET", "/v1beta/models", "").json()["models"][0]["name"],
        "models/mock-model"
    );
    assert_eq!(request(&server, "GET", "/nope", "").status, 404);
    assert_eq!(
        request(&server, "POST", "/v1/messages", "{not json").status,
        400
    );
    // A quota probe does not take the turn.
    let probe = json!({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "quota"}], "tools": [{"name": "Bash"}]});
    assert_eq!(
        post(&server, "/v1/messages", &probe).json()["content"][0]["text"],
        "OK"
    );
    let main = json!({"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "a"}], "tools": [{"name": "Bash"}]});
    assert_eq!(
        post(&server, "/v1/messages", &main).json()["content"][0]["text"],
        "only"
    );
    let main2 = json!({"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "b"}], "tools": [{"name": "Bash"}]});
    assert_eq!(
        post(&server, "/v1/messages", &main2).json()["content"][0]["text"],
        proctor_mock_model::EXHAUSTED_TEXT
    );
    let s = server.stats();
    assert_eq!(
        (
            s.main_requests,
            s.side_requests,
            s.turns_served,
            s.exhausted
        ),
        (2, 1, 1, 1)
    );
}

#[test]
fn keep_alive_and_chunked_bodies() {
    let server = MockModel::start(Script::parse(HELLO).unwrap(), "127.0.0.1:0").unwrap();
    let mut s = TcpStream::connect(server.addr()).unwrap();
    let body = json!({"model": "m", "input": "hi", "stream": false, "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object", "properties": {"command": {"type": "array", "items": {"type": "string"}}}}}]}).to_string();
    let (a, b) = body.split_at(10);
    write!(
        s,
        "POST /v1/responses HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
        a.len(),
        b.len()
    )
    .unwrap();
    write!(
        s,
        "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw);
    let second = text.rfind("HTTP/1.1 200").unwrap();
    let first = parse_reply(text[..second].as_bytes());
    let v = first.json();
    assert_eq!(v["output"][0]["name"], "shell");
    let args: Value = serde_json::from_str(v["output"][0]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(
        args["command"],
        json!(["bash", "-lc", "echo hi > hello.txt"])
    );
    assert!(text[second..].ends_with("ok"));
}

/// Reads one response (head and `Content-Length` body) from a kept-alive connection.
fn read_one(r: &mut impl std::io::BufRead) -> (String, String) {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        assert!(r.read_line(&mut line).unwrap() > 0, "EOF in a head: {head}");
        head.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .map_or(0, |v| v.parse().unwrap());
    let mut body = vec![0; len];
    r.read_exact(&mut body).unwrap();
    (head, String::from_utf8(body).unwrap())
}

#[test]
fn two_requests_on_one_connection_stay_open() {
    let server = MockModel::start(Script::parse(HELLO).unwrap(), "127.0.0.1:0").unwrap();
    let s = TcpStream::connect(server.addr()).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = std::io::BufReader::new(s);
    for path in ["/health", "/__mock"] {
        write!(w, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let (head, body) = read_one(&mut r);
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(head.contains("Connection: keep-alive\r\n"), "{head}");
        assert!(head.contains("Keep-Alive: timeout=300\r\n"), "{head}");
        assert!(head.contains("Cache-Control: no-cache\r\n"), "{head}");
        assert!(!body.is_empty());
    }
    assert_eq!(server.stats().requests, 2);
}

#[test]
fn expect_100_continue_is_answered_before_the_body() {
    let server = MockModel::start(Script::parse(HELLO).unwrap(), "127.0.0.1:0").unwrap();
    let s = TcpStream::connect(server.addr()).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = std::io::BufReader::new(s);
    let body = json!({"messages": [{"role": "user", "content": "count me"}]}).to_string();
    write!(
        w,
        "POST /v1/messages/count_tokens HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut r, &mut line).unwrap();
    assert_eq!(line, "HTTP/1.1 100 Continue\r\n");
    line.clear();
    std::io::BufRead::read_line(&mut r, &mut line).unwrap();
    assert_eq!(line, "\r\n");
    w.write_all(body.as_bytes()).unwrap();
    let (head, text) = read_one(&mut r);
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["input_tokens"], (body.len() / 4) as u64);
}

#[test]
fn an_oversized_body_is_refused_413_without_being_read() {
    let server = MockModel::start(Script::parse(HELLO).unwrap(), "127.0.0.1:0").unwrap();
    let mut s = TcpStream::connect(server.addr()).unwrap();
    // No body is sent: the server must answer from the declared length alone, and must not ask
    // for the body with `100 Continue`.
    write!(
        s,
        "POST /v1/messages HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
        64 * 1024 * 1024 + 1
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let reply = parse_reply(&raw);
    assert_eq!(reply.status, 413, "{}", String::from_utf8_lossy(&raw));
    assert_eq!(reply.json()["error"], "body too large");
    let text = String::from_utf8_lossy(&raw);
    assert!(!text.contains("100 Continue"), "{text}");
    assert!(text.contains("Connection: close\r\n"), "{text}");
    // The handler never saw it.
    assert_eq!(server.stats().requests, 0);
}

#[test]
fn malformed_and_oversized_heads_are_refused() {
    let server = MockModel::start(Script::parse(HELLO).unwrap(), "127.0.0.1:0").unwrap();
    let send = |raw: &[u8]| {
        let mut s = TcpStream::connect(server.addr()).unwrap();
        s.write_all(raw).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    };
    let bad = send(b"NOT HTTP AT ALL\r\n\r\n");
    assert!(bad.starts_with("HTTP/1.1 400 "), "{bad}");
    let big = format!(
        "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(70 * 1024)
    );
    let big = send(big.as_bytes());
    assert!(big.starts_with("HTTP/1.1 431 "), "{big}");
    assert_eq!(server.stats().requests, 0);
}

#[test]
fn http_1_0_closes_and_head_has_a_length_but_no_body() {
    let server = MockModel::start(Script::parse(HELLO).unwrap(), "127.0.0.1:0").unwrap();
    let mut s = TcpStream::connect(server.addr()).unwrap();
    s.write_all(b"HEAD /__mock HTTP/1.0\r\n\r\n").unwrap();
    // read_to_end returns: the server closed after the one response.
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw);
    assert!(text.contains("Connection: close\r\n"), "{text}");
    let reply = parse_reply_to(&raw, true);
    assert_eq!(reply.status, 200);
    assert!(text.contains(&format!(
        "Content-Length: {}\r\n",
        proctor_mock_model::GUARD_TEXT.len()
    )));
}

#[test]
fn stopping_closes_idle_connections() {
    let server = MockModel::start(Script::parse(HELLO).unwrap(), "127.0.0.1:0").unwrap();
    let s = TcpStream::connect(server.addr()).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = std::io::BufReader::new(s);
    w.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    assert_eq!(read_one(&mut r).1, "ok");
    r.get_ref()
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let addr = server.addr();
    server.stop();
    let mut rest = Vec::new();
    assert_eq!(
        r.read_to_end(&mut rest).unwrap(),
        0,
        "closed, not timed out"
    );
    assert!(TcpStream::connect(addr).is_err(), "no longer listening");
}
