//! Server-sent events: writing them, and reading them back (for tests and for metering).
//!
//! Framing (WHATWG "server-sent events"): an event is `event: NAME` (optional) and one or more
//! `data: ...` lines, ended by a blank line. Lines end with `\n`, `\r\n` or `\r`.

use serde_json::Value;

/// One server-sent event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

impl SseEvent {
    /// The data parsed as JSON, if it is JSON.
    pub fn json(&self) -> Option<Value> {
        serde_json::from_str(&self.data).ok()
    }
}

/// Appends one event to `out`: `event: NAME` when named, then `data: JSON`, then a blank line.
pub fn write_event(out: &mut String, event: Option<&str>, data: &Value) {
    if let Some(name) = event {
        out.push_str("event: ");
        out.push_str(name);
        out.push('\n');
    }
    out.push_str("data: ");
    out.push_str(&data.to_string());
    out.push_str("\n\n");
}

/// Appends a data-only event with raw text (for `data: [DONE]`).
pub fn write_raw(out: &mut String, data: &str) {
    out.push_str("data: ");
    out.push_str(data);
    out.push_str("\n\n");
}

/// Parses a complete SSE stream into events; comments and unknown fields are skipped, an
/// unterminated last event is kept.
pub fn parse(text: &str) -> Vec<SseEvent> {
    let mut events = Vec::new();
    let mut event: Option<String> = None;
    let mut data: Vec<String> = Vec::new();
    let normalized = text.replace("\r\n", "\n").replace('\r', "\n");
    for line in normalized.split('\n') {
        if line.is_empty() {
            if !data.is_empty() || event.is_some() {
                events.push(SseEvent {
                    event: event.take(),
                    data: data.join("\n"),
                });
                data.clear();
            }
            continue;
        }
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => event = Some(value.to_string()),
            "data" => data.push(value.to_string()),
            _ => {}
        }
    }
    if !data.is_empty() || event.is_some() {
        events.push(SseEvent {
            event,
            data: data.join("\n"),
        });
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trip_and_crlf() {
        let mut s = String::new();
        write_event(&mut s, Some("message_start"), &json!({"a": 1}));
        write_raw(&mut s, "[DONE]");
        let e = parse(&s);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].event.as_deref(), Some("message_start"));
        assert_eq!(e[0].json(), Some(json!({"a": 1})));
        assert_eq!(e[1].data, "[DONE]");
        let e = parse(": ping\r\ndata: {\"x\":2}\r\n\r\ndata: a\ndata: b\n");
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].json(), Some(json!({"x": 2})));
        assert_eq!(e[1].data, "a\nb");
    }
}
