//! An incremental server-sent-events decoder: bytes in, in chunks of any size, the `data` of
//! each complete event out.

/// Decodes an SSE stream fed in arbitrary chunks. Lines end in `\n`, `\r\n` or `\r` (a `\r\n`
/// may be split across chunks); an empty line ends an event; `data:` lines are joined with `\n`;
/// comments and other fields are skipped.
#[derive(Debug, Default)]
pub struct SseDecoder {
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    after_cr: bool,
}

impl SseDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds the next chunk; `on_event` gets the data of each event the chunk completes.
    pub fn feed(&mut self, mut chunk: &[u8], on_event: &mut dyn FnMut(&[u8])) {
        if chunk.is_empty() {
            return;
        }
        if self.after_cr {
            self.after_cr = false;
            if let Some(rest) = chunk.strip_prefix(b"\n") {
                chunk = rest;
            }
        }
        while let Some(i) = chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.line.extend_from_slice(&chunk[..i]);
            self.end_line(on_event);
            let cr = chunk[i] == b'\r';
            chunk = &chunk[i + 1..];
            if cr {
                match chunk.first() {
                    Some(b'\n') => chunk = &chunk[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        self.line.extend_from_slice(chunk);
    }

    /// Ends the stream: an event left without its closing blank line is still given out.
    pub fn finish(&mut self, on_event: &mut dyn FnMut(&[u8])) {
        if !self.line.is_empty() {
            self.end_line(on_event);
        }
        self.dispatch(on_event);
    }

    fn end_line(&mut self, on_event: &mut dyn FnMut(&[u8])) {
        if self.line.is_empty() {
            self.dispatch(on_event);
            return;
        }
        if let Some(value) = self.line.strip_prefix(b"data") {
            let value = match value {
                [] => Some(&[][..]),
                [b':', b' ', rest @ ..] => Some(rest),
                [b':', rest @ ..] => Some(rest),
                _ => None,
            };
            if let Some(value) = value {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
        }
        self.line.clear();
    }

    fn dispatch(&mut self, on_event: &mut dyn FnMut(&[u8])) {
        if self.has_data {
            on_event(&self.data);
        }
        self.data.clear();
        self.has_data = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(chunks: &[&[u8]]) -> Vec<String> {
        let mut out = Vec::new();
        let mut d = SseDecoder::new();
        let mut push = |e: &[u8]| out.push(String::from_utf8_lossy(e).into_owned());
        for c in chunks {
            d.feed(c, &mut push);
        }
        d.finish(&mut push);
        out
    }

    #[test]
    fn events_are_split_on_blank_lines_with_any_line_ending() {
        let stream = b"event: a\ndata: one\n\n: comment\r\ndata:two\r\ndata: 2b\r\n\r\ndata: three\r\rdata: four";
        let want = ["one", "two\n2b", "three", "four"];
        assert_eq!(events(&[stream]), want);
        for i in 0..=stream.len() {
            for j in i..=stream.len() {
                let got = events(&[&stream[..i], &stream[i..j], &stream[j..]]);
                assert_eq!(got, want, "split at {i},{j}");
            }
        }
    }

    #[test]
    fn a_crlf_split_across_chunks_is_one_line_end() {
        assert_eq!(
            events(&[b"data: x\r", b"\n", b"\r", b"\ndata: y\n\n"]),
            ["x", "y"]
        );
    }

    #[test]
    fn events_without_data_are_skipped() {
        assert_eq!(events(&[b"event: ping\n\n\n\ndata\n\n"]), [""]);
        assert!(events(&[b"retry: 10\n\n"]).is_empty());
    }
}
