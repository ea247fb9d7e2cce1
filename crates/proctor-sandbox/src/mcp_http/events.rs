//! The events of a `text/event-stream` (server-sent events), read as they come.

/// The events of a `text/event-stream`, fed in pieces: each event's name (`message` unless
/// an `event:` line says otherwise) and its `data` (several `data:` lines joined with
/// newlines); events end at a blank line; `id`, `retry` and comments are skipped.
#[derive(Debug, Default)]
pub(super) struct SseLines {
    partial: Vec<u8>,
    event: Option<String>,
    data: Vec<String>,
}

/// One event of a stream: its name and data.
pub(super) type Event = (String, String);

impl SseLines {
    /// The events completed by `chunk`.
    pub(super) fn feed(&mut self, chunk: &[u8]) -> Vec<Event> {
        self.partial.extend_from_slice(chunk);
        let mut done = Vec::new();
        while let Some(end) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            let field = |name: &str| {
                line.strip_prefix(name)
                    .map(|rest| rest.strip_prefix(' ').unwrap_or(rest).to_string())
            };
            if line.is_empty() {
                let event = self.event.take().unwrap_or_else(|| "message".to_string());
                if !self.data.is_empty() {
                    done.push((event, std::mem::take(&mut self.data).join("\n")));
                }
            } else if let Some(data) = field("data:") {
                self.data.push(data);
            } else if let Some(event) = field("event:") {
                self.event = Some(event);
            }
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_read_across_chunks_with_their_names_and_data() {
        let mut sse = SseLines::default();
        assert!(sse
            .feed(b"event: endpoint\nid: 1\ndata: /messages?s=1")
            .is_empty());
        let got = sse.feed(b"\n\n: a comment\n\ndata: [1,\r\ndata: 2]\r\n\r\n");
        let want = [("endpoint", "/messages?s=1"), ("message", "[1,\n2]")];
        assert_eq!(got, want.map(|(e, d)| (e.to_string(), d.to_string())));
        assert!(
            sse.feed(b"retry: 5\n\n").is_empty(),
            "an event with no data is none"
        );
    }
}
