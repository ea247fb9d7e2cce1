//! What proctor's ACP client prints while the agent works: each `session/update` as a transcript
//! line (message chunks joined, one line per message), each permission request with proctor's
//! answer, and the closing `answer` line; and the answer it keeps (the agent's last message).

use std::io::Write;

use serde_json::{json, Value};

use super::permission;
use super::rpc::{Connection, Incoming, RpcError, METHOD_NOT_FOUND};

/// Writes one transcript line. The transcript is the trial's captured stdout: if it cannot be
/// written there is nobody left to tell, so a failed write is dropped.
pub(super) fn write_event(out: &mut dyn Write, event: &Value) {
    let _ = writeln!(out, "{event}");
    let _ = out.flush();
}

/// What the client prints while the agent works, and the answer it keeps.
pub(super) struct Recorder<'a> {
    out: &'a mut dyn Write,
    allow: &'a [String],
    /// The agent message being streamed, not printed yet.
    message: String,
    /// The agent thought being streamed, not printed yet.
    thought: String,
    /// The text of the agent's last message (after its last tool call).
    answer: String,
    /// The `messageId` of the message being streamed, when the agent gives one (a chunk with
    /// another id starts another message).
    message_id: Option<String>,
    /// A tool call came after the answer's text: the next text starts a new answer.
    answer_done: bool,
    /// A session is loading: updates are replays of earlier turns.
    pub(super) replaying: bool,
    /// Updates replayed while the session loaded.
    pub(super) replayed: u64,
}

impl<'a> Recorder<'a> {
    pub(super) fn new(out: &'a mut dyn Write, allow: &'a [String]) -> Recorder<'a> {
        Recorder {
            out,
            allow,
            message: String::new(),
            thought: String::new(),
            answer: String::new(),
            message_id: None,
            answer_done: false,
            replaying: false,
            replayed: 0,
        }
    }

    pub(super) fn event(&mut self, event: &Value) {
        write_event(self.out, event);
    }

    /// Prints the streamed message and thought, if any.
    pub(super) fn flush(&mut self) {
        for (kind, text) in [
            ("agent_thought", std::mem::take(&mut self.thought)),
            ("agent_message", std::mem::take(&mut self.message)),
        ] {
            if !text.is_empty() {
                self.event(&json!({ "type": kind, "text": text }));
            }
        }
    }

    /// One message from the agent while a request waits.
    pub(super) fn handle<R: std::io::BufRead, W: Write>(
        &mut self,
        conn: &mut Connection<R, W>,
        message: Incoming,
    ) -> Result<(), RpcError> {
        match message {
            Incoming::Notification { method, params } if method == "session/update" => {
                self.update(params.get("update").cloned().unwrap_or(Value::Null));
                Ok(())
            }
            Incoming::Notification { .. } => Ok(()),
            Incoming::Request { id, method, params } if method == "session/request_permission" => {
                self.flush();
                let d = permission::decide(&params, self.allow);
                self.event(&json!({
                    "type": "permission",
                    "tool_call": params.get("toolCall"),
                    "granted": d.granted,
                    "option_id": d.option_id,
                    "command": d.command,
                    "reason": d.reason,
                }));
                conn.respond(&id, d.response())
            }
            Incoming::Request { id, method, .. } => conn.respond_error(
                &id,
                METHOD_NOT_FOUND,
                &format!("proctor's ACP client does not offer `{method}`"),
            ),
        }
    }

    /// One `session/update`.
    pub(super) fn update(&mut self, update: Value) {
        if self.replaying {
            self.replayed += 1;
            return;
        }
        let kind = update
            .get("sessionUpdate")
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_string();
        let text = update
            .pointer("/content/text")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match kind.as_str() {
            "agent_message_chunk" => {
                let id = update
                    .get("messageId")
                    .and_then(Value::as_str)
                    .map(String::from);
                let another = id != self.message_id;
                if !self.thought.is_empty() || another {
                    self.flush();
                }
                if self.answer_done || another {
                    self.answer.clear();
                    self.answer_done = false;
                }
                self.message_id = id;
                self.message.push_str(text);
                self.answer.push_str(text);
            }
            "agent_thought_chunk" => {
                if !self.message.is_empty() {
                    self.flush();
                }
                self.thought.push_str(text);
            }
            _ => {
                self.flush();
                if kind == "tool_call" {
                    self.answer_done = true;
                }
                let mut event = update;
                if let Some(o) = event.as_object_mut() {
                    o.remove("sessionUpdate");
                    o.insert("type".into(), Value::String(kind));
                }
                self.event(&event);
            }
        }
    }

    /// The closing `answer` line.
    pub(super) fn finish(&mut self, session_id: &str) {
        self.flush();
        let answer = self.answer.trim().to_string();
        self.event(&json!({ "type": "answer", "text": answer, "session_id": session_id }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(text: &str, id: Option<&str>) -> Value {
        let mut v = json!({ "sessionUpdate": "agent_message_chunk", "content": { "type": "text", "text": text } });
        if let Some(id) = id {
            v["messageId"] = json!(id);
        }
        v
    }

    #[test]
    fn the_answer_is_the_last_message_after_the_last_tool_call() {
        let mut out = Vec::new();
        let allow: Vec<String> = Vec::new();
        let mut rec = Recorder::new(&mut out, &allow);
        rec.update(chunk("Warning: no metadata. ", None));
        rec.update(chunk("Let me ", Some("m1")));
        rec.update(chunk("look.", Some("m1")));
        rec.update(json!({ "sessionUpdate": "tool_call", "toolCallId": "t", "title": "ls" }));
        rec.update(chunk("Note. ", Some("m2")));
        rec.update(chunk("Done", Some("m3")));
        rec.update(chunk(".", Some("m3")));
        rec.finish("s");
        let lines: Vec<Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let messages: Vec<&str> = lines
            .iter()
            .filter(|l| l["type"] == "agent_message")
            .map(|l| l["text"].as_str().unwrap())
            .collect();
        assert_eq!(
            messages,
            ["Warning: no metadata. ", "Let me look.", "Note. ", "Done."]
        );
        assert_eq!(lines[2]["type"], "tool_call");
        let answer = lines.last().unwrap();
        assert_eq!(
            (answer["text"].as_str(), answer["session_id"].as_str()),
            (Some("Done."), Some("s"))
        );
    }
}
